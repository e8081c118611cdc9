/* Tests of FusedBatchNormGrad/V2/V3 (runtime/kernels/nn-grad-norm.c), and of the forward
 * FusedBatchNormV3's training outputs the gradient relies on (runtime/kernels/nn-norm.c).
 *
 * References are computed here in float64 from the values fed: TensorFlow's formulas, checked in
 * turn against central finite differences of the forward op in float (FusedBatchNorm has no
 * double kernel, in TensorFlow either): L = sum(dy * y(x, scale, offset)) with the batch
 * statistics recomputed on every run in training mode, step 4e-3, tolerance 1e-3 + 1e-3 * |d|
 * (truncation ~h^2 and float rounding of L over the step; the errors seen are ~1e-4); in
 * inference mode L is linear: step 0.25, tolerance 2e-5 + 2e-5 * |d|. Direct comparisons: 2e-5
 * relative to the sum of the magnitudes of the terms, + 2e-6. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/grad-helpers.h"

Suite *suite_runtime_nn_grad_norm(void);

#define F TFS_DTYPE_FLOAT

static void bn_attrs(nn_attrs *at, const char *op, bool training, float eps, const char *fmt)
{
    if (strcmp(op, "FusedBatchNorm") != 0 && strcmp(op, "FusedBatchNormGrad") != 0)
        nn_attr_type(at, "U", F);
    nn_attr_bool(at, "is_training", training);
    nn_attr_float(at, "epsilon", eps);
    if (fmt)
        nn_attr_str(at, "data_format", fmt);
}

/* x (any layout), scale, offset, mean, variance for C channels; variance > 0. */
static void bn_inputs(int rank, const int64_t *xd, int64_t C, uint32_t seed, tfs_tensor *in[5])
{
    int64_t cd[1] = {C};
    in[0] = gh_random(F, rank, xd, seed);
    for (int i = 1; i < 5; i++)
        in[i] = gh_random(F, 1, cd, seed + (uint32_t)i);
    for (int64_t c = 0; c < C; c++) {
        double v = gh_get(in[4], c);
        gh_set(in[4], c, v * v + 0.2);
        gh_set(in[1], c, gh_get(in[1], c) + 1.5);   /* scale away from 0 */
    }
}

/* Channel of element i: the last axis (channels-last) or axis 1 with `inner` elements after. */
static int64_t chan(int64_t i, int64_t C, bool last, int64_t inner)
{
    return last ? i % C : (i / inner) % C;
}

/* TensorFlow's gradient formulas in double from the tensors fed. */
static void ref_grad(const tfs_tensor *dy, const tfs_tensor *x, const tfs_tensor *scale,
                     const tfs_tensor *mean, const tfs_tensor *var, double eps, bool training,
                     bool last, int64_t inner, double *dx, double *dscale, double *doffset,
                     double *mag_c)
{
    int64_t C = scale->nelem, n = x->nelem / C;
    double sum_dy[8] = {0}, sum_dyxc[8] = {0};
    ck_assert(C <= 8);
    for (int64_t c = 0; c < C; c++)
        mag_c[c] = 0;
    for (int64_t i = 0; i < x->nelem; i++) {
        int64_t c = chan(i, C, last, inner);
        double xc = gh_get(x, i) - gh_get(mean, c);
        sum_dy[c] += gh_get(dy, i);
        sum_dyxc[c] += gh_get(dy, i) * xc;
        mag_c[c] += fabs(gh_get(dy, i)) * (1 + fabs(xc));
    }
    for (int64_t c = 0; c < C; c++) {
        double r = 1 / sqrt(gh_get(var, c) + eps);
        dscale[c] = sum_dyxc[c] * r;
        doffset[c] = sum_dy[c];
    }
    for (int64_t i = 0; i < x->nelem; i++) {
        int64_t c = chan(i, C, last, inner);
        double r = 1 / sqrt(gh_get(var, c) + eps), xc = gh_get(x, i) - gh_get(mean, c);
        double d = gh_get(dy, i);
        dx[i] = training ? gh_get(scale, c) * r *
                               (d - sum_dy[c] / n - xc * r * r * sum_dyxc[c] / n)
                         : d * gh_get(scale, c) * r;
    }
}

