/* Writing a SavedModel: a tfs_graph, signatures and variable values -> a version directory that
 * TensorFlow (and tfserve) can load.
 *
 * DESIGN. The graph is written as a TF1-style MetaGraphDef tagged "serve". For the variables, the
 * writer adds the saver ops TensorFlow's tf.compat.v1.train.Saver would: a filename Const
 * "save/Const", "save/RestoreV2" reading every variable's checkpoint key, one "save/Assign_N" per
 * variable, grouped by the NoOp "save/restore_all"; saver_def names them. Values go to
 * variables/variables.{index,data-00000-of-00001} through the TensorBundle writer.
 * The directory is written under a temporary name beside the target and renamed into place at
 * the end, so a loader polling the base path never sees a half-written version.
 * All protobuf-c messages are built from memory recorded in one list and freed together. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "savedmodel/bundle-impl.h"
#include "savedmodel/savedmodel-impl.h"

typedef struct exporter {
    void      **allocs;
    size_t      n_allocs, cap_allocs;
    Tensorflow__TensorProto **tensors;   /* from tfs__tensor_to_proto, freed with it */
    size_t      n_tensors;
    bool        oom;
} exporter;

static void *ex_alloc(exporter *ex, size_t n)
{
    if (ex->oom)
        return NULL;
    if (ex->n_allocs == ex->cap_allocs) {
        size_t cap = ex->cap_allocs ? ex->cap_allocs * 2 : 64;
        void **na = tfs_realloc(ex->allocs, cap * sizeof *na);
        if (!na) {
            ex->oom = true;
            return NULL;
        }
        ex->allocs = na;
        ex->cap_allocs = cap;
    }
    void *p = tfs_calloc(1, n ? n : 1);
    if (!p) {
        ex->oom = true;
        return NULL;
    }
    ex->allocs[ex->n_allocs++] = p;
    return p;
}

