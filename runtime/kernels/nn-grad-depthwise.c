/* CPU kernels for DepthwiseConv2dNative's gradients in NHWC, float and double:
 * DepthwiseConv2dNativeBackpropInput(input_sizes, filter, out_backprop) and
 * DepthwiseConv2dNativeBackpropFilter(input, filter_sizes, out_backprop), with the forward op's
 * strides, dilations and padding (nn-util.c) and its channel layout: input channel c with filter
 * [kh, kw, c, m] feeds output channel c * multiplier + m (nn-conv.c).
 *
 * Direct loops over the windows. The input gradient runs through tfs__parallel_for over images
 * (disjoint outputs, each image's sums in one order); the filter gradient over filter taps
 * (kh, kw), each tap summing over every output pixel in one order, in double. Any split of the
 * work gives the same bits.
 */
#include <string.h>

#include "runtime/runtime-impl.h"

typedef struct dw_job {
    tfs_nn_geom    g;
    enum tfs_dtype T;
    int64_t        mult, oc;   /* channel multiplier; out channels = in_c * mult */
    const void    *x, *f, *dy;
    void          *dx;         /* input gradient */
    double        *acc;        /* filter gradient, [kh*kw, oc] in double */
} dw_job;

/* Visits every in-bounds (output pixel, tap) pair of image b with x_ (input pixel offset, in
 * elements), o_ (output pixel offset) and t_ (tap index), taps of one pixel in order. */
#define FOR_EACH_TAP(j, b, TAP0, TAP1, ...)                                                        \
    for (int64_t oh = 0; oh < (j)->g.out_h; oh++)                                                  \
        for (int64_t ow = 0; ow < (j)->g.out_w; ow++) {                                            \
            int64_t ih0 = oh * (j)->g.stride_h - (j)->g.pad_top;                                   \
            int64_t iw0 = ow * (j)->g.stride_w - (j)->g.pad_left;                                  \
            int64_t o_ = (((b) * (j)->g.out_h + oh) * (j)->g.out_w + ow) * (j)->oc;                \
            for (int64_t t_ = (TAP0); t_ < (TAP1); t_++) {                                         \
                int64_t ih = ih0 + (t_ / (j)->g.k_w) * (j)->g.dil_h;                               \
                int64_t iw = iw0 + (t_ % (j)->g.k_w) * (j)->g.dil_w;                               \
                if (ih < 0 || ih >= (j)->g.in_h || iw < 0 || iw >= (j)->g.in_w)                    \
                    continue;                                                                      \
                int64_t x_ = (((b) * (j)->g.in_h + ih) * (j)->g.in_w + iw) * (j)->g.in_c;          \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        }

#define DW_INPUT(TY)                                                                               \
    do {                                                                                           \
        const TY *F = j->f, *DY = j->dy;                                                           \
        TY *DX = j->dx;                                                                            \
        for (int64_t b = b0; b < b1; b++)                                                          \
            FOR_EACH_TAP(j, b, 0, j->g.k_h * j->g.k_w, {                                           \
                const TY *w = F + t_ * j->oc, *d = DY + o_;                                        \
                TY *dx = DX + x_;                                                                  \
                for (int64_t c = 0; c < j->g.in_c; c++)                                            \
                    for (int64_t m = 0; m < j->mult; m++)                                          \
                        dx[c] += d[c * j->mult + m] * w[c * j->mult + m];                          \
            })                                                                                     \
    } while (0)

static void dw_input_range(void *arg, int64_t b0, int64_t b1)
{
    const dw_job *j = arg;
    if (j->T == TFS_DTYPE_FLOAT)
        DW_INPUT(float);
    else
        DW_INPUT(double);
}

#define DW_FILTER(TY)                                                                              \
    do {                                                                                           \
        const TY *X = j->x, *DY = j->dy;                                                           \
        for (int64_t b = 0; b < j->g.batch; b++)                                                   \
            FOR_EACH_TAP(j, b, t0, t1, {                                                           \
                const TY *x = X + x_, *d = DY + o_;                                                \
                double *a = j->acc + t_ * j->oc;                                                   \
                for (int64_t c = 0; c < j->g.in_c; c++)                                            \
                    for (int64_t m = 0; m < j->mult; m++)                                          \
                        a[c * j->mult + m] += (double)x[c] * (double)d[c * j->mult + m];           \
            })                                                                                     \
    } while (0)

static void dw_filter_range(void *arg, int64_t t0, int64_t t1)
{
    const dw_job *j = arg;
    if (j->T == TFS_DTYPE_FLOAT)
        DW_FILTER(float);
    else
        DW_FILTER(double);
}

/* Checks attr T against the float inputs f0 and f1, the shape input `what` (4 values), ranks,
 * depths and out_backprop's size, and fills j. in_dims/f_dims: the input and filter shapes, one
 * of them from the shape input (sizes). */
static enum tfs_code dw_setup(tfs_kernel_ctx *k, bool filter_grad, int64_t *in_dims,
                              int64_t *f_dims, dw_job *j, tfs_status *st)
{
    const tfs_node *n = k->node;
    char buf[128];
    memset(j, 0, sizeof *j);
    enum tfs_code rc = tfs__attr_type(n, "T", &j->T, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 3)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, has %d", k->n_in);
    int sizes_at = filter_grad ? 1 : 0;
    for (int i = 0; i < 3; i++) {
        const tfs_tensor *t = k->in[i];
        if (i != sizes_at && t->dtype != j->T)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "input %d has dtype %s, but attr T is %s", i,
                                 tfs_dtype_short_name(t->dtype), tfs_dtype_short_name(j->T));
        if (i != sizes_at && t->rank != 4)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s: %s must be 4-dimensional, got %s", n->op_type,
                                 i == 2 ? "out_backprop" : filter_grad ? "input" : "filter",
                                 tfs_shape_str(t->rank, t->dims, buf, sizeof buf));
    }
    if (j->T != TFS_DTYPE_FLOAT && j->T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(j->T));
    const tfs_tensor *s = k->in[sizes_at], *dy = k->in[2];
    const char *what = filter_grad ? "filter_sizes" : "input_sizes";
    if (s->rank != 1 || (s->dtype != TFS_DTYPE_INT32 && s->dtype != TFS_DTYPE_INT64) ||
        s->nelem != 4)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: %s must be a 1-D int32 tensor of 4 values, got %s %s", n->op_type,
                             what, tfs_dtype_short_name(s->dtype),
                             tfs_shape_str(s->rank, s->dims, buf, sizeof buf));
    int64_t *sizes = filter_grad ? f_dims : in_dims;
    const tfs_tensor *other = k->in[filter_grad ? 0 : 1];
    memcpy(filter_grad ? in_dims : f_dims, other->dims, 4 * sizeof *in_dims);
    for (int i = 0; i < 4; i++) {
        sizes[i] = tfs__arr_int_at(s, i);
        if (sizes[i] < 0 || sizes[i] > INT32_MAX)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s: %s[%d] = %lld is out of range",
                                 n->op_type, what, i, (long long)sizes[i]);
        if (other->dims[i] > INT32_MAX)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s: dimension %d exceeds 2^31 - 1",
                                 n->op_type, i);
    }
    if (in_dims[3] != f_dims[2])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: input depth %lld and filter depth %lld must be the same",
                             n->op_type, (long long)in_dims[3], (long long)f_dims[2]);
    if (in_dims[0] != dy->dims[0])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: input and out_backprop must have the same batch size: %lld vs "
                             "%lld", n->op_type, (long long)in_dims[0], (long long)dy->dims[0]);
    j->mult = f_dims[3];
    j->oc = in_dims[3] * j->mult;   /* both < 2^31 */
    if (dy->dims[3] != j->oc)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: out_backprop depth %lld must be input depth x multiplier = %lld",
                             n->op_type, (long long)dy->dims[3], (long long)j->oc);
    if ((rc = tfs__nn_geom_init_shape(n, 4, in_dims, f_dims[0], f_dims[1], true, &j->g, st)) !=
        TFS_OK)
        return rc;
    if (dy->dims[1] != j->g.out_h || dy->dims[2] != j->g.out_w)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: Size of out_backprop doesn't match computed: actual = %lldx%lld, "
                             "computed = %lldx%lld", n->op_type, (long long)dy->dims[1],
                             (long long)dy->dims[2], (long long)j->g.out_h, (long long)j->g.out_w);
    j->x = k->in[0]->data;
    j->f = k->in[1]->data;
    j->dy = dy->data;
    return TFS_OK;
}

