/* The CUDA backend's kernels (tfs_kernel_fn, indexed by op) and its placement rules: the C side
 * that reads attrs, checks shapes exactly as the CPU kernels do (same messages, same codes), makes
 * the outputs as device tensors and launches the device code of the .cu files of runtime/cuda/ on the run's
 * stream. Inputs and outputs are device tensors (backend-impl.h) except where host_inputs says.
 *
 * Supported: float MatMul, _FusedMatMul and _FusedConv2D (BiasAdd + optional Relu, Relu6, Elu,
 * LeakyRelu), BiasAdd (NHWC), Relu, Relu6, Sigmoid, Tanh, Add/AddV2/Sub/Mul/RealDiv/Maximum with
 * broadcasting, Softmax, Conv2D, MaxPool, AvgPool (NHWC), inference FusedBatchNorm{,V2,V3}
 * (NHWC); Identity, StopGradient, Snapshot, Reshape, Squeeze and ExpandDims follow their input
 * (views, no copy). Everything else stays on the CPU, as do float64 and integer variants.
 */
#include <limits.h>
#include <string.h>

#include "runtime/cuda/gpu-impl.h"
#include "runtime/kernels/math-impl.h"   /* tfs__bcast_init: the CPU's broadcasting rule */

static tfs_cuda_stream *stream_of(const tfs_kernel_ctx *k)
{
    return ((tfs_gpu_exec *)k->exec)->stream;
}

/* Inputs [0, n) are float device tensors. */
static enum tfs_code float_inputs(const tfs_kernel_ctx *k, int n, tfs_status *st)
{
    if (k->n_in < n)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expects %d inputs, has %d", n,
                             k->n_in);
    for (int i = 0; i < n; i++)
        if (k->in[i]->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                                 "input %d has dtype %s; the GPU kernel takes float", i,
                                 tfs_dtype_short_name(k->in[i]->dtype));
    return TFS_OK;
}

static enum tfs_code output(tfs_kernel_ctx *k, int j, int rank, const int64_t *dims,
                            tfs_tensor **out, tfs_status *st)
{
    /* Errors (the pool is full) get the node's name from the session (kernel_error). */
    enum tfs_code rc = tfs__gpu_tensor_new(k->exec, TFS_DTYPE_FLOAT, rank, dims, out, st);
    if (rc != TFS_OK)
        return rc;
    k->out[j] = *out;
    return TFS_OK;
}

/* ---- fused_ops -------------------------------------------------------------------------------- */

static bool str_is(const tfs_string *s, const char *lit)
{
    size_t n = strlen(lit);
    return s->len == n && (n == 0 || !memcmp(s->data, lit, n));
}

/* fused_ops ["BiasAdd"] or ["BiasAdd", act]; false for anything else. */
static bool fused_bias_act(const tfs_node *n, enum tfs_cuda_act *act)
{
    const tfs_attr_value *v = tfs__attr(n, "fused_ops");
    if (!v || v->kind != TFS_ATTR_LIST || v->list.kind != TFS_ATTR_S)
        return false;
    const tfs_attr_list *l = &v->list;
    if (l->n < 1 || l->n > 2 || !str_is(&l->s[0], "BiasAdd"))
        return false;
    *act = TFS_CUDA_ACT_NONE;
    if (l->n == 1)
        return true;
    static const struct { const char *name; enum tfs_cuda_act act; } acts[] = {
        {"Relu", TFS_CUDA_ACT_RELU}, {"Relu6", TFS_CUDA_ACT_RELU6},
        {"Elu", TFS_CUDA_ACT_ELU}, {"LeakyRelu", TFS_CUDA_ACT_LEAKY_RELU},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        if (str_is(&l->s[1], acts[i].name)) {
            *act = acts[i].act;
            return true;
        }
    }
    return false;
}

