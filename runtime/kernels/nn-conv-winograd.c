/* Float 3x3 convolution with stride 1 and dilation 1 by Winograd's minimal filtering F(2x2, 3x3)
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): Conv2D's path for
 * such layers with a Const filter and work enough (nn-conv.c asks tfs__nn_conv2d_winograd_ok).
 *
 * DESIGN. The output is cut into tiles of 2x2 pixels; the 4x4 input patch d under a tile (zeros
 * in the padding) gives Y = A^T [(G g G^T) (.) (B^T d B)] A for each pair of input and output
 * channels, with (.) the element-wise product of 4x4 matrices. Summed over the input channels,
 * the 16 element-wise products become 16 matrix products, one per position i of the 4x4:
 * M_i [tiles, out_c] = V_i [tiles, in_c] x U_i [in_c, out_c], V_i the transformed input, U_i the
 * transformed filter. So 16 * in_c * out_c multiply-adds per 4 output pixels instead of
 * 9 * 4 * in_c * out_c: 2.25 times fewer, done by the GEMM's micro-kernel (gemm-impl.h) at its
 * speed, for a pass of transforms on either side that costs far less (additions only, the
 * filter's done once). ResNet-50's stride-1 3x3 layers, and the whole net at batch 1, 8 and 64,
 * run faster this way than by the direct path (figures for this comment and the others in this
 * file: bench/README.md, "Figures from source comments").
 *   U is made once per filter, on first use, and kept on the filter's tensor (wino_packed), already
 * cut into the kernel's zero-padded panels of NR columns: [16][panel][in_c][NR]. The tiles are
 * done in blocks of at most BLOCK_TILES, which lanes (one per thread) claim from a counter; a lane
 * transforms its block's input into V (16 x tiles x in_c, in L2 for the smaller layers), runs the
 * 16 products into M, then transforms M into the block's output pixels, applying the epilogue
 * (bias, added tensor, activation: tfs_gemm_epi, in its order) to each value before the store.
 *   Rounding: each output is the same sum as the direct path's, computed through the transforms,
 * so it differs from it (and from TensorFlow's) by rounding: within 1e-6 of the sum of the
 * products' magnitudes against a float64 reference in test-runtime, as the other paths are, and
 * ResNet-50's outputs 4.7e-7-8.5e-7 of their largest from PyTorch's and ONNX Runtime's.
 * F(2x2, 3x3)'s transforms have coefficients 0, +-1 and 1/2 only, the most accurate of its
 * family.
 */
#include <stdatomic.h>
#include <string.h>

#include "runtime/gemm-impl.h"
#include "runtime/runtime-impl.h"

/* Tiles per block at most: four 14-row tiles of the AVX-512 kernel. */
#define BLOCK_TILES 56
/* Channels per step of the transforms (one AVX-512 vector; the loops over them vectorize). */
#define CH 16

typedef struct wino_filter {
    const tfs_gemm_kernel *K;        /* whose panel width NR the panels have */
    const float           *f;        /* the filter it was made from */
    int64_t                in_c, out_c;
    float                 *u;        /* [16][panels][in_c][NR], 64-byte aligned */
    void                  *mem;
} wino_filter;

void tfs__nn_winograd_free(void *p)
{
    wino_filter *w = p;
    if (!w)
        return;
    tfs_free(w->mem);
    tfs_free(w);
}

bool tfs__nn_conv2d_winograd_ok(const tfs_nn_geom *g, int64_t out_c, bool filter_const)
{
    if (!filter_const || g->k_h != 3 || g->k_w != 3 || g->stride_h != 1 || g->stride_w != 1 ||
        g->dil_h != 1 || g->dil_w != 1 || g->pad_top < 0 || g->pad_left < 0)
        return false;
    /* Too few channels and the products are too short to pay for the transforms. */
    if (g->in_c < CH || out_c < CH)
        return false;
    /* Tiles enough for two full 14-row tiles of the kernel: with fewer, its short tiles (and,
     * at 7x7, the tiles' pixels that fall outside) waste more than the transforms save.
     * ResNet-50 at batch 1: its 14x14x256 layers (49 tiles) gain; its 7x7x512 ones (16 tiles)
     * stay direct. */
    int64_t tiles = g->batch * ((g->out_h + 1) / 2) * ((g->out_w + 1) / 2);
    return tiles >= 28;
}

