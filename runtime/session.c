/* Sessions (see session.h): planning a run (resolve names, prune, order), caching the plans and
 * executing them. The variables a session owns live in variable.c, the plan cache in
 * plan-cache.c, memory plans for kernel outputs in memplan.c, the structures below in
 * session-impl.h, and the device side of runs (placement, copies at the boundaries) in
 * session-gpu.c: one step loop (plan_execute) runs CPU and placed plans alike.
 *
 * DESIGN. A run is two steps with a plain data structure between them:
 *   plan_build()   feed/fetch/target names -> run_plan: the nodes to execute in topological order,
 *                  which value slots the feeds fill, and how many times each value is used.
 *                  Pure function of the (immutable) graph and the names, so it is cached: the
 *                  top session keeps run plans by (feed, fetch, target) names (plan-cache.c), so
 *                  a repeated run resolves, prunes and orders nothing.
 *   plan_execute() run_plan + feed tensors -> fetched tensors. Owns all per-run state, which
 *                  comes from a small pool per plan, and brackets the run with the plan's
 *                  memory plan for the feeds' shapes (memplan.c).
 * Every output of every node has a "value slot" (slot_base[node] + index); a run keeps one tensor
 * pointer per slot and drops it after its last consumer, so intermediate memory is released as
 * early as the order allows.
 *
 * Threads: the graph and the session's slot/consumer tables are immutable after tfs_session_new,
 * and each run keeps its state on its own, so runs proceed in parallel. Variables (variable.c)
 * and the random ops' generators (rng.c: one table per session and per prepared function, since
 * TensorFlow keeps a generator per kernel) have their own locks.
 *
 * Functions. The session made by tfs_session_new (the "top" session) prepares each function of
 * its graph's library once: a child session over the body (sharing the top session's variables,
 * checkpoint reader and loop limit) and the run_plan from the argument nodes to the results.
 * Preparing a function plans its body, which checks the functions that body's control-flow nodes
 * call, so preparation recurses; a function already being prepared (recursion) is not entered
 * again. All of it happens inside tfs_session_new, so afterwards the prepared functions are as
 * immutable as the rest, and tfs__session_call (kernels/control.c) only executes a cached plan.
 */
#include "runtime/session-impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* ---- session lifetime ----------------------------------------------------------------------- */

tfs_session_opts tfs_session_opts_default(void)
{
    tfs_session_opts o;
    memset(&o, 0, sizeof o);
    o.max_loop_iterations = TFS_SESSION_MAX_LOOP_ITERATIONS;
    o.plan_cache_size = TFS_SESSION_PLAN_CACHE_SIZE;
    o.memory_plans = TFS_SESSION_MEMORY_PLANS;
    return o;
}

/* Value slots per node: the op's output count, or for op types without a kernel as many as the
 * graph's edges reference (so their outputs can still be fed). */
static enum tfs_code build_slots(tfs_session *s, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    int n = g->n_nodes;
    s->slot_base = tfs_calloc((size_t)n + 1, sizeof(int));
    s->slot_count = tfs_calloc((size_t)n + 1, sizeof(int));
    if (!s->slot_base || !s->slot_count)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a session");
    for (int id = 0; id < n; id++)
        s->slot_count[id] = g->nodes[id].n_outputs >= 0 ? g->nodes[id].n_outputs : 1;
    for (int id = 0; id < n; id++) {
        const tfs_node *nd = &g->nodes[id];
        if (nd->n_inputs > s->max_in)
            s->max_in = nd->n_inputs;
        for (int i = 0; i < nd->n_inputs; i++) {
            tfs_edge e = nd->inputs[i];
            if (g->nodes[e.node].n_outputs < 0 && e.index >= s->slot_count[e.node])
                s->slot_count[e.node] = e.index + 1;
        }
    }
    int64_t total = 0;
    for (int id = 0; id < n; id++) {
        s->slot_base[id] = (int)total;
        total += s->slot_count[id];
        if (s->slot_count[id] > s->max_out)
            s->max_out = s->slot_count[id];
        if (total > INT32_MAX / 2)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "graph has too many node outputs");
    }
    s->n_slots = (int)total;
    s->slot_owner = tfs_malloc(((size_t)total + 1) * sizeof(int));
    if (!s->slot_owner)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a session");
    for (int id = 0; id < n; id++)
        for (int j = 0; j < s->slot_count[id]; j++)
            s->slot_owner[s->slot_base[id] + j] = id;
    return TFS_OK;
}

/* Consumers of each node (data and control edges), for ordering. */
static enum tfs_code build_consumers(tfs_session *s, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    int n = g->n_nodes;
    s->cons_start = tfs_calloc((size_t)n + 1, sizeof(int));
    if (!s->cons_start)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a session");
    int64_t total = 0;
    for (int id = 0; id < n; id++) {
        const tfs_node *nd = &g->nodes[id];
        for (int i = 0; i < nd->n_inputs; i++)
            s->cons_start[nd->inputs[i].node + 1]++;
        for (int i = 0; i < nd->n_ctrl; i++)
            s->cons_start[nd->ctrl[i] + 1]++;
        total += nd->n_inputs + nd->n_ctrl;
        if (total > INT32_MAX / 2)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "graph has too many edges");
    }
    for (int id = 0; id < n; id++)
        s->cons_start[id + 1] += s->cons_start[id];
    s->cons = tfs_calloc(total ? (size_t)total : 1, sizeof *s->cons);
    int *fill = tfs_calloc((size_t)n + 1, sizeof *fill);
    if (!s->cons || !fill) {
        tfs_free(fill);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a session");
    }
    for (int id = 0; id < n; id++) {
        const tfs_node *nd = &g->nodes[id];
        for (int i = 0; i < nd->n_inputs; i++) {
            int p = nd->inputs[i].node;
            s->cons[s->cons_start[p] + fill[p]++] = (consumer){id, i};
        }
        for (int i = 0; i < nd->n_ctrl; i++) {
            int p = nd->ctrl[i];
            s->cons[s->cons_start[p] + fill[p]++] = (consumer){id, -1};
        }
    }
    tfs_free(fill);
    return TFS_OK;
}

static void plan_free(run_plan *p);
static void plan_destroy(void *p);
static enum tfs_code plan_prepare(const tfs_session *s, run_plan *p, tfs_status *st);
static enum tfs_code plan_build(const tfs_session *s, const char *const *feeds, int nfeeds,
                                const char *const *fetches, int nfetches,
                                const char *const *targets, int ntargets, run_plan *p,
                                const char ***missing, int *n_missing, tfs_status *st);

/* A session over g. top == NULL makes a top session (own variables, opts applied); otherwise a
 * child for a function body that shares top's state. */
