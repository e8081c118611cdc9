/* Internals of batching/ shared by batcher.c (queues, threads, tasks) and merge.c (tensor rows:
 * concatenation with padding, splitting, reassembly). Included only inside batching/ and its
 * tests. */
#ifndef TFS_BATCHING_BATCHING_IMPL_H
#define TFS_BATCHING_BATCHING_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "batching/batching.h"

/* ---- objects (batcher.c, queue.c) ---------------------------------------------------------- */

enum tfs__piece_state { TFS__PIECE_QUEUED = 0, TFS__PIECE_RUNNING, TFS__PIECE_DONE };

typedef struct tfs__batch tfs__batch;

typedef struct tfs__piece {
    tfs_batch_task *task;
    tfs__batch          *b;            /* while QUEUED or RUNNING */
    struct tfs__piece   *prev, *next;  /* in b while QUEUED */
    int64_t         row0, rows;
    int             state;
    tfs_tensor    **outs;         /* split tasks: this piece's output rows, until finished */
} tfs__piece;

struct tfs__batch {
    tfs_batch_queue *q;
    tfs__batch           *prev, *next;  /* in q's waiting list */
    tfs__piece           *head, *tail;
    int              n_pieces;
    int64_t          rows;
    int64_t          start_ns;     /* when its first piece arrived */
    bool             closed;
};

struct tfs_batch_task {
    atomic_int        refs;
    tfs_batch_queue  *q;
    tfs_batch_done_fn done;
    void             *done_ctx;
    int64_t           deadline_ns, enqueue_ns, rows;
    int               n_inputs, n_outputs;
    tfs_named_tensor *inputs;      /* sorted by name; names live in this allocation */
    int               n_pieces, pending, n_queued;
    tfs__piece            *pieces;      /* &one unless split */
    tfs__piece        one;
    enum tfs_code     code;        /* first error */
    tfs_status       *err;         /* its message (NULL: allocation failed, code still set) */
    tfs_tensor      **outs;        /* q->n_outputs, the result of an unsplit task */
    tfs_batch_task   *fnext;       /* in a list of tasks to finish */
};

/* The cumulative counters and histograms of tfs_batch_queue_stats. */
typedef struct tfs__counters {
    int64_t batches_run, batches_failed, tasks_completed, rows_run, padding_rows;
    int64_t rejected_full, rejected_invalid, deadline_exceeded, cancelled;
    int64_t bytes_merged, bytes_reassembled;
    uint64_t size_counts[TFS_BATCH_SIZE_BOUNDS + 1];
    int64_t  size_sum;
    uint64_t delay_counts[TFS_BATCH_DELAY_BOUNDS + 1];
    int64_t  delay_sum_us;
} tfs__counters;

struct tfs_batch_queue {
    tfs_batcher     *bt;
    tfs_batch_queue *prev, *next;
    char            *name;
    int64_t          max_batch_size, timeout_ns, max_enqueued, capacity;
    int              n_allowed;
    int64_t         *allowed;
    bool             pad, split, closing;
    int              n_outputs;
    char           **output_names;
    tfs_batch_run_fn run;
    void            *ctx;
    tfs__batch           *head, *tail;
    const tfs_batch_task *last_bulk;   /* the split task whose batch was taken last, or NULL;
                                        * compared, never dereferenced */
    int64_t          n_batches, running, queued_tasks, queued_rows;
    tfs__counters    c;
};

struct tfs_batcher {
    pthread_mutex_t  mu;
    pthread_cond_t   work, idle;
    pthread_t       *threads;
    int              n_threads;
    bool             adaptive;     /* TFS_BATCH_SCHEDULER_ADAPTIVE */
    bool             stopping;
    tfs_batch_queue *queues, *rr;
};

/* The body of each batch thread (batcher.c); arg is the tfs_batcher. */
void *tfs__batch_thread(void *arg);

/* ---- rows (merge.c) ------------------------------------------------------------------------- */

/* Rows [row0, row0 + rows) of a tensor of rank >= 1 (borrowed). */
typedef struct tfs__rows {
    const tfs_tensor *t;
    int64_t           row0;
    int64_t           rows;
} tfs__rows;

/* Concatenates src[0..n) along dim 0 into a tensor of padded_rows rows (>= the sum of the rows).
 * All sources share dtype and rank. Without pad_inner their non-batch dims must be equal; with it,
 * the result takes the largest of each and every source's rows are padded with that source's first
 * element (sources whose rows must be padded hold at least one element). Rows beyond the sum are
 * copies of the first row of the last source with rows; when every source has 0 rows, padded_rows
 * must be 0. When tfs__rows_concat_is_view, the result is src[0]'s rows without a copy (as
 * tfs__rows_slice gives them). Caller owns *out. RESOURCE_EXHAUSTED on allocation. */
enum tfs_code tfs__rows_concat(const tfs__rows *src, int n, int64_t padded_rows, bool pad_inner,
                               tfs_tensor **out, tfs_status *st);

/* Whether tfs__rows_concat returns a view of its one source rather than a copy: a single source
 * with padded_rows equal to its rows, all of its tensor or, for any dtype but DT_STRING, some of
 * its rows (a split task's piece). */
bool tfs__rows_concat_is_view(const tfs__rows *src, int n, int64_t padded_rows);

/* Rows [row0, row0 + rows) of t as a tensor. Shares t's buffer (keeps a reference to t) except for
 * DT_STRING and empty results, which are copied; the whole of t is t itself (a new reference).
 * Caller owns *out. */
enum tfs_code tfs__rows_slice(tfs_tensor *t, int64_t row0, int64_t rows, tfs_tensor **out,
                              tfs_status *st);

/* Elements in one row (the product of dims 1..rank-1); 1 for rank 1. */
int64_t tfs__row_nelem(const tfs_tensor *t);

#endif
