/* The loader's side of dynamic batching: one tfs_batcher per loader (--enable_batching), one
 * tfs_batch_queue per (version, signature) whose run callback runs that signature on that version,
 * and the two run entry points (tfs_servable_run, tfs_servable_run_async).
 *
 * DESIGN. A queue is created on the first request of its signature, under the version's own
 * mutex, and lives as long as the version: every queued task holds a reference on the servable,
 * dropped just before its done callback runs, so the servable (and its queues) can only be freed
 * once no task of it is pending. Freeing a queue waits for its batch threads, so a servable whose
 * last reference goes on a batch thread is freed by a load thread instead (lifecycle.c).
 *
 * Which signatures batch: TF Serving's BatchingSession batches every signature and refuses inputs
 * without a shared dim 0 at run time; we batch a signature only when that can work, i.e. every
 * input and output has unknown rank or a rank >= 1 with an unknown dim 0, and the request gives
 * every input (defaults are per signature, not per row). Other signatures and requests run on the
 * calling thread, unbatched, as TF Serving runs a Run() that matches no batching signature.
 *
 * Timing for the response headers: the run callback notes the start and end of its batch in
 * thread-locals; the batcher calls the done callbacks of that batch on the same thread right after
 * (batching.h), so the done wrapper reads them there.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "loader/loader-impl.h"
#include "runtime/alloc.h"

#define BATCH_LOG "batching"

tfs_batching_params tfs_batching_params_default(void)
{
    return (tfs_batching_params){.max_batch_size = 1000, .batch_timeout_micros = 0,
                                 .max_enqueued_batches = 10, .num_batch_threads = 0,
                                 .scheduler = TFS_BATCH_SCHEDULER_ADAPTIVE};
}

bool tfs_loader_batching(const tfs_loader *l)
{
    return l && l->batcher;
}

static tfs_batch_queue_opts queue_opts(const tfs_batching_params *p)
{
    tfs_batch_queue_opts o = tfs_batch_queue_opts_default();
    o.max_batch_size = p->max_batch_size;
    o.batch_timeout_micros = p->batch_timeout_micros;
    o.max_enqueued_batches = p->max_enqueued_batches;
    o.n_allowed_batch_sizes = p->n_allowed_batch_sizes;
    o.allowed_batch_sizes = p->allowed_batch_sizes;
    o.pad_variable_length_inputs = p->pad_variable_length_inputs;
    o.enable_large_batch_splitting = p->enable_large_batch_splitting;
    o.max_execution_batch_size = p->max_execution_batch_size;
    return o;
}

static enum tfs_code run_batch(void *ctx, const tfs_named_tensor *inputs, int n_inputs,
                               int64_t deadline_ns, tfs_tensor **outputs, int n_outputs,
                               tfs_status *st);

/* Checks params the way a queue would, with a throwaway queue on the batcher. */
static enum tfs_code params_check(tfs_loader *l, const tfs_batching_params *p, tfs_status *st)
{
    if (p->n_allowed_batch_sizes < 0 || p->n_allowed_batch_sizes > TFS_BATCHING_MAX_ALLOWED)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "allowed_batch_sizes has more than %d entries",
                       TFS_BATCHING_MAX_ALLOWED);
    tfs_batch_queue_opts o = queue_opts(p);
    tfs_batch_queue     *q = NULL;
    static int           dummy;
    enum tfs_code        rc = tfs_batch_queue_new(l->batcher, &o, run_batch, &dummy, &q, st);
    tfs_batch_queue_free(q);
    return rc;
}

enum tfs_code tfs__batching_start(tfs_loader *l, tfs_status *st)
{
    if (!l->opts.enable_batching)
        return TFS_OK;
    tfs_batcher_opts bo = tfs_batcher_opts_default();
    if (l->opts.batching.num_batch_threads < 0 || l->opts.batching.num_batch_threads > 1024)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "num_batch_threads %lld is not in [0, 1024]",
                       (long long)l->opts.batching.num_batch_threads);
    bo.num_batch_threads = (int)l->opts.batching.num_batch_threads;
    bo.scheduler = l->opts.batching.scheduler;
    enum tfs_code rc = tfs_batcher_new(&bo, &l->batcher, st);
    if (rc == TFS_OK && (rc = params_check(l, &l->opts.batching, st)) != TFS_OK)
        tfs_status_prefix(st, "batching parameters");
    return rc;
}

void tfs__batching_stop(tfs_loader *l)
{
    tfs_batcher_free(l->batcher);
    l->batcher = NULL;
}

