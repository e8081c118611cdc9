/* NumPy .npy files (numpy.lib.format):
 *
 *     "\x93NUMPY"   magic, 6 bytes
 *     major, minor  format version: 1.0, 2.0 or 3.0
 *     header_len    uint16 LE (1.0) or uint32 LE (2.0, 3.0)
 *     header        a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False,
 *                   'shape': (60000, 784), } padded with spaces and a '\n' (3.0: UTF-8)
 *     data          the elements, C order unless fortran_order
 *
 * The header is parsed as the small subset of Python literals numpy writes (strings in either
 * quote, True/False, tuples of integers), with exactly the keys descr, fortran_order and shape,
 * as numpy's own reader insists. Big-endian data ('>') is byte-swapped to host order. Like the
 * IDX reader, the tensor takes over the file's buffer.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

typedef struct hp {
    const char *p, *end, *start;
    const char *path;
    tfs_status *st;
} hp;

static void skip_ws(hp *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static enum tfs_code bad(hp *h, const char *why)
{
    return TFS_ERR(h->st, TFS_DATA_LOSS, "%s: npy header: %s (header byte %zu)", h->path, why,
                   (size_t)(h->p - h->start));
}

static bool eat(hp *h, char ch)
{
    skip_ws(h);
    if (h->p < h->end && *h->p == ch) {
        h->p++;
        return true;
    }
    return false;
}

/* A quoted string (no escapes: numpy writes none in these values). */
static bool string(hp *h, const char **s, size_t *n)
{
    skip_ws(h);
    if (h->p == h->end || (*h->p != '\'' && *h->p != '"'))
        return false;
    char        q = *h->p++;
    const char *e = memchr(h->p, q, (size_t)(h->end - h->p));
    if (!e)
        return false;
    *s = h->p;
    *n = (size_t)(e - h->p);
    h->p = e + 1;
    return true;
}

static bool word(hp *h, const char *w)
{
    skip_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
        h->p += n;
        return true;
    }
    return false;
}

static bool integer(hp *h, int64_t *v)
{
    skip_ws(h);
    const char *s = h->p;
    *v = 0;
    while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
        if (*v > (INT64_MAX - 9) / 10)
            return false;
        *v = *v * 10 + (*h->p++ - '0');
    }
    if (h->p < h->end && *h->p == 'L')   /* Python 2 longs, in files numpy 1.x wrote */
        h->p++;
    return h->p > s;
}

typedef struct npy_header {
    enum tfs_dtype dtype;
    bool           swap;
    int            rank;
    int64_t        dims[TFS_MAX_RANK];
} npy_header;

static enum tfs_code descr(hp *h, const char *s, size_t n, npy_header *out)
{
    static const struct {
        char           kind;
        char           size;
        enum tfs_dtype dt;
    } types[] = {{'f', '4', TFS_DTYPE_FLOAT}, {'f', '8', TFS_DTYPE_DOUBLE},
                 {'i', '4', TFS_DTYPE_INT32}, {'i', '8', TFS_DTYPE_INT64},
                 {'u', '1', TFS_DTYPE_UINT8}, {'i', '1', TFS_DTYPE_INT8}};
    if (n == 3 && strchr("<>|=", s[0]))
        for (size_t i = 0; i < sizeof types / sizeof *types; i++)
            if (s[1] == types[i].kind && s[2] == types[i].size) {
                out->dtype = types[i].dt;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
                out->swap = s[0] == '<' && s[2] != '1';
#else
                out->swap = s[0] == '>' && s[2] != '1';
#endif
                return TFS_OK;
            }
    return TFS_ERR(h->st, TFS_UNIMPLEMENTED,
                   "%s: npy dtype '%.*s' is not supported (supported: <f4 <f8 <i4 <i8 |u1 |i1, "
                   "and their big-endian forms)", h->path, (int)(n > 40 ? 40 : n), s);
}