/* U for filter f [3, 3, in_c, out_c], in K's panels. */
static wino_filter *make_filter(const tfs_gemm_kernel *K, const float *f, int64_t in_c,
                                int64_t out_c)
{
    int64_t nr = K->nr, panels = (out_c + nr - 1) / nr;
    size_t floats = (size_t)(16 * panels * in_c * nr);
    wino_filter *w = tfs_calloc(1, sizeof *w);
    if (!w || !(w->mem = tfs_calloc(floats * sizeof(float) + 64, 1))) {
        tfs_free(w);
        return NULL;
    }
    *w = (wino_filter){.K = K, .f = f, .in_c = in_c, .out_c = out_c, .mem = w->mem,
                       .u = (float *)(((uintptr_t)w->mem + 63) & ~(uintptr_t)63)};
    for (int64_t ci = 0; ci < in_c; ci++)
        for (int64_t co = 0; co < out_c; co++) {
            float g[3][3], gg[4][3], u[4][4];
            for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 3; kw++)
                    g[kh][kw] = f[((kh * 3 + kw) * in_c + ci) * out_c + co];
            for (int kw = 0; kw < 3; kw++) {   /* G g: along the filter's rows */
                gg[0][kw] = g[0][kw];
                gg[1][kw] = 0.5f * (g[0][kw] + g[1][kw] + g[2][kw]);
                gg[2][kw] = 0.5f * (g[0][kw] - g[1][kw] + g[2][kw]);
                gg[3][kw] = g[2][kw];
            }
            for (int r = 0; r < 4; r++) {      /* (G g) G^T: along its columns */
                u[r][0] = gg[r][0];
                u[r][1] = 0.5f * (gg[r][0] + gg[r][1] + gg[r][2]);
                u[r][2] = 0.5f * (gg[r][0] - gg[r][1] + gg[r][2]);
                u[r][3] = gg[r][2];
            }
            int64_t jp = co / nr, j = co % nr;
            for (int i = 0; i < 16; i++)
                w->u[((i * panels + jp) * in_c + ci) * nr + j] = u[i / 4][i % 4];
        }
    return w;
}

/* The U kept on the filter's tensor, made now if it has none; NULL when the tensor keeps
 * another's (another kernel's panels) or memory runs out. */
static const wino_filter *kept_filter(const tfs_tensor *ft, int64_t in_c, int64_t out_c)
{
    tfs_tensor *t = (tfs_tensor *)ft;   /* the cache is the one field a const tensor changes */
    const tfs_gemm_kernel *K = tfs__gemm_kernel();
    wino_filter *w = atomic_load_explicit(&t->wino_packed, memory_order_acquire);
    if (!w) {
        wino_filter *mine = make_filter(K, ft->data, in_c, out_c);
        if (!mine)
            return NULL;
        w = tfs__tensor_cache_keep(&t->wino_packed, mine, tfs__nn_winograd_free);
    }
    bool same = w->K == K && w->f == ft->data && w->in_c == in_c && w->out_c == out_c;
    return same ? w : NULL;
}

typedef struct wino_job {
    const tfs_nn_geom  *g;
    const float        *in;
    const wino_filter  *w;
    float              *out;
    int64_t             out_c, tiles_w, tiles_per_image, n_tiles;
    int64_t             block, n_blocks;   /* tiles per block, blocks */
    int64_t             panels, n_groups;  /* the products' panels of NR columns, in groups */
    int64_t             ldv, ldm;          /* row strides of V and M (floats) */
    float              *bufs;              /* per lane: V [16][block][ldv], M [16][block][ldm] */
    size_t              buf_floats;
    _Atomic int64_t     next;
    const tfs_gemm_epi *epi;
} wino_job;

/* (B^T d) B from s = B^T d, along its columns, into V_0..V_15 (vs floats apart) at v. Each row
 * is computed into locals, then stored a row at a time: computed straight into V's rows, whose
 * distinctness GCC cannot tell, it was done a float at a time (a large share of the time
 * of ResNet-50's 64-channel layers went to this transform). */
