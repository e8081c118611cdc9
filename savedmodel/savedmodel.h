/* savedmodel: the SavedModel format in both directions.
 *
 * Reading: tfs_savedmodel_load() reads <dir>/saved_model.pb, picks the MetaGraphDef whose tag set
 * is the requested one, imports its GraphDef into a tfs_graph (TF2 function calls inlined,
 * stripped default attrs put back from the runtime's op registry), checks that every op the signatures, the
 * restore and the init op need has a kernel, restores variables from <dir>/variables (TensorBundle)
 * by running the saver's restore op, feeds asset paths and runs the init op. Then, unless turned
 * off, it rewrites the graph for serving (runtime/rewrite.h): signatures the rewritten graph can
 * compute on its own run on it, the others (those that assign variables, or read variables another
 * signature assigns) on the original graph and its session.
 *
 *     tfs_savedmodel *m;
 *     if (tfs_savedmodel_load("/models/half_plus_two/123", NULL, &m, &st) != TFS_OK) ...
 *     const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
 *     tfs_tensor *out[1];
 *     tfs_savedmodel_run(m, sig, (const tfs_named_tensor[]){{"x", x}}, 1, out, &st);
 *
 * Writing: tfs_savedmodel_write() turns a tfs_graph + signatures + variable values into a
 * directory TensorFlow can load (used for the bundled demo model, and by train/ for export).
 *
 * Also TensorFlow's other files: TFRecord files, training checkpoints (a TensorBundle plus the
 * directory's `checkpoint` state file, tfs_checkpoint_*) and TensorBoard event files
 * (tfs_events_writer_*), each in its own section below.
 *
 * A loaded model is immutable (but for its variables) and may be run from many threads.
 */
#ifndef TFS_SAVEDMODEL_SAVEDMODEL_H
#define TFS_SAVEDMODEL_SAVEDMODEL_H

#include <stdio.h>

#include "runtime/runtime.h"

/* ---- signatures ----------------------------------------------------------------------------- */

typedef struct tfs_tensor_info {
    char          *alias;        /* the signature's map key: "x" */
    char          *tensor_name;  /* the graph tensor: "x:0"; NULL for sparse/composite encodings */
    enum tfs_dtype dtype;        /* as declared (may be a _REF dtype, or INVALID if absent) */
    tfs_shape      shape;        /* rank -1 = unknown rank */
} tfs_tensor_info;

typedef struct tfs_signature {
    char            *key;          /* "serving_default" */
    char            *method_name;  /* "tensorflow/serving/predict" */
    int              n_inputs;
    tfs_tensor_info *inputs;       /* sorted by alias */
    int              n_outputs;
    tfs_tensor_info *outputs;      /* sorted by alias */
    int              n_defaults;
    char           **default_names;
    tfs_tensor     **defaults;     /* SignatureDef.defaults */
    tfs_status       usable;       /* OK, or why it cannot run (e.g. an op tfserve lacks) */
} tfs_signature;

/* ---- loading -------------------------------------------------------------------------------- */

typedef struct tfs_savedmodel tfs_savedmodel;

typedef struct tfs_savedmodel_opts {
    const char *tags;      /* comma-separated; default "serve" */
    /* Graph rewrites for serving (runtime/rewrite.h: constant folding, Identity removal, BatchNorm
     * folding, MatMul/Conv2D fusion) are made after the variables are restored, for the
     * signatures they can serve; true turns them off (default false: on). */
    bool disable_graph_rewrites;
} tfs_savedmodel_opts;

tfs_savedmodel_opts tfs_savedmodel_opts_default(void);

/* Loads a version directory. Errors name the file or ops at fault:
 * NOT_FOUND (no saved_model.pb), DATA_LOSS (corrupt protobuf, bad CRC, truncated shard),
 * UNIMPLEMENTED ("ops not supported by tfserve: A, B"), INVALID_ARGUMENT (graph inconsistencies),
 * NOT_FOUND also when no MetaGraphDef has the tags, RESOURCE_EXHAUSTED. Caller owns *out. */
enum tfs_code tfs_savedmodel_load(const char *dir, const tfs_savedmodel_opts *opts,
                                  tfs_savedmodel **out, tfs_status *st);
