/* The batcher: batch threads, queues, task submission and cancellation, batch formation.
 *
 * DESIGN. One mutex per batcher guards every queue, batch and the bookkeeping fields of every task
 * (piece states, pending counts, first error); tensor work, run callbacks and done callbacks happen
 * outside it. A queue keeps its waiting batches in creation order. A task lives in one batch as one
 * piece, or, split, as several pieces in consecutive batches. A batch is "open" while it can take
 * more rows; it closes when full or when a task that does not fit starts a new batch of its shape.
 * A batch thread takes the first ready batch, round-robin over queues: with the adaptive scheduler
 * any batch, since the thread asking is free (a batch grows only while every thread is busy, and is
 * taken whole when one frees); with the fixed one a batch that is closed, whose first task waited
 * batch_timeout, or whose queue is closing. A large split task fills many batches of its own
 * ("bulk" batches), all closed, so a task submitted after it starts a new batch behind them; in
 * strict order it would wait for every one of them. Instead, when the last batch taken from a
 * queue was a bulk batch of task T, the next pick there prefers the first ready batch that is not
 * T's bulk: T's batches and the others' alternate, a small task waits for at most one of T's
 * batches per thread, and T (reassembled in row order whatever order its pieces run in) still
 * gets every other batch. Taking it moves its pieces from QUEUED to
 * RUNNING (pieces past their deadline, or of a task that already failed, are completed instead),
 * so a cancel never races with a run. When the last piece of a task completes the task is finished:
 * its done callback runs once, outside the lock, and the batcher's reference is dropped.
 * Task memory: a task has two references, the batcher's (until done) and the submitter's handle.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "batching/batching-impl.h"

int64_t tfs_batch_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Counts v in a histogram of n bounds (counts[n + 1], batching.h's bucket rule). */
static void hist_add(uint64_t *counts, int64_t *sum, const int64_t *bounds, int n, int64_t v)
{
    int i = 0;
    while (i < n && v > bounds[i])
        i++;
    counts[i]++;
    *sum += v;
}

/* ---- tasks ---------------------------------------------------------------------------------- */

static void task_free(tfs_batch_task *t)
{
    int n_out = t->n_outputs;   /* the queue may be gone when the handle is released */
    for (int i = 0; i < t->n_inputs; i++)
        tfs_tensor_unref(t->inputs[i].tensor);
    for (int o = 0; o < n_out; o++)
        tfs_tensor_unref(t->outs[o]);
    for (int p = 0; p < t->n_pieces; p++) {
        if (!t->pieces[p].outs)
            continue;
        for (int o = 0; o < n_out; o++)
            tfs_tensor_unref(t->pieces[p].outs[o]);
        tfs_free(t->pieces[p].outs);
    }
    if (t->pieces != &t->one)
        tfs_free(t->pieces);
    tfs_free(t->err);
    tfs_free(t);
}

static void task_unref(tfs_batch_task *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1)
        task_free(t);
}

void tfs_batch_task_release(tfs_batch_task *t)
{
    task_unref(t);
}

/* Records the task's first error. Under the lock. */
static void task_fail(tfs_batch_task *t, enum tfs_code code, const char *msg)
{
    if (t->code != TFS_OK)
        return;
    t->code = code;
    t->err = tfs_malloc(sizeof *t->err);
    if (t->err)
        tfs_status_set(t->err, code, "%s", msg);
}

/* A piece leaves the books; returns true when that finished its task. Under the lock. */
static bool piece_done(tfs__piece *p)
{
    p->state = TFS__PIECE_DONE;
    p->b = NULL;
    tfs_batch_task *t = p->task;
    if (--t->pending > 0)
        return false;
    tfs__counters *c = &t->q->c;
    c->tasks_completed++;
    if (t->code == TFS_CANCELLED)
        c->cancelled++;
    else if (t->code == TFS_DEADLINE_EXCEEDED)
        c->deadline_exceeded++;
    return true;
}

