/* tfserve-train: trains the model a config file describes (train/config.h; examples/ has
 * annotated ones), with progress on stdout, and exports it as a SavedModel tfserve serves.
 *
 *     tfserve-train examples/fashion_mnist_mlp.ini [--epochs=1] [--resume] [--plot=curves.svg]
 *
 * --metrics_json=FILE writes the per-epoch figures (fit.h tfs_fit_result_json) for scripts such
 * as bench/train_vs_pytorch.sh; also after a failure, with the epochs completed until then.
 *
 * SIGINT or SIGTERM stops the run before its next step: it saves a checkpoint (checkpoint_dir),
 * from which --resume goes on with the batches it would have seen, flushes the event file, says
 * "SIGTERM: stopped at step N; checkpoint PREFIX" on stderr and exits 128 + the signal's number
 * (130, 143), as a shell reports a process the signal ended. A second signal ends it at once.
 *
 * Exit status: 0 trained (and exported when export_dir is set); 1 a failure (the message names
 * the file, step or op at fault); 2 bad usage; 130/143 stopped by SIGINT/SIGTERM.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/config.h"
#include "train/fit.h"
#include "train/train.h"

/* The signal that asked the run to stop (0: none); read by the training loop (fit.h opts.stop). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

/* SIGINT and SIGTERM ask the loop to stop; SA_RESETHAND gives a second signal its default
 * action, ending the process at once. SA_RESTART: a read or write the signal interrupts (the
 * prefetch thread's, the event file's) goes on instead of failing with EINTR. */
static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tfserve-train CONFIG [flags]\n"
            "  Trains the model CONFIG describes (see docs/trainer.md for the format).\n"
            "flags (each overrides the config file):\n"
            "  --epochs=N            epochs to train\n"
            "  --max_steps=N         stop after this global step\n"
            "  --resume              continue from the latest checkpoint in checkpoint_dir\n"
            "  --warm_start=PATH     start from the weights of a checkpoint (prefix or directory)\n"
            "  --checkpoint_dir=DIR  write checkpoints there\n"
            "  --log_dir=DIR         write TensorBoard event files there\n"
            "  --export_dir=DIR      export a SavedModel version folder there at the end\n"
            "  --plot=FILE.svg       draw the loss and accuracy curves per epoch\n"
            "  --metrics_json=FILE   write per-epoch seconds (training steps only), loss and\n"
            "                        accuracy (train and eval) as JSON at the end of the run\n"
            "  --check_numerics      stop at the first op that produces a NaN or Inf\n"
            "  --intra_op_threads=N  threads per op (default: the CPUs, shared among the\n"
            "                        ranks mpirun starts on this machine)\n"
            "  --collective_timeout=SECS  under mpirun: give up when an allreduce or broadcast\n"
            "                        makes no progress for this long (a rank died; default 60)\n"
            "  --progress=bar|lines  progress display (default: a bar on a terminal)\n"
            "  --quiet               no progress output\n"
            "  --help                this text\n"
            "SIGINT or SIGTERM: stops before the next step, saves a checkpoint, exits 130/143.\n");
}

/* FNV-1a over the config file's bytes and the arguments: what every rank must agree on. */
static uint64_t config_hash(const char *path, int argc, char **argv)
{
    uint64_t h = 14695981039346656037ull;
    FILE    *f = fopen(path, "rb");
    int      ch;
    while (f && (ch = fgetc(f)) != EOF)
        h = (h ^ (uint64_t)(unsigned char)ch) * 1099511628211ull;
    if (f)
        fclose(f);
    for (int i = 1; i < argc; i++)
        for (const char *p = argv[i];; p++) {
            h = (h ^ (uint64_t)(unsigned char)*p) * 1099511628211ull;
            if (!*p)
                break;
        }
    return h;
}

static const char *flag_value(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && arg[n] == '=' ? arg + n + 1 : NULL;
}

static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || v < 0)
        return false;
    *out = v;
    return true;
}

/* The flags, read (and checked) before the config file is. */
typedef struct flags {
    int64_t     epochs, max_steps;   /* -1: not given */
    bool        resume, check_numerics, quiet;
    const char *warm_start, *checkpoint_dir, *log_dir, *export_dir, *plot, *metrics_json;
    int         progress;            /* -3: not given */
    double      collective_timeout;  /* 0: not given */
    int64_t     threads;             /* --intra_op_threads; 0: not given */
} flags;

