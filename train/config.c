/* The tfserve-train config file (config.h): an INI-style reader with line:column errors and
 * the keys of each section, mapped onto the model, optimizer, fit and data settings.
 *
 * DESIGN. One pass over the lines; each `key = value` goes to its section's setter, which parses
 * the value strictly (a number must be all number, a list all numbers) and reports errors at the
 * value's column. Defaults are filled in before parsing and cross-field checks run after it, so
 * the order of keys and sections (except [layer], which is ordered) does not matter.
 */
#include "train/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

#define MAX_FILE_BYTES ((size_t)1 << 20)

/* The [layer] keys, each with the layer kinds it applies to (checked once the whole section has
 * been read, since `type` may come after the other keys). Aliases share a slot. */
#define K(kind) (1u << (kind))
#define ALL_KINDS (~0u)
#define WEIGHTED (K(TFS_LAYER_DENSE) | K(TFS_LAYER_CONV2D))
#define WINDOWED (K(TFS_LAYER_CONV2D) | K(TFS_LAYER_MAX_POOL2D) | K(TFS_LAYER_AVG_POOL2D))
static const struct {
    const char *keys[3];
    unsigned    kinds;
} LAYER_KEYS[] = {
    {{"type"}, ALL_KINDS},
    {{"name"}, ALL_KINDS},
    {{"units", "filters", "output_dim"}, WEIGHTED | K(TFS_LAYER_EMBEDDING)},
    {{"kernel_size", "pool_size"}, WINDOWED},
    {{"strides"}, WINDOWED},
    {{"padding"}, WINDOWED},
    {{"activation"}, WEIGHTED | K(TFS_LAYER_ACTIVATION)},
    {{"alpha"}, WEIGHTED | K(TFS_LAYER_ACTIVATION)},
    {{"use_bias"}, WEIGHTED},
    {{"rate"}, K(TFS_LAYER_DROPOUT)},
    {{"momentum"}, K(TFS_LAYER_BATCH_NORM)},
    {{"epsilon"}, K(TFS_LAYER_BATCH_NORM)},
    {{"input_dim"}, K(TFS_LAYER_EMBEDDING)},
    {{"kernel_initializer"}, WEIGHTED | K(TFS_LAYER_EMBEDDING)},
    {{"bias_initializer"}, WEIGHTED},
    {{"l2"}, WEIGHTED},
};
#define N_LAYER_KEYS ((int)(sizeof LAYER_KEYS / sizeof LAYER_KEYS[0]))

/* Where each [layer] section and each of its keys was (line 0: not given). */
typedef struct layer_at {
    int         line;
    int         key_line[N_LAYER_KEYS], key_col[N_LAYER_KEYS];
    const char *key[N_LAYER_KEYS];   /* the spelling used */
} layer_at;

typedef struct parser {
    const char       *name;
    int               line, col;     /* of the value being set */
    tfs_train_config *c;
    tfs_status       *st;
    layer_at         *layer_at;      /* [TFS_CONFIG_MAX_LAYERS] */
    int               values_line, values_col;   /* of [optimizer] values, 0: not given */
    int               n_values;
    int               key_col;       /* of the key being set */
    bool              momentum_set;  /* [optimizer] momentum was given */
} parser;

static enum tfs_code perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static enum tfs_code perr(parser *p, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return TFS_ERR(p->st, TFS_INVALID_ARGUMENT, "%s:%d:%d: %s", p->name, p->line, p->col, msg);
}

/* An unknown key, reported at the key's column. */
static enum tfs_code unknown_key(parser *p, const char *section, const char *k)
{
    p->col = p->key_col;
    return perr(p, "[%s]: unknown key '%s'", section, k);
}

/* ---- values --------------------------------------------------------------------------------- */

static enum tfs_code get_double(parser *p, const char *key, const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno == ERANGE || !isfinite(d))
        return perr(p, "%s: '%s' is not a number", key, v);
    *out = d;
    return TFS_OK;
}

static enum tfs_code get_int(parser *p, const char *key, const char *v, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long i = strtoll(v, &end, 10);
    if (end == v || *end || errno == ERANGE)
        return perr(p, "%s: '%s' is not an integer", key, v);
    if (i < lo)
        return perr(p, "%s: %lld is below %lld", key, i, (long long)lo);
    *out = i;
    return TFS_OK;
}

