/* server: tfserve's front ends. The `tfserve` binary parses TensorFlow Serving's flags, builds a
 * loader, serves the REST API of tensorflow_model_server on libmicrohttpd and waits for a signal.
 *
 *     tfs_server_flags f;
 *     if (tfs_server_flags_parse(argc, argv, &f, &st) != TFS_OK) ...
 *     tfs_rest_opts ro = tfs_rest_opts_default();
 *     ro.port = f.rest_api_port;
 *     tfs_rest *rest;
 *     if (tfs_rest_start(loader, &ro, &rest, &st) != TFS_OK) ...
 *     ... wait for SIGTERM ...
 *     tfs_rest_stop(rest);
 *     tfs_server_flags_deinit(&f);
 *
 * The service functions (tfs_service_*) are the protocol-neutral layer that every front end (REST
 * now, gRPC later) calls: resolve a model spec to a servable and a signature, check and run the
 * inputs of a Predict. Their error texts are TensorFlow Serving's, because clients grep them.
 * Thread-safety: the service functions and tfs_rest_port may be called from any thread;
 * tfs_rest_start/stop and the flag functions from the main thread.
 */
#ifndef TFS_SERVER_SERVER_H
#define TFS_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include "loader/loader.h"
#include "runtime/runtime.h"

/* ---- flags ---------------------------------------------------------------------------------- */

/* tensorflow_model_server's flags that tfserve understands (syntax `--name=value`; bools may be
 * bare). Strings are owned by the struct (tfs_server_flags_deinit frees them). */
typedef struct tfs_server_flags {
    int64_t            port;                   /* gRPC port, default 8500 */
    int64_t            rest_api_port;          /* 0 = REST off (default) */
    int64_t            rest_api_num_threads;   /* default 4 x online CPUs */
    int64_t            rest_api_timeout_in_ms; /* default 30000; a predict's deadline */
    int64_t            rest_connection_timeout_seconds;   /* ours: idle REST connections, 60 */
    int64_t            rest_max_connections;   /* ours: open REST connections at most, 4096 */
    int64_t            grpc_num_threads;       /* ours: threads on the gRPC queue, default 2 */
    int64_t            grpc_max_threads;       /* TF Serving's; accepted, logged; default 4xCPUs */
    char              *grpc_channel_arguments; /* "key=value,..." for the gRPC server, default "" */
    char              *ssl_config_file;        /* SSLConfig text: gRPC over TLS; default "" */
    char              *rest_api_ssl_cert_file; /* ours: PEM; with the key, REST over HTTPS */
    char              *rest_api_ssl_key_file;  /* ours: PEM, default "" */
    int64_t            tensorflow_intra_op_parallelism;   /* pool threads; 0 = CPUs (default) */
    char              *device;                 /* auto (default), cpu, gpu, gpu:N */
    char              *per_process_gpu_memory_fraction;   /* "0".."1"; "0" = default (0.5) */
    bool               gpu_allow_tf32;         /* default false */
    char              *model_name;             /* default "default" */
    char              *model_base_path;        /* required unless model_config_file is set */
    char              *model_config_file;      /* ModelServerConfig text file, default "" */
    int64_t            model_config_file_poll_wait_seconds;   /* 0 = read once (default) */
    char              *saved_model_tags;       /* default "serve" */
    bool               enable_model_warmup;    /* default true */
    int64_t            num_request_iterations_for_warmup;   /* default 0 (= 1) */
    int64_t            file_system_poll_wait_seconds;   /* default 1; <= 0: no polling */
    bool               allow_version_labels_for_unavailable_models;   /* default false */
    int64_t            max_model_memory_bytes; /* ours: 0 = no limit (default) */
    int64_t            max_tensor_bytes;       /* ours: 0 = half the memory (runtime.h) */
    bool               graph_rewrites;         /* ours: rewrite graphs for serving, default true */
    bool               enforce_session_run_timeout;   /* default true: runs stop at deadlines */
    bool               allow_file_ops_at_request_time; /* default false */
    char              *monitoring_config_file; /* MonitoringConfig text, default "" */
    char              *metrics_path;           /* ours: Prometheus path, "" = per config/off */
    char              *access_log_file;        /* ours: "" = no access log */
    char              *access_log_sample_rate; /* ours: fraction in [0, 1], default "1" */
    enum tfs_log_level verbosity;              /* --verbosity=debug|info|warn|error, default info */
    char              *log_format;             /* --log_format=text|json, default "text" */
    int64_t            drain_timeout_seconds;  /* in-flight requests get this long; default 30 */
    int64_t            drain_delay_seconds;    /* not-ready but serving before that; default 0 */
    bool               enable_batching;        /* default false */
    char              *batching_parameters_file; /* BatchingParameters text, default "" */
    bool               enable_per_model_batching_params;   /* default false */
    char              *batching_scheduler;     /* ours: adaptive|fixed, default "adaptive" */
    bool               version;                /* --version: print versions and exit 0 */
    bool               help;                   /* --help: print usage and exit 0 */
    int                n_unknown;              /* arguments matching no flag (reported) */
    char             **unknown;                /* borrowed from argv */
} tfs_server_flags;

