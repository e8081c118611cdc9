/* Gradient functions of the elementwise math ops, reductions and casts (build-impl.h), with
 * TensorFlow's formulas (tensorflow/python/ops/math_grad.py): binary ops sum their gradient over
 * broadcast axes (tfs__grad_unbroadcast); unary ops use TensorFlow's fused gradient kernels
 * where it has one (TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad, ReciprocalGrad).
 */
#include "runtime/build-impl.h"

#define G (c->g)

static tfs_out bin(tfs_grad_ctx *c, const char *op, tfs_out a, tfs_out b)
{
    return tfs_build_binary(G, op, a, b);
}

static tfs_out un(tfs_grad_ctx *c, const char *op, tfs_out a)
{
    return tfs_build_unary(G, op, a);
}

TFS_GRAD(tfs__grad_zero)
{
    (void)c;
    tfs_status_clear(st);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_identity)
{
    c->dx[0] = c->dy[0];
    return TFS_OK;
}

TFS_GRAD(tfs__grad_add)
{
    tfs_out dy = c->dy[0];
    c->dx[0] = tfs__grad_unbroadcast(G, dy, c->x[0], c->x[1], true);
    c->dx[1] = tfs__grad_unbroadcast(G, dy, c->x[1], c->x[0], false);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_sub)
{
    tfs_out dy = c->dy[0];
    c->dx[0] = tfs__grad_unbroadcast(G, dy, c->x[0], c->x[1], true);
    c->dx[1] = tfs__grad_unbroadcast(G, un(c, "Neg", dy), c->x[1], c->x[0], false);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_mul)
{
    tfs_out dy = c->dy[0];
    c->dx[0] = tfs__grad_unbroadcast(G, bin(c, "Mul", dy, c->x[1]), c->x[0], c->x[1], true);
    c->dx[1] = tfs__grad_unbroadcast(G, bin(c, "Mul", c->x[0], dy), c->x[1], c->x[0], false);
    return TFS_OK;
}

/* d(a/b): dy/b and dy * (-a / b) / b. */
TFS_GRAD(tfs__grad_real_div)
{
    tfs_out dy = c->dy[0], a = c->x[0], b = c->x[1];
    c->dx[0] = tfs__grad_unbroadcast(G, bin(c, "RealDiv", dy, b), a, b, true);
    tfs_out q = bin(c, "RealDiv", bin(c, "RealDiv", un(c, "Neg", a), b), b);
    c->dx[1] = tfs__grad_unbroadcast(G, bin(c, "Mul", dy, q), b, a, false);
    return TFS_OK;
}

/* Maximum/Minimum: the gradient goes to x where mask(x, y) holds (ties: to x), else to y. */
static enum tfs_code select_grad(tfs_grad_ctx *c, const char *mask_op)
{
    tfs_out dy = c->dy[0];
    tfs_out mask = bin(c, mask_op, c->x[0], c->x[1]);
    tfs_out zeros = un(c, "ZerosLike", dy);
    tfs_out in0[3] = {mask, dy, zeros}, in1[3] = {mask, zeros, dy};
    tfs_out gx = tfs_build_op(G, "SelectV2", NULL, 3, in0);
    tfs_out gy = tfs_build_op(G, "SelectV2", NULL, 3, in1);
    c->dx[0] = tfs__grad_unbroadcast(G, gx, c->x[0], c->x[1], true);
    c->dx[1] = tfs__grad_unbroadcast(G, gy, c->x[1], c->x[0], false);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_maximum)
{
    return select_grad(c, "GreaterEqual");
}

TFS_GRAD(tfs__grad_minimum)
{
    return select_grad(c, "LessEqual");
}

/* (a - b)^2: 2 (a - b) dy and its negation. */
TFS_GRAD(tfs__grad_squared_difference)
{
    tfs_out a = c->x[0], b = c->x[1];
    tfs_out two = tfs__grad_scalar_like(G, a, 2.0);
    tfs_out g = bin(c, "Mul", bin(c, "Mul", two, c->dy[0]), bin(c, "Sub", a, b));
    c->dx[0] = tfs__grad_unbroadcast(G, g, a, b, true);
    c->dx[1] = tfs__grad_unbroadcast(G, un(c, "Neg", g), b, a, false);
    return TFS_OK;
}

