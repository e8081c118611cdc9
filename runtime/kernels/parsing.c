/* tf.Example parsing: the ParseExample and ParseExampleV2 kernels, and the hand-written decoder of
 * the tf.Example wire format they share (runtime/ links no protobuf library).
 *
 *   Example  { 1: Features }            Features { 1: repeated entry { 1: key, 2: Feature } }
 *   Feature  oneof { 1: BytesList, 2: FloatList, 3: Int64List }, each { 1: repeated value }
 *
 * The decoder follows protobuf's parsing rules, because clients build these bytes with protobuf:
 * unknown fields are skipped by wire type, repeated numbers are accepted packed or not, a key that
 * appears twice keeps its last value (map semantics), concatenated Examples merge, and a Feature
 * whose list field appears twice merges the lists (a different list kind replaces them). Groups
 * (wire types 3 and 4) are refused: nothing writes them into an Example. Every length is checked
 * against the bytes that remain, so hostile input ends in INVALID_ARGUMENT, never out of bounds.
 *
 * Nothing is copied while decoding: an Example is split into (key, entry) views of the input, and
 * a requested feature is walked twice, once to learn its kind and value count (which validates
 * it), once to write the values into place. As in TensorFlow's fast parser, features nobody asked
 * for are delimited but their values are not decoded, and error messages are TensorFlow's, word
 * for word, because clients match on them. Ragged features are UNIMPLEMENTED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/buf.h"
#include "runtime/runtime-impl.h"

/* ---- wire reader ---------------------------------------------------------------------------- */

typedef struct view {
    const uint8_t *p;
    size_t         n;
} view;

typedef struct rd {
    const uint8_t *p;
    const uint8_t *end;
} rd;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static rd rd_of(view v)
{
    rd r = {v.p, v.n ? v.p + v.n : v.p};   /* an empty view may have no pointer at all */
    return r;
}

/* At most 10 bytes, as protobuf; bits past 64 are dropped, as protobuf does. */
static bool rd_varint(rd *r, uint64_t *out)
{
    return tfs_varint_get(&r->p, r->end, TFS_VARINT_MAX_BYTES, out);
}

static bool rd_tag(rd *r, uint32_t *field, int *wt)
{
    uint64_t t;
    if (!rd_varint(r, &t) || t > UINT32_MAX || (t >> 3) == 0)
        return false;
    *field = (uint32_t)(t >> 3);
    *wt = (int)(t & 7);
    return true;
}

static bool rd_len(rd *r, view *out)
{
    uint64_t n;
    if (!rd_varint(r, &n) || n > (uint64_t)(r->end - r->p))
        return false;
    out->p = r->p;
    out->n = (size_t)n;
    r->p += n;
    return true;
}

static bool rd_fixed(rd *r, size_t n, const uint8_t **at)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    *at = r->p;
    r->p += n;
    return true;
}

static bool rd_skip(rd *r, int wt)
{
    uint64_t v;
    view b;
    const uint8_t *at;
    switch (wt) {
    case WT_VARINT: return rd_varint(r, &v);
    case WT_I64:    return rd_fixed(r, 8, &at);
    case WT_LEN:    return rd_len(r, &b);
    case WT_I32:    return rd_fixed(r, 4, &at);
    default:        return false;   /* groups, and the unused wire types 6 and 7 */
    }
}

static float load_f32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- Example and Feature ------------------------------------------------------------------- */

typedef struct entry {
    view    key;
    view    body;   /* the whole map entry: its key and value fields in wire order */
    int64_t seq;    /* position in the Example */
} entry;

typedef struct entries {
    entry  *v;
    int64_t n, cap;
} entries;

enum split_result { SPLIT_OK, SPLIT_BAD, SPLIT_NOMEM };

static enum split_result entries_push(entries *es, view key, view body)
{
    if (es->n == es->cap) {
        int64_t cap = es->cap ? 2 * es->cap : 16;
        entry *v = tfs_realloc(es->v, (size_t)cap * sizeof *v);
        if (!v)
            return SPLIT_NOMEM;
        es->v = v;
        es->cap = cap;
    }
    es->v[es->n].key = key;
    es->v[es->n].body = body;
    es->v[es->n].seq = es->n;
    es->n++;
    return SPLIT_OK;
}

