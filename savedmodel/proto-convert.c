/* Conversions between TensorFlow's protobuf messages and runtime objects: TensorProto <-> tfs_tensor,
 * TensorShapeProto <-> tfs_shape, AttrValue -> tfs_attr_value. Everything read from a message is
 * validated here (sizes, ranks, dtypes) before the runtime sees it. */
#include <string.h>

#include "savedmodel/savedmodel-impl.h"

enum tfs_code tfs__shape_from_proto(const Tensorflow__TensorShapeProto *p, tfs_shape *out,
                                    tfs_status *st)
{
    memset(out, 0, sizeof *out);
    if (!p) {            /* an absent shape is a scalar in a TensorProto */
        out->rank = 0;
        return TFS_OK;
    }
    if (p->unknown_rank) {
        out->rank = -1;
        return TFS_OK;
    }
    if (p->n_dim > TFS_MAX_RANK)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "shape has rank %zu, more than the %d supported",
                       p->n_dim, TFS_MAX_RANK);
    out->rank = (int)p->n_dim;
    for (size_t i = 0; i < p->n_dim; i++) {
        int64_t d = p->dim[i]->size;
        if (d < -1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "shape dimension %zu is %lld", i, (long long)d);
        out->dims[i] = d;
    }
    return TFS_OK;
}

/* Copies n values of a typed repeated field into dst, repeating the last value up to `want`
 * (TensorFlow's Tensor::FromProto rule); zero values leave zeros. */
#define FILL_REPEATED(dst_type, dst, src, n, want)                       \
    do {                                                                 \
        dst_type *d_ = (dst_type *)(dst);                                \
        for (int64_t i_ = 0; i_ < (want); i_++)                          \
            d_[i_] = (n) == 0 ? (dst_type)0                              \
                              : (dst_type)(src)[i_ < (int64_t)(n) ? i_ : (int64_t)(n) - 1]; \
    } while (0)

static size_t typed_count(const Tensorflow__TensorProto *p, enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_FLOAT:  return p->n_float_val;
    case TFS_DTYPE_DOUBLE: return p->n_double_val;
    case TFS_DTYPE_INT32: case TFS_DTYPE_INT16: case TFS_DTYPE_INT8: case TFS_DTYPE_UINT8:
    case TFS_DTYPE_UINT16:
        return p->n_int_val;
    case TFS_DTYPE_INT64:  return p->n_int64_val;
    case TFS_DTYPE_BOOL:   return p->n_bool_val;
    case TFS_DTYPE_UINT32: return p->n_uint32_val;
    case TFS_DTYPE_UINT64: return p->n_uint64_val;
    case TFS_DTYPE_STRING: return p->n_string_val;
    default:               return 0;
    }
}