void tfs_savedmodel_free(tfs_savedmodel *m);

int                  tfs_savedmodel_signature_count(const tfs_savedmodel *m);
const tfs_signature *tfs_savedmodel_signature_at(const tfs_savedmodel *m, int i); /* sorted by key */
const tfs_signature *tfs_savedmodel_signature(const tfs_savedmodel *m, const char *key); /* NULL if absent */
/* The session over the graph as loaded (its variables hold the model's state). Signatures that
 * run on the rewritten graph use a session of their own: run signatures with
 * tfs_savedmodel_run. */
tfs_session         *tfs_savedmodel_session(const tfs_savedmodel *m);
const char          *tfs_savedmodel_dir(const tfs_savedmodel *m);
/* Bytes of the tensors the loaded model holds: variable values and graph constants (Const
 * nodes' values), and the constants the graph rewrites computed. What the loader accounts
 * against --max_model_memory_bytes. */
int64_t              tfs_savedmodel_memory_bytes(const tfs_savedmodel *m);
/* The graph rewrites' counts (nodes_before/after, per-rewrite counts, runs_served), all zero when
 * they were turned off. Borrowed. */
const tfs_rewrite_stats *tfs_savedmodel_rewrite_stats(const tfs_savedmodel *m);
/* True when signature sig of m runs on the rewritten graph. */
bool                 tfs_savedmodel_signature_rewritten(const tfs_savedmodel *m,
                                                        const tfs_signature *sig);

/* Runs a signature: inputs by alias (missing ones taken from the signature's defaults; unknown or
 * missing-without-default ones are INVALID_ARGUMENT), fetches every output in signature order into
 * outputs[0..sig->n_outputs-1] (caller owns). Thread-safe. */
enum tfs_code tfs_savedmodel_run(const tfs_savedmodel *m, const tfs_signature *sig,
                                 const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                                 tfs_status *st);

/* Prints what `saved_model_cli show --all` shows: tag sets, each signature's inputs and outputs
 * (dtype, shape, tensor name) and method, the variables in the bundle (name, dtype, shape), and the
 * op types the graph uses (marking those tfserve lacks). Works on models that would not load. */
enum tfs_code tfs_savedmodel_inspect(const char *dir, FILE *out, tfs_status *st);

/* Would the model serve? Loads dir as a server would (tags: comma-separated, NULL = "serve"),
 * then dry-runs every signature once on zeros and empty strings of its declared shapes (unknown
 * sizes 1), printing each step's outcome to out. Returns the number of failures (0: it would
 * serve): a failed load, a signature that cannot run, a dry run failing for a reason other than
 * its made-up input values (INVALID_ARGUMENT, OUT_OF_RANGE and FAILED_PRECONDITION are reported,
 * not counted). */
int tfs_savedmodel_check(const char *dir, const char *tags, FILE *out);

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct tfs_savedmodel_variable {
    const char *name;       /* checkpoint key and VariableV2 node name */
    tfs_tensor *value;      /* borrowed */
} tfs_savedmodel_variable;

/* Writes a TF1-style SavedModel into `dir` (created; must not exist): saved_model.pb with one
 * MetaGraphDef tagged "serve" holding `graph` plus generated saver ops (save/Const, save/RestoreV2,
 * save/Assign_*, save/restore_all), the signatures, and variables/ as a TensorBundle. Each
 * variable must already be a VariableV2 node in `graph`. */
enum tfs_code tfs_savedmodel_write(const char *dir, const tfs_graph *graph,
                                   const tfs_signature *sigs, int n_sigs,
                                   const tfs_savedmodel_variable *vars, int n_vars, tfs_status *st);

/* ---- TFRecord files ------------------------------------------------------------------------- */

