/* Check suite for the stateful random ops (kernels/random.c) and their generators (rng.c): Philox
 * against Random123's known-answer vectors, numbers TensorFlow's documentation shows for given
 * seeds, the stream layout (which block each output comes from, how far a run moves the
 * generator), distributions over 1e5 samples, the truncation bound, generator state save and
 * restore (tfs_session_rng_state_*), generators inside library functions, and bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rng-impl.h"
#include "tests/runtime/helpers.h"

Suite *suite_runtime_random(void);

/* ---- Philox --------------------------------------------------------------------------------- */

START_TEST(test_random_philox_known_answers)
{
    /* Random123's kat_vectors, "philox4x32 10": counter, key -> output. */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        tfs__philox_block(kat[i], kat[i] + 4, out);
        for (int j = 0; j < 4; j++)
            ck_assert_msg(out[j] == kat[i][6 + j], "vector %d word %d: %08x, want %08x", i, j,
                          out[j], kat[i][6 + j]);
    }
    /* next() returns the block at the position, then moves one block. */
    tfs_philox p = {{0xa4093822, 0x299f31d0}, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}};
    uint32_t out[4];
    tfs__philox_next(&p, out);
    ck_assert_uint_eq(out[0], 0xd16cfe09);
    ck_assert_uint_eq(p.ctr[0], 0x243f6a89);
}
END_TEST

START_TEST(test_random_philox_seed_and_skip)
{
    tfs_philox p;
    tfs__philox_seed(&p, 0x1122334455667788ull, 0x99aabbccddeeff00ull);
    ck_assert_uint_eq(p.key[0], 0x55667788);
    ck_assert_uint_eq(p.key[1], 0x11223344);
    ck_assert(p.ctr[0] == 0 && p.ctr[1] == 0);
    ck_assert(p.ctr[2] == 0xddeeff00 && p.ctr[3] == 0x99aabbcc);
    /* Carries ripple through all four words. */
    p.ctr[0] = 0xffffffff;
    p.ctr[1] = 0xffffffff;
    p.ctr[2] = 0xffffffff;
    p.ctr[3] = 7;
    tfs__philox_skip(&p, 1);
    ck_assert(p.ctr[0] == 0 && p.ctr[1] == 0 && p.ctr[2] == 0 && p.ctr[3] == 8);
    tfs__philox_skip(&p, 0x100000003ull);
    ck_assert(p.ctr[0] == 3 && p.ctr[1] == 1 && p.ctr[2] == 0 && p.ctr[3] == 8);
}
END_TEST

/* ---- running random ops --------------------------------------------------------------------- */

/* A graph with node "r" of type `op` on a Const shape, attrs seed/seed2 and dtype (or Tout with
 * minval/maxval Consts for RandomUniformInt). */
static tfs_graph *random_graph(const char *op, enum tfs_dtype dt, int rank, const int64_t *dims,
                               int64_t seed, int64_t seed2)
{
    tfs_graph *g;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    int32_t shape[8];
    for (int i = 0; i < rank; i++)
        shape[i] = (int32_t)dims[i];
    int64_t r = rank;
    rt_const(g, "shape", rt_tensor(TFS_DTYPE_INT32, 1, &r, shape));
    int id = rt_node(g, "r", op, "shape", NULL, TFS_DTYPE_INT32);
    tfs_graph_set_attr_int(g, id, "seed", seed);
    tfs_graph_set_attr_int(g, id, "seed2", seed2);
    tfs_graph_set_attr_type(g, id, strcmp(op, "RandomUniformInt") ? "dtype" : "Tout", dt);
    return g;
}

/* RandomUniformInt's graph with minval lo and maxval hi. */
static tfs_graph *uniform_int_graph(enum tfs_dtype dt, int rank, const int64_t *dims, int64_t lo,
                                    int64_t hi, int64_t seed, int64_t seed2)
{
    tfs_graph *g = random_graph("RandomUniformInt", dt, rank, dims, seed, seed2);
    int32_t l32 = (int32_t)lo, h32 = (int32_t)hi;
    bool i32 = dt == TFS_DTYPE_INT32;
    rt_const(g, "lo", rt_tensor(dt, 0, NULL, i32 ? (const void *)&l32 : (const void *)&lo));
    rt_const(g, "hi", rt_tensor(dt, 0, NULL, i32 ? (const void *)&h32 : (const void *)&hi));
    int id = tfs_graph_find_node(g, "r");
    tfs_graph_add_input(g, id, "lo");
    tfs_graph_add_input(g, id, "hi");
    return g;
}

