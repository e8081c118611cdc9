/* The layers and models of tfserve-infer-bench (infer.h): each layer adds the nodes a TensorFlow
 * graph of that layer has (Conv2D, BiasAdd, FusedBatchNormV3, Relu, MaxPool, MatMul, AddV2, Mean),
 * draws its weights from the builder's seeded generator, and counts its multiply-adds.
 *
 * Weights: conv and dense kernels He-uniform (+-sqrt(6 / fan_in)), biases in +-0.1, BatchNorm
 * scale in the caller's range, offset in +-0.1, mean in +-0.1, variance in [0.5, 1.5): random
 * but in a range where activations neither vanish nor blow up through 50 layers, so the output
 * comparison with the peers is meaningful. The seed is fixed per model, so every run and every
 * framework sees the same numbers.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/infer/infer.h"

/* splitmix64: tiny, seeded, good enough for weights. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s, float lo, float hi)
{
    double u = (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

/* A new weight "<key><suffix>" of the given shape, uniform in [lo, hi), recorded in b and
 * added to the graph as a Const named "<scope>/<suffix without the dot>". */
static tfs_out weight(tfs_ib_builder *b, const char *key, const char *suffix, int rank,
                      const int64_t *dims, float lo, float hi)
{
    tfs_status st;
    tfs_tensor *t = NULL;
    if (b->failed)
        return TFS_OUT_NONE;
    if (b->n_w == b->cap_w) {
        int cap = b->cap_w ? 2 * b->cap_w : 64;
        tfs_ib_weight *w = tfs_realloc(b->w, (size_t)cap * sizeof *w);
        if (!w)
            goto fail;
        b->w = w;
        b->cap_w = cap;
    }
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st) != TFS_OK)
        goto fail;
    float *v = t->data;
    for (int64_t i = 0; i < t->nelem; i++)
        v[i] = uniform(&b->seed, lo, hi);
    tfs_ib_weight *w = &b->w[b->n_w++];
    snprintf(w->key, sizeof w->key, "%s%s", key, suffix);
    w->t = t;
    return tfs_build_const(b->g, suffix + 1, t);
fail:
    b->failed = true;
    tfs_graph_set_error(b->g, TFS_RESOURCE_EXHAUSTED, "out of memory for weight %s%s", key,
                        suffix);
    return TFS_OUT_NONE;
}

static void ints_attr(tfs_graph *g, tfs_out o, const char *name, int n, int64_t *v)
{
    tfs_attr_value a = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = n, .i = v}};
    tfs_graph_set_attr(g, o.node, name, &a);
}

/* TF's padding attrs for `pad` pixels on each side, as PyTorch pads, of a k x k / stride window
 * over `in` pixels. SAME pads (k - 1) / 2 before when the output is in / stride; otherwise
 * EXPLICIT. Returns the output size. */
static int64_t set_padding(tfs_graph *g, tfs_out o, int64_t in, int k, int stride, int pad)
{
    int64_t out = (in + 2 * pad - k) / stride + 1;
    int64_t total = (out - 1) * stride + k - in;
    if (pad == 0) {
        tfs_graph_set_attr_string(g, o.node, "padding", "VALID");
    } else if (total == 2 * pad && out == (in + stride - 1) / stride) {
        tfs_graph_set_attr_string(g, o.node, "padding", "SAME");
    } else {
        int64_t p[8] = {0, 0, pad, pad, pad, pad, 0, 0};
        tfs_graph_set_attr_string(g, o.node, "padding", "EXPLICIT");
        ints_attr(g, o, "explicit_paddings", 8, p);
    }
    return out;
}

