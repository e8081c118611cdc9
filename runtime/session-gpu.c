/* Sessions on a device (backend-impl.h): choosing a session's device, placing a run plan's nodes
 * on the device or the CPU, and the device side of a placed plan's run: the hooks (session-impl.h)
 * that session.c's one step loop calls where a step's side matters. A run of a plan without
 * placement never comes here.
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

/* ---- the device side of a run ---------------------------------------------------------------- */

enum tfs_code tfs__run_device_begin(const tfs_session *s, const run_plan *p, run_device *d,
                                    tfs_status *st)
{
    d->b = s->gpu;
    d->gp = p->gpu;
    d->exec = NULL;
    return d->b->iface->exec_begin(d->b, &d->exec, st);
}

enum tfs_code tfs__run_device_end(run_device *d, enum tfs_code run_rc, tfs_status *st)
{
    return d->b->iface->exec_end(d->b, d->exec, run_rc, st);
}

/* t (the value of `slot`, which lives on the device when on_dev) as the other side needs it:
 * the run's copy in r->alt[slot], made on first use. */
static enum tfs_code cross(const tfs_session *s, const run_plan *p, const run_device *d,
                           run_state *r, int slot, bool on_dev, tfs_tensor **t, tfs_status *st)
{
    tfs_backend *b = d->b;
    if (!r->alt[slot]) {
        /* A Const's value may be kept on the device; a value fed in its place may not (the
         * caller may reuse the buffer). */
        const tfs_node *prod = &s->graph->nodes[s->slot_owner[slot]];
        bool constant = prod->op == &tfs__ops[TFS_OP_CONST] && p->feed_of[slot] < 0;
        enum tfs_code rc = on_dev ? b->iface->download(b, d->exec, *t, &r->alt[slot], st)
                                  : b->iface->upload(b, d->exec, *t, constant, &r->alt[slot], st);
        if (rc != TFS_OK)
            return rc;
    }
    *t = r->alt[slot];
    return TFS_OK;
}

enum tfs_code tfs__run_device_input(const tfs_session *s, const run_plan *p, const run_device *d,
                                    run_state *r, int step, int i, int slot, bool from_var,
                                    tfs_tensor **t, tfs_status *st)
{
    const tfs_node *n = &s->graph->nodes[p->order[step]];
    bool want_dev = d->gp->on_dev[step] && !(i < 32 && (d->gp->host_mask[step] >> i & 1u));
    if (from_var) {   /* a variable's value is on the host; the step owns it in r->derefs[i] */
        if (!want_dev)
            return TFS_OK;
        tfs_tensor *dev = NULL;
        enum tfs_code rc = d->b->iface->upload(d->b, d->exec, r->derefs[i], false, &dev, st);
        if (rc != TFS_OK)
            return rc;
        tfs_tensor_unref(r->derefs[i]);
        *t = r->derefs[i] = dev;
        return TFS_OK;
    }
    if (want_dev == (bool)d->gp->slot_dev[slot])
        return TFS_OK;
    enum tfs_code rc = cross(s, p, d, r, slot, d->gp->slot_dev[slot], t, st);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "node '%s' input %d", n->name, i);
    return rc;
}

enum tfs_code tfs__run_device_kernel(const run_device *d, int step, tfs_kernel_ctx *k,
                                     tfs_status *st)
{
    if (!d->gp->on_dev[step])
        return k->node->op->kernel(k, st);
    /* Device values are the backend's: no memory plan, and no host input to take over. */
    k->mem = NULL;
    k->exec = d->exec;
    k->plan = NULL;
    k->run = NULL;
    d->b->iface->exec_node(d->exec, k->node);
    return d->b->kernels[k->node->op - tfs__ops](k, st);
}

enum tfs_code tfs__run_device_fetch(const tfs_session *s, const run_plan *p, const run_device *d,
                                    run_state *r, int slot, tfs_tensor **t, tfs_status *st)
{
    if (!d->gp->slot_dev[slot])
        return TFS_OK;
    return cross(s, p, d, r, slot, true, t, st);
}
