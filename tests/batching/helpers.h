/* Shared pieces of the batching tests: run callbacks that do real per-row work (a linear layer
 * y = x W + b in plain C, an echo, a row sum) and record what they were given, and a result
 * collector for done callbacks that counts calls per task. */
#ifndef TFS_TESTS_BATCHING_HELPERS_H
#define TFS_TESTS_BATCHING_HELPERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "batching/batching.h"
#include "tests/support/tfs-test.h"

#define LIN_IN  3
#define LIN_OUT 2
#define MAX_SEEN 4096

enum model_kind { MODEL_LINEAR, MODEL_ECHO, MODEL_AFFINE };

/* What a run callback does and what it saw. */
typedef struct model {
    enum model_kind kind;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             batches;                 /* runs entered */
    int64_t         sizes[256];              /* dim 0 of input 0 per run (first 256) */
    int64_t         inner[256];              /* dim 1 of input 0 per run */
    int             n_in[256];
    enum tfs_dtype  dtype[256];
    char            name0[256][16];
    float           seen[MAX_SEEN];          /* first element of every float input row seen */
    int             n_seen;
    tfs_tensor     *last_input;              /* a reference to the last run's input 0 */
    int64_t         last_deadline;           /* the deadline the last run was given */
    bool            gate_closed;             /* runs wait while true */
    int             sleep_us;
    atomic_int      running;
} model;

void model_init(model *m, enum model_kind kind);
void model_deinit(model *m);
void model_gate(model *m, bool closed);
void model_wait_batches(model *m, int n);     /* until n runs have entered */
bool model_saw(model *m, float v);

/* The run callback for every model kind. Rows whose first element is -1 make it fail with
 * INTERNAL "boom"; -2 makes it return an output with a wrong dim 0. */
enum tfs_code model_run(void *ctx, const tfs_named_tensor *in, int n_in, int64_t deadline_ns,
                        tfs_tensor **out, int n_out, tfs_status *st);

/* y = x W + b for one row, the reference for MODEL_LINEAR. */
void linear_row(const float *x, float *y);
/* Options of a queue named "m:serving_default" with these max_batch_size and batch_timeout_micros,
 * the rest TF Serving's defaults. */
tfs_batch_queue_opts queue_opts(int64_t max, int64_t timeout_us);

/* One done-callback record. */
typedef struct result {
    atomic_int     calls;
    enum tfs_code  code;
    char           msg[TFS_STATUS_MSG_MAX];
    tfs_tensor    *out[4];
    int            n_out;
    int64_t        done_ns;
    pthread_t      thread;
    struct waiter *w;
} result;
/* Asserts r completed once, OK, and its one output is y = x W + b of x, bit for bit. */
void assert_linear(const result *r, const tfs_tensor *x);

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             done;
} waiter;

void waiter_init(waiter *w);
void waiter_deinit(waiter *w);
bool waiter_wait(waiter *w, int n, int timeout_ms);   /* false on timeout */
void result_init(result *r, waiter *w);
void result_clear(result *r);                           /* unrefs outputs */
void on_done(void *ctx, enum tfs_code code, const tfs_status *st, tfs_tensor **outs, int n_out);

/* A batcher with one queue running a model, and a waiter for its results. */
typedef struct env {
    tfs_batcher     *b;
    tfs_batch_queue *q;
    model            m;
    waiter           w;
} env;

/* env_start uses the FIXED scheduler: most tests count on batch_timeout_micros to gather tasks. */
void env_start(env *e, int threads, const tfs_batch_queue_opts *o, enum model_kind kind);
void env_start_sched(env *e, int threads, enum tfs_batch_scheduler sched,
                     const tfs_batch_queue_opts *o, enum model_kind kind);
void env_stop(env *e);   /* frees the queue and the batcher, then the model */
/* Submits one input named "x" and asserts the returned code. */
void submit_x(env *e, tfs_tensor *x, int64_t deadline_ns, result *r, enum tfs_code want);

/* Float tensor [rows, cols] with values base + i (row-major). */
tfs_tensor *ramp(int64_t rows, int64_t cols, float base);

/* The sum of a histogram's per-bucket counts[first..last], inclusive. */
int64_t hist_sum(const uint64_t *counts, int first, int last);
/* The queue delay bucket a value of us microseconds belongs in, from the bounds docs/metrics.md
 * gives (100 us ... 1 s, then +Inf at 12), written out here as the reference. */
int delay_bucket(int64_t us);

#endif
