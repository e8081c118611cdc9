/* Tests of the CUDA executor (runtime/cuda/), in their own binary test-runtime-gpu because the
 * CUDA runtime cannot be used in a child forked after the parent initialized it: ctest runs it
 * with CK_FORK=no (tests/runtime/CMakeLists.txt).
 *
 * parity (tag gpu, only with a GPU): every GPU kernel against the CPU kernel on the same random
 *   inputs (uniform in [-1, 1), fixed seeds), both through sessions over the same one-op graph,
 *   the GPU one made with device gpu:0 (and asserted to have placed its op there). Tolerances,
 *   float32, TF32 off:
 *     elementwise, BiasAdd, pooling, batch norm, views  |gpu - cpu| <= 1e-6 + 1e-6 |cpu|
 *                                                       (GPU contracts a*b+c into one FMA)
 *     Sigmoid, Tanh, Softmax, Elu                       <= 2e-6 + 2e-6 |cpu| (other exp/tanh)
 *     MatMul, Conv2D and the fused products             <= 1e-5 * K + 1e-6 |cpu|, K the length
 *                                                       of the reduction (summation order)
 *   plus an MLP 784-512-256-10 and a small CNN with Const weights (kept on the device) at
 *   batch 1 and 64, whose softmax outputs agree to 1e-4 + 1e-3 |cpu| (cuDNN may pick FFT or
 *   Winograd convolutions, whose float error is larger than a direct sum's), and errors: bad
 *   shapes give INVALID_ARGUMENT naming the node on the GPU too.
 * pool (CUDA builds, no device needed): the device memory pool's allocator on a fake base
 *   address, the placement rules (tfs__gpu_supports_op), and the GPU kernels' argument checks,
 *   which run before anything touches the device and answer as the CPU kernels do.
 * no_gpu (without a GPU): the reason reads "no GPU: cudaGetDeviceCount: <error text>" (the CUDA
 *   module opened: ctest names it in TFS_CUDA_MODULE), a session asking for gpu:0 fails with
 *   FAILED_PRECONDITION, and auto runs on the CPU. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/nn-helpers.h"
#ifdef TFS_USE_CUDA
#include "runtime/cuda/gpu-impl.h"
#endif

Suite *suite_runtime_cuda(bool have_gpu);

/* ---- the executor line the GPU session logs ---------------------------------------------------- */

static char last_executor[512];

static void capture_sink(enum tfs_log_level level, const char *module, const char *line,
                         void *user)
{
    (void)level;
    (void)module;
    (void)user;
    const char *p = strstr(line, "executor: ");
    if (p)
        snprintf(last_executor, sizeof last_executor, "%s", p);
}

/* ---- one-op graphs on both devices ------------------------------------------------------------- */

typedef struct op_case {
    const char *op;
    int         n_in;
    tfs_tensor *in[6];
    const char *fused[2];   /* fused_ops (NULL: none) */
    nn_attrs    attrs;
    bool        no_T;
} op_case;

static tfs_session *case_session(const op_case *c, enum tfs_device dev)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    int id = tfs_graph_add_node(g, "op", c->op);
    for (int i = 0; i < c->n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        rt_placeholder(g, name, c->in[i]->dtype);
        tfs_graph_add_input(g, id, name);
    }
    if (!c->no_T)
        tfs_graph_set_attr_type(g, id, "T", TFS_DTYPE_FLOAT);
    if (c->fused[0]) {
        tfs_string s[2] = {{strlen(c->fused[0]), (char *)c->fused[0]},
                           {c->fused[1] ? strlen(c->fused[1]) : 0, (char *)c->fused[1]}};
        tfs_attr_value v = {.kind = TFS_ATTR_LIST,
                            .list = {.kind = TFS_ATTR_S, .n = c->fused[1] ? 2 : 1, .s = s}};
        tfs_graph_set_attr(g, id, "fused_ops", &v);
        tfs_graph_set_attr_int(g, id, "num_args", c->n_in - 2);
    }
    nn_apply_attrs(g, id, (void *)&c->attrs);
    tfs_session_opts o = tfs_session_opts_default();
    o.device = dev;
    last_executor[0] = 0;
    tfs_session *s = rt_session(g, &o);
    if (dev == TFS_DEVICE_GPU)
        ck_assert_msg(!strncmp(last_executor, "executor: gpu:0", 15) &&
                          strstr(last_executor, " 1 of ") != NULL,
                      "%s: not placed on the GPU: %s", c->op, last_executor);
    return s;
}

static enum tfs_code case_run(tfs_session *s, const op_case *c, int n_out, tfs_tensor **out,
                              tfs_status *st)
{
    tfs_feed feeds[6];
    char names[6][16];
    for (int i = 0; i < c->n_in; i++) {
        snprintf(names[i], sizeof names[i], "in%d:0", i);
        feeds[i] = (tfs_feed){names[i], c->in[i]};
    }
    const char *fetches[6] = {"op:0", "op:1", "op:2", "op:3", "op:4", "op:5"};
    return tfs_session_run(s, feeds, c->n_in, fetches, n_out, NULL, 0, out, st);
}

static void assert_close(const tfs_tensor *gpu, const tfs_tensor *cpu, double atol, double rtol,
                         const char *what)
{
    char a[128], b[128];
    ck_assert_msg(gpu->dtype == cpu->dtype &&
                      tfs_shape_equal(gpu->rank, gpu->dims, cpu->rank, cpu->dims),
                  "%s: GPU %s %s vs CPU %s %s", what, tfs_dtype_short_name(gpu->dtype),
                  tfs_shape_str(gpu->rank, gpu->dims, a, sizeof a),
                  tfs_dtype_short_name(cpu->dtype), tfs_shape_str(cpu->rank, cpu->dims, b, sizeof b));
    const float *g = gpu->data, *c = cpu->data;
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < cpu->nelem; i++) {
        double d = fabs((double)g[i] - (double)c[i]);
        bool same = g[i] == c[i] || (isnan(g[i]) && isnan(c[i]));   /* infinities too */
        if (!same && (!(d <= atol + rtol * fabs((double)c[i])) || isnan(d)) && d >= worst) {
            worst = isnan(d) ? INFINITY : d;
            at = i;
        }
    }
    ck_assert_msg(at < 0, "%s: element %lld: GPU %.9g, CPU %.9g (|d| %.3g > %.3g + %.3g|cpu|)",
                  what, (long long)at, at >= 0 ? g[at] : 0.0, at >= 0 ? c[at] : 0.0, worst, atol,
                  rtol);
}

