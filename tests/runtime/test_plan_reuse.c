/* Buffer reuse against no reuse on one graph that chains the kernels migrated to
 * tfs__kernel_output (Conv2D, BiasAdd, Relu, MaxPool, AvgPool, ConcatV2, DepthwiseConv2dNative,
 * FusedBatchNormV3, Pad, Transpose, Reshape, MatMul, BatchMatMulV2, Softmax, LogSoftmax, Sum,
 * Mean, Max, ArgMax, Tanh, Sigmoid, Sub, Maximum, AddN, Cast, Select), so that many outputs share
 * arena regions: a session with reuse must give bit-identical outputs to one without, for several
 * batch sizes in turn, with the arenas poisoned; and the same from 4 threads at once, each cycling
 * through three batch sizes and three fetch sets, against 2-entry plan and shape caches so that
 * plans are evicted while other threads still run them (the sanitizer build runs it under ASan).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_plan_reuse(void);

static unsigned saved_flags;

static void setup(void)
{
    saved_flags = tfs__plan_test_flags();
    tfs__plan_set_test_flags(TFS_PLAN_TEST_POISON);
}

static void teardown(void)
{
    tfs__plan_set_test_flags(saved_flags);
}

static void ints_attr(tfs_graph *g, int id, const char *name, int n, const int64_t *v)
{
    tfs_attr_value a = {.kind = TFS_ATTR_LIST};
    a.list.kind = TFS_ATTR_I;
    a.list.n = n;
    a.list.i = (int64_t *)v;
    tfs_graph_set_attr(g, id, name, &a);
}

static uint32_t rng_state;

static tfs_tensor *random_f32(int rank, const int64_t *dims, uint32_t seed)
{
    tfs_tensor *t = rt_tensor(TFS_DTYPE_FLOAT, rank, dims, NULL);
    rng_state = seed * 2654435761u + 7;
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++) {
        rng_state = rng_state * 1664525u + 1013904223u;
        v[i] = (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
    }
    return t;
}

static int node2(tfs_graph *g, const char *name, const char *op, const char *a, const char *b)
{
    return rt_node(g, name, op, a, b, TFS_DTYPE_FLOAT);
}

static const int64_t S1[4] = {1, 1, 1, 1};

/* x [n, 6, 6, 2] -> ... (see the file comment). */
static tfs_session *big_session(const tfs_session_opts *opts)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "flag", TFS_DTYPE_BOOL);
    rt_const(g, "f", random_f32(4, (const int64_t[]){3, 3, 2, 4}, 1));
    rt_const(g, "bias", random_f32(1, (const int64_t[]){4}, 2));
    rt_const(g, "dwf", random_f32(4, (const int64_t[]){3, 3, 8, 1}, 3));
    rt_const(g, "scale", random_f32(1, (const int64_t[]){8}, 4));
    rt_const(g, "offset", random_f32(1, (const int64_t[]){8}, 5));
    rt_const(g, "mean", random_f32(1, (const int64_t[]){8}, 6));
    tfs_tensor *var = random_f32(1, (const int64_t[]){8}, 7);
    for (int i = 0; i < 8; i++)
        ((float *)var->data)[i] += 1.5f;   /* positive variances */
    rt_const(g, "var", var);
    rt_const(g, "w", random_f32(2, (const int64_t[]){200, 10}, 8));
    rt_const(g, "zero", rt_scalar_f32(0));
    rt_const(g, "axis3", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){3}));
    rt_const(g, "axis1", rt_tensor(TFS_DTYPE_INT32, 0, NULL, (const int32_t[]){1}));
    rt_const(g, "axes0", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){1}, (const int32_t[]){0}));
    rt_const(g, "pads", rt_tensor(TFS_DTYPE_INT32, 2, (const int64_t[]){4, 2},
                                  (const int32_t[]){0, 0, 1, 1, 1, 1, 0, 0}));
    rt_const(g, "perm", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){4},
                                  (const int32_t[]){0, 3, 1, 2}));
    rt_const(g, "shape200", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){2},
                                      (const int32_t[]){-1, 200}));
    rt_const(g, "shape3", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){3},
                                    (const int32_t[]){-1, 25, 8}));

    int id = node2(g, "conv", "Conv2D", "x", "f");
    ints_attr(g, id, "strides", 4, S1);
    tfs_graph_set_attr_string(g, id, "padding", "SAME");
    node2(g, "ba", "BiasAdd", "conv", "bias");
    node2(g, "relu", "Relu", "ba", NULL);
    id = node2(g, "mp", "MaxPool", "relu", NULL);
    ints_attr(g, id, "ksize", 4, (const int64_t[]){1, 2, 2, 1});
    ints_attr(g, id, "strides", 4, (const int64_t[]){1, 2, 2, 1});
    tfs_graph_set_attr_string(g, id, "padding", "VALID");
    id = node2(g, "ap", "AvgPool", "relu", NULL);
    ints_attr(g, id, "ksize", 4, (const int64_t[]){1, 3, 3, 1});
    ints_attr(g, id, "strides", 4, (const int64_t[]){1, 2, 2, 1});
    tfs_graph_set_attr_string(g, id, "padding", "SAME");
    id = rt_node(g, "cat", "ConcatV2", "mp", "ap", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, id, "axis3");
    tfs_graph_set_attr_int(g, id, "N", 2);
    id = node2(g, "dw", "DepthwiseConv2dNative", "cat", "dwf");
    ints_attr(g, id, "strides", 4, S1);
    tfs_graph_set_attr_string(g, id, "padding", "SAME");
    id = node2(g, "bn", "FusedBatchNormV3", "dw", "scale");
    tfs_graph_add_input(g, id, "offset");
    tfs_graph_add_input(g, id, "mean");
    tfs_graph_add_input(g, id, "var");
    tfs_graph_set_attr_bool(g, id, "is_training", false);
    tfs_graph_set_attr_type(g, id, "U", TFS_DTYPE_FLOAT);
    id = node2(g, "pad", "Pad", "bn", "pads");
    tfs_graph_set_attr_type(g, id, "Tpaddings", TFS_DTYPE_INT32);
    node2(g, "tr", "Transpose", "pad", "perm");
    node2(g, "rs", "Reshape", "tr", "shape200");
    node2(g, "mm", "MatMul", "rs", "w");
    node2(g, "sm", "Softmax", "mm", NULL);
    node2(g, "lsm", "LogSoftmax", "mm", NULL);
    node2(g, "sum", "Sum", "mm", "axis1");
    id = node2(g, "mean_b", "Mean", "mm", "axes0");
    tfs_graph_set_attr_bool(g, id, "keep_dims", true);
    node2(g, "max", "Max", "lsm", "axis1");
    node2(g, "am", "ArgMax", "mm", "axis1");
    node2(g, "th", "Tanh", "mm", NULL);
    node2(g, "sg", "Sigmoid", "mm", NULL);
    node2(g, "d", "Sub", "th", "sg");
    node2(g, "mx", "Maximum", "d", "zero");
    id = node2(g, "addn", "AddN", "sm", "mx");
    tfs_graph_add_input(g, id, "th");
    tfs_graph_set_attr_int(g, id, "N", 3);
    id = rt_node(g, "cast", "Cast", "mm", NULL, TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, id, "SrcT", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_type(g, id, "DstT", TFS_DTYPE_INT32);
    node2(g, "x3", "Reshape", "pad", "shape3");
    id = node2(g, "bmm", "BatchMatMulV2", "x3", "x3");
    tfs_graph_set_attr_bool(g, id, "adj_y", true);
    id = rt_node(g, "sel", "Select", "flag", "sm", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, id, "lsm");
    return rt_session(g, opts);
}

