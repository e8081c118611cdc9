/* CPU kernels of the image resize ops: ResizeBilinear and ResizeNearestNeighbor, NHWC, with
 * TensorFlow's sampling rules (tensorflow/core/kernels/image/resize_*_op.cc) so that results
 * match bit for bit:
 *   scale        = align_corners && out > 1 ? (in - 1) / (float)(out - 1) : in / (float)out
 *   bilinear     src = half_pixel_centers ? (i + 0.5f) * scale - 0.5f : i * scale (in float);
 *                lower = max(floor(src), 0), upper = min(ceil(src), in - 1),
 *                lerp = src - floor(src); top/bottom rows lerped along x, then along y.
 *   nearest      src = half_pixel_centers ? (i + 0.5f) * scale : i * scale;
 *                index = min(align_corners ? roundf(src) : floorf(src), in - 1), and >= 0 with
 *                half_pixel_centers.
 * Bilinear reads any input dtype TF allows and writes float; nearest copies elements of the
 * input dtype.
 *   Their gradients, ResizeBilinearGrad and ResizeNearestNeighborGrad, map the same sample
 * points back (resize_bilinear_op.cc ResizeGradImpl, resize_nearest_neighbor_op.cc): each
 * gradient element of the resized image is added into the original pixels it was read from,
 * bilinear with weights (1 - y_lerp)(1 - x_lerp), (1 - y_lerp) x_lerp, y_lerp (1 - x_lerp),
 * y_lerp x_lerp, products formed in float left to right. The sums run in TF's order (batch, y,
 * x, channel), one image per thread, so float results match TF's bit for bit.
 */
#include <math.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* ---- shared validation (TF's ImageResizerState) ---------------------------------------------- */

typedef struct resize_geom {
    int64_t batch, in_h, in_w, ch, out_h, out_w;
    float   scale_h, scale_w;
    bool    align_corners, half_pixel;
} resize_geom;

static bool resizable_dtype(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_INT8: case TFS_DTYPE_UINT8: case TFS_DTYPE_INT16: case TFS_DTYPE_UINT16:
    case TFS_DTYPE_INT32: case TFS_DTYPE_INT64: case TFS_DTYPE_HALF: case TFS_DTYPE_BFLOAT16:
    case TFS_DTYPE_FLOAT: case TFS_DTYPE_DOUBLE:
        return true;
    default:
        return false;
    }
}

static float resize_scale(int64_t in, int64_t out, bool align_corners)
{
    return align_corners && out > 1 ? (float)(in - 1) / (float)(out - 1)
                                    : (float)in / (float)out;
}

/* align_corners and half_pixel_centers (not both). */
static enum tfs_code sampling_attrs(const tfs_node *n, resize_geom *g, tfs_status *st)
{
    enum tfs_code rc;
    if ((rc = tfs__nn_attr_bool(n, "align_corners", false, &g->align_corners, st)) != TFS_OK ||
        (rc = tfs__nn_attr_bool(n, "half_pixel_centers", false, &g->half_pixel, st)) != TFS_OK)
        return rc;
    if (g->half_pixel && g->align_corners)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "If half_pixel_centers is True, align_corners must be False.");
    return TFS_OK;
}

/* A 4-D (NHWC) tensor input named `what` in the message. */
static enum tfs_code check_4d(const tfs_node *n, const tfs_tensor *t, const char *what,
                              tfs_status *st)
{
    char buf[128];
    if (t->rank != 4)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be 4-dimensional%s", what,
                             tfs_shape_str(t->rank, t->dims, buf, sizeof buf));
    return TFS_OK;
}

/* The size input: int32 [2] (height, width). */
static enum tfs_code check_size(const tfs_node *n, const tfs_tensor *size, tfs_status *st)
{
    char buf[128];
    if (size->dtype != TFS_DTYPE_INT32)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "size must be int32, got %s",
                             tfs_dtype_short_name(size->dtype));
    if (size->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "shape_t must be 1-dimensional%s",
                             tfs_shape_str(size->rank, size->dims, buf, sizeof buf));
    if (size->nelem != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "shape_t must have two elements%s",
                             tfs_shape_str(size->rank, size->dims, buf, sizeof buf));
    return TFS_OK;
}

