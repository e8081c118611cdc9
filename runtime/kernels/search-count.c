/* CPU kernels that search sorted values and count occurrences, as TensorFlow defines them:
 * UpperBound and LowerBound (searchsorted over the rows of a [B, N] sorted tensor for the rows of a
 * [B, M] values tensor; tensorflow/core/kernels/searchsorted_op.cc), Bincount and DenseBincount
 * (bincount_op.cc: counts, or sums of weights, of the non-negative integers below `size`; values
 * >= size are ignored, negative ones are INVALID_ARGUMENT; binary_output counts 1 per bin hit),
 * BoostedTreesBucketize (boosted_trees/quantile_ops.cc: the index of the first boundary >=
 * each value) and Bucketize (bucketize_op.cc, Keras' Discretization layer: the number of
 * boundaries <= each value). None has a gradient.
 */
#include <inttypes.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* ---- UpperBound, LowerBound ----------------------------------------------------------------- */

/* Element comparison as the element type compares, without converting (int64 beyond 2^53). */
#define SEARCH_TYPES(X)                                                                            \
    X(TFS_DTYPE_FLOAT, float) X(TFS_DTYPE_DOUBLE, double) X(TFS_DTYPE_INT8, int8_t)                \
    X(TFS_DTYPE_UINT8, uint8_t) X(TFS_DTYPE_INT16, int16_t) X(TFS_DTYPE_UINT16, uint16_t)          \
    X(TFS_DTYPE_INT32, int32_t) X(TFS_DTYPE_UINT32, uint32_t) X(TFS_DTYPE_INT64, int64_t)          \
    X(TFS_DTYPE_UINT64, uint64_t)

typedef struct search_job {
    const void    *sorted, *values;
    void          *out;
    enum tfs_dtype dt, out_dt;
    int64_t        n, m;   /* row lengths of sorted and values */
    bool           upper;
} search_job;

/* The first index in row[0, n) whose element is > v (upper) or >= v (lower): std::upper_bound
 * and std::lower_bound with operator<. */
#define SEARCH_FN(E, T)                                                                            \
    static int64_t search_##T(const T *row, int64_t n, T v, bool upper)                           \
    {                                                                                              \
        int64_t lo = 0, hi = n;                                                                    \
        while (lo < hi) {                                                                          \
            int64_t mid = lo + (hi - lo) / 2;                                                      \
            if (upper ? !(v < row[mid]) : row[mid] < v)                                            \
                lo = mid + 1;                                                                      \
            else                                                                                   \
                hi = mid;                                                                          \
        }                                                                                          \
        return lo;                                                                                 \
    }
SEARCH_TYPES(SEARCH_FN)

static void search_rows(void *arg, int64_t begin, int64_t end)
{
    const search_job *j = arg;
    for (int64_t b = begin; b < end; b++) {
        for (int64_t i = 0; i < j->m; i++) {
            int64_t r = 0;
            switch (j->dt) {
#define SEARCH_CASE(E, T)                                                                          \
            case E:                                                                                \
                r = search_##T((const T *)j->sorted + b * j->n, j->n,                             \
                               ((const T *)j->values)[b * j->m + i], j->upper);                   \
                break;
                SEARCH_TYPES(SEARCH_CASE)
#undef SEARCH_CASE
            default:
                break;
            }
            if (j->out_dt == TFS_DTYPE_INT32)
                ((int32_t *)j->out)[b * j->m + i] = (int32_t)r;
            else
                ((int64_t *)j->out)[b * j->m + i] = r;
        }
    }
}

static bool search_dtype(enum tfs_dtype dt)
{
    switch (dt) {
#define SEARCH_OK(E, T) case E:
        SEARCH_TYPES(SEARCH_OK)
#undef SEARCH_OK
        return true;
    default:
        return false;
    }
}

