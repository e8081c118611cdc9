/* Observability internals of server/: per-request records, the metrics store behind the Prometheus
 * endpoint, the exposition-format writer and the access log. Not for use outside server/ (and its
 * tests).
 *
 * Every finished API request produces one tfs__request_record: the front end (rest.c for REST,
 * grpc.c for gRPC) calls tfs__request_begin when it starts answering and tfs__request_done when
 * the answer is ready; in between, the service layer notes what it learned on the way (the model,
 * the version that answered, the signature, the time spent in the model run) into the calling
 * thread's current record (tfs__request_note*). tfs__request_done feeds the metrics store and the
 * access log. When neither is enabled both calls are a few stores.
 *
 * The store is sharded per recording thread so that the hot path takes no lock and shares no
 * cache line: see metrics.c. A scrape merges the shards (tfs__metrics_snapshot) and writes the
 * families (metrics-render.c). Other modules' figures (the loader's now, batching's later) are
 * written at scrape time by collectors (tfs__metrics_add_collector).
 */
#ifndef TFS_SERVER_METRICS_IMPL_H
#define TFS_SERVER_METRICS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "server/server-impl.h"

/* ---- request records (metrics.c) ------------------------------------------------------------ */

/* What a request asked for. Names (tfs__method_name): "predict", "classify", "regress",
 * "multi_inference", "metadata", "status", "reload_config" (TF Serving's API); "infer",
 * "model_metadata", "model_ready", "server_metadata", "server_ready", "server_live" (KServe's v2
 * protocol, from TFS__METHOD_INFER on); "other". */
enum tfs__method {
    TFS__METHOD_PREDICT = 0,
    TFS__METHOD_CLASSIFY,
    TFS__METHOD_REGRESS,
    TFS__METHOD_MULTI_INFERENCE,
    TFS__METHOD_METADATA,
    TFS__METHOD_STATUS,
    TFS__METHOD_RELOAD_CONFIG,
    TFS__METHOD_INFER,
    TFS__METHOD_MODEL_METADATA,
    TFS__METHOD_MODEL_READY,
    TFS__METHOD_SERVER_METADATA,
    TFS__METHOD_SERVER_READY,
    TFS__METHOD_SERVER_LIVE,
    TFS__METHOD_OTHER,
    TFS__METHOD_COUNT
};
const char *tfs__method_name(enum tfs__method m);
/* True for the methods of KServe's v2 protocol: the metrics' protocol label says "v2-rest" or
 * "v2-grpc" for them, "rest" or "grpc" for TF Serving's API. */
bool tfs__method_is_v2(enum tfs__method m);
/* The method a gRPC path names ("/tensorflow.serving.PredictionService/Predict" -> PREDICT,
 * "/inference.GRPCInferenceService/ModelInfer" -> INFER);
 * OTHER for anything else (NULL included). */
enum tfs__method tfs__method_from_grpc_path(const char *path);

/* Label values longer than this are cut (a model name comes from the request). */
#define TFS__LABEL_MAX 128

typedef struct tfs__request_record {
    enum tfs_api     api;
    enum tfs__method method;
    char             model[TFS__LABEL_MAX];       /* "" when the request named none */
    int64_t          version;                     /* the version that answered; -1 unknown */
    char             signature[TFS__LABEL_MAX];   /* as requested; "serving_default" when the
                                                   * request named none and a version answered */
    enum tfs_code    code;
    int              http_status;                 /* 0 for gRPC */
    double           total_seconds;
    double           runtime_seconds;             /* in model runs; 0 when none ran */
    bool             ran;                         /* a model run was reached: runtime_seconds
                                                   * counts even when it rounds to 0 */
    int64_t          start_ns;                    /* private: 0 when recording is off */
} tfs__request_record;

/* Starts a record and makes it the calling thread's current one (the target of the notes). When
 * neither metrics nor the access log is on, only marks the record inactive. */
void tfs__request_begin(tfs__request_record *r, enum tfs_api api, enum tfs__method m);
/* Fill the calling thread's current record; no-ops without one. Strings are copied (cut to
 * TFS__LABEL_MAX - 1 bytes); NULL leaves a field as is; version < 0 leaves it as is. */
