/* CPU kernels for 2-D convolutions in NHWC: Conv2D and DepthwiseConv2dNative, float and double,
 * with strides, dilations and SAME/VALID/EXPLICIT padding (geometry in nn-util.c).
 *
 * Conv2D is a matrix product. The filter [kh, kw, in_c, out_c] is already a row-major
 * [kh*kw*in_c, out_c] matrix, and each output pixel is one row of patches ("im2col"): the
 * kh*kw*in_c input values under its window, zeros where the window hangs over the padding. The
 * output [n, oh, ow, out_c] is then [n*oh*ow, out_c] = patches x filter, one sgemm/dgemm per chunk
 * of rows (the patch buffer is bounded, so a large batch does not need a huge temporary). A 1x1
 * convolution with stride 1 needs no patches: the input itself is the [n*h*w, in_c] matrix.
 * tfs__nn_conv2d is that driver; _FusedConv2D (nn-fused.c) passes it its epilogue (bias, added
 * tensor, activation): one the GEMM's micro-kernel applies as it stores each tile (tfs_gemm_epi),
 * or else a callback run on each chunk of output rows right after its GEMM, while the chunk is
 * still in cache. The GEMM calls are the same as Conv2D's (so are the products' bits).
 *   Threads: with rows enough for several chunks per thread, the chunks are spread over the pool
 * (each writes its patches and multiplies them while they are in its cache, the GEMM inside a
 * chunk then single-threaded); with fewer rows the chunks run in turn, each im2col spread over the
 * pool and each GEMM threaded inside. Either way the output is bit-identical: the float GEMM's
 * result per row does not depend on how the rows are cut (gemm-impl.h).
 *
 * Float convolutions with dilation 1 and a filter small enough to stay in L2 skip the patches
 * altogether (nn-conv-direct.c decides); 3x3 ones with stride 1 and a Const filter take
 * Winograd's F(2x2, 3x3) instead where there is work enough (nn-conv-winograd.c).
 *
 * DepthwiseConv2dNative convolves each input channel c with its own filters [kh, kw, c, m] for m in
 * [0, channel_multiplier), writing output channel c * multiplier + m; a direct loop.
 */
#include <limits.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* Upper bound on one patch buffer; rows are processed in chunks that fit. A chunk small enough
 * to stay in cache between im2col writing it and sgemm packing it measured as fast as or faster
 * than one big buffer (Conv2D 28x28x32, 5x5x64, batch 8: 2 MiB vs 32 MiB). */
#define PATCH_BUDGET_BYTES ((size_t)2 << 20)
/* Rows a chunk needs at least for the chunks to be spread over threads (else each chunk's GEMM
 * spreads itself); and chunks per thread then aimed at, for balance. */
#define MIN_CHUNK_ROWS 128
#define CHUNKS_PER_THREAD 4

/* Checks inputs 0 (input) and 1 (filter); n_in: the inputs the op has (_FusedConv2D: more). */
static enum tfs_code conv_inputs(tfs_kernel_ctx *k, int n_in, enum tfs_dtype *T, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc = tfs__attr_type(n, "T", T, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != n_in)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects %d inputs, has %d", n_in,
                             k->n_in);
    for (int i = 0; i < 2; i++)
        if (k->in[i]->dtype != *T)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input %d has dtype %s, but attr T is %s",
                                 i, tfs_dtype_short_name(k->in[i]->dtype), tfs_dtype_short_name(*T));
    if (*T != TFS_DTYPE_FLOAT && *T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(*T));
    const tfs_tensor *f = k->in[1];
    if (f->rank != 4) {
        char buf[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "filter must be 4-dimensional, got %s",
                             tfs_shape_str(f->rank, f->dims, buf, sizeof buf));
    }
    if (f->nelem == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "filter must not have zero elements (i.e. all dimensions must be non-zero)");
    return TFS_OK;
}

/* memcpy/memset of n bytes (a multiple of 4) for the short runs im2col moves (a window row of a
 * few channels: 20 bytes for 5x5 on one channel), in constant-size pieces the compiler inlines,
 * instead of a library call per run. */
static inline void copy_run(char *d, const char *s, size_t n)
{
    if (n >= 256) {
        memcpy(d, s, n);
        return;
    }
    for (; n >= 32; n -= 32, d += 32, s += 32)
        memcpy(d, s, 32);
    for (; n >= 8; n -= 8, d += 8, s += 8)
        memcpy(d, s, 8);
    if (n)
        memcpy(d, s, 4);
}

