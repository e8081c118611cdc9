/* Tests of the session's plan cache and memory plans (runtime/plan-cache.c, runtime/memplan.c):
 * a repeated run hits the cache, other fetch or feed sets get their own plans, a bounded cache
 * evicts, a new input shape learns a new memory plan and computes right, and -- the point of the
 * reuse rule in runtime-impl.h -- tensors that outlive their planned lifetime keep their values:
 * fetched aliases (Identity, Reshape, ExpandDims of intermediates), an output whose aliasing
 * depends on a fed value (Select passing an input through), values assigned to variables,
 * tensors held by TensorLists, and While bodies run with memory plans.
 *
 * Every test starts from production settings (no test hooks: main.c's flags are saved and
 * restored by the fixture), and counts on tfs__session_plan_stats. Expected values are computed
 * in the tests from the same float operations, so they are compared exactly unless stated.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_plan(void);

static unsigned saved_flags;

static void setup(void)
{
    saved_flags = tfs__plan_test_flags();
    tfs__plan_set_test_flags(0);
}

static void teardown(void)
{
    tfs__plan_set_test_flags(saved_flags);
    tfs__plan_set_idle_budget(-1);
}

static tfs_graph *new_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    return g;
}

static void const_f32(tfs_graph *g, const char *name, float v)
{
    rt_const(g, name, rt_scalar_f32(v));
}

static void const_i32v(tfs_graph *g, const char *name, int n, const int32_t *v)
{
    int64_t d = n;
    rt_const(g, name, rt_tensor(TFS_DTYPE_INT32, 1, &d, v));
}

static tfs_plan_stats stats(const tfs_session *s)
{
    tfs_plan_stats p;
    tfs__session_plan_stats(s, &p);
    return p;
}

static void run_ok(tfs_session *s, const tfs_feed *feeds, int nfeeds, const char *const *fetches,
                   int nfetches, const char *const *targets, int ntargets, tfs_tensor **out)
{
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, feeds, nfeeds, fetches, nfetches, targets, ntargets, out,
                                  &st) == TFS_OK, "%s", st.msg);
}

static tfs_tensor *vec(int n, const float *v)
{
    int64_t d = n;
    return rt_tensor(TFS_DTYPE_FLOAT, 1, &d, v);
}

static void expect_vec(const tfs_tensor *t, int n, const float *want)
{
    int64_t d = n;
    tfs_test_assert_f32(t, 1, &d, want, 0);
}

/* ---- the run-plan cache ---------------------------------------------------------------------- */

/* mul = x * 2; y = mul + 1; z = y * y. */
static tfs_session *chain_session(const tfs_session_opts *opts)
{
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    const_f32(g, "two", 2);
    const_f32(g, "one", 1);
    rt_node(g, "mul", "Mul", "x", "two", TFS_DTYPE_FLOAT);
    rt_node(g, "y", "AddV2", "mul", "one", TFS_DTYPE_FLOAT);
    rt_node(g, "z", "Mul", "y", "y", TFS_DTYPE_FLOAT);
    return rt_session(g, opts);
}

START_TEST(test_plan_cache_hit)
{
    tfs_session *s = chain_session(NULL);
    const char *fetch = "z";
    for (int r = 0; r < 3; r++) {
        float xv[3] = {1.0f + r, -2.0f, 0.5f * r}, want[3];
        for (int i = 0; i < 3; i++)
            want[i] = (xv[i] * 2 + 1) * (xv[i] * 2 + 1);
        tfs_tensor *x = vec(3, xv), *z = NULL;
        tfs_feed feed = {"x", x};
        run_ok(s, &feed, 1, &fetch, 1, NULL, 0, &z);
        expect_vec(z, 3, want);
        tfs_tensor_unref(z);
        tfs_tensor_unref(x);
    }
    tfs_plan_stats p = stats(s);
    ck_assert_int_eq(p.plan_misses, 1);
    ck_assert_int_eq(p.plan_hits, 2);
    ck_assert_int_eq(p.mem_misses, 1);   /* one shape: learned once */
    ck_assert_int_eq(p.mem_hits, 2);
    /* mul and y are intermediates: planned in each of the two planned runs; z is fetched. */
    ck_assert_int_eq(p.planned_outputs, 4);
    ck_assert_int_eq(p.heap_outputs, 3 + 2);
    ck_assert_int_eq(p.arenas_created, 1);   /* the arena went back to the pool each time */
    tfs_session_free(s);
}
END_TEST

