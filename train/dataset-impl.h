/* Internals of the dataset pipeline, shared by dataset.c (consumer side, construction),
 * producer.c (making batches) and prefetch.c (the background thread). Include only from train/
 * and tests/.
 */
#ifndef TFS_TRAIN_DATASET_IMPL_H
#define TFS_TRAIN_DATASET_IMPL_H

#include <stdatomic.h>

#include "savedmodel/savedmodel.h"
#include "train/train-impl.h"

/* One component of every element. */
typedef struct tfs__component {
    char          *name;
    tfs_tensor    *values;      /* in-memory source [N, dims...]; NULL when streaming */
    enum tfs_dtype src_dtype;
    int            rank;        /* of one element */
    int64_t        dims[TFS_MAX_RANK];
    int64_t        row;         /* elements per element (product of dims) */
    enum tfs_dtype out_dtype;   /* the map (dataset.c's tfs_dataset_map) */
    double         scale, shift;
    float         *lut;         /* uint8 -> float maps: the 256 results, tfs_malloc'ed */
} tfs__component;

/* A record read from a streaming source, waiting in the shuffle buffer. */
typedef struct tfs__rec {
    uint8_t *data;   /* tfs_malloc'ed */
    size_t   len;
    int      file;
    int64_t  record;
} tfs__rec;

/* Makes the batches. Owned by whichever thread drives it (owner or prefetch), never both. */
typedef struct tfs__producer {
    struct tfs_dataset *ds;         /* configuration, read only while producing */
    int64_t             epoch;
    int64_t             index;      /* examples produced in this epoch */
    uint64_t            rng_start;  /* RNG state at the start of this epoch */
    uint64_t            rng;        /* the RNG now */
    bool                open;       /* the epoch's order (or stream) is set up */
    bool                from_zero;  /* this epoch was entered at index 0 */
    int64_t             batches;    /* produced in this epoch since it was entered */
    /* in memory: the epoch's order of example indices, and the shuffle buffer that makes it */
    int64_t            *order;
    int64_t            *shuf;
    /* streaming */
    tfs_tfrecord_reader *reader;
    int                  file;      /* index into ds->paths of the reader */
    int64_t              recno;     /* next record of that file */
    int64_t              seen;      /* records read in this epoch */
    bool                 input_done;
    tfs__rec            *buf;       /* shuffle buffer: blen of bcap used */
    int64_t              blen, bcap;
} tfs__producer;

typedef struct tfs__prefetch tfs__prefetch;

struct tfs_dataset {
    tfs_dataset_opts    opts;
    int                 n;
    tfs__component     *comp;
    int64_t             N;          /* examples per epoch; -1 for streaming sources */
    _Atomic int64_t     N_known;    /* N, or for streaming what the first full epoch counted */
    tfs_example_parser *parser;     /* streaming */
    char              **paths;
    int                 n_paths;
    tfs__producer       prod;
    tfs__prefetch      *pf;
    /* the consumer side */
    tfs_dataset_pos     pos;
    bool                started;
    enum tfs_code       ended;      /* OK, or what every next() returns until a seek */
    tfs_status          ended_msg;
};

/* producer.c. next: the next batch (out[ds->n], caller owns) and the position after it;
 * OUT_OF_RANGE after the last epoch. seek: the producer at `pos` (streaming: replays the epoch).
 * reset: back to nothing held (frees order, buffer, reader); the state fields stay. */
enum tfs_code tfs__producer_next(tfs__producer *p, tfs_tensor **out, tfs_dataset_pos *after,
                                 tfs_status *st);
enum tfs_code tfs__producer_seek(tfs__producer *p, const tfs_dataset_pos *pos, tfs_status *st);
void          tfs__producer_reset(tfs__producer *p);

/* prefetch.c. start: a thread that runs tfs__producer_next ahead, up to `depth` batches (it
 * drives p until stopped). next: the next batch in order, with the producer's code and message.
 * stop: tells the thread to stop, joins it, frees the queued batches; NULL-safe. */
enum tfs_code tfs__prefetch_start(tfs__producer *p, int depth, tfs__prefetch **out,
                                  tfs_status *st);
enum tfs_code tfs__prefetch_next(tfs__prefetch *pf, tfs_tensor **out, tfs_dataset_pos *after,
                                 tfs_status *st);
void          tfs__prefetch_stop(tfs__prefetch *pf);

#endif
