/* Tests of SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits and L2Loss
 * (runtime/kernels/nn-loss.c) through one-op graphs.
 *
 * The float64 reference uses the log-sum-exp form: lse = m + log(sum_j e^(x_j - m)),
 * loss = sum_j labels_j * (lse - x_j), backprop_j = e^(x_j - lse) - labels_j. Tolerance: loss
 * 1e-6 (float) / 1e-13 (double) relative to sum_j |labels_j| * (|lse| + |x_j|) + 1, backprop 1e-6
 * / 1e-14 absolute. In double the backprop output is also compared with central finite
 * differences of the op's own loss output (L = sum_b w_b * loss_b, so dL/dx[b,j] =
 * w_b * backprop[b,j] for labels summing to 1), step 1e-5, tolerance 1e-8. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/grad-helpers.h"

Suite *suite_runtime_nn_grad_loss(void);

#define XENT "SoftmaxCrossEntropyWithLogits"
#define SPARSE "SparseSoftmaxCrossEntropyWithLogits"

/* Reference for a [B, K] problem; label(b, j) gives the (dense) label. */
typedef double (*label_fn)(const void *arg, int64_t b, int64_t j);

static void ref_xent(const tfs_tensor *x, int64_t B, int64_t K, int64_t x_row, int64_t x_col,
                     label_fn label, const void *arg, double *loss, double *lmag, double *bp)
{
    for (int64_t b = 0; b < B; b++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < K; j++)
            m = fmax(m, gh_get(x, b * x_row + j * x_col));
        for (int64_t j = 0; j < K; j++)
            s += exp(gh_get(x, b * x_row + j * x_col) - m);
        double lse = m + log(s);
        loss[b] = 0;
        lmag[b] = 1;
        for (int64_t j = 0; j < K; j++) {
            double xj = gh_get(x, b * x_row + j * x_col), l = label(arg, b, j);
            loss[b] += l * (lse - xj);
            lmag[b] += fabs(l) * (fabs(lse) + fabs(xj));
            bp[b * K + j] = exp(xj - lse) - l;
        }
    }
}

typedef struct dense_labels {
    const tfs_tensor *t;
    int64_t           row, col;   /* strides (0: broadcast) */
} dense_labels;

static double dense_label(const void *arg, int64_t b, int64_t j)
{
    const dense_labels *d = arg;
    return gh_get(d->t, b * d->row + j * d->col);
}

static double sparse_label(const void *arg, int64_t b, int64_t j)
{
    return gh_get(arg, b) == (double)j;
}

/* Random probability rows (each sums to 1). */
static tfs_tensor *prob_rows(enum tfs_dtype dt, int rank, const int64_t *dims, uint32_t seed)
{
    tfs_tensor *t = gh_random(dt, rank, dims, seed);
    int64_t K = dims[rank - 1], rows = K ? t->nelem / K : 0;
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t j = 0; j < K; j++)
            s += fabs(gh_get(t, r * K + j)) + 0.05;
        for (int64_t j = 0; j < K; j++)
            gh_set(t, r * K + j, (fabs(gh_get(t, r * K + j)) + 0.05) / s);
    }
    return t;
}

static void check_outputs(tfs_tensor *out[2], enum tfs_dtype dt, int64_t B, int64_t K,
                          const double *loss, const double *lmag, const double *bp,
                          const char *what)
{
    bool f32 = dt == TFS_DTYPE_FLOAT;
    int64_t bd[1] = {B}, bk[2] = {B, K};
    char w[160];
    snprintf(w, sizeof w, "%s: loss", what);
    gh_assert_close(out[0], dt, 1, bd, loss, lmag, f32 ? 1e-6 : 1e-13, 0, w);
    snprintf(w, sizeof w, "%s: backprop", what);
    gh_assert_close(out[1], dt, 2, bk, bp, NULL, 0, f32 ? 1e-6 : 1e-14, w);
}

/* Finite differences of the op's loss output with respect to the logits (double). */
static void check_fd(const char *op, tfs_tensor *in[2], const tfs_tensor *bp, const char *what)
{
    int64_t B = bp->dims[0], K = bp->dims[1], bd[1] = {B};
    tfs_tensor *w = gh_random(TFS_DTYPE_DOUBLE, 1, bd, 77);
    nn_attrs at = {0};
    if (!strcmp(op, SPARSE))
        nn_attr_type(&at, "Tlabels", in[1]->dtype);
    gh_op o;
    gh_open(&o, op, 2, in, TFS_DTYPE_DOUBLE, &at, 2);
    double *d = gh_fd(&o, in, 0, 0, w, 1e-5);
    gh_close(&o);
    double *want = tfs_calloc((size_t)(B * K), sizeof *want);
    ck_assert(want);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < K; j++)
            want[b * K + j] = gh_get(w, b) * gh_get(bp, b * K + j);
    char wh[160];
    snprintf(wh, sizeof wh, "%s: w * backprop vs finite differences of the loss", what);
    int64_t dims[2] = {B, K};
    tfs_tensor *wb = gh_from(TFS_DTYPE_DOUBLE, 2, dims, want);
    gh_assert_close(wb, TFS_DTYPE_DOUBLE, 2, dims, d, NULL, 0, 1e-8, wh);
    tfs_tensor_unref(wb);
    tfs_free(want);
    tfs_free(d);
    tfs_tensor_unref(w);
}

