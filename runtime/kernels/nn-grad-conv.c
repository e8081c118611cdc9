/* CPU kernels for Conv2D's gradients in NHWC, float and double: Conv2DBackpropInput(input_sizes,
 * filter, out_backprop) and Conv2DBackpropFilter(input, filter_sizes, out_backprop), with the
 * forward op's strides, dilations and SAME/VALID/EXPLICIT padding (geometry in nn-util.c), and
 * TensorFlow's shape checks: out_backprop must have the spatial size the forward op would give.
 *
 * Both are the forward op's matrix product turned around. With P the forward patch matrix
 * [n*oh*ow, kh*kw*in_c] (im2col, nn-conv.c), F the filter as [kh*kw*in_c, out_c] and dY the
 * output gradient as [n*oh*ow, out_c], the forward op is Y = P x F, so
 *     filter gradient  dF = P^T x dY, accumulated over chunks of P's rows (beta 0 for the
 *                      first chunk, 1 after);
 *     input gradient   dP = dY x F^T per chunk of rows, then col2im: each row of dP is added
 *                      back into the input pixels its window covered (padding drops out).
 * Chunks keep the patch buffer within PATCH_BUDGET_BYTES whatever the batch. A 1x1 filter with
 * stride 1 and no padding needs no patches: P is the input itself. A float input gradient with
 * stride and dilation 1 needs none either where nn-conv-direct.c applies: it is the forward
 * convolution of dY, padded by k - 1 - pad, with the filter turned around (input_grad_direct).
 *   Threads. The input gradient is split over the pool by whole images where an image's patch
 * rows fit the budget: each thread multiplies and col2im's chunks of its own images with its own
 * patch buffer (in its cache between the GEMM and the adds; the GEMM inside single-threaded).
 * Its bits are those of the serial path: a GEMM row does not depend on how rows are cut
 * (gemm-impl.h), and each image's rows are added in order by one thread. The filter gradient is
 * a sum over all rows, so it is split into FILTER_GROUPS fixed groups of consecutive chunks, each
 * summed into its own partial filter (group 0 into the output) by whichever thread takes it, the
 * partials then added in group order: the grouping depends on the shapes alone, so the bits do
 * not depend on the thread count. Otherwise (one chunk, huge images, huge filters) the chunks run
 * in turn, im2col through tfs__parallel_for over rows (disjoint writes) and col2im over the
 * images of a chunk (an image's windows overlap, so its rows are added in order by one call;
 * images are disjoint), each GEMM threaded inside.
 */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* Upper bound on one patch buffer (as Conv2D's, nn-conv.c). */
#define PATCH_BUDGET_BYTES ((size_t)2 << 20)
#define IM2COL_GRAIN 32
/* The filter gradient's fixed groups of chunks (at most; enough for 2-4 threads to balance), and
 * the bytes all partial filters together may take. */
#define FILTER_GROUPS 8
#define PARTIALS_BUDGET_BYTES ((size_t)16 << 20)

typedef struct conv_grad {
    tfs_nn_geom    g;
    enum tfs_dtype T;
    size_t         esz;
    int64_t        out_c, kdim, rows;   /* filter columns, patch width, n*oh*ow */
    bool           direct;              /* 1x1, stride 1, no padding: P is the input */
} conv_grad;

/* A shape given as a 1-D int32/int64 tensor of 4 values (or, where two_ok, 2: rows and cols). */
static enum tfs_code shape_input(const tfs_node *n, const tfs_tensor *t, const char *what,
                                 bool two_ok, int64_t *out, int *len, tfs_status *st)
{
    if (t->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s: %s input must be 1-dim, not %d",
                             n->op_type, what, t->rank);
    if (t->dtype != TFS_DTYPE_INT32 && t->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be int32, got %s", what,
                             tfs_dtype_short_name(t->dtype));
    if (t->nelem != 4 && !(two_ok && t->nelem == 2))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s requires %s to contain 4 values%s, "
                             "but got: %lld", n->op_type, what, two_ok ? " or 2 values" : "",
                             (long long)t->nelem);
    *len = (int)t->nelem;
    for (int i = 0; i < *len; i++) {
        out[i] = tfs__arr_int_at(t, i);
        if (out[i] < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s: elements of %s must be >= 0, got %lld at %d", n->op_type,
                                 what, (long long)out[i], i);
    }
    return TFS_OK;
}