static char *ex_strdup(exporter *ex, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = ex_alloc(ex, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static Tensorflow__TensorProto *ex_tensor(exporter *ex, const tfs_tensor *t, tfs_status *st)
{
    Tensorflow__TensorProto *p = NULL;
    Tensorflow__TensorProto **nt = ex->oom ? NULL
                                   : tfs_realloc(ex->tensors, (ex->n_tensors + 1) * sizeof *nt);
    if (!nt) {
        ex->oom = true;
        return NULL;
    }
    ex->tensors = nt;
    if (tfs__tensor_to_proto(t, &p, st) != TFS_OK) {
        ex->oom = true;
        return NULL;
    }
    ex->tensors[ex->n_tensors++] = p;
    return p;
}

static void ex_free(exporter *ex)
{
    for (size_t i = 0; i < ex->n_allocs; i++)
        tfs_free(ex->allocs[i]);
    tfs_free(ex->allocs);
    for (size_t i = 0; i < ex->n_tensors; i++)
        tfs__tensor_proto_free(ex->tensors[i]);
    tfs_free(ex->tensors);
}

static Tensorflow__TensorShapeProto *ex_shape(exporter *ex, const tfs_shape *s)
{
    Tensorflow__TensorShapeProto *p = ex_alloc(ex, sizeof *p);
    if (!p)
        return NULL;
    tensorflow__tensor_shape_proto__init(p);
    if (s->rank < 0) {
        p->unknown_rank = 1;
        return p;
    }
    p->dim = ex_alloc(ex, (size_t)s->rank * sizeof *p->dim);
    for (int i = 0; p->dim && i < s->rank; i++) {
        Tensorflow__TensorShapeProto__Dim *d = ex_alloc(ex, sizeof *d);
        if (!d)
            return NULL;
        tensorflow__tensor_shape_proto__dim__init(d);
        d->size = s->dims[i];
        p->dim[p->n_dim++] = d;
    }
    return p;
}

static Tensorflow__AttrValue *ex_attr(exporter *ex, const tfs_attr_value *v, tfs_status *st)
{
    Tensorflow__AttrValue *a = ex_alloc(ex, sizeof *a);
    if (!a)
        return NULL;
    tensorflow__attr_value__init(a);
    switch (v->kind) {
    case TFS_ATTR_S:
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S;
        a->s.len = v->s.len;
        if ((a->s.data = ex_alloc(ex, v->s.len)) && v->s.len)
            memcpy(a->s.data, v->s.data, v->s.len);
        break;
    case TFS_ATTR_I:    a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I; a->i = v->i; break;
    case TFS_ATTR_F:    a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F; a->f = v->f; break;
    case TFS_ATTR_B:    a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B; a->b = v->b; break;
    case TFS_ATTR_TYPE:
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE;
        a->type = (Tensorflow__DataType)v->type;
        break;
    case TFS_ATTR_SHAPE:
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
        a->shape = ex_shape(ex, &v->shape);
        break;
    case TFS_ATTR_TENSOR:
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
        a->tensor = ex_tensor(ex, v->tensor, st);
        break;
    case TFS_ATTR_FUNC:
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_FUNC;
        if ((a->func = ex_alloc(ex, sizeof *a->func))) {
            tensorflow__name_attr_list__init(a->func);
            a->func->name = ex_strdup(ex, v->func);
        }
        break;
    case TFS_ATTR_LIST: {
        const tfs_attr_list *l = &v->list;
        Tensorflow__AttrValue__ListValue *lv = ex_alloc(ex, sizeof *lv);
        a->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST;
        a->list = lv;
        if (!lv)
            break;
        tensorflow__attr_value__list_value__init(lv);
        size_t n = (size_t)l->n;
        switch (l->kind) {
        case TFS_ATTR_I:
            if ((lv->i = ex_alloc(ex, n * sizeof *lv->i)))
                for (lv->n_i = 0; lv->n_i < n; lv->n_i++)
                    lv->i[lv->n_i] = l->i[lv->n_i];
            break;
        case TFS_ATTR_TYPE:
            if ((lv->type = ex_alloc(ex, n * sizeof *lv->type)))
                for (lv->n_type = 0; lv->n_type < n; lv->n_type++)
                    lv->type[lv->n_type] = (Tensorflow__DataType)l->type[lv->n_type];
            break;
        case TFS_ATTR_S:
            if ((lv->s = ex_alloc(ex, n * sizeof *lv->s)))
                for (lv->n_s = 0; lv->n_s < n; lv->n_s++) {
                    lv->s[lv->n_s].len = l->s[lv->n_s].len;
                    lv->s[lv->n_s].data = ex_alloc(ex, l->s[lv->n_s].len);
                    if (lv->s[lv->n_s].data && l->s[lv->n_s].len)
                        memcpy(lv->s[lv->n_s].data, l->s[lv->n_s].data, l->s[lv->n_s].len);
                }
            break;
        case TFS_ATTR_SHAPE:
            if ((lv->shape = ex_alloc(ex, n * sizeof *lv->shape)))
                for (lv->n_shape = 0; lv->n_shape < n; lv->n_shape++)
                    lv->shape[lv->n_shape] = ex_shape(ex, &l->shape[lv->n_shape]);
            break;
        case TFS_ATTR_NONE:
            break;
        default:
            TFS_ERR(st, TFS_UNIMPLEMENTED, "writing list attrs of this kind is not supported");
            ex->oom = true;
        }
        break;
    }
    default:
        break;
    }
    return a;
}

static Tensorflow__NodeDef *ex_node(exporter *ex, const char *name, const char *op)
{
    Tensorflow__NodeDef *n = ex_alloc(ex, sizeof *n);
    if (n) {
        tensorflow__node_def__init(n);
        n->name = ex_strdup(ex, name);
        n->op = ex_strdup(ex, op);
        n->device = ex_strdup(ex, "");
    }
    return n;
}

static void ex_input(exporter *ex, Tensorflow__NodeDef *n, const char *input, size_t cap)
{
    if (!n)
        return;
    if (!n->input)
        n->input = ex_alloc(ex, cap * sizeof *n->input);
    if (n->input && n->n_input < cap)
        n->input[n->n_input++] = ex_strdup(ex, input);
}

static void ex_set_attr(exporter *ex, Tensorflow__NodeDef *n, const char *key,
                        Tensorflow__AttrValue *v, size_t cap)
{
    if (!n || !v)
        return;
    if (!n->attr)
        n->attr = ex_alloc(ex, cap * sizeof *n->attr);
    Tensorflow__NodeDef__AttrEntry *e = ex_alloc(ex, sizeof *e);
    if (!n->attr || !e || n->n_attr >= cap)
        return;
    tensorflow__node_def__attr_entry__init(e);
    e->key = ex_strdup(ex, key);
    e->value = v;
    n->attr[n->n_attr++] = e;
}

static Tensorflow__AttrValue *attr_type(exporter *ex, enum tfs_dtype dt, tfs_status *st)
{
    tfs_attr_value v = {.kind = TFS_ATTR_TYPE, .type = dt};
    return ex_attr(ex, &v, st);
}

static Tensorflow__AttrValue *attr_bool(exporter *ex, bool b, tfs_status *st)
{
    tfs_attr_value v = {.kind = TFS_ATTR_B, .b = b};
    return ex_attr(ex, &v, st);
}

/* Const node holding tensor t. */
static Tensorflow__NodeDef *const_node(exporter *ex, const char *name, const tfs_tensor *t,
                                       tfs_status *st)
{
    Tensorflow__NodeDef *n = ex_node(ex, name, "Const");
    tfs_attr_value tv = {.kind = TFS_ATTR_TENSOR, .tensor = (tfs_tensor *)t};
    ex_set_attr(ex, n, "dtype", attr_type(ex, t->dtype, st), 2);
    ex_set_attr(ex, n, "value", ex_attr(ex, &tv, st), 2);
    return n;
}

/* Appends the saver nodes for vars; fills the SaverDef. */
static enum tfs_code add_saver(exporter *ex, Tensorflow__GraphDef *gd, size_t *n_node,
                               const tfs_graph *g, const tfs_savedmodel_variable *vars, int n_vars,
                               Tensorflow__SaverDef *saver, tfs_status *st)
{
    tfs_tensor *fname = NULL, *names = NULL, *slices = NULL;
    enum tfs_code rc = TFS_OK;
    int64_t nv = n_vars;
    if (tfs_tensor_new_scalar(TFS_DTYPE_STRING, &fname, st) != TFS_OK ||
        tfs_tensor_set_string(fname, 0, "model", 5, st) != TFS_OK ||
        tfs_tensor_new(TFS_DTYPE_STRING, 1, &nv, &names, st) != TFS_OK ||
        tfs_tensor_new(TFS_DTYPE_STRING, 1, &nv, &slices, st) != TFS_OK)
        goto fail;
    enum tfs_dtype *types = ex_alloc(ex, (size_t)n_vars * sizeof *types);
    if (!types)
        goto fail;
    for (int i = 0; i < n_vars; i++) {
        int id = tfs_graph_find_node(g, vars[i].name);
        if (id < 0 || strcmp(tfs_graph_node_op(g, id), "VariableV2") != 0) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "variable '%s' is not a VariableV2 node of the "
                         "graph", vars[i].name);
            goto fail;
        }
        if (tfs_tensor_set_string(names, i, vars[i].name, strlen(vars[i].name), st) != TFS_OK)
            goto fail;
        types[i] = vars[i].value->dtype;
    }
    gd->node[(*n_node)++] = const_node(ex, "save/Const", fname, st);
    gd->node[(*n_node)++] = const_node(ex, "save/RestoreV2/tensor_names", names, st);
    gd->node[(*n_node)++] = const_node(ex, "save/RestoreV2/shape_and_slices", slices, st);
    Tensorflow__NodeDef *restore = ex_node(ex, "save/RestoreV2", "RestoreV2");
    ex_input(ex, restore, "save/Const", 3);
    ex_input(ex, restore, "save/RestoreV2/tensor_names", 3);
    ex_input(ex, restore, "save/RestoreV2/shape_and_slices", 3);
    tfs_attr_value dtypes = {.kind = TFS_ATTR_LIST};
    dtypes.list.kind = TFS_ATTR_TYPE;
    dtypes.list.n = n_vars;
    dtypes.list.type = types;
    ex_set_attr(ex, restore, "dtypes", ex_attr(ex, &dtypes, st), 1);
    gd->node[(*n_node)++] = restore;
    Tensorflow__NodeDef *all = ex_node(ex, "save/restore_all", "NoOp");
    for (int i = 0; i < n_vars; i++) {
        char name[64], in[64], ctrl[72];
        snprintf(name, sizeof name, i ? "save/Assign_%d" : "save/Assign", i);
        snprintf(in, sizeof in, "save/RestoreV2:%d", i);
        snprintf(ctrl, sizeof ctrl, "^%s", name);
        Tensorflow__NodeDef *as = ex_node(ex, name, "Assign");
        ex_input(ex, as, vars[i].name, 2);
        ex_input(ex, as, in, 2);
        ex_set_attr(ex, as, "T", attr_type(ex, vars[i].value->dtype, st), 3);
        ex_set_attr(ex, as, "validate_shape", attr_bool(ex, true, st), 3);
        ex_set_attr(ex, as, "use_locking", attr_bool(ex, true, st), 3);
        gd->node[(*n_node)++] = as;
        ex_input(ex, all, ctrl, (size_t)n_vars);
    }
    gd->node[(*n_node)++] = all;
    saver->filename_tensor_name = ex_strdup(ex, "save/Const:0");
    saver->save_tensor_name = ex_strdup(ex, "");
    saver->restore_op_name = ex_strdup(ex, "save/restore_all");
    saver->max_to_keep = 5;
    saver->sharded = 1;
    saver->keep_checkpoint_every_n_hours = 10000.0f;
    saver->version = TENSORFLOW__SAVER_DEF__CHECKPOINT_FORMAT_VERSION__V2;
fail:
    tfs_tensor_unref(fname);
    tfs_tensor_unref(names);
    tfs_tensor_unref(slices);
    if (rc == TFS_OK && st && st->code != TFS_OK)
        rc = st->code;
    return rc;
}

