/* Tests of SparseReshape, SparseFillEmptyRows and SparseSegmentSum/Mean/SqrtN (and their
 * *WithNumSegments forms)
 * (runtime/kernels/sparse.c): TensorFlow's documented examples and hand-computed cases (unsorted
 * rows, empty inputs, -1 dimensions, gaps between segments), the segment reductions against a
 * float64 reference (segments of 1, 2, 8, 9, 10 and 17 rows cover every summation path;
 * tolerance 1e-5 relative + 1e-6 absolute for float, 1e-12 relative for double), and TF's
 * INVALID_ARGUMENT cases (indices out of bounds, unsorted segment ids). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_sparse(void);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define I64(...)  ((const int64_t[]){__VA_ARGS__})

static tfs_tensor *i64m(int64_t r, int64_t c, const int64_t *v)
{
    return at_t(TFS_DTYPE_INT64, 2, DIMS(r, c), v);
}

static void expect_err(const char *op, int n, tfs_tensor **in, int n_out, const char *needle)
{
    tfs_tensor *out[4] = {0};
    tfs_status st;
    ck_assert_int_eq(at_run(op, n, in, false, NULL, NULL, n_out, out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, needle);
    for (int i = 0; i < n_out; i++)
        ck_assert(out[i] == NULL);
}

/* ---- SparseReshape -------------------------------------------------------------------------- */

static void reshape_ok(tfs_tensor *ind, tfs_tensor *shape, tfs_tensor *target, int64_t nnz,
                       int64_t out_rank, const int64_t *want_ind, const int64_t *want_shape)
{
    tfs_tensor *in[3] = {ind, shape, target}, *out[2];
    tfs_status st;
    ck_assert_msg(at_run("SparseReshape", 3, in, false, NULL, NULL, 2, out, &st) == TFS_OK, "%s",
                  st.msg);
    at_expect(out[0], TFS_DTYPE_INT64, 2, DIMS(nnz, out_rank), want_ind);
    at_expect(out[1], TFS_DTYPE_INT64, 1, DIMS(out_rank), want_shape);
}

START_TEST(test_sparse_reshape)
{
    /* [2,3,6] -> [9,-1]: linear positions 0, 1, 6, 18, 33 in a [9,4] */
    reshape_ok(i64m(5, 3, I64(0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 2, 3)),
               at_i64v(3, I64(2, 3, 6)),
               at_i64v(2, I64(9, -1)), 5, 2, I64(0, 0, 0, 1, 1, 2, 4, 2, 8, 1), I64(9, 4));
    /* to rank 3 and rank 1 */
    reshape_ok(i64m(2, 2, I64(1, 2, 0, 1)), at_i64v(2, I64(2, 3)), at_i64v(3, I64(3, 1, 2)), 2, 3,
               I64(2, 0, 1, 0, 0, 1), I64(3, 1, 2));
    reshape_ok(i64m(2, 2, I64(1, 2, 0, 1)), at_i64v(2, I64(2, 3)), at_i64v(1, I64(-1)), 2, 1,
               I64(5, 1), I64(6));
    /* no entries */
    reshape_ok(i64m(0, 2, NULL), at_i64v(2, I64(2, 3)), at_i64v(2, I64(3, 2)), 0, 2, NULL,
               I64(3, 2));
    /* errors */
    tfs_tensor *in[3] = {i64m(1, 2, I64(0, 0)), at_i64v(2, I64(2, 3)), at_i64v(2, I64(-1, -1))};
    expect_err("SparseReshape", 3, in, 2, "only one output dimension may be -1, not both 0 and 1");
    in[0] = i64m(1, 2, I64(0, 0));
    in[1] = at_i64v(2, I64(2, 3));
    in[2] = at_i64v(2, I64(-2, 3));
    expect_err("SparseReshape", 3, in, 2, "size 0 must be non-negative, not -2");
    in[0] = i64m(1, 2, I64(0, 0));
    in[1] = at_i64v(2, I64(2, 3));
    in[2] = at_i64v(2, I64(-1, 4));
    expect_err("SparseReshape", 3, in, 2, "requires a multiple of 4");
    in[0] = i64m(1, 2, I64(0, 0));
    in[1] = at_i64v(2, I64(2, 3));
    in[2] = at_i64v(1, I64(5));
    expect_err("SparseReshape", 3, in, 2,
               "a tensor with 6 dense values, but the requested shape has 5");
    in[0] = i64m(1, 2, I64(0, 0));
    in[1] = at_i64v(2, I64(0, 3));
    in[2] = at_i64v(2, I64(-1, 0));
    expect_err("SparseReshape", 3, in, 2, "reshape cannot infer the missing input size");
    in[0] = i64m(1, 2, I64(0, 3));
    in[1] = at_i64v(2, I64(2, 3));
    in[2] = at_i64v(1, I64(6));
    expect_err("SparseReshape", 3, in, 2, "input_indices[0, 1] = 3 is out of bounds [0, 3)");
    in[0] = i64m(1, 3, I64(0, 0, 0));
    in[1] = at_i64v(2, I64(2, 3));
    in[2] = at_i64v(1, I64(6));
    expect_err("SparseReshape", 3, in, 2, "must match");
    in[0] = at_i64v(2, I64(0, 0));
    in[1] = at_i64v(2, I64(2, 3));
    in[2] = at_i64v(1, I64(6));
    expect_err("SparseReshape", 3, in, 2, "Input indices should be a matrix");
}
END_TEST

