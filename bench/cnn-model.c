/* tfserve-cnn-model DIR [REQUEST_JSON]: writes the small CNN of the batching benchmark as a SavedModel
 * version folder DIR (e.g. /tmp/cnn/1), with tfserve's own SavedModel writer:
 *
 *     x [-1,28,28,1] -> Conv2D 5x5x32 SAME + BiasAdd + Relu -> MaxPool 2x2/2
 *                    -> Conv2D 5x5x64 SAME + BiasAdd + Relu -> MaxPool 2x2/2   [-1,7,7,64]
 *                    -> Reshape [-1,3136] -> MatMul 1024 + BiasAdd + Relu
 *                    -> MatMul 10 + BiasAdd = logits -> Softmax = y [-1,10]
 *
 * Weights come from a fixed-seed PRNG (the same model every run, so figures are comparable) scaled
 * He-style (uniform in +-sqrt(6 / fan_in)), so activations keep their magnitude through the ReLUs
 * and the logits stay finite for inputs in [0,1]. Biases are small constants. The weights live in
 * variables (VariableV2 + Identity reads), as a TF-trained model's would. REQUEST_JSON, when given,
 * receives a REST predict body with one 28x28x1 instance (a smooth pattern in [0,1]), the
 * INPUT_JSON of bench/batching.sh. A benchmark helper, not a test: see bench/README.md. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

enum { N_VARS = 8 };

typedef struct cnn_var {
    const char *name;
    int         rank;
    int64_t     dims[4];
    int64_t     fan_in;   /* 0: a bias, filled with 0.01 */
} cnn_var;

static const cnn_var VARS[N_VARS] = {
    {"conv1/kernel", 4, {5, 5, 1, 32}, 5 * 5 * 1},
    {"conv1/bias", 1, {32}, 0},
    {"conv2/kernel", 4, {5, 5, 32, 64}, 5 * 5 * 32},
    {"conv2/bias", 1, {64}, 0},
    {"dense1/kernel", 2, {7 * 7 * 64, 1024}, 7 * 7 * 64},
    {"dense1/bias", 1, {1024}, 0},
    {"dense2/kernel", 2, {1024, 10}, 1024},
    {"dense2/bias", 1, {10}, 0},
};

/* splitmix64: tiny, fixed-seed, good enough for weights. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform_pm1(uint64_t *s)
{
    return (float)((double)(next_u64(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static void ints_attr(tfs_graph *g, int node, const char *name, int64_t a, int64_t b, int64_t c,
                      int64_t d)
{
    int64_t v[4] = {a, b, c, d};
    tfs_attr_value attr = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = 4, .i = v}};
    tfs_graph_set_attr(g, node, name, &attr);
}

/* A binary float op `name` = op(a, b). Returns the node id. */
static int op2(tfs_graph *g, const char *name, const char *op, const char *a, const char *b)
{
    int n = tfs_graph_add_node(g, name, op);
    tfs_graph_add_input(g, n, a);
    tfs_graph_add_input(g, n, b);
    tfs_graph_set_attr_type(g, n, "T", TFS_DTYPE_FLOAT);
    return n;
}

static int op1(tfs_graph *g, const char *name, const char *op, const char *a)
{
    int n = tfs_graph_add_node(g, name, op);
    tfs_graph_add_input(g, n, a);
    tfs_graph_set_attr_type(g, n, "T", TFS_DTYPE_FLOAT);
    return n;
}

