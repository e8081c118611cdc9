/* System test of data-parallel training: the real build/train/tfserve-train under the real
 * mpirun (Open MPI, --oversubscribe: CI has 2 cores) on small generated IDX files of 8x8 images
 * in four classes. Weights are compared by reading the checkpoints each run writes.
 *
 *   equivalence  2 ranks with per-rank batch B/2 end with the weights of 1 process with batch B
 *                after the same steps, for an MLP (Adam) and a CNN (momentum), within a stated
 *                tolerance (the sum of two half-batch gradients rounds differently from the
 *                whole batch's); 101 examples, so each epoch's last batch (5 rows) splits 2 + 3
 *                and exercises the weighting by each slice's share; with lr_scaling = linear,
 *                2 ranks at rate r match 1 process at rate 2r (SGD).
 *   resume       a 2-rank run stopped at step 6 and resumed (--resume) to step 14 ends with
 *                exactly the weights of an uninterrupted 2-rank run, and a 2-rank checkpoint
 *                resumes in 1 process (the data position is global).
 *   failures     ranks given different configs all fail naming the difference; fewer examples
 *                than ranks fails clearly; kill -9 of rank 1 mid-run ends the run non-zero
 *                within the collective timeout, leaving the last checkpoint readable; a stopped
 *                (SIGSTOP) rank 1 makes rank 0 give up after --collective_timeout naming the
 *                collective.
 *   nompi        (a build without MPI) a multi-rank environment is refused with a message.
 *
 * Exit 77 (skipped) when mpirun is absent or cannot start 2 processes here (some containers).
 * Registered with ctest as train-mpi-<case> (label system).
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "savedmodel/savedmodel.h"
#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train.h"

enum { SIDE = 8, N_TRAIN = 101, BATCH = 32 };

static char *dir;

static const char *P(const char *name)
{
    return tt_path(dir, name);
}

/* Runs a command in dir with stdout and stderr into <log>.txt; returns its exit status. */
static int run(const char *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(const char *log, const char *fmt, ...)
{
    char    cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return tt_sh("cd '%s' && %s >'%s.txt' 2>&1", dir, cmd, log);
}

static char *slurp(const char *name)
{
    size_t n;
    char  *s = tfs_test_read_file(P(name), &n);
    ck_assert_msg(s != NULL, "cannot read %s", name);
    return s;
}

/* The trainer binary and mpirun's fixed arguments. */
static const char *trainer(void)
{
    static char buf[4200];
    snprintf(buf, sizeof buf, "'%s/train/tfserve-train'", TFS_BINARY_DIR);
    return buf;
}

#define MPIRUN "mpirun --oversubscribe"

/* Images whose bright quadrant (150..250, noise 0..60 elsewhere) is the class. */
static void write_data(int n)
{
    tfs_tensor *x = NULL, *y = NULL;
    tfs_status  st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_UINT8, 3, (int64_t[]){n, SIDE, SIDE}, &x, &st),
                     TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_UINT8, 1, (int64_t[]){n}, &y, &st), TFS_OK);
    uint64_t s = 12345;
    uint8_t *px = x->data, *lab = y->data;
    for (int i = 0; i < n; i++) {
        int c = (int)(tt_rand(&s) % 4);
        lab[i] = (uint8_t)c;
        for (int r = 0; r < SIDE; r++)
            for (int q = 0; q < SIDE; q++) {
                int      quad = (r >= SIDE / 2) * 2 + (q >= SIDE / 2);
                uint64_t v = tt_rand(&s);
                px[(i * SIDE + r) * SIDE + q] =
                    (uint8_t)(quad == c ? 150 + (int)(v % 101) : (int)(v % 61));
            }
    }
    ck_assert_msg(tfs_idx_write(P("x.idx"), x, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs_idx_write(P("y.idx"), y, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor_unref(x);
    tfs_tensor_unref(y);
}

static const char MLP[] = "[model]\n"
                          "input_shape = 64\n"
                          "loss = sparse_softmax_cross_entropy\n"
                          "seed = 7\n"
                          "[layer]\n"
                          "type = dense\n"
                          "units = 16\n"
                          "activation = relu\n"
                          "[layer]\n"
                          "type = dense\n"
                          "units = 4\n"
                          "[optimizer]\n"
                          "name = adam\n"
                          "learning_rate = 0.01\n";

static const char CNN[] = "[model]\n"
                          "input_shape = 8, 8, 1\n"
                          "loss = sparse_softmax_cross_entropy\n"
                          "seed = 7\n"
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
                          "type = dense\n"
                          "units = 4\n"
                          "[optimizer]\n"
                          "name = momentum\n"
                          "learning_rate = 0.05\n";

/* <name>: the data (shuffled, seed 5), batch_size, the model, 4 epochs. */
static void write_config(const char *name, int batch, const char *model)
{
    char text[4096];
    snprintf(text, sizeof text,
             "[data]\n"
             "format = idx\n"
             "train_features = x.idx\n"
             "train_labels = y.idx\n"
             "scale = 0.00392156862745098\n"
             "batch_size = %d\n"
             "seed = 5\n"
             "prefetch = 0\n"
             "%s"
             "[train]\n"
             "epochs = 4\n"
             "histograms = false\n",
             batch, model);
    ck_assert_int_eq(tfs_test_write_file(P(name), text, strlen(text)), 0);
}

/* Largest |a - b| over every model weight of the newest checkpoints in two directories, with the
 * largest |a| for scale; both must hold the same weights at the same global step. */
static double max_weight_diff(const char *ck_a, const char *ck_b, int64_t want_step, double *scale)
{
    tfs_status      st;
    char           *pa = NULL, *pb = NULL;
    tfs_checkpoint *a = NULL, *b = NULL;
    ck_assert_msg(tfs_checkpoint_latest(P(ck_a), &pa, &st) == TFS_OK, "%s: %s", ck_a, st.msg);
    ck_assert_msg(tfs_checkpoint_latest(P(ck_b), &pb, &st) == TFS_OK, "%s: %s", ck_b, st.msg);
    ck_assert_msg(tfs_checkpoint_open(pa, &a, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs_checkpoint_open(pb, &b, &st) == TFS_OK, "%s", st.msg);
    double diff = 0, big = 0;
    int    weights = 0;
    for (int i = 0; i < tfs_checkpoint_count(a); i++) {
        tfs_checkpoint_var v = tfs_checkpoint_var_at(a, i);
        tfs_tensor        *ta = NULL, *tb = NULL;
        if (!strcmp(v.name, "global_step")) {
            ck_assert_int_eq(tfs_checkpoint_read(a, v.name, TFS_DTYPE_INT64, &ta, &st), TFS_OK);
            ck_assert_int_eq(tfs_checkpoint_read(b, v.name, TFS_DTYPE_INT64, &tb, &st), TFS_OK);
            ck_assert_int_eq(*(int64_t *)ta->data, want_step);
            ck_assert_int_eq(*(int64_t *)tb->data, want_step);
        } else if (v.dtype == TFS_DTYPE_FLOAT && strncmp(v.name, "_tfs/", 5) &&
                   !strstr(v.name, "/Adam") && !strstr(v.name, "/Momentum") &&
                   !strstr(v.name, "_power")) {
            ck_assert_msg(tfs_checkpoint_read(a, v.name, TFS_DTYPE_FLOAT, &ta, &st) == TFS_OK, "%s",
                          st.msg);
            ck_assert_msg(tfs_checkpoint_read(b, v.name, TFS_DTYPE_FLOAT, &tb, &st) == TFS_OK,
                          "%s: %s", v.name, st.msg);
            ck_assert_int_eq(ta->nelem, tb->nelem);
            const float *fa = ta->data, *fb = tb->data;
            for (int64_t e = 0; e < ta->nelem; e++) {
                diff = fmax(diff, fabs((double)fa[e] - (double)fb[e]));
                big = fmax(big, fabs((double)fa[e]));
            }
            weights++;
        }
        tfs_tensor_unref(ta);
        tfs_tensor_unref(tb);
    }
    ck_assert_int_ge(weights, 2);
    tfs_checkpoint_close(a);
    tfs_checkpoint_close(b);
    tfs_free(pa);
    tfs_free(pb);
    *scale = big;
    return diff;
}

static void setup(void)
{
    dir = tfs_test_mkdtemp();
    ck_assert_ptr_nonnull(dir);
    write_data(N_TRAIN);
}

static void teardown(void)
{
    tfs_test_rmtree(dir);
    free(dir);
}

/* 1 process at batch B and 2 ranks at B/2, 10 steps (two epochs and a half: both partial last
 * batches included): the same weights within 1e-5 of the largest weight (measured: 6e-8). The bound
 * is loose for float rounding (the runs differ by rounding of the gradient sums, ~1e-7 relative per
 * step, which Adam can amplify where a gradient is near 0) and tight for any real difference: one
 * step more or less, a sample in the wrong shard, or a gradient not averaged moves weights by 1e-3
 * and more at these learning rates. */
static void check_equivalence(const char *model, const char *what, const char *extra)
{
    write_config("one.ini", BATCH, model);
    write_config("two.ini", BATCH / 2, model);
    ck_assert_int_eq(tt_sh("echo '%s' >>'%s'", extra, P("two.ini")), 0);
    int rc = run("one", "%s one.ini --max_steps=10 --checkpoint_dir=ck1 --quiet", trainer());
    ck_assert_msg(rc == 0, "%s: 1 process: exit %d\n%s", what, rc, slurp("one.txt"));
    rc = run("two", MPIRUN " -np 2 %s two.ini --max_steps=10 --checkpoint_dir=ck2", trainer());
    char *out = slurp("two.txt");
    ck_assert_msg(rc == 0, "%s: 2 ranks: exit %d\n%s", what, rc, out);
    char *mpi = strstr(out, "mpi: 2 ranks x batch 16 (global 32), 10 steps");
    ck_assert_msg(mpi != NULL, "%s: no MPI summary\n%s", what, out);
    printf("%s: %.*s\n", what, (int)strcspn(mpi, "\n"), mpi);
    free(out);
    double scale, d = max_weight_diff("ck1", "ck2", 10, &scale);
    printf("%s: 1 process vs 2 ranks: largest weight difference %g (largest weight %g)\n", what, d,
           scale);
    ck_assert_msg(d <= 1e-5 * fmax(scale, 1.0), "%s: weights differ by %g (largest %g)", what, d,
                  scale);
    /* Rank 0 alone wrote: one checkpoint series, no temporary files. */
    ck_assert_int_eq(tt_sh("ls '%s' | grep -q tmp", P("ck2")), 1);
}

START_TEST(test_mpi_equivalence_mlp)
{
    check_equivalence(MLP, "MLP", "");
}
END_TEST

START_TEST(test_mpi_equivalence_cnn)
{
    /* Buckets of at most 256 bytes, last variable first: dense/bias (16 bytes), dense/kernel
     * (1024, a bucket of its own), then conv2d/bias and conv2d/kernel (16 + 144) with the step's
     * figures; the first two start while the backward pass still runs. */
    check_equivalence(CNN, "CNN", "fusion_threshold_bytes = 256");
    char *out = slurp("two.txt");
    ck_assert_msg(strstr(out, "allreduce per step: 3 buckets (fusion threshold 256 bytes; 2.0 "
                              "started during the backward pass)"),
                  "%s", out);
    free(out);
}
END_TEST

/* lr_scaling = linear: 2 ranks at rate r and batch B/2 take the steps of 1 process at rate 2r and
 * batch B (plain SGD: the update is the rate times the batch's mean gradient). */
START_TEST(test_mpi_lr_scaling)
{
    char one[sizeof MLP + 64], two[sizeof MLP + 64];
    snprintf(one, sizeof one, "%.*s", (int)(strstr(MLP, "[optimizer]") - MLP), MLP);
    snprintf(two, sizeof two, "%s", one);
    strcat(one, "[optimizer]\nname = sgd\nlearning_rate = 0.2\n");
    strcat(two, "[optimizer]\nname = sgd\nlearning_rate = 0.1\n");
    write_config("one.ini", BATCH, one);
    write_config("two.ini", BATCH / 2, two);
    int rc = run("one", "%s one.ini --max_steps=10 --checkpoint_dir=ck1 --quiet", trainer());
    ck_assert_msg(rc == 0, "1 process: exit %d\n%s", rc, slurp("one.txt"));
    ck_assert_int_eq(tt_sh("echo 'lr_scaling = linear' >>'%s'", P("two.ini")), 0);
    rc = run("two", MPIRUN " -np 2 %s two.ini --max_steps=10 --checkpoint_dir=ck2 --progress=lines",
             trainer());
    char *out = slurp("two.txt");
    ck_assert_msg(rc == 0 && strstr(out, "learning rate x2"), "2 ranks: exit %d\n%s", rc, out);
    free(out);
    double scale, d = max_weight_diff("ck1", "ck2", 10, &scale);
    printf("SGD, linear scaling: largest weight difference %g (largest weight %g)\n", d, scale);
    ck_assert_msg(d <= 1e-5 * fmax(scale, 1.0), "weights differ by %g (largest %g)", d, scale);
}
END_TEST

START_TEST(test_mpi_resume)
{
    write_config("two.ini", BATCH / 2, MLP);
    int rc = run("full", MPIRUN " -np 2 %s two.ini --max_steps=14 --checkpoint_dir=full --quiet",
                 trainer());
    ck_assert_msg(rc == 0, "uninterrupted: exit %d\n%s", rc, slurp("full.txt"));
    rc = run("first", MPIRUN " -np 2 %s two.ini --max_steps=6 --checkpoint_dir=part --quiet",
             trainer());
    ck_assert_msg(rc == 0, "first half: exit %d\n%s", rc, slurp("first.txt"));
    ck_assert_int_eq(tt_sh("cp -r '%s' '%s'", P("part"), P("part1")), 0);
    rc = run("second",
             MPIRUN " -np 2 %s two.ini --max_steps=14 --checkpoint_dir=part --resume "
                    "--progress=lines",
             trainer());
    char *out = slurp("second.txt");
    ck_assert_msg(rc == 0, "resumed: exit %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "resumed from") && strstr(out, "at step 6"), "%s", out);
    free(out);
    double scale, d = max_weight_diff("full", "part", 14, &scale);
    ck_assert_msg(d == 0, "resumed weights differ by %g", d);

    /* The 2-rank checkpoint at step 6 goes on in one process with the whole batch. */
    write_config("one.ini", BATCH, MLP);
    rc = run("single", "%s one.ini --max_steps=14 --checkpoint_dir=part1 --resume --quiet",
             trainer());
    ck_assert_msg(rc == 0, "resumed in 1 process: exit %d\n%s", rc, slurp("single.txt"));
    d = max_weight_diff("full", "part1", 14, &scale);
    ck_assert_msg(d <= 1e-4 * fmax(scale, 1.0), "1-process resume differs by %g", d);
}
END_TEST

/* The pid of rank 1 of the run whose command line names `marker`, or -1. */
static pid_t find_rank1(const char *marker)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    struct dirent *e;
    pid_t          found = -1;
    while (found < 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        size_t n;
        char  *cmd = tfs_test_read_file(path, &n);
        bool   ours = false;
        for (size_t i = 0; cmd && i < n; i += strlen(cmd + i) + 1)
            if (strstr(cmd + i, "tfserve-train"))
                ours = true;
        bool marked = false;
        for (size_t i = 0; cmd && ours && i < n; i += strlen(cmd + i) + 1)
            if (strstr(cmd + i, marker))
                marked = true;
        free(cmd);
        if (!marked)
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        char *env = tfs_test_read_file(path, &n);
        for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
            if (!strcmp(env + i, "OMPI_COMM_WORLD_RANK=1"))
                found = (pid_t)atoi(e->d_name);
        free(env);
    }
    closedir(d);
    return found;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Starts a long 2-rank run in the background (a checkpoint per epoch of 4 steps into `ck`), waits
 * for its first checkpoint, sends rank 1 `sig`, and returns the run's exit status and the seconds
 * it took to end after the signal. */
static int signal_rank1(const char *ck, int sig, double *secs)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && exec " MPIRUN " -np 2 %s two.ini --epochs=100000 --checkpoint_dir=%s "
             "--collective_timeout=5 --progress=lines >%s.txt 2>&1",
             dir, trainer(), ck, ck);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char *prefix = NULL;
    pid_t r1 = -1;
    for (int i = 0; i < 600 && (!prefix || r1 < 0); i++) {
        if (!prefix)
            tfs_checkpoint_latest(P(ck), &prefix, NULL);
        r1 = find_rank1(ck);
        usleep(100000);
    }
    ck_assert_msg(prefix && r1 > 0, "no checkpoint or rank 1 after 60 s");
    tfs_free(prefix);
    ck_assert_int_eq(kill(r1, sig), 0);
    double t0 = now();
    int    status = 0;
    pid_t  w = 0;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now() - t0 < 40)
        usleep(50000);
    if (w == 0) {
        kill(-pid, SIGKILL);
        kill(r1, SIGKILL);
        waitpid(pid, &status, 0);
        ck_abort_msg("the run did not end within 40 s of the signal");
    }
    *secs = now() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(test_mpi_failures)
{
    /* Different configs: every rank fails and says why. */
    write_config("two.ini", BATCH / 2, MLP);
    write_config("other.ini", BATCH / 2, CNN);
    int rc =
        run("mismatch", MPIRUN " -np 1 %s two.ini --max_steps=2 : -np 1 %s other.ini --max_steps=2",
            trainer(), trainer());
    char *out = slurp("mismatch.txt");
    ck_assert_msg(rc != 0, "%s", out);
    ck_assert_msg(strstr(out, "rank 0 of 2: FAILED_PRECONDITION: the config (file and flags) "
                              "differs between the ranks") &&
                      strstr(out, "rank 1 of 2: FAILED_PRECONDITION: the config"),
                  "%s", out);
    free(out);

    /* One example, two ranks. */
    write_data(1);
    rc = run("small", MPIRUN " -np 2 %s two.ini --max_steps=2", trainer());
    out = slurp("small.txt");
    ck_assert_msg(rc != 0 && strstr(out, "the training set has 1 examples per epoch, fewer than "
                                         "the 2 ranks"),
                  "exit %d: %s", rc, out);
    free(out);
    write_data(N_TRAIN);

    /* kill -9 of rank 1: the run ends non-zero within the timeout (5 s, mpirun notices sooner),
     * and the newest checkpoint (written atomically) still reads. */
    double secs;
    rc = signal_rank1("killed", SIGKILL, &secs);
    ck_assert_msg(rc != 0 && secs < 15, "exit %d after %.1f s\n%s", rc, secs, slurp("killed.txt"));
    tfs_status      st;
    char           *prefix = NULL;
    tfs_checkpoint *c = NULL;
    tfs_tensor     *t = NULL;
    ck_assert_msg(tfs_checkpoint_latest(P("killed"), &prefix, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs_checkpoint_open(prefix, &c, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs_checkpoint_read(c, "dense/kernel", TFS_DTYPE_FLOAT, &t, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_tensor_unref(t);
    tfs_checkpoint_close(c);
    tfs_free(prefix);

    /* A rank that stops answering (mpirun sees nothing wrong): rank 0's watchdog gives up after
     * --collective_timeout=5 naming the collective. */
    rc = signal_rank1("stopped", SIGSTOP, &secs);
    out = slurp("stopped.txt");
    ck_assert_msg(rc != 0 && secs < 25, "exit %d after %.1f s\n%s", rc, secs, out);
    ck_assert_msg(strstr(out, "rank 0 of 2: DEADLINE_EXCEEDED: MPI collective 'gradient "
                              "allreduce (bucket 1 of 1)' made no progress in 5 s"),
                  "%s", out);
    free(out);
}
END_TEST

/* A build without MPI refuses a multi-rank environment instead of training N copies alone. */
START_TEST(test_mpi_nompi)
{
    write_config("two.ini", BATCH / 2, MLP);
    int   rc = run("nompi", "OMPI_COMM_WORLD_SIZE=2 %s two.ini --max_steps=1", trainer());
    char *out = slurp("nompi.txt");
    ck_assert_msg(rc == 1 && strstr(out, "multi-process runs (mpirun -np N) need a build with "
                                         "MPI"),
                  "exit %d: %s", rc, out);
    free(out);
}
END_TEST

int main(int argc, char **argv)
{
    /* Open MPI refuses root without these; its libraries keep allocations until exit, which a
     * sanitized build's leak check would report from every rank. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("LSAN_OPTIONS", "detect_leaks=0", 1);
    Suite *s = suite_create("train_mpi");
    if (tfs_dist_available()) {
        if (tt_sh("mpirun --version >/dev/null 2>&1") != 0) {
            printf("skipped: mpirun is not installed (Debian: openmpi-bin)\n");
            return 77;
        }
        if (tt_sh(MPIRUN " -np 2 true >/dev/null 2>&1") != 0) {
            printf("skipped: mpirun cannot start 2 processes here (" MPIRUN " -np 2 true)\n");
            return 77;
        }
    }
    struct {
        const char  *name;
        const TTest *tests[3];
        bool         mpi;
    } cases[] = {{"equivalence",
                  {test_mpi_equivalence_mlp, test_mpi_equivalence_cnn, test_mpi_lr_scaling},
                  true},
                 {"resume", {test_mpi_resume, NULL}, true},
                 {"failures", {test_mpi_failures, NULL}, true},
                 {"nompi", {test_mpi_nompi, NULL}, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].mpi != tfs_dist_available())
            continue;
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, setup, teardown);
        for (int k = 0; k < 3 && cases[i].tests[k]; k++)
            tcase_add_test(tc, cases[i].tests[k]);
        suite_add_tcase(s, tc);
    }
    return tfs_test_run(srunner_create(s), argc, argv);
}
