/* Layers (train/layers.c): output shapes and values of conv2d and the pools (SAME and VALID,
 * strides) against a float64 reference computed here; flatten; dropout (identity at inference;
 * in training it drops about `rate` of the activations and scales the rest by 1 / (1 - rate));
 * batch normalization (training normalizes with the batch statistics, the moving statistics move
 * toward them as Keras moves them, inference uses them); embedding lookups and their sparse
 * updates; every activation against its formula; initializers (Glorot uniform limits, He normal
 * standard deviation, zeros/ones/constant, random normal and uniform, seeds); Keras's variable
 * names and the optimizer's slot names; and bad layer specs, which name the layer.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model.h"

Suite *suite_train_layers(void);

static tfs_tensor *tensor(enum tfs_dtype dt, int rank, const int64_t *dims, const void *v)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_msg(tfs_tensor_new(dt, rank, dims, &t, &st) == TFS_OK, "%s", st.msg);
    if (v)
        memcpy(t->data, v, t->nbytes);
    return t;
}

static tfs_tensor *var_value(tfs_model *m, const char *name)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    int k = tfs_model_variable_find(m, name);
    ck_assert_msg(k >= 0, "no variable %s", name);
    ck_assert_msg(tfs_model_variable_value(m, k, &t, &st) == TFS_OK, "%s", st.msg);
    return t;
}

static void set_var(tfs_model *m, const char *name, const float *v)
{
    tfs_status st;
    tfs_tensor *cur = var_value(m, name);
    memcpy(cur->data, v, cur->nbytes);
    ck_assert_msg(tfs_model_variable_assign(m, tfs_model_variable_find(m, name), cur, &st) ==
                  TFS_OK, "%s", st.msg);
    tfs_tensor_unref(cur);
}

/* A model of the given layers on float inputs of the given shape (MSE unless loss >= 0). */
static tfs_model *model_of(const tfs_layer_spec *layers, int n, int rank, const int64_t *shape,
                           int loss, const tfs_optimizer_spec *opt)
{
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = rank;
    memcpy(spec.input_shape, shape, (size_t)rank * sizeof *shape);
    spec.layers = layers;
    spec.n_layers = n;
    spec.loss = loss < 0 ? TFS_LOSS_MSE : (enum tfs_loss)loss;
    tfs_model *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, opt, &m, &st) == TFS_OK, "%s", st.msg);
    return m;
}

static tfs_optimizer_spec sgd(double lr)
{
    tfs_optimizer_spec o = tfs_optimizer_spec_default();
    o.kind = TFS_OPT_SGD;
    o.learning_rate = lr;
    return o;
}

static tfs_tensor *predict(tfs_model *m, tfs_tensor *x)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_predict(m, x, &out, &st) == TFS_OK, "%s", st.msg);
    return out;
}

/* ---- conv2d and pooling --------------------------------------------------------------------- */

enum { SUM, MAX, AVG };

/* The float64 reference of a window op on x [1, H, W, 1] (conv with an all-ones kernel is the
 * window's sum; SAME pads as TensorFlow: total max((out - 1) s + k - in, 0), the smaller half
 * before; AVG divides by the elements inside the input only, as TensorFlow's AvgPool does). */
static double window_ref(const float *x, int64_t H, int64_t W, int mode, int64_t kh, int64_t kw,
                         int64_t sh, int64_t sw, bool same, int64_t oy, int64_t ox)
{
    int64_t oh = same ? (H + sh - 1) / sh : (H - kh + sh) / sh;
    int64_t ow = same ? (W + sw - 1) / sw : (W - kw + sw) / sw;
    int64_t ph = same ? ((oh - 1) * sh + kh - H > 0 ? (oh - 1) * sh + kh - H : 0) / 2 : 0;
    int64_t pw = same ? ((ow - 1) * sw + kw - W > 0 ? (ow - 1) * sw + kw - W : 0) / 2 : 0;
    double acc = mode == MAX ? -INFINITY : 0;
    int n = 0;
    for (int64_t dy = 0; dy < kh; dy++)
        for (int64_t dx = 0; dx < kw; dx++) {
            int64_t y = oy * sh - ph + dy, xx = ox * sw - pw + dx;
            if (y < 0 || y >= H || xx < 0 || xx >= W)
                continue;
            double v = x[y * W + xx];
            acc = mode == MAX ? fmax(acc, v) : acc + v;
            n++;
        }
    return mode == AVG ? acc / n : acc;
}

/* One window layer on a 7x6 single-channel image: the output's shape and every value. For the
 * pools, a first conv2d 1x1 with a ones kernel and no bias passes the image through (a model
 * needs a trainable weight). */
