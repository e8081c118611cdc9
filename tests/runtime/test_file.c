/* Tests of the errno -> code table (runtime/status.c) and of atomic file replacement
 * (runtime/file.c), on real files in a fresh directory: the target ends with the old content or
 * the new, never part of one, and no temporary stays behind. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_file(void);

/* ---- errno -> code -------------------------------------------------------------------------- */

/* TensorFlow's table (tensorflow/core/platform/errors.cc, ErrnoToCode), row by row. */
static const struct {
    int           err;
    enum tfs_code code;
} errno_rows[] = {
    {0, TFS_OK},
    {ENOENT, TFS_NOT_FOUND},
    {ENODEV, TFS_NOT_FOUND},
    {EACCES, TFS_PERMISSION_DENIED},
    {EPERM, TFS_PERMISSION_DENIED},
    {EROFS, TFS_PERMISSION_DENIED},
    {ENOSPC, TFS_RESOURCE_EXHAUSTED},
    {EDQUOT, TFS_RESOURCE_EXHAUSTED},
    {ENOMEM, TFS_RESOURCE_EXHAUSTED},
    {EMFILE, TFS_RESOURCE_EXHAUSTED},
    {ENFILE, TFS_RESOURCE_EXHAUSTED},
    {EEXIST, TFS_ALREADY_EXISTS},
    {EINVAL, TFS_INVALID_ARGUMENT},
    {ENAMETOOLONG, TFS_INVALID_ARGUMENT},
    {ESPIPE, TFS_INVALID_ARGUMENT},
    {ENOTDIR, TFS_FAILED_PRECONDITION},
    {EISDIR, TFS_FAILED_PRECONDITION},
    {ENOTEMPTY, TFS_FAILED_PRECONDITION},
    {EBADF, TFS_FAILED_PRECONDITION},
    {EBUSY, TFS_FAILED_PRECONDITION},
    {EPIPE, TFS_FAILED_PRECONDITION},
    {EFBIG, TFS_OUT_OF_RANGE},
    {ERANGE, TFS_OUT_OF_RANGE},
    {EOVERFLOW, TFS_OUT_OF_RANGE},
    {EXDEV, TFS_UNIMPLEMENTED},
    {ENOSYS, TFS_UNIMPLEMENTED},
    {ENOTSUP, TFS_UNIMPLEMENTED},
    {EAGAIN, TFS_UNAVAILABLE},
    {EINTR, TFS_UNAVAILABLE},
    {ECONNREFUSED, TFS_UNAVAILABLE},
    {ETIMEDOUT, TFS_DEADLINE_EXCEEDED},
    {EDEADLK, TFS_ABORTED},
    {ESTALE, TFS_ABORTED},
    {ECANCELED, TFS_CANCELLED},
    {EIO, TFS_UNKNOWN},
    {ELOOP, TFS_UNKNOWN},
    {123456, TFS_UNKNOWN},
};

START_TEST(test_errno_table)
{
    for (size_t i = 0; i < sizeof errno_rows / sizeof errno_rows[0]; i++) {
        enum tfs_code got = tfs_code_from_errno(errno_rows[i].err);
        ck_assert_msg(got == errno_rows[i].code, "errno %d (%s): got %s, want %s",
                      errno_rows[i].err, strerror(errno_rows[i].err), tfs_code_name(got),
                      tfs_code_name(errno_rows[i].code));
    }
}
END_TEST

/* ---- atomic replacement --------------------------------------------------------------------- */