/* Parses one flag into f; false for an unknown flag or a bad value. */
static bool parse_flag(const char *a, flags *f)
{
    const char *v;
    if ((v = flag_value(a, "--epochs")))
        return parse_int(v, &f->epochs) && f->epochs > 0;
    if ((v = flag_value(a, "--max_steps")))
        return parse_int(v, &f->max_steps);
    if ((v = flag_value(a, "--intra_op_threads")))
        return parse_int(v, &f->threads) && f->threads > 0;
    if ((v = flag_value(a, "--collective_timeout"))) {
        char *end;
        f->collective_timeout = strtod(v, &end);
        return end != v && !*end && f->collective_timeout > 0;
    }
    if ((v = flag_value(a, "--progress"))) {
        f->progress = !strcmp(v, "bar") ? 1 : !strcmp(v, "lines") ? 0 : -2;
        return f->progress != -2;
    }
    if ((v = flag_value(a, "--plot"))) {
        size_t n = strlen(v);
        f->plot = v;
        return n >= 4 && !strcmp(v + n - 4, ".svg");
    }
    const struct {
        const char *name;
        const char **dst;
    } S[] = {{"--warm_start", &f->warm_start}, {"--checkpoint_dir", &f->checkpoint_dir},
             {"--log_dir", &f->log_dir}, {"--export_dir", &f->export_dir},
             {"--metrics_json", &f->metrics_json}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++)
        if ((v = flag_value(a, S[i].name)))
            return *(*S[i].dst = v) != '\0';
    const struct {
        const char *name;
        bool *dst;
    } B[] = {{"--resume", &f->resume}, {"--check_numerics", &f->check_numerics},
             {"--quiet", &f->quiet}};
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++)
        if (!strcmp(a, B[i].name))
            return *B[i].dst = true;
    return false;
}