static enum tfs_code resize_init(tfs_kernel_ctx *k, resize_geom *g, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, got %d", k->n_in);
    if ((rc = sampling_attrs(n, g, st)) != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0], *size = k->in[1];
    if (!resizable_dtype(in->dtype))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "images of dtype %s are not supported",
                             tfs_dtype_short_name(in->dtype));
    const tfs_attr_value *T = tfs__attr(n, "T");
    if (T && T->kind == TFS_ATTR_TYPE && T->type != in->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "images are %s but attr T is %s",
                             tfs_dtype_short_name(in->dtype), tfs_dtype_short_name(T->type));
    if ((rc = check_4d(n, in, "input", st)) != TFS_OK || (rc = check_size(n, size, st)) != TFS_OK)
        return rc;
    const int32_t *sz = size->data;
    g->batch = in->dims[0];
    g->in_h = in->dims[1];
    g->in_w = in->dims[2];
    g->ch = in->dims[3];
    g->out_h = sz[0];
    g->out_w = sz[1];
    if (g->in_h > INT32_MAX || g->in_w > INT32_MAX)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input sizes must be between 0 and max int32");
    if (g->out_h <= 0 || g->out_w <= 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "output dimensions must be positive");
    if (g->ch <= 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "image must have at least one channel");
    if (g->in_h <= 0 || g->in_w <= 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input image must be of non-zero size");
    g->scale_h = resize_scale(g->in_h, g->out_h, g->align_corners);
    g->scale_w = resize_scale(g->in_w, g->out_w, g->align_corners);
    return TFS_OK;
}

/* ---- element loads -------------------------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);   /* inf, nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {   /* subnormal: value = man * 2^-24, exact in float */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float load_float(const void *data, enum tfs_dtype dt, int64_t i)
{
    switch (dt) {
    case TFS_DTYPE_INT8:   return (float)((const int8_t *)data)[i];
    case TFS_DTYPE_UINT8:  return (float)((const uint8_t *)data)[i];
    case TFS_DTYPE_INT16:  return (float)((const int16_t *)data)[i];
    case TFS_DTYPE_UINT16: return (float)((const uint16_t *)data)[i];
    case TFS_DTYPE_INT32:  return (float)((const int32_t *)data)[i];
    case TFS_DTYPE_INT64:  return (float)((const int64_t *)data)[i];
    case TFS_DTYPE_DOUBLE: return (float)((const double *)data)[i];
    case TFS_DTYPE_HALF:   return half_to_float(((const uint16_t *)data)[i]);
    case TFS_DTYPE_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t *)data)[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    default:               return ((const float *)data)[i];
    }
}

/* ---- ResizeBilinear ------------------------------------------------------------------------- */

typedef struct lerp_pt {
    int64_t lower, upper;
    float   lerp;
} lerp_pt;

static void lerp_points(int64_t out, int64_t in, float scale, bool half_pixel, lerp_pt *p)
{
    for (int64_t i = 0; i < out; i++) {
        float src = half_pixel ? ((float)i + 0.5f) * scale - 0.5f : (float)i * scale;
        float fl = floorf(src);
        p[i].lower = fl > 0 ? (int64_t)fl : 0;
        int64_t up = (int64_t)ceilf(src);
        p[i].upper = up < in - 1 ? up : in - 1;
        p[i].lerp = src - fl;
    }
}

typedef struct bilinear_job {
    const resize_geom *g;
    const void        *in;
    enum tfs_dtype     dt;
    float             *out;
    const lerp_pt     *ys, *xs;
} bilinear_job;

/* Output rows [begin, end) of the flattened (batch, out_h) space. */
static void bilinear_rows(void *arg, int64_t begin, int64_t end)
{
    const bilinear_job *j = arg;
    const resize_geom *g = j->g;
    int64_t row = g->in_w * g->ch;
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / g->out_h, y = r % g->out_h;
        const lerp_pt *py = &j->ys[y];
        int64_t top = (b * g->in_h + py->lower) * row, bot = (b * g->in_h + py->upper) * row;
        float *o = j->out + r * g->out_w * g->ch;
        for (int64_t x = 0; x < g->out_w; x++) {
            const lerp_pt *px = &j->xs[x];
            int64_t l = px->lower * g->ch, u = px->upper * g->ch;
            for (int64_t c = 0; c < g->ch; c++) {
                float tl = load_float(j->in, j->dt, top + l + c);
                float tr = load_float(j->in, j->dt, top + u + c);
                float bl = load_float(j->in, j->dt, bot + l + c);
                float br = load_float(j->in, j->dt, bot + u + c);
                float t = tl + (tr - tl) * px->lerp;
                float bo = bl + (br - bl) * px->lerp;
                *o++ = t + (bo - t) * py->lerp;
            }
        }
    }
}

