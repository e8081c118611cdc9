/* Loading a SavedModel version directory, as TensorFlow's loader does it:
 *   1. read saved_model.pb, pick the MetaGraphDef by tags;
 *   2. import its graph (functions inlined) and open a session on it;
 *   3. check that every op the restore, the init op and the signatures need has a kernel, and fail
 *      with one message naming all that are missing;
 *   4. restore variables: feed "<dir>/variables/variables" to saver_def.filename_tensor_name and run
 *      saver_def.restore_op_name (RestoreV2 reads through the TensorBundle reader below);
 *   5. feed asset paths and run the init op (__saved_model_init_op, else saved_model_main_op, else
 *      legacy_init_op);
 *   6. unless turned off, rewrite the graph for the signatures (rewrite.c): those the rewritten
 *      graph serves run on a session over it, the others on the original one.
 * The loaded model is then immutable but for its variables, and is run through tfs_savedmodel_run. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/unpack.h"
#include "savedmodel/bundle-impl.h"
#include "savedmodel/savedmodel-impl.h"

#define INIT_OP_SIGNATURE "__saved_model_init_op"

/* RestoreV2's view of the variables bundle: one open bundle, reopened if another prefix is asked. */
typedef struct bundle_source {
    char       *prefix;
    tfs_bundle *bundle;
} bundle_source;

struct tfs_savedmodel {
    char           *dir;
    tfs_graph      *graph;
    tfs_session    *session;
    tfs_signature  *sigs;
    int             n_sigs;
    bundle_source   source;
    tfs_serving_graph serving;   /* the rewritten graph (rewrite.c); zeros when off */
};

tfs_savedmodel_opts tfs_savedmodel_opts_default(void)
{
    return (tfs_savedmodel_opts){.tags = "serve"};
}

static enum tfs_code bundle_source_read(void *user, const char *prefix, const char *name,
                                        enum tfs_dtype dtype, tfs_tensor **out, tfs_status *st)
{
    bundle_source *src = &((tfs_savedmodel *)user)->source;
    if (!src->bundle || strcmp(src->prefix, prefix) != 0) {
        tfs_bundle *b = NULL;
        char *p = tfs_strdup(prefix);
        if (!p)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        if (tfs_bundle_open(prefix, &b, st) != TFS_OK) {
            tfs_free(p);
            return st ? st->code : TFS_DATA_LOSS;
        }
        tfs_bundle_free(src->bundle);
        tfs_free(src->prefix);
        src->bundle = b;
        src->prefix = p;
    }
    return tfs_bundle_read(src->bundle, name, dtype, out, st);
}

/* InitializeTableFromTextFile(V2)'s vocabulary files. The path comes from the graph (an asset
 * feed points into <dir>/assets), so only regular files inside the model's directory are read;
 * any other path is refused, as is a file over TFS_ASSET_FILE_MAX bytes. */
#define TFS_ASSET_FILE_MAX ((size_t)1 << 30)

static enum tfs_code model_file_read(void *user, const char *path, char **data, size_t *len,
                                     tfs_status *st)
{
    const tfs_savedmodel *m = user;
    *data = NULL;
    *len = 0;
    char root_buf[PATH_MAX], real_buf[PATH_MAX];
    const char *root = realpath(m->dir, root_buf), *real = realpath(path, real_buf);
    FILE *f = NULL;
    enum tfs_code rc = TFS_OK;
    if (!real) {
        rc = TFS_ERR(st, tfs_code_from_errno(errno), "%s: %s", path,
                     strerror(errno));
        goto done;
    }
    size_t lr = root ? strlen(root) : 0;
    if (!root || strncmp(real, root, lr) != 0 || real[lr] != '/') {
        rc = TFS_ERR(st, TFS_PERMISSION_DENIED,
                     "%s: table initializers read files only inside the model directory %s",
                     path, m->dir);
        goto done;
    }
    struct stat sb;
    if (!(f = fopen(real, "rb")) || fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rc = TFS_ERR(st, TFS_NOT_FOUND, "%s: not a readable regular file", path);
        goto done;
    }
    if ((uint64_t)sb.st_size > TFS_ASSET_FILE_MAX) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: %lld bytes, more than the %zu a table "
                     "initializer reads", path, (long long)sb.st_size, TFS_ASSET_FILE_MAX);
        goto done;
    }
    size_t n = (size_t)sb.st_size;
    if (n && !(*data = tfs_malloc(n))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes", path, n);
        goto done;
    }
    if (n && fread(*data, 1, n, f) != n) {
        tfs_free(*data);
        *data = NULL;
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: short read", path);
        goto done;
    }
    *len = n;
