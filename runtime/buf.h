/* The growable byte buffer every module appends to (responses, JSON, SVG, text protos, table
 * blocks), and protobuf's base-128 varints, read and written in one place.
 *
 *     tfs__buf b = {0};
 *     tfs__buf_puts(&b, "{\"epochs\": ");
 *     tfs__buf_printf(&b, "%d}", n);
 *     tfs__buf_varint(&b, 300);             // 0xac 0x02
 *     if (b.oom) { tfs__buf_deinit(&b); return RESOURCE_EXHAUSTED; }
 *     size_t len;
 *     char  *bytes = tfs__buf_take(&b, &len);   // caller owns; b is empty again
 *
 * Conventions: memory comes from tfs_realloc; running out of it (or a size past SIZE_MAX / 2) is
 * sticky in b->oom, so writers append without checking each call and test once at the end: the
 * bytes are incomplete then, to be thrown away (tfs__buf_take does). Not thread-safe: one writer
 * at a time.
 * The double-underscore name is the one the server's hundreds of call sites have always used.
 */
#ifndef TFS_RUNTIME_BUF_H
#define TFS_RUNTIME_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- growable byte buffer ------------------------------------------------------------------- */

/* data is NUL-terminated when non-NULL (the NUL is not counted in len), so text can be used as a
 * C string. Zero-initialise (or tfs__buf_init) before use. */
typedef struct tfs__buf {
    char  *data;
    size_t len;
    size_t cap;
    bool   oom;
} tfs__buf;

void tfs__buf_init(tfs__buf *b);
void tfs__buf_deinit(tfs__buf *b);   /* frees data and empties b; NULL-safe */
/* Makes room for `extra` more bytes (and the NUL) so that appending them cannot fail. false, and
 * b->oom set, when that memory cannot be had; false at once when b->oom is set. */
bool tfs__buf_reserve(tfs__buf *b, size_t extra);
void tfs__buf_append_slow(tfs__buf *b, const void *p, size_t n);   /* grows, or marks oom */
/* Appends n bytes; inline while they fit (a response is mostly single bytes and short runs). */
static inline void tfs__buf_append(tfs__buf *b, const void *p, size_t n)
{
    /* n == 0 takes the slow path: p may be NULL then, which memcpy must not see */
    if (n && b->cap - b->len > n && b->data) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = 0;
    } else {
        tfs__buf_append_slow(b, p, n);
    }
}
static inline void tfs__buf_putc(tfs__buf *b, char c)
{
    tfs__buf_append(b, &c, 1);
}
void tfs__buf_puts(tfs__buf *b, const char *s);
void tfs__buf_printf(tfs__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends v as a protobuf base-128 varint (1 to 10 bytes). */
void tfs__buf_varint(tfs__buf *b, uint64_t v);
/* The bytes, NUL-terminated, and their count in *len (NULL allowed): caller owns (tfs_free).
 * Always an allocation on success, also when nothing was appended. NULL when b->oom is set: the
 * bytes are freed then. b is empty and usable again afterwards either way. */
char *tfs__buf_take(tfs__buf *b, size_t *len);

/* ---- varints -------------------------------------------------------------------------------- */

/* The most bytes a varint of a 64-bit value takes, and of a 32-bit one. */
#define TFS_VARINT_MAX_BYTES   10
#define TFS_VARINT32_MAX_BYTES 5

/* Reads a base-128 varint of at most max_bytes bytes (TFS_VARINT_MAX_BYTES for a 64-bit field,
 * TFS_VARINT32_MAX_BYTES where the format allows 32 bits) from [*p, end) and advances *p past it.
 * Bits past the 64th are dropped, as protobuf and LevelDB do; a 5-byte read may carry up to 35
 * bits, which callers that need 32 check. false, with *p and *v untouched, when the input ends
 * inside the varint or its max_bytes-th byte still says more follow. */
bool tfs_varint_get(const uint8_t **p, const uint8_t *end, int max_bytes, uint64_t *v);
/* Writes v as a varint to dst, which has room for TFS_VARINT_MAX_BYTES; returns the bytes
 * written (1 to 10). */
size_t tfs_varint_put(uint8_t *dst, uint64_t v);

#endif
