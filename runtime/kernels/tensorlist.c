/* CPU kernels of TensorLists: EmptyTensorList, TensorListReserve, TensorListFromTensor,
 * TensorListGetItem, TensorListSetItem, TensorListStack, TensorListLength, TensorListPushBack,
 * TensorListPopBack -- what Keras RNN loops (StatelessWhile bodies) use to read their input steps
 * and collect their outputs.
 *
 * DESIGN. A list value is a scalar DT_VARIANT tensor whose `data` points to a refcounted tlist:
 * element dtype, partial element shape, optional capacity, and an array of item tensors (NULL =
 * not set yet). tfs_dtype_size(DT_VARIANT) is 0, so such a tensor has nbytes 0 and nothing that
 * copies tensor bytes (tfs_tensor_copy, request encoders, batching) can duplicate or forge the
 * pointer: tfs_tensor_new and tfs_tensor_wrap refuse DT_VARIANT, so only kernels make them
 * (tfs__variant_tensor_new below fills the header itself, also for kernels/optional.c), and the
 * tensor's deallocator drops the list. A
 * list is never changed once it is in a tensor: SetItem/PushBack/PopBack make a new list sharing
 * the item tensors (a copy of the pointer array, O(length) per update; items themselves are
 * immutable tensors and are shared, not copied). Element shapes follow TensorFlow: the
 * element_shape input is a scalar -1 (unknown rank) or a vector with -1 for unknown dims; reading
 * an unset item gives zeros when the merged shape is fully defined, otherwise INVALID_ARGUMENT.
 * FromTensor items are views into the source tensor's buffer (strings are copied).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"

#define TLIST_MAGIC 0x744c6973u   /* "tLis" */
/* Longest list: its pointer array obeys the same byte limit as a tensor buffer. */
#define TLIST_MAX_LEN ((int64_t)(TFS_TENSOR_MAX_BYTES / sizeof(tfs_tensor *)))

typedef struct tlist {
    uint32_t       magic;
    atomic_int     refs;
    enum tfs_dtype dtype;       /* element_dtype */
    tfs_shape      shape;       /* element shape, possibly partial */
    int64_t        max_len;     /* EmptyTensorList's max_num_elements; -1 = none */
    int64_t        n;
    tfs_tensor   **items;       /* [n]; NULL = not set */
} tlist;

int tfs__nout_two(const tfs_node *n)
{
    (void)n;
    return 2;
}

/* ---- the list object ------------------------------------------------------------------------- */

static void tlist_unref(tlist *l)
{
    if (!l || atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int64_t i = 0; i < l->n; i++)
        tfs_tensor_unref(l->items[i]);
    tfs_free(l->items);
    tfs_free(l);
}

static void tlist_dealloc(void *data, void *arg)
{
    (void)arg;
    tlist_unref(data);
}

/* A new list of n unset items (n checked by the caller), or NULL when out of memory. */
static tlist *tlist_new(enum tfs_dtype dtype, const tfs_shape *shape, int64_t n)
{
    tlist *l = tfs_calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->magic = TLIST_MAGIC;
    atomic_init(&l->refs, 1);
    l->dtype = dtype;
    l->shape = *shape;
    l->max_len = -1;
    l->items = tfs_calloc((size_t)n + 1, sizeof *l->items);
    if (!l->items) {
        tfs_free(l);
        return NULL;
    }
    l->n = n;
    return l;
}

/* A copy of src with n items (the first min(n, src->n) shared with src), or NULL. */
static tlist *tlist_copy(const tlist *src, int64_t n)
{
    tlist *l = tlist_new(src->dtype, &src->shape, n);
    if (!l)
        return NULL;
    l->max_len = src->max_len;
    for (int64_t i = 0; i < n && i < src->n; i++)
        l->items[i] = tfs_tensor_ref(src->items[i]);
    return l;
}

tfs_tensor *tfs__variant_tensor_new(void *obj, tfs_tensor_dealloc dealloc)
{
    tfs_tensor *t = tfs_calloc(1, sizeof *t);
    if (!t) {
        dealloc(obj, NULL);
        return NULL;
    }
    t->dtype = TFS_DTYPE_VARIANT;
    t->rank = 0;
    t->nelem = 1;
    t->nbytes = 0;   /* nelem * tfs_dtype_size(DT_VARIANT) */
    t->data = obj;
    atomic_init(&t->refs, 1);
    t->dealloc = dealloc;
    return t;
}