/* Fills *f with the defaults, then applies argv[1..argc-1]. Unknown arguments are collected in
 * f->unknown (TF Serving reports them and still starts). A value that does not parse for its flag
 * is INVALID_ARGUMENT "Couldn't interpret value X for flag NAME." A missing --model_base_path is
 * not checked here (--version and --help do not need it; tfs_server_flags_check does). On failure
 * *f is still safe to deinit. */
enum tfs_code tfs_server_flags_parse(int argc, char **argv, tfs_server_flags *f, tfs_status *st);
/* Checks the parsed values (main calls it after --help and --version): each numeric flag against
 * its range in the flag table (INVALID_ARGUMENT "--NAME=VALUE is not in [MIN, MAX]"), then the
 * rules between flags: a model source is given, --rest_max_connections is at least
 * --rest_api_num_threads and the REST certificate and key come together (with REST on),
 * --batching_parameters_file needs --enable_batching. *usage is set when the error is the
 * missing model source, which tensorflow_model_server answers with its usage text.
 * --rest_api_port equal to --port is logged as an error and turns REST off in *f
 * (tensorflow_model_server starts without REST then). */
enum tfs_code tfs_server_flags_check(tfs_server_flags *f, bool *usage, tfs_status *st);
/* Reads and checks the TLS material the flags name (--ssl_config_file; the REST certificate and
 * key when REST is on), so that a bad file stops the start before any model loads rather than
 * after. INVALID_ARGUMENT / NOT_FOUND / PERMISSION_DENIED naming the file and the part. */
enum tfs_code tfs_server_tls_check(const tfs_server_flags *f, tfs_status *st);
void          tfs_server_flags_deinit(tfs_server_flags *f);   /* NULL-safe */
/* Writes the usage text, generated from the flag table, to out. */
void          tfs_server_flags_usage(FILE *out, const char *argv0);
/* The text --version prints: "TensorFlow ModelServer: <v>\nTensorFlow Library: tfserve\n". */
void          tfs_server_version(FILE *out);

/* ---- service (protocol-neutral) ------------------------------------------------------------- */

/* Which front end asks: the texts of some errors differ between REST and gRPC in TF Serving. */
enum tfs_api { TFS_API_REST = 0, TFS_API_GRPC = 1 };

/* What a request names: a model, a version (-1 = latest) or a label (NULL = none), a signature
 * (NULL or "" = "serving_default"). All borrowed. */
typedef struct tfs_model_spec {
    const char *name;
    int64_t     version;
    const char *label;
    const char *signature_name;
} tfs_model_spec;

/* A counted handle on the version the spec names. INVALID_ARGUMENT "ModelSpec has no name
 * specified." for an empty name; otherwise the loader's NOT_FOUND / INVALID_ARGUMENT texts.
 * Release *out with tfs_servable_release. */
enum tfs_code tfs_service_acquire(tfs_loader *l, const tfs_model_spec *spec, tfs_servable **out,
                                  tfs_status *st);

/* The signature named `name` (NULL or "" = "serving_default") of a servable; borrowed, valid while
 * the handle is held. Unknown: REST INVALID_ARGUMENT `Serving signature name: "S" not found in
 * signature def`; gRPC FAILED_PRECONDITION `Serving signature key "S" not found.` */
