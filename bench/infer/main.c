/* tfserve-infer-bench [--threads=N] [--rewrite] [--device=SPEC] DIR MODEL[,MODEL...]: the
 * tfserve worker of bench/infer_vs_peers.sh and bench/gpu_vs_pytorch.sh.
 *
 * --device (where runtime/device.h exists): the sessions' device, cpu (default), auto, gpu or
 * gpu:N; a run then feeds host memory and fetches host memory, copies included in its time.
 * --tf32 lets the GPU's float products use TF32 tensor cores (off by default).
 *
 * --threads sets the runtime's intra-op threads through its public API (tfs_runtime_set_num_threads
 * where runtime.h has it; until then the GEMM is OpenBLAS's, so OpenBLAS's thread count).
 * --rewrite runs each graph through tfs_graph_rewrite (runtime/rewrite.h: constant folding,
 * BatchNorm folded into the convolutions, BiasAdd + Relu fused) where the runtime has it; without
 * it the sessions run the plain ops as built. At start the worker builds the models (mlp, cnn,
 * resnet50; infer.h) with the runtime's public API, writes their weights to DIR/<model>/<key>.npy
 * (TensorFlow layout, float32), opens one session per model and answers
 * "ready <model>=<multiply-adds per sample> ...". Then it answers one line per command read from
 * stdin (the driver, bench/infer/driver.py, speaks the same protocol to the PyTorch and ONNX
 * Runtime workers):
 *
 *     info                      -> "info <kernel set, threads, graph, environment>"
 *     check MODEL BATCH         -> writes the seeded input DIR/<model>/x_<batch>.npy (NHWC) and
 *                                  tfserve's output y_<batch>.tfserve.npy; "ok"
 *     time MODEL BATCH SECS WARM -> runs WARM s untimed (at least once), then at least SECS s and
 *                                  3 runs; "time <runs> <seconds> <median seconds per run>"
 *     quit (or end of input)
 *
 * Errors answer "error <message>" and the worker goes on. Not a test: see bench/README.md.
 */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench/infer/infer.h"
#ifdef TFS_BENCH_HAVE_REWRITE
#include "runtime/rewrite.h"
#endif

enum { MAX_MODELS = 3, MAX_INPUTS = 16 };

typedef struct loaded {
    tfs_ib_model m;
    tfs_graph   *run_g;   /* the graph the session runs: m.g, or its rewrite */
    tfs_session *s;
} loaded;

typedef struct input {
    const loaded *l;
    int64_t       batch;
    tfs_tensor   *x;
} input;

static loaded models[MAX_MODELS];
static int    n_models;
static input  inputs[MAX_INPUTS];
static int    n_inputs;
static const char *dir;
static bool        rewrite_graphs;
static char        rewrites[512];   /* what the rewrites did, per model */
static const char *device = "cpu";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A float32 C-order .npy file (format 1.0; header padded to a multiple of 64 bytes). */
static enum tfs_code write_npy(const char *path, const tfs_tensor *t, tfs_status *st)
{
    char header[256], shape[160] = "";
    size_t len = 0;
    for (int i = 0; i < t->rank; i++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%lld%s", (long long)t->dims[i],
                                t->rank == 1 || i + 1 < t->rank ? ", " : "");
    int n = snprintf(header, sizeof header,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
    int padded = (10 + n + 1 + 63) / 64 * 64 - 10;
    memset(header + n, ' ', (size_t)(padded - n - 1));
    header[padded - 1] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(padded & 0xff),
                             (unsigned char)(padded >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f)
        return TFS_ERR(st, TFS_UNAVAILABLE, "%s: %s", path, strerror(errno));
    bool ok = fwrite(pre, 1, 10, f) == 10 &&
              fwrite(header, 1, (size_t)padded, f) == (size_t)padded &&
              fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
    if (fclose(f) != 0 || !ok)
        return TFS_ERR(st, TFS_UNAVAILABLE, "%s: write failed", path);
    return TFS_OK;
}

#ifdef TFS_BENCH_HAVE_REWRITE
/* l->run_g = the rewrite of l->m.g for its one run (x -> y), or m.g when it serves none. */
static enum tfs_code rewrite(loaded *l, tfs_status *st)
{
    const char *feed = "x:0", *fetch = l->m.y_name;
    tfs_rewrite_run run = {.feeds = &feed, .n_feeds = 1, .fetches = &fetch, .n_fetches = 1};
    tfs_rewrite_stats rs = {0};
    tfs_graph *fast = NULL;
    tfs_rewrite_opts ro = tfs_rewrite_opts_default();
    ro.fuse_add = !strcmp(device, "cpu");   /* the residual-Add fusion is a CPU kernel */
    if (tfs_graph_rewrite(l->m.g, NULL, &run, 1, &ro, &fast, &rs, st) != TFS_OK)
        return st->code;
    size_t len = strlen(rewrites);
    snprintf(rewrites + len, sizeof rewrites - len,
             "%s%s %d -> %d nodes (%d BatchNorms folded, %d MatMul and %d Conv2D fused, %d "
             "residual Adds fused%s)",
             len ? "; " : "", l->m.name, rs.nodes_before, rs.nodes_after, rs.batch_norms_folded,
             rs.matmuls_fused, rs.conv2ds_fused, rs.adds_fused,
             run.served ? "" : ", not served: plain ops");
    if (fast && run.served) {
        l->run_g = fast;
    } else {
        tfs_graph_unref(fast);
        l->run_g = tfs_graph_ref(l->m.g);
    }
    return TFS_OK;
}
#endif

static enum tfs_code load(const char *name, tfs_status *st)
{
    char path[512];
    loaded *l = &models[n_models];
    if (n_models == MAX_MODELS)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "more than %d models", MAX_MODELS);
    if (tfs_ib_model_build(name, &l->m, st) != TFS_OK)
        return st->code;
    n_models++;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return TFS_ERR(st, TFS_UNAVAILABLE, "%s: %s", path, strerror(errno));
    for (int i = 0; i < l->m.n_w; i++) {
        snprintf(path, sizeof path, "%s/%s/%s.npy", dir, name, l->m.w[i].key);
        if (write_npy(path, l->m.w[i].t, st) != TFS_OK)
            return st->code;
    }
#ifdef TFS_BENCH_HAVE_REWRITE
    if (rewrite_graphs) {
        if (rewrite(l, st) != TFS_OK)
            return st->code;
    } else {
        l->run_g = tfs_graph_ref(l->m.g);
    }
#else
    l->run_g = tfs_graph_ref(l->m.g);
#endif
    tfs_session_opts so = tfs_session_opts_default();
#ifdef TFS_BENCH_HAVE_DEVICE
    if (tfs_device_parse(device, &so.device, &so.gpu_id, st) != TFS_OK)
        return st->code;
#endif
    return tfs_session_new(l->run_g, &so, &l->s, st);
}

