/* Autodiff (build.h tfs_build_gradients): every op with a gradient function is checked against
 * central finite differences of the forward op, by enumeration — a test fails when an op that
 * has a gradient has no case here. Each case builds y = op(x...) with the graph builder, takes
 * loss = sum(y * r) for a random r, and compares d loss / d x from the gradient graph with
 * (loss(x + h) - loss(x - h)) / 2h element by element.
 *
 * Tolerances: in float64, h = 1e-6 and |analytic - numeric| <= 1e-6 * max(1, |numeric|) (the
 * truncation error of central differences is O(h^2 f''') and the rounding error O(eps / h), both
 * far below that); ops whose kernels are float32-only use h = 1e-2 and 2e-2 relative.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/helpers.h"

#define MAX_IN 4

typedef tfs_out (*build_fn)(tfs_graph *g, const tfs_out *x);

typedef struct grad_case {
    const char    *op; /* the op type whose gradient the case checks */
    const char    *what;
    build_fn       build;
    const char    *shapes;    /* the inputs' shapes: "2x3 3" is [2,3] and [3]; "-" a scalar */
    double         lo, hi;    /* inputs drawn from [lo, hi] */
    enum tfs_dtype dt;        /* DOUBLE, or FLOAT for float-only kernels */
    bool           none;      /* expect no gradient at all (non-differentiable op) */
    double         step, tol; /* 0: the defaults for the dtype (see the file comment) */
} grad_case;

