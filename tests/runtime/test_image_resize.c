/* Tests of ResizeBilinear and ResizeNearestNeighbor and their gradient ops ResizeBilinearGrad and
 * ResizeNearestNeighborGrad (runtime/kernels/image-resize.c): values
 * computed by hand from TensorFlow's sampling rules for each of legacy, align_corners and
 * half_pixel_centers, a float64 reference of bilinear interpolation (tolerance 1e-5 absolute +
 * 1e-5 relative: the kernel computes in float, as TF does), integer and 16-bit float inputs,
 * 1-pixel images, empty batches, and the INVALID_ARGUMENT cases of TF's ImageResizerState; the
 * gradients by hand and against the forward op's own weights (see that test). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_image_resize(void);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

typedef struct rs_opts {
    int align_corners;   /* -1: attr absent (default false) */
    int half_pixel;
} rs_opts;

static void set_rs(tfs_graph *g, int id, const void *arg)
{
    const rs_opts *o = arg;
    if (o->align_corners >= 0)
        tfs_graph_set_attr_bool(g, id, "align_corners", o->align_corners);
    if (o->half_pixel >= 0)
        tfs_graph_set_attr_bool(g, id, "half_pixel_centers", o->half_pixel);
}

static const rs_opts LEGACY = {-1, -1}, ALIGN = {1, 0}, HALF = {0, 1};

static tfs_tensor *size2(int32_t h, int32_t w)
{
    return at_i32v(2, (const int32_t[]){h, w});
}

static tfs_tensor *resize(const char *op, tfs_tensor *img, int32_t h, int32_t w, const rs_opts *o)
{
    tfs_tensor *in[2] = {img, size2(h, w)};
    return at_run1(op, 2, in, true, set_rs, o);
}

static void expect_f32(tfs_tensor *t, int rank, const int64_t *dims, const float *want)
{
    at_expect(t, TFS_DTYPE_FLOAT, rank, dims, want);
}

/* ---- bilinear, by hand ---------------------------------------------------------------------- */

START_TEST(test_bilinear_hand_values)
{
    const float img[] = {1, 2, 3, 4};   /* [1,2,2,1] */
    /* align_corners 2x2 -> 3x3: scale (2-1)/(3-1) = 0.5, corners preserved */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), img), 3, 3,
                      &ALIGN),
               4, DIMS(1, 3, 3, 1), (const float[]){1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
    /* legacy 2x2 -> 4x4: scale 0.5, src 0, .5, 1, 1.5 (the last clamps to the edge) */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), img), 4, 4,
                      &LEGACY),
               4, DIMS(1, 4, 4, 1),
               (const float[]){1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4});
    /* half_pixel 1x2 -> 1x4: src -0.25, 0.25, 0.75, 1.25 -> 1, 1.25, 1.75, 2 */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 2, 1), img), 1, 4,
                      &HALF),
               4, DIMS(1, 1, 4, 1), (const float[]){1, 1.25f, 1.75f, 2});
    /* legacy downscale 1x4 -> 1x2: scale 2, picks columns 0 and 2 */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 4, 1), img), 1, 2,
                      &LEGACY),
               4, DIMS(1, 1, 2, 1), (const float[]){1, 3});
    /* half_pixel downscale 1x4 -> 1x2: src 0.5, 2.5 -> 1.5, 3.5 */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 4, 1), img), 1, 2,
                      &HALF),
               4, DIMS(1, 1, 2, 1), (const float[]){1.5f, 3.5f});
    /* align_corners with an output of 1: the legacy scale in/out is used (src 0) */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), img), 1, 1,
                      &ALIGN),
               4, DIMS(1, 1, 1, 1), (const float[]){1});
    /* channels and batches are independent: 2 images x 2 channels, 1x2 -> 1x3 aligned */
    const float two[] = {0, 10, 2, 20, 100, -4, 200, 4};   /* [2,1,2,2] */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(2, 1, 2, 2), two), 1, 3,
                      &ALIGN),
               4, DIMS(2, 1, 3, 2),
               (const float[]){0, 10, 1, 15, 2, 20, 100, -4, 150, 0, 200, 4});
}
END_TEST

