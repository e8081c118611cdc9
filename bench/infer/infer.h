/* tfserve-infer-bench: the three models of the inference benchmark (MLP 784-512-256-10,
 * the small CNN, ResNet-50), built with the runtime's graph-building API (runtime/build.h), with
 * seeded random weights that are also written out as .npy files so that PyTorch and ONNX Runtime
 * run the very same numbers (bench/infer/torch_worker.py, bench/infer/ort_worker.mjs).
 *
 * Layout: tfserve's graphs are NHWC and hold their weights in TensorFlow's layout (Conv2D filter
 * [kh, kw, in, out], MatMul kernel [in, out]) as Const nodes, as a frozen TensorFlow graph does;
 * the .npy files hold exactly those arrays, named after the PyTorch state_dict key they become
 * ("layer1.0.conv2.weight"); the Python side transposes them. Not a test: see bench/README.md.
 */
#ifndef TFS_BENCH_INFER_H
#define TFS_BENCH_INFER_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/build.h"
#include "runtime/runtime.h"

/* A weight as generated: the state_dict key it is written under and its TF-layout tensor. */
typedef struct tfs_ib_weight {
    char        key[64];
    tfs_tensor *t;
} tfs_ib_weight;

/* A tensor being built together with its per-sample NHWC geometry (h = w = 1 for a matrix). */
typedef struct tfs_ib_act {
    tfs_out out;
    int64_t h, w, c;
} tfs_ib_act;

/* The state of one model being built: graph, weight generator, the weights made so far and the
 * multiply-adds per sample counted over its Conv2D and MatMul nodes. */
typedef struct tfs_ib_builder {
    tfs_graph     *g;
    uint64_t       seed;
    tfs_ib_weight *w;
    int            n_w, cap_w;
    double         macs;
    bool           failed;   /* out of memory while generating weights */
} tfs_ib_builder;

/* A built model: finalized graph, its input "x" [-1, in_dims...] and output tensor name. */
typedef struct tfs_ib_model {
    const char    *name;
    tfs_graph     *g;
    int            in_rank;     /* per sample: 1 (MLP) or 3 (H, W, C) */
    int64_t        in_dims[3];
    int64_t        out_dim;
    char           y_name[128];
    double         macs;        /* multiply-adds per sample */
    float          x_lo, x_hi;  /* inputs are uniform in [x_lo, x_hi) */
    tfs_ib_weight *w;
    int            n_w;
} tfs_ib_model;

/* Builds model `name` ("mlp", "cnn", "resnet50") into m. INVALID_ARGUMENT for an unknown name. */
enum tfs_code tfs_ib_model_build(const char *name, tfs_ib_model *m, tfs_status *st);
void          tfs_ib_model_free(tfs_ib_model *m);

/* ---- layers (models.c), used by resnet.c ---------------------------------------------------- */

/* Conv2D k x k / stride with `pad` zero pixels on each side as PyTorch pads (SAME where that is
 * the same thing, VALID for none, EXPLICIT otherwise), no bias; weight "<key>.weight"
 * [k, k, c, cout], He-uniform. */
tfs_ib_act tfs_ib_conv(tfs_ib_builder *b, tfs_ib_act x, const char *key, int k, int stride,
                       int pad, int64_t cout);
/* FusedBatchNormV3, is_training false, epsilon 1e-5 (PyTorch's default): weights
 * "<key>.weight/.bias/.running_mean/.running_var"; scale drawn in [gamma_lo, gamma_hi). */
tfs_ib_act tfs_ib_batch_norm(tfs_ib_builder *b, tfs_ib_act x, const char *key, float gamma_lo,
                             float gamma_hi);
/* BiasAdd of "<key>.bias" (uniform in +-0.1). */
tfs_ib_act tfs_ib_bias(tfs_ib_builder *b, tfs_ib_act x, const char *key);
tfs_ib_act tfs_ib_relu(tfs_ib_builder *b, tfs_ib_act x);
/* MaxPool k x k / stride with `pad` pixels on each side (EXPLICIT; 0: VALID). */
tfs_ib_act tfs_ib_max_pool(tfs_ib_builder *b, tfs_ib_act x, int k, int stride, int pad);
tfs_ib_act tfs_ib_add(tfs_ib_builder *b, tfs_ib_act x, tfs_ib_act y);
/* MatMul [in, out] + BiasAdd (+ Relu): weights "<key>.weight" (He-uniform), "<key>.bias". */
tfs_ib_act tfs_ib_dense(tfs_ib_builder *b, tfs_ib_act x, const char *key, int64_t out, bool relu);

/* Builds ResNet-50 (torchvision's layout) on x [-1, 224, 224, 3]; returns the logits. */
tfs_ib_act tfs_ib_resnet50(tfs_ib_builder *b, tfs_ib_act x);

#endif