START_TEST(test_nn_softmax_xent)
{
    enum tfs_dtype dts[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_DOUBLE};
    for (int k = 0; k < 2; k++) {
        enum tfs_dtype dt = dts[k];
        int64_t d[2] = {4, 5};
        tfs_tensor *x = gh_random(dt, 2, d, 800 + (uint32_t)k), *out[2];
        for (int64_t i = 0; i < x->nelem; i++)
            gh_set(x, i, 3 * gh_get(x, i));
        /* Row 3: logits far apart; e^x would overflow without the max subtracted. */
        const double big[5] = {1000, 0, -1000, 500, 20};
        for (int j = 0; j < 5; j++)
            gh_set(x, 15 + j, big[j]);
        tfs_tensor *l = prob_rows(dt, 2, d, 810 + (uint32_t)k);
        tfs_tensor *in[2] = {x, l};
        gh_run_ok(XENT, 2, in, dt, NULL, 2, out, "xent");
        double loss[4], lmag[4], bp[20];
        dense_labels dl = {l, 5, 1};
        ref_xent(x, 4, 5, 5, 1, dense_label, &dl, loss, lmag, bp);
        check_outputs(out, dt, 4, 5, loss, lmag, bp, dt == TFS_DTYPE_FLOAT ? "xent float" :
                                                                             "xent double");
        ck_assert(isfinite(gh_get(out[0], 3)));
        if (dt == TFS_DTYPE_DOUBLE) {
            /* differences need moderate logits: row 3 back to small values */
            for (int j = 0; j < 5; j++)
                gh_set(x, 15 + j, big[j] / 1000);
            tfs_tensor *o2[2];
            gh_run_ok(XENT, 2, in, dt, NULL, 2, o2, "xent fd");
            check_fd(XENT, in, o2[1], "xent");
            tfs_tensor_unref(o2[0]);
            tfs_tensor_unref(o2[1]);
        }
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);

        /* Broadcasting: one [5] label row for every example; one [1,5] logit row for 3 label
         * rows. */
        int64_t d5[1] = {5}, d15[2] = {1, 5}, d35[2] = {3, 5};
        tfs_tensor *l5 = prob_rows(dt, 1, d5, 820);
        in[1] = l5;
        gh_run_ok(XENT, 2, in, dt, NULL, 2, out, "xent labels [5]");
        dense_labels dl5 = {l5, 0, 1};
        ref_xent(x, 4, 5, 5, 1, dense_label, &dl5, loss, lmag, bp);
        check_outputs(out, dt, 4, 5, loss, lmag, bp, "xent labels broadcast");
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);
        tfs_tensor *x1 = gh_random(dt, 2, d15, 830), *l3 = prob_rows(dt, 2, d35, 831);
        gh_run_ok(XENT, 2, (tfs_tensor *[]){x1, l3}, dt, NULL, 2, out, "xent logits [1,5]");
        dense_labels dl3 = {l3, 5, 1};
        ref_xent(x1, 3, 5, 0, 1, dense_label, &dl3, loss, lmag, bp);
        check_outputs(out, dt, 3, 5, loss, lmag, bp, "xent logits broadcast");
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);
        tfs_tensor_unref(x1);
        tfs_tensor_unref(l3);
        tfs_tensor_unref(l5);
        tfs_tensor_unref(x);
        tfs_tensor_unref(l);
    }
}
END_TEST

