/* Tests of runtime/graph.c and runtime/ops.c: building, sticky errors, finalize (input resolution,
 * output counts), attribute copies, tensor-name parsing and op lookup. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_graph(void);

START_TEST(test_graph_build_and_read)
{
    tfs_graph *g;
    tfs_status st;
    ck_assert_int_eq(tfs_graph_new(&g, &st), TFS_OK);
    int x = rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    int c = rt_const(g, "c", rt_scalar_f32(2));
    int y = rt_node(g, "y", "Mul", "x", "c:0", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, y, "^x");
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_OK);

    ck_assert_int_eq(tfs_graph_node_count(g), 3);
    ck_assert_int_eq(tfs_graph_find_node(g, "y"), y);
    ck_assert_int_eq(tfs_graph_find_node(g, "nope"), -1);
    ck_assert_str_eq(tfs_graph_node_name(g, c), "c");
    ck_assert_str_eq(tfs_graph_node_op(g, y), "Mul");
    ck_assert_int_eq(tfs_graph_node_input_count(g, y), 3);
    ck_assert_str_eq(tfs_graph_node_input(g, y, 1), "c:0");
    ck_assert_ptr_null(tfs_graph_node_input(g, y, 3));
    ck_assert_ptr_null(tfs_graph_node_name(g, 99));

    const tfs_node *n = tfs__graph_node(g, y);
    ck_assert_int_eq(n->n_inputs, 2);
    ck_assert_int_eq(n->inputs[0].node, x);
    ck_assert_int_eq(n->inputs[1].node, c);
    ck_assert_int_eq(n->inputs[1].index, 0);
    ck_assert_int_eq(n->n_ctrl, 1);
    ck_assert_int_eq(n->ctrl[0], x);
    ck_assert_int_eq(n->n_outputs, 1);
    ck_assert_ptr_eq(n->op, tfs__op_lookup("Mul"));

    const tfs_attr_value *T = tfs_graph_node_attr(g, y, "T");
    ck_assert_ptr_nonnull(T);
    ck_assert_int_eq(T->kind, TFS_ATTR_TYPE);
    ck_assert_int_eq(T->type, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_graph_node_attr_count(g, c), 2);
    ck_assert_str_eq(tfs_graph_node_attr_name(g, c, 0), "value");
    ck_assert_int_eq(tfs_graph_node_attr_at(g, c, 0)->kind, TFS_ATTR_TENSOR);
    ck_assert_ptr_null(tfs_graph_node_attr(g, c, "missing"));
    /* Finalize is idempotent. */
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_OK);
    ck_assert_ptr_eq(tfs_graph_ref(g), g);
    tfs_graph_unref(g);
    tfs_graph_unref(g);
    tfs_graph_unref(NULL);
}
END_TEST

