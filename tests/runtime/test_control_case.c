/* Tests of Case / StatelessCase (runtime/kernels/control.c) and of tf.data's optionals
 * (runtime/kernels/optional.c) through small graphs with library functions: a Case with three
 * branches of two inputs and two outputs run with every branch index, out-of-range and negative
 * ones (TensorFlow runs the last branch), a Case with no inputs, its errors (a non-scalar
 * index, a branch returning the wrong dtype, an unknown branch, a branch with an op tfserve lacks);
 * optionals made, tested and read back (float, string and int32 components, shared not copied),
 * passed out of Case branches, and their errors (reading none, wrong types, counts and shapes, a
 * TensorList where an optional belongs and the reverse). Expected values come from plain C
 * expressions next to each run; every comparison is exact. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_control_case(void);

static tfs_graph *new_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    return g;
}

static void set_types(tfs_graph *g, int id, const char *attr, int n, const enum tfs_dtype *types)
{
    tfs_attr_value v = {.kind = TFS_ATTR_LIST};
    v.list.kind = TFS_ATTR_TYPE;
    v.list.n = n;
    v.list.type = (enum tfs_dtype *)types;
    tfs_graph_set_attr(g, id, attr, &v);
}

/* attr output_shapes: n shapes of the given ranks (-1: unknown), dims from `dims` in order. */
static void set_shapes(tfs_graph *g, int id, int n, const int *ranks, const int64_t *dims)
{
    tfs_shape shapes[4];
    memset(shapes, 0, sizeof shapes);
    for (int i = 0; i < n; i++) {
        shapes[i].rank = ranks[i];
        for (int d = 0; d < ranks[i]; d++)
            shapes[i].dims[d] = *dims++;
    }
    tfs_attr_value v = {.kind = TFS_ATTR_LIST};
    v.list.kind = TFS_ATTR_SHAPE;
    v.list.n = n;
    v.list.shape = shapes;
    tfs_graph_set_attr(g, id, "output_shapes", &v);
}

/* Finalizes body and adds it to g's library, dropping the caller's reference. */
static void add_fn(tfs_graph *g, const char *name, tfs_graph *body, int n_in,
                   const char *const *in, int n_out, const char *const *out)
{
    tfs_status st;
    ck_assert_msg(tfs_graph_finalize(body, &st) == TFS_OK, "body %s: %s", name, st.msg);
    tfs_graph_add_function(g, name, body, n_in, in, n_out, out);
    tfs_graph_unref(body);
}

/* A Case node of type op over index and the n inputs, with Tin, Tout and branches. */
static int add_case(tfs_graph *g, const char *name, const char *op, const char *index, int n,
                    const char *const *in, const enum tfs_dtype *Tin, int n_out,
                    const enum tfs_dtype *Tout, int n_br, const char *const *branches)
{
    int id = tfs_graph_add_node(g, name, op);
    ck_assert_int_ge(id, 0);
    tfs_graph_add_input(g, id, index);
    for (int i = 0; i < n; i++)
        tfs_graph_add_input(g, id, in[i]);
    set_types(g, id, "Tin", n, Tin);
    set_types(g, id, "Tout", n_out, Tout);
    tfs_attr_value v = {.kind = TFS_ATTR_LIST};
    v.list.kind = TFS_ATTR_FUNC;
    v.list.n = n_br;
    v.list.func = (char **)branches;
    tfs_graph_set_attr(g, id, "branches", &v);
    return id;
}

static int32_t scalar_i32(const tfs_tensor *t)
{
    ck_assert_int_eq(t->dtype, TFS_DTYPE_INT32);
    ck_assert_int_eq(t->rank, 0);
    return *(const int32_t *)t->data;
}

static const enum tfs_dtype FI[] = {TFS_DTYPE_FLOAT, TFS_DTYPE_INT32};
static const char *const XY[] = {"x", "y"};

