/* TensorBundle reader: the `variables/` checkpoint of a SavedModel (TensorFlow's
 * util/tensor_bundle). Opening reads and validates the whole <prefix>.index table up front (it is
 * small: one entry per tensor) and keeps the decoded entries sorted by key; tensors are read from
 * the data shards on demand with pread, so one open bundle serves any number of threads.
 *
 * DESIGN: every number that comes from the index (dtype, dims, shard, offset, size) is checked at
 * open or before it is used to size an allocation or a read; a tensor's bytes are checked against
 * the shard's length before reading and against the masked crc32c after. Numeric tensors are raw
 * little-endian row-major bytes. DT_STRING layout (see bundle-impl.h and tfserving-api.md §7):
 *   varint64 len[N] , masked crc32c of the lengths (fixed32) , bytes[len0] ... bytes[lenN-1]
 * where the length checksum, and the first part of the entry checksum, run over each length as
 * a little-endian uint32 (uint64 when it does not fit), not over the varint bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/unpack.h"
#include "savedmodel/bundle-impl.h"
#include "tensorflow/core/protobuf/tensor_bundle.pb-c.h"

#define BUNDLE_MAX_SHARDS 99999   /* shard names have five digits */

struct tfs_bundle {
    char             *prefix;
    int               num_shards;
    int               count;
    tfs_bundle_entry *entries;   /* key-sorted; keys owned */
};

/* protobuf-c allocations go through tfs_malloc like everything else. protobuf-c's unpack returns
 * NULL both for bad bytes and for a failed allocation; an allocator whose data points at a bool
 * records the latter, so out of memory is not reported as a corrupt file. */
static void *pb_alloc(void *d, size_t n)
{
    void *p = tfs_malloc(n);
    if (!p && d)
        *(bool *)d = true;
    return p;
}
static void pb_free(void *d, void *p)
{
    tfs_free(p);
}
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Reads exactly n bytes at off; false with errno set (0 on a short file) otherwise. */
static bool pread_all(int fd, void *buf, size_t n, int64_t off)
{
    uint8_t *p = buf;
    while (n > 0) {
        size_t  chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t r     = pread(fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return false;
        }
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return true;
}

/* ---- opening ---------------------------------------------------------------------------------- */

static enum tfs_code fill_entry(tfs_bundle *b, const char *name, const tfs__table_entry *te,
                                tfs_bundle_entry *e, tfs_status *st)
{
    Tensorflow__BundleEntryProto *pe = NULL;
    enum tfs_code                 rc = TFS_OK;

    if (memchr(te->key, '\0', te->key_len)) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: a key contains a NUL byte", name);
        goto fail;
    }
    bool               oom = false;
    ProtobufCAllocator pa  = {pb_alloc, pb_free, &oom};
    tfs_status         why;
    if (tfs_proto_unpack_bounded(&tensorflow__bundle_entry_proto__descriptor, &pa, te->value,
                                 te->value_len, (ProtobufCMessage **)&pe, &why) != TFS_OK) {
        rc = oom ? TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: entry '%s': out of memory", name,
                           te->key)
                 : TFS_ERR(st, why.code, "%s: entry '%s': malformed BundleEntryProto: %s", name,
                           te->key, why.msg);
        goto fail;
    }
    e->key    = te->key;
    e->dtype  = (enum tfs_dtype)pe->dtype;
    e->sliced = pe->n_slices > 0;
    if ((int)pe->dtype <= 0 || (int)pe->dtype >= TFS_DTYPE_REF_OFFSET) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: entry '%s': invalid dtype %d", name, te->key,
                     (int)pe->dtype);
        goto fail;
    }
    e->rank = 0;
    if (pe->shape) {
        if (pe->shape->unknown_rank) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: entry '%s': shape of unknown rank", name, te->key);
            goto fail;
        }
        if (pe->shape->n_dim > TFS_MAX_RANK) {
            rc = TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: entry '%s': rank %zu exceeds the maximum %d",
                         name, te->key, pe->shape->n_dim, TFS_MAX_RANK);
            goto fail;
        }
        e->rank = (int)pe->shape->n_dim;
        for (int i = 0; i < e->rank; i++)
            e->dims[i] = pe->shape->dim[i]->size;
    }
    if (tfs_shape_nelem(e->rank, e->dims) < 0) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: entry '%s': invalid shape", name, te->key);
        goto fail;
    }
    e->shard         = pe->shard_id;
    e->offset        = pe->offset;
    e->size          = pe->size;
    e->crc32c_masked = pe->crc32c;
    if (!e->sliced && (pe->shard_id < 0 || pe->shard_id >= b->num_shards || pe->offset < 0 ||
                       pe->size < 0 || pe->offset > INT64_MAX - pe->size)) {
        rc = TFS_ERR(st, TFS_DATA_LOSS,
                     "%s: entry '%s': shard %d, offset %lld, size %lld out of range (%d shards)",
                     name, te->key, pe->shard_id, (long long)pe->offset, (long long)pe->size,
                     b->num_shards);
        goto fail;
    }
