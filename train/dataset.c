/* The dataset pipeline (train.h): sources, shuffle, batch, repeat, maps and positions. Prefetch
 * lives in prefetch.c and drives the producer defined here from its own thread.
 *
 * DESIGN. A dataset is split in two. The *producer* makes batches one after the other and owns
 * everything that changes while it does (epoch, index, RNG, the epoch's order or the streaming
 * reader and shuffle buffer); it is driven either by the owner thread directly or by the prefetch
 * thread, never by both at once. The *consumer* side (struct tfs_dataset) only remembers the
 * position after the last batch it handed out. Every batch travels with the position after it, so
 * the position the owner sees never counts batches still queued in the prefetcher.
 *
 * Determinism. The shuffle is one algorithm for both kinds of source: a buffer of K elements
 * filled in source order; each output is buffer slot j = rng_below(len), which is then refilled
 * with the next source element or, when the source is exhausted, with the last slot (and the
 * buffer shrinks). K <= 1 draws nothing. In-memory sources run that algorithm over the indices
 * 0..N-1 once per epoch (the epoch's order); streaming sources run it over records as they read
 * them. Either way an epoch is a function of the RNG state at its start, which is what a position
 * stores, so seeking regenerates the epoch (in memory) or replays it without decoding (streaming).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "savedmodel/savedmodel.h"
#include "train/dataset-impl.h"

/* ---- RNG ------------------------------------------------------------------------------------ */

uint64_t tfs__rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t tfs__rng_below(uint64_t *state, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)tfs__rng_next(state) * n;
    uint64_t          low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = (0 - n) % n;
        while (low < threshold) {
            m = (unsigned __int128)tfs__rng_next(state) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* ---- options and components ----------------------------------------------------------------- */

tfs_dataset_opts tfs_dataset_opts_default(void)
{
    tfs_dataset_opts o = {32, false, 0, 0, 1, 0};
    return o;
}

static enum tfs_code check_opts(const tfs_dataset_opts *o, tfs_status *st)
{
    if (o->batch_size < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: batch size %lld (must be >= 1)",
                       (long long)o->batch_size);
    if (o->epochs < 1 && o->epochs != -1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: epochs %lld (>= 1, or -1 for ever)",
                       (long long)o->epochs);
    if (o->shuffle_buffer < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: shuffle buffer %lld (must be >= 0)",
                       (long long)o->shuffle_buffer);
    if (o->prefetch < 0 || o->prefetch > 1024)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: prefetch %d (0 to 1024 batches)",
                       o->prefetch);
    return TFS_OK;
}

static enum tfs_dtype default_out(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_UINT8: case TFS_DTYPE_INT8: case TFS_DTYPE_INT16: case TFS_DTYPE_UINT16:
        return TFS_DTYPE_INT32;
    case TFS_DTYPE_DOUBLE:
        return TFS_DTYPE_FLOAT;
    default:
        return dt;
    }
}

static bool numeric_source(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_FLOAT: case TFS_DTYPE_DOUBLE: case TFS_DTYPE_INT32: case TFS_DTYPE_INT64:
    case TFS_DTYPE_UINT8: case TFS_DTYPE_INT8: case TFS_DTYPE_INT16: case TFS_DTYPE_UINT16:
    case TFS_DTYPE_UINT32: case TFS_DTYPE_UINT64: case TFS_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

static tfs_dataset *alloc_dataset(const tfs_dataset_opts *opts, int n, tfs_status *st)
{
    tfs_dataset *ds = tfs_calloc(1, sizeof *ds);
    if (!ds || !(ds->comp = tfs_calloc((size_t)n, sizeof *ds->comp))) {
        tfs_free(ds);
        TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
        return NULL;
    }
    ds->opts = opts ? *opts : tfs_dataset_opts_default();
    ds->n = n;
    ds->prod.ds = ds;
    ds->prod.rng = ds->prod.rng_start = ds->opts.seed;
    ds->prod.from_zero = true;
    ds->pos.rng = ds->opts.seed;
    return ds;
}

static enum tfs_code set_component(tfs_dataset *ds, int i, const char *name, enum tfs_dtype dt,
                                   int rank, const int64_t *dims, tfs_status *st)
{
    tfs__component *c = &ds->comp[i];
    if (!name || !*name)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: component %d has no name", i);
    for (int k = 0; k < i; k++)
        if (strcmp(ds->comp[k].name, name) == 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: component '%s' given twice", name);
    if (!(c->name = tfs_strdup(name)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
    c->src_dtype = dt;
    c->out_dtype = default_out(dt);
    c->scale = 1;
    c->shift = 0;
    c->rank = rank;
    memcpy(c->dims, dims, (size_t)rank * sizeof *dims);
    c->row = tfs_shape_nelem(rank, dims);
    return TFS_OK;
}

enum tfs_code tfs_dataset_from_tensors(const char *const *names, tfs_tensor *const *values, int n,
                                       const tfs_dataset_opts *opts, tfs_dataset **out,
                                       tfs_status *st)
{
    tfs_dataset *ds = NULL;
    enum tfs_code code;
    char          a[160], b[160];
    *out = NULL;
    tfs_dataset_opts o = opts ? *opts : tfs_dataset_opts_default();
    if ((code = check_opts(&o, st)) != TFS_OK)
        return code;
    if (n < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: no components");
    if (!(ds = alloc_dataset(&o, n, st)))
        return TFS_RESOURCE_EXHAUSTED;
    for (int i = 0; i < n; i++) {
        const tfs_tensor *v = values[i];
        if (v->rank < 1) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "dataset: component '%s' is a scalar (want [N, ...])", names[i]);
            goto fail;
        }
        if (!numeric_source(v->dtype) && v->dtype != TFS_DTYPE_STRING) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: component '%s': dtype %s",
                           names[i], tfs_dtype_name(v->dtype));
            goto fail;
        }
        if (i > 0 && v->dims[0] != values[0]->dims[0]) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "dataset: component '%s' has %lld examples (shape %s), '%s' has %lld "
                           "(shape %s)", names[i], (long long)v->dims[0],
                           tfs_shape_str(v->rank, v->dims, a, sizeof a), names[0],
                           (long long)values[0]->dims[0],
                           tfs_shape_str(values[0]->rank, values[0]->dims, b, sizeof b));
            goto fail;
        }
        if ((code = set_component(ds, i, names[i], v->dtype, v->rank - 1, v->dims + 1, st)) !=
            TFS_OK)
            goto fail;
        ds->comp[i].values = tfs_tensor_ref(values[i]);
    }
    ds->N = values[0]->dims[0];
    atomic_store(&ds->N_known, ds->N);
    *out = ds;
    return TFS_OK;
