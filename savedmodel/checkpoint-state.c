/* The `checkpoint` state file of a checkpoint directory, read and written as TensorFlow does, and
 * the small file helpers checkpoints and event files share (atomic replace, directory fsync,
 * mkdir -p).
 *
 * DESIGN. TensorFlow writes the file from Python: text_format.MessageToString(CheckpointState),
 * which prints each set field as `name: value` on its own line, strings quoted with CEscape and
 * doubles with Python's repr(). We print the same bytes (tfs__format_double_repr reproduces repr's
 * shortest round-trip digits and its switch to exponent notation), so a state file we write is
 * indistinguishable from one TensorFlow wrote. Reading goes through the project's text-format
 * parser (proto/textformat.h) against the CheckpointState descriptor, so any file protobuf can
 * write (TF's C++ DebugString too) parses; errors come back as DATA_LOSS naming file and line.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/textformat.h"
#include "savedmodel/checkpoint-impl.h"
#include "tensorflow/python/training/checkpoint_state.pb-c.h"

enum tfs_code tfs__errno_code(int err)
{
    switch (err) {
    case ENOENT: case ENOTDIR:           return TFS_NOT_FOUND;
    case EACCES: case EPERM: case EROFS: return TFS_PERMISSION_DENIED;
    case ENOMEM: case ENOSPC: case EDQUOT: case EFBIG: return TFS_RESOURCE_EXHAUSTED;
    case EEXIST:                         return TFS_ALREADY_EXISTS;
    default:                             return TFS_UNKNOWN;
    }
}

/* ---- text buffer ---------------------------------------------------------------------------- */

static bool strbuf_reserve(tfs__strbuf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *d = tfs_realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap  = cap;
    return true;
}

void tfs__strbuf_append(tfs__strbuf *b, const char *s, size_t n)
{
    if (!strbuf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void tfs__strbuf_printf(tfs__strbuf *b, const char *fmt, ...)
{
    char    small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        tfs__strbuf_append(b, small, (size_t)n);
        return;
    }
    if (!strbuf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tfs__strbuf_quoted(tfs__strbuf *b, const char *s)
{
    tfs__strbuf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '\n': tfs__strbuf_append(b, "\\n", 2); break;
        case '\r': tfs__strbuf_append(b, "\\r", 2); break;
        case '\t': tfs__strbuf_append(b, "\\t", 2); break;
        case '"':  tfs__strbuf_append(b, "\\\"", 2); break;
        case '\'': tfs__strbuf_append(b, "\\'", 2); break;
        case '\\': tfs__strbuf_append(b, "\\\\", 2); break;
        default:
            if (*p < 32 || *p >= 127)
                tfs__strbuf_printf(b, "\\%03o", *p);
            else
                tfs__strbuf_append(b, (const char *)p, 1);
        }
    }
    tfs__strbuf_append(b, "\"", 1);
}

void tfs__strbuf_free(tfs__strbuf *b)
{
    if (!b)
        return;
    tfs_free(b->data);
    *b = (tfs__strbuf){0};
}

/* ---- Python's repr(float) ------------------------------------------------------------------- */

char *tfs__format_double_repr(double v, char *buf)
{
    char  tmp[40], digits[20];
    int   nd = 0, exp10 = 0;
    char *o  = buf;

    if (isnan(v)) {
        strcpy(buf, "nan");
        return buf;
    }
    if (isinf(v)) {
        strcpy(buf, v < 0 ? "-inf" : "inf");
        return buf;
    }
    if (signbit(v))
        *o++ = '-';
    v = fabs(v);
    if (v == 0) {
        strcpy(o, "0.0");
        return buf;
    }
    /* The fewest significant digits that read back as v; glibc's printf rounds correctly, so
     * this is the shortest round-trip form David Gay's algorithm (Python's repr) produces. */
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v || p == 17)
            break;
    }
    for (const char *c = tmp; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9')
            digits[nd++] = *c;
    exp10 = atoi(strchr(tmp, 'e') + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int decpt = exp10 + 1;   /* v = 0.d1d2... * 10^decpt */
    if (decpt <= -4 || decpt > 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
        return buf;
    }
    if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++)
            *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else if (decpt >= nd) {
        memcpy(o, digits, (size_t)nd);
        o += nd;
        for (int i = nd; i < decpt; i++)
            *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, (size_t)(nd - decpt));
        o += nd - decpt;
    }
    *o = 0;
    return buf;
}

