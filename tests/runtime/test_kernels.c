/* Tests of the CPU kernels in runtime/kernels/array.c and math.c, each run through a one-op graph
 * the way a model runs it. Expected values are computed by hand in the comments; float results
 * of exact small-integer arithmetic are compared with tolerance 0. */
#include <check.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_kernels(void);

/* ---- Mul / Add broadcasting ----------------------------------------------------------------- */

static tfs_tensor *run_binary_ok(const char *op, tfs_tensor *a, tfs_tensor *b)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run_op(op, a, b, true, NULL, NULL, &out, &st) == TFS_OK, "%s: %s", op, st.msg);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    return out;
}

START_TEST(test_kernels_mul_row_broadcast)
{
    /* [2,3] * [3]: each row times [10, 20, 30]. */
    int64_t d23[] = {2, 3}, d3[] = {3};
    tfs_tensor *out = run_binary_ok("Mul", tfs_test_tensor_f32(2, d23, (const float[]){1, 2, 3, 4, 5, 6}),
                                    tfs_test_tensor_f32(1, d3, (const float[]){10, 20, 30}));
    tfs_test_assert_f32(out, 2, d23, (const float[]){10, 40, 90, 40, 100, 180}, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_add_outer_broadcast)
{
    /* [2,1] + [1,3] -> [2,3]: out[i][j] = a[i] + b[j]. */
    int64_t d21[] = {2, 1}, d13[] = {1, 3}, d23[] = {2, 3};
    tfs_tensor *out = run_binary_ok("Add", tfs_test_tensor_f32(2, d21, (const float[]){1, 2}),
                                    tfs_test_tensor_f32(2, d13, (const float[]){10, 20, 30}));
    tfs_test_assert_f32(out, 2, d23, (const float[]){11, 21, 31, 12, 22, 32}, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_broadcast_rank3_and_scalar)
{
    /* [2,1,3] * [4,1] -> [2,4,3]: out[i][j][k] = a[i][0][k] * b[j][0]. */
    int64_t da[] = {2, 1, 3}, db[] = {4, 1}, dout[] = {2, 4, 3};
    float av[6] = {1, 2, 3, 4, 5, 6}, bv[4] = {1, 10, 100, -1};
    float want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                want[(i * 4 + j) * 3 + k] = av[i * 3 + k] * bv[j];
    tfs_tensor *out = run_binary_ok("Mul", tfs_test_tensor_f32(3, da, av), tfs_test_tensor_f32(2, db, bv));
    tfs_test_assert_f32(out, 3, dout, want, 0);
    tfs_tensor_unref(out);

    /* scalar + [2,2], and [1,1,1] + [2] -> [1,1,2]. */
    int64_t d22[] = {2, 2}, d111[] = {1, 1, 1}, d2[] = {2}, d112[] = {1, 1, 2};
    out = run_binary_ok("AddV2", rt_scalar_f32(0.5f), tfs_test_tensor_f32(2, d22, (const float[]){1, 2, 3, 4}));
    tfs_test_assert_f32(out, 2, d22, (const float[]){1.5f, 2.5f, 3.5f, 4.5f}, 0);
    tfs_tensor_unref(out);
    out = run_binary_ok("AddV2", tfs_test_tensor_f32(3, d111, (const float[]){7}),
                        tfs_test_tensor_f32(1, d2, (const float[]){1, 2}));
    tfs_test_assert_f32(out, 3, d112, (const float[]){8, 9}, 0);
    tfs_tensor_unref(out);

    /* A zero-size dimension broadcasts to an empty result: [0,3] * [3] -> [0,3]. */
    int64_t d03[] = {0, 3}, d3[] = {3};
    out = run_binary_ok("Mul", rt_tensor(TFS_DTYPE_FLOAT, 2, d03, NULL),
                        tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3}));
    ck_assert(tfs_shape_equal(out->rank, out->dims, 2, d03));
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_binary_integer_dtypes)
{
    int64_t d3[] = {3}, d1[] = {1};
    /* int32 wraps around like TensorFlow: INT32_MAX + 1 = INT32_MIN. */
    tfs_tensor *out = run_binary_ok("Add", rt_tensor(TFS_DTYPE_INT32, 1, d3, (const int32_t[]){INT32_MAX, -5, 7}),
                                    rt_tensor(TFS_DTYPE_INT32, 1, d1, (const int32_t[]){1}));
    ck_assert_int_eq(out->dtype, TFS_DTYPE_INT32);
    const int32_t *i32 = out->data;
    ck_assert_int_eq(i32[0], INT32_MIN);
    ck_assert_int_eq(i32[1], -4);
    ck_assert_int_eq(i32[2], 8);
    tfs_tensor_unref(out);

    out = run_binary_ok("Mul", rt_tensor(TFS_DTYPE_INT64, 1, d3, (const int64_t[]){INT64_C(1) << 40, -3, 0}),
                        rt_tensor(TFS_DTYPE_INT64, 1, d3, (const int64_t[]){4, 5, 9}));
    const int64_t *i64 = out->data;
    ck_assert_int_eq(i64[0], INT64_C(1) << 42);
    ck_assert_int_eq(i64[1], -15);
    ck_assert_int_eq(i64[2], 0);
    tfs_tensor_unref(out);

    /* int8: 100 * 2 = 200 wraps to -56; uint8: 200 + 100 = 300 wraps to 44. */
    out = run_binary_ok("Mul", rt_tensor(TFS_DTYPE_INT8, 1, d1, (const int8_t[]){100}),
                        rt_tensor(TFS_DTYPE_INT8, 1, d1, (const int8_t[]){2}));
    ck_assert_int_eq(((int8_t *)out->data)[0], -56);
    tfs_tensor_unref(out);
    out = run_binary_ok("Add", rt_tensor(TFS_DTYPE_UINT8, 1, d1, (const uint8_t[]){200}),
                        rt_tensor(TFS_DTYPE_UINT8, 1, d1, (const uint8_t[]){100}));
    ck_assert_int_eq(((uint8_t *)out->data)[0], 44);
    tfs_tensor_unref(out);
    /* int16: -300 * 200 = -60000 wraps to 5536 (-60000 + 65536). */
    out = run_binary_ok("Mul", rt_tensor(TFS_DTYPE_INT16, 1, d1, (const int16_t[]){-300}),
                        rt_tensor(TFS_DTYPE_INT16, 1, d1, (const int16_t[]){200}));
    ck_assert_int_eq(((int16_t *)out->data)[0], 5536);
    tfs_tensor_unref(out);
    /* double keeps its precision: 0.1 * 3 computed in double. */
    out = run_binary_ok("Mul", rt_tensor(TFS_DTYPE_DOUBLE, 1, d1, (const double[]){0.1}),
                        rt_tensor(TFS_DTYPE_DOUBLE, 1, d1, (const double[]){3}));
    ck_assert_double_eq_tol(((double *)out->data)[0], 0.3, 1e-15);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_binary_errors)
{
    int64_t d3[] = {3}, d2[] = {2};
    tfs_tensor *a = tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3});
    tfs_tensor *b = tfs_test_tensor_f32(1, d2, (const float[]){1, 2});
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run_op("Mul", a, b, true, NULL, NULL, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'op': Incompatible shapes: [3] vs. [2]");
    ck_assert_ptr_null(out);
    /* Inputs must have dtype T. */
    tfs_tensor *i = rt_tensor(TFS_DTYPE_INT32, 1, d3, (const int32_t[]){1, 2, 3});
    ck_assert_int_eq(rt_run_op("Add", a, i, true, NULL, NULL, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "input 1 has dtype int32, but attr T is float");
    /* Strings are not numbers. */
    tfs_tensor *s = rt_strings(1, (const char *[]){"x"});
    ck_assert_int_eq(rt_run_op("Mul", s, s, true, NULL, NULL, &out, &st), TFS_UNIMPLEMENTED);
    tfs_tensor_unref(s);
    tfs_tensor_unref(i);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
}
END_TEST

/* ---- Cast ----------------------------------------------------------------------------------- */

static void set_cast_attrs(tfs_graph *g, int id, void *arg)
{
    const enum tfs_dtype *types = arg;
    tfs_graph_set_attr_type(g, id, "SrcT", types[0]);
    tfs_graph_set_attr_type(g, id, "DstT", types[1]);
    tfs_graph_set_attr_bool(g, id, "Truncate", false);
}

static tfs_tensor *cast(tfs_tensor *x, enum tfs_dtype dst)
{
    enum tfs_dtype types[2] = {x->dtype, dst};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run_op("Cast", x, NULL, false, set_cast_attrs, types, &out, &st) == TFS_OK,
                  "%s", st.msg);
    ck_assert_int_eq(out->dtype, dst);
    ck_assert(tfs_shape_equal(out->rank, out->dims, x->rank, x->dims));
    tfs_tensor_unref(x);
    return out;
}

