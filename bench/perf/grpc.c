/* gRPC load driver of tfserve-perf, on the gRPC C core client API (1.51: grpc_channel_create
 * with grpc_insecure_credentials_create). One channel (one HTTP/2 connection) carries every call
 * of the run; each driver thread owns a completion queue and its share of the concurrent calls.
 * A call is one batch (send metadata, message and close; receive metadata, message and status),
 * so a completion is one event. Closed and open loop as in rest.c. In the open loop a pacer
 * thread per worker sleeps until each request is due (clock_nanosleep, microsecond-exact) and
 * starts it, while the worker thread only drains the queue: waiting on the queue itself would
 * wake up to a millisecond late (gRPC's timers have millisecond resolution), and that lateness
 * would be charged to the server. Latency runs from the due time. Calls carry a deadline of
 * --timeout; a non-OK status is counted under its code. */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/perf/perf.h"
#include "runtime/alloc.h"
#include "tensorflow_serving/apis/predict.pb-c.h"

#define METHOD "/tensorflow.serving.PredictionService/Predict"

#define MAX_CHANNELS 64

struct tfs_perf_grpc {
    int           n_channels;
    grpc_channel *channels[MAX_CHANNELS]; /* each its own connection (local subchannel pools) */
    grpc_slice    method;
};

typedef struct grpc_worker grpc_worker;

typedef struct perf_call {
    grpc_call          *call; /* NULL: idle */
    grpc_metadata_array init_md, trail_md;
    grpc_byte_buffer   *send, *recv;
    grpc_status_code    status;
    grpc_slice          details;
    uint64_t            t_sched;
    grpc_worker        *w;
} perf_call;

struct grpc_worker {
    pthread_t             thread, pacer;
    pthread_mutex_t       mu;       /* calls, idle list, outstanding, stats: worker vs pacer */
    bool                  paced;    /* open loop: the pacer has sent its last request */
    int                   index, n_workers, cap;
    tfs_perf_grpc        *g;
    grpc_channel         *channel;
    const tfs_perf_opts  *o;
    const tfs_perf_step  *step;
    const tfs_perf_clock *clock;
    grpc_byte_buffer     *request;
    grpc_completion_queue *cq;
    perf_call            *calls;
    int                  *idle;
    int                   n_idle, outstanding;
    uint64_t              k;
    double                interval_ns;
    bool                  cancelled;
    tfs_perf_stats        stats;
    char                 *first_body;
    size_t                first_len;
};

enum tfs_code tfs_perf_grpc_new(const tfs_perf_opts *o, tfs_perf_grpc **out, tfs_status *st)
{
    char target[300];
    *out = NULL;
    tfs_perf_grpc *g = tfs_calloc(1, sizeof *g);
    if (!g)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    grpc_init();
    snprintf(target, sizeof target, "%s:%d", o->host, o->port);
    /* Without a local subchannel pool, channels with equal arguments share one connection. */
    grpc_arg a[2] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, .value.integer = -1},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, .value.integer = 1}};
    grpc_channel_args args = {2, a};
    g->method = grpc_slice_from_static_string(METHOD);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    for (; g->n_channels < o->grpc_channels && g->n_channels < MAX_CHANNELS; g->n_channels++) {
        g->channels[g->n_channels] = grpc_channel_create(target, creds, &args);
        if (!g->channels[g->n_channels])
            break;
    }
    grpc_channel_credentials_release(creds);
    if (g->n_channels < o->grpc_channels) {
        tfs_perf_grpc_free(g);
        return TFS_ERR(st, TFS_UNAVAILABLE, "cannot create a gRPC channel to %s", target);
    }
    *out = g;
    return TFS_OK;
}

void tfs_perf_grpc_free(tfs_perf_grpc *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_channels; i++)
        grpc_channel_destroy(g->channels[i]);
    tfs_free(g);
    grpc_shutdown();
}

static bool running(const grpc_worker *w, uint64_t now)
{
    return now < w->clock->t1_ns;
}

static bool measured(const grpc_worker *w, uint64_t t)
{
    return t >= w->clock->t0_ns && t < w->clock->t1_ns;
}

static void call_clear(perf_call *c)
{
    grpc_metadata_array_destroy(&c->init_md);
    grpc_metadata_array_destroy(&c->trail_md);
    grpc_metadata_array_init(&c->init_md);
    grpc_metadata_array_init(&c->trail_md);
    if (c->send)
        grpc_byte_buffer_destroy(c->send);
    if (c->recv)
        grpc_byte_buffer_destroy(c->recv);
    grpc_slice_unref(c->details);
    c->details = grpc_empty_slice();
    c->send = c->recv = NULL;
    if (c->call)
        grpc_call_unref(c->call);
    c->call = NULL;
}

