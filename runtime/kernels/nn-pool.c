/* CPU kernels for 2-D pooling in NHWC: MaxPool and AvgPool (attrs ksize, strides, padding SAME or
 * VALID, and for MaxPool also EXPLICIT; geometry in nn-util.c).
 *
 * Padding never takes part: MaxPool takes the maximum of the in-bounds elements of each window
 * (a NaN among them gives NaN), AvgPool divides their sum by how many there are, as TensorFlow
 * does, so a SAME window on the border averages fewer values. Each output pixel's window is
 * clipped to the image first, so the inner loop runs over contiguous channels only.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* Reads ksize, checks the input and fills the geometry; also allocates the output (zeroed for
 * AvgPool, which accumulates into it). */
static enum tfs_code pool_setup(tfs_kernel_ctx *k, bool explicit_ok, bool zeroed, tfs_nn_geom *g,
                                tfs_tensor **out, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    int64_t ksize[4];
    enum tfs_code rc = tfs__attr_type(n, "T", &T, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_ints(n, "ksize", 4, NULL, ksize, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 1 input, has %d", k->n_in);
    const tfs_tensor *in = k->in[0];
    if (in->dtype != T)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input has dtype %s, but attr T is %s",
                             tfs_dtype_short_name(in->dtype), tfs_dtype_short_name(T));
    if (ksize[0] != 1 || ksize[3] != 1)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "pooling over the batch or depth dimension is not supported "
                             "(ksize [%lld,%lld,%lld,%lld])", (long long)ksize[0],
                             (long long)ksize[1], (long long)ksize[2], (long long)ksize[3]);
    const char *padding = tfs__attr_str(n, "padding", "");
    if (!explicit_ok && !strcmp(padding, "EXPLICIT"))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "padding must be SAME or VALID");
    if ((rc = tfs__nn_geom_init(n, in, ksize[1], ksize[2], false, g, st)) != TFS_OK)
        return rc;
    int64_t odims[4] = {g->batch, g->out_h, g->out_w, g->in_c};
    return (zeroed ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, T, 4, odims, out, st);
}

/* Visits every output pixel of output rows [r0, r1) (a row is one (b, oh)) with its window
 * clipped to the image: [h0, h1) x [w0, w1). */
#define FOR_EACH_WINDOW(BODY)                                                                      \
    for (int64_t row = r0, b = r0 / g.out_h, oh = r0 % g.out_h; row < r1;                         \
         row++, oh = oh + 1 == g.out_h ? 0 : oh + 1, b += oh == 0)                                 \
            for (int64_t ow = 0; ow < g.out_w; ow++) {                                             \
                int64_t h0 = oh * g.stride_h - g.pad_top, w0 = ow * g.stride_w - g.pad_left;       \
                int64_t h1 = h0 + g.k_h, w1 = w0 + g.k_w;                                          \
                h0 = h0 < 0 ? 0 : h0;                                                              \
                w0 = w0 < 0 ? 0 : w0;                                                              \
                h1 = h1 > g.in_h ? g.in_h : h1;                                                    \
                w1 = w1 > g.in_w ? g.in_w : w1;                                                    \
                int64_t o_ = ((b * g.out_h + oh) * g.out_w + ow) * C;                              \
                int64_t img_ = b * g.in_h * g.in_w;                                                \
                BODY                                                                               \
            }

/* `v != v` is true only for a NaN, which then sticks: nothing compares greater than it. */
#define MAX_POOL(TY, LOWEST)                                                                       \
    do {                                                                                           \
        const TY *X = in->data;                                                                    \
        TY *O = out->data;                                                                         \
        FOR_EACH_WINDOW({                                                                          \
            TY *o = O + o_;                                                                        \
            for (int64_t c = 0; c < C; c++)                                                        \
                o[c] = LOWEST;                                                                     \
            for (int64_t ih = h0; ih < h1; ih++)                                                   \
                for (int64_t iw = w0; iw < w1; iw++) {                                             \
                    const TY *x = X + (img_ + ih * g.in_w + iw) * C;                               \
                    for (int64_t c = 0; c < C; c++) /* a select, so the loop vectorizes */     \
                        o[c] = x[c] > o[c] || x[c] != x[c] ? x[c] : o[c];                          \
                }                                                                                  \
        })                                                                                         \
    } while (0)

/* One range of output rows, for tfs__parallel_for. */
typedef struct pool_job {
    tfs_nn_geom       g;
    const tfs_tensor *in;
    tfs_tensor       *out;
} pool_job;

