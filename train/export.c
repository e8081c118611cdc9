/* Export (model.h tfs_model_export): the model's inference graph, built afresh from the layer
 * list with VariableV2 nodes of the same names as training's and no initializers, written with
 * the current weights as a TF1-style SavedModel (savedmodel/'s writer, which writes into a
 * temporary folder and renames it into place, so a polling server never sees half a model).
 * Signature serving_default: input "x"; outputs "probabilities" and "classes" (int64 argmax) for
 * classifiers, "predictions" for regression. Softmax classifiers with float inputs also get
 * "classify" (TensorFlow Serving's Classify API and REST :classify): serialized tf.Examples whose
 * float feature "x" holds one input, parsed in the graph by ParseExample as Estimator exports do,
 * -> "classes" (the class indices as strings, [batch, classes]) and "scores" (probabilities).
 */
#include "train/model-impl.h"

#include "savedmodel/savedmodel.h"

#include <stdio.h>
#include <string.h>

static void name_of(tfs_graph *g, tfs_out o, char *buf, size_t n)
{
    tfs_build_tensor_name(g, o, buf, n);
}

static tfs_tensor *string_tensor(int rank, const int64_t *dims, int n, tfs_status *st)
{
    tfs_tensor *t = NULL;
    if (tfs_tensor_new(TFS_DTYPE_STRING, rank, dims, &t, st) != TFS_OK)
        return NULL;
    for (int i = 0; i < n; i++) {
        char buf[24];
        int  len = snprintf(buf, sizeof buf, "%d", i);
        if (tfs_tensor_set_string(t, i, buf, (size_t)len, st) != TFS_OK) {
            tfs_tensor_unref(t);
            return NULL;
        }
    }
    return t;
}

/* The classify signature's nodes (see the file comment); names into in_name and the outputs'
 * into out_names[0] ("classes") and [1] ("scores"). */
static enum tfs_code build_classify(tfs_build_ctx *b, const tfs_model_spec *spec, tfs_layer *layers,
                                    int64_t classes, char *in_name, char (*out_names)[256],
                                    tfs_status *st)
{
    tfs_graph    *g = b->g;
    enum tfs_code rc = TFS_OK;
    tfs_tensor   *key = NULL, *dflt = NULL, *names = NULL, *labels = NULL;
    int64_t       zero = 0;
    tfs_build_scope_push(g, "classify");
    tfs_out ser =
        tfs_build_placeholder(g, "input_example_tensor", TFS_DTYPE_STRING, &(tfs_shape){1, {-1}});
    if ((rc = tfs_tensor_new_scalar(TFS_DTYPE_STRING, &key, st)) != TFS_OK ||
        (rc = tfs_tensor_set_string(key, 0, "x", 1, st)) != TFS_OK ||
        (rc = tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &zero, &dflt, st)) != TFS_OK ||
        (rc = tfs_tensor_new(TFS_DTYPE_STRING, 1, &zero, &names, st)) != TFS_OK)
        goto done;
    if (!(labels = string_tensor(2, (int64_t[]){1, classes}, (int)classes, st))) {
        rc = st ? st->code : TFS_RESOURCE_EXHAUSTED;
        goto done;
    }
    tfs_out in[4] = {ser, tfs_build_const(g, "names", names), tfs_build_const(g, "key", key),
                     tfs_build_const(g, "default", dflt)};
    tfs_out parse = tfs_build_op(g, "ParseExample", NULL, 4, in);
    if (tfs_out_ok(parse)) {
        tfs_attr_value types = {.kind = TFS_ATTR_LIST}, shapes = {.kind = TFS_ATTR_LIST},
                       none = {.kind = TFS_ATTR_LIST};
        enum tfs_dtype f32 = TFS_DTYPE_FLOAT;
        tfs_shape      shape = {.rank = spec->input_rank};
        memcpy(shape.dims, spec->input_shape, (size_t)spec->input_rank * sizeof(int64_t));
        types.list = (tfs_attr_list){.kind = TFS_ATTR_TYPE, .n = 1, .type = &f32};
        shapes.list = (tfs_attr_list){.kind = TFS_ATTR_SHAPE, .n = 1, .shape = &shape};
        tfs_graph_set_attr_int(g, parse.node, "Nsparse", 0);
        tfs_graph_set_attr_int(g, parse.node, "Ndense", 1);
        tfs_graph_set_attr(g, parse.node, "sparse_types", &none);
        tfs_graph_set_attr(g, parse.node, "Tdense", &types);
        tfs_graph_set_attr(g, parse.node, "dense_shapes", &shapes);
    }
    tfs_build_scope_pop(g);
    tfs_out logits;
    tfs__layers_forward(b, spec, layers, parse, false, &logits);
    tfs_build_scope_push(g, "classify");
    tfs_out scores = tfs_build_op(g, "Softmax", "scores", 1, &logits);
    tfs_out batch_in[3] = {tfs_build_shape(g, scores), tfs_build_ints(g, 1, (int64_t[]){0}),
                           tfs_build_ints(g, 1, (int64_t[]){1})};
    tfs_out batch = tfs_build_op(g, "Slice", NULL, 3, batch_in);
    tfs_out mult_in[3] = {batch, tfs_build_ints(g, 1, (int64_t[]){1}),
                          tfs_build_scalar(g, TFS_DTYPE_INT32, 0)};
    tfs_out mult = tfs_build_op(g, "ConcatV2", NULL, 3, mult_in);
    tfs_out tile_in[2] = {tfs_build_const(g, "class_names", labels), mult};
    tfs_out cls = tfs_build_op(g, "Tile", "classes", 2, tile_in);
    tfs_build_scope_pop(g);
    tfs_build_tensor_name(g, ser, in_name, 256);
    tfs_build_tensor_name(g, cls, out_names[0], 256);
    tfs_build_tensor_name(g, scores, out_names[1], 256);
    rc = tfs_graph_status(g, st);