/* ---- SparseFillEmptyRows -------------------------------------------------------------------- */

START_TEST(test_sparse_fill_empty_rows)
{
    /* TF's example: rows 1 and 4 are empty */
    const char *v[] = {"a", "b", "c", "d"}, *dv[] = {"x"};
    tfs_tensor *in[4] = {i64m(4, 2, I64(0, 1, 0, 3, 2, 0, 3, 1)), at_strs(1, DIMS(4), v),
                         at_i64v(2, I64(5, 6)), at_strs(0, NULL, dv)};
    tfs_tensor *out[4];
    tfs_status st;
    ck_assert_msg(at_run("SparseFillEmptyRows", 4, in, false, NULL, NULL, 4, out, &st) == TFS_OK,
                  "%s", st.msg);
    at_expect(out[0], TFS_DTYPE_INT64, 2, DIMS(6, 2), I64(0, 1, 0, 3, 1, 0, 2, 0, 3, 1, 4, 0));
    at_expect_strs(out[1], 1, DIMS(6), ((const char *const[]){"a", "b", "x", "c", "d", "x"}));
    at_expect(out[2], TFS_DTYPE_BOOL, 1, DIMS(5), ((const bool[]){0, 1, 0, 0, 1}));
    at_expect(out[3], TFS_DTYPE_INT64, 1, DIMS(4), I64(0, 1, 3, 4));

    /* unsorted rows: grouped by row, each row's entries in input order */
    in[0] = i64m(4, 2, I64(2, 0, 0, 1, 2, 1, 0, 0));
    in[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(4), (const float[]){1, 2, 3, 4});
    in[2] = at_i64v(2, I64(3, 2));
    in[3] = rt_scalar_f32(-1);
    ck_assert_msg(at_run("SparseFillEmptyRows", 4, in, false, NULL, NULL, 4, out, &st) == TFS_OK,
                  "%s", st.msg);
    at_expect(out[0], TFS_DTYPE_INT64, 2, DIMS(5, 2), I64(0, 1, 0, 0, 1, 0, 2, 0, 2, 1));
    at_expect(out[1], TFS_DTYPE_FLOAT, 1, DIMS(5), ((const float[]){2, 4, -1, 1, 3}));
    at_expect(out[2], TFS_DTYPE_BOOL, 1, DIMS(3), ((const bool[]){0, 1, 0}));
    at_expect(out[3], TFS_DTYPE_INT64, 1, DIMS(4), I64(3, 0, 4, 1));

    /* no entries: every row gets the default */
    in[0] = i64m(0, 3, NULL);
    in[1] = at_t(TFS_DTYPE_INT32, 1, DIMS(0), NULL);
    in[2] = at_i64v(3, I64(2, 4, 4));
    in[3] = at_i32s(9);
    ck_assert_msg(at_run("SparseFillEmptyRows", 4, in, false, NULL, NULL, 4, out, &st) == TFS_OK,
                  "%s", st.msg);
    at_expect(out[0], TFS_DTYPE_INT64, 2, DIMS(2, 3), I64(0, 0, 0, 1, 0, 0));
    at_expect(out[1], TFS_DTYPE_INT32, 1, DIMS(2), ((const int32_t[]){9, 9}));
    at_expect(out[2], TFS_DTYPE_BOOL, 1, DIMS(2), ((const bool[]){1, 1}));
    at_expect(out[3], TFS_DTYPE_INT64, 1, DIMS(0), NULL);

    /* errors */
    in[0] = i64m(2, 2, I64(0, 0, 7, 0));
    in[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), NULL);
    in[2] = at_i64v(2, I64(5, 6));
    in[3] = rt_scalar_f32(0);
    expect_err("SparseFillEmptyRows", 4, in, 4, "indices(1, 0) is invalid: 7 >= 5");
    in[0] = i64m(1, 2, I64(-1, 0));
    in[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    in[2] = at_i64v(2, I64(5, 6));
    in[3] = rt_scalar_f32(0);
    expect_err("SparseFillEmptyRows", 4, in, 4, "indices(0, 0) is invalid: -1 < 0");
    in[0] = i64m(1, 2, I64(0, 0));
    in[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    in[2] = at_i64v(2, I64(0, 6));
    in[3] = rt_scalar_f32(0);
    expect_err("SparseFillEmptyRows", 4, in, 4, "dense_shape[0] = 0 but indices.shape[0] = 1");
    in[0] = i64m(2, 2, I64(0, 0, 1, 1));
    in[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL);
    in[2] = at_i64v(2, I64(5, 6));
    in[3] = rt_scalar_f32(0);
    expect_err("SparseFillEmptyRows", 4, in, 4, "The length of `values` (3) must match");
    in[0] = i64m(1, 2, I64(0, 0));
    in[1] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    in[2] = at_i64v(2, I64(5, 6));
    in[3] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(1), NULL);
    expect_err("SparseFillEmptyRows", 4, in, 4, "default_value must be a scalar");
}
END_TEST

