/* CSV files with a header row (RFC 4180 quoting) into a float feature matrix and a label vector.
 *
 * The file is read whole (plain or gzip) and parsed in one pass. Records are split into fields
 * with RFC 4180's rules: a field that starts with '"' runs to the next lone '"' ("" inside is one
 * quote, and delimiters and line breaks inside are data); lines end in LF or CRLF; lines with
 * nothing on them are skipped. Only the selected columns are converted, each to a float (strtod:
 * decimal, exponent, inf, nan) or, for an integer label, to an integer (strtoll, range-checked).
 * Rows are appended to buffers that double, and the buffers become the tensors' memory.
 *
 * Positions in messages: lines count physical lines from 1 (a quoted field spanning lines moves
 * the count on), columns count fields from 1 and come with the header's name for them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

tfs_csv_opts tfs_csv_opts_default(void)
{
    tfs_csv_opts o = {',', NULL, 0, NULL, TFS_DTYPE_FLOAT};
    return o;
}

/* One field of the current record: its unquoted text lives in the record's scratch buffer. */
typedef struct field {
    size_t off;   /* into rec.text */
    size_t len;
} field;

typedef struct csv {
    const char *path;
    const char *p, *end;
    char        delim;
    size_t      line;       /* of the character at p */
    size_t      rec_line;   /* where the current record starts */
    /* the current record */
    field      *f;
    int         nf, capf;
    tfs__buf    text;       /* unquoted field texts, each NUL-terminated */
    tfs_status *st;
} csv;