START_TEST(test_kernels_cast_float_to_int)
{
    /* Truncation toward zero; NaN -> 0 and saturation at the limits (TensorFlow leaves
     * out-of-range to the platform). */
    int64_t d[] = {8};
    tfs_tensor *out = cast(tfs_test_tensor_f32(1, d, (const float[]){2.7f, -2.7f, 0.5f, -0.5f,
                                                                      NAN, 3e9f, -3e9f, 100.0f}),
                           TFS_DTYPE_INT32);
    const int32_t *v = out->data;
    const int32_t want[] = {2, -2, 0, 0, 0, INT32_MAX, INT32_MIN, 100};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(v[i], want[i]);
    tfs_tensor_unref(out);

    int64_t d4[] = {4};
    out = cast(tfs_test_tensor_f32(1, d4, (const float[]){-1.5f, 255.9f, 256.0f, 7.9f}), TFS_DTYPE_UINT8);
    const uint8_t *u = out->data;
    ck_assert_int_eq(u[0], 0);
    ck_assert_int_eq(u[1], 255);
    ck_assert_int_eq(u[2], 255);
    ck_assert_int_eq(u[3], 7);
    tfs_tensor_unref(out);

    int64_t d2[] = {2};
    out = cast(rt_tensor(TFS_DTYPE_DOUBLE, 1, d2, (const double[]){-9.99, 1e19}), TFS_DTYPE_INT64);
    ck_assert_int_eq(((int64_t *)out->data)[0], -9);
    ck_assert_int_eq(((int64_t *)out->data)[1], INT64_MAX);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_cast_bool)
{
    /* To bool is x != 0 (NaN is not 0); from bool is 0 or 1. */
    int64_t d[] = {5};
    tfs_tensor *out = cast(tfs_test_tensor_f32(1, d, (const float[]){0.0f, -0.0f, 0.5f, -3, NAN}),
                           TFS_DTYPE_BOOL);
    const bool *b = out->data;
    ck_assert(!b[0] && !b[1] && b[2] && b[3] && b[4]);
    tfs_tensor_unref(out);

    int64_t d3[] = {3};
    out = cast(rt_tensor(TFS_DTYPE_INT64, 1, d3, (const int64_t[]){0, -7, INT64_C(1) << 40}),
               TFS_DTYPE_BOOL);
    b = out->data;
    ck_assert(!b[0] && b[1] && b[2]);
    out = cast(out, TFS_DTYPE_FLOAT);
    tfs_test_assert_f32(out, 1, d3, (const float[]){0, 1, 1}, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_cast_integers_and_floats)
{
    int64_t d3[] = {3};
    /* Narrowing wraps like static_cast: 300 -> 44, -129 -> 127 in int8. */
    tfs_tensor *out = cast(rt_tensor(TFS_DTYPE_INT64, 1, d3, (const int64_t[]){300, -129, -1}),
                           TFS_DTYPE_INT8);
    const int8_t *i8 = out->data;
    ck_assert_int_eq(i8[0], 44);
    ck_assert_int_eq(i8[1], 127);
    ck_assert_int_eq(i8[2], -1);
    tfs_tensor_unref(out);
    /* -1 as uint16 is 65535; uint8 200 widens to int32 200. */
    out = cast(rt_tensor(TFS_DTYPE_INT32, 1, d3, (const int32_t[]){-1, 70000, 5}), TFS_DTYPE_UINT16);
    const uint16_t *u16 = out->data;
    ck_assert_int_eq(u16[0], 65535);
    ck_assert_int_eq(u16[1], 70000 - 65536);
    ck_assert_int_eq(u16[2], 5);
    tfs_tensor_unref(out);
    out = cast(rt_tensor(TFS_DTYPE_UINT8, 1, d3, (const uint8_t[]){200, 0, 1}), TFS_DTYPE_INT32);
    ck_assert_int_eq(((int32_t *)out->data)[0], 200);
    tfs_tensor_unref(out);
    /* int32 -> float, and 2^24 + 1 rounds to 2^24 in float. */
    out = cast(rt_tensor(TFS_DTYPE_INT32, 1, d3, (const int32_t[]){-4, 16777217, 3}), TFS_DTYPE_FLOAT);
    tfs_test_assert_f32(out, 1, d3, (const float[]){-4, 16777216, 3}, 0);
    out = cast(out, TFS_DTYPE_DOUBLE);
    ck_assert_double_eq(((double *)out->data)[1], 16777216.0);
    out = cast(out, TFS_DTYPE_FLOAT);
    tfs_test_assert_f32(out, 1, d3, (const float[]){-4, 16777216, 3}, 0);
    tfs_tensor_unref(out);
    /* uint64 beyond int64 range converts exactly to double (2^63). */
    int64_t d1[] = {1};
    out = cast(rt_tensor(TFS_DTYPE_UINT64, 1, d1, (const uint64_t[]){UINT64_C(1) << 63}), TFS_DTYPE_DOUBLE);
    ck_assert_double_eq(((double *)out->data)[0], 9223372036854775808.0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_kernels_cast_same_type_and_errors)
{
    int64_t d3[] = {3};
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3});
    enum tfs_dtype same[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run_op("Cast", x, NULL, false, set_cast_attrs, same, &out, &st), TFS_OK);
    ck_assert_ptr_eq(out, x);   /* no copy */
    tfs_tensor_unref(out);
    enum tfs_dtype to_str[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_STRING};
    ck_assert_int_eq(rt_run_op("Cast", x, NULL, false, set_cast_attrs, to_str, &out, &st),
                     TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "Cast float to string is not supported");
    enum tfs_dtype wrong_src[2] = {TFS_DTYPE_INT32, TFS_DTYPE_FLOAT};
    ck_assert_int_eq(rt_run_op("Cast", x, NULL, false, set_cast_attrs, wrong_src, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "attr SrcT is int32");
    tfs_tensor_unref(x);
}
END_TEST

/* ---- Reshape -------------------------------------------------------------------------------- */

static enum tfs_code reshape(tfs_tensor *x, tfs_tensor *shape, tfs_tensor **out, tfs_status *st)
{
    enum tfs_code rc = rt_run_op("Reshape", x, shape, true, NULL, NULL, out, st);
    tfs_tensor_unref(shape);
    return rc;
}

static tfs_tensor *shape_i32(int n, const int32_t *v)
{
    int64_t d[] = {n};
    return rt_tensor(TFS_DTYPE_INT32, 1, d, v);
}

START_TEST(test_kernels_reshape)
{
    int64_t d23[] = {2, 3}, d6[] = {6}, d32[] = {3, 2};
    const float v[] = {1, 2, 3, 4, 5, 6};
    tfs_tensor *x = tfs_test_tensor_f32(2, d23, v);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(reshape(x, shape_i32(1, (const int32_t[]){-1}), &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 1, d6, v, 0);
    ck_assert_ptr_eq(out->data, x->data);   /* a view, not a copy */
    tfs_tensor_unref(out);
    int64_t d2[] = {2};
    ck_assert_int_eq(reshape(x, rt_tensor(TFS_DTYPE_INT64, 1, d2, (const int64_t[]){3, -1}), &out, &st),
                     TFS_OK);
    tfs_test_assert_f32(out, 2, d32, v, 0);
    tfs_tensor_unref(out);
    /* A zero-size request still infers the other dimension: [0,6] -> [0,-1] gives [0,6]. */
    int64_t d06[] = {0, 6};
    tfs_tensor *e = rt_tensor(TFS_DTYPE_FLOAT, 2, d06, NULL);
    ck_assert_int_eq(reshape(e, shape_i32(2, (const int32_t[]){0, -1}), &out, &st), TFS_OK);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 2, d06));
    tfs_tensor_unref(out);
    tfs_tensor_unref(e);
    tfs_tensor_unref(x);
}
END_TEST

