/* batching: dynamic batching of requests, TensorFlow Serving's BatchingParameters semantics.
 *
 * A tfs_batcher owns num_batch_threads threads that serve many queues. A tfs_batch_queue exists per
 * (servable, signature); its creator gives it the BatchingParameters and a run callback that
 * executes one batch (the loader passes a closure running the signature on a servable: batching
 * never knows what it runs). Front-end threads submit tasks -- named input tensors sharing a
 * leading batch dimension -- and are called back once with that task's rows of the outputs.
 * Nothing blocks while a batch forms.
 *
 *     tfs_batcher_opts bo = tfs_batcher_opts_default();          // num_batch_threads = CPUs
 *     tfs_batcher *b;  tfs_batcher_new(&bo, &b, &st);
 *     tfs_batch_queue_opts qo = tfs_batch_queue_opts_default();  // TF Serving's defaults
 *     qo.max_batch_size = 32;  qo.batch_timeout_micros = 2000;  qo.n_outputs = 1;
 *     tfs_batch_queue *q;  tfs_batch_queue_new(b, &qo, run_signature, servable, &q, &st);
 *
 *     // front-end thread: returns at once; on_done runs exactly once (maybe before this returns)
 *     tfs_named_tensor in[] = {{"x", x}};                    // x: [rows, 3]
 *     tfs_batch_task *t;
 *     tfs_batch_submit(q, in, 1, deadline_ns, on_done, call, &t, &st);
 *     ...  if (client_went_away) tfs_batch_cancel(t);
 *     tfs_batch_task_release(t);
 *
 *     static void on_done(void *call, enum tfs_code code, const tfs_status *st,
 *                         tfs_tensor **outputs, int n_outputs)
 *     { store code, st and outputs in call (the tensors are now its); wake its thread; }
 *
 *     tfs_batch_queue_free(q);   // runs what is queued, then returns
 *     tfs_batcher_free(b);
 *
 * Batch formation (TF Serving's SharedBatchScheduler + BatchingSession):
 *  - A batch closes when it holds `capacity` rows (max_batch_size; max_execution_batch_size when
 *    enable_large_batch_splitting). A task that does not fit the open batch closes it and starts a
 *    new one; a queue refuses a task with UNAVAILABLE when it would need more than
 *    max_enqueued_batches batches waiting (batches already running do not count).
 *  - When a batch that is not closed runs depends on the batcher's scheduler. ADAPTIVE (the
 *    default): a batch thread that is free takes it at once, with whatever it holds, so a request
 *    on an idle server never waits for a timer; tasks gather into batches only while every batch
 *    thread is busy, and then each batch runs as soon as a thread frees, its wait bounded by the
 *    batches ahead of it rather than by batch_timeout_micros. FIXED (TF Serving's
 *    SharedBatchScheduler): it runs once its first task has waited batch_timeout_micros (0: as
 *    soon as a batch thread is free), even while threads are idle.
 *  - Tasks are batched together only when they have the same input names, dtypes, ranks and
 *    non-batch dims. With pad_variable_length_inputs the non-batch dims may differ: each
 *    task's rows are padded to the batch's largest dims with the first element of that task's
 *    tensor (TF's batching_util.cc PadTensor). A task whose rows hold no elements (a non-batch
 *    dim of 0) is never padded: it is only batched with tasks of exactly its shape.
 *  - allowed_batch_sizes: the batch is padded up to the next allowed size with copies of the first
 *    row of the last task in the batch (TF's BatchingSession::MergeInputTensors); padding rows are
 *    dropped from the outputs. A batch of zero rows (only zero-row tasks) is run unpadded.
 *  - enable_large_batch_splitting: a task larger than the room left in the open batch fills that
 *    room and continues in new batches of max_execution_batch_size rows; its outputs are
 *    reassembled in row order and its callback runs once, after its last piece, with the first
 *    error any piece met. Those new batches hold the task alone and take no later task; after one
 *    of them runs, the queue's next ready batch of other tasks goes before the task's next one,
 *    so tasks sent after a large one wait for one of its batches (per thread), not all of them.
 *  - When a batch thread takes a batch, tasks whose deadline has passed complete with
 *    DEADLINE_EXCEEDED and are not run. Inputs are concatenated along dim 0, each row copied
 *    once (a batch of one task, or of one piece of a split task, that needs no padding runs on
 *    the task's own tensors or rows of them, no copy), the run callback executes it, and every
 *    output is split back by rows as views of the batch's outputs (no copy; only a split task's
 *    pieces are copied, once, to join them). An output whose dim 0 differs from the batch size
 *    fails every task of the batch with INTERNAL naming the output; a failing run gives every task
 *    the run's status. Either way the queue carries on with its next batch.
 *  - Zero-row tasks (batch dim 0) are accepted, as in TF Serving: they join a batch of their shape
 *    without adding rows and get outputs with 0 rows.
 *
 * Threads: tfs_batch_submit, tfs_batch_cancel, tfs_batch_task_release and tfs_batch_queue_stats may
 * be called from any thread. Run callbacks run on batch threads (several at once when
 * num_batch_threads > 1, also for one queue). Done callbacks run on batch threads, or on the
 * submitting / cancelling thread as documented below; they must be short (store and wake) and may
 * submit or cancel, but must never free a queue or the batcher.
 * Ownership: input tensors are kept by reference (tfs_tensor_ref) until the task completes, so the
 * caller may drop its own references after submit returns; the caller must not write to them while
 * the task is pending. Output tensors passed to a done callback belong to the callback.
 */
