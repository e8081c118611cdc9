/* Tests of tfserve's float GEMM, tfs__sgemm (runtime/gemm.c and its micro-kernels), on every
 * instruction set this CPU has (AVX-512, AVX2, plain C, forced through tfs__gemm_force_isa).
 * References are float64 loops written here. Tolerance: a float sum of k products has a rounding
 * error below k * 2^-24 * sum |terms| (plus the alpha/beta rounding), so
 *     |got - ref| <= (k + 4) * FLT_EPSILON * (|alpha| sum_p |a_ip b_pj| + |beta c_ij|)
 * which is twice that bound; exact small cases are compared exactly. Products that the thread
 * count or a split of the rows must not change are compared bit for bit.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/gemm-impl.h"
#include "tests/runtime/helpers.h"

Suite *suite_runtime_gemm(void);

static float *rnd(int64_t n, uint32_t seed)
{
    float *v = tfs_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)((int32_t)(x >> 8) - (1 << 23)) / (float)(1 << 23);   /* [-1, 1) */
    }
    return v;
}

/* One product to check: C = alpha op(A) op(B) + beta C with the given leading dimensions (0:
 * the minimal one). */
typedef struct prob {
    bool    ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    float   alpha, beta;
} prob;

typedef struct bufs {
    float *a, *b, *c, *c0;
    int64_t lda, ldb, ldc;
} bufs;

static void bufs_init(prob *p, bufs *d, uint32_t seed)
{
    d->lda = p->lda ? p->lda : p->ta ? p->m : p->k;
    d->ldb = p->ldb ? p->ldb : p->tb ? p->k : p->n;
    d->ldc = p->ldc ? p->ldc : p->n;
    int64_t arows = p->ta ? p->k : p->m, brows = p->tb ? p->n : p->k;
    d->a = rnd(arows * d->lda, seed);
    d->b = rnd(brows * d->ldb, seed + 1);
    d->c = rnd(p->m * d->ldc, seed + 2);
    d->c0 = tfs_malloc((size_t)(p->m * d->ldc > 0 ? p->m * d->ldc : 1) * sizeof(float));
    ck_assert_ptr_nonnull(d->c0);
    memcpy(d->c0, d->c, (size_t)(p->m * d->ldc) * sizeof(float));
    /* Padding of A and B must not be read: NaN there would show in the result. */
    for (int64_t r = 0; r < arows; r++)
        for (int64_t j = p->ta ? p->m : p->k; j < d->lda; j++)
            d->a[r * d->lda + j] = NAN;
    for (int64_t r = 0; r < brows; r++)
        for (int64_t j = p->tb ? p->k : p->n; j < d->ldb; j++)
            d->b[r * d->ldb + j] = NAN;
    if (p->beta == 0.0f)   /* beta 0: C is not read, NaN included */
        for (int64_t i = 0; i < p->m * d->ldc; i++)
            d->c[i] = d->c0[i] = NAN;
}

static void bufs_free(bufs *d)
{
    tfs_free(d->a);
    tfs_free(d->b);
    tfs_free(d->c);
    tfs_free(d->c0);
}

static void run(const prob *p, bufs *d)
{
    tfs__sgemm(p->ta, p->tb, p->m, p->n, p->k, p->alpha, d->a, d->lda, d->b, d->ldb, p->beta, d->c,
               d->ldc);
}

/* Checks d->c against the float64 reference from d->c0; the padding of C must be untouched. */
static void check(const prob *p, const bufs *d, const char *isa)
{
    for (int64_t i = 0; i < p->m; i++) {
        for (int64_t j = 0; j < p->n; j++) {
            double s = 0, mag = 0;
            for (int64_t q = 0; q < p->k; q++) {
                double a = p->ta ? d->a[q * d->lda + i] : d->a[i * d->lda + q];
                double b = p->tb ? d->b[j * d->ldb + q] : d->b[q * d->ldb + j];
                s += a * b;
                mag += fabs(a * b);
            }
            double c0 = p->beta == 0.0f ? 0.0 : d->c0[i * d->ldc + j];
            double ref = p->alpha * s + p->beta * c0;
            double tol = (p->k + 4) * FLT_EPSILON * (fabs(p->alpha) * mag + fabs(p->beta * c0));
            float got = d->c[i * d->ldc + j];
            if (fabs(got - ref) > tol)   /* ck_assert only on failure: each call is a write */
                ck_abort_msg("%s ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g: C[%lld,%lld] "
                             "= %.9g, want %.9g (tol %.3g)",
                             isa, p->ta, p->tb, (long long)p->m, (long long)p->n,
                             (long long)p->k, p->alpha, p->beta, (long long)i, (long long)j, got,
                             ref, tol);
        }
        for (int64_t j = p->n; j < d->ldc; j++) {
            float want = d->c0[i * d->ldc + j], got = d->c[i * d->ldc + j];
            if (memcmp(&got, &want, sizeof got) != 0)
                ck_abort_msg("%s: C padding [%lld,%lld] written", isa, (long long)i,
                             (long long)j);
        }
    }
}

