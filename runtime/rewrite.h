/* Graph rewrites for serving: from a finalized graph and the runs a server will make on it, a new
 * finalized graph that computes the same values with fewer, cheaper nodes -- constant folding
 * (variables nothing assigns read as constants), Identity/NoOp removal, FusedBatchNorm folded into
 * the preceding convolution's filter, and MatMul/Conv2D + BiasAdd (+ activation) fused into
 * TensorFlow's own _FusedMatMul / _FusedConv2D ops (the names and attrs grappler gives them).
 *
 *     tfs_rewrite_run runs[] = {{.feeds = (const char *[]){"x:0"}, .n_feeds = 1,
 *                                .fetches = (const char *[]){"y:0"}, .n_fetches = 1}};
 *     tfs_graph *fast;  tfs_rewrite_stats rs;
 *     if (tfs_graph_rewrite(g, session, runs, 1, NULL, &fast, &rs, &st) != TFS_OK) ...
 *     if (runs[0].served) ... run it on a session over `fast` (a new one), else on `session`
 *
 * `runs` lists every run the caller will make from now on (for a SavedModel: its signatures; not
 * the restore or init op, which already ran). The rewritten graph holds only what the served runs
 * need; each run keeps its feed, fetch and target names, and a run the rewritten graph cannot
 * compute on its own (it assigns a variable, reads one that another run assigns, or uses other
 * session state) is marked not served and must keep using the original graph's session.
 *
 * A variable is read as a constant only when `values` (a session over g holding the variables'
 * current values, e.g. right after a restore) is given and no op any listed run executes can
 * assign it; the constant shares the variable's tensor, so freezing costs no memory.
 *
 * The rewrite runs kernels on `values` to evaluate constant subgraphs (or on a temporary session
 * over g when values is NULL): no run may be in progress on it meanwhile. Thread affinity: one
 * thread; the result is a new finalized graph like any other.
 */
#ifndef TFS_RUNTIME_REWRITE_H
#define TFS_RUNTIME_REWRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/graph.h"
#include "runtime/session.h"
#include "runtime/status.h"

/* Which rewrites run. Get it from tfs_rewrite_opts_default() (all on). */
typedef struct tfs_rewrite_opts {
    bool    fold_constants;      /* nodes computable from constants and frozen variables (the
                                  * reads of frozen variables become Consts even when off) */
    bool    remove_identities;   /* Identity(N), Snapshot, StopGradient, PreventGradient, NoOp */
    bool    fold_batch_norms;    /* inference FusedBatchNorm* after Conv2D or a depthwise conv */
    bool    fuse_matmul;         /* MatMul + BiasAdd [+ Relu|Relu6|Elu|LeakyRelu] -> _FusedMatMul */
    bool    fuse_conv2d;         /* Conv2D + BiasAdd [+ Relu|Relu6|Elu|LeakyRelu] -> _FusedConv2D */
    bool    fuse_add;            /* that _FusedConv2D + Add/AddV2 [+ activation] (a residual
                                  * connection) -> _FusedConv2D ["BiasAdd", "Add", ...]; a CPU
                                  * kernel only: off where sessions may run on a GPU */
    int64_t max_constant_bytes;  /* largest new tensor folding may create (default 16 MiB);
                                  * a variable's own value is shared, so it is not limited */
} tfs_rewrite_opts;

tfs_rewrite_opts tfs_rewrite_opts_default(void);

/* One kind of run the caller will make: names as tfs_session_run takes them. */
typedef struct tfs_rewrite_run {
    const char *const *feeds;     /* "node:idx" */
    int                n_feeds;
    const char *const *fetches;   /* "node:idx" */
    int                n_fetches;
    const char *const *targets;   /* node names */
    int                n_targets;
    bool               served;    /* out: the rewritten graph computes this run */
} tfs_rewrite_run;

/* What the rewrite did (for the load log and tests). */
typedef struct tfs_rewrite_stats {
    int     nodes_before;        /* nodes of g the served runs need (and what fed nodes need) */
    int     nodes_after;         /* nodes of the rewritten graph */
    int     runs_served;
    int     variables_frozen;    /* variables read as constants */
    int     constants_folded;    /* nodes replaced by, or absorbed into, a constant */
    int     identities_removed;  /* Identity-like and NoOp nodes removed */
    int     batch_norms_folded;
    int     matmuls_fused;
    int     conv2ds_fused;
    int     adds_fused;          /* Adds (and their activations) taken into a _FusedConv2D */
    int64_t constant_bytes;      /* bytes of the tensors the rewrite created (not shared with g's
                                  * constants or variables) */
} tfs_rewrite_stats;

/* Rewrites g for `runs` (see the top of this file). On success *out is a new finalized graph
 * (caller owns) -- or NULL when no run can be served, which is not an error -- each runs[i].served
 * is set, and *stats (may be NULL) describes the work. g must be finalized; values, when given,
 * must be a session over g. Errors: INVALID_ARGUMENT for a graph that is not finalized, a values
 * session over another graph, or bad opts; RESOURCE_EXHAUSTED. A run whose names do not resolve, or
 * whose ops lack kernels, is simply not served (running it reports the error as before). */
enum tfs_code tfs_graph_rewrite(tfs_graph *g, tfs_session *values, tfs_rewrite_run *runs,
                                int n_runs, const tfs_rewrite_opts *opts, tfs_graph **out,
                                tfs_rewrite_stats *stats, tfs_status *st);

#endif