enum tfs_code tfs_service_signature(const tfs_servable *s, const char *name, enum tfs_api api,
                                    const tfs_signature **out, tfs_status *st);

/* Checks the named inputs against the signature as TF Serving's Predict does (input count, missing
 * inputs without defaults, unknown names: INVALID_ARGUMENT with TF Serving's texts), refuses a
 * signature that cannot run (sig->usable), then runs it. outputs[0..sig->n_outputs-1] are in
 * signature order (sorted by alias); the caller owns them. */
enum tfs_code tfs_service_run(const tfs_servable *s, const tfs_signature *sig,
                              const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                              tfs_status *st);

/* tfs_service_run without waiting: the same checks, then tfs_servable_run_async (batched when
 * batching is on). done runs exactly once in every case, a failed check included (before this
 * returns); the return value is only informational. */
enum tfs_code tfs_service_run_async(tfs_servable *s, const tfs_signature *sig,
                                    const tfs_named_tensor *inputs, int n_inputs,
                                    int64_t deadline_ns, tfs_servable_done_fn done, void *ctx,
                                    tfs_servable_task **task, tfs_status *st);

/* Predict in one call: acquire + signature + run. On success *servable (caller releases) and *sig
 * (borrowed from it) say which version and signature answered; on failure both are NULL. */
enum tfs_code tfs_service_predict(tfs_loader *l, const tfs_model_spec *spec, enum tfs_api api,
                                  const tfs_named_tensor *inputs, int n_inputs,
                                  tfs_servable **servable, const tfs_signature **sig,
                                  tfs_tensor **outputs, tfs_status *st);

/* ---- health and drain (health.c, drain.c, log-format.c) ------------------------------------- */

/* What /healthz, /readyz and grpc.health.v1.Health/Check report: the process serves (liveness);
 * it is ready when every configured model has an AVAILABLE version (tfs_loader_ready) and no
 * drain has started. Shared by the front ends; any thread. */
typedef struct tfs_health tfs_health;

/* Keeps a pointer to the loader, which must outlive it. Caller owns *out. */
enum tfs_code tfs_health_new(tfs_loader *l, tfs_health **out, tfs_status *st);
void tfs_health_free(tfs_health *h);                  /* NULL-safe */
void tfs_health_start_drain(tfs_health *h);           /* from now on: not ready, for good */
bool tfs_health_draining(const tfs_health *h);
bool tfs_health_ready(const tfs_health *h);           /* models AVAILABLE and not draining */

struct tfs_grpc;
struct tfs_rest;

typedef struct tfs_drain_opts {
    int64_t delay_seconds;     /* keep accepting (reporting not ready) this long first */
    int64_t timeout_seconds;   /* then wait this long for the requests in flight */
} tfs_drain_opts;

/* The graceful shutdown after the first SIGTERM/SIGINT `sig`, run on the main thread with
 * `sigs` blocked: marks health not ready, waits delay_seconds, stops both listeners (new
 * connections are refused), waits for the requests in flight up to timeout_seconds, logging one
 * line per phase. Meanwhile a second signal from `sigs` ends the wait. Returns the exit code:
 * 0 when everything in flight finished; otherwise *exit_now is set and the caller must _exit
 * with the code at once, without freeing what requests may still use: 1 when the timeout passed,
 * 128 + signal number (130 SIGINT, 143 SIGTERM) on a second signal. rest and grpc may be NULL. */
int tfs_server_drain(tfs_health *h, struct tfs_rest *rest, struct tfs_grpc *grpc,
                     const sigset_t *sigs, int sig, const tfs_drain_opts *opts, bool *exit_now);

/* Selects the log line format: "text" (runtime/log.h's default stderr lines) or "json" (one
 * object per line: {"ts": "...Z", "level": "INFO", "module": "...", "msg": "..."}).
 * INVALID_ARGUMENT naming the value otherwise. */
enum tfs_code tfs_server_log_format(const char *format, tfs_status *st);
/* ---- model warmup (warmup.c) ---------------------------------------------------------------- */