static void check_one(prob p, uint32_t seed, const char *isa)
{
    bufs d;
    bufs_init(&p, &d, seed);
    run(&p, &d);
    check(&p, &d, isa);
    bufs_free(&d);
}

/* Calls fn once per instruction set the CPU has, that set forced; restores the automatic choice. */
static void each_isa(void (*fn)(const char *isa))
{
    for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++) {
        if (!tfs__gemm_force_isa((enum tfs_gemm_isa)i))
            continue;
        fn(tfs__gemm_kernel()->name);
    }
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
}

START_TEST(test_gemm_hand)
{
    /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]], on every ISA. */
    for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++) {
        if (!tfs__gemm_force_isa((enum tfs_gemm_isa)i))
            continue;
        float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12}, c[4] = {NAN, NAN, NAN, NAN};
        tfs__sgemm(false, false, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
        ck_assert_float_eq(c[0], 58);
        ck_assert_float_eq(c[1], 64);
        ck_assert_float_eq(c[2], 139);
        ck_assert_float_eq(c[3], 154);
        /* Transposed operands: A^T stored [3,2], B^T stored [2,3]; alpha 2, beta -1. */
        float at[] = {1, 4, 2, 5, 3, 6}, bt[] = {7, 9, 11, 8, 10, 12};
        tfs__sgemm(true, true, 2, 2, 3, 2.0f, at, 2, bt, 3, -1.0f, c, 2);
        ck_assert_float_eq(c[0], 58);
        ck_assert_float_eq(c[3], 154);
    }
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_C));
    ck_assert(!tfs__gemm_force_isa((enum tfs_gemm_isa)(TFS_GEMM_ISA_COUNT + 1)));
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
    const char *name = tfs_runtime_gemm_kernel();
    ck_assert(strcmp(name, "avx512") == 0 || strcmp(name, "avx2") == 0 || strcmp(name, "c") == 0);
}
END_TEST

static void odd_sizes(const char *isa)
{
    static const int64_t ns[] = {1, 15, 16, 17, 31, 32, 33, 67}, ks[] = {1, 7, 67};
    static const int64_t ms[] = {1, 3, 14, 15, 29, 67}, ks2[] = {2, 67};
    static const int64_t mn[][2] = {{1, 1}, {5, 40}, {17, 33}, {67, 67}};
    uint32_t seed = 1;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        for (int64_t m = 1; m <= 67; m++)
            for (int i = 0; i < 8; i++)
                for (int j = 0; j < 3; j++)
                    check_one((prob){ta, tb, m, ns[i], ks[j], .alpha = 1}, seed++, isa);
        for (int64_t n = 1; n <= 67; n++)
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 2; j++)
                    check_one((prob){ta, tb, ms[i], n, ks2[j], .alpha = 1}, seed++, isa);
        for (int64_t k = 1; k <= 67; k++)
            for (int i = 0; i < 4; i++)
                check_one((prob){ta, tb, mn[i][0], mn[i][1], k, .alpha = 1}, seed++, isa);
    }
}

START_TEST(test_gemm_odd_sizes)
{
    /* Every m, n and k in 1..67 against sizes around the tile edges, all four transposes. */
    each_isa(odd_sizes);
}
END_TEST