done:
    if (f)
        fclose(f);
    return rc;
}

static char *path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = tfs_malloc(la + lb + 2);
    if (s) {
        memcpy(s, a, la);
        s[la] = '/';
        memcpy(s + la + 1, b, lb + 1);
    }
    return s;
}

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

enum tfs_code tfs__saved_model_read(const char *dir, Tensorflow__SavedModel **out, tfs_status *st)
{
    *out = NULL;
    char *path = path_join(dir, "saved_model.pb");
    uint8_t *buf = NULL;
    FILE *f = NULL;
    enum tfs_code rc = TFS_OK;
    if (!path)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    if (!(f = fopen(path, "rb"))) {
        rc = TFS_ERR(st, tfs_code_from_errno(errno),
                     "%s: %s (saved_model.pbtxt is not supported)", path, strerror(errno));
        goto done;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
        (uint64_t)sb.st_size > TFS_SAVED_MODEL_PB_MAX) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: not a regular file of 1 byte to 2 GiB", path);
        goto done;
    }
    size_t n = (size_t)sb.st_size;
    if (!(buf = tfs_malloc(n))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory for %zu bytes", path, n);
        goto done;
    }
    if (fread(buf, 1, n, f) != n) {
        rc = TFS_ERR(st, TFS_DATA_LOSS, "%s: short read", path);
        goto done;
    }
    /* Bounded: a file nested deep enough to overflow protobuf-c's recursion fails this version
     * instead of the server. */
    if ((rc = tfs_proto_unpack_bounded(&tensorflow__saved_model__descriptor, NULL, buf, n,
                                       (ProtobufCMessage **)out, st)) != TFS_OK)
        tfs_status_prefix(st, "%s: not a valid SavedModel protobuf", path);
done:
    if (f)
        fclose(f);
    tfs_free(buf);
    tfs_free(path);
    return rc;
}

/* True when tag[0..len) is one of the comma-separated tags of `tags`. */
static bool tags_have(const char *tags, const char *tag, size_t len)
{
    for (const char *p = tags; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && !strncmp(p, tag, len))
            return true;
        p += l + (e ? 1 : 0);
    }
    return false;
}

/* True when mg's tag set equals the set of comma-separated `tags` (empty items and repeats do not
 * count), as TensorFlow's loader compares them. */
static bool same_tag_set(const Tensorflow__MetaGraphDef *mg, const char *tags)
{
    const Tensorflow__MetaGraphDef__MetaInfoDef *mi = mg->meta_info_def;
    size_t n = mi ? mi->n_tags : 0;
    for (size_t i = 0; i < n; i++)
        if (!tags_have(tags, mi->tags[i], strlen(mi->tags[i])))
            return false;
    for (const char *p = tags; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        bool found = l == 0;
        for (size_t i = 0; i < n && !found; i++)
            found = strlen(mi->tags[i]) == l && !strncmp(mi->tags[i], p, l);
        if (!found)
            return false;
        p += l + (e ? 1 : 0);
    }
    return true;
}

const Tensorflow__MetaGraphDef *tfs__saved_model_find_meta_graph(const Tensorflow__SavedModel *sm,
                                                                const char *tags)
{
    for (size_t i = 0; i < sm->n_meta_graphs; i++)
        if (same_tag_set(sm->meta_graphs[i], tags))
            return sm->meta_graphs[i];
    return NULL;
}