/* Splits an Example into its map entries, in wire order (so the last one of a key wins). */
static enum split_result example_split(view ex, entries *es)
{
    es->n = 0;
    rd r = rd_of(ex);
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        view feats;
        if (!rd_tag(&r, &field, &wt))
            return SPLIT_BAD;
        if (field != 1 || wt != WT_LEN) {
            if (!rd_skip(&r, wt))
                return SPLIT_BAD;
            continue;
        }
        if (!rd_len(&r, &feats))
            return SPLIT_BAD;
        rd f = rd_of(feats);
        while (f.p < f.end) {
            view body;
            if (!rd_tag(&f, &field, &wt))
                return SPLIT_BAD;
            if (field != 1 || wt != WT_LEN) {
                if (!rd_skip(&f, wt))
                    return SPLIT_BAD;
                continue;
            }
            if (!rd_len(&f, &body))
                return SPLIT_BAD;
            /* The key is the last field 1; a missing key is "" as protobuf reads it. */
            view key = {body.p, 0};
            rd e = rd_of(body);
            while (e.p < e.end) {
                view v;
                if (!rd_tag(&e, &field, &wt))
                    return SPLIT_BAD;
                if ((field == 1 || field == 2) && wt == WT_LEN) {
                    if (!rd_len(&e, &v))
                        return SPLIT_BAD;
                    if (field == 1)
                        key = v;
                } else if (!rd_skip(&e, wt)) {
                    return SPLIT_BAD;
                }
            }
            enum split_result res = entries_push(es, key, body);
            if (res != SPLIT_OK)
                return res;
        }
    }
    return SPLIT_OK;
}

static size_t kind_size(enum tfs_dtype kind)
{
    return kind == TFS_DTYPE_FLOAT ? sizeof(float)
         : kind == TFS_DTYPE_INT64 ? sizeof(int64_t) : sizeof(view);
}

/* Counts (dst NULL) or writes (float, int64_t or view elements) the values of one list message.
 * Returns the count, or -1 when the list is malformed. */
static int64_t list_read(enum tfs_dtype kind, view list, void *dst)
{
    rd r = rd_of(list);
    int64_t n = 0;
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        view b;
        uint64_t u;
        const uint8_t *at;
        if (!rd_tag(&r, &field, &wt))
            return -1;
        if (field == 1 && kind == TFS_DTYPE_STRING && wt == WT_LEN) {
            if (!rd_len(&r, &b))
                return -1;
            if (dst)
                ((view *)dst)[n] = b;
            n++;
        } else if (field == 1 && kind == TFS_DTYPE_FLOAT && wt == WT_I32) {
            if (!rd_fixed(&r, 4, &at))
                return -1;
            if (dst)
                ((float *)dst)[n] = load_f32(at);
            n++;
        } else if (field == 1 && kind == TFS_DTYPE_FLOAT && wt == WT_LEN) {
            if (!rd_len(&r, &b) || b.n % 4 != 0)
                return -1;
            for (size_t i = 0; dst && i < b.n; i += 4)
                ((float *)dst)[n + (int64_t)(i / 4)] = load_f32(b.p + i);
            n += (int64_t)(b.n / 4);
        } else if (field == 1 && kind == TFS_DTYPE_INT64 && wt == WT_VARINT) {
            if (!rd_varint(&r, &u))
                return -1;
            if (dst)
                ((int64_t *)dst)[n] = (int64_t)u;
            n++;
        } else if (field == 1 && kind == TFS_DTYPE_INT64 && wt == WT_LEN) {
            if (!rd_len(&r, &b))
                return -1;
            rd q = rd_of(b);
            while (q.p < q.end) {
                if (!rd_varint(&q, &u))
                    return -1;
                if (dst)
                    ((int64_t *)dst)[n] = (int64_t)u;
                n++;
            }
        } else if (!rd_skip(&r, wt)) {   /* unknown field, or field 1 of another wire type */
            return -1;
        }
    }
    return n;
}

/* What a map entry's Feature holds once protobuf's merge rules are applied. */
typedef struct feature {
    enum tfs_dtype kind;   /* FLOAT, INT64, STRING; INVALID when no list is set */
    int64_t        n;      /* values */
    const uint8_t *run;    /* the lists of `kind` that start here or later hold the values */
} feature;

static enum tfs_dtype list_kind(uint32_t field)
{
    switch (field) {
    case 1:  return TFS_DTYPE_STRING;
    case 2:  return TFS_DTYPE_FLOAT;
    case 3:  return TFS_DTYPE_INT64;
    default: return TFS_DTYPE_INVALID;
    }
}

/* With dst NULL, fills *f (validating every list on the way); otherwise writes f's values to dst.
 * Every value field 2 of the entry is a piece of one merged Feature. A list of the kind already
 * set merges (appends); another kind replaces, so the values are the last run of one kind. */
static bool feature_walk(view body, feature *f, void *dst)
{
    int64_t at = 0;
    if (!dst) {
        f->kind = TFS_DTYPE_INVALID;
        f->n = 0;
        f->run = NULL;
    }
    rd r = rd_of(body);
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        view fv;
        if (!rd_tag(&r, &field, &wt))
            return false;
        if (field != 2 || wt != WT_LEN) {
            if (!rd_skip(&r, wt))
                return false;
            continue;
        }
        if (!rd_len(&r, &fv))
            return false;
        rd q = rd_of(fv);
        while (q.p < q.end) {
            view lv;
            if (!rd_tag(&q, &field, &wt))
                return false;
            enum tfs_dtype kind = list_kind(field);
            if (kind == TFS_DTYPE_INVALID || wt != WT_LEN) {
                if (!rd_skip(&q, wt))
                    return false;
                continue;
            }
            if (!rd_len(&q, &lv))
                return false;
            if (dst) {
                if (kind == f->kind && lv.p >= f->run)
                    at += list_read(kind, lv, (char *)dst + (size_t)at * kind_size(kind));
                continue;
            }
            int64_t c = list_read(kind, lv, NULL);
            if (c < 0)
                return false;
            if (kind != f->kind) {
                f->kind = kind;
                f->n = 0;
                f->run = lv.p;
            }
            f->n += c;
        }
    }
    return true;
}