/* ---- the harness ---------------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;

static double uniform(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static double get(const tfs_tensor *t, int64_t i)
{
    return t->dtype == TFS_DTYPE_DOUBLE ? ((const double *)t->data)[i]
                                        : ((const float *)t->data)[i];
}

static void set(tfs_tensor *t, int64_t i, double v)
{
    if (t->dtype == TFS_DTYPE_DOUBLE)
        ((double *)t->data)[i] = v;
    else
        ((float *)t->data)[i] = (float)v;
}

static tfs_tensor *random_tensor(enum tfs_dtype dt, int rank, const int64_t *dims, double lo,
                                 double hi)
{
    tfs_tensor *t = rt_tensor(dt, rank, dims, NULL);
    for (int64_t i = 0; i < t->nelem; i++)
        set(t, i, uniform(lo, hi));
    return t;
}

typedef struct harness {
    tfs_session *s;
    int          n_in;
    tfs_feed     feeds[MAX_IN + 1];
    char         names[MAX_IN + 1][64];
    char         loss[256], y[256], grad[MAX_IN][256];
    bool         has_grad[MAX_IN];
} harness;

static double run_loss(harness *h)
{
    tfs_tensor *out = NULL;
    tfs_status  st;
    ck_assert_msg(rt_run1(h->s, h->feeds, h->n_in + 1, h->loss, &out, &st) == TFS_OK, "%s", st.msg);
    double v = get(out, 0);
    tfs_tensor_unref(out);
    return v;
}

typedef struct shapes {
    int     n;
    int     rank[MAX_IN];
    int64_t dims[MAX_IN][4];
} shapes;

static shapes parse_shapes(const char *text)
{
    shapes      sh = {0};
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        ck_assert(sh.n < MAX_IN);
        int i = sh.n++;
        if (*p == '-') {
            p++;
            continue;
        }
        for (;;) {
            char *end;
            sh.dims[i][sh.rank[i]++] = strtoll(p, &end, 10);
            p = end;
            if (*p != 'x')
                break;
            p++;
        }
    }
    return sh;
}

static void check_case(const grad_case *c)
{
    tfs_graph *g;
    tfs_status st;
    ck_assert(tfs_graph_new(&g, &st) == TFS_OK);
    shapes  sh = parse_shapes(c->shapes);
    harness h = {.n_in = sh.n};
    tfs_out x[MAX_IN];
    for (int i = 0; i < sh.n; i++) {
        snprintf(h.names[i], sizeof h.names[i], "x%d", i);
        x[i] = tfs_build_placeholder(g, h.names[i], c->dt, NULL);
    }
    tfs_out y = c->build(g, x);
    if (tfs_build_dtype(g, y) != c->dt)
        y = tfs_build_cast(g, y, c->dt);
    tfs_out r = tfs_build_placeholder(g, "r", c->dt, NULL);
    tfs_out flat = tfs_build_reshape(g, tfs_build_binary(g, "Mul", y, r),
                                     tfs_build_ints(g, 1, (int64_t[]){-1}));
    tfs_out loss = tfs_build_reduce(g, "Sum", flat, tfs_build_ints(g, 1, (int64_t[]){0}), false);
    tfs_out grads[MAX_IN];
    ck_assert_msg(tfs_build_gradients(g, 1, &loss, NULL, sh.n, x, grads, &st) == TFS_OK, "%s: %s",
                  c->what, st.msg);
    for (int i = 0; i < sh.n; i++) {
        h.has_grad[i] = tfs_out_ok(grads[i]);
        tfs_build_tensor_name(g, grads[i], h.grad[i], sizeof h.grad[i]);
        if (c->none)
            ck_assert_msg(!h.has_grad[i], "%s: input %d has a gradient", c->what, i);
        else
            ck_assert_msg(h.has_grad[i], "%s: input %d has no gradient", c->what, i);
    }
    tfs_build_tensor_name(g, loss, h.loss, sizeof h.loss);
    tfs_build_tensor_name(g, y, h.y, sizeof h.y);
    h.s = rt_session(g, NULL);

    tfs_tensor *xv[MAX_IN];
    for (int i = 0; i < sh.n; i++) {
        xv[i] = random_tensor(c->dt, sh.rank[i], sh.dims[i], c->lo, c->hi);
        h.feeds[i] = (tfs_feed){h.names[i], xv[i]};
    }
    tfs_tensor *yv = NULL;
    ck_assert_msg(rt_run1(h.s, h.feeds, sh.n, h.y, &yv, &st) == TFS_OK, "%s: %s", c->what, st.msg);
    tfs_tensor *rv = random_tensor(c->dt, yv->rank, yv->dims, -1.0, 1.0);
    tfs_tensor_unref(yv);
    h.feeds[sh.n] = (tfs_feed){"r", rv};

    bool   f64 = c->dt == TFS_DTYPE_DOUBLE;
    double step = c->step > 0 ? c->step : f64 ? 1e-6 : 1e-2;
    double tol = c->tol > 0 ? c->tol : f64 ? 1e-6 : 2e-2;
    for (int i = 0; i < sh.n && !c->none; i++) {
        tfs_tensor *gv = NULL;
        ck_assert_msg(rt_run1(h.s, h.feeds, sh.n + 1, h.grad[i], &gv, &st) == TFS_OK,
                      "%s: gradient %d: %s", c->what, i, st.msg);
        ck_assert_msg(gv->nelem == xv[i]->nelem && gv->rank == xv[i]->rank,
                      "%s: gradient %d has %lld elements (rank %d), input %lld (rank %d)", c->what,
                      i, (long long)gv->nelem, gv->rank, (long long)xv[i]->nelem, xv[i]->rank);
        for (int64_t e = 0; e < xv[i]->nelem; e++) {
            double v = get(xv[i], e);
            set(xv[i], e, v + step);
            double up = run_loss(&h);
            set(xv[i], e, v - step);
            double down = run_loss(&h);
            set(xv[i], e, v);
            double num = (up - down) / (2 * step), ana = get(gv, e);
            ck_assert_msg(fabs(num - ana) <= tol * fmax(1.0, fabs(num)),
                          "%s: d/dx%d[%lld]: autodiff %.9g, finite differences %.9g", c->what, i,
                          (long long)e, ana, num);
        }
        tfs_tensor_unref(gv);
    }
    for (int i = 0; i < sh.n; i++)
        tfs_tensor_unref(xv[i]);
    tfs_tensor_unref(rv);
    tfs_session_free(h.s);
}

/* ---- builders ------------------------------------------------------------------------------- */

static tfs_out set_attr_s(tfs_graph *g, tfs_out o, const char *name, const char *v)
{
    tfs_graph_set_attr_string(g, o.node, name, v);
    return o;
}

static tfs_out set_attr_i(tfs_graph *g, tfs_out o, const char *name, int64_t v)
{
    tfs_graph_set_attr_int(g, o.node, name, v);
    return o;
}

static void set_ints(tfs_graph *g, tfs_out o, const char *name, int n, const int64_t *v)
{
    tfs_attr_value a = {.kind = TFS_ATTR_LIST};
    a.list.kind = TFS_ATTR_I;
    a.list.n = n;
    a.list.i = (int64_t *)v;
    tfs_graph_set_attr(g, o.node, name, &a);
}

#define UNARY_BUILDER(fn, op)                                                                      \
    static tfs_out fn(tfs_graph *g, const tfs_out *x)                                              \
    {                                                                                              \
        return tfs_build_unary(g, op, x[0]);                                                       \
    }
#define BINARY_BUILDER(fn, op)                                                                     \
    static tfs_out fn(tfs_graph *g, const tfs_out *x)                                              \
    {                                                                                              \
        return tfs_build_binary(g, op, x[0], x[1]);                                                \
    }