static void blocked(const char *isa)
{
    /* k across blocks of KC (512); m past the in-place-B limit (4 slivers), so B is packed;
     * n wide enough for several panels; rows in several A blocks. */
    static const int64_t shapes[][3] = {
        {30, 40, 511}, {30, 40, 513}, {100, 70, 1025}, {200, 33, 100}, {57, 65, 600},
        {3, 300, 700}, {1, 129, 50}, {2, 260, 31}, {300, 20, 9},
    };
    uint32_t seed = 100;
    for (int s = 0; s < 9; s++)
        for (int t = 0; t < 4; t++)
            check_one((prob){t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], .alpha = 1},
                      seed++, isa);
}

START_TEST(test_gemm_blocked)
{
    each_isa(blocked);
}
END_TEST

static void strides(const char *isa)
{
    /* Leading dimensions beyond the minimal, padding NaN (A, B) or sentinel (C); strides that
     * are multiples of 512 bytes (A copied row-wise) and odd ones. */
    static const int64_t lds[][3] = {{70, 90, 75}, {128, 256, 128}, {1024, 64, 200}, {77, 33, 41}};
    uint32_t seed = 200;
    for (int l = 0; l < 4; l++)
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            int64_t m = 61, n = 33, k = 29;
            if (lds[l][0] < (ta ? m : k) || lds[l][1] < (tb ? k : n) || lds[l][2] < n)
                continue;
            check_one((prob){ta, tb, m, n, k, lds[l][0], lds[l][1], lds[l][2], 1.0f, 0.0f}, seed++,
                      isa);
            check_one((prob){ta, tb, 5, n, 300, lds[l][0] > 300 ? lds[l][0] : 300 + l,
                             lds[l][1] > 300 ? lds[l][1] : 301, lds[l][2], 1.0f, 0.5f},
                      seed++, isa);
        }
}

START_TEST(test_gemm_strides)
{
    each_isa(strides);
}
END_TEST

static void alpha_beta(const char *isa)
{
    static const float alphas[] = {1.0f, -0.5f, 2.0f}, betas[] = {0.0f, 1.0f, 0.25f, -3.0f};
    static const int64_t shapes[][3] = {{1, 10, 5}, {14, 32, 64}, {90, 50, 600}, {7, 130, 20}};
    uint32_t seed = 300;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int s = 0; s < 4; s++)
                for (int t = 0; t < 4; t++)
                    check_one((prob){t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2],
                                     .alpha = alphas[a], .beta = betas[b]},
                              seed++, isa);
}

START_TEST(test_gemm_alpha_beta)
{
    each_isa(alpha_beta);
}
END_TEST

START_TEST(test_gemm_k0_alpha0)
{
    /* k = 0 or alpha = 0: C = beta C, and beta 0 clears C even where it held NaN; m or n = 0
     * touches nothing. */
    float a[4] = {1, 2, 3, 4}, b[4] = {NAN, 1, 1, 1};
    float c[4] = {NAN, 2, -4, INFINITY};
    tfs__sgemm(false, false, 2, 2, 0, 1.0f, a, 1, b, 2, 0.0f, c, 2);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(c[i], 0);
    float d[4] = {1, 2, -4, 8};
    tfs__sgemm(false, false, 2, 2, 0, 1.0f, a, 1, b, 2, 0.5f, d, 2);
    ck_assert_float_eq(d[0], 0.5f);
    ck_assert_float_eq(d[3], 4);
    tfs__sgemm(false, false, 2, 2, 2, 0.0f, a, 2, b, 2, 2.0f, d, 2);   /* NaN in B not used */
    ck_assert_float_eq(d[0], 1);
    ck_assert_float_eq(d[2], -4);
    float e[1] = {7};
    tfs__sgemm(false, false, 0, 1, 3, 1.0f, a, 3, b, 1, 0.0f, e, 1);
    tfs__sgemm(false, false, 1, 0, 3, 1.0f, a, 3, b, 1, 0.0f, e, 1);
    ck_assert_float_eq(e[0], 7);
}
END_TEST

/* Products large enough to be split over threads, in the shapes the models have. */
static const int64_t split_shapes[][3] = {
    {300, 512, 128}, {64, 512, 300}, {1, 512, 784}, {8, 512, 784}, {400, 64, 800},
    {3136, 32, 25},  {49, 256, 1100}, {120, 130, 1100}, {61, 333, 77},
};
#define N_SPLIT ((int)(sizeof split_shapes / sizeof split_shapes[0]))

