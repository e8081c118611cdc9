/* Graph rewrites for serving (rewrite.h): which runs the rewritten graph serves, which variables
 * are constants, and the order of the passes (rewrite-fold.c, rewrite-fuse.c) over the rewrite
 * graph (rewrite-graph.c).
 *
 * DESIGN. The rewrite never changes the graph a model was loaded with; it makes a second graph for
 * the runs it can serve, and the caller keeps the original graph and its session for the others.
 *   1. Each run is pruned as a session prunes it (from fetches and targets, stopping at fed
 *      tensors). A variable (VariableV2 or VarHandleOp; identified by container and shared name as
 *      the state kernels do) is "written" when a node of some run's pruned graph may assign it:
 *      an op with reference inputs (Assign, AssignAdd, Apply*) or a stateful op other than the
 *      variable ops, the readers (ReadVariableOp, ResourceGather, VarIsInitializedOp) and the
 *      random generators (AssignVariableOp, ResourceApply*, ...) whose input traces back, through
 *      Identity-like ops, to that variable. An input that traces to a handle we cannot follow
 *      (a function call's or a placeholder's), or a functional op while the function library
 *      holds a writer, makes every variable written. A variable that no run writes is "frozen"
 *      (only when the caller gives the session holding the values): reading it is a constant.
 *      This is what keeps a model like saved_model_counter right: its incr/reset signatures
 *      assign `counter`, so get_counter must read the live variable and is not served.
 *   2. A run is served when every stateful node it executes is a frozen variable, a reader of
 *      one, or a random generator (it then depends on no session state but the frozen values),
 *      and, should it call functions, when no library function is stateful. Its pruned nodes
 *      plus the producers of its fed tensors (with their inputs, so every name resolves) are
 *      kept; feeds, fetches and targets are "protected": they keep their names and outputs.
 *   3. Passes, in order: constant folding (which turns frozen-variable reads into Consts sharing
 *      the variable's tensor, so nothing is copied -- that much also when folding is off),
 *      Identity/NoOp removal, BatchNorm folding,
 *      MatMul/Conv2D fusion; then dead nodes are pruned and the result emitted with g's function
 *      library. Each pass keeps every protected node's name and value.
 *   4. The result is checked per run: a served run must execute no stateful node other than a
 *      random generator in the new graph (a frozen variable whose read could not be folded -- say
 *      it was never initialized -- leaves its variable op behind, and the run is not served).
 * Function bodies are not rewritten, and a random op draws from a new generator in the rewritten
 * graph's session (seeded from its attrs as in any new session).
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/rewrite-impl.h"

#define VAR_NONE    (-1)
#define VAR_UNKNOWN (-2)

tfs_rewrite_opts tfs_rewrite_opts_default(void)
{
    tfs_rewrite_opts o;
    memset(&o, 0, sizeof o);
    o.fold_constants = true;
    o.remove_identities = true;
    o.fold_batch_norms = true;
    o.fuse_matmul = true;
    o.fuse_conv2d = true;
    o.fuse_add = true;
    o.max_constant_bytes = (int64_t)16 << 20;
    return o;
}

bool tfs__rw_is_identity_op(const char *op)
{
    return !strcmp(op, "Identity") || !strcmp(op, "Snapshot") || !strcmp(op, "StopGradient") ||
           !strcmp(op, "PreventGradient");
}

static bool is_var_op(const char *op)
{
    return !strcmp(op, "VariableV2") || !strcmp(op, "VarHandleOp");
}

static bool is_reader_op(const char *op)
{
    return !strcmp(op, "ReadVariableOp") || !strcmp(op, "ResourceGather") ||
           !strcmp(op, "VarIsInitializedOp");
}

/* May this node assign a variable behind one of its inputs? */
static bool writes_state(const tfs_node *n)
{
    if (!n->op)
        return false;   /* no kernel: a run executing it fails, so it writes nothing */
    unsigned f = n->op->flags;
    if (f & TFS_OPF_REF_INPUTS)
        return true;
    return (f & TFS_OPF_STATEFUL) && !(f & (TFS_OPF_RANDOM | TFS_OPF_FUNCTIONS)) &&
           !is_var_op(n->op_type) && !is_reader_op(n->op_type);
}

