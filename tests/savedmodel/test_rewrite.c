/* Graph rewrites at load (savedmodel/rewrite.c over runtime/rewrite.h): every usable signature of
 * the real fixtures (half_plus_two TF1 and TF2) answers the same bits with rewrites on and off;
 * saved_model_counter's signatures, which assign the counter, keep running on the original graph
 * and keep their state across calls; a small CNN with BatchNorm written by our writer is fused
 * and folded and answers within 1e-5 of the unrewritten model; the switch turns it all off.
 * Fixtures absent: those tests skip, saying so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel.h"
#include "tests/support/tfs-test.h"

#define TF1 "tf_serving/saved_model_half_plus_two_cpu/00000123"
#define TF2 "tf_serving/saved_model_half_plus_two_tf2_cpu/00000123"
#define COUNTER "tf_serving/saved_model_counter/00000123"

static tfs_savedmodel *load(const char *dir, bool rewrites)
{
    tfs_savedmodel_opts o = tfs_savedmodel_opts_default();
    o.disable_graph_rewrites = !rewrites;
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_load(dir, &o, &m, &st) == TFS_OK, "load %s: %s", dir, st.msg);
    return m;
}

static tfs_savedmodel *load_fixture(const char *rel, bool rewrites)
{
    char dir[4096];
    ck_assert_ptr_nonnull(tfs_test_fixture(rel, dir, sizeof dir));
    return load(dir, rewrites);
}

/* A serialized tf.Example with one float feature "x" = v (hand-encoded protobuf). */
static tfs_tensor *example_batch(const float *v, int n)
{
    int64_t d[1] = {n};
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 1, d, &t, &st), TFS_OK);
    for (int i = 0; i < n; i++) {
        unsigned char b[32];
        size_t k = 0;
        /* Example{features(1): Features{feature(1): {key(1): "x", value(2): Feature{
         *   float_list(2): FloatList{value(1) packed: [v]}}}}} */
        b[k++] = 0x0a, b[k++] = 15;   /* Example.features */
        b[k++] = 0x0a, b[k++] = 13;   /* Features.feature entry */
        b[k++] = 0x0a, b[k++] = 1, b[k++] = 'x';
        b[k++] = 0x12, b[k++] = 8;    /* entry value: Feature */
        b[k++] = 0x12, b[k++] = 6;    /* Feature.float_list */
        b[k++] = 0x0a, b[k++] = 4;    /* FloatList.value, packed */
        memcpy(b + k, &v[i], 4);
        k += 4;
        ck_assert_int_eq(tfs_tensor_set_string(t, i, (const char *)b, k, &st), TFS_OK);
    }
    return t;
}

/* Inputs for signature sig: float x values, or tf.Examples carrying them for string inputs. */
static tfs_tensor *input_for(const tfs_tensor_info *in)
{
    static const float xs[] = {1.0f, 2.0f, 5.0f, -3.5f};
    if (in->dtype == TFS_DTYPE_STRING)
        return example_batch(xs, 4);
    int64_t d4[1] = {4}, d1[1] = {1};
    /* Signatures declared with shape (1,) take one value. */
    bool one = in->shape.rank == 1 && in->shape.dims[0] == 1;
    return tfs_test_tensor_f32(1, one ? d1 : d4, xs);
}

static void run_sig(const tfs_savedmodel *m, const tfs_signature *sig, tfs_tensor **out)
{
    tfs_named_tensor in[4];
    ck_assert_int_le(sig->n_inputs, 4);
    for (int j = 0; j < sig->n_inputs; j++)
        in[j] = (tfs_named_tensor){sig->inputs[j].alias, input_for(&sig->inputs[j])};
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_run(m, sig, in, sig->n_inputs, out, &st) == TFS_OK, "%s: %s",
                  sig->key, st.msg);
    for (int j = 0; j < sig->n_inputs; j++)
        tfs_tensor_unref(in[j].tensor);
}