static enum tfs_code bound(tfs_kernel_ctx *k, bool upper, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, got %d", k->n_in);
    const tfs_tensor *sorted = k->in[0], *values = k->in[1];
    enum tfs_dtype out_dt = TFS_DTYPE_INT32;
    const tfs_attr_value *ot = tfs__attr(n, "out_type");
    if (ot && ot->kind == TFS_ATTR_TYPE)
        out_dt = ot->type;
    if (out_dt != TFS_DTYPE_INT32 && out_dt != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "out_type must be int32 or int64, got %s",
                             tfs_dtype_short_name(out_dt));
    if (sorted->dtype != values->dtype || !search_dtype(sorted->dtype))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "sorted_inputs (%s) and values (%s) must be of one real number type",
                             tfs_dtype_short_name(sorted->dtype),
                             tfs_dtype_short_name(values->dtype));
    enum tfs_code rc = tfs__arr_check_T(n, sorted, "T", "sorted_inputs", st);
    if (rc != TFS_OK)
        return rc;
    if (sorted->rank != 2 || values->rank != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "sorted_inputs and values must be 2-D, got ranks %d and %d",
                             sorted->rank, values->rank);
    if (sorted->dims[0] != values->dims[0])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Leading dim_size of both tensors must match.");
    if (out_dt == TFS_DTYPE_INT32 && sorted->dims[1] > INT32_MAX)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "sorted_inputs rows of %" PRId64 " elements overflow out_type int32",
                             sorted->dims[1]);
    tfs_tensor *out;
    if ((rc = tfs__arr_output(k, 0, out_dt, 2, values->dims, false, &out, st)) != TFS_OK)
        return rc;
    k->out[0] = out;
    search_job j = {sorted->data, values->data, out->data, sorted->dtype, out_dt,
                    sorted->dims[1], values->dims[1], upper};
    int64_t per = values->dims[1] > 0 ? values->dims[1] : 1;
    tfs__parallel_for(values->dims[0], per >= 4096 ? 1 : 4096 / per, search_rows, &j);
    return TFS_OK;
}

enum tfs_code tfs__k_upper_bound(tfs_kernel_ctx *k, tfs_status *st)
{
    return bound(k, true, st);
}

enum tfs_code tfs__k_lower_bound(tfs_kernel_ctx *k, tfs_status *st)
{
    return bound(k, false, st);
}

/* ---- Bincount, DenseBincount ---------------------------------------------------------------- */

static bool count_dtype(enum tfs_dtype dt)
{
    return dt == TFS_DTYPE_INT32 || dt == TFS_DTYPE_INT64 || dt == TFS_DTYPE_FLOAT ||
           dt == TFS_DTYPE_DOUBLE;
}

/* out[bin] += w (or = 1 when binary) for element i; bin is in range. */
static void count_add(void *out, enum tfs_dtype dt, int64_t bin, const tfs_tensor *w, int64_t i,
                      bool binary)
{
    bool one = binary || !w;
    switch (dt) {
    case TFS_DTYPE_INT32: {
        int32_t *o = out;
        o[bin] = binary ? 1 : o[bin] + (one ? 1 : ((const int32_t *)w->data)[i]);
        break;
    }
    case TFS_DTYPE_INT64: {
        int64_t *o = out;
        o[bin] = binary ? 1 : o[bin] + (one ? 1 : ((const int64_t *)w->data)[i]);
        break;
    }
    case TFS_DTYPE_FLOAT: {
        float *o = out;
        o[bin] = binary ? 1.0f : o[bin] + (one ? 1.0f : ((const float *)w->data)[i]);
        break;
    }
    default: {
        double *o = out;
        o[bin] = binary ? 1.0 : o[bin] + (one ? 1.0 : ((const double *)w->data)[i]);
        break;
    }
    }
}

typedef struct count_job {
    const tfs_tensor *arr, *w;
    void             *out;
    enum tfs_dtype    dt;
    int64_t           cols, size;
    bool              binary;
} count_job;

/* Rows [begin, end) of a 2-D count (or the single row of a 1-D one); values checked already. */
static void count_rows(void *arg, int64_t begin, int64_t end)
{
    const count_job *j = arg;
    size_t esz = tfs_dtype_size(j->dt);
    for (int64_t r = begin; r < end; r++) {
        void *row = (char *)j->out + (size_t)(r * j->size) * esz;
        for (int64_t c = 0; c < j->cols; c++) {
            int64_t i = r * j->cols + c, v = tfs__arr_int_at(j->arr, i);
            if (v < j->size)
                count_add(row, j->dt, v, j->w, i, j->binary);
        }
    }
}

