/* Sessions on a device (backend-impl.h): choosing a session's device, placing a run plan's nodes
 * on the device or the CPU, and executing placed plans. A session without a device never comes
 * here (session.c tests p->gpu once per run).
 *
 * DESIGN. Placement is per run plan, made once when the plan is prepared: a node runs on the
 * device when the backend supports its op and attrs, or (Identity, Reshape) when its input 0 is
 * produced there. A value therefore lives where its producer ran (fed values on the host), known
 * before the run. When a consumer runs on the other side, the run makes one copy of the value
 * (state.alt[slot]) and every consumer on that side shares it; the copy goes with the value when
 * its last use is done. A Const's value is uploaded once per process and kept on the device
 * (the backend's constants), so weights cross the bus on the first run only. Fetches come back to
 * the host. A whole run holds one executor of the backend (its stream and handles), and its end
 * synchronizes the stream, so an asynchronous device error still fails that run.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/session-impl.h"

#define LOG_MODULE "runtime"

struct tfs_gpu_plan {
    unsigned char *on_dev;      /* [n_order] the step runs on the device */
    unsigned      *host_mask;   /* [n_order] inputs a device step reads on the host */
    unsigned char *slot_dev;    /* [n_slots] the value lives on the device */
};

/* ---- choosing the device ---------------------------------------------------------------------- */

enum tfs_code tfs__session_device(const tfs_graph *g, const tfs_session_opts *opts,
                                  tfs_backend **out, tfs_status *st)
{
    *out = NULL;
    enum tfs_device dev = opts ? opts->device : TFS_DEVICE_CPU;
    int id = opts ? opts->gpu_id : 0;
    if (dev == TFS_DEVICE_SERVING) {
        tfs_device_opts d;
        tfs__device_settings(&d);
        dev = d.device;
        id = d.gpu_id;
    }
    if (dev == TFS_DEVICE_CPU)
        return TFS_OK;
    if (dev != TFS_DEVICE_AUTO && dev != TFS_DEVICE_GPU)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "session device %d is not cpu, auto or gpu",
                       (int)dev);
    const char *how = dev == TFS_DEVICE_AUTO ? "auto" : "requested";
    tfs_backend *b = NULL;
    tfs_status bst;
    tfs_status_clear(&bst);
    if (tfs__backend_gpu(id, &b, &bst) != TFS_OK) {
        if (dev == TFS_DEVICE_GPU)
            return TFS_ERR(st, bst.code, "device gpu:%d: %s", id, bst.msg);
        /* Said once per process (it is the same for every model); later sessions at DEBUG. */
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            TFS_LOG_INFO(LOG_MODULE, "executor: cpu (device auto): %s", bst.msg);
        else
            TFS_LOG_DEBUG(LOG_MODULE, "executor: cpu (device auto): %s", bst.msg);
        return TFS_OK;
    }
    int n_dev = 0, n_ops = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tfs_node *n = &g->nodes[i];
        if (!n->op || n->op == &tfs__ops[TFS_OP_CONST] ||
            n->op == &tfs__ops[TFS_OP_PLACEHOLDER] || n->op == &tfs__ops[TFS_OP_NO_OP])
            continue;
        n_ops++;
        n_dev += b->iface->supports_op(b, n) == TFS_PLACE_DEVICE;
    }
    if (n_dev == 0) {
        TFS_LOG_INFO(LOG_MODULE, "executor: cpu (device %s): none of the graph's %d ops runs "
                     "on %s", how, n_ops, b->iface->name(b));
        if (dev == TFS_DEVICE_AUTO)
            return TFS_OK;
    } else {
        TFS_LOG_INFO(LOG_MODULE, "executor: %s (device %s): %d of the graph's %d ops run there, "
                     "the rest on the CPU", b->iface->name(b), how, n_dev, n_ops);
    }
    *out = b;
    return TFS_OK;
}

/* ---- placement -------------------------------------------------------------------------------- */

void tfs__plan_place_free(run_plan *p)
{
    if (!p->gpu)
        return;
    tfs_free(p->gpu->on_dev);
    tfs_free(p->gpu->host_mask);
    tfs_free(p->gpu->slot_dev);
    tfs_free(p->gpu);
    p->gpu = NULL;
}