tfs_ib_act tfs_ib_conv(tfs_ib_builder *b, tfs_ib_act x, const char *key, int k, int stride,
                       int pad, int64_t cout)
{
    float lim = sqrtf(6.0f / (float)(k * k * x.c));
    tfs_build_scope_push(b->g, key);
    tfs_out in[2] = {x.out, weight(b, key, ".weight", 4, (int64_t[]){k, k, x.c, cout}, -lim, lim)};
    tfs_out y = tfs_build_op(b->g, "Conv2D", NULL, 2, in);
    tfs_build_scope_pop(b->g);
    int64_t s[4] = {1, stride, stride, 1};
    ints_attr(b->g, y, "strides", 4, s);
    tfs_graph_set_attr_string(b->g, y.node, "data_format", "NHWC");
    tfs_ib_act r = {y, set_padding(b->g, y, x.h, k, stride, pad), 0, cout};
    r.w = (x.w + 2 * pad - k) / stride + 1;
    b->macs += (double)r.h * (double)r.w * (double)cout * k * k * (double)x.c;
    return r;
}

tfs_ib_act tfs_ib_bias(tfs_ib_builder *b, tfs_ib_act x, const char *key)
{
    tfs_build_scope_push(b->g, key);
    tfs_out bias = weight(b, key, ".bias", 1, (int64_t[]){x.c}, -0.1f, 0.1f);
    x.out = tfs_build_binary(b->g, "BiasAdd", x.out, bias);
    tfs_build_scope_pop(b->g);
    return x;
}

tfs_ib_act tfs_ib_batch_norm(tfs_ib_builder *b, tfs_ib_act x, const char *key, float gamma_lo,
                             float gamma_hi)
{
    int64_t c[1] = {x.c};
    tfs_build_scope_push(b->g, key);
    tfs_out in[5] = {x.out, weight(b, key, ".weight", 1, c, gamma_lo, gamma_hi),
                     weight(b, key, ".bias", 1, c, -0.1f, 0.1f),
                     weight(b, key, ".running_mean", 1, c, -0.1f, 0.1f),
                     weight(b, key, ".running_var", 1, c, 0.5f, 1.5f)};
    x.out = tfs_build_op(b->g, "FusedBatchNormV3", NULL, 5, in);
    tfs_build_scope_pop(b->g);
    if (tfs_out_ok(x.out)) {
        tfs_graph_set_attr_float(b->g, x.out.node, "epsilon", 1e-5f);
        tfs_graph_set_attr_bool(b->g, x.out.node, "is_training", false);
        tfs_graph_set_attr_string(b->g, x.out.node, "data_format", "NHWC");
    }
    return x;
}

tfs_ib_act tfs_ib_relu(tfs_ib_builder *b, tfs_ib_act x)
{
    x.out = tfs_build_unary(b->g, "Relu", x.out);
    return x;
}

tfs_ib_act tfs_ib_max_pool(tfs_ib_builder *b, tfs_ib_act x, int k, int stride, int pad)
{
    tfs_out y = tfs_build_op(b->g, "MaxPool", NULL, 1, &x.out);
    if (!tfs_out_ok(y))
        return (tfs_ib_act){y, 0, 0, 0};
    int64_t ks[4] = {1, k, k, 1}, s[4] = {1, stride, stride, 1};
    ints_attr(b->g, y, "ksize", 4, ks);
    ints_attr(b->g, y, "strides", 4, s);
    tfs_graph_set_attr_string(b->g, y.node, "data_format", "NHWC");
    tfs_ib_act r = {y, set_padding(b->g, y, x.h, k, stride, pad), 0, x.c};
    r.w = (x.w + 2 * pad - k) / stride + 1;
    return r;
}

tfs_ib_act tfs_ib_add(tfs_ib_builder *b, tfs_ib_act x, tfs_ib_act y)
{
    x.out = tfs_build_binary(b->g, "AddV2", x.out, y.out);
    return x;
}

tfs_ib_act tfs_ib_dense(tfs_ib_builder *b, tfs_ib_act x, const char *key, int64_t out, bool relu)
{
    int64_t in = x.h * x.w * x.c;
    float lim = sqrtf(6.0f / (float)in);
    tfs_build_scope_push(b->g, key);
    tfs_out w = weight(b, key, ".weight", 2, (int64_t[]){in, out}, -lim, lim);
    tfs_ib_act y = {tfs_build_matmul(b->g, x.out, w, false, false), 1, 1, out};
    tfs_build_scope_pop(b->g);
    b->macs += (double)in * (double)out;
    y = tfs_ib_bias(b, y, key);
    return relu ? tfs_ib_relu(b, y) : y;
}

