/* tfserve: a drop-in for tensorflow_model_server. Parses its flags, loads the model, serves the
 * gRPC API (--port) and the REST API and waits for SIGINT or SIGTERM, then shuts down in order
 * (front end first, so no request holds a servable, then the loader).
 *
 * Signals are blocked in every thread we start (the mask is set before any of them starts, and
 * threads inherit it) and taken synchronously with sigwait in the main thread, so no handler runs
 * in the middle of a request. Threads a library started before main() (OpenBLAS starts its pool
 * from a constructor) do not block them, and the kernel hands a process-directed signal to such a
 * thread whenever the main thread is not inside sigwait (while models load at startup, between
 * the drain's waits); its default action would kill the process without a drain. So SIGTERM and
 * SIGINT also get a handler, which only ever runs on such a thread and forwards the signal to the
 * main thread, where it stays pending until sigwait takes it. The first SIGTERM/SIGINT starts a
 * graceful drain (drain.c: not ready,
 * optional delay, listeners closed, requests in flight finish). Exit codes: 0 after a clean
 * shutdown or --version/--help; 1 when the server cannot start ("Failed to start server. Error:
 * ...", also for a flag value out of its range) or when the drain timed out; 128 + signal (143,
 * 130) on a second signal during the drain; 255 (tensorflow_model_server's -1) for a flag value
 * that does not parse or no model to serve, with the usage text.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loader/loader.h"
#include "server/config-impl.h"
#include "server/grpc.h"
#include "server/metrics-impl.h"
#include "server/server.h"

#define LOG_MODULE "main"

static int start_error(const tfs_status *st)
{
    fprintf(stderr, "Failed to start server. Error: %s: %s\n", tfs_code_name(st->code), st->msg);
    return 1;
}

static int usage_error(const char *argv0, const char *msg)
{
    fprintf(stderr, "%s\n", msg);
    tfs_server_flags_usage(stdout, argv0);
    return 255;
}

static pthread_t main_thread;

/* Runs on a thread that does not block SIGTERM/SIGINT (see above); pthread_kill is
 * async-signal-safe. */
static void forward_to_main(int sig)
{
    int saved = errno;
    if (!pthread_equal(pthread_self(), main_thread))
        pthread_kill(main_thread, sig);
    errno = saved;
}

/* Every client connection is a descriptor, and the usual soft limit (1024) would cap the server
 * far below --rest_max_connections; the hard limit is what the administrator allows. */
static void raise_fd_limit(int64_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = old;
    }
    /* A few hundred for models, logs, gRPC and the listening sockets. */
    if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur < want + 256)
        TFS_LOG_WARN(LOG_MODULE, "open-file limit %llu is below --rest_max_connections=%lld plus "
                     "256: connections past it are refused", (unsigned long long)rl.rlim_cur,
                     (long long)want);
}

/* What main has started, for stop_all; NULL where not started. */
typedef struct started {
    tfs_warmup_opts   warmup;   /* the loader keeps a pointer for versions that come later */
    tfs__model_list  *config;
    tfs_loader       *loader;
    tfs_health       *health;
    tfs__config_poll *poll;
    tfs_grpc         *grpc;
    tfs_rest         *rest;
} started;

/* Parses argv into *f and answers --help and --version. Returns false when main is to exit with
 * *rc (0 after --help/--version, 255 for a value that does not parse). */
static bool parse_flags(int argc, char **argv, tfs_server_flags *f, int *rc)
{
    tfs_status st;

    if (tfs_server_flags_parse(argc, argv, f, &st) != TFS_OK) {
        *rc = usage_error(argv[0], st.msg);
        return false;
    }
    if (f->help) {
        tfs_server_flags_usage(stdout, argv[0]);
        return false;
    }
    if (f->version) {
        tfs_server_version(stdout);
        return false;
    }
    return true;
}

/* Sets the log level and format (a bad format is a usage error, 255), then reports the arguments
 * that matched no flag. */
static int setup_logging(const tfs_server_flags *f, const char *argv0)
{
    tfs_status st;

    tfs_log_set_level(f->verbosity);
    if (tfs_server_log_format(f->log_format, &st) != TFS_OK)
        return usage_error(argv0, st.msg);
    for (int i = 0; i < f->n_unknown; i++)
        TFS_LOG_WARN(LOG_MODULE, "unknown argument: %s (ignored; see --help)", f->unknown[i]);
    return 0;
}

