/* Autodiff (build.h tfs_build_gradients): reverse-mode gradients built as graph nodes, like
 * tf.gradients, from per-op gradient functions (grad-math.c, grad-nn.c, grad-array.c).
 *
 * DESIGN. The walk considers only the nodes that existed when it started and that lie on a data
 * path from some x to some y (forward-reachable from the xs, not through StopGradient or
 * PreventGradient, and backward-reachable from the ys). Those are visited consumers-first; each
 * output's incoming gradients are summed (AddN) once all its consumers have been visited, handed
 * to the op's gradient function, and the input gradients it returns are recorded as
 * contributions to the producing tensors. Gradients flow only through floating-point tensors:
 * a contribution to an integer or boolean tensor is dropped, as TensorFlow does. The table of
 * gradient functions is indexed by enum tfs_op (one place lists which ops are differentiable).
 */
#include "runtime/build-impl.h"

#include <stdio.h>
#include <string.h>

/* ---- the table ------------------------------------------------------------------------------ */

static const tfs_grad_fn GRAD[TFS_OP_COUNT] = {
    [TFS_OP_IDENTITY] = tfs__grad_identity,
    [TFS_OP_CHECK_NUMERICS] = tfs__grad_identity,
    [TFS_OP_ADD] = tfs__grad_add,
    [TFS_OP_ADD_V2] = tfs__grad_add,
    [TFS_OP_SUB] = tfs__grad_sub,
    [TFS_OP_MUL] = tfs__grad_mul,
    [TFS_OP_REAL_DIV] = tfs__grad_real_div,
    [TFS_OP_DIV] = tfs__grad_real_div,
    [TFS_OP_MAXIMUM] = tfs__grad_maximum,
    [TFS_OP_MINIMUM] = tfs__grad_minimum,
    [TFS_OP_SQUARED_DIFFERENCE] = tfs__grad_squared_difference,
    [TFS_OP_POW] = tfs__grad_pow,
    [TFS_OP_NEG] = tfs__grad_neg,
    [TFS_OP_ABS] = tfs__grad_abs,
    [TFS_OP_SQUARE] = tfs__grad_square,
    [TFS_OP_SQRT] = tfs__grad_sqrt,
    [TFS_OP_RSQRT] = tfs__grad_rsqrt,
    [TFS_OP_RECIPROCAL] = tfs__grad_reciprocal,
    [TFS_OP_INV] = tfs__grad_reciprocal,
    [TFS_OP_EXP] = tfs__grad_exp,
    [TFS_OP_LOG] = tfs__grad_log,
    [TFS_OP_LOG1P] = tfs__grad_log1p,
    [TFS_OP_TANH] = tfs__grad_tanh,
    [TFS_OP_SIGMOID] = tfs__grad_sigmoid,
    [TFS_OP_ADD_N] = tfs__grad_add_n,
    [TFS_OP_SUM] = tfs__grad_sum,
    [TFS_OP_MEAN] = tfs__grad_mean,
    [TFS_OP_CAST] = tfs__grad_cast,
    [TFS_OP_CLIP_BY_VALUE] = tfs__grad_clip_by_value,
    [TFS_OP_FLOOR] = tfs__grad_zero,
    [TFS_OP_CEIL] = tfs__grad_zero,
    [TFS_OP_ROUND] = tfs__grad_zero,
    [TFS_OP_RINT] = tfs__grad_zero,
    [TFS_OP_SIGN] = tfs__grad_zero,
    [TFS_OP_ZEROS_LIKE] = tfs__grad_zero,
    [TFS_OP_ONES_LIKE] = tfs__grad_zero,
    [TFS_OP_SHAPE] = tfs__grad_zero,
    [TFS_OP_SIZE] = tfs__grad_zero,
    [TFS_OP_RANK] = tfs__grad_zero,
    [TFS_OP_MAT_MUL] = tfs__grad_mat_mul,
    [TFS_OP_BIAS_ADD] = tfs__grad_bias_add,
    [TFS_OP_BIAS_ADD_V1] = tfs__grad_bias_add,
    [TFS_OP_RELU] = tfs__grad_relu,
    [TFS_OP_RELU6] = tfs__grad_relu6,
    [TFS_OP_ELU] = tfs__grad_elu,
    [TFS_OP_SELU] = tfs__grad_selu,
    [TFS_OP_LEAKY_RELU] = tfs__grad_leaky_relu,
    [TFS_OP_SOFTPLUS] = tfs__grad_softplus,
    [TFS_OP_SOFTMAX] = tfs__grad_softmax,
    [TFS_OP_LOG_SOFTMAX] = tfs__grad_log_softmax,
    [TFS_OP_CONV2D] = tfs__grad_conv2d,
    [TFS_OP_DEPTHWISE_CONV2D_NATIVE] = tfs__grad_depthwise_conv2d,
    [TFS_OP_MAX_POOL] = tfs__grad_max_pool,
    [TFS_OP_AVG_POOL] = tfs__grad_avg_pool,
    [TFS_OP_RESIZE_BILINEAR] = tfs__grad_resize_bilinear,
    [TFS_OP_RESIZE_NEAREST_NEIGHBOR] = tfs__grad_resize_nearest_neighbor,
    [TFS_OP_FUSED_BATCH_NORM] = tfs__grad_fused_batch_norm,
    [TFS_OP_FUSED_BATCH_NORM_V2] = tfs__grad_fused_batch_norm,
    [TFS_OP_FUSED_BATCH_NORM_V3] = tfs__grad_fused_batch_norm,
    [TFS_OP_RESHAPE] = tfs__grad_reshape,
    [TFS_OP_EXPAND_DIMS] = tfs__grad_expand_dims,
    [TFS_OP_SQUEEZE] = tfs__grad_squeeze,
    [TFS_OP_TRANSPOSE] = tfs__grad_transpose,
    [TFS_OP_CONCAT_V2] = tfs__grad_concat,
    [TFS_OP_PACK] = tfs__grad_pack,
    [TFS_OP_GATHER_V2] = tfs__grad_gather,
    [TFS_OP_TILE] = tfs__grad_tile,
    [TFS_OP_PAD] = tfs__grad_pad,
    [TFS_OP_SELECT] = tfs__grad_select,
    [TFS_OP_SELECT_V2] = tfs__grad_select,
    [TFS_OP_SLICE] = tfs__grad_slice,
};