UNARY_BUILDER(b_identity, "Identity")
UNARY_BUILDER(b_snapshot, "Snapshot")
UNARY_BUILDER(b_neg, "Neg")
UNARY_BUILDER(b_abs, "Abs")
UNARY_BUILDER(b_square, "Square")
UNARY_BUILDER(b_sqrt, "Sqrt")
UNARY_BUILDER(b_rsqrt, "Rsqrt")
UNARY_BUILDER(b_reciprocal, "Reciprocal")
UNARY_BUILDER(b_inv, "Inv")
UNARY_BUILDER(b_exp, "Exp")
UNARY_BUILDER(b_log, "Log")
UNARY_BUILDER(b_log1p, "Log1p")
UNARY_BUILDER(b_tanh, "Tanh")
UNARY_BUILDER(b_sigmoid, "Sigmoid")
UNARY_BUILDER(b_relu, "Relu")
UNARY_BUILDER(b_relu6, "Relu6")
UNARY_BUILDER(b_elu, "Elu")
UNARY_BUILDER(b_selu, "Selu")
UNARY_BUILDER(b_softplus, "Softplus")
UNARY_BUILDER(b_softmax, "Softmax")
UNARY_BUILDER(b_log_softmax, "LogSoftmax")
UNARY_BUILDER(b_floor, "Floor")
UNARY_BUILDER(b_ceil, "Ceil")
UNARY_BUILDER(b_round, "Round")
UNARY_BUILDER(b_rint, "Rint")
UNARY_BUILDER(b_sign, "Sign")
UNARY_BUILDER(b_zeros_like, "ZerosLike")
UNARY_BUILDER(b_ones_like, "OnesLike")
UNARY_BUILDER(b_l2_loss, "L2Loss")
BINARY_BUILDER(b_add, "Add")
BINARY_BUILDER(b_add_v2, "AddV2")
BINARY_BUILDER(b_sub, "Sub")
BINARY_BUILDER(b_mul, "Mul")
BINARY_BUILDER(b_real_div, "RealDiv")
BINARY_BUILDER(b_div, "Div")
BINARY_BUILDER(b_maximum, "Maximum")
BINARY_BUILDER(b_minimum, "Minimum")
BINARY_BUILDER(b_squared_difference, "SquaredDifference")
BINARY_BUILDER(b_pow, "Pow")
BINARY_BUILDER(b_bias_add, "BiasAdd")
BINARY_BUILDER(b_bias_add_v1, "BiasAddV1")

static tfs_out b_check_numerics(tfs_graph *g, const tfs_out *x)
{
    return set_attr_s(g, tfs_build_unary(g, "CheckNumerics", x[0]), "message", "bad");
}

static tfs_out b_leaky_relu(tfs_graph *g, const tfs_out *x)
{
    tfs_out o = tfs_build_unary(g, "LeakyRelu", x[0]);
    tfs_graph_set_attr_float(g, o.node, "alpha", 0.25f);
    return o;
}

/* Shape-only ops: a float function of their (integer) result keeps the graph differentiable in
 * form, while the gradient must be None. */
static tfs_out b_shape(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_cast(g, tfs_build_shape(g, x[0]), TFS_DTYPE_DOUBLE);
}

static tfs_out b_size(tfs_graph *g, const tfs_out *x)
{
    tfs_out o = tfs_build_unary(g, "Size", x[0]);
    tfs_graph_set_attr_type(g, o.node, "out_type", TFS_DTYPE_INT32);
    return tfs_build_cast(g, o, TFS_DTYPE_DOUBLE);
}

static tfs_out b_rank(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_cast(g, tfs_build_unary(g, "Rank", x[0]), TFS_DTYPE_DOUBLE);
}

static tfs_out b_add_n(tfs_graph *g, const tfs_out *x)
{
    tfs_out in[3] = {x[0], x[1], x[0]};
    return tfs_build_op(g, "AddN", NULL, 3, in);
}

static tfs_out b_sum_1(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_reduce(g, "Sum", x[0], tfs_build_ints(g, 1, (int64_t[]){1}), false);
}

static tfs_out b_sum_keep(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_reduce(g, "Sum", x[0], tfs_build_ints(g, 2, (int64_t[]){-1, 0}), true);
}

static tfs_out b_mean(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_reduce(g, "Mean", x[0], tfs_build_ints(g, 1, (int64_t[]){0}), false);
}

static tfs_out b_cast(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_cast(g, x[0], TFS_DTYPE_FLOAT);
}