int main(int argc, char **argv)
{
    const char *config = NULL;
    flags fl = {.epochs = -1, .max_steps = -1, .progress = -3};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    /* Usage first: a bad flag is exit 2 whatever the config file holds. */
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') {
            if (config) {
                fprintf(stderr, "tfserve-train: more than one config file ('%s', '%s')\n",
                        config, argv[i]);
                return 2;
            }
            config = argv[i];
        } else if (!parse_flag(argv[i], &fl)) {
            if (flag_value(argv[i], "--plot"))
                fprintf(stderr, "tfserve-train: --plot: only .svg files can be written\n");
            else
                fprintf(stderr, "tfserve-train: bad flag '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!config) {
        usage(stderr);
        return 2;
    }
    tfs_status st;
    tfs_train_config *c = NULL;
    /* Under mpirun: join the job (a build without MPI refuses a multi-rank environment). */
    if (tfs_dist_init(&st) != TFS_OK) {
        fprintf(stderr, "tfserve-train: %s\n", st.msg);
        return 1;
    }
    if (tfs_train_config_load(config, &c, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-train: %s\n", st.msg);
        tfs_dist_finalize(true);
        return 1;
    }
    tfs_fit_opts *f = &c->fit;
    if (fl.epochs > 0)
        f->epochs = fl.epochs;
    if (fl.max_steps >= 0)
        f->max_steps = fl.max_steps;
    if (fl.collective_timeout > 0)
        f->collective_timeout_secs = fl.collective_timeout;
    if (fl.progress != -3)
        f->progress = fl.progress;
    f->resume = f->resume || fl.resume;
    f->quiet = f->quiet || fl.quiet;
    c->model.check_numerics = c->model.check_numerics || fl.check_numerics;
    if (fl.warm_start)
        f->warm_start = fl.warm_start;
    if (fl.checkpoint_dir)
        f->checkpoint_dir = fl.checkpoint_dir;
    if (fl.log_dir)
        f->log_dir = fl.log_dir;
    if (fl.export_dir)
        f->export_dir = fl.export_dir;
    if (fl.plot)
        f->plot = fl.plot;
    if (f->plot) {
        size_t n = strlen(f->plot);
        if (n < 4 || strcmp(f->plot + n - 4, ".svg")) {
            fprintf(stderr, "tfserve-train: %s: plot: only .svg files can be written\n", config);
            tfs_train_config_free(c);
            tfs_dist_finalize(true);
            return 1;
        }
    }
    tfs_dataset *train = NULL, *eval = NULL;
    tfs_model *m = NULL;
    tfs_fit_result r;
    memset(&r, 0, sizeof r);
    tfs_status mst;
    enum tfs_code rc;
    int status = 1;
    bool training = false;
    int ranks = tfs_dist_size();
    /* Every rank must train the same model on the same data the same way: the config file's
     * bytes and the flags, hashed, compared across the ranks. */
    if (tfs_dist_check_same(config_hash(config, argc, argv), "the config (file and flags)", &st) !=
        TFS_OK)
        goto done;
    /* The ranks on one machine share its CPUs unless told otherwise; a rank the launcher bound
     * to some of them (mpirun binds to a core by default for up to 2 ranks) already sizes its
     * pool to those (tfs_runtime_cpu_count). */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (fl.threads > 0)
        tfs_runtime_set_num_threads((int)(fl.threads < 1024 ? fl.threads : 1024));
    else if (ranks > 1 && local && atoi(local) > 1 &&
             tfs_runtime_cpu_count() >= sysconf(_SC_NPROCESSORS_ONLN))
        tfs_runtime_set_num_threads(tfs_runtime_num_threads() / atoi(local) > 0
                                        ? tfs_runtime_num_threads() / atoi(local)
                                        : 1);
    /* batch_size is per rank: the dataset yields global batches that the ranks split. */
    int64_t per_rank_batch = c->data.batch_size;
    c->data.batch_size *= ranks;
    c->model.data_parallel = ranks > 1;
    if (tfs_train_config_datasets(c, &train, &eval, &st) != TFS_OK)
        goto done;
    if (tfs_model_new(&c->model, &c->optimizer, &m, &st) != TFS_OK)
        goto done;
    if (!f->quiet && tfs_dist_rank() == 0) {
        printf("tfserve-train: %s: %d layers, %d variables, %lld training examples, batch %lld, "
               "%s %g\n", config, c->model.n_layers, tfs_model_variable_count(m),
               (long long)tfs_dataset_cardinality(train), (long long)per_rank_batch,
               tfs_optimizer_name(c->optimizer.kind), c->optimizer.learning_rate);
        if (ranks > 1)
            printf("tfserve-train: %d ranks (MPI): global batch %lld\n", ranks,
                   (long long)c->data.batch_size);
    }
    f->stop = &stop_signal;
    catch_stop_signals();
    training = true;
    rc = tfs_train_fit(m, train, eval, f, &r, &st);
    /* Also after a failure: the epochs completed are worth having. Rank 0's alone: its
     * figures are the whole run's. */
    if (fl.metrics_json && tfs_dist_rank() == 0 &&
        tfs_fit_result_write_json(&r, fl.metrics_json, &mst) != TFS_OK) {
        if (rc == TFS_OK) {
            st = mst;   /* reported below */
            rc = mst.code;
        } else {
            fprintf(stderr, "tfserve-train: --metrics_json: %s\n", mst.msg);
        }
    }
    if (rc == TFS_CANCELLED && stop_signal) {
        fprintf(stderr, "tfserve-train: %s %s\n",
                stop_signal == SIGINT ? "SIGINT:" : stop_signal == SIGTERM ? "SIGTERM:" : "signal:",
                st.msg);
        status = 128 + stop_signal;
        goto done;
    }
    if (rc != TFS_OK)
        goto done;
    if (!f->quiet && r.epochs > 0 && tfs_dist_rank() == 0) {
        int64_t e = r.epochs - 1;
        printf("done: %lld steps", (long long)r.global_step);
        if (r.eval_accuracy[e] == r.eval_accuracy[e])
            printf(", eval accuracy %.4f", r.eval_accuracy[e]);
        printf("\n");
    }
    status = 0;
done:
    if (status == 1 && tfs_dist_size() > 1)
        fprintf(stderr, "tfserve-train: rank %d of %d: %s: %s\n", tfs_dist_rank(),
                tfs_dist_size(), tfs_code_name(st.code), st.msg);
    else if (status == 1)
        fprintf(stderr, "tfserve-train: %s: %s\n", tfs_code_name(st.code), st.msg);
    tfs_fit_result_free(&r);
    tfs_model_free(m);
    tfs_dataset_free(train);
    tfs_dataset_free(eval);
    tfs_train_config_free(c);
    /* A failure before training is the same on every rank (same config, same data), so all of
     * them get here; one during training may be this rank's alone while the others wait in a
     * collective: MPI_Abort ends them. */
    tfs_dist_finalize(status != 1 || !training);
    return status;
}