static void check_window(tfs_layer_spec layer, int mode, int64_t oh, int64_t ow)
{
    const int64_t H = 7, W = 6, shape[3] = {H, W, 1};
    float xv[42];
    for (int i = 0; i < 42; i++)
        xv[i] = (float)((i * 37) % 11) - 4.5f;
    tfs_layer_spec layers[2];
    int n = 0;
    if (mode != SUM) {
        layers[n] = tfs_layer_conv2d(1, 1, 1, false, TFS_ACT_NONE);
        layers[n].kernel_init.kind = TFS_INIT_ONES;
        layers[n++].no_bias = true;
    } else {
        layer.kernel_init.kind = TFS_INIT_ONES;   /* sum of the window; the bias starts at 0 */
    }
    layers[n++] = layer;
    tfs_optimizer_spec o = sgd(0.1);
    tfs_model *m = model_of(layers, n, 3, shape, -1, &o);
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 4, (int64_t[]){1, H, W, 1}, xv);
    tfs_tensor *y = predict(m, x);
    int64_t c = mode == SUM ? layer.units : 1;
    ck_assert_int_eq(y->rank, 4);
    ck_assert_msg(y->dims[0] == 1 && y->dims[1] == oh && y->dims[2] == ow && y->dims[3] == c,
                  "got [%lld, %lld, %lld, %lld], want [1, %lld, %lld, %lld]",
                  (long long)y->dims[0], (long long)y->dims[1], (long long)y->dims[2],
                  (long long)y->dims[3], (long long)oh, (long long)ow, (long long)c);
    int64_t sh = layer.strides[0] > 0 ? layer.strides[0] : (mode == SUM ? 1 : layer.kernel[0]);
    int64_t sw = layer.strides[1] > 0 ? layer.strides[1] : (mode == SUM ? 1 : layer.kernel[1]);
    const float *yv = y->data;
    for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
            double want = window_ref(xv, H, W, mode, layer.kernel[0], layer.kernel[1], sh, sw,
                                     layer.same_padding, i, j);
            for (int64_t k = 0; k < c; k++)
                ck_assert_msg(fabs(yv[(i * ow + j) * c + k] - want) < 1e-5,
                              "(%lld, %lld): %g, want %g", (long long)i, (long long)j,
                              yv[(i * ow + j) * c + k], want);
        }
    /* and it trains: one step runs and changes the first kernel */
    tfs_tensor *target = tensor(TFS_DTYPE_FLOAT, 4, y->dims, NULL);
    memset(target->data, 0, target->nbytes);
    tfs_status st;
    double loss;
    ck_assert_msg(tfs_model_train_step(m, x, target, &loss, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert(isfinite(loss) && loss > 0);
    tfs_tensor_unref(target);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}

START_TEST(test_layers_conv_pool_shapes)
{
    /* conv2d 2 filters 3x3: SAME stride 1 keeps 7x6; SAME stride 2 gives ceil(7/2) x ceil(6/2)
     * = 4x3; VALID stride 2 gives floor((7-3)/2)+1 x floor((6-3)/2)+1 = 3x2 */
    check_window(tfs_layer_conv2d(2, 3, 1, true, TFS_ACT_NONE), SUM, 7, 6);
    check_window(tfs_layer_conv2d(2, 3, 2, true, TFS_ACT_NONE), SUM, 4, 3);
    check_window(tfs_layer_conv2d(2, 3, 2, false, TFS_ACT_NONE), SUM, 3, 2);
    tfs_layer_spec c = tfs_layer_conv2d(1, 3, 1, false, TFS_ACT_NONE);   /* 3x5 kernel, 1x2 */
    c.kernel[1] = 5;
    c.strides[1] = 2;
    check_window(c, SUM, 5, 1);
    /* pools: stride defaults to the window */
    check_window(tfs_layer_pool2d(TFS_LAYER_MAX_POOL2D, 2, 0, false), MAX, 3, 3);
    check_window(tfs_layer_pool2d(TFS_LAYER_MAX_POOL2D, 2, 0, true), MAX, 4, 3);
    check_window(tfs_layer_pool2d(TFS_LAYER_MAX_POOL2D, 3, 1, true), MAX, 7, 6);
    check_window(tfs_layer_pool2d(TFS_LAYER_AVG_POOL2D, 3, 1, false), AVG, 5, 4);
    check_window(tfs_layer_pool2d(TFS_LAYER_AVG_POOL2D, 3, 2, true), AVG, 4, 3);
    check_window(tfs_layer_pool2d(TFS_LAYER_AVG_POOL2D, 2, 0, true), AVG, 4, 3);
}
END_TEST

/* Flatten: [B, 3, 2, 2] -> [B, 12] in row-major order (a 1x1 conv with a ones kernel first). */
START_TEST(test_layers_flatten)
{
    tfs_layer_spec layers[] = {tfs_layer_conv2d(2, 1, 1, false, TFS_ACT_NONE),
                               tfs_layer_of(TFS_LAYER_FLATTEN)};
    layers[0].kernel_init.kind = TFS_INIT_ONES;
    tfs_optimizer_spec o = sgd(0.1);
    tfs_model *m = model_of(layers, 2, 3, (int64_t[]){3, 2, 1}, -1, &o);
    float xv[12];
    for (int i = 0; i < 12; i++)
        xv[i] = (float)i;
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 4, (int64_t[]){2, 3, 2, 1}, xv);
    tfs_tensor *y = predict(m, x);
    ck_assert(y->rank == 2 && y->dims[0] == 2 && y->dims[1] == 12);
    for (int i = 0; i < 24; i++)   /* each pixel twice (two filters) */
        ck_assert_float_eq(((float *)y->data)[i], xv[i / 2]);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* ---- dropout -------------------------------------------------------------------------------- */

/* [dropout(0.3), dense(1)] on x = ones(2000), one example, MSE against y = -1, kernel and bias 0:
 * pred = 0, dL/dpred = 2 (0 - (-1)) = 2, so dL/dkernel[j] = 2 d[j] with d the dropout output:
 * 0 for dropped units and 1 / 0.7 for kept ones. The gradient shows the mask. */
START_TEST(test_layers_dropout)
{
    const int64_t N = 2000;
    const double rate = 0.3;
    tfs_layer_spec layers[] = {tfs_layer_of(TFS_LAYER_DROPOUT), tfs_layer_dense(1, TFS_ACT_NONE)};
    layers[0].rate = rate;
    layers[1].kernel_init.kind = TFS_INIT_ZEROS;
    tfs_optimizer_spec o = sgd(0);   /* steps advance the generator, not the weights */
    tfs_model *m = model_of(layers, 2, 1, &N, -1, &o);
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){1, N}, NULL);
    for (int64_t i = 0; i < N; i++)
        ((float *)x->data)[i] = 1;
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){1, 1}, (float[]){-1});
    int k = tfs_model_variable_find(m, "dense/kernel");
    tfs_tensor *g[3] = {NULL, NULL, NULL};
    tfs_status st;
    for (int r = 0; r < 3; r++) {
        if (r == 2)
            ck_assert_msg(tfs_model_train_step(m, x, y, NULL, NULL, &st) == TFS_OK, "%s", st.msg);
        ck_assert_msg(tfs_model_gradient(m, k, x, y, &g[r], &st) == TFS_OK, "%s", st.msg);
        int64_t dropped = 0;
        for (int64_t i = 0; i < N; i++) {
            float v = ((float *)g[r]->data)[i];
            if (v == 0)
                dropped++;
            else
                ck_assert_msg(fabs(v - 2 / (1 - rate)) < 1e-5, "kept unit %lld: %g, want %g",
                              (long long)i, v, 2 / (1 - rate));
        }
        /* binomial(2000, 0.3): sd 20.5; allow 4 sd */
        ck_assert_msg(dropped > 600 - 82 && dropped < 600 + 82, "dropped %lld of %lld",
                      (long long)dropped, (long long)N);
    }
    /* Asking for a gradient leaves the generator where it was (the same mask twice); a training
     * step moves it on (a new mask). */
    ck_assert(memcmp(g[0]->data, g[1]->data, g[0]->nbytes) == 0);
    ck_assert(memcmp(g[0]->data, g[2]->data, g[0]->nbytes) != 0);
    for (int r = 0; r < 3; r++)
        tfs_tensor_unref(g[r]);

    /* Inference is the identity: with a ones kernel the prediction is sum(x) = 2000 exactly. */
    float *ones = malloc((size_t)N * sizeof *ones);
    for (int64_t i = 0; i < N; i++)
        ones[i] = 1;
    set_var(m, "dense/kernel", ones);
    free(ones);
    for (int r = 0; r < 3; r++) {
        tfs_tensor *p = predict(m, x);
        ck_assert_float_eq(((float *)p->data)[0], (float)N);
        tfs_tensor_unref(p);
    }
    double sum;
    ck_assert_msg(tfs_model_eval_batch(m, x, y, &sum, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_double_eq_tol(sum, (N + 1.0) * (N + 1.0), 1e-3);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* ---- batch normalization -------------------------------------------------------------------- */

/* [batch_norm(momentum 0.9, epsilon 0.001)] alone on x [4, 3], SGD with learning rate 0 (the
 * step moves only the moving statistics). Training normalizes with the batch's mean and biased
 * variance: with y = (x - mean) / sqrt(var + eps) as the target the training loss is 0. The moving
 * statistics then move by 10% toward the batch's: mean 0 -> 0.1 mean, variance 1 -> 0.9 + 0.1 var
 * (Keras on [B, C] inputs: the biased variance of tf.nn.moments). Inference uses them. */
START_TEST(test_layers_batch_norm_dense)
{
    const float xv[12] = {1, -2, 10, 3, 0, 10, 5, 4, 10, 7, 2, 10};   /* channel 2: constant */
    const double eps = 0.001;
    tfs_layer_spec layers[] = {tfs_layer_of(TFS_LAYER_BATCH_NORM)};
    layers[0].momentum = 0.9;
    layers[0].epsilon = eps;
    tfs_optimizer_spec o = sgd(0);
    tfs_model *m = model_of(layers, 1, 1, (int64_t[]){3}, -1, &o);
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){4, 3}, xv);

    /* before training: moving mean 0, variance 1 */
    tfs_tensor *p = predict(m, x);
    for (int i = 0; i < 12; i++)
        ck_assert_msg(fabs(((float *)p->data)[i] - xv[i] / sqrt(1 + eps)) < 1e-5, "%d", i);
    tfs_tensor_unref(p);

    double mean[3] = {0}, var[3] = {0}, uvar[3];
    for (int c = 0; c < 3; c++) {
        for (int b = 0; b < 4; b++)
            mean[c] += xv[b * 3 + c] / 4.0;
        for (int b = 0; b < 4; b++)
            var[c] += (xv[b * 3 + c] - mean[c]) * (xv[b * 3 + c] - mean[c]) / 4.0;
        uvar[c] = var[c] * 4.0 / 3.0;
    }
    ck_assert(mean[0] == 4 && var[0] == 5 && mean[1] == 1 && var[1] == 5 && var[2] == 0);
    float yv[12];
    for (int i = 0; i < 12; i++)
        yv[i] = (float)((xv[i] - mean[i % 3]) / sqrt(var[i % 3] + eps));
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){4, 3}, yv);
    double loss;
    tfs_status st;
    ck_assert_msg(tfs_model_train_step(m, x, y, &loss, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(loss < 1e-10, "training-mode output is not (x - mean) / sqrt(var + eps): "
                  "loss %g", loss);
    tfs_tensor *mm = var_value(m, "batch_normalization/moving_mean");
    tfs_tensor *mv = var_value(m, "batch_normalization/moving_variance");
    for (int c = 0; c < 3; c++) {
        ck_assert_msg(fabs(((float *)mm->data)[c] - 0.1 * mean[c]) < 1e-5, "moving mean %d", c);
        ck_assert_msg(fabs(((float *)mv->data)[c] - (0.9 + 0.1 * var[c])) < 1e-5,
                      "moving variance %d: %g, want %g (the unbiased one would give %g)", c,
                      ((float *)mv->data)[c], 0.9 + 0.1 * var[c], 0.9 + 0.1 * uvar[c]);
    }
    /* inference with the moving statistics */
    p = predict(m, x);
    for (int i = 0; i < 12; i++) {
        int c = i % 3;
        double want = (xv[i] - 0.1 * mean[c]) / sqrt(0.9 + 0.1 * var[c] + eps);
        ck_assert_msg(fabs(((float *)p->data)[i] - want) < 1e-5, "%d: %g, want %g", i,
                      ((float *)p->data)[i], want);
    }
    tfs_tensor_unref(p);
    /* gamma and beta are trainable, the moving statistics are not; all four are weights */
    int gamma = tfs_model_variable_find(m, "batch_normalization/gamma");
    int moving_mean = tfs_model_variable_find(m, "batch_normalization/moving_mean");
    int moving_var = tfs_model_variable_find(m, "batch_normalization/moving_variance");
    ck_assert(tfs_model_variable_is_weight(m, gamma));
    ck_assert(tfs_model_variable_is_weight(m, moving_var));
    tfs_tensor *g = NULL;
    ck_assert_int_eq(tfs_model_gradient(m, moving_mean, x, y, &g, &st), TFS_NOT_FOUND);
    ck_assert_int_eq(tfs_model_gradient(m, gamma, x, y, &g, &st), TFS_OK);
    tfs_tensor_unref(g);
    tfs_tensor_unref(mm);
    tfs_tensor_unref(mv);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* On images ([B, H, W, C], the fused op as Keras uses it) the moving variance moves toward the
 * unbiased batch variance (n / (n - 1), n = B H W): x [2, 2, 1, 2], momentum 0.5. */
START_TEST(test_layers_batch_norm_images)
{
    const float xv[8] = {1, 0, 2, 0, 3, 0, 6, 4};
    tfs_layer_spec layers[] = {tfs_layer_of(TFS_LAYER_BATCH_NORM)};
    layers[0].momentum = 0.5;
    tfs_optimizer_spec o = sgd(0);
    tfs_model *m = model_of(layers, 1, 3, (int64_t[]){2, 1, 2}, -1, &o);
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 4, (int64_t[]){2, 2, 1, 2}, xv);
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 4, (int64_t[]){2, 2, 1, 2}, NULL);
    memset(y->data, 0, y->nbytes);
    tfs_status st;
    ck_assert_msg(tfs_model_train_step(m, x, y, NULL, NULL, &st) == TFS_OK, "%s", st.msg);
    /* channel 0: 1, 2, 3, 6: mean 3, biased var (4 + 1 + 0 + 9) / 4 = 3.5, unbiased 14 / 3;
     * channel 1: 0, 0, 0, 4: mean 1, unbiased var (1 + 1 + 1 + 9) / 3 = 4 */
    tfs_tensor *mm = var_value(m, "batch_normalization/moving_mean");
    tfs_tensor *mv = var_value(m, "batch_normalization/moving_variance");
    ck_assert_float_eq_tol(((float *)mm->data)[0], 1.5f, 1e-6f);
    ck_assert_float_eq_tol(((float *)mm->data)[1], 0.5f, 1e-6f);
    ck_assert_float_eq_tol(((float *)mv->data)[0], (float)(0.5 + 0.5 * 14.0 / 3.0), 1e-5f);
    ck_assert_float_eq_tol(((float *)mv->data)[1], 2.5f, 1e-5f);
    tfs_tensor_unref(mm);
    tfs_tensor_unref(mv);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* ---- embedding ------------------------------------------------------------------------------ */

/* [embedding(10, 2)] on int32 ids [2, 3]: the output is the rows of the table; one SGD step with
 * MSE changes only the rows looked up, a row looked up twice by the sum of both gradients. */
START_TEST(test_layers_embedding)
{
    tfs_layer_spec layers[] = {tfs_layer_of(TFS_LAYER_EMBEDDING)};
    layers[0].input_dim = 10;
    layers[0].units = 2;
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 3;
    spec.input_dtype = TFS_DTYPE_INT32;
    spec.layers = layers;
    spec.n_layers = 1;
    spec.loss = TFS_LOSS_MSE;
    tfs_optimizer_spec o = sgd(0.5);
    tfs_model *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, &o, &m, &st) == TFS_OK, "%s", st.msg);
    /* Keras's default: uniform in [-0.05, 0.05] */
    tfs_tensor *e = var_value(m, "embedding/embeddings");
    ck_assert(e->rank == 2 && e->dims[0] == 10 && e->dims[1] == 2);
    for (int i = 0; i < 20; i++)
        ck_assert(fabsf(((float *)e->data)[i]) <= 0.05f);
    tfs_tensor_unref(e);
    float table[20];
    for (int i = 0; i < 20; i++)
        table[i] = (float)(i / 2) * 10 + (float)(i % 2);   /* row r: [10 r, 10 r + 1] */
    set_var(m, "embedding/embeddings", table);
    const int32_t ids[6] = {3, 7, 3, 0, 9, 1};
    tfs_tensor *x = tensor(TFS_DTYPE_INT32, 2, (int64_t[]){2, 3}, ids);
    tfs_tensor *p = predict(m, x);
    ck_assert(p->rank == 3 && p->dims[0] == 2 && p->dims[1] == 3 && p->dims[2] == 2);
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 2; j++)
            ck_assert_float_eq(((float *)p->data)[i * 2 + j], table[ids[i] * 2 + j]);
    /* Targets = outputs + 1 everywhere: dL/dout = 2 (out - y) / 12 = -1/6 per element (the mean
     * over 12 elements); SGD 0.5 adds 1/12 per lookup: rows 0, 1, 7, 9 by 1/12, row 3 by 2/12. */
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 3, (int64_t[]){2, 3, 2}, NULL);
    for (int i = 0; i < 12; i++)
        ((float *)y->data)[i] = ((float *)p->data)[i] + 1;
    double loss;
    ck_assert_msg(tfs_model_train_step(m, x, y, &loss, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_double_eq_tol(loss, 1.0, 1e-6);
    e = var_value(m, "embedding/embeddings");
    for (int r = 0; r < 10; r++) {
        int uses = 0;
        for (int i = 0; i < 6; i++)
            uses += ids[i] == r;
        for (int j = 0; j < 2; j++)
            ck_assert_msg(fabs(((float *)e->data)[r * 2 + j] - (table[r * 2 + j] + uses / 12.0)) <
                          1e-5, "row %d: %g", r, ((float *)e->data)[r * 2 + j]);
    }
    tfs_tensor_unref(e);
    tfs_tensor_unref(p);
    /* an id outside the table is an error, not a crash */
    ((int32_t *)x->data)[4] = 12;
    ck_assert_int_eq(tfs_model_predict(m, x, &p, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "12") != NULL, "%s", st.msg);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);

    /* And an embedding classifier learns: ids 0..4 are class 0, 5..9 class 1. */
    tfs_layer_spec cls[] = {tfs_layer_of(TFS_LAYER_EMBEDDING), tfs_layer_of(TFS_LAYER_FLATTEN),
                            tfs_layer_dense(2, TFS_ACT_NONE)};
    cls[0].input_dim = 10;
    cls[0].units = 4;
    spec.input_shape[0] = 2;
    spec.layers = cls;
    spec.n_layers = 3;
    spec.loss = TFS_LOSS_SPARSE_SOFTMAX_XENT;
    o = tfs_optimizer_spec_default();
    o.learning_rate = 0.05;
    ck_assert_msg(tfs_model_new(&spec, &o, &m, &st) == TFS_OK, "%s", st.msg);
    int32_t xi[40], yi[20];
    for (int i = 0; i < 20; i++) {
        xi[2 * i] = i % 10;
        xi[2 * i + 1] = (i * 3) % 5 + (i % 10 >= 5 ? 5 : 0);
        yi[i] = i % 10 >= 5;
    }
    x = tensor(TFS_DTYPE_INT32, 2, (int64_t[]){20, 2}, xi);
    y = tensor(TFS_DTYPE_INT32, 1, (int64_t[]){20}, yi);
    double first = 0;
    int64_t correct = 0;
    for (int s = 0; s < 40; s++) {
        ck_assert_msg(tfs_model_train_step(m, x, y, &loss, &correct, &st) == TFS_OK, "%s",
                      st.msg);
        if (s == 0)
            first = loss;
    }
    ck_assert_msg(loss < first / 4 && correct == 20, "loss %g -> %g, %lld correct", first, loss,
                  (long long)correct);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* ---- activations ---------------------------------------------------------------------------- */

static double act_ref(enum tfs_activation a, double v, double alpha, const double *row, int n)
{
    const double selu_a = 1.6732632423543772848170429916717;
    const double selu_s = 1.0507009873554804934193349852946;
    switch (a) {
    case TFS_ACT_NONE:       return v;
    case TFS_ACT_RELU:       return v > 0 ? v : 0;
    case TFS_ACT_RELU6:      return fmin(fmax(v, 0), 6);
    case TFS_ACT_SIGMOID:    return 1 / (1 + exp(-v));
    case TFS_ACT_TANH:       return tanh(v);
    case TFS_ACT_ELU:        return v > 0 ? v : exp(v) - 1;
    case TFS_ACT_SELU:       return v > 0 ? selu_s * v : selu_s * selu_a * (exp(v) - 1);
    case TFS_ACT_LEAKY_RELU: return v > 0 ? v : alpha * v;
    case TFS_ACT_SOFTPLUS:   return log1p(exp(v));
    case TFS_ACT_SOFTMAX: {
        double mx = row[0], s = 0;
        for (int i = 1; i < n; i++)
            mx = fmax(mx, row[i]);
        for (int i = 0; i < n; i++)
            s += exp(row[i] - mx);
        return exp(v - mx) / s;
    }
    default:
        ck_abort();
        return 0;
    }
}

/* Each activation, on a dense layer (identity kernel, zero bias) and as an activation layer,
 * against its formula; a training step through it runs (its gradient exists) and is finite. */
START_TEST(test_layers_activations)
{
    enum { N = 7 };
    const float xv[2 * N] = {-7, -2.5f, -0.5f, 0, 0.25f, 3, 8, 1, -1, 2, -2, 0.5f, -0.5f, 6.5f};
    float eye[N * N] = {0};
    for (int i = 0; i < N; i++)
        eye[i * N + i] = 1;
    for (int form = 0; form < 2; form++)
        for (int a = 0; a < TFS_ACT_COUNT; a++) {
            tfs_layer_spec layers[2] = {tfs_layer_dense(N, (enum tfs_activation)a),
                                        tfs_layer_of(TFS_LAYER_ACTIVATION)};
            double alpha = a == TFS_ACT_LEAKY_RELU && form == 0 ? 0.3 : 0.2;   /* 0.2: Keras */
            layers[0].alpha = alpha;
            if (form == 1) {
                layers[0].activation = TFS_ACT_NONE;
                layers[1].activation = (enum tfs_activation)a;
            }
            tfs_optimizer_spec o = sgd(0.01);
            tfs_model *m = model_of(layers, 1 + form, 1, (int64_t[]){N}, -1, &o);
            set_var(m, "dense/kernel", eye);
            tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, N}, xv);
            tfs_tensor *p = predict(m, x);
            for (int r = 0; r < 2; r++) {
                double row[N];
                for (int i = 0; i < N; i++)
                    row[i] = xv[r * N + i];
                for (int i = 0; i < N; i++) {
                    double want = act_ref((enum tfs_activation)a, row[i], alpha, row, N);
                    double got = ((float *)p->data)[r * N + i];
                    ck_assert_msg(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)),
                                  "%s (%s) of %g: %.9g, want %.9g",
                                  tfs_activation_name((enum tfs_activation)a),
                                  form ? "layer" : "dense", row[i], got, want);
                }
            }
            tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, N}, NULL);
            memset(y->data, 0, y->nbytes);
            double loss;
            tfs_status st;
            ck_assert_msg(tfs_model_train_step(m, x, y, &loss, NULL, &st) == TFS_OK, "%s: %s",
                          tfs_activation_name((enum tfs_activation)a), st.msg);
            ck_assert(isfinite(loss));
            tfs_tensor_unref(x);
            tfs_tensor_unref(y);
            tfs_tensor_unref(p);
            tfs_model_free(m);
        }
}
END_TEST

