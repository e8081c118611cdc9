/* Tests of the shape-level array kernels (runtime/kernels/array-shape.c): Shape, ShapeN, Size,
 * Rank, Fill, ZerosLike, OnesLike, Squeeze, ExpandDims, EnsureShape, CheckNumerics, StopGradient,
 * PreventGradient and Range. Expected values are worked out by hand. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_array_shape(void);

#define I32(...) ((const int32_t[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define F32(...) ((const float[]){__VA_ARGS__})
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static void set_out_type(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_type(g, id, "out_type", *(const enum tfs_dtype *)arg);
}

START_TEST(test_shape_size_rank)
{
    enum tfs_dtype i64 = TFS_DTYPE_INT64, i32 = TFS_DTYPE_INT32;
    tfs_tensor *in[1];
    in[0] = at_t(TFS_DTYPE_FLOAT, 3, DIMS(2, 0, 3), NULL);
    at_expect(at_run1("Shape", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 1, DIMS(3), I32(2, 0, 3));
    in[0] = at_t(TFS_DTYPE_STRING, 2, DIMS(4, 5), NULL);
    at_expect(at_run1("Shape", 1, in, true, set_out_type, &i64), TFS_DTYPE_INT64, 1, DIMS(2),
              I64(4, 5));
    in[0] = rt_scalar_f32(1);
    at_expect(at_run1("Shape", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    in[0] = at_t(TFS_DTYPE_INT32, 3, DIMS(2, 3, 4), NULL);
    at_expect(at_run1("Size", 1, in, true, set_out_type, &i32), TFS_DTYPE_INT32, 0, NULL, I32(24));
    in[0] = at_t(TFS_DTYPE_INT32, 3, DIMS(2, 3, 4), NULL);
    at_expect(at_run1("Size", 1, in, true, set_out_type, &i64), TFS_DTYPE_INT64, 0, NULL, I64(24));
    in[0] = at_t(TFS_DTYPE_BOOL, 4, DIMS(1, 1, 1, 0), NULL);
    at_expect(at_run1("Size", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 0, NULL, I32(0));
    in[0] = at_t(TFS_DTYPE_BOOL, 4, DIMS(1, 1, 1, 0), NULL);
    at_expect(at_run1("Rank", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 0, NULL, I32(4));
    in[0] = rt_scalar_f32(1);
    at_expect(at_run1("Rank", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 0, NULL, I32(0));
    /* out_type float is refused */
    enum tfs_dtype f = TFS_DTYPE_FLOAT;
    tfs_tensor *out;
    tfs_status st;
    in[0] = rt_scalar_f32(1);
    ck_assert_int_eq(at_run("Shape", 1, in, true, set_out_type, &f, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "out_type");
}
END_TEST

static void set_shape_n(tfs_graph *g, int id, const void *arg)
{
    (void)arg;
    tfs_graph_set_attr_int(g, id, "N", 3);
    tfs_graph_set_attr_type(g, id, "out_type", TFS_DTYPE_INT64);
}

START_TEST(test_shape_n)
{
    tfs_tensor *ins[3] = {at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 3), NULL), rt_scalar_f32(0),
                          at_t(TFS_DTYPE_FLOAT, 1, DIMS(7), NULL)};
    tfs_tensor *outs[3];
    tfs_status st;
    ck_assert_msg(at_run("ShapeN", 3, ins, true, set_shape_n, NULL, 3, outs, &st) == TFS_OK, "%s",
                  st.msg);
    at_expect(outs[0], TFS_DTYPE_INT64, 1, DIMS(2), I64(2, 3));
    at_expect(outs[1], TFS_DTYPE_INT64, 1, DIMS(0), NULL);
    at_expect(outs[2], TFS_DTYPE_INT64, 1, DIMS(1), I64(7));
}
END_TEST