/* The error for tags that match no MetaGraphDef: names the tag sets there are. */
static enum tfs_code no_meta_graph_error(const Tensorflow__SavedModel *sm, const char *dir,
                                         const char *tags, tfs_status *st)
{
    char sets[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < sm->n_meta_graphs && used + 1 < sizeof sets; i++) {
        const Tensorflow__MetaGraphDef__MetaInfoDef *mi = sm->meta_graphs[i]->meta_info_def;
        used += (size_t)snprintf(sets + used, sizeof sets - used, "%s{", i ? ", " : "");
        for (size_t j = 0; mi && j < mi->n_tags && used + 1 < sizeof sets; j++)
            used += (size_t)snprintf(sets + used, sizeof sets - used, "%s%s", j ? "," : "",
                                     mi->tags[j]);
        if (used + 1 < sizeof sets)
            used += (size_t)snprintf(sets + used, sizeof sets - used, "}");
    }
    return TFS_ERR(st, TFS_NOT_FOUND, "%s/saved_model.pb: no MetaGraphDef with exactly the tags "
                   "{%s} (--saved_model_tags); its tag sets: %s", dir, tags,
                   sm->n_meta_graphs ? sets : "none");
}

/* ---- which ops are missing -------------------------------------------------------------------- */

typedef struct op_set {
    int    n;
    char **names;
} op_set;

static void op_set_free(op_set *s)
{
    for (int i = 0; i < s->n; i++)
        tfs_free(s->names[i]);
    tfs_free(s->names);
    s->n = 0;
    s->names = NULL;
}

static void op_set_add(op_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name))
            return;
    char **nn = tfs_realloc(s->names, (size_t)(s->n + 1) * sizeof *nn);
    if (!nn)
        return;
    s->names = nn;
    if ((nn[s->n] = tfs_strdup(name)))
        s->n++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Checks that a run with these names could execute; adds the op types that lack a kernel to
 * `missing` (so one message can name every missing op of every run) and returns OK for them.
 * Other errors (unknown tensors, cycles) are returned. */
static enum tfs_code check_run(tfs_session *s, const char *const *feeds, int nfeeds,
                               const char *const *fetches, int nfetches,
                               const char *const *targets, int ntargets, op_set *missing,
                               tfs_status *st)
{
    const char **ops = NULL;
    int n_ops = 0;
    enum tfs_code rc = tfs_session_missing_ops(s, feeds, nfeeds, fetches, nfetches, targets,
                                               ntargets, &ops, &n_ops, st);
    for (int i = 0; i < n_ops; i++)
        op_set_add(missing, ops[i]);
    tfs_free(ops);
    return rc;
}

/* Strips ":0" from a tensor name to get the op to run as a target. Caller frees. */
static char *op_name(const char *tensor)
{
    const char *colon = strchr(tensor, ':');
    return colon ? tfs_strndup(tensor, (size_t)(colon - tensor)) : tfs_strdup(tensor);
}

static const Tensorflow__CollectionDef *collection(const Tensorflow__MetaGraphDef *mg,
                                                   const char *key)
{
    for (size_t i = 0; i < mg->n_collection_def; i++)
        if (!strcmp(mg->collection_def[i]->key, key))
            return mg->collection_def[i]->value;
    return NULL;
}

/* The init op to run, or NULL for none. Caller frees. */
static char *find_init_op(const Tensorflow__MetaGraphDef *mg, const tfs_signature *sigs, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(sigs[i].key, INIT_OP_SIGNATURE))
            for (int j = 0; j < sigs[i].n_outputs; j++)
                if (!strcmp(sigs[i].outputs[j].alias, INIT_OP_SIGNATURE) && sigs[i].outputs[j].tensor_name)
                    return op_name(sigs[i].outputs[j].tensor_name);
    static const char *const keys[] = {"saved_model_main_op", "legacy_init_op"};
    for (size_t k = 0; k < 2; k++) {
        const Tensorflow__CollectionDef *c = collection(mg, keys[k]);
        if (c && c->kind_case == TENSORFLOW__COLLECTION_DEF__KIND_NODE_LIST && c->node_list &&
            c->node_list->n_value == 1)
            return op_name(c->node_list->value[0]);
    }
    return NULL;
}

/* ---- asset feeds ------------------------------------------------------------------------------ */