static tfs_tensor *run_r(tfs_session *s)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run1(s, NULL, 0, "r", &out, &st) == TFS_OK, "%s", st.msg);
    return out;
}

/* Word w (0-3) of the Philox block `block` blocks past TensorFlow's start for (seed, seed2). */
static uint32_t word_at(uint64_t seed, uint64_t seed2, uint64_t block, int w)
{
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)seed2,
                       (uint32_t)(seed2 >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
    tfs__philox_block(ctr, key, out);
    return out[w];
}

START_TEST(test_random_tensorflow_documented_values)
{
    /* tf.random.set_seed(5); tf.random.normal([2,2], 0, 1, tf.float32, seed=1) prints
     * [[-1.3768897, -0.01258316], [-0.169515, 1.0824056]] (TensorFlow 2.x API docs): a
     * RandomStandardNormal with seed=5, seed2=1. */
    tfs_session *s = rt_session(random_graph("RandomStandardNormal", TFS_DTYPE_FLOAT, 2,
                                             (const int64_t[]){2, 2}, 5, 1), NULL);
    tfs_tensor *out = run_r(s);
    tfs_test_assert_f32(out, 2, (const int64_t[]){2, 2},
                        (const float[]){-1.3768897f, -0.01258316f, -0.169515f, 1.0824056f}, 1e-6);
    tfs_tensor_unref(out);
    tfs_session_free(s);

    /* tf.random.set_seed(5); tf.random.uniform(shape=[], maxval=3, dtype=tf.int32, seed=10)
     * gives 2, then 0 (tf.random.uniform's docs): RandomUniformInt seed=5, seed2=10 in [0, 3). */
    s = rt_session(uniform_int_graph(TFS_DTYPE_INT32, 0, NULL, 0, 3, 5, 10), NULL);
    const int32_t want[2] = {2, 0};
    for (int i = 0; i < 2; i++) {
        out = run_r(s);
        ck_assert_int_eq(out->rank, 0);
        ck_assert_int_eq(*(int32_t *)out->data, want[i]);
        tfs_tensor_unref(out);
    }
    tfs_session_free(s);
}
END_TEST

START_TEST(test_random_stream_layout)
{
    /* RandomUniform float [6], seeds (11, 22): outputs 0-3 from block 0, 4-5 from block 1, each
     * the low 23 bits / 2^23; the next run starts 6 * 256 blocks further. */
    const uint64_t seed = 11, seed2 = 22;
    tfs_session *s = rt_session(random_graph("RandomUniform", TFS_DTYPE_FLOAT, 1,
                                             (const int64_t[]){6}, seed, seed2), NULL);
    for (int run = 0; run < 2; run++) {
        tfs_tensor *out = run_r(s);
        for (int i = 0; i < 6; i++) {
            uint32_t w = word_at(seed, seed2, (uint64_t)run * 6 * 256 + (uint64_t)i / 4, i % 4);
            float want = (float)((double)(w & 0x7fffff) / 8388608.0);
            ck_assert_msg(((float *)out->data)[i] == want, "run %d [%d]: %.9g, want %.9g", run, i,
                          ((float *)out->data)[i], want);
        }
        tfs_tensor_unref(out);
    }
    tfs_session_free(s);

    /* RandomUniform double [3]: two outputs per block from 20 + 32 bits. */
    s = rt_session(random_graph("RandomUniform", TFS_DTYPE_DOUBLE, 1, (const int64_t[]){3}, seed,
                                seed2), NULL);
    tfs_tensor *out = run_r(s);
    for (int i = 0; i < 3; i++) {
        uint32_t hi = word_at(seed, seed2, (uint64_t)i / 2, 2 * (i % 2));
        uint32_t lo = word_at(seed, seed2, (uint64_t)i / 2, 2 * (i % 2) + 1);
        double want = ((double)(hi & 0xfffff) * 4294967296.0 + lo) / 4503599627370496.0;
        ck_assert(((double *)out->data)[i] == want);
    }
    tfs_tensor_unref(out);
    tfs_session_free(s);

    /* RandomUniformInt int64 [3] in [-10, 1000): two outputs per block from 64-bit words. */
    s = rt_session(uniform_int_graph(TFS_DTYPE_INT64, 1, (const int64_t[]){3}, -10, 1000, seed,
                                     seed2), NULL);
    out = run_r(s);
    for (int i = 0; i < 3; i++) {
        uint64_t bits = word_at(seed, seed2, (uint64_t)i / 2, 2 * (i % 2)) |
                        (uint64_t)word_at(seed, seed2, (uint64_t)i / 2, 2 * (i % 2) + 1) << 32;
        ck_assert_int_eq(((int64_t *)out->data)[i], -10 + (int64_t)(bits % 1010));
    }
    tfs_tensor_unref(out);
    tfs_session_free(s);

    /* Groups do not depend on the output size: a shorter output is a prefix of a longer one
     * (truncated normal groups start 256 blocks apart whatever the rejections). */
    const char *ops[] = {"TruncatedNormal", "RandomStandardNormal"};
    for (int k = 0; k < 2; k++) {
        for (int d = 0; d < 2; d++) {
            enum tfs_dtype dt = d ? TFS_DTYPE_DOUBLE : TFS_DTYPE_FLOAT;
            s = rt_session(random_graph(ops[k], dt, 1, (const int64_t[]){10}, 3, 4), NULL);
            tfs_tensor *lng = run_r(s);
            tfs_session_free(s);
            s = rt_session(random_graph(ops[k], dt, 1, (const int64_t[]){7}, 3, 4), NULL);
            tfs_tensor *shrt = run_r(s);
            tfs_session_free(s);
            ck_assert_mem_eq(lng->data, shrt->data, shrt->nbytes);
            tfs_tensor_unref(lng);
            tfs_tensor_unref(shrt);
        }
    }
}
END_TEST

