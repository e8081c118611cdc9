/* Tests of Conv2D and DepthwiseConv2dNative (runtime/kernels/nn-conv.c) through one-op graphs.
 * Small cases are computed by hand; the rest against a float64 reference written below as plain
 * loops over the window, with the output size and padding worked out here by TensorFlow's rules
 * (and some of them stated by hand). Tolerance: |got - ref| <= 1e-5 * sum |x * w| (+1e-6). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/gemm-impl.h"
#include "tests/runtime/nn-helpers.h"

Suite *suite_runtime_nn_conv(void);

typedef struct conv_case {
    const char *padding;           /* "SAME", "VALID", "EXPLICIT" */
    int64_t     pads[4];           /* EXPLICIT: top, bottom, left, right */
    int64_t     stride_h, stride_w, dil_h, dil_w;
} conv_case;

/* Output size and padding before, as TensorFlow computes them. */
static void out_size(const conv_case *c, int64_t in, int64_t k, int64_t stride, int64_t dil,
                     int64_t pb, int64_t pa, int64_t *out, int64_t *before)
{
    int64_t eff = (k - 1) * dil + 1;
    if (!strcmp(c->padding, "VALID")) {
        *out = (in - eff + stride) / stride;
        *before = 0;
    } else if (!strcmp(c->padding, "SAME")) {
        *out = (in + stride - 1) / stride;
        int64_t total = (*out - 1) * stride + eff - in;
        *before = total > 0 ? total / 2 : 0;
    } else {
        *out = (in + pb + pa - eff + stride) / stride;
        *before = pb;
    }
}

/* Reference for both ops: depthwise (mult = f's last dim, out channel c*mult+m) or not. */
static void ref_conv(const tfs_tensor *x, const tfs_tensor *f, const conv_case *c, bool depthwise,
                     int64_t *odims, double **want, double **mag)
{
    int64_t N = x->dims[0], H = x->dims[1], W = x->dims[2], C = x->dims[3];
    int64_t KH = f->dims[0], KW = f->dims[1], FO = f->dims[3];
    int64_t OH, OW, pt, pl;
    out_size(c, H, KH, c->stride_h, c->dil_h, c->pads[0], c->pads[1], &OH, &pt);
    out_size(c, W, KW, c->stride_w, c->dil_w, c->pads[2], c->pads[3], &OW, &pl);
    int64_t OC = depthwise ? C * FO : FO;
    odims[0] = N, odims[1] = OH, odims[2] = OW, odims[3] = OC;
    size_t n = (size_t)(N * OH * OW * OC);
    *want = tfs_calloc(n ? n : 1, sizeof **want);
    *mag = tfs_calloc(n ? n : 1, sizeof **mag);
    ck_assert(*want && *mag);
    const float *X = x->data, *F = f->data;
    for (int64_t b = 0; b < N; b++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t oc = 0; oc < OC; oc++) {
                    double s = 0, g = 0;
                    for (int64_t kh = 0; kh < KH; kh++)
                        for (int64_t kw = 0; kw < KW; kw++) {
                            int64_t ih = oh * c->stride_h - pt + kh * c->dil_h;
                            int64_t iw = ow * c->stride_w - pl + kw * c->dil_w;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                continue;
                            for (int64_t ic = 0; ic < C; ic++) {
                                double w;
                                if (depthwise) {
                                    if (ic != oc / FO)
                                        continue;
                                    w = F[((kh * KW + kw) * C + ic) * FO + oc % FO];
                                } else {
                                    w = F[((kh * KW + kw) * C + ic) * FO + oc];
                                }
                                double v = X[((b * H + ih) * W + iw) * C + ic] * w;
                                s += v;
                                g += fabs(v);
                            }
                        }
                    size_t i = (size_t)(((b * OH + oh) * OW + ow) * OC + oc);
                    (*want)[i] = s;
                    (*mag)[i] = g;
                }
}

