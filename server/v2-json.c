/* KServe v2 (Open Inference Protocol) infer bodies over REST <-> named tensors: the v2 codec of
 * the one service layer. Decoding makes the same named tensors v1's JSON decoder hands to
 * tfs_service_run_async (the signature's aliases, the signature's dtypes), so checks, batching,
 * deadlines and drain are v1's; only the wire format is v2's.
 *
 * A request is {"id", "parameters", "inputs": [{"name", "shape", "datatype", "parameters",
 * "data"}], "outputs": [{"name", "parameters": {"binary_data"}}]}. "data" is row-major, flat or
 * nested; nesting may not go deeper than the shape's rank, so the walk recurses at most
 * TFS_MAX_RANK + 1 times whatever the JSON parser accepted. Its element count must equal the
 * shape's. The datatype must be the signature input's own: a v2 client names the type, and
 * converting FP64 to FP32 silently would hide a client's mistake.
 *
 * The binary tensor data extension: with Inference-Header-Content-Length the body is that many
 * bytes of JSON, then the raw tensors of the inputs whose parameters carry "binary_data_size", in
 * input order, little-endian, back to back; BYTES elements are a 4-byte little-endian length and
 * the bytes. Sizes are checked exactly: binary_data_size must be shape x datatype size, and no
 * byte may be left over. Answers use the same layout for outputs asked for with "binary_data"
 * (or all, with parameters.binary_data_output).
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/runtime.h"
#include "server/server-impl.h"

#define VALUE_TEXT_MAX 64

/* tfs__jv_get for an optional object (o may be NULL: an absent "parameters"). */
static const tfs__jv *member(const tfs__jv *o, const char *key)
{
    return o ? tfs__jv_get(o, key) : NULL;
}

/* ---- half and bfloat16 ----------------------------------------------------------------------- */

/* IEEE binary16 from a float, rounding to nearest even (overflow to infinity, NaN kept). */
static uint16_t half_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t mag = x & 0x7fffffff;
    if (mag > 0x7f800000)
        return (uint16_t)(sign | 0x7e00);   /* NaN */
    if (mag >= 0x477ff000)                   /* rounds past 65504 */
        return (uint16_t)(sign | 0x7c00);
    if (mag < 0x38800000) {                  /* subnormal half (or zero) */
        if (mag < 0x33000000)
            return sign;
        uint32_t m = (mag & 0x7fffff) | 0x800000;
        int      shift = 126 - (int)(mag >> 23);   /* 14 .. 24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = mag - 0x38000000;           /* rebias 127 -> 15 */
    uint32_t rem = r & 0x1fff;
    r >>= 13;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0x1f) {
        x = sign | 0x7f800000 | (m << 13);
    } else if (e) {
        x = sign | ((e + 112) << 23) | (m << 13);
    } else {
        float f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t bf16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float    f;
    memcpy(&f, &x, 4);
    return f;
}

/* ---- parse ------------------------------------------------------------------------------------ */

enum tfs_code tfs__v2_parse(const char *body, size_t len, int64_t json_len, tfs__jdoc *doc,
                            size_t *bin_off, const char **sig_name, tfs_status *st)
{
    enum tfs_code code;
    size_t        n = len;

    *bin_off = len;
    *sig_name = NULL;
    if (json_len < -1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Inference-Header-Content-Length is not a "
                       "byte count");
    if (json_len >= 0) {
        if ((uint64_t)json_len > len)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Inference-Header-Content-Length %lld is "
                           "past the end of the %zu-byte body", (long long)json_len, len);
        n = (size_t)json_len;
    }
    if ((code = tfs__json_parse(body, n, doc, st)) != TFS_OK)
        return code;
    const tfs__jv *params = tfs__jv_get(doc->root, "parameters");
    if (params && !tfs__jv_is(params, TFS__J_OBJECT))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "'parameters' must be an object, not %s",
                       tfs__jv_type_name(params));
    const tfs__jv *sig = member(params, "signature_name");
    if (sig && !tfs__jv_is(sig, TFS__J_STRING))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "parameters.signature_name must be a string, "
                       "not %s", tfs__jv_type_name(sig));
    *sig_name = sig ? sig->s : NULL;
    *bin_off = n;
    tfs_status_clear(st);
    return TFS_OK;
}

