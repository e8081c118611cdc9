/* The tfserve-train config file (train/config.c): every section and key read into the model,
 * optimizer, fit and data settings; the defaults of a minimal file; keys in any order; the
 * errors, each with its file:line:col (syntax, unknown sections and keys, bad numbers, bad enum
 * values, missing required keys, NUL bytes, values that do not match boundaries, keys that do not
 * apply to a layer's type); reading from a file; and every allocation of a parse failing in turn.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/config.h"

Suite *suite_train_config(void);

static tfs_train_config *parse_ok(const char *text)
{
    tfs_train_config *c = NULL;
    tfs_status st;
    enum tfs_code rc = tfs_train_config_parse("t.ini", text, strlen(text), &c, &st);
    ck_assert_msg(rc == TFS_OK, "%s: %s", tfs_code_name(rc), st.msg);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* The parse fails with INVALID_ARGUMENT, a message starting with `where` ("t.ini:3:9: ") and
 * holding `what`. */
static void parse_err_len(const char *text, size_t len, const char *where, const char *what)
{
    tfs_train_config *c = (tfs_train_config *)1;
    tfs_status st;
    enum tfs_code rc = tfs_train_config_parse("t.ini", text, len, &c, &st);
    ck_assert_msg(rc == TFS_INVALID_ARGUMENT, "%s: got %s (%s)", text, tfs_code_name(rc),
                  rc == TFS_OK ? "" : st.msg);
    ck_assert_ptr_null(c);
    ck_assert_msg(strncmp(st.msg, where, strlen(where)) == 0, "%s\n -> '%s', want it at '%s'", text,
                  st.msg, where);
    ck_assert_msg(strstr(st.msg, what) != NULL, "%s\n -> '%s', want '%s'", text, st.msg, what);
}

static void parse_err(const char *text, const char *where, const char *what)
{
    parse_err_len(text, strlen(text), where, what);
}

/* A valid file of 8 lines; the error cases append from line 9 on. */
#define BASE "[data]\ntrain_features = a\ntrain_labels = b\n[model]\ninput_shape = 4\n" \
             "[layer]\ntype = dense\nunits = 3\n"

/* Every key of every section, with values that differ from the defaults. */
static const char FULL[] =
    "# a comment line\n"
    "; another\n"
    "[data]\n"
    "format = csv\n"
    "train_file = /d/train.csv   # trailing comment\n"
    "train_labels = /d/train-labels\n"
    "eval_file = /d/eval.csv\n"
    "eval_labels = /d/eval-labels\n"
    "label_column = price\n"
    "feature_columns = a, b ,c\n"
    "scale = 0.5\n"
    "shift = -1.25\n"
    "shuffle_buffer = 100\n"
    "seed = 9\n"
    "batch_size = 16\n"
    "eval_batch_size = 250\n"
    "prefetch = 3\n"
    "\n"
    "  [ model ]  \n"
    "input_shape = 8, 8, 2\n"
    "input_dtype = float32\n"
    "loss = softmax_cross_entropy\n"
    "seed = 42\n"
    "check_numerics = yes\n"
    "[layer]\n"
    "name = c1\n"
    "filters = 8\n"            /* before type: the order does not matter */
    "type = conv2d\n"
    "kernel_size = 3, 5\n"
    "strides = 2\n"
    "padding = same\n"
    "activation = leaky_relu\n"
    "alpha = 0.3\n"
    "use_bias = false\n"
    "kernel_initializer = he_normal\n"
    "bias_initializer = ones\n"
    "l2 = 0.01\n"
    "[layer]\n"
    "type = max_pool2d\n"
    "pool_size = 2\n"
    "strides = 1, 2\n"
    "padding = valid\n"
    "[layer]\n"
    "type = avg_pool2d\n"
    "pool_size = 3\n"
    "[layer]\n"
    "type = batch_norm\n"
    "momentum = 0.9\n"
    "epsilon = 0.01\n"
    "[layer]\n"
    "type = flatten\n"
    "[layer]\n"
    "type = dropout\n"
    "rate = 0.25\n"
    "[layer]\n"
    "type = activation\n"
    "activation = tanh\n"
    "[layer]\n"
    "type = dense\n"
    "units = 10\n"
    "activation = softmax\n"
    "\t[optimizer]\r\n"
    "name = rmsprop\r\n"
    "learning_rate = 0.05\n"
    "momentum = 0.5\n"
    "nesterov = true\n"
    "beta1 = 0.8\n"
    "beta2 = 0.99\n"
    "epsilon = 1e-5\n"
    "rho = 0.95\n"
    "centered = 1\n"
    "initial_accumulator = 0.2\n"
    "schedule = piecewise\n"
    "values = 0.1, 0.01, 0.001\n"   /* before boundaries: the order does not matter */
    "boundaries = 100, 200\n"
    "decay_steps = 1000\n"
    "decay_rate = 0.96\n"
    "staircase = true\n"
    "alpha = 0.05\n"
    "warmup_steps = 10\n"
    "clip_value = 5\n"
    "clip_norm = 2.5\n"
    "clip_global_norm = 1.5\n"
    "[train]\n"
    "epochs = 7\n"
    "max_steps = 1000\n"
    "checkpoint_every_steps = 50\n"
    "checkpoint_every_secs = 30.5\n"
    "keep_checkpoint_max = 2\n"
    "log_every_steps = 20\n"
    "histograms = no\n"
    "checkpoint_dir = /r/ckpt\n"
    "warm_start = /r/other\n"
    "log_dir = /r/logs\n"
    "export_dir = /r/export\n"
    "plot = /r/curves.svg\n"
    "fusion_threshold_bytes = 1048576\n"
    "lr_scaling = linear\n"
    "lr_scaling_warmup_steps = 100\n"
    "lr_scaling_warmup_epochs = 2.5\n"
    "collective_timeout_secs = 30\n";