enum tfs_code tfs__plan_place(const tfs_session *s, run_plan *p, tfs_status *st)
{
    tfs_backend *b = s->gpu;
    struct tfs_gpu_plan *gp = tfs_calloc(1, sizeof *gp);
    if (!gp)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory placing a run");
    p->gpu = gp;
    gp->on_dev = tfs_calloc((size_t)p->n_order + 1, 1);
    gp->host_mask = tfs_calloc((size_t)p->n_order + 1, sizeof *gp->host_mask);
    gp->slot_dev = tfs_calloc((size_t)s->n_slots + 1, 1);
    if (!gp->on_dev || !gp->host_mask || !gp->slot_dev) {
        tfs__plan_place_free(p);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory placing a run");
    }
    int n_dev = 0;
    for (int k = 0; k < p->n_order; k++) {
        int id = p->order[k];
        const tfs_node *n = &s->graph->nodes[id];
        enum tfs_placement pl = n->op ? b->iface->supports_op(b, n) : TFS_PLACE_CPU;
        if (pl == TFS_PLACE_FOLLOW)
            pl = n->n_inputs > 0 && gp->slot_dev[edge_slot(s, n->inputs[0])] ? TFS_PLACE_DEVICE
                                                                           : TFS_PLACE_CPU;
        if (pl != TFS_PLACE_DEVICE)
            continue;
        n_dev++;
        gp->on_dev[k] = 1;
        gp->host_mask[k] = b->iface->host_inputs(b, n);
        for (int j = 0; j < s->slot_count[id]; j++) {
            int slot = s->slot_base[id] + j;
            gp->slot_dev[slot] = p->feed_of[slot] < 0;   /* a fed value is on the host */
        }
    }
    if (n_dev == 0)
        tfs__plan_place_free(p);   /* an all-CPU plan runs as if there were no device */
    return TFS_OK;
}

/* ---- execution -------------------------------------------------------------------------------- */

static void slot_release_alt(run_state *r, int slot)
{
    if (--r->remaining[slot] == 0) {
        tfs_tensor_unref(r->vals[slot]);
        tfs_tensor_unref(r->alt[slot]);
        r->vals[slot] = r->alt[slot] = NULL;
    }
}

/* t (the value of `slot`, which lives on the device when on_dev) as the other side needs it:
 * the run's copy in r->alt[slot], made on first use. */
static enum tfs_code cross(tfs_session *s, const run_plan *p, run_state *r, void *exec,
                           int slot, bool on_dev, tfs_tensor **t, tfs_status *st)
{
    tfs_backend *b = s->gpu;
    if (!r->alt[slot]) {
        /* A Const's value may be kept on the device; a value fed in its place may not (the
         * caller may reuse the buffer). */
        const tfs_node *prod = &s->graph->nodes[s->slot_owner[slot]];
        bool constant = prod->op == &tfs__ops[TFS_OP_CONST] && p->feed_of[slot] < 0;
        enum tfs_code rc = on_dev ? b->iface->download(b, exec, *t, &r->alt[slot], st)
                                  : b->iface->upload(b, exec, *t, constant, &r->alt[slot], st);
        if (rc != TFS_OK)
            return rc;
    }
    *t = r->alt[slot];
    return TFS_OK;
}

/* run_node (session.c) for a placed plan: inputs crossed to the step's side, the device kernel
 * for device steps. */
