/* CPU kernels of the sparse feature-column ops, as TensorFlow defines them: SparseReshape
 * (reshape_util.cc), SparseFillEmptyRows (sparse_fill_empty_rows_op.cc) and SparseSegmentSum,
 * SparseSegmentMean, SparseSegmentSqrtN and their *WithNumSegments forms
 * (segment_reduction_ops_impl.h). None has a gradient.
 *
 * SparseSegment*: segment_ids must be sorted; output rows = last id + 1, or num_segments (a 4th
 * input, int32 or int64 scalar) for *WithNumSegments, where every id must be below it; rows no
 * id names are 0.
 * The sums are formed in TF's order so float results match bit for bit: a segment of n rows
 * starts with its first n % 8 rows (8 or 9 when that is 0 or 1 and n > 1) summed left to right,
 * then adds each further group of 8 as one left-to-right partial sum; Mean and SqrtN multiply by
 * 1/n or 1/sqrt(n) for n < 10 and divide by n or sqrt(n) from 10 on.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "runtime/runtime-impl.h"

int tfs__nout_three(const tfs_node *n)
{
    (void)n;
    return 3;
}

int tfs__nout_four(const tfs_node *n)
{
    (void)n;
    return 4;
}

static enum tfs_code need_int64(const tfs_node *n, const tfs_tensor *t, const char *what,
                                int rank, tfs_status *st)
{
    char buf[128];
    if (t->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be int64, got %s", what,
                             tfs_dtype_short_name(t->dtype));
    if (t->rank != rank)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s should be a %s but received shape %s",
                             what, rank == 1 ? "vector" : "matrix",
                             tfs_shape_str(t->rank, t->dims, buf, sizeof buf));
    return TFS_OK;
}

/* ---- SparseReshape(input_indices, input_shape, new_shape) -> (output_indices, output_shape) -- */

enum tfs_code tfs__k_sparse_reshape(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 3 || k->n_out != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs and 2 outputs");
    const tfs_tensor *ind = k->in[0], *ish = k->in[1], *tsh = k->in[2];
    enum tfs_code rc;
    if ((rc = need_int64(n, ind, "Input indices", 2, st)) != TFS_OK ||
        (rc = need_int64(n, ish, "Input shape", 1, st)) != TFS_OK ||
        (rc = need_int64(n, tsh, "Target shape", 1, st)) != TFS_OK)
        return rc;
    int64_t nnz = ind->dims[0], in_rank = ish->dims[0], out_rank = tsh->dims[0];
    if (ind->dims[1] != in_rank)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Input tensor rank (%" PRId64 ") and the rank of its indices (%"
                             PRId64 ") must match", in_rank, ind->dims[1]);
    const int64_t *in_shape = ish->data, *target = tsh->data, *idx = ind->data;
    int64_t dense = 1;
    for (int64_t d = 0; d < in_rank; d++) {
        if (in_shape[d] < 0 || (in_shape[d] && dense > INT64_MAX / in_shape[d]))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "input_shape has a negative or too large dimension");
        dense *= in_shape[d];
    }
    tfs_tensor *oshape = NULL, *oind = NULL;
    if ((rc = tfs__arr_new_like(n, TFS_DTYPE_INT64, 1, &out_rank, &oshape, st)) != TFS_OK)
        return rc;
    int64_t *os = oshape->data, product = 1, unknown = -1;
    for (int64_t d = 0; d < out_rank; d++) {
        if (target[d] == -1) {
            if (unknown != -1) {
                rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                   "only one output dimension may be -1, not both %" PRId64
                                   " and %" PRId64, unknown, d);
                goto fail;
            }
            unknown = d;
            continue;
        }
        if (target[d] < 0) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "size %" PRId64 " must be non-negative, not %" PRId64, d,
                               target[d]);
            goto fail;
        }
        if (target[d] && product > INT64_MAX / target[d]) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "new_shape is too large");
            goto fail;
        }
        product *= target[d];
        os[d] = target[d];
    }
    if (unknown != -1) {
        if (product <= 0) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "reshape cannot infer the missing input size for an empty tensor "
                               "unless all specified input sizes are non-zero");
            goto fail;
        }
        int64_t missing = dense / product;
        if (missing * product != dense) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "Input to reshape is a SparseTensor with %" PRId64 " dense values, "
                               "but the requested shape requires a multiple of %" PRId64,
                               dense, product);
            goto fail;
        }
        os[unknown] = missing;
        product *= missing;
    }
    if (product != dense) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Input to reshape is a tensor with %" PRId64 " dense values, but the "
                           "requested shape has %" PRId64, dense, product);
        goto fail;
    }
    int64_t odims[2] = {nnz, out_rank};
    if ((rc = tfs__arr_new_like(n, TFS_DTYPE_INT64, 2, odims, &oind, st)) != TFS_OK)
        goto fail;
    int64_t *oi = oind->data;
    for (int64_t i = 0; i < nnz; i++) {
        /* The linear position in the input's dense shape, then its place in the output's. An
         * index outside input_shape would land anywhere: refused (TF does not check). */
        int64_t lin = 0;
        for (int64_t d = 0; d < in_rank; d++) {
            int64_t v = idx[i * in_rank + d];
            if (v < 0 || v >= in_shape[d]) {
                rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                   "input_indices[%" PRId64 ", %" PRId64 "] = %" PRId64
                                   " is out of bounds [0, %" PRId64 ")", i, d, v, in_shape[d]);
                goto fail;
            }
            lin = lin * in_shape[d] + v;
        }
        for (int64_t d = out_rank - 1; d >= 0; d--) {
            oi[i * out_rank + d] = os[d] ? lin % os[d] : 0;
            lin = os[d] ? lin / os[d] : 0;
        }
    }
    k->out[0] = oind;
    k->out[1] = oshape;
    return TFS_OK;