START_TEST(test_bilinear_one_pixel_and_empty)
{
    const float v[] = {7.5f, -2};   /* [1,1,1,2] */
    const rs_opts *modes[] = {&LEGACY, &ALIGN, &HALF};
    for (int m = 0; m < 3; m++) {
        float want[3 * 2 * 2];
        for (int i = 0; i < 6; i++) {
            want[2 * i] = 7.5f;
            want[2 * i + 1] = -2;
        }
        expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 1, 2), v), 3, 2,
                          modes[m]),
                   4, DIMS(1, 3, 2, 2), want);
    }
    /* batch 0: an empty output of the resized shape */
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, DIMS(0, 2, 2, 1), NULL), 5, 3,
                      &LEGACY),
               4, DIMS(0, 5, 3, 1), NULL);
}
END_TEST

START_TEST(test_bilinear_integer_and_half_inputs)
{
    /* uint8, int64 and double read as float; the output is float */
    const uint8_t u8[] = {0, 255};
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_UINT8, 4, DIMS(1, 1, 2, 1), u8), 1, 3,
                      &ALIGN),
               4, DIMS(1, 1, 3, 1), (const float[]){0, 127.5f, 255});
    const int64_t i64[] = {-10, 30};
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_INT64, 4, DIMS(1, 2, 1, 1), i64), 4, 1,
                      &LEGACY),
               4, DIMS(1, 4, 1, 1), (const float[]){-10, 10, 30, 30});
    const int16_t i16[] = {-3, 5};
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_INT16, 4, DIMS(1, 1, 2, 1), i16), 1, 4,
                      &HALF),
               4, DIMS(1, 1, 4, 1), (const float[]){-3, -1, 3, 5});
    /* half 1.0 = 0x3c00, -2.0 = 0xc000; bfloat16 1.0 = 0x3f80, 3.0 = 0x4040 */
    const uint16_t h[] = {0x3c00, 0xc000};
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_HALF, 4, DIMS(1, 1, 2, 1), h), 1, 3,
                      &ALIGN),
               4, DIMS(1, 1, 3, 1), (const float[]){1, -0.5f, -2});
    const uint16_t bf[] = {0x3f80, 0x4040};
    expect_f32(resize("ResizeBilinear", at_t(TFS_DTYPE_BFLOAT16, 4, DIMS(1, 1, 2, 1), bf), 1, 3,
                      &ALIGN),
               4, DIMS(1, 1, 3, 1), (const float[]){1, 2, 3});
}
END_TEST

/* ---- bilinear against a float64 reference -------------------------------------------------- */

/* The value at continuous source position (sy, sx): bilinear between the clamped neighbours. */
static double ref_sample(const double *img, int64_t h, int64_t w, int64_t ch, int64_t c,
                         double sy, double sx)
{
    double fy = floor(sy), fx = floor(sx);
    int64_t y0 = fy < 0 ? 0 : (int64_t)fy, x0 = fx < 0 ? 0 : (int64_t)fx;
    int64_t y1 = (int64_t)ceil(sy) > h - 1 ? h - 1 : (int64_t)ceil(sy);
    int64_t x1 = (int64_t)ceil(sx) > w - 1 ? w - 1 : (int64_t)ceil(sx);
    double ly = sy - fy, lx = sx - fx;
#define PX(y, x) img[((y) * w + (x)) * ch + c]
    double top = PX(y0, x0) * (1 - lx) + PX(y0, x1) * lx;
    double bot = PX(y1, x0) * (1 - lx) + PX(y1, x1) * lx;
#undef PX
    return top * (1 - ly) + bot * ly;
}