#ifndef TFS_BATCHING_BATCHING_H
#define TFS_BATCHING_BATCHING_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime.h"

typedef struct tfs_batcher     tfs_batcher;
typedef struct tfs_batch_queue tfs_batch_queue;
typedef struct tfs_batch_task  tfs_batch_task;

/* ---- batcher: the batch threads ------------------------------------------------------------- */

/* When a batch that is not full runs (see "Batch formation" above). */
enum tfs_batch_scheduler {
    TFS_BATCH_SCHEDULER_ADAPTIVE = 0,   /* a free batch thread takes it at once */
    TFS_BATCH_SCHEDULER_FIXED    = 1,   /* TF Serving's: after batch_timeout_micros */
    TFS_BATCH_SCHEDULER_COUNT
};

typedef struct tfs_batcher_opts {
    int                      num_batch_threads;   /* >= 1; 0 = tfs_runtime_cpu_count() (TF's
                                                   * default) */
    enum tfs_batch_scheduler scheduler;           /* default ADAPTIVE */
} tfs_batcher_opts;

tfs_batcher_opts tfs_batcher_opts_default(void);

/* Starts the batch threads. INVALID_ARGUMENT for a negative thread count (or more than 1024) or an
 * unknown scheduler, RESOURCE_EXHAUSTED / INTERNAL when memory or threads cannot be had. Caller owns the result. */
enum tfs_code tfs_batcher_new(const tfs_batcher_opts *opts, tfs_batcher **out, tfs_status *st);

/* Runs every task still queued in any queue (as tfs_batch_queue_free does), joins the threads and
 * frees the batcher together with the queues not yet freed (their handles become invalid).
 * NULL-safe. Must not be called from a run or done callback, nor concurrently with submits. */
void tfs_batcher_free(tfs_batcher *b);

/* ---- queues: one per (servable, signature) -------------------------------------------------- */

/* Executes one batch. inputs: the batch's tensors sorted by name, dim 0 = the (padded) batch size;
 * borrowed for the call. The callback stores n_outputs new references in outputs[0..n_outputs)
 * (all NULL on entry; whatever it stored is released even when it fails). On a batch thread.
 * deadline_ns: the latest deadline of the batch's tasks (tfs_batch_now_ns's clock), or 0 when one
 * of them has none; past it no task wants the result, so the run may stop there. */
typedef enum tfs_code (*tfs_batch_run_fn)(void *ctx, const tfs_named_tensor *inputs, int n_inputs,
                                          int64_t deadline_ns, tfs_tensor **outputs, int n_outputs,
                                          tfs_status *st);

/* BatchingParameters (session_bundle_config.proto). Get one from tfs_batch_queue_opts_default():
 * unset wrapper fields keep TF Serving's defaults. */