static enum tfs_code get_bool(parser *p, const char *key, const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"))
        *out = true;
    else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0"))
        *out = false;
    else
        return perr(p, "%s: '%s' is not true or false", key, v);
    return TFS_OK;
}

/* A comma-separated list of at most max integers (each >= lo). */
static enum tfs_code get_ints(parser *p, const char *key, const char *v, int max, int64_t lo,
                              int64_t *out, int *n)
{
    *n = 0;
    const char *s = v;
    for (;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        char *end;
        errno = 0;
        long long i = strtoll(s, &end, 10);
        if (end == s || errno == ERANGE)
            return perr(p, "%s: '%s' is not a list of integers", key, v);
        if (i < lo)
            return perr(p, "%s: %lld is below %lld", key, i, (long long)lo);
        if (*n == max)
            return perr(p, "%s: more than %d values", key, max);
        out[(*n)++] = i;
        s = end;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            return TFS_OK;
        if (*s != ',')
            return perr(p, "%s: '%s' is not a list of integers", key, v);
        s++;
    }
}

static enum tfs_code get_doubles(parser *p, const char *key, const char *v, int max, double *out,
                                 int *n)
{
    *n = 0;
    const char *s = v;
    for (;;) {
        char *end;
        errno = 0;
        double d = strtod(s, &end);
        if (end == s || errno == ERANGE || !isfinite(d))
            return perr(p, "%s: '%s' is not a list of numbers", key, v);
        if (*n == max)
            return perr(p, "%s: more than %d values", key, max);
        out[(*n)++] = d;
        s = end;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            return TFS_OK;
        if (*s != ',')
            return perr(p, "%s: '%s' is not a list of numbers", key, v);
        s++;
    }
}

static enum tfs_code get_str(parser *p, const char *v, char **out)
{
    tfs_free(*out);
    *out = tfs_strdup(v);
    return *out ? TFS_OK : TFS_ERR(p->st, TFS_RESOURCE_EXHAUSTED, "out of memory reading %s",
                                   p->name);
}

/* A string the fit options point at, owned by the config. */
static enum tfs_code get_fit_str(parser *p, const char *key, const char *v, const char **out)
{
    tfs_train_config *c = p->c;
    if (c->n_strings == (int)(sizeof c->strings / sizeof c->strings[0]))
        return perr(p, "%s: too many settings", key);
    char *s = NULL;
    enum tfs_code rc = get_str(p, v, &s);
    if (rc != TFS_OK)
        return rc;
    c->strings[c->n_strings++] = s;
    *out = s;
    return TFS_OK;
}

/* ---- sections ------------------------------------------------------------------------------- */

static enum tfs_code set_data(parser *p, const char *k, const char *v)
{
    tfs_data_config *d = &p->c->data;
    if (!strcmp(k, "format")) {
        static const char *const F[] = {"idx", "npy", "csv", "tfrecord"};
        for (int i = 0; i < TFS_DATA_FORMAT_COUNT; i++)
            if (!strcmp(v, F[i])) {
                d->format = (enum tfs_data_format)i;
                return TFS_OK;
            }
        return perr(p, "format: '%s' is not one of idx, npy, csv, tfrecord", v);
    }
    if (!strcmp(k, "train_features") || !strcmp(k, "train_file"))
        return get_str(p, v, &d->train_features);
    if (!strcmp(k, "train_labels"))
        return get_str(p, v, &d->train_labels);
    if (!strcmp(k, "eval_features") || !strcmp(k, "eval_file"))
        return get_str(p, v, &d->eval_features);
    if (!strcmp(k, "eval_labels"))
        return get_str(p, v, &d->eval_labels);
    if (!strcmp(k, "label_column"))
        return get_str(p, v, &d->label_column);
    if (!strcmp(k, "feature_columns")) {
        const char *s = v;
        while (*s) {
            size_t n = strcspn(s, ",");
            while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                n--;
            if (n == 0)
                return perr(p, "feature_columns: empty column name");
            if (d->n_feature_columns == TFS_CONFIG_MAX_COLUMNS)
                return perr(p, "feature_columns: more than %d", TFS_CONFIG_MAX_COLUMNS);
            char *name = tfs_strndup(s, n);
            if (!name)
                return TFS_ERR(p->st, TFS_RESOURCE_EXHAUSTED, "out of memory");
            d->feature_columns[d->n_feature_columns++] = name;
            s += strcspn(s, ",");
            if (*s == ',')
                s++;
            while (*s == ' ' || *s == '\t')
                s++;
        }
        return TFS_OK;
    }
    if (!strcmp(k, "scale"))
        return get_double(p, k, v, &d->scale);
    if (!strcmp(k, "shift"))
        return get_double(p, k, v, &d->shift);
    if (!strcmp(k, "shuffle_buffer"))
        return get_int(p, k, v, 0, &d->shuffle_buffer);
    if (!strcmp(k, "seed")) {
        int64_t s = 0;
        enum tfs_code rc = get_int(p, k, v, 0, &s);
        d->seed = (uint64_t)s;
        return rc;
    }
    if (!strcmp(k, "batch_size"))
        return get_int(p, k, v, 1, &d->batch_size);
    if (!strcmp(k, "eval_batch_size"))
        return get_int(p, k, v, 1, &d->eval_batch_size);
    if (!strcmp(k, "prefetch")) {
        int64_t n = 0;
        enum tfs_code rc = get_int(p, k, v, 0, &n);
        d->prefetch = n > 64 ? 64 : (int)n;
        return rc;
    }
    return unknown_key(p, "data", k);
}

