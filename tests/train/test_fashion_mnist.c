/* Fashion-MNIST as Debian's dataset-fashion-mnist package installs it (IDX, gzip-compressed, in
 * /usr/share/datasets/fashion-mnist; $TFS_FASHION_MNIST names another folder). Skipped, saying
 * so, when absent. Checks what is known of the data set independently of our readers: 60000
 * training and 10000 test examples of 28x28, labels 0..9 with exactly 6000 / 1000 of each class,
 * the first training label 9 ("Ankle boot"), a training-pixel mean of 0.2860 (on [0, 1]); and
 * that reading and inflating the training images takes under a second of CPU time (in optimized
 * builds without sanitizers; others print the time only). Prints the inflate speed in MB/s.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_fashion_mnist(void);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TIMING_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TIMING_CHECKED 0
#endif
#endif
#ifndef TIMING_CHECKED
#ifdef __OPTIMIZE__
#define TIMING_CHECKED 1
#else
#define TIMING_CHECKED 0
#endif
#endif

static const char *file(const char *name)
{
    const char *d = getenv("TFS_FASHION_MNIST");
    return tt_path(d && *d ? d : "/usr/share/datasets/fashion-mnist", name);
}

static bool absent(const char *test)
{
    if (access(file("train-images-idx3-ubyte.gz"), R_OK) == 0)
        return false;
    fprintf(stderr, "SKIP %s: Fashion-MNIST not found at %s (apt-get install "
            "dataset-fashion-mnist, or set TFS_FASHION_MNIST)\n", test,
            file("train-images-idx3-ubyte.gz"));
    return true;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU time of this thread: what inflating costs, whatever else the machine is doing. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check_split(const char *images, const char *labels, int64_t n)
{
    tfs_tensor *x, *y;
    tfs_status  st;
    ck_assert_msg(tfs_idx_read(file(images), &x, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs_idx_read(file(labels), &y, &st) == TFS_OK, "%s", st.msg);
    ck_assert(x->dtype == TFS_DTYPE_UINT8 && x->rank == 3 && x->dims[0] == n && x->dims[1] == 28 &&
              x->dims[2] == 28);
    ck_assert(y->dtype == TFS_DTYPE_UINT8 && y->rank == 1 && y->dims[0] == n);
    int64_t count[10] = {0};
    for (int64_t i = 0; i < n; i++) {
        uint8_t l = ((uint8_t *)y->data)[i];
        ck_assert_msg(l <= 9, "label %u at %lld", l, (long long)i);
        count[l]++;
    }
    for (int c = 0; c < 10; c++)
        ck_assert_int_eq(count[c], n / 10);
    if (n == 60000) {
        ck_assert_int_eq(((uint8_t *)y->data)[0], 9);   /* "Ankle boot" */
        double sum = 0;
        for (int64_t i = 0; i < x->nelem; i++)
            sum += ((uint8_t *)x->data)[i];
        ck_assert_double_eq_tol(sum / (double)x->nelem / 255, 0.2860, 0.0005);
    }
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
}

START_TEST(test_fashion_mnist_contents)
{
    if (absent("test_fashion_mnist_contents"))
        return;
    check_split("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60000);
    check_split("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10000);
}
END_TEST

START_TEST(test_fashion_mnist_inflate_speed)
{
    if (absent("test_fashion_mnist_inflate_speed"))
        return;
    double best = 1e9, wall = 0;
    size_t len = 0;
    for (int i = 0; i < 3; i++) {
        void      *d;
        tfs_status st;
        double     t0 = cpu_now(), w0 = now();
        ck_assert_int_eq(tfs_data_file_read(file("train-images-idx3-ubyte.gz"), &d, &len, &st),
                         TFS_OK);
        double t = cpu_now() - t0;
        tfs_free(d);
        if (t < best) {
            best = t;
            wall = now() - w0;
        }
    }
    ck_assert_uint_eq(len, 47040016);
    fprintf(stderr, "fashion-mnist: train images (26 MB gzip -> %zu bytes) read and inflated in "
            "%.3f s of CPU, %.3f s wall (%.0f MB/s of output)%s\n", len, best, wall,
            (double)len / best / 1e6,
            TIMING_CHECKED ? "" : " -- not checked against 1 s in this build");
    if (TIMING_CHECKED)
        ck_assert_msg(best < 1.0, "inflating took %.3f s", best);
}
END_TEST

/* The pipeline a trainer would build: x / 255 as float, int32 labels, full shuffle, batch 64,
 * prefetch 2; one epoch is 938 batches and shows every example once. */
START_TEST(test_fashion_mnist_pipeline)
{
    if (absent("test_fashion_mnist_pipeline"))
        return;
    tfs_tensor *x, *y;
    tfs_status  st;
    ck_assert_int_eq(tfs_idx_read(file("train-images-idx3-ubyte.gz"), &x, &st), TFS_OK);
    ck_assert_int_eq(tfs_idx_read(file("train-labels-idx1-ubyte.gz"), &y, &st), TFS_OK);
    tfs_dataset_opts o = tfs_dataset_opts_default();
    o.batch_size = 64;
    o.shuffle_buffer = 60000;
    o.seed = 1;
    o.prefetch = 2;
    tfs_dataset *ds;
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"image", "label"},
                                              (tfs_tensor *[]){x, y}, 2, &o, &ds, &st), TFS_OK);
    ck_assert_int_eq(tfs_dataset_map(ds, "image", TFS_DTYPE_FLOAT, 1.0 / 255, 0, &st), TFS_OK);
    tfs_tensor *b[2];
    int         batches = 0;
    int64_t     count[10] = {0};
    double      t0 = now(), sum = 0;
    while (tfs_dataset_next(ds, b, &st) == TFS_OK) {
        ck_assert(b[0]->dtype == TFS_DTYPE_FLOAT && b[0]->rank == 3 && b[0]->dims[1] == 28);
        ck_assert(b[1]->dtype == TFS_DTYPE_INT32 && b[1]->dims[0] == b[0]->dims[0]);
        for (int64_t i = 0; i < b[1]->nelem; i++)
            count[((int32_t *)b[1]->data)[i]]++;
        for (int64_t i = 0; i < b[0]->nelem; i++)
            sum += ((float *)b[0]->data)[i];
        tfs_tensor_unref(b[0]);
        tfs_tensor_unref(b[1]);
        batches++;
    }
    double t = now() - t0;
    ck_assert_int_eq(st.code, TFS_OUT_OF_RANGE);
    ck_assert_int_eq(batches, 938);
    for (int c = 0; c < 10; c++)
        ck_assert_int_eq(count[c], 6000);
    ck_assert_double_eq_tol(sum / (60000.0 * 784), 0.2860, 0.0005);
    fprintf(stderr, "fashion-mnist: one shuffled epoch of 938 batches in %.3f s\n", t);
    tfs_dataset_free(ds);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
}
END_TEST

Suite *suite_train_fashion_mnist(void)
{
    Suite *s = suite_create("fashion_mnist");
    TCase *tc = tcase_create("fashion_mnist");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fashion_mnist_contents);
    tcase_add_test(tc, test_fashion_mnist_inflate_speed);
    tcase_add_test(tc, test_fashion_mnist_pipeline);
    suite_add_tcase(s, tc);
    return s;
}
