/* Float 2-D convolution with dilation 1 straight from zero-padded copies of the input rows, without
 * a patch matrix: Conv2D's path for such shapes (nn-conv.c), and Conv2DBackpropInput's
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
 * writing and reading back the patches (k_h * k_w times the input). It is refused (the caller
 * keeps im2col) when a lane's padded block (below) would pass DIRECT_BLOCK_BUDGET, when a window
 * row is shorter than DIRECT_MIN_KROW floats, or when the filter, read in place, would not stay in
 * L2 between its uses (DIRECT_MIN_ROWS_PER_THREAD). Even a first layer on one
 * channel (5x5, 28x28x1 -> 32: five k steps per write of the tile) runs faster this way than
 * through im2col and the GEMM, and so does ResNet-50's 7x7 stride-2 first layer on 3 channels
 * (k = 21 per call); a strided window reads more input per output row, though, and ResNet-50's
 * 3x3x128 stride-2 layer (590 KB filter) gained nothing, so strided convolutions take this path
 * only with filters of a quarter of L2 or less. (Figures for this comment and the others in this
 * file: bench/README.md, "Figures from source comments".)
 *   A filter over a quarter of L2 that is a Const's value is read instead from a packed copy kept
 * on its tensor (tfs__gemm_whole_k_panels: per panel of NR columns all its rows, contiguous),
 * which streams from L3 as the GEMM's panels do: ResNet-50's 3x3x256 and strided 3x3x128/256
 * layers then skip the patches, and its 3x3x128 layers (590 KB) run faster read packed than in
 * place; but its 3x3x64 ones (147 KB) run slower, so a filter of a quarter of L2 or less is
 * still read in place.
 *   The output rows are done in blocks of up to ROWS_PER_BLOCK rows of one image, which lanes
 * (one per thread) claim from a counter. A lane first copies the padded input rows its block's
 * windows cover into a buffer of its own, which then stays in L2 while every filter panel reads
 * it. One padded copy of the whole input before the convolution (as this file first did) was a
 * pass of its own through memory once the tensors outgrew L3 (ResNet-50 at batch 64 ran slower
 * that way; at batch 1 and 8 the two were alike within the noise).
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

/* Bytes of a lane's padded block at most, and floats per window row at least. */
#define DIRECT_BLOCK_BUDGET ((size_t)16 << 20)
#define DIRECT_MIN_KROW 4
/* Output rows of one image computed together per filter panel, at most (block_size may choose
 * fewer): the panel's filter rows stay in L1/L2 while they serve this many output rows. */
#define ROWS_PER_BLOCK 8
/* The filter is read in place, unpacked, rows out_c floats apart, once per block of output rows
 * and thread. Such strided reads are fast from L2 and slow from L3 (the prefetcher does not
 * follow them), so a filter read in place takes the direct path only while it stays in L2
 * between blocks (a larger Const's is read packed instead, see above): always when it takes at
 * most a quarter of L2, and up to all of L2 when each thread has at least this many output rows
 * to share a filter read between. On ResNet-50 (Zen 4, 1 MiB L2, 2 threads) direct lost to
 * im2col for 3x3x256 (2.4 MB filter) at batch 1 and 8 and for 3x3x128 (590 KB) at batch 1 (14
 * rows a thread), and won for 3x3x128 at batch 8; 3x3x64 (147 KB) and the small CNN's 5x5x32x64
 * (204 KB) were faster direct at every batch. */
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

/* Columns of an image's padded rows: what the windows of the output cover. */
static int64_t padded_w(const tfs_nn_geom *g)
{
    return (g->out_w - 1) * g->stride_w + g->k_w;
}

/* Bytes of the filter [k_h, k_w, in_c, out_c]. */
static double filter_bytes(const tfs_nn_geom *g, int64_t out_c)
{
    return (double)g->k_h * (double)g->k_w * (double)g->in_c * (double)out_c * sizeof(float);
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
    /* A lane's padded block (direct_block). */
    double rows = (double)(g->out_h < ROWS_PER_BLOCK ? g->out_h : ROWS_PER_BLOCK);
    double bytes = ((rows - 1) * (double)g->stride_h + (double)g->k_h) * (double)padded_w(g) *
                   (double)g->in_c * sizeof(float);
    if (bytes > (double)DIRECT_BLOCK_BUDGET)
        return TFS_NN_DIRECT_NONE;
    double filter = filter_bytes(g, out_c);
    double l2 = (double)l2_bytes();
    double rows_per_thread = (double)g->batch * (double)g->out_h / tfs__parallel_threads();
    /* Tiles are cut from one output row, so a row shorter than the micro-kernel's MR gives short
     * tiles, each of which reads its filter panel for few pixels. Read in place, that was far
     * slower than im2col and the GEMM (ResNet-50's 7x7x512 3x3 convolutions). From a packed
     * Const filter, with a block of ROWS_PER_BLOCK rows per thread to share each panel read, it
     * is faster than im2col at batch 8; at batch 1 (3.5 rows a thread) it was slower. (Two
     * 7-pixel rows to a 14-row tile, the AVX-512 kernel's second row pointer on the next row,
     * were slower still.) */
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
    const tfs_nn_geom  *g;
    const float        *in, *f, *packed;
    float              *out;
    int64_t             wp, out_c;   /* padded columns per image row, output channels */
    int64_t             blk_rows;    /* output rows per block (of one image) */
    int64_t             blocks_per_image, n_blocks;
    float              *bufs;        /* a padded block per lane, buf_floats each */
    size_t              buf_floats;
    _Atomic int64_t     next;        /* the next block a lane claims */
    tfs_nn_rows_fn      rows_fn;
    void               *arg;
    const tfs_gemm_epi *epi;
    bool                tile_major;  /* every filter panel per tile (direct_block) */
} direct_job;

