/* Op signatures: the ops.def text of each op parsed into tfs_op_signature (op-signature.h).
 *
 * Written here rather than taken from a library: the text is TensorFlow's REGISTER_OP spec syntax
 * ("x: T, y: T -> z: T; T: {float, double}; transpose_a: bool = false"), which no C library
 * parses. The grammar (ops.def's header says it for writers):
 *
 *   signature := [args] "->" [args] { ";" attr }
 *   args      := arg { "," arg }
 *   arg       := NAME ":" [ "Ref(" ] [ NUMBER_ATTR "*" ] TYPE [ ")" ]
 *                TYPE names an attr of kind type (type_attr) or list(type) (type_list_attr),
 *                else it is a dtype ("float", "resource")
 *   attr      := NAME ":" kind [ ">=" INT ] [ "=" value ]
 *   kind      := type | int | float | bool | string | shape | tensor | func
 *              | "{" dtype {"," dtype} "}"        a type with allowed values
 *              | "{" 'str' {"," 'str'} "}"        a string with allowed values
 *              | "list(" kind ")"
 *   value     := true | false | INT | FLOAT | 'str' | dtype | "?" (unknown-rank shape)
 *              | "[" [value {"," value}] "]"     (a list, or a shape's dims)
 *
 * The table is parsed once, on first use, and kept for the life of the process.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/op-signature.h"
#include "runtime/runtime-impl.h"

static const char *const op_texts[TFS_OP_COUNT] = {
#define TFS_OP(e, name, kernel, nout, flags, sig) [TFS_OP_##e] = sig,
#include "runtime/ops.def"
#undef TFS_OP
};

/* ---- the parser ----------------------------------------------------------------------------- */

typedef struct parser {
    const char *text, *p;
    const char *op;
    tfs_status *st;
    bool        failed;
} parser;

static void fail(parser *ps, const char *what)
{
    if (!ps->failed)
        TFS_ERR(ps->st, TFS_INVALID_ARGUMENT, "op %s signature, at offset %d of \"%s\": %s",
                ps->op, (int)(ps->p - ps->text), ps->text, what);
    ps->failed = true;
}

