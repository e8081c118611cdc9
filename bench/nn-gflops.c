/* nn-gflops: tfserve's float GEMM (tfs__sgemm) next to OpenBLAS's cblas_sgemm on the matrix
 * shapes of the models the benchmarks serve, in one process, on 1 and 2 threads; then MatMul and
 * Conv2D through a session next to the raw products. Not a test; run by hand:
 *     build/bench/nn-gflops [--threads=1,2] [--shapes=WORD] [--reps=N] [--no-session]
 *                           [--keep-env] [--cpu-time]
 * OpenBLAS is compared at its best: unless --keep-env is given (or the CPU lacks AVX-512), the
 * program re-executes itself with OPENBLAS_CORETYPE=SkylakeX, since OpenBLAS reads it once, when
 * it loads, and otherwise may pick slower kernels (the machines export Haswell; unset, 0.3.21
 * takes this machine's AVX-512 CPU for a Prescott). Both libraries get the same thread count for
 * each table. Each figure is the median of --reps timed loops (default 5) of at least 0.1 s, the
 * libraries' loops taking turns; OpenBLAS's spinning workers are given time to sleep before ours
 * run. --cpu-time divides by the process's CPU time instead of the wall clock: on one thread, the
 * speed that other processes' load on a shared machine does not take away; on more, GFLOP per
 * CPU-second.
 *   Like the tests, this includes runtime-impl.h, for tfs__sgemm.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime-impl.h"
#include "runtime/runtime.h"

static clockid_t clock_id = CLOCK_MONOTONIC;   /* --cpu-time: CLOCK_PROCESS_CPUTIME_ID */

static double now(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *alloc_filled(int64_t n, uint32_t seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        fprintf(stderr, "nn-gflops: out of memory\n");
        exit(1);
    }
    uint32_t x = seed;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)(x >> 8) / (float)(1u << 24) - 0.5f;
    }
    return v;
}

typedef struct shape {
    const char *name;
    int         m, n, k;
} shape;

static const shape shapes[] = {
    {"square 512", 512, 512, 512},
    {"square 1024", 1024, 1024, 1024},
    {"MLP fc1 b64 [64,784]x[784,512]", 64, 512, 784},
    {"MLP fc2 b64 [64,512]x[512,256]", 64, 256, 512},
    {"MLP fc1 b1 [1,784]x[784,512]", 1, 512, 784},
    {"MLP fc1 b8 [8,784]x[784,512]", 8, 512, 784},
    {"CNN conv2 b64 [12544,800]x[800,64]", 64 * 196, 64, 800},
    {"CNN conv2 b8 [1568,800]x[800,64]", 8 * 196, 64, 800},
    {"CNN conv1 b64 [50176,25]x[25,32]", 64 * 784, 32, 25},
    {"CNN fc1 b64 [64,3136]x[3136,1024]", 64, 1024, 3136},
    {"CNN fc1 b8 [8,3136]x[3136,1024]", 8, 1024, 3136},
    {"CNN fc1 b32 [32,3136]x[3136,1024]", 32, 1024, 3136},
    {"CNN fc1 b16 [16,3136]x[3136,1024]", 16, 1024, 3136},
    {"ResNet fc b8 [8,2048]x[2048,1000]", 8, 1000, 2048},
    {"ResNet 3x3x64 b1 [3136,576]x[576,64]", 3136, 64, 576},
    {"ResNet 3x3x64 b8 [25088,576]x[576,64]", 8 * 3136, 64, 576},
    {"ResNet 3x3x128 b1 [784,1152]x[1152,128]", 784, 128, 1152},
    {"ResNet 3x3x128 b8 [6272,1152]x[1152,128]", 8 * 784, 128, 1152},
    {"ResNet 3x3x512 b1 [49,4608]x[4608,512]", 49, 512, 4608},
    {"ResNet 3x3x512 b8 [392,4608]x[4608,512]", 8 * 49, 512, 4608},
    {"ResNet 1x1 64->256 b8 [25088,64]x[64,256]", 8 * 3136, 256, 64},
    {"ResNet 1x1 256->64 b8 [25088,256]x[256,64]", 8 * 3136, 64, 256},
    {"ResNet 1x1 512->128 b8 [6272,512]x[512,128]", 8 * 784, 128, 512},
    {"ResNet 1x1 1024->256 b8 [1568,1024]x[1024,256]", 8 * 196, 256, 1024},
    {"ResNet 1x1 2048->512 b8 [392,2048]x[2048,512]", 8 * 49, 512, 2048},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

typedef struct opts {
    int         threads[8];
    int         n_threads;
    const char *filter;
    int         reps;
    bool        session;
    bool        keep_env;
} opts;

/* ---- timing ---------------------------------------------------------------------------------- */

typedef void (*call_fn)(void *arg);

static double median(double *g, int n)
{
    for (int i = 1; i < n; i++)   /* insertion sort; n is small */
        for (int j = i; j > 0 && g[j] < g[j - 1]; j--) {
            double t = g[j];
            g[j] = g[j - 1];
            g[j - 1] = t;
        }
    return n % 2 ? g[n / 2] : 0.5 * (g[n / 2 - 1] + g[n / 2]);
}

/* GFLOP/s of one loop of at least 0.1 s (and 2 calls). */
static double loop(call_fn f, void *arg, double flops)
{
    int iters = 0;
    double t0 = now(), t1;
    do {
        f(arg);
        iters++;
        t1 = now();
    } while (t1 - t0 < 0.1 || iters < 2);
    return flops * iters / (t1 - t0) * 1e-9;
}

/* Medians over reps of loops of f[0], f[1], ... in turn, so that load from other processes hits
 * them alike. After an OpenBLAS loop (blas[i]) on several threads, its workers keep spinning for
 * about 0.12 s: the next loop waits that out. */
static void measure(int nf, call_fn *f, void **arg, const bool *blas, double flops, int reps,
                    double *out)
{
    double g[8][64];
    if (reps > 64)
        reps = 64;
    for (int i = 0; i < nf; i++)
        f[i](arg[i]);   /* warm up: pages touched, threads started */
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < nf; i++) {
            if (i > 0 && blas[i - 1] && openblas_get_num_threads() > 1)
                usleep(150000);
            g[i][r] = loop(f[i], arg[i], flops);
            if (i == nf - 1 && blas[i] && openblas_get_num_threads() > 1)
                usleep(150000);
        }
    for (int i = 0; i < nf; i++)
        out[i] = median(g[i], reps);
}

