/* Tests of the ParseExample / ParseExampleV2 kernels (runtime/kernels/parsing.c), run the way a
 * model runs them: a graph with a Placeholder for the serialized Examples, Const nodes for the keys
 * and defaults, the parse node with TensorFlow's attrs, and a session. The Examples are built here
 * with a tiny protobuf encoder, so each test states its bytes exactly (packed or not, unknown
 * fields, concatenations, truncations). Float results are compared exactly: the kernel copies the
 * bits it is given, so any difference is a bug (tolerance 0).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/runtime-impl.h"
#include "runtime/session.h"
#include "tests/support/tfs-test.h"

Suite *suite_runtime_parsing(void);

/* ---- a tiny protobuf encoder ------------------------------------------------------------------ */

typedef struct wbuf {
    uint8_t b[2048];
    size_t  n;
} wbuf;

static void w_raw(wbuf *w, const void *p, size_t n)
{
    ck_assert_uint_le(w->n + n, sizeof w->b);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void w_varint(wbuf *w, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        w_raw(w, &c, 1);
    } while (v);
}

static void w_tag(wbuf *w, unsigned field, unsigned wt)
{
    w_varint(w, (uint64_t)field << 3 | wt);
}

static void w_len(wbuf *w, unsigned field, const void *p, size_t n)
{
    w_tag(w, field, 2);
    w_varint(w, n);
    w_raw(w, p, n);
}

static void w_f32(wbuf *w, float f)   /* little-endian, as the wire wants */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    w_raw(w, b, 4);
}

/* Feature{float_list{value: v}} */
static void feat_floats(wbuf *feat, const float *v, int n, bool packed)
{
    wbuf list = {0}, pk = {0};
    for (int i = 0; i < n; i++) {
        if (packed) {
            w_f32(&pk, v[i]);
        } else {
            w_tag(&list, 1, 5);
            w_f32(&list, v[i]);
        }
    }
    if (packed)
        w_len(&list, 1, pk.b, pk.n);
    w_len(feat, 2, list.b, list.n);
}

static void feat_int64s(wbuf *feat, const int64_t *v, int n, bool packed)
{
    wbuf list = {0}, pk = {0};
    for (int i = 0; i < n; i++) {
        if (packed) {
            w_varint(&pk, (uint64_t)v[i]);
        } else {
            w_tag(&list, 1, 0);
            w_varint(&list, (uint64_t)v[i]);
        }
    }
    if (packed)
        w_len(&list, 1, pk.b, pk.n);
    w_len(feat, 3, list.b, list.n);
}

static void feat_bytes(wbuf *feat, const char *const *v, int n)
{
    wbuf list = {0};
    for (int i = 0; i < n; i++)
        w_len(&list, 1, v[i], strlen(v[i]));
    w_len(feat, 1, list.b, list.n);
}

/* Features.feature[key] = feat, as one map entry */
static void add_entry(wbuf *features, const char *key, const wbuf *feat)
{
    wbuf e = {0};
    w_len(&e, 1, key, strlen(key));
    w_len(&e, 2, feat->b, feat->n);
    w_len(features, 1, e.b, e.n);
}

static void add_float(wbuf *features, const char *key, float v)
{
    wbuf f = {0};
    feat_floats(&f, &v, 1, true);
    add_entry(features, key, &f);
}

/* Example{features} */
static wbuf example_of(const wbuf *features)
{
    wbuf ex = {0};
    w_len(&ex, 1, features->b, features->n);
    return ex;
}

/* ---- running a parse node --------------------------------------------------------------------- */

typedef struct spec {
    bool           v2;
    int            ns;
    const char    *skeys[4];
    enum tfs_dtype stypes[4];
    int            nd;
    const char    *dkeys[4];
    enum tfs_dtype dtypes[4];
    tfs_shape      dshapes[4];
    tfs_tensor    *ddefaults[4];   /* NULL: empty (the feature is required) */
    int            nragged;
    const char    *names[4];       /* per example; NULL: names is empty */
} spec;

static tfs_tensor *strings_tensor(int rank, int64_t n, const char *const *s, const size_t *lens)
{
    int64_t dims[1] = {n};
    tfs_tensor *t;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, rank, dims, &t, &st), TFS_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_int_eq(tfs_tensor_set_string(t, i, s[i], lens ? lens[i] : strlen(s[i]), &st),
                         TFS_OK);
    return t;
}

static void add_const(tfs_graph *g, const char *name, tfs_tensor *t)
{
    int id = tfs_graph_add_node(g, name, "Const");
    tfs_graph_set_attr_type(g, id, "dtype", t->dtype);
    tfs_graph_set_attr_tensor(g, id, "value", t);
    tfs_tensor_unref(t);
}

