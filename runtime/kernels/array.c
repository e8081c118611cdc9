/* CPU kernels of the array family: Placeholder, PlaceholderWithDefault, Identity, IdentityN, NoOp,
 * Const, Reshape. None of them copies data: outputs are new references to inputs or attrs, and
 * Reshape returns a view sharing its input's buffer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* "[?,3]" as TensorFlow prints a partial shape. */
static const char *partial_shape_str(const tfs_shape *sh, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < sh->rank && used < n; i++) {
        int w = sh->dims[i] < 0 ? snprintf(buf + used, n - used, "%s?", i ? "," : "[")
                                : snprintf(buf + used, n - used, "%s%" PRId64, i ? "," : "[",
                                           sh->dims[i]);
        if (w < 0)
            return buf;
        used += (size_t)w;
    }
    if (used < n)
        snprintf(buf + used, n - used, "%s", sh->rank == 0 ? "[]" : "]");
    return buf;
}

/* Runs only when the placeholder is needed and was not fed: that is the user's error. */
enum tfs_code tfs__k_placeholder(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype dt = TFS_DTYPE_INVALID;
    const tfs_attr_value *a = tfs__attr(n, "dtype");
    if (a && a->kind == TFS_ATTR_TYPE)
        dt = a->type;
    const tfs_attr_value *shape = tfs__attr(n, "shape");
    if (shape && shape->kind == TFS_ATTR_SHAPE && shape->shape.rank >= 0) {
        char buf[160];
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "You must feed a value for placeholder tensor '%s' with dtype %s and shape %s",
                       n->name, tfs_dtype_short_name(dt),
                       partial_shape_str(&shape->shape, buf, sizeof buf));
    }
    return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                   "You must feed a value for placeholder tensor '%s' with dtype %s", n->name,
                   tfs_dtype_short_name(dt));
}

enum tfs_code tfs__k_identity(tfs_kernel_ctx *k, tfs_status *st)
{
    if (k->n_in != 1 || k->n_out != 1)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expects 1 input and 1 output, has %d and %d",
                             k->n_in, k->n_out);
    k->out[0] = tfs_tensor_ref(k->in[0]);
    return TFS_OK;
}

enum tfs_code tfs__k_identity_n(tfs_kernel_ctx *k, tfs_status *st)
{
    if (k->n_in != k->n_out)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "has %d inputs but attr T lists %d types", k->n_in, k->n_out);
    for (int i = 0; i < k->n_in; i++)
        k->out[i] = tfs_tensor_ref(k->in[i]);
    return TFS_OK;
}

enum tfs_code tfs__k_no_op(tfs_kernel_ctx *k, tfs_status *st)
{
    (void)k;
    (void)st;
    return TFS_OK;
}

enum tfs_code tfs__k_const(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_attr_value *v = tfs__attr(n, "value");
    if (!v || v->kind != TFS_ATTR_TENSOR || !v->tensor)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "missing tensor attr 'value'");
    const tfs_attr_value *dt = tfs__attr(n, "dtype");
    if (dt && dt->kind == TFS_ATTR_TYPE && dt->type != v->tensor->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Type mismatch between value (%s) and dtype (%s)",
                             tfs_dtype_short_name(v->tensor->dtype), tfs_dtype_short_name(dt->type));
    k->out[0] = tfs_tensor_ref(v->tensor);
    return TFS_OK;
}

bool tfs__input_is_const(const tfs_kernel_ctx *k, int i)
{
    /* The very tensor a Const holds (not a value fed in its place): it never changes. */
    if (!k->graph || i < 0 || i >= k->n_in || i >= k->node->n_inputs)
        return false;
    int src = k->node->inputs[i].node;
    if (src < 0 || src >= k->graph->n_nodes || strcmp(k->graph->nodes[src].op_type, "Const"))
        return false;
    const tfs_attr_value *v = tfs__attr(&k->graph->nodes[src], "value");
    return v && v->kind == TFS_ATTR_TENSOR && v->tensor == k->in[i];
}

/* Reads Reshape's shape input (int32 or int64 vector) into dims[]. */
static enum tfs_code read_shape_input(const tfs_tensor *shape, int64_t *dims, int *rank,
                                      tfs_status *st)
{
    if (shape->dtype != TFS_DTYPE_INT32 && shape->dtype != TFS_DTYPE_INT64)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "shape must be int32 or int64, got %s",
                       tfs_dtype_short_name(shape->dtype));
    if (shape->rank > 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "sizes input must be 1-D, not rank %d",
                       shape->rank);
    if (shape->nelem > TFS_MAX_RANK)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "requested shape has rank %" PRId64
                       "; tfserve supports up to %d", shape->nelem, TFS_MAX_RANK);
    *rank = (int)shape->nelem;
    for (int i = 0; i < *rank; i++)
        dims[i] = shape->dtype == TFS_DTYPE_INT32 ? ((const int32_t *)shape->data)[i]
                                                  : ((const int64_t *)shape->data)[i];
    return TFS_OK;
}

/* TensorFlow's Reshape: at most one -1 (inferred), other sizes non-negative, same element count. */
enum tfs_code tfs__k_reshape(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_tensor *in = k->in[0];
    int64_t dims[TFS_MAX_RANK];
    int rank = 0;
    enum tfs_code rc = read_shape_input(k->in[1], dims, &rank, st);
    if (rc != TFS_OK)
        return rc;
    int unknown = -1;
    int64_t product = 1;   /* of the known, non-zero sizes; never 0 */
    bool zero_dim = false;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == -1) {
            if (unknown >= 0)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                               "Only one input size may be -1, not both %d and %d", unknown, d);
            unknown = d;
        } else if (dims[d] < 0) {
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Size %d must be non-negative, not %" PRId64,
                           d, dims[d]);
        } else if (dims[d] == 0) {
            zero_dim = true;
        } else {
            if (product > INT64_MAX / dims[d])
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "requested shape is too large");
            product *= dims[d];
        }
    }
    if (unknown >= 0) {
        /* Like TensorFlow, skip the input's zero sizes when the request has a zero size too, so
         * [0,6] -> [0,-1] still infers 6. */
        int64_t in_count = 1;
        bool skipped_zero = false;
        for (int d = 0; d < in->rank; d++) {
            if (in->dims[d] == 0 && zero_dim) {
                skipped_zero = true;
            } else if (__builtin_mul_overflow(in_count, in->dims[d], &in_count)) {
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input shape is too large to reshape");
            }
        }
        int64_t missing = in_count / product;
        if (!skipped_zero && missing * product != in_count)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Input to reshape is a tensor with %" PRId64
                           " values, but the requested shape requires a multiple of %" PRId64,
                           in_count, product);
        dims[unknown] = missing;
    }
    int64_t want = tfs_shape_nelem(rank, dims);
    if (want != in->nelem)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Input to reshape is a tensor with %" PRId64
                       " values, but the requested shape has %" PRId64, in->nelem, want);
    return tfs_tensor_reshape(k->in[0], rank, dims, &k->out[0], st);
}
