/* Tests of BroadcastTo and MatrixBandPart (runtime/kernels/array-expand.c): small cases by hand,
 * larger shapes against index loops written here, strings, empty shapes, the per-tensor size
 * limit, and TensorFlow's INVALID_ARGUMENT messages. */
#include <check.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_array_expand(void);

#define I32(...) ((const int32_t[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define F32(...) ((const float[]){__VA_ARGS__})
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static tfs_tensor *iota_f32(int rank, const int64_t *dims)
{
    tfs_tensor *t = at_t(TFS_DTYPE_FLOAT, rank, dims, NULL);
    for (int64_t i = 0; i < t->nelem; i++)
        ((float *)t->data)[i] = (float)i + 0.5f;
    return t;
}

/* ---- BroadcastTo ---------------------------------------------------------------------------- */

START_TEST(test_broadcast_to)
{
    tfs_tensor *in[2];
    in[0] = at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), F32(1, 2, 3));
    in[1] = at_i32v(2, I32(2, 3));
    at_expect(at_run1("BroadcastTo", 2, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(2, 3),
              F32(1, 2, 3, 1, 2, 3));
    in[0] = at_t(TFS_DTYPE_INT32, 2, DIMS(2, 1), I32(7, 8));
    in[1] = at_i64v(2, I64(2, 3));
    at_expect(at_run1("BroadcastTo", 2, in, true, NULL, NULL), TFS_DTYPE_INT32, 2, DIMS(2, 3),
              I32(7, 7, 7, 8, 8, 8));
    in[0] = at_i32s(4);   /* a scalar */
    in[1] = at_i32v(2, I32(2, 2));
    at_expect(at_run1("BroadcastTo", 2, in, true, NULL, NULL), TFS_DTYPE_INT32, 2, DIMS(2, 2),
              I32(4, 4, 4, 4));
    /* the same shape: the input unchanged */
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(1, 2), F32(5, 6));
    in[1] = at_i32v(2, I32(1, 2));
    at_expect(at_run1("BroadcastTo", 2, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(1, 2),
              F32(5, 6));
    /* strings are copied */
    const char *s[] = {"a", "bc"}, *want[] = {"a", "bc", "a", "bc", "a", "bc"};
    in[0] = at_strs(1, DIMS(2), s);
    in[1] = at_i32v(2, I32(3, 2));
    at_expect_strs(at_run1("BroadcastTo", 2, in, true, NULL, NULL), 2, DIMS(3, 2), want);
    /* empty results: size 1 to 0 */
    in[0] = at_t(TFS_DTYPE_FLOAT, 2, DIMS(3, 1), F32(1, 2, 3));
    in[1] = at_i32v(2, I32(3, 0));
    at_expect(at_run1("BroadcastTo", 2, in, true, NULL, NULL), TFS_DTYPE_FLOAT, 2, DIMS(3, 0),
              NULL);
    /* [1,3,1] to [2,2,3,4] against a loop */
    in[0] = iota_f32(3, DIMS(1, 3, 1));
    in[1] = at_i32v(4, I32(2, 2, 3, 4));
    tfs_tensor *out = at_run1("BroadcastTo", 2, in, true, NULL, NULL);
    ck_assert(tfs_shape_equal(out->rank, out->dims, 4, DIMS(2, 2, 3, 4)));
    for (int64_t i = 0; i < out->nelem; i++) {
        int64_t c = (i / 4) % 3;
        ck_assert_float_eq(((const float *)out->data)[i], (float)c + 0.5f);
    }
    tfs_tensor_unref(out);
}
END_TEST

static void expect_bcast_error(tfs_tensor *input, tfs_tensor *shape, enum tfs_code code,
                               const char *needle)
{
    tfs_tensor *in[2] = {input, shape}, *out = NULL;
    tfs_status st;
    ck_assert_int_eq(at_run("BroadcastTo", 2, in, true, NULL, NULL, 1, &out, &st), code);
    rt_assert_err(st, code, needle);
    rt_assert_err(st, code, "node 'op' (BroadcastTo)");
}

START_TEST(test_broadcast_to_errors)
{
    const enum tfs_code E = TFS_INVALID_ARGUMENT;
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL), at_i32v(1, I32(4)), E,
                       "Incompatible shapes: [3] vs. [4]");
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL), at_i32v(1, I32(1)), E,
                       "Unable to broadcast tensor of shape [3] to tensor of shape [1]");
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 1, DIMS(0), NULL), at_i32v(1, I32(1)), E,
                       "Unable to broadcast tensor of shape [0] to tensor of shape [1]");
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 3), NULL), at_i32v(1, I32(3)), E,
                       "Rank of input (2) must be no greater than rank of output shape (1).");
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL), at_i32v(2, I32(-1, 3)), E,
                       "Dimension -1 must be >= 0");
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL), at_i32s(3), E, "must be 1-D");
    /* 2^50 floats from one: refused by the per-tensor byte limit, not allocated */
    expect_bcast_error(at_t(TFS_DTYPE_FLOAT, 0, NULL, F32(1)),
                       at_i64v(3, I64(1 << 20, 1 << 20, 1 << 10)), TFS_RESOURCE_EXHAUSTED,
                       "limit");
}
END_TEST

/* ---- MatrixBandPart ------------------------------------------------------------------------- */