fail:
    tfs_dataset_free(ds);
    return code;
}

enum tfs_code tfs_dataset_from_tfrecord(const char *const *paths, int n_paths,
                                        const tfs_feature_spec *spec, int n_spec,
                                        const tfs_dataset_opts *opts, tfs_dataset **out,
                                        tfs_status *st)
{
    tfs_dataset *ds = NULL;
    enum tfs_code code;
    *out = NULL;
    tfs_dataset_opts o = opts ? *opts : tfs_dataset_opts_default();
    if ((code = check_opts(&o, st)) != TFS_OK)
        return code;
    if (n_paths < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: no TFRecord files");
    if (!(ds = alloc_dataset(&o, n_spec > 0 ? n_spec : 1, st)))
        return TFS_RESOURCE_EXHAUSTED;
    ds->n = n_spec;
    ds->N = -1;
    atomic_store(&ds->N_known, -1);
    if ((code = tfs_example_parser_new(spec, n_spec, &ds->parser, st)) != TFS_OK)
        goto fail;
    for (int i = 0; i < n_spec; i++)
        if ((code = set_component(ds, i, spec[i].name, spec[i].dtype, spec[i].rank, spec[i].dims,
                                  st)) != TFS_OK)
            goto fail;
    if (!(ds->paths = tfs_calloc((size_t)n_paths, sizeof *ds->paths)))
        goto oom;
    ds->n_paths = n_paths;
    for (int i = 0; i < n_paths; i++)
        if (!(ds->paths[i] = tfs_strdup(paths[i])))
            goto oom;
    /* Fail now, not at the first batch, when a file cannot be opened. */
    for (int i = 0; i < n_paths; i++) {
        tfs_tfrecord_reader *r;
        if ((code = tfs_tfrecord_reader_open(paths[i], &r, st)) != TFS_OK)
            goto fail;
        tfs_tfrecord_reader_close(r);
    }
    *out = ds;
    return TFS_OK;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
fail:
    tfs_dataset_free(ds);
    return code;
}

enum tfs_code tfs_dataset_map(tfs_dataset *ds, const char *name, enum tfs_dtype dtype,
                              double scale, double shift, tfs_status *st)
{
    int i = tfs_dataset_component_index(ds, name);
    if (ds->started)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "dataset: map of '%s' after the first batch", name);
    if (i < 0)
        return TFS_ERR(st, TFS_NOT_FOUND, "dataset: no component '%s'", name);
    tfs__component *c = &ds->comp[i];
    if (dtype == TFS_DTYPE_INVALID)
        dtype = default_out(c->src_dtype);
    if (c->src_dtype == TFS_DTYPE_STRING)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: component '%s' holds strings", name);
    bool fl = dtype == TFS_DTYPE_FLOAT || dtype == TFS_DTYPE_DOUBLE;
    if (!fl && dtype != TFS_DTYPE_INT32 && dtype != TFS_DTYPE_INT64)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "dataset: map of '%s' to %s (float, double, int32 or int64)", name,
                       tfs_dtype_short_name(dtype));
    if (!fl && (scale != 1 || shift != 0))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "dataset: map of '%s': scale and shift apply to float outputs only", name);
    if (!isfinite(scale) || !isfinite(shift))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: map of '%s': scale and shift must be "
                       "finite", name);
    /* uint8 images to float is the common case and worth a table: 256 values, then a lookup
     * per pixel instead of a conversion and a multiply-add. */
    tfs_free(c->lut);
    c->lut = NULL;
    if (c->src_dtype == TFS_DTYPE_UINT8 && dtype == TFS_DTYPE_FLOAT) {
        if (!(c->lut = tfs_malloc(256 * sizeof *c->lut)))
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
        for (int v = 0; v < 256; v++)
            c->lut[v] = (float)((double)v * scale + shift);
    }
    c->out_dtype = dtype;
    c->scale = scale;
    c->shift = shift;
    tfs_status_clear(st);
    return TFS_OK;
}

