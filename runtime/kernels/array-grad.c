/* CPU kernels of the index and shape ops that TensorFlow's gradient graphs use:
 * BroadcastGradientArgs (which axes a broadcast binary op's gradients sum over), UnsortedSegmentSum
 * (the gradient of gathers), InvertPermutation (of Transpose) and DynamicStitch (of reductions and
 * of DynamicPartition).
 */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* ---- BroadcastGradientArgs ------------------------------------------------------------------ */

static enum tfs_code write_axes(const tfs_node *n, enum tfs_dtype dt, const int64_t *axes,
                                int count, tfs_tensor **out, tfs_status *st)
{
    int64_t len = count;
    enum tfs_code rc = tfs__arr_new_like(n, dt, 1, &len, out, st);
    if (rc != TFS_OK)
        return rc;
    for (int i = 0; i < count; i++) {
        if (dt == TFS_DTYPE_INT32)
            ((int32_t *)(*out)->data)[i] = (int32_t)axes[i];
        else
            ((int64_t *)(*out)->data)[i] = axes[i];
    }
    return TFS_OK;
}

/* "[2,3]" from an int vector tensor, into buf. */
static const char *vector_str(const tfs_tensor *t, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < t->nelem && used + 24 < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "",
                                 (long long)tfs__arr_int_at(t, i));
    return buf;
}

/* BroadcastGradientArgs(s0, s1) -> (r0, r1): for shapes s0 and s1 broadcast together, the output
 * axes along which the gradient of each input must be summed. As TensorFlow's BCast: none when
 * the shapes are equal; otherwise an axis where an input's dimension is 1 (or missing) while the
 * output's is not belongs to that input, and an axis where every dimension is 1 to both. */
enum tfs_code tfs__k_broadcast_gradient_args(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, got %d", k->n_in);
    const tfs_tensor *s[2] = {k->in[0], k->in[1]};
    char a[256], b[256];
    enum tfs_code rc;
    for (int i = 0; i < 2; i++) {
        if (s[i]->dtype != TFS_DTYPE_INT32 && s[i]->dtype != TFS_DTYPE_INT64)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "s%d must be int32 or int64, got %s",
                                 i, tfs_dtype_short_name(s[i]->dtype));
        if (s[i]->rank != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "In[%d] must be a vector. %s", i,
                                 tfs_shape_str(s[i]->rank, s[i]->dims, a, sizeof a));
        if ((rc = tfs__arr_check_T(n, s[i], "T", i ? "s1" : "s0", st)) != TFS_OK)
            return rc;
    }
    if (s[0]->dtype != s[1]->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "s0 is %s but s1 is %s",
                             tfs_dtype_short_name(s[0]->dtype), tfs_dtype_short_name(s[1]->dtype));
    int64_t n0 = s[0]->nelem, n1 = s[1]->nelem, rank = n0 > n1 ? n0 : n1;
    if (rank > INT32_MAX / 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "shapes of %lld dimensions",
                             (long long)rank);
    int64_t *r[2] = {tfs_malloc(((size_t)rank + 1) * sizeof(int64_t)),
                     tfs_malloc(((size_t)rank + 1) * sizeof(int64_t))};
    int count[2] = {0, 0};
    if (!r[0] || !r[1]) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    bool equal = n0 == n1;
    for (int64_t i = 0; equal && i < n0; i++)
        equal = tfs__arr_int_at(s[0], i) == tfs__arr_int_at(s[1], i);
    for (int64_t axis = 0; !equal && axis < rank; axis++) {
        /* Dimensions aligned at the right; a missing leading dimension counts as 1. */
        int64_t d0 = axis >= rank - n0 ? tfs__arr_int_at(s[0], axis - (rank - n0)) : 1;
        int64_t d1 = axis >= rank - n1 ? tfs__arr_int_at(s[1], axis - (rank - n1)) : 1;
        if (d0 != 1 && d1 != 1 && d0 != d1) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Incompatible shapes: [%s] vs. [%s]",
                               vector_str(s[0], a, sizeof a), vector_str(s[1], b, sizeof b));
            goto done;
        }
        if (d0 == 1)
            r[0][count[0]++] = axis;
        if (d1 == 1)
            r[1][count[1]++] = axis;
    }
    rc = write_axes(n, s[0]->dtype, r[0], count[0], &k->out[0], st);
    if (rc == TFS_OK)
        rc = write_axes(n, s[0]->dtype, r[1], count[1], &k->out[1], st);
done:
    tfs_free(r[0]);
    tfs_free(r[1]);
    return rc;
}

/* ---- UnsortedSegmentSum --------------------------------------------------------------------- */

