/* Tests of the IDX reader and writer (train/idx.c): files written byte by byte here (so the
 * expected values do not depend on our writer), round trips of every element type through
 * tfs_idx_write, plain and gzip-compressed, and damaged files that must give DATA_LOSS naming the
 * file: a bad magic or type, a rank out of range, a short header, missing or trailing data, and
 * dimensions whose product is enormous (no allocation may follow them).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_idx(void);

#define ASSERT_MSG_HAS(st, text) \
    ck_assert_msg(strstr((st).msg, (text)) != NULL, "message '%s' lacks '%s'", (st).msg, (text))

static enum tfs_code read_bytes(const char *dir, const uint8_t *b, size_t n, tfs_tensor **t,
                                tfs_status *st)
{
    const char *p = tt_path(dir, "f.idx");
    ck_assert_int_eq(tfs_test_write_file(p, b, n), 0);
    return tfs_idx_read(p, t, st);
}

START_TEST(test_idx_hand_written)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_tensor *t;
    tfs_status  st;
    /* int16 [2, 2]: 258, -2, 32767, -32768, big-endian */
    static const uint8_t i16[] = {0, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 2,
                                  0x01, 0x02, 0xff, 0xfe, 0x7f, 0xff, 0x80, 0x00};
    ck_assert_msg(read_bytes(dir, i16, sizeof i16, &t, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(t->dtype, TFS_DTYPE_INT16);
    ck_assert_int_eq(t->rank, 2);
    const int16_t *v = t->data;
    ck_assert(v[0] == 258 && v[1] == -2 && v[2] == 32767 && v[3] == -32768);
    tfs_tensor_unref(t);
    /* float32 [2]: 1.5 (0x3fc00000) and -0.25 (0xbe800000) */
    static const uint8_t f32[] = {0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3f, 0xc0, 0, 0, 0xbe, 0x80, 0, 0};
    ck_assert_int_eq(read_bytes(dir, f32, sizeof f32, &t, &st), TFS_OK);
    ck_assert_int_eq(t->dtype, TFS_DTYPE_FLOAT);
    ck_assert(((float *)t->data)[0] == 1.5f && ((float *)t->data)[1] == -0.25f);
    tfs_tensor_unref(t);
    /* float64 [1]: -2.0 (0xc000000000000000); int32 [1]: -5; uint8 [3] 0 128 255; int8 [1] -1 */
    static const uint8_t f64[] = {0, 0, 0x0E, 1, 0, 0, 0, 1, 0xc0, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(read_bytes(dir, f64, sizeof f64, &t, &st), TFS_OK);
    ck_assert(t->dtype == TFS_DTYPE_DOUBLE && ((double *)t->data)[0] == -2.0);
    tfs_tensor_unref(t);
    static const uint8_t i32[] = {0, 0, 0x0C, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfb};
    ck_assert_int_eq(read_bytes(dir, i32, sizeof i32, &t, &st), TFS_OK);
    ck_assert(t->dtype == TFS_DTYPE_INT32 && ((int32_t *)t->data)[0] == -5);
    tfs_tensor_unref(t);
    static const uint8_t u8[] = {0, 0, 0x08, 1, 0, 0, 0, 3, 0, 128, 255};
    ck_assert_int_eq(read_bytes(dir, u8, sizeof u8, &t, &st), TFS_OK);
    ck_assert(t->dtype == TFS_DTYPE_UINT8 && ((uint8_t *)t->data)[2] == 255);
    tfs_tensor_unref(t);
    static const uint8_t i8[] = {0, 0, 0x09, 1, 0, 0, 0, 1, 0xff};
    ck_assert_int_eq(read_bytes(dir, i8, sizeof i8, &t, &st), TFS_OK);
    ck_assert(t->dtype == TFS_DTYPE_INT8 && ((int8_t *)t->data)[0] == -1);
    tfs_tensor_unref(t);
    /* A zero-sized dimension: no data at all. */
    static const uint8_t empty[] = {0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 28};
    ck_assert_int_eq(read_bytes(dir, empty, sizeof empty, &t, &st), TFS_OK);
    ck_assert(t->nelem == 0 && t->dims[1] == 28);
    tfs_tensor_unref(t);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

static void fill(tfs_tensor *t, uint64_t seed)
{
    uint8_t *b = t->data;
    for (size_t i = 0; i < t->nbytes; i++)
        b[i] = (uint8_t)tt_rand(&seed);
    if (t->dtype == TFS_DTYPE_FLOAT)   /* keep NaN payloads out of the byte comparison */
        for (int64_t i = 0; i < t->nelem; i++)
            ((float *)t->data)[i] = (float)(i * 0.37 - 5);
    if (t->dtype == TFS_DTYPE_DOUBLE)
        for (int64_t i = 0; i < t->nelem; i++)
            ((double *)t->data)[i] = -1e300 + (double)i * 1e299;
}

START_TEST(test_idx_round_trip)
{
    static const enum tfs_dtype types[] = {TFS_DTYPE_UINT8, TFS_DTYPE_INT8, TFS_DTYPE_INT16,
                                           TFS_DTYPE_INT32, TFS_DTYPE_FLOAT, TFS_DTYPE_DOUBLE};
    char      *dir = tfs_test_mkdtemp();
    bool       gz = tt_have("gzip");
    tfs_status st;
    for (int k = 0; k < 6; k++) {
        int64_t     dims[3] = {5, 3, 7};
        tfs_tensor *t, *back;
        ck_assert_int_eq(tfs_tensor_new(types[k], 3, dims, &t, &st), TFS_OK);
        fill(t, (uint64_t)k + 1);
        const char *p = tt_path(dir, "r.idx");
        ck_assert_msg(tfs_idx_write(p, t, &st) == TFS_OK, "%s", st.msg);
        ck_assert_msg(tfs_idx_read(p, &back, &st) == TFS_OK, "%s", st.msg);
        ck_assert_msg(tt_tensor_equal(t, back), "%s differs", tfs_dtype_name(types[k]));
        tfs_tensor_unref(back);
        if (gz) {
            ck_assert_int_eq(tt_sh("gzip -f '%s'", p), 0);
            ck_assert_msg(tfs_idx_read(tt_path(dir, "r.idx.gz"), &back, &st) == TFS_OK, "%s",
                          st.msg);
            ck_assert(tt_tensor_equal(t, back));
            tfs_tensor_unref(back);
        }
        tfs_tensor_unref(t);
    }
    tfs_tensor *s;
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &s, &st), TFS_OK);
    ck_assert_int_eq(tfs_idx_write(tt_path(dir, "s.idx"), s, &st), TFS_INVALID_ARGUMENT);
    tfs_tensor_unref(s);
    int64_t one = 1;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT64, 1, &one, &s, &st), TFS_OK);
    ck_assert_int_eq(tfs_idx_write(tt_path(dir, "s.idx"), s, &st), TFS_INVALID_ARGUMENT);
    tfs_tensor_unref(s);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