START_TEST(test_plan_cache_fetch_sets)
{
    tfs_session *s = chain_session(NULL);
    float xv[2] = {3, -1};
    tfs_tensor *x = vec(2, xv), *out[2] = {NULL, NULL};
    tfs_feed feed = {"x", x};
    const char *z = "z", *y = "y", *yz[2] = {"y", "z"}, *zy[2] = {"z", "y"};
    run_ok(s, &feed, 1, &z, 1, NULL, 0, out);
    expect_vec(out[0], 2, (const float[]){49, 1});
    tfs_tensor_unref(out[0]);
    run_ok(s, &feed, 1, &y, 1, NULL, 0, out);
    expect_vec(out[0], 2, (const float[]){7, -1});
    tfs_tensor_unref(out[0]);
    run_ok(s, &feed, 1, yz, 2, NULL, 0, out);
    expect_vec(out[0], 2, (const float[]){7, -1});
    expect_vec(out[1], 2, (const float[]){49, 1});
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    /* The order of the names is part of the key: it decides which output gets which fetch. */
    run_ok(s, &feed, 1, zy, 2, NULL, 0, out);
    expect_vec(out[0], 2, (const float[]){49, 1});
    expect_vec(out[1], 2, (const float[]){7, -1});
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    run_ok(s, &feed, 1, &z, 1, NULL, 0, out);
    tfs_tensor_unref(out[0]);
    tfs_plan_stats p = stats(s);
    ck_assert_int_eq(p.plan_misses, 4);
    ck_assert_int_eq(p.plan_hits, 1);
    /* Feeding an intermediate instead is another plan: mul is not computed. */
    tfs_feed fm = {"mul:0", x};
    run_ok(s, &fm, 1, &z, 1, NULL, 0, out);
    expect_vec(out[0], 2, (const float[]){16, 0});
    tfs_tensor_unref(out[0]);
    ck_assert_int_eq(stats(s).plan_misses, 5);
    /* A failed plan is not cached. */
    const char *bad = "nope";
    tfs_status st;
    ck_assert_int_eq(tfs_session_run(s, &feed, 1, &bad, 1, NULL, 0, out, &st), TFS_NOT_FOUND);
    ck_assert_int_eq(tfs_session_run(s, &feed, 1, &bad, 1, NULL, 0, out, &st), TFS_NOT_FOUND);
    ck_assert_int_eq(stats(s).plan_misses, 7);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_plan_cache_bounded)
{
    tfs_session_opts o = tfs_session_opts_default();
    o.plan_cache_size = 2;
    tfs_session *s = chain_session(&o);
    tfs_tensor *x = vec(1, (const float[]){1}), *out = NULL;
    tfs_feed feed = {"x", x};
    const char *names[3] = {"mul", "y", "z"};
    const float want[3] = {2, 3, 9};
    /* Three fetch sets in turn through a cache of two: least recently used goes, every miss. */
    for (int r = 0; r < 6; r++) {
        run_ok(s, &feed, 1, &names[r % 3], 1, NULL, 0, &out);
        expect_vec(out, 1, &want[r % 3]);
        tfs_tensor_unref(out);
    }
    ck_assert_int_eq(stats(s).plan_misses, 6);
    ck_assert_int_eq(stats(s).plan_hits, 0);
    /* Two in turn fit. */
    for (int r = 0; r < 4; r++) {
        run_ok(s, &feed, 1, &names[r % 2], 1, NULL, 0, &out);
        tfs_tensor_unref(out);
    }
    ck_assert_int_eq(stats(s).plan_hits, 2);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* Every allocation of a run may fail -- building and caching the plan, learning, taking an arena,
 * placing an output -- in the first run, in a planned run and in a run with a new shape: the run
 * then fails with RESOURCE_EXHAUSTED and no outputs (or succeeds on the heap), the session keeps
 * working, and freeing it returns every byte. */
START_TEST(test_plan_allocation_failures)
{
    int64_t base = tfs_alloc_bytes_in_use();
    const char *fetch = "z";
    for (int phase = 0; phase < 3; phase++) {
        for (int n = 1;; n++) {
            tfs_session *s = chain_session(NULL);
            tfs_tensor *x = vec(2, (const float[]){1, 2}), *x3 = vec(3, (const float[]){0, 1, 2});
            tfs_tensor *z = NULL;
            tfs_feed feed = {"x", x}, feed3 = {"x", x3};
            for (int w = 0; w < phase; w++) {   /* 1: learned; 2: planned once already */
                run_ok(s, &feed, 1, &fetch, 1, NULL, 0, &z);
                tfs_tensor_unref(z);
            }
            tfs_feed *f = phase == 2 && n % 2 ? &feed3 : &feed;
            tfs_status st;
            tfs_alloc_fail_after(n);
            enum tfs_code rc = tfs_session_run(s, f, 1, &fetch, 1, NULL, 0, &z, &st);
            tfs_alloc_fail_after(0);
            if (rc != TFS_OK) {
                ck_assert_msg(rc == TFS_RESOURCE_EXHAUSTED, "phase %d n=%d: %s", phase, n, st.msg);
                ck_assert_ptr_null(z);
            } else {
                tfs_tensor_unref(z);
            }
            for (int again = 0; again < 2; again++) {   /* still usable, and right */
                run_ok(s, &feed, 1, &fetch, 1, NULL, 0, &z);
                expect_vec(z, 2, (const float[]){9, 25});
                tfs_tensor_unref(z);
            }
            tfs_tensor_unref(x);
            tfs_tensor_unref(x3);
            tfs_session_free(s);
            ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
            if (rc == TFS_OK && n > 120)   /* well past the allocations one run makes */
                break;
        }
    }
}
END_TEST

/* ---- memory plans per input shape ------------------------------------------------------------ */

static const float W1[3 * 4] = {0.5f, -1, 0.25f, 2, 1, 0.5f, -0.5f, -1, -2, 1.5f, 1, 0.75f};
static const float B1[4] = {0.1f, -0.2f, 0.3f, -0.4f};
static const float W2[4 * 2] = {1, -1, 0.5f, 2, -0.25f, 1, 1.5f, -0.5f};

/* y = softmax(relu(x W1 + b1) W2), x [n, 3]. */
static tfs_session *mlp_session(const tfs_session_opts *opts)
{
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_const(g, "w1", rt_tensor(TFS_DTYPE_FLOAT, 2, (const int64_t[]){3, 4}, W1));
    rt_const(g, "b1", rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){4}, B1));
    rt_const(g, "w2", rt_tensor(TFS_DTYPE_FLOAT, 2, (const int64_t[]){4, 2}, W2));
    rt_node(g, "mm1", "MatMul", "x", "w1", TFS_DTYPE_FLOAT);
    rt_node(g, "ba", "BiasAdd", "mm1", "b1", TFS_DTYPE_FLOAT);
    rt_node(g, "h", "Relu", "ba", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "mm2", "MatMul", "h", "w2", TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Softmax", "mm2", NULL, TFS_DTYPE_FLOAT);
    return rt_session(g, opts);
}

