/* Tests of UpperBound, LowerBound, Bincount, DenseBincount and Bucketize
 * (runtime/kernels/search-count.c):
 * hand-computed results (ties, values outside the sorted range, NaN-free floats, int64 beyond
 * 2^53, empty rows), counts and weight sums (exact in float: small dyadic weights), values at or
 * above `size` ignored, binary_output, Bucketize's buckets for each input type against a
 * linear count written here, and the INVALID_ARGUMENT cases. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_search_count(void);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static void set_out_type(tfs_graph *g, int id, const void *arg)
{
    if (arg)
        tfs_graph_set_attr_type(g, id, "out_type", *(const enum tfs_dtype *)arg);
}

START_TEST(test_upper_lower_bound)
{
    /* row 0: [1, 3, 3, 5]; row 1: [-2, 0, 0, 0] */
    const float s[] = {1, 3, 3, 5, -2, 0, 0, 0};
    tfs_tensor *a[2] = {at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 4), s),
                        at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 3),
                             (const float[]){3, 0, 6, 0, -3, 0.5f})};
    at_expect(at_run1("UpperBound", 2, a, true, set_out_type, NULL), TFS_DTYPE_INT32, 2,
              DIMS(2, 3), ((const int32_t[]){3, 0, 4, 4, 0, 4}));
    a[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 4), s);
    a[1] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 3), (const float[]){3, 0, 6, 0, -3, 0.5f});
    enum tfs_dtype i64 = TFS_DTYPE_INT64;
    at_expect(at_run1("LowerBound", 2, a, true, set_out_type, &i64), TFS_DTYPE_INT64, 2,
              DIMS(2, 3), ((const int64_t[]){1, 0, 4, 1, 0, 4}));
    /* int64 values that differ beyond double precision */
    const int64_t big = (int64_t)1 << 60;
    a[0] = at_t(TFS_DTYPE_INT64, 2, DIMS(1, 3), (const int64_t[]){big, big + 1, big + 2});
    a[1] = at_t(TFS_DTYPE_INT64, 2, DIMS(1, 2), (const int64_t[]){big + 1, big - 1});
    at_expect(at_run1("UpperBound", 2, a, true, NULL, NULL), TFS_DTYPE_INT32, 2, DIMS(1, 2),
              ((const int32_t[]){2, 0}));
    /* empty sorted rows give 0; no values give an empty result */
    a[0] = at_t(TFS_DTYPE_INT32, 2, DIMS(2, 0), NULL);
    a[1] = at_t(TFS_DTYPE_INT32, 2, DIMS(2, 1), (const int32_t[]){5, -5});
    at_expect(at_run1("LowerBound", 2, a, true, NULL, NULL), TFS_DTYPE_INT32, 2, DIMS(2, 1),
              ((const int32_t[]){0, 0}));
    a[0] = at_t(TFS_DTYPE_UINT8, 2, DIMS(3, 2), NULL);
    a[1] = at_t(TFS_DTYPE_UINT8, 2, DIMS(3, 0), NULL);
    at_expect(at_run1("UpperBound", 2, a, true, NULL, NULL), TFS_DTYPE_INT32, 2, DIMS(3, 0), NULL);
}
END_TEST

static void expect_err(const char *op, int n, tfs_tensor **in, bool set_T, at_attr_fn fn,
                       const void *arg, const char *needle)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(at_run(op, n, in, set_T, fn, arg, 1, &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, needle);
    ck_assert(out == NULL);
}

START_TEST(test_bound_errors)
{
    tfs_tensor *a[2] = {at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 3), NULL),
                        at_t(TFS_DTYPE_FLOAT, 2, DIMS(3, 3), NULL)};
    expect_err("UpperBound", 2, a, true, NULL, NULL,
               "Leading dim_size of both tensors must match.");
    a[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL);
    a[1] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 3), NULL);
    expect_err("LowerBound", 2, a, true, NULL, NULL, "must be 2-D");
    a[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 3), NULL);
    a[1] = at_t(TFS_DTYPE_INT32, 2, DIMS(1, 3), NULL);
    expect_err("LowerBound", 2, a, false, NULL, NULL, "must be of one real number type");
    a[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 3), NULL);
    a[1] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 3), NULL);
    enum tfs_dtype f = TFS_DTYPE_FLOAT;
    expect_err("LowerBound", 2, a, true, set_out_type, &f, "out_type must be int32 or int64");
}
END_TEST

