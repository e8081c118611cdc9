/* Request bodies -> JSON documents, parsed the way TF Serving's rapidjson reads them
 * (ParseStream<kParseNanAndInfFlag> on a memory stream), into a compact arena-allocated tree.
 *
 * Hand-written rather than read with jansson (a dependency already) because TF Serving's
 * answers to bad bodies are rapidjson's error texts, byte offsets and number classes, which
 * jansson's differ from, and because its packed arrays keep a body's cost within 8x its size
 * (test_json_tensor_parse_memory measures it).
 *
 * DESIGN. TF Serving's behaviour is rapidjson's, so this parser follows its grammar and reports
 * its errors, with its English texts and byte offsets: the first value of the body is the document
 * and anything after it but whitespace is "The document root must not be followed by other
 * values."; NaN, Inf, Infinity (with an optional '-') are numbers; integers are int64 or uint64
 * while they fit and doubles beyond; strings are bytes (no UTF-8 validation, as rapidjson's default
 * flags); a NUL byte reads as the end of input, as rapidjson's stream Peek() makes it. Numbers are
 * converted with correct rounding (rapidjson's normal-precision path may be an ulp off; nothing
 * depends on that).
 *
 * Speed: a request is one pass over the bytes. Values go onto a value stack; when a container
 * closes, its children move into one arena block and the container replaces them on the stack, so
 * every value is copied once. The arena starts inside the document and grows in chunks. There is
 * no recursion, so nesting depth is bounded only by memory (TF Serving's recursive parser can
 * overflow its stack; we must not).
 *
 * Memory: a body must not cost many times its size. An array of numbers only is kept packed,
 * 8 bytes a number (plus a byte each when integers and fractions mix); every other value is a
 * 16-byte tfs__jv. A large closing container's children are not copied: the document adopts the
 * stack's block where they lie. So a document costs at most about 16 bytes per 3-byte token
 * ("[],"), and full-length numbers less than their text.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

/* rapidjson's ParseErrorCode texts (GetParseError_En). */
enum perr {
    E_NONE = 0,
    E_EMPTY,
    E_ROOT_NOT_SINGULAR,
    E_VALUE_INVALID,
    E_OBJECT_MISS_NAME,
    E_OBJECT_MISS_COLON,
    E_OBJECT_MISS_COMMA,
    E_ARRAY_MISS_COMMA,
    E_UNICODE_HEX,
    E_SURROGATE,
    E_ESCAPE,
    E_MISS_QUOTE,
    E_ENCODING,
    E_TOO_BIG,
    E_MISS_FRACTION,
    E_MISS_EXPONENT,
};

static const char *const perr_text[] = {
    [E_NONE] = "No error.",
    [E_EMPTY] = "The document is empty.",
    [E_ROOT_NOT_SINGULAR] = "The document root must not be followed by other values.",
    [E_VALUE_INVALID] = "Invalid value.",
    [E_OBJECT_MISS_NAME] = "Missing a name for object member.",
    [E_OBJECT_MISS_COLON] = "Missing a colon after a name of object member.",
    [E_OBJECT_MISS_COMMA] = "Missing a comma or '}' after an object member.",
    [E_ARRAY_MISS_COMMA] = "Missing a comma or ']' after an array element.",
    [E_UNICODE_HEX] = "Incorrect hex digit after \\u escape in string.",
    [E_SURROGATE] = "The surrogate pair in string is invalid.",
    [E_ESCAPE] = "Invalid escape character in string.",
    [E_MISS_QUOTE] = "Missing a closing quotation mark in string.",
    [E_ENCODING] = "Invalid encoding in string.",
    [E_TOO_BIG] = "Number too big to be stored in double.",
    [E_MISS_FRACTION] = "Miss fraction part in number.",
    [E_MISS_EXPONENT] = "Miss exponent in number.",
};

/* ---- arena ---------------------------------------------------------------------------------- */

typedef struct tfs__jchunk {
    struct tfs__jchunk *next;
    max_align_t         data[];
} jchunk;