/* Shared by both ops: arr holds int32/int64 values, counted into rows of `size` bins. */
static enum tfs_code bincount(tfs_kernel_ctx *k, const tfs_tensor *arr, int64_t size,
                              const tfs_tensor *w, enum tfs_dtype dt, bool binary, bool rows,
                              tfs_status *st)
{
    const tfs_node *n = k->node;
    if (size < 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "size (%" PRId64 ") must be non-negative",
                             size);
    for (int64_t i = 0; i < arr->nelem; i++)
        if (tfs__arr_int_at(arr, i) < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Input arr must be non-negative!");
    int64_t nrows = rows ? arr->dims[0] : 1, cols = rows ? arr->dims[1] : arr->nelem;
    int64_t dims[2] = {nrows, size};
    tfs_tensor *out;
    enum tfs_code rc = tfs__arr_output(k, 0, dt, rows ? 2 : 1, rows ? dims : &dims[1], true,
                                       &out, st);
    if (rc != TFS_OK)
        return rc;
    k->out[0] = out;
    count_job j = {arr, w && w->nelem ? w : NULL, out->data, dt, cols, size, binary};
    if (rows)
        tfs__parallel_for(nrows, cols >= 4096 ? 1 : 4096 / (cols ? cols : 1), count_rows, &j);
    else
        count_rows(&j, 0, 1);   /* one scatter over all of arr */
    return TFS_OK;
}

static enum tfs_code check_weights_dtype(const tfs_node *n, const tfs_tensor *w, tfs_status *st)
{
    if (!count_dtype(w->dtype))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "weights of dtype %s are not supported (int32, int64, float, double)",
                             tfs_dtype_short_name(w->dtype));
    return tfs__arr_check_T(n, w, "T", "weights", st);
}

/* Bincount(arr: int32, size: int32 scalar, weights: T) -> [size] T. */
enum tfs_code tfs__k_bincount(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 3)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, got %d", k->n_in);
    const tfs_tensor *arr = k->in[0], *size = k->in[1], *w = k->in[2];
    if (arr->dtype != TFS_DTYPE_INT32 || size->dtype != TFS_DTYPE_INT32)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "arr and size must be int32");
    if (size->rank != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Shape must be rank 0 but is rank %d",
                             size->rank);
    enum tfs_code rc = check_weights_dtype(n, w, st);
    if (rc != TFS_OK)
        return rc;
    if (w->nelem && w->nelem != arr->nelem)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Input indices and weights must have the same size.");
    return bincount(k, arr, *(const int32_t *)size->data, w, w->dtype, false, false, st);
}

/* DenseBincount(input: Tidx [N] or [B, N], size: Tidx scalar, weights: T) attr binary_output. */
enum tfs_code tfs__k_dense_bincount(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    char a[128], b[128];
    if (k->n_in != 3)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, got %d", k->n_in);
    const tfs_tensor *in = k->in[0], *size = k->in[1], *w = k->in[2];
    bool binary = false;
    enum tfs_code rc = tfs__nn_attr_bool(n, "binary_output", false, &binary, st);
    if (rc == TFS_OK)
        rc = check_weights_dtype(n, w, st);
    if (rc != TFS_OK)
        return rc;
    if ((in->dtype != TFS_DTYPE_INT32 && in->dtype != TFS_DTYPE_INT64) ||
        size->dtype != in->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input and size must both be int32 or both int64, got %s and %s",
                             tfs_dtype_short_name(in->dtype), tfs_dtype_short_name(size->dtype));
    if ((rc = tfs__arr_check_T(n, in, "Tidx", "input", st)) != TFS_OK)
        return rc;
    if (in->rank > 2 || in->rank < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Shape must be at most rank 2 but is rank %d (and at least 1)",
                             in->rank);
    if (size->rank != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Shape must be rank 0 but is rank %d",
                             size->rank);
    if (w->nelem && !tfs_shape_equal(w->rank, w->dims, in->rank, in->dims))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "`weights` must be the same shape as `arr` or a length-0 `Tensor`, "
                             "got %s and %s", tfs_shape_str(w->rank, w->dims, a, sizeof a),
                             tfs_shape_str(in->rank, in->dims, b, sizeof b));
    return bincount(k, in, tfs__arr_int_at(size, 0), w, w->dtype, binary, in->rank == 2, st);
}

/* ---- BoostedTreesBucketize(float_values[num_features], bucket_boundaries[num_features]) ------
 * -> buckets[num_features]: per value, the index of the first boundary >= it (std::lower_bound),
 * the last index when every boundary is smaller, 0 when there are no boundaries. */

