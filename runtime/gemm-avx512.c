/* The AVX-512 micro-kernel of tfs__sgemm (gemm-impl.h): a 14 x 32 tile of C in 28 zmm
 * accumulators, two zmm of B and one broadcast of A per step of k (31 of the 32 registers).
 * Compiled for AVX-512F + FMA (and PREFETCHW, which every AVX-512 CPU has) by target attributes;
 * gemm.c calls it only where the CPU has them.
 *
 * DESIGN. One generic body is specialised (always_inline, constant arguments) into a variant per
 * row count (1..14), per width (one or two vectors of B) and per A layout, so edge tiles and
 * small-m products run code without dead rows; the loads of B are masked only where B is read in
 * place at its right edge (a packed panel is zero-padded). For A read row-wise, rows 0..6 and
 * 7..13 are addressed from two pointers at byte offsets 0, L, 2L, 3L, 4L, 5L, 2*3L (L = the row
 * stride), so the loop needs five integer registers instead of fourteen and nothing spills.
 */
#include <immintrin.h>
#include <math.h>

#include "runtime/gemm-impl.h"

#define TGT __attribute__((target("avx512f,fma,prfchw")))
#define INLINE static inline __attribute__((always_inline)) TGT

enum { MR = 14, NR = 32 };
/* Steps of k ahead that the 32-column loops prefetch B: read in place, B's rows are a long stride
 * apart, which the hardware prefetchers do not run far enough ahead on (it speeds up the
 * in-place products, e.g. ResNet-50's [49, 4608] x [4608, 512]; neutral on packed B). Not in
 * the wide tiles, whose 512-byte runs stream well (there it cost time). Figures for this file's
 * comments: bench/README.md, "Figures from source comments". */
#ifndef PF_ROWS
#define PF_ROWS 16
#endif

/* Byte offset of row r (mod 7) from its base pointer; L3 = 3L, L5 = 5L. */
#define ROW_OFF(r, L, L3, L5)                                                                      \
    ((r) % 7 == 0   ? 0                                                                            \
     : (r) % 7 == 1 ? (L)                                                                          \
     : (r) % 7 == 2 ? 2 * (L)                                                                      \
     : (r) % 7 == 3 ? (L3)                                                                         \
     : (r) % 7 == 4 ? 4 * (L)                                                                      \
     : (r) % 7 == 5 ? (L5)                                                                         \
                    : 2 * (L3))

/* The epilogue (gemm-impl.h) on one vector of C: bias and side loaded under the store's mask, then
 * the activation as bounds lo and hi (-inf and +inf for none, 0 and +inf for Relu, 0 and 6 for
 * Relu6), without a branch: max(lo, x) is x < lo ? lo : x exactly, -0 and NaN included (MAXPS
 * returns its second operand unless the first is greater), min(hi, x) likewise x > hi ? hi : x,
 * and both are x itself for infinite bounds. (With a branch per step, GCC unswitched the unrolled
 * store loop into many copies: the file's code was 4.2x that without an epilogue, now 3.6x.) */
INLINE __m512 finish(__m512 x, const float *bias, const float *side, __mmask16 m, __m512 lo,
                     __m512 hi)
{
    x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias));
    if (side)
        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, side));
    return _mm512_min_ps(hi, _mm512_max_ps(lo, x));
}

INLINE __m512 act_lo(const tfs_gemm_tile *t)
{
    return _mm512_set1_ps(t->act == TFS_GEMM_ACT_NONE ? -INFINITY : 0.0f);
}

INLINE __m512 act_hi(const tfs_gemm_tile *t)
{
    return _mm512_set1_ps(t->act == TFS_GEMM_ACT_RELU6 ? 6.0f : INFINITY);
}