/* Every usable signature of the model answers the same bits with rewrites on and off. */
static void same_answers(const char *test, const char *rel, int want_served)
{
    if (tfs_test_skip_without_fixture(test, rel))
        return;
    tfs_savedmodel *on = load_fixture(rel, true), *off = load_fixture(rel, false);
    const tfs_rewrite_stats *rs = tfs_savedmodel_rewrite_stats(on);
    ck_assert_int_eq(rs->runs_served, want_served);
    ck_assert_int_lt(rs->nodes_after, rs->nodes_before);
    ck_assert_int_eq(tfs_savedmodel_rewrite_stats(off)->nodes_before, 0);
    int compared = 0;
    for (int i = 0; i < tfs_savedmodel_signature_count(on); i++) {
        const tfs_signature *a = tfs_savedmodel_signature_at(on, i);
        const tfs_signature *b = tfs_savedmodel_signature_at(off, i);
        ck_assert_str_eq(a->key, b->key);
        ck_assert(!tfs_savedmodel_signature_rewritten(off, b));
        if (a->usable.code != TFS_OK)
            continue;
        ck_assert_msg(tfs_savedmodel_signature_rewritten(on, a), "%s", a->key);
        tfs_tensor *x[4] = {0}, *y[4] = {0};
        ck_assert_int_le(a->n_outputs, 4);
        run_sig(on, a, x);
        run_sig(off, b, y);
        for (int j = 0; j < a->n_outputs; j++) {
            ck_assert_int_eq(x[j]->dtype, y[j]->dtype);
            ck_assert(tfs_shape_equal(x[j]->rank, x[j]->dims, y[j]->rank, y[j]->dims));
            ck_assert_msg(x[j]->nbytes == y[j]->nbytes && !memcmp(x[j]->data, y[j]->data,
                                                                 x[j]->nbytes),
                          "%s output %s differs", a->key, a->outputs[j].alias);
            tfs_tensor_unref(x[j]);
            tfs_tensor_unref(y[j]);
        }
        compared++;
    }
    ck_assert_int_eq(compared, want_served);
    printf("%s: %d -> %d nodes in the served graph (of %d imported), %d signatures compared\n",
           rel, rs->nodes_before, rs->nodes_after,
           tfs_graph_node_count(tfs_session_graph(tfs_savedmodel_session(on))), compared);
    tfs_savedmodel_free(on);
    tfs_savedmodel_free(off);
}

START_TEST(test_rewrite_fixture_tf1)
{
    same_answers(__func__, TF1, 5);
}
END_TEST

START_TEST(test_rewrite_fixture_tf2)
{
    same_answers(__func__, TF2, 6);
}
END_TEST

static float call_counter(const tfs_savedmodel *m, const char *key, const float *delta)
{
    const tfs_signature *sig = tfs_savedmodel_signature(m, key);
    ck_assert_ptr_nonnull(sig);
    ck_assert(!tfs_savedmodel_signature_rewritten(m, sig));
    tfs_tensor *d = delta ? tfs_test_tensor_f32(0, NULL, delta) : NULL, *out = NULL;
    tfs_named_tensor in = {"delta", d};
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_run(m, sig, &in, d ? 1 : 0, &out, &st) == TFS_OK, "%s: %s", key,
                  st.msg);
    float v = *(const float *)out->data;
    tfs_tensor_unref(out);
    tfs_tensor_unref(d);
    return v;
}

/* The counter's signatures assign it: none is rewritten, and the state persists across calls. */
START_TEST(test_rewrite_counter_keeps_state)
{
    if (tfs_test_skip_without_fixture(__func__, COUNTER))
        return;
    for (int rewrites = 0; rewrites < 2; rewrites++) {
        tfs_savedmodel *m = load_fixture(COUNTER, rewrites);
        ck_assert_int_eq(tfs_savedmodel_rewrite_stats(m)->runs_served, 0);
        ck_assert_float_eq(call_counter(m, "get_counter", NULL), 0.0f);
        ck_assert_float_eq(call_counter(m, "incr_counter", NULL), 1.0f);
        ck_assert_float_eq(call_counter(m, "incr_counter", NULL), 2.0f);
        ck_assert_float_eq(call_counter(m, "incr_counter_by", (const float[]){3.0f}), 5.0f);
        ck_assert_float_eq(call_counter(m, "get_counter", NULL), 5.0f);
        ck_assert_float_eq(call_counter(m, "reset_counter", NULL), 0.0f);
        ck_assert_float_eq(call_counter(m, "get_counter", NULL), 0.0f);
        ck_assert_float_eq(call_counter(m, "incr_counter", NULL), 1.0f);
        tfs_savedmodel_free(m);
    }
}
END_TEST

