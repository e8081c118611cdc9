/* Batch formation as a user of a batching queue sees it: results identical whether a request runs
 * alone or batched, padding that never leaks, timeouts, full batches, separate batches for
 * unbatchable shapes, pad_variable_length_inputs, large-task splitting, deadlines, failing runs,
 * zero-row tasks, and the submit-time errors with TF Serving's messages. */
#include <check.h>
#include <string.h>
#include <unistd.h>

#include "tests/batching/helpers.h"

/* What merging costs, counted by the queue: 8 one-row tasks merged into one batch copy each input
 * row once (8 rows' bytes) and no output byte (each task's output is a view of its rows of the
 * batch output: consecutive rows of one buffer); one 8-row task copies nothing at all. Split
 * tasks are the one case whose outputs are copied (joined), and that is counted too. */
START_TEST(test_merging_copies_each_row_once_and_outputs_are_views)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(8, 300000);
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *x[8], *whole = ramp(8, LIN_IN, 0.5f);
    result r[9];
    for (int i = 0; i < 8; i++) {   /* the 8th fills the batch, which then runs at once */
        x[i] = ramp(1, LIN_IN, 0.5f + (float)(LIN_IN * i));
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    }
    ck_assert(waiter_wait(&e.w, 8, 10000));
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 1);
    ck_assert_int_eq(s.bytes_merged, 8 * LIN_IN * (int64_t)sizeof(float));
    ck_assert_int_eq(s.bytes_reassembled, 0);
    const float *y0 = r[0].out[0]->data;
    for (int i = 0; i < 8; i++) {
        assert_linear(&r[i], x[i]);
        ck_assert_ptr_eq(r[i].out[0]->data, y0 + i * LIN_OUT);
    }

    submit_x(&e, whole, 0, &r[8], TFS_OK);   /* 8 rows: a full batch of its own */
    ck_assert(waiter_wait(&e.w, 9, 10000));
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 2);
    ck_assert_int_eq(s.bytes_merged, 8 * LIN_IN * (int64_t)sizeof(float));   /* unchanged */
    ck_assert_int_eq(s.bytes_reassembled, 0);
    assert_linear(&r[8], whole);
    /* The same rows, so the same outputs bit for bit, merged or not. */
    ck_assert_mem_eq(r[8].out[0]->data, y0, 8 * LIN_OUT * sizeof(float));
    for (int i = 0; i < 9; i++)
        result_clear(&r[i]);
    for (int i = 0; i < 8; i++)
        tfs_tensor_unref(x[i]);
    tfs_tensor_unref(whole);
    env_stop(&e);

    /* A 10-row task split into batches of 4 joins 10 output rows. */
    o = queue_opts(10, 0);
    o.enable_large_batch_splitting = true;
    o.max_execution_batch_size = 4;
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *big = ramp(10, LIN_IN, 2);
    submit_x(&e, big, 0, &r[0], TFS_OK);
    ck_assert(waiter_wait(&e.w, 1, 10000));
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 3);
    ck_assert_int_eq(s.bytes_merged, 0);   /* each piece runs on rows of the task's tensor */
    ck_assert_int_eq(s.bytes_reassembled, 10 * LIN_OUT * (int64_t)sizeof(float));
    assert_linear(&r[0], big);
    result_clear(&r[0]);
    tfs_tensor_unref(big);
    env_stop(&e);
}
END_TEST

/* Merging with padding rows and a split task: a 1-row task and the first 3 rows of a 5-row task
 * make one batch of 4; the task's last 2 rows run alone, padded to the allowed size 4. Every task
 * gets exactly its rows' results, and bytes_merged counts each batch input written: 8 rows, the
 * padding rows included, each written once. */
