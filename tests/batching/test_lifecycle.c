/* Queues over time and threads: bounded queues that refuse with UNAVAILABLE at once, cancellation
 * while queued and while running, shutdown with batches in flight (every callback exactly once),
 * and many threads submitting at once, each getting exactly its own rows back. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/batching/helpers.h"

Suite *suite_batching_lifecycle(void);

static tfs_batch_queue_opts opts(int64_t max, int64_t timeout_us, int64_t max_enqueued)
{
    tfs_batch_queue_opts o = tfs_batch_queue_opts_default();
    o.name = "m:sig";
    o.max_batch_size = max;
    o.batch_timeout_micros = timeout_us;
    o.max_enqueued_batches = max_enqueued;
    return o;
}

START_TEST(test_full_queue_refuses_at_once)
{
    env e;
    tfs_batch_queue_opts o = opts(2, 10 * 1000000, 2);
    env_start(&e, 1, &o, MODEL_AFFINE);
    model_gate(&e.m, true);
    tfs_tensor *two = ramp(2, 1, 1), *one = ramp(1, 1, 5);
    result r[5];
    submit_x(&e, two, 0, &r[0], TFS_OK);   /* full: taken by the thread, held in the run */
    model_wait_batches(&e.m, 1);
    submit_x(&e, two, 0, &r[1], TFS_OK);   /* waiting batch 1 (full) */
    submit_x(&e, one, 0, &r[2], TFS_OK);   /* waiting batch 2 (open, room 1) */
    submit_x(&e, two, 0, &r[3], TFS_UNAVAILABLE);   /* would need a third */
    ck_assert_int_eq(atomic_load(&r[3].calls), 1);
    ck_assert(pthread_equal(r[3].thread, pthread_self()));
    ck_assert_msg(strstr(r[3].msg, "The batch scheduling queue to which this task was submitted "
                                   "is full"), "%s", r[3].msg);
    submit_x(&e, one, 0, &r[4], TFS_OK);   /* still fits the open batch */
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.queued_batches, 2);
    ck_assert_int_eq(s.queued_tasks, 3);
    ck_assert_int_eq(s.queued_rows, 4);
    ck_assert_int_eq(s.running_batches, 1);
    ck_assert_int_eq(s.rejected_full, 1);
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 5, 10000));
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(atomic_load(&r[i].calls), 1);
        if (i == 3)
            continue;
        ck_assert_int_eq(r[i].code, TFS_OK);
        const tfs_tensor *x = i == 2 || i == 4 ? one : two;
        for (int64_t k = 0; k < x->nelem; k++)
            ck_assert_float_eq(((float *)r[i].out[0]->data)[k], 2.0f * ((float *)x->data)[k] + 1);
        result_clear(&r[i]);
    }
    tfs_tensor_unref(two);
    tfs_tensor_unref(one);
    env_stop(&e);
}
END_TEST