static void conv_attrs(nn_attrs *at, const conv_case *c)
{
    int64_t strides[4] = {1, c->stride_h, c->stride_w, 1}, dil[4] = {1, c->dil_h, c->dil_w, 1};
    nn_attr_str(at, "padding", c->padding);
    nn_attr_ints(at, "strides", 4, strides);
    nn_attr_ints(at, "dilations", 4, dil);
    if (!strcmp(c->padding, "EXPLICIT")) {
        int64_t p[8] = {0, 0, c->pads[0], c->pads[1], c->pads[2], c->pads[3], 0, 0};
        nn_attr_ints(at, "explicit_paddings", 8, p);
    }
}

/* Runs op on random x, f and compares with the reference. */
static void check_case(const char *op, const int64_t *xd, const int64_t *fd, const conv_case *c,
                       uint32_t seed)
{
    tfs_tensor *x = nn_random_f32(4, xd, seed), *f = nn_random_f32(4, fd, seed + 1000);
    nn_attrs at = {0};
    conv_attrs(&at, c);
    tfs_tensor *out = NULL;
    tfs_status st;
    char what[160];
    snprintf(what, sizeof what, "%s x[%lld,%lld,%lld,%lld] f[%lld,%lld,%lld,%lld] %s stride %lld,%lld dil %lld,%lld",
             op, (long long)xd[0], (long long)xd[1], (long long)xd[2], (long long)xd[3],
             (long long)fd[0], (long long)fd[1], (long long)fd[2], (long long)fd[3], c->padding,
             (long long)c->stride_h, (long long)c->stride_w, (long long)c->dil_h, (long long)c->dil_w);
    ck_assert_msg(rt_run_op(op, x, f, true, nn_apply_attrs, &at, &out, &st) == TFS_OK, "%s: %s", what,
                  st.msg);
    int64_t odims[4];
    double *want, *mag;
    ref_conv(x, f, c, !strcmp(op, "DepthwiseConv2dNative"), odims, &want, &mag);
    nn_assert_close(out, 4, odims, want, mag, 1e-5, 1e-6, what);
    tfs_free(want);
    tfs_free(mag);
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
}

