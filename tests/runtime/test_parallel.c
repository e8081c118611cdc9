/* The kernels whose loops run on the intra-op pool (Conv2D, DepthwiseConv2dNative, MatMul,
 * BiasAdd, elementwise binary and unary math, reductions, Softmax, MaxPool/AvgPool) on inputs
 * large enough to be split: the output with 2 and 3 threads must be bit-identical to the output
 * with 1, and a few cases are also checked against float64 loops written here (the ranges start
 * mid-way through broadcast and reduction walks). The kernels' semantics on small inputs are the
 * other suites' business; tests/runtime/CMakeLists.txt runs all of them with 1 and 2 threads.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/nn-helpers.h"

Suite *suite_runtime_parallel(void);

/* Runs op on (a, b) with the given attrs at `threads` threads; returns the output. */
static tfs_tensor *run_at(int threads, const char *op, tfs_tensor *a, tfs_tensor *b,
                          nn_attrs *at, bool T_attr)
{
    tfs_runtime_set_num_threads(threads);
    tfs_tensor *out = NULL;
    tfs_status st;
    enum tfs_code rc = rt_run_op(op, a, b, T_attr, at ? nn_apply_attrs : NULL, at, &out, &st);
    ck_assert_msg(rc == TFS_OK, "%s at %d threads: %s", op, threads, st.msg);
    return out;
}

/* The output at 1 thread (returned), after checking that 2 and 3 threads give the same bytes. */
static tfs_tensor *same_bits(const char *op, tfs_tensor *a, tfs_tensor *b, nn_attrs *at,
                             bool T_attr)
{
    tfs_tensor *one = run_at(1, op, a, b, at, T_attr);
    for (int th = 2; th <= 3; th++) {
        tfs_tensor *o = run_at(th, op, a, b, at, T_attr);
        ck_assert(tfs_shape_equal(one->rank, one->dims, o->rank, o->dims));
        ck_assert_int_eq(one->dtype, o->dtype);
        ck_assert_msg(memcmp(one->data, o->data, one->nbytes) == 0,
                      "%s: %d threads differ from 1", op, th);
        tfs_tensor_unref(o);
    }
    tfs_runtime_set_num_threads(0);
    return one;
}

static void same_bits_free(const char *op, tfs_tensor *a, tfs_tensor *b, nn_attrs *at,
                           bool T_attr)
{
    tfs_tensor_unref(same_bits(op, a, b, at, T_attr));
}

static tfs_tensor *random_i32(int rank, const int64_t *dims, uint32_t seed, int lo, int hi)
{
    tfs_tensor *t = rt_tensor(TFS_DTYPE_INT32, rank, dims, NULL);
    uint32_t x = seed;
    for (int64_t i = 0; i < t->nelem; i++) {
        x = x * 1664525u + 1013904223u;
        ((int32_t *)t->data)[i] = lo + (int32_t)((x >> 8) % (uint32_t)(hi - lo + 1));
    }
    return t;
}