/* Mean and variance of a float or double tensor. */
static void moments(const tfs_tensor *t, double *mean, double *var, double *min, double *max)
{
    double s = 0, s2 = 0;
    *min = INFINITY;
    *max = -INFINITY;
    for (int64_t i = 0; i < t->nelem; i++) {
        double x = t->dtype == TFS_DTYPE_FLOAT ? ((float *)t->data)[i] : ((double *)t->data)[i];
        s += x;
        s2 += x * x;
        *min = x < *min ? x : *min;
        *max = x > *max ? x : *max;
    }
    *mean = s / (double)t->nelem;
    *var = s2 / (double)t->nelem - *mean * *mean;
}

START_TEST(test_random_distributions)
{
    /* 1e5 samples: bounds are about 5 standard errors of the mean and variance estimates. */
    const int64_t n = 100000;
    /* N(0, 1) truncated to (-2, 2): variance 1 - 2 * 2 * phi(2) / (Phi(2) - Phi(-2)). */
    double phi2 = exp(-2.0) / sqrt(2 * M_PI), mass = erf(2 / sqrt(2.0));
    double trunc_var = 1 - 4 * phi2 / mass;
    struct {
        const char *op;
        double mean, var, mean_tol, var_tol, lo, hi;
    } cases[] = {
        {"RandomUniform", 0.5, 1.0 / 12, 0.005, 0.002, 0, 1},
        {"RandomStandardNormal", 0, 1, 0.016, 0.025, -INFINITY, INFINITY},
        {"TruncatedNormal", 0, trunc_var, 0.014, 0.015, -2, 2},
    };
    for (int c = 0; c < 3; c++) {
        for (int d = 0; d < 2; d++) {
            enum tfs_dtype dt = d ? TFS_DTYPE_DOUBLE : TFS_DTYPE_FLOAT;
            tfs_session *s = rt_session(random_graph(cases[c].op, dt, 2,
                                                     (const int64_t[]){n / 4, 4}, 87654321, c),
                                        NULL);
            tfs_tensor *out = run_r(s);
            ck_assert(out->dtype == dt && out->rank == 2 && out->nelem == n);
            double mean, var, min, max;
            moments(out, &mean, &var, &min, &max);
            ck_assert_msg(fabs(mean - cases[c].mean) < cases[c].mean_tol &&
                              fabs(var - cases[c].var) < cases[c].var_tol,
                          "%s %s: mean %g var %g, want %g %g", cases[c].op,
                          tfs_dtype_short_name(dt), mean, var, cases[c].mean, cases[c].var);
            /* Uniform in [0, 1); truncated normal strictly inside (-2, 2). */
            ck_assert_msg(min >= cases[c].lo && max < cases[c].hi && min > -cases[c].hi,
                          "%s: range [%g, %g]", cases[c].op, min, max);
            tfs_tensor_unref(out);
            tfs_session_free(s);
        }
    }
    /* Integers in [-3, 5): every value about n / 8 times. */
    for (int d = 0; d < 2; d++) {
        enum tfs_dtype dt = d ? TFS_DTYPE_INT64 : TFS_DTYPE_INT32;
        tfs_session *s = rt_session(uniform_int_graph(dt, 1, &n, -3, 5, 1, 2), NULL);
        tfs_tensor *out = run_r(s);
        int64_t count[8] = {0};
        for (int64_t i = 0; i < n; i++) {
            int64_t x = d ? ((int64_t *)out->data)[i] : ((int32_t *)out->data)[i];
            ck_assert(x >= -3 && x < 5);
            count[x + 3]++;
        }
        for (int v = 0; v < 8; v++)   /* sd of a count: sqrt(n p (1 - p)) ~ 105 */
            ck_assert_msg(llabs(count[v] - n / 8) < 525, "value %d: %lld", v - 3,
                          (long long)count[v]);
        tfs_tensor_unref(out);
        tfs_session_free(s);
    }
}
END_TEST