/* Runs c on the CPU and on gpu:0, compares n_out outputs, frees c's inputs. */
static void parity(op_case *c, int n_out, double atol, double rtol, const char *what)
{
    tfs_tensor *want[6] = {NULL}, *got[6] = {NULL};
    tfs_status st;
    tfs_session *cpu = case_session(c, TFS_DEVICE_CPU);
    ck_assert_msg(case_run(cpu, c, n_out, want, &st) == TFS_OK, "%s on the CPU: %s", what, st.msg);
    tfs_session *gpu = case_session(c, TFS_DEVICE_GPU);
    for (int run = 0; run < 2; run++) {   /* the second run reuses the pool's freed blocks */
        ck_assert_msg(case_run(gpu, c, n_out, got, &st) == TFS_OK, "%s on the GPU: %s", what,
                      st.msg);
        for (int j = 0; j < n_out; j++) {
            assert_close(got[j], want[j], atol, rtol, what);
            tfs_tensor_unref(got[j]);
        }
    }
    for (int j = 0; j < n_out; j++)
        tfs_tensor_unref(want[j]);
    tfs_session_free(cpu);
    tfs_session_free(gpu);
    for (int i = 0; i < c->n_in; i++)
        tfs_tensor_unref(c->in[i]);
}

/* Expects the GPU session to fail with `code` and a message containing `needle`. */
static void gpu_error(op_case *c, enum tfs_code code, const char *needle)
{
    tfs_tensor *out[1] = {NULL};
    tfs_status st;
    tfs_session *gpu = case_session(c, TFS_DEVICE_GPU);
    ck_assert_int_eq(case_run(gpu, c, 1, out, &st), code);
    ck_assert_ptr_null(out[0]);
    rt_assert_err(st, code, needle);
    tfs_session_free(gpu);
    for (int i = 0; i < c->n_in; i++)
        tfs_tensor_unref(c->in[i]);
}

#define ELEM_TOL 1e-6, 1e-6
#define TRANS_TOL 2e-6, 2e-6
#define DOT_TOL(K) (1e-5 * (double)(K) + 1e-6), 1e-6

static uint32_t seed = 1;

static tfs_tensor *rnd(int rank, const int64_t *dims)
{
    return nn_random_f32(rank, dims, seed++);
}

/* ---- parity cases ------------------------------------------------------------------------------ */

START_TEST(test_cuda_matmul)
{
    static const int64_t sizes[][3] = {{7, 33, 5}, {1, 1, 1}, {64, 300, 17}, {3, 0, 4}, {0, 5, 2}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            int64_t m = sizes[s][0], k = sizes[s][1], n = sizes[s][2];
            int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n};
            op_case c = {.op = "MatMul", .n_in = 2, .in = {rnd(2, ad), rnd(2, bd)}};
            nn_attr_bool(&c.attrs, "transpose_a", ta);
            nn_attr_bool(&c.attrs, "transpose_b", tb);
            char what[64];
            snprintf(what, sizeof what, "MatMul %lldx%lldx%lld ta %d tb %d", (long long)m,
                     (long long)k, (long long)n, ta, tb);
            parity(&c, 1, DOT_TOL(k), what);
        }
    }
}
END_TEST

START_TEST(test_cuda_fused_matmul)
{
    static const char *acts[] = {NULL, "Relu", "Relu6", "Elu", "LeakyRelu"};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        int64_t ad[2] = {9, 40}, bd[2] = {40, 12}, cd[1] = {12};
        op_case c = {.op = "_FusedMatMul", .n_in = 3, .in = {rnd(2, ad), rnd(2, bd), rnd(1, cd)},
                     .fused = {"BiasAdd", acts[i]}};
        nn_attr_float(&c.attrs, "leakyrelu_alpha", 0.3f);
        parity(&c, 1, DOT_TOL(40), acts[i] ? acts[i] : "_FusedMatMul BiasAdd");
    }
}
END_TEST

START_TEST(test_cuda_unary_and_bias)
{
    static const char *ops[] = {"Relu", "Relu6", "Sigmoid", "Tanh"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int64_t d[2] = {37, 29};
        op_case c = {.op = ops[i], .n_in = 1, .in = {rnd(2, d)}};
        float *x = c.in[0]->data;
        for (int64_t j = 0; j < c.in[0]->nelem; j++)
            x[j] *= 9.0f;   /* past Relu6's 6 and into exp's tails */
        parity(&c, 1, i >= 2 ? 2e-6 : 1e-6, i >= 2 ? 2e-6 : 1e-6, ops[i]);
    }
    /* Relu of a multiple of 4 elements: the float4 path. */
    int64_t d4[2] = {16, 12};
    op_case r4 = {.op = "Relu", .n_in = 1, .in = {rnd(2, d4)}};
    parity(&r4, 1, ELEM_TOL, "Relu, 192 elements");
    int64_t xd[3] = {4, 5, 6}, bd[1] = {6};
    op_case c = {.op = "BiasAdd", .n_in = 2, .in = {rnd(3, xd), rnd(1, bd)}};
    parity(&c, 1, ELEM_TOL, "BiasAdd");
    int64_t xd8[3] = {3, 5, 8}, bd8[1] = {8};   /* 8 channels: float4 */
    op_case c8 = {.op = "BiasAdd", .n_in = 2, .in = {rnd(3, xd8), rnd(1, bd8)}};
    parity(&c8, 1, ELEM_TOL, "BiasAdd, 8 channels");
    int64_t empty[2] = {0, 6};
    op_case e = {.op = "BiasAdd", .n_in = 2, .in = {rnd(2, empty), rnd(1, bd)}};
    parity(&e, 1, ELEM_TOL, "BiasAdd of an empty tensor");
}
END_TEST