static enum tfs_code set_model(parser *p, const char *k, const char *v)
{
    tfs_model_spec *m = &p->c->model;
    if (!strcmp(k, "input_shape")) {
        int n;
        enum tfs_code rc = get_ints(p, k, v, TFS_MAX_RANK - 2, 1, m->input_shape, &n);
        m->input_rank = n;
        return rc;
    }
    if (!strcmp(k, "input_dtype")) {
        if (!strcmp(v, "float") || !strcmp(v, "float32"))
            m->input_dtype = TFS_DTYPE_FLOAT;
        else if (!strcmp(v, "int32"))
            m->input_dtype = TFS_DTYPE_INT32;
        else
            return perr(p, "input_dtype: '%s' is not float or int32", v);
        return TFS_OK;
    }
    if (!strcmp(k, "loss"))
        return tfs_loss_parse(v, &m->loss) ? TFS_OK
               : perr(p, "loss: unknown loss '%s' (sparse_softmax_cross_entropy, "
                      "softmax_cross_entropy, sigmoid_cross_entropy, mean_squared_error)", v);
    if (!strcmp(k, "seed"))
        return get_int(p, k, v, 0, &m->seed);
    if (!strcmp(k, "check_numerics"))
        return get_bool(p, k, v, &m->check_numerics);
    return unknown_key(p, "model", k);
}

static enum tfs_code get_pair(parser *p, const char *k, const char *v, int64_t *out)
{
    int64_t two[2];
    int n;
    enum tfs_code rc = get_ints(p, k, v, 2, 1, two, &n);
    if (rc != TFS_OK)
        return rc;
    out[0] = two[0];
    out[1] = n == 2 ? two[1] : two[0];
    return TFS_OK;
}