/* Starts one call on c; false (after counting the error) if gRPC refused to start it. */
static bool call_start(perf_call *c, uint64_t t_sched)
{
    grpc_worker *w = c->w;
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis((int64_t)(w->o->timeout_s * 1000), GPR_TIMESPAN));
    c->t_sched = t_sched;
    c->call = grpc_channel_create_call(w->channel, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
                                       w->g->method, NULL, deadline, NULL);
    c->send = grpc_byte_buffer_copy(w->request);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &c->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->trail_md;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->details;
    if (!c->call || grpc_call_start_batch(c->call, ops, 6, c, NULL) != GRPC_CALL_OK) {
        call_clear(c);
        uint64_t now = tfs_perf_now_ns();
        if (measured(w, t_sched))
            tfs_perf_stats_add(&w->stats, 0, 0, now);
        return false;
    }
    w->outstanding++;
    return true;
}

static void keep_first(grpc_worker *w, perf_call *c)
{
    if (w->first_body || !c->recv)
        return;
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, c->recv))
        return;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    size_t n = GRPC_SLICE_LENGTH(s);
    w->first_body = tfs_malloc(n + 1);
    if (w->first_body) {
        memcpy(w->first_body, GRPC_SLICE_START_PTR(s), n);
        w->first_body[n] = 0;
        w->first_len = n;
    }
    grpc_slice_unref(s);
}

/* tfserve's trailing metadata tfserve-queue-micros / tfserve-compute-micros: key's value
 * (tfs_perf_micros_value), -1 when absent. */
static int64_t trailer_micros(const grpc_metadata_array *md, const char *key)
{
    for (size_t i = 0; i < md->count; i++) {
        if (!grpc_slice_str_cmp(md->metadata[i].key, key))
            return tfs_perf_micros_value((const char *)GRPC_SLICE_START_PTR(md->metadata[i].value),
                                         GRPC_SLICE_LENGTH(md->metadata[i].value));
    }
    return -1;
}

static void call_done(perf_call *c, bool success) /* holds w->mu */
{
    grpc_worker *w = c->w;
    uint64_t now = tfs_perf_now_ns();
    int slot = !success ? 0 : c->status == GRPC_STATUS_OK ? -1 : (int)c->status;
    if (slot < 0 && !c->recv)
        slot = 0; /* OK without a message: not a Predict answer */
    if (slot < 0)
        keep_first(w, c);
    w->outstanding--;
    if (measured(w, c->t_sched)) {
        tfs_perf_stats_add(&w->stats, slot, now - c->t_sched, now);
        if (slot < 0)
            tfs_perf_stats_add_server(&w->stats,
                                      trailer_micros(&c->trail_md, "tfserve-queue-micros"),
                                      trailer_micros(&c->trail_md, "tfserve-compute-micros"));
    }
    call_clear(c);
    if (!running(w, now))
        return;
    if (w->step->open_loop)
        w->idle[w->n_idle++] = (int)(c - w->calls);
    else
        while (!call_start(c, tfs_perf_now_ns()) && running(w, tfs_perf_now_ns()))
            ;
}