/* ---- rendering and parsing ------------------------------------------------------------------ */

enum tfs_code tfs__checkpoint_state_render(const tfs_checkpoint_state *s, char **out,
                                           tfs_status *st)
{
    tfs__strbuf b = {0};
    char        num[32];

    *out = NULL;
    if (s->model_checkpoint_path && s->model_checkpoint_path[0]) {
        tfs__strbuf_append(&b, "model_checkpoint_path: ", 23);
        tfs__strbuf_quoted(&b, s->model_checkpoint_path);
        tfs__strbuf_append(&b, "\n", 1);
    }
    for (int i = 0; i < s->n_paths; i++) {
        tfs__strbuf_append(&b, "all_model_checkpoint_paths: ", 28);
        tfs__strbuf_quoted(&b, s->all_model_checkpoint_paths[i]);
        tfs__strbuf_append(&b, "\n", 1);
    }
    for (int i = 0; i < s->n_timestamps; i++)
        tfs__strbuf_printf(&b, "all_model_checkpoint_timestamps: %s\n",
                           tfs__format_double_repr(s->all_model_checkpoint_timestamps[i], num));
    if (s->last_preserved_timestamp != 0)
        tfs__strbuf_printf(&b, "last_preserved_timestamp: %s\n",
                           tfs__format_double_repr(s->last_preserved_timestamp, num));
    if (!b.oom && !b.data)
        tfs__strbuf_append(&b, "", 0);
    if (b.oom) {
        tfs__strbuf_free(&b);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rendering a checkpoint state");
    }
    *out = b.data;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_checkpoint_state_free(tfs_checkpoint_state *s)
{
    if (!s)
        return;
    tfs_free(s->model_checkpoint_path);
    for (int i = 0; i < s->n_paths; i++)
        tfs_free(s->all_model_checkpoint_paths[i]);
    tfs_free(s->all_model_checkpoint_paths);
    tfs_free(s->all_model_checkpoint_timestamps);
    tfs_free(s);
}

/* "<dir>/checkpoint" into buf; false when it does not fit. */
static bool state_path(const char *dir, char *buf, size_t n)
{
    return (size_t)snprintf(buf, n, "%s/checkpoint", dir) < n;
}

enum tfs_code tfs_checkpoint_state_read(const char *dir, tfs_checkpoint_state **out,
                                        tfs_status *st)
{
    Tensorflow__CheckpointState *m = NULL;
    tfs_checkpoint_state        *s = NULL;
    char                         path[PATH_MAX];
    struct stat                  sb;
    enum tfs_code                rc;

    *out = NULL;
    if (!state_path(dir, path, sizeof path))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", dir);
    if (stat(path, &sb) != 0) {
        int err = errno;
        if (err == ENOENT || err == ENOTDIR)
            return TFS_ERR(st, TFS_NOT_FOUND, "%s: no checkpoint state file '%s' (no checkpoint "
                           "saved there yet?)", dir, path);
        return TFS_ERR(st, tfs__errno_code(err), "%s: %s", path, strerror(err));
    }
    rc = tfs_textformat_parse_file(&tensorflow__checkpoint_state__descriptor, path,
                                   (ProtobufCMessage **)&m, st);
    if (rc == TFS_INVALID_ARGUMENT) {
        /* The parser's message already names file, line and column. */
        tfs_status_prefix(st, "corrupt checkpoint state");
        if (st)
            st->code = TFS_DATA_LOSS;
        rc = TFS_DATA_LOSS;
        goto fail;
    }
    if (rc != TFS_OK)
        goto fail;
    if (!m->model_checkpoint_path[0]) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: invalid checkpoint state: model_checkpoint_path is "
                     "empty", path);
        goto fail;
    }
    if (m->n_all_model_checkpoint_timestamps != 0 &&
        m->n_all_model_checkpoint_timestamps != m->n_all_model_checkpoint_paths) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: invalid checkpoint state: %zu timestamps for %zu "
                     "paths", path, m->n_all_model_checkpoint_timestamps,
                     m->n_all_model_checkpoint_paths);
        goto fail;
    }
    if (m->n_all_model_checkpoint_paths > INT_MAX / 2) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: invalid checkpoint state: too many paths", path);
        goto fail;
    }
    if (!(s = tfs_calloc(1, sizeof *s)))
        goto oom;
    size_t np = m->n_all_model_checkpoint_paths;
    if (!(s->model_checkpoint_path = tfs_strdup(m->model_checkpoint_path)) ||
        !(s->all_model_checkpoint_paths = tfs_calloc(np ? np : 1, sizeof(char *))) ||
        !(s->all_model_checkpoint_timestamps = tfs_calloc(np ? np : 1, sizeof(double))))
        goto oom;
    for (size_t i = 0; i < np; i++) {
        if (!(s->all_model_checkpoint_paths[i] = tfs_strdup(m->all_model_checkpoint_paths[i])))
            goto oom;
        s->n_paths++;
    }
    s->n_timestamps = (int)m->n_all_model_checkpoint_timestamps;
    for (int i = 0; i < s->n_timestamps; i++)
        s->all_model_checkpoint_timestamps[i] = m->all_model_checkpoint_timestamps[i];
    s->last_preserved_timestamp = m->last_preserved_timestamp;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = s;
    tfs_status_clear(st);
    return TFS_OK;
