/* The fused kernels the rewrites produce (runtime/kernels/nn-fused.c) against float64 references
 * computed by loops in the test: _FusedMatMul with every transpose and every activation,
 * _FusedConv2D with BiasAdd and FusedBatchNorm epilogues (im2col and 1x1 paths, strides, SAME
 * padding), _FusedConv2D with a residual Add (the added tensor shaped as the output, or
 * broadcasting either way), empty products and batches, and the errors: unsupported fused_ops,
 * wrong num_args or arg shapes, other dtypes. Tolerance: 1e-6 relative to the sum of the
 * magnitudes of each output's terms (float rounding of a dot product), plus 1e-6 absolute for
 * activations near zero. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/nn-helpers.h"

Suite *suite_runtime_nn_fused(void);

enum { A_NONE, A_RELU, A_RELU6, A_ELU, A_LEAKY };
static const char *const ACT_NAMES[] = {NULL, "Relu", "Relu6", "Elu", "LeakyRelu"};

static double act_ref(int act, double x, double alpha)
{
    switch (act) {
    case A_RELU:  return x < 0 ? 0 : x;
    case A_RELU6: return x < 0 ? 0 : x > 6 ? 6 : x;
    case A_ELU:   return x < 0 ? expm1(x) : x;
    case A_LEAKY: return x > 0 ? x : x * alpha;
    default:      return x;
    }
}

/* fused_ops = the names up to the first NULL (at most 3). */
static void set_fused_ops(tfs_graph *g, int id, const char *const *names)
{
    tfs_string s[3];
    int n = 0;
    for (; n < 3 && names[n]; n++)
        s[n] = (tfs_string){strlen(names[n]), (char *)names[n]};
    tfs_attr_value v = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_S, .n = n, .s = s}};
    tfs_graph_set_attr(g, id, "fused_ops", &v);
}

/* When set, run_fused_ops makes input 1 (the filter) a Const holding a copy of in[1] instead
 * of a Placeholder: Conv2D takes Winograd's path only with a Const filter. */
static bool filter_const;

/* Builds "op" of type `op` over Placeholders in0..in{n-1} fed with in[], with the given fused ops
 * (ops NULL: no fused_ops attr) and num_args; `attrs` may add more. Runs it once. */
static enum tfs_code run_fused_ops(const char *op, int n, tfs_tensor *const *in,
                                   const char *const *ops, int64_t num_args, enum tfs_dtype T,
                                   const nn_attrs *attrs, tfs_tensor **out, tfs_status *st)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    tfs_feed feeds[8];
    char names[8][16];
    int id = tfs_graph_add_node(g, "op", op), nfeeds = 0;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        if (i == 1 && filter_const) {
            tfs_tensor *c = NULL;
            ck_assert_int_eq(tfs_tensor_copy(in[i], &c, NULL), TFS_OK);
            rt_const(g, names[i], c);
        } else {
            rt_placeholder(g, names[i], in[i]->dtype);
            feeds[nfeeds++] = (tfs_feed){names[i], in[i]};
        }
        tfs_graph_add_input(g, id, names[i]);
    }
    tfs_graph_set_attr_type(g, id, "T", T);
    tfs_graph_set_attr_int(g, id, "num_args", num_args);
    if (ops)
        set_fused_ops(g, id, ops);
    if (attrs)
        nn_apply_attrs(g, id, (void *)attrs);
    tfs_session *s = rt_session(g, NULL);
    enum tfs_code rc = rt_run1(s, feeds, nfeeds, "op:0", out, st);
    tfs_session_free(s);
    return rc;
}

/* run_fused_ops with fused_ops [first] or [first, second] (first NULL: no fused_ops attr). */
static enum tfs_code run_fused(const char *op, int n, tfs_tensor *const *in, const char *first,
                               const char *second, int64_t num_args, enum tfs_dtype T,
                               const nn_attrs *attrs, tfs_tensor **out, tfs_status *st)
{
    const char *ops[3] = {first, second, NULL};
    return run_fused_ops(op, n, in, first ? ops : NULL, num_args, T, attrs, out, st);
}

/* ---- _FusedMatMul --------------------------------------------------------------------------- */

