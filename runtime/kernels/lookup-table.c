/* The lookup table behind HashTable(V2) and MutableHashTable(V2): an insertion-ordered entry
 * array with an open-addressing index, and its life as a session resource (see lookup-impl.h for
 * the design). The op kernels are in kernels/lookup.c.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/kernels/lookup-impl.h"

/* ---- keys and values ------------------------------------------------------------------------ */

tfs_lookup_key tfs__lookup_key_at(const tfs_tensor *keys, int64_t i)
{
    tfs_lookup_key k = {0, NULL, 0};
    if (keys->dtype == TFS_DTYPE_STRING) {
        const tfs_string *s = &((const tfs_string *)keys->data)[i];
        k.s = s->data ? s->data : "";
        k.len = s->len;
    } else {
        k.i = tfs__arr_int_at(keys, i);
    }
    return k;
}

static uint64_t key_hash(const tfs_lookup_table *t, tfs_lookup_key k)
{
    if (t->key_dt == TFS_DTYPE_STRING)
        return tfs__fingerprint64(k.s, k.len);
    uint64_t z = (uint64_t)k.i + 0x9e3779b97f4a7c15u;   /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static bool key_equal(const tfs_lookup_table *t, int64_t e, tfs_lookup_key k)
{
    if (t->key_dt != TFS_DTYPE_STRING)
        return t->ikeys[e] == k.i;
    const tfs_string *s = &t->skeys[e];
    return s->len == k.len && (k.len == 0 || memcmp(s->data, k.s, k.len) == 0);
}

int64_t tfs__lookup_find(const tfs_lookup_table *t, tfs_lookup_key key)
{
    if (t->nslots == 0)
        return -1;
    uint64_t mask = (uint64_t)t->nslots - 1;
    for (uint64_t j = key_hash(t, key) & mask;; j = (j + 1) & mask) {
        int64_t e = t->slots[j] - 1;
        if (e < 0)
            return -1;
        if (key_equal(t, e, key))
            return e;
    }
}

static void *val_ptr(const tfs_lookup_table *t, int64_t e)
{
    return t->vals + (size_t)(e * t->vdim) * t->vsize;
}

static void free_strings(tfs_string *s, int64_t n)
{
    for (int64_t i = 0; s && i < n; i++) {
        tfs_free(s[i].data);
        s[i].data = NULL;
        s[i].len = 0;
    }
}

void tfs__lookup_clear(tfs_lookup_table *t)
{
    free_strings(t->skeys, t->n);
    if (t->val_dt == TFS_DTYPE_STRING)
        free_strings((tfs_string *)t->vals, t->n * t->vdim);
    if (t->slots)
        memset(t->slots, 0, (size_t)t->nslots * sizeof *t->slots);
    t->n = 0;
}

/* Fills the (zeroed) index `slots` of ns slots, a power of two, with entries 0..n-1. */
static void index_entries(const tfs_lookup_table *t, int64_t *slots, int64_t ns)
{
    uint64_t mask = (uint64_t)ns - 1;
    for (int64_t e = 0; e < t->n; e++) {
        tfs_lookup_key k = {0, NULL, 0};
        if (t->key_dt == TFS_DTYPE_STRING) {
            k.s = t->skeys[e].data ? t->skeys[e].data : "";
            k.len = t->skeys[e].len;
        } else {
            k.i = t->ikeys[e];
        }
        uint64_t j = key_hash(t, k) & mask;
        while (slots[j])
            j = (j + 1) & mask;
        slots[j] = e + 1;
    }
}

/* Room for one more entry: grows the arrays and rebuilds the index at 1/2 load. */
static enum tfs_code reserve_one(tfs_lookup_table *t, tfs_status *st)
{
    if (t->n == t->cap) {
        int64_t cap = t->cap ? 2 * t->cap : 16;
        if (cap > ((int64_t)1 << 40) / (t->vdim > 0 ? t->vdim : 1))
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "table %s is too large", t->name);
        void *v = tfs_realloc(t->vals, (size_t)(cap * t->vdim) * t->vsize + 1);
        if (!v)
            goto oom;
        t->vals = v;
        if (t->key_dt == TFS_DTYPE_STRING) {
            void *k = tfs_realloc(t->skeys, (size_t)cap * sizeof *t->skeys);
            if (!k)
                goto oom;
            t->skeys = k;
        } else {
            void *k = tfs_realloc(t->ikeys, (size_t)cap * sizeof *t->ikeys);
            if (!k)
                goto oom;
            t->ikeys = k;
        }
        t->cap = cap;
    }
    if (2 * (t->n + 1) > t->nslots) {
        int64_t ns = t->nslots ? 2 * t->nslots : 32;
        int64_t *slots = tfs_calloc((size_t)ns, sizeof *slots);
        if (!slots)
            goto oom;
        index_entries(t, slots, ns);
        tfs_free(t->slots);
        t->slots = slots;
        t->nslots = ns;
    }
    return TFS_OK;
oom:
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory growing table %s", t->name);
}

