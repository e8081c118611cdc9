/* train/ fit: Estimator's train/evaluate/export loop over a model and datasets — epochs of
 * optimizer steps with a progress bar, evaluation after each epoch, TensorFlow checkpoints
 * every N steps or seconds (with exact resume), TensorBoard event files, warm start, learning
 * curves and a SavedModel export at the end. Part of train/train.h; built only from public API
 * (model.h, the datasets, savedmodel/), so users can copy and adapt it.
 *
 *     tfs_fit_opts o = tfs_fit_opts_default();
 *     o.epochs = 5;  o.checkpoint_dir = "/tmp/run/ckpt";  o.export_dir = "/tmp/run/export";
 *     tfs_fit_result r;
 *     if (tfs_train_fit(model, train_ds, eval_ds, &o, &r, &st) != TFS_OK) ...
 *     tfs_fit_result_free(&r);
 *
 * Datasets: train_ds yields batches of (features, labels) — components `feature` and `label`
 * by name — for opts.epochs epochs (its own epochs setting must be at least that); eval_ds (may
 * be NULL) one epoch per evaluation, rewound with tfs_dataset_seek each time.
 * Resume: with opts.resume and a checkpoint in checkpoint_dir, the model's variables, the
 * random ops' generator states, the training dataset's position and the curves so far are
 * restored, so the run continues exactly where the checkpoint was written: an interrupted run
 * and an uninterrupted one end with the same weights.
 */
#ifndef TFS_TRAIN_FIT_H
#define TFS_TRAIN_FIT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "train/model.h"

struct tfs_dataset;

typedef struct tfs_fit_opts {
    int64_t     epochs;                  /* default 1 */
    int64_t     max_steps;               /* stop after this global step (0: no limit) */
    const char *feature;                 /* component names; default "x" and "y" */
    const char *label;
    const char *checkpoint_dir;          /* NULL: no checkpoints */
    int64_t     checkpoint_every_steps;  /* 0: only at the end of each epoch */
    double      checkpoint_every_secs;   /* 0: off */
    int         keep_checkpoint_max;     /* default 5; 0 keeps all */
    bool        resume;                  /* continue from the latest checkpoint in checkpoint_dir */
    const char *warm_start;              /* checkpoint prefix or directory: weights to start from */
    const char *log_dir;                 /* TensorBoard event files; NULL: none */
    int64_t     log_every_steps;         /* scalars "loss", "learning_rate" (default 100) */
    bool        histograms;              /* weights and gradients after each epoch (default true) */
    const char *export_dir;              /* export base path: a new version folder at the end */
    const char *plot;                    /* learning curves (.svg) */
    FILE       *out;                     /* progress (default stdout); NULL output with quiet */
    bool        quiet;
    int         progress;                /* -1 auto (a bar on a terminal), 0 lines, 1 bar */
    /* A stop request, set from a signal handler (tfserve-train: SIGINT, SIGTERM); NULL: none.
     * When it becomes non-zero the run stops before its next step, saves a checkpoint where
     * checkpoint_dir is set (with the dataset's position: --resume goes on mid-epoch with the
     * batches it would have seen), flushes the event file, skips eval and export, and returns
     * TFS_CANCELLED "stopped at step N". */
    volatile sig_atomic_t *stop;
    /* Data-parallel runs (more than one rank in dist.h; the model built with data_parallel).
     * train_ds yields global batches (every rank the same ones, from the same seed): each rank
     * trains on its slice of each batch, the gradients are summed with one allreduce per
     * fusion bucket, weighted by each slice's share of the batch, and every rank applies the
     * same update. Rank 0's variables (after warm start or resume, which only rank 0 reads) are
     * broadcast first; only rank 0 writes checkpoints, event files, the plot and the export;
     * the figures are those of the whole global batch. eval_ds is sliced likewise. */
    int64_t fusion_threshold_bytes;   /* gradient bytes per allreduce; default 4 MiB */
    enum tfs_lr_scaling {
        TFS_LR_SCALING_NONE = 0,      /* the configured rate (default) */
        TFS_LR_SCALING_LINEAR,        /* the rate times the number of ranks (Goyal et al.) */
    } lr_scaling;
    /* LINEAR: the factor grows from 1 to the number of ranks over the first steps: the larger
     * of these steps and these epochs (in steps of the global batch); 0: none. */
    int64_t lr_scaling_warmup_steps;
    double  lr_scaling_warmup_epochs;
    double  collective_timeout_secs;  /* dist.h's watchdog; default 60 */
} tfs_fit_opts;

