/* GraphDef import of functional control flow: a MetaGraphDef (written in protobuf text format, as
 * TF2 exports it: StatelessWhile/StatelessIf with func attrs, bodies naming tensors
 * "node:out_arg:idx", a PartitionedCall inside a loop body, stripped default attrs) imports into a
 * graph whose library holds the loop and branch functions, and running it computes what
 * TensorFlow would (checked against a C loop). Also: a control-flow node naming a function the
 * library lacks is refused at import, naming both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/textformat.h"
#include "savedmodel/savedmodel-impl.h"
#include "tests/support/tfs-test.h"

Suite *suite_savedmodel_import_control(void);

#define OPS                                                                                        \
    "meta_info_def { stripped_op_list {"                                                           \
    " op { name: 'StatelessWhile' input_arg { name: 'input' type_list_attr: 'T' }"                \
    "      output_arg { name: 'output' type_list_attr: 'T' }"                                      \
    "      attr { name: 'T' type: 'list(type)' } attr { name: 'cond' type: 'func' }"               \
    "      attr { name: 'body' type: 'func' }"                                                     \
    "      attr { name: 'output_shapes' type: 'list(shape)' default_value { list { } } }"          \
    "      attr { name: 'parallel_iterations' type: 'int' default_value { i: 10 } } }"             \
    " op { name: 'StatelessIf' input_arg { name: 'cond' type_attr: 'Tcond' }"                      \
    "      input_arg { name: 'input' type_list_attr: 'Tin' }"                                      \
    "      output_arg { name: 'output' type_list_attr: 'Tout' }"                                   \
    "      attr { name: 'Tcond' type: 'type' } attr { name: 'Tin' type: 'list(type)' }"            \
    "      attr { name: 'Tout' type: 'list(type)' } attr { name: 'then_branch' type: 'func' }"     \
    "      attr { name: 'else_branch' type: 'func' }"                                              \
    "      attr { name: 'output_shapes' type: 'list(shape)' default_value { list { } } } }"        \
    " op { name: 'PartitionedCall' input_arg { name: 'args' type_list_attr: 'Tin' }"               \
    "      output_arg { name: 'output' type_list_attr: 'Tout' }"                                   \
    "      attr { name: 'Tin' type: 'list(type)' } attr { name: 'Tout' type: 'list(type)' }"       \
    "      attr { name: 'f' type: 'func' } }"                                                      \
    " op { name: 'AddV2' input_arg { name: 'x' type_attr: 'T' }"                                   \
    "      input_arg { name: 'y' type_attr: 'T' }"                                                 \
    "      output_arg { name: 'z' type_attr: 'T' } attr { name: 'T' type: 'type' } }"              \
    " op { name: 'Mul' input_arg { name: 'x' type_attr: 'T' }"                                     \
    "      input_arg { name: 'y' type_attr: 'T' }"                                                 \
    "      output_arg { name: 'z' type_attr: 'T' } attr { name: 'T' type: 'type' } }"              \
    " op { name: 'Identity' input_arg { name: 'input' type_attr: 'T' }"                            \
    "      output_arg { name: 'output' type_attr: 'T' } attr { name: 'T' type: 'type' } }"         \
    " op { name: 'Const' output_arg { name: 'output' type_attr: 'dtype' }"                         \
    "      attr { name: 'value' type: 'tensor' } attr { name: 'dtype' type: 'type' } }"            \
    " op { name: 'Placeholder' output_arg { name: 'output' type_attr: 'dtype' }"                   \
    "      attr { name: 'dtype' type: 'type' } } } }"

#define I32 "attr { key: 'T' value { type: DT_INT32 } }"
#define CONST_I32(name, v)                                                                         \
    "node_def { name: '" name "' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"      \
    " attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { } int_val: " #v " } } } }"

/* The loop: (n, acc, odd) -> (n - 1, odd ? acc * n : acc, 1 - odd) while n != 0: with odd fed as
 * n's parity, the product of the odd numbers up to n. The body multiplies through a
 * PartitionedCall (inlined into the body) and picks with a StatelessIf on the int32 flag. */