/* ---- losses --------------------------------------------------------------------------------- */

/* Each loss on known logits (a dense layer with an identity kernel passes x through), against
 * the formulas computed by hand (python3, float64):
 *   logits [[2, -1, 0.5], [-3, 100, -100]]
 *   sparse softmax xent, labels [0, 2]: sum of lse(row) - row[label] = 200.24131129665716
 *   softmax xent, labels [[.2, .3, .5], [0, 1, 0]]: -sum y log softmax = 1.891311296657157
 *   sigmoid xent, labels [[1, 0, 1], [0, 1, 1]]: per example the mean of
 *       max(x, 0) - x z + log(1 + exp(-|x|)), summed: 33.654284678105014 (stable at +-100)
 *   mean squared error, targets [[1, 1, 1], [0, 0, 0]]: 6671.416666666667
 * Correct counts: sparse 1 (row 0), softmax 1 (row 1), sigmoid 5 of 6 elements, MSE none.
 * With softmax / sigmoid as the last layer's activation the losses use the logits before it
 * (no double softmax) and give the same numbers. Predictions: softmax / sigmoid / the output. */
START_TEST(test_layers_losses)
{
    const float logits[6] = {2, -1, 0.5f, -3, 100, -100};
    const float eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const struct {
        enum tfs_loss loss;
        enum tfs_activation act;
        double sum;
        int64_t correct, units;
    } CASES[] = {
        {TFS_LOSS_SPARSE_SOFTMAX_XENT, TFS_ACT_NONE, 200.24131129665716, 1, 2},
        {TFS_LOSS_SPARSE_SOFTMAX_XENT, TFS_ACT_SOFTMAX, 200.24131129665716, 1, 2},
        {TFS_LOSS_SOFTMAX_XENT, TFS_ACT_NONE, 1.891311296657157, 1, 2},
        {TFS_LOSS_SOFTMAX_XENT, TFS_ACT_SOFTMAX, 1.891311296657157, 1, 2},
        {TFS_LOSS_SIGMOID_XENT, TFS_ACT_NONE, 33.654284678105014, 5, 6},
        {TFS_LOSS_SIGMOID_XENT, TFS_ACT_SIGMOID, 33.654284678105014, 5, 6},
        {TFS_LOSS_MSE, TFS_ACT_NONE, 6671.416666666667, 0, 0},
    };
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        tfs_layer_spec layers[] = {tfs_layer_dense(3, CASES[c].act)};
        tfs_optimizer_spec o = sgd(0.1);
        tfs_model *m = model_of(layers, 1, 1, (int64_t[]){3}, (int)CASES[c].loss, &o);
        set_var(m, "dense/kernel", eye);
        tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, logits);
        tfs_tensor *y;
        switch (CASES[c].loss) {
        case TFS_LOSS_SPARSE_SOFTMAX_XENT:
            y = tensor(TFS_DTYPE_INT32, 1, (int64_t[]){2}, (int32_t[]){0, 2});
            break;
        case TFS_LOSS_SOFTMAX_XENT:
            y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, (float[]){.2f, .3f, .5f, 0, 1, 0});
            break;
        case TFS_LOSS_SIGMOID_XENT:
            y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, (float[]){1, 0, 1, 0, 1, 1});
            break;
        default:
            y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, (float[]){1, 1, 1, 0, 0, 0});
        }
        double sum;
        int64_t correct = -1;
        tfs_status st;
        ck_assert_msg(tfs_model_eval_batch(m, x, y, &sum, &correct, &st) == TFS_OK, "%s", st.msg);
        ck_assert_msg(fabs(sum - CASES[c].sum) <= 1e-5 * CASES[c].sum, "case %zu (%s): loss sum "
                      "%.9g, want %.9g", c, tfs_loss_name(CASES[c].loss), sum, CASES[c].sum);
        ck_assert_int_eq(correct, CASES[c].correct);
        ck_assert_int_eq(tfs_model_accuracy_units(m, y), CASES[c].units);
        /* the training step reports the mean over the batch */
        double loss;
        ck_assert_msg(tfs_model_train_step(m, x, y, &loss, &correct, &st) == TFS_OK, "%s",
                      st.msg);
        ck_assert_msg(fabs(loss - CASES[c].sum / 2) <= 1e-5 * CASES[c].sum, "case %zu: %g", c,
                      loss);
        /* predictions from the weights before the step: set them back */
        set_var(m, "dense/kernel", eye);
        set_var(m, "dense/bias", (float[]){0, 0, 0});
        tfs_tensor *p = predict(m, x);
        for (int r = 0; r < 2; r++) {
            double mx = fmax(logits[3 * r], fmax(logits[3 * r + 1], logits[3 * r + 2])), z = 0;
            for (int k = 0; k < 3; k++)
                z += exp(logits[3 * r + k] - mx);
            for (int k = 0; k < 3; k++) {
                double v = logits[3 * r + k], want = v;
                if (CASES[c].loss == TFS_LOSS_SIGMOID_XENT)
                    want = 1 / (1 + exp(-v));
                else if (CASES[c].loss != TFS_LOSS_MSE)
                    want = exp(v - mx) / z;
                ck_assert_msg(fabs(((float *)p->data)[3 * r + k] - want) < 1e-6, "case %zu: "
                              "prediction %d,%d is %g, want %g", c, r, k,
                              ((float *)p->data)[3 * r + k], want);
            }
        }
        tfs_tensor_unref(p);
        tfs_tensor_unref(x);
        tfs_tensor_unref(y);
        tfs_model_free(m);
    }
}
END_TEST