START_TEST(test_merging_with_padding_and_a_split_task)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(8, 300000);
    const int64_t allowed[] = {4};
    o.allowed_batch_sizes = allowed;
    o.n_allowed_batch_sizes = 1;
    o.enable_large_batch_splitting = true;
    o.max_execution_batch_size = 4;
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *one = ramp(1, LIN_IN, -3.25f), *five = ramp(5, LIN_IN, 0.125f);
    result r[2];
    submit_x(&e, one, 0, &r[0], TFS_OK);
    submit_x(&e, five, 0, &r[1], TFS_OK);
    ck_assert(waiter_wait(&e.w, 2, 10000));
    ck_assert_int_eq(e.m.batches, 2);
    ck_assert_int_eq(e.m.sizes[0], 4);
    ck_assert_int_eq(e.m.sizes[1], 4);   /* 2 rows padded to 4 */
    /* The last batch's padding rows repeat its first row: row 3 of the 5-row task. */
    const float *last = e.m.last_input->data, *row3 = (const float *)five->data + 3 * LIN_IN;
    for (int row = 0; row < 4; row++)
        ck_assert_mem_eq(last + row * LIN_IN, row == 1 ? row3 + LIN_IN : row3,
                         LIN_IN * sizeof(float));
    assert_linear(&r[0], one);
    assert_linear(&r[1], five);
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.rows_run, 6);
    ck_assert_int_eq(s.padding_rows, 2);
    ck_assert_int_eq(s.bytes_merged, 8 * LIN_IN * (int64_t)sizeof(float));
    ck_assert_int_eq(s.bytes_reassembled, 5 * LIN_OUT * (int64_t)sizeof(float));
    for (int i = 0; i < 2; i++)
        result_clear(&r[i]);
    tfs_tensor_unref(one);
    tfs_tensor_unref(five);
    env_stop(&e);
}
END_TEST

Suite *suite_batching_formation(void);

START_TEST(test_batched_results_equal_results_alone)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(16, 300000);
    env_start(&e, 1, &o, MODEL_LINEAR);
    const int64_t rows[] = {1, 2, 3, 4, 1, 2};
    tfs_tensor *x[6];
    result r[6];
    for (int i = 0; i < 6; i++) {
        x[i] = ramp(rows[i], LIN_IN, 0.37f * (float)(i + 1));
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    }
    ck_assert(waiter_wait(&e.w, 6, 10000));
    /* 13 rows fit one batch of 16: they ran together, then each row came back to its task. */
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 1);
    ck_assert_int_eq(s.rows_run, 13);
    ck_assert_int_eq(hist_sum(s.batch_size_counts, 0, TFS_BATCH_SIZE_BOUNDS), 1);
    ck_assert_int_eq(s.batch_size_counts[4], 1);   /* 13 rows: the bucket le 16 */
    ck_assert_int_eq(s.batch_size_sum, 13);
    ck_assert_int_eq(hist_sum(s.queue_delay_counts, 0, TFS_BATCH_DELAY_BOUNDS), 6);
    ck_assert_int_eq(s.tasks_completed, 6);
    /* And each output is what the task gets when it runs alone through the same callback. */
    for (int i = 0; i < 6; i++) {
        assert_linear(&r[i], x[i]);
        tfs_tensor *alone[1] = {NULL};
        tfs_status st;
        ck_assert_int_eq(model_run(&e.m, (tfs_named_tensor[]){{"x", x[i]}}, 1, 0, alone, 1, &st),
                         TFS_OK);
        ck_assert_mem_eq(alone[0]->data, r[i].out[0]->data, alone[0]->nbytes);
        tfs_tensor_unref(alone[0]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    env_stop(&e);
}
END_TEST

/* A batch's run gets the latest deadline of its tasks (it may stop there, when no task wants the
 * result any more), or none when one of its tasks has none. */
static int64_t batch_deadline(const int64_t *deadlines, int n)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(16, 300000);
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *x[4];
    result r[4];
    for (int i = 0; i < n; i++) {
        x[i] = ramp(1, LIN_IN, 0.5f * (float)(i + 1));
        submit_x(&e, x[i], deadlines[i], &r[i], TFS_OK);
    }
    ck_assert(waiter_wait(&e.w, n, 10000));
    ck_assert_int_eq(e.m.batches, 1);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(r[i].code, TFS_OK);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    int64_t d = e.m.last_deadline;
    env_stop(&e);
    return d;
}

