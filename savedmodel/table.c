/* The LevelDB-format table (SSTable) that TensorBundle uses for its .index file: a parser that
 * reads a whole table from memory into a sorted array of key/value pairs, and a builder that
 * writes one. Index files hold one small entry per tensor, so reading everything up front is
 * cheaper and simpler than LevelDB's iterators.
 *
 * FORMAT (LevelDB table/format.cc, block.cc, block_builder.cc; TensorFlow lib/io/table*):
 *   file    = data block* , metaindex block , index block , footer
 *   block   = contents , type (1 byte: 0 raw, 1 Snappy) , masked crc32c(contents || type) (fixed32)
 *   contents (after decompression) =
 *             entry* , restart offset (fixed32)* , num_restarts (fixed32)
 *   entry   = shared (varint32) , unshared (varint32) , value_len (varint32) ,
 *             key[shared..shared+unshared) , value         key = prefix of previous key + suffix
 *   index block entries: separator key (>= every key of the block, < every key of the next)
 *             -> BlockHandle of a data block = offset (varint64) , size (varint64)
 *   footer  = metaindex handle , index handle , zero padding to 40 bytes ,
 *             magic 0xdb4775248b80fb57 (fixed64)                                     = 48 bytes
 * All fixed-width integers are little-endian.
 *
 * Everything read from the file is untrusted: every varint, length and offset is checked against
 * the bytes actually present before it is used, a Snappy block's claimed size is checked before
 * anything is allocated, data blocks must follow each other without overlap (so a hostile index
 * cannot make us decompress one block many times), and keys must strictly increase.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <snappy-c.h>

#include "savedmodel/bundle-impl.h"

#define TABLE_MAGIC            0xdb4775248b80fb57ull
#define TABLE_FOOTER_LEN       48
#define TABLE_TRAILER_LEN      5
#define TABLE_BLOCK_SIZE       (256 * 1024)   /* TensorFlow's default table_options block_size */
#define TABLE_RESTART_INTERVAL 16
/* Snappy's densest element (a 3-byte copy of 64 bytes) expands ~21x; a larger claim is a lie. */
#define SNAPPY_MAX_RATIO 24

/* ---- little-endian and varint helpers -------------------------------------------------------- */

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load64(const uint8_t *p)
{
    return (uint64_t)load32(p) | (uint64_t)load32(p + 4) << 32;
}

/* A varint32 as LevelDB writes them (shared/unshared/value lengths): at most 5 bytes, and here a
 * value past 32 bits is a corrupt block rather than one to truncate. */
static bool get_varint32(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
    const uint8_t *q = *p;
    uint64_t       x;
    if (!tfs_varint_get(&q, end, TFS_VARINT32_MAX_BYTES, &x) || x > UINT32_MAX)
        return false;
    *p = q;
    *v = (uint32_t)x;
    return true;
}

/* ---- reading ---------------------------------------------------------------------------------- */

typedef struct block_handle {
    uint64_t offset;
    uint64_t size;
} block_handle;

typedef struct parser {
    const uint8_t *file;
    size_t         file_len;   /* bytes before the footer: where blocks may lie */
    const char    *name;
    tfs__table    *table;
    int            cap;
    uint64_t       next_block;   /* data blocks must start at or after this offset */
} parser;

static bool decode_handle(const uint8_t **p, const uint8_t *end, block_handle *h)
{
    return tfs_varint_get(p, end, TFS_VARINT_MAX_BYTES, &h->offset) &&
           tfs_varint_get(p, end, TFS_VARINT_MAX_BYTES, &h->size);
}

/* Checks a block's bounds and trailer and yields its contents: borrowed from the file when raw,
 * a new buffer in *owned when Snappy-compressed. */
static enum tfs_code read_block(parser *ps, block_handle h, const char *what,
                                const uint8_t **contents, size_t *len, uint8_t **owned,
                                tfs_status *st)
{
    *owned = NULL;
    if (h.offset > ps->file_len || h.size > ps->file_len - h.offset ||
        TABLE_TRAILER_LEN > ps->file_len - h.offset - h.size)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: %s at offset %llu, size %llu lies outside the file's %zu bytes of blocks",
                       ps->name, what, (unsigned long long)h.offset, (unsigned long long)h.size,
                       ps->file_len);
    const uint8_t *src  = ps->file + h.offset;
    size_t         size = (size_t)h.size;
    uint8_t        type = src[size];
    uint32_t       want = tfs__crc_unmask(load32(src + size + 1));
    uint32_t       got  = tfs__crc32c_extend(tfs__crc32c(src, size), &type, 1);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    want = got;   /* let the fuzzer past the checksum to the parsing behind it */
