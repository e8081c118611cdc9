/* Tests of the CSV reader (train/csv.c): selection of feature and label columns by name, quoting,
 * CRLF, blank lines and blanks around values, label dtypes, gzip input, and the errors that must
 * name the file, the line and the column (by number and by name).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_csv(void);

#define ASSERT_MSG_HAS(st, text) \
    ck_assert_msg(strstr((st).msg, (text)) != NULL, "message '%s' lacks '%s'", (st).msg, (text))

static char *dir;

static void setup(void)
{
    dir = tfs_test_mkdtemp();
}

static void teardown(void)
{
    tfs_test_rmtree(dir);
    free(dir);
}

static const char *write_csv(const char *name, const char *text)
{
    const char *p = tt_path(dir, name);
    ck_assert_int_eq(tfs_test_write_file(p, text, strlen(text)), 0);
    return p;
}

static void assert_floats(const tfs_tensor *t, int64_t rows, int64_t cols, const float *want)
{
    ck_assert_int_eq(t->dtype, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(t->rank, 2);
    ck_assert_int_eq(t->dims[0], rows);
    ck_assert_int_eq(t->dims[1], cols);
    for (int64_t i = 0; i < rows * cols; i++)
        ck_assert_msg(((const float *)t->data)[i] == want[i], "element %lld: %g, want %g",
                      (long long)i, ((const float *)t->data)[i], want[i]);
}

START_TEST(test_csv_basic)
{
    const char *p = write_csv("a.csv", "x,y,label\n1,2,0\n3.5,-4e2,1\n0.125,  7 ,2\n");
    tfs_csv_opts o = tfs_csv_opts_default();
    o.label = "label";
    o.label_dtype = TFS_DTYPE_INT32;
    tfs_tensor *f, *l;
    tfs_status  st;
    ck_assert_msg(tfs_csv_read(p, &o, &f, &l, &st) == TFS_OK, "%s", st.msg);
    static const float want[] = {1, 2, 3.5f, -400, 0.125f, 7};
    assert_floats(f, 3, 2, want);
    ck_assert_int_eq(l->dtype, TFS_DTYPE_INT32);
    ck_assert_int_eq(l->dims[0], 3);
    ck_assert(((int32_t *)l->data)[0] == 0 && ((int32_t *)l->data)[2] == 2);
    tfs_tensor_unref(f);
    tfs_tensor_unref(l);
    /* Chosen columns in a chosen order, a float label by default, no label at all. */
    static const char *const cols[] = {"y", "x"};
    o = tfs_csv_opts_default();
    o.features = cols;
    o.n_features = 2;
    o.label = "label";
    ck_assert_int_eq(tfs_csv_read(p, &o, &f, &l, &st), TFS_OK);
    static const float swapped[] = {2, 1, -400, 3.5f, 7, 0.125f};
    assert_floats(f, 3, 2, swapped);
    ck_assert_int_eq(l->dtype, TFS_DTYPE_FLOAT);
    ck_assert(((float *)l->data)[1] == 1.0f);
    tfs_tensor_unref(f);
    tfs_tensor_unref(l);
    ck_assert_int_eq(tfs_csv_read(p, NULL, &f, &l, &st), TFS_OK);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(f->dims[1], 3);
    tfs_tensor_unref(f);
}
END_TEST

START_TEST(test_csv_quotes_crlf_blank_lines)
{
    const char *p = write_csv("q.csv", "\"a, with comma\",\"b \"\"quoted\"\"\",c\r\n"
                                       "\r\n"
                                       "\"1\",2,\"3\"\r\n"
                                       "\n"
                                       "4,\"5\",6\r\n"
                                       "7,8,9");   /* no final line break */
    static const char *const cols[] = {"a, with comma", "b \"quoted\""};
    tfs_csv_opts o = tfs_csv_opts_default();
    o.features = cols;
    o.n_features = 2;
    o.label = "c";
    o.label_dtype = TFS_DTYPE_INT64;
    tfs_tensor *f, *l;
    tfs_status  st;
    ck_assert_msg(tfs_csv_read(p, &o, &f, &l, &st) == TFS_OK, "%s", st.msg);
    static const float want[] = {1, 2, 4, 5, 7, 8};
    assert_floats(f, 3, 2, want);
    ck_assert(l->dtype == TFS_DTYPE_INT64 && ((int64_t *)l->data)[2] == 9);
    tfs_tensor_unref(f);
    tfs_tensor_unref(l);
    /* Semicolons, inf and nan, header only. */
    p = write_csv("s.csv", "u;v\ninf;-nan\n");
    o = tfs_csv_opts_default();
    o.delimiter = ';';
    ck_assert_int_eq(tfs_csv_read(p, &o, &f, NULL, &st), TFS_OK);
    ck_assert(isinf(((float *)f->data)[0]) && isnan(((float *)f->data)[1]));
    tfs_tensor_unref(f);
    p = write_csv("h.csv", "u,v\n");
    ck_assert_int_eq(tfs_csv_read(p, NULL, &f, NULL, &st), TFS_OK);
    ck_assert(f->dims[0] == 0 && f->dims[1] == 2);
    tfs_tensor_unref(f);
}
END_TEST

