/* CPU kernels for the losses that training graphs end in, float and double, by TensorFlow's
 * definitions:
 *   SoftmaxCrossEntropyWithLogits(features, labels) -> loss [batch], backprop [batch, classes]:
 *       loss[b] = sum_j labels[b,j] * (log(sum_i e^(x[b,i] - m)) - (x[b,j] - m)),  m = max_i x[b,i]
 *       backprop[b,j] = softmax(x[b])[j] - labels[b,j]
 *     features and labels have one shape [batch, classes], or shapes that broadcast to such a
 *     matrix (TensorFlow's rule: a [classes] label row shared by every example, for instance).
 *   SparseSoftmaxCrossEntropyWithLogits(features [batch, classes], labels [batch] int32/int64):
 *     the same with one-hot labels; a label outside [0, classes) is INVALID_ARGUMENT naming it
 *     (TensorFlow's CPU kernel; its GPU kernel returns NaN instead), and classes must be > 0.
 *   L2Loss(t) -> sum(t^2) / 2, a scalar.
 * Subtracting the row's maximum first keeps e^x from overflowing, and log(sum) - (x - m) from
 * losing the small side, so huge logits give finite losses. Row sums and L2Loss's sum are taken in
 * double. Rows are independent: tfs__parallel_for splits the batch, and any split gives the same
 * bits.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/kernels/math-impl.h"

#define ROW_GRAIN_ELEMS ((int64_t)1 << 14)

typedef struct xent_job {
    enum tfs_dtype T;
    int64_t        classes;
    const void    *x;                 /* logits */
    int64_t        x_row, x_col;      /* element strides (0: broadcast) */
    const void    *lab;               /* dense labels, or int32/int64 indices when sparse */
    int64_t        l_row, l_col;
    bool           sparse;
    enum tfs_dtype Tlabels;
    void          *loss, *backprop;   /* [batch], [batch, classes] */
} xent_job;

static inline double exp_d(double x)
{
    return exp(x);
}

/* Per row: backprop holds x - m, then e^(x - m), then the final values. */
#define XENT_ROWS(TY, EXP)                                                                         \
    do {                                                                                           \
        const TY *X = j->x, *L = j->lab;                                                           \
        TY *loss = j->loss, *B = j->backprop;                                                      \
        int64_t C = j->classes;                                                                    \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const TY *x = X + r * j->x_row;                                                        \
            TY *bp = B + r * C;                                                                    \
            TY m = x[0];                                                                           \
            for (int64_t c = 1; c < C; c++)                                                        \
                m = x[c * j->x_col] > m ? x[c * j->x_col] : m;                                     \
            for (int64_t c = 0; c < C; c++)                                                        \
                bp[c] = x[c * j->x_col] - m;                                                       \
            double sum = 0;                                                                        \
            for (int64_t c = 0; c < C; c++)                                                        \
                sum += (double)EXP(bp[c]);                                                         \
            double log_sum = log(sum), l = 0;                                                      \
            TY inv = (TY)(1.0 / sum);                                                              \
            if (j->sparse) {                                                                       \
                int64_t y = label_at(j, r);                                                        \
                l = log_sum - (double)bp[y];                                                       \
                for (int64_t c = 0; c < C; c++)                                                    \
                    bp[c] = EXP(bp[c]) * inv - (TY)(c == y);                                       \
            } else {                                                                               \
                const TY *lab = L + r * j->l_row;                                                  \
                for (int64_t c = 0; c < C; c++) {                                                  \
                    TY t = lab[c * j->l_col];                                                      \
                    l += (double)t * (log_sum - (double)bp[c]);                                    \
                    bp[c] = EXP(bp[c]) * inv - t;                                                  \
                }                                                                                  \
            }                                                                                      \
            loss[r] = (TY)l;                                                                       \
        }                                                                                          \
    } while (0)

static inline int64_t label_at(const xent_job *j, int64_t r)
{
    return j->Tlabels == TFS_DTYPE_INT32 ? ((const int32_t *)j->lab)[r]
                                         : ((const int64_t *)j->lab)[r];
}

static void xent_range(void *arg, int64_t r0, int64_t r1)
{
    const xent_job *j = arg;
    if (j->T == TFS_DTYPE_FLOAT)
        XENT_ROWS(float, tfs__expf);
    else
        XENT_ROWS(double, exp_d);
}

static enum tfs_code xent_outputs(tfs_kernel_ctx *k, xent_job *j, int64_t batch, tfs_status *st)
{
    int64_t dims[2] = {batch, j->classes};
    tfs_tensor *loss = NULL, *bp = NULL;
    enum tfs_code rc = tfs_tensor_new(j->T, 1, dims, &loss, st);
    if (rc == TFS_OK)
        rc = tfs_tensor_new(j->T, 2, dims, &bp, st);
    if (rc != TFS_OK) {
        tfs_tensor_unref(loss);
        return rc;
    }
    j->loss = loss->data;
    j->backprop = bp->data;
    /* classes = 0: the loss is a sum of nothing (0, as zero-filled), the backprop empty. */
    if (batch > 0 && j->classes > 0)
        tfs__parallel_for(batch, ROW_GRAIN_ELEMS / j->classes + 1, xent_range, j);
    k->out[0] = loss;
    k->out[1] = bp;
    return TFS_OK;
}

