/* System test of the trainer's command line (train/main.c) and of what it makes, served by the
 * real server: small IDX files of 8x8 images in four classes and a config are written, the real
 * build/train/tfserve-train trains a small CNN on them (about 300 steps) with checkpoints, event
 * files, curves and an export, then resumes for one more epoch (a second export version); the
 * real build/server/tfserve serves the export base path and a REST predict of held-out images
 * answers the right classes for nearly all, with the probabilities the export gives when loaded
 * in-process. Bad usage exits 2 with a message, a bad config or bad data 1 naming the place.
 *
 * Registered with ctest as train-cli (label system); its own executable, so test-train stays a
 * fast unit suite that needs no server.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "savedmodel/savedmodel.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"
#include "train/train.h"

enum { SIDE = 8, N_TRAIN = 304, N_EVAL = 64, BATCH = 16, EPOCHS = 16 };   /* 19 steps per epoch */

static char *dir;

/* "<dir>/<name>" in a ring of 32 buffers. */
static const char *P(const char *name)
{
    static char buf[32][4200];
    static int i;
    char *b = buf[i++ % 32];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *name)
{
    size_t n;
    char *s = tfs_test_read_file(P(name), &n);
    ck_assert_msg(s != NULL, "cannot read %s", name);
    return s;
}

/* Runs tfserve-train with args (a shell word list) in dir; stdout and stderr into out.txt and
 * err.txt there. Returns the exit status, after checking that no sanitizer spoke (in sanitized
 * builds an error exit could otherwise hide a report). */
static int train(const char *args)
{
    int rc = sh("cd '%s' && '%s/train/tfserve-train' %s >out.txt 2>err.txt", dir, TFS_BINARY_DIR,
                args);
    char *err = slurp("err.txt");
    ck_assert_msg(!strstr(err, "Sanitizer") && !strstr(err, "runtime error:"), "%s: %s", args,
                  err);
    free(err);
    return rc;
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Images of four classes: the bright quadrant is the class (values 150..250), the rest noise
 * (0..60). */
static void images(int n, uint64_t seed, tfs_tensor **x, tfs_tensor **y)
{
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_UINT8, 3, (int64_t[]){n, SIDE, SIDE}, x, &st),
                     TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_UINT8, 1, (int64_t[]){n}, y, &st), TFS_OK);
    uint8_t *px = (*x)->data, *lab = (*y)->data;
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int c = (int)(seed >> 62);
        lab[i] = (uint8_t)c;
        for (int r = 0; r < SIDE; r++)
            for (int q = 0; q < SIDE; q++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                int quad = (r >= SIDE / 2) * 2 + (q >= SIDE / 2);
                int v = (int)((seed >> 33) % 61);
                if (quad == c)
                    v = 150 + (int)((seed >> 33) % 101);
                px[(i * SIDE + r) * SIDE + q] = (uint8_t)v;
            }
    }
}

static void write_idx(const char *path, const tfs_tensor *t)
{
    tfs_status st;
    ck_assert_msg(tfs_idx_write(path, t, &st) == TFS_OK, "%s", st.msg);
}

static void write_config(const char *name, const char *labels)
{
    char text[4096];
    snprintf(text, sizeof text,
             "# a small CNN on 8x8 images of four classes\n"
             "[data]\n"
             "format = idx\n"
             "train_features = %s\n"
             "train_labels = %s\n"
             "eval_features = %s\n"
             "eval_labels = %s\n"
             "scale = 0.00392156862745098\n"
             "batch_size = %d\n"
             "seed = 5\n"
             "[model]\n"
             "input_shape = %d, %d, 1\n"
             "loss = sparse_softmax_cross_entropy\n"
             "seed = 5\n"
             "[layer]\n"
             "type = conv2d\n"
             "filters = 4\n"
             "kernel_size = 3\n"
             "padding = same\n"
             "activation = relu\n"
             "[layer]\n"
             "type = max_pool2d\n"
             "pool_size = 2\n"
             "[layer]\n"
             "type = flatten\n"
             "[layer]\n"
             "type = dropout\n"
             "rate = 0.1\n"
             "[layer]\n"
             "type = dense\n"
             "units = 4\n"
             "[optimizer]\n"
             "name = adam\n"
             "learning_rate = 0.01\n"
             "[train]\n"
             "epochs = %d\n"
             "checkpoint_dir = ckpt\n"
             "checkpoint_every_steps = 100\n"
             "keep_checkpoint_max = 2\n"
             "log_dir = logs\n"
             "log_every_steps = 50\n"
             "export_dir = export\n"
             "plot = curves.svg\n",
             P("train-x.idx"), labels, P("eval-x.idx"), P("eval-y.idx"), BATCH, SIDE, SIDE,
             EPOCHS);
    ck_assert_int_eq(tfs_test_write_file(P(name), text, strlen(text)), 0);
}