static Tensorflow__TensorInfo *ex_tensor_info(exporter *ex, const tfs_tensor_info *ti)
{
    Tensorflow__TensorInfo *p = ex_alloc(ex, sizeof *p);
    if (!p)
        return NULL;
    tensorflow__tensor_info__init(p);
    p->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
    p->name = ex_strdup(ex, ti->tensor_name ? ti->tensor_name : "");
    p->dtype = (Tensorflow__DataType)ti->dtype;
    p->tensor_shape = ex_shape(ex, &ti->shape);
    return p;
}

static Tensorflow__SignatureDef *ex_signature(exporter *ex, const tfs_signature *s)
{
    Tensorflow__SignatureDef *p = ex_alloc(ex, sizeof *p);
    if (!p)
        return NULL;
    tensorflow__signature_def__init(p);
    p->method_name = ex_strdup(ex, s->method_name ? s->method_name : "tensorflow/serving/predict");
    p->inputs = ex_alloc(ex, (size_t)s->n_inputs * sizeof *p->inputs);
    for (int i = 0; p->inputs && i < s->n_inputs; i++) {
        Tensorflow__SignatureDef__InputsEntry *e = ex_alloc(ex, sizeof *e);
        if (!e)
            return NULL;
        tensorflow__signature_def__inputs_entry__init(e);
        e->key = ex_strdup(ex, s->inputs[i].alias);
        e->value = ex_tensor_info(ex, &s->inputs[i]);
        p->inputs[p->n_inputs++] = e;
    }
    p->outputs = ex_alloc(ex, (size_t)s->n_outputs * sizeof *p->outputs);
    for (int i = 0; p->outputs && i < s->n_outputs; i++) {
        Tensorflow__SignatureDef__OutputsEntry *e = ex_alloc(ex, sizeof *e);
        if (!e)
            return NULL;
        tensorflow__signature_def__outputs_entry__init(e);
        e->key = ex_strdup(ex, s->outputs[i].alias);
        e->value = ex_tensor_info(ex, &s->outputs[i]);
        p->outputs[p->n_outputs++] = e;
    }
    return p;
}