/* ---- runs ------------------------------------------------------------------------------------ */

typedef struct run_info {
    int       n_feeds, n_fetches, n_targets;
    tfs_edge *feeds;
    tfs_edge *fetches;
    int      *targets;
    bool      resolved;    /* every name names a node (and output) of the graph */
    bool      candidate;   /* may be served (step 2 of DESIGN) */
} run_info;

static void run_info_free(run_info *r)
{
    tfs_free(r->feeds);
    tfs_free(r->fetches);
    tfs_free(r->targets);
}

static bool resolve_tensor(const tfs_graph *g, const char *text, tfs_edge *e)
{
    size_t len = text ? strlen(text) : 0;
    char *name = tfs_malloc(len + 1);
    bool control = false, ok = false;
    int index = 0;
    if (name && tfs_tensor_name_parse(text, name, len + 1, &index, &control) && !control) {
        int id = tfs_graph_find_node(g, name);
        int nout = id >= 0 ? g->nodes[id].n_outputs : 0;
        ok = id >= 0 && (nout < 0 || index < nout);
        *e = (tfs_edge){id, index};
    }
    tfs_free(name);
    return ok;
}

/* Resolves a run's names in g; false only when out of memory (bad names: resolved = false). */
static bool resolve_run(const tfs_graph *g, const tfs_rewrite_run *r, run_info *ri)
{
    memset(ri, 0, sizeof *ri);
    int nf = r->n_feeds > 0 ? r->n_feeds : 0, nx = r->n_fetches > 0 ? r->n_fetches : 0;
    int nt = r->n_targets > 0 ? r->n_targets : 0;
    ri->feeds = tfs_calloc((size_t)nf + 1, sizeof *ri->feeds);
    ri->fetches = tfs_calloc((size_t)nx + 1, sizeof *ri->fetches);
    ri->targets = tfs_calloc((size_t)nt + 1, sizeof *ri->targets);
    if (!ri->feeds || !ri->fetches || !ri->targets)
        return false;
    ri->n_feeds = nf;
    ri->n_fetches = nx;
    ri->n_targets = nt;
    bool ok = true;
    for (int i = 0; i < nf && ok; i++)
        ok = resolve_tensor(g, r->feeds[i], &ri->feeds[i]);
    for (int i = 0; i < nx && ok; i++)
        ok = resolve_tensor(g, r->fetches[i], &ri->fetches[i]);
    for (int i = 0; i < nt && ok; i++) {
        const char *t = r->targets[i];
        if (t && t[0] == '^')
            t++;
        ri->targets[i] = t ? tfs_graph_find_node(g, t) : -1;
        ok = ri->targets[i] >= 0;
    }
    ri->resolved = ok;
    return true;
}

static bool is_fed(const run_info *r, tfs_edge e)
{
    for (int i = 0; i < r->n_feeds; i++)
        if (r->feeds[i].node == e.node && r->feeds[i].index == e.index)
            return true;
    return false;
}

/* needed[] (zeroed by the caller) marks what a session executes for the run; stack holds
 * n_nodes ints. */
static void prune_run(const tfs_graph *g, const run_info *r, char *needed, int *stack)
{
    int top = 0;
    for (int i = 0; i < r->n_fetches; i++)
        if (!is_fed(r, r->fetches[i]) && !needed[r->fetches[i].node]) {
            needed[r->fetches[i].node] = 1;
            stack[top++] = r->fetches[i].node;
        }
    for (int i = 0; i < r->n_targets; i++)
        if (!needed[r->targets[i]]) {
            needed[r->targets[i]] = 1;
            stack[top++] = r->targets[i];
        }
    while (top > 0) {
        const tfs_node *n = &g->nodes[stack[--top]];
        for (int i = 0; i < n->n_inputs + n->n_ctrl; i++) {
            bool data = i < n->n_inputs;
            int src = data ? n->inputs[i].node : n->ctrl[i - n->n_inputs];
            if (needed[src] || (data && is_fed(r, n->inputs[i])))
                continue;
            needed[src] = 1;
            stack[top++] = src;
        }
    }
}

