/* The protobuf text-format parser behind every config file (see proto/textformat.h): a recursive
 * descent over the tokens of textformat-lex.c, driven by protobuf-c's descriptors, so one parser
 * fills any generated message type. Hand-written because no C library reads text format
 * (protobuf-c has no text support; only C++ protobuf does).
 *
 * Memory: the message tree is built with plain malloc/realloc, protobuf-c's default allocator, so
 * the caller frees it with protobuf_c_message_free_unpacked(msg, NULL). The tree is consistent
 * after every step (a repeated array holds exactly n_ valid elements, a oneof case names the
 * member that is set), so a failure at any point frees the partial tree the same way. What one
 * input may make us allocate is capped (TREE_BUDGET) because small texts like `c{}` expand into
 * large structs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/textformat-impl.h"
#include "proto/textformat.h"
#include "runtime/alloc.h"
#include "runtime/buf.h"

#define MAX_DEPTH   100
#define MAX_FILE    ((size_t)64 << 20)
#define TREE_BUDGET ((size_t)1 << 30)

typedef struct parser {
    tfs__tf_lexer        lx;
    tfs_status          *st;
    size_t               budget;   /* bytes the tree may still take */
    tfs_textformat_locs *locs;     /* NULL: positions are not recorded */
} parser;

/* ---- helpers ---------------------------------------------------------------------------------- */

static enum tfs_code perr(parser *p, const tfs__tf_token *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* INVALID_ARGUMENT at token `at`. */
static enum tfs_code perr(parser *p, const tfs__tf_token *at, const char *fmt, ...)
{
    char    what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tfs__tf_error(&p->lx, at->line, at->col, TFS_INVALID_ARGUMENT, p->st, "%s", what);
}

static enum tfs_code oom(parser *p)
{
    return tfs__tf_error(&p->lx, p->lx.tok.line, p->lx.tok.col, TFS_RESOURCE_EXHAUSTED, p->st,
                         p->budget == 0 ? "the parsed message would take more than 1 GiB"
                                        : "out of memory");
}

static bool charge(parser *p, size_t n)
{
    if (n > p->budget) {
        p->budget = 0;
        return false;
    }
    p->budget -= n;
    return true;
}

static bool is_sym(const tfs__tf_token *t, char c)
{
    return t->kind == TFS__TF_SYMBOL && t->p[0] == c;
}

static bool ident_is(const tfs__tf_token *t, const char *s)
{
    return t->kind == TFS__TF_IDENT && t->n == strlen(s) && memcmp(t->p, s, t->n) == 0;
}

/* Consumes symbol c if it is next. */
static enum tfs_code accept(parser *p, char c, bool *found)
{
    *found = is_sym(&p->lx.tok, c);
    return *found ? tfs__tf_next(&p->lx, p->st) : TFS_OK;
}

static enum tfs_code expect(parser *p, char c, const char *context)
{
    if (is_sym(&p->lx.tok, c))
        return tfs__tf_next(&p->lx, p->st);
    char found[64], want[4] = {'\'', c, '\'', 0};
    tfs__tf_describe(&p->lx.tok, found, sizeof found);
    char what[160];
    snprintf(what, sizeof what, "%s%s", want, context);
    return perr(p, &p->lx.tok, "expected %s, found %s", what, found);
}

static void *field_ptr(ProtobufCMessage *m, unsigned offset)
{
    return (char *)m + offset;
}

static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_FLOAT:  return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:   return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:  return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    }
    return 8;
}

/* Capacity of a repeated array holding n elements: we grow by doubling from 4, so the capacity is
 * a function of n and needs no storage of its own. */
static size_t capacity(size_t n)
{
    if (n == 0)
        return 0;
    size_t c = 4;
    while (c < n)
        c *= 2;
    return c;
}