/* Joins the rows of a split task's pieces into its outputs. */
static enum tfs_code assemble(tfs_batch_task *t, tfs_status *st)
{
    tfs_batch_queue *q = t->q;
    int64_t bytes = 0;
    tfs__rows src[64], *parts = src;
    if (t->n_pieces > 64)
        parts = tfs_calloc((size_t)t->n_pieces, sizeof *parts);
    if (!parts)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batch queue '%s': out of memory", q->name);
    enum tfs_code rc = TFS_OK;
    for (int o = 0; o < q->n_outputs && rc == TFS_OK; o++) {
        const tfs_tensor *a = t->pieces[0].outs[o];
        for (int p = 0; p < t->n_pieces; p++) {
            const tfs_tensor *x = t->pieces[p].outs[o];
            if (x->dtype != a->dtype || x->rank != a->rank ||
                memcmp(x->dims + 1, a->dims + 1, sizeof(int64_t) * (size_t)(a->rank - 1)) != 0) {
                rc = TFS_ERR(st, TFS_INTERNAL,
                             "batch queue '%s': output '%s' of a split task: its pieces have "
                             "different shapes or dtypes", q->name, q->output_names[o]);
                break;
            }
            parts[p] = (tfs__rows){.t = x, .row0 = 0, .rows = x->dims[0]};
        }
        if (rc == TFS_OK)
            rc = tfs__rows_concat(parts, t->n_pieces, t->rows, false, &t->outs[o], st);
        if (rc == TFS_OK)
            bytes += (int64_t)t->outs[o]->nbytes;
    }
    if (parts != src)
        tfs_free(parts);
    pthread_mutex_lock(&q->bt->mu);
    q->c.bytes_reassembled += bytes;
    pthread_mutex_unlock(&q->bt->mu);
    return rc;
}

/* Runs the done callback of every task in the list, then drops the batcher's references. */
static void finish_tasks(tfs_batch_task *list)
{
    tfs_status st;
    while (list) {
        tfs_batch_task *t = list;
        list = t->fnext;
        enum tfs_code code = t->code;
        if (code == TFS_OK && t->pieces != &t->one)
            code = assemble(t, &st);
        if (code == TFS_OK) {
            tfs_status_clear(&st);
            tfs_tensor **outs = t->outs;
            t->done(t->done_ctx, TFS_OK, &st, outs, t->q->n_outputs);
            memset(outs, 0, sizeof *outs * (size_t)t->q->n_outputs);   /* now the callback's */
        } else if (t->code != TFS_OK) {
            if (t->err)
                t->done(t->done_ctx, t->code, t->err, NULL, 0);
            else {
                tfs_status_set(&st, t->code, "batch queue '%s': task failed (%s)", t->q->name,
                               tfs_code_name(t->code));
                t->done(t->done_ctx, t->code, &st, NULL, 0);
            }
        } else {
            t->done(t->done_ctx, code, &st, NULL, 0);
        }
        task_unref(t);
    }
}

/* ---- batches -------------------------------------------------------------------------------- */

static void batch_unlink(tfs_batch_queue *q, tfs__batch *b)
{
    if (b->prev) b->prev->next = b->next; else q->head = b->next;
    if (b->next) b->next->prev = b->prev; else q->tail = b->prev;
    b->prev = b->next = NULL;
    q->n_batches--;
}

static void piece_unlink(tfs__piece *p)
{
    tfs__batch *b = p->b;
    if (p->prev) p->prev->next = p->next; else b->head = p->next;
    if (p->next) p->next->prev = p->prev; else b->tail = p->prev;
    p->prev = p->next = NULL;
    b->n_pieces--;
    b->rows -= p->rows;
}

