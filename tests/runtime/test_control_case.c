/* Tests of Case / StatelessCase (runtime/kernels/control.c) through small graphs with library
 * functions: a Case with three branches of two inputs and two outputs run with every branch
 * index, out-of-range and negative ones (TensorFlow runs the last branch), a Case with no inputs,
 * its errors (a non-scalar index, a branch returning the wrong dtype, an unknown branch, a branch
 * with an op tfserve lacks). Expected values come from plain C expressions next to each run;
 * every comparison is exact. */
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
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "result 0 has dtype DT_FLOAT, but attr 'Tout' says DT_INT32");
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

Suite *suite_runtime_control_case(void)
{
    Suite *s = suite_create("runtime_control_case");
    TCase *tc = tcase_create("case");
    tcase_add_test(tc, test_case_picks_each_branch);
    tcase_add_test(tc, test_case_no_inputs_and_one_branch);
    tcase_add_test(tc, test_case_errors);
    suite_add_tcase(s, tc);
    return s;
}