START_TEST(test_nn_batch_norm_forward_training_v3)
{
    /* V3 training with exponential_avg_factor 0.25: y from the batch mean and biased variance;
     * outputs 1 and 2 blend the running statistics given with the batch's (the variance with
     * Bessel's correction, 12 / 11 here); 3 and 4 hold the batch mean and biased variance (what
     * the gradient gets); 5 is a scalar. */
    int64_t xd[4] = {2, 3, 2, 3}, cd[1] = {3};
    tfs_tensor *in[5], *out[6];
    bn_inputs(4, xd, 3, 300, in);
    nn_attrs at = {0};
    bn_attrs(&at, "FusedBatchNormV3", true, 0.01f, "NHWC");
    nn_attr_float(&at, "exponential_avg_factor", 0.25f);
    gh_run_ok("FusedBatchNormV3", 5, in, F, &at, 6, out, "V3 training");
    double mean[3] = {0}, var[3] = {0}, y[36], m1[3], m2[3];
    for (int i = 0; i < 36; i++)
        mean[i % 3] += gh_get(in[0], i) / 12;
    for (int i = 0; i < 36; i++)
        var[i % 3] += pow(gh_get(in[0], i) - mean[i % 3], 2) / 12;
    for (int i = 0; i < 36; i++) {
        int c = i % 3;
        y[i] = (gh_get(in[0], i) - mean[c]) / sqrt(var[c] + (double)0.01f) * gh_get(in[1], c) +
               gh_get(in[2], c);
    }
    double f = (double)0.25f;
    for (int c = 0; c < 3; c++) {
        m1[c] = (1 - f) * gh_get(in[3], c) + f * mean[c];
        m2[c] = (1 - f) * gh_get(in[4], c) + f * var[c] * 12 / 11;
    }
    gh_assert_close(out[0], F, 4, xd, y, NULL, 1e-5, 1e-5, "V3 training y");
    gh_assert_close(out[1], F, 1, cd, m1, NULL, 1e-6, 1e-7, "V3 running mean");
    gh_assert_close(out[2], F, 1, cd, m2, NULL, 1e-6, 1e-7, "V3 running variance");
    gh_assert_close(out[3], F, 1, cd, mean, NULL, 1e-6, 1e-7, "V3 reserve_space_1");
    gh_assert_close(out[4], F, 1, cd, var, NULL, 1e-6, 1e-7, "V3 reserve_space_2");
    ck_assert_int_eq(out[5]->rank, 0);
    for (int i = 0; i < 6; i++)
        tfs_tensor_unref(out[i]);

    /* The factor needs the running statistics; with the default factor 1 they may be empty. */
    int64_t z[1] = {0};
    tfs_tensor *full_mean = in[3], *full_var = in[4];
    in[3] = rt_tensor(F, 1, z, NULL);
    in[4] = rt_tensor(F, 1, z, NULL);
    gh_assert_fails("FusedBatchNormV3", 5, in, F, &at, 6, TFS_INVALID_ARGUMENT,
                    "mean must have the same number of elements as the channels of x");
    nn_attrs plain = {0};
    bn_attrs(&plain, "FusedBatchNormV3", true, 0.01f, NULL);
    gh_run_ok("FusedBatchNormV3", 5, in, F, &plain, 6, out, "V3 training, empty statistics");
    gh_assert_close(out[1], F, 1, cd, mean, NULL, 1e-6, 1e-7, "V3 batch mean, factor 1");
    double unbiased[3];
    for (int c = 0; c < 3; c++)
        unbiased[c] = var[c] * 12 / 11;
    gh_assert_close(out[2], F, 1, cd, unbiased, NULL, 1e-6, 1e-7, "V3 batch variance, factor 1");
    for (int i = 0; i < 6; i++)
        tfs_tensor_unref(out[i]);
    tfs_tensor_unref(full_mean);
    tfs_tensor_unref(full_var);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(in[i]);
}
END_TEST

/* Runs forward V3 (training or not) on in[], then the gradient op `op` with dy, and compares it
 * with ref_grad; returns the gradient outputs (5). */
