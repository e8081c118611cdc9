/* TFRecord files (tensorflow/core/lib/io/record_reader.cc, record_writer.cc), uncompressed:
 * a sequence of records, each
 *     uint64 LE  length
 *     uint32 LE  masked crc32c of the 8 length bytes
 *     length bytes of data
 *     uint32 LE  masked crc32c of the data
 * TF Serving keeps its warmup requests in one (assets.extra/tf_serving_warmup_requests); the
 * trainer reads datasets of tf.Example from them. The reader streams: it holds one record at a time in a
 * buffer it reuses, checks both CRCs, and never allocates more than the bytes left in the file (a
 * corrupt length cannot make it allocate gigabytes) nor more than TFS_TFRECORD_MAX_RECORD_BYTES.
 * Its end-of-file convention is TensorFlow's: OUT_OF_RANGE after the last record, DATA_LOSS for a
 * record cut short.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "savedmodel/bundle-impl.h"
#include "savedmodel/savedmodel.h"

#define HEADER_BYTES 12   /* length + its crc */
#define FOOTER_BYTES 4    /* data crc */

struct tfs_tfrecord_reader {
    FILE    *f;
    char    *path;
    uint64_t offset;      /* of the next record */
    uint64_t file_size;
    int64_t  index;       /* of the next record, 0-based */
    uint8_t *buf;
    size_t   cap;
};

struct tfs_tfrecord_writer {
    FILE *f;
    char *path;
    int   err;   /* errno of the first failed write or flush: the file is incomplete */
};

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void store_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- reader --------------------------------------------------------------------------------- */

enum tfs_code tfs_tfrecord_reader_open(const char *path, tfs_tfrecord_reader **out, tfs_status *st)
{
    tfs_tfrecord_reader *r = NULL;
    struct stat          sb;

    *out = NULL;
    if (!(r = tfs_calloc(1, sizeof *r)) || !(r->path = tfs_strdup(path))) {
        TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory opening %s", path);
        goto fail;
    }
    if (!(r->f = fopen(path, "rb"))) {
        int err = errno;
        TFS_ERR(st, tfs_code_from_errno(err), "%s: cannot open: %s", path, strerror(err));
        goto fail;
    }
    if (fstat(fileno(r->f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: not a regular file", path);
        goto fail;
    }
    r->file_size = (uint64_t)sb.st_size;
    *out = r;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_tfrecord_reader_close(r);
    return st ? st->code : TFS_UNKNOWN;
}

/* Reads exactly n bytes at the current position; false on a short read. */
static bool read_exact(tfs_tfrecord_reader *r, void *dst, size_t n)
{
    return fread(dst, 1, n, r->f) == n;
}

enum tfs_code tfs_tfrecord_reader_next(tfs_tfrecord_reader *r, const uint8_t **data, size_t *len,
                                       tfs_status *st)
{
    uint8_t  head[HEADER_BYTES], foot[FOOTER_BYTES];
    uint64_t at = r->offset, left = r->file_size > at ? r->file_size - at : 0;

    *data = NULL;
    *len = 0;
    if (left == 0)   /* the size is the one seen at open: a file still being written ends there */
        return TFS_ERR(st, TFS_OUT_OF_RANGE, "%s: end of file after %lld records", r->path,
                       (long long)r->index);
    if (left < HEADER_BYTES || !read_exact(r, head, HEADER_BYTES))
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: record %lld: truncated record header at offset %llu",
                       r->path, (long long)r->index, (unsigned long long)at);
    if (tfs__crc_mask(tfs__crc32c(head, 8)) != load_le32(head + 8))
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: record %lld: corrupted record at offset %llu (length crc mismatch)",
                       r->path, (long long)r->index, (unsigned long long)at);
    uint64_t n = load_le64(head);
    left = r->file_size > at + HEADER_BYTES ? r->file_size - at - HEADER_BYTES : 0;
    if (n > TFS_TFRECORD_MAX_RECORD_BYTES)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: record %lld: length %llu at offset %llu exceeds the limit of %zu bytes",
                       r->path, (long long)r->index, (unsigned long long)n,
                       (unsigned long long)at, (size_t)TFS_TFRECORD_MAX_RECORD_BYTES);
    if (n > left || left - n < FOOTER_BYTES)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: record %lld: truncated record at offset %llu (length %llu, %llu bytes "
                       "left)", r->path, (long long)r->index, (unsigned long long)at,
                       (unsigned long long)n, (unsigned long long)left);
    if (n + 1 > r->cap) {
        uint8_t *b = tfs_realloc(r->buf, (size_t)n + 1);
        if (!b)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: record %lld: out of memory for %llu "
                           "bytes", r->path, (long long)r->index, (unsigned long long)n);
        r->buf = b;
        r->cap = (size_t)n + 1;
    }
    if (!read_exact(r, r->buf, (size_t)n) || !read_exact(r, foot, FOOTER_BYTES))
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: record %lld: truncated record at offset %llu",
                       r->path, (long long)r->index, (unsigned long long)at);
    if (tfs__crc_mask(tfs__crc32c(r->buf, (size_t)n)) != load_le32(foot))
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: record %lld: corrupted record at offset %llu (data crc mismatch)",
                       r->path, (long long)r->index, (unsigned long long)at);
    r->buf[n] = 0;
    r->offset = at + HEADER_BYTES + n + FOOTER_BYTES;
    r->index++;
    *data = r->buf;
    *len = (size_t)n;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_tfrecord_reader_close(tfs_tfrecord_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    tfs_free(r->buf);
    tfs_free(r->path);
    tfs_free(r);
}