static const char *const FETCH_A[] = {"addn", "cast", "sum", "mean_b", "max", "am", "bmm",
                                      "sel", "bn:1", "bn:2", "pad", "ba"};
static const char *const FETCH_B[] = {"sm", "d", "cat"};
static const char *const FETCH_C[] = {"mm"};
enum { NA = sizeof FETCH_A / sizeof *FETCH_A, NB = sizeof FETCH_B / sizeof *FETCH_B };

static void run_big(tfs_session *s, int n, bool fetch_a, tfs_tensor **out)
{
    int64_t d[4] = {n, 6, 6, 2};
    tfs_tensor *x = random_f32(4, d, (uint32_t)(100 + n));
    bool fl = n % 2 == 0;
    tfs_tensor *flag = rt_tensor(TFS_DTYPE_BOOL, 0, NULL, &fl);
    tfs_feed feeds[2] = {{"x", x}, {"flag", flag}};
    tfs_status st;
    enum tfs_code rc = tfs_session_run(s, feeds, 2, fetch_a ? FETCH_A : FETCH_B,
                                       fetch_a ? NA : NB, NULL, 0, out, &st);
    tfs_tensor_unref(x);
    tfs_tensor_unref(flag);
    ck_assert_msg(rc == TFS_OK, "batch %d: %s", n, st.msg);
}

START_TEST(test_plan_reuse_bit_identical)
{
    tfs_session_opts off = tfs_session_opts_default();
    off.disable_buffer_reuse = true;
    tfs_session *ref = big_session(&off), *s = big_session(NULL);
    static const int batches[] = {2, 3, 2, 1, 3, 2, 1};
    for (int r = 0; r < 7; r++) {
        tfs_tensor *want[NA], *got[NA];
        run_big(ref, batches[r], true, want);
        run_big(s, batches[r], true, got);
        for (int i = 0; i < NA; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s, batch %d, run %d", FETCH_A[i], batches[r], r);
            rt_assert_same(got[i], want[i], what);
            tfs_tensor_unref(got[i]);
            tfs_tensor_unref(want[i]);
        }
    }
    tfs_plan_stats p;
    tfs__session_plan_stats(s, &p);
    ck_assert_int_eq(p.mem_misses, 3);
    ck_assert_int_eq(p.mem_hits, 4);
    ck_assert_int_ge(p.planned_outputs, 4 * 12);   /* the intermediates, in every planned run */
    tfs__session_plan_stats(ref, &p);
    ck_assert_int_eq(p.planned_outputs, 0);
    tfs_session_free(ref);
    tfs_session_free(s);
}
END_TEST

