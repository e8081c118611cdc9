/* train/ models: graphs built from layer lists, optimizer steps against hand-computed updates,
 * learning on a small separable problem, variables by name, and export loading back into
 * tfserve's own SavedModel loader with predictions equal to the trainer's. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel.h"
#include "tests/train/example-writer.h"
#include "tests/support/tfs-test.h"
#include "train/model.h"

static tfs_tensor *tensor(enum tfs_dtype dt, int rank, const int64_t *dims, const void *v)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_msg(tfs_tensor_new(dt, rank, dims, &t, &st) == TFS_OK, "%s", st.msg);
    if (v)
        memcpy(t->data, v, t->nbytes);
    return t;
}

static double var_scalar(tfs_model *m, const char *name, int64_t i)
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

static void set_var(tfs_model *m, const char *name, int rank, const int64_t *dims, const float *v)
{
    tfs_status st;
    tfs_tensor *t = tensor(TFS_DTYPE_FLOAT, rank, dims, v);
    ck_assert_msg(tfs_model_variable_assign(m, tfs_model_variable_find(m, name), t, &st) == TFS_OK,
                  "%s", st.msg);
    tfs_tensor_unref(t);
}

/* A linear regression y = x w + b with MSE and plain SGD: one step from w = [1, -1], b = 0.5 on
 * two examples, checked against the update computed by hand:
 *   pred = [1*1 + 2*(-1) + 0.5, 3*1 + 1*(-1) + 0.5] = [-0.5, 2.5], targets [1, 2], err = [-1.5, 0.5]
 *   loss = mean(err^2) = (2.25 + 0.25) / 2 = 1.25
 *   dL/dw = 2/2 * x^T err = [1*-1.5 + 3*0.5, 2*-1.5 + 1*0.5] = [0, -2.5]; dL/db = -1.5 + 0.5 = -1
 *   lr 0.1: w = [1, -0.75], b = 0.6 */
START_TEST(test_model_sgd_step_by_hand)
{
    tfs_layer_spec layers[] = {tfs_layer_dense(1, TFS_ACT_NONE)};
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 1;
    spec.loss = TFS_LOSS_MSE;
    tfs_optimizer_spec opt = tfs_optimizer_spec_default();
    opt.kind = TFS_OPT_SGD;
    opt.learning_rate = 0.1;
    tfs_model *m;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, &opt, &m, &st) == TFS_OK, "%s", st.msg);
    set_var(m, "dense/kernel", 2, (int64_t[]){2, 1}, (float[]){1, -1});
    set_var(m, "dense/bias", 1, (int64_t[]){1}, (float[]){0.5f});
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 1});
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 1}, (float[]){1, 2});
    double loss;
    ck_assert_msg(tfs_model_train_step(m, x, y, &loss, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_double_eq_tol(loss, 1.25, 1e-6);
    ck_assert_double_eq_tol(var_scalar(m, "dense/kernel", 0), 1.0, 1e-6);
    ck_assert_double_eq_tol(var_scalar(m, "dense/kernel", 1), -0.75, 1e-6);
    ck_assert_double_eq_tol(var_scalar(m, "dense/bias", 0), 0.6, 1e-6);
    ck_assert_double_eq_tol(var_scalar(m, "global_step", 0), 1, 1e-9);
    ck_assert_int_eq(tfs_model_global_step(m), 1);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* Adam's first step moves every weight by about lr against its gradient's sign:
 * m = (1-b1) g, v = (1-b2) g^2, lr_t = lr sqrt(1-b2)/(1-b1), step = lr_t m / (sqrt(v) + eps)
 * = lr * g/|g| (up to eps). Same problem as above: dw = [0, -2.5], db = -1. */
START_TEST(test_model_adam_first_step)
{
    tfs_layer_spec layers[] = {tfs_layer_dense(1, TFS_ACT_NONE)};
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 1;
    spec.loss = TFS_LOSS_MSE;
    tfs_optimizer_spec opt = tfs_optimizer_spec_default();   /* Adam 1e-3 */
    tfs_model *m;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, &opt, &m, &st) == TFS_OK, "%s", st.msg);
    set_var(m, "dense/kernel", 2, (int64_t[]){2, 1}, (float[]){1, -1});
    set_var(m, "dense/bias", 1, (int64_t[]){1}, (float[]){0.5f});
    tfs_tensor *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 1});
    tfs_tensor *y = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 1}, (float[]){1, 2});
    ck_assert_msg(tfs_model_train_step(m, x, y, NULL, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_double_eq_tol(var_scalar(m, "dense/kernel", 0), 1.0, 1e-6);   /* g = 0 */
    ck_assert_double_eq_tol(var_scalar(m, "dense/kernel", 1), -1.0 + 0.001, 1e-6);
    ck_assert_double_eq_tol(var_scalar(m, "dense/bias", 0), 0.5 + 0.001, 1e-6);
    ck_assert_double_eq_tol(var_scalar(m, "beta1_power", 0), 0.9 * 0.9, 1e-7);
    ck_assert_double_eq_tol(var_scalar(m, "beta2_power", 0), 0.999 * 0.999, 1e-7);
    ck_assert_int_ge(tfs_model_variable_find(m, "dense/kernel/Adam"), 0);
    ck_assert_int_ge(tfs_model_variable_find(m, "dense/kernel/Adam_1"), 0);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_model_free(m);
}
END_TEST

/* Two Gaussian blobs per class in 2-D, 4 classes; an MLP with Adam reaches > 95% accuracy. */
static void blobs(int n, tfs_tensor **x, tfs_tensor **y, uint32_t seed)
{
    *x = tensor(TFS_DTYPE_FLOAT, 2, (int64_t[]){n, 2}, NULL);
    *y = tensor(TFS_DTYPE_INT32, 1, (int64_t[]){n}, NULL);
    float *xv = (*x)->data;
    int32_t *yv = (*y)->data;
    static const float cx[4] = {2, -2, 2, -2}, cy[4] = {2, 2, -2, -2};
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        int c = (int)(seed >> 30);
        float u1 = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
        seed = seed * 1664525u + 1013904223u;
        float u2 = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
        xv[2 * i] = cx[c] + 1.5f * u1;
        xv[2 * i + 1] = cy[c] + 1.5f * u2;
        yv[i] = c;
    }
}

