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
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

/* How much of a request value is quoted in an error message. */
#define VALUE_TEXT_MAX 256

/* Set when an allocation jansson asked for failed on this thread: jansson often reports that as
 * a syntax error, which must not reach the client as INVALID_ARGUMENT. */
static _Thread_local bool json_alloc_failed;

static void *json_alloc(size_t n)
{
    void *p = tfs_malloc(n);
    if (!p)
        json_alloc_failed = true;
    return p;
}

static void json_release(void *p)
{
    tfs_free(p);
}

static void json_init_once(void)
{
    json_set_alloc_funcs(json_alloc, json_release);
}

void tfs__json_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, json_init_once);
}

/* ---- messages ------------------------------------------------------------------------------- */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL:    return "Null";
    case JSON_FALSE:   return "False";
    case JSON_TRUE:    return "True";
    case JSON_OBJECT:  return "Object";
    case JSON_ARRAY:   return "Array";
    case JSON_STRING:  return "String";
    default:           return "Number";
    }
}

/* "<lead><v><rest>", the shape of TF Serving's messages that quote a request value. */
static enum tfs_code quote_error(tfs_status *st, enum tfs_code code, const char *lead,
                                 const json_t *v, const char *fmt, va_list ap)
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
static enum tfs_code value_error(tfs_status *st, enum tfs_code code, const json_t *v,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum tfs_code value_error(tfs_status *st, enum tfs_code code, const json_t *v,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quote_error(st, code, "JSON Value: ", v, fmt, ap);
    va_end(ap);
    return code;
}

static enum tfs_code conversion_error(tfs_status *st, const json_t *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum tfs_code conversion_error(tfs_status *st, const json_t *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quote_error(st, TFS_UNIMPLEMENTED, "Conversion of JSON Value: ", v, fmt, ap);
    va_end(ap);
    return TFS_UNIMPLEMENTED;
}

static enum tfs_code type_error(tfs_status *st, const json_t *v, enum tfs_dtype dt)
{
    return value_error(st, TFS_INVALID_ARGUMENT, v, " Type: %s is not of expected type: %s",
                       json_type_name(v), tfs_dtype_short_name(dt));
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

enum tfs_code tfs__json_parse(const char *body, size_t len, json_t **doc, tfs_status *st)
{
    json_error_t err;
    size_t       i = 0;

    *doc = NULL;
    tfs__json_init();
    if (len == 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "JSON Parse error: The document is empty");
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r'))
        i++;
    if (i == len)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "JSON Parse error: The document is empty. at offset: %zu", len);
    /* Like rapidjson, stop after the first complete value and accept any top-level value here,
     * so that a non-object gets TF Serving's own message below. */
    json_alloc_failed = false;
    json_t *v = json_loadb(body, len, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL,
                           &err);
    if (!v) {
        if (json_alloc_failed || json_error_code(&err) == json_error_out_of_memory)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory parsing a %zu-byte request",
                           len);
        /* jansson quotes the bytes near the error, which may be invalid UTF-8: keep the
         * {"error": ...} body valid JSON by masking every non-ASCII byte. */
        for (char *p = err.text; *p; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "JSON Parse error: %s at offset: %d", err.text,
                       err.position);
    }
    if (!json_is_object(v)) {
        enum tfs_code code = value_error(st, TFS_INVALID_ARGUMENT, v, " Is not object");
        json_decref(v);
        return code;
    }
    *doc = v;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs__json_signature_name(const json_t *doc, const char **name, tfs_status *st)
{
    const json_t *v = json_object_get(doc, "signature_name");
    *name = NULL;
    if (v && !json_is_string(v))
        return value_error(st, TFS_INVALID_ARGUMENT, doc,
                           " not formatted correctly. 'signature_name' key must be a string "
                           "value.");
    if (v)
        *name = json_string_value(v);
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

static bool is_b64_object(const json_t *v)
{
    return json_is_object(v) && json_object_size(v) == 1 &&
           json_is_string(json_object_get(v, "b64"));
}

static enum tfs_code add_b64(const json_t *v, walk *w, tfs_status *st)
{
    if (!is_b64_object(v))
        return value_error(st, TFS_INVALID_ARGUMENT, v, " not formatted correctly for base64 data");
    const json_t *s = json_object_get(v, "b64");
    size_t        n = json_string_length(s), got = 0;
    char         *tmp = tfs_malloc(tfs__base64_decoded_max(n));
    enum tfs_code code = TFS_OK;
    if (!tmp)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding base64 (%zu bytes)", n);
    if (!tfs__base64_decode(json_string_value(s), n, tmp, &got))
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Unable to base64 decode");
    else if (w->t)
        code = tfs_tensor_set_string(w->t, w->pos, tmp, got, st);
    tfs_free(tmp);
    return code;
}

static bool int_in(const json_t *v, json_int_t lo, json_int_t hi)
{
    return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

/* AddValueToTensor: one scalar, converted by the signature's dtype. */
static enum tfs_code add_value(const json_t *v, walk *w, tfs_status *st)
{
    void   *data = w->t ? w->t->data : NULL;
    int64_t i = w->pos;

    switch (w->dtype) {
    case TFS_DTYPE_FLOAT: {
        if (!json_is_number(v))
            return type_error(st, v, w->dtype);
        /* IEEE conversion (C11 Annex F): out of float range gives +-inf, tiny values 0, as
         * TF Serving's static_cast does. */
        if (data)
            ((float *)data)[i] = (float)json_number_value(v);
        break;
    }
    case TFS_DTYPE_DOUBLE:
        if (!json_is_number(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((double *)data)[i] = json_number_value(v);
        break;
    case TFS_DTYPE_INT32:
    case TFS_DTYPE_INT16:
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_UINT8: {
        /* TF Serving accepts any int32 here and narrows it when the TensorProto is read. */
        if (!int_in(v, INT32_MIN, INT32_MAX))
            return type_error(st, v, w->dtype);
        int32_t x = (int32_t)json_integer_value(v);
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
        if (!json_is_integer(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((int64_t *)data)[i] = (int64_t)json_integer_value(v);
        break;
    case TFS_DTYPE_UINT32:
        if (!int_in(v, 0, UINT32_MAX))
            return type_error(st, v, w->dtype);
        if (data)
            ((uint32_t *)data)[i] = (uint32_t)json_integer_value(v);
        break;
    case TFS_DTYPE_UINT64:
        if (!int_in(v, 0, LLONG_MAX))
            return type_error(st, v, w->dtype);
        if (data)
            ((uint64_t *)data)[i] = (uint64_t)json_integer_value(v);
        break;
    case TFS_DTYPE_BOOL:
        if (!json_is_boolean(v))
            return type_error(st, v, w->dtype);
        if (data)
            ((bool *)data)[i] = json_is_true(v);
        break;
    case TFS_DTYPE_STRING:
        if (!json_is_string(v))
            return type_error(st, v, w->dtype);
        if (w->t) {
            enum tfs_code code =
                tfs_tensor_set_string(w->t, i, json_string_value(v), json_string_length(v), st);
            if (code != TFS_OK)
                return code;
        }
        break;
    default:
        return conversion_error(st, v, " to type: %s", tfs_dtype_short_name(w->dtype));
    }
    return TFS_OK;
}

/* FillTensorProto: every scalar at the deepest level, every list the size the shape says. */
static enum tfs_code walk_value(const json_t *v, int level, walk *w, tfs_status *st)
{
    enum tfs_code code;
    if (!json_is_array(v)) {
        if (level != w->rank)
            return value_error(st, TFS_INVALID_ARGUMENT, v,
                               " found at incorrect level: %d in the JSON DOM. Expected at "
                               "level: %d",
                               level + 1, w->rank);
        if (json_is_object(v))
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
    if ((int64_t)json_array_size(v) != w->dims[level])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Encountered list at unexpected size: %zu at level: %d expected size: %lld",
                       json_array_size(v), level, (long long)w->dims[level]);
    size_t        i;
    const json_t *x;
    json_array_foreach(v, i, x) {
        if ((code = walk_value(x, level + 1, w, st)) != TFS_OK)
            return code;
    }
    return TFS_OK;
}

/* GetDenseTensorShape: the sizes of the first element at each level. */
static enum tfs_code value_shape(const json_t *v, int max_rank, const char *alias, walk *w,
                                 tfs_status *st)
{
    w->rank = 0;
    while (json_is_array(v)) {
        if (w->rank == max_rank)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "input '%s' has more than %d dimensions, the most tfserve supports",
                           alias, TFS_MAX_RANK);
        w->dims[w->rank++] = (int64_t)json_array_size(v);
        if (json_array_size(v) == 0)
            break;
        v = json_array_get(v, 0);
    }
    return TFS_OK;
}

/* ---- columnar ------------------------------------------------------------------------------- */

/* One "inputs" value -> one tensor: shape, check, allocate, fill. */
static enum tfs_code columnar_tensor(const json_t *v, const tfs_tensor_info *info,
                                     tfs_tensor **out, tfs_status *st)
{
    walk          w = {.dtype = tfs_dtype_base(info->dtype)};
    enum tfs_code code;
    *out = NULL;
    if ((code = value_shape(v, TFS_MAX_RANK, info->alias, &w, st)) != TFS_OK ||
        (code = walk_value(v, 0, &w, st)) != TFS_OK)
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

static enum tfs_code decode_columnar(const json_t *val, const tfs_signature *sig,
                                     tfs_named_tensor *in, int *n, tfs_status *st)
{
    enum tfs_code code;
    if (!json_is_object(val) || is_b64_object(val)) {
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
    for (int i = 0; i < sig->n_inputs; i++) {
        const json_t *item = json_object_get(val, sig->inputs[i].alias);
        if (!item)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing named input: %s in 'inputs' object.",
                           sig->inputs[i].alias);
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
    int     rank;
    int64_t dims[TFS_MAX_RANK];
    int64_t size;
} row_input;

/* AddInstanceItem, check half: one row's value for one input. */
static enum tfs_code row_item_check(const json_t *v, const tfs_tensor_info *info, row_input *ri,
                                    tfs_status *st)
{
    walk          w = {.dtype = tfs_dtype_base(info->dtype)};
    enum tfs_code code;
    if ((code = value_shape(v, TFS_MAX_RANK - 1, info->alias, &w, st)) != TFS_OK ||
        (code = walk_value(v, 0, &w, st)) != TFS_OK)
        return code;
    if (!ri->seen) {
        ri->seen = true;
        ri->rank = w.rank;
        memcpy(ri->dims, w.dims, sizeof w.dims);
        ri->size = w.count;
    } else if (ri->size != w.count) {
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expecting tensor size: %lld but got: %lld",
                       (long long)ri->size, (long long)w.count);
    } else if (!tfs_shape_equal(ri->rank, ri->dims, w.rank, w.dims)) {
        char a[128], b[128];
        shape_text(ri->rank, ri->dims, a, sizeof a);
        shape_text(w.rank, w.dims, b, sizeof b);
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expecting shape %s but got: %s", a, b);
    }
    return TFS_OK;
}

static int input_index(const tfs_signature *sig, const char *alias)
{
    for (int i = 0; i < sig->n_inputs; i++)
        if (strcmp(sig->inputs[i].alias, alias) == 0)
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

static bool is_element_object(const json_t *v)
{
    return json_is_object(v) && !is_b64_object(v);
}

static enum tfs_code rows_check(const json_t *rows, const tfs_signature *sig, bool objects,
                                row_input *ri, tfs_status *st)
{
    size_t        i;
    const json_t *elem;
    json_array_foreach(rows, i, elem) {
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
        const char *key;
        json_t     *val;
        json_object_foreach((json_t *)elem, key, val) {
            int k = input_index(sig, key);
            if (k < 0) {
                TFS_ERR(st, TFS_INVALID_ARGUMENT, "JSON object: does not have named input: %s",
                        key);
                return wrap_row_error(st, i, key);
            }
            if (row_item_check(val, &sig->inputs[k], &ri[k], st) != TFS_OK)
                return wrap_row_error(st, i, key);
        }
        /* Every key is an input name and keys are unique, so equal sets means equal sizes. */
        if ((int)json_object_size(elem) != sig->n_inputs) {
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
static enum tfs_code rows_fill(const json_t *rows, const tfs_signature *sig, bool objects, int k,
                               const row_input *ri, tfs_tensor **out, tfs_status *st)
{
    walk          w = {.dtype = tfs_dtype_base(sig->inputs[k].dtype), .rank = ri->rank};
    int64_t       dims[TFS_MAX_RANK];
    enum tfs_code code;
    size_t        i;
    const json_t *elem;

    dims[0] = (int64_t)json_array_size(rows);
    memcpy(dims + 1, ri->dims, (size_t)ri->rank * sizeof dims[0]);
    memcpy(w.dims, ri->dims, sizeof w.dims);
    *out = NULL;
    if ((code = tfs_tensor_new(w.dtype, ri->rank + 1, dims, &w.t, st)) != TFS_OK)
        return code;
    json_array_foreach(rows, i, elem) {
        const json_t *v = objects ? json_object_get(elem, sig->inputs[k].alias) : elem;
        if ((code = walk_value(v, 0, &w, st)) != TFS_OK) {
            tfs_tensor_unref(w.t);
            return code;
        }
    }
    *out = w.t;
    return TFS_OK;
}

static enum tfs_code decode_rows(const json_t *rows, const tfs_signature *sig,
                                 tfs_named_tensor *in, int *n, tfs_status *st)
{
    const json_t *first = json_array_get(rows, 0);
    enum tfs_code code;
    if (!json_is_object(first) && sig->n_inputs > 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "instances is a plain list, but expecting list of objects as multiple input "
                       "tensors required as per tensorinfo_map");
    bool       objects = is_element_object(first);
    row_input *ri = tfs_calloc((size_t)sig->n_inputs, sizeof *ri);
    if (!ri)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding 'instances'");
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
    tfs_free(ri);
    return code;
}

/* ---- entry ---------------------------------------------------------------------------------- */

enum tfs_code tfs__json_decode_predict(const json_t *doc, const tfs_signature *sig,
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
    const json_t *instances = json_object_get(doc, "instances");
    const json_t *columns = json_object_get(doc, "inputs");
    if (instances && columns)
        return value_error(st, TFS_INVALID_ARGUMENT, doc,
                           " Not formatted correctly expecting only one of 'inputs' or "
                           "'instances' keys to exist ");
    if (!instances && !columns)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing 'inputs' or 'instances' key");
    if (instances && !json_is_array(instances))
        return value_error(st, TFS_INVALID_ARGUMENT, doc,
                           " Excepting 'instances' to be an list/array");
    if (instances && json_array_size(instances) == 0)
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