/* Stores list l (its reference passes to the tensor) as a new scalar DT_VARIANT tensor. */
static enum tfs_code list_tensor(const tfs_node *nd, tlist *l, tfs_tensor **out, tfs_status *st)
{
    *out = l ? tfs__variant_tensor_new(l, tlist_dealloc) : NULL;
    if (!*out)
        return tfs__node_err(nd, st, TFS_RESOURCE_EXHAUSTED, "out of memory building a TensorList");
    return TFS_OK;
}

/* The list held by input i, or INVALID_ARGUMENT when the input is not a TensorList. */
static enum tfs_code input_list(const tfs_kernel_ctx *k, int i, const tlist **out, tfs_status *st)
{
    const tfs_tensor *t = k->in[i];
    const tlist *l = t->dtype == TFS_DTYPE_VARIANT && t->rank == 0 ? t->data : NULL;
    if (!l || l->magic != TLIST_MAGIC)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "input %d is not a TensorList (a %s tensor)", i,
                             tfs_dtype_name(t->dtype));
    *out = l;
    return TFS_OK;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

/* "[2,?]", "<unknown>" as TensorFlow prints partial shapes. */
static const char *pshape_str(const tfs_shape *s, char *buf, size_t n)
{
    if (s->rank < 0) {
        snprintf(buf, n, "<unknown>");
        return buf;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->rank && used < n; i++) {
        int w = s->dims[i] < 0 ? snprintf(buf + used, n - used, "%s?", i ? "," : "[")
                               : snprintf(buf + used, n - used, "%s%" PRId64, i ? "," : "[",
                                          s->dims[i]);
        if (w < 0)
            return buf;
        used += (size_t)w;
    }
    if (used < n)
        snprintf(buf + used, n - used, "%s", s->rank == 0 ? "[]" : "]");
    return buf;
}

static tfs_shape shape_of(const tfs_tensor *t)
{
    tfs_shape s;
    memset(&s, 0, sizeof s);
    s.rank = t->rank;
    for (int i = 0; i < t->rank; i++)
        s.dims[i] = t->dims[i];
    return s;
}

static bool shape_compatible(const tfs_shape *a, const tfs_shape *b)
{
    if (a->rank < 0 || b->rank < 0)
        return true;
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] >= 0 && b->dims[i] >= 0 && a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* The most defined shape compatible with both (callers check compatibility first). */
static tfs_shape shape_merge(const tfs_shape *a, const tfs_shape *b)
{
    if (a->rank < 0)
        return *b;
    tfs_shape m = *a;
    for (int i = 0; b->rank >= 0 && i < m.rank; i++)
        if (m.dims[i] < 0)
            m.dims[i] = b->dims[i];
    return m;
}

static bool shape_defined(const tfs_shape *s)
{
    if (s->rank < 0)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return false;
    return true;
}

/* Reads an int32/int64 scalar input (an index or a count). */
static enum tfs_code input_int(const tfs_kernel_ctx *k, int i, const char *what, int64_t *out,
                               tfs_status *st)
{
    const tfs_tensor *t = k->in[i];
    if (t->rank != 0 || (t->dtype != TFS_DTYPE_INT32 && t->dtype != TFS_DTYPE_INT64))
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "%s must be an int32 scalar, got "
                             "a %s tensor of rank %d", what, tfs_dtype_name(t->dtype), t->rank);
    *out = t->dtype == TFS_DTYPE_INT32 ? *(const int32_t *)t->data : *(const int64_t *)t->data;
    return TFS_OK;
}

/* Reads an element_shape input: a scalar -1 (unknown rank) or a vector of dims (-1 = unknown). */
static enum tfs_code input_shape(const tfs_kernel_ctx *k, int i, tfs_shape *out, tfs_status *st)
{
    const tfs_tensor *t = k->in[i];
    const tfs_node *n = k->node;
    memset(out, 0, sizeof *out);
    if ((t->dtype != TFS_DTYPE_INT32 && t->dtype != TFS_DTYPE_INT64) || t->rank > 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "element_shape must be an int32 or "
                             "int64 scalar or vector, got a %s tensor of rank %d",
                             tfs_dtype_name(t->dtype), t->rank);
    bool wide = t->dtype == TFS_DTYPE_INT64;
    if (t->rank == 0) {
        int64_t v = wide ? *(const int64_t *)t->data : *(const int32_t *)t->data;
        if (v != -1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "a scalar element_shape must be -1 "
                                 "(unknown rank), got %" PRId64, v);
        out->rank = -1;
        return TFS_OK;
    }
    if (t->nelem > TFS_MAX_RANK)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "element_shape has rank %" PRId64
                             " (supported: up to %d)", t->nelem, TFS_MAX_RANK);
    out->rank = (int)t->nelem;
    for (int d = 0; d < out->rank; d++) {
        int64_t v = wide ? ((const int64_t *)t->data)[d] : ((const int32_t *)t->data)[d];
        if (v < -1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "element_shape dim %d is %" PRId64
                                 " (must be -1 or at least 0)", d, v);
        out->dims[d] = v;
    }
    return TFS_OK;
}

