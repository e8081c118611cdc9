/* Rewrite passes that remove work without changing any kernel: constant folding and the removal
 * of Identity-like and NoOp nodes (rewrite.c says when they run).
 *
 * Freezing. Reads of frozen variables (VariableV2, ReadVariableOp) become Consts sharing the
 * variable's tensor even when constant folding is off, so that the rewritten graph needs no
 * session state; that alone is not counted as folding.
 *
 * Constant folding. A node is constant when it is a Const, a frozen variable (VariableV2), a
 * reader of one (ReadVariableOp, ResourceGather with constant indices), or a deterministic op
 * with a kernel (not stateful, random, functional or a placeholder) whose data and control inputs
 * are all constant -- and no run feeds it. The constants other nodes still need (the "frontier")
 * are evaluated together in one run of the values session, where their inputs are what they were
 * at load, and each becomes a Const holding the result; the constants behind them die with the
 * final prune. A result is not folded (the node stays, its inputs become the frontier) when it is
 * a handle or a TensorList (no Const can hold those), when it is larger than max_constant_bytes
 * and does not share a constant's or a variable's storage, or when evaluating it fails (the run
 * will report the error as before). A constant that a non-constant node waits for (a control
 * edge) is evaluated too; control edges from evaluated constants and from Consts are dropped: a
 * constant has no effect and, having been evaluated, cannot fail.
 *
 * Identity removal. A node that passes its input through (Identity, Snapshot, StopGradient,
 * PreventGradient; IdentityN passes each input to its output) and is not protected is bypassed:
 * its consumers read its input directly and inherit its control inputs, and a control edge from
 * it becomes one from its input's producer.
 * NoOps are bypassed the same way (their control inputs move to the nodes that waited for them).
 * An Identity reading a VariableV2 stays: it is the read that dereferences the variable. One
 * reading a Switch stays too: it is a TF1 cond branch's pivot, and the branch's nodes hang on it
 * by control edges that must carry its deadness.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/rewrite-impl.h"

/* ---- constant folding ------------------------------------------------------------------------ */

typedef struct fold_state {
    tfs_rw_graph *rw;
    int           n;          /* nodes when the pass started (it adds some at the end) */
    int          *order;      /* alive nodes, producers first */
    int           n_order;
    char         *is_const;
    char         *frozen_handle;   /* a frozen VarHandleOp, or an Identity of one */
    char         *shared;     /* its value is a constant's or a variable's own tensor */
    char         *blocked;    /* not to be folded (see the top of the file) */
    int          *slot;       /* [n + 1] first value slot of each node */
    tfs_tensor  **vals;       /* evaluated outputs by slot */
} fold_state;

static int n_outputs(const tfs_rw_node *n)
{
    return n->n_out > 0 ? n->n_out : 0;
}

/* Kahn's algorithm over the alive nodes; nodes on a cycle are left out (they stay as they are). */
static enum tfs_code topo_order(fold_state *f, tfs_status *st)
{
    tfs_rw_graph *rw = f->rw;
    int *indeg = tfs_calloc((size_t)f->n + 1, sizeof *indeg);
    if (!indeg)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding constants");
    f->n_order = 0;
    for (int id = 0; id < f->n; id++) {
        const tfs_rw_node *n = &rw->nodes[id];
        if (!n->alive)
            continue;
        indeg[id] = n->n_in + n->n_ctrl;
        if (indeg[id] == 0)
            f->order[f->n_order++] = id;
    }
    for (int head = 0; head < f->n_order; head++) {
        int u = f->order[head];
        for (int k = rw->use_start[u]; k < rw->use_start[u + 1]; k++)
            if (--indeg[rw->uses[k].node] == 0)
                f->order[f->n_order++] = rw->uses[k].node;
    }
    tfs_free(indeg);
    return TFS_OK;
}

static bool all_inputs_const(const fold_state *f, const tfs_rw_node *n, int from)
{
    for (int i = from; i < n->n_in; i++)
        if (!f->is_const[n->in[i].node])
            return false;
    for (int i = 0; i < n->n_ctrl; i++)
        if (!f->is_const[n->ctrl[i]])
            return false;
    return true;
}