static void piece_append(tfs__batch *b, tfs__piece *p)
{
    p->b = b;
    p->prev = b->tail;
    p->next = NULL;
    if (b->tail) b->tail->next = p; else b->head = p;
    b->tail = p;
    b->n_pieces++;
    b->rows += p->rows;
    if (b->rows >= b->q->capacity)
        b->closed = true;
}

static tfs__batch *batch_alloc(tfs_batch_queue *q, int64_t now)
{
    tfs__batch *b = tfs_calloc(1, sizeof *b);
    if (b) {
        b->q = q;
        b->start_ns = now;
    }
    return b;
}

static void batch_link(tfs_batch_queue *q, tfs__batch *b)
{
    b->prev = q->tail;
    if (q->tail) q->tail->next = b; else q->head = b;
    q->tail = b;
    q->n_batches++;
}

/* Whether tasks a and b may share a batch (see the header's "Batch formation"). */
static bool compatible(const tfs_batch_queue *q, const tfs_batch_task *a, const tfs_batch_task *b)
{
    if (a->n_inputs != b->n_inputs)
        return false;
    for (int i = 0; i < a->n_inputs; i++) {
        const tfs_tensor *x = a->inputs[i].tensor, *y = b->inputs[i].tensor;
        if (strcmp(a->inputs[i].name, b->inputs[i].name) != 0 || x->dtype != y->dtype ||
            x->rank != y->rank)
            return false;
        bool paddable = q->pad && tfs__row_nelem(x) > 0 && tfs__row_nelem(y) > 0;
        if (!paddable && memcmp(x->dims + 1, y->dims + 1, sizeof(int64_t) * (size_t)(x->rank - 1)))
            return false;
    }
    return true;
}

/* The newest batch of t's shape that can still take rows, or NULL. */
static tfs__batch *open_batch(tfs_batch_queue *q, const tfs_batch_task *t)
{
    for (tfs__batch *b = q->tail; b; b = b->prev)
        if (compatible(q, b->head->task, t))
            return b->closed ? NULL : b;
    return NULL;
}

static int64_t padded_size(const tfs_batch_queue *q, int64_t rows)
{
    if (rows == 0)
        return 0;
    for (int i = 0; i < q->n_allowed; i++)
        if (q->allowed[i] >= rows)
            return q->allowed[i];
    return rows;
}

/* ---- batch threads -------------------------------------------------------------------------- */

static bool batch_ready(const tfs_batcher *bt, const tfs__batch *b, int64_t now, int64_t *wake)
{
    const tfs_batch_queue *q = b->q;
    /* Only a free thread asks: waiting for the batch to fill would leave it idle. */
    if (bt->adaptive)
        return true;
    if (b->closed || q->closing || bt->stopping || now - b->start_ns >= q->timeout_ns)
        return true;
    if (b->start_ns + q->timeout_ns < *wake)
        *wake = b->start_ns + q->timeout_ns;
    return false;
}

/* The split task whose piece is b's only one, or NULL (see the file comment: bulk batches). */
static const tfs_batch_task *bulk_of(const tfs__batch *b)
{
    return b->n_pieces == 1 && b->head->task->n_pieces > 1 ? b->head->task : NULL;
}

/* q's batch to run next, or NULL: the first ready one, except that after a bulk batch of task T
 * the first ready one that is not T's bulk goes first. */
static tfs__batch *pick_in(tfs_batcher *bt, tfs_batch_queue *q, int64_t now, int64_t *wake)
{
    for (tfs__batch *b = q->head; b; b = b->next) {
        if (!batch_ready(bt, b, now, wake))
            continue;
        const tfs_batch_task *t = bulk_of(b);
        if (!t || t != q->last_bulk)
            return b;
        /* T's new batches were linked one after another at submit: look on after the last of
         * them, so that a task of thousands of batches costs no scan over them per pick. */
        const tfs__piece *last = &t->pieces[t->n_pieces - 1];
        tfs__batch *o = last->state == TFS__PIECE_QUEUED ? last->b->next : b->next;
        for (; o; o = o->next)
            if (bulk_of(o) != t && batch_ready(bt, o, now, wake))
                return o;
        return b;
    }
    return NULL;
}