static enum tfs_code parse_header(hp *h, npy_header *out)
{
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    if (!eat(h, '{'))
        return bad(h, "does not start with '{'");
    while (!eat(h, '}')) {
        const char   *key, *val;
        size_t        kn, vn;
        enum tfs_code code;
        if (!string(h, &key, &kn) || !eat(h, ':'))
            return bad(h, "expected 'key':");
        if (kn == 5 && memcmp(key, "descr", 5) == 0 && !have_descr) {
            if (!string(h, &val, &vn))
                return TFS_ERR(h->st, TFS_UNIMPLEMENTED,
                               "%s: npy descr is not a simple dtype string (structured arrays are "
                               "not supported)", h->path);
            if ((code = descr(h, val, vn, out)) != TFS_OK)
                return code;
            have_descr = true;
        } else if (kn == 13 && memcmp(key, "fortran_order", 13) == 0 && !have_order) {
            if (word(h, "True"))
                fortran = true;
            else if (!word(h, "False"))
                return bad(h, "fortran_order is neither True nor False");
            have_order = true;
        } else if (kn == 5 && memcmp(key, "shape", 5) == 0 && !have_shape) {
            if (!eat(h, '('))
                return bad(h, "shape is not a tuple");
            out->rank = 0;
            while (!eat(h, ')')) {
                int64_t d;
                if (out->rank == TFS_MAX_RANK)
                    return TFS_ERR(h->st, TFS_UNIMPLEMENTED,
                                   "%s: npy shape has more than %d dimensions", h->path,
                                   TFS_MAX_RANK);
                if (!integer(h, &d))
                    return bad(h, "shape holds something other than non-negative integers");
                out->dims[out->rank++] = d;
                if (!eat(h, ',')) {
                    if (!eat(h, ')'))
                        return bad(h, "shape tuple not closed");
                    break;
                }
            }
            have_shape = true;
        } else {
            return TFS_ERR(h->st, TFS_DATA_LOSS,
                           "%s: npy header: unexpected or repeated key '%.*s' (numpy writes "
                           "exactly descr, fortran_order, shape)", h->path, (int)(kn > 40 ? 40 : kn),
                           key);
        }
        if (!eat(h, ',')) {
            if (!eat(h, '}'))
                return bad(h, "expected ',' or '}'");
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return TFS_ERR(h->st, TFS_DATA_LOSS, "%s: npy header lacks '%s'", h->path,
                       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    if (fortran)
        return TFS_ERR(h->st, TFS_UNIMPLEMENTED,
                       "%s: npy data in Fortran order is not supported: save it with "
                       "np.save(path, np.ascontiguousarray(a))", h->path);
    return TFS_OK;
}

enum tfs_code tfs_npy_read(const char *path, tfs_tensor **out, tfs_status *st)
{
    uint8_t      *buf = NULL;
    size_t        n;
    enum tfs_code code;
    npy_header    nh = {0};
    *out = NULL;
    if ((code = tfs_data_file_read(path, (void **)&buf, &n, st)) != TFS_OK)
        return code;
    if (n < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: not an npy file (no \\x93NUMPY magic)", path);
        goto fail;
    }
    unsigned major = buf[6];
    if (major < 1 || major > 3) {
        code = TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: npy format version %u.%u is not supported "
                       "(1.0, 2.0, 3.0 are)", path, major, buf[7]);
        goto fail;
    }
    size_t start = major == 1 ? 10 : 12, hlen;
    if (n < start) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: npy: truncated preamble", path);
        goto fail;
    }
    hlen = major == 1 ? (size_t)buf[8] | (size_t)buf[9] << 8
                      : (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
                            (size_t)buf[11] << 24;
    if (hlen > n - start) {
        code = TFS_ERR(st, TFS_DATA_LOSS, "%s: npy header length %zu runs past the end of the "
                       "file (%zu bytes)", path, hlen, n);
        goto fail;
    }
    hp h = {(const char *)buf + start, (const char *)buf + start + hlen, (const char *)buf + start,
            path, st};
    if ((code = parse_header(&h, &nh)) != TFS_OK)
        goto fail;
    size_t   esize = tfs_dtype_size(nh.dtype), data = n - start - hlen;
    uint64_t want = esize;
    bool     over = false;
    for (int i = 0; i < nh.rank; i++) {
        if (nh.dims[i] != 0 && want > data / (uint64_t)nh.dims[i])
            over = true;
        else
            want *= (uint64_t)nh.dims[i];
    }
    if (over || want != data) {
        char shape[200];
        tfs_shape_str(nh.rank, nh.dims, shape, sizeof shape);
        code = TFS_ERR(st, TFS_DATA_LOSS,
                       "%s: npy shape %s of %s needs %s%llu bytes of data, the file has %zu "
                       "(%s)", path, shape, tfs_dtype_short_name(nh.dtype), over ? "more than " : "",
                       (unsigned long long)(over ? data : want), data,
                       over || want > data ? "truncated" : "trailing bytes");
        goto fail;
    }
    memmove(buf, buf + start + hlen, data);
    if (nh.swap)
        for (size_t i = 0; i < data; i += esize)
            for (size_t a = i, b = i + esize - 1; a < b; a++, b--) {
                uint8_t t = buf[a];
                buf[a] = buf[b];
                buf[b] = t;
            }
    if ((code = tfs_tensor_wrap(nh.dtype, nh.rank, nh.dims, buf, tfs__free_data, NULL, out, st)) !=
        TFS_OK)
        goto fail;
    return TFS_OK;
fail:
    tfs_free(buf);
    return code;
}