static bool placeholder(const char *op)
{
    return !strcmp(op, "Placeholder") || !strcmp(op, "PlaceholderWithDefault");
}

/* Marks the constant nodes (see the top of the file), producers first. */
static void mark_constants(fold_state *f)
{
    tfs_rw_graph *rw = f->rw;
    memset(f->is_const, 0, (size_t)f->n);
    memset(f->frozen_handle, 0, (size_t)f->n);
    memset(f->shared, 0, (size_t)f->n);
    for (int k = 0; k < f->n_order; k++) {
        int id = f->order[k];
        const tfs_rw_node *n = &rw->nodes[id];
        const char *op = n->op;
        unsigned flags = n->def ? n->def->flags : 0;
        if (n->flags & TFS_RW_FED)
            continue;
        if (!strcmp(op, "VarHandleOp")) {
            f->frozen_handle[id] = n->frozen;
            continue;
        }
        if (tfs__rw_is_identity_op(op) && n->n_in == 1 && f->frozen_handle[n->in[0].node]) {
            f->frozen_handle[id] = 1;
            continue;
        }
        if (f->blocked[id])
            continue;
        bool c = false;
        if (!strcmp(op, "Const")) {
            c = all_inputs_const(f, n, 0);
            f->shared[id] = 1;
        } else if (!strcmp(op, "VariableV2")) {
            c = n->frozen && all_inputs_const(f, n, 0);
            f->shared[id] = 1;
        } else if (!strcmp(op, "ReadVariableOp") ||
                   (!strcmp(op, "ResourceGather") && rw->opts->fold_constants)) {
            c = n->n_in >= 1 && f->frozen_handle[n->in[0].node] && all_inputs_const(f, n, 1);
            f->shared[id] = !strcmp(op, "ReadVariableOp");
        } else if (rw->opts->fold_constants && n->def && n->def->kernel && !placeholder(op) &&
                   n_outputs(n) > 0 &&
                   !(flags & (TFS_OPF_STATEFUL | TFS_OPF_FUNCTIONS | TFS_OPF_RANDOM))) {
            c = all_inputs_const(f, n, 0);
            f->shared[id] = tfs__rw_is_identity_op(op) && n->n_in == 1 && f->shared[n->in[0].node];
        }
        f->is_const[id] = c;
    }
}

/* Is output `index` of constant node id needed as a value (by a non-constant consumer, or by
 * name)? */
static bool output_needed(const fold_state *f, int id, int index)
{
    const tfs_rw_graph *rw = f->rw;
    const tfs_rw_node *n = &rw->nodes[id];
    if (index == 0 && (n->flags & (TFS_RW_FETCHED | TFS_RW_TARGET)))
        return true;
    for (int k = rw->use_start[id]; k < rw->use_start[id + 1]; k++) {
        const tfs_rw_use *u = &rw->uses[k];
        if (u->input >= 0 && !f->is_const[u->node] &&
            rw->nodes[u->node].in[u->input].index == index)
            return true;
    }
    return false;
}

/* Does a non-constant node wait for constant node id (a control edge)? Then id is evaluated too,
 * so that the edge can go. */
static bool waited_for(const fold_state *f, int id)
{
    const tfs_rw_graph *rw = f->rw;
    for (int k = rw->use_start[id]; k < rw->use_start[id + 1]; k++)
        if (rw->uses[k].input < 0 && !f->is_const[rw->uses[k].node])
            return true;
    return false;
}

/* Output j of constant node id is evaluated. */
static bool to_evaluate(const fold_state *f, int id, int j)
{
    return output_needed(f, id, j) || (j == 0 && waited_for(f, id));
}