typedef struct tfs_batch_queue_opts {
    const char    *name;                  /* for messages and logs: "model:signature"; copied */
    int64_t        max_batch_size;        /* largest task accepted, and batch size (default 1000) */
    int64_t        batch_timeout_micros;  /* wait for a batch to fill (default 0; FIXED
                                             scheduler only) */
    int64_t        max_enqueued_batches;  /* waiting batches per queue (default 10) */
    int            n_allowed_batch_sizes;
    const int64_t *allowed_batch_sizes;   /* increasing; last = max_batch_size (or
                                             max_execution_batch_size when splitting); copied */
    bool           pad_variable_length_inputs;    /* default false */
    bool           enable_large_batch_splitting;  /* default false */
    int64_t        max_execution_batch_size;      /* with splitting; 0 = max_batch_size */
    int            n_outputs;             /* outputs the run callback produces, >= 1 */
    const char *const *output_names;      /* optional, n_outputs names for messages; copied */
} tfs_batch_queue_opts;

tfs_batch_queue_opts tfs_batch_queue_opts_default(void);

/* A queue served by b's threads that runs its batches with run(ctx, ...). The options are checked
 * with TF Serving's messages (INVALID_ARGUMENT: "Last entry in allowed_batch_sizes must match
 * max_batch_size; last entry was A; expected B", non-positive sizes, decreasing allowed sizes,
 * max_execution_batch_size > max_batch_size, n_outputs < 1). `ctx` is borrowed and must outlive the
 * queue. Caller owns the result. Any thread. */
enum tfs_code tfs_batch_queue_new(tfs_batcher *b, const tfs_batch_queue_opts *opts,
                                  tfs_batch_run_fn run, void *ctx, tfs_batch_queue **out,
                                  tfs_status *st);

/* Closes the queue and waits until every task in it has completed: queued batches are run at once
 * (their timeout no longer waited for; deadlines and cancellations still apply), so no task is lost
 * and every done callback runs exactly once before this returns. Then frees the queue. NULL-safe.
 * No submit may race with or follow it; never call it from a run or done callback. */
void tfs_batch_queue_free(tfs_batch_queue *q);

/* ---- tasks ---------------------------------------------------------------------------------- */

/* Called exactly once per submitted task. code/st: the task's outcome (st borrowed for the call).
 * On TFS_OK, outputs[0..n_outputs) are the task's rows of the batch outputs: the callback owns
 * these references (the array itself is borrowed for the call). On an error outputs is NULL and
 * n_outputs 0. */
typedef void (*tfs_batch_done_fn)(void *ctx, enum tfs_code code, const tfs_status *st,
                                  tfs_tensor **outputs, int n_outputs);

/* Submits a task and returns at once. inputs[0..n_inputs): distinct names, every tensor of
 * rank >= 1 with the same dim 0 (the task's rows); names are copied and tensors kept by reference.
 * deadline_ns: CLOCK_MONOTONIC time (tfs_batch_now_ns) after which the task must not start;
 * 0 = none.
 *
 * done(done_ctx, ...) runs exactly once in every case. When the task is refused, it runs on this
 * thread before submit returns, and submit returns the same code:
 *  - INVALID_ARGUMENT: no inputs, a scalar input ("Batching Run() input tensors must have at least
 *    one dimension"), unequal dim 0 ("... must have equal 0th-dimension size"), duplicate names, or
 *    more rows than max_batch_size ("Task size N is larger than maximum input batch size M");
 *  - UNAVAILABLE: the queue would need more than max_enqueued_batches waiting batches ("The batch
 *    scheduling queue to which this task was submitted is full..."), or it is closing;
 *  - RESOURCE_EXHAUSTED: out of memory.
 * Otherwise it returns TFS_OK and done runs later on a batch thread (or in tfs_batch_cancel).
 * task_out (may be NULL): on TFS_OK a counted handle for tfs_batch_cancel that the caller must give
 * back with tfs_batch_task_release, before or after done has run; NULL on failure. */
