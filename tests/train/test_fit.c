/* The training loop (train/fit.c) on small in-memory datasets: checkpoints every N steps with
 * keep_checkpoint_max and TensorFlow's `checkpoint` state file; resume equality (an interrupted
 * and resumed run ends with bit-identical weights and optimizer state to an uninterrupted one,
 * with shuffling, prefetch, dropout and TensorBoard histograms on); warm start; a NaN loss and
 * check_numerics; TensorBoard event files read back record by record; the SVG curves; export
 * version folders that tfserve's loader serves with the trainer's predictions; a full disk on
 * checkpoint and export; and the data errors of tfs_train_config_datasets.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "savedmodel/savedmodel.h"
#include "tensorflow/core/util/event.pb-c.h"
#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_fit(void);

static char *dir;

static void setup(void)
{
    dir = tfs_test_mkdtemp();
}

/* "<dir>/<name>" in a ring of 64 buffers: the fit options keep pointing at them. */
static const char *P(const char *name)
{
    static char buf[64][4200];
    static int i;
    char *b = buf[i++ % 64];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static void teardown(void)
{
    tfs_test_rmtree(dir);
    free(dir);
}

/* ---- data and models ------------------------------------------------------------------------ */

/* Four Gaussian-ish blobs in 2-D, class = quadrant. */
static void blobs(int n, tfs_tensor **x, tfs_tensor **y, uint64_t seed)
{
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, (int64_t[]){n, 2}, x, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT32, 1, (int64_t[]){n}, y, &st), TFS_OK);
    float *xv = (*x)->data;
    int32_t *yv = (*y)->data;
    static const float cx[4] = {2, -2, 2, -2}, cy[4] = {2, 2, -2, -2};
    for (int i = 0; i < n; i++) {
        int c = (int)(tt_rand(&seed) % 4);
        xv[2 * i] = cx[c] + 1.5f * ((float)(tt_rand(&seed) % 1000) / 1000.0f - 0.5f);
        xv[2 * i + 1] = cy[c] + 1.5f * ((float)(tt_rand(&seed) % 1000) / 1000.0f - 0.5f);
        yv[i] = c;
    }
}

enum { N_TRAIN = 200, N_EVAL = 100, BATCH = 16, STEPS_PER_EPOCH = 13 };   /* 12 x 16 + 8 */

static tfs_dataset *dataset(tfs_tensor *x, tfs_tensor *y, int64_t epochs, bool train)
{
    tfs_dataset_opts o = tfs_dataset_opts_default();
    o.batch_size = train ? BATCH : 50;
    o.shuffle_buffer = train ? N_TRAIN : 0;
    o.seed = 11;
    o.epochs = epochs;
    o.prefetch = train ? 2 : 0;
    tfs_dataset *ds = NULL;
    tfs_status st;
    ck_assert_msg(tfs_dataset_from_tensors((const char *const[]){"x", "y"},
                                           (tfs_tensor *const[]){x, y}, 2, &o, &ds, &st) == TFS_OK,
                  "%s", st.msg);
    return ds;
}

/* dense(hidden, relu) - dropout(0.25) - dense(4), Adam 0.01, seed 3. */
static tfs_model *mlp(int64_t hidden, bool check_numerics)
{
    tfs_layer_spec layers[] = {tfs_layer_dense(hidden, TFS_ACT_RELU),
                               tfs_layer_of(TFS_LAYER_DROPOUT), tfs_layer_dense(4, TFS_ACT_NONE)};
    layers[1].rate = 0.25;
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 3;
    spec.seed = 3;
    spec.check_numerics = check_numerics;
    tfs_optimizer_spec o = tfs_optimizer_spec_default();
    o.learning_rate = 0.01;
    tfs_model *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_model_new(&spec, &o, &m, &st) == TFS_OK, "%s", st.msg);
    return m;
}

static tfs_fit_opts quiet_opts(int64_t epochs)
{
    tfs_fit_opts o = tfs_fit_opts_default();
    o.epochs = epochs;
    o.quiet = true;
    return o;
}

/* Trains a fresh mlp for `epochs` with opts; returns the model (caller frees). */
typedef struct run {
    tfs_tensor *x, *y, *ex, *ey;
} run;

static run data(void)
{
    run r;
    blobs(N_TRAIN, &r.x, &r.y, 1);
    blobs(N_EVAL, &r.ex, &r.ey, 2);
    return r;
}

static void data_free(run *r)
{
    tfs_tensor_unref(r->x);
    tfs_tensor_unref(r->y);
    tfs_tensor_unref(r->ex);
    tfs_tensor_unref(r->ey);
}

