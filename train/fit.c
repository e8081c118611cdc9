/* The training loop (fit.h): epochs of steps with progress, evaluation, checkpoints with exact
 * resume, TensorBoard events, warm start, curves and export.
 *
 * DESIGN. Everything fit needs to resume exactly is state it can write as tensors into the same
 * TensorFlow checkpoint as the variables: the training dataset's position ("_tfs/data_position":
 * epoch, index, RNG), the random ops' generator states ("_tfs/rng_state") and the per-epoch
 * curves so far ("_tfs/history"). TensorFlow reads such a checkpoint too (the extra tensors are
 * just more entries). Epoch boundaries come from the dataset's position, so a resumed run picks
 * up in the middle of an epoch and finishes it with exactly the batches it would have seen.
 */
#include "train/fit.h"
#include "train/train.h"

#include "savedmodel/savedmodel.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HISTORY_COLS 5 /* train loss, train accuracy, eval loss, eval accuracy, seconds */

tfs_fit_opts tfs_fit_opts_default(void)
{
    tfs_fit_opts o;
    memset(&o, 0, sizeof o);
    o.epochs = 1;
    o.feature = "x";
    o.label = "y";
    o.keep_checkpoint_max = 5;
    o.log_every_steps = 100;
    o.histograms = true;
    o.progress = -1;
    o.fusion_threshold_bytes = 4 << 20;
    o.collective_timeout_secs = 60;
    return o;
}

