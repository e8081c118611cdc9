/* loader: the model registry and its lifecycle. Models have a name and an absolute base path holding
 * integer version folders ("1", "00000123"); a version policy says which of them to serve; the
 * loader loads them on its own threads, polls the base paths for new and removed versions, applies
 * new configs without a restart, and hands out counted handles (tfs_servable) that keep a version
 * alive while a request uses it: a removed version is freed by the last release, never under a
 * request.
 *
 *     tfs_model_config mc = {.name = "half_plus_two", .base_path = "/models/half_plus_two"};
 *     tfs_loader_opts lo = tfs_loader_opts_default();
 *     tfs_loader *l;  tfs_loader_new(&mc, 1, &lo, &l, &st);
 *     tfs_servable *s;
 *     if (tfs_loader_acquire(l, "half_plus_two", -1, NULL, &s, &st) == TFS_OK) {
 *         const tfs_signature *sig = tfs_savedmodel_signature(tfs_servable_model(s), "serving_default");
 *         tfs_servable_run(s, sig, inputs, n, outputs, &st);
 *         tfs_servable_release(s);
 *     }
 *
 * Lifecycle (TensorFlow Serving's):
 *  - tfs_loader_new scans every base path once and loads the versions the policy aspires to before
 *    it returns (so a server answers as soon as it listens); a failed load is recorded in that
 *    version's status (state END + error) and the loader still starts. Then, when
 *    opts.file_system_poll_wait_seconds > 0, a poll thread rescans every base path that often.
 *  - A version folder is loaded only when complete: it holds saved_model.pb (or .pbtxt) and, after
 *    start, its file tree (names, sizes, mtimes) did not change between two consecutive polls. A
 *    folder holding saved_model.pb counts for the policy at once, so the version it replaces keeps
 *    serving until it loads. A failed version is retried only when its files change.
 *  - Unloads follow TF Serving's availability-preserving policy: a version the policy no longer
 *    wants (or whose folder is gone) unloads once a wanted version is AVAILABLE, or when no version
 *    is wanted at all. Unloading takes it out of every lookup at once (UNLOADING); the last
 *    tfs_servable_release frees it (END). A version wanted again while still held serves again.
 *  - States per version: START (aspired, waiting) -> LOADING -> AVAILABLE -> UNLOADING -> END, or
 *    LOADING -> END with the load error. END records are kept so GetModelStatus can report them.
 *  - A version that fails to load never replaces one that serves: "latest" keeps answering from
 *    the newest AVAILABLE version.
 *  - Memory: each AVAILABLE version accounts the bytes its tensors hold; with
 *    opts.max_model_memory_bytes > 0 a load that would exceed the total fails with
 *    RESOURCE_EXHAUSTED (estimated from the version folder's size before loading, checked again
 *    with the real figure after).
 * Thread-safety: every function may be called from any thread, except tfs_loader_free.
 */
#ifndef TFS_LOADER_LOADER_H
#define TFS_LOADER_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "batching/batching.h"
#include "runtime/runtime.h"
#include "savedmodel/savedmodel.h"

typedef struct tfs_loader   tfs_loader;
typedef struct tfs_servable tfs_servable;

/* FileSystemStoragePathSourceConfig.ServableVersionPolicy. */
enum tfs_policy_kind {
    TFS_POLICY_LATEST = 0,   /* the num_versions highest versions (default, num_versions 1) */
    TFS_POLICY_ALL,          /* every version folder */
    TFS_POLICY_SPECIFIC,     /* exactly the listed versions that exist */
};

typedef struct tfs_version_policy {
    enum tfs_policy_kind kind;
    int                  num_versions;    /* LATEST: >= 1; 0 means 1 (proto3 default) */
    int                  n_versions;      /* SPECIFIC: the listed versions */
    const int64_t       *versions;        /* borrowed */
} tfs_version_policy;

typedef struct tfs_version_label {
    const char *label;    /* borrowed */
    int64_t     version;
} tfs_version_label;

/* One ModelConfig. Every pointer is borrowed: the loader copies what it keeps. A zeroed struct
 * with name and base_path set is a valid config (latest 1, no labels, platform "tensorflow"). */
typedef struct tfs_model_config {
    const char              *name;
    const char              *base_path;        /* absolute */
    const char              *platform;         /* NULL or "" = "tensorflow"; others refused */
    tfs_version_policy       policy;
    int                      n_labels;
    const tfs_version_label *labels;
} tfs_model_config;

/* Runs after a version loaded and before it becomes AVAILABLE (TF Serving's model warmup). A
 * non-OK return fails that version's load with the returned status (state END). `dir` is the
 * version folder. Called on a load thread, possibly on several at once; must not call back into
 * the loader. */