typedef struct gemm_arg {
    const shape *s;
    const float *a, *b;
    float       *c;
} gemm_arg;

static void call_ours(void *p)
{
    gemm_arg *g = p;
    tfs__sgemm(false, false, g->s->m, g->s->n, g->s->k, 1.0f, g->a, g->s->k, g->b, g->s->n, 0.0f,
               g->c, g->s->n);
}

static void call_blas(void *p)
{
    gemm_arg *g = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->s->m, g->s->n, g->s->k, 1.0f, g->a,
                g->s->k, g->b, g->s->n, 0.0f, g->c, g->s->n);
}

/* Largest |x - y| / (1 + |y|) over the product (ours vs OpenBLAS), a sanity check. */
static double compare(const gemm_arg *g, float *c2)
{
    gemm_arg h = *g;
    h.c = c2;
    call_ours((void *)g);
    call_blas(&h);
    double worst = 0;
    for (int64_t i = 0; i < (int64_t)g->s->m * g->s->n; i++) {
        double d = fabs((double)g->c[i] - (double)c2[i]) / (1.0 + fabs((double)c2[i]));
        worst = d > worst ? d : worst;
    }
    return worst;
}

static void gemm_table(const opts *o)
{
    for (int ti = 0; ti < o->n_threads; ti++) {
        int t = o->threads[ti];
        tfs_runtime_set_num_threads(t);
        openblas_set_num_threads(t);
        printf("\n%d thread%s: tfserve %s (pool %d) vs OpenBLAS %s (%d)\n", t, t > 1 ? "s" : "",
               tfs_runtime_gemm_kernel(), tfs_runtime_num_threads(), openblas_get_corename(),
               openblas_get_num_threads());
        printf("%-42s %9s %9s %7s %9s\n", "shape [m,k]x[k,n]", "tfserve", "OpenBLAS", "ratio",
               "max err");
        double lo = 1e9;
        for (int i = 0; i < N_SHAPES; i++) {
            const shape *s = &shapes[i];
            if (o->filter && !strstr(s->name, o->filter))
                continue;
            int64_t mk = (int64_t)s->m * s->k, kn = (int64_t)s->k * s->n, mn = (int64_t)s->m * s->n;
            float *a = alloc_filled(mk, 1), *b = alloc_filled(kn, 2);
            float *c = alloc_filled(mn, 3), *c2 = alloc_filled(mn, 4);
            gemm_arg g = {s, a, b, c};
            double err = compare(&g, c2);
            double flops = 2.0 * s->m * s->n * s->k, r[2];
            measure(2, (call_fn[]){call_ours, call_blas}, (void *[]){&g, &g},
                    (bool[]){false, true}, flops, o->reps, r);
            double ours = r[0], blas = r[1];
            printf("%-42s %9.1f %9.1f %6.0f%% %9.1e\n", s->name, ours, blas, 100 * ours / blas,
                   err);
            fflush(stdout);
            lo = ours / blas < lo ? ours / blas : lo;
            free(a);
            free(b);
            free(c);
            free(c2);
        }
        printf("lowest ratio: %.0f%%\n", 100 * lo);
    }
}