/* attr element_dtype, which must name a dtype the runtime can hold (not a list of lists). */
static enum tfs_code elem_dtype(const tfs_node *n, enum tfs_dtype *dt, tfs_status *st)
{
    enum tfs_code rc = tfs__attr_type(n, "element_dtype", dt, st);
    if (rc == TFS_OK && tfs_dtype_size(*dt) == 0)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "TensorLists of %s elements are not "
                             "supported", tfs_dtype_name(*dt));
    return rc;
}

/* The list input at `i` whose element dtype must equal the node's element_dtype attr. */
static enum tfs_code typed_list(const tfs_kernel_ctx *k, int i, const tlist **l, tfs_status *st)
{
    enum tfs_dtype dt;
    enum tfs_code rc = elem_dtype(k->node, &dt, st);
    if (rc == TFS_OK)
        rc = input_list(k, i, l, st);
    if (rc == TFS_OK && (*l)->dtype != dt)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "Invalid data types; op elements "
                             "%s but list elements %s", tfs_dtype_short_name(dt),
                             tfs_dtype_short_name((*l)->dtype));
    return rc;
}

/* The shape an unset item reads as: the list's shape merged with `want` (an element_shape input)
 * and, while still partial, with the shapes of the items that are set. */
static enum tfs_code unset_item_shape(const tfs_node *n, const tlist *l, const tfs_shape *want,
                                      tfs_shape *out, tfs_status *st)
{
    char a[160], b[160];
    if (!shape_compatible(&l->shape, want))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Incompatible shapes: element_shape %s "
                             "vs. the list's element shape %s", pshape_str(want, a, sizeof a),
                             pshape_str(&l->shape, b, sizeof b));
    tfs_shape m = shape_merge(&l->shape, want);
    for (int64_t i = 0; i < l->n && !shape_defined(&m); i++) {
        if (!l->items[i])
            continue;
        tfs_shape s = shape_of(l->items[i]);
        if (!shape_compatible(&m, &s))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Incompatible shapes in list: %s "
                                 "vs. item %" PRId64 " of shape %s", pshape_str(&m, a, sizeof a),
                                 i, pshape_str(&s, b, sizeof b));
        m = shape_merge(&m, &s);
    }
    if (!shape_defined(&m))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Trying to read an uninitialized tensor "
                             "but element_shape is not fully defined: %s and no list elements "
                             "are set", pshape_str(&m, a, sizeof a));
    *out = m;
    return TFS_OK;
}

/* Item i of l, or zeros of `shape` for an unset one. New reference. */
static enum tfs_code item_or_zeros(const tfs_node *n, const tlist *l, int64_t i,
                                   const tfs_shape *shape, tfs_tensor **out, tfs_status *st)
{
    if (l->items[i]) {
        *out = tfs_tensor_ref(l->items[i]);
        return TFS_OK;
    }
    if (tfs_tensor_new(l->dtype, shape->rank, shape->dims, out, st) != TFS_OK)
        return tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
    return TFS_OK;
}

/* ---- kernels --------------------------------------------------------------------------------- */

/* EmptyTensorList(element_shape, max_num_elements). */
enum tfs_code tfs__k_empty_tensor_list(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_dtype dt;
    tfs_shape shape;
    int64_t max;
    enum tfs_code rc;
    if ((rc = elem_dtype(k->node, &dt, st)) != TFS_OK ||
        (rc = input_shape(k, 0, &shape, st)) != TFS_OK ||
        (rc = input_int(k, 1, "max_num_elements", &max, st)) != TFS_OK)
        return rc;
    if (max < -1)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "max_num_elements must be -1 or "
                             "at least 0, got %" PRId64, max);
    tlist *l = tlist_new(dt, &shape, 0);
    if (l)
        l->max_len = max;
    return list_tensor(k->node, l, &k->out[0], st);
}

