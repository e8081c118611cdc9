/* Internals of checkpoints and event files shared by savedmodel/checkpoint*.c, events.c and their
 * tests: the CheckpointState text the way TensorFlow's Python writes it, and atomic file writes. */
#ifndef TFS_SAVEDMODEL_CHECKPOINT_IMPL_H
#define TFS_SAVEDMODEL_CHECKPOINT_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "savedmodel/savedmodel.h"

/* Formats v as Python's repr(float) does (what protobuf's Python text_format prints for a double):
 * the shortest digits that read back as v; positional notation with at least one fractional digit
 * ("1700000000.5", "3.0", "0.0001") unless the decimal exponent is < -4 or >= 16, then
 * "1e+16", "1.5e-05"; "nan", "inf", "-inf". buf needs 32 bytes. Returns buf. */
char *tfs__format_double_repr(double v, char *buf);

/* A growing text buffer whose appends latch out-of-memory (check .oom once at the end). */
typedef struct tfs__strbuf {
    char  *data;   /* NUL-terminated once anything was appended; tfs_malloc'ed */
    size_t len, cap;
    bool   oom;    /* sticky: an append ran out of memory */
} tfs__strbuf;
void tfs__strbuf_append(tfs__strbuf *b, const char *s, size_t n);
void tfs__strbuf_printf(tfs__strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as protobuf's text format quotes a string (Python's CEscape, as_utf8=False): between
 * double quotes, with \n \r \t \" \' \\ escaped and other bytes outside 32..126 as 3-digit
 * octal. */
void tfs__strbuf_quoted(tfs__strbuf *b, const char *s);
void tfs__strbuf_free(tfs__strbuf *b);

/* The text of a CheckpointState, field by field as text_format.MessageToString prints it (fields
 * at their proto3 defaults omitted). Caller owns *out (tfs_free). RESOURCE_EXHAUSTED only. */
enum tfs_code tfs__checkpoint_state_render(const tfs_checkpoint_state *s, char **out,
                                           tfs_status *st);

/* Writes data to `path` atomically: a temporary file beside it (path + ".tmp<pid>-<n>"), fsync,
 * rename over path, fsync of the directory. On failure the temporary is removed and path is
 * untouched. Allocates nothing. Errors name the file; a full disk (ENOSPC, EDQUOT, EFBIG) is
 * RESOURCE_EXHAUSTED. */
enum tfs_code tfs__write_file_atomic(const char *path, const void *data, size_t n, tfs_status *st);

/* fsync of a directory, so that renames and unlinks in it are durable. */
enum tfs_code tfs__fsync_dir(const char *dir, tfs_status *st);

/* errno -> code for file operations: ENOENT/ENOTDIR NOT_FOUND, EACCES/EPERM/EROFS
 * PERMISSION_DENIED, ENOMEM/ENOSPC/EDQUOT/EFBIG RESOURCE_EXHAUSTED, EEXIST ALREADY_EXISTS,
 * else UNKNOWN. */
enum tfs_code tfs__errno_code(int err);

/* mkdir -p: creates dir and its missing parents (mode 0755). */
enum tfs_code tfs__mkdirs(const char *dir, tfs_status *st);

#endif