/* ---- writer --------------------------------------------------------------------------------- */

enum tfs_code tfs_tfrecord_writer_open(const char *path, tfs_tfrecord_writer **out, tfs_status *st)
{
    tfs_tfrecord_writer *w = NULL;

    *out = NULL;
    if (!(w = tfs_calloc(1, sizeof *w)) || !(w->path = tfs_strdup(path))) {
        tfs_free(w);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating %s", path);
    }
    if (!(w->f = fopen(path, "wb"))) {
        int err = errno;
        tfs_free(w->path);
        tfs_free(w);
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: cannot create: %s", path,
                       strerror(err));
    }
    *out = w;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_tfrecord_writer_write(tfs_tfrecord_writer *w, const void *data, size_t len,
                                        tfs_status *st)
{
    uint8_t head[HEADER_BYTES], foot[FOOTER_BYTES];

    if (len > TFS_TFRECORD_MAX_RECORD_BYTES)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: a record of %zu bytes exceeds the limit "
                       "of %zu bytes", w->path, len, (size_t)TFS_TFRECORD_MAX_RECORD_BYTES);
    if (w->err)
        return TFS_ERR(st, tfs_code_from_errno(w->err), "%s: an earlier write failed: %s", w->path,
                       strerror(w->err));
    store_le64(head, (uint64_t)len);
    store_le32(head + 8, tfs__crc_mask(tfs__crc32c(head, 8)));
    store_le32(foot, tfs__crc_mask(tfs__crc32c(data, len)));
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head ||
        (len && fwrite(data, 1, len, w->f) != len) ||
        fwrite(foot, 1, sizeof foot, w->f) != sizeof foot) {
        int err = errno;
        w->err  = err;
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: write failed: %s",
                       w->path, strerror(err));
    }
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_tfrecord_writer_flush(tfs_tfrecord_writer *w, tfs_status *st)
{
    if (w->err)
        return TFS_ERR(st, tfs_code_from_errno(w->err), "%s: an earlier write failed: %s", w->path,
                       strerror(w->err));
    if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0) {
        int err = errno;
        w->err  = err;
        return TFS_ERR(st, tfs_code_from_errno(err), "%s: write failed: %s",
                       w->path, strerror(err));
    }
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_tfrecord_writer_close(tfs_tfrecord_writer *w, tfs_status *st)
{
    enum tfs_code code = TFS_OK;
    if (!w)
        return TFS_OK;
    int ferr = ferror(w->f) ? (w->err ? w->err : EIO) : w->err;
    if (fclose(w->f) != 0) {
        int err = errno;
        code = TFS_ERR(st, tfs_code_from_errno(err), "%s: close failed: %s",
                       w->path, strerror(err));
    } else if (ferr) {
        /* stdio may have dropped the buffer that failed: what was written is incomplete. */
        code = TFS_ERR(st, tfs_code_from_errno(ferr), "%s: an earlier write failed: %s", w->path,
                       strerror(ferr));
    } else {
        tfs_status_clear(st);
    }
    tfs_free(w->path);
    tfs_free(w);
    return code;
}