static void set_binary(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_bool(g, id, "binary_output", *(const bool *)arg);
    tfs_graph_set_attr_type(g, id, "Tidx", TFS_DTYPE_INT64);
}

static void set_T_f(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_type(g, id, "T", *(const enum tfs_dtype *)arg);
}

START_TEST(test_bincount)
{
    /* counts: values 5 and 9 are >= size 5 and ignored */
    tfs_tensor *in[3] = {at_t(TFS_DTYPE_INT32, 2, DIMS(2, 3), (const int32_t[]){1, 1, 3, 0, 5, 9}),
                         at_i32s(5), at_t(TFS_DTYPE_INT32, 1, DIMS(0), NULL)};
    enum tfs_dtype i32 = TFS_DTYPE_INT32, f32 = TFS_DTYPE_FLOAT;
    at_expect(at_run1("Bincount", 3, in, false, set_T_f, &i32), TFS_DTYPE_INT32, 1, DIMS(5),
              ((const int32_t[]){1, 2, 0, 1, 0}));
    /* weights summed per bin */
    in[0] = at_i32v(4, (const int32_t[]){2, 0, 2, 7});
    in[1] = at_i32s(3);
    in[2] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(4), (const float[]){0.5f, 0.25f, 1.5f, 8});
    at_expect(at_run1("Bincount", 3, in, false, set_T_f, &f32), TFS_DTYPE_FLOAT, 1, DIMS(3),
              ((const float[]){0.25f, 0, 2}));
    /* empty arr, size 0 */
    in[0] = at_t(TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    in[1] = at_i32s(0);
    in[2] = at_t(TFS_DTYPE_DOUBLE, 1, DIMS(0), NULL);
    at_expect(at_run1("Bincount", 3, in, false, NULL, NULL), TFS_DTYPE_DOUBLE, 1, DIMS(0), NULL);
    /* errors */
    in[0] = at_i32v(2, (const int32_t[]){1, -1});
    in[1] = at_i32s(3);
    in[2] = at_t(TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    expect_err("Bincount", 3, in, false, NULL, NULL, "Input arr must be non-negative!");
    in[0] = at_i32v(2, (const int32_t[]){1, 1});
    in[1] = at_i32s(-1);
    in[2] = at_t(TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    expect_err("Bincount", 3, in, false, NULL, NULL, "size (-1) must be non-negative");
    in[0] = at_i32v(2, (const int32_t[]){1, 1});
    in[1] = at_i32s(3);
    in[2] = at_t(TFS_DTYPE_INT32, 1, DIMS(3), NULL);
    expect_err("Bincount", 3, in, false, NULL, NULL,
               "Input indices and weights must have the same size.");
    in[0] = at_i32v(2, (const int32_t[]){1, 1});
    in[1] = at_i32v(1, (const int32_t[]){3});
    in[2] = at_t(TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    expect_err("Bincount", 3, in, false, NULL, NULL, "Shape must be rank 0 but is rank 1");
}
END_TEST

START_TEST(test_dense_bincount)
{
    const int64_t data[] = {0, 2, 2, 9, 1, 1, 1, 0};   /* [2, 4] */
    bool no = false, yes = true;
    tfs_tensor *in[3] = {at_t(TFS_DTYPE_INT64, 2, DIMS(2, 4), data),
                         at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3}),
                         at_t(TFS_DTYPE_FLOAT, 1, DIMS(0), NULL)};
    at_expect(at_run1("DenseBincount", 3, in, false, set_binary, &no), TFS_DTYPE_FLOAT, 2,
              DIMS(2, 3), ((const float[]){1, 0, 2, 1, 3, 0}));
    in[0] = at_t(TFS_DTYPE_INT64, 2, DIMS(2, 4), data);
    in[1] = at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3});
    in[2] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 4), (const float[]){1, 2, 4, 8, 0.5f, 0.5f, 1, 16});
    at_expect(at_run1("DenseBincount", 3, in, false, set_binary, &no), TFS_DTYPE_FLOAT, 2,
              DIMS(2, 3), ((const float[]){1, 0, 6, 16, 2, 0}));
    /* binary_output: 1 per bin hit, weights ignored */
    in[0] = at_t(TFS_DTYPE_INT64, 2, DIMS(2, 4), data);
    in[1] = at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3});
    in[2] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 4), (const float[]){1, 2, 4, 8, 0.5f, 0.5f, 1, 16});
    at_expect(at_run1("DenseBincount", 3, in, false, set_binary, &yes), TFS_DTYPE_FLOAT, 2,
              DIMS(2, 3), ((const float[]){1, 0, 1, 1, 1, 0}));
    /* 1-D with int64 counts */
    in[0] = at_i64v(5, (const int64_t[]){4, 4, 0, 4, 3});
    in[1] = at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){5});
    in[2] = at_t(TFS_DTYPE_INT64, 1, DIMS(0), NULL);
    at_expect(at_run1("DenseBincount", 3, in, false, set_binary, &no), TFS_DTYPE_INT64, 1, DIMS(5),
              ((const int64_t[]){1, 0, 0, 1, 3}));
    /* errors: rank 3, weights of another shape, negative values, mixed index dtypes */
    in[0] = at_t(TFS_DTYPE_INT64, 3, DIMS(1, 1, 1), NULL);
    in[1] = at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3});
    in[2] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(0), NULL);
    expect_err("DenseBincount", 3, in, false, set_binary, &no, "Shape must be at most rank 2");
    in[0] = at_t(TFS_DTYPE_INT64, 2, DIMS(2, 4), data);
    in[1] = at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3});
    in[2] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(8), NULL);
    expect_err("DenseBincount", 3, in, false, set_binary, &no, "`weights` must be the same shape");
    in[0] = at_i64v(2, (const int64_t[]){-1, 0});
    in[1] = at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){3});
    in[2] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(0), NULL);
    expect_err("DenseBincount", 3, in, false, set_binary, &no, "Input arr must be non-negative!");
    in[0] = at_i64v(2, (const int64_t[]){1, 0});
    in[1] = at_i32s(3);
    in[2] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(0), NULL);
    expect_err("DenseBincount", 3, in, false, set_binary, &no, "both be int32 or both int64");
}
END_TEST