/* Three branches (x: float[3], y: int32) -> (float[3], int32):
 *   b0 = (x + x, y + 1)   b1 = (x * x, y * y)   b2 = (x - 1, -y) */
static void add_branches(tfs_graph *g)
{
    static const char *const ops_f[] = {"AddV2", "Mul", "Sub"};
    static const char *const names[] = {"b0", "b1", "b2"};
    for (int b = 0; b < 3; b++) {
        tfs_graph *body = new_graph();
        rt_placeholder(body, "x", TFS_DTYPE_FLOAT);
        rt_placeholder(body, "y", TFS_DTYPE_INT32);
        rt_const(body, "one", rt_scalar_f32(1.0f));
        int32_t c = b == 0 ? 1 : -1;
        rt_const(body, "c", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &c));
        rt_node(body, "rx", ops_f[b], "x", b == 2 ? "one" : "x", TFS_DTYPE_FLOAT);
        rt_node(body, "ry", b == 0 ? "AddV2" : "Mul", "y", b == 1 ? "y" : "c", TFS_DTYPE_INT32);
        add_fn(g, names[b], body, 2, XY, 2, (const char *const[]){"rx:0", "ry"});
    }
}

static const char *const B3[] = {"b0", "b1", "b2"};

/* Every branch index: 0..2 run their branch; 3, 100, -1, -7 and INT32_MIN run b2, as in
 * TensorFlow; Case and StatelessCase alike, each index run twice (the second run on the memory
 * plan the first learned). */
START_TEST(test_case_picks_each_branch)
{
    for (int op = 0; op < 2; op++) {
        tfs_graph *g = new_graph();
        add_branches(g);
        rt_placeholder(g, "i", TFS_DTYPE_INT32);
        rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
        rt_placeholder(g, "y", TFS_DTYPE_INT32);
        add_case(g, "case", op ? "Case" : "StatelessCase", "i", 2, XY, FI, 2, FI, 3, B3);
        tfs_session *s = rt_session(g, NULL);
        static const int32_t idx[] = {0, 1, 2, 3, 100, -1, -7, INT32_MIN};
        const float xv[3] = {1.5f, -2.0f, 3.0f};
        const int32_t yv = 7;
        for (size_t t = 0; t < sizeof idx / sizeof *idx; t++) {
            int32_t b = idx[t] >= 0 && idx[t] < 3 ? idx[t] : 2;
            float want[3];
            for (int e = 0; e < 3; e++)
                want[e] = b == 0 ? xv[e] + xv[e] : b == 1 ? xv[e] * xv[e] : xv[e] - 1.0f;
            int32_t want_y = b == 0 ? yv + 1 : b == 1 ? yv * yv : -yv;
            tfs_tensor *ti = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &idx[t]);
            tfs_tensor *tx = rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){3}, xv);
            tfs_tensor *ty = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &yv);
            tfs_feed feeds[] = {{"i", ti}, {"x", tx}, {"y", ty}};
            const char *fetch[] = {"case:0", "case:1"};
            tfs_tensor *out[2];
            tfs_status st;
            ck_assert_msg(rt_run_twice(s, op ? "Case" : "StatelessCase", feeds, 3, fetch, 2, out,
                                       &st) == TFS_OK, "index %d: %s", idx[t], st.msg);
            tfs_test_assert_f32(out[0], 1, (const int64_t[]){3}, want, 0);
            ck_assert_int_eq(scalar_i32(out[1]), want_y);
            for (int i = 0; i < 2; i++)
                tfs_tensor_unref(out[i]);
            tfs_tensor_unref(ti);
            tfs_tensor_unref(tx);
            tfs_tensor_unref(ty);
        }
        tfs_session_free(s);
    }
}
END_TEST

