/* The rewrites that change kernels (runtime/rewrite-fuse.c), each on and off on graphs built with
 * runtime/build.h: dense layers MatMul + BiasAdd + Relu/Relu6/Elu/LeakyRelu/none fused into
 * _FusedMatMul, convolutions Conv2D + BiasAdd + activation into _FusedConv2D, FusedBatchNorm
 * (V1, V2, V3; after Conv2D, Conv2D + BiasAdd and DepthwiseConv2dNative) folded into the filter.
 * Fusion computes the same bits as the unfused graph (the same GEMM calls and epilogue
 * expressions); BatchNorm folding rounds the products once more, so its results are compared
 * within 1e-5 of the largest output magnitude. The patterns a rewrite must leave alone are
 * checked too: a BatchNorm in training mode or whose statistics are used, an intermediate with a
 * second consumer, an NCHW convolution. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/gemm-impl.h"
#include "tests/runtime/rewrite-helpers.h"

Suite *suite_runtime_rewrite_fuse(void);

#define BN_TOL 1e-5

static tfs_graph *new_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    return g;
}

static void set_ints(tfs_graph *g, tfs_out o, const char *name, int64_t a, int64_t b, int64_t c,
                     int64_t d)
{
    int64_t v[4] = {a, b, c, d};
    tfs_attr_value attr = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = 4, .i = v}};
    tfs_graph_set_attr(g, o.node, name, &attr);
}

/* A float tensor [n] filled from a seed, scaled and shifted. */
static tfs_tensor *vec(int64_t n, uint32_t seed, float scale, float shift)
{
    tfs_tensor *t = nn_random_f32(1, &n, seed);
    float *d = t->data;
    for (int64_t i = 0; i < n; i++)
        d[i] = d[i] * scale + shift;
    return t;
}

/* A Const holding t (takes ownership of t). */
static tfs_out cconst(tfs_graph *g, const char *name, tfs_tensor *t)
{
    tfs_out c = tfs_build_const(g, name, t);
    tfs_tensor_unref(t);
    return c;
}

/* ---- dense layers --------------------------------------------------------------------------- */

/* x [-1, 8] -> five dense layers with Relu, Relu6, Elu, LeakyRelu(0.3) and none; weights in
 * variables (TF1 reads) or Consts. Layer 3 multiplies by a transposed weight. Output "y". */
static tfs_session *dense_graph(bool variables, tfs_graph **gp)
{
    static const char *const acts[] = {"Relu", "Relu6", "Elu", "LeakyRelu", NULL};
    static const int64_t width[] = {8, 16, 12, 10, 9, 4};
    tfs_graph *g = new_graph();
    rwt_vars v = {0};
    tfs_out h = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, &(tfs_shape){2, {-1, 8}});
    for (int l = 0; l < 5; l++) {
        char scope[24];   /* "dense" and any int fit */
        snprintf(scope, sizeof scope, "dense%d", l);
        tfs_build_scope_push(g, scope);
        bool tb = l == 2;
        int64_t wd[2] = {tb ? width[l + 1] : width[l], tb ? width[l] : width[l + 1]};
        tfs_tensor *w = nn_random_f32(2, wd, 100 + (uint32_t)l);
        /* Layer 1's weights are large so that Relu6 clips. */
        for (int64_t i = 0; l == 1 && i < w->nelem; i++)
            ((float *)w->data)[i] *= 8.0f;
        tfs_tensor *b = vec(width[l + 1], 200 + (uint32_t)l, 0.5f, 0.0f);
        tfs_out wo, bo;
        if (variables) {
            wo = rwt_var(g, &v, "kernel", w);
            bo = rwt_var(g, &v, "bias", b);
        } else {
            wo = cconst(g, "kernel", w);
            bo = cconst(g, "bias", b);
        }
        h = tfs_build_binary(g, "BiasAdd", tfs_build_matmul(g, h, wo, false, tb), bo);
        if (acts[l]) {
            h = tfs_build_unary(g, acts[l], h);
            if (!strcmp(acts[l], "LeakyRelu"))
                tfs_graph_set_attr_float(g, h.node, "alpha", 0.3f);
        }
        tfs_build_scope_pop(g);
    }
    tfs_build_op(g, "Identity", "y", 1, &h);
    *gp = g;
    return rwt_session(g, &v);
}

