/* grpc_echo: the ceiling for bench/grpc_predict.sh. A trivial gRPC C-core server that answers
 * every call of one method (default /tensorflow.serving.PredictionService/Predict) with the
 * request message itself, status OK, in the same way tfserve's server/grpc.c does (calls posted
 * in advance on a completion queue, one batch per answer), but with no protobuf decoding and no
 * model. tfserve's calls/s divided by this one's, in the same run, is how close the service
 * layer comes to the transport's cost.
 * Usage: grpc_echo PORT [CQ_THREADS [METHOD]]   (binds 127.0.0.1; stops on SIGINT/SIGTERM).
 * Not a test. */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CALLS_PER_THREAD 64
#define MAX_THREADS 16

typedef struct echo_call {
    bool                   answering; /* false: posted, waiting for a client */
    grpc_call             *call;
    gpr_timespec           deadline;
    grpc_metadata_array    md;
    grpc_byte_buffer      *payload;
    int                    cancelled;
    grpc_completion_queue *cq;
} echo_call;

static grpc_server          *server;
static void                 *method_handle;
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void call_free(echo_call *c)
{
    if (!c)
        return;
    grpc_metadata_array_destroy(&c->md);
    if (c->payload)
        grpc_byte_buffer_destroy(c->payload);
    if (c->call)
        grpc_call_unref(c->call);
    free(c);
}

/* Posts a fresh call on cq; false if out of memory or the server refused (shutting down). */
static bool call_post(grpc_completion_queue *cq)
{
    echo_call *c = calloc(1, sizeof *c);
    if (!c)
        return false;
    c->cq = cq;
    grpc_metadata_array_init(&c->md);
    if (grpc_server_request_registered_call(server, method_handle, &c->call, &c->deadline, &c->md,
                                            &c->payload, cq, cq, c) != GRPC_CALL_OK) {
        call_free(c);
        return false;
    }
    return true;
}

/* A call arrived: answer it with its own message in one batch. */
static void call_answer(echo_call *c)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (c->payload) {
        ops[n].op                         = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->payload;
    }
    ops[n].op                                    = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n++].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[n].op                                     = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->answering = true;
    if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
        call_free(c); /* never reaches the queue */
}

static void *cq_loop(void *arg)
{
    grpc_completion_queue *cq = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(200, GPR_TIMESPAN)),
            NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        echo_call *c = ev.tag;
        if (c->answering || !ev.success) {
            call_free(c); /* answer sent, or a posted call given back at shutdown */
            continue;
        }
        call_post(cq); /* keep the pool full; fails only while shutting down */
        call_answer(c);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    char *end     = NULL;
    long  port    = argc >= 2 ? strtol(argv[1], &end, 10) : -1;
    int   threads = argc >= 3 ? atoi(argv[2]) : 1;
    const char *method = argc >= 4 ? argv[3] : "/tensorflow.serving.PredictionService/Predict";
    if (argc < 2 || argc > 4 || !end || *end || port < 1 || port > 65535 || threads < 1 ||
        threads > MAX_THREADS) {
        fprintf(stderr, "usage: %s PORT [CQ_THREADS (1..%d) [METHOD]]\n", argv[0], MAX_THREADS);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    grpc_init();
    server        = grpc_server_create(NULL, NULL);
    method_handle = grpc_server_register_method(server, method, NULL,
                                                GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    grpc_completion_queue *cqs[MAX_THREADS];
    pthread_t              tids[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        cqs[i] = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(server, cqs[i], NULL);
    }
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%ld", port);
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    int bound = grpc_server_add_http2_port(server, addr, cr);
    grpc_server_credentials_release(cr);
    if (!bound) {
        fprintf(stderr, "grpc_echo: cannot listen on %s\n", addr);
        return 1;
    }
    grpc_server_start(server);
    for (int i = 0; i < threads; i++) {
        for (int k = 0; k < CALLS_PER_THREAD; k++)
            call_post(cqs[i]);
        pthread_create(&tids[i], NULL, cq_loop, cqs[i]);
    }
    fprintf(stderr, "grpc_echo: %s on %s, %d CQ thread(s)\n", method, addr, threads);
    while (!stop_requested) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }

    /* Shutdown in the order the C core needs: notify, cancel, wait for the tag (on its own
     * queue, so the CQ threads need not know it), then shut the call queues down and join. */
    grpc_completion_queue *sq = grpc_completion_queue_create_for_pluck(NULL);
    int                    shutdown_tag;
    grpc_server_shutdown_and_notify(server, sq, &shutdown_tag);
    grpc_server_cancel_all_calls(server);
    grpc_completion_queue_pluck(sq, &shutdown_tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    for (int i = 0; i < threads; i++)
        grpc_completion_queue_shutdown(cqs[i]);
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        grpc_completion_queue_destroy(cqs[i]);
    }
    grpc_server_destroy(server);
    grpc_completion_queue_shutdown(sq);
    grpc_completion_queue_destroy(sq);
    grpc_shutdown();
    return 0;
}