static double ref_src(int64_t i, int64_t in, int64_t out, const rs_opts *o)
{
    bool align = o->align_corners == 1, half = o->half_pixel == 1;
    double scale = align && out > 1 ? (double)(in - 1) / (double)(out - 1) : (double)in / out;
    return half ? (i + 0.5) * scale - 0.5 : i * scale;
}

START_TEST(test_bilinear_float64_reference)
{
    const int64_t shapes[][4] = {{1, 5, 7, 3}, {2, 3, 4, 2}, {1, 6, 1, 1}};
    const int32_t sizes[][2] = {{9, 4}, {2, 11}, {3, 5}, {1, 1}, {6, 7}};
    const rs_opts *modes[] = {&LEGACY, &ALIGN, &HALF};
    for (size_t s = 0; s < 3; s++) {
        const int64_t *d = shapes[s];
        int64_t n = d[0] * d[1] * d[2] * d[3];
        float img[128];
        double imgd[128];
        for (int64_t i = 0; i < n; i++) {
            img[i] = (float)((i * 37 % 23) - 11) * 0.25f;
            imgd[i] = img[i];
        }
        for (size_t z = 0; z < 5; z++) {
            for (int m = 0; m < 3; m++) {
                int64_t oh = sizes[z][0], ow = sizes[z][1];
                tfs_tensor *t = resize("ResizeBilinear", at_t(TFS_DTYPE_FLOAT, 4, d, img),
                                       (int32_t)oh, (int32_t)ow, modes[m]);
                ck_assert(tfs_shape_equal(t->rank, t->dims, 4, DIMS(d[0], oh, ow, d[3])));
                const float *got = t->data;
                for (int64_t b = 0; b < d[0]; b++)
                    for (int64_t y = 0; y < oh; y++)
                        for (int64_t x = 0; x < ow; x++)
                            for (int64_t c = 0; c < d[3]; c++) {
                                double want = ref_sample(imgd + b * d[1] * d[2] * d[3], d[1],
                                                         d[2], d[3], c,
                                                         ref_src(y, d[1], oh, modes[m]),
                                                         ref_src(x, d[2], ow, modes[m]));
                                double g = got[((b * oh + y) * ow + x) * d[3] + c];
                                ck_assert_msg(fabs(g - want) <= 1e-5 + 1e-5 * fabs(want),
                                              "shape %zu size %zu mode %d at (%lld,%lld,%lld,"
                                              "%lld): %g, want %g", s, z, m, (long long)b,
                                              (long long)y, (long long)x, (long long)c, g, want);
                            }
                tfs_tensor_unref(t);
            }
        }
    }
}
END_TEST

/* ---- nearest neighbor ----------------------------------------------------------------------- */

static void expect_nn_cols(int32_t in_w, int32_t out_w, const rs_opts *o, const int32_t *want)
{
    int32_t row[16];
    for (int i = 0; i < in_w; i++)
        row[i] = 100 + i;
    tfs_tensor *t = resize("ResizeNearestNeighbor",
                           at_t(TFS_DTYPE_INT32, 4, DIMS(1, 1, in_w, 1), row), 1, out_w, o);
    int32_t w[16];
    for (int i = 0; i < out_w; i++)
        w[i] = 100 + want[i];
    at_expect(t, TFS_DTYPE_INT32, 4, DIMS(1, 1, out_w, 1), w);
}

START_TEST(test_nearest_hand_indices)
{
    /* legacy: floor(i * in/out) */
    expect_nn_cols(4, 2, &LEGACY, (const int32_t[]){0, 2});
    expect_nn_cols(2, 5, &LEGACY, (const int32_t[]){0, 0, 0, 1, 1});
    expect_nn_cols(3, 2, &LEGACY, (const int32_t[]){0, 1});
    /* align_corners: round(i * (in-1)/(out-1)) */
    expect_nn_cols(4, 3, &ALIGN, (const int32_t[]){0, 2, 3});
    expect_nn_cols(2, 5, &ALIGN, (const int32_t[]){0, 0, 1, 1, 1});
    expect_nn_cols(5, 1, &ALIGN, (const int32_t[]){0});
    /* half_pixel_centers: floor((i + 0.5) * in/out), clamped to [0, in-1] */
    expect_nn_cols(4, 3, &HALF, (const int32_t[]){0, 2, 3});
    expect_nn_cols(2, 5, &HALF, (const int32_t[]){0, 0, 1, 1, 1});
    expect_nn_cols(4, 2, &HALF, (const int32_t[]){1, 3});
    expect_nn_cols(1, 3, &HALF, (const int32_t[]){0, 0, 0});
}
END_TEST