START_TEST(test_fill_zeros_ones)
{
    tfs_tensor *ins[2] = {at_i32v(2, I32(2, 3)), rt_scalar_f32(1.5f)};
    at_expect(at_run1("Fill", 2, ins, false, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(2, 3),
              F32(1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f));
    /* int64 dims, int64 value, 5 elements (exercises the doubling copy's tail) */
    int64_t v = -7;
    ins[0] = at_i64v(1, I64(5));
    ins[1] = at_t(TFS_DTYPE_INT64, 0, NULL, &v);
    at_expect(at_run1("Fill", 2, ins, false, NULL, NULL), TFS_DTYPE_INT64, 1, DIMS(5),
              I64(-7, -7, -7, -7, -7));
    /* strings, and a zero dim */
    const char *sv[] = {"hi"}, *want[] = {"hi", "hi", "hi"};
    ins[0] = at_i32v(1, I32(3));
    ins[1] = at_strs(0, NULL, sv);
    at_expect_strs(at_run1("Fill", 2, ins, false, NULL, NULL), 1, DIMS(3), want);
    ins[0] = at_i32v(2, I32(0, 4));
    ins[1] = rt_scalar_f32(2);
    at_expect(at_run1("Fill", 2, ins, false, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(0, 4), NULL);
    /* negative dims and non-scalar values are refused */
    tfs_tensor *out;
    tfs_status st;
    ins[0] = at_i32v(2, I32(2, -1));
    ins[1] = rt_scalar_f32(2);
    ck_assert_int_eq(at_run("Fill", 2, ins, false, NULL, NULL, 1, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'op'");
    /* dims from a request that ask for more than the limit on one tensor: refused before any
     * allocation (runtime.h), and the same op under the limit still runs */
    tfs_runtime_set_max_tensor_bytes(1 << 20);
    ins[0] = at_i32v(2, I32(1024, 1024));
    ins[1] = rt_scalar_f32(2);
    ck_assert_int_eq(at_run("Fill", 2, ins, false, NULL, NULL, 1, &out, &st),
                     TFS_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(st.msg, "exceeds the 1048576-byte limit on one tensor"), "%s", st.msg);
    ins[0] = at_i32v(2, I32(512, 512));
    ins[1] = rt_scalar_f32(2);
    ck_assert_int_eq(at_run("Fill", 2, ins, false, NULL, NULL, 1, &out, &st), TFS_OK);
    ck_assert_int_eq(out->nelem, 512 * 512);
    ck_assert(((const float *)out->data)[512 * 512 - 1] == 2.0f);
    tfs_tensor_unref(out);
    tfs_runtime_set_max_tensor_bytes(0);
    ins[0] = at_i32v(1, I32(2));
    ins[1] = at_i32v(1, I32(2));
    ck_assert_int_eq(at_run("Fill", 2, ins, false, NULL, NULL, 1, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "value must be a scalar");
    /* dims whose product overflows int64 */
    ins[0] = at_i64v(3, I64(INT64_C(1) << 40, INT64_C(1) << 40, 1 << 20));
    ins[1] = rt_scalar_f32(2);
    ck_assert_int_eq(at_run("Fill", 2, ins, false, NULL, NULL, 1, &out, &st), TFS_INVALID_ARGUMENT);

    tfs_tensor *in[1] = {at_t(TFS_DTYPE_INT32, 2, DIMS(2, 2), I32(5, 6, 7, 8))};
    at_expect(at_run1("ZerosLike", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 2, DIMS(2, 2),
              I32(0, 0, 0, 0));
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), F32(5, 6, 7));
    at_expect(at_run1("OnesLike", 1, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 1, DIMS(3),
              F32(1, 1, 1));
    in[0] = at_t(TFS_DTYPE_BOOL, 1, DIMS(2), NULL);
    at_expect(at_run1("OnesLike", 1, in, true, NULL, NULL), TFS_DTYPE_BOOL, 1, DIMS(2),
              ((const bool[]){true, true}));
    in[0] = at_i64v(2, I64(9, 9));
    at_expect(at_run1("OnesLike", 1, in, true, NULL, NULL), TFS_DTYPE_INT64, 1, DIMS(2), I64(1, 1));
    const char *e[] = {"", ""}, *s2[] = {"x", "y"};
    in[0] = at_strs(1, DIMS(2), s2);
    at_expect_strs(at_run1("ZerosLike", 1, in, true, NULL, NULL), 1, DIMS(2), e);
}
END_TEST

static void set_squeeze(tfs_graph *g, int id, const void *arg)
{
    const int64_t *v = arg;
    at_set_int_list(g, id, "squeeze_dims", (int)v[0], v + 1);
}

START_TEST(test_squeeze_expand_dims)
{
    tfs_tensor *in[2];
    in[0] = at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 1, 3), F32(1, 2, 3, 4, 5, 6));
    at_expect(at_run1("Squeeze", 1, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(2, 3),
              F32(1, 2, 3, 4, 5, 6));
    in[0] = at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 1, 3), F32(1, 2, 3, 4, 5, 6));
    at_expect(at_run1("Squeeze", 1, in, true, set_squeeze, I64(1, -2)), TFS_DTYPE_FLOAT, 3,
              DIMS(1, 2, 3), F32(1, 2, 3, 4, 5, 6));
    in[0] = at_t(TFS_DTYPE_INT32, 2, DIMS(1, 1), I32(4));
    at_expect(at_run1("Squeeze", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 0, NULL, I32(4));
    tfs_tensor *out;
    tfs_status st;
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 2), NULL);
    ck_assert_int_eq(at_run("Squeeze", 1, in, true, set_squeeze, I64(1, 1), 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT,
                  "Can not squeeze dim[1], expected a dimension of 1, got 2");
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 2), NULL);
    ck_assert_int_eq(at_run("Squeeze", 1, in, true, set_squeeze, I64(1, 2), 1, &out, &st),
                     TFS_INVALID_ARGUMENT);

    /* ExpandDims at 0, -1 and 1 */
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), F32(1, 2, 3));
    in[1] = at_i32s(0);
    at_expect(at_run1("ExpandDims", 2, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(1, 3),
              F32(1, 2, 3));
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), F32(1, 2, 3));
    in[1] = at_i64v(1, I64(-1));
    at_expect(at_run1("ExpandDims", 2, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(3, 1),
              F32(1, 2, 3));
    const char *sv[] = {"a", "b"};
    in[0] = at_strs(2, DIMS(1, 2), sv);
    in[1] = at_i32s(1);
    at_expect_strs(at_run1("ExpandDims", 2, in, true, NULL, NULL), 3, DIMS(1, 1, 2), sv);
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL);
    in[1] = at_i32s(3);
    ck_assert_int_eq(at_run("ExpandDims", 2, in, true, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "expand dim index 3");
}
END_TEST