/* ---- initializers --------------------------------------------------------------------------- */

static void stats(const tfs_tensor *t, double *mean, double *sd, double *lo, double *hi)
{
    const float *v = t->data;
    double s = 0, q = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < t->nelem; i++) {
        s += v[i];
        q += (double)v[i] * v[i];
        *lo = fmin(*lo, v[i]);
        *hi = fmax(*hi, v[i]);
    }
    *mean = s / (double)t->nelem;
    *sd = sqrt(q / (double)t->nelem - *mean * *mean);
}

/* A model [dense(units), dense(2)] on `in` inputs with the first layer's initializers. */
static tfs_model *init_model(int64_t in, int64_t units, tfs_init_spec k, tfs_init_spec b,
                             int64_t seed)
{
    tfs_layer_spec layers[] = {tfs_layer_dense(units, TFS_ACT_RELU),
                               tfs_layer_dense(2, TFS_ACT_NONE)};
    layers[0].kernel_init = k;
    layers[0].bias_init = b;
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = in;
    spec.layers = layers;
    spec.n_layers = 2;
    spec.seed = seed;
    tfs_model *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, NULL, &m, &st) == TFS_OK, "%s", st.msg);
    return m;
}

START_TEST(test_layers_initializers)
{
    tfs_init_spec dflt = {0}, spec = {0};
    double mean, sd, lo, hi;

    /* Glorot uniform (the default kernel): U(-l, l), l = sqrt(6 / (fan_in + fan_out));
     * [300, 200]: l = sqrt(6 / 500) = 0.10954; sd l / sqrt(3) = 0.063246. Bias: zeros. */
    tfs_model *m = init_model(300, 200, dflt, dflt, 5);
    tfs_tensor *k = var_value(m, "dense/kernel");
    stats(k, &mean, &sd, &lo, &hi);
    double l = sqrt(6.0 / 500);
    ck_assert_msg(lo >= -l && hi <= l && lo < -0.99 * l && hi > 0.99 * l, "[%g, %g] vs %g", lo,
                  hi, l);
    ck_assert_msg(fabs(mean) < 0.002 && fabs(sd - l / sqrt(3)) < 0.02 * l / sqrt(3),
                  "mean %g sd %g", mean, sd);
    tfs_tensor *b = var_value(m, "dense/bias");
    stats(b, &mean, &sd, &lo, &hi);
    ck_assert(lo == 0 && hi == 0);
    /* The second layer's kernel: its own fans, its own draws. */
    tfs_tensor *k1 = var_value(m, "dense_1/kernel");
    stats(k1, &mean, &sd, &lo, &hi);
    ck_assert(hi <= sqrt(6.0 / 202) && lo >= -sqrt(6.0 / 202));
    tfs_tensor_unref(k1);

    /* The same seed gives the same weights; another seed other weights. */
    tfs_model *m2 = init_model(300, 200, dflt, dflt, 5);
    tfs_tensor *k2 = var_value(m2, "dense/kernel");
    ck_assert(memcmp(k->data, k2->data, k->nbytes) == 0);
    tfs_tensor_unref(k2);
    tfs_model_free(m2);
    m2 = init_model(300, 200, dflt, dflt, 6);
    k2 = var_value(m2, "dense/kernel");
    ck_assert(memcmp(k->data, k2->data, k->nbytes) != 0);
    int64_t same = 0;
    for (int64_t i = 0; i < k->nelem; i++)
        same += ((float *)k->data)[i] == ((float *)k2->data)[i];
    ck_assert_int_lt(same, 10);
    tfs_tensor_unref(k2);
    tfs_model_free(m2);
    /* An op-level seed fixes a kernel whatever the model's seed. */
    spec = (tfs_init_spec){.kind = TFS_INIT_GLOROT_UNIFORM, .seed = 77};
    m2 = init_model(300, 200, spec, dflt, 5);
    tfs_model *m3 = init_model(300, 200, spec, dflt, 5);
    k2 = var_value(m2, "dense/kernel");
    tfs_tensor *k3 = var_value(m3, "dense/kernel");
    ck_assert(memcmp(k3->data, k2->data, k->nbytes) == 0);
    ck_assert(memcmp(k->data, k2->data, k->nbytes) != 0);
    tfs_tensor_unref(k2);
    tfs_tensor_unref(k3);
    tfs_model_free(m2);
    tfs_model_free(m3);
    tfs_tensor_unref(k);
    tfs_tensor_unref(b);
    tfs_model_free(m);

    /* He normal: truncated normal with sd sqrt(2 / fan_in) after truncation at 2 sd of the
     * untruncated one (Keras divides by 0.87962566): [400, 300] -> sd 0.070711, |v| <= 0.16077. */
    spec = (tfs_init_spec){.kind = TFS_INIT_HE_NORMAL};
    m = init_model(400, 300, spec, dflt, 3);
    k = var_value(m, "dense/kernel");
    stats(k, &mean, &sd, &lo, &hi);
    double want = sqrt(2.0 / 400), bound = 2 * want / 0.87962566103423978;
    ck_assert_msg(fabs(sd - want) < 0.02 * want && fabs(mean) < 0.002, "sd %g want %g", sd, want);
    ck_assert_msg(lo >= -bound && hi <= bound && hi > 0.95 * bound, "[%g, %g], bound %g", lo, hi,
                  bound);
    tfs_tensor_unref(k);
    tfs_model_free(m);

    /* zeros / ones / constant, random normal (mean 1, sd 0.5), random uniform [-2, 3) */
    spec = (tfs_init_spec){.kind = TFS_INIT_ONES};
    tfs_init_spec cb = {.kind = TFS_INIT_CONSTANT, .value = 0.25};
    m = init_model(50, 40, spec, cb, 1);
    k = var_value(m, "dense/kernel");
    b = var_value(m, "dense/bias");
    stats(k, &mean, &sd, &lo, &hi);
    ck_assert(lo == 1 && hi == 1);
    stats(b, &mean, &sd, &lo, &hi);
    ck_assert(lo == 0.25 && hi == 0.25);
    tfs_tensor_unref(k);
    tfs_tensor_unref(b);
    tfs_model_free(m);
    spec = (tfs_init_spec){.kind = TFS_INIT_ZEROS};
    m = init_model(50, 40, spec, dflt, 1);
    k = var_value(m, "dense/kernel");
    stats(k, &mean, &sd, &lo, &hi);
    ck_assert(lo == 0 && hi == 0);
    tfs_tensor_unref(k);
    tfs_model_free(m);
    spec = (tfs_init_spec){.kind = TFS_INIT_RANDOM_NORMAL, .mean = 1, .stddev = 0.5};
    m = init_model(300, 200, spec, dflt, 1);
    k = var_value(m, "dense/kernel");
    stats(k, &mean, &sd, &lo, &hi);
    ck_assert_msg(fabs(mean - 1) < 0.01 && fabs(sd - 0.5) < 0.01 && lo < -0.8 && hi > 2.8,
                  "mean %g sd %g [%g, %g]", mean, sd, lo, hi);
    tfs_tensor_unref(k);
    tfs_model_free(m);
    spec = (tfs_init_spec){.kind = TFS_INIT_TRUNCATED_NORMAL, .stddev = 1};
    m = init_model(300, 200, spec, dflt, 1);
    k = var_value(m, "dense/kernel");
    stats(k, &mean, &sd, &lo, &hi);
    /* a unit normal truncated at +-2 has sd 0.87962566 */
    ck_assert_msg(lo >= -2 && hi <= 2 && fabs(sd - 0.8796) < 0.01, "sd %g [%g, %g]", sd, lo, hi);
    tfs_tensor_unref(k);
    tfs_model_free(m);
    spec = (tfs_init_spec){.kind = TFS_INIT_RANDOM_UNIFORM, .minval = -2, .maxval = 3};
    m = init_model(300, 200, spec, dflt, 1);
    k = var_value(m, "dense/kernel");
    stats(k, &mean, &sd, &lo, &hi);
    ck_assert_msg(lo >= -2 && hi < 3 && lo < -1.99 && hi > 2.99 && fabs(mean - 0.5) < 0.02,
                  "mean %g [%g, %g]", mean, lo, hi);
    tfs_tensor_unref(k);
    tfs_model_free(m);

    /* A conv kernel's fans count the receptive field: 3x3x4 -> 8: fan_in 36, fan_out 72,
     * Glorot limit sqrt(6 / 108) = 0.2357. */
    tfs_layer_spec conv[] = {tfs_layer_conv2d(8, 3, 1, true, TFS_ACT_RELU),
                             tfs_layer_of(TFS_LAYER_FLATTEN), tfs_layer_dense(2, TFS_ACT_NONE)};
    tfs_model_spec cs = tfs_model_spec_default();
    cs.input_rank = 3;
    cs.input_shape[0] = cs.input_shape[1] = 5;
    cs.input_shape[2] = 4;
    cs.layers = conv;
    cs.n_layers = 3;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&cs, NULL, &m, &st) == TFS_OK, "%s", st.msg);
    k = var_value(m, "conv2d/kernel");
    ck_assert(k->rank == 4 && k->dims[0] == 3 && k->dims[1] == 3 && k->dims[2] == 4 &&
              k->dims[3] == 8);
    stats(k, &mean, &sd, &lo, &hi);
    l = sqrt(6.0 / 108);
    ck_assert_msg(lo >= -l && hi <= l && hi > 0.9 * l && lo < -0.9 * l, "[%g, %g] vs %g", lo, hi,
                  l);
    tfs_tensor_unref(k);
    tfs_model_free(m);
}
END_TEST