static enum tfs_code session_create(tfs_graph *g, const tfs_session_opts *opts, tfs_session *top,
                                    tfs_session **out, tfs_status *st)
{
    *out = NULL;
    tfs_session *s = tfs_calloc(1, sizeof *s);
    if (!s)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a session");
    s->graph = tfs_graph_ref(g);
    enum tfs_code rc = TFS_OK;
    if (top) {
        s->top = top;
        s->ckpt = top->ckpt;
        s->max_iters = top->max_iters;
        s->vars = top->vars;
        s->reuse = top->reuse;
        s->mem_plans = top->mem_plans;
        s->stats = top->stats;
    } else {
        s->top = s;
        s->max_iters = TFS_SESSION_MAX_LOOP_ITERATIONS;
        s->reuse = !(tfs__plan_test_flags() & TFS_PLAN_TEST_NO_REUSE);
        s->mem_plans = TFS_SESSION_MEMORY_PLANS;
        s->stats = &s->own_stats;
        int cache_size = TFS_SESSION_PLAN_CACHE_SIZE;
        if (opts) {
            s->ckpt = opts->checkpoint;
            if (opts->max_loop_iterations > 0)
                s->max_iters = opts->max_loop_iterations;
            if (opts->plan_cache_size > 0)
                cache_size = opts->plan_cache_size;
            if (opts->memory_plans > 0)
                s->mem_plans = opts->memory_plans;
            if (opts->disable_buffer_reuse)
                s->reuse = false;
        }
        rc = tfs__var_map_new(&s->vars, st);
        if (rc == TFS_OK)
            rc = tfs__plan_cache_new(cache_size, plan_destroy, &s->plans, st);
    }
    if (rc == TFS_OK)
        rc = build_slots(s, st);
    if (rc == TFS_OK)
        rc = build_consumers(s, st);
    if (rc == TFS_OK)
        rc = tfs__rng_table_new(g, &s->rng, st);
    if (rc != TFS_OK) {
        tfs_session_free(s);
        return rc;
    }
    *out = s;
    return TFS_OK;
}

/* Prepares library function i of the top session's graph (see DESIGN). Errors are kept in the
 * prepared_fn; only running out of memory for the bookkeeping itself is returned. */
static void prepare_function(tfs_session *top, int i)
{
    prepared_fn *pf = &top->fns[i];
    const tfs_graph_function *f = &top->graph->funcs[i];
    if (pf->state != FN_UNPREPARED)
        return;   /* ready, or being prepared further up the stack (a recursive function) */
    pf->state = FN_PREPARING;
    tfs_status_clear(&pf->err);
    if (top->prep_depth >= MAX_FUNCTION_NESTING) {
        TFS_ERR(&pf->err, TFS_INVALID_ARGUMENT, "function '%s': functions call each other more "
                "than %d deep", f->name, MAX_FUNCTION_NESTING);
        goto done;
    }
    top->prep_depth++;
    if (session_create(f->body, NULL, top, &pf->sess, &pf->err) == TFS_OK) {
        run_plan *p = tfs_calloc(1, sizeof *p);
        if (!p) {
            TFS_ERR(&pf->err, TFS_RESOURCE_EXHAUSTED, "out of memory preparing a function");
        } else if (plan_build(pf->sess, (const char *const *)f->inputs, f->n_in,
                              (const char *const *)f->outputs, f->n_out, NULL, 0, p,
                              &pf->missing, &pf->n_missing, &pf->err) != TFS_OK) {
            tfs_free(p);
        } else if (plan_prepare(pf->sess, p, &pf->err) != TFS_OK) {
            plan_destroy(p);
        } else {
            pf->plan = p;
        }
    }
    top->prep_depth--;
    if (pf->err.code != TFS_OK)
        tfs_status_prefix(&pf->err, "function '%s'", f->name);
done:
    pf->state = FN_READY;
}

enum tfs_code tfs_session_new(tfs_graph *g, const tfs_session_opts *opts, tfs_session **out,
                              tfs_status *st)
{
    *out = NULL;
    if (!g || !g->finalized)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "session needs a finalized graph");
    tfs_session *s = NULL;
    enum tfs_code rc = session_create(g, opts, NULL, &s, st);
    if (rc == TFS_OK && (rc = tfs__session_device(g, opts, &s->gpu, st)) != TFS_OK)
        tfs_session_free(s);
    if (rc != TFS_OK)
        return rc;
    if (g->n_funcs > 0) {
        s->fns = tfs_calloc((size_t)g->n_funcs, sizeof *s->fns);
        if (!s->fns) {
            tfs_session_free(s);
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a session");
        }
        for (int i = 0; i < g->n_funcs; i++)
            prepare_function(s, i);
    }
    *out = s;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_session_free(tfs_session *s)
{
    if (!s)
        return;
    tfs__plan_cache_free(s->plans);
    for (int i = 0; s->fns && i < s->graph->n_funcs; i++) {
        prepared_fn *pf = &s->fns[i];
        plan_destroy(pf->plan);
        tfs_free(pf->missing);
        tfs_session_free(pf->sess);
    }
    tfs_free(s->fns);
    if (s->top == s)
        tfs__var_map_free(s->vars);
    tfs__rng_table_free(s->rng);
    tfs_free(s->slot_base);
    tfs_free(s->slot_count);
    tfs_free(s->slot_owner);
    tfs_free(s->cons_start);
    tfs_free(s->cons);
    tfs_graph_unref(s->graph);
    if (s->gpu)   /* after the graph: its constants may now be unreferenced */
        s->gpu->iface->sweep(s->gpu);
    tfs_free(s);
}

const tfs_graph *tfs_session_graph(const tfs_session *s)
{
    return s ? s->graph : NULL;
}

const tfs_checkpoint_reader *tfs__session_checkpoint(const tfs_session *s)
{
    return &s->ckpt;
}

/* ---- planning: resolve names ---------------------------------------------------------------- */

/* "x:1" -> its value slot. NOT_FOUND names the tensor as the caller spelled it. */
static enum tfs_code resolve_tensor(const tfs_session *s, const char *text, int *slot,
                                    tfs_status *st)
{
    const tfs_graph *g = s->graph;
    size_t len = text ? strlen(text) : 0;
    char *name = tfs_malloc(len + 1);
    if (!name)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory resolving a tensor name");
    int index = 0;
    bool control = false;
    enum tfs_code rc = TFS_OK;
    if (!tfs_tensor_name_parse(text, name, len + 1, &index, &control) || control) {
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "malformed tensor name '%s'", text ? text : "");
        goto done;
    }
    int id = tfs_graph_find_node(g, name);
    if (id < 0) {
        rc = TFS_ERR(st, TFS_NOT_FOUND, "Tensor %s not found in graph", text);
        goto done;
    }
    if (index >= s->slot_count[id]) {
        const tfs_node *n = &g->nodes[id];
        rc = TFS_ERR(st, TFS_NOT_FOUND, "Tensor %s not found in graph: node '%s' (%s) has %d output%s",
                     text, n->name, n->op_type, s->slot_count[id], s->slot_count[id] == 1 ? "" : "s");
        goto done;
    }
    *slot = s->slot_base[id] + index;
done:
    tfs_free(name);
    return rc;
}

static enum tfs_code resolve_target(const tfs_session *s, const char *text, int *node,
                                    tfs_status *st)
{
    const char *name = text && text[0] == '^' ? text + 1 : text;
    *node = tfs_graph_find_node(s->graph, name);
    if (*node < 0)
        return TFS_ERR(st, TFS_NOT_FOUND, "Target node %s not found in graph", text ? text : "(null)");
    return TFS_OK;
}

/* ---- planning: prune, check kernels, order -------------------------------------------------- */