/* Appends one element (elem bytes) to the repeated field f of m. */
static enum tfs_code append_elem(parser *p, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                                 const void *elem)
{
    size_t *n = field_ptr(m, f->quantifier_offset);
    void  **arr = field_ptr(m, f->offset);
    size_t  es = elem_size(f->type), cap = capacity(*n);
    if (*n == cap) {
        size_t ncap = cap ? cap * 2 : 4;
        if (!charge(p, (ncap - cap) * es))
            return oom(p);
        void *a = realloc(*arr, ncap * es);
        if (!a)
            return oom(p);
        *arr = a;
    }
    memcpy((char *)*arr + *n * es, elem, es);
    (*n)++;
    return TFS_OK;
}

/* Marks a singular field present: proto2 has_ flags, oneof cases. */
static void set_present(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        *(uint32_t *)field_ptr(m, f->quantifier_offset) = f->id;
    else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
             f->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)field_ptr(m, f->quantifier_offset) = 1;
}

static ProtobufCMessage *new_message(parser *p, const ProtobufCMessageDescriptor *d)
{
    if (!charge(p, d->sizeof_message))
        return NULL;
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (m)
        protobuf_c_message_init(d, m);
    return m;
}

/* ---- scalar values ---------------------------------------------------------------------------- */

typedef union scalar {
    int32_t            i32;
    uint32_t           u32;
    int64_t            i64;
    uint64_t           u64;
    float              f;
    double             d;
    protobuf_c_boolean b;
    char              *s;
    ProtobufCBinaryData bytes;
} scalar;

/* An optional '-' then an integer token: magnitude and sign. */
static enum tfs_code read_int(parser *p, const ProtobufCFieldDescriptor *f, bool *neg,
                              uint64_t *mag, tfs__tf_token *at)
{
    bool          minus;
    enum tfs_code code = accept(p, '-', &minus);
    if (code != TFS_OK)
        return code;
    *neg = minus;
    *at = p->lx.tok;
    if (at->kind != TFS__TF_INT) {
        char found[64];
        tfs__tf_describe(at, found, sizeof found);
        return perr(p, at, "expected an integer for field '%s', found %s", f->name, found);
    }
    if (!tfs__tf_int_value(at, mag))
        return perr(p, at, "integer out of range for field '%s'", f->name);
    return tfs__tf_next(&p->lx, p->st);
}

static enum tfs_code read_integer(parser *p, const ProtobufCFieldDescriptor *f, scalar *v)
{
    bool          neg;
    uint64_t      mag;
    tfs__tf_token at;
    enum tfs_code code = read_int(p, f, &neg, &mag, &at);
    if (code != TFS_OK)
        return code;
    bool is_signed = f->type == PROTOBUF_C_TYPE_INT32 || f->type == PROTOBUF_C_TYPE_SINT32 ||
                     f->type == PROTOBUF_C_TYPE_SFIXED32 || f->type == PROTOBUF_C_TYPE_INT64 ||
                     f->type == PROTOBUF_C_TYPE_SINT64 || f->type == PROTOBUF_C_TYPE_SFIXED64;
    bool     wide = elem_size(f->type) == 8;
    uint64_t max = is_signed ? (wide ? (uint64_t)INT64_MAX : (uint64_t)INT32_MAX)
                             : (wide ? UINT64_MAX : (uint64_t)UINT32_MAX);
    if (neg && !is_signed && mag != 0)
        goto range;
    if (neg ? mag > max + 1 : mag > max)
        goto range;
    if (is_signed) {
        int64_t x = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag)
                        : (int64_t)mag;
        if (wide)
            v->i64 = x;
        else
            v->i32 = (int32_t)x;
    } else if (wide) {
        v->u64 = mag;
    } else {
        v->u32 = (uint32_t)mag;
    }
    return TFS_OK;
