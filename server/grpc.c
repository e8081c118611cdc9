/* tfserve's gRPC server on the gRPC C core: ONE completion queue shared by several threads (so a
 * call that runs long holds one thread and the others keep taking calls off the queue; with a
 * queue per thread, calls already matched to the busy thread's queue would wait), a pool of calls
 * posted per registered method, and generic calls so that a method no one registered is answered
 * UNIMPLEMENTED at once instead of hanging until the client's deadline. Each call is answered with
 * a single batch (initial metadata, message, status, close). The handlers (grpc-api.c) turn
 * request bytes into response bytes through the service layer; a call whose deadline has passed
 * when it is taken off the queue is answered DEADLINE_EXCEEDED without running one.
 *
 * Predict and v2's ModelInfer are the exception to "handlers run here": they are decoded and
 * validated on the CQ thread, handed to the loader (tfs__grpc_predict_async,
 * tfs__grpc_v2_infer_async) and answered when their run completes. A run that completes on a
 * batch thread only posts its call to the responder, one thread of ours that encodes the response
 * and starts the answer batch (grpc_call_start_batch is thread-safe), so that the batch thread
 * goes on to its next batch instead of encoding and sending a batch's answers one by one. The
 * call stays counted in `live` and `active` until the CQ thread sees that batch complete, so
 * drain and shutdown wait for queued predicts; the responder stops only after the CQ threads
 * have, when no call is left to answer. The call's deadline becomes the task's deadline (not
 * started by then: DEADLINE_EXCEEDED, never run); the answer carries trailing metadata
 * tfserve-queue-micros and tfserve-compute-micros.
 *
 * Drain (tfs_grpc_quiesce) is grpc_server_shutdown_and_notify alone: the listener closes, clients
 * get GOAWAY, and the calls being answered finish; the C core reports the shutdown tag once none
 * is left. tfs_grpc_stop then does the rest below (cancelling whatever a timed-out drain left).
 * The C core's own log lines (gpr_log) go through our logger, module "grpc-core".
 *
 * Shutdown follows the order the C core needs (platform.md section 2): shutdown_and_notify, cancel
 * all calls, wait for the tag AND for every call object to come back (posted calls return with
 * success == 0 and are freed, not re-posted; calls being answered finish their batch), only then
 * shut the queue down (a batch started on a shut-down queue aborts the process), drain it, join
 * the threads, destroy server and queue, and grpc_shutdown.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/grpc-impl.h"
#include "server/grpc.h"
#include "server/metrics-impl.h"

#define LOG_MODULE "grpc"
/* Calls kept posted per method: a base plus some per thread, enough that a burst of new calls
 * never waits for a re-post (calls beyond the pool wait in the server, they are not refused). */
#define CALLS_PER_METHOD 16
#define CALLS_PER_THREAD 8
#define MAX_CQ_THREADS 64
/* Our defaults (message limits, no SO_REUSEPORT) plus what --grpc_channel_arguments adds. */
#define MAX_CHANNEL_ARGS 64

/* Exactly one of the handlers is set. */
typedef struct method {
    const char              *path;
    tfs__grpc_handler        handler;   /* runs on the CQ thread */
    tfs__grpc_state_handler  state;     /* the same, reading the health state too */
    tfs__grpc_async_handler  async;     /* answered from the run's completion (see answer) */
} method;

static enum tfs_code health_check(tfs_loader *l, const tfs_health *h, const uint8_t *in, size_t n,
                                  uint8_t **out, size_t *out_len, tfs_status *st);