static float leaky_alpha(const tfs_node *n)
{
    float a = 0.2f;
    tfs_status ignore;
    if (tfs__nn_attr_float(n, "leakyrelu_alpha", 0.2f, &a, &ignore) != TFS_OK)
        a = 0.2f;
    return a;
}

/* ---- matrix products -------------------------------------------------------------------------- */

static enum tfs_code matmul(tfs_kernel_ctx *k, const float *bias, int64_t bias_n,
                            enum tfs_cuda_act act, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *a = k->in[0], *b = k->in[1];
    tfs_nn_matmul mm;
    enum tfs_code rc = tfs__nn_matmul_dims(n, a, b, &mm, st);
    if (rc != TFS_OK)
        return rc;
    bool ta = mm.ta, tb = mm.tb;
    int64_t m = mm.m, nn = mm.n, ka = mm.k;
    if (bias && bias_n != nn)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "bias has %lld elements, the product has %lld columns",
                             (long long)bias_n, (long long)nn);
    tfs_tensor *out;
    int64_t dims[2] = {m, nn};
    if ((rc = output(k, 0, 2, dims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->sgemm(stream_of(k), ta, tb, (int)m, (int)nn, (int)ka, a->data, b->data,
                        out->data, &cs))
        return tfs__gpu_fail(k, &cs, st);
    if ((bias || act != TFS_CUDA_ACT_NONE) &&
        tfs__cuda->bias_act(stream_of(k), out->data, bias, out->data, out->nelem, nn, act,
                           leaky_alpha(n), &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

static enum tfs_code gk_mat_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_code rc = float_inputs(k, 2, st);
    return rc != TFS_OK ? rc : matmul(k, NULL, 0, TFS_CUDA_ACT_NONE, st);
}

/* The checks _FusedMatMul and _FusedConv2D share: fused_ops BiasAdd(+activation) only, three
 * float inputs, a 1-D bias (input 2). */
static enum tfs_code fused_bias_inputs(tfs_kernel_ctx *k, enum tfs_cuda_act *act, tfs_status *st)
{
    if (!fused_bias_act(k->node, act))
        return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED, "fused_ops not supported on GPU");
    enum tfs_code rc = float_inputs(k, 3, st);
    if (rc != TFS_OK)
        return rc;
    if (k->in[2]->rank != 1)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "bias must be 1-D");
    return TFS_OK;
}

static enum tfs_code gk_fused_mat_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_cuda_act act;
    enum tfs_code     rc = fused_bias_inputs(k, &act, st);
    return rc != TFS_OK ? rc : matmul(k, k->in[2]->data, k->in[2]->nelem, act, st);
}

/* ---- elementwise ------------------------------------------------------------------------------ */