range:;
    static const char *const type_names[] = {
        [PROTOBUF_C_TYPE_INT32] = "int32",     [PROTOBUF_C_TYPE_SINT32] = "sint32",
        [PROTOBUF_C_TYPE_SFIXED32] = "sfixed32", [PROTOBUF_C_TYPE_INT64] = "int64",
        [PROTOBUF_C_TYPE_SINT64] = "sint64",   [PROTOBUF_C_TYPE_SFIXED64] = "sfixed64",
        [PROTOBUF_C_TYPE_UINT32] = "uint32",   [PROTOBUF_C_TYPE_FIXED32] = "fixed32",
        [PROTOBUF_C_TYPE_UINT64] = "uint64",   [PROTOBUF_C_TYPE_FIXED64] = "fixed64",
    };
    const char *tn = (unsigned)f->type < sizeof type_names / sizeof type_names[0] &&
                             type_names[f->type] ? type_names[f->type] : "integer";
    return perr(p, &at, "integer out of range for field '%s' (%s)", f->name, tn);
}

static enum tfs_code read_double(parser *p, const ProtobufCFieldDescriptor *f, double *out)
{
    bool          neg;
    enum tfs_code code = accept(p, '-', &neg);
    if (code != TFS_OK)
        return code;
    tfs__tf_token t = p->lx.tok;
    double        d;
    uint64_t      u;
    if (t.kind == TFS__TF_INT) {
        if (!tfs__tf_int_value(&t, &u))
            d = HUGE_VAL;   /* protobuf reads such a literal as a double too */
        else
            d = (double)u;
    } else if (t.kind == TFS__TF_FLOAT) {
        char buf[128];
        if (t.n >= sizeof buf)
            return perr(p, &t, "number too long for field '%s'", f->name);
        memcpy(buf, t.p, t.n);
        buf[t.n] = 0;
        if (t.n && (buf[t.n - 1] == 'f' || buf[t.n - 1] == 'F'))
            buf[t.n - 1] = 0;
        d = strtod(buf, NULL);   /* the lexer checked the syntax; overflow gives inf as wanted */
    } else if (t.kind == TFS__TF_IDENT && t.n <= 8) {
        char buf[9];
        memcpy(buf, t.p, t.n);
        buf[t.n] = 0;
        if (strcasecmp(buf, "inf") == 0 || strcasecmp(buf, "infinity") == 0)
            d = INFINITY;
        else if (strcasecmp(buf, "nan") == 0)
            d = NAN;
        else
            goto bad;
    } else {
        goto bad;
    }
    *out = neg ? -d : d;
    return tfs__tf_next(&p->lx, p->st);
bad:;
    char found[64];
    tfs__tf_describe(&t, found, sizeof found);
    return perr(p, &t, "expected a number for field '%s', found %s", f->name, found);
}

static enum tfs_code read_bool(parser *p, const ProtobufCFieldDescriptor *f, scalar *v)
{
    const tfs__tf_token *t = &p->lx.tok;
    uint64_t             u;
    if (ident_is(t, "true") || ident_is(t, "True") || ident_is(t, "t"))
        v->b = 1;
    else if (ident_is(t, "false") || ident_is(t, "False") || ident_is(t, "f"))
        v->b = 0;
    else if (t->kind == TFS__TF_INT && tfs__tf_int_value(t, &u) && u <= 1)
        v->b = (protobuf_c_boolean)u;
    else {
        char found[64];
        tfs__tf_describe(t, found, sizeof found);
        return perr(p, t, "expected true or false for field '%s', found %s", f->name, found);
    }
    return tfs__tf_next(&p->lx, p->st);
}