static enum tfs_code check_rank4(const tfs_node *n, const tfs_tensor *t, const char *what,
                                 tfs_status *st)
{
    if (t->rank == 4)
        return TFS_OK;
    char buf[128];
    return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s: %s must be 4-dimensional, got %s",
                         n->op_type, what, tfs_shape_str(t->rank, t->dims, buf, sizeof buf));
}

/* Checks what both gradients share, given the input shape in_dims, the filter shape f_dims and
 * out_backprop dy (whose dtype, like the other float input's, was checked against T), and fills
 * c. */
static enum tfs_code conv_grad_setup(const tfs_node *n, enum tfs_dtype T, const int64_t *in_dims,
                                     const int64_t *f_dims, const tfs_tensor *dy, conv_grad *c,
                                     tfs_status *st)
{
    memset(c, 0, sizeof *c);
    c->T = T;
    c->esz = tfs_dtype_size(T);
    for (int i = 0; i < 4; i++)
        if (in_dims[i] > INT32_MAX || f_dims[i] > INT32_MAX)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s: input dimension %d (%lld) or filter dimension %d (%lld) "
                                 "exceeds 2^31 - 1", n->op_type, i, (long long)in_dims[i], i,
                                 (long long)f_dims[i]);
    if (in_dims[0] != dy->dims[0])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: input and out_backprop must have the same batch size. Input "
                             "batch: %lld, outbackprop batch: %lld", n->op_type,
                             (long long)in_dims[0], (long long)dy->dims[0]);
    if (f_dims[2] <= 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: filter depth must be strictly greater than zero", n->op_type);
    if (in_dims[3] != f_dims[2]) {
        if (in_dims[3] % f_dims[2] == 0)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "grouped convolutions (input depth %lld, filter depth %lld) are "
                                 "not supported on the CPU", (long long)in_dims[3],
                                 (long long)f_dims[2]);
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: input depth must be evenly divisible by filter depth: %lld vs "
                             "%lld", n->op_type, (long long)in_dims[3], (long long)f_dims[2]);
    }
    if (f_dims[3] != dy->dims[3])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s: filter and out_backprop must have the same out_depth: %lld vs "
                             "%lld", n->op_type, (long long)f_dims[3], (long long)dy->dims[3]);
    enum tfs_code rc =
        tfs__nn_geom_init_shape(n, 4, in_dims, f_dims[0], f_dims[1], true, &c->g, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_nn_geom *g = &c->g;
    const int64_t got[2] = {dy->dims[1], dy->dims[2]}, want[2] = {g->out_h, g->out_w};
    const int64_t in[2] = {g->in_h, g->in_w}, k[2] = {g->k_h, g->k_w};
    const int64_t stride[2] = {g->stride_h, g->stride_w}, dil[2] = {g->dil_h, g->dil_w};
    for (int i = 0; i < 2; i++)
        if (got[i] != want[i])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%s: Size of out_backprop doesn't match computed: actual = %lld, "
                                 "computed = %lld spatial_dim: %d input: %lld filter: %lld "
                                 "output: %lld stride: %lld dilation: %lld", n->op_type,
                                 (long long)got[i], (long long)want[i], i + 1, (long long)in[i],
                                 (long long)k[i], (long long)got[i], (long long)stride[i],
                                 (long long)dil[i]);
    c->out_c = f_dims[3];
    c->kdim = g->k_h * g->k_w;   /* each factor < 2^31 */
    if (__builtin_mul_overflow(c->kdim, g->in_c, &c->kdim) || c->kdim > INT_MAX)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "filter %lldx%lld with more than %d rows is "
                             "not supported", (long long)c->kdim, (long long)c->out_c, INT_MAX);
    /* out_h, out_w < 2^33 (padding below 2^31): the product can overflow only for shapes no
     * tensor holds, but an empty out_backprop may claim them. */
    if (__builtin_mul_overflow(g->batch, g->out_h, &c->rows) ||
        __builtin_mul_overflow(c->rows, g->out_w, &c->rows))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s: out_backprop is too large",
                             n->op_type);
    c->direct = g->k_h == 1 && g->k_w == 1 && g->stride_h == 1 && g->stride_w == 1 &&
                g->pad_top == 0 && g->pad_left == 0 && g->out_h == g->in_h && g->out_w == g->in_w;
    return TFS_OK;
}