static enum tfs_code unary_act(tfs_kernel_ctx *k, enum tfs_cuda_act act, tfs_status *st)
{
    enum tfs_code rc = float_inputs(k, 1, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0];
    tfs_tensor *out;
    if ((rc = output(k, 0, x->rank, x->dims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->bias_act(stream_of(k), x->data, NULL, out->data, x->nelem, 1, act, 0.0f, &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

static enum tfs_code gk_relu(tfs_kernel_ctx *k, tfs_status *st)
{
    return unary_act(k, TFS_CUDA_ACT_RELU, st);
}

static enum tfs_code gk_relu6(tfs_kernel_ctx *k, tfs_status *st)
{
    return unary_act(k, TFS_CUDA_ACT_RELU6, st);
}

static enum tfs_code gk_sigmoid(tfs_kernel_ctx *k, tfs_status *st)
{
    return unary_act(k, TFS_CUDA_ACT_SIGMOID, st);
}

static enum tfs_code gk_tanh(tfs_kernel_ctx *k, tfs_status *st)
{
    return unary_act(k, TFS_CUDA_ACT_TANH, st);
}

static enum tfs_code gk_bias_add(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc = float_inputs(k, 2, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0], *bias = k->in[1];
    char sx[128], sb[128];
    if (x->rank < 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Input tensor must be at least 2D: %s",
                             tfs_shape_str(x->rank, x->dims, sx, sizeof sx));
    if (bias->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Biases must be 1D: %s",
                             tfs_shape_str(bias->rank, bias->dims, sb, sizeof sb));
    int64_t c = x->dims[x->rank - 1];
    if (bias->nelem != c)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Must provide as many biases as the last dimension of the input "
                             "tensor: %s vs. %s",
                             tfs_shape_str(bias->rank, bias->dims, sb, sizeof sb),
                             tfs_shape_str(x->rank, x->dims, sx, sizeof sx));
    tfs_tensor *out;
    if ((rc = output(k, 0, x->rank, x->dims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->bias_act(stream_of(k), x->data, bias->data, out->data, x->nelem, c,
                           TFS_CUDA_ACT_NONE, 0.0f, &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

static enum tfs_code binary(tfs_kernel_ctx *k, enum tfs_cuda_binop op, tfs_status *st)
{
    enum tfs_code rc = float_inputs(k, 2, st);
    if (rc != TFS_OK)
        return rc;
    tfs_bcast bc;
    if ((rc = tfs__bcast_init(k->in[0], k->in[1], NULL, &bc, st)) != TFS_OK)
        return rc;   /* "Incompatible shapes: ...", as the CPU kernel says it */
    tfs_tensor *out;
    if ((rc = output(k, 0, bc.out_rank, bc.out_dims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->binary(stream_of(k), op, bc.rank, bc.dims, bc.sa, bc.sb, k->in[0]->data,
                         k->in[1]->data, out->data, out->nelem, &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

static enum tfs_code gk_add(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary(k, TFS_CUDA_ADD, st);
}

static enum tfs_code gk_sub(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary(k, TFS_CUDA_SUB, st);
}

static enum tfs_code gk_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary(k, TFS_CUDA_MUL, st);
}

static enum tfs_code gk_real_div(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary(k, TFS_CUDA_DIV, st);
}

static enum tfs_code gk_maximum(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary(k, TFS_CUDA_MAXIMUM, st);
}

static enum tfs_code gk_softmax(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_code rc = float_inputs(k, 1, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0];
    if (x->rank < 1)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "logits must have >= 1 dimension, got []");
    int64_t cols = x->dims[x->rank - 1];
    int64_t rows = cols ? x->nelem / cols : 0;
    if (rows > INT_MAX || cols > INT_MAX)
        return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED,
                             "softmax over more than %d rows or columns", INT_MAX);
    tfs_tensor *out;
    if ((rc = output(k, 0, x->rank, x->dims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->softmax(stream_of(k), x->data, out->data, (int)rows, (int)cols, &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

/* Sum, Mean, Max, Min. The axes (input 1) stay on the host (tfs__gpu_host_inputs); their
 * checks and the output shape are the CPU kernel's (tfs__reduce_shape). */
static enum tfs_code reduce(tfs_kernel_ctx *k, enum tfs_cuda_reduce op, tfs_status *st)
{
    enum tfs_code rc = float_inputs(k, 1, st);
    if (rc == TFS_OK && k->n_in != 2)
        rc = tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d",
                           k->n_in);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0];
    bool red[TFS_MAX_RANK];
    int64_t odims[TFS_MAX_RANK], count;
    int orank;
    if ((rc = tfs__reduce_shape(k->node, x, k->in[1], red, &orank, odims, &count, st)) != TFS_OK)
        return rc;
    tfs_tensor *out;
    if ((rc = output(k, 0, orank, odims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->reduce(stream_of(k), op, x->rank, x->dims, red, x->data, out->data, &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

#define GK_REDUCE(fn, op)                                                                          \
    static enum tfs_code fn(tfs_kernel_ctx *k, tfs_status *st) { return reduce(k, op, st); }

GK_REDUCE(gk_sum, TFS_CUDA_RED_SUM)
GK_REDUCE(gk_mean, TFS_CUDA_RED_MEAN)
GK_REDUCE(gk_max, TFS_CUDA_RED_MAX)
GK_REDUCE(gk_min, TFS_CUDA_RED_MIN)

static enum tfs_code gk_fused_batch_norm(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    float eps;
    bool training;
    enum tfs_code rc = tfs__nn_attr_float(n, "epsilon", 1e-4f, &eps, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "is_training", true, &training, st);
    if (rc == TFS_OK)
        rc = float_inputs(k, 5, st);
    if (rc != TFS_OK)
        return rc;
    if (training || strcmp(tfs__attr_str(n, "data_format", "NHWC"), "NHWC"))
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "only inference (is_training false) in NHWC runs on the GPU");
    const tfs_tensor *x = k->in[0];
    char buf[128];
    if (x->rank != 4)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input must be 4-dimensional, got %s",
                             tfs_shape_str(x->rank, x->dims, buf, sizeof buf));
    int64_t c = x->dims[3];
    static const char *const names[] = {"x", "scale", "offset", "mean", "variance"};
    for (int i = 1; i < 5; i++)
        if (k->in[i]->rank != 1 || k->in[i]->nelem != c)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s must be 1-dimensional with the %lld channels of x, got %s",
                                 names[i], (long long)c,
                                 tfs_shape_str(k->in[i]->rank, k->in[i]->dims, buf, sizeof buf));
    tfs_tensor *y, *o;
    int64_t cdims[1] = {c};
    tfs_cuda_status cs;
    if ((rc = output(k, 0, 4, x->dims, &y, st)) != TFS_OK)
        return rc;
    void *fac;
    if ((rc = tfs__gpu_scratch(k->exec, (size_t)c * sizeof(float), &fac, st)) != TFS_OK)
        return rc;
    if (tfs__cuda->batch_norm(stream_of(k), x->data, k->in[1]->data, k->in[2]->data,
                             k->in[3]->data, k->in[4]->data, eps, y->data, x->nelem, c, fac, &cs))
        return tfs__gpu_fail(k, &cs, st);
    /* batch_mean and batch_variance are the inputs (inference); reserve spaces are zeros. */
    for (int j = 1; j < k->n_out && j < 6; j++) {
        if ((rc = output(k, j, j == 5 ? 0 : 1, cdims, &o, st)) != TFS_OK)
            return rc;
        int r = j <= 2 ? tfs__cuda->copy_d2d(stream_of(k), o->data, k->in[j + 2]->data,
                                            o->nbytes, &cs)
                       : tfs__cuda->memset(stream_of(k), o->data, 0, o->nbytes, &cs);
        if (r)
            return tfs__gpu_fail(k, &cs, st);
    }
    return TFS_OK;
}

/* ---- windows: Conv2D and pooling -------------------------------------------------------------- */

/* The CUDA geometry from the CPU's (kernels/nn-util.c), with the bottom/right padding that
 * yields exactly out_h x out_w. INVALID_ARGUMENT-free: UNIMPLEMENTED when a size exceeds an int. */
static enum tfs_code window(const tfs_kernel_ctx *k, const tfs_nn_geom *g, int64_t out_c,
                            tfs_cuda_window *w, tfs_status *st)
{
    int64_t pb = (g->out_h - 1) * g->stride_h + (g->k_h - 1) * g->dil_h + 1 - g->in_h - g->pad_top;
    int64_t pr = (g->out_w - 1) * g->stride_w + (g->k_w - 1) * g->dil_w + 1 - g->in_w -
                 g->pad_left;
    int64_t v[] = {g->batch, g->in_h, g->in_w, g->in_c, g->k_h, g->k_w, out_c, g->out_h,
                   g->out_w, g->stride_h, g->stride_w, g->dil_h, g->dil_w, g->pad_top,
                   g->pad_left, pb, pr,
                   g->batch * g->in_h * g->in_w * g->in_c, g->batch * g->out_h * g->out_w * out_c};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] > INT_MAX)
            return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED,
                                 "tensors over %d elements are not supported on the GPU",
                                 INT_MAX);
    *w = (tfs_cuda_window){
        .n = (int)g->batch, .h = (int)g->in_h, .w = (int)g->in_w, .c = (int)g->in_c,
        .k_h = (int)g->k_h, .k_w = (int)g->k_w, .out_c = (int)out_c,
        .stride_h = (int)g->stride_h, .stride_w = (int)g->stride_w,
        .dil_h = (int)g->dil_h, .dil_w = (int)g->dil_w,
        .pad_top = (int)g->pad_top, .pad_bottom = pb > 0 ? (int)pb : 0,
        .pad_left = (int)g->pad_left, .pad_right = pr > 0 ? (int)pr : 0,
        .out_h = (int)g->out_h, .out_w = (int)g->out_w,
    };
    return TFS_OK;
}

static enum tfs_code conv2d(tfs_kernel_ctx *k, const float *bias, int64_t bias_n,
                            enum tfs_cuda_act act, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0], *f = k->in[1];
    char buf[128];
    if (f->rank != 4)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "filter must be 4-dimensional, got %s",
                             tfs_shape_str(f->rank, f->dims, buf, sizeof buf));
    if (f->nelem == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "filter must not have zero elements (i.e. all dimensions must be "
                             "non-zero)");
    tfs_nn_geom g;
    enum tfs_code rc = tfs__nn_geom_init(n, in, f->dims[0], f->dims[1], true, &g, st);
    if (rc != TFS_OK)
        return rc;
    int64_t out_c = f->dims[3];
    if (g.in_c != f->dims[2]) {
        if (f->dims[2] > 0 && g.in_c > 0 && g.in_c % f->dims[2] == 0)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "grouped convolutions (input depth %lld, filter depth %lld) are "
                                 "not supported on the GPU",
                                 (long long)g.in_c, (long long)f->dims[2]);
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input depth must be evenly divisible by filter depth: %lld vs %lld",
                             (long long)g.in_c, (long long)f->dims[2]);
    }
    if (bias && bias_n != out_c)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "bias has %lld elements, the filter %lld output channels",
                             (long long)bias_n, (long long)out_c);
    tfs_cuda_window w;
    if ((rc = window(k, &g, out_c, &w, st)) != TFS_OK)
        return rc;
    tfs_tensor *out;
    int64_t odims[4] = {g.batch, g.out_h, g.out_w, out_c};
    if ((rc = output(k, 0, 4, odims, &out, st)) != TFS_OK)
        return rc;
    void *scratch;
    if ((rc = tfs__gpu_scratch(k->exec, tfs__cuda->conv2d_scratch(&w), &scratch, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->conv2d(stream_of(k), &w, in->data, f->data, out->data, scratch, &cs))
        return tfs__gpu_fail(k, &cs, st);
    if ((bias || act != TFS_CUDA_ACT_NONE) &&
        tfs__cuda->bias_act(stream_of(k), out->data, bias, out->data, out->nelem, out_c, act,
                           leaky_alpha(n), &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

static enum tfs_code gk_conv2d(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_code rc = float_inputs(k, 2, st);
    return rc != TFS_OK ? rc : conv2d(k, NULL, 0, TFS_CUDA_ACT_NONE, st);
}

static enum tfs_code gk_fused_conv2d(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_cuda_act act;
    enum tfs_code     rc = fused_bias_inputs(k, &act, st);
    return rc != TFS_OK ? rc : conv2d(k, k->in[2]->data, k->in[2]->nelem, act, st);
}

static enum tfs_code pool(tfs_kernel_ctx *k, bool is_max, tfs_status *st)
{
    const tfs_node *n = k->node;
    int64_t ksize[4];
    enum tfs_code rc = float_inputs(k, 1, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_ints(n, "ksize", 4, NULL, ksize, st);
    if (rc != TFS_OK)
        return rc;
    if (ksize[0] != 1 || ksize[3] != 1)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "pooling over the batch or depth dimension is not supported "
                             "(ksize [%lld,%lld,%lld,%lld])", (long long)ksize[0],
                             (long long)ksize[1], (long long)ksize[2], (long long)ksize[3]);
    /* TensorFlow's MaxPool takes EXPLICIT padding (explicit_paddings), its AvgPool does not.
     * pool_kernel clips each window to the image, which is what the padding means for a max. */
    if (!is_max && !strcmp(tfs__attr_str(n, "padding", ""), "EXPLICIT"))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "padding must be SAME or VALID");
    tfs_nn_geom g;
    if ((rc = tfs__nn_geom_init(n, k->in[0], ksize[1], ksize[2], false, &g, st)) != TFS_OK)
        return rc;
    tfs_cuda_window w;
    if ((rc = window(k, &g, g.in_c, &w, st)) != TFS_OK)
        return rc;
    tfs_tensor *out;
    int64_t odims[4] = {g.batch, g.out_h, g.out_w, g.in_c};
    if ((rc = output(k, 0, 4, odims, &out, st)) != TFS_OK)
        return rc;
    tfs_cuda_status cs;
    if (tfs__cuda->pool(stream_of(k), is_max, &w, k->in[0]->data, out->data, &cs))
        return tfs__gpu_fail(k, &cs, st);
    return TFS_OK;
}

static enum tfs_code gk_max_pool(tfs_kernel_ctx *k, tfs_status *st)
{
    return pool(k, true, st);
}

static enum tfs_code gk_avg_pool(tfs_kernel_ctx *k, tfs_status *st)
{
    return pool(k, false, st);
}

/* ---- the table and placement ------------------------------------------------------------------ */

const tfs_kernel_fn tfs__gpu_kernels[TFS_OP_COUNT] = {
    [TFS_OP_MAT_MUL] = gk_mat_mul,
    [TFS_OP_FUSED_MAT_MUL] = gk_fused_mat_mul,
    [TFS_OP_BIAS_ADD] = gk_bias_add,
    [TFS_OP_RELU] = gk_relu,
    [TFS_OP_RELU6] = gk_relu6,
    [TFS_OP_SIGMOID] = gk_sigmoid,
    [TFS_OP_TANH] = gk_tanh,
    [TFS_OP_ADD] = gk_add,
    [TFS_OP_ADD_V2] = gk_add,
    [TFS_OP_SUB] = gk_sub,
    [TFS_OP_MUL] = gk_mul,
    [TFS_OP_REAL_DIV] = gk_real_div,
    [TFS_OP_MAXIMUM] = gk_maximum,
    [TFS_OP_SOFTMAX] = gk_softmax,
    [TFS_OP_SUM] = gk_sum,
    [TFS_OP_MEAN] = gk_mean,
    [TFS_OP_MAX] = gk_max,
    [TFS_OP_MIN] = gk_min,
    [TFS_OP_CONV2D] = gk_conv2d,
    [TFS_OP_FUSED_CONV2D] = gk_fused_conv2d,
    [TFS_OP_MAX_POOL] = gk_max_pool,
    [TFS_OP_AVG_POOL] = gk_avg_pool,
    [TFS_OP_FUSED_BATCH_NORM] = gk_fused_batch_norm,
    [TFS_OP_FUSED_BATCH_NORM_V2] = gk_fused_batch_norm,
    [TFS_OP_FUSED_BATCH_NORM_V3] = gk_fused_batch_norm,
    /* Views: the CPU kernels only read shapes (and Reshape's and ExpandDims' host inputs 1). */
    [TFS_OP_IDENTITY] = tfs__k_identity,
    [TFS_OP_STOP_GRADIENT] = tfs__k_identity,
    [TFS_OP_SNAPSHOT] = tfs__k_identity,
    [TFS_OP_RESHAPE] = tfs__k_reshape,
    [TFS_OP_SQUEEZE] = tfs__k_squeeze,
    [TFS_OP_EXPAND_DIMS] = tfs__k_expand_dims,
};

static bool attr_is(const tfs_node *n, const char *name, enum tfs_dtype want)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    return v && v->kind == TFS_ATTR_TYPE && v->type == want;
}

static bool nhwc(const tfs_node *n)
{
    return !strcmp(tfs__attr_str(n, "data_format", "NHWC"), "NHWC");
}

enum tfs_placement tfs__gpu_supports_op(const tfs_backend *b, const tfs_node *n)
{
    (void)b;
    if (!n->op)
        return TFS_PLACE_CPU;
    int op = (int)(n->op - tfs__ops);
    if (op < 0 || op >= TFS_OP_COUNT || !tfs__gpu_kernels[op])
        return TFS_PLACE_CPU;
    enum tfs_cuda_act act;
    switch (op) {
    case TFS_OP_IDENTITY:
    case TFS_OP_STOP_GRADIENT:
    case TFS_OP_SNAPSHOT:
    case TFS_OP_RESHAPE:
    case TFS_OP_SQUEEZE:
    case TFS_OP_EXPAND_DIMS:
        return TFS_PLACE_FOLLOW;
    case TFS_OP_BIAS_ADD:
    case TFS_OP_CONV2D:
    case TFS_OP_MAX_POOL:
    case TFS_OP_AVG_POOL:
        return attr_is(n, "T", TFS_DTYPE_FLOAT) && nhwc(n) ? TFS_PLACE_DEVICE : TFS_PLACE_CPU;
    case TFS_OP_FUSED_MAT_MUL:
        return attr_is(n, "T", TFS_DTYPE_FLOAT) && fused_bias_act(n, &act) ? TFS_PLACE_DEVICE
                                                                           : TFS_PLACE_CPU;
    case TFS_OP_FUSED_CONV2D:
        return attr_is(n, "T", TFS_DTYPE_FLOAT) && nhwc(n) && fused_bias_act(n, &act)
                   ? TFS_PLACE_DEVICE
                   : TFS_PLACE_CPU;
    case TFS_OP_FUSED_BATCH_NORM:
    case TFS_OP_FUSED_BATCH_NORM_V2:
    case TFS_OP_FUSED_BATCH_NORM_V3: {
        const tfs_attr_value *tr = tfs__attr(n, "is_training");
        bool training = !tr || tr->kind != TFS_ATTR_B || tr->b;   /* TF's default: true */
        bool u_ok = op == TFS_OP_FUSED_BATCH_NORM || attr_is(n, "U", TFS_DTYPE_FLOAT);
        return attr_is(n, "T", TFS_DTYPE_FLOAT) && u_ok && !training && nhwc(n)
                   ? TFS_PLACE_DEVICE
                   : TFS_PLACE_CPU;
    }
    default:
        return attr_is(n, "T", TFS_DTYPE_FLOAT) ? TFS_PLACE_DEVICE : TFS_PLACE_CPU;
    }
}

unsigned tfs__gpu_host_inputs(const tfs_backend *b, const tfs_node *n)
{
    (void)b;
    /* Reshape's shape, ExpandDims' axis and the reductions' axes are read by the host. */
    static const int host_second[] = {TFS_OP_RESHAPE, TFS_OP_EXPAND_DIMS, TFS_OP_SUM,
                                      TFS_OP_MEAN, TFS_OP_MAX, TFS_OP_MIN};
    for (size_t i = 0; i < sizeof host_second / sizeof host_second[0]; i++)
        if (n->op == &tfs__ops[host_second[i]])
            return 1u << 1;
    return 0u;
}
