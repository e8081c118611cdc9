/* IDX files, the format of MNIST and Fashion-MNIST (yann.lecun.com/exdb/mnist):
 *
 *     byte 0, 1   0x00 0x00
 *     byte 2      element type: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
 *                 0x0E float64
 *     byte 3      number of dimensions d
 *     d x uint32  dimensions, big-endian
 *     data        the elements in row-major order, big-endian
 *
 * The reader takes plain or gzip files (tfs_data_file_read), checks that the data is exactly
 * as long as the dimensions say, and hands the file's own buffer to the tensor (moved down over
 * the header and byte-swapped in place), so a 47 MB image file is not copied again.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

static enum tfs_dtype idx_dtype(uint8_t type)
{
    switch (type) {
    case 0x08: return TFS_DTYPE_UINT8;
    case 0x09: return TFS_DTYPE_INT8;
    case 0x0B: return TFS_DTYPE_INT16;
    case 0x0C: return TFS_DTYPE_INT32;
    case 0x0D: return TFS_DTYPE_FLOAT;
    case 0x0E: return TFS_DTYPE_DOUBLE;
    default:   return TFS_DTYPE_INVALID;
    }
}

static uint8_t idx_type(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_UINT8:  return 0x08;
    case TFS_DTYPE_INT8:   return 0x09;
    case TFS_DTYPE_INT16:  return 0x0B;
    case TFS_DTYPE_INT32:  return 0x0C;
    case TFS_DTYPE_FLOAT:  return 0x0D;
    case TFS_DTYPE_DOUBLE: return 0x0E;
    default:               return 0;
    }
}

/* Reverses the bytes of each of n elements of `size` bytes (big-endian <-> little-endian). */
static void swap_elements(uint8_t *p, size_t n, size_t size)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    (void)p, (void)n, (void)size;   /* IDX is big-endian already */
#else
    for (size_t i = 0; i < n; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
#endif
}

enum tfs_code tfs_idx_read(const char *path, tfs_tensor **out, tfs_status *st)
{
    uint8_t      *buf = NULL;
    size_t        n;
    enum tfs_code code;
    *out = NULL;
    if ((code = tfs_data_file_read(path, (void **)&buf, &n, st)) != TFS_OK)
        return code;
    if (n < 4) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: IDX: %zu bytes, too short for the 4-byte magic",
                       path, n);
        goto fail;
    }
    enum tfs_dtype dt = idx_dtype(buf[2]);
    if (buf[0] != 0 || buf[1] != 0 || dt == TFS_DTYPE_INVALID) {
        code = TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: IDX: bad magic %02x %02x %02x %02x (want 00 00, then a type 08 09 0b "
                       "0c 0d 0e)", path, buf[0], buf[1], buf[2], buf[3]);
        goto fail;
    }
    int rank = buf[3];
    if (rank < 1 || rank > TFS_MAX_RANK) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: IDX: %d dimensions (byte 3), want 1 to %d", path,
                       rank, TFS_MAX_RANK);
        goto fail;
    }
    size_t hdr = 4 + 4 * (size_t)rank;
    if (n < hdr) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: IDX: truncated header (%zu bytes, want %zu)", path,
                       n, hdr);
        goto fail;
    }
    int64_t  dims[TFS_MAX_RANK];
    size_t   esize = tfs_dtype_size(dt), data = n - hdr;
    uint64_t want = esize;   /* bytes the dims call for; each dim < 2^32, checked stepwise */
    for (int i = 0; i < rank; i++) {
        const uint8_t *p = buf + 4 + 4 * i;
        dims[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
                            p[3]);
        if (want != 0 && (uint64_t)dims[i] > (uint64_t)data / want + 1)
            want = UINT64_MAX;   /* far more than the file: the check below reports it */
        else if (want != UINT64_MAX)
            want *= (uint64_t)dims[i];
    }
    if (want != data) {
        char shape[160];
        tfs_shape_str(rank, dims, shape, sizeof shape);
        if (want == UINT64_MAX)
            code = TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: IDX: dimensions %s need more data than the file's %zu bytes", path,
                           shape, data);
        else
            code = TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: IDX: dimensions %s of %zu-byte %s need %llu bytes of data after "
                           "the %zu-byte header, the file has %zu (%s)", path, shape, esize,
                           tfs_dtype_short_name(dt), (unsigned long long)want, hdr, data,
                           want > data ? "truncated" : "trailing bytes");
        goto fail;
    }
    memmove(buf, buf + hdr, data);   /* aligns the elements too: tfs_malloc'ed memory is */
    swap_elements(buf, data / esize, esize);
    if ((code = tfs_tensor_wrap(dt, rank, dims, buf, tfs__free_data, NULL, out, st)) != TFS_OK)
        goto fail;
    return TFS_OK;
fail:
    tfs_free(buf);
    return code;
}

enum tfs_code tfs_idx_write(const char *path, const tfs_tensor *t, tfs_status *st)
{
    uint8_t        *copy = NULL;
    tfs_atomic_file af = {0};
    enum tfs_code   code;
    uint8_t       type = idx_type(t->dtype);
    if (!type)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: IDX cannot hold %s tensors", path,
                       tfs_dtype_name(t->dtype));
    if (t->rank < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: IDX cannot hold a scalar", path);
    uint8_t hdr[4 + 4 * TFS_MAX_RANK] = {0, 0, type, (uint8_t)t->rank};
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] > (int64_t)UINT32_MAX)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: dim %d (%lld) exceeds IDX's uint32",
                           path, i, (long long)t->dims[i]);
        for (int b = 0; b < 4; b++)
            hdr[4 + 4 * i + b] = (uint8_t)((uint64_t)t->dims[i] >> (24 - 8 * b));
    }
    if (!(copy = tfs_malloc(t->nbytes ? t->nbytes : 1))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", path);
        goto fail;
    }
    if (t->nbytes)
        memcpy(copy, t->data, t->nbytes);
    swap_elements(copy, (size_t)t->nelem, tfs_dtype_size(t->dtype));
    if ((code = tfs_atomic_file_open(path, &af, st)) != TFS_OK)
        goto fail;
    errno = 0;
    if (fwrite(hdr, 1, 4 + 4 * (size_t)t->rank, af.f) != 4 + 4 * (size_t)t->rank ||
        fwrite(copy, 1, t->nbytes, af.f) != t->nbytes) {
        int err = errno ? errno : EIO;
        code = TFS_ERR(st, tfs_code_from_errno(err), "%s: write failed: %s", path, strerror(err));
        goto fail;
    }
    code = tfs_atomic_file_commit(&af, st);
fail:
    tfs_atomic_file_abort(&af);
    tfs_free(copy);
    return code;
}