void tfs_fit_result_free(tfs_fit_result *r)
{
    if (!r)
        return;
    tfs_free(r->train_loss);
    tfs_free(r->train_accuracy);
    tfs_free(r->eval_loss);
    tfs_free(r->eval_accuracy);
    tfs_free(r->seconds);
    tfs_free(r->export_path);
    tfs_free(r->checkpoint);
    memset(r, 0, sizeof *r);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Grows the result's per-epoch arrays to hold `epochs` entries (new ones NaN). */
static bool result_reserve(tfs_fit_result *r, int64_t epochs)
{
    double **cols[HISTORY_COLS] = {&r->train_loss, &r->train_accuracy, &r->eval_loss,
                                   &r->eval_accuracy, &r->seconds};
    for (int c = 0; c < HISTORY_COLS; c++) {
        double *v = tfs_realloc(*cols[c], (size_t)(epochs + 1) * sizeof *v);
        if (!v)
            return false;
        for (int64_t e = r->epochs; e <= epochs; e++)
            v[e] = NAN;
        *cols[c] = v;
    }
    return true;
}

/* ---- components ----------------------------------------------------------------------------- */

typedef struct batch {
    tfs_tensor **parts; /* every component of one batch */
    int          n;
    tfs_tensor  *x, *y; /* borrowed from parts */
} batch;

static void batch_clear(batch *b)
{
    for (int i = 0; b->parts && i < b->n; i++)
        tfs_tensor_unref(b->parts[i]);
    tfs_free(b->parts);
    memset(b, 0, sizeof *b);
}

/* The next batch, or OUT_OF_RANGE. */
static enum tfs_code next_batch(tfs_dataset *ds, int xi, int yi, batch *b, tfs_status *st)
{
    b->n = tfs_dataset_component_count(ds);
    b->parts = tfs_calloc((size_t)b->n + 1, sizeof *b->parts);
    if (!b->parts)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading a batch");
    enum tfs_code rc = tfs_dataset_next(ds, b->parts, st);
    if (rc != TFS_OK) {
        tfs_free(b->parts);
        b->parts = NULL;
        b->n = 0;
        return rc;
    }
    b->x = b->parts[xi];
    b->y = b->parts[yi];
    return TFS_OK;
}

static enum tfs_code components(tfs_dataset *ds, const char *feature, const char *label, int *xi,
                                int *yi, tfs_status *st)
{
    *xi = tfs_dataset_component_index(ds, feature);
    *yi = tfs_dataset_component_index(ds, label);
    if (*xi < 0 || *yi < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "dataset has no component '%s'",
                       *xi < 0 ? feature : label);
    return TFS_OK;
}

/* A tensor wrapping rows [lo, hi) of t without a copy (keeps a reference to t). batching/ has
 * its own such helper; train/ does not depend on batching/. */
static void unref_parent(void *data, void *arg)
{
    (void)data;
    tfs_tensor_unref(arg);
}

static enum tfs_code rows(tfs_tensor *t, int64_t lo, int64_t hi, tfs_tensor **out,
                          tfs_status *st)
{
    *out = NULL;
    if (t->dtype == TFS_DTYPE_STRING || t->rank < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "a batch component of %s rank %d cannot be "
                       "split between ranks", tfs_dtype_short_name(t->dtype), t->rank);
    int64_t dims[TFS_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    dims[0] = hi - lo;
    size_t        row = t->dims[0] > 0 ? t->nbytes / (size_t)t->dims[0] : 0;
    char         *p = t->data ? (char *)t->data + (size_t)lo * row : NULL;
    enum tfs_code rc = tfs_tensor_wrap(t->dtype, t->rank, dims, p, unref_parent, t, out, st);
    if (rc == TFS_OK)
        tfs_tensor_ref(t); /* released by unref_parent with the slice */
    return rc;
}

/* This rank's slice of a global batch: rows [B r / N, B (r + 1) / N) for rank r of N, so the
 * slices of B >= N rows differ by at most one row and every rank's is the same function of B.
 * With one rank, t itself (a new reference). */
static enum tfs_code rank_slice(tfs_tensor *t, tfs_tensor **out, tfs_status *st)
{
    int64_t n = tfs_dist_size(), r = tfs_dist_rank(), b = t->rank > 0 ? t->dims[0] : 0;
    if (n == 1) {
        *out = tfs_tensor_ref(t);
        return TFS_OK;
    }
    return rows(t, b * r / n, b * (r + 1) / n, out, st);
}

/* ---- evaluation ----------------------------------------------------------------------------- */

/* One epoch of ds from its current position (until the epoch changes or the data ends). */
enum tfs_code tfs_train_evaluate(tfs_model *m, tfs_dataset *ds, const char *feature,
                                 const char *label, double *loss, double *accuracy, tfs_status *st)
{
    int           xi, yi;
    enum tfs_code rc = components(ds, feature ? feature : "x", label ? label : "y", &xi, &yi, st);
    if (rc != TFS_OK)
        return rc;
    int64_t epoch = tfs_dataset_position(ds).epoch;
    double  sum = 0;
    int64_t n = 0, correct = 0, units = 0;
    for (;;) {
        batch b = {0};
        rc = next_batch(ds, xi, yi, &b, st);
        if (rc == TFS_OUT_OF_RANGE)
            break;
        if (rc != TFS_OK)
            return rc;
        /* Under MPI every rank reads the same batches and evaluates its slice of each. */
        tfs_tensor *x = NULL, *y = NULL;
        rc = rank_slice(b.x, &x, st);
        if (rc == TFS_OK)
            rc = rank_slice(b.y, &y, st);
        double  s = 0;
        int64_t c = 0;
        if (rc == TFS_OK && x->dims[0] > 0) {
            rc = tfs_model_eval_batch(m, x, y, &s, &c, st);
            n += x->dims[0];
            units += tfs_model_accuracy_units(m, y);
        }
        tfs_tensor_unref(x);
        tfs_tensor_unref(y);
        batch_clear(&b);
        if (rc != TFS_OK)
            return rc;
        sum += s;
        correct += c;
        tfs_dataset_pos p = tfs_dataset_position(ds);
        int64_t         n_ex = tfs_dataset_epoch_examples(ds);
        if (p.epoch != epoch || (n_ex >= 0 && p.index >= n_ex))
            break;
    }
    double v[4] = {sum, (double)n, (double)correct, (double)units};
    if ((rc = tfs_dist_sum_f64(v, 4, "evaluation metrics", st)) != TFS_OK)
        return rc;
    tfs_status_clear(st);
    *loss = v[1] > 0 ? v[0] / v[1] : NAN;
    *accuracy = v[3] > 0 ? v[2] / v[3] : NAN;
    return TFS_OK;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

static tfs_tensor *int64_vector(int n, const int64_t *v)
{
    int64_t     dims[1] = {n};
    tfs_tensor *t = NULL;
    if (tfs_tensor_new(TFS_DTYPE_INT64, 1, dims, &t, NULL) != TFS_OK)
        return NULL;
    memcpy(t->data, v, (size_t)n * sizeof *v);
    return t;
}

static tfs_tensor *history_tensor(const tfs_fit_result *r)
{
    int64_t     dims[2] = {r->epochs, HISTORY_COLS};
    tfs_tensor *t = NULL;
    if (tfs_tensor_new(TFS_DTYPE_DOUBLE, 2, dims, &t, NULL) != TFS_OK)
        return NULL;
    double       *v = t->data;
    const double *cols[HISTORY_COLS] = {r->train_loss, r->train_accuracy, r->eval_loss,
                                        r->eval_accuracy, r->seconds};
    for (int64_t e = 0; e < r->epochs; e++)
        for (int c = 0; c < HISTORY_COLS; c++)
            v[e * HISTORY_COLS + c] = cols[c][e];
    return t;
}

/* Saves variables + fit state; history may be NULL. */
static enum tfs_code save(tfs_model *m, const tfs_dataset *ds, const tfs_fit_result *history,
                          const char *dir, int keep, char **prefix_out, tfs_status *st)
{
    int               nv = tfs_model_variable_count(m);
    tfs_named_tensor *t = tfs_calloc((size_t)nv + 4, sizeof *t);
    int               n = 0;
    enum tfs_code     rc = TFS_OK;
    if (!t)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory saving a checkpoint");
    for (int i = 0; i < nv; i++) {
        t[n].name = tfs_model_variable_name(m, i);
        if ((rc = tfs_model_variable_value(m, i, &t[n].tensor, st)) != TFS_OK)
            goto done;
        n++;
    }
    if (ds) {
        tfs_dataset_pos p = tfs_dataset_position(ds);
        int64_t         v[3] = {p.epoch, p.index, (int64_t)p.rng};
        t[n].name = "_tfs/data_position";
        if (!(t[n].tensor = int64_vector(3, v))) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory saving a checkpoint");
            goto done;
        }
        n++;
    }
    if (tfs_model_rng_state(m, &t[n].tensor, st) != TFS_OK) {
        rc = st ? st->code : TFS_INTERNAL;
        goto done;
    }
    if (t[n].tensor)
        t[n++].name = "_tfs/rng_state";
    if (history && history->epochs > 0) {
        t[n].name = "_tfs/history";
        if (!(t[n].tensor = history_tensor(history))) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory saving a checkpoint");
            goto done;
        }
        n++;
    }
    tfs_checkpoint_opts o = tfs_checkpoint_opts_default();
    o.keep_checkpoint_max = keep;
    rc = tfs_checkpoint_save(dir, "model.ckpt", tfs_model_global_step(m), t, n, &o, prefix_out, st);
done:
    for (int i = 0; i < n; i++)
        tfs_tensor_unref(t[i].tensor);
    tfs_free(t);
    return rc;
}

enum tfs_code tfs_train_save(tfs_model *m, const tfs_dataset *ds, const char *dir,
                             int keep_checkpoint_max, char **prefix_out, tfs_status *st)
{
    return save(m, ds, NULL, dir, keep_checkpoint_max, prefix_out, st);
}

/* The checkpoint prefix a path names: a directory's latest, or the prefix itself. */
static enum tfs_code resolve_checkpoint(const char *path, char **prefix, tfs_status *st)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return tfs_checkpoint_latest(path, prefix, st);
    *prefix = tfs_strdup(path);
    return *prefix ? TFS_OK : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
}