static enum tfs_code read_enum(parser *p, const ProtobufCFieldDescriptor *f, scalar *v)
{
    const ProtobufCEnumDescriptor *ed = f->descriptor;
    const ProtobufCEnumValue      *ev = NULL;
    tfs__tf_token                  t = p->lx.tok;
    if (t.kind == TFS__TF_IDENT) {
        char name[256];
        if (t.n < sizeof name) {
            memcpy(name, t.p, t.n);
            name[t.n] = 0;
            ev = protobuf_c_enum_descriptor_get_value_by_name(ed, name);
        }
        if (!ev) {
            char found[64];
            tfs__tf_describe(&t, found, sizeof found);
            return perr(p, &t, "unknown enum value %s for field '%s'", found, f->name);
        }
        v->i32 = ev->value;
        return tfs__tf_next(&p->lx, p->st);
    }
    if (t.kind == TFS__TF_INT || is_sym(&t, '-')) {
        bool          neg;
        uint64_t      mag;
        tfs__tf_token at;
        enum tfs_code code = read_int(p, f, &neg, &mag, &at);
        if (code != TFS_OK)
            return code;
        if (mag <= (uint64_t)INT32_MAX + (neg ? 1 : 0))
            ev = protobuf_c_enum_descriptor_get_value(ed, neg ? (int)-(int64_t)mag : (int)mag);
        if (!ev) {
            char found[64];
            tfs__tf_describe(&at, found, sizeof found);
            return perr(p, &at, "unknown enum number %s for field '%s'", found, f->name);
        }
        v->i32 = ev->value;
        return TFS_OK;
    }
    char found[64];
    tfs__tf_describe(&t, found, sizeof found);
    return perr(p, &t, "expected an enum value for field '%s', found %s", f->name, found);
}

/* One or more adjacent string literals, concatenated, into malloc'ed bytes. */
static enum tfs_code read_string(parser *p, const ProtobufCFieldDescriptor *f, scalar *v)
{
    tfs__tf_token first = p->lx.tok;
    if (first.kind != TFS__TF_STRING) {
        char found[64];
        tfs__tf_describe(&first, found, sizeof found);
        return perr(p, &first, "expected a string for field '%s', found %s", f->name, found);
    }
    char         *buf = NULL;
    size_t        len = 0, cap = 0;
    enum tfs_code code;
    while (p->lx.tok.kind == TFS__TF_STRING) {
        if ((code = tfs__tf_unescape(&p->lx, &p->lx.tok, &buf, &len, &cap, p->st)) != TFS_OK)
            goto fail;
        if ((code = tfs__tf_next(&p->lx, p->st)) != TFS_OK)
            goto fail;
    }
    if (!charge(p, cap)) {
        code = oom(p);
        goto fail;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        /* A char * cannot hold a NUL: refuse it rather than cut the value short. */
        if (memchr(buf, 0, len)) {
            code = perr(p, &first, "string for field '%s' contains a NUL byte", f->name);
            goto fail;
        }
        v->s = buf;
    } else {
        v->bytes.len = len;
        v->bytes.data = (uint8_t *)buf;
    }
    return TFS_OK;
fail:
    free(buf);
    return code;
}

/* Reads one value of scalar field f and stores it (appending when repeated). */
static enum tfs_code parse_scalar(parser *p, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    scalar        v;
    enum tfs_code code;
    memset(&v, 0, sizeof v);
    switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT: {
        double d;
        if ((code = read_double(p, f, &d)) != TFS_OK)
            return code;
        /* protobuf's SafeDoubleToFloat: out-of-range finite values saturate to infinity. */
        v.f = d > FLT_MAX ? INFINITY : d < -FLT_MAX ? -INFINITY : (float)d;
        break;
    }
    case PROTOBUF_C_TYPE_DOUBLE:
        code = read_double(p, f, &v.d);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        code = read_bool(p, f, &v);
        break;
    case PROTOBUF_C_TYPE_ENUM:
        code = read_enum(p, f, &v);
        break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
        code = read_string(p, f, &v);
        break;
    case PROTOBUF_C_TYPE_MESSAGE:
        return TFS_INTERNAL;   /* not reached: messages go through parse_submessage */
    default:
        code = read_integer(p, f, &v);
        break;
    }
    if (code != TFS_OK)
        return code;
    bool owned = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        code = append_elem(p, m, f, &v);
        if (code != TFS_OK && owned)
            free(f->type == PROTOBUF_C_TYPE_STRING ? (void *)v.s : (void *)v.bytes.data);
        return code;
    }
    void *slot = field_ptr(m, f->offset);
    /* A field is set once (the caller refuses repeats), but free a non-default value anyway so
     * that no path can leak it. */
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        char *old = *(char **)slot;
        if (old && old != f->default_value)
            free(old);
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        const ProtobufCBinaryData *def = f->default_value;
        uint8_t                   *old = ((ProtobufCBinaryData *)slot)->data;
        if (old && (!def || def->data != old))
            free(old);
    }
    memcpy(slot, &v, elem_size(f->type));
    set_present(m, f);
    return TFS_OK;
}

