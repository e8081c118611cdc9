/* CPU kernels of functional control flow: While and StatelessWhile, If and StatelessIf, Case and
 * StatelessCase.
 *
 * DESIGN. These ops name their bodies in func attrs (cond/body, then_branch/else_branch, and
 * Case's list(func) attr branches); the
 * bodies are functions of the graph's library (graph.h), prepared once per session by
 * tfs_session_new (session.c) into a child session plus a cached plan. A kernel here resolves the
 * names (a short scan of the library, once per execution of the node, not per iteration), checks
 * the values against the node's type-list attrs, and calls tfs__session_call, which only executes
 * the cached plan. Loop variables are tensors passed by reference from one iteration to the next;
 * nothing is copied. Conditions follow TensorFlow's ToBool: a scalar is true when non-zero
 * (bool, numbers) or non-empty (string); any other tensor is true when it has elements.
 * Guards: a While stops with RESOURCE_EXHAUSTED after the session's max_loop_iterations, and calls
 * nest at most MAX_CALL_DEPTH deep on one thread (a recursive function fails instead of
 * exhausting the stack). parallel_iterations and output_shapes are accepted and not needed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"

#define MAX_CALL_DEPTH 64

/* Nesting of function calls on this thread: a body runs synchronously on its caller's thread.
 * When the limit is hit, the levels in between add no context to the error (64 prefixes would
 * push the cause out of the message); the outermost call adds its own. */
static _Thread_local int  call_depth;
static _Thread_local bool depth_exceeded;

int tfs__nout_list_Tout(const tfs_node *n)
{
    const tfs_attr_value *v = tfs__attr(n, "Tout");
    if (!v || v->kind != TFS_ATTR_LIST || (v->list.n > 0 && v->list.kind != TFS_ATTR_TYPE))
        return -1;
    return v->list.n;
}

/* TensorFlow's ToBool of a condition tensor. */
static enum tfs_code to_bool(const tfs_node *n, const tfs_tensor *t, const char *what, bool *out,
                             tfs_status *st)
{
    if (t->rank != 0) {
        *out = t->nelem > 0;
        return TFS_OK;
    }
    const void *p = t->data;
    switch (t->dtype) {
    case TFS_DTYPE_BOOL:   *out = *(const uint8_t *)p != 0; break;
    case TFS_DTYPE_FLOAT:  *out = *(const float *)p != 0.0f; break;
    case TFS_DTYPE_DOUBLE: *out = *(const double *)p != 0.0; break;
    case TFS_DTYPE_INT8:   *out = *(const int8_t *)p != 0; break;
    case TFS_DTYPE_UINT8:  *out = *(const uint8_t *)p != 0; break;
    case TFS_DTYPE_INT16:  *out = *(const int16_t *)p != 0; break;
    case TFS_DTYPE_UINT16: *out = *(const uint16_t *)p != 0; break;
    case TFS_DTYPE_INT32:  *out = *(const int32_t *)p != 0; break;
    case TFS_DTYPE_UINT32: *out = *(const uint32_t *)p != 0; break;
    case TFS_DTYPE_INT64:  *out = *(const int64_t *)p != 0; break;
    case TFS_DTYPE_UINT64: *out = *(const uint64_t *)p != 0; break;
    case TFS_DTYPE_HALF:
    case TFS_DTYPE_BFLOAT16:   /* +0 and -0 are false: every bit but the sign is zero */
        *out = (*(const uint16_t *)p & 0x7fffu) != 0;
        break;
    case TFS_DTYPE_STRING: *out = ((const tfs_string *)p)->len > 0; break;
    default:
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s: cannot convert a scalar of dtype %s "
                             "to bool", what, tfs_dtype_name(t->dtype));
    }
    return TFS_OK;
}

/* The library function `fname`, named by func attr `attr` of the node. */
static enum tfs_code resolve(const tfs_kernel_ctx *k, const char *attr, const char *fname,
                             int *fn, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (tfs__session_function(k->sess, fname, fn, st) != TFS_OK)
        return tfs_status_prefix(st, "node '%s' (%s): attr '%s'", n->name, n->op_type, attr);
    return TFS_OK;
}

/* The library function named by func attr `attr` of the node. */
static enum tfs_code func_attr(const tfs_kernel_ctx *k, const char *attr, int *fn,
                               const char **name, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_attr_value *v = tfs__attr(n, attr);
    if (!v || v->kind != TFS_ATTR_FUNC)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "missing func attr '%s'", attr);
    *name = v->func;
    return resolve(k, attr, v->func, fn, st);
}

