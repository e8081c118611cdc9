/* CPU kernel for FusedBatchNorm, FusedBatchNormV2 and FusedBatchNormV3 (float; rank 4 or 5;
 * NHWC/NDHWC or NCHW/NCDHW).
 *
 * Inference (is_training = false), per channel c:
 *     y = (x - mean[c]) * (rsqrt(variance[c] + epsilon) * scale[c]) + offset[c]
 * and, as TensorFlow's CPU kernel does, batch_mean and batch_variance pass the given mean and
 * variance through (NaN when x is empty); reserve_space_1/2 are zeros of shape [C] (TensorFlow
 * leaves them unwritten) and V3's reserve_space_3 is a scalar 0.
 *
 * Training (is_training = true, the op's default when the attr is absent) normalises with the
 * batch's own statistics over every axis but the channel (the biased variance), and returns the
 * running statistics TensorFlow does: batch_mean = the batch mean, batch_variance = the unbiased
 * variance (times n / (n - 1)), each blended with the input mean/variance by
 * exponential_avg_factor when it is not 1; reserve_space_1/2 = the batch mean and biased variance.
 */
#include <math.h>
#include <string.h>

#include "runtime/runtime-impl.h"

typedef struct bn_layout {
    int64_t C;        /* channels */
    int64_t outer;    /* channels-last: 1; channels-first: batch */
    int64_t inner;    /* elements per (outer, channel): channels-last: N*spatial; first: spatial */
    bool    last;     /* channels-last */
} bn_layout;

/* Element index of (o, c, s). */
static inline int64_t bn_index(const bn_layout *l, int64_t o, int64_t c, int64_t s)
{
    return l->last ? s * l->C + c : (o * l->C + c) * l->inner + s;
}

static enum tfs_code bn_check_inputs(tfs_kernel_ctx *k, bn_layout *l, bool needs_stats,
                                     tfs_status *st)
{
    const tfs_node *n = k->node;
    char buf[128];
    if (k->n_in != 5 || k->n_out < 5)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 5 inputs and at least 5 outputs, "
                             "has %d and %d", k->n_in, k->n_out);
    for (int i = 0; i < 5; i++)
        if (k->in[i]->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "input %d has dtype %s; only float is supported", i,
                                 tfs_dtype_short_name(k->in[i]->dtype));
    const tfs_tensor *x = k->in[0];
    if (x->rank != 4 && x->rank != 5)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input must be 4 or 5-dimensional, got %s",
                             tfs_shape_str(x->rank, x->dims, buf, sizeof buf));
    const char *fmt = tfs__attr_str(n, "data_format", "NHWC");
    if (!strcmp(fmt, "NHWC") || !strcmp(fmt, "NDHWC"))
        l->last = true;
    else if (!strcmp(fmt, "NCHW") || !strcmp(fmt, "NCDHW"))
        l->last = false;
    else
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Invalid data format '%s'", fmt);
    l->C = l->last ? x->dims[x->rank - 1] : x->dims[1];
    int64_t spatial = 1;
    for (int d = l->last ? 1 : 2; d < (l->last ? x->rank - 1 : x->rank); d++)
        spatial *= x->dims[d];
    l->outer = l->last ? 1 : x->dims[0];
    l->inner = l->last ? x->dims[0] * spatial : spatial;
    static const char *const names[] = {"x", "scale", "offset", "mean", "variance"};
    for (int i = 1; i < 5; i++) {
        const tfs_tensor *t = k->in[i];
        if (t->rank != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be 1-dimensional, got %s",
                                 names[i], tfs_shape_str(t->rank, t->dims, buf, sizeof buf));
        if ((i <= 2 || needs_stats) && t->nelem != l->C)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s must have the same number of elements as the channels of x, "
                                 "got %lld and %lld", names[i], (long long)t->nelem,
                                 (long long)l->C);
    }
    return TFS_OK;
}

/* y = (x - mean) * factor + offset per channel. */
static void bn_apply(const bn_layout *l, const float *x, const float *mean, const float *factor,
                     const float *offset, float *y)
{
    for (int64_t o = 0; o < l->outer; o++) {
        if (l->last) {
            for (int64_t s = 0; s < l->inner; s++) {
                int64_t i = bn_index(l, o, 0, s);
                for (int64_t c = 0; c < l->C; c++)
                    y[i + c] = (x[i + c] - mean[c]) * factor[c] + offset[c];
            }
        } else {
            for (int64_t c = 0; c < l->C; c++) {
                int64_t i = bn_index(l, o, c, 0);
                for (int64_t s = 0; s < l->inner; s++)
                    y[i + s] = (x[i + s] - mean[c]) * factor[c] + offset[c];
            }
        }
    }
}

