/* CPU kernel for FusedBatchNormGrad, FusedBatchNormGradV2 and FusedBatchNormGradV3 (float; x of
 * rank 4 or 5; NHWC/NDHWC, and for training also NCHW/NCDHW, as TensorFlow's CPU kernel).
 *
 * Inputs: y_backprop, x, scale, reserve_space_1, reserve_space_2 (V3 adds reserve_space_3, which
 * the CPU ignores). In training mode (is_training = true, the default) reserve_space_1/2 are the
 * forward op's outputs 3 and 4: the batch mean and the biased batch variance; in inference mode
 * the population mean and variance the forward op was given. With N elements per channel,
 * r = rsqrt(variance + epsilon), xc = x - mean and sums over every axis but the channel:
 *   training:  x_backprop      = scale * r * (dy - sum(dy) / N - xc * r^2 * sum(dy * xc) / N)
 *   inference: x_backprop      = dy * scale * r
 *   both:      scale_backprop  = sum(dy * xc) * r,   offset_backprop = sum(dy)
 * Outputs 3 and 4 are empty [0] placeholders, as TensorFlow's. An empty x gives zero scale and
 * offset gradients. Sums are taken in double.
 *
 * The channel sums run through tfs__parallel_for over channels, x_backprop over rows of the
 * layout; each output element is computed by one call in one order, so any split gives the same
 * bits.
 */
#include <math.h>
#include <string.h>

#include "runtime/runtime-impl.h"

#define BN_GRAIN_ELEMS ((int64_t)1 << 14)

typedef struct bn_grad_job {
    int64_t      C, outer, inner;   /* x viewed as [outer, C, inner] (channels-last: outer = 1,
                                     * inner = every other axis; channels-first: outer = batch) */
    bool         last;
    bool         training;
    const float *dy, *x, *scale, *mean;
    float       *dx;
    double      *sum_dy, *sum_dyxc;   /* [C] */
    double      *r;                   /* [C]: rsqrt(variance + epsilon) */
    double       count;               /* N = outer * inner */
} bn_grad_job;

static inline int64_t bn_at(const bn_grad_job *j, int64_t o, int64_t c, int64_t s)
{
    return j->last ? s * j->C + c : (o * j->C + c) * j->inner + s;
}

/* Channel sums for channels [c0, c1). */
static void sums_range(void *arg, int64_t c0, int64_t c1)
{
    const bn_grad_job *j = arg;
    for (int64_t c = c0; c < c1; c++) {
        double sd = 0, sdx = 0, m = j->mean[c];
        for (int64_t o = 0; o < j->outer; o++)
            for (int64_t s = 0; s < j->inner; s++) {
                int64_t i = bn_at(j, o, c, s);
                double d = j->dy[i];
                sd += d;
                sdx += d * ((double)j->x[i] - m);
            }
        j->sum_dy[c] = sd;
        j->sum_dyxc[c] = sdx;
    }
}

/* x_backprop for one channel's element i. */
static inline float bn_dx(const bn_grad_job *j, int64_t c, int64_t i)
{
    double r = j->r[c], k = j->scale[c] * r;
    if (!j->training)
        return (float)(j->dy[i] * k);
    double xc = (double)j->x[i] - j->mean[c];
    return (float)(k * (j->dy[i] - j->sum_dy[c] / j->count -
                        xc * (r * r) * (j->sum_dyxc[c] / j->count)));
}

/* Rows [a, b): channels-last, positions s (C elements each); channels-first, (o, c) pairs. */
static void dx_range(void *arg, int64_t a, int64_t b)
{
    const bn_grad_job *j = arg;
    for (int64_t row = a; row < b; row++) {
        if (j->last) {
            for (int64_t c = 0; c < j->C; c++)
                j->dx[row * j->C + c] = bn_dx(j, c, row * j->C + c);
        } else {
            int64_t c = row % j->C;
            for (int64_t s = 0; s < j->inner; s++)
                j->dx[row * j->inner + s] = bn_dx(j, c, row * j->inner + s);
        }
    }
}