START_TEST(test_rewrite_dense_layers)
{
    for (int variables = 0; variables < 2; variables++) {
        tfs_graph *g;
        tfs_session *s = dense_graph(variables, &g);
        int64_t xd[2] = {5, 8};
        tfs_tensor *x = nn_random_f32(2, xd, 7);
        tfs_feed feed = {"x:0", x};
        tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 1,
                                      (const char *const[]){"y:0"});
        tfs_rewrite_stats rs;
        rwt_check_each(g, s, run, &feed, BN_TOL, &rs);
        ck_assert_int_eq(rs.matmuls_fused, 5);
        ck_assert_int_eq(rs.variables_frozen, variables ? 10 : 0);
        tfs_rewrite_opts o = tfs_rewrite_opts_default();
        tfs_graph *rg = rwt_rewrite(g, s, &run, 1, &o, &rs);
        ck_assert_int_eq(rwt_count_op(rg, "_FusedMatMul"), 5);
        ck_assert_int_eq(rwt_count_op(rg, "MatMul") + rwt_count_op(rg, "BiasAdd"), 0);
        ck_assert_int_eq(rwt_count_op(rg, "VariableV2"), 0);
        /* The fused node takes the last node's name; fused_ops lists what it fused. */
        static const char *const tails[] = {"dense0/Relu", "dense1/Relu6", "dense2/Elu",
                                            "dense3/LeakyRelu", "dense4/BiasAdd"};
        static const char *const second[] = {"Relu", "Relu6", "Elu", "LeakyRelu", NULL};
        for (int l = 0; l < 5; l++) {
            ck_assert_str_eq(rwt_op(rg, tails[l]), "_FusedMatMul");
            int id = tfs_graph_find_node(rg, tails[l]);
            const tfs_attr_value *ops = tfs_graph_node_attr(rg, id, "fused_ops");
            ck_assert_ptr_nonnull(ops);
            ck_assert_int_eq(ops->list.n, second[l] ? 2 : 1);
            ck_assert_str_eq(ops->list.s[0].data, "BiasAdd");
            if (second[l])
                ck_assert_str_eq(ops->list.s[1].data, second[l]);
            ck_assert_int_eq(tfs_graph_node_attr(rg, id, "num_args")->i, 1);
            ck_assert_int_eq(tfs_graph_node_attr(rg, id, "transpose_b")->b, l == 2);
            if (l == 3)
                ck_assert_float_eq(tfs_graph_node_attr(rg, id, "leakyrelu_alpha")->f, 0.3f);
        }
        ck_assert_str_eq(rwt_op(rg, "y"), "Identity");   /* a fetched Identity stays */
        ck_assert_int_lt(rs.nodes_after, rs.nodes_before);
        tfs_graph_unref(rg);
        tfs_tensor_unref(x);
        tfs_session_free(s);
        tfs_graph_unref(g);
    }
}
END_TEST

/* A MatMul whose output another run fetches, or that has a second consumer, is not fused; a
 * BiasAdd another run fetches ends its fusion (it takes the BiasAdd's name; its Relu stays). */
START_TEST(test_rewrite_fusion_needs_sole_use)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    int64_t wd[2] = {4, 3};
    tfs_out w = rwt_random_const(g, "w", 2, wd, 1);
    tfs_out b = cconst(g, "b", vec(3, 2, 1.0f, 0.0f));
    for (int c = 1; c <= 3; c++) {
        char mm[8], ba[8], r[8];
        snprintf(mm, sizeof mm, "mm%d", c);
        snprintf(ba, sizeof ba, "ba%d", c);
        snprintf(r, sizeof r, "r%d", c);
        tfs_out m = tfs_build_op(g, "MatMul", mm, 2, (tfs_out[]){x, w});
        tfs_out a = tfs_build_op(g, "BiasAdd", ba, 2, (tfs_out[]){m, b});
        tfs_build_op(g, "Relu", r, 1, &a);
        if (c == 2)
            tfs_build_op(g, "Sigmoid", "other", 1, &m);   /* a second consumer of mm2 */
    }
    tfs_session *s = rwt_session(g, NULL);
    int64_t xd[2] = {2, 4};
    tfs_tensor *xt = nn_random_f32(2, xd, 3);
    tfs_feed feed = {"x:0", xt};
    const char *f1[] = {"r1:0", "r2:0", "r3:0", "other:0"}, *f2[] = {"mm1:0", "ba1:0", "ba3:0"};
    tfs_rewrite_run runs[2] = {rwt_run(1, (const char *const[]){"x:0"}, 4, f1),
                               rwt_run(1, (const char *const[]){"x:0"}, 3, f2)};
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, runs, 2, NULL, &rs);
    ck_assert(runs[0].served && runs[1].served);
    ck_assert_int_eq(rs.matmuls_fused, 1);
    ck_assert_str_eq(rwt_op(rg, "mm1"), "MatMul");
    ck_assert_str_eq(rwt_op(rg, "ba1"), "BiasAdd");
    ck_assert_str_eq(rwt_op(rg, "mm2"), "MatMul");   /* Sigmoid reads it too */
    ck_assert_str_eq(rwt_op(rg, "ba3"), "_FusedMatMul");
    ck_assert_str_eq(rwt_op(rg, "r3"), "Relu");
    ck_assert_int_eq(tfs_graph_find_node(rg, "mm3"), -1);
    rwt_compare(s, rg, &feed, 1, f1, 4, 0, "fetches of run 1");
    rwt_compare(s, rg, &feed, 1, f2, 3, 0, "fetches of run 2");
    tfs_graph_unref(rg);
    tfs_tensor_unref(xt);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- convolutions --------------------------------------------------------------------------- */

static tfs_out conv(tfs_graph *g, tfs_out x, tfs_out w, int64_t stride, int64_t dil,
                    const char *padding);