static enum tfs_code set_value(tfs_lookup_table *t, int64_t e, const tfs_tensor *src, int64_t si,
                               tfs_status *st)
{
    if (t->val_dt != TFS_DTYPE_STRING) {
        memcpy(val_ptr(t, e), (const char *)src->data + (size_t)(si * t->vdim) * t->vsize,
               (size_t)t->vdim * t->vsize);
        return TFS_OK;
    }
    tfs_string *d = val_ptr(t, e);
    const tfs_string *s = (const tfs_string *)src->data + si * t->vdim;
    for (int64_t i = 0; i < t->vdim; i++) {
        char *copy = tfs_malloc(s[i].len + 1);
        if (!copy)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory in table %s", t->name);
        if (s[i].len)
            memcpy(copy, s[i].data, s[i].len);
        copy[s[i].len] = 0;
        tfs_free(d[i].data);
        d[i].data = copy;
        d[i].len = s[i].len;
    }
    return TFS_OK;
}

bool tfs__lookup_value_equal(const tfs_lookup_table *t, int64_t e, const tfs_tensor *src,
                             int64_t si)
{
    const void *a = val_ptr(t, e);
    for (int64_t i = 0; i < t->vdim; i++) {
        int64_t j = si * t->vdim + i;
        bool eq;
        switch (t->val_dt) {
        case TFS_DTYPE_FLOAT:  eq = ((const float *)a)[i] == ((const float *)src->data)[j]; break;
        case TFS_DTYPE_DOUBLE: eq = ((const double *)a)[i] == ((const double *)src->data)[j]; break;
        case TFS_DTYPE_STRING: {
            const tfs_string *x = &((const tfs_string *)a)[i];
            const tfs_string *y = &((const tfs_string *)src->data)[j];
            eq = x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
            break;
        }
        default:
            eq = memcmp((const char *)a + (size_t)i * t->vsize,
                        (const char *)src->data + (size_t)j * t->vsize, t->vsize) == 0;
        }
        if (!eq)
            return false;
    }
    return true;
}

enum tfs_code tfs__lookup_put(tfs_lookup_table *t, tfs_lookup_key key, const tfs_tensor *src,
                              int64_t si, bool replace, bool *same, tfs_status *st)
{
    int64_t e = tfs__lookup_find(t, key);
    if (e >= 0) {
        if (same)
            *same = tfs__lookup_value_equal(t, e, src, si);
        return replace ? set_value(t, e, src, si, st) : TFS_OK;
    }
    if (same)
        *same = true;
    enum tfs_code rc = reserve_one(t, st);
    if (rc != TFS_OK)
        return rc;
    e = t->n;
    if (t->val_dt == TFS_DTYPE_STRING)
        memset(val_ptr(t, e), 0, (size_t)t->vdim * sizeof(tfs_string));
    if (t->key_dt == TFS_DTYPE_STRING) {
        char *copy = tfs_malloc(key.len + 1);
        if (!copy)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory in table %s", t->name);
        if (key.len)
            memcpy(copy, key.s, key.len);
        copy[key.len] = 0;
        t->skeys[e] = (tfs_string){key.len, copy};
    } else {
        t->ikeys[e] = key.i;
    }
    if ((rc = set_value(t, e, src, si, st)) != TFS_OK) {
        if (t->skeys)
            tfs_free(t->skeys[e].data);
        if (t->val_dt == TFS_DTYPE_STRING)
            free_strings(val_ptr(t, e), t->vdim);
        return rc;
    }
    uint64_t mask = (uint64_t)t->nslots - 1, j = key_hash(t, key) & mask;
    while (t->slots[j])
        j = (j + 1) & mask;
    t->slots[j] = e + 1;
    t->n++;
    return TFS_OK;
}