enum tfs_code tfs__tensor_from_proto(const Tensorflow__TensorProto *p, tfs_tensor **out,
                                     tfs_status *st)
{
    *out = NULL;
    tfs_tensor *t = NULL;
    enum tfs_dtype dt = (enum tfs_dtype)p->dtype;
    if (dt <= TFS_DTYPE_INVALID || dt >= TFS_DTYPE_COUNT || tfs_dtype_size(dt) == 0 ||
        dt == TFS_DTYPE_RESOURCE)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "tensor of dtype %s is not supported",
                       tfs_dtype_name(dt));
    tfs_shape shape;
    if (tfs__shape_from_proto(p->tensor_shape, &shape, st) != TFS_OK)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    if (shape.rank < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor has an unknown rank");
    for (int i = 0; i < shape.rank; i++)
        if (shape.dims[i] < 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor has an unknown dimension");
    int64_t nelem = tfs_shape_nelem(shape.rank, shape.dims);
    size_t esize = tfs_dtype_size(dt);
    if (nelem < 0 || (uint64_t)nelem > TFS_PROTO_TENSOR_MAX_BYTES / esize)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor of %lld elements is too large",
                       (long long)nelem);
    size_t ntyped = typed_count(p, dt);
    if (p->tensor_content.len > 0) {
        if (dt == TFS_DTYPE_STRING)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "string tensor with tensor_content");
        if (p->tensor_content.len != (size_t)nelem * esize)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "tensor_content has %zu bytes, shape needs %lld", p->tensor_content.len,
                           (long long)nelem * (long long)esize);
    } else if (ntyped > (size_t)nelem) {
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor has %zu values for %lld elements", ntyped,
                       (long long)nelem);
    } else if (dt == TFS_DTYPE_STRING && ntyped != (size_t)nelem && ntyped != 0 && ntyped != 1) {
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "string tensor has %zu values for %lld elements",
                       ntyped, (long long)nelem);
    }
    if (tfs_tensor_new(dt, shape.rank, shape.dims, &t, st) != TFS_OK)
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    if (p->tensor_content.len > 0) {
        memcpy(t->data, p->tensor_content.data, p->tensor_content.len);
        *out = t;
        return TFS_OK;
    }
    switch (dt) {
    case TFS_DTYPE_FLOAT:  FILL_REPEATED(float, t->data, p->float_val, ntyped, nelem); break;
    case TFS_DTYPE_DOUBLE: FILL_REPEATED(double, t->data, p->double_val, ntyped, nelem); break;
    case TFS_DTYPE_INT32:  FILL_REPEATED(int32_t, t->data, p->int_val, ntyped, nelem); break;
    case TFS_DTYPE_INT16:  FILL_REPEATED(int16_t, t->data, p->int_val, ntyped, nelem); break;
    case TFS_DTYPE_INT8:   FILL_REPEATED(int8_t, t->data, p->int_val, ntyped, nelem); break;
    case TFS_DTYPE_UINT8:  FILL_REPEATED(uint8_t, t->data, p->int_val, ntyped, nelem); break;
    case TFS_DTYPE_UINT16: FILL_REPEATED(uint16_t, t->data, p->int_val, ntyped, nelem); break;
    case TFS_DTYPE_INT64:  FILL_REPEATED(int64_t, t->data, p->int64_val, ntyped, nelem); break;
    case TFS_DTYPE_BOOL:   FILL_REPEATED(bool, t->data, p->bool_val, ntyped, nelem); break;
    case TFS_DTYPE_UINT32: FILL_REPEATED(uint32_t, t->data, p->uint32_val, ntyped, nelem); break;
    case TFS_DTYPE_UINT64: FILL_REPEATED(uint64_t, t->data, p->uint64_val, ntyped, nelem); break;
    case TFS_DTYPE_STRING:
        for (int64_t i = 0; i < nelem && ntyped > 0; i++) {
            const ProtobufCBinaryData *s = &p->string_val[i < (int64_t)ntyped ? i : (int64_t)ntyped - 1];
            if (tfs_tensor_set_string(t, i, s->data, s->len, st) != TFS_OK)
                goto fail;
        }
        break;
    default:
        TFS_ERR(st, TFS_UNIMPLEMENTED, "tensor of dtype %s is not supported", tfs_dtype_name(dt));
        goto fail;
    }
    *out = t;
    return TFS_OK;
fail:
    tfs_tensor_unref(t);
    return st ? st->code : TFS_INTERNAL;
}