START_TEST(test_cuda_binary_broadcast)
{
    static const char *ops[] = {"Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum"};
    static const struct { int ra; int64_t a[4]; int rb; int64_t b[4]; } shapes[] = {
        {3, {2, 3, 4}, 1, {4}},    {3, {2, 1, 4}, 2, {3, 1}}, {1, {5}, 0, {0}},
        {2, {3, 4}, 2, {3, 4}},    {0, {0}, 2, {2, 2}},       {4, {2, 1, 3, 1}, 4, {1, 4, 1, 5}},
        {2, {0, 3}, 1, {3}},       {3, {3, 5, 7}, 3, {3, 5, 7}}, /* same shapes: flat, float4 */
        {4, {2, 3, 4, 8}, 4, {2, 3, 4, 8}},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            op_case c = {.op = ops[i], .n_in = 2,
                         .in = {rnd(shapes[s].ra, shapes[s].a), rnd(shapes[s].rb, shapes[s].b)}};
            if (!strcmp(ops[i], "RealDiv")) {   /* divisors away from 0 */
                float *y = c.in[1]->data;
                for (int64_t j = 0; j < c.in[1]->nelem; j++)
                    y[j] = y[j] < 0 ? y[j] - 0.5f : y[j] + 0.5f;
            }
            char what[64];
            snprintf(what, sizeof what, "%s shapes %zu", ops[i], s);
            parity(&c, 1, ELEM_TOL, what);
        }
    }
    int64_t a[2] = {2, 3}, b[2] = {3, 2};
    op_case bad = {.op = "Add", .n_in = 2, .in = {rnd(2, a), rnd(2, b)}};
    gpu_error(&bad, TFS_INVALID_ARGUMENT, "Incompatible shapes");
}
END_TEST

START_TEST(test_cuda_softmax)
{
    static const struct { int r; int64_t d[3]; } shapes[] = {{2, {6, 10}}, {2, {4, 1}},
                                                              {3, {2, 3, 7}}, {1, {1000}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        op_case c = {.op = "Softmax", .n_in = 1, .in = {rnd(shapes[s].r, shapes[s].d)}};
        float *x = c.in[0]->data;
        for (int64_t j = 0; j < c.in[0]->nelem; j++)
            x[j] *= 20.0f;
        parity(&c, 1, TRANS_TOL, "Softmax");
    }
}
END_TEST

static void conv_case(const char *op, int64_t n, int64_t h, int64_t w, int64_t ci, int64_t kh,
                      int64_t kw, int64_t co, int64_t stride, int64_t dil, const char *pad,
                      const char *act)
{
    int64_t xd[4] = {n, h, w, ci}, fd[4] = {kh, kw, ci, co}, bd[1] = {co};
    op_case c = {.op = op, .n_in = 2, .in = {rnd(4, xd), rnd(4, fd)}};
    if (!strcmp(op, "_FusedConv2D")) {
        c.n_in = 3;
        c.in[2] = rnd(1, bd);
        c.fused[0] = "BiasAdd";
        c.fused[1] = act;
    }
    nn_attr_ints(&c.attrs, "strides", 4, (const int64_t[]){1, stride, stride, 1});
    nn_attr_ints(&c.attrs, "dilations", 4, (const int64_t[]){1, dil, dil, 1});
    nn_attr_str(&c.attrs, "padding", pad);
    char what[128];
    snprintf(what, sizeof what, "%s [%lld,%lld,%lld,%lld] * %lldx%lldx%lld s%lld d%lld %s %s", op,
             (long long)n, (long long)h, (long long)w, (long long)ci, (long long)kh,
             (long long)kw, (long long)co, (long long)stride, (long long)dil, pad,
             act ? act : "");
    parity(&c, 1, DOT_TOL(kh * kw * ci), what);
}

START_TEST(test_cuda_conv2d)
{
    conv_case("Conv2D", 2, 9, 9, 3, 3, 3, 4, 1, 1, "SAME", NULL);
    conv_case("Conv2D", 2, 9, 9, 3, 3, 3, 4, 2, 1, "SAME", NULL);    /* odd padding: bottom */
    conv_case("Conv2D", 2, 8, 8, 3, 3, 3, 4, 2, 1, "SAME", NULL);    /* asymmetric */
    conv_case("Conv2D", 1, 10, 7, 5, 3, 2, 6, 2, 1, "VALID", NULL);
    conv_case("Conv2D", 1, 11, 11, 2, 3, 3, 3, 1, 2, "SAME", NULL);  /* dilation */
    conv_case("Conv2D", 3, 6, 6, 8, 1, 1, 16, 1, 1, "VALID", NULL);  /* 1x1 */
    conv_case("Conv2D", 1, 28, 28, 1, 5, 5, 32, 1, 1, "SAME", NULL);
    conv_case("_FusedConv2D", 2, 9, 9, 3, 3, 3, 4, 1, 1, "SAME", "Relu");
    conv_case("_FusedConv2D", 2, 8, 8, 3, 3, 3, 4, 2, 1, "SAME", "Relu6");
    conv_case("_FusedConv2D", 1, 7, 7, 4, 3, 3, 5, 1, 1, "VALID", NULL);
    /* EXPLICIT padding: ResNet's 7x7/2 stem and stride-2 3x3 as bench/infer/resnet.c builds them
     * (PyTorch's symmetric padding, where SAME would put it at the end), and a lopsided one. */
    static const struct { int64_t h, k, s, ci, co, pad[4]; } ex[] = {
        {23, 7, 2, 3, 8, {3, 3, 3, 3}}, {14, 3, 2, 4, 6, {1, 1, 1, 1}},
        {9, 3, 1, 2, 3, {2, 0, 0, 1}},
    };
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        int64_t xd[4] = {2, ex[i].h, ex[i].h, ex[i].ci}, fd[4] = {ex[i].k, ex[i].k, ex[i].ci,
                                                                  ex[i].co};
        op_case c = {.op = "Conv2D", .n_in = 2, .in = {rnd(4, xd), rnd(4, fd)}};
        nn_attr_ints(&c.attrs, "strides", 4, (const int64_t[]){1, ex[i].s, ex[i].s, 1});
        nn_attr_str(&c.attrs, "padding", "EXPLICIT");
        nn_attr_ints(&c.attrs, "explicit_paddings", 8,
                     (const int64_t[]){0, 0, ex[i].pad[0], ex[i].pad[1], ex[i].pad[2],
                                       ex[i].pad[3], 0, 0});
        char what[96];
        snprintf(what, sizeof what, "Conv2D %lldx%lld/%lld EXPLICIT [%lld,%lld,%lld,%lld]",
                 (long long)ex[i].k, (long long)ex[i].k, (long long)ex[i].s,
                 (long long)ex[i].pad[0], (long long)ex[i].pad[1], (long long)ex[i].pad[2],
                 (long long)ex[i].pad[3]);
        parity(&c, 1, DOT_TOL(ex[i].k * ex[i].k * ex[i].ci), what);
    }
    /* Filter depth that does not divide the input's: INVALID_ARGUMENT as on the CPU. */
    int64_t xd[4] = {1, 5, 5, 3}, fd[4] = {3, 3, 2, 4};
    op_case bad = {.op = "Conv2D", .n_in = 2, .in = {rnd(4, xd), rnd(4, fd)}};
    nn_attr_ints(&bad.attrs, "strides", 4, (const int64_t[]){1, 1, 1, 1});
    nn_attr_str(&bad.attrs, "padding", "SAME");
    gpu_error(&bad, TFS_INVALID_ARGUMENT, "input depth must be evenly divisible");
}
END_TEST

