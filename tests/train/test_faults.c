/* Fault injection for train/'s readers and datasets: the 1st, 2nd, 3rd ... tfs_malloc fails in
 * turn (runtime/alloc.h's test hook) until a run completes. Every run must end in success or
 * RESOURCE_EXHAUSTED -- never another code, a crash or a leak (tfs_alloc_bytes_in_use is back
 * where it started after each run).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "tests/train/example-writer.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_faults(void);

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

/* Runs fn with the n-th allocation failing, n = 1, 2, ... until it succeeds. */
static void fault_loop(const char *what, enum tfs_code (*fn)(tfs_status *st))
{
    bool done = false;
    int  n;
    for (n = 1; n < 20000 && !done; n++) {
        int64_t    base = tfs_alloc_bytes_in_use();
        tfs_status st;
        tfs_alloc_fail_after(n);
        enum tfs_code c = fn(&st);
        tfs_alloc_fail_after(0);
        ck_assert_msg(c == TFS_OK || c == TFS_RESOURCE_EXHAUSTED, "%s, failing allocation %d: %s: %s",
                      what, n, tfs_code_name(c), st.msg);
        ck_assert_msg(tfs_alloc_bytes_in_use() == base, "%s, failing allocation %d: %lld bytes "
                      "leaked", what, n, (long long)(tfs_alloc_bytes_in_use() - base));
        done = c == TFS_OK;
    }
    ck_assert_msg(done, "%s never succeeded", what);
    fprintf(stderr, "faults: %s: %d runs\n", what, n - 1);
}

static enum tfs_code read_gz_idx(tfs_status *st)
{
    tfs_tensor   *t;
    enum tfs_code c = tfs_idx_read(tt_path(dir, "x.idx.gz"), &t, st);
    tfs_tensor_unref(t);
    return c;
}

static enum tfs_code read_csv(tfs_status *st)
{
    tfs_csv_opts o = tfs_csv_opts_default();
    o.label = "c";
    tfs_tensor   *f, *l;
    enum tfs_code c = tfs_csv_read(tt_path(dir, "x.csv"), &o, &f, &l, st);
    if (c == TFS_OK) {
        tfs_tensor_unref(f);
        tfs_tensor_unref(l);
    }
    return c;
}

static enum tfs_code read_npy(tfs_status *st)
{
    tfs_tensor   *t;
    enum tfs_code c = tfs_npy_read(tt_path(dir, "x.npy"), &t, st);
    tfs_tensor_unref(t);
    return c;
}

static void example_i(tt_wbuf *ex, int i)
{
    float   x[2] = {(float)i, 1};
    int64_t y = i;
    tt_example_begin(ex);
    tt_example_floats(ex, "x", x, 2);
    tt_example_int64s(ex, "y", &y, 1);
}

static const tfs_feature_spec SPEC[2] = {
    {.name = "x", .dtype = TFS_DTYPE_FLOAT, .rank = 1, .dims = {2}},
    {.name = "y", .dtype = TFS_DTYPE_INT64, .rank = 0},
};

static enum tfs_code read_examples(tfs_status *st)
{
    const char   *p = tt_path(dir, "x.tfrecord");
    tfs_tensor   *t[2];
    enum tfs_code c = tfs_tfrecord_examples_read(&p, 1, SPEC, 2, t, st);
    if (c == TFS_OK) {
        tfs_tensor_unref(t[0]);
        tfs_tensor_unref(t[1]);
    }
    return c;
}

/* Builds a dataset, takes 4 batches, seeks back, takes one more, frees. */
static enum tfs_code use_dataset(tfs_dataset *ds, tfs_status *st)
{
    tfs_tensor   *b[3];
    enum tfs_code c = TFS_OK;
    for (int i = 0; i < 5 && c == TFS_OK; i++) {
        if (i == 4) {
            tfs_dataset_pos p = {0, 3, 7};
            if ((c = tfs_dataset_seek(ds, &p, st)) != TFS_OK)
                break;
        }
        if ((c = tfs_dataset_next(ds, b, st)) == TFS_OK)
            for (int k = 0; k < tfs_dataset_component_count(ds); k++)
                tfs_tensor_unref(b[k]);
    }
    tfs_dataset_free(ds);
    return c;
}

