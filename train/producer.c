/* The dataset's producer: epochs, the shuffle buffer, batching, maps (dtype conversion and
 * x * scale + shift), and seeking. See dataset.c for the design; this file is the part that runs
 * on the prefetch thread when there is one.
 *
 * Dimension legend: N examples per epoch, B batch size, K shuffle buffer size.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "train/dataset-impl.h"

/* ---- conversion ----------------------------------------------------------------------------- */

/* Float to integer, truncating toward zero; NaN gives 0 and values out of range saturate (a
 * plain C cast would be undefined there). */
static int64_t to_int(double x, double lo, double hi)
{
    if (x != x)
        return 0;
    if (x <= lo)
        return (int64_t)lo;
    if (x >= hi)
        return (int64_t)hi;
    return (int64_t)x;
}

#define CONVERT_FROM(ST)                                                                           \
    do {                                                                                           \
        const ST *s = src;                                                                         \
        switch (od) {                                                                              \
        case TFS_DTYPE_FLOAT:                                                                      \
            for (int64_t i = 0; i < n; i++)                                                        \
                ((float *)dst)[i] = (float)((double)s[i] * scale + shift);                         \
            break;                                                                                 \
        case TFS_DTYPE_DOUBLE:                                                                     \
            for (int64_t i = 0; i < n; i++)                                                        \
                ((double *)dst)[i] = (double)s[i] * scale + shift;                                 \
            break;                                                                                 \
        case TFS_DTYPE_INT32:                                                                      \
            for (int64_t i = 0; i < n; i++)                                                        \
                ((int32_t *)dst)[i] =                                                              \
                    src_float ? (int32_t)to_int((double)s[i], -2147483648.0, 2147483647.0)         \
                              : (int32_t)s[i];                                                     \
            break;                                                                                 \
        case TFS_DTYPE_INT64:                                                                      \
            for (int64_t i = 0; i < n; i++)                                                        \
                ((int64_t *)dst)[i] =                                                              \
                    src_float ? to_int((double)s[i], -9223372036854775808.0, 9.2233720368547748e18) \
                              : (int64_t)s[i];                                                     \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Converts n elements of dtype sd at src into od at dst (the map of one component). */
static void convert(const void *src, enum tfs_dtype sd, void *dst, enum tfs_dtype od, int64_t n,
                    double scale, double shift)
{
    bool src_float = sd == TFS_DTYPE_FLOAT || sd == TFS_DTYPE_DOUBLE;
    switch (sd) {
    case TFS_DTYPE_FLOAT:  CONVERT_FROM(float); break;
    case TFS_DTYPE_DOUBLE: CONVERT_FROM(double); break;
    case TFS_DTYPE_INT32:  CONVERT_FROM(int32_t); break;
    case TFS_DTYPE_INT64:  CONVERT_FROM(int64_t); break;
    case TFS_DTYPE_UINT8:  CONVERT_FROM(uint8_t); break;
    case TFS_DTYPE_INT8:   CONVERT_FROM(int8_t); break;
    case TFS_DTYPE_INT16:  CONVERT_FROM(int16_t); break;
    case TFS_DTYPE_UINT16: CONVERT_FROM(uint16_t); break;
    case TFS_DTYPE_UINT32: CONVERT_FROM(uint32_t); break;
    case TFS_DTYPE_UINT64: CONVERT_FROM(uint64_t); break;
    case TFS_DTYPE_BOOL:   CONVERT_FROM(bool); break;
    default: break;
    }
}

static bool identity_map(const tfs__component *c)
{
    return c->out_dtype == c->src_dtype && c->scale == 1 && c->shift == 0;
}

/* A new [b, dims...] tensor of the component's output dtype. */
static enum tfs_code new_batch_tensor(const tfs__component *c, int64_t b, tfs_tensor **out,
                                      tfs_status *st)
{
    int64_t dims[TFS_MAX_RANK];
    dims[0] = b;
    memcpy(dims + 1, c->dims, (size_t)c->rank * sizeof *dims);
    return tfs_tensor_new(c->out_dtype, c->rank + 1, dims, out, st);
}

/* ---- in-memory sources ---------------------------------------------------------------------- */

/* The epoch's order: the shuffle buffer run over 0..N-1 from p->rng (which it advances). */
static enum tfs_code open_memory_epoch(tfs__producer *p, tfs_status *st)
{
    const tfs_dataset *ds = p->ds;
    int64_t N = ds->N, K = ds->opts.shuffle_buffer;
    if (!p->order && !(p->order = tfs_calloc((size_t)(N ? N : 1), sizeof *p->order)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory for the order of %lld "
                       "examples", (long long)N);
    if (K <= 1) {
        for (int64_t i = 0; i < N; i++)
            p->order[i] = i;
        return TFS_OK;
    }
    if (K > N)
        K = N;
    if (!p->shuf && !(p->shuf = tfs_calloc((size_t)(K ? K : 1), sizeof *p->shuf)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory for a shuffle buffer "
                       "of %lld", (long long)K);
    int64_t len = K, next = K;
    for (int64_t i = 0; i < K; i++)
        p->shuf[i] = i;
    for (int64_t i = 0; i < N; i++) {
        int64_t j = (int64_t)tfs__rng_below(&p->rng, (uint64_t)len);
        p->order[i] = p->shuf[j];
        if (next < N)
            p->shuf[j] = next++;
        else
            p->shuf[j] = p->shuf[--len];
    }
    return TFS_OK;
}

static enum tfs_code memory_batch(tfs__producer *p, int64_t b, tfs_tensor **out, tfs_status *st)
{
    const tfs_dataset *ds = p->ds;
    enum tfs_code code;
    for (int k = 0; k < ds->n; k++) {
        const tfs__component *c = &ds->comp[k];
        if ((code = new_batch_tensor(c, b, &out[k], st)) != TFS_OK)
            return code;
        const tfs_tensor *v = c->values;
        size_t ses = tfs_dtype_size(c->src_dtype), oes = tfs_dtype_size(c->out_dtype);
        bool   same = identity_map(c);
        for (int64_t i = 0; i < b; i++) {
            int64_t r = p->order[p->index + i];
            if (c->src_dtype == TFS_DTYPE_STRING) {
                const tfs_string *s = tfs_tensor_strings((tfs_tensor *)v) + r * c->row;
                for (int64_t e = 0; e < c->row; e++)
                    if ((code = tfs_tensor_set_string(out[k], i * c->row + e, s[e].data, s[e].len,
                                                      st)) != TFS_OK)
                        return code;
                continue;
            }
            const char *src = (const char *)v->data + (size_t)(r * c->row) * ses;
            char       *dst = (char *)out[k]->data + (size_t)(i * c->row) * oes;
            if (same) {
                memcpy(dst, src, (size_t)c->row * ses);
            } else if (c->lut) {
                for (int64_t e = 0; e < c->row; e++)
                    ((float *)dst)[e] = c->lut[((const uint8_t *)src)[e]];
            } else
                convert(src, c->src_dtype, dst, c->out_dtype, c->row, c->scale, c->shift);
        }
    }
    return TFS_OK;
}

/* ---- streaming sources ---------------------------------------------------------------------- */

static void free_recs(tfs__rec *r, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        tfs_free(r[i].data);
}

static void close_stream(tfs__producer *p)
{
    tfs_tfrecord_reader_close(p->reader);
    p->reader = NULL;
    free_recs(p->buf, p->blen);
    p->blen = 0;
    p->file = 0;
    p->recno = 0;
    p->seen = 0;
    p->input_done = false;
}

/* The next record of the epoch's input into *r; *got false at the end of the last file. */
static enum tfs_code read_input(tfs__producer *p, tfs__rec *r, bool *got, tfs_status *st)
{
    tfs_dataset  *ds = p->ds;
    enum tfs_code code;
    *got = false;
    while (p->file < ds->n_paths) {
        if (!p->reader) {
            if ((code = tfs_tfrecord_reader_open(ds->paths[p->file], &p->reader, st)) != TFS_OK)
                return code;
            p->recno = 0;
        }
        const uint8_t *data;
        size_t         len;
        code = tfs_tfrecord_reader_next(p->reader, &data, &len, st);
        if (code == TFS_OUT_OF_RANGE) {
            tfs_tfrecord_reader_close(p->reader);
            p->reader = NULL;
            p->file++;
            continue;
        }
        if (code != TFS_OK)
            return code;
        if (!(r->data = tfs_malloc(len ? len : 1)))
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: record %lld: out of memory",
                           ds->paths[p->file], (long long)p->recno);
        memcpy(r->data, data, len);
        r->len = len;
        r->file = p->file;
        r->record = p->recno++;
        p->seen++;
        *got = true;
        return TFS_OK;
    }
    if (atomic_load(&ds->N_known) < 0)
        atomic_store(&ds->N_known, p->seen);
    return TFS_OK;
}

/* The next element of the epoch from the shuffle buffer (caller owns out->data); *got false
 * when the epoch is over. */
static enum tfs_code next_element(tfs__producer *p, tfs__rec *out, bool *got, tfs_status *st)
{
    int64_t       K = p->ds->opts.shuffle_buffer > 1 ? p->ds->opts.shuffle_buffer : 1;
    enum tfs_code code;
    bool          more;
    *got = false;
    while (p->blen < K && !p->input_done) {
        if (p->blen == p->bcap) {
            int64_t   cap = p->bcap ? p->bcap * 2 : 64;
            tfs__rec *b;
            if (cap > K)
                cap = K;
            if (!(b = tfs_realloc(p->buf, (size_t)cap * sizeof *b)))
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory for a shuffle "
                               "buffer of %lld records", (long long)cap);
            p->buf = b;
            p->bcap = cap;
        }
        if ((code = read_input(p, &p->buf[p->blen], &more, st)) != TFS_OK)
            return code;
        if (more)
            p->blen++;
        else
            p->input_done = true;
    }
    if (p->blen == 0)
        return TFS_OK;
    int64_t j = K > 1 ? (int64_t)tfs__rng_below(&p->rng, (uint64_t)p->blen) : 0;
    *out = p->buf[j];
    *got = true;
    if (!p->input_done) {
        if ((code = read_input(p, &p->buf[j], &more, st)) != TFS_OK) {
            p->buf[j] = p->buf[--p->blen];   /* keep the buffer consistent for close_stream */
            tfs_free(out->data);
            *got = false;
            return code;
        }
        if (more)
            return TFS_OK;
        p->input_done = true;
    }
    p->buf[j] = p->buf[--p->blen];
    return TFS_OK;
}

/* Decodes b records with the dataset's parser and applies the maps. Frees the records. */
static enum tfs_code stream_batch(tfs__producer *p, tfs__rec *recs, int64_t b, tfs_tensor **out,
                                  tfs_status *st)
{
    tfs_dataset    *ds = p->ds;
    tfs__buf        names = {0};
    const uint8_t **data = tfs_calloc((size_t)b, sizeof *data);
    size_t         *lens = tfs_calloc((size_t)b, sizeof *lens), *noff = tfs_calloc((size_t)b, 8);
    const char    **nm = tfs_calloc((size_t)b, sizeof *nm);
    enum tfs_code   code = TFS_OK;
    if (!data || !lens || !noff || !nm) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < b; i++) {
        data[i] = recs[i].data;
        lens[i] = recs[i].len;
        noff[i] = names.len;
        /* Each name keeps its NUL: they are read in place as C strings. */
        tfs__buf_printf(&names, "%s:record %lld", ds->paths[recs[i].file],
                        (long long)recs[i].record);
        tfs__buf_putc(&names, 0);
        if (names.oom) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
            goto done;
        }
    }
    for (int64_t i = 0; i < b; i++)
        nm[i] = names.data + noff[i];
    if ((code = tfs_example_parser_parse(ds->parser, b, data, lens, nm, out, st)) != TFS_OK)
        goto done;
    for (int k = 0; k < ds->n; k++) {
        const tfs__component *c = &ds->comp[k];
        tfs_tensor           *t;
        if (identity_map(c))
            continue;
        if ((code = new_batch_tensor(c, b, &t, st)) != TFS_OK)
            goto done;
        convert(out[k]->data, c->src_dtype, t->data, c->out_dtype, t->nelem, c->scale, c->shift);
        tfs_tensor_unref(out[k]);
        out[k] = t;
    }
done:
    free_recs(recs, b);
    tfs_free(data);
    tfs_free(lens);
    tfs_free(noff);
    tfs_free(nm);
    tfs__buf_deinit(&names);
    return code;
}