static void set_list(tfs_graph *g, int node, const char *name, enum tfs_attr_kind kind, int n,
                     void *items)
{
    tfs_attr_value v;
    memset(&v, 0, sizeof v);
    v.kind = TFS_ATTR_LIST;
    v.list.kind = n ? kind : TFS_ATTR_NONE;
    v.list.n = n;
    if (kind == TFS_ATTR_TYPE)
        v.list.type = items;
    else
        v.list.shape = items;
    tfs_graph_set_attr(g, node, name, &v);
}

static tfs_graph *build(const spec *s, int batch)
{
    tfs_graph *g;
    tfs_status st;
    char name[32], in[40];
    ck_assert_int_eq(tfs_graph_new(&g, &st), TFS_OK);
    int ser = tfs_graph_add_node(g, "ser", "Placeholder");
    tfs_graph_set_attr_type(g, ser, "dtype", TFS_DTYPE_STRING);
    add_const(g, "names", strings_tensor(1, s->names[0] ? batch : 0, s->names, NULL));
    if (s->v2) {
        add_const(g, "sk", strings_tensor(1, s->ns, s->skeys, NULL));
        add_const(g, "dk", strings_tensor(1, s->nd, s->dkeys, NULL));
        static const char *const rkeys[4] = {"r0", "r1", "r2", "r3"};
        add_const(g, "rk", strings_tensor(1, s->nragged, rkeys, NULL));
    } else {
        for (int i = 0; i < s->ns; i++) {
            snprintf(name, sizeof name, "sk%d", i);
            add_const(g, name, strings_tensor(0, 1, &s->skeys[i], NULL));
        }
        for (int i = 0; i < s->nd; i++) {
            snprintf(name, sizeof name, "dk%d", i);
            add_const(g, name, strings_tensor(0, 1, &s->dkeys[i], NULL));
        }
    }
    for (int i = 0; i < s->nd; i++) {
        tfs_tensor *d = s->ddefaults[i];
        if (!d) {
            int64_t zero = 0;
            ck_assert_int_eq(tfs_tensor_new(s->dtypes[i], 1, &zero, &d, &st), TFS_OK);
        } else {
            tfs_tensor_ref(d);
        }
        snprintf(name, sizeof name, "def%d", i);
        add_const(g, name, d);
    }
    int pe = tfs_graph_add_node(g, "pe", s->v2 ? "ParseExampleV2" : "ParseExample");
    tfs_graph_add_input(g, pe, "ser");
    tfs_graph_add_input(g, pe, "names");
    if (s->v2) {
        tfs_graph_add_input(g, pe, "sk");
        tfs_graph_add_input(g, pe, "dk");
        tfs_graph_add_input(g, pe, "rk");
    } else {
        for (int i = 0; i < s->ns; i++) {
            snprintf(in, sizeof in, "sk%d", i);
            tfs_graph_add_input(g, pe, in);
        }
        for (int i = 0; i < s->nd; i++) {
            snprintf(in, sizeof in, "dk%d", i);
            tfs_graph_add_input(g, pe, in);
        }
    }
    for (int i = 0; i < s->nd; i++) {
        snprintf(in, sizeof in, "def%d", i);
        tfs_graph_add_input(g, pe, in);
    }
    enum tfs_dtype stypes[4], dtypes[4], rtypes[4] = {TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    enum tfs_dtype rsplits[4] = {TFS_DTYPE_INT64, TFS_DTYPE_INT64};
    tfs_shape shapes[4];
    memcpy(stypes, s->stypes, sizeof stypes);
    memcpy(dtypes, s->dtypes, sizeof dtypes);
    memcpy(shapes, s->dshapes, sizeof shapes);
    if (s->v2) {
        tfs_graph_set_attr_int(g, pe, "num_sparse", s->ns);
        set_list(g, pe, "ragged_value_types", TFS_ATTR_TYPE, s->nragged, rtypes);
        set_list(g, pe, "ragged_split_types", TFS_ATTR_TYPE, s->nragged, rsplits);
    } else {
        tfs_graph_set_attr_int(g, pe, "Nsparse", s->ns);
        tfs_graph_set_attr_int(g, pe, "Ndense", s->nd);
    }
    set_list(g, pe, "sparse_types", TFS_ATTR_TYPE, s->ns, stypes);
    set_list(g, pe, "Tdense", TFS_ATTR_TYPE, s->nd, dtypes);
    set_list(g, pe, "dense_shapes", TFS_ATTR_SHAPE, s->nd, shapes);
    ck_assert_msg(tfs_graph_finalize(g, &st) == TFS_OK, "finalize: %s", st.msg);
    return g;
}

/* Runs the parse node over `batch` examples (a scalar input when scalar is true); fetches all of
 * its outputs into out[] (3*ns + nd of them). Returns the run's code; st says why. */
static enum tfs_code run_parse(const spec *s, const wbuf *ex, int batch, bool scalar,
                               tfs_tensor **out, tfs_status *st)
{
    tfs_graph *g = build(s, batch);
    tfs_session *sess;
    ck_assert_int_eq(tfs_session_new(g, NULL, &sess, st), TFS_OK);
    const char *data[8];
    size_t lens[8];
    for (int i = 0; i < batch; i++) {
        data[i] = (const char *)ex[i].b;
        lens[i] = ex[i].n;
    }
    tfs_tensor *ser = strings_tensor(scalar ? 0 : 1, batch, data, lens);
    int nout = 3 * s->ns + s->nd;
    char names[16][16];
    const char *fetch[16];
    for (int i = 0; i < nout; i++) {
        snprintf(names[i], sizeof names[i], "pe:%d", i);
        fetch[i] = names[i];
    }
    tfs_feed feed = {"ser:0", ser};
    enum tfs_code code = tfs_session_run(sess, &feed, 1, fetch, nout, NULL, 0, out, st);
    tfs_tensor_unref(ser);
    tfs_session_free(sess);
    tfs_graph_unref(g);
    return code;
}

static void unref_all(tfs_tensor **t, int n)
{
    for (int i = 0; i < n; i++)
        tfs_tensor_unref(t[i]);
}

static tfs_tensor *floats(int rank, const int64_t *dims, const float *v)
{
    return tfs_test_tensor_f32(rank, dims, v);
}

static void assert_i64(const tfs_tensor *t, int rank, const int64_t *dims, const int64_t *want)
{
    ck_assert_int_eq(t->dtype, TFS_DTYPE_INT64);
    ck_assert(tfs_shape_equal(t->rank, t->dims, rank, dims));
    for (int64_t i = 0; i < t->nelem; i++)
        ck_assert_msg(((const int64_t *)t->data)[i] == want[i], "element %lld: got %lld, want %lld",
                      (long long)i, (long long)((const int64_t *)t->data)[i], (long long)want[i]);
}

static void assert_str(tfs_tensor *t, int64_t i, const char *want)
{
    ck_assert_int_eq(t->dtype, TFS_DTYPE_STRING);
    const tfs_string *s = &tfs_tensor_strings(t)[i];
    ck_assert_uint_eq(s->len, strlen(want));
    ck_assert(s->len == 0 || memcmp(s->data, want, s->len) == 0);
}

static spec one_float(const char *key, int64_t dim, tfs_tensor *dflt)
{
    spec s;
    memset(&s, 0, sizeof s);
    s.nd = 1;
    s.dkeys[0] = key;
    s.dtypes[0] = TFS_DTYPE_FLOAT;
    s.dshapes[0].rank = 1;
    s.dshapes[0].dims[0] = dim;
    s.ddefaults[0] = dflt;
    return s;
}

#define ASSERT_MSG_HAS(st, text) \
    ck_assert_msg(strstr((st).msg, (text)) != NULL, "message '%s' lacks '%s'", (st).msg, (text))

/* ---- dense features ---------------------------------------------------------------------------- */

START_TEST(test_dense_float_batch)
{
    wbuf feats = {0}, ex[3];
    add_float(&feats, "x", 2.0f);
    for (int i = 0; i < 3; i++)
        ex[i] = example_of(&feats);
    spec s = one_float("x", 1, NULL);
    tfs_tensor *out[1];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 3, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t dims[2] = {3, 1};
    const float want[3] = {2.0f, 2.0f, 2.0f};
    tfs_test_assert_f32(out[0], 2, dims, want, 0.0);
    unref_all(out, 1);
}
END_TEST

START_TEST(test_dense_default)
{
    wbuf f0 = {0}, f1 = {0}, f2 = {0}, ex[3];
    add_float(&f0, "x", 1.5f);
    add_float(&f2, "y", 9.0f);   /* another key: x is still missing */
    ex[0] = example_of(&f0);
    ex[1] = example_of(&f1);
    ex[2] = example_of(&f2);
    const int64_t one = 1;
    const float minus1 = -1.0f;
    tfs_tensor *dflt = floats(1, &one, &minus1);
    spec s = one_float("x", 1, dflt);
    tfs_tensor *out[1];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 3, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t dims[2] = {3, 1};
    const float want[3] = {1.5f, -1.0f, -1.0f};
    tfs_test_assert_f32(out[0], 2, dims, want, 0.0);
    unref_all(out, 1);
    tfs_tensor_unref(dflt);
}
END_TEST

START_TEST(test_dense_required_missing)
{
    wbuf f0 = {0}, f1 = {0}, ex[2];
    add_float(&f0, "x", 1.0f);
    ex[0] = example_of(&f0);
    ex[1] = example_of(&f1);
    spec s = one_float("x", 1, NULL);
    tfs_tensor *out[1] = {NULL};
    tfs_status st;
    ck_assert_int_eq(run_parse(&s, ex, 2, false, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "Name: <unknown>, Feature: x (data type: float) is required but could not "
                       "be found.");
    ck_assert_ptr_null(out[0]);
    /* with example names, the message names the example at fault */
    s.names[0] = "first";
    s.names[1] = "second";
    ck_assert_int_eq(run_parse(&s, ex, 2, false, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "Name: second, Feature: x (data type: float) is required");
}
END_TEST

START_TEST(test_dense_int64_and_bytes)
{
    const int64_t ids0[2] = {7, -3}, ids1[2] = {(int64_t)1 << 40, 0};
    const char *w0[1] = {"cat"}, *w1[1] = {""};
    wbuf f[2], ex[2];
    memset(f, 0, sizeof f);
    for (int i = 0; i < 2; i++) {
        wbuf a = {0}, b = {0};
        feat_int64s(&a, i ? ids1 : ids0, 2, i == 0);
        feat_bytes(&b, i ? w1 : w0, 1);
        add_entry(&f[i], "ids", &a);
        add_entry(&f[i], "word", &b);
        ex[i] = example_of(&f[i]);
    }
    spec s;
    memset(&s, 0, sizeof s);
    s.nd = 2;
    s.dkeys[0] = "ids";
    s.dtypes[0] = TFS_DTYPE_INT64;
    s.dshapes[0] = (tfs_shape){1, {2}};
    s.dkeys[1] = "word";
    s.dtypes[1] = TFS_DTYPE_STRING;
    s.dshapes[1] = (tfs_shape){0, {0}};   /* a scalar per example */
    tfs_tensor *out[2];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 2, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t idims[2] = {2, 2}, wdims[1] = {2};
    const int64_t want[4] = {7, -3, (int64_t)1 << 40, 0};
    assert_i64(out[0], 2, idims, want);
    ck_assert(tfs_shape_equal(out[1]->rank, out[1]->dims, 1, wdims));
    assert_str(out[1], 0, "cat");
    assert_str(out[1], 1, "");
    unref_all(out, 2);
}
END_TEST

START_TEST(test_dense_packed_and_unpacked)
{
    const float v[3] = {1.0f, -2.5f, 3.25f};
    wbuf f[2], ex[2];
    memset(f, 0, sizeof f);
    for (int i = 0; i < 2; i++) {
        wbuf a = {0};
        feat_floats(&a, v, 3, i == 0);
        add_entry(&f[i], "x", &a);
        ex[i] = example_of(&f[i]);
    }
    ck_assert_uint_ne(ex[0].n, ex[1].n);   /* really two encodings */
    spec s = one_float("x", 3, NULL);
    tfs_tensor *out[1];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 2, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t dims[2] = {2, 3};
    const float want[6] = {1.0f, -2.5f, 3.25f, 1.0f, -2.5f, 3.25f};
    tfs_test_assert_f32(out[0], 2, dims, want, 0.0);
    unref_all(out, 1);
}
END_TEST

/* Concatenated Examples merge, as protobuf parses them: context bytes + example bytes. */
START_TEST(test_merged_examples_later_wins)
{
    wbuf ctx = {0}, own = {0}, ex[1];
    add_float(&ctx, "a", 1.0f);
    add_float(&ctx, "b", 2.0f);
    add_float(&own, "b", 5.0f);
    add_float(&own, "c", 7.0f);
    ex[0] = example_of(&ctx);
    wbuf tail = example_of(&own);
    w_raw(&ex[0], tail.b, tail.n);
    spec s;
    memset(&s, 0, sizeof s);
    s.nd = 3;
    for (int i = 0; i < 3; i++) {
        static const char *const keys[3] = {"a", "b", "c"};
        s.dkeys[i] = keys[i];
        s.dtypes[i] = TFS_DTYPE_FLOAT;
        s.dshapes[i] = (tfs_shape){1, {1}};
    }
    tfs_tensor *out[3];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 1, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t dims[2] = {1, 1};
    const float a = 1.0f, b = 5.0f, c = 7.0f;
    tfs_test_assert_f32(out[0], 2, dims, &a, 0.0);
    tfs_test_assert_f32(out[1], 2, dims, &b, 0.0);
    tfs_test_assert_f32(out[2], 2, dims, &c, 0.0);
    unref_all(out, 3);

    /* a key twice in one Features map: the last entry wins too */
    wbuf twice = {0};
    add_float(&twice, "b", 1.0f);
    add_float(&twice, "a", 3.0f);
    add_float(&twice, "c", 4.0f);
    add_float(&twice, "b", 6.0f);
    ex[0] = example_of(&twice);
    ck_assert_msg(run_parse(&s, ex, 1, false, out, &st) == TFS_OK, "%s", st.msg);
    const float b2 = 6.0f;
    tfs_test_assert_f32(out[1], 2, dims, &b2, 0.0);
    unref_all(out, 3);
}
END_TEST

START_TEST(test_unknown_fields_skipped)
{
    /* FloatList { 2: varint 5, 1: packed [2.5], 3: fixed64 } */
    wbuf list = {0}, pk = {0}, feat = {0}, entry = {0}, feats = {0}, ex[1];
    memset(ex, 0, sizeof ex);
    w_tag(&list, 2, 0);
    w_varint(&list, 5);
    w_f32(&pk, 2.5f);
    w_len(&list, 1, pk.b, pk.n);
    w_tag(&list, 3, 1);
    w_raw(&list, "\1\2\3\4\5\6\7\10", 8);
    /* Feature { 7: "junk", 2: list } */
    w_len(&feat, 7, "junk", 4);
    w_len(&feat, 2, list.b, list.n);
    /* entry { 5: fixed32, 1: "x", 2: feature } */
    w_tag(&entry, 5, 5);
    w_raw(&entry, "abcd", 4);
    w_len(&entry, 1, "x", 1);
    w_len(&entry, 2, feat.b, feat.n);
    /* Features { 3: varint, 1: entry } */
    w_tag(&feats, 3, 0);
    w_varint(&feats, 300);
    w_len(&feats, 1, entry.b, entry.n);
    /* Example { 9: fixed64, 1: features, 4: bytes } */
    w_tag(&ex[0], 9, 1);
    w_raw(&ex[0], "12345678", 8);
    w_len(&ex[0], 1, feats.b, feats.n);
    w_len(&ex[0], 4, "zz", 2);
    spec s = one_float("x", 1, NULL);
    tfs_tensor *out[1];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 1, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t dims[2] = {1, 1};
    const float want = 2.5f;
    tfs_test_assert_f32(out[0], 2, dims, &want, 0.0);
    unref_all(out, 1);
}
END_TEST

START_TEST(test_wrong_kind_and_count)
{
    wbuf f = {0}, ex[1];
    wbuf a = {0};
    const int64_t v = 3;
    feat_int64s(&a, &v, 1, true);
    add_entry(&f, "x", &a);
    ex[0] = example_of(&f);
    spec s = one_float("x", 1, NULL);
    tfs_tensor *out[1];
    tfs_status st;
    ck_assert_int_eq(run_parse(&s, ex, 1, false, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "Name: <unknown>, Key: x, Index: 0.  Data types don't match. Data type: "
                       "int64 but expected type: float");

    const float two[2] = {1.0f, 2.0f};
    wbuf g = {0}, b = {0};
    feat_floats(&b, two, 2, true);
    add_entry(&g, "x", &b);
    ex[0] = example_of(&g);
    ck_assert_int_eq(run_parse(&s, ex, 1, false, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "Key: x, Index: 0.  Number of float values != expected.  Values size: 2 "
                       "but output shape: [1]");
}
END_TEST

/* Every truncation of a valid Example, and some garbage, fail cleanly (run under ASan too). */
START_TEST(test_truncated_and_garbage)
{
    wbuf f = {0}, a = {0}, full, ex[1];
    const int64_t ids[3] = {1, 300, -1};
    const float x = 0.5f;
    feat_int64s(&a, ids, 3, true);
    add_entry(&f, "ids", &a);
    add_float(&f, "x", x);
    full = example_of(&f);
    spec s;
    memset(&s, 0, sizeof s);
    s.nd = 2;
    s.dkeys[0] = "ids";
    s.dtypes[0] = TFS_DTYPE_INT64;
    s.dshapes[0] = (tfs_shape){1, {3}};
    s.dkeys[1] = "x";
    s.dtypes[1] = TFS_DTYPE_FLOAT;
    s.dshapes[1] = (tfs_shape){1, {1}};
    tfs_tensor *out[2];
    tfs_status st;
    int bad = 0;
    for (size_t n = 1; n < full.n; n++) {
        ex[0] = full;
        ex[0].n = n;
        /* the Example is one length-delimited field, so every prefix cuts it */
        ck_assert_msg(run_parse(&s, ex, 1, false, out, &st) == TFS_INVALID_ARGUMENT,
                      "prefix %zu: %s", n, st.msg);
        ASSERT_MSG_HAS(st, "Could not parse example input, value: '");
        bad++;
    }
    ck_assert_int_eq(bad, (int)full.n - 1);

    static const struct {
        const char *bytes;
        size_t      n;
        const char *msg;
    } garbage[] = {
        {"\xff\xff\xff", 3, "Could not parse example input"},
        {"\x0a\x7f", 2, "Could not parse example input"},                 /* length past the end */
        {"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "Could not parse example input"},
        {"\x0b\x0c", 2, "Could not parse example input"},                 /* a group */
        {"\x00", 1, "Could not parse example input"},                     /* field 0 */
        /* x's FloatList with packed bytes of length 3 */
        {"\x0a\x0e\x0a\x0c\x0a\x01x\x12\x07\x12\x05\x0a\x03\x00\x00\x80", 16,
         "Key: x, Index: 0.  Can't parse serialized Example."},
    };
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        ex[0].n = 0;
        w_raw(&ex[0], garbage[i].bytes, garbage[i].n);
        ck_assert_int_eq(run_parse(&s, ex, 1, false, out, &st), TFS_INVALID_ARGUMENT);
        ASSERT_MSG_HAS(st, garbage[i].msg);
    }
}
END_TEST

START_TEST(test_varlen_dense_padded)
{
    const float v0[3] = {1.0f, 2.0f, 3.0f}, v1[1] = {4.0f};
    wbuf f[3], ex[3], a = {0}, b = {0};
    memset(f, 0, sizeof f);
    feat_floats(&a, v0, 3, true);
    feat_floats(&b, v1, 1, false);
    add_entry(&f[0], "x", &a);
    add_entry(&f[1], "x", &b);
    for (int i = 0; i < 3; i++)
        ex[i] = example_of(&f[i]);
    const float pad = -9.0f;
    tfs_tensor *dflt = floats(0, NULL, &pad);
    spec s = one_float("x", -1, dflt);
    tfs_tensor *out[1];
    tfs_status st;
    ck_assert_msg(run_parse(&s, ex, 3, false, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t dims[2] = {3, 3};
    const float want[9] = {1, 2, 3, 4, pad, pad, pad, pad, pad};
    tfs_test_assert_f32(out[0], 2, dims, want, 0.0);
    unref_all(out, 1);
    tfs_tensor_unref(dflt);
}
END_TEST

/* ---- sparse features --------------------------------------------------------------------------- */

static spec sparse_spec(bool v2)
{
    spec s;
    memset(&s, 0, sizeof s);
    s.v2 = v2;
    s.ns = 2;
    s.skeys[0] = "tags";
    s.stypes[0] = TFS_DTYPE_STRING;
    s.skeys[1] = "w";
    s.stypes[1] = TFS_DTYPE_FLOAT;
    s.nd = 1;
    s.dkeys[0] = "x";
    s.dtypes[0] = TFS_DTYPE_FLOAT;
    s.dshapes[0] = (tfs_shape){1, {1}};
    return s;
}

static void sparse_examples(wbuf ex[3])
{
    const char *t0[2] = {"a", "bb"}, *t2[1] = {"c"};
    const float w1[3] = {0.5f, 1.5f, 2.5f};
    wbuf f[3], a = {0}, b = {0}, c = {0};
    memset(f, 0, sizeof f);
    feat_bytes(&a, t0, 2);
    feat_bytes(&b, t2, 1);
    feat_floats(&c, w1, 3, false);
    add_entry(&f[0], "tags", &a);
    add_entry(&f[1], "w", &c);
    add_entry(&f[2], "tags", &b);
    for (int i = 0; i < 3; i++) {
        add_float(&f[i], "x", (float)i);
        ex[i] = example_of(&f[i]);
    }
}

static void check_sparse_batch(tfs_tensor **out)
{
    /* tags: example 0 has 2, example 2 has 1 */
    const int64_t idims[2] = {3, 2}, ix[6] = {0, 0, 0, 1, 2, 0}, two = 2, sh[2] = {3, 2};
    assert_i64(out[0], 2, idims, ix);
    assert_str(out[2], 0, "a");
    assert_str(out[2], 1, "bb");
    assert_str(out[2], 2, "c");
    assert_i64(out[4], 1, &two, sh);
    /* w: example 1 has 3 */
    const int64_t wdims[2] = {3, 2}, wix[6] = {1, 0, 1, 1, 1, 2}, wsh[2] = {3, 3}, three = 3;
    assert_i64(out[1], 2, wdims, wix);
    const float wv[3] = {0.5f, 1.5f, 2.5f};
    tfs_test_assert_f32(out[3], 1, &three, wv, 0.0);
    assert_i64(out[5], 1, &two, wsh);
    const int64_t xd[2] = {3, 1};
    const float xv[3] = {0.0f, 1.0f, 2.0f};
    tfs_test_assert_f32(out[6], 2, xd, xv, 0.0);
}

START_TEST(test_sparse_v1_and_v2)
{
    wbuf ex[3];
    sparse_examples(ex);
    for (int v2 = 0; v2 < 2; v2++) {
        spec s = sparse_spec(v2);
        tfs_tensor *out[7];
        tfs_status st;
        ck_assert_msg(run_parse(&s, ex, 3, false, out, &st) == TFS_OK, "v2=%d: %s", v2, st.msg);
        check_sparse_batch(out);
        unref_all(out, 7);
    }
}
END_TEST

START_TEST(test_sparse_wrong_kind)
{
    wbuf f = {0}, a = {0}, ex[1];
    const int64_t v = 1;
    feat_int64s(&a, &v, 1, false);
    add_entry(&f, "w", &a);
    add_float(&f, "x", 1.0f);
    ex[0] = example_of(&f);
    spec s = sparse_spec(true);
    tfs_tensor *out[7];
    tfs_status st;
    ck_assert_int_eq(run_parse(&s, ex, 1, false, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "Key: w, Index: 0.  Data types don't match. Expected type: float, Actual "
                       "type: int64");
}
END_TEST

/* A scalar `serialized` gives outputs without the batch dimension, as TensorFlow's. */
START_TEST(test_v2_scalar_input)
{
    wbuf ex[3];
    sparse_examples(ex);
    spec s = sparse_spec(true);
    tfs_tensor *out[7];
    tfs_status st;
    ck_assert_msg(run_parse(&s, &ex[0], 1, true, out, &st) == TFS_OK, "%s", st.msg);
    const int64_t idims[2] = {2, 1}, ix[2] = {0, 1}, one = 1, n2 = 2;
    assert_i64(out[0], 2, idims, ix);        /* tags indices: positions only */
    assert_i64(out[4], 1, &one, &n2);        /* tags dense shape: [2] */
    const int64_t zero_rows[2] = {0, 1}, zero = 0;
    assert_i64(out[1], 2, zero_rows, NULL);  /* w is absent: no values */
    assert_i64(out[5], 1, &one, &zero);
    const float x0 = 0.0f;
    tfs_test_assert_f32(out[6], 1, &one, &x0, 0.0);   /* x: shape [1], not [1,1] */
    unref_all(out, 7);

    /* the single-example messages have no name or index */
    wbuf f = {0}, e[1];
    e[0] = example_of(&f);
    ck_assert_int_eq(run_parse(&s, e, 1, true, out, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "Feature: x (data type: float) is required but could not be found.");
    ck_assert_ptr_null(strstr(st.msg, "Name:"));
}
END_TEST

START_TEST(test_v2_ragged_unimplemented)
{
    wbuf ex[3];
    sparse_examples(ex);
    spec s = sparse_spec(true);
    s.nragged = 1;
    tfs_graph *g = build(&s, 3);
    int pe = tfs_graph_find_node(g, "pe");
    /* the node still has TensorFlow's outputs: 3*2 sparse + 1 dense + 2*1 ragged */
    ck_assert_int_eq(tfs__nout_parse_example_v2(tfs__graph_node(g, pe)), 9);
    tfs_session *sess;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(g, NULL, &sess, &st), TFS_OK);
    const char *data[1] = {(const char *)ex[0].b};
    size_t len = ex[0].n;
    tfs_tensor *ser = strings_tensor(1, 1, data, &len), *out = NULL;
    tfs_feed feed = {"ser:0", ser};
    const char *fetch = "pe:6";
    ck_assert_int_eq(tfs_session_run(sess, &feed, 1, &fetch, 1, NULL, 0, &out, &st),
                     TFS_UNIMPLEMENTED);
    ASSERT_MSG_HAS(st, "ragged");
    tfs_tensor_unref(ser);
    tfs_session_free(sess);
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_output_counts)
{
    spec s = sparse_spec(false);
    tfs_graph *g = build(&s, 1);
    ck_assert_int_eq(tfs__nout_parse_example(tfs__graph_node(g, tfs_graph_find_node(g, "pe"))), 7);
    tfs_graph_unref(g);
}
END_TEST

/* Variable-length string features are padded with the default; and when memory runs out at any
 * allocation of the run, the run fails with RESOURCE_EXHAUSTED and leaks nothing (ASan checks). */
START_TEST(test_varlen_strings_and_out_of_memory)
{
    wbuf ex[3];
    sparse_examples(ex);
    spec s = sparse_spec(true);
    s.skeys[0] = "t2";   /* absent everywhere: empty sparse outputs */
    s.nd = 2;
    s.dkeys[1] = "tags";
    s.dtypes[1] = TFS_DTYPE_STRING;
    s.dshapes[1] = (tfs_shape){1, {-1}};
    const char *pad = "-";
    s.ddefaults[1] = strings_tensor(0, 1, &pad, NULL);
    tfs_graph *g = build(&s, 3);
    tfs_session *sess;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(g, NULL, &sess, &st), TFS_OK);
    const char *data[3];
    size_t lens[3];
    for (int i = 0; i < 3; i++) {
        data[i] = (const char *)ex[i].b;
        lens[i] = ex[i].n;
    }
    tfs_tensor *ser = strings_tensor(1, 3, data, lens), *out[8];
    const char *fetch[8] = {"pe:0", "pe:1", "pe:2", "pe:3", "pe:4", "pe:5", "pe:6", "pe:7"};
    tfs_feed feed = {"ser:0", ser};
    int failures = 0;
    for (int n = 1; n < 10000; n++) {
        tfs_alloc_fail_after(n);
        enum tfs_code code = tfs_session_run(sess, &feed, 1, fetch, 8, NULL, 0, out, &st);
        tfs_alloc_fail_after(0);
        if (code == TFS_OK)
            break;
        ck_assert_msg(code == TFS_RESOURCE_EXHAUSTED, "allocation %d: %s", n, st.msg);
        failures++;
    }
    ck_assert_int_gt(failures, 0);
    const int64_t empty_ix[2] = {0, 2}, two = 2, zero = 0, sh[2] = {3, 0};
    assert_i64(out[0], 2, empty_ix, NULL);
    ck_assert_int_eq(out[2]->nelem, 0);
    ck_assert_int_eq(out[2]->dims[0], zero);
    assert_i64(out[4], 1, &two, sh);
    const int64_t dims[2] = {3, 2};
    ck_assert(tfs_shape_equal(out[7]->rank, out[7]->dims, 2, dims));
    static const char *const want[6] = {"a", "bb", "-", "-", "c", "-"};
    for (int i = 0; i < 6; i++)
        assert_str(out[7], i, want[i]);
    unref_all(out, 8);
    tfs_tensor_unref(ser);
    tfs_tensor_unref(s.ddefaults[1]);
    tfs_session_free(sess);
    tfs_graph_unref(g);
}
END_TEST

/* ---- the decoder on its own -------------------------------------------------------------------- */

START_TEST(test_example_check)
{
    wbuf f = {0}, a = {0}, ex;
    const int64_t ids[3] = {1, 2, 3};
    feat_int64s(&a, ids, 3, false);
    add_entry(&f, "ids", &a);
    add_float(&f, "x", 1.0f);
    add_float(&f, "x", 2.0f);   /* replaces the first x */
    ex = example_of(&f);
    int64_t nf = -1, nv = -1;
    tfs_status st;
    ck_assert_int_eq(tfs__example_check(ex.b, ex.n, &nf, &nv, &st), TFS_OK);
    ck_assert_int_eq(nf, 2);
    ck_assert_int_eq(nv, 4);
    /* a Feature whose float_list appears twice merges the lists; an int64_list after them
     * replaces them */
    wbuf feat = {0}, g = {0};
    const float two[2] = {1.0f, 2.0f};
    feat_floats(&feat, two, 2, true);
    feat_floats(&feat, two, 1, false);
    add_entry(&g, "m", &feat);
    ex = example_of(&g);
    ck_assert_int_eq(tfs__example_check(ex.b, ex.n, &nf, &nv, &st), TFS_OK);
    ck_assert_int_eq(nv, 3);
    feat_int64s(&feat, ids, 1, true);
    g.n = 0;
    add_entry(&g, "m", &feat);
    ex = example_of(&g);
    ck_assert_int_eq(tfs__example_check(ex.b, ex.n, &nf, &nv, &st), TFS_OK);
    ck_assert_int_eq(nv, 1);
    /* the empty string is an empty Example */
    ck_assert_int_eq(tfs__example_check("", 0, &nf, &nv, &st), TFS_OK);
    ck_assert_int_eq(nf, 0);
    ck_assert_int_eq(tfs__example_check("\x0a\x05\x0a", 3, &nf, &nv, &st), TFS_INVALID_ARGUMENT);
}
END_TEST

Suite *suite_runtime_parsing(void)
{
    Suite *s = suite_create("parsing");
    TCase *tc = tcase_create("parse_example");
    tcase_add_test(tc, test_dense_float_batch);
    tcase_add_test(tc, test_dense_default);
    tcase_add_test(tc, test_dense_required_missing);
    tcase_add_test(tc, test_dense_int64_and_bytes);
    tcase_add_test(tc, test_dense_packed_and_unpacked);
    tcase_add_test(tc, test_merged_examples_later_wins);
    tcase_add_test(tc, test_unknown_fields_skipped);
    tcase_add_test(tc, test_wrong_kind_and_count);
    tcase_add_test(tc, test_truncated_and_garbage);
    tcase_add_test(tc, test_varlen_dense_padded);
    tcase_add_test(tc, test_sparse_v1_and_v2);
    tcase_add_test(tc, test_sparse_wrong_kind);
    tcase_add_test(tc, test_v2_scalar_input);
    tcase_add_test(tc, test_v2_ragged_unimplemented);
    tcase_add_test(tc, test_varlen_strings_and_out_of_memory);
    tcase_add_test(tc, test_output_counts);
    tcase_add_test(tc, test_example_check);
    suite_add_tcase(s, tc);
    return s;
}
