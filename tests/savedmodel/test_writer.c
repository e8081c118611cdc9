/* The SavedModel writer: what it writes loads back (graph, signatures, variables restored through
 * the generated saver ops) and computes the same values; a graph with an op tfserve lacks fails to
 * load naming the op; inspect describes what was written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel.h"
#include "tests/support/tfs-test.h"

/* y = w * x + b with w a [3] variable and b a scalar variable; z = Cast<int32>(y). When `extra_op`
 * is set, also a node of that (unknown) op type feeding output "bad". */
static tfs_graph *build(const char *extra_op)
{
    tfs_graph *g = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_graph_new(&g, &st), TFS_OK);
    tfs_shape vec = {.rank = 2, .dims = {-1, 3}}, w3 = {.rank = 1, .dims = {3}}, sc = {.rank = 0};
    int x = tfs_graph_add_node(g, "x", "Placeholder");
    tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_shape(g, x, "shape", &vec);
    const char *vars[] = {"w", "b"};
    const tfs_shape *shapes[] = {&w3, &sc};
    for (int i = 0; i < 2; i++) {
        int v = tfs_graph_add_node(g, vars[i], "VariableV2");
        tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
        tfs_graph_set_attr_shape(g, v, "shape", shapes[i]);
        tfs_graph_set_attr_string(g, v, "container", "");
        tfs_graph_set_attr_string(g, v, "shared_name", "");
    }
    int mul = tfs_graph_add_node(g, "mul", "Mul");
    tfs_graph_add_input(g, mul, "x");
    tfs_graph_add_input(g, mul, "w");
    tfs_graph_set_attr_type(g, mul, "T", TFS_DTYPE_FLOAT);
    int y = tfs_graph_add_node(g, "y", "Add");
    tfs_graph_add_input(g, y, "mul:0");
    tfs_graph_add_input(g, y, "b");
    tfs_graph_set_attr_type(g, y, "T", TFS_DTYPE_FLOAT);
    int z = tfs_graph_add_node(g, "z", "Cast");
    tfs_graph_add_input(g, z, "y");
    tfs_graph_set_attr_type(g, z, "SrcT", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_type(g, z, "DstT", TFS_DTYPE_INT32);
    tfs_graph_set_attr_bool(g, z, "Truncate", false);
    if (extra_op) {
        int e = tfs_graph_add_node(g, "bad", extra_op);
        tfs_graph_add_input(g, e, "y");
    }
    ck_assert_msg(tfs_graph_finalize(g, &st) == TFS_OK, "%s", st.msg);
    return g;
}

static char *write_model(const char *extra_op)
{
    tfs_graph *g = build(extra_op);
    int64_t d3[] = {3};
    tfs_tensor *w = tfs_test_tensor_f32(1, d3, (const float[]){1.0f, -2.0f, 0.25f});
    tfs_tensor *b = tfs_test_tensor_f32(0, NULL, (const float[]){10.0f});
    tfs_tensor_info in = {.alias = "x", .tensor_name = "x:0", .dtype = TFS_DTYPE_FLOAT,
                          .shape = {.rank = 2, .dims = {-1, 3}}};
    tfs_tensor_info outs[] = {
        {.alias = "y", .tensor_name = "y:0", .dtype = TFS_DTYPE_FLOAT, .shape = {.rank = 2, .dims = {-1, 3}}},
        {.alias = "z", .tensor_name = "z:0", .dtype = TFS_DTYPE_INT32, .shape = {.rank = 2, .dims = {-1, 3}}},
        {.alias = "bad", .tensor_name = "bad:0", .dtype = TFS_DTYPE_FLOAT, .shape = {.rank = -1}},
    };
    tfs_signature sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                         .n_inputs = 1, .inputs = &in, .n_outputs = extra_op ? 3 : 2, .outputs = outs};
    tfs_savedmodel_variable vars[] = {{"w", w}, {"b", b}};
    char *tmp = tfs_test_mkdtemp();
    char *dir = malloc(strlen(tmp) + 8);
    sprintf(dir, "%s/1", tmp);
    free(tmp);
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_write(dir, g, &sig, 1, vars, 2, &st) == TFS_OK, "%s", st.msg);
    /* writing over an existing version is refused */
    ck_assert_int_eq(tfs_savedmodel_write(dir, g, &sig, 1, vars, 2, &st), TFS_ALREADY_EXISTS);
    tfs_tensor_unref(w);
    tfs_tensor_unref(b);
    tfs_graph_unref(g);
    return dir;
}

