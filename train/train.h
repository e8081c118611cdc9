/* train: tfserve-train's library. It builds training graphs on the runtime (runtime/), feeds them
 * from datasets, and writes checkpoints and SavedModels with savedmodel/. Nothing here touches
 * HTTP, JSON, gRPC or generated protobuf code.
 *
 *     tfs_tensor *x, *y;                                   // Fashion-MNIST as the package has it
 *     tfs_idx_read("train-images-idx3-ubyte.gz", &x, &st); // [60000, 28, 28] uint8
 *     tfs_idx_read("train-labels-idx1-ubyte.gz", &y, &st); // [60000] uint8
 *     tfs_dataset_opts o = tfs_dataset_opts_default();
 *     o.batch_size = 64;  o.shuffle_buffer = 60000;  o.seed = 42;  o.epochs = 5;  o.prefetch = 2;
 *     tfs_dataset *ds;
 *     tfs_dataset_from_tensors((const char *[]){"image", "label"}, (tfs_tensor *[]){x, y}, 2, &o,
 *                              &ds, &st);
 *     tfs_dataset_map(ds, "image", TFS_DTYPE_FLOAT, 1.0 / 255, 0.0, &st);   // x / 255
 *     tfs_tensor *batch[2];                                // [64, 28, 28] float, [64] int32
 *     while (tfs_dataset_next(ds, batch, &st) == TFS_OK) { ...; tfs_tensor_unref(batch[0]); ... }
 *     if (st.code != TFS_OUT_OF_RANGE) ...                 // a real error
 *     tfs_dataset_free(ds);  tfs_tensor_unref(x);  tfs_tensor_unref(y);
 *
 * Conventions (those of runtime.h): fallible functions return enum tfs_code and take
 * tfs_status *st last; parameters are borrowed unless the comment says "takes ownership" or
 * "keeps a reference"; results of _new/_read/_from functions belong to the caller; free functions
 * accept NULL. Readers validate every byte of their input: a corrupt or hostile file gives a
 * status naming the file and the position (byte offset, record, or line:column), never a crash,
 * and every size read from a file is checked against the bytes really there before it is
 * allocated. Thread affinity: readers are reentrant (any thread); a tfs_dataset belongs to one
 * owner thread (its prefetch thread is internal and never calls back into user code).
 */
#ifndef TFS_TRAIN_TRAIN_H
#define TFS_TRAIN_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"
#include "train/config.h"
#include "train/dist.h"
#include "train/fit.h"
#include "train/model.h"
#include "train/plot.h"

/* ================================ datasets ================================================== */

/* ---- files and gzip ------------------------------------------------------------------------- */

/* Largest file (after decompression) the readers accept: RESOURCE_EXHAUSTED beyond it. */
#define TFS_DATA_MAX_BYTES ((size_t)1 << 34)

/* Decompresses a gzip file image (RFC 1952; every member of a multi-member file, trailing zero
 * padding allowed) with zlib, which honours the header flags (FEXTRA, FNAME, FCOMMENT, FHCRC with
 * its CRC checked) and checks each member's CRC-32 and ISIZE. `name` (borrowed) prefixes every
 * message. Output is at most max_out bytes (RESOURCE_EXHAUSTED beyond). *out is tfs_malloc'ed
 * (caller frees with tfs_free; never NULL on success, even for 0 bytes). DATA_LOSS "<name>: ..."
 * with the byte offset for anything malformed: not gzip, truncated, corrupt (zlib's reason: bad
 * header, invalid code, distance too far back, incorrect data check for a CRC-32 mismatch,
 * incorrect length check for ISIZE), trailing garbage. */
enum tfs_code tfs_gunzip(const char *name, const void *in, size_t n, size_t max_out, void **out,
                         size_t *out_len, tfs_status *st);

/* Reads a whole file (at most TFS_DATA_MAX_BYTES); a file that starts with the gzip magic is
 * decompressed, and a name ending in ".gz" that is not gzip is DATA_LOSS. *out: tfs_malloc'ed,
 * caller frees with tfs_free. NOT_FOUND / PERMISSION_DENIED "<path>: cannot open: <why>",
 * FAILED_PRECONDITION when path is not a regular file. */
enum tfs_code tfs_data_file_read(const char *path, void **out, size_t *len, tfs_status *st);