START_TEST(test_gemm_threads_identical)
{
    /* 1, 2 and 3 threads give the same bits, for every transpose and ISA. */
    for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++) {
        if (!tfs__gemm_force_isa((enum tfs_gemm_isa)i))
            continue;
        for (int s = 0; s < N_SPLIT; s++)
            for (int t = 0; t < 4; t++) {
                if (i == TFS_GEMM_C && split_shapes[s][0] * split_shapes[s][1] *
                                               split_shapes[s][2] > 5000000)
                    continue;   /* the plain C kernel is slow; small shapes show the same */
                prob p = {t & 1, t & 2, split_shapes[s][0], split_shapes[s][1],
                          split_shapes[s][2], .alpha = 1.0f, .beta = t == 3 ? 0.5f : 0.0f};
                bufs d;
                bufs_init(&p, &d, (uint32_t)(s * 4 + t));
                size_t bytes = (size_t)(p.m * d.ldc) * sizeof(float);
                float *one = tfs_malloc(bytes);
                ck_assert_ptr_nonnull(one);
                tfs_runtime_set_num_threads(1);
                run(&p, &d);
                memcpy(one, d.c, bytes);
                for (int th = 2; th <= 3; th++) {
                    memcpy(d.c, d.c0, bytes);
                    tfs_runtime_set_num_threads(th);
                    run(&p, &d);
                    ck_assert_msg(memcmp(one, d.c, bytes) == 0,
                                  "%s ta=%d tb=%d %lldx%lldx%lld: %d threads differ from 1",
                                  tfs__gemm_kernel()->name, p.ta, p.tb, (long long)p.m,
                                  (long long)p.n, (long long)p.k, th);
                }
                if (s < 3 && t == 0)
                    check(&p, &d, tfs__gemm_kernel()->name);
                tfs_free(one);
                bufs_free(&d);
            }
    }
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
    tfs_runtime_set_num_threads(0);
}
END_TEST

START_TEST(test_gemm_row_split_identical)
{
    /* Rows computed in separate calls (as Conv2D does by chunks of its patch rows) give the same
     * bits as one call: a chunk of 1..9 rows takes the in-place paths, a big one the packed. */
    static const int64_t cuts[] = {1, 3, 9, 14, 57, 100, 301};
    prob p = {false, false, 600, 64, 800, .alpha = 1.0f};
    bufs d;
    bufs_init(&p, &d, 77);
    size_t bytes = (size_t)(p.m * p.n) * sizeof(float);
    float *whole = tfs_malloc(bytes);
    ck_assert_ptr_nonnull(whole);
    run(&p, &d);
    memcpy(whole, d.c, bytes);
    for (int c = 0; c < 7; c++) {
        memset(d.c, 0, bytes);
        for (int64_t r0 = 0; r0 < p.m; r0 += cuts[c]) {
            int64_t rows = p.m - r0 < cuts[c] ? p.m - r0 : cuts[c];
            tfs__sgemm(false, false, rows, p.n, p.k, 1.0f, d.a + r0 * d.lda, d.lda, d.b, d.ldb,
                       0.0f, d.c + r0 * d.ldc, d.ldc);
        }
        ck_assert_msg(memcmp(whole, d.c, bytes) == 0, "chunks of %lld rows differ",
                      (long long)cuts[c]);
    }
    tfs_free(whole);
    bufs_free(&d);
}
END_TEST

START_TEST(test_gemm_isas_agree)
{
    /* AVX2 and C against AVX-512 (where the CPU has them) on the model shapes, within the
     * tolerance of the float64 reference. */
    for (int s = 0; s < N_SPLIT; s++) {
        for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++) {
            if (!tfs__gemm_force_isa((enum tfs_gemm_isa)i))
                continue;
            check_one((prob){false, s % 2 == 1, split_shapes[s][0], split_shapes[s][1],
                             split_shapes[s][2], .alpha = 1},
                      (uint32_t)(500 + s), tfs__gemm_kernel()->name);
        }
    }
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
}
END_TEST