/* The GraphDef of g: one NodeDef per node (name, op, inputs as written, attrs), versions.producer
 * 1087, room for `extra` more nodes in gd->node. NULL when out of memory. */
static Tensorflow__GraphDef *ex_graph_def(exporter *ex, const tfs_graph *g, size_t extra,
                                          tfs_status *st)
{
    int n = tfs_graph_node_count(g);
    Tensorflow__GraphDef *gd = ex_alloc(ex, sizeof *gd);
    Tensorflow__VersionDef *ver = ex_alloc(ex, sizeof *ver);
    if (!gd || !ver)
        return NULL;
    tensorflow__graph_def__init(gd);
    if (!(gd->node = ex_alloc(ex, ((size_t)n + extra) * sizeof *gd->node)))
        return NULL;
    tensorflow__version_def__init(ver);
    ver->producer = 1087;
    gd->versions = ver;
    for (int i = 0; i < n; i++) {
        Tensorflow__NodeDef *nd = ex_node(ex, tfs_graph_node_name(g, i), tfs_graph_node_op(g, i));
        int ni = tfs_graph_node_input_count(g, i), na = tfs_graph_node_attr_count(g, i);
        for (int j = 0; j < ni; j++)
            ex_input(ex, nd, tfs_graph_node_input(g, i, j), (size_t)ni);
        for (int j = 0; j < na; j++)
            ex_set_attr(ex, nd, tfs_graph_node_attr_name(g, i, j),
                        ex_attr(ex, tfs_graph_node_attr_at(g, i, j), st), (size_t)na);
        gd->node[gd->n_node++] = nd;
    }
    return ex->oom ? NULL : gd;
}

