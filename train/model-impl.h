/* Internals of train/'s model building shared by layers.c, model.c, optimizer.c and export.c.
 * Include only from train/ (and tests).
 */
#ifndef TFS_TRAIN_MODEL_IMPL_H
#define TFS_TRAIN_MODEL_IMPL_H

#include "train/model.h"

/* One layer of a model being built: its resolved name, its static shapes (per example, without
 * the batch dimension) and its variables in the graph. */
typedef struct tfs_layer {
    const tfs_layer_spec *spec;
    char    name[96];                 /* "dense", "dense_1", "conv2d", ... */
    int     in_rank, out_rank;
    int64_t in_shape[TFS_MAX_RANK], out_shape[TFS_MAX_RANK];
    tfs_out kernel, bias;             /* DENSE, CONV2D; EMBEDDING: kernel = embeddings */
    tfs_out gamma, beta, moving_mean, moving_var;   /* BATCH_NORM */
    tfs_out kernel_read, bias_read, gamma_read, beta_read, mean_read, var_read;
} tfs_layer;

/* A variable the builder made, with its initial-value expression. */
typedef struct tfs_model_var {
    tfs_out var;          /* VariableV2 output (reference) */
    tfs_out init;         /* the Assign that initializes it */
    bool    weight;       /* a model weight (exported), not optimizer state */
    bool    trainable;    /* gets a gradient (weights but the moving statistics) */
} tfs_model_var;

/* The variable registry and seed counter used while building. */
typedef struct tfs_build_ctx {
    tfs_graph     *g;
    int64_t        seed;        /* graph-level seed */
    int64_t        op_seed;     /* next derived op seed */
    bool           no_init;     /* variables without initializers (export graphs) */
    tfs_model_var *vars;
    int            n_vars, cap_vars;
    tfs_out       *updates;     /* ops the train step also runs (BatchNorm moving averages) */
    int            n_updates, cap_updates;
    tfs_out       *reg;         /* regularization loss terms (scalars) */
    int            n_reg, cap_reg;
} tfs_build_ctx;

void tfs__build_ctx_free(tfs_build_ctx *b);

/* Resolves names and static shapes of every layer (INVALID_ARGUMENT naming a layer that cannot
 * take its input), without touching a graph. layers[] has spec->n_layers entries. */
enum tfs_code tfs__layers_plan(const tfs_model_spec *spec, tfs_layer *layers, tfs_status *st);
/* Creates every layer's variables and their initializers in b->g. */
enum tfs_code tfs__layers_create_variables(tfs_build_ctx *b, const tfs_model_spec *spec,
                                           tfs_layer *layers, tfs_status *st);
/* The forward pass from x [B, input...]; training selects dropout and batch statistics (and
 * records BatchNorm's moving-average updates in b->updates). *logits receives the last layer's
 * pre-activation when that activation is softmax or sigmoid (else the output itself). */
tfs_out tfs__layers_forward(tfs_build_ctx *b, const tfs_model_spec *spec, tfs_layer *layers,
                            tfs_out x, bool training, tfs_out *logits);

/* A VariableV2 registered in b with an Assign from init_value. */
tfs_out tfs__model_variable(tfs_build_ctx *b, const char *name, const int64_t *dims, int rank,
                            enum tfs_dtype dt, tfs_out init_value, bool weight, bool trainable);
/* The TF1-style read of a variable: Identity "<name>/read". */
tfs_out tfs__model_read(tfs_graph *g, tfs_out var);
/* Appends to a growable tfs_out array (sticky graph error on OOM). */
void tfs__outs_push(tfs_graph *g, tfs_out **v, int *n, int *cap, tfs_out o);

/* The model's spec as tfs_model_new copied it (layers included). */
const tfs_model_spec *tfs__model_spec(const tfs_model *m);

/* Builds the optimizer update for the trainable variables with their gradients: returns the
 * ops to group into the train step (applies, slot updates, global_step increment), each
 * ordered after `barrier`. lr is the learning-rate placeholder. */
enum tfs_code tfs__optimizer_build(tfs_build_ctx *b, const tfs_optimizer_spec *o,
                                   const tfs_out *vars, tfs_out *grads, int n, tfs_out lr,
                                   tfs_out barrier, tfs_out global_step, tfs_out **ops, int *n_ops,
                                   tfs_status *st);

#endif
