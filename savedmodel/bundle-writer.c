/* TensorBundle writer: produces <prefix>.index and <prefix>.data-00000-of-00001 byte-compatible
 * with TensorFlow's BundleWriter (one shard, no alignment padding, uncompressed table blocks), so
 * TensorFlow can restore what we save and our reader (bundle.c) can check what we write.
 *
 * DESIGN: tensor bytes are appended to a temporary data file as tensors are added, while their
 * serialized BundleEntryProtos are kept in memory, sorted by key (binary-search insertion, which
 * also finds duplicates). finish() writes the index (header under key "", then the entries) to a
 * temporary file, then renames the data file and the index into place, in that order, so an index
 * that exists always describes complete data (both through runtime/file.h's atomic replacement,
 * which fsyncs each file and the directory). free() before finish removes the temporaries.
 * The header is BundleHeaderProto{num_shards 1, endianness LITTLE, version{producer 1}}.
 * DT_STRING layout: varint64 lengths, masked crc32c of the lengths (each taken as a little-endian
 * uint32, or uint64 when larger), then the bytes; the entry crc covers the lengths in that
 * uint32/uint64 form, the 4 checksum bytes and the string bytes (TensorFlow's WriteStringTensor).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "savedmodel/bundle-impl.h"
#include "tensorflow/core/protobuf/tensor_bundle.pb-c.h"

typedef struct wentry {
    char    *key;
    uint8_t *proto;   /* serialized BundleEntryProto */
    size_t   proto_len;
} wentry;

struct tfs_bundle_writer {
    char    *prefix;
    char    *index_path;
    tfs_atomic_file data;   /* data.f: the temporary data file, until finish commits it */
    int64_t  offset;   /* bytes written to the data file */
    wentry  *entries;  /* sorted by key (strcmp) */
    int      count, cap;
    bool     finished;
    bool     data_renamed;   /* finish got half way: the data file is in place */
    bool     broken;   /* a write failed: the data file's contents are unknown */
};

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static char *path_with(const char *prefix, const char *suffix)
{
    size_t a = strlen(prefix), b = strlen(suffix);
    char  *p = tfs_malloc(a + b + 1);
    if (p) {
        memcpy(p, prefix, a);
        memcpy(p + a, suffix, b + 1);
    }
    return p;
}

enum tfs_code tfs_bundle_writer_new(const char *prefix, tfs_bundle_writer **out, tfs_status *st)
{
    tfs_bundle_writer *w = NULL;
    char              *data_path = NULL;
    enum tfs_code      rc;

    *out = NULL;
    if (!host_little_endian())
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: bundles are written on little-endian hosts only",
                       prefix);
    w = tfs_calloc(1, sizeof *w);
    if (!w || !(w->prefix = tfs_strdup(prefix)) ||
        !(data_path = path_with(prefix, ".data-00000-of-00001")) ||
        !(w->index_path = path_with(prefix, ".index"))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", prefix);
        goto fail;
    }
    if ((rc = tfs_atomic_file_open(data_path, &w->data, st)) != TFS_OK)
        goto fail;
    tfs_free(data_path);
    *out = w;
    return TFS_OK;
fail:
    tfs_free(data_path);
    tfs_bundle_writer_free(w);
    return rc;
}

/* Appends n bytes to the data file, extending *crc. */
static enum tfs_code write_data(tfs_bundle_writer *w, const void *p, size_t n, uint32_t *crc,
                                tfs_status *st)
{
    if (n == 0)
        return TFS_OK;
    errno = 0;
    if (fwrite(p, 1, n, w->data.f) != n) {
        int err = errno ? errno : EIO;
        w->broken = true;
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: write failed: %s", w->data.tmp,
                       strerror(err));
    }
    *crc = tfs__crc32c_extend(*crc, p, n);
    w->offset += (int64_t)n;
    return TFS_OK;
}

static enum tfs_code write_strings(tfs_bundle_writer *w, const tfs_tensor *t, uint32_t *crc,
                                   tfs_status *st)
{
    const tfs_string *s    = tfs_tensor_strings((tfs_tensor *)t);
    uint8_t          *lens = NULL;
    size_t            nl   = 0;
    uint32_t          lcrc = 0, ignored = 0;
    enum tfs_code     rc   = TFS_OK;

    lens = tfs_malloc((size_t)t->nelem * 10 + 1);
    if (!lens)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", w->prefix);
    for (int64_t i = 0; i < t->nelem; i++) {
        uint64_t v = s[i].len;
        uint8_t  le[8];
        int      nb = v <= UINT32_MAX ? 4 : 8;
        for (int k = 0; k < nb; k++)
            le[k] = (uint8_t)(v >> (8 * k));
        lcrc = tfs__crc32c_extend(lcrc, le, (size_t)nb);
        nl += tfs_varint_put(lens + nl, v);
    }
    uint32_t m = tfs__crc_mask(lcrc);
    uint8_t  mb[4] = {(uint8_t)m, (uint8_t)(m >> 8), (uint8_t)(m >> 16), (uint8_t)(m >> 24)};
    /* The entry crc starts from the length crc, not from the varint bytes. */
    *crc = tfs__crc32c_extend(lcrc, mb, 4);
    rc = write_data(w, lens, nl, &ignored, st);
    if (rc == TFS_OK)
        rc = write_data(w, mb, 4, &ignored, st);
    for (int64_t i = 0; rc == TFS_OK && i < t->nelem; i++)
        rc = write_data(w, s[i].data, s[i].len, crc, st);
    tfs_free(lens);
    return rc;
}

