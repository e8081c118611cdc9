/* CPU kernels of the state family: reference variables (VariableV2, Assign, AssignAdd, AssignSub),
 * resource variables (VarHandleOp, ReadVariableOp, AssignVariableOp, AssignAddVariableOp,
 * AssignSubVariableOp, VarIsInitializedOp) and RestoreV2.
 *
 * Variables belong to the session (tfs__session_variable). A VariableV2 output is a reference
 * tensor (dtype + 100, one element: the tfs_variable *); a VarHandleOp output is a DT_RESOURCE
 * scalar holding the same pointer. Assignments swap a new tensor in under the variable's mutex;
 * AssignAdd and AssignSub update in place under it when no one else holds the value and on a copy
 * otherwise (tfs__variable_update_begin), so a concurrent reader keeps an unchanged tensor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* ---- helpers -------------------------------------------------------------------------------- */

enum tfs_code tfs__variable_input(tfs_kernel_ctx *k, int i, bool want_ref, tfs_variable **out,
                                  tfs_status *st)
{
    const tfs_tensor *t = i < k->n_in ? k->in[i] : NULL;
    bool ok = t && t->nelem == 1 &&
              (want_ref ? t->dtype > TFS_DTYPE_REF_OFFSET : t->dtype == TFS_DTYPE_RESOURCE);
    *out = ok ? *(tfs_variable *const *)t->data : NULL;
    if (!*out)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "input %d must be %s, got a %s tensor", i,
                             want_ref ? "a variable reference (VariableV2 output)"
                                      : "a resource handle (VarHandleOp output)",
                             t ? tfs_dtype_name(t->dtype) : "missing");
    return TFS_OK;
}

enum tfs_code tfs__value_input(tfs_kernel_ctx *k, int i, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    tfs_tensor *t = i < k->n_in ? k->in[i] : NULL;
    if (!t)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "input %d is missing", i);
    if (t->dtype <= TFS_DTYPE_REF_OFFSET) {
        *out = tfs_tensor_ref(t);
        return TFS_OK;
    }
    tfs_variable *v = t->nelem == 1 ? *(tfs_variable *const *)t->data : NULL;
    if (!v)
        return tfs__node_err(k->node, st, TFS_INTERNAL, "input %d is a malformed reference", i);
    enum tfs_code rc = tfs__variable_read(v, out, st);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "node '%s' (%s): input %d", k->node->name, k->node->op_type, i);
    return rc;
}

/* The name a variable is created under: attr shared_name, or the node's name when it is empty. */
static const char *shared_name(const tfs_node *n)
{
    const char *s = tfs__attr_str(n, "shared_name", "");
    return *s ? s : n->name;
}

/* Finds or creates the variable of a VariableV2/VarHandleOp node and records its declared shape. */
static enum tfs_code node_variable(tfs_kernel_ctx *k, enum tfs_dtype *dtype, tfs_variable **out,
                                   tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc = tfs__attr_type(n, "dtype", dtype, st);
    if (rc != TFS_OK)
        return rc;
    if (*dtype <= TFS_DTYPE_INVALID || *dtype >= TFS_DTYPE_COUNT || tfs_dtype_size(*dtype) == 0)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "variables of dtype %s are not supported",
                             tfs_dtype_name(*dtype));
    rc = tfs__session_variable(k->sess, tfs__attr_str(n, "container", ""), shared_name(n), *dtype,
                               out, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_attr_value *shape = tfs__attr(n, "shape");
    if (shape && shape->kind == TFS_ATTR_SHAPE && shape->shape.rank >= 0) {
        pthread_mutex_lock(&(*out)->mu);
        if ((*out)->shape.rank < 0)
            (*out)->shape = shape->shape;
        pthread_mutex_unlock(&(*out)->mu);
    }
    return TFS_OK;
}

/* A scalar of `dtype` (a reference dtype or DT_RESOURCE) holding the variable pointer. */
static enum tfs_code handle_tensor(tfs_variable *v, enum tfs_dtype dtype, tfs_tensor **out,
                                   tfs_status *st)
{
    enum tfs_code rc = tfs_tensor_new_scalar(dtype, out, st);
    if (rc == TFS_OK)
        *(tfs_variable **)(*out)->data = v;
    return rc;
}

static bool fully_defined(const tfs_shape *sh)
{
    if (sh->rank < 0)
        return false;
    for (int i = 0; i < sh->rank; i++)
        if (sh->dims[i] < 0)
            return false;
    return true;
}