typedef struct feeds {
    int        n;
    tfs_feed  *v;
    char     **names;
} feeds;

static void feeds_free(feeds *f)
{
    for (int i = 0; i < f->n; i++) {
        tfs_free(f->names[i]);
        tfs_tensor_unref(f->v[i].tensor);
    }
    tfs_free(f->names);
    tfs_free(f->v);
    memset(f, 0, sizeof *f);
}

static enum tfs_code feeds_add_string(feeds *f, const char *name, const char *value, tfs_status *st)
{
    tfs_feed *nv = tfs_realloc(f->v, (size_t)(f->n + 1) * sizeof *nv);
    if (nv)
        f->v = nv;
    char **nn = tfs_realloc(f->names, (size_t)(f->n + 1) * sizeof *nn);
    if (nn)
        f->names = nn;
    if (!nv || !nn)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    tfs_tensor *t = NULL;
    if (tfs_tensor_new_scalar(TFS_DTYPE_STRING, &t, st) != TFS_OK)
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    char *copy = tfs_strdup(name);
    if (!copy || tfs_tensor_set_string(t, 0, value, strlen(value), st) != TFS_OK) {
        tfs_free(copy);
        tfs_tensor_unref(t);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    }
    f->names[f->n] = copy;
    f->v[f->n] = (tfs_feed){copy, t};
    f->n++;
    return TFS_OK;
}

static enum tfs_code add_asset(feeds *f, const char *dir, const Tensorflow__AssetFileDef *a,
                               tfs_status *st)
{
    if (!a || !a->tensor_info || !a->tensor_info->name || !a->filename)
        return TFS_OK;
    if (strstr(a->filename, "..") || a->filename[0] == '/')
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "asset filename '%s' leaves the assets folder",
                       a->filename);
    char *assets = path_join(dir, "assets");
    char *path = assets ? path_join(assets, a->filename) : NULL;
    enum tfs_code rc = path ? feeds_add_string(f, a->tensor_info->name, path, st)
                            : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    tfs_free(path);
    tfs_free(assets);
    return rc;
}

static enum tfs_code asset_feeds(const Tensorflow__MetaGraphDef *mg, const char *dir, feeds *f,
                                 tfs_status *st)
{
    for (size_t i = 0; i < mg->n_asset_file_def; i++)
        if (add_asset(f, dir, mg->asset_file_def[i], st) != TFS_OK)
            return st ? st->code : TFS_INTERNAL;
    const Tensorflow__CollectionDef *c = collection(mg, "saved_model_assets");
    if (mg->n_asset_file_def == 0 && c && c->kind_case == TENSORFLOW__COLLECTION_DEF__KIND_ANY_LIST &&
        c->any_list) {
        for (size_t i = 0; i < c->any_list->n_value; i++) {
            const Google__Protobuf__Any *any = c->any_list->value[i];
            if (!any->type_url || !strstr(any->type_url, "tensorflow.AssetFileDef"))
                continue;
            /* Any's value is bytes to the SavedModel's own check: its nesting is checked here. */
            Tensorflow__AssetFileDef *a;
            tfs_status                why;
            if (tfs_proto_unpack_bounded(&tensorflow__asset_file_def__descriptor, NULL,
                                         any->value.data, any->value.len,
                                         (ProtobufCMessage **)&a, &why) != TFS_OK)
                return TFS_ERR(st, why.code, "collection saved_model_assets: bad AssetFileDef: %s",
                               why.msg);
            enum tfs_code rc = add_asset(f, dir, a, st);
            tensorflow__asset_file_def__free_unpacked(a, NULL);
            if (rc != TFS_OK)
                return rc;
        }
    }
    return TFS_OK;
}

/* ---- the load procedure ----------------------------------------------------------------------- */