/* ---- messages --------------------------------------------------------------------------------- */

static enum tfs_code parse_message(parser *p, ProtobufCMessage *m, char close, int depth,
                                   const tfs__tf_token *open);

static enum tfs_code record_loc(parser *p, const ProtobufCMessage *m, const tfs__tf_token *open)
{
    tfs_textformat_locs *l = p->locs;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        tfs_textformat_loc *v = tfs_realloc(l->v, cap * sizeof *v);
        if (!v)
            return oom(p);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (tfs_textformat_loc){.msg = m, .line = open->line, .col = open->col};
    return TFS_OK;
}

/* '{' fields '}' or '<' fields '>' into a new element of repeated f, or into singular f. */
static enum tfs_code parse_submessage(parser *p, ProtobufCMessage *m,
                                      const ProtobufCFieldDescriptor *f, int depth)
{
    tfs__tf_token open = p->lx.tok;
    char          close = is_sym(&open, '{') ? '}' : is_sym(&open, '<') ? '>' : 0;
    if (!close) {
        char found[64];
        tfs__tf_describe(&open, found, sizeof found);
        return perr(p, &open, "expected '{' or '<' to open message field '%s', found %s", f->name,
                    found);
    }
    if (depth + 1 > MAX_DEPTH)
        return tfs__tf_error(&p->lx, open.line, open.col, TFS_INVALID_ARGUMENT, p->st,
                             "messages nested deeper than %d levels", MAX_DEPTH);
    enum tfs_code code = tfs__tf_next(&p->lx, p->st);
    if (code != TFS_OK)
        return code;
    ProtobufCMessage *sub;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (!(sub = new_message(p, f->descriptor)))
            return oom(p);
        if ((code = append_elem(p, m, f, &sub)) != TFS_OK) {
            free(sub);
            return code;
        }
    } else {
        ProtobufCMessage **slot = field_ptr(m, f->offset);
        if (!*slot) {
            if (!(*slot = new_message(p, f->descriptor)))
                return oom(p);
            set_present(m, f);
        }
        sub = *slot;
    }
    if (p->locs && (code = record_loc(p, sub, &open)) != TFS_OK)
        return code;
    return parse_message(p, sub, close, depth + 1, &open);
}

/* `[` v, v, ... `]` for a repeated field (empty allowed); the '[' is the current token. */
static enum tfs_code parse_list(parser *p, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                                int depth)
{
    bool          done;
    enum tfs_code code = tfs__tf_next(&p->lx, p->st);
    if (code != TFS_OK || (code = accept(p, ']', &done)) != TFS_OK || done)
        return code;
    for (;;) {
        code = f->type == PROTOBUF_C_TYPE_MESSAGE ? parse_submessage(p, m, f, depth)
                                                  : parse_scalar(p, m, f);
        if (code != TFS_OK || (code = accept(p, ',', &done)) != TFS_OK)
            return code;
        if (!done)
            return expect(p, ']', " or ',' in the list");
    }
}

static enum tfs_code check_required(parser *p, const ProtobufCMessageDescriptor *d,
                                    const uint8_t *seen, const tfs__tf_token *at)
{
    for (unsigned i = 0; i < d->n_fields; i++)
        if (d->fields[i].label == PROTOBUF_C_LABEL_REQUIRED && !seen[i])
            return perr(p, at, "message %s is missing required field '%s'", d->name,
                        d->fields[i].name);
    return TFS_OK;
}