START_TEST(test_parallel_binary)
{
    /* Broadcast in two middle axes: [8,1,50,100] + [1,30,50,1] -> [8,30,50,100]; each range of
     * rows starts part-way through the odometer. Checked against a plain loop too. */
    int64_t da[] = {8, 1, 50, 100}, db[] = {1, 30, 50, 1};
    tfs_tensor *a = nn_random_f32(4, da, 1), *b = nn_random_f32(4, db, 2);
    tfs_tensor *sum = same_bits("AddV2", a, b, NULL, true);
    const float *A = a->data, *B = b->data, *S = sum->data;
    for (int64_t i = 0, n = 0; i < 8; i++)
        for (int64_t j = 0; j < 30; j++)
            for (int64_t k = 0; k < 50; k++)
                for (int64_t l = 0; l < 100; l++, n++)
                    if (S[n] != A[(i * 50 + k) * 100 + l] + B[j * 50 + k])
                        ck_abort_msg("AddV2 [%lld,%lld,%lld,%lld] wrong", (long long)i,
                                     (long long)j, (long long)k, (long long)l);
    tfs_tensor_unref(sum);
    same_bits_free("Mul", a, a, NULL, true);
    same_bits_free("Sub", b, a, NULL, true);
    same_bits_free("RealDiv", a, b, NULL, true);
    same_bits_free("Maximum", a, b, NULL, true);
    same_bits_free("Less", a, b, NULL, true);
    same_bits_free("SquaredDifference", a, b, NULL, true);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);

    /* Same shapes and a row vector: [400, 1000] with [1000], int32. */
    int64_t dm[] = {400, 1000}, dv[] = {1000};
    tfs_tensor *x = random_i32(2, dm, 3, -1000, 1000), *v = random_i32(1, dv, 4, 1, 50);
    same_bits_free("Add", x, v, NULL, true);
    same_bits_free("Mul", x, x, NULL, true);
    same_bits_free("FloorDiv", x, v, NULL, true);
    /* A zero divisor far into the array is an error at every thread count. */
    ((int32_t *)v->data)[999] = 0;
    for (int th = 1; th <= 3; th++) {
        tfs_runtime_set_num_threads(th);
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_int_eq(rt_run_op("FloorDiv", x, v, true, NULL, NULL, &out, &st),
                         TFS_INVALID_ARGUMENT);
        ck_assert_ptr_null(out);
        ck_assert_ptr_nonnull(strstr(st.msg, "Integer division by zero"));
    }
    tfs_runtime_set_num_threads(0);
    tfs_tensor_unref(x);
    tfs_tensor_unref(v);

    /* Products below the smallest normal float are flushed to 0 (sessions run with FTZ/DAZ, as
     * TensorFlow) on every thread that computes a range, not only on the caller. */
    int64_t dt[] = {1000, 200};
    tfs_tensor *tiny = rt_tensor(TFS_DTYPE_FLOAT, 2, dt, NULL);
    for (int64_t i = 0; i < tiny->nelem; i++)
        ((float *)tiny->data)[i] = 1e-20f * (float)(1 + i % 7);
    tfs_tensor *sq = same_bits("Mul", tiny, tiny, NULL, true);
    for (int64_t i = 0; i < sq->nelem; i++)
        if (((const float *)sq->data)[i] != 0.0f)
            ck_abort_msg("Mul of 1e-20s: element %lld is %g, not flushed to 0", (long long)i,
                         ((const float *)sq->data)[i]);
    tfs_tensor_unref(sq);
    tfs_tensor_unref(tiny);
}
END_TEST

START_TEST(test_parallel_unary)
{
    int64_t d[] = {1000, 1000};
    tfs_tensor *a = nn_random_f32(2, d, 5);
    float *A = a->data;
    for (int64_t i = 0; i < a->nelem; i++)
        A[i] *= 20.0f;
    static const char *ops[] = {"Relu", "Exp", "Tanh", "Sigmoid", "Neg", "Softplus", "Square"};
    for (int i = 0; i < 7; i++)
        same_bits_free(ops[i], a, NULL, NULL, true);
    tfs_tensor_unref(a);
}
END_TEST

START_TEST(test_parallel_softmax_bias)
{
    int64_t d[] = {512, 1000};
    tfs_tensor *a = nn_random_f32(2, d, 6);
    tfs_tensor *sm = same_bits("Softmax", a, NULL, NULL, true);
    for (int64_t r = 0; r < 512; r++) {
        double s = 0;
        for (int64_t j = 0; j < 1000; j++)
            s += ((const float *)sm->data)[r * 1000 + j];
        ck_assert_msg(fabs(s - 1.0) < 1e-4, "row %lld sums to %g", (long long)r, s);
    }
    tfs_tensor_unref(sm);
    same_bits_free("LogSoftmax", a, NULL, NULL, true);
    tfs_tensor_unref(a);

    int64_t dx[] = {64, 28, 28, 32}, dc[] = {32};
    tfs_tensor *x = nn_random_f32(4, dx, 7), *c = nn_random_f32(1, dc, 8);
    same_bits_free("BiasAdd", x, c, NULL, true);
    nn_attrs nchw = {0};
    nn_attr_str(&nchw, "data_format", "NCHW");
    int64_t dn[] = {16, 32, 28, 28};
    tfs_tensor *y = nn_random_f32(4, dn, 9);
    same_bits_free("BiasAdd", y, c, &nchw, true);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_tensor_unref(c);
}
END_TEST