#define V2 "/inference.GRPCInferenceService/"
static const method methods[] = {
    {"/tensorflow.serving.PredictionService/Predict", NULL, NULL, tfs__grpc_predict_async},
    {"/tensorflow.serving.PredictionService/GetModelMetadata", tfs__grpc_metadata, NULL, NULL},
    {"/tensorflow.serving.PredictionService/Classify", tfs__grpc_classify, NULL, NULL},
    {"/tensorflow.serving.PredictionService/Regress", tfs__grpc_regress, NULL, NULL},
    {"/tensorflow.serving.PredictionService/MultiInference", tfs__grpc_multi_inference, NULL,
     NULL},
    {"/tensorflow.serving.ModelService/GetModelStatus", tfs__grpc_model_status, NULL, NULL},
    {"/tensorflow.serving.ModelService/HandleReloadConfigRequest", tfs__grpc_reload_config, NULL,
     NULL},
    {"/grpc.health.v1.Health/Check", NULL, health_check, NULL},
    {V2 "ServerLive", NULL, tfs__grpc_v2_server_live, NULL},
    {V2 "ServerReady", NULL, tfs__grpc_v2_server_ready, NULL},
    {V2 "ModelReady", NULL, tfs__grpc_v2_model_ready, NULL},
    {V2 "ServerMetadata", NULL, tfs__grpc_v2_server_metadata, NULL},
    {V2 "ModelMetadata", NULL, tfs__grpc_v2_model_metadata, NULL},
    {V2 "ModelInfer", NULL, NULL, tfs__grpc_v2_infer_async},
};

#define N_METHODS ((int)(sizeof methods / sizeof methods[0]))
#define GENERIC (-1)

typedef struct call {
    tfs_grpc          *g;
    int                method;       /* index into methods, or GENERIC */
    bool               sending;      /* false: posted, waiting for a client */
    grpc_call         *call;
    gpr_timespec       deadline;
    grpc_metadata_array md;
    grpc_call_details  details;      /* GENERIC only */
    grpc_byte_buffer  *payload;
    grpc_byte_buffer  *resp;
    grpc_slice         status_details;
    int                cancelled;
    tfs__request_record rec;          /* from the call's start to its answer (any thread) */
    grpc_metadata      trailing[2];   /* tfserve-queue-micros, tfserve-compute-micros */
    int                n_trailing;
} call;

struct tfs_grpc {
    tfs_loader            *loader;
    tfs_health            *health;         /* borrowed; NULL: health not served */
    grpc_server           *server;
    grpc_completion_queue *cq;
    void                  *registered[N_METHODS];
    int                    port;
    int                    n_threads;
    int                    n_started;      /* threads running worker_main */
    pthread_t             *threads;
    bool                   grpc_inited;
    bool                   server_started;
    int                    shutdown_tag;   /* its address is the tag */
    atomic_bool            stopping;       /* no more re-posts */
    atomic_bool            tag_seen;       /* the server has stopped */
    atomic_bool            cq_shut;        /* grpc_completion_queue_shutdown was called */
    atomic_int             live;           /* call objects not yet freed */
    atomic_int             active;         /* calls taken off the queue, answer not yet sent */
    atomic_int             drain_answered; /* answers completed after the drain began */
    atomic_int             drain_cut;      /* of those, cancelled before the status went out */
    bool                   shutdown_called;   /* main thread only */
    bool                   drain_reported;    /* main thread only */
    /* The responder: Predict answers posted by batch threads, in arrival order. */
    pthread_t              responder;
    bool                   responder_started;
    bool                   resp_inited;       /* resp_mu and resp_cv */
    pthread_mutex_t        resp_mu;
    pthread_cond_t         resp_cv;
    tfs__grpc_job         *resp_head, *resp_tail;
    bool                   resp_stop;         /* under resp_mu */
};

tfs_grpc_opts tfs_grpc_opts_default(void)
{
    return (tfs_grpc_opts){
        .port = 8500, .bind_address = "0.0.0.0", .num_cq_threads = 2,
        .max_message_bytes = INT32_MAX, .channel_args = NULL};
}

int tfs_grpc_port(const tfs_grpc *g)
{
    return g ? g->port : 0;
}

/* ---- calls ---------------------------------------------------------------------------------- */

static void call_free(call *c)
{
    if (!c)
        return;
    atomic_fetch_sub(&c->g->live, 1);
    if (c->sending)
        atomic_fetch_sub(&c->g->active, 1);
    grpc_metadata_array_destroy(&c->md);
    if (c->method == GENERIC)
        grpc_call_details_destroy(&c->details);
    if (c->payload)
        grpc_byte_buffer_destroy(c->payload);
    if (c->resp)
        grpc_byte_buffer_destroy(c->resp);
    grpc_slice_unref(c->status_details);
    for (int i = 0; i < c->n_trailing; i++)
        grpc_slice_unref(c->trailing[i].value);
    if (c->call)
        grpc_call_unref(c->call);
    tfs_free(c);
}

