/* train/ models: a Keras-like description of a network (layers, loss, optimizer) turned into
 * TensorFlow graphs on tfserve's runtime — a training graph (forward in training mode, loss,
 * autodiff gradients, optimizer ops) and, from the same description, the inference graph that
 * export writes as a SavedModel. Part of train/train.h.
 *
 *     tfs_model_spec m = tfs_model_spec_default();
 *     m.input_rank = 1;  m.input_shape[0] = 784;  m.classes = 10;
 *     tfs_layer_spec layers[] = {tfs_layer_dense(512, TFS_ACT_RELU),
 *                                tfs_layer_dense(256, TFS_ACT_RELU),
 *                                tfs_layer_dense(10, TFS_ACT_NONE)};
 *     m.layers = layers;  m.n_layers = 3;
 *     tfs_optimizer_spec o = tfs_optimizer_spec_default();   // Adam 1e-3
 *     tfs_model *model;
 *     if (tfs_model_new(&m, &o, &model, &st) != TFS_OK) ...
 *     tfs_model_train_step(model, x, y, &loss, &correct, &st);   // one batch
 *
 * Names follow Keras/TF1 so checkpoints and exports read like TensorFlow's: variables
 * "dense/kernel", "dense/bias", "dense_1/kernel", "conv2d/kernel",
 * "batch_normalization/gamma", optimizer slots "dense/kernel/Adam", "dense/kernel/Adam_1",
 * "beta1_power", "global_step".
 * Thread affinity: a tfs_model is used by one thread at a time.
 */
#ifndef TFS_TRAIN_MODEL_H
#define TFS_TRAIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime.h"

/* ---- layers --------------------------------------------------------------------------------- */

enum tfs_layer_kind {
    TFS_LAYER_DENSE = 0,
    TFS_LAYER_CONV2D,
    TFS_LAYER_MAX_POOL2D,
    TFS_LAYER_AVG_POOL2D,
    TFS_LAYER_FLATTEN,
    TFS_LAYER_DROPOUT,
    TFS_LAYER_BATCH_NORM,
    TFS_LAYER_EMBEDDING,
    TFS_LAYER_ACTIVATION,
    TFS_LAYER_KIND_COUNT
};

enum tfs_activation {
    TFS_ACT_NONE = 0,
    TFS_ACT_RELU,
    TFS_ACT_RELU6,
    TFS_ACT_SIGMOID,
    TFS_ACT_TANH,
    TFS_ACT_SOFTMAX,
    TFS_ACT_ELU,
    TFS_ACT_SELU,
    TFS_ACT_LEAKY_RELU,
    TFS_ACT_SOFTPLUS,
    TFS_ACT_COUNT
};

enum tfs_init_kind {
    TFS_INIT_DEFAULT = 0,   /* the layer's Keras default (Glorot uniform kernels, zero biases) */
    TFS_INIT_ZEROS,
    TFS_INIT_ONES,
    TFS_INIT_CONSTANT,
    TFS_INIT_RANDOM_NORMAL,
    TFS_INIT_TRUNCATED_NORMAL,
    TFS_INIT_RANDOM_UNIFORM,
    TFS_INIT_GLOROT_UNIFORM,
    TFS_INIT_GLOROT_NORMAL,
    TFS_INIT_HE_NORMAL,
    TFS_INIT_HE_UNIFORM,
    TFS_INIT_COUNT
};

typedef struct tfs_init_spec {
    enum tfs_init_kind kind;
    double value;              /* CONSTANT */
    double mean, stddev;       /* RANDOM_NORMAL, TRUNCATED_NORMAL (defaults 0, 0.05) */
    double minval, maxval;     /* RANDOM_UNIFORM (defaults -0.05, 0.05) */
    int64_t seed;              /* op-level seed; 0: derived from the model seed */
} tfs_init_spec;

