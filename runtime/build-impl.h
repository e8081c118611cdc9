/* Internals of the graph builder (build.h) and autodiff shared by runtime/build*.c and
 * runtime/grad-*.c. Include only from runtime/ (and tests).
 */
#ifndef TFS_RUNTIME_BUILD_IMPL_H
#define TFS_RUNTIME_BUILD_IMPL_H

#include "runtime/runtime-impl.h"

/* ---- type attrs (build-types.c) ---------------------------------------------------------- */

/* Sets the type attrs (and the list-length attr) that op's inputs bind, from the inputs'
 * dtypes; attrs the caller already set are kept. No-op for op types the table lacks. */
void tfs__build_set_type_attrs(tfs_graph *g, int node, const char *op, int n_in,
                               const enum tfs_dtype *in_dtypes);
/* Output `index`'s dtype from the node's op and attrs; TFS_DTYPE_INVALID when unknown. */
enum tfs_dtype tfs__build_output_dtype(const tfs_graph *g, int node, int index);

/* ---- gradient functions (gradients.c, grad-*.c) ---------------------------------------------- */

/* What a gradient function sees of one forward node, and where it writes. */
typedef struct tfs_grad_ctx {
    tfs_graph     *g;
    int            node;    /* the forward node */
    int            n_in;
    const tfs_out *x;       /* [n_in] its data inputs */
    int            n_out;
    const tfs_out *y;       /* [n_out] its outputs */
    const tfs_out *dy;      /* [n_out] gradients of its outputs (TFS_OUT_NONE: zero) */
    tfs_out       *dx;      /* [n_in] gradients of its inputs, TFS_OUT_NONE on entry */
} tfs_grad_ctx;

/* Emits the nodes computing c->dx from c->dy. Returns OK, or an error (UNIMPLEMENTED for an
 * attr combination without a gradient); builder errors stay sticky in the graph. */
typedef enum tfs_code (*tfs_grad_fn)(tfs_grad_ctx *c, tfs_status *st);

/* The gradient function of an op, NULL when it has none (gradients.c's table). */
tfs_grad_fn tfs__grad_fn(enum tfs_op op);

/* Gradient functions by family. */
#define TFS_GRAD(name) enum tfs_code name(tfs_grad_ctx *c, tfs_status *st)
/* grad-math.c */
TFS_GRAD(tfs__grad_identity);
TFS_GRAD(tfs__grad_add);
TFS_GRAD(tfs__grad_sub);
TFS_GRAD(tfs__grad_mul);
TFS_GRAD(tfs__grad_real_div);
TFS_GRAD(tfs__grad_maximum);
TFS_GRAD(tfs__grad_minimum);
TFS_GRAD(tfs__grad_squared_difference);
TFS_GRAD(tfs__grad_pow);
TFS_GRAD(tfs__grad_neg);
TFS_GRAD(tfs__grad_abs);
TFS_GRAD(tfs__grad_square);
TFS_GRAD(tfs__grad_sqrt);
TFS_GRAD(tfs__grad_rsqrt);
TFS_GRAD(tfs__grad_reciprocal);
TFS_GRAD(tfs__grad_exp);
TFS_GRAD(tfs__grad_log);
TFS_GRAD(tfs__grad_log1p);
TFS_GRAD(tfs__grad_tanh);
TFS_GRAD(tfs__grad_sigmoid);
TFS_GRAD(tfs__grad_add_n);
TFS_GRAD(tfs__grad_sum);
TFS_GRAD(tfs__grad_mean);
TFS_GRAD(tfs__grad_cast);
TFS_GRAD(tfs__grad_clip_by_value);
TFS_GRAD(tfs__grad_zero);
/* grad-nn.c */
TFS_GRAD(tfs__grad_mat_mul);
TFS_GRAD(tfs__grad_bias_add);
TFS_GRAD(tfs__grad_relu);
TFS_GRAD(tfs__grad_relu6);
TFS_GRAD(tfs__grad_elu);
TFS_GRAD(tfs__grad_selu);
TFS_GRAD(tfs__grad_leaky_relu);
TFS_GRAD(tfs__grad_softplus);
TFS_GRAD(tfs__grad_softmax);
TFS_GRAD(tfs__grad_log_softmax);
TFS_GRAD(tfs__grad_conv2d);
TFS_GRAD(tfs__grad_depthwise_conv2d);
TFS_GRAD(tfs__grad_max_pool);
TFS_GRAD(tfs__grad_avg_pool);
TFS_GRAD(tfs__grad_resize_bilinear);
TFS_GRAD(tfs__grad_resize_nearest_neighbor);
TFS_GRAD(tfs__grad_fused_batch_norm);
TFS_GRAD(tfs__grad_softmax_xent);
TFS_GRAD(tfs__grad_sparse_softmax_xent);
TFS_GRAD(tfs__grad_l2_loss);
/* grad-array.c */
TFS_GRAD(tfs__grad_reshape);
TFS_GRAD(tfs__grad_expand_dims);
TFS_GRAD(tfs__grad_squeeze);
TFS_GRAD(tfs__grad_transpose);
TFS_GRAD(tfs__grad_concat);
TFS_GRAD(tfs__grad_pack);
TFS_GRAD(tfs__grad_gather);
TFS_GRAD(tfs__grad_tile);
TFS_GRAD(tfs__grad_pad);
TFS_GRAD(tfs__grad_select);
TFS_GRAD(tfs__grad_slice);

/* ---- helpers for gradient functions (gradients.c) ------------------------------------------- */

/* dy, or zeros shaped like y when dy is TFS_OUT_NONE. */
tfs_out tfs__grad_dy_or_zeros(tfs_grad_ctx *c, int i);
/* Sums g over the axes along which `x` was broadcast to g's shape and reshapes to x's shape
 * (BroadcastGradientArgs on Shape(x), Shape(other) picks the axes; `first` says whether x is
 * the op's first operand). */
tfs_out tfs__grad_unbroadcast(tfs_graph *g, tfs_out grad, tfs_out x, tfs_out other, bool first);
/* A scalar Const of x's dtype. */
tfs_out tfs__grad_scalar_like(tfs_graph *g, tfs_out x, double v);

#endif