static enum tfs_code bn_grad_check(tfs_kernel_ctx *k, bn_grad_job *j, tfs_status *st)
{
    const tfs_node *n = k->node;
    char s1[128], s2[128];
    if (k->n_in < 5 || k->n_in > 6)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 5 or 6 inputs, has %d",
                             k->n_in);
    for (int i = 0; i < k->n_in; i++)
        if (k->in[i]->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "input %d has dtype %s; only float is supported", i,
                                 tfs_dtype_short_name(k->in[i]->dtype));
    const tfs_tensor *dy = k->in[0], *x = k->in[1];
    static const char *const names[] = {"y_backprop", "x", "scale", "reserve_space_1",
                                        "reserve_space_2"};
    for (int i = 0; i < 2; i++)
        if (k->in[i]->rank != 4 && k->in[i]->rank != 5)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s must be 4 or 5-dimensional, got %s",
                                 names[i], tfs_shape_str(k->in[i]->rank, k->in[i]->dims, s1,
                                                         sizeof s1));
    for (int i = 2; i < 5; i++)
        if (k->in[i]->rank != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be 1-dimensional, got %s",
                                 names[i], tfs_shape_str(k->in[i]->rank, k->in[i]->dims, s1,
                                                         sizeof s1));
    if (!tfs_shape_equal(x->rank, x->dims, dy->rank, dy->dims))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "x and y_backprop must have same shape, but x has shape %s and "
                             "y_backprop has shape %s",
                             tfs_shape_str(x->rank, x->dims, s1, sizeof s1),
                             tfs_shape_str(dy->rank, dy->dims, s2, sizeof s2));
    const char *fmt = tfs__attr_str(n, "data_format", "NHWC");
    if (!strcmp(fmt, "NHWC") || !strcmp(fmt, "NDHWC"))
        j->last = true;
    else if (!strcmp(fmt, "NCHW") || !strcmp(fmt, "NCDHW"))
        j->last = false;
    else
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Invalid data format '%s'", fmt);
    if (!j->training && !j->last)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "The implementation of FusedBatchNormGrad with is_training=False only "
                             "support NHWC tensor format for now (data_format %s)", fmt);
    j->C = j->last ? x->dims[x->rank - 1] : x->dims[1];
    int64_t spatial = 1;
    if (x->nelem > 0)   /* else the other axes may be anything: no products of them */
        for (int d = j->last ? 1 : 2; d < (j->last ? x->rank - 1 : x->rank); d++)
            spatial *= x->dims[d];
    j->outer = j->last ? 1 : x->dims[0];
    j->inner = j->last ? x->dims[0] * spatial : spatial;
    for (int i = 2; i < 5; i++)
        if (k->in[i]->nelem != j->C)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s must have the same number of elements as the channels of x, "
                                 "got %lld and %lld", names[i], (long long)k->in[i]->nelem,
                                 (long long)j->C);
    return TFS_OK;
}

enum tfs_code tfs__k_fused_batch_norm_grad(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    float eps;
    bn_grad_job j;
    memset(&j, 0, sizeof j);
    enum tfs_code rc = tfs__nn_attr_float(n, "epsilon", 1e-4f, &eps, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "is_training", true, &j.training, st);
    if (rc == TFS_OK)
        rc = bn_grad_check(k, &j, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_out < 5)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 5 outputs, has %d", k->n_out);
    const tfs_tensor *x = k->in[1];
    tfs_tensor *outs[5] = {NULL};
    int64_t cdims[1] = {j.C}, zero[1] = {0};
    rc = tfs_tensor_new(TFS_DTYPE_FLOAT, x->rank, x->dims, &outs[0], st);
    for (int i = 1; i < 5 && rc == TFS_OK; i++)
        rc = tfs_tensor_new(TFS_DTYPE_FLOAT, 1, i < 3 ? cdims : zero, &outs[i], st);
    if (rc != TFS_OK)
        goto fail;
    if (x->nelem == 0)
        goto done;   /* zero scale and offset gradients (zero-filled), an empty x_backprop */
    size_t cn = (size_t)j.C;   /* > 0: x is not empty */
    j.sum_dy = tfs_calloc(cn, sizeof *j.sum_dy);
    j.sum_dyxc = tfs_calloc(cn, sizeof *j.sum_dyxc);
    j.r = tfs_calloc(cn, sizeof *j.r);
    if (!j.sum_dy || !j.sum_dyxc || !j.r) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    j.dy = k->in[0]->data;
    j.x = x->data;
    j.scale = k->in[2]->data;
    j.mean = k->in[3]->data;
    j.dx = outs[0]->data;
    j.count = (double)(j.outer * j.inner);
    const float *var = k->in[4]->data;
    for (int64_t c = 0; c < j.C; c++)
        j.r[c] = 1.0 / sqrt((double)var[c] + (double)eps);
    int64_t per_channel = j.outer * j.inner;
    tfs__parallel_for(j.C, BN_GRAIN_ELEMS / per_channel + 1, sums_range, &j);
    float *scale_bp = outs[1]->data, *offset_bp = outs[2]->data;
    for (int64_t c = 0; c < j.C; c++) {
        scale_bp[c] = (float)(j.sum_dyxc[c] * j.r[c]);
        offset_bp[c] = (float)j.sum_dy[c];
    }
    int64_t rows = j.last ? j.inner : j.outer * j.C, row_len = j.last ? j.C : j.inner;
    tfs__parallel_for(rows, BN_GRAIN_ELEMS / row_len + 1, dx_range, &j);
done:
    for (int i = 0; i < 5; i++)
        k->out[i] = outs[i];
    tfs_free(j.sum_dy);
    tfs_free(j.sum_dyxc);
    tfs_free(j.r);
    return TFS_OK;
fail:
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(outs[i]);
    tfs_free(j.sum_dy);
    tfs_free(j.sum_dyxc);
    tfs_free(j.r);
    return rc;
}
