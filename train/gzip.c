/* gzip files (RFC 1952) through zlib, and whole-file reading for the dataset readers (which take
 * plain or gzip files alike).
 *
 * zlib's inflate with a gzip wrapper (windowBits 16 + 15) decodes one member: it parses the header
 * (FEXTRA, FNAME, FCOMMENT, FHCRC with its CRC checked) and checks the member's CRC-32 and ISIZE.
 * A file may hold several members, whose data is concatenated as gzip -d does, so the loop below
 * resets the stream after each member that more input follows. Zero bytes after the last member
 * are padding some tools add and are accepted; anything else is an error naming its offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

/* ---- gzip ----------------------------------------------------------------------------------- */

/* zlib allocates through these so its state and window are counted with the rest of the heap and
 * fail when the fault-injection hook says so (inflate then returns Z_MEM_ERROR). */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return tfs_calloc(items, size);
}

static void z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    tfs_free(p);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool gzip_magic(const uint8_t *p, size_t n)
{
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

/* zlib counts in uInt: inputs and outputs over 4 GiB go in pieces. */
static uInt z_chunk(size_t n)
{
    return n > UINT_MAX ? UINT_MAX : (uInt)n;
}

enum tfs_code tfs_gunzip(const char *name, const void *in_, size_t n, size_t max_out, void **out,
                         size_t *out_len, tfs_status *st)
{
    const uint8_t *in = in_;
    uint8_t       *buf = NULL;
    size_t         cap = 8, len = 0, pos = 0;
    enum tfs_code  code;
    z_stream       zs;
    bool           zs_live = false;
    int            member = 1;
    char           what[512];
    *out = NULL;
    *out_len = 0;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = z_alloc;
    zs.zfree = z_free;
    if (n == 0) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: empty file, not in gzip format", name);
        goto fail;
    }
    if (!gzip_magic(in, n)) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: not in gzip format (byte 0: %02x %02x)", name,
                       in[0], n > 1 ? in[1] : 0);
        goto fail;
    }
    /* For a one-member file, ISIZE (the last 4 bytes) is the output size: allocate it once when
     * deflate could produce it from this input (at most 1032 output bytes per input byte). The
     * buffer exists even for empty output, so a successful result is never NULL. */
    if (n >= 18) {
        size_t isize = le32(in + n - 4);
        if (isize <= max_out && isize / 1032 <= n)
            cap = isize + 8;
    }
    if (!(buf = tfs_malloc(cap))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory (%zu bytes)", name, cap);
        goto fail;
    }
    int zr = inflateInit2(&zs, 16 + MAX_WBITS);
    if (zr != Z_OK) {
        code = TFS_ERR(st, zr == Z_MEM_ERROR ? TFS_RESOURCE_EXHAUSTED : TFS_INTERNAL,
                       "%s: cannot start zlib's inflate: %s", name, zs.msg ? zs.msg : zError(zr));
        goto fail;
    }
    zs_live = true;
    snprintf(what, sizeof what, "%s", name);
    for (;;) {
        /* The buffer may grow to max_out + 1 bytes: one byte over the limit proves it exceeded. */
        if (len == cap) {
            size_t ncap = cap < ((size_t)1 << 16) ? (size_t)1 << 16 : cap;
            ncap = ncap > max_out / 2 ? max_out + 1 : ncap * 2;
            uint8_t *p = tfs_realloc(buf, ncap);
            if (!p) {
                code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory (%zu bytes)", what,
                               ncap);
                goto fail;
            }
            buf = p;
            cap = ncap;
        }
        uInt in_given = z_chunk(n - pos), out_given = z_chunk(cap - len);
        zs.next_in = (Bytef *)(uintptr_t)(in + pos);   /* zlib never writes its input */
        zs.avail_in = in_given;
        zs.next_out = buf + len;
        zs.avail_out = out_given;
        zr = inflate(&zs, Z_NO_FLUSH);
        pos += in_given - zs.avail_in;
        len += out_given - zs.avail_out;
        if (len > max_out) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED,
                           "%s: deflate: output exceeds the limit of %zu bytes (compressed byte "
                           "%zu)", what, max_out, pos);
            goto fail;
        }
        if (zr == Z_OK)
            continue;
        if (zr == Z_STREAM_END) {
            size_t z = pos;
            while (z < n && in[z] == 0)
                z++;
            if (z == n)
                break;   /* the end, or zero padding */
            if (!gzip_magic(in + pos, n - pos)) {
                code = TFS_ERR(st, TFS_DATA_LOSS,
                               "%s: trailing garbage after gzip member %d (byte %zu)", name,
                               member, pos);
                goto fail;
            }
            member++;
            snprintf(what, sizeof what, "%s: gzip member %d", name, member);
            if ((zr = inflateReset(&zs)) != Z_OK) {
                code = TFS_ERR(st, TFS_INTERNAL, "%s: inflateReset: %s", what, zError(zr));
                goto fail;
            }
            continue;
        }
        if (zr == Z_MEM_ERROR) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory in zlib's inflate",
                           what);
        } else if (zr == Z_BUF_ERROR && pos == n) {
            /* No progress with room to write: the input ran out inside the member. */
            code = TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: truncated gzip data (the file ends at byte %zu inside the "
                           "compressed stream, its header or its trailer)", what, n);
        } else {
            /* Z_DATA_ERROR: zlib's message says what (bad header flags, invalid code, distance
             * too far back, incorrect data check for the CRC-32, incorrect length check). */
            code = TFS_ERR(st, TFS_DATA_LOSS, "%s: corrupt gzip data: %s (compressed byte %zu)",
                           what, zs.msg ? zs.msg : zError(zr), pos);
        }
        goto fail;
    }
    inflateEnd(&zs);
    *out = buf;
    *out_len = len;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    if (zs_live)
        inflateEnd(&zs);
    tfs_free(buf);
    return code;
}

