/* Inflate: a decoder of the raw deflate format (RFC 1951) for the gzip reader (gzip.c). tfserve
 * may not depend on zlib, and datasets such as Fashion-MNIST come gzip-compressed.
 *
 * DESIGN. Speed comes from three choices.
 *  - A 64-bit bit buffer refilled eight bytes at a time (one unaligned load, branch-free): after a
 *    refill it holds at least 56 bits, more than the 48 that the longest length/distance pair
 *    (15 + 5 + 15 + 13 bits) needs, so decoding one symbol with its extra bits never checks for
 *    input. Near the end of the input the refill goes byte by byte and, past the end, adds zero
 *    bytes that it counts ("overrun"): using one of those bits means the stream is truncated.
 *  - Table-driven Huffman decoding. A table indexed by the next LIT_BITS (DIST_BITS) input bits
 *    gives, in one 32-bit entry, the symbol's meaning (literal byte, length base, distance base,
 *    end of block), how many bits its code has and how many extra bits follow. Codes longer than
 *    the index width go through a second-level table that the first-level entry points at, so
 *    a literal costs one lookup, a long code two.
 *  - The whole output is in memory (we inflate files, not streams), so it is its own window:
 *    back-references copy within the output buffer, eight bytes at a time when they do not
 *    overlap within a word.
 * Validity rules are zlib's: over-subscribed codes are errors, and incomplete codes are allowed
 * only for a literal/length or distance code of a single symbol (a distance code may also be
 * empty if no distance is used); the code-length code must be complete.
 */
#include <pthread.h>
#include <string.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

#define LIT_BITS  11
#define DIST_BITS 8
#define CL_BITS   7
/* First level plus the largest possible second levels: with complete codes at most 922 (lit/len,
 * 288 symbols) and 480 (distance, 30 symbols) second-level entries can exist; build() checks. */
#define LIT_TABLE  (2048 + 1024)
#define DIST_TABLE (256 + 512)
#define CL_TABLE   128

/* Table entries: bits 0-4 code length (bits to consume), 8-12 extra bits (or a second-level
 * table's index width), flags 13-15 and 5, value in 16-31. No flag: a length or distance. */
#define F_LIT 0x2000u
#define F_EOB 0x4000u
#define F_SUB 0x8000u
#define F_BAD 0x0020u
#define E_NBITS(e) ((e) & 0x1fu)
#define E_EXTRA(e) (((e) >> 8) & 0x1fu)
#define E_VALUE(e) ((e) >> 16)