START_TEST(test_batch_run_gets_the_latest_deadline)
{
    int64_t now = tfs_batch_now_ns(), s = 1000000000;
    ck_assert_int_eq(batch_deadline((int64_t[]){now + 60 * s, now + 90 * s, now + 70 * s}, 3),
                     now + 90 * s);
    ck_assert_int_eq(batch_deadline((int64_t[]){now + 60 * s, 0, now + 70 * s}, 3), 0);
    ck_assert_int_eq(batch_deadline((int64_t[]){0}, 1), 0);
}
END_TEST

START_TEST(test_allowed_batch_sizes_padding_never_leaks)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(8, 200000);
    const int64_t allowed[] = {4, 8};
    o.allowed_batch_sizes = allowed;
    o.n_allowed_batch_sizes = 2;
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *x[3];
    result r[3];
    for (int i = 0; i < 3; i++) {
        x[i] = ramp(1, LIN_IN, 10.0f * (float)(i + 1));
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    }
    ck_assert(waiter_wait(&e.w, 3, 10000));
    ck_assert_int_eq(e.m.batches, 1);
    ck_assert_int_eq(e.m.sizes[0], 4);   /* 3 rows padded to the allowed size 4 */
    /* The padding row is a copy of the first row of the last task (TF's BatchingSession). */
    ck_assert_mem_eq((float *)e.m.last_input->data + 3 * LIN_IN, x[2]->data,
                     LIN_IN * sizeof(float));
    for (int i = 0; i < 3; i++) {
        assert_linear(&r[i], x[i]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.padding_rows, 1);
    ck_assert_int_eq(s.rows_run, 3);
    ck_assert_int_eq(s.batch_size_counts[2], 1);   /* the padded size 4: the bucket le 4 */
    ck_assert_int_eq(s.batch_size_sum, 4);
    env_stop(&e);
}
END_TEST

START_TEST(test_timeout_closes_a_partial_batch)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(64, 100000);   /* 100 ms */
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *x = ramp(2, LIN_IN, 1);
    result r;
    int64_t t0 = tfs_batch_now_ns();
    submit_x(&e, x, 0, &r, TFS_OK);
    ck_assert(waiter_wait(&e.w, 1, 10000));
    int64_t waited_us = (r.done_ns - t0) / 1000;
    ck_assert_int_ge(waited_us, 100000);
    ck_assert_int_lt(waited_us, 100000 + 1500000);   /* generous: 2 shared cores */
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    /* One task piece: the sum is its delay, and it sits in the one bucket holding that value. */
    ck_assert_int_eq(hist_sum(s.queue_delay_counts, 0, TFS_BATCH_DELAY_BOUNDS), 1);
    ck_assert_int_ge(s.queue_delay_sum_us, 100000);
    ck_assert_int_eq(s.queue_delay_counts[delay_bucket(s.queue_delay_sum_us)], 1);
    assert_linear(&r, x);
    result_clear(&r);
    tfs_tensor_unref(x);
    env_stop(&e);
}
END_TEST

/* The histograms count every batch, not a sample of them: 3002 one-task batches, one at a time
 * (the adaptive scheduler runs a lone task at once), of sizes cycling through 1, 2, 3, 4, 5, 8,
 * 9, 33, 64 and 100 rows, then one of 4096 and one of 5000. Each bucket's count is written out
 * from those sizes (le 1: the 1s; le 2: the 2s; le 4: 3 and 4; le 8: 5 and 8; le 16: 9;
 * le 64: 33 and 64; le 128: 100; le 4096; +Inf: 5000), and so are the sum and the count.
 * Over a thousand batches between two reads, so a bounded sample of them would show. */