/* ---- a CNN written by our writer ------------------------------------------------------------ */

static void ints4(tfs_graph *g, int node, const char *name, int64_t a, int64_t b, int64_t c,
                  int64_t d)
{
    int64_t v[4] = {a, b, c, d};
    tfs_attr_value attr = {.kind = TFS_ATTR_LIST, .list = {.kind = TFS_ATTR_I, .n = 4, .i = v}};
    tfs_graph_set_attr(g, node, name, &attr);
}

static tfs_out var(tfs_graph *g, const char *name, int rank, const int64_t *dims)
{
    tfs_shape shape = {.rank = rank};
    memcpy(shape.dims, dims, (size_t)rank * sizeof *dims);
    tfs_out v = tfs_build_variable(g, name, TFS_DTYPE_FLOAT, &shape);
    char read[64];
    snprintf(read, sizeof read, "%s/read", name);
    return tfs_build_op(g, "Identity", read, 1, &v);
}

/* x [-1,8,8,2] -> Conv2D 3x3x2x4 SAME -> FusedBatchNormV3 (inference) -> Relu -> MaxPool 2x2
 * -> Reshape [-1, 64] -> MatMul 64x5 + BiasAdd + Relu6 -> Softmax = y. */
static tfs_graph *cnn_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, &(tfs_shape){4, {-1, 8, 8, 2}});
    tfs_out c = tfs_build_op(g, "Conv2D", "conv", 2,
                             (tfs_out[]){x, var(g, "conv/kernel", 4, (int64_t[]){3, 3, 2, 4})});
    ints4(g, c.node, "strides", 1, 1, 1, 1);
    tfs_graph_set_attr_string(g, c.node, "padding", "SAME");
    tfs_out bn_in[5] = {c};
    static const char *const bn_vars[] = {"bn/gamma", "bn/beta", "bn/mean", "bn/variance"};
    for (int i = 0; i < 4; i++)
        bn_in[i + 1] = var(g, bn_vars[i], 1, (int64_t[]){4});
    tfs_out bn = tfs_build_op(g, "FusedBatchNormV3", "bn", 5, bn_in);
    tfs_graph_set_attr_type(g, bn.node, "T", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_type(g, bn.node, "U", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_float(g, bn.node, "epsilon", 0.001f);
    tfs_graph_set_attr_bool(g, bn.node, "is_training", false);
    tfs_out r = tfs_build_unary(g, "Relu", bn);
    tfs_out p = tfs_build_op(g, "MaxPool", "pool", 1, &r);
    ints4(g, p.node, "ksize", 1, 2, 2, 1);
    ints4(g, p.node, "strides", 1, 2, 2, 1);
    tfs_graph_set_attr_string(g, p.node, "padding", "VALID");
    tfs_out flat = tfs_build_reshape(g, p, tfs_build_ints(g, 2, (int64_t[]){-1, 64}));
    tfs_out d = tfs_build_matmul(g, flat, var(g, "dense/kernel", 2, (int64_t[]){64, 5}), false,
                                 false);
    d = tfs_build_binary(g, "BiasAdd", d, var(g, "dense/bias", 1, (int64_t[]){5}));
    d = tfs_build_unary(g, "Relu6", d);
    tfs_build_op(g, "Softmax", "y", 1, &d);
    tfs_status st;
    ck_assert_msg(tfs_graph_finalize(g, &st) == TFS_OK, "%s", st.msg);
    return g;
}

static tfs_tensor *filled(int rank, const int64_t *dims, uint32_t seed, float scale, float shift)
{
    tfs_tensor *t = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, &t, &st), TFS_OK);
    float *v = t->data;
    uint32_t s = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < t->nelem; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = ((float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f) * scale + shift;
    }
    return t;
}