/* Marks in needed[] every node the fetches and targets depend on, stopping at fed values. */
static enum tfs_code prune(const tfs_session *s, const run_plan *p, const int *targets,
                           int n_targets, char *needed, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    int *stack = tfs_malloc(((size_t)g->n_nodes + 1) * sizeof *stack);
    if (!stack)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory planning a run");
    int top = 0;
    for (int i = 0; i < p->n_fetches; i++) {
        if (p->feed_of[p->fetch_slot[i]] >= 0)
            continue;   /* a fetched feed is returned as fed */
        int id = s->slot_owner[p->fetch_slot[i]];
        if (!needed[id]) {
            needed[id] = 1;
            stack[top++] = id;
        }
    }
    for (int i = 0; i < n_targets; i++) {
        if (!needed[targets[i]]) {
            needed[targets[i]] = 1;
            stack[top++] = targets[i];
        }
    }
    while (top > 0) {
        const tfs_node *n = &g->nodes[stack[--top]];
        for (int i = 0; i < n->n_inputs; i++) {
            int src = n->inputs[i].node;
            if (p->feed_of[edge_slot(s, n->inputs[i])] >= 0 || needed[src])
                continue;
            needed[src] = 1;
            stack[top++] = src;
        }
        for (int i = 0; i < n->n_ctrl; i++) {
            int src = n->ctrl[i];
            if (!needed[src]) {
                needed[src] = 1;
                stack[top++] = src;
            }
        }
    }
    tfs_free(stack);
    return TFS_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The prepared library function `fname` that a func attr of node n (which calls functions) names:
 * NOT_FOUND when the library has none of that name, or the error that preparing the function
 * met. */
static enum tfs_code called_function(const tfs_session *s, const tfs_node *n, const char *fname,
                                     const prepared_fn **out, tfs_status *st)
{
    tfs_session *top = s->top;
    int i = tfs__graph_function_index(top->graph, fname);
    *out = NULL;
    if (i < 0 || !top->fns)
        return TFS_ERR(st, TFS_NOT_FOUND, "node '%s' (%s): function '%s' is not in the graph's "
                       "function library", n->name, n->op_type, fname ? fname : "");
    prepare_function(top, i);   /* a no-op once tfs_session_new has returned */
    const prepared_fn *pf = &top->fns[i];
    if (pf->err.code != TFS_OK) {
        if (st)
            *st = pf->err;
        return tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
    }
    *out = pf;
    return TFS_OK;
}

/* For each needed node that calls functions: checks them (see called_function) and, when `types`
 * is given, appends the op types their bodies lack kernels for at types[*k] (NULL: counts them). */
static enum tfs_code function_kernels(const tfs_session *s, const char *needed, const char **types,
                                      int *k, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    for (int id = 0; id < g->n_nodes; id++) {
        const tfs_node *n = &g->nodes[id];
        if (!needed[id] || !n->op || !(n->op->flags & TFS_OPF_FUNCTIONS))
            continue;
        for (int a = 0; a < n->n_attrs; a++) {
            /* a func attr (While, If) or a list of them (Case's branches) */
            const tfs_attr_value *v = &n->attrs[a];
            bool list = v->kind == TFS_ATTR_LIST && v->list.kind == TFS_ATTR_FUNC;
            if (v->kind != TFS_ATTR_FUNC && !list)
                continue;
            for (int f = 0; f < (list ? v->list.n : 1); f++) {
                const prepared_fn *pf;
                enum tfs_code rc = called_function(s, n, list ? v->list.func[f] : v->func, &pf,
                                                   st);
                if (rc != TFS_OK)
                    return rc;
                for (int j = 0; j < pf->n_missing; j++, (*k)++)
                    if (types)
                        types[*k] = pf->missing[j];
            }
        }
    }
    return TFS_OK;
}

/* The op types (sorted, each once) of needed nodes that have no kernel, also inside the functions
 * they call: *types is a tfs_malloc'ed array of *n names borrowed from the graphs (NULL when there
 * are none). Errors of called functions (function_kernels) are returned. */
static enum tfs_code missing_kernels(const tfs_session *s, const char *needed, const char ***types,
                                     int *n, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    int n_missing = 0;
    *types = NULL;
    *n = 0;
    enum tfs_code rc = function_kernels(s, needed, NULL, &n_missing, st);
    if (rc != TFS_OK)
        return rc;
    for (int id = 0; id < g->n_nodes; id++)
        if (needed[id] && (!g->nodes[id].op || !g->nodes[id].op->kernel))
            n_missing++;
    if (n_missing == 0)
        return TFS_OK;
    const char **v = tfs_malloc((size_t)n_missing * sizeof *v);
    if (!v)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory planning a run");
    int k = 0;
    function_kernels(s, needed, v, &k, st);   /* succeeded above; the graphs are immutable */
    for (int id = 0; id < g->n_nodes; id++)
        if (needed[id] && (!g->nodes[id].op || !g->nodes[id].op->kernel))
            v[k++] = g->nodes[id].op_type;
    qsort(v, (size_t)k, sizeof *v, cmp_str);
    int unique = 0;
    for (int i = 0; i < k; i++)
        if (unique == 0 || strcmp(v[i], v[unique - 1]) != 0)
            v[unique++] = v[i];
    *types = v;
    *n = unique;
    return TFS_OK;
}

/* UNIMPLEMENTED listing each op type (once, sorted) that lacks a kernel among the needed nodes. */
static enum tfs_code check_kernels(const tfs_session *s, const char *needed, tfs_status *st)
{
    const char **types;
    int k;
    enum tfs_code rc = missing_kernels(s, needed, &types, &k, st);
    if (rc != TFS_OK || k == 0)
        return rc;
    char list[TFS_STATUS_MSG_MAX];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < k; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", types[i]);
        if (w < 0 || (size_t)w >= sizeof list - used)
            break;
        used += (size_t)w;
    }
    tfs_free(types);
    return TFS_ERR(st, TFS_UNIMPLEMENTED, "ops not supported by tfserve: %s", list);
}

/* Kahn's algorithm over the needed nodes; edges from fed values do not count. Fills p->order. */
static enum tfs_code order_nodes(const tfs_session *s, run_plan *p, const char *needed,
                                 tfs_status *st)
{
    const tfs_graph *g = s->graph;
    int n = g->n_nodes;
    int n_needed = 0;
    int *indeg = tfs_calloc((size_t)n + 1, sizeof *indeg);
    p->order = tfs_malloc(((size_t)n + 1) * sizeof *p->order);
    if (!indeg || !p->order) {
        tfs_free(indeg);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory planning a run");
    }
    for (int id = 0; id < n; id++) {
        if (!needed[id])
            continue;
        n_needed++;
        const tfs_node *nd = &g->nodes[id];
        indeg[id] = nd->n_ctrl;
        for (int i = 0; i < nd->n_inputs; i++)
            if (p->feed_of[edge_slot(s, nd->inputs[i])] < 0)
                indeg[id]++;
    }
    /* p->order doubles as the FIFO queue: [head, n_order) are ready but not yet expanded. */
    p->n_order = 0;
    for (int id = 0; id < n; id++)
        if (needed[id] && indeg[id] == 0)
            p->order[p->n_order++] = id;
    for (int head = 0; head < p->n_order; head++) {
        int u = p->order[head];
        for (int c = s->cons_start[u]; c < s->cons_start[u + 1]; c++) {
            int v = s->cons[c].node;
            if (!needed[v])
                continue;
            int in = s->cons[c].input;
            if (in >= 0 && p->feed_of[edge_slot(s, g->nodes[v].inputs[in])] >= 0)
                continue;
            if (--indeg[v] == 0)
                p->order[p->n_order++] = v;
        }
    }
    enum tfs_code rc = TFS_OK;
    if (p->n_order < n_needed) {
        int culprit = 0;
        while (!(needed[culprit] && indeg[culprit] > 0))
            culprit++;
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                     "graph has a cycle: node '%s' (%s) depends on its own output",
                     g->nodes[culprit].name, g->nodes[culprit].op_type);
    }
    tfs_free(indeg);
    return rc;
}