oom:
    rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory reading the checkpoint state",
                 path);
fail:
    if (m)
        protobuf_c_message_free_unpacked(&m->base, NULL);
    tfs_checkpoint_state_free(s);
    return rc;
}

enum tfs_code tfs_checkpoint_latest(const char *dir, char **prefix, tfs_status *st)
{
    tfs_checkpoint_state *s = NULL;
    char                 *p = NULL;
    enum tfs_code         rc;
    struct stat           sb;

    *prefix = NULL;
    if ((rc = tfs_checkpoint_state_read(dir, &s, st)) != TFS_OK)
        return rc;
    const char *rel = s->model_checkpoint_path;
    size_t      n   = rel[0] == '/' ? strlen(rel) + 1 : strlen(dir) + 1 + strlen(rel) + 1;
    char        index[PATH_MAX];
    if (!(p = tfs_malloc(n))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", dir);
        goto done;
    }
    if (rel[0] == '/')
        memcpy(p, rel, n);
    else
        snprintf(p, n, "%s/%s", dir, rel);
    if ((size_t)snprintf(index, sizeof index, "%s.index", p) >= sizeof index) {
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: checkpoint path too long", dir);
        goto done;
    }
    if (stat(index, &sb) != 0) {
        rc = TFS_ERR(st, TFS_NOT_FOUND, "%s/checkpoint names checkpoint '%s' but '%s' does not "
                     "exist", dir, rel, index);
        goto done;
    }
    *prefix = p;
    p = NULL;
    tfs_status_clear(st);
done:
    tfs_free(p);
    tfs_checkpoint_state_free(s);
    return rc;
}

/* ---- file helpers --------------------------------------------------------------------------- */

enum tfs_code tfs__fsync_dir(const char *dir, tfs_status *st)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return TFS_ERR(st, tfs__errno_code(err), "%s: cannot sync directory: %s", dir,
                       strerror(err));
    }
    close(fd);
    return TFS_OK;
}

/* The directory part of path into buf ("." when there is none). */
static void dirname_of(const char *path, char *buf, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, n, ".");
    else if (slash == path)
        snprintf(buf, n, "/");
    else
        snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

enum tfs_code tfs__write_file_atomic(const char *path, const void *data, size_t n, tfs_status *st)
{
    static atomic_uint serial;
    char               tmp[PATH_MAX], dir[PATH_MAX];
    const char        *p = data;
    int                fd, err = 0;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp%ld-%u", path, (long)getpid(),
                         atomic_fetch_add(&serial, 1)) >= sizeof tmp)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        err = errno;
        return TFS_ERR(st, tfs__errno_code(err), "%s: cannot create: %s", tmp, strerror(err));
    }
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            err = w < 0 ? errno : ENOSPC;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (!err && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        return TFS_ERR(st, tfs__errno_code(err), "%s: write failed: %s", path, strerror(err));
    }
    dirname_of(path, dir, sizeof dir);
    return tfs__fsync_dir(dir, st);
}

enum tfs_code tfs__mkdirs(const char *dir, tfs_status *st)
{
    char        buf[PATH_MAX];
    struct stat sb;
    size_t      n = strlen(dir);

    if (n == 0 || n >= sizeof buf)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "'%s': bad directory name", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            int err = errno;
            return TFS_ERR(st, tfs__errno_code(err), "%s: cannot create directory: %s", buf,
                           strerror(err));
        }
        buf[i] = c;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: not a directory", dir);
    return TFS_OK;
}