/* ---- generator state ------------------------------------------------------------------------ */

/* Two random nodes: "r" (TruncatedNormal [5], seeds 0/0: random) and "u" (RandomUniform [3]). */
static tfs_session *two_rng_session(void)
{
    tfs_graph *g = random_graph("TruncatedNormal", TFS_DTYPE_FLOAT, 1, (const int64_t[]){5}, 0, 0);
    int64_t one = 1;
    rt_const(g, "shape3", rt_tensor(TFS_DTYPE_INT32, 1, &one, (const int32_t[]){3}));
    int u = rt_node(g, "u", "RandomUniform", "shape3", NULL, TFS_DTYPE_INT32);
    tfs_graph_set_attr_type(g, u, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_int(g, u, "seed", 1);
    tfs_graph_set_attr_int(g, u, "seed2", 2);
    return rt_session(g, NULL);
}

/* Runs r and u once; returns both outputs side by side in out[8]. */
static void run_both(tfs_session *s, float out[8])
{
    const char *fetch[2] = {"r", "u"};
    tfs_tensor *t[2];
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, NULL, 0, fetch, 2, NULL, 0, t, &st) == TFS_OK, "%s",
                  st.msg);
    memcpy(out, t[0]->data, 5 * sizeof(float));
    memcpy(out + 5, t[1]->data, 3 * sizeof(float));
    tfs_tensor_unref(t[0]);
    tfs_tensor_unref(t[1]);
}

START_TEST(test_random_state_save_restore)
{
    enum { N = 3, M = 4 };
    tfs_session *s = two_rng_session();
    tfs_status st;
    ck_assert_int_eq(tfs_session_rng_state_count(s), 2);
    /* Before any run: seeds give the position (key = seed, counter = seed2 << 64). */
    const char *fn = "x", *node = NULL;
    tfs_rng_state rs;
    int iu = tfs_session_rng_state_find(s, NULL, "u");
    ck_assert_int_eq(iu, 1);
    ck_assert_int_eq(tfs_session_rng_state_get(s, iu, &fn, &node, &rs, &st), TFS_OK);
    ck_assert(fn == NULL && !strcmp(node, "u"));
    ck_assert(rs.key == 1 && rs.counter_lo == 0 && rs.counter_hi == 2);
    ck_assert_int_eq(tfs_session_rng_state_find(s, NULL, "shape"), -1);
    ck_assert_int_eq(tfs_session_rng_state_find(s, "f", "u"), -1);

    float out[8], prev[8];
    for (int i = 0; i < N; i++) {
        run_both(s, out);
        ck_assert(i == 0 || memcmp(out, prev, sizeof out) != 0);   /* new numbers each run */
        memcpy(prev, out, sizeof out);
    }
    /* A run of 3 outputs moves the generator 3 * 256 blocks. */
    ck_assert_int_eq(tfs_session_rng_state_get(s, iu, NULL, NULL, &rs, &st), TFS_OK);
    ck_assert_uint_eq(rs.counter_lo, (uint64_t)N * 3 * 256);

    tfs_rng_state saved[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(tfs_session_rng_state_get(s, i, NULL, NULL, &saved[i], &st), TFS_OK);
    float want[M][8], got[8];
    for (int i = 0; i < M; i++)
        run_both(s, want[i]);
    /* Restore in the same session: the same M runs again. */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(tfs_session_rng_state_set(s, i, &saved[i], &st), TFS_OK);
    for (int i = 0; i < M; i++) {
        run_both(s, got);
        ck_assert_mem_eq(got, want[i], sizeof got);
    }
    /* And in a new session over the same graph (a resumed training run), by node name. The
     * randomly seeded node would otherwise draw other numbers. */
    tfs_session *s2 = two_rng_session();
    run_both(s2, got);
    ck_assert(memcmp(got, want[0], 5 * sizeof(float)) != 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tfs_session_rng_state_get(s, i, NULL, &node, &rs, &st), TFS_OK);
        int j = tfs_session_rng_state_find(s2, NULL, node);
        ck_assert_int_ge(j, 0);
        ck_assert_int_eq(tfs_session_rng_state_set(s2, j, &saved[i], &st), TFS_OK);
    }
    for (int i = 0; i < M; i++) {
        run_both(s2, got);
        ck_assert_mem_eq(got, want[i], sizeof got);
    }
    ck_assert_int_eq(tfs_session_rng_state_get(s, 2, NULL, NULL, &rs, &st), TFS_OUT_OF_RANGE);
    ck_assert_int_eq(tfs_session_rng_state_set(s, -1, &rs, &st), TFS_OUT_OF_RANGE);
    tfs_session_free(s2);
    tfs_session_free(s);
}
END_TEST