/* Checks count and dtypes of v[] against list(type) attr `attr`; an absent attr checks nothing
 * when `optional`. */
static enum tfs_code check_types(const tfs_node *n, const char *attr, bool optional,
                                 tfs_tensor *const *v, int count, const char *what, tfs_status *st)
{
    if (optional && !tfs__attr(n, attr))
        return TFS_OK;
    const tfs_attr_list *l;
    enum tfs_code rc = tfs__attr_list(n, attr, TFS_ATTR_TYPE, &l, st);
    if (rc != TFS_OK)
        return rc;
    if (l->n != count)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "has %d %ss but attr '%s' lists %d types",
                             count, what, attr, l->n);
    for (int i = 0; i < count; i++)
        if (tfs_dtype_base(v[i]->dtype) != l->type[i])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s %d has dtype %s, but attr '%s' "
                                 "says %s", what, i, tfs_dtype_name(v[i]->dtype), attr,
                                 tfs_dtype_name(l->type[i]));
    return TFS_OK;
}

/* Calls library function fn with the nesting guard; errors say which function of the node and,
 * for loops, which iteration (iter < 0: none) failed. */
static enum tfs_code call(tfs_kernel_ctx *k, int fn, const char *role, const char *fname,
                          int64_t iter, tfs_tensor *const *args, int n_args, tfs_tensor **res,
                          int n_res, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (call_depth >= MAX_CALL_DEPTH) {
        for (int i = 0; i < n_res; i++)
            res[i] = NULL;
        depth_exceeded = true;
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "function calls nest deeper than %d "
                             "(does '%s' call itself?)", MAX_CALL_DEPTH, fname);
    }
    call_depth++;
    enum tfs_code rc = tfs__session_call(k->sess, fn, args, n_args, res, n_res, st);
    call_depth--;
    if (rc != TFS_OK && depth_exceeded) {
        if (call_depth > 0)
            return rc;
        depth_exceeded = false;
    }
    if (rc != TFS_OK) {
        if (iter >= 0)
            tfs_status_prefix(st, "node '%s' (%s): %s function '%s', iteration %" PRId64, n->name,
                              n->op_type, role, fname, iter);
        else
            tfs_status_prefix(st, "node '%s' (%s): %s function '%s'", n->name, n->op_type, role,
                              fname);
    }
    return rc;
}

static void unref_all(tfs_tensor **v, int n)
{
    for (int i = 0; v && i < n; i++) {
        tfs_tensor_unref(v[i]);
        v[i] = NULL;
    }
}

/* While / StatelessWhile: vars = inputs; while ToBool(cond(vars)): vars = body(vars). */
enum tfs_code tfs__k_while(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    int cond, body, nv = k->n_in;
    const char *cond_name, *body_name;
    enum tfs_code rc;
    if ((rc = func_attr(k, "cond", &cond, &cond_name, st)) != TFS_OK ||
        (rc = func_attr(k, "body", &body, &body_name, st)) != TFS_OK ||
        (rc = check_types(n, "T", false, k->in, nv, "input", st)) != TFS_OK)
        return rc;
    if (k->n_out != nv)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "has %d inputs but %d outputs", nv,
                             k->n_out);
    tfs_tensor **vars = tfs_calloc((size_t)nv + 1, sizeof *vars);
    tfs_tensor **next = tfs_calloc((size_t)nv + 1, sizeof *next);
    if (!vars || !next) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    for (int i = 0; i < nv; i++)
        vars[i] = tfs_tensor_ref(k->in[i]);
    int64_t limit = tfs__session_max_loop_iterations(k->sess);
    for (int64_t it = 0;; it++) {
        tfs_tensor *c = NULL;
        bool go = false;
        if ((rc = call(k, cond, "cond", cond_name, it, vars, nv, &c, 1, st)) != TFS_OK)
            goto done;
        rc = to_bool(n, c, "the cond function's result", &go, st);
        tfs_tensor_unref(c);
        if (rc != TFS_OK)
            goto done;
        if (!go)
            break;
        if (it >= limit) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "the loop did not end after %" PRId64
                               " iterations (the session's max_loop_iterations)", limit);
            goto done;
        }
        if ((rc = call(k, body, "body", body_name, it, vars, nv, next, nv, st)) != TFS_OK)
            goto done;
        if ((rc = check_types(n, "T", false, next, nv, "body result", st)) != TFS_OK)
            goto done;
        for (int i = 0; i < nv; i++) {
            tfs_tensor_unref(vars[i]);
            vars[i] = next[i];
            next[i] = NULL;
        }
    }
    for (int i = 0; i < nv; i++) {
        k->out[i] = vars[i];
        vars[i] = NULL;
    }