enum tfs_code tfs__k_depthwise_backprop_input(tfs_kernel_ctx *k, tfs_status *st)
{
    int64_t in_dims[4], f_dims[4];
    dw_job j;
    enum tfs_code rc = dw_setup(k, false, in_dims, f_dims, &j, st);
    if (rc != TFS_OK)
        return rc;
    tfs_tensor *dx = NULL;
    if ((rc = tfs_tensor_new(j.T, 4, in_dims, &dx, st)) != TFS_OK)
        return rc;
    j.dx = dx->data;
    /* An empty filter or out_backprop contributes nothing: zeros. */
    if (dx->nelem > 0 && k->in[1]->nelem > 0 && k->in[2]->nelem > 0)
        tfs__parallel_for(j.g.batch, 1, dw_input_range, &j);
    k->out[0] = dx;
    return TFS_OK;
}

enum tfs_code tfs__k_depthwise_backprop_filter(tfs_kernel_ctx *k, tfs_status *st)
{
    int64_t in_dims[4], f_dims[4];
    dw_job j;
    enum tfs_code rc = dw_setup(k, true, in_dims, f_dims, &j, st);
    if (rc != TFS_OK)
        return rc;
    tfs_tensor *df = NULL;
    if ((rc = tfs_tensor_new(j.T, 4, f_dims, &df, st)) != TFS_OK)
        return rc;
    if (df->nelem == 0 || k->in[0]->nelem == 0 || k->in[2]->nelem == 0)
        goto done;   /* zeros */
    if (!(j.acc = tfs_calloc((size_t)df->nelem, sizeof *j.acc))) {
        tfs_tensor_unref(df);
        return tfs__node_err(k->node, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    }
    tfs__parallel_for(j.g.k_h * j.g.k_w, 1, dw_filter_range, &j);
    for (int64_t i = 0; i < df->nelem; i++) {
        if (j.T == TFS_DTYPE_FLOAT)
            ((float *)df->data)[i] = (float)j.acc[i];
        else
            ((double *)df->data)[i] = j.acc[i];
    }
    tfs_free(j.acc);
done:
    k->out[0] = df;
    return TFS_OK;
}