/* z = x^y: dy * y * x^(y-1); dy * z * log(x) where x > 0, else 0 (TensorFlow's rule). */
TFS_GRAD(tfs__grad_pow)
{
    tfs_out x = c->x[0], y = c->x[1], z = c->y[0], dy = c->dy[0];
    tfs_out one = tfs__grad_scalar_like(G, x, 1.0);
    tfs_out gx = bin(c, "Mul", bin(c, "Mul", dy, y), bin(c, "Pow", x, bin(c, "Sub", y, one)));
    c->dx[0] = tfs__grad_unbroadcast(G, gx, x, y, true);
    tfs_out zero = tfs__grad_scalar_like(G, x, 0.0);
    tfs_out pos = bin(c, "Greater", x, zero);
    tfs_out ones = un(c, "OnesLike", x);
    tfs_out safe_in[3] = {pos, x, ones};
    tfs_out safe = tfs_build_op(G, "SelectV2", NULL, 3, safe_in);
    tfs_out log_in[3] = {pos, un(c, "Log", safe), un(c, "ZerosLike", x)};
    tfs_out logx = tfs_build_op(G, "SelectV2", NULL, 3, log_in);
    tfs_out gy = bin(c, "Mul", bin(c, "Mul", dy, z), logx);
    c->dx[1] = tfs__grad_unbroadcast(G, gy, y, x, false);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_neg)
{
    c->dx[0] = un(c, "Neg", c->dy[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_abs)
{
    c->dx[0] = bin(c, "Mul", c->dy[0], un(c, "Sign", c->x[0]));
    return TFS_OK;
}

TFS_GRAD(tfs__grad_square)
{
    tfs_out two = tfs__grad_scalar_like(G, c->x[0], 2.0);
    c->dx[0] = bin(c, "Mul", c->dy[0], bin(c, "Mul", two, c->x[0]));
    return TFS_OK;
}

/* The fused "(y, dy)" gradient kernels of TensorFlow. */
static enum tfs_code fused_y_dy(tfs_grad_ctx *c, const char *op)
{
    c->dx[0] = bin(c, op, c->y[0], c->dy[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_sqrt)
{
    return fused_y_dy(c, "SqrtGrad");
}

TFS_GRAD(tfs__grad_rsqrt)
{
    return fused_y_dy(c, "RsqrtGrad");
}

TFS_GRAD(tfs__grad_reciprocal)
{
    return fused_y_dy(c, "ReciprocalGrad");
}

TFS_GRAD(tfs__grad_tanh)
{
    return fused_y_dy(c, "TanhGrad");
}

TFS_GRAD(tfs__grad_sigmoid)
{
    return fused_y_dy(c, "SigmoidGrad");
}

TFS_GRAD(tfs__grad_exp)
{
    c->dx[0] = bin(c, "Mul", c->dy[0], c->y[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_log)
{
    c->dx[0] = bin(c, "Mul", c->dy[0], un(c, "Reciprocal", c->x[0]));
    return TFS_OK;
}

TFS_GRAD(tfs__grad_log1p)
{
    tfs_out one = tfs__grad_scalar_like(G, c->x[0], 1.0);
    c->dx[0] = bin(c, "Mul", c->dy[0], un(c, "Reciprocal", bin(c, "AddV2", one, c->x[0])));
    return TFS_OK;
}

TFS_GRAD(tfs__grad_add_n)
{
    for (int i = 0; i < c->n_in; i++)
        c->dx[i] = c->dy[0];
    return TFS_OK;
}

/* Sum's gradient broadcasts dy back over the reduced axes, as TensorFlow's _SumGrad:
 * kept = DynamicStitch([range(rank), axes mod rank], [shape(x), ones]); Tile(Reshape(dy, kept),
 * shape(x) // kept). */
static tfs_out sum_grad(tfs_grad_ctx *c, tfs_out *input_shape, tfs_out *kept_shape)
{
    tfs_out x = c->x[0], axes = c->x[1];
    tfs_out shape = tfs_build_shape(G, x);
    tfs_out rank = tfs_build_op(G, "Size", NULL, 1, &shape);
    if (tfs_out_ok(rank))
        tfs_graph_set_attr_type(G, rank.node, "out_type", TFS_DTYPE_INT32);
    tfs_out axes32 = tfs_build_dtype(G, axes) == TFS_DTYPE_INT32
                         ? axes
                         : tfs_build_cast(G, axes, TFS_DTYPE_INT32);
    tfs_out norm = bin(c, "FloorMod", bin(c, "AddV2", axes32, rank), rank);
    tfs_out range_in[3] = {tfs_build_scalar(G, TFS_DTYPE_INT32, 0), rank,
                           tfs_build_scalar(G, TFS_DTYPE_INT32, 1)};
    tfs_out range = tfs_build_op(G, "Range", NULL, 3, range_in);
    tfs_out fill_in[2] = {tfs_build_shape(G, norm), tfs_build_scalar(G, TFS_DTYPE_INT32, 1)};
    tfs_out ones = tfs_build_op(G, "Fill", NULL, 2, fill_in);
    tfs_out stitch_in[4] = {range, norm, shape, ones};
    tfs_out kept = tfs_build_op(G, "DynamicStitch", NULL, 4, stitch_in);
    if (tfs_out_ok(kept)) {
        tfs_graph_set_attr_int(G, kept.node, "N", 2);
        tfs_graph_set_attr_type(G, kept.node, "T", TFS_DTYPE_INT32);
    }
    tfs_out scale = bin(c, "FloorDiv", shape, kept);
    tfs_out tile_in[2] = {tfs_build_reshape(G, c->dy[0], kept), scale};
    *input_shape = shape;
    *kept_shape = kept;
    return tfs_build_op(G, "Tile", NULL, 2, tile_in);
}

TFS_GRAD(tfs__grad_sum)
{
    tfs_out s, k;
    c->dx[0] = sum_grad(c, &s, &k);
    return TFS_OK;
}

/* Mean: Sum's gradient divided by the number of elements averaged. */
TFS_GRAD(tfs__grad_mean)
{
    tfs_out        in_shape, kept;
    tfs_out        g = sum_grad(c, &in_shape, &kept);
    tfs_out        zero = tfs_build_ints(G, 1, (int64_t[]){0});
    tfs_out        n_in = tfs_build_reduce(G, "Prod", in_shape, zero, false);
    tfs_out        n_out = tfs_build_reduce(G, "Prod", tfs_build_shape(G, c->y[0]), zero, false);
    tfs_out        one = tfs_build_scalar(G, TFS_DTYPE_INT32, 1);
    tfs_out        factor = bin(c, "FloorDiv", n_in, bin(c, "Maximum", n_out, one));
    enum tfs_dtype dt = tfs_dtype_base(tfs_build_dtype(G, c->x[0]));
    c->dx[0] = bin(c, "RealDiv", g, tfs_build_cast(G, factor, dt));
    return TFS_OK;
}

TFS_GRAD(tfs__grad_cast)
{
    enum tfs_dtype src = tfs_dtype_base(tfs_build_dtype(G, c->x[0]));
    enum tfs_dtype dst = tfs_dtype_base(tfs_build_dtype(G, c->y[0]));
    bool           fs = src == TFS_DTYPE_FLOAT || src == TFS_DTYPE_DOUBLE;
    bool           fd = dst == TFS_DTYPE_FLOAT || dst == TFS_DTYPE_DOUBLE;
    if (fs && fd)
        c->dx[0] = tfs_build_cast(G, c->dy[0], src);
    return TFS_OK;
}

/* ClipByValue(t, lo, hi): dy where lo <= t <= hi to t; where t < lo to lo; where t > hi to hi. */
TFS_GRAD(tfs__grad_clip_by_value)
{
    tfs_out t = c->x[0], lo = c->x[1], hi = c->x[2], dy = c->dy[0];
    tfs_out zeros = un(c, "ZerosLike", dy);
    tfs_out below = bin(c, "Less", t, lo), above = bin(c, "Greater", t, hi);
    tfs_out out = bin(c, "LogicalOr", below, above);
    tfs_out in_t[3] = {out, zeros, dy}, in_lo[3] = {below, dy, zeros},
            in_hi[3] = {above, dy, zeros};
    c->dx[0] = tfs_build_op(G, "SelectV2", NULL, 3, in_t);
    tfs_out glo = tfs_build_op(G, "SelectV2", NULL, 3, in_lo);
    tfs_out ghi = tfs_build_op(G, "SelectV2", NULL, 3, in_hi);
    c->dx[1] = tfs__grad_unbroadcast(G, glo, lo, t, true);
    c->dx[2] = tfs__grad_unbroadcast(G, ghi, hi, t, true);
    return TFS_OK;
}