static char *write_cnn(void)
{
    tfs_graph *g = cnn_graph();
    tfs_savedmodel_variable vars[7] = {
        {"conv/kernel", filled(4, (int64_t[]){3, 3, 2, 4}, 1, 0.5f, 0.0f)},
        {"bn/gamma", filled(1, (int64_t[]){4}, 2, 0.3f, 1.0f)},
        {"bn/beta", filled(1, (int64_t[]){4}, 3, 0.2f, 0.0f)},
        {"bn/mean", filled(1, (int64_t[]){4}, 4, 0.1f, 0.0f)},
        {"bn/variance", filled(1, (int64_t[]){4}, 5, 0.3f, 0.7f)},
        {"dense/kernel", filled(2, (int64_t[]){64, 5}, 6, 0.5f, 0.0f)},
        {"dense/bias", filled(1, (int64_t[]){5}, 7, 0.1f, 0.0f)},
    };
    tfs_tensor_info in = {.alias = "x", .tensor_name = "x:0", .dtype = TFS_DTYPE_FLOAT,
                          .shape = {.rank = 4, .dims = {-1, 8, 8, 2}}};
    tfs_tensor_info out = {.alias = "y", .tensor_name = "y:0", .dtype = TFS_DTYPE_FLOAT,
                           .shape = {.rank = 2, .dims = {-1, 5}}};
    tfs_signature sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                         .n_inputs = 1, .inputs = &in, .n_outputs = 1, .outputs = &out};
    char *tmp = tfs_test_mkdtemp();
    char *dir = malloc(strlen(tmp) + 8);
    sprintf(dir, "%s/1", tmp);
    free(tmp);
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_write(dir, g, &sig, 1, vars, 7, &st) == TFS_OK, "%s", st.msg);
    for (int i = 0; i < 7; i++)
        tfs_tensor_unref(vars[i].value);
    tfs_graph_unref(g);
    return dir;
}

START_TEST(test_rewrite_written_cnn)
{
    char *dir = write_cnn();
    tfs_savedmodel *on = load(dir, true), *off = load(dir, false);
    const tfs_rewrite_stats *rs = tfs_savedmodel_rewrite_stats(on);
    ck_assert_int_eq(rs->runs_served, 1);
    ck_assert_int_eq(rs->variables_frozen, 7);
    ck_assert_int_eq(rs->batch_norms_folded, 1);
    ck_assert_int_eq(rs->conv2ds_fused, 1);
    ck_assert_int_eq(rs->matmuls_fused, 1);
    ck_assert_int_gt(tfs_savedmodel_memory_bytes(on), tfs_savedmodel_memory_bytes(off));
    const tfs_signature *sa = tfs_savedmodel_signature(on, "serving_default");
    const tfs_signature *sb = tfs_savedmodel_signature(off, "serving_default");
    ck_assert(tfs_savedmodel_signature_rewritten(on, sa));
    for (int batch = 1; batch <= 9; batch += 8) {
        tfs_tensor *x = filled(4, (int64_t[]){batch, 8, 8, 2}, 100 + (uint32_t)batch, 1.0f, 0.0f);
        tfs_named_tensor in = {"x", x};
        tfs_tensor *a = NULL, *b = NULL;
        tfs_status st;
        ck_assert_msg(tfs_savedmodel_run(on, sa, &in, 1, &a, &st) == TFS_OK, "%s", st.msg);
        ck_assert_msg(tfs_savedmodel_run(off, sb, &in, 1, &b, &st) == TFS_OK, "%s", st.msg);
        ck_assert_int_eq(a->nelem, batch * 5);
        const float *pa = a->data, *pb = b->data;
        /* Softmax outputs lie in [0, 1]: 1e-5 relative to the largest is 1e-5 absolute at most */
        for (int64_t i = 0; i < a->nelem; i++)
            ck_assert_msg(fabsf(pa[i] - pb[i]) <= 1e-5f, "element %lld: %g vs %g", (long long)i,
                          (double)pa[i], (double)pb[i]);
        tfs_tensor_unref(a);
        tfs_tensor_unref(b);
        tfs_tensor_unref(x);
    }
    tfs_savedmodel_free(on);
    tfs_savedmodel_free(off);
    *strrchr(dir, '/') = 0;
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_savedmodel_rewrite(void);

Suite *suite_savedmodel_rewrite(void)
{
    Suite *s = suite_create("savedmodel_rewrite");
    TCase *tc = tcase_create("rewrite");
    tcase_add_test(tc, test_rewrite_written_cnn);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("rewrite_fixtures", NULL);
    tcase_add_test(tc, test_rewrite_fixture_tf1);
    tcase_add_test(tc, test_rewrite_fixture_tf2);
    tcase_add_test(tc, test_rewrite_counter_keeps_state);
    suite_add_tcase(s, tc);
    return s;
}