static inline void zero_run(char *d, size_t n)
{
    if (n >= 256) {
        memset(d, 0, n);
        return;
    }
    for (; n >= 32; n -= 32, d += 32)
        memset(d, 0, 32);
    for (; n >= 8; n -= 8, d += 8)
        memset(d, 0, 8);
    if (n)
        memset(d, 0, 4);
}

/* Writes the patch rows [r0, r0 + rows) of the flattened (n, oh, ow) index space into P, each
 * kh*kw*in_c elements of esz bytes. Shared with the convolution gradients (nn-grad-conv.c). */
void tfs__nn_im2col(const tfs_nn_geom *g, const void *in_, size_t esz, int64_t r0, int64_t rows,
                    void *P_)
{
    const char *in = in_;
    char *P = P_;
    size_t pix = (size_t)g->in_c * esz;              /* one input pixel, all channels */
    size_t krow = (size_t)g->k_w * pix;              /* one window row in the patch */
    int64_t per_image = g->out_h * g->out_w;
    if (rows <= 0)
        return;
    int64_t b = r0 / per_image, oh = r0 % per_image / g->out_w, ow = r0 % g->out_w;
    for (int64_t r = 0; r < rows; r++) {
        int64_t ih0 = oh * g->stride_h - g->pad_top, iw0 = ow * g->stride_w - g->pad_left;
        const char *img = in + (size_t)(b * g->in_h * g->in_w) * pix;
        /* The window's columns inside the image: [lo, hi) (dilation 1). */
        int64_t lo = iw0 < 0 ? -iw0 : 0, hi = g->in_w - iw0;
        lo = lo > g->k_w ? g->k_w : lo;
        hi = hi > g->k_w ? g->k_w : hi < lo ? lo : hi;
        for (int64_t kh = 0; kh < g->k_h; kh++, P += krow) {
            int64_t ih = ih0 + kh * g->dil_h;
            if (ih < 0 || ih >= g->in_h) {
                zero_run(P, krow);
                continue;
            }
            const char *line = img + (size_t)(ih * g->in_w) * pix;
            if (g->dil_w == 1) {
                /* The window row is contiguous in the input: zeros, one copy, zeros. */
                if (lo > 0)
                    zero_run(P, (size_t)lo * pix);
                if (hi > lo)
                    copy_run(P + (size_t)lo * pix, line + (size_t)(iw0 + lo) * pix,
                             (size_t)(hi - lo) * pix);
                if (hi < g->k_w)
                    zero_run(P + (size_t)hi * pix, (size_t)(g->k_w - hi) * pix);
                continue;
            }
            for (int64_t kw = 0; kw < g->k_w; kw++) {
                int64_t iw = iw0 + kw * g->dil_w;
                if (iw < 0 || iw >= g->in_w)
                    zero_run(P + (size_t)kw * pix, pix);
                else
                    copy_run(P + (size_t)kw * pix, line + (size_t)iw * pix, pix);
            }
        }
        if (++ow == g->out_w) {
            ow = 0;
            if (++oh == g->out_h) {
                oh = 0;
                b++;
            }
        }
    }
}

/* im2col of rows [r0, r1) of a chunk starting at row `first`, for tfs__parallel_for. */
typedef struct im2col_job {
    const tfs_nn_geom *g;
    const char        *in;
    size_t             esz;
    int64_t            first, kdim;
    char              *P;
} im2col_job;

static void im2col_rows(void *arg, int64_t r0, int64_t r1)
{
    const im2col_job *j = arg;
    tfs__nn_im2col(j->g, j->in, j->esz, j->first + r0, r1 - r0,
                   j->P + (size_t)(r0 * j->kdim) * j->esz);
}

/* out[rows, n_out] = A[rows, kdim] x F[kdim, n_out], all row-major, rows [row0, row0 + rows) of
 * the whole output; f_const: the Const tensor F is, or NULL (tfs__sgemm_const_b); epi: float
 * only, or NULL. */