/* out[j] += data[i] over `inner` elements, for the numeric dtypes the runtime computes on. */
static bool add_row(enum tfs_dtype dt, void *out, int64_t j, const void *data, int64_t i,
                    int64_t inner)
{
#define ADD_ROW(T, UT)                                                                             \
    do {                                                                                           \
        T *o = (T *)out + j * inner;                                                               \
        const T *d = (const T *)data + i * inner;                                                  \
        for (int64_t e = 0; e < inner; e++)                                                        \
            o[e] = (T)((UT)o[e] + (UT)d[e]);                                                       \
    } while (0)
    switch (dt) {
    case TFS_DTYPE_FLOAT:  ADD_ROW(float, float); return true;
    case TFS_DTYPE_DOUBLE: ADD_ROW(double, double); return true;
    case TFS_DTYPE_INT32:  ADD_ROW(int32_t, uint32_t); return true;   /* wraps, without UB */
    case TFS_DTYPE_INT64:  ADD_ROW(int64_t, uint64_t); return true;
    default:               return false;
    }
#undef ADD_ROW
}

/* UnsortedSegmentSum(data, segment_ids, num_segments) -> output[num_segments] +
 * data.shape[rank(segment_ids):], output[j] = sum of the data slices whose id is j (zero for none).
 * Negative ids are dropped, as TensorFlow's CPU kernel does; ids >= num_segments are an error. */
enum tfs_code tfs__k_unsorted_segment_sum(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 3)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, got %d", k->n_in);
    const tfs_tensor *data = k->in[0], *ids = k->in[1], *num = k->in[2];
    char a[128], b[128];
    enum tfs_code rc;
    if ((rc = tfs__arr_check_T(n, data, "T", "data", st)) != TFS_OK ||
        (rc = tfs__arr_check_T(n, ids, "Tindices", "segment_ids", st)) != TFS_OK ||
        (rc = tfs__arr_check_T(n, num, "Tnumsegments", "num_segments", st)) != TFS_OK)
        return rc;
    if (ids->dtype != TFS_DTYPE_INT32 && ids->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "segment_ids must be int32 or int64, "
                             "got %s", tfs_dtype_short_name(ids->dtype));
    if ((num->dtype != TFS_DTYPE_INT32 && num->dtype != TFS_DTYPE_INT64) || num->rank != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "num_segments should be an int32 or int64 scalar, not %s %s",
                             tfs_dtype_short_name(num->dtype),
                             tfs_shape_str(num->rank, num->dims, a, sizeof a));
    bool prefix = ids->rank <= data->rank;
    for (int i = 0; prefix && i < ids->rank; i++)
        prefix = ids->dims[i] == data->dims[i];
    if (!prefix)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "data.shape = %s does not start with segment_ids.shape = %s",
                             tfs_shape_str(data->rank, data->dims, a, sizeof a),
                             tfs_shape_str(ids->rank, ids->dims, b, sizeof b));
    int64_t segments = tfs__arr_int_at(num, 0);
    if (segments < 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Input num_segments == %lld must not be negative.",
                             (long long)segments);
    if (data->rank - ids->rank + 1 > TFS_MAX_RANK)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "output rank exceeds %d", TFS_MAX_RANK);
    int64_t dims[TFS_MAX_RANK] = {segments};
    int out_rank = 1;
    int64_t inner = 1;
    for (int i = ids->rank; i < data->rank; i++) {
        dims[out_rank++] = data->dims[i];
        inner *= data->dims[i];
    }
    if ((rc = tfs__arr_new_like(n, data->dtype, out_rank, dims, &k->out[0], st)) != TFS_OK)
        return rc;
    tfs_tensor *out = k->out[0];
    for (int64_t i = 0; i < ids->nelem; i++) {
        int64_t j = tfs__arr_int_at(ids, i);
        if (j < 0)
            continue;
        if (j >= segments)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "segment_ids[%lld] = %lld is out of range [0, %lld)",
                                 (long long)i, (long long)j, (long long)segments);
        if (!add_row(data->dtype, out->data, j, data->data, i, inner))
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "data of dtype %s is not supported",
                                 tfs_dtype_short_name(data->dtype));
    }
    return TFS_OK;   /* on errors above the session releases out */
}

/* ---- InvertPermutation ---------------------------------------------------------------------- */

/* InvertPermutation(x) -> y with y[x[i]] = i; x must be a permutation of 0 .. n-1. */
enum tfs_code tfs__k_invert_permutation(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *x = k->in[0];
    enum tfs_code rc;
    if (k->n_in != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 1 input, got %d", k->n_in);
    if ((rc = tfs__arr_check_T(n, x, "T", "x", st)) != TFS_OK)
        return rc;
    if (x->dtype != TFS_DTYPE_INT32 && x->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "x must be int32 or int64, got %s",
                             tfs_dtype_short_name(x->dtype));
    if (x->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "invert_permutation expects a 1D vector.");
    int64_t len = x->nelem;
    if (len > INT32_MAX)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "permutation of nonnegative int32s must have <= int32 max elements");
    if ((rc = tfs__arr_new_like(n, x->dtype, 1, &len, &k->out[0], st)) != TFS_OK)
        return rc;
    tfs_tensor *y = k->out[0];
    for (int64_t i = 0; i < len; i++) {   /* mark every slot unset */
        if (y->dtype == TFS_DTYPE_INT32)
            ((int32_t *)y->data)[i] = -1;
        else
            ((int64_t *)y->data)[i] = -1;
    }
    for (int64_t i = 0; i < len; i++) {
        int64_t d = tfs__arr_int_at(x, i);
        if (d < 0 || d >= len)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%lld is not between 0 and %lld",
                                 (long long)d, (long long)len);
        if (tfs__arr_int_at(y, d) != -1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%lld is duplicated in the input.",
                                 (long long)d);
        if (y->dtype == TFS_DTYPE_INT32)
            ((int32_t *)y->data)[d] = (int32_t)i;
        else
            ((int64_t *)y->data)[d] = i;
    }
    return TFS_OK;
}