/* ---- IDX (the MNIST format) ----------------------------------------------------------------- */

/* Reads an IDX file, plain or gzip: magic 0x00 0x00 <type> <ndims>, then ndims big-endian uint32
 * dimensions, then the big-endian elements. Types: 0x08 uint8 -> DT_UINT8, 0x09 int8 -> DT_INT8,
 * 0x0B int16 -> DT_INT16, 0x0C int32 -> DT_INT32, 0x0D float32 -> DT_FLOAT, 0x0E float64 ->
 * DT_DOUBLE. *out has the file's dims (ndims 1..TFS_MAX_RANK) and holds host-order values.
 * DATA_LOSS "<path>: ..." for a bad magic or type, a data size that differs from the dims'
 * product (missing or trailing bytes). */
enum tfs_code tfs_idx_read(const char *path, tfs_tensor **out, tfs_status *st);

/* Writes t (types as above) as an uncompressed IDX file. INVALID_ARGUMENT for another dtype or
 * rank 0, a dim over UINT32_MAX. */
enum tfs_code tfs_idx_write(const char *path, const tfs_tensor *t, tfs_status *st);

/* ---- CSV ------------------------------------------------------------------------------------ */

typedef struct tfs_csv_opts {
    char               delimiter;    /* ',' */
    /* Feature columns by header name, in the order they go into the feature rows; NULL (with
     * n_features 0): every column but the label, in file order. */
    const char *const *features;
    int                n_features;
    const char        *label;        /* label column; NULL: none (*labels is set to NULL) */
    enum tfs_dtype     label_dtype;  /* DT_FLOAT (default), DT_INT32 or DT_INT64 */
} tfs_csv_opts;

tfs_csv_opts tfs_csv_opts_default(void);

/* Reads a CSV file (plain or gzip) whose first row names the columns: *features [N, F] float32,
 * *labels [N] of opts->label_dtype (caller owns both). Fields may be quoted ("a ""b"""), lines end
 * in LF or CRLF, blank lines are skipped, blanks around numbers are ignored. Values are decimal
 * floats (also inf/nan) or, for integer labels, integers. opts NULL: defaults. INVALID_ARGUMENT
 * for a named column that is not in the header; DATA_LOSS "<path>:<line>:<column>: ..." for a row
 * with the wrong number of fields, an empty or non-numeric value, an integer label out of range,
 * an unterminated quote. */
enum tfs_code tfs_csv_read(const char *path, const tfs_csv_opts *opts, tfs_tensor **features,
                           tfs_tensor **labels, tfs_status *st);

/* ---- NPY ------------------------------------------------------------------------------------ */

/* Reads a NumPy .npy file (format 1.0, 2.0, 3.0; plain or gzip): dtypes <f4 <f8 <i4 <i8 |u1 |i1
 * and their big-endian forms (converted to host order) into DT_FLOAT, DT_DOUBLE, DT_INT32,
 * DT_INT64, DT_UINT8, DT_INT8; shape () gives a scalar. UNIMPLEMENTED for other dtypes and for
 * fortran_order True ("Fortran order is not supported: save with np.ascontiguousarray");
 * DATA_LOSS "<path>: ..." for a bad magic, a malformed header, a data size that differs from the
 * shape. Caller owns *out. */
enum tfs_code tfs_npy_read(const char *path, tfs_tensor **out, tfs_status *st);

/* ---- TFRecord files of tf.Example ----------------------------------------------------------- */

/* One fixed-length feature (tf.io.FixedLenFeature). */
typedef struct tfs_feature_spec {
    const char    *name;                 /* the Example's feature key */
    enum tfs_dtype dtype;                /* DT_FLOAT, DT_INT64 or DT_STRING */
    int            rank;                 /* shape of one example's value; rank 0 = scalar */
    int64_t        dims[TFS_MAX_RANK];
    /* NULL: the feature is required. Else its value when an Example lacks the feature: a tensor
     * of `dtype` with one element (repeated to fill the shape) or of the feature's shape.
     * Borrowed by the functions below (they copy it). */
    tfs_tensor    *default_value;
} tfs_feature_spec;