/* lo in [-0.8, -0.2] and hi in [0.2, 0.8] from inputs in [-1, 1], so lo < hi. */
static tfs_out b_clip(tfs_graph *g, const tfs_out *x)
{
    tfs_out k = tfs_build_scalar(g, TFS_DTYPE_DOUBLE, 0.3),
            half = tfs_build_scalar(g, TFS_DTYPE_DOUBLE, 0.5);
    tfs_out lo = tfs_build_binary(g, "Sub", tfs_build_binary(g, "Mul", x[1], k), half);
    tfs_out hi = tfs_build_binary(g, "AddV2", tfs_build_binary(g, "Mul", x[2], k), half);
    tfs_out in[3] = {x[0], lo, hi};
    return tfs_build_op(g, "ClipByValue", NULL, 3, in);
}

static tfs_out b_matmul_nn(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_matmul(g, x[0], x[1], false, false);
}

static tfs_out b_matmul_nt(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_matmul(g, x[0], x[1], false, true);
}

static tfs_out b_matmul_tn(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_matmul(g, x[0], x[1], true, false);
}

static tfs_out b_matmul_tt(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_matmul(g, x[0], x[1], true, true);
}

static tfs_out conv(tfs_graph *g, const tfs_out *x, const char *op, const char *pad, int64_t s,
                    int64_t d)
{
    tfs_out o = tfs_build_binary(g, op, x[0], x[1]);
    set_attr_s(g, o, "padding", pad);
    set_ints(g, o, "strides", 4, (int64_t[]){1, s, s, 1});
    set_ints(g, o, "dilations", 4, (int64_t[]){1, d, d, 1});
    return o;
}

static tfs_out b_conv_same_s2(tfs_graph *g, const tfs_out *x)
{
    return conv(g, x, "Conv2D", "SAME", 2, 1);
}

static tfs_out b_conv_valid_d2(tfs_graph *g, const tfs_out *x)
{
    return conv(g, x, "Conv2D", "VALID", 1, 2);
}

static tfs_out b_depthwise(tfs_graph *g, const tfs_out *x)
{
    return conv(g, x, "DepthwiseConv2dNative", "SAME", 2, 1);
}

static tfs_out pool(tfs_graph *g, const tfs_out *x, const char *op, const char *pad)
{
    tfs_out o = tfs_build_unary(g, op, x[0]);
    set_attr_s(g, o, "padding", pad);
    set_ints(g, o, "ksize", 4, (int64_t[]){1, 3, 3, 1});
    set_ints(g, o, "strides", 4, (int64_t[]){1, 2, 2, 1});
    return o;
}

static tfs_out b_max_pool(tfs_graph *g, const tfs_out *x)
{
    return pool(g, x, "MaxPool", "SAME");
}

static tfs_out resize(tfs_graph *g, const tfs_out *x, const char *op, int32_t h, int32_t w,
                      const char *flag)
{
    tfs_out in[2] = {x[0], tfs_build_ints(g, 2, (int64_t[]){h, w})};
    tfs_out o = tfs_build_op(g, op, NULL, 2, in);
    if (flag)
        tfs_graph_set_attr_bool(g, o.node, flag, true);
    return o;
}

static tfs_out b_resize_bilinear_up(tfs_graph *g, const tfs_out *x)
{
    return resize(g, x, "ResizeBilinear", 5, 7, "half_pixel_centers");
}

static tfs_out b_resize_bilinear_down(tfs_graph *g, const tfs_out *x)
{
    return resize(g, x, "ResizeBilinear", 2, 3, "align_corners");
}

static tfs_out b_resize_nearest_up(tfs_graph *g, const tfs_out *x)
{
    return resize(g, x, "ResizeNearestNeighbor", 5, 7, NULL);
}

static tfs_out b_resize_nearest_down(tfs_graph *g, const tfs_out *x)
{
    return resize(g, x, "ResizeNearestNeighbor", 2, 3, "half_pixel_centers");
}

static tfs_out b_avg_pool(tfs_graph *g, const tfs_out *x)
{
    return pool(g, x, "AvgPool", "SAME");
}

