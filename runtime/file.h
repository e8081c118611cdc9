/* Replacing a file atomically: readers see the old content or the new, never part of either, and
 * after a crash the file is one or the other. The one way every writer that replaces a file
 * (checkpoints, bundles, SavedModels, state files, JSON and SVG reports) does it.
 *
 *     tfs_atomic_file af;
 *     if (tfs_atomic_file_open("run/metrics.json", &af, &st) != TFS_OK) return st.code;
 *     fwrite(bytes, 1, n, af.f);                      // errors surface at commit
 *     return tfs_atomic_file_commit(&af, &st);        // or tfs_atomic_file_abort(&af)
 *
 *     tfs_atomic_file_write("run/metrics.json", bytes, n, &st);   // the same in one call
 *
 * How: the bytes go to a temporary file beside the target (path + ".tmp<pid>-<n>", so the rename
 * stays within one file system), which is fsynced, closed and renamed over the target; then the
 * directory is fsynced so that the rename itself is durable. On any failure the temporary is
 * removed and the target is as it was. Errors name the file, with codes by tfs_code_from_errno.
 * Thread-safe (temporaries of concurrent writers have distinct names); one thread per
 * tfs_atomic_file.
 */
#ifndef TFS_RUNTIME_FILE_H
#define TFS_RUNTIME_FILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/status.h"

/* A replacement in progress. Caller-provided memory; no heap allocation besides the FILE. */
typedef struct tfs_atomic_file {
    FILE *f;                 /* the temporary, open for writing; NULL once committed or aborted */
    char  path[PATH_MAX];    /* the target */
    char  tmp[PATH_MAX];     /* the temporary */
} tfs_atomic_file;

/* Creates the temporary for replacing `path` (which need not exist yet; its directory must).
 * On failure af->f is NULL and nothing was created. */
enum tfs_code tfs_atomic_file_open(const char *path, tfs_atomic_file *af, tfs_status *st);
/* Flushes, fsyncs and closes the temporary, renames it over the target and fsyncs the directory.
 * Ends af either way: on failure the temporary is gone and the target untouched (unless only the
 * directory fsync failed: then the new content is in place but may not survive a crash). */
enum tfs_code tfs_atomic_file_commit(tfs_atomic_file *af, tfs_status *st);
/* Closes and removes the temporary; the target stays as it was. No-op on an ended af. */
void tfs_atomic_file_abort(tfs_atomic_file *af);

/* Replaces path with the n bytes at data (open, write, commit). */
enum tfs_code tfs_atomic_file_write(const char *path, const void *data, size_t n, tfs_status *st);

/* fsync of a directory, so that the renames, creations and unlinks in it are durable. */
enum tfs_code tfs_dir_fsync(const char *dir, tfs_status *st);
/* The same for the directory that holds path ("." when path has no slash): after renaming path
 * into place by other means (a whole directory, say). */
enum tfs_code tfs_dir_fsync_parent(const char *path, tfs_status *st);

#endif