/* Restores variables and the dataset position; *history gets the curves when present. */
static enum tfs_code restore(tfs_model *m, tfs_dataset *ds, const char *path, bool weights_only,
                             int *n_restored, tfs_fit_result *history, tfs_status *st)
{
    char           *prefix = NULL;
    tfs_checkpoint *c = NULL;
    tfs_tensor     *t = NULL;
    int             restored = 0;
    enum tfs_code   rc = resolve_checkpoint(path, &prefix, st);
    if (rc == TFS_OK)
        rc = tfs_checkpoint_open(prefix, &c, st);
    for (int i = 0; rc == TFS_OK && i < tfs_model_variable_count(m); i++) {
        const char *name = tfs_model_variable_name(m, i);
        if (weights_only && !tfs_model_variable_is_weight(m, i))
            continue;
        if (tfs_checkpoint_find(c, name) < 0) {
            if (weights_only)
                continue;
            rc = TFS_ERR(st, TFS_NOT_FOUND, "checkpoint %s has no variable '%s'", prefix, name);
            break;
        }
        tfs_checkpoint_var cv = tfs_checkpoint_var_at(c, tfs_checkpoint_find(c, name));
        if ((rc = tfs_checkpoint_read(c, name, cv.dtype, &t, st)) != TFS_OK)
            break;
        rc = tfs_model_variable_assign(m, i, t, st);
        tfs_tensor_unref(t);
        t = NULL;
        restored++;
    }
    if (rc == TFS_OK && !weights_only && tfs_checkpoint_find(c, "_tfs/rng_state") >= 0) {
        if ((rc = tfs_checkpoint_read(c, "_tfs/rng_state", TFS_DTYPE_INT64, &t, st)) == TFS_OK)
            rc = tfs_model_set_rng_state(m, t, st);
        tfs_tensor_unref(t);
        t = NULL;
    }
    if (rc == TFS_OK && ds && !weights_only && tfs_checkpoint_find(c, "_tfs/data_position") >= 0) {
        if ((rc = tfs_checkpoint_read(c, "_tfs/data_position", TFS_DTYPE_INT64, &t, st)) ==
            TFS_OK) {
            const int64_t  *v = t->data;
            tfs_dataset_pos p = {v[0], v[1], (uint64_t)v[2]};
            rc = t->nelem == 3 ? tfs_dataset_seek(ds, &p, st)
                               : TFS_ERR(st, TFS_DATA_LOSS, "%s: bad _tfs/data_position", prefix);
        }
        tfs_tensor_unref(t);
        t = NULL;
    }
    if (rc == TFS_OK && history && !weights_only && tfs_checkpoint_find(c, "_tfs/history") >= 0) {
        if ((rc = tfs_checkpoint_read(c, "_tfs/history", TFS_DTYPE_DOUBLE, &t, st)) == TFS_OK) {
            int64_t epochs = t->rank == 2 && t->dims[1] == HISTORY_COLS ? t->dims[0] : 0;
            if (!result_reserve(history, epochs)) {
                rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
            } else {
                const double *v = t->data;
                double       *cols[HISTORY_COLS] = {history->train_loss, history->train_accuracy,
                                                    history->eval_loss, history->eval_accuracy,
                                                    history->seconds};
                for (int64_t e = 0; e < epochs; e++)
                    for (int k = 0; k < HISTORY_COLS; k++)
                        cols[k][e] = v[e * HISTORY_COLS + k];
                history->epochs = epochs;
            }
        }
        tfs_tensor_unref(t);
    }
    if (rc != TFS_OK && prefix)
        tfs_status_prefix(st, "restoring %s", prefix);
    tfs_checkpoint_close(c);
    tfs_free(prefix);
    if (n_restored)
        *n_restored = restored;
    return rc;
}

enum tfs_code tfs_train_restore(tfs_model *m, tfs_dataset *ds, const char *path, bool weights_only,
                                int *n_restored, tfs_status *st)
{
    return restore(m, ds, path, weights_only, n_restored, NULL, st);
}

/* ---- export --------------------------------------------------------------------------------- */

/* Next version folder under base: one more than the largest integer name (1 when none). */
static enum tfs_code next_version(const char *base, char **path, tfs_status *st)
{
    if (mkdir(base, 0755) != 0 && errno != EEXIST)
        return TFS_ERR(st, tfs_code_from_errno(errno), "%s: %s", base, strerror(errno));
    DIR *d = opendir(base);
    if (!d)
        return TFS_ERR(st, tfs_code_from_errno(errno), "%s: %s", base, strerror(errno));
    long long      max = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char     *end;
        long long v = strtoll(e->d_name, &end, 10);
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && *end == '\0' && v > max)
            max = v;
    }
    closedir(d);
    size_t n = strlen(base) + 32;
    *path = tfs_malloc(n);
    if (!*path)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    snprintf(*path, n, "%s/%lld", base, max + 1);
    return TFS_OK;
}

/* ---- progress ------------------------------------------------------------------------------- */

typedef struct progress {
    FILE   *out;
    bool    bar;
    int64_t epoch, epochs, total; /* examples in the epoch (-1 unknown) */
    double  start, last;
} progress;

static void progress_show(progress *p, int64_t done, double loss, double acc, bool final)
{
    if (!p->out)
        return;
    double t = now(), el = t - p->start;
    if (!final && t - p->last < (p->bar ? 0.1 : 10.0))
        return;
    p->last = t;
    double rate = el > 0 ? (double)done / el : 0;
    char   accs[32] = "";
    if (!isnan(acc))
        snprintf(accs, sizeof accs, " - accuracy %.4f", acc);
    if (p->bar) {
        int width = 30,
            filled = p->total > 0 ? (int)((double)width * (double)done / (double)p->total) : 0;
        char bar[40];
        for (int i = 0; i < width; i++)
            bar[i] = i < filled ? '=' : (i == filled ? '>' : '.');
        bar[width] = '\0';
        double eta = rate > 0 && p->total > 0 ? (double)(p->total - done) / rate : 0;
        fprintf(p->out, "\rEpoch %lld/%lld [%s] %lld/%lld - loss %.4f%s - %.0f ex/s - ETA %.0fs ",
                (long long)p->epoch + 1, (long long)p->epochs, bar, (long long)done,
                (long long)p->total, loss, accs, rate, final ? 0.0 : eta);
    } else {
        fprintf(p->out, "epoch %lld/%lld: %lld/%lld examples - loss %.4f%s - %.0f ex/s\n",
                (long long)p->epoch + 1, (long long)p->epochs, (long long)done, (long long)p->total,
                loss, accs, rate);
    }
    fflush(p->out);
}

/* ---- data-parallel steps -------------------------------------------------------------------- */

/* Floats after the gradients in the fused buffer, summed with the last bucket, so that the
 * figures and a stop request need no collective of their own: this rank's loss times its
 * examples, its correct count, its accuracy units, and whether it was asked to stop. */