/* ---- variables ------------------------------------------------------------------------------- */

typedef struct analysis {
    const tfs_graph *g;
    int             *var_of;     /* [n_nodes] variable id of a variable op, else VAR_NONE */
    int              n_vars;
    bool            *written;    /* [n_vars] */
    bool             all_written;
    bool             library_writes;     /* a function body may assign a variable */
    bool             library_stateful;   /* a function body has a stateful non-random node */
    char            *needed;     /* [n_nodes] scratch */
    int             *stack;      /* [n_nodes] scratch */
} analysis;

static const char *shared_name(const tfs_node *n)
{
    const char *s = tfs__attr_str(n, "shared_name", "");
    return *s ? s : n->name;
}

typedef struct var_key {
    const char *container;
    const char *name;
    int         node;
} var_key;

static int cmp_var_keys(const void *a, const void *b)
{
    const var_key *x = a, *y = b;
    int c = strcmp(x->container, y->container);
    return c ? c : strcmp(x->name, y->name);
}

/* Numbers the variables: nodes naming the same (container, shared name) share an id. */
static bool number_variables(analysis *a)
{
    const tfs_graph *g = a->g;
    var_key *keys = tfs_malloc(((size_t)g->n_nodes + 1) * sizeof *keys);
    if (!keys)
        return false;
    int k = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        const tfs_node *n = &g->nodes[id];
        a->var_of[id] = VAR_NONE;
        if (is_var_op(n->op_type))
            keys[k++] = (var_key){tfs__attr_str(n, "container", ""), shared_name(n), id};
    }
    qsort(keys, (size_t)k, sizeof *keys, cmp_var_keys);
    a->n_vars = 0;
    for (int i = 0; i < k; i++) {
        if (i == 0 || cmp_var_keys(&keys[i - 1], &keys[i]) != 0)
            a->n_vars++;
        a->var_of[keys[i].node] = a->n_vars - 1;
    }
    tfs_free(keys);
    a->written = tfs_calloc((size_t)a->n_vars + 1, sizeof *a->written);
    return a->written != NULL;
}

/* The variable a node's input refers to (through Identity-like ops), VAR_NONE when it is a plain
 * value, VAR_UNKNOWN when it may be a handle we cannot follow. */
static int trace_var(const analysis *a, tfs_edge e)
{
    const tfs_graph *g = a->g;
    for (int hops = 0; hops <= g->n_nodes; hops++) {
        const tfs_node *p = &g->nodes[e.node];
        if (a->var_of[e.node] >= 0)
            return a->var_of[e.node];
        if (tfs__rw_is_identity_op(p->op_type) && p->n_inputs >= 1) {
            e = p->inputs[0];
            continue;
        }
        if (!strcmp(p->op_type, "IdentityN") && e.index < p->n_inputs) {
            e = p->inputs[e.index];
            continue;
        }
        if (!p->op || (p->op->flags & TFS_OPF_FUNCTIONS))
            return VAR_UNKNOWN;
        if (!strcmp(p->op_type, "Placeholder") || !strcmp(p->op_type, "PlaceholderWithDefault")) {
            const tfs_attr_value *dt = tfs__attr(p, "dtype");
            bool handle = !dt || dt->kind != TFS_ATTR_TYPE || dt->type == TFS_DTYPE_RESOURCE ||
                          dt->type > TFS_DTYPE_REF_OFFSET;
            return handle ? VAR_UNKNOWN : VAR_NONE;
        }
        return VAR_NONE;
    }
    return VAR_UNKNOWN;   /* a cycle of Identity nodes: the run fails anyway */
}

