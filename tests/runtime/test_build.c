/* The graph builder (build.h): TensorFlow's names and scopes, the type attrs TensorFlow's op
 * definitions require, dtypes, sticky errors, and a small network built and run end to end
 * against values computed by hand. */
#include <string.h>

#include "tests/runtime/helpers.h"

static tfs_graph *new_graph(void)
{
    tfs_graph *g;
    tfs_status st;
    ck_assert(tfs_graph_new(&g, &st) == TFS_OK);
    return g;
}

static enum tfs_dtype type_attr(tfs_graph *g, tfs_out o, const char *name)
{
    const tfs_attr_value *a = tfs_graph_node_attr(g, o.node, name);
    return a && a->kind == TFS_ATTR_TYPE ? a->type : TFS_DTYPE_INVALID;
}

START_TEST(test_build_names_and_scopes)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out a = tfs_build_unary(g, "Relu", x);
    tfs_out b = tfs_build_unary(g, "Relu", x);
    tfs_build_scope_push(g, "dense");
    tfs_out c = tfs_build_unary(g, "Relu", x);
    tfs_build_scope_push(g, "inner");
    tfs_out d = tfs_build_unary(g, "Relu", x);
    ck_assert_str_eq(tfs_build_scope(g), "dense/inner");
    tfs_build_scope_pop(g);
    tfs_out e = tfs_build_unary(g, "Relu", x);
    tfs_build_scope_pop(g);
    ck_assert_str_eq(tfs_build_scope(g), "");
    ck_assert_str_eq(tfs_graph_node_name(g, a.node), "Relu");
    ck_assert_str_eq(tfs_graph_node_name(g, b.node), "Relu_1");
    ck_assert_str_eq(tfs_graph_node_name(g, c.node), "dense/Relu");
    ck_assert_str_eq(tfs_graph_node_name(g, d.node), "dense/inner/Relu");
    ck_assert_str_eq(tfs_graph_node_name(g, e.node), "dense/Relu_1");
    char buf[64];
    ck_assert_str_eq(tfs_build_tensor_name(g, tfs_out_at(d, 2), buf, sizeof buf),
                     "dense/inner/Relu:2");
    ck_assert_str_eq(tfs_graph_node_input(g, d.node, 0), "x:0");
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_build_type_attrs)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_DOUBLE, NULL);
    tfs_out sum = tfs_build_reduce(g, "Sum", x, tfs_build_ints(g, 1, (int64_t[]){0}), true);
    ck_assert_int_eq(type_attr(g, sum, "T"), TFS_DTYPE_DOUBLE);
    ck_assert_int_eq(type_attr(g, sum, "Tidx"), TFS_DTYPE_INT32);
    ck_assert(tfs_graph_node_attr(g, sum.node, "keep_dims")->b);
    tfs_out cast = tfs_build_cast(g, x, TFS_DTYPE_INT64);
    ck_assert_int_eq(type_attr(g, cast, "SrcT"), TFS_DTYPE_DOUBLE);
    ck_assert_int_eq(type_attr(g, cast, "DstT"), TFS_DTYPE_INT64);
    ck_assert_int_eq(tfs_build_dtype(g, cast), TFS_DTYPE_INT64);
    tfs_out in[3] = {x, x, x};
    tfs_out n = tfs_build_add_n(g, 3, in);
    ck_assert_int_eq(tfs_graph_node_attr(g, n.node, "N")->i, 3);
    ck_assert_int_eq(type_attr(g, n, "T"), TFS_DTYPE_DOUBLE);
    tfs_out cat_in[3] = {x, x, tfs_build_scalar(g, TFS_DTYPE_INT32, 0)};
    tfs_out cat = tfs_build_op(g, "ConcatV2", NULL, 3, cat_in);
    ck_assert_int_eq(tfs_graph_node_attr(g, cat.node, "N")->i, 2);
    ck_assert_int_eq(type_attr(g, cat, "Tidx"), TFS_DTYPE_INT32);
    ck_assert_int_eq(tfs_build_dtype(g, tfs_build_binary(g, "Less", x, x)), TFS_DTYPE_BOOL);
    ck_assert_int_eq(tfs_build_dtype(g, tfs_build_shape(g, x)), TFS_DTYPE_INT32);
    tfs_out v = tfs_build_variable(g, "v", TFS_DTYPE_FLOAT, &(tfs_shape){1, {2}});
    ck_assert_int_eq(tfs_build_dtype(g, v), TFS_DTYPE_FLOAT + TFS_DTYPE_REF_OFFSET);
    /* A reference input binds the base dtype. */
    tfs_out r = tfs_build_unary(g, "Relu", v);
    ck_assert_int_eq(type_attr(g, r, "T"), TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_build_dtype(g, tfs_build_assign(g, v, r)),
                     TFS_DTYPE_FLOAT + TFS_DTYPE_REF_OFFSET);
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_build_sticky_errors)
{
    tfs_graph *g = new_graph();
    tfs_status st;
    tfs_build_scope_push(g, "layer");
    tfs_out v = tfs_build_variable(g, "w", TFS_DTYPE_FLOAT, NULL);
    ck_assert_str_eq(tfs_graph_node_name(g, v.node), "layer/w");
    tfs_out dup = tfs_build_variable(g, "w", TFS_DTYPE_FLOAT, NULL);
    ck_assert(!tfs_out_ok(dup));
    ck_assert(!tfs_out_ok(tfs_build_unary(g, "Relu", v)));   /* every later call is a no-op */
    ck_assert(tfs_graph_finalize(g, &st) == TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "layer/w") != NULL, "%s", st.msg);
    tfs_graph_unref(g);

    g = new_graph();
    ck_assert(!tfs_out_ok(tfs_build_unary(g, "Relu", TFS_OUT_NONE)));
    ck_assert(tfs_graph_finalize(g, &st) == TFS_INVALID_ARGUMENT);
    tfs_graph_unref(g);
}
END_TEST

