/* Lifecycle of batchers and queues (options, validation with TF Serving's messages, start, drain
 * and join) and the statistics snapshot. Batch formation and the threads' work are in batcher.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batching/batching-impl.h"

/* The histograms' bounds (batching.h), which docs/metrics.md gives for tfserve_batch_size and
 * tfserve_batch_queue_delay_seconds. Sized by their initializers, so a count in batching.h that
 * disagrees does not compile. */
const int64_t tfs_batch_size_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
const int64_t tfs_batch_delay_bounds_us[] = {100,   250,   500,    1000,   2500,   5000,
                                             10000, 25000, 50000, 100000, 250000, 1000000};

/* ---- batcher -------------------------------------------------------------------------------- */

tfs_batcher_opts tfs_batcher_opts_default(void)
{
    return (tfs_batcher_opts){.num_batch_threads = 0, .scheduler = TFS_BATCH_SCHEDULER_ADAPTIVE};
}

enum tfs_code tfs_batcher_new(const tfs_batcher_opts *opts, tfs_batcher **out, tfs_status *st)
{
    *out = NULL;
    tfs_batcher_opts o = opts ? *opts : tfs_batcher_opts_default();
    if (o.num_batch_threads < 0 || o.num_batch_threads > 1024)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "num_batch_threads must be in [1, 1024], got %d",
                       o.num_batch_threads);
    if ((unsigned)o.scheduler >= TFS_BATCH_SCHEDULER_COUNT)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "batcher: unknown scheduler %d", (int)o.scheduler);
    if (o.num_batch_threads == 0) {
        int n = tfs_runtime_cpu_count();
        o.num_batch_threads = n > 1024 ? 1024 : n;
    }
    tfs_batcher *bt = tfs_calloc(1, sizeof *bt);
    if (!bt)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batcher: out of memory");
    bt->adaptive = o.scheduler == TFS_BATCH_SCHEDULER_ADAPTIVE;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&bt->mu, NULL);
    pthread_cond_init(&bt->work, &ca);
    pthread_cond_init(&bt->idle, NULL);
    pthread_condattr_destroy(&ca);
    bt->threads = tfs_calloc((size_t)o.num_batch_threads, sizeof *bt->threads);
    if (!bt->threads) {
        tfs_batcher_free(bt);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batcher: out of memory");
    }
    for (int i = 0; i < o.num_batch_threads; i++) {
        int e = pthread_create(&bt->threads[i], NULL, tfs__batch_thread, bt);
        if (e != 0) {
            tfs_batcher_free(bt);
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batcher: cannot start batch thread %d: %s",
                           i, strerror(e));
        }
        char name[16];
        snprintf(name, sizeof name, "tfs-batch-%hu", (unsigned short)i);   /* 15 chars max */
        pthread_setname_np(bt->threads[i], name);
        bt->n_threads++;
    }
    *out = bt;
    tfs_status_clear(st);
    return TFS_OK;
}

static void queue_destroy(tfs_batch_queue *q)
{
    if (!q)
        return;
    for (int o = 0; q->output_names && o < q->n_outputs; o++)
        tfs_free(q->output_names[o]);
    tfs_free(q->output_names);
    tfs_free(q->allowed);
    tfs_free(q->name);
    tfs_free(q);
}

void tfs_batcher_free(tfs_batcher *bt)
{
    if (!bt)
        return;
    pthread_mutex_lock(&bt->mu);
    bt->stopping = true;
    pthread_cond_broadcast(&bt->work);
    pthread_mutex_unlock(&bt->mu);
    for (int i = 0; i < bt->n_threads; i++)
        pthread_join(bt->threads[i], NULL);
    /* The threads left only when no batch was waiting and, having joined, none runs. */
    while (bt->queues) {
        tfs_batch_queue *q = bt->queues;
        bt->queues = q->next;
        TFS_ASSERT(!q->head && q->running == 0);
        queue_destroy(q);
    }
    tfs_free(bt->threads);
    pthread_cond_destroy(&bt->work);
    pthread_cond_destroy(&bt->idle);
    pthread_mutex_destroy(&bt->mu);
    tfs_free(bt);
}

/* ---- queues --------------------------------------------------------------------------------- */

tfs_batch_queue_opts tfs_batch_queue_opts_default(void)
{
    return (tfs_batch_queue_opts){
        .name = "batch queue", .max_batch_size = 1000, .batch_timeout_micros = 0,
        .max_enqueued_batches = 10, .max_execution_batch_size = 0, .n_outputs = 1};
}

static enum tfs_code check_opts(const tfs_batch_queue_opts *o, int64_t capacity, tfs_status *st)
{
    if (o->max_batch_size < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "max_batch_size must be positive; got %lld",
                       (long long)o->max_batch_size);
    if (o->batch_timeout_micros < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "batch_timeout_micros must be non-negative; got %lld",
                       (long long)o->batch_timeout_micros);
    if (o->max_enqueued_batches < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "max_enqueued_batches must be positive; got %lld",
                       (long long)o->max_enqueued_batches);
    if (o->enable_large_batch_splitting && (capacity < 1 || capacity > o->max_batch_size))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "max_execution_batch_size must be in [1, max_batch_size=%lld]; got %lld",
                       (long long)o->max_batch_size, (long long)capacity);
    if (o->n_outputs < 1 || o->n_allowed_batch_sizes < 0 ||
        (o->n_allowed_batch_sizes > 0 && !o->allowed_batch_sizes))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "batch queue options: n_outputs must be positive "
                       "and allowed_batch_sizes given with its count");
    for (int i = 0; i < o->n_allowed_batch_sizes; i++) {
        int64_t a = o->allowed_batch_sizes[i];
        if (a < 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "allowed_batch_sizes entries must be positive; got %lld", (long long)a);
        if (i > 0 && a <= o->allowed_batch_sizes[i - 1])
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "allowed_batch_sizes entries must be monotonically increasing");
    }
    if (o->n_allowed_batch_sizes > 0) {
        int64_t last = o->allowed_batch_sizes[o->n_allowed_batch_sizes - 1];
        if (o->enable_large_batch_splitting && last != capacity)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Last entry in allowed_batch_sizes must be equal to "
                           "max_execution_batch_size; last entry was %lld; expected %lld",
                           (long long)last, (long long)capacity);
        if (!o->enable_large_batch_splitting && last != o->max_batch_size)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Last entry in allowed_batch_sizes must match max_batch_size; last "
                           "entry was %lld; expected %lld",
                           (long long)last, (long long)o->max_batch_size);
    }
    return TFS_OK;
}