enum tfs_code tfs__k_resize_bilinear(tfs_kernel_ctx *k, tfs_status *st)
{
    resize_geom g;
    enum tfs_code rc = resize_init(k, &g, st);
    if (rc != TFS_OK)
        return rc;
    int64_t dims[4] = {g.batch, g.out_h, g.out_w, g.ch};
    tfs_tensor *out;
    if ((rc = tfs__arr_output(k, 0, TFS_DTYPE_FLOAT, 4, dims, false, &out, st)) != TFS_OK)
        return rc;
    k->out[0] = out;
    if (out->nelem == 0)
        return TFS_OK;
    lerp_pt *ys = tfs_malloc((size_t)(g.out_h + g.out_w) * sizeof *ys);
    if (!ys)
        return tfs__node_err(k->node, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    lerp_pt *xs = ys + g.out_h;
    lerp_points(g.out_h, g.in_h, g.scale_h, g.half_pixel, ys);
    lerp_points(g.out_w, g.in_w, g.scale_w, g.half_pixel, xs);
    bilinear_job j = {&g, k->in[0]->data, k->in[0]->dtype, out->data, ys, xs};
    int64_t per_row = g.out_w * g.ch * 8;
    tfs__parallel_for(g.batch * g.out_h, per_row >= 16384 ? 1 : 16384 / per_row, bilinear_rows,
                      &j);
    tfs_free(ys);
    return TFS_OK;
}

/* ---- ResizeNearestNeighbor ------------------------------------------------------------------ */

static void nearest_index(int64_t out, int64_t in, float scale, const resize_geom *g,
                          int64_t *idx)
{
    for (int64_t i = 0; i < out; i++) {
        float src = g->half_pixel ? ((float)i + 0.5f) * scale : (float)i * scale;
        int64_t v = (int64_t)(g->align_corners ? roundf(src) : floorf(src));
        if (v > in - 1)
            v = in - 1;
        if (g->half_pixel && v < 0)
            v = 0;
        idx[i] = v;
    }
}

typedef struct nearest_job {
    const resize_geom *g;
    const char        *in;
    char              *out;
    size_t             px;   /* bytes per pixel */
    const int64_t     *ys, *xs;
} nearest_job;

static void nearest_rows(void *arg, int64_t begin, int64_t end)
{
    const nearest_job *j = arg;
    const resize_geom *g = j->g;
    for (int64_t r = begin; r < end; r++) {
        int64_t b = r / g->out_h, y = r % g->out_h;
        const char *src = j->in + (size_t)((b * g->in_h + j->ys[y]) * g->in_w) * j->px;
        char *o = j->out + (size_t)(r * g->out_w) * j->px;
        for (int64_t x = 0; x < g->out_w; x++, o += j->px)
            memcpy(o, src + (size_t)j->xs[x] * j->px, j->px);
    }
}

enum tfs_code tfs__k_resize_nearest_neighbor(tfs_kernel_ctx *k, tfs_status *st)
{
    resize_geom g;
    enum tfs_code rc = resize_init(k, &g, st);
    if (rc != TFS_OK)
        return rc;
    if (g.in_h >= (1 << 24) || g.in_w >= (1 << 24))
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "nearest neighbor requires max height & width of 2^24");
    const tfs_tensor *in = k->in[0];
    int64_t dims[4] = {g.batch, g.out_h, g.out_w, g.ch};
    tfs_tensor *out;
    if ((rc = tfs__arr_output(k, 0, in->dtype, 4, dims, false, &out, st)) != TFS_OK)
        return rc;
    k->out[0] = out;
    if (out->nelem == 0)
        return TFS_OK;
    int64_t *ys = tfs_malloc((size_t)(g.out_h + g.out_w) * sizeof *ys);
    if (!ys)
        return tfs__node_err(k->node, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    int64_t *xs = ys + g.out_h;
    nearest_index(g.out_h, g.in_h, g.scale_h, &g, ys);
    nearest_index(g.out_w, g.in_w, g.scale_w, &g, xs);
    size_t px = (size_t)g.ch * tfs_dtype_size(in->dtype);
    nearest_job j = {&g, in->data, out->data, px, ys, xs};
    int64_t per_row = (int64_t)px * g.out_w;
    tfs__parallel_for(g.batch * g.out_h, per_row >= 65536 ? 1 : 65536 / per_row, nearest_rows,
                      &j);
    tfs_free(ys);
    return TFS_OK;
}

/* ---- ResizeBilinearGrad(grads, original_image), ResizeNearestNeighborGrad(grads, size) ------- */

/* The geometry of a gradient (in = original: the output here; out = resized: the grads) and its
 * output, zeroed [batch, orig_h, orig_w, channels] of dtype dt, set as k's output 0. */
static enum tfs_code grad_begin(tfs_kernel_ctx *k, const tfs_tensor *grads, int64_t orig_h,
                                int64_t orig_w, enum tfs_dtype dt, resize_geom *g,
                                tfs_tensor **out, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc;
    if ((rc = sampling_attrs(n, g, st)) != TFS_OK)
        return rc;
    if (orig_h <= 0 || orig_w <= 0 || orig_h > INT32_MAX || orig_w > INT32_MAX)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "original sizes must be between 1 and max int32, got %lld x %lld",
                             (long long)orig_h, (long long)orig_w);
    g->batch = grads->dims[0];
    g->out_h = grads->dims[1];
    g->out_w = grads->dims[2];
    g->ch = grads->dims[3];
    g->in_h = orig_h;
    g->in_w = orig_w;
    g->scale_h = resize_scale(orig_h, g->out_h, g->align_corners);
    g->scale_w = resize_scale(orig_w, g->out_w, g->align_corners);
    int64_t dims[4] = {g->batch, orig_h, orig_w, g->ch};
    if ((rc = tfs__arr_output(k, 0, dt, 4, dims, true, out, st)) != TFS_OK)
        return rc;
    k->out[0] = *out;
    return TFS_OK;
}