enum { EX_LOSS, EX_CORRECT, EX_UNITS, EX_STOP, N_EXTRAS };

typedef struct dist {
    int          rank, size;
    int          n_vars;
    float       *buf;          /* every gradient, last variable first, then the extras */
    int64_t      n_floats;
    int64_t     *offset;       /* [n_vars] where variable i's gradient starts in buf; -1: none */
    tfs_tensor **views;        /* [n_vars] variable i's summed gradient: a view of buf */
    int         *order;        /* [n_order] the variables in buf's order */
    int          n_order;
    int         *first;        /* [n_buckets + 1] bucket k holds order[first[k] .. first[k+1]) */
    int64_t     *end;          /* [n_buckets] the float where bucket k ends */
    int         *bucket_of;    /* [n_vars] the bucket variable i's gradient is in */
    int          n_buckets;
    bool         stop;         /* the ranks agreed to stop (one of them was asked to) */
    int64_t      steps, global_batch;
    int64_t      early;        /* buckets started while the backward pass still ran */
    double       step_secs;
} dist;

static void dist_free(dist *d)
{
    for (int i = 0; d->views && i < d->n_vars; i++)
        tfs_tensor_unref(d->views[i]);
    tfs_free(d->views);
    tfs_free(d->buf);
    tfs_free(d->offset);
    tfs_free(d->order);
    tfs_free(d->first);
    tfs_free(d->end);
    tfs_free(d->bucket_of);
}

/* Lays the gradients out in buf and cuts it into buckets of at most `threshold` bytes (a
 * gradient larger than that is a bucket of its own), in the order backprop finishes them: the
 * last layers' first, which is the reverse of the variables' order. */