/* A fresh dir with the training and held-out IDX files and cnn.ini; the held-out images and
 * labels in *ex and *ey unless ex is NULL. */
static void setup(tfs_tensor **ex, tfs_tensor **ey)
{
    dir = tfs_test_mkdtemp();
    tfs_tensor *x, *y, *hx, *hy;
    images(N_TRAIN, 1, &x, &y);
    images(N_EVAL, 2, &hx, &hy);
    write_idx(P("train-x.idx"), x);
    write_idx(P("train-y.idx"), y);
    write_idx(P("eval-x.idx"), hx);
    write_idx(P("eval-y.idx"), hy);
    write_config("cnn.ini", P("train-y.idx"));
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    if (ex) {
        *ex = hx;
        *ey = hy;
    } else {
        tfs_tensor_unref(hx);
        tfs_tensor_unref(hy);
    }
}

START_TEST(test_cli_train_serve)
{
    tfs_tensor *ex, *ey;
    setup(&ex, &ey);

    /* Train: 16 epochs of 19 steps. */
    int rc = train("cnn.ini --progress=lines");
    char *out = slurp("out.txt"), *err = slurp("err.txt");
    ck_assert_msg(rc == 0, "exit %d\nstdout:\n%s\nstderr:\n%s", rc, out, err);
    ck_assert_msg(strstr(out, "done: 304 steps, eval accuracy ") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "epoch 16/16: 304/304 examples") != NULL, "%s", out);
    double acc = atof(strstr(out, "eval accuracy ") + 14);
    ck_assert_msg(acc >= 0.9, "eval accuracy %g\n%s", acc, out);
    ck_assert_msg(strstr(out, "exported export/1") != NULL, "%s", out);
    free(out);
    free(err);
    /* checkpoints every 100 steps and per epoch, the newest 2 kept: 300 and 304 */
    ck_assert(exists(P("ckpt/checkpoint")));
    ck_assert(exists(P("ckpt/model.ckpt-304.index")));
    ck_assert(exists(P("ckpt/model.ckpt-300.index")));
    ck_assert(!exists(P("ckpt/model.ckpt-285.index")));
    ck_assert(exists(P("export/1/saved_model.pb")));
    ck_assert(exists(P("export/1/variables/variables.index")));
    ck_assert(exists(P("curves.svg")));
    ck_assert_int_eq(sh("ls '%s'/logs/events.out.tfevents.* >/dev/null 2>&1", dir), 0);

    /* Resume for one more epoch: it starts at step 304 and exports version 2. */
    rc = train("cnn.ini --resume --epochs=17 --quiet");
    err = slurp("err.txt");
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    ck_assert(exists(P("ckpt/model.ckpt-323.index")));
    ck_assert(exists(P("export/2/saved_model.pb")));

    /* Serve the export base path and predict the first 24 held-out images over REST. */
    tfs_test_server s;
    char bflag[4300];
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", P("export"));
    const char *flags[] = {"--model_name=cnn", bflag, NULL};
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    enum { N = 24 };
    size_t cap = 64 + (size_t)N * SIDE * SIDE * 16;
    char *body = malloc(cap);
    size_t len = (size_t)snprintf(body, cap, "{\"inputs\": {\"x\": [");
    float *fx = malloc((size_t)N * SIDE * SIDE * sizeof *fx);
    const uint8_t *epx = ex->data;
    for (int i = 0; i < N; i++) {
        len += (size_t)snprintf(body + len, cap - len, "%s[", i ? ", " : "");
        for (int r = 0; r < SIDE; r++) {
            len += (size_t)snprintf(body + len, cap - len, "%s[", r ? ", " : "");
            for (int q = 0; q < SIDE; q++) {
                /* the dataset's map: x * scale in double, then float */
                float v = (float)(epx[(i * SIDE + r) * SIDE + q] * 0.00392156862745098);
                fx[(i * SIDE + r) * SIDE + q] = v;
                len += (size_t)snprintf(body + len, cap - len, "%s[%.9g]", q ? ", " : "", v);
            }
            len += (size_t)snprintf(body + len, cap - len, "]");
        }
        len += (size_t)snprintf(body + len, cap - len, "]");
    }
    snprintf(body + len, cap - len, "]}}");
    tfs_http_reply reply = tfs_http(s.rest_port, "POST", "/v1/models/cnn:predict", body);
    free(body);
    ck_assert_msg(reply.status == 200, "status %d: %s", reply.status, reply.body ? reply.body : "");
    json_error_t jerr;
    json_t *j = json_loads(reply.body, 0, &jerr);
    ck_assert_msg(j != NULL, "bad JSON: %s", reply.body);
    json_t *outputs = json_object_get(j, "outputs");
    json_t *classes = json_object_get(outputs, "classes");
    json_t *probs = json_object_get(outputs, "probabilities");
    ck_assert_msg(json_array_size(classes) == N && json_array_size(probs) == N, "%s",
                  reply.body);

    /* The export version the server picked (the latest, 2), loaded in-process. */
    tfs_savedmodel *sm = NULL;
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_load(P("export/2"), NULL, &sm, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor *xt = NULL;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 4, (int64_t[]){N, SIDE, SIDE, 1}, &xt, &st),
                     TFS_OK);
    memcpy(xt->data, fx, xt->nbytes);
    free(fx);
    const tfs_signature *sig = tfs_savedmodel_signature(sm, "serving_default");
    tfs_named_tensor in = {"x", xt};
    tfs_tensor *o[2] = {NULL, NULL};
    ck_assert_msg(tfs_savedmodel_run(sm, sig, &in, 1, o, &st) == TFS_OK, "%s", st.msg);
    int right = 0;
    const uint8_t *labels = ey->data;
    for (int i = 0; i < N; i++) {
        json_int_t c = json_integer_value(json_array_get(classes, (size_t)i));
        ck_assert_int_eq(c, ((int64_t *)o[0]->data)[i]);
        right += c == labels[i];
        json_t *row = json_array_get(probs, (size_t)i);
        ck_assert_int_eq(json_array_size(row), 4);
        for (int k = 0; k < 4; k++) {
            double p = json_number_value(json_array_get(row, (size_t)k));
            ck_assert_msg(fabs(p - ((float *)o[1]->data)[i * 4 + k]) < 1e-6, "example %d class "
                          "%d: served %.9g, export %.9g", i, k, p,
                          ((float *)o[1]->data)[i * 4 + k]);
        }
    }
    ck_assert_msg(right >= N - 2, "%d of %d classes right", right, N);
    json_decref(j);
    tfs_http_reply_free(&reply);
    tfs_tensor_unref(o[0]);
    tfs_tensor_unref(o[1]);
    tfs_tensor_unref(xt);
    tfs_savedmodel_free(sm);
    int status = tfs_test_server_stop(&s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tfserve exit %d; see %s",
                  status, s.log_path);
    tfs_tensor_unref(ex);
    tfs_tensor_unref(ey);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Bad usage: exit 2 and a message on stderr, before any config is read. */