START_TEST(test_nn_conv2d_hand_same_even_kernel)
{
    /* x = 1..9 in a 3x3 image, a 2x2 filter of ones. VALID: the four 2x2 window sums
     * [12,16,24,28]. SAME, stride 1: out 3x3, pad_total = (3-1)*1 + 2 - 3 = 1, all of it at the
     * bottom/right (pad_before = 0), so the last row/column sums over the image edge only. */
    int64_t xd[] = {1, 3, 3, 1}, fd[] = {2, 2, 1, 1};
    const float xv[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, fv[] = {1, 1, 1, 1};
    int64_t s1[4] = {1, 1, 1, 1};
    tfs_tensor *x = tfs_test_tensor_f32(4, xd, xv), *f = tfs_test_tensor_f32(4, fd, fv);
    tfs_tensor *out = NULL;
    tfs_status st;
    nn_attrs valid = {0};
    nn_attr_str(&valid, "padding", "VALID");
    nn_attr_ints(&valid, "strides", 4, s1);
    ck_assert_msg(rt_run_op("Conv2D", x, f, true, nn_apply_attrs, &valid, &out, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_test_assert_f32(out, 4, (const int64_t[]){1, 2, 2, 1}, (const float[]){12, 16, 24, 28}, 0);
    tfs_tensor_unref(out);
    nn_attrs same = {0};
    nn_attr_str(&same, "padding", "SAME");
    nn_attr_ints(&same, "strides", 4, s1);
    ck_assert_msg(rt_run_op("Conv2D", x, f, true, nn_apply_attrs, &same, &out, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_test_assert_f32(out, 4, (const int64_t[]){1, 3, 3, 1},
                        (const float[]){12, 16, 9, 24, 28, 15, 15, 17, 9}, 0);
    tfs_tensor_unref(out);
    /* SAME, stride 2, 3x3 filter of ones on the same image: out 2x2, pad_total = (2-1)*2 + 3 - 3
     * = 2, one on each side: windows centred on (0,0), (0,2), (2,0), (2,2). */
    int64_t f3d[] = {3, 3, 1, 1}, s2[4] = {1, 2, 2, 1};
    const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    tfs_tensor *f3 = tfs_test_tensor_f32(4, f3d, ones);
    nn_attrs same2 = {0};
    nn_attr_str(&same2, "padding", "SAME");
    nn_attr_ints(&same2, "strides", 4, s2);
    ck_assert_msg(rt_run_op("Conv2D", x, f3, true, nn_apply_attrs, &same2, &out, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_test_assert_f32(out, 4, (const int64_t[]){1, 2, 2, 1},
                        (const float[]){1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9}, 0);
    tfs_tensor_unref(out);
    tfs_tensor_unref(f3);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
}
END_TEST

START_TEST(test_nn_conv2d_random_geometries)
{
    /* batch 2, 9x8x3 input, 4 output channels; odd (3x3) and even (4x4, 2x3) kernels. */
    int64_t xd[] = {2, 9, 8, 3};
    int64_t f33[] = {3, 3, 3, 4}, f44[] = {4, 4, 3, 4}, f23[] = {2, 3, 3, 4};
    const conv_case cases[] = {
        {"SAME", {0}, 1, 1, 1, 1},  {"VALID", {0}, 1, 1, 1, 1}, {"SAME", {0}, 2, 3, 1, 1},
        {"VALID", {0}, 2, 2, 1, 1}, {"SAME", {0}, 1, 1, 2, 2},  {"VALID", {0}, 1, 2, 2, 1},
        {"SAME", {0}, 2, 1, 1, 3},  {"EXPLICIT", {1, 2, 0, 3}, 1, 1, 1, 1},
        {"EXPLICIT", {2, 0, 1, 1}, 2, 3, 2, 1},
    };
    uint32_t seed = 100;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case("Conv2D", xd, f33, &cases[i], seed++);
        check_case("Conv2D", xd, f44, &cases[i], seed++);
        check_case("Conv2D", xd, f23, &cases[i], seed++);
    }
    /* Sizes stated by hand: 9 rows, k 4, stride 2 SAME -> 5 rows, pad_total = 4*2+4-9 = 3
     * (top 1, bottom 2); 8 cols, k 4, stride 3 SAME -> 3 cols, pad_total = 2*3+4-8 = 2. */
    nn_attrs at = {0};
    conv_attrs(&at, &(conv_case){"SAME", {0}, 2, 3, 1, 1});
    tfs_tensor *x = nn_random_f32(4, xd, 1), *f = nn_random_f32(4, f44, 2), *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run_op("Conv2D", x, f, true, nn_apply_attrs, &at, &out, &st), TFS_OK);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 4, (const int64_t[]){2, 5, 3, 4}));
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
}
END_TEST

/* Float, dilation 1, small filters: the convolution without patches (nn-conv-direct.c). Output
 * rows wider than one micro-kernel tile (31 pixels), output channels off the kernel's 32-column
 * panels (33, 70), odd and even kernels, and padding SAME, VALID and EXPLICIT (also wider than
 * the kernel); strides of 2 down the rows, across them and both (windows that overlap, that
 * touch, and 2x5 ones that skip a column), a stride of 3 (11 output columns: patches). Then a
 * 7x7 stride-2 layer on 3 channels shaped like ResNet-50's first (21 floats per window row). */
START_TEST(test_nn_conv2d_direct_path)
{
    int64_t xd[] = {3, 9, 31, 24};
    int64_t f33[] = {3, 3, 24, 40}, f44[] = {4, 4, 24, 33}, f25[] = {2, 5, 24, 70};
    const conv_case cases[] = {
        {"SAME", {0}, 1, 1, 1, 1},
        {"VALID", {0}, 1, 1, 1, 1},
        {"EXPLICIT", {1, 2, 0, 3}, 1, 1, 1, 1},
        {"EXPLICIT", {5, 0, 6, 1}, 1, 1, 1, 1},
        {"SAME", {0}, 2, 1, 1, 1},
        {"SAME", {0}, 1, 2, 1, 1},
        {"VALID", {0}, 2, 2, 1, 1},
        {"EXPLICIT", {3, 0, 2, 4}, 2, 2, 1, 1},
        {"SAME", {0}, 1, 3, 1, 1},
    };
    /* Every case on the kernel set this CPU uses (the best it has, tried first); on the others,
     * whose kernels also sum a tile's window rows as segments of A (gemm-impl.h), a 3x3, a 4x4
     * with stride 2 and the 7x7/2: enough for their segments, and the sanitizer build's time. */
    int tried = 0;
    for (int isa = 0; isa < TFS_GEMM_ISA_COUNT; isa++) {
        if (!tfs__gemm_force_isa((enum tfs_gemm_isa)isa))
            continue;
        bool every = tried++ == 0;
        uint32_t seed = 700;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++, seed += 3) {
            if (every || i == 0)
                check_case("Conv2D", xd, f33, &cases[i], seed);
            if (every || i == 7)
                check_case("Conv2D", xd, f44, &cases[i], seed + 1);
            if (every)
                check_case("Conv2D", xd, f25, &cases[i], seed + 2);
        }
        int64_t sd[] = {2, 40, 37, 3}, f77[] = {7, 7, 3, 64};
        check_case("Conv2D", sd, f77, &(conv_case){"SAME", {0}, 2, 2, 1, 1}, seed++);
        if (every)
            check_case("Conv2D", sd, f77, &(conv_case){"VALID", {0}, 2, 2, 1, 1}, seed++);
    }
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
    ck_assert_int_ge(tried, 1);
}
END_TEST

/* Conv2D with a Const's filter over a quarter of L2 (1.15 MB): the direct path reads it from the
 * packed copy kept on the Const's tensor (nn-conv-direct.c), with 200 columns (a zero-padded last
 * panel), stride 1 and 2, and rows shorter than the kernel's MR (16 of them), twice per case (the
 * second run reads the kept copy), on every kernel set, against float64. The same Const also
 * feeds a convolution with short rows too few for the direct path (6), whose GEMM packs k in
 * blocks: the tensor keeps one layout, and the other op must not read it as its own. The stride-1
 * cases have fewer than 28 tiles of 2x2 pixels, too few for Winograd's path, but the last, which
 * takes it (nn-conv-winograd.c): its transformed filter in each kernel set's panels. */
START_TEST(test_nn_conv2d_direct_packed_filter)
{
    int64_t fd[4] = {3, 3, 160, 200}, narrow[4] = {1, 6, 8, 160};
    static const struct {
        int64_t x[4];
        conv_case c;
    } cases[] = {
        {{1, 5, 16, 160}, {"SAME", {0}, 1, 1, 1, 1}},
        {{1, 9, 33, 160}, {"VALID", {0}, 2, 2, 1, 1}},
        {{16, 3, 4, 160}, {"VALID", {0}, 1, 1, 1, 1}},   /* rows of 2, shorter than any MR */
        {{2, 5, 16, 160}, {"SAME", {0}, 1, 1, 1, 1}},    /* 48 tiles: Winograd's path */
    };
    const conv_case same = {"SAME", {0}, 1, 1, 1, 1};
    int tried = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfs_tensor *x = nn_random_f32(4, cases[i].x, 40 + (uint32_t)i);
        tfs_tensor *x2 = nn_random_f32(4, narrow, 45 + (uint32_t)i);
        tfs_tensor *f = nn_random_f32(4, fd, 50 + (uint32_t)i);
        int64_t odims[2][4];
        double *want[2], *mag[2];
        ref_conv(x, f, &cases[i].c, false, odims[0], &want[0], &mag[0]);
        ref_conv(x2, f, &same, false, odims[1], &want[1], &mag[1]);
        for (int isa = 0; isa < TFS_GEMM_ISA_COUNT; isa++) {
            if (!tfs__gemm_force_isa((enum tfs_gemm_isa)isa))
                continue;
            tried++;
            tfs_tensor *fc = NULL;   /* a Const of its own: a kept copy is one kernel set's */
            ck_assert_int_eq(tfs_tensor_copy(f, &fc, NULL), TFS_OK);
            tfs_graph *g = NULL;
            ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
            rt_placeholder(g, "a", TFS_DTYPE_FLOAT);
            rt_placeholder(g, "a2", TFS_DTYPE_FLOAT);
            rt_const(g, "b", fc);
            int id = rt_node(g, "op", "Conv2D", "a", "b", TFS_DTYPE_FLOAT);
            int id2 = rt_node(g, "op2", "Conv2D", "a2", "b", TFS_DTYPE_FLOAT);
            nn_attrs at = {0}, at2 = {0};
            conv_attrs(&at, &cases[i].c);
            conv_attrs(&at2, &same);
            nn_apply_attrs(g, id, &at);
            nn_apply_attrs(g, id2, &at2);
            tfs_session *s = rt_session(g, NULL);
            tfs_feed feeds[2] = {{"a:0", x}, {"a2:0", x2}};
            const char *fetches[2] = {"op:0", "op2:0"};
            tfs_tensor *out[2] = {NULL};
            tfs_status st;
            ck_assert_msg(rt_run_twice(s, "Conv2D", feeds, 2, fetches, 2, out, &st) == TFS_OK,
                          "%s", st.msg);
            for (int o = 0; o < 2; o++) {
                char what[64];
                snprintf(what, sizeof what, "%s, case %zu, op%s", tfs__gemm_kernel()->name, i,
                         o ? "2" : "");
                nn_assert_close(out[o], 4, odims[o], want[o], mag[o], 1e-5, 1e-6, what);
                tfs_tensor_unref(out[o]);
            }
            tfs_session_free(s);
        }
        for (int o = 0; o < 2; o++) {
            tfs_free(want[o]);
            tfs_free(mag[o]);
        }
        tfs_tensor_unref(x);
        tfs_tensor_unref(x2);
        tfs_tensor_unref(f);
    }
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
    ck_assert_int_ge(tried, 1);
}
END_TEST

/* The direct path reads the filter in place while it stays in L2 between its uses
 * (nn-conv-direct.c): a filter of a quarter of L2 or less always, up to all of L2 when each thread
 * has 32 output rows or more and the stride is 1. A Const's filter over a quarter of L2 is read
 * from a packed copy instead, whatever its size; another larger one takes im2col and the GEMM. */
START_TEST(test_nn_conv2d_direct_choice)
{
    enum { NONE = TFS_NN_DIRECT_NONE, IN_PLACE = TFS_NN_DIRECT_IN_PLACE };
    enum { PACKED = TFS_NN_DIRECT_PACKED };
    tfs_runtime_set_num_threads(2);
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 <= 0)
        l2 = 1L << 20;
    /* 3x3 windows on a 14x14 SAME output; in_c = 64 and out_c chosen for the filter's size */
    tfs_nn_geom g = {.batch = 1, .in_h = 14, .in_w = 14, .in_c = 64, .k_h = 3, .k_w = 3,
                     .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                     .pad_left = 1, .out_h = 14, .out_w = 14};
    int64_t per_out_c = 3 * 3 * 64 * (int64_t)sizeof(float);   /* filter bytes per output channel */
    int64_t small = l2 / 8 / per_out_c, half = l2 / 2 / per_out_c, over = 2 * l2 / per_out_c;
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, small, false), IN_PLACE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, small, true), IN_PLACE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, false), NONE);   /* 7 rows a thread */
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, over, false), NONE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, true), PACKED);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, over, true), PACKED);
    g.batch = 8;                                       /* 112 rows, 56 a thread */
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, small, false), IN_PLACE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, false), IN_PLACE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, over, false), NONE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, true), PACKED);
    /* Strided: in place a quarter of L2 at most, however many rows (28x28 in, 14x14 out) */
    g.in_h = g.in_w = 28;
    g.stride_h = g.stride_w = 2;
    g.pad_top = g.pad_left = 0;
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, small, false), IN_PLACE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, false), NONE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, true), PACKED);
    g.stride_h = 1;   /* 26 output rows an image (VALID), still 2 across */
    g.out_h = 26;
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, small, false), IN_PLACE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&g, half, false), NONE);
    /* Rows shorter than the micro-kernel's MR pixels (ResNet-50's 7x7x512 layers on AVX-512):
     * only from a packed filter over a quarter of L2, with 8 rows a thread or more. */
    int64_t w = tfs__gemm_kernel()->mr - 1;
    tfs_nn_geom s = {.batch = 8, .in_h = w, .in_w = w, .in_c = 512, .k_h = 3, .k_w = 3,
                     .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .pad_top = 1,
                     .pad_left = 1, .out_h = w, .out_w = w};
    int64_t big = l2 / (3 * 3 * 512 * (int64_t)sizeof(float)) + 1;   /* a filter over L2 */
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&s, big, true), PACKED);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&s, big, false), NONE);
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&s, 1, true), NONE);   /* 18 KB, in place */
    s.batch = 16 / w + 1;                                  /* just 8 rows a thread or more */
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&s, big, true), PACKED);
    s.batch = (16 - 1) / w;                                /* fewer than 8 rows a thread */
    if (s.batch >= 1)
        ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&s, big, true), NONE);
    s.batch = 1;
    ck_assert_int_eq(tfs__nn_conv2d_direct_choice(&s, big, true), NONE);
    tfs_runtime_set_num_threads(0);
}
END_TEST