#define CHUNK_MIN ((size_t)4096)
#define CHUNK_MAX ((size_t)1 << 20)

void tfs__jdoc_init(tfs__jdoc *d)
{
    d->root = NULL;
    d->chunks = NULL;
    d->cur = (char *)d->mem;
    d->left = sizeof d->mem;
    d->next_chunk = CHUNK_MIN;
}

void tfs__jdoc_deinit(tfs__jdoc *d)
{
    if (!d)
        return;
    for (jchunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        tfs_free(c);
    }
    tfs__jdoc_init(d);
}

/* n bytes aligned for a tfs__jv (8), or NULL when out of memory. */
static void *arena_alloc(tfs__jdoc *d, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n <= d->left) {
        void *p = d->cur;
        d->cur += n;
        d->left -= n;
        return p;
    }
    size_t size = n > d->next_chunk / 2 ? n : d->next_chunk;
    jchunk *c = n > SIZE_MAX - sizeof *c ? NULL : tfs_malloc(sizeof *c + size);
    if (!c)
        return NULL;
    c->next = d->chunks;
    d->chunks = c;
    if (size == n)   /* a block of its own: keep filling the current one */
        return c->data;
    if (d->next_chunk < CHUNK_MAX)
        d->next_chunk *= 2;
    d->cur = (char *)c->data + n;
    d->left = size - n;
    return c->data;
}

/* ---- parser state --------------------------------------------------------------------------- */

typedef struct frame {
    bool   object;
    bool   packed;   /* an array whose children so far are all numbers, held packed */
    size_t start;    /* byte offset of its first child on the value stack */
} frame;

typedef struct parser {
    const char *base;
    const char *p;
    const char *end;
    tfs__jdoc  *doc;
    /* The value stack: the children of the open containers, 16-byte values, except that the
     * innermost array's children are 8-byte numbers while it is packed. Once on the heap it lives
     * in a chunk, so that the document can adopt a large closing container's children where they
     * lie instead of copying them. */
    char       *stack;
    jchunk     *stack_chunk;   /* NULL while the stack is stack_inline */
    size_t      top, cap;      /* bytes used, bytes available */
    uint8_t    *kinds;         /* the packed array's numbers' enum tfs__jnum */
    size_t      kn, kcap;
    frame      *fs;            /* open containers */
    size_t      fn, fcap;
    enum perr   err;
    size_t      err_at;
    bool        oom;
    max_align_t stack_inline[512 / sizeof(max_align_t)];
    uint8_t     kinds_inline[64];
    frame       fs_inline[16];
} parser;

/* The byte at p, or 0 at the end (a NUL byte reads the same, as in rapidjson). */
static inline unsigned char peek(const parser *ps)
{
    return ps->p < ps->end ? (unsigned char)*ps->p : 0;
}

static bool fail(parser *ps, enum perr e, const char *at)
{
    ps->err = e;
    ps->err_at = (size_t)(at - ps->base);
    return false;
}

static bool out_of_memory(parser *ps)
{
    ps->oom = true;
    return false;
}

