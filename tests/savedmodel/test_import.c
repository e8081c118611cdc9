/* GraphDef import: TF2 function calls are inlined (names "call/node", "node:out_arg:idx" resolved
 * through OpDefs), stripped default attrs are restored, and the result computes what TensorFlow would. */
#include <string.h>

#include "savedmodel/savedmodel-impl.h"
#include "tests/support/tfs-test.h"

#define TF2 "tf_serving/saved_model_half_plus_two_tf2_cpu/00000123"

static Tensorflow__AttrValue type_attr(Tensorflow__DataType t)
{
    Tensorflow__AttrValue v = TENSORFLOW__ATTR_VALUE__INIT;
    v.value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
    v.type = t;
    return v;
}

/* f(x) = x * x, called through StatefulPartitionedCall; Placeholder "p" lacks its "shape" attr,
 * which the stripped_op_list's default must put back. */
START_TEST(test_import_inlines_function_call)
{
    Tensorflow__AttrValue t_float = type_attr(TENSORFLOW__DATA_TYPE__DT_FLOAT);
    Tensorflow__NodeDef__AttrEntry e_t = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT,
                                   e_dtype = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT,
                                   e_f = TENSORFLOW__NODE_DEF__ATTR_ENTRY__INIT;
    e_t.key = "T";
    e_t.value = &t_float;
    e_dtype.key = "dtype";
    e_dtype.value = &t_float;

    /* function body */
    Tensorflow__NodeDef mul = TENSORFLOW__NODE_DEF__INIT;
    char *mul_in[] = {"x", "x"};
    Tensorflow__NodeDef__AttrEntry *mul_attrs[] = {&e_t};
    mul.name = "mul";
    mul.op = "Mul";
    mul.n_input = 2;
    mul.input = mul_in;
    mul.n_attr = 1;
    mul.attr = mul_attrs;
    Tensorflow__OpDef__ArgDef ax = TENSORFLOW__OP_DEF__ARG_DEF__INIT, ay = TENSORFLOW__OP_DEF__ARG_DEF__INIT;
    ax.name = "x";
    ax.type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    ay.name = "y";
    ay.type = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    Tensorflow__OpDef__ArgDef *fin[] = {&ax}, *fout[] = {&ay};
    Tensorflow__OpDef fsig = TENSORFLOW__OP_DEF__INIT;
    fsig.name = "f";
    fsig.n_input_arg = 1;
    fsig.input_arg = fin;
    fsig.n_output_arg = 1;
    fsig.output_arg = fout;
    Tensorflow__FunctionDef__RetEntry ret = TENSORFLOW__FUNCTION_DEF__RET_ENTRY__INIT;
    ret.key = "y";
    ret.value = "mul:z:0";
    Tensorflow__FunctionDef__RetEntry *rets[] = {&ret};
    Tensorflow__NodeDef *body[] = {&mul};
    Tensorflow__FunctionDef f = TENSORFLOW__FUNCTION_DEF__INIT;
    f.signature = &fsig;
    f.n_node_def = 1;
    f.node_def = body;
    f.n_ret = 1;
    f.ret = rets;
    Tensorflow__FunctionDef *fns[] = {&f};
    Tensorflow__FunctionDefLibrary lib = TENSORFLOW__FUNCTION_DEF_LIBRARY__INIT;
    lib.n_function = 1;
    lib.function = fns;

    /* top-level graph */
    Tensorflow__NodeDef p = TENSORFLOW__NODE_DEF__INIT, call = TENSORFLOW__NODE_DEF__INIT;
    Tensorflow__NodeDef__AttrEntry *p_attrs[] = {&e_dtype};
    p.name = "p";
    p.op = "Placeholder";
    p.n_attr = 1;
    p.attr = p_attrs;
    Tensorflow__NameAttrList fn = TENSORFLOW__NAME_ATTR_LIST__INIT;
    fn.name = "f";
    Tensorflow__AttrValue f_attr = TENSORFLOW__ATTR_VALUE__INIT;
    f_attr.value_case = TENSORFLOW__ATTR_VALUE__VALUE_FUNC;
    f_attr.func = &fn;
    e_f.key = "f";
    e_f.value = &f_attr;
    Tensorflow__NodeDef__AttrEntry *call_attrs[] = {&e_f};
    char *call_in[] = {"p"};
    call.name = "call";
    call.op = "StatefulPartitionedCall";
    call.n_input = 1;
    call.input = call_in;
    call.n_attr = 1;
    call.attr = call_attrs;
    Tensorflow__NodeDef *nodes[] = {&p, &call};
    Tensorflow__GraphDef gd = TENSORFLOW__GRAPH_DEF__INIT;
    gd.n_node = 2;
    gd.node = nodes;
    gd.library = &lib;

    /* stripped_op_list: Mul (output arg "z") and Placeholder (default shape: unknown rank) */
    Tensorflow__OpDef__ArgDef mz = TENSORFLOW__OP_DEF__ARG_DEF__INIT, mx = TENSORFLOW__OP_DEF__ARG_DEF__INIT,
                              my = TENSORFLOW__OP_DEF__ARG_DEF__INIT, po = TENSORFLOW__OP_DEF__ARG_DEF__INIT;
    mx.name = "x";
    mx.type_attr = "T";
    my.name = "y";
    my.type_attr = "T";
    mz.name = "z";
    mz.type_attr = "T";
    po.name = "output";
    po.type_attr = "dtype";
    Tensorflow__OpDef__ArgDef *mul_ins[] = {&mx, &my}, *mul_outs[] = {&mz}, *p_outs[] = {&po};
    Tensorflow__OpDef mul_def = TENSORFLOW__OP_DEF__INIT, p_def = TENSORFLOW__OP_DEF__INIT;
    mul_def.name = "Mul";
    mul_def.n_input_arg = 2;
    mul_def.input_arg = mul_ins;
    mul_def.n_output_arg = 1;
    mul_def.output_arg = mul_outs;
    Tensorflow__TensorShapeProto unknown = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    unknown.unknown_rank = 1;
    Tensorflow__AttrValue shape_default = TENSORFLOW__ATTR_VALUE__INIT;
    shape_default.value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    shape_default.shape = &unknown;
    Tensorflow__OpDef__AttrDef shape_attr = TENSORFLOW__OP_DEF__ATTR_DEF__INIT;
    shape_attr.name = "shape";
    shape_attr.type = "shape";
    shape_attr.default_value = &shape_default;
    Tensorflow__OpDef__AttrDef *p_attr_defs[] = {&shape_attr};
    p_def.name = "Placeholder";
    p_def.n_output_arg = 1;
    p_def.output_arg = p_outs;
    p_def.n_attr = 1;
    p_def.attr = p_attr_defs;
    Tensorflow__OpDef *op_defs[] = {&mul_def, &p_def};
    Tensorflow__OpList ops = TENSORFLOW__OP_LIST__INIT;
    ops.n_op = 2;
    ops.op = op_defs;
    Tensorflow__MetaGraphDef__MetaInfoDef mi = TENSORFLOW__META_GRAPH_DEF__META_INFO_DEF__INIT;
    mi.stripped_op_list = &ops;
    Tensorflow__MetaGraphDef mg = TENSORFLOW__META_GRAPH_DEF__INIT;
    mg.meta_info_def = &mi;
    mg.graph_def = &gd;

    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_msg(tfs__import_graph(&mg, &g, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_ge(tfs_graph_find_node(g, "call/mul"), 0);
    ck_assert_int_ge(tfs_graph_find_node(g, "call/x"), 0);
    int call_id = tfs_graph_find_node(g, "call");
    ck_assert_str_eq(tfs_graph_node_op(g, call_id), "IdentityN");
    ck_assert_str_eq(tfs_graph_node_input(g, call_id, 0), "call/mul:0");
    const tfs_attr_value *shape = tfs_graph_node_attr(g, tfs_graph_find_node(g, "p"), "shape");
    ck_assert_ptr_nonnull(shape);
    ck_assert_int_eq(shape->kind, TFS_ATTR_SHAPE);
    ck_assert_int_eq(shape->shape.rank, -1);

    tfs_session *s = NULL;
    ck_assert_int_eq(tfs_session_new(g, NULL, &s, &st), TFS_OK);
    int64_t d[] = {3};
    tfs_tensor *x = tfs_test_tensor_f32(1, d, (const float[]){3, -1, 0.5f}), *y = NULL;
    tfs_feed feed = {"p:0", x};
    const char *fetch = "call:0";
    ck_assert_msg(tfs_session_run(s, &feed, 1, &fetch, 1, NULL, 0, &y, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(y, 1, d, (const float[]){9, 1, 0.25f}, 0.0);
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* The TF2 fixture's signature output is a call node; its body is inlined two levels deep. */
START_TEST(test_import_tf2_fixture_nesting)
{
    if (tfs_test_skip_without_fixture(__func__, TF2))
        return;
    char dir[4096];
    tfs_test_fixture(TF2, dir, sizeof dir);
    Tensorflow__SavedModel *sm = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__saved_model_read(dir, &sm, &st), TFS_OK);
    const Tensorflow__MetaGraphDef *mg = tfs__saved_model_find_meta_graph(sm, "serve");
    ck_assert_ptr_nonnull(mg);
    tfs_graph *g = NULL;
    ck_assert_msg(tfs__import_graph(mg, &g, &st) == TFS_OK, "%s", st.msg);
    int id = tfs_graph_find_node(g, "StatefulPartitionedCall_5");
    ck_assert_int_ge(id, 0);
    ck_assert_str_eq(tfs_graph_node_op(g, id), "IdentityN");
    /* no call op survives import */
    for (int i = 0; i < tfs_graph_node_count(g); i++) {
        ck_assert_str_ne(tfs_graph_node_op(g, i), "StatefulPartitionedCall");
        ck_assert_str_ne(tfs_graph_node_op(g, i), "PartitionedCall");
    }
    tfs_graph_unref(g);
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

Suite *suite_savedmodel_import(void);
Suite *suite_savedmodel_import(void)
{
    Suite *s = suite_create("import");
    TCase *tc = tcase_create("inline");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_import_inlines_function_call);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("inline_fixtures", NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_import_tf2_fixture_nesting);
    suite_add_tcase(s, tc);
    return s;
}