static enum tfs_code dist_plan(dist *d, tfs_model *m, int64_t threshold, tfs_status *st)
{
    int n = d->n_vars = tfs_model_variable_count(m);
    d->offset = tfs_calloc((size_t)n + 1, sizeof *d->offset);
    d->views = tfs_calloc((size_t)n + 1, sizeof *d->views);
    d->order = tfs_calloc((size_t)n + 1, sizeof *d->order);
    d->first = tfs_calloc((size_t)n + 2, sizeof *d->first);
    d->end = tfs_calloc((size_t)n + 2, sizeof *d->end);
    d->bucket_of = tfs_calloc((size_t)n + 1, sizeof *d->bucket_of);
    if (!d->offset || !d->views || !d->order || !d->first || !d->end || !d->bucket_of)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory planning the allreduce");
    int64_t       at = 0, start = 0;
    enum tfs_code rc;
    for (int i = n - 1; i >= 0; i--) {
        d->offset[i] = -1;
        if (!tfs_model_variable_has_gradient(m, i))
            continue;
        /* Held in views[i] until buf exists: its shape is the gradient's. */
        if ((rc = tfs_model_variable_value(m, i, &d->views[i], st)) != TFS_OK)
            return rc;
        if (d->views[i]->dtype != TFS_DTYPE_FLOAT)
            return TFS_ERR(st, TFS_UNIMPLEMENTED, "variable '%s' is %s: data-parallel steps "
                           "average float gradients only", tfs_model_variable_name(m, i),
                           tfs_dtype_short_name(d->views[i]->dtype));
        int64_t ne = d->views[i]->nelem;
        if (at > start && (at - start + ne) * (int64_t)sizeof(float) > threshold) {
            d->end[d->n_buckets++] = at;
            d->first[d->n_buckets] = d->n_order;
            start = at;
        }
        d->offset[i] = at;
        d->bucket_of[i] = d->n_buckets;
        d->order[d->n_order++] = i;
        at += ne;
    }
    d->n_floats = at + N_EXTRAS;
    d->end[d->n_buckets++] = d->n_floats;
    d->first[d->n_buckets] = d->n_order;
    if (!(d->buf = tfs_calloc((size_t)d->n_floats, sizeof *d->buf)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for the fusion buffer");
    for (int k = 0; k < d->n_order; k++) {
        int         i = d->order[k];
        tfs_tensor *v = d->views[i];
        d->views[i] = NULL;
        rc = tfs_tensor_wrap(TFS_DTYPE_FLOAT, v->rank, v->dims, d->buf + d->offset[i], NULL, NULL,
                             &d->views[i], st);
        tfs_tensor_unref(v);
        if (rc != TFS_OK)
            return rc;
    }
    return TFS_OK;
}

typedef struct fit fit;

/* ---- the loop ------------------------------------------------------------------------------- */

struct fit {
    tfs_model          *m;
    tfs_dataset        *train, *eval;
    const tfs_fit_opts *o;
    tfs_fit_result     *res;
    tfs_events_writer  *events;
    tfs_dataset_pos     eval_start;
    int                 xi, yi;
    double              last_ckpt;
    int64_t             ckpt_step;   /* the global step of the last checkpoint (-1: none) */
    bool                stopped;     /* opts.stop was seen */
    dist                dist;        /* size 1: a single-process run */
};

/* The learning rate's factor: 1, or with linear scaling the number of ranks, reached linearly
 * over the warm-up. */
static double dist_lr_scale(const fit *f)
{
    const tfs_fit_opts *o = f->o;
    const dist         *d = &f->dist;
    if (o->lr_scaling != TFS_LR_SCALING_LINEAR || d->size == 1)
        return 1;
    int64_t warm = o->lr_scaling_warmup_steps;
    int64_t ex = tfs_dataset_epoch_examples(f->train), gb = d->global_batch;
    if (o->lr_scaling_warmup_epochs > 0 && ex > 0 && gb > 0) {
        int64_t w = (int64_t)ceil(o->lr_scaling_warmup_epochs * (double)((ex + gb - 1) / gb));
        if (w > warm)
            warm = w;
    }
    int64_t step = tfs_model_global_step(f->m);
    if (warm > 0 && step < warm)
        return 1 + (d->size - 1) * (double)(step + 1) / (double)warm;
    return d->size;
}

/* A step's packing of gradients into the fusion buffer, bucket by bucket. Buckets are started
 * strictly in order, so every rank issues the same collectives in the same order whatever order
 * its backward pass finishes the gradients in. */
typedef struct packer {
    fit               *f;
    float              w;        /* this rank's share of the batch */
    bool              *packed;   /* [n_vars] */
    int               *left;     /* [n_buckets] gradients not packed yet */
    tfs_dist_request **req;      /* [n_buckets] */
    int                started;  /* buckets started */
    bool               in_run;   /* the backward pass is running */
    enum tfs_code      rc;       /* the first error, with st */
    tfs_status         st;
} packer;

/* Starts every bucket before `limit` whose gradients are all packed, in order, and lets the ones
 * in flight move along. */
static void pack_start(packer *pk, int limit)
{
    dist *d = &pk->f->dist;
    while (pk->rc == TFS_OK && pk->started < limit && pk->left[pk->started] == 0) {
        int     k = pk->started++;
        int64_t from = k == 0 ? 0 : d->end[k - 1];
        char    what[64];
        snprintf(what, sizeof what, "gradient allreduce (bucket %d of %d)", k + 1, d->n_buckets);
        pk->rc = tfs_dist_allreduce_start(d->buf + from, d->end[k] - from, what, &pk->req[k],
                                          &pk->st);
        d->early += pk->in_run;
    }
    for (int k = 0; pk->rc == TFS_OK && k < pk->started; k++) {
        bool done;
        pk->rc = tfs_dist_test(pk->req[k], &done, &pk->st);
    }
}

/* Weighted by the slice's share, the sum over the ranks is the gradient of the whole batch's
 * mean loss (the regularization's counted once); src NULL (a rank without rows) adds zeros. */
static void pack_one(packer *pk, int var, const tfs_tensor *grad)
{
    dist *d = &pk->f->dist;
    if (pk->rc != TFS_OK || var < 0 || var >= d->n_vars || d->offset[var] < 0 || pk->packed[var])
        return;
    int64_t ne = d->views[var]->nelem;
    if (grad && grad->nelem != ne) {
        pk->rc = TFS_ERR(&pk->st, TFS_INTERNAL, "the gradient of '%s' has %lld elements, its "
                         "variable %lld", tfs_model_variable_name(pk->f->m, var),
                         (long long)grad->nelem, (long long)ne);
        return;
    }
    float       *dst = d->buf + d->offset[var];
    const float *src = grad ? grad->data : NULL;
    for (int64_t e = 0; e < ne; e++)
        dst[e] = src ? pk->w * src[e] : 0.0f;
    pk->packed[var] = true;
    pk->left[d->bucket_of[var]]--;
}

/* The model's callback during the backward pass: pack, and start what is complete; between
 * gradients (var -1, after every op), let the allreduces in flight move: Open MPI advances a
 * transfer only inside an MPI call, so without these a bucket started early would mostly wait
 * for the end of the backward pass. The last bucket also carries the step's figures, known only
 * when the run is over. */
static void on_gradient(int var, const tfs_tensor *grad, void *arg)
{
    packer *pk = arg;
    if (var >= 0)
        pack_one(pk, var, grad);
    pack_start(pk, pk->f->dist.n_buckets - 1);
}

/* One data-parallel step on a global batch: this rank's slice forward and backward, its
 * gradients packed into the fusion buffer as the backward pass computes them, each bucket's
 * allreduce started as soon as it is full, all awaited, and the same update applied on every
 * rank. *loss, *correct and *units are the whole batch's. */
static enum tfs_code dist_step(fit *f, batch *b, double *loss, int64_t *correct, int64_t *units,
                               tfs_status *st)
{
    dist       *d = &f->dist;
    double      t0 = now();
    int64_t     gb = b->x->dims[0];
    tfs_tensor *x = NULL, *y = NULL, **grads = tfs_calloc((size_t)d->n_vars + 1, sizeof *grads);
    packer      pk = {.f = f};
    pk.packed = tfs_calloc((size_t)d->n_vars + 1, sizeof *pk.packed);
    pk.left = tfs_calloc((size_t)d->n_buckets, sizeof *pk.left);
    pk.req = tfs_calloc((size_t)d->n_buckets, sizeof *pk.req);
    double        l = 0;
    int64_t       c = 0, u = 0;
    enum tfs_code rc = TFS_OK;
    if (!grads || !pk.packed || !pk.left || !pk.req) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a step");
        goto done;
    }
    for (int k = 0; k < d->n_buckets; k++)
        pk.left[k] = d->first[k + 1] - d->first[k];
    if (gb > d->global_batch)
        d->global_batch = gb;
    if ((rc = rank_slice(b->x, &x, st)) != TFS_OK || (rc = rank_slice(b->y, &y, st)) != TFS_OK)
        goto done;
    int64_t n = x->dims[0];
    pk.w = (float)((double)n / (double)gb);
    if (n > 0) {
        pk.in_run = true;
        rc = tfs_model_compute_gradients(f->m, x, y, on_gradient, &pk, grads, &l, &c, st);
        pk.in_run = false;
        if (rc != TFS_OK)
            goto done;
        u = tfs_model_accuracy_units(f->m, y);
    }
    /* What the callback did not see (a GPU plan, a rank without rows), then the figures. */
    for (int j = 0; j < d->n_order; j++)
        pack_one(&pk, d->order[j], grads[d->order[j]]);
    float *ex = d->buf + d->n_floats - N_EXTRAS;
    ex[EX_LOSS] = (float)(l * (double)n);
    ex[EX_CORRECT] = (float)c;
    ex[EX_UNITS] = (float)u;
    ex[EX_STOP] = f->o->stop && *f->o->stop ? 1.0f : 0.0f;
    pack_start(&pk, d->n_buckets);
    if ((rc = pk.rc) != TFS_OK) {
        if (st)
            *st = pk.st;
        goto done;
    }
    for (int k = 0; k < d->n_buckets; k++) {
        rc = tfs_dist_wait(pk.req[k], st);
        pk.req[k] = NULL;
        if (rc != TFS_OK)
            goto done;
    }
    *loss = ex[EX_LOSS] / (double)gb;
    *correct = (int64_t)llround(ex[EX_CORRECT]);
    *units = (int64_t)llround(ex[EX_UNITS]);
    d->stop = ex[EX_STOP] > 0;
    /* The same on every rank, so every rank stops here together. */
    if (!isfinite(*loss)) {
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "step %lld: loss is %s",
                     (long long)tfs_model_global_step(f->m) + 1, isnan(*loss) ? "nan" : "inf");
        goto done;
    }
    if ((rc = tfs_model_apply_gradients(f->m, d->views, dist_lr_scale(f), st)) != TFS_OK)
        goto done;
    d->steps++;
    d->step_secs += now() - t0;
done:
    /* A request still in flight belongs to MPI until the process ends (the caller aborts). */
    for (int i = 0; grads && i < d->n_vars; i++)
        tfs_tensor_unref(grads[i]);
    tfs_free(grads);
    tfs_free(pk.packed);
    tfs_free(pk.left);
    tfs_free(pk.req);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    return rc;
}