static const uint16_t LEN_BASE[29] = {3,  4,  5,  6,  7,  8,  9,  10,  11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t  LEN_EXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                       2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t DIST_BASE[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                       33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                       1025, 1537, 2049, 3073, 4097, 6145,  8193,  12289, 16385,
                                       24577};
static const uint8_t  DIST_EXTRA[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                        6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
static const uint8_t CL_ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

enum tkind { T_CL, T_LIT, T_DIST };

/* ---- table construction --------------------------------------------------------------------- */

static uint32_t sym_entry(enum tkind kind, unsigned s)
{
    switch (kind) {
    case T_CL:
        return (uint32_t)s << 16;
    case T_LIT:
        if (s < 256)
            return F_LIT | (uint32_t)s << 16;
        if (s == 256)
            return F_EOB;
        if (s < 286)
            return (uint32_t)LEN_BASE[s - 257] << 16 | (uint32_t)LEN_EXTRA[s - 257] << 8;
        return F_BAD;   /* 286, 287: they have codes in the fixed code but are never valid */
    case T_DIST:
        if (s < 30)
            return (uint32_t)DIST_BASE[s] << 16 | (uint32_t)DIST_EXTRA[s] << 8;
        return F_BAD;
    }
    return F_BAD;
}

static unsigned reverse(unsigned code, unsigned len)
{
    unsigned r = 0;
    for (unsigned i = 0; i < len; i++, code >>= 1)
        r = r << 1 | (code & 1);
    return r;
}

enum { B_OK = 0, B_OVER, B_INCOMPLETE };

/* Builds the decoding table of the canonical Huffman code with code lengths lens[0..n-1]
 * (0 = unused, at most 15). Entries no code reaches are F_BAD. */
static int build(uint32_t *t, size_t cap, unsigned pbits, const uint8_t *lens, unsigned n,
                 enum tkind kind)
{
    unsigned count[16] = {0}, next[16], used = 0;
    for (unsigned s = 0; s < n; s++)
        count[lens[s]]++;
    count[0] = 0;
    int left = 1;
    for (unsigned l = 1; l < 16; l++) {
        left = left * 2 - (int)count[l];
        if (left < 0)
            return B_OVER;
        used += count[l];
    }
    /* zlib's rule: an incomplete code only for a lit/len or distance code of one symbol with a
     * 1-bit code (and an empty distance code); the code-length code must be complete. */
    if (left > 0 && (kind == T_CL || used > 1 || (used == 1 && count[1] != 1)))
        return B_INCOMPLETE;

    size_t psize = (size_t)1 << pbits;
    for (size_t i = 0; i < psize; i++)
        t[i] = F_BAD;
    next[1] = 0;
    for (unsigned l = 2; l < 16; l++)
        next[l] = (next[l - 1] + count[l - 1]) << 1;

    /* Second-level tables: the widest code under each first-level prefix sets its size. */
    uint8_t  subw[1 << LIT_BITS];
    uint16_t subbase[1 << LIT_BITS];
    unsigned code[16];
    memcpy(code, next, sizeof code);
    memset(subw, 0, psize);
    for (unsigned s = 0; s < n; s++) {
        unsigned l = lens[s];
        if (l <= pbits) {
            if (l)
                code[l]++;
            continue;
        }
        unsigned c = code[l]++, p = reverse(c >> (l - pbits), pbits);
        if (l - pbits > subw[p])
            subw[p] = (uint8_t)(l - pbits);
    }
    size_t off = psize;
    for (size_t p = 0; p < psize; p++) {
        if (!subw[p])
            continue;
        size_t size = (size_t)1 << subw[p];
        if (off + size > cap)
            return B_OVER;   /* impossible for codes that passed the checks above */
        subbase[p] = (uint16_t)off;
        for (size_t i = 0; i < size; i++)
            t[off + i] = F_BAD;
        t[p] = F_SUB | (uint32_t)subw[p] << 8 | (uint32_t)off << 16 | pbits;
        off += size;
    }

    memcpy(code, next, sizeof code);
    for (unsigned s = 0; s < n; s++) {
        unsigned l = lens[s];
        if (!l)
            continue;
        unsigned c = code[l]++;
        uint32_t e = sym_entry(kind, s);
        if (l <= pbits) {
            for (size_t i = reverse(c, l); i < psize; i += (size_t)1 << l)
                t[i] = e | l;
        } else {
            unsigned p = reverse(c >> (l - pbits), pbits), sl = l - pbits;
            size_t width = (size_t)1 << subw[p];
            for (size_t i = reverse(c & ((1u << sl) - 1), sl); i < width; i += (size_t)1 << sl)
                t[subbase[p] + i] = e | sl;
        }
    }
    return B_OK;
}

static uint32_t       fixed_lit[LIT_TABLE], fixed_dist[DIST_TABLE];
static pthread_once_t fixed_once = PTHREAD_ONCE_INIT;

static void build_fixed(void)
{
    uint8_t lens[288];
    memset(lens, 8, 144);
    memset(lens + 144, 9, 112);
    memset(lens + 256, 7, 24);
    memset(lens + 280, 8, 8);
    build(fixed_lit, LIT_TABLE, LIT_BITS, lens, 288, T_LIT);
    memset(lens, 5, 32);
    build(fixed_dist, DIST_TABLE, DIST_BITS, lens, 32, T_DIST);
}

/* ---- the decoder state ---------------------------------------------------------------------- */

typedef struct inf {
    const uint8_t *in0, *in, *end;
    uint64_t       bb;        /* bit buffer: the next bc bits of input, least significant first */
    unsigned       bc;
    size_t         overrun;   /* zero bytes added past the end of the input */
    tfs__bytes    *out;
    size_t         start;     /* out->len on entry: back-references stop here */
    size_t         max_out;
    size_t         in_offset;
    const char    *what;
    tfs_status    *st;
    uint32_t       lit[LIT_TABLE], dist[DIST_TABLE];
} inf;

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Tops the bit buffer up to at least 56 bits. Bits above bc are zero or equal to the input that
 * follows, so OR-ing a word that overlaps them is harmless. */
static inline void refill(inf *s)
{
    if (__builtin_expect(s->end - s->in >= 8, 1)) {
        s->bb |= load_le64(s->in) << s->bc;
        s->in += (63 - s->bc) >> 3;
        s->bc |= 56;
        return;
    }
    while (s->bc <= 56) {
        if (s->in < s->end)
            s->bb |= (uint64_t)*s->in++ << s->bc;
        else
            s->overrun++;
        s->bc += 8;
    }
}

static inline unsigned bits(inf *s, unsigned n)
{
    unsigned v = (unsigned)(s->bb & ((1u << n) - 1));
    s->bb >>= n;
    s->bc -= n;
    return v;
}

/* The input byte the decoder is at, counted in the file. */
static size_t in_pos(const inf *s)
{
    size_t buffered = s->bc / 8, real = buffered > s->overrun ? buffered - s->overrun : 0;
    return s->in_offset + (size_t)(s->in - s->in0) - real;
}

static enum tfs_code fail(inf *s, const char *why)
{
    return TFS_ERR(s->st, TFS_DATA_LOSS, "%s: deflate: %s (compressed byte %zu)", s->what, why,
                   in_pos(s));
}

/* True when bits past the end of the input have been used. */
static inline bool truncated(const inf *s)
{
    return __builtin_expect(s->overrun != 0, 0) && s->bc < 8 * s->overrun;
}

static inline uint32_t decode(inf *s, const uint32_t *t, unsigned pbits)
{
    uint32_t e = t[s->bb & ((1u << pbits) - 1)];
    if (__builtin_expect(e & F_SUB, 0)) {
        s->bb >>= pbits;
        s->bc -= pbits;
        e = t[E_VALUE(e) + (s->bb & ((1u << E_EXTRA(e)) - 1))];
    }
    s->bb >>= E_NBITS(e);
    s->bc -= E_NBITS(e);
    return e;
}

/* Makes room for `need` more output bytes plus 8 bytes of slack for word copies. */
static enum tfs_code reserve(inf *s, size_t need)
{
    tfs__bytes *o = s->out;
    if (need > s->max_out - o->len)
        return TFS_ERR(s->st, TFS_RESOURCE_EXHAUSTED,
                       "%s: deflate: output exceeds the limit of %zu bytes (compressed byte %zu)",
                       s->what, s->max_out, in_pos(s));
    if (o->cap - o->len >= need + 8)
        return TFS_OK;
    size_t cap = o->cap < ((size_t)1 << 16) ? (size_t)1 << 16 : o->cap;
    while (cap - o->len < need + 8)
        cap = cap > (SIZE_MAX >> 1) ? SIZE_MAX : cap * 2;
    if (cap > s->max_out + 8)
        cap = s->max_out + 8;
    uint8_t *p = tfs_realloc(o->data, cap);
    if (!p)
        return TFS_ERR(s->st, TFS_RESOURCE_EXHAUSTED, "%s: deflate: out of memory (%zu bytes)",
                       s->what, cap);
    o->data = p;
    o->cap = cap;
    return TFS_OK;
}

/* ---- blocks --------------------------------------------------------------------------------- */

static enum tfs_code stored(inf *s)
{
    bits(s, s->bc & 7);   /* to a byte boundary */
    size_t buffered = s->bc / 8;
    if (s->overrun > buffered)
        return fail(s, "truncated stored block");
    s->in -= buffered - s->overrun;   /* give the buffered bytes back to the input */
    s->bb = 0;
    s->bc = 0;
    s->overrun = 0;
    if (s->end - s->in < 4)
        return fail(s, "truncated stored block header");
    unsigned len = s->in[0] | (unsigned)s->in[1] << 8, nlen = s->in[2] | (unsigned)s->in[3] << 8;
    if (len != (~nlen & 0xffffu))
        return fail(s, "stored block length does not match its complement");
    s->in += 4;
    if ((size_t)(s->end - s->in) < len)
        return fail(s, "truncated stored block");
    enum tfs_code code = reserve(s, len);
    if (code != TFS_OK)
        return code;
    memcpy(s->out->data + s->out->len, s->in, len);
    s->out->len += len;
    s->in += len;
    return TFS_OK;
}

/* Reads a dynamic block's code lengths and builds s->lit and s->dist from them. */
static enum tfs_code dynamic_tables(inf *s)
{
    uint8_t  lens[320], cl[19] = {0};
    uint32_t clt[CL_TABLE];
    refill(s);
    unsigned hlit = bits(s, 5) + 257, hdist = bits(s, 5) + 1, hclen = bits(s, 4) + 4;
    if (hlit > 286 || hdist > 30)
        return fail(s, "too many length or distance symbols");
    for (unsigned i = 0; i < hclen; i++) {
        refill(s);   /* 19 * 3 bits may exceed what one refill guarantees */
        cl[CL_ORDER[i]] = (uint8_t)bits(s, 3);
    }
    if (truncated(s))
        return fail(s, "truncated block header");
    if (build(clt, CL_TABLE, CL_BITS, cl, 19, T_CL) != B_OK)
        return fail(s, "invalid code lengths code");
    for (unsigned i = 0; i < hlit + hdist;) {
        refill(s);
        uint32_t e = decode(s, clt, CL_BITS);
        if (e & F_BAD)
            return fail(s, "invalid code length code");
        unsigned sym = E_VALUE(e), rep;
        uint8_t  val = 0;
        if (sym < 16) {
            lens[i++] = (uint8_t)sym;
            continue;
        } else if (sym == 16) {
            if (i == 0)
                return fail(s, "repeat of a code length with no previous length");
            val = lens[i - 1];
            rep = 3 + bits(s, 2);
        } else if (sym == 17) {
            rep = 3 + bits(s, 3);
        } else {
            rep = 11 + bits(s, 7);
        }
        if (truncated(s))
            return fail(s, "truncated block header");
        if (rep > hlit + hdist - i)
            return fail(s, "code length repeat past the last symbol");
        memset(lens + i, val, rep);
        i += rep;
    }
    if (truncated(s))
        return fail(s, "truncated block header");
    if (lens[256] == 0)
        return fail(s, "literal/length code without an end-of-block code");
    int r = build(s->lit, LIT_TABLE, LIT_BITS, lens, hlit, T_LIT);
    if (r != B_OK)
        return fail(s, r == B_OVER ? "over-subscribed literal/length code"
                                   : "incomplete literal/length code");
    r = build(s->dist, DIST_TABLE, DIST_BITS, lens + hlit, hdist, T_DIST);
    if (r != B_OK)
        return fail(s, r == B_OVER ? "over-subscribed distance code" : "incomplete distance code");
    return TFS_OK;
}

/* Copies a back-reference of `len` bytes from `dist` bytes back; room is reserved. */
static inline void copy_match(uint8_t *dst, size_t dist, size_t len)
{
    const uint8_t *src = dst - dist;
    if (dist >= 8) {
        /* Words never read bytes this copy has not written yet; up to 7 bytes of slack are
         * overwritten past the end, which reserve() allowed for. */
        for (size_t i = 0; i < len; i += 8) {
            uint64_t w;
            memcpy(&w, src + i, 8);
            memcpy(dst + i, &w, 8);
        }
    } else if (dist == 1) {
        memset(dst, src[0], len);
    } else {
        for (size_t i = 0; i < len; i++)
            dst[i] = src[i];
    }
}

/* Decodes the symbols of one Huffman block with the tables lit/dist. */
static enum tfs_code huffman(inf *s, const uint32_t *lit, const uint32_t *dist)
{
    tfs__bytes   *o = s->out;
    enum tfs_code code;
    for (;;) {
        refill(s);
        uint32_t e = decode(s, lit, LIT_BITS);
        if (e & F_LIT) {
            /* Often the next symbol is a literal too and its bits are already buffered. */
            if (truncated(s))
                return fail(s, "truncated data");
            if (__builtin_expect(o->cap - o->len < 9, 0) && (code = reserve(s, 1)) != TFS_OK)
                return code;
            o->data[o->len++] = (uint8_t)E_VALUE(e);
            if (s->bc >= 15) {
                uint32_t e2 = lit[s->bb & ((1u << LIT_BITS) - 1)];
                if ((e2 & F_LIT) && E_NBITS(e2) <= s->bc) {
                    s->bb >>= E_NBITS(e2);
                    s->bc -= E_NBITS(e2);
                    if (truncated(s))
                        return fail(s, "truncated data");
                    if (__builtin_expect(o->cap - o->len < 9, 0) &&
                        (code = reserve(s, 1)) != TFS_OK)
                        return code;
                    o->data[o->len++] = (uint8_t)E_VALUE(e2);
                }
            }
            continue;
        }
        if (e & (F_EOB | F_BAD)) {
            if (truncated(s))
                return fail(s, "truncated data");
            if (e & F_BAD)
                return fail(s, "invalid literal/length code");
            return TFS_OK;
        }
        size_t len = E_VALUE(e) + bits(s, E_EXTRA(e));
        uint32_t d = decode(s, dist, DIST_BITS);
        if (d & F_BAD) {
            if (truncated(s))
                return fail(s, "truncated data");
            return fail(s, "invalid distance code");
        }
        size_t dd = E_VALUE(d) + bits(s, E_EXTRA(d));
        if (truncated(s))
            return fail(s, "truncated data");
        if (dd > o->len - s->start)
            return fail(s, "distance too far back");
        if (__builtin_expect(o->cap - o->len < len + 8, 0) && (code = reserve(s, len)) != TFS_OK)
            return code;
        copy_match(o->data + o->len, dd, len);
        o->len += len;
    }
}

enum tfs_code tfs__inflate(const uint8_t *in, size_t n, size_t in_offset, tfs__bytes *out,
                           size_t max_out, size_t *consumed, const char *what, tfs_status *st)
{
    pthread_once(&fixed_once, build_fixed);
    enum tfs_code code = TFS_OK;
    inf *s = tfs_malloc(sizeof *s);   /* 15 KB of tables: not on the stack */
    *consumed = 0;
    if (!s)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: deflate: out of memory", what);
    s->in0 = s->in = in;
    s->end = in + n;
    s->bb = 0;
    s->bc = 0;
    s->overrun = 0;
    s->out = out;
    s->start = out->len;
    s->max_out = max_out;
    s->in_offset = in_offset;
    s->what = what;
    s->st = st;
    tfs_status_clear(st);
    for (bool last = false; !last;) {
        refill(s);
        last = bits(s, 1);
        unsigned type = bits(s, 2);
        if (truncated(s)) {
            code = fail(s, "truncated data");
            goto done;
        }
        if (type == 0)
            code = stored(s);
        else if (type == 1)
            code = huffman(s, fixed_lit, fixed_dist);
        else if (type == 2 && (code = dynamic_tables(s)) == TFS_OK)
            code = huffman(s, s->lit, s->dist);
        else if (type == 3)
            code = fail(s, "invalid block type 3");
        if (code != TFS_OK)
            goto done;
    }
    /* Whole bytes still buffered belong to whatever follows the stream. */
    size_t buffered = s->bc / 8;
    if (s->overrun > buffered) {
        code = fail(s, "truncated data");
        goto done;
    }
    *consumed = (size_t)(s->in - in) - (buffered - s->overrun);
done:
    tfs_free(s);
    return code;
}