static void gemm_rows(enum tfs_dtype T, int64_t row0, int64_t rows, int64_t n_out, int64_t kdim,
                      const void *A, const tfs_tensor *f_const, const void *F, void *out,
                      const tfs_gemm_epi *epi)
{
    if (T == TFS_DTYPE_FLOAT) {
        tfs_gemm_epi e = epi ? *epi : (tfs_gemm_epi){0};
        if (e.side)
            e.side += row0 * e.ld_side;
        tfs__sgemm_epi(false, false, rows, n_out, kdim, A, kdim, f_const, F, n_out, out, n_out,
                       epi ? &e : NULL);
    } else
        tfs__dgemm(false, false, rows, n_out, kdim, 1.0, A, kdim, F, n_out, 0.0, out, n_out);
}

/* Chunks [c0, c1) of `chunk` rows each, each with its own patch buffer, for tfs__parallel_for. */
typedef struct conv_job {
    const tfs_nn_geom *g;
    enum tfs_dtype     T;
    const tfs_tensor  *in, *f;
    const tfs_tensor  *f_const;   /* f when it is a Const's tensor, else NULL */
    char              *O;
    int64_t            rows, chunk, kdim, out_c;
    tfs_nn_rows_fn     rows_fn;
    void              *arg;
    const tfs_gemm_epi *epi;
    atomic_int         oom;
} conv_job;

static void conv_chunks(void *arg, int64_t c0, int64_t c1)
{
    conv_job *j = arg;
    size_t esz = tfs_dtype_size(j->T);
    char *P = tfs_malloc((size_t)j->chunk * (size_t)j->kdim * esz);
    if (!P) {
        atomic_store(&j->oom, 1);
        return;
    }
    for (int64_t c = c0; c < c1; c++) {
        int64_t r0 = c * j->chunk, nr = j->rows - r0 < j->chunk ? j->rows - r0 : j->chunk;
        char *O = j->O + (size_t)(r0 * j->out_c) * esz;
        tfs__nn_im2col(j->g, j->in->data, esz, r0, nr, P);
        gemm_rows(j->T, r0, nr, j->out_c, j->kdim, P, j->f_const, j->f->data, O, j->epi);
        if (j->rows_fn)
            j->rows_fn(j->arg, O, r0, nr, j->out_c);
    }
    tfs_free(P);
}