/* TensorListReserve(element_shape, num_elements): num_elements unset items. */
enum tfs_code tfs__k_tensor_list_reserve(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_dtype dt;
    tfs_shape shape;
    int64_t num;
    enum tfs_code rc;
    if ((rc = elem_dtype(k->node, &dt, st)) != TFS_OK ||
        (rc = input_shape(k, 0, &shape, st)) != TFS_OK ||
        (rc = input_int(k, 1, "num_elements", &num, st)) != TFS_OK)
        return rc;
    if (num < 0 || num > TLIST_MAX_LEN)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "The num_elements to reserve must "
                             "be a non negative number (at most %" PRId64 "), but got %" PRId64,
                             TLIST_MAX_LEN, num);
    return list_tensor(k->node, tlist_new(dt, &shape, num), &k->out[0], st);
}

static void unref_source(void *data, void *arg)
{
    (void)data;
    tfs_tensor_unref(arg);
}

/* Row i of t (shape t.dims[1:]): a view for fixed-size elements, a copy for strings. */
static enum tfs_code tensor_row(tfs_tensor *t, int64_t i, tfs_tensor **out, tfs_status *st)
{
    int64_t per = t->dims[0] > 0 ? t->nelem / t->dims[0] : 0;
    if (t->dtype != TFS_DTYPE_STRING) {
        size_t bytes = (size_t)per * tfs_dtype_size(t->dtype);
        void *p = bytes ? (char *)t->data + (size_t)i * bytes : NULL;
        enum tfs_code rc = tfs_tensor_wrap(t->dtype, t->rank - 1, t->dims + 1, p, unref_source, t,
                                           out, st);
        if (rc == TFS_OK)
            tfs_tensor_ref(t);   /* the view's reference to its source */
        return rc;
    }
    enum tfs_code rc = tfs_tensor_new(t->dtype, t->rank - 1, t->dims + 1, out, st);
    const tfs_string *s = (const tfs_string *)t->data + i * per;
    for (int64_t j = 0; rc == TFS_OK && j < per; j++)
        rc = tfs_tensor_set_string(*out, j, s[j].data, s[j].len, st);
    if (rc != TFS_OK) {
        tfs_tensor_unref(*out);
        *out = NULL;
    }
    return rc;
}

/* TensorListFromTensor(tensor, element_shape): one item per row of tensor. */
enum tfs_code tfs__k_tensor_list_from_tensor(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_tensor *t = k->in[0];
    enum tfs_dtype dt;
    tfs_shape shape;
    enum tfs_code rc;
    if ((rc = elem_dtype(n, &dt, st)) != TFS_OK || (rc = input_shape(k, 1, &shape, st)) != TFS_OK)
        return rc;
    if (t->dtype != dt)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "tensor has dtype %s but element_dtype "
                             "is %s", tfs_dtype_name(t->dtype), tfs_dtype_name(dt));
    char a[160], b[160];
    tfs_shape whole = shape_of(t);
    if (t->rank < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Tensor must be at least a vector, but "
                             "saw shape: %s", pshape_str(&whole, a, sizeof a));
    tfs_shape row = {.rank = t->rank - 1};
    for (int i = 1; i < t->rank; i++)
        row.dims[i - 1] = t->dims[i];
    if (!shape_compatible(&shape, &row))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Specified a list with shape %s from a "
                             "tensor with shape %s", pshape_str(&shape, a, sizeof a),
                             pshape_str(&whole, b, sizeof b));
    if (t->dims[0] > TLIST_MAX_LEN)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "tensor has %" PRId64 " rows (at most %"
                             PRId64 ")", t->dims[0], TLIST_MAX_LEN);
    tlist *l = tlist_new(dt, &shape, t->dims[0]);
    if (!l)
        return list_tensor(n, NULL, &k->out[0], st);
    for (int64_t i = 0; i < l->n; i++) {
        if ((rc = tensor_row(t, i, &l->items[i], st)) != TFS_OK) {
            tlist_unref(l);
            return tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
        }
    }
    return list_tensor(n, l, &k->out[0], st);
}

