/* tfserve's float GEMM, tfs__sgemm (runtime-impl.h): blocking, packing and threads around the
 * micro-kernels of gemm-impl.h, and the run-time choice among AVX-512, AVX2 and plain C. Ours
 * rather than OpenBLAS's because, measured on the model shapes (bench/README.md, nn-gflops), it is
 * at or above OpenBLAS's kernels there and splits over our one intra-op pool with results
 * bit-identical for any thread count, where OpenBLAS's threads would compete with that pool.
 *
 * DESIGN. C is cut into tasks (rectangles of whole MR-row slivers and NR-column panels) that the
 * pool's threads claim from a counter; each task runs, per block of MC rows and per block of kc
 * steps of k: A block (in place, or copied row-wise when its row stride would make the rows
 * collide in L1: multiples of 4 KiB), then for each B panel of the task every MR-row tile. So a
 * B panel (kc x NR, in L1/L2) serves a column of tiles, and the A block (in L2) every panel.
 *   B is packed at most once per call, into panels shared by all tasks: a panel is packed by the
 * first task that needs it (its state goes 0 -> 1 -> 2, the others help with other panels, then
 * wait for the few still in progress), so packing is spread over the threads without a barrier,
 * and no thread ever waits for one that is not running. B is read in place (no packing) when at
 * most DIRECT_B_SLIVERS slivers of rows use each panel and B is not transposed, and A is read in
 * place unless its row stride is bad for L1: so the serving case, batch 1..112 such as
 * [1, 784] x [784, 512], copies nothing; with 1..3 rows, tiles are up to 128 columns wide (a
 * longer run of each row of B per step).
 *   The blocking of k depends on k alone (kc = ceil(k / ceil(k / KC_MAX))), and every C element
 * is computed by one task with the kernels' fixed order (gemm-impl.h), so results do not depend
 * on the thread count or on how a caller splits its rows into calls.
 *   Workspace is one tfs_malloc per call, freed at the end (glibc's adaptive mmap threshold keeps
 * repeated sizes off mmap). When it cannot be had the product runs without packing, or, for a
 * transposed B, by a plain loop: slower, still correct.
 *   A constant B (tfs__sgemm_const_b: a Const's value) that a product packs is packed once, all
 * of it, into panels laid out as a call's ([k block][panel]), kept on the tensor and read by every
 * later call with the same B, kernel and layout: weights are not packed again per batch (the
 * CNN's 12.8 MB dense layer, each im2col chunk of a convolution). The kept panels are read
 * whatever their size from 2 slivers on, since the packing is already paid, and for a B over
 * BIG_B_BYTES from one row on.
 *   An epilogue (tfs__sgemm_epi: bias, added tensor, Relu/Relu6) rides on the tiles of the last
 * block of k, and the micro-kernels apply it before they store (gemm-impl.h).
 */
#include <stdatomic.h>
#include <string.h>

#include "runtime/gemm-impl.h"
#include "runtime/runtime-impl.h"

/* Largest block of k one kernel call covers (the B panel, kc x NR, is read from L1/L2). */
#define KC_MAX 512
/* Bytes of an A block (MC rows x kc), meant to stay in L2 (1 MiB per core and up). */
#define A_BLOCK_BYTES (192 << 10)
/* B is read in place, not packed, when no more than this many slivers of MR rows use a panel
 * (and B is not transposed): packing costs a pass over B that few slivers do not repay. */
#define DIRECT_B_SLIVERS 8
/* ... unless at least BIG_B_SLIVERS slivers share each panel and B is this large (a dense
 * layer's weights that do not fit in L2, so every sliver's in-place read streams rows a page
 * apart from memory: packing each panel just before its slivers use it is faster, e.g. on the
 * CNN's fc1) or a constant kept packed (no packing per call at all, faster still: the MLP's
 * 784-512-256-10 at batch 64). A constant B this large is read from its kept packed copy even
 * by a single sliver (1..MR rows): one sequential stream instead of rows a page apart, faster
 * for the CNN at batch 1 to 8. (Figures for this file's comments: bench/README.md, "Figures from
 * source comments".) */