/* The number of entries in dir besides "." and "..". */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int            n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void assert_content(const char *path, const char *want)
{
    size_t len = 0;
    char  *got = tfs_test_read_file(path, &len);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(len, strlen(want));
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(test_atomic_write_creates_and_replaces)
{
    char      *dir = tfs_test_mkdtemp();
    char       path[4096];
    tfs_status st;
    snprintf(path, sizeof path, "%s/state.txt", dir);

    ck_assert_int_eq(tfs_atomic_file_write(path, "first", 5, &st), TFS_OK);
    ck_assert_str_eq(st.msg, "");
    assert_content(path, "first");
    ck_assert_int_eq(tfs_atomic_file_write(path, "second, longer", 14, &st), TFS_OK);
    assert_content(path, "second, longer");
    ck_assert_int_eq(tfs_atomic_file_write(path, "", 0, &st), TFS_OK);
    assert_content(path, "");
    ck_assert_int_eq(count_entries(dir), 1);   /* no temporaries left */

    /* A relative path: the temporary and the directory sync are in the current directory. */
    char cwd[4096];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(dir), 0);
    ck_assert_int_eq(tfs_atomic_file_write("rel.txt", "r", 1, &st), TFS_OK);
    ck_assert_int_eq(chdir(cwd), 0);
    snprintf(path, sizeof path, "%s/rel.txt", dir);
    assert_content(path, "r");
    ck_assert_int_eq(count_entries(dir), 2);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_atomic_stream_commit_and_abort)
{
    char           *dir = tfs_test_mkdtemp();
    char            path[4096];
    tfs_status      st;
    tfs_atomic_file af;
    snprintf(path, sizeof path, "%s/data", dir);
    ck_assert_int_eq(tfs_atomic_file_write(path, "old", 3, &st), TFS_OK);

    /* Streamed pieces, invisible until commit. */
    ck_assert_int_eq(tfs_atomic_file_open(path, &af, &st), TFS_OK);
    ck_assert_ptr_nonnull(af.f);
    fputs("new ", af.f);
    fputs("content", af.f);
    fflush(af.f);
    assert_content(path, "old");
    ck_assert_int_eq(count_entries(dir), 2);   /* the target and the temporary */
    ck_assert_int_eq(tfs_atomic_file_commit(&af, &st), TFS_OK);
    ck_assert_ptr_null(af.f);
    assert_content(path, "new content");
    ck_assert_int_eq(count_entries(dir), 1);
    /* A second commit is a caller bug reported as such, not a crash. */
    ck_assert_int_eq(tfs_atomic_file_commit(&af, &st), TFS_FAILED_PRECONDITION);

    /* Abort: the temporary goes, the target stays. */
    ck_assert_int_eq(tfs_atomic_file_open(path, &af, &st), TFS_OK);
    fputs("discarded", af.f);
    tfs_atomic_file_abort(&af);
    tfs_atomic_file_abort(&af);   /* ended: a no-op */
    tfs_atomic_file_abort(NULL);
    assert_content(path, "new content");
    ck_assert_int_eq(count_entries(dir), 1);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_atomic_write_failures_leave_target_and_no_temporary)
{
    char      *dir = tfs_test_mkdtemp();
    char       path[4096], sub[4096];
    tfs_status st;

    /* The directory does not exist: nothing is created. */
    snprintf(path, sizeof path, "%s/missing/file", dir);
    ck_assert_int_eq(tfs_atomic_file_write(path, "x", 1, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "cannot create"));
    ck_assert_int_eq(count_entries(dir), 0);

    /* The target is a non-empty directory: everything succeeds up to the rename, which fails
     * (EISDIR); the written temporary must be removed and the directory left alone. */
    snprintf(sub, sizeof sub, "%s/target", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    snprintf(path, sizeof path, "%s/target/inside", dir);
    ck_assert_int_eq(tfs_test_write_file(path, "keep", 4), 0);
    ck_assert_int_eq(tfs_atomic_file_write(sub, "data", 4, &st), TFS_FAILED_PRECONDITION);
    ck_assert_ptr_nonnull(strstr(st.msg, sub));
    struct stat sb;
    ck_assert_int_eq(stat(sub, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    assert_content(path, "keep");
    ck_assert_int_eq(count_entries(dir), 1);   /* just target/ */
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_atomic_write_read_only_directory)
{
    /* Root may write into any directory, so the writer runs in a child that is not root (as
     * nobody when the test runs as root). */
    char      *dir = tfs_test_mkdtemp();
    char       path[4096];
    tfs_status st;
    snprintf(path, sizeof path, "%s/f", dir);
    ck_assert_int_eq(tfs_atomic_file_write(path, "old", 3, &st), TFS_OK);
    ck_assert_int_eq(chmod(path, 0666), 0);
    ck_assert_int_eq(chmod(dir, 0555), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        tfs_status cst;
        enum tfs_code rc = tfs_atomic_file_write(path, "new", 3, &cst);
        _exit(rc == TFS_PERMISSION_DENIED && strstr(cst.msg, "cannot create") ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(chmod(dir, 0755), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "writer child: status %d (3: could not drop root)", status);
    assert_content(path, "old");
    ck_assert_int_eq(count_entries(dir), 1);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_atomic_write_fails_midway)
{
    /* A file-size limit makes the write fail part way (EFBIG), as a full disk would: the target
     * keeps its old bytes and the partial temporary is removed. Check runs each test in a child
     * process, so the limit dies with it; it is put back anyway for CK_FORK=no. */
    char      *dir = tfs_test_mkdtemp();
    char       path[4096];
    tfs_status st;
    snprintf(path, sizeof path, "%s/model.bin", dir);
    ck_assert_int_eq(tfs_atomic_file_write(path, "old bytes", 9, &st), TFS_OK);

    size_t n = 1 << 20;
    char  *big = malloc(n);
    ck_assert_ptr_nonnull(big);
    memset(big, 'z', n);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 64 << 10;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    enum tfs_code rc = tfs_atomic_file_write(path, big, n, &st);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    free(big);

    ck_assert_int_eq(rc, TFS_OUT_OF_RANGE);   /* EFBIG, by TensorFlow's table */
    ck_assert_ptr_nonnull(strstr(st.msg, "model.bin: write failed"));
    assert_content(path, "old bytes");
    ck_assert_int_eq(count_entries(dir), 1);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_atomic_write_readers_see_old_or_new)
{
    /* A writer process alternates two contents of different lengths; every read in between is
     * exactly one of them, and the file is never missing. */
    char      *dir = tfs_test_mkdtemp();
    char       path[4096];
    tfs_status st;
    size_t     na = 50000, nb = 120000;
    char      *a = malloc(na), *b = malloc(nb);
    ck_assert(a && b);
    memset(a, 'a', na);
    memset(b, 'b', nb);
    snprintf(path, sizeof path, "%s/live", dir);
    ck_assert_int_eq(tfs_atomic_file_write(path, a, na, &st), TFS_OK);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (int i = 0; i < 40; i++)
            if (tfs_atomic_file_write(path, i % 2 ? a : b, i % 2 ? na : nb, NULL) != TFS_OK)
                _exit(1);
        _exit(0);
    }
    int reads = 0, seen_a = 0, seen_b = 0, status = 0;
    for (;;) {
        bool done = waitpid(pid, &status, WNOHANG) == pid;
        size_t len = 0;
        char  *got = tfs_test_read_file(path, &len);
        ck_assert_msg(got != NULL, "the file was missing during a replacement");
        if (len == na && !memcmp(got, a, na))
            seen_a++;
        else if (len == nb && !memcmp(got, b, nb))
            seen_b++;
        else
            ck_abort_msg("read %zu bytes that are neither the old nor the new content", len);
        free(got);
        reads++;
        if (done)
            break;
    }
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(seen_a + seen_b, reads);
    free(a);
    free(b);
    ck_assert_int_eq(count_entries(dir), 1);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_dir_fsync)
{
    char      *dir = tfs_test_mkdtemp();
    char       path[4096];
    tfs_status st;
    ck_assert_int_eq(tfs_dir_fsync(dir, &st), TFS_OK);
    snprintf(path, sizeof path, "%s/file", dir);
    ck_assert_int_eq(tfs_dir_fsync_parent(path, &st), TFS_OK);
    snprintf(path, sizeof path, "%s/nope", dir);
    ck_assert_int_eq(tfs_dir_fsync(path, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "cannot sync directory"));
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_runtime_file(void)
{
    Suite *s = suite_create("runtime_file");
    TCase *tc = tcase_create("errno");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_errno_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("atomic");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_atomic_write_creates_and_replaces);
    tcase_add_test(tc, test_atomic_stream_commit_and_abort);
    tcase_add_test(tc, test_atomic_write_failures_leave_target_and_no_temporary);
    tcase_add_test(tc, test_atomic_write_read_only_directory);
    tcase_add_test(tc, test_atomic_write_fails_midway);
    tcase_add_test(tc, test_atomic_write_readers_see_old_or_new);
    tcase_add_test(tc, test_dir_fsync);
    suite_add_tcase(s, tc);
    return s;
}