static void plan_free(run_plan *p)
{
    if (!p)
        return;
    tfs_free(p->feed_slot);
    tfs_free(p->fetch_slot);
    tfs_free(p->order);
    tfs_free(p->feed_of);
    tfs_free(p->uses);
    tfs_free(p->feed_dtype);
    tfs_free(p->out_base);
    if (p->prepared) {
        tfs__mem_cache_free(p->mem);
        tfs__plan_place_free(p);
        tfs_free(atomic_load(&p->spare));
        while (p->pool) {
            run_state *r = p->pool;
            p->pool = r->next;
            tfs_free(r);
        }
        pthread_mutex_destroy(&p->pool_mu);
    }
    memset(p, 0, sizeof *p);
}

/* Frees a heap-allocated plan (the plan cache's free function). NULL-safe. */
static void plan_destroy(void *p)
{
    plan_free(p);
    tfs_free(p);
}

/* Readies a built plan for running: the dtype each feed must have, the numbering of the outputs
 * the run produces (for memory plans), the memory plan cache and the state pool. On failure the
 * plan is left for plan_free. */
static enum tfs_code plan_prepare(const tfs_session *s, run_plan *p, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    p->feed_dtype = tfs_malloc(((size_t)p->n_feeds + 1) * sizeof *p->feed_dtype);
    p->out_base = tfs_malloc(((size_t)p->n_order + 1) * sizeof *p->out_base);
    if (!p->feed_dtype || !p->out_base)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory planning a run");
    for (int i = 0; i < p->n_feeds; i++) {
        const tfs_node *n = &g->nodes[s->slot_owner[p->feed_slot[i]]];
        const tfs_attr_value *dt = tfs__attr(n, "dtype");
        bool placeholder = !strcmp(n->op_type, "Placeholder") ||
                           !strcmp(n->op_type, "PlaceholderWithDefault");
        p->feed_dtype[i] = placeholder && dt && dt->kind == TFS_ATTR_TYPE ? (int)dt->type : -1;
    }
    int outs = 0;   /* at most n_slots, which fits an int */
    for (int k = 0; k < p->n_order; k++) {
        p->out_base[k] = outs;
        outs += s->slot_count[p->order[k]];
        p->dead_flow = p->dead_flow || g->nodes[p->order[k]].op == &tfs__ops[TFS_OP_SWITCH];
    }
    if (pthread_mutex_init(&p->pool_mu, NULL) != 0)
        return TFS_ERR(st, TFS_INTERNAL, "cannot create a mutex");
    atomic_init(&p->spare, NULL);
    p->prepared = true;
    enum tfs_code rc = TFS_OK;
    if (s->reuse)
        rc = tfs__mem_cache_new(outs, s->mem_plans, s->stats, &p->mem, st);
    if (rc == TFS_OK && s->gpu && !p->dead_flow)   /* the GPU executor has no dead values */
        rc = tfs__plan_place(s, p, st);
    return rc;
}

/* Names -> plan. Fails with INVALID_ARGUMENT (malformed or duplicate feed, cycle), NOT_FOUND
 * (unknown tensor or target), UNIMPLEMENTED (an op to execute has no kernel) -- unless `missing`
 * is given, which then receives those op types instead (see missing_kernels). */
static enum tfs_code plan_build(const tfs_session *s, const char *const *feeds, int nfeeds,
                                const char *const *fetches, int nfetches,
                                const char *const *targets, int ntargets, run_plan *p,
                                const char ***missing, int *n_missing, tfs_status *st)
{
    const tfs_graph *g = s->graph;
    enum tfs_code rc;
    char *needed = NULL;
    int *target_nodes = NULL;
    memset(p, 0, sizeof *p);
    if (missing) {   /* defined on every path, so the fail label may free it */
        *missing = NULL;
        *n_missing = 0;
    }
    if (nfeeds < 0 || nfetches < 0 || ntargets < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "negative feed, fetch or target count");
    p->n_feeds = nfeeds;
    p->n_fetches = nfetches;
    p->feed_slot = tfs_calloc((size_t)nfeeds + 1, sizeof(int));
    p->fetch_slot = tfs_calloc((size_t)nfetches + 1, sizeof(int));
    p->feed_of = tfs_malloc(((size_t)s->n_slots + 1) * sizeof(int));
    p->uses = tfs_calloc((size_t)s->n_slots + 1, sizeof(int));
    target_nodes = tfs_calloc((size_t)ntargets + 1, sizeof(int));
    needed = tfs_calloc((size_t)g->n_nodes + 1, 1);
    if (!p->feed_slot || !p->fetch_slot || !p->feed_of || !p->uses || !target_nodes || !needed) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory planning a run");
        goto fail;
    }
    for (int i = 0; i < s->n_slots; i++)
        p->feed_of[i] = -1;
    for (int i = 0; i < nfeeds; i++) {
        if ((rc = resolve_tensor(s, feeds[i], &p->feed_slot[i], st)) != TFS_OK)
            goto fail;
        if (p->feed_of[p->feed_slot[i]] >= 0) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor %s is fed more than once", feeds[i]);
            goto fail;
        }
        p->feed_of[p->feed_slot[i]] = i;
    }
    for (int i = 0; i < nfetches; i++)
        if ((rc = resolve_tensor(s, fetches[i], &p->fetch_slot[i], st)) != TFS_OK)
            goto fail;
    for (int i = 0; i < ntargets; i++)
        if ((rc = resolve_target(s, targets[i], &target_nodes[i], st)) != TFS_OK)
            goto fail;

    if ((rc = prune(s, p, target_nodes, ntargets, needed, st)) != TFS_OK)
        goto fail;
    rc = missing ? missing_kernels(s, needed, missing, n_missing, st)
                 : check_kernels(s, needed, st);
    if (rc != TFS_OK)
        goto fail;
    if ((rc = order_nodes(s, p, needed, st)) != TFS_OK)
        goto fail;

    for (int k = 0; k < p->n_order; k++) {
        const tfs_node *n = &g->nodes[p->order[k]];
        for (int i = 0; i < n->n_inputs; i++)
            p->uses[edge_slot(s, n->inputs[i])]++;
    }
    for (int i = 0; i < nfetches; i++)
        p->uses[p->fetch_slot[i]]++;
    tfs_free(needed);
    tfs_free(target_nodes);
    return TFS_OK;
fail:
    if (missing) {
        tfs_free(*missing);
        *missing = NULL;
        *n_missing = 0;
    }
    tfs_free(needed);
    tfs_free(target_nodes);
    plan_free(p);
    return rc;
}

/* ---- execution ------------------------------------------------------------------------------ */

/* A state from p's pool, or a new one (NULL when out of memory). Every tensor pointer in it is
 * NULL; `remaining` is for the caller to fill. */
