/* The graph rewrites' machinery (runtime/rewrite.c, rewrite-fold.c, rewrite-graph.c) on graphs
 * built with runtime/build.h: constant folding (shape arithmetic, the size limit, frozen TF1 and
 * TF2 variables sharing the variable's tensor), Identity/Snapshot/StopGradient/NoOp removal
 * keeping control dependencies, names that must survive (fetched, fed and target nodes), which
 * runs are served (a variable any run assigns is never folded; a model like
 * saved_model_counter keeps its state), argument errors, function libraries and random ops.
 * Every served run is compared with the original graph: these rewrites change no arithmetic, so
 * the outputs are bit-identical. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/rewrite-helpers.h"

Suite *suite_runtime_rewrite(void);

static tfs_graph *new_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    return g;
}

static tfs_out cconst(tfs_graph *g, const char *name, tfs_tensor *t)
{
    tfs_out c = tfs_build_const(g, name, t);
    tfs_tensor_unref(t);
    return c;
}

static float scalar(const tfs_tensor *t)
{
    ck_assert_int_eq(t->dtype, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(t->nelem, 1);
    return *(const float *)t->data;
}

static float run_scalar(tfs_session *s, const tfs_feed *feeds, int nf, const char *fetch)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run1(s, feeds, nf, fetch, &out, &st) == TFS_OK, "%s: %s", fetch, st.msg);
    float v = scalar(out);
    tfs_tensor_unref(out);
    return v;
}

static const char *const X[] = {"x:0"};

/* ---- constant folding ----------------------------------------------------------------------- */

/* y = Reshape(x, Pack(-1, 2 * 3)) * Exp(0.5) + Fill([n], 1) : the shape, the factor and the fill
 * are constants; x is not. */
static tfs_session *shape_graph(tfs_graph **gp)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out prod = tfs_build_binary(g, "Mul", tfs_build_scalar(g, TFS_DTYPE_INT32, 2),
                                    tfs_build_scalar(g, TFS_DTYPE_INT32, 3));
    tfs_out pack = tfs_build_op(g, "Pack", NULL, 2,
                                (tfs_out[]){tfs_build_scalar(g, TFS_DTYPE_INT32, -1), prod});
    tfs_graph_set_attr_int(g, pack.node, "axis", 0);
    tfs_out r = tfs_build_op(g, "Reshape", "r", 2, (tfs_out[]){x, pack});
    tfs_out k = tfs_build_unary(g, "Exp", tfs_build_scalar(g, TFS_DTYPE_FLOAT, 0.5));
    tfs_out fill = tfs_build_op(g, "Fill", "fill", 2,
                                (tfs_out[]){tfs_build_ints(g, 1, (int64_t[]){6}),
                                            tfs_build_scalar(g, TFS_DTYPE_FLOAT, 1.0)});
    tfs_out y = tfs_build_binary(g, "AddV2", tfs_build_binary(g, "Mul", r, k), fill);
    tfs_build_op(g, "Identity", "y", 1, &y);
    *gp = g;
    return rwt_session(g, NULL);
}

