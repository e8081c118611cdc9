/* GraphDef import of functional control flow: a MetaGraphDef (written in protobuf text format, as
 * TF2 exports it: StatelessWhile/StatelessIf with func attrs, bodies naming tensors
 * "node:out_arg:idx", a PartitionedCall inside a loop body, stripped default attrs) imports into a
 * graph whose library holds the loop and branch functions, and running it computes what
 * TensorFlow would (checked against a C loop); likewise a StatelessCase with three branches
 * (list(func) attr), checked against a C reference for indices in and out of range. Also: a
 * control-flow node naming a function the library lacks, or one whose functions have the wrong
 * arity, is refused at import, naming the node. */
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

/* Replaces the first `from` in `base` by `to`; the caller frees. */
static char *text_with(const char *base, const char *from, const char *to)
{
    const char *at = strstr(base, from);
    ck_assert_ptr_nonnull(at);
    size_t n = strlen(base) + strlen(to) + 1;
    char *text = malloc(n);
    ck_assert_ptr_nonnull(text);
    snprintf(text, n, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    return text;
}

/* Imports `base` with `from` replaced by `to`: fails with `code`, the message holding both. */
static void expect_error_in(const char *base, const char *from, const char *to,
                            enum tfs_code code, const char *want1, const char *want2)
{
    char *text = text_with(base, from, to);
    Tensorflow__MetaGraphDef *mg = parse(text);
    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__import_graph(mg, &g, &st), code);
    ck_assert_msg(strstr(st.msg, want1) && strstr(st.msg, want2), "%s", st.msg);
    ck_assert_ptr_null(g);
    protobuf_c_message_free_unpacked(&mg->base, NULL);
    free(text);
}