static inline void transform_rows(const float s[4][4][CH], float *v, int64_t vs)
{
    for (int y = 0; y < 4; y++) {
        float r[4][CH];
        for (int l = 0; l < CH; l++) {
            r[0][l] = s[y][0][l] - s[y][2][l];
            r[1][l] = s[y][1][l] + s[y][2][l];
            r[2][l] = s[y][2][l] - s[y][1][l];
            r[3][l] = s[y][1][l] - s[y][3][l];
        }
        for (int x = 0; x < 4; x++) {
            float *o = v + (size_t)(y * 4 + x) * (size_t)vs;
            for (int l = 0; l < CH; l++)
                o[l] = r[x][l];
        }
    }
}

/* B^T d B for tile `ti`, every input channel, into v: its row of V_0, V_1 vs floats on, ... */
TFS_SIMD_CLONES static void input_tile(const wino_job *j, int64_t ti, float *v, int64_t vs)
{
    const tfs_nn_geom *g = j->g;
    int64_t b = ti / j->tiles_per_image, r = ti % j->tiles_per_image;
    int64_t y0 = r / j->tiles_w * 2 - g->pad_top, x0 = r % j->tiles_w * 2 - g->pad_left;
    int64_t C = g->in_c;
    const float *img = j->in + (size_t)(b * g->in_h * g->in_w * C);
    if (y0 >= 0 && y0 + 4 <= g->in_h && x0 >= 0 && x0 + 4 <= g->in_w && C % CH == 0) {
        /* Inside the image: straight from the input, no copy, no test per pixel. */
        const float *p0 = img + (size_t)((y0 * g->in_w + x0) * C), *p1 = p0 + g->in_w * C;
        const float *p2 = p1 + g->in_w * C, *p3 = p2 + g->in_w * C;
        for (int64_t c0 = 0; c0 < C; c0 += CH) {
            float s[4][4][CH];
            for (int x = 0; x < 4; x++) {
                int64_t o = x * C + c0;
                for (int l = 0; l < CH; l++) {
                    s[0][x][l] = p0[o + l] - p2[o + l];
                    s[1][x][l] = p1[o + l] + p2[o + l];
                    s[2][x][l] = p2[o + l] - p1[o + l];
                    s[3][x][l] = p1[o + l] - p3[o + l];
                }
            }
            transform_rows((const float(*)[4][CH])s, v + c0, vs);
        }
        return;
    }
    for (int64_t c0 = 0; c0 < C; c0 += CH) {
        int64_t n = C - c0 < CH ? C - c0 : CH;
        float d[4][4][CH];
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 4; x++) {
                int64_t iy = y0 + y, ix = x0 + x;
                float *dd = d[y][x];
                if (iy < 0 || iy >= g->in_h || ix < 0 || ix >= g->in_w) {
                    for (int l = 0; l < CH; l++)
                        dd[l] = 0.0f;
                    continue;
                }
                const float *src = img + (size_t)((iy * g->in_w + ix) * C + c0);
                if (n == CH)   /* fixed-size loops: one vector each */
                    for (int l = 0; l < CH; l++)
                        dd[l] = src[l];
                else
                    for (int l = 0; l < CH; l++)
                        dd[l] = l < n ? src[l] : 0.0f;
            }
        float s[4][4][CH];
        for (int x = 0; x < 4; x++)   /* B^T d: along the patch's rows */
            for (int l = 0; l < CH; l++) {
                s[0][x][l] = d[0][x][l] - d[2][x][l];
                s[1][x][l] = d[1][x][l] + d[2][x][l];
                s[2][x][l] = d[2][x][l] - d[1][x][l];
                s[3][x][l] = d[1][x][l] - d[3][x][l];
            }
        transform_rows((const float(*)[4][CH])s, v + c0, vs);
    }
}

/* A^T M A for tile `ti` from row t of each M_i (ms floats apart), output channels [c_lo, C),
 * the epilogue, and the store of its pixels that lie inside the output. */