static tfs__batch *pick(tfs_batcher *bt, int64_t now, int64_t *wake)
{
    tfs_batch_queue *q = bt->rr ? bt->rr : bt->queues;
    for (tfs_batch_queue *first = q; q;) {
        tfs__batch *b = pick_in(bt, q, now, wake);
        if (b) {
            bt->rr = q->next;
            q->last_bulk = bulk_of(b);
            return b;
        }
        q = q->next ? q->next : bt->queues;
        if (q == first)
            break;
    }
    return NULL;
}

static bool any_waiting(const tfs_batcher *bt)
{
    for (const tfs_batch_queue *q = bt->queues; q; q = q->next)
        if (q->head)
            return true;
    return false;
}

/* Takes b out of its queue: pieces to run move to run[], the others complete now (under the
 * lock). */
static int take(tfs__batch *b, int64_t now, tfs__piece **run, tfs_batch_task **finish)
{
    tfs_batch_queue *q = b->q;
    batch_unlink(q, b);
    q->running++;
    int n = 0;
    for (tfs__piece *p = b->head, *next; p; p = next) {
        next = p->next;
        tfs_batch_task *t = p->task;
        q->queued_rows -= p->rows;
        if (--t->n_queued == 0)
            q->queued_tasks--;
        if (t->code == TFS_OK && t->deadline_ns != 0 && now > t->deadline_ns) {
            char msg[128];
            snprintf(msg, sizeof msg, "deadline exceeded after %.3f ms in batch queue",
                     (double)(now - t->enqueue_ns) / 1e6);
            task_fail(t, TFS_DEADLINE_EXCEEDED, msg);
        }
        if (t->code != TFS_OK) {
            if (piece_done(p)) {
                t->fnext = *finish;
                *finish = t;
            }
            continue;
        }
        p->state = TFS__PIECE_RUNNING;
        hist_add(q->c.delay_counts, &q->c.delay_sum_us, tfs_batch_delay_bounds_us,
                 TFS_BATCH_DELAY_BOUNDS, (now - t->enqueue_ns) / 1000);
        run[n++] = p;
    }
    return n;
}

/* Concatenates, runs and splits one batch of n pieces; fills outs[n * n_outputs] or an error.
 * *merged: the bytes copied to make the batch's inputs. */
static enum tfs_code execute(tfs_batch_queue *q, tfs__piece **run, int n, int64_t rows,
                             int64_t padded, tfs_tensor **outs, int64_t *merged, tfs_status *st)
{
    const tfs_batch_task *t0 = run[0]->task;
    int n_in = t0->n_inputs, n_out = q->n_outputs;
    tfs_named_tensor *in = tfs_calloc((size_t)n_in, sizeof *in);
    tfs__rows *src = tfs_calloc((size_t)n, sizeof *src);
    tfs_tensor **bo = tfs_calloc((size_t)n_out, sizeof *bo);
    enum tfs_code rc = TFS_OK;
    if (!in || !src || !bo) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batch queue '%s': out of memory", q->name);
        goto out;
    }
    for (int i = 0; i < n_in; i++) {
        for (int j = 0; j < n; j++)
            src[j] = (tfs__rows){.t = run[j]->task->inputs[i].tensor, .row0 = run[j]->row0,
                                 .rows = run[j]->rows};
        in[i].name = t0->inputs[i].name;
        if ((rc = tfs__rows_concat(src, n, padded, q->pad, &in[i].tensor, st)) != TFS_OK) {
            tfs_status_prefix(st, "batch queue '%s': input '%s'", q->name, in[i].name);
            goto out;
        }
        if (!tfs__rows_concat_is_view(src, n, padded))
            *merged += (int64_t)in[i].tensor->nbytes;
    }
    int64_t deadline = 0;
    for (int j = 0; j < n; j++) {
        int64_t d = run[j]->task->deadline_ns;
        if (d == 0) {
            deadline = 0;
            break;
        }
        deadline = d > deadline ? d : deadline;
    }
    if ((rc = q->run(q->ctx, in, n_in, deadline, bo, n_out, st)) != TFS_OK)
        goto out;
    for (int o = 0; o < n_out; o++) {
        const tfs_tensor *y = bo[o];
        if (!y || y->rank < 1 || y->dims[0] != padded) {
            rc = TFS_ERR(st, TFS_INTERNAL,
                         "batch queue '%s': output '%s': dim 0 is %lld, expected the batch size "
                         "%lld", q->name, q->output_names[o],
                         (long long)(!y ? -1 : y->rank < 1 ? 0 : y->dims[0]), (long long)padded);
            goto out;
        }
    }
    int64_t off = 0;
    for (int j = 0; j < n; j++) {
        for (int o = 0; o < n_out; o++)
            if ((rc = tfs__rows_slice(bo[o], off, run[j]->rows, &outs[j * n_out + o], st)))
                goto out;
        off += run[j]->rows;
    }
    TFS_ASSERT(off == rows);
    tfs_status_clear(st);