enum tfs_code tfs__lookup_remove(tfs_lookup_table *t, const tfs_tensor *keys, tfs_status *st)
{
    if (t->n == 0 || keys->nelem == 0)
        return TFS_OK;
    bool *gone = tfs_calloc((size_t)t->n, sizeof *gone);
    if (!gone)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory in table %s", t->name);
    int64_t hits = 0;
    for (int64_t i = 0; i < keys->nelem; i++) {
        int64_t e = tfs__lookup_find(t, tfs__lookup_key_at(keys, i));
        if (e >= 0 && !gone[e]) {
            gone[e] = true;
            hits++;
        }
    }
    /* Close the gaps in one pass, keeping the survivors' order; then index them anew (open
     * addressing cannot just empty a slot: later keys of its probe run would be lost). */
    size_t vbytes = (size_t)t->vdim * t->vsize;
    int64_t w = 0;
    for (int64_t e = 0; hits > 0 && e < t->n; e++) {
        if (gone[e]) {
            if (t->skeys)
                free_strings(&t->skeys[e], 1);
            if (t->val_dt == TFS_DTYPE_STRING)
                free_strings(val_ptr(t, e), t->vdim);
            continue;
        }
        if (w != e) {
            if (t->skeys) {
                t->skeys[w] = t->skeys[e];
                t->skeys[e] = (tfs_string){0, NULL};
            } else {
                t->ikeys[w] = t->ikeys[e];
            }
            memcpy(val_ptr(t, w), val_ptr(t, e), vbytes);
            if (t->val_dt == TFS_DTYPE_STRING)
                memset(val_ptr(t, e), 0, vbytes);
        }
        w++;
    }
    tfs_free(gone);
    if (hits == 0)
        return TFS_OK;
    t->n = w;
    memset(t->slots, 0, (size_t)t->nslots * sizeof *t->slots);
    index_entries(t, t->slots, t->nslots);
    return TFS_OK;
}

enum tfs_code tfs__lookup_copy_value(const tfs_lookup_table *t, int64_t e, tfs_tensor *dst,
                                     int64_t di, tfs_status *st)
{
    if (t->val_dt != TFS_DTYPE_STRING) {
        memcpy((char *)dst->data + (size_t)(di * t->vdim) * t->vsize, val_ptr(t, e),
               (size_t)t->vdim * t->vsize);
        return TFS_OK;
    }
    const tfs_string *s = val_ptr(t, e);
    for (int64_t i = 0; i < t->vdim; i++)
        if (tfs_tensor_set_string(dst, di * t->vdim + i, s[i].data, s[i].len, st) != TFS_OK)
            return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    return TFS_OK;
}

/* ---- the table as a session resource -------------------------------------------------------- */

static void table_free(tfs_lookup_table *t)
{
    if (!t)
        return;
    tfs__lookup_clear(t);
    tfs_free(t->skeys);
    tfs_free(t->ikeys);
    tfs_free(t->vals);
    tfs_free(t->slots);
    tfs_free(t->name);
    pthread_rwlock_destroy(&t->mu);
    tfs_free(t);
}

static void table_dealloc(void *data, void *arg)
{
    (void)arg;
    table_free(data);
}

static bool key_dtype_ok(enum tfs_dtype dt)
{
    return dt == TFS_DTYPE_INT32 || dt == TFS_DTYPE_INT64 || dt == TFS_DTYPE_STRING;
}

static bool value_dtype_ok(enum tfs_dtype dt)
{
    return dt == TFS_DTYPE_INT32 || dt == TFS_DTYPE_INT64 || dt == TFS_DTYPE_STRING ||
           dt == TFS_DTYPE_FLOAT || dt == TFS_DTYPE_DOUBLE || dt == TFS_DTYPE_BOOL;
}

/* A new table in a scalar DT_VARIANT tensor that owns it. */
static enum tfs_code table_tensor(const tfs_node *n, const char *name, enum tfs_dtype kd,
                                  enum tfs_dtype vd, bool is_mutable, const tfs_shape *vshape,
                                  tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    tfs_lookup_table *t = tfs_calloc(1, sizeof *t);
    tfs_tensor *tt = tfs_calloc(1, sizeof *tt);
    if (!t || !tt || !(t->name = tfs_strdup(name)) || pthread_rwlock_init(&t->mu, NULL) != 0) {
        if (t)
            tfs_free(t->name);
        tfs_free(t);
        tfs_free(tt);
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory creating table %s",
                             name);
    }
    t->key_dt = kd;
    t->val_dt = vd;
    t->is_mutable = is_mutable;
    t->value_shape = *vshape;
    t->vdim = tfs_shape_nelem(vshape->rank, vshape->dims);
    t->vsize = tfs_dtype_size(vd);
    tt->dtype = TFS_DTYPE_VARIANT;
    tt->nelem = 1;
    tt->data = t;
    atomic_init(&tt->refs, 1);
    tt->dealloc = table_dealloc;
    *out = tt;
    return TFS_OK;
}