/* Every rank learns rank 0's outcome of its start (warm start, resume), so that all fail
 * together when it failed. */
static enum tfs_code rank0_status(enum tfs_code rc, tfs_status *st)
{
    tfs_status s0;
    memset(&s0, 0, sizeof s0);
    if (tfs_dist_rank() == 0 && rc != TFS_OK) {
        if (st)
            s0 = *st;
        s0.code = rc;
    }
    enum tfs_code brc = tfs_dist_broadcast(&s0, sizeof s0, "rank 0's start status", st);
    if (brc != TFS_OK)
        return brc;
    if (s0.code != TFS_OK && st)
        *st = s0;
    return s0.code;
}

/* Rank 0's variables (optimizer slots and global_step included), random generators and data
 * position to every rank. */
static enum tfs_code dist_broadcast_state(fit *f, tfs_status *st)
{
    tfs_model    *m = f->m;
    bool          root = f->dist.rank == 0;
    enum tfs_code rc = TFS_OK;
    for (int i = 0; rc == TFS_OK && i < tfs_model_variable_count(m); i++) {
        tfs_tensor *v = NULL, *c = NULL;
        if ((rc = tfs_model_variable_value(m, i, &v, st)) != TFS_OK)
            break;
        /* The root sends the variable's own buffer; the others receive into a copy. */
        if (!root)
            rc = tfs_tensor_copy(v, &c, st);
        tfs_tensor *t = root ? v : c;
        if (rc == TFS_OK)
            rc = tfs_dist_broadcast(t->data, t->nbytes, "the initial variables", st);
        if (rc == TFS_OK && !root)
            rc = tfs_model_variable_assign(m, i, c, st);
        tfs_tensor_unref(v);
        tfs_tensor_unref(c);
    }
    tfs_tensor *rng = NULL;
    if (rc == TFS_OK && (rc = tfs_model_rng_state(m, &rng, st)) == TFS_OK && rng) {
        rc = tfs_dist_broadcast(rng->data, rng->nbytes, "the random generators", st);
        if (rc == TFS_OK && !root)
            rc = tfs_model_set_rng_state(m, rng, st);
    }
    tfs_tensor_unref(rng);
    if (rc != TFS_OK)
        return rc;
    tfs_dataset_pos p = tfs_dataset_position(f->train), mine = p;
    if ((rc = tfs_dist_broadcast(&p, sizeof p, "the data position", st)) != TFS_OK)
        return rc;
    if (!root && memcmp(&p, &mine, sizeof p) != 0)
        rc = tfs_dataset_seek(f->train, &p, st);
    return rc;
}

static void dist_summary(const fit *f, FILE *out)
{
    const dist    *d = &f->dist;
    tfs_dist_stats s = tfs_dist_stats_get();
    if (!out || d->steps == 0)
        return;
    double per = 1.0 / (double)d->steps;
    fprintf(out,
            "mpi: %d ranks x batch %lld (global %lld), %lld steps, %.0f ex/s; allreduce per step: "
            "%d bucket%s (fusion threshold %lld bytes; %.1f started during the backward pass), "
            "%.0f bytes, %.3f ms waiting (%.1f%% of the step); learning rate x%g\n",
            d->size, (long long)(d->global_batch / d->size), (long long)d->global_batch,
            (long long)d->steps,
            d->step_secs > 0 ? (double)d->steps * (double)d->global_batch / d->step_secs : 0.0,
            d->n_buckets, d->n_buckets == 1 ? "" : "s", (long long)f->o->fusion_threshold_bytes,
            (double)d->early * per,
            (double)s.bytes * per, s.wait_secs * per * 1e3,
            d->step_secs > 0 ? 100.0 * s.wait_secs / d->step_secs : 0.0, dist_lr_scale(f));
}

static enum tfs_code checkpoint(fit *f, tfs_status *st)
{
    if (!f->o->checkpoint_dir)
        return TFS_OK;
    char         *prefix = NULL;
    enum tfs_code rc =
        save(f->m, f->train, f->res, f->o->checkpoint_dir, f->o->keep_checkpoint_max, &prefix, st);
    if (rc == TFS_OK) {
        tfs_free(f->res->checkpoint);
        f->res->checkpoint = prefix;
        f->ckpt_step = tfs_model_global_step(f->m);
    }
    f->last_ckpt = now();
    return rc;
}

/* A stop request was seen: a checkpoint at this step (unless the last one is), the event file
 * flushed, and TFS_CANCELLED. */
static enum tfs_code stop_run(fit *f, tfs_status *st)
{
    int64_t       step = tfs_model_global_step(f->m);
    enum tfs_code rc = f->ckpt_step == step ? TFS_OK : checkpoint(f, st);
    if (rc == TFS_OK && f->events)
        rc = tfs_events_writer_flush(f->events, st);
    if (rc != TFS_OK)
        return rc;
    if (f->res->checkpoint)
        return TFS_ERR(st, TFS_CANCELLED, "stopped at step %lld; checkpoint %s", (long long)step,
                       f->res->checkpoint);
    if (f->dist.rank != 0)
        return TFS_ERR(st, TFS_CANCELLED, "stopped at step %lld (rank 0 saves the checkpoint)",
                       (long long)step);
    return TFS_ERR(st, TFS_CANCELLED, "stopped at step %lld (no checkpoint_dir: not saved)",
                   (long long)step);
}