static void scan_library(analysis *a)
{
    const tfs_graph *g = a->g;
    for (int f = 0; f < g->n_funcs; f++) {
        const tfs_graph *body = g->funcs[f].body;
        for (int id = 0; id < body->n_nodes; id++) {
            const tfs_node *n = &body->nodes[id];
            if (writes_state(n))
                a->library_writes = true;
            if (n->op && (n->op->flags & TFS_OPF_STATEFUL) && !(n->op->flags & TFS_OPF_RANDOM))
                a->library_stateful = true;
        }
    }
}

static bool frozen_var(const analysis *a, bool have_values, int v)
{
    return have_values && v >= 0 && !a->all_written && !a->written[v];
}

/* Step 1 of DESIGN for one run: marks what it may write; false when it cannot run at all. */
static bool note_writes(analysis *a, const run_info *r)
{
    const tfs_graph *g = a->g;
    memset(a->needed, 0, (size_t)g->n_nodes);
    prune_run(g, r, a->needed, a->stack);
    bool runnable = true;
    for (int id = 0; id < g->n_nodes; id++) {
        const tfs_node *n = &g->nodes[id];
        if (!a->needed[id])
            continue;
        if (!n->op || !n->op->kernel)
            runnable = false;
        if (n->op && (n->op->flags & TFS_OPF_FUNCTIONS) && a->library_writes)
            a->all_written = true;
        if (!writes_state(n))
            continue;
        for (int i = 0; i < n->n_inputs; i++) {
            int v = trace_var(a, n->inputs[i]);
            if (v >= 0)
                a->written[v] = true;
            else if (v == VAR_UNKNOWN)
                a->all_written = true;
        }
    }
    return runnable;
}

/* Step 2 of DESIGN: may the run be served? (a->needed holds nothing useful on entry) */
static bool servable(analysis *a, const run_info *r, bool have_values)
{
    const tfs_graph *g = a->g;
    memset(a->needed, 0, (size_t)g->n_nodes);
    prune_run(g, r, a->needed, a->stack);
    for (int id = 0; id < g->n_nodes; id++) {
        const tfs_node *n = &g->nodes[id];
        if (!a->needed[id])
            continue;
        unsigned f = n->op ? n->op->flags : 0;
        if ((f & TFS_OPF_FUNCTIONS) && a->library_stateful)
            return false;
        if (!(f & TFS_OPF_STATEFUL) || (f & TFS_OPF_RANDOM))
            continue;
        int v = VAR_NONE;
        if (is_var_op(n->op_type))
            v = a->var_of[id];
        else if (is_reader_op(n->op_type) && n->n_inputs >= 1)
            v = trace_var(a, n->inputs[0]);
        if (!frozen_var(a, have_values, v))
            return false;
    }
    return true;
}

/* Step 4 of DESIGN: does the rewritten graph serve run r? */
static bool served_by(const tfs_graph *g, const tfs_rewrite_run *r, bool library_stateful,
                      bool *oom)
{
    run_info ri = {0};
    char *needed = tfs_calloc((size_t)g->n_nodes + 1, 1);
    int *stack = tfs_malloc(((size_t)g->n_nodes + 1) * sizeof *stack);
    bool ok = needed && stack && resolve_run(g, r, &ri);
    if (!ok) {
        *oom = true;
    } else if (ri.resolved) {
        prune_run(g, &ri, needed, stack);
        for (int id = 0; id < g->n_nodes && ok; id++) {
            const tfs_node *n = &g->nodes[id];
            unsigned f = n->op ? n->op->flags : 0;
            if (!needed[id])
                continue;
            ok = n->op && n->op->kernel && (!(f & TFS_OPF_STATEFUL) || (f & TFS_OPF_RANDOM)) &&
                 !((f & TFS_OPF_FUNCTIONS) && library_stateful);
        }
    } else {
        ok = false;
    }
    run_info_free(&ri);
    tfs_free(needed);
    tfs_free(stack);
    return ok;
}

/* ---- the rewrite ----------------------------------------------------------------------------- */

