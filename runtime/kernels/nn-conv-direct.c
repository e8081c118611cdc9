/* Float 2-D convolution with dilation 1 straight from a zero-padded copy of the input, without a
 * patch matrix: Conv2D's path for such shapes (nn-conv.c), and Conv2DBackpropInput's
 * (nn-grad-conv.c), which is such a convolution of the output gradient with the filter turned
 * around.
 *
 * DESIGN. With dilation 1, one row of a window (kh fixed) is k_w * in_c consecutive floats of the
 * padded input, and the windows of consecutive output pixels of an output row start
 * stride_w * in_c floats apart. So for a tile of up to MR output pixels of one output row, A = the
 * padded input read in place with row stride stride_w * in_c (rows that overlap when the window
 * is wider than the stride), k = k_w * in_c per window row: one micro-kernel call (gemm-impl.h)
 * per tile, A in k_h segments (window row kh starts kh padded input rows down), the filter read
 * in place as B, so the tile is summed in registers and stored once. That is im2col's GEMM without
 * writing and reading back the patches (k_h * k_w times the input). The padded copy costs one pass
 * over the input; it is refused (the caller keeps im2col) when it would pass DIRECT_PAD_BUDGET,
 * when a window row is shorter than DIRECT_MIN_KROW floats, or when the filter, read in place,
 * would not stay in L2 between its uses (DIRECT_MIN_ROWS_PER_THREAD). Even a first layer on one
 * channel (5x5, 28x28x1 -> 32: five k steps per write of the tile) runs faster this way than
 * through im2col and the GEMM: the small CNN's inference +4-5 % at batch 1, 8 and 64. So does
 * ResNet-50's 7x7 stride-2 first layer on 3 channels (k = 21 per call): at batch 8 11.6-12.9
 * against 13.4-14.0 ms, at batch 1 1.43 against 1.53 ms (in-process A/B); a strided window reads
 * more input per output row, though, and its 3x3x128 stride-2 layer (590 KB filter) gained
 * nothing at batch 8 (11.2-11.8 against 11.3), so strided convolutions take this path only with
 * filters of a quarter of L2 or less.
 *   A filter over a quarter of L2 that is a Const's value is read instead from a packed copy kept
 * on its tensor (tfs__gemm_whole_k_panels: per panel of NR columns all its rows, contiguous),
 * which streams from L3 as the GEMM's panels do. In-process A/B on ResNet-50 (2 threads):
 * its 3x3x256 and strided 3x3x128/256 layers then skip the patches, batch 8 327 -> 323 ms,
 * batch 1 41.7 -> 41.4 ms; its 3x3x128 layers (590 KB) read packed instead of in place 0.15-0.33
 * ms faster each at batch 8; but its 3x3x64 ones (147 KB) 0.16-0.32 ms slower, so a filter
 * of a quarter of L2 or less is still read in place.
 *   Each output element is one kernel call's fixed sequence, whichever thread runs it and however
 * the output rows are split, so the bits do not depend on the thread count. They are the im2col
 * GEMM's (the same order of k) where that sums k in one block (up to 512), and differ from them
 * by rounding only where it sums several.
 */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "runtime/gemm-impl.h"
#include "runtime/runtime-impl.h"

/* Bytes of the padded input copy at most, and floats per window row at least. */
#define DIRECT_PAD_BUDGET ((size_t)64 << 20)
#define DIRECT_MIN_KROW 4
/* Output rows (b, oh) computed together per filter panel: the panel's filter rows stay in L1/L2
 * while they serve this many output rows. */
#define ROWS_PER_BLOCK 8
/* The filter is read in place, unpacked, rows out_c floats apart, once per block of output rows
 * and thread. Such strided reads are fast from L2 and slow from L3 (the prefetcher does not
 * follow them), so a filter read in place takes the direct path only while it stays in L2
 * between blocks (a larger Const's is read packed instead, see above): always when it takes at
 * most a quarter of L2, and up to all of L2 when each thread has at least this many output rows
 * to share a filter read between. Measured on ResNet-50 (Zen 4,
 * 1 MiB L2, 2 threads), direct against im2col: 3x3x256 (2.4 MB filter) at batch 1 1.73 against
 * 1.15 ms and at batch 8 9.45 against 9.15 ms; 3x3x128 (590 KB) at batch 1, 14 rows a thread,
 * 1.28 against 1.19 ms, at batch 8 9.1 against 10.3 ms; 3x3x64 (147 KB) and the small CNN's
 * 5x5x32x64 (204 KB) faster direct at every batch. */
#define DIRECT_MIN_ROWS_PER_THREAD 32