/* With v->mu held: a new value must have the declared shape when that is fully defined, else the
 * shape of the current value (if any). */
static enum tfs_code check_assign_shape(const tfs_node *n, const tfs_variable *v,
                                        const tfs_tensor *value, tfs_status *st)
{
    int rank;
    const int64_t *dims;
    if (fully_defined(&v->shape)) {
        rank = v->shape.rank;
        dims = v->shape.dims;
    } else if (v->value) {
        rank = v->value->rank;
        dims = v->value->dims;
    } else {
        return TFS_OK;
    }
    if (tfs_shape_equal(rank, dims, value->rank, value->dims))
        return TFS_OK;
    char a[128], b[128];
    return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                         "Assign requires shapes of both tensors to match. lhs shape= %s rhs shape= %s",
                         tfs_shape_str(rank, dims, a, sizeof a),
                         tfs_shape_str(value->rank, value->dims, b, sizeof b));
}

static enum tfs_code check_value_dtype(const tfs_node *n, const tfs_variable *v,
                                       const tfs_tensor *value, tfs_status *st)
{
    if (value->dtype == v->dtype)
        return TFS_OK;
    return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                         "variable '%s' has dtype %s, but the value to assign is %s", v->name,
                         tfs_dtype_short_name(v->dtype), tfs_dtype_short_name(value->dtype));
}

/* Assigns under the variable's lock, validating the shape first when asked to. */
static enum tfs_code assign_checked(const tfs_node *n, tfs_variable *v, tfs_tensor *value,
                                    bool validate_shape, tfs_status *st)
{
    enum tfs_code rc = check_value_dtype(n, v, value, st);
    if (rc != TFS_OK)
        return rc;
    pthread_mutex_lock(&v->mu);
    if (validate_shape)
        rc = check_assign_shape(n, v, value, st);
    tfs_tensor *old = NULL;
    if (rc == TFS_OK) {
        old = v->value;
        v->value = tfs_tensor_ref(value);
    }
    pthread_mutex_unlock(&v->mu);
    tfs_tensor_unref(old);
    return rc;
}

/* An optional bool attr. */
static bool attr_bool_or(const tfs_node *n, const char *name, bool dflt)
{
    const tfs_attr_value *a = tfs__attr(n, name);
    return a && a->kind == TFS_ATTR_B ? a->b : dflt;
}

/* ---- reference variables -------------------------------------------------------------------- */

enum tfs_code tfs__k_variable_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_dtype dtype;
    tfs_variable *v;
    enum tfs_code rc = node_variable(k, &dtype, &v, st);
    if (rc != TFS_OK)
        return rc;
    return handle_tensor(v, (enum tfs_dtype)(dtype + TFS_DTYPE_REF_OFFSET), &k->out[0], st);
}

enum tfs_code tfs__k_assign(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_variable *v;
    tfs_tensor *value = NULL;
    enum tfs_code rc = tfs__variable_input(k, 0, true, &v, st);
    if (rc == TFS_OK)
        rc = tfs__value_input(k, 1, &value, st);   /* Assign(a, b) with b a variable too */
    if (rc == TFS_OK)
        rc = assign_checked(k->node, v, value,
                            attr_bool_or(k->node, "validate_shape", true), st);
    if (rc != TFS_OK) {
        tfs_tensor_unref(value);
        return rc;
    }
    k->out[0] = value;
    return TFS_OK;
}

/* Whether dtype dt supports AssignAdd/AssignSub (TensorFlow's CPU kernels: every numeric type;
 * these are the numeric types the runtime computes on). */
static bool update_dtype_ok(enum tfs_dtype dt)
{
    return dt == TFS_DTYPE_FLOAT || dt == TFS_DTYPE_DOUBLE || dt == TFS_DTYPE_INT32 ||
           dt == TFS_DTYPE_INT64;
}

