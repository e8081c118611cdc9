/* TensorBundle (the `variables/` checkpoint format) and its pieces: crc32c, the LevelDB-format
 * table of the .index file, the reader and the writer. Internal to savedmodel/ (and its tests).
 *
 * FORMAT (TensorFlow's tensor_bundle + LevelDB table):
 *   <prefix>.index          an SSTable: data blocks, a metaindex block (empty), an index block, and
 *                           a 48-byte footer = metaindex BlockHandle, index BlockHandle (varint64
 *                           offset, varint64 size each), zero padding to 40 bytes, fixed64 magic
 *                           0xdb4775248b80fb57. Each block is followed by a 5-byte trailer: type
 *                           (0 raw, 1 Snappy) and the masked crc32c of contents+type. Block contents:
 *                           entries (varint32 shared, varint32 unshared, varint32 value_len, key
 *                           suffix, value), fixed32 restart offsets, fixed32 restart count.
 *                           Key "" -> BundleHeaderProto; every other key -> BundleEntryProto.
 *   <prefix>.data-SSSSS-of-NNNNN   raw little-endian tensor bytes at [offset, offset+size).
 *                           DT_STRING: varint64 lengths, masked crc32c (fixed32) of the lengths,
 *                           then the bytes.
 *   masked crc: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
 */
#ifndef TFS_SAVEDMODEL_BUNDLE_IMPL_H
#define TFS_SAVEDMODEL_BUNDLE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

/* ---- crc32c (Castagnoli) -------------------------------------------------------------------- */
uint32_t tfs__crc32c_extend(uint32_t crc, const void *data, size_t n);
static inline uint32_t tfs__crc32c(const void *data, size_t n) { return tfs__crc32c_extend(0, data, n); }
static inline uint32_t tfs__crc_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
static inline uint32_t tfs__crc_unmask(uint32_t m) { uint32_t r = m - 0xa282ead8u; return (r >> 17) | (r << 15); }

/* ---- the LevelDB-format table (table.c) ----------------------------------------------------- */

/* One key/value pair of a table. Keys are arbitrary bytes; key[key_len] is a NUL added for
 * convenience. Both buffers belong to the table that holds the entry. */
typedef struct tfs__table_entry {
    char    *key;
    size_t   key_len;
    uint8_t *value;
    size_t   value_len;
} tfs__table_entry;

/* A whole table read into memory, entries in file order (strictly increasing bytewise keys). */
typedef struct tfs__table {
    int               count;
    tfs__table_entry *entries;
} tfs__table;

/* Upper bounds on what a table may make us allocate. */
#define TFS__TABLE_MAX_FILE_BYTES  ((size_t)1 << 30)
#define TFS__TABLE_MAX_BLOCK_BYTES ((size_t)1 << 28)

/* Parses the table in data[0, n) (borrowed), checking the footer, magic, every block's trailer
 * and masked crc32c, Snappy contents and every entry's bounds, and that keys strictly increase.
 * `name` (borrowed) names the file in messages. DATA_LOSS on any malformation; RESOURCE_EXHAUSTED
 * when memory runs out. Caller owns *out. Never reads outside data[0, n). */
enum tfs_code tfs__table_parse(const void *data, size_t n, const char *name, tfs__table **out,
                               tfs_status *st);
void tfs__table_free(tfs__table *t);   /* NULL-safe */

/* Serializes `count` entries (borrowed; keys must strictly increase, INVALID_ARGUMENT otherwise)
 * as a table with uncompressed blocks of about 256 KiB, restart interval 16, an empty metaindex
 * block, an index block (restart interval 1) with shortened separator keys, and the footer, as
 * LevelDB and TensorFlow's table builder do. Caller owns *out (tfs_free). */
enum tfs_code tfs__table_build(const tfs__table_entry *entries, int count, uint8_t **out,
                               size_t *out_len, tfs_status *st);

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct tfs_bundle tfs_bundle;

typedef struct tfs_bundle_entry {
    const char    *key;
    enum tfs_dtype dtype;
    int            rank;
    int64_t        dims[TFS_MAX_RANK];
    int            shard;
    int64_t        offset;
    int64_t        size;
    uint32_t       crc32c_masked;
    bool           sliced;       /* partitioned variable: not readable yet */
} tfs_bundle_entry;

/* Opens <prefix>.index and validates the whole table (footer, magic, every block's CRC, Snappy,
 * entry protos, header: endianness, shard count). Data shards are opened when read.
 * DATA_LOSS names the file and what is wrong; NOT_FOUND when the index is absent. Caller owns. */
enum tfs_code tfs_bundle_open(const char *prefix, tfs_bundle **out, tfs_status *st);
/* The same from index bytes already in memory (borrowed); `prefix` names the bundle in messages and
 * locates its data shards. Used by tfs_bundle_open and the fuzz driver. */
enum tfs_code tfs__bundle_parse_index(const void *data, size_t n, const char *prefix,
                                      tfs_bundle **out, tfs_status *st);
void tfs_bundle_free(tfs_bundle *b);
int  tfs_bundle_num_shards(const tfs_bundle *b);
int  tfs_bundle_count(const tfs_bundle *b);                     /* entries, header excluded, key-sorted */
const tfs_bundle_entry *tfs_bundle_entry_at(const tfs_bundle *b, int i);
const tfs_bundle_entry *tfs_bundle_find(const tfs_bundle *b, const char *key);   /* NULL if absent */
/* Reads a tensor, verifying its size and crc32c against the shard. want = TFS_DTYPE_INVALID accepts
 * any dtype; otherwise a mismatch is INVALID_ARGUMENT. NOT_FOUND for an unknown key; DATA_LOSS for a
 * truncated shard or CRC mismatch (message names the shard file and key). Caller owns *out.
 * Thread-safe. */
enum tfs_code tfs_bundle_read(tfs_bundle *b, const char *key, enum tfs_dtype want, tfs_tensor **out,
                              tfs_status *st);

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct tfs_bundle_writer tfs_bundle_writer;

/* Writes <prefix>.index and <prefix>.data-00000-of-00001 (one shard, uncompressed blocks) as
 * TensorFlow's BundleWriter does. Keys may be added in any order; duplicates are INVALID_ARGUMENT. */
enum tfs_code tfs_bundle_writer_new(const char *prefix, tfs_bundle_writer **out, tfs_status *st);
enum tfs_code tfs_bundle_writer_add(tfs_bundle_writer *w, const char *key, const tfs_tensor *t,
                                    tfs_status *st);
enum tfs_code tfs_bundle_writer_finish(tfs_bundle_writer *w, tfs_status *st);
void tfs_bundle_writer_free(tfs_bundle_writer *w);   /* NULL-safe; unfinished files are removed */

#endif