static inline void skip_ws(parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

/* Grows a stack held in `*items` (initially `inline_items`) to hold one more. */
static bool grow(void **items, size_t *cap, size_t size, void *inline_items)
{
    size_t ncap = *cap * 2;
    void  *p = tfs_malloc(ncap * size);
    if (!p)
        return false;
    memcpy(p, *items, *cap * size);
    if (*items != inline_items)
        tfs_free(*items);
    *items = p;
    *cap = ncap;
    return true;
}

/* Room for `more` bytes on the value stack. realloc lets a large stack grow in place (mremap)
 * rather than be copied, so it never needs twice its size. */
static bool stack_reserve(parser *ps, size_t more)
{
    if (ps->cap - ps->top >= more)
        return true;
    size_t need = ps->top + more, ncap = ps->cap * 2 > need ? ps->cap * 2 : need;
    jchunk *c = tfs_realloc(ps->stack_chunk, sizeof *c + ncap);
    if (!c)
        return out_of_memory(ps);
    if (!ps->stack_chunk)
        memcpy(c->data, ps->stack, ps->top);
    ps->stack_chunk = c;
    ps->stack = (char *)c->data;
    ps->cap = ncap;
    return true;
}

/* The innermost array held numbers only and now gets another value: its numbers become values,
 * in place (from the last, so no number is overwritten before it is read). */
static bool unpack(parser *ps, frame *f)
{
    size_t n = (ps->top - f->start) / sizeof(uint64_t);
    if (!stack_reserve(ps, n * (sizeof(tfs__jv) - sizeof(uint64_t))))
        return false;
    char *at = ps->stack + f->start;
    for (size_t i = n; i-- > 0;) {
        tfs__jv v = {.type = TFS__J_NUMBER, .num = ps->kinds[i]};
        memcpy(&v.u, at + i * sizeof(uint64_t), sizeof v.u);
        memcpy(at + i * sizeof v, &v, sizeof v);
    }
    ps->top = f->start + n * sizeof(tfs__jv);
    ps->kn = 0;
    f->packed = false;
    return true;
}

static inline bool push_value(parser *ps, const tfs__jv *v)
{
    if (ps->fn && ps->fs[ps->fn - 1].packed && !unpack(ps, &ps->fs[ps->fn - 1]))
        return false;
    if (!stack_reserve(ps, sizeof *v))
        return false;
    memcpy(ps->stack + ps->top, v, sizeof *v);
    ps->top += sizeof *v;
    return true;
}

/* A number onto the innermost array, which is packed. */
static inline bool push_packed(parser *ps, const tfs__jv *v)
{
    if (ps->kn == ps->kcap && !grow((void **)&ps->kinds, &ps->kcap, 1, ps->kinds_inline))
        return out_of_memory(ps);
    if (!stack_reserve(ps, sizeof v->u))
        return false;
    memcpy(ps->stack + ps->top, &v->u, sizeof v->u);
    ps->top += sizeof v->u;
    ps->kinds[ps->kn++] = v->num;
    return true;
}

static inline bool push_number(parser *ps, const tfs__jv *v)
{
    if (!ps->fn || !ps->fs[ps->fn - 1].packed)
        return push_value(ps, v);
    return push_packed(ps, v);
}

static bool open_container(parser *ps, bool object)
{
    if (ps->fn && ps->fs[ps->fn - 1].packed && !unpack(ps, &ps->fs[ps->fn - 1]))
        return false;
    if (ps->fn == ps->fcap && !grow((void **)&ps->fs, &ps->fcap, sizeof *ps->fs, ps->fs_inline))
        return out_of_memory(ps);
    ps->fs[ps->fn].object = object;
    ps->fs[ps->fn].packed = !object;
    ps->fs[ps->fn].start = ps->top;
    ps->fn++;
    return true;
}

/* Children of at least this many bytes that are no fewer than the values below them on the stack
 * are adopted by the document where they lie; smaller ones are copied into the arena. */
#define ADOPT_MIN ((size_t)64 << 10)

/* The `bytes` of children at stack offset `start`, followed by `extra` bytes from `tail`, as a
 * block the document owns: the stack's own block when that saves copying many, else an arena
 * copy. NULL when out of memory. */
static void *keep_children(parser *ps, size_t start, size_t bytes, const void *tail, size_t extra)
{
    if (!ps->stack_chunk || bytes < ADOPT_MIN || bytes < start) {
        char *p = arena_alloc(ps->doc, bytes + extra);
        if (!p)
            return NULL;
        memcpy(p, ps->stack + start, bytes);
        memcpy(p + bytes, tail, extra);
        return p;
    }
    /* The document takes the stack's block, cut to what the children use; the values below
     * them move to a new stack (no more bytes than the children, so the copying is amortised). */
    jchunk *c = tfs_realloc(ps->stack_chunk, sizeof *c + start + bytes + extra);
    if (!c)
        return NULL;
    c->next = ps->doc->chunks;
    ps->doc->chunks = c;
    char *items = (char *)c->data + start;
    memcpy(items + bytes, tail, extra);
    ps->stack_chunk = NULL;
    ps->stack = (char *)ps->stack_inline;
    ps->cap = sizeof ps->stack_inline;
    ps->top = 0;
    if (!stack_reserve(ps, start))
        return NULL;
    memcpy(ps->stack, c->data, start);
    ps->top = start;
    return items;
}

/* The innermost container is complete: its children move to the document. */
static bool close_container(parser *ps)
{
    frame   f = ps->fs[--ps->fn];
    size_t  bytes = ps->top - f.start;
    tfs__jv v = {.type = f.object ? TFS__J_OBJECT : TFS__J_ARRAY};
    size_t  extra = 0;
    if (f.packed) {
        v.n = (uint32_t)ps->kn;
        bool mixed = false;
        for (size_t i = 1; i < ps->kn && !mixed; i++)
            mixed = ps->kinds[i] != ps->kinds[0];
        if (mixed) {
            v.num = TFS__JARR_MIXED;
            extra = ps->kn;
        } else if (ps->kn) {
            v.num = (uint8_t)(TFS__JARR_INT + ps->kinds[0] - TFS__JNUM_INT);
        }
    } else {
        size_t n = bytes / sizeof(tfs__jv);
        v.n = (uint32_t)(f.object ? n / 2 : n);
    }
    if (bytes) {
        void *items = keep_children(ps, f.start, bytes, ps->kinds, extra);
        if (!items)
            return out_of_memory(ps);
        if (f.packed)
            v.nums = items;
        else
            v.items = items;
    }
    ps->top = f.start;
    ps->kn = 0;
    return push_value(ps, &v);
}

/* ---- strings -------------------------------------------------------------------------------- */

static int hex4(const char *p, const char *end)
{
    if (end - p < 4)
        return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int  d = c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the escapes of [p, end) (which holds no closing quote) into out. */
static bool unescape(parser *ps, const char *q, char *out, size_t *out_len)
{
    size_t o = 0;
    while (q < ps->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"')
            break;
        if (c == 0)
            return fail(ps, E_MISS_QUOTE, q);
        if (c < 0x20)
            return fail(ps, E_ENCODING, q);
        if (c != '\\') {
            out[o++] = (char)c;
            q++;
            continue;
        }
        const char *esc = q++;
        char        e = q < ps->end ? *q : 0;
        switch (e) {
        case '"': case '\\': case '/': out[o++] = e; q++; continue;
        case 'b': out[o++] = '\b'; q++; continue;
        case 'f': out[o++] = '\f'; q++; continue;
        case 'n': out[o++] = '\n'; q++; continue;
        case 'r': out[o++] = '\r'; q++; continue;
        case 't': out[o++] = '\t'; q++; continue;
        case 'u': break;
        default: return fail(ps, E_ESCAPE, esc);
        }
        int cp = hex4(++q, ps->end);
        if (cp < 0)
            return fail(ps, E_UNICODE_HEX, esc);
        q += 4;
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            if (cp > 0xDBFF || ps->end - q < 2 || q[0] != '\\' || q[1] != 'u')
                return fail(ps, E_SURROGATE, esc);
            int lo = hex4(q + 2, ps->end);
            if (lo < 0)
                return fail(ps, E_UNICODE_HEX, esc);
            if (lo < 0xDC00 || lo > 0xDFFF)
                return fail(ps, E_SURROGATE, esc);
            q += 6;
            cp = (((cp - 0xD800) << 10) | (lo - 0xDC00)) + 0x10000;
        }
        o += put_utf8(out + o, (unsigned)cp);
    }
    if (q >= ps->end)
        return fail(ps, E_MISS_QUOTE, ps->end);
    ps->p = q + 1;
    *out_len = o;
    return true;
}

/* A string at ps->p (on its opening quote), copied NUL-terminated into the arena. */
static bool string(parser *ps, tfs__jv *v)
{
    const char *s = ++ps->p;
    const char *q = s;
    bool        escaped = false;
    /* Find the closing quote first, to size the copy: unescaping only shrinks. */
    while (q < ps->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"' || c < 0x20)
            break;
        if (c == '\\') {
            escaped = true;
            if (++q == ps->end)
                break;
        }
        q++;
    }
    if (q >= ps->end || *q != '"') {
        if (!escaped)   /* the error is where the scan stopped */
            return fail(ps, q >= ps->end ? E_MISS_QUOTE : *q == 0 ? E_MISS_QUOTE : E_ENCODING,
                        q);
    }
    size_t n = (size_t)(q - s);
    if (n == 0) {   /* nothing to keep: a body of "" costs no arena bytes */
        ps->p = q + 1;
        v->type = TFS__J_STRING;
        v->n = 0;
        v->s = "";
        return true;
    }
    if (n > UINT32_MAX)
        return fail(ps, E_MISS_QUOTE, q);   /* not reachable: documents are < 4 GiB */
    char *out = arena_alloc(ps->doc, n + 1);
    if (!out)
        return out_of_memory(ps);
    if (escaped) {
        if (!unescape(ps, s, out, &n))
            return false;
    } else {
        memcpy(out, s, n);
        ps->p = q + 1;
    }
    out[n] = 0;
    v->type = TFS__J_STRING;
    v->n = (uint32_t)n;
    v->s = out;
    return true;
}

/* ---- numbers -------------------------------------------------------------------------------- */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Eight bytes as they lie in memory, the first in the low byte. */
static inline uint64_t load8(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Whether all eight bytes of v are '0'..'9': each byte's high nibble is 3, and adding 6 to its low
 * nibble does not carry into it. */
static inline bool eight_digits(uint64_t v)
{
    return ((v & 0xF0F0F0F0F0F0F0F0u) |
            (((v + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) >> 4)) == 0x3333333333333333u;
}

/* The value of eight digits, the first in v's low byte: pairs, then quads, then the whole, each
 * step one multiplication that adds ten (100, 10000) times the left part to the right one. */
static inline uint64_t eight_digits_value(uint64_t v)
{
    v = ((v & 0x0F0F0F0F0F0F0F0Fu) * (10 * 256 + 1)) >> 8;
    v = ((v & 0x00FF00FF00FF00FFu) * (100 * 65536 + 1)) >> 16;
    return ((v & 0x0000FFFF0000FFFFu) * (10000 * 4294967296u + 1)) >> 32;
}

/* Scans the digits at p (up to end), folding each into *m as m * 10 + digit (wrapping past 19
 * digits: the caller counts them and does not use m then). Returns the first byte past them. */
static inline const char *digits(const char *p, const char *end, uint64_t *m)
{
    uint64_t acc = *m;
    while (end - p >= 8) {
        uint64_t v = load8(p);
        if (!eight_digits(v))
            break;
        acc = acc * 100000000u + eight_digits_value(v);
        p += 8;
    }
    while (p < end && is_digit((unsigned char)*p))
        acc = acc * 10 + (uint64_t)(*p++ - '0');
    *m = acc;
    return p;
}

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* m * 10^p, correctly rounded, for an exact significand m < 2^64, or false when this cannot tell.
 * Clinger's fast path: m <= 2^53 and 10^|p| are exact doubles, so one operation rounds once.
 * Past it, x86's 80-bit long double (a 64-bit significand) holds every m and 10^|p| up to 10^27
 * exactly, so m * 10^p rounds once to 64 bits; rounding that to a double's 53 bits gives the
 * correctly rounded double unless the 64-bit result lies exactly halfway between two doubles
 * (its low 11 bits 10000000000), where the first rounding may have moved it there. That case
 * (one in 2048) is left to strtod. This covers what clients send most (a float printed with
 * 16-17 digits, e.g. 0.00392156862745098) without a big-number conversion. */
static bool decimal_fast(uint64_t m, int64_t p, double *out)
{
    if (m == 0) {   /* "0.0", common in images: no division */
        *out = 0;
        return true;
    }
    if (m <= (1ULL << 53) && p >= -22 && p <= 22) {
        *out = p < 0 ? (double)m / pow10_exact[-p] : (double)m * pow10_exact[p];
        return true;
    }
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
    static const long double pow10_ext[] = {
        1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
        1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
        1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
    if (p >= -27 && p <= 27) {
        long double x = (long double)m;
        x = p < 0 ? x / pow10_ext[-p] : x * pow10_ext[p];
        uint64_t significand;
        memcpy(&significand, &x, sizeof significand);   /* the low 8 bytes of the 80-bit value */
        if ((significand & 0x7FF) == 0x400)
            return false;
        *out = (double)x;
        return true;
    }
#endif
    return false;
}

/* The value of the validated decimal token [s, e) through strtod (the C locale's '.'), on a
 * NUL-terminated copy: correctly rounded. */
static double strtod_token(const char *s, const char *e, bool *oom)
{
    char   small[64];
    size_t n = (size_t)(e - s);
    char  *buf = n < sizeof small ? small : tfs_malloc(n + 1);
    if (!buf) {
        *oom = true;
        return 0;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    double d = strtod(buf, NULL);
    if (buf != small)
        tfs_free(buf);
    return d;
}

/* The 20-digit integer [s, s + 20) as a uint64, or false when it is 2^64 or more. */
static bool twenty_digits(const char *s, uint64_t *u)
{
    uint64_t v = 0;
    for (int i = 0; i < 20; i++)
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
            return false;
    *u = v;
    return true;
}

/* A number at ps->p: rapidjson's ParseNumber grammar, flags and classification. The digits are
 * folded into one significand while scanning (eight at a time where eight follow), so the common
 * decimal needs no second pass: decimal_fast decides it when the significand has at most 19
 * significant digits, strtod the rest. */
static bool number(parser *ps, tfs__jv *v)
{
    const char *start = ps->p;
    bool        minus = peek(ps) == '-';
    if (minus)
        ps->p++;
    unsigned char c = peek(ps);
    if (c == 'N' || c == 'I') {
        /* NaN, Inf, Infinity; a partial word is an invalid value where it stops. */
        const char *word = c == 'N' ? "NaN" : "Inf";
        for (int i = 0; i < 3; i++, ps->p++)
            if (peek(ps) != (unsigned char)word[i])
                return fail(ps, E_VALUE_INVALID, ps->p);
        if (c == 'I' && peek(ps) == 'i') {
            for (const char *w = "inity"; *w; w++, ps->p++)
                if (peek(ps) != (unsigned char)*w)
                    return fail(ps, E_VALUE_INVALID, ps->p);
        }
        v->type = TFS__J_NUMBER;
        v->num = TFS__JNUM_DOUBLE;
        v->d = c == 'N' ? NAN : minus ? -INFINITY : INFINITY;
        return true;
    }
    if (!is_digit(c))
        return fail(ps, E_VALUE_INVALID, ps->p);

    const char *int_start = ps->p, *frac_start = NULL;
    uint64_t    m = 0;   /* every digit, integer part then fraction (exact up to 19 digits) */
    if (c == '0')
        ps->p++;   /* a leading 0 is the whole integer part ("01" ends after the 0) */
    else
        ps->p = digits(ps->p, ps->end, &m);
    size_t n_int = (size_t)(ps->p - int_start), n_frac = 0;
    bool   is_double = false;
    if (peek(ps) == '.') {
        ps->p++;
        if (!is_digit(peek(ps)))
            return fail(ps, E_MISS_FRACTION, ps->p);
        frac_start = ps->p;
        ps->p = digits(ps->p, ps->end, &m);
        n_frac = (size_t)(ps->p - frac_start);
        is_double = true;
    }
    int exp = 0;
    if (peek(ps) == 'e' || peek(ps) == 'E') {
        ps->p++;
        bool exp_minus = false;
        if (peek(ps) == '+' || peek(ps) == '-')
            exp_minus = *ps->p++ == '-';
        if (!is_digit(peek(ps)))
            return fail(ps, E_MISS_EXPONENT, ps->p);
        /* rapidjson refuses a positive exponent past 308 (less the fraction digits) outright,
         * whatever the significand; a negative one just underflows. */
        size_t e = 0;
        while (is_digit(peek(ps))) {
            if (e <= 1000000)
                e = e * 10 + (size_t)(*ps->p - '0');
            ps->p++;
            if (!exp_minus && e > 308 + n_frac)
                return fail(ps, E_TOO_BIG, start);
        }
        exp = e > 1000000 ? 1000000 : (int)e;
        if (exp_minus)
            exp = -exp;
        is_double = true;
    }
    v->type = TFS__J_NUMBER;
    if (!is_double && n_int <= 20) {
        /* An integer: int64 while it fits (down to -2^63), uint64 up to 2^64 - 1. */
        uint64_t u = m;
        bool     ok = n_int < 20 || twenty_digits(int_start, &u);
        if (ok && minus && u <= (uint64_t)INT64_MAX + 1) {
            v->num = TFS__JNUM_INT;
            v->i = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
            return true;
        }
        if (ok && !minus) {
            v->num = u <= (uint64_t)INT64_MAX ? TFS__JNUM_INT : TFS__JNUM_UINT;
            v->u = u;
            return true;
        }
    }
    /* Significant digits: all of them but the zeros before the first nonzero one (a "0" integer
     * part and the fraction's leading zeros), counted only when there may be too many. */
    size_t significant = n_int + n_frac;
    if (significant > 19 && *int_start == '0') {
        const char *z = frac_start;
        significant--;
        while (z && z < ps->p && *z == '0')
            z++, significant--;
    }
    double d;
    if (!(significant <= 19 && decimal_fast(m, (int64_t)exp - (int64_t)n_frac, &d))) {
        bool oom = false;
        d = strtod_token(start, ps->p, &oom);
        if (oom)
            return out_of_memory(ps);
    } else if (minus) {
        d = -d;
    }
    if (isinf(d))
        return fail(ps, E_TOO_BIG, start);
    v->num = TFS__JNUM_DOUBLE;
    v->d = d;
    return true;
}

/* ---- values --------------------------------------------------------------------------------- */

static bool literal(parser *ps, const char *rest, enum tfs__jtype type)
{
    ps->p++;
    for (; *rest; rest++, ps->p++)
        if (peek(ps) != (unsigned char)*rest)
            return fail(ps, E_VALUE_INVALID, ps->p);
    tfs__jv v = {.type = (uint8_t)type};
    return push_value(ps, &v);
}

/* A scalar at ps->p onto the value stack. */
static bool scalar(parser *ps)
{
    tfs__jv v = {0};
    switch (peek(ps)) {
    case 'n': return literal(ps, "ull", TFS__J_NULL);
    case 't': return literal(ps, "rue", TFS__J_TRUE);
    case 'f': return literal(ps, "alse", TFS__J_FALSE);
    case '"':
        if (!string(ps, &v))
            return false;
        break;
    default:
        return number(ps, &v) && push_number(ps, &v);
    }
    return push_value(ps, &v);
}

/* rapidjson's ParseValue / ParseArray / ParseObject, with the recursion turned into the frame
 * stack: each label is a point in those functions. */
static bool parse_document(parser *ps)
{
    skip_ws(ps);
    if (peek(ps) == 0)
        return fail(ps, E_EMPTY, ps->p);
value:
    switch (peek(ps)) {
    case '[':
        ps->p++;
        if (!open_container(ps, false))
            return false;
        skip_ws(ps);
        if (peek(ps) == ']') {
            ps->p++;
            if (!close_container(ps))
                return false;
            goto after_value;
        }
        goto value;
    case '{':
        ps->p++;
        if (!open_container(ps, true))
            return false;
        skip_ws(ps);
        if (peek(ps) == '}') {
            ps->p++;
            if (!close_container(ps))
                return false;
            goto after_value;
        }
        goto member;
    default:
        if (ps->fn && ps->fs[ps->fn - 1].packed && (is_digit(peek(ps)) || peek(ps) == '-'))
            goto packed_numbers;
        if (!scalar(ps))
            return false;
        goto after_value;
    }
packed_numbers:
    /* What most predict bodies are made of, "[0.5, 0.25, ...]": numbers into a packed array
     * in one loop, without the value dispatch for each. */
    for (;;) {
        tfs__jv v = {0};
        if (!number(ps, &v) || !push_packed(ps, &v))
            return false;
        skip_ws(ps);
        if (peek(ps) != ',')
            goto after_value;
        ps->p++;
        skip_ws(ps);
        if (!is_digit(peek(ps)) && peek(ps) != '-')
            goto value;
    }
member:
    if (peek(ps) != '"')
        return fail(ps, E_OBJECT_MISS_NAME, ps->p);
    if (!scalar(ps))
        return false;
    skip_ws(ps);
    if (peek(ps) != ':')
        return fail(ps, E_OBJECT_MISS_COLON, ps->p);
    ps->p++;
    skip_ws(ps);
    goto value;
after_value:
    if (ps->fn == 0)
        goto done;
    skip_ws(ps);
    switch (peek(ps)) {
    case ',':
        ps->p++;
        skip_ws(ps);
        if (ps->fs[ps->fn - 1].object)
            goto member;
        goto value;
    case ']':
    case '}':
        if ((peek(ps) == '}') != ps->fs[ps->fn - 1].object)
            break;
        ps->p++;
        if (!close_container(ps))
            return false;
        goto after_value;
    default:
        break;
    }
    return fail(ps, ps->fs[ps->fn - 1].object ? E_OBJECT_MISS_COMMA : E_ARRAY_MISS_COMMA, ps->p);
done:
    skip_ws(ps);
    if (peek(ps) != 0)
        return fail(ps, E_ROOT_NOT_SINGULAR, ps->p);
    return true;
}

enum tfs_code tfs__jdoc_parse(tfs__jdoc *d, const char *text, size_t len, tfs_status *st)
{
    parser ps = {.base = text, .p = text, .end = text + len, .doc = d};
    ps.stack = (char *)ps.stack_inline;
    ps.cap = sizeof ps.stack_inline;
    ps.kinds = ps.kinds_inline;
    ps.kcap = sizeof ps.kinds_inline;
    ps.fs = ps.fs_inline;
    ps.fcap = sizeof ps.fs_inline / sizeof ps.fs_inline[0];

    tfs__jdoc_deinit(d);
    enum tfs_code code = TFS_OK;
    if (len > UINT32_MAX) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "JSON Parse error: documents over 4 GiB are not supported");
    } else if (!parse_document(&ps)) {
        if (ps.oom)
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory parsing a %zu-byte request",
                           len);
        else
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s at offset: %zu", perr_text[ps.err],
                           ps.err_at);
    } else {
        tfs__jv *root = arena_alloc(d, sizeof *root);
        if (root) {
            memcpy(root, ps.stack, sizeof *root);
            d->root = root;
        } else {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory parsing a %zu-byte request",
                           len);
        }
    }
    tfs_free(ps.stack_chunk);
    if (ps.kinds != ps.kinds_inline)
        tfs_free(ps.kinds);
    if (ps.fs != ps.fs_inline)
        tfs_free(ps.fs);
    if (code != TFS_OK) {
        tfs__jdoc_deinit(d);
        return code;
    }
    tfs_status_clear(st);
    return TFS_OK;
}

/* ---- access --------------------------------------------------------------------------------- */

const tfs__jv *tfs__jv_get(const tfs__jv *obj, const char *key)
{
    if (obj->type != TFS__J_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (uint32_t i = 0; i < obj->n; i++) {
        const tfs__jv *k = &obj->items[2 * i];
        if (k->n == n && memcmp(k->s, key, n) == 0)
            return &obj->items[2 * i + 1];
    }
    return NULL;
}

const char *tfs__jv_type_name(const tfs__jv *v)
{
    switch (v->type) {
    case TFS__J_NULL:   return "Null";
    case TFS__J_FALSE:  return "False";
    case TFS__J_TRUE:   return "True";
    case TFS__J_OBJECT: return "Object";
    case TFS__J_ARRAY:  return "Array";
    case TFS__J_STRING: return "String";
    default:            return "Number";
    }
}