/* ---- names ---------------------------------------------------------------------------------- */

START_TEST(test_layers_keras_names)
{
    tfs_layer_spec layers[] = {
        tfs_layer_conv2d(4, 3, 1, true, TFS_ACT_RELU), tfs_layer_of(TFS_LAYER_BATCH_NORM),
        tfs_layer_pool2d(TFS_LAYER_MAX_POOL2D, 2, 0, false), tfs_layer_conv2d(4, 1, 1, true,
                                                                             TFS_ACT_NONE),
        tfs_layer_of(TFS_LAYER_FLATTEN), tfs_layer_dense(8, TFS_ACT_RELU),
        tfs_layer_of(TFS_LAYER_DROPOUT), tfs_layer_dense(3, TFS_ACT_NONE),
        tfs_layer_dense(3, TFS_ACT_NONE)};
    layers[6].rate = 0.5;
    snprintf(layers[8].name, sizeof layers[8].name, "logits");
    tfs_optimizer_spec o = tfs_optimizer_spec_default();   /* Adam */
    tfs_model *m = model_of(layers, 9, 3, (int64_t[]){6, 6, 2}, TFS_LOSS_SPARSE_SOFTMAX_XENT, &o);
    static const char *const WEIGHTS[] = {
        "conv2d/kernel", "conv2d/bias", "batch_normalization/gamma", "batch_normalization/beta",
        "batch_normalization/moving_mean", "batch_normalization/moving_variance",
        "conv2d_1/kernel", "conv2d_1/bias", "dense/kernel", "dense/bias", "dense_1/kernel",
        "dense_1/bias", "logits/kernel", "logits/bias"};
    int nw = (int)(sizeof WEIGHTS / sizeof *WEIGHTS);
    for (int i = 0; i < nw; i++) {
        int k = tfs_model_variable_find(m, WEIGHTS[i]);
        ck_assert_msg(k >= 0, "no variable %s", WEIGHTS[i]);
        ck_assert_msg(tfs_model_variable_is_weight(m, k), "%s is not a weight", WEIGHTS[i]);
        bool moving = strstr(WEIGHTS[i], "moving_") != NULL;
        char slot[160];
        snprintf(slot, sizeof slot, "%s/Adam", WEIGHTS[i]);
        ck_assert_msg((tfs_model_variable_find(m, slot) >= 0) == !moving, "%s", slot);
        snprintf(slot, sizeof slot, "%s/Adam_1", WEIGHTS[i]);
        ck_assert_msg((tfs_model_variable_find(m, slot) >= 0) == !moving, "%s", slot);
        if (!moving)
            ck_assert(!tfs_model_variable_is_weight(m, tfs_model_variable_find(m, slot)));
    }
    /* Adam's state: 2 slots per trainable weight (14 - 2 moving), beta powers, global step */
    ck_assert_int_eq(tfs_model_variable_count(m), nw + 2 * 12 + 3);
    ck_assert(!tfs_model_variable_is_weight(m, tfs_model_variable_find(m, "global_step")));
    ck_assert(!tfs_model_variable_is_weight(m, tfs_model_variable_find(m, "beta1_power")));
    ck_assert_int_ge(tfs_model_variable_find(m, "beta2_power"), 0);
    ck_assert_int_lt(tfs_model_variable_find(m, "dense_2/kernel"), 0);
    ck_assert_int_lt(tfs_model_variable_find(m, "dropout/kernel"), 0);
    ck_assert_int_eq(tfs_model_variable_find(m, NULL), -1);
    ck_assert_ptr_null(tfs_model_variable_name(m, -1));
    ck_assert_ptr_null(tfs_model_variable_name(m, tfs_model_variable_count(m)));
    tfs_model_free(m);

    /* The other optimizers' slot names (TF1's: "<var>/<Optimizer>[_k]"). */
    static const struct {
        enum tfs_optimizer_kind kind;
        bool centered;
        const char *slots[4];
    } SLOTS[] = {{TFS_OPT_SGD, false, {NULL}},
                 {TFS_OPT_MOMENTUM, false, {"Momentum", NULL}},
                 {TFS_OPT_RMSPROP, false, {"RMSProp", "RMSProp_1", NULL}},
                 {TFS_OPT_RMSPROP, true, {"RMSProp", "RMSProp_1", "RMSProp_2", NULL}},
                 {TFS_OPT_ADAGRAD, false, {"Adagrad", NULL}}};
    tfs_layer_spec one[] = {tfs_layer_dense(2, TFS_ACT_NONE)};
    for (size_t s = 0; s < sizeof SLOTS / sizeof *SLOTS; s++) {
        o = tfs_optimizer_spec_default();
        o.kind = SLOTS[s].kind;
        o.centered = SLOTS[s].centered;
        m = model_of(one, 1, 1, (int64_t[]){3}, TFS_LOSS_SPARSE_SOFTMAX_XENT, &o);
        int n = 0;
        for (; SLOTS[s].slots[n]; n++) {
            char name[64];
            snprintf(name, sizeof name, "dense/kernel/%s", SLOTS[s].slots[n]);
            ck_assert_msg(tfs_model_variable_find(m, name) >= 0, "no %s", name);
            snprintf(name, sizeof name, "dense/bias/%s", SLOTS[s].slots[n]);
            ck_assert_msg(tfs_model_variable_find(m, name) >= 0, "no %s", name);
        }
        ck_assert_int_eq(tfs_model_variable_count(m), 3 + 2 * n);
        tfs_model_free(m);
    }
}
END_TEST