/* ---- through a session ----------------------------------------------------------------------- */

static tfs_tensor *tensor(int rank, const int64_t *dims)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st) != TFS_OK) {
        fprintf(stderr, "nn-gflops: %s\n", st.msg);
        exit(1);
    }
    float *f = alloc_filled(t->nelem, 5);
    memcpy(t->data, f, (size_t)t->nelem * sizeof *f);
    free(f);
    return t;
}

static void set_ints(tfs_graph *g, int id, const char *name, int n, int64_t *v)
{
    tfs_attr_value a = {.kind = TFS_ATTR_LIST};
    a.list.kind = TFS_ATTR_I;
    a.list.n = n;
    a.list.i = v;
    tfs_graph_set_attr(g, id, name, &a);
}

/* A session computing `op` of placeholders a and b (Conv2D attrs when conv). */
static tfs_session *one_op(const char *op, bool conv)
{
    tfs_graph *g = NULL;
    tfs_status st;
    tfs_graph_new(&g, NULL);
    int a = tfs_graph_add_node(g, "a", "Placeholder");
    tfs_graph_set_attr_type(g, a, "dtype", TFS_DTYPE_FLOAT);
    int b = tfs_graph_add_node(g, "b", "Placeholder");
    tfs_graph_set_attr_type(g, b, "dtype", TFS_DTYPE_FLOAT);
    int y = tfs_graph_add_node(g, "y", op);
    tfs_graph_add_input(g, y, "a");
    tfs_graph_add_input(g, y, "b");
    tfs_graph_set_attr_type(g, y, "T", TFS_DTYPE_FLOAT);
    if (conv) {
        int64_t strides[4] = {1, 1, 1, 1};
        set_ints(g, y, "strides", 4, strides);
        tfs_graph_set_attr_string(g, y, "padding", "SAME");
    }
    tfs_session *s = NULL;
    if (tfs_graph_finalize(g, &st) != TFS_OK || tfs_session_new(g, NULL, &s, &st) != TFS_OK) {
        fprintf(stderr, "nn-gflops: %s\n", st.msg);
        exit(1);
    }
    tfs_graph_unref(g);
    return s;
}

typedef struct run_arg {
    tfs_session *s;
    tfs_tensor  *a, *b;
} run_arg;

static void call_session(void *p)
{
    run_arg *r = p;
    tfs_feed feeds[2] = {{"a", r->a}, {"b", r->b}};
    const char *fetch = "y";
    tfs_tensor *out = NULL;
    tfs_status st;
    if (tfs_session_run(r->s, feeds, 2, &fetch, 1, NULL, 0, &out, &st) != TFS_OK) {
        fprintf(stderr, "nn-gflops: %s\n", st.msg);
        exit(1);
    }
    tfs_tensor_unref(out);
}

/* One line: the op through a session, our raw sgemm and OpenBLAS's on its GEMM shape. */
static void session_line(const opts *o, const char *name, run_arg *r, const shape *s)
{
    float *a = alloc_filled((int64_t)s->m * s->k, 1), *b = alloc_filled((int64_t)s->k * s->n, 2);
    float *c = alloc_filled((int64_t)s->m * s->n, 3);
    gemm_arg g = {s, a, b, c};
    double flops = 2.0 * s->m * s->n * s->k, t[3];
    measure(3, (call_fn[]){call_session, call_ours, call_blas}, (void *[]){r, &g, &g},
            (bool[]){false, false, true}, flops, o->reps, t);
    double op = t[0], ours = t[1], blas = t[2];
    printf("%-36s %9.1f %9.1f %9.1f %7.0f%% %7.0f%%\n", name, op, ours, blas, 100 * op / ours,
           100 * op / blas);
    fflush(stdout);
    free(a);
    free(b);
    free(c);
}

