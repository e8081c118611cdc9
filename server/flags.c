/* tfserve's command line: the subset of tensorflow_model_server's flags we implement, in
 * TensorFlow's flag syntax (tensorflow/core/util/command_line_flags.cc): `--name=value` only (no
 * space-separated values), bools also bare (`--version`) or `=true/false/1/0`. A value that
 * does not parse is an error; an argument that matches no flag is collected and reported, and the
 * server still starts, as tensorflow_model_server does. One static table drives parsing, defaults,
 * the ranges of numeric values and --help; tfs_server_flags_check holds the rules between flags.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "server/server.h"

#ifndef TFS_VERSION
#define TFS_VERSION "0.0.0"
#endif

enum flag_type { FLAG_INT, FLAG_BOOL, FLAG_STRING, FLAG_LEVEL };

typedef struct flag_def {
    const char    *name;
    enum flag_type type;
    const char    *def;      /* default, in flag syntax; NULL: computed (see apply_defaults) */
    size_t         offset;   /* field in tfs_server_flags */
    const char    *help;
    /* FLAG_INT only: the values tfs_server_flags_check accepts, [min, max], when bounded (an
     * unbounded flag takes any int64, as tensorflow_model_server's do); zero says what 0 means
     * when it is not a count (NULL: it is just a number). Both appear in --help. */
    bool           bounded;
    int64_t        min, max;
    const char    *zero;
} flag_def;

#define F(field) offsetof(tfs_server_flags, field)
#define RANGE(lo, hi, zero_means) .bounded = true, .min = (lo), .max = (hi), .zero = (zero_means)