static enum tfs_code set_layer_key(parser *p, const char *k, const char *v)
{
    tfs_train_config *c = p->c;
    tfs_layer_spec *l = &c->layers[c->model.n_layers - 1];
    if (!strcmp(k, "type")) {
        static const struct {
            const char *name;
            enum tfs_layer_kind kind;
        } T[] = {{"dense", TFS_LAYER_DENSE},           {"conv2d", TFS_LAYER_CONV2D},
                 {"max_pool2d", TFS_LAYER_MAX_POOL2D}, {"avg_pool2d", TFS_LAYER_AVG_POOL2D},
                 {"flatten", TFS_LAYER_FLATTEN},       {"dropout", TFS_LAYER_DROPOUT},
                 {"batch_norm", TFS_LAYER_BATCH_NORM}, {"embedding", TFS_LAYER_EMBEDDING},
                 {"activation", TFS_LAYER_ACTIVATION}};
        for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
            if (!strcmp(v, T[i].name)) {
                /* Only the kind: the keys read so far stay (every kind has the same defaults). */
                l->kind = T[i].kind;
                return TFS_OK;
            }
        return perr(p, "type: unknown layer type '%s' (dense, conv2d, max_pool2d, avg_pool2d, "
                    "flatten, dropout, batch_norm, embedding, activation)", v);
    }
    if (!strcmp(k, "name")) {
        if (strlen(v) >= sizeof l->name || strchr(v, '/'))
            return perr(p, "name: '%s' is too long or holds '/'", v);
        snprintf(l->name, sizeof l->name, "%s", v);
        return TFS_OK;
    }
    if (!strcmp(k, "units") || !strcmp(k, "filters") || !strcmp(k, "output_dim"))
        return get_int(p, k, v, 1, &l->units);
    if (!strcmp(k, "kernel_size") || !strcmp(k, "pool_size"))
        return get_pair(p, k, v, l->kernel);
    if (!strcmp(k, "strides"))
        return get_pair(p, k, v, l->strides);
    if (!strcmp(k, "padding")) {
        if (strcmp(v, "same") && strcmp(v, "valid"))
            return perr(p, "padding: '%s' is not same or valid", v);
        l->same_padding = !strcmp(v, "same");
        return TFS_OK;
    }
    if (!strcmp(k, "activation"))
        return tfs_activation_parse(v, &l->activation) ? TFS_OK
               : perr(p, "activation: unknown activation '%s'", v);
    if (!strcmp(k, "alpha"))
        return get_double(p, k, v, &l->alpha);
    if (!strcmp(k, "use_bias")) {
        bool b = true;
        enum tfs_code rc = get_bool(p, k, v, &b);
        l->no_bias = !b;
        return rc;
    }
    if (!strcmp(k, "rate"))
        return get_double(p, k, v, &l->rate);
    if (!strcmp(k, "momentum"))
        return get_double(p, k, v, &l->momentum);
    if (!strcmp(k, "epsilon"))
        return get_double(p, k, v, &l->epsilon);
    if (!strcmp(k, "input_dim"))
        return get_int(p, k, v, 1, &l->input_dim);
    if (!strcmp(k, "kernel_initializer") || !strcmp(k, "bias_initializer")) {
        tfs_init_spec *i = k[0] == 'k' ? &l->kernel_init : &l->bias_init;
        return tfs_init_parse(v, &i->kind) ? TFS_OK : perr(p, "%s: unknown initializer '%s'", k, v);
    }
    if (!strcmp(k, "l2"))
        return get_double(p, k, v, &l->l2);
    return unknown_key(p, "layer", k);
}

/* Sets a [layer] key and remembers where it was, for the checks of check_layers. */
static enum tfs_code set_layer(parser *p, const char *k, const char *v)
{
    enum tfs_code rc = set_layer_key(p, k, v);
    if (rc != TFS_OK)
        return rc;
    layer_at *at = &p->layer_at[p->c->model.n_layers - 1];
    for (int i = 0; i < N_LAYER_KEYS; i++)
        for (int a = 0; a < 3 && LAYER_KEYS[i].keys[a]; a++)
            if (!strcmp(k, LAYER_KEYS[i].keys[a])) {
                at->key_line[i] = p->line;
                at->key_col[i] = p->col;
                at->key[i] = LAYER_KEYS[i].keys[a];
            }
    return TFS_OK;
}

static enum tfs_code set_optimizer(parser *p, const char *k, const char *v)
{
    tfs_optimizer_spec *o = &p->c->optimizer;
    if (!strcmp(k, "name"))
        return tfs_optimizer_parse(v, &o->kind) ? TFS_OK
               : perr(p, "name: unknown optimizer '%s' (sgd, momentum, adam, rmsprop, adagrad)", v);
    if (!strcmp(k, "schedule")) {
        static const char *const S[] = {"constant", "exponential", "piecewise", "cosine"};
        for (int i = 0; i < TFS_LR_COUNT; i++)
            if (!strcmp(v, S[i])) {
                o->schedule = (enum tfs_lr_schedule)i;
                return TFS_OK;
            }
        return perr(p, "schedule: '%s' is not constant, exponential, piecewise or cosine", v);
    }
    struct {
        const char *key;
        double *d;
    } D[] = {{"learning_rate", &o->learning_rate}, {"momentum", &o->momentum},
             {"beta1", &o->beta1},                 {"beta2", &o->beta2},
             {"epsilon", &o->epsilon},             {"rho", &o->rho},
             {"initial_accumulator", &o->initial_accumulator},
             {"decay_rate", &o->decay_rate},       {"alpha", &o->alpha},
             {"clip_value", &o->clip_value},       {"clip_norm", &o->clip_norm},
             {"clip_global_norm", &o->clip_global_norm}};
    p->momentum_set = p->momentum_set || !strcmp(k, "momentum");
    for (size_t i = 0; i < sizeof D / sizeof D[0]; i++)
        if (!strcmp(k, D[i].key))
            return get_double(p, k, v, D[i].d);
    if (!strcmp(k, "nesterov"))
        return get_bool(p, k, v, &o->nesterov);
    if (!strcmp(k, "centered"))
        return get_bool(p, k, v, &o->centered);
    if (!strcmp(k, "staircase"))
        return get_bool(p, k, v, &o->staircase);
    if (!strcmp(k, "decay_steps"))
        return get_int(p, k, v, 1, &o->decay_steps);
    if (!strcmp(k, "warmup_steps"))
        return get_int(p, k, v, 0, &o->warmup_steps);
    if (!strcmp(k, "boundaries"))
        return get_ints(p, k, v, TFS_LR_MAX_PIECES, 0, o->boundaries, &o->n_pieces);
    if (!strcmp(k, "values")) {
        /* Checked against boundaries once both have been read (check_optimizer). */
        p->values_line = p->line;
        p->values_col = p->col;
        return get_doubles(p, k, v, TFS_LR_MAX_PIECES + 1, o->values, &p->n_values);
    }
    return unknown_key(p, "optimizer", k);
}

