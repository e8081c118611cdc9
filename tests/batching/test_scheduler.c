/* The two schedulers as a user of a batching queue sees them. Adaptive (the default): a lone
 * request on an idle queue runs at once however long batch_timeout_micros is; tasks gather into
 * one batch only while every batch thread is busy, and that batch runs as soon as a thread frees,
 * up to max_batch_size rows. Fixed (TF Serving's): the same lone request waits out the timeout. */
#include <check.h>

#include "tests/batching/helpers.h"

/* A split task does not starve the tasks behind it: with one batch thread, a 38-row task split
 * into batches of 4 and a 1-row task sent just after it, the 1-row task runs in the second batch
 * (after the big task's running one), not after all ten; it does not join the big task's last
 * batch, which has room; and the big task's answer is still every row's, in order. Both
 * schedulers (fixed with a 0 timeout: every batch is ready at once). */
START_TEST(test_scheduler_split_task_does_not_starve_small_ones)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(1000, 0);
    o.enable_large_batch_splitting = true;
    o.max_execution_batch_size = 4;
    o.max_enqueued_batches = 100;
    env_start_sched(&e, 1, _i ? TFS_BATCH_SCHEDULER_FIXED : TFS_BATCH_SCHEDULER_ADAPTIVE, &o,
                    MODEL_LINEAR);
    model_gate(&e.m, true);   /* the thread takes the big task's first batch and waits */
    tfs_tensor *big = ramp(38, LIN_IN, 0), *small = ramp(1, LIN_IN, 5000), *late = NULL;
    result r[3];
    submit_x(&e, big, 0, &r[0], TFS_OK);
    model_wait_batches(&e.m, 1);
    submit_x(&e, small, 0, &r[1], TFS_OK);
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 2, 10000));
    ck_assert_int_eq(e.m.batches, 11);
    ck_assert_int_eq(e.m.sizes[1], 1);           /* the small task ran alone, second */
    ck_assert_float_eq(e.m.seen[4], 5000.0f);
    ck_assert_int_eq(e.m.sizes[10], 2);          /* the big task's last batch kept its 2 rows */
    assert_linear(&r[0], big);
    assert_linear(&r[1], small);

    /* Once the big task is done, small tasks batch as before. */
    late = ramp(1, LIN_IN, 7000);
    submit_x(&e, late, 0, &r[2], TFS_OK);
    ck_assert(waiter_wait(&e.w, 3, 10000));
    assert_linear(&r[2], late);
    for (int i = 0; i < 3; i++)
        result_clear(&r[i]);
    tfs_tensor_unref(big);
    tfs_tensor_unref(small);
    tfs_tensor_unref(late);
    env_stop(&e);
}
END_TEST

Suite *suite_batching_scheduler(void);

START_TEST(test_scheduler_adaptive_is_the_default)
{
    ck_assert_int_eq(tfs_batcher_opts_default().scheduler, TFS_BATCH_SCHEDULER_ADAPTIVE);
    tfs_batcher_opts bo = tfs_batcher_opts_default();
    bo.num_batch_threads = 1;
    bo.scheduler = TFS_BATCH_SCHEDULER_COUNT;
    tfs_batcher *b = (tfs_batcher *)&bo;
    tfs_status st;
    ck_assert_int_eq(tfs_batcher_new(&bo, &b, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(b);
}
END_TEST

/* One task alone on an idle queue with a 1 s timeout: the free batch thread runs it at once. */
START_TEST(test_scheduler_adaptive_idle_queue_runs_a_lone_task_at_once)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(64, 1000000);
    env_start_sched(&e, 1, TFS_BATCH_SCHEDULER_ADAPTIVE, &o, MODEL_LINEAR);
    for (int i = 0; i < 3; i++) {   /* every request, not just the first */
        tfs_tensor *x = ramp(2, LIN_IN, 0.25f * (float)(i + 1));
        result r;
        int64_t t0 = tfs_batch_now_ns();
        submit_x(&e, x, 0, &r, TFS_OK);
        ck_assert(waiter_wait(&e.w, i + 1, 10000));
        int64_t took_us = (r.done_ns - t0) / 1000;
        ck_assert_msg(took_us < 100000, "a lone task took %lld us (timeout 1 s)",
                      (long long)took_us);
        assert_linear(&r, x);
        result_clear(&r);
        tfs_tensor_unref(x);
    }
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 3);
    /* Three delays under 100 ms: all in the buckets up to le 100 ms (index 9). */
    ck_assert_int_eq(hist_sum(s.queue_delay_counts, 0, 9), 3);
    ck_assert_int_eq(hist_sum(s.queue_delay_counts, 0, TFS_BATCH_DELAY_BOUNDS), 3);
    ck_assert_int_lt(s.queue_delay_sum_us, 3 * 100000);
    env_stop(&e);
}
END_TEST