START_TEST(test_nearest_dtypes_and_rows)
{
    /* 2x2 -> 3x3 aligned, two channels, int8: rows and columns use round(i * 0.5) = 0, 1, 1 */
    const int8_t img[] = {1, -1, 2, -2, 3, -3, 4, -4};
    at_expect(resize("ResizeNearestNeighbor", at_t(TFS_DTYPE_INT8, 4, DIMS(1, 2, 2, 2), img), 3, 3,
                     &ALIGN),
              TFS_DTYPE_INT8, 4, DIMS(1, 3, 3, 2),
              ((const int8_t[]){1, -1, 2, -2, 2, -2, 3, -3, 4, -4, 4, -4, 3, -3, 4, -4, 4, -4}));
    /* double and half copy their elements bit for bit */
    const double dv[] = {0.1, -7e300};
    at_expect(resize("ResizeNearestNeighbor", at_t(TFS_DTYPE_DOUBLE, 4, DIMS(1, 1, 2, 1), dv), 2,
                     2, &LEGACY),
              TFS_DTYPE_DOUBLE, 4, DIMS(1, 2, 2, 1), ((const double[]){0.1, -7e300, 0.1, -7e300}));
    const uint16_t hv[] = {0x7e00, 0x3c00};
    at_expect(resize("ResizeNearestNeighbor", at_t(TFS_DTYPE_HALF, 4, DIMS(1, 2, 1, 1), hv), 1, 1,
                     &HALF),
              TFS_DTYPE_HALF, 4, DIMS(1, 1, 1, 1), ((const uint16_t[]){0x3c00}));
    /* empty batch */
    at_expect(resize("ResizeNearestNeighbor", at_t(TFS_DTYPE_FLOAT, 4, DIMS(0, 1, 1, 3), NULL), 2,
                     2, &LEGACY),
              TFS_DTYPE_FLOAT, 4, DIMS(0, 2, 2, 3), NULL);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------- */

static void expect_err(const char *op, tfs_tensor *img, tfs_tensor *size, const rs_opts *o,
                       const char *needle)
{
    tfs_tensor *in[2] = {img, size}, *out = NULL;
    tfs_status st;
    ck_assert_int_eq(at_run(op, 2, in, true, set_rs, o, 1, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, needle);
    ck_assert(out == NULL);
}

START_TEST(test_resize_errors)
{
    const char *ops[] = {"ResizeBilinear", "ResizeNearestNeighbor"};
    for (int i = 0; i < 2; i++) {
        const char *op = ops[i];
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 3, DIMS(2, 2, 1), NULL), size2(2, 2), &LEGACY,
                   "input must be 4-dimensional[2,2,1]");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
                   at_i32v(3, (const int32_t[]){1, 2, 3}), &LEGACY, "shape_t must have two");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
                   at_t(TFS_DTYPE_INT32, 2, DIMS(1, 2), NULL), &LEGACY,
                   "shape_t must be 1-dimensional");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
                   at_i64v(2, (const int64_t[]){2, 2}), &LEGACY, "size must be int32");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL), size2(0, 2), &LEGACY,
                   "output dimensions must be positive");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL), size2(3, -1), &LEGACY,
                   "output dimensions must be positive");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL), size2(3, 3),
                   &(const rs_opts){1, 1}, "If half_pixel_centers is True, align_corners must");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 0, 2, 1), NULL), size2(3, 3), &LEGACY,
                   "input image must be of non-zero size");
        expect_err(op, at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 0), NULL), size2(3, 3), &LEGACY,
                   "image must have at least one channel");
        expect_err(op, at_t(TFS_DTYPE_BOOL, 4, DIMS(1, 2, 2, 1), NULL), size2(3, 3), &LEGACY,
                   "images of dtype bool are not supported");
    }
    /* both have gradients (image_grad.py's; checked by finite differences in test_gradients.c) */
    ck_assert(tfs_op_has_gradient("ResizeBilinear"));
    ck_assert(tfs_op_has_gradient("ResizeNearestNeighbor"));
}
END_TEST