typedef enum tfs_code (*tfs_warmup_fn)(void *ctx, const char *model_name, int64_t version,
                                       const char *dir, const tfs_savedmodel *model,
                                       tfs_status *st);

/* TensorFlow Serving's BatchingParameters as plain values (the server parses the text files).
 * Get one from tfs_batching_params_default(): TF Serving's defaults when no file is given. */
#define TFS_BATCHING_MAX_ALLOWED 64
typedef struct tfs_batching_params {
    int64_t max_batch_size;             /* default 1000 */
    int64_t batch_timeout_micros;       /* default 0 */
    int64_t max_enqueued_batches;       /* default 10 */
    int64_t num_batch_threads;          /* default 0 = online CPUs; global params only */
    int     n_allowed_batch_sizes;
    int64_t allowed_batch_sizes[TFS_BATCHING_MAX_ALLOWED];
    bool    pad_variable_length_inputs;
    bool    enable_large_batch_splitting;
    int64_t max_execution_batch_size;   /* 0 = max_batch_size */
    enum tfs_batch_scheduler scheduler; /* default ADAPTIVE; global params only (not in TF's
                                         * BatchingParameters: --batching_scheduler) */
} tfs_batching_params;

tfs_batching_params tfs_batching_params_default(void);

/* --enable_per_model_batching_params: called on a load thread with the version folder before the
 * version is served. Sets *found and fills *out (starting from a copy of the global params) when
 * the folder holds its own parameters; a non-OK return fails that version's load. */
typedef enum tfs_code (*tfs_batching_params_fn)(void *ctx, const char *dir,
                                                tfs_batching_params *out, bool *found,
                                                tfs_status *st);

typedef struct tfs_loader_opts {
    const char   *tags;                            /* MetaGraphDef tags, default "serve" */
    double        file_system_poll_wait_seconds;   /* default 1 (TF Serving's); <= 0: no polling */
    bool          allow_version_labels_for_unavailable_models;   /* default false */
    int64_t       max_model_memory_bytes;          /* 0 = no limit (default); a refused load
                                                    * is not retried until its files change */
    int           num_load_threads;                /* default 2; versions load in parallel */
    bool          disable_graph_rewrites;          /* default false: each version's graph is
                                                    * rewritten for serving (savedmodel.h) */
    bool          disable_session_run_timeout;     /* default false: a run that is not
                                                    * batched stops at its request's deadline,
                                                    * between kernels and loop iterations
                                                    * (TF Serving's
                                                    * --enforce_session_run_timeout) */
    bool          allow_file_ops_at_request_time;  /* default false: a request's run may not
                                                    * execute ops reading files its inputs name
                                                    * (RestoreV2, InitializeTableFromTextFile) */
    tfs_warmup_fn warmup;                          /* NULL: none */
    void         *warmup_ctx;
    /* Dynamic batching (--enable_batching): the loader then owns one tfs_batcher with
     * batching.num_batch_threads threads and one queue per (version, signature), created on the
     * first request of that signature and freed after the version unloads and its queued tasks
     * completed. Queue options are validated when the loader starts (INVALID_ARGUMENT). */
    bool                   enable_batching;        /* default false */
    tfs_batching_params    batching;               /* copied */
    tfs_batching_params_fn per_model_batching;     /* NULL: every version uses `batching` */
    void                  *per_model_batching_ctx;
} tfs_loader_opts;

tfs_loader_opts tfs_loader_opts_default(void);

/* TensorFlow Serving's ModelVersionStatus.State values. */
enum tfs_version_state {
    TFS_VERSION_UNKNOWN   = 0,
    TFS_VERSION_START     = 10,
    TFS_VERSION_LOADING   = 20,
    TFS_VERSION_AVAILABLE = 30,
    TFS_VERSION_UNLOADING = 40,
    TFS_VERSION_END       = 50,
};
const char *tfs_version_state_name(enum tfs_version_state s);   /* "AVAILABLE" */

typedef struct tfs_version_status {
    int64_t                version;
    enum tfs_version_state state;
    tfs_status             status;        /* the load error when state is END after a failure */
    int64_t                memory_bytes;  /* bytes held while AVAILABLE (tfs_savedmodel_memory_bytes),
                                           * else 0 */
    double                 load_seconds;  /* duration of the last load attempt (incl. warmup) */
} tfs_version_status;

/* Validates and copies the configs (INVALID_ARGUMENT naming the model for: empty or duplicate
 * names, relative or empty base paths, unknown platform, LATEST num_versions < 0, SPECIFIC with no
 * versions, a label set twice or a label on a version a SPECIFIC policy does not list), then loads
 * as described above. Labels are installed after the first loads (see tfs_loader_reload): a label
 * on a version that did not load fails the start with FAILED_PRECONDITION unless
 * allow_version_labels_for_unavailable_models. Caller owns *out. */
