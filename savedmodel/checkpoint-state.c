/* The `checkpoint` state file of a checkpoint directory, read and written as TensorFlow does, and
 * mkdir -p for checkpoints and event files (replacing files is runtime/file.h's job).
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
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/textformat.h"
#include "savedmodel/checkpoint-impl.h"
#include "tensorflow/python/training/checkpoint_state.pb-c.h"

/* ---- text ---------------------------------------------------------------------------------- */

/* Appends s as protobuf's text format quotes a string (Python's CEscape, as_utf8=False): between
 * double quotes, with \n \r \t \" \' \\ escaped and other bytes outside 32..126 as 3-digit
 * octal. */
static void put_quoted(tfs__buf *b, const char *s)
{
    tfs__buf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '\n': tfs__buf_append(b, "\\n", 2); break;
        case '\r': tfs__buf_append(b, "\\r", 2); break;
        case '\t': tfs__buf_append(b, "\\t", 2); break;
        case '"':  tfs__buf_append(b, "\\\"", 2); break;
        case '\'': tfs__buf_append(b, "\\'", 2); break;
        case '\\': tfs__buf_append(b, "\\\\", 2); break;
        default:
            if (*p < 32 || *p >= 127)
                tfs__buf_printf(b, "\\%03o", *p);
            else
                tfs__buf_append(b, (const char *)p, 1);
        }
    }
    tfs__buf_append(b, "\"", 1);
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
    tfs__buf b = {0};
    char     num[32];

    *out = NULL;
    if (s->model_checkpoint_path && s->model_checkpoint_path[0]) {
        tfs__buf_append(&b, "model_checkpoint_path: ", 23);
        put_quoted(&b, s->model_checkpoint_path);
        tfs__buf_append(&b, "\n", 1);
    }
    for (int i = 0; i < s->n_paths; i++) {
        tfs__buf_append(&b, "all_model_checkpoint_paths: ", 28);
        put_quoted(&b, s->all_model_checkpoint_paths[i]);
        tfs__buf_append(&b, "\n", 1);
    }
    for (int i = 0; i < s->n_timestamps; i++)
        tfs__buf_printf(&b, "all_model_checkpoint_timestamps: %s\n",
                           tfs__format_double_repr(s->all_model_checkpoint_timestamps[i], num));
    if (s->last_preserved_timestamp != 0)
        tfs__buf_printf(&b, "last_preserved_timestamp: %s\n",
                           tfs__format_double_repr(s->last_preserved_timestamp, num));
    if (!(*out = tfs__buf_take(&b, NULL)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rendering a checkpoint state");
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
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: %s", path, strerror(err));
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
            return TFS_ERR(st, tfs_code_from_errno(err), "%s: cannot create directory: %s", buf,
                           strerror(err));
        }
        buf[i] = c;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: not a directory", dir);
    return TFS_OK;
}