/* dst += sign * delta elementwise (dst and delta distinct buffers of n elements). */
static void add_elements(enum tfs_dtype dt, void *dst, const void *delta, int sign, int64_t n)
{
#define ADD_LOOP(T, UT)                                                                            \
    do {                                                                                           \
        T *restrict d = dst;                                                                       \
        const T *restrict b = delta;                                                               \
        if (sign > 0)                                                                              \
            for (int64_t i = 0; i < n; i++)                                                        \
                d[i] = (T)((UT)d[i] + (UT)b[i]);                                                   \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++)                                                        \
                d[i] = (T)((UT)d[i] - (UT)b[i]);                                                   \
    } while (0)
    switch (dt) {
    case TFS_DTYPE_FLOAT:  ADD_LOOP(float, float); break;
    case TFS_DTYPE_DOUBLE: ADD_LOOP(double, double); break;
    case TFS_DTYPE_INT32:  ADD_LOOP(int32_t, uint32_t); break;   /* wraps like TensorFlow, no UB */
    case TFS_DTYPE_INT64:  ADD_LOOP(int64_t, uint64_t); break;
    default:               TFS_ASSERT(!"update_dtype_ok() checked the dtype");
    }
#undef ADD_LOOP
}

/* v += sign * delta as one step under v's lock, in place when nothing else holds the value
 * (tfs__variable_update_begin). *result (when not NULL) receives a reference to the new value. */
static enum tfs_code update_variable(const tfs_node *n, tfs_variable *v, const tfs_tensor *delta,
                                     int sign, tfs_tensor **result, tfs_status *st)
{
    enum tfs_code rc = check_value_dtype(n, v, delta, st);
    if (rc != TFS_OK)
        return rc;
    if (!update_dtype_ok(v->dtype))
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s of dtype %s is not supported",
                             n->op_type, tfs_dtype_short_name(v->dtype));
    tfs_tensor *dst = NULL, *replaced = NULL;
    pthread_mutex_lock(&v->mu);
    const tfs_tensor *old = v->value;
    char a[128], b[128];
    if (!old) {
        rc = tfs__node_err(n, st, TFS_FAILED_PRECONDITION,
                           "Attempting to use uninitialized value %s", v->name);
    } else if (!tfs_shape_equal(old->rank, old->dims, delta->rank, delta->dims)) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Cannot update variable with shape %s using a Tensor with shape %s, "
                           "shapes must be equal.", tfs_shape_str(old->rank, old->dims, a, sizeof a),
                           tfs_shape_str(delta->rank, delta->dims, b, sizeof b));
    } else if ((rc = tfs__variable_update_begin(v, &dst, st)) == TFS_OK) {
        /* delta may be the old value itself (v += v); then dst is a copy, never delta. */
        add_elements(v->dtype, dst->data, delta->data, sign, dst->nelem);
        replaced = tfs__variable_update_commit(v, dst);
        if (result)
            *result = tfs_tensor_ref(dst);
    }
    pthread_mutex_unlock(&v->mu);
    tfs_tensor_unref(replaced);
    return rc;
}

/* AssignAdd / AssignSub(ref, value) -> the updated value. */
static enum tfs_code assign_update_ref(tfs_kernel_ctx *k, int sign, tfs_status *st)
{
    tfs_variable *v;
    tfs_tensor *delta = NULL;
    enum tfs_code rc = tfs__variable_input(k, 0, true, &v, st);
    if (rc == TFS_OK)
        rc = tfs__value_input(k, 1, &delta, st);
    if (rc == TFS_OK)
        rc = update_variable(k->node, v, delta, sign, &k->out[0], st);
    tfs_tensor_unref(delta);
    return rc;
}

enum tfs_code tfs__k_assign_add(tfs_kernel_ctx *k, tfs_status *st)
{
    return assign_update_ref(k, 1, st);
}

enum tfs_code tfs__k_assign_sub(tfs_kernel_ctx *k, tfs_status *st)
{
    return assign_update_ref(k, -1, st);
}

/* ---- resource variables --------------------------------------------------------------------- */

enum tfs_code tfs__k_var_handle_op(tfs_kernel_ctx *k, tfs_status *st)
{
    enum tfs_dtype dtype;
    tfs_variable *v;
    enum tfs_code rc = node_variable(k, &dtype, &v, st);
    if (rc != TFS_OK)
        return rc;
    return handle_tensor(v, TFS_DTYPE_RESOURCE, &k->out[0], st);
}

enum tfs_code tfs__k_read_variable_op(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_variable *v;
    enum tfs_dtype dtype;
    enum tfs_code rc = tfs__variable_input(k, 0, false, &v, st);
    if (rc == TFS_OK)
        rc = tfs__attr_type(k->node, "dtype", &dtype, st);
    if (rc != TFS_OK)
        return rc;
    if (dtype != v->dtype)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "Trying to read variable '%s' with wrong dtype. Expected %s got %s",
                             v->name, tfs_dtype_short_name(v->dtype), tfs_dtype_short_name(dtype));
    return tfs__variable_read(v, &k->out[0], st);
}