START_TEST(test_cli_usage)
{
    dir = tfs_test_mkdtemp();
    static const struct {
        const char *args, *msg;
    } BAD[] = {
        {"", "usage: tfserve-train CONFIG"},
        {"--epochs=3", "usage: tfserve-train CONFIG"},
        {"a.ini b.ini", "more than one config file"},
        {"a.ini --bogus", "bad flag '--bogus'"},
        {"a.ini --epochs=0", "bad flag '--epochs=0'"},
        {"a.ini --epochs=three", "bad flag '--epochs=three'"},
        {"a.ini --epochs", "bad flag '--epochs'"},
        {"a.ini --max_steps=-5", "bad flag '--max_steps=-5'"},
        {"a.ini --progress=fancy", "bad flag '--progress=fancy'"},
        {"a.ini --checkpoint_dir=", "bad flag '--checkpoint_dir='"},
        {"a.ini --plot=curves.png", "--plot: only .svg files can be written"},
        {"missing.ini --resume=yes", "bad flag '--resume=yes'"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        int rc = train(BAD[i].args);
        char *err = slurp("err.txt");
        ck_assert_msg(rc == 2, "'%s': exit %d, want 2 (%s)", BAD[i].args, rc, err);
        ck_assert_msg(strstr(err, BAD[i].msg) != NULL, "'%s': stderr '%s' lacks '%s'",
                      BAD[i].args, err, BAD[i].msg);
        free(err);
    }
    ck_assert_int_eq(train("--help"), 0);
    char *out = slurp("out.txt");
    ck_assert_ptr_nonnull(strstr(out, "--resume"));
    free(out);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* A bad config, a missing one and bad data: exit 1 with a message naming the place. */
START_TEST(test_cli_failures)
{
    dir = tfs_test_mkdtemp();
    static const char bad[] = "[data]\ntrain_features = a\ntrain_labels = b\n[model]\n"
                              "input_shape = 4\n[layer]\ntype = dense\nunits = 3\n"
                              "activation = rleu\n";
    ck_assert_int_eq(tfs_test_write_file(P("bad.ini"), bad, sizeof bad - 1), 0);
    ck_assert_int_eq(train("bad.ini"), 1);
    char *err = slurp("err.txt");
    ck_assert_msg(strstr(err, "bad.ini:9:14: activation: unknown activation 'rleu'"), "%s", err);
    free(err);
    ck_assert_int_eq(train("absent.ini"), 1);
    err = slurp("err.txt");
    ck_assert_msg(strstr(err, "absent.ini"), "%s", err);
    free(err);

    /* labels outside the four classes */
    tfs_tensor *x, *y;
    images(32, 3, &x, &y);
    write_idx(P("train-x.idx"), x);
    write_idx(P("eval-x.idx"), x);
    write_idx(P("eval-y.idx"), y);
    ((uint8_t *)y->data)[5] = 9;
    write_idx(P("bad-y.idx"), y);
    write_config("data.ini", P("bad-y.idx"));
    ck_assert_int_eq(train("data.ini --quiet"), 1);
    err = slurp("err.txt");
    ck_assert_msg(strstr(err, "bad-y.idx: label 9 of example 5 is outside [0, 4)"), "%s", err);
    free(err);
    /* --resume with nothing to resume from */
    ((uint8_t *)y->data)[5] = 1;
    write_idx(P("train-y.idx"), y);
    write_config("ok.ini", P("train-y.idx"));
    ck_assert_int_eq(train("ok.ini --resume --quiet"), 1);
    err = slurp("err.txt");
    ck_assert_msg(strstr(err, "FAILED_PRECONDITION") && strstr(err, "resume: no checkpoint"),
                  "%s", err);
    free(err);
    ck_assert(!exists(P("export")));
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* SIGTERM in the middle of a run: tfserve-train stops before its next step, saves a checkpoint
 * at that step (the latest in the directory), exports nothing, says so and exits 143; --resume
 * then starts at that very step. */
START_TEST(test_cli_stop_signal)
{
    setup(NULL, NULL);   /* cnn.ini: a checkpoint every 100 steps */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char bin[4200];
        snprintf(bin, sizeof bin, "%s/train/tfserve-train", TFS_BINARY_DIR);
        if (chdir(dir) == 0 && freopen("out.txt", "w", stdout) && freopen("err.txt", "w", stderr))
            execl(bin, bin, "cnn.ini", "--epochs=100000", "--progress=lines", (char *)NULL);
        _exit(127);
    }
    /* A checkpoint at step 100 or later (one every epoch of 19 steps and every 100 steps, the
     * newest 2 kept): the run is well under way. */
    bool started = false;
    for (int i = 0; i < 1200 && !started; i++) {
        usleep(100 * 1000);
        char *latest = NULL;
        if (tfs_checkpoint_latest(P("ckpt"), &latest, NULL) == TFS_OK) {
            const char *dash = strrchr(latest, '-');
            started = dash && atoll(dash + 1) >= 100;
            tfs_free(latest);
        }
    }
    if (started)
        ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int status = 0;
    pid_t w = 0;
    for (int i = 0; i < 600 && started && (w = waitpid(pid, &status, WNOHANG)) == 0; i++)
        usleep(50 * 1000);
    if (w != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    char *out = slurp("out.txt"), *err = slurp("err.txt");
    size_t ol = strlen(out);
    ck_assert_msg(started, "no checkpoint at step 100 after 120 s\n...%s\n%s",
                  out + (ol > 1000 ? ol - 1000 : 0), err);
    ck_assert_msg(w == pid, "still running 30 s after SIGTERM\n%s", err);
    ck_assert_msg(!strstr(err, "Sanitizer") && !strstr(err, "runtime error:"), "%s", err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 143, "status %#x\n%s", status, err);
    const char *said = strstr(err, "SIGTERM: stopped at step ");
    ck_assert_msg(said != NULL, "%s", err);
    long long step = atoll(said + strlen("SIGTERM: stopped at step "));
    ck_assert_msg(step >= 100, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "model.ckpt-%lld", step);
    ck_assert_msg(strstr(said, want) != NULL, "the message names no checkpoint %s: %s", want, err);
    char *prefix = NULL;
    tfs_status st;
    ck_assert_msg(tfs_checkpoint_latest(P("ckpt"), &prefix, &st) == TFS_OK, "%s", st.msg);
    size_t pl = strlen(prefix), wl = strlen(want);
    ck_assert_msg(pl >= wl && !strcmp(prefix + pl - wl, want), "latest %s, want %s", prefix,
                  want);
    tfs_free(prefix);
    ck_assert(!exists(P("export/1")));
    ck_assert_int_eq(sh("ls '%s'/logs/events.out.tfevents.* >/dev/null 2>&1", dir), 0);
    free(out);
    free(err);

    /* --resume starts at that step; three more steps, then the usual end (eval, export). */
    char args[160];
    snprintf(args, sizeof args,
             "cnn.ini --resume --epochs=100000 --max_steps=%lld --progress=lines", step + 3);
    int rc = train(args);
    out = slurp("out.txt");
    err = slurp("err.txt");
    ol = strlen(out);
    ck_assert_msg(rc == 0, "exit %d\n...%s\n%s", rc, out + (ol > 1000 ? ol - 1000 : 0), err);
    snprintf(want, sizeof want, "model.ckpt-%lld at step %lld", step, step);
    ck_assert_msg(strstr(out, want) != NULL, "no '%s' in\n...%s", want,
                  out + (ol > 1000 ? ol - 1000 : 0));
    snprintf(want, sizeof want, "done: %lld steps", step + 3);
    ck_assert_msg(strstr(out, want) != NULL, "no '%s' in\n...%s", want,
                  out + (ol > 1000 ? ol - 1000 : 0));
    ck_assert(exists(P("export/1/saved_model.pb")));
    free(out);
    free(err);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_cli_train_serve);
    tcase_add_test(tc, test_cli_usage);
    tcase_add_test(tc, test_cli_failures);
    tcase_add_test(tc, test_cli_stop_signal);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