enum tfs_code tfs__graph_def_pack(const tfs_graph *g, uint8_t **out, size_t *len, tfs_status *st)
{
    exporter ex = {0};
    enum tfs_code rc = TFS_OK;

    *out = NULL;
    *len = 0;
    tfs_status_clear(st);
    Tensorflow__GraphDef *gd = ex_graph_def(&ex, g, 0, st);
    size_t n = gd ? tensorflow__graph_def__get_packed_size(gd) : 0;
    uint8_t *buf = gd ? tfs_malloc(n ? n : 1) : NULL;
    if (!buf) {
        rc = (st && st->code != TFS_OK)
                 ? st->code
                 : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory serializing a GraphDef");
    } else {
        tensorflow__graph_def__pack(gd, buf);
        *out = buf;
        *len = n;
    }
    ex_free(&ex);
    return rc;
}

static void remove_tree(const char *dir)
{
    char path[4096];
    static const char *const files[] = {"saved_model.pb", "variables/variables.index",
                                        "variables/variables.data-00000-of-00001"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, files[i]) < (int)sizeof path)
            unlink(path);
    }
    if (snprintf(path, sizeof path, "%s/variables", dir) < (int)sizeof path)
        rmdir(path);
    rmdir(dir);
}

enum tfs_code tfs_savedmodel_write(const char *dir, const tfs_graph *graph,
                                   const tfs_signature *sigs, int n_sigs,
                                   const tfs_savedmodel_variable *vars, int n_vars, tfs_status *st)
{
    exporter ex = {0};
    uint8_t *bytes = NULL;
    tfs_bundle_writer *bw = NULL;
    char tmp[4096], path[4096 + 64];
    enum tfs_code rc = TFS_OK;
    bool made_tmp = false;
    tfs_status_clear(st);

    struct stat sb;
    if (stat(dir, &sb) == 0)
        return TFS_ERR(st, TFS_ALREADY_EXISTS, "%s already exists", dir);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%d", dir, (int)getpid()) >= sizeof tmp - 64)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "path too long: %s", dir);
    if (mkdir(tmp, 0755) != 0)
        return TFS_ERR(st, tfs_code_from_errno(errno), "%s: %s", tmp, strerror(errno));
    made_tmp = true;
    snprintf(path, sizeof path, "%s/variables", tmp);
    if (mkdir(path, 0755) != 0) {
        rc = TFS_ERR(st, tfs_code_from_errno(errno), "%s: %s", path, strerror(errno));
        goto done;
    }

    /* graph */
    Tensorflow__GraphDef *gd = ex_graph_def(&ex, graph, 5 + (size_t)n_vars, st);
    if (!gd)
        goto oom;
    Tensorflow__SaverDef *saver = NULL;
    if (n_vars > 0) {
        if (!(saver = ex_alloc(&ex, sizeof *saver)))
            goto oom;
        tensorflow__saver_def__init(saver);
        if ((rc = add_saver(&ex, gd, &gd->n_node, graph, vars, n_vars, saver, st)) != TFS_OK)
            goto done;
    }

    /* meta graph */
    Tensorflow__MetaGraphDef *mg = ex_alloc(&ex, sizeof *mg);
    Tensorflow__MetaGraphDef__MetaInfoDef *mi = ex_alloc(&ex, sizeof *mi);
    if (!mg || !mi)
        goto oom;
    tensorflow__meta_graph_def__init(mg);
    tensorflow__meta_graph_def__meta_info_def__init(mi);
    mi->tags = ex_alloc(&ex, sizeof *mi->tags);
    if (mi->tags) {
        mi->tags[0] = ex_strdup(&ex, "serve");
        mi->n_tags = 1;
    }
    mi->tensorflow_version = ex_strdup(&ex, "tfserve");
    mi->tensorflow_git_version = ex_strdup(&ex, "");
    mi->meta_graph_version = ex_strdup(&ex, "");
    mg->meta_info_def = mi;
    mg->graph_def = gd;
    mg->saver_def = saver;
    mg->signature_def = ex_alloc(&ex, (size_t)n_sigs * sizeof *mg->signature_def);
    for (int i = 0; mg->signature_def && i < n_sigs; i++) {
        Tensorflow__MetaGraphDef__SignatureDefEntry *e = ex_alloc(&ex, sizeof *e);
        if (!e)
            goto oom;
        tensorflow__meta_graph_def__signature_def_entry__init(e);
        e->key = ex_strdup(&ex, sigs[i].key);
        e->value = ex_signature(&ex, &sigs[i]);
        mg->signature_def[mg->n_signature_def++] = e;
    }
    Tensorflow__SavedModel sm;
    tensorflow__saved_model__init(&sm);
    sm.saved_model_schema_version = 1;
    sm.n_meta_graphs = 1;
    sm.meta_graphs = &mg;
    if (ex.oom)
        goto oom;

    size_t len = tensorflow__saved_model__get_packed_size(&sm);
    if (!(bytes = tfs_malloc(len ? len : 1)))
        goto oom;
    tensorflow__saved_model__pack(&sm, bytes);
    snprintf(path, sizeof path, "%s/saved_model.pb", tmp);
    if ((rc = tfs_atomic_file_write(path, bytes, len, st)) != TFS_OK)
        goto done;

    /* variables */
    snprintf(path, sizeof path, "%s/variables/variables", tmp);
    if (n_vars > 0) {
        if ((rc = tfs_bundle_writer_new(path, &bw, st)) != TFS_OK)
            goto done;
        for (int i = 0; i < n_vars; i++)
            if ((rc = tfs_bundle_writer_add(bw, vars[i].name, vars[i].value, st)) != TFS_OK)
                goto done;
        if ((rc = tfs_bundle_writer_finish(bw, st)) != TFS_OK)
            goto done;
    }
    /* Each file was synced with its folder as it was written; the folder rename is made durable
     * here, so a crash leaves either no version or a complete one. */
    if (rename(tmp, dir) != 0) {
        rc = TFS_ERR(st, tfs_code_from_errno(errno), "rename %s -> %s: %s", tmp, dir,
                     strerror(errno));
        goto done;
    }
    made_tmp = false;
    rc = tfs_dir_fsync_parent(dir, st);
    goto done;
oom:
    rc = (st && st->code != TFS_OK) ? st->code
                                    : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing %s", dir);
done:
    tfs_bundle_writer_free(bw);
    if (made_tmp)
        remove_tree(tmp);
    tfs_free(bytes);
    ex_free(&ex);
    return rc;
}