START_TEST(test_cuda_pool)
{
    static const char *ops[] = {"MaxPool", "AvgPool"};
    static const struct { int64_t k, s; const char *pad; int64_t h, w; } g[] = {
        {3, 2, "SAME", 8, 8}, {3, 2, "VALID", 9, 7}, {2, 2, "VALID", 8, 8}, {3, 1, "SAME", 5, 6},
    };
    for (size_t i = 0; i < 2; i++) {
        for (size_t j = 0; j < sizeof g / sizeof g[0]; j++) {
            int64_t xd[4] = {2, g[j].h, g[j].w, 5};
            op_case c = {.op = ops[i], .n_in = 1, .in = {rnd(4, xd)}};
            nn_attr_ints(&c.attrs, "ksize", 4, (const int64_t[]){1, g[j].k, g[j].k, 1});
            nn_attr_ints(&c.attrs, "strides", 4, (const int64_t[]){1, g[j].s, g[j].s, 1});
            nn_attr_str(&c.attrs, "padding", g[j].pad);
            char what[64];
            snprintf(what, sizeof what, "%s k%lld s%lld %s", ops[i], (long long)g[j].k,
                     (long long)g[j].s, g[j].pad);
            parity(&c, 1, ELEM_TOL, what);
        }
    }
    /* MaxPool takes EXPLICIT padding (ResNet's 3x3/2 pad 1, and pads of a window's size, whose
     * windows at the edge hold one row or column); AvgPool refuses it, as TensorFlow's does. */
    static const int64_t pads[][4] = {{1, 1, 1, 1}, {2, 0, 0, 2}};
    for (size_t i = 0; i < 2; i++) {
        int64_t xd[4] = {2, 8, 7, 5};
        op_case c = {.op = "MaxPool", .n_in = 1, .in = {rnd(4, xd)}};
        nn_attr_ints(&c.attrs, "ksize", 4, (const int64_t[]){1, 3, 3, 1});
        nn_attr_ints(&c.attrs, "strides", 4, (const int64_t[]){1, 2, 2, 1});
        nn_attr_str(&c.attrs, "padding", "EXPLICIT");
        nn_attr_ints(&c.attrs, "explicit_paddings", 8,
                     (const int64_t[]){0, 0, pads[i][0], pads[i][1], pads[i][2], pads[i][3], 0,
                                       0});
        parity(&c, 1, ELEM_TOL, i ? "MaxPool k3 s2 EXPLICIT [2,0,0,2]"
                                  : "MaxPool k3 s2 EXPLICIT [1,1,1,1]");
    }
    int64_t xd[4] = {1, 6, 6, 2};
    op_case bad = {.op = "AvgPool", .n_in = 1, .in = {rnd(4, xd)}};
    nn_attr_ints(&bad.attrs, "ksize", 4, (const int64_t[]){1, 3, 3, 1});
    nn_attr_ints(&bad.attrs, "strides", 4, (const int64_t[]){1, 2, 2, 1});
    nn_attr_str(&bad.attrs, "padding", "EXPLICIT");
    nn_attr_ints(&bad.attrs, "explicit_paddings", 8, (const int64_t[]){0, 0, 1, 1, 1, 1, 0, 0});
    gpu_error(&bad, TFS_INVALID_ARGUMENT, "padding must be SAME or VALID");
}
END_TEST

START_TEST(test_cuda_batch_norm)
{
    for (int64_t ch = 6; ch <= 8; ch += 2) {   /* 8 channels: the float4 path */
        int64_t xd[4] = {2, 4, 4, ch}, cd[1] = {ch};
        op_case c = {.op = "FusedBatchNormV3", .n_in = 5,
                     .in = {rnd(4, xd), rnd(1, cd), rnd(1, cd), rnd(1, cd), rnd(1, cd)}};
        float *var = c.in[4]->data;
        for (int i = 0; i < ch; i++)
            var[i] = fabsf(var[i]) + 0.1f;
        nn_attr_bool(&c.attrs, "is_training", false);
        nn_attr_float(&c.attrs, "epsilon", 0.001f);
        nn_attr_type(&c.attrs, "U", TFS_DTYPE_FLOAT);
        /* y, batch_mean, batch_variance */
        parity(&c, 3, ELEM_TOL, ch == 8 ? "FusedBatchNormV3, 8 channels" : "FusedBatchNormV3");
    }
}
END_TEST

/* Sum, Mean, Max, Min over axes fed as int32 or int64 (read on the host). Sum and Mean
 * accumulate in double on both devices, hence the elementwise tolerance. */