/* y = relu(x W + b) with W [2,3], b [3], run on x [[1, 2], [-1, 0.5]]: hand-computed values. */
START_TEST(test_build_dense_layer_runs)
{
    tfs_graph *g = new_graph();
    tfs_status st;
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, &(tfs_shape){2, {-1, 2}});
    tfs_build_scope_push(g, "dense");
    tfs_out w = tfs_build_variable(g, "kernel", TFS_DTYPE_FLOAT, &(tfs_shape){2, {2, 3}});
    tfs_out b = tfs_build_variable(g, "bias", TFS_DTYPE_FLOAT, &(tfs_shape){1, {3}});
    tfs_tensor *wv = rt_tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 3},
                               (float[]){1, -1, 0.5f, 2, 0, -3});
    tfs_tensor *bv = rt_tensor(TFS_DTYPE_FLOAT, 1, (int64_t[]){3}, (float[]){0.5f, 0, 1});
    tfs_out init[2] = {tfs_build_assign(g, w, tfs_build_const(g, "w0", wv)),
                       tfs_build_assign(g, b, tfs_build_const(g, "b0", bv))};
    tfs_tensor_unref(wv);
    tfs_tensor_unref(bv);
    tfs_out mm = tfs_build_matmul(g, x, w, false, false);
    tfs_out y = tfs_build_unary(g, "Relu", tfs_build_binary(g, "BiasAdd", mm, b));
    tfs_build_scope_pop(g);
    tfs_out group = tfs_build_group(g, "init", 2, init);
    char yname[64];
    tfs_build_tensor_name(g, y, yname, sizeof yname);
    tfs_session *s = rt_session(g, NULL);
    const char *target = tfs_graph_node_name(tfs_session_graph(s), group.node);
    ck_assert(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st) == TFS_OK);
    tfs_tensor *xv = rt_tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, (float[]){1, 2, -1, 0.5f});
    tfs_feed feed = {"x", xv};
    tfs_tensor *out = NULL;
    ck_assert_msg(rt_run1(s, &feed, 1, yname, &out, &st) == TFS_OK, "%s", st.msg);
    /* row 0: [1+4, -1+0, 0.5-6] + b = [5.5, -1, -4.5] -> relu [5.5, 0, 0]
     * row 1: [-1+1, 1+0, -0.5-1.5] + b = [0.5, 1, -1] -> relu [0.5, 1, 0] */
    tfs_test_assert_f32(out, 2, (int64_t[]){2, 3}, (float[]){5.5f, 0, 0, 0.5f, 1, 0}, 1e-6);
    tfs_tensor_unref(out);
    tfs_tensor_unref(xv);
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_build(void);
Suite *suite_runtime_build(void)
{
    Suite *s = suite_create("runtime_build");
    TCase *tc = tcase_create("build");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_build_names_and_scopes);
    tcase_add_test(tc, test_build_type_attrs);
    tcase_add_test(tc, test_build_sticky_errors);
    tcase_add_test(tc, test_build_dense_layer_runs);
    suite_add_tcase(s, tc);
    return s;
}