tfs_fit_opts tfs_fit_opts_default(void);

typedef struct tfs_fit_result {
    int64_t epochs;          /* epochs recorded below (including ones before a resume) */
    double *train_loss;      /* [epochs] mean training loss of each epoch */
    double *train_accuracy;  /* [epochs] NaN for regression */
    double *eval_loss;       /* [epochs] NaN without eval_ds */
    double *eval_accuracy;   /* [epochs] */
    double *seconds;         /* [epochs] wall time of each epoch's training steps */
    int64_t global_step;
    char   *export_path;     /* the version folder written, or NULL */
    char   *checkpoint;      /* the last checkpoint prefix written, or NULL */
} tfs_fit_result;

void tfs_fit_result_free(tfs_fit_result *r);

/* The result as a JSON object (train/fit-json.c): "epochs", "global_step", the per-epoch arrays
 * "seconds", "train_loss", "train_accuracy", "eval_loss", "eval_accuracy" (null where NaN), and
 * "export_path", "checkpoint" (null when NULL). *out is NUL-terminated (caller frees with
 * tfs_free), *len its length. RESOURCE_EXHAUSTED. */
enum tfs_code tfs_fit_result_json(const tfs_fit_result *r, char **out, size_t *len,
                                  tfs_status *st);
/* Writes that JSON to path: a temporary file beside it, renamed into place. Errors name the
 * file. */
enum tfs_code tfs_fit_result_write_json(const tfs_fit_result *r, const char *path,
                                        tfs_status *st);

/* Trains (see above). Errors: those of the datasets and the model (a NaN loss stops the run:
 * INVALID_ARGUMENT naming the step), of checkpoint and export writes (the previous checkpoint
 * stays intact), FAILED_PRECONDITION for resume without a checkpoint in the directory. On error
 * *res still holds the epochs completed. */
enum tfs_code tfs_train_fit(tfs_model *m, struct tfs_dataset *train_ds,
                            struct tfs_dataset *eval_ds, const tfs_fit_opts *opts,
                            tfs_fit_result *res, tfs_status *st);

/* Evaluates the model on one epoch of ds: mean loss and accuracy (NaN for regression). */
enum tfs_code tfs_train_evaluate(tfs_model *m, struct tfs_dataset *ds, const char *feature,
                                 const char *label, double *loss, double *accuracy,
                                 tfs_status *st);

/* Saves a checkpoint of every variable of m (plus the training state fit resumes from: the
 * dataset position when ds is not NULL) as <dir>/model.ckpt-<global step>. */
enum tfs_code tfs_train_save(tfs_model *m, const struct tfs_dataset *ds, const char *dir,
                             int keep_checkpoint_max, char **prefix_out, tfs_status *st);
/* Loads a checkpoint (a prefix, or a directory: its latest) into m: every variable of m must be
 * in it with the same dtype and shape (NOT_FOUND / INVALID_ARGUMENT naming it); with
 * weights_only, only model weights are read and missing ones are skipped (warm start). The
 * dataset position is restored into ds when given and present. */
enum tfs_code tfs_train_restore(tfs_model *m, struct tfs_dataset *ds, const char *path,
                                bool weights_only, int *n_restored, tfs_status *st);

#endif