static const loaded *find_model(const char *name)
{
    for (int i = 0; i < n_models; i++)
        if (!strcmp(models[i].m.name, name))
            return &models[i];
    return NULL;
}

/* The model's input for this batch size: uniform in [x_lo, x_hi), seeded by model and batch. */
static tfs_tensor *get_input(const loaded *l, int64_t batch, tfs_status *st)
{
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i].l == l && inputs[i].batch == batch)
            return inputs[i].x;
    if (n_inputs == MAX_INPUTS) {
        TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "more than %d inputs", MAX_INPUTS);
        return NULL;
    }
    int64_t dims[4] = {batch, l->m.in_dims[0], l->m.in_dims[1], l->m.in_dims[2]};
    tfs_tensor *x = NULL;
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, l->m.in_rank + 1, dims, &x, st) != TFS_OK)
        return NULL;
    uint64_t s = (uint64_t)batch * 1000003u + (uint64_t)l->m.macs;
    float *v = x->data;
    for (int64_t i = 0; i < x->nelem; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) * (1.0 / 9007199254740992.0);
        v[i] = (float)(l->m.x_lo + (l->m.x_hi - l->m.x_lo) * u);
    }
    inputs[n_inputs++] = (input){l, batch, x};
    return x;
}

static enum tfs_code run(const loaded *l, tfs_tensor *x, tfs_tensor **y, tfs_status *st)
{
    tfs_feed feed = {"x", x};
    const char *fetch = l->m.y_name;
    return tfs_session_run(l->s, &feed, 1, &fetch, 1, NULL, 0, y, st);
}

static enum tfs_code check(const loaded *l, int64_t batch, tfs_status *st)
{
    char path[512];
    tfs_tensor *y = NULL, *x = get_input(l, batch, st);
    if (!x)
        return st->code;
    snprintf(path, sizeof path, "%s/%s/x_%lld.npy", dir, l->m.name, (long long)batch);
    if (write_npy(path, x, st) != TFS_OK || run(l, x, &y, st) != TFS_OK)
        return st->code;
    snprintf(path, sizeof path, "%s/%s/y_%lld.tfserve.npy", dir, l->m.name, (long long)batch);
    enum tfs_code rc = write_npy(path, y, st);
    tfs_tensor_unref(y);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static enum tfs_code time_runs(const loaded *l, int64_t batch, double secs, double warm,
                               tfs_status *st)
{
    tfs_tensor *y = NULL, *x = get_input(l, batch, st);
    double *d = NULL;
    int n = 0, cap = 0;
    if (!x)
        return st->code;
    double t0 = now();
    do {
        if (run(l, x, &y, st) != TFS_OK)
            return st->code;
        tfs_tensor_unref(y);
    } while (now() - t0 < warm);
    double start = now(), t = start;
    while (n < 3 || t - start < secs) {
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            double *nd = tfs_realloc(d, (size_t)cap * sizeof *d);
            if (!nd) {
                tfs_free(d);
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for timings");
            }
            d = nd;
        }
        if (run(l, x, &y, st) != TFS_OK) {
            tfs_free(d);
            return st->code;
        }
        tfs_tensor_unref(y);
        double t1 = now();
        d[n++] = t1 - t;
        t = t1;
    }
    qsort(d, (size_t)n, sizeof *d, cmp_double);
    printf("time %d %.6f %.9f\n", n, t - start, d[n / 2]);
    tfs_free(d);
    return TFS_OK;
}