/* Runs the MLP on n rows of x[i][j] = (i + 1) * (j - 1) * scale and checks against float64. */
static void check_mlp(tfs_session *s, int n, float scale)
{
    float xv[16 * 3];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 3; j++)
            xv[i * 3 + j] = (float)(i + 1) * (float)(j - 1) * scale;
    int64_t d[2] = {n, 3};
    tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 2, d, xv), *y = NULL;
    tfs_feed feed = {"x", x};
    const char *fetch = "y";
    run_ok(s, &feed, 1, &fetch, 1, NULL, 0, &y);
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->dims[0], n);
    ck_assert_int_eq(y->dims[1], 2);
    for (int i = 0; i < n; i++) {
        double h[4], o[2];
        for (int k = 0; k < 4; k++) {
            double acc = B1[k];
            for (int j = 0; j < 3; j++)
                acc += (double)xv[i * 3 + j] * W1[j * 4 + k];
            h[k] = acc > 0 ? acc : 0;
        }
        for (int c = 0; c < 2; c++) {
            o[c] = 0;
            for (int k = 0; k < 4; k++)
                o[c] += h[k] * W2[k * 2 + c];
        }
        double m = fmax(o[0], o[1]), e0 = exp(o[0] - m), e1 = exp(o[1] - m);
        const float *got = (const float *)y->data + i * 2;
        ck_assert_msg(fabs(got[0] - e0 / (e0 + e1)) < 1e-5 && fabs(got[1] - e1 / (e0 + e1)) < 1e-5,
                      "row %d of %d: %g %g", i, n, got[0], got[1]);
    }
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
}