static tfs_out conv(tfs_graph *g, tfs_out x, tfs_out w, int64_t stride, int64_t dil,
                    const char *padding)
{
    tfs_out c = tfs_build_op(g, "Conv2D", NULL, 2, (tfs_out[]){x, w});
    set_ints(g, c, "strides", 1, stride, stride, 1);
    set_ints(g, c, "dilations", 1, dil, dil, 1);
    tfs_graph_set_attr_string(g, c.node, "padding", padding);
    tfs_graph_set_attr_string(g, c.node, "data_format", "NHWC");
    return c;
}

/* x [-1,9,9,3] -> conv 3x3 SAME + bias + Relu -> conv 3x3 VALID stride 2 + bias -> conv 1x1
 * (the im2col-free path) + bias + Relu6 -> conv 2x2 dilation 2 SAME + bias + LeakyRelu = y. */
START_TEST(test_rewrite_conv_layers)
{
    tfs_graph *g = new_graph();
    rwt_vars v = {0};
    tfs_out h = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    static const int64_t cin[] = {3, 8, 6, 5}, cout[] = {8, 6, 5, 4}, k[] = {3, 3, 1, 2};
    static const int64_t stride[] = {1, 2, 1, 1}, dil[] = {1, 1, 1, 2};
    static const char *const pad[] = {"SAME", "VALID", "VALID", "SAME"};
    static const char *const acts[] = {"Relu", NULL, "Relu6", "LeakyRelu"};
    for (int l = 0; l < 4; l++) {
        char scope[16];
        snprintf(scope, sizeof scope, "conv%d", l);
        tfs_build_scope_push(g, scope);
        int64_t wd[4] = {k[l], k[l], cin[l], cout[l]};
        tfs_out w = rwt_var(g, &v, "kernel", nn_random_f32(4, wd, 300 + (uint32_t)l));
        tfs_out b = rwt_var(g, &v, "bias", vec(cout[l], 400 + (uint32_t)l, l == 2 ? 6.0f : 0.5f,
                                               0.0f));
        h = tfs_build_binary(g, "BiasAdd", conv(g, h, w, stride[l], dil[l], pad[l]), b);
        if (acts[l])
            h = tfs_build_unary(g, acts[l], h);
        tfs_build_scope_pop(g);
    }
    tfs_build_op(g, "Identity", "y", 1, &h);
    tfs_session *s = rwt_session(g, &v);
    int64_t xd[4] = {2, 9, 9, 3};
    tfs_tensor *x = nn_random_f32(4, xd, 9);
    tfs_feed feed = {"x:0", x};
    tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 1, (const char *const[]){"y:0"});
    tfs_rewrite_stats rs;
    rwt_check_each(g, s, run, &feed, BN_TOL, &rs);
    ck_assert_int_eq(rs.conv2ds_fused, 4);
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert_int_eq(rwt_count_op(rg, "_FusedConv2D"), 4);
    ck_assert_int_eq(rwt_count_op(rg, "Conv2D"), 0);
    ck_assert_str_eq(rwt_op(rg, "conv1/BiasAdd"), "_FusedConv2D");
    int id = tfs_graph_find_node(rg, "conv3/LeakyRelu");
    ck_assert_int_eq(tfs_graph_node_attr(rg, id, "dilations")->list.i[1], 2);
    ck_assert_str_eq(tfs_graph_node_attr(rg, id, "padding")->s.data, "SAME");
    /* An empty batch goes through the fused kernels too. */
    int64_t ed[4] = {0, 9, 9, 3};
    tfs_tensor *e = nn_random_f32(4, ed, 1);
    tfs_feed ef = {"x:0", e};
    rwt_compare(s, rg, &ef, 1, run.fetches, 1, 0, "empty batch");
    tfs_tensor_unref(e);
    tfs_graph_unref(rg);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* An NCHW convolution (not supported on the CPU, but a graph may hold one) is not fused. */
START_TEST(test_rewrite_conv_nchw_not_fused)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    int64_t wd[4] = {1, 1, 2, 2};
    tfs_out c = conv(g, x, rwt_random_const(g, "w", 4, wd, 1), 1, 1, "VALID");
    tfs_graph_set_attr_string(g, c.node, "data_format", "NCHW");
    tfs_out b = rwt_random_const(g, "b", 1, (int64_t[]){2}, 2);
    tfs_out ba = tfs_build_binary(g, "BiasAdd", c, b);
    tfs_graph_set_attr_string(g, ba.node, "data_format", "NCHW");
    tfs_session *s = rwt_session(g, NULL);
    tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 1,
                                  (const char *const[]){"BiasAdd:0"});
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert_int_eq(rs.conv2ds_fused, 0);
    ck_assert_str_eq(rwt_op(rg, "Conv2D"), "Conv2D");
    tfs_graph_unref(rg);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- BatchNorm folding ---------------------------------------------------------------------- */