static tfs_tensor *band_run(tfs_tensor *input, tfs_tensor *lower, tfs_tensor *upper,
                            enum tfs_code *rc, tfs_status *st)
{
    tfs_tensor *in[3] = {input, lower, upper}, *out = NULL;
    *rc = at_run("MatrixBandPart", 3, in, true, NULL, NULL, 1, &out, st);
    return out;
}

START_TEST(test_matrix_band_part)
{
    /* the causal mask of an attention layer: band_part(ones, -1, 0) */
    enum tfs_code rc;
    tfs_status st;
    tfs_tensor *out = band_run(at_t(TFS_DTYPE_FLOAT, 2, DIMS(3, 3), F32(1, 1, 1, 1, 1, 1, 1, 1, 1)),
                               at_t(TFS_DTYPE_INT64, 0, NULL, I64(-1)),
                               at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)), &rc, &st);
    ck_assert_msg(rc == TFS_OK, "%s", st.msg);
    at_expect(out, TFS_DTYPE_FLOAT, 2, DIMS(3, 3), F32(1, 0, 0, 1, 1, 0, 1, 1, 1));
    /* several limits on [2, 4, 5] against the definition, with int32 and int64 limits */
    const int64_t limits[][2] = {{-1, 0}, {0, -1}, {0, 0}, {1, 2}, {-1, -1}, {4, 5}, {2, 0},
                                 {0, 5}, {3, -1}};
    for (size_t c = 0; c < sizeof limits / sizeof limits[0]; c++) {
        int64_t lo = limits[c][0], up = limits[c][1];
        bool i32 = c % 2;
        tfs_tensor *l = i32 ? at_t(TFS_DTYPE_INT32, 0, NULL, I32((int32_t)lo))
                            : at_t(TFS_DTYPE_INT64, 0, NULL, &lo);
        tfs_tensor *u = i32 ? at_t(TFS_DTYPE_INT32, 0, NULL, I32((int32_t)up))
                            : at_t(TFS_DTYPE_INT64, 0, NULL, &up);
        out = band_run(iota_f32(3, DIMS(2, 4, 5)), l, u, &rc, &st);
        ck_assert_msg(rc == TFS_OK, "%s", st.msg);
        ck_assert(tfs_shape_equal(out->rank, out->dims, 3, DIMS(2, 4, 5)));
        for (int64_t e = 0; e < out->nelem; e++) {
            int64_t i = (e / 5) % 4, j = e % 5;
            bool keep = (lo < 0 || i - j <= lo) && (up < 0 || j - i <= up);
            float want = keep ? (float)e + 0.5f : 0.0f;
            ck_assert_msg(((const float *)out->data)[e] == want,
                          "limits (%lld, %lld): element %lld is %g, want %g", (long long)lo,
                          (long long)up, (long long)e, ((const float *)out->data)[e], want);
        }
        tfs_tensor_unref(out);
    }
    /* int32 elements, an empty batch */
    out = band_run(at_t(TFS_DTYPE_INT32, 2, DIMS(2, 2), I32(1, 2, 3, 4)),
                   at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)), at_t(TFS_DTYPE_INT64, 0, NULL, I64(1)),
                   &rc, &st);
    at_expect(out, TFS_DTYPE_INT32, 2, DIMS(2, 2), I32(1, 2, 0, 4));
    out = band_run(at_t(TFS_DTYPE_FLOAT, 3, DIMS(0, 2, 2), NULL),
                   at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)), at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)),
                   &rc, &st);
    at_expect(out, TFS_DTYPE_FLOAT, 3, DIMS(0, 2, 2), NULL);
}
END_TEST

START_TEST(test_matrix_band_part_errors)
{
    enum tfs_code rc;
    tfs_status st;
    band_run(at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL), at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)),
             at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)), &rc, &st);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "input must be at least 2-dim, received shape: [3]");
    band_run(at_t(TFS_DTYPE_FLOAT, 2, DIMS(4, 5), NULL), at_t(TFS_DTYPE_INT64, 0, NULL, I64(5)),
             at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)), &rc, &st);
    rt_assert_err(st, TFS_INVALID_ARGUMENT,
                  "num_lower must be negative or less or equal to number of rows (4) got: 5");
    band_run(at_t(TFS_DTYPE_FLOAT, 2, DIMS(4, 5), NULL), at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)),
             at_t(TFS_DTYPE_INT64, 0, NULL, I64(6)), &rc, &st);
    rt_assert_err(st, TFS_INVALID_ARGUMENT,
                  "num_upper must be negative or less or equal to number of columns (5) got: 6");
    band_run(at_t(TFS_DTYPE_FLOAT, 2, DIMS(4, 5), NULL), at_i64v(1, I64(0)),
             at_t(TFS_DTYPE_INT64, 0, NULL, I64(0)), &rc, &st);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "num_lower must be scalar, got shape [1]");
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'op' (MatrixBandPart)");
}
END_TEST

Suite *suite_runtime_array_expand(void)
{
    Suite *s = suite_create("runtime_array_expand");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_broadcast_to);
    tcase_add_test(tc, test_broadcast_to_errors);
    tcase_add_test(tc, test_matrix_band_part);
    tcase_add_test(tc, test_matrix_band_part_errors);
    suite_add_tcase(s, tc);
    return s;
}
