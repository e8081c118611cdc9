/* Test helpers: see tfs-test.h. */
#include "tests/support/tfs-test.h"

#include <dirent.h>
#include <errno.h>
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

bool tfs_test_skip_without_fixture(const char *test, const char *rel)
{
    char buf[4096];
    if (tfs_test_fixture(rel, buf, sizeof buf))
        return false;
    fprintf(stderr, "SKIP %s: fixture %s absent (set TFS_FIXTURES or provide ../shared/fixtures)\n",
            test, rel);
    return true;
}

char *tfs_test_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/tfs-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
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