static run_state *run_state_get(const tfs_session *s, run_plan *p)
{
    run_state *r = atomic_exchange_explicit(&p->spare, NULL, memory_order_acq_rel);
    if (r)
        return r;
    pthread_mutex_lock(&p->pool_mu);
    r = p->pool;
    if (r) {
        p->pool = r->next;
        p->n_pool--;
    }
    pthread_mutex_unlock(&p->pool_mu);
    if (r)
        return r;
    size_t ns = (size_t)s->n_slots + 1, ni = (size_t)s->max_in + 1, no = (size_t)s->max_out + 1;
    size_t head = (sizeof *r + 15) & ~(size_t)15;
    size_t ptrs = (2 * ns + 2 * ni + no) * sizeof(tfs_tensor *);
    r = tfs_calloc(1, head + ptrs + ns * sizeof(int) + (size_t)s->graph->n_nodes + 1);
    if (!r)
        return NULL;
    r->dead = (char *)r + head + ptrs + ns * sizeof(int);
    tfs_tensor **t = (tfs_tensor **)((char *)r + head);
    r->vals = t;
    r->in = t + ns;
    r->derefs = t + ns + ni;
    r->out = t + ns + 2 * ni;
    r->alt = t + ns + 2 * ni + no;
    r->remaining = (int *)((char *)r + head + ptrs);
    return r;
}

/* Returns a state whose tensor pointers are all NULL again to the pool. */
static void run_state_put(run_plan *p, run_state *r)
{
    run_state *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&p->spare, &none, r, memory_order_acq_rel,
                                                memory_order_relaxed))
        return;
    bool pooled = false;
    pthread_mutex_lock(&p->pool_mu);
    if (p->n_pool < STATE_POOL_MAX) {
        r->next = p->pool;
        p->pool = r;
        p->n_pool++;
        pooled = true;
    }
    pthread_mutex_unlock(&p->pool_mu);
    if (!pooled)
        tfs_free(r);
}

/* Adds "node 'NAME': " in front of a kernel's message unless it already names the node. */
static enum tfs_code kernel_error(const tfs_node *n, tfs_status *st, enum tfs_code rc)
{
    if (!st)
        return rc;
    if (st->code == TFS_OK)   /* a kernel that failed without saying why */
        return TFS_ERR(st, TFS_INTERNAL, "node '%s' (%s): kernel failed with %s", n->name,
                       n->op_type, tfs_code_name(rc));
    char head[TFS_STATUS_MSG_MAX];
    snprintf(head, sizeof head, "node '%s'", n->name);
    if (strncmp(st->msg, head, strlen(head)) != 0)
        tfs_status_prefix(st, "node '%s'", n->name);
    return st->code;
}

/* A kernel may write over input i in place when the node running is its last use (remaining
 * counts the fetches too), it was not fed (the caller holds feeds) or dereferenced from a
 * variable, and its only reference is the slot's over a buffer it owns (no alias, variable or
 * Const shares it). Checked only when a kernel asks, so other ops pay nothing for it. */
tfs_tensor *tfs__kernel_take_input(tfs_kernel_ctx *k, int i, enum tfs_dtype dt, int rank,
                                   const int64_t *dims)
{
    if (!k->plan || i < 0 || i >= k->n_in)
        return NULL;
    int slot = edge_slot(k->sess, k->node->inputs[i]);
    tfs_tensor *t = k->in[i];
    if (k->run->vals[slot] != t || k->plan->feed_of[slot] >= 0 || k->run->remaining[slot] != 1 ||
        is_ref_dtype(t->dtype) || t->dtype == TFS_DTYPE_STRING || !tfs__mem_exclusive(t))
        return NULL;
    if (t->dtype != dt || t->rank != rank || memcmp(t->dims, dims, sizeof *dims * (size_t)rank))
        return NULL;
    atomic_fetch_add_explicit(&k->sess->stats->taken_inputs, 1, memory_order_relaxed);
    return tfs_tensor_ref(t);   /* a second take fails: t then has two references */
}

static tfs_tensor dead_value = {.dtype = TFS_DTYPE_INVALID, .refs = INT_MAX / 2};

tfs_tensor *tfs__dead_tensor(void)
{
    return &dead_value;
}

/* TensorFlow's dead values, for plans that run a Switch: a node with a dead data input or a dead
 * control input does not run, and its outputs are dead too -- except Merge, which runs when any
 * input is live. True when node id was skipped (its outputs set dead, its inputs released). */
static bool skip_dead(const tfs_session *s, const run_plan *p, run_state *r, int id)
{
    const tfs_node *n = &s->graph->nodes[id];
    bool merge = n->op == &tfs__ops[TFS_OP_MERGE], dead = false, live = false;
    for (int i = 0; i < n->n_ctrl && !dead; i++)
        dead = r->dead[n->ctrl[i]];
    for (int i = 0; i < n->n_inputs; i++) {
        bool d = r->vals[edge_slot(s, n->inputs[i])] == &dead_value;
        live = live || !d;
        dead = dead || (d && !merge);
    }
    dead = dead || (merge && !live);
    r->dead[id] = dead;
    if (!dead)
        return false;
    for (int j = 0; j < s->slot_count[id]; j++) {
        int slot = s->slot_base[id] + j;
        if (p->feed_of[slot] < 0 && r->remaining[slot] > 0)
            r->vals[slot] = tfs_tensor_ref(&dead_value);
    }
    for (int i = 0; i < n->n_inputs; i++)
        slot_release(r, edge_slot(s, n->inputs[i]));
    return true;
}

/* Runs the node at step `step`: gathers (and dereferences) inputs, calls the kernel, stores the
 * outputs. dev: the device of a placed plan's run, or NULL; the step's side changes only where
 * its inputs come from and which kernel runs (the tfs__run_device_ hooks). */