enum tfs_code tfs_batch_queue_new(tfs_batcher *bt, const tfs_batch_queue_opts *opts,
                                  tfs_batch_run_fn run, void *ctx, tfs_batch_queue **out,
                                  tfs_status *st)
{
    *out = NULL;
    TFS_ASSERT(bt && run);
    tfs_batch_queue_opts o = opts ? *opts : tfs_batch_queue_opts_default();
    int64_t capacity = o.enable_large_batch_splitting && o.max_execution_batch_size > 0
                           ? o.max_execution_batch_size : o.max_batch_size;
    enum tfs_code rc = check_opts(&o, capacity, st);
    if (rc != TFS_OK)
        return rc;
    tfs_batch_queue *q = tfs_calloc(1, sizeof *q);
    if (!q)
        goto oom;
    q->bt = bt;
    q->name = tfs_strdup(o.name ? o.name : "batch queue");
    q->output_names = tfs_calloc((size_t)o.n_outputs, sizeof *q->output_names);
    q->allowed = tfs_calloc((size_t)o.n_allowed_batch_sizes + 1, sizeof *q->allowed);
    if (!q->name || !q->output_names || !q->allowed)
        goto oom;
    q->n_outputs = o.n_outputs;
    for (int i = 0; i < o.n_outputs; i++) {
        char num[24];
        snprintf(num, sizeof num, "%d", i);
        if (!(q->output_names[i] = tfs_strdup(o.output_names && o.output_names[i]
                                                  ? o.output_names[i] : num)))
            goto oom;
    }
    if (o.n_allowed_batch_sizes > 0)
        memcpy(q->allowed, o.allowed_batch_sizes,
               sizeof *q->allowed * (size_t)o.n_allowed_batch_sizes);
    q->n_allowed = o.n_allowed_batch_sizes;
    q->max_batch_size = o.max_batch_size;
    q->timeout_ns = o.batch_timeout_micros * 1000;
    q->max_enqueued = o.max_enqueued_batches;
    q->capacity = capacity;
    q->pad = o.pad_variable_length_inputs;
    q->split = o.enable_large_batch_splitting;
    q->run = run;
    q->ctx = ctx;
    pthread_mutex_lock(&bt->mu);
    q->next = bt->queues;
    if (bt->queues)
        bt->queues->prev = q;
    bt->queues = q;
    pthread_mutex_unlock(&bt->mu);
    *out = q;
    tfs_status_clear(st);
    return TFS_OK;
oom:
    queue_destroy(q);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batch queue '%s': out of memory",
                   o.name ? o.name : "");
}

void tfs_batch_queue_free(tfs_batch_queue *q)
{
    if (!q)
        return;
    tfs_batcher *bt = q->bt;
    pthread_mutex_lock(&bt->mu);
    q->closing = true;
    pthread_cond_broadcast(&bt->work);
    while (q->head || q->running > 0)
        pthread_cond_wait(&bt->idle, &bt->mu);
    if (q->prev) q->prev->next = q->next; else bt->queues = q->next;
    if (q->next) q->next->prev = q->prev;
    if (bt->rr == q)
        bt->rr = q->next;
    pthread_mutex_unlock(&bt->mu);
    queue_destroy(q);
}

void tfs_batch_queue_stats_get(tfs_batch_queue *q, tfs_batch_queue_stats *out)
{
    pthread_mutex_lock(&q->bt->mu);
    out->batches_run = q->c.batches_run;
    out->batches_failed = q->c.batches_failed;
    out->tasks_completed = q->c.tasks_completed;
    out->rows_run = q->c.rows_run;
    out->padding_rows = q->c.padding_rows;
    out->rejected_full = q->c.rejected_full;
    out->rejected_invalid = q->c.rejected_invalid;
    out->deadline_exceeded = q->c.deadline_exceeded;
    out->cancelled = q->c.cancelled;
    out->bytes_merged = q->c.bytes_merged;
    out->bytes_reassembled = q->c.bytes_reassembled;
    memcpy(out->batch_size_counts, q->c.size_counts, sizeof out->batch_size_counts);
    out->batch_size_sum = q->c.size_sum;
    memcpy(out->queue_delay_counts, q->c.delay_counts, sizeof out->queue_delay_counts);
    out->queue_delay_sum_us = q->c.delay_sum_us;
    out->queued_tasks = q->queued_tasks;
    out->queued_rows = q->queued_rows;
    out->queued_batches = q->n_batches;
    out->running_batches = q->running;
    pthread_mutex_unlock(&q->bt->mu);
}
