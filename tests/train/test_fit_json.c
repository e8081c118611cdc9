/* Tests for the fit result as JSON (train/fit-json.c, tfserve-train --metrics_json): the exact
 * text for a small run, numbers that read back as the same doubles (strtod on the text),
 * NaN/infinity and missing columns as null, string escapes, zero epochs, bad input, the file
 * writer (replaces, leaves no temporary file, names a missing folder), every allocation failing
 * in turn, and valid JSON with the expected values by /usr/bin/python3's json module (skipped,
 * saying so, when it is absent).
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "train/fit.h"

Suite *suite_train_fit_json(void);

static char *render(const tfs_fit_result *r)
{
    char *s = NULL;
    size_t n = 0;
    tfs_status st;
    ck_assert_int_eq(tfs_fit_result_json(r, &s, &n, &st), TFS_OK);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(strlen(s), n);
    return s;
}

/* The numbers of array `name` in the text, read back with strtod; "null" gives NaN. */
static int read_array(const char *json, const char *name, double *out, int max)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\": [", name);
    const char *p = strstr(json, key);
    ck_assert_msg(p != NULL, "no %s", name);
    p += strlen(key);
    int n = 0;
    while (*p != ']') {
        ck_assert_int_lt(n, max);
        if (!strncmp(p, "null", 4)) {
            out[n++] = NAN;
            p += 4;
        } else {
            char *end;
            out[n++] = strtod(p, &end);
            ck_assert_ptr_ne(end, p);
            p = end;
        }
        if (!strncmp(p, ", ", 2))
            p += 2;
        else
            ck_assert_int_eq(*p, ']');
    }
    return n;
}

/* json.loads must accept the text and find `expr` true of it (the object is `d`). */
static void python_checks(const char *json, const char *expr)
{
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("SKIP python json check: /usr/bin/python3 absent\n");
        return;
    }
    char *dir = tfs_test_mkdtemp(), path[4200];
    snprintf(path, sizeof path, "%s/m.json", dir);
    ck_assert_int_eq(tfs_test_write_file(path, json, strlen(json)), 0);
    static const char script[] = "import json, math, sys\n"
                                 "d = json.load(open(sys.argv[1]))\n"
                                 "assert eval(sys.argv[2]), d\n";
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", "-c", script, path, expr, (char *)NULL);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "python: %s", expr);
    tfs_test_rmtree(dir);
    free(dir);
}

START_TEST(exact_text)
{
    double s[] = {2.5, 1.25}, tl[] = {0.5, 0.25}, ta[] = {0.75, 0.875}, el[] = {0.5, NAN},
           ea[] = {0.8125, INFINITY};
    tfs_fit_result r = {.epochs = 2, .seconds = s, .train_loss = tl, .train_accuracy = ta,
                        .eval_loss = el, .eval_accuracy = ea, .global_step = 1876,
                        .export_path = "/tmp/run/export/1"};
    char *got = render(&r);
    ck_assert_str_eq(got, "{\n"
                          "  \"epochs\": 2,\n"
                          "  \"global_step\": 1876,\n"
                          "  \"seconds\": [2.5, 1.25],\n"
                          "  \"train_loss\": [0.5, 0.25],\n"
                          "  \"train_accuracy\": [0.75, 0.875],\n"
                          "  \"eval_loss\": [0.5, null],\n"
                          "  \"eval_accuracy\": [0.8125, null],\n"
                          "  \"export_path\": \"/tmp/run/export/1\",\n"
                          "  \"checkpoint\": null\n"
                          "}\n");
    python_checks(got, "d['epochs'] == 2 and d['eval_loss'] == [0.5, None] and "
                       "d['checkpoint'] is None and d['seconds'] == [2.5, 1.25]");
    tfs_free(got);
}
END_TEST

START_TEST(numbers_round_trip)
{
    enum { N = 7 };
    double v[N] = {0.1, 1.0 / 3.0, 87.654321e-3, 1e-300, 6.02214076e23, -0.0, 0.9999999999999999};
    double neg[N];
    for (int i = 0; i < N; i++)
        neg[i] = -v[i] * 3.7;
    tfs_fit_result r = {.epochs = N, .seconds = v, .train_loss = neg, .train_accuracy = v,
                        .eval_loss = neg, .eval_accuracy = v, .global_step = 1LL << 40};
    char *got = render(&r), *end;
    double back[N];
    const char *cols[] = {"seconds", "train_loss", "train_accuracy", "eval_loss", "eval_accuracy"};
    for (int c = 0; c < 5; c++) {
        ck_assert_int_eq(read_array(got, cols[c], back, N), N);
        const double *want = c % 2 ? neg : v;
        for (int i = 0; i < N; i++)
            ck_assert_msg(back[i] == want[i], "%s[%d]: %.17g != %.17g", cols[c], i, back[i],
                          want[i]);
    }
    const char *gs = strstr(got, "\"global_step\": ");
    ck_assert_ptr_nonnull(gs);
    ck_assert_int_eq(strtoll(gs + 15, &end, 10), 1LL << 40);
    python_checks(got, "d['global_step'] == 2**40 and d['seconds'][1] == 1/3 and "
                       "d['train_loss'][0] == -0.1 * 3.7");
    tfs_free(got);
}
END_TEST