/* Only bounded flags name their range fields: the others leave them zero, which GCC's
 * -Wmissing-field-initializers would flag on every entry. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const flag_def flags[] = {
    {"port", FLAG_INT, "8500", F(port),
     "TCP port for the gRPC API (PredictionService, ModelService)",
     RANGE(0, 65535, "any free port")},
    {"rest_api_port", FLAG_INT, "0", F(rest_api_port),
     "TCP port for the HTTP/REST API. Must differ from --port.", RANGE(0, 65535, "off")},
    {"rest_api_num_threads", FLAG_INT, NULL, F(rest_api_num_threads),
     "Number of threads for HTTP/REST API processing (default 4 x CPUs)", RANGE(1, 4096, NULL)},
    {"rest_api_timeout_in_ms", FLAG_INT, "30000", F(rest_api_timeout_in_ms),
     "Timeout for HTTP/REST API calls: a predict not started by then (e.g. waiting in a "
     "batch queue) is answered 504 DEADLINE_EXCEEDED without running"},
    {"enforce_session_run_timeout", FLAG_BOOL, "true", F(enforce_session_run_timeout),
     "Stop a running predict at its deadline (the gRPC call's, or --rest_api_timeout_in_ms), "
     "between kernels and loop iterations, answering DEADLINE_EXCEEDED (a batched run: at the "
     "latest deadline of its requests)"},
    {"rest_connection_timeout_seconds", FLAG_INT, "60", F(rest_connection_timeout_seconds),
     "Close a REST connection after this many seconds with no bytes moving either way (idle "
     "keep-alive, a stalled request, a client not reading its answer) (a tfserve flag)",
     RANGE(0, INT32_MAX, "never")},
    {"rest_max_connections", FLAG_INT, "4096", F(rest_max_connections),
     "Most REST connections open at once, at least --rest_api_num_threads; more wait in the "
     "kernel's backlog (a tfserve flag)", RANGE(1, 1000000, NULL)},
    {"allow_file_ops_at_request_time", FLAG_BOOL, "false", F(allow_file_ops_at_request_time),
     "Let a request's run execute ops that read files their inputs name (RestoreV2, "
     "InitializeTableFromTextFile); off, they fail with PERMISSION_DENIED (a tfserve flag)"},
    {"grpc_num_threads", FLAG_INT, "2", F(grpc_num_threads),
     "Threads taking gRPC calls off the completion queue (a tfserve flag)", RANGE(1, 64, NULL)},
    {"grpc_max_threads", FLAG_INT, NULL, F(grpc_max_threads),
     "Max grpc server threads (accepted for compatibility; see --grpc_num_threads)"},
    {"grpc_channel_arguments", FLAG_STRING, "", F(grpc_channel_arguments),
     "Comma-separated key=value gRPC channel arguments, e.g. "
     "grpc.max_receive_message_length=1000 (overrides the INT32_MAX message limit)"},
    {"ssl_config_file", FLAG_STRING, "", F(ssl_config_file),
     "SSLConfig text file (server_key, server_cert, custom_ca: PEM strings; client_verify): "
     "serve gRPC over TLS"},
    {"rest_api_ssl_cert_file", FLAG_STRING, "", F(rest_api_ssl_cert_file),
     "PEM certificate (chain) file: with --rest_api_ssl_key_file, serve REST over HTTPS "
     "(a tfserve flag)"},
    {"rest_api_ssl_key_file", FLAG_STRING, "", F(rest_api_ssl_key_file),
     "PEM private key file of --rest_api_ssl_cert_file (a tfserve flag)"},
    {"tensorflow_intra_op_parallelism", FLAG_INT, "0", F(tensorflow_intra_op_parallelism),
     "Number of threads to use to parallelize the execution of an individual op (one pool "
     "shared by all models)", RANGE(0, INT64_MAX, "the number of CPUs")},
    {"device", FLAG_STRING, "auto", F(device),
     "Where models run: auto (a GPU when one is present and the model has ops it runs, else "
     "the CPU), cpu, gpu (= gpu:0) or gpu:N; the choice is logged per model (a tfserve flag)"},
    {"per_process_gpu_memory_fraction", FLAG_STRING, "0", F(per_process_gpu_memory_fraction),
     "Fraction of each GPU's memory reserved (when the first model using it loads) for all "
     "models, 0..1; 0: tfserve's default, 0.5"},
    {"gpu_allow_tf32", FLAG_BOOL, "false", F(gpu_allow_tf32),
     "Let float matrix products and convolutions on the GPU use TF32 tensor cores (faster, "
     "about 1e-3 relative error); off, GPU results match the CPU's to float rounding (a "
     "tfserve flag)"},
    {"model_name", FLAG_STRING, "default", F(model_name), "Name of the model"},
    {"model_base_path", FLAG_STRING, "", F(model_base_path),
     "Absolute path to the model: a folder of integer version folders (required unless "
     "--model_config_file is given)"},
    {"model_config_file", FLAG_STRING, "", F(model_config_file),
     "ModelServerConfig text file listing the models to serve; overrides --model_name and "
     "--model_base_path"},
    {"model_config_file_poll_wait_seconds", FLAG_INT, "0", F(model_config_file_poll_wait_seconds),
     "Re-read --model_config_file every N seconds and apply changes",
     RANGE(0, INT64_MAX, "read it once")},
    {"file_system_poll_wait_seconds", FLAG_INT, "1", F(file_system_poll_wait_seconds),
     "Interval in seconds between each poll of the filesystem for new model versions; "
     "0 or less: no polling after the first load"},
    {"allow_version_labels_for_unavailable_models", FLAG_BOOL, "false",
     F(allow_version_labels_for_unavailable_models),
     "Allow assigning version labels to versions that are not loaded yet"},
    {"max_model_memory_bytes", FLAG_INT, "0", F(max_model_memory_bytes),
     "Refuse to load a version that would bring the loaded models' tensors past this many bytes "
     "(a tfserve flag)", RANGE(0, INT64_MAX, "no limit")},
    {"max_tensor_bytes", FLAG_INT, "0", F(max_tensor_bytes),
     "Refuse any tensor larger than this many bytes (a request whose values decide a shape, a "
     "gRPC tensor that broadcasts one value) with an error instead of allocating it (a tfserve "
     "flag)", RANGE(0, INT64_MAX, "half the memory the process may use (physical, or its "
     "cgroup's limit)")},
    {"graph_rewrites", FLAG_BOOL, "true", F(graph_rewrites),
     "Rewrite each model's graph for serving after loading it: constant folding, Identity "
     "removal, BatchNorm folding, MatMul/Conv2D + BiasAdd + activation fusion; false serves "
     "graphs as saved (a tfserve flag)"},
    {"saved_model_tags", FLAG_STRING, "serve", F(saved_model_tags),
     "Comma-separated set of tags of the MetaGraphDef to load"},
    {"enable_model_warmup", FLAG_BOOL, "true", F(enable_model_warmup),
     "Replay <version>/assets.extra/tf_serving_warmup_requests before a version is served"},
    {"num_request_iterations_for_warmup", FLAG_INT, "0", F(num_request_iterations_for_warmup),
     "Runs of each warmup record; 0 = 1"},
    {"monitoring_config_file", FLAG_STRING, "", F(monitoring_config_file),
     "MonitoringConfig text file: prometheus_config { enable: true path: \"/...\" } serves "
     "Prometheus metrics on the REST port"},
    {"metrics_path", FLAG_STRING, "", F(metrics_path),
     "Serve Prometheus metrics at this path on the REST port (a tfserve flag; overrides the "
     "monitoring config's path)"},
    {"access_log_file", FLAG_STRING, "", F(access_log_file),
     "Append one line per API request to this file (a tfserve flag)"},
    {"access_log_sample_rate", FLAG_STRING, "1", F(access_log_sample_rate),
     "Fraction of requests written to the access log, 0..1 (a tfserve flag)"},
    {"verbosity", FLAG_LEVEL, "info", F(verbosity),
     "Log level: debug, info, warn or error (a tfserve flag)"},
    {"log_format", FLAG_STRING, "text", F(log_format),
     "Log lines as text or json (one object per line) (a tfserve flag)"},
    {"drain_timeout_seconds", FLAG_INT, "30", F(drain_timeout_seconds),
     "On SIGTERM/SIGINT, how long requests in flight may take to finish before the server "
     "exits anyway with status 1 (a tfserve flag)", RANGE(0, INT64_MAX, NULL)},
    {"drain_delay_seconds", FLAG_INT, "0", F(drain_delay_seconds),
     "On SIGTERM/SIGINT, keep accepting this long while /readyz answers 503, so load balancers "
     "stop routing first (a tfserve flag)", RANGE(0, INT64_MAX, NULL)},
    {"enable_batching", FLAG_BOOL, "false", F(enable_batching),
     "Batch concurrent requests per (model version, signature)"},
    {"batching_parameters_file", FLAG_STRING, "", F(batching_parameters_file),
     "BatchingParameters text file (needs --enable_batching); without it TF Serving's "
     "defaults: max_batch_size 1000, batch_timeout_micros 0, max_enqueued_batches 10, "
     "num_batch_threads = CPUs"},
    {"batching_scheduler", FLAG_STRING, "adaptive", F(batching_scheduler),
     "When a batch that is not full runs: adaptive (a free batch thread takes what is queued at "
     "once; requests gather only while every batch thread is busy) or fixed (TF Serving's: after "
     "batch_timeout_micros, even on an idle server) (a tfserve flag)"},
    {"enable_per_model_batching_params", FLAG_BOOL, "false", F(enable_per_model_batching_params),
     "Read batching_params.pbtxt from each version folder (needs --enable_batching)"},
    {"enable_per_model_batching_parameters", FLAG_BOOL, "false",
     F(enable_per_model_batching_params), "Same as --enable_per_model_batching_params"},
    {"version", FLAG_BOOL, "false", F(version), "Display the version and exit"},
    {"help", FLAG_BOOL, "false", F(help), "Show this usage text and exit"},
};
#pragma GCC diagnostic pop

#define N_FLAGS ((int)(sizeof flags / sizeof flags[0]))

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static const char *type_name(enum flag_type t)
{
    switch (t) {
    case FLAG_INT:    return "int64";
    case FLAG_BOOL:   return "bool";
    case FLAG_STRING: return "string";
    default:          return "level";
    }
}

static bool parse_value(const flag_def *d, const char *v, tfs_server_flags *f)
{
    void *field = (char *)f + d->offset;
    switch (d->type) {
    case FLAG_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno == ERANGE)
            return false;
        *(int64_t *)field = x;
        return true;
    }
    case FLAG_BOOL:
        if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
            *(bool *)field = true;
        else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
            *(bool *)field = false;
        else
            return false;
        return true;
    case FLAG_STRING: {
        char *s = tfs_strdup(v);
        if (!s)
            return false;
        tfs_free(*(char **)field);
        *(char **)field = s;
        return true;
    }
    case FLAG_LEVEL:
        for (int i = 0; i < 4; i++) {
            if (strcasecmp(v, level_names[i]) == 0) {
                *(enum tfs_log_level *)field = (enum tfs_log_level)(TFS_LOG_LEVEL_DEBUG + i);
                return true;
            }
        }
        if (strcasecmp(v, "warning") == 0) {
            *(enum tfs_log_level *)field = TFS_LOG_LEVEL_WARN;
            return true;
        }
        return false;
    }
    return false;
}

static enum tfs_code apply_defaults(tfs_server_flags *f, tfs_status *st)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < N_FLAGS; i++) {
        if (flags[i].def && !parse_value(&flags[i], flags[i].def, f))
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory setting flag defaults");
    }
    int cpus = tfs_runtime_cpu_count();
    f->rest_api_num_threads = 4 * cpus;
    f->grpc_max_threads = 4 * cpus;
    return TFS_OK;
}

/* Matches "--name=value" (or bare "--name" for bools). Returns the flag, or NULL. */
static const flag_def *match(const char *arg, const char **value)
{
    if (strncmp(arg, "--", 2) != 0)
        return NULL;
    arg += 2;
    for (int i = 0; i < N_FLAGS; i++) {
        size_t n = strlen(flags[i].name);
        if (strncmp(arg, flags[i].name, n) != 0)
            continue;
        if (arg[n] == '=') {
            *value = arg + n + 1;
            return &flags[i];
        }
        if (arg[n] == 0 && flags[i].type == FLAG_BOOL) {
            *value = "true";
            return &flags[i];
        }
    }
    return NULL;
}