/* FusedBatchNorm{,V2,V3} in inference mode over x, with channel count C. */
static tfs_out batch_norm(tfs_graph *g, const char *op, const char *name, tfs_out x, int64_t C,
                          uint32_t seed, bool training)
{
    tfs_out in[5] = {x};
    in[1] = cconst(g, NULL, vec(C, seed, 0.5f, 1.0f));       /* scale */
    in[2] = cconst(g, NULL, vec(C, seed + 1, 0.3f, 0.0f));   /* offset */
    in[3] = cconst(g, NULL, vec(C, seed + 2, 0.2f, 0.1f));   /* mean */
    in[4] = cconst(g, NULL, vec(C, seed + 3, 0.4f, 0.6f));   /* variance > 0 */
    tfs_out bn = tfs_build_op(g, op, name, 5, in);
    tfs_graph_set_attr_type(g, bn.node, "T", TFS_DTYPE_FLOAT);
    if (strcmp(op, "FusedBatchNorm") != 0)
        tfs_graph_set_attr_type(g, bn.node, "U", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_float(g, bn.node, "epsilon", 0.001f);
    tfs_graph_set_attr_bool(g, bn.node, "is_training", training);
    tfs_graph_set_attr_string(g, bn.node, "data_format", "NHWC");
    return bn;
}

/* conv -> BN V3 -> Relu; conv 1x1 -> BiasAdd -> BN (V1); depthwise -> BN V2 -> Relu6; weights in
 * Consts (so BatchNorm folding works on its own) or variables. */
static tfs_session *bn_graph(bool variables, tfs_graph **gp)
{
    tfs_graph *g = new_graph();
    rwt_vars v = {0};
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    int64_t w1d[4] = {3, 3, 3, 8}, w2d[4] = {1, 1, 8, 6}, w3d[4] = {3, 3, 6, 2};
    tfs_tensor *w1 = nn_random_f32(4, w1d, 11), *w2 = nn_random_f32(4, w2d, 12);
    tfs_tensor *w3 = nn_random_f32(4, w3d, 13), *b2 = vec(6, 14, 0.5f, 0.0f);
    tfs_out wo[3], bo;
    if (variables) {
        wo[0] = rwt_var(g, &v, "w1", w1);
        wo[1] = rwt_var(g, &v, "w2", w2);
        wo[2] = rwt_var(g, &v, "w3", w3);
        bo = rwt_var(g, &v, "b2", b2);
    } else {
        wo[0] = cconst(g, "w1", w1);
        wo[1] = cconst(g, "w2", w2);
        wo[2] = cconst(g, "w3", w3);
        bo = cconst(g, "b2", b2);
    }
    tfs_out h = conv(g, x, wo[0], 1, 1, "SAME");
    h = tfs_build_op(g, "Relu", "relu1", 1, (tfs_out[]){batch_norm(g, "FusedBatchNormV3", "bn1", h,
                                                                   8, 20, false)});
    h = tfs_build_binary(g, "BiasAdd", conv(g, h, wo[1], 1, 1, "VALID"), bo);
    h = batch_norm(g, "FusedBatchNorm", "bn2", h, 6, 30, false);
    tfs_out d = tfs_build_op(g, "DepthwiseConv2dNative", "dw", 2, (tfs_out[]){h, wo[2]});
    set_ints(g, d, "strides", 1, 2, 2, 1);
    tfs_graph_set_attr_string(g, d.node, "padding", "SAME");
    h = batch_norm(g, "FusedBatchNormV2", "bn3", d, 12, 40, false);
    tfs_build_op(g, "Relu6", "y", 1, &h);
    *gp = g;
    return rwt_session(g, &v);
}

START_TEST(test_rewrite_batch_norm_folding)
{
    for (int variables = 0; variables < 2; variables++) {
        tfs_graph *g;
        tfs_session *s = bn_graph(variables, &g);
        int64_t xd[4] = {3, 7, 7, 3};
        tfs_tensor *x = nn_random_f32(4, xd, 5);
        tfs_feed feed = {"x:0", x};
        tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 1,
                                      (const char *const[]){"y:0"});
        tfs_rewrite_stats rs;
        rwt_check_each(g, s, run, &feed, BN_TOL, &rs);
        ck_assert_int_eq(rs.batch_norms_folded, 3);
        ck_assert_int_eq(rs.conv2ds_fused, 2);   /* conv1 + bn1 + relu1, conv2 + bn2 */
        tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
        ck_assert_int_eq(rwt_count_op(rg, "FusedBatchNorm") + rwt_count_op(rg, "FusedBatchNormV2") +
                         rwt_count_op(rg, "FusedBatchNormV3"), 0);
        ck_assert_str_eq(rwt_op(rg, "relu1"), "_FusedConv2D");
        ck_assert_str_eq(rwt_op(rg, "bn2"), "_FusedConv2D");
        ck_assert_str_eq(rwt_op(rg, "bn3"), "BiasAdd");   /* no fused depthwise op */
        ck_assert_str_eq(rwt_op(rg, "dw"), "DepthwiseConv2dNative");
        ck_assert_int_gt(rs.constant_bytes, 0);
        tfs_graph_unref(rg);
        tfs_tensor_unref(x);
        tfs_session_free(s);
        tfs_graph_unref(g);
    }
}
END_TEST

/* Left alone: training mode (is_training's default is true), statistics fetched or used, and a
 * convolution output with another consumer. */