static enum tfs_code parse_field(parser *p, ProtobufCMessage *m, uint8_t *seen, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    tfs__tf_token                     name = p->lx.tok;
    const ProtobufCFieldDescriptor   *f = NULL;
    char                              buf[256];
    if (is_sym(&name, '['))
        return perr(p, &name, "extensions and Any expansions ('[...]') are not supported");
    if (name.kind != TFS__TF_IDENT) {
        tfs__tf_describe(&name, buf, sizeof buf);
        return perr(p, &name, "expected a field name, found %s", buf);
    }
    if (name.n < sizeof buf) {
        memcpy(buf, name.p, name.n);
        buf[name.n] = 0;
        f = protobuf_c_message_descriptor_get_field_by_name(d, buf);
    }
    if (!f) {
        tfs__tf_describe(&name, buf, sizeof buf);
        return perr(p, &name, "unknown field %s in %s", buf, d->name);
    }
    size_t idx = (size_t)(f - d->fields);
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        if (seen[idx])
            return perr(p, &name, "non-repeated field '%s' is specified multiple times",
                        f->name);
        uint32_t set_case = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                                ? *(uint32_t *)field_ptr(m, f->quantifier_offset) : 0;
        if (set_case && set_case != f->id) {
            const ProtobufCFieldDescriptor *other = protobuf_c_message_descriptor_get_field(d,
                                                                                    set_case);
            return perr(p, &name, "field '%s' is specified along with field '%s', another "
                        "member of the same oneof", f->name, other ? other->name : "?");
        }
        seen[idx] = 1;
    }
    enum tfs_code code = tfs__tf_next(&p->lx, p->st);
    bool          colon, list = false;
    if (code != TFS_OK)
        return code;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if ((code = accept(p, ':', &colon)) != TFS_OK)
            return code;
    } else {
        snprintf(buf, sizeof buf, " after field '%s'", f->name);
        if ((code = expect(p, ':', buf)) != TFS_OK)
            return code;
    }
    list = f->label == PROTOBUF_C_LABEL_REPEATED && is_sym(&p->lx.tok, '[');
    if (list)
        code = parse_list(p, m, f, depth);
    else if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        code = parse_submessage(p, m, f, depth);
    else
        code = parse_scalar(p, m, f);
    if (code != TFS_OK)
        return code;
    /* One optional separator between fields. */
    bool sep;
    if ((code = accept(p, ';', &sep)) != TFS_OK || sep)
        return code;
    return accept(p, ',', &sep);
}

/* Fields of m until `close` (0 at the top level: until the end of the input). open is the token
 * that opened m, for the message when the input ends early. */
static enum tfs_code parse_message(parser *p, ProtobufCMessage *m, char close, int depth,
                                   const tfs__tf_token *open)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    uint8_t                           small[64], *seen = small;
    enum tfs_code                     code = TFS_OK;
    if (d->n_fields > sizeof small) {
        if (!(seen = tfs_calloc(d->n_fields, 1)))
            return oom(p);
    } else {
        memset(small, 0, sizeof small);
    }
    for (;;) {
        tfs__tf_token t = p->lx.tok;
        if (t.kind == TFS__TF_END) {
            if (close) {
                char o[64];
                tfs__tf_describe(open, o, sizeof o);
                code = tfs__tf_error(&p->lx, t.line, t.col, TFS_INVALID_ARGUMENT, p->st,
                                     "expected '%c' before end of input (to close the %s at "
                                     "%d:%d)", close, o, open->line, open->col);
                goto done;
            }
            code = check_required(p, d, seen, &t);
            goto done;
        }
        if (close && is_sym(&t, close)) {
            if ((code = check_required(p, d, seen, &t)) == TFS_OK)
                code = tfs__tf_next(&p->lx, p->st);
            goto done;
        }
        if ((code = parse_field(p, m, seen, depth)) != TFS_OK)
            goto done;
    }
done:
    if (seen != small)
        tfs_free(seen);
    return code;
}