enum tfs_code tfs_server_flags_parse(int argc, char **argv, tfs_server_flags *f, tfs_status *st)
{
    enum tfs_code code = apply_defaults(f, st);
    if (code != TFS_OK)
        return code;
    if (argc > 1) {
        f->unknown = tfs_calloc((size_t)argc, sizeof *f->unknown);
        if (!f->unknown)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory parsing flags");
    }
    for (int i = 1; i < argc; i++) {
        const char     *value = NULL;
        const flag_def *d = match(argv[i], &value);
        if (!d) {
            f->unknown[f->n_unknown++] = argv[i];
            continue;
        }
        if (!parse_value(d, value, f))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Couldn't interpret value %s for flag %s.",
                           value, d->name);
    }
    tfs_status_clear(st);
    return TFS_OK;
}

static const flag_def *lookup(const char *name)
{
    for (int i = 0; i < N_FLAGS; i++)
        if (strcmp(flags[i].name, name) == 0)
            return &flags[i];
    return NULL;
}

enum tfs_code tfs_server_flags_check(tfs_server_flags *f, bool *usage, tfs_status *st)
{
    bool rest, cert, key;

    *usage = false;
    /* What tensorflow_model_server answers with its usage text. */
    if (!*f->model_config_file && !*f->model_base_path) {
        *usage = true;
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Both --model_base_path and --model_config_file "
                       "are empty: one of them is required");
    }
    for (int i = 0; i < N_FLAGS; i++) {
        const flag_def *d = &flags[i];
        if (!d->bounded)
            continue;
        int64_t v = *(const int64_t *)((const char *)f + d->offset);
        if (v < d->min || v > d->max)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--%s=%lld is not in [%lld, %lld]", d->name,
                           (long long)v, (long long)d->min, (long long)d->max);
    }
    /* tensorflow_model_server starts without REST then, rather than refusing to start. */
    if (f->rest_api_port != 0 && f->rest_api_port == f->port) {
        TFS_LOG_ERROR("main", "--rest_api_port cannot be the same as --port (%lld). Please use a "
                      "different port for HTTP/REST API. Skipped exporting HTTP/REST API.",
                      (long long)f->port);
        f->rest_api_port = 0;
    }
    rest = f->rest_api_port != 0;
    /* libmicrohttpd splits the connection limit among its threads and refuses a thread none. */
    if (rest && f->rest_max_connections < f->rest_api_num_threads)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--rest_max_connections=%lld is not in "
                       "[--rest_api_num_threads (%lld), %lld]", (long long)f->rest_max_connections,
                       (long long)f->rest_api_num_threads,
                       (long long)lookup("rest_max_connections")->max);
    cert = *f->rest_api_ssl_cert_file != 0;
    key = *f->rest_api_ssl_key_file != 0;
    if (rest && cert != key)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--rest_api_ssl_cert_file and "
                       "--rest_api_ssl_key_file go together: %s is missing",
                       cert ? "--rest_api_ssl_key_file" : "--rest_api_ssl_cert_file");
    if (*f->batching_parameters_file && !f->enable_batching)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--batching_parameters_file is set without "
                       "setting --enable_batching to true.");
    if (strcmp(f->batching_scheduler, "adaptive") != 0 && strcmp(f->batching_scheduler, "fixed"))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--batching_scheduler=%s: expected adaptive or "
                       "fixed", f->batching_scheduler);
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_server_flags_deinit(tfs_server_flags *f)
{
    if (!f)
        return;
    for (int i = 0; i < N_FLAGS; i++)
        if (flags[i].type == FLAG_STRING)
            tfs_free(*(char **)((char *)f + flags[i].offset));
    tfs_free(f->unknown);
    memset(f, 0, sizeof *f);
}

void tfs_server_flags_usage(FILE *out, const char *argv0)
{
    fprintf(out, "usage: %s --model_base_path=/models/NAME [--model_name=NAME] "
                 "[--rest_api_port=8501] [flags]\n   or: %s --model_config_file=PATH [flags]\n"
                 "Flags:\n",
            argv0 ? argv0 : "tfserve", argv0 ? argv0 : "tfserve");
    for (int i = 0; i < N_FLAGS; i++) {
        char lhs[64];
        snprintf(lhs, sizeof lhs, "--%s=%s", flags[i].name,
                 flags[i].def ? flags[i].def : "4xCPUs");
        fprintf(out, "\t%-33s\t%s\t%s", lhs, type_name(flags[i].type), flags[i].help);
        if (flags[i].bounded)
            fprintf(out, " (range [%lld, %lld]%s%s)", (long long)flags[i].min,
                    (long long)flags[i].max, flags[i].zero ? "; 0: " : "",
                    flags[i].zero ? flags[i].zero : "");
        fputc('\n', out);
    }
}

void tfs_server_version(FILE *out)
{
    fprintf(out, "TensorFlow ModelServer: %s\nTensorFlow Library: tfserve\n", TFS_VERSION);
}
