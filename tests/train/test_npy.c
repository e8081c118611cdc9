/* Tests of the NPY reader (train/npy.c). Files written by NumPy itself (/usr/bin/python3 with
 * numpy, skipped when absent) in each supported dtype, both byte orders, format versions 1.0, 2.0
 * and 3.0, and Fortran order (refused); values are checked against the same formula computed here.
 * Headers written by hand cover what NumPy would not write: malformed dicts, missing or extra
 * keys, unsupported dtypes, sizes that disagree with the shape.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_npy(void);

#define ASSERT_MSG_HAS(st, text) \
    ck_assert_msg(strstr((st).msg, (text)) != NULL, "message '%s' lacks '%s'", (st).msg, (text))

static bool have_numpy(void)
{
    return tt_sh("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* Element i of the arrays the script writes: (i * 3 - 7) in the array's dtype. */
static double expect_at(int64_t i)
{
    return (double)(i * 3 - 7);
}

START_TEST(test_npy_numpy_files)
{
    if (!have_numpy()) {
        fprintf(stderr, "SKIP test_npy_numpy_files: /usr/bin/python3 with numpy not found\n");
        return;
    }
    char *dir = tfs_test_mkdtemp();
    static const struct {
        const char    *descr;
        enum tfs_dtype dt;
    } types[] = {{"<f4", TFS_DTYPE_FLOAT}, {"<f8", TFS_DTYPE_DOUBLE}, {"<i4", TFS_DTYPE_INT32},
                 {"<i8", TFS_DTYPE_INT64}, {"|u1", TFS_DTYPE_UINT8},  {"|i1", TFS_DTYPE_INT8},
                 {">f4", TFS_DTYPE_FLOAT}, {">f8", TFS_DTYPE_DOUBLE}, {">i4", TFS_DTYPE_INT32},
                 {">i8", TFS_DTYPE_INT64}};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        for (int version = 1; version <= 3; version++) {
            const char *p = tt_path(dir, "a.npy");
            /* uint8 wraps -7 to 249 etc., like the C cast below. */
            ck_assert_int_eq(tt_sh("/usr/bin/python3 -c \"import numpy as np\n"
                                   "a = (np.arange(24) * 3 - 7).astype('%s').reshape(2, 3, 4)\n"
                                   "f = open('%s', 'wb')\n"
                                   "np.lib.format.write_array(f, a, version=(%d, 0))\"",
                                   types[k].descr, p, version), 0);
            tfs_tensor *t;
            tfs_status  st;
            ck_assert_msg(tfs_npy_read(p, &t, &st) == TFS_OK, "%s v%d: %s", types[k].descr,
                          version, st.msg);
            ck_assert_int_eq(t->dtype, types[k].dt);
            ck_assert(t->rank == 3 && t->dims[0] == 2 && t->dims[1] == 3 && t->dims[2] == 4);
            for (int64_t i = 0; i < 24; i++) {
                double got = 0, want = expect_at(i);
                switch (t->dtype) {
                case TFS_DTYPE_FLOAT:  got = ((float *)t->data)[i]; break;
                case TFS_DTYPE_DOUBLE: got = ((double *)t->data)[i]; break;
                case TFS_DTYPE_INT32:  got = ((int32_t *)t->data)[i]; break;
                case TFS_DTYPE_INT64:  got = (double)((int64_t *)t->data)[i]; break;
                case TFS_DTYPE_UINT8:
                    got = ((uint8_t *)t->data)[i];
                    want = (uint8_t)(int)want;
                    break;
                case TFS_DTYPE_INT8:
                    got = ((int8_t *)t->data)[i];
                    want = (int8_t)(int)want;
                    break;
                default: break;
                }
                ck_assert_msg(got == want, "%s v%d element %lld: %g, want %g", types[k].descr,
                              version, (long long)i, got, want);
            }
            tfs_tensor_unref(t);
        }
    }
    /* A scalar, an empty array, Fortran order, an unsupported dtype, gzip. */
    tfs_tensor *t;
    tfs_status  st;
    ck_assert_int_eq(tt_sh("cd '%s' && /usr/bin/python3 -c \"import numpy as np\n"
                           "np.save('s.npy', np.float32(2.5))\n"
                           "np.save('e.npy', np.zeros((0, 5), np.int64))\n"
                           "np.save('f.npy', np.asfortranarray(np.ones((2, 3), np.float32)))\n"
                           "np.save('h.npy', np.ones(3, np.float16))\n"
                           "np.save('g.npy', np.arange(1000, dtype=np.int32))\"", dir), 0);
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "s.npy"), &t, &st), TFS_OK);
    ck_assert(t->rank == 0 && ((float *)t->data)[0] == 2.5f);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "e.npy"), &t, &st), TFS_OK);
    ck_assert(t->rank == 2 && t->dims[0] == 0 && t->dims[1] == 5 && t->dtype == TFS_DTYPE_INT64);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "f.npy"), &t, &st), TFS_UNIMPLEMENTED);
    ASSERT_MSG_HAS(st, "Fortran order");
    ASSERT_MSG_HAS(st, "f.npy");
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "h.npy"), &t, &st), TFS_UNIMPLEMENTED);
    ASSERT_MSG_HAS(st, "'<f2'");
    if (tt_have("gzip")) {
        ck_assert_int_eq(tt_sh("gzip -f '%s'", tt_path(dir, "g.npy")), 0);
        ck_assert_int_eq(tfs_npy_read(tt_path(dir, "g.npy.gz"), &t, &st), TFS_OK);
        ck_assert(t->dims[0] == 1000 && ((int32_t *)t->data)[999] == 999);
        tfs_tensor_unref(t);
    }
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Writes a v1.0 file with the given header text and data bytes. */
static const char *write_npy(const char *dir, const char *header, const void *data, size_t n)
{
    static uint8_t buf[4096];
    size_t hl = strlen(header);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)hl;
    buf[9] = (uint8_t)(hl >> 8);
    memcpy(buf + 10, header, hl);
    memcpy(buf + 10 + hl, data, n);
    const char *p = tt_path(dir, "h.npy");
    ck_assert_int_eq(tfs_test_write_file(p, buf, 10 + hl + n), 0);
    return p;
}