static int key_cmp(view a, view b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int c = n ? memcmp(a.p, b.p, n) : 0;
    if (c)
        return c;
    return a.n < b.n ? -1 : a.n > b.n;
}

/* Orders entries by key, then by position, so that the last of a run of equal keys wins. */
static int entry_cmp(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = key_cmp(x->key, y->key);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

enum tfs_code tfs__example_check(const void *data, size_t len, int64_t *n_features,
                                 int64_t *n_values, tfs_status *st)
{
    entries es = {0};
    enum tfs_code code = TFS_OK;
    int64_t nf = 0, nv = 0;
    view ex = {data, len};
    enum split_result res = example_split(ex, &es);
    if (res != SPLIT_OK) {
        code = res == SPLIT_NOMEM
                   ? TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding an Example")
                   : TFS_ERR(st, TFS_INVALID_ARGUMENT, "Could not parse example input");
        goto fail;
    }
    if (es.n > 1)
        qsort(es.v, (size_t)es.n, sizeof *es.v, entry_cmp);
    for (int64_t i = 0; i < es.n; i++) {
        feature f;
        if (!feature_walk(es.v[i].body, &f, NULL)) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Key: %.*s.  Can't parse serialized Example.",
                           (int)es.v[i].key.n, (const char *)es.v[i].key.p);
            goto fail;
        }
        if (i + 1 < es.n && key_cmp(es.v[i].key, es.v[i + 1].key) == 0)
            continue;   /* a later entry of this key replaces it */
        nf++;
        nv += f.n;
    }
fail:
    tfs_free(es.v);
    if (code == TFS_OK) {
        if (n_features)
            *n_features = nf;
        if (n_values)
            *n_values = nv;
        tfs_status_clear(st);
    }
    return code;
}

/* ---- the kernels ----------------------------------------------------------------------------- */

/* More requested features than this is a broken graph; it also keeps 3*Nsparse from overflowing. */
#define PE_MAX_KEYS (1 << 20)

typedef struct pe_feat {
    view              key;       /* borrowed from the key tensor */
    enum tfs_dtype    dtype;
    bool              dense;
    bool              varlen;    /* dense with dense_shape [-1, ...] */
    int64_t           stride;    /* dense: values per row (varlen: per step of dim 0) */
    const tfs_shape  *shape;     /* dense: from dense_shapes */
    tfs_tensor       *dflt;      /* dense: borrowed input */
    int               out;       /* output slot (sparse: of its indices) */
    int64_t           hit;       /* its entry in the current example, or -1 */
    /* sparse and varlen dense: the values of all examples so far, and where each example ends */
    int64_t          *ends;
    char             *vals;
    int64_t           nvals, cap;
} pe_feat;

typedef struct pe {
    tfs_kernel_ctx   *k;
    int               ns, nd, nr, nf;   /* sparse, dense, ragged; nf = ns + nd */
    pe_feat          *f;                /* sparse ones, then dense ones */
    pe_feat         **order;            /* f sorted by key, for lookup */
    int64_t           B;
    bool              single;           /* scalar serialized: outputs have no batch dim */
    const tfs_string *ser;
    const tfs_string *names;            /* NULL when names is empty */
    entries           es;
    view             *scratch;          /* string values of a fixed-length dense feature */
    int64_t           scratch_cap;
} pe;

static const char *type_word(enum tfs_dtype dt)   /* as TensorFlow names them in count errors */
{
    return dt == TFS_DTYPE_STRING ? "bytes" : tfs_dtype_short_name(dt);
}

/* TensorFlow's PartialTensorShape::DebugString: "[?,2]". */
static const char *shape_text(const tfs_shape *s, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    if (s->rank < 0) {
        snprintf(buf, n, "<unknown>");
        return buf;
    }
    at += (size_t)snprintf(buf + at, n - at, "[");
    for (int i = 0; i < s->rank && at < n; i++) {
        if (s->dims[i] < 0)
            at += (size_t)snprintf(buf + at, n - at, "%s?", i ? "," : "");
        else
            at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    }
    if (at < n)
        snprintf(buf + at, n - at, "]");
    return buf;
}

static int feat_cmp(const void *a, const void *b)
{
    return key_cmp((*(pe_feat *const *)a)->key, (*(pe_feat *const *)b)->key);
}