START_TEST(test_kernels_reshape_errors)
{
    int64_t d3[] = {3};
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3});
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(reshape(x, shape_i32(2, (const int32_t[]){2, 2}), &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'op': Input to reshape is a tensor with 3 values, but the "
                             "requested shape has 4");
    ck_assert_int_eq(reshape(x, shape_i32(2, (const int32_t[]){2, -1}), &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "requires a multiple of 2");
    ck_assert_int_eq(reshape(x, shape_i32(2, (const int32_t[]){-1, -1}), &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Only one input size may be -1, not both 0 and 1");
    ck_assert_int_eq(reshape(x, shape_i32(2, (const int32_t[]){-2, 3}), &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Size 0 must be non-negative, not -2");
    ck_assert_int_eq(reshape(x, tfs_test_tensor_f32(1, d3, (const float[]){3, 1, 1}), &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "int32 or int64");
    tfs_tensor_unref(x);
}
END_TEST

/* ---- array ops ------------------------------------------------------------------------------ */

START_TEST(test_kernels_const_identity_n_and_placeholder)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int c = rt_const(g, "c", rt_scalar_f32(3));
    int bad = tfs_graph_add_node(g, "bad", "Const");
    tfs_graph_set_attr_tensor(g, bad, "value", tfs__attr(tfs__graph_node(g, c), "value")->tensor);
    tfs_graph_set_attr_type(g, bad, "dtype", TFS_DTYPE_INT32);
    int p = rt_placeholder(g, "p", TFS_DTYPE_INT64);
    tfs_shape sh = {2, {-1, 3}};
    tfs_graph_set_attr_shape(g, p, "shape", &sh);
    int idn = rt_node(g, "idn", "IdentityN", "c", "c", TFS_DTYPE_INVALID);
    enum tfs_dtype types[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    tfs_attr_value tv = {.kind = TFS_ATTR_LIST};
    tv.list.kind = TFS_ATTR_TYPE;
    tv.list.n = 2;
    tv.list.type = types;
    tfs_graph_set_attr(g, idn, "T", &tv);
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    const char *fetches[] = {"idn:1", "c"};
    tfs_tensor *out[2];
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, fetches, 2, NULL, 0, out, &st), TFS_OK);
    ck_assert_ptr_eq(out[0], out[1]);   /* Identity passes the same tensor through */
    ck_assert_float_eq(*(float *)out[0]->data, 3);
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "bad", out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Type mismatch between value (float) and dtype (int32)");
    ck_assert_int_eq(rt_run1(s, NULL, 0, "p", out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'p': You must feed a value for placeholder tensor 'p' with "
                             "dtype int64 and shape [?,3]");
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_kernels(void)
{
    Suite *s = suite_create("runtime_kernels");
    TCase *tc = tcase_create("math");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_kernels_mul_row_broadcast);
    tcase_add_test(tc, test_kernels_add_outer_broadcast);
    tcase_add_test(tc, test_kernels_broadcast_rank3_and_scalar);
    tcase_add_test(tc, test_kernels_binary_integer_dtypes);
    tcase_add_test(tc, test_kernels_binary_errors);
    tcase_add_test(tc, test_kernels_cast_float_to_int);
    tcase_add_test(tc, test_kernels_cast_bool);
    tcase_add_test(tc, test_kernels_cast_integers_and_floats);
    tcase_add_test(tc, test_kernels_cast_same_type_and_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("array");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_kernels_reshape);
    tcase_add_test(tc, test_kernels_reshape_errors);
    tcase_add_test(tc, test_kernels_const_identity_n_and_placeholder);
    suite_add_tcase(s, tc);
    return s;
}