static tfs_out batch_norm(tfs_graph *g, const tfs_out *x, const char *op, bool training)
{
    /* Training ignores mean and variance (exponential_avg_factor 1); inference uses them as the
     * population statistics: constants here, as TensorFlow gives them no gradient. */
    tfs_tensor *m = rt_tensor(TFS_DTYPE_FLOAT, 1, (int64_t[]){3}, (float[]){0.2f, -0.1f, 0.4f});
    tfs_tensor *v = rt_tensor(TFS_DTYPE_FLOAT, 1, (int64_t[]){3}, (float[]){0.5f, 1.5f, 0.9f});
    tfs_out in[5] = {x[0], x[1], x[2], tfs_build_const(g, "mean", m), tfs_build_const(g, "var", v)};
    tfs_tensor_unref(m);
    tfs_tensor_unref(v);
    tfs_out o = tfs_build_op(g, op, NULL, 5, in);
    tfs_graph_set_attr_bool(g, o.node, "is_training", training);
    tfs_graph_set_attr_float(g, o.node, "epsilon", 0.001f);
    if (!strcmp(op, "FusedBatchNormV3") || !strcmp(op, "FusedBatchNormV2"))
        tfs_graph_set_attr_type(g, o.node, "U", TFS_DTYPE_FLOAT);
    return o;
}

static tfs_out b_bn(tfs_graph *g, const tfs_out *x)
{
    return batch_norm(g, x, "FusedBatchNorm", true);
}

static tfs_out b_bn_v2(tfs_graph *g, const tfs_out *x)
{
    return batch_norm(g, x, "FusedBatchNormV2", true);
}

static tfs_out b_bn_v3(tfs_graph *g, const tfs_out *x)
{
    return batch_norm(g, x, "FusedBatchNormV3", true);
}

static tfs_out b_bn_v3_inference(tfs_graph *g, const tfs_out *x)
{
    return batch_norm(g, x, "FusedBatchNormV3", false);
}

/* Labels must be distributions (TensorFlow's backprop is softmax - labels): softmax of x1. */
static tfs_out b_xent(tfs_graph *g, const tfs_out *x)
{
    tfs_out labels = tfs_build_unary(g, "Softmax", x[1]);
    return tfs_build_binary(g, "SoftmaxCrossEntropyWithLogits", x[0], labels);
}

static tfs_out b_sparse_xent(tfs_graph *g, const tfs_out *x)
{
    tfs_tensor *labels = rt_tensor(TFS_DTYPE_INT32, 1, (int64_t[]){3}, (int32_t[]){2, 0, 3});
    tfs_out     l = tfs_build_const(g, "labels", labels);
    tfs_tensor_unref(labels);
    return tfs_build_binary(g, "SparseSoftmaxCrossEntropyWithLogits", x[0], l);
}

static tfs_out b_reshape(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_reshape(g, x[0], tfs_build_ints(g, 2, (int64_t[]){3, -1}));
}

static tfs_out b_expand_dims(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_binary(g, "ExpandDims", x[0], tfs_build_scalar(g, TFS_DTYPE_INT32, 1));
}

static tfs_out b_squeeze(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_unary(g, "Squeeze", x[0]);
}

static tfs_out b_transpose(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_binary(g, "Transpose", x[0], tfs_build_ints(g, 3, (int64_t[]){2, 0, 1}));
}

static tfs_out b_concat(tfs_graph *g, const tfs_out *x)
{
    tfs_out in[4] = {x[0], x[1], x[0], tfs_build_scalar(g, TFS_DTYPE_INT32, -1)};
    return tfs_build_op(g, "ConcatV2", NULL, 4, in);
}

static tfs_out b_pack(tfs_graph *g, const tfs_out *x)
{
    tfs_out o = tfs_build_op(g, "Pack", NULL, 2, x);
    return set_attr_i(g, o, "axis", 1);
}

static tfs_out b_gather(tfs_graph *g, const tfs_out *x)
{
    tfs_tensor *idx = rt_tensor(TFS_DTYPE_INT32, 2, (int64_t[]){2, 2}, (int32_t[]){3, 0, 3, 1});
    tfs_out in[3] = {x[0], tfs_build_const(g, "idx", idx), tfs_build_scalar(g, TFS_DTYPE_INT32, 0)};
    tfs_tensor_unref(idx);
    return tfs_build_op(g, "GatherV2", NULL, 3, in);
}

static tfs_out b_tile(tfs_graph *g, const tfs_out *x)
{
    return tfs_build_binary(g, "Tile", x[0], tfs_build_ints(g, 2, (int64_t[]){2, 3}));
}

static tfs_out b_pad(tfs_graph *g, const tfs_out *x)
{
    tfs_tensor *p = rt_tensor(TFS_DTYPE_INT32, 2, (int64_t[]){2, 2}, (int32_t[]){1, 0, 2, 1});
    tfs_out     o = tfs_build_binary(g, "Pad", x[0], tfs_build_const(g, "paddings", p));
    tfs_tensor_unref(p);
    return o;
}