typedef struct tfs_layer_spec {
    enum tfs_layer_kind kind;
    char    name[64];          /* "" = Keras's default name ("dense", "dense_1", ...) */
    int64_t units;             /* DENSE units, CONV2D filters */
    int64_t kernel[2];         /* CONV2D kernel size; POOL window */
    int64_t strides[2];        /* CONV2D, POOL (0: 1 for conv, the window for pools) */
    bool    same_padding;      /* CONV2D, POOL: SAME (else VALID) */
    enum tfs_activation activation;   /* DENSE, CONV2D, ACTIVATION */
    double  alpha;             /* LEAKY_RELU slope (0.2 default, as Keras) */
    bool    no_bias;           /* DENSE, CONV2D */
    double  rate;              /* DROPOUT */
    double  momentum, epsilon; /* BATCH_NORM (0.99, 0.001 as Keras) */
    int64_t input_dim;         /* EMBEDDING vocabulary */
    tfs_init_spec kernel_init, bias_init;
    double  l2;                /* kernel regularizer: l2 * sum(kernel^2) added to the loss */
} tfs_layer_spec;

tfs_layer_spec tfs_layer_dense(int64_t units, enum tfs_activation act);
tfs_layer_spec tfs_layer_conv2d(int64_t filters, int64_t k, int64_t stride, bool same,
                                enum tfs_activation act);
tfs_layer_spec tfs_layer_pool2d(enum tfs_layer_kind kind, int64_t window, int64_t stride,
                                bool same);
tfs_layer_spec tfs_layer_of(enum tfs_layer_kind kind);   /* FLATTEN, BATCH_NORM, ... */

/* "relu" -> TFS_ACT_RELU; false when unknown. And the reverse. */
bool tfs_activation_parse(const char *name, enum tfs_activation *out);
const char *tfs_activation_name(enum tfs_activation a);
bool tfs_init_parse(const char *name, enum tfs_init_kind *out);

/* ---- losses and the model ------------------------------------------------------------------- */

enum tfs_loss {
    TFS_LOSS_SPARSE_SOFTMAX_XENT = 0,   /* labels int32 [batch], logits [batch, classes] */
    TFS_LOSS_SOFTMAX_XENT,              /* labels float [batch, classes] (one-hot or soft) */
    TFS_LOSS_SIGMOID_XENT,              /* labels float like the logits (multi-label / binary) */
    TFS_LOSS_MSE,                       /* labels float like the output (regression) */
    TFS_LOSS_COUNT
};

bool tfs_loss_parse(const char *name, enum tfs_loss *out);
const char *tfs_loss_name(enum tfs_loss l);

typedef struct tfs_model_spec {
    int            input_rank;               /* per example, without the batch dimension */
    int64_t        input_shape[TFS_MAX_RANK - 1];
    enum tfs_dtype input_dtype;              /* FLOAT, or INT32 ids for an EMBEDDING first layer */
    int            n_layers;
    const tfs_layer_spec *layers;            /* borrowed until tfs_model_new returns */
    enum tfs_loss  loss;
    int64_t        seed;                     /* graph-level seed (tf.random.set_seed); 0: 1 */
    /* tf.compat.v1.add_check_numerics_ops: a CheckNumerics after every floating-point tensor of
     * the training step, so a NaN/Inf stops the step naming the first op that produced it. */
    bool           check_numerics;
    /* Data-parallel training (fit under MPI): the step is built as two runs around the
     * gradients' allreduce, tfs_model_compute_gradients and tfs_model_apply_gradients, in place
     * of tfs_model_train_step (which then fails). */
    bool           data_parallel;
} tfs_model_spec;

tfs_model_spec tfs_model_spec_default(void);

/* ---- optimizers ----------------------------------------------------------------------------- */

enum tfs_optimizer_kind {
    TFS_OPT_SGD = 0,     /* ApplyGradientDescent */
    TFS_OPT_MOMENTUM,    /* ApplyMomentum (nesterov optional) */
    TFS_OPT_ADAM,        /* ApplyAdam, TF1's AdamOptimizer (beta powers as variables) */
    TFS_OPT_RMSPROP,     /* ApplyRMSProp / ApplyCenteredRMSProp */
    TFS_OPT_ADAGRAD,     /* ApplyAdagradV2 */
    TFS_OPT_COUNT
};

enum tfs_lr_schedule {
    TFS_LR_CONSTANT = 0,
    TFS_LR_EXPONENTIAL,   /* lr * rate^(step / decay_steps), floored when staircase */
    TFS_LR_PIECEWISE,     /* values[i] while step <= boundaries[i] (tf.train.piecewise_constant) */
    TFS_LR_COSINE,        /* tf.compat.v1.train.cosine_decay(lr, step, decay_steps, alpha) */
    TFS_LR_COUNT
};