static void run_grad(const char *op, tfs_tensor *in[5], tfs_tensor *dy, bool training, float eps,
                     const char *fmt, bool last, int64_t inner, tfs_tensor *gout[5])
{
    char what[96];
    snprintf(what, sizeof what, "%s training=%d %s", op, training, fmt ? fmt : "(default)");
    nn_attrs fa = {0}, ga = {0};
    bn_attrs(&fa, "FusedBatchNormV3", training, eps, fmt);
    bn_attrs(&ga, op, training, eps, fmt);
    tfs_tensor *fo[6];
    gh_run_ok("FusedBatchNormV3", 5, in, F, &fa, 6, fo, what);
    /* Training: the batch statistics in reserve spaces 1/2; inference: the population ones. */
    tfs_tensor *m = training ? fo[3] : in[3], *v = training ? fo[4] : in[4];
    tfs_tensor *gin[6] = {dy, in[0], in[1], m, v, fo[5]};
    int n_in = strcmp(op, "FusedBatchNormGradV3") ? 5 : 6;
    gh_run_ok(op, n_in, gin, F, &ga, 5, gout, what);
    int64_t C = in[1]->nelem, cd[1] = {C}, z[1] = {0};
    double *dx = tfs_calloc((size_t)in[0]->nelem, sizeof *dx), ds[8], doff[8], mag[8];
    ck_assert(dx);
    ref_grad(dy, in[0], in[1], m, v, (double)eps, training, last, inner, dx, ds, doff, mag);
    double *mag_x = tfs_calloc((size_t)in[0]->nelem, sizeof *mag_x);
    ck_assert(mag_x);
    for (int64_t i = 0; i < in[0]->nelem; i++)
        mag_x[i] = fabs(dx[i]) + 1e-3 * mag[chan(i, C, last, inner)];
    gh_assert_close(gout[0], F, in[0]->rank, in[0]->dims, dx, mag_x, 2e-5, 2e-6, what);
    gh_assert_close(gout[1], F, 1, cd, ds, mag, 2e-5, 2e-6, what);
    gh_assert_close(gout[2], F, 1, cd, doff, mag, 2e-5, 2e-6, what);
    gh_assert_close(gout[3], F, 1, z, NULL, NULL, 0, 0, "reserve_space_3/4: [0]");
    gh_assert_close(gout[4], F, 1, z, NULL, NULL, 0, 0, "reserve_space_4/5: [0]");
    tfs_free(dx);
    tfs_free(mag_x);
    for (int i = 0; i < 6; i++)
        tfs_tensor_unref(fo[i]);
}

/* d/d(in[wrt]) of sum(dy * y) through forward V3, against gradient output g. */
static void check_fd(tfs_tensor *in[5], tfs_tensor *dy, bool training, float eps, int wrt,
                     const tfs_tensor *g, const char *what)
{
    nn_attrs fa = {0};
    bn_attrs(&fa, "FusedBatchNormV3", training, eps, NULL);
    gh_op o;
    gh_open(&o, "FusedBatchNormV3", 5, in, F, &fa, 6);
    double *d = gh_fd(&o, in, wrt, 0, dy, training ? 4e-3 : 0.25);
    gh_close(&o);
    double tol = training ? 1e-3 : 2e-5;
    gh_assert_close(g, F, in[wrt]->rank, in[wrt]->dims, d, NULL, tol, tol, what);
    tfs_free(d);
}

