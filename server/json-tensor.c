/* Predict request bodies -> input tensors, as TF Serving's util/json_tensor.cc decodes them.
 *
 * A request is an object with "instances" (row format: one array element per batch row) or
 * "inputs" (columnar: the tensors themselves). The element type of every input comes from the
 * signature's dtype, not from the JSON token, so 1 is a fine value for a float input and
 * {"b64": "..."} is only meaningful for a string input. A tensor's shape is read from the first
 * element at each nesting level and every list must then agree with it.
 *
 * Each value is walked twice with the same code: once to check it (collecting the exact error TF
 * Serving would give, in the same order), then to fill a tensor allocated for the shape that the
 * check proved. Allocating only after the check means a request whose first row claims a huge shape
 * fails with the shape error, not with an out-of-memory one. The walk recurses at most once per
 * tensor dimension, so deeply nested JSON cannot exhaust the stack here.
 *
 * Numbers follow AddValueToTensor's range rules on rapidjson's classification (json-parse.c): a
 * float or double input takes any number whose value survives the conversion (integers up to
 * 2^24 - 1 / 2^53 - 1 in magnitude, decimals within the type's finite range, NaN and the
 * infinities), else "Cannot convert JSON value: V to float without loss of precision."; integer
 * inputs take the integers of their range (uint64 up to 2^64 - 1).
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

/* How much of a request value is quoted in an error message. */
#define VALUE_TEXT_MAX 256

/* ---- messages ------------------------------------------------------------------------------- */

/* "<lead><v><rest>", the shape of TF Serving's messages that quote a request value. */
static enum tfs_code quote_error(tfs_status *st, enum tfs_code code, const char *lead,
                                 const tfs__jv *v, const char *fmt, va_list ap)
{
    char     rest[512];
    tfs__buf text;
    vsnprintf(rest, sizeof rest, fmt, ap);
    tfs__buf_init(&text);
    tfs__json_value_text(v, &text, VALUE_TEXT_MAX);
    tfs_status_set(st, code, "%s%s%s", lead, text.data ? text.data : "", rest);
    tfs__buf_deinit(&text);
    return code;
}

