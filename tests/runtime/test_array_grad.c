/* Check suite for the gradient helper ops (kernels/array-grad.c): BroadcastGradientArgs,
 * UnsortedSegmentSum, InvertPermutation, DynamicStitch, and the int32 shape arithmetic a gradient
 * graph builds from them and Shape, Size, Range, Fill, Maximum, FloorDiv, Reshape, Tile, Sum and
 * Prod (the pattern of TensorFlow's gradient of Sum). Expected values are worked out by hand from
 * TensorFlow's documented semantics. */
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_array_grad(void);

#define I32(...) ((const int32_t[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define F32(...) ((const float[]){__VA_ARGS__})
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* ---- BroadcastGradientArgs ------------------------------------------------------------------ */

/* Runs BroadcastGradientArgs on int32 shapes a (na dims) and b, expecting r0 and r1. */
static void bga32(int na, const int32_t *a, int nb, const int32_t *b, int n0, const int32_t *r0,
                  int n1, const int32_t *r1)
{
    tfs_tensor *ins[2] = {at_i32v(na, a), at_i32v(nb, b)}, *outs[2];
    tfs_status st;
    ck_assert_msg(at_run("BroadcastGradientArgs", 2, ins, true, NULL, NULL, 2, outs, &st) ==
                      TFS_OK, "%s", st.msg);
    at_expect(outs[0], TFS_DTYPE_INT32, 1, DIMS(n0), r0);
    at_expect(outs[1], TFS_DTYPE_INT32, 1, DIMS(n1), r1);
}

