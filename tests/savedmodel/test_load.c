/* Loading real TensorFlow SavedModels (the TensorFlow fixtures) and running their signatures, and the
 * failures a broken model directory must produce: a clear status naming the file or ops at fault. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "savedmodel/savedmodel-impl.h"
#include "tests/support/tfs-models.h"
#include "tests/support/tfs-test.h"

#define TF1 "tf_serving/saved_model_half_plus_two_cpu/00000123"
#define TF2 "tf_serving/saved_model_half_plus_two_tf2_cpu/00000123"

static tfs_savedmodel *load_fixture(const char *rel)
{
    char dir[4096];
    ck_assert_ptr_nonnull(tfs_test_fixture(rel, dir, sizeof dir));
    tfs_savedmodel *m = NULL;
    tfs_status st;
    enum tfs_code rc = tfs_savedmodel_load(dir, NULL, &m, &st);
    ck_assert_msg(rc == TFS_OK, "load %s: %s: %s", rel, tfs_code_name(st.code), st.msg);
    return m;
}

static void run_half_plus_two(tfs_savedmodel *m, int rank, const int64_t *dims)
{
    const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
    ck_assert_ptr_nonnull(sig);
    ck_assert_int_eq(sig->n_outputs, 1);
    const float x[] = {1.0f, 2.0f, 5.0f}, want[] = {2.5f, 3.0f, 4.5f};
    tfs_tensor *in = tfs_test_tensor_f32(rank, dims, x), *out = NULL;
    tfs_named_tensor feed = {"x", in};
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_run(m, sig, &feed, 1, &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, rank, dims, want, 0.0);   /* 0.5*x+2 is exact in float */
    tfs_tensor_unref(out);
    tfs_tensor_unref(in);
}

START_TEST(test_load_tf1_half_plus_two)
{
    if (tfs_test_skip_without_fixture(__func__, TF1))
        return;
    tfs_savedmodel *m = load_fixture(TF1);
    ck_assert_int_eq(tfs_savedmodel_signature_count(m), 5);
    int64_t d2[] = {3, 1}, d1[] = {3};
    run_half_plus_two(m, 2, d2);
    run_half_plus_two(m, 1, d1);   /* TF Serving does not check shapes against the signature */
    const tfs_signature *r = tfs_savedmodel_signature(m, "regress_x2_to_y3");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->method_name, "tensorflow/serving/regress");
    ck_assert_str_eq(r->inputs[0].tensor_name, "x2:0");
    tfs_savedmodel_free(m);
}
END_TEST

START_TEST(test_load_tf2_half_plus_two)
{
    if (tfs_test_skip_without_fixture(__func__, TF2))
        return;
    tfs_savedmodel *m = load_fixture(TF2);
    /* six serving signatures plus __saved_model_init_op */
    ck_assert_int_eq(tfs_savedmodel_signature_count(m), 7);
    const tfs_signature *init = tfs_savedmodel_signature(m, "__saved_model_init_op");
    ck_assert_ptr_nonnull(init);
    ck_assert_int_ne(init->usable.code, TFS_OK);
    int64_t d1[] = {3};
    run_half_plus_two(m, 1, d1);
    /* the default for x ([0.0]) is used when the request omits it */
    const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
    ck_assert_int_eq(sig->n_defaults, 1);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_run(m, sig, NULL, 0, &out, &st) == TFS_OK, "%s", st.msg);
    int64_t one[] = {1};
    tfs_test_assert_f32(out, 1, one, (const float[]){2.0f}, 0.0);
    tfs_tensor_unref(out);
    tfs_savedmodel_free(m);
}
END_TEST

