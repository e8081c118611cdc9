/* Shortcuts shared by the graph-rewrite suites (test_rewrite*.c): graphs with variables built
 * through runtime/build.h, rewriting with given options, and comparing a rewritten graph's
 * answers with the original graph's (bit for bit, or within a stated tolerance). */
#ifndef TFS_TESTS_RUNTIME_REWRITE_HELPERS_H
#define TFS_TESTS_RUNTIME_REWRITE_HELPERS_H

#include "tests/runtime/nn-helpers.h"

/* The variables of a graph under construction, each assigned its value by the NoOp "init". */
typedef struct rwt_vars {
    int     n;
    tfs_out assign[64];
} rwt_vars;

/* A float VariableV2 `name` holding value (takes ownership), read through the Identity
 * "name/read" (the TF1 pattern); returns the read. */
tfs_out rwt_var(tfs_graph *g, rwt_vars *v, const char *name, tfs_tensor *value);
/* A resource variable (VarHandleOp `name`, AssignVariableOp in init) read by ReadVariableOp. */
tfs_out rwt_resource_var(tfs_graph *g, rwt_vars *v, const char *name, tfs_tensor *value);
/* Adds "init", finalizes g, opens a session, runs init (when there are variables). The session
 * keeps g; the caller keeps its own reference too. */
tfs_session *rwt_session(tfs_graph *g, rwt_vars *v);

/* A const of random floats. */
tfs_out rwt_random_const(tfs_graph *g, const char *name, int rank, const int64_t *dims,
                         uint32_t seed);

/* One run: feeds by name, fetches by name. */
tfs_rewrite_run rwt_run(int n_feeds, const char *const *feeds, int n_fetches,
                        const char *const *fetches);
/* tfs_graph_rewrite asserting OK; returns the rewritten graph (NULL when nothing is served). */
tfs_graph *rwt_rewrite(tfs_graph *g, tfs_session *values, tfs_rewrite_run *runs, int n_runs,
                       const tfs_rewrite_opts *opts, tfs_rewrite_stats *stats);
/* Fetch i of a run (a) against the original graph's (b): same dtype and shape, and bit-identical
 * when tol is 0, else max |a - b| <= tol * max |b|. */
void rwt_compare_tensors(const tfs_tensor *a, const tfs_tensor *b, double tol, const char *what,
                         int i);
/* Runs feeds -> fetches on `orig` and on a new session over rg and compares every output: same
 * dtype and shape, and bit-identical when tol is 0, else max |a - b| <= tol * max |b|. */
void rwt_compare(tfs_session *orig, tfs_graph *rg, const tfs_feed *feeds, int n_feeds,
                 const char *const *fetches, int n_fetches, double tol, const char *what);
/* Rewrites for `run` with each rewrite alone and with all of them, asserts the run is served each
 * time and compares with the original graph (rwt_compare; tol applies when BatchNorm folding is
 * on, else bit-identical). *all receives the stats of the all-on rewrite. */
void rwt_check_each(tfs_graph *g, tfs_session *s, tfs_rewrite_run run, const tfs_feed *feeds,
                    double bn_tol, tfs_rewrite_stats *all);

/* Nodes of op type `op` in g. */
int rwt_count_op(const tfs_graph *g, const char *op);
/* The op type of node `name` (asserting it exists). */
const char *rwt_op(const tfs_graph *g, const char *name);
/* True when node `name` has input text `input` ("x:0", "^w"). */
bool rwt_has_input(const tfs_graph *g, const char *name, const char *input);

#endif