static void skip_space(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

/* Consumes `lit` (after spaces) when it comes next. */
static bool accept(parser *ps, const char *lit)
{
    skip_space(ps);
    size_t n = strlen(lit);
    if (strncmp(ps->p, lit, n))
        return false;
    ps->p += n;
    return true;
}

static void expect(parser *ps, const char *lit)
{
    if (!ps->failed && !accept(ps, lit)) {
        char msg[64];
        snprintf(msg, sizeof msg, "expected '%s'", lit);
        fail(ps, msg);
    }
}

/* A name ([A-Za-z_][A-Za-z0-9_]*) as a new string, or NULL (failed) when none comes next. */
static char *name(parser *ps)
{
    skip_space(ps);
    const char *s = ps->p;
    if (!isalpha((unsigned char)*s) && *s != '_') {
        fail(ps, "expected a name");
        return NULL;
    }
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
        ps->p++;
    char *n = tfs_strndup(s, (size_t)(ps->p - s));
    if (!n)
        fail(ps, "out of memory");
    return n;
}

/* True when a name comes next and equals `word` (not a prefix of a longer name). */
static bool accept_word(parser *ps, const char *word)
{
    skip_space(ps);
    size_t n = strlen(word);
    if (strncmp(ps->p, word, n) || isalnum((unsigned char)ps->p[n]) || ps->p[n] == '_')
        return false;
    ps->p += n;
    return true;
}

static enum tfs_dtype dtype(parser *ps)
{
    char *n = name(ps);
    enum tfs_dtype dt = tfs_dtype_from_short_name(n);
    if (n && dt == TFS_DTYPE_INVALID)
        fail(ps, "unknown dtype");
    tfs_free(n);
    return dt;
}

static bool string_lit(parser *ps, tfs_string *out)
{
    skip_space(ps);
    if (*ps->p != '\'') {
        fail(ps, "expected a 'string'");
        return false;
    }
    const char *s = ++ps->p;
    while (*ps->p && *ps->p != '\'')
        ps->p++;
    if (!*ps->p) {
        fail(ps, "unterminated string");
        return false;
    }
    out->len = (size_t)(ps->p - s);
    out->data = tfs_strndup(s, out->len);
    ps->p++;
    if (!out->data)
        fail(ps, "out of memory");
    return out->data != NULL;
}

static int64_t int_lit(parser *ps)
{
    skip_space(ps);
    char *end;
    errno = 0;
    long long v = strtoll(ps->p, &end, 10);
    if (end == ps->p || errno)
        fail(ps, "expected an integer");
    ps->p = end;
    return v;
}

static float float_lit(parser *ps)
{
    skip_space(ps);
    char *end;
    float v = strtof(ps->p, &end);
    if (end == ps->p)
        fail(ps, "expected a number");
    ps->p = end;
    return v;
}

/* ---- attr kinds and values ------------------------------------------------------------------ */

/* An attr's kind: its element kind and whether it is a list, as parsed from the text. */
typedef struct kind {
    enum tfs_attr_kind elem;
    bool               list;
    tfs_attr_value     allowed;   /* list of types or strings, or none */
} kind;

static const char *kind_type_name(const kind *k)
{
    static const char *const names[][2] = {
        [TFS_ATTR_S] = {"string", "list(string)"},   [TFS_ATTR_I] = {"int", "list(int)"},
        [TFS_ATTR_F] = {"float", "list(float)"},     [TFS_ATTR_B] = {"bool", "list(bool)"},
        [TFS_ATTR_TYPE] = {"type", "list(type)"},    [TFS_ATTR_SHAPE] = {"shape", "list(shape)"},
        [TFS_ATTR_TENSOR] = {"tensor", "list(tensor)"}, [TFS_ATTR_FUNC] = {"func", "list(func)"},
    };
    return names[k->elem][k->list];
}

/* Appends one element to list value v (of element kind `elem`); false when out of memory. */
static bool list_grow(tfs_attr_list *l, enum tfs_attr_kind elem, size_t size)
{
    void *grown = tfs_realloc(l->s, (size_t)(l->n + 1) * size);
    if (!grown)
        return false;
    l->s = grown;   /* every member of the union is the same array pointer */
    l->kind = elem;
    memset((char *)grown + (size_t)l->n * size, 0, size);
    l->n++;
    return true;
}

/* "{float, double}" or "{'SAME', 'VALID'}" after the "{": the allowed values, and their kind. */
static void allowed_set(parser *ps, kind *k)
{
    skip_space(ps);
    bool strings = *ps->p == '\'';
    k->elem = strings ? TFS_ATTR_S : TFS_ATTR_TYPE;
    k->allowed.kind = TFS_ATTR_LIST;
    tfs_attr_list *l = &k->allowed.list;
    do {
        if (!list_grow(l, k->elem, strings ? sizeof *l->s : sizeof *l->type)) {
            fail(ps, "out of memory");
            return;
        }
        if (strings)
            string_lit(ps, &l->s[l->n - 1]);
        else
            l->type[l->n - 1] = dtype(ps);
    } while (!ps->failed && accept(ps, ","));
    expect(ps, "}");
}

static void base_kind(parser *ps, kind *k)
{
    static const struct {
        const char        *word;
        enum tfs_attr_kind elem;
    } words[] = {{"type", TFS_ATTR_TYPE},   {"int", TFS_ATTR_I},       {"float", TFS_ATTR_F},
                 {"bool", TFS_ATTR_B},      {"string", TFS_ATTR_S},    {"shape", TFS_ATTR_SHAPE},
                 {"tensor", TFS_ATTR_TENSOR}, {"func", TFS_ATTR_FUNC}};
    if (accept(ps, "{")) {
        allowed_set(ps, k);
        return;
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (accept_word(ps, words[i].word)) {
            k->elem = words[i].elem;
            return;
        }
    fail(ps, "expected an attr kind");
}

static void parse_kind(parser *ps, kind *k)
{
    if (accept_word(ps, "list")) {
        expect(ps, "(");
        k->list = true;
        if (!ps->failed)
            base_kind(ps, k);
        expect(ps, ")");
        return;
    }
    base_kind(ps, k);
}

static void shape_value(parser *ps, tfs_shape *s)
{
    if (accept(ps, "?")) {
        s->rank = -1;
        return;
    }
    expect(ps, "[");
    s->rank = 0;
    if (accept(ps, "]"))
        return;
    do {
        if (s->rank == TFS_MAX_RANK) {
            fail(ps, "shape of too high a rank");
            return;
        }
        s->dims[s->rank++] = int_lit(ps);
    } while (!ps->failed && accept(ps, ","));
    expect(ps, "]");
}

/* One value of element kind `elem` into v (not a list). */
static void scalar_value(parser *ps, enum tfs_attr_kind elem, tfs_attr_value *v)
{
    v->kind = elem;
    switch (elem) {
    case TFS_ATTR_B:
        if (accept_word(ps, "true"))
            v->b = true;
        else if (accept_word(ps, "false"))
            v->b = false;
        else
            fail(ps, "expected true or false");
        break;
    case TFS_ATTR_I:     v->i = int_lit(ps); break;
    case TFS_ATTR_F:     v->f = float_lit(ps); break;
    case TFS_ATTR_S:     string_lit(ps, &v->s); break;
    case TFS_ATTR_TYPE:  v->type = dtype(ps); break;
    case TFS_ATTR_SHAPE: shape_value(ps, &v->shape); break;
    default:
        v->kind = TFS_ATTR_NONE;
        fail(ps, "defaults of this kind are not supported");
    }
}

static size_t elem_size(enum tfs_attr_kind elem)
{
    const tfs_attr_list *l = NULL;
    switch (elem) {
    case TFS_ATTR_S:     return sizeof *l->s;
    case TFS_ATTR_I:     return sizeof *l->i;
    case TFS_ATTR_F:     return sizeof *l->f;
    case TFS_ATTR_B:     return sizeof *l->b;
    case TFS_ATTR_TYPE:  return sizeof *l->type;
    case TFS_ATTR_SHAPE: return sizeof *l->shape;
    default:             return 0;
    }
}

static void parse_value(parser *ps, const kind *k, tfs_attr_value *v)
{
    if (!k->list) {
        scalar_value(ps, k->elem, v);
        return;
    }
    size_t size = elem_size(k->elem);
    if (!size) {
        fail(ps, "defaults of this kind are not supported");
        return;
    }
    v->kind = TFS_ATTR_LIST;
    expect(ps, "[");
    if (ps->failed || accept(ps, "]"))
        return;
    do {
        tfs_attr_value one = {0};
        scalar_value(ps, k->elem, &one);
        if (ps->failed) {
            tfs_attr_value_clear(&one);
            return;
        }
        if (!list_grow(&v->list, k->elem, size)) {
            tfs_attr_value_clear(&one);
            fail(ps, "out of memory");
            return;
        }
        /* The scalar's union member and a list element of the same kind share a layout. */
        memcpy((char *)v->list.s + (size_t)(v->list.n - 1) * size, &one.s, size);
    } while (accept(ps, ","));
    expect(ps, "]");
}

/* ---- arguments ------------------------------------------------------------------------------ */

/* An argument as written; its type word is resolved against the attrs once they are known. */
typedef struct raw_arg {
    char *name, *number, *type;
    bool  ref;
} raw_arg;

static void parse_arg(parser *ps, raw_arg *a)
{
    a->name = name(ps);
    expect(ps, ":");
    a->ref = accept_word(ps, "Ref");
    if (a->ref)
        expect(ps, "(");
    if (ps->failed)
        return;
    a->type = name(ps);
    if (accept(ps, "*")) {
        a->number = a->type;
        a->type = name(ps);
    }
    if (a->ref)
        expect(ps, ")");
}

/* Arguments up to "->" (inputs) or to ";" / the end (outputs). */
static int parse_args(parser *ps, raw_arg **out, bool inputs)
{
    int n = 0;
    *out = NULL;
    skip_space(ps);
    if (inputs ? !strncmp(ps->p, "->", 2) : (*ps->p == ';' || !*ps->p))
        return 0;
    do {
        raw_arg *grown = tfs_realloc(*out, (size_t)(n + 1) * sizeof **out);
        if (!grown) {
            fail(ps, "out of memory");
            return n;
        }
        *out = grown;
        memset(&grown[n], 0, sizeof grown[n]);
        parse_arg(ps, &grown[n++]);
    } while (!ps->failed && accept(ps, ","));
    return n;
}

static void raw_args_free(raw_arg *a, int n)
{
    for (int i = 0; a && i < n; i++) {
        tfs_free(a[i].name);
        tfs_free(a[i].number);
        tfs_free(a[i].type);
    }
    tfs_free(a);
}

/* ---- a whole signature ---------------------------------------------------------------------- */

/* A signature and what it owns; `pub` is first, so a tfs_op_signature pointer is this too. */
typedef struct owned_sig {
    tfs_op_signature pub;
    tfs_op_arg      *inputs, *outputs;
    tfs_op_attr     *attrs;
    char           **strings;   /* every name the arrays point at */
    int              n_strings;
} owned_sig;

static const char *keep(parser *ps, owned_sig *o, char *s)
{
    if (!s)
        return NULL;
    char **grown = tfs_realloc(o->strings, (size_t)(o->n_strings + 1) * sizeof *grown);
    if (!grown) {
        tfs_free(s);
        fail(ps, "out of memory");
        return NULL;
    }
    o->strings = grown;
    grown[o->n_strings++] = s;
    return s;
}

static const tfs_op_attr *find_attr(const owned_sig *o, const char *name)
{
    for (int i = 0; name && i < o->pub.n_attrs; i++)
        if (!strcmp(o->attrs[i].name, name))
            return &o->attrs[i];
    return NULL;
}

/* Resolves raw args into out (n of them), taking their strings. */
static void resolve_args(parser *ps, owned_sig *o, raw_arg *raw, int n, tfs_op_arg *out)
{
    for (int i = 0; i < n && !ps->failed; i++) {
        tfs_op_arg *a = &out[i];
        a->name = keep(ps, o, raw[i].name);
        raw[i].name = NULL;
        a->is_ref = raw[i].ref;
        if (raw[i].number) {
            const tfs_op_attr *na = find_attr(o, raw[i].number);
            if (!na || strcmp(na->type, "int")) {
                fail(ps, "a list argument's count must name an int attr");
                return;
            }
            a->number_attr = keep(ps, o, raw[i].number);
            raw[i].number = NULL;
        }
        const tfs_op_attr *ta = find_attr(o, raw[i].type);
        if (ta && !strcmp(ta->type, "type")) {
            a->type_attr = keep(ps, o, raw[i].type);
        } else if (ta && !strcmp(ta->type, "list(type)") && !a->number_attr) {
            a->type_list_attr = keep(ps, o, raw[i].type);
        } else {
            a->type = tfs_dtype_from_short_name(raw[i].type);
            if (a->type == TFS_DTYPE_INVALID)
                fail(ps, "an argument's type is neither a type attr nor a dtype");
            tfs_free(raw[i].type);
        }
        raw[i].type = NULL;
    }
}

void tfs_op_signature_free(tfs_op_signature *sig)
{
    owned_sig *o = (owned_sig *)sig;
    if (!o)
        return;
    for (int i = 0; i < o->pub.n_attrs; i++) {
        tfs_attr_value_clear(&o->attrs[i].default_value);
        tfs_attr_value_clear(&o->attrs[i].allowed_values);
    }
    for (int i = 0; i < o->n_strings; i++)
        tfs_free(o->strings[i]);
    tfs_free(o->strings);
    tfs_free(o->inputs);
    tfs_free(o->outputs);
    tfs_free(o->attrs);
    tfs_free(o);
}

static void parse_attrs(parser *ps, owned_sig *o)
{
    while (!ps->failed && accept(ps, ";")) {
        tfs_op_attr *grown = tfs_realloc(o->attrs, (size_t)(o->pub.n_attrs + 1) * sizeof *grown);
        if (!grown) {
            fail(ps, "out of memory");
            return;
        }
        o->attrs = grown;
        tfs_op_attr *a = &grown[o->pub.n_attrs++];
        memset(a, 0, sizeof *a);
        a->name = keep(ps, o, name(ps));
        expect(ps, ":");
        if (ps->failed)
            return;
        kind k = {0};
        parse_kind(ps, &k);
        a->allowed_values = k.allowed;
        a->type = kind_type_name(&k);
        if (!ps->failed && accept(ps, ">=")) {
            a->has_minimum = true;
            a->minimum = int_lit(ps);
        }
        if (!ps->failed && accept(ps, "=")) {
            a->has_default = true;
            parse_value(ps, &k, &a->default_value);
        }
        if (!ps->failed && find_attr(o, a->name) != a)
            fail(ps, "attr named twice");
    }
}

enum tfs_code tfs_op_signature_parse(const char *op, const char *text, tfs_op_signature **out,
                                     tfs_status *st)
{
    *out = NULL;
    parser ps = {.text = text, .p = text, .op = op, .st = st};
    owned_sig *o = tfs_calloc(1, sizeof *o);
    raw_arg *in = NULL, *outs = NULL;
    int n_in = 0, n_out = 0;
    if (!o)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    o->pub.name = keep(&ps, o, tfs_strdup(op));
    n_in = parse_args(&ps, &in, true);
    expect(&ps, "->");
    if (!ps.failed)
        n_out = parse_args(&ps, &outs, false);
    parse_attrs(&ps, o);
    skip_space(&ps);
    if (!ps.failed && *ps.p)
        fail(&ps, "unexpected text");
    if (!ps.failed && ((n_in && !(o->inputs = tfs_calloc((size_t)n_in, sizeof *o->inputs))) ||
                       (n_out && !(o->outputs = tfs_calloc((size_t)n_out, sizeof *o->outputs)))))
        fail(&ps, "out of memory");
    if (!ps.failed) {
        o->pub.n_inputs = n_in;
        o->pub.n_outputs = n_out;
        resolve_args(&ps, o, in, n_in, o->inputs);
        resolve_args(&ps, o, outs, n_out, o->outputs);
    }
    raw_args_free(in, n_in);
    raw_args_free(outs, n_out);
    o->pub.inputs = o->inputs;
    o->pub.outputs = o->outputs;
    o->pub.attrs = o->attrs;
    if (ps.failed) {
        tfs_op_signature_free(&o->pub);
        return st ? st->code : TFS_INVALID_ARGUMENT;
    }
    *out = &o->pub;
    return TFS_OK;
}

/* ---- the table ------------------------------------------------------------------------------ */

static tfs_op_signature *table[TFS_OP_COUNT];
static pthread_once_t    table_once = PTHREAD_ONCE_INIT;

static void table_build(void)
{
    for (int i = 0; i < TFS_OP_COUNT; i++) {
        tfs_status st;
        if (tfs_op_signature_parse(tfs__ops[i].name, op_texts[i], &table[i], &st) != TFS_OK)
            TFS_LOG_ERROR("runtime", "%s", st.msg);
    }
}

int tfs_op_signature_count(void)
{
    return TFS_OP_COUNT;
}

const tfs_op_signature *tfs_op_signature_at(int i)
{
    if (i < 0 || i >= TFS_OP_COUNT)
        return NULL;
    pthread_once(&table_once, table_build);
    return table[i];
}

const tfs_op_signature *tfs_op_signature_find(const char *op)
{
    const struct tfs_op_def *d = tfs__op_lookup(op);
    return d ? tfs_op_signature_at((int)(d - tfs__ops)) : NULL;
}

const tfs_op_attr *tfs_op_signature_attr(const tfs_op_signature *sig, const char *name)
{
    for (int i = 0; sig && name && i < sig->n_attrs; i++)
        if (!strcmp(sig->attrs[i].name, name))
            return &sig->attrs[i];
    return NULL;
}