static void check_matmul(int64_t m, int64_t k, int64_t n, bool ta, bool tb, int act, float alpha)
{
    int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n};
    tfs_tensor *a = nn_random_f32(2, ad, 1 + (uint32_t)act), *b = nn_random_f32(2, bd, 11);
    tfs_tensor *bias = nn_random_f32(1, &n, 21);
    for (int64_t i = 0; i < a->nelem; i++)
        ((float *)a->data)[i] *= 4.0f;   /* so Relu6 clips */
    const float *A = a->data, *B = b->data, *C = bias->data;
    double *want = tfs_calloc((size_t)(m * n) + 1, sizeof *want);
    double *mag = tfs_calloc((size_t)(m * n) + 1, sizeof *mag);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = C[j], sm = fabs(C[j]);
            for (int64_t p = 0; p < k; p++) {
                double av = ta ? A[p * m + i] : A[i * k + p], bv = tb ? B[j * k + p] : B[p * n + j];
                s += av * bv;
                sm += fabs(av * bv);
            }
            want[i * n + j] = act_ref(act, s, alpha);
            mag[i * n + j] = sm;
        }
    nn_attrs at = {0};
    nn_attr_bool(&at, "transpose_a", ta);
    nn_attr_bool(&at, "transpose_b", tb);
    nn_attr_float(&at, "leakyrelu_alpha", alpha);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(run_fused("_FusedMatMul", 3, (tfs_tensor *[]){a, b, bias}, "BiasAdd",
                            ACT_NAMES[act], 1, TFS_DTYPE_FLOAT, &at, &out, &st) == TFS_OK, "%s",
                  st.msg);
    char what[64];
    snprintf(what, sizeof what, "matmul %lldx%lldx%lld ta=%d tb=%d act=%d", (long long)m,
             (long long)k, (long long)n, ta, tb, act);
    nn_assert_close(out, 2, (int64_t[]){m, n}, want, mag, 1e-6, 1e-6, what);
    tfs_tensor_unref(out);
    tfs_free(want);
    tfs_free(mag);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_tensor_unref(bias);
}

START_TEST(test_fused_matmul_values)
{
    for (int act = A_NONE; act <= A_LEAKY; act++)
        for (int t = 0; t < 4; t++)
            check_matmul(5, 7, 6, t & 1, t & 2, act, 0.25f);
    check_matmul(3, 0, 4, false, false, A_RELU, 0.2f);    /* empty product: act(bias) */
    check_matmul(0, 5, 4, false, false, A_RELU6, 0.2f);   /* empty batch */
    check_matmul(70, 33, 130, false, true, A_RELU, 0.2f); /* several epilogue ranges */
}
END_TEST

