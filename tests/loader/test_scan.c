/* scan.c and policy.c on their own: which folder names are versions, what the policy picks, and
 * that the fingerprint moves when a file changes and the walk ends on symlink loops. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loader/loader-impl.h"
#include "tests/loader/helpers.h"

START_TEST(test_parse_version)
{
    int64_t v = -1;
    ck_assert(tfs__parse_version("123", &v) && v == 123);
    ck_assert(tfs__parse_version("00000123", &v) && v == 123);
    ck_assert(tfs__parse_version("0", &v) && v == 0);
    ck_assert(tfs__parse_version("9223372036854775807", &v) && v == INT64_MAX);
    const char *bad[] = {"", "-1", "+1", " 1", "1 ", "1.5", "abc", "12a", "9223372036854775808",
                         "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!tfs__parse_version(bad[i], &v), "'%s' parsed as a version", bad[i]);
}
END_TEST

START_TEST(test_policy_aspired)
{
    const int64_t present[] = {9, 7, 4, 1};
    int64_t out[4];
    tfs_version_policy p = {.kind = TFS_POLICY_LATEST};   /* num_versions 0 means 1 */
    ck_assert_int_eq(tfs__policy_aspired(&p, present, 4, out), 1);
    ck_assert_int_eq(out[0], 9);
    p.num_versions = 2;
    ck_assert_int_eq(tfs__policy_aspired(&p, present, 4, out), 2);
    ck_assert(out[0] == 9 && out[1] == 7);
    p.num_versions = 10;
    ck_assert_int_eq(tfs__policy_aspired(&p, present, 4, out), 4);
    ck_assert_int_eq(tfs__policy_aspired(&p, present, 0, out), 0);
    p = (tfs_version_policy){.kind = TFS_POLICY_ALL};
    ck_assert_int_eq(tfs__policy_aspired(&p, present, 4, out), 4);
    ck_assert(out[3] == 1);
    const int64_t listed[] = {1, 8, 9};
    p = (tfs_version_policy){.kind = TFS_POLICY_SPECIFIC, .n_versions = 3, .versions = listed};
    ck_assert_int_eq(tfs__policy_aspired(&p, present, 4, out), 2);   /* 8 is not present */
    ck_assert(out[0] == 9 && out[1] == 1);
}
END_TEST

static void mkdirf(const char *base, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", base, name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void touch(const char *base, const char *name, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", base, name);
    ck_assert_int_eq(tfs_test_write_file(p, text, strlen(text)), 0);
}