/* TensorListGetItem(input_handle, index, element_shape). */
enum tfs_code tfs__k_tensor_list_get_item(tfs_kernel_ctx *k, tfs_status *st)
{
    const tlist *l;
    int64_t index;
    tfs_shape want, shape = {.rank = 0};
    enum tfs_code rc;
    if ((rc = typed_list(k, 0, &l, st)) != TFS_OK ||
        (rc = input_int(k, 1, "index", &index, st)) != TFS_OK ||
        (rc = input_shape(k, 2, &want, st)) != TFS_OK)
        return rc;
    if (index < 0 || index >= l->n)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "Trying to access element %" PRId64
                             " in a list with %" PRId64 " elements.", index, l->n);
    if (!l->items[index] && (rc = unset_item_shape(k->node, l, &want, &shape, st)) != TFS_OK)
        return rc;
    return item_or_zeros(k->node, l, index, &shape, &k->out[0], st);
}

/* Checks that `item` may be stored in list l: element dtype and shape. */
static enum tfs_code check_item(const tfs_node *n, const tlist *l, const tfs_tensor *item,
                                const char *verb, tfs_status *st)
{
    char a[160], b[160];
    if (item->dtype != l->dtype)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Tried to %s a %s tensor in a list of %s "
                             "elements", verb, tfs_dtype_short_name(item->dtype),
                             tfs_dtype_short_name(l->dtype));
    tfs_shape s = shape_of(item);
    if (!shape_compatible(&l->shape, &s))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Tried to %s a tensor with incompatible "
                             "shape. Item element shape: %s list shape: %s", verb,
                             pshape_str(&s, a, sizeof a), pshape_str(&l->shape, b, sizeof b));
    return TFS_OK;
}

/* TensorListSetItem(input_handle, index, item) -> a new list. */
enum tfs_code tfs__k_tensor_list_set_item(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tlist *l;
    int64_t index;
    enum tfs_code rc;
    if ((rc = typed_list(k, 0, &l, st)) != TFS_OK ||
        (rc = input_int(k, 1, "index", &index, st)) != TFS_OK ||
        (rc = check_item(n, l, k->in[2], "set", st)) != TFS_OK)
        return rc;
    bool resize = false;
    const tfs_attr_value *r = tfs__attr(n, "resize_if_index_out_of_bounds");
    if (r && r->kind == TFS_ATTR_B)
        resize = r->b;
    int64_t len = l->n;
    if (resize && index >= l->n && index < TLIST_MAX_LEN)
        len = index + 1;
    if (index < 0 || index >= len)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Trying to modify element %" PRId64
                             " in a list with %" PRId64 " elements.", index, l->n);
    tlist *c = tlist_copy(l, len);
    if (c) {
        tfs_tensor_unref(c->items[index]);
        c->items[index] = tfs_tensor_ref(k->in[2]);
    }
    return list_tensor(n, c, &k->out[0], st);
}

/* TensorListPushBack(input_handle, tensor) -> a new list one longer. */
enum tfs_code tfs__k_tensor_list_push_back(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tlist *l;
    enum tfs_code rc;
    if ((rc = typed_list(k, 0, &l, st)) != TFS_OK ||
        (rc = check_item(n, l, k->in[1], "append", st)) != TFS_OK)
        return rc;
    if ((l->max_len >= 0 && l->n >= l->max_len) || l->n >= TLIST_MAX_LEN)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Tried to push item into a full list "
                             "list size: %" PRId64 " max_num_elements: %" PRId64, l->n,
                             l->max_len >= 0 ? l->max_len : TLIST_MAX_LEN);
    tlist *c = tlist_copy(l, l->n + 1);
    if (c)
        c->items[l->n] = tfs_tensor_ref(k->in[1]);
    return list_tensor(n, c, &k->out[0], st);
}

