/* The datasets a tfserve-train config describes (config.h tfs_train_config_datasets): files read
 * by format, features reshaped to the model's input shape and mapped to float (x * scale +
 * shift), labels to what the loss takes, then shuffled, batched and prefetched.
 */
#include "train/config.h"
#include "train/train.h"

#include <stdio.h>
#include <string.h>

/* Loads features and labels of one split into memory. */
static enum tfs_code load_split(const tfs_train_config *c, const char *features, const char *labels,
                                tfs_tensor **x, tfs_tensor **y, tfs_status *st)
{
    const tfs_data_config *d = &c->data;
    *x = *y = NULL;
    enum tfs_code rc;
    switch (d->format) {
    case TFS_DATA_IDX:
        rc = tfs_idx_read(features, x, st);
        if (rc == TFS_OK)
            rc = tfs_idx_read(labels, y, st);
        break;
    case TFS_DATA_NPY:
        rc = tfs_npy_read(features, x, st);
        if (rc == TFS_OK)
            rc = tfs_npy_read(labels, y, st);
        break;
    case TFS_DATA_CSV: {
        tfs_csv_opts o = tfs_csv_opts_default();
        o.label = d->label_column;
        o.features = d->n_feature_columns ? (const char *const *)d->feature_columns : NULL;
        o.n_features = d->n_feature_columns;
        o.label_dtype =
            c->model.loss == TFS_LOSS_SPARSE_SOFTMAX_XENT ? TFS_DTYPE_INT32 : TFS_DTYPE_FLOAT;
        rc = tfs_csv_read(features, &o, x, y, st);
        break;
    }
    case TFS_DATA_TFRECORD: {
        tfs_feature_spec spec[2];
        memset(spec, 0, sizeof spec);
        spec[0].name = "x";
        spec[0].dtype = TFS_DTYPE_FLOAT;
        spec[0].rank = c->model.input_rank;
        memcpy(spec[0].dims, c->model.input_shape, (size_t)c->model.input_rank * sizeof(int64_t));
        spec[1].name = "y";
        spec[1].dtype =
            c->model.loss == TFS_LOSS_SPARSE_SOFTMAX_XENT ? TFS_DTYPE_INT64 : TFS_DTYPE_FLOAT;
        const int64_t *ls = c->layers[c->model.n_layers - 1].units > 0
                                ? &c->layers[c->model.n_layers - 1].units
                                : NULL;
        if (spec[1].dtype == TFS_DTYPE_FLOAT && ls) {
            spec[1].rank = 1;
            spec[1].dims[0] = *ls;
        }
        tfs_tensor *out[2] = {NULL, NULL};
        rc = tfs_tfrecord_examples_read(&features, 1, spec, 2, out, st);
        *x = out[0];
        *y = out[1];
        break;
    }
    default:
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "unknown data format");
    }
    if (rc != TFS_OK) {
        tfs_tensor_unref(*x);
        tfs_tensor_unref(*y);
        *x = *y = NULL;
    }
    return rc;
}

/* Reshapes features [N, ...] to [N, input_shape...] (same element count per example). */
static enum tfs_code fit_input(const tfs_train_config *c, const char *path, tfs_tensor **x,
                               tfs_status *st)
{
    const tfs_model_spec *m = &c->model;
    tfs_tensor           *t = *x;
    int64_t               per = 1, want = 1;
    for (int a = 1; a < t->rank; a++)
        per *= t->dims[a];
    for (int a = 0; a < m->input_rank; a++)
        want *= m->input_shape[a];
    if (t->rank < 1 || per != want) {
        char got[128];
        tfs_shape_str(t->rank, t->dims, got, sizeof got);
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "%s: features %s have %lld values per example; "
                       "[model] input_shape has %lld",
                       path, got, (long long)per, (long long)want);
    }
    int64_t dims[TFS_MAX_RANK];
    dims[0] = t->dims[0];
    memcpy(dims + 1, m->input_shape, (size_t)m->input_rank * sizeof(int64_t));
    if (t->dtype == TFS_DTYPE_STRING)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: string features", path);
    tfs_tensor   *r = NULL;
    enum tfs_code rc = tfs_tensor_reshape(t, 1 + m->input_rank, dims, &r, st);
    if (rc != TFS_OK)
        return rc;
    tfs_tensor_unref(t);
    *x = r;
    return TFS_OK;
}