/* Branches without inputs (a tf.switch_case of constants), one branch only: every index runs it. */
START_TEST(test_case_no_inputs_and_one_branch)
{
    tfs_graph *g = new_graph();
    for (int b = 0; b < 2; b++) {
        tfs_graph *body = new_graph();
        int32_t v = 10 * (b + 1);
        rt_const(body, "v", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &v));
        add_fn(g, b ? "k20" : "k10", body, 0, NULL, 1, (const char *const[]){"v"});
    }
    static const enum tfs_dtype I[] = {TFS_DTYPE_INT32};
    rt_placeholder(g, "i", TFS_DTYPE_INT32);
    add_case(g, "two", "StatelessCase", "i", 0, NULL, NULL, 1, I, 2,
             (const char *const[]){"k10", "k20"});
    add_case(g, "one", "StatelessCase", "i", 0, NULL, NULL, 1, I, 1,
             (const char *const[]){"k20"});
    tfs_session *s = rt_session(g, NULL);
    for (int32_t i = -2; i <= 3; i++) {
        tfs_tensor *ti = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &i);
        tfs_feed feed = {"i", ti};
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_msg(rt_run1(s, &feed, 1, "two:0", &out, &st) == TFS_OK, "%s", st.msg);
        ck_assert_int_eq(scalar_i32(out), i == 0 ? 10 : 20);
        tfs_tensor_unref(out);
        ck_assert_msg(rt_run1(s, &feed, 1, "one:0", &out, &st) == TFS_OK, "%s", st.msg);
        ck_assert_int_eq(scalar_i32(out), 20);
        tfs_tensor_unref(out);
        tfs_tensor_unref(ti);
    }
    tfs_session_free(s);
}
END_TEST

/* A vector index, a branch whose result is not what Tout says, a branch the library lacks and a
 * branch using an op without a kernel: each error names the node (and the branch). */