enum tfs_code tfs__nn_conv2d(tfs_kernel_ctx *k, tfs_nn_rows_fn rows_fn, void *arg,
                             const tfs_gemm_epi *epi, int side_input, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = conv_inputs(k, rows_fn ? k->n_in : 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0], *f = k->in[1];
    tfs_nn_geom g;
    if ((rc = tfs__nn_geom_init(n, in, f->dims[0], f->dims[1], true, &g, st)) != TFS_OK)
        return rc;
    int64_t out_c = f->dims[3];
    const tfs_tensor *f_const = tfs__input_is_const(k, 1) ? f : NULL;
    if (g.in_c != f->dims[2]) {
        if (g.in_c > 0 && g.in_c % f->dims[2] == 0)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "grouped convolutions (input depth %lld, filter depth %lld) are "
                                 "not supported on the CPU",
                                 (long long)g.in_c, (long long)f->dims[2]);
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input depth must be evenly divisible by filter depth: %lld vs %lld",
                             (long long)g.in_c, (long long)f->dims[2]);
    }
    int64_t kdim = g.k_h * g.k_w * g.in_c;   /* < 2^31 * 2^31 * 2^36 cannot overflow: f->nelem fits */
    if (kdim > INT_MAX || out_c > INT_MAX)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "filter %lldx%lld with more than %d rows or "
                             "columns is not supported", (long long)kdim, (long long)out_c, INT_MAX);
    int64_t odims[4] = {g.batch, g.out_h, g.out_w, out_c};
    /* Dilation 1: no patches at all (nn-conv-direct.c decides), with the filter read in place
     * where it stays in L2, else, for a Const's filter, from a packed copy kept on it; an
     * allocation failure there falls back to the patches. */
    enum tfs_nn_direct choice = T == TFS_DTYPE_FLOAT && !(g.k_h == 1 && g.k_w == 1)
                                    ? tfs__nn_conv2d_direct_choice(&g, out_c, f_const != NULL)
                                    : TFS_NN_DIRECT_NONE;
    bool direct_path = choice != TFS_NN_DIRECT_NONE;
    /* 3x3 with stride 1 and a Const filter: Winograd's F(2x2, 3x3) (nn-conv-winograd.c), 2.25
     * times fewer multiplications. */
    bool wino = T == TFS_DTYPE_FLOAT && tfs__nn_conv2d_winograd_ok(&g, out_c, f_const != NULL);
    tfs_tensor *out = NULL;
    /* Over the added tensor itself where the GEMM writes each element once, after reading the
     * added one: ResNet-50's residual 1x1 layers then read and write their 12.8-25.7 MB at batch
     * 8 in one stream instead of two, which is faster (bench/README.md). Not on the
     * direct path nor Winograd's, which fall back to the patches (k in blocks, maybe) when their
     * lanes' buffers cannot be allocated. */
    if (side_input >= 0 && T == TFS_DTYPE_FLOAT && epi && epi->side && !direct_path && !wino &&
        tfs__sgemm_epi_in_place(kdim))
        out = tfs__kernel_take_input(k, side_input, T, 4, odims);
    if (!out && (rc = (kdim == 0 ? tfs__kernel_output_zeroed : tfs__kernel_output)(
                     k, 0, T, 4, odims, &out, st)) != TFS_OK)
        return rc;
    size_t esz = tfs_dtype_size(T);
    int64_t rows = g.batch * g.out_h * g.out_w;
    char *O = out->data;
    char *P = NULL;
    if (out->nelem == 0 || kdim == 0) {   /* kdim = 0: in_c = 0, a sum of nothing */
        if (rows_fn && out->nelem > 0)
            rows_fn(arg, O, 0, rows, out_c);
        goto done;
    }
    /* From here on every output element comes from a product: a float one applies epi itself. */
    if (T != TFS_DTYPE_FLOAT)
        epi = NULL;
    if (epi)
        rows_fn = NULL;
    if (wino && tfs__nn_conv2d_winograd(&g, in->data, f, out_c, out->data, epi)) {
        /* Its blocks of tiles are not runs of output rows: rows_fn (an epilogue the transform
         * does not apply, such as a batch norm) gets them all at once, after. */
        if (rows_fn)
            rows_fn(arg, O, 0, rows, out_c);
        goto done;
    }
    if (direct_path) {
        const float *packed = NULL;
        if (choice == TFS_NN_DIRECT_PACKED &&
            !(packed = tfs__gemm_whole_k_panels(f_const, f->data, kdim, out_c)))
            direct_path = false;   /* not kept (memory, or another layout): the patches */
        if (direct_path && tfs__nn_conv2d_direct(&g, in->data, f->data, out_c, out->data, rows_fn,
                                                 arg, epi, packed))
            goto done;
    }
    bool direct = g.k_h == 1 && g.k_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                  g.pad_top == 0 && g.pad_left == 0 && g.out_h == g.in_h && g.out_w == g.in_w;
    int64_t chunk = direct ? INT_MAX : (int64_t)(PATCH_BUDGET_BYTES / ((size_t)kdim * esz));
    if (chunk < 1)
        chunk = 1;
    if (chunk > rows)
        chunk = rows;
    int threads = tfs__parallel_threads();
    if (!direct && threads > 1 && rows >= (int64_t)threads * CHUNKS_PER_THREAD * MIN_CHUNK_ROWS) {
        int64_t even = (rows + (int64_t)threads * CHUNKS_PER_THREAD - 1) /
                       ((int64_t)threads * CHUNKS_PER_THREAD);
        conv_job j = {&g, T, in, f, f_const, O, rows, even < chunk ? even : chunk, kdim, out_c,
                      rows_fn, arg, epi, 0};
        tfs__parallel_for((rows + j.chunk - 1) / j.chunk, 1, conv_chunks, &j);
        if (atomic_load(&j.oom)) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for the patch buffer");
            goto fail;
        }
        goto done;
    }
    if (!direct && !(P = tfs_malloc((size_t)chunk * (size_t)kdim * esz))) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for the patch buffer");
        goto fail;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        const char *A = (const char *)in->data + (size_t)(r0 * kdim) * esz;
        if (!direct) {
            im2col_job ij = {&g, in->data, esz, r0, kdim, P};
            tfs__parallel_for(nr, MIN_CHUNK_ROWS / 4, im2col_rows, &ij);
            A = P;
        }
        gemm_rows(T, r0, nr, out_c, kdim, A, f_const, f->data, O + (size_t)(r0 * out_c) * esz,
                  epi);
        if (rows_fn)
            rows_fn(arg, O + (size_t)(r0 * out_c) * esz, r0, nr, out_c);
    }