/* TF Serving's model warmup (--enable_model_warmup): before a version becomes AVAILABLE, replay
 * the requests recorded in <version dir>/assets.extra/tf_serving_warmup_requests, a TFRecord file
 * of serialized tensorflow.serving.PredictionLog (predict, classify, regress and multi_inference
 * logs; the responses in them are ignored).
 *
 *     tfs_warmup_opts wo = tfs_warmup_opts_default();
 *     lo.warmup = tfs_warmup_run;   lo.warmup_ctx = &wo;   (tfs_loader_opts; wo must outlive it)
 */
#define TFS_WARMUP_FILE        "assets.extra/tf_serving_warmup_requests"
#define TFS_WARMUP_MAX_RECORDS 1000   /* TF Serving's WarmupConsts::kMaxNumRecords */

typedef struct tfs_warmup_opts {
    int num_request_iterations;   /* runs of each record, default 1
                                   * (--num_request_iterations_for_warmup when > 0) */
} tfs_warmup_opts;

tfs_warmup_opts tfs_warmup_opts_default(void);

/* A tfs_warmup_fn (loader/loader.h); ctx is a const tfs_warmup_opts * (NULL: defaults). Runs every
 * record's request on `model` (borrowed; not served yet) with the checks and texts of the same
 * request over gRPC, and logs how many records it replayed and how long that took. OK when the
 * file is absent. Otherwise fails, naming the file and the record (counted from 0): DATA_LOSS "...
 * Please verify your warmup data is in TFRecord format." for a damaged file; INVALID_ARGUMENT for
 * more than TFS_WARMUP_MAX_RECORDS records or a record that is not a PredictionLog;
 * "Warmup request in record N of PATH failed: <why>" with the request's own code; UNIMPLEMENTED
 * for session_run_log and predict_streamed_log records. */
enum tfs_code tfs_warmup_run(void *ctx, const char *model_name, int64_t version, const char *dir,
                             const tfs_savedmodel *model, tfs_status *st);

/* ---- REST front end ------------------------------------------------------------------------- */

typedef struct tfs_rest tfs_rest;

typedef struct tfs_rest_opts {
    int         port;            /* TCP port; 0 = an ephemeral port (see tfs_rest_port) */
    int         num_threads;     /* libmicrohttpd thread pool size, >= 1 */
    int64_t     timeout_ms;      /* a predict's deadline (not started by then: 504); <= 0 none */
    size_t      max_body_bytes;  /* larger request bodies get 413 */
    int         connection_timeout_s;   /* idle connections are closed after this; 0 never */
    int         max_connections; /* open connections at most (more wait in the backlog), >= 1 */
    const char *bind_address;    /* IPv4 literal, default "0.0.0.0" */
    tfs_health *health;          /* borrowed; serves /healthz and /readyz; NULL: not served */
    /* HTTPS: PEM files of the certificate (chain) and its private key, both or neither; read
     * and checked at start. NULL or "": plain HTTP. */
    const char *tls_cert_file;
    const char *tls_key_file;
} tfs_rest_opts;

tfs_rest_opts tfs_rest_opts_default(void);

/* Binds, listens and starts serving /v1/ on its own threads. UNAVAILABLE "could not bind
 * 0.0.0.0:8501: Address already in use" (and similar) when the socket cannot be set up;
 * INVALID_ARGUMENT for max_connections below num_threads or a negative connection timeout,
 * and naming the file for a TLS key or certificate that cannot be read, is not PEM or does not
 * match;
 * INTERNAL when libmicrohttpd refuses to start. Keeps a pointer to the loader (which must outlive
 * it).
 * Caller owns *out. */
enum tfs_code tfs_rest_start(tfs_loader *l, const tfs_rest_opts *opts, tfs_rest **out,
                             tfs_status *st);
int  tfs_rest_port(const tfs_rest *r);   /* the port actually bound */
/* Drain: stops accepting (the listening socket is shut, so new connections are refused at
 * once), and from now on every response carries "Connection: close". Requests in flight and
 * requests arriving on open connections are still answered. Idempotent; NULL-safe. */
void tfs_rest_quiesce(tfs_rest *r);
/* Requests whose headers have arrived and whose response is not yet sent. */
int  tfs_rest_in_flight(const tfs_rest *r);
/* Stops accepting, closes the connections (idle keep-alive ones too), frees. A request still
 * running holds this until it returns. NULL-safe. */
void tfs_rest_stop(tfs_rest *r);

#endif