#define BIG_B_BYTES ((double)(4 << 20))
#define BIG_B_SLIVERS 2
/* Packed B per column block at most; a larger B is done in column blocks one after another. */
#define B_PACK_BYTES ((size_t)32 << 20)
/* A constant B is kept packed only up to this size (the copy doubles its memory). */
#define KEEP_PACKED_BYTES ((double)(256 << 20))
/* Estimated nanoseconds of work per thread below which another thread does not pay for its
 * dispatch and cache misses (a pool dispatch's own cost is in bench/README.md). */
#define MIN_NS_PER_THREAD 3000.0

/* ---- instruction sets ------------------------------------------------------------------------ */

enum { C_MR = 4, C_NR = 16 };

/* The epilogue on a block of C in place, a row at a time: the product's when no kernel runs
 * (k = 0, or no workspace for a transposed B). */
static void epi_rows(float *c, int64_t ldc, const float *bias, const float *side, int64_t ld_side,
                     enum tfs_gemm_act act, int64_t rows, int64_t cols)
{
    if (!bias)   /* no epilogue (an epilogue always has a bias) */
        return;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            c[r * ldc + j] = tfs__gemm_epi_value(c[r * ldc + j], bias[j],
                                                 side ? side + r * ld_side + j : NULL, act);
}

/* epi on the rows x cols block at c whose first element is C(i0, j0). */
static void epi_block(const tfs_gemm_epi *epi, float *c, int64_t ldc, int64_t i0, int64_t j0,
                      int64_t rows, int64_t cols)
{
    if (epi && rows > 0 && cols > 0)
        epi_rows(c, ldc, epi->bias + j0,
                 epi->side ? epi->side + i0 * epi->ld_side + j0 : NULL, epi->ld_side, epi->act,
                 rows, cols);
}

void tfs__gemm_tile_epi(tfs_gemm_tile *t, const tfs_gemm_epi *epi, int64_t i0, int64_t j0)
{
    t->bias = epi ? epi->bias + j0 : NULL;
    t->side = epi && epi->side ? epi->side + i0 * epi->ld_side + j0 : NULL;
    t->ld_side = epi ? epi->ld_side : 0;
    t->act = epi ? epi->act : TFS_GEMM_ACT_NONE;
}

/* The portable micro-kernel (machines without AVX2 + FMA, and the test of the others). Same
 * interface and order of k; multiply and add are separate operations here, not fused. */
static void kernel_c(const tfs_gemm_tile *t)
{
    float acc[C_MR][C_NR];
    memset(acc, 0, sizeof acc);
    for (int s = 0; s < t->n_seg; s++) {
        const float *as = t->a + s * t->a_seg;
        for (int64_t p = 0; p < t->kc; p++) {
            const float *b = t->b + (s * t->kc + p) * t->b_rs;
            for (int r = 0; r < t->mr; r++) {
                float a = as[r * t->a_rs + p * t->a_cs];
                for (int j = 0; j < t->nr; j++)
                    acc[r][j] += a * b[j];
            }
        }
    }
    /* The epilogue per value before its store, as the SIMD kernels do (an added tensor may be C
     * itself: tfs__sgemm_epi_in_place). */
    for (int r = 0; r < t->mr; r++) {
        float *c = t->c + r * t->ldc;
        const float *side = t->side ? t->side + r * t->ld_side : NULL;
        for (int j = 0; j < t->nr; j++) {
            float x = t->alpha * acc[r][j];
            if (t->beta != 0.0f)
                x = t->alpha * acc[r][j] + t->beta * c[j];
            if (t->bias)
                x = tfs__gemm_epi_value(x, t->bias[j], side ? side + j : NULL, t->act);
            c[j] = x;
        }
    }
}

static void pack_b_c(bool tb, int64_t kc, int nr, const float *src, int64_t ld, float *dst);

static const tfs_gemm_kernel kernels[TFS_GEMM_ISA_COUNT] = {
    [TFS_GEMM_AVX512] = {"avx512", 14, 32, 3, 128, tfs__gemm_kernel_avx512,
                         tfs__gemm_pack_b_avx512},
    [TFS_GEMM_AVX2] = {"avx2", 6, 16, 1, 16, tfs__gemm_kernel_avx2, tfs__gemm_pack_b_avx2},
    [TFS_GEMM_C] = {"c", C_MR, C_NR, 1, C_NR, kernel_c, pack_b_c},
};

static bool isa_supported(enum tfs_gemm_isa isa)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    switch (isa) {
    case TFS_GEMM_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    case TFS_GEMM_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default:
        return isa == TFS_GEMM_C;
    }