/* TensorFlow's record file format, uncompressed (TF Serving's warmup requests, datasets of
 * tf.Example): each record is a uint64 LE length, the masked crc32c of those 8 bytes, the data and
 * the masked crc32c of the data. Both CRCs are checked on read.
 *
 *     tfs_tfrecord_reader *r;
 *     const uint8_t *rec;  size_t n;
 *     if (tfs_tfrecord_reader_open(path, &r, &st) != TFS_OK) ...
 *     while (tfs_tfrecord_reader_next(r, &rec, &n, &st) == TFS_OK) use(rec, n);
 *     if (st.code != TFS_OUT_OF_RANGE) ... a corrupt file ...
 *     tfs_tfrecord_reader_close(r);
 *
 * A reader or writer is used by one thread at a time. */
typedef struct tfs_tfrecord_reader tfs_tfrecord_reader;
typedef struct tfs_tfrecord_writer tfs_tfrecord_writer;

/* Records larger than this are refused (read: DATA_LOSS, write: INVALID_ARGUMENT). */
#define TFS_TFRECORD_MAX_RECORD_BYTES ((size_t)256 << 20)

/* NOT_FOUND / PERMISSION_DENIED "<path>: cannot open: <why>"; FAILED_PRECONDITION when path is not
 * a regular file. Caller owns *out (close with tfs_tfrecord_reader_close). */
enum tfs_code tfs_tfrecord_reader_open(const char *path, tfs_tfrecord_reader **out,
                                       tfs_status *st);
/* The next record: *data (borrowed, valid until the next call or close; NUL-terminated for
 * convenience) and *len. OUT_OF_RANGE at the end of the file (TensorFlow's convention). DATA_LOSS
 * "<path>: record N: ..." (N counted from 0) for a CRC mismatch, a record cut short or a length
 * over TFS_TFRECORD_MAX_RECORD_BYTES; never allocates more than the bytes left in the file.
 * After an error other than OUT_OF_RANGE the reader may only be closed. */
enum tfs_code tfs_tfrecord_reader_next(tfs_tfrecord_reader *r, const uint8_t **data, size_t *len,
                                       tfs_status *st);
void tfs_tfrecord_reader_close(tfs_tfrecord_reader *r);   /* NULL-safe */

/* Creates (or truncates) path. Caller owns *out and must close it. */
enum tfs_code tfs_tfrecord_writer_open(const char *path, tfs_tfrecord_writer **out,
                                       tfs_status *st);
/* Appends one record (len may be 0). */
enum tfs_code tfs_tfrecord_writer_write(tfs_tfrecord_writer *w, const void *data, size_t len,
                                        tfs_status *st);
/* Flushes, closes and frees (even on failure, which it reports: a full disk shows up here).
 * NULL-safe. */
enum tfs_code tfs_tfrecord_writer_close(tfs_tfrecord_writer *w, tfs_status *st);

/* Flushes buffered records to the file and syncs it to disk; a full disk shows up here. */
enum tfs_code tfs_tfrecord_writer_flush(tfs_tfrecord_writer *w, tfs_status *st);

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* Checkpoints in TensorFlow's format (what tf.train.Saver and tf.train.CheckpointManager write and
 * tf.train.load_checkpoint / Saver.restore read): named tensors in a TensorBundle
 * <dir>/<name>-<step>.index + .data-00000-of-00001, and the directory's `checkpoint` state file, a
 * text-format CheckpointState whose paths are relative to the directory, as CheckpointManager
 * writes them:
 *     model_checkpoint_path: "model.ckpt-200"
 *     all_model_checkpoint_paths: "model.ckpt-100"
 *     all_model_checkpoint_paths: "model.ckpt-200"
 *     all_model_checkpoint_timestamps: 1700000000.25
 *     all_model_checkpoint_timestamps: 1700000100.5
 *     last_preserved_timestamp: 1699999990.0
 *
 *     tfs_checkpoint_opts o = tfs_checkpoint_opts_default();    // keep the newest 5
 *     tfs_named_tensor vars[] = {{"dense/kernel", w}, {"global_step", step_t}};
 *     if (tfs_checkpoint_save("/ckpt", "model.ckpt", 200, vars, 2, &o, NULL, &st) != TFS_OK) ...
 *     char *prefix;  tfs_checkpoint *c;  tfs_tensor *t;
 *     if (tfs_checkpoint_latest("/ckpt", &prefix, &st) != TFS_OK) ...   // "/ckpt/model.ckpt-200"
 *     tfs_checkpoint_open(prefix, &c, &st);
 *     tfs_checkpoint_read(c, "dense/kernel", TFS_DTYPE_FLOAT, &t, &st);
 *
 * Writes are atomic: tensors go to temporary files that are synced and renamed into place, then
 * the state file is replaced the same way; a failed save (a full disk, out of memory) returns an
 * error, removes what it wrote and leaves the previous checkpoints and state file as they were.
 * One process saves into a directory at a time. */

