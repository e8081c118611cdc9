/* Test helpers: see tfs-test.h. */
#include "tests/support/tfs-test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tfs_test_fixture(const char *rel, char *buf, size_t n)
{
    const char *root = getenv("TFS_FIXTURES");
    if (root && *root)
        snprintf(buf, n, "%s/%s", root, rel);
    else
        snprintf(buf, n, "%s/../shared/fixtures/%s", TFS_SOURCE_DIR, rel);
    struct stat sb;
    return stat(buf, &sb) == 0 ? buf : NULL;
}

/* name under $TMPDIR (else /tmp), in buf. */
static void tmp_path(char *buf, size_t n, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/%s", tmp && *tmp ? tmp : "/tmp", name);
}

/* Check runs each test in a child process, so what the fixture lookups of a run found travels
 * back to tfs_test_run through a file that it names in this variable: one line per
 * tfs_test_skip_without_fixture call, "have" or "skip", the test and the fixture. */
#define FIXTURE_LOG_ENV "TFS_TEST_FIXTURE_LOG"
#define FIXTURE_TAG     "fixtures"

static void fixture_log(const char *what, const char *test, const char *rel)
{
    const char *path = getenv(FIXTURE_LOG_ENV);
    if (!path || !*path)
        return;
    char line[1024];
    int  n = snprintf(line, sizeof line, "%s %s %s\n", what, test, rel);
    if (n < 0 || (size_t)n >= sizeof line)
        n = snprintf(line, sizeof line, "%s %s\n", what, test);
    int fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0)
        return;
    /* One write with O_APPEND: lines from concurrent children do not interleave. */
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
    close(fd);
}

bool tfs_test_skip_without_fixture(const char *test, const char *rel)
{
    char buf[4096];
    if (tfs_test_fixture(rel, buf, sizeof buf)) {
        fixture_log("have", test, rel);
        return false;
    }
    fixture_log("skip", test, rel);
    fprintf(stderr, "SKIP %s: fixture %s absent (looked in %s; set TFS_FIXTURES)\n", test, rel,
            buf);
    return true;
}

TCase *tfs_test_fixture_case(const char *name, const char *tags)
{
    TCase *tc = tcase_create(name);
    char   all[256];
    snprintf(all, sizeof all, "%s %s", FIXTURE_TAG, tags ? tags : "");
    tcase_set_tags(tc, all);
    return tc;
}

int tfs_test_run(SRunner *sr, int argc, char **argv)
{
    bool fixtures = argc == 2 && strcmp(argv[1], "--fixtures") == 0;
    if (argc > 2 || (argc == 2 && !fixtures)) {
        fprintf(stderr, "usage: %s [--fixtures]\n", argv[0]);
        srunner_free(sr);
        return EXIT_FAILURE;
    }
    /* Not tfs_test_mkdtemp: its ck_assert may only run inside a test. */
    char log[4096];
    tmp_path(log, sizeof log, "tfs-fixture-log-XXXXXX");
    int fd = mkstemp(log);
    if (fd < 0) {
        perror(log);
        srunner_free(sr);
        return EXIT_FAILURE;
    }
    close(fd);
    setenv(FIXTURE_LOG_ENV, log, 1);
    /* Explicit tags override Check's CK_INCLUDE_TAGS / CK_EXCLUDE_TAGS, so the exclusions are
     * merged by hand ("system" is excluded that way for a quick run). */
    const char *env_excl = getenv("CK_EXCLUDE_TAGS");
    char        excl[1024];
    snprintf(excl, sizeof excl, "%s %s", fixtures ? "" : FIXTURE_TAG, env_excl ? env_excl : "");
    srunner_run_tagged(sr, NULL, NULL, fixtures ? FIXTURE_TAG : NULL, excl, CK_NORMAL);
    int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    srunner_free(sr);
    unsetenv(FIXTURE_LOG_ENV);
    char *lines = tfs_test_read_file(log, NULL);
    unlink(log);
    if (!lines) {
        fprintf(stderr, "tfs_test_run: the fixture log vanished\n");
        return EXIT_FAILURE;
    }

    int asked = 0, skipped = 0;
    for (char *l = lines, *nl; *l; l = nl + 1) {
        nl = strchr(l, '\n');
        if (!nl)
            break;
        *nl = 0;
        asked++;
        if (strncmp(l, "skip ", 5) == 0)
            skipped++;
        if (!fixtures)
            fprintf(stderr, "FAIL: a test outside the fixture cases reads a fixture (%s): move it "
                    "to a tfs_test_fixture_case\n", l + 5);
    }
    free(lines);
    if (failed)
        return EXIT_FAILURE;
    if (!fixtures)
        return asked ? EXIT_FAILURE : EXIT_SUCCESS;
    if (skipped) {
        char root[4096];
        tfs_test_fixture("", root, sizeof root);
        fprintf(stderr, "SKIP: %d of %d fixture tests found their fixture absent under %s\n",
                skipped, ran, root);
        return 77;
    }
    return EXIT_SUCCESS;
}

char *tfs_test_mkdtemp(void)
{
    char buf[4096];
    tmp_path(buf, sizeof buf, "tfs-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
    return strdup(buf);
}

void tfs_test_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            struct stat sb;
            if (lstat(child, &sb) == 0 && S_ISDIR(sb.st_mode))
                tfs_test_rmtree(child);
            else
                unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}

int tfs_test_copytree(const char *from, const char *to)
{
    struct stat sb;
    if (stat(from, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode)) {
        size_t len;
        char *data = tfs_test_read_file(from, &len);
        if (!data)
            return -1;
        int rc = tfs_test_write_file(to, data, len);
        free(data);
        return rc;
    }
    if (mkdir(to, 0755) != 0 && errno != EEXIST)
        return -1;
    DIR *d = opendir(from);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        rc = tfs_test_copytree(a, b);
    }
    closedir(d);
    return rc;
}

char *tfs_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

int tfs_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return (fclose(f) == 0 && w == len) ? 0 : -1;
}

tfs_tensor *tfs_test_tensor_f32(int rank, const int64_t *dims, const float *values)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st), TFS_OK);
    if (t->nelem)
        memcpy(t->data, values, (size_t)t->nelem * sizeof(float));
    return t;
}

void tfs_test_assert_f32(const tfs_tensor *t, int rank, const int64_t *dims, const float *want,
                         double tol)
{
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(t->dtype == TFS_DTYPE_FLOAT, "dtype %s, want DT_FLOAT", tfs_dtype_name(t->dtype));
    char a[128], b[128];
    ck_assert_msg(tfs_shape_equal(t->rank, t->dims, rank, dims), "shape %s, want %s",
                  tfs_shape_str(t->rank, t->dims, a, sizeof a), tfs_shape_str(rank, dims, b, sizeof b));
    const float *got = t->data;
    int bad = 0;
    double maxdiff = 0;
    for (int64_t i = 0; i < t->nelem; i++) {
        double d = (double)got[i] - (double)want[i];
        if (d < 0)
            d = -d;
        if (d > maxdiff)
            maxdiff = d;
        if (!(d <= tol) && bad++ < 5)
            fprintf(stderr, "  [%lld] got %.9g want %.9g\n", (long long)i, got[i], want[i]);
    }
    ck_assert_msg(bad == 0, "%d of %lld elements differ by more than %g (max %g)", bad,
                  (long long)t->nelem, tol, maxdiff);
}
