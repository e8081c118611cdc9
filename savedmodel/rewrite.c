/* The serving graph of a loaded SavedModel: runtime/rewrite.h's rewrites applied to the imported
 * graph for the model's signatures, right after the variables were restored and the init op ran.
 *
 * Every signature that can run (usable) is one run of the rewrite; the restore and init ops are
 * not listed (they ran and will not run again), so a variable only the restore assigns is frozen.
 * A signature the rewritten graph serves runs on a session over it; the others (those that assign
 * variables or read variables another signature assigns, like saved_model_counter's) keep running
 * on the model's original session, whose variables hold the live state. A signature the new
 * session cannot check (a defect of a rewrite) falls back to the original session with a warning,
 * so a rewrite can cost speed but never a servable signature.
 */
#include <string.h>

#include "savedmodel/savedmodel-impl.h"

#define LOG_MODULE "savedmodel"

void tfs__serving_graph_clear(tfs_serving_graph *sg)
{
    tfs_session_free(sg->session);
    tfs_graph_unref(sg->graph);
    tfs_free(sg->served);
    memset(sg, 0, sizeof *sg);
}

/* The names of signature s as a rewrite run (arrays borrowed from s, allocated here). */
static bool sig_run(const tfs_signature *s, tfs_rewrite_run *r)
{
    const char **in = tfs_calloc((size_t)s->n_inputs + 1, sizeof *in);
    const char **outn = tfs_calloc((size_t)s->n_outputs + 1, sizeof *outn);
    if (!in || !outn) {
        tfs_free(in);
        tfs_free(outn);
        return false;
    }
    for (int j = 0; j < s->n_inputs; j++)
        in[j] = s->inputs[j].tensor_name;
    for (int j = 0; j < s->n_outputs; j++)
        outn[j] = s->outputs[j].tensor_name;
    *r = (tfs_rewrite_run){.feeds = in, .n_feeds = s->n_inputs, .fetches = outn,
                           .n_fetches = s->n_outputs};
    return true;
}

/* Did any rewrite change anything? (If not, the original session serves everything.) */
static bool changed(const tfs_rewrite_stats *rs)
{
    return rs->constants_folded + rs->identities_removed + rs->batch_norms_folded +
               rs->matmuls_fused + rs->conv2ds_fused + rs->adds_fused > 0;
}

enum tfs_code tfs__serving_graph_build(tfs_graph *g, tfs_session *values, const tfs_signature *sigs,
                                       int n_sigs, tfs_serving_graph *out, tfs_status *st)
{
    memset(out, 0, sizeof *out);
    tfs_rewrite_run *runs = tfs_calloc((size_t)n_sigs + 1, sizeof *runs);
    int *sig_of = tfs_calloc((size_t)n_sigs + 1, sizeof *sig_of);
    int n_runs = 0;
    enum tfs_code rc = TFS_OK;
    if (!runs || !sig_of || !(out->served = tfs_calloc((size_t)n_sigs + 1, sizeof *out->served)))
        goto oom;
    for (int i = 0; i < n_sigs; i++) {
        if (sigs[i].usable.code != TFS_OK)
            continue;
        if (!sig_run(&sigs[i], &runs[n_runs]))
            goto oom;
        sig_of[n_runs++] = i;
    }
    /* The residual-Add fusion makes a CPU-only kernel: not where the sessions may use a GPU. */
    tfs_rewrite_opts ro = tfs_rewrite_opts_default();
    ro.fuse_add = !tfs_runtime_serving_may_use_gpu();
    if ((rc = tfs_graph_rewrite(g, values, runs, n_runs, &ro, &out->graph, &out->stats, st)) !=
        TFS_OK)
        goto fail;
    if (!out->graph || !changed(&out->stats))
        goto none;
    tfs_session_opts so = tfs_session_opts_default();
    so.device = TFS_DEVICE_SERVING;   /* the device tfserve's --device chose (runtime/device.h) */
    if ((rc = tfs_session_new(out->graph, &so, &out->session, st)) != TFS_OK)
        goto fail;
    int served = 0;
    for (int r = 0; r < n_runs; r++) {
        tfs_status check;
        if (!runs[r].served)
            continue;
        if (tfs_session_check(out->session, runs[r].feeds, runs[r].n_feeds, runs[r].fetches,
                              runs[r].n_fetches, NULL, 0, &check) != TFS_OK) {
            TFS_LOG_WARN(LOG_MODULE, "signature '%s' runs on the original graph: the rewritten "
                         "graph cannot run it (%s)", sigs[sig_of[r]].key, check.msg);
            continue;
        }
        out->served[sig_of[r]] = true;
        served++;
    }
    out->stats.runs_served = served;
    if (served == 0)
        goto none;
    goto done;
none:
    /* Nothing to gain: keep the stats (for the log) but no second graph. */
    tfs_session_free(out->session);
    tfs_graph_unref(out->graph);
    out->session = NULL;
    out->graph = NULL;
    memset(out->served, 0, (size_t)n_sigs * sizeof *out->served);
    out->stats.runs_served = 0;
    goto done;
oom:
    rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory rewriting the graph");
fail:
    tfs__serving_graph_clear(out);
done:
    for (int r = 0; runs && r < n_runs; r++) {
        tfs_free((void *)runs[r].feeds);
        tfs_free((void *)runs[r].fetches);
    }
    tfs_free(runs);
    tfs_free(sig_of);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}