/* Rows of P per chunk: as many as fit the budget (at least 1, at most INT_MAX for the GEMM). */
static int64_t chunk_rows(const conv_grad *c)
{
    int64_t chunk = INT_MAX;
    if (!c->direct)
        chunk = (int64_t)(PATCH_BUDGET_BYTES / ((size_t)c->kdim * c->esz));
    if (chunk < 1)
        chunk = 1;
    return chunk < c->rows ? chunk : c->rows;
}

/* C[m, n] (+)= op(A) x op(B) in c->T. */
static void gemm(const conv_grad *c, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *a, int64_t lda, const void *b, int64_t ldb, bool accumulate, void *out,
                 int64_t ldc)
{
    if (c->T == TFS_DTYPE_FLOAT)
        tfs__sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, out, ldc);
    else
        tfs__dgemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, accumulate ? 1.0 : 0.0, out, ldc);
}

/* ---- im2col and col2im over tfs__parallel_for ------------------------------------------------ */

typedef struct col_job {
    const conv_grad *c;
    const void      *x;    /* im2col: the input */
    void            *dx;   /* col2im: the input gradient */
    char            *P;    /* the chunk's patch rows */
    int64_t          r0;   /* first row of the chunk */
    int64_t          nr;   /* rows in the chunk */
    int64_t          b0;   /* col2im: first image the chunk touches */
} col_job;

static void im2col_range(void *arg, int64_t a, int64_t b)
{
    const col_job *j = arg;
    size_t row = (size_t)j->c->kdim * j->c->esz;
    tfs__nn_im2col(&j->c->g, j->x, j->c->esz, j->r0 + a, b - a, j->P + (size_t)a * row);
}

#define ADD_SPAN(TY, DST, SRC, COUNT)                                                              \
    do {                                                                                           \
        TY *d_ = (TY *)(DST);                                                                      \
        const TY *s_ = (const TY *)(SRC);                                                          \
        for (int64_t i_ = 0; i_ < (COUNT); i_++)                                                   \
            d_[i_] += s_[i_];                                                                      \
    } while (0)

/* dst[0..count) += src[0..count) in c->T. */
static inline void add_span(const conv_grad *c, char *dst, const char *src, int64_t count)
{
    if (c->T == TFS_DTYPE_FLOAT)
        ADD_SPAN(float, dst, src, count);
    else
        ADD_SPAN(double, dst, src, count);
}

/* Adds patch row r (of the chunk starting at j->r0) back into the input gradient. */
static void col2im_row(const col_job *j, int64_t r)
{
    const conv_grad *c = j->c;
    const tfs_nn_geom *g = &c->g;
    size_t pix = (size_t)g->in_c * c->esz;
    int64_t per_image = g->out_h * g->out_w;
    int64_t b = r / per_image, rem = r % per_image;
    int64_t oh = rem / g->out_w, ow = rem % g->out_w;
    int64_t ih0 = oh * g->stride_h - g->pad_top, iw0 = ow * g->stride_w - g->pad_left;
    const char *p = j->P + (size_t)(r - j->r0) * (size_t)c->kdim * c->esz;
    char *img = (char *)j->dx + (size_t)(b * g->in_h * g->in_w) * pix;
    for (int64_t kh = 0; kh < g->k_h; kh++, p += (size_t)g->k_w * pix) {
        int64_t ih = ih0 + kh * g->dil_h;
        if (ih < 0 || ih >= g->in_h)
            continue;
        char *line = img + (size_t)(ih * g->in_w) * pix;
        if (g->dil_w == 1) {   /* the window row is contiguous: one span */
            int64_t lo = iw0 < 0 ? -iw0 : 0, hi = g->in_w - iw0;
            hi = hi > g->k_w ? g->k_w : hi;
            if (hi > lo)
                add_span(c, line + (size_t)(iw0 + lo) * pix, p + (size_t)lo * pix,
                         (hi - lo) * g->in_c);
            continue;
        }
        for (int64_t kw = 0; kw < g->k_w; kw++) {
            int64_t iw = iw0 + kw * g->dil_w;
            if (iw >= 0 && iw < g->in_w)
                add_span(c, line + (size_t)iw * pix, p + (size_t)kw * pix, g->in_c);
        }
    }
}