/* ---- decode ------------------------------------------------------------------------------------ */

/* One input being decoded. */
typedef struct in_ctx {
    const char    *name;    /* the signature's alias */
    const char    *type;    /* the v2 datatype name */
    enum tfs_dtype dtype;
    int            rank;
    int64_t        dims[TFS_MAX_RANK];
    int64_t        nelem;
    int64_t        count;   /* elements seen */
    size_t         str_bytes;   /* BYTES: their lengths, for the budget */
    tfs_tensor    *t;       /* NULL while counting */
} in_ctx;

static const char *shape_text(const in_ctx *c, char *buf, size_t n)
{
    return tfs_shape_str(c->rank, c->dims, buf, n);
}

static enum tfs_code bad_element(const in_ctx *c, const tfs__jv *v, tfs_status *st)
{
    tfs__buf text;
    tfs__buf_init(&text);
    tfs__json_value_text(v, &text, VALUE_TEXT_MAX);
    TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': element %lld is %s, not a %s value", c->name,
            (long long)c->count, text.data ? text.data : "?", c->type);
    tfs__buf_deinit(&text);
    return TFS_INVALID_ARGUMENT;
}

static bool int_in(const tfs__jv *v, int64_t lo, int64_t hi)
{
    return tfs__jv_is_int64(v) && v->i >= lo && v->i <= hi;
}

/* One scalar: checked, and stored at element c->count when filling. */
static enum tfs_code add_scalar(in_ctx *c, const tfs__jv *v, tfs_status *st)
{
    void   *d = c->t ? c->t->data : NULL;
    int64_t i = c->count;
    bool    ok;

    switch (c->dtype) {
    case TFS_DTYPE_BOOL:
        if ((ok = tfs__jv_is_bool(v)) && d)
            ((bool *)d)[i] = v->type == TFS__J_TRUE;
        break;
    case TFS_DTYPE_INT8:
        if ((ok = int_in(v, INT8_MIN, INT8_MAX)) && d)
            ((int8_t *)d)[i] = (int8_t)v->i;
        break;
    case TFS_DTYPE_INT16:
        if ((ok = int_in(v, INT16_MIN, INT16_MAX)) && d)
            ((int16_t *)d)[i] = (int16_t)v->i;
        break;
    case TFS_DTYPE_INT32:
        if ((ok = int_in(v, INT32_MIN, INT32_MAX)) && d)
            ((int32_t *)d)[i] = (int32_t)v->i;
        break;
    case TFS_DTYPE_INT64:
        if ((ok = tfs__jv_is_int64(v)) && d)
            ((int64_t *)d)[i] = v->i;
        break;
    case TFS_DTYPE_UINT8:
        if ((ok = int_in(v, 0, UINT8_MAX)) && d)
            ((uint8_t *)d)[i] = (uint8_t)v->i;
        break;
    case TFS_DTYPE_UINT16:
        if ((ok = int_in(v, 0, UINT16_MAX)) && d)
            ((uint16_t *)d)[i] = (uint16_t)v->i;
        break;
    case TFS_DTYPE_UINT32:
        if ((ok = int_in(v, 0, UINT32_MAX)) && d)
            ((uint32_t *)d)[i] = (uint32_t)v->i;
        break;
    case TFS_DTYPE_UINT64:
        if ((ok = tfs__jv_is_uint64(v)) && d)
            ((uint64_t *)d)[i] = v->num == TFS__JNUM_UINT ? v->u : (uint64_t)v->i;
        break;
    case TFS_DTYPE_DOUBLE:
        if ((ok = v->type == TFS__J_NUMBER) && d)
            ((double *)d)[i] = tfs__jv_double(v);
        break;
    case TFS_DTYPE_FLOAT:
    case TFS_DTYPE_HALF:
    case TFS_DTYPE_BFLOAT16: {
        /* A finite number beyond the type's range is a client's mistake, not an infinity. */
        double x = v->type == TFS__J_NUMBER ? tfs__jv_double(v) : 0;
        double max = c->dtype == TFS_DTYPE_HALF ? 65504.0 : FLT_MAX;
        ok = v->type == TFS__J_NUMBER && (!isfinite(x) || fabs(x) <= max);
        if (!ok || !d)
            break;
        if (c->dtype == TFS_DTYPE_FLOAT)
            ((float *)d)[i] = (float)x;
        else if (c->dtype == TFS_DTYPE_HALF)
            ((uint16_t *)d)[i] = half_from_float((float)x);
        else
            ((uint16_t *)d)[i] = bf16_from_float((float)x);
        break;
    }
    case TFS_DTYPE_STRING:
        if (!(ok = tfs__jv_is(v, TFS__J_STRING)))
            break;
        c->str_bytes += v->n;
        if (d) {
            enum tfs_code code = tfs_tensor_set_string(c->t, i, v->s, v->n, st);
            if (code != TFS_OK)
                return code;
        }
        break;
    default:
        ok = false;
    }
    if (!ok)
        return bad_element(c, v, st);
    c->count++;
    return TFS_OK;
}