static pe_feat *pe_lookup(const pe *p, view key)
{
    int lo = 0, hi = p->nf;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = key_cmp(p->order[mid]->key, key);
        if (c == 0)
            return p->order[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static enum tfs_code check_type(const tfs_node *n, const char *attr, enum tfs_dtype dt,
                                tfs_status *st)
{
    if (dt == TFS_DTYPE_FLOAT || dt == TFS_DTYPE_INT64 || dt == TFS_DTYPE_STRING)
        return TFS_OK;
    return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr '%s': Received input dtype: %s", attr,
                         tfs_dtype_short_name(dt));
}

/* Reads the attrs: how many features of each kind, their dtypes and dense shapes. */
static enum tfs_code pe_attrs(pe *p, bool v2, tfs_status *st)
{
    const tfs_node *n = p->k->node;
    const tfs_attr_list *stypes, *dtypes, *shapes, *rtypes = NULL, *rsplits = NULL;
    int64_t ns, nd = 0;
    char sh[128];
    if (tfs__attr_int(n, v2 ? "num_sparse" : "Nsparse", &ns, st) != TFS_OK ||
        (!v2 && tfs__attr_int(n, "Ndense", &nd, st) != TFS_OK) ||
        tfs__attr_list(n, "sparse_types", TFS_ATTR_TYPE, &stypes, st) != TFS_OK ||
        tfs__attr_list(n, "Tdense", TFS_ATTR_TYPE, &dtypes, st) != TFS_OK ||
        tfs__attr_list(n, "dense_shapes", TFS_ATTR_SHAPE, &shapes, st) != TFS_OK)
        return st->code;
    if (v2) {
        if (tfs__attr_list(n, "ragged_value_types", TFS_ATTR_TYPE, &rtypes, st) != TFS_OK ||
            tfs__attr_list(n, "ragged_split_types", TFS_ATTR_TYPE, &rsplits, st) != TFS_OK)
            return st->code;
        nd = dtypes->n;
        if (rtypes->n != rsplits->n)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "len(ragged_keys) != len(ragged_split_types)");
        p->nr = rtypes->n;
    }
    if (ns < 0 || ns > PE_MAX_KEYS || nd < 0 || nd > PE_MAX_KEYS)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "bad feature counts: %lld sparse, %lld dense",
                             (long long)ns, (long long)nd);
    if (stypes->n != ns)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "len(sparse_keys) != len(sparse_types)");
    if (dtypes->n != nd)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "len(dense_keys) != len(dense_types)");
    if (shapes->n != nd)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "len(dense_keys) != len(dense_shapes)");
    p->ns = (int)ns;
    p->nd = (int)nd;
    p->nf = p->ns + p->nd;
    int nout = 3 * p->ns + p->nd + 2 * p->nr;
    if (p->k->n_out != nout)
        return tfs__node_err(n, st, TFS_INTERNAL, "expected %d outputs, the node has %d", nout,
                             p->k->n_out);
    p->f = tfs_calloc((size_t)(p->nf ? p->nf : 1), sizeof *p->f);
    p->order = tfs_calloc((size_t)(p->nf ? p->nf : 1), sizeof *p->order);
    if (!p->f || !p->order)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    for (int i = 0; i < p->nf; i++) {
        pe_feat *f = &p->f[i];
        f->dense = i >= p->ns;
        f->dtype = f->dense ? dtypes->type[i - p->ns] : stypes->type[i];
        f->out = f->dense ? 3 * p->ns + (i - p->ns) : i;
        p->order[i] = f;
        if (check_type(n, f->dense ? "Tdense" : "sparse_types", f->dtype, st) != TFS_OK)
            return st->code;
        if (!f->dense)
            continue;
        const tfs_shape *s = &shapes->shape[i - p->ns];
        bool ok = s->rank >= 0 && s->rank < TFS_MAX_RANK;
        for (int d = 1; ok && d < s->rank; d++)
            ok = s->dims[d] >= 0;
        if (!ok)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "dense_shapes[%d] has unknown rank or unknown inner dimensions: %s",
                                 i - p->ns, shape_text(s, sh, sizeof sh));
        f->shape = s;
        f->varlen = s->rank > 0 && s->dims[0] < 0;
        f->stride = f->varlen ? tfs_shape_nelem(s->rank - 1, s->dims + 1)
                              : tfs_shape_nelem(s->rank, s->dims);
        if (f->stride < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "dense_shapes[%d] %s is too large",
                                 i - p->ns, shape_text(s, sh, sizeof sh));
    }
    for (int i = 0; p->nr && rtypes && i < p->nr; i++) {
        if (check_type(n, "ragged_value_types", rtypes->type[i], st) != TFS_OK)
            return st->code;
        if (rsplits->type[i] != TFS_DTYPE_INT32 && rsplits->type[i] != TFS_DTYPE_INT64)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Invalid ragged_split_type: %s",
                                 tfs_dtype_short_name(rsplits->type[i]));
    }
    return TFS_OK;
}

static enum tfs_code string_input(const pe *p, int i, const char *what, tfs_status *st)
{
    const tfs_tensor *t = p->k->in[i];
    if (t->dtype != TFS_DTYPE_STRING)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s must be a string tensor, got %s", what,
                       tfs_dtype_name(t->dtype));
    return TFS_OK;
}