START_TEST(test_nn_batch_norm_grad_training)
{
    /* NHWC x [2,3,4,3]: 24 values per channel. */
    int64_t xd[4] = {2, 3, 4, 3};
    tfs_tensor *in[5], *g[5], *g1[5], *g2[5];
    bn_inputs(4, xd, 3, 400, in);
    tfs_tensor *dy = gh_random(F, 4, xd, 410);
    run_grad("FusedBatchNormGradV3", in, dy, true, 0.001f, "NHWC", true, 1, g);
    check_fd(in, dy, true, 0.001f, 0, g[0], "x_backprop vs finite differences (training)");
    check_fd(in, dy, true, 0.001f, 1, g[1], "scale_backprop vs finite differences (training)");
    check_fd(in, dy, true, 0.001f, 2, g[2], "offset_backprop vs finite differences (training)");
    /* V1 and V2 (five inputs, no U attr on V1) compute the same, defaults for data_format. */
    run_grad("FusedBatchNormGrad", in, dy, true, 0.001f, NULL, true, 1, g1);
    run_grad("FusedBatchNormGradV2", in, dy, true, 0.001f, NULL, true, 1, g2);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < g[k]->nelem; i++) {
            ck_assert_float_eq(gh_get(g1[k], i), gh_get(g[k], i));
            ck_assert_float_eq(gh_get(g2[k], i), gh_get(g[k], i));
        }
    for (int i = 0; i < 5; i++) {
        tfs_tensor_unref(g[i]);
        tfs_tensor_unref(g1[i]);
        tfs_tensor_unref(g2[i]);
    }

    /* NCHW: the same data transposed to [2,3,3,4] (channel axis 1, 12 values after it). */
    int64_t xc[4] = {2, 3, 3, 4};
    tfs_tensor *xn = rt_tensor(F, 4, xc, NULL), *dyn = rt_tensor(F, 4, xc, NULL);
    for (int64_t b = 0; b < 2; b++)
        for (int64_t h = 0; h < 3; h++)
            for (int64_t w = 0; w < 4; w++)
                for (int64_t c = 0; c < 3; c++) {
                    int64_t s = ((b * 3 + h) * 4 + w) * 3 + c, t = ((b * 3 + c) * 3 + h) * 4 + w;
                    gh_set(xn, t, gh_get(in[0], s));
                    gh_set(dyn, t, gh_get(dy, s));
                }
    tfs_tensor *x_nhwc = in[0];
    in[0] = xn;
    run_grad("FusedBatchNormGradV3", in, dyn, true, 0.001f, "NCHW", false, 12, g);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(g[i]);
    in[0] = x_nhwc;
    tfs_tensor_unref(xn);
    tfs_tensor_unref(dyn);
    tfs_tensor_unref(dy);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(in[i]);

    /* 5-D NDHWC [2,2,3,2,2]: 24 values per channel. */
    int64_t x5[5] = {2, 2, 3, 2, 2};
    bn_inputs(5, x5, 2, 450, in);
    dy = gh_random(F, 5, x5, 460);
    run_grad("FusedBatchNormGradV3", in, dy, true, 0.001f, "NDHWC", true, 1, g);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(g[i]);
    tfs_tensor_unref(dy);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(in[i]);
}
END_TEST

START_TEST(test_nn_batch_norm_grad_inference)
{
    /* is_training = false: reserve spaces carry the population mean and variance. */
    int64_t xd[4] = {3, 2, 3, 4};
    tfs_tensor *in[5], *g[5];
    bn_inputs(4, xd, 4, 500, in);
    tfs_tensor *dy = gh_random(F, 4, xd, 510);
    run_grad("FusedBatchNormGradV3", in, dy, false, 0.01f, NULL, true, 1, g);
    check_fd(in, dy, false, 0.01f, 0, g[0], "x_backprop vs finite differences (inference)");
    check_fd(in, dy, false, 0.01f, 1, g[1], "scale_backprop vs finite differences (inference)");
    check_fd(in, dy, false, 0.01f, 2, g[2], "offset_backprop vs finite differences (inference)");
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(g[i]);
    /* TensorFlow's CPU kernel takes NHWC only in inference mode. */
    nn_attrs ga = {0};
    bn_attrs(&ga, "FusedBatchNormGradV2", false, 0.01f, "NCHW");
    gh_assert_fails("FusedBatchNormGradV2", 5, (tfs_tensor *[]){dy, in[0], in[1], in[3], in[4]},
                    F, &ga, 5, TFS_INVALID_ARGUMENT, "is_training=False only support NHWC");
    tfs_tensor_unref(dy);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(in[i]);
}
END_TEST