START_TEST(test_case_errors)
{
    tfs_graph *g = new_graph();
    add_branches(g);
    tfs_graph *nk = new_graph();
    rt_placeholder(nk, "x", TFS_DTYPE_FLOAT);
    rt_placeholder(nk, "y", TFS_DTYPE_INT32);
    rt_node(nk, "r", "NoSuchOpInBranch", "x", NULL, TFS_DTYPE_FLOAT);
    add_fn(g, "nokernel", nk, 2, XY, 2, (const char *const[]){"r", "y"});
    rt_const(g, "vec", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){1}, (const int32_t[]){0}));
    int32_t one = 1;
    rt_const(g, "idx1", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &one));
    rt_const(g, "x", rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){3}, NULL));
    rt_const(g, "y", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &one));
    add_case(g, "vec_index", "StatelessCase", "vec", 2, XY, FI, 2, FI, 3, B3);
    /* b1 returns (float, int32); this node says (int32, float) */
    add_case(g, "bad_tout", "StatelessCase", "idx1", 2, XY, FI, 2,
             (const enum tfs_dtype[]){TFS_DTYPE_INT32, TFS_DTYPE_FLOAT}, 3, B3);
    add_case(g, "unknown", "Case", "idx1", 2, XY, FI, 2, FI, 2,
             (const char *const[]){"b0", "no_such_branch"});
    add_case(g, "missing_op", "Case", "idx1", 2, XY, FI, 2, FI, 2,
             (const char *const[]){"b0", "nokernel"});
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "vec_index:0", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'vec_index'");
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "branch_index must be an int32 scalar");
    ck_assert_int_eq(rt_run1(s, NULL, 0, "bad_tout:0", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'bad_tout'");
    rt_assert_err(st, TFS_INVALID_ARGUMENT,
                  "result 0 has dtype DT_FLOAT, but attr 'Tout' says DT_INT32");
    ck_assert_ptr_null(out);

    const char *fetch = "unknown:0";
    ck_assert_int_eq(tfs_session_check(s, NULL, 0, &fetch, 1, NULL, 0, &st), TFS_NOT_FOUND);
    rt_assert_err(st, TFS_NOT_FOUND, "node 'unknown'");
    rt_assert_err(st, TFS_NOT_FOUND, "'no_such_branch'");
    ck_assert_int_eq(rt_run1(s, NULL, 0, fetch, &out, &st), TFS_NOT_FOUND);
    rt_assert_err(st, TFS_NOT_FOUND, "no_such_branch");

    fetch = "missing_op:0";
    const char **ops = NULL;
    int n_ops = 0;
    ck_assert_int_eq(tfs_session_missing_ops(s, NULL, 0, &fetch, 1, NULL, 0, &ops, &n_ops, &st),
                     TFS_OK);
    ck_assert_int_eq(n_ops, 1);
    ck_assert_str_eq(ops[0], "NoSuchOpInBranch");
    tfs_free(ops);
    ck_assert_int_eq(tfs_session_check(s, NULL, 0, &fetch, 1, NULL, 0, &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "NoSuchOpInBranch");
    tfs_session_free(s);
}
END_TEST

/* ---- optionals ------------------------------------------------------------------------------- */

/* FromValue(x, s, n) -> HasValue true -> GetValue gives the very tensors back; None -> false. */
START_TEST(test_optional_round_trip)
{
    static const enum tfs_dtype T3[] = {TFS_DTYPE_FLOAT, TFS_DTYPE_STRING, TFS_DTYPE_INT32};
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "s", TFS_DTYPE_STRING);
    rt_placeholder(g, "n", TFS_DTYPE_INT32);
    int fv = tfs_graph_add_node(g, "opt", "OptionalFromValue");
    tfs_graph_add_input(g, fv, "x");
    tfs_graph_add_input(g, fv, "s");
    tfs_graph_add_input(g, fv, "n");
    set_types(g, fv, "Toutput_types", 3, T3);
    int hv = tfs_graph_add_node(g, "has", "OptionalHasValue");
    tfs_graph_add_input(g, hv, "opt");
    int gv = tfs_graph_add_node(g, "get", "OptionalGetValue");
    tfs_graph_add_input(g, gv, "opt");
    set_types(g, gv, "output_types", 3, T3);
    set_shapes(g, gv, 3, (const int[]){2, 1, 0}, (const int64_t[]){-1, 2, 2});
    tfs_graph_add_node(g, "none", "OptionalNone");
    int hn = tfs_graph_add_node(g, "has_none", "OptionalHasValue");
    tfs_graph_add_input(g, hn, "none");
    tfs_session *s = rt_session(g, NULL);

    const float xv[] = {1, 2, 3, 4};
    int32_t nv = -42;
    tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 2, (const int64_t[]){2, 2}, xv);
    tfs_tensor *str = rt_strings(2, (const char *const[]){"tf.data", ""});
    tfs_tensor *n = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &nv);
    tfs_feed feeds[] = {{"x", x}, {"s", str}, {"n", n}};
    const char *fetch[] = {"has:0", "get:0", "get:1", "get:2", "has_none:0", "opt:0"};
    tfs_tensor *out[6];
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, feeds, 3, fetch, 6, NULL, 0, out, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(out[0]->dtype, TFS_DTYPE_BOOL);
    ck_assert_int_eq(out[0]->rank, 0);
    ck_assert_int_eq(*(const uint8_t *)out[0]->data, 1);
    ck_assert_ptr_eq(out[1], x);   /* the components themselves, shared */
    ck_assert_ptr_eq(out[2], str);
    ck_assert_ptr_eq(out[3], n);
    rt_assert_same(out[2], str, "string component");
    ck_assert_int_eq(*(const uint8_t *)out[4]->data, 0);
    ck_assert_int_eq(out[5]->dtype, TFS_DTYPE_VARIANT);
    ck_assert_int_eq(out[5]->rank, 0);
    for (int i = 0; i < 6; i++)
        tfs_tensor_unref(out[i]);   /* the fetched optional goes last here: frees its components */
    tfs_tensor_unref(x);
    tfs_tensor_unref(str);
    tfs_tensor_unref(n);
    tfs_session_free(s);
}
END_TEST