START_TEST(test_cuda_reduce)
{
    static const char *ops[] = {"Mean", "Sum", "Max", "Min"};
    static const struct {
        int     rank;
        int64_t dims[4];
        int     n_axes;
        int64_t axes[4];
        bool    keep;
    } r[] = {
        {4, {3, 5, 6, 8}, 2, {1, 2}, false},   /* global average pool */
        {4, {3, 5, 6, 8}, 2, {1, 2}, true},
        {2, {7, 33}, 1, {-1}, false},          /* last axis */
        {3, {4, 5, 6}, 2, {0, 2}, true},       /* axes apart */
        {3, {4, 1, 6}, 3, {0, 1, 2}, false},   /* everything */
        {2, {4, 6}, 0, {0}, false},            /* no axes: a copy */
        {3, {2, 0, 3}, 1, {1}, false},         /* an empty axis: 0, NaN, -inf, +inf */
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        for (size_t j = 0; j < sizeof r / sizeof r[0]; j++) {
            op_case c = {.op = ops[i], .n_in = 2, .in = {rnd(r[j].rank, r[j].dims)}};
            int64_t na[1] = {r[j].n_axes};
            bool wide = j % 2;   /* int64 axes on odd cases */
            ck_assert_int_eq(tfs_tensor_new(wide ? TFS_DTYPE_INT64 : TFS_DTYPE_INT32, 1, na,
                                            &c.in[1], NULL), TFS_OK);
            for (int a = 0; a < r[j].n_axes; a++) {
                if (wide)
                    ((int64_t *)c.in[1]->data)[a] = r[j].axes[a];
                else
                    ((int32_t *)c.in[1]->data)[a] = (int32_t)r[j].axes[a];
            }
            nn_attr_bool(&c.attrs, "keep_dims", r[j].keep);
            char what[64];
            snprintf(what, sizeof what, "%s case %zu", ops[i], j);
            parity(&c, 1, ELEM_TOL, what);
        }
    }
    /* An axis out of range: the CPU's INVALID_ARGUMENT, on the GPU too. */
    int64_t xd[2] = {3, 4}, one[1] = {1};
    op_case bad = {.op = "Sum", .n_in = 2, .in = {rnd(2, xd)}};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT32, 1, one, &bad.in[1], NULL), TFS_OK);
    ((int32_t *)bad.in[1]->data)[0] = 2;
    gpu_error(&bad, TFS_INVALID_ARGUMENT, "Invalid reduction dimension");
}
END_TEST

/* ---- whole models with Const weights ----------------------------------------------------------- */

static void add_dense(tfs_graph *g, const char *name, const char *in, int64_t n_in, int64_t n_out,
                      const char *act)
{
    char w[64], b[64], mm[64], ba[64];
    snprintf(w, sizeof w, "%s/w", name);
    snprintf(b, sizeof b, "%s/b", name);
    snprintf(mm, sizeof mm, "%s/mm", name);
    snprintf(ba, sizeof ba, act ? "%s/ba" : "%s", name);
    int64_t wd[2] = {n_in, n_out}, bd[1] = {n_out};
    tfs_tensor *wt = rnd(2, wd);
    float *wv = wt->data;
    for (int64_t i = 0; i < wt->nelem; i++)
        wv[i] *= 1.0f / sqrtf((float)n_in);
    rt_const(g, w, wt);
    rt_const(g, b, rnd(1, bd));
    rt_node(g, mm, "MatMul", in, w, TFS_DTYPE_FLOAT);
    rt_node(g, ba, "BiasAdd", mm, b, TFS_DTYPE_FLOAT);
    if (act)
        rt_node(g, name, act, ba, NULL, TFS_DTYPE_FLOAT);
}

static tfs_graph *mlp_graph(void)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    seed = 1000;
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    add_dense(g, "d1", "x", 784, 512, "Relu");
    add_dense(g, "d2", "d1", 512, 256, "Relu");
    add_dense(g, "d3", "d2", 256, 10, NULL);
    rt_node(g, "probs", "Softmax", "d3", NULL, TFS_DTYPE_FLOAT);
    return g;
}

static void model_parity(tfs_graph *(*make)(void), int rank, const int64_t *xdims, double atol,
                         const char *what)
{
    tfs_tensor *x = rnd(rank, xdims);
    tfs_feed feed = {"x:0", x};
    tfs_tensor *want = NULL, *got = NULL;
    tfs_status st;
    tfs_session *cpu = rt_session(make(), NULL);
    ck_assert_msg(rt_run1(cpu, &feed, 1, "probs:0", &want, &st) == TFS_OK, "%s", st.msg);
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_session *gpu = rt_session(make(), &o);
    for (int run = 0; run < 3; run++) {
        ck_assert_msg(rt_run1(gpu, &feed, 1, "probs:0", &got, &st) == TFS_OK, "%s", st.msg);
        assert_close(got, want, atol, 1e-3, what);
        tfs_tensor_unref(got);
    }
    tfs_tensor_unref(want);
    tfs_tensor_unref(x);
    tfs_session_free(cpu);
    tfs_session_free(gpu);
}

START_TEST(test_cuda_mlp)
{
    for (int64_t batch = 1; batch <= 64; batch *= 64) {
        int64_t xd[2] = {batch, 784};
        model_parity(mlp_graph, 2, xd, 1e-4, "MLP 784-512-256-10");
    }
}
END_TEST

/* conv 3x3x1x16 SAME + relu -> maxpool 2 -> conv 3x3x16x32 SAME + relu -> maxpool 2 ->
 * reshape [-1, 7*7*32] -> expand dims -> squeeze -> dense 128 relu -> dense 10 -> softmax;
 * input [N, 28, 28, 1]. */
static tfs_graph *cnn_graph(void)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    seed = 2000;
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    const char *in = "x";
    static const char *names[2][4] = {{"c1/f", "c1/conv", "c1", "p1"},
                                      {"c2/f", "c2/conv", "c2", "p2"}};
    int64_t chans[3] = {1, 16, 32};
    for (int l = 0; l < 2; l++) {
        int64_t fd[4] = {3, 3, chans[l], chans[l + 1]};
        rt_const(g, names[l][0], rnd(4, fd));
        int id = rt_node(g, names[l][1], "Conv2D", in, names[l][0], TFS_DTYPE_FLOAT);
        tfs_attr_value v = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = 4,
                                                            .i = (int64_t[]){1, 1, 1, 1}}};
        tfs_graph_set_attr(g, id, "strides", &v);
        tfs_graph_set_attr_string(g, id, "padding", "SAME");
        rt_node(g, names[l][2], "Relu", names[l][1], NULL, TFS_DTYPE_FLOAT);
        id = rt_node(g, names[l][3], "MaxPool", names[l][2], NULL, TFS_DTYPE_FLOAT);
        tfs_attr_value k = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = 4,
                                                            .i = (int64_t[]){1, 2, 2, 1}}};
        tfs_graph_set_attr(g, id, "ksize", &k);
        tfs_graph_set_attr(g, id, "strides", &k);
        tfs_graph_set_attr_string(g, id, "padding", "VALID");
        in = names[l][3];
    }
    rt_const(g, "flat", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){2},
                                  (const int32_t[]){-1, 7 * 7 * 32}));
    rt_node(g, "flat4", "Reshape", "p2", "flat", TFS_DTYPE_FLOAT);
    /* Views that follow their input onto the GPU: [N, 1568] -> [N, 1, 1568] -> [N, 1568]. */
    rt_const(g, "axis", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){1}));
    rt_node(g, "expand", "ExpandDims", "flat4", "axis", TFS_DTYPE_FLOAT);
    int sq = rt_node(g, "flatten", "Squeeze", "expand", NULL, TFS_DTYPE_FLOAT);
    tfs_attr_value dims = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = 1,
                                                           .i = (int64_t[]){1}}};
    tfs_graph_set_attr(g, sq, "squeeze_dims", &dims);
    add_dense(g, "d1", "flatten", 7 * 7 * 32, 128, "Relu");
    add_dense(g, "d2", "d1", 128, 10, NULL);
    rt_node(g, "probs", "Softmax", "d2", NULL, TFS_DTYPE_FLOAT);
    return g;
}