START_TEST(test_gemm_no_workspace)
{
    /* Without memory for packing (the first allocation fails) the product is still right: B
     * read in place, or for a transposed B the plain loop. */
    for (int t = 0; t < 4; t++) {
        prob p = {t & 1, t & 2, 100, 70, 600, .alpha = 1.5f, .beta = 0.5f};
        bufs d;
        bufs_init(&p, &d, (uint32_t)(900 + t));
        tfs_alloc_fail_after(1);
        run(&p, &d);
        tfs_alloc_fail_after(0);
        check(&p, &d, "no workspace");
        bufs_free(&d);
    }
}
END_TEST

START_TEST(test_gemm_big_b_column_blocks)
{
    /* Packed B over 32 MiB is done in column blocks: B^T [2600, 4096] (42 MB), 6 rows. */
    prob p = {false, true, 6, 2600, 4096, .alpha = 1};
    check_one(p, 1234, tfs__gemm_kernel()->name);
}
END_TEST

START_TEST(test_gemm_big_b_packed_for_few_slivers)
{
    /* A dense layer whose weights pass 4 MiB: B [1100, 1000] (4.4 MB). With 2..8 slivers of rows
     * B is packed panel by panel (gemm.c, BIG_B_BYTES), with one it is read in place; both must
     * match the reference, and the bits must not depend on the path: the same rows computed one
     * call per row (in place) equal the 20-row call (packed). */
    prob p = {false, false, 20, 1000, 1100, .alpha = 1};
    bufs d;
    bufs_init(&p, &d, 77);
    run(&p, &d);
    check(&p, &d, tfs__gemm_kernel()->name);
    float *rows = tfs_malloc((size_t)(p.m * p.n) * sizeof *rows);
    ck_assert_ptr_nonnull(rows);
    for (int64_t i = 0; i < p.m; i++)
        tfs__sgemm(false, false, 1, p.n, p.k, 1.0f, d.a + i * d.lda, d.lda, d.b, d.ldb, 0.0f,
                   rows + i * p.n, p.n);
    ck_assert_msg(memcmp(rows, d.c, (size_t)(p.m * p.n) * sizeof *rows) == 0,
                  "packed (20 rows) and in-place (1 row per call) products differ in bits");
    tfs_free(rows);
    bufs_free(&d);
}
END_TEST

static void const_b(const char *isa)
{
    /* A constant B kept packed on its tensor (tfs__sgemm_const_b): the same bits as tfs__sgemm,
     * on the first call (which packs) and on later ones (which reuse the copy); products that do
     * not pack B (one sliver) leave the tensor alone; another B on the same tensor (an offset
     * pointer) or another kernel does not use the copy and is still right. */
    int64_t k = 700, n = 90, bd[2] = {k, n};
    tfs_tensor *bt = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, bd, &bt, &st), TFS_OK);
    float *b = rnd(k * n, 31), *a = rnd(200 * k, 32);
    memcpy(bt->data, b, (size_t)(k * n) * sizeof(float));
    float *want = tfs_malloc((size_t)(200 * n) * sizeof *want);
    float *got = tfs_malloc((size_t)(200 * n) * sizeof *got);
    ck_assert(want && got);
    static const int64_t ms[] = {1, 20, 130, 200};   /* 20 rows: 2+ slivers, kept too */
    for (int i = 0; i < 4; i++) {
        int64_t m = ms[i];
        tfs__sgemm(false, false, m, n, k, 1.0f, a, k, bt->data, n, 0.0f, want, n);
        tfs__sgemm_const_b(false, false, m, n, k, 1.0f, a, k, bt, bt->data, n, 0.0f, got, n);
        ck_assert_msg(memcmp(want, got, (size_t)(m * n) * sizeof *got) == 0,
                      "%s m=%lld: kept packed B changed the bits", isa, (long long)m);
        void *kept = atomic_load(&bt->gemm_packed);
        ck_assert_msg(i == 0 ? kept == NULL : kept != NULL, "%s m=%lld: packed copy %s", isa,
                      (long long)m, kept ? "kept" : "not kept");
    }
    /* The last 600 rows of the same tensor as B: another B, not the copy. */
    const float *b2 = (const float *)bt->data + 100 * n;
    tfs__sgemm(false, false, 200, n, 600, 1.0f, a, k, b2, n, 0.0f, want, n);
    tfs__sgemm_const_b(false, false, 200, n, 600, 1.0f, a, k, bt, b2, n, 0.0f, got, n);
    ck_assert_msg(memcmp(want, got, (size_t)(200 * n) * sizeof *got) == 0,
                  "%s: an offset B on a tensor with a kept copy", isa);
    prob p = {false, false, 200, n, k, .alpha = 1};
    bufs d = {.a = a, .b = bt->data, .c = got, .lda = k, .ldb = n, .ldc = n};
    tfs__sgemm_const_b(false, false, 200, n, k, 1.0f, a, k, bt, bt->data, n, 0.0f, got, n);
    d.c0 = got;
    check(&p, &d, isa);   /* against the float64 reference too */
    tfs_free(a);
    tfs_free(b);
    tfs_free(want);
    tfs_free(got);
    tfs_tensor_unref(bt);   /* frees the kept copy (ASan, valgrind) */
}