START_TEST(test_rewrite_constant_folding)
{
    tfs_graph *g;
    tfs_session *s = shape_graph(&g);
    int64_t xd[3] = {4, 2, 3};
    tfs_tensor *x = nn_random_f32(3, xd, 1);
    tfs_feed feed = {"x:0", x};
    tfs_rewrite_run run = rwt_run(1, X, 1, (const char *const[]){"y:0"});
    tfs_rewrite_stats rs;
    rwt_check_each(g, s, run, &feed, 0, &rs);
    /* Mul, Pack, Exp, Fill, ints folded (scalars and ints are Consts already). */
    ck_assert_int_eq(rs.constants_folded, 4);
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    int r = tfs_graph_find_node(rg, "r");
    ck_assert_int_ge(r, 0);
    ck_assert_str_eq(tfs_graph_node_input(rg, r, 0), "x:0");
    ck_assert_str_eq(rwt_op(rg, "Pack"), "Const");   /* folded nodes keep their names */
    ck_assert_str_eq(rwt_op(rg, "fill"), "Const");
    ck_assert_int_eq(rwt_count_op(rg, "Mul"), 1);    /* r * k only */
    ck_assert_int_eq(rs.nodes_before, tfs_graph_node_count(g));
    ck_assert_int_eq(rs.nodes_after, tfs_graph_node_count(rg));
    ck_assert_int_eq(rs.nodes_after, 8);   /* x, Pack, r, Exp, Mul_1, fill, AddV2, y */
    tfs_graph_unref(rg);

    /* A folded result over max_constant_bytes is not made: Fill stays (its inputs are Consts). */
    tfs_rewrite_opts o = tfs_rewrite_opts_default();
    o.max_constant_bytes = 16;
    rg = rwt_rewrite(g, s, &run, 1, &o, &rs);
    ck_assert_str_eq(rwt_op(rg, "fill"), "Fill");
    ck_assert_str_eq(rwt_op(rg, "Pack"), "Const");   /* 8 bytes */
    rwt_compare(s, rg, &feed, 1, run.fetches, 1, 0, "size limit");
    tfs_graph_unref(rg);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* Control edges: one from a folded constant goes; a Const waiting for a non-constant node is not
 * a constant (its consumers keep waiting). */
START_TEST(test_rewrite_constant_control_edges)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out x2 = tfs_build_placeholder(g, "x2", TFS_DTYPE_FLOAT, NULL);
    tfs_out one = tfs_build_scalar(g, TFS_DTYPE_FLOAT, 1);
    tfs_out k = tfs_build_op(g, "Exp", "k", 1, &one);
    tfs_out w = tfs_build_op(g, "Square", "w", 1, &x2);
    tfs_out c = cconst(g, "c", rt_scalar_f32(3.0f));
    tfs_build_control(g, c, w);
    tfs_out n = tfs_build_op(g, "Neg", "n", 1, &c);
    tfs_out y = tfs_build_op(g, "Mul", "y", 2, (tfs_out[]){x, n});
    tfs_build_control(g, y, k);
    tfs_session *s = rwt_session(g, NULL);
    tfs_rewrite_run run = rwt_run(2, (const char *const[]){"x:0", "x2:0"}, 1,
                                  (const char *const[]){"y:0"});
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert(run.served);
    ck_assert(!rwt_has_input(rg, "y", "^k"));
    ck_assert_int_eq(tfs_graph_find_node(rg, "k"), -1);
    ck_assert(rwt_has_input(rg, "c", "^w"));
    ck_assert_str_eq(rwt_op(rg, "n"), "Neg");
    tfs_tensor *xt = rt_scalar_f32(2.0f);
    tfs_feed feeds[2] = {{"x:0", xt}, {"x2:0", xt}};
    rwt_compare(s, rg, feeds, 2, run.fetches, 1, 0, "control edges");
    tfs_tensor_unref(xt);
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* A constant whose evaluation fails (a bad Reshape) is left for the run to report, as before. */
START_TEST(test_rewrite_failing_constant_left_alone)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out bad = tfs_build_op(g, "Reshape", "bad", 2,
                               (tfs_out[]){tfs_build_ints(g, 3, (int64_t[]){1, 2, 3}),
                                           tfs_build_ints(g, 1, (int64_t[]){4})});
    tfs_out good = tfs_build_unary(g, "Neg", tfs_build_scalar(g, TFS_DTYPE_FLOAT, 2));
    tfs_build_op(g, "Mul", "y", 2, (tfs_out[]){x, good});
    tfs_build_op(g, "Cast", "z", 1, &bad);
    tfs_graph_set_attr_type(g, tfs_graph_find_node(g, "z"), "DstT", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_type(g, tfs_graph_find_node(g, "z"), "SrcT", TFS_DTYPE_INT32);
    tfs_session *s = rwt_session(g, NULL);
    tfs_rewrite_run runs[2] = {rwt_run(1, X, 1, (const char *const[]){"y:0"}),
                               rwt_run(0, NULL, 1, (const char *const[]){"z:0"})};
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 2, NULL, &rs);
    ck_assert(runs[0].served && runs[1].served);
    ck_assert_str_eq(rwt_op(rg, "bad"), "Reshape");
    ck_assert_str_eq(rwt_op(rg, "Neg"), "Const");
    tfs_session *rs2 = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(rg, NULL, &rs2, &st), TFS_OK);
    tfs_tensor *out = NULL;
    ck_assert_int_eq(rt_run1(rs2, NULL, 0, "z:0", &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "'bad'") != NULL, "%s", st.msg);
    tfs_tensor *xt = rt_scalar_f32(3.0f);
    tfs_feed feed = {"x:0", xt};
    ck_assert_float_eq(run_scalar(rs2, &feed, 1, "y:0"), -6.0f);
    tfs_tensor_unref(xt);
    tfs_session_free(rs2);
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- Identity and NoOp removal --------------------------------------------------------------- */