static uint64_t due_of(const grpc_worker *w)
{
    return w->clock->start_ns + (uint64_t)((double)w->k * w->interval_ns) +
           (uint64_t)((double)w->index * w->interval_ns / w->n_workers);
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000u), .tv_nsec = (long)(t_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* Open loop: starts each request when it is due, on an idle call slot; when all --max-outstanding
 * slots are busy the due request waits (and its latency, counted from the due time, grows). */
static void *pacer_main(void *arg)
{
    grpc_worker *w = arg;
    for (;;) {
        uint64_t due = due_of(w);
        if (due >= w->clock->t1_ns)
            break;
        sleep_until(due);
        pthread_mutex_lock(&w->mu);
        if (w->n_idle) {
            w->k++;
            perf_call *c = &w->calls[w->idle[--w->n_idle]];
            if (!call_start(c, due))
                w->n_idle++; /* did not start: the slot stays idle */
            pthread_mutex_unlock(&w->mu);
        } else {
            pthread_mutex_unlock(&w->mu);
            sleep_until(tfs_perf_now_ns() + 20000); /* all busy: look again in 20 us */
        }
    }
    pthread_mutex_lock(&w->mu);
    w->paced = true;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void *worker_main(void *arg)
{
    grpc_worker *w = arg;
    uint64_t now = tfs_perf_now_ns();
    pthread_mutex_lock(&w->mu);
    if (!w->step->open_loop) {
        for (int i = 0; i < w->cap; i++)
            call_start(&w->calls[i], now);
        w->n_idle = 0;
        w->paced = true;
    }
    pthread_mutex_unlock(&w->mu);
    for (;;) {
        now = tfs_perf_now_ns();
        pthread_mutex_lock(&w->mu);
        bool done = w->paced && !running(w, now) && w->outstanding == 0;
        if (!done && !running(w, now) && now >= w->clock->drain_ns && !w->cancelled) {
            for (int i = 0; i < w->cap; i++)
                if (w->calls[i].call)
                    grpc_call_cancel(w->calls[i].call, NULL);
            w->cancelled = true;
        }
        pthread_mutex_unlock(&w->mu);
        if (done)
            break;
        /* 20 ms: the loop's conditions are checked at least this often */
        gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(20, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(w->cq, dl, NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            pthread_mutex_lock(&w->mu);
            call_done(ev.tag, ev.success != 0);
            pthread_mutex_unlock(&w->mu);
        }
    }
    return NULL;
}

static void worker_deinit(grpc_worker *w)
{
    if (w->cq) {
        grpc_completion_queue_shutdown(w->cq);
        while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(w->cq);
    }
    for (int i = 0; w->calls && i < w->cap; i++) {
        call_clear(&w->calls[i]);
        grpc_metadata_array_destroy(&w->calls[i].init_md);
        grpc_metadata_array_destroy(&w->calls[i].trail_md);
    }
    tfs_free(w->calls);
    tfs_free(w->idle);
    tfs_free(w->first_body);
    pthread_mutex_destroy(&w->mu);
}

enum tfs_code tfs_perf_grpc_run_step(tfs_perf_grpc *g, const tfs_perf_opts *o,
                                     const tfs_perf_payload *p, const tfs_perf_step *step,
                                     tfs_perf_step_result *r, tfs_status *st)
{
    tfs_perf_clock clock;
    int n_workers = o->threads, started = 0;
    enum tfs_code code = TFS_OK;
    memset(r, 0, sizeof *r);
    r->step = *step;
    tfs_perf_stats_init(&r->stats);
    if (!step->open_loop && step->concurrency < n_workers)
        n_workers = step->concurrency;
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)p->grpc_msg, p->grpc_len);
    grpc_byte_buffer *request = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    grpc_worker *ws = tfs_calloc((size_t)n_workers, sizeof *ws);
    if (!ws) {
        grpc_byte_buffer_destroy(request);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for %d workers", n_workers);
    }
    for (int i = 0; i < n_workers; i++) {
        grpc_worker *w = &ws[i];
        w->index = i;
        w->n_workers = n_workers;
        w->g = g;
        w->channel = g->channels[i % g->n_channels];
        w->o = o;
        w->step = step;
        w->clock = &clock;
        w->request = request;
        pthread_mutex_init(&w->mu, NULL);
        w->cap = step->open_loop ? tfs_perf_share(o->max_outstanding, i, n_workers)
                                 : tfs_perf_share(step->concurrency, i, n_workers);
        if (w->cap < 1)
            w->cap = 1;
        w->interval_ns = step->open_loop ? 1e9 * n_workers / step->rate : 0;
        tfs_perf_stats_init(&w->stats);
        w->calls = tfs_calloc((size_t)w->cap, sizeof *w->calls);
        w->idle  = tfs_calloc((size_t)w->cap, sizeof *w->idle);
        w->cq    = grpc_completion_queue_create_for_next(NULL);
        if (!w->calls || !w->idle) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "worker %d: out of memory", i);
            goto fail;
        }
        for (int j = 0; j < w->cap; j++) {
            perf_call *c = &w->calls[j];
            c->w = w;
            c->details = grpc_empty_slice();
            grpc_metadata_array_init(&c->init_md);
            grpc_metadata_array_init(&c->trail_md);
            w->idle[w->n_idle++] = j;
        }
    }
    tfs_perf_clock_init(&clock, o);
    for (; started < n_workers; started++) {
        grpc_worker *w = &ws[started];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot start driver thread %d", started);
            break;
        }
        if (step->open_loop && pthread_create(&w->pacer, NULL, pacer_main, w) != 0) {
            pthread_mutex_lock(&w->mu);
            w->paced = true; /* no requests from this worker; its thread still ends */
            pthread_mutex_unlock(&w->mu);
            pthread_join(w->thread, NULL);
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot start pacer thread %d", started);
            break;
        }
    }
    for (int i = 0; i < started; i++) {
        if (step->open_loop)
            pthread_join(ws[i].pacer, NULL);
        pthread_join(ws[i].thread, NULL);
    }
    if (code != TFS_OK)
        goto fail;
    for (int i = 0; i < n_workers; i++) {
        tfs_perf_stats_merge(&r->stats, &ws[i].stats);
        if (!r->first_body && ws[i].first_body) {
            r->first_body = ws[i].first_body;
            r->first_len  = ws[i].first_len;
            ws[i].first_body = NULL;
        }
    }
    uint64_t end = r->stats.last_done_ns > clock.t1_ns ? r->stats.last_done_ns : clock.t1_ns;
    r->elapsed_s  = (double)(end - clock.t0_ns) / 1e9;
    r->throughput = r->elapsed_s > 0 ? (double)r->stats.ok / r->elapsed_s : 0;