START_TEST(test_gemm_const_b_kept)
{
    each_isa(const_b);
}
END_TEST

static void const_big_b(const char *isa)
{
    /* A constant B over 4 MiB (a big dense layer's weights) is kept packed from its first
     * product, even one of a single row, and every row count of one sliver (1 row: the wide-tile
     * path when B is read in place) gives the in-place product's bits. */
    int64_t k = 1100, n = 1000, bd[2] = {k, n};   /* 4.4 MB */
    tfs_tensor *bt = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, bd, &bt, &st), TFS_OK);
    float *b = rnd(k * n, 41), *a = rnd(16 * k, 42);
    memcpy(bt->data, b, (size_t)(k * n) * sizeof(float));
    float *want = tfs_malloc((size_t)(16 * n) * sizeof *want);
    float *got = tfs_malloc((size_t)(16 * n) * sizeof *got);
    ck_assert(want && got);
    static const int64_t ms[] = {1, 2, 3, 8, 14};
    for (int i = 0; i < 5; i++) {
        int64_t m = ms[i];
        tfs__sgemm(false, false, m, n, k, 1.0f, a, k, bt->data, n, 0.0f, want, n);
        tfs__sgemm_const_b(false, false, m, n, k, 1.0f, a, k, bt, bt->data, n, 0.0f, got, n);
        ck_assert_msg(memcmp(want, got, (size_t)(m * n) * sizeof *got) == 0,
                      "%s m=%lld: kept packed big B changed the bits", isa, (long long)m);
        ck_assert_msg(atomic_load(&bt->gemm_packed) != NULL, "%s m=%lld: big B not kept", isa,
                      (long long)m);
    }
    prob p = {false, false, 8, n, k, .alpha = 1};
    bufs d = {.a = a, .b = bt->data, .c = got, .lda = k, .ldb = n, .ldc = n};
    tfs__sgemm_const_b(false, false, 8, n, k, 1.0f, a, k, bt, bt->data, n, 0.0f, got, n);
    d.c0 = got;
    check(&p, &d, isa);   /* against the float64 reference too */
    tfs_free(a);
    tfs_free(b);
    tfs_free(want);
    tfs_free(got);
    tfs_tensor_unref(bt);
}

START_TEST(test_gemm_const_big_b_one_sliver)
{
    each_isa(const_big_b);
}
END_TEST

Suite *suite_runtime_gemm(void)
{
    Suite *s = suite_create("runtime_gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gemm_hand);
    tcase_add_test(tc, test_gemm_odd_sizes);
    tcase_add_test(tc, test_gemm_blocked);
    tcase_add_test(tc, test_gemm_strides);
    tcase_add_test(tc, test_gemm_alpha_beta);
    tcase_add_test(tc, test_gemm_k0_alpha0);
    tcase_add_test(tc, test_gemm_threads_identical);
    tcase_add_test(tc, test_gemm_row_split_identical);
    tcase_add_test(tc, test_gemm_isas_agree);
    tcase_add_test(tc, test_gemm_no_workspace);
    tcase_add_test(tc, test_gemm_big_b_column_blocks);
    tcase_add_test(tc, test_gemm_big_b_packed_for_few_slivers);
    tcase_add_test(tc, test_gemm_const_b_kept);
    tcase_add_test(tc, test_gemm_const_big_b_one_sliver);
    suite_add_tcase(s, tc);
    return s;
}
