/* tfserve-train: trains the model a config file describes (train/config.h; examples/ has
 * annotated ones), with progress on stdout, and exports it as a SavedModel tfserve serves.
 *
 *     tfserve-train examples/fashion_mnist_mlp.ini [--epochs=1] [--resume] [--plot=curves.svg]
 *
 * --metrics_json=FILE writes the per-epoch figures (fit.h tfs_fit_result_json) for scripts such
 * as bench/train_vs_pytorch.sh; also after a failure, with the epochs completed until then.
 *
 * Exit status: 0 trained (and exported when export_dir is set); 1 a failure (the message names
 * the file, step or op at fault); 2 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/config.h"
#include "train/fit.h"
#include "train/train.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tfserve-train CONFIG [flags]\n"
            "  Trains the model CONFIG describes (see examples/README.md for the format).\n"
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
            "  --progress=bar|lines  progress display (default: a bar on a terminal)\n"
            "  --quiet               no progress output\n"
            "  --help                this text\n");
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

int main(int argc, char **argv)
{
    const char *config = NULL, *metrics_json = NULL;
    const char *v;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    tfs_status st;
    tfs_train_config *c = NULL;
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-') {
            if (config) {
                fprintf(stderr, "tfserve-train: more than one config file\n");
                return 2;
            }
            config = argv[i];
        }
    if (!config) {
        usage(stderr);
        return 2;
    }
    if (tfs_train_config_load(config, &c, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-train: %s\n", st.msg);
        return 1;
    }
    tfs_fit_opts *f = &c->fit;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-')
            continue;
        bool ok = true;
        if ((v = flag_value(a, "--epochs")))
            ok = parse_int(v, &f->epochs) && f->epochs > 0;
        else if ((v = flag_value(a, "--max_steps")))
            ok = parse_int(v, &f->max_steps);
        else if (!strcmp(a, "--resume"))
            f->resume = true;
        else if ((v = flag_value(a, "--warm_start")))
            f->warm_start = v;
        else if ((v = flag_value(a, "--checkpoint_dir")))
            f->checkpoint_dir = v;
        else if ((v = flag_value(a, "--log_dir")))
            f->log_dir = v;
        else if ((v = flag_value(a, "--export_dir")))
            f->export_dir = v;
        else if ((v = flag_value(a, "--plot")))
            f->plot = v;
        else if ((v = flag_value(a, "--metrics_json"))) {
            metrics_json = v;
            ok = *v != '\0';
        } else if (!strcmp(a, "--check_numerics"))
            c->model.check_numerics = true;
        else if (!strcmp(a, "--quiet"))
            f->quiet = true;
        else if ((v = flag_value(a, "--progress")))
            ok = (f->progress = !strcmp(v, "bar") ? 1 : !strcmp(v, "lines") ? 0 : -2) != -2;
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "tfserve-train: bad flag '%s' (see --help)\n", a);
            tfs_train_config_free(c);
            return 2;
        }
    }
    if (f->plot) {
        size_t n = strlen(f->plot);
        if (n < 4 || strcmp(f->plot + n - 4, ".svg")) {
            fprintf(stderr, "tfserve-train: --plot: only .svg files can be written\n");
            tfs_train_config_free(c);
            return 2;
        }
    }
    tfs_dataset *train = NULL, *eval = NULL;
    tfs_model *m = NULL;
    tfs_fit_result r;
    memset(&r, 0, sizeof r);
    tfs_status mst;
    enum tfs_code rc;
    int status = 1;
    if (tfs_train_config_datasets(c, &train, &eval, &st) != TFS_OK)
        goto done;
    if (tfs_model_new(&c->model, &c->optimizer, &m, &st) != TFS_OK)
        goto done;
    if (!f->quiet)
        printf("tfserve-train: %s: %d layers, %d variables, %lld training examples, batch %lld, "
               "%s %g\n", config, c->model.n_layers, tfs_model_variable_count(m),
               (long long)tfs_dataset_cardinality(train), (long long)c->data.batch_size,
               tfs_optimizer_name(c->optimizer.kind), c->optimizer.learning_rate);
    rc = tfs_train_fit(m, train, eval, f, &r, &st);
    /* Also after a failure: the epochs completed are worth having. */
    if (metrics_json && tfs_fit_result_write_json(&r, metrics_json, &mst) != TFS_OK) {
        if (rc == TFS_OK) {
            st = mst;   /* reported below */
            rc = mst.code;
        } else {
            fprintf(stderr, "tfserve-train: --metrics_json: %s\n", mst.msg);
        }
    }
    if (rc != TFS_OK)
        goto done;
    if (!f->quiet && r.epochs > 0) {
        int64_t e = r.epochs - 1;
        printf("done: %lld steps", (long long)r.global_step);
        if (r.eval_accuracy[e] == r.eval_accuracy[e])
            printf(", eval accuracy %.4f", r.eval_accuracy[e]);
        printf("\n");
    }
    status = 0;
done:
    if (status != 0)
        fprintf(stderr, "tfserve-train: %s: %s\n", tfs_code_name(st.code), st.msg);
    tfs_fit_result_free(&r);
    tfs_model_free(m);
    tfs_dataset_free(train);
    tfs_dataset_free(eval);
    tfs_train_config_free(c);
    return status;
}
