/* Status codes and the caller-owned status record every fallible tfserve function fills.
 *
 * enum tfs_code has the values of TensorFlow's error::Code and gRPC's status codes, so it crosses
 * every boundary unchanged. A fallible function returns the code and takes `tfs_status *st` as its
 * last parameter (NULL allowed when the caller wants only the code). On success st->code is TFS_OK
 * and st->msg is "". Messages name the thing at fault: "input 'x': expected dtype DT_FLOAT, got DT_STRING".
 *
 *     tfs_status st;
 *     if (tfs_tensor_new(TFS_DTYPE_FLOAT, 1, dims, &t, &st) != TFS_OK)
 *         fprintf(stderr, "%s: %s\n", tfs_code_name(st.code), st.msg);
 */
#ifndef TFS_RUNTIME_STATUS_H
#define TFS_RUNTIME_STATUS_H

#include <stdarg.h>
#include <stdbool.h>

enum tfs_code {
    TFS_OK                  = 0,
    TFS_CANCELLED           = 1,
    TFS_UNKNOWN             = 2,
    TFS_INVALID_ARGUMENT    = 3,
    TFS_DEADLINE_EXCEEDED   = 4,
    TFS_NOT_FOUND           = 5,
    TFS_ALREADY_EXISTS      = 6,
    TFS_PERMISSION_DENIED   = 7,
    TFS_RESOURCE_EXHAUSTED  = 8,
    TFS_FAILED_PRECONDITION = 9,
    TFS_ABORTED             = 10,
    TFS_OUT_OF_RANGE        = 11,
    TFS_UNIMPLEMENTED       = 12,
    TFS_INTERNAL            = 13,
    TFS_UNAVAILABLE         = 14,
    TFS_DATA_LOSS           = 15,
    TFS_UNAUTHENTICATED     = 16,
    TFS_CODE_COUNT
};

#define TFS_STATUS_MSG_MAX 1024

typedef struct tfs_status {
    enum tfs_code code;
    char          msg[TFS_STATUS_MSG_MAX];
} tfs_status;

/* Sets st (if not NULL) to OK with an empty message. */
void tfs_status_clear(tfs_status *st);

/* Sets st (if not NULL) to `code` with a printf-formatted message; returns `code`.
 * Use through TFS_ERR so call sites read `return TFS_ERR(st, TFS_NOT_FOUND, "...", ...);`. */
enum tfs_code tfs_status_set(tfs_status *st, enum tfs_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum tfs_code tfs_status_vset(tfs_status *st, enum tfs_code code, const char *fmt, va_list ap);

/* Prepends context and ": " to an error message already in st: fmt "loading '%s'" gives
 * "loading 'dir': <old message>".
 * Keeps the code; returns it. No-op on NULL or OK. */
enum tfs_code tfs_status_prefix(tfs_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The canonical upper-case name: "INVALID_ARGUMENT". Never NULL. */
const char *tfs_code_name(enum tfs_code code);

/* The code for a failed system call's errno, by TensorFlow's table (its IOError): ENOENT
 * NOT_FOUND, EACCES/EPERM/EROFS PERMISSION_DENIED, ENOSPC/EDQUOT/ENOMEM/EMFILE
 * RESOURCE_EXHAUSTED, EEXIST ALREADY_EXISTS, EINVAL/ENAMETOOLONG INVALID_ARGUMENT,
 * ENOTDIR/EISDIR/ENOTEMPTY FAILED_PRECONDITION, EFBIG/ERANGE OUT_OF_RANGE, EXDEV/ENOSYS
 * UNIMPLEMENTED, EAGAIN/EINTR UNAVAILABLE, ... ; 0 is OK, EIO and anything unlisted UNKNOWN. */
enum tfs_code tfs_code_from_errno(int err);

#define TFS_ERR(st, code, ...) tfs_status_set((st), (code), __VA_ARGS__)

/* Our own invariants only; never for anything that came from a request, file or config. */
void tfs_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define TFS_ASSERT(x) ((x) ? (void)0 : tfs_assert_fail(#x, __FILE__, __LINE__))

#endif