#endif
    if (want != got)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: %s at offset %llu: checksum mismatch (stored 0x%08x, computed 0x%08x)",
                       ps->name, what, (unsigned long long)h.offset, want, got);
    if (type == 0) {
        *contents = src;
        *len      = size;
        return TFS_OK;
    }
    if (type != 1)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: %s at offset %llu: unknown compression type %u",
                       ps->name, what, (unsigned long long)h.offset, type);

    size_t ulen = 0;
    if (snappy_uncompressed_length((const char *)src, size, &ulen) != SNAPPY_OK)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: %s at offset %llu: corrupt Snappy header", ps->name,
                       what, (unsigned long long)h.offset);
    if (ulen > TFS__TABLE_MAX_BLOCK_BYTES || ulen / SNAPPY_MAX_RATIO > size)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: %s at offset %llu: implausible uncompressed size %zu for %zu bytes",
                       ps->name, what, (unsigned long long)h.offset, ulen, size);
    uint8_t *buf = tfs_malloc(ulen ? ulen : 1);
    if (!buf)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory for a %zu-byte block",
                       ps->name, ulen);
    size_t got_len = ulen;
    if (snappy_uncompress((const char *)src, size, (char *)buf, &got_len) != SNAPPY_OK ||
        got_len != ulen) {
        tfs_free(buf);
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: %s at offset %llu: corrupt Snappy data", ps->name,
                       what, (unsigned long long)h.offset);
    }
    *contents = buf;
    *len      = ulen;
    *owned    = buf;
    return TFS_OK;
}

typedef enum tfs_code (*entry_fn)(parser *ps, const uint8_t *key, size_t klen, const uint8_t *val,
                                  size_t vlen, tfs_status *st);

/* Walks the entries of one block's contents, rebuilding each full key, and calls fn on each. */
static enum tfs_code parse_block(parser *ps, const uint8_t *b, size_t len, const char *what,
                                 entry_fn fn, tfs_status *st)
{
    tfs__buf      key = {0};   /* the current entry's full key */
    enum tfs_code rc  = TFS_OK;

    if (len < 4) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: %s is %zu bytes, too short for a block", ps->name,
                     what, len);
        goto fail;
    }
    uint32_t nrestarts = load32(b + len - 4);
    if (nrestarts > (len - 4) / 4) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: %s claims %u restart points in %zu bytes", ps->name,
                     what, nrestarts, len);
        goto fail;
    }
    size_t data_end = len - 4 - 4 * (size_t)nrestarts;
    for (uint32_t i = 0; i < nrestarts; i++) {
        uint32_t r = load32(b + data_end + 4 * (size_t)i);
        if (r != 0 && r >= data_end) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: %s: restart point %u out of range", ps->name,
                         what, r);
            goto fail;
        }
    }

    const uint8_t *p = b, *end = b + data_end;
    while (p < end) {
        uint32_t shared, unshared, vlen;
        if (!get_varint32(&p, end, &shared) || !get_varint32(&p, end, &unshared) ||
            !get_varint32(&p, end, &vlen)) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: %s: truncated entry header at byte %td", ps->name,
                         what, p - b);
            goto fail;
        }
        if (shared > key.len || unshared > (size_t)(end - p) ||
            vlen > (size_t)(end - p) - unshared) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: %s: entry at byte %td overruns the block",
                         ps->name, what, p - b);
            goto fail;
        }
        key.len = shared;   /* the prefix it shares with the previous key, then its own bytes */
        tfs__buf_append(&key, p, unshared);
        if (key.oom) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", ps->name);
            goto fail;
        }
        p += unshared;
        rc = fn(ps, (const uint8_t *)key.data, key.len, p, vlen, st);
        if (rc != TFS_OK)
            goto fail;
        p += vlen;
    }
fail:
    tfs__buf_deinit(&key);
    return rc;
}