typedef struct tfs_checkpoint_opts {
    /* How many of the newest checkpoints to keep (tf.train.Saver's max_to_keep, default 5); older
     * ones listed in the state file are deleted after a save. 0 keeps all. */
    int keep_checkpoint_max;
} tfs_checkpoint_opts;

tfs_checkpoint_opts tfs_checkpoint_opts_default(void);

/* Saves tensors[0..n) under their names (non-empty, distinct; any dtype but resource and variant)
 * as the checkpoint <dir>/<name>-<step> (<dir>/<name> when step < 0), creating dir if needed, then
 * records it as the newest in <dir>/checkpoint (tf.train.CheckpointManager's rules: an existing
 * state file is continued, a corrupt one is replaced with a warning, saving an existing prefix
 * again moves it to the end) and deletes the oldest checkpoints beyond opts->keep_checkpoint_max
 * (their .index and .data-?????-of-????? files). opts NULL = defaults. *prefix_out (may be NULL)
 * receives the new prefix (caller frees with tfs_free). INVALID_ARGUMENT for a bad name (empty,
 * containing '/', "checkpoint") or tensor; RESOURCE_EXHAUSTED for out of memory or a full disk;
 * other I/O errors name the file. */
enum tfs_code tfs_checkpoint_save(const char *dir, const char *name, int64_t step,
                                  const tfs_named_tensor *tensors, int n,
                                  const tfs_checkpoint_opts *opts, char **prefix_out,
                                  tfs_status *st);

/* The `checkpoint` state file's contents, paths as the file holds them (relative to the
 * directory, or absolute). */
typedef struct tfs_checkpoint_state {
    char   *model_checkpoint_path;
    int     n_paths;
    char  **all_model_checkpoint_paths;        /* oldest first */
    int     n_timestamps;                      /* 0 (not recorded) or n_paths */
    double *all_model_checkpoint_timestamps;   /* seconds since the epoch */
    double  last_preserved_timestamp;
} tfs_checkpoint_state;

/* Reads <dir>/checkpoint. NOT_FOUND "<dir>: no checkpoint state file ..." when absent; DATA_LOSS
 * naming the file and the line when it is not a CheckpointState, when model_checkpoint_path is
 * empty, or when the timestamps do not pair with the paths. Caller owns *out. */
enum tfs_code tfs_checkpoint_state_read(const char *dir, tfs_checkpoint_state **out,
                                        tfs_status *st);
void tfs_checkpoint_state_free(tfs_checkpoint_state *s);   /* NULL-safe */

/* The newest checkpoint's prefix (tf.train.latest_checkpoint): model_checkpoint_path of the state
 * file, joined to dir when relative. The errors of tfs_checkpoint_state_read, and NOT_FOUND when
 * <prefix>.index does not exist. Caller frees *prefix with tfs_free. */
enum tfs_code tfs_checkpoint_latest(const char *dir, char **prefix, tfs_status *st);

/* An open checkpoint (any TensorBundle: ours or TensorFlow's). Thread-safe once open. */
typedef struct tfs_checkpoint tfs_checkpoint;

typedef struct tfs_checkpoint_var {
    const char    *name;    /* borrowed from the checkpoint */
    enum tfs_dtype dtype;
    tfs_shape      shape;
} tfs_checkpoint_var;

/* Opens <prefix>.index and checks the whole index (its data shards are read on demand).
 * NOT_FOUND when absent; DATA_LOSS naming the file when corrupt. Caller owns *out. */