START_TEST(test_load_run_input_errors)
{
    if (tfs_test_skip_without_fixture(__func__, TF1))
        return;
    tfs_savedmodel *m = load_fixture(TF1);
    const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
    tfs_tensor *out = NULL, *in = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_savedmodel_run(m, sig, NULL, 0, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "Signature input alias: x"));
    int64_t d[] = {1};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 1, d, &in, &st), TFS_OK);
    tfs_named_tensor feed = {"x", in};
    /* a string fed where the graph multiplies floats: rejected by the graph, naming the node */
    ck_assert_int_eq(tfs_savedmodel_run(m, sig, &feed, 1, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "node '") != NULL, "%s", st.msg);
    feed.name = "nope";
    ck_assert_int_eq(tfs_savedmodel_run(m, sig, &feed, 1, &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    tfs_tensor_unref(in);
    tfs_savedmodel_free(m);
}
END_TEST

/* Copies the TF1 fixture to a temp dir, lets `damage` break it, and expects `code` with `needle`
 * in the message. */
static void expect_broken(const char *test, void (*damage)(const char *dir), enum tfs_code code,
                          const char *needle)
{
    char src[4096];
    if (tfs_test_skip_without_fixture(test, TF1))
        return;
    tfs_test_fixture(TF1, src, sizeof src);
    char *tmp = tfs_test_mkdtemp(), dir[4200];
    snprintf(dir, sizeof dir, "%s/123", tmp);
    ck_assert_int_eq(tfs_test_copytree(src, dir), 0);
    damage(dir);
    tfs_savedmodel *m = NULL;
    tfs_status st;
    enum tfs_code rc = tfs_savedmodel_load(dir, NULL, &m, &st);
    ck_assert_msg(rc == code, "%s: got %s: %s", test, tfs_code_name(rc), st.msg);
    ck_assert_msg(strstr(st.msg, needle) != NULL, "%s: message '%s' lacks '%s'", test, st.msg, needle);
    ck_assert_ptr_null(m);
    tfs_test_rmtree(tmp);
    free(tmp);
}

static void flip_byte(const char *path, long at_from_end)
{
    size_t n;
    char *data = tfs_test_read_file(path, &n);
    ck_assert_ptr_nonnull(data);
    ck_assert_int_gt((long)n, at_from_end);
    data[n - (size_t)at_from_end] ^= 0x5a;
    ck_assert_int_eq(tfs_test_write_file(path, data, n), 0);
    free(data);
}

static void corrupt_pb(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/saved_model.pb", dir);
    ck_assert_int_eq(tfs_test_write_file(p, "\xff\xff\xff\xff garbage", 12), 0);
}

static void bad_index_crc(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/variables/variables.index", dir);
    flip_byte(p, 60);   /* inside the first block, before the footer */
}

static void truncate_shard(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", dir);
    ck_assert_int_eq(truncate(p, 6), 0);
}

static void remove_variables(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/variables", dir);
    tfs_test_rmtree(p);
}

START_TEST(test_load_corrupt_saved_model_pb)
{
    expect_broken(__func__, corrupt_pb, TFS_DATA_LOSS, "saved_model.pb");
}
END_TEST

START_TEST(test_load_bad_index_crc)
{
    expect_broken(__func__, bad_index_crc, TFS_DATA_LOSS, "variables.index");
}
END_TEST

START_TEST(test_load_truncated_shard)
{
    expect_broken(__func__, truncate_shard, TFS_DATA_LOSS, "variables.data-00000-of-00001");
}
END_TEST

START_TEST(test_load_missing_variables)
{
    expect_broken(__func__, remove_variables, TFS_NOT_FOUND, "variables.index");
}
END_TEST

START_TEST(test_load_missing_dir)
{
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_savedmodel_load("/nonexistent/tfserve/1", NULL, &m, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "saved_model.pb"));
}
END_TEST

START_TEST(test_load_wrong_tags)
{
    if (tfs_test_skip_without_fixture(__func__, TF1))
        return;
    char dir[4096];
    tfs_test_fixture(TF1, dir, sizeof dir);
    tfs_savedmodel_opts o = {.tags = "serve,gpu"};
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_savedmodel_load(dir, &o, &m, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "serve,gpu"));
}
END_TEST

/* Rewrites dir/saved_model.pb so that its one MetaGraphDef has the tags given. */
static void set_tags(const char *dir, const char *const *tags, size_t n)
{
    Tensorflow__SavedModel *sm = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__saved_model_read(dir, &sm, &st), TFS_OK);
    ck_assert_int_eq(sm->n_meta_graphs, 1);
    Tensorflow__MetaGraphDef__MetaInfoDef *mi = sm->meta_graphs[0]->meta_info_def;
    char **old = mi->tags;
    size_t n_old = mi->n_tags;
    mi->tags = (char **)tags;
    mi->n_tags = n;
    size_t len = tensorflow__saved_model__get_packed_size(sm);
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    tensorflow__saved_model__pack(sm, buf);
    mi->tags = old;
    mi->n_tags = n_old;
    tensorflow__saved_model__free_unpacked(sm, NULL);
    char path[4200];
    snprintf(path, sizeof path, "%s/saved_model.pb", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
}