static enum tfs_code set_train(parser *p, const char *k, const char *v)
{
    tfs_fit_opts *f = &p->c->fit;
    if (!strcmp(k, "epochs"))
        return get_int(p, k, v, 1, &f->epochs);
    if (!strcmp(k, "max_steps"))
        return get_int(p, k, v, 0, &f->max_steps);
    if (!strcmp(k, "checkpoint_every_steps"))
        return get_int(p, k, v, 0, &f->checkpoint_every_steps);
    if (!strcmp(k, "checkpoint_every_secs"))
        return get_double(p, k, v, &f->checkpoint_every_secs);
    if (!strcmp(k, "keep_checkpoint_max")) {
        int64_t n = 0;
        enum tfs_code rc = get_int(p, k, v, 0, &n);
        f->keep_checkpoint_max = n > 1000000 ? 1000000 : (int)n;
        return rc;
    }
    if (!strcmp(k, "log_every_steps"))
        return get_int(p, k, v, 0, &f->log_every_steps);
    if (!strcmp(k, "histograms"))
        return get_bool(p, k, v, &f->histograms);
    if (!strcmp(k, "fusion_threshold_bytes"))
        return get_int(p, k, v, 1, &f->fusion_threshold_bytes);
    if (!strcmp(k, "lr_scaling")) {
        if (!strcmp(v, "none") || !strcmp(v, "linear")) {
            f->lr_scaling = !strcmp(v, "linear") ? TFS_LR_SCALING_LINEAR : TFS_LR_SCALING_NONE;
            return TFS_OK;
        }
        return perr(p, "lr_scaling: '%s' is not none or linear", v);
    }
    if (!strcmp(k, "lr_scaling_warmup_steps"))
        return get_int(p, k, v, 0, &f->lr_scaling_warmup_steps);
    if (!strcmp(k, "lr_scaling_warmup_epochs") || !strcmp(k, "collective_timeout_secs")) {
        double       *d = k[0] == 'l' ? &f->lr_scaling_warmup_epochs : &f->collective_timeout_secs;
        enum tfs_code rc = get_double(p, k, v, d);
        if (rc == TFS_OK && !(*d >= 0))
            return perr(p, "%s: must be >= 0", k);
        return rc;
    }
    struct {
        const char *key;
        const char **s;
    } S[] = {{"checkpoint_dir", &f->checkpoint_dir}, {"warm_start", &f->warm_start},
             {"log_dir", &f->log_dir},               {"export_dir", &f->export_dir},
             {"plot", &f->plot}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++)
        if (!strcmp(k, S[i].key))
            return get_fit_str(p, k, v, S[i].s);
    return unknown_key(p, "train", k);
}

/* ---- the file ------------------------------------------------------------------------------- */

static void defaults(tfs_train_config *c)
{
    c->model = tfs_model_spec_default();
    c->model.layers = c->layers;
    c->optimizer = tfs_optimizer_spec_default();
    c->fit = tfs_fit_opts_default();
    c->data.scale = 1.0;
    c->data.shuffle_buffer = -1;   /* the whole training set */
    c->data.seed = 1;
    c->data.batch_size = 32;
    c->data.eval_batch_size = 1000;
    c->data.prefetch = 2;
}