/* x -> Identity -> Snapshot -> StopGradient -> PreventGradient -> IdentityN (with x2) -> Mul(., 2)
 * -> AddV2(., x) = z; z waits for NoOp n0, which waits for i1 and w = Square(IdentityN:1);
 * y = Identity(z) is fetched. */
START_TEST(test_rewrite_identity_chains)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out x2 = tfs_build_placeholder(g, "x2", TFS_DTYPE_FLOAT, NULL);
    tfs_out i1 = tfs_build_op(g, "Identity", "i1", 1, &x);
    tfs_out i2 = tfs_build_op(g, "Snapshot", "i2", 1, &i1);
    tfs_graph_set_attr_type(g, i2.node, "T", TFS_DTYPE_FLOAT);
    tfs_out i3 = tfs_build_op(g, "StopGradient", "i3", 1, &i2);
    tfs_out i4 = tfs_build_op(g, "PreventGradient", "i4", 1, &i3);
    tfs_out idn = tfs_build_op(g, "IdentityN", "idn", 2, (tfs_out[]){i4, x2});
    enum tfs_dtype tn[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    tfs_graph_set_attr(g, idn.node, "T", &(tfs_attr_value){.kind = TFS_ATTR_LIST,
                       .list = {.kind = TFS_ATTR_TYPE, .n = 2, .type = tn}});
    tfs_out w = tfs_build_op(g, "Square", "w", 1, &(tfs_out){idn.node, 1});
    tfs_graph_set_attr_type(g, w.node, "T", TFS_DTYPE_FLOAT);
    tfs_out n0 = tfs_build_group(g, "n0", 2, (tfs_out[]){i1, w});
    tfs_out m = tfs_build_binary(g, "Mul", idn, tfs_build_scalar(g, TFS_DTYPE_FLOAT, 2));
    tfs_out z = tfs_build_op(g, "AddV2", "z", 2, (tfs_out[]){m, x});
    tfs_build_control(g, z, n0);
    tfs_build_op(g, "Identity", "y", 1, &z);
    tfs_session *s = rwt_session(g, NULL);
    tfs_tensor *xt = nn_random_f32(1, (int64_t[]){5}, 1), *x2t = rt_scalar_f32(1.5f);
    tfs_feed feeds[2] = {{"x:0", xt}, {"x2:0", x2t}};
    tfs_rewrite_run run = rwt_run(2, (const char *const[]){"x:0", "x2:0"}, 1,
                                  (const char *const[]){"y:0"});
    tfs_rewrite_stats rs;
    rwt_check_each(g, s, run, feeds, 0, &rs);
    ck_assert_int_eq(rs.identities_removed, 6);   /* i1..i4, idn and n0 */
    tfs_rewrite_opts o = tfs_rewrite_opts_default();
    o.fold_constants = false;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, &o, &rs);
    ck_assert_str_eq(rwt_op(rg, "y"), "Identity");   /* fetched: stays */
    int mul = tfs_graph_find_node(rg, "Mul");
    ck_assert_str_eq(tfs_graph_node_input(rg, mul, 0), "x:0");
    /* z waited for n0, which waited for i1 (whose input x z reads anyway) and w. */
    ck_assert(rwt_has_input(rg, "z", "^w"));
    ck_assert(rwt_has_input(rg, "w", "x2:0"));
    ck_assert_int_eq(tfs_graph_node_input_count(rg, tfs_graph_find_node(rg, "z")), 3);
    ck_assert_int_eq(rwt_count_op(rg, "NoOp") + rwt_count_op(rg, "IdentityN") +
                     rwt_count_op(rg, "Snapshot") +
                     rwt_count_op(rg, "StopGradient") + rwt_count_op(rg, "PreventGradient"), 0);
    tfs_graph_unref(rg);
    tfs_tensor_unref(xt);
    tfs_tensor_unref(x2t);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* A malformed graph with a cycle of Identity nodes behind a fed node: the rewrite ends (the
 * cycle stays) and the run that feeds past it is served. */
