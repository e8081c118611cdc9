/* tfserve's gRPC server on the gRPC C core: one completion queue per CQ thread, a pool of calls
 * posted per registered method on each queue, and one generic call per queue so that a method no
 * one registered is answered UNIMPLEMENTED at once instead of hanging until the client's deadline.
 * Each call is answered with a single batch (initial metadata, message, status, close). The
 * handlers (grpc-api.c) turn request bytes into response bytes through the service layer.
 *
 * Shutdown follows the order the C core needs (platform.md section 2): shutdown_and_notify, cancel
 * all calls, wait for the tag, shut the queues down, drain them, destroy server and queues, and
 * only then grpc_shutdown. Posted calls come back with success == 0 then; they are freed, not
 * re-posted.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/grpc-impl.h"
#include "server/grpc.h"

#define LOG_MODULE "grpc"
/* Calls kept posted per method and queue: enough that a burst of new calls never waits for a
 * re-post. */
#define CALLS_PER_METHOD 16
#define MAX_CQ_THREADS 64

typedef struct method {
    const char       *path;
    tfs__grpc_handler handler;
} method;

static const method methods[] = {
    {"/tensorflow.serving.PredictionService/Predict", tfs__grpc_predict},
    {"/tensorflow.serving.PredictionService/GetModelMetadata", tfs__grpc_metadata},
    {"/tensorflow.serving.PredictionService/Classify", tfs__grpc_classify},
    {"/tensorflow.serving.PredictionService/Regress", tfs__grpc_regress},
    {"/tensorflow.serving.PredictionService/MultiInference", tfs__grpc_multi_inference},
    {"/tensorflow.serving.ModelService/GetModelStatus", tfs__grpc_model_status},
    {"/tensorflow.serving.ModelService/HandleReloadConfigRequest", tfs__grpc_reload_config},
};

#define N_METHODS ((int)(sizeof methods / sizeof methods[0]))
#define GENERIC (-1)

typedef struct worker worker;

typedef struct call {
    worker            *w;
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
} call;

struct worker {
    tfs_grpc              *g;
    grpc_completion_queue *cq;
    pthread_t              thread;
    bool                   started;
};

struct tfs_grpc {
    tfs_loader  *loader;
    grpc_server *server;
    void        *registered[N_METHODS];
    int          port;
    int          n_workers;
    worker      *workers;
    bool         grpc_inited;
    bool         server_started;
    int          shutdown_tag;   /* its address is the tag */
    atomic_bool  stopping;
};

tfs_grpc_opts tfs_grpc_opts_default(void)
{
    return (tfs_grpc_opts){
        .port = 8500, .bind_address = "0.0.0.0", .num_cq_threads = 1,
        .max_message_bytes = INT32_MAX};
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
    grpc_metadata_array_destroy(&c->md);
    if (c->method == GENERIC)
        grpc_call_details_destroy(&c->details);
    if (c->payload)
        grpc_byte_buffer_destroy(c->payload);
    if (c->resp)
        grpc_byte_buffer_destroy(c->resp);
    grpc_slice_unref(c->status_details);
    if (c->call)
        grpc_call_unref(c->call);
    tfs_free(c);
}

/* Posts a fresh call for `m` on w's queue. False when it cannot (out of memory, or the server
 * is shutting down); the pool then shrinks by one, which only costs latency. */
static bool post(worker *w, int m)
{
    tfs_grpc *g = w->g;
    call     *c = tfs_calloc(1, sizeof *c);
    grpc_call_error e;

    if (!c)
        return false;
    c->w = w;
    c->method = m;
    c->status_details = grpc_empty_slice();
    grpc_metadata_array_init(&c->md);
    if (m == GENERIC) {
        grpc_call_details_init(&c->details);
        e = grpc_server_request_call(g->server, &c->call, &c->details, &c->md, w->cq, w->cq, c);
    } else {
        e = grpc_server_request_registered_call(g->server, g->registered[m], &c->call,
                                                &c->deadline, &c->md, &c->payload, w->cq, w->cq,
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

/* Runs the handler and starts the one batch that answers the call. */
static void answer(call *c)
{
    tfs_grpc     *g = c->w->g;
    tfs_status    st;
    uint8_t      *out = NULL;
    size_t        out_len = 0;
    enum tfs_code code;

    tfs_status_clear(&st);
    if (c->method == GENERIC) {
        char *path = grpc_slice_to_c_string(c->details.method);
        code = TFS_ERR(&st, TFS_UNIMPLEMENTED, "Method not found: %s", path ? path : "");
        gpr_free(path);
    } else if (!c->payload) {
        code = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "the request carried no message");
    } else if (gpr_time_cmp(gpr_now(c->deadline.clock_type), c->deadline) > 0) {
        code = TFS_ERR(&st, TFS_DEADLINE_EXCEEDED, "Deadline Exceeded");
    } else {
        grpc_byte_buffer_reader r;
        if (!grpc_byte_buffer_reader_init(&r, c->payload)) {
            code = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "could not read the request message");
        } else {
            /* The reader decompresses and joins slices. */
            grpc_slice in = grpc_byte_buffer_reader_readall(&r);
            grpc_byte_buffer_reader_destroy(&r);
            code = methods[c->method].handler(g->loader, GRPC_SLICE_START_PTR(in),
                                              GRPC_SLICE_LENGTH(in), &out, &out_len, &st);
            grpc_slice_unref(in);
        }
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
        c->status_details = grpc_slice_from_copied_string(st.msg);
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.trailing_metadata_count = 0;
    /* tfs_code numbers are the canonical codes, which are gRPC's. */
    ops[n].data.send_status_from_server.status = (grpc_status_code)code;
    ops[n++].data.send_status_from_server.status_details =
        code == TFS_OK ? NULL : &c->status_details;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->sending = true;
    if (grpc_call_start_batch(c->call, ops, (size_t)n, c, NULL) != GRPC_CALL_OK) {
        TFS_LOG_ERROR(LOG_MODULE, "could not start the answer batch of a call");
        call_free(c);
    }
}

/* One completion-queue thread. Handlers run here: with one thread a long model run delays the
 * other calls of this queue, which is why the loop is written for several. */
static void *worker_main(void *arg)
{
    worker   *w = arg;
    tfs_grpc *g = w->g;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &g->shutdown_tag) {
            /* The server has stopped: every queue can now be shut down. */
            for (int i = 0; i < g->n_workers; i++)
                grpc_completion_queue_shutdown(g->workers[i].cq);
            continue;
        }
        call *c = ev.tag;
        if (c->sending || !ev.success) {
            call_free(c);   /* answered, or a posted call returned at shutdown */
            continue;
        }
        if (!atomic_load(&g->stopping))
            post(w, c->method);   /* keep the pool full before doing the work */
        answer(c);
    }
    return NULL;
}