done:
    unref_all(vars, vars ? nv : 0);
    unref_all(next, next ? nv : 0);
    tfs_free(vars);
    tfs_free(next);
    return rc;
}

/* If / StatelessIf: outputs = (ToBool(cond) ? then_branch : else_branch)(inputs[1:]). */
enum tfs_code tfs__k_if(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "needs a condition input");
    bool which = false;
    enum tfs_code rc = to_bool(n, k->in[0], "the condition", &which, st);
    if (rc != TFS_OK)
        return rc;
    const char *attr = which ? "then_branch" : "else_branch";
    const char *fname;
    int fn;
    if ((rc = func_attr(k, attr, &fn, &fname, st)) != TFS_OK ||
        (rc = check_types(n, "Tin", true, k->in + 1, k->n_in - 1, "input", st)) != TFS_OK)
        return rc;
    if ((rc = call(k, fn, attr, fname, -1, k->in + 1, k->n_in - 1, k->out, k->n_out, st)) !=
        TFS_OK)
        return rc;
    return check_types(n, "Tout", false, k->out, k->n_out, "result", st);
}

/* ---- TF1 conditionals: Switch and Merge ------------------------------------------------------ */

/* Switch: data to output_true when pred, else to output_false; the other output is dead. */
enum tfs_code tfs__k_switch(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *p = k->in[1];
    if (p->dtype != TFS_DTYPE_BOOL || p->rank != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "The second input must be a scalar "
                             "bool, but it has shape %s and dtype %s",
                             tfs_shape_str(p->rank, p->dims, (char[64]){0}, 64),
                             tfs_dtype_name(p->dtype));
    bool pred = *(const uint8_t *)p->data != 0;
    k->out[pred ? 1 : 0] = tfs_tensor_ref(k->in[0]);
    k->out[pred ? 0 : 1] = tfs_tensor_ref(tfs__dead_tensor());
    return TFS_OK;
}

/* Merge: the first live input and its index. The executor runs it once any input is live. */
enum tfs_code tfs__k_merge(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    for (int i = 0; i < k->n_in; i++) {
        if (k->in[i] == tfs__dead_tensor())
            continue;
        tfs_tensor *index;
        enum tfs_code rc = tfs_tensor_new_scalar(TFS_DTYPE_INT32, &index, st);
        if (rc != TFS_OK)
            return rc;
        *(int32_t *)index->data = i;
        k->out[0] = tfs_tensor_ref(k->in[i]);
        k->out[1] = index;
        return TFS_OK;
    }
    return tfs__node_err(n, st, TFS_INTERNAL, "every input is dead");
}

/* Case / StatelessCase: outputs = branches[b](inputs[1:]) where b = branch_index, or the last
 * branch when b is out of range (negative too): TensorFlow's rule, which makes the last branch
 * the default of a tf.switch_case. */
enum tfs_code tfs__k_case(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "needs a branch_index input");
    const tfs_tensor *bi = k->in[0];
    if (bi->dtype != TFS_DTYPE_INT32 || bi->rank != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "branch_index must be an int32 scalar, "
                             "got a %s tensor of rank %d", tfs_dtype_name(bi->dtype), bi->rank);
    const tfs_attr_list *branches;
    enum tfs_code rc = tfs__attr_list(n, "branches", TFS_ATTR_FUNC, &branches, st);
    if (rc != TFS_OK)
        return rc;
    if (branches->n < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr 'branches' lists no function");
    int32_t b = *(const int32_t *)bi->data;
    if (b < 0 || b >= branches->n)
        b = branches->n - 1;
    char role[48];
    snprintf(role, sizeof role, "branches[%d]", (int)b);
    int fn;
    if ((rc = resolve(k, "branches", branches->func[b], &fn, st)) != TFS_OK ||
        (rc = check_types(n, "Tin", true, k->in + 1, k->n_in - 1, "input", st)) != TFS_OK)
        return rc;
    if ((rc = call(k, fn, role, branches->func[b], -1, k->in + 1, k->n_in - 1, k->out, k->n_out,
                   st)) != TFS_OK)
        return rc;
    return check_types(n, "Tout", false, k->out, k->n_out, "result", st);
}