START_TEST(test_rewrite_identity_cycle)
{
    tfs_graph *g = new_graph();
    rt_node(g, "a", "Identity", "b", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "b", "Identity", "a", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "c", "Identity", "a", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Neg", "c", NULL, TFS_DTYPE_FLOAT);
    tfs_session *s = rwt_session(g, NULL);
    tfs_rewrite_run run = rwt_run(1, (const char *const[]){"c:0"}, 1,
                                  (const char *const[]){"y:0"});
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert(run.served);
    ck_assert_int_eq(rs.identities_removed, 0);
    ck_assert_str_eq(rwt_op(rg, "a"), "Identity");
    tfs_tensor *ct = rt_scalar_f32(1.5f);
    tfs_feed feed = {"c:0", ct};
    rwt_compare(s, rg, &feed, 1, run.fetches, 1, 0, "fed past a cycle");
    tfs_tensor_unref(ct);
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- names that must survive ----------------------------------------------------------------- */

/* c = 3; a = c + 1; y = x * a. Run 2 feeds c, so a is not a constant; run 3 feeds the Identity
 * "i" that run 1 computes; run 4 targets the NoOp "t"; run 5 fetches output 1 of an Unpack of
 * constants. */
START_TEST(test_rewrite_protected_names)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out c = cconst(g, "c", rt_scalar_f32(3.0f));
    tfs_out one = tfs_build_scalar(g, TFS_DTYPE_FLOAT, 1);
    tfs_out a = tfs_build_op(g, "AddV2", "a", 2, (tfs_out[]){c, one});
    tfs_out i = tfs_build_op(g, "Identity", "i", 1, &x);
    tfs_build_op(g, "Mul", "y", 2, (tfs_out[]){i, a});
    tfs_build_group(g, "t", 1, &i);
    tfs_out pair = tfs_build_ints(g, 2, (int64_t[]){7, 9});
    tfs_out u = tfs_build_op(g, "Unpack", "u", 1, &pair);
    tfs_graph_set_attr_int(g, u.node, "num", 2);
    tfs_graph_set_attr_int(g, u.node, "axis", 0);
    tfs_session *s = rwt_session(g, NULL);
    const char *y[] = {"y:0"};
    tfs_rewrite_run runs[5] = {
        rwt_run(1, X, 1, y),
        rwt_run(2, (const char *const[]){"x:0", "c:0"}, 1, y),
        rwt_run(1, (const char *const[]){"i:0"}, 1, y),
        {.feeds = X, .n_feeds = 1, .targets = (const char *const[]){"t"}, .n_targets = 1},
        rwt_run(0, NULL, 1, (const char *const[]){"u:1"}),
    };
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 5, NULL, &rs);
    for (int r = 0; r < 5; r++)
        ck_assert_msg(runs[r].served, "run %d", r);
    ck_assert_str_eq(rwt_op(rg, "a"), "AddV2");      /* c is fed by run 2 */
    ck_assert_str_eq(rwt_op(rg, "i"), "Identity");   /* fed by run 3 */
    ck_assert_str_eq(rwt_op(rg, "t"), "NoOp");       /* a target */
    ck_assert_str_eq(rwt_op(rg, "u"), "Unpack");     /* its output 1 is fetched */
    tfs_session *s2 = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(rg, NULL, &s2, &st), TFS_OK);
    tfs_tensor *xt = rt_scalar_f32(2.0f), *ct = rt_scalar_f32(10.0f);
    tfs_feed f1[] = {{"x:0", xt}}, f2[] = {{"x:0", xt}, {"c:0", ct}}, f3[] = {{"i:0", ct}};
    ck_assert_float_eq(run_scalar(s2, f1, 1, "y:0"), 8.0f);
    ck_assert_float_eq(run_scalar(s2, f2, 2, "y:0"), 22.0f);
    ck_assert_float_eq(run_scalar(s2, f3, 1, "y:0"), 40.0f);
    ck_assert_int_eq(tfs_session_run(s2, f1, 1, NULL, 0, (const char *const[]){"t"}, 1, NULL, &st),
                     TFS_OK);
    tfs_tensor *u1 = NULL;
    ck_assert_int_eq(rt_run1(s2, NULL, 0, "u:1", &u1, &st), TFS_OK);
    ck_assert_int_eq(*(const int32_t *)u1->data, 9);
    tfs_tensor_unref(u1);
    tfs_tensor_unref(xt);
    tfs_tensor_unref(ct);
    tfs_session_free(s2);
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- variables and served runs --------------------------------------------------------------- */