fail:
    tfs_tensor_unref(oshape);
    tfs_tensor_unref(oind);
    return rc;
}

/* ---- SparseFillEmptyRows(indices, values, dense_shape, default_value) ------------------------
 *   -> (output_indices, output_values, empty_row_indicator, reverse_index_map) */

enum tfs_code tfs__k_sparse_fill_empty_rows(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    char buf[128];
    if (k->n_in != 4 || k->n_out != 4)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 4 inputs and 4 outputs");
    const tfs_tensor *ind = k->in[0], *vals = k->in[1], *dshape = k->in[2], *dflt = k->in[3];
    enum tfs_code rc;
    if ((rc = need_int64(n, ind, "indices", 2, st)) != TFS_OK ||
        (rc = need_int64(n, dshape, "dense_shape", 1, st)) != TFS_OK)
        return rc;
    if (vals->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "values must be a vector, saw shape: %s",
                             tfs_shape_str(vals->rank, vals->dims, buf, sizeof buf));
    if (dflt->rank != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "default_value must be a scalar, saw shape: %s",
                             tfs_shape_str(dflt->rank, dflt->dims, buf, sizeof buf));
    if (dflt->dtype != vals->dtype || tfs_dtype_size(vals->dtype) == 0 ||
        vals->dtype == TFS_DTYPE_RESOURCE)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "values (%s) and default_value (%s) must have one supported dtype",
                             tfs_dtype_short_name(vals->dtype), tfs_dtype_short_name(dflt->dtype));
    if ((rc = tfs__arr_check_T(n, vals, "T", "values", st)) != TFS_OK)
        return rc;
    int64_t N = ind->dims[0], rank = ind->dims[1];
    if (vals->dims[0] != N)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "The length of `values` (%" PRId64 ") must match the first dimension "
                             "of `indices` (%" PRId64 ")", vals->dims[0], N);
    if (dshape->dims[0] != rank || rank < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "dense_shape has %" PRId64 " elements but indices rank %" PRId64
                             " (both must be equal and >= 1)", dshape->dims[0], rank);
    const int64_t *idx = ind->data;
    int64_t rows = ((const int64_t *)dshape->data)[0];
    if (rows < 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "dense_shape[0] = %" PRId64 " < 0", rows);
    if (rows == 0 && N > 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] "
                             "= %" PRId64, N);
    tfs_tensor *empty = NULL, *rev = NULL, *oind = NULL, *ovals = NULL, *cnt = NULL;
    if ((rc = tfs__arr_new_like(n, TFS_DTYPE_BOOL, 1, &rows, &empty, st)) != TFS_OK ||
        (rc = tfs__arr_new_like(n, TFS_DTYPE_INT64, 1, &rows, &cnt, st)) != TFS_OK ||
        (rc = tfs__arr_new_like(n, TFS_DTYPE_INT64, 1, &N, &rev, st)) != TFS_OK)
        goto fail;
    int64_t *count = cnt->data;   /* per row: entries, then the row's first output position */
    for (int64_t i = 0; i < N; i++) {
        int64_t r = idx[i * rank];
        if (r < 0 || r >= rows) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "indices(%" PRId64 ", 0) is invalid: %" PRId64 " %s %" PRId64, i, r,
                               r < 0 ? "<" : ">=", r < 0 ? (int64_t)0 : rows);
            goto fail;
        }
        count[r]++;
    }
    int64_t total = 0;
    bool *em = empty->data;
    for (int64_t r = 0; r < rows; r++) {
        em[r] = count[r] == 0;
        int64_t c = count[r] ? count[r] : 1;
        count[r] = total;
        total += c;
    }
    int64_t odims[2] = {total, rank};
    if ((rc = tfs__arr_new_like(n, TFS_DTYPE_INT64, 2, odims, &oind, st)) != TFS_OK ||
        (rc = tfs__arr_new_like(n, vals->dtype, 1, &total, &ovals, st)) != TFS_OK)
        goto fail;
    int64_t *oi = oind->data, *rv = rev->data;
    for (int64_t i = 0; i < N; i++) {   /* stable: a row keeps its entries' input order */
        int64_t pos = count[idx[i * rank]]++;
        memcpy(oi + pos * rank, idx + i * rank, (size_t)rank * sizeof *oi);
        if ((rc = tfs__arr_copy(ovals, pos, vals, i, 1, st)) != TFS_OK)
            goto fail;
        rv[i] = pos;
    }
    for (int64_t r = 0; r < rows; r++) {
        if (!em[r])
            continue;
        int64_t pos = count[r];   /* an empty row's one slot */
        memset(oi + pos * rank, 0, (size_t)rank * sizeof *oi);
        oi[pos * rank] = r;
        if ((rc = tfs__arr_copy(ovals, pos, dflt, 0, 1, st)) != TFS_OK)
            goto fail;
    }
    tfs_tensor_unref(cnt);
    k->out[0] = oind;
    k->out[1] = ovals;
    k->out[2] = empty;
    k->out[3] = rev;
    return TFS_OK;
