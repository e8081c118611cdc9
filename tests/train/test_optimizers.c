/* Optimizers through tfs_model (train/optimizer.c on the runtime's Apply* kernels): two training
 * steps of each optimizer on a tiny linear model, against the update computed by hand (step 1,
 * numbers in the comments) and by a float64 reference of TensorFlow's formulas (both steps, and
 * the slot variables); learning-rate schedules against hand-computed values and as the steps
 * really apply them; gradient clipping by value, by norm and by global norm; L2 regularization.
 *
 * The model: y = x w + b (one dense unit, no activation), mean squared error, batch
 *     x = [[1, 2], [3, 1]], y = [1, 3], w = [1, -1], b = 0.5.
 * pred = [1 - 2 + 0.5, 3 - 1 + 0.5] = [-0.5, 2.5]; err = pred - y = [-1.5, -0.5];
 * loss = mean(err^2) = (2.25 + 0.25) / 2 = 1.25; dL/dpred = 2 err / 2 = err;
 * dL/dw = x^T err = [1(-1.5) + 3(-0.5), 2(-1.5) + 1(-0.5)] = [-3, -3.5]; dL/db = -2.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model.h"

Suite *suite_train_optimizers(void);

static const float X[4] = {1, 2, 3, 1}, Y[2] = {1, 3};

static tfs_tensor *tensor(enum tfs_dtype dt, int rank, const int64_t *dims, const void *v)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_msg(tfs_tensor_new(dt, rank, dims, &t, &st) == TFS_OK, "%s", st.msg);
    if (v)
        memcpy(t->data, v, t->nbytes);
    return t;
}

/* Value i of a model variable as a double. */
static double var_at(tfs_model *m, const char *name, int64_t i)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    int k = tfs_model_variable_find(m, name);
    ck_assert_msg(k >= 0, "no variable %s", name);
    ck_assert_msg(tfs_model_variable_value(m, k, &t, &st) == TFS_OK, "%s", st.msg);
    double v = t->dtype == TFS_DTYPE_INT64 ? (double)((int64_t *)t->data)[i]
                                           : ((float *)t->data)[i];
    tfs_tensor_unref(t);
    return v;
}

static void set_var(tfs_model *m, const char *name, int64_t n, const float *v)
{
    tfs_status st;
    int64_t dims[2] = {n, 1};
    tfs_tensor *t = tensor(TFS_DTYPE_FLOAT, strstr(name, "kernel") ? 2 : 1, dims, v);
    ck_assert_msg(tfs_model_variable_assign(m, tfs_model_variable_find(m, name), t, &st) == TFS_OK,
                  "%s", st.msg);
    tfs_tensor_unref(t);
}

/* The linear model with w = [1, -1], b = 0.5 and the given optimizer (kernel l2 as given). */
static tfs_model *linear(const tfs_optimizer_spec *opt, double l2)
{
    tfs_layer_spec layers[] = {tfs_layer_dense(1, TFS_ACT_NONE)};
    layers[0].l2 = l2;
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 1;
    spec.loss = TFS_LOSS_MSE;
    tfs_model *m;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, opt, &m, &st) == TFS_OK, "%s", st.msg);
    set_var(m, "dense/kernel", 2, (float[]){1, -1});
    set_var(m, "dense/bias", 1, (float[]){0.5f});
    return m;
}

/* One step on the batch above; returns the loss. */
static double step(tfs_model *m)
{
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, X);
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 1}, Y);
    double loss;
    tfs_status st;
    ck_assert_msg(tfs_model_train_step(m, x, y, &loss, NULL, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    return loss;
}

/* p = [w0, w1, b] as the model holds them. */
static void params(tfs_model *m, double p[3])
{
    p[0] = var_at(m, "dense/kernel", 0);
    p[1] = var_at(m, "dense/kernel", 1);
    p[2] = var_at(m, "dense/bias", 0);
}

static void expect_params(tfs_model *m, const double want[3], double tol, const char *what)
{
    double p[3];
    params(m, p);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(p[i] - want[i]) <= tol, "%s: param %d is %.9g, want %.9g", what, i,
                      p[i], want[i]);
}

/* ---- the float64 reference ------------------------------------------------------------------ */