/* ---- byte buffers and whole files ----------------------------------------------------------- */

static bool reserve(tfs__bytes *b, size_t n)
{
    if (b->cap - b->len >= n)
        return true;
    if (n > SIZE_MAX / 2 - b->len)
        return false;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    uint8_t *d = tfs_realloc(b->data, cap);
    if (!d)
        return false;
    b->data = d;
    b->cap = cap;
    return true;
}

bool tfs__bytes_append(tfs__bytes *b, const void *data, size_t n)
{
    if (!reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    return true;
}

bool tfs__bytes_printf(tfs__bytes *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n + 1))
        return false;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n + 1;
    return true;
}

void tfs__free_data(void *data, void *arg)
{
    (void)arg;
    tfs_free(data);
}

static enum tfs_code errno_code(int err)
{
    switch (err) {
    case ENOENT: case ENOTDIR: return TFS_NOT_FOUND;
    case EACCES: case EPERM:   return TFS_PERMISSION_DENIED;
    case ENOMEM:               return TFS_RESOURCE_EXHAUSTED;
    default:                   return TFS_UNKNOWN;
    }
}

enum tfs_code tfs_data_file_read(const char *path, void **out, size_t *len, tfs_status *st)
{
    uint8_t      *buf = NULL;
    enum tfs_code code;
    struct stat   sb;
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return TFS_ERR(st, errno_code(errno), "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        code = TFS_ERR(st, errno_code(errno), "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        code = TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s: not a regular file", path);
        goto fail;
    }
    if ((uint64_t)sb.st_size > TFS_DATA_MAX_BYTES) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: %lld bytes, over the limit of %zu", path,
                       (long long)sb.st_size, TFS_DATA_MAX_BYTES);
        goto fail;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    if (!(buf = tfs_malloc(n ? n : 1))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory (%zu bytes)", path, n);
        goto fail;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            code = TFS_ERR(st, errno_code(errno), "%s: read error: %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0) {
            code = TFS_ERR(st, TFS_DATA_LOSS, "%s: file shrank while reading (%zu of %zu bytes)",
                           path, got, n);
            goto fail;
        }
        got += (size_t)r;
    }
    close(fd);
    fd = -1;
    size_t plen = strlen(path);
    bool   gz_name = plen >= 3 && strcmp(path + plen - 3, ".gz") == 0;
    if (n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
        void  *plain;
        size_t plain_len;
        code = tfs_gunzip(path, buf, n, TFS_DATA_MAX_BYTES, &plain, &plain_len, st);
        tfs_free(buf);
        buf = NULL;
        if (code != TFS_OK)
            goto fail;
        *out = plain;
        *len = plain_len;
        return TFS_OK;
    }
    if (gz_name) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: not in gzip format (no gzip magic 1f 8b)", path);
        goto fail;
    }
    *out = buf;
    *len = n;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    if (fd >= 0)
        close(fd);
    tfs_free(buf);
    return code;
}