/* Checks the inputs against the attrs; keys become views of the key tensors. */
static enum tfs_code pe_inputs(pe *p, bool v2, tfs_status *st)
{
    tfs_kernel_ctx *k = p->k;
    char a[128], b[128], c[128];
    int want = v2 ? 5 + p->nd : 2 + p->ns + 2 * p->nd;
    if (k->n_in != want)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expected %d inputs, got %d", want,
                             k->n_in);
    for (int i = 0; i < (v2 ? 5 : 2 + p->nf); i++)
        if (string_input(p, i, i == 0 ? "serialized" : i == 1 ? "names" : "a key input", st))
            return st->code;
    const tfs_tensor *ser = k->in[0], *names = k->in[1];
    /* TensorFlow's ParseExample (v1) wants a vector; taking a scalar as v2 does harms no graph. */
    if (ser->rank > 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Expected serialized to be a scalar or vector, got shape: %s",
                       tfs_shape_str(ser->rank, ser->dims, a, sizeof a));
    if (names->nelem > 0 && !tfs_shape_equal(names->rank, names->dims, ser->rank, ser->dims))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Expected names have the same shape as serialized: name.shape=%s, "
                       "serialized.shape=%s", tfs_shape_str(names->rank, names->dims, a, sizeof a),
                       tfs_shape_str(ser->rank, ser->dims, b, sizeof b));
    p->single = ser->rank == 0;
    p->B = ser->nelem;
    p->ser = tfs_tensor_strings(k->in[0]);
    p->names = names->nelem > 0 ? tfs_tensor_strings(k->in[1]) : NULL;

    if (v2) {
        const int64_t want_n[3] = {p->ns, p->nd, p->nr};
        static const char *const what[3] = {"len(sparse_keys) == num_sparse",
                                            "len(dense_keys) == len(dense_types)",
                                            "len(ragged_keys) == len(ragged_value_types)"};
        for (int i = 0; i < 3; i++)
            if (k->in[2 + i]->nelem != want_n[i])
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expected %s but got: %lld vs. %lld",
                               what[i], (long long)k->in[2 + i]->nelem, (long long)want_n[i]);
    }
    for (int i = 0; i < p->nf; i++) {
        const tfs_string *s;
        if (v2) {
            s = &tfs_tensor_strings(k->in[p->f[i].dense ? 3 : 2])[p->f[i].dense ? i - p->ns : i];
        } else {
            if (k->in[2 + i]->nelem != 1)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s_keys[%d] must be a scalar, got shape %s",
                               p->f[i].dense ? "dense" : "sparse", p->f[i].dense ? i - p->ns : i,
                               tfs_shape_str(k->in[2 + i]->rank, k->in[2 + i]->dims, a, sizeof a));
            s = tfs_tensor_strings(k->in[2 + i]);
        }
        p->f[i].key.p = (const uint8_t *)s->data;
        p->f[i].key.n = s->len;
    }
    if (p->nf > 1)
        qsort(p->order, (size_t)p->nf, sizeof *p->order, feat_cmp);
    for (int i = 0; i + 1 < p->nf; i++)
        if (key_cmp(p->order[i]->key, p->order[i + 1]->key) == 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feature key '%.*s' is requested twice",
                           (int)p->order[i]->key.n, (const char *)p->order[i]->key.p);

    int d0 = v2 ? 5 : 2 + p->nf;
    for (int d = 0; d < p->nd; d++) {
        pe_feat *f = &p->f[p->ns + d];
        tfs_tensor *dv = k->in[d0 + d];
        f->dflt = dv;
        if (f->varlen && dv->nelem != 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "dense_shape[%d] is a variable length shape: %s, therefore def_value[%d] "
                           "must contain a single element (the padding element).  But its shape "
                           "is: %s", d, shape_text(f->shape, a, sizeof a), d,
                           tfs_shape_str(dv->rank, dv->dims, b, sizeof b));
        if (!f->varlen && dv->nelem > 0 &&
            !tfs_shape_equal(dv->rank, dv->dims, f->shape->rank, f->shape->dims))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "def_value[%d].shape() == %s is not compatible with dense_shapes_[%d] == %s",
                           d, tfs_shape_str(dv->rank, dv->dims, a, sizeof a), d,
                           shape_text(f->shape, c, sizeof c));
        if (dv->dtype != f->dtype)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "dense_defaults[%d].dtype() == %s != dense_types_[%d] == %s", d,
                           tfs_dtype_short_name(dv->dtype), d, tfs_dtype_short_name(f->dtype));
    }
    if (p->nr > 0)
        return TFS_ERR(st, TFS_UNIMPLEMENTED,
                       "ParseExampleV2: ragged features are not supported by tfserve (%d requested)",
                       p->nr);
    return TFS_OK;
}

/* Copies n values into t at element `at`: strings are copied into the tensor. */
static enum tfs_code put_values(tfs_tensor *t, int64_t at, const void *src, int64_t n,
                                tfs_status *st)
{
    if (t->dtype != TFS_DTYPE_STRING) {
        if (n > 0)
            memcpy((char *)t->data + (size_t)at * tfs_dtype_size(t->dtype), src,
                   (size_t)n * tfs_dtype_size(t->dtype));
        return TFS_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        const view *v = (const view *)src + i;
        if (tfs_tensor_set_string(t, at + i, v->p, v->n, st) != TFS_OK)
            return st->code;
    }
    return TFS_OK;
}