/* ---- Bucketize ------------------------------------------------------------------------------ */

typedef struct bounds {
    int          n;
    const float *v;
} bounds;

static void set_boundaries(tfs_graph *g, int id, const void *arg)
{
    const bounds *b = arg;
    tfs_attr_value a = {.kind = TFS_ATTR_LIST};
    a.list.kind = b->n ? TFS_ATTR_F : TFS_ATTR_NONE;
    a.list.n = b->n;
    a.list.f = (float *)b->v;
    tfs_graph_set_attr(g, id, "boundaries", &a);
}

START_TEST(test_bucketize)
{
    /* Keras Discretization(bin_boundaries=[0, 10, 100]): a value equal to a boundary goes up */
    const float bv[] = {0, 10, 100};
    bounds b = {3, bv};
    tfs_tensor *in[1];
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 4),
                 ((const float[]){-5, 0, 5, 10, 99.5f, 100, 150, -INFINITY}));
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &b), TFS_DTYPE_INT32, 2,
              DIMS(2, 4), ((const int32_t[]){0, 1, 1, 2, 2, 3, 3, 0}));
    /* NaN compares below nothing: the last bucket, as std::upper_bound puts it */
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), ((const float[]){NAN}));
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &b), TFS_DTYPE_INT32, 1, DIMS(1),
              ((const int32_t[]){3}));
    /* int32 against fractional boundaries, repeated boundaries */
    const float bi[] = {0.5f, 1, 1, 2.5f};
    bounds b2 = {4, bi};
    in[0] = at_t(TFS_DTYPE_INT32, 1, DIMS(5), ((const int32_t[]){-1, 0, 1, 2, 3}));
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &b2), TFS_DTYPE_INT32, 1,
              DIMS(5), ((const int32_t[]){0, 0, 3, 3, 4}));
    /* double values meet the float boundary widened: 0.1 < (double)0.1f, 0.1f is not */
    const float b01[] = {0.1f};
    bounds b3 = {1, b01};
    in[0] = at_t(TFS_DTYPE_DOUBLE, 1, DIMS(2), ((const double[]){0.1, (double)0.1f}));
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &b3), TFS_DTYPE_INT32, 1,
              DIMS(2), ((const int32_t[]){0, 1}));
    /* int64 values become float: 2^24 + 1 rounds to the boundary 2^24 */
    const float big[] = {16777216.0f, 16777218.0f};
    bounds b4 = {2, big};
    in[0] = at_t(TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){16777215, 16777217, 1LL << 40}));
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &b4), TFS_DTYPE_INT32, 1,
              DIMS(3), ((const int32_t[]){0, 1, 2}));
    /* no boundaries: everything in bucket 0; an empty input */
    bounds none = {0, NULL};
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), ((const float[]){-1, 1}));
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &none), TFS_DTYPE_INT32, 1,
              DIMS(2), ((const int32_t[]){0, 0}));
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(0, 3), NULL);
    at_expect(at_run1("Bucketize", 1, in, true, set_boundaries, &b), TFS_DTYPE_INT32, 2,
              DIMS(0, 3), NULL);
    /* a larger input against a linear count */
    const float lin[] = {-3, -1, -0.5f, 0, 0.25f, 1, 2, 2, 7};
    bounds b5 = {9, lin};
    tfs_tensor *x = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1000), NULL);
    float *xv = x->data;
    for (int i = 0; i < 1000; i++)
        xv[i] = (float)(i % 97) * 0.125f - 4.0f;
    in[0] = tfs_tensor_ref(x);
    tfs_tensor *out = at_run1("Bucketize", 1, in, true, set_boundaries, &b5);
    for (int i = 0; i < 1000; i++) {
        int32_t want = 0;
        for (int j = 0; j < 9; j++)
            want += lin[j] <= xv[i];
        ck_assert_int_eq(((const int32_t *)out->data)[i], want);
    }
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
}
END_TEST

START_TEST(test_bucketize_errors)
{
    const float bv[] = {1, 0};
    bounds b = {2, bv};
    tfs_tensor *in[1] = {at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL)}, *out;
    tfs_status st;
    ck_assert_int_eq(at_run("Bucketize", 1, in, true, set_boundaries, &b, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Expected sorted boundaries");
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'op' (Bucketize)");
    bounds ok = {1, bv};
    in[0] = at_t(TFS_DTYPE_INT8, 1, DIMS(1), NULL);
    ck_assert_int_eq(at_run("Bucketize", 1, in, true, set_boundaries, &ok, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "T must be int32, int64, float or double");
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    ck_assert_int_eq(at_run("Bucketize", 1, in, true, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "boundaries");
}
END_TEST

Suite *suite_runtime_search_count(void)
{
    Suite *s = suite_create("runtime_search_count");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_upper_lower_bound);
    tcase_add_test(tc, test_bound_errors);
    tcase_add_test(tc, test_bincount);
    tcase_add_test(tc, test_dense_bincount);
    tcase_add_test(tc, test_bucketize);
    tcase_add_test(tc, test_bucketize_errors);
    suite_add_tcase(s, tc);
    return s;
}