/* Row-major walk of "data", flat or nested, at most max(rank, 1) arrays deep. */
static enum tfs_code walk_data(in_ctx *c, const tfs__jv *v, int depth, tfs_status *st)
{
    enum tfs_code code;
    int           max_depth = c->rank > 0 ? c->rank : 1;
    if (depth > max_depth)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': data is nested deeper than its "
                       "shape's %d dimension%s", c->name, max_depth, max_depth == 1 ? "" : "s");
    for (uint32_t k = 0; k < v->n; k++) {
        tfs__jv x = tfs__jv_at(v, k);
        if (c->count >= c->nelem && c->t)
            break;
        code = x.type == TFS__J_ARRAY ? walk_data(c, &x, depth + 1, st) : add_scalar(c, &x, st);
        if (code != TFS_OK)
            return code;
    }
    return TFS_OK;
}

static enum tfs_code budget_take(const in_ctx *c, size_t bytes, size_t *budget, tfs_status *st)
{
    if (bytes > *budget)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': its %zu bytes are over the %zu "
                       "bytes left of the request's limit (--max_tensor_bytes, for all its "
                       "tensors together)", c->name, bytes, *budget);
    *budget -= bytes;
    return TFS_OK;
}

/* "data": counted and checked first, then allocated and filled, so a short request cannot make
 * the server allocate what its shape merely claims. */
static enum tfs_code decode_data(in_ctx *c, const tfs__jv *data, size_t *budget, tfs_status *st)
{
    enum tfs_code code;
    char          sh[96];
    if (!tfs__jv_is(data, TFS__J_ARRAY)) {
        /* A lone scalar is the data of a rank-0 tensor. */
        tfs__jv one = {.type = TFS__J_ARRAY, .num = TFS__JARR_VALUES, .n = 1, .items = data};
        return decode_data(c, &one, budget, st);
    }
    if ((code = walk_data(c, data, 1, st)) != TFS_OK)
        return code;
    if (c->count != c->nelem)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': data has %lld elements, shape %s "
                       "needs %lld", c->name, (long long)c->count, shape_text(c, sh, sizeof sh),
                       (long long)c->nelem);
    size_t bytes = (size_t)c->nelem * tfs_dtype_size(c->dtype) + c->str_bytes;
    if ((code = budget_take(c, bytes, budget, st)) != TFS_OK ||
        (code = tfs_tensor_new(c->dtype, c->rank, c->dims, &c->t, st)) != TFS_OK)
        return code;
    c->count = 0;
    return walk_data(c, data, 1, st);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The binary extension: size bytes at bin[*off]. */