static enum tfs_code log_epoch(fit *f, int64_t e, batch *last, tfs_status *st)
{
    tfs_fit_result *r = f->res;
    int64_t         step = tfs_model_global_step(f->m);
    struct {
        const char *tag;
        double      v;
    } sc[4] = {{"epoch_loss", r->train_loss[e]},
               {"epoch_accuracy", r->train_accuracy[e]},
               {"eval_loss", r->eval_loss[e]},
               {"eval_accuracy", r->eval_accuracy[e]}};
    for (int k = 0; k < 4; k++)
        if (!isnan(sc[k].v) &&
            tfs_events_writer_scalar(f->events, sc[k].tag, step, sc[k].v, st) != TFS_OK)
            return st->code;
    if (!f->o->histograms)
        return tfs_events_writer_flush(f->events, st);
    for (int i = 0; i < tfs_model_variable_count(f->m); i++) {
        if (!tfs_model_variable_is_weight(f->m, i))
            continue;
        const char   *name = tfs_model_variable_name(f->m, i);
        tfs_tensor   *t = NULL;
        enum tfs_code rc = tfs_model_variable_value(f->m, i, &t, st);
        if (rc == TFS_OK)
            rc = tfs_events_writer_histogram(f->events, name, step, t, st);
        tfs_tensor_unref(t);
        t = NULL;
        if (rc != TFS_OK)
            return rc;
        if (!last->x || tfs_model_gradient(f->m, i, last->x, last->y, &t, NULL) != TFS_OK)
            continue;
        char tag[300];
        snprintf(tag, sizeof tag, "%s/gradient", name);
        rc = tfs_events_writer_histogram(f->events, tag, step, t, st);
        tfs_tensor_unref(t);
        if (rc != TFS_OK)
            return rc;
    }
    return tfs_events_writer_flush(f->events, st);
}

/* Trains until the dataset's epoch moves past `epoch` (or it ends, or max_steps). */
static enum tfs_code train_epoch(fit *f, int64_t epoch, batch *last, bool *stop, tfs_status *st)
{
    const tfs_fit_opts *o = f->o;
    tfs_fit_result     *r = f->res;
    int64_t             n = 0, units = 0, correct = 0;
    double              loss_sum = 0;
    int64_t             total = tfs_dataset_epoch_examples(f->train);
    progress            p = {.out = o->quiet ? NULL : (o->out ? o->out : stdout),
                             .epoch = epoch,
                             .epochs = o->epochs,
                             .total = total,
                             .start = now()};
    p.bar = o->progress == 1 || (o->progress < 0 && p.out && isatty(fileno(p.out)));
    p.last = p.start;
    /* Examples of this epoch done before (a resume mid-epoch); at an epoch's start the position
     * still says "end of the previous epoch". */
    tfs_dataset_pos start = tfs_dataset_position(f->train);
    int64_t         done = start.epoch == epoch ? start.index : 0;
    enum tfs_code   rc = TFS_OK;
    for (;;) {
        /* Under MPI a stop request counts once the ranks agreed on it (dist_step). */
        if (f->dist.size > 1 ? f->dist.stop : o->stop && *o->stop) {
            f->stopped = true;
            *stop = true;
            break;
        }
        if (o->max_steps > 0 && tfs_model_global_step(f->m) >= o->max_steps) {
            *stop = true;
            break;
        }
        batch b = {0};
        rc = next_batch(f->train, f->xi, f->yi, &b, st);
        if (rc == TFS_OUT_OF_RANGE) {
            *stop = true;
            rc = TFS_OK;
            break;
        }
        if (rc != TFS_OK)
            return rc;
        double  loss;
        int64_t c, bu = 0;
        if (f->dist.size > 1) {
            rc = dist_step(f, &b, &loss, &c, &bu, st);
        } else {
            rc = tfs_model_train_step(f->m, b.x, b.y, &loss, &c, st);
            bu = tfs_model_accuracy_units(f->m, b.y);
        }
        if (rc != TFS_OK) {
            batch_clear(&b);
            return rc;
        }
        int64_t bn = b.x->dims[0];
        n += bn;
        done += bn;
        units += bu;
        correct += c;
        loss_sum += loss * (double)bn;
        batch_clear(last);
        *last = b;
        int64_t step = tfs_model_global_step(f->m);
        if (f->events && o->log_every_steps > 0 && step % o->log_every_steps == 0) {
            if (tfs_events_writer_scalar(f->events, "loss", step, loss, st) != TFS_OK ||
                tfs_events_writer_scalar(f->events, "learning_rate", step,
                                         tfs_model_learning_rate(f->m) * dist_lr_scale(f),
                                         st) != TFS_OK)
                return st->code;
        }
        progress_show(&p, done, loss_sum / (double)n, units ? (double)correct / (double)units : NAN,
                      false);
        bool ckpt =
            (o->checkpoint_every_steps > 0 && step % o->checkpoint_every_steps == 0) ||
            (o->checkpoint_every_secs > 0 && now() - f->last_ckpt >= o->checkpoint_every_secs);
        tfs_dataset_pos pos = tfs_dataset_position(f->train);
        bool            end = pos.epoch != epoch || (total >= 0 && pos.index >= total);
        if (ckpt && !end && (rc = checkpoint(f, st)) != TFS_OK)
            return rc;
        if (end)
            break;
    }
    if (n > 0) {
        /* Resumed mid-epoch: the epoch's figures cover the steps run since. */
        r->train_loss[epoch] = loss_sum / (double)n;
        r->train_accuracy[epoch] = units ? (double)correct / (double)units : NAN;
        r->seconds[epoch] = now() - p.start;
        progress_show(&p, done, r->train_loss[epoch], r->train_accuracy[epoch], true);
    }
    return rc;
}

