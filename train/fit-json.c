/* A training run's figures as JSON (fit.h tfs_fit_result_json; tfserve-train --metrics_json):
 * the per-epoch columns of tfs_fit_result for scripts such as bench/train_vs_pytorch.sh, which
 * would otherwise have to scrape the progress lines (rounded to 4 digits, and only while they
 * keep their wording).
 *
 *     {"epochs": 2, "global_step": 1876,
 *      "seconds": [31.2, 30.9], "train_loss": [0.52, 0.33], "train_accuracy": [0.81, 0.88],
 *      "eval_loss": [0.41, 0.36], "eval_accuracy": [0.85, 0.87],
 *      "export_path": "/tmp/run/export/1", "checkpoint": null}
 *
 * Numbers are printed with 17 significant digits, so they read back as the same doubles; a NaN
 * or an infinity (no eval set, a regression model's accuracy) is null, as JSON has neither.
 * Strings get JSON's escapes for '"', '\' and control bytes; other bytes pass through as they are
 * (paths are bytes, not necessarily UTF-8). The file is written beside its path and renamed into
 * place, so a reader never sees half of it.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "train/fit.h"

typedef struct buf {
    char  *p;
    size_t len, cap;
    bool   oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(buf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *p = tfs_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void put_number(buf *b, double v)
{
    if (isfinite(v))
        put(b, "%.17g", v);
    else
        put(b, "null");
}

static void put_string(buf *b, const char *s)
{
    if (!s) {
        put(b, "null");
        return;
    }
    put(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            put(b, "\\%c", *c);
        else if (*c < 0x20)
            put(b, "\\u%04x", *c);
        else
            put(b, "%c", *c);
    }
    put(b, "\"");
}

enum tfs_code tfs_fit_result_json(const tfs_fit_result *r, char **out, size_t *len,
                                  tfs_status *st)
{
    *out = NULL;
    *len = 0;
    if (r->epochs < 0 || r->epochs > 100000000)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "fit result: %lld epochs", (long long)r->epochs);
    const struct {
        const char   *name;
        const double *v;
    } cols[] = {{"seconds", r->seconds},       {"train_loss", r->train_loss},
                {"train_accuracy", r->train_accuracy}, {"eval_loss", r->eval_loss},
                {"eval_accuracy", r->eval_accuracy}};
    buf b = {0};
    put(&b, "{\n  \"epochs\": %lld,\n  \"global_step\": %lld", (long long)r->epochs,
        (long long)r->global_step);
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        put(&b, ",\n  \"%s\": [", cols[c].name);
        for (int64_t e = 0; e < r->epochs; e++) {
            if (e)
                put(&b, ", ");
            put_number(&b, cols[c].v ? cols[c].v[e] : NAN);
        }
        put(&b, "]");
    }
    put(&b, ",\n  \"export_path\": ");
    put_string(&b, r->export_path);
    put(&b, ",\n  \"checkpoint\": ");
    put_string(&b, r->checkpoint);
    put(&b, "\n}\n");
    if (b.oom) {
        tfs_free(b.p);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "fit result: out of memory for %lld epochs",
                       (long long)r->epochs);
    }
    *out = b.p;
    *len = b.len;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_fit_result_write_json(const tfs_fit_result *r, const char *path,
                                        tfs_status *st)
{
    static atomic_uint serial;
    char tmp[4096], *json = NULL;
    size_t n = 0;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp%ld-%u", path, (long)getpid(),
                         atomic_fetch_add(&serial, 1)) >= sizeof tmp)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", path);
    enum tfs_code rc = tfs_fit_result_json(r, &json, &n, st);
    if (rc != TFS_OK)
        return rc;
    FILE *f = fopen(tmp, "wbx");
    if (!f) {
        int err = errno;
        rc = TFS_ERR(st, err == ENOENT ? TFS_NOT_FOUND : TFS_PERMISSION_DENIED,
                     "%s: cannot create: %s", tmp, strerror(err));
        goto fail;
    }
    bool ok = fwrite(json, 1, n, f) == n && fflush(f) == 0;
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        unlink(tmp);
        rc = TFS_ERR(st, err == ENOSPC || err == EFBIG || err == EDQUOT ? TFS_RESOURCE_EXHAUSTED
                                                                         : TFS_UNKNOWN,
                     "%s: write failed: %s", path, strerror(err));
        goto fail;
    }
    tfs_free(json);
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_free(json);
    return rc;
}