static void info(void)
{
    const char *ct = getenv("OPENBLAS_CORETYPE"), *nt = getenv("OPENBLAS_NUM_THREADS");
    printf("info");
#ifdef TFS_BENCH_HAVE_GEMM_KERNEL
    printf(" sgemm: tfserve %s, %d thread(s);", tfs_runtime_gemm_kernel(),
           tfs_runtime_num_threads());
#else
    printf(" sgemm: OpenBLAS (through tfs__sgemm);");
#endif
    printf(" OpenBLAS %s, core %s, %d thread(s); OPENBLAS_CORETYPE=%s OPENBLAS_NUM_THREADS=%s;"
           " device %s; graph: %s%s\n", openblas_get_config(), openblas_get_corename(),
           openblas_get_num_threads(), ct ? ct : "(unset)", nt ? nt : "(unset)", device,
           rewrite_graphs ? "rewritten: " : "plain ops as built", rewrites);
}

/* One command line; false on quit. */
static bool command(char *line)
{
    char cmd[16] = "", name[32] = "";
    long long batch = 0;
    double secs = 0, warm = 0;
    tfs_status st = {0};
    enum tfs_code rc = TFS_OK;
    line[strcspn(line, "\r\n")] = '\0';
    int n = sscanf(line, "%15s %31s %lld %lf %lf", cmd, name, &batch, &secs, &warm);
    if (n < 1 || !strcmp(cmd, "quit"))
        return n >= 1 ? false : true;
    const loaded *l = n >= 2 ? find_model(name) : NULL;
    if (!strcmp(cmd, "info")) {
        info();
    } else if ((!strcmp(cmd, "check") && n == 3) || (!strcmp(cmd, "time") && n == 5)) {
        if (!l || batch < 1)
            rc = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "no model '%s' or bad batch %lld", name, batch);
        else if (cmd[0] == 'c' && check(l, batch, &st) == TFS_OK)
            printf("ok\n");
        else if (cmd[0] == 't')
            rc = time_runs(l, batch, secs, warm, &st);
        else
            rc = st.code;
    } else {
        rc = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "bad command: %s", line);
    }
    if (rc != TFS_OK)
        printf("error %s: %s\n", tfs_code_name(rc), st.msg);
    fflush(stdout);
    return true;
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--threads=N] [--rewrite] [--device=SPEC] [--tf32] DIR "
            "MODEL[,MODEL...]\n"
            "Models: mlp, cnn, resnet50. The tfserve worker of bench/infer_vs_peers.sh; see "
            "bench/README.md.\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    tfs_status st;
    int rc = 1, a = 1;
    for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
        if (!strncmp(argv[a], "--threads=", 10) && atoi(argv[a] + 10) >= 1) {
#ifdef TFS_BENCH_HAVE_GEMM_KERNEL
            tfs_runtime_set_num_threads(atoi(argv[a] + 10));
#else
            openblas_set_num_threads(atoi(argv[a] + 10));
#endif
        } else if (!strcmp(argv[a], "--rewrite")) {
#ifdef TFS_BENCH_HAVE_REWRITE
            rewrite_graphs = true;
#else
            fprintf(stderr, "tfserve-infer-bench: --rewrite: this runtime has no graph rewrites "
                    "(runtime/rewrite.h); running the plain ops\n");
#endif
        } else if (!strcmp(argv[a], "--tf32")) {
#ifdef TFS_BENCH_HAVE_DEVICE
            tfs_device_opts o = tfs_device_opts_default();
            o.allow_tf32 = true;
            tfs_runtime_set_device(&o, NULL);
#endif
        } else if (!strncmp(argv[a], "--device=", 9)) {
            device = argv[a] + 9;
#ifndef TFS_BENCH_HAVE_DEVICE
            fprintf(stderr, "tfserve-infer-bench: --device: this runtime has no devices "
                    "(runtime/device.h); running on the CPU\n");
#endif
        } else {
            return usage(argv[0]);
        }
    }
    if (argc - a != 2)
        return usage(argv[0]);
    dir = argv[a];
    char list[256];
    snprintf(list, sizeof list, "%s", argv[a + 1]);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save))
        if (load(name, &st) != TFS_OK) {
            fprintf(stderr, "tfserve-infer-bench: %s: %s\n", name, st.msg);
            printf("error %s\n", st.msg);
            goto done;
        }
    printf("ready");
    for (int i = 0; i < n_models; i++)
        printf(" %s=%.0f", models[i].m.name, models[i].m.macs);
    printf("\n");
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin) && command(line))
        ;
    rc = 0;
done:
    for (int i = 0; i < n_inputs; i++)
        tfs_tensor_unref(inputs[i].x);
    for (int i = 0; i < n_models; i++) {
        tfs_session_free(models[i].s);
        tfs_graph_unref(models[i].run_g);
        tfs_ib_model_free(&models[i].m);
    }
    return rc;
}