START_TEST(test_plan_shape_change)
{
    tfs_session *s = mlp_session(NULL);
    const int sizes[] = {2, 5, 2, 5, 1, 16, 2};
    for (int r = 0; r < 7; r++)
        check_mlp(s, sizes[r], 0.5f + 0.25f * (float)r);
    tfs_plan_stats p = stats(s);
    ck_assert_int_eq(p.plan_misses, 1);
    ck_assert_int_eq(p.mem_misses, 4);   /* batch 2, 5, 1, 16 */
    ck_assert_int_eq(p.mem_hits, 3);
    ck_assert_int_gt(p.planned_outputs, 0);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_plan_shape_cache_bounded)
{
    tfs_session_opts o = tfs_session_opts_default();
    o.memory_plans = 1;
    tfs_session *s = mlp_session(&o);
    for (int r = 0; r < 6; r++)
        check_mlp(s, 1 + r % 2, 1.0f + (float)r);
    ck_assert_int_eq(stats(s).mem_misses, 6);   /* two shapes in turn through one entry */
    ck_assert_int_eq(stats(s).mem_hits, 0);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_plan_idle_budget)
{
    tfs_session *s = mlp_session(NULL);
    for (int r = 0; r < 4; r++)
        check_mlp(s, 4, 1.0f + (float)r);
    ck_assert_int_eq(stats(s).arenas_created, 1);   /* the steady state allocates no arena */
    tfs__plan_set_idle_budget(0);   /* no idle arena may be kept: each run allocates its own */
    for (int r = 0; r < 4; r++)
        check_mlp(s, 4, 2.0f + (float)r);
    tfs__plan_set_idle_budget(-1);
    ck_assert_int_eq(stats(s).arenas_created, 1 + 3);   /* the pooled one served the first */
    ck_assert_int_eq(stats(s).mem_hits, 3 + 4);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_plan_reuse_off)
{
    tfs_session_opts o = tfs_session_opts_default();
    o.disable_buffer_reuse = true;
    tfs_session *s = mlp_session(&o);
    for (int r = 0; r < 4; r++)
        check_mlp(s, 3, 1.0f + (float)r);
    tfs_plan_stats p = stats(s);
    ck_assert_int_eq(p.plan_hits, 3);   /* run plans are cached either way */
    ck_assert_int_eq(p.mem_hits + p.mem_misses + p.planned_outputs + p.heap_outputs, 0);
    tfs_session_free(s);
    /* The test hook turns reuse off for sessions made with default options. */
    tfs__plan_set_test_flags(TFS_PLAN_TEST_NO_REUSE);
    s = mlp_session(NULL);
    check_mlp(s, 3, 1);
    check_mlp(s, 3, 2);
    ck_assert_int_eq(stats(s).planned_outputs, 0);
    tfs_session_free(s);
}
END_TEST

/* ---- values that outlive their planned lifetime ---------------------------------------------- */

/* x [2,2]; a = x * 2; b = a + 1; c = b * b; d = c - a; fetched: Identity(b), Reshape(a, [4]),
 * ExpandDims(b, 0) and d. */
static tfs_session *alias_session(void)
{
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    const_f32(g, "two", 2);
    const_f32(g, "one", 1);
    const_i32v(g, "shape4", 1, (const int32_t[]){4});
    rt_const(g, "axis0", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){0}));
    rt_node(g, "a", "Mul", "x", "two", TFS_DTYPE_FLOAT);
    rt_node(g, "b", "AddV2", "a", "one", TFS_DTYPE_FLOAT);
    rt_node(g, "c", "Mul", "b", "b", TFS_DTYPE_FLOAT);
    rt_node(g, "d", "Sub", "c", "a", TFS_DTYPE_FLOAT);
    rt_node(g, "idb", "Identity", "b", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "ra", "Reshape", "a", "shape4", TFS_DTYPE_FLOAT);
    rt_node(g, "eb", "ExpandDims", "b", "axis0", TFS_DTYPE_FLOAT);
    return rt_session(g, NULL);
}

/* Holds the outputs of many runs, then checks each against its own input: a region reused
 * while a fetched alias still pointed into it would show another run's numbers. */