START_TEST(test_csv_gzip)
{
    if (!tt_have("gzip"))
        return;
    char text[65536];
    size_t n = (size_t)snprintf(text, sizeof text, "p,q\n");
    for (int i = 0; i < 2000; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%d,%d.5\n", i, -i);
    const char *p = write_csv("big.csv", text);
    ck_assert_int_eq(tt_sh("gzip -f '%s'", p), 0);
    tfs_csv_opts o = tfs_csv_opts_default();
    o.label = "q";
    tfs_tensor *f, *l;
    tfs_status  st;
    ck_assert_msg(tfs_csv_read(tt_path(dir, "big.csv.gz"), &o, &f, &l, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(f->dims[0], 2000);
    ck_assert(((float *)f->data)[1999] == 1999.0f && ((float *)l->data)[1999] == -1999.5f);
    tfs_tensor_unref(f);
    tfs_tensor_unref(l);
}
END_TEST

static void expect_err(const char *text, const tfs_csv_opts *o, enum tfs_code code,
                       const char *const *want)
{
    const char *p = write_csv("bad.csv", text);
    tfs_tensor *f = (tfs_tensor *)1, *l = (tfs_tensor *)1;
    tfs_status  st;
    ck_assert_int_eq(tfs_csv_read(p, o, &f, &l, &st), code);
    ck_assert_ptr_null(f);
    ck_assert_ptr_null(l);
    ASSERT_MSG_HAS(st, "bad.csv");
    for (; *want; want++)
        ASSERT_MSG_HAS(st, *want);
}

START_TEST(test_csv_errors)
{
    tfs_csv_opts o = tfs_csv_opts_default();
    o.label = "y";
    o.label_dtype = TFS_DTYPE_INT32;
    expect_err("a,y\n1,2\n3,abc\n", &o, TFS_DATA_LOSS,
               (const char *[]){"bad.csv:3:", "column 2 ('y')", "'abc'", "not an integer", NULL});
    expect_err("a,y\n1,2\n3,1.5\n", &o, TFS_DATA_LOSS, (const char *[]){"not an integer", NULL});
    expect_err("a,y\n1,2\nzz,1\n", &o, TFS_DATA_LOSS,
               (const char *[]){"bad.csv:3:", "column 1 ('a')", "not a number", NULL});
    expect_err("a,y\n1,2\n\n\n1,2,3\n", &o, TFS_DATA_LOSS,
               (const char *[]){"bad.csv:5:", "3 fields, the header has 2", NULL});
    expect_err("a,y\n1,2\n ,2\n", &o, TFS_DATA_LOSS,
               (const char *[]){"bad.csv:3:", "empty value", NULL});
    expect_err("a,y\n1,3000000000\n", &o, TFS_DATA_LOSS,
               (const char *[]){"out of range for int32", NULL});
    expect_err("a,y\n1,\"2\n3,4\n", &o, TFS_DATA_LOSS,
               (const char *[]){"bad.csv:2:", "never closed", NULL});
    expect_err("a,y\n\"1\"x,2\n", &o, TFS_DATA_LOSS,
               (const char *[]){"after a closing quote", NULL});
    expect_err("a,y\n1,1e39\n", NULL, TFS_DATA_LOSS,
               (const char *[]){"out of range for float32", NULL});
    expect_err("", &o, TFS_DATA_LOSS, (const char *[]){"no header", NULL});
    expect_err("a,b\n1,2\n", &o, TFS_INVALID_ARGUMENT, (const char *[]){"no column 'y'", NULL});
    expect_err("y,a,y\n1,2,3\n", &o, TFS_INVALID_ARGUMENT, (const char *[]){"twice", NULL});
    o.label_dtype = TFS_DTYPE_STRING;
    expect_err("a,y\n", &o, TFS_INVALID_ARGUMENT, (const char *[]){"label dtype", NULL});
}
END_TEST

Suite *suite_train_csv(void)
{
    Suite *s = suite_create("csv");
    TCase *tc = tcase_create("csv");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_csv_basic);
    tcase_add_test(tc, test_csv_quotes_crlf_blank_lines);
    tcase_add_test(tc, test_csv_gzip);
    tcase_add_test(tc, test_csv_errors);
    suite_add_tcase(s, tc);
    return s;
}
