/* Graph-building shortcuts for the runtime tests (see helpers.h). */
#include "tests/runtime/helpers.h"

#include <string.h>

tfs_tensor *rt_tensor(enum tfs_dtype dt, int rank, const int64_t *dims, const void *values)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_msg(tfs_tensor_new(dt, rank, dims, &t, &st) == TFS_OK, "%s", st.msg);
    if (values && t->nbytes)
        memcpy(t->data, values, t->nbytes);
    return t;
}

tfs_tensor *rt_scalar_f32(float v)
{
    return rt_tensor(TFS_DTYPE_FLOAT, 0, NULL, &v);
}

tfs_tensor *rt_strings(int n, const char *const *values)
{
    int64_t dims[1] = {n};
    tfs_tensor *t = rt_tensor(TFS_DTYPE_STRING, 1, dims, NULL);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tfs_tensor_set_string(t, i, values[i], strlen(values[i]), NULL), TFS_OK);
    return t;
}

int rt_const(tfs_graph *g, const char *name, tfs_tensor *t)
{
    int id = tfs_graph_add_node(g, name, "Const");
    tfs_graph_set_attr_tensor(g, id, "value", t);
    tfs_graph_set_attr_type(g, id, "dtype", t->dtype);
    tfs_tensor_unref(t);
    ck_assert_int_ge(id, 0);
    return id;
}

int rt_placeholder(tfs_graph *g, const char *name, enum tfs_dtype dt)
{
    int id = tfs_graph_add_node(g, name, "Placeholder");
    tfs_graph_set_attr_type(g, id, "dtype", dt);
    ck_assert_int_ge(id, 0);
    return id;
}

int rt_node(tfs_graph *g, const char *name, const char *op, const char *a, const char *b,
            enum tfs_dtype T)
{
    int id = tfs_graph_add_node(g, name, op);
    if (a)
        tfs_graph_add_input(g, id, a);
    if (b)
        tfs_graph_add_input(g, id, b);
    if (T != TFS_DTYPE_INVALID)
        tfs_graph_set_attr_type(g, id, "T", T);
    ck_assert_int_ge(id, 0);
    return id;
}

tfs_session *rt_session(tfs_graph *g, const tfs_session_opts *opts)
{
    tfs_status st;
    ck_assert_msg(tfs_graph_finalize(g, &st) == TFS_OK, "finalize: %s", st.msg);
    tfs_session *s = NULL;
    ck_assert_msg(tfs_session_new(g, opts, &s, &st) == TFS_OK, "session: %s", st.msg);
    tfs_graph_unref(g);
    return s;
}

enum tfs_code rt_run1(tfs_session *s, const tfs_feed *feeds, int nfeeds, const char *fetch,
                      tfs_tensor **out, tfs_status *st)
{
    return tfs_session_run(s, feeds, nfeeds, &fetch, 1, NULL, 0, out, st);
}

void rt_assert_same(const tfs_tensor *a, const tfs_tensor *b, const char *what)
{
    ck_assert_msg(a && b, "%s: missing tensor", what);
    ck_assert_msg(a->dtype == b->dtype && tfs_shape_equal(a->rank, a->dims, b->rank, b->dims),
                  "%s: dtype or shape differs between runs", what);
    if (a->dtype == TFS_DTYPE_STRING) {
        const tfs_string *x = a->data, *y = b->data;
        for (int64_t i = 0; i < a->nelem; i++)
            ck_assert_msg(x[i].len == y[i].len &&
                              (x[i].len == 0 || !memcmp(x[i].data, y[i].data, x[i].len)),
                          "%s: string %lld differs between runs", what, (long long)i);
        return;
    }
    if (a->dtype == TFS_DTYPE_RESOURCE || a->dtype == TFS_DTYPE_VARIANT || a->nbytes == 0)
        return;   /* pointers, not values */
    ck_assert_msg(a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes),
                  "%s: the run with buffer reuse differs from the first run", what);
}

enum tfs_code rt_run_twice(tfs_session *s, const char *op, const tfs_feed *feeds, int nfeeds,
                           const char *const *fetches, int nfetches, tfs_tensor **outputs,
                           tfs_status *st)
{
    enum tfs_code rc = tfs_session_run(s, feeds, nfeeds, fetches, nfetches, NULL, 0, outputs, st);
    const struct tfs_op_def *d = tfs__op_lookup(op);
    if (rc != TFS_OK || !d || (d->flags & TFS_OPF_STATEFUL))
        return rc;
    tfs_tensor *again[16] = {NULL};
    tfs_status st2;
    ck_assert_int_le(nfetches, 16);
    ck_assert_msg(tfs_session_run(s, feeds, nfeeds, fetches, nfetches, NULL, 0, again, &st2) ==
                      TFS_OK, "%s: second run failed: %s", op, st2.msg);
    for (int i = 0; i < nfetches; i++) {
        rt_assert_same(outputs[i], again[i], op);
        tfs_tensor_unref(outputs[i]);
        outputs[i] = again[i];
    }
    return rc;
}

enum tfs_code rt_run_op(const char *op, tfs_tensor *a, tfs_tensor *b, bool T_attr,
                        rt_attr_fn extra, void *arg, tfs_tensor **out, tfs_status *st)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    rt_placeholder(g, "a", a->dtype);
    if (b)
        rt_placeholder(g, "b", b->dtype);
    int id = rt_node(g, "op", op, "a", b ? "b" : NULL, T_attr ? a->dtype : TFS_DTYPE_INVALID);
    if (extra)
        extra(g, id, arg);
    tfs_session *s = rt_session(g, NULL);
    tfs_feed feeds[2] = {{"a:0", a}, {"b:0", b}};
    const char *fetch = "op:0";
    enum tfs_code rc = rt_run_twice(s, op, feeds, b ? 2 : 1, &fetch, 1, out, st);
    tfs_session_free(s);
    return rc;
}