/* ---- epochs and batches --------------------------------------------------------------------- */

static enum tfs_code open_epoch(tfs__producer *p, tfs_status *st)
{
    p->rng = p->rng_start;
    p->open = true;
    if (p->ds->parser) {
        close_stream(p);
        return TFS_OK;
    }
    return open_memory_epoch(p, st);
}

static enum tfs_code end_of_data(tfs__producer *p, tfs_status *st)
{
    (void)p;
    return TFS_ERR(st, TFS_OUT_OF_RANGE, "dataset: end of the last epoch");
}

enum tfs_code tfs__producer_next(tfs__producer *p, tfs_tensor **out, tfs_dataset_pos *after,
                                 tfs_status *st)
{
    tfs_dataset  *ds = p->ds;
    int64_t       B = ds->opts.batch_size;
    tfs__rec     *recs = NULL;
    int64_t       got = 0;
    enum tfs_code code;
    for (int k = 0; k < ds->n; k++)
        out[k] = NULL;
    for (;;) {
        if (ds->opts.epochs != -1 && p->epoch >= ds->opts.epochs) {
            code = end_of_data(p, st);
            goto fail;
        }
        if (!p->open && (code = open_epoch(p, st)) != TFS_OK)
            goto fail;
        if (!ds->parser) {
            got = ds->N - p->index < B ? ds->N - p->index : B;
        } else {
            if (!recs && !(recs = tfs_calloc((size_t)B, sizeof *recs))) {
                code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset: out of memory");
                goto fail;
            }
            for (bool more = true; got < B && more; got += more)
                if ((code = next_element(p, &recs[got], &more, st)) != TFS_OK)
                    goto fail;
        }
        if (got > 0 && (got == B || !ds->opts.drop_remainder))
            break;
        /* The epoch is over. An epoch entered at its start that made no batch means every epoch
         * is empty (no data, or fewer examples than a batch with drop_remainder). */
        if (recs)
            free_recs(recs, got);
        got = 0;
        if (p->from_zero && p->batches == 0) {
            code = TFS_ERR(st, TFS_OUT_OF_RANGE,
                           "dataset: an epoch holds no batch (%lld examples, batch size %lld%s)",
                           (long long)atomic_load(&ds->N_known), (long long)B,
                           ds->opts.drop_remainder ? ", drop_remainder" : "");
            goto fail;
        }
        p->epoch++;
        p->index = 0;
        p->rng_start = p->rng;   /* the next epoch's draws continue the sequence */
        p->open = false;
        p->from_zero = true;
        p->batches = 0;
    }
    if (ds->parser)
        code = stream_batch(p, recs, got, out, st);
    else
        code = memory_batch(p, got, out, st);
    tfs_free(recs);
    recs = NULL;
    if (code != TFS_OK)
        goto fail;
    p->index += got;
    p->batches++;
    after->epoch = p->epoch;
    after->index = p->index;
    after->rng = p->rng_start;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    if (recs)
        free_recs(recs, got);
    tfs_free(recs);
    for (int k = 0; k < ds->n; k++) {
        tfs_tensor_unref(out[k]);
        out[k] = NULL;
    }
    return code;
}