static void expect_import_error(const char *from, const char *to, enum tfs_code code,
                                const char *want1, const char *want2)
{
    expect_error_in(MODEL, from, to, code, want1, want2);
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

#define F32 "attr { key: 'T' value { type: DT_FLOAT } }"

/* A tf.switch_case as TF2 exports it, without a stripped_op_list: StatelessCase over (x, k) with
 * three branch functions naming tensors "node:out_arg:idx", output_shapes stripped. Branch 0:
 * (x * x, k + 1); branch 1: (x + x, k * k), the product through a PartitionedCall; branch 2, which
 * TensorFlow also runs for any index out of range: (x * 3, -k). */
static const char CASE_MODEL[] =
    "graph_def {"
    " node { name: 'i' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
    " node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
    " node { name: 'k' op: 'Placeholder' attr { key: 'dtype' value { type: DT_INT32 } } }"
    " node { name: 'case' op: 'StatelessCase' input: 'i' input: 'x' input: 'k'"
    "        attr { key: 'Tin' value { list { type: DT_FLOAT type: DT_INT32 } } }"
    "        attr { key: 'Tout' value { list { type: DT_FLOAT type: DT_INT32 } } }"
    "        attr { key: 'branches' value { list { func { name: 'case_branch0_21' }"
    "               func { name: 'case_branch1_22' } func { name: 'case_branch2_23' } } } } }"
    " node { name: 'y' op: 'Identity' input: 'case' " F32 " }"
    " node { name: 'j' op: 'Identity' input: 'case:1' " I32 " }"
    " library {"
    "  function { signature { name: 'case_branch0_21'"
    "     input_arg { name: 'x' type: DT_FLOAT } input_arg { name: 'k' type: DT_INT32 }"
    "     output_arg { name: 'y' type: DT_FLOAT } output_arg { name: 'j' type: DT_INT32 } }"
    "   " CONST_I32("p1", 1)
    "   node_def { name: 'sq' op: 'Mul' input: 'x' input: 'x' " F32 " }"
    "   node_def { name: 'inc' op: 'AddV2' input: 'k' input: 'p1:output:0' " I32 " }"
    "   ret { key: 'y' value: 'sq:z:0' } ret { key: 'j' value: 'inc:z:0' } }"
    "  function { signature { name: 'case_branch1_22'"
    "     input_arg { name: 'x' type: DT_FLOAT } input_arg { name: 'k' type: DT_INT32 }"
    "     output_arg { name: 'y' type: DT_FLOAT } output_arg { name: 'j' type: DT_INT32 } }"
    "   node_def { name: 'dbl' op: 'AddV2' input: 'x' input: 'x' " F32 " }"
    "   node_def { name: 'call' op: 'PartitionedCall' input: 'k' input: 'k'"
    "     attr { key: 'Tin' value { list { type: DT_INT32 type: DT_INT32 } } }"
    "     attr { key: 'Tout' value { list { type: DT_INT32 } } }"
    "     attr { key: 'f' value { func { name: 'mul_fn_24' } } } }"
    "   ret { key: 'y' value: 'dbl:z:0' } ret { key: 'j' value: 'call:output:0' } }"
    "  function { signature { name: 'case_branch2_23'"
    "     input_arg { name: 'x' type: DT_FLOAT } input_arg { name: 'k' type: DT_INT32 }"
    "     output_arg { name: 'y' type: DT_FLOAT } output_arg { name: 'j' type: DT_INT32 } }"
    "   " CONST_I32("m1", -1)
    "   node_def { name: 'three' op: 'Const' attr { key: 'dtype' value { type: DT_FLOAT } }"
    "     attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { }"
    "                                          float_val: 3 } } } }"
    "   node_def { name: 'tri' op: 'Mul' input: 'x' input: 'three:output:0' " F32 " }"
    "   node_def { name: 'neg' op: 'Mul' input: 'k' input: 'm1:output:0' " I32 " }"
    "   ret { key: 'y' value: 'tri:z:0' } ret { key: 'j' value: 'neg:z:0' } }"
    "  function { signature { name: 'mul_fn_24' input_arg { name: 'a' type: DT_INT32 }"
    "     input_arg { name: 'b' type: DT_INT32 } output_arg { name: 'product' type: DT_INT32 } }"
    "   node_def { name: 'mul' op: 'Mul' input: 'a' input: 'b' " I32 " }"
    "   ret { key: 'product' value: 'mul:z:0' } }"
    " } }";

/* What TensorFlow computes for CASE_MODEL. */
static void case_reference(int32_t i, float x, int32_t k, float *y, int32_t *j)
{
    int b = i >= 0 && i < 3 ? i : 2;
    *y = b == 0 ? x * x : b == 1 ? x + x : x * 3.0f;
    *j = b == 0 ? k + 1 : b == 1 ? k * k : -k;
}

/* The three branches become library functions (the called mul_fn_24 is inlined into its
 * branch), output_shapes comes back from the registry, and every index -- in range, past the
 * end, negative -- gives the reference's values. */
START_TEST(test_import_stateless_case)
{
    Tensorflow__MetaGraphDef *mg = parse(CASE_MODEL);
    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_msg(tfs__import_graph(mg, &g, &st) == TFS_OK, "%s", st.msg);
    protobuf_c_message_free_unpacked(&mg->base, NULL);
    ck_assert_int_eq(tfs_graph_function_count(g), 3);
    ck_assert(tfs_graph_has_function(g, "case_branch0_21"));
    ck_assert(tfs_graph_has_function(g, "case_branch1_22"));
    ck_assert(tfs_graph_has_function(g, "case_branch2_23"));
    ck_assert(!tfs_graph_has_function(g, "mul_fn_24"));
    const tfs_attr_value *os = tfs_graph_node_attr(g, tfs_graph_find_node(g, "case"),
                                                   "output_shapes");
    ck_assert_ptr_nonnull(os);
    ck_assert_int_eq(os->kind, TFS_ATTR_LIST);
    ck_assert_int_eq(os->list.n, 0);

    tfs_session *s = NULL;
    ck_assert_msg(tfs_session_new(g, NULL, &s, &st) == TFS_OK, "%s", st.msg);
    tfs_graph_unref(g);
    const char *feeds[] = {"i", "x", "k"}, *fetch[] = {"y:0", "j:0"};
    ck_assert_msg(tfs_session_check(s, feeds, 3, fetch, 2, NULL, 0, &st) == TFS_OK, "%s", st.msg);
    static const int32_t idx[] = {0, 1, 2, 3, 7, -1, -100};
    static const float xs[] = {1.5f, -0.25f, 12.0f};
    for (size_t t = 0; t < sizeof idx / sizeof *idx; t++) {
        for (size_t u = 0; u < sizeof xs / sizeof *xs; u++) {
            int32_t k = (int32_t)u * 5 - 4;
            float want_y;
            int32_t want_j;
            case_reference(idx[t], xs[u], k, &want_y, &want_j);
            tfs_tensor *ti, *tx, *tk, *out[2];
            ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT32, &ti, NULL), TFS_OK);
            ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &tx, NULL), TFS_OK);
            ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT32, &tk, NULL), TFS_OK);
            *(int32_t *)ti->data = idx[t];
            *(float *)tx->data = xs[u];
            *(int32_t *)tk->data = k;
            tfs_feed fd[] = {{"i", ti}, {"x", tx}, {"k", tk}};
            ck_assert_msg(tfs_session_run(s, fd, 3, fetch, 2, NULL, 0, out, &st) == TFS_OK,
                          "index %d: %s", idx[t], st.msg);
            ck_assert_msg(*(const float *)out[0]->data == want_y, "index %d x %g: y %g, want %g",
                          idx[t], (double)xs[u], (double)*(const float *)out[0]->data,
                          (double)want_y);
            ck_assert_int_eq(*(const int32_t *)out[1]->data, want_j);
            tfs_tensor_unref(out[0]);
            tfs_tensor_unref(out[1]);
            tfs_tensor_unref(ti);
            tfs_tensor_unref(tx);
            tfs_tensor_unref(tk);
        }
    }
    tfs_session_free(s);
}
END_TEST

/* A Case whose branch takes fewer inputs, or returns more results, than the node passes and
 * expects fails its import, naming the node and the branch. */
START_TEST(test_import_case_branch_wrong_arity)
{
    char *stateful = text_with(CASE_MODEL, "op: 'StatelessCase'", "op: 'Case'");
    expect_error_in(stateful, "name: 'case_branch1_22'     input_arg { name: 'x' type: DT_FLOAT }",
                    "name: 'case_branch1_22'", TFS_INVALID_ARGUMENT,
                    "node 'case' (Case): its branches[1] function 'case_branch1_22' takes 1 inputs",
                    "the node passes 2 and expects 2");
    free(stateful);
    expect_error_in(CASE_MODEL, "output_arg { name: 'j' type: DT_INT32 } }   ",
                    "output_arg { name: 'j' type: DT_INT32 } output_arg { name: 'e' type: "
                    "DT_INT32 } }   ", TFS_INVALID_ARGUMENT,
                    "node 'case' (StatelessCase): its branches[0] function 'case_branch0_21'",
                    "returns 3 results, but the node passes 2 and expects 2");
    /* A branch the library lacks. */
    expect_error_in(CASE_MODEL, "func { name: 'case_branch2_23' }", "func { name: 'nowhere_9' }",
                    TFS_INVALID_ARGUMENT, "node 'case'", "'nowhere_9'");
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
    tcase_add_test(tc, test_import_stateless_case);
    tcase_add_test(tc, test_import_case_branch_wrong_arity);
    suite_add_tcase(s, tc);
    return s;
}
