/* Tests of MatMul and BatchMatMul/V2/V3 (runtime/kernels/nn-matmul.c), each run through a one-op
 * graph. References are float64 loops written here. Tolerance for float results:
 * |got - ref| <= 1e-5 * sum_k |a_ik * b_kj| (+1e-6): sgemm's rounding on sums of up to a few
 * hundred terms stays far below that; integer and small exact cases are compared exactly. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime-impl.h"
#include "tests/runtime/nn-helpers.h"

Suite *suite_runtime_nn_matmul(void);

/* Reference C = op(A) op(B) in double, plus the magnitudes sum |a*b|. A is [ra, ca] row-major. */
static void ref_matmul(const float *A, int64_t ra, int64_t ca, bool ta, const float *B, int64_t rb,
                       int64_t cb, bool tb, double *C, double *mag)
{
    int64_t m = ta ? ca : ra, k = ta ? ra : ca, n = tb ? rb : cb;
    (void)rb;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0, g = 0;
            for (int64_t p = 0; p < k; p++) {
                double a = ta ? A[p * ca + i] : A[i * ca + p];
                double b = tb ? B[j * cb + p] : B[p * cb + j];
                s += a * b;
                g += fabs(a * b);
            }
            C[i * n + j] = s;
            mag[i * n + j] = g;
        }
}

static enum tfs_code run2(const char *op, tfs_tensor *a, tfs_tensor *b, nn_attrs *at,
                          bool T_attr, tfs_tensor **out, tfs_status *st)
{
    enum tfs_code rc = rt_run_op(op, a, b, T_attr, nn_apply_attrs, at, out, st);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    return rc;
}