/* ---- DynamicStitch -------------------------------------------------------------------------- */

/* Whether data's shape is indices' shape followed by the same trailing dims as data0's. */
static bool same_extra_shape(const tfs_tensor *data0, const tfs_tensor *idx0,
                             const tfs_tensor *data, const tfs_tensor *idx)
{
    int extra0 = data0->rank - idx0->rank, extra = data->rank - idx->rank;
    if (extra0 != extra)
        return false;
    for (int i = 0; i < extra; i++)
        if (data0->dims[idx0->rank + i] != data->dims[idx->rank + i])
            return false;
    return true;
}

/* DynamicStitch(indices[N] int32, data[N] T) -> merged with merged[indices[m][i]] = data[m][i]
 * (slices of data[m] after indices[m]'s dims); later inputs win where indices repeat, rows no
 * index names are zero. */
enum tfs_code tfs__k_dynamic_stitch(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    int64_t N = k->n_in / 2;
    enum tfs_code rc;
    if (tfs__attr(n, "N") && (rc = tfs__attr_int(n, "N", &N, st)) != TFS_OK)
        return rc;
    if (N < 1 || k->n_in != 2 * N)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "expects N >= 1 indices and N data inputs; N = %lld, %d inputs",
                             (long long)N, k->n_in);
    tfs_tensor *const *indices = k->in, *const *data = k->in + N;
    char a[128], b[128];
    int64_t max_index = -1;
    for (int m = 0; m < N; m++) {
        if (indices[m]->dtype != TFS_DTYPE_INT32)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "indices[%d] must be int32, got %s",
                                 m, tfs_dtype_short_name(indices[m]->dtype));
        if ((rc = tfs__arr_check_T(n, data[m], "T", "data", st)) != TFS_OK)
            return rc;
        if (data[m]->dtype != data[0]->dtype)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "data[%d] is %s but data[0] is %s",
                                 m, tfs_dtype_short_name(data[m]->dtype),
                                 tfs_dtype_short_name(data[0]->dtype));
        bool prefix = indices[m]->rank <= data[m]->rank;
        for (int i = 0; prefix && i < indices[m]->rank; i++)
            prefix = indices[m]->dims[i] == data[m]->dims[i];
        if (!prefix)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "data[%d].shape = %s does not start with indices[%d].shape = %s",
                                 m, tfs_shape_str(data[m]->rank, data[m]->dims, a, sizeof a), m,
                                 tfs_shape_str(indices[m]->rank, indices[m]->dims, b, sizeof b));
        if (!same_extra_shape(data[0], indices[0], data[m], indices[m]))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Need data[0].shape[%d:] = data[%d].shape[%d:], got "
                                 "data[0].shape = %s, data[%d].shape = %s", indices[0]->rank, m,
                                 indices[m]->rank,
                                 tfs_shape_str(data[0]->rank, data[0]->dims, a, sizeof a), m,
                                 tfs_shape_str(data[m]->rank, data[m]->dims, b, sizeof b));
        const int32_t *idx = indices[m]->data;
        for (int64_t i = 0; i < indices[m]->nelem; i++) {
            if (idx[i] < 0)
                return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                     "indices[%d][%lld] = %d is out of range", m, (long long)i,
                                     idx[i]);
            if (idx[i] > max_index)
                max_index = idx[i];
        }
    }
    const tfs_tensor *d0 = data[0];
    int extra = d0->rank - indices[0]->rank;
    if (extra + 1 > TFS_MAX_RANK)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "output rank exceeds %d", TFS_MAX_RANK);
    int64_t dims[TFS_MAX_RANK] = {max_index + 1};
    int64_t inner = 1;
    for (int i = 0; i < extra; i++) {
        dims[1 + i] = d0->dims[indices[0]->rank + i];
        inner *= dims[1 + i];
    }
    if ((rc = tfs__arr_new_like(n, d0->dtype, 1 + extra, dims, &k->out[0], st)) != TFS_OK)
        return rc;
    for (int m = 0; m < N; m++) {
        const int32_t *idx = indices[m]->data;
        for (int64_t i = 0; i < indices[m]->nelem; i++)
            if ((rc = tfs__arr_copy(k->out[0], idx[i] * inner, data[m], i * inner, inner, st)) !=
                TFS_OK)
                return rc;
    }
    return TFS_OK;
}
