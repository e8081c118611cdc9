/* The graph builder (build.h): name scopes and TensorFlow-style unique names, the generic
 * tfs_build_op (inputs as "node:index" strings, type attrs from build-types.c), and the common
 * ops the trainer and users build with.
 *
 * DESIGN. The builder keeps no state of its own beyond the scope prefix: node dtypes are derived
 * on demand from each node's op and attrs (tfs__build_output_dtype), so nodes added through
 * graph.h directly, or imported from a GraphDef, work as inputs too.
 */
#include "runtime/build-impl.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define NAME_MAX_LEN 1024

/* ---- names ---------------------------------------------------------------------------------- */

void tfs__build_state_free(tfs_graph *g)
{
    tfs_free(g->scope);
    tfs_free(g->scope_lens);
    g->scope = NULL;
    g->scope_lens = NULL;
    g->scope_depth = 0;
}

static bool buildable(tfs_graph *g)
{
    return g && !g->finalized && g->err.code == TFS_OK;
}

void tfs_build_scope_push(tfs_graph *g, const char *name)
{
    if (!buildable(g))
        return;
    size_t old = g->scope ? strlen(g->scope) : 0;
    size_t add = name ? strlen(name) : 0;
    size_t *lens = tfs_realloc(g->scope_lens, (size_t)(g->scope_depth + 1) * sizeof *lens);
    char *scope = lens ? tfs_realloc(g->scope, old + add + 2) : NULL;
    if (lens)
        g->scope_lens = lens;
    if (!scope) {
        tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "out of memory pushing a name scope");
        return;
    }
    g->scope = scope;
    if (old == 0)
        scope[0] = '\0';
    g->scope_lens[g->scope_depth++] = old;
    if (add > 0) {
        if (old > 0)
            strcat(scope, "/");
        strcat(scope, name);
    }
}

void tfs_build_scope_pop(tfs_graph *g)
{
    if (!g || g->scope_depth == 0)
        return;
    g->scope[g->scope_lens[--g->scope_depth]] = '\0';
}

const char *tfs_build_scope(const tfs_graph *g)
{
    return g && g->scope ? g->scope : "";
}

char *tfs_build_tensor_name(const tfs_graph *g, tfs_out o, char *buf, size_t n)
{
    const char *name = tfs_out_ok(o) ? tfs_graph_node_name(g, o.node) : NULL;
    if (n == 0)
        return buf;
    if (!name)
        buf[0] = '\0';
    else
        snprintf(buf, n, "%s:%d", name, o.index);
    return buf;
}

/* "<scope>/<base>" made unique ("_1", "_2", ...) into buf; false when too long. */
static bool unique_name(tfs_graph *g, const char *base, char *buf, size_t n)
{
    const char *scope = tfs_build_scope(g);
    int len = snprintf(buf, n, "%s%s%s", scope, *scope ? "/" : "", base);
    if (len < 0 || (size_t)len >= n - 12)
        return false;
    if (tfs_graph_find_node(g, buf) < 0)
        return true;
    for (int k = 1; k < INT_MAX; k++) {
        snprintf(buf + len, n - (size_t)len, "_%d", k);
        if (tfs_graph_find_node(g, buf) < 0)
            return true;
    }
    return false;
}

/* ---- generic nodes -------------------------------------------------------------------------- */

enum tfs_dtype tfs_build_dtype(const tfs_graph *g, tfs_out o)
{
    return tfs_out_ok(o) ? tfs__build_output_dtype(g, o.node, o.index) : TFS_DTYPE_INVALID;
}

/* Adds a node named exactly `full` (no scope, no uniquing) with inputs and type attrs. */
static tfs_out add_node(tfs_graph *g, const char *full, const char *op, int n_in,
                        const tfs_out *in)
{
    enum tfs_dtype dts[16];
    enum tfs_dtype *dt = n_in <= 16 ? dts : tfs_calloc((size_t)n_in, sizeof *dt);
    if (!dt) {
        tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "out of memory adding node '%s'", full);
        return TFS_OUT_NONE;
    }
    for (int i = 0; i < n_in; i++) {
        if (!tfs_out_ok(in[i]) || in[i].node >= g->n_nodes) {
            tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node '%s': input %d is not an output "
                                "of a node of this graph", full, i);
            goto fail;
        }
        dt[i] = tfs__build_output_dtype(g, in[i].node, in[i].index);
    }
    int id = tfs_graph_add_node(g, full, op);
    if (id < 0)
        goto fail;
    for (int i = 0; i < n_in; i++) {
        char name[NAME_MAX_LEN + 16];
        snprintf(name, sizeof name, "%s:%d", g->nodes[in[i].node].name, in[i].index);
        tfs_graph_add_input(g, id, name);
    }
    tfs__build_set_type_attrs(g, id, op, n_in, dt);
    if (dt != dts)
        tfs_free(dt);
    return buildable(g) ? (tfs_out){id, 0} : TFS_OUT_NONE;