START_TEST(test_cancel_while_queued_and_while_running)
{
    env e;
    tfs_batch_queue_opts o = opts(4, 10 * 1000000, 10);
    env_start(&e, 1, &o, MODEL_AFFINE);
    tfs_status st;
    /* keep has its own shape, so the full batch below neither joins nor supersedes its batch. */
    tfs_tensor *x = ramp(1, 3, 42), *keep = ramp(1, 2, 7), *full = ramp(4, 3, 100);
    result r[4];
    tfs_batch_task *h[4];
    for (int i = 0; i < 4; i++)
        result_init(&r[i], &e.w);
    ck_assert_int_eq(tfs_batch_submit(e.q, (tfs_named_tensor[]){{"x", x}}, 1, 0, on_done, &r[0],
                                      &h[0], &st), TFS_OK);
    ck_assert_int_eq(tfs_batch_submit(e.q, (tfs_named_tensor[]){{"x", keep}}, 1, 0, on_done,
                                      &r[1], &h[1], &st), TFS_OK);
    /* Queued: dropped now, its callback already ran with CANCELLED. */
    ck_assert(tfs_batch_cancel(h[0]));
    ck_assert_int_eq(atomic_load(&r[0].calls), 1);
    ck_assert_int_eq(r[0].code, TFS_CANCELLED);
    ck_assert(!tfs_batch_cancel(h[0]));   /* harmless afterwards */
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.queued_tasks, 1);
    ck_assert_int_eq(s.cancelled, 1);
    /* Running: cancel says no, the task completes normally (the caller discards it). */
    model_gate(&e.m, true);
    ck_assert_int_eq(tfs_batch_submit(e.q, (tfs_named_tensor[]){{"x", full}}, 1, 0, on_done,
                                      &r[2], &h[2], &st), TFS_OK);
    model_wait_batches(&e.m, 1);
    ck_assert(!tfs_batch_cancel(h[2]));
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 2, 10000));
    ck_assert_int_eq(r[2].code, TFS_OK);
    ck_assert_int_eq(r[2].out[0]->dims[0], 4);
    /* The queued task that was not cancelled runs when the queue closes; the cancelled never. */
    tfs_batch_queue_free(e.q);
    e.q = NULL;
    ck_assert_int_eq(atomic_load(&r[1].calls), 1);
    ck_assert_int_eq(r[1].code, TFS_OK);
    ck_assert(!model_saw(&e.m, 42));
    ck_assert(model_saw(&e.m, 7));
    for (int i = 0; i < 3; i++) {
        tfs_batch_task_release(h[i]);   /* also fine after the queue is gone */
        result_clear(&r[i]);
    }
    tfs_tensor_unref(x);
    tfs_tensor_unref(keep);
    tfs_tensor_unref(full);
    env_stop(&e);
}
END_TEST

START_TEST(test_cancel_split_task_with_a_piece_running)
{
    env e;
    tfs_batch_queue_opts o = opts(8, 10 * 1000000, 10);
    o.enable_large_batch_splitting = true;
    o.max_execution_batch_size = 2;
    env_start(&e, 1, &o, MODEL_AFFINE);
    model_gate(&e.m, true);
    tfs_status st;
    tfs_tensor *x = ramp(5, 1, 0);
    result r;
    tfs_batch_task *h;
    result_init(&r, &e.w);
    ck_assert_int_eq(tfs_batch_submit(e.q, (tfs_named_tensor[]){{"x", x}}, 1, 0, on_done, &r, &h,
                                      &st), TFS_OK);
    model_wait_batches(&e.m, 1);   /* rows 0-1 are running; 2-3 and 4 wait */
    ck_assert(tfs_batch_cancel(h));
    ck_assert_int_eq(atomic_load(&r.calls), 0);   /* not before the running piece ends */
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 1, 10000));
    ck_assert_int_eq(r.code, TFS_CANCELLED);
    ck_assert_int_eq(e.m.batches, 1);
    tfs_batch_task_release(h);
    tfs_tensor_unref(x);
    env_stop(&e);
}
END_TEST

#define SHUT_N 300

static void shutdown_with_batches_in_flight(bool free_queue_first)
{
    env e;
    tfs_batch_queue_opts o = opts(8, 20000, 1000);
    env_start(&e, 2, &o, MODEL_AFFINE);
    e.m.sleep_us = 2000;
    tfs_tensor *x = ramp(1, 2, 3);
    result *r = calloc(SHUT_N, sizeof *r);
    for (int i = 0; i < SHUT_N; i++)
        submit_x(&e, x, 0, &r[i], TFS_OK);
    if (free_queue_first) {
        tfs_batch_queue_free(e.q);   /* returns when every task has completed */
        for (int i = 0; i < SHUT_N; i++)
            ck_assert_int_eq(atomic_load(&r[i].calls), 1);
    }
    e.q = NULL;
    tfs_batcher_free(e.b);   /* without tfs_batch_queue_free it drains and frees the queue */
    for (int i = 0; i < SHUT_N; i++) {
        ck_assert_int_eq(atomic_load(&r[i].calls), 1);
        ck_assert_int_eq(r[i].code, TFS_OK);
        ck_assert_float_eq(((float *)r[i].out[0]->data)[1], 9.0f);
        result_clear(&r[i]);
    }
    ck_assert_int_eq(e.w.done, SHUT_N);
    free(r);
    tfs_tensor_unref(x);
    model_deinit(&e.m);
    waiter_deinit(&e.w);
}