/* ---- the gradients: ResizeBilinearGrad, ResizeNearestNeighborGrad -------------------------- */

static tfs_tensor *grad_run(const char *op, tfs_tensor *grads, tfs_tensor *second,
                            const rs_opts *o)
{
    tfs_tensor *in[2] = {grads, second};
    return at_run1(op, 2, in, false, set_rs, o);
}

START_TEST(test_resize_grad_hand_values)
{
    /* One original pixel takes every gradient: 1 + 2 + 3 + 4. */
    expect_f32(grad_run("ResizeBilinearGrad",
                        at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), ((const float[]){1, 2, 3, 4})),
                        at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 1, 1), NULL), &LEGACY),
               4, DIMS(1, 1, 1, 1), ((const float[]){10}));
    /* Width 2 resized to 4, legacy: x = 0, 0.5, 1, 1.5 -> pixel 0 gets 1 + 0.5 * 2, pixel 1 gets
     * 0.5 * 2 + 3 + 4 (x = 1.5 clamps both neighbours to pixel 1). */
    expect_f32(grad_run("ResizeBilinearGrad",
                        at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 4, 1), ((const float[]){1, 2, 3, 4})),
                        at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 2, 1), NULL), &LEGACY),
               4, DIMS(1, 1, 2, 1), ((const float[]){2, 8}));
    /* The same with align_corners: x = 0, 1/3, 2/3, 1. */
    tfs_tensor *t = grad_run("ResizeBilinearGrad",
                             at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 4, 1), ((const float[]){1, 2, 3, 4})),
                             at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 2, 1), NULL), &ALIGN);
    const float *g = t->data;
    ck_assert_msg(fabsf(g[0] - (1 + 2 * 2 / 3.0f + 3 / 3.0f)) < 1e-6f, "%g", g[0]);
    ck_assert_msg(fabsf(g[1] - (2 / 3.0f + 3 * 2 / 3.0f + 4)) < 1e-6f, "%g", g[1]);
    tfs_tensor_unref(t);
    /* Nearest, 2x2 -> size 1x1: everything into the one pixel; int32 and double. */
    at_expect(grad_run("ResizeNearestNeighborGrad",
                       at_t(TFS_DTYPE_INT32, 4, DIMS(1, 2, 2, 1), ((const int32_t[]){1, 2, 3, 4})),
                       size2(1, 1), &LEGACY),
              TFS_DTYPE_INT32, 4, DIMS(1, 1, 1, 1), ((const int32_t[]){10}));
    /* Nearest 1x4 -> size 1x2, legacy: x = 0, 0.5, 1, 1.5 floor to 0, 0, 1, 1. */
    at_expect(grad_run("ResizeNearestNeighborGrad",
                       at_t(TFS_DTYPE_DOUBLE, 4, DIMS(1, 1, 4, 1), ((const double[]){1, 2, 3, 4})),
                       size2(1, 2), &LEGACY),
              TFS_DTYPE_DOUBLE, 4, DIMS(1, 1, 2, 1), ((const double[]){3, 7}));
    /* align_corners rounds: x = 0, 1/3, 2/3, 1 -> 0, 0, 1, 1 */
    at_expect(grad_run("ResizeNearestNeighborGrad",
                       at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 4, 1), ((const float[]){1, 2, 3, 4})),
                       size2(1, 2), &ALIGN),
              TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 2, 1), ((const float[]){3, 7}));
}
END_TEST