static enum tfs_code list_from_proto(const Tensorflow__AttrValue__ListValue *p, tfs_attr_list *l,
                                     tfs_status *st)
{
    /* A ListValue has one populated field (or none, for an empty list). */
    size_t n = 0;
    enum tfs_attr_kind kind = TFS_ATTR_NONE;
    if (p->n_s) { kind = TFS_ATTR_S; n = p->n_s; }
    else if (p->n_i) { kind = TFS_ATTR_I; n = p->n_i; }
    else if (p->n_f) { kind = TFS_ATTR_F; n = p->n_f; }
    else if (p->n_b) { kind = TFS_ATTR_B; n = p->n_b; }
    else if (p->n_type) { kind = TFS_ATTR_TYPE; n = p->n_type; }
    else if (p->n_shape) { kind = TFS_ATTR_SHAPE; n = p->n_shape; }
    else if (p->n_tensor) { kind = TFS_ATTR_TENSOR; n = p->n_tensor; }
    else if (p->n_func) { kind = TFS_ATTR_FUNC; n = p->n_func; }
    l->kind = kind;
    l->n = 0;
    if (n == 0)
        return TFS_OK;
    if (n > (1u << 24))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "attr list of %zu values is too long", n);
    size_t esize = kind == TFS_ATTR_S ? sizeof(tfs_string) : kind == TFS_ATTR_I ? sizeof(int64_t)
                 : kind == TFS_ATTR_F ? sizeof(float) : kind == TFS_ATTR_B ? sizeof(bool)
                 : kind == TFS_ATTR_TYPE ? sizeof(enum tfs_dtype) : kind == TFS_ATTR_SHAPE ? sizeof(tfs_shape)
                 : sizeof(void *);
    l->s = tfs_calloc(n, esize);
    if (!l->s)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for an attr list");
    for (size_t i = 0; i < n; i++, l->n++) {
        switch (kind) {
        case TFS_ATTR_S:
            l->s[i].len = p->s[i].len;
            l->s[i].data = tfs_malloc(p->s[i].len + 1);
            if (!l->s[i].data)
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for an attr list");
            if (p->s[i].len)   /* an empty bytes value may have no data pointer */
                memcpy(l->s[i].data, p->s[i].data, p->s[i].len);
            l->s[i].data[p->s[i].len] = 0;
            break;
        case TFS_ATTR_I:     l->i[i] = p->i[i]; break;
        case TFS_ATTR_F:     l->f[i] = p->f[i]; break;
        case TFS_ATTR_B:     l->b[i] = p->b[i] != 0; break;
        case TFS_ATTR_TYPE:  l->type[i] = (enum tfs_dtype)p->type[i]; break;
        case TFS_ATTR_SHAPE:
            if (tfs__shape_from_proto(p->shape[i], &l->shape[i], st) != TFS_OK)
                return st ? st->code : TFS_INVALID_ARGUMENT;
            break;
        case TFS_ATTR_TENSOR:
            if (tfs__tensor_from_proto(p->tensor[i], &l->tensor[i], st) != TFS_OK)
                return st ? st->code : TFS_INVALID_ARGUMENT;
            break;
        case TFS_ATTR_FUNC:
            l->func[i] = tfs_strdup(p->func[i]->name ? p->func[i]->name : "");
            if (!l->func[i])
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for an attr list");
            break;
        default:
            break;
        }
    }
    return TFS_OK;
}

enum tfs_code tfs__attr_from_proto(const Tensorflow__AttrValue *p, tfs_attr_value *out,
                                   tfs_status *st)
{
    memset(out, 0, sizeof *out);
    enum tfs_code rc = TFS_OK;
    /* NULL: a map entry that left its value out, which protobuf reads as an empty AttrValue. */
    switch (p ? p->value_case : TENSORFLOW__ATTR_VALUE__VALUE__NOT_SET) {
    case TENSORFLOW__ATTR_VALUE__VALUE_S:
        out->kind = TFS_ATTR_S;
        out->s.len = p->s.len;
        out->s.data = tfs_malloc(p->s.len + 1);
        if (!out->s.data)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for an attr");
        if (p->s.len)
            memcpy(out->s.data, p->s.data, p->s.len);
        out->s.data[p->s.len] = 0;
        break;
    case TENSORFLOW__ATTR_VALUE__VALUE_I:    out->kind = TFS_ATTR_I; out->i = p->i; break;
    case TENSORFLOW__ATTR_VALUE__VALUE_F:    out->kind = TFS_ATTR_F; out->f = p->f; break;
    case TENSORFLOW__ATTR_VALUE__VALUE_B:    out->kind = TFS_ATTR_B; out->b = p->b != 0; break;
    case TENSORFLOW__ATTR_VALUE__VALUE_TYPE:
        out->kind = TFS_ATTR_TYPE;
        out->type = (enum tfs_dtype)p->type;
        break;
    case TENSORFLOW__ATTR_VALUE__VALUE_SHAPE:
        out->kind = TFS_ATTR_SHAPE;
        rc = tfs__shape_from_proto(p->shape, &out->shape, st);
        break;
    case TENSORFLOW__ATTR_VALUE__VALUE_TENSOR:
        out->kind = TFS_ATTR_TENSOR;
        rc = tfs__tensor_from_proto(p->tensor, &out->tensor, st);
        break;
    case TENSORFLOW__ATTR_VALUE__VALUE_FUNC:
        out->kind = TFS_ATTR_FUNC;
        out->func = tfs_strdup(p->func && p->func->name ? p->func->name : "");
        if (!out->func)
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for an attr");
        break;
    case TENSORFLOW__ATTR_VALUE__VALUE_LIST:
        out->kind = TFS_ATTR_LIST;
        rc = list_from_proto(p->list, &out->list, st);
        break;
    case TENSORFLOW__ATTR_VALUE__VALUE_PLACEHOLDER:
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "attr placeholder '%s' (polymorphic function body)",
                       p->placeholder);
    default:
        out->kind = TFS_ATTR_NONE;   /* an AttrValue with nothing set */
        break;
    }
    if (rc != TFS_OK)
        tfs_attr_value_clear(out);
    return rc;
}