static enum tfs_code check_layers(parser *p)
{
    static const char *const KIND[TFS_LAYER_KIND_COUNT] = {
        [TFS_LAYER_DENSE] = "dense", [TFS_LAYER_CONV2D] = "conv2d",
        [TFS_LAYER_MAX_POOL2D] = "max_pool2d", [TFS_LAYER_AVG_POOL2D] = "avg_pool2d",
        [TFS_LAYER_FLATTEN] = "flatten", [TFS_LAYER_DROPOUT] = "dropout",
        [TFS_LAYER_BATCH_NORM] = "batch_norm", [TFS_LAYER_EMBEDDING] = "embedding",
        [TFS_LAYER_ACTIVATION] = "activation"};
    for (int i = 0; i < p->c->model.n_layers; i++) {
        const layer_at *at = &p->layer_at[i];
        enum tfs_layer_kind kind = p->c->layers[i].kind;
        if (!at->key_line[0]) {
            p->line = at->line;
            p->col = 1;
            return perr(p, "[layer] %d: type is missing", i);
        }
        for (int k = 0; k < N_LAYER_KEYS; k++)
            if (at->key_line[k] && !(LAYER_KEYS[k].kinds & K(kind))) {
                p->line = at->key_line[k];
                p->col = at->key_col[k];
                return perr(p, "%s: does not apply to a %s layer", at->key[k], KIND[kind]);
            }
    }
    return TFS_OK;
}

static enum tfs_code check_optimizer(parser *p)
{
    tfs_optimizer_spec *o = &p->c->optimizer;
    /* Momentum without a momentum would be plain SGD: TF1's MomentumOptimizer is always used
     * with one, 0.9 by convention. */
    if (o->kind == TFS_OPT_MOMENTUM && !p->momentum_set)
        o->momentum = 0.9;
    if (p->values_line && p->n_values != o->n_pieces + 1) {
        p->line = p->values_line;
        p->col = p->values_col;
        return perr(p, "values: %d values for %d boundaries (give one value more than "
                    "boundaries)", p->n_values, o->n_pieces);
    }
    p->col = 1;
    if (o->schedule == TFS_LR_PIECEWISE && !p->values_line)
        return perr(p, "[optimizer] schedule piecewise needs boundaries and values");
    if ((o->schedule == TFS_LR_EXPONENTIAL || o->schedule == TFS_LR_COSINE) && o->decay_steps < 1)
        return perr(p, "[optimizer] schedule %s needs decay_steps",
                    o->schedule == TFS_LR_COSINE ? "cosine" : "exponential");
    return TFS_OK;
}

static enum tfs_code check(parser *p)
{
    tfs_train_config *c = p->c;
    if (p->line < 1)
        p->line = 1;   /* an empty file */
    enum tfs_code rc = check_layers(p);
    if (rc == TFS_OK)
        rc = check_optimizer(p);
    if (rc != TFS_OK)
        return rc;
    p->col = 1;
    if (c->model.n_layers == 0)
        return perr(p, "the model has no [layer] section");
    if (c->model.input_rank == 0)
        return perr(p, "[model] input_shape is missing");
    if (!c->data.train_features)
        return perr(p, "[data] train_features (or train_file) is missing");
    bool two_files = c->data.format == TFS_DATA_IDX || c->data.format == TFS_DATA_NPY;
    if (two_files && !c->data.train_labels)
        return perr(p, "[data] train_labels is missing");
    if (two_files && c->data.eval_features && !c->data.eval_labels)
        return perr(p, "[data] eval_labels is missing");
    if (c->data.format == TFS_DATA_CSV && !c->data.label_column)
        return perr(p, "[data] label_column is missing (format csv)");
    return TFS_OK;
}