START_TEST(test_rewrite_batch_norm_not_folded)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    int64_t wd[4] = {1, 1, 2, 3};
    tfs_out w = rwt_random_const(g, "w", 4, wd, 1);
    tfs_out c1 = conv(g, x, w, 1, 1, "VALID");
    tfs_out t = batch_norm(g, "FusedBatchNormV3", "train", c1, 3, 2, true);
    tfs_out st_ = batch_norm(g, "FusedBatchNormV3", "stats", conv(g, x, w, 1, 1, "VALID"), 3, 3,
                             false);
    tfs_out c3 = conv(g, x, w, 1, 1, "VALID");
    tfs_out shared = batch_norm(g, "FusedBatchNormV3", "shared", c3, 3, 4, false);
    tfs_out other = tfs_build_unary(g, "Neg", c3);
    (void)t;
    (void)shared;
    (void)other;
    tfs_session *s = rwt_session(g, NULL);
    int64_t xd[4] = {1, 2, 2, 2};
    tfs_tensor *xt = nn_random_f32(4, xd, 3);
    tfs_feed feed = {"x:0", xt};
    const char *f[] = {"train:0", "stats:0", "stats:1", "shared:0", "Neg:0"};
    tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 5, f);
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert(run.served);
    ck_assert_int_eq(rs.batch_norms_folded, 0);
    ck_assert_str_eq(rwt_op(rg, "train"), "FusedBatchNormV3");
    ck_assert_str_eq(rwt_op(rg, tfs_graph_node_name(g, st_.node)), "FusedBatchNormV3");
    ck_assert_str_eq(rwt_op(rg, "shared"), "FusedBatchNormV3");
    rwt_compare(s, rg, &feed, 1, f, 5, 0, "unfolded batch norms");
    tfs_graph_unref(rg);
    tfs_tensor_unref(xt);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* ---- residual Add ---------------------------------------------------------------------------- */

/* conv k x k (stride, padding) + bias with weights in Consts from seeds: the plain ops. */
static tfs_out conv_bias(tfs_graph *g, const char *name, tfs_out x, int64_t k, int64_t cin,
                         int64_t cout, int64_t stride, const char *padding, uint32_t seed)
{
    char n[64];
    int64_t wd[4] = {k, k, cin, cout};
    snprintf(n, sizeof n, "%s/w", name);
    tfs_out w = cconst(g, n, nn_random_f32(4, wd, seed));
    snprintf(n, sizeof n, "%s/b", name);
    tfs_out b = cconst(g, n, vec(cout, seed + 1, 0.5f, 0.0f));
    snprintf(n, sizeof n, "%s/bias", name);
    return tfs_build_op(g, "BiasAdd", n, 2, (tfs_out[]){conv(g, x, w, stride, 1, padding), b});
}

/* x [-1,6,6,8]: a ResNet identity block (Relu(AddV2(conv(Relu(conv x)), x))), a projection block
 * (Add of two convolutions, no activation), a per-channel vector added to a convolution (AddV2
 * with the product second, Relu6: the kernel's broadcasting route) and a 3x3 VALID convolution
 * ([-1,1,1,8]) added to the [-1,3,3,8] before it (the side enlarges the output; LeakyRelu). Each
 * Add and its activation join the convolution, computing the same bits; "r1" is fetched too. */