START_TEST(test_scan_lists_versions)
{
    char *base = tfs_test_mkdtemp();
    mkdirf(base, "1");
    mkdirf(base, "00000010");
    mkdirf(base, "abc");
    mkdirf(base, "-3");
    mkdirf(base, "1.5");
    mkdirf(base, "99999999999999999999");
    touch(base, "7", "a file named like a version is not a version");
    char link[4200], target[4200];
    snprintf(link, sizeof link, "%s/8", base);   /* a symlink loop named like a version */
    ck_assert_int_eq(symlink(link, link), 0);
    snprintf(link, sizeof link, "%s/9", base);   /* a dangling link */
    snprintf(target, sizeof target, "%s/nonexistent", base);
    ck_assert_int_eq(symlink(target, link), 0);
    touch(base, "1/saved_model.pb", "x");
    touch(base, "00000010/saved_model.pbtxt", "x");
    tfs__version_dir *d = NULL;
    int n = 0;
    tfs__name_set logged = {0};
    tfs_status st;
    ck_assert_int_eq(tfs__scan_base(base, "m", &logged, &d, &n, &st), TFS_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(d[0].version, 10);
    ck_assert_str_eq(d[0].name, "00000010");
    ck_assert(d[0].has_saved_model && d[1].has_saved_model);
    ck_assert_int_eq(d[1].version, 1);
    ck_assert_int_eq(d[1].disk_bytes, 1);
    /* abc, -3, 1.5, 9999... (not numbers), 7 (a file), 8 (loop), 9 (dangling): each remembered
     * so that it is logged once */
    ck_assert_int_eq(logged.n, 7);
    tfs__version_dirs_free(d, n);
    ck_assert_int_eq(tfs__scan_base(base, "m", &logged, &d, &n, &st), TFS_OK);
    ck_assert_int_eq(logged.n, 7);
    ck_assert_int_eq(n, 2);
    tfs__version_dirs_free(d, n);
    tfs__name_set_clear(&logged);

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/nope", base);
    ck_assert_int_eq(tfs__scan_base(missing, "m", NULL, &d, &n, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "nope"));
    /* a base path that is a symlink loop, or a file: an error naming it, never a hang (codes by
     * TensorFlow's errno table: ELOOP UNKNOWN, ENOTDIR FAILED_PRECONDITION) */
    snprintf(link, sizeof link, "%s/8", base);
    ck_assert_int_eq(tfs__scan_base(link, "m", NULL, &d, &n, &st), TFS_UNKNOWN);
    ck_assert_msg(strstr(st.msg, "cannot read base path") && strstr(st.msg, "/8: Too many levels "
                  "of symbolic links"), "%s", st.msg);
    snprintf(link, sizeof link, "%s/7", base);
    ck_assert_int_eq(tfs__scan_base(link, "m", NULL, &d, &n, &st), TFS_FAILED_PRECONDITION);
    ck_assert_msg(strstr(st.msg, "/7: Not a directory"), "%s", st.msg);

    /* the names a "no versions found" warning shows */
    char names[256];
    tfs__scan_describe_skipped(base, names, sizeof names);
    ck_assert_msg(strstr(names, " and 6 more"), "%s", names);   /* 9 entries, 3 shown */
    tfs__scan_describe_skipped(missing, names, sizeof names);
    ck_assert_str_eq(names, "");
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

static uint64_t fingerprint(const char *base, int64_t version, bool *has_pb)
{
    tfs__version_dir *d = NULL;
    int n = 0;
    tfs_status st;
    ck_assert_int_eq(tfs__scan_base(base, "m", NULL, &d, &n, &st), TFS_OK);
    uint64_t fp = 0;
    for (int i = 0; i < n; i++)
        if (d[i].version == version) {
            fp = d[i].fingerprint;
            *has_pb = d[i].has_saved_model;
        }
    tfs__version_dirs_free(d, n);
    return fp;
}

START_TEST(test_scan_fingerprint)
{
    char *base = tfs_test_mkdtemp();
    mkdirf(base, "1");
    mkdirf(base, "1/variables");
    touch(base, "1/variables/variables.index", "abc");
    bool pb = true;
    uint64_t a = fingerprint(base, 1, &pb), b = fingerprint(base, 1, &pb);
    ck_assert(!pb);
    ck_assert_msg(a == b, "an unchanged folder must keep its fingerprint");
    touch(base, "1/variables/variables.index", "abcd");   /* size changes */
    uint64_t c = fingerprint(base, 1, &pb);
    ck_assert(c != b);
    touch(base, "1/saved_model.pb", "x");                 /* a new file */
    uint64_t e = fingerprint(base, 1, &pb);
    ck_assert(pb && e != c);
    char p[4200];
    snprintf(p, sizeof p, "%s/1/saved_model.pb", base);
    struct timespec ts[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);   /* same size, new mtime */
    ck_assert(fingerprint(base, 1, &pb) != e);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

/* A symlink loop inside a version folder: the walk stops at its depth bound, the scan returns. */
START_TEST(test_scan_symlink_loop)
{
    char *base = tfs_test_mkdtemp();
    mkdirf(base, "1");
    char link[4200], self[4200];
    snprintf(self, sizeof self, "%s/1", base);
    snprintf(link, sizeof link, "%s/1/again", base);
    ck_assert_int_eq(symlink(self, link), 0);
    snprintf(link, sizeof link, "%s/1/twice", base);
    ck_assert_int_eq(symlink(self, link), 0);
    snprintf(link, sizeof link, "%s/1/dangling", base);
    ck_assert_int_eq(symlink("/nonexistent/x", link), 0);
    bool pb;
    uint64_t a = fingerprint(base, 1, &pb);
    ck_assert_msg(a == fingerprint(base, 1, &pb), "the bounded walk must be repeatable");
    tfs_test_rmtree(base);   /* rmtree uses lstat: it does not follow the links */
    free(base);
}
END_TEST

START_TEST(test_scan_unreadable)
{
    if (geteuid() == 0) {
        fprintf(stderr, "SKIP %s: running as root, permissions do not stop reads\n", __func__);
        return;
    }
    char *base = tfs_test_mkdtemp();
    mkdirf(base, "1");
    mkdirf(base, "1/locked");
    char p[4200];
    snprintf(p, sizeof p, "%s/1/locked", base);
    ck_assert_int_eq(chmod(p, 0), 0);
    bool pb;
    fingerprint(base, 1, &pb);   /* no crash, no error: the unreadable folder is part of it */
    chmod(p, 0755);
    ck_assert_int_eq(chmod(base, 0), 0);
    tfs__version_dir *d = NULL;
    int n = 0;
    tfs_status st;
    ck_assert_int_eq(tfs__scan_base(base, "m", NULL, &d, &n, &st), TFS_PERMISSION_DENIED);
    chmod(base, 0755);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

Suite *suite_loader_scan(void);
Suite *suite_loader_scan(void)
{
    Suite *s = suite_create("scan");
    TCase *tc = tcase_create("scan");
    tcase_add_test(tc, test_parse_version);
    tcase_add_test(tc, test_policy_aspired);
    tcase_add_test(tc, test_scan_lists_versions);
    tcase_add_test(tc, test_scan_fingerprint);
    tcase_add_test(tc, test_scan_symlink_loop);
    tcase_add_test(tc, test_scan_unreadable);
    suite_add_tcase(s, tc);
    return s;
}