/* Decodes serialized tf.Examples with the runtime's own ParseExample kernel, run in a small graph
 * (a Placeholder of serialized strings, Const keys and defaults, ParseExample) -- the parser that
 * serving uses, so training and serving cannot disagree. A parser is immutable once made and may
 * be used from several threads. */
typedef struct tfs_example_parser tfs_example_parser;

/* INVALID_ARGUMENT for a bad spec (empty or duplicate name, dtype, negative dim, a default of the
 * wrong dtype or size). Caller owns *out. */
enum tfs_code tfs_example_parser_new(const tfs_feature_spec *spec, int n_spec,
                                     tfs_example_parser **out, tfs_status *st);
void          tfs_example_parser_free(tfs_example_parser *p);
/* Parses `n` serialized Examples (data[i], lens[i]); names[i] (may be NULL) label them in
 * messages, e.g. "file.tfrecord:record 12". out[j] receives feature j as [n, dims...] (caller
 * owns). INVALID_ARGUMENT (ParseExample's own messages, which name the example and the key) for
 * an undecodable Example, a missing required feature, a wrong type or value count. */
enum tfs_code tfs_example_parser_parse(const tfs_example_parser *p, int64_t n,
                                       const uint8_t *const *data, const size_t *lens,
                                       const char *const *names, tfs_tensor **out,
                                       tfs_status *st);

/* Reads every record of the TFRecord files (in order) into memory: out[j] is feature j of the
 * spec as [N, dims...] (caller owns). Errors name the file and record ("a.tfrecord:record 7"). */
enum tfs_code tfs_tfrecord_examples_read(const char *const *paths, int n_paths,
                                         const tfs_feature_spec *spec, int n_spec,
                                         tfs_tensor **out, tfs_status *st);

/* ---- the dataset pipeline ------------------------------------------------------------------- */

/* A dataset is tf.data's
 *     source.shuffle(shuffle_buffer, seed, reshuffle_each_iteration=True)
 *           .batch(batch_size, drop_remainder).repeat(epochs).prefetch(prefetch)
 * with a per-component map (cast, x * scale + shift) applied while batching. Elements are tuples
 * of named components ("image", "label"); each batch is one tensor per component, [B, ...] where
 * the source's component is [N, ...]. Batches never straddle epochs: an epoch of N examples gives
 * ceil(N / B) batches (floor with drop_remainder), the last one smaller.
 *
 * Shuffling: a buffer of `shuffle_buffer` elements is filled from the source in order; each output
 * is a uniformly drawn buffer slot, refilled from the source. A buffer >= N is a uniform random
 * permutation of the epoch; 0 or 1 keeps the source order. The draws come from one 64-bit RNG
 * seeded with `seed`, which runs on from epoch to epoch, so every epoch has its own order and the
 * whole sequence is a function of the seed alone (same source, same seed: same batches, with or
 * without prefetch, in-memory or streaming).
 *
 * Position: tfs_dataset_position() tells where the consumer is (epoch, examples delivered in that
 * epoch, the RNG state at the start of that epoch); tfs_dataset_seek() to a saved position makes
 * the following batches exactly those an uninterrupted run would have seen. Store it in a
 * checkpoint to resume training.
 *
 * Prefetch: with prefetch K > 0, a background thread (started by the first tfs_dataset_next)
 * prepares up to K batches ahead. Errors reach the consumer in order, at the batch where they
 * happened. tfs_dataset_free stops and joins the thread and frees every queued batch, at any
 * point of an epoch.
 *
 * Ownership and threads: a dataset belongs to one owner thread; every tfs_dataset_* call on it
 * must come from that thread (or be serialised by the caller). It keeps references to the source
 * tensors (which must not be written while it lives). The batch tensors it returns belong to the
 * caller and may be handed to any thread. */
typedef struct tfs_dataset tfs_dataset;

typedef struct tfs_dataset_opts {
    int64_t  batch_size;       /* >= 1; default 32 */
    bool     drop_remainder;   /* default false */
    int64_t  shuffle_buffer;   /* default 0: no shuffling */
    uint64_t seed;             /* default 0 */
    int64_t  epochs;           /* >= 1, or -1 for ever; default 1 */
    int      prefetch;         /* batches prepared ahead on a background thread; default 0 */
} tfs_dataset_opts;

tfs_dataset_opts tfs_dataset_opts_default(void);