#else
    return isa == TFS_GEMM_C;
#endif
}

/* -1: not chosen yet; else the enum tfs_gemm_isa in use. */
static atomic_int chosen = -1;

const tfs_gemm_kernel *tfs__gemm_kernel(void)
{
    int c = atomic_load_explicit(&chosen, memory_order_relaxed);
    if (c < 0) {
        c = TFS_GEMM_C;
        for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++)
            if (isa_supported((enum tfs_gemm_isa)i)) {
                c = i;
                break;
            }
        atomic_store(&chosen, c);
    }
    return &kernels[c];
}

bool tfs__gemm_force_isa(enum tfs_gemm_isa isa)
{
    if (isa == TFS_GEMM_ISA_COUNT) {
        atomic_store(&chosen, -1);
        return true;
    }
    if (isa < 0 || isa > TFS_GEMM_ISA_COUNT || !isa_supported(isa))
        return false;
    atomic_store(&chosen, (int)isa);
    return true;
}

const char *tfs_runtime_gemm_kernel(void)
{
    return tfs__gemm_kernel()->name;
}

/* ---- the driver ------------------------------------------------------------------------------ */

enum { PANEL_EMPTY, PANEL_PACKING, PANEL_READY };

typedef struct gemm {
    const tfs_gemm_kernel *K;
    bool         ta, tb;
    int64_t      m, n, k;
    float        alpha, beta;
    const float *A, *B;
    int64_t      lda, ldb;
    float       *C;
    int64_t      ldc;
    const tfs_gemm_epi *epi;   /* applied to each tile after its last block of k; or NULL */
    int64_t      kcs, nkb;     /* k in nkb blocks of kcs (the last may be shorter) */
    int64_t      mc;           /* rows per A block, a multiple of MR */
    int64_t      units_m;      /* slivers of MR rows */
    int64_t      j0, nj;       /* this column block: panels [j0, j0 + nj) of NR columns */
    bool         pack_a, pack_b;
    int64_t      a_stride;     /* row stride of a packed A block */
    float       *bp;           /* packed B: [nkb][nj] panels of kcs x NR */
    atomic_int  *bstate;       /* [nkb][nj] PANEL_*; NULL: all packed already (a constant B) */
    float       *ap;           /* per-lane A blocks of mc x a_stride */
    int          tm, tn;       /* task grid: tm row groups x tn panel groups */
    atomic_int   next_task;
} gemm;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The portable packing of B (see tfs_gemm_pack_fn). */
static void pack_b_c(bool tb, int64_t kc, int nr, const float *src, int64_t ld, float *dst)
{
    for (int64_t p = 0; p < kc; p++, dst += C_NR)
        for (int j = 0; j < C_NR; j++)
            dst[j] = j >= nr ? 0.0f : tb ? src[j * ld + p] : src[p * ld + j];
}

/* Packs B rows [pc, pc + kc) x columns of panel jp into dst (kc x NR, zero-padded). */
static void pack_b_panel(const gemm *g, int64_t pc, int64_t kc, int64_t jp, float *dst)
{
    const int NR = g->K->nr;
    int64_t j = (g->j0 + jp) * NR, nr = g->n - j < NR ? g->n - j : NR;
    const float *src = g->tb ? g->B + j * g->ldb + pc : g->B + pc * g->ldb + j;
    g->K->pack_b(g->tb, kc, (int)nr, src, g->ldb, dst);
}

static float *panel(const gemm *g, int64_t kb, int64_t jp)
{
    return g->bp + (kb * g->nj + jp) * g->kcs * g->K->nr;
}

/* Makes panels [p0, p1) of k block kb ready: packs those no one has taken, then waits for those
 * other threads are packing (they are running: a state goes to PANEL_PACKING only in here). */
static void acquire_b(gemm *g, int64_t kb, int64_t p0, int64_t p1)
{
    atomic_int *st = g->bstate + kb * g->nj;
    int64_t pc = kb * g->kcs, kc = g->k - pc < g->kcs ? g->k - pc : g->kcs;
    bool wait = false;
    for (int64_t jp = p0; jp < p1; jp++) {
        int s = atomic_load_explicit(&st[jp], memory_order_acquire);
        if (s == PANEL_READY)
            continue;
        if (s == PANEL_EMPTY && atomic_compare_exchange_strong(&st[jp], &s, PANEL_PACKING)) {
            pack_b_panel(g, pc, kc, jp, panel(g, kb, jp));
            atomic_store_explicit(&st[jp], PANEL_READY, memory_order_release);
        } else {
            wait = true;
        }
    }
    if (wait)
        for (int64_t jp = p0; jp < p1; jp++)
            while (atomic_load_explicit(&st[jp], memory_order_acquire) != PANEL_READY)
                cpu_relax();
}

