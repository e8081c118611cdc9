/* train/ config: the file `tfserve-train CONFIG` reads — an INI-style description of the data,
 * the model (one [layer] section per layer, in order), the optimizer and the training run.
 * Part of train/train.h; the format is documented in docs/trainer.md.
 *
 *     tfs_train_config *c;
 *     if (tfs_train_config_load("mlp.ini", &c, &st) != TFS_OK) fprintf(stderr, "%s\n", st.msg);
 *     // c->model, c->optimizer, c->fit, c->data ...
 *     tfs_train_config_free(c);
 *
 * Syntax: `[section]` headers; `key = value` lines; `#` or `;` start a comment (also after a
 * value); blank lines are ignored. Errors name the file, line and column: "mlp.ini:12:9: layer:
 * unknown activation 'rleu'". Unknown sections and keys are errors (a typo must not be ignored),
 * and so is a [layer] key that does not apply to the layer's type (`rate` on a dense layer) or a
 * [layer] without `type`. Keys may come in any order within their section.
 */
#ifndef TFS_TRAIN_CONFIG_H
#define TFS_TRAIN_CONFIG_H

#include "train/fit.h"
#include "train/model.h"

enum tfs_data_format {
    TFS_DATA_IDX = 0,     /* features and labels files in IDX (plain or .gz) */
    TFS_DATA_NPY,         /* features and labels .npy files */
    TFS_DATA_CSV,         /* a file per split; label column by name, others (or listed) features */
    TFS_DATA_TFRECORD,    /* TFRecord files of tf.Example; features "x" and "y" by spec */
    TFS_DATA_FORMAT_COUNT
};

#define TFS_CONFIG_MAX_LAYERS 64
#define TFS_CONFIG_MAX_COLUMNS 64

typedef struct tfs_data_config {
    enum tfs_data_format format;
    char   *train_features, *train_labels;   /* IDX, NPY: file paths; CSV, TFRECORD: train file */
    char   *eval_features, *eval_labels;     /* CSV/TFRECORD: eval_features is the eval file */
    char   *label_column;                    /* CSV */
    int     n_feature_columns;               /* CSV: 0 = every column but the label */
    char   *feature_columns[TFS_CONFIG_MAX_COLUMNS];
    double  scale, shift;                    /* features * scale + shift (default 1, 0) */
    int64_t shuffle_buffer;                  /* default: the whole training set */
    uint64_t seed;                           /* default 1 */
    int64_t batch_size;                      /* default 32 */
    int64_t eval_batch_size;                 /* default 1000 */
    int     prefetch;                        /* default 2 */
} tfs_data_config;

typedef struct tfs_train_config {
    char              *path;
    tfs_data_config    data;
    tfs_model_spec     model;                /* model.layers points into layers[] */
    tfs_layer_spec     layers[TFS_CONFIG_MAX_LAYERS];
    tfs_optimizer_spec optimizer;
    tfs_fit_opts       fit;                  /* its strings point into the config */
    char              *strings[16];          /* owned strings fit's fields point at */
    int                n_strings;
} tfs_train_config;

/* Reads and validates a config file. INVALID_ARGUMENT "path:line:col: ..." for syntax and
 * value errors, NOT_FOUND / PERMISSION_DENIED when it cannot be read. Caller owns *out. */
enum tfs_code tfs_train_config_load(const char *path, tfs_train_config **out, tfs_status *st);
/* Same from text in memory; `name` is used in messages. */
enum tfs_code tfs_train_config_parse(const char *name, const char *text, size_t len,
                                     tfs_train_config **out, tfs_status *st);
void tfs_train_config_free(tfs_train_config *c);

struct tfs_dataset;
/* Reads the configured files and makes the training dataset (shuffled with the data seed,
 * batch_size, fit.epochs epochs, prefetch) and, when eval files are set, the evaluation dataset
 * (eval_batch_size, one epoch, in order); *eval is NULL otherwise. Components "x" (features
 * reshaped to [N, input_shape...], float x * scale + shift, or int32 ids) and "y" (int32 classes
 * for sparse_softmax_cross_entropy, else float). INVALID_ARGUMENT naming the file for features
 * that do not fit input_shape, label counts that differ from the examples', class labels outside
 * [0, units of the last layer); the readers' errors otherwise. Caller owns both. */
enum tfs_code tfs_train_config_datasets(const tfs_train_config *c, struct tfs_dataset **train,
                                        struct tfs_dataset **eval, tfs_status *st);

#endif