static void session_table(const opts *o)
{
    for (int ti = 0; ti < o->n_threads; ti++) {
        int t = o->threads[ti];
        tfs_runtime_set_num_threads(t);
        openblas_set_num_threads(t);
        printf("\n%d thread%s, through a session (GFLOP/s)\n", t, t > 1 ? "s" : "");
        printf("%-36s %9s %9s %9s %8s %8s\n", "op", "session", "sgemm", "OpenBLAS", "/sgemm",
               "/OpenBLAS");
        tfs_session *s = one_op("MatMul", false);
        int mm[][3] = {{512, 512, 512}, {64, 512, 784}, {1, 512, 784}};
        for (int i = 0; i < 3; i++) {
            int64_t ad[2] = {mm[i][0], mm[i][2]}, bd[2] = {mm[i][2], mm[i][1]};
            run_arg r = {s, tensor(2, ad), tensor(2, bd)};
            char name[64];
            snprintf(name, sizeof name, "MatMul [%d,%d]x[%d,%d]", mm[i][0], mm[i][2], mm[i][2],
                     mm[i][1]);
            session_line(o, name, &r, &(shape){name, mm[i][0], mm[i][1], mm[i][2]});
            tfs_tensor_unref(r.a);
            tfs_tensor_unref(r.b);
        }
        tfs_session_free(s);
        /* Conv2D 28x28x32 -> 5x5x64 SAME (the CNN's conv2 at 28x28), and 14x14x32 as the model
         * has it: the sgemm [n*h*w, 800] x [800, 64]. */
        s = one_op("Conv2D", true);
        int cv[][2] = {{1, 28}, {8, 28}, {8, 14}, {64, 14}};
        for (int i = 0; i < 4; i++) {
            int n = cv[i][0], hw = cv[i][1];
            int64_t xd[4] = {n, hw, hw, 32}, fd[4] = {5, 5, 32, 64};
            run_arg r = {s, tensor(4, xd), tensor(4, fd)};
            char name[64];
            snprintf(name, sizeof name, "Conv2D %dx%dx32 5x5x64 n=%d", hw, hw, n);
            session_line(o, name, &r, &(shape){name, n * hw * hw, 64, 800});
            tfs_tensor_unref(r.a);
            tfs_tensor_unref(r.b);
        }
        tfs_session_free(s);
    }
}

static bool parse(int argc, char **argv, opts *o)
{
    *o = (opts){.threads = {1, 2}, .n_threads = 2, .reps = 5, .session = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--threads=", 10) == 0) {
            o->n_threads = 0;
            for (char *p = (char *)a + 10; *p && o->n_threads < 8;) {
                long t = strtol(p, &p, 10);
                if (t < 1 || t > 256)
                    return false;
                o->threads[o->n_threads++] = (int)t;
                if (*p == ',')
                    p++;
                else if (*p)
                    return false;
            }
        } else if (strncmp(a, "--shapes=", 9) == 0) {
            o->filter = a + 9;
        } else if (strncmp(a, "--reps=", 7) == 0) {
            o->reps = atoi(a + 7);
            if (o->reps < 1)
                return false;
        } else if (strcmp(a, "--no-session") == 0) {
            o->session = false;
        } else if (strcmp(a, "--keep-env") == 0) {
            o->keep_env = true;
        } else if (strcmp(a, "--cpu-time") == 0) {
            clock_id = CLOCK_PROCESS_CPUTIME_ID;
        } else {
            return false;
        }
    }
    return o->n_threads > 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: %s [--threads=1,2] [--shapes=WORD] [--reps=N] [--no-session] "
                        "[--keep-env] [--cpu-time]\n", argv[0]);
        return 2;
    }
    const char *ct = getenv("OPENBLAS_CORETYPE");
    if (!o.keep_env && !(ct && strcmp(ct, "SkylakeX") == 0) &&
        __builtin_cpu_supports("avx512f")) {
        printf("re-running with OPENBLAS_CORETYPE=SkylakeX (was %s), so that OpenBLAS uses its "
               "AVX-512 kernels (--keep-env: do not)\n", ct ? ct : "unset");
        fflush(stdout);
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        execv("/proc/self/exe", argv);
        perror("nn-gflops: re-exec");   /* go on with the environment as it is */
    }
    const char *l2 = getenv("OPENBLAS_L2_SIZE");
    printf("tfserve GEMM kernels: %s; pool of %d threads by default\n", tfs_runtime_gemm_kernel(),
           tfs_runtime_num_threads());
    printf("OpenBLAS: %s; core %s; OPENBLAS_CORETYPE=%s; OPENBLAS_L2_SIZE=%s\n",
           openblas_get_config(), openblas_get_corename(), ct ? ct : "(unset)",
           l2 ? l2 : "(unset)");
    printf("GFLOP/s by %s; medians of %d loops\n",
           clock_id == CLOCK_MONOTONIC ? "the wall clock" : "process CPU time", o.reps);
    gemm_table(&o);
    if (o.session)
        session_table(&o);
    return 0;
}