/* A Case whose branches return Some(x * 2) or None, the way get_next_as_optional's consumers
 * branch: the optional crosses a function boundary both ways and is read outside. */
START_TEST(test_optional_from_case_branches)
{
    static const enum tfs_dtype F1[] = {TFS_DTYPE_FLOAT};
    static const enum tfs_dtype V1[] = {TFS_DTYPE_VARIANT};
    tfs_graph *g = new_graph();
    tfs_graph *some = new_graph();
    rt_placeholder(some, "x", TFS_DTYPE_FLOAT);
    rt_node(some, "x2", "AddV2", "x", "x", TFS_DTYPE_FLOAT);
    int fv = tfs_graph_add_node(some, "opt", "OptionalFromValue");
    tfs_graph_add_input(some, fv, "x2");
    set_types(some, fv, "Toutput_types", 1, F1);
    add_fn(g, "some", some, 1, (const char *const[]){"x"}, 1, (const char *const[]){"opt"});
    tfs_graph *none = new_graph();
    rt_placeholder(none, "x", TFS_DTYPE_FLOAT);
    tfs_graph_add_node(none, "opt", "OptionalNone");
    add_fn(g, "none", none, 1, (const char *const[]){"x"}, 1, (const char *const[]){"opt"});
    rt_placeholder(g, "i", TFS_DTYPE_INT32);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    add_case(g, "case", "StatelessCase", "i", 1, (const char *const[]){"x"}, F1, 1, V1, 2,
             (const char *const[]){"some", "none"});
    int hv = tfs_graph_add_node(g, "has", "OptionalHasValue");
    tfs_graph_add_input(g, hv, "case");
    int gv = tfs_graph_add_node(g, "get", "OptionalGetValue");
    tfs_graph_add_input(g, gv, "case");
    set_types(g, gv, "output_types", 1, F1);
    set_shapes(g, gv, 1, (const int[]){-1}, NULL);
    tfs_session *s = rt_session(g, NULL);
    const float xv[] = {0.25f, -3.0f};
    for (int32_t i = 0; i < 2; i++) {
        tfs_tensor *ti = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &i);
        tfs_tensor *tx = rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){2}, xv);
        tfs_feed feeds[] = {{"i", ti}, {"x", tx}};
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_msg(rt_run1(s, feeds, 2, "has:0", &out, &st) == TFS_OK, "%s", st.msg);
        ck_assert_int_eq(*(const uint8_t *)out->data, i == 0);
        tfs_tensor_unref(out);
        out = NULL;
        if (i == 0) {
            ck_assert_msg(rt_run1(s, feeds, 2, "get:0", &out, &st) == TFS_OK, "%s", st.msg);
            tfs_test_assert_f32(out, 1, (const int64_t[]){2},
                                (const float[]){xv[0] + xv[0], xv[1] + xv[1]}, 0);
            tfs_tensor_unref(out);
        } else {
            ck_assert_int_eq(rt_run1(s, feeds, 2, "get:0", &out, &st), TFS_INVALID_ARGUMENT);
            rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'get' (OptionalGetValue)");
            rt_assert_err(st, TFS_INVALID_ARGUMENT, "The optional does not have a value");
            ck_assert_ptr_null(out);
        }
        tfs_tensor_unref(ti);
        tfs_tensor_unref(tx);
    }
    tfs_session_free(s);
}
END_TEST

static void run_err(tfs_session *s, const char *fetch, const char *node, const char *needle)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, NULL, 0, fetch, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, node);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, needle);
    ck_assert_ptr_null(out);
}

/* GetValue of none; GetValue whose output_types differ from the components in dtype or count,
 * or whose output_shapes do not fit; FromValue whose Toutput_types do not match its inputs; an
 * optional where a TensorList belongs and a TensorList where an optional belongs. */