START_TEST(test_nn_batch_norm_grad_empty_and_errors)
{
    int64_t xe[4] = {0, 2, 2, 3}, cd[1] = {3}, z[1] = {0};
    tfs_tensor *in[5], *g[5];
    bn_inputs(4, xe, 3, 600, in);
    nn_attrs ga = {0};
    bn_attrs(&ga, "FusedBatchNormGradV2", true, 0.001f, NULL);
    tfs_tensor *gin[5] = {in[0], in[0], in[1], in[3], in[4]};
    gh_run_ok("FusedBatchNormGradV2", 5, gin, F, &ga, 5, g, "empty x");
    gh_assert_close(g[0], F, 4, xe, NULL, NULL, 0, 0, "empty x_backprop");
    gh_assert_close(g[1], F, 1, cd, (const double[]){0, 0, 0}, NULL, 0, 0, "empty: scale 0");
    gh_assert_close(g[2], F, 1, cd, (const double[]){0, 0, 0}, NULL, 0, 0, "empty: offset 0");
    gh_assert_close(g[3], F, 1, z, NULL, NULL, 0, 0, "empty: [0]");
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(g[i]);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(in[i]);

    int64_t xd[4] = {2, 2, 2, 3}, x2[4] = {2, 2, 3, 2}, c2[1] = {2};
    bn_inputs(4, xd, 3, 610, in);
    tfs_tensor *dy = gh_random(F, 4, xd, 620), *dy2 = gh_random(F, 4, x2, 621);
    tfs_tensor *two = gh_random(F, 1, c2, 622), *r3 = gh_random(F, 3, xd, 623);
    const char *G3 = "FusedBatchNormGradV3";
    nn_attrs g3 = {0};
    bn_attrs(&g3, G3, true, 0.001f, NULL);
    tfs_tensor *rs3 = rt_tensor(F, 0, NULL, NULL);
    gh_assert_fails(G3, 6, (tfs_tensor *[]){dy2, in[0], in[1], in[3], in[4], rs3}, F, &g3, 5,
                    TFS_INVALID_ARGUMENT, "x and y_backprop must have same shape");
    gh_assert_fails(G3, 6, (tfs_tensor *[]){dy, in[0], two, in[3], in[4], rs3}, F, &g3, 5,
                    TFS_INVALID_ARGUMENT,
                    "scale must have the same number of elements as the channels of x, got 2 "
                    "and 3");
    gh_assert_fails(G3, 6, (tfs_tensor *[]){dy, in[0], in[1], two, in[4], rs3}, F, &g3, 5,
                    TFS_INVALID_ARGUMENT, "reserve_space_1 must have the same number of elements");
    gh_assert_fails(G3, 6, (tfs_tensor *[]){r3, r3, in[1], in[3], in[4], rs3}, F, &g3, 5,
                    TFS_INVALID_ARGUMENT, "must be 4 or 5-dimensional");
    gh_assert_fails(G3, 6, (tfs_tensor *[]){dy, in[0], dy, in[3], in[4], rs3}, F, &g3, 5,
                    TFS_INVALID_ARGUMENT, "scale must be 1-dimensional");
    nn_attrs badf = {0};
    bn_attrs(&badf, G3, true, 0.001f, "HWCN");
    gh_assert_fails(G3, 6, (tfs_tensor *[]){dy, in[0], in[1], in[3], in[4], rs3}, F, &badf, 5,
                    TFS_INVALID_ARGUMENT, "Invalid data format 'HWCN'");
    tfs_tensor *xd64 = gh_convert(in[0], TFS_DTYPE_DOUBLE);
    gh_assert_fails(G3, 6, (tfs_tensor *[]){dy, xd64, in[1], in[3], in[4], rs3}, F, &g3, 5,
                    TFS_UNIMPLEMENTED, "input 1 has dtype double; only float is supported");
    tfs_tensor *all[] = {dy, dy2, two, r3, rs3, xd64};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tfs_tensor_unref(all[i]);
    for (int i = 0; i < 5; i++)
        tfs_tensor_unref(in[i]);
}
END_TEST

Suite *suite_runtime_nn_grad_norm(void)
{
    Suite *s = suite_create("runtime_nn_grad_norm");
    TCase *tc = tcase_create("grad_norm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nn_batch_norm_forward_training_v3);
    tcase_add_test(tc, test_nn_batch_norm_grad_training);
    tcase_add_test(tc, test_nn_batch_norm_grad_inference);
    tcase_add_test(tc, test_nn_batch_norm_grad_empty_and_errors);
    suite_add_tcase(s, tc);
    return s;
}
