/* Export (model.h tfs_model_export): the model's inference graph, built afresh from the layer
 * list with VariableV2 nodes of the same names as training's and no initializers, written with
 * the current weights as a TF1-style SavedModel (savedmodel/'s writer, which writes into a
 * temporary folder and renames it into place, so a polling server never sees half a model).
 * Signature serving_default: input "x"; outputs "probabilities" and "classes" (int64 argmax) for
 * classifiers, "predictions" for regression.
 */
#include "train/model-impl.h"

#include "savedmodel/savedmodel.h"

#include <stdio.h>
#include <string.h>

static void name_of(tfs_graph *g, tfs_out o, char *buf, size_t n)
{
    tfs_build_tensor_name(g, o, buf, n);
}

enum tfs_code tfs_model_export(tfs_model *m, const char *dir, tfs_status *st)
{
    const tfs_model_spec *spec = tfs__model_spec(m);
    tfs_layer *layers = tfs_calloc((size_t)spec->n_layers, sizeof *layers);
    tfs_build_ctx b = {.no_init = true};
    tfs_savedmodel_variable *vars = NULL;
    int n_vars = 0;
    enum tfs_code rc;
    if (!layers) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory exporting the model");
        goto done;
    }
    if ((rc = tfs__layers_plan(spec, layers, st)) != TFS_OK || (rc = tfs_graph_new(&b.g, st)) != TFS_OK)
        goto done;
    if ((rc = tfs__layers_create_variables(&b, spec, layers, st)) != TFS_OK)
        goto done;
    tfs_graph *g = b.g;
    tfs_shape xs = {.rank = 1 + spec->input_rank};
    xs.dims[0] = -1;
    memcpy(xs.dims + 1, spec->input_shape, (size_t)spec->input_rank * sizeof(int64_t));
    tfs_out x = tfs_build_placeholder(g, "x", spec->input_dtype, &xs);
    tfs_out logits;
    tfs_out out = tfs__layers_forward(&b, spec, layers, x, false, &logits);
    const tfs_layer *last = &layers[spec->n_layers - 1];
    tfs_tensor_info outs[2];
    memset(outs, 0, sizeof outs);
    char names[2][256];
    int n_out = 0;
    tfs_shape ps = {.rank = 1 + last->out_rank};
    ps.dims[0] = -1;
    memcpy(ps.dims + 1, last->out_shape, (size_t)last->out_rank * sizeof(int64_t));
    if (spec->loss == TFS_LOSS_MSE) {
        tfs_out p = tfs_build_op(g, "Identity", "predictions", 1, &out);
        name_of(g, p, names[0], sizeof names[0]);
        outs[n_out++] = (tfs_tensor_info){.alias = "predictions", .tensor_name = names[0],
                                          .dtype = TFS_DTYPE_FLOAT, .shape = ps};
    } else {
        const char *act = spec->loss == TFS_LOSS_SIGMOID_XENT ? "Sigmoid" : "Softmax";
        tfs_out p = tfs_build_op(g, act, "probabilities", 1, &logits);
        name_of(g, p, names[0], sizeof names[0]);
        outs[n_out++] = (tfs_tensor_info){.alias = "probabilities", .tensor_name = names[0],
                                          .dtype = TFS_DTYPE_FLOAT, .shape = ps};
        if (spec->loss != TFS_LOSS_SIGMOID_XENT) {
            tfs_out in[2] = {logits, tfs_build_scalar(g, TFS_DTYPE_INT32, -1)};
            tfs_out c = tfs_build_op(g, "ArgMax", "classes", 2, in);
            if (tfs_out_ok(c))
                tfs_graph_set_attr_type(g, c.node, "output_type", TFS_DTYPE_INT64);
            name_of(g, c, names[1], sizeof names[1]);
            outs[n_out++] = (tfs_tensor_info){.alias = "classes", .tensor_name = names[1],
                                              .dtype = TFS_DTYPE_INT64,
                                              .shape = {.rank = 1, .dims = {-1}}};
        }
    }
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
    tfs_tensor_info in = {.alias = "x", .tensor_name = xname, .dtype = spec->input_dtype,
                          .shape = xs};
    tfs_signature sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                         .n_inputs = 1, .inputs = &in, .n_outputs = n_out, .outputs = outs};
    vars = tfs_calloc((size_t)b.n_vars + 1, sizeof *vars);
    if (!vars) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory exporting the model");
        goto done;
    }
    for (int i = 0; i < b.n_vars; i++) {
        const char *vn = tfs_graph_node_name(g, b.vars[i].var.node);
        int k = tfs_model_variable_find(m, vn);
        if (k < 0) {
            rc = TFS_ERR(st, TFS_INTERNAL, "export: the model has no variable '%s'", vn);
            goto done;
        }
        vars[n_vars].name = vn;
        if ((rc = tfs_model_variable_value(m, k, &vars[n_vars].value, st)) != TFS_OK)
            goto done;
        n_vars++;
    }
    rc = tfs_savedmodel_write(dir, g, &sig, 1, vars, n_vars, st);
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