/* saved_model_counter's shape, plus a weight: get reads counter, incr assigns it, predict
 * computes x * w. Only predict may be served, and only w is frozen. */
START_TEST(test_rewrite_assigned_variable_not_frozen)
{
    tfs_graph *g = new_graph();
    rwt_vars v = {0};
    tfs_out counter = tfs_build_variable(g, "counter", TFS_DTYPE_FLOAT, &(tfs_shape){0});
    v.assign[v.n++] = tfs_build_assign(g, counter, tfs_build_scalar(g, TFS_DTYPE_FLOAT, 0));
    tfs_out inc = tfs_build_op(g, "AssignAdd", "incr", 2,
                               (tfs_out[]){counter, tfs_build_scalar(g, TFS_DTYPE_FLOAT, 1)});
    tfs_graph_set_attr_type(g, inc.node, "T", TFS_DTYPE_FLOAT);
    tfs_out w = rwt_var(g, &v, "w", rt_scalar_f32(4.0f));
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_build_op(g, "Mul", "predict", 2, (tfs_out[]){x, w});
    tfs_out rd = tfs_build_op(g, "Identity", "get_read", 1, &counter);
    (void)rd;
    tfs_session *s = rwt_session(g, &v);
    tfs_rewrite_run runs[4] = {
        rwt_run(0, NULL, 1, (const char *const[]){"counter:0"}),
        rwt_run(0, NULL, 1, (const char *const[]){"incr:0"}),
        rwt_run(1, X, 1, (const char *const[]){"predict:0"}),
        rwt_run(0, NULL, 1, (const char *const[]){"get_read:0"}),
    };
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 4, NULL, &rs);
    ck_assert(!runs[0].served && !runs[1].served && runs[2].served && !runs[3].served);
    ck_assert_int_eq(rs.variables_frozen, 1);
    ck_assert_int_eq(rs.runs_served, 1);
    ck_assert_int_eq(tfs_graph_find_node(rg, "counter"), -1);   /* not needed by predict */
    ck_assert_str_eq(rwt_op(rg, "w/read"), "Const");
    /* The counter keeps counting on the original session, across calls. */
    for (int k = 1; k <= 3; k++)
        ck_assert_float_eq(run_scalar(s, NULL, 0, "incr:0"), (float)k);
    ck_assert_float_eq(run_scalar(s, NULL, 0, "counter:0"), 3.0f);
    tfs_tensor *xt = rt_scalar_f32(2.5f);
    tfs_feed feed = {"x:0", xt};
    rwt_compare(s, rg, &feed, 1, runs[2].fetches, 1, 0, "predict");
    tfs_graph_unref(rg);

    /* Listing only the read: nothing assigns counter then, so it is frozen and get is served. */
    rg = rwt_rewrite(g, s, &runs[3], 1, NULL, &rs);
    ck_assert(runs[3].served);
    ck_assert_str_eq(rwt_op(rg, "get_read"), "Const");
    rwt_compare(s, rg, NULL, 0, runs[3].fetches, 1, 0, "get");
    tfs_graph_unref(rg);
    tfs_tensor_unref(xt);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* TF2 resource variables: ReadVariableOp of a VarHandleOp folds to a Const sharing the variable's
 * tensor unless a run assigns it (AssignVariableOp, AssignAddVariableOp through an Identity of
 * the handle). */
