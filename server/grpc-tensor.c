/* TensorProto <-> tfs_tensor for the gRPC front end, with TensorFlow's rules (Tensor::FromProto and
 * AsProtoField): a non-empty tensor_content carries every element as raw little-endian bytes and its
 * size must match the shape; otherwise the typed *_val field of the dtype is read and its last value
 * repeats to fill the shape. Responses use the typed fields, pointing into the output tensors where
 * the element layout already matches, so a large float output is not copied before packing.
 * Everything a request sends is checked before anything is allocated from it.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/grpc-impl.h"

/* Broadcasting a few typed values to a huge shape would let a tiny request allocate gigabytes. */
#define MAX_BROADCAST_BYTES ((size_t)1 << 31)

/* ---- arena ---------------------------------------------------------------------------------- */

struct tfs__arena_blk {
    tfs__arena_blk *next;
    max_align_t     data[];
};

void tfs__arena_init(tfs__arena *a)
{
    a->head = NULL;
    a->oom = false;
}

void tfs__arena_deinit(tfs__arena *a)
{
    if (!a)
        return;
    while (a->head) {
        tfs__arena_blk *b = a->head;
        a->head = b->next;
        tfs_free(b);
    }
}

void *tfs__arena_alloc(tfs__arena *a, size_t n)
{
    if (a->oom || n > SIZE_MAX - sizeof(tfs__arena_blk))
        goto fail;
    tfs__arena_blk *b = tfs_calloc(1, sizeof *b + (n ? n : 1));
    if (!b)
        goto fail;
    b->next = a->head;
    a->head = b;
    return b->data;
fail:
    a->oom = true;
    return NULL;
}

char *tfs__arena_strdup(tfs__arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char  *d = tfs__arena_alloc(a, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* The typed field a dtype is read from: its element count and a getter for element i. */
typedef struct typed_src {
    size_t n;
    const void *vals;
} typed_src;

static typed_src typed_field(const Tensorflow__TensorProto *p, enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_FLOAT:  return (typed_src){p->n_float_val, p->float_val};
    case TFS_DTYPE_DOUBLE: return (typed_src){p->n_double_val, p->double_val};
    case TFS_DTYPE_INT32:
    case TFS_DTYPE_INT16:
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_UINT8:
    case TFS_DTYPE_UINT16: return (typed_src){p->n_int_val, p->int_val};
    case TFS_DTYPE_INT64:  return (typed_src){p->n_int64_val, p->int64_val};
    case TFS_DTYPE_BOOL:   return (typed_src){p->n_bool_val, p->bool_val};
    case TFS_DTYPE_UINT32: return (typed_src){p->n_uint32_val, p->uint32_val};
    case TFS_DTYPE_UINT64: return (typed_src){p->n_uint64_val, p->uint64_val};
    case TFS_DTYPE_STRING: return (typed_src){p->n_string_val, p->string_val};
    default:               return (typed_src){0, NULL};
    }
}

/* Element i of the typed source, stored into element `dst` of t (same dtype rules as TF: the
 * int_val int32s are truncated to the narrow integer types). */
static void store(tfs_tensor *t, int64_t dst, const typed_src *s, size_t i)
{
    char *d = t->data;
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:  ((float *)d)[dst] = ((const float *)s->vals)[i]; break;
    case TFS_DTYPE_DOUBLE: ((double *)d)[dst] = ((const double *)s->vals)[i]; break;
    case TFS_DTYPE_INT32:  ((int32_t *)d)[dst] = ((const int32_t *)s->vals)[i]; break;
    case TFS_DTYPE_INT16:  ((int16_t *)d)[dst] = (int16_t)((const int32_t *)s->vals)[i]; break;
    case TFS_DTYPE_INT8:   ((int8_t *)d)[dst] = (int8_t)((const int32_t *)s->vals)[i]; break;
    case TFS_DTYPE_UINT8:  ((uint8_t *)d)[dst] = (uint8_t)((const int32_t *)s->vals)[i]; break;
    case TFS_DTYPE_UINT16: ((uint16_t *)d)[dst] = (uint16_t)((const int32_t *)s->vals)[i]; break;
    case TFS_DTYPE_INT64:  ((int64_t *)d)[dst] = ((const int64_t *)s->vals)[i]; break;
    case TFS_DTYPE_BOOL:   ((bool *)d)[dst] = ((const protobuf_c_boolean *)s->vals)[i] != 0; break;
    case TFS_DTYPE_UINT32: ((uint32_t *)d)[dst] = ((const uint32_t *)s->vals)[i]; break;
    case TFS_DTYPE_UINT64: ((uint64_t *)d)[dst] = ((const uint64_t *)s->vals)[i]; break;
    default:               break;
    }
}

/* Bytes the decoded tensor takes: its elements, and for strings every element's bytes too, the
 * last value's repeated to fill the shape as the values will be. */