static enum tfs_code run_node(tfs_session *s, const run_plan *p, run_state *r, int step,
                              tfs_mem_run *mem, const run_device *dev, tfs_status *st)
{
    int id = p->order[step];
    const tfs_node *n = &s->graph->nodes[id];
    bool keep_refs = n->op->flags & TFS_OPF_REF_INPUTS;
    enum tfs_code rc = TFS_OK;
    int n_out = s->slot_count[id];
    if (p->dead_flow && skip_dead(s, p, r, id))
        return TFS_OK;
    for (int i = 0; i < n->n_inputs; i++) {
        int slot = edge_slot(s, n->inputs[i]);
        tfs_tensor *t = r->vals[slot];
        if (!t) {
            rc = TFS_ERR(st, TFS_INTERNAL, "node '%s': input %d (%s) has no value", n->name, i,
                         n->text_inputs[i]);
            goto done;
        }
        bool from_var = is_ref_dtype(t->dtype) && !keep_refs;
        if (from_var) {
            tfs_variable *v = ref_variable(t);
            if (!v) {
                rc = TFS_ERR(st, TFS_INTERNAL, "node '%s': input %d is a malformed reference",
                             n->name, i);
                goto done;
            }
            if ((rc = tfs__variable_read(v, &r->derefs[i], st)) != TFS_OK) {
                tfs_status_prefix(st, "node '%s'", n->name);
                goto done;
            }
            t = r->derefs[i];
        }
        if (dev && (rc = tfs__run_device_input(s, p, dev, r, step, i, slot, from_var, &t, st)) !=
                       TFS_OK)
            goto done;
        r->in[i] = t;
    }
    for (int j = 0; j < n_out; j++)
        r->out[j] = NULL;
    tfs_kernel_ctx k = {
        .sess = s, .graph = s->graph, .node = n,
        .in = r->in, .n_in = n->n_inputs, .out = r->out, .n_out = n_out,
        .mem = mem->cache ? mem : NULL, .mem_out0 = p->out_base[step],
        .plan = p, .run = r,
    };
    if (st)
        tfs_status_clear(st);
    rc = dev ? tfs__run_device_kernel(dev, step, &k, st) : n->op->kernel(&k, st);
    if (rc != TFS_OK) {
        kernel_error(n, st, rc);
        goto done;
    }
    for (int j = 0; j < n_out; j++) {
        if (!r->out[j]) {
            rc = TFS_ERR(st, TFS_INTERNAL, "node '%s' (%s): kernel produced no output %d", n->name,
                         n->op_type, j);
            goto done;
        }
    }
    for (int j = 0; j < n_out; j++) {
        int slot = s->slot_base[id] + j;
        /* A fed value wins over the producer's (which runs only for its other effects). */
        if (p->feed_of[slot] >= 0 || r->remaining[slot] == 0) {
            tfs_tensor_unref(r->out[j]);
        } else {
            r->vals[slot] = r->out[j];
        }
        r->out[j] = NULL;
    }
    for (int i = 0; i < n->n_inputs; i++)
        slot_release(r, edge_slot(s, n->inputs[i]));
done:
    for (int j = 0; j < n_out; j++) {
        tfs_tensor_unref(r->out[j]);
        r->out[j] = NULL;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        tfs_tensor_unref(r->derefs[i]);
        r->derefs[i] = NULL;
    }
    return rc;
}

static _Thread_local int64_t thread_deadline_ns;

int64_t tfs_session_set_thread_deadline(int64_t deadline_ns)
{
    int64_t old = thread_deadline_ns;
    thread_deadline_ns = deadline_ns > 0 ? deadline_ns : 0;
    return old;
}

static _Thread_local bool thread_file_ops_denied;

bool tfs_session_set_thread_file_ops(bool allowed)
{
    bool old = !thread_file_ops_denied;
    thread_file_ops_denied = !allowed;
    return old;
}

static _Thread_local tfs_fetch_hook_fn thread_fetch_hook;
static _Thread_local void             *thread_fetch_hook_arg;

void tfs_session_set_thread_fetch_hook(tfs_fetch_hook_fn fn, void *arg)
{
    thread_fetch_hook = fn;
    thread_fetch_hook_arg = arg;
}

/* Calls the hook for each fetch whose value the run now holds, once per fetch. */
static void report_fetches(const run_plan *p, const run_state *r, bool *told, tfs_fetch_hook_fn fn,
                           void *arg)
{
    for (int i = 0; i < p->n_fetches; i++) {
        const tfs_tensor *t = r->vals[p->fetch_slot[i]];
        if (!told[i] && t && t != &dead_value && !is_ref_dtype(t->dtype)) {
            told[i] = true;
            fn(i, t, arg);
        }
    }
}

enum tfs_code tfs__run_check_file_ops(const tfs_node *n, tfs_status *st)
{
    if (!thread_file_ops_denied)
        return TFS_OK;
    return tfs__node_err(n, st, TFS_PERMISSION_DENIED, "reads files its inputs name, which a "
                         "request's run may not (tfserve --allow_file_ops_at_request_time)");
}

enum tfs_code tfs__run_check_deadline(const tfs_graph *g, int node, tfs_status *st)
{
    if (!thread_deadline_ns)
        return TFS_OK;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec <= thread_deadline_ns)
        return TFS_OK;
    return TFS_ERR(st, TFS_DEADLINE_EXCEEDED, "the run's deadline passed; stopped before node "
                   "'%s' (%s)", g->nodes[node].name, g->nodes[node].op_type);
}

/* Executes a prepared plan. outputs[i] receives fetch i (a variable's value for reference
 * tensors). The one step loop for CPU and placed plans alike: a placed plan's run holds the
 * device (tfs__run_device_begin .. _end) and its steps ask the device hooks about their side. */
static enum tfs_code plan_execute(tfs_session *s, run_plan *p, const tfs_feed *feeds,
                                  tfs_tensor **outputs, tfs_status *st)
{
    TFS_ASSERT(p->prepared);
    /* The fetch hook is this run's alone: the runs of function bodies inside it do not see it.
     * A placed plan's values may live on the device: its fetches are not reported early. */
    tfs_fetch_hook_fn hook = thread_fetch_hook;
    void             *hook_arg = thread_fetch_hook_arg;
    enum tfs_code rc = TFS_OK;
    tfs_mem_run mem;
    run_device dev_run, *dev = NULL;   /* set for a plan placed on a device */
    run_state *rp = run_state_get(s, p);
    if (!rp)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a graph");
    if (p->gpu) {
        if ((rc = tfs__run_device_begin(s, p, &dev_run, st)) != TFS_OK) {
            run_state_put(p, rp);
            return rc;
        }
        dev = &dev_run;
    }
    run_state r = *rp;
    tfs__mem_run_begin(&mem, p->mem, feeds, p->n_feeds);
    memcpy(r.remaining, p->uses, (size_t)s->n_slots * sizeof(int));
    if (p->dead_flow)
        memset(r.dead, 0, (size_t)s->graph->n_nodes);
    for (int i = 0; i < p->n_feeds; i++)
        if (r.remaining[p->feed_slot[i]] > 0)
            r.vals[p->feed_slot[i]] = tfs_tensor_ref(feeds[i].tensor);

    bool *told = hook && !dev ? tfs_calloc((size_t)p->n_fetches + 1, sizeof *told) : NULL;
    thread_fetch_hook = NULL;
    for (int k = 0; k < p->n_order; k++) {
        if (mem.step)
            atomic_store_explicit(mem.step, k, memory_order_relaxed);
        if ((rc = tfs__run_check_deadline(s->graph, p->order[k], st)) != TFS_OK ||
            (rc = run_node(s, p, &r, k, &mem, dev, st)) != TFS_OK)
            break;
        if (told) {
            report_fetches(p, &r, told, hook, hook_arg);
            hook(-1, NULL, hook_arg);
        }
    }
    thread_fetch_hook = hook;
    tfs_free(told);
    if (rc != TFS_OK)
        goto done;

    for (int i = 0; i < p->n_fetches; i++) {
        int slot = p->fetch_slot[i];
        tfs_tensor *t = r.vals[slot];
        if (!t) {
            rc = TFS_ERR(st, TFS_INTERNAL, "fetch %d has no value", i);
            goto done;
        }
        if (t == &dead_value) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "fetch %d is on the branch of a conditional "
                         "(Switch) that was not taken: it has no value", i);
            goto done;
        }
        if (dev && (rc = tfs__run_device_fetch(s, p, dev, &r, slot, &t, st)) != TFS_OK)
            goto done;
        if (is_ref_dtype(t->dtype)) {
            tfs_variable *v = ref_variable(t);
            if (!v) {
                rc = TFS_ERR(st, TFS_INTERNAL, "fetch %d is a malformed reference", i);
                goto done;
            }
            if ((rc = tfs__variable_read(v, &outputs[i], st)) != TFS_OK)
                goto done;
        } else {
            outputs[i] = tfs_tensor_ref(t);
        }
        slot_release(&r, slot);
    }
