/* Tests of the math family's unary ops (runtime/kernels/math-unary.c) through one-op graphs.
 * Float results are compared with a float64 reference computed here from textbook formulas
 * (sigmoid = 1/(1+e^-x), softplus = log(1+e^x), ...) at relative tolerance 2e-6 (absolute 1e-30
 * near 0); integer, boolean and rounding results are exact and hand-computed. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_math_unary(void);

static tfs_tensor *run1_ok(const char *op, tfs_tensor *a, rt_attr_fn extra, void *arg)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run_op(op, a, NULL, strcmp(op, "LogicalNot") != 0, extra, arg, &out, &st) ==
                      TFS_OK,
                  "%s: %s", op, st.msg);
    tfs_tensor_unref(a);
    return out;
}

static double ref(const char *op, double x)
{
    static const struct { const char *name; int id; } names[] = {
        {"Neg", 0}, {"Abs", 1}, {"Exp", 2}, {"Log", 3}, {"Log1p", 4}, {"Sqrt", 5}, {"Rsqrt", 6},
        {"Square", 7}, {"Reciprocal", 8}, {"Inv", 8}, {"Sign", 9}, {"Floor", 10}, {"Ceil", 11},
        {"Tanh", 12}, {"Sigmoid", 13}, {"Relu", 14}, {"Relu6", 15}, {"Elu", 16}, {"Selu", 17},
        {"Softplus", 18}, {"Erf", 19}, {"LeakyRelu", 20}, {"Expm1", 21}, {"Sin", 22}, {"Cos", 23},
        {"Softsign", 24},
    };
    int id = -1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(names[i].name, op))
            id = names[i].id;
    switch (id) {
    case 0:  return -x;
    case 1:  return x < 0 ? -x : x;
    case 2:  return exp(x);
    case 3:  return log(x);
    case 4:  return log(1 + x);   /* inputs are not tiny, so 1 + x loses nothing that matters */
    case 5:  return sqrt(x);
    case 6:  return 1 / sqrt(x);
    case 7:  return x * x;
    case 8:  return 1 / x;
    case 9:  return x > 0 ? 1 : x < 0 ? -1 : 0;
    case 10: return floor(x);
    case 11: return ceil(x);
    case 12: return (exp(2 * x) - 1) / (exp(2 * x) + 1);
    case 13: return 1 / (1 + exp(-x));
    case 14: return x > 0 ? x : 0;
    case 15: return x > 6 ? 6 : x > 0 ? x : 0;
    case 16: return x > 0 ? x : exp(x) - 1;
    case 17:
        return x > 0 ? 1.0507009873554805 * x
                     : 1.0507009873554805 * 1.6732632423543772 * (exp(x) - 1);
    case 18: return log(1 + exp(x));
    case 19: return erf(x);
    case 20: return x > 0 ? x : 0.2 * x;   /* default alpha */
    case 21: return exp(x) - 1;   /* |x| >= 0.1 below, so the subtraction loses little */
    case 22: return sin(x);
    case 23: return cos(x);
    case 24: return x / (1 + fabs(x));
    default: ck_abort_msg("no reference for %s", op);
    }
    return 0;
}

static void assert_close(const tfs_tensor *t, const double *want, int64_t n, double rtol,
                         const char *what)
{
    ck_assert_int_eq(t->nelem, n);
    for (int64_t i = 0; i < n; i++) {
        double got = t->dtype == TFS_DTYPE_DOUBLE ? ((double *)t->data)[i] : ((float *)t->data)[i];
        ck_assert_msg(fabs(got - want[i]) <= rtol * fabs(want[i]) + 1e-30,
                      "%s[%lld]: %.9g, want %.9g", what, (long long)i, got, want[i]);
    }
}