enum tfs_code tfs__servable_batch_new(tfs_loader *l, const char *dir, const tfs_savedmodel *model,
                                      tfs__servable_batch **out, tfs_status *st)
{
    *out = NULL;
    if (!l->batcher)
        return TFS_OK;
    tfs__servable_batch *b = tfs_calloc(1, sizeof *b);
    int                  n = tfs_savedmodel_signature_count(model);
    if (!b || !(b->sq = tfs_calloc((size_t)(n > 0 ? n : 1), sizeof *b->sq))) {
        tfs_free(b);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory setting up batching");
    }
    b->n = n;
    for (int i = 0; i < n; i++) {
        b->sq[i].model = model;
        b->sq[i].loader = l;
        b->sq[i].sig = tfs_savedmodel_signature_at(model, i);
        b->sq[i].batchable = -1;
    }
    b->params = l->opts.batching;
    pthread_mutex_init(&b->mu, NULL);
    enum tfs_code rc = TFS_OK;
    if (l->opts.per_model_batching) {
        bool found = false;
        rc = l->opts.per_model_batching(l->opts.per_model_batching_ctx, dir, &b->params, &found,
                                        st);
        if (rc == TFS_OK && found && (rc = params_check(l, &b->params, st)) != TFS_OK)
            tfs_status_prefix(st, "%s/batching_params.pbtxt", dir);
        if (rc == TFS_OK && found)
            TFS_LOG_INFO(BATCH_LOG, "%s: per-model batching parameters (max_batch_size %lld, "
                         "batch_timeout_micros %lld)", dir, (long long)b->params.max_batch_size,
                         (long long)b->params.batch_timeout_micros);
    }
    if (rc != TFS_OK) {
        tfs__servable_batch_free(b);
        return rc;
    }
    *out = b;
    return TFS_OK;
}

bool tfs__servable_batch_busy(const tfs__servable_batch *b)
{
    for (int i = 0; b && i < b->n; i++)
        if (b->sq[i].q)
            return true;
    return false;
}

void tfs__servable_batch_free(tfs__servable_batch *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->n; i++)
        tfs_batch_queue_free(b->sq[i].q);
    tfs_free(b->sq);
    pthread_mutex_destroy(&b->mu);
    tfs_free(b);
}

/* ---- running for a request ------------------------------------------------------------------ */

/* Every run made for a request: file-reading ops refused unless allowed (a client could name the
 * path), and, with --enforce_session_run_timeout, stopped at the request's deadline (0: none;
 * tfs_batch_now_ns is CLOCK_MONOTONIC, the runtime's clock) rather than burning the CPU after the
 * client has gone (a request can set a loop's count). */
static enum tfs_code request_run(const tfs_loader *l, const tfs_savedmodel *m,
                                 const tfs_signature *sig, const tfs_named_tensor *inputs,
                                 int n_inputs, int64_t deadline_ns, tfs_tensor **outputs,
                                 tfs_status *st)
{
    if (l->opts.disable_session_run_timeout)
        deadline_ns = 0;
    int64_t before = tfs_session_set_thread_deadline(deadline_ns);
    bool files = tfs_session_set_thread_file_ops(l->opts.allow_file_ops_at_request_time);
    enum tfs_code rc = tfs_savedmodel_run(m, sig, inputs, n_inputs, outputs, st);
    tfs_session_set_thread_file_ops(files);
    tfs_session_set_thread_deadline(before);
    return rc;
}

/* ---- queues --------------------------------------------------------------------------------- */

/* Where the done callbacks of a batch find its timing (see the file comment). */
static _Thread_local int64_t tls_run_start, tls_run_end, tls_run_rows;

static enum tfs_code run_batch(void *ctx, const tfs_named_tensor *inputs, int n_inputs,
                               int64_t deadline_ns, tfs_tensor **outputs, int n_outputs,
                               tfs_status *st)
{
    const tfs__sig_queue *sq = ctx;
    (void)n_outputs;
    tls_run_start = tfs_batch_now_ns();
    tls_run_rows = n_inputs > 0 && inputs[0].tensor->rank > 0 ? inputs[0].tensor->dims[0] : 0;
    enum tfs_code rc = request_run(sq->loader, sq->model, sq->sig, inputs, n_inputs, deadline_ns,
                                   outputs, st);
    tls_run_end = tfs_batch_now_ns();
    return rc;
}

/* Shape may carry a batch dimension: unknown rank, or rank >= 1 with dim 0 unknown. */
static bool batch_dim_ok(const tfs_shape *s)
{
    return s->rank < 0 || (s->rank >= 1 && s->dims[0] < 0);
}

