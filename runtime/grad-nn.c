/* Gradient functions of the neural-network ops (build-impl.h), as TensorFlow's nn_grad.py and
 * math_grad.py (MatMul) write them: TensorFlow's own gradient kernels (ReluGrad,
 * Conv2DBackpropInput, MaxPoolGrad, FusedBatchNormGradV3, ...) with the forward node's attrs.
 */
#include "runtime/build-impl.h"

#include <string.h>

#define G (c->g)

static tfs_out bin(tfs_grad_ctx *c, const char *op, tfs_out a, tfs_out b)
{
    return tfs_build_binary(G, op, a, b);
}

/* Copies the named attrs (those present) of the forward node onto node `to`. */
static void copy_attrs(tfs_grad_ctx *c, tfs_out to, const char *const *names)
{
    if (!tfs_out_ok(to))
        return;
    for (; *names; names++) {
        const tfs_attr_value *a = tfs_graph_node_attr(G, c->node, *names);
        if (a)
            tfs_graph_set_attr(G, to.node, *names, a);
    }
}

static bool attr_bool(tfs_grad_ctx *c, const char *name, bool dflt)
{
    const tfs_attr_value *a = tfs_graph_node_attr(G, c->node, name);
    return a && a->kind == TFS_ATTR_B ? a->b : dflt;
}

static tfs_out matmul(tfs_grad_ctx *c, tfs_out a, tfs_out b, bool ta, bool tb)
{
    return tfs_build_matmul(G, a, b, ta, tb);
}

TFS_GRAD(tfs__grad_mat_mul)
{
    bool ta = attr_bool(c, "transpose_a", false), tb = attr_bool(c, "transpose_b", false);
    tfs_out a = c->x[0], b = c->x[1], g = c->dy[0];
    if (!ta && !tb) {
        c->dx[0] = matmul(c, g, b, false, true);
        c->dx[1] = matmul(c, a, g, true, false);
    } else if (!ta && tb) {
        c->dx[0] = matmul(c, g, b, false, false);
        c->dx[1] = matmul(c, g, a, true, false);
    } else if (ta && !tb) {
        c->dx[0] = matmul(c, b, g, false, true);
        c->dx[1] = matmul(c, a, g, false, false);
    } else {
        c->dx[0] = matmul(c, b, g, true, true);
        c->dx[1] = matmul(c, g, a, true, true);
    }
    return TFS_OK;
}

TFS_GRAD(tfs__grad_bias_add)
{
    c->dx[0] = c->dy[0];
    tfs_out db = tfs_build_unary(G, "BiasAddGrad", c->dy[0]);
    static const char *const attrs[] = {"data_format", NULL};
    copy_attrs(c, db, attrs);
    c->dx[1] = db;
    return TFS_OK;
}