/* Each tile requests, during the first steps of its k loop, what the tile below it (its next MR
 * rows) will read and write from memory: its lines of C (for writing) and of the added tensor,
 * one row per step, and, where the caller says the tile below reads rows of A not yet in cache
 * (prefetch_a), its rows of A (a line of each row per 16 steps). The callers run a column of
 * tiles top down (gemm.c within a panel, the direct convolution along a row of pixels), so the
 * tile below is the next one, and a whole tile's k loop hides each line's trip from memory.
 * Requests made by the tile itself, just before its k loop, came too late: ResNet-50's
 * first-stage 1x1 layers at batch 8 (outputs of 25.7 MB, rows 1 KB apart that no prefetcher
 * follows) were memory-bound. Requesting C and the added tensor a tile ahead sped ResNet-50 up
 * (most its 64 -> 256 layers with a residual Add), A too (its 256 -> 64 layers), and A on the
 * direct path too while that path read a padded copy of the whole input (it now copies each
 * block of rows just before it uses them, and asks for no A). A is requested only on a block's
 * first panel (gemm.c): on every tile it cost time on the later stages, whose A is in cache
 * after the first panel. Prefetches never fault, so the rows past the last tile need no test;
 * they are worth requesting, too: the next output row's input, the next A block (requests
 * limited to a tile below that exists were slower). */
INLINE void prefetch_below(const tfs_gemm_tile *t, int64_t p, const int NV)
{
    const float *c = t->c + (MR + p) * t->ldc;
    _mm_prefetch((const char *)c, _MM_HINT_ET0);
    if (NV > 1)
        _mm_prefetch((const char *)(c + 16), _MM_HINT_ET0);
    if (t->side) {
        const float *s = t->side + (MR + p) * t->ld_side;
        _mm_prefetch((const char *)s, _MM_HINT_T0);
        if (NV > 1)
            _mm_prefetch((const char *)(s + 16), _MM_HINT_T0);
    }
}

/* Requests the row of B that step PF_ROWS steps ahead reads (one or two vectors). */
INLINE void prefetch_b(const float *b, int64_t brs, const int NV)
{
    _mm_prefetch((const char *)(b + PF_ROWS * brs), _MM_HINT_T0);
    if (NV > 1)
        _mm_prefetch((const char *)(b + PF_ROWS * brs + 16), _MM_HINT_T0);
}

/* One step of k: row p of B (one or two vectors) times each row's value of A, into the
 * accumulators. A's values lie at a0 + ROW_OFF (rows 0-6) and a7 + ROW_OFF (rows 7-13) when
 * `rows`, else next to each other at a0. */
