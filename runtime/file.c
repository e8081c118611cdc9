/* Atomic file replacement (file.h). */
#include "runtime/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum tfs_code tfs_dir_fsync(const char *dir, tfs_status *st)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: cannot sync directory: %s", dir,
                       strerror(err));
    }
    close(fd);
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_dir_fsync_parent(const char *path, tfs_status *st)
{
    char        dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= sizeof dir)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", path);
    return tfs_dir_fsync(dir, st);
}

enum tfs_code tfs_atomic_file_open(const char *path, tfs_atomic_file *af, tfs_status *st)
{
    static atomic_uint serial;
    af->f = NULL;
    af->tmp[0] = 0;
    if ((size_t)snprintf(af->path, sizeof af->path, "%s", path) >= sizeof af->path ||
        (size_t)snprintf(af->tmp, sizeof af->tmp, "%s.tmp%ld-%u", path, (long)getpid(),
                         atomic_fetch_add(&serial, 1)) >= sizeof af->tmp)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", path);
    /* O_EXCL: never write through a file (or link) someone else put there. */
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: cannot create: %s", af->tmp,
                       strerror(err));
    }
    if (!(af->f = fdopen(fd, "wb"))) {
        int err = errno;
        close(fd);
        unlink(af->tmp);
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: cannot create: %s", af->tmp,
                       strerror(err));
    }
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_atomic_file_abort(tfs_atomic_file *af)
{
    if (!af || !af->f)
        return;
    fclose(af->f);
    af->f = NULL;
    unlink(af->tmp);
}

enum tfs_code tfs_atomic_file_commit(tfs_atomic_file *af, tfs_status *st)
{
    int err = 0;

    if (!af->f)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: replacement already ended", af->path);
    /* The errno of an fwrite that failed earlier is long gone: ferror is all that remains of it. */
    errno = 0;
    if (fflush(af->f) != 0)
        err = errno ? errno : EIO;
    else if (ferror(af->f))
        err = EIO;
    if (!err && fsync(fileno(af->f)) != 0)
        err = errno;
    if (fclose(af->f) != 0 && !err)
        err = errno;
    af->f = NULL;
    if (!err && rename(af->tmp, af->path) != 0)
        err = errno;
    if (err) {
        unlink(af->tmp);
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: write failed: %s", af->path,
                       strerror(err));
    }
    return tfs_dir_fsync_parent(af->path, st);
}

enum tfs_code tfs_atomic_file_write(const char *path, const void *data, size_t n, tfs_status *st)
{
    tfs_atomic_file af;
    enum tfs_code   rc = tfs_atomic_file_open(path, &af, st);
    if (rc != TFS_OK)
        return rc;
    errno = 0;
    if (n && fwrite(data, 1, n, af.f) != n) {
        int err = errno ? errno : EIO;
        tfs_atomic_file_abort(&af);
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: write failed: %s", path,
                       strerror(err));
    }
    return tfs_atomic_file_commit(&af, st);
}