static void set_shape_attr(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_shape(g, id, "shape", arg);
}

static void set_message(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_string(g, id, "message", arg);
}

START_TEST(test_ensure_shape_check_numerics_identity_ops)
{
    tfs_tensor *in[1], *out;
    tfs_status st;
    tfs_shape want = {2, {-1, 3}};
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(5, 3), NULL);
    at_expect(at_run1("EnsureShape", 1, in, true, set_shape_attr, &want), TFS_DTYPE_FLOAT, 2,
              DIMS(5, 3), NULL);
    tfs_shape any = {-1, {0}};
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(4), NULL);
    at_expect(at_run1("EnsureShape", 1, in, true, set_shape_attr, &any), TFS_DTYPE_FLOAT, 1,
              DIMS(4), NULL);
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(5, 4), NULL);
    ck_assert_int_eq(at_run("EnsureShape", 1, in, true, set_shape_attr, &want, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "[5,4] is not compatible with expected shape [-1,3]");
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL);
    ck_assert_int_eq(at_run("EnsureShape", 1, in, true, set_shape_attr, &want, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);

    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), F32(1, 2));
    at_expect(at_run1("CheckNumerics", 1, in, true, set_message, "ok"), TFS_DTYPE_FLOAT, 1,
              DIMS(2), F32(1, 2));
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), F32(1, NAN));
    ck_assert_int_eq(at_run("CheckNumerics", 1, in, true, set_message, "my check", 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "my check : Tensor had NaN values");
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), F32(-INFINITY, 0));
    ck_assert_int_eq(at_run("CheckNumerics", 1, in, true, set_message, "m", 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "m : Tensor had Inf values");
    double dv[2] = {INFINITY, NAN};
    in[0] = at_t(TFS_DTYPE_DOUBLE, 1, DIMS(2), dv);
    ck_assert_int_eq(at_run("CheckNumerics", 1, in, true, set_message, "m", 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Tensor had Inf and NaN values");

    in[0] = at_i32v(2, I32(3, 4));
    at_expect(at_run1("StopGradient", 1, in, true, NULL, NULL), TFS_DTYPE_INT32, 1, DIMS(2),
              I32(3, 4));
    in[0] = at_i32v(2, I32(3, 4));
    at_expect(at_run1("PreventGradient", 1, in, true, set_message, "no grad"), TFS_DTYPE_INT32, 1,
              DIMS(2), I32(3, 4));
}
END_TEST

static enum tfs_code range(tfs_tensor *a, tfs_tensor *b, tfs_tensor *c, tfs_tensor **out,
                           tfs_status *st)
{
    tfs_tensor *ins[3] = {a, b, c};
    return at_run("Range", 3, ins, false, NULL, NULL, 1, out, st);
}

START_TEST(test_range)
{
    tfs_tensor *out;
    tfs_status st;
    ck_assert_int_eq(range(at_i32s(0), at_i32s(10), at_i32s(3), &out, &st), TFS_OK);
    at_expect(out, TFS_DTYPE_INT32, 1, DIMS(4), I32(0, 3, 6, 9));
    ck_assert_int_eq(range(at_i32s(10), at_i32s(0), at_i32s(-3), &out, &st), TFS_OK);
    at_expect(out, TFS_DTYPE_INT32, 1, DIMS(4), I32(10, 7, 4, 1));
    int64_t s = -2, l = 2, d = 1;
    ck_assert_int_eq(range(at_t(TFS_DTYPE_INT64, 0, NULL, &s), at_t(TFS_DTYPE_INT64, 0, NULL, &l),
                           at_t(TFS_DTYPE_INT64, 0, NULL, &d), &out, &st), TFS_OK);
    at_expect(out, TFS_DTYPE_INT64, 1, DIMS(4), I64(-2, -1, 0, 1));
    ck_assert_int_eq(range(at_i32s(5), at_i32s(5), at_i32s(1), &out, &st), TFS_OK);
    at_expect(out, TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    /* float: ceil(1 / 0.3) = 4 elements */
    ck_assert_int_eq(range(rt_scalar_f32(0), rt_scalar_f32(1), rt_scalar_f32(0.3f), &out, &st),
                     TFS_OK);
    tfs_test_assert_f32(out, 1, DIMS(4), F32(0, 0.3f, 0.6f, 0.9f), 1e-6);
    tfs_tensor_unref(out);
    ck_assert_int_eq(range(rt_scalar_f32(1), rt_scalar_f32(-1), rt_scalar_f32(-0.5f), &out, &st),
                     TFS_OK);
    tfs_test_assert_f32(out, 1, DIMS(4), F32(1, 0.5f, 0, -0.5f), 0);
    tfs_tensor_unref(out);
    /* errors */
    ck_assert_int_eq(range(at_i32s(0), at_i32s(10), at_i32s(0), &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "delta != 0");
    ck_assert_int_eq(range(at_i32s(10), at_i32s(0), at_i32s(1), &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Requires start <= limit when delta > 0");
    ck_assert_int_eq(range(at_i32s(0), rt_scalar_f32(1), at_i32s(1), &out, &st),
                     TFS_INVALID_ARGUMENT);
    s = INT64_MIN, l = INT64_MAX, d = 1;
    ck_assert_int_eq(range(at_t(TFS_DTYPE_INT64, 0, NULL, &s), at_t(TFS_DTYPE_INT64, 0, NULL, &l),
                           at_t(TFS_DTYPE_INT64, 0, NULL, &d), &out, &st), TFS_INVALID_ARGUMENT);
}
END_TEST

Suite *suite_runtime_array_shape(void)
{
    Suite *s = suite_create("runtime_array_shape");
    TCase *tc = tcase_create("shape");
    tcase_add_test(tc, test_shape_size_rank);
    tcase_add_test(tc, test_shape_n);
    tcase_add_test(tc, test_fill_zeros_ones);
    tcase_add_test(tc, test_squeeze_expand_dims);
    tcase_add_test(tc, test_ensure_shape_check_numerics_identity_ops);
    tcase_add_test(tc, test_range);
    suite_add_tcase(s, tc);
    return s;
}