static void check_alias_runs(unsigned flags)
{
    tfs__plan_set_test_flags(flags);
    tfs_session *s = alias_session();
    enum { RUNS = 6 };
    const char *fetches[4] = {"idb", "ra", "eb", "d"};
    tfs_tensor *held[RUNS][4];
    for (int r = 0; r < RUNS; r++) {
        float xv[4] = {1.0f * r, 2.0f - r, 0.5f + r, -3.0f * r};
        tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 2, (const int64_t[]){2, 2}, xv);
        tfs_feed feed = {"x", x};
        run_ok(s, &feed, 1, fetches, 4, NULL, 0, held[r]);
        tfs_tensor_unref(x);
    }
    for (int r = 0; r < RUNS; r++) {
        float xv[4] = {1.0f * r, 2.0f - r, 0.5f + r, -3.0f * r}, a[4], b[4], d[4];
        for (int i = 0; i < 4; i++) {
            a[i] = xv[i] * 2;
            b[i] = a[i] + 1;
            d[i] = b[i] * b[i] - a[i];
        }
        tfs_test_assert_f32(held[r][0], 2, (const int64_t[]){2, 2}, b, 0);
        tfs_test_assert_f32(held[r][1], 1, (const int64_t[]){4}, a, 0);
        tfs_test_assert_f32(held[r][2], 3, (const int64_t[]){1, 2, 2}, b, 0);
        tfs_test_assert_f32(held[r][3], 2, (const int64_t[]){2, 2}, d, 0);
    }
    for (int r = 0; r < RUNS; r++)
        for (int i = 0; i < 4; i++)
            tfs_tensor_unref(held[r][i]);
    ck_assert_int_eq(stats(s).mem_misses, 1);
    tfs_session_free(s);
}

START_TEST(test_plan_alias_fetches)
{
    check_alias_runs(0);   /* the aliased values escape: learned, then kept off the arena */
}
END_TEST

START_TEST(test_plan_alias_fetches_in_arena)
{
    /* Planned anyway: the fetched aliases pin their arenas, later runs take fresh ones. */
    check_alias_runs(TFS_PLAN_TEST_PLAN_ESCAPED | TFS_PLAN_TEST_POISON);
}
END_TEST

/* x [3]; a = x * 2; b = x + 1; sel = Select(cond, a, b) (a scalar condition passes one input
 * through); m = a * b; then, after sel, c = a * 3, e = c + 1, f = e * e. Learned with cond = true,
 * b dies at sel and c is placed in b's region; run with cond = false, the fetched sel IS b, in its
 * planned region: c must not get that region (the live-overlap check), sel must stay intact
 * through later runs, and the plan must be retired. */
START_TEST(test_plan_value_dependent_alias)
{
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "cond", TFS_DTYPE_BOOL);
    const_f32(g, "two", 2);
    const_f32(g, "one", 1);
    rt_node(g, "a", "Mul", "x", "two", TFS_DTYPE_FLOAT);
    rt_node(g, "b", "AddV2", "x", "one", TFS_DTYPE_FLOAT);
    int sel = tfs_graph_add_node(g, "sel", "Select");
    tfs_graph_add_input(g, sel, "cond");
    tfs_graph_add_input(g, sel, "a");
    tfs_graph_add_input(g, sel, "b");
    tfs_graph_set_attr_type(g, sel, "T", TFS_DTYPE_FLOAT);
    rt_node(g, "m", "Mul", "a", "b", TFS_DTYPE_FLOAT);
    const_f32(g, "three", 3);
    int cid = rt_node(g, "c", "Mul", "a", "three", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, cid, "^sel");
    rt_node(g, "e", "AddV2", "c", "one", TFS_DTYPE_FLOAT);
    rt_node(g, "f", "Mul", "e", "e", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    enum { RUNS = 8 };
    static const bool conds[RUNS] = {true, false, false, true, false, true, true, false};
    tfs_tensor *held[RUNS][3];
    const char *fetches[3] = {"sel", "m", "f"};
    for (int r = 0; r < RUNS; r++) {
        tfs_tensor *x = vec(3, (const float[]){1.0f * r, -1, 2.5f});
        tfs_tensor *c = rt_tensor(TFS_DTYPE_BOOL, 0, NULL, &conds[r]);
        tfs_feed feeds[2] = {{"x", x}, {"cond", c}};
        run_ok(s, feeds, 2, fetches, 3, NULL, 0, held[r]);
        tfs_tensor_unref(x);
        tfs_tensor_unref(c);
        if (r == 1)   /* learned at run 0; run 1 found b alive at its end and retired the plan */
            ck_assert_int_eq(stats(s).mem_misses, 1);
        if (r == 2)
            ck_assert_int_eq(stats(s).mem_misses, 2);
    }
    for (int r = 0; r < RUNS; r++) {
        float xv[3] = {1.0f * r, -1, 2.5f}, sv[3], mv[3], fv[3];
        for (int i = 0; i < 3; i++) {
            sv[i] = conds[r] ? xv[i] * 2 : xv[i] + 1;
            mv[i] = (xv[i] * 2) * (xv[i] + 1);
            fv[i] = (xv[i] * 2 * 3 + 1) * (xv[i] * 2 * 3 + 1);
        }
        expect_vec(held[r][0], 3, sv);
        expect_vec(held[r][1], 3, mv);
        expect_vec(held[r][2], 3, fv);
        for (int i = 0; i < 3; i++)
            tfs_tensor_unref(held[r][i]);
    }
    tfs_session_free(s);
}
END_TEST