/* ---- bad specs ------------------------------------------------------------------------------ */

static void expect_bad(const tfs_layer_spec *layers, int n, int rank, const int64_t *shape,
                       enum tfs_dtype dt, const char *what)
{
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = rank;
    memcpy(spec.input_shape, shape, (size_t)rank * sizeof *shape);
    spec.input_dtype = dt;
    spec.layers = layers;
    spec.n_layers = n;
    spec.loss = TFS_LOSS_MSE;
    tfs_model *m = (tfs_model *)1;
    tfs_status st;
    enum tfs_code rc = tfs_model_new(&spec, NULL, &m, &st);
    ck_assert_msg(rc == TFS_INVALID_ARGUMENT, "%s: %s (%s)", what, tfs_code_name(rc),
                  rc == TFS_OK ? "" : st.msg);
    ck_assert_msg(strstr(st.msg, what) != NULL, "want '%s' in '%s'", what, st.msg);
    ck_assert_ptr_null(m);
}

START_TEST(test_layers_bad_specs)
{
    const int64_t img[3] = {4, 4, 1}, vec[1] = {6};
    tfs_layer_spec l[3];
    const tfs_layer_spec flat = tfs_layer_of(TFS_LAYER_FLATTEN);
    l[0] = tfs_layer_conv2d(2, 3, 1, true, TFS_ACT_RELU);
    l[1] = tfs_layer_dense(2, TFS_ACT_NONE);
    expect_bad(l, 2, 3, img, TFS_DTYPE_FLOAT, "layer 1 (dense): a dense layer needs a rank-1");
    expect_bad(l, 1, 1, vec, TFS_DTYPE_FLOAT, "layer 0 (conv2d): needs [height, width, channels]");
    l[0] = tfs_layer_pool2d(TFS_LAYER_MAX_POOL2D, 5, 1, false);
    expect_bad(l, 1, 3, img, TFS_DTYPE_FLOAT, "layer 0 (max_pooling2d): input size 4 is smaller "
               "than the window 5");
    l[0] = tfs_layer_pool2d(TFS_LAYER_AVG_POOL2D, 0, 1, true);
    expect_bad(l, 1, 3, img, TFS_DTYPE_FLOAT, "layer 0 (average_pooling2d): kernel and strides");
    l[0] = tfs_layer_conv2d(0, 3, 1, true, TFS_ACT_RELU);
    expect_bad(l, 1, 3, img, TFS_DTYPE_FLOAT, "layer 0 (conv2d): filters must be >= 1");
    l[0] = tfs_layer_dense(0, TFS_ACT_RELU);
    expect_bad(l, 1, 1, vec, TFS_DTYPE_FLOAT, "layer 0 (dense): units must be >= 1");
    l[0] = flat;
    l[1] = tfs_layer_of(TFS_LAYER_DROPOUT);
    l[1].rate = 1;
    l[2] = tfs_layer_dense(1, TFS_ACT_NONE);
    expect_bad(l, 3, 1, vec, TFS_DTYPE_FLOAT, "layer 1 (dropout): rate must be in [0, 1)");
    l[1].rate = -0.1;
    expect_bad(l, 3, 1, vec, TFS_DTYPE_FLOAT, "layer 1 (dropout)");
    l[1] = tfs_layer_of(TFS_LAYER_EMBEDDING);
    l[1].input_dim = 10;
    l[1].units = 2;
    expect_bad(l, 2, 1, vec, TFS_DTYPE_FLOAT, "layer 1 (embedding): an embedding must be the "
               "first layer");
    l[0] = l[1];
    l[0].input_dim = 0;
    expect_bad(l, 1, 1, vec, TFS_DTYPE_INT32, "layer 0 (embedding): needs input_dim >= 1");
    l[0] = tfs_layer_dense(2, TFS_ACT_NONE);
    expect_bad(l, 1, 1, vec, TFS_DTYPE_INT32, "int32 inputs need an embedding first layer");
}
END_TEST