static const char MODEL[] =
    OPS
    "graph_def {"
    " node { name: 'n' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
    " node { name: 'odd' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
    " node { name: 'one' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }"
    "        attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { }"
    "                                            int_val: 1 } } } }"
    " node { name: 'while' op: 'StatelessWhile' input: 'n' input: 'one' input: 'odd'"
    "        attr { key: 'T' value { list { type: DT_INT32 type: DT_INT32 type: DT_INT32 } } }"
    "        attr { key: 'cond' value { func { name: 'while_cond_7' } } }"
    "        attr { key: 'body' value { func { name: 'while_body_8' } } } }"
    " node { name: 'result' op: 'Identity' input: 'while:1' " I32 " }"
    " library {"
    "  function { signature { name: 'while_cond_7'"
    "     input_arg { name: 'n' type: DT_INT32 } input_arg { name: 'acc' type: DT_INT32 }"
    "     input_arg { name: 'odd' type: DT_INT32 } output_arg { name: 'identity' type: DT_INT32 } }"
    "   node_def { name: 'Identity' op: 'Identity' input: 'n' " I32 " }"
    "   ret { key: 'identity' value: 'Identity:output:0' } }"
    "  function { signature { name: 'while_body_8'"
    "     input_arg { name: 'n' type: DT_INT32 } input_arg { name: 'acc' type: DT_INT32 }"
    "     input_arg { name: 'odd' type: DT_INT32 }"
    "     output_arg { name: 'n_next' type: DT_INT32 }"
    "     output_arg { name: 'acc_next' type: DT_INT32 }"
    "     output_arg { name: 'odd_next' type: DT_INT32 } }"
    "   " CONST_I32("m1", -1) " " CONST_I32("p1", 1)
    "   node_def { name: 'sub' op: 'AddV2' input: 'n' input: 'm1:output:0' " I32 " }"
    "   node_def { name: 'neg' op: 'Mul' input: 'odd' input: 'm1:output:0' " I32 " }"
    "   node_def { name: 'flip' op: 'AddV2' input: 'neg:z:0' input: 'p1:output:0' " I32 " }"
    "   node_def { name: 'call' op: 'PartitionedCall' input: 'acc' input: 'n'"
    "     attr { key: 'Tin' value { list { type: DT_INT32 type: DT_INT32 } } }"
    "     attr { key: 'Tout' value { list { type: DT_INT32 } } }"
    "     attr { key: 'f' value { func { name: 'mul_fn_3' } } } }"
    "   node_def { name: 'pick' op: 'StatelessIf' input: 'odd' input: 'call:output:0' input: 'acc'"
    "     attr { key: 'Tcond' value { type: DT_INT32 } }"
    "     attr { key: 'Tin' value { list { type: DT_INT32 type: DT_INT32 } } }"
    "     attr { key: 'Tout' value { list { type: DT_INT32 } } }"
    "     attr { key: 'then_branch' value { func { name: 'first_5' } } }"
    "     attr { key: 'else_branch' value { func { name: 'second_6' } } } }"
    "   ret { key: 'n_next' value: 'sub:z:0' } ret { key: 'acc_next' value: 'pick:output:0' }"
    "   ret { key: 'odd_next' value: 'flip:z:0' } }"
    "  function { signature { name: 'mul_fn_3' input_arg { name: 'a' type: DT_INT32 }"
    "     input_arg { name: 'b' type: DT_INT32 } output_arg { name: 'product' type: DT_INT32 } }"
    "   node_def { name: 'mul' op: 'Mul' input: 'a' input: 'b' " I32 " }"
    "   ret { key: 'product' value: 'mul:z:0' } }"
    "  function { signature { name: 'first_5' input_arg { name: 'a' type: DT_INT32 }"
    "     input_arg { name: 'b' type: DT_INT32 } output_arg { name: 'y' type: DT_INT32 } }"
    "   node_def { name: 'Identity' op: 'Identity' input: 'a' " I32 " }"
    "   ret { key: 'y' value: 'Identity:output:0' } }"
    "  function { signature { name: 'second_6' input_arg { name: 'a' type: DT_INT32 }"
    "     input_arg { name: 'b' type: DT_INT32 } output_arg { name: 'y' type: DT_INT32 } }"
    "   node_def { name: 'Identity' op: 'Identity' input: 'b' " I32 " }"
    "   ret { key: 'y' value: 'Identity:output:0' } }"
    "  function { signature { name: 'unused_9' output_arg { name: 'y' type: DT_INT32 } }"
    "   " CONST_I32("c", 3) " ret { key: 'y' value: 'c:output:0' } }"
    " } }";