static enum tfs_code oom(csv *c)
{
    return TFS_ERR(c->st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", c->path);
}

static bool put(csv *c, const char *s, size_t n)
{
    tfs__buf_append(&c->text, s, n);
    return !c->text.oom;
}

/* Reads one record into c->f. Returns OUT_OF_RANGE at the end of the file. */
static enum tfs_code read_record(csv *c)
{
    c->nf = 0;
    c->text.len = 0;
    /* Blank lines are skipped. */
    while (c->p < c->end && (*c->p == '\n' || (*c->p == '\r' && c->p + 1 < c->end &&
                                               c->p[1] == '\n'))) {
        c->p += *c->p == '\r' ? 2 : 1;
        c->line++;
    }
    if (c->p == c->end)
        return TFS_OUT_OF_RANGE;
    c->rec_line = c->line;
    for (;;) {
        if (c->nf == c->capf) {
            int    cap = c->capf ? c->capf * 2 : 16;
            field *f = tfs_realloc(c->f, (size_t)cap * sizeof *f);
            if (!f)
                return oom(c);
            c->f = f;
            c->capf = cap;
        }
        field *f = &c->f[c->nf++];
        f->off = c->text.len;
        if (c->p < c->end && *c->p == '"') {
            size_t qline = c->line;
            c->p++;
            for (;;) {
                const char *q = memchr(c->p, '"', (size_t)(c->end - c->p));
                if (!q)
                    return TFS_ERR(c->st, TFS_DATA_LOSS,
                                   "%s:%zu: column %d: quoted field never closed", c->path, qline,
                                   c->nf);
                for (const char *s = c->p; s < q; s++)
                    c->line += *s == '\n';
                if (!put(c, c->p, (size_t)(q - c->p)))
                    return oom(c);
                c->p = q + 1;
                if (c->p < c->end && *c->p == '"') {   /* "" is one quote */
                    if (!put(c, "\"", 1))
                        return oom(c);
                    c->p++;
                    continue;
                }
                break;
            }
        } else {
            const char *s = c->p;
            while (c->p < c->end && *c->p != c->delim && *c->p != '\n')
                c->p++;
            size_t n = (size_t)(c->p - s);
            if (c->p < c->end && *c->p == '\n' && n > 0 && s[n - 1] == '\r')
                n--;
            if (!put(c, s, n))
                return oom(c);
        }
        f->len = c->text.len - f->off;
        if (!put(c, "", 1))   /* a NUL after each field's bytes, for strtod */
            return oom(c);
        if (c->p == c->end)
            return TFS_OK;
        if (*c->p == c->delim) {
            c->p++;
            continue;
        }
        if (*c->p == '\n' || (*c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n')) {
            c->p += *c->p == '\r' ? 2 : 1;
            c->line++;
            return TFS_OK;
        }
        return TFS_ERR(c->st, TFS_DATA_LOSS, "%s:%zu: column %d: characters after a closing quote",
                       c->path, c->line, c->nf);
    }
}

/* The field's text without surrounding blanks, NUL-terminated in place. */
static char *trimmed(csv *c, int i)
{
    char  *s = c->text.data + c->f[i].off;
    size_t n = c->f[i].len;
    while (n && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    s[n] = 0;
    return s;
}

static enum tfs_code bad_value(csv *c, int col, const char *name, const char *text,
                               const char *why)
{
    return TFS_ERR(c->st, TFS_DATA_LOSS, "%s:%zu: column %d ('%s'): %s%.40s%s%s", c->path,
                   c->rec_line, col + 1, name, *text ? "'" : "", text, *text ? "' " : "", why);
}

static enum tfs_code parse_float(csv *c, int col, const char *name, float *out)
{
    char *s = trimmed(c, col), *e;
    if (!*s)
        return bad_value(c, col, name, s, "empty value");
    errno = 0;
    double d = strtod(s, &e);
    if (*e)
        return bad_value(c, col, name, s, "is not a number");
    if (isfinite(d) && (fabs(d) > 3.4028234663852886e38))
        return bad_value(c, col, name, s, "is out of range for float32");
    *out = (float)d;
    return TFS_OK;
}

static enum tfs_code parse_int(csv *c, int col, const char *name, enum tfs_dtype dt, int64_t *out)
{
    char *s = trimmed(c, col), *e;
    if (!*s)
        return bad_value(c, col, name, s, "empty value");
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (*e)
        return bad_value(c, col, name, s, "is not an integer");
    if (errno == ERANGE || (dt == TFS_DTYPE_INT32 && (v < INT32_MIN || v > INT32_MAX)))
        return bad_value(c, col, name, s,
                         dt == TFS_DTYPE_INT32 ? "is out of range for int32"
                                               : "is out of range for int64");
    *out = v;
    return TFS_OK;
}

/* Grows *buf to hold `rows` rows of `row_bytes`. */
static bool grow(void **buf, size_t *cap_rows, size_t rows, size_t row_bytes)
{
    if (rows <= *cap_rows)
        return true;
    size_t cap = *cap_rows ? *cap_rows * 2 : 1024;
    if (row_bytes && cap > TFS_TENSOR_MAX_BYTES / row_bytes)
        return false;
    void *p = tfs_realloc(*buf, cap * row_bytes + 1);
    if (!p)
        return false;
    *buf = p;
    *cap_rows = cap;
    return true;
}

/* Finds `name` among the header's fields; INVALID_ARGUMENT if absent or there twice. */
static enum tfs_code find_column(csv *c, char **header, int nh, const char *name, int *out)
{
    *out = -1;
    for (int i = 0; i < nh; i++) {
        if (strcmp(header[i], name) != 0)
            continue;
        if (*out >= 0)
            return TFS_ERR(c->st, TFS_INVALID_ARGUMENT,
                           "%s: column '%s' appears twice in the header (columns %d and %d)",
                           c->path, name, *out + 1, i + 1);
        *out = i;
    }
    if (*out < 0)
        return TFS_ERR(c->st, TFS_INVALID_ARGUMENT, "%s: no column '%s' in the header", c->path,
                       name);
    return TFS_OK;
}

enum tfs_code tfs_csv_read(const char *path, const tfs_csv_opts *opts_, tfs_tensor **features,
                           tfs_tensor **labels, tfs_status *st)
{
    tfs_csv_opts  opts = opts_ ? *opts_ : tfs_csv_opts_default();
    char         *file = NULL, **header = NULL;
    int          *sel = NULL, nh = 0, nsel = 0, label_col = -1;
    void         *fbuf = NULL, *lbuf = NULL;
    size_t        len, rows = 0, fcap = 0, lcap = 0;
    enum tfs_code code;
    csv           c = {0};
    *features = NULL;
    if (labels)
        *labels = NULL;
    enum tfs_dtype ldt = opts.label_dtype;
    if (ldt != TFS_DTYPE_FLOAT && ldt != TFS_DTYPE_INT32 && ldt != TFS_DTYPE_INT64)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: label dtype must be float, int32 or int64, "
                       "not %s", path, tfs_dtype_short_name(ldt));
    if (opts.n_features < 0 || (opts.n_features > 0 && !opts.features))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: %d feature columns named", path,
                       opts.n_features);
    if (opts.label && !labels)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: a label column needs somewhere to go", path);
    if ((code = tfs_data_file_read(path, (void **)&file, &len, st)) != TFS_OK)
        return code;
    c.path = path;
    c.p = file;
    c.end = file + len;
    c.delim = opts.delimiter ? opts.delimiter : ',';
    c.line = 1;
    c.st = st;

