/* Status records and canonical code names (see status.h).
 *
 * A tfs_status is a caller-owned POD, so setting one never allocates: that keeps the error path
 * usable when the error is an out-of-memory one. Messages longer than TFS_STATUS_MSG_MAX - 1 bytes
 * are truncated.
 */
#include "runtime/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tfs_status_clear(tfs_status *st)
{
    if (!st)
        return;
    st->code = TFS_OK;
    st->msg[0] = '\0';
}

enum tfs_code tfs_status_vset(tfs_status *st, enum tfs_code code, const char *fmt, va_list ap)
{
    if (!st)
        return code;
    st->code = code;
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    return code;
}

enum tfs_code tfs_status_set(tfs_status *st, enum tfs_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfs_status_vset(st, code, fmt, ap);
    va_end(ap);
    return code;
}

enum tfs_code tfs_status_prefix(tfs_status *st, const char *fmt, ...)
{
    if (!st)
        return TFS_OK;
    if (st->code == TFS_OK)
        return TFS_OK;
    char old[TFS_STATUS_MSG_MAX];
    memcpy(old, st->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    /* Append ": <old>", truncating what does not fit. */
    size_t used = (size_t)n < sizeof st->msg ? (size_t)n : sizeof st->msg - 1;
    const char *parts[2] = {": ", old};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(parts[i]), room = sizeof st->msg - 1 - used;
        if (len > room)
            len = room;
        memcpy(st->msg + used, parts[i], len);
        used += len;
    }
    st->msg[used] = '\0';
    return st->code;
}

/* Indexed by enum tfs_code; the names are TensorFlow's and gRPC's. */
static const char *const code_names[TFS_CODE_COUNT] = {
    [TFS_OK]                  = "OK",
    [TFS_CANCELLED]           = "CANCELLED",
    [TFS_UNKNOWN]             = "UNKNOWN",
    [TFS_INVALID_ARGUMENT]    = "INVALID_ARGUMENT",
    [TFS_DEADLINE_EXCEEDED]   = "DEADLINE_EXCEEDED",
    [TFS_NOT_FOUND]           = "NOT_FOUND",
    [TFS_ALREADY_EXISTS]      = "ALREADY_EXISTS",
    [TFS_PERMISSION_DENIED]   = "PERMISSION_DENIED",
    [TFS_RESOURCE_EXHAUSTED]  = "RESOURCE_EXHAUSTED",
    [TFS_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
    [TFS_ABORTED]             = "ABORTED",
    [TFS_OUT_OF_RANGE]        = "OUT_OF_RANGE",
    [TFS_UNIMPLEMENTED]       = "UNIMPLEMENTED",
    [TFS_INTERNAL]            = "INTERNAL",
    [TFS_UNAVAILABLE]         = "UNAVAILABLE",
    [TFS_DATA_LOSS]           = "DATA_LOSS",
    [TFS_UNAUTHENTICATED]     = "UNAUTHENTICATED",
};
_Static_assert(TFS_CODE_COUNT == 17, "code_names must list every enum tfs_code value");

const char *tfs_code_name(enum tfs_code code)
{
    if ((int)code < 0 || code >= TFS_CODE_COUNT)
        return "UNKNOWN";
    return code_names[code];
}

/* TensorFlow's table (its IOError turns errno into these), so a file error reads the same code
 * whichever module met it and whatever TensorFlow would have said. */
enum tfs_code tfs_code_from_errno(int err)
{
    switch (err) {
    case 0:
        return TFS_OK;
    case EINVAL: case ENAMETOOLONG: case E2BIG: case EDESTADDRREQ: case EDOM: case EFAULT:
    case EILSEQ: case ENOPROTOOPT: case ENOSTR: case ENOTSOCK: case ENOTTY: case EPROTOTYPE:
    case ESPIPE:
        return TFS_INVALID_ARGUMENT;
    case ETIMEDOUT: case ETIME:
        return TFS_DEADLINE_EXCEEDED;
    case ENODEV: case ENOENT: case ENXIO: case ESRCH:
        return TFS_NOT_FOUND;
    case EEXIST: case EADDRNOTAVAIL: case EALREADY:
        return TFS_ALREADY_EXISTS;
    case EPERM: case EACCES: case EROFS:
        return TFS_PERMISSION_DENIED;
    case ENOTEMPTY: case EISDIR: case ENOTDIR: case EADDRINUSE: case EBADF: case EBUSY:
    case ECHILD: case EISCONN: case ENOTBLK: case ENOTCONN: case EPIPE: case ESHUTDOWN:
    case ETXTBSY:
        return TFS_FAILED_PRECONDITION;
    case ENOSPC: case EDQUOT: case EMFILE: case EMLINK: case ENFILE: case ENOBUFS: case ENODATA:
    case ENOMEM: case ENOSR: case EUSERS:
        return TFS_RESOURCE_EXHAUSTED;
    case EFBIG: case EOVERFLOW: case ERANGE:
        return TFS_OUT_OF_RANGE;
    case ENOSYS: case ENOTSUP: case EAFNOSUPPORT: case EPFNOSUPPORT: case EPROTONOSUPPORT:
    case ESOCKTNOSUPPORT: case EXDEV:
        return TFS_UNIMPLEMENTED;
    case EAGAIN: case ECONNREFUSED: case ECONNABORTED: case ECONNRESET: case EINTR:
    case EHOSTDOWN: case EHOSTUNREACH: case ENETDOWN: case ENETRESET: case ENETUNREACH:
    case ENOLCK: case ENOLINK: case ENONET:
        return TFS_UNAVAILABLE;
    case EDEADLK: case ESTALE:
        return TFS_ABORTED;
    case ECANCELED:
        return TFS_CANCELLED;
    default:   /* EIO, ELOOP, EBADMSG, EPROTO, ... */
        return TFS_UNKNOWN;
    }
}

void tfs_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "%s:%d: internal assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