enum tfs_code tfs__producer_seek(tfs__producer *p, const tfs_dataset_pos *pos, tfs_status *st)
{
    enum tfs_code code;
    p->epoch = pos->epoch;
    p->index = 0;
    p->rng_start = pos->rng;
    p->open = false;
    p->from_zero = pos->index == 0;
    p->batches = 0;
    if (p->ds->opts.epochs != -1 && p->epoch >= p->ds->opts.epochs)
        return TFS_OK;   /* at the end: next() says so */
    if ((code = open_epoch(p, st)) != TFS_OK)
        goto fail;
    if (!p->ds->parser) {
        p->index = pos->index;
        return TFS_OK;
    }
    /* Streaming: replay the epoch's draws up to the position, reading but not decoding. */
    for (int64_t i = 0; i < pos->index; i++) {
        tfs__rec r;
        bool     got;
        if ((code = next_element(p, &r, &got, st)) != TFS_OK)
            goto fail;
        if (!got) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "dataset: position index %lld past the end of epoch %lld (%lld "
                           "examples)", (long long)pos->index, (long long)pos->epoch,
                           (long long)i);
            goto fail;
        }
        tfs_free(r.data);
    }
    p->index = pos->index;
    return TFS_OK;
fail:
    /* Back to the start of the requested epoch, so the producer holds a consistent state. */
    p->open = false;
    p->index = 0;
    close_stream(p);
    return code;
}

void tfs__producer_reset(tfs__producer *p)
{
    close_stream(p);
    tfs_free(p->buf);
    p->buf = NULL;
    p->bcap = 0;
    tfs_free(p->order);
    p->order = NULL;
    tfs_free(p->shuf);
    p->shuf = NULL;
    p->open = false;
}