void tfs__request_note(const char *model, int64_t version, const char *signature);
void tfs__request_note_runtime(double seconds);
/* Detaches the calling thread's current record (r) without recording it: for a request answered
 * later, maybe on another thread (the record is then copied to where the answer is made; notes
 * after this go nowhere, so set runtime_seconds and ran on the record itself). */
void tfs__request_detach(tfs__request_record *r);
/* The caller sets code and http_status. Computes total_seconds, detaches the record from the
 * thread, and records it (tfs__metrics_record, tfs__access_log_write). */
void tfs__request_done(tfs__request_record *r);

/* Monotonic clock in nanoseconds. */
int64_t tfs__clock_ns(void);

/* ---- the metrics store (metrics.c) ---------------------------------------------------------- */

/* TensorFlow Serving's latency buckets, microseconds: Buckets::Exponential(10, 1.8, 33), so 33
 * finite upper bounds 10 * 1.8^k and +Inf. */
#define TFS__TF_BUCKETS 34
/* tfserve_request_duration_seconds: 14 finite bounds (0.5 ms .. 10 s) and +Inf. */
#define TFS__DUR_BUCKETS 15
extern const double tfs__tf_bucket_limits[TFS__TF_BUCKETS - 1];    /* microseconds */
extern const double tfs__dur_bucket_limits[TFS__DUR_BUCKETS - 1];  /* seconds */

/* Turns request recording on (tfs__metrics_configure does this when a path is set). */
void tfs__metrics_enable(bool on);
bool tfs__metrics_enabled(void);
/* Adds one finished request to the calling thread's shard. No lock, no allocation once the
 * (api, method, model, signature, code) series exists in this shard. */
void tfs__metrics_record(const tfs__request_record *r);

/* One merged series: the sum over every shard of one (api, method, model, signature, code). */
typedef struct tfs__metrics_row {
    enum tfs_api     api;
    enum tfs__method method;
    enum tfs_code    code;
    const char      *model;       /* borrowed from the store: valid until tfs__metrics_teardown */
    const char      *signature;
    uint64_t         latency[TFS__TF_BUCKETS];    /* request time, TF buckets (per bucket) */
    uint64_t         latency_sum_ns;
    uint64_t         runtime[TFS__TF_BUCKETS];    /* model run time, TF buckets */
    uint64_t         runtime_sum_ns;
    uint64_t         duration[TFS__DUR_BUCKETS];  /* request time, our buckets */
} tfs__metrics_row;

typedef struct tfs__metrics_snapshot {
    tfs__metrics_row *rows;   /* sorted by (api, method, model, signature, code) */
    int               n;
    int64_t           in_flight;
} tfs__metrics_snapshot;

/* Merges every shard. RESOURCE_EXHAUSTED when out of memory. Free with _deinit. */
enum tfs_code tfs__metrics_snapshot_take(tfs__metrics_snapshot *s, tfs_status *st);
void          tfs__metrics_snapshot_deinit(tfs__metrics_snapshot *s);   /* NULL-safe */
uint64_t      tfs__metrics_row_count(const tfs__metrics_row *r);       /* requests in the row */

/* Frees every shard and series. Only when no thread records any more (shutdown, tests); threads
 * that record afterwards start new shards. Also forgets the collectors and the loader. */
void tfs__metrics_teardown(void);

/* ---- exposition (metrics-render.c) ---------------------------------------------------------- */

typedef struct tfs__prom_label {
    const char *name;
    const char *value;
} tfs__prom_label;

/* "# HELP name help\n# TYPE name type\n" (help escaped as the format wants: \\ and \n). */
void tfs__prom_header(tfs__buf *b, const char *name, const char *type, const char *help);
/* A label value with \\, \" and \n escaped. */
void tfs__prom_escape(tfs__buf *b, const char *s);
/* "name{l1="v1",...} value\n" (no braces without labels). Values in Go's text form: integers
 * plainly, +Inf / -Inf / NaN, otherwise the shortest decimal that reads back the same. */