/* Where the consumer is. Plain data: copy it, store it, compare it field by field. */
typedef struct tfs_dataset_pos {
    int64_t  epoch;   /* 0-based */
    int64_t  index;   /* examples already delivered in this epoch */
    uint64_t rng;     /* the shuffle RNG's state at the start of this epoch */
} tfs_dataset_pos;

/* An in-memory dataset of n components: values[i] is [N, ...] with the same N for all (keeps a
 * reference to each); names[i] are copied. Numeric and string dtypes. INVALID_ARGUMENT for
 * n < 1, rank 0, different N, duplicate names, bad opts. Caller owns *out. */
enum tfs_code tfs_dataset_from_tensors(const char *const *names, tfs_tensor *const *values, int n,
                                       const tfs_dataset_opts *opts, tfs_dataset **out,
                                       tfs_status *st);

/* A streaming dataset over TFRecord files of tf.Example (read in order, file after file, each
 * epoch re-reading them): components are the spec's features in spec order, decoded per batch by
 * ParseExample (see tfs_example_parser). Memory holds the shuffle buffer, not the files. Records
 * are counted on the way; errors name file and record. Caller owns *out. */
enum tfs_code tfs_dataset_from_tfrecord(const char *const *paths, int n_paths,
                                        const tfs_feature_spec *spec, int n_spec,
                                        const tfs_dataset_opts *opts, tfs_dataset **out,
                                        tfs_status *st);

/* Sets the map of component `name`: batches of it are converted to `dtype` (DT_FLOAT, DT_DOUBLE,
 * DT_INT32, DT_INT64; DT_INVALID: the default below) and, for DT_FLOAT/DT_DOUBLE, computed as
 * x * scale + shift in double precision (x / 255: scale 1/255, shift 0). Without a map a
 * component keeps its dtype, except that 8- and 16-bit integers become DT_INT32 and DT_DOUBLE
 * becomes DT_FLOAT. Float to integer conversion truncates toward zero (NaN gives 0, values out
 * of range saturate); integer to narrower integer wraps. Only before the first
 * tfs_dataset_next (FAILED_PRECONDITION after); NOT_FOUND for an unknown name; INVALID_ARGUMENT
 * for a string component or another dtype. */
enum tfs_code tfs_dataset_map(tfs_dataset *ds, const char *name, enum tfs_dtype dtype,
                              double scale, double shift, tfs_status *st);

int         tfs_dataset_component_count(const tfs_dataset *ds);
const char *tfs_dataset_component_name(const tfs_dataset *ds, int i);   /* borrowed */
int         tfs_dataset_component_index(const tfs_dataset *ds, const char *name); /* -1: none */
/* Examples per epoch: N for in-memory datasets; for streaming ones -1 until the first epoch has
 * been read to its end. */
int64_t     tfs_dataset_cardinality(const tfs_dataset *ds);
/* Examples one epoch delivers: the cardinality, less the remainder that drop_remainder drops;
 * -1 while the cardinality is unknown. An epoch's last batch leaves the position's index here. */
int64_t     tfs_dataset_epoch_examples(const tfs_dataset *ds);

/* The next batch: out[i] (caller owns) for each component i; all NULL on failure. OUT_OF_RANGE
 * after the last epoch. Reader errors (streaming) as tfs_dataset_from_tfrecord. After a failure
 * every call returns the same code and message until a successful tfs_dataset_seek. */
enum tfs_code tfs_dataset_next(tfs_dataset *ds, tfs_tensor **out, tfs_status *st);

/* The position after the last batch tfs_dataset_next returned (batches a prefetch thread holds
 * do not count); {0, 0, seed} before the first. */
tfs_dataset_pos tfs_dataset_position(const tfs_dataset *ds);
/* Moves to a position: queued prefetched batches are dropped and production resumes there.
 * INVALID_ARGUMENT for a negative epoch or index, an index past the epoch's end, an epoch past
 * opts.epochs. A streaming dataset replays its files from the start of that epoch (reading,
 * not decoding, the skipped records). */
enum tfs_code tfs_dataset_seek(tfs_dataset *ds, const tfs_dataset_pos *pos, tfs_status *st);

/* Stops the prefetch thread (if any), drops queued batches, releases the source. NULL-safe. */
void tfs_dataset_free(tfs_dataset *ds);

#endif