/* Loss gradient at p (the formulas of the header), plus 2 l2 w for the kernel. */
static void ref_grad(const double p[3], double l2, double g[3])
{
    double err[2];
    for (int i = 0; i < 2; i++)
        err[i] = X[2 * i] * p[0] + X[2 * i + 1] * p[1] + p[2] - Y[i];
    g[0] = X[0] * err[0] + X[2] * err[1] + 2 * l2 * p[0];
    g[1] = X[1] * err[0] + X[3] * err[1] + 2 * l2 * p[1];
    g[2] = err[0] + err[1];
}

typedef struct ref {
    double p[3];
    double s1[3], s2[3], s3[3];   /* slots */
    int    t;                     /* steps done */
} ref;

/* One step of TensorFlow's update for the optimizer (training_ops.cc's functors). */
static void ref_step(ref *r, const tfs_optimizer_spec *o, double l2)
{
    double g[3];
    ref_grad(r->p, l2, g);
    double lr = o->learning_rate;
    r->t++;
    for (int i = 0; i < 3; i++) {
        double *p = &r->p[i];
        switch (o->kind) {
        case TFS_OPT_SGD:
            *p -= lr * g[i];
            break;
        case TFS_OPT_MOMENTUM: {   /* accum = accum m + g; var -= lr accum (Nesterov below) */
            double *acc = &r->s1[i];
            *acc = *acc * o->momentum + g[i];
            *p -= o->nesterov ? g[i] * lr + *acc * o->momentum * lr : lr * *acc;
            break;
        }
        case TFS_OPT_ADAM: {   /* beta powers start at beta (TF1): step t uses beta^t */
            double b1p = pow(o->beta1, r->t), b2p = pow(o->beta2, r->t);
            double alpha = lr * sqrt(1 - b2p) / (1 - b1p);
            double *m = &r->s1[i], *v = &r->s2[i];
            *m += (g[i] - *m) * (1 - o->beta1);
            *v += (g[i] * g[i] - *v) * (1 - o->beta2);
            double num = o->nesterov ? g[i] * (1 - o->beta1) + o->beta1 * *m : *m;
            *p -= num * alpha / (sqrt(*v) + o->epsilon);
            break;
        }
        case TFS_OPT_RMSPROP: {   /* ms, mom, mg start at 0 (Keras) */
            double *ms = &r->s1[i], *mom = &r->s2[i], *mg = &r->s3[i];
            *ms += (g[i] * g[i] - *ms) * (1 - o->rho);
            double denom = *ms + o->epsilon;
            if (o->centered) {
                *mg += (g[i] - *mg) * (1 - o->rho);
                denom = *ms - *mg * *mg + o->epsilon;
            }
            *mom = *mom * o->momentum + g[i] * lr / sqrt(denom);
            *p -= *mom;
            break;
        }
        case TFS_OPT_ADAGRAD: {   /* ApplyAdagradV2: accum += g^2;
                                   * var -= lr g / (sqrt(accum) + eps) */
            double *acc = &r->s1[i];
            if (r->t == 1)
                *acc = o->initial_accumulator;
            *acc += g[i] * g[i];
            *p -= lr * g[i] / (sqrt(*acc) + o->epsilon);
            break;
        }
        default:
            ck_abort();
        }
    }
}

/* The model's slot `name` for the kernel (2 values) and the bias (1) against a reference slot. */
static void expect_slot(tfs_model *m, const char *slot, const double s[3], const char *what)
{
    char kn[128], bn[128];
    snprintf(kn, sizeof kn, "dense/kernel/%s", slot);
    snprintf(bn, sizeof bn, "dense/bias/%s", slot);
    double got[3] = {var_at(m, kn, 0), var_at(m, kn, 1), var_at(m, bn, 0)};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(got[i] - s[i]) <= 1e-5 * fmax(1, fabs(s[i])), "%s: slot %s[%d] is "
                      "%.9g, want %.9g", what, slot, i, got[i], s[i]);
}

/* Runs two steps of o on the model and the reference; after step 1 the params must equal
 * want1 (hand-computed), after each step the reference. */