enum tfs_code tfs_bundle_writer_add(tfs_bundle_writer *w, const char *key, const tfs_tensor *t,
                                    tfs_status *st)
{
    Tensorflow__BundleEntryProto      pe    = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
    Tensorflow__TensorShapeProto      shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorShapeProto__Dim dims[TFS_MAX_RANK];
    Tensorflow__TensorShapeProto__Dim *dimp[TFS_MAX_RANK];
    wentry                             e   = {0};
    uint32_t                           crc = 0;
    enum tfs_code                      rc;

    if (w->finished || w->broken)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: writer is %s", w->prefix,
                       w->finished ? "finished" : "broken by an earlier write error");
    if (!key || !key[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: tensor keys must be non-empty", w->prefix);
    size_t esize = tfs_dtype_size(t->dtype);
    if (t->dtype >= TFS_DTYPE_REF_OFFSET || esize == 0 || t->dtype == TFS_DTYPE_RESOURCE || t->dtype == TFS_DTYPE_VARIANT)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: tensor '%s': dtype %s cannot be saved",
                       w->prefix, key, tfs_dtype_name(t->dtype));

    /* Where the key goes, and whether it is already there. */
    int lo = 0, hi = w->count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c   = strcmp(w->entries[mid].key, key);
        if (c == 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: tensor '%s' added twice", w->prefix, key);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (w->count == w->cap) {
        int     ncap = w->cap ? w->cap * 2 : 16;
        wentry *ne   = tfs_realloc(w->entries, (size_t)ncap * sizeof *ne);
        if (!ne)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", w->prefix);
        w->entries = ne;
        w->cap     = ncap;
    }

    int64_t start = w->offset;
    if (t->dtype == TFS_DTYPE_STRING)
        rc = write_strings(w, t, &crc, st);
    else
        rc = write_data(w, t->data, t->nbytes, &crc, st);
    if (rc != TFS_OK)
        goto fail;

    for (int i = 0; i < t->rank; i++) {
        tensorflow__tensor_shape_proto__dim__init(&dims[i]);
        dims[i].size = t->dims[i];
        dimp[i]      = &dims[i];
    }
    shape.n_dim  = (size_t)t->rank;
    shape.dim    = dimp;
    pe.dtype     = (Tensorflow__DataType)t->dtype;
    pe.shape     = &shape;
    pe.shard_id  = 0;
    pe.offset    = start;
    pe.size      = w->offset - start;
    pe.crc32c    = tfs__crc_mask(crc);
    e.proto_len  = tensorflow__bundle_entry_proto__get_packed_size(&pe);
    e.proto      = tfs_malloc(e.proto_len ? e.proto_len : 1);
    e.key        = tfs_strdup(key);
    if (!e.proto || !e.key) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", w->prefix);
        goto fail;
    }
    tensorflow__bundle_entry_proto__pack(&pe, e.proto);
    memmove(&w->entries[lo + 1], &w->entries[lo], (size_t)(w->count - lo) * sizeof *w->entries);
    w->entries[lo] = e;
    w->count++;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_free(e.proto);
    tfs_free(e.key);
    return rc;
}

enum tfs_code tfs_bundle_writer_finish(tfs_bundle_writer *w, tfs_status *st)
{
    Tensorflow__BundleHeaderProto h   = TENSORFLOW__BUNDLE_HEADER_PROTO__INIT;
    Tensorflow__VersionDef        ver = TENSORFLOW__VERSION_DEF__INIT;
    tfs__table_entry             *te  = NULL;
    uint8_t                      *hdr = NULL, *table = NULL;
    size_t                        table_len = 0;
    enum tfs_code                 rc;

    if (w->finished || w->broken)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: writer is %s", w->prefix,
                       w->finished ? "finished" : "broken by an earlier write error");
    ver.producer  = 1;
    h.num_shards  = 1;
    h.endianness  = TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE;
    h.version     = &ver;
    size_t hlen   = tensorflow__bundle_header_proto__get_packed_size(&h);
    hdr = tfs_malloc(hlen ? hlen : 1);
    te  = tfs_calloc((size_t)w->count + 1, sizeof *te);
    if (!hdr || !te) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", w->prefix);
        goto fail;
    }
    tensorflow__bundle_header_proto__pack(&h, hdr);
    te[0] = (tfs__table_entry){"", 0, hdr, hlen};
    for (int i = 0; i < w->count; i++)
        te[i + 1] = (tfs__table_entry){w->entries[i].key, strlen(w->entries[i].key),
                                       w->entries[i].proto, w->entries[i].proto_len};
    rc = tfs__table_build(te, w->count + 1, &table, &table_len, st);
    if (rc != TFS_OK)
        goto fail;

    /* The data first, so that a visible index always has its data. */
    if ((rc = tfs_atomic_file_commit(&w->data, st)) != TFS_OK)
        goto fail;
    w->data_renamed = true;
    if ((rc = tfs_atomic_file_write(w->index_path, table, table_len, st)) != TFS_OK)
        goto fail;
    w->finished = true;
    tfs_status_clear(st);
fail:
    if (rc != TFS_OK)
        w->broken = true;
    tfs_free(table);
    tfs_free(te);
    tfs_free(hdr);
    return rc;
}

void tfs_bundle_writer_free(tfs_bundle_writer *w)
{
    if (!w)
        return;
    tfs_atomic_file_abort(&w->data);
    if (!w->finished && w->data_renamed)
        unlink(w->data.path);
    for (int i = 0; i < w->count; i++) {
        tfs_free(w->entries[i].key);
        tfs_free(w->entries[i].proto);
    }
    tfs_free(w->entries);
    tfs_free(w->prefix);
    tfs_free(w->index_path);
    tfs_free(w);
}
