/* tfs_savedmodel_check: would this SavedModel serve? The import a server makes (tags, ops,
 * variables restored, signatures resolved), then one dry run of every signature on inputs of its
 * declared shape, without serving.
 *
 * The made-up inputs are zeros and empty strings, with each unknown dimension 1 and an unknown
 * rank taken as a vector of one. A model may rightly refuse such values (a tf.Example parser
 * whose features are required, an index that must be positive): a dry run that fails with
 * INVALID_ARGUMENT, OUT_OF_RANGE or FAILED_PRECONDITION is reported and not counted as a failure,
 * since real requests decide those. Every other failure is: an op or dtype tfserve cannot run,
 * an internal error, memory.
 */
#include <string.h>

#include "savedmodel/savedmodel-impl.h"

static bool input_dependent(enum tfs_code code)
{
    return code == TFS_INVALID_ARGUMENT || code == TFS_OUT_OF_RANGE ||
           code == TFS_FAILED_PRECONDITION;
}

/* A tensor of info's dtype and declared shape, unknown sizes 1; zeros or empty strings. */
static enum tfs_code made_up_input(const tfs_tensor_info *info, tfs_tensor **out, tfs_status *st)
{
    int64_t dims[TFS_MAX_RANK];
    int rank = info->shape.rank < 0 ? 1 : info->shape.rank;
    for (int d = 0; d < rank; d++)
        dims[d] = info->shape.rank < 0 || info->shape.dims[d] < 0 ? 1 : info->shape.dims[d];
    return tfs_tensor_new(tfs_dtype_base(info->dtype), rank, dims, out, st);
}

/* Dry-runs sig once; returns the number of failures it counts (0 or 1). */
static int dry_run(const tfs_savedmodel *m, const tfs_signature *sig, FILE *out)
{
    tfs_status st;
    if (!strcmp(sig->key, "__saved_model_init_op")) {
        fprintf(out, "  signature '%s': the init op, ran at load\n", sig->key);
        return 0;
    }
    if (sig->usable.code != TFS_OK) {
        fprintf(out, "  signature '%s': cannot run: %s: %s\n", sig->key,
                tfs_code_name(sig->usable.code), sig->usable.msg);
        return 1;
    }
    tfs_named_tensor *in = tfs_calloc((size_t)sig->n_inputs + 1, sizeof *in);
    tfs_tensor **outs = tfs_calloc((size_t)sig->n_outputs + 1, sizeof *outs);
    int made = 0, failures = 0;
    enum tfs_code rc = in && outs ? TFS_OK : TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    for (; rc == TFS_OK && made < sig->n_inputs; made++) {
        in[made].name = sig->inputs[made].alias;
        rc = made_up_input(&sig->inputs[made], &in[made].tensor, &st);
        if (rc != TFS_OK)
            tfs_status_prefix(&st, "input '%s'", sig->inputs[made].alias);
    }
    if (rc == TFS_OK)
        rc = tfs_savedmodel_run(m, sig, in, sig->n_inputs, outs, &st);
    if (rc == TFS_OK) {
        fprintf(out, "  signature '%s': ran:", sig->key);
        for (int i = 0; i < sig->n_outputs; i++) {
            char shape[128];
            fprintf(out, " %s %s%s", sig->outputs[i].alias, tfs_dtype_short_name(outs[i]->dtype),
                    tfs_shape_str(outs[i]->rank, outs[i]->dims, shape, sizeof shape));
            tfs_tensor_unref(outs[i]);
        }
        fputc('\n', out);
    } else if (input_dependent(rc)) {
        fprintf(out, "  signature '%s': loads; the dry run's made-up inputs were refused "
                "(not counted: real inputs decide this): %s: %s\n", sig->key, tfs_code_name(rc),
                st.msg);
    } else {
        fprintf(out, "  signature '%s': dry run failed: %s: %s\n", sig->key, tfs_code_name(rc),
                st.msg);
        failures = 1;
    }
    for (int i = 0; i < made; i++)
        tfs_tensor_unref(in ? in[i].tensor : NULL);
    tfs_free(in);
    tfs_free(outs);
    return failures;
}

int tfs_savedmodel_check(const char *dir, const char *tags, FILE *out)
{
    tfs_savedmodel_opts o = tfs_savedmodel_opts_default();
    if (tags && tags[0])
        o.tags = tags;
    tfs_savedmodel *m = NULL;
    tfs_status st;
    if (tfs_savedmodel_load(dir, &o, &m, &st) != TFS_OK) {
        fprintf(out, "%s: would not serve: %s: %s\n", dir, tfs_code_name(st.code), st.msg);
        return 1;
    }
    int n = tfs_savedmodel_signature_count(m), failures = 0;
    fprintf(out, "%s: loads with tags {%s}: %d signatures\n", dir, o.tags, n);
    for (int i = 0; i < n; i++)
        failures += dry_run(m, tfs_savedmodel_signature_at(m, i), out);
    tfs_savedmodel_free(m);
    if (failures)
        fprintf(out, "%s: would not serve: %d of %d signatures fail\n", dir, failures, n);
    else
        fprintf(out, "%s: would serve\n", dir);
    return failures;
}