static enum tfs_code decode_binary(in_ctx *c, const char *bin, size_t bin_len, size_t *off,
                                   uint64_t size, size_t *budget, tfs_status *st)
{
    enum tfs_code        code;
    char                 sh[96];
    size_t               esize = tfs_dtype_size(c->dtype);
    const unsigned char *p = (const unsigned char *)bin + *off;

    if (size > bin_len - *off)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': binary_data_size %llu is past the "
                       "end of the binary data (%zu bytes left)", c->name,
                       (unsigned long long)size, bin_len - *off);
    if (c->dtype != TFS_DTYPE_STRING) {
        size_t want = (size_t)c->nelem * esize;
        if (size != want)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': binary_data_size %llu, but "
                           "shape %s of %s needs %zu bytes", c->name, (unsigned long long)size,
                           shape_text(c, sh, sizeof sh), c->type, want);
        if ((code = budget_take(c, want, budget, st)) != TFS_OK ||
            (code = tfs_tensor_new(c->dtype, c->rank, c->dims, &c->t, st)) != TFS_OK)
            return code;
        if (c->dtype == TFS_DTYPE_BOOL) {
            /* A bool byte other than 0 or 1 would be undefined behaviour in C. */
            for (int64_t i = 0; i < c->nelem; i++)
                ((bool *)c->t->data)[i] = p[i] != 0;
        } else if (want) {
            memcpy(c->t->data, p, want);
        }
        *off += want;
        return TFS_OK;
    }
    /* BYTES: the elements' lengths are checked against size before anything is allocated. */
    size_t at = 0;
    for (int64_t i = 0; i < c->nelem; i++) {
        if (size - at < 4)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': binary_data_size %llu ends "
                           "inside element %lld's 4-byte length (shape %s needs %lld elements)",
                           c->name, (unsigned long long)size, (long long)i,
                           shape_text(c, sh, sizeof sh), (long long)c->nelem);
        uint32_t n = le32(p + at);
        if (n > size - at - 4)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': element %lld says %u bytes, "
                           "past the end of its binary_data_size %llu", c->name, (long long)i, n,
                           (unsigned long long)size);
        at += 4 + n;
    }
    if (at != size)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': binary_data_size %llu holds more "
                       "than shape %s's %lld elements (%zu bytes)", c->name,
                       (unsigned long long)size, shape_text(c, sh, sizeof sh),
                       (long long)c->nelem, at);
    if ((code = budget_take(c, (size_t)c->nelem * esize + size, budget, st)) != TFS_OK ||
        (code = tfs_tensor_new(c->dtype, c->rank, c->dims, &c->t, st)) != TFS_OK)
        return code;
    at = 0;
    for (int64_t i = 0; i < c->nelem; i++) {
        uint32_t n = le32(p + at);
        if ((code = tfs_tensor_set_string(c->t, i, p + at + 4, n, st)) != TFS_OK)
            return code;
        at += 4 + n;
    }
    *off += size;
    return TFS_OK;
}