fail:
    if (dt != dts)
        tfs_free(dt);
    return TFS_OUT_NONE;
}

tfs_out tfs_build_op(tfs_graph *g, const char *op, const char *name, int n_in, const tfs_out *in)
{
    if (!buildable(g))
        return TFS_OUT_NONE;
    if (!op || !*op || n_in < 0 || (n_in > 0 && !in)) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "tfs_build_op: bad op type or inputs");
        return TFS_OUT_NONE;
    }
    char full[NAME_MAX_LEN];
    if (!unique_name(g, name && *name ? name : op, full, sizeof full)) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node name '%s/%s' is too long",
                            tfs_build_scope(g), name ? name : op);
        return TFS_OUT_NONE;
    }
    return add_node(g, full, op, n_in, in);
}

void tfs_build_control(tfs_graph *g, tfs_out node, tfs_out dep)
{
    if (!buildable(g))
        return;
    if (!tfs_out_ok(node) || !tfs_out_ok(dep) || node.node >= g->n_nodes ||
        dep.node >= g->n_nodes) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "tfs_build_control: no such node");
        return;
    }
    char name[NAME_MAX_LEN + 2];
    snprintf(name, sizeof name, "^%s", g->nodes[dep.node].name);
    tfs_graph_add_input(g, node.node, name);
}

/* ---- common ops ----------------------------------------------------------------------------- */

tfs_out tfs_build_placeholder(tfs_graph *g, const char *name, enum tfs_dtype dt,
                              const tfs_shape *shape)
{
    tfs_out o = tfs_build_op(g, "Placeholder", name, 0, NULL);
    if (!tfs_out_ok(o))
        return o;
    tfs_graph_set_attr_type(g, o.node, "dtype", dt);
    tfs_shape unknown = {.rank = -1};
    tfs_graph_set_attr_shape(g, o.node, "shape", shape ? shape : &unknown);
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_const(tfs_graph *g, const char *name, tfs_tensor *value)
{
    if (buildable(g) && !value) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "tfs_build_const: NULL value");
        return TFS_OUT_NONE;
    }
    tfs_out o = tfs_build_op(g, "Const", name ? name : "Const", 0, NULL);
    if (!tfs_out_ok(o))
        return o;
    tfs_graph_set_attr_tensor(g, o.node, "value", value);
    tfs_graph_set_attr_type(g, o.node, "dtype", value->dtype);
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_scalar(tfs_graph *g, enum tfs_dtype dt, double v)
{
    if (!buildable(g))
        return TFS_OUT_NONE;
    tfs_tensor *t = NULL;
    tfs_status st;
    if (tfs_tensor_new_scalar(dt, &t, &st) != TFS_OK) {
        tfs_graph_set_error(g, st.code, "scalar constant: %s", st.msg);
        return TFS_OUT_NONE;
    }
    switch (dt) {
    case TFS_DTYPE_FLOAT:  *(float *)t->data = (float)v; break;
    case TFS_DTYPE_DOUBLE: *(double *)t->data = v; break;
    case TFS_DTYPE_INT32:  *(int32_t *)t->data = (int32_t)v; break;
    case TFS_DTYPE_INT64:  *(int64_t *)t->data = (int64_t)v; break;
    case TFS_DTYPE_BOOL:   *(bool *)t->data = v != 0; break;
    default:
        tfs_tensor_unref(t);
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "scalar constant of dtype %s",
                            tfs_dtype_name(dt));
        return TFS_OUT_NONE;
    }
    tfs_out o = tfs_build_const(g, "Const", t);
    tfs_tensor_unref(t);
    return o;
}

tfs_out tfs_build_ints(tfs_graph *g, int n, const int64_t *v)
{
    if (!buildable(g))
        return TFS_OUT_NONE;
    int64_t dims[1] = {n};
    tfs_tensor *t = NULL;
    tfs_status st;
    if (n < 0 || tfs_tensor_new(TFS_DTYPE_INT32, 1, dims, &t, &st) != TFS_OK) {
        tfs_graph_set_error(g, n < 0 ? TFS_INVALID_ARGUMENT : st.code, "int constant of %d", n);
        return TFS_OUT_NONE;
    }
    for (int i = 0; i < n; i++)
        ((int32_t *)t->data)[i] = (int32_t)v[i];
    tfs_out o = tfs_build_const(g, "Const", t);
    tfs_tensor_unref(t);
    return o;
}