/* Copies all of src's elements into t at element `at`. */
static enum tfs_code put_tensor(tfs_tensor *t, int64_t at, tfs_tensor *src, tfs_status *st)
{
    if (t->dtype != TFS_DTYPE_STRING)
        return put_values(t, at, src->data, src->nelem, st);
    const tfs_string *s = tfs_tensor_strings(src);
    for (int64_t i = 0; i < src->nelem; i++)
        if (tfs_tensor_set_string(t, at + i, s[i].data, s[i].len, st) != TFS_OK)
            return st->code;
    return TFS_OK;
}

/* Writes element 0 of `value` to elements [at, at+n) of t. */
static enum tfs_code put_fill(tfs_tensor *t, int64_t at, int64_t n, tfs_tensor *value,
                              tfs_status *st)
{
    size_t es = tfs_dtype_size(t->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == TFS_DTYPE_STRING) {
            const tfs_string *s = tfs_tensor_strings(value);
            if (tfs_tensor_set_string(t, at + i, s->data, s->len, st) != TFS_OK)
                return st->code;
        } else {
            memcpy((char *)t->data + (size_t)(at + i) * es, value->data, es);
        }
    }
    return TFS_OK;
}

static const char *example_name(const pe *p, int64_t b, int *len)
{
    if (!p->names) {
        *len = 9;
        return "<unknown>";
    }
    *len = (int)p->names[b].len;
    return p->names[b].data ? p->names[b].data : "";
}

/* "Name: N, Key: K, Index: I.  <what>" for a batch; "Key: K.  <what>" for a single example, as
 * TensorFlow words them. */
static enum tfs_code feat_err(const pe *p, const pe_feat *f, int64_t b, tfs_status *st,
                              const char *what)
{
    int nl;
    const char *name = example_name(p, b, &nl);
    if (p->single)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Key: %.*s.  %s", (int)f->key.n,
                       (const char *)f->key.p, what);
    return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Name: %.*s, Key: %.*s, Index: %lld.  %s", nl, name,
                   (int)f->key.n, (const char *)f->key.p, (long long)b, what);
}

static void *grow(void *buf, int64_t *cap, int64_t need, size_t size)
{
    if (need <= *cap)
        return buf;
    int64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *nb = tfs_realloc(buf, (size_t)c * size);
    if (nb)
        *cap = c;
    return nb;
}

/* A fixed-length dense feature of example b: its values, or the default, into the output. */
static enum tfs_code pe_fixed(pe *p, pe_feat *f, int64_t b, feature *v, view body,
                              tfs_status *st)
{
    tfs_tensor *out = p->k->out[f->out];
    char msg[256], sh[128];
    int nl;
    if (v->kind == TFS_DTYPE_INVALID) {
        if (f->dflt->nelem == 0) {
            const char *name = example_name(p, b, &nl);
            if (p->single)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                               "Feature: %.*s (data type: %s) is required but could not be found.",
                               (int)f->key.n, (const char *)f->key.p, tfs_dtype_short_name(f->dtype));
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Name: %.*s, Feature: %.*s (data type: %s) is required but could not be "
                           "found.", nl, name, (int)f->key.n, (const char *)f->key.p,
                           tfs_dtype_short_name(f->dtype));
        }
        return put_tensor(out, b * f->stride, f->dflt, st);
    }
    if (v->kind != f->dtype) {
        snprintf(msg, sizeof msg, "Data types don't match. Data type: %s but expected type: %s",
                 tfs_dtype_short_name(v->kind), tfs_dtype_short_name(f->dtype));
        return feat_err(p, f, b, st, msg);
    }
    if (v->n != f->stride) {
        if (p->single)
            return feat_err(p, f, b, st, "Can't parse serialized Example.");
        snprintf(msg, sizeof msg,
                 "Number of %s values != expected.  Values size: %lld but output shape: %s",
                 type_word(f->dtype), (long long)v->n, shape_text(f->shape, sh, sizeof sh));
        return feat_err(p, f, b, st, msg);
    }
    if (f->dtype != TFS_DTYPE_STRING) {
        feature_walk(body, v, (char *)out->data + (size_t)(b * f->stride) * tfs_dtype_size(f->dtype));
        return TFS_OK;
    }
    view *scratch = grow(p->scratch, &p->scratch_cap, v->n, sizeof(view));
    if (!scratch)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    p->scratch = scratch;
    feature_walk(body, v, scratch);
    return put_values(out, b * f->stride, p->scratch, v->n, st);
}