/* Posts a fresh call for `m`. False when it cannot (out of memory, or the server is shutting
 * down); the pool then shrinks by one, which only costs latency. */
static bool post(tfs_grpc *g, int m)
{
    call           *c = tfs_calloc(1, sizeof *c);
    grpc_call_error e;

    if (!c)
        return false;
    atomic_fetch_add(&g->live, 1);
    c->g = g;
    c->method = m;
    c->status_details = grpc_empty_slice();
    grpc_metadata_array_init(&c->md);
    if (m == GENERIC) {
        grpc_call_details_init(&c->details);
        e = grpc_server_request_call(g->server, &c->call, &c->details, &c->md, g->cq, g->cq, c);
    } else {
        e = grpc_server_request_registered_call(g->server, g->registered[m], &c->call,
                                                &c->deadline, &c->md, &c->payload, g->cq, g->cq,
                                                c);
    }
    if (e != GRPC_CALL_OK) {
        call_free(c);
        return false;
    }
    return true;
}

static void slice_free(void *p)
{
    tfs_free(p);
}

static void send_answer(call *c, enum tfs_code code, const tfs_status *st, uint8_t *out,
                        size_t out_len, const tfs_run_times *t);

/* grpc.health.v1 is served only with a health state (UNIMPLEMENTED, as an unknown method,
 * without one). */
static enum tfs_code health_check(tfs_loader *l, const tfs_health *h, const uint8_t *in, size_t n,
                                  uint8_t **out, size_t *out_len, tfs_status *st)
{
    (void)l;
    if (!h)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "Method not found: /grpc.health.v1.Health/Check");
    return tfs__grpc_health_check(h, in, n, out, out_len, st);
}

/* tfs__grpc_predict_cb: a Predict's or ModelInfer's answer, on the responder or on the CQ
 * thread. */
static void predict_answered(void *ctx, enum tfs_code code, const tfs_status *st, uint8_t *out,
                             size_t out_len, const tfs_run_times *t)
{
    send_answer(ctx, code, st, out, out_len, t);
}

/* tfs__grpc_post_fn, from batch threads: O(1), as a completion must be. */
static void responder_post(void *ctx, tfs__grpc_job *job)
{
    tfs_grpc *g = ctx;
    job->next = NULL;
    pthread_mutex_lock(&g->resp_mu);
    if (g->resp_tail)
        g->resp_tail->next = job;
    else
        g->resp_head = job;
    g->resp_tail = job;
    pthread_cond_signal(&g->resp_cv);
    pthread_mutex_unlock(&g->resp_mu);
}

static void *responder_main(void *arg)
{
    tfs_grpc *g = arg;
    pthread_mutex_lock(&g->resp_mu);
    for (;;) {
        tfs__grpc_job *job = g->resp_head;
        if (!job) {
            if (g->resp_stop)
                break;
            pthread_cond_wait(&g->resp_cv, &g->resp_mu);
            continue;
        }
        g->resp_head = job->next;
        if (!g->resp_head)
            g->resp_tail = NULL;
        pthread_mutex_unlock(&g->resp_mu);
        job->run(job);
        pthread_mutex_lock(&g->resp_mu);
    }
    pthread_mutex_unlock(&g->resp_mu);
    return NULL;
}

/* The call's deadline on tfs_batch_now_ns()'s clock; 0 when it has none. */
static int64_t deadline_ns(const call *c)
{
    if (gpr_time_cmp(c->deadline, gpr_inf_future(c->deadline.clock_type)) == 0)
        return 0;
    gpr_timespec left = gpr_time_sub(c->deadline, gpr_now(c->deadline.clock_type));
    return tfs_batch_now_ns() + (int64_t)left.tv_sec * 1000000000 + left.tv_nsec;
}

/* Runs the handler and starts the one batch that answers the call. A Predict is handed to the
 * loader (batching) and answered from its completion callback: this thread goes back to the
 * queue at once and must not touch c after the hand-over. */