static void set_func(tfs_graph *g, int id, const char *attr, const char *fname)
{
    tfs_attr_value v = {.kind = TFS_ATTR_FUNC, .func = (char *)fname};
    tfs_graph_set_attr(g, id, attr, &v);
}

static void set_types(tfs_graph *g, int id, const char *attr, enum tfs_dtype type)
{
    tfs_attr_value v = {.kind = TFS_ATTR_LIST};
    v.list.kind = TFS_ATTR_TYPE;
    v.list.n = 1;
    v.list.type = &type;
    tfs_graph_set_attr(g, id, attr, &v);
}

START_TEST(test_random_in_function)
{
    /* Library function "noise"(shape) = RandomUniform(shape) seeds (7, 9), called through If;
     * the graph's own "top" generator comes first in the enumeration. */
    tfs_graph *body;
    ck_assert_int_eq(tfs_graph_new(&body, NULL), TFS_OK);
    rt_placeholder(body, "shape", TFS_DTYPE_INT32);
    int r = rt_node(body, "r", "RandomUniform", "shape", NULL, TFS_DTYPE_INT32);
    tfs_graph_set_attr_type(body, r, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_int(body, r, "seed", 7);
    tfs_graph_set_attr_int(body, r, "seed2", 9);
    tfs_status st;
    ck_assert_int_eq(tfs_graph_finalize(body, &st), TFS_OK);
    tfs_graph *g = random_graph("RandomStandardNormal", TFS_DTYPE_FLOAT, 1, (const int64_t[]){2},
                                1, 1);
    tfs_graph_set_attr_int(g, tfs_graph_find_node(g, "r"), "seed", 1);
    tfs_graph_add_function(g, "noise", body, 1, (const char *const[]){"shape"}, 1,
                           (const char *const[]){"r"});
    tfs_graph_unref(body);
    rt_const(g, "c", rt_tensor(TFS_DTYPE_BOOL, 0, NULL, (const bool[]){true}));
    int id = tfs_graph_add_node(g, "y", "If");
    tfs_graph_add_input(g, id, "c");
    tfs_graph_add_input(g, id, "shape");
    tfs_graph_set_attr_type(g, id, "Tcond", TFS_DTYPE_BOOL);
    set_types(g, id, "Tin", TFS_DTYPE_INT32);
    set_types(g, id, "Tout", TFS_DTYPE_FLOAT);
    set_func(g, id, "then_branch", "noise");
    set_func(g, id, "else_branch", "noise");
    tfs_session *s = rt_session(g, NULL);
    ck_assert_int_eq(tfs_session_rng_state_count(s), 2);
    const char *fn = NULL, *node = NULL;
    tfs_rng_state start;
    ck_assert_int_eq(tfs_session_rng_state_get(s, 1, &fn, &node, &start, &st), TFS_OK);
    ck_assert(fn && !strcmp(fn, "noise") && !strcmp(node, "r"));
    ck_assert_int_eq(tfs_session_rng_state_find(s, "noise", "r"), 1);
    ck_assert_int_eq(tfs_session_rng_state_find(s, NULL, "r"), 0);

    tfs_tensor *first = NULL, *second = NULL, *again = NULL;
    ck_assert_msg(rt_run1(s, NULL, 0, "y", &first, &st) == TFS_OK, "%s", st.msg);
    for (int i = 0; i < 2; i++) {
        uint32_t w = word_at(7, 9, 0, i);
        ck_assert(((float *)first->data)[i] == (float)((double)(w & 0x7fffff) / 8388608.0));
    }
    ck_assert_int_eq(rt_run1(s, NULL, 0, "y", &second, &st), TFS_OK);
    ck_assert(memcmp(first->data, second->data, first->nbytes) != 0);
    ck_assert_int_eq(tfs_session_rng_state_set(s, 1, &start, &st), TFS_OK);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "y", &again, &st), TFS_OK);
    ck_assert_mem_eq(first->data, again->data, first->nbytes);
    tfs_tensor_unref(first);
    tfs_tensor_unref(second);
    tfs_tensor_unref(again);
    tfs_session_free(s);
}
END_TEST