static tfs_out select_op(tfs_graph *g, const tfs_out *x, const char *op)
{
    tfs_out cond = tfs_build_binary(g, "Greater", x[0], tfs_build_scalar(g, TFS_DTYPE_DOUBLE, 0));
    tfs_out in[3] = {cond, x[0], x[1]};
    return tfs_build_op(g, op, NULL, 3, in);
}

static tfs_out b_select(tfs_graph *g, const tfs_out *x)
{
    return select_op(g, x, "Select");
}

static tfs_out b_select_v2(tfs_graph *g, const tfs_out *x)
{
    return select_op(g, x, "SelectV2");
}

static tfs_out b_slice(tfs_graph *g, const tfs_out *x)
{
    tfs_out in[3] = {x[0], tfs_build_ints(g, 2, (int64_t[]){1, 0}),
                     tfs_build_ints(g, 2, (int64_t[]){2, -1})};
    return tfs_build_op(g, "Slice", NULL, 3, in);
}

/* ---- the cases ------------------------------------------------------------------------------ */

#define D TFS_DTYPE_DOUBLE
#define F TFS_DTYPE_FLOAT

/* CASE(op, what, builder, input shapes, lo, hi, dtype); NONE: a non-differentiable op whose
 * gradient must be None; STEP: a case with its own finite-difference step and tolerance. */
#define CASE(o, w, b, s, l, h, d) \
    {.op = o, .what = w, .build = b, .shapes = s, .lo = l, .hi = h, .dt = d}
#define NONE(o, b, s) \
    {.op = o, .what = o, .build = b, .shapes = s, .lo = -2, .hi = 2, .dt = D, .none = true}
#define STEP(o, w, b, s, l, h, d, st, t) \
    {.op = o, .what = w, .build = b, .shapes = s, .lo = l, .hi = h, .dt = d, .step = st, .tol = t}