START_TEST(test_cuda_cnn)
{
    for (int64_t batch = 1; batch <= 64; batch *= 64) {
        int64_t xd[4] = {batch, 28, 28, 1};
        model_parity(cnn_graph, 4, xd, 1e-4, "small CNN");
    }
}
END_TEST

/* ---- the pool allocator ------------------------------------------------------------------------ */

#ifdef TFS_USE_CUDA

START_TEST(test_cuda_pool_allocator)
{
    tfs_gpu_pool p;
    char *base = (char *)(uintptr_t)0x100000;   /* never dereferenced */
    int x1, x2;                                 /* two owners (executors) */
    ck_assert_int_eq(tfs__gpu_pool_init(&p, base, 4096, NULL), TFS_OK);
    char *a = tfs__gpu_pool_alloc(&p, 1, NULL), *b = tfs__gpu_pool_alloc(&p, 300, NULL);
    char *c = tfs__gpu_pool_alloc(&p, 256, NULL);
    ck_assert(a == base && b == base + 256 && c == base + 768);   /* 256-byte blocks */
    ck_assert_uint_eq(tfs__gpu_pool_in_use(&p), 1024);
    ck_assert_ptr_null(tfs__gpu_pool_alloc(&p, 4096, NULL));        /* no room left for it */
    tfs__gpu_pool_free(&p, b);
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 512, NULL), b);         /* first fit reuses it */
    /* Held blocks: their owner takes them again, nobody else until the flush. */
    tfs__gpu_pool_release(&p, b, &x1);
    ck_assert_uint_eq(tfs__gpu_pool_in_use(&p), 1024);
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 256, &x2), base + 1024);   /* past the held one */
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 256, NULL), base + 1280);
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 256, &x1), b);             /* the owner's again */
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 256, &x1), b + 256);       /* its held remainder */
    tfs__gpu_pool_release(&p, b, &x1);
    tfs__gpu_pool_release(&p, b + 256, &x1);                            /* merged when held */
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 512, &x1), b);
    tfs__gpu_pool_release(&p, b, &x1);
    tfs__gpu_pool_release(&p, a, &x2);
    tfs__gpu_pool_flush(&p, &x1);
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 512, &x2), b);             /* free for all now */
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 256, &x1), base + 1536);   /* a is x2's still */
    tfs__gpu_pool_flush(&p, &x2);
    tfs__gpu_pool_free(&p, b);
    tfs__gpu_pool_free(&p, c);
    tfs__gpu_pool_free(&p, base + 1024);
    tfs__gpu_pool_free(&p, base + 1280);
    tfs__gpu_pool_free(&p, base + 1536);
    tfs__gpu_pool_free(&p, NULL);
    ck_assert_uint_eq(tfs__gpu_pool_in_use(&p), 0);
    ck_assert_ptr_eq(tfs__gpu_pool_alloc(&p, 4096, NULL), base);        /* merged back into one */
    ck_assert_ptr_null(tfs__gpu_pool_alloc(&p, 1, NULL));
    tfs__gpu_pool_destroy(&p);
}
END_TEST
#endif

#ifdef TFS_USE_CUDA
/* ---- placement and argument checks (no device needed) ------------------------------------------ */

/* A finalized one-node graph "op" of type `op` over two placeholders, with attr T and `at`. */
static tfs_graph *one_node(const char *op, int n_in, enum tfs_dtype T, const nn_attrs *at)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int id = tfs_graph_add_node(g, "op", op);
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        rt_placeholder(g, name, T);
        tfs_graph_add_input(g, id, name);
    }
    tfs_graph_set_attr_type(g, id, "T", T);
    if (at)
        nn_apply_attrs(g, id, (void *)at);
    ck_assert_int_eq(tfs_graph_finalize(g, NULL), TFS_OK);
    return g;
}

static enum tfs_placement place(const char *op, int n_in, enum tfs_dtype T, const nn_attrs *at)
{
    tfs_graph *g = one_node(op, n_in, T, at);
    const tfs_node *n = tfs__graph_node(g, 0);   /* added first */
    ck_assert_str_eq(n->name, "op");
    enum tfs_placement pl = tfs__gpu_supports_op(NULL, n);
    tfs_graph_unref(g);
    return pl;
}