START_TEST(test_nn_sparse_softmax_xent)
{
    enum tfs_dtype dts[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_DOUBLE};
    enum tfs_dtype lts[2] = {TFS_DTYPE_INT32, TFS_DTYPE_INT64};
    for (int k = 0; k < 4; k++) {
        enum tfs_dtype dt = dts[k / 2], lt = lts[k % 2];
        int64_t d[2] = {5, 4}, b5[1] = {5};
        tfs_tensor *x = gh_random(dt, 2, d, 900 + (uint32_t)k), *out[2];
        for (int64_t i = 0; i < x->nelem; i++)
            gh_set(x, i, 4 * gh_get(x, i));
        gh_set(x, 0, 800);   /* row 0: a huge logit, label elsewhere */
        tfs_tensor *l = gh_from(lt, 1, b5, (const double[]){2, 0, 3, 3, 1});
        nn_attrs at = {0};
        nn_attr_type(&at, "Tlabels", lt);
        tfs_tensor *in[2] = {x, l};
        char what[64];
        snprintf(what, sizeof what, "sparse xent %s/%s", tfs_dtype_short_name(dt),
                 tfs_dtype_short_name(lt));
        gh_run_ok(SPARSE, 2, in, dt, &at, 2, out, what);
        double loss[5], lmag[5], bp[20];
        ref_xent(x, 5, 4, 4, 1, sparse_label, l, loss, lmag, bp);
        check_outputs(out, dt, 5, 4, loss, lmag, bp, what);
        ck_assert(isfinite(gh_get(out[0], 0)));
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);
        if (dt == TFS_DTYPE_DOUBLE) {
            gh_set(x, 0, 0.8);
            gh_run_ok(SPARSE, 2, in, dt, &at, 2, out, what);
            check_fd(SPARSE, in, out[1], what);
            tfs_tensor_unref(out[0]);
            tfs_tensor_unref(out[1]);
        }
        tfs_tensor_unref(x);
        tfs_tensor_unref(l);
    }
}
END_TEST

START_TEST(test_nn_xent_empty_and_errors)
{
    tfs_tensor *out[2];
    /* Batch 0, and (dense) 0 classes: the loss of no classes is 0. */
    int64_t e[2] = {0, 5}, e0[1] = {0}, c0[2] = {3, 0}, b3[1] = {3};
    tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 2, e, NULL);
    tfs_tensor *l = rt_tensor(TFS_DTYPE_FLOAT, 2, e, NULL);
    gh_run_ok(XENT, 2, (tfs_tensor *[]){x, l}, TFS_DTYPE_FLOAT, NULL, 2, out, "xent batch 0");
    check_outputs(out, TFS_DTYPE_FLOAT, 0, 5, NULL, NULL, NULL, "xent batch 0");
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    tfs_tensor *li = rt_tensor(TFS_DTYPE_INT64, 1, e0, NULL);
    gh_run_ok(SPARSE, 2, (tfs_tensor *[]){x, li}, TFS_DTYPE_FLOAT, NULL, 2, out, "sparse batch 0");
    check_outputs(out, TFS_DTYPE_FLOAT, 0, 5, NULL, NULL, NULL, "sparse batch 0");
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    tfs_tensor_unref(x);
    tfs_tensor_unref(l);
    tfs_tensor_unref(li);
    x = rt_tensor(TFS_DTYPE_DOUBLE, 2, c0, NULL);
    l = rt_tensor(TFS_DTYPE_DOUBLE, 2, c0, NULL);
    gh_run_ok(XENT, 2, (tfs_tensor *[]){x, l}, TFS_DTYPE_DOUBLE, NULL, 2, out, "xent 0 classes");
    check_outputs(out, TFS_DTYPE_DOUBLE, 3, 0, (const double[]){0, 0, 0},
                  (const double[]){1, 1, 1}, NULL, "xent 0 classes");
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    li = rt_tensor(TFS_DTYPE_INT32, 1, b3, NULL);
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, li}, TFS_DTYPE_DOUBLE, NULL, 2,
                    TFS_INVALID_ARGUMENT, "Must have at least one class");
    tfs_tensor_unref(x);
    tfs_tensor_unref(l);
    tfs_tensor_unref(li);

    int64_t d45[2] = {4, 5}, d46[2] = {4, 6}, d3[3] = {2, 2, 5}, d5[1] = {5}, b4[1] = {4};
    x = gh_random(TFS_DTYPE_FLOAT, 2, d45, 1);
    tfs_tensor *l46 = gh_random(TFS_DTYPE_FLOAT, 2, d46, 2);
    tfs_tensor *x3 = gh_random(TFS_DTYPE_FLOAT, 3, d3, 3);
    tfs_tensor *v5 = gh_random(TFS_DTYPE_FLOAT, 1, d5, 4);
    gh_assert_fails(XENT, 2, (tfs_tensor *[]){x, l46}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "logits and labels must be broadcastable: "
                                          "logits_size=[4,5] labels_size=[4,6]");
    gh_assert_fails(XENT, 2, (tfs_tensor *[]){x3, x3}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "must be either 2-dimensional, or broadcasted");
    gh_assert_fails(XENT, 2, (tfs_tensor *[]){v5, v5}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "must be either 2-dimensional, or broadcasted");
    tfs_tensor *xi = rt_tensor(TFS_DTYPE_INT32, 2, d45, NULL);
    gh_assert_fails(XENT, 2, (tfs_tensor *[]){xi, xi}, TFS_DTYPE_INT32, NULL, 2,
                    TFS_UNIMPLEMENTED, "not supported for dtype int32");

    /* Sparse: a label out of [0, classes) is named with its position. */
    tfs_tensor *lab = gh_from(TFS_DTYPE_INT32, 1, b4, (const double[]){0, 4, 5, 1});
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, lab}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT,
                    "Received a label value of 5 which is outside the valid range of [0, 5) "
                    "(labels[2])");
    gh_set(lab, 2, -1);
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, lab}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "label value of -1");
    tfs_tensor *lab2 = rt_tensor(TFS_DTYPE_INT32, 2, (const int64_t[]){4, 1}, NULL);
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, lab2}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "labels must be 1-D, but got shape [4,1]");
    tfs_tensor *lab5 = rt_tensor(TFS_DTYPE_INT32, 1, d5, NULL);
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, lab5}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "logits and labels must have the same first dimension");
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x3, lab}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "logits must be 2-D, but got shape [2,2,5]");
    tfs_tensor *labf = rt_tensor(TFS_DTYPE_FLOAT, 1, b4, NULL);
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, labf}, TFS_DTYPE_FLOAT, NULL, 2,
                    TFS_INVALID_ARGUMENT, "labels must be int32 or int64, got float");
    nn_attrs t64 = {0};
    nn_attr_type(&t64, "Tlabels", TFS_DTYPE_INT64);
    gh_set(lab, 2, 2);
    gh_assert_fails(SPARSE, 2, (tfs_tensor *[]){x, lab}, TFS_DTYPE_FLOAT, &t64, 2,
                    TFS_INVALID_ARGUMENT, "labels have dtype int32, but attr Tlabels is int64");
    tfs_tensor *all[] = {x, l46, x3, v5, xi, lab, lab2, lab5, labf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tfs_tensor_unref(all[i]);
}
END_TEST