/* "JSON Value: <v><rest>" */
static enum tfs_code value_error(tfs_status *st, enum tfs_code code, const tfs__jv *v,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum tfs_code value_error(tfs_status *st, enum tfs_code code, const tfs__jv *v,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quote_error(st, code, "JSON Value: ", v, fmt, ap);
    va_end(ap);
    return code;
}

static enum tfs_code conversion_error(tfs_status *st, const tfs__jv *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum tfs_code conversion_error(tfs_status *st, const tfs__jv *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quote_error(st, TFS_UNIMPLEMENTED, "Conversion of JSON Value: ", v, fmt, ap);
    va_end(ap);
    return TFS_UNIMPLEMENTED;
}

static enum tfs_code type_error(tfs_status *st, const tfs__jv *v, enum tfs_dtype dt)
{
    return value_error(st, TFS_INVALID_ARGUMENT, v, " Type: %s is not of expected type: %s",
                       tfs__jv_type_name(v), tfs_dtype_short_name(dt));
}

static void shape_text(int rank, const int64_t *dims, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (o < n)
        snprintf(buf + o, n - o, "]");
}

/* ---- parsing -------------------------------------------------------------------------------- */

enum tfs_code tfs__json_parse(const char *body, size_t len, tfs__jdoc *doc, tfs_status *st)
{
    enum tfs_code code;
    /* TF Serving tests the empty body itself, before rapidjson sees it (no offset). */
    if (len == 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "JSON Parse error: The document is empty");
    if ((code = tfs__jdoc_parse(doc, body, len, st)) != TFS_OK) {
        if (code == TFS_INVALID_ARGUMENT) {
            char msg[TFS_STATUS_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", st->msg);
            TFS_ERR(st, code, "JSON Parse error: %s", msg);
        }
        return code;
    }
    if (!tfs__jv_is(doc->root, TFS__J_OBJECT))
        return value_error(st, TFS_INVALID_ARGUMENT, doc->root, " Is not object");
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs__json_signature_name(const tfs__jv *doc, const char **name, tfs_status *st)
{
    const tfs__jv *v = tfs__jv_get(doc, "signature_name");
    *name = NULL;
    if (v && !tfs__jv_is(v, TFS__J_STRING))
        return value_error(st, TFS_INVALID_ARGUMENT, doc,
                           " not formatted correctly. 'signature_name' key must be a string "
                           "value.");
    if (v)
        *name = v->s;
    tfs_status_clear(st);
    return TFS_OK;
}

/* ---- values --------------------------------------------------------------------------------- */

/* One tensor being checked (t == NULL) or filled. */
typedef struct walk {
    enum tfs_dtype dtype;
    int            rank;
    int64_t        dims[TFS_MAX_RANK];
    tfs_tensor    *t;
    int64_t        pos;     /* next element of t */
    int64_t        count;   /* values seen */
} walk;

static bool is_b64_object(const tfs__jv *v)
{
    return tfs__jv_is(v, TFS__J_OBJECT) && v->n == 1 &&
           tfs__jv_is(tfs__jv_get(v, "b64"), TFS__J_STRING);
}

static enum tfs_code add_b64(const tfs__jv *v, walk *w, tfs_status *st)
{
    if (!is_b64_object(v))
        return value_error(st, TFS_INVALID_ARGUMENT, v, " not formatted correctly for base64 data");
    const tfs__jv *s = tfs__jv_get(v, "b64");
    size_t         n = s->n, got = 0;
    char         *tmp = tfs_malloc(tfs__base64_decoded_max(n));
    enum tfs_code code = TFS_OK;
    if (!tmp)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding base64 (%zu bytes)", n);
    if (!tfs__base64_decode(s->s, n, tmp, &got))
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Unable to base64 decode");
    else if (w->t)
        code = tfs_tensor_set_string(w->t, w->pos, tmp, got, st);
    tfs_free(tmp);
    return code;
}

/* A double survives conversion to a float type whose largest finite value is max. */
static bool double_fits(double d, double max)
{
    return !isfinite(d) || (d <= max && d >= -max);
}

/* IsLosslessDecimal: the value survives conversion to a float type whose significand has
 * `digits` bits and whose largest finite value is max. */
static bool lossless(const tfs__jv *v, int digits, double max)
{
    uint64_t max_int = ((uint64_t)1 << digits) - 1;
    switch (v->num) {
    case TFS__JNUM_INT:
        return v->i >= 0 ? (uint64_t)v->i <= max_int
                         : v->i != INT64_MIN && (uint64_t)-v->i <= max_int;
    case TFS__JNUM_UINT:
        return v->u <= max_int;
    default:
        return double_fits(v->d, max);
    }
}

static enum tfs_code lossy_error(tfs_status *st, const tfs__jv *v, const char *type)
{
    tfs__buf text;
    tfs__buf_init(&text);
    tfs__json_value_text(v, &text, VALUE_TEXT_MAX);
    TFS_ERR(st, TFS_INVALID_ARGUMENT, "Cannot convert JSON value: %s to %s without loss of "
            "precision.", text.data ? text.data : "", type);
    tfs__buf_deinit(&text);
    return TFS_INVALID_ARGUMENT;
}

/* AddValueToTensor: one scalar, converted by the signature's dtype. */
static enum tfs_code add_value(const tfs__jv *v, walk *w, tfs_status *st)
{
    void   *data = w->t ? w->t->data : NULL;
    int64_t i = w->pos;

    switch (w->dtype) {
    case TFS_DTYPE_FLOAT:
        if (v->type != TFS__J_NUMBER)
            return type_error(st, v, w->dtype);
        if (!lossless(v, FLT_MANT_DIG, FLT_MAX))
            return lossy_error(st, v, "float");
        if (data)
            ((float *)data)[i] = (float)tfs__jv_double(v);
        break;
    case TFS_DTYPE_DOUBLE:
        if (v->type != TFS__J_NUMBER)
            return type_error(st, v, w->dtype);
        if (!lossless(v, DBL_MANT_DIG, DBL_MAX))
            return lossy_error(st, v, "double");
        if (data)
            ((double *)data)[i] = tfs__jv_double(v);
        break;
    case TFS_DTYPE_INT32:
    case TFS_DTYPE_INT16:
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_UINT8: {
        /* TF Serving accepts any int32 here and narrows it when the TensorProto is read. */
        if (!tfs__jv_is_int32(v))
            return type_error(st, v, w->dtype);
        int32_t x = (int32_t)v->i;
        if (!data)
            break;
        if (w->dtype == TFS_DTYPE_INT32)
            ((int32_t *)data)[i] = x;
        else if (w->dtype == TFS_DTYPE_INT16)
            ((int16_t *)data)[i] = (int16_t)x;
        else if (w->dtype == TFS_DTYPE_INT8)
            ((int8_t *)data)[i] = (int8_t)x;
        else
            ((uint8_t *)data)[i] = (uint8_t)x;
        break;
    }
    case TFS_DTYPE_INT64:
        if (!tfs__jv_is_int64(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((int64_t *)data)[i] = v->i;
        break;
    case TFS_DTYPE_UINT32:
        if (!tfs__jv_is_uint32(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((uint32_t *)data)[i] = (uint32_t)v->i;
        break;
    case TFS_DTYPE_UINT64:
        if (!tfs__jv_is_uint64(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((uint64_t *)data)[i] = v->u;
        break;
    case TFS_DTYPE_BOOL:
        if (!tfs__jv_is_bool(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((bool *)data)[i] = v->type == TFS__J_TRUE;
        break;
    case TFS_DTYPE_STRING:
        if (!tfs__jv_is(v, TFS__J_STRING))
            return type_error(st, v, w->dtype);
        if (w->t) {
            enum tfs_code code = tfs_tensor_set_string(w->t, i, v->s, v->n, st);
            if (code != TFS_OK)
                return code;
        }
        break;
    default:
        return conversion_error(st, v, " to type: %s", tfs_dtype_short_name(w->dtype));
    }
    return TFS_OK;
}

/* The innermost list of a float or double tensor when it holds numbers only (packed): add_value's
 * checks and conversion, element by element, without the dispatch on type and dtype for each.
 * Doubles alone (a client that writes every float with a fraction) need no conversion to a
 * value; integers, or integers and fractions mixed (JavaScript writes 0, not 0.0), take one. */
static enum tfs_code add_packed_floats(const tfs__jv *v, walk *w, tfs_status *st)
{
    bool        f32 = w->dtype == TFS_DTYPE_FLOAT;
    const char *type = f32 ? "float" : "double";
    void       *out = w->t ? (char *)w->t->data + (size_t)w->pos * (f32 ? 4 : 8) : NULL;
    if (v->num == TFS__JARR_DOUBLE && !f32) {
        if (out)
            memcpy(out, v->nums, v->n * sizeof(double));
    } else if (v->num == TFS__JARR_DOUBLE) {
        for (uint32_t i = 0; i < v->n; i++) {
            double d;
            memcpy(&d, &v->nums[i], sizeof d);
            if (!double_fits(d, FLT_MAX)) {
                tfs__jv x = tfs__jv_at(v, i);
                return lossy_error(st, &x, type);
            }
            if (out)
                ((float *)out)[i] = (float)d;
        }
    } else {
        for (uint32_t i = 0; i < v->n; i++) {
            tfs__jv x = tfs__jv_at(v, i);
            if (!lossless(&x, f32 ? FLT_MANT_DIG : DBL_MANT_DIG, f32 ? FLT_MAX : DBL_MAX))
                return lossy_error(st, &x, type);
            if (!out)
                continue;
            double d = tfs__jv_double(&x);
            if (f32)
                ((float *)out)[i] = (float)d;
            else
                ((double *)out)[i] = d;
        }
    }
    w->pos += v->n;
    w->count += v->n;
    return TFS_OK;
}

/* FillTensorProto: every scalar at the deepest level, every list the size the shape says. */
static enum tfs_code walk_value(const tfs__jv *v, int level, walk *w, tfs_status *st)
{
    enum tfs_code code;
    if (!tfs__jv_is(v, TFS__J_ARRAY)) {
        if (level != w->rank)
            return value_error(st, TFS_INVALID_ARGUMENT, v,
                               " found at incorrect level: %d in the JSON DOM. Expected at "
                               "level: %d",
                               level + 1, w->rank);
        if (tfs__jv_is(v, TFS__J_OBJECT))
            code = w->dtype == TFS_DTYPE_STRING ? add_b64(v, w, st) : type_error(st, v, w->dtype);
        else
            code = add_value(v, w, st);
        if (code != TFS_OK)
            return code;
        w->pos++;
        w->count++;
        return TFS_OK;
    }
    if (level >= w->rank)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Encountered list at unexpected level: %d expected < %d", level, w->rank);
    if ((int64_t)v->n != w->dims[level])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Encountered list at unexpected size: %u at level: %d expected size: %lld",
                       (unsigned)v->n, level, (long long)w->dims[level]);
    if (level + 1 == w->rank && v->num != TFS__JARR_VALUES &&
        (w->dtype == TFS_DTYPE_FLOAT || w->dtype == TFS_DTYPE_DOUBLE))
        return add_packed_floats(v, w, st);
    if (level + 1 == w->rank) {
        /* The innermost list: its scalars, without a call each. */
        for (uint32_t i = 0; i < v->n; i++) {
            tfs__jv        xv = tfs__jv_at(v, i);
            const tfs__jv *x = &xv;
            if (x->type == TFS__J_ARRAY || x->type == TFS__J_OBJECT) {
                if ((code = walk_value(x, level + 1, w, st)) != TFS_OK)
                    return code;
                continue;
            }
            if ((code = add_value(x, w, st)) != TFS_OK)
                return code;
            w->pos++;
            w->count++;
        }
        return TFS_OK;
    }
    for (uint32_t i = 0; i < v->n; i++) {
        tfs__jv child = tfs__jv_at(v, i);
        if ((code = walk_value(&child, level + 1, w, st)) != TFS_OK)
            return code;
    }
    return TFS_OK;
}

/* GetDenseTensorShape: the sizes of the first element at each level. */
static enum tfs_code value_shape(const tfs__jv *v, int max_rank, const char *alias, walk *w,
                                 tfs_status *st)
{
    tfs__jv first;
    w->rank = 0;
    while (tfs__jv_is(v, TFS__J_ARRAY)) {
        if (w->rank == max_rank)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "input '%s' has more than %d dimensions, the most tfserve supports",
                           alias, TFS_MAX_RANK);
        w->dims[w->rank++] = (int64_t)v->n;
        if (v->n == 0)
            break;
        first = tfs__jv_at(v, 0);
        v = &first;
    }
    return TFS_OK;
}

/* ---- columnar ------------------------------------------------------------------------------- */

/* One "inputs" value -> one tensor: shape, check, allocate, fill. */
/* Tensors of up to this many elements are allocated from the shape the first elements imply,
 * before the value is checked, and then checked and filled in one walk: a malformed request
 * wastes at most this much memory, never one its first row merely claims. Larger ones are
 * checked first, then allocated and filled. */
#define ONE_PASS_ELEMS 65536

/* The element count of a shape, or -1 past ONE_PASS_ELEMS. */
static int64_t small_count(int rank, const int64_t *dims, int64_t rows)
{
    int64_t n = rows;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > ONE_PASS_ELEMS)
            return -1;
        n *= dims[i];
        if (n > ONE_PASS_ELEMS)
            return -1;
    }
    return n;
}

/* One "inputs" value -> one tensor: shape, check, allocate, fill. */
static enum tfs_code columnar_tensor(const tfs__jv *v, const tfs_tensor_info *info,
                                     tfs_tensor **out, tfs_status *st)
{
    walk          w = {.dtype = tfs_dtype_base(info->dtype)};
    enum tfs_code code;
    *out = NULL;
    if ((code = value_shape(v, TFS_MAX_RANK, info->alias, &w, st)) != TFS_OK)
        return code;
    bool one_pass = small_count(w.rank, w.dims, 1) >= 0;
    if (!one_pass && (code = walk_value(v, 0, &w, st)) != TFS_OK)
        return code;
    if ((code = tfs_tensor_new(w.dtype, w.rank, w.dims, &w.t, st)) != TFS_OK)
        return code;
    w.pos = 0;
    if ((code = walk_value(v, 0, &w, st)) != TFS_OK) {
        tfs_tensor_unref(w.t);
        return code;
    }
    *out = w.t;
    return TFS_OK;
}

static enum tfs_code decode_columnar(const tfs__jv *val, const tfs_signature *sig,
                                     tfs_named_tensor *in, int *n, tfs_status *st)
{
    enum tfs_code code;
    if (!tfs__jv_is(val, TFS__J_OBJECT) || is_b64_object(val)) {
        if (sig->n_inputs > 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "inputs is a plain value/list, but expecting an object as multiple "
                           "input tensors required as per tensorinfo_map");
        in[0].name = sig->inputs[0].alias;
        if ((code = columnar_tensor(val, &sig->inputs[0], &in[0].tensor, st)) != TFS_OK)
            return code;
        *n = 1;
        return TFS_OK;
    }
    /* Every name first: a request missing one is refused before any tensor is decoded. Keys the
     * signature lacks are ignored, as TF Serving does (it looks up only the signature's). */
    for (int i = 0; i < sig->n_inputs; i++)
        if (!tfs__jv_get(val, sig->inputs[i].alias))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing named input: %s in 'inputs' object.",
                           sig->inputs[i].alias);
    for (int i = 0; i < sig->n_inputs; i++) {
        const tfs__jv *item = tfs__jv_get(val, sig->inputs[i].alias);
        in[i].name = sig->inputs[i].alias;
        if ((code = columnar_tensor(item, &sig->inputs[i], &in[i].tensor, st)) != TFS_OK)
            return code;
        *n = i + 1;
    }
    return TFS_OK;
}

/* ---- rows ----------------------------------------------------------------------------------- */

/* What the rows said so far about one input. */
typedef struct row_input {
    bool    seen;
    int64_t row;      /* the last row that named it */
    int     rank;
    int64_t dims[TFS_MAX_RANK];
    int64_t size;
} row_input;

/* AddInstanceItem's comparison: this row's shape against the first row's for the input. */
static enum tfs_code row_compare(const walk *w, row_input *ri, tfs_status *st)
{
    if (!ri->seen) {
        ri->seen = true;
        ri->rank = w->rank;
        memcpy(ri->dims, w->dims, sizeof w->dims);
        ri->size = w->count;
    } else if (ri->size != w->count) {
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expecting tensor size: %lld but got: %lld",
                       (long long)ri->size, (long long)w->count);
    } else if (!tfs_shape_equal(ri->rank, ri->dims, w->rank, w->dims)) {
        char a[128], b[128];
        shape_text(ri->rank, ri->dims, a, sizeof a);
        shape_text(w->rank, w->dims, b, sizeof b);
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expecting shape %s but got: %s", a, b);
    }
    return TFS_OK;
}

/* AddInstanceItem, check half: one row's value for one input. */
static enum tfs_code row_item_check(const tfs__jv *v, const tfs_tensor_info *info, row_input *ri,
                                    tfs_status *st)
{
    walk          w = {.dtype = tfs_dtype_base(info->dtype)};
    enum tfs_code code;
    if ((code = value_shape(v, TFS_MAX_RANK - 1, info->alias, &w, st)) != TFS_OK ||
        (code = walk_value(v, 0, &w, st)) != TFS_OK)
        return code;
    return row_compare(&w, ri, st);
}

static int input_index(const tfs_signature *sig, const tfs__jv *key)
{
    for (int i = 0; i < sig->n_inputs; i++)
        if (strlen(sig->inputs[i].alias) == key->n && memcmp(sig->inputs[i].alias, key->s,
                                                             key->n) == 0)
            return i;
    return -1;
}

/* Prefixes an element's error the way TF Serving wraps it (code name included in the text). */
static enum tfs_code wrap_row_error(tfs_status *st, size_t item, const char *key)
{
    char inner[TFS_STATUS_MSG_MAX + 32];
    if (!st)
        return TFS_INVALID_ARGUMENT;
    snprintf(inner, sizeof inner, "%s: %s", tfs_code_name(st->code), st->msg);
    if (st->code == TFS_RESOURCE_EXHAUSTED)
        return st->code;   /* our own trouble, not the client's: keep the code */
    if (key)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Failed to process element: %zu key: %s of 'instances' list. Error: %s",
                       item, key, inner);
    return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                   "Failed to process element: %zu of 'instances' list. Error: %s", item, inner);
}

static bool is_element_object(const tfs__jv *v)
{
    return tfs__jv_is(v, TFS__J_OBJECT) && !is_b64_object(v);
}

static enum tfs_code rows_check(const tfs__jv *rows, const tfs_signature *sig, bool objects,
                                row_input *ri, tfs_status *st)
{
    for (size_t i = 0; i < rows->n; i++) {
        tfs__jv        ev = tfs__jv_at(rows, i);
        const tfs__jv *elem = &ev;
        if (!objects) {
            if (is_element_object(elem))
                return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                               "Expecting value/list but got object at item %zu of input list", i);
            if (row_item_check(elem, &sig->inputs[0], &ri[0], st) != TFS_OK)
                return wrap_row_error(st, i, NULL);
            continue;
        }
        if (!is_element_object(elem))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Expecting object but got list at item %zu of input list", i);
        int seen = 0;
        for (uint32_t m = 0; m < elem->n; m++) {
            const tfs__jv *key = tfs__jv_key(elem, m);
            int            k = input_index(sig, key);
            if (k < 0) {
                TFS_ERR(st, TFS_INVALID_ARGUMENT, "JSON object: does not have named input: %s",
                        key->s);
                return wrap_row_error(st, i, key->s);
            }
            /* A repeated key is checked again, as TF Serving does, but counts once. */
            if (ri[k].row != (int64_t)i)
                seen++;
            ri[k].row = (int64_t)i;
            if (row_item_check(tfs__jv_val(elem, m), &sig->inputs[k], &ri[k], st) != TFS_OK)
                return wrap_row_error(st, i, key->s);
        }
        /* Every key is an input name, so the sets are equal when every input was seen. */
        if (seen != sig->n_inputs) {
            tfs__buf text, names;
            tfs__buf_init(&text);
            tfs__buf_init(&names);
            tfs__json_value_text(elem, &text, VALUE_TEXT_MAX);
            for (int k = 0; k < sig->n_inputs; k++) {
                if (k)
                    tfs__buf_putc(&names, ',');
                tfs__buf_puts(&names, sig->inputs[k].alias);
            }
            TFS_ERR(st, TFS_INVALID_ARGUMENT,
                    "Failed to process element: %zu of 'instances' list. JSON object: %s keys "
                    "must be equal to: %s",
                    i, text.data ? text.data : "", names.data ? names.data : "");
            tfs__buf_deinit(&text);
            tfs__buf_deinit(&names);
            return TFS_INVALID_ARGUMENT;
        }
    }
    return TFS_OK;
}

/* Builds the [rows] + row_shape tensor of input k from the checked rows. */
static enum tfs_code rows_fill(const tfs__jv *rows, const tfs_signature *sig, bool objects, int k,
                               const row_input *ri, tfs_tensor **out, tfs_status *st)
{
    walk          w = {.dtype = tfs_dtype_base(sig->inputs[k].dtype), .rank = ri->rank};
    int64_t       dims[TFS_MAX_RANK];
    enum tfs_code code;

    dims[0] = (int64_t)rows->n;
    memcpy(dims + 1, ri->dims, (size_t)ri->rank * sizeof dims[0]);
    memcpy(w.dims, ri->dims, sizeof w.dims);
    *out = NULL;
    if ((code = tfs_tensor_new(w.dtype, ri->rank + 1, dims, &w.t, st)) != TFS_OK)
        return code;
    for (uint32_t i = 0; i < rows->n; i++) {
        tfs__jv        ev = tfs__jv_at(rows, i);
        const tfs__jv *elem = &ev;
        const tfs__jv *v = objects ? tfs__jv_get(elem, sig->inputs[k].alias) : elem;
        if ((code = walk_value(v, 0, &w, st)) != TFS_OK) {
            tfs_tensor_unref(w.t);
            return code;
        }
    }
    *out = w.t;
    return TFS_OK;
}

/* Plain rows of a one-input signature in one pass (see ONE_PASS_ELEMS): each row is checked and
 * written into the batch tensor together, with rows_check's errors in rows_check's order. *done
 * is false when the tensor is too large to allocate before checking (nothing was done then). */
static enum tfs_code rows_one_pass(const tfs__jv *rows, const tfs_signature *sig,
                                   tfs_named_tensor *in, int *n, bool *done, tfs_status *st)
{
    const tfs_tensor_info *info = &sig->inputs[0];
    walk                   w0 = {.dtype = tfs_dtype_base(info->dtype)};
    row_input              ri = {.seen = false};
    int64_t                dims[TFS_MAX_RANK];
    tfs_tensor            *t = NULL;
    enum tfs_code          code;

    *done = false;
    tfs__jv first = tfs__jv_at(rows, 0);
    if (value_shape(&first, TFS_MAX_RANK - 1, info->alias, &w0, st) != TFS_OK)
        return TFS_OK;   /* the two-pass path reports it */
    int64_t row_size = small_count(w0.rank, w0.dims, 1);
    if (row_size < 0 || small_count(w0.rank, w0.dims, (int64_t)rows->n) < 0)
        return TFS_OK;
    *done = true;
    dims[0] = (int64_t)rows->n;
    memcpy(dims + 1, w0.dims, (size_t)w0.rank * sizeof dims[0]);
    if ((code = tfs_tensor_new(w0.dtype, w0.rank + 1, dims, &t, st)) != TFS_OK)
        return code;
    uint32_t i;
    for (i = 0; i < rows->n; i++) {
        tfs__jv        ev = tfs__jv_at(rows, i);
        const tfs__jv *elem = &ev;
        walk           w = {.dtype = w0.dtype};
        if (is_element_object(elem)) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Expecting value/list but got object at item %u of input list", i);
            goto fail;
        }
        if ((code = value_shape(elem, TFS_MAX_RANK - 1, info->alias, &w, st)) != TFS_OK)
            goto wrap;
        /* A row of another size is only checked: its error, or the size mismatch below. */
        if (small_count(w.rank, w.dims, 1) == row_size) {
            w.t = t;
            w.pos = (int64_t)i * row_size;
        }
        if ((code = walk_value(elem, 0, &w, st)) != TFS_OK ||
            (code = row_compare(&w, &ri, st)) != TFS_OK)
            goto wrap;
    }
    in[0].name = info->alias;
    in[0].tensor = t;
    *n = 1;
    return TFS_OK;
wrap:
    code = wrap_row_error(st, i, NULL);
fail:
    tfs_tensor_unref(t);
    return code;
}

static enum tfs_code decode_rows(const tfs__jv *rows, const tfs_signature *sig,
                                 tfs_named_tensor *in, int *n, tfs_status *st)
{
    tfs__jv        first_value = tfs__jv_at(rows, 0);
    const tfs__jv *first = &first_value;
    enum tfs_code  code;
    if (!tfs__jv_is(first, TFS__J_OBJECT) && sig->n_inputs > 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "instances is a plain list, but expecting list of objects as multiple input "
                       "tensors required as per tensorinfo_map");
    bool objects = is_element_object(first);
    if (!objects && sig->n_inputs == 1) {
        bool done;
        code = rows_one_pass(rows, sig, in, n, &done, st);
        if (done)
            return code;
    }
    row_input  small[8];
    row_input *ri = sig->n_inputs <= 8 ? small : tfs_malloc((size_t)sig->n_inputs * sizeof *ri);
    if (!ri)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding 'instances'");
    memset(ri, 0, (size_t)sig->n_inputs * sizeof *ri);
    for (int k = 0; k < sig->n_inputs; k++)
        ri[k].row = -1;
    if ((code = rows_check(rows, sig, objects, ri, st)) != TFS_OK)
        goto done;
    /* Inputs in signature order; one that no row named (a plain list for a multi-input
     * signature) is left out, and the Predict input check reports it. */
    for (int k = 0; k < sig->n_inputs; k++) {
        if (!ri[k].seen)
            continue;
        in[*n].name = sig->inputs[k].alias;
        if ((code = rows_fill(rows, sig, objects, k, &ri[k], &in[*n].tensor, st)) != TFS_OK)
            goto done;
        (*n)++;
    }
done:
    if (ri != small)
        tfs_free(ri);
    return code;
}

/* ---- entry ---------------------------------------------------------------------------------- */

enum tfs_code tfs__json_decode_predict(const tfs__jv *doc, const tfs_signature *sig,
                                       const char *sig_name, enum tfs__json_format *fmt,
                                       tfs_named_tensor **inputs, int *n_inputs, tfs_status *st)
{
    tfs_named_tensor *in = NULL;
    int               n = 0;
    enum tfs_code     code;

    *inputs = NULL;
    *n_inputs = 0;
    if (sig->n_inputs == 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Failed to get input map for signature: %s",
                       sig_name && *sig_name ? sig_name : "DEFAULT");
    const tfs__jv *instances = tfs__jv_get(doc, "instances");
    const tfs__jv *columns = tfs__jv_get(doc, "inputs");
    if (instances && columns)
        return value_error(st, TFS_INVALID_ARGUMENT, doc,
                           " Not formatted correctly expecting only one of 'inputs' or "
                           "'instances' keys to exist ");
    if (!instances && !columns)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing 'inputs' or 'instances' key");
    if (instances && !tfs__jv_is(instances, TFS__J_ARRAY))
        return value_error(st, TFS_INVALID_ARGUMENT, doc,
                           " Excepting 'instances' to be an list/array");
    if (instances && instances->n == 0)
        return value_error(st, TFS_INVALID_ARGUMENT, doc, " No values in 'instances' array");

    in = tfs_calloc((size_t)sig->n_inputs, sizeof *in);
    if (!in)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding a predict request");
    if (instances) {
        *fmt = TFS__JSON_ROW;
        code = decode_rows(instances, sig, in, &n, st);
    } else {
        *fmt = TFS__JSON_COLUMNAR;
        code = decode_columnar(columns, sig, in, &n, st);
    }
    if (code != TFS_OK) {
        tfs__named_tensors_free(in, sig->n_inputs);
        return code;
    }
    *inputs = in;
    *n_inputs = n;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs__named_tensors_free(tfs_named_tensor *t, int n)
{
    if (!t)
        return;
    for (int i = 0; i < n; i++)
        tfs_tensor_unref(t[i].tensor);
    tfs_free(t);
}