START_TEST(test_model_learns_and_exports)
{
    tfs_layer_spec layers[] = {tfs_layer_dense(16, TFS_ACT_RELU), tfs_layer_of(TFS_LAYER_DROPOUT),
                               tfs_layer_dense(4, TFS_ACT_SOFTMAX)};
    layers[1].rate = 0.1;
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 3;
    spec.seed = 7;
    tfs_optimizer_spec opt = tfs_optimizer_spec_default();
    opt.learning_rate = 0.01;
    tfs_model *m;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, &opt, &m, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor *x, *y;
    blobs(256, &x, &y, 1);
    double first = 0, loss = 0;
    for (int step = 0; step < 150; step++) {
        ck_assert_msg(tfs_model_train_step(m, x, y, &loss, NULL, &st) == TFS_OK, "%s", st.msg);
        if (step == 0)
            first = loss;
    }
    ck_assert_msg(loss < first / 4, "loss went from %g to %g", first, loss);
    tfs_tensor *tx, *ty;
    blobs(400, &tx, &ty, 99);
    double loss_sum;
    int64_t correct;
    ck_assert_msg(tfs_model_eval_batch(m, tx, ty, &loss_sum, &correct, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_msg(correct > 380, "accuracy %lld/400", (long long)correct);

    /* Export, load with tfserve's loader, compare probabilities with the trainer's. */
    char *tmp = tfs_test_mkdtemp();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/1", tmp);
    ck_assert_msg(tfs_model_export(m, dir, &st) == TFS_OK, "%s", st.msg);
    tfs_savedmodel *sm;
    ck_assert_msg(tfs_savedmodel_load(dir, NULL, &sm, &st) == TFS_OK, "%s", st.msg);
    const tfs_signature *sig = tfs_savedmodel_signature(sm, "serving_default");
    ck_assert(sig != NULL);
    ck_assert_int_eq(sig->n_outputs, 2);
    ck_assert_str_eq(sig->outputs[0].alias, "classes");
    ck_assert_str_eq(sig->outputs[1].alias, "probabilities");
    tfs_named_tensor in = {"x", tx};
    tfs_tensor *outs[2] = {NULL, NULL};
    ck_assert_msg(tfs_savedmodel_run(sm, sig, &in, 1, outs, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor *probs = NULL;
    ck_assert_msg(tfs_model_predict(m, tx, &probs, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(outs[1]->nelem, probs->nelem);
    for (int64_t i = 0; i < probs->nelem; i++)
        ck_assert_float_eq_tol(((float *)outs[1]->data)[i], ((float *)probs->data)[i], 1e-6f);
    int64_t agree = 0;
    for (int64_t i = 0; i < 400; i++)
        agree += ((int64_t *)outs[0]->data)[i] == ((int32_t *)ty->data)[i];
    ck_assert_int_eq(agree, correct);
    tfs_tensor_unref(outs[0]);
    tfs_tensor_unref(outs[1]);

    /* The classify signature: serialized tf.Examples with feature "x" -> "classes" ("0".."3"
     * per row) and "scores", equal to the predict probabilities of the same inputs. */
    const tfs_signature *cls = tfs_savedmodel_signature(sm, "classify");
    ck_assert(cls != NULL);
    ck_assert_str_eq(cls->method_name, "tensorflow/serving/classify");
    enum { NE = 3 };
    tfs_tensor *ser = NULL;
    ck_assert(tfs_tensor_new(TFS_DTYPE_STRING, 1, (int64_t[]){NE}, &ser, &st) == TFS_OK);
    for (int i = 0; i < NE; i++) {
        tt_wbuf ex = {0};
        tt_example_begin(&ex);
        tt_example_floats(&ex, "x", (const float *)tx->data + 2 * i, 2);
        tt_example_end(&ex);
        ck_assert(tfs_tensor_set_string(ser, i, ex.b, ex.n, &st) == TFS_OK);
        free(ex.b);
    }
    tfs_named_tensor cin = {"inputs", ser};
    ck_assert_msg(tfs_savedmodel_run(sm, cls, &cin, 1, outs, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(outs[0]->dtype, TFS_DTYPE_STRING);
    ck_assert_int_eq(outs[0]->dims[0], NE);
    ck_assert_int_eq(outs[0]->dims[1], 4);
    for (int i = 0; i < NE; i++)
        for (int k = 0; k < 4; k++) {
            const tfs_string *label = &tfs_tensor_strings(outs[0])[i * 4 + k];
            ck_assert(label->len == 1 && label->data[0] == '0' + k);
            ck_assert_float_eq_tol(((float *)outs[1]->data)[i * 4 + k],
                                   ((float *)probs->data)[i * 4 + k], 1e-6f);
        }
    tfs_tensor_unref(outs[0]);
    tfs_tensor_unref(outs[1]);
    tfs_tensor_unref(ser);
    tfs_tensor_unref(probs);
    tfs_savedmodel_free(sm);
    tfs_test_rmtree(tmp);
    free(tmp);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_tensor_unref(tx);
    tfs_tensor_unref(ty);
    tfs_model_free(m);
}
END_TEST

START_TEST(test_model_bad_specs)
{
    tfs_status st;
    tfs_model *m = NULL;
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 8;
    tfs_layer_spec conv[] = {tfs_layer_conv2d(4, 3, 1, true, TFS_ACT_RELU)};
    spec.layers = conv;
    spec.n_layers = 1;
    ck_assert_int_eq(tfs_model_new(&spec, NULL, &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "conv2d") != NULL, "%s", st.msg);
    tfs_layer_spec one[] = {tfs_layer_dense(1, TFS_ACT_NONE)};
    spec.layers = one;
    ck_assert_int_eq(tfs_model_new(&spec, NULL, &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "at least 2 classes") != NULL, "%s", st.msg);
    ck_assert(m == NULL);
}
END_TEST

Suite *suite_train_model(void);
Suite *suite_train_model(void)
{
    Suite *s = suite_create("train_model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_model_sgd_step_by_hand);
    tcase_add_test(tc, test_model_adam_first_step);
    tcase_add_test(tc, test_model_learns_and_exports);
    tcase_add_test(tc, test_model_bad_specs);
    suite_add_tcase(s, tc);
    return s;
}