static tfs_model *two_steps(const tfs_optimizer_spec *o, const double want1[3], const char *what)
{
    tfs_model *m = linear(o, 0);
    ref r = {.p = {1, -1, 0.5}};
    double loss = step(m);
    ck_assert_msg(fabs(loss - 1.25) < 1e-6, "%s: loss %g", what, loss);
    ref_step(&r, o, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(r.p[i] - want1[i]) < 1e-9, "%s: the reference disagrees with the "
                      "hand-computed step: %.12g vs %.12g", what, r.p[i], want1[i]);
    expect_params(m, want1, 2e-6, what);
    step(m);
    ref_step(&r, o, 0);
    expect_params(m, r.p, 5e-6, what);
    ck_assert_int_eq(tfs_model_global_step(m), 2);
    ck_assert_int_eq((int)var_at(m, "global_step", 0), 2);
    /* Two steps really moved the weights on from step 1. */
    ck_assert(fabs(r.p[0] - want1[0]) > 1e-4);
    switch (o->kind) {
    case TFS_OPT_MOMENTUM:
        expect_slot(m, "Momentum", r.s1, what);
        break;
    case TFS_OPT_ADAM:
        expect_slot(m, "Adam", r.s1, what);
        expect_slot(m, "Adam_1", r.s2, what);
        ck_assert(fabs(var_at(m, "beta1_power", 0) - pow(o->beta1, 3)) < 1e-7);
        ck_assert(fabs(var_at(m, "beta2_power", 0) - pow(o->beta2, 3)) < 1e-7);
        break;
    case TFS_OPT_RMSPROP:
        expect_slot(m, "RMSProp", r.s1, what);
        expect_slot(m, "RMSProp_1", r.s2, what);
        if (o->centered)
            expect_slot(m, "RMSProp_2", r.s3, what);
        else
            ck_assert_int_lt(tfs_model_variable_find(m, "dense/kernel/RMSProp_2"), 0);
        break;
    case TFS_OPT_ADAGRAD:
        expect_slot(m, "Adagrad", r.s1, what);
        break;
    default:
        break;
    }
    return m;
}

static tfs_optimizer_spec opt_of(enum tfs_optimizer_kind kind, double lr)
{
    tfs_optimizer_spec o = tfs_optimizer_spec_default();
    o.kind = kind;
    o.learning_rate = lr;
    return o;
}

/* SGD, lr 0.1: w -= 0.1 [-3, -3.5] -> [1.3, -0.65]; b -= 0.1 (-2) -> 0.7. No slots. */
START_TEST(test_opt_sgd)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_SGD, 0.1);
    tfs_model *m = two_steps(&o, (double[]){1.3, -0.65, 0.7}, "sgd");
    /* kernel, bias, global_step: nothing else */
    ck_assert_int_eq(tfs_model_variable_count(m), 3);
    tfs_model_free(m);
}
END_TEST

/* Momentum 0.9, lr 0.1. Step 1: accum = g, so as SGD: [1.3, -0.65, 0.7].
 * Nesterov, step 1: var -= lr g + lr m accum = lr g (1 + m) = 0.19 g:
 * w = [1 + 0.57, -1 + 0.665] = [1.57, -0.335]; b = 0.5 + 0.38 = 0.88. */
START_TEST(test_opt_momentum)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_MOMENTUM, 0.1);
    o.momentum = 0.9;
    tfs_model_free(two_steps(&o, (double[]){1.3, -0.65, 0.7}, "momentum"));
    o.nesterov = true;
    tfs_model_free(two_steps(&o, (double[]){1.57, -0.335, 0.88}, "momentum nesterov"));
}
END_TEST

/* Adam lr 0.01, b1 0.9, b2 0.999, eps 1e-7. Step 1: m = 0.1 g, v = 0.001 g^2,
 * alpha = 0.01 sqrt(1 - 0.999) / (1 - 0.9) = 0.0031623; var -= alpha m / (sqrt(v) + eps)
 * = 0.01 sign(g) (1 - eps / (sqrt(v) + eps)): w = [1.00999999, -0.99000001], b = 0.50999998.
 * Nesterov: var -= alpha (0.1 g + 0.9 m) / (sqrt(v) + eps) = 0.019 sign(g) (nearly):
 * w = [1.01899998, -0.98100002], b = 0.51899997. */
START_TEST(test_opt_adam)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_ADAM, 0.01);
    tfs_model_free(two_steps(&o, (double[]){1.0099999894590856, -0.9900000090350709,
                                            0.5099999841886367}, "adam"));
    o.nesterov = true;
    tfs_model_free(two_steps(&o, (double[]){1.0189999799722627, -0.9810000171666347,
                                            0.5189999699584097}, "adam nesterov"));
}
END_TEST