out:
    for (int i = 0; in && i < n_in; i++)
        tfs_tensor_unref(in[i].tensor);
    for (int o = 0; bo && o < n_out; o++)
        tfs_tensor_unref(bo[o]);
    tfs_free(in);
    tfs_free(src);
    tfs_free(bo);
    return rc;
}

static void process(tfs_batcher *bt, tfs__batch *b, tfs__piece **run, int n)
{
    tfs_batch_queue *q = b->q;
    int n_out = q->n_outputs;
    int64_t rows = 0;
    for (int j = 0; j < n; j++)
        rows += run[j]->rows;
    int64_t padded = padded_size(q, rows);
    tfs_status st;
    tfs_tensor **outs = n ? tfs_calloc((size_t)n * (size_t)n_out, sizeof *outs) : NULL;
    int64_t merged = 0;
    enum tfs_code rc = TFS_OK;
    if (n && !outs)
        rc = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "batch queue '%s': out of memory", q->name);
    else if (n)
        rc = execute(q, run, n, rows, padded, outs, &merged, &st);

    tfs_batch_task *finish = NULL;
    pthread_mutex_lock(&bt->mu);
    if (n) {
        q->c.batches_run++;
        q->c.batches_failed += rc != TFS_OK;
        q->c.rows_run += rows;
        q->c.padding_rows += padded - rows;
        q->c.bytes_merged += merged;
        hist_add(q->c.size_counts, &q->c.size_sum, tfs_batch_size_bounds, TFS_BATCH_SIZE_BOUNDS,
                 padded);
    }
    for (int j = 0; j < n; j++) {
        tfs__piece *p = run[j];
        tfs_batch_task *t = p->task;
        if (rc != TFS_OK) {
            task_fail(t, rc, st.msg);
        } else if (p == &t->one) {
            memcpy(t->outs, &outs[j * n_out], sizeof *outs * (size_t)n_out);
        } else {
            p->outs = tfs_calloc((size_t)n_out, sizeof *p->outs);
            if (p->outs)
                memcpy(p->outs, &outs[j * n_out], sizeof *outs * (size_t)n_out);
            else
                task_fail(t, TFS_RESOURCE_EXHAUSTED, "out of memory reassembling a split task");
        }
        if (rc != TFS_OK || (p != &t->one && !p->outs))
            for (int o = 0; o < n_out; o++)
                tfs_tensor_unref(outs[j * n_out + o]);
        if (piece_done(p)) {
            t->fnext = finish;
            finish = t;
        }
    }
    pthread_mutex_unlock(&bt->mu);
    tfs_free(outs);
    tfs_free(b);
    finish_tasks(finish);
}