tfs_out tfs_build_variable(tfs_graph *g, const char *name, enum tfs_dtype dt,
                           const tfs_shape *shape)
{
    if (!buildable(g))
        return TFS_OUT_NONE;
    char full[NAME_MAX_LEN];
    const char *scope = tfs_build_scope(g);
    int len = snprintf(full, sizeof full, "%s%s%s", scope, *scope ? "/" : "", name ? name : "");
    if (!name || !*name || len < 0 || (size_t)len >= sizeof full) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "variable name '%s' is empty or too long",
                            name ? name : "");
        return TFS_OUT_NONE;
    }
    tfs_out o = add_node(g, full, "VariableV2", 0, NULL);
    if (!tfs_out_ok(o))
        return o;
    tfs_graph_set_attr_type(g, o.node, "dtype", dt);
    tfs_shape unknown = {.rank = -1};
    tfs_graph_set_attr_shape(g, o.node, "shape", shape ? shape : &unknown);
    tfs_graph_set_attr_string(g, o.node, "container", "");
    tfs_graph_set_attr_string(g, o.node, "shared_name", "");
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_assign(tfs_graph *g, tfs_out ref, tfs_out value)
{
    tfs_out in[2] = {ref, value};
    tfs_out o = tfs_build_op(g, "Assign", NULL, 2, in);
    if (tfs_out_ok(o)) {
        tfs_graph_set_attr_bool(g, o.node, "validate_shape", true);
        tfs_graph_set_attr_bool(g, o.node, "use_locking", true);
    }
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_identity(tfs_graph *g, tfs_out x)
{
    return tfs_build_op(g, "Identity", NULL, 1, &x);
}

tfs_out tfs_build_unary(tfs_graph *g, const char *op, tfs_out x)
{
    return tfs_build_op(g, op, NULL, 1, &x);
}

tfs_out tfs_build_binary(tfs_graph *g, const char *op, tfs_out a, tfs_out b)
{
    tfs_out in[2] = {a, b};
    return tfs_build_op(g, op, NULL, 2, in);
}

tfs_out tfs_build_matmul(tfs_graph *g, tfs_out a, tfs_out b, bool transpose_a, bool transpose_b)
{
    tfs_out o = tfs_build_binary(g, "MatMul", a, b);
    if (tfs_out_ok(o)) {
        tfs_graph_set_attr_bool(g, o.node, "transpose_a", transpose_a);
        tfs_graph_set_attr_bool(g, o.node, "transpose_b", transpose_b);
    }
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_reduce(tfs_graph *g, const char *op, tfs_out x, tfs_out axes, bool keep_dims)
{
    tfs_out o = tfs_build_binary(g, op, x, axes);
    if (tfs_out_ok(o))
        tfs_graph_set_attr_bool(g, o.node, "keep_dims", keep_dims);
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_reduce_all(tfs_graph *g, const char *op, tfs_out x, int rank)
{
    int64_t axes[TFS_MAX_RANK];
    if (rank < 0 || rank > TFS_MAX_RANK) {
        if (buildable(g))
            tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "reduce over rank %d", rank);
        return TFS_OUT_NONE;
    }
    for (int i = 0; i < rank; i++)
        axes[i] = i;
    return tfs_build_reduce(g, op, x, tfs_build_ints(g, rank, axes), false);
}

tfs_out tfs_build_reshape(tfs_graph *g, tfs_out x, tfs_out shape)
{
    return tfs_build_binary(g, "Reshape", x, shape);
}

tfs_out tfs_build_cast(tfs_graph *g, tfs_out x, enum tfs_dtype dt)
{
    tfs_out o = tfs_build_op(g, "Cast", NULL, 1, &x);
    if (tfs_out_ok(o)) {
        tfs_graph_set_attr_type(g, o.node, "DstT", dt);
        tfs_graph_set_attr_bool(g, o.node, "Truncate", false);
    }
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_shape(tfs_graph *g, tfs_out x)
{
    tfs_out o = tfs_build_op(g, "Shape", NULL, 1, &x);
    if (tfs_out_ok(o))
        tfs_graph_set_attr_type(g, o.node, "out_type", TFS_DTYPE_INT32);
    return buildable(g) ? o : TFS_OUT_NONE;
}

tfs_out tfs_build_add_n(tfs_graph *g, int n, const tfs_out *in)
{
    if (n == 1)
        return buildable(g) ? in[0] : TFS_OUT_NONE;
    if (n < 1) {
        if (buildable(g))
            tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "AddN of %d tensors", n);
        return TFS_OUT_NONE;
    }
    return tfs_build_op(g, "AddN", NULL, n, in);
}

tfs_out tfs_build_group(tfs_graph *g, const char *name, int n, const tfs_out *deps)
{
    tfs_out o = tfs_build_op(g, "NoOp", name, 0, NULL);
    for (int i = 0; i < n && tfs_out_ok(o); i++)
        tfs_build_control(g, o, deps[i]);
    return buildable(g) ? o : TFS_OUT_NONE;
}
