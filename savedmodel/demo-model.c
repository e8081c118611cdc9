/* tfserve-demo-model DIR: writes the bundled demo model, half_plus_two (y = 0.5 * x + 2.0 with the
 * two constants held in variables), into DIR with tfserve's own SavedModel writer. The build runs it
 * to produce the model the README's first command serves. */
#include <stdio.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

static void variable(tfs_graph *g, const char *name)
{
    tfs_shape scalar = {.rank = 0};
    char read[64];
    int v = tfs_graph_add_node(g, name, "VariableV2");
    tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_shape(g, v, "shape", &scalar);
    tfs_graph_set_attr_string(g, v, "container", "");
    tfs_graph_set_attr_string(g, v, "shared_name", "");
    snprintf(read, sizeof read, "%s/read", name);
    int r = tfs_graph_add_node(g, read, "Identity");
    tfs_graph_add_input(g, r, name);
    tfs_graph_set_attr_type(g, r, "T", TFS_DTYPE_FLOAT);
}

static enum tfs_code build(tfs_graph *g, tfs_status *st)
{
    tfs_shape vec = {.rank = 1, .dims = {-1}};
    int x = tfs_graph_add_node(g, "x", "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_shape(g, x, "shape", &vec);
    variable(g, "a");
    variable(g, "b");
    int mul = tfs_graph_add_node(g, "mul", "Mul");
    tfs_graph_add_input(g, mul, "a/read");
    tfs_graph_add_input(g, mul, "x");
    tfs_graph_set_attr_type(g, mul, "T", TFS_DTYPE_FLOAT);
    int y = tfs_graph_add_node(g, "y", "AddV2");
    tfs_graph_add_input(g, y, "mul");
    tfs_graph_add_input(g, y, "b/read");
    tfs_graph_set_attr_type(g, y, "T", TFS_DTYPE_FLOAT);
    return tfs_graph_finalize(g, st);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\nWrites the half_plus_two demo SavedModel into DIR.\n", argv[0]);
        return 2;
    }
    tfs_status st;
    tfs_graph *g = NULL;
    tfs_tensor *a = NULL, *b = NULL;
    int rc = 1;
    if (tfs_graph_new(&g, &st) != TFS_OK || build(g, &st) != TFS_OK ||
        tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &a, &st) != TFS_OK ||
        tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &b, &st) != TFS_OK)
        goto done;
    *(float *)a->data = 0.5f;
    *(float *)b->data = 2.0f;
    tfs_tensor_info in = {.alias = "x", .tensor_name = "x:0", .dtype = TFS_DTYPE_FLOAT,
                          .shape = {.rank = 1, .dims = {-1}}};
    tfs_tensor_info out = {.alias = "y", .tensor_name = "y:0", .dtype = TFS_DTYPE_FLOAT,
                           .shape = {.rank = 1, .dims = {-1}}};
    tfs_signature sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                         .n_inputs = 1, .inputs = &in, .n_outputs = 1, .outputs = &out};
    tfs_savedmodel_variable vars[] = {{"a", a}, {"b", b}};
    if (tfs_savedmodel_write(argv[1], g, &sig, 1, vars, 2, &st) != TFS_OK)
        goto done;
    printf("wrote %s\n", argv[1]);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "tfserve-demo-model: %s: %s\n", tfs_code_name(st.code), st.msg);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_graph_unref(g);
    return rc;
}