/* A sparse or variable-length dense feature of example b: its values join the feature's buffer. */
static enum tfs_code pe_append(pe *p, pe_feat *f, int64_t b, feature *v, view body, tfs_status *st)
{
    char msg[256], sh[128];
    if (v->kind != TFS_DTYPE_INVALID && v->kind != f->dtype) {
        if (f->dense)
            snprintf(msg, sizeof msg, "Data types don't match. Data type: %s but expected type: %s",
                     tfs_dtype_short_name(v->kind), tfs_dtype_short_name(f->dtype));
        else
            snprintf(msg, sizeof msg, "Data types don't match. Expected type: %s, Actual type: %s",
                     tfs_dtype_short_name(f->dtype), tfs_dtype_short_name(v->kind));
        return feat_err(p, f, b, st, msg);
    }
    int64_t n = v->kind == TFS_DTYPE_INVALID ? 0 : v->n;
    if (f->dense && n > 0 && (f->stride == 0 || n % f->stride != 0)) {
        if (p->single)
            return feat_err(p, f, b, st, "Can't parse serialized Example.");
        snprintf(msg, sizeof msg,
                 "Number of %s values is not a multiple of stride length. Saw %lld values but "
                 "output shape is: %s", type_word(f->dtype), (long long)n,
                 shape_text(f->shape, sh, sizeof sh));
        return feat_err(p, f, b, st, msg);
    }
    if (!f->ends) {
        f->ends = tfs_calloc((size_t)(p->B ? p->B : 1), sizeof *f->ends);
        if (!f->ends)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (n > 0) {
        char *vals = grow(f->vals, &f->cap, f->nvals + n, kind_size(f->dtype));
        if (!vals)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        f->vals = vals;
        feature_walk(body, v, vals + (size_t)f->nvals * kind_size(f->dtype));
        f->nvals += n;
    }
    f->ends[b] = f->nvals;
    return TFS_OK;
}

/* The input bytes in a message: printable ASCII as is, the rest escaped, long inputs cut. */
static const char *escape(const tfs_string *s, char *buf, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->data[i];
        if (at + 8 >= n) {
            memcpy(buf + at, "...", 4);
            return buf;
        }
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
            buf[at++] = (char)c;
        else
            at += (size_t)snprintf(buf + at, n - at, "\\x%02x", c);
    }
    buf[at] = 0;
    return buf;
}

static enum tfs_code pe_example(pe *p, int64_t b, tfs_status *st)
{
    const tfs_string *s = &p->ser[b];
    view ex = {(const uint8_t *)s->data, s->len};
    char buf[200];
    enum split_result res = example_split(ex, &p->es);
    if (res == SPLIT_NOMEM)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    if (res == SPLIT_BAD)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Could not parse example input, value: '%s'",
                       escape(s, buf, sizeof buf));
    for (int i = 0; i < p->nf; i++)
        p->f[i].hit = -1;
    for (int64_t i = p->es.n - 1; i >= 0; i--) {   /* backwards: the last entry of a key wins */
        pe_feat *f = pe_lookup(p, p->es.v[i].key);
        if (f && f->hit < 0)
            f->hit = i;
    }
    /* Features present first, then missing ones, so errors come in TensorFlow's order. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nf; i++) {
            pe_feat *f = &p->f[i];
            feature v = {TFS_DTYPE_INVALID, 0, NULL};
            view body = {NULL, 0};
            if ((f->hit >= 0) != (pass == 0))
                continue;
            if (f->hit >= 0) {
                body = p->es.v[f->hit].body;
                if (!feature_walk(body, &v, NULL))
                    return feat_err(p, f, b, st, "Can't parse serialized Example.");
            }
            enum tfs_code code = f->dense && !f->varlen ? pe_fixed(p, f, b, &v, body, st)
                                                        : pe_append(p, f, b, &v, body, st);
            if (code != TFS_OK)
                return code;
        }
    }
    return TFS_OK;
}

/* indices [N,2] of (example, position) ([N,1] of position for a single example), values [N],
 * dense shape [B, longest] ([N]). */
static enum tfs_code pe_sparse_out(pe *p, pe_feat *f, tfs_status *st)
{
    tfs_tensor **out = p->k->out;
    int64_t n = f->nvals, longest = 0, prev = 0;
    int64_t idims[2] = {n, p->single ? 1 : 2}, vdims[1] = {n}, sdims[1] = {p->single ? 1 : 2};
    if (tfs_tensor_new(TFS_DTYPE_INT64, 2, idims, &out[f->out], st) != TFS_OK ||
        tfs_tensor_new(f->dtype, 1, vdims, &out[p->ns + f->out], st) != TFS_OK ||
        tfs_tensor_new(TFS_DTYPE_INT64, 1, sdims, &out[2 * p->ns + f->out], st) != TFS_OK)
        return st->code;
    int64_t *ix = out[f->out]->data, *shape = out[2 * p->ns + f->out]->data;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t end = f->ends ? f->ends[b] : 0;
        for (int64_t j = 0; j < end - prev; j++) {
            if (!p->single)
                *ix++ = b;
            *ix++ = j;
        }
        if (end - prev > longest)
            longest = end - prev;
        prev = end;
    }
    if (p->single) {
        shape[0] = n;
    } else {
        shape[0] = p->B;
        shape[1] = longest;
    }
    return put_values(out[p->ns + f->out], 0, f->vals, n, st);
}