START_TEST(test_rewrite_resource_variables)
{
    tfs_graph *g = new_graph();
    rwt_vars v = {0};
    tfs_out w = rwt_resource_var(g, &v, "w", nn_random_f32(1, (int64_t[]){4}, 3));
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_build_op(g, "Mul", "predict", 2, (tfs_out[]){x, w});
    int h = tfs_graph_find_node(g, "w");
    tfs_out hid = tfs_build_op(g, "Identity", "h_id", 1, &(tfs_out){h, 0});
    tfs_graph_set_attr_type(g, hid.node, "T", TFS_DTYPE_RESOURCE);
    tfs_out delta = cconst(g, NULL, nn_random_f32(1, (int64_t[]){4}, 4));
    tfs_out up = tfs_build_op(g, "AssignAddVariableOp", "bump", 2, (tfs_out[]){hid, delta});
    tfs_graph_set_attr_type(g, up.node, "dtype", TFS_DTYPE_FLOAT);
    tfs_session *s = rwt_session(g, &v);
    tfs_rewrite_run runs[2] = {
        rwt_run(1, X, 1, (const char *const[]){"predict:0"}),
        {.targets = (const char *const[]){"bump"}, .n_targets = 1},
    };
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 2, NULL, &rs);
    ck_assert_ptr_null(rg);   /* predict reads what bump assigns; bump assigns */
    ck_assert(!runs[0].served && !runs[1].served);
    rg = rwt_rewrite(g, s, runs, 1, NULL, &rs);
    ck_assert(runs[0].served);
    ck_assert_int_eq(rs.variables_frozen, 1);
    ck_assert_int_eq(rs.constant_bytes, 0);   /* the Const shares the variable's tensor */
    ck_assert_int_eq(rwt_count_op(rg, "VarHandleOp") + rwt_count_op(rg, "ReadVariableOp"), 0);
    tfs_tensor *xt = nn_random_f32(1, (int64_t[]){4}, 5);
    tfs_feed feed = {"x:0", xt};
    rwt_compare(s, rg, &feed, 1, runs[0].fetches, 1, 0, "predict");
    tfs_tensor_unref(xt);
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* Without a values session no variable is frozen; an uninitialized frozen variable cannot be
 * read, so its read stays and the run is not served. Constant-only runs are served either way. */