done:
    for (int i = 0; i < s->n_slots; i++) {
        tfs_tensor_unref(r.vals[i]);
        r.vals[i] = NULL;
    }
    for (int i = 0; dev && i < s->n_slots; i++) {
        tfs_tensor_unref(r.alt[i]);
        r.alt[i] = NULL;
    }
    tfs__mem_run_end(&mem, rc == TFS_OK);   /* after the run's own references are gone */
    if (dev)   /* after every device value of the run is released: they go back to the pool */
        rc = tfs__run_device_end(dev, rc, st);
    if (rc != TFS_OK && outputs) {
        for (int i = 0; i < p->n_fetches; i++) {
            tfs_tensor_unref(outputs[i]);
            outputs[i] = NULL;
        }
    }
    run_state_put(p, rp);
    return rc;
}

/* ---- public entry points -------------------------------------------------------------------- */

enum tfs_code tfs_session_check(tfs_session *s, const char *const *feeds, int nfeeds,
                                const char *const *fetches, int nfetches,
                                const char *const *targets, int ntargets, tfs_status *st)
{
    run_plan p;
    enum tfs_code rc = plan_build(s, feeds, nfeeds, fetches, nfetches, targets, ntargets, &p, NULL, NULL,
                                  st);
    if (rc != TFS_OK)
        return rc;
    plan_free(&p);
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_session_missing_ops(tfs_session *s, const char *const *feeds, int nfeeds,
                                     const char *const *fetches, int nfetches,
                                     const char *const *targets, int ntargets,
                                     const char ***missing, int *n_missing, tfs_status *st)
{
    run_plan p;
    enum tfs_code rc = plan_build(s, feeds, nfeeds, fetches, nfetches, targets, ntargets, &p,
                                  missing, n_missing, st);
    if (rc != TFS_OK)
        return rc;
    plan_free(&p);
    tfs_status_clear(st);
    return TFS_OK;
}

/* Feeds must be plain tensors, and a Placeholder's feed must have the placeholder's dtype.
 * `internal` feeds come from the runtime itself (function arguments), which may pass resources. */
static enum tfs_code check_feeds(const tfs_session *s, const run_plan *p, const tfs_feed *feeds,
                                 bool internal, tfs_status *st)
{
    for (int i = 0; i < p->n_feeds; i++) {
        const tfs_tensor *t = feeds[i].tensor;
        if (!t)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feed %s has no tensor", feeds[i].name);
        /* Reference, resource and variant elements are pointers only the runtime may create. */
        if (!internal && (t->dtype == TFS_DTYPE_RESOURCE || t->dtype == TFS_DTYPE_VARIANT ||
                          t->dtype > TFS_DTYPE_REF_OFFSET))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feed %s: cannot feed a tensor of dtype %s",
                           feeds[i].name, tfs_dtype_name(t->dtype));
        if (p->feed_dtype[i] >= 0 && p->feed_dtype[i] != (int)t->dtype) {
            const tfs_node *n = &s->graph->nodes[s->slot_owner[p->feed_slot[i]]];
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "feed %s: expected a tensor of dtype %s (placeholder '%s'), got %s",
                           feeds[i].name, tfs_dtype_short_name((enum tfs_dtype)p->feed_dtype[i]),
                           n->name, tfs_dtype_short_name(t->dtype));
        }
    }
    return TFS_OK;
}

/* Denormal floats: TensorFlow runs its kernels with flush-to-zero and denormals-are-zero set
 * (port::ScopedFlushDenormal), and so do we, for the same numbers and because a denormal costs
 * a hundred cycles per operation on x86 (an optimizer's moments decay into them on weights
 * whose gradient is always 0, and a training epoch then runs several times slower). The
 * caller's mode is restored when the run returns; the thread pool's workers take the caller's
 * mode for the ranges they run (threadpool.c). */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define FLUSH_DENORMALS 0x8040u   /* MXCSR FTZ (bit 15) | DAZ (bit 6) */
static unsigned flush_denormals_begin(void)
{
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | FLUSH_DENORMALS);
    return csr;
}
static void flush_denormals_end(unsigned csr)
{
    _mm_setcsr(csr);
}
#else
static unsigned flush_denormals_begin(void)
{
    return 0;
}
static void flush_denormals_end(unsigned csr)
{
    (void)csr;
}
#endif

static enum tfs_code session_run(tfs_session *s, const tfs_feed *feeds, int nfeeds,
                                 const char *const *fetches, int nfetches,
                                 const char *const *targets, int ntargets, tfs_tensor **outputs,
                                 tfs_status *st);

enum tfs_code tfs_session_run(tfs_session *s, const tfs_feed *feeds, int nfeeds,
                              const char *const *fetches, int nfetches,
                              const char *const *targets, int ntargets, tfs_tensor **outputs,
                              tfs_status *st)
{
    unsigned csr = flush_denormals_begin();
    enum tfs_code rc =
        session_run(s, feeds, nfeeds, fetches, nfetches, targets, ntargets, outputs, st);
    flush_denormals_end(csr);
    return rc;
}

static enum tfs_code session_run(tfs_session *s, const tfs_feed *feeds, int nfeeds,
                                 const char *const *fetches, int nfetches,
                                 const char *const *targets, int ntargets, tfs_tensor **outputs,
                                 tfs_status *st)
{
    for (int i = 0; outputs && i < nfetches; i++)
        outputs[i] = NULL;
    if (nfetches > 0 && !outputs)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "fetches given without an outputs array");
    if (nfeeds < 0 || nfetches < 0 || ntargets < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "negative feed, fetch or target count");
    const char *stack_names[STACK_FEEDS];
    const char **names = stack_names;
    if (nfeeds > STACK_FEEDS && !(names = tfs_calloc((size_t)nfeeds, sizeof *names)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a graph");
    for (int i = 0; i < nfeeds; i++)
        names[i] = feeds[i].name;
    tfs_plan_names key = {{names, fetches, targets}, {nfeeds, nfetches, ntargets}};
    tfs_mem_stats *stats = s->top->stats;
    enum tfs_code rc = TFS_OK;
    run_plan *p = NULL, *own = NULL;
    tfs_plan_entry *e = s->plans ? tfs__plan_cache_find(s->plans, &key) : NULL;
    if (e) {
        atomic_fetch_add_explicit(&stats->plan_hits, 1, memory_order_relaxed);
        p = tfs__plan_entry_value(e);
    } else {
        atomic_fetch_add_explicit(&stats->plan_misses, 1, memory_order_relaxed);
        if (!(own = tfs_calloc(1, sizeof *own))) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a graph");
            goto done;
        }
        rc = plan_build(s, names, nfeeds, fetches, nfetches, targets, ntargets, own, NULL, NULL,
                        st);
        if (rc == TFS_OK)
            rc = plan_prepare(s, own, st);
        if (rc != TFS_OK)
            goto done;
        /* Cached, or (the cache out of memory) run once and freed. */
        if (s->plans && (e = tfs__plan_cache_insert(s->plans, &key, own)))
            own = NULL;
        p = e ? tfs__plan_entry_value(e) : own;
    }
    rc = check_feeds(s, p, feeds, false, st);
    if (rc == TFS_OK)
        rc = plan_execute(s, p, feeds, outputs, st);
done:
    tfs__plan_entry_release(e);
    plan_destroy(own);
    if (names != stack_names)
        tfs_free(names);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}