/* ---- SparseSegmentSum / Mean / SqrtN -------------------------------------------------------- */

static tfs_tensor *seg_run(const char *op, tfs_tensor *data, tfs_tensor *ind, tfs_tensor *seg)
{
    tfs_tensor *in[3] = {data, ind, seg};
    return at_run1(op, 3, in, true, NULL, NULL);
}

static const float C[] = {1, 2, 3, 4, -1, -2, -3, -4, 5, 6, 7, 8};   /* TF's doc example */

static tfs_tensor *cdata(void)
{
    return at_t(TFS_DTYPE_FLOAT, 2, DIMS(3, 4), C);
}

START_TEST(test_sparse_segment_examples)
{
    at_expect(seg_run("SparseSegmentSum", cdata(), at_i32v(2, (const int32_t[]){0, 1}),
                      at_i32v(2, (const int32_t[]){0, 0})),
              TFS_DTYPE_FLOAT, 2, DIMS(1, 4), ((const float[]){0, 0, 0, 0}));
    at_expect(seg_run("SparseSegmentSum", cdata(), at_i32v(2, (const int32_t[]){0, 1}),
                      at_i32v(2, (const int32_t[]){0, 1})),
              TFS_DTYPE_FLOAT, 2, DIMS(2, 4), C);
    /* a gap: segment 1 has no rows and is 0; int64 indices and ids */
    at_expect(seg_run("SparseSegmentSum", cdata(), at_i64v(2, I64(0, 2)), at_i64v(2, I64(0, 2))),
              TFS_DTYPE_FLOAT, 2, DIMS(3, 4),
              ((const float[]){1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8}));
    at_expect(seg_run("SparseSegmentMean", cdata(), at_i32v(3, (const int32_t[]){0, 2, 2}),
                      at_i32v(3, (const int32_t[]){0, 0, 1})),
              TFS_DTYPE_FLOAT, 2, DIMS(2, 4), ((const float[]){3, 4, 5, 6, 5, 6, 7, 8}));
    /* SqrtN of rows 0 and 2 = [6, 8, 10, 12] / sqrt(2) */
    tfs_tensor *t = seg_run("SparseSegmentSqrtN", cdata(), at_i32v(2, (const int32_t[]){0, 2}),
                            at_i32v(2, (const int32_t[]){0, 0}));
    const float *got = t->data;
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(got[i] - (6 + 2 * i) / sqrt(2.0)) < 1e-5, "%d: %g", i, got[i]);
    tfs_tensor_unref(t);
    /* integer sums; 1-D data */
    at_expect(seg_run("SparseSegmentSum", at_i64v(3, I64(10, 20, 30)),
                      at_i32v(4, (const int32_t[]){2, 2, 0, 1}),
                      at_i32v(4, (const int32_t[]){0, 0, 1, 1})),
              TFS_DTYPE_INT64, 1, DIMS(2), I64(60, 30));
    /* no indices: no rows */
    at_expect(seg_run("SparseSegmentMean", cdata(), at_i32v(0, NULL), at_i32v(0, NULL)),
              TFS_DTYPE_FLOAT, 2, DIMS(0, 4), NULL);
}
END_TEST