START_TEST(test_optional_errors)
{
    static const enum tfs_dtype F1[] = {TFS_DTYPE_FLOAT};
    static const enum tfs_dtype I1[] = {TFS_DTYPE_INT32};
    static const enum tfs_dtype F2[] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    tfs_graph *g = new_graph();
    rt_const(g, "x", rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){3}, NULL));
    int fv = tfs_graph_add_node(g, "opt", "OptionalFromValue");
    tfs_graph_add_input(g, fv, "x");
    set_types(g, fv, "Toutput_types", 1, F1);
    tfs_graph_add_node(g, "none", "OptionalNone");
    struct {
        const char *name, *input;
        int n;
        const enum tfs_dtype *types;
        int rank;
        int64_t dim;
    } gets[] = {
        {"get_none", "none", 1, F1, -1, 0},
        {"get_int", "opt", 1, I1, -1, 0},
        {"get_two", "opt", 2, F2, -1, 0},
        {"get_shape", "opt", 1, F1, 1, 4},
        {"get_rank", "opt", 1, F1, 0, 0},
    };
    for (size_t i = 0; i < sizeof gets / sizeof *gets; i++) {
        int id = tfs_graph_add_node(g, gets[i].name, "OptionalGetValue");
        tfs_graph_add_input(g, id, gets[i].input);
        set_types(g, id, "output_types", gets[i].n, gets[i].types);
        int ranks[2] = {gets[i].rank, gets[i].rank};
        int64_t dims[2] = {gets[i].dim, gets[i].dim};
        set_shapes(g, id, gets[i].n, ranks, dims);
    }
    int bad = tfs_graph_add_node(g, "bad_from", "OptionalFromValue");
    tfs_graph_add_input(g, bad, "x");
    set_types(g, bad, "Toutput_types", 1, I1);
    int32_t three = 3, m1 = -1;
    rt_const(g, "three", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &three));
    rt_const(g, "any", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &m1));
    int rs = tfs_graph_add_node(g, "list", "TensorListReserve");
    tfs_graph_add_input(g, rs, "any");
    tfs_graph_add_input(g, rs, "three");
    tfs_graph_set_attr_type(g, rs, "element_dtype", TFS_DTYPE_FLOAT);
    int hl = tfs_graph_add_node(g, "has_list", "OptionalHasValue");
    tfs_graph_add_input(g, hl, "list");
    int ln = tfs_graph_add_node(g, "len_opt", "TensorListLength");
    tfs_graph_add_input(g, ln, "opt");
    int hx = tfs_graph_add_node(g, "has_float", "OptionalHasValue");
    tfs_graph_add_input(g, hx, "x");
    tfs_session *s = rt_session(g, NULL);

    run_err(s, "get_none:0", "node 'get_none'", "The optional does not have a value");
    run_err(s, "get_int:0", "node 'get_int'", "component 0 of the optional has dtype float, "
            "expected int32");
    run_err(s, "get_two:0", "node 'get_two'", "has 1 components, expected 2");
    run_err(s, "get_shape:0", "node 'get_shape'", "shape [3], expected [4]");
    run_err(s, "get_rank:0", "node 'get_rank'", "shape [3], expected []");
    run_err(s, "bad_from:0", "node 'bad_from'", "component 0 has dtype float");
    run_err(s, "has_list:0", "node 'has_list'", "is not an optional");
    run_err(s, "len_opt:0", "node 'len_opt'", "is not a TensorList");
    run_err(s, "has_float:0", "node 'has_float'", "is not an optional");
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_control_case(void)
{
    Suite *s = suite_create("runtime_control_case");
    TCase *tc = tcase_create("case");
    tcase_add_test(tc, test_case_picks_each_branch);
    tcase_add_test(tc, test_case_no_inputs_and_one_branch);
    tcase_add_test(tc, test_case_errors);
    tcase_add_test(tc, test_optional_round_trip);
    tcase_add_test(tc, test_optional_from_case_branches);
    tcase_add_test(tc, test_optional_errors);
    suite_add_tcase(s, tc);
    return s;
}