#define TFS_LR_MAX_PIECES 16

typedef struct tfs_optimizer_spec {
    enum tfs_optimizer_kind kind;
    double learning_rate;
    double momentum;        /* MOMENTUM, RMSPROP (0 in the default spec: set it, e.g. 0.9; the
                             * config file's default for name = momentum is 0.9) */
    bool   nesterov;        /* MOMENTUM, ADAM (ApplyAdam use_nesterov) */
    double beta1, beta2;    /* ADAM (0.9, 0.999) */
    double epsilon;         /* ADAM (1e-7, Keras's), RMSPROP (1e-7), ADAGRAD (1e-7) */
    double rho;             /* RMSPROP decay (0.9) */
    bool   centered;        /* RMSPROP */
    double initial_accumulator;   /* ADAGRAD (0.1) */
    /* learning-rate schedule, evaluated on the host each step from global_step */
    enum tfs_lr_schedule schedule;
    int64_t decay_steps;
    double  decay_rate;
    bool    staircase;
    double  alpha;          /* COSINE: the final fraction of lr */
    int     n_pieces;       /* PIECEWISE: n_pieces boundaries, n_pieces + 1 values */
    int64_t boundaries[TFS_LR_MAX_PIECES];
    double  values[TFS_LR_MAX_PIECES + 1];
    int64_t warmup_steps;   /* linear warm-up from 0 over the first steps (then the schedule) */
    /* gradient clipping (0: off) */
    double clip_value;      /* each element to [-v, v] */
    double clip_norm;       /* each gradient tensor to L2 norm <= n (tf.clip_by_norm) */
    double clip_global_norm;   /* all gradients together (tf.clip_by_global_norm) */
} tfs_optimizer_spec;

tfs_optimizer_spec tfs_optimizer_spec_default(void);   /* Adam, 1e-3, Keras's defaults */
bool tfs_optimizer_parse(const char *name, enum tfs_optimizer_kind *out);
const char *tfs_optimizer_name(enum tfs_optimizer_kind k);
/* The learning rate the schedule gives at a global step. */
double tfs_optimizer_learning_rate(const tfs_optimizer_spec *o, int64_t step);

/* ---- the model ------------------------------------------------------------------------------ */

typedef struct tfs_model tfs_model;

/* Builds the training graph and a session over it, and initializes every variable (seeded).
 * INVALID_ARGUMENT naming the layer for shapes or settings that cannot work (a conv on a rank-1
 * input, a dense layer after a conv without flatten, a loss that does not fit the output).
 * Caller owns *out. */
enum tfs_code tfs_model_new(const tfs_model_spec *spec, const tfs_optimizer_spec *opt,
                            tfs_model **out, tfs_status *st);
void tfs_model_free(tfs_model *m);

/* One optimizer step on a batch: x [B, input...] (input_dtype), y labels as the loss needs them.
 * *loss gets the batch's mean loss (regularization included); *correct (may be NULL) the number
 * of examples whose argmax matches the label (classification losses; 0 otherwise). A NaN or
 * infinite loss is INVALID_ARGUMENT "step N: loss is nan" (the step's update has been applied,
 * as in TensorFlow; the caller stops). With check_numerics, the step fails before any update
 * naming the first op whose output held a NaN or Inf. */
enum tfs_code tfs_model_train_step(tfs_model *m, tfs_tensor *x, tfs_tensor *y, double *loss,
                                   int64_t *correct, tfs_status *st);
/* The two halves of a data-parallel step (spec.data_parallel). compute_gradients: the forward
 * and backward pass on a batch (and the BatchNorm updates), no optimizer update: grads[i]
 * (tfs_model_variable_count entries; caller owns each) is the float gradient of variable i, NULL
 * for variables without one; *loss and *correct as tfs_model_train_step. apply_gradients: the
 * optimizer update with the given gradients (borrowed; same indexing, shapes as the
 * variables') at the schedule's learning rate times lr_scale; it advances the global step.
 * ready (may be NULL) is called with each gradient (borrowed for the call) as soon as the
 * backward pass has computed it, while the run goes on, so the caller can start sending it, and
 * with var -1 and grad NULL after every op of the run in between (to move what it sent along);
 * on a GPU plan it is not called and the caller takes grads[] when the run is over.
 * FAILED_PRECONDITION for a model not built for them. */
