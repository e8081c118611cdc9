/* The rewrite graph (rewrite-impl.h): a mutable copy of a finalized graph for the rewrite passes,
 * with helpers to edit nodes, count uses, prune, and emit the result as a new finalized graph.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/buf.h"
#include "runtime/rewrite-impl.h"

enum tfs_code tfs__rw_init(tfs_rw_graph *rw, tfs_graph *g, tfs_status *st)
{
    int n = g->n_nodes;
    rw->g = g;
    rw->n = n;
    rw->cap = n + 16;
    rw->nodes = tfs_calloc((size_t)rw->cap, sizeof *rw->nodes);
    if (!rw->nodes)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
    for (int id = 0; id < n; id++) {
        const tfs_node *s = &g->nodes[id];
        tfs_rw_node *d = &rw->nodes[id];
        d->name = s->name;
        d->op = s->op_type;
        d->def = s->op;
        d->src = id;
        d->n_out = s->n_outputs;
        for (int i = 0; i < s->n_inputs; i++)
            if (!tfs__rw_add_input(rw, id, s->inputs[i]))
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
        for (int i = 0; i < s->n_ctrl; i++)
            if (!tfs__rw_add_ctrl(rw, id, s->ctrl[i]))
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
    }
    return TFS_OK;
}

void tfs__rw_free(tfs_rw_graph *rw)
{
    for (int i = 0; rw->nodes && i < rw->n; i++) {
        tfs_rw_node *n = &rw->nodes[i];
        tfs_free(n->owned_name);
        tfs_free(n->in);
        tfs_free(n->ctrl);
        tfs_tensor_unref(n->value);
    }
    tfs_free(rw->nodes);
    tfs_free(rw->use_start);
    tfs_free(rw->uses);
    memset(rw, 0, sizeof *rw);
}

static bool name_taken(const tfs_rw_graph *rw, const char *name)
{
    if (tfs_graph_find_node(rw->g, name) >= 0)
        return true;
    for (int i = rw->g->n_nodes; i < rw->n; i++)
        if (!strcmp(rw->nodes[i].name, name))
            return true;
    return false;
}

int tfs__rw_add(tfs_rw_graph *rw, const char *base, const char *suffix, const char *op)
{
    if (rw->n == rw->cap) {
        int cap = rw->cap * 2;
        tfs_rw_node *v = tfs_realloc(rw->nodes, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        memset(v + rw->n, 0, (size_t)(cap - rw->n) * sizeof *v);
        rw->nodes = v;
        rw->cap = cap;
    }
    size_t len = strlen(base) + strlen(suffix) + 24;
    char *name = tfs_malloc(len);
    if (!name)
        return -1;
    snprintf(name, len, "%s%s", base, suffix);
    for (int k = 1; name_taken(rw, name); k++)
        snprintf(name, len, "%s%s_%d", base, suffix, k);
    tfs_rw_node *n = &rw->nodes[rw->n];
    memset(n, 0, sizeof *n);
    n->name = n->owned_name = name;
    n->op = op;
    n->def = tfs__op_lookup(op);
    n->src = -1;
    n->n_out = 1;
    n->alive = true;
    return rw->n++;
}

static bool grow(void **v, int *cap, int need, size_t esz)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap * 2 : 4;
    while (c < need)
        c *= 2;
    void *nv = tfs_realloc(*v, (size_t)c * esz);
    if (!nv)
        return false;
    *v = nv;
    *cap = c;
    return true;
}

bool tfs__rw_add_input(tfs_rw_graph *rw, int node, tfs_edge e)
{
    tfs_rw_node *n = &rw->nodes[node];
    if (!grow((void **)&n->in, &n->cap_in, n->n_in + 1, sizeof *n->in))
        return false;
    n->in[n->n_in++] = e;
    return true;
}

bool tfs__rw_add_ctrl(tfs_rw_graph *rw, int node, int src)
{
    tfs_rw_node *n = &rw->nodes[node];
    if (src == node)
        return true;
    for (int i = 0; i < n->n_ctrl; i++)
        if (n->ctrl[i] == src)
            return true;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i].node == src)
            return true;   /* a data input orders the node after src already */
    if (!grow((void **)&n->ctrl, &n->cap_ctrl, n->n_ctrl + 1, sizeof *n->ctrl))
        return false;
    n->ctrl[n->n_ctrl++] = src;
    return true;
}

bool tfs__rw_set_attr(tfs_rw_node *n, const char *name, const tfs_attr_value *v)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name)) {
            n->attrs[i].v = *v;
            return true;
        }
    TFS_ASSERT(n->n_attrs < TFS_RW_MAX_ATTRS);
    n->attrs[n->n_attrs++] = (tfs_rw_attr){name, *v};
    return true;
}