static tfs_tensor *axes(int n, const int32_t *v)
{
    int64_t d[] = {n};
    return rt_tensor(TFS_DTYPE_INT32, 1, d, v);
}

START_TEST(test_parallel_reduce)
{
    /* Row reductions (the first axis kept: split over the pool), checked against loops. */
    int64_t d[] = {2000, 500};
    tfs_tensor *a = nn_random_f32(2, d, 10), *ax1 = axes(1, (const int32_t[]){1});
    tfs_tensor *s = same_bits("Sum", a, ax1, NULL, true);
    for (int64_t r = 0; r < 2000; r++) {
        double want = 0;
        for (int64_t j = 0; j < 500; j++)
            want += ((const float *)a->data)[r * 500 + j];
        ck_assert_msg(fabs(((const float *)s->data)[r] - want) < 1e-4, "Sum row %lld",
                      (long long)r);
    }
    tfs_tensor_unref(s);
    same_bits_free("Max", a, ax1, NULL, true);
    same_bits_free("Prod", a, ax1, NULL, true);
    tfs_tensor *ax0 = axes(1, (const int32_t[]){0});
    same_bits_free("Sum", a, ax0, NULL, true);   /* the first axis reduced: one walk */
    tfs_tensor_unref(a);

    /* Mean over H, W of NHWC (global average pooling): [16, 14, 14, 64] -> [16, 64]. */
    int64_t dp[] = {16, 14, 14, 64};
    tfs_tensor *p = nn_random_f32(4, dp, 11), *ax12 = axes(2, (const int32_t[]){1, 2});
    tfs_tensor *m = same_bits("Mean", p, ax12, NULL, true);
    for (int64_t b = 0; b < 16; b++)
        for (int64_t c = 0; c < 64; c++) {
            double want = 0;
            for (int64_t i = 0; i < 196; i++)
                want += ((const float *)p->data)[(b * 196 + i) * 64 + c];
            want /= 196;
            ck_assert_msg(fabs(((const float *)m->data)[b * 64 + c] - want) < 1e-6,
                          "Mean [%lld,%lld]", (long long)b, (long long)c);
        }
    tfs_tensor_unref(m);
    tfs_tensor_unref(p);

    int64_t di[] = {1000, 300};
    tfs_tensor *ii = random_i32(2, di, 12, -100000, 100000);
    same_bits_free("Max", ii, ax1, NULL, true);
    same_bits_free("Sum", ii, ax1, NULL, true);
    tfs_tensor_unref(ii);
    tfs_tensor_unref(ax1);
    tfs_tensor_unref(ax0);
    tfs_tensor_unref(ax12);
}
END_TEST

START_TEST(test_parallel_pool)
{
    int64_t d[] = {8, 56, 56, 32};
    tfs_tensor *x = nn_random_f32(4, d, 13);
    nn_attrs mp = {0};
    nn_attr_ints(&mp, "ksize", 4, (const int64_t[]){1, 3, 3, 1});
    nn_attr_ints(&mp, "strides", 4, (const int64_t[]){1, 2, 2, 1});
    nn_attr_str(&mp, "padding", "SAME");
    same_bits_free("MaxPool", x, NULL, &mp, true);
    nn_attrs ap = {0};
    nn_attr_ints(&ap, "ksize", 4, (const int64_t[]){1, 2, 2, 1});
    nn_attr_ints(&ap, "strides", 4, (const int64_t[]){1, 2, 2, 1});
    nn_attr_str(&ap, "padding", "VALID");
    same_bits_free("AvgPool", x, NULL, &ap, true);
    nn_attr_str(&ap, "padding", "SAME");
    nn_attr_ints(&ap, "ksize", 4, (const int64_t[]){1, 3, 3, 1});
    nn_attr_ints(&ap, "strides", 4, (const int64_t[]){1, 1, 1, 1});
    same_bits_free("AvgPool", x, NULL, &ap, true);
    tfs_tensor_unref(x);
}
END_TEST