fail:
    tfs_tensor_unref(empty);
    tfs_tensor_unref(rev);
    tfs_tensor_unref(oind);
    tfs_tensor_unref(ovals);
    tfs_tensor_unref(cnt);
    return rc;
}

/* ---- SparseSegmentSum / Mean / SqrtN(data, indices, segment_ids[, num_segments]) ------------- */

enum seg_kind { SEG_SUM, SEG_MEAN, SEG_SQRTN };

typedef struct seg_job {
    const tfs_tensor *data, *indices;
    tfs_tensor       *out;
    const int64_t    *starts;   /* [out_rows + 1]: input positions of each output row's ids */
    int64_t           cols;
    enum seg_kind     kind;
} seg_job;

#define SEG_ROW_FN(T, NAME)                                                                        \
    static void NAME(const seg_job *j, int64_t row, int64_t s, int64_t e)                         \
    {                                                                                              \
        const T *d = j->data->data;                                                                \
        T *o = (T *)j->out->data + row * j->cols;                                                  \
        int64_t num = e - s, c = j->cols;                                                          \
        if (num == 0) {                                                                            \
            for (int64_t x = 0; x < c; x++)                                                        \
                o[x] = 0;                                                                          \
            return;                                                                                \
        }                                                                                          \
        T scale = 1;                                                                               \
        if (j->kind == SEG_MEAN && num < 10)                                                       \
            scale = (T)1 / (T)num;                                                                 \
        if (j->kind == SEG_SQRTN && num < 10)                                                      \
            scale = (T)1 / (T)sqrt((double)num);                                                   \
        int64_t r = num == 1 ? 1 : (num & 7) == 0 ? 8 : (num & 7) == 1 ? 9 : (num & 7);          \
        for (int64_t x = 0; x < c; x++) {                                                          \
            T acc = d[tfs__arr_int_at(j->indices, s) * c + x];                                     \
            for (int64_t i = 1; i < r; i++)                                                        \
                acc = acc + d[tfs__arr_int_at(j->indices, s + i) * c + x];                         \
            if (num > 1)                                                                           \
                acc = acc * scale;                                                                 \
            for (int64_t g = r; g < num; g += 8) {                                                 \
                T part = d[tfs__arr_int_at(j->indices, s + g) * c + x];                            \
                for (int64_t i = 1; i < 8; i++)                                                    \
                    part = part + d[tfs__arr_int_at(j->indices, s + g + i) * c + x];               \
                acc = acc + part;                                                                  \
            }                                                                                      \
            if (j->kind == SEG_MEAN && num >= 10)                                                  \
                acc = acc / (T)num;                                                                \
            if (j->kind == SEG_SQRTN && num >= 10)                                                 \
                acc = acc / (T)sqrt((double)num);                                                  \
            o[x] = acc;                                                                            \
        }                                                                                          \
    }