START_TEST(test_rewrite_residual_add)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out a = tfs_build_op(g, "Relu", "a", 1,
                             (tfs_out[]){conv_bias(g, "c1", x, 3, 8, 8, 1, "SAME", 10)});
    tfs_out c = conv_bias(g, "c2", a, 3, 8, 8, 1, "SAME", 20);
    tfs_out r1 = tfs_build_op(g, "Relu", "r1", 1,
                              (tfs_out[]){tfs_build_op(g, "AddV2", "add1", 2, (tfs_out[]){c, x})});
    tfs_out p = conv_bias(g, "proj", r1, 1, 8, 8, 2, "VALID", 30);
    tfs_out q = conv_bias(g, "c3", r1, 3, 8, 8, 2, "SAME", 40);
    tfs_out r2 = tfs_build_op(g, "Add", "add2", 2, (tfs_out[]){p, q});
    tfs_out v = cconst(g, "v", vec(8, 50, 3.0f, 1.0f));
    tfs_out s3 = conv_bias(g, "c4", r2, 1, 8, 8, 1, "VALID", 60);
    tfs_out r3 = tfs_build_op(g, "Relu6", "r3", 1,
                              (tfs_out[]){tfs_build_op(g, "AddV2", "add3", 2, (tfs_out[]){v, s3})});
    tfs_out t = conv_bias(g, "c5", r3, 3, 8, 8, 1, "VALID", 70);
    tfs_out r4 = tfs_build_op(g, "AddV2", "add4", 2, (tfs_out[]){t, r3});
    tfs_out y = tfs_build_op(g, "LeakyRelu", "r4", 1, &r4);
    tfs_build_op(g, "Identity", "y", 1, &y);
    rwt_vars vars = {0};
    tfs_session *s = rwt_session(g, &vars);
    int64_t xd[4] = {2, 6, 6, 8};
    tfs_tensor *xt = nn_random_f32(4, xd, 9);
    tfs_feed feed = {"x:0", xt};
    tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 2,
                                  (const char *const[]){"y:0", "r1:0"});
    tfs_rewrite_stats rs;
    rwt_check_each(g, s, run, &feed, 0.0, &rs);
    ck_assert_int_eq(rs.adds_fused, 4);
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    rwt_compare(s, rg, &feed, 1, run.fetches, 2, 0.0, "residual adds fused");
    ck_assert_str_eq(rwt_op(rg, "r1"), "_FusedConv2D");
    ck_assert_str_eq(rwt_op(rg, "add2"), "_FusedConv2D");
    ck_assert_str_eq(rwt_op(rg, "r3"), "_FusedConv2D");
    ck_assert_str_eq(rwt_op(rg, "r4"), "_FusedConv2D");
    ck_assert_int_eq(rwt_count_op(rg, "AddV2") + rwt_count_op(rg, "Add"), 0);
    ck_assert_int_eq(tfs_graph_node_attr(rg, tfs_graph_find_node(rg, "r1"), "fused_ops")->list.n,
                     3);
    ck_assert(rwt_has_input(rg, "r1", "x:0"));
    /* A batch of another size, and an empty one, through the same rewritten graph. */
    int64_t od[4] = {5, 6, 6, 8}, ed[4] = {0, 6, 6, 8};
    tfs_tensor *other = nn_random_f32(4, od, 11), *empty = nn_random_f32(4, ed, 12);
    rwt_compare(s, rg, &(tfs_feed){"x:0", other}, 1, run.fetches, 2, 0.0, "batch 5");
    rwt_compare(s, rg, &(tfs_feed){"x:0", empty}, 1, run.fetches, 2, 0.0, "empty batch");
    tfs_graph_unref(rg);
    /* Off (where sessions may use a GPU): the Adds stay. */
    tfs_rewrite_opts o = tfs_rewrite_opts_default();
    o.fuse_add = false;
    rg = rwt_rewrite(g, s, &run, 1, &o, &rs);
    ck_assert_int_eq(rs.adds_fused, 0);
    ck_assert_int_eq(rwt_count_op(rg, "AddV2"), 3);
    rwt_compare(s, rg, &feed, 1, run.fetches, 2, 0.0, "residual adds not fused");
    tfs_graph_unref(rg);
    tfs_tensor_unref(other);
    tfs_tensor_unref(empty);
    tfs_tensor_unref(xt);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* Relu(AddV2(conv_bias(x), side)) with the product first (the Add fuses into it). */
static tfs_out residual(tfs_graph *g, const char *name, tfs_out x, int64_t k, int64_t cin,
                        int64_t cout, tfs_out side, uint32_t seed)
{
    char n[64];
    snprintf(n, sizeof n, "%s/add", name);
    tfs_out sum = tfs_build_op(g, "AddV2", n, 2,
                               (tfs_out[]){conv_bias(g, name, x, k, cin, cout, 1, "SAME", seed),
                                           side});
    snprintf(n, sizeof n, "%s/relu", name);
    return tfs_build_op(g, "Relu", n, 1, &sum);
}

/* A fused convolution writes its output over the tensor it adds (tfs__kernel_take_input) only
 * where no one can see it: y1's side s1 has no other use and is taken; not s2 (fetched), s3 (the
 * 3x3 direct path, whose fallback may sum k in blocks), s4 (read later by Mul), s5 (k =
 * 520: two blocks of k store partial sums first), x2 (fed: the caller's tensor stays as it was),
 * nor y6 (also the product's own input). Every fetch equals the unfused graph's, bit for bit, in
 * the learning run, in planned runs (arenas) and without buffer reuse (heap tensors). */