int tfs__nout_num_features(const tfs_node *n)
{
    const tfs_attr_value *v = tfs__attr(n, "num_features");
    return v && v->kind == TFS_ATTR_I && v->i >= 0 && v->i <= 100000 ? (int)v->i : -1;
}

enum tfs_code tfs__k_boosted_trees_bucketize(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    int64_t nf;
    enum tfs_code rc = tfs__attr_int(n, "num_features", &nf, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 2 * nf || k->n_out != nf)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "expects %" PRId64 " inputs and %" PRId64 " outputs (num_features "
                             "%" PRId64 "), got %d and %d", 2 * nf, nf, nf, k->n_in, k->n_out);
    for (int64_t f = 0; f < nf; f++) {
        const tfs_tensor *v = k->in[f], *b = k->in[nf + f];
        if (v->dtype != TFS_DTYPE_FLOAT || b->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "feature %" PRId64 ": float_values and bucket_boundaries must be "
                                 "float", f);
        if (b->rank != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Buckets should be flat vectors.");
        if (v->rank < 1 || v->nelem != v->dims[0])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "feature %" PRId64 ": float_values must be [N] or [N, 1]", f);
    }
    for (int64_t f = 0; f < nf; f++) {
        const tfs_tensor *v = k->in[f], *b = k->in[nf + f];
        tfs_tensor *out;
        if ((rc = tfs__arr_output(k, (int)f, TFS_DTYPE_INT32, 1, v->dims, false, &out, st)) !=
            TFS_OK)
            return rc;   /* the session releases outputs already stored */
        k->out[f] = out;
        const float *x = v->data, *bd = b->data;
        int32_t *o = out->data;
        for (int64_t i = 0; i < v->nelem; i++) {
            int64_t idx = b->nelem ? search_float(bd, b->nelem, x[i], false) : 0;
            o[i] = (int32_t)(idx == b->nelem && idx > 0 ? idx - 1 : idx);
        }
    }
    return TFS_OK;
}

/* ---- Bucketize(input: T) -> int32, attr boundaries: list(float) sorted -----------------------
 * Each value's bucket is std::upper_bound over the float boundaries: the count of boundaries <=
 * it, so a value equal to a boundary goes to the bucket above and NaN to the last. The comparison
 * is value < boundary in C's (and C++'s) usual conversions, as TensorFlow's kernel makes it:
 * int32 and int64 values become float, float boundaries become double for double values. */

#define BUCKETIZE(T)                                                                               \
    do {                                                                                           \
        const T *x_ = in->data;                                                                    \
        for (int64_t i = 0; i < in->nelem; i++) {                                                  \
            int64_t lo = 0, hi = nb;                                                               \
            while (lo < hi) {                                                                      \
                int64_t mid = lo + (hi - lo) / 2;                                                  \
                if (x_[i] < bd[mid])                                                               \
                    hi = mid;                                                                      \
                else                                                                               \
                    lo = mid + 1;                                                                  \
            }                                                                                      \
            o[i] = (int32_t)lo;                                                                    \
        }                                                                                          \
    } while (0)

enum tfs_code tfs__k_bucketize(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    const tfs_attr_list *l = NULL;
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "input", st);
    if (rc == TFS_OK)
        rc = tfs__attr_list(n, "boundaries", TFS_ATTR_F, &l, st);
    if (rc != TFS_OK)
        return rc;
    if (in->dtype != TFS_DTYPE_INT32 && in->dtype != TFS_DTYPE_INT64 &&
        in->dtype != TFS_DTYPE_FLOAT && in->dtype != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "T must be int32, int64, float or double, got %s",
                             tfs_dtype_short_name(in->dtype));
    const float *bd = l->n ? l->f : NULL;
    int64_t nb = l->n;
    for (int64_t i = 1; i < nb; i++)
        if (bd[i] < bd[i - 1])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Expected sorted boundaries");
    tfs_tensor *out;
    if ((rc = tfs__arr_output(k, 0, TFS_DTYPE_INT32, in->rank, in->dims, false, &out, st)) !=
        TFS_OK)
        return rc;
    int32_t *o = out->data;
    switch (in->dtype) {
    case TFS_DTYPE_INT32:  BUCKETIZE(int32_t); break;
    case TFS_DTYPE_INT64:  BUCKETIZE(int64_t); break;
    case TFS_DTYPE_FLOAT:  BUCKETIZE(float); break;
    default:               BUCKETIZE(double); break;
    }
    k->out[0] = out;
    return TFS_OK;
}