START_TEST(test_nn_conv2d_1x1_and_dtypes)
{
    /* 1x1 with stride 1 (the direct path), 1x1 with stride 2 (patches), and a larger channel
     * count so that the sums have a few hundred terms (5x5x32 filter = 800 terms). */
    int64_t xd[] = {2, 5, 5, 7}, f11[] = {1, 1, 7, 6};
    check_case("Conv2D", xd, f11, &(conv_case){"VALID", {0}, 1, 1, 1, 1}, 7);
    check_case("Conv2D", xd, f11, &(conv_case){"SAME", {0}, 1, 1, 1, 1}, 8);
    check_case("Conv2D", xd, f11, &(conv_case){"SAME", {0}, 2, 2, 1, 1}, 9);
    int64_t xb[] = {1, 7, 7, 32}, f55[] = {5, 5, 32, 8};
    check_case("Conv2D", xb, f55, &(conv_case){"SAME", {0}, 1, 1, 1, 1}, 10);

    /* double: x = [1..4] (2x2x1), filter [[0.5],[0.25]] (2x1): VALID -> [1*.5+3*.25, 2*.5+4*.25]. */
    int64_t dx[] = {1, 2, 2, 1}, dfd[] = {2, 1, 1, 1};
    tfs_tensor *x = rt_tensor(TFS_DTYPE_DOUBLE, 4, dx, (const double[]){1, 2, 3, 4});
    tfs_tensor *f = rt_tensor(TFS_DTYPE_DOUBLE, 4, dfd, (const double[]){0.5, 0.25});
    nn_attrs at = {0};
    conv_attrs(&at, &(conv_case){"VALID", {0}, 1, 1, 1, 1});
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run_op("Conv2D", x, f, true, nn_apply_attrs, &at, &out, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(out->dtype, TFS_DTYPE_DOUBLE);
    ck_assert_int_eq(out->nelem, 2);
    ck_assert_double_eq(((double *)out->data)[0], 1.25);
    ck_assert_double_eq(((double *)out->data)[1], 2.0);
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);

    /* An empty batch gives an empty output of the right shape. */
    int64_t x0[] = {0, 4, 4, 3}, f3[] = {3, 3, 3, 2};
    x = rt_tensor(TFS_DTYPE_FLOAT, 4, x0, NULL);
    f = nn_random_f32(4, f3, 3);
    nn_attrs same = {0};
    conv_attrs(&same, &(conv_case){"SAME", {0}, 1, 1, 1, 1});
    ck_assert_int_eq(rt_run_op("Conv2D", x, f, true, nn_apply_attrs, &same, &out, &st), TFS_OK);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 4, (const int64_t[]){0, 4, 4, 2}));
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
}
END_TEST