static enum tfs_code run_node_gpu(tfs_session *s, const run_plan *p, run_state *r, int step,
                                  tfs_mem_run *mem, void *exec, tfs_status *st)
{
    const struct tfs_gpu_plan *gp = p->gpu;
    tfs_backend *b = s->gpu;
    int id = p->order[step];
    const tfs_node *n = &s->graph->nodes[id];
    bool dev = gp->on_dev[step];
    unsigned host_mask = gp->host_mask[step];
    bool keep_refs = n->op->flags & TFS_OPF_REF_INPUTS;
    enum tfs_code rc = TFS_OK;
    int n_out = s->slot_count[id];
    for (int i = 0; i < n->n_inputs; i++) {
        int slot = edge_slot(s, n->inputs[i]);
        tfs_tensor *t = r->vals[slot];
        bool want_dev = dev && !(i < 32 && (host_mask >> i & 1u));
        if (!t) {
            rc = TFS_ERR(st, TFS_INTERNAL, "node '%s': input %d (%s) has no value", n->name, i,
                         n->text_inputs[i]);
            goto done;
        }
        if (is_ref_dtype(t->dtype) && !keep_refs) {   /* a variable: its value is on the host */
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
            if (want_dev) {
                tfs_tensor *d = NULL;
                if ((rc = b->iface->upload(b, exec, r->derefs[i], false, &d, st)) != TFS_OK)
                    goto done;
                tfs_tensor_unref(r->derefs[i]);
                r->derefs[i] = d;
            }
            t = r->derefs[i];
        } else if (want_dev != (bool)gp->slot_dev[slot]) {
            if ((rc = cross(s, p, r, exec, slot, gp->slot_dev[slot], &t, st)) != TFS_OK) {
                tfs_status_prefix(st, "node '%s' input %d", n->name, i);
                goto done;
            }
        }
        r->in[i] = t;
    }
    for (int j = 0; j < n_out; j++)
        r->out[j] = NULL;
    tfs_kernel_ctx k = {
        .sess = s, .graph = s->graph, .node = n,
        .in = r->in, .n_in = n->n_inputs, .out = r->out, .n_out = n_out,
        .mem = mem->cache && !dev ? mem : NULL, .mem_out0 = p->out_base[step],
        .exec = dev ? exec : NULL,
    };
    tfs_kernel_fn kernel = n->op->kernel;
    if (dev) {
        kernel = b->kernels[n->op - tfs__ops];
        b->iface->exec_node(exec, n);
    }
    if (st)
        tfs_status_clear(st);
    rc = kernel(&k, st);
    if (rc != TFS_OK) {
        tfs__session_kernel_error(n, st, rc);
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
        if (p->feed_of[slot] >= 0 || r->remaining[slot] == 0) {
            tfs_tensor_unref(r->out[j]);
        } else {
            r->vals[slot] = r->out[j];
        }
        r->out[j] = NULL;
    }
    for (int i = 0; i < n->n_inputs; i++)
        slot_release_alt(r, edge_slot(s, n->inputs[i]));
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

enum tfs_code tfs__plan_execute_gpu(tfs_session *s, run_plan *p, const tfs_feed *feeds,
                                    tfs_tensor **outputs, tfs_status *st)
{
    tfs_backend *b = s->gpu;
    void *exec = NULL;
    enum tfs_code rc = b->iface->exec_begin(b, &exec, st);
    if (rc != TFS_OK)
        return rc;
    run_state *rp = tfs__run_state_get(s, p);
    if (!rp) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a graph");
        return b->iface->exec_end(b, exec, rc, st);
    }
    run_state r = *rp;
    tfs_mem_run mem;
    tfs__mem_run_begin(&mem, p->mem, feeds, p->n_feeds);
    memcpy(r.remaining, p->uses, (size_t)s->n_slots * sizeof(int));
    for (int i = 0; i < p->n_feeds; i++)
        if (r.remaining[p->feed_slot[i]] > 0)
            r.vals[p->feed_slot[i]] = tfs_tensor_ref(feeds[i].tensor);

    for (int k = 0; k < p->n_order; k++) {
        if (mem.step)
            atomic_store_explicit(mem.step, k, memory_order_relaxed);
        if ((rc = tfs__run_check_deadline(s->graph, p->order[k], st)) != TFS_OK ||
            (rc = run_node_gpu(s, p, &r, k, &mem, exec, st)) != TFS_OK)
            goto done;
    }
    for (int i = 0; i < p->n_fetches; i++) {
        int slot = p->fetch_slot[i];
        tfs_tensor *t = r.vals[slot];
        if (!t) {
            rc = TFS_ERR(st, TFS_INTERNAL, "fetch %d has no value", i);
            goto done;
        }
        if (p->gpu->slot_dev[slot]) {
            if ((rc = cross(s, p, &r, exec, slot, true, &t, st)) != TFS_OK)
                goto done;
            outputs[i] = tfs_tensor_ref(t);
        } else if (is_ref_dtype(t->dtype)) {
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
        slot_release_alt(&r, slot);
    }
done:
    for (int i = 0; i < s->n_slots; i++) {
        tfs_tensor_unref(r.vals[i]);
        tfs_tensor_unref(r.alt[i]);
        r.vals[i] = r.alt[i] = NULL;
    }
    tfs__mem_run_end(&mem, rc == TFS_OK);
    /* After every device tensor of the run is released: they return to the pool here. */
    rc = b->iface->exec_end(b, exec, rc, st);
    if (rc != TFS_OK && outputs) {
        for (int i = 0; i < p->n_fetches; i++) {
            tfs_tensor_unref(outputs[i]);
            outputs[i] = NULL;
        }
    }
    tfs__run_state_put(p, rp);
    return rc;
}