/* Sets each signature's `usable`, collecting missing ops. */
static enum tfs_code check_signatures(tfs_savedmodel *m, op_set *missing, tfs_status *st)
{
    for (int i = 0; i < m->n_sigs; i++) {
        tfs_signature *s = &m->sigs[i];
        tfs_status_clear(&s->usable);
        if (!strcmp(s->key, INIT_OP_SIGNATURE)) {
            TFS_ERR(&s->usable, TFS_FAILED_PRECONDITION, "signature '%s' is the init op, not a "
                    "servable signature", s->key);
            continue;
        }
        const char **in = tfs_calloc((size_t)s->n_inputs + 1, sizeof *in);
        const char **outn = tfs_calloc((size_t)s->n_outputs + 1, sizeof *outn);
        if (!in || !outn) {
            tfs_free(in);
            tfs_free(outn);
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        }
        bool named = true;
        for (int j = 0; j < s->n_inputs; j++)
            named = named && (in[j] = s->inputs[j].tensor_name);
        for (int j = 0; j < s->n_outputs; j++)
            named = named && (outn[j] = s->outputs[j].tensor_name);
        if (!named)
            TFS_ERR(&s->usable, TFS_UNIMPLEMENTED, "signature '%s' uses sparse or composite "
                    "tensors, which tfserve does not serve yet", s->key);
        else
            check_run(m->session, in, s->n_inputs, outn, s->n_outputs, NULL, 0, missing,
                      &s->usable);
        tfs_free(in);
        tfs_free(outn);
        /* A signature that can never run (its graph has a cycle, a tensor it names is not in
         * the graph) fails the version with the reason, rather than every request without one.
         * Missing ops are gathered for one error naming them all; sparse signatures load. */
        if (s->usable.code != TFS_OK && s->usable.code != TFS_UNIMPLEMENTED) {
            *st = s->usable;
            return tfs_status_prefix(st, "signature '%s'", s->key);
        }
    }
    return TFS_OK;
}

/* "ops not supported by tfserve: A (node 'x'), B": each op with the first top-level node of
 * that type, so that a user can find it (ops only inside functions name none). */
static enum tfs_code missing_ops_error(const tfs_graph *g, op_set *missing, tfs_status *st)
{
    char list[TFS_STATUS_MSG_MAX - 64] = "";
    size_t len = 0;
    int n_nodes = tfs_graph_node_count(g);
    qsort(missing->names, (size_t)missing->n, sizeof *missing->names, cmp_str);
    for (int i = 0; i < missing->n; i++) {
        int node = -1;
        for (int j = 0; j < n_nodes && node < 0; j++)
            if (!strcmp(tfs_graph_node_op(g, j), missing->names[i]))
                node = j;
        char where[160] = "";
        if (node >= 0)
            snprintf(where, sizeof where, " (node '%.120s')", tfs_graph_node_name(g, node));
        len += (size_t)snprintf(list + (len < sizeof list ? len : sizeof list),
                                len < sizeof list ? sizeof list - len : 0, "%s%s%s",
                                i ? ", " : "", missing->names[i], where);
    }
    return TFS_ERR(st, TFS_UNIMPLEMENTED, "ops not supported by tfserve: %s", list);
}

/* Step 6. A failed rewrite is not a failed load: the original graph serves everything. */
static void rewrite_for_serving(tfs_savedmodel *m)
{
    tfs_status st;
    if (tfs__serving_graph_build(m->graph, m->session, m->sigs, m->n_sigs, &m->serving, &st) !=
        TFS_OK)
        TFS_LOG_WARN("savedmodel", "%s: graph rewrites failed, serving the graph as loaded: %s",
                     m->dir, st.msg);
}