/* Images [b0 + a, b0 + b) of the chunk: each one's rows in order, by this call alone. The chunk
 * that holds an image's first row zero-fills that image's gradient first (chunks run in order),
 * so the output needs no zero-fill pass of its own and the image is in cache for the adds. */
static void col2im_range(void *arg, int64_t a, int64_t b)
{
    const col_job *j = arg;
    const tfs_nn_geom *g = &j->c->g;
    int64_t per_image = g->out_h * g->out_w;
    size_t image_bytes = (size_t)(g->in_h * g->in_w * g->in_c) * j->c->esz;
    for (int64_t img = j->b0 + a; img < j->b0 + b; img++) {
        int64_t r = img * per_image, r1 = r + per_image;
        if (r >= j->r0)
            memset((char *)j->dx + (size_t)img * image_bytes, 0, image_bytes);
        r = r < j->r0 ? j->r0 : r;
        r1 = r1 > j->r0 + j->nr ? j->r0 + j->nr : r1;
        for (; r < r1; r++)
            col2im_row(j, r);
    }
}

/* ---- the threaded paths -------------------------------------------------------------------- */

typedef struct grad_job {
    const conv_grad *c;
    const char      *x, *f, *dy;   /* input (filter gradient), filter (input gradient), dY */
    char            *dx;           /* the input gradient */
    char            *df;           /* the filter gradient: group 0's sum */
    char            *partials;     /* groups 1.. : their sums, one filter each */
    int64_t          chunk;        /* rows per chunk (filter), images per chunk (input) */
    int64_t          nchunks, groups;
    atomic_int       oom;
} grad_job;

/* Input gradient of images [i0, i1): chunks of j->chunk images, GEMM then col2im, one thread. */
static void input_images(void *arg, int64_t i0, int64_t i1)
{
    grad_job *j = arg;
    const conv_grad *c = j->c;
    int64_t per_image = c->g.out_h * c->g.out_w;
    int64_t most = i1 - i0 < j->chunk ? i1 - i0 : j->chunk;
    char *P = tfs_malloc((size_t)(most * per_image) * (size_t)c->kdim * c->esz);
    if (!P) {
        atomic_store(&j->oom, 1);
        return;
    }
    for (int64_t img = i0; img < i1; img += j->chunk) {
        int64_t nimg = i1 - img < j->chunk ? i1 - img : j->chunk;
        int64_t r0 = img * per_image, nr = nimg * per_image;
        gemm(c, false, true, nr, c->kdim, c->out_c, j->dy + (size_t)(r0 * c->out_c) * c->esz,
             c->out_c, j->f, c->out_c, false, P, c->kdim);
        col_job cj = {.c = c, .dx = j->dx, .P = P, .r0 = r0, .nr = nr, .b0 = img};
        col2im_range(&cj, 0, nimg);
    }
    tfs_free(P);
}