fail:
    tensorflow__bundle_entry_proto__free_unpacked(pe, &pb_allocator);
    return rc;
}

static enum tfs_code check_header(tfs_bundle *b, const char *name, const tfs__table_entry *te,
                                  tfs_status *st)
{
    Tensorflow__BundleHeaderProto *h  = NULL;
    enum tfs_code                  rc = TFS_OK;

    bool               oom = false;
    ProtobufCAllocator pa  = {pb_alloc, pb_free, &oom};
    tfs_status         why;
    if (tfs_proto_unpack_bounded(&tensorflow__bundle_header_proto__descriptor, &pa, te->value,
                                 te->value_len, (ProtobufCMessage **)&h, &why) != TFS_OK) {
        rc = oom ? TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", name)
                 : TFS_ERR(st, why.code, "%s: malformed BundleHeaderProto: %s", name, why.msg);
        goto fail;
    }
    if (h->endianness == TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__BIG) {
        rc = TFS_ERR(st, TFS_UNIMPLEMENTED,
                     "%s: the bundle was written big-endian; only little-endian bundles can be read",
                     name);
        goto fail;
    }
    if (h->endianness != TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: unknown endianness %d", name, (int)h->endianness);
        goto fail;
    }
    if (h->num_shards < 0 || h->num_shards > BUNDLE_MAX_SHARDS) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: invalid shard count %d", name, h->num_shards);
        goto fail;
    }
    /* We read format version 1, as TensorFlow's kTensorBundleVersion. */
    if (h->version) {
        bool bad = h->version->min_consumer > 1;
        for (size_t i = 0; i < h->version->n_bad_consumers; i++)
            bad = bad || h->version->bad_consumers[i] == 1;
        if (bad) {
            rc = TFS_ERR(st, TFS_FAILED_PRECONDITION,
                         "%s: checkpoint format needs a newer reader (min_consumer %d)", name,
                         h->version->min_consumer);
            goto fail;
        }
    }
    b->num_shards = h->num_shards;
fail:
    tensorflow__bundle_header_proto__free_unpacked(h, &pb_allocator);
    return rc;
}

enum tfs_code tfs__bundle_parse_index(const void *data, size_t n, const char *prefix,
                                      tfs_bundle **out, tfs_status *st)
{
    tfs_bundle   *b     = NULL;
    tfs__table   *t     = NULL;
    char         *name  = NULL;
    enum tfs_code rc;

    *out = NULL;
    size_t plen = strlen(prefix);
    name = tfs_malloc(plen + sizeof ".index");
    b    = tfs_calloc(1, sizeof *b);
    if (!name || !b || !(b->prefix = tfs_strdup(prefix))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", prefix);
        goto fail;
    }
    memcpy(name, prefix, plen);
    memcpy(name + plen, ".index", sizeof ".index");
    if (!host_little_endian()) {
        rc = TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: bundles are read on little-endian hosts only", name);
        goto fail;
    }

    rc = tfs__table_parse(data, n, name, &t, st);
    if (rc != TFS_OK)
        goto fail;
    if (t->count == 0 || t->entries[0].key_len != 0) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: no header entry (empty key)", name);
        goto fail;
    }
    rc = check_header(b, name, &t->entries[0], st);
    if (rc != TFS_OK)
        goto fail;

    b->entries = tfs_calloc((size_t)t->count, sizeof *b->entries);
    if (!b->entries) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", name);
        goto fail;
    }
    for (int i = 1; i < t->count; i++) {
        rc = fill_entry(b, name, &t->entries[i], &b->entries[i - 1], st);
        if (rc != TFS_OK)
            goto fail;
        t->entries[i].key = NULL;   /* the bundle entry owns the key now */
        b->count++;
    }
    *out = b;
    b    = NULL;
    tfs_status_clear(st);
fail:
    tfs__table_free(t);
    tfs_bundle_free(b);
    tfs_free(name);
    return rc;
}

enum tfs_code tfs_bundle_open(const char *prefix, tfs_bundle **out, tfs_status *st)
{
    char         *path = NULL;
    uint8_t      *buf  = NULL;
    int           fd   = -1;
    enum tfs_code rc;
    struct stat   sb;