void tfs__prom_sample(tfs__buf *b, const char *name, const tfs__prom_label *labels, int n,
                      double value);
/* A histogram's lines: name_bucket{...,le="L"} with cumulative counts for each of the n_limits
 * finite bounds and +Inf (counts[0..n_limits], per bucket, not cumulative), then _sum and
 * _count (the +Inf count). */
void tfs__prom_histogram(tfs__buf *b, const char *name, const tfs__prom_label *labels, int n,
                         const double *limits, int n_limits, const uint64_t *counts, double sum);

/* Writes every family: the request families from a snapshot, requests in flight, the collectors,
 * the process figures. */
enum tfs_code tfs__metrics_render(tfs__buf *out, tfs_status *st);

/* Scrape-time writers for figures other modules own. Batching registers its own here. At most
 * 8; called in registration order under the scrape lock. */
typedef void (*tfs__metrics_collector)(tfs__buf *out, void *ctx);
void tfs__metrics_add_collector(tfs__metrics_collector fn, void *ctx);
/* Batching's collector (metrics-batch.c) for a loader with batching on; no-op otherwise. The
 * teardown (from tfs__metrics_teardown) forgets it. */
void tfs__metrics_add_batching(tfs_loader *l);
void tfs__metrics_batching_teardown(void);
/* The loader whose models and loads are reported (NULL: none). Registers its collector once. */
void tfs__metrics_set_loader(tfs_loader *l);
/* Whether name is a model the loader is configured with (loaded or not); true for "" and when no
 * loader is set. Takes the loader's lock briefly; for the recording path's new series only. */
bool tfs__metrics_model_served(const char *name);
/* Whether the latest available version of a served model has this signature; true for "" and
 * when no loader is set, false when no version is available. Same use as the above. */
bool tfs__metrics_signature_served(const char *model, const char *signature);

/* ---- configuration and serving (metrics-config.c) ------------------------------------------- */

/* Reads --monitoring_config_file (MonitoringConfig text: prometheus_config { enable, path }),
 * --metrics_path (overrides the path and enables), --access_log_file and
 * --access_log_sample_rate, and turns on what they ask for. INVALID_ARGUMENT naming the flag for
 * a bad value; the text-format parser's errors for a bad config file; the access log's open
 * error. */
enum tfs_code tfs__metrics_configure(const tfs_server_flags *f, tfs_status *st);
/* The path scrapes are served on, NULL when disabled. */
const char *tfs__metrics_path(void);
/* When method is GET and path (up to any '?') is the metrics path: fills *resp with the
 * exposition text (or a 500 when out of memory) and returns true. Otherwise false, *resp
 * untouched. */
bool tfs__metrics_serve_http(const char *method, const char *path, tfs__rest_response *resp);
/* Flushes and closes the access log, forgets the loader, frees the store. */
void tfs__metrics_shutdown(void);

/* ---- access log (access-log.c) -------------------------------------------------------------- */

/* Opens (appends to) path; rate in [0, 1] is the fraction of requests written, chosen by a
 * counter (request k is written when floor(k * rate) advances), so 0.5 writes every second one.
 * UNAVAILABLE naming the path when it cannot be opened. */
enum tfs_code tfs__access_log_open(const char *path, double rate, tfs_status *st);
bool          tfs__access_log_enabled(void);
/* One line: "2025-01-02T03:04:05.678Z rest predict \"model\" 3 \"sig\" OK 200 1.234\n" (time of
 * the end of the request, UTC; version "-" when unknown; HTTP status "-" for gRPC; latency in ms).
 * Model and signature are quoted with \\, \" and control characters escaped. */
void          tfs__access_log_write(const tfs__request_record *r);
/* Formats the line (without sampling) into buf; returns its length (cut at n - 1). */
size_t        tfs__access_log_format(const tfs__request_record *r, int64_t unix_ns, char *buf,
                                     size_t n);
void          tfs__access_log_close(void);   /* flushes; NULL-safe to call when closed */

#endif