/* RMSProp lr 0.01, rho 0.9, momentum 0.5, eps 1e-7. Step 1: ms = 0.1 g^2,
 * mom = lr g / sqrt(ms + eps) = 0.031623 sign(g): w = [1.0316228, -0.9683772], b = 0.5316228.
 * Centered: mg = 0.1 g, denom = ms - mg^2 + eps = 0.09 g^2 + eps, mom = 0.033333 sign(g):
 * w = [1.0333333, -0.9666667], b = 0.5333333. */
START_TEST(test_opt_rmsprop)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_RMSPROP, 0.01);
    o.momentum = 0.5;
    tfs_model_free(two_steps(&o, (double[]){1.031622774844863, -0.9683772246890417,
                                            0.5316227726488375}, "rmsprop"));
    o.centered = true;
    tfs_model_free(two_steps(&o, (double[]){1.0333333312757205, -0.9666666681783823,
                                            0.5333333287037046}, "rmsprop centered"));
}
END_TEST

/* Adagrad lr 0.1, initial accumulator 0.1, eps 1e-7. Step 1: accum = 0.1 + g^2 = [9.1, 12.35, 4.1];
 * var -= 0.1 g / (sqrt(accum) + eps): w = [1 + 0.3 / 3.01662, -1 + 0.35 / 3.51426]
 * = [1.0994490, -0.9004057], b = 0.5 + 0.2 / 2.02485 = 0.5987730. */
START_TEST(test_opt_adagrad)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_ADAGRAD, 0.1);
    tfs_model_free(two_steps(&o, (double[]){1.0994490283230662, -0.9004056840197254,
                                            0.5987729547869105}, "adagrad"));
}
END_TEST

/* ---- learning-rate schedules ---------------------------------------------------------------- */

START_TEST(test_lr_schedules)
{
    tfs_optimizer_spec o = tfs_optimizer_spec_default();
    o.learning_rate = 0.1;
    ck_assert(tfs_optimizer_learning_rate(&o, 0) == 0.1);
    ck_assert(tfs_optimizer_learning_rate(&o, 123456) == 0.1);

    /* tf.compat.v1.train.exponential_decay(0.1, step, 10, 0.5): 0.1 * 0.5^(step / 10) */
    o.schedule = TFS_LR_EXPONENTIAL;
    o.decay_steps = 10;
    o.decay_rate = 0.5;
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 0), 0.1, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 5), 0.070710678118654752, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 10), 0.05, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 25), 0.017677669529663688, 1e-15);
    /* staircase: 0.1 * 0.5^floor(step / 10) */
    o.staircase = true;
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 5), 0.1, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 9), 0.1, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 10), 0.05, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 19), 0.05, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 25), 0.025, 1e-15);

    /* tf.compat.v1.train.piecewise_constant(step, [10, 20], [1, 0.5, 0.1]):
     * 1 while step <= 10, 0.5 while step <= 20, then 0.1 */
    o = tfs_optimizer_spec_default();
    o.schedule = TFS_LR_PIECEWISE;
    o.n_pieces = 2;
    o.boundaries[0] = 10;
    o.boundaries[1] = 20;
    o.values[0] = 1;
    o.values[1] = 0.5;
    o.values[2] = 0.1;
    const int64_t steps[] = {0, 10, 11, 20, 21, 1000};
    const double want[] = {1, 1, 0.5, 0.5, 0.1, 0.1};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(tfs_optimizer_learning_rate(&o, steps[i]) == want[i], "piecewise at %lld",
                      (long long)steps[i]);

    /* tf.compat.v1.train.cosine_decay(1, step, 100, alpha=0.1):
     * ((1 - 0.1) * 0.5 (1 + cos(pi min(step, 100) / 100)) + 0.1) */
    o = tfs_optimizer_spec_default();
    o.learning_rate = 1;
    o.schedule = TFS_LR_COSINE;
    o.decay_steps = 100;
    o.alpha = 0.1;
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 0), 1.0, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 25), 0.8681980515339464, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 50), 0.55, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 100), 0.1, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 250), 0.1, 1e-15);
    o.alpha = 0;
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 100), 0.0, 1e-15);

    /* Linear warm-up over 4 steps: lr (step + 1) / 4 for steps 0..3, then the schedule. */
    o = tfs_optimizer_spec_default();
    o.learning_rate = 0.1;
    o.warmup_steps = 4;
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 0), 0.025, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 1), 0.05, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 3), 0.1, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 4), 0.1, 1e-15);
    /* with exponential decay under it: step 2 is 3/4 of 0.1 * 0.5^(2/10) */
    o.schedule = TFS_LR_EXPONENTIAL;
    o.decay_steps = 10;
    o.decay_rate = 0.5;
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 2), 0.06529129224720931, 1e-15);
    ck_assert_double_eq_tol(tfs_optimizer_learning_rate(&o, 10), 0.05, 1e-15);
}
END_TEST