static size_t decoded_bytes(enum tfs_dtype dt, int64_t nelem, size_t nbytes, const typed_src *s)
{
    if (dt != TFS_DTYPE_STRING || s->n == 0)
        return nbytes;
    const ProtobufCBinaryData *b = s->vals;
    size_t total = nbytes, n = s->n < (size_t)nelem ? s->n : (size_t)nelem;
    for (size_t i = 0; i < n; i++)
        total += b[i].len;
    if ((size_t)nelem > n) {
        size_t more = (size_t)nelem - n, last = b[s->n - 1].len;
        if (last && more > (SIZE_MAX - total) / last)
            return SIZE_MAX;
        total += more * last;
    }
    return total;
}

enum tfs_code tfs__grpc_tensor_from_proto(const Tensorflow__TensorProto *p, const char *name,
                                     size_t *budget, tfs_tensor **out, tfs_status *st)
{
    tfs_tensor    *t = NULL;
    enum tfs_code  code;
    int64_t        dims[TFS_MAX_RANK];
    int            rank = 0;
    enum tfs_dtype dt = p ? (enum tfs_dtype)p->dtype : TFS_DTYPE_INVALID;

    *out = NULL;
    if (!p || dt <= TFS_DTYPE_INVALID || dt >= TFS_DTYPE_COUNT || dt == TFS_DTYPE_RESOURCE ||
        tfs_dtype_size(dt) == 0) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (dtype %s is not "
                       "supported in a request)", name, tfs_dtype_name(dt));
        goto fail;
    }
    const Tensorflow__TensorShapeProto *sh = p->tensor_shape;
    if (sh && sh->unknown_rank) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (unknown rank)", name);
        goto fail;
    }
    if (sh && sh->n_dim > TFS_MAX_RANK) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (rank %zu is more than "
                       "%d)", name, sh->n_dim, TFS_MAX_RANK);
        goto fail;
    }
    for (size_t i = 0; sh && i < sh->n_dim; i++) {
        int64_t d = sh->dim[i] ? sh->dim[i]->size : 0;
        if (d < 0) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (dimension %zu is "
                           "%lld)", name, i, (long long)d);
            goto fail;
        }
        dims[rank++] = d;
    }
    int64_t nelem = tfs_shape_nelem(rank, dims);
    size_t  esize = tfs_dtype_size(dt);
    /* A few bytes of message can declare any shape (typed values broadcast their last one), so
     * the shape is held to the runtime's limit on one tensor before anything is allocated. */
    if (nelem < 0 || (uint64_t)nelem > tfs_runtime_max_tensor_bytes() / esize) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (shape too large: "
                       "over the %zu-byte limit on one tensor)", name,
                       tfs_runtime_max_tensor_bytes());
        goto fail;
    }
    size_t nbytes = (size_t)nelem * esize;
    if (p->n_half_val > 0) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (half_val is not "
                       "supported by tfserve; send DT_HALF in tensor_content)", name);
        goto fail;
    }
    if (p->tensor_content.len > 0 && dt != TFS_DTYPE_STRING) {
        if (p->tensor_content.len != nbytes) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (tensor_content "
                           "has %zu bytes, shape %s of %s needs %zu)", name,
                           p->tensor_content.len, tfs_shape_str(rank, dims, (char[64]){0}, 64),
                           tfs_dtype_name(dt), nbytes);
            goto fail;
        }
        if (budget && nbytes > *budget) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (its %zu bytes are "
                           "over the %zu bytes left of the request's limit, --max_tensor_bytes "
                           "for all its tensors together)", name, nbytes, *budget);
            goto fail;
        }
        if (budget)
            *budget -= nbytes;
        if ((code = tfs_tensor_new(dt, rank, dims, &t, st)) != TFS_OK)
            goto fail;
        if (dt == TFS_DTYPE_BOOL) {
            /* A bool byte other than 0/1 would be undefined behaviour in C. */
            for (int64_t i = 0; i < nelem; i++)
                ((bool *)t->data)[i] = p->tensor_content.data[i] != 0;
        } else if (nbytes) {
            memcpy(t->data, p->tensor_content.data, nbytes);
        }
        *out = t;
        return TFS_OK;
    }
    typed_src s = typed_field(p, dt);
    if (dt == TFS_DTYPE_HALF || dt == TFS_DTYPE_BFLOAT16) {
        if (nelem > 0) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (%s values must "
                           "come in tensor_content)", name, tfs_dtype_name(dt));
            goto fail;
        }
    }
    size_t cost = decoded_bytes(dt, nelem, nbytes, &s);
    if (s.n < (size_t)nelem && cost > MAX_BROADCAST_BYTES) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (%zu values cannot "
                       "fill %lld elements)", name, s.n, (long long)nelem);
        goto fail;
    }
    if (cost > tfs_runtime_max_tensor_bytes() || (budget && cost > *budget)) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor parsing error: %s (its %zu bytes, "
                       "strings counted, are over the %zu bytes left of the request's limit, "
                       "--max_tensor_bytes for all its tensors together)", name, cost,
                       budget && *budget < tfs_runtime_max_tensor_bytes()
                           ? *budget : tfs_runtime_max_tensor_bytes());
        goto fail;
    }
    if (budget)
        *budget -= cost;
    if ((code = tfs_tensor_new(dt, rank, dims, &t, st)) != TFS_OK)
        goto fail;
    if (s.n == 0 || nelem == 0) {
        *out = t;   /* zeros, or empty strings */
        return TFS_OK;
    }
    if (dt == TFS_DTYPE_STRING) {
        const ProtobufCBinaryData *b = s.vals;
        for (int64_t i = 0; i < nelem; i++) {
            size_t k = (size_t)i < s.n ? (size_t)i : s.n - 1;
            if ((code = tfs_tensor_set_string(t, i, b[k].data, b[k].len, st)) != TFS_OK)
                goto fail;
        }
    } else {
        for (int64_t i = 0; i < nelem; i++)
            store(t, i, &s, (size_t)i < s.n ? (size_t)i : s.n - 1);
    }
    *out = t;
    return TFS_OK;