typedef void (*tfs_model_gradient_fn)(int var, const tfs_tensor *grad, void *arg);
enum tfs_code tfs_model_compute_gradients(tfs_model *m, tfs_tensor *x, tfs_tensor *y,
                                          tfs_model_gradient_fn ready, void *arg,
                                          tfs_tensor **grads, double *loss, int64_t *correct,
                                          tfs_status *st);
enum tfs_code tfs_model_apply_gradients(tfs_model *m, tfs_tensor *const *grads, double lr_scale,
                                        tfs_status *st);
/* Inference-mode forward on a batch: *loss (sum over the batch, not the mean) and *correct. */
enum tfs_code tfs_model_eval_batch(tfs_model *m, tfs_tensor *x, tfs_tensor *y, double *loss_sum,
                                   int64_t *correct, tfs_status *st);
/* Inference-mode outputs (probabilities for classifiers, the output for regression). */
enum tfs_code tfs_model_predict(tfs_model *m, tfs_tensor *x, tfs_tensor **out, tfs_status *st);

/* What accuracy counts in a batch with labels y: examples for class labels, label elements for
 * sigmoid outputs, 0 for regression (no accuracy). The correct counts above are out of this. */
int64_t tfs_model_accuracy_units(const tfs_model *m, const tfs_tensor *y);

int64_t tfs_model_global_step(const tfs_model *m);
/* The learning rate the next step will use. */
double tfs_model_learning_rate(const tfs_model *m);
/* Every variable of the training graph (model weights, optimizer slots, global_step) by name,
 * as the checkpoint holds them: n names (borrowed, valid while m lives). */
int         tfs_model_variable_count(const tfs_model *m);
const char *tfs_model_variable_name(const tfs_model *m, int i);
/* True for the model's weights (what export writes), false for optimizer state. */
bool        tfs_model_variable_is_weight(const tfs_model *m, int i);
/* Current value (new reference, caller owns). */
enum tfs_code tfs_model_variable_value(tfs_model *m, int i, tfs_tensor **out, tfs_status *st);
/* Sets a variable (dtype and shape must match: INVALID_ARGUMENT naming it otherwise). */
enum tfs_code tfs_model_variable_assign(tfs_model *m, int i, tfs_tensor *value, tfs_status *st);
/* The loss's gradient for trainable weight i on a batch (no update is made, and the random ops'
 * generators are left where they were, so training draws the same dropout masks with or without
 * these calls): NOT_FOUND for a variable without one (optimizer state, moving statistics). For
 * TensorBoard histograms. */
enum tfs_code tfs_model_gradient(tfs_model *m, int i, tfs_tensor *x, tfs_tensor *y,
                                 tfs_tensor **out, tfs_status *st);
/* True for the variables a data-parallel step has a gradient for (the trainable weights). */
bool        tfs_model_variable_has_gradient(const tfs_model *m, int i);
/* The index of a variable by name, -1 when absent. */
int         tfs_model_variable_find(const tfs_model *m, const char *name);

/* The random ops' generator positions (dropout masks, initializers) as an int64 [n, 3] tensor
 * (caller owns; *out NULL when the graph has none), and setting them back into a model built
 * from the same spec: a resumed run then draws the numbers an uninterrupted one would.
 * INVALID_ARGUMENT when the tensor does not fit the model. */
enum tfs_code tfs_model_rng_state(tfs_model *m, tfs_tensor **out, tfs_status *st);
enum tfs_code tfs_model_set_rng_state(tfs_model *m, const tfs_tensor *state, tfs_status *st);

/* The training graph (for TensorBoard). Borrowed. */
const tfs_graph *tfs_model_graph(const tfs_model *m);

/* Writes the inference graph with the current weights as a SavedModel into `dir` (which must
 * not exist): signature serving_default (predict: "x" -> "probabilities" and "classes" for
 * classifiers, "predictions" for regression), and for classifiers "classify" (serialized
 * tf.Example with feature "x" -> classes, scores). */
enum tfs_code tfs_model_export(tfs_model *m, const char *dir, tfs_status *st);

#endif