void *tfs__batch_thread(void *arg)
{
    tfs_batcher *bt = arg;
    tfs__piece **run = NULL;
    int cap = 0;
    /* A batch closes when its timeout expires: Linux's default 50 us timer slack would add up to
     * that to every timed-out batch (the 1-client latency is batch_timeout + this overhead). */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&bt->mu);
    for (;;) {
        int64_t now = tfs_batch_now_ns(), wake = INT64_MAX;
        tfs__batch *b = pick(bt, now, &wake);
        if (b) {
            if (b->n_pieces > cap) {
                tfs__piece **r = tfs_realloc(run, sizeof *run * (size_t)b->n_pieces);
                if (!r) {   /* leave the batch queued and retry shortly */
                    wake = now + 1000000;
                    goto wait;
                }
                run = r;
                cap = b->n_pieces;
            }
            tfs_batch_queue *q = b->q;   /* b is freed by process() */
            tfs_batch_task *finish = NULL;
            int n = take(b, now, run, &finish);
            if (any_waiting(bt))
                pthread_cond_signal(&bt->work);   /* more work: wake an idle peer */
            pthread_mutex_unlock(&bt->mu);
            finish_tasks(finish);
            process(bt, b, run, n);
            pthread_mutex_lock(&bt->mu);
            /* Only now, with every done callback of the batch run, is it no longer running. */
            q->running--;
            pthread_cond_broadcast(&bt->idle);
            continue;
        }
        if (bt->stopping && !any_waiting(bt))
            break;
    wait:
        if (wake == INT64_MAX) {
            pthread_cond_wait(&bt->work, &bt->mu);
        } else {
            struct timespec ts = {.tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000};
            pthread_cond_timedwait(&bt->work, &bt->mu, &ts);
        }
    }
    pthread_mutex_unlock(&bt->mu);
    tfs_free(run);
    return NULL;
}


/* ---- submit and cancel ---------------------------------------------------------------------- */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tfs_named_tensor *)a)->name, ((const tfs_named_tensor *)b)->name);
}

/* The submit-time checks of TF Serving's ComputeTensorBatchSize and the queue's task size limit. */
static enum tfs_code check_inputs(const tfs_batch_queue *q, const tfs_named_tensor *in, int n,
                                  int64_t *rows, tfs_status *st)
{
    if (n < 1 || !in)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Batching Run() must have at least one input tensor");
    for (int i = 0; i < n; i++) {
        const char *name = in[i].name ? in[i].name : "";
        if (!in[i].name || !in[i].tensor)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "batch queue '%s': input %d has no %s",
                           q->name, i, in[i].name ? "tensor" : "name");
        if (in[i].tensor->rank < 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Batching Run() input tensors must have at least one dimension; "
                           "input '%s' is a scalar", name);
        if (in[i].tensor->dims[0] != in[0].tensor->dims[0])
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Batching Run() input tensors must have equal 0th-dimension size; "
                           "input '%s' has %lld rows, input '%s' has %lld", in[0].name,
                           (long long)in[0].tensor->dims[0], name,
                           (long long)in[i].tensor->dims[0]);
        for (int j = 0; j < i; j++)
            if (strcmp(in[j].name, name) == 0)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "batch queue '%s': input '%s' given twice",
                               q->name, name);
    }
    *rows = in[0].tensor->dims[0];
    if (*rows > q->max_batch_size)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Task size %lld is larger than maximum input batch size %lld",
                       (long long)*rows, (long long)q->max_batch_size);
    return TFS_OK;
}