START_TEST(test_rewrite_unreadable_variables)
{
    tfs_graph *g = new_graph();
    tfs_out w = tfs_build_variable(g, "w", TFS_DTYPE_FLOAT, &(tfs_shape){0});
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_build_op(g, "Mul", "predict", 2, (tfs_out[]){x, tfs_build_identity(g, w)});
    tfs_build_op(g, "Neg", "k", 1, (tfs_out[]){tfs_build_scalar(g, TFS_DTYPE_FLOAT, 2)});
    tfs_session *s = rwt_session(g, NULL);   /* w never initialized */
    tfs_rewrite_run runs[2] = {rwt_run(1, X, 1, (const char *const[]){"predict:0"}),
                               rwt_run(0, NULL, 1, (const char *const[]){"k:0"})};
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 2, NULL, &rs);
    ck_assert(!runs[0].served && runs[1].served);
    ck_assert_int_eq(rs.variables_frozen, 1);
    ck_assert_str_eq(rwt_op(rg, "k"), "Const");
    tfs_graph_unref(rg);
    rg = rwt_rewrite(g, NULL, runs, 2, NULL, &rs);
    ck_assert(!runs[0].served && runs[1].served);
    ck_assert_int_eq(rs.variables_frozen, 0);
    ck_assert_str_eq(rwt_op(rg, "k"), "Const");   /* evaluated on a temporary session */
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- arguments, functions, random ops -------------------------------------------------------- */