static void expect_bad(const char *dir, const uint8_t *b, size_t n, const char *text)
{
    tfs_tensor *t = (tfs_tensor *)1;
    tfs_status  st;
    ck_assert_int_eq(read_bytes(dir, b, n, &t, &st), TFS_DATA_LOSS);
    ck_assert_ptr_null(t);
    ASSERT_MSG_HAS(st, "f.idx");
    ASSERT_MSG_HAS(st, text);
}

START_TEST(test_idx_corrupt)
{
    char *dir = tfs_test_mkdtemp();
    static const uint8_t magic[] = {1, 0, 0x08, 1, 0, 0, 0, 1, 7};
    expect_bad(dir, magic, sizeof magic, "bad magic");
    static const uint8_t type[] = {0, 0, 0x0A, 1, 0, 0, 0, 1, 7};
    expect_bad(dir, type, sizeof type, "bad magic");
    static const uint8_t rank0[] = {0, 0, 0x08, 0};
    expect_bad(dir, rank0, sizeof rank0, "0 dimensions");
    static const uint8_t rank9[] = {0, 0, 0x08, 9};
    expect_bad(dir, rank9, sizeof rank9, "9 dimensions");
    static const uint8_t shorthdr[] = {0, 0, 0x08, 2, 0, 0, 0, 1, 0, 0};
    expect_bad(dir, shorthdr, sizeof shorthdr, "truncated header");
    static const uint8_t tiny[] = {0, 0};
    expect_bad(dir, tiny, sizeof tiny, "too short");
    static const uint8_t missing[] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0};
    expect_bad(dir, missing, sizeof missing, "truncated");
    static const uint8_t trailing[] = {0, 0, 0x08, 1, 0, 0, 0, 2, 1, 2, 3};
    expect_bad(dir, trailing, sizeof trailing, "trailing bytes");
    static const uint8_t huge[] = {0, 0, 0x0E, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8};
    expect_bad(dir, huge, sizeof huge, "need more data");
    /* A gzip file cut short. */
    if (tt_have("gzip")) {
        uint8_t data[4 + 4 + 1000] = {0, 0, 0x08, 1, 0, 0, 0x03, 0xe8};
        ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "g.idx"), data, sizeof data), 0);
        ck_assert_int_eq(tt_sh("gzip -f '%s' && head -c 20 '%s' > '%s'", tt_path(dir, "g.idx"),
                               tt_path(dir, "g.idx.gz"), tt_path(dir, "cut.gz")), 0);
        tfs_tensor *t;
        tfs_status  st;
        ck_assert_int_eq(tfs_idx_read(tt_path(dir, "cut.gz"), &t, &st), TFS_DATA_LOSS);
        ASSERT_MSG_HAS(st, "cut.gz");
        ck_assert_int_eq(tfs_idx_read(tt_path(dir, "g.idx.gz"), &t, &st), TFS_OK);
        ck_assert_int_eq(t->dims[0], 1000);
        tfs_tensor_unref(t);
    }
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_train_idx(void)
{
    Suite *s = suite_create("idx");
    TCase *tc = tcase_create("idx");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_idx_hand_written);
    tcase_add_test(tc, test_idx_round_trip);
    tcase_add_test(tc, test_idx_corrupt);
    suite_add_tcase(s, tc);
    return s;
}