static void answer(call *c)
{
    tfs_grpc     *g = c->g;
    tfs_status    st;
    uint8_t      *out = NULL;
    size_t        out_len = 0;
    enum tfs_code code;

    tfs__request_begin(&c->rec, TFS_API_GRPC, c->method == GENERIC ? TFS__METHOD_OTHER
                            : tfs__method_from_grpc_path(methods[c->method].path));
    tfs_status_clear(&st);
    if (c->method == GENERIC) {
        char *path = grpc_slice_to_c_string(c->details.method);
        code = TFS_ERR(&st, TFS_UNIMPLEMENTED, "Method not found: %s", path ? path : "");
        gpr_free(path);
    } else if (gpr_time_cmp(gpr_now(c->deadline.clock_type), c->deadline) > 0) {
        /* The client has given up: running the model would only cost the other calls. */
        code = TFS_ERR(&st, TFS_DEADLINE_EXCEEDED, "Deadline Exceeded");
        TFS_LOG_DEBUG(LOG_MODULE, "%s: deadline passed before it ran; not run",
                      methods[c->method].path);
    } else if (!c->payload) {
        code = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "the request carried no message");
    } else {
        grpc_byte_buffer_reader r;
        if (!grpc_byte_buffer_reader_init(&r, c->payload)) {
            code = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "could not read the request message");
        } else {
            /* The reader decompresses and joins slices. */
            grpc_slice     in = grpc_byte_buffer_reader_readall(&r);
            const method  *m = &methods[c->method];
            grpc_byte_buffer_reader_destroy(&r);
            if (m->async) {
                tfs__request_record *rec = &c->rec;
                m->async(g->loader, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in),
                         deadline_ns(c), responder_post, g, predict_answered, c);
                tfs__request_detach(rec);   /* compares the pointer only: c may be gone */
                grpc_slice_unref(in);
                return;
            }
            if (m->state)
                code = m->state(g->loader, g->health, GRPC_SLICE_START_PTR(in),
                                GRPC_SLICE_LENGTH(in), &out, &out_len, &st);
            else
                code = m->handler(g->loader, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in),
                                  &out, &out_len, &st);
            grpc_slice_unref(in);
        }
    }
    send_answer(c, code, &st, out, out_len, NULL);
}

/* Records the request and starts the answer batch (thread-safe in the C core). The CQ thread
 * that sees the batch complete frees c. */
static void send_answer(call *c, enum tfs_code code, const tfs_status *st, uint8_t *out,
                        size_t out_len, const tfs_run_times *t)
{
    c->rec.code = code;
    if (t) {
        c->rec.runtime_seconds = (double)t->compute_us * 1e-6;
        c->rec.ran = code == TFS_OK || t->compute_us > 0;
    }
    tfs__request_done(&c->rec);
    if (t) {
        static const char *const keys[2] = {"tfserve-queue-micros", "tfserve-compute-micros"};
        int64_t vals[2] = {t->queue_us, t->compute_us};
        for (int i = 0; i < 2; i++) {
            char v[24];
            snprintf(v, sizeof v, "%lld", (long long)vals[i]);
            c->trailing[i].key = grpc_slice_from_static_string(keys[i]);
            c->trailing[i].value = grpc_slice_from_copied_string(v);
        }
        c->n_trailing = 2;
    }

    grpc_op  ops[4];
    int      n = 0;
    memset(ops, 0, sizeof ops);
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n++].data.send_initial_metadata.count = 0;
    if (code == TFS_OK) {
        /* The slice takes the packed buffer over (no copy); gRPC frees it when sent. */
        grpc_slice s = out_len ? grpc_slice_new(out, out_len, slice_free) : grpc_empty_slice();
        if (!out_len)
            tfs_free(out);
        c->resp = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->resp;
    } else {
        /* Copied: st may be the caller's stack. Every error carries a reason; one without would
         * be our bug, and the client still gets the code's name instead of nothing. */
        c->status_details = grpc_slice_from_copied_string(
            st && st->msg[0] ? st->msg : tfs_code_name(code));
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.trailing_metadata_count = (size_t)c->n_trailing;
    ops[n].data.send_status_from_server.trailing_metadata = c->n_trailing ? c->trailing : NULL;
    /* tfs_code numbers are the canonical codes, which are gRPC's. */
    ops[n].data.send_status_from_server.status = (grpc_status_code)code;
    ops[n++].data.send_status_from_server.status_details =
        code == TFS_OK ? NULL : &c->status_details;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    if (grpc_call_start_batch(c->call, ops, (size_t)n, c, NULL) != GRPC_CALL_OK) {
        TFS_LOG_ERROR(LOG_MODULE, "could not start the answer batch of a call");
        call_free(c);
    }
}