    if ((code = read_record(&c)) != TFS_OK) {
        if (code == TFS_OUT_OF_RANGE)
            code = TFS_ERR(st, TFS_DATA_LOSS, "%s: no header row (the file is empty)", path);
        goto fail;
    }
    nh = c.nf;
    if (!(header = tfs_calloc((size_t)nh, sizeof *header)))
        goto oom;
    for (int i = 0; i < nh; i++)
        if (!(header[i] = tfs_strdup(trimmed(&c, i))))
            goto oom;
    if (opts.label && (code = find_column(&c, header, nh, opts.label, &label_col)) != TFS_OK)
        goto fail;
    nsel = opts.features ? opts.n_features : nh - (label_col >= 0);
    if (!(sel = tfs_calloc((size_t)(nsel ? nsel : 1), sizeof *sel)))
        goto oom;
    if (opts.features) {
        for (int i = 0; i < nsel; i++)
            if ((code = find_column(&c, header, nh, opts.features[i], &sel[i])) != TFS_OK)
                goto fail;
    } else {
        for (int i = 0, k = 0; i < nh; i++)
            if (i != label_col)
                sel[k++] = i;
    }

    size_t lsize = tfs_dtype_size(ldt), frow = (size_t)nsel * sizeof(float);
    while ((code = read_record(&c)) == TFS_OK) {
        if (c.nf != nh) {
            code = TFS_ERR(st, TFS_DATA_LOSS, "%s:%zu: %d fields, the header has %d", path,
                           c.rec_line, c.nf, nh);
            goto fail;
        }
        if (!grow(&fbuf, &fcap, rows + 1, frow) ||
            (label_col >= 0 && !grow(&lbuf, &lcap, rows + 1, lsize)))
            goto oom;
        float *row = (float *)fbuf + rows * (size_t)nsel;
        for (int i = 0; i < nsel; i++)
            if ((code = parse_float(&c, sel[i], header[sel[i]], &row[i])) != TFS_OK)
                goto fail;
        if (label_col >= 0) {
            if (ldt == TFS_DTYPE_FLOAT) {
                code = parse_float(&c, label_col, header[label_col], (float *)lbuf + rows);
            } else {
                int64_t v = 0;
                code = parse_int(&c, label_col, header[label_col], ldt, &v);
                if (ldt == TFS_DTYPE_INT32)
                    ((int32_t *)lbuf)[rows] = (int32_t)v;
                else
                    ((int64_t *)lbuf)[rows] = v;
            }
            if (code != TFS_OK)
                goto fail;
        }
        rows++;
    }
    if (code != TFS_OUT_OF_RANGE)
        goto fail;
    int64_t fdims[2] = {(int64_t)rows, nsel}, ldims[1] = {(int64_t)rows};
    if (!fbuf && !(fbuf = tfs_malloc(1)))
        goto oom;
    if ((code = tfs_tensor_wrap(TFS_DTYPE_FLOAT, 2, fdims, fbuf, tfs__free_data, NULL, features,
                                st)) != TFS_OK)
        goto fail;
    fbuf = NULL;
    if (label_col >= 0) {
        if (!lbuf && !(lbuf = tfs_malloc(1)))
            goto oom;
        if ((code = tfs_tensor_wrap(ldt, 1, ldims, lbuf, tfs__free_data, NULL, labels, st)) !=
            TFS_OK)
            goto fail;
        lbuf = NULL;
    }
    code = TFS_OK;
    tfs_status_clear(st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory (%zu rows read)", path, rows);
fail:
    tfs_tensor_unref(*features);
    *features = NULL;
done:
    for (int i = 0; header && i < nh; i++)
        tfs_free(header[i]);
    tfs_free(header);
    tfs_free(sel);
    tfs_free(fbuf);
    tfs_free(lbuf);
    tfs_free(c.f);
    tfs__buf_deinit(&c.text);
    tfs_free(file);
    return code;
}