START_TEST(test_nn_matmul_hand)
{
    /* [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]]. */
    int64_t d23[] = {2, 3}, d32[] = {3, 2}, d22[] = {2, 2};
    nn_attrs at = {0};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(run2("MatMul", tfs_test_tensor_f32(2, d23, (const float[]){1, 2, 3, 4, 5, 6}),
                          tfs_test_tensor_f32(2, d32, (const float[]){7, 8, 9, 10, 11, 12}), &at,
                          true, &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 2, d22, (const float[]){58, 64, 139, 154}, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_nn_matmul_transposes_random)
{
    /* m=7, k=300, n=5 in all four transpose combinations; operands stored transposed as needed. */
    const int64_t m = 7, k = 300, n = 5;
    for (int c = 0; c < 4; c++) {
        bool ta = c & 1, tb = c & 2;
        int64_t da[2] = {ta ? k : m, ta ? m : k}, db[2] = {tb ? n : k, tb ? k : n};
        tfs_tensor *a = nn_random_f32(2, da, 11u + (uint32_t)c), *b = nn_random_f32(2, db, 23u + (uint32_t)c);
        double want[35], mag[35];
        ref_matmul(a->data, da[0], da[1], ta, b->data, db[0], db[1], tb, want, mag);
        nn_attrs at = {0};
        nn_attr_bool(&at, "transpose_a", ta);
        nn_attr_bool(&at, "transpose_b", tb);
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_msg(run2("MatMul", a, b, &at, true, &out, &st) == TFS_OK, "%s", st.msg);
        int64_t dout[2] = {m, n};
        char what[64];
        snprintf(what, sizeof what, "transpose_a=%d transpose_b=%d", ta, tb);
        nn_assert_close(out, 2, dout, want, mag, 1e-5, 1e-6, what);
        tfs_tensor_unref(out);
    }
}
END_TEST

/* float A x B^T with 32..128 rows and at least 4x as many columns runs as C^T = B x A^T and a
 * transposition: the bytes must be those of the direct tfs__sgemm call, and the values the
 * float64 reference's. Shapes at the bounds of that path, with edges off the 32x32 blocks of the
 * transposition, and one just outside it (m 31, direct). */
START_TEST(test_nn_matmul_transposed_path)
{
    const int64_t shapes[][3] = {{32, 128, 70}, {33, 133, 300}, {64, 3136, 64}, {128, 517, 31},
                                 {31, 200, 50}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int64_t m = shapes[c][0], n = shapes[c][1], k = shapes[c][2];
        int64_t da[2] = {m, k}, db[2] = {n, k}, dout[2] = {m, n};
        tfs_tensor *a = nn_random_f32(2, da, 40u + (uint32_t)c);
        tfs_tensor *b = nn_random_f32(2, db, 50u + (uint32_t)c);
        double *want = tfs_malloc(sizeof(double) * (size_t)(m * n));
        double *mag = tfs_malloc(sizeof(double) * (size_t)(m * n));
        float *direct = tfs_malloc(sizeof(float) * (size_t)(m * n));
        ck_assert(want && mag && direct);
        ref_matmul(a->data, m, k, false, b->data, n, k, true, want, mag);
        tfs__sgemm(false, true, m, n, k, 1.0f, a->data, k, b->data, k, 0.0f, direct, n);
        nn_attrs at = {0};
        nn_attr_bool(&at, "transpose_b", true);
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_msg(run2("MatMul", a, b, &at, true, &out, &st) == TFS_OK, "%s", st.msg);
        char what[80];
        snprintf(what, sizeof what, "A[%lld,%lld] x B[%lld,%lld]^T", (long long)m, (long long)k,
                 (long long)n, (long long)k);
        nn_assert_close(out, 2, dout, want, mag, 1e-5, 1e-6, what);
        ck_assert_msg(memcmp(out->data, direct, (size_t)(m * n) * sizeof(float)) == 0,
                      "%s: bytes differ from the direct tfs__sgemm", what);
        tfs_tensor_unref(out);
        tfs_free(want);
        tfs_free(mag);
        tfs_free(direct);
    }
}
END_TEST

START_TEST(test_nn_matmul_double_and_int)
{
    /* double: 0.1 * 3 + 0.2 * 0.5 in double precision; transpose_b. */
    int64_t d12[] = {1, 2}, d2[] = {1, 2}, d11[] = {1, 1};
    nn_attrs at = {0};
    nn_attr_bool(&at, "transpose_b", true);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(run2("MatMul", rt_tensor(TFS_DTYPE_DOUBLE, 2, d12, (const double[]){0.1, 0.2}),
                          rt_tensor(TFS_DTYPE_DOUBLE, 2, d2, (const double[]){3, 0.5}), &at, true,
                          &out, &st), TFS_OK);
    ck_assert_int_eq(out->dtype, TFS_DTYPE_DOUBLE);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 2, d11));
    ck_assert_double_eq_tol(((double *)out->data)[0], 0.4, 1e-15);
    tfs_tensor_unref(out);

    /* int32, transpose_a: A^T = [[1,-2],[3,4]] (A stored [[1,3],[-2,4]]), B = [[5,6],[7,8]]:
     * [[1*5-2*7, 1*6-2*8],[3*5+4*7, 3*6+4*8]] = [[-9,-10],[43,50]]; and wrap-around:
     * 65536 * 65536 = 2^32 wraps to 0, plus 1*1 = 1. */
    int64_t d22[] = {2, 2};
    nn_attrs at2 = {0};
    nn_attr_bool(&at2, "transpose_a", true);
    ck_assert_int_eq(run2("MatMul", rt_tensor(TFS_DTYPE_INT32, 2, d22, (const int32_t[]){1, 3, -2, 4}),
                          rt_tensor(TFS_DTYPE_INT32, 2, d22, (const int32_t[]){5, 6, 7, 8}), &at2,
                          true, &out, &st), TFS_OK);
    const int32_t *i32 = out->data;
    ck_assert_int_eq(i32[0], -9);
    ck_assert_int_eq(i32[1], -10);
    ck_assert_int_eq(i32[2], 43);
    ck_assert_int_eq(i32[3], 50);
    tfs_tensor_unref(out);
    int64_t d21[] = {2, 1};
    nn_attrs none = {0};
    ck_assert_int_eq(run2("MatMul", rt_tensor(TFS_DTYPE_INT32, 2, d12, (const int32_t[]){65536, 1}),
                          rt_tensor(TFS_DTYPE_INT32, 2, d21, (const int32_t[]){65536, 1}), &none,
                          true, &out, &st), TFS_OK);
    ck_assert_int_eq(((int32_t *)out->data)[0], 1);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_nn_matmul_empty)
{
    /* k = 0: [3,0] x [0,4] is a [3,4] matrix of zeros; m = 0: [0,3] x [3,2] -> [0,2]. */
    int64_t d30[] = {3, 0}, d04[] = {0, 4}, d34[] = {3, 4};
    nn_attrs at = {0};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(run2("MatMul", rt_tensor(TFS_DTYPE_FLOAT, 2, d30, NULL),
                          rt_tensor(TFS_DTYPE_FLOAT, 2, d04, NULL), &at, true, &out, &st), TFS_OK);
    float zeros[12] = {0};
    tfs_test_assert_f32(out, 2, d34, zeros, 0);
    tfs_tensor_unref(out);
    int64_t d03[] = {0, 3}, d32[] = {3, 2}, d02[] = {0, 2};
    ck_assert_int_eq(run2("MatMul", rt_tensor(TFS_DTYPE_FLOAT, 2, d03, NULL),
                          nn_random_f32(2, d32, 5), &at, true, &out, &st), TFS_OK);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 2, d02));
    tfs_tensor_unref(out);
    /* BatchMatMulV2 with k = 0 and a broadcast batch: zeros [2,3,4]. */
    int64_t x3[] = {2, 3, 0}, y2[] = {0, 4}, o3[] = {2, 3, 4};
    ck_assert_int_eq(run2("BatchMatMulV2", rt_tensor(TFS_DTYPE_FLOAT, 3, x3, NULL),
                          rt_tensor(TFS_DTYPE_FLOAT, 2, y2, NULL), &at, true, &out, &st), TFS_OK);
    float z24[24] = {0};
    tfs_test_assert_f32(out, 3, o3, z24, 0);
    tfs_tensor_unref(out);
}
END_TEST