/* The queue may be shut down once the server has stopped and every call object is back: no
 * batch can be started on it after that. Whichever thread sees both shuts it down, once. */
static void maybe_shut_cq(tfs_grpc *g)
{
    if (atomic_load(&g->tag_seen) && atomic_load(&g->live) == 0 &&
        !atomic_exchange(&g->cq_shut, true))
        grpc_completion_queue_shutdown(g->cq);
}

/* One of the threads on the shared queue. Handlers run here: a long model run holds this thread
 * only; the others keep answering. */
static void *worker_main(void *arg)
{
    tfs_grpc *g = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &g->shutdown_tag) {
            atomic_store(&g->tag_seen, true);
        } else {
            call *c = ev.tag;
            if (c->sending || !ev.success) {
                if (c->sending && atomic_load(&g->stopping)) {
                    atomic_fetch_add(&g->drain_answered, 1);
                    if (c->cancelled || !ev.success)
                        atomic_fetch_add(&g->drain_cut, 1);
                }
                call_free(c);   /* answered, or a posted call returned at shutdown */
            } else {
                if (!atomic_load(&g->stopping))
                    post(g, c->method);   /* keep the pool full before doing the work */
                c->sending = true;        /* from here on it counts as in flight */
                atomic_fetch_add(&g->active, 1);
                answer(c);
            }
        }
        if (atomic_load(&g->stopping))
            maybe_shut_cq(g);
    }
    return NULL;
}

/* ---- channel arguments ---------------------------------------------------------------------- */

/* An int32 as TF Serving's safe_strto32 takes one: the whole text, in range. */
static bool parse_int32(const char *v, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno == ERANGE || x < INT32_MIN || x > INT32_MAX)
        return false;
    *out = (int)x;
    return true;
}

static bool args_has(const grpc_arg *a, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(a[i].key, key) == 0)
            return true;
    return false;
}

/* Splits text (a writable copy of --grpc_channel_arguments) into args[0..*n-1], keys and string
 * values pointing into text, then appends each default whose key the user did not set. */
static enum tfs_code build_args(char *text, const tfs_grpc_opts *opts, grpc_arg *args, int *n,
                                tfs_status *st)
{
    static const char *const int_keys[3] = {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                                            GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                                            GRPC_ARG_ALLOW_REUSEPORT};
    int  int_vals[3] = {opts->max_message_bytes, opts->max_message_bytes, 0};
    char *save = NULL;

    *n = 0;
    for (char *kv = text ? strtok_r(text, ",", &save) : NULL; kv;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--grpc_channel_arguments entry '%s' is not "
                           "key=value", kv);
        if (*n >= MAX_CHANNEL_ARGS - 3)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--grpc_channel_arguments has more than %d "
                           "entries", MAX_CHANNEL_ARGS - 3);
        *eq = 0;
        grpc_arg *a = &args[(*n)++];
        a->key = kv;
        if (parse_int32(eq + 1, &a->value.integer)) {
            a->type = GRPC_ARG_INTEGER;
        } else {
            a->type = GRPC_ARG_STRING;
            a->value.string = eq + 1;
        }
    }
    /* gRPC's own limit is 4 MiB; TF Serving lifts it. SO_REUSEPORT is on by default in the C
     * core: a second server on the same port would start and share the traffic instead of
     * failing, and a port in use must be a startup error. */
    int n_user = *n;
    for (int i = 0; i < 3; i++) {
        if (args_has(args, n_user, int_keys[i]))
            continue;
        args[*n] = (grpc_arg){.type = GRPC_ARG_INTEGER, .key = (char *)int_keys[i],
                              .value.integer = int_vals[i]};
        (*n)++;
    }
    return TFS_OK;
}