/* Marks alive the nodes the candidate runs need (step 2 of DESIGN) and their protected names. */
static bool keep_nodes(analysis *a, tfs_rw_graph *rw, const run_info *ri, int n_runs)
{
    const tfs_graph *g = a->g;
    char *keep = a->needed;   /* reused below as the union */
    char *one = tfs_calloc((size_t)g->n_nodes + 1, 1);
    if (!one)
        return false;
    memset(keep, 0, (size_t)g->n_nodes);
    for (int r = 0; r < n_runs; r++) {
        const run_info *x = &ri[r];
        if (!x->candidate)
            continue;
        memset(one, 0, (size_t)g->n_nodes);
        prune_run(g, x, one, a->stack);
        for (int id = 0; id < g->n_nodes; id++)
            keep[id] |= one[id];
        for (int i = 0; i < x->n_feeds; i++) {
            keep[x->feeds[i].node] = 1;
            rw->nodes[x->feeds[i].node].flags |= TFS_RW_FED;
        }
        for (int i = 0; i < x->n_fetches; i++) {
            keep[x->fetches[i].node] = 1;
            rw->nodes[x->fetches[i].node].flags |=
                x->fetches[i].index == 0 ? TFS_RW_FETCHED : TFS_RW_FETCHED_MORE;
        }
        for (int i = 0; i < x->n_targets; i++) {
            keep[x->targets[i]] = 1;
            rw->nodes[x->targets[i]].flags |= TFS_RW_TARGET;
        }
    }
    tfs_free(one);
    /* Close over inputs: the producers of fed tensors keep their own inputs. */
    int top = 0;
    for (int id = 0; id < g->n_nodes; id++)
        if (keep[id])
            a->stack[top++] = id;
    while (top > 0) {
        const tfs_node *n = &g->nodes[a->stack[--top]];
        for (int i = 0; i < n->n_inputs + n->n_ctrl; i++) {
            int src = i < n->n_inputs ? n->inputs[i].node : n->ctrl[i - n->n_inputs];
            if (!keep[src]) {
                keep[src] = 1;
                a->stack[top++] = src;
            }
        }
    }
    for (int id = 0; id < g->n_nodes; id++)
        rw->nodes[id].alive = keep[id];
    return true;
}

static enum tfs_code check_args(tfs_graph *g, tfs_session *values, tfs_rewrite_run *runs,
                                int n_runs, const tfs_rewrite_opts *o, tfs_status *st)
{
    if (!g || !g->finalized)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "graph rewrite needs a finalized graph");
    if (values && tfs_session_graph(values) != g)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "graph rewrite: the values session runs "
                       "another graph");
    if (n_runs < 0 || (n_runs > 0 && !runs))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "graph rewrite: %d runs given", n_runs);
    if (o->max_constant_bytes < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "graph rewrite: max_constant_bytes %lld < 0",
                       (long long)o->max_constant_bytes);
    return TFS_OK;
}

static enum tfs_code run_passes(tfs_rw_graph *rw, tfs_status *st)
{
    const tfs_rewrite_opts *o = rw->opts;
    enum tfs_code rc = TFS_OK;
    if (o->fold_constants || rw->values)
        rc = tfs__rw_fold_constants(rw, st);   /* also freezes variables (rewrite-fold.c) */
    if (rc == TFS_OK && o->remove_identities)
        rc = tfs__rw_remove_identities(rw, st);
    if (rc == TFS_OK && o->fold_batch_norms)
        rc = tfs__rw_fold_batch_norms(rw, st);
    if (rc == TFS_OK && (o->fuse_matmul || o->fuse_conv2d))
        rc = tfs__rw_fuse(rw, st);
    if (rc == TFS_OK && o->fuse_conv2d && o->fuse_add)
        rc = tfs__rw_fuse_add(rw, st);
    if (rc == TFS_OK)
        rc = tfs__rw_prune(rw, st);
    return rc;
}