START_TEST(test_layers_bad_specs_2)
{
    const int64_t vec[1] = {6}, mat[2] = {3, 2};
    tfs_layer_spec l[2] = {tfs_layer_of(TFS_LAYER_BATCH_NORM), tfs_layer_dense(1, TFS_ACT_NONE)};
    expect_bad(l, 1, 2, mat, TFS_DTYPE_FLOAT, "layer 0 (batch_normalization): batch "
               "normalization takes [features] or [height, width, channels]");
    l[0] = tfs_layer_dense(3, TFS_ACT_RELU);
    snprintf(l[0].name, sizeof l[0].name, "same");
    snprintf(l[1].name, sizeof l[1].name, "same");
    expect_bad(l, 2, 1, vec, TFS_DTYPE_FLOAT, "layer 1: duplicate name 'same'");
    l[1] = tfs_layer_dense(1, (enum tfs_activation)99);
    expect_bad(l, 2, 1, vec, TFS_DTYPE_FLOAT, "layer 1 (dense): unknown activation 99");
    l[1] = tfs_layer_dense(1, TFS_ACT_NONE);
    l[1].kernel_init.kind = (enum tfs_init_kind)42;
    expect_bad(l, 2, 1, vec, TFS_DTYPE_FLOAT, "layer 1 (dense): unknown initializer");
    l[1] = tfs_layer_of((enum tfs_layer_kind)77);
    expect_bad(l, 2, 1, vec, TFS_DTYPE_FLOAT, "layer 1: unknown kind");
    expect_bad(l, 0, 1, vec, TFS_DTYPE_FLOAT, "at least one layer");
    l[0] = tfs_layer_dense(3, TFS_ACT_RELU);
    expect_bad(l, 1, 1, (int64_t[]){0}, TFS_DTYPE_FLOAT, "input dimension 0 is 0");
    expect_bad(l, 1, 1, vec, TFS_DTYPE_STRING, "input dtype must be float or int32");
    /* a loss that does not fit the last layer names it */
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 6;
    spec.layers = l;
    spec.n_layers = 1;
    l[0] = tfs_layer_dense(1, TFS_ACT_NONE);
    snprintf(l[0].name, sizeof l[0].name, "out");
    tfs_model *m = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_model_new(&spec, NULL, &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "(out)") && strstr(st.msg, "at least 2 classes"), "%s", st.msg);
}
END_TEST

Suite *suite_train_layers(void)
{
    Suite *s = suite_create("train_layers");
    TCase *tc = tcase_create("layers");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_layers_conv_pool_shapes);
    tcase_add_test(tc, test_layers_flatten);
    tcase_add_test(tc, test_layers_dropout);
    tcase_add_test(tc, test_layers_batch_norm_dense);
    tcase_add_test(tc, test_layers_batch_norm_images);
    tcase_add_test(tc, test_layers_embedding);
    tcase_add_test(tc, test_layers_activations);
    tcase_add_test(tc, test_layers_losses);
    tcase_add_test(tc, test_layers_initializers);
    tcase_add_test(tc, test_layers_keras_names);
    tcase_add_test(tc, test_layers_bad_specs);
    tcase_add_test(tc, test_layers_bad_specs_2);
    suite_add_tcase(s, tc);
    return s;
}