/* h = VarHandleOp "w"; t = x * 3; u = t + 1; tt = t * t; out = tt - 1; then (control edges)
 * prev = Identity(ReadVariableOp(h)) after out, assign = AssignVariableOp(h, u) after prev; init
 * assigns a constant. Each run's prev must be the value the previous run assigned: the assigned
 * intermediate (u) must survive the next run's computing t, tt and out, and runs of other plans. */
static void check_variable_runs(unsigned flags)
{
    tfs__plan_set_test_flags(flags);
    tfs_graph *g = new_graph();
    int h = tfs_graph_add_node(g, "h", "VarHandleOp");
    tfs_graph_set_attr_type(g, h, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_string(g, h, "shared_name", "w");
    tfs_shape sh = {1, {3}};
    tfs_graph_set_attr_shape(g, h, "shape", &sh);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    const_f32(g, "three", 3);
    const_f32(g, "one", 1);
    rt_const(g, "c0", vec(3, (const float[]){-1, -2, -3}));
    int in = rt_node(g, "init", "AssignVariableOp", "h", "c0", TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, in, "dtype", TFS_DTYPE_FLOAT);
    rt_node(g, "t", "Mul", "x", "three", TFS_DTYPE_FLOAT);
    rt_node(g, "u", "AddV2", "t", "one", TFS_DTYPE_FLOAT);
    rt_node(g, "tt", "Mul", "t", "t", TFS_DTYPE_FLOAT);
    rt_node(g, "out", "Sub", "tt", "one", TFS_DTYPE_FLOAT);
    int rd = rt_node(g, "read", "ReadVariableOp", "h", NULL, TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, rd, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, rd, "^out");
    int pv = rt_node(g, "prev", "Identity", "read", NULL, TFS_DTYPE_FLOAT);
    int a = rt_node(g, "assign", "AssignVariableOp", "h", "u", TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, a, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, a, "^prev");
    (void)pv;
    tfs_session *s = rt_session(g, NULL);
    const char *init = "init", *assign = "assign", *out = "out";
    const char *fetches[2] = {"prev", "out"};
    run_ok(s, NULL, 0, NULL, 0, &init, 1, NULL);
    float last[3] = {-1, -2, -3};
    for (int r = 0; r < 6; r++) {
        float xv[3] = {1.0f + r, -2.0f * r, 0.25f};
        tfs_tensor *x = vec(3, xv), *o[2];
        tfs_feed feed = {"x", x};
        run_ok(s, &feed, 1, fetches, 2, &assign, 1, o);
        expect_vec(o[0], 3, last);
        tfs_tensor_unref(o[0]);
        tfs_tensor_unref(o[1]);
        for (int i = 0; i < 3; i++)
            last[i] = xv[i] * 3 + 1;
        /* A run of another plan in between. */
        tfs_tensor *x2 = vec(3, (const float[]){100.0f + r, 7, -7}), *o2;
        tfs_feed f2 = {"x", x2};
        run_ok(s, &f2, 1, &out, 1, NULL, 0, &o2);
        tfs_tensor_unref(o2);
        tfs_tensor_unref(x2);
        tfs_tensor_unref(x);
    }
    tfs_session_free(s);
}

START_TEST(test_plan_variable_assigned_from_intermediate)
{
    check_variable_runs(0);
}
END_TEST

START_TEST(test_plan_variable_assigned_in_arena)
{
    check_variable_runs(TFS_PLAN_TEST_PLAN_ESCAPED | TFS_PLAN_TEST_POISON);
}
END_TEST

/* item = x * 2 is stored in a TensorList, more values are computed (which could take its region
 * if the list's reference were not counted), then read back: y = get * 3. */
START_TEST(test_plan_tensorlist_holds_intermediate)
{
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    const_f32(g, "two", 2);
    const_f32(g, "three", 3);
    const_f32(g, "five", 5);
    const_i32v(g, "eshape", 1, (const int32_t[]){4});
    rt_const(g, "n", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){2}));
    rt_const(g, "i1", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){1}));
    rt_node(g, "item", "Mul", "x", "two", TFS_DTYPE_FLOAT);
    int l = tfs_graph_add_node(g, "list", "TensorListReserve");
    tfs_graph_add_input(g, l, "eshape");
    tfs_graph_add_input(g, l, "n");
    tfs_graph_set_attr_type(g, l, "element_dtype", TFS_DTYPE_FLOAT);
    int set = tfs_graph_add_node(g, "set", "TensorListSetItem");
    tfs_graph_add_input(g, set, "list");
    tfs_graph_add_input(g, set, "i1");
    tfs_graph_add_input(g, set, "item");
    tfs_graph_set_attr_type(g, set, "element_dtype", TFS_DTYPE_FLOAT);
    rt_node(g, "u", "AddV2", "x", "five", TFS_DTYPE_FLOAT);
    rt_node(g, "w", "Mul", "u", "u", TFS_DTYPE_FLOAT);
    rt_node(g, "z", "Sub", "w", "x", TFS_DTYPE_FLOAT);
    int get = tfs_graph_add_node(g, "get", "TensorListGetItem");
    tfs_graph_add_input(g, get, "set");
    tfs_graph_add_input(g, get, "i1");
    tfs_graph_add_input(g, get, "eshape");
    tfs_graph_add_input(g, get, "^z");
    tfs_graph_set_attr_type(g, get, "element_dtype", TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Mul", "get", "three", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    const char *fetches[2] = {"y", "z"};
    for (int r = 0; r < 4; r++) {
        float xv[4] = {1.0f + r, -2, 0.5f, 10.0f * r}, wy[4], wz[4];
        for (int i = 0; i < 4; i++) {
            wy[i] = xv[i] * 2 * 3;
            wz[i] = (xv[i] + 5) * (xv[i] + 5) - xv[i];
        }
        tfs_tensor *x = vec(4, xv), *out[2];
        tfs_feed feed = {"x", x};
        run_ok(s, &feed, 1, fetches, 2, NULL, 0, out);
        expect_vec(out[0], 4, wy);
        expect_vec(out[1], 4, wz);
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);
        tfs_tensor_unref(x);
    }
    ck_assert_int_gt(stats(s).planned_outputs, 0);
    tfs_session_free(s);
}
END_TEST