enum tfs_code tfs_graph_rewrite(tfs_graph *g, tfs_session *values, tfs_rewrite_run *runs,
                                int n_runs, const tfs_rewrite_opts *opts, tfs_graph **out,
                                tfs_rewrite_stats *stats, tfs_status *st)
{
    *out = NULL;
    tfs_rewrite_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    tfs_rewrite_opts o = opts ? *opts : tfs_rewrite_opts_default();
    for (int r = 0; runs && r < n_runs; r++)
        runs[r].served = false;
    enum tfs_code rc = check_args(g, values, runs, n_runs, &o, st);
    if (rc != TFS_OK)
        return rc;
    analysis a = {.g = g};
    run_info *ri = tfs_calloc((size_t)n_runs + 1, sizeof *ri);
    tfs_rw_graph rw = {0};
    tfs_session *tmp = NULL;
    tfs_graph *res = NULL;
    size_t nn = (size_t)g->n_nodes + 1;
    a.var_of = tfs_malloc(nn * sizeof *a.var_of);
    a.needed = tfs_calloc(nn, 1);
    a.stack = tfs_malloc(nn * sizeof *a.stack);
    if (!ri || !a.var_of || !a.needed || !a.stack || !number_variables(&a))
        goto oom;
    for (int r = 0; r < n_runs; r++)
        if (!resolve_run(g, &runs[r], &ri[r]))
            goto oom;
    scan_library(&a);
    for (int r = 0; r < n_runs; r++)
        if (ri[r].resolved)
            ri[r].candidate = note_writes(&a, &ri[r]);
    bool any = false;
    for (int r = 0; r < n_runs; r++) {
        ri[r].candidate = ri[r].candidate && servable(&a, &ri[r], values != NULL);
        any = any || ri[r].candidate;
    }
    if (!any)
        goto done;   /* nothing to serve: *out stays NULL */

    if ((rc = tfs__rw_init(&rw, g, st)) != TFS_OK)
        goto fail;
    rw.opts = &o;
    rw.stats = stats;
    if (!keep_nodes(&a, &rw, ri, n_runs))
        goto oom;
    bool *counted = tfs_calloc((size_t)a.n_vars + 1, sizeof *counted);
    if (!counted)
        goto oom;
    for (int id = 0; id < g->n_nodes; id++) {
        int v = a.var_of[id];
        if (!rw.nodes[id].alive)
            continue;
        stats->nodes_before++;
        if (frozen_var(&a, values != NULL, v)) {
            rw.nodes[id].frozen = true;
            stats->variables_frozen += !counted[v];
            counted[v] = true;
        }
    }
    tfs_free(counted);
    if (o.fold_constants && !values && (rc = tfs_session_new(g, NULL, &tmp, st)) != TFS_OK)
        goto fail;
    rw.values = values ? values : tmp;
    if ((rc = run_passes(&rw, st)) != TFS_OK || (rc = tfs__rw_emit(&rw, &res, st)) != TFS_OK)
        goto fail;
    stats->nodes_after = res->n_nodes;
    for (int id = 0; id < rw.n; id++)
        if (rw.nodes[id].alive && rw.nodes[id].value && !rw.nodes[id].value_shared)
            stats->constant_bytes += (int64_t)rw.nodes[id].value->nbytes;
    for (int r = 0; r < n_runs; r++) {
        bool oom = false;
        runs[r].served = ri[r].candidate && served_by(res, &runs[r], a.library_stateful, &oom);
        if (oom)
            goto oom;
        stats->runs_served += runs[r].served;
    }
    if (stats->runs_served > 0) {
        *out = res;
        res = NULL;
    }
    goto done;
oom:
    rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting a graph");
fail:
    for (int r = 0; runs && r < n_runs; r++)
        runs[r].served = false;
    memset(stats, 0, sizeof *stats);
done:
    tfs_graph_unref(res);
    tfs_session_free(tmp);
    tfs__rw_free(&rw);
    for (int r = 0; ri && r < n_runs; r++)
        run_info_free(&ri[r]);
    tfs_free(ri);
    tfs_free(a.var_of);
    tfs_free(a.written);
    tfs_free(a.needed);
    tfs_free(a.stack);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}