START_TEST(test_graph_duplicate_name_is_sticky)
{
    tfs_graph *g;
    tfs_status st;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_graph_add_node(g, "x", "Identity"), -1);
    /* Later builder calls are no-ops; the first error is what finalize reports. */
    ck_assert_int_eq(tfs_graph_add_node(g, "z", "Identity"), -1);
    tfs_graph_add_input(g, -1, "x");
    tfs_graph_set_error(g, TFS_INTERNAL, "second error");
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "duplicate node name 'x'");
    ck_assert_int_eq(tfs_graph_node_count(g), 1);
    tfs_graph_unref(g);

    tfs_graph_new(&g, NULL);
    ck_assert_int_eq(tfs_graph_add_node(g, "", "NoOp"), -1);
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_graph_unknown_input)
{
    tfs_graph *g;
    tfs_status st;
    tfs_graph_new(&g, NULL);
    rt_node(g, "y", "Identity", "z:1", NULL, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "node 'y': input 'z:1' not found");
    /* A failed finalize stays failed. */
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_NOT_FOUND);
    tfs_graph_unref(g);

    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Identity", "x:", NULL, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'y': malformed input 'x:'");
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_graph_output_index_checks)
{
    tfs_graph *g;
    tfs_status st;
    /* Placeholder has one output: x:1 does not exist. */
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Identity", "x:1", NULL, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "node 'y': input 'x:1' refers to output 1"));
    tfs_graph_unref(g);

    /* An op tfserve does not know: any index is accepted, and its output count is unknown. */
    tfs_graph_new(&g, NULL);
    int u = tfs_graph_add_node(g, "u", "SomeCustomOp");
    rt_node(g, "y", "Identity", "u:5", NULL, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_OK);
    ck_assert_int_eq(tfs__graph_node(g, u)->n_outputs, -1);
    ck_assert_ptr_null(tfs__graph_node(g, u)->op);
    tfs_graph_unref(g);

    /* IdentityN has len(T) outputs; NoOp none; without T the count cannot be known. */
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "a", TFS_DTYPE_FLOAT);
    int idn = rt_node(g, "idn", "IdentityN", "a", "a", TFS_DTYPE_INVALID);
    enum tfs_dtype types[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    tfs_attr_value v = {.kind = TFS_ATTR_LIST};
    v.list.kind = TFS_ATTR_TYPE;
    v.list.n = 2;
    v.list.type = types;
    tfs_graph_set_attr(g, idn, "T", &v);
    int nop = tfs_graph_add_node(g, "nop", "NoOp");
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_OK);
    ck_assert_int_eq(tfs__graph_node(g, idn)->n_outputs, 2);
    ck_assert_int_eq(tfs__graph_node(g, nop)->n_outputs, 0);
    tfs_graph_unref(g);

    tfs_graph_new(&g, NULL);
    tfs_graph_add_node(g, "idn", "IdentityN");
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "node 'idn' (IdentityN)"));
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_graph_attrs_are_deep_copies)
{
    int64_t base = tfs_alloc_bytes_in_use();
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int n = tfs_graph_add_node(g, "n", "NoOp");
    char text[] = "hello";
    tfs_graph_set_attr_string(g, n, "s", text);
    text[0] = 'j';
    tfs_string strs[2] = {{3, "abc"}, {0, NULL}};
    tfs_attr_value lv = {.kind = TFS_ATTR_LIST};
    lv.list.kind = TFS_ATTR_S;
    lv.list.n = 2;
    lv.list.s = strs;
    tfs_graph_set_attr(g, n, "ls", &lv);
    tfs_tensor *t = rt_scalar_f32(1.5f);
    tfs_graph_set_attr_tensor(g, n, "t", t);
    ck_assert_int_eq(atomic_load(&t->refs), 2);   /* the graph keeps a reference */
    tfs_shape sh = {2, {-1, 3}};
    tfs_graph_set_attr_shape(g, n, "shape", &sh);
    tfs_graph_set_attr_int(g, n, "i", 4);
    tfs_graph_set_attr_int(g, n, "i", 5);   /* replaces */
    tfs_graph_set_attr_float(g, n, "f", 0.25f);
    tfs_graph_set_attr_bool(g, n, "b", true);
    tfs_attr_value empty = {.kind = TFS_ATTR_LIST};
    tfs_graph_set_attr(g, n, "empty", &empty);
    ck_assert_int_eq(tfs_graph_finalize(g, NULL), TFS_OK);

    const tfs_node *nd = tfs__graph_node(g, n);
    ck_assert_str_eq(tfs__attr_str(nd, "s", NULL), "hello");
    ck_assert_str_eq(tfs__attr_str(nd, "missing", "dflt"), "dflt");
    const tfs_attr_list *l;
    ck_assert_int_eq(tfs__attr_list(nd, "ls", TFS_ATTR_S, &l, NULL), TFS_OK);
    ck_assert_int_eq(l->n, 2);
    ck_assert_ptr_ne(l->s[0].data, strs[0].data);
    ck_assert_int_eq(memcmp(l->s[0].data, "abc", 3), 0);
    ck_assert_uint_eq(l->s[1].len, 0);
    ck_assert_int_eq(tfs__attr_list(nd, "empty", TFS_ATTR_TYPE, &l, NULL), TFS_OK);
    ck_assert_int_eq(l->n, 0);
    int64_t i;
    ck_assert_int_eq(tfs__attr_int(nd, "i", &i, NULL), TFS_OK);
    ck_assert_int_eq(i, 5);
    ck_assert_int_eq(tfs_graph_node_attr_count(g, n), 8);
    bool b;
    ck_assert_int_eq(tfs__attr_bool(nd, "b", &b, NULL), TFS_OK);
    ck_assert(b);
    ck_assert_int_eq(tfs__attr(nd, "shape")->shape.dims[1], 3);
    ck_assert_float_eq(tfs__attr(nd, "f")->f, 0.25f);

    tfs_status st;
    enum tfs_dtype dt;
    ck_assert_int_eq(tfs__attr_type(nd, "i", &dt, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'n' (NoOp): attr 'i' has kind int, expected type");
    ck_assert_int_eq(tfs__attr_type(nd, "T", &dt, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'n' (NoOp): missing attr 'T'");

    tfs_graph_unref(g);
    ck_assert_int_eq(atomic_load(&t->refs), 1);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

START_TEST(test_graph_tensor_name_parse)
{
    char name[16];
    int idx;
    bool ctrl;
    ck_assert(tfs_tensor_name_parse("x", name, sizeof name, &idx, &ctrl));
    ck_assert_str_eq(name, "x");
    ck_assert_int_eq(idx, 0);
    ck_assert(!ctrl);
    ck_assert(tfs_tensor_name_parse("scope/op:12", name, sizeof name, &idx, &ctrl));
    ck_assert_str_eq(name, "scope/op");
    ck_assert_int_eq(idx, 12);
    ck_assert(tfs_tensor_name_parse("^init", name, sizeof name, &idx, &ctrl));
    ck_assert_str_eq(name, "init");
    ck_assert(ctrl);
    ck_assert(!tfs_tensor_name_parse("", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse("^", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse(":1", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse("x:", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse("x:-1", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse("x:1a", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse("x:99999999999", name, sizeof name, &idx, &ctrl));
    ck_assert(!tfs_tensor_name_parse("a_name_too_long_for_16", name, sizeof name, &idx, &ctrl));
}
END_TEST

START_TEST(test_graph_op_table)
{
    ck_assert(tfs_op_is_supported("Mul"));
    ck_assert(tfs_op_is_supported("VariableV2"));
    ck_assert(tfs_op_is_supported("ParseExampleV2"));
    ck_assert(!tfs_op_is_supported("CustomConv"));
    ck_assert(!tfs_op_is_supported(NULL));
    ck_assert_ptr_eq(tfs__op_lookup("AddV2"), &tfs__ops[TFS_OP_ADD_V2]);
    ck_assert_str_eq(tfs__ops[TFS_OP_CAST].name, "Cast");
    ck_assert(tfs__ops[TFS_OP_ASSIGN].flags & TFS_OPF_REF_INPUTS);
    for (int i = 0; i < TFS_OP_COUNT; i++) {
        ck_assert_ptr_nonnull(tfs__ops[i].name);
        ck_assert_ptr_nonnull(tfs__ops[i].kernel);
    }
}
END_TEST

START_TEST(test_graph_many_nodes)
{
    /* Enough nodes to grow the node array and the name table several times. */
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    char name[32], prev[32];
    rt_placeholder(g, "n0", TFS_DTYPE_FLOAT);
    for (int i = 1; i < 2000; i++) {
        snprintf(name, sizeof name, "n%d", i);
        snprintf(prev, sizeof prev, "n%d", i - 1);
        rt_node(g, name, "Identity", prev, NULL, TFS_DTYPE_FLOAT);
    }
    ck_assert_int_eq(tfs_graph_finalize(g, NULL), TFS_OK);
    for (int i = 0; i < 2000; i += 97) {
        snprintf(name, sizeof name, "n%d", i);
        ck_assert_int_eq(tfs_graph_find_node(g, name), i);
    }
    tfs_graph_unref(g);
}
END_TEST

/* Building under allocation failure: each failure surfaces once, at finalize, as
 * RESOURCE_EXHAUSTED, and freeing the failed graph releases everything. */
START_TEST(test_graph_build_under_allocation_failures)
{
    int64_t base = tfs_alloc_bytes_in_use();
    for (int n = 1;; n++) {
        tfs_alloc_fail_after(n);
        tfs_graph *g = NULL;
        tfs_status st;
        enum tfs_code rc = tfs_graph_new(&g, &st);
        if (rc == TFS_OK) {
            tfs_graph_add_node(g, "x", "Placeholder");
            int c = tfs_graph_add_node(g, "c", "Const");
            tfs_graph_set_attr_string(g, c, "note", "text");
            tfs_graph_add_node(g, "y", "Mul");
            tfs_graph_add_input(g, tfs_graph_find_node(g, "y"), "x");
            tfs_graph_add_input(g, tfs_graph_find_node(g, "y"), "c");
            rc = tfs_graph_finalize(g, &st);
        }
        tfs_alloc_fail_after(0);
        tfs_graph_unref(g);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
        if (rc == TFS_OK)
            break;
        ck_assert_msg(rc == TFS_RESOURCE_EXHAUSTED, "n=%d: %s", n, st.msg);
    }
}
END_TEST

/* The op registry's parser reads TensorFlow's REGISTER_OP syntax (runtime/ops.def). */
START_TEST(test_op_signature_parse)
{
    tfs_op_signature *sig;
    tfs_status st;
    ck_assert_int_eq(tfs_op_signature_parse(
                         "ConcatV2", "values: N * T, axis: Tidx -> output: T; N: int >= 2; "
                         "T: type; Tidx: {int32, int64} = int32; s: list(shape) = [?, [2, -1]]; "
                         "p: {'SAME', 'VALID'} = 'SAME'; f: float = 0.0001; r: list(int) = []",
                         &sig, &st), TFS_OK);
    ck_assert_int_eq(sig->n_inputs, 2);
    ck_assert_str_eq(sig->inputs[0].number_attr, "N");
    ck_assert_str_eq(sig->inputs[0].type_attr, "T");
    ck_assert_str_eq(sig->inputs[1].type_attr, "Tidx");
    ck_assert_int_eq(sig->n_outputs, 1);
    ck_assert_int_eq(sig->n_attrs, 7);
    ck_assert(sig->attrs[0].has_minimum && sig->attrs[0].minimum == 2);
    const tfs_op_attr *tidx = tfs_op_signature_attr(sig, "Tidx");
    ck_assert_str_eq(tidx->type, "type");
    ck_assert(tidx->has_default && tidx->default_value.type == TFS_DTYPE_INT32);
    ck_assert_int_eq(tidx->allowed_values.list.n, 2);
    ck_assert_int_eq(tidx->allowed_values.list.type[1], TFS_DTYPE_INT64);
    const tfs_op_attr *s = tfs_op_signature_attr(sig, "s");
    ck_assert_str_eq(s->type, "list(shape)");
    ck_assert_int_eq(s->default_value.list.n, 2);
    ck_assert_int_eq(s->default_value.list.shape[0].rank, -1);
    ck_assert_int_eq(s->default_value.list.shape[1].rank, 2);
    ck_assert_int_eq(s->default_value.list.shape[1].dims[1], -1);
    const tfs_op_attr *p = tfs_op_signature_attr(sig, "p");
    ck_assert_str_eq(p->type, "string");
    ck_assert_str_eq(p->default_value.s.data, "SAME");
    ck_assert_int_eq(p->allowed_values.list.n, 2);
    ck_assert(tfs_op_signature_attr(sig, "f")->default_value.f == 0.0001f);
    ck_assert_int_eq(tfs_op_signature_attr(sig, "r")->default_value.list.n, 0);
    tfs_op_signature_free(sig);

    /* A list(type) attr makes a type-list argument; Ref() a reference; a dtype a fixed type. */
    ck_assert_int_eq(tfs_op_signature_parse("X", "a: Ref(T), b: resource -> c: Tl; T: type; "
                                                 "Tl: list(type) >= 0", &sig, &st), TFS_OK);
    ck_assert(sig->inputs[0].is_ref);
    ck_assert_int_eq(sig->inputs[1].type, TFS_DTYPE_RESOURCE);
    ck_assert_str_eq(sig->outputs[0].type_list_attr, "Tl");
    tfs_op_signature_free(sig);
    ck_assert_int_eq(tfs_op_signature_parse("NoOp", "->", &sig, &st), TFS_OK);
    ck_assert_int_eq(sig->n_inputs + sig->n_outputs + sig->n_attrs, 0);
    tfs_op_signature_free(sig);
}
END_TEST

START_TEST(test_op_signature_parse_errors)
{
    static const char *const bad[] = {
        "",                             /* no arrow */
        "x: T -> y: T",                 /* T is neither an attr nor a dtype */
        "x: N * float -> ; N: float",   /* a count that is not an int attr */
        "-> y: float; T: {float, nope}", "-> ; p: {'SAME', 'VALID'", "-> ; s: string = 'open",
        "-> ; b: bool = maybe", "-> ; t: tensor = 1", "-> ; i: int = 99999999999999999999",
        "-> ; a: int; a: int", "-> ; s: shape = [1, 2, 3, 4, 5, 6, 7, 8, 9]", "-> y: float junk",
        "-> ; l: list(int) = [1, 2", "x -> y"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tfs_op_signature *sig = (tfs_op_signature *)1;
        tfs_status st;
        ck_assert_msg(tfs_op_signature_parse("Bad", bad[i], &sig, &st) == TFS_INVALID_ARGUMENT,
                      "accepted \"%s\"", bad[i]);
        ck_assert_ptr_null(sig);
        ck_assert_msg(strstr(st.msg, "op Bad signature") != NULL, "%s", st.msg);
    }
}
END_TEST

/* Every entry of ops.def parses and is found by its op type; ops outside the table are not. */
START_TEST(test_op_signature_table)
{
    for (int i = 0; i < tfs_op_signature_count(); i++) {
        const tfs_op_signature *sig = tfs_op_signature_at(i);
        ck_assert_msg(sig != NULL, "ops.def entry %d does not parse", i);
        ck_assert_ptr_eq(tfs_op_signature_find(sig->name), sig);
    }
    ck_assert_ptr_null(tfs_op_signature_find("StringJoin"));
    const tfs_op_signature *mm = tfs_op_signature_find("MatMul");
    ck_assert_str_eq(mm->outputs[0].name, "product");
    ck_assert(!tfs_op_signature_attr(mm, "transpose_a")->default_value.b);
}
END_TEST

Suite *suite_runtime_graph(void)
{
    Suite *s = suite_create("runtime_graph");
    TCase *tc = tcase_create("build");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_graph_build_and_read);
    tcase_add_test(tc, test_graph_duplicate_name_is_sticky);
    tcase_add_test(tc, test_graph_attrs_are_deep_copies);
    tcase_add_test(tc, test_graph_many_nodes);
    tcase_add_test(tc, test_graph_build_under_allocation_failures);
    tcase_add_test(tc, test_op_signature_parse);
    tcase_add_test(tc, test_op_signature_parse_errors);
    tcase_add_test(tc, test_op_signature_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("finalize");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_graph_unknown_input);
    tcase_add_test(tc, test_graph_output_index_checks);
    tcase_add_test(tc, test_graph_tensor_name_parse);
    tcase_add_test(tc, test_graph_op_table);
    suite_add_tcase(s, tc);
    return s;
}
