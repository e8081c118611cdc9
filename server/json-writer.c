/* The output side of the REST API: a small JSON writer.
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

static const double pow10_tab[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* a * 10^k in one correctly rounded operation, |k| <= 22 (the powers are exact). */
static double scale10(double a, int k)
{
    return k >= 0 ? a * pow10_tab[k] : a / pow10_tab[-k];
}

/* The prec significant digits that printf's %.{prec}g gives for a > 0, as an integer r in
 * [10^(prec-1), 10^prec) and the decimal exponent e of its first digit, when one double operation
 * decides them: false for exponents outside the exact powers of ten and for values within 1e-6 of
 * a rounding tie (the product's error is below 1e-7 for prec <= 9), which take printf instead. */
static bool g_digits(double a, int prec, uint64_t *r, int *e)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int    x = (int)(bits >> 52 & 0x7FF) - 1022;   /* frexp's exponent (a is normal) */
    /* floor(log10(a)), maybe 1 low: floor((x - 1) * log10(2)) in fixed point (78913 / 2^18);
     * a high estimate cannot pass the n < lo test below, so it only costs the printf path */
    int    t = (x - 1) * 78913;
    int    k10 = t >= 0 ? t >> 18 : -((-t + 262143) >> 18);
    double lo = pow10_tab[prec - 1], hi = pow10_tab[prec];
    for (int tries = 0; tries < 2; tries++) {
        int k = prec - 1 - k10;
        if (k < -22 || k > 22)
            return false;
        double s = scale10(a, k);
        if (s >= hi - 0.5) {
            k10++;
            continue;
        }
        double f = (double)(uint64_t)s, frac = s - f;   /* 0 < s < 1e9: the cast floors */
        if (frac > 0.5 - 1e-6 && frac < 0.5 + 1e-6)
            return false;
        double n = frac > 0.5 ? f + 1 : f;
        if (n < lo)
            return false;   /* not reached: the estimate is never high */
        if (n >= hi) {      /* 99999.7 -> 100000 */
            n = lo;
            k10++;
        }
        *r = (uint64_t)n;
        *e = k10;
        return true;
    }
    return false;
}

/* %g's text for digits r (exactly prec of them) with first-digit exponent e. */
static size_t g_text(uint64_t r, int e, int prec, bool neg, char *buf)
{
    char   dig[20];
    size_t o = 0;
    for (int i = prec - 1; i >= 0; i--) {
        dig[i] = (char)('0' + r % 10);
        r /= 10;
    }
    int nd = prec;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    if (neg)
        buf[o++] = '-';
    if (e < -4 || e >= prec) {
        buf[o++] = dig[0];
        if (nd > 1) {
            buf[o++] = '.';
            memcpy(buf + o, dig + 1, (size_t)nd - 1);
            o += (size_t)nd - 1;
        }
        int ae = e < 0 ? -e : e;
        buf[o++] = 'e';
        buf[o++] = e < 0 ? '-' : '+';
        if (ae >= 100) {
            buf[o++] = (char)('0' + ae / 100);
            ae %= 100;
        }
        buf[o++] = (char)('0' + ae / 10);
        buf[o++] = (char)('0' + ae % 10);
    } else if (e >= 0) {
        memcpy(buf + o, dig, (size_t)e + 1);
        o += (size_t)e + 1;
        if (nd > e + 1) {
            buf[o++] = '.';
            memcpy(buf + o, dig + e + 1, (size_t)(nd - e - 1));
            o += (size_t)(nd - e - 1);
        }
    } else {
        buf[o++] = '0';
        buf[o++] = '.';
        for (int i = 0; i < -e - 1; i++)
            buf[o++] = '0';
        memcpy(buf + o, dig, (size_t)nd);
        o += (size_t)nd;
    }
    buf[o] = 0;
    return o;
}