/* The signature input named name (sig->inputs is sorted by alias), or -1. */
static int sig_input(const tfs_signature *sig, const char *name)
{
    int lo = 0, hi = sig->n_inputs - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(sig->inputs[mid].alias, name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static enum tfs_code decode_input(const tfs__jv *e, const tfs_signature *sig, const char *bin,
                                  size_t bin_len, size_t *off, size_t *budget,
                                  tfs_named_tensor *out, tfs_status *st)
{
    in_ctx        c = {.name = tfs__jv_get(e, "name")->s};
    enum tfs_code code;
    int           k = sig_input(sig, c.name);

    if (k < 0)   /* tfs__service_check_input_names let it through: a defaulted input's name */
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s' is not an input of the signature",
                       c.name);
    c.name = sig->inputs[k].alias;
    enum tfs_dtype want = tfs_dtype_base(sig->inputs[k].dtype);
    const tfs__jv *dt = tfs__jv_get(e, "datatype");
    const tfs__jv *shape = tfs__jv_get(e, "shape");
    const char    *want_name = tfs__v2_datatype(want);
    if (!tfs__jv_is(dt, TFS__J_STRING))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': \"datatype\" must be a string (the "
                       "model takes %s)", c.name, want_name ? want_name : tfs_dtype_name(want));
    c.dtype = tfs__v2_dtype(dt->s, dt->n);
    if (c.dtype == TFS_DTYPE_INVALID)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': unknown datatype \"%.*s\" (the "
                       "model takes %s)", c.name, (int)(dt->n > 32 ? 32 : dt->n), dt->s,
                       want_name ? want_name : tfs_dtype_name(want));
    c.type = tfs__v2_datatype(c.dtype);
    if (c.dtype != want)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': datatype %s, but the model takes "
                       "%s", c.name, c.type, want_name ? want_name : tfs_dtype_name(want));
    if (!tfs__jv_is(shape, TFS__J_ARRAY))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': \"shape\" must be an array of "
                       "dimensions", c.name);
    if (shape->n > TFS_MAX_RANK)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': shape has %u dimensions, more "
                       "than the %d tfserve supports", c.name, (unsigned)shape->n, TFS_MAX_RANK);
    size_t max_elems = tfs_runtime_max_tensor_bytes() / tfs_dtype_size(c.dtype);
    c.nelem = 1;
    for (uint32_t i = 0; i < shape->n; i++) {
        tfs__jv d = tfs__jv_at(shape, i);
        if (!tfs__jv_is_int64(&d) || d.i < 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': shape dimension %u is not a "
                           "non-negative integer", c.name, i);
        c.dims[c.rank++] = d.i;
        if (d.i && (uint64_t)c.nelem > max_elems / (uint64_t)d.i)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': shape is over the %zu-byte "
                           "limit on one tensor (--max_tensor_bytes)", c.name,
                           tfs_runtime_max_tensor_bytes());
        c.nelem *= d.i;
    }
    const tfs__jv *params = tfs__jv_get(e, "parameters");
    const tfs__jv *size = member(params, "binary_data_size");
    const tfs__jv *data = tfs__jv_get(e, "data");
    if (params && !tfs__jv_is(params, TFS__J_OBJECT))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': \"parameters\" must be an object",
                       c.name);
    if (size && data)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s' has both \"data\" and "
                       "binary_data_size: one or the other", c.name);
    if (size) {
        if (!tfs__jv_is_uint64(size))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': binary_data_size must be a "
                           "non-negative integer", c.name);
        uint64_t n = size->num == TFS__JNUM_UINT ? size->u : (uint64_t)size->i;
        code = decode_binary(&c, bin, bin_len, off, n, budget, st);
    } else if (data) {
        code = decode_data(&c, data, budget, st);
    } else {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s' has neither \"data\" nor "
                       "binary_data_size", c.name);
    }
    if (code != TFS_OK) {
        tfs_tensor_unref(c.t);
        return code;
    }
    out->name = c.name;
    out->tensor = c.t;
    return TFS_OK;
}

static int sig_output(const tfs_signature *sig, const char *name)
{
    for (int i = 0; i < sig->n_outputs; i++)
        if (strcmp(sig->outputs[i].alias, name) == 0)
            return i;
    return -1;
}

static enum tfs_code bool_param(const tfs__jv *params, const char *key, bool *out,
                                tfs_status *st)
{
    const tfs__jv *v = member(params, key);
    if (!v)
        return TFS_OK;
    if (!tfs__jv_is_bool(v))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "parameter %s must be true or false", key);
    *out = v->type == TFS__J_TRUE;
    return TFS_OK;
}