const tfs_attr_value *tfs__rw_attr(const tfs_rw_graph *rw, int node, const char *name)
{
    const tfs_rw_node *n = &rw->nodes[node];
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name))
            return &n->attrs[i].v;
    return n->src >= 0 ? tfs__attr(&rw->g->nodes[n->src], name) : NULL;
}

bool tfs__rw_attr_bool(const tfs_rw_graph *rw, int node, const char *name, bool dflt, bool *out)
{
    const tfs_attr_value *v = tfs__rw_attr(rw, node, name);
    *out = v && v->kind == TFS_ATTR_B ? v->b : dflt;
    return !v || v->kind == TFS_ATTR_B;
}

bool tfs__rw_attr_float(const tfs_rw_graph *rw, int node, const char *name, float dflt, float *out)
{
    const tfs_attr_value *v = tfs__rw_attr(rw, node, name);
    *out = v && v->kind == TFS_ATTR_F ? v->f : dflt;
    return !v || v->kind == TFS_ATTR_F;
}

const char *tfs__rw_attr_str(const tfs_rw_graph *rw, int node, const char *name, const char *dflt)
{
    const tfs_attr_value *v = tfs__rw_attr(rw, node, name);
    if (!v)
        return dflt;
    if (v->kind != TFS_ATTR_S || (v->s.len && memchr(v->s.data, 0, v->s.len)))
        return NULL;
    /* Attr strings are stored NUL-terminated by the graph (and literals by the passes). */
    return v->s.data ? v->s.data : "";
}

enum tfs_dtype tfs__rw_attr_type(const tfs_rw_graph *rw, int node, const char *name)
{
    const tfs_attr_value *v = tfs__rw_attr(rw, node, name);
    return v && v->kind == TFS_ATTR_TYPE ? v->type : TFS_DTYPE_INVALID;
}

void tfs__rw_make_const(tfs_rw_graph *rw, int node, tfs_tensor *t)
{
    tfs_rw_node *n = &rw->nodes[node];
    tfs_tensor *old = n->value;
    n->value = tfs_tensor_ref(t);
    tfs_tensor_unref(old);
    n->op = "Const";
    n->def = tfs__op_lookup("Const");
    n->src = -1;
    n->n_in = 0;
    n->n_ctrl = 0;
    n->n_attrs = 0;
    n->n_out = 1;
    n->frozen = false;
    n->value_shared = false;
    tfs__rw_set_attr(n, "dtype", &(tfs_attr_value){.kind = TFS_ATTR_TYPE, .type = t->dtype});
    tfs__rw_set_attr(n, "value", &(tfs_attr_value){.kind = TFS_ATTR_TENSOR, .tensor = n->value});
}

tfs_tensor *tfs__rw_const_value(const tfs_rw_graph *rw, int node)
{
    const tfs_rw_node *n = &rw->nodes[node];
    if (strcmp(n->op, "Const") != 0)
        return NULL;
    if (n->value)
        return n->value;
    const tfs_attr_value *v = tfs__rw_attr(rw, node, "value");
    return v && v->kind == TFS_ATTR_TENSOR ? v->tensor : NULL;
}

enum tfs_code tfs__rw_uses(tfs_rw_graph *rw, tfs_status *st)
{
    tfs_free(rw->use_start);
    tfs_free(rw->uses);
    rw->uses = NULL;
    rw->use_start = tfs_calloc((size_t)rw->n + 2, sizeof *rw->use_start);
    if (!rw->use_start)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
    int64_t total = 0;
    for (int id = 0; id < rw->n; id++) {
        const tfs_rw_node *n = &rw->nodes[id];
        if (!n->alive)
            continue;
        for (int i = 0; i < n->n_in; i++)
            rw->use_start[n->in[i].node + 1]++;
        for (int i = 0; i < n->n_ctrl; i++)
            rw->use_start[n->ctrl[i] + 1]++;
        total += n->n_in + n->n_ctrl;
    }
    for (int id = 0; id < rw->n; id++)
        rw->use_start[id + 1] += rw->use_start[id];
    rw->uses = tfs_malloc(((size_t)total + 1) * sizeof *rw->uses);
    int *fill = tfs_calloc((size_t)rw->n + 1, sizeof *fill);
    if (!rw->uses || !fill) {
        tfs_free(fill);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
    }
    for (int id = 0; id < rw->n; id++) {
        const tfs_rw_node *n = &rw->nodes[id];
        if (!n->alive)
            continue;
        for (int i = 0; i < n->n_in; i++) {
            int p = n->in[i].node;
            rw->uses[rw->use_start[p] + fill[p]++] = (tfs_rw_use){id, i};
        }
        for (int i = 0; i < n->n_ctrl; i++) {
            int p = n->ctrl[i];
            rw->uses[rw->use_start[p] + fill[p]++] = (tfs_rw_use){id, -1};
        }
    }
    tfs_free(fill);
    return TFS_OK;
}