START_TEST(test_histograms_count_every_batch)
{
    enum { CYCLE = 10, ROUNDS = 300 };
    static const int64_t sizes[CYCLE] = {1, 2, 3, 4, 5, 8, 9, 33, 64, 100};
    env e;
    tfs_batch_queue_opts o = queue_opts(8192, 1000000);
    env_start_sched(&e, 1, TFS_BATCH_SCHEDULER_ADAPTIVE, &o, MODEL_ECHO);
    tfs_tensor *x[CYCLE + 2];
    for (int k = 0; k < CYCLE; k++)
        x[k] = ramp(sizes[k], LIN_IN, 0);
    x[CYCLE] = ramp(4096, LIN_IN, 0);
    x[CYCLE + 1] = ramp(5000, LIN_IN, 0);
    int n = 0;
    for (int i = 0; i < CYCLE * ROUNDS + 2; i++) {
        result r;
        submit_x(&e, x[i < CYCLE * ROUNDS ? i % CYCLE : CYCLE + i - CYCLE * ROUNDS], 0, &r,
                 TFS_OK);
        ck_assert(waiter_wait(&e.w, ++n, 10000));
        ck_assert_int_eq(r.code, TFS_OK);
        result_clear(&r);
    }
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 3002);
    const uint64_t want[TFS_BATCH_SIZE_BOUNDS + 1] = {300, 300, 600, 600, 300, 0,
                                                      600, 300, 0,   0,   0,   1, 1};
    for (int i = 0; i <= TFS_BATCH_SIZE_BOUNDS; i++)
        ck_assert_msg(s.batch_size_counts[i] == want[i], "bucket %d: %llu, want %llu", i,
                      (unsigned long long)s.batch_size_counts[i],
                      (unsigned long long)want[i]);
    ck_assert_int_eq(hist_sum(s.batch_size_counts, 0, TFS_BATCH_SIZE_BOUNDS), s.batches_run);
    ck_assert_int_eq(s.batch_size_sum, 300 * 229 + 4096 + 5000);
    ck_assert_int_eq(s.batch_size_sum, s.rows_run + s.padding_rows);
    /* One piece per task, each counted once. */
    ck_assert_int_eq(hist_sum(s.queue_delay_counts, 0, TFS_BATCH_DELAY_BOUNDS), 3002);
    ck_assert_int_eq(s.tasks_completed, 3002);
    for (int k = 0; k < CYCLE + 2; k++)
        tfs_tensor_unref(x[k]);
    env_stop(&e);
}
END_TEST

/* A task that waits behind a batch held in the run callback for 150 ms is counted in the bucket
 * of its wait: above le 100 ms. */
START_TEST(test_queue_delay_histogram_counts_the_wait)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(16, 10 * 1000000);
    env_start_sched(&e, 1, TFS_BATCH_SCHEDULER_ADAPTIVE, &o, MODEL_LINEAR);
    model_gate(&e.m, true);
    tfs_tensor *x[2] = {ramp(1, LIN_IN, 1), ramp(1, LIN_IN, 2)};
    result r[2];
    submit_x(&e, x[0], 0, &r[0], TFS_OK);
    model_wait_batches(&e.m, 1);   /* the thread holds x[0]'s batch */
    submit_x(&e, x[1], 0, &r[1], TFS_OK);
    usleep(150000);
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 2, 10000));
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 2);
    ck_assert_int_eq(hist_sum(s.queue_delay_counts, 0, TFS_BATCH_DELAY_BOUNDS), 2);
    /* le 250 ms (index 10) and above: the held-back task (the other one, taken by an idle
     * thread, would be too only if its wake-up took over 100 ms); its 150 ms are in the sum. */
    ck_assert_int_ge(hist_sum(s.queue_delay_counts, 10, TFS_BATCH_DELAY_BOUNDS), 1);
    ck_assert_int_ge(s.queue_delay_sum_us, 150000);
    for (int i = 0; i < 2; i++) {
        assert_linear(&r[i], x[i]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    env_stop(&e);
}
END_TEST

START_TEST(test_full_batch_runs_before_timeout)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(4, 10 * 1000000);   /* 10 s: only fullness can close it */
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *x[4];
    result r[4];
    int64_t t0 = tfs_batch_now_ns();
    for (int i = 0; i < 4; i++) {
        x[i] = ramp(1, LIN_IN, (float)i);
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    }
    ck_assert(waiter_wait(&e.w, 4, 5000));
    ck_assert_int_lt(tfs_batch_now_ns() - t0, 3000000000LL);
    ck_assert_int_eq(e.m.batches, 1);
    ck_assert_int_eq(e.m.sizes[0], 4);
    for (int i = 0; i < 4; i++) {
        assert_linear(&r[i], x[i]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
    }
    env_stop(&e);
}
END_TEST

START_TEST(test_unbatchable_tasks_go_to_separate_batches)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(32, 200000);
    env_start(&e, 1, &o, MODEL_ECHO);
    tfs_status st;
    int64_t d1[] = {1};
    tfs_tensor *w3 = ramp(1, 3, 1), *w4 = ramp(2, 4, 100), *w3b = ramp(2, 3, 50), *i32 = NULL;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT32, 1, d1, &i32, &st), TFS_OK);
    result r[5];
    submit_x(&e, w3, 0, &r[0], TFS_OK);
    submit_x(&e, w4, 0, &r[1], TFS_OK);    /* other width */
    submit_x(&e, w3b, 0, &r[2], TFS_OK);   /* joins w3 */
    submit_x(&e, i32, 0, &r[3], TFS_OK);   /* other dtype */
    result_init(&r[4], &e.w);               /* other input name */
    ck_assert_int_eq(tfs_batch_submit(e.q, (tfs_named_tensor[]){{"z", w3}}, 1, 0, on_done, &r[4],
                                      NULL, &st), TFS_OK);
    ck_assert(waiter_wait(&e.w, 5, 10000));
    ck_assert_int_eq(e.m.batches, 4);
    int64_t total = 0;
    for (int b = 0; b < 4; b++) {
        total += e.m.sizes[b];
        if (e.m.dtype[b] == TFS_DTYPE_FLOAT && e.m.inner[b] == 3 && !strcmp(e.m.name0[b], "x"))
            ck_assert_int_eq(e.m.sizes[b], 3);   /* w3 + w3b together */
    }
    ck_assert_int_eq(total, 1 + 2 + 2 + 1 + 1);
    /* The echo gives every task back exactly its own rows. */
    tfs_tensor *in[5] = {w3, w4, w3b, i32, w3};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(r[i].code, TFS_OK);
        ck_assert(tfs_shape_equal(r[i].out[0]->rank, r[i].out[0]->dims, in[i]->rank, in[i]->dims));
        ck_assert_mem_eq(r[i].out[0]->data, in[i]->data, in[i]->nbytes);
        result_clear(&r[i]);
    }
    tfs_tensor_unref(w3);
    tfs_tensor_unref(w4);
    tfs_tensor_unref(w3b);
    tfs_tensor_unref(i32);
    env_stop(&e);
}
END_TEST