START_TEST(test_cuda_supports_op)
{
    ck_assert_int_eq(place("MatMul", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_DEVICE);
    ck_assert_int_eq(place("MatMul", 2, TFS_DTYPE_DOUBLE, NULL), TFS_PLACE_CPU);
    ck_assert_int_eq(place("Add", 2, TFS_DTYPE_INT32, NULL), TFS_PLACE_CPU);
    ck_assert_int_eq(place("Square", 1, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_CPU);
    ck_assert_int_eq(place("Identity", 1, TFS_DTYPE_STRING, NULL), TFS_PLACE_FOLLOW);
    ck_assert_int_eq(place("Reshape", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_FOLLOW);
    ck_assert_int_eq(place("ExpandDims", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_FOLLOW);
    ck_assert_int_eq(place("Squeeze", 1, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_FOLLOW);
    ck_assert_int_eq(place("Shape", 1, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_CPU);
    /* Float reductions run there, their axes stay on the host; Prod and integers do not go. */
    ck_assert_int_eq(place("Mean", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_DEVICE);
    ck_assert_int_eq(place("Max", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_DEVICE);
    ck_assert_int_eq(place("Sum", 2, TFS_DTYPE_INT32, NULL), TFS_PLACE_CPU);
    ck_assert_int_eq(place("Prod", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_CPU);
    tfs_graph *mean = one_node("Mean", 2, TFS_DTYPE_FLOAT, NULL);
    ck_assert_uint_eq(tfs__gpu_host_inputs(NULL, tfs__graph_node(mean, 0)), 1u << 1);
    tfs_graph_unref(mean);
    nn_attrs nchw = {0};
    nn_attr_str(&nchw, "data_format", "NCHW");
    ck_assert_int_eq(place("Conv2D", 2, TFS_DTYPE_FLOAT, &nchw), TFS_PLACE_CPU);
    ck_assert_int_eq(place("BiasAdd", 2, TFS_DTYPE_FLOAT, &nchw), TFS_PLACE_CPU);
    ck_assert_int_eq(place("Conv2D", 2, TFS_DTYPE_FLOAT, NULL), TFS_PLACE_DEVICE);
    nn_attrs bn = {0};
    nn_attr_type(&bn, "U", TFS_DTYPE_FLOAT);
    ck_assert_int_eq(place("FusedBatchNormV3", 5, TFS_DTYPE_FLOAT, &bn), TFS_PLACE_CPU);
    nn_attr_bool(&bn, "is_training", false);
    ck_assert_int_eq(place("FusedBatchNormV3", 5, TFS_DTYPE_FLOAT, &bn), TFS_PLACE_DEVICE);
    /* _FusedConv2D with a FusedBatchNorm epilogue stays on the CPU; BiasAdd + Relu goes. */
    static const char *fused[][2] = {{"FusedBatchNorm", NULL}, {"BiasAdd", "Relu"},
                                     {"BiasAdd", "Gelu"}};
    static const enum tfs_placement want[] = {TFS_PLACE_CPU, TFS_PLACE_DEVICE, TFS_PLACE_CPU};
    for (int i = 0; i < 3; i++) {
        tfs_graph *g;
        tfs_graph_new(&g, NULL);
        int id = tfs_graph_add_node(g, "op", "_FusedConv2D");
        tfs_graph_set_attr_type(g, id, "T", TFS_DTYPE_FLOAT);
        tfs_string sv[2] = {{strlen(fused[i][0]), (char *)fused[i][0]},
                            {fused[i][1] ? strlen(fused[i][1]) : 0, (char *)fused[i][1]}};
        tfs_attr_value v = {.kind = TFS_ATTR_LIST,
                            .list = {.kind = TFS_ATTR_S, .n = fused[i][1] ? 2 : 1, .s = sv}};
        tfs_graph_set_attr(g, id, "fused_ops", &v);
        ck_assert_int_eq(tfs_graph_finalize(g, NULL), TFS_OK);
        ck_assert_int_eq(tfs__gpu_supports_op(NULL, tfs__graph_node(g, id)), want[i]);
        tfs_graph_unref(g);
    }
}
END_TEST

/* The GPU kernels check arguments before touching the device, with the CPU kernels' codes and
 * messages: run them on inputs that fail those checks, with an executor that has no device. */
static void bad_args(const char *op, int n_in, tfs_tensor **in, const nn_attrs *at,
                     enum tfs_code code, const char *needle)
{
    tfs_graph *g = one_node(op, n_in, TFS_DTYPE_FLOAT, at);
    const tfs_node *n = tfs__graph_node(g, 0);   /* added first */
    tfs_gpu_exec x;
    memset(&x, 0, sizeof x);
    tfs_tensor *out[6] = {NULL};
    tfs_kernel_ctx k = {.graph = g, .node = n, .in = in, .n_in = n_in, .out = out,
                        .n_out = n->n_outputs, .exec = &x};
    tfs_status st;
    tfs_kernel_fn fn = tfs__gpu_kernels[n->op - tfs__ops];
    ck_assert_ptr_nonnull(fn);
    ck_assert_int_eq(fn(&k, &st), code);
    rt_assert_err(st, code, needle);
    for (int j = 0; j < 6; j++)
        ck_assert_ptr_null(out[j]);
    for (int i = 0; i < n_in; i++)
        tfs_tensor_unref(in[i]);
    tfs_graph_unref(g);
}

START_TEST(test_cuda_kernel_arg_checks)
{
    int64_t d23[2] = {2, 3}, d3[1] = {3}, d4[1] = {4}, d32[2] = {3, 2}, d2[1] = {2};
    int64_t x4[4] = {1, 5, 5, 3}, f4[4] = {3, 3, 2, 4}, f0[4] = {3, 0, 3, 4};
    bad_args("MatMul", 2, (tfs_tensor *[]){rnd(2, d23), rnd(2, d23)}, NULL, TFS_INVALID_ARGUMENT,
             "Matrix size-incompatible: In[0]: [2,3], In[1]: [2,3]");
    bad_args("MatMul", 2, (tfs_tensor *[]){rnd(1, d3), rnd(2, d32)}, NULL, TFS_INVALID_ARGUMENT,
             "must be matrices");
    bad_args("BiasAdd", 2, (tfs_tensor *[]){rnd(2, d23), rnd(1, d4)}, NULL, TFS_INVALID_ARGUMENT,
             "Must provide as many biases as the last dimension");
    bad_args("Add", 2, (tfs_tensor *[]){rnd(2, d23), rnd(1, d2)}, NULL, TFS_INVALID_ARGUMENT,
             "Incompatible shapes");
    bad_args("Softmax", 1, (tfs_tensor *[]){rnd(0, d3)}, NULL, TFS_INVALID_ARGUMENT,
             "logits must have >= 1 dimension");
    tfs_tensor *axis;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT32, 1, (const int64_t[]){1}, &axis, NULL), TFS_OK);
    ((int32_t *)axis->data)[0] = -3;
    bad_args("Mean", 2, (tfs_tensor *[]){rnd(2, d23), axis}, NULL, TFS_INVALID_ARGUMENT,
             "Invalid reduction dimension (-3 for input with 2 dimension(s)");
    nn_attrs conv = {0};
    nn_attr_ints(&conv, "strides", 4, (const int64_t[]){1, 1, 1, 1});
    nn_attr_str(&conv, "padding", "SAME");
    bad_args("Conv2D", 2, (tfs_tensor *[]){rnd(4, x4), rnd(4, f4)}, &conv, TFS_INVALID_ARGUMENT,
             "input depth must be evenly divisible by filter depth: 3 vs 2");
    bad_args("Conv2D", 2, (tfs_tensor *[]){rnd(4, x4), rnd(4, f0)}, &conv, TFS_INVALID_ARGUMENT,
             "filter must not have zero elements");
    bad_args("Conv2D", 2, (tfs_tensor *[]){rnd(2, d23), rnd(4, f4)}, &conv, TFS_INVALID_ARGUMENT,
             "node 'op'");
    nn_attrs pool = {0};
    nn_attr_ints(&pool, "ksize", 4, (const int64_t[]){2, 2, 2, 1});
    nn_attr_ints(&pool, "strides", 4, (const int64_t[]){1, 1, 1, 1});
    nn_attr_str(&pool, "padding", "VALID");
    bad_args("MaxPool", 1, (tfs_tensor *[]){rnd(4, x4)}, &pool, TFS_UNIMPLEMENTED,
             "pooling over the batch or depth dimension");
    nn_attrs bn = {0};
    nn_attr_bool(&bn, "is_training", false);
    bad_args("FusedBatchNormV3", 5,
             (tfs_tensor *[]){rnd(4, x4), rnd(1, d3), rnd(1, d3), rnd(1, d4), rnd(1, d3)}, &bn,
             TFS_INVALID_ARGUMENT, "mean must be 1-dimensional with the 3 channels of x");
    nn_attr_bool(&bn, "is_training", true);
    bad_args("FusedBatchNormV3", 5,
             (tfs_tensor *[]){rnd(4, x4), rnd(1, d3), rnd(1, d3), rnd(1, d3), rnd(1, d3)}, &bn,
             TFS_UNIMPLEMENTED, "only inference");
    int64_t i23[2] = {2, 3};
    tfs_tensor *ints = rt_tensor(TFS_DTYPE_INT32, 2, i23, NULL);
    bad_args("Relu", 1, (tfs_tensor *[]){ints}, NULL, TFS_INVALID_ARGUMENT,
             "input 0 has dtype int32; the GPU kernel takes float");
}
END_TEST

#endif

/* ---- without a GPU ----------------------------------------------------------------------------- */

START_TEST(test_cuda_no_gpu)
{
    char why[256];
    ck_assert_int_eq(tfs_runtime_gpu_count(why, sizeof why), 0);
#ifdef TFS_USE_CUDA
    ck_assert_msg(!strncmp(why, "no GPU: cudaGetDeviceCount: ", 28), "%s", why);
#else
    ck_assert_str_eq(why, "no GPU: tfserve was built without CUDA");
#endif
    tfs_graph *g = mlp_graph();
    ck_assert_int_eq(tfs_graph_finalize(g, NULL), TFS_OK);
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_session *s = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(g, &o, &s, &st), TFS_FAILED_PRECONDITION);
    rt_assert_err(st, TFS_FAILED_PRECONDITION, "device gpu:0: no GPU: ");
    o.device = TFS_DEVICE_AUTO;
    last_executor[0] = 0;
    enum tfs_log_level level = tfs_log_level();
    tfs_log_set_level(TFS_LOG_LEVEL_DEBUG);   /* the line is INFO once per process, then DEBUG */
    ck_assert_int_eq(tfs_session_new(g, &o, &s, &st), TFS_OK);
    tfs_log_set_level(level);
    ck_assert_msg(!strncmp(last_executor, "executor: cpu (device auto): no GPU: ", 37), "%s",
                  last_executor);
    int64_t xd[2] = {2, 784};
    tfs_tensor *x = rnd(2, xd), *y = NULL;
    tfs_feed feed = {"x:0", x};
    ck_assert_int_eq(rt_run1(s, &feed, 1, "probs:0", &y, &st), TFS_OK);
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    tfs_graph_unref(g);
    /* The parity suite's CNN is a valid graph (here on the CPU). */
    s = rt_session(cnn_graph(), &o);
    int64_t cd[4] = {2, 28, 28, 1};
    x = rnd(4, cd);
    feed.tensor = x;
    ck_assert_msg(rt_run1(s, &feed, 1, "probs:0", &y, &st) == TFS_OK, "%s", st.msg);
    ck_assert(y->rank == 2 && y->dims[0] == 2 && y->dims[1] == 10);
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_cuda(bool have_gpu)
{
    tfs_log_set_sink(capture_sink, NULL);
    Suite *s = suite_create("runtime_cuda");
    TCase *tc;
    if (have_gpu) {
        tc = tcase_create("parity");
        tcase_set_tags(tc, "gpu");
        tcase_add_test(tc, test_cuda_matmul);
        tcase_add_test(tc, test_cuda_fused_matmul);
        tcase_add_test(tc, test_cuda_unary_and_bias);
        tcase_add_test(tc, test_cuda_binary_broadcast);
        tcase_add_test(tc, test_cuda_softmax);
        tcase_add_test(tc, test_cuda_conv2d);
        tcase_add_test(tc, test_cuda_pool);
        tcase_add_test(tc, test_cuda_batch_norm);
        tcase_add_test(tc, test_cuda_reduce);
        tcase_add_test(tc, test_cuda_mlp);
        tcase_add_test(tc, test_cuda_cnn);
        tcase_set_timeout(tc, 120);
        suite_add_tcase(s, tc);
    } else {
        tc = tcase_create("no_gpu");
        tcase_add_test(tc, test_cuda_no_gpu);
        tcase_set_timeout(tc, 30);
        suite_add_tcase(s, tc);
    }
#ifdef TFS_USE_CUDA
    tc = tcase_create("pool");
    tcase_add_test(tc, test_cuda_pool_allocator);
    tcase_add_test(tc, test_cuda_supports_op);
    tcase_add_test(tc, test_cuda_kernel_arg_checks);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
#endif
    return s;
}