/* ---- the models ----------------------------------------------------------------------------- */

static tfs_ib_act mlp(tfs_ib_builder *b, tfs_ib_act x)
{
    x = tfs_ib_dense(b, x, "fc1", 512, true);
    x = tfs_ib_dense(b, x, "fc2", 256, true);
    return tfs_ib_dense(b, x, "fc3", 10, false);
}

/* Flattening NHWC [7, 7, 64] gives rows in (h, w, c) order; PyTorch's NCHW flatten gives
 * (c, h, w): torch_worker.py permutes fc1's weight rows accordingly. */
static tfs_ib_act cnn(tfs_ib_builder *b, tfs_ib_act x)
{
    x = tfs_ib_relu(b, tfs_ib_bias(b, tfs_ib_conv(b, x, "conv1", 5, 1, 2, 32), "conv1"));
    x = tfs_ib_max_pool(b, x, 2, 2, 0);
    x = tfs_ib_relu(b, tfs_ib_bias(b, tfs_ib_conv(b, x, "conv2", 5, 1, 2, 64), "conv2"));
    x = tfs_ib_max_pool(b, x, 2, 2, 0);
    x.out = tfs_build_reshape(b->g, x.out, tfs_build_ints(b->g, 2, (int64_t[]){-1, 7 * 7 * 64}));
    x = tfs_ib_dense(b, x, "fc1", 1024, true);
    return tfs_ib_dense(b, x, "fc2", 10, false);
}

typedef struct model_def {
    const char *name;
    uint64_t    seed;
    int         in_rank;
    int64_t     in_dims[3];
    float       x_lo, x_hi;
    tfs_ib_act (*build)(tfs_ib_builder *b, tfs_ib_act x);
} model_def;

static const model_def MODELS[] = {
    {"mlp", 784, 1, {784}, 0.0f, 1.0f, mlp},
    {"cnn", 2828, 3, {28, 28, 1}, 0.0f, 1.0f, cnn},
    {"resnet50", 50, 3, {224, 224, 3}, -1.0f, 1.0f, tfs_ib_resnet50},
};

enum tfs_code tfs_ib_model_build(const char *name, tfs_ib_model *m, tfs_status *st)
{
    const model_def *d = NULL;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (!strcmp(MODELS[i].name, name))
            d = &MODELS[i];
    memset(m, 0, sizeof *m);
    if (!d)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "unknown model '%s' (mlp, cnn, resnet50)", name);
    tfs_ib_builder b = {.seed = d->seed};
    if (tfs_graph_new(&b.g, st) != TFS_OK)
        return st->code;
    tfs_shape shape = {.rank = d->in_rank + 1, .dims = {-1}};
    memcpy(shape.dims + 1, d->in_dims, (size_t)d->in_rank * sizeof d->in_dims[0]);
    tfs_ib_act x = {tfs_build_placeholder(b.g, "x", TFS_DTYPE_FLOAT, &shape), 1, 1, d->in_dims[0]};
    if (d->in_rank == 3)
        x = (tfs_ib_act){x.out, d->in_dims[0], d->in_dims[1], d->in_dims[2]};
    tfs_ib_act y = d->build(&b, x);
    *m = (tfs_ib_model){.name = d->name, .g = b.g, .in_rank = d->in_rank, .out_dim = y.c,
                        .macs = b.macs, .x_lo = d->x_lo, .x_hi = d->x_hi, .w = b.w,
                        .n_w = b.n_w};
    memcpy(m->in_dims, d->in_dims, sizeof m->in_dims);
    tfs_build_tensor_name(b.g, y.out, m->y_name, sizeof m->y_name);
    if (tfs_graph_finalize(b.g, st) != TFS_OK) {
        tfs_ib_model_free(m);
        return st->code;
    }
    return TFS_OK;
}

void tfs_ib_model_free(tfs_ib_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_w; i++)
        tfs_tensor_unref(m->w[i].t);
    tfs_free(m->w);
    tfs_graph_unref(m->g);
    memset(m, 0, sizeof *m);
}