START_TEST(test_pad_variable_length_inputs)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(32, 200000);
    o.pad_variable_length_inputs = true;
    env_start(&e, 1, &o, MODEL_ECHO);
    int64_t d1[] = {1, 2}, d2[] = {2, 4};
    const float v1[] = {5, 6}, v2[] = {1, 2, 3, 4, 11, 12, 13, 14};
    tfs_tensor *a = tfs_test_tensor_f32(2, d1, v1), *b = tfs_test_tensor_f32(2, d2, v2);
    result r[2];
    submit_x(&e, a, 0, &r[0], TFS_OK);
    submit_x(&e, b, 0, &r[1], TFS_OK);
    ck_assert(waiter_wait(&e.w, 2, 10000));
    ck_assert_int_eq(e.m.batches, 1);
    ck_assert_int_eq(e.m.inner[0], 4);
    /* a's row was padded to width 4 with its first element, as TF's PadTensor does. */
    int64_t wa[] = {1, 4};
    const float pa[] = {5, 6, 5, 5};
    tfs_test_assert_f32(r[0].out[0], 2, wa, pa, 0);
    tfs_test_assert_f32(r[1].out[0], 2, d2, v2, 0);
    result_clear(&r[0]);
    result_clear(&r[1]);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    env_stop(&e);
}
END_TEST