/* ---- While bodies ---------------------------------------------------------------------------- */

static void set_func(tfs_graph *g, int id, const char *attr, const char *fname)
{
    tfs_attr_value v = {.kind = TFS_ATTR_FUNC, .func = (char *)fname};
    tfs_graph_set_attr(g, id, attr, &v);
}

static void add_fn(tfs_graph *g, const char *name, tfs_graph *body, int n_in,
                   const char *const *in, int n_out, const char *const *out)
{
    tfs_status st;
    ck_assert_msg(tfs_graph_finalize(body, &st) == TFS_OK, "body %s: %s", name, st.msg);
    tfs_graph_add_function(g, name, body, n_in, in, n_out, out);
    tfs_graph_unref(body);
}

/* (n, x) -> (n - 1, x * 0.5 + 1) while n != 0. */
static tfs_session *loop_session(const tfs_session_opts *opts)
{
    static const enum tfs_dtype T[2] = {TFS_DTYPE_INT32, TFS_DTYPE_FLOAT};
    static const char *const V[2] = {"v0", "v1"};
    tfs_graph *g = new_graph();
    tfs_graph *cond = new_graph();
    rt_placeholder(cond, "v0", TFS_DTYPE_INT32);
    rt_placeholder(cond, "v1", TFS_DTYPE_FLOAT);
    add_fn(g, "cond", cond, 2, V, 1, (const char *const[]){"v0:0"});
    tfs_graph *body = new_graph();
    rt_placeholder(body, "v0", TFS_DTYPE_INT32);
    rt_placeholder(body, "v1", TFS_DTYPE_FLOAT);
    rt_const(body, "minus1", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){-1}));
    const_f32(body, "half", 0.5f);
    const_f32(body, "one", 1);
    rt_node(body, "next_n", "AddV2", "v0", "minus1", TFS_DTYPE_INT32);
    rt_node(body, "m", "Mul", "v1", "half", TFS_DTYPE_FLOAT);
    rt_node(body, "sq", "Square", "m", NULL, TFS_DTYPE_FLOAT);
    rt_node(body, "next_x", "AddV2", "m", "one", TFS_DTYPE_FLOAT);
    rt_node(body, "unused", "Sub", "sq", "one", TFS_DTYPE_FLOAT);
    add_fn(g, "body", body, 2, V, 2, (const char *const[]){"next_n:0", "next_x:0"});
    rt_placeholder(g, "n", TFS_DTYPE_INT32);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    int w = tfs_graph_add_node(g, "loop", "StatelessWhile");
    tfs_graph_add_input(g, w, "n");
    tfs_graph_add_input(g, w, "x");
    tfs_attr_value tv = {.kind = TFS_ATTR_LIST};
    tv.list.kind = TFS_ATTR_TYPE;
    tv.list.n = 2;
    tv.list.type = (enum tfs_dtype *)T;
    tfs_graph_set_attr(g, w, "T", &tv);
    set_func(g, w, "cond", "cond");
    set_func(g, w, "body", "body");
    return rt_session(g, opts);
}