START_TEST(test_rewrite_residual_in_place)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out x2 = tfs_build_placeholder(g, "x2", TFS_DTYPE_FLOAT, NULL);
    tfs_out s1 = conv_bias(g, "s1", x, 1, 8, 16, 1, "SAME", 10);
    tfs_out y1 = residual(g, "c1", x, 1, 8, 16, s1, 20);
    tfs_out s2 = conv_bias(g, "s2", y1, 1, 16, 16, 1, "SAME", 30);
    tfs_out y2 = residual(g, "c2", y1, 1, 16, 16, s2, 40);
    tfs_out s3 = conv_bias(g, "s3", y2, 1, 16, 16, 1, "SAME", 50);
    tfs_out y3 = residual(g, "c3", y2, 3, 16, 16, s3, 60);
    tfs_out s4 = conv_bias(g, "s4", y3, 1, 16, 16, 1, "SAME", 70);
    tfs_out y4 = residual(g, "c4", y3, 1, 16, 16, s4, 80);
    tfs_out w = tfs_build_op(g, "Mul", "w", 2, (tfs_out[]){y4, s4});
    tfs_out big = tfs_build_op(g, "Relu", "big", 1,
                               (tfs_out[]){conv_bias(g, "c_big", w, 1, 16, 520, 1, "SAME", 90)});
    tfs_out s5 = conv_bias(g, "s5", w, 1, 16, 16, 1, "SAME", 100);
    tfs_out y5 = residual(g, "c5", big, 1, 520, 16, s5, 110);
    tfs_out y6 = residual(g, "c6", y5, 1, 16, 16, x2, 120);
    tfs_out y7 = tfs_build_op(g, "AddV2", "c7/add", 2,
                              (tfs_out[]){conv_bias(g, "c7", y6, 1, 16, 16, 1, "SAME", 130), y6});
    tfs_build_op(g, "Identity", "y", 1, &y7);
    tfs_build_op(g, "Identity", "s2_out", 1, &s2);
    rwt_vars vars = {0};
    tfs_session *s = rwt_session(g, &vars);
    int64_t xd[4] = {2, 4, 16, 8}, x2d[4] = {2, 4, 16, 16};   /* rows of 16 >= any MR */
    tfs_tensor *xt = nn_random_f32(4, xd, 1), *x2t = nn_random_f32(4, x2d, 2), *x2copy = NULL;
    ck_assert_int_eq(tfs_tensor_copy(x2t, &x2copy, NULL), TFS_OK);
    tfs_feed feeds[2] = {{"x:0", xt}, {"x2:0", x2t}};
    static const char *const fetches[] = {"y:0", "s2_out:0"};
    tfs_rewrite_run run = rwt_run(2, (const char *const[]){"x:0", "x2:0"}, 2, fetches);
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert_int_eq(rs.adds_fused, 7);
    tfs_tensor *want[2] = {NULL}, *got[2] = {NULL};
    tfs_status st;
    ck_assert_int_eq(tfs_session_run(s, feeds, 2, fetches, 2, NULL, 0, want, &st), TFS_OK);
    for (int reuse = 1; reuse >= 0; reuse--) {
        tfs_session_opts o = tfs_session_opts_default();
        o.disable_buffer_reuse = !reuse;
        tfs_session *rs_ = NULL;
        ck_assert_int_eq(tfs_session_new(rg, &o, &rs_, &st), TFS_OK);
        int runs = reuse ? 3 : 1;   /* learning, then planned */
        for (int r = 0; r < runs; r++) {
            ck_assert_msg(tfs_session_run(rs_, feeds, 2, fetches, 2, NULL, 0, got, &st) == TFS_OK,
                          "%s", st.msg);
            for (int i = 0; i < 2; i++) {
                char what[64];
                snprintf(what, sizeof what, "reuse %d, run %d", reuse, r);
                rwt_compare_tensors(got[i], want[i], 0.0, what, i);
                tfs_tensor_unref(got[i]);
            }
            ck_assert_mem_eq(x2t->data, x2copy->data, x2t->nbytes);
        }
        tfs_plan_stats ps;
        tfs__session_plan_stats(rs_, &ps);
        ck_assert_int_eq(ps.taken_inputs, runs);
        tfs_session_free(rs_);
    }
    for (int i = 0; i < 2; i++)
        tfs_tensor_unref(want[i]);
    tfs_graph_unref(rg);
    tfs_tensor_unref(xt);
    tfs_tensor_unref(x2t);
    tfs_tensor_unref(x2copy);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

/* The epilogues the GEMM applies to each tile as it stores it (tfs_gemm_epi: bias, an added
 * tensor of the output's shape, Relu or Relu6), on every route a product takes, with each kernel
 * set this CPU has: the same bits as the unfused ops. x [-1,24,24,8], batch 2 (1152 output rows
 * at 24x24): a 3x3 convolution (the patch-free direct path) + a 1x1 of x + Relu; a 1x1 (the input
 * itself as A) of 40 columns (a full 32-column panel and a masked 8) + the 1x1 projection of x +
 * Relu; a 3x3 with dilation 2 (patches, in chunks spread over the threads, each adding the rows at
 * its own offset) + the one before; a 3x3 stride 2 to a 12x12
 * output (patches: rows too short for the direct path) + Relu; a 1x1 to 520 channels then back
 * (k = 520: two blocks of k, the epilogue only after the last) + the one before + Relu6; and the
 * mean over the pixels through two dense layers of 2 rows (wide tiles, B read in place; the
 * second with k = 600) + Relu6 and + Relu. */