START_TEST(test_large_task_is_split_and_reassembled_in_order)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(10, 50000);
    o.enable_large_batch_splitting = true;
    o.max_execution_batch_size = 4;
    o.max_enqueued_batches = 100;
    env_start(&e, 1, &o, MODEL_LINEAR);
    model_gate(&e.m, true);   /* hold the thread so both tasks queue before anything runs */
    tfs_tensor *a = ramp(3, LIN_IN, 0.5f), *b = ramp(7, LIN_IN, 100.25f);
    tfs_tensor *big = ramp(11, LIN_IN, 1);
    tfs_tensor *first = ramp(4, LIN_IN, 7);
    result r[4];
    submit_x(&e, first, 0, &r[0], TFS_OK);   /* a full batch: the thread takes it and waits */
    model_wait_batches(&e.m, 1);
    submit_x(&e, a, 0, &r[1], TFS_OK);
    submit_x(&e, b, 0, &r[2], TFS_OK);       /* 1 row joins a, then 4, then 2 */
    submit_x(&e, big, 0, &r[3], TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(r[3].msg, "Task size 11 is larger than maximum input batch size 10");
    model_gate(&e.m, false);
    ck_assert(waiter_wait(&e.w, 4, 10000));
    ck_assert_int_eq(e.m.batches, 4);
    ck_assert_int_eq(e.m.sizes[1], 4);
    ck_assert_int_eq(e.m.sizes[2], 4);
    ck_assert_int_eq(e.m.sizes[3], 2);
    assert_linear(&r[0], first);
    assert_linear(&r[1], a);
    assert_linear(&r[2], b);
    for (int i = 0; i < 3; i++)
        result_clear(&r[i]);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_tensor_unref(big);
    tfs_tensor_unref(first);
    env_stop(&e);
}
END_TEST

START_TEST(test_deadline_passed_is_never_run)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(32, 150000);
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *late = ramp(1, LIN_IN, 777), *past = ramp(1, LIN_IN, 555), *ok = ramp(1, LIN_IN, 3);
    result r[3];
    submit_x(&e, late, tfs_batch_now_ns() + 20000000, &r[0], TFS_OK);   /* 20 ms < the timeout */
    submit_x(&e, past, tfs_batch_now_ns() - 1, &r[1], TFS_OK);
    submit_x(&e, ok, 0, &r[2], TFS_OK);
    ck_assert(waiter_wait(&e.w, 3, 10000));
    ck_assert_int_eq(r[0].code, TFS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(r[1].code, TFS_DEADLINE_EXCEEDED);
    ck_assert_int_eq(r[0].n_out, 0);
    ck_assert(!model_saw(&e.m, 777));
    ck_assert(!model_saw(&e.m, 555));
    assert_linear(&r[2], ok);
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.deadline_exceeded, 2);
    ck_assert_int_eq(s.rows_run, 1);
    result_clear(&r[2]);
    tfs_tensor_unref(late);
    tfs_tensor_unref(past);
    tfs_tensor_unref(ok);
    env_stop(&e);
}
END_TEST

START_TEST(test_failing_run_fails_every_task_and_the_queue_goes_on)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(3, 10 * 1000000);
    const char *names[] = {"y"};
    o.output_names = names;
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *x[3] = {ramp(1, LIN_IN, 1), ramp(1, LIN_IN, -1), ramp(1, LIN_IN, 2)};
    result r[3];
    for (int i = 0; i < 3; i++)
        submit_x(&e, x[i], 0, &r[i], TFS_OK);
    ck_assert(waiter_wait(&e.w, 3, 10000));
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(atomic_load(&r[i].calls), 1);
        ck_assert_int_eq(r[i].code, TFS_INTERNAL);
        ck_assert_str_eq(r[i].msg, "boom");
    }
    /* An output whose dim 0 is not the batch size fails the batch naming the output. */
    tfs_tensor *bad[3] = {ramp(1, LIN_IN, 4), ramp(1, LIN_IN, -2), ramp(1, LIN_IN, 5)};
    for (int i = 0; i < 3; i++)
        submit_x(&e, bad[i], 0, &r[i], TFS_OK);
    ck_assert(waiter_wait(&e.w, 6, 10000));
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(r[i].code, TFS_INTERNAL);
        ck_assert_msg(strstr(r[i].msg, "output 'y'") &&
                          strstr(r[i].msg, "expected the batch size 3"),
                      "%s", r[i].msg);
    }
    /* The next batch works. */
    tfs_tensor *good[3] = {ramp(1, LIN_IN, 6), ramp(1, LIN_IN, 7), ramp(1, LIN_IN, 8)};
    for (int i = 0; i < 3; i++)
        submit_x(&e, good[i], 0, &r[i], TFS_OK);
    ck_assert(waiter_wait(&e.w, 9, 10000));
    for (int i = 0; i < 3; i++) {
        assert_linear(&r[i], good[i]);
        result_clear(&r[i]);
        tfs_tensor_unref(x[i]);
        tfs_tensor_unref(bad[i]);
        tfs_tensor_unref(good[i]);
    }
    tfs_batch_queue_stats s;
    tfs_batch_queue_stats_get(e.q, &s);
    ck_assert_int_eq(s.batches_run, 3);
    ck_assert_int_eq(s.batches_failed, 2);
    env_stop(&e);
}
END_TEST