/* The metaindex block's entries (filter names) are of no use to us. */
static enum tfs_code ignore_entry(parser *ps, const uint8_t *key, size_t klen, const uint8_t *val,
                                  size_t vlen, tfs_status *st)
{
    return TFS_OK;
}

/* A data block entry: one key/value pair of the table. */
static enum tfs_code data_entry(parser *ps, const uint8_t *key, size_t klen, const uint8_t *val,
                                size_t vlen, tfs_status *st)
{
    tfs__table *t = ps->table;
    if (t->count > 0) {
        const tfs__table_entry *prev = &t->entries[t->count - 1];
        size_t                  m    = prev->key_len < klen ? prev->key_len : klen;
        int                     c    = m ? memcmp(prev->key, key, m) : 0;
        if (c > 0 || (c == 0 && prev->key_len >= klen))
            return TFS_ERR(st, TFS_DATA_LOSS, "%s: keys out of order after '%.*s'", ps->name,
                           (int)(prev->key_len > 200 ? 200 : prev->key_len), prev->key);
    }
    if (t->count == ps->cap) {
        if (ps->cap > (1 << 28))
            return TFS_ERR(st, TFS_DATA_LOSS, "%s: too many entries", ps->name);
        int               ncap = ps->cap ? ps->cap * 2 : 16;
        tfs__table_entry *ne   = tfs_realloc(t->entries, (size_t)ncap * sizeof *ne);
        if (!ne)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", ps->name);
        t->entries = ne;
        ps->cap    = ncap;
    }
    tfs__table_entry *e = &t->entries[t->count];
    e->key   = tfs_malloc(klen + 1);
    e->value = tfs_malloc(vlen ? vlen : 1);
    if (!e->key || !e->value) {
        tfs_free(e->key);
        tfs_free(e->value);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", ps->name);
    }
    if (klen)
        memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    e->key_len   = klen;
    if (vlen)
        memcpy(e->value, val, vlen);
    e->value_len = vlen;
    t->count++;
    return TFS_OK;
}

/* An index block entry: the handle of a data block, which is read and parsed right away. */
static enum tfs_code index_entry(parser *ps, const uint8_t *key, size_t klen, const uint8_t *val,
                                 size_t vlen, tfs_status *st)
{
    block_handle   h;
    const uint8_t *p = val;
    if (!decode_handle(&p, val + vlen, &h))
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: index block: malformed block handle", ps->name);
    if (h.offset < ps->next_block)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: index block: data block at offset %llu overlaps the previous one",
                       ps->name, (unsigned long long)h.offset);

    const uint8_t *contents;
    size_t         len;
    uint8_t       *owned;
    enum tfs_code  rc = read_block(ps, h, "data block", &contents, &len, &owned, st);
    if (rc != TFS_OK)
        return rc;
    ps->next_block = h.offset + h.size + TABLE_TRAILER_LEN;   /* read_block checked the bounds */
    rc = parse_block(ps, contents, len, "data block", data_entry, st);
    tfs_free(owned);
    return rc;
}

enum tfs_code tfs__table_parse(const void *data, size_t n, const char *name, tfs__table **out,
                               tfs_status *st)
{
    parser        ps    = {0};
    uint8_t      *owned = NULL;
    enum tfs_code rc;

    *out = NULL;
    if (n < TABLE_FOOTER_LEN)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: %zu bytes is too short for a table", name, n);
    if (n > TFS__TABLE_MAX_FILE_BYTES)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: %zu bytes is larger than an index can be", name, n);
    const uint8_t *footer = (const uint8_t *)data + n - TABLE_FOOTER_LEN;
    if (load64(footer + 40) != TABLE_MAGIC)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: bad magic number: not a table", name);

    block_handle   meta, index;
    const uint8_t *p = footer;
    if (!decode_handle(&p, footer + 40, &meta) || !decode_handle(&p, footer + 40, &index))
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: malformed footer", name);

    ps.file     = data;
    ps.file_len = n - TABLE_FOOTER_LEN;
    ps.name     = name;
    ps.table    = tfs_calloc(1, sizeof *ps.table);
    if (!ps.table)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", name);

    const uint8_t *contents;
    size_t         len;
    rc = read_block(&ps, meta, "metaindex block", &contents, &len, &owned, st);
    if (rc != TFS_OK)
        goto fail;
    rc = parse_block(&ps, contents, len, "metaindex block", ignore_entry, st);
    tfs_free(owned);
    owned = NULL;
    if (rc != TFS_OK)
        goto fail;

    rc = read_block(&ps, index, "index block", &contents, &len, &owned, st);
    if (rc != TFS_OK)
        goto fail;
    rc = parse_block(&ps, contents, len, "index block", index_entry, st);
    if (rc != TFS_OK)
        goto fail;
    tfs_free(owned);
    *out = ps.table;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_free(owned);
    tfs__table_free(ps.table);
    return rc;
}

