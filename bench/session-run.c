/* session-run: the time one tfs_session_run takes, for graphs small enough that the session's own
 * work (planning, allocation) shows next to the kernels'. Not a test; run by hand:
 *     build/bench/session-run [runs]
 * Graphs, built with the graph API:
 *   half_plus_two  y = 0.5 * x + 2, x float [3] (the demo model's graph)
 *   mlp            784-512-256-10: MatMul + BiasAdd + Relu twice, MatMul + BiasAdd + Softmax,
 *                  random weights, at batch 1 and 64
 *   chain          8 elementwise ops on x float [1024, 1024] (4 MiB per value): where the
 *                  allocation of outputs, not planning, is what a memory plan saves
 * Each case runs a warm-up, then `runs` timed runs (default 20000, a tenth of that for batch 64,
 * a twentieth for the chain), and prints the median, 10th and 90th percentile of the wall time
 * and the calling thread's mean CPU time per run, in microseconds. Uses only the public API, so
 * the same file builds against older trees to compare before/after; where sessions have memory
 * plans, NO_REUSE=1 in the environment turns buffer reuse off (the plan cache stays on).
 *
 *     build/bench/session-run --model DIR [runs] [threads]
 * times a SavedModel version folder instead (tfserve-train's exports, tfserve-cnn-model's CNN),
 * loaded as tfserve loads it (serving rewrites on), through its serving_default signature with
 * one float input whose dims other than the batch come from the signature: at batch 1 and 64,
 * with the intra-op pool at `threads` (default 1) for both, and prints the cost per row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"
#include "savedmodel/savedmodel.h"

static void die(const char *what, const tfs_status *st)
{
    fprintf(stderr, "session-run: %s: %s\n", what, st ? st->msg : "failed");
    exit(1);
}

static double clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static tfs_tensor *random_tensor(int rank, const int64_t *dims, uint32_t seed, float scale)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st) != TFS_OK)
        die("tensor", &st);
    float *v = t->data;
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < t->nelem; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = ((float)(x >> 8) / (float)(1u << 24) - 0.5f) * scale;
    }
    return t;
}

static void add_const(tfs_graph *g, const char *name, tfs_tensor *t)
{
    int id = tfs_graph_add_node(g, name, "Const");
    tfs_graph_set_attr_type(g, id, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_tensor(g, id, "value", t);
    tfs_tensor_unref(t);
}

static void add_op(tfs_graph *g, const char *name, const char *op, const char *a, const char *b)
{
    int id = tfs_graph_add_node(g, name, op);
    tfs_graph_add_input(g, id, a);
    if (b)
        tfs_graph_add_input(g, id, b);
    tfs_graph_set_attr_type(g, id, "T", TFS_DTYPE_FLOAT);
}

static tfs_session *open_session(tfs_graph *g)
{
    tfs_status st;
    tfs_session *s = NULL;
    tfs_session_opts opts = tfs_session_opts_default();
#ifdef TFS_SESSION_MEMORY_PLANS   /* trees with memory plans: NO_REUSE=1 turns them off */
    const char *no_reuse = getenv("NO_REUSE");
    opts.disable_buffer_reuse = no_reuse && !strcmp(no_reuse, "1");
#endif
    if (tfs_graph_finalize(g, &st) != TFS_OK)
        die("finalize", &st);
    if (tfs_session_new(g, &opts, &s, &st) != TFS_OK)
        die("session", &st);
    tfs_graph_unref(g);
    return s;
}