/* "outputs", "id" and binary_data_output into req. */
static enum tfs_code decode_answer(const tfs__jv *root, const tfs_signature *sig,
                                   tfs__v2_infer *req, tfs_status *st)
{
    enum tfs_code  code;
    const tfs__jv *id = tfs__jv_get(root, "id");
    const tfs__jv *outs = tfs__jv_get(root, "outputs");

    if (id && !tfs__jv_is(id, TFS__J_STRING))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "\"id\" must be a string");
    if (id && !(req->id = tfs_strndup(id->s, id->n)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory keeping the request's id");
    if ((code = bool_param(tfs__jv_get(root, "parameters"), "binary_data_output",
                           &req->binary_all, st)) != TFS_OK)
        return code;
    if (!outs)
        return TFS_OK;
    if (!tfs__jv_is(outs, TFS__J_ARRAY))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "\"outputs\" must be an array");
    if (outs->n > (uint32_t)sig->n_outputs)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%u outputs requested, the signature has %d",
                       (unsigned)outs->n, sig->n_outputs);
    if (outs->n == 0)
        return TFS_OK;
    req->outputs = tfs_calloc(outs->n, sizeof *req->outputs);
    req->binary = tfs_calloc(outs->n, sizeof *req->binary);
    if (!req->outputs || !req->binary)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading requested outputs");
    for (uint32_t i = 0; i < outs->n; i++) {
        tfs__jv        ov = tfs__jv_at(outs, i);
        const tfs__jv *o = &ov;
        const tfs__jv *name = tfs__jv_get(o, "name");
        if (!tfs__jv_is(name, TFS__J_STRING))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "requested output %u has no \"name\"", i);
        int k = sig_output(sig, name->s);
        if (k < 0) {
            tfs__buf names;
            tfs__buf_init(&names);
            for (int j = 0; j < sig->n_outputs; j++)
                tfs__buf_printf(&names, "%s%s", j ? ", " : "", sig->outputs[j].alias);
            TFS_ERR(st, TFS_INVALID_ARGUMENT, "unknown output '%.64s': the signature's outputs "
                    "are %.128s", name->s, names.data ? names.data : "");
            tfs__buf_deinit(&names);
            return TFS_INVALID_ARGUMENT;
        }
        for (int j = 0; j < req->n_outputs; j++)
            if (req->outputs[j] == k)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "output '%s' requested twice",
                               sig->outputs[k].alias);
        req->binary[i] = req->binary_all;
        const tfs__jv *params = tfs__jv_get(o, "parameters");
        if (params && !tfs__jv_is(params, TFS__J_OBJECT))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "output '%s': \"parameters\" must be an "
                           "object", sig->outputs[k].alias);
        if ((code = bool_param(params, "binary_data", &req->binary[i], st)) != TFS_OK)
            return code;
        req->outputs[i] = k;
        req->n_outputs = (int)i + 1;
    }
    return TFS_OK;
}

enum tfs_code tfs__v2_decode_infer(const tfs__jv *root, const char *bin, size_t bin_len,
                                   const tfs_signature *sig, tfs_named_tensor **inputs,
                                   int *n_inputs, tfs__v2_infer *req, tfs_status *st)
{
    const tfs__jv    *ins = tfs__jv_get(root, "inputs");
    const char      **names = NULL;
    tfs_named_tensor *in = NULL;
    enum tfs_code     code;
    size_t            off = 0, budget = tfs_runtime_max_tensor_bytes();

    *inputs = NULL;
    *n_inputs = 0;
    memset(req, 0, sizeof *req);
    if (!tfs__jv_is(ins, TFS__J_ARRAY))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "\"inputs\" must be an array of tensors");
    if (ins->n > (uint32_t)sig->n_inputs)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%u inputs sent, the signature has %d",
                       (unsigned)ins->n, sig->n_inputs);
    int n = (int)ins->n;
    names = tfs_calloc((size_t)(n ? n : 1), sizeof *names);
    in = tfs_calloc((size_t)(n ? n : 1), sizeof *in);
    if (!names || !in) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding an infer request");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        tfs__jv        ev = tfs__jv_at(ins, (size_t)i);
        const tfs__jv *e = &ev;
        const tfs__jv *name = tfs__jv_get(e, "name");
        if (!tfs__jv_is(e, TFS__J_OBJECT) || !tfs__jv_is(name, TFS__J_STRING)) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "inputs[%d] must be an object with a "
                           "\"name\" string", i);
            goto fail;
        }
        names[i] = name->s;
    }
    /* The service layer's name checks first, so a request missing an input is refused before
     * any tensor is decoded. */
    if ((code = tfs__service_check_input_names(sig, names, n, st)) != TFS_OK)
        goto fail;
    for (int i = 0; i < n; i++) {
        /* Every element is an object (checked above), so the array holds values, not numbers. */
        if ((code = decode_input(&ins->items[i], sig, bin, bin_len, &off, &budget, &in[i], st)) !=
            TFS_OK)
            goto fail;
    }
    if (off != bin_len) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%zu bytes of binary data follow the last "
                       "binary input (the inputs' binary_data_size add up to %zu of %zu)",
                       bin_len - off, off, bin_len);
        goto fail;
    }
    if ((code = decode_answer(root, sig, req, st)) != TFS_OK)
        goto fail;
    tfs_free(names);
    *inputs = in;
    *n_inputs = n;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_free(names);
    tfs__named_tensors_free(in, n);
    return code;
}