INLINE void fma_step(__m512 *c0, __m512 *c1, const float *b, __mmask16 m0, __mmask16 m1,
                     const char *a0, const char *a7, int64_t L, int64_t L3, int64_t L5,
                     const int MRV, const int NV, const bool rows, const bool masked)
{
    __m512 b0 = masked ? _mm512_maskz_loadu_ps(m0, b) : _mm512_loadu_ps(b);
    __m512 b1 = b0;
    if (NV > 1)
        b1 = masked ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_loadu_ps(b + 16);
#pragma GCC unroll 14
    for (int r = 0; r < MRV; r++) {
        const char *ar = rows ? (r < 7 ? a0 : a7) + ROW_OFF(r, L, L3, L5)
                              : a0 + r * (int64_t)sizeof(float);
        __m512 av = _mm512_set1_ps(*(const float *)ar);
        c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
        if (NV > 1)
            c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
}

INLINE void tile(const tfs_gemm_tile *t, const int MRV, const int NV, const bool rows,
                 const bool masked)
{
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
    for (int r = 0; r < MRV; r++) {
        c0[r] = _mm512_setzero_ps();
        c1[r] = _mm512_setzero_ps();
    }
    int nr = t->nr;
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1);
    __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xffffu : nr <= 16 ? 0u : (1u << (nr - 16)) - 1);
    const float *b = t->b;
    int64_t brs = t->b_rs, kc = t->kc;
    if (rows) {
        int64_t L = t->a_rs * (int64_t)sizeof(float), L3 = 3 * L, L5 = 5 * L;
        /* A in segments (the direct convolution: one per filter row), each kc steps long; B goes
         * on where the last one stopped. */
        const char *seg = (const char *)t->a;
        for (int s = 0; s < t->n_seg; s++, seg += t->a_seg * (int64_t)sizeof(float)) {
            const char *a0 = seg;
            const char *a7 = MRV > 7 ? seg + 7 * L : a0;
            /* The tile below's A (prefetch_a): its MR rows start MR * L further on. */
            const char *pf_a = seg + MR * L;
            bool pf = t->prefetch_a && s == 0;
            int64_t p = 0;
            /* The head: the tile below's lines of C (and of the added tensor) and, with
             * prefetch_a, the first two lines of each of its rows of A, one row per step. */
            if (s == 0)
                for (int64_t head = kc < MR ? kc : MR; p < head; p++) {
                    prefetch_b(b, brs, NV);
                    prefetch_below(t, p, NV);
                    if (pf) {
                        _mm_prefetch(pf_a + p * L, _MM_HINT_T0);
                        _mm_prefetch(pf_a + p * L + 64, _MM_HINT_T0);
                    }
                    fma_step(c0, c1, b, m0, m1, a0, a7, L, L3, L5, MRV, NV, true, masked);
                    a0 += sizeof(float);
                    a7 += sizeof(float);
                    b += brs;
                }
            /* Then blocks of 16 steps (a line of each row of A), each of which first requests
             * the tile below's next line of each of its rows. With those requests and the head's
             * made from one loop, a test per step, GCC spilled the loop's pointers and counters
             * to the stack; this way a tile from L1 runs nearly as fast as from packed A, and
             * ResNet-50 at batch 64 gained a little (bench/README.md). */
            while (p < kc) {
                int64_t end = kc - p < 16 ? kc : p + 16;
                if (pf)
                    for (int r = 0; r < MR; r++)
                        _mm_prefetch(pf_a + r * L + p * (int64_t)sizeof(float) + 64,
                                     _MM_HINT_T0);
                for (; p < end; p++) {
                    prefetch_b(b, brs, NV);
                    fma_step(c0, c1, b, m0, m1, a0, a7, L, L3, L5, MRV, NV, true, masked);
                    a0 += sizeof(float);
                    a7 += sizeof(float);
                    b += brs;
                }
            }
        }
    } else {
        const float *a = t->a;
        int64_t acs = t->a_cs;
        for (int64_t p = 0; p < kc; p++) {
            prefetch_b(b, brs, NV);
            if (p < MR)
                prefetch_below(t, p, NV);
            fma_step(c0, c1, b, m0, m1, (const char *)a, NULL, 0, 0, 0, MRV, NV, false, masked);
            a += acs;
            b += brs;
        }
    }
    float *c = t->c;
    int64_t ldc = t->ldc;
    __m512 va = _mm512_set1_ps(t->alpha);
    if (t->bias) {
        __m512 vb = _mm512_set1_ps(t->beta), lo = act_lo(t), hi = act_hi(t);
        bool beta0 = t->beta == 0.0f;
        const float *b0 = t->bias, *b1 = NV > 1 ? t->bias + 16 : t->bias;
#pragma GCC unroll 14
        for (int r = 0; r < MRV; r++) {
            float *cr = c + r * ldc;
            const float *s0 = t->side ? t->side + r * t->ld_side : NULL;
            __m512 x = _mm512_mul_ps(va, c0[r]);
            if (!beta0)
                x = _mm512_fmadd_ps(va, c0[r], _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m0, cr)));
            _mm512_mask_storeu_ps(cr, m0, finish(x, b0, s0, m0, lo, hi));
            if (NV > 1) {
                __m512 y = _mm512_mul_ps(va, c1[r]);
                if (!beta0)
                    y = _mm512_fmadd_ps(va, c1[r],
                                        _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16)));
                __m512 z = finish(y, b1, s0 ? s0 + 16 : NULL, m1, lo, hi);
                _mm512_mask_storeu_ps(cr + 16, m1, z);
            }
        }
    } else if (t->beta == 0.0f) {
#pragma GCC unroll 14
        for (int r = 0; r < MRV; r++) {
            _mm512_mask_storeu_ps(c + r * ldc, m0, _mm512_mul_ps(va, c0[r]));
            if (NV > 1)
                _mm512_mask_storeu_ps(c + r * ldc + 16, m1, _mm512_mul_ps(va, c1[r]));
        }
    } else {
        __m512 vb = _mm512_set1_ps(t->beta);
#pragma GCC unroll 14
        for (int r = 0; r < MRV; r++) {
            __m512 x = _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m0, c + r * ldc));
            _mm512_mask_storeu_ps(c + r * ldc, m0, _mm512_fmadd_ps(va, c0[r], x));
            if (NV > 1) {
                __m512 y = _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m1, c + r * ldc + 16));
                _mm512_mask_storeu_ps(c + r * ldc + 16, m1, _mm512_fmadd_ps(va, c1[r], y));
            }
        }
    }
}