START_TEST(test_math_unary_float_reference)
{
    static const char *const any_x[] = {"Neg", "Abs", "Exp", "Square", "Reciprocal", "Inv",
                                        "Sign", "Floor", "Ceil", "Tanh", "Sigmoid", "Relu",
                                        "Relu6", "Elu", "Selu", "Softplus", "Erf", "LeakyRelu",
                                        "Expm1", "Sin", "Cos", "Softsign"};
    static const char *const pos_x[] = {"Log", "Log1p", "Sqrt", "Rsqrt"};
    const float xs[] = {-7.5f, -3.7f, -1.5f, -0.5f, -0.1f, 0.3f, 0.5f, 1, 2.5f, 4.2f, 6.5f, 9};
    const float ps[] = {0.01f, 0.3f, 0.5f, 1, 2.5f, 4.2f, 6.5f, 9, 100, 12345};
    int64_t dx[] = {3, 4}, dp[] = {10};
    double want[12];
    for (size_t o = 0; o < sizeof any_x / sizeof *any_x; o++) {
        for (int i = 0; i < 12; i++)
            want[i] = ref(any_x[o], xs[i]);
        tfs_tensor *out = run1_ok(any_x[o], tfs_test_tensor_f32(2, dx, xs), NULL, NULL);
        ck_assert(out->dtype == TFS_DTYPE_FLOAT && tfs_shape_equal(out->rank, out->dims, 2, dx));
        assert_close(out, want, 12, 2e-6, any_x[o]);
        tfs_tensor_unref(out);
        /* double: same formulas, tighter tolerance. */
        double xd[12];
        for (int i = 0; i < 12; i++)
            xd[i] = xs[i];
        out = run1_ok(any_x[o], rt_tensor(TFS_DTYPE_DOUBLE, 2, dx, xd), NULL, NULL);
        ck_assert_int_eq(out->dtype, TFS_DTYPE_DOUBLE);
        assert_close(out, want, 12, 1e-12, any_x[o]);
        tfs_tensor_unref(out);
    }
    for (size_t o = 0; o < sizeof pos_x / sizeof *pos_x; o++) {
        for (int i = 0; i < 10; i++)
            want[i] = ref(pos_x[o], ps[i]);
        tfs_tensor *out = run1_ok(pos_x[o], tfs_test_tensor_f32(1, dp, ps), NULL, NULL);
        assert_close(out, want, 10, 2e-6, pos_x[o]);
        tfs_tensor_unref(out);
    }
    /* An empty tensor stays empty with its shape. */
    int64_t d0[] = {2, 0};
    tfs_tensor *out = run1_ok("Tanh", rt_tensor(TFS_DTYPE_FLOAT, 2, d0, NULL), NULL, NULL);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 2, d0));
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_math_unary_float_edges)
{
    /* Round is half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2, 2.6 -> 3. */
    int64_t d6[] = {6};
    tfs_tensor *out = run1_ok(
        "Round", tfs_test_tensor_f32(1, d6, (const float[]){0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f}),
        NULL, NULL);
    tfs_test_assert_f32(out, 1, d6, (const float[]){0, 2, 2, 0, -2, 3}, 0);
    tfs_tensor_unref(out);
    /* Large |x|: Sigmoid saturates without NaN; Softplus(100) = 100. The tiny side, e^-100 (about
     * 3.7e-44, a float subnormal), is 0: sessions run with denormals flushed to zero, as
     * TensorFlow's kernels do (session.c). */
    int64_t d2[] = {2};
    out = run1_ok("Sigmoid", tfs_test_tensor_f32(1, d2, (const float[]){100, -100}), NULL, NULL);
    const float *f = out->data;
    ck_assert(f[0] == 1.0f && f[1] == 0);
    tfs_tensor_unref(out);
    out = run1_ok("Softplus", tfs_test_tensor_f32(1, d2, (const float[]){100, -100}), NULL, NULL);
    f = out->data;
    ck_assert(f[0] == 100.0f && f[1] == 0);
    tfs_tensor_unref(out);
    /* NaN passes through activations; IsNan / IsFinite classify. */
    int64_t d4[] = {4};
    const float special[] = {NAN, INFINITY, -INFINITY, 1};
    out = run1_ok("Relu", tfs_test_tensor_f32(1, d4, special), NULL, NULL);
    f = out->data;
    ck_assert(isnan(f[0]) && isinf(f[1]) && f[2] == 0 && f[3] == 1);
    tfs_tensor_unref(out);
    out = run1_ok("IsNan", tfs_test_tensor_f32(1, d4, special), NULL, NULL);
    ck_assert_int_eq(out->dtype, TFS_DTYPE_BOOL);
    const bool *b = out->data;
    ck_assert(b[0] && !b[1] && !b[2] && !b[3]);
    tfs_tensor_unref(out);
    out = run1_ok("IsFinite", tfs_test_tensor_f32(1, d4, special), NULL, NULL);
    b = out->data;
    ck_assert(!b[0] && !b[1] && !b[2] && b[3]);
    tfs_tensor_unref(out);
    out = run1_ok("IsInf", tfs_test_tensor_f32(1, d4, special), NULL, NULL);
    b = out->data;
    ck_assert(!b[0] && b[1] && b[2] && !b[3]);
    tfs_tensor_unref(out);
    /* Rint is Round for floats: half to even. */
    const float halves[] = {0.5f, 1.5f, -2.5f, 2.4f};
    out = run1_ok("Rint", tfs_test_tensor_f32(1, d4, halves), NULL, NULL);
    tfs_test_assert_f32(out, 1, d4, (const float[]){0, 2, -2, 2}, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_math_unary_exp_family_sweep)
{
    /* Float Exp, Sigmoid, Tanh and Softmax share an exp approximation of our own (tfs__expf):
     * sweep [-110, 110] in steps of 0.0137 (16,058 points, through the subnormal and overflow
     * ranges) against libm's double functions. Tolerances: Exp relative 3e-7 where the result is a
     * normal float, absolute 3e-45 (two subnormal steps) below; Sigmoid and Tanh relative 1e-6. */
    enum { N = 16058 };
    static float xs[N];
    for (int i = 0; i < N; i++)
        xs[i] = -110.0f + 0.0137f * (float)i;
    int64_t d[] = {N};
    const char *ops[] = {"Exp", "Sigmoid", "Tanh"};
    for (int o = 0; o < 3; o++) {
        tfs_tensor *out = run1_ok(ops[o], tfs_test_tensor_f32(1, d, xs), NULL, NULL);
        const float *y = out->data;
        for (int i = 0; i < N; i++) {
            double x = xs[i], want, tol;
            if (o == 0) {
                want = exp(x);
                tol = want > 1.2e-38 ? 3e-7 * want : 1.2e-38;
                if (want < 1.1e-38)   /* clearly subnormal (FLT_MIN is 1.18e-38) */
                    ck_assert_msg(y[i] == 0, "Exp(%g) = %g, want 0 (flushed)", x, y[i]);
                if (want > 3.4028234663852886e38) {   /* beyond FLT_MAX */
                    ck_assert_msg(isinf(y[i]), "Exp(%g) = %g, want inf", x, y[i]);
                    continue;
                }
            } else if (o == 1) {
                want = 1 / (1 + exp(-x));
                tol = 1e-6 * want + 1.2e-38;   /* subnormal results flush to 0 */
            } else {
                want = tanh(x);
                tol = 1e-6 * fabs(want) + 1.2e-38;
            }
            ck_assert_msg(fabs(y[i] - want) <= tol, "%s(%.9g) = %.9g, want %.9g", ops[o], x, y[i],
                          want);
        }
        tfs_tensor_unref(out);
    }
    /* Special values: Exp(-inf) = 0, Exp(inf) = inf, NaN stays NaN; Tanh(+-inf) = +-1. */
    int64_t d4[] = {4};
    const float sp[] = {-INFINITY, INFINITY, NAN, 0};
    tfs_tensor *out = run1_ok("Exp", tfs_test_tensor_f32(1, d4, sp), NULL, NULL);
    const float *y = out->data;
    ck_assert(y[0] == 0 && isinf(y[1]) && isnan(y[2]) && y[3] == 1);
    tfs_tensor_unref(out);
    out = run1_ok("Tanh", tfs_test_tensor_f32(1, d4, sp), NULL, NULL);
    y = out->data;
    ck_assert(y[0] == -1 && y[1] == 1 && isnan(y[2]) && y[3] == 0);
    tfs_tensor_unref(out);
    out = run1_ok("Sigmoid", tfs_test_tensor_f32(1, d4, sp), NULL, NULL);
    y = out->data;
    ck_assert(y[0] == 0 && y[1] == 1 && isnan(y[2]) && y[3] == 0.5f);
    tfs_tensor_unref(out);
}
END_TEST

static void set_alpha(tfs_graph *g, int id, void *arg)
{
    tfs_graph_set_attr_float(g, id, "alpha", *(float *)arg);
}

START_TEST(test_math_unary_leaky_relu_alpha)
{
    /* alpha = 0.1: [-2, 3] -> [-0.2, 3]; alpha = 1.5 (> 1 is allowed): [-2, 3] -> [-3, 3]. */
    int64_t d2[] = {2};
    float alpha = 0.1f;
    tfs_tensor *out = run1_ok("LeakyRelu", tfs_test_tensor_f32(1, d2, (const float[]){-2, 3}),
                              set_alpha, &alpha);
    tfs_test_assert_f32(out, 1, d2, (const float[]){-0.2f, 3}, 1e-7);
    tfs_tensor_unref(out);
    alpha = 1.5f;
    out =
        run1_ok("LeakyRelu", tfs_test_tensor_f32(1, d2, (const float[]){-2, 3}), set_alpha, &alpha);
    tfs_test_assert_f32(out, 1, d2, (const float[]){-3, 3}, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_math_unary_integers)
{
    int64_t d5[] = {5};
    const int32_t x[] = {INT32_MIN, -7, 0, 5, 70000};
    struct { const char *op; int32_t want[5];
    } cases[] = {
        {"Neg", {INT32_MIN, 7, 0, -5, -70000}}, /* -INT32_MIN wraps to itself */
        {"Abs", {INT32_MIN, 7, 0, 5, 70000}},
        {"Square", {0, 49, 0, 25, 605032704}}, /* 4.9e9 mod 2^32; INT32_MIN^2 = 2^62 -> 0 */
        {"Sign", {-1, -1, 0, 1, 1}},
        {"Relu", {0, 0, 0, 5, 70000}},
        {"Relu6", {0, 0, 0, 5, 6}},
        {"Round", {INT32_MIN, -7, 0, 5, 70000}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tfs_tensor *out = run1_ok(cases[c].op, rt_tensor(TFS_DTYPE_INT32, 1, d5, x), NULL, NULL);
        ck_assert_int_eq(out->dtype, TFS_DTYPE_INT32);
        for (int i = 0; i < 5; i++)
            ck_assert_msg(((int32_t *)out->data)[i] == cases[c].want[i], "%s[%d] = %d", cases[c].op,
                          i, ((int32_t *)out->data)[i]);
        tfs_tensor_unref(out);
    }
    int64_t d2[] = {2};
    tfs_tensor *out =
        run1_ok("Neg", rt_tensor(TFS_DTYPE_INT64, 1, d2, (const int64_t[]){INT64_C(1) << 40, -3}),
                NULL, NULL);
    ck_assert(((int64_t *)out->data)[0] == -(INT64_C(1) << 40) && ((int64_t *)out->data)[1] == 3);
    tfs_tensor_unref(out);
    out = run1_ok("LogicalNot", rt_tensor(TFS_DTYPE_BOOL, 1, d2, (const bool[]){true, false}), NULL,
                  NULL);
    ck_assert(!((bool *)out->data)[0] && ((bool *)out->data)[1]);
    tfs_tensor_unref(out);

    /* Transcendental ops have no integer kernels; LogicalNot takes only bool. */
    tfs_status st;
    tfs_tensor *i = rt_tensor(TFS_DTYPE_INT32, 1, d5, x);
    ck_assert_int_eq(rt_run_op("Exp", i, NULL, true, NULL, NULL, &out, &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "Exp is not supported for dtype int32");
    ck_assert_int_eq(rt_run_op("LogicalNot", i, NULL, false, NULL, NULL, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "not bool");
    tfs_tensor_unref(i);
}
END_TEST

Suite *suite_runtime_math_unary(void)
{
    Suite *s = suite_create("runtime_math_unary");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_math_unary_float_reference);
    tcase_add_test(tc, test_math_unary_float_edges);
    tcase_add_test(tc, test_math_unary_exp_family_sweep);
    tcase_add_test(tc, test_math_unary_leaky_relu_alpha);
    tcase_add_test(tc, test_math_unary_integers);
    suite_add_tcase(s, tc);
    return s;
}