done:
    tfs_tensor_unref(key);
    tfs_tensor_unref(dflt);
    tfs_tensor_unref(names);
    tfs_tensor_unref(labels);
    return rc;
}

enum tfs_code tfs_model_export(tfs_model *m, const char *dir, tfs_status *st)
{
    const tfs_model_spec    *spec = tfs__model_spec(m);
    tfs_layer               *layers = tfs_calloc((size_t)spec->n_layers, sizeof *layers);
    tfs_build_ctx            b = {.no_init = true};
    tfs_savedmodel_variable *vars = NULL;
    int                      n_vars = 0;
    enum tfs_code            rc;
    if (!layers) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory exporting the model");
        goto done;
    }
    if ((rc = tfs__layers_plan(spec, layers, st)) != TFS_OK ||
        (rc = tfs_graph_new(&b.g, st)) != TFS_OK)
        goto done;
    if ((rc = tfs__layers_create_variables(&b, spec, layers, st)) != TFS_OK)
        goto done;
    tfs_graph *g = b.g;
    tfs_shape  xs = {.rank = 1 + spec->input_rank};
    xs.dims[0] = -1;
    memcpy(xs.dims + 1, spec->input_shape, (size_t)spec->input_rank * sizeof(int64_t));
    tfs_out          x = tfs_build_placeholder(g, "x", spec->input_dtype, &xs);
    tfs_out          logits;
    tfs_out          out = tfs__layers_forward(&b, spec, layers, x, false, &logits);
    const tfs_layer *last = &layers[spec->n_layers - 1];
    tfs_tensor_info  outs[2];
    memset(outs, 0, sizeof outs);
    char      names[2][256];
    int       n_out = 0;
    tfs_shape ps = {.rank = 1 + last->out_rank};
    ps.dims[0] = -1;
    memcpy(ps.dims + 1, last->out_shape, (size_t)last->out_rank * sizeof(int64_t));
    if (spec->loss == TFS_LOSS_MSE) {
        tfs_out p = tfs_build_op(g, "Identity", "predictions", 1, &out);
        name_of(g, p, names[0], sizeof names[0]);
        outs[n_out++] = (tfs_tensor_info){
            .alias = "predictions", .tensor_name = names[0], .dtype = TFS_DTYPE_FLOAT, .shape = ps};
    } else {
        const char *act = spec->loss == TFS_LOSS_SIGMOID_XENT ? "Sigmoid" : "Softmax";
        tfs_out     p = tfs_build_op(g, act, "probabilities", 1, &logits);
        name_of(g, p, names[0], sizeof names[0]);
        outs[n_out++] = (tfs_tensor_info){.alias = "probabilities",
                                          .tensor_name = names[0],
                                          .dtype = TFS_DTYPE_FLOAT,
                                          .shape = ps};
        if (spec->loss != TFS_LOSS_SIGMOID_XENT) {
            tfs_out in[2] = {logits, tfs_build_scalar(g, TFS_DTYPE_INT32, -1)};
            tfs_out c = tfs_build_op(g, "ArgMax", "classes", 2, in);
            if (tfs_out_ok(c))
                tfs_graph_set_attr_type(g, c.node, "output_type", TFS_DTYPE_INT64);
            name_of(g, c, names[1], sizeof names[1]);
            outs[n_out++] = (tfs_tensor_info){.alias = "classes",
                                              .tensor_name = names[1],
                                              .dtype = TFS_DTYPE_INT64,
                                              .shape = {.rank = 1, .dims = {-1}}};
        }
    }
    bool classify =
        spec->loss == TFS_LOSS_SPARSE_SOFTMAX_XENT || spec->loss == TFS_LOSS_SOFTMAX_XENT;
    classify = classify && spec->input_dtype == TFS_DTYPE_FLOAT;
    char cls_in[256], cls_out[2][256];
    if (classify &&
        (rc = build_classify(&b, spec, layers, last->out_shape[0], cls_in, cls_out, st)) != TFS_OK)
        goto done;
    if ((rc = tfs_graph_finalize(g, st)) != TFS_OK)
        goto done;
    /* Outputs sorted by alias, as tfs_signature requires. */
    if (n_out == 2 && strcmp(outs[0].alias, outs[1].alias) > 0) {
        tfs_tensor_info t = outs[0];
        outs[0] = outs[1];
        outs[1] = t;
    }
    char xname[256];
    name_of(g, x, xname, sizeof xname);
    tfs_tensor_info in = {
        .alias = "x", .tensor_name = xname, .dtype = spec->input_dtype, .shape = xs};
    tfs_tensor_info cin = {.alias = "inputs",
                           .tensor_name = cls_in,
                           .dtype = TFS_DTYPE_STRING,
                           .shape = {.rank = 1, .dims = {-1}}};
    tfs_shape       cs = {.rank = 2, .dims = {-1, last->out_shape[0]}};
    tfs_tensor_info couts[2] = {
        {.alias = "classes", .tensor_name = cls_out[0], .dtype = TFS_DTYPE_STRING, .shape = cs},
        {.alias = "scores", .tensor_name = cls_out[1], .dtype = TFS_DTYPE_FLOAT, .shape = cs}};
    /* Sorted by key, as tfs_savedmodel_write takes them. */
    tfs_signature sigs[2] = {{.key = "classify",
                              .method_name = "tensorflow/serving/classify",
                              .n_inputs = 1,
                              .inputs = &cin,
                              .n_outputs = 2,
                              .outputs = couts},
                             {.key = "serving_default",
                              .method_name = "tensorflow/serving/predict",
                              .n_inputs = 1,
                              .inputs = &in,
                              .n_outputs = n_out,
                              .outputs = outs}};
    vars = tfs_calloc((size_t)b.n_vars + 1, sizeof *vars);
    if (!vars) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory exporting the model");
        goto done;
    }
    for (int i = 0; i < b.n_vars; i++) {
        const char *vn = tfs_graph_node_name(g, b.vars[i].var.node);
        int         k = tfs_model_variable_find(m, vn);
        if (k < 0) {
            rc = TFS_ERR(st, TFS_INTERNAL, "export: the model has no variable '%s'", vn);
            goto done;
        }
        vars[n_vars].name = vn;
        if ((rc = tfs_model_variable_value(m, k, &vars[n_vars].value, st)) != TFS_OK)
            goto done;
        n_vars++;
    }
    rc = classify ? tfs_savedmodel_write(dir, g, sigs, 2, vars, n_vars, st)
                  : tfs_savedmodel_write(dir, g, &sigs[1], 1, vars, n_vars, st);
done:
    for (int i = 0; i < n_vars; i++)
        tfs_tensor_unref(vars[i].value);
    tfs_free(vars);
    tfs_graph_unref(b.g);
    tfs__build_ctx_free(&b);
    tfs_free(layers);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "exporting to %s", dir);
    return rc;
}