START_TEST(test_sparse_segment_float64_reference)
{
    /* 60 data rows of 3 columns; segments 0..5 of 1, 2, 8, 9, 10 and 17 rows, then a gap (6),
     * then 13 rows in segment 7; indices repeat and jump around. */
    enum { ROWS = 60, COLS = 3 };
    const int sizes[] = {1, 2, 8, 9, 10, 17, 0, 13};
    float data[ROWS * COLS];
    double datad[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) {
        data[i] = (float)(((i * 7919) % 1000) - 500) / 37.0f;
        datad[i] = data[i];
    }
    int32_t ind[64], seg[64];
    int n = 0;
    for (int s = 0; s < 8; s++)
        for (int r = 0; r < sizes[s]; r++, n++) {
            ind[n] = (n * 13 + s) % ROWS;
            seg[n] = s;
        }
    const char *ops[] = {"SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"};
    for (int o = 0; o < 3; o++) {
        for (int dbl = 0; dbl < 2; dbl++) {
            tfs_tensor *d = dbl ? at_t(TFS_DTYPE_DOUBLE, 2, DIMS(ROWS, COLS), datad)
                                : at_t(TFS_DTYPE_FLOAT, 2, DIMS(ROWS, COLS), data);
            tfs_tensor *t = seg_run(ops[o], d, at_i32v(n, ind), at_i32v(n, seg));
            ck_assert(tfs_shape_equal(t->rank, t->dims, 2, DIMS(8, COLS)));
            for (int s = 0, base = 0; s < 8; base += sizes[s], s++) {
                for (int c = 0; c < COLS; c++) {
                    double want = 0;
                    for (int r = 0; r < sizes[s]; r++)
                        want += datad[ind[base + r] * COLS + c];
                    if (sizes[s] && o == 1)
                        want /= sizes[s];
                    if (sizes[s] && o == 2)
                        want /= sqrt(sizes[s]);
                    double g = dbl ? ((const double *)t->data)[s * COLS + c]
                                   : ((const float *)t->data)[s * COLS + c];
                    double tol = dbl ? 1e-12 * fabs(want) + 1e-13 : 1e-5 * fabs(want) + 1e-6;
                    ck_assert_msg(fabs(g - want) <= tol, "%s %s seg %d col %d: %.9g, want %.9g",
                                  ops[o], dbl ? "double" : "float", s, c, g, want);
                }
            }
            tfs_tensor_unref(t);
        }
    }
}
END_TEST

