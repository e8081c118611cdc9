/* Helpers for the batching tests: see helpers.h. */
#include "tests/batching/helpers.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const float W[LIN_IN][LIN_OUT] = {{0.5f, -1.25f}, {2.0f, 0.75f}, {-0.3f, 1.1f}};
static const float B[LIN_OUT] = {0.1f, -0.2f};

void linear_row(const float *x, float *y)
{
    for (int j = 0; j < LIN_OUT; j++) {
        float acc = B[j];
        for (int k = 0; k < LIN_IN; k++)
            acc += x[k] * W[k][j];
        y[j] = acc;
    }
}

void model_init(model *m, enum model_kind kind)
{
    memset(m, 0, sizeof *m);
    m->kind = kind;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
}

void model_deinit(model *m)
{
    tfs_tensor_unref(m->last_input);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
}

void model_gate(model *m, bool closed)
{
    pthread_mutex_lock(&m->mu);
    m->gate_closed = closed;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

void model_wait_batches(model *m, int n)
{
    pthread_mutex_lock(&m->mu);
    while (m->batches < n)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
}

bool model_saw(model *m, float v)
{
    pthread_mutex_lock(&m->mu);
    bool found = false;
    for (int i = 0; i < m->n_seen && !found; i++)
        found = m->seen[i] == v;
    pthread_mutex_unlock(&m->mu);
    return found;
}

static void record(model *m, const tfs_named_tensor *in, int n_in)
{
    const tfs_tensor *x = in[0].tensor;
    int b = m->batches++;
    if (b < 256) {
        m->sizes[b] = x->dims[0];
        m->inner[b] = x->rank > 1 ? x->dims[1] : 0;
        m->n_in[b] = n_in;
        m->dtype[b] = x->dtype;
        snprintf(m->name0[b], sizeof m->name0[b], "%s", in[0].name);
    }
    if (x->dtype == TFS_DTYPE_FLOAT) {
        int64_t rn = x->dims[0] ? x->nelem / x->dims[0] : 0;
        for (int64_t r = 0; r < x->dims[0] && rn > 0 && m->n_seen < MAX_SEEN; r++)
            m->seen[m->n_seen++] = ((const float *)x->data)[r * rn];
    }
    tfs_tensor_unref(m->last_input);
    m->last_input = tfs_tensor_ref(in[0].tensor);
    pthread_cond_broadcast(&m->cv);
}

enum tfs_code model_run(void *ctx, const tfs_named_tensor *in, int n_in, int64_t deadline_ns,
                        tfs_tensor **out, int n_out, tfs_status *st)
{
    model *m = ctx;
    const tfs_tensor *x = in[0].tensor;
    pthread_mutex_lock(&m->mu);
    record(m, in, n_in);
    m->last_deadline = deadline_ns;
    while (m->gate_closed)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
    atomic_fetch_add(&m->running, 1);
    if (m->sleep_us)
        usleep((useconds_t)m->sleep_us);
    atomic_fetch_sub(&m->running, 1);
    int64_t rows = x->dims[0], rn = rows ? x->nelem / rows : 0;
    bool bad_dim = false;
    for (int64_t r = 0; r < rows && x->dtype == TFS_DTYPE_FLOAT && rn > 0; r++) {
        float v = ((const float *)x->data)[r * rn];
        if (v == -1.0f)
            return TFS_ERR(st, TFS_INTERNAL, "boom");
        bad_dim |= v == -2.0f;
    }
    enum tfs_code rc = TFS_OK;
    for (int o = 0; o < n_out && rc == TFS_OK; o++) {
        if (m->kind == MODEL_ECHO) {
            out[o] = tfs_tensor_ref(in[o < n_in ? o : 0].tensor);
            continue;
        }
        int64_t dims[2] = {bad_dim ? rows + 1 : rows, m->kind == MODEL_LINEAR ? LIN_OUT : rn};
        if ((rc = tfs_tensor_new(TFS_DTYPE_FLOAT, 2, dims, &out[o], st)) != TFS_OK)
            break;
        float *y = out[o]->data;
        const float *xv = x->data;
        for (int64_t r = 0; r < rows; r++) {
            if (m->kind == MODEL_LINEAR)
                linear_row(xv + r * LIN_IN, y + r * LIN_OUT);
            else
                for (int64_t k = 0; k < rn; k++)
                    y[r * rn + k] = 2.0f * xv[r * rn + k] + 1.0f + (float)o;
        }
    }
    return rc;
}

void waiter_init(waiter *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->done = 0;
}

void waiter_deinit(waiter *w)
{
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

bool waiter_wait(waiter *w, int n, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (w->done < n && rc == 0)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    bool ok = w->done >= n;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

void result_init(result *r, waiter *w)
{
    memset(r, 0, sizeof *r);
    r->code = -1;
    r->w = w;
}

void result_clear(result *r)
{
    for (int i = 0; i < r->n_out; i++)
        tfs_tensor_unref(r->out[i]);
    r->n_out = 0;
}

void on_done(void *ctx, enum tfs_code code, const tfs_status *st, tfs_tensor **outs, int n_out)
{
    result *r = ctx;
    r->code = code;
    snprintf(r->msg, sizeof r->msg, "%s", st ? st->msg : "");
    ck_assert_int_le(n_out, 4);
    for (int i = 0; i < n_out; i++)
        r->out[i] = outs[i];
    r->n_out = n_out;
    r->done_ns = tfs_batch_now_ns();
    r->thread = pthread_self();
    atomic_fetch_add(&r->calls, 1);
    if (r->w) {
        pthread_mutex_lock(&r->w->mu);
        r->w->done++;
        pthread_cond_broadcast(&r->w->cv);
        pthread_mutex_unlock(&r->w->mu);
    }
}

tfs_tensor *ramp(int64_t rows, int64_t cols, float base)
{
    int64_t dims[2] = {rows, cols};
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, dims, &t, &st), TFS_OK);
    for (int64_t i = 0; i < t->nelem; i++)
        ((float *)t->data)[i] = base + (float)i;
    return t;
}

int64_t hist_sum(const uint64_t *counts, int first, int last)
{
    int64_t n = 0;
    for (int i = first; i <= last; i++)
        n += (int64_t)counts[i];
    return n;
}

int delay_bucket(int64_t us)
{
    static const int64_t le[] = {100,   250,   500,   1000,   2500,   5000,
                                 10000, 25000, 50000, 100000, 250000, 1000000};
    int i = 0;
    while (i < 12 && us > le[i])
        i++;
    return i;
}

void env_start(env *e, int threads, const tfs_batch_queue_opts *o, enum model_kind kind)
{
    env_start_sched(e, threads, TFS_BATCH_SCHEDULER_FIXED, o, kind);
}

void env_start_sched(env *e, int threads, enum tfs_batch_scheduler sched,
                     const tfs_batch_queue_opts *o, enum model_kind kind)
{
    tfs_status st;
    model_init(&e->m, kind);
    waiter_init(&e->w);
    tfs_batcher_opts bo = tfs_batcher_opts_default();
    bo.num_batch_threads = threads;
    bo.scheduler = sched;
    ck_assert_int_eq(tfs_batcher_new(&bo, &e->b, &st), TFS_OK);
    ck_assert_msg(tfs_batch_queue_new(e->b, o, model_run, &e->m, &e->q, &st) == TFS_OK, "%s",
                  st.msg);
}

void env_stop(env *e)
{
    tfs_batch_queue_free(e->q);
    tfs_batcher_free(e->b);
    model_deinit(&e->m);
    waiter_deinit(&e->w);
}

void submit_x(env *e, tfs_tensor *x, int64_t deadline_ns, result *r, enum tfs_code want)
{
    tfs_status st;
    tfs_named_tensor in[] = {{"x", x}};
    result_init(r, &e->w);
    enum tfs_code rc = tfs_batch_submit(e->q, in, 1, deadline_ns, on_done, r, NULL, &st);
    ck_assert_msg(rc == want, "submit: got %s (%s), want %s", tfs_code_name(rc), st.msg,
                  tfs_code_name(want));
}

tfs_batch_queue_opts queue_opts(int64_t max, int64_t timeout_us)
{
    tfs_batch_queue_opts o = tfs_batch_queue_opts_default();
    o.name = "m:serving_default";
    o.max_batch_size = max;
    o.batch_timeout_micros = timeout_us;
    return o;
}

void assert_linear(const result *r, const tfs_tensor *x)
{
    ck_assert_int_eq(atomic_load(&r->calls), 1);
    ck_assert_msg(r->code == TFS_OK, "%s: %s", tfs_code_name(r->code), r->msg);
    ck_assert_int_eq(r->n_out, 1);
    const tfs_tensor *y = r->out[0];
    ck_assert_int_eq(y->rank, 2);
    ck_assert_int_eq(y->dims[0], x->dims[0]);
    ck_assert_int_eq(y->dims[1], LIN_OUT);
    for (int64_t row = 0; row < x->dims[0]; row++) {
        float want[LIN_OUT];
        linear_row((const float *)x->data + row * LIN_IN, want);
        ck_assert_mem_eq((const float *)y->data + row * LIN_OUT, want, sizeof want);
    }
}