enum tfs_code tfs__k_assign_variable_op(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_variable *v;
    enum tfs_dtype dtype;
    enum tfs_code rc = tfs__variable_input(k, 0, false, &v, st);
    if (rc == TFS_OK)
        rc = tfs__attr_type(k->node, "dtype", &dtype, st);
    if (rc != TFS_OK)
        return rc;
    if (dtype != k->in[1]->dtype)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "Variable and value dtypes don't match; respectively, %s and %s",
                             tfs_dtype_short_name(dtype), tfs_dtype_short_name(k->in[1]->dtype));
    return assign_checked(k->node, v, k->in[1], attr_bool_or(k->node, "validate_shape", false),
                          st);
}

/* AssignAddVariableOp / AssignSubVariableOp(resource, value): no outputs. */
static enum tfs_code assign_update_resource(tfs_kernel_ctx *k, int sign, tfs_status *st)
{
    tfs_variable *v;
    enum tfs_dtype dtype;
    enum tfs_code rc = tfs__variable_input(k, 0, false, &v, st);
    if (rc == TFS_OK)
        rc = tfs__attr_type(k->node, "dtype", &dtype, st);
    if (rc != TFS_OK)
        return rc;
    if (dtype != v->dtype)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "Trying to assign variable with wrong dtype. Expected %s got %s",
                             tfs_dtype_short_name(v->dtype), tfs_dtype_short_name(dtype));
    return update_variable(k->node, v, k->in[1], sign, NULL, st);
}

enum tfs_code tfs__k_assign_add_variable_op(tfs_kernel_ctx *k, tfs_status *st)
{
    return assign_update_resource(k, 1, st);
}

enum tfs_code tfs__k_assign_sub_variable_op(tfs_kernel_ctx *k, tfs_status *st)
{
    return assign_update_resource(k, -1, st);
}

enum tfs_code tfs__k_var_is_initialized_op(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_variable *v;
    enum tfs_code rc = tfs__variable_input(k, 0, false, &v, st);
    if (rc == TFS_OK)
        rc = tfs_tensor_new_scalar(TFS_DTYPE_BOOL, &k->out[0], st);
    if (rc != TFS_OK)
        return rc;
    pthread_mutex_lock(&v->mu);
    *(bool *)k->out[0]->data = v->value != NULL;
    pthread_mutex_unlock(&v->mu);
    return TFS_OK;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* A string tensor input with exactly `n` elements (or a scalar when n < 0). */
static enum tfs_code string_input(tfs_kernel_ctx *k, int i, const char *what, int64_t n,
                                  tfs_status *st)
{
    const tfs_tensor *t = k->in[i];
    if (t->dtype != TFS_DTYPE_STRING)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "%s must be a string tensor, got %s",
                             what, tfs_dtype_short_name(t->dtype));
    if (n < 0 ? t->nelem != 1 : t->nelem != n)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "%s has %lld elements, expected %lld", what, (long long)t->nelem,
                             (long long)(n < 0 ? 1 : n));
    return TFS_OK;
}

/* A RestoreV2 shape_and_slice entry, "D0 D1 ... S0:S1:..." (the full shape, then one slice per
 * dimension: "-" or "start,length", length possibly "-"). TensorFlow writes such entries on
 * unpartitioned variables too ("10 0,10", "3 10 0,3:0,10"), so one whose slices all cover their
 * whole dimension is an ordinary restore. Returns 1 with the shape when the entry covers the
 * whole tensor, 0 when it names a part of it (a partitioned variable), -1 when it is malformed. */