START_TEST(test_array_grad_broadcast_gradient_args)
{
    /* [2,3,5] + [5]: b is summed over axes 0 and 1. */
    bga32(3, I32(2, 3, 5), 1, I32(5), 0, NULL, 2, I32(0, 1));
    /* [2,1,5] + [3,1] -> [2,3,5]: a over axis 1; b (as [1,3,1]) over axes 0 and 2. */
    bga32(3, I32(2, 1, 5), 2, I32(3, 1), 1, I32(1), 2, I32(0, 2));
    /* Equal shapes: nothing to sum, even dimensions of 1. */
    bga32(2, I32(1, 4), 2, I32(1, 4), 0, NULL, 0, NULL);
    /* [1,1] + [1]: axes where every dimension is 1 go to both. */
    bga32(2, I32(1, 1), 1, I32(1), 2, I32(0, 1), 2, I32(0, 1));
    /* A scalar against a matrix. */
    bga32(0, NULL, 2, I32(3, 4), 2, I32(0, 1), 0, NULL);
    /* Zero-sized dimensions broadcast like any other size. */
    bga32(2, I32(0, 3), 2, I32(1, 3), 0, NULL, 1, I32(0));

    /* int64 shapes give int64 axes. */
    tfs_tensor *ins[2] = {at_i64v(3, I64(4, 1, 6)), at_i64v(2, I64(5, 1))}, *outs[2];
    tfs_status st;
    ck_assert_int_eq(at_run("BroadcastGradientArgs", 2, ins, true, NULL, NULL, 2, outs, &st),
                     TFS_OK);
    at_expect(outs[0], TFS_DTYPE_INT64, 1, DIMS(1), I64(1));
    at_expect(outs[1], TFS_DTYPE_INT64, 1, DIMS(2), I64(0, 2));

    /* Incompatible shapes and non-vectors. */
    ins[0] = at_i32v(2, I32(2, 3));
    ins[1] = at_i32v(1, I32(4));
    ck_assert_int_eq(at_run("BroadcastGradientArgs", 2, ins, true, NULL, NULL, 2, outs, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Incompatible shapes: [2,3] vs. [4]");
    ins[0] = at_t(TFS_DTYPE_INT32, 2, DIMS(1, 2), I32(2, 3));
    ins[1] = at_i32v(1, I32(3));
    ck_assert_int_eq(at_run("BroadcastGradientArgs", 2, ins, true, NULL, NULL, 2, outs, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "In[0] must be a vector");
}
END_TEST

/* ---- UnsortedSegmentSum --------------------------------------------------------------------- */

static void set_tindices(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_type(g, id, "Tindices", *(const enum tfs_dtype *)arg);
}

START_TEST(test_array_grad_unsorted_segment_sum)
{
    enum tfs_dtype i32 = TFS_DTYPE_INT32, i64 = TFS_DTYPE_INT64;
    /* Rows 0 and 2 into segment 0, row 1 into 2, row 3 (id -1) dropped; segment 1 stays 0. */
    tfs_tensor *ins[3] = {at_t(TFS_DTYPE_FLOAT, 2, DIMS(4, 2), F32(1, 2, 3, 4, 5, 6, 7, 8)),
                          at_i32v(4, I32(0, 2, 0, -1)), at_i32s(3)};
    at_expect(at_run1("UnsortedSegmentSum", 3, ins, true, set_tindices, &i32), TFS_DTYPE_FLOAT, 2,
              DIMS(3, 2), F32(6, 8, 0, 0, 3, 4));
    /* int32 data with rank-2 int64 ids over the first two dims of [2,2,1]. */
    ins[0] = at_t(TFS_DTYPE_INT32, 3, DIMS(2, 2, 1), I32(1, 10, 100, 1000));
    ins[1] = at_t(TFS_DTYPE_INT64, 2, DIMS(2, 2), I64(1, 1, 0, 1));
    ins[2] = at_i32s(2);
    at_expect(at_run1("UnsortedSegmentSum", 3, ins, true, set_tindices, &i64), TFS_DTYPE_INT32, 2,
              DIMS(2, 1), I32(100, 1011));
    /* No ids at all: zeros. */
    ins[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(0, 3), NULL);
    ins[1] = at_i32v(0, NULL);
    ins[2] = at_i32s(2);
    at_expect(at_run1("UnsortedSegmentSum", 3, ins, true, set_tindices, &i32), TFS_DTYPE_FLOAT, 2,
              DIMS(2, 3), NULL);

    tfs_tensor *out;
    tfs_status st;
    ins[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), F32(1, 2, 3));
    ins[1] = at_i32v(3, I32(0, 3, 1));
    ins[2] = at_i32s(3);
    ck_assert_int_eq(at_run("UnsortedSegmentSum", 3, ins, true, set_tindices, &i32, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "segment_ids[1] = 3 is out of range [0, 3)");
    ins[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), F32(1, 2, 3));
    ins[1] = at_i32v(2, I32(0, 1));
    ins[2] = at_i32s(3);
    ck_assert_int_eq(at_run("UnsortedSegmentSum", 3, ins, true, set_tindices, &i32, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "does not start with segment_ids.shape");
    ins[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), F32(1));
    ins[1] = at_i32v(1, I32(0));
    ins[2] = at_i32s(-1);
    ck_assert_int_eq(at_run("UnsortedSegmentSum", 3, ins, true, set_tindices, &i32, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "must not be negative");
}
END_TEST

/* ---- InvertPermutation ---------------------------------------------------------------------- */

START_TEST(test_array_grad_invert_permutation)
{
    tfs_tensor *in = at_i32v(5, I32(3, 4, 0, 2, 1));
    at_expect(at_run1("InvertPermutation", 1, &in, true, NULL, NULL), TFS_DTYPE_INT32, 1, DIMS(5),
              I32(2, 4, 3, 0, 1));
    in = at_i64v(3, I64(2, 0, 1));
    at_expect(at_run1("InvertPermutation", 1, &in, true, NULL, NULL), TFS_DTYPE_INT64, 1, DIMS(3),
              I64(1, 2, 0));
    in = at_i32v(0, NULL);
    at_expect(at_run1("InvertPermutation", 1, &in, true, NULL, NULL), TFS_DTYPE_INT32, 1, DIMS(0),
              NULL);
    tfs_tensor *out;
    tfs_status st;
    in = at_i32v(3, I32(0, 2, 2));
    ck_assert_int_eq(at_run("InvertPermutation", 1, &in, true, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "2 is duplicated in the input.");
    in = at_i32v(2, I32(0, -1));
    ck_assert_int_eq(at_run("InvertPermutation", 1, &in, true, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "-1 is not between 0 and 2");
    in = at_i32s(0);
    ck_assert_int_eq(at_run("InvertPermutation", 1, &in, true, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "expects a 1D vector");
}
END_TEST

/* ---- DynamicStitch -------------------------------------------------------------------------- */

static void stitch_attrs(tfs_graph *g, int id, const void *arg)
{
    const int64_t *a = arg;   /* {N, T} */
    tfs_graph_set_attr_int(g, id, "N", a[0]);
    tfs_graph_set_attr_type(g, id, "T", (enum tfs_dtype)a[1]);
}

START_TEST(test_array_grad_dynamic_stitch)
{
    /* TensorFlow's documented example: indices 6, [4, 1], [[5, 2], [0, 3]] with rows of 2. */
    tfs_tensor *ins[6] = {
        at_t(TFS_DTYPE_INT32, 0, NULL, I32(6)),
        at_i32v(2, I32(4, 1)),
        at_t(TFS_DTYPE_INT32, 2, DIMS(2, 2), I32(5, 2, 0, 3)),
        at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), F32(61, 62)),
        at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 2), F32(41, 42, 11, 12)),
        at_t(TFS_DTYPE_FLOAT, 3, DIMS(2, 2, 2), F32(51, 52, 21, 22, 1, 2, 31, 32)),
    };
    int64_t attrs[2] = {3, TFS_DTYPE_FLOAT};
    at_expect(at_run1("DynamicStitch", 6, ins, false, stitch_attrs, attrs), TFS_DTYPE_FLOAT, 2,
              DIMS(7, 2), F32(1, 2, 11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62));
    /* Repeated indices: the later input wins; an index no input names stays 0. Strings too. */
    ins[0] = at_i32v(2, I32(0, 3));
    ins[1] = at_i32v(1, I32(0));
    ins[2] = at_strs(1, DIMS(2), (const char *const[]){"a", "d"});
    ins[3] = at_strs(1, DIMS(1), (const char *const[]){"z"});
    attrs[0] = 2;
    attrs[1] = TFS_DTYPE_STRING;
    at_expect_strs(at_run1("DynamicStitch", 4, ins, false, stitch_attrs, attrs), 1, DIMS(4),
                   (const char *const[]){"z", "", "", "d"});

    tfs_tensor *out;
    tfs_status st;
    attrs[1] = TFS_DTYPE_FLOAT;
    ins[0] = at_i32v(2, I32(0, 1));
    ins[1] = at_i32v(1, I32(2));
    ins[2] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 2), NULL);
    ins[3] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 3), NULL);
    ck_assert_int_eq(at_run("DynamicStitch", 4, ins, false, stitch_attrs, attrs, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Need data[0].shape[1:] = data[1].shape[1:]");
    ins[0] = at_i32v(2, I32(0, 1));
    ins[1] = at_i32v(1, I32(2));
    ins[2] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL);
    ins[3] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    ck_assert_int_eq(at_run("DynamicStitch", 4, ins, false, stitch_attrs, attrs, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "data[0].shape = [3] does not start with indices[0]");
    ins[0] = at_i32v(1, I32(-2));
    ins[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    attrs[0] = 1;
    ck_assert_int_eq(at_run("DynamicStitch", 2, ins, false, stitch_attrs, attrs, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "out of range");
}
END_TEST

/* ---- int32 shape arithmetic as in TensorFlow's gradient of Sum ------------------------------ */

START_TEST(test_array_grad_sum_gradient_shape_math)
{
    /* dx = Tile(Reshape(dy, kept), FloorDiv(Shape(x), Maximum(kept, 1))) with
     * kept = DynamicStitch([Range(0, Size(Shape(x)), 1), axes], [Shape(x), Fill(Shape(axes), 1)])
     * for x [2,3,4] summed over axis 1: kept = [2,1,4], tiling [1,3,1]. */
    enum tfs_dtype f = TFS_DTYPE_FLOAT, i32 = TFS_DTYPE_INT32;
    tfs_graph *g;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    rt_placeholder(g, "x", f);
    rt_placeholder(g, "dy", f);
    rt_const(g, "axes", at_i32v(1, I32(1)));
    rt_const(g, "zero", at_i32s(0));
    rt_const(g, "one", at_i32s(1));
    tfs_graph_set_attr_type(g, rt_node(g, "in_shape", "Shape", "x", NULL, f), "out_type", i32);
    tfs_graph_set_attr_type(g, rt_node(g, "rank", "Size", "in_shape", NULL, i32), "out_type", i32);
    int r = rt_node(g, "range", "Range", "zero", "rank", TFS_DTYPE_INVALID);
    tfs_graph_add_input(g, r, "one");
    tfs_graph_set_attr_type(g, r, "Tidx", i32);
    tfs_graph_set_attr_type(g, rt_node(g, "axes_shape", "Shape", "axes", NULL, i32), "out_type",
                            i32);
    tfs_graph_set_attr_type(g, rt_node(g, "ones", "Fill", "axes_shape", "one", i32), "index_type",
                            i32);
    int ds = rt_node(g, "kept", "DynamicStitch", "range", "axes", i32);
    tfs_graph_add_input(g, ds, "in_shape");
    tfs_graph_add_input(g, ds, "ones");
    tfs_graph_set_attr_int(g, ds, "N", 2);
    rt_node(g, "safe", "Maximum", "kept", "one", i32);
    rt_node(g, "tiling", "FloorDiv", "in_shape", "safe", i32);
    tfs_graph_set_attr_type(g, rt_node(g, "dy_kept", "Reshape", "dy", "kept", f), "Tshape", i32);
    tfs_graph_set_attr_type(g, rt_node(g, "dx", "Tile", "dy_kept", "tiling", f), "Tmultiples", i32);
    int p = rt_node(g, "count", "Prod", "in_shape", "zero", i32);
    tfs_graph_set_attr_bool(g, p, "keep_dims", false);
    int sm = rt_node(g, "kept_sum", "Sum", "kept", "zero", i32);
    tfs_graph_set_attr_bool(g, sm, "keep_dims", true);
    tfs_session *s = rt_session(g, NULL);

    float x[24] = {0}, dy[8];
    for (int i = 0; i < 8; i++)
        dy[i] = (float)(i + 1);
    tfs_feed feeds[2] = {{"x", at_t(f, 3, DIMS(2, 3, 4), x)}, {"dy", at_t(f, 2, DIMS(2, 4), dy)}};
    const char *fetch[5] = {"kept", "tiling", "dx", "count", "kept_sum"};
    tfs_tensor *out[5];
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, feeds, 2, fetch, 5, NULL, 0, out, &st) == TFS_OK, "%s",
                  st.msg);
    at_expect(out[0], i32, 1, DIMS(3), I32(2, 1, 4));
    at_expect(out[1], i32, 1, DIMS(3), I32(1, 3, 1));
    float want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[(i * 3 + j) * 4 + k] = dy[i * 4 + k];
    at_expect(out[2], f, 3, DIMS(2, 3, 4), want);
    at_expect(out[3], i32, 0, NULL, I32(24));
    at_expect(out[4], i32, 1, DIMS(1), I32(7));
    tfs_tensor_unref(feeds[0].tensor);
    tfs_tensor_unref(feeds[1].tensor);
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_array_grad(void)
{
    Suite *s = suite_create("runtime_array_grad");
    TCase *tc = tcase_create("array_grad");
    tcase_add_test(tc, test_array_grad_broadcast_gradient_args);
    tcase_add_test(tc, test_array_grad_unsorted_segment_sum);
    tcase_add_test(tc, test_array_grad_invert_permutation);
    tcase_add_test(tc, test_array_grad_dynamic_stitch);
    tcase_add_test(tc, test_array_grad_sum_gradient_shape_math);
    suite_add_tcase(s, tc);
    return s;
}
