/* Tests of tf.Example decoding for datasets (train/example.c): a feature spec turned into a
 * ParseExample graph, TFRecord files read into memory, defaults, and errors that name the file and
 * record of the bad Example. The Examples are encoded here with a tiny protobuf writer, so each
 * test states its bytes; the TFRecord framing is savedmodel's writer (tested in its own suite).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel.h"
#include "tests/support/tfs-test.h"
#include "tests/train/example-writer.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_example(void);

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

/* Example i of the standard test file: x = [i, -i/2] float, y = i % 3 int64, s = "ex<i>",
 * and "w" (float scalar) only on even i. */
static void standard_example(tt_wbuf *ex, int i)
{
    float   x[2] = {(float)i, -(float)i / 2};
    int64_t y = i % 3;
    char    s[16];
    snprintf(s, sizeof s, "ex%d", i);
    tt_example_begin(ex);
    tt_example_floats(ex, "x", x, 2);
    tt_example_int64s(ex, "y", &y, 1);
    tt_example_bytes(ex, "s", s);
    if (i % 2 == 0) {
        float w = 10.0f + (float)i;
        tt_example_floats(ex, "w", &w, 1);
    }
}

static void standard_spec(tfs_feature_spec *spec, tfs_tensor **dflt)
{
    tfs_status st;
    memset(spec, 0, 4 * sizeof *spec);
    spec[0] = (tfs_feature_spec){.name = "x", .dtype = TFS_DTYPE_FLOAT, .rank = 1, .dims = {2}};
    spec[1] = (tfs_feature_spec){.name = "y", .dtype = TFS_DTYPE_INT64, .rank = 0};
    spec[2] = (tfs_feature_spec){.name = "s", .dtype = TFS_DTYPE_STRING, .rank = 0};
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, dflt, &st), TFS_OK);
    *(float *)(*dflt)->data = -1.0f;
    spec[3] = (tfs_feature_spec){.name = "w", .dtype = TFS_DTYPE_FLOAT, .rank = 0,
                                 .default_value = *dflt};
}

START_TEST(test_example_read_files)
{
    const char *paths[2] = {strdup(tt_path(dir, "a.tfrecord")), strdup(tt_path(dir, "b.tfrecord"))};
    tt_write_examples(paths[0], 0, 700, standard_example);   /* more than one parse batch */
    tt_write_examples(paths[1], 700, 5, standard_example);
    tfs_feature_spec spec[4];
    tfs_tensor      *dflt, *out[4];
    tfs_status       st;
    standard_spec(spec, &dflt);
    ck_assert_msg(tfs_tfrecord_examples_read(paths, 2, spec, 4, out, &st) == TFS_OK, "%s", st.msg);
    ck_assert(out[0]->dtype == TFS_DTYPE_FLOAT && out[0]->rank == 2 && out[0]->dims[0] == 705 &&
              out[0]->dims[1] == 2);
    ck_assert(out[1]->dtype == TFS_DTYPE_INT64 && out[1]->rank == 1 && out[1]->dims[0] == 705);
    ck_assert(out[2]->dtype == TFS_DTYPE_STRING && out[3]->dtype == TFS_DTYPE_FLOAT);
    for (int i = 0; i < 705; i++) {
        const float *x = (const float *)out[0]->data + 2 * i;
        ck_assert(x[0] == (float)i && x[1] == -(float)i / 2);
        ck_assert_int_eq(((int64_t *)out[1]->data)[i], i % 3);
        char s[16];
        snprintf(s, sizeof s, "ex%d", i);
        const tfs_string *str = &tfs_tensor_strings(out[2])[i];
        ck_assert(str->len == strlen(s) && memcmp(str->data, s, str->len) == 0);
        ck_assert(((float *)out[3]->data)[i] == (i % 2 == 0 ? 10.0f + (float)i : -1.0f));
    }
    for (int j = 0; j < 4; j++)
        tfs_tensor_unref(out[j]);
    tfs_tensor_unref(dflt);
    free((void *)paths[0]);
    free((void *)paths[1]);
}
END_TEST

static void missing_y_at_3(tt_wbuf *ex, int i)
{
    float x[2] = {1, 2};
    tt_example_begin(ex);
    tt_example_floats(ex, "x", x, 2);
    if (i != 3) {
        int64_t y = 1;
        tt_example_int64s(ex, "y", &y, 1);
    }
}

static void three_floats_at_2(tt_wbuf *ex, int i)
{
    float x[3] = {1, 2, 3};
    int64_t y = 0;
    tt_example_begin(ex);
    tt_example_floats(ex, "x", x, i == 2 ? 3 : 2);
    tt_example_int64s(ex, "y", &y, 1);
}