/* Variants: [rows][masked][NV - 1][MRV - 1]. */
#define V(R, M, NV, MRV)                                                                           \
    static TGT void k_##R##_##M##_##NV##_##MRV(const tfs_gemm_tile *t)                            \
    {                                                                                              \
        tile(t, MRV, NV, R, M);                                                                    \
    }
#define V14(R, M, NV)                                                                              \
    V(R, M, NV, 1) V(R, M, NV, 2) V(R, M, NV, 3) V(R, M, NV, 4) V(R, M, NV, 5) V(R, M, NV, 6)     \
    V(R, M, NV, 7) V(R, M, NV, 8) V(R, M, NV, 9) V(R, M, NV, 10) V(R, M, NV, 11)                  \
    V(R, M, NV, 12) V(R, M, NV, 13) V(R, M, NV, 14)
#define T14(R, M, NV)                                                                              \
    {k_##R##_##M##_##NV##_1,  k_##R##_##M##_##NV##_2,  k_##R##_##M##_##NV##_3,                     \
     k_##R##_##M##_##NV##_4,  k_##R##_##M##_##NV##_5,  k_##R##_##M##_##NV##_6,                     \
     k_##R##_##M##_##NV##_7,  k_##R##_##M##_##NV##_8,  k_##R##_##M##_##NV##_9,                     \
     k_##R##_##M##_##NV##_10, k_##R##_##M##_##NV##_11, k_##R##_##M##_##NV##_12,                    \
     k_##R##_##M##_##NV##_13, k_##R##_##M##_##NV##_14}

V14(1, 0, 1) V14(1, 0, 2) V14(1, 1, 1) V14(1, 1, 2)
V14(0, 0, 1) V14(0, 0, 2) V14(0, 1, 1) V14(0, 1, 2)

static const tfs_gemm_kernel_fn variants[2][2][2][MR] = {
    {{T14(0, 0, 1), T14(0, 0, 2)}, {T14(0, 1, 1), T14(0, 1, 2)}},
    {{T14(1, 0, 1), T14(1, 0, 2)}, {T14(1, 1, 1), T14(1, 1, 2)}},
};

/* Few rows, B read in place: up to 128 columns at once (WIDE vectors), so that each step of k
 * reads 512 contiguous bytes of a row of B instead of 128: the batch-1 product is a stream
 * through B, and longer runs stream better. */
enum { WIDE = 8, WIDE_MR = 3 };

INLINE void tile_wide(const tfs_gemm_tile *t, const int MRV)
{
    __m512 c[WIDE_MR][WIDE];
    __mmask16 m[WIDE];
    for (int v = 0; v < WIDE; v++) {
        int left = t->nr - 16 * v;
        m[v] = (__mmask16)(left >= 16 ? 0xffffu : left <= 0 ? 0u : (1u << left) - 1);
        for (int r = 0; r < MRV; r++)
            c[r][v] = _mm512_setzero_ps();
    }
    int nv = (t->nr + 15) / 16;
    const float *b = t->b;
    int64_t brs = t->b_rs, kc = t->kc, ars = t->a_rs, acs = t->a_cs;
    const float *a = t->a;
    if (nv == WIDE && t->nr == 16 * WIDE) {
        for (int64_t p = 0; p < kc; p++, a += acs, b += brs) {
            __m512 av[WIDE_MR];
            for (int r = 0; r < MRV; r++)
                av[r] = _mm512_set1_ps(a[r * ars]);
#pragma GCC unroll 8
            for (int v = 0; v < WIDE; v++) {
                __m512 bv = _mm512_loadu_ps(b + 16 * v);
                for (int r = 0; r < MRV; r++)
                    c[r][v] = _mm512_fmadd_ps(av[r], bv, c[r][v]);
            }
        }
    } else {
        for (int64_t p = 0; p < kc; p++, a += acs, b += brs) {
            __m512 av[WIDE_MR];
            for (int r = 0; r < MRV; r++)
                av[r] = _mm512_set1_ps(a[r * ars]);
#pragma GCC unroll 8
            for (int v = 0; v < WIDE; v++) {
                __m512 bv = _mm512_maskz_loadu_ps(m[v], b + 16 * v);
                for (int r = 0; r < MRV; r++)
                    c[r][v] = _mm512_fmadd_ps(av[r], bv, c[r][v]);
            }
        }
    }
    __m512 va = _mm512_set1_ps(t->alpha), vb = _mm512_set1_ps(t->beta);
    __m512 lo = act_lo(t), hi = act_hi(t);
    for (int r = 0; r < MRV; r++) {
        float *cr = t->c + r * t->ldc;
        const float *sr = t->side ? t->side + r * t->ld_side : NULL;
#pragma GCC unroll 8
        for (int v = 0; v < WIDE; v++) {
            __m512 x = _mm512_mul_ps(va, c[r][v]);
            if (t->beta != 0.0f)
                x = _mm512_fmadd_ps(va, c[r][v],
                                    _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m[v], cr + 16 * v)));
            if (t->bias)
                x = finish(x, t->bias + 16 * v, sr ? sr + 16 * v : NULL, m[v], lo, hi);
            _mm512_mask_storeu_ps(cr + 16 * v, m[v], x);
        }
    }
}