/* ---- start / stop --------------------------------------------------------------------------- */

enum tfs_code tfs_grpc_start(tfs_loader *l, const tfs_grpc_opts *opts, tfs_grpc **out,
                             tfs_status *st)
{
    tfs_grpc     *g = NULL;
    enum tfs_code code;
    char          addr[128];

    *out = NULL;
    if (opts->num_cq_threads < 1 || opts->num_cq_threads > MAX_CQ_THREADS)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "gRPC completion-queue threads %d not in [1, %d]",
                       opts->num_cq_threads, MAX_CQ_THREADS);
    if (opts->port < 0 || opts->port > 65535 || opts->max_message_bytes <= 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "bad gRPC options: port %d, max message bytes "
                       "%d", opts->port, (int)opts->max_message_bytes);
    if (!(g = tfs_calloc(1, sizeof *g)) ||
        !(g->workers = tfs_calloc((size_t)opts->num_cq_threads, sizeof *g->workers))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory starting gRPC");
        goto fail;
    }
    g->loader = l;
    g->n_workers = opts->num_cq_threads;
    atomic_init(&g->stopping, false);
    grpc_init();
    g->grpc_inited = true;

    /* SO_REUSEPORT is on by default in the C core: a second server on the same port would start
     * and share the traffic instead of failing. A port in use must be a startup error. */
    grpc_arg args[3] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = opts->max_message_bytes},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
         .value.integer = opts->max_message_bytes},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0}};
    grpc_channel_args cargs = {3, args};
    g->server = grpc_server_create(&cargs, NULL);
    for (int i = 0; i < g->n_workers; i++) {
        g->workers[i].g = g;
        g->workers[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(g->server, g->workers[i].cq, NULL);
    }
    for (int m = 0; m < N_METHODS; m++)
        g->registered[m] = grpc_server_register_method(g->server, methods[m].path, NULL,
                                                       GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
                                                       0);
    snprintf(addr, sizeof addr, "%s:%d", opts->bind_address ? opts->bind_address : "0.0.0.0",
             opts->port);
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    g->port = grpc_server_add_http2_port(g->server, addr, cr);
    grpc_server_credentials_release(cr);
    if (g->port == 0) {
        code = TFS_ERR(st, TFS_UNAVAILABLE, "could not bind gRPC to %s (address in use or not "
                       "available)", addr);
        goto fail;
    }
    grpc_server_start(g->server);
    g->server_started = true;
    for (int i = 0; i < g->n_workers; i++) {
        worker *w = &g->workers[i];
        bool    ok = post(w, GENERIC);
        for (int m = 0; m < N_METHODS; m++)
            for (int k = 0; k < CALLS_PER_METHOD; k++)
                ok = post(w, m) && ok;
        if (!ok) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not post the gRPC call pool");
            goto fail;
        }
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not start a gRPC thread");
            goto fail;
        }
        w->started = true;
    }
    *out = g;
    return TFS_OK;
fail:
    tfs_grpc_stop(g);
    return code;
}

void tfs_grpc_stop(tfs_grpc *g)
{
    if (!g)
        return;
    atomic_store(&g->stopping, true);
    if (g->server && !g->server_started) {
        /* Never started: nothing was posted, the queues only need to be shut down and drained. */
        for (int i = 0; i < g->n_workers; i++) {
            if (!g->workers[i].cq)
                continue;
            grpc_completion_queue_shutdown(g->workers[i].cq);
            while (grpc_completion_queue_next(g->workers[i].cq,
                                              gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                       .type != GRPC_QUEUE_SHUTDOWN) {
            }
        }
    } else if (g->server) {
        /* Drives the workers to GRPC_QUEUE_SHUTDOWN (see worker_main). When the threads never
         * started, run one here to drain queue 0 and the others in turn. */
        grpc_server_shutdown_and_notify(g->server, g->workers[0].cq, &g->shutdown_tag);
        grpc_server_cancel_all_calls(g->server);
        for (int i = 0; i < g->n_workers; i++) {
            worker *w = &g->workers[i];
            if (w->started)
                pthread_join(w->thread, NULL);
        }
        for (int i = 0; i < g->n_workers; i++) {
            worker *w = &g->workers[i];
            if (w->started || !w->cq)
                continue;
            w->started = true;
            worker_main(w);
        }
    }
    if (g->server)
        grpc_server_destroy(g->server);
    for (int i = 0; g->workers && i < g->n_workers; i++)
        if (g->workers[i].cq)
            grpc_completion_queue_destroy(g->workers[i].cq);
    if (g->grpc_inited)
        grpc_shutdown();
    tfs_free(g->workers);
    tfs_free(g);
}