    *out = NULL;
    size_t plen = strlen(prefix);
    path = tfs_malloc(plen + sizeof ".index");
    if (!path) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", prefix);
        goto fail;
    }
    memcpy(path, prefix, plen);
    memcpy(path + plen, ".index", sizeof ".index");

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int err = errno;
        rc = TFS_ERR(st, tfs_code_from_errno(err), "%s: %s", path,
                     err == ENOENT ? "not found" : strerror(err));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: not a regular file", path);
        goto fail;
    }
    if ((uint64_t)sb.st_size > TFS__TABLE_MAX_FILE_BYTES) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: %lld bytes is larger than an index can be", path,
                     (long long)sb.st_size);
        goto fail;
    }
    size_t n = (size_t)sb.st_size;
    buf = tfs_malloc(n ? n : 1);
    if (!buf) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes", path, n);
        goto fail;
    }
    if (!pread_all(fd, buf, n, 0)) {
        int err = errno;
        rc = TFS_ERR(st, err ? tfs_code_from_errno(err) : TFS_DATA_LOSS, "%s: read failed: %s",
                     path, err ? strerror(err) : "file shrank while reading");
        goto fail;
    }
    rc = tfs__bundle_parse_index(buf, n, prefix, out, st);
fail:
    if (fd >= 0)
        close(fd);
    tfs_free(buf);
    tfs_free(path);
    return rc;
}

void tfs_bundle_free(tfs_bundle *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->count; i++)
        tfs_free((char *)b->entries[i].key);
    tfs_free(b->entries);
    tfs_free(b->prefix);
    tfs_free(b);
}

int tfs_bundle_num_shards(const tfs_bundle *b)
{
    return b->num_shards;
}

int tfs_bundle_count(const tfs_bundle *b)
{
    return b->count;
}

const tfs_bundle_entry *tfs_bundle_entry_at(const tfs_bundle *b, int i)
{
    return i >= 0 && i < b->count ? &b->entries[i] : NULL;
}

const tfs_bundle_entry *tfs_bundle_find(const tfs_bundle *b, const char *key)
{
    /* Keys hold no NUL (checked at open) and strcmp orders bytes as unsigned, like the table. */
    int lo = 0, hi = b->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c   = strcmp(b->entries[mid].key, key);
        if (c == 0)
            return &b->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

/* ---- reading tensors -------------------------------------------------------------------------- */

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Decodes a DT_STRING tensor from its shard bytes (layout in the file comment). */
static enum tfs_code decode_strings(const tfs_bundle_entry *e, const char *shard,
                                    const uint8_t *buf, size_t n, int64_t nelem, tfs_tensor *t,
                                    tfs_status *st)
{
    const uint8_t *p = buf, *end = buf + n;
    uint64_t      *lens = tfs_malloc((size_t)nelem * sizeof *lens + 1);
    uint32_t       crc  = 0;
    enum tfs_code  rc   = TFS_OK;

    if (!lens) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: tensor '%s': out of memory", shard, e->key);
        goto fail;
    }
    for (int64_t i = 0; i < nelem; i++) {
        uint64_t v;
        if (!tfs_varint_get(&p, end, TFS_VARINT_MAX_BYTES, &v)) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: tensor '%s': malformed length of string %lld",
                         shard, e->key, (long long)i);
            goto fail;
        }
        uint8_t le[8];
        int     w = v <= UINT32_MAX ? 4 : 8;
        put_le(le, v, w);
        crc     = tfs__crc32c_extend(crc, le, (size_t)w);
        lens[i] = v;
    }
    if (end - p < 4 || tfs__crc_unmask(load32(p)) != crc) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: tensor '%s': string length checksum mismatch", shard,
                     e->key);
        goto fail;
    }
    crc = tfs__crc32c_extend(crc, p, 4);
    p += 4;
    for (int64_t i = 0; i < nelem; i++) {
        if (lens[i] > (uint64_t)(end - p)) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: tensor '%s': string %lld overruns the entry",
                         shard, e->key, (long long)i);
            goto fail;
        }
        crc = tfs__crc32c_extend(crc, p, (size_t)lens[i]);
        rc  = tfs_tensor_set_string(t, i, p, (size_t)lens[i], st);
        if (rc != TFS_OK)
            goto fail;
        p += lens[i];
    }
    if (p != end) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: tensor '%s': %td stray bytes after the strings", shard,
                     e->key, end - p);
        goto fail;
    }
    if (crc != tfs__crc_unmask(e->crc32c_masked)) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: checksum mismatch for tensor '%s'", shard, e->key);
        goto fail;
    }
fail:
    tfs_free(lens);
    return rc;
}