/* A frontier node: a constant that is not a Const already and whose value someone needs. */
static bool frontier(const fold_state *f, int id)
{
    const tfs_rw_node *n = &f->rw->nodes[id];
    if (!f->is_const[id] || !strcmp(n->op, "Const"))
        return false;
    for (int j = 0; j < n_outputs(n); j++)
        if (to_evaluate(f, id, j))
            return true;
    return false;
}

/* One output to evaluate: its name, node and value slot. */
typedef struct pending {
    char *name;
    int   node;
    int   slot;
} pending;

/* Stores a result, or blocks its node when it cannot be folded. Returns 1 when it blocked. */
static int take_result(fold_state *f, const pending *p, tfs_tensor *t)
{
    bool bad = !t || t->dtype == TFS_DTYPE_RESOURCE || t->dtype == TFS_DTYPE_VARIANT ||
               t->dtype > TFS_DTYPE_REF_OFFSET ||
               (!f->shared[p->node] && t->nbytes > (size_t)f->rw->opts->max_constant_bytes);
    if (!bad) {
        f->vals[p->slot] = t;
        return 0;
    }
    tfs_tensor_unref(t);
    int newly = !f->blocked[p->node];
    f->blocked[p->node] = 1;
    return newly;
}

/* Evaluates the frontier outputs not evaluated yet. Returns the number of nodes it blocked (whose
 * results cannot be folded); -1 when out of memory. */
static int evaluate(fold_state *f, tfs_status *st)
{
    tfs_rw_graph *rw = f->rw;
    int n_p = 0, cap = 16, blocked = 0;
    pending *p = tfs_calloc((size_t)cap, sizeof *p);
    const char **names = NULL;
    tfs_tensor **outs = NULL;
    if (!p)
        goto oom;
    for (int k = 0; k < f->n_order; k++) {
        int id = f->order[k];
        if (!frontier(f, id))
            continue;
        const tfs_rw_node *n = &rw->nodes[id];
        TFS_ASSERT(n->src == id);   /* folding runs first: frontier nodes are g's own */
        if (n->flags & TFS_RW_FETCHED_MORE) {
            f->blocked[id] = 1;   /* a fetched second output cannot live in a Const of that name */
            blocked++;
            continue;
        }
        for (int j = 0; j < n_outputs(n); j++) {
            if (f->vals[f->slot[id] + j] || !to_evaluate(f, id, j))
                continue;
            if (n_p == cap) {
                pending *np = tfs_realloc(p, (size_t)cap * 2 * sizeof *np);
                if (!np)
                    goto oom;
                p = np;
                cap *= 2;
            }
            size_t len = strlen(n->name) + 16;
            if (!(p[n_p].name = tfs_malloc(len)))
                goto oom;
            snprintf(p[n_p].name, len, "%s:%d", n->name, j);
            p[n_p].node = id;
            p[n_p++].slot = f->slot[id] + j;
        }
    }
    if (n_p == 0)
        goto done;
    names = tfs_calloc((size_t)n_p, sizeof *names);
    outs = tfs_calloc((size_t)n_p, sizeof *outs);
    if (!names || !outs)
        goto oom;
    for (int i = 0; i < n_p; i++)
        names[i] = p[i].name;
    tfs_status local;
    /* A result over max_constant_bytes is not kept, so no tensor of the evaluation may be larger:
     * a few bytes of graph (Fill with a huge shape) must not allocate gigabytes while loading. */
    size_t outer = tfs_runtime_set_thread_max_tensor_bytes(0);
    size_t most = rw->opts->max_constant_bytes > 0 ? (size_t)rw->opts->max_constant_bytes : 1;
    tfs_runtime_set_thread_max_tensor_bytes(outer && outer < most ? outer : most);
    bool together = tfs_session_run(rw->values, NULL, 0, names, n_p, NULL, 0, outs, &local) ==
                    TFS_OK;
    for (int i = 0; i < n_p; i++) {
        /* One at a time when the batch failed, to find the culprits. */
        if (!together &&
            tfs_session_run(rw->values, NULL, 0, &names[i], 1, NULL, 0, &outs[i], &local) != TFS_OK)
            outs[i] = NULL;
        blocked += take_result(f, &p[i], outs[i]);
    }
    tfs_runtime_set_thread_max_tensor_bytes(outer);
    goto done;
oom:
    TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding constants");
    blocked = -1;
done:
    for (int i = 0; p && i < n_p; i++)
        tfs_free(p[i].name);
    tfs_free(p);
    tfs_free(names);
    tfs_free(outs);
    return blocked;
}