START_TEST(test_sparse_segment_errors)
{
    tfs_tensor *in[3] = {cdata(), at_i32v(3, (const int32_t[]){0, 1, 2}),
                         at_i32v(3, (const int32_t[]){0, 1, 0})};
    expect_err("SparseSegmentSum", 3, in, 1, "segment ids are not increasing");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 3});
    in[2] = at_i32v(2, (const int32_t[]){0, 0});
    expect_err("SparseSegmentSum", 3, in, 1, "Bad: indices[1] == 3 out of range [0, 3)");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, -1});
    in[2] = at_i32v(2, (const int32_t[]){0, 1});
    expect_err("SparseSegmentMean", 3, in, 1, "Bad: indices[1] == -1 out of range [0, 3)");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){-1, -1});
    expect_err("SparseSegmentSum", 3, in, 1, "segment ids must be >= 0");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){-1, 1});
    expect_err("SparseSegmentSqrtN", 3, in, 1, "Segment id -1 out of range [0, 2)");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(1, (const int32_t[]){0});
    expect_err("SparseSegmentSum", 3, in, 1, "segment_ids and indices should have same size.");
    in[0] = cdata();
    in[1] = at_t(TFS_DTYPE_INT32, 2, DIMS(1, 1), NULL);
    in[2] = at_i32v(1, (const int32_t[]){0});
    expect_err("SparseSegmentSum", 3, in, 1, "indices should be a vector.");
    in[0] = at_i32v(2, (const int32_t[]){1, 2});
    in[1] = at_i32v(1, (const int32_t[]){0});
    in[2] = at_i32v(1, (const int32_t[]){0});
    expect_err("SparseSegmentMean", 3, in, 1, "data of dtype int32 is not supported");
}
END_TEST

/* ---- *WithNumSegments: num_segments rows, the ids' rows as without it, zeros after --------- */

static tfs_tensor *seg_run_n(const char *op, tfs_tensor *data, tfs_tensor *ind, tfs_tensor *seg,
                             tfs_tensor *num)
{
    tfs_tensor *in[4] = {data, ind, seg, num};
    return at_run1(op, 4, in, true, NULL, NULL);
}