void tfs__table_free(tfs__table *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->count; i++) {
        tfs_free(t->entries[i].key);
        tfs_free(t->entries[i].value);
    }
    tfs_free(t->entries);
    tfs_free(t);
}

/* ---- writing ---------------------------------------------------------------------------------- */

static void put32(tfs__buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    tfs__buf_append(b, x, 4);
}

/* One block being built: prefix-compressed entries with a restart point every 16 entries. */
typedef struct block_builder {
    tfs__buf buf;
    tfs__buf restarts;   /* fixed32 offsets, the first always 0 */
    int      counter;    /* entries since the last restart */
    int      interval;   /* entries per restart: 16, or 1 for the index block as in LevelDB */
    tfs__buf last_key;
} block_builder;

static void bb_reset(block_builder *bb)
{
    bb->buf.len = bb->restarts.len = bb->last_key.len = 0;
    bb->counter  = 0;
    put32(&bb->restarts, 0);
}

static void bb_free(block_builder *bb)
{
    tfs__buf_deinit(&bb->buf);
    tfs__buf_deinit(&bb->restarts);
    tfs__buf_deinit(&bb->last_key);
}

static bool bb_failed(const block_builder *bb)
{
    return bb->buf.oom || bb->restarts.oom || bb->last_key.oom;
}

static void bb_add(block_builder *bb, const void *key, size_t klen, const void *val, size_t vlen)
{
    size_t shared = 0;
    if (bb->counter < bb->interval) {
        size_t m = bb->last_key.len < klen ? bb->last_key.len : klen;
        while (shared < m && (uint8_t)bb->last_key.data[shared] == ((const uint8_t *)key)[shared])
            shared++;
    } else {
        put32(&bb->restarts, (uint32_t)bb->buf.len);
        bb->counter = 0;
    }
    tfs__buf_varint(&bb->buf, shared);
    tfs__buf_varint(&bb->buf, klen - shared);
    tfs__buf_varint(&bb->buf, vlen);
    if (klen > shared)   /* key may be NULL when empty */
        tfs__buf_append(&bb->buf, (const uint8_t *)key + shared, klen - shared);
    tfs__buf_append(&bb->buf, val, vlen);
    bb->last_key.len = 0;
    tfs__buf_append(&bb->last_key, key, klen);
    bb->counter++;
}

static size_t bb_estimate(const block_builder *bb)
{
    return bb->buf.len + bb->restarts.len + 4;
}

/* Appends the finished block plus its trailer (type 0, masked crc) to out; resets the builder.
 * Returns the block's handle. */
static block_handle bb_flush(block_builder *bb, tfs__buf *out)
{
    tfs__buf_append(&bb->buf, bb->restarts.data, bb->restarts.len);
    put32(&bb->buf, (uint32_t)(bb->restarts.len / 4));
    block_handle h = {out->len, bb->buf.len};
    uint8_t      type = 0;
    tfs__buf_append(out, bb->buf.data, bb->buf.len);
    tfs__buf_append(out, &type, 1);
    put32(out, tfs__crc_mask(tfs__crc32c_extend(tfs__crc32c(bb->buf.data, bb->buf.len), &type, 1)));
    bb_reset(bb);
    return h;
}

/* LevelDB's FindShortestSeparator: shortens `start` (in place) to a key k with
 * start <= k < limit, so index blocks stay small. */
static void shortest_separator(tfs__buf *start, const uint8_t *limit, size_t llen)
{
    uint8_t *sp = (uint8_t *)start->data;
    size_t   m  = start->len < llen ? start->len : llen, i = 0;
    while (i < m && sp[i] == limit[i])
        i++;
    if (i >= m)
        return;   /* one is a prefix of the other */
    uint8_t c = sp[i];
    if (c < 0xff && c + 1 < limit[i]) {
        sp[i]++;
        start->len = i + 1;
    }
}