enum tfs_code tfs_batch_submit(tfs_batch_queue *q, const tfs_named_tensor *inputs, int n_inputs,
                               int64_t deadline_ns, tfs_batch_done_fn done, void *done_ctx,
                               tfs_batch_task **task_out, tfs_status *st);

/* For a client that went away. If no part of the task has started running, the task is removed
 * from its queue and its done callback runs with CANCELLED on this thread before this returns.
 * If some piece of a split task is running, its queued pieces are dropped and done runs with
 * CANCELLED once the running ones finish. Returns true in those two cases. Returns false when the
 * whole task is already running or completed: it then completes normally and the caller discards
 * the result. Any thread; harmless after done has run, but not after the queue was freed. */
bool tfs_batch_cancel(tfs_batch_task *t);

/* Gives back the handle from tfs_batch_submit. NULL-safe; any thread, also after the queue was
 * freed. Does not cancel the task. */
void tfs_batch_task_release(tfs_batch_task *t);

/* CLOCK_MONOTONIC now, in nanoseconds: the clock of deadline_ns. */
int64_t tfs_batch_now_ns(void);

/* ---- statistics ----------------------------------------------------------------------------- */

/* The histograms' bucket bounds: bucket i counts values <= bounds[i] (and above bounds[i - 1]);
 * the last bucket, past the table, counts the values above every bound (+Inf). Batch sizes are
 * padded rows: 1, 2, 4, ..., 1024, 4096. Queue delays are microseconds: 100 us, 250 us, 500 us,
 * 1 ms, 2.5 ms, 5 ms, 10 ms, 25 ms, 50 ms, 100 ms, 250 ms, 1 s. */
#define TFS_BATCH_SIZE_BOUNDS  12
#define TFS_BATCH_DELAY_BOUNDS 12
extern const int64_t tfs_batch_size_bounds[TFS_BATCH_SIZE_BOUNDS];
extern const int64_t tfs_batch_delay_bounds_us[TFS_BATCH_DELAY_BOUNDS];

/* The counters and the histograms are cumulative since the queue was created: the histograms
 * count every batch run and every task piece taken to run, so any number of readers can each
 * export them whole. */
typedef struct tfs_batch_queue_stats {
    int64_t batches_run;         /* batches handed to the run callback */
    int64_t batches_failed;      /* of those, failed runs or bad outputs */
    int64_t tasks_completed;     /* accepted tasks completed, whatever the outcome */
    int64_t rows_run;            /* task rows run (without padding) */
    int64_t padding_rows;        /* rows added for allowed_batch_sizes */
    int64_t rejected_full;       /* UNAVAILABLE at submit: queue full or closing */
    int64_t rejected_invalid;    /* INVALID_ARGUMENT at submit */
    int64_t deadline_exceeded;   /* tasks dropped because their deadline passed while queued */
    int64_t cancelled;           /* tasks completed with CANCELLED */
    /* Bytes the batcher copied: rows of several tasks (and padding) merged into one batch input,
     * and split tasks' output rows joined back. A batch of one task that needs no padding runs on
     * its own tensors, and every other task's outputs are views of the batch's: neither counts. */
    int64_t bytes_merged;
    int64_t bytes_reassembled;
    /* Histograms, per bucket (not cumulative across buckets), bounds above. The padded size of
     * each batch run (batch_size_sum == rows_run + padding_rows, the counts add up to
     * batches_run), and each task piece's wait from submit to the start of its batch. */
    uint64_t batch_size_counts[TFS_BATCH_SIZE_BOUNDS + 1];
    int64_t  batch_size_sum;
    uint64_t queue_delay_counts[TFS_BATCH_DELAY_BOUNDS + 1];
    int64_t  queue_delay_sum_us;
    /* now */
    int64_t queued_tasks;        /* tasks with a piece waiting in the queue */
    int64_t queued_rows;
    int64_t queued_batches;      /* waiting batches (compare with max_enqueued_batches) */
    int64_t running_batches;
} tfs_batch_queue_stats;

/* Fills *out with a consistent snapshot. Any thread. */
void tfs_batch_queue_stats_get(tfs_batch_queue *q, tfs_batch_queue_stats *out);

#endif