static enum tfs_code conv_err(const char *op, const int64_t *xd, const int64_t *fd, nn_attrs *at,
                              tfs_status *st)
{
    tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 4, xd, NULL), *f = rt_tensor(TFS_DTYPE_FLOAT, 4, fd, NULL);
    tfs_tensor *out = NULL;
    enum tfs_code rc = rt_run_op(op, x, f, true, nn_apply_attrs, at, &out, st);
    ck_assert_ptr_null(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    return rc;
}

START_TEST(test_nn_conv2d_errors)
{
    int64_t xd[] = {1, 4, 4, 3}, fd[] = {3, 3, 3, 2}, s1[] = {1, 1, 1, 1};
    tfs_status st;
    nn_attrs none = {0};
    nn_attr_str(&none, "padding", "SAME");
    ck_assert_int_eq(conv_err("Conv2D", xd, fd, &none, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "missing attr 'strides'");
    nn_attrs bad_pad = {0};
    nn_attr_str(&bad_pad, "padding", "FULL");
    nn_attr_ints(&bad_pad, "strides", 4, s1);
    ck_assert_int_eq(conv_err("Conv2D", xd, fd, &bad_pad, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "padding must be SAME, VALID or EXPLICIT");
    /* VALID with a 5x5 window over 4 rows: (4 - 5 + 1) / 1 = 0 is allowed; 7x7: negative. */
    int64_t f7[] = {7, 7, 3, 2}, f5[] = {5, 5, 3, 2};
    nn_attrs valid = {0};
    conv_attrs(&valid, &(conv_case){"VALID", {0}, 1, 1, 1, 1});
    ck_assert_int_eq(conv_err("Conv2D", xd, f7, &valid, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Computed output size would be negative");
    tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 4, xd, NULL), *f = rt_tensor(TFS_DTYPE_FLOAT, 4, f5, NULL);
    tfs_tensor *out = NULL;
    ck_assert_int_eq(rt_run_op("Conv2D", x, f, true, nn_apply_attrs, &valid, &out, &st), TFS_OK);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 4, (const int64_t[]){1, 0, 0, 2}));
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
    /* Depth mismatch, zero-size filter, strides on the batch axis, negative explicit padding,
     * huge dilation, NCHW. */
    int64_t fbad[] = {3, 3, 2, 2}, fzero[] = {3, 0, 3, 2};
    ck_assert_int_eq(conv_err("Conv2D", xd, fbad, &valid, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "evenly divisible by filter depth");
    ck_assert_int_eq(conv_err("Conv2D", xd, fzero, &valid, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "filter must not have zero elements");
    nn_attrs sb = {0};
    nn_attr_str(&sb, "padding", "VALID");
    nn_attr_ints(&sb, "strides", 4, (const int64_t[]){2, 1, 1, 1});
    ck_assert_int_eq(conv_err("Conv2D", xd, fd, &sb, &st), TFS_UNIMPLEMENTED);
    nn_attrs neg = {0};
    conv_attrs(&neg, &(conv_case){"EXPLICIT", {-1, 0, 0, 0}, 1, 1, 1, 1});
    ck_assert_int_eq(conv_err("Conv2D", xd, fd, &neg, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "explicit_paddings[2] = -1 is out of range");
    nn_attrs huge = {0};
    conv_attrs(&huge, &(conv_case){"SAME", {0}, 1, 1, INT64_MAX, 1});
    ck_assert_int_eq(conv_err("Conv2D", xd, fd, &huge, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "dilations[1]");
    nn_attrs nchw = {0};
    conv_attrs(&nchw, &(conv_case){"SAME", {0}, 1, 1, 1, 1});
    nn_attr_str(&nchw, "data_format", "NCHW");
    ck_assert_int_eq(conv_err("Conv2D", xd, fd, &nchw, &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "node 'op' (Conv2D): data_format NCHW");
    /* Depthwise: input and filter depth must agree. */
    ck_assert_int_eq(conv_err("DepthwiseConv2dNative", xd, fbad, &valid, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "same depth");
}
END_TEST

START_TEST(test_nn_depthwise_random)
{
    /* channel multiplier 1 and 2, batch 2, odd and even kernels, strides, dilations, padding. */
    int64_t xd[] = {2, 7, 6, 3};
    int64_t f_m1[] = {3, 3, 3, 1}, f_m2[] = {3, 3, 3, 2}, f_e2[] = {2, 4, 3, 2};
    const conv_case cases[] = {
        {"SAME", {0}, 1, 1, 1, 1}, {"VALID", {0}, 1, 1, 1, 1}, {"SAME", {0}, 2, 2, 1, 1},
        {"SAME", {0}, 1, 2, 2, 1}, {"EXPLICIT", {1, 0, 2, 1}, 2, 1, 1, 1},
    };
    uint32_t seed = 500;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case("DepthwiseConv2dNative", xd, f_m1, &cases[i], seed++);
        check_case("DepthwiseConv2dNative", xd, f_m2, &cases[i], seed++);
        check_case("DepthwiseConv2dNative", xd, f_e2, &cases[i], seed++);
    }
    /* By hand, multiplier 2: one pixel [1, 2] (2 channels), 1x1 filter [[10, 20], [30, 40]]:
     * output channels c*2+m = [1*10, 1*20, 2*30, 2*40]. */
    int64_t x1[] = {1, 1, 1, 2}, f1[] = {1, 1, 2, 2};
    tfs_tensor *x = tfs_test_tensor_f32(4, x1, (const float[]){1, 2});
    tfs_tensor *f = tfs_test_tensor_f32(4, f1, (const float[]){10, 20, 30, 40}), *out = NULL;
    nn_attrs at = {0};
    conv_attrs(&at, &(conv_case){"VALID", {0}, 1, 1, 1, 1});
    tfs_status st;
    ck_assert_msg(rt_run_op("DepthwiseConv2dNative", x, f, true, nn_apply_attrs, &at, &out, &st) == TFS_OK,
                  "%s", st.msg);
    tfs_test_assert_f32(out, 4, (const int64_t[]){1, 1, 1, 4}, (const float[]){10, 20, 60, 80}, 0);
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(f);
}
END_TEST

Suite *suite_runtime_nn_conv(void)
{
    Suite *s = suite_create("runtime_nn_conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_nn_conv2d_hand_same_even_kernel);
    tcase_add_test(tc, test_nn_conv2d_random_geometries);
    tcase_add_test(tc, test_nn_conv2d_direct_path);
    tcase_add_test(tc, test_nn_conv2d_direct_choice);
    tcase_add_test(tc, test_nn_conv2d_direct_packed_filter);
    tcase_add_test(tc, test_nn_conv2d_1x1_and_dtypes);
    tcase_add_test(tc, test_nn_conv2d_errors);
    tcase_add_test(tc, test_nn_depthwise_random);
    suite_add_tcase(s, tc);
    return s;
}