tfs_grad_fn tfs__grad_fn(enum tfs_op op)
{
    return op >= 0 && op < TFS_OP_COUNT ? GRAD[op] : NULL;
}

/* Ops whose extra gradient functions live in other families' files (losses): looked up by name
 * because their ops are appended to ops.def by the kernels that implement them. */
static tfs_grad_fn grad_by_name(const char *op_type)
{
    static const struct {
        const char *op;
        tfs_grad_fn fn;
    } EXTRA[] = {
        {"SoftmaxCrossEntropyWithLogits", tfs__grad_softmax_xent},
        {"SparseSoftmaxCrossEntropyWithLogits", tfs__grad_sparse_softmax_xent},
        {"L2Loss", tfs__grad_l2_loss},
        {"Snapshot", tfs__grad_identity},
    };
    for (size_t i = 0; i < sizeof EXTRA / sizeof EXTRA[0]; i++)
        if (!strcmp(EXTRA[i].op, op_type))
            return EXTRA[i].fn;
    return NULL;
}

static tfs_grad_fn grad_for(const char *op_type)
{
    const struct tfs_op_def *op = tfs__op_lookup(op_type);
    tfs_grad_fn fn = op ? tfs__grad_fn((enum tfs_op)(op - tfs__ops)) : NULL;
    return fn ? fn : grad_by_name(op_type);
}

bool tfs_op_has_gradient(const char *op_type)
{
    return op_type && grad_for(op_type) != NULL;
}

/* ---- helpers for gradient functions --------------------------------------------------------- */

tfs_out tfs__grad_dy_or_zeros(tfs_grad_ctx *c, int i)
{
    return tfs_out_ok(c->dy[i]) ? c->dy[i] : tfs_build_unary(c->g, "ZerosLike", c->y[i]);
}

tfs_out tfs__grad_scalar_like(tfs_graph *g, tfs_out x, double v)
{
    return tfs_build_scalar(g, tfs_dtype_base(tfs_build_dtype(g, x)), v);
}

