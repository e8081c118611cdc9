/* tfs_savedmodel_inspect: a readable description of a SavedModel directory without loading it (so it
 * also works on models tfserve cannot run): tag sets, signatures as saved_model_cli prints them, the
 * variables in the bundle, and the op types used with a mark on those tfserve lacks. */
#include <stdlib.h>
#include <string.h>

#include "savedmodel/bundle-impl.h"
#include "savedmodel/savedmodel-impl.h"

static void print_shape(FILE *out, const tfs_shape *s)
{
    if (s->rank < 0) {
        fputs("unknown_rank", out);
        return;
    }
    fputc('(', out);
    for (int i = 0; i < s->rank; i++)
        fprintf(out, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
    fputs(s->rank == 1 ? ",)" : ")", out);
}

static void print_infos(FILE *out, const char *what, const tfs_tensor_info *v, int n)
{
    fprintf(out, "  The given SavedModel SignatureDef contains the following %s(s):\n", what);
    for (int i = 0; i < n; i++) {
        fprintf(out, "    %ss['%s'] tensor_info:\n", what, v[i].alias);
        fprintf(out, "        dtype: %s\n        shape: ", tfs_dtype_name(v[i].dtype));
        print_shape(out, &v[i].shape);
        fprintf(out, "\n        name: %s\n", v[i].tensor_name ? v[i].tensor_name : "(sparse or composite)");
    }
}

typedef struct op_count {
    const char *op;
    int         n;
} op_count;

static int cmp_op(const void *a, const void *b)
{
    return strcmp(((const op_count *)a)->op, ((const op_count *)b)->op);
}

static void count_op(op_count *v, int *n, const char *op)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(v[i].op, op)) {
            v[i].n++;
            return;
        }
    v[*n].op = op;
    v[*n].n = 1;
    (*n)++;
}

static bool is_function(const Tensorflow__GraphDef *gd, const char *op)
{
    for (size_t i = 0; gd->library && i < gd->library->n_function; i++)
        if (!strcmp(gd->library->function[i]->signature->name, op))
            return true;
    return false;
}

static enum tfs_code print_ops(FILE *out, const Tensorflow__GraphDef *gd, tfs_status *st)
{
    size_t total = gd->n_node;
    for (size_t i = 0; gd->library && i < gd->library->n_function; i++)
        total += gd->library->function[i]->n_node_def;
    op_count *v = tfs_calloc(total + 1, sizeof *v);
    if (!v)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    int n = 0;
    for (size_t i = 0; i < gd->n_node; i++)
        count_op(v, &n, gd->node[i]->op);
    for (size_t i = 0; gd->library && i < gd->library->n_function; i++)
        for (size_t j = 0; j < gd->library->function[i]->n_node_def; j++)
            count_op(v, &n, gd->library->function[i]->node_def[j]->op);
    qsort(v, (size_t)n, sizeof *v, cmp_op);
    int missing = 0;
    fprintf(out, "\nOp types used (%d, graph and function library; nodes counted):\n", n);
    for (int i = 0; i < n; i++) {
        const char *note = "";
        if (!strcmp(v[i].op, "StatefulPartitionedCall") || !strcmp(v[i].op, "PartitionedCall") ||
            is_function(gd, v[i].op))
            note = "  (function call, inlined at load)";
        else if (!tfs_op_is_supported(v[i].op)) {
            note = "  (not supported by tfserve)";
            missing++;
        }
        fprintf(out, "  %-32s %5d%s\n", v[i].op, v[i].n, note);
    }
    if (missing)
        fprintf(out, "  %d op type(s) lack a kernel; tfserve loads the model only if none of them "
                "is needed by a signature, the restore or the init op.\n", missing);
    tfs_free(v);
    return TFS_OK;
}

static void print_variables(FILE *out, const char *dir)
{
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s/variables/variables", dir);
    tfs_bundle *b = NULL;
    tfs_status st;
    if (tfs_bundle_open(prefix, &b, &st) != TFS_OK) {
        fprintf(out, "\nVariables: none readable (%s)\n", st.msg);
        return;
    }
    fprintf(out, "\nVariables (%d, in %d shard(s)):\n", tfs_bundle_count(b), tfs_bundle_num_shards(b));
    for (int i = 0; i < tfs_bundle_count(b); i++) {
        const tfs_bundle_entry *e = tfs_bundle_entry_at(b, i);
        tfs_shape s = {.rank = e->rank};
        memcpy(s.dims, e->dims, sizeof s.dims);
        fprintf(out, "  %s: %s ", e->key, tfs_dtype_name(e->dtype));
        print_shape(out, &s);
        fputc('\n', out);
    }
    tfs_bundle_free(b);
}

enum tfs_code tfs_savedmodel_inspect(const char *dir, FILE *out, tfs_status *st)
{
    Tensorflow__SavedModel *sm = NULL;
    tfs_signature *sigs = NULL;
    int n_sigs = 0;
    if (tfs__saved_model_read(dir, &sm, st) != TFS_OK)
        return st ? st->code : TFS_DATA_LOSS;
    enum tfs_code rc = TFS_OK;
    fprintf(out, "SavedModel %s: %zu MetaGraphDef(s)\n", dir, sm->n_meta_graphs);
    for (size_t m = 0; m < sm->n_meta_graphs; m++) {
        const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[m];
        fputs("\nMetaGraphDef with tag-set: '", out);
        for (size_t t = 0; mg->meta_info_def && t < mg->meta_info_def->n_tags; t++)
            fprintf(out, "%s%s", t ? ", " : "", mg->meta_info_def->tags[t]);
        fputs("' contains the following SignatureDefs:\n", out);
        if ((rc = tfs__signatures_from_proto(mg, &sigs, &n_sigs, st)) != TFS_OK)
            goto done;
        int serving = 0;
        for (int i = 0; i < n_sigs; i++) {
            if (!strcmp(sigs[i].key, "__saved_model_init_op")) {
                fprintf(out, "\nInit op signature '__saved_model_init_op' runs: %s\n",
                        sigs[i].n_outputs ? sigs[i].outputs[0].tensor_name : "(nothing)");
                continue;
            }
            serving++;
            fprintf(out, "\nsignature_def['%s']:\n", sigs[i].key);
            print_infos(out, "input", sigs[i].inputs, sigs[i].n_inputs);
            print_infos(out, "output", sigs[i].outputs, sigs[i].n_outputs);
            fprintf(out, "  Method name is: %s\n", sigs[i].method_name);
        }
        fprintf(out, "\n%d serving signature(s)\n", serving);
        tfs__signatures_free(sigs, n_sigs);
        sigs = NULL;
        if (mg->graph_def && (rc = print_ops(out, mg->graph_def, st)) != TFS_OK)
            goto done;
    }
    print_variables(out, dir);
done:
    tfs__signatures_free(sigs, n_sigs);
    tensorflow__saved_model__free_unpacked(sm, NULL);
    return rc;
}