static Tensorflow__MetaGraphDef *parse(const char *text)
{
    ProtobufCMessage *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_textformat_parse(&tensorflow__meta_graph_def__descriptor, text, strlen(text),
                                       "model", &m, &st) == TFS_OK, "%s", st.msg);
    return (Tensorflow__MetaGraphDef *)m;
}

/* Imports `text` (MODEL, with or without its stripped_op_list), checks the library and runs the
 * loop against a C loop. */
static void check_loop_model(const char *text)
{
    Tensorflow__MetaGraphDef *mg = parse(text);
    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_msg(tfs__import_graph(mg, &g, &st) == TFS_OK, "%s", st.msg);
    protobuf_c_message_free_unpacked(&mg->base, NULL);
    /* cond, body and both branches are library functions; the called mul_fn_3 is inlined into
     * the body and the unreferenced unused_9 is left out. */
    ck_assert_int_eq(tfs_graph_function_count(g), 4);
    ck_assert(tfs_graph_has_function(g, "while_cond_7"));
    ck_assert(tfs_graph_has_function(g, "while_body_8"));
    ck_assert(tfs_graph_has_function(g, "first_5"));
    ck_assert(tfs_graph_has_function(g, "second_6"));
    ck_assert(!tfs_graph_has_function(g, "mul_fn_3"));
    /* parallel_iterations, stripped on save, is back from the OpDef. */
    int w = tfs_graph_find_node(g, "while");
    const tfs_attr_value *pi = tfs_graph_node_attr(g, w, "parallel_iterations");
    ck_assert_ptr_nonnull(pi);
    ck_assert_int_eq(pi->i, 10);

    tfs_session *s = NULL;
    ck_assert_msg(tfs_session_new(g, NULL, &s, &st) == TFS_OK, "%s", st.msg);
    tfs_graph_unref(g);
    const char *feeds[] = {"n", "odd"}, *fetch = "result:0";
    ck_assert_msg(tfs_session_check(s, feeds, 2, &fetch, 1, NULL, 0, &st) == TFS_OK, "%s", st.msg);
    for (int32_t n = 0; n <= 9; n++) {
        int32_t want = 1;
        for (int32_t i = n; i > 0; i--)
            if (i % 2)
                want *= i;
        int32_t odd = n % 2;
        tfs_tensor *tn, *to, *out = NULL;
        ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT32, &tn, NULL), TFS_OK);
        ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT32, &to, NULL), TFS_OK);
        *(int32_t *)tn->data = n;
        *(int32_t *)to->data = odd;
        tfs_feed fd[] = {{"n", tn}, {"odd", to}};
        ck_assert_msg(tfs_session_run(s, fd, 2, &fetch, 1, NULL, 0, &out, &st) == TFS_OK, "%s",
                      st.msg);
        ck_assert_int_eq(*(const int32_t *)out->data, want);   /* n = 9: 9*7*5*3*1 = 945 */
        tfs_tensor_unref(out);
        tfs_tensor_unref(tn);
        tfs_tensor_unref(to);
    }
    tfs_session_free(s);
}

START_TEST(test_import_while_and_if_into_library)
{
    check_loop_model(MODEL);
}
END_TEST

/* TF2 exports describe only some ops in stripped_op_list, or none: names like 'mul:z:0' resolve
 * and stripped defaults come back from the runtime's op registry, as TensorFlow's own does. */
START_TEST(test_import_without_stripped_op_list)
{
    check_loop_model(MODEL + sizeof OPS - 1);
}
END_TEST

