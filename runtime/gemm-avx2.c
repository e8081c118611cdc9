/* The AVX2 micro-kernel of tfs__sgemm (gemm-impl.h), for x86-64 CPUs with AVX2 and FMA but no
 * AVX-512: a 6 x 16 tile of C in 12 ymm accumulators, two ymm of B and one broadcast of A per step
 * of k (15 of the 16 registers). Compiled for AVX2 + FMA by target attributes; gemm.c calls it
 * only where the CPU has them. Same structure as gemm-avx512.c: one body specialised per row
 * count, width and A layout; B loads masked only when B is read in place at its right edge.
 */
#include <immintrin.h>
#include <math.h>

#include "runtime/gemm-impl.h"

/* prfchw: PREFETCHW, which CPUs without it run as a NOP (Intel before Broadwell). */
#define TGT __attribute__((target("avx2,fma,prfchw")))
#define INLINE static inline __attribute__((always_inline)) TGT

enum { MR = 6, NR = 16 };

/* Lane mask of the first n (0..8) of 8 floats, for maskload/maskstore. */
INLINE __m256i lanes(int n)
{
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

INLINE __m256 load(const float *p, bool masked, __m256i m)
{
    return masked ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
}

/* The epilogue (gemm-impl.h) on one vector of C, as gemm-avx512.c's: bias and side read only in
 * the stored lanes, the activation as the bounds lo and hi (max(lo, x) and min(hi, x) are the
 * kernels' comparisons exactly, -0 and NaN included, and x itself for infinite bounds). */
INLINE __m256 finish(__m256 x, const float *bias, const float *side, bool full, __m256i m,
                     __m256 lo, __m256 hi)
{
    x = _mm256_add_ps(x, load(bias, !full, m));
    if (side)
        x = _mm256_add_ps(x, load(side, !full, m));
    return _mm256_min_ps(hi, _mm256_max_ps(lo, x));
}

/* As gemm-avx512.c's: during the first steps of the k loop, the lines the tile below will use.
 * It speeds up the tall products of ResNet-50's early layers most, those with an added tensor
 * above all, and leaves a product with B read in place unchanged (figures measured with this
 * kernel forced on the Zen 4 machine: bench/README.md, "Figures from source comments"). */
INLINE void prefetch_below(const tfs_gemm_tile *t, int64_t p)
{
    _mm_prefetch((const char *)(t->c + (MR + p) * t->ldc), _MM_HINT_ET0);
    if (t->side)
        _mm_prefetch((const char *)(t->side + (MR + p) * t->ld_side), _MM_HINT_T0);
}

INLINE void tile(const tfs_gemm_tile *t, const int MRV, const int NV, const bool rows,
                 const bool masked)
{
    __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
    for (int r = 0; r < MRV; r++) {
        c0[r] = _mm256_setzero_ps();
        c1[r] = _mm256_setzero_ps();
    }
    int nr = t->nr;
    __m256i m0 = lanes(nr >= 8 ? 8 : nr), m1 = lanes(nr >= 16 ? 8 : nr <= 8 ? 0 : nr - 8);
    const float *b = t->b;
    int64_t brs = t->b_rs, kc = t->kc;
    /* Row r of A: rows mode a + r * a_rs + p, columns mode a + r + p * a_cs. Byte offsets
     * 0, L, 2L, 3L, 4L, 5L from one pointer (L3 = 3L, L5 = 5L). */
    int64_t L = (rows ? t->a_rs : 1) * (int64_t)sizeof(float), L3 = 3 * L, L5 = 5 * L;
    int64_t step = (rows ? 1 : t->a_cs) * (int64_t)sizeof(float);
    /* A in segments (rows mode: the direct convolution's filter rows); B goes on. */
    for (int s = 0; s < t->n_seg; s++) {
        const char *a = (const char *)(t->a + s * t->a_seg);
        /* The tile below's A, rows in turn, a line each (only read row-wise, and when asked). */
        const char *pf_a = a + MR * L;
        int64_t pf_row = 0, pf_off = rows && t->prefetch_a ? 0 : kc * (int64_t)sizeof(float);
        for (int64_t p = 0; p < kc; p++) {
            if (s == 0 && p < MR)
                prefetch_below(t, p);
            if (pf_off < kc * (int64_t)sizeof(float)) {
                _mm_prefetch(pf_a + pf_row * L + pf_off, _MM_HINT_T0);
                if (++pf_row == MR) {
                    pf_row = 0;
                    pf_off += 64;
                }
            }
            __m256 b0 = load(b, masked, m0), b1 = b0;
            if (NV > 1)
                b1 = load(b + 8, masked, m1);
#pragma GCC unroll 6
            for (int r = 0; r < MRV; r++) {
                int64_t off = r == 0   ? 0
                              : r == 1 ? L
                              : r == 2 ? 2 * L
                              : r == 3 ? L3
                              : r == 4 ? 4 * L
                                       : L5;
                __m256 av = _mm256_broadcast_ss((const float *)(a + off));
                c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
                if (NV > 1)
                    c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
            }
            a += step;
            b += brs;
        }
    }
    float *c = t->c;
    int64_t ldc = t->ldc;
    bool full0 = nr >= 8, full1 = nr >= 16;
    __m256 va = _mm256_set1_ps(t->alpha), vb = _mm256_set1_ps(t->beta);
    bool beta0 = t->beta == 0.0f;
    bool epi = t->bias != NULL;
    __m256 lo = _mm256_set1_ps(t->act == TFS_GEMM_ACT_NONE ? -INFINITY : 0.0f);
    __m256 hi = _mm256_set1_ps(t->act == TFS_GEMM_ACT_RELU6 ? 6.0f : INFINITY);
#pragma GCC unroll 6
    for (int r = 0; r < MRV; r++) {
        float *cr = c + r * ldc;
        const float *sr = t->side ? t->side + r * t->ld_side : NULL;
        __m256 x = _mm256_mul_ps(va, c0[r]);
        if (!beta0)
            x = _mm256_fmadd_ps(va, c0[r], _mm256_mul_ps(vb, load(cr, !full0, m0)));
        if (epi)
            x = finish(x, t->bias, sr, full0, m0, lo, hi);
        if (full0)
            _mm256_storeu_ps(cr, x);
        else
            _mm256_maskstore_ps(cr, m0, x);
        if (NV > 1) {
            __m256 y = _mm256_mul_ps(va, c1[r]);
            if (!beta0)
                y = _mm256_fmadd_ps(va, c1[r], _mm256_mul_ps(vb, load(cr + 8, !full1, m1)));
            if (epi)
                y = finish(y, t->bias + 8, sr ? sr + 8 : NULL, full1, m1, lo, hi);
            if (full1)
                _mm256_storeu_ps(cr + 8, y);
            else
                _mm256_maskstore_ps(cr + 8, m1, y);
        }
    }
}

/* Variants: [rows][masked][NV - 1][MRV - 1]. */
#define V(R, M, NV, MRV)                                                                           \
    static TGT void k_##R##_##M##_##NV##_##MRV(const tfs_gemm_tile *t)                            \
    {                                                                                              \
        tile(t, MRV, NV, R, M);                                                                    \
    }
#define V6(R, M, NV)                                                                               \
    V(R, M, NV, 1) V(R, M, NV, 2) V(R, M, NV, 3) V(R, M, NV, 4) V(R, M, NV, 5) V(R, M, NV, 6)
#define T6(R, M, NV)                                                                               \
    {k_##R##_##M##_##NV##_1, k_##R##_##M##_##NV##_2, k_##R##_##M##_##NV##_3,                       \
     k_##R##_##M##_##NV##_4, k_##R##_##M##_##NV##_5, k_##R##_##M##_##NV##_6}

V6(1, 0, 1) V6(1, 0, 2) V6(1, 1, 1) V6(1, 1, 2)
V6(0, 0, 1) V6(0, 0, 2) V6(0, 1, 1) V6(0, 1, 2)

static const tfs_gemm_kernel_fn variants[2][2][2][MR] = {
    {{T6(0, 0, 1), T6(0, 0, 2)}, {T6(0, 1, 1), T6(0, 1, 2)}},
    {{T6(1, 0, 1), T6(1, 0, 2)}, {T6(1, 1, 1), T6(1, 1, 2)}},
};

void tfs__gemm_kernel_avx2(const tfs_gemm_tile *t)
{
    int nv = t->nr > 8 ? 2 : 1;
    bool rows = t->a_cs == 1, masked = !t->b_padded && t->nr < 8 * nv;
    variants[rows][masked][nv - 1][t->mr - 1](t);
}

TGT void tfs__gemm_pack_b_avx2(bool tb, int64_t kc, int nr, const float *src, int64_t ld,
                               float *dst)
{
    if (!tb) {
        __m256i m0 = lanes(nr >= 8 ? 8 : nr), m1 = lanes(nr >= 16 ? 8 : nr <= 8 ? 0 : nr - 8);
        bool full = nr == NR;
        for (int64_t p = 0; p < kc; p++, src += ld, dst += NR) {
            _mm256_storeu_ps(dst, load(src, !full, m0));
            _mm256_storeu_ps(dst + 8, load(src + 8, !full, m1));
        }
        return;
    }
    for (int64_t p = 0; p < kc; p++)
        for (int j = 0; j < NR; j++)
            dst[p * NR + j] = j < nr ? src[j * ld + p] : 0.0f;
}