done:
    tfs_free(P);
    k->out[0] = out;
    return TFS_OK;
fail:
    tfs_free(P);
    tfs_tensor_unref(out);
    return rc;
}

enum tfs_code tfs__k_conv2d(tfs_kernel_ctx *k, tfs_status *st)
{
    return tfs__nn_conv2d(k, NULL, NULL, NULL, -1, st);
}

/* ---- DepthwiseConv2dNative ------------------------------------------------------------------ */

/* Output rows [r0, r1), a row being one (b, oh). */
#define DEPTHWISE_LOOP(TY)                                                                         \
    do {                                                                                           \
        const TY *X = in->data, *F = f->data;                                                      \
        TY *O = (TY *)out->data + r0 * g.out_w * oc;                                               \
        for (int64_t row = r0; row < r1; row++) {                                                  \
            int64_t b = row / g.out_h, oh = row % g.out_h;                                         \
            for (int64_t ow = 0; ow < g.out_w; ow++, O += oc) {                                    \
                int64_t ih0 = oh * g.stride_h - g.pad_top, iw0 = ow * g.stride_w - g.pad_left;     \
                for (int64_t kh = 0; kh < g.k_h; kh++) {                                           \
                    int64_t ih = ih0 + kh * g.dil_h;                                               \
                    if (ih < 0 || ih >= g.in_h)                                                    \
                        continue;                                                                  \
                    for (int64_t kw = 0; kw < g.k_w; kw++) {                                       \
                        int64_t iw = iw0 + kw * g.dil_w;                                           \
                        if (iw < 0 || iw >= g.in_w)                                                \
                            continue;                                                              \
                        const TY *x = X + ((b * g.in_h + ih) * g.in_w + iw) * g.in_c;              \
                        const TY *w = F + (kh * g.k_w + kw) * oc;                                  \
                        if (mult == 1) {                                                           \
                            for (int64_t c = 0; c < oc; c++)                                       \
                                O[c] += x[c] * w[c];                                               \
                        } else {                                                                   \
                            for (int64_t c = 0; c < g.in_c; c++)                                   \
                                for (int64_t m = 0; m < mult; m++)                                 \
                                    O[c * mult + m] += x[c] * w[c * mult + m];                     \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

typedef struct depthwise_job {
    tfs_nn_geom       g;
    const tfs_tensor *in, *f;
    tfs_tensor       *out;
    int64_t           mult, oc;
} depthwise_job;

static void depthwise_rows(void *arg, int64_t r0, int64_t r1)
{
    const depthwise_job *j = arg;
    tfs_nn_geom g = j->g;
    const tfs_tensor *in = j->in, *f = j->f;
    tfs_tensor *out = j->out;
    int64_t mult = j->mult, oc = j->oc;
    if (out->dtype == TFS_DTYPE_FLOAT)
        DEPTHWISE_LOOP(float);
    else
        DEPTHWISE_LOOP(double);
}

enum tfs_code tfs__k_depthwise_conv2d(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = conv_inputs(k, 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0], *f = k->in[1];
    tfs_nn_geom g;
    if ((rc = tfs__nn_geom_init(n, in, f->dims[0], f->dims[1], true, &g, st)) != TFS_OK)
        return rc;
    if (g.in_c != f->dims[2])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input and filter must have the same depth: %lld vs %lld",
                             (long long)g.in_c, (long long)f->dims[2]);
    int64_t mult = f->dims[3], oc = g.in_c * mult;   /* f->nelem bounds the product */
    int64_t odims[4] = {g.batch, g.out_h, g.out_w, oc};
    tfs_tensor *out = NULL;
    /* The loop accumulates into the output. */
    if ((rc = tfs__kernel_output_zeroed(k, 0, T, 4, odims, &out, st)) != TFS_OK)
        return rc;
    if (out->nelem > 0) {
        depthwise_job j = {g, in, f, out, mult, oc};
        int64_t per_row = g.out_w * oc * g.k_h * g.k_w;   /* multiply-adds, about */
        tfs__parallel_for(g.batch * g.out_h, per_row >= (1 << 15) ? 1 : (1 << 15) / per_row,
                          depthwise_rows, &j);
    }
    k->out[0] = out;
    return TFS_OK;
}