tfs_out tfs__grad_unbroadcast(tfs_graph *g, tfs_out grad, tfs_out x, tfs_out other, bool first)
{
    if (x.node == other.node && x.index == other.index)
        return grad;
    tfs_out sx = tfs_build_shape(g, x), so = tfs_build_shape(g, other);
    tfs_out args = first ? tfs_build_binary(g, "BroadcastGradientArgs", sx, so)
                         : tfs_build_binary(g, "BroadcastGradientArgs", so, sx);
    tfs_out axes = tfs_out_at(args, first ? 0 : 1);
    tfs_out sum = tfs_build_reduce(g, "Sum", grad, axes, false);
    return tfs_build_reshape(g, sum, sx);
}

/* ---- the walk ------------------------------------------------------------------------------- */

/* A gradient contribution to output `index` of a node; chained per node. */
typedef struct contrib {
    int     index;
    tfs_out grad;
    int     next;    /* next contribution to the same node, -1 */
} contrib;

typedef struct walk {
    tfs_graph *g;
    int        n;            /* nodes at the start: the walk never looks at newer ones */
    char      *from_x;       /* [n] node depends on some x through data edges */
    char      *to_y;         /* [n] some y depends on the node */
    char      *done;         /* [n] visited by the backward pass */
    int       *pending;      /* [n] relevant consumers not yet visited */
    int       *head;         /* [n] first contribution, -1 */
    contrib   *c;
    int        n_c, cap_c;
    int       *stack;
} walk;

static int node_outputs(const tfs_graph *g, int id)
{
    const tfs_node *n = tfs__graph_node(g, id);
    const struct tfs_op_def *op = tfs__op_lookup(n->op_type);
    int k = op ? (op->nout ? op->nout(n) : 1) : -1;
    return k;
}

static bool blocks_gradient(const tfs_graph *g, int id)
{
    const char *op = tfs_graph_node_op(g, id);
    return !strcmp(op, "StopGradient") || !strcmp(op, "PreventGradient");
}

static bool is_float(enum tfs_dtype dt)
{
    dt = tfs_dtype_base(dt);
    return dt == TFS_DTYPE_FLOAT || dt == TFS_DTYPE_DOUBLE || dt == TFS_DTYPE_HALF ||
           dt == TFS_DTYPE_BFLOAT16;
}

static enum tfs_code add_contrib(walk *w, int node, int index, tfs_out grad, tfs_status *st)
{
    if (!tfs_out_ok(grad))
        return TFS_OK;
    if (w->n_c == w->cap_c) {
        int cap = w->cap_c ? 2 * w->cap_c : 64;
        contrib *c = tfs_realloc(w->c, (size_t)cap * sizeof *c);
        if (!c)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building gradients");
        w->c = c;
        w->cap_c = cap;
    }
    w->c[w->n_c] = (contrib){index, grad, w->head[node]};
    w->head[node] = w->n_c++;
    return TFS_OK;
}

/* Sum of the contributions to (node, index), or TFS_OUT_NONE. */
static tfs_out gather(walk *w, int node, int index, tfs_status *st)
{
    tfs_out local[8], *v = local;
    int k = 0, cap = 8;
    for (int i = w->head[node]; i >= 0; i = w->c[i].next) {
        if (w->c[i].index != index)
            continue;
        if (k == cap) {
            tfs_out *nv = tfs_malloc((size_t)cap * 2 * sizeof *nv);
            if (!nv) {
                TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building gradients");
                if (v != local)
                    tfs_free(v);
                return TFS_OUT_NONE;
            }
            memcpy(nv, v, (size_t)k * sizeof *nv);
            if (v != local)
                tfs_free(v);
            v = nv;
            cap *= 2;
        }
        v[k++] = w->c[i].grad;
    }
    tfs_out sum = k == 0 ? TFS_OUT_NONE : tfs_build_add_n(w->g, k, v);
    if (v != local)
        tfs_free(v);
    return sum;
}

static void mark_forward(walk *w, int n_x, const tfs_out *xs)
{
    /* Nodes are appended, so producers mostly precede consumers; iterate to a fixed point to be
     * safe with graphs built in any order (few passes in practice). */
    bool changed = true;
    while (changed) {
        changed = false;
        for (int id = 0; id < w->n; id++) {
            if (w->from_x[id])
                continue;
            int k = tfs__graph_data_input_count(w->g, id);
            for (int i = 0; i < k; i++) {
                tfs_edge e;
                if (!tfs__graph_input_edge(w->g, id, i, &e) || e.node >= w->n)
                    continue;
                bool src_is_x = false;
                for (int j = 0; j < n_x; j++)
                    src_is_x |= xs[j].node == e.node && xs[j].index == e.index;
                if (src_is_x || (w->from_x[e.node] && !blocks_gradient(w->g, e.node))) {
                    w->from_x[id] = 1;
                    changed = true;
                    break;
                }
            }
        }
    }
}

