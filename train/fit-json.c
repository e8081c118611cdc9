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
 * (paths are bytes, not necessarily UTF-8). The file is replaced atomically (runtime/file.h), so
 * a reader never sees half of it.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"
#include "train/fit.h"

static void put_number(tfs__buf *b, double v)
{
    if (isfinite(v))
        tfs__buf_printf(b, "%.17g", v);
    else
        tfs__buf_printf(b, "null");
}

static void put_string(tfs__buf *b, const char *s)
{
    if (!s) {
        tfs__buf_printf(b, "null");
        return;
    }
    tfs__buf_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            tfs__buf_printf(b, "\\%c", *c);
        else if (*c < 0x20)
            tfs__buf_printf(b, "\\u%04x", *c);
        else
            tfs__buf_putc(b, (char)*c);
    }
    tfs__buf_printf(b, "\"");
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
    tfs__buf b = {0};
    tfs__buf_printf(&b, "{\n  \"epochs\": %lld,\n  \"global_step\": %lld", (long long)r->epochs,
                    (long long)r->global_step);
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        tfs__buf_printf(&b, ",\n  \"%s\": [", cols[c].name);
        for (int64_t e = 0; e < r->epochs; e++) {
            if (e)
                tfs__buf_printf(&b, ", ");
            put_number(&b, cols[c].v ? cols[c].v[e] : NAN);
        }
        tfs__buf_printf(&b, "]");
    }
    tfs__buf_printf(&b, ",\n  \"export_path\": ");
    put_string(&b, r->export_path);
    tfs__buf_printf(&b, ",\n  \"checkpoint\": ");
    put_string(&b, r->checkpoint);
    tfs__buf_printf(&b, "\n}\n");
    if (!(*out = tfs__buf_take(&b, len)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "fit result: out of memory for %lld epochs",
                       (long long)r->epochs);
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_fit_result_write_json(const tfs_fit_result *r, const char *path,
                                        tfs_status *st)
{
    char  *json = NULL;
    size_t n = 0;
    enum tfs_code rc = tfs_fit_result_json(r, &json, &n, st);
    if (rc != TFS_OK)
        return rc;
    rc = tfs_atomic_file_write(path, json, n, st);
    tfs_free(json);
    return rc;
}