static void log_rewrites(const tfs_savedmodel *m, bool off)
{
    const tfs_rewrite_stats *r = &m->serving.stats;
    if (off) {
        TFS_LOG_INFO("savedmodel", "%s: graph rewrites off", m->dir);
        return;
    }
    int usable = 0;
    for (int i = 0; i < m->n_sigs; i++)
        usable += m->sigs[i].usable.code == TFS_OK;
    if (r->runs_served == 0 && r->nodes_before == 0) {
        TFS_LOG_INFO("savedmodel", "%s: graph rewrites: none of the %d signatures can run on a "
                     "rewritten graph (they assign variables, or read variables a signature "
                     "assigns); all run on the graph as loaded", m->dir, usable);
        return;
    }
    if (r->runs_served == 0) {
        TFS_LOG_INFO("savedmodel", "%s: graph rewrites: nothing to rewrite in the %d nodes the "
                     "signatures use", m->dir, r->nodes_before);
        return;
    }
    TFS_LOG_INFO("savedmodel", "%s: graph rewrites: %d of %d signatures on the rewritten graph, "
                 "%d -> %d nodes; constant folding %d (%d variables frozen), identity removal %d, "
                 "batch norm folding %d, matmul fusion %d, conv2d fusion %d, residual add "
                 "fusion %d", m->dir, r->runs_served, usable, r->nodes_before, r->nodes_after,
                 r->constants_folded, r->variables_frozen, r->identities_removed,
                 r->batch_norms_folded, r->matmuls_fused, r->conv2ds_fused, r->adds_fused);
}

enum tfs_code tfs_savedmodel_load(const char *dir, const tfs_savedmodel_opts *opts,
                                  tfs_savedmodel **out, tfs_status *st)
{
    *out = NULL;
    tfs_savedmodel_opts o = opts ? *opts : tfs_savedmodel_opts_default();
    if (!o.tags || !o.tags[0])
        o.tags = "serve";
    Tensorflow__SavedModel *sm = NULL;
    tfs_savedmodel *m = NULL;
    char *init_op = NULL, *restore_op = NULL, *prefix = NULL, *index = NULL;
    feeds restore_feeds = {0}, assets = {0};
    op_set missing = {0};

    if (tfs__saved_model_read(dir, &sm, st) != TFS_OK)
        goto fail;
    const Tensorflow__MetaGraphDef *mg = tfs__saved_model_find_meta_graph(sm, o.tags);
    if (!mg) {
        no_meta_graph_error(sm, dir, o.tags, st);
        goto fail;
    }
    if (!(m = tfs_calloc(1, sizeof *m)) || !(m->dir = tfs_strdup(dir)))
        goto oom;
    if (tfs__import_graph(mg, &m->graph, st) != TFS_OK) {
        tfs_status_prefix(st, "%s/saved_model.pb", dir);
        goto fail;
    }
    if (tfs__signatures_from_proto(mg, &m->sigs, &m->n_sigs, st) != TFS_OK) {
        tfs_status_prefix(st, "%s/saved_model.pb", dir);
        goto fail;
    }
    tfs_session_opts so = tfs_session_opts_default();
    so.checkpoint = (tfs_checkpoint_reader){bundle_source_read, m, model_file_read};
    so.device = TFS_DEVICE_SERVING;   /* the device tfserve's --device chose (runtime/device.h) */
    if (tfs_session_new(m->graph, &so, &m->session, st) != TFS_OK)
        goto fail;

    /* What will run: restore, init, signatures. Check them all before running anything. */
    const Tensorflow__SaverDef *saver = mg->saver_def;
    if (!(prefix = path_join(dir, "variables/variables")) || !(index = path_join(dir, "variables/variables.index")))
        goto oom;
    bool restore = saver && saver->restore_op_name && saver->restore_op_name[0] &&
                   saver->filename_tensor_name && saver->filename_tensor_name[0];
    if (restore) {
        if (!file_exists(index)) {
            TFS_ERR(st, TFS_NOT_FOUND, "%s: not found, but the model's saver restores its "
                    "variables from it", index);
            goto fail;
        }
        if (!(restore_op = op_name(saver->restore_op_name)))
            goto oom;
        if (feeds_add_string(&restore_feeds, saver->filename_tensor_name, prefix, st) != TFS_OK)
            goto fail;
        const char *targets[] = {restore_op};
        if (check_run(m->session, (const char *const[]){saver->filename_tensor_name}, 1, NULL, 0,
                      targets, 1, &missing, st) != TFS_OK) {
            tfs_status_prefix(st, "%s: restore op", dir);
            goto fail;
        }
    }
    if (asset_feeds(mg, dir, &assets, st) != TFS_OK)
        goto fail;
    init_op = find_init_op(mg, m->sigs, m->n_sigs);
    if (init_op) {
        const char **an = tfs_calloc((size_t)assets.n + 1, sizeof *an);
        if (!an)
            goto oom;
        for (int i = 0; i < assets.n; i++)
            an[i] = assets.v[i].name;
        enum tfs_code rc = check_run(m->session, an, assets.n, NULL, 0,
                                     (const char *const[]){init_op}, 1, &missing, st);
        tfs_free(an);
        if (rc != TFS_OK) {
            tfs_status_prefix(st, "%s: init op", dir);
            goto fail;
        }
    }
    if (check_signatures(m, &missing, st) != TFS_OK) {
        tfs_status_prefix(st, "%s", dir);
        goto fail;
    }
    if (missing.n > 0) {
        missing_ops_error(m->graph, &missing, st);
        tfs_status_prefix(st, "%s", dir);
        goto fail;
    }

    if (restore) {
        if (tfs_bundle_open(prefix, &m->source.bundle, st) != TFS_OK)
            goto fail;
        if (!(m->source.prefix = tfs_strdup(prefix)))
            goto oom;
        if (tfs_session_run(m->session, restore_feeds.v, restore_feeds.n, NULL, 0,
                            (const char *const[]){restore_op}, 1, NULL, st) != TFS_OK) {
            tfs_status_prefix(st, "restoring variables from %s", prefix);
            goto fail;
        }
        /* The bundle is not needed once restored; RestoreV2 would reopen it if run again. */
        tfs_bundle_free(m->source.bundle);
        m->source.bundle = NULL;
    }
    if (init_op && tfs_session_run(m->session, assets.v, assets.n, NULL, 0,
                                   (const char *const[]){init_op}, 1, NULL, st) != TFS_OK) {
        tfs_status_prefix(st, "%s: running init op '%s'", dir, init_op);
        goto fail;
    }
    if (!o.disable_graph_rewrites)
        rewrite_for_serving(m);
    TFS_LOG_INFO("savedmodel", "loaded %s: %d nodes, %d signatures%s", dir,
                 tfs_graph_node_count(m->graph), m->n_sigs, restore ? ", variables restored" : "");
    log_rewrites(m, o.disable_graph_rewrites);
    *out = m;
    m = NULL;
    goto done;
oom:
    TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory while loading", dir);
fail:
    tfs_savedmodel_free(m);
    m = NULL;
done:
    op_set_free(&missing);
    feeds_free(&restore_feeds);
    feeds_free(&assets);
    tfs_free(init_op);
    tfs_free(restore_op);
    tfs_free(prefix);
    tfs_free(index);
    if (sm)
        tensorflow__saved_model__free_unpacked(sm, NULL);
    return *out ? TFS_OK : (st ? st->code : TFS_INTERNAL);
}