/* [B, longest, inner...] padded with the default ([rows, inner...] for a single example). */
static enum tfs_code pe_varlen_out(pe *p, pe_feat *f, tfs_status *st)
{
    int64_t dims[TFS_MAX_RANK], rows = 0, prev = 0;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t r = f->stride ? (f->ends[b] - prev) / f->stride : 0;
        if (r > rows)
            rows = r;
        prev = f->ends[b];
    }
    int rank = 0;
    if (!p->single)
        dims[rank++] = p->B;
    dims[rank++] = rows;
    for (int d = 1; d < f->shape->rank; d++)
        dims[rank++] = f->shape->dims[d];
    if (tfs_tensor_new(f->dtype, rank, dims, &p->k->out[f->out], st) != TFS_OK)
        return st->code;
    tfs_tensor *t = p->k->out[f->out];
    if (put_fill(t, 0, t->nelem, f->dflt, st) != TFS_OK)
        return st->code;
    size_t es = kind_size(f->dtype);
    prev = 0;
    for (int64_t b = 0; b < p->B; b++) {
        if (f->ends[b] > prev && put_values(t, b * rows * f->stride, f->vals + (size_t)prev * es,
                                            f->ends[b] - prev, st) != TFS_OK)
            return st->code;
        prev = f->ends[b];
    }
    return TFS_OK;
}

static void pe_free(pe *p)
{
    for (int i = 0; p->f && i < p->nf; i++) {
        tfs_free(p->f[i].ends);
        tfs_free(p->f[i].vals);
    }
    tfs_free(p->f);
    tfs_free(p->order);
    tfs_free(p->es.v);
    tfs_free(p->scratch);
}

static enum tfs_code parse_example(tfs_kernel_ctx *k, bool v2, tfs_status *st)
{
    pe p = {.k = k};
    enum tfs_code code;
    if ((code = pe_attrs(&p, v2, st)) != TFS_OK || (code = pe_inputs(&p, v2, st)) != TFS_OK)
        goto fail;
    /* Fixed-length dense outputs are filled in place; the others wait for every example. */
    for (int d = 0; d < p.nd; d++) {
        pe_feat *f = &p.f[p.ns + d];
        int64_t dims[TFS_MAX_RANK];
        int rank = 0;
        if (f->varlen)
            continue;
        if (!p.single)
            dims[rank++] = p.B;
        for (int i = 0; i < f->shape->rank; i++)
            dims[rank++] = f->shape->dims[i];
        if ((code = tfs_tensor_new(f->dtype, rank, dims, &k->out[f->out], st)) != TFS_OK)
            goto fail;
    }
    for (int64_t b = 0; b < p.B; b++)
        if ((code = pe_example(&p, b, st)) != TFS_OK)
            goto fail;
    for (int i = 0; i < p.nf; i++) {
        pe_feat *f = &p.f[i];
        if (!f->ends && (!f->dense || f->varlen)) {   /* an empty batch */
            f->ends = tfs_calloc(1, sizeof *f->ends);
            if (!f->ends) {
                code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
                goto fail;
            }
        }
        code = !f->dense ? pe_sparse_out(&p, f, st) : f->varlen ? pe_varlen_out(&p, f, st) : TFS_OK;
        if (code != TFS_OK)
            goto fail;
    }
    pe_free(&p);
    tfs_status_clear(st);
    return TFS_OK;
fail:
    for (int i = 0; i < k->n_out; i++) {
        tfs_tensor_unref(k->out[i]);
        k->out[i] = NULL;
    }
    pe_free(&p);
    return code;
}

enum tfs_code tfs__k_parse_example(tfs_kernel_ctx *k, tfs_status *st)
{
    return parse_example(k, false, st);
}

enum tfs_code tfs__k_parse_example_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    return parse_example(k, true, st);
}

/* ---- output counts -------------------------------------------------------------------------- */

static int64_t attr_int_or(const tfs_node *n, const char *name)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    return v && v->kind == TFS_ATTR_I ? v->i : -1;
}

static int64_t attr_list_len(const tfs_node *n, const char *name)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    return v && v->kind == TFS_ATTR_LIST ? v->list.n : -1;
}

int tfs__nout_parse_example(const tfs_node *n)
{
    int64_t ns = attr_int_or(n, "Nsparse"), nd = attr_int_or(n, "Ndense");
    if (ns < 0 || nd < 0 || ns > PE_MAX_KEYS || nd > PE_MAX_KEYS)
        return -1;
    return (int)(3 * ns + nd);
}

int tfs__nout_parse_example_v2(const tfs_node *n)
{
    int64_t ns = attr_int_or(n, "num_sparse"), nd = attr_list_len(n, "Tdense"),
            nr = attr_list_len(n, "ragged_value_types");
    if (ns < 0 || nd < 0 || nr < 0 || ns > PE_MAX_KEYS || nd > PE_MAX_KEYS || nr > PE_MAX_KEYS)
        return -1;
    return (int)(3 * ns + nd + 2 * nr);
}