/* Filter gradient groups [g0, g1): each the sum over its chunks, in order, into its own filter. */
static void filter_groups(void *arg, int64_t g0, int64_t g1)
{
    grad_job *j = arg;
    const conv_grad *c = j->c;
    size_t fbytes = (size_t)(c->kdim * c->out_c) * c->esz;
    char *P = tfs_malloc((size_t)j->chunk * (size_t)c->kdim * c->esz);
    if (!P) {
        atomic_store(&j->oom, 1);
        return;
    }
    for (int64_t grp = g0; grp < g1; grp++) {
        char *out = grp == 0 ? j->df : j->partials + (size_t)(grp - 1) * fbytes;
        int64_t first = grp * j->nchunks / j->groups, last = (grp + 1) * j->nchunks / j->groups;
        for (int64_t ch = first; ch < last; ch++) {
            int64_t r0 = ch * j->chunk, nr = c->rows - r0 < j->chunk ? c->rows - r0 : j->chunk;
            tfs__nn_im2col(&c->g, j->x, c->esz, r0, nr, P);
            gemm(c, true, false, c->kdim, c->out_c, nr, P, c->kdim,
                 j->dy + (size_t)(r0 * c->out_c) * c->esz, c->out_c, ch > first, out, c->out_c);
        }
    }
    tfs_free(P);
}

/* df[i0, i1) += the partials' elements, group 1 first. */
static void add_partials(void *arg, int64_t i0, int64_t i1)
{
    const grad_job *j = arg;
    const conv_grad *c = j->c;
    size_t fbytes = (size_t)(c->kdim * c->out_c) * c->esz;
    for (int64_t grp = 1; grp < j->groups; grp++)
        add_span(c, j->df + (size_t)i0 * c->esz,
                 j->partials + (size_t)(grp - 1) * fbytes + (size_t)i0 * c->esz, i1 - i0);
}

/* The input gradient with stride and dilation 1 as a forward convolution without patches
 * (nn-conv-direct.c): dX = dY (padded by k - 1 - pad before, the rest after) convolved with the
 * filter turned around, F'[kh][kw][co][ci] = F[k_h-1-kh][k_w-1-kw][ci][co]. UNIMPLEMENTED (nothing
 * written) where that path does not apply or its buffers cannot be had: the patches then. */
static enum tfs_code input_grad_direct(const conv_grad *c, const float *f, const float *dy,
                                       float *dx, tfs_status *st)
{
    const tfs_nn_geom *g = &c->g;
    tfs_nn_geom t = {.batch = g->batch, .in_h = g->out_h, .in_w = g->out_w, .in_c = c->out_c,
                     .k_h = g->k_h, .k_w = g->k_w, .stride_h = 1, .stride_w = 1, .dil_h = 1,
                     .dil_w = 1, .pad_top = g->k_h - 1 - g->pad_top,
                     .pad_left = g->k_w - 1 - g->pad_left, .out_h = g->in_h, .out_w = g->in_w};
    if (g->stride_h != 1 || g->stride_w != 1 || g->dil_h != 1 || g->dil_w != 1 ||
        tfs__nn_conv2d_direct_choice(&t, g->in_c, false) != TFS_NN_DIRECT_IN_PLACE)
        return TFS_UNIMPLEMENTED;
    int64_t ci_n = g->in_c, co_n = c->out_c, taps = g->k_h * g->k_w;
    float *ft = tfs_malloc((size_t)(taps * ci_n * co_n) * sizeof *ft);
    if (!ft)
        return TFS_UNIMPLEMENTED;
    for (int64_t tap = 0; tap < taps; tap++) {
        const float *src = f + (size_t)((taps - 1 - tap) * ci_n * co_n);
        float *dst = ft + (size_t)(tap * co_n * ci_n);
        for (int64_t ci = 0; ci < ci_n; ci++)
            for (int64_t co = 0; co < co_n; co++)
                dst[co * ci_n + ci] = src[ci * co_n + co];
    }
    bool ok = tfs__nn_conv2d_direct(&t, dy, ft, ci_n, dx, NULL, NULL, NULL, NULL);
    tfs_free(ft);
    (void)st;
    return ok ? TFS_OK : TFS_UNIMPLEMENTED;
}

/* ---- the kernels ---------------------------------------------------------------------------- */