static enum tfs_code memory_dataset(tfs_status *st, int prefetch)
{
    int64_t       dims[2] = {20, 3};
    tfs_tensor   *x = NULL, *y = NULL;
    tfs_dataset  *ds = NULL;
    enum tfs_code c;
    if ((c = tfs_tensor_new(TFS_DTYPE_UINT8, 2, dims, &x, st)) != TFS_OK ||
        (c = tfs_tensor_new(TFS_DTYPE_INT32, 1, dims, &y, st)) != TFS_OK)
        goto done;
    tfs_dataset_opts o = tfs_dataset_opts_default();
    o.batch_size = 3;
    o.shuffle_buffer = 8;
    o.seed = 7;
    o.prefetch = prefetch;
    if ((c = tfs_dataset_from_tensors((const char *[]){"x", "y"}, (tfs_tensor *[]){x, y}, 2, &o,
                                      &ds, st)) != TFS_OK ||
        (c = tfs_dataset_map(ds, "x", TFS_DTYPE_FLOAT, 0.5, 0, st)) != TFS_OK) {
        tfs_dataset_free(ds);
        goto done;
    }
    c = use_dataset(ds, st);
done:
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    return c;
}

static enum tfs_code memory_plain(tfs_status *st)
{
    return memory_dataset(st, 0);
}

static enum tfs_code memory_prefetch(tfs_status *st)
{
    return memory_dataset(st, 2);
}

static enum tfs_code stream_dataset(tfs_status *st)
{
    const char      *p = tt_path(dir, "x.tfrecord");
    tfs_dataset     *ds;
    tfs_dataset_opts o = tfs_dataset_opts_default();
    o.batch_size = 3;
    o.shuffle_buffer = 5;
    o.seed = 7;
    o.prefetch = 1;
    enum tfs_code c = tfs_dataset_from_tfrecord(&p, 1, SPEC, 2, &o, &ds, st);
    return c != TFS_OK ? c : use_dataset(ds, st);
}

START_TEST(test_faults_readers_and_datasets)
{
    uint8_t idx[8 + 300] = {0, 0, 0x08, 1, 0, 0, 1, 44};
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "x.idx"), idx, sizeof idx), 0);
    const char *csv = "a,b,c\n1,2,3\n\"4\",5,6\n7,8,9\n";
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "x.csv"), csv, strlen(csv)), 0);
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    uint8_t     npy[128] = "\x93NUMPY\x01";
    size_t      hl = strlen(hdr);
    npy[8] = (uint8_t)hl;
    memcpy(npy + 10, hdr, hl);
    const float two[2] = {1, 2};
    memcpy(npy + 10 + hl, two, sizeof two);
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "x.npy"), npy, 10 + hl + 8), 0);
    tt_write_examples(tt_path(dir, "x.tfrecord"), 0, 20, example_i);
    if (tt_have("gzip")) {
        ck_assert_int_eq(tt_sh("gzip -f '%s'", tt_path(dir, "x.idx")), 0);
        fault_loop("IDX .gz", read_gz_idx);
    }
    fault_loop("CSV", read_csv);
    fault_loop("NPY", read_npy);
    fault_loop("TFRecord examples", read_examples);
    fault_loop("in-memory dataset", memory_plain);
    fault_loop("in-memory dataset with prefetch", memory_prefetch);
    fault_loop("streaming dataset", stream_dataset);
}
END_TEST

Suite *suite_train_faults(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_faults_readers_and_datasets);
    suite_add_tcase(s, tc);
    return s;
}