/* Padded rows of one block: enough for its output rows' windows. */
static int64_t block_rows(const tfs_nn_geom *g, int64_t out_rows)
{
    return (out_rows - 1) * g->stride_h + g->k_h;
}

/* Row y of image b's padded copy into dst: the input row, zeros around it. */
static void pad_row(const direct_job *j, int64_t b, int64_t y, float *dst)
{
    const tfs_nn_geom *g = j->g;
    size_t pix = (size_t)g->in_c * sizeof(float);
    int64_t ih = y - g->pad_top;
    if (ih < 0 || ih >= g->in_h) {
        memset(dst, 0, (size_t)j->wp * pix);
        return;
    }
    /* Columns [pad_left, pad_left + in_w) hold the row, clipped to the padded width. */
    int64_t lo = g->pad_left < j->wp ? g->pad_left : j->wp;
    int64_t hi = g->pad_left + g->in_w < j->wp ? g->pad_left + g->in_w : j->wp;
    const char *src = (const char *)(j->in + (size_t)((b * g->in_h + ih) * g->in_w) * g->in_c);
    char *d = (char *)dst;
    memset(d, 0, (size_t)lo * pix);
    memcpy(d + (size_t)lo * pix, src, (size_t)(hi - lo) * pix);
    memset(d + (size_t)hi * pix, 0, (size_t)(j->wp - hi) * pix);
}

/* One tile: output pixels [ow, ow + MR) of the flattened output row r (clipped), channels
 * [j0, j0 + NR) (clipped), from xrow, the padded input rows of its windows' first row. */
static void direct_tile(const direct_job *j, tfs_gemm_tile *t, const float *xrow, int64_t r,
                        int64_t ow, int64_t j0)
{
    const tfs_nn_geom *g = j->g;
    const tfs_gemm_kernel *K = tfs__gemm_kernel();
    int64_t oc = j->out_c;
    t->nr = (int)(oc - j0 < K->nr ? oc - j0 : K->nr);
    /* Panel j0 / NR: all k_h * k_w * in_c rows of NR floats; or the filter's columns in place. */
    t->b = j->packed ? j->packed + (size_t)(j0 / K->nr) * (size_t)(t->n_seg * t->kc * K->nr)
                     : j->f + (size_t)j0;
    t->mr = (int)(g->out_w - ow < K->mr ? g->out_w - ow : K->mr);
    t->a = xrow + (size_t)(ow * g->stride_w) * (size_t)g->in_c;
    t->c = j->out + (size_t)(r * g->out_w + ow) * (size_t)oc + (size_t)j0;
    tfs__gemm_tile_epi(t, j->epi, r * g->out_w + ow, j0);
    K->fn(t);
}

/* Block `blk`: output rows [oh0, oh1) of image b, from their padded input rows copied into buf
 * first (so they are in L2 for every filter panel). */
static void direct_block(const direct_job *j, int64_t blk, float *buf)
{
    const tfs_nn_geom *g = j->g;
    const tfs_gemm_kernel *K = tfs__gemm_kernel();
    int64_t b = blk / j->blocks_per_image, oh0 = blk % j->blocks_per_image * j->blk_rows;
    int64_t oh1 = g->out_h - oh0 < j->blk_rows ? g->out_h : oh0 + j->blk_rows;
    int64_t ld = j->wp * g->in_c, y0 = oh0 * g->stride_h;
    for (int64_t y = 0; y < block_rows(g, oh1 - oh0); y++)
        pad_row(j, b, y0 + y, buf + (size_t)(y * ld));
    int64_t krow = g->k_w * g->in_c, oc = j->out_c;
    bool packed = j->packed != NULL;
    /* Each tile sums all its filter rows in registers: A in k_h segments, one input row apart,
     * of k_w * in_c steps each (the filter's rows follow one another in B). Filter row by filter
     * row instead (a call per row, C stored and reloaded between) was slower, most on
     * ResNet-50's 7x7/2 first layer (21 steps per row). A was just copied, so no tile asks for
     * the next one's (prefetch_a on the first panel made no difference). */
    tfs_gemm_tile t = {.a_rs = g->stride_w * g->in_c, .a_cs = 1, .b_rs = packed ? K->nr : oc,
                       .ldc = oc, .kc = krow, .b_padded = packed, .alpha = 1.0f, .beta = 0.0f,
                       .n_seg = (int)g->k_h, .a_seg = ld};
    int64_t r0 = b * g->out_h + oh0, r1 = b * g->out_h + oh1;   /* in the flattened (b, oh) */
    if (j->tile_major) {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t ow = 0; ow < g->out_w; ow += K->mr)
                for (int64_t j0 = 0; j0 < oc; j0 += K->nr)
                    direct_tile(j, &t, buf + (size_t)((r - r0) * g->stride_h * ld), r, ow, j0);
    } else {
        for (int64_t j0 = 0; j0 < oc; j0 += K->nr)
            for (int64_t r = r0; r < r1; r++)
                for (int64_t ow = 0; ow < g->out_w; ow += K->mr)
                    direct_tile(j, &t, buf + (size_t)((r - r0) * g->stride_h * ld), r, ow, j0);
    }
    if (j->rows_fn)
        for (int64_t r = r0; r < r1; r++)
            j->rows_fn(j->arg, j->out + (size_t)(r * g->out_w) * (size_t)oc, r * g->out_w,
                       g->out_w, oc);
}