static void run_task(gemm *g, int task, float *abuf)
{
    const int MR = g->K->mr, NR = g->K->nr;
    int ti = task / g->tn, tj = task % g->tn;
    int64_t r0 = ti * g->units_m / g->tm * MR, r1 = (ti + 1) * g->units_m / g->tm * MR;
    int64_t p0 = tj * g->nj / g->tn, p1 = (tj + 1) * g->nj / g->tn;
    if (r1 > g->m)
        r1 = g->m;
    tfs_gemm_tile t = {.ldc = g->ldc, .alpha = g->alpha, .b_padded = g->pack_b, .n_seg = 1};
    for (int64_t ic = r0; ic < r1; ic += g->mc) {
        int64_t mc = r1 - ic < g->mc ? r1 - ic : g->mc;
        for (int64_t kb = 0; kb < g->nkb; kb++) {
            int64_t pc = kb * g->kcs;
            t.kc = g->k - pc < g->kcs ? g->k - pc : g->kcs;
            t.beta = kb == 0 ? g->beta : 1.0f;
            const float *a;
            if (g->ta) {                      /* A stored [k, m] */
                a = g->A + pc * g->lda + ic;
                t.a_rs = 1;
                t.a_cs = g->lda;
            } else if (g->pack_a) {
                for (int64_t r = 0; r < mc; r++)
                    memcpy(abuf + r * g->a_stride, g->A + (ic + r) * g->lda + pc,
                           (size_t)t.kc * sizeof(float));
                a = abuf;
                t.a_rs = g->a_stride;
                t.a_cs = 1;
            } else {
                a = g->A + ic * g->lda + pc;
                t.a_rs = g->lda;
                t.a_cs = 1;
            }
            if (g->pack_b && g->bstate)
                acquire_b(g, kb, p0, p1);
            bool epi_now = g->epi && kb == g->nkb - 1;
            /* Panels per step: several for a wide tile (few rows, B in place). */
            int64_t step = !g->pack_b && mc <= g->K->wide_mr ? g->K->wide_nr / NR : 1;
            for (int64_t jp = p0; jp < p1; jp += step) {
                int64_t j = (g->j0 + jp) * NR, w = (p1 - jp < step ? p1 - jp : step) * NR;
                t.nr = (int)(g->n - j < w ? g->n - j : w);
                if (g->pack_b) {
                    t.b = panel(g, kb, jp);
                    t.b_rs = NR;
                } else {
                    t.b = g->B + pc * g->ldb + j;
                    t.b_rs = g->ldb;
                }
                /* A's rows come from memory on the block's first panel only (in place; a packed
                 * block was just copied). */
                t.prefetch_a = jp == p0 && !g->ta && !g->pack_a;
                for (int64_t ir = 0; ir < mc; ir += MR) {
                    t.mr = (int)(mc - ir < MR ? mc - ir : MR);
                    t.a = a + ir * t.a_rs;
                    t.c = g->C + (ic + ir) * g->ldc + j;
                    if (g->epi)   /* only after the last block of k */
                        tfs__gemm_tile_epi(&t, epi_now ? g->epi : NULL, ic + ir, j);
                    g->K->fn(&t);
                }
            }
        }
    }
}

/* One lane of the pool: task `lane` first, then tasks from the counter (which starts past the
 * lanes' own) until none is left. Lane l runs on the same thread call after call (the pool's
 * caller takes chunk 0 and its worker i chunk i + 1, timing permitting), so its first task's
 * columns of B stay in that core's cache from one call to the next: the batch-1 product reads
 * B from L2 instead of from the other core's. */
static void lane(void *arg, int64_t begin, int64_t end)
{
    gemm *g = arg;
    int tasks = g->tm * g->tn;
    for (int64_t l = begin; l < end; l++) {
        float *abuf = g->pack_a ? g->ap + l * g->mc * g->a_stride : NULL;
        if (l < tasks)
            run_task(g, (int)l, abuf);
        for (;;) {
            int task = atomic_fetch_add_explicit(&g->next_task, 1, memory_order_relaxed);
            if (task >= tasks)
                break;
            run_task(g, task, abuf);
        }
    }
}