static void variable(tfs_graph *g, const cnn_var *v)
{
    tfs_shape shape = {.rank = v->rank};
    memcpy(shape.dims, v->dims, (size_t)v->rank * sizeof v->dims[0]);
    char read[64];
    int n = tfs_graph_add_node(g, v->name, "VariableV2");
    tfs_graph_set_attr_type(g, n, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_shape(g, n, "shape", &shape);
    tfs_graph_set_attr_string(g, n, "container", "");
    tfs_graph_set_attr_string(g, n, "shared_name", "");
    snprintf(read, sizeof read, "%s/read", v->name);
    op1(g, read, "Identity", v->name);
}

/* conv -> bias -> relu -> 2x2 max pool, named prefix/... ; returns nothing, output "prefix/pool". */
static void conv_block(tfs_graph *g, const char *prefix, const char *input)
{
    char conv[64], kernel[64], bias[64], biased[64], relu[64], pool[64];
    snprintf(conv, sizeof conv, "%s/Conv2D", prefix);
    snprintf(kernel, sizeof kernel, "%s/kernel/read", prefix);
    snprintf(bias, sizeof bias, "%s/bias/read", prefix);
    snprintf(biased, sizeof biased, "%s/BiasAdd", prefix);
    snprintf(relu, sizeof relu, "%s/Relu", prefix);
    snprintf(pool, sizeof pool, "%s/pool", prefix);
    int c = op2(g, conv, "Conv2D", input, kernel);
    ints_attr(g, c, "strides", 1, 1, 1, 1);
    tfs_graph_set_attr_string(g, c, "padding", "SAME");
    tfs_graph_set_attr_string(g, c, "data_format", "NHWC");
    int b = op2(g, biased, "BiasAdd", conv, bias);
    tfs_graph_set_attr_string(g, b, "data_format", "NHWC");
    op1(g, relu, "Relu", biased);
    int p = op1(g, pool, "MaxPool", relu);
    ints_attr(g, p, "ksize", 1, 2, 2, 1);
    ints_attr(g, p, "strides", 1, 2, 2, 1);
    tfs_graph_set_attr_string(g, p, "padding", "VALID");
    tfs_graph_set_attr_string(g, p, "data_format", "NHWC");
}

static void dense(tfs_graph *g, const char *prefix, const char *input)
{
    char mm[64], kernel[64], bias[64], biased[64];
    snprintf(mm, sizeof mm, "%s/MatMul", prefix);
    snprintf(kernel, sizeof kernel, "%s/kernel/read", prefix);
    snprintf(bias, sizeof bias, "%s/bias/read", prefix);
    snprintf(biased, sizeof biased, "%s/BiasAdd", prefix);
    int m = op2(g, mm, "MatMul", input, kernel);
    tfs_graph_set_attr_bool(g, m, "transpose_a", false);
    tfs_graph_set_attr_bool(g, m, "transpose_b", false);
    int b = op2(g, biased, "BiasAdd", mm, bias);
    tfs_graph_set_attr_string(g, b, "data_format", "NHWC");
}

/* shape_tensor: the Reshape target [-1, 3136], owned by the caller. */
static enum tfs_code build(tfs_graph *g, tfs_tensor **shape_tensor, tfs_status *st)
{
    tfs_shape in_shape = {.rank = 4, .dims = {-1, 28, 28, 1}};
    int x = tfs_graph_add_node(g, "x", "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_shape(g, x, "shape", &in_shape);
    for (int i = 0; i < N_VARS; i++)
        variable(g, &VARS[i]);
    conv_block(g, "conv1", "x");
    conv_block(g, "conv2", "conv1/pool");

    int64_t two = 2;
    if (tfs_tensor_new(TFS_DTYPE_INT32, 1, &two, shape_tensor, st) != TFS_OK)
        return st->code;
    int32_t *sd = (*shape_tensor)->data;
    sd[0] = -1;
    sd[1] = 7 * 7 * 64;
    int c = tfs_graph_add_node(g, "flatten/shape", "Const");
    tfs_graph_set_attr_type(g, c, "dtype", TFS_DTYPE_INT32);
    tfs_graph_set_attr_tensor(g, c, "value", *shape_tensor);
    int r = op2(g, "flatten/Reshape", "Reshape", "conv2/pool", "flatten/shape");
    tfs_graph_set_attr_type(g, r, "Tshape", TFS_DTYPE_INT32);

    dense(g, "dense1", "flatten/Reshape");
    op1(g, "dense1/Relu", "Relu", "dense1/BiasAdd");
    dense(g, "dense2", "dense1/Relu");
    op1(g, "y", "Softmax", "dense2/BiasAdd");
    return tfs_graph_finalize(g, st);
}

static enum tfs_code fill_vars(tfs_tensor **t, tfs_status *st)
{
    uint64_t seed = 20261122;
    for (int i = 0; i < N_VARS; i++) {
        const cnn_var *v = &VARS[i];
        if (tfs_tensor_new(TFS_DTYPE_FLOAT, v->rank, v->dims, &t[i], st) != TFS_OK)
            return st->code;
        float *d = t[i]->data;
        int64_t n = 1;
        for (int k = 0; k < v->rank; k++)
            n *= v->dims[k];
        float scale = v->fan_in ? sqrtf(6.0f / (float)v->fan_in) : 0.0f;
        for (int64_t k = 0; k < n; k++)
            d[k] = v->fan_in ? scale * uniform_pm1(&seed) : 0.01f;
    }
    return TFS_OK;
}

/* {"instances": [28x28x1]} with values 0.5 + 0.5 sin(0.37 i + 0.61 j). */
static bool write_request(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fputs("{\"instances\": [[", f);
    for (int i = 0; i < 28; i++) {
        fputs(i ? ", [" : "[", f);
        for (int j = 0; j < 28; j++)
            fprintf(f, "%s[%.4f]", j ? ", " : "", 0.5 + 0.5 * sin(0.37 * i + 0.61 * j));
        fputs("]", f);
    }
    fputs("]]}\n", f);
    return fclose(f) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s DIR [REQUEST_JSON]\nWrites the batching benchmark's small CNN (28x28x1 -> 10) as "
                "a SavedModel version folder DIR, and a one-instance predict body to REQUEST_JSON.\n",
                argv[0]);
        return 2;
    }
    tfs_status st;
    tfs_graph *g = NULL;
    tfs_tensor *shape = NULL;
    tfs_tensor *t[N_VARS] = {NULL};
    int rc = 1;
    if (tfs_graph_new(&g, &st) != TFS_OK || build(g, &shape, &st) != TFS_OK ||
        fill_vars(t, &st) != TFS_OK)
        goto done;
    tfs_tensor_info in = {.alias = "x", .tensor_name = "x:0", .dtype = TFS_DTYPE_FLOAT,
                          .shape = {.rank = 4, .dims = {-1, 28, 28, 1}}};
    tfs_tensor_info out = {.alias = "y", .tensor_name = "y:0", .dtype = TFS_DTYPE_FLOAT,
                           .shape = {.rank = 2, .dims = {-1, 10}}};
    tfs_signature sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                         .n_inputs = 1, .inputs = &in, .n_outputs = 1, .outputs = &out};
    tfs_savedmodel_variable vars[N_VARS];
    for (int i = 0; i < N_VARS; i++)
        vars[i] = (tfs_savedmodel_variable){VARS[i].name, t[i]};
    if (tfs_savedmodel_write(argv[1], g, &sig, 1, vars, N_VARS, &st) != TFS_OK)
        goto done;
    printf("wrote %s\n", argv[1]);
    if (argc == 3 && !write_request(argv[2])) {
        perror(argv[2]);
        rc = 1;
        goto done_quiet;
    }
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "tfserve-cnn-model: %s: %s\n", tfs_code_name(st.code), st.msg);
done_quiet:
    for (int i = 0; i < N_VARS; i++)
        tfs_tensor_unref(t[i]);
    tfs_tensor_unref(shape);
    tfs_graph_unref(g);
    return rc;
}