/* clang-format off */
static const grad_case CASES[] = {
    CASE("Identity", "Identity", b_identity, "2x3", -1, 1, D),
    CASE("Snapshot", "Snapshot", b_snapshot, "2x3", -1, 1, D),
    CASE("CheckNumerics", "CheckNumerics", b_check_numerics, "4", -1, 1, D),
    CASE("Add", "Add broadcast [2,3]+[3]", b_add, "2x3 3", -1, 1, D),
    CASE("AddV2", "AddV2 broadcast [2,1]+[1,3]", b_add_v2, "2x1 1x3", -1, 1, D),
    CASE("Sub", "Sub broadcast [3]-[2,3]", b_sub, "3 2x3", -1, 1, D),
    CASE("Mul", "Mul [2,3]*[2,3]", b_mul, "2x3 2x3", -1, 1, D),
    CASE("Mul", "Mul broadcast [2,3]*[]", b_mul, "2x3 -", -1, 1, D),
    CASE("RealDiv", "RealDiv broadcast", b_real_div, "2x3 3", 0.5, 2, D),
    CASE("Div", "Div", b_div, "4 4", 0.5, 2, D),
    CASE("Maximum", "Maximum broadcast", b_maximum, "3x4 4", -1, 1, D),
    CASE("Minimum", "Minimum", b_minimum, "5 5", -1, 1, D),
    CASE("SquaredDifference", "SquaredDifference", b_squared_difference, "2x3 3", -1, 1, D),
    CASE("Pow", "Pow", b_pow, "4 4", 0.5, 2, D),
    CASE("Neg", "Neg", b_neg, "5", -1, 1, D),
    CASE("Abs", "Abs", b_abs, "5", 0.1, 1, D),
    CASE("Square", "Square", b_square, "5", -1, 1, D),
    CASE("Sqrt", "Sqrt", b_sqrt, "5", 0.5, 2, D),
    CASE("Rsqrt", "Rsqrt", b_rsqrt, "5", 0.5, 2, D),
    CASE("Reciprocal", "Reciprocal", b_reciprocal, "5", 0.5, 2, D),
    CASE("Inv", "Inv", b_inv, "5", 0.5, 2, D),
    CASE("Exp", "Exp", b_exp, "5", -1, 1, D),
    CASE("Log", "Log", b_log, "5", 0.5, 2, D),
    CASE("Log1p", "Log1p", b_log1p, "5", -0.5, 2, D),
    CASE("Tanh", "Tanh", b_tanh, "5", -2, 2, D),
    CASE("Sigmoid", "Sigmoid", b_sigmoid, "5", -2, 2, D),
    CASE("AddN", "AddN(x0, x1, x0)", b_add_n, "4 4", -1, 1, D),
    CASE("Sum", "Sum axis 1", b_sum_1, "2x3x2", -1, 1, D),
    CASE("Sum", "Sum axes -1,0 keep_dims", b_sum_keep, "2x3x2", -1, 1, D),
    CASE("Mean", "Mean axis 0", b_mean, "3x2", -1, 1, D),
    STEP("Cast", "Cast to float", b_cast, "4", -1, 1, D, 1e-3, 1e-3),
    CASE("ClipByValue", "ClipByValue", b_clip, "2x4 - -", -1, 1, D),
    NONE("Floor", b_floor, "3"),
    NONE("Ceil", b_ceil, "3"),
    NONE("Round", b_round, "3"),
    NONE("Rint", b_rint, "3"),
    NONE("Sign", b_sign, "3"),
    NONE("ZerosLike", b_zeros_like, "3"),
    NONE("OnesLike", b_ones_like, "3"),
    NONE("Shape", b_shape, "2x3"),
    NONE("Size", b_size, "2x3"),
    NONE("Rank", b_rank, "2x3"),
    CASE("MatMul", "MatMul", b_matmul_nn, "2x3 3x4", -1, 1, D),
    CASE("MatMul", "MatMul transpose_b", b_matmul_nt, "2x3 4x3", -1, 1, D),
    CASE("MatMul", "MatMul transpose_a", b_matmul_tn, "3x2 3x4", -1, 1, D),
    CASE("MatMul", "MatMul both transposed", b_matmul_tt, "3x2 4x3", -1, 1, D),
    CASE("BiasAdd", "BiasAdd", b_bias_add, "2x3x4 4", -1, 1, D),
    CASE("BiasAddV1", "BiasAddV1", b_bias_add_v1, "2x4 4", -1, 1, D),
    CASE("Relu", "Relu", b_relu, "3x4", -1, 1, D),
    CASE("Relu6", "Relu6", b_relu6, "3x4", -2, 8, D),
    CASE("Elu", "Elu", b_elu, "3x4", -2, 2, D),
    CASE("Selu", "Selu", b_selu, "3x4", -2, 2, D),
    CASE("LeakyRelu", "LeakyRelu alpha 0.25", b_leaky_relu, "3x4", -1, 1, D),
    CASE("Softplus", "Softplus", b_softplus, "3x4", -3, 3, D),
    CASE("Softmax", "Softmax", b_softmax, "3x4", -2, 2, D),
    CASE("LogSoftmax", "LogSoftmax", b_log_softmax, "3x4", -2, 2, D),
    CASE("Conv2D", "Conv2D SAME stride 2", b_conv_same_s2, "2x5x4x3 3x2x3x2", -1, 1, D),
    CASE("Conv2D", "Conv2D VALID dilation 2", b_conv_valid_d2, "1x6x5x2 2x2x2x3", -1, 1, D),
    CASE("DepthwiseConv2dNative", "DepthwiseConv2dNative SAME stride 2", b_depthwise,
         "1x5x5x2 3x3x2x2", -1, 1, D),
    CASE("MaxPool", "MaxPool 3x3 stride 2 SAME", b_max_pool, "1x5x6x2", -1, 1, D),
    CASE("AvgPool", "AvgPool 3x3 stride 2 SAME", b_avg_pool, "2x5x4x2", -1, 1, D),
    CASE("ResizeBilinear", "ResizeBilinear 3x4 -> 5x7 half_pixel_centers", b_resize_bilinear_up,
         "2x3x4x2", -1, 1, F),
    CASE("ResizeBilinear", "ResizeBilinear 4x5 -> 2x3 align_corners", b_resize_bilinear_down,
         "1x4x5x3", -1, 1, F),
    CASE("ResizeNearestNeighbor", "ResizeNearestNeighbor 3x4 -> 5x7", b_resize_nearest_up,
         "2x3x4x2", -1, 1, D),
    CASE("ResizeNearestNeighbor", "ResizeNearestNeighbor 4x5 -> 2x3 half_pixel_centers",
         b_resize_nearest_down, "1x4x5x3", -1, 1, D),
    CASE("FusedBatchNorm", "FusedBatchNorm training", b_bn, "2x3x2x3 3 3", -1, 1, F),
    CASE("FusedBatchNormV2", "FusedBatchNormV2 training", b_bn_v2, "2x3x2x3 3 3", -1, 1, F),
    CASE("FusedBatchNormV3", "FusedBatchNormV3 training", b_bn_v3, "2x3x2x3 3 3", -1, 1, F),
    CASE("FusedBatchNormV3", "FusedBatchNormV3 inference", b_bn_v3_inference, "2x3x2x3 3 3",
         -1, 1, F),
    CASE("SoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", b_xent, "3x4 3x4",
         -2, 2, D),
    CASE("SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
         b_sparse_xent, "3x4", -2, 2, D),
    CASE("L2Loss", "L2Loss", b_l2_loss, "3x2", -1, 1, D),
    CASE("Reshape", "Reshape", b_reshape, "2x3", -1, 1, D),
    CASE("ExpandDims", "ExpandDims", b_expand_dims, "2x3", -1, 1, D),
    CASE("Squeeze", "Squeeze", b_squeeze, "2x1x3", -1, 1, D),
    CASE("Transpose", "Transpose", b_transpose, "2x3x4", -1, 1, D),
    CASE("ConcatV2", "ConcatV2(x0, x1, x0) axis -1", b_concat, "2x3 2x1", -1, 1, D),
    CASE("Pack", "Pack axis 1", b_pack, "2x3 2x3", -1, 1, D),
    CASE("GatherV2", "GatherV2 repeated indices", b_gather, "4x3", -1, 1, D),
    CASE("Tile", "Tile", b_tile, "2x3", -1, 1, D),
    CASE("Pad", "Pad", b_pad, "2x3", -1, 1, D),
    CASE("Select", "Select", b_select, "2x3 2x3", -1, 1, D),
    CASE("SelectV2", "SelectV2 broadcast", b_select_v2, "2x3 3", -1, 1, D),
    CASE("Slice", "Slice", b_slice, "4x3", -1, 1, D),
};
/* clang-format on */