/* Activation gradients: TensorFlow's kernel OP(dy, features-or-outputs). */
static enum tfs_code act(tfs_grad_ctx *c, const char *op, bool use_output)
{
    c->dx[0] = bin(c, op, c->dy[0], use_output ? c->y[0] : c->x[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_relu)
{
    return act(c, "ReluGrad", true);
}

TFS_GRAD(tfs__grad_relu6)
{
    return act(c, "Relu6Grad", false);
}

TFS_GRAD(tfs__grad_elu)
{
    return act(c, "EluGrad", true);
}

TFS_GRAD(tfs__grad_selu)
{
    return act(c, "SeluGrad", true);
}

TFS_GRAD(tfs__grad_softplus)
{
    return act(c, "SoftplusGrad", false);
}

TFS_GRAD(tfs__grad_leaky_relu)
{
    act(c, "LeakyReluGrad", false);
    static const char *const attrs[] = {"alpha", NULL};
    copy_attrs(c, c->dx[0], attrs);
    return TFS_OK;
}

/* Sum over the last axis, keeping it. */
static tfs_out sum_last(tfs_grad_ctx *c, tfs_out x)
{
    return tfs_build_reduce(G, "Sum", x, tfs_build_ints(G, 1, (int64_t[]){-1}), true);
}

/* Softmax: (dy - sum(dy * y, -1)) * y. */
TFS_GRAD(tfs__grad_softmax)
{
    tfs_out y = c->y[0], dy = c->dy[0];
    c->dx[0] = bin(c, "Mul", bin(c, "Sub", dy, sum_last(c, bin(c, "Mul", dy, y))), y);
    return TFS_OK;
}

/* LogSoftmax: dy - sum(dy, -1) * exp(y). */
TFS_GRAD(tfs__grad_log_softmax)
{
    tfs_out y = c->y[0], dy = c->dy[0];
    c->dx[0] = bin(c, "Sub", dy, bin(c, "Mul", sum_last(c, dy), tfs_build_unary(G, "Exp", y)));
    return TFS_OK;
}

static const char *const CONV_ATTRS[] = {"strides", "padding", "explicit_paddings", "dilations",
                                         "data_format", "use_cudnn_on_gpu", NULL};

static enum tfs_code conv_grad(tfs_grad_ctx *c, const char *input_op, const char *filter_op)
{
    tfs_out x = c->x[0], w = c->x[1], dy = c->dy[0];
    tfs_out in_dx[3] = {tfs_build_shape(G, x), w, dy};
    tfs_out in_dw[3] = {x, tfs_build_shape(G, w), dy};
    c->dx[0] = tfs_build_op(G, input_op, NULL, 3, in_dx);
    copy_attrs(c, c->dx[0], CONV_ATTRS);
    c->dx[1] = tfs_build_op(G, filter_op, NULL, 3, in_dw);
    copy_attrs(c, c->dx[1], CONV_ATTRS);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_conv2d)
{
    return conv_grad(c, "Conv2DBackpropInput", "Conv2DBackpropFilter");
}

TFS_GRAD(tfs__grad_depthwise_conv2d)
{
    return conv_grad(c, "DepthwiseConv2dNativeBackpropInput",
                     "DepthwiseConv2dNativeBackpropFilter");
}

static const char *const POOL_ATTRS[] = {"ksize", "strides", "padding", "explicit_paddings",
                                         "data_format", NULL};

TFS_GRAD(tfs__grad_max_pool)
{
    tfs_out in[3] = {c->x[0], c->y[0], c->dy[0]};
    c->dx[0] = tfs_build_op(G, "MaxPoolGrad", NULL, 3, in);
    copy_attrs(c, c->dx[0], POOL_ATTRS);
    return TFS_OK;
}

/* image_grad.py: the resize ops' gradients, with the forward node's sampling attrs; the size
 * input gets none. */
static const char *const RESIZE_ATTRS[] = {"align_corners", "half_pixel_centers", NULL};

TFS_GRAD(tfs__grad_resize_bilinear)
{
    tfs_out in[2] = {c->dy[0], c->x[0]};
    c->dx[0] = tfs_build_op(G, "ResizeBilinearGrad", NULL, 2, in);
    copy_attrs(c, c->dx[0], RESIZE_ATTRS);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_resize_nearest_neighbor)
{
    /* size = Shape(image)[1:3] */
    tfs_out slice_in[3] = {tfs_build_shape(G, c->x[0]), tfs_build_ints(G, 1, (int64_t[]){1}),
                           tfs_build_ints(G, 1, (int64_t[]){2})};
    tfs_out in[2] = {c->dy[0], tfs_build_op(G, "Slice", NULL, 3, slice_in)};
    c->dx[0] = tfs_build_op(G, "ResizeNearestNeighborGrad", NULL, 2, in);
    copy_attrs(c, c->dx[0], RESIZE_ATTRS);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_avg_pool)
{
    tfs_out in[2] = {tfs_build_shape(G, c->x[0]), c->dy[0]};
    c->dx[0] = tfs_build_op(G, "AvgPoolGrad", NULL, 2, in);
    copy_attrs(c, c->dx[0], POOL_ATTRS);
    return TFS_OK;
}

/* FusedBatchNorm{,V2,V3}: FusedBatchNormGradV3 on (dy, x, scale) with the forward op's reserve
 * spaces in training mode, or the population mean and variance (inputs 3, 4) in inference mode.
 * The gradients of the batch statistics outputs are not propagated (TensorFlow ignores them). */
TFS_GRAD(tfs__grad_fused_batch_norm)
{
    bool training = attr_bool(c, "is_training", true);
    const char *op = tfs_graph_node_op(G, c->node);
    bool v3 = !strcmp(op, "FusedBatchNormV3");
    tfs_out r1 = training ? c->y[3] : c->x[3];
    tfs_out r2 = training ? c->y[4] : c->x[4];
    tfs_out r3 = v3 && training ? c->y[5] : r1;
    tfs_out in[6] = {tfs__grad_dy_or_zeros(c, 0), c->x[0], c->x[1], r1, r2, r3};
    tfs_out g = tfs_build_op(G, "FusedBatchNormGradV3", NULL, 6, in);
    static const char *const attrs[] = {"epsilon", "data_format", "is_training", NULL};
    copy_attrs(c, g, attrs);
    if (tfs_out_ok(g)) {
        const tfs_attr_value *u = tfs_graph_node_attr(G, c->node, "U");
        tfs_graph_set_attr_type(G, g.node, "U", u && u->kind == TFS_ATTR_TYPE ? u->type
                                : tfs_dtype_base(tfs_build_dtype(G, c->x[1])));
        if (!tfs_graph_node_attr(G, c->node, "is_training"))
            tfs_graph_set_attr_bool(G, g.node, "is_training", true);
    }
    c->dx[0] = g;
    c->dx[1] = tfs_out_at(g, 1);
    c->dx[2] = tfs_out_at(g, 2);
    return TFS_OK;
}

/* Scales the per-example loss gradient [batch] over the classes: dy[:, None] * m. */
static tfs_out per_example(tfs_grad_ctx *c, tfs_out m)
{
    tfs_out axis = tfs_build_scalar(G, TFS_DTYPE_INT32, -1);
    tfs_out in[2] = {c->dy[0], axis};
    return bin(c, "Mul", tfs_build_op(G, "ExpandDims", NULL, 2, in), m);
}

TFS_GRAD(tfs__grad_softmax_xent)
{
    if (tfs_out_ok(c->dy[1]))
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "gradient of SoftmaxCrossEntropyWithLogits' "
                       "backprop output (a second derivative) is not supported");
    if (!tfs_out_ok(c->dy[0]))
        return TFS_OK;
    c->dx[0] = per_example(c, c->y[1]);
    tfs_out ls = tfs_build_unary(G, "LogSoftmax", c->x[0]);
    c->dx[1] = per_example(c, tfs_build_unary(G, "Neg", ls));
    return TFS_OK;
}

TFS_GRAD(tfs__grad_sparse_softmax_xent)
{
    if (tfs_out_ok(c->dy[1]))
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "gradient of SparseSoftmaxCrossEntropyWithLogits' "
                       "backprop output (a second derivative) is not supported");
    if (tfs_out_ok(c->dy[0]))
        c->dx[0] = per_example(c, c->y[1]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_l2_loss)
{
    c->dx[0] = bin(c, "Mul", c->x[0], c->dy[0]);
    return TFS_OK;
}
