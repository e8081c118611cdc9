/* CPU kernels of tf.data's optionals: OptionalFromValue, OptionalNone, OptionalHasValue and
 * OptionalGetValue -- what `tf.experimental.Optional` and iterators' get_next_as_optional leave in
 * exported graphs (TFX input functions, tf.data pipelines traced into a serving signature).
 *
 * DESIGN. An optional value is a scalar DT_VARIANT tensor, held the way a TensorList is
 * (kernels/tensorlist.c, tfs__variant_tensor_new): its `data` points to an immutable `optional`,
 * either none (n = -1) or a tuple of n >= 1 component tensors, each holding one reference. The
 * tensor owns the optional and frees it, dropping the components, when its last reference goes;
 * nothing ever changes an optional once made, so one may be shared freely. OptionalGetValue
 * returns new references to the components themselves (no copy), as TensorFlow does; a shared
 * component is never written in place (tfs__kernel_take_input only takes an input nothing else
 * references). Errors follow TensorFlow's OptionalGetValue: INVALID_ARGUMENT when the optional
 * is none, or when its components differ in number, dtype or shape from the node's attrs.
 */
#include <inttypes.h>
#include <stdio.h>

#include "runtime/runtime-impl.h"

#define OPTIONAL_MAGIC 0x4f707421u   /* "Opt!" */

typedef struct optional {
    uint32_t     magic;   /* first, as every variant object (runtime-impl.h) */
    int          n;       /* -1: none */
    tfs_tensor **values;  /* [n] references; NULL when none */
} optional;

static void optional_dealloc(void *data, void *arg)
{
    (void)arg;
    optional *o = data;
    for (int i = 0; o && i < o->n; i++)
        tfs_tensor_unref(o->values[i]);
    if (o)
        tfs_free(o->values);
    tfs_free(o);
}

/* Output 0 of k: a new optional of the n borrowed values (none when values is NULL). */
static enum tfs_code make_optional(tfs_kernel_ctx *k, tfs_tensor *const *values, int n,
                                   tfs_status *st)
{
    optional *o = tfs_calloc(1, sizeof *o);
    if (!o)
        goto oom;
    o->magic = OPTIONAL_MAGIC;
    o->n = -1;
    if (values) {
        if (!(o->values = tfs_calloc((size_t)n + 1, sizeof *o->values))) {
            optional_dealloc(o, NULL);
            goto oom;
        }
        for (o->n = 0; o->n < n; o->n++)
            o->values[o->n] = tfs_tensor_ref(values[o->n]);
    }
    if (!(k->out[0] = tfs__variant_tensor_new(o, optional_dealloc)))
        goto oom;
    return TFS_OK;
oom:
    return tfs__node_err(k->node, st, TFS_RESOURCE_EXHAUSTED, "out of memory building an optional");
}

/* The optional that input 0 holds, or INVALID_ARGUMENT when it is something else. */
static enum tfs_code input_optional(const tfs_kernel_ctx *k, const optional **out, tfs_status *st)
{
    const tfs_tensor *t = k->in[0];
    const optional *o = t->dtype == TFS_DTYPE_VARIANT && t->rank == 0 ? t->data : NULL;
    if (!o || o->magic != OPTIONAL_MAGIC)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "input 0 is not an optional "
                             "(a %s%s tensor)", t->rank == 0 ? "" : "non-scalar ",
                             tfs_dtype_short_name(t->dtype));
    *out = o;
    return TFS_OK;
}

/* "[2,?]" or "<unknown>" as TensorFlow prints a partial shape; "[2,3]" for a tensor's shape. */
static const char *shape_str(int rank, const int64_t *dims, char *buf, size_t len)
{
    if (rank < 0) {
        snprintf(buf, len, "<unknown>");
        return buf;
    }
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && used < len; i++) {
        int w = dims[i] < 0 ? snprintf(buf + used, len - used, "%s?", i ? "," : "")
                            : snprintf(buf + used, len - used, "%s%" PRId64, i ? "," : "",
                                       dims[i]);
        if (w < 0)
            return buf;
        used += (size_t)w;
    }
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* OptionalFromValue: components -> Some(components). */
enum tfs_code tfs__k_optional_from_value(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_attr_list *types;
    enum tfs_code rc = tfs__attr_list(n, "Toutput_types", TFS_ATTR_TYPE, &types, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in < 1 || types->n != k->n_in)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "has %d components but attr "
                             "'Toutput_types' lists %d types (at least 1)", k->n_in, types->n);
    for (int i = 0; i < k->n_in; i++)
        if (tfs_dtype_base(k->in[i]->dtype) != types->type[i])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "component %d has dtype %s, but "
                                 "attr 'Toutput_types' says %s", i,
                                 tfs_dtype_short_name(k->in[i]->dtype),
                                 tfs_dtype_short_name(types->type[i]));
    return make_optional(k, k->in, k->n_in, st);
}

/* OptionalNone: -> None. */
enum tfs_code tfs__k_optional_none(tfs_kernel_ctx *k, tfs_status *st)
{
    return make_optional(k, NULL, 0, st);
}

/* OptionalHasValue: optional -> bool scalar. */
enum tfs_code tfs__k_optional_has_value(tfs_kernel_ctx *k, tfs_status *st)
{
    const optional *o;
    tfs_tensor *t;
    enum tfs_code rc = input_optional(k, &o, st);
    if (rc == TFS_OK)
        rc = tfs__kernel_output(k, 0, TFS_DTYPE_BOOL, 0, NULL, &t, st);
    if (rc != TFS_OK)
        return rc;
    *(uint8_t *)t->data = o->n >= 0;
    k->out[0] = t;
    return TFS_OK;
}

/* OptionalGetValue: Some(components) -> components, checked against output_types and
 * output_shapes; None is an error. */
enum tfs_code tfs__k_optional_get_value(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const optional *o;
    const tfs_attr_list *types, *shapes;
    enum tfs_code rc;
    if ((rc = input_optional(k, &o, st)) != TFS_OK ||
        (rc = tfs__attr_list(n, "output_types", TFS_ATTR_TYPE, &types, st)) != TFS_OK ||
        (rc = tfs__attr_list(n, "output_shapes", TFS_ATTR_SHAPE, &shapes, st)) != TFS_OK)
        return rc;
    if (shapes->n != types->n || types->n != k->n_out)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attrs 'output_types' and "
                             "'output_shapes' list %d types and %d shapes for %d outputs",
                             types->n, shapes->n, k->n_out);
    if (o->n < 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "The optional does not have a value.");
    if (o->n != types->n)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "The optional has %d components, "
                             "expected %d", o->n, types->n);
    for (int i = 0; i < o->n; i++) {
        const tfs_tensor *c = o->values[i];
        const tfs_shape *want = &shapes->shape[i];
        if (tfs_dtype_base(c->dtype) != types->type[i])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "component %d of the optional has "
                                 "dtype %s, expected %s", i, tfs_dtype_short_name(c->dtype),
                                 tfs_dtype_short_name(types->type[i]));
        bool fits = want->rank < 0 || want->rank == c->rank;
        for (int d = 0; fits && want->rank > 0 && d < want->rank; d++)
            fits = want->dims[d] < 0 || want->dims[d] == c->dims[d];
        if (!fits) {
            char a[128], b[128];
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "component %d of the optional has "
                                 "shape %s, expected %s", i, shape_str(c->rank, c->dims, a,
                                                                       sizeof a),
                                 shape_str(want->rank, want->dims, b, sizeof b));
        }
    }
    for (int i = 0; i < o->n; i++)
        k->out[i] = tfs_tensor_ref(o->values[i]);
    return TFS_OK;
}
