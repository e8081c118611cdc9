/* Shortcuts for the graph-rewrite suites (see rewrite-helpers.h). */
#include "tests/runtime/rewrite-helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

tfs_out rwt_var(tfs_graph *g, rwt_vars *v, const char *name, tfs_tensor *value)
{
    tfs_shape shape = {.rank = value->rank};
    memcpy(shape.dims, value->dims, (size_t)value->rank * sizeof *value->dims);
    tfs_out var = tfs_build_variable(g, name, TFS_DTYPE_FLOAT, &shape);
    tfs_build_scope_push(g, name);
    tfs_out c = tfs_build_const(g, NULL, value);
    tfs_tensor_unref(value);
    ck_assert_int_lt(v->n, 64);
    v->assign[v->n++] = tfs_build_assign(g, var, c);
    tfs_out read = tfs_build_op(g, "Identity", "read", 1, &var);
    tfs_build_scope_pop(g);
    ck_assert(tfs_out_ok(read));
    return read;
}

tfs_out rwt_resource_var(tfs_graph *g, rwt_vars *v, const char *name, tfs_tensor *value)
{
    tfs_out h = tfs_build_op(g, "VarHandleOp", name, 0, NULL);
    tfs_graph_set_attr_type(g, h.node, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_string(g, h.node, "shared_name", name);
    tfs_out c = tfs_build_const(g, NULL, value);
    tfs_tensor_unref(value);
    tfs_out as = tfs_build_op(g, "AssignVariableOp", NULL, 2, (tfs_out[]){h, c});
    tfs_graph_set_attr_type(g, as.node, "dtype", TFS_DTYPE_FLOAT);
    ck_assert_int_lt(v->n, 64);
    v->assign[v->n++] = as;
    tfs_out read = tfs_build_op(g, "ReadVariableOp", NULL, 1, &h);
    tfs_graph_set_attr_type(g, read.node, "dtype", TFS_DTYPE_FLOAT);
    ck_assert(tfs_out_ok(read));
    return read;
}

tfs_session *rwt_session(tfs_graph *g, rwt_vars *v)
{
    tfs_status st;
    if (v && v->n > 0)
        ck_assert(tfs_out_ok(tfs_build_group(g, "init", v->n, v->assign)));
    ck_assert_msg(tfs_graph_finalize(g, &st) == TFS_OK, "finalize: %s", st.msg);
    tfs_session *s = NULL;
    ck_assert_msg(tfs_session_new(g, NULL, &s, &st) == TFS_OK, "session: %s", st.msg);
    if (v && v->n > 0)
        ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, (const char *const[]){"init"}, 1, NULL,
                                      &st) == TFS_OK, "init: %s", st.msg);
    return s;
}

tfs_out rwt_random_const(tfs_graph *g, const char *name, int rank, const int64_t *dims,
                         uint32_t seed)
{
    tfs_tensor *t = nn_random_f32(rank, dims, seed);
    tfs_out c = tfs_build_const(g, name, t);
    tfs_tensor_unref(t);
    return c;
}

tfs_rewrite_run rwt_run(int n_feeds, const char *const *feeds, int n_fetches,
                        const char *const *fetches)
{
    return (tfs_rewrite_run){.feeds = feeds, .n_feeds = n_feeds, .fetches = fetches,
                             .n_fetches = n_fetches};
}

tfs_graph *rwt_rewrite(tfs_graph *g, tfs_session *values, tfs_rewrite_run *runs, int n_runs,
                       const tfs_rewrite_opts *opts, tfs_rewrite_stats *stats)
{
    tfs_graph *out = NULL;
    tfs_status st;
    ck_assert_msg(tfs_graph_rewrite(g, values, runs, n_runs, opts, &out, stats, &st) == TFS_OK,
                  "rewrite: %s", st.msg);
    return out;
}