/* LevelDB's FindShortSuccessor: the shortest key >= `key` (in place). */
static void short_successor(tfs__buf *key)
{
    uint8_t *kp = (uint8_t *)key->data;
    for (size_t i = 0; i < key->len; i++) {
        if (kp[i] != 0xff) {
            kp[i]++;
            key->len = i + 1;
            return;
        }
    }
}

static void put_handle(tfs__buf *b, block_handle h)
{
    tfs__buf_varint(b, h.offset);
    tfs__buf_varint(b, h.size);
}

enum tfs_code tfs__table_build(const tfs__table_entry *entries, int count, uint8_t **out,
                               size_t *out_len, tfs_status *st)
{
    block_builder data = {0}, index = {0}, meta = {0};
    tfs__buf      file = {0}, sep = {0}, hbuf = {0};
    block_handle  pending = {0};
    bool          have_pending = false;
    enum tfs_code rc = TFS_OK;

    *out     = NULL;
    *out_len = 0;
    data.interval = meta.interval = TABLE_RESTART_INTERVAL;
    index.interval = 1;
    bb_reset(&data);
    bb_reset(&index);
    bb_reset(&meta);

    for (int i = 0; i < count; i++) {
        const tfs__table_entry *e = &entries[i];
        if (i > 0) {
            const tfs__table_entry *prev = &entries[i - 1];
            size_t m = prev->key_len < e->key_len ? prev->key_len : e->key_len;
            int    c = m ? memcmp(prev->key, e->key, m) : 0;
            if (c > 0 || (c == 0 && prev->key_len >= e->key_len)) {
                rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "table keys not strictly increasing at '%s'",
                             e->key);
                goto fail;
            }
        }
        if (e->key_len > UINT32_MAX || e->value_len > UINT32_MAX) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "table entry '%s' is too large", e->key);
            goto fail;
        }
        if (have_pending) {
            /* sep holds the flushed block's last key; shorten it against this key. */
            shortest_separator(&sep, (const uint8_t *)e->key, e->key_len);
            hbuf.len = 0;
            put_handle(&hbuf, pending);
            bb_add(&index, sep.data, sep.len, hbuf.data, hbuf.len);
            have_pending = false;
        }
        bb_add(&data, e->key, e->key_len, e->value, e->value_len);
        if (bb_estimate(&data) >= TABLE_BLOCK_SIZE || i == count - 1) {
            sep.len = 0;
            tfs__buf_append(&sep, data.last_key.data, data.last_key.len);
            pending      = bb_flush(&data, &file);
            have_pending = true;
        }
    }
    if (have_pending) {
        short_successor(&sep);
        hbuf.len = 0;
        put_handle(&hbuf, pending);
        bb_add(&index, sep.data, sep.len, hbuf.data, hbuf.len);
    }

    block_handle meta_h  = bb_flush(&meta, &file);
    block_handle index_h = bb_flush(&index, &file);
    tfs__buf     footer  = {0};
    put_handle(&footer, meta_h);
    put_handle(&footer, index_h);
    uint8_t zeros[40] = {0};
    tfs__buf_append(&footer, zeros, 40 - footer.len);
    put32(&footer, (uint32_t)TABLE_MAGIC);
    put32(&footer, (uint32_t)(TABLE_MAGIC >> 32));
    tfs__buf_append(&file, footer.data, footer.len);
    bool footer_failed = footer.oom;
    tfs__buf_deinit(&footer);

    if (footer_failed || file.oom || sep.oom || hbuf.oom || bb_failed(&data) ||
        bb_failed(&index) || bb_failed(&meta)) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building a table");
        goto fail;
    }
    if (!(*out = (uint8_t *)tfs__buf_take(&file, out_len))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building a table");
        goto fail;
    }
    tfs_status_clear(st);
fail:
    bb_free(&data);
    bb_free(&index);
    bb_free(&meta);
    tfs__buf_deinit(&file);
    tfs__buf_deinit(&sep);
    tfs__buf_deinit(&hbuf);
    return rc;
}