START_TEST(test_plan_while_body)
{
    tfs_session_opts off = tfs_session_opts_default();
    off.disable_buffer_reuse = true;
    tfs_session *s = loop_session(NULL), *ref = loop_session(&off);
    const char *fetch = "loop:1";
    for (int r = 0; r < 3; r++) {
        int32_t n = 10 + r;
        float xv[5] = {1, -4, 100, 0.1f * r, 3}, want[5];
        for (int i = 0; i < 5; i++) {
            want[i] = xv[i];
            for (int k = 0; k < n; k++)
                want[i] = want[i] * 0.5f + 1;
        }
        tfs_tensor *x = vec(5, xv), *nt = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &n), *y, *y_ref;
        tfs_feed feeds[2] = {{"n", nt}, {"x", x}};
        run_ok(s, feeds, 2, &fetch, 1, NULL, 0, &y);
        run_ok(ref, feeds, 2, &fetch, 1, NULL, 0, &y_ref);
        expect_vec(y, 5, want);
        rt_assert_same(y, y_ref, "While with and without buffer reuse");
        tfs_tensor_unref(y);
        tfs_tensor_unref(y_ref);
        tfs_tensor_unref(x);
        tfs_tensor_unref(nt);
    }
    /* The body (and cond) learned their memory plans in the first iterations and reused them. */
    tfs_plan_stats p = stats(s);
    ck_assert_int_ge(p.mem_hits, 30);
    ck_assert_int_ge(p.planned_outputs, 30);
    ck_assert_int_le(p.arenas_created, 3);
    ck_assert_int_eq(stats(ref).planned_outputs, 0);
    tfs_session_free(s);
    tfs_session_free(ref);
}
END_TEST

Suite *suite_runtime_plan(void)
{
    Suite *s = suite_create("runtime_plan");
    TCase *tc = tcase_create("plan");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_plan_cache_hit);
    tcase_add_test(tc, test_plan_cache_fetch_sets);
    tcase_add_test(tc, test_plan_cache_bounded);
    tcase_add_test(tc, test_plan_allocation_failures);
    tcase_add_test(tc, test_plan_shape_change);
    tcase_add_test(tc, test_plan_shape_cache_bounded);
    tcase_add_test(tc, test_plan_idle_budget);
    tcase_add_test(tc, test_plan_reuse_off);
    tcase_add_test(tc, test_plan_alias_fetches);
    tcase_add_test(tc, test_plan_alias_fetches_in_arena);
    tcase_add_test(tc, test_plan_value_dependent_alias);
    tcase_add_test(tc, test_plan_variable_assigned_from_intermediate);
    tcase_add_test(tc, test_plan_variable_assigned_in_arena);
    tcase_add_test(tc, test_plan_tensorlist_holds_intermediate);
    tcase_add_test(tc, test_plan_while_body);
    suite_add_tcase(s, tc);
    return s;
}