void tfs__v2_infer_deinit(tfs__v2_infer *req)
{
    if (!req)
        return;
    tfs_free(req->id);
    tfs_free(req->outputs);
    tfs_free(req->binary);
    memset(req, 0, sizeof *req);
}

/* ---- encode ------------------------------------------------------------------------------------ */

static void write_data(tfs__jw *w, const tfs_tensor *t)
{
    const void *d = t->data;
    tfs__jw_begin_array(w);
    for (int64_t i = 0; i < t->nelem; i++) {
        switch (t->dtype) {
        case TFS_DTYPE_BOOL:     tfs__jw_bool(w, ((const bool *)d)[i]); break;
        case TFS_DTYPE_INT8:     tfs__jw_int(w, ((const int8_t *)d)[i]); break;
        case TFS_DTYPE_INT16:    tfs__jw_int(w, ((const int16_t *)d)[i]); break;
        case TFS_DTYPE_INT32:    tfs__jw_int(w, ((const int32_t *)d)[i]); break;
        case TFS_DTYPE_INT64:    tfs__jw_int(w, ((const int64_t *)d)[i]); break;
        case TFS_DTYPE_UINT8:    tfs__jw_uint(w, ((const uint8_t *)d)[i]); break;
        case TFS_DTYPE_UINT16:   tfs__jw_uint(w, ((const uint16_t *)d)[i]); break;
        case TFS_DTYPE_UINT32:   tfs__jw_uint(w, ((const uint32_t *)d)[i]); break;
        case TFS_DTYPE_UINT64:   tfs__jw_uint(w, ((const uint64_t *)d)[i]); break;
        case TFS_DTYPE_FLOAT:    tfs__jw_float(w, ((const float *)d)[i]); break;
        case TFS_DTYPE_DOUBLE:   tfs__jw_double(w, ((const double *)d)[i]); break;
        case TFS_DTYPE_HALF:     tfs__jw_float(w, half_to_float(((const uint16_t *)d)[i])); break;
        case TFS_DTYPE_BFLOAT16: tfs__jw_float(w, bf16_to_float(((const uint16_t *)d)[i])); break;
        case TFS_DTYPE_STRING: {
            const tfs_string *s = &((const tfs_string *)d)[i];
            tfs__jw_string(w, s->data ? s->data : "", s->len);
            break;
        }
        default:
            break;   /* refused before writing (tfs__v2_datatype is NULL for it) */
        }
    }
    tfs__jw_end_array(w);
}

/* The binary form's size: the buffer, or BYTES' 4-byte lengths and bytes. */
static size_t binary_size(const tfs_tensor *t)
{
    if (t->dtype != TFS_DTYPE_STRING)
        return t->nbytes;
    size_t n = 0;
    for (int64_t i = 0; i < t->nelem; i++)
        n += 4 + ((const tfs_string *)t->data)[i].len;
    return n;
}