/* The forward op's weights, read off by resizing one-hot images (a resize is linear: output j of
 * e_i is the weight of input i in output j), give each gradient independently: dx[i] = sum_j
 * g[j] * resize(e_i)[j], summed in float64. Over both ops, the three sampling modes, upsampling
 * and downsampling, two images and two channels. Tolerance: 1e-5 * sum |terms| + 1e-6 (the
 * kernel forms products and sums in float). */
START_TEST(test_resize_grad_against_forward_weights)
{
    const rs_opts *modes[] = {&LEGACY, &ALIGN, &HALF};
    const int32_t sizes[][4] = {{3, 4, 5, 7}, {5, 6, 2, 4}, {4, 3, 4, 3}};   /* in h, w; out h, w */
    const char *fwd[] = {"ResizeBilinear", "ResizeNearestNeighbor"};
    const char *bwd[] = {"ResizeBilinearGrad", "ResizeNearestNeighborGrad"};
    enum { B = 2, C = 2 };
    for (int op = 0; op < 2; op++)
        for (int m = 0; m < 3; m++)
            for (int z = 0; z < 3; z++) {
                int64_t ih = sizes[z][0], iw = sizes[z][1], oh = sizes[z][2], ow = sizes[z][3];
                int64_t nin = B * ih * iw * C, nout = B * oh * ow * C;
                float *gv = tfs_malloc((size_t)nout * sizeof *gv);
                double *want = tfs_calloc((size_t)nin, sizeof *want);
                double *mag = tfs_calloc((size_t)nin, sizeof *mag);
                ck_assert(gv && want && mag);
                for (int64_t j = 0; j < nout; j++)
                    gv[j] = (float)((j * 37 % 23) - 11) / 7.0f;
                for (int64_t i = 0; i < nin; i++) {
                    float *e = tfs_calloc((size_t)nin, sizeof *e);
                    ck_assert(e);
                    e[i] = 1;
                    tfs_tensor *w = resize(fwd[op], at_t(TFS_DTYPE_FLOAT, 4, DIMS(B, ih, iw, C), e),
                                           (int32_t)oh, (int32_t)ow, modes[m]);
                    const float *wv = w->data;
                    for (int64_t j = 0; j < nout; j++) {
                        want[i] += (double)gv[j] * wv[j];
                        mag[i] += fabs((double)gv[j] * wv[j]);
                    }
                    tfs_tensor_unref(w);
                    tfs_free(e);
                }
                tfs_tensor *second = op == 0 ? at_t(TFS_DTYPE_FLOAT, 4, DIMS(B, ih, iw, C), NULL)
                                             : size2((int32_t)ih, (int32_t)iw);
                tfs_tensor *got = grad_run(bwd[op], at_t(TFS_DTYPE_FLOAT, 4, DIMS(B, oh, ow, C), gv),
                                           second, modes[m]);
                ck_assert(tfs_shape_equal(got->rank, got->dims, 4, DIMS(B, ih, iw, C)));
                for (int64_t i = 0; i < nin; i++) {
                    double v = ((const float *)got->data)[i];
                    ck_assert_msg(fabs(v - want[i]) <= 1e-5 * mag[i] + 1e-6,
                                  "%s mode %d size %d: dx[%lld] = %.9g, want %.9g", bwd[op], m, z,
                                  (long long)i, v, want[i]);
                }
                tfs_tensor_unref(got);
                tfs_free(gv);
                tfs_free(want);
                tfs_free(mag);
            }
}
END_TEST