fail:
    for (int i = 0; i < n_workers; i++)
        worker_deinit(&ws[i]);
    tfs_free(ws);
    grpc_byte_buffer_destroy(request);
    return code;
}

/* ---------------------------------------------------------------- response -> JSON */

static json_t *leaf_json(const Tensorflow__TensorProto *t, size_t i)
{
    const ProtobufCBinaryData *raw = &t->tensor_content;
#define PICK(field, n_field, ctype, make)                                                     \
    do {                                                                                      \
        if (raw->len) {                                                                       \
            ctype x;                                                                          \
            if ((i + 1) * sizeof x > raw->len)                                                \
                return NULL;                                                                  \
            memcpy(&x, raw->data + i * sizeof x, sizeof x);                                   \
            return make(x);                                                                   \
        }                                                                                     \
        if (!t->n_field)                                                                      \
            return NULL;                                                                      \
        return make(t->field[t->n_field == 1 ? 0 : i < t->n_field ? i : t->n_field - 1]);     \
    } while (0)
    switch (t->dtype) {
    case TENSORFLOW__DATA_TYPE__DT_FLOAT: PICK(float_val, n_float_val, float, json_real);
    case TENSORFLOW__DATA_TYPE__DT_DOUBLE: PICK(double_val, n_double_val, double, json_real);
    case TENSORFLOW__DATA_TYPE__DT_INT32: PICK(int_val, n_int_val, int32_t, json_integer);
    case TENSORFLOW__DATA_TYPE__DT_INT64: PICK(int64_val, n_int64_val, int64_t, json_integer);
    case TENSORFLOW__DATA_TYPE__DT_BOOL: PICK(bool_val, n_bool_val, uint8_t, json_boolean);
    case TENSORFLOW__DATA_TYPE__DT_STRING:
        if (i >= t->n_string_val)
            return NULL;
        return json_stringn((const char *)t->string_val[i].data, t->string_val[i].len);
    default: return NULL;
    }
#undef PICK
}

static json_t *nested_json(const Tensorflow__TensorProto *t, size_t d, size_t *next)
{
    if (!t->tensor_shape || d == t->tensor_shape->n_dim)
        return leaf_json(t, (*next)++);
    json_t *a = json_array();
    for (int64_t i = 0; a && i < t->tensor_shape->dim[d]->size; i++) {
        json_t *v = nested_json(t, d + 1, next);
        if (!v || json_array_append_new(a, v) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

enum tfs_code tfs_perf_grpc_response_json(const uint8_t *msg, size_t len, char **out, tfs_status *st)
{
    *out = NULL;
    Tensorflow__Serving__PredictResponse *resp =
        tensorflow__serving__predict_response__unpack(NULL, len, msg);
    if (!resp)
        return TFS_ERR(st, TFS_DATA_LOSS, "the response is not a PredictResponse");
    json_t *outputs = json_object(), *root = json_object();
    enum tfs_code c = TFS_OK;
    for (size_t i = 0; i < resp->n_outputs; i++) {
        const Tensorflow__TensorProto *t = resp->outputs[i]->value;
        size_t next = 0;
        json_t *v = t ? nested_json(t, 0, &next) : NULL;
        if (!v) {
            c = TFS_ERR(st, TFS_UNIMPLEMENTED, "output '%s': dtype %d or its values not readable here",
                        resp->outputs[i]->key, t ? (int)t->dtype : -1);
            goto done;
        }
        json_object_set_new(outputs, resp->outputs[i]->key, v);
    }
    json_object_set(root, "outputs", outputs);
    char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    *out = text ? tfs_strdup(text) : NULL;
    free(text);
    if (!*out)
        c = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
done:
    json_decref(outputs);
    json_decref(root);
    tensorflow__serving__predict_response__free_unpacked(resp, NULL);
    return c;
}