/* ---- start / stop --------------------------------------------------------------------------- */

/* The C core's log lines as ours: one line, our timestamp and level, module "grpc-core". */
static void core_log(gpr_log_func_args *a)
{
    enum tfs_log_level lvl = a->severity == GPR_LOG_SEVERITY_ERROR  ? TFS_LOG_LEVEL_ERROR
                             : a->severity == GPR_LOG_SEVERITY_INFO ? TFS_LOG_LEVEL_INFO
                                                                    : TFS_LOG_LEVEL_DEBUG;
    TFS_LOG_(lvl, "grpc-core", "%s (%s:%d)", a->message, a->file, a->line);
}

enum tfs_code tfs_grpc_start(tfs_loader *l, const tfs_grpc_opts *opts, tfs_grpc **out,
                             tfs_status *st)
{
    tfs_grpc     *g = NULL;
    char         *text = NULL;
    enum tfs_code code;
    char          addr[128];
    grpc_arg      args[MAX_CHANNEL_ARGS];
    int           n_args = 0;

    *out = NULL;
    if (opts->num_cq_threads < 1 || opts->num_cq_threads > MAX_CQ_THREADS)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "gRPC completion-queue threads %d not in [1, %d]",
                       opts->num_cq_threads, MAX_CQ_THREADS);
    if (opts->port < 0 || opts->port > 65535 || opts->max_message_bytes <= 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "bad gRPC options: port %d, max message bytes "
                       "%d", opts->port, (int)opts->max_message_bytes);
    if ((opts->channel_args && !(text = tfs_strdup(opts->channel_args))) ||
        !(g = tfs_calloc(1, sizeof *g)) ||
        !(g->threads = tfs_calloc((size_t)opts->num_cq_threads, sizeof *g->threads))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory starting gRPC");
        goto fail;
    }
    if ((code = build_args(text, opts, args, &n_args, st)) != TFS_OK)
        goto fail;
    g->loader = l;
    g->health = opts->health;
    pthread_mutex_init(&g->resp_mu, NULL);
    pthread_cond_init(&g->resp_cv, NULL);
    g->resp_inited = true;
    g->n_threads = opts->num_cq_threads;
    atomic_init(&g->stopping, false);
    atomic_init(&g->tag_seen, false);
    atomic_init(&g->cq_shut, false);
    atomic_init(&g->live, 0);
    atomic_init(&g->active, 0);
    atomic_init(&g->drain_answered, 0);
    atomic_init(&g->drain_cut, 0);
    gpr_set_log_function(core_log);
    grpc_init();
    g->grpc_inited = true;

    grpc_channel_args cargs = {(size_t)n_args, args};
    g->server = grpc_server_create(&cargs, NULL);   /* copies the arguments */
    g->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(g->server, g->cq, NULL);
    for (int m = 0; m < N_METHODS; m++)
        g->registered[m] = grpc_server_register_method(g->server, methods[m].path, NULL,
                                                       GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
                                                       0);
    snprintf(addr, sizeof addr, "%s:%d", opts->bind_address ? opts->bind_address : "0.0.0.0",
             opts->port);
    grpc_server_credentials *cr = NULL;
    if (opts->ssl_config_file && *opts->ssl_config_file) {
        if ((code = tfs__grpc_ssl_credentials(opts->ssl_config_file, &cr, st)) != TFS_OK)
            goto fail;
    } else {
        cr = grpc_insecure_server_credentials_create();
    }
    g->port = grpc_server_add_http2_port(g->server, addr, cr);
    grpc_server_credentials_release(cr);
    if (g->port == 0) {
        code = TFS_ERR(st, TFS_UNAVAILABLE, "could not bind gRPC to %s (address in use or not "
                       "available)", addr);
        goto fail;
    }
    grpc_server_start(g->server);
    g->server_started = true;
    bool ok = true;
    for (int k = 0; k < g->n_threads; k++)
        ok = post(g, GENERIC) && ok;
    for (int m = 0; m < N_METHODS; m++)
        for (int k = 0; k < CALLS_PER_METHOD + CALLS_PER_THREAD * g->n_threads; k++)
            ok = post(g, m) && ok;
    if (!ok) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not post the gRPC call pool");
        goto fail;
    }
    if (pthread_create(&g->responder, NULL, responder_main, g) != 0) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not start the gRPC responder thread");
        goto fail;
    }
    pthread_setname_np(g->responder, "tfs-grpc-resp");
    g->responder_started = true;
    for (int i = 0; i < g->n_threads; i++) {
        if (pthread_create(&g->threads[i], NULL, worker_main, g) != 0) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not start gRPC thread %d of %d",
                           i + 1, g->n_threads);
            goto fail;
        }
        g->n_started++;
    }
    tfs_free(text);
    *out = g;
    return TFS_OK;