/* One allocation: the task, its sorted inputs, their names and its output slots. */
static tfs_batch_task *task_new(tfs_batch_queue *q, const tfs_named_tensor *in, int n)
{
    size_t names = 0;
    for (int i = 0; i < n; i++)
        names += strlen(in[i].name) + 1;
    size_t size = sizeof(tfs_batch_task) + sizeof(tfs_named_tensor) * (size_t)n +
                  sizeof(tfs_tensor *) * (size_t)q->n_outputs + names;
    tfs_batch_task *t = tfs_calloc(1, size);
    if (!t)
        return NULL;
    t->inputs = (tfs_named_tensor *)(t + 1);
    t->outs = (tfs_tensor **)(t->inputs + n);
    char *s = (char *)(t->outs + q->n_outputs);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(in[i].name) + 1;
        memcpy(s, in[i].name, len);
        t->inputs[i] = (tfs_named_tensor){.name = s, .tensor = tfs_tensor_ref(in[i].tensor)};
        s += len;
    }
    qsort(t->inputs, (size_t)n, sizeof *t->inputs, by_name);
    t->n_inputs = n;
    t->n_outputs = q->n_outputs;
    t->q = q;
    atomic_init(&t->refs, 1);
    return t;
}

/* Places t's rows into batches (under the lock): into the open batch of its shape when they fit;
 * otherwise into a new batch, which closes the open one (TF's StartNewBatch); split, they fill the
 * open batch's room and continue in new batches. UNAVAILABLE when that needs more than
 * max_enqueued_batches waiting batches. */
static enum tfs_code enqueue(tfs_batch_queue *q, tfs_batch_task *t, int64_t now, tfs_status *st)
{
    tfs__batch *open = open_batch(q, t), *stack[8], **fresh_b = stack;
    int64_t room = open ? q->capacity - open->rows : 0, first = 0, fresh = 0;
    bool use_open = false;
    if (open && t->rows <= room) {
        use_open = true;
        first = t->rows;
    } else if (q->split && t->rows > 0) {
        use_open = open != NULL;
        first = room;
        fresh = (t->rows - first + q->capacity - 1) / q->capacity;
    } else {
        fresh = 1;
    }
    if (fresh > 0 && q->n_batches + fresh > q->max_enqueued) {
        q->c.rejected_full++;
        return TFS_ERR(st, TFS_UNAVAILABLE,
                       "The batch scheduling queue to which this task was submitted is full; "
                       "currently %lld batches enqueued and max_enqueued_batches is %lld "
                       "(queue '%s', task size %lld)", (long long)q->n_batches,
                       (long long)q->max_enqueued, q->name, (long long)t->rows);
    }
    int n = (int)fresh + use_open;
    /* Allocate everything before linking anything, so that a failure leaves the queue as it was. */
    if (fresh > 8)
        fresh_b = tfs_calloc((size_t)fresh, sizeof *fresh_b);
    t->pieces = n > 1 ? tfs_calloc((size_t)n, sizeof *t->pieces) : &t->one;
    bool ok = fresh_b && t->pieces;
    for (int64_t i = 0; ok && i < fresh; i++)
        ok = (fresh_b[i] = batch_alloc(q, now)) != NULL;
    if (!ok) {
        for (int64_t i = 0; fresh_b && i < fresh; i++)
            tfs_free(fresh_b[i]);
        if (fresh_b != stack)
            tfs_free(fresh_b);
        if (t->pieces != &t->one)
            tfs_free(t->pieces);
        t->pieces = &t->one;
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "batch queue '%s': out of memory", q->name);
    }
    if (open && !use_open && t->rows > 0)
        open->closed = true;   /* superseded: ready now */
    int p = 0;
    int64_t row = 0;
    if (use_open) {
        t->pieces[p] = (tfs__piece){.task = t, .row0 = 0, .rows = first};
        piece_append(open, &t->pieces[p++]);
        row = first;
    }
    for (int64_t i = 0; i < fresh; i++, p++) {
        int64_t r = t->rows - row < q->capacity ? t->rows - row : q->capacity;
        batch_link(q, fresh_b[i]);
        t->pieces[p] = (tfs__piece){.task = t, .row0 = row, .rows = r};
        piece_append(fresh_b[i], &t->pieces[p]);
        /* A split task's batches hold it alone (bulk, see the file comment): a later task that
         * joined its last one would run only after all of them. */
        fresh_b[i]->closed |= n > 1;
        row += r;
    }
    if (fresh_b != stack)
        tfs_free(fresh_b);
    TFS_ASSERT(row == t->rows && p == n);
    t->n_pieces = t->pending = t->n_queued = n;
    q->queued_tasks++;
    q->queued_rows += t->rows;
    return TFS_OK;
}