START_TEST(test_example_errors_name_the_record)
{
    tfs_feature_spec spec[2] = {
        {.name = "x", .dtype = TFS_DTYPE_FLOAT, .rank = 1, .dims = {2}},
        {.name = "y", .dtype = TFS_DTYPE_INT64, .rank = 0},
    };
    tfs_tensor *out[2];
    tfs_status  st;
    const char *p = tt_path(dir, "m.tfrecord");
    tt_write_examples(p, 0, 6, missing_y_at_3);
    ck_assert_int_eq(tfs_tfrecord_examples_read(&p, 1, spec, 2, out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(out[0]);
    ASSERT_MSG_HAS(st, "m.tfrecord:record 3");
    ASSERT_MSG_HAS(st, "y");
    ASSERT_MSG_HAS(st, "required");
    tt_write_examples(p, 0, 6, three_floats_at_2);
    ck_assert_int_eq(tfs_tfrecord_examples_read(&p, 1, spec, 2, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "m.tfrecord:record 2");
    /* Not an Example at all. */
    tfs_tfrecord_writer *w;
    ck_assert_int_eq(tfs_tfrecord_writer_open(p, &w, &st), TFS_OK);
    ck_assert_int_eq(tfs_tfrecord_writer_write(w, "\xff\xff\xff", 3, &st), TFS_OK);
    ck_assert_int_eq(tfs_tfrecord_writer_close(w, &st), TFS_OK);
    ck_assert_int_eq(tfs_tfrecord_examples_read(&p, 1, spec, 2, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "m.tfrecord:record 0");
    /* A damaged record: the TFRecord reader's DATA_LOSS, naming the file. */
    tt_write_examples(p, 0, 4, missing_y_at_3);
    size_t n;
    char  *b = tfs_test_read_file(p, &n);
    b[n - 2] ^= 0x40;
    ck_assert_int_eq(tfs_test_write_file(p, b, n), 0);
    free(b);
    ck_assert_int_eq(tfs_tfrecord_examples_read(&p, 1, spec, 2, out, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "m.tfrecord");
    const char *absent = tt_path(dir, "absent.tfrecord");
    ck_assert_int_eq(tfs_tfrecord_examples_read(&absent, 1, spec, 2, out, &st), TFS_NOT_FOUND);
}
END_TEST

START_TEST(test_example_bad_specs)
{
    tfs_example_parser *p;
    tfs_status          st;
    tfs_tensor         *d;
    tfs_feature_spec    s[2] = {{.name = "a", .dtype = TFS_DTYPE_FLOAT},
                                {.name = "a", .dtype = TFS_DTYPE_FLOAT}};
    ck_assert_int_eq(tfs_example_parser_new(s, 2, &p, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "twice");
    ck_assert_ptr_null(p);
    s[1].name = "";
    ck_assert_int_eq(tfs_example_parser_new(s, 2, &p, &st), TFS_INVALID_ARGUMENT);
    s[1].name = "b";
    s[1].dtype = TFS_DTYPE_INT32;
    ck_assert_int_eq(tfs_example_parser_new(s, 2, &p, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "int32");
    s[1].dtype = TFS_DTYPE_FLOAT;
    s[1].rank = 1;
    s[1].dims[0] = -1;
    ck_assert_int_eq(tfs_example_parser_new(s, 2, &p, &st), TFS_INVALID_ARGUMENT);
    s[1].dims[0] = 3;
    int64_t two = 2;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &two, &d, &st), TFS_OK);
    s[1].default_value = d;   /* 2 elements for a shape of 3 */
    ck_assert_int_eq(tfs_example_parser_new(s, 2, &p, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "default");
    tfs_tensor_unref(d);
    s[1].default_value = NULL;
    ck_assert_int_eq(tfs_example_parser_new(s, 0, &p, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_example_parser_new(s, 2, &p, &st), TFS_OK);
    tfs_example_parser_free(p);
}
END_TEST

/* The parser on its own: a batch from memory, with and without names. */
START_TEST(test_example_parser_direct)
{
    tfs_feature_spec spec[4];
    tfs_tensor      *dflt, *out[4];
    tfs_status       st;
    standard_spec(spec, &dflt);
    tfs_example_parser *p;
    ck_assert_int_eq(tfs_example_parser_new(spec, 4, &p, &st), TFS_OK);
    tt_wbuf ex[3];
    const uint8_t *data[3];
    size_t lens[3];
    for (int i = 0; i < 3; i++) {
        memset(&ex[i], 0, sizeof ex[i]);
        standard_example(&ex[i], i + 4);
        tt_example_end(&ex[i]);
        data[i] = ex[i].b;
        lens[i] = ex[i].n;
    }
    ck_assert_msg(tfs_example_parser_parse(p, 3, data, lens, NULL, out, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert(out[0]->dims[0] == 3 && ((float *)out[0]->data)[4] == 6.0f);
    ck_assert(((float *)out[3]->data)[1] == -1.0f && ((float *)out[3]->data)[2] == 16.0f);
    for (int j = 0; j < 4; j++)
        tfs_tensor_unref(out[j]);
    lens[1] = 2;   /* cut the middle Example short */
    const char *names[3] = {"first", "second", "third"};
    ck_assert_int_eq(tfs_example_parser_parse(p, 3, data, lens, names, out, &st),
                     TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "second");
    for (int j = 0; j < 4; j++)
        ck_assert_ptr_null(out[j]);
    for (int i = 0; i < 3; i++)
        free(ex[i].b);
    tfs_example_parser_free(p);
    tfs_tensor_unref(dflt);
}
END_TEST

Suite *suite_train_example(void)
{
    Suite *s = suite_create("example");
    TCase *tc = tcase_create("example");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_example_read_files);
    tcase_add_test(tc, test_example_errors_name_the_record);
    tcase_add_test(tc, test_example_bad_specs);
    tcase_add_test(tc, test_example_parser_direct);
    suite_add_tcase(s, tc);
    return s;
}