fail:
    tfs_free(text);
    tfs_grpc_stop(g);
    return code;
}

void tfs_grpc_quiesce(tfs_grpc *g)
{
    if (!g || !g->server_started || g->shutdown_called)
        return;
    atomic_store(&g->stopping, true);
    g->shutdown_called = true;
    grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
}

int tfs_grpc_in_flight(const tfs_grpc *g)
{
    return g ? atomic_load(&((tfs_grpc *)g)->active) : 0;
}

bool tfs_grpc_drained(const tfs_grpc *g)
{
    if (!g || !g->server_started || !atomic_load(&((tfs_grpc *)g)->tag_seen))
        return !g || !g->server_started;
    /* Once: what happened to the calls that were being answered when the drain began. */
    tfs_grpc *m = (tfs_grpc *)g;
    if (!m->drain_reported) {
        m->drain_reported = true;
        int answered = atomic_load(&m->drain_answered), cut = atomic_load(&m->drain_cut);
        if (cut)
            TFS_LOG_WARN(LOG_MODULE, "drain: %d of %d calls answered during the drain were "
                         "cancelled before their status went out", cut, answered);
        else
            TFS_LOG_INFO(LOG_MODULE, "drain: all %d calls answered during the drain completed",
                         answered);
    }
    return true;
}

void tfs_grpc_close_connections(tfs_grpc *g)
{
    /* Besides cancelling calls (there are none when the drain calls this), the C core's
     * cancel_all_calls disconnects every channel at once, which is what the shutdown tag waits
     * for. */
    if (g && g->server_started && g->shutdown_called)
        grpc_server_cancel_all_calls(g->server);
}

void tfs_grpc_stop(tfs_grpc *g)
{
    if (!g)
        return;
    atomic_store(&g->stopping, true);
    if (g->server && !g->server_started) {
        /* Never started: nothing was posted, the queue only needs to be shut down and drained. */
        grpc_completion_queue_shutdown(g->cq);
        while (grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
    } else if (g->server) {
        /* Drives the threads to GRPC_QUEUE_SHUTDOWN (see worker_main and maybe_shut_cq). When no
         * thread started, this one drains the queue. */
        if (!g->shutdown_called)
            grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
        g->shutdown_called = true;
        grpc_server_cancel_all_calls(g->server);
        if (g->n_started == 0)
            worker_main(g);
        for (int i = 0; i < g->n_started; i++)
            pthread_join(g->threads[i], NULL);
    }
    if (g->responder_started) {
        /* Every call is back (the CQ threads waited for that), so nothing is or will be posted. */
        pthread_mutex_lock(&g->resp_mu);
        g->resp_stop = true;
        pthread_cond_signal(&g->resp_cv);
        pthread_mutex_unlock(&g->resp_mu);
        pthread_join(g->responder, NULL);
    }
    if (g->resp_inited) {
        pthread_mutex_destroy(&g->resp_mu);
        pthread_cond_destroy(&g->resp_cv);
    }
    if (g->server)
        grpc_server_destroy(g->server);
    if (g->cq)
        grpc_completion_queue_destroy(g->cq);
    if (g->grpc_inited)
        grpc_shutdown();
    tfs_free(g->threads);
    tfs_free(g);
}