SEG_ROW_FN(float, seg_row_f32)
SEG_ROW_FN(double, seg_row_f64)
SEG_ROW_FN(int32_t, seg_row_i32)
SEG_ROW_FN(int64_t, seg_row_i64)

static void seg_rows(void *arg, int64_t begin, int64_t end)
{
    const seg_job *j = arg;
    for (int64_t row = begin; row < end; row++) {
        int64_t s = j->starts[row], e = j->starts[row + 1];
        switch (j->data->dtype) {
        case TFS_DTYPE_FLOAT:  seg_row_f32(j, row, s, e); break;
        case TFS_DTYPE_DOUBLE: seg_row_f64(j, row, s, e); break;
        case TFS_DTYPE_INT32:  seg_row_i32(j, row, s, e); break;
        default:               seg_row_i64(j, row, s, e); break;
        }
    }
}

static enum tfs_code sparse_segment(tfs_kernel_ctx *k, enum seg_kind kind, bool with_num,
                                    tfs_status *st)
{
    const tfs_node *n = k->node;
    int want_in = with_num ? 4 : 3;
    if (k->n_in != want_in)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects %d inputs, got %d", want_in,
                             k->n_in);
    const tfs_tensor *data = k->in[0], *ind = k->in[1], *seg = k->in[2];
    bool is_float = data->dtype == TFS_DTYPE_FLOAT || data->dtype == TFS_DTYPE_DOUBLE;
    bool is_int = data->dtype == TFS_DTYPE_INT32 || data->dtype == TFS_DTYPE_INT64;
    if (!is_float && !(is_int && kind == SEG_SUM))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "data of dtype %s is not supported (%s)",
                             tfs_dtype_short_name(data->dtype),
                             kind == SEG_SUM ? "float, double, int32, int64" : "float, double");
    enum tfs_code rc = tfs__arr_check_T(n, data, "T", "data", st);
    if (rc == TFS_OK)
        rc = tfs__arr_check_T(n, ind, "Tidx", "indices", st);
    if (rc == TFS_OK)
        rc = tfs__arr_check_T(n, seg, "Tsegmentids", "segment_ids", st);
    if (rc != TFS_OK)
        return rc;
    if ((ind->dtype != TFS_DTYPE_INT32 && ind->dtype != TFS_DTYPE_INT64) ||
        (seg->dtype != TFS_DTYPE_INT32 && seg->dtype != TFS_DTYPE_INT64))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "indices and segment_ids must be int32 or int64");
    if (data->rank < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "data must be at least 1-D");
    if (ind->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "indices should be a vector.");
    if (seg->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "segment_ids should be a vector.");
    int64_t num = ind->nelem;
    if (num != seg->nelem)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "segment_ids and indices should have same size.");
    int64_t last_plus_one = num > 0 ? tfs__arr_int_at(seg, num - 1) + 1 : 0;
    int64_t rows = last_plus_one;
    if (with_num) {
        const tfs_tensor *ns = k->in[3];
        if (ns->dtype != TFS_DTYPE_INT32 && ns->dtype != TFS_DTYPE_INT64)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "num_segments must be int32 or int64, got %s",
                                 tfs_dtype_short_name(ns->dtype));
        if ((rc = tfs__arr_check_T(n, ns, "Tnumsegments", "num_segments", st)) != TFS_OK)
            return rc;
        if (ns->rank != 0) {
            char buf[128];
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "num_segments should be a scalar, not shape %s",
                                 tfs_shape_str(ns->rank, ns->dims, buf, sizeof buf));
        }
        rows = tfs__arr_int_at(ns, 0);
        if (rows < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "segment ids must be >= 0");
        if (rows < last_plus_one)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "segment ids must be < num_segments");
    }
    if (last_plus_one < 0 || (num > 0 && last_plus_one == 0))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "segment ids must be >= 0");
    int64_t d0 = data->dims[0], cols = 1;
    for (int i = 1; i < data->rank; i++)
        cols *= data->dims[i];
    /* Validate as TF's loop meets them: per segment, the next id must grow, the id must be in
     * range, then the segment's indices must be in [0, d0). */
    for (int64_t s = 0, e; s < num; s = e) {
        int64_t id = tfs__arr_int_at(seg, s);
        for (e = s + 1; e < num && tfs__arr_int_at(seg, e) == id; e++) {
        }
        if (e < num && tfs__arr_int_at(seg, e) < id)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "segment ids are not increasing");
        if (id < 0 || id >= rows)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Segment id %" PRId64 " out of range [0, %" PRId64 "), possibly "
                                 "because 'segment_ids' input is not sorted.", id, rows);
        for (int64_t i = s; i < e; i++) {
            int64_t v = tfs__arr_int_at(ind, i);
            if (v < 0 || v >= d0)
                return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                     "Bad: indices[%" PRId64 "] == %" PRId64 " out of range [0, %"
                                     PRId64 ")", i, v, d0);
        }
    }
    int64_t dims[TFS_MAX_RANK];
    memcpy(dims, data->dims, (size_t)data->rank * sizeof *dims);
    dims[0] = rows;
    tfs_tensor *out;
    if ((rc = tfs__arr_output(k, 0, data->dtype, data->rank, dims, false, &out, st)) != TFS_OK)
        return rc;
    k->out[0] = out;
    if (rows == 0 || cols == 0)
        return TFS_OK;
    int64_t *starts = tfs_malloc((size_t)(rows + 1) * sizeof *starts);
    if (!starts)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    for (int64_t r = 0, i = 0; r <= rows; r++) {
        while (i < num && tfs__arr_int_at(seg, i) < r)
            i++;
        starts[r] = i;
    }
    seg_job j = {data, ind, out, starts, cols, kind};
    tfs__parallel_for(rows, cols >= 4096 ? 1 : 4096 / cols, seg_rows, &j);
    tfs_free(starts);
    return TFS_OK;
}

enum tfs_code tfs__k_sparse_segment_sum(tfs_kernel_ctx *k, tfs_status *st)
{
    return sparse_segment(k, SEG_SUM, false, st);
}

enum tfs_code tfs__k_sparse_segment_mean(tfs_kernel_ctx *k, tfs_status *st)
{
    return sparse_segment(k, SEG_MEAN, false, st);
}

enum tfs_code tfs__k_sparse_segment_sqrt_n(tfs_kernel_ctx *k, tfs_status *st)
{
    return sparse_segment(k, SEG_SQRTN, false, st);
}

enum tfs_code tfs__k_sparse_segment_sum_n(tfs_kernel_ctx *k, tfs_status *st)
{
    return sparse_segment(k, SEG_SUM, true, st);
}

enum tfs_code tfs__k_sparse_segment_mean_n(tfs_kernel_ctx *k, tfs_status *st)
{
    return sparse_segment(k, SEG_MEAN, true, st);
}

enum tfs_code tfs__k_sparse_segment_sqrt_n_n(tfs_kernel_ctx *k, tfs_status *st)
{
    return sparse_segment(k, SEG_SQRTN, true, st);
}