START_TEST(test_config_every_key)
{
    tfs_train_config *c = parse_ok(FULL);
    ck_assert_str_eq(c->path, "t.ini");
    const tfs_data_config *d = &c->data;
    ck_assert_int_eq(d->format, TFS_DATA_CSV);
    ck_assert_str_eq(d->train_features, "/d/train.csv");
    ck_assert_str_eq(d->train_labels, "/d/train-labels");
    ck_assert_str_eq(d->eval_features, "/d/eval.csv");
    ck_assert_str_eq(d->eval_labels, "/d/eval-labels");
    ck_assert_str_eq(d->label_column, "price");
    ck_assert_int_eq(d->n_feature_columns, 3);
    ck_assert_str_eq(d->feature_columns[0], "a");
    ck_assert_str_eq(d->feature_columns[1], "b");
    ck_assert_str_eq(d->feature_columns[2], "c");
    ck_assert(d->scale == 0.5 && d->shift == -1.25);
    ck_assert_int_eq(d->shuffle_buffer, 100);
    ck_assert_uint_eq(d->seed, 9);
    ck_assert_int_eq(d->batch_size, 16);
    ck_assert_int_eq(d->eval_batch_size, 250);
    ck_assert_int_eq(d->prefetch, 3);

    const tfs_model_spec *m = &c->model;
    ck_assert_int_eq(m->input_rank, 3);
    ck_assert(m->input_shape[0] == 8 && m->input_shape[1] == 8 && m->input_shape[2] == 2);
    ck_assert_int_eq(m->input_dtype, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(m->loss, TFS_LOSS_SOFTMAX_XENT);
    ck_assert_int_eq(m->seed, 42);
    ck_assert(m->check_numerics);
    ck_assert_int_eq(m->n_layers, 8);
    ck_assert_ptr_eq(m->layers, c->layers);

    const tfs_layer_spec *l = c->layers;
    ck_assert_int_eq(l[0].kind, TFS_LAYER_CONV2D);
    ck_assert_str_eq(l[0].name, "c1");
    ck_assert_int_eq(l[0].units, 8);
    ck_assert(l[0].kernel[0] == 3 && l[0].kernel[1] == 5);
    ck_assert(l[0].strides[0] == 2 && l[0].strides[1] == 2);   /* one value: both axes */
    ck_assert(l[0].same_padding);
    ck_assert_int_eq(l[0].activation, TFS_ACT_LEAKY_RELU);
    ck_assert(l[0].alpha == 0.3);
    ck_assert(l[0].no_bias);
    ck_assert_int_eq(l[0].kernel_init.kind, TFS_INIT_HE_NORMAL);
    ck_assert_int_eq(l[0].bias_init.kind, TFS_INIT_ONES);
    ck_assert(l[0].l2 == 0.01);
    ck_assert_int_eq(l[1].kind, TFS_LAYER_MAX_POOL2D);
    ck_assert(l[1].kernel[0] == 2 && l[1].kernel[1] == 2);
    ck_assert(l[1].strides[0] == 1 && l[1].strides[1] == 2);
    ck_assert(!l[1].same_padding);
    ck_assert_str_eq(l[1].name, "");
    ck_assert_int_eq(l[2].kind, TFS_LAYER_AVG_POOL2D);
    ck_assert(l[2].kernel[0] == 3 && l[2].strides[0] == 0);   /* 0: the window */
    ck_assert_int_eq(l[3].kind, TFS_LAYER_BATCH_NORM);
    ck_assert(l[3].momentum == 0.9 && l[3].epsilon == 0.01);
    ck_assert_int_eq(l[4].kind, TFS_LAYER_FLATTEN);
    ck_assert_int_eq(l[5].kind, TFS_LAYER_DROPOUT);
    ck_assert(l[5].rate == 0.25);
    ck_assert_int_eq(l[6].kind, TFS_LAYER_ACTIVATION);
    ck_assert_int_eq(l[6].activation, TFS_ACT_TANH);
    ck_assert_int_eq(l[7].kind, TFS_LAYER_DENSE);
    ck_assert_int_eq(l[7].units, 10);
    ck_assert_int_eq(l[7].activation, TFS_ACT_SOFTMAX);
    ck_assert(!l[7].no_bias);

    const tfs_optimizer_spec *o = &c->optimizer;
    ck_assert_int_eq(o->kind, TFS_OPT_RMSPROP);
    ck_assert(o->learning_rate == 0.05 && o->momentum == 0.5 && o->nesterov);
    ck_assert(o->beta1 == 0.8 && o->beta2 == 0.99 && o->epsilon == 1e-5 && o->rho == 0.95);
    ck_assert(o->centered && o->initial_accumulator == 0.2);
    ck_assert_int_eq(o->schedule, TFS_LR_PIECEWISE);
    ck_assert_int_eq(o->n_pieces, 2);
    ck_assert(o->boundaries[0] == 100 && o->boundaries[1] == 200);
    ck_assert(o->values[0] == 0.1 && o->values[1] == 0.01 && o->values[2] == 0.001);
    ck_assert(o->decay_steps == 1000 && o->decay_rate == 0.96 && o->staircase);
    ck_assert(o->alpha == 0.05 && o->warmup_steps == 10);
    ck_assert(o->clip_value == 5 && o->clip_norm == 2.5 && o->clip_global_norm == 1.5);

    const tfs_fit_opts *f = &c->fit;
    ck_assert_int_eq(f->epochs, 7);
    ck_assert_int_eq(f->max_steps, 1000);
    ck_assert_int_eq(f->checkpoint_every_steps, 50);
    ck_assert(f->checkpoint_every_secs == 30.5);
    ck_assert_int_eq(f->keep_checkpoint_max, 2);
    ck_assert_int_eq(f->log_every_steps, 20);
    ck_assert(!f->histograms);
    ck_assert_str_eq(f->checkpoint_dir, "/r/ckpt");
    ck_assert_str_eq(f->warm_start, "/r/other");
    ck_assert_str_eq(f->log_dir, "/r/logs");
    ck_assert_str_eq(f->export_dir, "/r/export");
    ck_assert_str_eq(f->plot, "/r/curves.svg");
    ck_assert_int_eq(f->fusion_threshold_bytes, 1048576);
    ck_assert_int_eq(f->lr_scaling, TFS_LR_SCALING_LINEAR);
    ck_assert_int_eq(f->lr_scaling_warmup_steps, 100);
    ck_assert(f->lr_scaling_warmup_epochs == 2.5 && f->collective_timeout_secs == 30);
    ck_assert_str_eq(f->feature, "x");
    ck_assert_str_eq(f->label, "y");
    tfs_train_config_free(c);

    /* The other enum spellings, and an embedding on int32 ids. */
    c = parse_ok("[data]\nformat = npy\ntrain_features = x.npy\ntrain_labels = y.npy\n"
                 "[model]\ninput_shape = 5\ninput_dtype = int32\nloss = mse\n"
                 "[layer]\ntype = embedding\ninput_dim = 100\noutput_dim = 8\n"
                 "kernel_initializer = random_uniform\n"
                 "[layer]\ntype = flatten\n[layer]\ntype = dense\nunits = 1\nactivation = linear\n"
                 "kernel_initializer = glorot_uniform\nbias_initializer = constant\n"
                 "[optimizer]\nname = momentum\nschedule = cosine\ndecay_steps = 10\n");
    ck_assert_int_eq(c->data.format, TFS_DATA_NPY);
    ck_assert_int_eq(c->model.input_dtype, TFS_DTYPE_INT32);
    ck_assert_int_eq(c->model.loss, TFS_LOSS_MSE);
    ck_assert_int_eq(c->layers[0].kind, TFS_LAYER_EMBEDDING);
    ck_assert_int_eq(c->layers[0].input_dim, 100);
    ck_assert_int_eq(c->layers[0].units, 8);
    ck_assert_int_eq(c->layers[0].kernel_init.kind, TFS_INIT_RANDOM_UNIFORM);
    ck_assert_int_eq(c->layers[2].activation, TFS_ACT_NONE);
    ck_assert_int_eq(c->layers[2].kernel_init.kind, TFS_INIT_GLOROT_UNIFORM);
    ck_assert_int_eq(c->layers[2].bias_init.kind, TFS_INIT_CONSTANT);
    ck_assert_int_eq(c->optimizer.kind, TFS_OPT_MOMENTUM);
    ck_assert(c->optimizer.momentum == 0.9);   /* the default for name = momentum */
    ck_assert_int_eq(c->optimizer.schedule, TFS_LR_COSINE);
    tfs_train_config_free(c);

    /* Every activation, loss, optimizer and initializer name parses to its own value. */
    static const char *const ACTS[] = {"linear", "relu", "relu6", "sigmoid", "tanh", "softmax",
                                       "elu", "selu", "leaky_relu", "softplus"};
    for (int i = 0; i < TFS_ACT_COUNT; i++) {
        enum tfs_activation a;
        ck_assert(tfs_activation_parse(ACTS[i], &a) && (int)a == i);
        ck_assert_str_eq(tfs_activation_name(a), ACTS[i]);
    }
    static const char *const LOSSES[] = {"sparse_softmax_cross_entropy", "softmax_cross_entropy",
                                         "sigmoid_cross_entropy", "mean_squared_error"};
    for (int i = 0; i < TFS_LOSS_COUNT; i++) {
        enum tfs_loss a;
        ck_assert(tfs_loss_parse(LOSSES[i], &a) && (int)a == i);
        ck_assert_str_eq(tfs_loss_name(a), LOSSES[i]);
    }
    static const char *const OPTS[] = {"sgd", "momentum", "adam", "rmsprop", "adagrad"};
    for (int i = 0; i < TFS_OPT_COUNT; i++) {
        enum tfs_optimizer_kind a;
        ck_assert(tfs_optimizer_parse(OPTS[i], &a) && (int)a == i);
        ck_assert_str_eq(tfs_optimizer_name(a), OPTS[i]);
    }
    static const char *const INITS[] = {"default", "zeros", "ones", "constant", "random_normal",
                                        "truncated_normal", "random_uniform", "glorot_uniform",
                                        "glorot_normal", "he_normal", "he_uniform"};
    for (int i = 0; i < TFS_INIT_COUNT; i++) {
        enum tfs_init_kind a;
        ck_assert(tfs_init_parse(INITS[i], &a) && (int)a == i);
    }
}
END_TEST

/* A minimal file: everything else has its documented default. */
START_TEST(test_config_defaults)
{
    tfs_train_config *c = parse_ok(BASE);
    const tfs_data_config *d = &c->data;
    ck_assert_int_eq(d->format, TFS_DATA_IDX);
    ck_assert_ptr_null(d->eval_features);
    ck_assert_ptr_null(d->eval_labels);
    ck_assert_ptr_null(d->label_column);
    ck_assert_int_eq(d->n_feature_columns, 0);
    ck_assert(d->scale == 1.0 && d->shift == 0.0);
    ck_assert_int_eq(d->shuffle_buffer, -1);
    ck_assert_uint_eq(d->seed, 1);
    ck_assert_int_eq(d->batch_size, 32);
    ck_assert_int_eq(d->eval_batch_size, 1000);
    ck_assert_int_eq(d->prefetch, 2);
    ck_assert_int_eq(c->model.input_dtype, TFS_DTYPE_FLOAT);
    ck_assert_int_eq(c->model.loss, TFS_LOSS_SPARSE_SOFTMAX_XENT);
    ck_assert_int_eq(c->model.seed, 1);
    ck_assert(!c->model.check_numerics);
    ck_assert_int_eq(c->model.n_layers, 1);
    const tfs_layer_spec *l = &c->layers[0];
    ck_assert_int_eq(l->activation, TFS_ACT_NONE);
    ck_assert(l->momentum == 0.99 && l->epsilon == 0.001 && l->alpha == 0.2);
    ck_assert(!l->no_bias && l->rate == 0 && l->l2 == 0);
    ck_assert_int_eq(l->kernel_init.kind, TFS_INIT_DEFAULT);
    const tfs_optimizer_spec *o = &c->optimizer;
    ck_assert_int_eq(o->kind, TFS_OPT_ADAM);
    ck_assert(o->learning_rate == 0.001 && o->beta1 == 0.9 && o->beta2 == 0.999);
    ck_assert(o->epsilon == 1e-7 && o->rho == 0.9 && o->initial_accumulator == 0.1);
    ck_assert(o->momentum == 0 && !o->nesterov && !o->centered);
    ck_assert_int_eq(o->schedule, TFS_LR_CONSTANT);
    ck_assert(o->clip_value == 0 && o->clip_norm == 0 && o->clip_global_norm == 0);
    ck_assert_int_eq(o->warmup_steps, 0);
    const tfs_fit_opts *f = &c->fit;
    ck_assert_int_eq(f->epochs, 1);
    ck_assert_int_eq(f->max_steps, 0);
    ck_assert_int_eq(f->keep_checkpoint_max, 5);
    ck_assert_int_eq(f->log_every_steps, 100);
    ck_assert(f->histograms && !f->resume && !f->quiet);
    ck_assert_int_eq(f->fusion_threshold_bytes, 4 << 20);
    ck_assert_int_eq(f->lr_scaling, TFS_LR_SCALING_NONE);
    ck_assert(f->lr_scaling_warmup_steps == 0 && f->lr_scaling_warmup_epochs == 0);
    ck_assert(f->collective_timeout_secs == 60);
    ck_assert_ptr_null(f->checkpoint_dir);
    ck_assert_ptr_null(f->export_dir);
    ck_assert_ptr_null(f->log_dir);
    ck_assert_ptr_null(f->plot);
    ck_assert_ptr_null(f->warm_start);
    tfs_train_config_free(c);

    /* A layer's type may come after its other keys; a later value of a key replaces an earlier
     * one; CRLF line ends; a file without a final newline. */
    c = parse_ok("[layer]\nunits = 4\nactivation = relu\ntype = dense\n[layer]\nrate = 0.5\n"
                 "type = dropout\n[layer]\ntype = dense\nunits = 2\nunits = 3\r\n"
                 "[model]\r\ninput_shape = 6\r\n[data]\ntrain_file = t\ntrain_labels = l");
    ck_assert_int_eq(c->layers[0].units, 4);
    ck_assert_int_eq(c->layers[0].activation, TFS_ACT_RELU);
    ck_assert(c->layers[1].rate == 0.5);
    ck_assert_int_eq(c->layers[2].units, 3);
    ck_assert_str_eq(c->data.train_labels, "l");
    tfs_train_config_free(c);
    /* momentum given (also 0, before the name) is kept */
    c = parse_ok(BASE "[optimizer]\nmomentum = 0\nname = momentum\n");
    ck_assert(c->optimizer.momentum == 0);
    tfs_train_config_free(c);
    c = parse_ok(BASE "[optimizer]\nname = rmsprop\n");
    ck_assert(c->optimizer.momentum == 0);
    tfs_train_config_free(c);
}
END_TEST

START_TEST(test_config_syntax_errors)
{
    parse_err(BASE "[data\n", "t.ini:9:1: ", "a section header must end with ']'");
    parse_err(BASE "  just some words\n", "t.ini:9:3: ", "expected 'key = value' or '[section]'");
    parse_err(BASE "[model]\n = 3\n", "t.ini:10:2: ", "a key is missing before '='");
    parse_err(BASE "[model]\nseed =   # nothing\n", "t.ini:10:7: ", "seed: the value is missing");
    parse_err("batch_size = 3\n" BASE, "t.ini:1:1: ", "'batch_size' comes before any [section]");
    parse_err(BASE "\n[dta]\n", "t.ini:10:1: ", "unknown section [dta]");
    parse_err(BASE "[Data]\n", "t.ini:9:1: ", "unknown section [Data]");
    /* unknown keys, at the key's column */
    parse_err(BASE "[data]\n  batchsize = 3\n", "t.ini:10:3: ", "[data]: unknown key 'batchsize'");
    parse_err(BASE "[model]\ninput_shap = 3\n", "t.ini:10:1: ",
              "[model]: unknown key 'input_shap'");
    parse_err(BASE "[layer]\ntype = dense\nunit = 3\n", "t.ini:11:1: ",
              "[layer]: unknown key 'unit'");
    parse_err(BASE "[optimizer]\nlr = 0.1\n", "t.ini:10:1: ", "[optimizer]: unknown key 'lr'");
    parse_err(BASE "[train]\nresume = true\n", "t.ini:10:1: ", "[train]: unknown key 'resume'");
    /* a NUL byte, wherever it is */
    static const char nul[] = "[data]\ntrain_features = a\ntrain_\0labels = b\n";
    parse_err_len(nul, sizeof nul - 1, "t.ini:3:1: ", "a NUL byte");
    static const char nul2[] = BASE "[model]\nseed = 1\0";
    parse_err_len(nul2, sizeof nul2 - 1, "t.ini:10:1: ", "a NUL byte");
    /* too many layers */
    char *many = malloc(70 * 32 + 200);
    strcpy(many, BASE);
    for (int i = 0; i < 64; i++)
        strcat(many, "[layer]\ntype = flatten\n");
    parse_err(many, "t.ini:135:1: ", "more than 64 layers");
    free(many);
}
END_TEST

START_TEST(test_config_value_errors)
{
    /* numbers */
    parse_err(BASE "[data]\nbatch_size = 3x\n", "t.ini:10:14: ",
              "batch_size: '3x' is not an integer");
    parse_err(BASE "[data]\nbatch_size = 0\n", "t.ini:10:14: ", "batch_size: 0 is below 1");
    parse_err(BASE "[data]\nbatch_size = 2.5\n", "t.ini:10:14: ", "is not an integer");
    parse_err(BASE "[data]\nseed = -1\n", "t.ini:10:8: ", "seed: -1 is below 0");
    parse_err(BASE "[data]\nscale = abc\n", "t.ini:10:9: ", "scale: 'abc' is not a number");
    parse_err(BASE "[data]\nscale = 1e999\n", "t.ini:10:9: ", "is not a number");
    parse_err(BASE "[data]\nshift = 1.5.2\n", "t.ini:10:9: ", "is not a number");
    parse_err(BASE "[optimizer]\nlearning_rate = nan\n", "t.ini:10:17: ", "is not a number");
    parse_err(BASE "[optimizer]\nclip_norm = inf\n", "t.ini:10:13: ", "is not a number");
    parse_err(BASE "[train]\nepochs = 99999999999999999999\n", "t.ini:10:10: ",
              "is not an integer");
    parse_err(BASE "[train]\nepochs = 0\n", "t.ini:10:10: ", "epochs: 0 is below 1");
    parse_err(BASE "[train]\ncheckpoint_every_secs = fast\n", "t.ini:10:25: ", "is not a number");
    parse_err(BASE "[train]\nlr_scaling = sqrt\n", "t.ini:10:14: ",
              "lr_scaling: 'sqrt' is not none or linear");
    parse_err(BASE "[train]\nfusion_threshold_bytes = 0\n", "t.ini:10:26: ", "0 is below 1");
    parse_err(BASE "[train]\ncollective_timeout_secs = -1\n", "t.ini:10:27: ",
              "collective_timeout_secs: must be >= 0");
    parse_err(BASE "[model]\ninput_shape = 28,,28\n", "t.ini:10:15: ", "is not a list of integers");
    parse_err(BASE "[model]\ninput_shape = 28, 28,\n", "t.ini:10:15: ",
              "is not a list of integers");
    parse_err(BASE "[model]\ninput_shape = 28 28\n", "t.ini:10:15: ", "is not a list of integers");
    parse_err(BASE "[model]\ninput_shape = 28, -1\n", "t.ini:10:15: ", "-1 is below 1");
    parse_err(BASE "[model]\ninput_shape = 1,1,1,1,1,1,1,1,1,1,1,1\n", "t.ini:10:15: ",
              "more than");
    parse_err(BASE "[layer]\ntype = conv2d\nkernel_size = 3, 3, 3\n", "t.ini:11:15: ",
              "kernel_size: more than 2 values");
    parse_err(BASE "[optimizer]\nboundaries = 1, x\n", "t.ini:10:14: ",
              "is not a list of integers");
    parse_err(BASE "[optimizer]\nboundaries = 1, 2\nvalues = 0.1, y, 3\n", "t.ini:11:10: ",
              "values: '0.1, y, 3' is not a list of numbers");
    parse_err(BASE "[layer]\ntype = dense\nuse_bias = maybe\n", "t.ini:11:12: ",
              "use_bias: 'maybe' is not true or false");
    parse_err(BASE "[layer]\ntype = dense\nname = a/b\n", "t.ini:11:8: ", "holds '/'");
    /* enums */
    parse_err(BASE "[layer]\ntype = dense\nactivation = rleu\n", "t.ini:11:14: ",
              "activation: unknown activation 'rleu'");
    parse_err(BASE "[model]\nloss = cross_entropy\n", "t.ini:10:8: ",
              "loss: unknown loss 'cross_entropy'");
    parse_err(BASE "[optimizer]\nname = adamw\n", "t.ini:10:8: ",
              "name: unknown optimizer 'adamw'");
    parse_err(BASE "[layer]\ntype = dense\nkernel_initializer = glorot\n", "t.ini:11:22: ",
              "kernel_initializer: unknown initializer 'glorot'");
    parse_err(BASE "[layer]\ntype = dense\nbias_initializer = Zeros\n", "t.ini:11:20: ",
              "bias_initializer: unknown initializer 'Zeros'");
    parse_err(BASE "[layer]\ntype = lstm\n", "t.ini:10:8: ", "type: unknown layer type 'lstm'");
    parse_err(BASE "[layer]\ntype = conv2d\npadding = full\n", "t.ini:11:11: ",
              "padding: 'full' is not same or valid");
    parse_err(BASE "[data]\nformat = parquet\n", "t.ini:10:10: ",
              "format: 'parquet' is not one of");
    parse_err(BASE "[model]\ninput_dtype = int64\n", "t.ini:10:15: ",
              "'int64' is not float or int32");
    parse_err(BASE "[optimizer]\nschedule = linear\n", "t.ini:10:12: ",
              "schedule: 'linear' is not constant, exponential, piecewise or cosine");
    /* keys that do not apply to the layer's type, wherever type comes */
    parse_err(BASE "[layer]\ntype = dense\nrate = 0.5\n", "t.ini:11:8: ",
              "rate: does not apply to a dense layer");
    parse_err(BASE "[layer]\npool_size = 2\ntype = flatten\n", "t.ini:10:13: ",
              "pool_size: does not apply to a flatten layer");
    parse_err(BASE "[layer]\ntype = dropout\nunits = 3\n", "t.ini:11:9: ",
              "units: does not apply to a dropout layer");
    parse_err(BASE "[layer]\ntype = max_pool2d\nactivation = relu\n", "t.ini:11:14: ",
              "activation: does not apply to a max_pool2d layer");
}
END_TEST

START_TEST(test_config_missing_and_cross_checks)
{
    /* required keys (reported at the end of the file, or at the [layer] header) */
    parse_err("[data]\ntrain_features = a\ntrain_labels = b\n[model]\ninput_shape = 4\n",
              "t.ini:5:1: ", "the model has no [layer] section");
    parse_err("[data]\ntrain_features = a\ntrain_labels = b\n[layer]\ntype = dense\nunits = 2\n",
              "t.ini:6:1: ", "[model] input_shape is missing");
    parse_err("[data]\ntrain_labels = b\n[model]\ninput_shape = 4\n[layer]\ntype = dense\n",
              "t.ini:6:1: ", "[data] train_features (or train_file) is missing");
    parse_err("[data]\ntrain_features = a\n[model]\ninput_shape = 4\n[layer]\ntype = dense\n",
              "t.ini:6:1: ", "[data] train_labels is missing");
    parse_err(BASE "[data]\neval_features = e\n", "t.ini:10:1: ", "[data] eval_labels is missing");
    parse_err(BASE "[data]\nformat = csv\n", "t.ini:10:1: ",
              "label_column is missing (format csv)");
    parse_err(BASE "[layer]\nunits = 3\n\n", "t.ini:9:1: ", "[layer] 1: type is missing");
    parse_err("", "t.ini:1:1: ", "the model has no [layer] section");
    /* learning-rate schedules need their settings */
    parse_err(BASE "[optimizer]\nschedule = piecewise\n", "t.ini:10:1: ",
              "schedule piecewise needs boundaries and values");
    parse_err(BASE "[optimizer]\nschedule = exponential\ndecay_rate = 0.5\n", "t.ini:11:1: ",
              "schedule exponential needs decay_steps");
    parse_err(BASE "[optimizer]\nschedule = cosine\n", "t.ini:10:1: ",
              "schedule cosine needs decay_steps");
    /* values must have one entry more than boundaries, in either order (reported at values) */
    parse_err(BASE "[optimizer]\nboundaries = 100, 200\nvalues = 0.1, 0.01\n", "t.ini:11:10: ",
              "values: 2 values for 2 boundaries");
    parse_err(BASE "[optimizer]\nvalues = 0.1, 0.01, 0.1, 1\nboundaries = 100, 200\n",
              "t.ini:10:10: ", "values: 4 values for 2 boundaries");
    parse_err(BASE "[optimizer]\nschedule = piecewise\nvalues = 0.1, 0.2\n", "t.ini:11:10: ",
              "values: 2 values for 0 boundaries");
    tfs_train_config *c = parse_ok(BASE "[optimizer]\nschedule = piecewise\nvalues = 0.5\n");
    ck_assert_int_eq(c->optimizer.n_pieces, 0);
    ck_assert(tfs_optimizer_learning_rate(&c->optimizer, 1000) == 0.5);
    tfs_train_config_free(c);
}
END_TEST

/* tfs_train_config_load: the path names the messages; missing and oversized files. */
START_TEST(test_config_load)
{
    char *dir = tfs_test_mkdtemp();
    const char *path = tt_path(dir, "run.ini");
    const char bad[] = BASE "[optimizer]\nname = adamw\n";
    ck_assert_int_eq(tfs_test_write_file(path, bad, sizeof bad - 1), 0);
    tfs_train_config *c = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_train_config_load(path, &c, &st), TFS_INVALID_ARGUMENT);
    char want[4200];
    snprintf(want, sizeof want, "%s:10:8: name: unknown optimizer 'adamw'", path);
    ck_assert_msg(strncmp(st.msg, want, strlen(want)) == 0, "%s", st.msg);
    ck_assert_ptr_null(c);

    ck_assert_int_eq(tfs_test_write_file(path, FULL, sizeof FULL - 1), 0);
    ck_assert_int_eq(tfs_train_config_load(path, &c, &st), TFS_OK);
    ck_assert_str_eq(c->path, path);
    ck_assert_int_eq(c->model.n_layers, 8);
    tfs_train_config_free(c);

    ck_assert_int_eq(tfs_train_config_load(tt_path(dir, "absent.ini"), &c, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "absent.ini"));
    ck_assert_ptr_null(c);

    /* Over the 1 MiB cap: refused before parsing. */
    size_t big = ((size_t)1 << 20) + 10;
    char *text = malloc(big);
    memset(text, '#', big);
    ck_assert_int_eq(tfs_test_write_file(path, text, big), 0);
    free(text);
    ck_assert_int_eq(tfs_train_config_load(path, &c, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "larger than"));
    ck_assert_int_eq(tfs_train_config_load(dir, &c, &st) == TFS_OK, 0);   /* a directory */
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Every allocation of a parse failing in turn: OK or RESOURCE_EXHAUSTED, nothing leaked. */
START_TEST(test_config_faults)
{
    const char *texts[] = {FULL, BASE "[layer]\ntype = dense\nrate = 0.5\n"};
    for (int t = 0; t < 2; t++) {
        bool done = false;
        int n;
        for (n = 1; n < 10000 && !done; n++) {
            int64_t base = tfs_alloc_bytes_in_use();
            tfs_train_config *c = NULL;
            tfs_status st;
            tfs_alloc_fail_after(n);
            enum tfs_code rc = tfs_train_config_parse("t.ini", texts[t], strlen(texts[t]), &c, &st);
            tfs_alloc_fail_after(0);
            enum tfs_code want = t == 0 ? TFS_OK : TFS_INVALID_ARGUMENT;
            ck_assert_msg(rc == want || rc == TFS_RESOURCE_EXHAUSTED,
                          "failing allocation %d: %s: %s", n, tfs_code_name(rc), st.msg);
            ck_assert(rc == TFS_OK ? c != NULL : c == NULL);
            tfs_train_config_free(c);
            ck_assert_msg(tfs_alloc_bytes_in_use() == base, "failing allocation %d: %lld bytes "
                          "leaked", n, (long long)(tfs_alloc_bytes_in_use() - base));
            done = rc == want;
        }
        ck_assert(done);
        ck_assert_int_gt(n, 10);   /* the loop did exercise allocations */
    }
}
END_TEST

Suite *suite_train_config(void)
{
    Suite *s = suite_create("train_config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_config_every_key);
    tcase_add_test(tc, test_config_defaults);
    tcase_add_test(tc, test_config_syntax_errors);
    tcase_add_test(tc, test_config_value_errors);
    tcase_add_test(tc, test_config_missing_and_cross_checks);
    tcase_add_test(tc, test_config_load);
    tcase_add_test(tc, test_config_faults);
    suite_add_tcase(s, tc);
    return s;
}