static bool sig_batchable(const tfs_signature *sig)
{
    if (sig->n_inputs < 1 || sig->n_outputs < 1 || sig->usable.code != TFS_OK)
        return false;
    for (int i = 0; i < sig->n_inputs; i++)
        if (!batch_dim_ok(&sig->inputs[i].shape))
            return false;
    for (int i = 0; i < sig->n_outputs; i++)
        if (!batch_dim_ok(&sig->outputs[i].shape))
            return false;
    return true;
}

/* The queue of sig on s, created on first use; NULL when sig does not batch (or out of memory,
 * which then runs unbatched too). */
static tfs_batch_queue *queue_for(tfs_servable *s, const tfs_signature *sig)
{
    tfs__servable_batch *b = s->batch;
    tfs__sig_queue      *sq = NULL;
    for (int i = 0; b && i < b->n && !sq; i++)
        if (b->sq[i].sig == sig)
            sq = &b->sq[i];
    if (!sq)
        return NULL;
    pthread_mutex_lock(&b->mu);
    if (sq->batchable < 0)
        sq->batchable = sig_batchable(sig);
    if (sq->batchable && !sq->q) {
        char                 name[256];
        const char          *outs[64];
        tfs_batch_queue_opts o = queue_opts(&b->params);
        tfs_status           st;
        snprintf(name, sizeof name, "%s:%lld:%s", s->name, (long long)s->version, sig->key);
        o.name = name;
        o.n_outputs = sig->n_outputs;
        if (sig->n_outputs <= 64) {
            for (int i = 0; i < sig->n_outputs; i++)
                outs[i] = sig->outputs[i].alias;
            o.output_names = outs;
        }
        if (tfs_batch_queue_new(s->loader->batcher, &o, run_batch, sq, &sq->q, &st) != TFS_OK) {
            TFS_LOG_WARN(BATCH_LOG, "%s runs unbatched: %s", name, st.msg);
            sq->batchable = 0;
        }
    }
    tfs_batch_queue *q = sq->q;
    pthread_mutex_unlock(&b->mu);
    return q;
}

/* ---- runs ----------------------------------------------------------------------------------- */

struct tfs_servable_task {
    tfs_batch_task *bt;
};

typedef struct run_call {
    tfs_servable        *s;
    tfs_servable_done_fn done;
    void                *ctx;
    int64_t              submit_ns;
} run_call;

static void batch_done(void *ctx, enum tfs_code code, const tfs_status *st, tfs_tensor **outputs,
                       int n_outputs)
{
    run_call     *c = ctx;
    int64_t       now = tfs_batch_now_ns();
    tfs_run_times t = {0};
    if (code == TFS_OK) {
        /* This thread ran the batch just before (batching.h): its timing is in the locals. */
        t.queue_us = (tls_run_start - c->submit_ns) / 1000;
        t.compute_us = (tls_run_end - tls_run_start) / 1000;
        t.batch_size = tls_run_rows;
    } else {
        t.queue_us = (now - c->submit_ns) / 1000;
    }
    if (t.queue_us < 0)
        t.queue_us = 0;
    /* The task's handle goes first: the callee may drop the last one of its own. */
    tfs__servable_unref(c->s);
    c->done(c->ctx, code, st, outputs, n_outputs, &t);
    tfs_free(c);
}

static enum tfs_code run_here(tfs_servable *s, const tfs_signature *sig,
                              const tfs_named_tensor *inputs, int n_inputs, int64_t deadline_ns,
                              tfs_servable_done_fn done, void *ctx, tfs_status *st)
{
    int           n = sig->n_outputs;
    tfs_tensor   *small[8] = {NULL};   /* every request comes here: no allocation when small */
    tfs_tensor  **outs = n <= 8 ? small : tfs_calloc((size_t)n, sizeof *outs);
    tfs_run_times t = {0};
    enum tfs_code rc;
    int64_t       t0 = tfs_batch_now_ns();
    if (!outs)
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running signature '%s'",
                     sig->key);
    else if (deadline_ns > 0 && t0 > deadline_ns)
        rc = TFS_ERR(st, TFS_DEADLINE_EXCEEDED, "Deadline Exceeded");
    else
        rc = request_run(s->loader, s->model, sig, inputs, n_inputs, deadline_ns, outs, st);
    if (rc == TFS_OK) {
        t.compute_us = (tfs_batch_now_ns() - t0) / 1000;
        t.batch_size = n_inputs > 0 && inputs[0].tensor->rank > 0
                           ? inputs[0].tensor->dims[0] : 0;
    }
    done(ctx, rc, st, rc == TFS_OK ? outs : NULL, rc == TFS_OK ? n : 0, &t);
    if (rc != TFS_OK && outs)
        for (int i = 0; i < n; i++)
            tfs_tensor_unref(outs[i]);
    if (outs != small)
        tfs_free(outs);
    return rc;
}