START_TEST(test_fused_matmul_errors)
{
    int64_t d[2] = {2, 3}, bd[1] = {3}, bad_bd[1] = {4};
    tfs_tensor *a = nn_random_f32(2, (int64_t[]){2, 2}, 1), *b = nn_random_f32(2, d, 2);
    tfs_tensor *bias = nn_random_f32(1, bd, 3), *bad_bias = nn_random_f32(1, bad_bd, 4);
    tfs_tensor *ad = rt_tensor(TFS_DTYPE_DOUBLE, 2, (int64_t[]){2, 2}, NULL);
    tfs_tensor *out = NULL;
    tfs_status st;
    tfs_tensor *ok[] = {a, b, bias};
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, ok, "BiasAdd", "Sigmoid", 1, TFS_DTYPE_FLOAT,
                               NULL, &out, &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "BiasAdd, Sigmoid");
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, ok, "FusedBatchNorm", NULL, 1, TFS_DTYPE_FLOAT,
                               NULL, &out, &st), TFS_UNIMPLEMENTED);
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, ok, NULL, NULL, 1, TFS_DTYPE_FLOAT, NULL, &out,
                               &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "fused_ops");
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, ok, "BiasAdd", NULL, 2, TFS_DTYPE_FLOAT, NULL,
                               &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "num_args");
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, (tfs_tensor *[]){a, b, bad_bias}, "BiasAdd",
                               "Relu", 1, TFS_DTYPE_FLOAT, NULL, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "shape [3]");
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, (tfs_tensor *[]){b, b, bias}, "BiasAdd", NULL, 1,
                               TFS_DTYPE_FLOAT, NULL, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "size-incompatible");
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, (tfs_tensor *[]){ad, ad, bias}, "BiasAdd",
                               NULL, 1, TFS_DTYPE_DOUBLE, NULL, &out, &st), TFS_UNIMPLEMENTED);
    ck_assert_int_eq(run_fused("_FusedMatMul", 3, (tfs_tensor *[]){ad, b, bias}, "BiasAdd",
                               NULL, 1, TFS_DTYPE_FLOAT, NULL, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_tensor_unref(bias);
    tfs_tensor_unref(bad_bias);
    tfs_tensor_unref(ad);
}
END_TEST

/* ---- _FusedConv2D --------------------------------------------------------------------------- */

typedef struct conv_case {
    int64_t n, h, w, c, k, oc, stride;
    const char *padding;
    bool bn;
    int act;
} conv_case;

static void check_conv(const conv_case *cc)
{
    int64_t xd[4] = {cc->n, cc->h, cc->w, cc->c}, fd[4] = {cc->k, cc->k, cc->c, cc->oc};
    tfs_tensor *x = nn_random_f32(4, xd, 31), *f = nn_random_f32(4, fd, 32);
    tfs_tensor *args[4];
    for (int i = 0; i < 4; i++)
        args[i] = nn_random_f32(1, &cc->oc, 40 + (uint32_t)i);
    float *var = args[3]->data;
    for (int64_t i = 0; i < cc->oc; i++)
        var[i] = var[i] * 0.4f + 0.6f;   /* positive variances */
    bool same = !strcmp(cc->padding, "SAME");
    int64_t oh = same ? (cc->h + cc->stride - 1) / cc->stride : (cc->h - cc->k) / cc->stride + 1;
    int64_t ow = same ? (cc->w + cc->stride - 1) / cc->stride : (cc->w - cc->k) / cc->stride + 1;
    int64_t ph = same ? ((oh - 1) * cc->stride + cc->k - cc->h) / 2 : 0;
    int64_t pw = same ? ((ow - 1) * cc->stride + cc->k - cc->w) / 2 : 0;
    if (ph < 0)
        ph = 0;
    if (pw < 0)
        pw = 0;
    size_t total = (size_t)(cc->n * oh * ow * cc->oc);
    double *want = tfs_calloc(total + 1, sizeof *want), *mag = tfs_calloc(total + 1, sizeof *mag);
    const float *X = x->data, *F = f->data;
    const float *a0 = args[0]->data, *a1 = args[1]->data, *a2 = args[2]->data;
    const float eps = 0.001f;
    for (int64_t b = 0; b < cc->n; b++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++)
                for (int64_t o = 0; o < cc->oc; o++) {
                    double s = 0, sm = 0;
                    for (int64_t di = 0; di < cc->k; di++)
                        for (int64_t dj = 0; dj < cc->k; dj++) {
                            int64_t y = i * cc->stride + di - ph, z = j * cc->stride + dj - pw;
                            if (y < 0 || y >= cc->h || z < 0 || z >= cc->w)
                                continue;
                            for (int64_t c = 0; c < cc->c; c++) {
                                double t = (double)X[((b * cc->h + y) * cc->w + z) * cc->c + c] *
                                           F[((di * cc->k + dj) * cc->c + c) * cc->oc + o];
                                s += t;
                                sm += fabs(t);
                            }
                        }
                    double v;
                    if (cc->bn) {   /* args: scale, offset, mean, variance */
                        double fac = a0[o] / sqrt((double)var[o] + eps);
                        v = (s - a2[o]) * fac + a1[o];
                        sm = (sm + fabs(a2[o])) * fabs(fac) + fabs(a1[o]);
                    } else {
                        v = s + a0[o];
                        sm += fabs(a0[o]);
                    }
                    size_t idx = (size_t)(((b * oh + i) * ow + j) * cc->oc + o);
                    want[idx] = act_ref(cc->act, v, 0.2);
                    mag[idx] = sm;
                }
    nn_attrs at = {0};
    nn_attr_ints(&at, "strides", 4, (int64_t[]){1, cc->stride, cc->stride, 1});
    nn_attr_str(&at, "padding", cc->padding);
    nn_attr_str(&at, "data_format", "NHWC");
    nn_attr_float(&at, "epsilon", eps);
    tfs_tensor *in[6] = {x, f, args[0], args[1], args[2], args[3]}, *out = NULL;
    tfs_status st;
    const char *first = cc->bn ? "FusedBatchNorm" : "BiasAdd";
    ck_assert_msg(run_fused("_FusedConv2D", cc->bn ? 6 : 3, in, first, ACT_NAMES[cc->act],
                            cc->bn ? 4 : 1, TFS_DTYPE_FLOAT, &at, &out, &st) == TFS_OK, "%s",
                  st.msg);
    char what[96];
    snprintf(what, sizeof what, "conv k%lld s%lld %s bn=%d act=%d", (long long)cc->k,
             (long long)cc->stride, cc->padding, cc->bn, cc->act);
    nn_assert_close(out, 4, (int64_t[]){cc->n, oh, ow, cc->oc}, want, mag, 1e-6, 1e-6, what);
    tfs_tensor_unref(out);
    tfs_free(want);
    tfs_free(mag);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    for (int i = 0; i < 4; i++)
        tfs_tensor_unref(args[i]);
}

START_TEST(test_fused_conv_values)
{
    static const conv_case cases[] = {
        {2, 7, 6, 3, 3, 5, 1, "SAME", false, A_RELU},
        {2, 7, 6, 3, 3, 5, 2, "SAME", false, A_NONE},
        {1, 8, 8, 4, 3, 6, 2, "VALID", false, A_LEAKY},
        {3, 5, 5, 6, 1, 4, 1, "VALID", false, A_RELU6},   /* 1x1: no patch buffer */
        {2, 6, 6, 2, 3, 4, 1, "SAME", true, A_NONE},
        {2, 6, 6, 2, 3, 4, 1, "SAME", true, A_RELU},
        {1, 5, 7, 3, 2, 3, 1, "VALID", true, A_ELU},
        {0, 5, 5, 3, 3, 2, 1, "SAME", false, A_RELU},     /* empty batch */
        /* 1568 patch rows: with 2 threads the chunks (and their epilogues) run at once */
        {2, 28, 28, 4, 3, 8, 1, "SAME", false, A_RELU},
        /* stride 1 with window rows of 80 floats: no patches (epilogue per output row) */
        {2, 9, 20, 16, 5, 40, 1, "SAME", false, A_RELU},
        {2, 9, 20, 16, 5, 40, 1, "VALID", true, A_RELU6},
        {2, 28, 28, 4, 3, 8, 1, "SAME", true, A_RELU6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv(&cases[i]);
}
END_TEST

START_TEST(test_fused_conv_errors)
{
    int64_t xd[4] = {1, 4, 4, 2}, fd[4] = {3, 3, 2, 3}, f3d[3] = {3, 2, 3}, bd[1] = {3};
    tfs_tensor *x = nn_random_f32(4, xd, 1), *f = nn_random_f32(4, fd, 2);
    tfs_tensor *f3 = nn_random_f32(3, f3d, 3), *b = nn_random_f32(1, bd, 4);
    tfs_tensor *b2 = nn_random_f32(1, (int64_t[]){2}, 5);
    nn_attrs at = {0};
    nn_attr_ints(&at, "strides", 4, (int64_t[]){1, 1, 1, 1});
    nn_attr_str(&at, "padding", "SAME");
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(run_fused("_FusedConv2D", 3, (tfs_tensor *[]){x, f3, b}, "BiasAdd", NULL, 1,
                               TFS_DTYPE_FLOAT, &at, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "4-dimensional");
    ck_assert_int_eq(run_fused("_FusedConv2D", 3, (tfs_tensor *[]){x, f, b2}, "BiasAdd", NULL, 1,
                               TFS_DTYPE_FLOAT, &at, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(run_fused("_FusedConv2D", 3, (tfs_tensor *[]){x, f, b}, "FusedBatchNorm",
                               "Relu", 1, TFS_DTYPE_FLOAT, &at, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "num_args = 4");
    ck_assert_int_eq(run_fused("_FusedConv2D", 3, (tfs_tensor *[]){x, f, b}, "Relu", NULL, 1,
                               TFS_DTYPE_FLOAT, &at, &out, &st), TFS_UNIMPLEMENTED);
    /* Conv2D's own checks still apply: a bad padding. */
    nn_attrs bad = {0};
    nn_attr_ints(&bad, "strides", 4, (int64_t[]){1, 1, 1, 1});
    nn_attr_str(&bad, "padding", "MIRROR");
    ck_assert_int_eq(run_fused("_FusedConv2D", 3, (tfs_tensor *[]){x, f, b}, "BiasAdd", NULL, 1,
                               TFS_DTYPE_FLOAT, &bad, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    tfs_tensor_unref(f3);
    tfs_tensor_unref(b);
    tfs_tensor_unref(b2);
}
END_TEST

/* ---- _FusedConv2D with a residual Add -------------------------------------------------------- */

/* conv(x, f) + bias, then + side (broadcast as Add does: side's dims are each the output's or 1,
 * aligned at the last axis, or the output's are 1 where side's are not), then act; against the
 * float64 loop. */
typedef struct add_case {
    int64_t n, h, w, c, k, oc;
    const char *padding;
    int side_rank;
    int64_t side[4];
    int act;
} add_case;

static void check_conv_add(const add_case *ac)
{
    int64_t xd[4] = {ac->n, ac->h, ac->w, ac->c}, fd[4] = {ac->k, ac->k, ac->c, ac->oc};
    tfs_tensor *x = nn_random_f32(4, xd, 51), *f = nn_random_f32(4, fd, 52);
    tfs_tensor *b = nn_random_f32(1, &ac->oc, 53);
    tfs_tensor *sd = nn_random_f32(ac->side_rank, ac->side, 54);
    bool same = !strcmp(ac->padding, "SAME");
    int64_t oh = same ? ac->h : ac->h - ac->k + 1, ow = same ? ac->w : ac->w - ac->k + 1;
    int64_t ph = same ? (ac->k - 1) / 2 : 0, pw = ph;
    int64_t cd[4] = {ac->n, oh, ow, ac->oc}, od[4], sd4[4];
    for (int i = 0; i < 4; i++) {   /* side's dims aligned at the last axis */
        int j = i - (4 - ac->side_rank);
        sd4[i] = j >= 0 ? ac->side[j] : 1;
        od[i] = cd[i] > sd4[i] ? cd[i] : sd4[i];
    }
    size_t total = (size_t)(od[0] * od[1] * od[2] * od[3]);
    double *want = tfs_calloc(total + 1, sizeof *want), *mag = tfs_calloc(total + 1, sizeof *mag);
    const float *X = x->data, *F = f->data, *B = b->data, *S = sd->data;
    for (int64_t i0 = 0; i0 < od[0]; i0++)
        for (int64_t i1 = 0; i1 < od[1]; i1++)
            for (int64_t i2 = 0; i2 < od[2]; i2++)
                for (int64_t o = 0; o < od[3]; o++) {
                    int64_t bb = cd[0] == 1 ? 0 : i0, i = cd[1] == 1 ? 0 : i1;
                    int64_t j = cd[2] == 1 ? 0 : i2, oo = cd[3] == 1 ? 0 : o;
                    double s = 0, sm = 0;
                    for (int64_t di = 0; di < ac->k; di++)
                        for (int64_t dj = 0; dj < ac->k; dj++) {
                            int64_t y = i + di - ph, z = j + dj - pw;
                            if (y < 0 || y >= ac->h || z < 0 || z >= ac->w)
                                continue;
                            for (int64_t c = 0; c < ac->c; c++) {
                                double t = (double)X[((bb * ac->h + y) * ac->w + z) * ac->c + c] *
                                           F[((di * ac->k + dj) * ac->c + c) * ac->oc + oo];
                                s += t;
                                sm += fabs(t);
                            }
                        }
                    int64_t si = (((sd4[0] == 1 ? 0 : i0) * sd4[1] + (sd4[1] == 1 ? 0 : i1)) *
                                      sd4[2] + (sd4[2] == 1 ? 0 : i2)) * sd4[3] +
                                 (sd4[3] == 1 ? 0 : o);
                    double v = s + B[oo] + S[si];
                    size_t idx = (size_t)(((i0 * od[1] + i1) * od[2] + i2) * od[3] + o);
                    want[idx] = act_ref(ac->act, v, 0.2);
                    mag[idx] = sm + fabs(B[oo]) + fabs(S[si]);
                }
    nn_attrs at = {0};
    nn_attr_ints(&at, "strides", 4, (int64_t[]){1, 1, 1, 1});
    nn_attr_str(&at, "padding", ac->padding);
    tfs_tensor *in[4] = {x, f, b, sd}, *out = NULL;
    tfs_status st;
    const char *ops[3] = {"BiasAdd", "Add", ACT_NAMES[ac->act]};
    ck_assert_msg(run_fused_ops("_FusedConv2D", 4, in, ops, 2, TFS_DTYPE_FLOAT, &at, &out, &st) ==
                      TFS_OK, "%s", st.msg);
    char what[96];
    snprintf(what, sizeof what, "conv k%lld %s + side rank %d act %d", (long long)ac->k,
             ac->padding, ac->side_rank, ac->act);
    nn_assert_close(out, 4, od, want, mag, 1e-6, 1e-6, what);
    tfs_tensor_unref(out);
    tfs_free(want);
    tfs_free(mag);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    tfs_tensor_unref(b);
    tfs_tensor_unref(sd);
}

START_TEST(test_fused_conv_add_values)
{
    static const add_case cases[] = {
        /* the side shaped as the output: added in the epilogue (im2col, then direct paths) */
        {2, 7, 6, 3, 3, 5, "SAME", 4, {2, 7, 6, 5}, A_RELU},
        {2, 7, 6, 3, 3, 5, "SAME", 4, {2, 7, 6, 5}, A_NONE},
        {2, 9, 20, 16, 5, 40, "SAME", 4, {2, 9, 20, 40}, A_RELU6},
        {1, 4, 4, 3, 3, 2, "VALID", 4, {1, 2, 2, 2}, A_LEAKY},
        /* broadcasting: a per-channel vector, and a side that enlarges the output */
        {2, 5, 5, 3, 3, 4, "SAME", 1, {4}, A_RELU},
        {2, 5, 5, 3, 3, 4, "SAME", 4, {1, 5, 1, 1}, A_ELU},
        {2, 3, 3, 4, 3, 5, "VALID", 4, {2, 3, 3, 5}, A_LEAKY},
        {0, 5, 5, 3, 3, 2, "SAME", 4, {0, 5, 5, 2}, A_RELU},   /* empty batch */
        /* larger products: a 1x1 of 14 rows and 256 columns (the GEMM's tasks split the
         * columns), one of 300 rows in blocks of 84 (k = 512), and a 3x3 of 1280 rows (the
         * direct path, in blocks of output rows, each adding the side's rows at its offset; the
         * patches' chunks: test_rewrite_epilogue_in_gemm) */
        {1, 2, 7, 512, 1, 256, "SAME", 4, {1, 2, 7, 256}, A_RELU},
        {1, 10, 30, 512, 1, 64, "SAME", 4, {1, 10, 30, 64}, A_RELU6},
        {4, 40, 8, 64, 3, 8, "SAME", 4, {4, 40, 8, 8}, A_RELU},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_conv_add(&cases[i]);
}
END_TEST

/* 3x3 convolutions with stride 1 and a Const filter take Winograd's F(2x2, 3x3) when there are
 * tiles enough for the threads (nn-conv-winograd.c), against the same float64 loops: the
 * epilogue in its output transform (bias, added tensor, Relu, Relu6) or in a pass after it
 * (batch norm, Elu); odd output sizes (tiles half outside), channels not a multiple of 16, few
 * tiles (the lanes then split the output channels, not the tiles). Within
 * the same 1e-6 of the products' magnitudes as the other paths, though the transforms round
 * differently. */
START_TEST(test_fused_conv_winograd)
{
    static const conv_case cases[] = {
        {2, 28, 30, 32, 3, 48, 1, "SAME", false, A_RELU},
        {3, 21, 19, 20, 3, 17, 1, "VALID", true, A_RELU6},
        {2, 15, 16, 16, 3, 20, 1, "SAME", false, A_RELU6},
        /* 56 tiles: with 2 or more threads, the lanes share the output channels */
        {1, 13, 15, 24, 3, 70, 1, "SAME", false, A_RELU},
        {2, 15, 16, 16, 3, 32, 1, "SAME", false, A_ELU},
    };
    static const add_case adds[] = {
        {2, 27, 17, 16, 3, 40, "SAME", 4, {2, 27, 17, 40}, A_RELU},
    };
    filter_const = true;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *c = &cases[i];
        bool same = !strcmp(c->padding, "SAME");
        tfs_nn_geom g = {.batch = c->n, .in_h = c->h, .in_w = c->w, .in_c = c->c, .k_h = 3,
                         .k_w = 3, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1,
                         .pad_top = same, .pad_left = same, .out_h = same ? c->h : c->h - 2,
                         .out_w = same ? c->w : c->w - 2};
        ck_assert_msg(tfs__nn_conv2d_winograd_ok(&g, c->oc, true), "case %zu", i);
        check_conv(c);
    }
    for (size_t i = 0; i < sizeof adds / sizeof adds[0]; i++)
        check_conv_add(&adds[i]);
    filter_const = false;
}
END_TEST

START_TEST(test_fused_conv_add_errors)
{
    int64_t xd[4] = {1, 4, 4, 2}, fd[4] = {3, 3, 2, 3}, bd[1] = {3}, sd[4] = {1, 4, 4, 3};
    tfs_tensor *x = nn_random_f32(4, xd, 1), *f = nn_random_f32(4, fd, 2);
    tfs_tensor *b = nn_random_f32(1, bd, 4), *side = nn_random_f32(4, sd, 5);
    tfs_tensor *bad_side = nn_random_f32(1, (int64_t[]){2}, 6), *int_side = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT32, 4, sd, &int_side, &st), TFS_OK);
    memset(int_side->data, 0, (size_t)int_side->nelem * sizeof(int32_t));
    nn_attrs at = {0};
    nn_attr_ints(&at, "strides", 4, (int64_t[]){1, 1, 1, 1});
    nn_attr_str(&at, "padding", "SAME");
    tfs_tensor *out = NULL;
    tfs_tensor *in[4] = {x, f, b, side};
    static const char *const add_add[] = {"BiasAdd", "Add", "Add"};
    ck_assert_int_eq(run_fused_ops("_FusedConv2D", 4, in, add_add, 2, TFS_DTYPE_FLOAT, &at, &out,
                                   &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "BiasAdd, Add, Add");
    static const char *const bn_add[] = {"FusedBatchNorm", "Add", NULL};
    ck_assert_int_eq(run_fused_ops("_FusedConv2D", 4, in, bn_add, 2, TFS_DTYPE_FLOAT, &at, &out,
                                   &st), TFS_UNIMPLEMENTED);
    static const char *const bias_add[] = {"BiasAdd", "Add", NULL};
    ck_assert_int_eq(run_fused_ops("_FusedConv2D", 3, in, bias_add, 1, TFS_DTYPE_FLOAT, &at, &out,
                                   &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "num_args = 2");
    in[3] = int_side;
    ck_assert_int_eq(run_fused_ops("_FusedConv2D", 4, in, bias_add, 2, TFS_DTYPE_FLOAT, &at, &out,
                                   &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "input 3 has dtype int32");
    in[3] = bad_side;   /* [2] against 3 channels */
    ck_assert_int_eq(run_fused_ops("_FusedConv2D", 4, in, bias_add, 2, TFS_DTYPE_FLOAT, &at, &out,
                                   &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Incompatible shapes");
    ck_assert_ptr_null(out);
    /* _FusedMatMul takes no Add. */
    int64_t ad[2] = {2, 3};
    tfs_tensor *a = nn_random_f32(2, ad, 7), *w = nn_random_f32(2, (int64_t[]){3, 3}, 8);
    tfs_tensor *mside = nn_random_f32(2, (int64_t[]){2, 3}, 9);
    ck_assert_int_eq(run_fused_ops("_FusedMatMul", 4, (tfs_tensor *[]){a, w, b, mside}, bias_add,
                                   2, TFS_DTYPE_FLOAT, NULL, &out, &st), TFS_UNIMPLEMENTED);
    tfs_tensor_unref(a);
    tfs_tensor_unref(w);
    tfs_tensor_unref(mside);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    tfs_tensor_unref(b);
    tfs_tensor_unref(side);
    tfs_tensor_unref(bad_side);
    tfs_tensor_unref(int_side);
}
END_TEST

Suite *suite_runtime_nn_fused(void)
{
    Suite *s = suite_create("runtime_nn_fused");
    TCase *tc = tcase_create("fused");
    tcase_add_test(tc, test_fused_matmul_values);
    tcase_add_test(tc, test_fused_matmul_errors);
    tcase_add_test(tc, test_fused_conv_values);
    tcase_add_test(tc, test_fused_conv_errors);
    tcase_add_test(tc, test_fused_conv_add_values);
    tcase_add_test(tc, test_fused_conv_add_errors);
    tcase_add_test(tc, test_fused_conv_winograd);
    suite_add_tcase(s, tc);
    return s;
}
