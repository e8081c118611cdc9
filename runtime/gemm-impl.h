/* runtime internals of tfserve's float GEMM: the interface between the driver (gemm.c: blocking,
 * packing, threads, the choice of instruction set) and the per-ISA micro-kernels
 * (gemm-avx512.c, gemm-avx2.c; the plain C one lives in gemm.c). Include only from runtime/ and
 * tests.
 *
 * DESIGN. A micro-kernel computes one tile of C, at most mr x nr (the ISA's MR x NR), over one
 * block of kc steps of the k loop, from A and B addressed by strides. That one interface serves
 * every operand layout without copies where none pays: A read in place row-wise (a_cs = 1: a
 * row-major, untransposed A or a packed copy of it, possibly in segments) or column-wise (a_rs = 1:
 * a transposed A), B read in place (b_rs = ldb) or from a packed panel (b_rs = NR, zero-padded to
 * NR columns). Every C element is the same sequence of operations whichever variant, tile position
 * or thread computes it: acc = 0, acc = fma(A(r,p), B(p,j), acc) for p = 0..kc-1 in order, then C =
 * alpha * acc + beta * C (C not read when beta is 0). That is what makes results bit-identical for
 * any thread count and any split of the rows into separate calls.
 *   A tile may carry an epilogue (tfs_gemm_epi of runtime-impl.h, for this tile's rows and
 * columns), which the kernel applies to each value between computing and storing it, in
 * registers. (A pass over each tile right after the kernel stored it, tried first, reloaded what
 * masked stores had just written, which the CPU does not forward to loads: ResNet-50's 7x7 first
 * layer ran markedly slower; bench/README.md.) The AVX-512 and AVX2 kernels prefetch,
 * during their k loop, the lines of C, of the added tensor and (on request) of A that the tile
 * below will use (gemm-avx512.c).
 */
#ifndef TFS_RUNTIME_GEMM_IMPL_H
#define TFS_RUNTIME_GEMM_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime-impl.h"

/* The epilogue on one value x of C: the bias, the added value (side: NULL for none; adding 0
 * instead would turn -0 into +0), the activation. The one scalar copy of its expressions, for
 * gemm.c's plain paths and the last channels of Winograd's output transform (the SIMD kernels
 * vectorize them; nn-fused.c's epilogue also covers batch norm and more activations). */
static inline float tfs__gemm_epi_value(float x, float bias, const float *side,
                                        enum tfs_gemm_act act)
{
    x = x + bias;
    if (side)
        x = x + *side;
    if (act == TFS_GEMM_ACT_RELU)
        x = x < 0 ? 0.0f : x;
    else if (act == TFS_GEMM_ACT_RELU6)
        x = x < 0 ? 0.0f : x > 6 ? 6.0f : x;
    return x;
}

typedef struct tfs_gemm_tile {
    const float *a;        /* A(r, p) = a[r * a_rs + p * a_cs]; one of a_rs, a_cs is 1 */
    const float *b;        /* B(p, j) = b[p * b_rs + j], j < nr */
    float       *c;        /* C(r, j) = c[r * ldc + j] */
    int64_t      a_rs, a_cs, b_rs, ldc;
    int64_t      kc;       /* >= 1 */
    int          mr, nr;   /* 1..MR, 1..NR; or 1..WIDE_MR, up to WIDE_NR (see below) */
    bool         b_padded; /* B may be read up to column NR (a packed panel); else only < nr */
    float        alpha, beta;
    /* The epilogue, applied to C = alpha * acc + beta * C before the store when bias is set:
     * + bias[j], then + side[r * ld_side + j] (side NULL: none), then act. */
    const float      *bias, *side;
    int64_t           ld_side;
    enum tfs_gemm_act act;
    /* A hint: the tile below this one (rows MR.. of a and c) reads rows of A that are not in cache
     * yet; the kernels then request them during their k loop (gemm-avx512.c). */
    bool prefetch_a;
    /* A in n_seg >= 1 segments of kc steps each, a_seg floats apart (rows mode only), and B read
     * on continuously: acc runs over n_seg * kc steps, segment after segment. The direct
     * convolution's filter rows (nn-conv-direct.c), each a run of input pixels of its own row. */
    int          n_seg;
    int64_t      a_seg;
} tfs_gemm_tile;

typedef void (*tfs_gemm_kernel_fn)(const tfs_gemm_tile *t);
/* Packs a kc x nr block of op(B) (nr <= NR) into a panel: dst[p * NR + j], zero for j >= nr.
 * Not transposed: B(p, j) = src[p * ld + j]; transposed (B stored [n, k]): src[j * ld + p]. */
typedef void (*tfs_gemm_pack_fn)(bool tb, int64_t kc, int nr, const float *src, int64_t ld,
                                 float *dst);

/* The instruction sets tfs__sgemm can use, best first. */
enum tfs_gemm_isa { TFS_GEMM_AVX512 = 0, TFS_GEMM_AVX2, TFS_GEMM_C, TFS_GEMM_ISA_COUNT };

typedef struct tfs_gemm_kernel {
    const char        *name;   /* "avx512", "avx2", "c" */
    int                mr, nr;
    /* Tiles of at most wide_mr rows with B read in place may be up to wide_nr columns wide
     * (wide_nr = nr: no wide tiles). */
    int                wide_mr, wide_nr;
    tfs_gemm_kernel_fn fn;
    tfs_gemm_pack_fn   pack_b;
} tfs_gemm_kernel;

/* The micro-kernels (each file compiles its code for its ISA with target attributes, so the build
 * needs no -march flag; call one only where the CPU has that ISA). */
void tfs__gemm_kernel_avx512(const tfs_gemm_tile *t);   /* MR 14, NR 32 */
void tfs__gemm_pack_b_avx512(bool tb, int64_t kc, int nr, const float *src, int64_t ld,
                             float *dst);
void tfs__gemm_kernel_avx2(const tfs_gemm_tile *t);     /* MR 6, NR 16 */
void tfs__gemm_pack_b_avx2(bool tb, int64_t kc, int nr, const float *src, int64_t ld,
                           float *dst);

/* Sets t's epilogue to epi's (NULL: none) for a tile whose first element is C(i0, j0). */
void tfs__gemm_tile_epi(tfs_gemm_tile *t, const tfs_gemm_epi *epi, int64_t i0, int64_t j0);

/* The kernel set tfs__sgemm uses now: the best the CPU supports, unless a test forced one. */
const tfs_gemm_kernel *tfs__gemm_kernel(void);
/* Tests and benchmarks: use `isa` from now on (false, and nothing changes, when the CPU lacks
 * it); TFS_GEMM_ISA_COUNT restores the automatic choice. Not for use while GEMMs run. */
bool tfs__gemm_force_isa(enum tfs_gemm_isa isa);

#endif