/* Only when no workspace can be had and B is transposed: C = alpha A B + beta C, plainly. */
static void gemm_plain(const gemm *g)
{
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < g->k; p++) {
                float a = g->ta ? g->A[p * g->lda + i] : g->A[i * g->lda + p];
                acc += a * g->B[j * g->ldb + p];
            }
            float *c = &g->C[i * g->ldc + j];
            *c = g->beta == 0.0f ? g->alpha * acc : g->alpha * acc + g->beta * *c;
        }
}

static int64_t round_up(int64_t x, int64_t to)
{
    return (x + to - 1) / to * to;
}

/* True when rows lda floats apart all fall into one L1 set (multiples of 4 KiB), so that a
 * sliver of 14 rows read in place overflows an 8-way L1 set: on Zen 4 (32 KiB, 8 ways),
 * ResNet-50's 1024 -> 256 and 2048 -> 512 layers ran slower read in place than copied. (On a
 * 12-way 48 KiB L1, reading A in place was as fast or faster for every stride, 4 KiB multiples
 * included, and the copy cost time at other strides: so only these.) */
static bool bad_stride(int64_t lda)
{
    return lda % 1024 == 0;
}

/* Chooses the task grid for `threads` threads (sets g->tm, g->tn); returns the lanes to run.
 * Cutting rows into tm groups reads B tm times, cutting columns into tn groups reads A tn times;
 * the estimate weighs that traffic against the rounds of the longest task, with at least
 * min_tasks tasks (where there are enough tiles) and at most four per thread. Two or more per
 * thread let the others take over the tasks of a thread the OS has descheduled, which on a
 * shared machine happens in most products longer than a fraction of a millisecond. */
static int plan_tasks(gemm *g, int threads, int min_tasks)
{
    const int MR = g->K->mr, NR = g->K->nr;
    int64_t um = g->units_m, un = g->nj;
    g->tm = g->tn = 1;
    if (threads <= 1)
        return 1;
    double a_elems = (double)g->m * (double)g->k, b_elems = (double)g->k * (double)(un * NR);
    double tile_ns = (double)MR * NR * (double)g->k / 64.0;   /* ~64 multiply-adds per ns */
    double best = -1;
    for (int64_t tm = 1; tm <= um && tm <= 4 * threads; tm++)
        for (int64_t tn = 1; tn <= un && tm * tn <= 4 * threads; tn++) {
            int64_t tasks = tm * tn;
            if (tasks < min_tasks && !(tm == um && tn == un))
                continue;
            int64_t rounds = (tasks + threads - 1) / threads;
            int64_t longest = ((um + tm - 1) / tm) * ((un + tn - 1) / tn);
            double t = (double)(rounds * longest) * tile_ns +
                       ((double)tm * b_elems + (double)tn * a_elems) / 16.0;   /* ~16 floats/ns */
            if (best < 0 || t < best) {
                best = t;
                g->tm = (int)tm;
                g->tn = (int)tn;
            }
        }
    int tasks = g->tm * g->tn;
    return tasks < threads ? tasks : threads;
}

static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

/* The packed copy of a constant B kept on its tensor: what it was made from, and the panels. */
typedef struct packed_b {
    const tfs_gemm_kernel *K;
    bool                   tb;
    const float           *b;
    int64_t                k, n, ldb, kcs;
    float                 *panels;   /* [nkb][units_n] panels of kcs x NR, 64-byte aligned (kcs:
                                      * a call's blocking, or k: tfs__gemm_whole_k_panels) */
    void                  *mem;
} packed_b;

void tfs__gemm_packed_free(void *packed)
{
    packed_b *p = packed;
    if (!p)
        return;
    tfs_free(p->mem);
    tfs_free(p);
}