START_TEST(test_sparse_segment_num_segments)
{
    /* TF's doc example: ids 0 and 2 of 4 segments */
    at_expect(seg_run_n("SparseSegmentSumWithNumSegments", cdata(),
                        at_i32v(2, (const int32_t[]){0, 1}), at_i32v(2, (const int32_t[]){0, 2}),
                        at_i32s(4)),
              TFS_DTYPE_FLOAT, 2, DIMS(4, 4),
              ((const float[]){1, 2, 3, 4, 0, 0, 0, 0, -1, -2, -3, -4, 0, 0, 0, 0}));
    /* int64 num_segments; the mean of rows 0 and 2 in segment 1, segments 0 and 2 empty */
    at_expect(seg_run_n("SparseSegmentMeanWithNumSegments", cdata(), at_i64v(2, I64(0, 2)),
                        at_i64v(2, I64(1, 1)), at_t(TFS_DTYPE_INT64, 0, NULL, I64(3))),
              TFS_DTYPE_FLOAT, 2, DIMS(3, 4),
              ((const float[]){0, 0, 0, 0, 3, 4, 5, 6, 0, 0, 0, 0}));
    /* no indices: num_segments rows of zeros, or none */
    at_expect(seg_run_n("SparseSegmentSqrtNWithNumSegments", cdata(), at_i32v(0, NULL),
                        at_i32v(0, NULL), at_i32s(2)),
              TFS_DTYPE_FLOAT, 2, DIMS(2, 4), ((const float[]){0, 0, 0, 0, 0, 0, 0, 0}));
    at_expect(seg_run_n("SparseSegmentSumWithNumSegments", cdata(), at_i32v(0, NULL),
                        at_i32v(0, NULL), at_i32s(0)),
              TFS_DTYPE_FLOAT, 2, DIMS(0, 4), NULL);
    /* Each op's rows equal its form without num_segments, bit for bit (that form is checked
     * against float64 above), for segments of 1..12 rows; the extra rows are 0. */
    enum { ROWS = 20, COLS = 5, N = 1 + 2 + 3 + 12 };
    float data[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        data[i] = (float)((i * 37) % 101) / 7.0f - 6.0f;
    int32_t ind[N], seg[N];
    for (int i = 0; i < N; i++) {
        ind[i] = (i * 7) % ROWS;
        seg[i] = i < 1 ? 0 : i < 3 ? 1 : i < 6 ? 3 : 4;   /* segment 2 empty */
    }
    const char *ops[3][2] = {{"SparseSegmentSum", "SparseSegmentSumWithNumSegments"},
                             {"SparseSegmentMean", "SparseSegmentMeanWithNumSegments"},
                             {"SparseSegmentSqrtN", "SparseSegmentSqrtNWithNumSegments"}};
    for (int o = 0; o < 3; o++) {
        tfs_tensor *a = seg_run(ops[o][0], at_t(TFS_DTYPE_FLOAT, 2, DIMS(ROWS, COLS), data),
                                at_i32v(N, ind), at_i32v(N, seg));
        tfs_tensor *b = seg_run_n(ops[o][1], at_t(TFS_DTYPE_FLOAT, 2, DIMS(ROWS, COLS), data),
                                  at_i32v(N, ind), at_i32v(N, seg), at_i32s(7));
        ck_assert(tfs_shape_equal(a->rank, a->dims, 2, DIMS(5, COLS)));
        ck_assert(tfs_shape_equal(b->rank, b->dims, 2, DIMS(7, COLS)));
        ck_assert_msg(memcmp(a->data, b->data, 5 * COLS * sizeof(float)) == 0, "%s", ops[o][1]);
        for (int i = 5 * COLS; i < 7 * COLS; i++)
            ck_assert_msg(((const float *)b->data)[i] == 0.0f, "%s: row past the ids not 0",
                          ops[o][1]);
        tfs_tensor_unref(a);
        tfs_tensor_unref(b);
    }
}
END_TEST

START_TEST(test_sparse_segment_num_segments_errors)
{
    tfs_tensor *in[4] = {cdata(), at_i32v(2, (const int32_t[]){0, 1}),
                         at_i32v(2, (const int32_t[]){0, 2}), at_i32s(2)};
    expect_err("SparseSegmentSumWithNumSegments", 4, in, 1, "segment ids must be < num_segments");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){0, 0});
    in[3] = at_i32s(-1);
    expect_err("SparseSegmentMeanWithNumSegments", 4, in, 1, "segment ids must be >= 0");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){0, 0});
    in[3] = at_i32v(1, (const int32_t[]){3});
    expect_err("SparseSegmentSqrtNWithNumSegments", 4, in, 1,
               "num_segments should be a scalar, not shape [1]");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){0, 0});
    in[3] = at_t(TFS_DTYPE_FLOAT, 0, NULL, ((const float[]){3}));
    expect_err("SparseSegmentSumWithNumSegments", 4, in, 1, "num_segments must be int32 or int64");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){1, 0});
    in[3] = at_i32s(3);
    expect_err("SparseSegmentSumWithNumSegments", 4, in, 1, "segment ids are not increasing");
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){0, 0});
    expect_err("SparseSegmentSumWithNumSegments", 3, in, 1, "expects 4 inputs, got 3");
    /* a hostile num_segments: an error, not a crash or a huge allocation */
    in[0] = cdata();
    in[1] = at_i32v(2, (const int32_t[]){0, 1});
    in[2] = at_i32v(2, (const int32_t[]){0, 0});
    in[3] = at_t(TFS_DTYPE_INT64, 0, NULL, I64(INT64_MAX));
    expect_err("SparseSegmentSumWithNumSegments", 4, in, 1, "output shape overflows int64");
}
END_TEST

Suite *suite_runtime_sparse(void)
{
    Suite *s = suite_create("runtime_sparse");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_sparse_reshape);
    tcase_add_test(tc, test_sparse_fill_empty_rows);
    tcase_add_test(tc, test_sparse_segment_examples);
    tcase_add_test(tc, test_sparse_segment_float64_reference);
    tcase_add_test(tc, test_sparse_segment_errors);
    tcase_add_test(tc, test_sparse_segment_num_segments);
    tcase_add_test(tc, test_sparse_segment_num_segments_errors);
    suite_add_tcase(s, tc);
    return s;
}