int tfs_dataset_component_count(const tfs_dataset *ds)
{
    return ds->n;
}

const char *tfs_dataset_component_name(const tfs_dataset *ds, int i)
{
    return i >= 0 && i < ds->n ? ds->comp[i].name : NULL;
}

int tfs_dataset_component_index(const tfs_dataset *ds, const char *name)
{
    for (int i = 0; i < ds->n; i++)
        if (strcmp(ds->comp[i].name, name) == 0)
            return i;
    return -1;
}

int64_t tfs_dataset_cardinality(const tfs_dataset *ds)
{
    return atomic_load(&ds->N_known);
}

int64_t tfs_dataset_epoch_examples(const tfs_dataset *ds)
{
    int64_t n = atomic_load(&ds->N_known);
    if (n < 0 || !ds->opts.drop_remainder)
        return n;
    return n - n % ds->opts.batch_size;
}

/* ---- the consumer side ---------------------------------------------------------------------- */

enum tfs_code tfs_dataset_next(tfs_dataset *ds, tfs_tensor **out, tfs_status *st)
{
    tfs_dataset_pos after;
    enum tfs_code   code;
    for (int i = 0; i < ds->n; i++)
        out[i] = NULL;
    if (ds->ended != TFS_OK) {
        tfs_status_set(st, ds->ended, "%s", ds->ended_msg.msg);
        return ds->ended;
    }
    ds->started = true;
    if (ds->opts.prefetch > 0) {
        if (!ds->pf && (code = tfs__prefetch_start(&ds->prod, ds->opts.prefetch, &ds->pf, st)) !=
                           TFS_OK)
            return code;
        code = tfs__prefetch_next(ds->pf, out, &after, st);
    } else {
        code = tfs__producer_next(&ds->prod, out, &after, st);
    }
    if (code != TFS_OK) {
        /* The end, or an error: every later call says the same until a seek. */
        ds->ended = code;
        ds->ended_msg.code = code;
        snprintf(ds->ended_msg.msg, sizeof ds->ended_msg.msg, "%s",
                 st ? st->msg : tfs_code_name(code));
        return code;
    }
    ds->pos = after;
    return TFS_OK;
}

tfs_dataset_pos tfs_dataset_position(const tfs_dataset *ds)
{
    return ds->pos;
}

enum tfs_code tfs_dataset_seek(tfs_dataset *ds, const tfs_dataset_pos *pos, tfs_status *st)
{
    if (pos->epoch < 0 || pos->index < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset: position epoch %lld, index %lld",
                       (long long)pos->epoch, (long long)pos->index);
    if (ds->opts.epochs != -1 && pos->epoch > ds->opts.epochs)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "dataset: position epoch %lld past the last epoch (%lld epochs)",
                       (long long)pos->epoch, (long long)ds->opts.epochs);
    if (ds->N >= 0 && pos->index > ds->N)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "dataset: position index %lld past the end of an epoch of %lld examples",
                       (long long)pos->index, (long long)ds->N);
    tfs__prefetch_stop(ds->pf);
    ds->pf = NULL;
    enum tfs_code code = tfs__producer_seek(&ds->prod, pos, st);
    /* A failed seek leaves the producer at the start of the epoch asked for, and the dataset
     * failing with the seek's error until the next successful seek. */
    ds->ended = code;
    if (code != TFS_OK) {
        snprintf(ds->ended_msg.msg, sizeof ds->ended_msg.msg, "%s",
                 st ? st->msg : tfs_code_name(code));
        return code;
    }
    tfs_status_clear(st);
    ds->pos = *pos;
    return TFS_OK;
}

void tfs_dataset_free(tfs_dataset *ds)
{
    if (!ds)
        return;
    tfs__prefetch_stop(ds->pf);
    tfs__producer_reset(&ds->prod);
    for (int i = 0; i < ds->n; i++) {
        tfs_free(ds->comp[i].name);
        tfs_free(ds->comp[i].lut);
        tfs_tensor_unref(ds->comp[i].values);
    }
    tfs_free(ds->comp);
    for (int i = 0; i < ds->n_paths; i++)
        tfs_free(ds->paths[i]);
    tfs_free(ds->paths);
    tfs_example_parser_free(ds->parser);
    tfs_free(ds);
}