/* The schedule is what the steps apply: SGD with piecewise [1] -> [0.1, 0.01] and a warm-up of 2
 * steps. Step k (global step k - 1 before it) uses lr(k - 1): 0.05 (warm-up 1/2 of 0.1), 0.1
 * (global step 1 <= boundary 1), then 0.01. Each update is lr * g with g the gradient at the
 * weights before it (the float64 reference). */
START_TEST(test_lr_schedule_applied)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_SGD, 0.1);
    o.schedule = TFS_LR_PIECEWISE;
    o.n_pieces = 1;
    o.boundaries[0] = 1;
    o.values[0] = 0.1;
    o.values[1] = 0.01;
    o.warmup_steps = 2;
    tfs_model *m = linear(&o, 0);
    const double lrs[3] = {0.05, 0.1, 0.01};
    double p[3] = {1, -1, 0.5};
    for (int k = 0; k < 3; k++) {
        ck_assert_double_eq_tol(tfs_model_learning_rate(m), lrs[k], 1e-12);
        double g[3];
        ref_grad(p, 0, g);
        for (int i = 0; i < 3; i++)
            p[i] -= lrs[k] * g[i];
        step(m);
        expect_params(m, p, 2e-6, "scheduled sgd");
    }
    /* Step 1 by hand: w = [1 + 0.05 * 3, -1 + 0.05 * 3.5] = [1.15, -0.825], b = 0.6; checked by
     * the loop through the reference; spot-check the reference's first gradient here. */
    double g[3];
    ref_grad((double[]){1, -1, 0.5}, 0, g);
    ck_assert(g[0] == -3 && g[1] == -3.5 && g[2] == -2);
    tfs_model_free(m);
}
END_TEST

/* ---- clipping ------------------------------------------------------------------------------- */

/* SGD lr 0.1 with the gradients g = [-3, -3.5 | -2] clipped:
 *   by value 1:        [-1, -1 | -1]                   -> w = [1.1, -0.9], b = 0.6
 *   by norm 2 (each tensor): |dw| = sqrt(21.25) = 4.6098, dw * 2 / 4.6098; |db| = 2 <= 2 kept
 *                       -> w = [1.1301583, -0.8481487], b = 0.7
 *   by global norm 2:   sqrt(9 + 12.25 + 4) = 5.0249, all * 2 / 5.0249
 *                       -> w = [1.1194045, -0.8606948], b = 0.5796030
 * and a clip above the norms changes nothing: [1.3, -0.65, 0.7]. */