/* ---- entry points ----------------------------------------------------------------------------- */

enum tfs_code tfs_textformat_parse(const ProtobufCMessageDescriptor *desc, const char *text,
                                   size_t len, const char *filename, ProtobufCMessage **out,
                                   tfs_status *st)
{
    return tfs_textformat_parse_located(desc, text, len, filename, out, NULL, st);
}

enum tfs_code tfs_textformat_parse_located(const ProtobufCMessageDescriptor *desc, const char *text,
                                           size_t len, const char *filename,
                                           ProtobufCMessage **out, tfs_textformat_locs *locs,
                                           tfs_status *st)
{
    parser p;
    *out = NULL;
    tfs__tf_init(&p.lx, text, len, filename);
    p.st = st;
    p.budget = TREE_BUDGET;
    p.locs = locs;
    ProtobufCMessage *m = new_message(&p, desc);
    if (!m)
        return oom(&p);
    tfs__tf_token start = {.kind = TFS__TF_END, .p = p.lx.text, .line = 1, .col = 1};
    enum tfs_code code = tfs__tf_next(&p.lx, st);
    if (code == TFS_OK)
        code = parse_message(&p, m, 0, 0, &start);
    if (code != TFS_OK) {
        protobuf_c_message_free_unpacked(m, NULL);
        return code;
    }
    *out = m;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_textformat_parse_file(const ProtobufCMessageDescriptor *desc, const char *path,
                                        ProtobufCMessage **out, tfs_status *st)
{
    return tfs_textformat_parse_file_located(desc, path, out, NULL, st);
}

bool tfs_textformat_locate(const tfs_textformat_locs *locs, const void *msg, int *line, int *col)
{
    for (size_t i = 0; locs && i < locs->n; i++) {
        if (locs->v[i].msg == msg) {
            *line = locs->v[i].line;
            *col = locs->v[i].col;
            return true;
        }
    }
    return false;
}

void tfs_textformat_locs_free(tfs_textformat_locs *locs)
{
    if (!locs)
        return;
    tfs_free(locs->v);
    *locs = (tfs_textformat_locs){0};
}

enum tfs_code tfs_textformat_parse_file_located(const ProtobufCMessageDescriptor *desc,
                                                const char *path, ProtobufCMessage **out,
                                                tfs_textformat_locs *locs, tfs_status *st)
{
    tfs__buf      b = {0};
    enum tfs_code code;
    struct stat   sb;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        code = TFS_ERR(st, tfs_code_from_errno(e), "could not open '%s': %s", path, strerror(e));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "could not read '%s': not a regular file", path);
        goto done;
    }
    if ((uint64_t)sb.st_size > MAX_FILE) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "could not read '%s': %lld bytes is more than "
                       "the 64 MiB a text proto may have", path, (long long)sb.st_size);
        goto done;
    }
    /* Read to EOF (the size may change under us), never past the cap: straight into the
     * buffer's spare room, all of it but the byte its NUL needs. */
    if (!tfs__buf_reserve(&b, (size_t)sb.st_size)) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading '%s'", path);
        goto done;
    }
    for (;;) {
        if (b.cap - b.len <= 1) {
            if (b.len > MAX_FILE) {
                code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "could not read '%s': more than the 64 "
                               "MiB a text proto may have", path);
                goto done;
            }
            if (!tfs__buf_reserve(&b, b.len)) {
                code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading '%s'", path);
                goto done;
            }
        }
        ssize_t r = read(fd, b.data + b.len, b.cap - b.len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            code = TFS_ERR(st, tfs_code_from_errno(errno), "could not read '%s': %s", path,
                           strerror(errno));
            goto done;
        }
        if (r == 0)
            break;
        b.len += (size_t)r;
        b.data[b.len] = 0;
    }
    code = tfs_textformat_parse_located(desc, b.data, b.len, path, out, locs, st);
done:
    if (fd >= 0)
        close(fd);
    tfs__buf_deinit(&b);
    return code;
}