static enum tfs_code fit(tfs_model *m, const run *r, const tfs_fit_opts *o, tfs_fit_result *res,
                         tfs_status *st)
{
    tfs_dataset *tr = dataset(r->x, r->y, o->epochs, true);
    tfs_dataset *ev = dataset(r->ex, r->ey, 1, false);
    enum tfs_code rc = tfs_train_fit(m, tr, ev, o, res, st);
    tfs_dataset_free(tr);
    tfs_dataset_free(ev);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in d, joined by ' ' (malloc'ed). */
static char *listing(const char *d)
{
    char *names[256];
    int n = 0;
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    while ((e = readdir(dd)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n < 256)
            names[n++] = strdup(e->d_name);
    closedir(dd);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *s = calloc(1, len);
    for (int i = 0; i < n; i++) {
        strcat(s, names[i]);
        if (i + 1 < n)
            strcat(s, " ");
        free(names[i]);
    }
    return s;
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Every variable of a equals b's, bit for bit. */
static void expect_same_variables(tfs_model *a, tfs_model *b)
{
    ck_assert_int_eq(tfs_model_variable_count(a), tfs_model_variable_count(b));
    tfs_status st;
    for (int i = 0; i < tfs_model_variable_count(a); i++) {
        const char *name = tfs_model_variable_name(a, i);
        tfs_tensor *va = NULL, *vb = NULL;
        ck_assert_int_eq(tfs_model_variable_value(a, i, &va, &st), TFS_OK);
        ck_assert_int_eq(tfs_model_variable_value(b, tfs_model_variable_find(b, name), &vb, &st),
                         TFS_OK);
        ck_assert_msg(tt_tensor_equal(va, vb), "variable %s differs", name);
        tfs_tensor_unref(va);
        tfs_tensor_unref(vb);
    }
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* 2 epochs of 13 steps, checkpoints every 5 steps and at each epoch's end: 5, 10, 13, 15, 20, 25,
 * 26; keep_checkpoint_max 3 leaves 20, 25 and 26, and the state file lists exactly those. */
START_TEST(test_fit_checkpoints)
{
    run r = data();
    tfs_model *m = mlp(16, false);
    tfs_fit_opts o = quiet_opts(2);
    const char *ck = P("ckpt");
    o.checkpoint_dir = ck;
    o.checkpoint_every_steps = 5;
    o.keep_checkpoint_max = 3;
    tfs_fit_result res;
    tfs_status st;
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(res.global_step, 2 * STEPS_PER_EPOCH);
    ck_assert_int_eq(res.epochs, 2);
    char *names = listing(ck);
    ck_assert_str_eq(names, "checkpoint "
                            "model.ckpt-20.data-00000-of-00001 model.ckpt-20.index "
                            "model.ckpt-25.data-00000-of-00001 model.ckpt-25.index "
                            "model.ckpt-26.data-00000-of-00001 model.ckpt-26.index");
    free(names);
    tfs_checkpoint_state *cs = NULL;
    ck_assert_msg(tfs_checkpoint_state_read(ck, &cs, &st) == TFS_OK, "%s", st.msg);
    ck_assert_str_eq(cs->model_checkpoint_path, "model.ckpt-26");
    ck_assert_int_eq(cs->n_paths, 3);
    ck_assert_str_eq(cs->all_model_checkpoint_paths[0], "model.ckpt-20");
    ck_assert_str_eq(cs->all_model_checkpoint_paths[1], "model.ckpt-25");
    ck_assert_str_eq(cs->all_model_checkpoint_paths[2], "model.ckpt-26");
    ck_assert_int_eq(cs->n_timestamps, 3);
    ck_assert(cs->all_model_checkpoint_timestamps[0] <= cs->all_model_checkpoint_timestamps[2]);
    tfs_checkpoint_state_free(cs);
    ck_assert_str_eq(res.checkpoint, tt_path(ck, "model.ckpt-26"));

    /* The last checkpoint holds every variable with its value, and the fit state. */
    tfs_checkpoint *c = NULL;
    ck_assert_msg(tfs_checkpoint_open(res.checkpoint, &c, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(tfs_checkpoint_count(c), tfs_model_variable_count(m) + 3);
    for (int i = 0; i < tfs_model_variable_count(m); i++) {
        const char *name = tfs_model_variable_name(m, i);
        tfs_tensor *a = NULL, *b = NULL;
        ck_assert_msg(tfs_checkpoint_read(c, name, TFS_DTYPE_INVALID, &a, &st) == TFS_OK, "%s",
                      st.msg);
        ck_assert_int_eq(tfs_model_variable_value(m, i, &b, &st), TFS_OK);
        ck_assert_msg(tt_tensor_equal(a, b), "%s", name);
        tfs_tensor_unref(a);
        tfs_tensor_unref(b);
    }
    tfs_tensor *t = NULL;
    ck_assert_int_eq(tfs_checkpoint_read(c, "global_step", TFS_DTYPE_INT64, &t, &st), TFS_OK);
    ck_assert_int_eq(*(int64_t *)t->data, 26);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_checkpoint_read(c, "_tfs/data_position", TFS_DTYPE_INT64, &t, &st),
                     TFS_OK);
    ck_assert_int_eq(t->nelem, 3);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_checkpoint_read(c, "_tfs/rng_state", TFS_DTYPE_INT64, &t, &st), TFS_OK);
    ck_assert(t->rank == 2 && t->dims[1] == 3 && t->dims[0] >= 1);   /* dropout's generator */
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_checkpoint_read(c, "_tfs/history", TFS_DTYPE_DOUBLE, &t, &st), TFS_OK);
    ck_assert(t->rank == 2 && t->dims[0] == 2 && t->dims[1] == 5);
    ck_assert(((double *)t->data)[0] == res.train_loss[0]);
    ck_assert(((double *)t->data)[5 + 3] == res.eval_accuracy[1]);
    tfs_tensor_unref(t);
    tfs_checkpoint_close(c);
    tfs_fit_result_free(&res);
    tfs_model_free(m);

    /* keep_checkpoint_max 0 keeps every one; resume without a checkpoint is refused */
    m = mlp(16, false);
    o = quiet_opts(1);
    o.checkpoint_dir = P("all");
    o.checkpoint_every_steps = 4;
    o.keep_checkpoint_max = 0;
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    names = listing(P("all"));
    ck_assert_str_eq(names, "checkpoint "
                            "model.ckpt-12.data-00000-of-00001 model.ckpt-12.index "
                            "model.ckpt-13.data-00000-of-00001 model.ckpt-13.index "
                            "model.ckpt-4.data-00000-of-00001 model.ckpt-4.index "
                            "model.ckpt-8.data-00000-of-00001 model.ckpt-8.index");
    free(names);
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    /* every N seconds: a tiny N checkpoints after every step */
    m = mlp(16, false);
    o = quiet_opts(1);
    o.checkpoint_dir = P("secs");
    o.checkpoint_every_secs = 1e-9;
    o.keep_checkpoint_max = 0;
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    tfs_checkpoint_state *cs2 = NULL;
    ck_assert_msg(tfs_checkpoint_state_read(P("secs"), &cs2, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(cs2->n_paths, STEPS_PER_EPOCH);
    for (int i = 0; i < STEPS_PER_EPOCH; i++) {
        char want[32];
        snprintf(want, sizeof want, "model.ckpt-%d", i + 1);
        ck_assert_str_eq(cs2->all_model_checkpoint_paths[i], want);
    }
    tfs_checkpoint_state_free(cs2);
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    m = mlp(16, false);
    o = quiet_opts(1);
    o.resume = true;
    o.checkpoint_dir = P("empty");
    ck_assert_int_eq(fit(m, &r, &o, &res, &st), TFS_FAILED_PRECONDITION);
    ck_assert_ptr_nonnull(strstr(st.msg, "empty"));
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    data_free(&r);
}
END_TEST

/* ---- resume equality ------------------------------------------------------------------------ */

/* 3 epochs in one go, against 20 steps (1.5 epochs; max_steps), a fresh process-like restart
 * (new model, new datasets) and a resume to 3 epochs: every variable (weights, Adam's slots and
 * powers, global_step) ends bit-identical. The data is reshuffled every epoch, dropout draws
 * masks, prefetch runs ahead, and event files with histograms are written in both runs. */
START_TEST(test_fit_resume_equal)
{
    run r = data();
    tfs_status st;
    tfs_fit_result ra, rb;

    tfs_model *a = mlp(16, false);
    tfs_fit_opts o = quiet_opts(3);
    o.checkpoint_dir = P("a");
    o.log_dir = P("a-logs");
    o.log_every_steps = 3;
    ck_assert_msg(fit(a, &r, &o, &ra, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(ra.global_step, 3 * STEPS_PER_EPOCH);

    tfs_model *b = mlp(16, false);
    o.checkpoint_dir = P("b");
    o.log_dir = P("b-logs");
    o.max_steps = 20;
    ck_assert_msg(fit(b, &r, &o, &rb, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(rb.global_step, 20);
    ck_assert_int_eq(rb.epochs, 2);   /* the second one partly */
    ck_assert(rb.train_loss[0] == ra.train_loss[0]);
    tfs_fit_result_free(&rb);
    tfs_model_free(b);

    b = mlp(16, false);
    o.max_steps = 0;
    o.resume = true;
    ck_assert_msg(fit(b, &r, &o, &rb, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(rb.global_step, 3 * STEPS_PER_EPOCH);
    ck_assert_int_eq(rb.epochs, 3);
    expect_same_variables(a, b);
    /* The curves: epoch 1 from the checkpoint's history, epoch 3 computed again alike; every
     * evaluation ran on the same weights. */
    ck_assert(rb.train_loss[0] == ra.train_loss[0]);
    ck_assert(rb.train_loss[2] == ra.train_loss[2]);
    for (int e = 0; e < 3; e++)
        ck_assert_msg(rb.eval_loss[e] == ra.eval_loss[e], "eval loss of epoch %d", e + 1);
    tfs_fit_result_free(&ra);
    tfs_fit_result_free(&rb);
    tfs_model_free(a);
    tfs_model_free(b);

    /* A resume from a checkpoint written mid-epoch by checkpoint_every_steps (not at a stop). */
    a = mlp(16, false);
    o = quiet_opts(2);
    o.checkpoint_dir = P("c");
    o.checkpoint_every_steps = 7;
    o.keep_checkpoint_max = 0;
    ck_assert_msg(fit(a, &r, &o, &ra, &st) == TFS_OK, "%s", st.msg);
    b = mlp(16, false);
    tfs_dataset *tr = dataset(r.x, r.y, 2, true);
    int n = 0;
    ck_assert_msg(tfs_train_restore(b, tr, P("c/model.ckpt-21"), false, &n, &st) ==
                  TFS_OK, "%s", st.msg);
    ck_assert_int_eq(n, tfs_model_variable_count(b));
    ck_assert_int_eq(tfs_model_global_step(b), 21);
    tfs_dataset_pos p = tfs_dataset_position(tr);
    ck_assert(p.epoch == 1 && p.index == 8 * BATCH);
    tfs_fit_opts o2 = quiet_opts(2);
    ck_assert_msg(tfs_train_fit(b, tr, NULL, &o2, &rb, &st) == TFS_OK, "%s", st.msg);
    expect_same_variables(a, b);
    tfs_dataset_free(tr);
    tfs_fit_result_free(&rb);
    tfs_model_free(b);

    /* Stopped exactly at an epoch's end (max_steps 13), resumed to 2 epochs. */
    b = mlp(16, false);
    o = quiet_opts(2);
    o.checkpoint_dir = P("d");
    o.max_steps = STEPS_PER_EPOCH;
    ck_assert_msg(fit(b, &r, &o, &rb, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(rb.epochs, 1);
    tfs_fit_result_free(&rb);
    tfs_model_free(b);
    b = mlp(16, false);
    o.max_steps = 0;
    o.resume = true;
    ck_assert_msg(fit(b, &r, &o, &rb, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(rb.epochs, 2);
    ck_assert(rb.train_loss[1] == ra.train_loss[1]);
    expect_same_variables(a, b);
    tfs_fit_result_free(&ra);
    tfs_fit_result_free(&rb);
    tfs_model_free(a);
    tfs_model_free(b);
    data_free(&r);
}
END_TEST

/* ---- warm start ----------------------------------------------------------------------------- */

START_TEST(test_fit_warm_start)
{
    run r = data();
    tfs_status st;
    tfs_fit_result ra, rb, rc;
    tfs_model *a = mlp(16, false);
    tfs_fit_opts o = quiet_opts(2);
    o.checkpoint_dir = P("a");
    ck_assert_msg(fit(a, &r, &o, &ra, &st) == TFS_OK, "%s", st.msg);

    /* Weights only: a's weights, b's own (fresh) optimizer state and step. */
    tfs_model *b = mlp(16, false);
    int n = 0;
    ck_assert_msg(tfs_train_restore(b, NULL, P("a"), true, &n, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(n, 4);   /* dense/kernel, dense/bias, dense_1/kernel, dense_1/bias */
    for (int i = 0; i < tfs_model_variable_count(b); i++) {
        const char *name = tfs_model_variable_name(b, i);
        tfs_tensor *va = NULL, *vb = NULL;
        ck_assert_int_eq(tfs_model_variable_value(a, tfs_model_variable_find(a, name), &va, &st),
                         TFS_OK);
        ck_assert_int_eq(tfs_model_variable_value(b, i, &vb, &st), TFS_OK);
        if (tfs_model_variable_is_weight(b, i))
            ck_assert_msg(tt_tensor_equal(va, vb), "weight %s not loaded", name);
        else
            ck_assert_msg(!tt_tensor_equal(va, vb), "optimizer state %s was loaded", name);
        tfs_tensor_unref(va);
        tfs_tensor_unref(vb);
    }
    ck_assert_int_eq(tfs_model_global_step(b), 0);
    tfs_model_free(b);

    /* Through fit: the first epoch starts where a ended (a much lower loss than a fresh
     * model's first epoch), the step count and Adam's powers start afresh. */
    b = mlp(16, false);
    o = quiet_opts(1);
    o.warm_start = P("a/model.ckpt-26");
    ck_assert_msg(fit(b, &r, &o, &rb, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(rb.global_step, STEPS_PER_EPOCH);
    ck_assert_msg(rb.train_loss[0] < ra.train_loss[0] / 2, "warm %g, fresh %g", rb.train_loss[0],
                  ra.train_loss[0]);
    tfs_tensor *t = NULL;
    ck_assert_int_eq(tfs_model_variable_value(b, tfs_model_variable_find(b, "beta1_power"), &t,
                                              &st), TFS_OK);
    ck_assert_float_eq_tol(*(float *)t->data, powf(0.9f, STEPS_PER_EPOCH + 1), 1e-6f);
    tfs_tensor_unref(t);
    tfs_fit_result_free(&rb);
    tfs_model_free(b);

    /* Transfer: a model whose head has another name keeps its own head and loads the rest. */
    tfs_layer_spec layers[] = {tfs_layer_dense(16, TFS_ACT_RELU), tfs_layer_dense(4, TFS_ACT_NONE)};
    snprintf(layers[1].name, sizeof layers[1].name, "head");
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 2;
    tfs_model *c = NULL;
    ck_assert_int_eq(tfs_model_new(&spec, NULL, &c, &st), TFS_OK);
    ck_assert_int_eq(tfs_train_restore(c, NULL, P("a"), true, &n, &st), TFS_OK);
    ck_assert_int_eq(n, 2);
    tfs_model_free(c);
    /* A weight of another shape is an error naming it. */
    b = mlp(32, false);
    o.warm_start = P("a");
    ck_assert_int_eq(fit(b, &r, &o, &rc, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "dense/kernel") != NULL, "%s", st.msg);
    tfs_fit_result_free(&rc);
    tfs_model_free(b);
    /* A warm start from nothing is an error naming the path. */
    b = mlp(16, false);
    o.warm_start = P("nowhere");
    ck_assert_int_ne(fit(b, &r, &o, &rc, &st), TFS_OK);
    ck_assert_msg(strstr(st.msg, "nowhere") != NULL, "%s", st.msg);
    tfs_fit_result_free(&rc);
    tfs_model_free(b);
    tfs_fit_result_free(&ra);
    tfs_model_free(a);
    data_free(&r);
}
END_TEST

/* ---- NaN ------------------------------------------------------------------------------------ */

/* A NaN feature in example 41 (no shuffling, batches of 16): step 3 has a NaN loss and the run
 * stops there with INVALID_ARGUMENT naming the step. With check_numerics the step fails before
 * any update naming the first op whose output held the NaN (the first layer's MatMul). */
START_TEST(test_fit_nan)
{
    run r = data();
    ((float *)r.x->data)[2 * 41 + 1] = NAN;
    tfs_status st;
    tfs_fit_result res;
    tfs_dataset_opts dopts = tfs_dataset_opts_default();
    dopts.batch_size = BATCH;
    dopts.epochs = 2;
    tfs_dataset *ds = NULL;
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *const[]){"x", "y"},
                                              (tfs_tensor *const[]){r.x, r.y}, 2, &dopts, &ds,
                                              &st), TFS_OK);
    tfs_model *m = mlp(16, false);
    tfs_fit_opts o = quiet_opts(2);
    o.checkpoint_dir = P("ckpt");
    ck_assert_int_eq(tfs_train_fit(m, ds, NULL, &o, &res, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "step 3: loss is nan") != NULL, "%s", st.msg);
    ck_assert_int_eq(res.epochs, 0);
    ck_assert_int_eq(res.global_step, 3);
    ck_assert(!exists(P("ckpt/checkpoint")));   /* nothing saved after a NaN */
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    tfs_dataset_free(ds);

    ck_assert_int_eq(tfs_dataset_from_tensors((const char *const[]){"x", "y"},
                                              (tfs_tensor *const[]){r.x, r.y}, 2, &dopts, &ds,
                                              &st), TFS_OK);
    m = mlp(16, true);
    o = quiet_opts(2);
    ck_assert_int_eq(tfs_train_fit(m, ds, NULL, &o, &res, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "step 3") && strstr(st.msg, "dense/MatMul:0"), "%s", st.msg);
    ck_assert_int_eq(res.global_step, 2);   /* step 3 made no update */
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    tfs_dataset_free(ds);

    /* A learning rate far too large diverges: the run stops at some step with a clear message. */
    m = NULL;
    tfs_layer_spec layers[] = {tfs_layer_dense(16, TFS_ACT_NONE), tfs_layer_dense(4, TFS_ACT_NONE)};
    tfs_model_spec spec = tfs_model_spec_default();
    spec.input_rank = 1;
    spec.input_shape[0] = 2;
    spec.layers = layers;
    spec.n_layers = 2;
    tfs_optimizer_spec opt = tfs_optimizer_spec_default();
    opt.kind = TFS_OPT_SGD;
    opt.learning_rate = 1e6;
    ck_assert_int_eq(tfs_model_new(&spec, &opt, &m, &st), TFS_OK);
    o = quiet_opts(5);
    ck_assert_int_eq(fit(m, &r, &o, &res, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "step ") && strstr(st.msg, "loss is "), "%s", st.msg);
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    data_free(&r);
}
END_TEST

/* ---- events, plot, export ------------------------------------------------------------------- */

/* Every event of every event file in d, unpacked (caller frees). */
static Tensorflow__Event **read_events(const char *d, int *n)
{
    int cap = 4096;
    Tensorflow__Event **ev = calloc((size_t)cap, sizeof *ev);
    *n = 0;
    DIR *dd = opendir(d);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dd)) != NULL) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0)
            continue;
        files++;
        tfs_tfrecord_reader *r = NULL;
        tfs_status st;
        ck_assert_msg(tfs_tfrecord_reader_open(tt_path(d, e->d_name), &r, &st) == TFS_OK, "%s",
                      st.msg);
        const uint8_t *rec;
        size_t len;
        while (tfs_tfrecord_reader_next(r, &rec, &len, &st) == TFS_OK) {
            ck_assert_int_lt(*n, cap);
            ev[*n] = tensorflow__event__unpack(NULL, len, rec);
            ck_assert_ptr_nonnull(ev[*n]);
            (*n)++;
        }
        ck_assert_msg(st.code == TFS_OUT_OF_RANGE, "%s", st.msg);   /* every CRC held */
        tfs_tfrecord_reader_close(r);
    }
    closedir(dd);
    ck_assert_int_eq(files, 1);
    return ev;
}

/* The scalar `tag` at `step`, NAN when absent; *count gets how many events carry the tag. */
static double scalar_at(Tensorflow__Event **ev, int n, const char *tag, int64_t step, int *count)
{
    double v = NAN;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i]->what_case != TENSORFLOW__EVENT__WHAT_SUMMARY)
            continue;
        for (size_t k = 0; k < ev[i]->summary->n_value; k++) {
            Tensorflow__Summary__Value *sv = ev[i]->summary->value[k];
            if (strcmp(sv->tag, tag))
                continue;
            (*count)++;
            if (ev[i]->step == step &&
                sv->value_case == TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE)
                v = sv->simple_value;
            if (sv->value_case == TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO && ev[i]->step == step)
                v = sv->histo->num;
        }
    }
    return v;
}

START_TEST(test_fit_events_and_plot)
{
    run r = data();
    tfs_status st;
    tfs_fit_result res;
    tfs_model *m = mlp(16, false);
    tfs_fit_opts o = quiet_opts(2);
    const char *logs = P("logs");
    o.log_dir = logs;
    o.log_every_steps = 5;
    o.plot = P("curves.svg");
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    int n = 0, count;
    Tensorflow__Event **ev = read_events(logs, &n);
    ck_assert_int_ge(n, 3);
    ck_assert_int_eq(ev[0]->what_case, TENSORFLOW__EVENT__WHAT_FILE_VERSION);
    ck_assert_str_eq(ev[0]->file_version, "brain.Event:2");
    int graphs = 0;
    for (int i = 0; i < n; i++)
        graphs += ev[i]->what_case == TENSORFLOW__EVENT__WHAT_GRAPH_DEF &&
                  ev[i]->graph_def.len > 100;
    ck_assert_int_eq(graphs, 1);
    /* "loss" and "learning_rate" every 5 steps: 5, 10, ..., 25 */
    ck_assert(!isnan(scalar_at(ev, n, "loss", 5, &count)));
    ck_assert_int_eq(count, 5);
    ck_assert_float_eq_tol(scalar_at(ev, n, "learning_rate", 25, &count), 0.01f, 1e-9f);
    ck_assert_int_eq(count, 5);
    ck_assert(isnan(scalar_at(ev, n, "loss", 13, &count)));
    /* per epoch, at its last step: the fit result's figures (stored as float) */
    ck_assert_float_eq((float)scalar_at(ev, n, "epoch_loss", 13, &count), (float)res.train_loss[0]);
    ck_assert_int_eq(count, 2);
    ck_assert_float_eq((float)scalar_at(ev, n, "epoch_accuracy", 26, &count),
                       (float)res.train_accuracy[1]);
    ck_assert_float_eq((float)scalar_at(ev, n, "eval_loss", 26, &count), (float)res.eval_loss[1]);
    ck_assert_float_eq((float)scalar_at(ev, n, "eval_accuracy", 13, &count),
                       (float)res.eval_accuracy[0]);
    ck_assert_int_eq(count, 2);
    /* histograms of weights and their gradients, with every element counted */
    ck_assert_double_eq(scalar_at(ev, n, "dense/kernel", 13, &count), 32);
    ck_assert_int_eq(count, 2);
    ck_assert_double_eq(scalar_at(ev, n, "dense_1/bias/gradient", 26, &count), 4);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq((int)isnan(scalar_at(ev, n, "global_step", 26, &count)), 1);
    ck_assert_int_eq(count, 0);   /* optimizer state and the step are no histograms */
    for (int i = 0; i < n; i++)
        tensorflow__event__free_unpacked(ev[i], NULL);
    free(ev);

    /* The curves: an SVG document with one polyline per curve (4). */
    size_t len = 0;
    char *svg = tfs_test_read_file(o.plot, &len);
    ck_assert_ptr_nonnull(svg);
    ck_assert_ptr_nonnull(strstr(svg, "<svg"));
    ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
    int lines = 0;
    for (const char *p = svg; (p = strstr(p, "<polyline")) != NULL; p++)
        lines++;
    ck_assert_int_ge(lines, 4);
    free(svg);
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    data_free(&r);
}
END_TEST

/* Export: version folders 1, 2, ... (one more than the largest number there); each loads with
 * tfserve's loader and predicts what the trainer predicts. */
START_TEST(test_fit_export)
{
    run r = data();
    tfs_status st;
    tfs_fit_result res;
    tfs_model *m = mlp(16, false);
    tfs_fit_opts o = quiet_opts(1);
    const char *base = P("export");
    o.export_dir = base;
    o.checkpoint_dir = P("ckpt");
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    ck_assert_str_eq(res.export_path, tt_path(base, "1"));
    tfs_fit_result_free(&res);
    o.epochs = 2;
    o.resume = true;
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    ck_assert_str_eq(res.export_path, tt_path(base, "2"));
    tfs_fit_result_free(&res);
    char *names = listing(base);
    ck_assert_str_eq(names, "1 2");
    free(names);
    ck_assert(exists(tt_path(base, "2/saved_model.pb")));
    ck_assert(exists(tt_path(base, "2/variables/variables.index")));

    tfs_savedmodel *sm = NULL;
    ck_assert_msg(tfs_savedmodel_load(tt_path(base, "2"), NULL, &sm, &st) == TFS_OK, "%s", st.msg);
    const tfs_signature *sig = tfs_savedmodel_signature(sm, "serving_default");
    ck_assert_ptr_nonnull(sig);
    tfs_named_tensor in = {"x", r.ex};
    tfs_tensor *outs[2] = {NULL, NULL};
    ck_assert_msg(tfs_savedmodel_run(sm, sig, &in, 1, outs, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor *probs = NULL;
    ck_assert_msg(tfs_model_predict(m, r.ex, &probs, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(outs[1]->nelem, probs->nelem);
    for (int64_t i = 0; i < probs->nelem; i++)
        ck_assert_float_eq_tol(((float *)outs[1]->data)[i], ((float *)probs->data)[i], 1e-6f);
    int64_t agree = 0;
    for (int64_t i = 0; i < N_EVAL; i++)
        agree += ((int64_t *)outs[0]->data)[i] == ((int32_t *)r.ey->data)[i];
    ck_assert_int_ge(agree, 90);   /* the model learned the blobs */
    tfs_tensor_unref(outs[0]);
    tfs_tensor_unref(outs[1]);
    tfs_tensor_unref(probs);
    tfs_savedmodel_free(sm);

    /* The next version is one more than the largest number, whatever else is there. */
    ck_assert_int_eq(mkdir(tt_path(base, "7"), 0755), 0);
    ck_assert_int_eq(mkdir(tt_path(base, "tmp-junk"), 0755), 0);
    ck_assert_int_eq(mkdir(tt_path(base, "12abc"), 0755), 0);
    o.epochs = 3;
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    ck_assert_str_eq(res.export_path, tt_path(base, "8"));
    tfs_fit_result_free(&res);
    tfs_model_free(m);
    data_free(&r);
}
END_TEST

/* Progress: plain lines (one per epoch here, the runs being short) with the epoch's examples,
 * loss and accuracy, and the evaluation; a bar on request. */
START_TEST(test_fit_progress)
{
    run r = data();
    tfs_status st;
    tfs_fit_result res;
    for (int bar = 0; bar < 2; bar++) {
        tfs_model *m = mlp(16, false);
        tfs_fit_opts o = tfs_fit_opts_default();
        o.epochs = 2;
        o.progress = bar;
        o.out = fopen(P("progress.txt"), "w");
        ck_assert_ptr_nonnull(o.out);
        ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
        fclose(o.out);
        size_t n;
        char *text = tfs_test_read_file(P("progress.txt"), &n);
        char want[256];
        for (int e = 0; e < 2; e++) {
            if (bar)
                snprintf(want, sizeof want, "\rEpoch %d/2 [==============================] "
                         "200/200 - loss %.4f - accuracy %.4f", e + 1, res.train_loss[e],
                         res.train_accuracy[e]);
            else
                snprintf(want, sizeof want, "epoch %d/2: 200/200 examples - loss %.4f - "
                         "accuracy %.4f", e + 1, res.train_loss[e], res.train_accuracy[e]);
            ck_assert_msg(strstr(text, want) != NULL, "'%s' not in:\n%s", want, text);
            snprintf(want, sizeof want, "  eval: loss %.4f - accuracy %.4f\n", res.eval_loss[e],
                     res.eval_accuracy[e]);
            ck_assert_msg(strstr(text, want) != NULL, "'%s' not in:\n%s", want, text);
        }
        ck_assert_ptr_null(strstr(text, "400/200"));
        free(text);
        tfs_fit_result_free(&res);
        tfs_model_free(m);
    }
    data_free(&r);
}
END_TEST

/* ---- a full disk ---------------------------------------------------------------------------- */

/* Runs fit with the file size limit at `limit` bytes (writes beyond fail with EFBIG, as ENOSPC). */
static enum tfs_code fit_limited(tfs_model *m, const run *r, const tfs_fit_opts *o,
                                 tfs_fit_result *res, rlim_t limit, tfs_status *st)
{
    tfs_dataset *tr = dataset(r->x, r->y, o->epochs, true);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = limit;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    enum tfs_code rc = tfs_train_fit(m, tr, NULL, o, res, st);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    tfs_dataset_free(tr);
    return rc;
}

/* A checkpoint that does not fit on the disk: an error naming it, the directory as it was, the
 * previous checkpoint still the latest and restorable. Then an export that does not fit: an
 * error and no version folder (nothing half-written is visible). */
START_TEST(test_fit_disk_full)
{
    run r = data();
    tfs_status st;
    tfs_fit_result res;
    tfs_model *m = mlp(1024, false);   /* weights of 29 KB, checkpoints of 86 KB */
    tfs_fit_opts o = quiet_opts(1);
    const char *ck = P("ckpt");
    o.checkpoint_dir = ck;
    ck_assert_msg(fit(m, &r, &o, &res, &st) == TFS_OK, "%s", st.msg);
    tfs_fit_result_free(&res);
    char *before = listing(ck);
    size_t slen;
    char *state = tfs_test_read_file(tt_path(ck, "checkpoint"), &slen);

    o.epochs = 2;
    o.resume = true;
    enum tfs_code rc = fit_limited(m, &r, &o, &res, 16 * 1024, &st);
    /* the size limit gives EFBIG: OUT_OF_RANGE by TensorFlow's errno table */
    ck_assert_msg(rc == TFS_OUT_OF_RANGE, "%s: %s", tfs_code_name(rc), st.msg);
    ck_assert_msg(strstr(st.msg, "model.ckpt-26") != NULL, "%s", st.msg);
    ck_assert_int_eq(res.epochs, 2);   /* the epoch was trained; its checkpoint failed */
    tfs_fit_result_free(&res);
    char *after = listing(ck);
    ck_assert_str_eq(after, before);
    char *state2 = tfs_test_read_file(tt_path(ck, "checkpoint"), &slen);
    ck_assert_str_eq(state2, state);
    free(after);
    free(state2);
    /* the previous checkpoint restores into a fresh model */
    tfs_model *m2 = mlp(1024, false);
    char *prefix = NULL;
    ck_assert_int_eq(tfs_checkpoint_latest(ck, &prefix, &st), TFS_OK);
    ck_assert_str_eq(prefix, tt_path(ck, "model.ckpt-13"));
    tfs_free(prefix);
    ck_assert_msg(tfs_train_restore(m2, NULL, ck, false, NULL, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(tfs_model_global_step(m2), 13);
    tfs_model_free(m2);

    /* export under the same limit: no version folder appears */
    tfs_model_free(m);
    m = mlp(1024, false);
    o = quiet_opts(1);
    o.export_dir = P("export");
    rc = fit_limited(m, &r, &o, &res, 16 * 1024, &st);
    ck_assert_msg(rc != TFS_OK, "the export fitted");
    ck_assert_ptr_null(res.export_path);
    tfs_fit_result_free(&res);
    char *ex = listing(P("export"));
    ck_assert_msg(strcmp(ex, "") == 0, "export dir holds '%s'", ex);
    free(ex);
    free(before);
    free(state);
    tfs_model_free(m);
    data_free(&r);
}
END_TEST

/* ---- data from a config --------------------------------------------------------------------- */

static void write_idx(const char *path, enum tfs_dtype dt, int rank, const int64_t *dims,
                      const void *v)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(dt, rank, dims, &t, &st), TFS_OK);
    memcpy(t->data, v, t->nbytes);
    ck_assert_msg(tfs_idx_write(path, t, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor_unref(t);
}

static tfs_train_config *config_for(const char *features, const char *labels, const char *shape)
{
    char text[2048];
    snprintf(text, sizeof text,
             "[data]\ntrain_features = %s\ntrain_labels = %s\neval_features = %s\n"
             "eval_labels = %s\nscale = 0.5\nshift = -1\nbatch_size = 2\nprefetch = 0\n"
             "shuffle_buffer = 0\n[model]\ninput_shape = %s\n"
             "[layer]\ntype = flatten\n[layer]\ntype = dense\nunits = 4\n",
             features, labels, features, labels, shape);
    tfs_train_config *c = NULL;
    tfs_status st;
    ck_assert_msg(tfs_train_config_parse("t.ini", text, strlen(text), &c, &st) == TFS_OK, "%s",
                  st.msg);
    return c;
}

static void expect_data_error(const tfs_train_config *c, enum tfs_code want, const char *what)
{
    tfs_dataset *tr = (tfs_dataset *)1, *ev = (tfs_dataset *)1;
    tfs_status st;
    enum tfs_code rc = tfs_train_config_datasets(c, &tr, &ev, &st);
    ck_assert_msg(rc == want, "%s: %s (%s)", what, tfs_code_name(rc), rc ? st.msg : "");
    ck_assert_msg(strstr(st.msg, what) != NULL, "want '%s' in '%s'", what, st.msg);
    ck_assert_ptr_null(tr);
    ck_assert_ptr_null(ev);
}

START_TEST(test_fit_config_data)
{
    const uint8_t px[5 * 6] = {0, 2, 4, 6, 8, 10, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                               3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4};
    const uint8_t lab[5] = {0, 1, 2, 3, 1}, bad_lab[5] = {0, 1, 7, 3, 1};
    char fx[4200], fy[4200], fbad[4200], fshort[4200], ffloat[4200];
    snprintf(fx, sizeof fx, "%s", P("x.idx"));
    snprintf(fy, sizeof fy, "%s", P("y.idx"));
    snprintf(fbad, sizeof fbad, "%s", P("bad.idx"));
    snprintf(fshort, sizeof fshort, "%s", P("short.idx"));
    snprintf(ffloat, sizeof ffloat, "%s", P("float.idx"));
    write_idx(fx, TFS_DTYPE_UINT8, 3, (int64_t[]){5, 2, 3}, px);
    write_idx(fy, TFS_DTYPE_UINT8, 1, (int64_t[]){5}, lab);
    write_idx(fbad, TFS_DTYPE_UINT8, 1, (int64_t[]){5}, bad_lab);
    write_idx(fshort, TFS_DTYPE_UINT8, 1, (int64_t[]){4}, lab);
    write_idx(ffloat, TFS_DTYPE_FLOAT, 1, (int64_t[]){5}, (float[]){0, 1, 2, 3, 1});

    /* Good data: features reshaped to input_shape and mapped to x * 0.5 - 1, labels int32. */
    tfs_train_config *c = config_for(fx, fy, "3, 2");
    tfs_dataset *tr = NULL, *ev = NULL;
    tfs_status st;
    ck_assert_msg(tfs_train_config_datasets(c, &tr, &ev, &st) == TFS_OK, "%s", st.msg);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(tfs_dataset_cardinality(tr), 5);
    tfs_tensor *b[2];
    ck_assert_int_eq(tfs_dataset_next(tr, b, &st), TFS_OK);   /* in order: shuffle_buffer 0 */
    ck_assert(b[0]->dtype == TFS_DTYPE_FLOAT && b[0]->rank == 3 && b[0]->dims[0] == 2 &&
              b[0]->dims[1] == 3 && b[0]->dims[2] == 2);
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq(((float *)b[0]->data)[i], px[i] * 0.5f - 1);
    ck_assert(b[1]->dtype == TFS_DTYPE_INT32 && ((int32_t *)b[1]->data)[1] == 1);
    tfs_tensor_unref(b[0]);
    tfs_tensor_unref(b[1]);
    tfs_dataset_free(tr);
    tfs_dataset_free(ev);
    tfs_train_config_free(c);

    c = config_for(fx, fbad, "6");
    expect_data_error(c, TFS_INVALID_ARGUMENT, "bad.idx: label 7 of example 2 is outside [0, 4)");
    tfs_train_config_free(c);
    c = config_for(fx, fy, "4");
    expect_data_error(c, TFS_INVALID_ARGUMENT, "x.idx: features [5,2,3] have 6 values per "
                      "example; [model] input_shape has 4");
    tfs_train_config_free(c);
    c = config_for(fx, fshort, "6");
    expect_data_error(c, TFS_INVALID_ARGUMENT, "short.idx: 4 labels for 5 examples");
    tfs_train_config_free(c);
    c = config_for(fx, ffloat, "6");
    expect_data_error(c, TFS_INVALID_ARGUMENT, "float.idx: class labels must be integers");
    tfs_train_config_free(c);
    c = config_for(P("missing.idx"), fy, "6");
    expect_data_error(c, TFS_NOT_FOUND, "missing.idx");
    tfs_train_config_free(c);
    /* a corrupt file: the reader's error, naming it */
    ck_assert_int_eq(tfs_test_write_file(fbad, "\0\0\x08\x01\0\0\0\x09zz", 10), 0);
    c = config_for(fx, fbad, "6");
    expect_data_error(c, TFS_DATA_LOSS, "bad.idx");
    tfs_train_config_free(c);
}
END_TEST

Suite *suite_train_fit(void)
{
    Suite *s = suite_create("train_fit");
    TCase *tc = tcase_create("fit");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fit_checkpoints);
    tcase_add_test(tc, test_fit_resume_equal);
    tcase_add_test(tc, test_fit_warm_start);
    tcase_add_test(tc, test_fit_nan);
    tcase_add_test(tc, test_fit_events_and_plot);
    tcase_add_test(tc, test_fit_export);
    tcase_add_test(tc, test_fit_progress);
    tcase_add_test(tc, test_fit_disk_full);
    tcase_add_test(tc, test_fit_config_data);
    suite_add_tcase(s, tc);
    return s;
}