/* Attr T (float or double) and the dtypes of inputs f0 and f1, the float ones. */
static enum tfs_code grad_inputs(tfs_kernel_ctx *k, int f0, int f1, enum tfs_dtype *T,
                                 tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc = tfs__attr_type(n, "T", T, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 3)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, has %d", k->n_in);
    const int idx[2] = {f0, f1};
    for (int i = 0; i < 2; i++)
        if (k->in[idx[i]]->dtype != *T)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "input %d has dtype %s, but attr T is %s", idx[i],
                                 tfs_dtype_short_name(k->in[idx[i]]->dtype),
                                 tfs_dtype_short_name(*T));
    if (*T != TFS_DTYPE_FLOAT && *T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(*T));
    return TFS_OK;
}

enum tfs_code tfs__k_conv2d_backprop_input(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = grad_inputs(k, 1, 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *f = k->in[1], *dy = k->in[2];
    if ((rc = check_rank4(n, f, "filter", st)) != TFS_OK ||
        (rc = check_rank4(n, dy, "out_backprop", st)) != TFS_OK)
        return rc;
    int64_t sizes[4], in_dims[4];
    int len;
    if ((rc = shape_input(n, k->in[0], "input_sizes", true, sizes, &len, st)) != TFS_OK)
        return rc;
    if (len == 4) {
        memcpy(in_dims, sizes, sizeof in_dims);
    } else {   /* rows and cols only: batch from out_backprop, depth from the filter */
        in_dims[0] = dy->dims[0];
        in_dims[1] = sizes[0];
        in_dims[2] = sizes[1];
        in_dims[3] = f->dims[2];
    }
    conv_grad c;
    if ((rc = conv_grad_setup(n, T, in_dims, f->dims, dy, &c, st)) != TFS_OK)
        return rc;
    tfs_tensor *dx = NULL;
    char *P = NULL;
    /* Zeros where nothing flows back; else every element is written below (the direct GEMM with
     * beta 0, or col2im after zero-filling each image). */
    bool nothing = c.rows == 0 || c.out_c == 0;
    if ((rc = (nothing ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, T, 4, in_dims, &dx,
                                                                        st)) != TFS_OK)
        return rc;
    if (dx->nelem == 0 || nothing)
        goto done;
    if (T == TFS_DTYPE_FLOAT && !c.direct) {
        rc = input_grad_direct(&c, f->data, dy->data, dx->data, st);
        if (rc == TFS_OK)
            goto done;
        if (rc != TFS_UNIMPLEMENTED)
            goto fail;
    }
    int64_t per_image = c.g.out_h * c.g.out_w;
    size_t image_patches = (size_t)per_image * (size_t)c.kdim * c.esz;
    if (!c.direct && image_patches <= PATCH_BUDGET_BYTES && c.g.batch > 1 &&
        tfs__parallel_threads() > 1) {
        grad_job j = {.c = &c, .f = f->data, .dy = dy->data, .dx = dx->data,
                      .chunk = (int64_t)(PATCH_BUDGET_BYTES / image_patches)};
        tfs__parallel_for(c.g.batch, 1, input_images, &j);
        if (atomic_load(&j.oom)) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for the patch buffer");
            goto fail;
        }
        goto done;
    }
    int64_t chunk = chunk_rows(&c);
    if (!c.direct && !(P = tfs_malloc((size_t)chunk * (size_t)c.kdim * c.esz))) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for the patch buffer");
        goto fail;
    }
    for (int64_t r0 = 0; r0 < c.rows; r0 += chunk) {
        int64_t nr = c.rows - r0 < chunk ? c.rows - r0 : chunk;
        const char *dyr = (const char *)dy->data + (size_t)(r0 * c.out_c) * c.esz;
        if (c.direct) {   /* dX rows = dY rows x F^T */
            gemm(&c, false, true, nr, c.kdim, c.out_c, dyr, c.out_c, f->data, c.out_c, false,
                 (char *)dx->data + (size_t)(r0 * c.kdim) * c.esz, c.kdim);
            continue;
        }
        gemm(&c, false, true, nr, c.kdim, c.out_c, dyr, c.out_c, f->data, c.out_c, false, P,
             c.kdim);
        col_job j = {.c = &c, .dx = dx->data, .P = P, .r0 = r0, .nr = nr, .b0 = r0 / per_image};
        tfs__parallel_for((r0 + nr - 1) / per_image - j.b0 + 1, 1, col2im_range, &j);
    }