enum tfs_code tfs_loader_new(const tfs_model_config *models, int n_models,
                             const tfs_loader_opts *opts, tfs_loader **out, tfs_status *st);
/* The checks tfs_loader_new and tfs_loader_reload make on a config before they change anything
 * (the INVALID_ARGUMENT texts above), without a loader: *bad is the index of the model config at
 * fault, or -1. For callers that can point at the config's source (a file's line and column). */
enum tfs_code tfs_loader_validate(const tfs_model_config *models, int n_models, int *bad,
                                  tfs_status *st);

/* Stops the poll and load threads, then frees. Call after every handle has been released.
 * NULL-safe. */
void tfs_loader_free(tfs_loader *l);

/* Applies a new model list (ModelService/HandleReloadConfigRequest, --model_config_file polling):
 * models no longer listed unload (after their in-flight requests), new ones load, changed ones
 * (base path, policy, labels) take their new settings. The whole config is validated first: an
 * invalid one changes nothing. Labels follow TF Serving's ServerCore: they are installed after
 * the new versions finished loading, so a config may label a version it brings in; a label may
 * point at a version that is not AVAILABLE only when allow_version_labels_for_unavailable_models
 * is set and the label is new; otherwise FAILED_PRECONDITION "Request to assign label to version
 * N of model M, which is not currently available for inference" and the labels stay as they were
 * (the rest of the config is applied, as in TF Serving). tfs_loader_new applies the same rule
 * after its first loads and fails when a label cannot be installed.
 * Returns when the versions the new config aspires to have finished loading (AVAILABLE or END);
 * OK if every model listed has an AVAILABLE version, otherwise the first failed load's status. */
enum tfs_code tfs_loader_reload(tfs_loader *l, const tfs_model_config *models, int n_models,
                                tfs_status *st);

/* Rescans every base path now and waits for the loads it starts to finish and for the unloads
 * to drop the registry's references (what the poll thread does each period); a version a handle
 * still holds stays UNLOADING until released. For tests and for servers started without polling. */
void tfs_loader_poll_now(tfs_loader *l);

/* Status of every version of a model (newest first), or of one version when version >= 0.
 * NOT_FOUND "Could not find any versions of model NAME" / "Could not find version N of model NAME".
 * *out is an array of *n records the caller frees with tfs_free. */
enum tfs_code tfs_loader_model_status(tfs_loader *l, const char *name, int64_t version,
                                      tfs_version_status **out, int *n, tfs_status *st);

/* The names of the configured models, in config order: *names is an array of *n strings, freed
 * together by tfs_loader_names_free. */
enum tfs_code tfs_loader_model_names(tfs_loader *l, char ***names, int *n, tfs_status *st);
void          tfs_loader_names_free(char **names, int n);   /* NULL-safe */

/* Why a configured model's base path could not be listed at its last scan: NOT_FOUND,
 * PERMISSION_DENIED or UNAVAILABLE "model 'M': cannot read base path P: REASON" (a missing path,
 * not a folder, a symlink loop, no permission), copied into *st; TFS_OK when the last scan read
 * it or the model is not configured. Versions already loaded keep serving meanwhile. For
 * readiness reports: GetModelStatus keeps TF Serving's texts. */
enum tfs_code tfs_loader_base_path_error(tfs_loader *l, const char *name, tfs_status *st);

/* True when every configured model has at least one AVAILABLE version (readiness). */
bool tfs_loader_ready(tfs_loader *l);

/* Counters since start, for metrics. */
typedef struct tfs_loader_stats {
    int64_t loads_ok;
    int64_t loads_failed;
    int64_t unloads;
    double  load_seconds_total;     /* sum over all load attempts */
    int64_t memory_bytes;           /* held by loaded models now: every AVAILABLE version, and
                                     * UNLOADING ones a handle still holds */
    int     versions_available;
} tfs_loader_stats;
void tfs_loader_get_stats(tfs_loader *l, tfs_loader_stats *out);

/* TensorFlow's SavedModel load counters (what TensorFlow exports as
 * /tensorflow/cc/saved_model/load_attempt_count{model_path, status="success"|"fail"} and
 * load_latency{model_path}, microseconds of successful loads): one call of fn per version folder
 * a SavedModel load ran on since start (at most 1024 folders), with its successful and failed
 * attempts and the microseconds the successful ones took (the SavedModel load only: no warmup).
 * A load refused by the memory limit before it started is not an attempt. fn runs under the
 * loader's lock: it must be short and must not call the loader. */
typedef void (*tfs_load_record_fn)(void *ctx, const char *path, int64_t ok, int64_t failed,
                                   int64_t ok_microseconds);