/* ---- runtime -> protobuf ---------------------------------------------------------------------- */

Tensorflow__TensorShapeProto *tfs__shape_to_proto(const tfs_shape *s)
{
    Tensorflow__TensorShapeProto *p = tfs_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    tensorflow__tensor_shape_proto__init(p);
    if (s->rank < 0) {
        p->unknown_rank = 1;
        return p;
    }
    if (s->rank > 0) {
        p->dim = tfs_calloc((size_t)s->rank, sizeof *p->dim);
        if (!p->dim)
            goto fail;
        for (int i = 0; i < s->rank; i++, p->n_dim++) {
            p->dim[i] = tfs_calloc(1, sizeof *p->dim[i]);
            if (!p->dim[i])
                goto fail;
            tensorflow__tensor_shape_proto__dim__init(p->dim[i]);
            p->dim[i]->size = s->dims[i];
        }
    }
    return p;
fail:
    tfs__shape_proto_free(p);
    return NULL;
}

void tfs__shape_proto_free(Tensorflow__TensorShapeProto *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_dim; i++)
        tfs_free(p->dim[i]);
    tfs_free(p->dim);
    tfs_free(p);
}

enum tfs_code tfs__tensor_to_proto(const tfs_tensor *t, Tensorflow__TensorProto **out,
                                   tfs_status *st)
{
    *out = NULL;
    Tensorflow__TensorProto *p = tfs_calloc(1, sizeof *p);
    if (!p)
        goto oom;
    tensorflow__tensor_proto__init(p);
    p->dtype = (Tensorflow__DataType)t->dtype;
    tfs_shape s = {.rank = t->rank};
    memcpy(s.dims, t->dims, sizeof s.dims);
    if (!(p->tensor_shape = tfs__shape_to_proto(&s)))
        goto oom;
    if (t->dtype == TFS_DTYPE_STRING) {
        const tfs_string *strs = t->data;
        if (t->nelem > 0) {
            p->string_val = tfs_calloc((size_t)t->nelem, sizeof *p->string_val);
            if (!p->string_val)
                goto oom;
        }
        for (int64_t i = 0; i < t->nelem; i++, p->n_string_val++) {
            p->string_val[i].len = strs[i].len;
            p->string_val[i].data = tfs_malloc(strs[i].len ? strs[i].len : 1);
            if (!p->string_val[i].data)
                goto oom;
            if (strs[i].len)
                memcpy(p->string_val[i].data, strs[i].data, strs[i].len);
        }
    } else if (t->nbytes > 0) {
        p->tensor_content.data = tfs_malloc(t->nbytes);
        if (!p->tensor_content.data)
            goto oom;
        memcpy(p->tensor_content.data, t->data, t->nbytes);
        p->tensor_content.len = t->nbytes;
    }
    *out = p;
    return TFS_OK;
oom:
    tfs__tensor_proto_free(p);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory converting a tensor to protobuf");
}

void tfs__tensor_proto_free(Tensorflow__TensorProto *p)
{
    if (!p)
        return;
    tfs__shape_proto_free(p->tensor_shape);
    for (size_t i = 0; i < p->n_string_val; i++)
        tfs_free(p->string_val[i].data);
    tfs_free(p->string_val);
    tfs_free(p->tensor_content.data);
    tfs_free(p);
}