/* This CPU's L2 per core (glibc reads it from cpuid); 1 MiB when it cannot tell. */
static long l2_bytes(void)
{
    static _Atomic long cached;
    long v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v <= 0) {
        v = sysconf(_SC_LEVEL2_CACHE_SIZE);
        if (v <= 0)
            v = 1L << 20;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* Rows and columns of an image's padded copy: what the windows of the output cover. */
static int64_t padded_h(const tfs_nn_geom *g)
{
    return (g->out_h - 1) * g->stride_h + g->k_h;
}

static int64_t padded_w(const tfs_nn_geom *g)
{
    return (g->out_w - 1) * g->stride_w + g->k_w;
}

enum tfs_nn_direct tfs__nn_conv2d_direct_choice(const tfs_nn_geom *g, int64_t out_c,
                                                bool filter_const)
{
    if (g->dil_h != 1 || g->dil_w != 1 || g->stride_h < 1 || g->stride_w < 1)
        return TFS_NN_DIRECT_NONE;
    if (g->pad_top < 0 || g->pad_left < 0 || g->k_w * g->in_c < DIRECT_MIN_KROW || out_c < 1)
        return TFS_NN_DIRECT_NONE;
    if (g->batch < 1 || g->out_h < 1 || g->out_w < 1)
        return TFS_NN_DIRECT_NONE;
    /* The padded copy: padded_h(g) rows of padded_w(g) pixels per image. */
    double bytes = (double)g->batch * (double)padded_h(g) * (double)padded_w(g) *
                   (double)g->in_c * sizeof(float);
    if (bytes > (double)DIRECT_PAD_BUDGET)
        return TFS_NN_DIRECT_NONE;
    double filter = (double)g->k_h * (double)g->k_w * (double)g->in_c * (double)out_c *
                    sizeof(float);
    double l2 = (double)l2_bytes();
    double rows_per_thread = (double)g->batch * (double)g->out_h / tfs__parallel_threads();
    /* Tiles are cut from one output row, so a row shorter than the micro-kernel's MR gives short
     * tiles, each of which reads its filter panel for few pixels. Read in place, that was slow
     * (ResNet-50's 7x7x512 3x3 convolutions at batch 8: 193 GFLOP/s against 323 for im2col and
     * the GEMM). From a packed Const filter, with a block of ROWS_PER_BLOCK rows per thread to
     * share each panel read, it is faster than im2col: those layers at batch 8 9.35 against
     * 9.99 ms (median of 9, processes alternated); at batch 1 (3.5 rows a thread) it was slower,
     * 1.5-1.7 against 1.23-1.31 ms. (Two 7-pixel rows to a 14-row tile, the AVX-512 kernel's
     * second row pointer on the next row, were slower still: 10.1-10.4 against 9.3-10.0 ms.) */
    if (g->out_w < tfs__gemm_kernel()->mr)
        return filter > l2 / 4 && filter_const && rows_per_thread >= ROWS_PER_BLOCK
                   ? TFS_NN_DIRECT_PACKED
                   : TFS_NN_DIRECT_NONE;
    if (filter <= l2 / 4)
        return TFS_NN_DIRECT_IN_PLACE;
    if (filter_const)
        return TFS_NN_DIRECT_PACKED;
    bool strided = g->stride_h > 1 || g->stride_w > 1;
    return filter <= l2 && !strided && rows_per_thread >= DIRECT_MIN_ROWS_PER_THREAD
               ? TFS_NN_DIRECT_IN_PLACE
               : TFS_NN_DIRECT_NONE;
}

typedef struct direct_job {
    const tfs_nn_geom *g;
    const float       *in, *f, *packed;
    float             *xp, *out;
    int64_t            hp, wp, out_c;   /* padded rows and columns per image */
    tfs_nn_rows_fn     rows_fn;
    void              *arg;
    const tfs_gemm_epi *epi;
} direct_job;

/* Padded rows [r0, r1) of the flattened (b, y) space: the input row, zeros around it. */
static void pad_rows(void *arg, int64_t r0, int64_t r1)
{
    const direct_job *j = arg;
    const tfs_nn_geom *g = j->g;
    size_t pix = (size_t)g->in_c * sizeof(float);
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / j->hp, y = r % j->hp, ih = y - g->pad_top;
        char *dst = (char *)(j->xp + (size_t)r * (size_t)(j->wp * g->in_c));
        if (ih < 0 || ih >= g->in_h) {
            memset(dst, 0, (size_t)j->wp * pix);
            continue;
        }
        /* Columns [pad_left, pad_left + in_w) hold the row, clipped to the padded width. */
        int64_t lo = g->pad_left < j->wp ? g->pad_left : j->wp;
        int64_t hi = g->pad_left + g->in_w < j->wp ? g->pad_left + g->in_w : j->wp;
        const char *src = (const char *)(j->in + (size_t)((b * g->in_h + ih) * g->in_w) * g->in_c);
        memset(dst, 0, (size_t)lo * pix);
        memcpy(dst + (size_t)lo * pix, src, (size_t)(hi - lo) * pix);
        memset(dst + (size_t)hi * pix, 0, (size_t)(j->wp - hi) * pix);
    }
}

