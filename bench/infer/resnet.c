/* ResNet-50 in torchvision's layout (ResNet v1.5: the stride of a downsampling bottleneck sits on
 * its 3x3 conv), NHWC, as TensorFlow ops:
 *
 *     conv1 7x7/2 pad 3, 64 -> bn1 -> Relu -> MaxPool 3x3/2 pad 1
 *     layer1..4: [3, 4, 6, 3] bottlenecks of width 64, 128, 256, 512 (output 4 x width); block 0
 *                of layers 2-4 has stride 2; block 0 of every layer has a projection shortcut
 *                (downsample.0 = 1x1 conv with the block's stride, downsample.1 = BatchNorm)
 *     bottleneck: 1x1 -> bn -> Relu -> 3x3/stride pad 1 -> bn -> Relu -> 1x1 -> bn,
 *                 + shortcut, Relu
 *     Mean over H, W (global average pool) -> fc 2048 -> 1000
 *
 * Names follow torchvision's state_dict ("layer2.0.downsample.1.running_var") so the weights load
 * into the PyTorch twin by name. The padding torchvision uses is symmetric; where TensorFlow's
 * SAME would pad differently (the stride-2 7x7 and 3x3 convs, the max pool) the ops use EXPLICIT
 * padding, which computes exactly PyTorch's result (see set_padding in models.c).
 */
#include <stdio.h>

#include "bench/infer/infer.h"

/* The last BatchNorm of a block scales its branch down so that the residual sums of 16 blocks
 * of random weights keep activations of order 1. */
#define LAST_BN_LO 0.2f
#define LAST_BN_HI 0.5f

static tfs_ib_act conv_bn(tfs_ib_builder *b, tfs_ib_act x, const char *block, int i, int k,
                          int stride, int64_t cout, bool relu)
{
    char conv[64], bn[64];
    snprintf(conv, sizeof conv, "%s.conv%d", block, i);
    snprintf(bn, sizeof bn, "%s.bn%d", block, i);
    x = tfs_ib_conv(b, x, conv, k, stride, k / 2, cout);
    x = relu ? tfs_ib_batch_norm(b, x, bn, 0.5f, 1.5f)
             : tfs_ib_batch_norm(b, x, bn, LAST_BN_LO, LAST_BN_HI);
    return relu ? tfs_ib_relu(b, x) : x;
}

static tfs_ib_act bottleneck(tfs_ib_builder *b, tfs_ib_act x, const char *block, int64_t width,
                             int stride, bool project)
{
    tfs_ib_act shortcut = x;
    if (project) {
        char conv[64], bn[64];
        snprintf(conv, sizeof conv, "%s.downsample.0", block);
        snprintf(bn, sizeof bn, "%s.downsample.1", block);
        shortcut = tfs_ib_conv(b, x, conv, 1, stride, 0, 4 * width);
        shortcut = tfs_ib_batch_norm(b, shortcut, bn, 0.5f, 1.5f);
    }
    tfs_ib_act y = conv_bn(b, x, block, 1, 1, 1, width, true);
    y = conv_bn(b, y, block, 2, 3, stride, width, true);
    y = conv_bn(b, y, block, 3, 1, 1, 4 * width, false);
    return tfs_ib_relu(b, tfs_ib_add(b, y, shortcut));
}

tfs_ib_act tfs_ib_resnet50(tfs_ib_builder *b, tfs_ib_act x)
{
    static const int BLOCKS[4] = {3, 4, 6, 3};
    x = tfs_ib_conv(b, x, "conv1", 7, 2, 3, 64);
    x = tfs_ib_relu(b, tfs_ib_batch_norm(b, x, "bn1", 0.5f, 1.5f));
    x = tfs_ib_max_pool(b, x, 3, 2, 1);
    int64_t width = 64;
    for (int layer = 0; layer < 4; layer++, width *= 2) {
        for (int i = 0; i < BLOCKS[layer]; i++) {
            char block[32];
            snprintf(block, sizeof block, "layer%d.%d", layer + 1, i);
            int stride = layer > 0 && i == 0 ? 2 : 1;
            x = bottleneck(b, x, block, width, stride, i == 0);
        }
    }
    x.out = tfs_build_reduce(b->g, "Mean", x.out, tfs_build_ints(b->g, 2, (int64_t[]){1, 2}),
                             false);
    x.h = x.w = 1;
    return tfs_ib_dense(b, x, "fc", 1000, false);
}
