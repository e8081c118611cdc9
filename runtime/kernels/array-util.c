/* Helpers shared by the array-family kernels (array-*.c): reading integer index inputs, axis
 * normalisation, element copies that deep-copy strings, and the strided copy that Slice,
 * StridedSlice, Transpose, Tile, ReverseV2 and Pad are all built on. Also the output-count rules
 * of the array ops with several outputs.
 *
 * The strided copy walks an index space of up to TFS_ARR_MAX_LOOP axes in row-major order and
 * moves one element from src[sbase + sum(i_d * sstride_d)] to dst[dbase + sum(i_d * dstride_d)];
 * strides may be zero (repeat) or negative (reverse). Copying a run where both innermost strides
 * are 1 is one memcpy, which is the common case for slices of the outer axes.
 */
#include <inttypes.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* ---- output-count rules (TopKV2 and Unique use the control family's tfs__nout_two) ----------- */

static int int_attr_count(const tfs_node *n, const char *name)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    if (!v || v->kind != TFS_ATTR_I || v->i < 0 || v->i > 1000000)
        return -1;
    return (int)v->i;
}

int tfs__nout_attr_num(const tfs_node *n)
{
    return int_attr_count(n, "num");
}

int tfs__nout_attr_N(const tfs_node *n)
{
    return int_attr_count(n, "N");
}

int tfs__nout_num_split(const tfs_node *n)
{
    return int_attr_count(n, "num_split");
}

/* ---- integer inputs ------------------------------------------------------------------------- */

int64_t tfs__arr_int_at(const tfs_tensor *t, int64_t i)
{
    return t->dtype == TFS_DTYPE_INT32 ? ((const int32_t *)t->data)[i]
                                       : ((const int64_t *)t->data)[i];
}

static enum tfs_code int_typed(const tfs_node *n, const tfs_tensor *t, const char *what,
                               tfs_status *st)
{
    if (t->dtype != TFS_DTYPE_INT32 && t->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
                             tfs_dtype_short_name(t->dtype));
    return TFS_OK;
}

enum tfs_code tfs__arr_int_scalar(const tfs_node *n, const tfs_tensor *t, const char *what,
                                  int64_t *out, tfs_status *st)
{
    enum tfs_code rc = int_typed(n, t, what, st);
    if (rc != TFS_OK)
        return rc;
    if (t->nelem != 1 || t->rank > 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be a scalar, got %" PRId64
                             " elements", what, t->nelem);
    *out = tfs__arr_int_at(t, 0);
    return TFS_OK;
}

enum tfs_code tfs__arr_int_vector(const tfs_node *n, const tfs_tensor *t, const char *what,
                                  int64_t max_len, int64_t *out, int *len, tfs_status *st)
{
    enum tfs_code rc = int_typed(n, t, what, st);
    if (rc != TFS_OK)
        return rc;
    if (t->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be 1-D, got rank %d", what,
                             t->rank);
    if (t->nelem > max_len)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s has %" PRId64
                             " elements; at most %" PRId64 " are supported", what, t->nelem,
                             max_len);
    for (int64_t i = 0; i < t->nelem; i++)
        out[i] = tfs__arr_int_at(t, i);
    *len = (int)t->nelem;
    return TFS_OK;
}

enum tfs_code tfs__arr_axis(const tfs_node *n, int64_t axis, int rank, const char *what,
                            int *out, tfs_status *st)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "%s %" PRId64 " is out of range: must be in [%d, %d)", what, axis,
                             -rank, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return TFS_OK;
}

enum tfs_code tfs__arr_check_T(const tfs_node *n, const tfs_tensor *t, const char *attr,
                               const char *what, tfs_status *st)
{
    const tfs_attr_value *a = tfs__attr(n, attr);
    if (a && a->kind == TFS_ATTR_TYPE && a->type != t->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s has dtype %s, but attr %s is %s",
                             what, tfs_dtype_short_name(t->dtype), attr,
                             tfs_dtype_short_name(a->type));
    if (tfs_dtype_size(t->dtype) == 0 || t->dtype == TFS_DTYPE_RESOURCE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s of dtype %s is not supported", what,
                             tfs_dtype_short_name(t->dtype));
    return TFS_OK;
}

/* ---- element copies ------------------------------------------------------------------------- */

void tfs__arr_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