static enum tfs_code check_labels(const tfs_train_config *c, const char *path, const tfs_tensor *x,
                                  const tfs_tensor *y, tfs_status *st)
{
    if (y->rank < 1 || y->dims[0] != x->dims[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: %lld labels for %lld examples", path,
                       y->rank ? (long long)y->dims[0] : 0LL, (long long)x->dims[0]);
    if (c->model.loss != TFS_LOSS_SPARSE_SOFTMAX_XENT)
        return TFS_OK;
    int64_t classes = c->layers[c->model.n_layers - 1].units;
    for (int64_t i = 0; i < y->nelem; i++) {
        int64_t v;
        switch (y->dtype) {
        case TFS_DTYPE_UINT8:
            v = ((const uint8_t *)y->data)[i];
            break;
        case TFS_DTYPE_INT8:
            v = ((const int8_t *)y->data)[i];
            break;
        case TFS_DTYPE_INT32:
            v = ((const int32_t *)y->data)[i];
            break;
        case TFS_DTYPE_INT64:
            v = ((const int64_t *)y->data)[i];
            break;
        default:
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: class labels must be integers, got %s",
                           path, tfs_dtype_short_name(y->dtype));
        }
        if (v < 0 || v >= classes)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "%s: label %lld of example %lld is outside "
                           "[0, %lld) (the last layer has %lld units)",
                           path, (long long)v, (long long)i, (long long)classes,
                           (long long)classes);
    }
    return TFS_OK;
}

static enum tfs_code make(const tfs_train_config *c, const char *features, const char *labels,
                          bool training, tfs_dataset **out, tfs_status *st)
{
    tfs_tensor            *x = NULL, *y = NULL;
    const tfs_data_config *d = &c->data;
    enum tfs_code          rc = load_split(c, features, labels, &x, &y, st);
    if (rc == TFS_OK)
        rc = fit_input(c, features, &x, st);
    if (rc == TFS_OK)
        rc = check_labels(c, labels ? labels : features, x, y, st);
    if (rc == TFS_OK && c->model.loss != TFS_LOSS_SPARSE_SOFTMAX_XENT && y->rank == 1) {
        /* One target per example: the model's output is [N, 1]. */
        tfs_tensor *r = NULL;
        rc = tfs_tensor_reshape(y, 2, (int64_t[]){y->dims[0], 1}, &r, st);
        if (rc == TFS_OK) {
            tfs_tensor_unref(y);
            y = r;
        }
    }
    if (rc == TFS_OK) {
        tfs_dataset_opts o = tfs_dataset_opts_default();
        o.batch_size = training ? d->batch_size : d->eval_batch_size;
        o.seed = d->seed;
        o.shuffle_buffer = training ? (d->shuffle_buffer < 0 ? x->dims[0] : d->shuffle_buffer) : 0;
        o.epochs = training ? c->fit.epochs : 1;
        o.prefetch = d->prefetch;
        rc = tfs_dataset_from_tensors((const char *const[]){"x", "y"}, (tfs_tensor *const[]){x, y},
                                      2, &o, out, st);
    }
    if (rc == TFS_OK)
        rc = tfs_dataset_map(*out, "x", c->model.input_dtype,
                             c->model.input_dtype == TFS_DTYPE_FLOAT ? d->scale : 1.0,
                             c->model.input_dtype == TFS_DTYPE_FLOAT ? d->shift : 0.0, st);
    if (rc == TFS_OK)
        rc = tfs_dataset_map(*out, "y",
                             c->model.loss == TFS_LOSS_SPARSE_SOFTMAX_XENT ? TFS_DTYPE_INT32
                                                                           : TFS_DTYPE_FLOAT,
                             1.0, 0.0, st);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    if (rc != TFS_OK) {
        tfs_dataset_free(*out);
        *out = NULL;
    }
    return rc;
}

enum tfs_code tfs_train_config_datasets(const tfs_train_config *c, tfs_dataset **train,
                                        tfs_dataset **eval, tfs_status *st)
{
    *train = *eval = NULL;
    const tfs_data_config *d = &c->data;
    enum tfs_code          rc = make(c, d->train_features, d->train_labels, true, train, st);
    if (rc == TFS_OK && d->eval_features)
        rc = make(c, d->eval_features, d->eval_labels, false, eval, st);
    if (rc != TFS_OK) {
        tfs_dataset_free(*train);
        *train = NULL;
    }
    return rc;
}