START_TEST(test_nn_matmul_errors)
{
    int64_t d23[] = {2, 3}, d43[] = {4, 3}, d3[] = {3};
    nn_attrs at = {0};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(run2("MatMul", nn_random_f32(2, d23, 1), nn_random_f32(2, d43, 2), &at, true,
                          &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Matrix size-incompatible: In[0]: [2,3], In[1]: [4,3]");
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'op' (MatMul)");
    ck_assert_int_eq(run2("MatMul", nn_random_f32(2, d23, 1), nn_random_f32(1, d3, 2), &at, true,
                          &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "must be matrices");
    /* transpose_b makes [4,3] fit. */
    nn_attrs tb = {0};
    nn_attr_bool(&tb, "transpose_b", true);
    ck_assert_int_eq(run2("MatMul", nn_random_f32(2, d23, 1), nn_random_f32(2, d43, 2), &tb, true,
                          &out, &st), TFS_OK);
    tfs_tensor_unref(out);
    /* An unsupported dtype names the op and the dtype. */
    int64_t d11[] = {1, 1};
    ck_assert_int_eq(run2("MatMul", rt_tensor(TFS_DTYPE_BOOL, 2, d11, NULL),
                          rt_tensor(TFS_DTYPE_BOOL, 2, d11, NULL), &at, true, &out, &st),
                     TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "MatMul is not supported for dtype bool");
    /* BatchMatMulV2: batch dims 2 and 3 do not broadcast. */
    int64_t x[] = {2, 2, 3}, y[] = {3, 3, 2};
    ck_assert_int_eq(run2("BatchMatMulV2", nn_random_f32(3, x, 1), nn_random_f32(3, y, 2), &at,
                          true, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "compatible batch dimensions");
    /* BatchMatMul (V1) does not broadcast at all. */
    int64_t y1[] = {1, 3, 2};
    ck_assert_int_eq(run2("BatchMatMul", nn_random_f32(3, x, 1), nn_random_f32(3, y1, 2), &at,
                          true, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "batch dimensions must be equal");
}
END_TEST

/* Reference batched product with NumPy broadcasting for x [xb..., xr, xc], y [yb..., yr, yc]. */
static void ref_batch(const tfs_tensor *x, const tfs_tensor *y, bool adj_x, bool adj_y,
                      const tfs_tensor *out, double *want, double *mag)
{
    int ob = out->rank - 2;
    int64_t m = out->dims[ob], n = out->dims[ob + 1];
    int64_t xr = x->dims[x->rank - 2], xc = x->dims[x->rank - 1];
    int64_t yr = y->dims[y->rank - 2], yc = y->dims[y->rank - 1];
    int64_t nb = 1;
    for (int d = 0; d < ob; d++)
        nb *= out->dims[d];
    for (int64_t bi = 0; bi < nb; bi++) {
        /* Coordinates of bi in the output batch, mapped to x's and y's (size 1 repeats). */
        int64_t coord[TFS_MAX_RANK], rest = bi, xo = 0, yo = 0;
        for (int d = ob - 1; d >= 0; d--) {
            coord[d] = rest % out->dims[d];
            rest /= out->dims[d];
        }
        for (int d = 0; d < x->rank - 2; d++) {
            int64_t c = coord[d + ob - (x->rank - 2)];
            xo = xo * x->dims[d] + (x->dims[d] == 1 ? 0 : c);
        }
        for (int d = 0; d < y->rank - 2; d++) {
            int64_t c = coord[d + ob - (y->rank - 2)];
            yo = yo * y->dims[d] + (y->dims[d] == 1 ? 0 : c);
        }
        ref_matmul((const float *)x->data + xo * xr * xc, xr, xc, adj_x,
                   (const float *)y->data + yo * yr * yc, yr, yc, adj_y, want + bi * m * n,
                   mag + bi * m * n);
    }
}

START_TEST(test_nn_batch_matmul_broadcast)
{
    /* x [2,1,3,K] (or [2,1,K,3] with adj_x) times y [3,K,5] (or [3,5,K]) -> [2,3,3,5], K = 40. */
    const int64_t K = 40;
    for (int c = 0; c < 4; c++) {
        bool ax = c & 1, ay = c & 2;
        int64_t dx[4] = {2, 1, ax ? K : 3, ax ? 3 : K}, dy[3] = {3, ay ? 5 : K, ay ? K : 5};
        int64_t dout[4] = {2, 3, 3, 5};
        tfs_tensor *x = nn_random_f32(4, dx, 31u + (uint32_t)c), *y = nn_random_f32(3, dy, 47u + (uint32_t)c);
        nn_attrs at = {0};
        nn_attr_bool(&at, "adj_x", ax);
        nn_attr_bool(&at, "adj_y", ay);
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_msg(rt_run_op("BatchMatMulV2", x, y, true, nn_apply_attrs, &at, &out, &st) == TFS_OK,
                      "%s", st.msg);
        double want[90], mag[90];
        ck_assert_int_eq(out->nelem, 90);
        ref_batch(x, y, ax, ay, out, want, mag);
        char what[64];
        snprintf(what, sizeof what, "adj_x=%d adj_y=%d", ax, ay);
        nn_assert_close(out, 4, dout, want, mag, 1e-5, 1e-6, what);
        tfs_tensor_unref(out);
        tfs_tensor_unref(x);
        tfs_tensor_unref(y);
    }
}
END_TEST

START_TEST(test_nn_batch_matmul_v1_v3)
{
    /* BatchMatMul with equal batches [2,2,3] x [2,3,4], and V3 with Ta = Tb = Tout = float and a
     * rank-2 y broadcast over x's batch. */
    int64_t dx[] = {2, 2, 3}, dy[] = {2, 3, 4}, dout[] = {2, 2, 4};
    tfs_tensor *x = nn_random_f32(3, dx, 3), *y = nn_random_f32(3, dy, 4);
    nn_attrs at = {0};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run_op("BatchMatMul", x, y, true, nn_apply_attrs, &at, &out, &st) == TFS_OK, "%s",
                  st.msg);
    double want[16], mag[16];
    ref_batch(x, y, false, false, out, want, mag);
    nn_assert_close(out, 3, dout, want, mag, 1e-5, 1e-6, "BatchMatMul");
    tfs_tensor_unref(out);
    tfs_tensor_unref(y);

    int64_t dy2[] = {3, 4};
    y = nn_random_f32(2, dy2, 9);
    nn_attrs v3 = {0};
    nn_attr_type(&v3, "Ta", TFS_DTYPE_FLOAT);
    nn_attr_type(&v3, "Tb", TFS_DTYPE_FLOAT);
    nn_attr_type(&v3, "Tout", TFS_DTYPE_FLOAT);
    ck_assert_msg(rt_run_op("BatchMatMulV3", x, y, false, nn_apply_attrs, &v3, &out, &st) == TFS_OK,
                  "%s", st.msg);
    ref_batch(x, y, false, false, out, want, mag);
    nn_assert_close(out, 3, dout, want, mag, 1e-5, 1e-6, "BatchMatMulV3");
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
}
END_TEST

/* MatMul with a Const B keeps B packed on the Const's tensor from its first large product
 * (tfs__sgemm_const_b): later runs give the same bits. A tensor fed in the Const's place is not
 * the Const's own: it is never kept, so a caller that changes its contents between runs gets
 * products of the new contents. */
START_TEST(test_nn_matmul_const_b)
{
    int64_t ad[2] = {120, 300}, bd[2] = {300, 70};
    tfs_tensor *a = nn_random_f32(2, ad, 1), *b = nn_random_f32(2, bd, 2);
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    rt_placeholder(g, "a", TFS_DTYPE_FLOAT);
    rt_const(g, "w", tfs_tensor_ref(b));
    rt_node(g, "y", "MatMul", "a", "w", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    tfs_feed feed = {"a", a};
    tfs_tensor *y1 = NULL, *y2 = NULL, *y3 = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y:0", &y1, &st), TFS_OK);
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y:0", &y2, &st), TFS_OK);
    ck_assert(memcmp(y1->data, y2->data, y1->nbytes) == 0);
    ck_assert_ptr_nonnull(atomic_load(&b->gemm_packed));   /* the Const's tensor keeps B packed */
    double *want = tfs_malloc((size_t)(120 * 70) * sizeof *want);
    double *mag = tfs_malloc((size_t)(120 * 70) * sizeof *mag);
    ref_matmul(a->data, 120, 300, false, b->data, 300, 70, false, want, mag);
    nn_assert_close(y2, 2, (int64_t[]){120, 70}, want, mag, 1e-5, 1e-6, "MatMul, Const B kept");
    /* Fed in the Const's place, then changed: the product follows. */
    tfs_tensor *w = nn_random_f32(2, bd, 3);
    tfs_feed feeds[2] = {{"a", a}, {"w", w}};
    ck_assert_int_eq(rt_run1(s, feeds, 2, "y:0", &y3, &st), TFS_OK);
    tfs_tensor_unref(y3);
    float *wd = w->data;
    for (int64_t i = 0; i < w->nelem; i++)
        wd[i] = -wd[i] * 0.5f;
    ck_assert_int_eq(rt_run1(s, feeds, 2, "y:0", &y3, &st), TFS_OK);
    ck_assert_ptr_null(atomic_load(&w->gemm_packed));
    ref_matmul(a->data, 120, 300, false, w->data, 300, 70, false, want, mag);
    nn_assert_close(y3, 2, (int64_t[]){120, 70}, want, mag, 1e-5, 1e-6,
                    "MatMul, B fed in the Const's place and changed");
    tfs_free(want);
    tfs_free(mag);
    tfs_tensor_unref(y1);
    tfs_tensor_unref(y2);
    tfs_tensor_unref(y3);
    tfs_tensor_unref(w);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_nn_matmul(void)
{
    Suite *s = suite_create("runtime_nn_matmul");
    TCase *tc = tcase_create("matmul");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_nn_matmul_hand);
    tcase_add_test(tc, test_nn_matmul_transposes_random);
    tcase_add_test(tc, test_nn_matmul_transposed_path);
    tcase_add_test(tc, test_nn_matmul_double_and_int);
    tcase_add_test(tc, test_nn_matmul_empty);
    tcase_add_test(tc, test_nn_matmul_errors);
    tcase_add_test(tc, test_nn_batch_matmul_broadcast);
    tcase_add_test(tc, test_nn_batch_matmul_v1_v3);
    tcase_add_test(tc, test_nn_matmul_const_b);
    suite_add_tcase(s, tc);
    return s;
}