/* TensorListPopBack(input_handle, element_shape) -> (the list without its last item, that item). */
enum tfs_code tfs__k_tensor_list_pop_back(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tlist *l;
    tfs_shape want, shape = {.rank = 0};
    enum tfs_code rc;
    if ((rc = typed_list(k, 0, &l, st)) != TFS_OK || (rc = input_shape(k, 1, &want, st)) != TFS_OK)
        return rc;
    if (l->n == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Trying to pop from an empty list.");
    if (!l->items[l->n - 1] && (rc = unset_item_shape(n, l, &want, &shape, st)) != TFS_OK)
        return rc;
    if ((rc = item_or_zeros(n, l, l->n - 1, &shape, &k->out[1], st)) != TFS_OK)
        return rc;
    return list_tensor(n, tlist_copy(l, l->n - 1), &k->out[0], st);
}

/* TensorListLength(input_handle) -> int32 scalar. */
enum tfs_code tfs__k_tensor_list_length(tfs_kernel_ctx *k, tfs_status *st)
{
    const tlist *l;
    enum tfs_code rc = input_list(k, 0, &l, st);
    if (rc != TFS_OK)
        return rc;
    if (l->n > INT32_MAX)
        return tfs__node_err(k->node, st, TFS_OUT_OF_RANGE, "list length %" PRId64 " does not fit "
                             "int32", l->n);
    if (tfs_tensor_new_scalar(TFS_DTYPE_INT32, &k->out[0], st) != TFS_OK)
        return tfs_status_prefix(st, "node '%s' (%s)", k->node->name, k->node->op_type);
    *(int32_t *)k->out[0]->data = (int32_t)l->n;
    return TFS_OK;
}

/* TensorListStack(input_handle, element_shape) -> a tensor of shape [n] + element shape. */
enum tfs_code tfs__k_tensor_list_stack(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tlist *l;
    tfs_shape want, shape = {.rank = 0};
    enum tfs_code rc;
    char a[160], b[160];
    if ((rc = typed_list(k, 0, &l, st)) != TFS_OK || (rc = input_shape(k, 1, &want, st)) != TFS_OK)
        return rc;
    const tfs_attr_value *ne = tfs__attr(n, "num_elements");
    if (ne && ne->kind == TFS_ATTR_I && ne->i != -1 && ne->i != l->n)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Operation expected a list with %" PRId64
                             " elements but got a list with %" PRId64 " elements.", ne->i, l->n);
    if (!shape_compatible(&l->shape, &want))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Incompatible shapes: element_shape %s "
                             "vs. the list's element shape %s", pshape_str(&want, a, sizeof a),
                             pshape_str(&l->shape, b, sizeof b));
    shape = shape_merge(&l->shape, &want);
    if (!shape_defined(&shape)) {
        if (l->n == 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Tried to stack elements of an empty "
                                 "list with non-fully-defined element_shape: %s",
                                 pshape_str(&shape, a, sizeof a));
        for (int64_t i = 0; i < l->n && !shape_defined(&shape); i++) {
            if (!l->items[i])
                continue;
            tfs_shape s = shape_of(l->items[i]);
            if (shape_compatible(&shape, &s))
                shape = shape_merge(&shape, &s);
        }
        if (!shape_defined(&shape))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Tried to stack list which only "
                                 "contains uninitialized tensors and has a non-fully-defined "
                                 "element_shape: %s", pshape_str(&shape, a, sizeof a));
    }
    if (shape.rank + 1 > TFS_MAX_RANK)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "stacking items of rank %d gives rank %d "
                             "(supported: up to %d)", shape.rank, shape.rank + 1, TFS_MAX_RANK);
    int64_t dims[TFS_MAX_RANK];
    dims[0] = l->n;
    for (int i = 0; i < shape.rank; i++)
        dims[i + 1] = shape.dims[i];
    for (int64_t i = 0; i < l->n; i++) {
        if (!l->items[i])
            continue;
        const tfs_tensor *it = l->items[i];
        if (!tfs_shape_equal(it->rank, it->dims, shape.rank, shape.dims)) {
            tfs_shape s = shape_of(it);
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Incompatible shapes in list: item %"
                                 PRId64 " has shape %s, expected %s", i,
                                 pshape_str(&s, a, sizeof a), pshape_str(&shape, b, sizeof b));
        }
    }
    tfs_tensor *out = NULL;
    if (tfs_tensor_new(l->dtype, shape.rank + 1, dims, &out, st) != TFS_OK)
        return tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
    int64_t per = tfs_shape_nelem(shape.rank, shape.dims);
    size_t bytes = (size_t)per * tfs_dtype_size(l->dtype);
    for (int64_t i = 0; i < l->n; i++) {
        const tfs_tensor *it = l->items[i];
        if (!it || per == 0)
            continue;   /* unset items stay zero */
        if (l->dtype != TFS_DTYPE_STRING) {
            memcpy((char *)out->data + (size_t)i * bytes, it->data, bytes);
            continue;
        }
        const tfs_string *s = it->data;
        for (int64_t j = 0; j < per; j++) {
            if ((rc = tfs_tensor_set_string(out, i * per + j, s[j].data, s[j].len, st)) != TFS_OK) {
                tfs_tensor_unref(out);
                return tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
            }
        }
    }
    k->out[0] = out;
    return TFS_OK;
}