static int whole_tensor_slice(const tfs_string *spec, int64_t *dims, int *rank)
{
    char buf[512];
    if (spec->len >= sizeof buf)
        return -1;
    memcpy(buf, spec->data, spec->len);
    buf[spec->len] = 0;
    char *tok[TFS_MAX_RANK + 2];
    int   n = 0;
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (n == TFS_MAX_RANK + 1)
            return -1;
        tok[n++] = t;
    }
    if (n < 2)
        return -1;
    *rank = n - 1;
    for (int i = 0; i < *rank; i++) {
        char *end;
        errno = 0;
        long long d = strtoll(tok[i], &end, 10);
        if (*end || end == tok[i] || d < 0 || errno)
            return -1;
        dims[i] = d;
    }
    int   whole = 1, i = 0;
    char *save = NULL;
    for (char *part = strtok_r(tok[n - 1], ":", &save); part; part = strtok_r(NULL, ":", &save)) {
        if (i == *rank)
            return -1;
        if (strcmp(part, "-") != 0) {
            char *comma = strchr(part, ','), *end;
            if (!comma)
                return -1;
            *comma = 0;
            errno = 0;
            long long start = strtoll(part, &end, 10);
            if (*end || end == part || start < 0 || errno)
                return -1;
            long long len = -1;
            if (strcmp(comma + 1, "-") != 0) {
                len = strtoll(comma + 1, &end, 10);
                if (*end || end == comma + 1 || len < 0 || errno)
                    return -1;
            }
            if (start != 0 || (len >= 0 && len != dims[i]))
                whole = 0;
        }
        i++;
    }
    return i == *rank ? whole : -1;
}

/* RestoreV2(prefix, tensor_names, shape_and_slices) -> one tensor per attr `dtypes` entry, read
 * through the session's checkpoint reader (the runtime itself knows no files). */
enum tfs_code tfs__k_restore_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_attr_list *dtypes;
    enum tfs_code rc = tfs__run_check_file_ops(n, st);
    if (rc == TFS_OK)
        rc = tfs__attr_list(n, "dtypes", TFS_ATTR_TYPE, &dtypes, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 3 || k->n_out != dtypes->n)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 3 inputs and %d outputs",
                             dtypes->n);
    if ((rc = string_input(k, 0, "prefix", -1, st)) != TFS_OK ||
        (rc = string_input(k, 1, "tensor_names", dtypes->n, st)) != TFS_OK ||
        (rc = string_input(k, 2, "shape_and_slices", dtypes->n, st)) != TFS_OK)
        return rc;
    const tfs_checkpoint_reader *reader = tfs__session_checkpoint(k->sess);
    if (!reader || !reader->read)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "no checkpoint reader was given to the session");
    const tfs_string *prefix_s = tfs_tensor_strings(k->in[0]);
    const tfs_string *names = tfs_tensor_strings(k->in[1]);
    const tfs_string *slices = tfs_tensor_strings(k->in[2]);
    char *prefix = tfs_strndup(prefix_s->data ? prefix_s->data : "", prefix_s->len);
    char *name = NULL;
    if (!prefix)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    for (int i = 0; i < dtypes->n; i++) {
        tfs_free(name);
        name = tfs_strndup(names[i].data ? names[i].data : "", names[i].len);
        if (!name) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
            goto fail;
        }
        int64_t full[TFS_MAX_RANK + 1];
        int     full_rank = -1;
        if (slices[i].len > 0) {
            int whole = whole_tensor_slice(&slices[i], full, &full_rank);
            if (whole <= 0) {
                rc = whole < 0 ? tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                               "tensor '%s': malformed shape_and_slice '%.*s'",
                                               name, (int)slices[i].len, slices[i].data)
                               : tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                               "partitioned variables are not supported: tensor "
                                               "'%s' has shape_and_slice '%.*s'",
                                               name, (int)slices[i].len, slices[i].data);
                goto fail;
            }
        }
        if ((rc = reader->read(reader->user, prefix, name, dtypes->type[i], &k->out[i], st)) !=
            TFS_OK)
            goto fail;
        if (full_rank >= 0 && k->out[i] &&
            !tfs_shape_equal(full_rank, full, k->out[i]->rank, k->out[i]->dims)) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "tensor '%s': shape_and_slice '%.*s' does not match the "
                               "checkpoint's shape", name, (int)slices[i].len, slices[i].data);
            goto fail;
        }
        if (!k->out[i] || k->out[i]->dtype != dtypes->type[i]) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "tensor_name = %s; expected dtype %s does not equal restored dtype %s",
                               name, tfs_dtype_short_name(dtypes->type[i]),
                               k->out[i] ? tfs_dtype_short_name(k->out[i]->dtype) : "none");
            goto fail;
        }
    }
    tfs_free(prefix);
    tfs_free(name);
    return TFS_OK;
fail:
    tfs_free(prefix);
    tfs_free(name);
    return rc;   /* the session releases any outputs already stored */
}