START_TEST(test_clipping)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_SGD, 0.1);
    o.clip_value = 1;
    tfs_model *m = linear(&o, 0);
    step(m);
    expect_params(m, (double[]){1.1, -0.9, 0.6}, 1e-6, "clip by value");
    tfs_model_free(m);

    o = opt_of(TFS_OPT_SGD, 0.1);
    o.clip_norm = 2;
    m = linear(&o, 0);
    step(m);
    expect_params(m, (double[]){1.1301582746911938, -0.8481486795269406, 0.7}, 1e-6,
                  "clip by norm");
    tfs_model_free(m);

    o = opt_of(TFS_OPT_SGD, 0.1);
    o.clip_global_norm = 2;
    m = linear(&o, 0);
    step(m);
    expect_params(m, (double[]){1.1194044628251987, -0.8606947933706015, 0.5796029752167992},
                  1e-6, "clip by global norm");
    tfs_model_free(m);

    o = opt_of(TFS_OPT_SGD, 0.1);
    o.clip_value = 10;
    o.clip_norm = 10;
    o.clip_global_norm = 10;
    m = linear(&o, 0);
    step(m);
    expect_params(m, (double[]){1.3, -0.65, 0.7}, 1e-6, "clips that do not bite");
    tfs_model_free(m);

    /* The gradient that tfs_model_gradient reports is the raw one (clipping is the update's). */
    o = opt_of(TFS_OPT_SGD, 0.1);
    o.clip_value = 1;
    m = linear(&o, 0);
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, X);
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 1}, Y);
    tfs_tensor *gk = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_gradient(m, tfs_model_variable_find(m, "dense/kernel"), x, y, &gk,
                                     &st) == TFS_OK, "%s", st.msg);
    ck_assert_float_eq_tol(((float *)gk->data)[0], -3.0f, 1e-6f);
    ck_assert_float_eq_tol(((float *)gk->data)[1], -3.5f, 1e-6f);
    tfs_tensor_unref(gk);
    ck_assert_int_eq(tfs_model_gradient(m, tfs_model_variable_find(m, "global_step"), x, y, &gk,
                                        &st), TFS_NOT_FOUND);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* ---- L2 regularization ---------------------------------------------------------------------- */

/* Kernel l2 0.01: loss = 1.25 + 0.01 (1^2 + (-1)^2) = 1.27; dL/dw = [-3, -3.5] + 2 (0.01) [1, -1]
 * = [-2.98, -3.52] (the bias is not regularized); SGD 0.1: w = [1.298, -0.648], b = 0.7.
 * Evaluation reports the data loss only (sum over the batch: 2.5). */
START_TEST(test_l2_regularization)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_SGD, 0.1);
    tfs_model *m = linear(&o, 0.01);
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, X);
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 1}, Y);
    tfs_tensor *gk = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_gradient(m, tfs_model_variable_find(m, "dense/kernel"), x, y, &gk,
                                     &st) == TFS_OK, "%s", st.msg);
    ck_assert_float_eq_tol(((float *)gk->data)[0], -2.98f, 1e-6f);
    ck_assert_float_eq_tol(((float *)gk->data)[1], -3.52f, 1e-6f);
    tfs_tensor_unref(gk);
    double sum;
    ck_assert_msg(tfs_model_eval_batch(m, x, y, &sum, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_double_eq_tol(sum, 2.5, 1e-6);
    double loss = step(m);
    ck_assert_double_eq_tol(loss, 1.27, 1e-6);
    expect_params(m, (double[]){1.298, -0.648, 0.7}, 1e-6, "l2");
    /* step 2 against the reference (l2 in the gradient) */
    ref r = {.p = {1, -1, 0.5}};
    ref_step(&r, &o, 0.01);
    ref_step(&r, &o, 0.01);
    step(m);
    expect_params(m, r.p, 2e-6, "l2, step 2");
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* Bad optimizer settings are refused when the model is built. */
START_TEST(test_opt_bad)
{
    tfs_optimizer_spec o = opt_of(TFS_OPT_SGD, -0.1);
    tfs_layer_spec layers[] = {tfs_layer_dense(1, TFS_ACT_NONE)};
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 1;
    spec.loss = TFS_LOSS_MSE;
    tfs_model *m = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_model_new(&spec, &o, &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "learning rate"));
    o = opt_of((enum tfs_optimizer_kind)42, 0.1);
    ck_assert_int_eq(tfs_model_new(&spec, &o, &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(m);
}
END_TEST

Suite *suite_train_optimizers(void)
{
    Suite *s = suite_create("train_optimizers");
    TCase *tc = tcase_create("optimizers");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_opt_sgd);
    tcase_add_test(tc, test_opt_momentum);
    tcase_add_test(tc, test_opt_adam);
    tcase_add_test(tc, test_opt_rmsprop);
    tcase_add_test(tc, test_opt_adagrad);
    tcase_add_test(tc, test_lr_schedules);
    tcase_add_test(tc, test_lr_schedule_applied);
    tcase_add_test(tc, test_clipping);
    tcase_add_test(tc, test_l2_regularization);
    tcase_add_test(tc, test_opt_bad);
    suite_add_tcase(s, tc);
    return s;
}