static void mark_evaluated(const fold_state *f, char *evaluated);

/* Replaces the frontier by Consts (see the top of the file) and counts the work. evaluated: f->n
 * zeroed chars of scratch. */
static enum tfs_code replace_frontier(fold_state *f, char *evaluated, tfs_status *st)
{
    tfs_rw_graph *rw = f->rw;
    mark_evaluated(f, evaluated);
    for (int k = 0; k < f->n_order && rw->opts->fold_constants; k++) {
        int id = f->order[k];
        if (f->is_const[id] && strcmp(rw->nodes[id].op, "Const") != 0)
            rw->stats->constants_folded++;
    }
    for (int k = 0; k < f->n_order; k++) {
        int id = f->order[k];
        if (!frontier(f, id))
            continue;
        int nout = n_outputs(&rw->nodes[id]);
        for (int j = 1; j < nout; j++) {
            tfs_tensor *t = f->vals[f->slot[id] + j];
            if (!t)
                continue;
            char suffix[32];
            snprintf(suffix, sizeof suffix, "/output_%d", j);
            int c = tfs__rw_add(rw, rw->nodes[id].name, suffix, "Const");
            if (c < 0)
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding constants");
            tfs__rw_make_const(rw, c, t);
            rw->nodes[c].value_shared = f->shared[id];
            for (int u = rw->use_start[id]; u < rw->use_start[id + 1]; u++) {
                const tfs_rw_use *use = &rw->uses[u];
                tfs_edge *e = use->input >= 0 ? &rw->nodes[use->node].in[use->input] : NULL;
                if (e && e->index == j && !f->is_const[use->node])
                    *e = (tfs_edge){c, 0};
            }
        }
        tfs_tensor *t0 = f->vals[f->slot[id]];
        if (t0) {
            tfs__rw_make_const(rw, id, t0);
            rw->nodes[id].value_shared = f->shared[id];
        }
    }
    /* Control edges go from Consts without control inputs (including the ones just made) and
     * from the constants evaluation ran: they have no effect and cannot fail. */
    for (int id = 0; id < rw->n; id++) {
        tfs_rw_node *n = &rw->nodes[id];
        int k = 0;
        for (int i = 0; n->alive && i < n->n_ctrl; i++) {
            int s = n->ctrl[i];
            bool inert = !strcmp(rw->nodes[s].op, "Const") && rw->nodes[s].n_ctrl == 0;
            if (!inert && !(s < f->n && evaluated[s]))
                n->ctrl[k++] = s;
        }
        if (n->alive)
            n->n_ctrl = k;
    }
    return TFS_OK;
}

/* evaluated[] (zeroed, f->n) marks the frontier nodes that have values and everything they
 * depend on: nodes a successful evaluation ran. */
static void mark_evaluated(const fold_state *f, char *evaluated)
{
    const tfs_rw_graph *rw = f->rw;
    for (int k = f->n_order - 1; k >= 0; k--) {   /* consumers before producers */
        int id = f->order[k];
        const tfs_rw_node *n = &rw->nodes[id];
        bool has = false;
        for (int j = 0; j < n_outputs(n) && !has; j++)
            has = f->vals[f->slot[id] + j] != NULL;
        if (has && f->is_const[id])
            evaluated[id] = 1;
        if (!evaluated[id])
            continue;
        for (int i = 0; i < n->n_in; i++)
            evaluated[n->in[i].node] = 1;
        for (int i = 0; i < n->n_ctrl; i++)
            evaluated[n->ctrl[i]] = 1;
    }
}