done:
    tfs_free(P);
    k->out[0] = dx;
    return TFS_OK;
fail:
    tfs_free(P);
    tfs_tensor_unref(dx);
    return rc;
}

enum tfs_code tfs__k_conv2d_backprop_filter(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = grad_inputs(k, 0, 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0], *dy = k->in[2];
    if ((rc = check_rank4(n, x, "input", st)) != TFS_OK ||
        (rc = check_rank4(n, dy, "out_backprop", st)) != TFS_OK)
        return rc;
    int64_t f_dims[4];
    int len;
    if ((rc = shape_input(n, k->in[1], "filter_sizes", false, f_dims, &len, st)) != TFS_OK)
        return rc;
    conv_grad c;
    if ((rc = conv_grad_setup(n, T, x->dims, f_dims, dy, &c, st)) != TFS_OK)
        return rc;
    tfs_tensor *df = NULL;
    char *P = NULL;
    /* Zeros for a sum over no output pixels; else the first chunk's GEMM (beta 0) writes all. */
    if ((rc = (c.rows == 0 ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, T, 4, f_dims,
                                                                             &df, st)) != TFS_OK)
        return rc;
    if (df->nelem == 0 || c.rows == 0)
        goto done;
    int64_t chunk = chunk_rows(&c);
    size_t fbytes = (size_t)df->nelem * c.esz;
    int64_t groups = (int64_t)(PARTIALS_BUDGET_BYTES / fbytes);
    groups = groups < FILTER_GROUPS ? groups : FILTER_GROUPS;
    /* At least one chunk per group, so that small patch rows (conv1's 25) still make groups
     * enough to balance the threads; the rows decide, not the thread count. */
    if (!c.direct && groups > 1 && c.rows >= groups * IM2COL_GRAIN) {
        int64_t even = (c.rows + groups - 1) / groups;
        chunk = even < chunk ? even : chunk;
    }
    int64_t nchunks = (c.rows + chunk - 1) / chunk;
    groups = groups < nchunks ? groups : nchunks;
    if (!c.direct && groups > 1) {
        grad_job j = {.c = &c, .x = x->data, .dy = dy->data, .df = df->data, .chunk = chunk,
                      .nchunks = nchunks, .groups = groups};
        if (!(P = tfs_malloc((size_t)(groups - 1) * fbytes))) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for partial sums");
            goto fail;
        }
        j.partials = P;
        tfs__parallel_for(groups, 1, filter_groups, &j);
        if (atomic_load(&j.oom)) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for the patch buffer");
            goto fail;
        }
        tfs__parallel_for(df->nelem, 4096, add_partials, &j);
        goto done;
    }
    if (!c.direct && !(P = tfs_malloc((size_t)chunk * (size_t)c.kdim * c.esz))) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory for the patch buffer");
        goto fail;
    }
    for (int64_t r0 = 0; r0 < c.rows; r0 += chunk) {
        int64_t nr = c.rows - r0 < chunk ? c.rows - r0 : chunk;
        const char *A = (const char *)x->data + (size_t)(r0 * c.kdim) * c.esz;
        if (!c.direct) {
            col_job j = {.c = &c, .x = x->data, .P = P, .r0 = r0, .nr = nr};
            tfs__parallel_for(nr, IM2COL_GRAIN, im2col_range, &j);
            A = P;
        }
        /* dF = P^T x dY over the first chunk's rows, += over the others'. */
        gemm(&c, true, false, c.kdim, c.out_c, nr, A, c.kdim,
             (const char *)dy->data + (size_t)(r0 * c.out_c) * c.esz, c.out_c, r0 > 0, df->data,
             c.out_c);
    }
done:
    tfs_free(P);
    k->out[0] = df;
    return TFS_OK;
fail:
    tfs_free(P);
    tfs_tensor_unref(df);
    return rc;
}
