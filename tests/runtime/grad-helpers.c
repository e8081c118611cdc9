/* Shortcuts for the gradient-kernel suites (see grad-helpers.h). */
#include "tests/runtime/grad-helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const in_names[GH_MAX_IO] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};
static const char *const out_names[GH_MAX_IO] = {"op:0", "op:1", "op:2", "op:3",
                                                 "op:4", "op:5", "op:6", "op:7"};

void gh_open(gh_op *o, const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
             const nn_attrs *at, int n_out)
{
    ck_assert(n_in <= GH_MAX_IO && n_out <= GH_MAX_IO);
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    for (int i = 0; i < n_in; i++)
        rt_placeholder(g, in_names[i], ins[i]->dtype);
    int id = tfs_graph_add_node(g, "op", op);
    ck_assert_int_ge(id, 0);
    for (int i = 0; i < n_in; i++)
        tfs_graph_add_input(g, id, in_names[i]);
    if (T != TFS_DTYPE_INVALID)
        tfs_graph_set_attr_type(g, id, "T", T);
    if (at)
        nn_apply_attrs(g, id, (void *)at);
    o->s = rt_session(g, NULL);
    o->n_in = n_in;
    o->n_out = n_out;
}

enum tfs_code gh_run(gh_op *o, tfs_tensor *const *ins, tfs_tensor **outs, tfs_status *st)
{
    tfs_feed feeds[GH_MAX_IO];
    for (int i = 0; i < o->n_in; i++)
        feeds[i] = (tfs_feed){in_names[i], ins[i]};
    for (int i = 0; i < o->n_out; i++)
        outs[i] = NULL;
    return tfs_session_run(o->s, feeds, o->n_in, out_names, o->n_out, NULL, 0, outs, st);
}

void gh_close(gh_op *o)
{
    tfs_session_free(o->s);
    o->s = NULL;
}

enum tfs_code gh_run_op(const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
                        const nn_attrs *at, int n_out, tfs_tensor **outs, tfs_status *st)
{
    gh_op o;
    gh_open(&o, op, n_in, ins, T, at, n_out);
    enum tfs_code rc = gh_run(&o, ins, outs, st);
    gh_close(&o);
    return rc;
}

void gh_run_ok(const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
               const nn_attrs *at, int n_out, tfs_tensor **outs, const char *what)
{
    tfs_status st;
    enum tfs_code rc = gh_run_op(op, n_in, ins, T, at, n_out, outs, &st);
    ck_assert_msg(rc == TFS_OK, "%s: %s", what, st.msg);
}

void gh_assert_fails(const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
                     const nn_attrs *at, int n_out, enum tfs_code code, const char *needle)
{
    tfs_status st;
    tfs_tensor *outs[GH_MAX_IO];
    enum tfs_code rc = gh_run_op(op, n_in, ins, T, at, n_out, outs, &st);
    if (rc == TFS_OK)
        for (int i = 0; i < n_out; i++)
            tfs_tensor_unref(outs[i]);
    ck_assert_msg(rc == code, "%s: code %s (%s), want %s", op, tfs_code_name(rc),
                  rc == TFS_OK ? "" : st.msg, tfs_code_name(code));
    ck_assert_msg(strstr(st.msg, needle) != NULL, "%s: message '%s' lacks '%s'", op, st.msg,
                  needle);
}

double gh_get(const tfs_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:  return ((const float *)t->data)[i];
    case TFS_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case TFS_DTYPE_INT32:  return ((const int32_t *)t->data)[i];
    case TFS_DTYPE_INT64:  return (double)((const int64_t *)t->data)[i];
    default:
        ck_abort_msg("gh_get: dtype %s", tfs_dtype_short_name(t->dtype));
        return 0;
    }
}

void gh_set(tfs_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:  ((float *)t->data)[i] = (float)v; break;
    case TFS_DTYPE_DOUBLE: ((double *)t->data)[i] = v; break;
    case TFS_DTYPE_INT32:  ((int32_t *)t->data)[i] = (int32_t)v; break;
    case TFS_DTYPE_INT64:  ((int64_t *)t->data)[i] = (int64_t)v; break;
    default:               ck_abort_msg("gh_set: dtype %s", tfs_dtype_short_name(t->dtype));
    }
}