enum tfs_code tfs_train_config_parse(const char *name, const char *text, size_t len,
                                     tfs_train_config **out, tfs_status *st)
{
    *out = NULL;
    tfs_train_config *c = tfs_calloc(1, sizeof *c);
    char *line = NULL;
    if (!c)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading %s", name);
    defaults(c);
    c->path = tfs_strdup(name);
    parser p = {.name = name, .c = c, .st = st};
    p.layer_at = tfs_calloc(TFS_CONFIG_MAX_LAYERS, sizeof *p.layer_at);
    enum tfs_code rc = c->path && p.layer_at
                           ? TFS_OK
                           : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading %s", name);
    enum { NONE, DATA, MODEL, LAYER, OPTIMIZER, TRAIN } section = NONE;
    size_t pos = 0;
    while (rc == TFS_OK && pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        p.line++;
        p.col = 1;
        if (memchr(text + pos, '\0', end - pos) != NULL) {
            rc = perr(&p, "a NUL byte in the line");
            break;
        }
        tfs_free(line);
        line = tfs_strndup(text + pos, end - pos);
        pos = end + 1;
        if (!line) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading %s", name);
            break;
        }
        /* strip comments and whitespace */
        char *hash = strpbrk(line, "#;");
        if (hash)
            *hash = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t' || *s == '\r')
            s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            *--e = '\0';
        if (!*s)
            continue;
        p.col = (int)(s - line) + 1;
        if (*s == '[') {
            if (e[-1] != ']') {
                rc = perr(&p, "a section header must end with ']'");
                break;
            }
            e[-1] = '\0';
            char *sec = s + 1, *se = e - 1;
            while (*sec == ' ' || *sec == '\t')
                sec++;
            while (se > sec && (se[-1] == ' ' || se[-1] == '\t'))
                *--se = '\0';
            if (!strcmp(sec, "data"))
                section = DATA;
            else if (!strcmp(sec, "model"))
                section = MODEL;
            else if (!strcmp(sec, "optimizer"))
                section = OPTIMIZER;
            else if (!strcmp(sec, "train"))
                section = TRAIN;
            else if (!strcmp(sec, "layer")) {
                if (c->model.n_layers == TFS_CONFIG_MAX_LAYERS) {
                    rc = perr(&p, "more than %d layers", TFS_CONFIG_MAX_LAYERS);
                    break;
                }
                p.layer_at[c->model.n_layers].line = p.line;
                c->layers[c->model.n_layers++] = tfs_layer_of(TFS_LAYER_DENSE);
                section = LAYER;
            } else {
                rc = perr(&p, "unknown section [%s] (data, model, layer, optimizer, train)", sec);
                break;
            }
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = perr(&p, "expected 'key = value' or '[section]'");
            break;
        }
        char *k = s, *v = eq + 1;
        char *ke = eq;
        while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t'))
            ke--;
        *ke = '\0';
        while (*v == ' ' || *v == '\t')
            v++;
        if (!*k) {
            rc = perr(&p, "a key is missing before '='");
            break;
        }
        p.key_col = (int)(k - line) + 1;
        p.col = (int)(v - line) + 1;
        if (!*v) {
            rc = perr(&p, "%s: the value is missing", k);
            break;
        }
        switch (section) {
        case DATA:      rc = set_data(&p, k, v); break;
        case MODEL:     rc = set_model(&p, k, v); break;
        case LAYER:     rc = set_layer(&p, k, v); break;
        case OPTIMIZER: rc = set_optimizer(&p, k, v); break;
        case TRAIN:     rc = set_train(&p, k, v); break;
        default:
            p.col = 1;
            rc = perr(&p, "'%s' comes before any [section]", k);
        }
    }
    tfs_free(line);
    if (rc == TFS_OK)
        rc = check(&p);
    tfs_free(p.layer_at);
    if (rc != TFS_OK) {
        tfs_train_config_free(c);
        return rc;
    }
    *out = c;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_train_config_load(const char *path, tfs_train_config **out, tfs_status *st)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return TFS_ERR(st, tfs_code_from_errno(errno), "%s: %s",
                       path, strerror(errno));
    char *buf = tfs_malloc(MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    enum tfs_code rc;
    if (!buf)
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading %s", path);
    else if (err)
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: read error", path);
    else if (n > MAX_FILE_BYTES)
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: larger than %zu bytes", path, MAX_FILE_BYTES);
    else
        rc = tfs_train_config_parse(path, buf, n, out, st);
    tfs_free(buf);
    return rc;
}

void tfs_train_config_free(tfs_train_config *c)
{
    if (!c)
        return;
    tfs_data_config *d = &c->data;
    tfs_free(d->train_features);
    tfs_free(d->train_labels);
    tfs_free(d->eval_features);
    tfs_free(d->eval_labels);
    tfs_free(d->label_column);
    for (int i = 0; i < d->n_feature_columns; i++)
        tfs_free(d->feature_columns[i]);
    for (int i = 0; i < c->n_strings; i++)
        tfs_free(c->strings[i]);
    tfs_free(c->path);
    tfs_free(c);
}