/* Whether the 6-digit text r * 10^(e-5) reads back (strtof) as v > 0: y, the text's value rounded to
 * double, rounds to the same float as the text itself unless y lies exactly halfway between two
 * floats. 1 yes, 0 no, -1 undecided. */
static int float_round_trips(float v, uint64_t r, int e)
{
    if (e - 5 < -22 || e - 5 > 22)
        return -1;
    double y = scale10((double)r, e - 5);
    float  f = (float)y;
    if ((double)f != y) {
        float g = nextafterf(f, y > (double)f ? INFINITY : -INFINITY);
        if (((double)f + (double)g) / 2 == y)
            return -1;
    }
    return f == v;
}

/* A finite float's text without printf for the common case; printf decides the rest. */
static size_t format_float_fast(float v, char *buf)
{
    double   a = fabs((double)v);
    uint64_t r;
    int      e;
    if (a == 0) {
        memcpy(buf, signbit(v) ? "-0" : "0", signbit(v) ? 3 : 2);
        return signbit(v) ? 2 : 1;
    }
    if (a >= 1e-30 && a < 1e30 && g_digits(a, 6, &r, &e)) {
        int rt = float_round_trips((float)a, r, e);
        if (rt == 1)
            return g_text(r, e, 6, v < 0, buf);
        if (rt == 0 && g_digits(a, 9, &r, &e))
            return g_text(r, e, 9, v < 0, buf);
    }
    int n = snprintf(buf, 32, "%g", (double)v);
    if (strtof(buf, NULL) != v)
        n = snprintf(buf, 32, "%.9g", (double)v);
    return (size_t)n;
}

size_t tfs__format_float(float v, char *buf)
{
    if (!isfinite(v))
        return nonfinite(v, buf);
    return finish_decimal(buf, format_float_fast(v, buf));
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
    char   t[32];
    size_t n = tfs__format_float(v, t);
    prefix(w);
    tfs__buf_append(w->out, t, n);
}

void tfs__jw_double(tfs__jw *w, double v)
{
    char t[32];
    tfs__format_double(v, t);
    tfs__jw_raw(w, t);
}

/* A number as TF Serving quotes it (JsonValueToString): integers as integers; decimals within
 * float range as floats (rapidjson's IsFloat is a range test), others as doubles. */
static void jw_number(tfs__jw *w, const tfs__jv *v)
{
    if (v->num == TFS__JNUM_INT)
        tfs__jw_int(w, v->i);
    else if (v->num == TFS__JNUM_UINT)
        tfs__jw_uint(w, v->u);
    else if (v->d >= -3.4028234e38 && v->d <= 3.4028234e38)
        tfs__jw_float(w, (float)v->d);
    else
        tfs__jw_double(w, v->d);
}

/* Without recursion, so that a value nested a million deep cannot exhaust the stack: an explicit
 * stack of (container, next child) pairs. */
typedef struct jw_pos {
    tfs__jv  v;   /* a copy: a packed array's elements have no node to point to */
    uint32_t next;
} jw_pos;