static void append_binary(tfs__buf *out, const tfs_tensor *t)
{
    if (t->dtype != TFS_DTYPE_STRING) {
        tfs__buf_append(out, t->data, t->nbytes);
        return;
    }
    for (int64_t i = 0; i < t->nelem; i++) {
        const tfs_string *s = &((const tfs_string *)t->data)[i];
        uint32_t          n = (uint32_t)s->len;
        unsigned char     len[4] = {(unsigned char)n, (unsigned char)(n >> 8),
                                    (unsigned char)(n >> 16), (unsigned char)(n >> 24)};
        tfs__buf_append(out, len, 4);
        tfs__buf_append(out, s->data, s->len);
    }
}

enum tfs_code tfs__v2_encode_infer(const tfs__v2_infer *req, const char *model, int64_t version,
                                   const tfs_signature *sig, tfs_tensor *const *outputs,
                                   tfs__buf *out, int64_t *json_len, tfs_status *st)
{
    int     n = req->n_outputs ? req->n_outputs : sig->n_outputs;
    bool    any_binary = false;
    char    v[24];
    tfs__jw w;

    *json_len = -1;
    for (int i = 0; i < n; i++) {
        int               k = req->n_outputs ? req->outputs[i] : i;
        const tfs_tensor *t = outputs[k];
        if (!tfs__v2_datatype(t->dtype))
            return TFS_ERR(st, TFS_UNIMPLEMENTED, "output '%s' is %s, which the v2 protocol has "
                           "no datatype for", sig->outputs[k].alias, tfs_dtype_name(t->dtype));
        if (t->dtype == TFS_DTYPE_STRING && req->n_outputs && req->binary[i])
            for (int64_t e = 0; e < t->nelem; e++)
                if (((const tfs_string *)t->data)[e].len > UINT32_MAX)
                    return TFS_ERR(st, TFS_UNIMPLEMENTED, "output '%s': element %lld is over "
                                   "the binary form's 4 GiB", sig->outputs[k].alias,
                                   (long long)e);
    }
    snprintf(v, sizeof v, "%lld", (long long)version);
    tfs__jw_init(&w, out, 0);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "model_name");
    tfs__jw_cstring(&w, model);
    tfs__jw_key(&w, "model_version");
    tfs__jw_cstring(&w, v);
    if (req->id) {
        tfs__jw_key(&w, "id");
        tfs__jw_cstring(&w, req->id);
    }
    tfs__jw_key(&w, "outputs");
    tfs__jw_begin_array(&w);
    for (int i = 0; i < n; i++) {
        int               k = req->n_outputs ? req->outputs[i] : i;
        const tfs_tensor *t = outputs[k];
        bool              binary = req->n_outputs ? req->binary[i] : req->binary_all;
        tfs__jw_begin_object(&w);
        tfs__jw_key(&w, "name");
        tfs__jw_cstring(&w, sig->outputs[k].alias);
        tfs__jw_key(&w, "datatype");
        tfs__jw_cstring(&w, tfs__v2_datatype(t->dtype));
        tfs__jw_key(&w, "shape");
        w.single_line = true;
        tfs__jw_begin_array(&w);
        for (int d = 0; d < t->rank; d++)
            tfs__jw_int(&w, t->dims[d]);
        tfs__jw_end_array(&w);
        if (binary) {
            w.single_line = false;
            tfs__jw_key(&w, "parameters");
            tfs__jw_begin_object(&w);
            tfs__jw_key(&w, "binary_data_size");
            tfs__jw_uint(&w, binary_size(t));
            tfs__jw_end_object(&w);
            any_binary = true;
        } else {
            tfs__jw_key(&w, "data");
            write_data(&w, t);
        }
        w.single_line = false;
        tfs__jw_end_object(&w);
    }
    tfs__jw_end_array(&w);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
    if (any_binary) {
        *json_len = (int64_t)out->len;
        for (int i = 0; i < n; i++) {
            int k = req->n_outputs ? req->outputs[i] : i;
            if (req->n_outputs ? req->binary[i] : req->binary_all)
                append_binary(out, outputs[k]);
        }
    }
    if (out->oom)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing an infer response");
    tfs_status_clear(st);
    return TFS_OK;
}