void tfs_savedmodel_free(tfs_savedmodel *m)
{
    if (!m)
        return;
    tfs__serving_graph_clear(&m->serving);
    tfs_session_free(m->session);
    tfs_graph_unref(m->graph);
    tfs__signatures_free(m->sigs, m->n_sigs);
    tfs_bundle_free(m->source.bundle);
    tfs_free(m->source.prefix);
    tfs_free(m->dir);
    tfs_free(m);
}

int tfs_savedmodel_signature_count(const tfs_savedmodel *m) { return m->n_sigs; }

const tfs_signature *tfs_savedmodel_signature_at(const tfs_savedmodel *m, int i)
{
    return i >= 0 && i < m->n_sigs ? &m->sigs[i] : NULL;
}

const tfs_signature *tfs_savedmodel_signature(const tfs_savedmodel *m, const char *key)
{
    for (int i = 0; i < m->n_sigs; i++)
        if (!strcmp(m->sigs[i].key, key))
            return &m->sigs[i];
    return NULL;
}

tfs_session *tfs_savedmodel_session(const tfs_savedmodel *m) { return m->session; }

const tfs_rewrite_stats *tfs_savedmodel_rewrite_stats(const tfs_savedmodel *m)
{
    return &m->serving.stats;
}

/* Index of sig in m's signatures, or -1 when it is not one of them. */
static int sig_index(const tfs_savedmodel *m, const tfs_signature *sig)
{
    for (int i = 0; i < m->n_sigs; i++)
        if (sig == &m->sigs[i])
            return i;
    return -1;
}