enum tfs_code tfs_batch_submit(tfs_batch_queue *q, const tfs_named_tensor *inputs, int n_inputs,
                               int64_t deadline_ns, tfs_batch_done_fn done, void *done_ctx,
                               tfs_batch_task **task_out, tfs_status *st)
{
    TFS_ASSERT(q && done);
    if (task_out)
        *task_out = NULL;
    tfs_status local;
    tfs_status *s = st ? st : &local;
    tfs_batcher *bt = q->bt;
    tfs_batch_task *t = NULL;
    int64_t rows = 0;
    enum tfs_code rc = check_inputs(q, inputs, n_inputs, &rows, s);
    if (rc != TFS_OK) {
        pthread_mutex_lock(&bt->mu);
        q->c.rejected_invalid++;
        pthread_mutex_unlock(&bt->mu);
        goto fail;
    }
    if (!(t = task_new(q, inputs, n_inputs))) {
        rc = TFS_ERR(s, TFS_RESOURCE_EXHAUSTED, "batch queue '%s': out of memory", q->name);
        goto fail;
    }
    t->rows = rows;
    t->done = done;
    t->done_ctx = done_ctx;
    t->deadline_ns = deadline_ns;
    t->enqueue_ns = tfs_batch_now_ns();
    if (task_out)
        atomic_fetch_add(&t->refs, 1);
    pthread_mutex_lock(&bt->mu);
    if (q->closing || bt->stopping) {
        q->c.rejected_full++;
        rc = TFS_ERR(s, TFS_UNAVAILABLE, "batch queue '%s' is shutting down", q->name);
    } else {
        rc = enqueue(q, t, t->enqueue_ns, s);
    }
    if (rc == TFS_OK)
        pthread_cond_signal(&bt->work);
    pthread_mutex_unlock(&bt->mu);
    if (rc != TFS_OK)
        goto fail;
    if (task_out)
        *task_out = t;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    if (t) {
        atomic_store(&t->refs, 1);
        task_unref(t);
    }
    done(done_ctx, rc, s, NULL, 0);
    return rc;
}

bool tfs_batch_cancel(tfs_batch_task *t)
{
    if (!t)
        return false;
    tfs_batch_queue *q = t->q;
    tfs_batcher *bt = q->bt;
    bool dropped = false, finished = false;
    pthread_mutex_lock(&bt->mu);
    bool running = false;
    for (int i = 0; i < t->n_pieces; i++)
        running |= t->pieces[i].state == TFS__PIECE_RUNNING;
    for (int i = 0; i < t->n_pieces && t->pending > 0; i++) {
        tfs__piece *p = &t->pieces[i];
        if (p->state != TFS__PIECE_QUEUED)
            continue;
        if (!dropped)
            task_fail(t, TFS_CANCELLED, running ? "cancelled while part of the task ran"
                                                : "cancelled while queued");
        dropped = true;
        tfs__batch *b = p->b;
        piece_unlink(p);
        q->queued_rows -= p->rows;
        if (--t->n_queued == 0)
            q->queued_tasks--;
        if (b->n_pieces == 0) {
            batch_unlink(q, b);
            tfs_free(b);
        }
        finished = piece_done(p);
    }
    if (dropped)
        pthread_cond_broadcast(&bt->idle);
    pthread_mutex_unlock(&bt->mu);
    if (finished) {
        t->fnext = NULL;
        finish_tasks(t);
    }
    return dropped;
}