/* Lanes [l0, l1), each with its own padded block: blocks claimed from the counter until none is
 * left. */
static void direct_lanes(void *arg, int64_t l0, int64_t l1)
{
    direct_job *j = arg;
    for (int64_t l = l0; l < l1; l++) {
        float *buf = j->bufs + (size_t)l * j->buf_floats;
        for (;;) {
            int64_t blk = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
            if (blk >= j->n_blocks)
                break;
            direct_block(j, blk, buf);
        }
    }
}

/* Output rows per block: up to ROWS_PER_BLOCK, as many as keep the lanes' shares even (the
 * fewest rounds of blocks times their rows), the most among equals (each block reads the whole
 * filter). A lane with one block more than the others holds them all up: cut into blocks of 4
 * and 2 rows, ResNet-50's 28 and 14 rows at batch 1 made 7 blocks for 2 lanes, and its 3x3x128
 * and 3x3x256 layers ran slower than ONNX Runtime's; in blocks of 7 rows, faster. */
static int64_t block_size(int64_t batch, int64_t out_h, int64_t lanes)
{
    int64_t best = 1, best_rows = -1;
    for (int64_t rb = out_h < ROWS_PER_BLOCK ? out_h : ROWS_PER_BLOCK; rb >= 1; rb--) {
        int64_t blocks = batch * ((out_h + rb - 1) / rb);
        int64_t rows = (blocks + lanes - 1) / lanes * rb;   /* the busiest lane's, about */
        if (best_rows < 0 || rows < best_rows) {
            best = rb;
            best_rows = rows;
        }
    }
    return best;
}

bool tfs__nn_conv2d_direct(const tfs_nn_geom *g, const float *in, const float *f, int64_t out_c,
                           float *out, tfs_nn_rows_fn rows_fn, void *arg,
                           const tfs_gemm_epi *epi, const float *packed)
{
    direct_job j = {.g = g, .in = in, .f = f, .packed = packed, .out = out, .wp = padded_w(g),
                    .out_c = out_c, .rows_fn = rows_fn, .arg = arg, .epi = epi};
    /* A lane per thread, fewer when the work is small: about k_h * k_w * in_c * out_w * out_c
     * multiply-adds per output row, and 64 Ki of them or more per lane. */
    int64_t n_rows = g->batch * g->out_h;
    if (n_rows < 1 || g->out_w < 1 || out_c < 1)
        return true;   /* no output */
    double macs = (double)(g->k_h * g->k_w * g->in_c) * (double)(g->out_w * out_c) *
                  (double)n_rows;
    int64_t lanes = tfs__parallel_threads();
    if (lanes > n_rows)
        lanes = n_rows;
    if ((double)lanes > macs / 65536.0)
        lanes = macs >= 65536.0 ? (int64_t)(macs / 65536.0) : 1;
    /* A filter of at most a quarter of L2, read in place (tfs__nn_conv2d_direct_choice), stays
     * in L2: then each tile runs every filter panel in turn, so the output is written in runs
     * of whole pixels (3.5 KB for 14 pixels of 64 channels) instead of a panel's 128 bytes of
     * each pixel, 256 bytes apart, panel after panel: a small gain on ResNet-50's 7x7/2 first
     * layer and 3x3x64 layers at batch 64, none at batch 1 and 8. Larger filters, read packed,
     * gained nothing so (the 3x3x128 layers), or lost (the 3x3x256 ones, 2.4 MB: each tile's
     * panels then come from L3). */
    j.tile_major = !packed && filter_bytes(g, out_c) <= (double)l2_bytes() / 4;
    j.blk_rows = block_size(g->batch, g->out_h, lanes);
    j.blocks_per_image = (g->out_h + j.blk_rows - 1) / j.blk_rows;
    j.n_blocks = g->batch * j.blocks_per_image;
    j.buf_floats = (size_t)(block_rows(g, j.blk_rows) * j.wp) * (size_t)g->in_c;
    atomic_init(&j.next, 0);
    if (!(j.bufs = tfs_malloc((size_t)lanes * j.buf_floats * sizeof(float))))
        return false;
    tfs__parallel_for(lanes, 1, direct_lanes, &j);
    tfs_free(j.bufs);
    return true;
}