TFS_SIMD_CLONES static void output_tile(const wino_job *j, int64_t ti, const float *m,
                                        int64_t ms, int64_t c_lo, int64_t C)
{
    const tfs_nn_geom *g = j->g;
    int64_t b = ti / j->tiles_per_image, r = ti % j->tiles_per_image;
    int64_t oy = r / j->tiles_w * 2, ox = r % j->tiles_w * 2, oc = j->out_c;
    const tfs_gemm_epi *e = j->epi;
    for (int64_t c0 = c_lo; c0 < C; c0 += CH) {
        int64_t n = C - c0 < CH ? C - c0 : CH;
        float t[2][4][CH], y[2][2][CH];
        for (int x = 0; x < 4; x++)   /* A^T M: along the rows */
            for (int l = 0; l < CH; l++) {
                const float *p = m + (size_t)x * (size_t)ms + c0 + l;
                float m0 = p[0], m1 = p[4 * ms], m2 = p[8 * ms], m3 = p[12 * ms];
                t[0][x][l] = m0 + m1 + m2;
                t[1][x][l] = m1 - m2 - m3;
            }
        for (int q = 0; q < 2; q++)   /* (A^T M) A: along the columns */
            for (int l = 0; l < CH; l++) {
                y[q][0][l] = t[q][0][l] + t[q][1][l] + t[q][2][l];
                y[q][1][l] = t[q][1][l] - t[q][2][l] - t[q][3][l];
            }
        for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++) {
                if (oy + dy >= g->out_h || ox + dx >= g->out_w)
                    continue;
                int64_t row = (b * g->out_h + oy + dy) * g->out_w + ox + dx;
                float *o = j->out + (size_t)(row * oc + c0);
                float *v = y[dy][dx];
                if (n < CH) {   /* the last channels: value by value */
                    const float *side = e && e->side ? e->side + row * e->ld_side + c0 : NULL;
                    for (int64_t l = 0; l < n; l++)
                        o[l] = e ? tfs__gemm_epi_value(v[l], e->bias[c0 + l],
                                                       side ? side + l : NULL, e->act)
                                 : v[l];
                    continue;
                }
                if (e) {   /* tfs_gemm_epi's order: bias, added value, activation */
                    const float *bias = e->bias + c0;
                    for (int l = 0; l < CH; l++)
                        v[l] = v[l] + bias[l];
                    if (e->side) {
                        const float *side = e->side + row * e->ld_side + c0;
                        for (int l = 0; l < CH; l++)
                            v[l] = v[l] + side[l];
                    }
                    if (e->act == TFS_GEMM_ACT_RELU)
                        for (int l = 0; l < CH; l++)
                            v[l] = v[l] < 0 ? 0.0f : v[l];
                    else if (e->act == TFS_GEMM_ACT_RELU6)
                        for (int l = 0; l < CH; l++)
                            v[l] = v[l] < 0 ? 0.0f : v[l] > 6 ? 6.0f : v[l];
                }
                for (int l = 0; l < CH; l++)
                    o[l] = v[l];
            }
    }
}

/* Tiles [t0, t0 + nt), output panels [p0, p1): V, the 16 products into M, the output. */
static void wino_block(const wino_job *j, int64_t t0, int64_t nt, int64_t p0, int64_t p1,
                       float *V, float *M)
{
    const tfs_gemm_kernel *K = j->w->K;
    int64_t vs = j->block * j->ldv, ms = j->block * j->ldm;
    for (int64_t t = 0; t < nt; t++)
        input_tile(j, t0 + t, V + t * j->ldv, vs);
    int64_t in_c = j->g->in_c, oc = j->out_c, panels = j->panels;
    tfs_gemm_tile tl = {.a_rs = j->ldv, .a_cs = 1, .kc = in_c, .n_seg = 1, .b_rs = K->nr,
                        .b_padded = true, .ldc = j->ldm, .alpha = 1.0f, .beta = 0.0f};
    for (int i = 0; i < 16; i++)
        for (int64_t jp = p0; jp < p1; jp++) {
            tl.b = j->w->u + (size_t)((i * panels + jp) * in_c * K->nr);
            tl.nr = (int)(oc - jp * K->nr < K->nr ? oc - jp * K->nr : K->nr);
            for (int64_t r = 0; r < nt; r += K->mr) {
                tl.mr = (int)(nt - r < K->mr ? nt - r : K->mr);
                tl.a = V + i * vs + r * j->ldv;
                tl.c = M + i * ms + r * j->ldm + jp * K->nr;
                K->fn(&tl);
            }
        }
    int64_t c_hi = p1 * K->nr < oc ? p1 * K->nr : oc;
    for (int64_t t = 0; t < nt; t++)
        output_tile(j, t0 + t, M + t * j->ldm, ms, p0 * K->nr, c_hi);
}

