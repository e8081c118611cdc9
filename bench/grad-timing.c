/* grad-timing: the time of one Conv2DBackpropFilter and one Conv2DBackpropInput next to the
 * forward Conv2D on the same shapes, through session runs in one process, for the two
 * convolutions of the small CNN (bench/cnn-model.c) at batch 64, SAME, stride 1:
 *     conv1: input [64,28,28,1],  filter [5,5,1,32]
 *     conv2: input [64,14,14,32], filter [5,5,32,64]
 * Each op is one GEMM of the same 2*N*OH*OW*KH*KW*C*OC flops (plus im2col / col2im). The three ops
 * run in alternating rounds, so that load from other processes hits them alike; printed are the
 * median and the best of the rounds. Not a test; run by hand (OPENBLAS_NUM_THREADS as you train):
 *     build/bench/grad-timing [rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"

#define MAX_ROUNDS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const tfs_status *st)
{
    fprintf(stderr, "grad-timing: %s: %s\n", what, st->msg);
    exit(1);
}

static tfs_tensor *random_tensor(int rank, const int64_t *dims, uint32_t seed)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st) != TFS_OK)
        die("tensor", &st);
    float *v = t->data;
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < t->nelem; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)(x >> 8) / (float)(1u << 24) - 0.5f;
    }
    return t;
}

static tfs_tensor *sizes(const int64_t *d)
{
    int64_t n[1] = {4};
    tfs_tensor *t = NULL;
    tfs_status st;
    if (tfs_tensor_new(TFS_DTYPE_INT32, 1, n, &t, &st) != TFS_OK)
        die("tensor", &st);
    for (int i = 0; i < 4; i++)
        ((int32_t *)t->data)[i] = (int32_t)d[i];
    return t;
}

/* A session computing op(a, b[, c]) of placeholders, SAME, stride 1. */
static tfs_session *one_op(const char *op, int n_in, const enum tfs_dtype *dts)
{
    static const char *const names[3] = {"a", "b", "c"};
    tfs_graph *g = NULL;
    tfs_status st;
    tfs_graph_new(&g, NULL);
    for (int i = 0; i < n_in; i++) {
        int p = tfs_graph_add_node(g, names[i], "Placeholder");
        tfs_graph_set_attr_type(g, p, "dtype", dts[i]);
    }
    int y = tfs_graph_add_node(g, "y", op);
    for (int i = 0; i < n_in; i++)
        tfs_graph_add_input(g, y, names[i]);
    tfs_graph_set_attr_type(g, y, "T", TFS_DTYPE_FLOAT);
    int64_t strides[4] = {1, 1, 1, 1};
    tfs_attr_value a = {.kind = TFS_ATTR_LIST};
    a.list.kind = TFS_ATTR_I;
    a.list.n = 4;
    a.list.i = strides;
    tfs_graph_set_attr(g, y, "strides", &a);
    tfs_graph_set_attr_string(g, y, "padding", "SAME");
    tfs_session *s = NULL;
    if (tfs_graph_finalize(g, &st) != TFS_OK || tfs_session_new(g, NULL, &s, &st) != TFS_OK)
        die(op, &st);
    tfs_graph_unref(g);
    return s;
}

typedef struct job {
    const char  *name;
    tfs_session *s;
    int          n_in;
    tfs_tensor  *in[3];
    double       t[MAX_ROUNDS];
} job;

static double run(job *j)
{
    static const char *const names[3] = {"a", "b", "c"};
    tfs_feed feeds[3];
    for (int i = 0; i < j->n_in; i++)
        feeds[i] = (tfs_feed){names[i], j->in[i]};
    const char *fetch = "y";
    tfs_tensor *out = NULL;
    tfs_status st;
    double t0 = now();
    if (tfs_session_run(j->s, feeds, j->n_in, &fetch, 1, NULL, 0, &out, &st) != TFS_OK)
        die(j->name, &st);
    double t1 = now();
    tfs_tensor_unref(out);
    return t1 - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench(const char *label, const int64_t *xd, const int64_t *fd, int rounds)
{
    int64_t yd[4] = {xd[0], xd[1], xd[2], fd[3]};
    tfs_tensor *x = random_tensor(4, xd, 1), *f = random_tensor(4, fd, 2);
    tfs_tensor *dy = random_tensor(4, yd, 3), *xs = sizes(xd), *fs = sizes(fd);
    const enum tfs_dtype ff[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    const enum tfs_dtype iff[3] = {TFS_DTYPE_INT32, TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    const enum tfs_dtype fif[3] = {TFS_DTYPE_FLOAT, TFS_DTYPE_INT32, TFS_DTYPE_FLOAT};
    job jobs[3] = {
        {"Conv2D", one_op("Conv2D", 2, ff), 2, {x, f, NULL}, {0}},
        {"Conv2DBackpropFilter", one_op("Conv2DBackpropFilter", 3, fif), 3, {x, fs, dy}, {0}},
        {"Conv2DBackpropInput", one_op("Conv2DBackpropInput", 3, iff), 3, {xs, f, dy}, {0}},
    };
    for (int k = 0; k < 3; k++)
        run(&jobs[k]);   /* warm up: pages touched, OpenBLAS threads started */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 3; k++)
            jobs[k].t[r] = run(&jobs[k]);
    double flops = 2.0 * (double)(xd[0] * xd[1] * xd[2]) * (double)(fd[0] * fd[1] * fd[2]) *
                   (double)fd[3];
    printf("%s: input [%lld,%lld,%lld,%lld], filter [%lld,%lld,%lld,%lld], SAME, %.2f GFLOP each\n",
           label, (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3],
           (long long)fd[0], (long long)fd[1], (long long)fd[2], (long long)fd[3], flops * 1e-9);
    double fwd_med = 0;
    for (int k = 0; k < 3; k++) {
        qsort(jobs[k].t, (size_t)rounds, sizeof jobs[k].t[0], cmp);
        double med = jobs[k].t[rounds / 2], best = jobs[k].t[0];
        if (k == 0)
            fwd_med = med;
        printf("  %-22s median %8.2f ms  best %8.2f ms  %6.1f GFLOP/s  %.2fx forward\n",
               jobs[k].name, med * 1e3, best * 1e3, flops / med * 1e-9, med / fwd_med);
        tfs_session_free(jobs[k].s);
    }
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    tfs_tensor_unref(dy);
    tfs_tensor_unref(xs);
    tfs_tensor_unref(fs);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: grad-timing [rounds 1..%d]\n", MAX_ROUNDS);
        return 2;
    }
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    printf("grad-timing: %d rounds, OPENBLAS_NUM_THREADS=%s\n", rounds, env ? env : "(unset)");
    bench("conv1", (const int64_t[]){64, 28, 28, 1}, (const int64_t[]){5, 5, 1, 32}, rounds);
    bench("conv2", (const int64_t[]){64, 14, 14, 32}, (const int64_t[]){5, 5, 32, 64}, rounds);
    return 0;
}