typedef struct bilinear_grad_job {
    const resize_geom *g;
    const float       *grads;
    void              *out;   /* float or double, zeroed */
    bool               dbl;
    const lerp_pt     *ys, *xs;
} bilinear_grad_job;

static void bilinear_grad_images(void *arg, int64_t begin, int64_t end)
{
    const bilinear_grad_job *j = arg;
    const resize_geom *g = j->g;
    int64_t row = g->in_w * g->ch;
    for (int64_t b = begin; b < end; b++) {
        const float *in = j->grads + b * g->out_h * g->out_w * g->ch;
        for (int64_t y = 0; y < g->out_h; y++) {
            const lerp_pt *py = &j->ys[y];
            float yl = py->lerp, iyl = 1.0f - yl;
            int64_t top = (b * g->in_h + py->lower) * row, bot = (b * g->in_h + py->upper) * row;
            for (int64_t x = 0; x < g->out_w; x++, in += g->ch) {
                const lerp_pt *px = &j->xs[x];
                float xl = px->lerp, ixl = 1.0f - xl;
                int64_t l = px->lower * g->ch, u = px->upper * g->ch;
                for (int64_t c = 0; c < g->ch; c++) {
                    float v = in[c];
                    float tl = v * iyl * ixl, tr = v * iyl * xl, bl = v * yl * ixl,
                          br = v * yl * xl;
                    if (j->dbl) {
                        double *o = j->out;
                        o[top + l + c] += (double)tl;
                        o[top + u + c] += (double)tr;
                        o[bot + l + c] += (double)bl;
                        o[bot + u + c] += (double)br;
                    } else {
                        float *o = j->out;
                        o[top + l + c] += tl;
                        o[top + u + c] += tr;
                        o[bot + l + c] += bl;
                        o[bot + u + c] += br;
                    }
                }
            }
        }
    }
}