/* Per-channel mean and biased variance over every other axis, accumulated in double. */
static void bn_moments(const bn_layout *l, const float *x, double *sum, double *sq)
{
    int64_t count = l->outer * l->inner;
    for (int64_t c = 0; c < l->C; c++)
        sum[c] = sq[c] = 0;
    for (int64_t o = 0; o < l->outer; o++)
        for (int64_t s = 0; s < l->inner; s++)
            for (int64_t c = 0; c < l->C; c++)
                sum[c] += x[bn_index(l, o, c, s)];
    for (int64_t c = 0; c < l->C; c++)
        sum[c] /= (double)count;
    for (int64_t o = 0; o < l->outer; o++)
        for (int64_t s = 0; s < l->inner; s++)
            for (int64_t c = 0; c < l->C; c++) {
                double d = x[bn_index(l, o, c, s)] - sum[c];
                sq[c] += d * d;
            }
    for (int64_t c = 0; c < l->C; c++)
        sq[c] /= (double)count;
}

enum tfs_code tfs__k_fused_batch_norm(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    float eps, factor_avg;
    bool training;
    enum tfs_code rc = tfs__nn_attr_float(n, "epsilon", 1e-4f, &eps, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_float(n, "exponential_avg_factor", 1.0f, &factor_avg, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "is_training", true, &training, st);
    bn_layout l;
    if (rc == TFS_OK)
        rc = bn_check_inputs(k, &l, !training || factor_avg != 1.0f, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0];
    const float *scale = k->in[1]->data, *offset = k->in[2]->data;
    const float *mean_in = k->in[3]->data, *var_in = k->in[4]->data;
    int nout = k->n_out < 6 ? k->n_out : 6;
    tfs_tensor *outs[6] = {NULL};
    double *sum = NULL, *sq = NULL;
    float *fac = NULL, *mean_used = NULL;
    int64_t cdims[1] = {l.C};
    /* y, batch_mean and batch_variance are written on every path; reserve_space_* stay zeroed. */
    rc = tfs__kernel_output(k, 0, TFS_DTYPE_FLOAT, x->rank, x->dims, &outs[0], st);
    for (int i = 1; i < nout && i < 3 && rc == TFS_OK; i++)
        rc = tfs__kernel_output(k, i, TFS_DTYPE_FLOAT, 1, cdims, &outs[i], st);
    for (int i = 3; i < nout && i < 5 && rc == TFS_OK; i++)
        rc = tfs_tensor_new(TFS_DTYPE_FLOAT, 1, cdims, &outs[i], st);
    if (rc == TFS_OK && nout == 6)
        rc = tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &outs[5], st);
    if (rc != TFS_OK)
        goto fail;
    size_t cn = l.C > 0 ? (size_t)l.C : 1;
    sum = tfs_calloc(cn, sizeof *sum);
    sq = tfs_calloc(cn, sizeof *sq);
    fac = tfs_calloc(cn, sizeof *fac);
    mean_used = tfs_calloc(cn, sizeof *mean_used);
    if (!sum || !sq || !fac || !mean_used) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    float *bmean = outs[1]->data, *bvar = outs[2]->data;
    if (x->nelem == 0) {
        /* TensorFlow's CPU kernel returns NaN statistics for an empty input. */
        for (int64_t c = 0; c < l.C; c++)
            bmean[c] = bvar[c] = NAN;
        goto done;
    }
    if (!training) {
        for (int64_t c = 0; c < l.C; c++) {
            fac[c] = 1.0f / sqrtf(var_in[c] + eps) * scale[c];
            bmean[c] = mean_in[c];
            bvar[c] = var_in[c];
        }
        bn_apply(&l, x->data, mean_in, fac, offset, outs[0]->data);
        goto done;
    }
    bn_moments(&l, x->data, sum, sq);
    int64_t count = l.outer * l.inner;
    double bessel = (double)count / (double)(count > 1 ? count - 1 : 1);
    float *saved_mean = outs[3]->data, *saved_var = outs[4]->data;
    for (int64_t c = 0; c < l.C; c++) {
        mean_used[c] = (float)sum[c];
        fac[c] = 1.0f / sqrtf((float)sq[c] + eps) * scale[c];
        saved_mean[c] = (float)sum[c];
        saved_var[c] = (float)sq[c];
        double new_mean = sum[c], new_var = sq[c] * bessel;
        if (factor_avg != 1.0f) {
            double f = factor_avg;
            new_mean = (1 - f) * mean_in[c] + f * new_mean;
            new_var = (1 - f) * var_in[c] + f * new_var;
        }
        bmean[c] = (float)new_mean;
        bvar[c] = (float)new_var;
    }
    bn_apply(&l, x->data, mean_used, fac, offset, outs[0]->data);
done:
    for (int i = 0; i < nout; i++)
        k->out[i] = outs[i];
    tfs_free(sum);
    tfs_free(sq);
    tfs_free(fac);
    tfs_free(mean_used);
    return TFS_OK;
fail:
    for (int i = 0; i < 6; i++)
        tfs_tensor_unref(outs[i]);
    tfs_free(sum);
    tfs_free(sq);
    tfs_free(fac);
    tfs_free(mean_used);
    return rc;
}