START_TEST(test_nn_l2_loss)
{
    int64_t d[2] = {3, 4}, e[2] = {0, 4};
    enum tfs_dtype dts[2] = {TFS_DTYPE_FLOAT, TFS_DTYPE_DOUBLE};
    for (int k = 0; k < 2; k++) {
        tfs_tensor *t = gh_random(dts[k], 2, d, 950 + (uint32_t)k), *out;
        gh_run_ok("L2Loss", 1, &t, dts[k], NULL, 1, &out, "L2Loss");
        double s = 0;
        for (int64_t i = 0; i < t->nelem; i++)
            s += gh_get(t, i) * gh_get(t, i);
        double want = s / 2;
        gh_assert_close(out, dts[k], 0, NULL, &want, NULL, k ? 1e-15 : 1e-7, 0, "L2Loss");
        tfs_tensor_unref(out);
        tfs_tensor_unref(t);
        /* Empty: the sum of nothing. */
        t = rt_tensor(dts[k], 2, e, NULL);
        gh_run_ok("L2Loss", 1, &t, dts[k], NULL, 1, &out, "L2Loss empty");
        double zero = 0;
        gh_assert_close(out, dts[k], 0, NULL, &zero, NULL, 0, 0, "L2Loss empty");
        tfs_tensor_unref(out);
        tfs_tensor_unref(t);
    }
    /* Hand: [3, 4] -> (9 + 16) / 2. */
    int64_t d2[1] = {2};
    tfs_tensor *t = gh_from(TFS_DTYPE_FLOAT, 1, d2, (const double[]){3, 4}), *out;
    gh_run_ok("L2Loss", 1, &t, TFS_DTYPE_FLOAT, NULL, 1, &out, "L2Loss hand");
    ck_assert_float_eq(gh_get(out, 0), 12.5);
    tfs_tensor_unref(out);
    tfs_tensor_unref(t);
    t = rt_tensor(TFS_DTYPE_INT32, 1, d2, NULL);
    gh_assert_fails("L2Loss", 1, &t, TFS_DTYPE_INT32, NULL, 1, TFS_UNIMPLEMENTED,
                    "L2Loss is not supported for dtype int32");
    tfs_tensor_unref(t);
}
END_TEST

Suite *suite_runtime_nn_grad_loss(void)
{
    Suite *s = suite_create("runtime_nn_grad_loss");
    TCase *tc = tcase_create("grad_loss");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nn_softmax_xent);
    tcase_add_test(tc, test_nn_sparse_softmax_xent);
    tcase_add_test(tc, test_nn_xent_empty_and_errors);
    tcase_add_test(tc, test_nn_l2_loss);
    suite_add_tcase(s, tc);
    return s;
}