enum tfs_code tfs_bundle_read(tfs_bundle *b, const char *key, enum tfs_dtype want, tfs_tensor **out,
                              tfs_status *st)
{
    char          shard[PATH_MAX];
    tfs_tensor   *t   = NULL;
    uint8_t      *buf = NULL;
    int           fd  = -1;
    enum tfs_code rc;
    struct stat   sb;

    *out = NULL;
    const tfs_bundle_entry *e = tfs_bundle_find(b, key);
    if (!e)
        return TFS_ERR(st, TFS_NOT_FOUND, "%s: no tensor named '%s' in the checkpoint", b->prefix,
                       key);
    if (e->sliced)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: tensor '%s' is partitioned into slices",
                       b->prefix, key);
    if (want != TFS_DTYPE_INVALID && tfs_dtype_base(want) != e->dtype)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: tensor '%s' is %s, expected %s", b->prefix,
                       key, tfs_dtype_name(e->dtype), tfs_dtype_name(tfs_dtype_base(want)));
    size_t esize = tfs_dtype_size(e->dtype);
    if (esize == 0 || e->dtype == TFS_DTYPE_RESOURCE || e->dtype == TFS_DTYPE_VARIANT)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: tensor '%s': dtype %s cannot be restored",
                       b->prefix, key, tfs_dtype_name(e->dtype));
    int64_t nelem = tfs_shape_nelem(e->rank, e->dims);
    if (e->dtype == TFS_DTYPE_STRING) {
        /* Each element takes at least one length byte; 4 more for the length checksum. */
        if (nelem > e->size || (e->size - nelem) < 4)
            return TFS_ERR(st, TFS_DATA_LOSS, "%s: tensor '%s': %lld bytes cannot hold %lld strings",
                           b->prefix, key, (long long)e->size, (long long)nelem);
    } else if (nelem > INT64_MAX / (int64_t)esize || nelem * (int64_t)esize != e->size) {
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: tensor '%s': %lld bytes in the index, but its shape and dtype need %lld",
                       b->prefix, key, (long long)e->size,
                       nelem > INT64_MAX / (int64_t)esize ? -1LL : (long long)(nelem * (int64_t)esize));
    }
    if ((uint64_t)e->size > TFS_TENSOR_MAX_BYTES)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: tensor '%s': %lld bytes is too large",
                       b->prefix, key, (long long)e->size);

    int sn = snprintf(shard, sizeof shard, "%s.data-%05d-of-%05d", b->prefix, e->shard,
                      b->num_shards);
    if (sn < 0 || (size_t)sn >= sizeof shard)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", b->prefix);
    fd = open(shard, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int err = errno;
        rc = TFS_ERR(st, tfs_code_from_errno(err), "%s: %s (needed for tensor '%s')", shard,
                     err == ENOENT ? "not found" : strerror(err), key);
        goto fail;
    }
    if (sb.st_size < e->offset + e->size) {
        rc = TFS_ERR(st, TFS_DATA_LOSS,
                     "%s: truncated: tensor '%s' needs bytes [%lld, %lld) but the file has %lld",
                     shard, key, (long long)e->offset, (long long)(e->offset + e->size),
                     (long long)sb.st_size);
        goto fail;
    }

    rc = tfs_tensor_new(e->dtype, e->rank, e->dims, &t, st);
    if (rc != TFS_OK) {
        tfs_status_prefix(st, "%s: tensor '%s'", b->prefix, key);
        goto fail;
    }
    if (e->dtype == TFS_DTYPE_STRING) {
        buf = tfs_malloc((size_t)e->size);
        if (!buf) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: tensor '%s': out of memory", shard, key);
            goto fail;
        }
    }
    uint8_t *dst = e->dtype == TFS_DTYPE_STRING ? buf : t->data;
    if (e->size > 0 && !pread_all(fd, dst, (size_t)e->size, e->offset)) {
        int err = errno;
        rc = TFS_ERR(st, err ? tfs_code_from_errno(err) : TFS_DATA_LOSS,
                     "%s: reading tensor '%s': %s", shard, key,
                     err ? strerror(err) : "file shrank while reading");
        goto fail;
    }
    if (e->dtype == TFS_DTYPE_STRING) {
        rc = decode_strings(e, shard, buf, (size_t)e->size, nelem, t, st);
        if (rc != TFS_OK)
            goto fail;
    } else {
        uint32_t crc = tfs__crc32c(dst, (size_t)e->size);
        if (crc != tfs__crc_unmask(e->crc32c_masked)) {
            rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: checksum mismatch for tensor '%s'", shard, key);
            goto fail;
        }
        if (e->dtype == TFS_DTYPE_BOOL)   /* a bool byte other than 0/1 would be UB to load */
            for (int64_t i = 0; i < e->size; i++)
                dst[i] = dst[i] != 0;
    }
    *out = t;
    t    = NULL;
    tfs_status_clear(st);
fail:
    if (fd >= 0)
        close(fd);
    tfs_free(buf);
    tfs_tensor_unref(t);
    return rc;
}