static tfs_session *half_plus_two(void)
{
    tfs_graph *g = NULL;
    tfs_graph_new(&g, NULL);
    int x = tfs_graph_add_node(g, "x", "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
    tfs_tensor *a = random_tensor(0, NULL, 1, 1), *b = random_tensor(0, NULL, 2, 1);
    *(float *)a->data = 0.5f;
    *(float *)b->data = 2.0f;
    add_const(g, "a", a);
    add_const(g, "b", b);
    add_op(g, "mul", "Mul", "a", "x");
    add_op(g, "y", "Add", "mul", "b");
    return open_session(g);
}

static tfs_session *mlp(void)
{
    static const int64_t width[4] = {784, 512, 256, 10};
    tfs_graph *g = NULL;
    tfs_graph_new(&g, NULL);
    int x = tfs_graph_add_node(g, "x", "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
    char prev[32] = "x";
    for (int l = 0; l < 3; l++) {
        char w[32], bias[32], mm[32], ba[32], act[32];
        snprintf(w, sizeof w, "w%d", l);
        snprintf(bias, sizeof bias, "b%d", l);
        snprintf(mm, sizeof mm, "matmul%d", l);
        snprintf(ba, sizeof ba, "biasadd%d", l);
        snprintf(act, sizeof act, l < 2 ? "relu%d" : "y", l);
        int64_t wd[2] = {width[l], width[l + 1]}, bd[1] = {width[l + 1]};
        add_const(g, w, random_tensor(2, wd, (uint32_t)(10 + l), 0.1f));
        add_const(g, bias, random_tensor(1, bd, (uint32_t)(20 + l), 0.1f));
        add_op(g, mm, "MatMul", prev, w);
        add_op(g, ba, "BiasAdd", mm, bias);
        add_op(g, act, l < 2 ? "Relu" : "Softmax", ba, NULL);
        snprintf(prev, sizeof prev, "%s", act);
    }
    return open_session(g);
}

/* y = sigmoid(tanh(relu(x * a + b) * a) + b) * a, every value [1024, 1024]. */
static tfs_session *chain(void)
{
    tfs_graph *g = NULL;
    tfs_graph_new(&g, NULL);
    int x = tfs_graph_add_node(g, "x", "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
    tfs_tensor *a = random_tensor(0, NULL, 1, 1), *b = random_tensor(0, NULL, 2, 1);
    add_const(g, "a", a);
    add_const(g, "b", b);
    add_op(g, "m1", "Mul", "x", "a");
    add_op(g, "a1", "AddV2", "m1", "b");
    add_op(g, "r", "Relu", "a1", NULL);
    add_op(g, "m2", "Mul", "r", "a");
    add_op(g, "t", "Tanh", "m2", NULL);
    add_op(g, "a2", "AddV2", "t", "b");
    add_op(g, "s", "Sigmoid", "a2", NULL);
    add_op(g, "y", "Mul", "s", "a");
    return open_session(g);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void time_case(const char *name, tfs_session *s, tfs_tensor *x, int runs)
{
    tfs_feed feed = {"x", x};
    const char *fetch = "y";
    tfs_status st;
    double *t = malloc(sizeof *t * (size_t)runs), cpu = 0;
    if (!t)
        die("malloc", NULL);
    for (int i = -runs / 10 - 10; i < runs; i++) {   /* the first tenth warms up, untimed */
        tfs_tensor *y = NULL;
        if (i == 0)
            cpu = clock_us(CLOCK_THREAD_CPUTIME_ID);
        double t0 = clock_us(CLOCK_MONOTONIC);
        if (tfs_session_run(s, &feed, 1, &fetch, 1, NULL, 0, &y, &st) != TFS_OK)
            die(name, &st);
        double t1 = clock_us(CLOCK_MONOTONIC);
        tfs_tensor_unref(y);
        if (i >= 0)
            t[i] = t1 - t0;
    }
    cpu = (clock_us(CLOCK_THREAD_CPUTIME_ID) - cpu) / runs;
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    /* The calling thread's CPU time (user + system: page faults count) per run, on average, is
     * less disturbed than wall time when other processes share the cores. */
    printf("%-24s median %9.2f us   p10 %9.2f   p90 %9.2f   cpu/run %9.2f   (%d runs)\n", name,
           t[runs / 2], t[runs / 10], t[runs * 9 / 10], cpu, runs);
    free(t);
}

/* Median wall and mean CPU time per tfs_savedmodel_run of sig on x, in microseconds. */
static void time_model(const tfs_savedmodel *m, const tfs_signature *sig, tfs_tensor *x, int runs,
                       double *wall, double *cpu)
{
    tfs_named_tensor in = {sig->inputs[0].alias, x};
    tfs_tensor *out[16] = {NULL};
    tfs_status st;
    double *t = malloc(sizeof *t * (size_t)runs);
    if (!t || sig->n_outputs > 16)
        die("malloc", NULL);
    for (int i = -runs / 10 - 3; i < runs; i++) {   /* the first tenth warms up, untimed */
        if (i == 0)
            *cpu = clock_us(CLOCK_THREAD_CPUTIME_ID);
        double t0 = clock_us(CLOCK_MONOTONIC);
        if (tfs_savedmodel_run(m, sig, &in, 1, out, &st) != TFS_OK)
            die("run", &st);
        double t1 = clock_us(CLOCK_MONOTONIC);
        for (int o = 0; o < sig->n_outputs; o++)
            tfs_tensor_unref(out[o]);
        if (i >= 0)
            t[i] = t1 - t0;
    }
    *cpu = (clock_us(CLOCK_THREAD_CPUTIME_ID) - *cpu) / runs;
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    *wall = t[runs / 2];
    free(t);
}

static int model_main(const char *dir, int runs, int threads)
{
    tfs_status st;
    tfs_savedmodel *m = NULL;
    tfs_savedmodel_opts o = tfs_savedmodel_opts_default();
    if (tfs_savedmodel_load(dir, &o, &m, &st) != TFS_OK)
        die(dir, &st);
    const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
    if (!sig || sig->n_inputs != 1 || sig->inputs[0].shape.rank < 1)
        die("serving_default: want one input of known rank", NULL);
    tfs_runtime_set_num_threads(threads);
    const tfs_shape *sh = &sig->inputs[0].shape;
    static const int64_t batches[2] = {1, 64};
    double per_row[2] = {0};
    for (int b = 0; b < 2; b++) {
        int64_t dims[TFS_MAX_RANK];
        dims[0] = batches[b];
        for (int d = 1; d < sh->rank; d++)
            dims[d] = sh->dims[d] > 0 ? sh->dims[d] : 1;
        tfs_tensor *x = random_tensor(sh->rank, dims, 7, 1);
        int n = b == 0 ? runs : runs / 16 + 1;
        double wall = 0, cpu = 0;
        time_model(m, sig, x, n, &wall, &cpu);
        tfs_tensor_unref(x);
        per_row[b] = cpu / (double)batches[b];
        printf("%s b%-3lld threads %d: median %9.1f us  cpu/run %9.1f us  cpu/row %8.2f us  "
               "(%d runs)\n", dir, (long long)batches[b], threads, wall, cpu, per_row[b], n);
    }
    printf("%s: cpu per row, batch 64 / batch 1 = %.3f\n", dir, per_row[1] / per_row[0]);
    tfs_savedmodel_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--model"))
        return model_main(argv[2], argc > 3 ? atoi(argv[3]) : 2000, argc > 4 ? atoi(argv[4]) : 1);
    int runs = argc > 1 ? atoi(argv[1]) : 20000;
    if (runs < 10)
        runs = 10;
    tfs_session *s = half_plus_two();
    int64_t d3[1] = {3};
    tfs_tensor *x = random_tensor(1, d3, 3, 4);
    time_case("half_plus_two [3]", s, x, runs);
    tfs_tensor_unref(x);
    tfs_session_free(s);

    s = mlp();
    int64_t d1[2] = {1, 784}, d64[2] = {64, 784};
    x = random_tensor(2, d1, 4, 1);
    time_case("mlp 784-512-256-10 b1", s, x, runs);
    tfs_tensor_unref(x);
    x = random_tensor(2, d64, 5, 1);
    time_case("mlp 784-512-256-10 b64", s, x, runs / 10);
    tfs_tensor_unref(x);
    tfs_session_free(s);

    s = chain();
    int64_t dc[2] = {1024, 1024};
    x = random_tensor(2, dc, 6, 2);
    time_case("chain 8 ops [1024,1024]", s, x, runs / 20);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    return 0;
}