START_TEST(test_rewrite_epilogue_in_gemm)
{
    tfs_graph *g = new_graph();
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, NULL);
    tfs_out a = tfs_build_op(
        g, "Relu", "a", 1,
        (tfs_out[]){tfs_build_op(g, "AddV2", "add0", 2,
                                 (tfs_out[]){conv_bias(g, "c1", x, 3, 8, 32, 1, "SAME", 10),
                                             conv_bias(g, "proj0", x, 1, 8, 32, 1, "SAME", 15)})});
    tfs_out p = conv_bias(g, "proj", x, 1, 8, 40, 1, "SAME", 20);
    tfs_out b = tfs_build_op(
        g, "Relu", "b", 1,
        (tfs_out[]){tfs_build_op(g, "AddV2", "add1", 2,
                                 (tfs_out[]){conv_bias(g, "c2", a, 1, 32, 40, 1, "SAME", 30), p})});
    int64_t wd[4] = {3, 3, 40, 40};
    tfs_out dc = tfs_build_op(g, "BiasAdd", "c3/bias", 2,
                              (tfs_out[]){conv(g, b, cconst(g, "c3/w", nn_random_f32(4, wd, 40)),
                                               1, 2, "SAME"),
                                          cconst(g, "c3/b", vec(40, 41, 0.5f, 0.0f))});
    tfs_out d = tfs_build_op(g, "AddV2", "d", 2, (tfs_out[]){dc, b});
    tfs_out e = tfs_build_op(g, "Relu", "e", 1,
                             (tfs_out[]){conv_bias(g, "c4", d, 3, 40, 16, 2, "SAME", 50)});
    tfs_out wide = tfs_build_op(g, "Relu", "wide", 1,
                                (tfs_out[]){conv_bias(g, "c5", e, 1, 16, 520, 1, "SAME", 60)});
    tfs_out f = tfs_build_op(
        g, "Relu6", "f", 1,
        (tfs_out[]){tfs_build_op(g, "AddV2", "add2", 2,
                                 (tfs_out[]){e, conv_bias(g, "c6", wide, 1, 520, 16, 1, "SAME",
                                                          70)})});
    int64_t axes[2] = {1, 2}, two = 2, w1[2] = {16, 600}, w2[2] = {600, 100};
    tfs_tensor *at = NULL;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT64, 1, &two, &at, NULL), TFS_OK);
    memcpy(at->data, axes, sizeof axes);
    tfs_out h = tfs_build_op(g, "Mean", "m", 2, (tfs_out[]){f, cconst(g, "axes", at)});
    static const char *const acts[2] = {"Relu6", "Relu"};
    for (int l = 0; l < 2; l++) {
        char n[32];
        snprintf(n, sizeof n, "fc%d", l);
        tfs_build_scope_push(g, n);
        tfs_out mm = tfs_build_op(g, "MatMul", "mm", 2,
                                  (tfs_out[]){h, cconst(g, "w", nn_random_f32(2, l ? w2 : w1,
                                                                                 80 + (uint32_t)l))});
        tfs_out bias = cconst(g, "b", vec(l ? 100 : 600, 90 + (uint32_t)l, 0.5f, 0.0f));
        h = tfs_build_op(g, acts[l], "act", 1,
                         (tfs_out[]){tfs_build_op(g, "BiasAdd", "bias", 2, (tfs_out[]){mm, bias})});
        tfs_build_scope_pop(g);
    }
    tfs_build_op(g, "Identity", "y", 1, &h);
    rwt_vars vars = {0};
    tfs_session *s = rwt_session(g, &vars);
    int64_t xd[4] = {2, 24, 24, 8};
    tfs_tensor *xt = nn_random_f32(4, xd, 9);
    tfs_feed feed = {"x:0", xt};
    static const char *const fetches[] = {"y:0", "b:0", "d:0", "e:0", "f:0"};
    tfs_rewrite_run run = rwt_run(1, (const char *const[]){"x:0"}, 5, fetches);
    tfs_rewrite_stats rs;
    tfs_graph *rg = rwt_rewrite(g, s, &run, 1, NULL, &rs);
    ck_assert_int_eq(rs.conv2ds_fused, 8);
    ck_assert_int_eq(rs.adds_fused, 4);
    ck_assert_int_eq(rs.matmuls_fused, 2);
    int tried = 0;
    for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++) {
        if (!tfs__gemm_force_isa((enum tfs_gemm_isa)i))
            continue;
        tried++;
        rwt_compare(s, rg, &feed, 1, fetches, 5, 0.0, tfs__gemm_kernel()->name);
    }
    /* A NaN in the input goes through every epilogue as through the separate ops (a NaN stays
     * NaN under Relu and Relu6: x < 0 ? 0 : x), bit for bit; the other image stays finite. */
    ((float *)xt->data)[(5 * 24 + 7) * 8 + 3] = NAN;
    for (int i = 0; i < TFS_GEMM_ISA_COUNT; i++)
        if (tfs__gemm_force_isa((enum tfs_gemm_isa)i))
            rwt_compare(s, rg, &feed, 1, fetches, 5, 0.0, "a NaN in image 0");
    ck_assert(tfs__gemm_force_isa(TFS_GEMM_ISA_COUNT));
    ck_assert_int_ge(tried, 1);
    tfs_graph_unref(rg);
    tfs_tensor_unref(xt);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

Suite *suite_runtime_rewrite_fuse(void)
{
    Suite *s = suite_create("runtime_rewrite_fuse");
    TCase *tc = tcase_create("fuse");
    tcase_add_test(tc, test_rewrite_dense_layers);
    tcase_add_test(tc, test_rewrite_fusion_needs_sole_use);
    tcase_add_test(tc, test_rewrite_conv_layers);
    tcase_add_test(tc, test_rewrite_conv_nchw_not_fused);
    tcase_add_test(tc, test_rewrite_batch_norm_folding);
    tcase_add_test(tc, test_rewrite_batch_norm_not_folded);
    tcase_add_test(tc, test_rewrite_residual_add);
    tcase_add_test(tc, test_rewrite_epilogue_in_gemm);
    tcase_add_test(tc, test_rewrite_residual_in_place);
    suite_add_tcase(s, tc);
    return s;
}