START_TEST(test_zero_row_tasks)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(8, 100000);
    const int64_t allowed[] = {4, 8};
    o.allowed_batch_sizes = allowed;
    o.n_allowed_batch_sizes = 2;
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_tensor *empty = ramp(0, LIN_IN, 0), *one = ramp(1, LIN_IN, 9);
    result r[3];
    /* Alone: run unpadded with 0 rows; the output has 0 rows and the model's width. */
    submit_x(&e, empty, 0, &r[0], TFS_OK);
    ck_assert(waiter_wait(&e.w, 1, 10000));
    ck_assert_int_eq(r[0].code, TFS_OK);
    ck_assert_int_eq(r[0].out[0]->dims[0], 0);
    ck_assert_int_eq(r[0].out[0]->dims[1], LIN_OUT);
    ck_assert_int_eq(e.m.sizes[0], 0);
    result_clear(&r[0]);
    /* With others: it adds no rows and gets 0 rows back. */
    submit_x(&e, empty, 0, &r[1], TFS_OK);
    submit_x(&e, one, 0, &r[2], TFS_OK);
    ck_assert(waiter_wait(&e.w, 3, 10000));
    ck_assert_int_eq(e.m.batches, 2);
    ck_assert_int_eq(e.m.sizes[1], 4);
    ck_assert_int_eq(r[1].code, TFS_OK);
    ck_assert_int_eq(r[1].out[0]->dims[0], 0);
    assert_linear(&r[2], one);
    result_clear(&r[1]);
    result_clear(&r[2]);
    tfs_tensor_unref(empty);
    tfs_tensor_unref(one);
    env_stop(&e);
}
END_TEST

START_TEST(test_submit_errors_call_done_once_on_the_caller)
{
    env e;
    tfs_batch_queue_opts o = queue_opts(4, 0);
    env_start(&e, 1, &o, MODEL_LINEAR);
    tfs_status st;
    tfs_tensor *s = NULL, *a = ramp(2, 3, 0), *b = ramp(3, 3, 0), *big = ramp(5, 3, 0);
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &s, &st), TFS_OK);
    struct { tfs_named_tensor in[2]; int n; const char *msg; } cases[] = {
        {{{"x", s}}, 1, "Batching Run() input tensors must have at least one dimension"},
        {{{"x", a}, {"y", b}}, 2,
         "Batching Run() input tensors must have equal 0th-dimension size"},
        {{{"x", a}, {"x", a}}, 2, "input 'x' given twice"},
        {{{"x", a}}, 0, "Batching Run() must have at least one input tensor"},
        {{{"x", big}}, 1, "Task size 5 is larger than maximum input batch size 4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        result_init(&r, &e.w);
        tfs_batch_task *h = (tfs_batch_task *)&r;   /* must come back NULL */
        ck_assert_int_eq(tfs_batch_submit(e.q, cases[i].in, cases[i].n, 0, on_done, &r, &h, &st),
                         TFS_INVALID_ARGUMENT);
        ck_assert_ptr_null(h);
        ck_assert_int_eq(atomic_load(&r.calls), 1);   /* already, on this thread */
        ck_assert(pthread_equal(r.thread, pthread_self()));
        ck_assert_int_eq(r.code, TFS_INVALID_ARGUMENT);
        ck_assert_msg(strstr(r.msg, cases[i].msg) && strstr(st.msg, cases[i].msg), "%s", r.msg);
    }
    tfs_batch_queue_stats qs;
    tfs_batch_queue_stats_get(e.q, &qs);
    ck_assert_int_eq(qs.rejected_invalid, 5);
    ck_assert_int_eq(e.m.batches, 0);
    tfs_tensor_unref(s);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_tensor_unref(big);
    env_stop(&e);
}
END_TEST

