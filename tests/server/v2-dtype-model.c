/* v2-dtype-model DIR: writes, with tfserve's own SavedModel writer, a model whose signatures pass
 * one tensor of each KServe v2 datatype through an Identity, so that v2_rest_test.py can send and
 * read back every datatype: signature "BOOL" (x bool[-1] -> y), "INT8", ..., "BYTES". Its
 * serving_default takes two inputs, a int64[-1] and b double[-1], and gives a_out = a and
 * b_out = b, for requested-output and multi-input cases. */
#include <stdio.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

static const struct {
    const char    *name;   /* the v2 datatype, also the signature's key */
    enum tfs_dtype dtype;
} types[] = {
    {"BOOL", TFS_DTYPE_BOOL},     {"INT8", TFS_DTYPE_INT8},     {"INT16", TFS_DTYPE_INT16},
    {"INT32", TFS_DTYPE_INT32},   {"INT64", TFS_DTYPE_INT64},   {"UINT8", TFS_DTYPE_UINT8},
    {"UINT16", TFS_DTYPE_UINT16}, {"UINT32", TFS_DTYPE_UINT32}, {"UINT64", TFS_DTYPE_UINT64},
    {"FP16", TFS_DTYPE_HALF},     {"FP32", TFS_DTYPE_FLOAT},    {"FP64", TFS_DTYPE_DOUBLE},
    {"BYTES", TFS_DTYPE_STRING},
};
#define N_TYPES (int)(sizeof types / sizeof types[0])

/* Placeholder in_name of dt, shape [-1], and out_name = Identity(in_name). */
static void pass_through(tfs_graph *g, const char *in_name, const char *out_name, enum tfs_dtype dt)
{
    tfs_shape vec = {.rank = 1, .dims = {-1}};
    int       x = tfs_graph_add_node(g, in_name, "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", dt);
    tfs_graph_set_attr_shape(g, x, "shape", &vec);
    int y = tfs_graph_add_node(g, out_name, "Identity");
    tfs_graph_add_input(g, y, in_name);
    tfs_graph_set_attr_type(g, y, "T", dt);
}

static tfs_tensor_info info(const char *alias, const char *tensor, enum tfs_dtype dt)
{
    tfs_tensor_info ti = {.alias = (char *)alias, .tensor_name = (char *)tensor, .dtype = dt,
                          .shape = {.rank = 1, .dims = {-1}}};
    return ti;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\nWrites the v2 datatype test SavedModel into DIR.\n",
                argv[0]);
        return 2;
    }
    static char     names[N_TYPES][4][32];
    tfs_tensor_info ins[N_TYPES + 2], outs[N_TYPES + 2];
    tfs_signature   sigs[N_TYPES + 1];
    tfs_status      st;
    tfs_graph      *g = NULL;
    int             rc = 1;

    if (tfs_graph_new(&g, &st) != TFS_OK)
        goto done;
    for (int i = 0; i < N_TYPES; i++) {
        snprintf(names[i][0], 32, "x_%s", types[i].name);
        snprintf(names[i][1], 32, "y_%s", types[i].name);
        snprintf(names[i][2], 32, "x_%s:0", types[i].name);
        snprintf(names[i][3], 32, "y_%s:0", types[i].name);
        pass_through(g, names[i][0], names[i][1], types[i].dtype);
        ins[i] = info("x", names[i][2], types[i].dtype);
        outs[i] = info("y", names[i][3], types[i].dtype);
        sigs[i] = (tfs_signature){.key = (char *)types[i].name,
                                  .method_name = "tensorflow/serving/predict", .n_inputs = 1,
                                  .inputs = &ins[i], .n_outputs = 1, .outputs = &outs[i]};
    }
    pass_through(g, "a", "a_out", TFS_DTYPE_INT64);
    pass_through(g, "b", "b_out", TFS_DTYPE_DOUBLE);
    ins[N_TYPES] = info("a", "a:0", TFS_DTYPE_INT64);
    ins[N_TYPES + 1] = info("b", "b:0", TFS_DTYPE_DOUBLE);
    outs[N_TYPES] = info("a_out", "a_out:0", TFS_DTYPE_INT64);
    outs[N_TYPES + 1] = info("b_out", "b_out:0", TFS_DTYPE_DOUBLE);
    sigs[N_TYPES] = (tfs_signature){.key = "serving_default",
                                    .method_name = "tensorflow/serving/predict", .n_inputs = 2,
                                    .inputs = &ins[N_TYPES], .n_outputs = 2,
                                    .outputs = &outs[N_TYPES]};
    if (tfs_graph_finalize(g, &st) != TFS_OK ||
        tfs_savedmodel_write(argv[1], g, sigs, N_TYPES + 1, NULL, 0, &st) != TFS_OK)
        goto done;
    printf("wrote %s\n", argv[1]);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "v2-dtype-model: %s: %s\n", tfs_code_name(st.code), st.msg);
    tfs_graph_unref(g);
    return rc;
}
