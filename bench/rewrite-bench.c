/* tfserve-rewrite-bench DIR [RUNS]: what the graph rewrites at load buy on a SavedModel (e.g. the
 * small CNN that tfserve-cnn-model writes): loads DIR twice, with rewrites off and on, prints the
 * node counts and each rewrite's count, checks that serving_default answers the same (largest
 * difference relative to the largest output), and times tfs_savedmodel_run per request at batch
 * 1 and 64 -- RUNS timed runs each (default 400 at batch 1, a quarter of that at 64), off and on
 * interleaved in blocks so that drift hits both alike -- printing median, p10 and p90 of the wall
 * time and of the calling thread's CPU time (steadier on a shared machine, and the whole cost
 * when the GEMM runs on the calling thread, e.g. OPENBLAS_NUM_THREADS=1).
 * The input is the model's first input, float, with its declared shape and batch N (values in
 * [0, 1)). A benchmark helper, not a test: see bench/README.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "savedmodel/savedmodel.h"

static double now_us(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static tfs_savedmodel *load(const char *dir, bool rewrites)
{
    tfs_savedmodel_opts o = tfs_savedmodel_opts_default();
    o.disable_graph_rewrites = !rewrites;
    tfs_savedmodel *m = NULL;
    tfs_status st;
    if (tfs_savedmodel_load(dir, &o, &m, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-rewrite-bench: %s: %s\n", dir, st.msg);
        exit(1);
    }
    return m;
}

static tfs_tensor *make_input(const tfs_tensor_info *in, int64_t batch)
{
    int64_t dims[TFS_MAX_RANK];
    int rank = in->shape.rank > 0 ? in->shape.rank : 2;
    for (int d = 0; d < rank; d++)
        dims[d] = d == 0 ? batch : in->shape.dims[d] > 0 ? in->shape.dims[d] : 1;
    tfs_tensor *t = NULL;
    tfs_status st;
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-rewrite-bench: %s\n", st.msg);
        exit(1);
    }
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = (float)(0.5 + 0.5 * sin(0.37 * (double)i));
    return t;
}

static tfs_tensor *run(const tfs_savedmodel *m, const tfs_signature *sig, tfs_tensor *x)
{
    tfs_named_tensor in = {sig->inputs[0].alias, x};
    tfs_tensor *out[8] = {NULL};
    tfs_status st;
    if (sig->n_outputs > 8 || tfs_savedmodel_run(m, sig, &in, 1, out, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-rewrite-bench: run: %s\n", st.msg);
        exit(1);
    }
    for (int i = 1; i < sig->n_outputs; i++)
        tfs_tensor_unref(out[i]);
    return out[0];
}

static void bench_batch(tfs_savedmodel *const *m, const tfs_signature *const *sig, int64_t batch,
                        int runs)
{
    tfs_tensor *x = make_input(&sig[0]->inputs[0], batch);
    tfs_tensor *a = run(m[0], sig[0], x), *b = run(m[1], sig[1], x);
    double max_ref = 0, max_diff = 0;
    const float *pa = a->data, *pb = b->data;
    for (int64_t i = 0; i < a->nelem && a->dtype == TFS_DTYPE_FLOAT; i++) {
        max_ref = fmax(max_ref, fabs(pa[i]));
        max_diff = fmax(max_diff, fabs((double)pa[i] - pb[i]));
    }
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    double *t[2], *c[2];
    for (int k = 0; k < 2; k++) {
        t[k] = malloc((size_t)runs * sizeof(double));
        c[k] = malloc((size_t)runs * sizeof(double));
    }
    for (int w = 0; w < 5; w++)   /* warm up: plans, caches */
        for (int k = 0; k < 2; k++)
            tfs_tensor_unref(run(m[k], sig[k], x));
    const int block = 10;
    for (int done = 0; done < runs; done += block)
        for (int k = 0; k < 2; k++)
            for (int i = done; i < done + block && i < runs; i++) {
                double t0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
                tfs_tensor_unref(run(m[k], sig[k], x));
                t[k][i] = now_us(CLOCK_MONOTONIC) - t0;
                c[k][i] = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
            }
    printf("batch %-3lld  outputs agree within %.2g of max |y| (%.3g)\n", (long long)batch,
           max_ref > 0 ? max_diff / max_ref : max_diff, max_ref);
    double med[2], cmed[2];
    for (int k = 0; k < 2; k++) {
        qsort(t[k], (size_t)runs, sizeof(double), cmp_double);
        qsort(c[k], (size_t)runs, sizeof(double), cmp_double);
        med[k] = t[k][runs / 2];
        cmed[k] = c[k][runs / 2];
        printf("  rewrites %-3s  wall: median %9.1f us  p10 %9.1f  p90 %9.1f  (%.0f samples/s);"
               "  thread CPU: median %9.1f us  p10 %9.1f  (%d runs)\n",
               k ? "on" : "off", med[k], t[k][runs / 10], t[k][runs * 9 / 10],
               1e6 * (double)batch / med[k], cmed[k], c[k][runs / 10], runs);
        free(t[k]);
        free(c[k]);
    }
    printf("  on/off: wall %.3f, thread CPU %.3f\n", med[1] / med[0], cmed[1] / cmed[0]);
    tfs_tensor_unref(x);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s DIR [RUNS]\nTimes serving_default of the SavedModel version "
                "folder DIR with graph rewrites off and on, at batch 1 and 64.\n", argv[0]);
        return 2;
    }
    int runs = argc == 3 ? atoi(argv[2]) : 400;
    if (runs < 10)
        runs = 10;
    tfs_savedmodel *m[2] = {load(argv[1], false), load(argv[1], true)};
    const tfs_signature *sig[2] = {tfs_savedmodel_signature(m[0], "serving_default"),
                                   tfs_savedmodel_signature(m[1], "serving_default")};
    if (!sig[0] || !sig[1] || sig[0]->n_inputs < 1 || sig[0]->n_outputs < 1) {
        fprintf(stderr, "tfserve-rewrite-bench: no serving_default signature with inputs\n");
        return 1;
    }
    const tfs_rewrite_stats *r = tfs_savedmodel_rewrite_stats(m[1]);
    printf("%s\n  graph: %d nodes imported; serving_default %s the rewritten graph\n", argv[1],
           tfs_graph_node_count(tfs_session_graph(tfs_savedmodel_session(m[0]))),
           tfs_savedmodel_signature_rewritten(m[1], sig[1]) ? "runs on" : "does NOT run on");
    printf("  served subgraph %d -> %d nodes (%d fewer): %d variables frozen, constant folding %d, "
           "identity removal %d, batch norm folding %d, matmul fusion %d, conv2d fusion %d\n",
           r->nodes_before, r->nodes_after, r->nodes_before - r->nodes_after, r->variables_frozen,
           r->constants_folded, r->identities_removed, r->batch_norms_folded, r->matmuls_fused,
           r->conv2ds_fused);
    bench_batch(m, sig, 1, runs);
    bench_batch(m, sig, 64, runs / 4 > 10 ? runs / 4 : 10);
    tfs_savedmodel_free(m[0]);
    tfs_savedmodel_free(m[1]);
    return 0;
}