void tfs_loader_load_records(tfs_loader *l, tfs_load_record_fn fn, void *ctx);

/* A counted handle on an AVAILABLE version: version >= 0 for a specific one, -1 for the latest
 * AVAILABLE; label non-NULL selects by version label. NOT_FOUND with TF Serving's texts
 * "Servable not found for request: Latest(NAME)" / "Specific(NAME, N)"; INVALID_ARGUMENT
 * "Unrecognized servable version label: L". Release with tfs_servable_release. */
enum tfs_code tfs_loader_acquire(tfs_loader *l, const char *name, int64_t version,
                                 const char *label, tfs_servable **out, tfs_status *st);
void tfs_servable_release(tfs_servable *s);    /* NULL-safe */

const char           *tfs_servable_name(const tfs_servable *s);
int64_t               tfs_servable_version(const tfs_servable *s);
const tfs_savedmodel *tfs_servable_model(const tfs_servable *s);

/* Runs a signature of this version and waits for it. Same contract as tfs_savedmodel_run. With
 * batching on and a batchable signature (see tfs_servable_run_async) the inputs go through the
 * signature's batch queue and this thread waits for the batch (what Classify, Regress and
 * MultiInference use); otherwise it runs on this thread. */
enum tfs_code tfs_servable_run(const tfs_servable *s, const tfs_signature *sig,
                               const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                               tfs_status *st);

/* Where a run's time went, for response headers and metrics. */
typedef struct tfs_run_times {
    int64_t queue_us;     /* submitted -> its batch started (0 when run directly) */
    int64_t compute_us;   /* the run of the batch (or of the request alone) */
    int64_t batch_size;   /* rows of the batch it ran in (padding included); 0 when not run */
} tfs_run_times;

/* Called exactly once per tfs_servable_run_async. On TFS_OK outputs[0..n_outputs) (signature
 * order) are new references the callback owns (the array is borrowed); on an error outputs is
 * NULL. st and times are borrowed for the call. Runs on a batch thread, or on the submitting
 * thread before tfs_servable_run_async returns, or on the thread of tfs_servable_task_cancel; it
 * must be short (store and wake). */
typedef void (*tfs_servable_done_fn)(void *ctx, enum tfs_code code, const tfs_status *st,
                                     tfs_tensor **outputs, int n_outputs,
                                     const tfs_run_times *times);

typedef struct tfs_servable_task tfs_servable_task;

/* Runs a signature without waiting. A signature is batched when batching is on, the request gives
 * every signature input, and every input and output may have a batch dimension (rank unknown, or
 * rank >= 1 with dim 0 unknown); its tasks then go to that signature's queue and done runs on a
 * batch thread after the batch ran (or with UNAVAILABLE when the queue is full, INVALID_ARGUMENT
 * for rows past max_batch_size, DEADLINE_EXCEEDED when deadline_ns passed before its batch
 * started: never run). Otherwise (batching off, TF Serving's behaviour) the signature runs on the
 * calling thread and done runs before this returns (DEADLINE_EXCEEDED without running when the
 * deadline has already passed). deadline_ns: tfs_batch_now_ns() clock, 0 = none.
 * The task keeps its own reference on s until done has run, so the caller may release s inside
 * done. Inputs are kept by reference; the caller must not change them until done.
 * *task (may be NULL) gets a handle for tfs_servable_task_cancel when the task was queued, NULL
 * otherwise; give it back with tfs_servable_task_release. Returns the code done got when done
 * ran before the return, TFS_OK when it will run later. */
enum tfs_code tfs_servable_run_async(tfs_servable *s, const tfs_signature *sig,
                                     const tfs_named_tensor *inputs, int n_inputs,
                                     int64_t deadline_ns, tfs_servable_done_fn done, void *ctx,
                                     tfs_servable_task **task, tfs_status *st);
/* The client went away: a task not yet running completes now with CANCELLED (done runs on this
 * thread) and true is returned; false when it is running or done (it then completes normally). */
bool tfs_servable_task_cancel(tfs_servable_task *t);
void tfs_servable_task_release(tfs_servable_task *t);   /* NULL-safe; does not cancel */

/* One batch queue's figures, for metrics: every queue of every version still held. Calls fn once
 * per queue under no loader lock (the version is kept alive for the call). */
typedef void (*tfs_batch_stats_fn)(void *ctx, const char *model, int64_t version,
                                   const char *signature, const tfs_batch_queue_stats *stats);
void tfs_loader_batch_stats(tfs_loader *l, tfs_batch_stats_fn fn, void *ctx);
bool tfs_loader_batching(const tfs_loader *l);   /* batching enabled */

#endif