enum tfs_code tfs_checkpoint_open(const char *prefix, tfs_checkpoint **out, tfs_status *st);
void tfs_checkpoint_close(tfs_checkpoint *c);                              /* NULL-safe */
/* The tensors it holds, sorted by name (bytewise), as tf.train.list_variables lists them. */
int                tfs_checkpoint_count(const tfs_checkpoint *c);
tfs_checkpoint_var tfs_checkpoint_var_at(const tfs_checkpoint *c, int i);
/* Index of name, or -1. */
int                tfs_checkpoint_find(const tfs_checkpoint *c, const char *name);
/* Reads one tensor, checking its size and CRC. want = TFS_DTYPE_INVALID accepts any dtype, else a
 * different one is INVALID_ARGUMENT. NOT_FOUND "<prefix>: no tensor 'name'"; DATA_LOSS for a short
 * or corrupt data shard; UNIMPLEMENTED for a partitioned (sliced) variable. Caller owns *out. */
enum tfs_code tfs_checkpoint_read(tfs_checkpoint *c, const char *name, enum tfs_dtype want,
                                  tfs_tensor **out, tfs_status *st);

/* ---- TensorBoard event files ---------------------------------------------------------------- */

/* What tf.summary.FileWriter / TensorFlow's EventsWriter write and TensorBoard reads:
 * <logdir>/events.out.tfevents.<unix seconds, 10 digits>.<hostname>, a TFRecord file of Event
 * protos. The first holds wall_time (whole seconds) and file_version "brain.Event:2"; then one
 * Event per call: scalars as Summary.Value.simple_value, histograms as HistogramProto with
 * TensorFlow's default buckets (limits +-1e-12 * 1.1^k up to 1e20, 0 and +-DBL_MAX; runs of empty
 * buckets collapsed, as the HistogramSummary op does), the graph as a serialized GraphDef.
 * Every event carries the wall time of the call, in seconds since the epoch.
 *
 *     tfs_events_writer *ev;
 *     if (tfs_events_writer_open("runs/mlp", &ev, &st) != TFS_OK) ...
 *     tfs_events_writer_graph(ev, graph, &st);
 *     tfs_events_writer_scalar(ev, "loss", step, loss, &st);
 *     tfs_events_writer_histogram(ev, "dense/kernel", step, w, &st);
 *     if (tfs_events_writer_close(ev, &st) != TFS_OK) ... a write error ...
 *
 * Records are buffered: flush to make them visible to a running TensorBoard. A writer is used by
 * one thread at a time. */
typedef struct tfs_events_writer tfs_events_writer;

/* Creates logdir (and parents) when missing and a new event file in it (a ".<n>" suffix is added
 * when that name is already taken), and writes and flushes the file_version event. Caller owns
 * *out (close with tfs_events_writer_close). */
enum tfs_code tfs_events_writer_open(const char *logdir, tfs_events_writer **out,
                                     tfs_status *st);
/* The event file's path (borrowed). */
const char *tfs_events_writer_path(const tfs_events_writer *w);
/* A scalar (stored as a float, as simple_value is). tag must be non-empty: INVALID_ARGUMENT. */
enum tfs_code tfs_events_writer_scalar(tfs_events_writer *w, const char *tag, int64_t step,
                                       double value, tfs_status *st);
/* A histogram of every element of values (float, double or an integer dtype, any shape, may be
 * empty). INVALID_ARGUMENT "Nan in summary histogram for: <tag>" (or Infinity) as TensorFlow;
 * UNIMPLEMENTED for other dtypes. */
enum tfs_code tfs_events_writer_histogram(tfs_events_writer *w, const char *tag, int64_t step,
                                          const tfs_tensor *values, tfs_status *st);
/* The graph (Event.graph_def: the GraphDef tfs_savedmodel_write would export for it). */
enum tfs_code tfs_events_writer_graph(tfs_events_writer *w, const tfs_graph *graph,
                                      tfs_status *st);
/* Writes buffered events to the file and syncs it. */
enum tfs_code tfs_events_writer_flush(tfs_events_writer *w, tfs_status *st);
/* Flushes, closes and frees (even on failure, which it reports). NULL-safe. */
enum tfs_code tfs_events_writer_close(tfs_events_writer *w, tfs_status *st);

#endif