/* TensorFlow picks the MetaGraphDef whose tag set equals the requested one: {serve, gpu} is not
 * loaded for "serve" (a superset), nor {serve} for "serve,gpu"; order and repeats do not matter. */
START_TEST(test_load_tags_exact_set)
{
    char *tmp = tfs_test_mkdtemp();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/m", tmp);
    tfs_test_write_model(dir, 1, 0);
    set_tags(dir, (const char *const[]){"serve", "gpu"}, 2);
    tfs_savedmodel *m = NULL;
    tfs_status st;
    tfs_savedmodel_opts o = {.tags = "serve"};
    ck_assert_int_eq(tfs_savedmodel_load(dir, &o, &m, &st), TFS_NOT_FOUND);
    ck_assert_msg(strstr(st.msg, "its tag sets: {serve,gpu}") != NULL, "%s", st.msg);
    o.tags = "gpu,serve";
    ck_assert_int_eq(tfs_savedmodel_load(dir, &o, &m, &st), TFS_OK);
    tfs_savedmodel_free(m);
    o.tags = "serve,gpu,serve,";
    ck_assert_int_eq(tfs_savedmodel_load(dir, &o, &m, &st), TFS_OK);
    tfs_savedmodel_free(m);
    set_tags(dir, (const char *const[]){"serve"}, 1);
    o.tags = "serve,gpu";
    ck_assert_int_eq(tfs_savedmodel_load(dir, &o, &m, &st), TFS_NOT_FOUND);
    ck_assert_msg(strstr(st.msg, "its tag sets: {serve}") != NULL, "%s", st.msg);
    tfs_test_rmtree(tmp);
    free(tmp);
}
END_TEST

/* Reads dir/saved_model.pb, lets edit change its first MetaGraphDef's graph (strings replaced with
 * free + strdup: protobuf-c frees them with the system allocator), and writes it back. */
static void edit_graph(const char *dir, void (*edit)(Tensorflow__MetaGraphDef *))
{
    Tensorflow__SavedModel *sm = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__saved_model_read(dir, &sm, &st), TFS_OK);
    edit(sm->meta_graphs[0]);
    size_t len = tensorflow__saved_model__get_packed_size(sm);
    uint8_t *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    tensorflow__saved_model__pack(sm, buf);
    tensorflow__saved_model__free_unpacked(sm, NULL);
    char path[4200];
    snprintf(path, sizeof path, "%s/saved_model.pb", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
}

static Tensorflow__NodeDef *node_by_op(Tensorflow__GraphDef *gd, const char *op)
{
    for (size_t i = 0; i < gd->n_node; i++)
        if (!strcmp(gd->node[i]->op, op))
            return gd->node[i];
    ck_abort_msg("no %s node", op);
    return NULL;
}

static void rename_mul_op(Tensorflow__MetaGraphDef *mg)
{
    Tensorflow__GraphDef *gd = mg->graph_def;
    Tensorflow__NodeDef *mul = node_by_op(gd, "Mul");
    free(mul->op);
    mul->op = strdup("FancyMul");
}

/* The Mul takes the AddV2 after it as its input: a cycle that is no loop. */
static void make_cycle(Tensorflow__MetaGraphDef *mg)
{
    Tensorflow__GraphDef *gd = mg->graph_def;
    Tensorflow__NodeDef *mul = node_by_op(gd, "Mul"), *add = node_by_op(gd, "AddV2");
    free(mul->input[0]);
    mul->input[0] = strdup(add->name);
}