enum tfs_code tfs_train_fit(tfs_model *m, tfs_dataset *train_ds, tfs_dataset *eval_ds,
                            const tfs_fit_opts *opts, tfs_fit_result *res, tfs_status *st)
{
    tfs_fit_opts o = opts ? *opts : tfs_fit_opts_default();
    memset(res, 0, sizeof *res);
    fit           f = {.m = m, .train = train_ds, .eval = eval_ds, .o = &o, .res = res,
                       .ckpt_step = -1, .dist = {.rank = tfs_dist_rank(), .size = tfs_dist_size()}};
    batch         last = {0};
    enum tfs_code rc = components(train_ds, o.feature, o.label, &f.xi, &f.yi, st);
    if (rc != TFS_OK)
        return rc;
    if (f.dist.rank != 0) {
        /* Rank 0 reads the checkpoint to start from and writes everything; the others train. */
        o.quiet = true;
        o.checkpoint_dir = o.log_dir = o.export_dir = o.plot = o.warm_start = NULL;
        o.resume = false;
    }
    if (f.dist.size > 1) {
        tfs_dist_set_timeout(o.collective_timeout_secs);
        int64_t ex = tfs_dataset_epoch_examples(train_ds);
        if (ex >= 0 && ex < f.dist.size)
            return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                           "the training set has %lld examples per epoch, fewer than the %d "
                           "ranks: each rank needs a shard",
                           (long long)ex, f.dist.size);
        if (o.fusion_threshold_bytes < 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "fusion_threshold_bytes must be >= 1");
        if ((rc = dist_plan(&f.dist, m, o.fusion_threshold_bytes, st)) != TFS_OK)
            goto done;
    }
    if (eval_ds) {
        int a, b;
        if ((rc = components(eval_ds, o.feature, o.label, &a, &b, st)) != TFS_OK)
            return rc;
        f.eval_start = tfs_dataset_position(eval_ds);
    }
    if (o.epochs < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "epochs must be >= 1");
    if (!result_reserve(res, o.epochs))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    FILE *out = o.quiet ? NULL : (o.out ? o.out : stdout);
    if (o.warm_start) {
        int n = 0;
        if ((rc = restore(m, NULL, o.warm_start, true, &n, NULL, st)) != TFS_OK)
            goto start_failed;
        if (out)
            fprintf(out, "warm start: %d weights from %s\n", n, o.warm_start);
    }
    if (o.resume) {
        char *prefix = NULL;
        if (!o.checkpoint_dir || tfs_checkpoint_latest(o.checkpoint_dir, &prefix, NULL) != TFS_OK) {
            rc = TFS_ERR(st, TFS_FAILED_PRECONDITION, "resume: no checkpoint in %s",
                         o.checkpoint_dir ? o.checkpoint_dir : "(no checkpoint_dir)");
            goto start_failed;
        }
        rc = restore(m, train_ds, prefix, false, NULL, res, st);
        if (rc == TFS_OK && !result_reserve(res, o.epochs))
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        if (rc == TFS_OK && out)
            fprintf(out, "resumed from %s at step %lld\n", prefix,
                    (long long)tfs_model_global_step(m));
        tfs_free(prefix);
    }
start_failed:
    if (rc != TFS_OK && f.dist.size == 1)
        goto done;
    if (f.dist.size > 1 && ((rc = rank0_status(rc, st)) != TFS_OK ||
                            (rc = dist_broadcast_state(&f, st)) != TFS_OK))
        goto done;
    if (o.log_dir) {
        if ((rc = tfs_events_writer_open(o.log_dir, &f.events, st)) != TFS_OK ||
            (rc = tfs_events_writer_graph(f.events, tfs_model_graph(m), st)) != TFS_OK)
            goto done;
    }
    f.last_ckpt = now();
    bool    stop = false;
    int64_t total = tfs_dataset_epoch_examples(train_ds);
    for (;;) {
        tfs_dataset_pos pos = tfs_dataset_position(train_ds);
        int64_t         epoch =
            total >= 0 && pos.index >= total && pos.index > 0 ? pos.epoch + 1 : pos.epoch;
        if (epoch >= o.epochs || stop)
            break;
        if ((rc = train_epoch(&f, epoch, &last, &stop, st)) != TFS_OK)
            goto done;
        if (f.stopped) {
            if (out && (o.progress == 1 || (o.progress < 0 && isatty(fileno(out)))))
                fprintf(out, "\n");   /* end the progress bar's line */
            rc = stop_run(&f, st);
            goto done;
        }
        if (isnan(res->train_loss[epoch]))
            break; /* no step ran: the data or max_steps ended */
        res->epochs = epoch + 1;
        if (eval_ds) {
            if ((rc = tfs_dataset_seek(eval_ds, &f.eval_start, st)) != TFS_OK ||
                (rc = tfs_train_evaluate(m, eval_ds, o.feature, o.label, &res->eval_loss[epoch],
                                         &res->eval_accuracy[epoch], st)) != TFS_OK)
                goto done;
        }
        if (out) {
            if (!isnan(res->eval_loss[epoch]))
                fprintf(out, "%s  eval: loss %.4f", f.o->progress == 0 ? "" : "\n",
                        res->eval_loss[epoch]);
            if (!isnan(res->eval_accuracy[epoch]))
                fprintf(out, " - accuracy %.4f", res->eval_accuracy[epoch]);
            fprintf(out, "\n");
            fflush(out);
        }
        if (f.events && (rc = log_epoch(&f, epoch, &last, st)) != TFS_OK)
            goto done;
        if ((rc = checkpoint(&f, st)) != TFS_OK)
            goto done;
        if (o.plot &&
            (rc = tfs_plot_write_svg(o.plot,
                                     &(tfs_plot_curves){.n_epochs = (int)res->epochs,
                                                        .train_loss = res->train_loss,
                                                        .eval_loss = res->eval_loss,
                                                        .train_accuracy = res->train_accuracy,
                                                        .eval_accuracy = res->eval_accuracy,
                                                        .title = "tfserve-train"},
                                     st)) != TFS_OK)
            goto done;
    }
    res->global_step = tfs_model_global_step(m);
    if (f.dist.size > 1)
        dist_summary(&f, out);
    if (o.export_dir) {
        char *path = NULL;
        if ((rc = next_version(o.export_dir, &path, st)) == TFS_OK)
            rc = tfs_model_export(m, path, st);
        if (rc == TFS_OK) {
            res->export_path = path;
            if (out)
                fprintf(out, "exported %s\n", path);
        } else {
            tfs_free(path);
        }
    }
done:
    batch_clear(&last);
    dist_free(&f.dist);
    if (f.events) {
        tfs_status cst;
        if (tfs_events_writer_close(f.events, &cst) != TFS_OK && rc == TFS_OK) {
            rc = cst.code;
            if (st)
                *st = cst;
        }
    }
    res->global_step = tfs_model_global_step(m);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}