static void remove_model(char *dir)
{
    *strrchr(dir, '/') = 0;
    tfs_test_rmtree(dir);
    free(dir);
}

START_TEST(test_writer_round_trip)
{
    char *dir = write_model(NULL);
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_msg(tfs_savedmodel_load(dir, NULL, &m, &st) == TFS_OK, "%s", st.msg);
    const tfs_signature *sig = tfs_savedmodel_signature(m, "serving_default");
    ck_assert_ptr_nonnull(sig);
    ck_assert_int_eq(sig->n_outputs, 2);
    ck_assert_str_eq(sig->outputs[1].alias, "z");
    ck_assert_int_eq(sig->outputs[1].dtype, TFS_DTYPE_INT32);
    int64_t d[] = {2, 3};
    tfs_tensor *x = tfs_test_tensor_f32(2, d, (const float[]){1, 2, 3, -4, 0.5f, 8});
    tfs_named_tensor feed = {"x", x};
    tfs_tensor *out[2] = {0};
    ck_assert_msg(tfs_savedmodel_run(m, sig, &feed, 1, out, &st) == TFS_OK, "%s", st.msg);
    /* hand-computed: w = [1, -2, 0.25], b = 10 */
    tfs_test_assert_f32(out[0], 2, d, (const float[]){11, 6, 10.75f, 6, 9, 12}, 0.0);
    ck_assert_int_eq(out[1]->dtype, TFS_DTYPE_INT32);
    const int32_t *zi = out[1]->data;
    ck_assert_int_eq(zi[2], 10);   /* Cast truncates 10.75 toward zero */
    ck_assert_int_eq(zi[5], 12);
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    tfs_tensor_unref(x);
    tfs_savedmodel_free(m);

    /* inspect names the signature, the variables and the ops */
    char path[4200];
    snprintf(path, sizeof path, "%s/../inspect.txt", dir);
    FILE *f = fopen(path, "w+");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(tfs_savedmodel_inspect(dir, f, &st), TFS_OK);
    fclose(f);
    char *text = tfs_test_read_file(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "signature_def['serving_default']"));
    ck_assert_ptr_nonnull(strstr(text, "1 serving signature(s)"));
    ck_assert_ptr_nonnull(strstr(text, "w: DT_FLOAT (3,)"));
    ck_assert_ptr_nonnull(strstr(text, "RestoreV2"));
    free(text);
    remove_model(dir);
}
END_TEST

START_TEST(test_writer_missing_op_fails_load)
{
    char *dir = write_model("FancyUnknownOp");
    tfs_savedmodel *m = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_savedmodel_load(dir, NULL, &m, &st), TFS_UNIMPLEMENTED);
    ck_assert_msg(strstr(st.msg, "ops not supported by tfserve: FancyUnknownOp") != NULL, "%s", st.msg);
    ck_assert_ptr_null(m);
    remove_model(dir);
}
END_TEST

Suite *suite_savedmodel_writer(void);
Suite *suite_savedmodel_writer(void)
{
    Suite *s = suite_create("writer");
    TCase *tc = tcase_create("round-trip");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_writer_round_trip);
    tcase_add_test(tc, test_writer_missing_op_fails_load);
    suite_add_tcase(s, tc);
    return s;
}