START_TEST(test_rewrite_bad_arguments)
{
    tfs_graph *g = new_graph(), *other = new_graph();
    tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_rewrite_run run = rwt_run(1, X, 1, X);
    tfs_graph *out = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_graph_rewrite(g, NULL, &run, 1, NULL, &out, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "finalized");
    tfs_session *s = rwt_session(g, NULL), *so = rwt_session(other, NULL);
    ck_assert_int_eq(tfs_graph_rewrite(g, so, &run, 1, NULL, &out, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "another graph");
    tfs_rewrite_opts o = tfs_rewrite_opts_default();
    o.max_constant_bytes = -1;
    ck_assert_int_eq(tfs_graph_rewrite(g, s, &run, 1, &o, &out, NULL, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_graph_rewrite(g, s, NULL, 2, NULL, &out, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    /* Names that do not resolve: the run is not served, which is not an error. */
    tfs_rewrite_run bad[3] = {rwt_run(1, X, 1, (const char *const[]){"nope:0"}),
                              rwt_run(1, X, 1, (const char *const[]){"x:3"}),
                              {.targets = (const char *const[]){"^gone"}, .n_targets = 1}};
    tfs_rewrite_stats rs;
    ck_assert_ptr_null(rwt_rewrite(g, s, bad, 3, NULL, &rs));
    ck_assert(!bad[0].served && !bad[1].served && !bad[2].served);
    ck_assert_int_eq(rs.runs_served, 0);
    /* No runs at all. */
    ck_assert_ptr_null(rwt_rewrite(g, s, NULL, 0, NULL, NULL));
    tfs_session_free(s);
    tfs_session_free(so);
    tfs_graph_unref(g);
    tfs_graph_unref(other);
}
END_TEST

/* The function library travels with the rewritten graph: a StatelessWhile computing n! runs; a
 * While whose body reads a variable (a stateful library) is not served. A random op is served
 * (a new generator, as in any new session). */
START_TEST(test_rewrite_functions_and_random)
{
    tfs_graph *g = new_graph();
    tfs_graph *cond = new_graph(), *body = new_graph();
    rt_placeholder(cond, "v0", TFS_DTYPE_INT32);
    rt_placeholder(cond, "v1", TFS_DTYPE_INT32);
    rt_placeholder(body, "v0", TFS_DTYPE_INT32);
    rt_placeholder(body, "v1", TFS_DTYPE_INT32);
    int32_t m1 = -1, one = 1;
    rt_const(body, "m1", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &m1));
    rt_node(body, "n", "AddV2", "v0", "m1", TFS_DTYPE_INT32);
    rt_node(body, "acc", "Mul", "v1", "v0", TFS_DTYPE_INT32);
    tfs_status st;
    ck_assert_int_eq(tfs_graph_finalize(cond, &st), TFS_OK);
    ck_assert_int_eq(tfs_graph_finalize(body, &st), TFS_OK);
    const char *const v2[] = {"v0", "v1"};
    tfs_graph_add_function(g, "c", cond, 2, v2, 1, (const char *const[]){"v0:0"});
    tfs_graph_add_function(g, "b", body, 2, v2, 2, (const char *const[]){"n:0", "acc:0"});
    tfs_graph_unref(cond);
    tfs_graph_unref(body);
    rt_placeholder(g, "x", TFS_DTYPE_INT32);
    rt_const(g, "one", rt_tensor(TFS_DTYPE_INT32, 0, NULL, &one));
    rt_node(g, "x_id", "Identity", "x", NULL, TFS_DTYPE_INT32);
    int w = tfs_graph_add_node(g, "loop", "StatelessWhile");
    tfs_graph_add_input(g, w, "x_id");
    tfs_graph_add_input(g, w, "one");
    enum tfs_dtype T[2] = {TFS_DTYPE_INT32, TFS_DTYPE_INT32};
    tfs_attr_value tl = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_TYPE, .n = 2, .type = T}};
    tfs_graph_set_attr(g, w, "T", &tl);
    tfs_graph_set_attr(g, w, "cond", &(tfs_attr_value){.kind = TFS_ATTR_FUNC, .func = "c"});
    tfs_graph_set_attr(g, w, "body", &(tfs_attr_value){.kind = TFS_ATTR_FUNC, .func = "b"});
    int r = tfs_graph_add_node(g, "rand", "RandomUniform");
    tfs_graph_add_input(g, r, "shape");
    rt_const(g, "shape", rt_tensor(TFS_DTYPE_INT32, 1, (int64_t[]){1}, (int32_t[]){3}));
    tfs_graph_set_attr_type(g, r, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_type(g, r, "T", TFS_DTYPE_INT32);
    tfs_session *s = rwt_session(g, NULL);
    tfs_rewrite_run runs[2] = {rwt_run(1, X, 1, (const char *const[]){"loop:1"}),
                               rwt_run(0, NULL, 1, (const char *const[]){"rand:0"})};
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 2, NULL, &rs);
    ck_assert(runs[0].served && runs[1].served);
    ck_assert_int_eq(tfs_graph_function_count(rg), 2);
    ck_assert_int_eq(rs.identities_removed, 1);
    int32_t n = 6;
    tfs_tensor *xt = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &n);
    tfs_feed feed = {"x:0", xt};
    rwt_compare(s, rg, &feed, 1, runs[0].fetches, 1, 0, "factorial");
    tfs_session *s2 = NULL;
    ck_assert_int_eq(tfs_session_new(rg, NULL, &s2, &st), TFS_OK);
    tfs_tensor *u = NULL;
    ck_assert_int_eq(rt_run1(s2, NULL, 0, "rand:0", &u, &st), TFS_OK);
    ck_assert_int_eq(u->nelem, 3);
    tfs_tensor_unref(u);
    tfs_session_free(s2);
    tfs_tensor_unref(xt);
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

Suite *suite_runtime_rewrite(void)
{
    Suite *s = suite_create("runtime_rewrite");
    TCase *tc = tcase_create("rewrite");
    tcase_add_test(tc, test_rewrite_constant_folding);
    tcase_add_test(tc, test_rewrite_constant_control_edges);
    tcase_add_test(tc, test_rewrite_failing_constant_left_alone);
    tcase_add_test(tc, test_rewrite_identity_chains);
    tcase_add_test(tc, test_rewrite_identity_cycle);
    tcase_add_test(tc, test_rewrite_protected_names);
    tcase_add_test(tc, test_rewrite_assigned_variable_not_frozen);
    tcase_add_test(tc, test_rewrite_resource_variables);
    tcase_add_test(tc, test_rewrite_unreadable_variables);
    tcase_add_test(tc, test_rewrite_bad_arguments);
    tcase_add_test(tc, test_rewrite_functions_and_random);
    suite_add_tcase(s, tc);
    return s;
}