START_TEST(test_shutdown_runs_every_task_once)
{
    shutdown_with_batches_in_flight(true);
    shutdown_with_batches_in_flight(false);
}
END_TEST

#define SUB_THREADS 8
#define SUB_TASKS   500

typedef struct submitter {
    env        *e;
    int         id;
    result     *r;
    tfs_tensor *x[SUB_TASKS];
} submitter;

static void *submit_many(void *arg)
{
    submitter *s = arg;
    tfs_status st;
    for (int i = 0; i < SUB_TASKS; i++) {
        int64_t rows = 1 + (s->id + i) % 3;
        s->x[i] = ramp(rows, 2, (float)(s->id * 10000 + i * 8));
        result_init(&s->r[i], &s->e->w);
        tfs_named_tensor in[] = {{"x", s->x[i]}};
        if (tfs_batch_submit(s->e->q, in, 1, 0, on_done, &s->r[i], NULL, &st) != TFS_OK)
            return "submit failed";
    }
    return NULL;
}

START_TEST(test_many_threads_submitting)
{
    env e;
    tfs_batch_queue_opts o = opts(32, 1000, 1000000);
    o.n_outputs = 2;
    env_start(&e, 2, &o, MODEL_AFFINE);
    submitter *s = calloc(SUB_THREADS, sizeof *s);
    pthread_t th[SUB_THREADS];
    for (int t = 0; t < SUB_THREADS; t++) {
        s[t] = (submitter){.e = &e, .id = t, .r = calloc(SUB_TASKS, sizeof(result))};
        pthread_create(&th[t], NULL, submit_many, &s[t]);
    }
    for (int t = 0; t < SUB_THREADS; t++) {
        void *err;
        pthread_join(th[t], &err);
        ck_assert_ptr_null(err);
    }
    ck_assert(waiter_wait(&e.w, SUB_THREADS * SUB_TASKS, 20000));
    for (int t = 0; t < SUB_THREADS; t++) {
        for (int i = 0; i < SUB_TASKS; i++) {
            result *r = &s[t].r[i];
            const tfs_tensor *x = s[t].x[i];
            ck_assert_int_eq(atomic_load(&r->calls), 1);
            ck_assert_int_eq(r->code, TFS_OK);
            ck_assert_int_eq(r->n_out, 2);
            for (int o2 = 0; o2 < 2; o2++) {
                ck_assert_int_eq(r->out[o2]->dims[0], x->dims[0]);
                for (int64_t k = 0; k < x->nelem; k++)
                    ck_assert_float_eq(((float *)r->out[o2]->data)[k],
                                       2.0f * ((float *)x->data)[k] + 1.0f + (float)o2);
            }
            result_clear(r);
            tfs_tensor_unref(s[t].x[i]);
        }
        free(s[t].r);
    }
    tfs_batch_queue_stats qs;
    tfs_batch_queue_stats_get(e.q, &qs);
    ck_assert_int_eq(qs.tasks_completed, SUB_THREADS * SUB_TASKS);
    ck_assert_int_eq(qs.queued_tasks, 0);
    ck_assert_int_lt(qs.batches_run, SUB_THREADS * SUB_TASKS);   /* some batching happened */
    /* Every batch and every task (none is split) counted, whatever the threads' interleaving. */
    ck_assert_int_eq(hist_sum(qs.batch_size_counts, 0, TFS_BATCH_SIZE_BOUNDS),
                     qs.batches_run);
    ck_assert_int_eq(qs.batch_size_sum, qs.rows_run + qs.padding_rows);
    ck_assert_int_eq(hist_sum(qs.queue_delay_counts, 0, TFS_BATCH_DELAY_BOUNDS),
                     SUB_THREADS * SUB_TASKS);
    free(s);
    env_stop(&e);
}
END_TEST

Suite *suite_batching_lifecycle(void)
{
    Suite *s = suite_create("batching-lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_full_queue_refuses_at_once);
    tcase_add_test(tc, test_cancel_while_queued_and_while_running);
    tcase_add_test(tc, test_cancel_split_task_with_a_piece_running);
    tcase_add_test(tc, test_shutdown_runs_every_task_once);
    tcase_add_test(tc, test_many_threads_submitting);
    suite_add_tcase(s, tc);
    return s;
}