static void mark_backward(walk *w, int n_y, const tfs_out *ys)
{
    int top = 0;
    for (int i = 0; i < n_y; i++)
        if (!w->to_y[ys[i].node]) {
            w->to_y[ys[i].node] = 1;
            w->stack[top++] = ys[i].node;
        }
    while (top > 0) {
        int id = w->stack[--top];
        int k = tfs__graph_data_input_count(w->g, id);
        for (int i = 0; i < k; i++) {
            tfs_edge e;
            if (tfs__graph_input_edge(w->g, id, i, &e) && e.node < w->n && !w->to_y[e.node]) {
                w->to_y[e.node] = 1;
                w->stack[top++] = e.node;
            }
        }
    }
}

static bool relevant(const walk *w, int id)
{
    return w->from_x[id] && w->to_y[id] && !blocks_gradient(w->g, id);
}

/* Runs the gradient function of node id on the gathered output gradients. */
static enum tfs_code visit(walk *w, int id, tfs_status *st)
{
    tfs_graph *g = w->g;
    int n_out = node_outputs(g, id), n_in = tfs__graph_data_input_count(g, id);
    if (n_out < 0)
        n_out = 1;
    tfs_out *buf = tfs_calloc(2 * (size_t)(n_in + n_out) + 1, sizeof *buf);
    if (!buf)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building gradients");
    tfs_out *x = buf, *y = buf + n_in, *dy = y + n_out, *dx = dy + n_out;
    enum tfs_code rc = TFS_OK;
    bool any = false;
    for (int j = 0; j < n_out; j++) {
        y[j] = (tfs_out){id, j};
        dy[j] = gather(w, id, j, st);
        if (st && st->code != TFS_OK) {
            rc = st->code;
            goto done;
        }
        any |= tfs_out_ok(dy[j]);
    }
    if (!any)
        goto done;
    for (int i = 0; i < n_in; i++) {
        tfs_edge e = {0, 0};
        tfs__graph_input_edge(g, id, i, &e);
        x[i] = (tfs_out){e.node, e.index};
        dx[i] = TFS_OUT_NONE;
    }
    const char *op = tfs_graph_node_op(g, id);
    tfs_grad_fn fn = grad_for(op);
    if (!fn) {
        rc = TFS_ERR(st, TFS_UNIMPLEMENTED, "no gradient for op %s (node '%s')", op,
                     tfs_graph_node_name(g, id));
        goto done;
    }
    char scope[1100];
    snprintf(scope, sizeof scope, "%s_grad", tfs_graph_node_name(g, id));
    tfs_build_scope_push(g, scope);
    tfs_grad_ctx c = {g, id, n_in, x, n_out, y, dy, dx};
    rc = fn(&c, st);
    tfs_build_scope_pop(g);
    if (rc != TFS_OK)
        goto done;
    for (int i = 0; i < n_in; i++) {
        if (!tfs_out_ok(dx[i]) || x[i].node >= w->n || !is_float(tfs_build_dtype(g, x[i])))
            continue;
        if ((rc = add_contrib(w, x[i].node, x[i].index, dx[i], st)) != TFS_OK)
            goto done;
    }
done:
    tfs_free(buf);
    return rc;
}

/* A scope name no node uses yet: "gradients", "gradients_1", ... */
static void push_unique_scope(tfs_graph *g)
{
    char base[1100], name[1200];
    const char *outer = tfs_build_scope(g);
    snprintf(base, sizeof base, "%s%sgradients", outer, *outer ? "/" : "");
    for (int k = 0;; k++) {
        if (k == 0)
            snprintf(name, sizeof name, "%s/", base);
        else
            snprintf(name, sizeof name, "%s_%d/", base, k);
        size_t len = strlen(name);
        bool used = false;
        for (int id = 0; id < tfs_graph_node_count(g) && !used; id++)
            used = !strncmp(tfs_graph_node_name(g, id), name, len);
        if (!used) {
            name[len - 1] = '\0';
            tfs_build_scope_push(g, name + strlen(outer) + (*outer ? 1 : 0));
            return;
        }
    }
}