TFS_SIMD_CLONES static void max_pool_rows(void *arg, int64_t r0, int64_t r1)
{
    const pool_job *j = arg;
    tfs_nn_geom g = j->g;
    const tfs_tensor *in = j->in;
    tfs_tensor *out = j->out;
    int64_t C = g.in_c;
    switch (out->dtype) {
    case TFS_DTYPE_FLOAT:  MAX_POOL(float, -INFINITY); break;
    case TFS_DTYPE_DOUBLE: MAX_POOL(double, -INFINITY); break;
    case TFS_DTYPE_INT32:  MAX_POOL(int32_t, INT32_MIN); break;
    case TFS_DTYPE_INT64:  MAX_POOL(int64_t, INT64_MIN); break;
    case TFS_DTYPE_INT8:   MAX_POOL(int8_t, INT8_MIN); break;
    case TFS_DTYPE_INT16:  MAX_POOL(int16_t, INT16_MIN); break;
    case TFS_DTYPE_UINT8:  MAX_POOL(uint8_t, 0); break;
    case TFS_DTYPE_UINT16: MAX_POOL(uint16_t, 0); break;
    default:               break;
    }
}

/* Rows per range: about 32K window elements each. */
static int64_t pool_grain(const tfs_nn_geom *g)
{
    int64_t per = g->out_w * g->k_h * g->k_w * g->in_c;
    return per >= (1 << 15) ? 1 : per > 0 ? (1 << 15) / per : 1 << 15;
}

enum tfs_code tfs__k_max_pool(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_nn_geom g;
    tfs_tensor *out = NULL;
    enum tfs_code rc = pool_setup(k, true, false, &g, &out, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0];
    switch (out->dtype) {
    case TFS_DTYPE_FLOAT: case TFS_DTYPE_DOUBLE: case TFS_DTYPE_INT32: case TFS_DTYPE_INT64:
    case TFS_DTYPE_INT8: case TFS_DTYPE_INT16: case TFS_DTYPE_UINT8: case TFS_DTYPE_UINT16:
        break;
    default:
        tfs_tensor_unref(out);
        return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED, "MaxPool is not supported for dtype %s",
                             tfs_dtype_short_name(in->dtype));
    }
    pool_job j = {g, in, out};
    tfs__parallel_for(g.batch * g.out_h, pool_grain(&g), max_pool_rows, &j);
    k->out[0] = out;
    return TFS_OK;
}

#define AVG_POOL(TY)                                                                               \
    do {                                                                                           \
        const TY *X = in->data;                                                                    \
        TY *O = out->data;                                                                         \
        FOR_EACH_WINDOW({                                                                          \
            TY *o = O + o_;                                                                        \
            for (int64_t ih = h0; ih < h1; ih++)                                                   \
                for (int64_t iw = w0; iw < w1; iw++) {                                             \
                    const TY *x = X + (img_ + ih * g.in_w + iw) * C;                               \
                    for (int64_t c = 0; c < C; c++)                                                \
                        o[c] += x[c];                                                              \
                }                                                                                  \
            int64_t cnt = (h1 - h0) * (w1 - w0);                                                   \
            if (cnt > 0)                                                                           \
                for (int64_t c = 0; c < C; c++)                                                    \
                    o[c] /= (TY)cnt;                                                               \
        })                                                                                         \
    } while (0)

static void avg_pool_rows(void *arg, int64_t r0, int64_t r1)
{
    const pool_job *j = arg;
    tfs_nn_geom g = j->g;
    const tfs_tensor *in = j->in;
    tfs_tensor *out = j->out;
    int64_t C = g.in_c;
    if (out->dtype == TFS_DTYPE_FLOAT)
        AVG_POOL(float);
    else
        AVG_POOL(double);
}

enum tfs_code tfs__k_avg_pool(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_nn_geom g;
    tfs_tensor *out = NULL;
    enum tfs_code rc = pool_setup(k, false, true, &g, &out, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0];
    if (out->dtype != TFS_DTYPE_FLOAT && out->dtype != TFS_DTYPE_DOUBLE) {
        tfs_tensor_unref(out);
        return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED, "AvgPool is not supported for dtype %s",
                             tfs_dtype_short_name(in->dtype));
    }
    pool_job j = {g, in, out};
    tfs__parallel_for(g.batch * g.out_h, pool_grain(&g), avg_pool_rows, &j);
    k->out[0] = out;
    return TFS_OK;
}
