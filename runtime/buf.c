/* The growable byte buffer and varints (buf.h). */
#include "runtime/buf.h"

#include <stdarg.h>
#include <stdio.h>

#include "runtime/alloc.h"

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

bool tfs__buf_reserve(tfs__buf *b, size_t extra)
{
    if (b->oom)
        return false;
    /* Bounded so that need and the doubling below cannot wrap. */
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

void tfs__buf_append_slow(tfs__buf *b, const void *p, size_t n)
{
    if (!tfs__buf_reserve(b, n))
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

void tfs__buf_printf(tfs__buf *b, const char *fmt, ...)
{
    char    small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        /* Only an encoding error or a count past INT_MAX: the text cannot be had. */
        b->oom = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        tfs__buf_append(b, small, (size_t)n);
        return;
    }
    if (!tfs__buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void tfs__buf_varint(tfs__buf *b, uint64_t v)
{
    uint8_t tmp[TFS_VARINT_MAX_BYTES];
    tfs__buf_append(b, tmp, tfs_varint_put(tmp, v));
}

char *tfs__buf_take(tfs__buf *b, size_t *len)
{
    char *p = NULL;
    if (!b->oom && tfs__buf_reserve(b, 0)) {
        p = b->data;
        p[b->len] = 0;
        if (len)
            *len = b->len;
        b->data = NULL;
    }
    tfs__buf_deinit(b);
    return p;
}

/* ---- varints -------------------------------------------------------------------------------- */

bool tfs_varint_get(const uint8_t **p, const uint8_t *end, int max_bytes, uint64_t *v)
{
    const uint8_t *q = *p;
    uint64_t       x = 0;
    for (int i = 0; i < max_bytes && q < end; i++) {
        uint8_t byte = *q++;
        if (i < 10)   /* 7 * 9 = 63: the tenth byte gives bit 63; later ones only dropped bits */
            x |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *p = q;
            *v = x;
            return true;
        }
    }
    return false;
}

size_t tfs_varint_put(uint8_t *dst, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}