enum tfs_code tfs__rw_fold_constants(tfs_rw_graph *rw, tfs_status *st)
{
    fold_state f = {.rw = rw, .n = rw->n};
    size_t nn = (size_t)rw->n + 1;
    enum tfs_code rc = tfs__rw_uses(rw, st);
    if (rc != TFS_OK)
        return rc;
    f.order = tfs_malloc(nn * sizeof *f.order);
    f.is_const = tfs_calloc(nn, 1);
    f.frozen_handle = tfs_calloc(nn, 1);
    f.shared = tfs_calloc(nn, 1);
    f.blocked = tfs_calloc(nn, 1);
    f.slot = tfs_calloc(nn, sizeof *f.slot);
    int64_t total = 0;
    if (f.slot)
        for (int id = 0; id < rw->n; id++) {
            f.slot[id] = (int)total;
            total += n_outputs(&rw->nodes[id]);
            f.slot[id + 1] = (int)total;
        }
    f.vals = tfs_calloc((size_t)total + 1, sizeof *f.vals);
    if (!f.order || !f.is_const || !f.frozen_handle || !f.shared || !f.blocked || !f.slot ||
        !f.vals) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding constants");
        goto done;
    }
    if ((rc = topo_order(&f, st)) != TFS_OK)
        goto done;
    /* Blocking a node changes which nodes are constant; repeat until nothing more is blocked.
     * Each round blocks at least one node, so this ends. */
    for (;;) {
        mark_constants(&f);
        int blocked = evaluate(&f, st);
        if (blocked < 0) {
            rc = st ? st->code : TFS_RESOURCE_EXHAUSTED;
            goto done;
        }
        if (blocked == 0)
            break;
    }
    memset(f.blocked, 0, nn);   /* reused as replace_frontier's scratch */
    rc = replace_frontier(&f, f.blocked, st);
done:
    for (int64_t i = 0; f.vals && i < total; i++)
        tfs_tensor_unref(f.vals[i]);
    tfs_free(f.vals);
    tfs_free(f.slot);
    tfs_free(f.order);
    tfs_free(f.is_const);
    tfs_free(f.frozen_handle);
    tfs_free(f.shared);
    tfs_free(f.blocked);
    return rc;
}

/* ---- Identity and NoOp removal --------------------------------------------------------------- */

/* A growable list of node ids. */
typedef struct id_list {
    int *v;
    int  n, cap;
} id_list;

static bool id_push(id_list *l, int id)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        int *v = tfs_realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return true;
}

/* Adds to node c the control inputs that waiting for node s stands for once the removable nodes
 * are gone. stamp[] marks the removable nodes already expanded for c (value c + 1). */
static bool expand_ctrl(tfs_rw_graph *rw, const char *removable, int *stamp, int c, int s)
{
    if (!removable[s]) {
        bool effectless = !strcmp(rw->nodes[s].op, "Const") && rw->nodes[s].n_ctrl == 0;
        return effectless || tfs__rw_add_ctrl(rw, c, s);
    }
    if (stamp[s] == c + 1)
        return true;
    stamp[s] = c + 1;
    const tfs_rw_node *r = &rw->nodes[s];
    for (int i = 0; i < r->n_in + r->n_ctrl; i++) {
        int src = i < r->n_in ? r->in[i].node : r->ctrl[i - r->n_in];
        if (!expand_ctrl(rw, removable, stamp, c, src))
            return false;
    }
    return true;
}

/* Rewrites node c's edges around the removable nodes: data inputs read through them, their
 * control inputs become c's. */
static bool bypass(tfs_rw_graph *rw, const char *removable, int *stamp, id_list *deps, int c)
{
    tfs_rw_node *n = &rw->nodes[c];
    deps->n = 0;
    for (int i = 0; i < n->n_ctrl; i++)
        if (!id_push(deps, n->ctrl[i]))
            return false;
    n->n_ctrl = 0;
    for (int i = 0; i < n->n_in; i++) {
        tfs_edge *e = &n->in[i];
        while (removable[e->node]) {
            const tfs_rw_node *r = &rw->nodes[e->node];
            for (int j = 0; j < r->n_ctrl; j++)
                if (!id_push(deps, r->ctrl[j]))
                    return false;
            *e = r->in[e->index];   /* IdentityN passes input i to output i; the others have one */
        }
    }
    for (int i = 0; i < deps->n; i++)
        if (!expand_ctrl(rw, removable, stamp, c, deps->v[i]))
            return false;
    return true;
}