static enum tfs_code xent_check_T(tfs_kernel_ctx *k, int n_T, enum tfs_dtype *T, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc = tfs__math_check_T(k, 0, n_T, T, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
    if (*T != TFS_DTYPE_FLOAT && *T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(*T));
    return TFS_OK;
}

enum tfs_code tfs__k_softmax_xent(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = xent_check_T(k, 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0], *l = k->in[1];
    char s1[128], s2[128];
    /* Shapes broadcast as NumPy's (aligned at the last axis) and must end up a matrix; any input
     * of rank > 2 would make the result's rank > 2. */
    int64_t xd[2] = {1, 1}, ld[2] = {1, 1}, od[2];
    int out_rank = x->rank > l->rank ? x->rank : l->rank;
    if (out_rank != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "logits and labels must be either 2-dimensional, or broadcasted to "
                             "be 2-dimensional: logits_size=%s labels_size=%s",
                             tfs_shape_str(x->rank, x->dims, s1, sizeof s1),
                             tfs_shape_str(l->rank, l->dims, s2, sizeof s2));
    for (int d = 0; d < x->rank; d++)
        xd[2 - x->rank + d] = x->dims[d];
    for (int d = 0; d < l->rank; d++)
        ld[2 - l->rank + d] = l->dims[d];
    for (int d = 0; d < 2; d++) {
        if (xd[d] != ld[d] && xd[d] != 1 && ld[d] != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "logits and labels must be broadcastable: logits_size=%s "
                                 "labels_size=%s",
                                 tfs_shape_str(x->rank, x->dims, s1, sizeof s1),
                                 tfs_shape_str(l->rank, l->dims, s2, sizeof s2));
        od[d] = xd[d] == 1 ? ld[d] : xd[d];
    }
    xent_job j = {.T = T, .classes = od[1], .x = x->data, .lab = l->data};
    j.x_row = xd[0] == 1 ? 0 : xd[1];
    j.x_col = xd[1] == 1 ? 0 : 1;
    j.l_row = ld[0] == 1 ? 0 : ld[1];
    j.l_col = ld[1] == 1 ? 0 : 1;
    return xent_outputs(k, &j, od[0], st);
}

enum tfs_code tfs__k_sparse_softmax_xent(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = xent_check_T(k, 1, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0], *l = k->in[1];
    char s1[128], s2[128];
    if (l->dtype != TFS_DTYPE_INT32 && l->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "labels must be int32 or int64, got %s",
                             tfs_dtype_short_name(l->dtype));
    const tfs_attr_value *tl = tfs__attr(n, "Tlabels");
    if (tl && tl->kind == TFS_ATTR_TYPE && tl->type != l->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "labels have dtype %s, but attr Tlabels "
                             "is %s", tfs_dtype_short_name(l->dtype),
                             tfs_dtype_short_name(tl->type));
    if (x->rank != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "logits must be 2-D, but got shape %s",
                             tfs_shape_str(x->rank, x->dims, s1, sizeof s1));
    if (l->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "labels must be 1-D, but got shape %s",
                             tfs_shape_str(l->rank, l->dims, s1, sizeof s1));
    if (x->dims[0] != l->dims[0])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "logits and labels must have the same first dimension, got logits "
                             "shape %s and labels shape %s",
                             tfs_shape_str(x->rank, x->dims, s1, sizeof s1),
                             tfs_shape_str(l->rank, l->dims, s2, sizeof s2));
    if (x->dims[1] == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Must have at least one class, but got logits shape %s",
                             tfs_shape_str(x->rank, x->dims, s1, sizeof s1));
    xent_job j = {.T = T, .classes = x->dims[1], .x = x->data, .x_row = x->dims[1], .x_col = 1,
                  .lab = l->data, .sparse = true, .Tlabels = l->dtype};
    for (int64_t r = 0; r < l->nelem; r++) {
        int64_t y = label_at(&j, r);
        if (y < 0 || y >= j.classes)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Received a label value of %lld which is outside the valid range "
                                 "of [0, %lld) (labels[%lld])",
                                 (long long)y, (long long)j.classes, (long long)r);
    }
    return xent_outputs(k, &j, x->dims[0], st);
}

enum tfs_code tfs__k_l2_loss(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 0, 1, &T, st);
    if (rc != TFS_OK)
        return rc;
    if (T != TFS_DTYPE_FLOAT && T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "L2Loss is not supported for dtype %s",
                             tfs_dtype_short_name(T));
    const tfs_tensor *t = k->in[0];
    tfs_tensor *out = NULL;
    if ((rc = tfs_tensor_new_scalar(T, &out, st)) != TFS_OK)
        return rc;
    double s = 0;
    if (T == TFS_DTYPE_FLOAT) {
        const float *x = t->data;
        for (int64_t i = 0; i < t->nelem; i++)
            s += (double)x[i] * x[i];
        *(float *)out->data = (float)(s * 0.5);
    } else {
        const double *x = t->data;
        for (int64_t i = 0; i < t->nelem; i++)
            s += x[i] * x[i];
        *(double *)out->data = s * 0.5;
    }
    k->out[0] = out;
    return TFS_OK;
}