#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

START_TEST(test_gradients_finite_differences)
{
    check_case(&CASES[_i]);
}
END_TEST

/* Every op the runtime can differentiate has a case above. */
START_TEST(test_gradients_every_op_has_a_case)
{
    static const char *const EXTRA[] = {"SoftmaxCrossEntropyWithLogits",
                                        "SparseSoftmaxCrossEntropyWithLogits", "L2Loss"};
    int                      missing = 0;
    char                     names[2048] = "";
    for (int op = 0; op < TFS_OP_COUNT + 3; op++) {
        const char *name = op < TFS_OP_COUNT ? tfs__ops[op].name : EXTRA[op - TFS_OP_COUNT];
        if (!tfs_op_has_gradient(name))
            continue;
        bool found = false;
        for (int i = 0; i < N_CASES && !found; i++)
            found = !strcmp(CASES[i].op, name);
        if (!found) {
            missing++;
            strncat(names, name, sizeof names - strlen(names) - 3);
            strcat(names, " ");
        }
    }
    ck_assert_msg(missing == 0, "ops with a gradient but no finite-difference case: %s", names);
}
END_TEST

START_TEST(test_gradients_paths_and_errors)
{
    tfs_graph *g;
    tfs_status st;
    ck_assert(tfs_graph_new(&g, &st) == TFS_OK);
    tfs_out x = tfs_build_placeholder(g, "x", D, NULL);
    tfs_out z = tfs_build_placeholder(g, "z", D, NULL);
    tfs_out stopped = tfs_build_unary(g, "StopGradient", x);
    tfs_out y = tfs_build_binary(g, "Mul", stopped, z);
    tfs_out grads[2];
    tfs_out xs[2] = {x, z};
    ck_assert(tfs_build_gradients(g, 1, &y, NULL, 2, xs, grads, &st) == TFS_OK);
    ck_assert_msg(!tfs_out_ok(grads[0]), "no gradient flows through StopGradient");
    ck_assert(tfs_out_ok(grads[1]));
    /* An op without a gradient function on the path: UNIMPLEMENTED naming it. */
    tfs_out cum = tfs_build_binary(g, "Cumprod", z, tfs_build_scalar(g, TFS_DTYPE_INT32, 0));
    ck_assert(tfs_build_gradients(g, 1, &cum, NULL, 1, &z, grads, &st) == TFS_UNIMPLEMENTED);
    ck_assert_msg(strstr(st.msg, "Cumprod") != NULL, "%s", st.msg);
    /* The names follow TensorFlow's: gradients/<node>_grad/... then gradients_1/... */
    ck_assert_int_ge(tfs_graph_find_node(g, "gradients/Mul_grad/Mul"), 0);
    tfs_graph_unref(g);
}
END_TEST

Suite *suite_runtime_gradients(void);
Suite *suite_runtime_gradients(void)
{
    Suite *s = suite_create("runtime_gradients");
    TCase *tc = tcase_create("gradients");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_gradients_finite_differences, 0, N_CASES);
    tcase_add_test(tc, test_gradients_every_op_has_a_case);
    tcase_add_test(tc, test_gradients_paths_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