/* The same queue with the fixed scheduler keeps TF Serving's behaviour: the task waits out the
 * timeout although the batch thread is idle. */
START_TEST(test_scheduler_fixed_waits_out_the_timeout)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(64, 200000);
    env_start_sched(&e, 1, TFS_BATCH_SCHEDULER_FIXED, &o, MODEL_LINEAR);
    tfs_tensor *x = ramp(1, LIN_IN, 3);
    result r;
    int64_t t0 = tfs_batch_now_ns();
    submit_x(&e, x, 0, &r, TFS_OK);
    ck_assert(waiter_wait(&e.w, 1, 10000));
    ck_assert_int_ge((r.done_ns - t0) / 1000, 200000);
    assert_linear(&r, x);
    result_clear(&r);
    tfs_tensor_unref(x);
    env_stop(&e);
}
END_TEST

/* With `threads` batch threads (loop index + 1): while all of them run (held at the model's gate),
 * three tasks queue and then run together in one batch, long before the 10 s timeout. With two
 * threads, the second task is taken by the free thread at once while the first thread is busy. */
START_TEST(test_scheduler_adaptive_busy_threads_gather_a_batch)
{
    const int threads = _i + 1;
    env e;
    tfs_batch_queue_opts o = queue_opts(16, 10 * 1000000);
    env_start_sched(&e, threads, TFS_BATCH_SCHEDULER_ADAPTIVE, &o, MODEL_LINEAR);
    model_gate(&e.m, true);
    tfs_tensor *x[5];
    result r[5];
    int64_t t0 = tfs_batch_now_ns();
    for (int i = 0; i < threads; i++) {   /* one running task per thread */
        x[i] = ramp(1, LIN_IN, (float)i);
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
        model_wait_batches(&e.m, i + 1);
    }
    for (int i = threads; i < threads + 3; i++) {
        x[i] = ramp(1, LIN_IN, 10.0f * (float)i);
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    }
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.running_batches, threads);
    ck_assert_int_eq(s.queued_tasks, 3);
    ck_assert_int_eq(s.queued_batches, 1);
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, threads + 3, 10000));
    ck_assert_int_lt(tfs_batch_now_ns() - t0, 5000000000LL);
    ck_assert_int_eq(e.m.batches, threads + 1);
    for (int i = 0; i < threads; i++)
        ck_assert_int_eq(e.m.sizes[i], 1);
    ck_assert_int_eq(e.m.sizes[threads], 3);
    for (int i = 0; i < threads + 3; i++) {
        assert_linear(&r[i], x[i]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    env_stop(&e);
}
END_TEST

/* What queued while the thread was busy runs in batches of at most max_batch_size rows, each as
 * soon as the thread is free again. */
START_TEST(test_scheduler_adaptive_batches_up_to_max_batch_size)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(4, 10 * 1000000);
    env_start_sched(&e, 1, TFS_BATCH_SCHEDULER_ADAPTIVE, &o, MODEL_LINEAR);
    model_gate(&e.m, true);
    tfs_tensor *x[7];
    result r[7];
    x[0] = ramp(1, LIN_IN, 0);
    submit_x(&e, x[0], 0, &r[0], TFS_OK);
    model_wait_batches(&e.m, 1);
    for (int i = 1; i < 7; i++) {
        x[i] = ramp(1, LIN_IN, 5.0f * (float)i);
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    }
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 7, 5000));
    ck_assert_int_eq(e.m.batches, 3);
    ck_assert_int_eq(e.m.sizes[0], 1);
    ck_assert_int_eq(e.m.sizes[1], 4);
    ck_assert_int_eq(e.m.sizes[2], 2);
    for (int i = 0; i < 7; i++) {
        assert_linear(&r[i], x[i]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    env_stop(&e);
}
END_TEST

Suite *suite_batching_scheduler(void)
{
    Suite *s = suite_create("batching-scheduler");
    TCase *tc = tcase_create("scheduler");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_scheduler_adaptive_is_the_default);
    tcase_add_test(tc, test_scheduler_adaptive_idle_queue_runs_a_lone_task_at_once);
    tcase_add_test(tc, test_scheduler_fixed_waits_out_the_timeout);
    tcase_add_loop_test(tc, test_scheduler_adaptive_busy_threads_gather_a_batch, 0, 2);
    tcase_add_test(tc, test_scheduler_adaptive_batches_up_to_max_batch_size);
    tcase_add_loop_test(tc, test_scheduler_split_task_does_not_starve_small_ones, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