/* Replaces the first `from` in MODEL by `to`; the caller frees. */
static char *model_with(const char *from, const char *to)
{
    const char *at = strstr(MODEL, from);
    ck_assert_ptr_nonnull(at);
    size_t n = sizeof MODEL + strlen(to);
    char *text = malloc(n);
    ck_assert_ptr_nonnull(text);
    snprintf(text, n, "%.*s%s%s", (int)(at - MODEL), MODEL, to, at + strlen(from));
    return text;
}

static void expect_import_error(const char *from, const char *to, enum tfs_code code,
                                const char *want1, const char *want2)
{
    char *text = model_with(from, to);
    Tensorflow__MetaGraphDef *mg = parse(text);
    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__import_graph(mg, &g, &st), code);
    ck_assert_msg(strstr(st.msg, want1) && strstr(st.msg, want2), "%s", st.msg);
    ck_assert_ptr_null(g);
    protobuf_c_message_free_unpacked(&mg->base, NULL);
    free(text);
}

/* Hostile graphs fail their import with the node named, never crash. */
START_TEST(test_import_bad_graphs_named)
{
    /* A function whose body calls itself. */
    expect_import_error("name: 'mul' op: 'Mul'", "name: 'mul' op: 'mul_fn_3'",
                        TFS_INVALID_ARGUMENT, "nest deeper", "mul");
    /* A body output naming an output its op does not have. */
    expect_import_error("'mul:z:0'", "'mul:nope:0'", TFS_NOT_FOUND, "'mul'", "nope");
    /* ... or an index past it, or a node the body lacks. */
    expect_import_error("'mul:z:0'", "'mul:z:3'", TFS_INVALID_ARGUMENT, "'mul'", "out of range");
    expect_import_error("'mul:z:0'", "'ghost:z:0'", TFS_INVALID_ARGUMENT, "ghost", "names no node");
}
END_TEST

/* A While whose body returns fewer values than the loop carries fails its import, naming the
 * loop, rather than each request. */
START_TEST(test_import_while_body_wrong_arity)
{
    expect_import_error("     output_arg { name: 'odd_next' type: DT_INT32 } }", " }",
                        TFS_INVALID_ARGUMENT, "node 'while' (StatelessWhile): its body function",
                        "returns 2 results, but the node passes 3 and expects 3");
    /* An If branch taking more than the node passes. */
    expect_import_error("name: 'first_5' input_arg { name: 'a' type: DT_INT32 }",
                        "name: 'first_5' input_arg { name: 'a' type: DT_INT32 } input_arg { name: "
                        "'c' type: DT_INT32 }", TFS_INVALID_ARGUMENT, "pick' (StatelessIf)", "then_branch");
}
END_TEST

START_TEST(test_import_control_flow_unknown_function)
{
    char text[sizeof MODEL + 64];
    const char *at = strstr(MODEL, "name: 'while_body_8' } }");
    ck_assert_ptr_nonnull(at);
    snprintf(text, sizeof text, "%.*sname: 'while_body_404' } }%s", (int)(at - MODEL), MODEL,
             at + strlen("name: 'while_body_8' } }"));
    Tensorflow__MetaGraphDef *mg = parse(text);
    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__import_graph(mg, &g, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "'while'") && strstr(st.msg, "'while_body_404'"), "%s", st.msg);
    ck_assert_ptr_null(g);
    protobuf_c_message_free_unpacked(&mg->base, NULL);
}
END_TEST

Suite *suite_savedmodel_import_control(void)
{
    Suite *s = suite_create("savedmodel_import_control");
    TCase *tc = tcase_create("control");
    tcase_add_test(tc, test_import_while_and_if_into_library);
    tcase_add_test(tc, test_import_without_stripped_op_list);
    tcase_add_test(tc, test_import_bad_graphs_named);
    tcase_add_test(tc, test_import_while_body_wrong_arity);
    tcase_add_test(tc, test_import_control_flow_unknown_function);
    suite_add_tcase(s, tc);
    return s;
}
