/* The gRPC front end of tfserve: tensorflow_model_server's PredictionService and ModelService on
 * the gRPC C core, answering through the same service layer as REST (server.h tfs_service_*).
 *
 *     tfs_grpc_opts o = tfs_grpc_opts_default();
 *     o.port = 8500;
 *     tfs_grpc *g;
 *     if (tfs_grpc_start(loader, &o, &g, &st) != TFS_OK) ...
 *     ... wait for SIGTERM ...
 *     tfs_grpc_stop(g);
 *
 * Thread-safety: start/stop from the main thread; tfs_grpc_port from any thread.
 */
#ifndef TFS_SERVER_GRPC_H
#define TFS_SERVER_GRPC_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/loader.h"
#include "runtime/status.h"

typedef struct tfs_grpc tfs_grpc;

typedef struct tfs_grpc_opts {
    int         port;               /* TCP port; 0 = an ephemeral port (see tfs_grpc_port) */
    const char *bind_address;       /* default "0.0.0.0" */
    int         num_cq_threads;     /* threads on the completion queue, 1..64 (default 2) */
    int32_t     max_message_bytes;  /* send and receive limit; default INT32_MAX as TF Serving */
    /* TF Serving's --grpc_channel_arguments: "key=value,key=value" handed to the C core (a value
     * that parses as an int32 goes as an int, others as strings); a key given here overrides
     * the defaults above (e.g. grpc.max_receive_message_length). NULL or "" for none. */
    const char *channel_args;
    /* Borrowed; serves grpc.health.v1.Health/Check from it. NULL: that method is not served. */
    struct tfs_health *health;
    /* TF Serving's --ssl_config_file: SSLConfig text whose key and certificate the port serves
     * TLS with (tls.c). NULL or "": plaintext. */
    const char *ssl_config_file;
} tfs_grpc_opts;

tfs_grpc_opts tfs_grpc_opts_default(void);

/* Binds, registers the methods and starts the completion-queue threads. UNAVAILABLE "could not
 * bind gRPC to 0.0.0.0:8500" when the port cannot be opened; INVALID_ARGUMENT for bad options
 * (a channel argument without '=' is named in the message), and INVALID_ARGUMENT naming
 * ssl_config_file when it cannot be read or its PEM is bad.
 * Keeps a pointer to the loader (which must outlive it). Caller owns *out. */
enum tfs_code tfs_grpc_start(tfs_loader *l, const tfs_grpc_opts *opts, tfs_grpc **out,
                             tfs_status *st);
int  tfs_grpc_port(const tfs_grpc *g);   /* the port actually bound */
/* Drain: grpc_server_shutdown_and_notify. The listener closes (new connections are refused),
 * open connections get GOAWAY (new calls on them fail UNAVAILABLE), and the calls in flight run
 * to completion. Idempotent; NULL-safe. */
void tfs_grpc_quiesce(tfs_grpc *g);
/* Calls being answered now (taken off the queue, answer not yet sent). */
int  tfs_grpc_in_flight(const tfs_grpc *g);
/* After tfs_grpc_quiesce: true once the C core reports that no call is left. */
bool tfs_grpc_drained(const tfs_grpc *g);
/* After tfs_grpc_quiesce, when no call is in flight: closes the connections that clients still
 * hold open (the C core's graceful GOAWAY otherwise waits up to 20 s for each client to close or
 * to answer its ping), so that tfs_grpc_drained turns true. NULL-safe. */
void tfs_grpc_close_connections(tfs_grpc *g);
/* Stops accepting, cancels the calls still in flight, joins the threads and frees. NULL-safe. */
void tfs_grpc_stop(tfs_grpc *g);

#endif