/* tfs_server_flags_check, with its exit code: 255 and the usage text, or 1. */
static int validate_flags(tfs_server_flags *f, const char *argv0)
{
    tfs_status st;
    bool       usage;

    if (tfs_server_flags_check(f, &usage, &st) == TFS_OK)
        return 0;
    return usage ? usage_error(argv0, st.msg) : start_error(&st);
}

/* The device every model's sessions use (runtime/device.h). Nothing is probed here: the CUDA
 * module is opened, and a GPU reserves its memory pool, when the first model that may run on it
 * loads, which logs the executor it chose and why (so --device=cpu never opens the module). */
static enum tfs_code setup_device(const tfs_server_flags *f, tfs_status *st)
{
    tfs_device_opts dev = tfs_device_opts_default();
    char           *end = NULL;
    const char     *frac = f->per_process_gpu_memory_fraction;

    dev.memory_fraction = strtod(frac, &end);
    dev.allow_tf32 = f->gpu_allow_tf32;
    if (!*frac || *end)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "--per_process_gpu_memory_fraction=%s is not a number", frac);
    if (tfs_device_parse(f->device, &dev.device, &dev.gpu_id, st) != TFS_OK ||
        tfs_runtime_set_device(&dev, st) != TFS_OK) {
        tfs_status_prefix(st, "--device=%s --per_process_gpu_memory_fraction=%s", f->device,
                          frac);
        return st->code;
    }
    return TFS_OK;
}

/* The process-wide settings every model load uses, so before any model loads: open-file limit,
 * intra-op pool, largest tensor, device, metrics. */
static enum tfs_code setup_process(const tfs_server_flags *f, tfs_status *st)
{
    raise_fd_limit(f->rest_api_port ? f->rest_max_connections : 0);

    /* One intra-op pool for every model and request (runtime.h). */
    tfs_runtime_set_num_threads(f->tensorflow_intra_op_parallelism > 4096
                                    ? 4096 : (int)f->tensorflow_intra_op_parallelism);
    int intra = tfs_runtime_num_threads();
    TFS_LOG_INFO(LOG_MODULE, "intra-op parallelism: %d thread%s (--tensorflow_intra_op_parallelism="
                 "%lld%s); float GEMM kernels: %s", intra, intra == 1 ? "" : "s",
                 (long long)f->tensorflow_intra_op_parallelism,
                 f->tensorflow_intra_op_parallelism == 0 ? ": the CPUs" : "",
                 tfs_runtime_gemm_kernel());

    /* The largest tensor anything may allocate (runtime.h). */
    tfs_runtime_set_max_tensor_bytes((size_t)f->max_tensor_bytes);
    TFS_LOG_INFO(LOG_MODULE, "largest tensor: %zu bytes (--max_tensor_bytes=%lld%s)",
                 tfs_runtime_max_tensor_bytes(), (long long)f->max_tensor_bytes,
                 f->max_tensor_bytes == 0 ? ": half the memory" : "");

    if (setup_device(f, st) != TFS_OK)
        return st->code;
    return tfs__metrics_configure(f, st);
}

/* Blocks SIGINT and SIGTERM for sigwait and forwards them from threads that do not block them (see
 * the top of this file). Before any thread exists, so that every thread inherits the mask. */
