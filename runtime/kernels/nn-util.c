/* Helpers shared by the nn kernels (nn-matmul.c, nn-conv.c, nn-pool.c, nn-norm.c): attrs that
 * graphs saved with stripped default attrs leave out, the FusedBatchNorm output counts, and the
 * window geometry of 2-D NHWC convolutions and pools.
 *
 * The geometry follows TensorFlow's GetWindowedOutputSize: with an effective window
 * eff = (k - 1) * dilation + 1,
 *   VALID:    out = (in - eff + stride) / stride, no padding;
 *   SAME:     out = ceil(in / stride), pad_total = max((out - 1) * stride + eff - in, 0),
 *             pad_before = pad_total / 2 (the odd pixel goes after);
 *   EXPLICIT: out = (in + before + after - eff + stride) / stride.
 * A negative size is an error; C's division truncates toward zero as TensorFlow's C++ does, so
 * the same shapes give the same (possibly 0) sizes.
 */
#include <string.h>

#include "runtime/runtime-impl.h"

/* Bounds that keep every product below in int64_t; far above any real model. */
#define NN_MAX_WINDOW ((int64_t)1 << 31)

int tfs__nn_nout_batch_norm(const tfs_node *n)
{
    (void)n;
    return 5;   /* y, batch_mean, batch_variance, reserve_space_1, reserve_space_2 */
}

int tfs__nn_nout_batch_norm_v3(const tfs_node *n)
{
    (void)n;
    return 6;   /* ... and reserve_space_3 */
}

enum tfs_code tfs__nn_attr_bool(const tfs_node *n, const char *name, bool dflt, bool *out,
                                tfs_status *st)
{
    if (!tfs__attr(n, name)) {
        *out = dflt;
        return TFS_OK;
    }
    return tfs__attr_bool(n, name, out, st);
}

enum tfs_code tfs__nn_attr_float(const tfs_node *n, const char *name, float dflt, float *out,
                                 tfs_status *st)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    if (!v) {
        *out = dflt;
        return TFS_OK;
    }
    if (v->kind != TFS_ATTR_F)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr '%s' is not a float", name);
    *out = v->f;
    return TFS_OK;
}

enum tfs_code tfs__nn_attr_ints(const tfs_node *n, const char *name, int count,
                                const int64_t *dflt, int64_t *out, tfs_status *st)
{
    if (!tfs__attr(n, name) && dflt) {
        memcpy(out, dflt, (size_t)count * sizeof *out);
        return TFS_OK;
    }
    const tfs_attr_list *l;
    enum tfs_code rc = tfs__attr_list(n, name, TFS_ATTR_I, &l, st);
    if (rc != TFS_OK)
        return rc;
    if (l->n != count)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr '%s' must have %d values, has %d",
                             name, count, l->n);
    for (int i = 0; i < count; i++)
        out[i] = l->i[i];
    return TFS_OK;
}

enum pad_mode { PAD_VALID, PAD_SAME, PAD_EXPLICIT };

