/* The gzip container (RFC 1952) around inflate.c, gzip's CRC-32, and whole-file reading for the
 * dataset readers (which take plain or gzip files alike).
 *
 * A gzip member is a 10-byte header (1f 8b, method 8 = deflate, flags, mtime, xfl, os), the
 * optional fields its flags announce (FEXTRA: 2-byte length + data; FNAME, FCOMMENT: zero-
 * terminated; FHCRC: low 16 bits of the CRC-32 of the header so far), the deflate stream, then the
 * CRC-32 and the length mod 2^32 (ISIZE) of the member's data, little-endian. A file may hold
 * several members (their data is concatenated, as gzip -d does); zero bytes after the last member
 * are padding some tools add and are accepted, anything else is an error.
 *
 * The CRC uses slicing-by-8 (eight 256-entry tables, eight bytes per step) so that checking the
 * CRC of a 47 MB file costs little next to inflating it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

/* ---- CRC-32 --------------------------------------------------------------------------------- */

static uint32_t       crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_tab[0][i] = c;
    }
    /* Table k: the CRC of byte i followed by k zero bytes. */
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++)
            crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

uint32_t tfs__crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    uint32_t       c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
            crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
    }
    while (n--)
        c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
    return ~c;
}

/* ---- gzip ----------------------------------------------------------------------------------- */

enum { FTEXT = 1, FHCRC = 2, FEXTRA = 4, FNAME = 8, FCOMMENT = 16, FRESERVED = 0xe0 };

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Parses the member header at in[at]; *data_at receives the offset of the deflate stream. */
static enum tfs_code header(const char *name, const uint8_t *in, size_t n, size_t at, int member,
                            size_t *data_at, tfs_status *st)
{
    size_t p = at;
    if (n - at < 10)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: gzip member %d: truncated header (byte %zu)%s", name,
                       member, at, member > 1 ? ", or trailing garbage" : "");
    if ((in[p] != 0x1f || in[p + 1] != 0x8b) && member > 1)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: trailing garbage after gzip member %d (byte %zu)",
                       name, member - 1, at);
    if (in[p] != 0x1f || in[p + 1] != 0x8b)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: not in gzip format (byte %zu: %02x %02x)", name, at,
                       in[p], in[p + 1]);
    if (in[p + 2] != 8)
        return TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: gzip member %d: unknown compression method %u (only 8, deflate)", name,
                       member, in[p + 2]);
    unsigned flg = in[p + 3];
    if (flg & FRESERVED)
        return TFS_ERR(st, TFS_DATA_LOSS, "%s: gzip member %d: reserved header flags 0x%02x set",
                       name, member, flg & FRESERVED);
    p += 10;
    if (flg & FEXTRA) {
        if (n - p < 2)
            goto trunc;
        size_t xlen = in[p] | (size_t)in[p + 1] << 8;
        if (n - p - 2 < xlen)
            goto trunc;
        p += 2 + xlen;
    }
    for (unsigned f = FNAME; f <= FCOMMENT; f <<= 1) {
        if (!(flg & f))
            continue;
        const uint8_t *z = memchr(in + p, 0, n - p);
        if (!z)
            goto trunc;
        p = (size_t)(z - in) + 1;
    }
    if (flg & FHCRC) {
        if (n - p < 2)
            goto trunc;
        uint32_t want = in[p] | (uint32_t)in[p + 1] << 8;
        uint32_t got = tfs__crc32(0, in + at, p - at) & 0xffff;
        if (got != want)
            return TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: gzip member %d: header CRC mismatch (stored %04x, computed %04x)",
                           name, member, want, got);
        p += 2;
    }
    *data_at = p;
    return TFS_OK;
trunc:
    return TFS_ERR(st, TFS_DATA_LOSS, "%s: gzip member %d: truncated header (byte %zu)", name,
                   member, at);
}

enum tfs_code tfs_gunzip(const char *name, const void *in_, size_t n, size_t max_out, void **out,
                         size_t *out_len, tfs_status *st)
{
    const uint8_t *in = in_;
    tfs__bytes     o = {NULL, 0, 0};
    enum tfs_code  code;
    size_t         at = 0;
    *out = NULL;
    *out_len = 0;
    if (n == 0) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: empty file, not in gzip format", name);
        goto fail;
    }
    /* For a one-member file, ISIZE (the last 4 bytes) is the output size: allocate it once when
     * deflate could produce it from this input (at most 1032 output bytes per input byte). The
     * buffer exists even for empty output, so pointer arithmetic on it is always defined. */
    o.cap = 8;
    if (n >= 18) {
        size_t isize = le32(in + n - 4);
        if (isize <= max_out && isize / 1032 <= n)
            o.cap = isize + 8;
    }
    if (!(o.data = tfs_malloc(o.cap))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory (%zu bytes)", name, o.cap);
        goto fail;
    }
    for (int member = 1; at < n; member++) {
        if (member > 1) {
            size_t z = at;
            while (z < n && in[z] == 0)
                z++;
            if (z == n)
                break;   /* zero padding */
        }
        size_t data_at = 0, used = 0, start = o.len;
        if ((code = header(name, in, n, at, member, &data_at, st)) != TFS_OK)
            goto fail;
        char what[512];
        snprintf(what, sizeof what, member > 1 ? "%s: gzip member %d" : "%s", name, member);
        if ((code = tfs__inflate(in + data_at, n - data_at, data_at, &o, max_out, &used, what,
                                 st)) != TFS_OK)
            goto fail;
        at = data_at + used;
        if (n - at < 8) {
            code = TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: gzip member %d: truncated trailer (byte %zu, %zu bytes left)", name,
                           member, at, n - at);
            goto fail;
        }
        uint32_t want = le32(in + at), got = tfs__crc32(0, o.data + start, o.len - start);
        if (want != got) {
            code = TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: gzip member %d: CRC-32 mismatch (stored %08x, computed %08x)", name,
                           member, want, got);
            goto fail;
        }
        uint32_t isize = le32(in + at + 4);
        if (isize != (uint32_t)(o.len - start)) {
            code = TFS_ERR(st, TFS_DATA_LOSS,
                           "%s: gzip member %d: length mismatch (stored %u, decompressed %zu mod "
                           "2^32 = %u)", name, member, isize, o.len - start,
                           (uint32_t)(o.len - start));
            goto fail;
        }
        at += 8;
    }
    *out = o.data;
    *out_len = o.len;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_free(o.data);
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