static void block_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    main_thread = pthread_self();
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    struct sigaction forward = {.sa_handler = forward_to_main, .sa_flags = SA_RESTART};
    sigemptyset(&forward.sa_mask);
    sigaction(SIGINT, &forward, NULL);
    sigaction(SIGTERM, &forward, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The loader's options from the flags; the warmup options it points at live in *wo. */
static enum tfs_code loader_opts(const tfs_server_flags *f, tfs_warmup_opts *wo,
                                 tfs_loader_opts *lo, tfs_status *st)
{
    *lo = tfs_loader_opts_default();
    *wo = tfs_warmup_opts_default();
    lo->tags = f->saved_model_tags;
    lo->file_system_poll_wait_seconds = (double)f->file_system_poll_wait_seconds;
    lo->allow_version_labels_for_unavailable_models =
        f->allow_version_labels_for_unavailable_models;
    lo->max_model_memory_bytes = f->max_model_memory_bytes;
    lo->disable_graph_rewrites = !f->graph_rewrites;
    lo->disable_session_run_timeout = !f->enforce_session_run_timeout;
    lo->allow_file_ops_at_request_time = f->allow_file_ops_at_request_time;
    if (f->enable_model_warmup) {
        if (f->num_request_iterations_for_warmup > 0)
            wo->num_request_iterations = (int)(f->num_request_iterations_for_warmup > 1000000
                                                   ? 1000000
                                                   : f->num_request_iterations_for_warmup);
        lo->warmup = tfs_warmup_run;
        lo->warmup_ctx = wo;
    }
    if (f->enable_batching) {
        lo->enable_batching = true;
        lo->batching = tfs_batching_params_default();
        if (*f->batching_parameters_file &&
            tfs__batching_read_file(f->batching_parameters_file, &lo->batching, st) != TFS_OK)
            return st->code;
        lo->batching.scheduler = strcmp(f->batching_scheduler, "fixed") == 0
                                     ? TFS_BATCH_SCHEDULER_FIXED
                                     : TFS_BATCH_SCHEDULER_ADAPTIVE;
        if (f->enable_per_model_batching_params)
            lo->per_model_batching = tfs__batching_per_model;
    } else if (f->enable_per_model_batching_params) {
        TFS_LOG_WARN(LOG_MODULE, "--enable_per_model_batching_params has no effect without "
                     "--enable_batching");
    }
    return TFS_OK;
}

/* Reads the model list (--model_config_file replaces the single-model flags, as in TF Serving),
 * loads the models and starts health reporting and the config poller. */
static enum tfs_code start_models(const tfs_server_flags *f, started *s, tfs_status *st)
{
    bool                    from_file = *f->model_config_file;
    tfs_model_config        mc = {.name = f->model_name, .base_path = f->model_base_path,
                                  .platform = "tensorflow"};
    const tfs_model_config *models = &mc;
    int                     n_models = 1;
    tfs_loader_opts         lo;

    if (from_file) {
        if (*f->model_base_path)
            TFS_LOG_WARN(LOG_MODULE, "--model_config_file=%s given: --model_name and "
                         "--model_base_path are ignored", f->model_config_file);
        if (tfs__config_read_file(f->model_config_file, &s->config, st) != TFS_OK)
            return st->code;
        models = s->config->models;
        n_models = s->config->n_models;
        tfs__config_warn_base_paths(s->config, f->model_config_file);
        if (n_models == 0)
            TFS_LOG_WARN(LOG_MODULE, "%s lists no models: serving none", f->model_config_file);
    }
    if (loader_opts(f, &s->warmup, &lo, st) != TFS_OK)
        return st->code;
    if (tfs_loader_new(models, n_models, &lo, &s->loader, st) != TFS_OK) {
        if (from_file && strncmp(st->msg, "batching", 8) != 0)
            tfs_status_prefix(st, "%s", f->model_config_file);
        return st->code;
    }
    if (tfs_health_new(s->loader, &s->health, st) != TFS_OK)
        return st->code;
    if (from_file && f->model_config_file_poll_wait_seconds > 0 &&
        tfs__config_poll_start(s->loader, f->model_config_file,
                               (double)f->model_config_file_poll_wait_seconds, s->config, &s->poll,
                               st) != TFS_OK)
        return st->code;
    tfs__metrics_set_loader(s->loader);
    tfs__metrics_add_batching(s->loader);
    return TFS_OK;
}

/* gRPC first, as tensorflow_model_server does; a port that cannot be bound is fatal. */
static enum tfs_code start_grpc(const tfs_server_flags *f, started *s, tfs_status *st)
{
    tfs_grpc_opts go = tfs_grpc_opts_default();
    go.port = (int)f->port;
    go.num_cq_threads = (int)f->grpc_num_threads;
    go.channel_args = f->grpc_channel_arguments;
    go.health = s->health;
    go.ssl_config_file = f->ssl_config_file;
    /* TF Serving sizes a thread pool with it; ours is --grpc_num_threads threads on one queue. */
    TFS_LOG_INFO(LOG_MODULE, "--grpc_max_threads=%lld accepted; serving gRPC with %d threads "
                 "(--grpc_num_threads)%s%s", (long long)f->grpc_max_threads, go.num_cq_threads,
                 *go.channel_args ? ", channel arguments " : "", go.channel_args);
    if (tfs_grpc_start(s->loader, &go, &s->grpc, st) != TFS_OK)
        return st->code;
    TFS_LOG_INFO(LOG_MODULE, "Running gRPC ModelServer at 0.0.0.0:%d ...", tfs_grpc_port(s->grpc));
    return TFS_OK;
}

static enum tfs_code start_rest(const tfs_server_flags *f, started *s, tfs_status *st)
{
    if (f->rest_api_port == 0) {
        TFS_LOG_INFO(LOG_MODULE, "REST is off: pass --rest_api_port to serve it");
        if (*f->rest_api_ssl_cert_file || *f->rest_api_ssl_key_file)
            TFS_LOG_WARN(LOG_MODULE, "--rest_api_ssl_cert_file/--rest_api_ssl_key_file have no "
                         "effect without --rest_api_port");
        if (tfs__metrics_path())
            TFS_LOG_WARN(LOG_MODULE, "Prometheus metrics are served on the REST port, which is "
                         "off: no metrics endpoint");
        return TFS_OK;
    }
    tfs_rest_opts ro = tfs_rest_opts_default();
    ro.port = (int)f->rest_api_port;
    ro.num_threads = (int)f->rest_api_num_threads;
    ro.timeout_ms = f->rest_api_timeout_in_ms;
    ro.connection_timeout_s = (int)f->rest_connection_timeout_seconds;
    ro.max_connections = (int)f->rest_max_connections;
    ro.health = s->health;
    ro.tls_cert_file = f->rest_api_ssl_cert_file;
    ro.tls_key_file = f->rest_api_ssl_key_file;
    if (tfs_rest_start(s->loader, &ro, &s->rest, st) != TFS_OK)
        return st->code;
    TFS_LOG_INFO(LOG_MODULE, "Exporting HTTP/REST API at:localhost:%d ...", tfs_rest_port(s->rest));
    if (*ro.tls_cert_file)
        TFS_LOG_INFO(LOG_MODULE, "REST serves HTTPS only, with the certificate of %s",
                     ro.tls_cert_file);
    if (tfs__metrics_path())
        TFS_LOG_INFO(LOG_MODULE, "Prometheus metrics at localhost:%d%s", tfs_rest_port(s->rest),
                     tfs__metrics_path());
    return TFS_OK;
}

/* Waits for the first SIGTERM/SIGINT and drains (drain.c). Returns the exit code; does not
 * return when requests may still be running on other threads, since nothing may be freed under
 * them. */
static int wait_and_drain(const tfs_server_flags *f, const started *s, sigset_t *sigs)
{
    int            sig = 0;
    bool           exit_now = false;
    tfs_drain_opts dopts = {.delay_seconds = f->drain_delay_seconds,
                            .timeout_seconds = f->drain_timeout_seconds};

    sigwait(sigs, &sig);
    int rc = tfs_server_drain(s->health, s->rest, s->grpc, sigs, sig, &dopts, &exit_now);
    if (exit_now) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}

/* The config poller and the front ends first (no request may hold a servable, no reload may be
 * running), then the loader. */
static void stop_all(started *s, int rc)
{
    tfs__config_poll_stop(s->poll);
    tfs_grpc_stop(s->grpc);
    tfs_rest_stop(s->rest);
    tfs__metrics_shutdown();   /* flushes the access log; forgets the loader before it goes */
    tfs_health_free(s->health);
    tfs_loader_free(s->loader);
    tfs__config_free(s->config);
    if (s->grpc || s->rest)
        TFS_LOG_INFO(LOG_MODULE, "shutdown complete; exiting with status %d", rc);
}

int main(int argc, char **argv)
{
    tfs_server_flags f;
    tfs_status       st;
    started          s = {0};
    sigset_t         sigs;
    int              rc = 0;

    if (!parse_flags(argc, argv, &f, &rc) || (rc = setup_logging(&f, argv[0])) != 0 ||
        (rc = validate_flags(&f, argv[0])) != 0)
        goto done;
    if (tfs_server_tls_check(&f, &st) != TFS_OK || setup_process(&f, &st) != TFS_OK)
        goto fail;
    block_signals(&sigs);
    if (start_models(&f, &s, &st) != TFS_OK || start_grpc(&f, &s, &st) != TFS_OK ||
        start_rest(&f, &s, &st) != TFS_OK)
        goto fail;
    rc = wait_and_drain(&f, &s, &sigs);
    goto done;

fail:
    rc = start_error(&st);
done:
    stop_all(&s, rc);
    tfs_server_flags_deinit(&f);
    return rc;
}