START_TEST(test_queue_options_are_checked)
{
    tfs_batcher *b = NULL;
    tfs_batch_queue *q = NULL;
    tfs_status st;
    model m;
    model_init(&m, MODEL_ECHO);
    tfs_batcher_opts bo = {.num_batch_threads = 1};
    ck_assert_int_eq(tfs_batcher_new(&bo, &b, &st), TFS_OK);
    tfs_batch_queue_opts o = queue_opts(8, 0);
    const int64_t bad_last[] = {2, 4}, decreasing[] = {4, 2, 8}, ok[] = {2, 4};
    o.allowed_batch_sizes = bad_last;
    o.n_allowed_batch_sizes = 2;
    ck_assert_int_eq(tfs_batch_queue_new(b, &o, model_run, &m, &q, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "Last entry in allowed_batch_sizes must match max_batch_size; last "
                             "entry was 4; expected 8");
    ck_assert_ptr_null(q);
    o.allowed_batch_sizes = decreasing;
    o.n_allowed_batch_sizes = 3;
    ck_assert_int_eq(tfs_batch_queue_new(b, &o, model_run, &m, &q, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "allowed_batch_sizes entries must be monotonically increasing");
    /* With splitting the last allowed size is the execution batch size. */
    o.enable_large_batch_splitting = true;
    o.max_execution_batch_size = 4;
    o.allowed_batch_sizes = ok;
    o.n_allowed_batch_sizes = 2;
    ck_assert_int_eq(tfs_batch_queue_new(b, &o, model_run, &m, &q, &st), TFS_OK);
    tfs_batch_queue_free(q);
    o.max_execution_batch_size = 9;
    ck_assert_int_eq(tfs_batch_queue_new(b, &o, model_run, &m, &q, &st), TFS_INVALID_ARGUMENT);
    o = queue_opts(0, 0);
    ck_assert_int_eq(tfs_batch_queue_new(b, &o, model_run, &m, &q, &st), TFS_INVALID_ARGUMENT);
    bo.num_batch_threads = -1;
    tfs_batcher *b2 = NULL;
    ck_assert_int_eq(tfs_batcher_new(&bo, &b2, &st), TFS_INVALID_ARGUMENT);
    /* TF Serving's defaults. */
    o = tfs_batch_queue_opts_default();
    ck_assert_int_eq(o.max_batch_size, 1000);
    ck_assert_int_eq(o.batch_timeout_micros, 0);
    ck_assert_int_eq(o.max_enqueued_batches, 10);
    ck_assert(!o.pad_variable_length_inputs && !o.enable_large_batch_splitting);
    tfs_batcher_free(b);
    model_deinit(&m);
}
END_TEST

Suite *suite_batching_formation(void)
{
    Suite *s = suite_create("batching-formation");
    TCase *tc = tcase_create("formation");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_batched_results_equal_results_alone);
    tcase_add_test(tc, test_merging_copies_each_row_once_and_outputs_are_views);
    tcase_add_test(tc, test_batch_run_gets_the_latest_deadline);
    tcase_add_test(tc, test_allowed_batch_sizes_padding_never_leaks);
    tcase_add_test(tc, test_merging_with_padding_and_a_split_task);
    tcase_add_test(tc, test_timeout_closes_a_partial_batch);
    tcase_add_test(tc, test_histograms_count_every_batch);
    tcase_add_test(tc, test_queue_delay_histogram_counts_the_wait);
    tcase_add_test(tc, test_full_batch_runs_before_timeout);
    tcase_add_test(tc, test_unbatchable_tasks_go_to_separate_batches);
    tcase_add_test(tc, test_pad_variable_length_inputs);
    tcase_add_test(tc, test_large_task_is_split_and_reassembled_in_order);
    tcase_add_test(tc, test_deadline_passed_is_never_run);
    tcase_add_test(tc, test_failing_run_fails_every_task_and_the_queue_goes_on);
    tcase_add_test(tc, test_zero_row_tasks);
    tcase_add_test(tc, test_submit_errors_call_done_once_on_the_caller);
    tcase_add_test(tc, test_queue_options_are_checked);
    suite_add_tcase(s, tc);
    return s;
}