enum tfs_code tfs__k_resize_bilinear_grad(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, got %d", k->n_in);
    const tfs_tensor *grads = k->in[0], *orig = k->in[1];
    enum tfs_code rc;
    if ((rc = check_4d(n, grads, "input_grad", st)) != TFS_OK ||
        (rc = check_4d(n, orig, "original_image", st)) != TFS_OK)
        return rc;
    if (grads->dtype != TFS_DTYPE_FLOAT)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input_grad must be of type float, got %s",
                             tfs_dtype_short_name(grads->dtype));
    if (orig->dtype != TFS_DTYPE_FLOAT && orig->dtype != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "original_image of dtype %s is not supported (float, double)",
                             tfs_dtype_short_name(orig->dtype));
    if (orig->dims[0] != grads->dims[0] || orig->dims[3] != grads->dims[3])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input_grad and original_image must have the same batch and "
                             "channels, got %lld, %lld and %lld, %lld",
                             (long long)grads->dims[0], (long long)grads->dims[3],
                             (long long)orig->dims[0], (long long)orig->dims[3]);
    resize_geom g;
    tfs_tensor *out;
    if ((rc = grad_begin(k, grads, orig->dims[1], orig->dims[2], orig->dtype, &g, &out, st)) !=
            TFS_OK ||
        grads->nelem == 0)
        return rc;
    lerp_pt *ys = tfs_malloc((size_t)(g.out_h + g.out_w) * sizeof *ys);
    if (!ys)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    lerp_pt *xs = ys + g.out_h;
    lerp_points(g.out_h, g.in_h, g.scale_h, g.half_pixel, ys);
    lerp_points(g.out_w, g.in_w, g.scale_w, g.half_pixel, xs);
    bilinear_grad_job j = {&g, grads->data, out->data, orig->dtype == TFS_DTYPE_DOUBLE, ys, xs};
    tfs__parallel_for(g.batch, 1, bilinear_grad_images, &j);
    tfs_free(ys);
    return TFS_OK;
}

typedef struct nearest_grad_job {
    const resize_geom *g;
    const void        *grads;
    void              *out;   /* zeroed, grads' dtype */
    enum tfs_dtype     dt;
    const int64_t     *ys, *xs;
} nearest_grad_job;

static void nearest_grad_images(void *arg, int64_t begin, int64_t end)
{
    const nearest_grad_job *j = arg;
    const resize_geom *g = j->g;
    for (int64_t b = begin; b < end; b++)
        for (int64_t y = 0; y < g->out_h; y++)
            for (int64_t x = 0; x < g->out_w; x++) {
                int64_t src = ((b * g->out_h + y) * g->out_w + x) * g->ch;
                int64_t dst = ((b * g->in_h + j->ys[y]) * g->in_w + j->xs[x]) * g->ch;
                for (int64_t c = 0; c < g->ch; c++)
                    switch (j->dt) {
                    case TFS_DTYPE_DOUBLE:
                        ((double *)j->out)[dst + c] += ((const double *)j->grads)[src + c];
                        break;
                    case TFS_DTYPE_INT32:   /* wraps as TF's int32 does, without UB */
                        ((int32_t *)j->out)[dst + c] = (int32_t)(
                            (uint32_t)((int32_t *)j->out)[dst + c] +
                            (uint32_t)((const int32_t *)j->grads)[src + c]);
                        break;
                    default:
                        ((float *)j->out)[dst + c] += ((const float *)j->grads)[src + c];
                        break;
                    }
            }
}

enum tfs_code tfs__k_resize_nearest_neighbor_grad(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, got %d", k->n_in);
    const tfs_tensor *grads = k->in[0], *size = k->in[1];
    enum tfs_code rc;
    if ((rc = check_4d(n, grads, "input", st)) != TFS_OK)
        return rc;
    if (grads->dtype != TFS_DTYPE_FLOAT && grads->dtype != TFS_DTYPE_DOUBLE &&
        grads->dtype != TFS_DTYPE_INT32)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "grads of dtype %s are not supported (float, double, int32)",
                             tfs_dtype_short_name(grads->dtype));
    if ((rc = check_size(n, size, st)) != TFS_OK)
        return rc;
    const int32_t *sz = size->data;
    resize_geom g;
    tfs_tensor *out;
    if ((rc = grad_begin(k, grads, sz[0], sz[1], grads->dtype, &g, &out, st)) != TFS_OK ||
        grads->nelem == 0)
        return rc;
    int64_t *ys = tfs_malloc((size_t)(g.out_h + g.out_w) * sizeof *ys);
    if (!ys)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    int64_t *xs = ys + g.out_h;
    nearest_index(g.out_h, g.in_h, g.scale_h, &g, ys);
    nearest_index(g.out_w, g.in_w, g.scale_w, &g, xs);
    nearest_grad_job j = {&g, grads->data, out->data, grads->dtype, ys, xs};
    tfs__parallel_for(g.batch, 1, nearest_grad_images, &j);
    tfs_free(ys);
    return TFS_OK;
}