/* One spatial axis: output size and padding before, by the rules in the file comment. */
static enum tfs_code window_axis(const tfs_node *n, const char *axis, int64_t in, int64_t k,
                                 int64_t stride, int64_t dil, enum pad_mode mode,
                                 int64_t exp_before, int64_t exp_after, int64_t *out,
                                 int64_t *pad_before, tfs_status *st)
{
    int64_t eff = (k - 1) * dil + 1;
    int64_t size;
    switch (mode) {
    case PAD_VALID:
        size = (in - eff + stride) / stride;
        *pad_before = 0;
        break;
    case PAD_SAME: {
        size = (in + stride - 1) / stride;
        int64_t total = (size - 1) * stride + eff - in;
        *pad_before = total > 0 ? total / 2 : 0;
        break;
    }
    default:
        size = (in + exp_before + exp_after - eff + stride) / stride;
        *pad_before = exp_before;
        break;
    }
    if (size < 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Computed output size would be negative: %lld [%s: input %lld, "
                             "effective window %lld, stride %lld]",
                             (long long)size, axis, (long long)in, (long long)eff,
                             (long long)stride);
    *out = size;
    return TFS_OK;
}

enum tfs_code tfs__nn_geom_init(const tfs_node *n, const tfs_tensor *in, int64_t k_h, int64_t k_w,
                                bool dilations, tfs_nn_geom *g, tfs_status *st)
{
    return tfs__nn_geom_init_shape(n, in->rank, in->dims, k_h, k_w, dilations, g, st);
}

enum tfs_code tfs__nn_geom_init_shape(const tfs_node *n, int rank, const int64_t *dims, int64_t k_h,
                                      int64_t k_w, bool dilations, tfs_nn_geom *g, tfs_status *st)
{
    static const int64_t ones[4] = {1, 1, 1, 1};
    static const int64_t zeros[8] = {0};
    int64_t strides[4], dil[4] = {1, 1, 1, 1}, pads[8] = {0};
    memset(g, 0, sizeof *g);
    const char *fmt = tfs__attr_str(n, "data_format", "NHWC");
    if (strcmp(fmt, "NHWC") != 0)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "data_format %s is not supported on the CPU (only NHWC)", fmt);
    if (rank != 4) {
        char buf[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input must be 4-dimensional, got %s",
                             tfs_shape_str(rank, dims, buf, sizeof buf));
    }
    if (k_h < 1 || k_w < 1 || k_h >= NN_MAX_WINDOW || k_w >= NN_MAX_WINDOW)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "window size %lldx%lld must be positive (and below 2^31)",
                             (long long)k_h, (long long)k_w);
    enum tfs_code rc = tfs__nn_attr_ints(n, "strides", 4, NULL, strides, st);
    if (rc == TFS_OK && dilations)
        rc = tfs__nn_attr_ints(n, "dilations", 4, ones, dil, st);
    if (rc != TFS_OK)
        return rc;
    if (strides[0] != 1 || strides[3] != 1)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "strides in the batch and depth dimensions are not supported");
    if (dil[0] != 1 || dil[3] != 1)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "dilations in the batch and depth dimensions are not supported");
    for (int i = 1; i <= 2; i++) {
        if (strides[i] < 1 || strides[i] >= NN_MAX_WINDOW)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "strides[%d] = %lld is out of range",
                                 i, (long long)strides[i]);
        if (dil[i] < 1 || dil[i] >= NN_MAX_WINDOW)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "dilations[%d] = %lld is out of range", i, (long long)dil[i]);
    }
    const char *padding = tfs__attr_str(n, "padding", NULL);
    enum pad_mode mode;
    if (!padding)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "missing attr 'padding'");
    if (!strcmp(padding, "VALID")) {
        mode = PAD_VALID;
    } else if (!strcmp(padding, "SAME")) {
        mode = PAD_SAME;
    } else if (!strcmp(padding, "EXPLICIT")) {
        mode = PAD_EXPLICIT;
        if ((rc = tfs__nn_attr_ints(n, "explicit_paddings", 8, NULL, pads, st)) != TFS_OK)
            return rc;
        for (int i = 0; i < 8; i++)
            if (pads[i] < 0 || pads[i] >= NN_MAX_WINDOW)
                return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                     "explicit_paddings[%d] = %lld is out of range", i,
                                     (long long)pads[i]);
        if (pads[0] || pads[1] || pads[6] || pads[7])
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "padding in the batch and depth dimensions is not supported");
    } else {
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "padding must be SAME, VALID or EXPLICIT, got '%s'", padding);
    }
    if (mode != PAD_EXPLICIT) {
        /* explicit_paddings must be empty unless padding is EXPLICIT. */
        const tfs_attr_value *ep = tfs__attr(n, "explicit_paddings");
        if (ep && ep->kind == TFS_ATTR_LIST && ep->list.n != 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "explicit_paddings must be empty when padding is %s", padding);
        memcpy(pads, zeros, sizeof pads);
    }
    g->batch = dims[0];
    g->in_h = dims[1];
    g->in_w = dims[2];
    g->in_c = dims[3];
    g->k_h = k_h;
    g->k_w = k_w;
    g->stride_h = strides[1];
    g->stride_w = strides[2];
    g->dil_h = dil[1];
    g->dil_w = dil[2];
    rc = window_axis(n, "rows", g->in_h, k_h, g->stride_h, g->dil_h, mode, pads[2], pads[3],
                     &g->out_h, &g->pad_top, st);
    if (rc == TFS_OK)
        rc = window_axis(n, "cols", g->in_w, k_w, g->stride_w, g->dil_w, mode, pads[4], pads[5],
                         &g->out_w, &g->pad_left, st);
    return rc;
}