void rwt_compare_tensors(const tfs_tensor *a, const tfs_tensor *b, double tol, const char *what,
                         int i)
{
    ck_assert_msg(a->dtype == b->dtype, "%s: fetch %d: dtype %s vs %s", what, i,
                  tfs_dtype_name(a->dtype), tfs_dtype_name(b->dtype));
    ck_assert_msg(tfs_shape_equal(a->rank, a->dims, b->rank, b->dims), "%s: fetch %d: shapes",
                  what, i);
    if (tol == 0 || a->dtype != TFS_DTYPE_FLOAT) {
        ck_assert_msg(a->nbytes == b->nbytes && (a->nbytes == 0 || !memcmp(a->data, b->data,
                                                                          a->nbytes)),
                      "%s: fetch %d: not bit-identical", what, i);
        return;
    }
    const float *x = a->data, *y = b->data;
    double max_ref = 0, max_diff = 0;
    for (int64_t k = 0; k < b->nelem; k++) {
        max_ref = fmax(max_ref, fabs(y[k]));
        max_diff = fmax(max_diff, fabs((double)x[k] - y[k]));
    }
    ck_assert_msg(max_diff <= tol * max_ref, "%s: fetch %d: max |diff| %g > %g * max |ref| %g",
                  what, i, max_diff, tol, max_ref);
}

void rwt_compare(tfs_session *orig, tfs_graph *rg, const tfs_feed *feeds, int n_feeds,
                 const char *const *fetches, int n_fetches, double tol, const char *what)
{
    tfs_status st;
    tfs_session *s = NULL;
    tfs_tensor *want[8] = {NULL}, *got[8] = {NULL};
    ck_assert_int_le(n_fetches, 8);
    ck_assert_msg(tfs_session_new(rg, NULL, &s, &st) == TFS_OK, "%s: session: %s", what, st.msg);
    ck_assert_msg(tfs_session_run(orig, feeds, n_feeds, fetches, n_fetches, NULL, 0, want, &st) ==
                  TFS_OK, "%s: original: %s", what, st.msg);
    ck_assert_msg(tfs_session_run(s, feeds, n_feeds, fetches, n_fetches, NULL, 0, got, &st) ==
                  TFS_OK, "%s: rewritten: %s", what, st.msg);
    for (int i = 0; i < n_fetches; i++) {
        rwt_compare_tensors(got[i], want[i], tol, what, i);
        tfs_tensor_unref(got[i]);
        tfs_tensor_unref(want[i]);
    }
    tfs_session_free(s);
}

void rwt_check_each(tfs_graph *g, tfs_session *s, tfs_rewrite_run run, const tfs_feed *feeds,
                    double bn_tol, tfs_rewrite_stats *all)
{
    static const char *const names[] = {"constant folding", "identity removal",
                                        "batch norm folding", "matmul fusion", "conv2d fusion",
                                        "all rewrites"};
    for (int k = 0; k < 6; k++) {
        tfs_rewrite_opts o = tfs_rewrite_opts_default();
        if (k < 5) {
            o.fold_constants = k == 0;
            o.remove_identities = k == 1;
            o.fold_batch_norms = k == 2;
            o.fuse_matmul = k == 3;
            o.fuse_conv2d = k == 4;
        }
        tfs_rewrite_stats rs;
        tfs_graph *rg = rwt_rewrite(g, s, &run, 1, &o, &rs);
        ck_assert_msg(rg && run.served, "%s: run not served", names[k]);
        rwt_compare(s, rg, feeds, run.n_feeds, run.fetches, run.n_fetches,
                    o.fold_batch_norms ? bn_tol : 0.0, names[k]);
        tfs_graph_unref(rg);
        if (k == 5 && all)
            *all = rs;
    }
}

int rwt_count_op(const tfs_graph *g, const char *op)
{
    int k = 0;
    for (int i = 0; i < tfs_graph_node_count(g); i++)
        k += !strcmp(tfs_graph_node_op(g, i), op);
    return k;
}

const char *rwt_op(const tfs_graph *g, const char *name)
{
    int id = tfs_graph_find_node(g, name);
    ck_assert_msg(id >= 0, "no node '%s'", name);
    return tfs_graph_node_op(g, id);
}

bool rwt_has_input(const tfs_graph *g, const char *name, const char *input)
{
    int id = tfs_graph_find_node(g, name);
    ck_assert_msg(id >= 0, "no node '%s'", name);
    for (int i = 0; i < tfs_graph_node_input_count(g, id); i++)
        if (!strcmp(tfs_graph_node_input(g, id, i), input))
            return true;
    return false;
}