static TGT void k_wide_1(const tfs_gemm_tile *t)
{
    tile_wide(t, 1);
}
static TGT void k_wide_2(const tfs_gemm_tile *t)
{
    tile_wide(t, 2);
}
static TGT void k_wide_3(const tfs_gemm_tile *t)
{
    tile_wide(t, 3);
}

static const tfs_gemm_kernel_fn wide[WIDE_MR] = {k_wide_1, k_wide_2, k_wide_3};

void tfs__gemm_kernel_avx512(const tfs_gemm_tile *t)
{
    if (t->nr > NR) {
        wide[t->mr - 1](t);
        return;
    }
    int nv = t->nr > 16 ? 2 : 1;
    bool rows = t->a_cs == 1, masked = !t->b_padded && t->nr < 16 * nv;
    variants[rows][masked][nv - 1][t->mr - 1](t);
}

/* ---- packing B ------------------------------------------------------------------------------ */

/* Transposes a 16 x 16 block: rows r[0..15] in, columns out (r[i] = element i of every row). */
INLINE void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* r[4q + c] now holds, in 128-bit lane L, column 4L + c of rows 4q..4q+3. */
    for (int q = 0; q < 2; q++)
        for (int c = 0; c < 4; c++) {
            t[8 * q + c] = _mm512_shuffle_f32x4(r[8 * q + c], r[8 * q + 4 + c], 0x88);
            t[8 * q + 4 + c] = _mm512_shuffle_f32x4(r[8 * q + c], r[8 * q + 4 + c], 0xdd);
        }
    for (int c = 0; c < 8; c++) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
    }
}

TGT void tfs__gemm_pack_b_avx512(bool tb, int64_t kc, int nr, const float *src, int64_t ld,
                                 float *dst)
{
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1);
    __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xffffu : nr <= 16 ? 0u : (1u << (nr - 16)) - 1);
    if (!tb) {
        if (nr == NR) {
            for (int64_t p = 0; p < kc; p++, src += ld, dst += NR) {
                _mm512_storeu_ps(dst, _mm512_loadu_ps(src));
                _mm512_storeu_ps(dst + 16, _mm512_loadu_ps(src + 16));
            }
            return;
        }
        for (int64_t p = 0; p < kc; p++, src += ld, dst += NR) {
            _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m0, src));
            _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(m1, src + 16));
        }
        return;
    }
    /* Transposed: 16 x 16 blocks of (column j, step p), each row j contiguous in p. */
    for (int jb = 0; jb < NR; jb += 16) {
        int rows = nr - jb < 0 ? 0 : nr - jb > 16 ? 16 : nr - jb;
        for (int64_t pb = 0; pb < kc; pb += 16) {
            int cols = kc - pb < 16 ? (int)(kc - pb) : 16;
            __mmask16 mc = (__mmask16)(cols == 16 ? 0xffffu : (1u << cols) - 1);
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < rows ? _mm512_maskz_loadu_ps(mc, src + (jb + i) * ld + pb)
                                : _mm512_setzero_ps();
            transpose16(r);
            for (int i = 0; i < cols; i++)
                _mm512_storeu_ps(dst + (pb + i) * NR + jb, r[i]);
        }
    }
}