fail:
    tfs_tensor_unref(t);
    return code;
}

/* ---- encoding ------------------------------------------------------------------------------- */

/* Copies n elements of t, widened to int32 (int_val / half_val carry them that way). */
static int32_t *widen(const tfs_tensor *t, tfs__arena *a)
{
    int32_t *v = tfs__arena_alloc(a, (size_t)t->nelem * sizeof *v);
    for (int64_t i = 0; v && i < t->nelem; i++) {
        switch (t->dtype) {
        case TFS_DTYPE_INT16:    v[i] = ((const int16_t *)t->data)[i]; break;
        case TFS_DTYPE_INT8:     v[i] = ((const int8_t *)t->data)[i]; break;
        case TFS_DTYPE_UINT8:    v[i] = ((const uint8_t *)t->data)[i]; break;
        case TFS_DTYPE_UINT16:
        case TFS_DTYPE_HALF:
        case TFS_DTYPE_BFLOAT16: v[i] = ((const uint16_t *)t->data)[i]; break;
        default:                 v[i] = 0; break;
        }
    }
    return v;
}

enum tfs_code tfs__grpc_tensor_to_proto(const tfs_tensor *t, tfs__arena *a, Tensorflow__TensorProto *p,
                                   tfs_status *st)
{
    size_t n = (size_t)t->nelem;
    Tensorflow__TensorShapeProto *sh = tfs__arena_alloc(a, sizeof *sh);
    Tensorflow__TensorShapeProto__Dim **dv =
        tfs__arena_alloc(a, (size_t)(t->rank > 0 ? t->rank : 1) * sizeof *dv);
    if (!sh || !dv)
        goto oom;
    tensorflow__tensor_shape_proto__init(sh);
    for (int i = 0; i < t->rank; i++) {
        if (!(dv[i] = tfs__arena_alloc(a, sizeof *dv[i])))
            goto oom;
        tensorflow__tensor_shape_proto__dim__init(dv[i]);
        dv[i]->size = t->dims[i];
    }
    sh->n_dim = (size_t)t->rank;
    sh->dim = dv;
    p->dtype = (Tensorflow__DataType)tfs_dtype_base(t->dtype);
    p->tensor_shape = sh;
    if (n == 0)
        return TFS_OK;
    /* The generated struct fields are non-const; packing only reads them. */
    void *data = t->data;
    switch (tfs_dtype_base(t->dtype)) {
    case TFS_DTYPE_FLOAT:  p->n_float_val = n;  p->float_val = data;  break;
    case TFS_DTYPE_DOUBLE: p->n_double_val = n; p->double_val = data; break;
    case TFS_DTYPE_INT32:  p->n_int_val = n;    p->int_val = data;    break;
    case TFS_DTYPE_INT64:  p->n_int64_val = n;  p->int64_val = data;  break;
    case TFS_DTYPE_UINT32: p->n_uint32_val = n; p->uint32_val = data; break;
    case TFS_DTYPE_UINT64: p->n_uint64_val = n; p->uint64_val = data; break;
    case TFS_DTYPE_INT16:
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_UINT8:
    case TFS_DTYPE_UINT16:
        if (!(p->int_val = widen(t, a)))
            goto oom;
        p->n_int_val = n;
        break;
    case TFS_DTYPE_HALF:
    case TFS_DTYPE_BFLOAT16:
        if (!(p->half_val = widen(t, a)))
            goto oom;
        p->n_half_val = n;
        break;
    case TFS_DTYPE_BOOL: {
        protobuf_c_boolean *b = tfs__arena_alloc(a, n * sizeof *b);
        if (!b)
            goto oom;
        for (size_t i = 0; i < n; i++)
            b[i] = ((const bool *)data)[i];
        p->n_bool_val = n;
        p->bool_val = b;
        break;
    }
    case TFS_DTYPE_STRING: {
        ProtobufCBinaryData *b = tfs__arena_alloc(a, n * sizeof *b);
        const tfs_string    *s = data;
        if (!b)
            goto oom;
        for (size_t i = 0; i < n; i++) {
            b[i].len = s[i].len;
            b[i].data = (uint8_t *)s[i].data;
        }
        p->n_string_val = n;
        p->string_val = b;
        break;
    }
    default:
        return TFS_ERR(st, TFS_INTERNAL, "cannot write a %s tensor to a TensorProto",
                       tfs_dtype_name(t->dtype));
    }
    return TFS_OK;
oom:
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a TensorProto");
}