enum tfs_code tfs__arr_copy(tfs_tensor *dst, int64_t di, const tfs_tensor *src, int64_t si,
                            int64_t count, tfs_status *st)
{
    if (count <= 0)
        return TFS_OK;
    if (dst->dtype == TFS_DTYPE_STRING) {
        const tfs_string *s = (const tfs_string *)src->data;
        for (int64_t i = 0; i < count; i++) {
            const tfs_string *e = &s[si + i];
            enum tfs_code rc = tfs_tensor_set_string(dst, di + i, e->data, e->len, st);
            if (rc != TFS_OK)
                return rc;
        }
        return TFS_OK;
    }
    size_t esz = tfs_dtype_size(dst->dtype);
    memcpy((char *)dst->data + (size_t)di * esz, (const char *)src->data + (size_t)si * esz,
           (size_t)count * esz);
    return TFS_OK;
}

enum tfs_code tfs__arr_strided_copy(tfs_tensor *dst, int64_t dbase, const int64_t *dstride,
                                    const tfs_tensor *src, int64_t sbase, const int64_t *sstride,
                                    int rank, const int64_t *dims, tfs_status *st)
{
    int64_t total = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 0)
            return TFS_OK;
        total *= dims[d];
    }
    if (rank == 0)
        return tfs__arr_copy(dst, dbase, src, sbase, 1, st);
    int64_t inner = dims[rank - 1], ds = dstride[rank - 1], ss = sstride[rank - 1];
    bool run = ds == 1 && ss == 1;
    bool is_str = dst->dtype == TFS_DTYPE_STRING;
    size_t esz = tfs_dtype_size(dst->dtype);
    int64_t idx[TFS_ARR_MAX_LOOP] = {0};
    int64_t doff = dbase, soff = sbase;
    for (int64_t done = 0; done < total; done += inner) {
        if (run || is_str) {
            for (int64_t i = 0; i < (run ? 1 : inner); i++) {
                enum tfs_code rc = tfs__arr_copy(dst, doff + i * ds, src, soff + i * ss,
                                                 run ? inner : 1, st);
                if (rc != TFS_OK)
                    return rc;
            }
        } else {
            char *d = (char *)dst->data;
            const char *s = (const char *)src->data;
            switch (esz) {
#define STRIDED_RUN(T)                                                                             \
    for (int64_t i = 0; i < inner; i++)                                                            \
        ((T *)d)[doff + i * ds] = ((const T *)s)[soff + i * ss];                                   \
    break;
            case 1: STRIDED_RUN(uint8_t)
            case 2: STRIDED_RUN(uint16_t)
            case 4: STRIDED_RUN(uint32_t)
            case 8: STRIDED_RUN(uint64_t)
#undef STRIDED_RUN
            default:
                for (int64_t i = 0; i < inner; i++)
                    memcpy(d + (size_t)(doff + i * ds) * esz, s + (size_t)(soff + i * ss) * esz,
                           esz);
            }
        }
        for (int d = rank - 2; d >= 0; d--) {
            doff += dstride[d];
            soff += sstride[d];
            if (++idx[d] < dims[d])
                break;
            doff -= dstride[d] * dims[d];
            soff -= sstride[d] * dims[d];
            idx[d] = 0;
        }
    }
    return TFS_OK;
}

/* The checks of tfs__arr_new_like (errors naming the node); ok when the shape is usable. */
static enum tfs_code check_out_shape(const tfs_node *n, int rank, const int64_t *dims,
                                     tfs_status *st)
{
    if (rank > TFS_MAX_RANK)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "output would have rank %d; tfserve "
                             "supports up to %d", rank, TFS_MAX_RANK);
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "output dimension %d is negative "
                                 "(%" PRId64 ")", d, dims[d]);
    if (tfs_shape_nelem(rank, dims) < 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "output shape overflows int64");
    return TFS_OK;
}

enum tfs_code tfs__arr_output(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                              const int64_t *dims, bool zeroed, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    enum tfs_code rc = check_out_shape(k->node, rank, dims, st);
    if (rc != TFS_OK)
        return rc;
    rc = (zeroed ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, j, dt, rank, dims, out, st);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "node '%s' (%s)", k->node->name, k->node->op_type);
    return rc;
}

enum tfs_code tfs__arr_new_like(const tfs_node *n, enum tfs_dtype dt, int rank, const int64_t *dims,
                                tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    enum tfs_code rc = check_out_shape(n, rank, dims, st);
    if (rc != TFS_OK)
        return rc;
    rc = tfs_tensor_new(dt, rank, dims, out, st);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
    return rc;
}