/* Output rows [r0, r1) of the flattened (b, oh) space. */
static void direct_rows(void *arg, int64_t r0, int64_t r1)
{
    const direct_job *j = arg;
    const tfs_nn_geom *g = j->g;
    const tfs_gemm_kernel *K = tfs__gemm_kernel();
    int64_t krow = g->k_w * g->in_c, oc = j->out_c;
    bool packed = j->packed != NULL;
    /* Each tile sums all its filter rows in registers: A in k_h segments, one input row apart,
     * of k_w * in_c steps each (the filter's rows follow one another in B). Filter row by filter
     * row instead (a call per row, C stored and reloaded between), ResNet-50's 7x7/2 first layer
     * (21 steps per row) took 11.7 against 10.0 ms at batch 8 (in-process A/B), its 3x3x64
     * layers 9.0 against 8.8. */
    tfs_gemm_tile t = {.a_rs = g->stride_w * g->in_c, .a_cs = 1, .b_rs = packed ? K->nr : oc,
                       .ldc = oc, .kc = krow, .b_padded = packed, .alpha = 1.0f, .beta = 0.0f,
                       .n_seg = (int)g->k_h, .a_seg = j->wp * g->in_c};
    for (int64_t blk = r0; blk < r1; blk += ROWS_PER_BLOCK) {
        int64_t blk_end = r1 - blk < ROWS_PER_BLOCK ? r1 : blk + ROWS_PER_BLOCK;
        for (int64_t j0 = 0; j0 < oc; j0 += K->nr) {
            t.nr = (int)(oc - j0 < K->nr ? oc - j0 : K->nr);
            t.prefetch_a = j0 == 0;   /* the input rows come from memory on the first panel */
            /* Panel j0 / NR: all k_h * krow rows of NR floats; or the filter's columns in place. */
            t.b = packed ? j->packed + (size_t)(j0 / K->nr) * (size_t)(g->k_h * krow * K->nr)
                         : j->f + (size_t)j0;
            for (int64_t r = blk; r < blk_end; r++) {
                int64_t b = r / g->out_h, oh = r % g->out_h;
                const float *xrow =
                    j->xp + (size_t)((b * j->hp + oh * g->stride_h) * j->wp) * (size_t)g->in_c;
                float *orow = j->out + (size_t)(r * g->out_w) * (size_t)oc + (size_t)j0;
                for (int64_t ow = 0; ow < g->out_w; ow += K->mr) {
                    t.mr = (int)(g->out_w - ow < K->mr ? g->out_w - ow : K->mr);
                    t.a = xrow + (size_t)(ow * g->stride_w) * (size_t)g->in_c;
                    t.c = orow + (size_t)ow * (size_t)oc;
                    tfs__gemm_tile_epi(&t, j->epi, r * g->out_w + ow, j0);
                    K->fn(&t);
                }
            }
        }
        if (j->rows_fn)
            for (int64_t r = blk; r < blk_end; r++)
                j->rows_fn(j->arg, j->out + (size_t)(r * g->out_w) * (size_t)oc, r * g->out_w,
                           g->out_w, oc);
    }
}

bool tfs__nn_conv2d_direct(const tfs_nn_geom *g, const float *in, const float *f, int64_t out_c,
                           float *out, tfs_nn_rows_fn rows_fn, void *arg,
                           const tfs_gemm_epi *epi, const float *packed)
{
    direct_job j = {.g = g, .in = in, .f = f, .packed = packed, .out = out, .hp = padded_h(g),
                    .wp = padded_w(g), .out_c = out_c, .rows_fn = rows_fn,
                    .arg = arg, .epi = epi};
    size_t n = (size_t)(g->batch * j.hp * j.wp) * (size_t)g->in_c;
    if (!(j.xp = tfs_malloc(n * sizeof(float))))
        return false;
    tfs__parallel_for(g->batch * j.hp, 16, pad_rows, &j);
    /* About 2 * k_h * k_w * in_c * out_w * out_c flops per output row. */
    double per_row = (double)(g->k_h * g->k_w * g->in_c) * (double)(g->out_w * out_c);
    int64_t grain = per_row >= 65536.0 ? 1 : (int64_t)(65536.0 / per_row) + 1;
    tfs__parallel_for(g->batch * g->out_h, grain, direct_rows, &j);
    tfs_free(j.xp);
    return true;
}