/* The whole of g's B packed (g->j0 = 0, every panel), or NULL when memory runs out. */
static packed_b *pack_all(gemm *g, int64_t units_n)
{
    const int NR = g->K->nr;
    if ((double)g->nkb * (double)units_n * (double)g->kcs * NR * sizeof(float) > KEEP_PACKED_BYTES)
        return NULL;
    size_t floats = (size_t)(g->nkb * units_n * g->kcs * NR);
    packed_b *p = tfs_calloc(1, sizeof *p);
    if (!p || !(p->mem = tfs_malloc(floats * sizeof(float) + 64))) {
        tfs_free(p);
        return NULL;
    }
    *p = (packed_b){.K = g->K, .tb = g->tb, .b = g->B, .k = g->k, .n = g->n, .ldb = g->ldb,
                    .kcs = g->kcs, .mem = p->mem,
                    .panels = (float *)(((uintptr_t)p->mem + 63) & ~(uintptr_t)63)};
    gemm pg = *g;
    pg.j0 = 0;
    pg.nj = units_n;
    pg.bp = p->panels;
    for (int64_t kb = 0; kb < g->nkb; kb++) {
        int64_t pc = kb * g->kcs, kc = g->k - pc < g->kcs ? g->k - pc : g->kcs;
        for (int64_t jp = 0; jp < units_n; jp++)
            pack_b_panel(&pg, pc, kc, jp, panel(&pg, kb, jp));
    }
    return p;
}

/* The packed copy of g's B kept on `owner`, made now if the tensor has none; NULL when the
 * tensor keeps another B (or another kernel's layout) or memory runs out: the caller packs as
 * usual. */
static const packed_b *constant_b(gemm *g, const tfs_tensor *owner, int64_t units_n)
{
    tfs_tensor *t = (tfs_tensor *)owner;   /* the cache is the one field a const tensor changes */
    packed_b *p = atomic_load_explicit(&t->gemm_packed, memory_order_acquire);
    if (!p) {
        packed_b *mine = pack_all(g, units_n);
        if (!mine)
            return NULL;
        p = tfs__tensor_cache_keep(&t->gemm_packed, mine, tfs__gemm_packed_free);
    }
    bool same = p->K == g->K && p->tb == g->tb && p->b == g->B && p->k == g->k && p->n == g->n &&
                p->ldb == g->ldb && p->kcs == g->kcs;
    return same ? p : NULL;
}