/* ---- bad inputs ----------------------------------------------------------------------------- */

static enum tfs_code run_graph(tfs_graph *g, tfs_tensor **out, tfs_status *st)
{
    tfs_session *s = rt_session(g, NULL);
    enum tfs_code rc = rt_run1(s, NULL, 0, "r", out, st);
    tfs_session_free(s);
    return rc;
}

START_TEST(test_random_bad_inputs)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    /* A negative dimension. */
    ck_assert_int_eq(run_graph(random_graph("RandomUniform", TFS_DTYPE_FLOAT, 2,
                                            (const int64_t[]){2, -1}, 1, 1), &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Dimension -1 must be >= 0");
    /* An unsupported dtype. */
    ck_assert_int_eq(run_graph(random_graph("RandomStandardNormal", TFS_DTYPE_INT32, 1,
                                            (const int64_t[]){2}, 1, 1), &out, &st),
                     TFS_UNIMPLEMENTED);
    /* A shape that is not a vector. */
    tfs_graph *g;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    rt_const(g, "shape", rt_tensor(TFS_DTYPE_INT32, 2, (const int64_t[]){1, 1}, NULL));
    int id = rt_node(g, "r", "TruncatedNormal", "shape", NULL, TFS_DTYPE_INT32);
    tfs_graph_set_attr_type(g, id, "dtype", TFS_DTYPE_FLOAT);
    ck_assert_int_eq(run_graph(g, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "shape must be a vector of {int32,int64}");
    /* minval >= maxval, unless the output is empty. */
    ck_assert_int_eq(run_graph(uniform_int_graph(TFS_DTYPE_INT32, 1, (const int64_t[]){2}, 4, 4,
                                                 1, 1), &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Need minval < maxval: 4 >= 4");
    ck_assert_int_eq(run_graph(uniform_int_graph(TFS_DTYPE_INT64, 1, (const int64_t[]){0}, 4, 4,
                                                 1, 1), &out, &st),
                     TFS_OK);
    ck_assert_int_eq(out->nelem, 0);
    tfs_tensor_unref(out);
    /* minval of another type than Tout. */
    g = random_graph("RandomUniformInt", TFS_DTYPE_INT64, 1, (const int64_t[]){2}, 1, 1);
    rt_const(g, "lo", rt_tensor(TFS_DTYPE_INT32, 0, NULL, NULL));
    rt_const(g, "hi", rt_tensor(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3}));
    tfs_graph_add_input(g, tfs_graph_find_node(g, "r"), "lo");
    tfs_graph_add_input(g, tfs_graph_find_node(g, "r"), "hi");
    ck_assert_int_eq(run_graph(g, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "minval must be int64");
    /* An empty float output draws nothing and works. */
    ck_assert_int_eq(run_graph(random_graph("TruncatedNormal", TFS_DTYPE_DOUBLE, 2,
                                            (const int64_t[]){0, 3}, 1, 1), &out, &st),
                     TFS_OK);
    ck_assert(out->nelem == 0 && out->rank == 2);
    tfs_tensor_unref(out);
}
END_TEST

Suite *suite_runtime_random(void)
{
    Suite *s = suite_create("runtime_random");
    TCase *tc = tcase_create("random");
    tcase_add_test(tc, test_random_philox_known_answers);
    tcase_add_test(tc, test_random_philox_seed_and_skip);
    tcase_add_test(tc, test_random_tensorflow_documented_values);
    tcase_add_test(tc, test_random_stream_layout);
    tcase_add_test(tc, test_random_distributions);
    tcase_add_test(tc, test_random_state_save_restore);
    tcase_add_test(tc, test_random_in_function);
    tcase_add_test(tc, test_random_bad_inputs);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}
