/* Shortcuts for the array-family kernel tests (see array-helpers.h). */
#include "tests/runtime/array-helpers.h"

#include <stdio.h>
#include <string.h>

tfs_tensor *at_t(enum tfs_dtype dt, int rank, const int64_t *dims, const void *v)
{
    return rt_tensor(dt, rank, dims, v);
}

tfs_tensor *at_i32v(int n, const int32_t *v)
{
    int64_t d = n;
    return rt_tensor(TFS_DTYPE_INT32, 1, &d, v);
}

tfs_tensor *at_i64v(int n, const int64_t *v)
{
    int64_t d = n;
    return rt_tensor(TFS_DTYPE_INT64, 1, &d, v);
}

tfs_tensor *at_i32s(int32_t v)
{
    return rt_tensor(TFS_DTYPE_INT32, 0, NULL, &v);
}

tfs_tensor *at_strs(int rank, const int64_t *dims, const char *const *v)
{
    tfs_tensor *t = rt_tensor(TFS_DTYPE_STRING, rank, dims, NULL);
    for (int64_t i = 0; i < t->nelem; i++)
        ck_assert_int_eq(tfs_tensor_set_string(t, i, v[i], strlen(v[i]), NULL), TFS_OK);
    return t;
}

enum tfs_code at_run(const char *op, int n_in, tfs_tensor **ins, bool set_T, at_attr_fn fn,
                     const void *arg, int n_out, tfs_tensor **outs, tfs_status *st)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    char names[8][16];
    tfs_feed feeds[8];
    ck_assert_int_le(n_in, 8);
    ck_assert_int_le(n_out, 8);
    int id = tfs_graph_add_node(g, "op", op);
    for (int i = 0; i < n_in; i++) {
        snprintf(names[i], sizeof names[i], "in%d", i);
        rt_placeholder(g, names[i], ins[i]->dtype);
        tfs_graph_add_input(g, id, names[i]);
        feeds[i].name = NULL;
    }
    if (set_T)
        tfs_graph_set_attr_type(g, id, "T", ins[0]->dtype);
    if (fn)
        fn(g, id, arg);
    tfs_session *s = rt_session(g, NULL);
    char feed_names[8][20], fetch_names[8][20];
    const char *fetches[8];
    for (int i = 0; i < n_in; i++) {
        snprintf(feed_names[i], sizeof feed_names[i], "in%d:0", i);
        feeds[i].name = feed_names[i];
        feeds[i].tensor = ins[i];
    }
    for (int i = 0; i < n_out; i++) {
        snprintf(fetch_names[i], sizeof fetch_names[i], "op:%d", i);
        fetches[i] = fetch_names[i];
        outs[i] = NULL;
    }
    enum tfs_code rc = rt_run_twice(s, op, feeds, n_in, fetches, n_out, outs, st);
    tfs_session_free(s);
    for (int i = 0; i < n_in; i++)
        tfs_tensor_unref(ins[i]);
    return rc;
}

tfs_tensor *at_run1(const char *op, int n_in, tfs_tensor **ins, bool set_T, at_attr_fn fn,
                    const void *arg)
{
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(at_run(op, n_in, ins, set_T, fn, arg, 1, &out, &st) == TFS_OK, "%s: %s", op,
                  st.msg);
    return out;
}

static void expect_shape(const tfs_tensor *t, enum tfs_dtype dt, int rank, const int64_t *dims)
{
    char got[128], want[128];
    ck_assert_msg(t != NULL, "no tensor");
    ck_assert_msg(t->dtype == dt, "dtype %s, want %s", tfs_dtype_short_name(t->dtype),
                  tfs_dtype_short_name(dt));
    ck_assert_msg(tfs_shape_equal(t->rank, t->dims, rank, dims), "shape %s, want %s",
                  tfs_shape_str(t->rank, t->dims, got, sizeof got),
                  tfs_shape_str(rank, dims, want, sizeof want));
}

void at_expect(tfs_tensor *t, enum tfs_dtype dt, int rank, const int64_t *dims, const void *want)
{
    expect_shape(t, dt, rank, dims);
    size_t esz = tfs_dtype_size(dt);
    for (int64_t i = 0; i < t->nelem; i++) {
        static const char zero[16];
        const char *g = (const char *)t->data + i * esz;
        const char *w = want ? (const char *)want + i * esz : zero;
        if (memcmp(g, w, esz) != 0) {
            long long gv = 0, wv = 0;
            if (dt == TFS_DTYPE_INT32) {
                gv = *(const int32_t *)g;
                wv = *(const int32_t *)w;
            } else if (dt == TFS_DTYPE_INT64) {
                gv = *(const int64_t *)g;
                wv = *(const int64_t *)w;
            } else if (dt == TFS_DTYPE_FLOAT) {
                ck_abort_msg("element %lld: got %.9g, want %.9g", (long long)i,
                             (double)*(const float *)g, (double)*(const float *)w);
            } else if (esz == 1) {
                gv = *(const uint8_t *)g;
                wv = *(const uint8_t *)w;
            }
            ck_abort_msg("element %lld: got %lld, want %lld", (long long)i, gv, wv);
        }
    }
    tfs_tensor_unref(t);
}

void at_expect_strs(tfs_tensor *t, int rank, const int64_t *dims, const char *const *want)
{
    expect_shape(t, TFS_DTYPE_STRING, rank, dims);
    const tfs_string *s = tfs_tensor_strings(t);
    for (int64_t i = 0; i < t->nelem; i++)
        ck_assert_msg(s[i].len == strlen(want[i]) &&
                          (s[i].len == 0 || !memcmp(s[i].data, want[i], s[i].len)),
                      "element %lld: got '%.*s', want '%s'", (long long)i, (int)s[i].len,
                      s[i].data ? s[i].data : "", want[i]);
    tfs_tensor_unref(t);
}

void at_set_int_list(tfs_graph *g, int id, const char *name, int n, const int64_t *v)
{
    tfs_attr_value a = {.kind = TFS_ATTR_LIST};
    a.list.kind = n ? TFS_ATTR_I : TFS_ATTR_NONE;
    a.list.n = n;
    a.list.i = (int64_t *)v;
    tfs_graph_set_attr(g, id, name, &a);
}