enum tfs_code tfs_build_gradients(tfs_graph *g, int n_y, const tfs_out *ys, const tfs_out *dys,
                                  int n_x, const tfs_out *xs, tfs_out *grads, tfs_status *st)
{
    for (int j = 0; j < n_x; j++)
        grads[j] = TFS_OUT_NONE;
    if (!g || g->finalized)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "gradients need a graph being built");
    if (g->err.code != TFS_OK) {
        if (st)
            *st = g->err;
        return g->err.code;
    }
    if (n_y < 1 || n_x < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "gradients need at least one y and one x");
    for (int i = 0; i < n_y; i++)
        if (!tfs_out_ok(ys[i]) || ys[i].node >= g->n_nodes)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "gradients: y %d is not a tensor", i);
    for (int j = 0; j < n_x; j++)
        if (!tfs_out_ok(xs[j]) || xs[j].node >= g->n_nodes)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "gradients: x %d is not a tensor", j);

    walk w = {.g = g, .n = g->n_nodes};
    size_t n = (size_t)w.n + 1;
    w.from_x = tfs_calloc(n, 1);
    w.to_y = tfs_calloc(n, 1);
    w.done = tfs_calloc(n, 1);
    w.pending = tfs_calloc(n, sizeof *w.pending);
    w.head = tfs_malloc(n * sizeof *w.head);
    w.stack = tfs_malloc(n * sizeof *w.stack);
    enum tfs_code rc = TFS_OK;
    if (!w.from_x || !w.to_y || !w.done || !w.pending || !w.head || !w.stack) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building gradients");
        goto done;
    }
    for (int i = 0; i < w.n; i++)
        w.head[i] = -1;
    mark_forward(&w, n_x, xs);
    mark_backward(&w, n_y, ys);
    /* Pending counts: how many relevant consumers each relevant node waits for. */
    for (int id = 0; id < w.n; id++) {
        if (!relevant(&w, id))
            continue;
        int k = tfs__graph_data_input_count(g, id);
        for (int i = 0; i < k; i++) {
            tfs_edge e;
            if (tfs__graph_input_edge(g, id, i, &e) && e.node < w.n && relevant(&w, e.node))
                w.pending[e.node]++;
        }
    }
    push_unique_scope(g);
    for (int i = 0; i < n_y; i++) {
        tfs_out dy = dys && tfs_out_ok(dys[i]) ? dys[i] : tfs_build_unary(g, "OnesLike", ys[i]);
        if ((rc = add_contrib(&w, ys[i].node, ys[i].index, dy, st)) != TFS_OK)
            goto pop;
    }
    /* Consumers first: a relevant node is visited once all its relevant consumers were. */
    int top = 0;
    for (int id = 0; id < w.n; id++)
        if (relevant(&w, id) && w.pending[id] == 0)
            w.stack[top++] = id;
    while (top > 0) {
        int id = w.stack[--top];
        w.done[id] = 1;
        if ((rc = visit(&w, id, st)) != TFS_OK)
            goto pop;
        int k = tfs__graph_data_input_count(g, id);
        for (int i = 0; i < k; i++) {
            tfs_edge e;
            if (tfs__graph_input_edge(g, id, i, &e) && e.node < w.n && relevant(&w, e.node) &&
                --w.pending[e.node] == 0)
                w.stack[top++] = e.node;
        }
    }
    for (int j = 0; j < n_x; j++) {
        grads[j] = gather(&w, xs[j].node, xs[j].index, st);
        if (st && st->code != TFS_OK) {
            rc = st->code;
            goto pop;
        }
    }
pop:
    tfs_build_scope_pop(g);
done:
    if (rc == TFS_OK && g->err.code != TFS_OK) {
        rc = g->err.code;
        if (st)
            *st = g->err;
    }
    if (rc != TFS_OK)
        for (int j = 0; j < n_x; j++)
            grads[j] = TFS_OUT_NONE;
    else
        tfs_status_clear(st);
    tfs_free(w.from_x);
    tfs_free(w.to_y);
    tfs_free(w.done);
    tfs_free(w.pending);
    tfs_free(w.head);
    tfs_free(w.stack);
    tfs_free(w.c);
    return rc;
}