void tfs__session_plan_stats(const tfs_session *s, tfs_plan_stats *out)
{
    const tfs_mem_stats *m = s->top->stats;
    out->plan_hits = atomic_load(&m->plan_hits);
    out->plan_misses = atomic_load(&m->plan_misses);
    out->mem_hits = atomic_load(&m->mem_hits);
    out->mem_misses = atomic_load(&m->mem_misses);
    out->planned_outputs = atomic_load(&m->planned_outputs);
    out->heap_outputs = atomic_load(&m->heap_outputs);
    out->arenas_created = atomic_load(&m->arenas_created);
    out->taken_inputs = atomic_load(&m->taken_inputs);
}

/* ---- functions ------------------------------------------------------------------------------ */

int64_t tfs__session_max_loop_iterations(const tfs_session *s)
{
    return s->max_iters;
}

enum tfs_code tfs__session_function(const tfs_session *s, const char *name, int *fn,
                                    tfs_status *st)
{
    const tfs_session *top = s->top;
    *fn = tfs__graph_function_index(top->graph, name);
    if (*fn < 0 || !top->fns)
        return TFS_ERR(st, TFS_NOT_FOUND, "function '%s' is not in the graph's function library",
                       name ? name : "");
    return TFS_OK;
}

enum tfs_code tfs__session_call(tfs_session *s, int fn, tfs_tensor *const *args, int n_args,
                                tfs_tensor **results, int n_results, tfs_status *st)
{
    const tfs_session *top = s->top;
    TFS_ASSERT(top->fns && fn >= 0 && fn < top->graph->n_funcs);
    const prepared_fn *pf = &top->fns[fn];
    const tfs_graph_function *f = &top->graph->funcs[fn];
    for (int i = 0; i < n_results; i++)
        results[i] = NULL;
    if (pf->err.code != TFS_OK) {
        if (st)
            *st = pf->err;
        return pf->err.code;
    }
    if (pf->n_missing > 0)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "function '%s': ops not supported by tfserve: %s%s",
                       f->name, pf->missing[0], pf->n_missing > 1 ? ", ..." : "");
    if (n_args != f->n_in || n_results != f->n_out)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "function '%s' takes %d argument%s and returns "
                       "%d result%s; the call passes %d and expects %d", f->name, f->n_in,
                       f->n_in == 1 ? "" : "s", f->n_out, f->n_out == 1 ? "" : "s", n_args,
                       n_results);
    tfs_feed *feeds = tfs_calloc((size_t)n_args + 1, sizeof *feeds);
    if (!feeds)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory calling function '%s'", f->name);
    for (int i = 0; i < n_args; i++)
        feeds[i] = (tfs_feed){f->inputs[i], args[i]};
    enum tfs_code rc = check_feeds(pf->sess, pf->plan, feeds, true, st);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "function '%s'", f->name);
    else
        rc = plan_execute(pf->sess, pf->plan, feeds, results, st);
    tfs_free(feeds);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}

/* ---- variables ------------------------------------------------------------------------------ */

size_t tfs_session_variable_bytes(const tfs_session *s)
{
    return tfs__var_map_bytes(s->vars);
}

enum tfs_code tfs__session_variable(tfs_session *s, const char *container, const char *shared_name,
                                    enum tfs_dtype dtype, tfs_variable **out, tfs_status *st)
{
    return tfs__var_map_get(s->vars, container, shared_name, dtype, out, st);
}

/* ---- random generators ---------------------------------------------------------------------- */

tfs_rng_table *tfs__session_rng(tfs_session *s)
{
    return s->rng;
}

/* The session holding generator i of top's enumeration (its own, then each prepared function's
 * body in library order) and the index within it; NULL when i is out of range. */
static tfs_session *rng_owner(const tfs_session *top, int i, int *fn, int *local)
{
    *fn = -1;
    if (i < 0)
        return NULL;
    int n = tfs__rng_table_count(top->rng);
    if (i < n) {
        *local = i;
        return (tfs_session *)top;
    }
    i -= n;
    for (int f = 0; top->fns && f < top->graph->n_funcs; f++) {
        tfs_session *sub = top->fns[f].sess;
        n = tfs__rng_table_count(sub ? sub->rng : NULL);
        if (i < n) {
            *fn = f;
            *local = i;
            return sub;
        }
        i -= n;
    }
    return NULL;
}

int tfs_session_rng_state_count(const tfs_session *s)
{
    const tfs_session *top = s->top;
    int n = tfs__rng_table_count(top->rng);
    for (int f = 0; top->fns && f < top->graph->n_funcs; f++)
        n += tfs__rng_table_count(top->fns[f].sess ? top->fns[f].sess->rng : NULL);
    return n;
}

enum tfs_code tfs_session_rng_state_get(tfs_session *s, int i, const char **function,
                                        const char **node, tfs_rng_state *state, tfs_status *st)
{
    int fn, local;
    tfs_session *owner = rng_owner(s->top, i, &fn, &local);
    if (!owner)
        return TFS_ERR(st, TFS_OUT_OF_RANGE, "random generator %d is outside [0, %d)", i,
                       tfs_session_rng_state_count(s));
    tfs_philox p;
    tfs__rng_table_get(owner->rng, local, &p);
    if (function)
        *function = fn < 0 ? NULL : s->top->graph->funcs[fn].name;
    if (node)
        *node = owner->graph->nodes[tfs__rng_table_node(owner->rng, local)].name;
    state->key = (uint64_t)p.key[1] << 32 | p.key[0];
    state->counter_lo = (uint64_t)p.ctr[1] << 32 | p.ctr[0];
    state->counter_hi = (uint64_t)p.ctr[3] << 32 | p.ctr[2];
    tfs_status_clear(st);
    return TFS_OK;
}

int tfs_session_rng_state_find(const tfs_session *s, const char *function, const char *node)
{
    int n = tfs_session_rng_state_count(s);
    for (int i = 0; node && i < n; i++) {
        int fn, local;
        const tfs_session *owner = rng_owner(s->top, i, &fn, &local);
        const char *fname = fn < 0 ? NULL : s->top->graph->funcs[fn].name;
        if ((function == NULL) != (fname == NULL) || (function && strcmp(function, fname) != 0))
            continue;
        if (!strcmp(owner->graph->nodes[tfs__rng_table_node(owner->rng, local)].name, node))
            return i;
    }
    return -1;
}

enum tfs_code tfs_session_rng_state_set(tfs_session *s, int i, const tfs_rng_state *state,
                                        tfs_status *st)
{
    int fn, local;
    tfs_session *owner = rng_owner(s->top, i, &fn, &local);
    if (!owner)
        return TFS_ERR(st, TFS_OUT_OF_RANGE, "random generator %d is outside [0, %d)", i,
                       tfs_session_rng_state_count(s));
    tfs_philox p = {
        .key = {(uint32_t)state->key, (uint32_t)(state->key >> 32)},
        .ctr = {(uint32_t)state->counter_lo, (uint32_t)(state->counter_lo >> 32),
                (uint32_t)state->counter_hi, (uint32_t)(state->counter_hi >> 32)},
    };
    tfs__rng_table_set(owner->rng, local, &p);
    tfs_status_clear(st);
    return TFS_OK;
}