bool tfs_savedmodel_signature_rewritten(const tfs_savedmodel *m, const tfs_signature *sig)
{
    int i = sig_index(m, sig);
    return i >= 0 && m->serving.session && m->serving.served[i];
}
const char  *tfs_savedmodel_dir(const tfs_savedmodel *m) { return m->dir; }

int64_t tfs_savedmodel_memory_bytes(const tfs_savedmodel *m)
{
    size_t total = tfs_session_variable_bytes(m->session);
    int n = tfs_graph_node_count(m->graph);
    for (int i = 0; i < n; i++) {
        if (strcmp(tfs_graph_node_op(m->graph, i), "Const") != 0)
            continue;
        const tfs_attr_value *v = tfs_graph_node_attr(m->graph, i, "value");
        if (v && v->kind == TFS_ATTR_TENSOR && v->tensor)
            total += v->tensor->nbytes;
    }
    /* The rewritten graph's constants share the variables' and the graph's tensors, but for the
     * ones a rewrite computed (folded results, batch-norm-folded filters). */
    if (m->serving.session)
        total += (size_t)m->serving.stats.constant_bytes;
    return (int64_t)total;
}

enum tfs_code tfs_savedmodel_run(const tfs_savedmodel *m, const tfs_signature *sig,
                                 const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                                 tfs_status *st)
{
    for (int i = 0; i < sig->n_outputs; i++)
        outputs[i] = NULL;
    if (sig->usable.code != TFS_OK)
        return TFS_ERR(st, sig->usable.code, "%s", sig->usable.msg);
    /* Small signatures (nearly all) use the stack: this runs for every request. */
    tfs_feed     fv_small[8];
    const char  *fetches_small[8];
    tfs_feed    *fv = sig->n_inputs < 8 ? memset(fv_small, 0, sizeof fv_small)
                                        : tfs_calloc((size_t)sig->n_inputs + 1, sizeof *fv);
    const char **fetches = sig->n_outputs < 8
                               ? fetches_small
                               : tfs_calloc((size_t)sig->n_outputs + 1, sizeof *fetches);
    enum tfs_code rc = TFS_OK;
    if (!fv || !fetches) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_inputs; i++) {
        int k = -1;
        for (int j = 0; j < sig->n_inputs && k < 0; j++)
            if (!strcmp(sig->inputs[j].alias, inputs[i].name))
                k = j;
        if (k < 0) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s' is not an input of signature '%s'",
                         inputs[i].name, sig->key);
            goto done;
        }
        /* No check against the signature's declared dtype: TensorFlow does not make one (some
         * exports declare DT_FLOAT for a string placeholder); the graph's Placeholder and kernels
         * reject what they cannot take. */
        fv[k] = (tfs_feed){sig->inputs[k].tensor_name, inputs[i].tensor};
    }
    for (int k = 0; k < sig->n_inputs; k++) {
        if (fv[k].tensor)
            continue;
        for (int d = 0; d < sig->n_defaults && !fv[k].tensor; d++)
            if (!strcmp(sig->default_names[d], sig->inputs[k].alias))
                fv[k] = (tfs_feed){sig->inputs[k].tensor_name, sig->defaults[d]};
        if (!fv[k].tensor) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Signature input alias: %s(feed name: %s) not "
                         "found in request and no default value provided", sig->inputs[k].alias,
                         sig->inputs[k].tensor_name);
            goto done;
        }
    }
    for (int i = 0; i < sig->n_outputs; i++)
        fetches[i] = sig->outputs[i].tensor_name;
    tfs_session *s = tfs_savedmodel_signature_rewritten(m, sig) ? m->serving.session : m->session;
    rc = tfs_session_run(s, fv, sig->n_inputs, fetches, sig->n_outputs, NULL, 0, outputs, st);
done:
    if (fv != fv_small)
        tfs_free(fv);
    if (fetches != fetches_small)
        tfs_free(fetches);
    return rc;
}