/* A malformed graph may hold a cycle of removable nodes (its runs fail, but the nodes may be kept
 * for a fed node's sake); bypassing them would never end. Keeps every removable node that Kahn's
 * algorithm over the removable nodes cannot order. order: rw->n ints of scratch. */
static void keep_cycles(const tfs_rw_graph *rw, char *removable, int *indeg, int *order)
{
    int n_order = 0;
    for (int id = 0; id < rw->n; id++) {
        const tfs_rw_node *n = &rw->nodes[id];
        if (!removable[id])
            continue;
        indeg[id] = 0;
        for (int i = 0; i < n->n_in + n->n_ctrl; i++)
            indeg[id] += removable[i < n->n_in ? n->in[i].node : n->ctrl[i - n->n_in]];
        if (indeg[id] == 0)
            order[n_order++] = id;
    }
    for (int head = 0; head < n_order; head++) {
        int u = order[head];
        for (int k = rw->use_start[u]; k < rw->use_start[u + 1]; k++) {
            int v = rw->uses[k].node;
            if (removable[v] && --indeg[v] == 0)
                order[n_order++] = v;
        }
    }
    for (int id = 0; id < rw->n; id++)
        if (removable[id] && indeg[id] > 0)
            removable[id] = 0;
}

enum tfs_code tfs__rw_remove_identities(tfs_rw_graph *rw, tfs_status *st)
{
    size_t nn = (size_t)rw->n + 1;
    char *removable = tfs_calloc(nn, 1);
    int *stamp = tfs_calloc(nn, sizeof *stamp);
    int *order = tfs_malloc(nn * sizeof *order);
    id_list deps = {0};
    enum tfs_code rc = tfs__rw_uses(rw, st);
    if (rc == TFS_OK && (!removable || !stamp || !order))
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory removing identities");
    if (rc != TFS_OK)
        goto done;
    for (int id = 0; id < rw->n; id++) {
        const tfs_rw_node *n = &rw->nodes[id];
        if (!n->alive || (n->flags & TFS_RW_PROTECTED))
            continue;
        bool n_ary = !strcmp(n->op, "IdentityN") && n->n_in >= 1 && n->n_out == n->n_in;
        if ((tfs__rw_is_identity_op(n->op) && n->n_in == 1) || n_ary) {
            removable[id] = 1;
            /* A VariableV2's reader dereferences it; an Identity after a Switch is a cond
             * branch's pivot, whose control edges carry the branch's deadness (a Switch's own
             * would not). */
            for (int i = 0; i < n->n_in; i++)
                if (!strcmp(rw->nodes[n->in[i].node].op, "VariableV2") ||
                    !strcmp(rw->nodes[n->in[i].node].op, "Switch"))
                    removable[id] = 0;
        } else if (!strcmp(n->op, "NoOp") && n->n_in == 0) {
            removable[id] = 1;
        }
    }
    keep_cycles(rw, removable, stamp, order);
    memset(stamp, 0, nn * sizeof *stamp);
    for (int id = 0; id < rw->n; id++) {
        if (!rw->nodes[id].alive || removable[id])
            continue;
        if (!bypass(rw, removable, stamp, &deps, id)) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory removing identities");
            goto done;
        }
    }
    for (int id = 0; id < rw->n; id++)
        if (removable[id]) {
            rw->nodes[id].alive = false;
            rw->stats->identities_removed++;
        }
done:
    tfs_free(removable);
    tfs_free(stamp);
    tfs_free(order);
    tfs_free(deps.v);
    return rc;
}