/* ---- concurrency ----------------------------------------------------------------------------- */

enum { THREADS = 4, ITERS = 48, MAX_N = 3 };

typedef struct shared {
    tfs_session *s;
    tfs_tensor  *x[MAX_N + 1];          /* the input of batch n (made before the threads start) */
    tfs_tensor  *flag[MAX_N + 1];
    tfs_tensor  *want_a[MAX_N + 1][NA];
    tfs_tensor  *want_b[MAX_N + 1][NB];
    int          errors[THREADS];
} shared;

typedef struct worker {
    shared *sh;
    int     id;
} worker;

static bool same(const tfs_tensor *a, const tfs_tensor *b)
{
    return a->dtype == b->dtype && tfs_shape_equal(a->rank, a->dims, b->rank, b->dims) &&
           a->nbytes == b->nbytes && (a->nbytes == 0 || !memcmp(a->data, b->data, a->nbytes));
}

/* Each thread cycles through the batch sizes, two fetch sets out of three runs; no ck_assert
 * here (not thread-safe): mismatches and failures are counted. */
static void *work(void *arg)
{
    worker *w = arg;
    shared *sh = w->sh;
    for (int i = 0; i < ITERS; i++) {
        int n = 1 + (w->id + i) % MAX_N;
        bool fa = (i + w->id) % 3 != 0;
        tfs_tensor *got[NA];
        tfs_feed feeds[2] = {{"x", sh->x[n]}, {"flag", sh->flag[n]}};
        tfs_status st;
        if (i % 8 == 7) {   /* a third plan, evicting one of the two others */
            if (tfs_session_run(sh->s, feeds, 2, FETCH_C, 1, NULL, 0, got, &st) != TFS_OK)
                sh->errors[w->id]++;
            else
                tfs_tensor_unref(got[0]);
            continue;
        }
        if (tfs_session_run(sh->s, feeds, 2, fa ? FETCH_A : FETCH_B, fa ? NA : NB, NULL, 0, got,
                            &st) != TFS_OK) {
            sh->errors[w->id]++;
            continue;
        }
        for (int k = 0; k < (fa ? NA : NB); k++) {
            if (!same(got[k], fa ? sh->want_a[n][k] : sh->want_b[n][k]))
                sh->errors[w->id]++;
            tfs_tensor_unref(got[k]);
        }
    }
    return NULL;
}

START_TEST(test_plan_reuse_concurrent)
{
    tfs_session_opts off = tfs_session_opts_default(), tight = tfs_session_opts_default();
    off.disable_buffer_reuse = true;
    tight.plan_cache_size = 2;   /* three fetch sets: plans are evicted while others run them */
    tight.memory_plans = 2;      /* three batch sizes: so are memory plans */
    tfs_session *ref = big_session(&off);
    static shared sh;
    memset(&sh, 0, sizeof sh);
    sh.s = big_session(&tight);
    for (int n = 1; n <= MAX_N; n++) {
        run_big(ref, n, true, sh.want_a[n]);
        run_big(ref, n, false, sh.want_b[n]);
        int64_t d[4] = {n, 6, 6, 2};
        bool fl = n % 2 == 0;
        sh.x[n] = random_f32(4, d, (uint32_t)(100 + n));   /* run_big's input for batch n */
        sh.flag[n] = rt_tensor(TFS_DTYPE_BOOL, 0, NULL, &fl);
    }
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){&sh, t};
        ck_assert_int_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        ck_assert_msg(sh.errors[t] == 0, "thread %d: %d wrong or failed outputs", t, sh.errors[t]);
    tfs_plan_stats p;
    tfs__session_plan_stats(sh.s, &p);
    ck_assert_int_eq(p.plan_hits + p.plan_misses, THREADS * ITERS);
    ck_assert_int_gt(p.planned_outputs, 0);
    for (int n = 1; n <= MAX_N; n++) {
        tfs_tensor_unref(sh.x[n]);
        tfs_tensor_unref(sh.flag[n]);
        for (int k = 0; k < NA; k++)
            tfs_tensor_unref(sh.want_a[n][k]);
        for (int k = 0; k < NB; k++)
            tfs_tensor_unref(sh.want_b[n][k]);
    }
    tfs_session_free(sh.s);
    tfs_session_free(ref);
}
END_TEST

Suite *suite_runtime_plan_reuse(void)
{
    Suite *s = suite_create("runtime_plan_reuse");
    TCase *tc = tcase_create("reuse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_plan_reuse_bit_identical);
    tcase_add_test(tc, test_plan_reuse_concurrent);
    suite_add_tcase(s, tc);
    return s;
}