static tfs_lookup_table *table_of(const tfs_variable *v)
{
    const tfs_tensor *t = v->dtype == TFS_DTYPE_VARIANT ? v->value : NULL;
    return t && t->dealloc == table_dealloc ? t->data : NULL;
}

enum tfs_code tfs__lookup_table_for_node(tfs_kernel_ctx *k, bool is_mutable, tfs_variable **var,
                                         tfs_lookup_table **out, tfs_status *st)
{
    const tfs_node *n = k->node;
    *out = NULL;
    *var = NULL;
    enum tfs_dtype kd, vd;
    enum tfs_code rc;
    if ((rc = tfs__attr_type(n, "key_dtype", &kd, st)) != TFS_OK ||
        (rc = tfs__attr_type(n, "value_dtype", &vd, st)) != TFS_OK)
        return rc;
    if (!key_dtype_ok(kd) || !value_dtype_ok(vd))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "tables of %s keys and %s values are not supported (keys: int32, "
                             "int64, string; values: bool, int32, int64, float, double, string)",
                             tfs_dtype_short_name(kd), tfs_dtype_short_name(vd));
    tfs_shape vshape = {.rank = 0};
    const tfs_attr_value *vs = tfs__attr(n, "value_shape");
    if (is_mutable && vs && vs->kind == TFS_ATTR_SHAPE) {
        vshape = vs->shape;
        if (vshape.rank < 0 || tfs_shape_nelem(vshape.rank, vshape.dims) < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "value_shape must be fully defined");
    }
    /* TF's ContainerInfo: an empty shared_name shares by node name only when
     * use_node_name_sharing is set; otherwise the table is private to this node (kernel). */
    const char *shared = tfs__attr_str(n, "shared_name", "");
    char priv[64];
    const tfs_attr_value *share = tfs__attr(n, "use_node_name_sharing");
    if (!*shared) {
        if (share && share->kind == TFS_ATTR_B && share->b) {
            shared = n->name;
        } else {
            snprintf(priv, sizeof priv, "_private_%p", (const void *)n);
            shared = priv;
        }
    }
    const char *container = tfs__attr_str(n, "container", "");
    size_t lc = strlen(container);
    char *cont = tfs_malloc(lc + 8);
    if (!cont)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(cont, "tables:", 7);
    memcpy(cont + 7, container, lc + 1);
    tfs_variable *v;
    rc = tfs__session_variable(k->sess, cont, shared, TFS_DTYPE_VARIANT, &v, st);
    tfs_free(cont);
    if (rc != TFS_OK)
        return rc;
    pthread_mutex_lock(&v->mu);
    if (!v->value)
        rc = table_tensor(n, shared, kd, vd, is_mutable, &vshape, &v->value, st);
    tfs_lookup_table *t = rc == TFS_OK ? table_of(v) : NULL;
    pthread_mutex_unlock(&v->mu);
    if (rc != TFS_OK)
        return rc;
    if (!t)
        return tfs__node_err(n, st, TFS_INTERNAL, "resource %s is not a table", shared);
    if (t->key_dt != kd || t->val_dt != vd || t->is_mutable != is_mutable ||
        !tfs_shape_equal(t->value_shape.rank, t->value_shape.dims, vshape.rank, vshape.dims))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Conflicting key/value dtypes %s->%s with %s-%s for table %s (or "
                             "another kind or value_shape)",
                             tfs_dtype_name(kd), tfs_dtype_name(vd), tfs_dtype_name(t->key_dt),
                             tfs_dtype_name(t->val_dt), shared);
    *out = t;
    *var = v;
    return TFS_OK;
}

enum tfs_code tfs__lookup_table_input(tfs_kernel_ctx *k, int i, tfs_lookup_table **out,
                                      tfs_status *st)
{
    *out = NULL;
    const tfs_tensor *h = i < k->n_in ? k->in[i] : NULL;
    bool ok = h && h->nelem == 1 &&
              (h->dtype == TFS_DTYPE_RESOURCE ||
               h->dtype == TFS_DTYPE_STRING + TFS_DTYPE_REF_OFFSET);
    tfs_variable *v = ok ? *(tfs_variable *const *)h->data : NULL;
    if (v) {
        pthread_mutex_lock(&v->mu);
        *out = table_of(v);
        pthread_mutex_unlock(&v->mu);
    }
    if (!*out)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "input %d must be a lookup table handle (HashTable or "
                             "MutableHashTable output), got %s", i,
                             h ? (v ? "another resource" : tfs_dtype_name(h->dtype)) : "none");
    return TFS_OK;
}