/* A version whose graph cannot serve fails its load with the reason, naming the op or nodes. */
static void expect_load_error(void (*edit)(Tensorflow__MetaGraphDef *), enum tfs_code code,
                              const char *want1, const char *want2)
{
    char *tmp = tfs_test_mkdtemp();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/m", tmp);
    tfs_test_write_model(dir, 1, 0);
    edit_graph(dir, edit);
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_savedmodel_load(dir, NULL, &m, &st), code);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(st.msg, want1) && strstr(st.msg, want2), "%s", st.msg);
    ck_assert_int_ne(tfs_savedmodel_check(dir, NULL, stderr), 0);
    tfs_test_rmtree(tmp);
    free(tmp);
}

START_TEST(test_load_unknown_op_fails)
{
    expect_load_error(rename_mul_op, TFS_UNIMPLEMENTED, "not supported by tfserve",
                      "FancyMul (node 'mul')");
}
END_TEST

START_TEST(test_load_cycle_fails)
{
    expect_load_error(make_cycle, TFS_INVALID_ARGUMENT, "cycle", "");
}
END_TEST

/* serving_default made hostile: its input is the saver's file prefix, its output what RestoreV2
 * reads from there. */
static void expose_restore(Tensorflow__MetaGraphDef *mg)
{
    Tensorflow__SignatureDef *sd = mg->signature_def[0]->value;
    free(sd->inputs[0]->value->name);
    sd->inputs[0]->value->name = strdup("save/Const:0");
    sd->inputs[0]->value->dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
    free(sd->outputs[0]->value->name);
    sd->outputs[0]->value->name = strdup("save/RestoreV2:0");
}

/* A signature that reaches RestoreV2 with a path the caller feeds: refused in runs a server makes
 * for requests (tfs_session_set_thread_file_ops(false)), allowed otherwise. */
START_TEST(test_load_file_ops_refused_at_request_time)
{
    char *tmp = tfs_test_mkdtemp();
    char dir[4096], prefix[4200];
    snprintf(dir, sizeof dir, "%s/m", tmp);
    snprintf(prefix, sizeof prefix, "%s/variables/variables", dir);
    tfs_test_write_model(dir, 1, 0);
    edit_graph(dir, expose_restore);
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_load(dir, NULL, &m, &st) == TFS_OK, "%s", st.msg);
    const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
    ck_assert_ptr_nonnull(sig);
    tfs_tensor *path = NULL, *out = NULL;
    int64_t one = 1;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 0, &one, &path, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(path, 0, prefix, strlen(prefix), &st), TFS_OK);
    tfs_named_tensor in = {sig->inputs[0].alias, path};
    ck_assert(tfs_session_set_thread_file_ops(false));
    ck_assert_int_eq(tfs_savedmodel_run(m, sig, &in, 1, &out, &st), TFS_PERMISSION_DENIED);
    ck_assert_msg(strstr(st.msg, "save/RestoreV2") && strstr(st.msg, "reads files"), "%s",
                  st.msg);
    ck_assert(!tfs_session_set_thread_file_ops(true));
    ck_assert_msg(tfs_savedmodel_run(m, sig, &in, 1, &out, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(out->dtype, TFS_DTYPE_FLOAT);
    tfs_tensor_unref(out);
    tfs_tensor_unref(path);
    tfs_savedmodel_free(m);
    tfs_test_rmtree(tmp);
    free(tmp);
}
END_TEST

Suite *suite_savedmodel_load(void);
Suite *suite_savedmodel_load(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tfs_test_fixture_case("fixtures", NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_load_tf1_half_plus_two);
    tcase_add_test(tc, test_load_tf2_half_plus_two);
    tcase_add_test(tc, test_load_run_input_errors);
    tcase_add_test(tc, test_load_corrupt_saved_model_pb);
    tcase_add_test(tc, test_load_bad_index_crc);
    tcase_add_test(tc, test_load_truncated_shard);
    tcase_add_test(tc, test_load_missing_variables);
    tcase_add_test(tc, test_load_wrong_tags);
    suite_add_tcase(s, tc);
    tc = tcase_create("broken");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_load_missing_dir);
    tcase_add_test(tc, test_load_tags_exact_set);
    tcase_add_test(tc, test_load_unknown_op_fails);
    tcase_add_test(tc, test_load_cycle_fails);
    tcase_add_test(tc, test_load_file_ops_refused_at_request_time);
    suite_add_tcase(s, tc);
    return s;
}