START_TEST(test_parallel_conv)
{
    nn_attrs same = {0};
    nn_attr_ints(&same, "strides", 4, (const int64_t[]){1, 1, 1, 1});
    nn_attr_str(&same, "padding", "SAME");
    /* 1568 patch rows: chunks spread over the threads (at 1 thread: chunks in turn). */
    int64_t dx[] = {2, 28, 28, 8}, df[] = {5, 5, 8, 16};
    tfs_tensor *x = nn_random_f32(4, dx, 14), *f = nn_random_f32(4, df, 15);
    same_bits_free("Conv2D", x, f, &same, true);
    /* 196 rows: one chunk, its im2col and GEMM threaded. */
    int64_t dx2[] = {1, 14, 14, 32}, df2[] = {3, 3, 32, 64};
    tfs_tensor *x2 = nn_random_f32(4, dx2, 16), *f2 = nn_random_f32(4, df2, 17);
    same_bits_free("Conv2D", x2, f2, &same, true);
    nn_attrs s2 = {0};
    nn_attr_ints(&s2, "strides", 4, (const int64_t[]){1, 2, 2, 1});
    nn_attr_str(&s2, "padding", "VALID");
    int64_t dx3[] = {4, 57, 57, 3}, df3[] = {7, 7, 3, 24};
    tfs_tensor *x3 = nn_random_f32(4, dx3, 18), *f3 = nn_random_f32(4, df3, 19);
    same_bits_free("Conv2D", x3, f3, &s2, true);
    /* 1x1: the input is the matrix; one threaded GEMM. */
    int64_t df4[] = {1, 1, 8, 40};
    tfs_tensor *f4 = nn_random_f32(4, df4, 20);
    same_bits_free("Conv2D", x, f4, &same, true);

    int64_t dd[] = {4, 56, 56, 32}, dw[] = {3, 3, 32, 1}, dw2[] = {3, 3, 32, 2};
    tfs_tensor *y = nn_random_f32(4, dd, 21), *w = nn_random_f32(4, dw, 22);
    tfs_tensor *w2 = nn_random_f32(4, dw2, 23);
    same_bits_free("DepthwiseConv2dNative", y, w, &same, true);
    same_bits_free("DepthwiseConv2dNative", y, w2, &s2, true);

    int64_t dm[] = {300, 400}, dn[] = {400, 200};
    tfs_tensor *ma = nn_random_f32(2, dm, 24), *mb = nn_random_f32(2, dn, 25);
    same_bits_free("MatMul", ma, mb, NULL, true);
    tfs_tensor *tensors[] = {x, f, x2, f2, x3, f3, f4, y, w, w2, ma, mb};
    for (int i = 0; i < 12; i++)
        tfs_tensor_unref(tensors[i]);
}
END_TEST

Suite *suite_runtime_parallel(void)
{
    Suite *s = suite_create("runtime_parallel");
    TCase *tc = tcase_create("parallel");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_parallel_binary);
    tcase_add_test(tc, test_parallel_unary);
    tcase_add_test(tc, test_parallel_softmax_bias);
    tcase_add_test(tc, test_parallel_reduce);
    tcase_add_test(tc, test_parallel_pool);
    tcase_add_test(tc, test_parallel_conv);
    suite_add_tcase(s, tc);
    return s;
}