tfs_tensor *gh_random(enum tfs_dtype dt, int rank, const int64_t *dims, uint32_t seed)
{
    tfs_tensor *f = nn_random_f32(rank, dims, seed);
    if (dt == TFS_DTYPE_FLOAT)
        return f;
    tfs_tensor *t = gh_convert(f, dt);
    tfs_tensor_unref(f);
    return t;
}

tfs_tensor *gh_convert(const tfs_tensor *t, enum tfs_dtype dt)
{
    tfs_tensor *c = rt_tensor(dt, t->rank, t->dims, NULL);
    for (int64_t i = 0; i < t->nelem; i++)
        gh_set(c, i, gh_get(t, i));
    return c;
}

tfs_tensor *gh_from(enum tfs_dtype dt, int rank, const int64_t *dims, const double *v)
{
    tfs_tensor *t = rt_tensor(dt, rank, dims, NULL);
    for (int64_t i = 0; v && i < t->nelem; i++)
        gh_set(t, i, v[i]);
    return t;
}

tfs_tensor *gh_i32(int n, const int32_t *v)
{
    int64_t d[1] = {n};
    return rt_tensor(TFS_DTYPE_INT32, 1, d, v);
}

void gh_assert_close(const tfs_tensor *t, enum tfs_dtype dt, int rank, const int64_t *dims,
                     const double *want, const double *mag, double rel, double abs_tol,
                     const char *what)
{
    char got_s[128], want_s[128];
    ck_assert_msg(t->dtype == dt, "%s: dtype %s, want %s", what, tfs_dtype_short_name(t->dtype),
                  tfs_dtype_short_name(dt));
    ck_assert_msg(tfs_shape_equal(t->rank, t->dims, rank, dims), "%s: shape %s, want %s", what,
                  tfs_shape_str(t->rank, t->dims, got_s, sizeof got_s),
                  tfs_shape_str(rank, dims, want_s, sizeof want_s));
    for (int64_t i = 0; i < t->nelem; i++) {
        double got = gh_get(t, i), m = mag ? mag[i] : fabs(want[i]);
        double err = fabs(got - want[i]);
        ck_assert_msg(err <= rel * m + abs_tol,
                      "%s: element %lld is %.12g, want %.12g (err %.3g, bound %.3g)", what,
                      (long long)i, got, want[i], err, rel * m + abs_tol);
    }
}

double gh_weighted_sum(gh_op *o, tfs_tensor *const *ins, int out_idx, const tfs_tensor *w)
{
    tfs_tensor *outs[GH_MAX_IO];
    tfs_status st;
    ck_assert_msg(gh_run(o, ins, outs, &st) == TFS_OK, "forward run: %s", st.msg);
    const tfs_tensor *y = outs[out_idx];
    ck_assert_int_eq(y->nelem, w->nelem);
    double s = 0;
    for (int64_t i = 0; i < y->nelem; i++)
        s += gh_get(y, i) * gh_get(w, i);
    for (int i = 0; i < o->n_out; i++)
        tfs_tensor_unref(outs[i]);
    return s;
}

double *gh_fd(gh_op *o, tfs_tensor **ins, int wrt, int out_idx, const tfs_tensor *w, double h)
{
    tfs_tensor *x = ins[wrt];
    double *d = tfs_calloc(x->nelem ? (size_t)x->nelem : 1, sizeof *d);
    ck_assert(d);
    for (int64_t i = 0; i < x->nelem; i++) {
        double x0 = gh_get(x, i);
        gh_set(x, i, x0 + h);
        double xp = gh_get(x, i);
        double lp = gh_weighted_sum(o, ins, out_idx, w);
        gh_set(x, i, x0 - h);
        double xm = gh_get(x, i);
        double lm = gh_weighted_sum(o, ins, out_idx, w);
        gh_set(x, i, x0);
        d[i] = (lp - lm) / (xp - xm);
    }
    return d;
}