void tfs__jw_json(tfs__jw *w, const tfs__jv *root)
{
    tfs__jv cur = *root;
    const tfs__jv *v = &cur;
    jw_pos  inline_stack[16];
    jw_pos *stack = inline_stack;
    size_t  depth = 0, cap = sizeof inline_stack / sizeof inline_stack[0];

    for (;;) {
        /* Write v: a scalar completely, a container's opening. */
        switch (v->type) {
        case TFS__J_OBJECT:
        case TFS__J_ARRAY:
            if (depth == cap) {
                jw_pos *p = tfs_malloc(2 * cap * sizeof *p);
                if (!p) {
                    w->out->oom = true;
                    goto done;
                }
                memcpy(p, stack, depth * sizeof *p);
                if (stack != inline_stack)
                    tfs_free(stack);
                stack = p;
                cap *= 2;
            }
            if (v->type == TFS__J_OBJECT)
                tfs__jw_begin_object(w);
            else
                tfs__jw_begin_array(w);
            stack[depth++] = (jw_pos){*v, 0};
            break;
        case TFS__J_STRING:
            tfs__jw_string(w, v->s, v->n);
            break;
        case TFS__J_NUMBER:
            jw_number(w, v);
            break;
        case TFS__J_TRUE:
            tfs__jw_bool(w, true);
            break;
        case TFS__J_FALSE:
            tfs__jw_bool(w, false);
            break;
        default:
            tfs__jw_null(w);
            break;
        }
        /* The next value: the next child of the innermost open container, closing the
         * finished ones (all of them once the output is past stop_at). */
        for (;;) {
            if (depth == 0)
                goto done;
            jw_pos *top = &stack[depth - 1];
            bool    stop = w->out->oom || (w->stop_at && w->out->len > w->stop_at);
            if (!stop && top->next < top->v.n) {
                uint32_t i = top->next++;
                if (top->v.type == TFS__J_OBJECT) {
                    const tfs__jv *k = tfs__jv_key(&top->v, i);
                    tfs__jw_string(w, k->s, k->n);
                    cur = *tfs__jv_val(&top->v, i);
                } else {
                    cur = tfs__jv_at(&top->v, i);
                }
                break;
            }
            if (top->v.type == TFS__J_OBJECT)
                tfs__jw_end_object(w);
            else
                tfs__jw_end_array(w);
            depth--;
        }
    }
done:
    if (stack != inline_stack)
        tfs_free(stack);
}

/* The length of the longest prefix of s[0..n) that does not end inside a UTF-8 sequence. Bytes
 * that are not UTF-8 at all are left to tfs__json_error's clean-up. */
static size_t utf8_cut(const char *s, size_t n)
{
    size_t i = n;
    /* Back over at most 3 continuation bytes to the lead byte of the last sequence. */
    while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == 0)
        return n;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t        want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return want > 1 && n - (i - 1) < want ? i - 1 : n;
}

void tfs__json_value_text(const tfs__jv *v, tfs__buf *out, size_t max)
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
        tfs__buf_append(out, tmp.data, utf8_cut(tmp.data, max));
        tfs__buf_puts(out, "...");
    } else {
        tfs__buf_append(out, tmp.data, tmp.len);
    }
    tfs__buf_deinit(&tmp);
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 when it is not one (overlong forms,
 * surrogates and code points past U+10FFFF are not valid). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t   len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || n < len)
        return 0;
    uint32_t cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* msg as valid UTF-8: every byte that does not start a valid sequence becomes U+FFFD, except an
 * incomplete sequence at the very end (a message cut to its size limit), which is dropped. */
static void utf8_clean(tfs__buf *b, const char *msg, size_t n)
{
    const unsigned char *s = (const unsigned char *)msg;
    size_t               i = 0, run = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = utf8_seq(s + i, n - i);
        if (len) {
            i += len;
            continue;
        }
        tfs__buf_append(b, msg + run, i - run);
        if (utf8_cut(msg, n) <= i && n - i < 4)
            return;   /* the cut-off tail */
        tfs__buf_append(b, "\xEF\xBF\xBD", 3);
        run = ++i;
    }
    tfs__buf_append(b, msg + run, n - run);
}

void tfs__json_error(tfs__buf *out, const char *msg)
{
    /* Messages quote request bytes, which need not be UTF-8, and may have been cut to the status
     * size limit mid-character: the body stays valid JSON (RFC 8259 text is UTF-8). */
    tfs__buf clean;
    tfs__buf_init(&clean);
    utf8_clean(&clean, msg, strlen(msg));
    tfs__jw w;
    tfs__jw_init(&w, out, 4);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "error");
    if (clean.oom)
        tfs__jw_cstring(&w, "out of memory writing an error message");
    else
        tfs__jw_string(&w, clean.data ? clean.data : "", clean.len);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
    tfs__buf_deinit(&clean);
}