int tfs__rw_data_uses(const tfs_rw_graph *rw, int node, int index)
{
    int k = 0;
    for (int u = rw->use_start[node]; u < rw->use_start[node + 1]; u++) {
        const tfs_rw_use *use = &rw->uses[u];
        k += use->input >= 0 && rw->nodes[use->node].in[use->input].index == index;
    }
    return k;
}

int tfs__rw_ctrl_uses(const tfs_rw_graph *rw, int node)
{
    int k = 0;
    for (int u = rw->use_start[node]; u < rw->use_start[node + 1]; u++)
        k += rw->uses[u].input < 0;
    return k;
}

enum tfs_code tfs__rw_prune(tfs_rw_graph *rw, tfs_status *st)
{
    char *keep = tfs_calloc((size_t)rw->n + 1, 1);
    int *stack = tfs_malloc(((size_t)rw->n + 1) * sizeof *stack);
    if (!keep || !stack) {
        tfs_free(keep);
        tfs_free(stack);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
    }
    int top = 0;
    for (int id = 0; id < rw->n; id++)
        if (rw->nodes[id].alive && (rw->nodes[id].flags & TFS_RW_PROTECTED)) {
            keep[id] = 1;
            stack[top++] = id;
        }
    while (top > 0) {
        const tfs_rw_node *n = &rw->nodes[stack[--top]];
        for (int i = 0; i < n->n_in + n->n_ctrl; i++) {
            int src = i < n->n_in ? n->in[i].node : n->ctrl[i - n->n_in];
            if (!keep[src]) {
                keep[src] = 1;
                stack[top++] = src;
            }
        }
    }
    for (int id = 0; id < rw->n; id++) {
        TFS_ASSERT(!keep[id] || rw->nodes[id].alive);
        rw->nodes[id].alive = keep[id];
    }
    tfs_free(keep);
    tfs_free(stack);
    return TFS_OK;
}

int tfs__rw_alive_count(const tfs_rw_graph *rw)
{
    int k = 0;
    for (int id = 0; id < rw->n; id++)
        k += rw->nodes[id].alive;
    return k;
}

/* "name:index" or "^name" into b, reused from edge to edge; NULL when memory runs out. */
static const char *edge_text(tfs__buf *b, const char *name, int index, bool ctrl)
{
    b->len = 0;
    if (ctrl)
        tfs__buf_printf(b, "^%s", name);
    else
        tfs__buf_printf(b, "%s:%d", name, index);
    return b->oom ? NULL : b->data;
}

static void emit_attrs(const tfs_rw_graph *rw, tfs_graph *out, int id, int node)
{
    const tfs_rw_node *n = &rw->nodes[id];
    if (n->src >= 0) {
        const tfs_node *s = &rw->g->nodes[n->src];
        for (int a = 0; a < s->n_attrs; a++) {
            bool overridden = false;
            for (int j = 0; j < n->n_attrs && !overridden; j++)
                overridden = !strcmp(n->attrs[j].name, s->attr_names[a]);
            if (!overridden)
                tfs_graph_set_attr(out, node, s->attr_names[a], &s->attrs[a]);
        }
    }
    for (int j = 0; j < n->n_attrs; j++)
        tfs_graph_set_attr(out, node, n->attrs[j].name, &n->attrs[j].v);
}

enum tfs_code tfs__rw_emit(tfs_rw_graph *rw, tfs_graph **out, tfs_status *st)
{
    *out = NULL;
    tfs_graph *g = NULL;
    tfs__buf buf = {0};
    if (tfs_graph_new(&g, st) != TFS_OK)
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    for (int id = 0; id < rw->n; id++) {
        const tfs_rw_node *n = &rw->nodes[id];
        if (!n->alive)
            continue;
        int node = tfs_graph_add_node(g, n->name, n->op);
        for (int i = 0; i < n->n_in + n->n_ctrl; i++) {
            bool ctrl = i >= n->n_in;
            tfs_edge e = ctrl ? (tfs_edge){n->ctrl[i - n->n_in], 0} : n->in[i];
            TFS_ASSERT(rw->nodes[e.node].alive);
            const char *text = edge_text(&buf, rw->nodes[e.node].name, e.index, ctrl);
            if (!text) {
                tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
                break;
            }
            tfs_graph_add_input(g, node, text);
        }
        emit_attrs(rw, g, id, node);
    }
    tfs__buf_deinit(&buf);
    const tfs_graph *src = rw->g;
    for (int f = 0; f < src->n_funcs; f++) {
        const tfs_graph_function *fn = &src->funcs[f];
        tfs_graph_add_function(g, fn->name, fn->body, fn->n_in, (const char *const *)fn->inputs,
                               fn->n_out, (const char *const *)fn->outputs);
    }
    enum tfs_code rc = tfs_graph_finalize(g, st);
    if (rc != TFS_OK) {
        tfs_status_prefix(st, "rewritten graph");
        tfs_graph_unref(g);
        return rc;
    }
    *out = g;
    return TFS_OK;
}