static void wino_lanes(void *arg, int64_t l0, int64_t l1)
{
    wino_job *j = arg;
    for (int64_t l = l0; l < l1; l++) {
        float *V = j->bufs + (size_t)l * j->buf_floats;
        float *M = V + (size_t)(16 * j->block * j->ldv);
        for (;;) {
            int64_t w = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
            if (w >= j->n_blocks * j->n_groups)
                break;
            int64_t blk = w / j->n_groups, grp = w % j->n_groups;
            int64_t t0 = blk * j->block;
            int64_t nt = j->n_tiles - t0 < j->block ? j->n_tiles - t0 : j->block;
            wino_block(j, t0, nt, grp * j->panels / j->n_groups,
                       (grp + 1) * j->panels / j->n_groups, V, M);
        }
    }
}

/* Row stride for a matrix of n columns: whole vectors, and not a multiple of 1 KiB, so that
 * the 14 rows of a tile do not crowd into few L1 sets. */
static int64_t row_stride(int64_t n)
{
    int64_t s = (n + CH - 1) / CH * CH;
    return s % 256 == 0 ? s + CH : s;
}

bool tfs__nn_conv2d_winograd(const tfs_nn_geom *g, const float *in, const tfs_tensor *f,
                             int64_t out_c, float *out, const tfs_gemm_epi *epi)
{
    const wino_filter *w = kept_filter(f, g->in_c, out_c);
    if (!w)
        return false;
    wino_job j = {.g = g, .in = in, .w = w, .out = out, .out_c = out_c, .epi = epi,
                  .tiles_w = (g->out_w + 1) / 2, .ldv = row_stride(g->in_c),
                  .ldm = row_stride(out_c)};
    j.tiles_per_image = (g->out_h + 1) / 2 * j.tiles_w;
    j.n_tiles = g->batch * j.tiles_per_image;
    int64_t lanes = tfs__parallel_threads();
    /* Each block reads all of U: with a U past L2 (in_c * out_c * 64 bytes), from L3 or memory
     * once per block, so blocks grow with it, up to 4 x BLOCK_TILES (ResNet-50's 512-channel
     * layers, U 16.8 MB, gained with one block per lane instead of two, before the lanes could
     * share a block; they now do, below). */
    double u_bytes = 64.0 * (double)g->in_c * (double)out_c;
    int64_t most = u_bytes >= 8e6 ? 4 * BLOCK_TILES : u_bytes >= 2e6 ? 2 * BLOCK_TILES
                                                                     : BLOCK_TILES;
    j.panels = (out_c + w->K->nr - 1) / w->K->nr;
    j.n_groups = 1;
    if (j.n_tiles >= lanes * most) {
        /* As many blocks per lane as each lane gets alike, each as large as that allows. */
        int64_t per_lane = (j.n_tiles + lanes * most - 1) / (lanes * most);
        j.n_blocks = lanes * per_lane;
    } else {
        /* Too few tiles for a full block per lane: fewer blocks, whose output channels the
         * lanes share (each transforms the block's input: that costs less than every lane
         * reading all of U). ResNet-50 at batch 1: its 14x14x256 layers, 49 tiles, one block
         * on both lanes (above); at batch 8 its 7x7x512 ones, 128 tiles, as fast either way,
         * with U (16.8 MB) read once instead of once per lane. */
        j.n_blocks = (j.n_tiles + most - 1) / most;
        j.n_groups = (lanes + j.n_blocks - 1) / j.n_blocks;
        if (j.n_groups > j.panels)
            j.n_groups = j.panels;
    }
    j.block = (j.n_tiles + j.n_blocks - 1) / j.n_blocks;
    j.n_blocks = (j.n_tiles + j.block - 1) / j.block;
    if (lanes > j.n_blocks * j.n_groups)
        lanes = j.n_blocks * j.n_groups;
    j.buf_floats = (size_t)(16 * j.block * (j.ldv + j.ldm));
    atomic_init(&j.next, 0);
    if (!(j.bufs = tfs_malloc((size_t)lanes * j.buf_floats * sizeof(float))))
        return false;
    tfs__parallel_for(lanes, 1, wino_lanes, &j);
    tfs_free(j.bufs);
    return true;
}