START_TEST(missing_values_and_escapes)
{
    /* A regression run without eval set: accuracy NaN, eval columns absent. */
    double s[] = {1, 2, 3}, tl[] = {3, 2, 1}, nan3[] = {NAN, -INFINITY, NAN};
    tfs_fit_result r = {.epochs = 3, .seconds = s, .train_loss = tl, .train_accuracy = nan3,
                        .export_path = "/tmp/a \"b\"\\c\n\td\x01\x7f\xc3\xa9",
                        .checkpoint = "/tmp/ckpt/model.ckpt-3"};
    char *got = render(&r);
    double back[3];
    ck_assert_int_eq(read_array(got, "train_accuracy", back, 3), 3);
    ck_assert(isnan(back[0]) && isnan(back[1]) && isnan(back[2]));
    ck_assert_int_eq(read_array(got, "eval_loss", back, 3), 3);
    ck_assert(isnan(back[0]) && isnan(back[1]) && isnan(back[2]));
    ck_assert_ptr_nonnull(strstr(
        got, "\"export_path\": \"/tmp/a \\\"b\\\"\\\\c\\u000a\\u0009d\\u0001\x7f\xc3\xa9\","));
    ck_assert_ptr_nonnull(strstr(got, "\"checkpoint\": \"/tmp/ckpt/model.ckpt-3\"\n}\n"));
    python_checks(got, "d['export_path'] == '/tmp/a \"b\"\\\\c\\n\\td\\x01\\x7f\\u00e9' and "
                       "d['train_accuracy'] == [None] * 3 and d['eval_accuracy'] == [None] * 3");
    tfs_free(got);
}
END_TEST

START_TEST(zero_epochs_and_bad_input)
{
    tfs_fit_result r = {0};
    char *got = render(&r);
    ck_assert_ptr_nonnull(strstr(got, "\"epochs\": 0,"));
    ck_assert_ptr_nonnull(strstr(got, "\"seconds\": [],"));
    ck_assert_ptr_nonnull(strstr(got, "\"eval_accuracy\": [],"));
    python_checks(got, "d['epochs'] == 0 and d['train_loss'] == [] and d['export_path'] is None");
    tfs_free(got);

    char *s = (char *)1;
    size_t n = 7;
    tfs_status st;
    r.epochs = -1;
    ck_assert_int_eq(tfs_fit_result_json(&r, &s, &n, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(strstr(st.msg, "-1 epochs"));
}
END_TEST

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

START_TEST(write_file)
{
    char *dir = tfs_test_mkdtemp(), path[4200];
    double s[] = {4.0}, l[] = {0.5};
    tfs_fit_result r = {.epochs = 1, .seconds = s, .train_loss = l, .global_step = 3};
    tfs_status st;
    snprintf(path, sizeof path, "%s/metrics.json", dir);
    char old[1000];
    memset(old, '.', sizeof old);   /* longer than the new contents: nothing of it may remain */
    ck_assert_int_eq(tfs_test_write_file(path, old, sizeof old), 0);
    ck_assert_int_eq(tfs_fit_result_write_json(&r, path, &st), TFS_OK);   /* replaces */
    size_t n;
    char *got = tfs_test_read_file(path, &n), *want = render(&r);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(count_entries(dir), 1);   /* no temporary file left beside it */
    free(got);
    tfs_free(want);

    snprintf(path, sizeof path, "%s/missing/metrics.json", dir);
    ck_assert_int_eq(tfs_fit_result_write_json(&r, path, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "missing/metrics.json"));
    snprintf(path, sizeof path, "%s", dir);   /* a folder: the rename fails */
    ck_assert_int_ne(tfs_fit_result_write_json(&r, path, &st), TFS_OK);
    ck_assert_ptr_nonnull(strstr(st.msg, dir));
    ck_assert_int_eq(count_entries(dir), 1);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(out_of_memory)
{
    enum { N = 200 };   /* enough text to make the buffer grow several times */
    static double v[N];
    for (int i = 0; i < N; i++)
        v[i] = 1.0 / (i + 3);
    tfs_fit_result r = {.epochs = N, .seconds = v, .train_loss = v, .train_accuracy = v,
                        .eval_loss = v, .eval_accuracy = v, .checkpoint = "/tmp/c/model.ckpt-9"};
    int64_t base = tfs_alloc_bytes_in_use();
    bool done = false;
    int failures = 0;
    for (int64_t n = 1; n < 100 && !done; n++) {
        char *s = NULL;
        size_t len;
        tfs_status st;
        tfs_alloc_fail_after(n);
        enum tfs_code rc = tfs_fit_result_json(&r, &s, &len, &st);
        tfs_alloc_fail_after(0);
        ck_assert(rc == TFS_OK || rc == TFS_RESOURCE_EXHAUSTED);
        ck_assert(rc == TFS_OK || s == NULL);
        failures += rc != TFS_OK;
        done = rc == TFS_OK;
        tfs_free(s);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    }
    ck_assert(done);
    ck_assert_int_ge(failures, 3);   /* the buffer did grow: each growth could fail */
}
END_TEST

Suite *suite_train_fit_json(void)
{
    Suite *s = suite_create("train_fit_json");
    TCase *tc = tcase_create("fit_json");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, exact_text);
    tcase_add_test(tc, numbers_round_trip);
    tcase_add_test(tc, missing_values_and_escapes);
    tcase_add_test(tc, zero_epochs_and_bad_input);
    tcase_add_test(tc, write_file);
    tcase_add_test(tc, out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