static void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                  int64_t lda, const tfs_tensor *b_const, const float *b, int64_t ldb, float beta,
                  float *c, int64_t ldc, const tfs_gemm_epi *epi)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0 || alpha == 0.0f) {
        scale_c(m, n, beta, c, ldc);
        epi_block(epi, c, ldc, 0, 0, m, n);
        return;
    }
    gemm g = {.K = tfs__gemm_kernel(), .ta = ta, .tb = tb, .m = m, .n = n, .k = k,
              .alpha = alpha, .beta = beta, .A = a, .B = b, .lda = lda, .ldb = ldb, .C = c,
              .ldc = ldc, .epi = epi};
    const int MR = g.K->mr, NR = g.K->nr;
    g.nkb = (k + KC_MAX - 1) / KC_MAX;
    g.kcs = (k + g.nkb - 1) / g.nkb;
    g.units_m = (m + MR - 1) / MR;
    int64_t units_n = (n + NR - 1) / NR;
    bool big_b = (double)k * (double)n * sizeof(float) > BIG_B_BYTES;
    g.pack_b = tb || g.units_m > DIRECT_B_SLIVERS ||
               (g.units_m >= BIG_B_SLIVERS && (b_const || big_b));
    g.pack_a = !ta && bad_stride(lda) && units_n > 1;
    g.a_stride = round_up(g.kcs, 16);
    if (g.a_stride % 128 == 0)
        g.a_stride += 16;
    g.mc = A_BLOCK_BYTES / (g.kcs * (int64_t)sizeof(float)) / MR * MR;
    if (g.mc < MR)
        g.mc = MR;

    /* Columns per block: all of them unless packed B would pass B_PACK_BYTES. */
    int64_t panel_bytes = g.nkb * g.kcs * NR * (int64_t)sizeof(float);
    /* A constant B is read from its kept copy wherever the product would pack it, and where it
     * is big even by one sliver (never packed per call for that: only when it can be kept). */
    const packed_b *kept =
        b_const && (g.pack_b || big_b) ? constant_b(&g, b_const, units_n) : NULL;
    if (kept)
        g.pack_b = true;
    int64_t nj = kept ? units_n : g.pack_b ? (int64_t)(B_PACK_BYTES / (size_t)panel_bytes)
                                           : units_n;
    if (nj < 1)
        nj = 1;
    if (nj > units_n)
        nj = units_n;

    int threads = tfs__parallel_threads();
    /* One thread's time, about: multiply-adds at ~64 per ns, or reading A and B at ~20 floats
     * per ns (a batch-1 product streams B), whichever is longer. */
    double fmas = (double)m * (double)n * (double)k, floats = (double)k * (double)(m + n);
    double one_ns = fmas / 64.0 > floats / 20.0 ? fmas / 64.0 : floats / 20.0;
    double by_work = one_ns / MIN_NS_PER_THREAD;
    if (by_work < threads)
        threads = by_work < 1 ? 1 : (int)by_work;
    int min_tasks = one_ns > 200000.0 ? 2 * threads : threads;

    size_t bbytes = g.pack_b && !kept ? (size_t)(nj * panel_bytes) + 64 : 0;
    size_t sbytes = g.pack_b && !kept ? (size_t)(g.nkb * nj) * sizeof(atomic_int) + 64 : 0;
    size_t abytes = g.pack_a ? (size_t)threads * (size_t)(g.mc * g.a_stride) * sizeof(float) + 64
                             : 0;
    char *ws = NULL;
    if (bbytes + sbytes + abytes > 0 && !(ws = tfs_malloc(bbytes + sbytes + abytes))) {
        if (tb) {
            gemm_plain(&g);
            epi_block(epi, c, ldc, 0, 0, m, n);
            return;
        }
        g.pack_a = g.pack_b = false;
        nj = units_n;
        kept = NULL;
    }
    if (kept)
        g.bp = kept->panels;   /* bstate stays NULL: every panel is ready */
    if (ws) {
        uintptr_t p = ((uintptr_t)ws + 63) & ~(uintptr_t)63;
        if (g.pack_b && !kept) {
            g.bp = (float *)p;
            p = (p + (uintptr_t)(nj * panel_bytes) + 63) & ~(uintptr_t)63;
            g.bstate = (atomic_int *)p;
            p = (p + (uintptr_t)(g.nkb * nj) * sizeof(atomic_int) + 63) & ~(uintptr_t)63;
        }
        if (g.pack_a)
            g.ap = (float *)p;
    }

    for (g.j0 = 0; g.j0 < units_n; g.j0 += nj) {
        g.nj = units_n - g.j0 < nj ? units_n - g.j0 : nj;
        if (g.pack_b && !kept)
            for (int64_t i = 0; i < g.nkb * g.nj; i++)
                atomic_init(&g.bstate[i], PANEL_EMPTY);
        int lanes = plan_tasks(&g, threads, min_tasks);
        atomic_init(&g.next_task, lanes);
        if (lanes > 1)
            tfs__parallel_for(lanes, 1, lane, &g);
        else
            lane(&g, 0, 1);
    }
    tfs_free(ws);
}

void tfs__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    sgemm(ta, tb, m, n, k, alpha, a, lda, NULL, b, ldb, beta, c, ldc, NULL);
}

void tfs__sgemm_const_b(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const tfs_tensor *b_const, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc)
{
    sgemm(ta, tb, m, n, k, alpha, a, lda, b_const, b, ldb, beta, c, ldc, NULL);
}

const float *tfs__gemm_whole_k_panels(const tfs_tensor *b_const, const float *b, int64_t k,
                                      int64_t n)
{
    gemm g = {.K = tfs__gemm_kernel(), .k = k, .n = n, .B = b, .ldb = n, .nkb = 1, .kcs = k};
    int64_t units_n = (n + g.K->nr - 1) / g.K->nr;
    const packed_b *p = constant_b(&g, b_const, units_n);
    return p ? p->panels : NULL;
}

bool tfs__sgemm_epi_in_place(int64_t k)
{
    /* One block of k: each tile is computed whole, and the kernels read the added value, add it
     * and store, element by element. (Several blocks would store partial sums first; k = 0
     * scales C before the epilogue reads the side.) */
    return k >= 1 && k <= KC_MAX;
}

void tfs__sgemm_epi(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const tfs_tensor *b_const, const float *b, int64_t ldb, float *c,
                    int64_t ldc, const tfs_gemm_epi *epi)
{
    TFS_ASSERT(!epi || epi->bias);
    sgemm(ta, tb, m, n, k, 1.0f, a, lda, b_const, b, ldb, 0.0f, c, ldc, epi);
}
