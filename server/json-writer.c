/* The output side of the REST API: a growable buffer and a small JSON writer.
 *
 * We do not print responses with jansson because its number text differs from TF Serving's (0.1f
 * comes out as 0.10000000149011612). The writer reproduces rapidjson's PrettyWriter layout, which
 * is what TF Serving sends, including its single-line-array mode: inside a prediction row array
 * elements are separated by ", " with no newline, so {"predictions": [2.5, 3.0, 4.5\n    ]} is
 * byte-for-byte what tensorflow_model_server answers. Clients parse JSON and do not depend on the
 * whitespace, but matching it costs nothing and keeps diffs against TF Serving empty.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

/* ---- buffer --------------------------------------------------------------------------------- */

void tfs__buf_init(tfs__buf *b)
{
    memset(b, 0, sizeof *b);
}

void tfs__buf_deinit(tfs__buf *b)
{
    if (!b)
        return;
    tfs_free(b->data);
    memset(b, 0, sizeof *b);
}

static bool buf_reserve(tfs__buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    size_t need = b->len + extra + 1;   /* + NUL */
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = tfs_realloc(b->data, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void tfs__buf_append(tfs__buf *b, const void *p, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void tfs__buf_puts(tfs__buf *b, const char *s)
{
    tfs__buf_append(b, s, strlen(s));
}

void tfs__buf_putc(tfs__buf *b, char c)
{
    tfs__buf_append(b, &c, 1);
}

void tfs__buf_printf(tfs__buf *b, const char *fmt, ...)
{
    char    small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        tfs__buf_append(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* ---- numbers -------------------------------------------------------------------------------- */

static size_t finish_decimal(char *buf, size_t n)
{
    /* ".0" keeps whole numbers recognisable as decimals to clients that infer types from tokens. */
    if (!strchr(buf, '.') && !strchr(buf, 'e')) {
        memcpy(buf + n, ".0", 3);
        n += 2;
    }
    return n;
}

static size_t nonfinite(double v, char *buf)
{
    const char *s = isnan(v) ? "NaN" : (signbit(v) ? "-Infinity" : "Infinity");
    size_t      n = strlen(s);
    memcpy(buf, s, n + 1);
    return n;
}

size_t tfs__format_float(float v, char *buf)
{
    if (!isfinite(v))
        return nonfinite(v, buf);
    int n = snprintf(buf, 32, "%g", (double)v);
    if (strtof(buf, NULL) != v)
        n = snprintf(buf, 32, "%.9g", (double)v);
    return finish_decimal(buf, (size_t)n);
}

size_t tfs__format_double(double v, char *buf)
{
    if (!isfinite(v))
        return nonfinite(v, buf);
    int n = snprintf(buf, 32, "%g", v);
    if (strtod(buf, NULL) != v)
        n = snprintf(buf, 32, "%.17g", v);
    return finish_decimal(buf, (size_t)n);
}

/* ---- strings -------------------------------------------------------------------------------- */

void tfs__json_escape(tfs__buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t            run = 0;   /* start of the pending unescaped run */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        tfs__buf_append(b, s + run, i - run);
        run = i + 1;
        char esc[7] = {'\\', 0};
        switch (c) {
        case '"':  esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            break;
        }
        tfs__buf_puts(b, esc);
    }
    tfs__buf_append(b, s + run, n - run);
}

/* ---- writer --------------------------------------------------------------------------------- */

void tfs__jw_init(tfs__jw *w, tfs__buf *out, int indent)
{
    memset(w, 0, sizeof *w);
    w->out = out;
    w->indent = indent;
    w->levels = w->inline_levels;
    w->cap = (int)(sizeof w->inline_levels / sizeof w->inline_levels[0]);
}

void tfs__jw_deinit(tfs__jw *w)
{
    if (w && w->levels != w->inline_levels)
        tfs_free(w->levels);
}

static void write_indent(tfs__jw *w)
{
    for (int i = 0; i < w->depth * w->indent; i++)
        tfs__buf_putc(w->out, ' ');
}

/* The separator before a value, exactly as rapidjson's PrettyWriter::PrettyPrefix. */
static void prefix(tfs__jw *w)
{
    if (w->depth == 0)
        return;
    tfs__jw_level *l = &w->levels[w->depth - 1];
    if (l->in_array) {
        if (l->count > 0) {
            tfs__buf_putc(w->out, ',');
            if (w->single_line)
                tfs__buf_putc(w->out, ' ');
        }
        if (!w->single_line) {
            tfs__buf_putc(w->out, '\n');
            write_indent(w);
        }
    } else {
        if (l->count > 0) {
            tfs__buf_puts(w->out, l->count % 2 == 0 ? ",\n" : ": ");
        } else {
            tfs__buf_putc(w->out, '\n');
        }
        if (l->count % 2 == 0)
            write_indent(w);
    }
    l->count++;
}

static void push(tfs__jw *w, bool in_array)
{
    if (w->depth == w->cap) {
        int            cap = w->cap * 2;
        tfs__jw_level *p = tfs_malloc((size_t)cap * sizeof *p);
        if (!p) {
            w->out->oom = true;
            return;
        }
        memcpy(p, w->levels, (size_t)w->depth * sizeof *p);
        if (w->levels != w->inline_levels)
            tfs_free(w->levels);
        w->levels = p;
        w->cap = cap;
    }
    w->levels[w->depth].in_array = in_array;
    w->levels[w->depth].count = 0;
    w->depth++;
}

static void pop(tfs__jw *w, char close)
{
    if (w->depth == 0 || w->out->oom)
        return;
    bool empty = w->levels[--w->depth].count == 0;
    bool in_array = close == ']';
    /* Objects always close on their own line; arrays only outside single-line mode. */
    if (!empty && !(in_array && w->single_line)) {
        tfs__buf_putc(w->out, '\n');
        write_indent(w);
    }
    tfs__buf_putc(w->out, close);
}

void tfs__jw_begin_object(tfs__jw *w)
{
    prefix(w);
    tfs__buf_putc(w->out, '{');
    push(w, false);
}

void tfs__jw_end_object(tfs__jw *w)
{
    pop(w, '}');
}

void tfs__jw_begin_array(tfs__jw *w)
{
    prefix(w);
    tfs__buf_putc(w->out, '[');
    push(w, true);
}

void tfs__jw_end_array(tfs__jw *w)
{
    pop(w, ']');
}

void tfs__jw_string(tfs__jw *w, const char *s, size_t n)
{
    prefix(w);
    tfs__buf_putc(w->out, '"');
    tfs__json_escape(w->out, s, n);
    tfs__buf_putc(w->out, '"');
}

void tfs__jw_cstring(tfs__jw *w, const char *s)
{
    tfs__jw_string(w, s, strlen(s));
}

void tfs__jw_key(tfs__jw *w, const char *key)
{
    tfs__jw_cstring(w, key);
}

void tfs__jw_raw(tfs__jw *w, const char *text)
{
    prefix(w);
    tfs__buf_puts(w->out, text);
}

void tfs__jw_int(tfs__jw *w, int64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)v);
    tfs__jw_raw(w, t);
}

void tfs__jw_uint(tfs__jw *w, uint64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    tfs__jw_raw(w, t);
}

void tfs__jw_bool(tfs__jw *w, bool v)
{
    tfs__jw_raw(w, v ? "true" : "false");
}

void tfs__jw_null(tfs__jw *w)
{
    tfs__jw_raw(w, "null");
}

void tfs__jw_float(tfs__jw *w, float v)
{
    char t[32];
    tfs__format_float(v, t);
    tfs__jw_raw(w, t);
}

void tfs__jw_double(tfs__jw *w, double v)
{
    char t[32];
    tfs__format_double(v, t);
    tfs__jw_raw(w, t);
}

/* A request value as TF Serving quotes it in messages: decimals within float range print as
 * floats (rapidjson's IsFloat is a range test), others as doubles; integers as integers. */
void tfs__jw_json(tfs__jw *w, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t     *x;
        tfs__jw_begin_object(w);
        json_object_foreach((json_t *)v, k, x) {
            if (w->out->oom || (w->stop_at && w->out->len > w->stop_at))
                break;
            tfs__jw_key(w, k);
            tfs__jw_json(w, x);
        }
        tfs__jw_end_object(w);
        break;
    }
    case JSON_ARRAY: {
        size_t  i;
        json_t *x;
        tfs__jw_begin_array(w);
        json_array_foreach(v, i, x) {
            if (w->out->oom || (w->stop_at && w->out->len > w->stop_at))
                break;
            tfs__jw_json(w, x);
        }
        tfs__jw_end_array(w);
        break;
    }
    case JSON_STRING:
        tfs__jw_string(w, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        tfs__jw_int(w, (int64_t)json_integer_value(v));
        break;
    case JSON_REAL: {
        double d = json_real_value(v);
        if (d >= -3.4028234e38 && d <= 3.4028234e38)
            tfs__jw_float(w, (float)d);
        else
            tfs__jw_double(w, d);
        break;
    }
    case JSON_TRUE:
        tfs__jw_bool(w, true);
        break;
    case JSON_FALSE:
        tfs__jw_bool(w, false);
        break;
    case JSON_NULL:
        tfs__jw_null(w);
        break;
    }
}

void tfs__json_value_text(const json_t *v, tfs__buf *out, size_t max)
{
    tfs__buf tmp;
    tfs__buf_init(&tmp);
    tfs__jw w;
    tfs__jw_init(&w, &tmp, 4);
    w.stop_at = max;   /* a quoted 64 MiB request is cut anyway: do not print all of it */
    tfs__jw_json(&w, v);
    tfs__jw_deinit(&w);
    if (tmp.oom) {
        tfs__buf_puts(out, "<out of memory>");
    } else if (tmp.len > max) {
        tfs__buf_append(out, tmp.data, max);
        tfs__buf_puts(out, "...");
    } else {
        tfs__buf_append(out, tmp.data, tmp.len);
    }
    tfs__buf_deinit(&tmp);
}

void tfs__json_error(tfs__buf *out, const char *msg)
{
    tfs__jw w;
    tfs__jw_init(&w, out, 4);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "error");
    tfs__jw_cstring(&w, msg);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
}