START_TEST(test_resize_grad_double_and_errors)
{
    /* ResizeBilinearGrad writes the original image's dtype: double here. */
    at_expect(grad_run("ResizeBilinearGrad",
                       at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 4, 1), ((const float[]){1, 2, 3, 4})),
                       at_t(TFS_DTYPE_DOUBLE, 4, DIMS(1, 1, 2, 1), NULL), &LEGACY),
              TFS_DTYPE_DOUBLE, 4, DIMS(1, 1, 2, 1), ((const double[]){2, 8}));
    /* an empty batch gives an empty gradient */
    at_expect(grad_run("ResizeNearestNeighborGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(0, 2, 2, 1), NULL),
                       size2(3, 3), &LEGACY),
              TFS_DTYPE_FLOAT, 4, DIMS(0, 3, 3, 1), NULL);
    struct {
        const char *op;
        tfs_tensor *a, *b;
        const rs_opts *o;
        const char *needle;
    } cases[] = {
        {"ResizeBilinearGrad", at_t(TFS_DTYPE_FLOAT, 3, DIMS(1, 2, 2), NULL),
         at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 1, 1), NULL), &LEGACY,
         "input_grad must be 4-dimensional[1,2,2]"},
        {"ResizeBilinearGrad", at_t(TFS_DTYPE_DOUBLE, 4, DIMS(1, 2, 2, 1), NULL),
         at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 1, 1), NULL), &LEGACY,
         "input_grad must be of type float, got double"},
        {"ResizeBilinearGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         at_t(TFS_DTYPE_FLOAT, 4, DIMS(2, 1, 1, 1), NULL), &LEGACY,
         "must have the same batch and channels"},
        {"ResizeBilinearGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         at_t(TFS_DTYPE_INT32, 4, DIMS(1, 1, 1, 1), NULL), &LEGACY,
         "original_image of dtype int32 is not supported"},
        {"ResizeBilinearGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 0, 1, 1), NULL), &LEGACY,
         "original sizes must be between 1 and max int32"},
        {"ResizeBilinearGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 1, 1, 1), NULL), &(const rs_opts){1, 1},
         "If half_pixel_centers is True, align_corners must be False."},
        {"ResizeNearestNeighborGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         at_i32v(3, (const int32_t[]){1, 2, 3}), &LEGACY, "shape_t must have two elements"},
        {"ResizeNearestNeighborGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         size2(0, 2), &LEGACY, "original sizes must be between 1 and max int32"},
        {"ResizeNearestNeighborGrad", at_t(TFS_DTYPE_FLOAT, 4, DIMS(1, 2, 2, 1), NULL),
         at_i64v(2, (const int64_t[]){2, 2}), &LEGACY, "size must be int32"},
        {"ResizeNearestNeighborGrad", at_t(TFS_DTYPE_BOOL, 4, DIMS(1, 2, 2, 1), NULL),
         size2(2, 2), &LEGACY, "grads of dtype bool are not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfs_tensor *in[2] = {cases[i].a, cases[i].b}, *out = NULL;
        tfs_status st;
        ck_assert_int_eq(at_run(cases[i].op, 2, in, false, set_rs, cases[i].o, 1, &out, &st),
                         TFS_INVALID_ARGUMENT);
        rt_assert_err(st, TFS_INVALID_ARGUMENT, cases[i].needle);
        ck_assert(out == NULL);
    }
}
END_TEST

Suite *suite_runtime_image_resize(void)
{
    Suite *s = suite_create("runtime_image_resize");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_bilinear_hand_values);
    tcase_add_test(tc, test_bilinear_one_pixel_and_empty);
    tcase_add_test(tc, test_bilinear_integer_and_half_inputs);
    tcase_add_test(tc, test_bilinear_float64_reference);
    tcase_add_test(tc, test_nearest_hand_indices);
    tcase_add_test(tc, test_nearest_dtypes_and_rows);
    tcase_add_test(tc, test_resize_errors);
    tcase_add_test(tc, test_resize_grad_hand_values);
    tcase_add_test(tc, test_resize_grad_against_forward_weights);
    tcase_add_test(tc, test_resize_grad_double_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