static void expect_bad(const char *dir, const char *header, size_t ndata, enum tfs_code code,
                       const char *text)
{
    static const uint8_t data[64] = {0};
    tfs_tensor *t = (tfs_tensor *)1;
    tfs_status  st;
    ck_assert_int_eq(tfs_npy_read(write_npy(dir, header, data, ndata), &t, &st), code);
    ck_assert_ptr_null(t);
    ASSERT_MSG_HAS(st, "h.npy");
    ASSERT_MSG_HAS(st, text);
}

START_TEST(test_npy_hand_written)
{
    char *dir = tfs_test_mkdtemp();
    /* Keys in another order, double quotes, no trailing comma: still what the format allows. */
    int32_t v[3] = {1, -2, 3};
    tfs_tensor *t;
    tfs_status  st;
    const char *p = write_npy(dir, "{\"shape\": (3,), 'fortran_order': False, 'descr': '<i4'}\n",
                              v, sizeof v);
    ck_assert_msg(tfs_npy_read(p, &t, &st) == TFS_OK, "%s", st.msg);
    ck_assert(t->dtype == TFS_DTYPE_INT32 && t->dims[0] == 3 && ((int32_t *)t->data)[1] == -2);
    tfs_tensor_unref(t);
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 8,
               TFS_DATA_LOSS, "truncated");
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 16,
               TFS_DATA_LOSS, "trailing bytes");
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': False}", 0, TFS_DATA_LOSS,
               "lacks 'shape'");
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), 'x': 1}", 12,
               TFS_DATA_LOSS, "'x'");
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': Maybe, 'shape': (3,)}", 12,
               TFS_DATA_LOSS, "fortran_order");
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, -1)}", 12,
               TFS_DATA_LOSS, "shape");
    expect_bad(dir, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,", 12, TFS_DATA_LOSS,
               "npy header");
    expect_bad(dir, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,)}", 12,
               TFS_UNIMPLEMENTED, "structured");
    expect_bad(dir, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}", 24,
               TFS_UNIMPLEMENTED, "'<c8'");
    expect_bad(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, "
               "99999999999, 99999999999)}", 12, TFS_DATA_LOSS, "needs more than");
    expect_bad(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}",
               4, TFS_UNIMPLEMENTED, "more than 8 dimensions");
    expect_bad(dir, "[]", 0, TFS_DATA_LOSS, "'{'");
    /* The preamble: magic, version, a header length past the end. */
    static const uint8_t nomagic[] = "\x93NUMPX\x01\x00\x00\x00";
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "m.npy"), nomagic, 10), 0);
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "m.npy"), &t, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "magic");
    static const uint8_t v9[] = "\x93NUMPY\x09\x00\x00\x00";
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "m.npy"), v9, 10), 0);
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "m.npy"), &t, &st), TFS_UNIMPLEMENTED);
    static const uint8_t longh[] = "\x93NUMPY\x02\x00\xff\xff\xff\x7f{";
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "m.npy"), longh, 13), 0);
    ck_assert_int_eq(tfs_npy_read(tt_path(dir, "m.npy"), &t, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "runs past the end");
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_train_npy(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_npy_numpy_files);
    tcase_add_test(tc, test_npy_hand_written);
    suite_add_tcase(s, tc);
    return s;
}