enum tfs_code tfs_servable_run_async(tfs_servable *s, const tfs_signature *sig,
                                     const tfs_named_tensor *inputs, int n_inputs,
                                     int64_t deadline_ns, tfs_servable_done_fn done, void *ctx,
                                     tfs_servable_task **task, tfs_status *st)
{
    tfs_status       local;
    tfs_batch_queue *q = NULL;
    if (!st)
        st = &local;
    if (task)
        *task = NULL;
    if (s->batch && n_inputs == sig->n_inputs)
        q = queue_for(s, sig);
    if (!q)
        return run_here(s, sig, inputs, n_inputs, deadline_ns, done, ctx, st);

    run_call          *c = tfs_calloc(1, sizeof *c);
    tfs_servable_task *h = task ? tfs_calloc(1, sizeof *h) : NULL;
    if (!c || (task && !h)) {
        tfs_free(c);
        tfs_free(h);
        enum tfs_code rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory queueing a run");
        tfs_run_times t = {0};
        done(ctx, rc, st, NULL, 0, &t);
        return rc;
    }
    atomic_fetch_add(&s->refs, 1);
    c->s = s;
    c->done = done;
    c->ctx = ctx;
    c->submit_ns = tfs_batch_now_ns();
    /* batch_done runs exactly once, also when the submit is refused. */
    enum tfs_code rc = tfs_batch_submit(q, inputs, n_inputs, deadline_ns, batch_done, c,
                                        h ? &h->bt : NULL, st);
    if (h && rc == TFS_OK)
        *task = h;
    else
        tfs_free(h);
    return rc;
}

bool tfs_servable_task_cancel(tfs_servable_task *t)
{
    return t && tfs_batch_cancel(t->bt);
}

void tfs_servable_task_release(tfs_servable_task *t)
{
    if (!t)
        return;
    tfs_batch_task_release(t->bt);
    tfs_free(t);
}

/* ---- synchronous run ------------------------------------------------------------------------ */

typedef struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    bool            done;
    enum tfs_code   code;
    tfs_status      st;
    tfs_tensor    **outputs;
} sync_wait;

static void sync_done(void *ctx, enum tfs_code code, const tfs_status *st, tfs_tensor **outputs,
                      int n_outputs, const tfs_run_times *t)
{
    sync_wait *w = ctx;
    (void)t;
    pthread_mutex_lock(&w->mu);
    w->code = code;
    if (st)
        w->st = *st;
    for (int i = 0; i < n_outputs; i++)
        w->outputs[i] = outputs[i];
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

enum tfs_code tfs_servable_run(const tfs_servable *s, const tfs_signature *sig,
                               const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                               tfs_status *st)
{
    if (!s->batch)
        return request_run(s->loader, s->model, sig, inputs, n_inputs, 0, outputs, st);
    sync_wait w = {.outputs = outputs};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    tfs_status_clear(&w.st);
    /* The handle is only borrowed here: the task takes its own reference. */
    tfs_servable_run_async((tfs_servable *)s, sig, inputs, n_inputs, 0, sync_done, &w, NULL, NULL);
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (st)
        *st = w.st;
    return w.code;
}

/* ---- statistics ----------------------------------------------------------------------------- */

void tfs_loader_batch_stats(tfs_loader *l, tfs_batch_stats_fn fn, void *ctx)
{
    tfs_servable **held = NULL;
    int            n = 0, cap = 0;
    pthread_mutex_lock(&l->mu);
    for (tfs_servable *s = l->batched; s; s = s->bnext)
        cap++;
    held = cap ? tfs_calloc((size_t)cap, sizeof *held) : NULL;
    for (tfs_servable *s = l->batched; held && s; s = s->bnext) {
        /* A handle only on a live servable: one whose count is 0 is being freed. */
        int r = atomic_load(&s->refs);
        while (r > 0 && !atomic_compare_exchange_weak(&s->refs, &r, r + 1)) {
        }
        if (r > 0)
            held[n++] = s;
    }
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < n; i++) {
        tfs__servable_batch *b = held[i]->batch;
        for (int k = 0; k < b->n; k++) {
            pthread_mutex_lock(&b->mu);
            tfs_batch_queue *q = b->sq[k].q;
            pthread_mutex_unlock(&b->mu);
            if (!q)
                continue;
            tfs_batch_queue_stats qs;
            tfs_batch_queue_stats_get(q, &qs);
            fn(ctx, held[i]->name, held[i]->version, b->sq[k].sig->key, &qs);
        }
        tfs__servable_unref(held[i]);
    }
    tfs_free(held);
}
