/* Model status and metadata documents (server/json-meta.c), compared as JSON with documents written
 * by hand from TF Serving's published ones, and with TF Serving's own answer for half_plus_two
 * (one of the TensorFlow fixtures; its own case, reported skipped when absent). */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/server-impl.h"
#include "tests/support/tfs-test.h"

static void expect_json(const tfs__buf *b, const char *want)
{
    json_error_t err;
    json_t      *got = json_loads(b->data, 0, &err), *exp = json_loads(want, 0, &err);
    ck_assert_msg(got != NULL, "not JSON (%s): %s", err.text, b->data);
    ck_assert_msg(exp != NULL, "bad expected JSON (%s)", err.text);
    ck_assert_msg(json_equal(got, exp), "got %s\nwant %s", b->data, want);
    json_decref(got);
    json_decref(exp);
}

START_TEST(test_json_meta_status_one_version)
{
    tfs_version_status vs = {.version = 1, .state = TFS_VERSION_AVAILABLE, .status = {TFS_OK, ""}};
    tfs__buf           b;
    tfs_status         st;
    tfs__buf_init(&b);
    ck_assert_int_eq(tfs__json_model_status(&vs, 1, &b, &st), TFS_OK);
    /* protobuf's JSON printer layout: one space per level */
    ck_assert_str_eq(b.data, "{\n"
                             " \"model_version_status\": [\n"
                             "  {\n"
                             "   \"version\": \"1\",\n"
                             "   \"state\": \"AVAILABLE\",\n"
                             "   \"status\": {\n"
                             "    \"error_code\": \"OK\",\n"
                             "    \"error_message\": \"\"\n"
                             "   }\n"
                             "  }\n"
                             " ]\n"
                             "}");
    tfs__buf_deinit(&b);
}
END_TEST

START_TEST(test_json_meta_status_versions)
{
    tfs_version_status vs[3] = {
        {.version = 124, .state = TFS_VERSION_AVAILABLE, .status = {TFS_OK, ""}},
        {.version = 123, .state = TFS_VERSION_END, .status = {TFS_DATA_LOSS, ""}},
        {.version = 9000000000LL, .state = TFS_VERSION_LOADING, .status = {TFS_OK, ""}},
    };
    strcpy(vs[1].status.msg, "variables.index: bad \"crc\"");
    tfs__buf   b;
    tfs_status st;
    tfs__buf_init(&b);
    ck_assert_int_eq(tfs__json_model_status(vs, 3, &b, &st), TFS_OK);
    expect_json(&b, "{\"model_version_status\": ["
                    "{\"version\": \"124\", \"state\": \"AVAILABLE\","
                    " \"status\": {\"error_code\": \"OK\", \"error_message\": \"\"}},"
                    "{\"version\": \"123\", \"state\": \"END\","
                    " \"status\": {\"error_code\": \"DATA_LOSS\","
                    " \"error_message\": \"variables.index: bad \\\"crc\\\"\"}},"
                    "{\"version\": \"9000000000\", \"state\": \"LOADING\","
                    " \"status\": {\"error_code\": \"OK\", \"error_message\": \"\"}}]}");
    /* order is kept (the loader gives newest first) */
    ck_assert_ptr_nonnull(strstr(b.data, "\"124\""));
    ck_assert(strstr(b.data, "\"124\"") < strstr(b.data, "\"123\""));
    tfs__buf_deinit(&b);
}
END_TEST

/* ---- metadata ------------------------------------------------------------------------------- */

#define INFO(alias, name, dt) {alias, name, dt, {2, {-1, 1}}}

static tfs_tensor_info in_x = INFO("x", "x:0", TFS_DTYPE_FLOAT);
static tfs_tensor_info out_y = INFO("y", "y:0", TFS_DTYPE_FLOAT);
static tfs_tensor_info in_x2 = INFO("inputs", "x2:0", TFS_DTYPE_FLOAT);
static tfs_tensor_info out_y3 = INFO("outputs", "y3:0", TFS_DTYPE_FLOAT);
static tfs_tensor_info in_ex = {"inputs", "tf_example:0", TFS_DTYPE_STRING, {-1, {0}}};
static tfs_tensor_info out_scores = INFO("scores", "y:0", TFS_DTYPE_FLOAT);
static tfs_tensor_info out_o_y2 = INFO("outputs", "y2:0", TFS_DTYPE_FLOAT);
static tfs_tensor_info out_o_y = INFO("outputs", "y:0", TFS_DTYPE_FLOAT);

#define SIG(k, m, in, out) \
    {.key = k, .method_name = "tensorflow/serving/" m, .n_inputs = 1, .inputs = &in, \
     .n_outputs = 1, .outputs = &out}

/* The five signatures of TF Serving's half_plus_two test model, written by hand. */
static tfs_signature half_plus_two[] = {
    SIG("classify_x_to_y", "classify", in_ex, out_scores),
    SIG("regress_x2_to_y3", "regress", in_x2, out_y3),
    SIG("regress_x_to_y", "regress", in_ex, out_o_y),
    SIG("regress_x_to_y2", "regress", in_ex, out_o_y2),
    SIG("serving_default", "predict", in_x, out_y),
};

START_TEST(test_json_meta_matches_tf_serving)
{
    if (tfs_test_skip_without_fixture(__func__, "tf_serving/half_plus_two_model_metadata.json"))
        return;
    char  path[4096];
    char *want = tfs_test_read_file(
        tfs_test_fixture("tf_serving/half_plus_two_model_metadata.json", path, sizeof path), NULL);
    ck_assert_ptr_nonnull(want);
    const tfs_signature *sigs[5];
    for (int i = 0; i < 5; i++)
        sigs[i] = &half_plus_two[i];
    tfs__buf   b;
    tfs_status st;
    tfs__buf_init(&b);
    ck_assert_int_eq(tfs__json_model_metadata("default", 123, sigs, 5, &b, &st), TFS_OK);
    expect_json(&b, want);
    free(want);
    tfs__buf_deinit(&b);
}
END_TEST

START_TEST(test_json_meta_shapes_and_defaults)
{
    tfs_status  st;
    tfs_tensor *d0, *d1, *d2;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, (int64_t[]){2}, &d0, &st), TFS_OK);
    ((float *)d0->data)[0] = 1.5f;
    ((float *)d0->data)[1] = 2.0f;
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT64, &d1, &st), TFS_OK);
    ((int64_t *)d1->data)[0] = 7;
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_STRING, &d2, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(d2, 0, "hi", 2, &st), TFS_OK);

    tfs_tensor_info ins[] = {
        {"k", "k:0", TFS_DTYPE_INT64, {0, {0}}},                    /* scalar */
        {"r", "r:0", TFS_DTYPE_FLOAT, {-1, {0}}},                   /* unknown rank */
        {"s", NULL, TFS_DTYPE_STRING, {1, {-1}}},                   /* no tensor name */
        {"w", "w:0", TFS_DTYPE_FLOAT + TFS_DTYPE_REF_OFFSET, {3, {2, -1, 5}}},
    };
    tfs_tensor_info outs[] = {{"o", "o:0", TFS_DTYPE_INVALID, {1, {-1}}}};
    char           *dnames[] = {"k", "r", "s"};
    tfs_tensor     *dvals[] = {d1, d0, d2};
    tfs_signature   sig = {.key = "sig", .method_name = "m", .n_inputs = 4, .inputs = ins,
                           .n_outputs = 1, .outputs = outs, .n_defaults = 3,
                           .default_names = dnames, .defaults = dvals};
    const tfs_signature *sigs[] = {&sig};
    tfs__buf             b;
    tfs__buf_init(&b);
    ck_assert_int_eq(tfs__json_model_metadata("m", 5, sigs, 1, &b, &st), TFS_OK);

#define EMPTY_VALS "\"version_number\": 0, \"tensor_content\": \"\", \"half_val\": [], "
#define VALS_TAIL "\"scomplex_val\": [], \"dcomplex_val\": [], \"resource_handle_val\": [], " \
                  "\"variant_val\": [], \"uint32_val\": [], \"uint64_val\": []"
    expect_json(&b,
        "{\"model_spec\": {\"name\": \"m\", \"signature_name\": \"\", \"version\": \"5\"},"
        " \"metadata\": {\"signature_def\": {\"signature_def\": {\"sig\": {"
        "  \"inputs\": {"
        "   \"k\": {\"dtype\": \"DT_INT64\","
        "     \"tensor_shape\": {\"dim\": [], \"unknown_rank\": false},"
        "           \"name\": \"k:0\"},"
        "   \"r\": {\"dtype\": \"DT_FLOAT\","
        "     \"tensor_shape\": {\"dim\": [], \"unknown_rank\": true},"
        "           \"name\": \"r:0\"},"
        "   \"s\": {\"dtype\": \"DT_STRING\", \"tensor_shape\": {\"dim\": [{\"size\": \"-1\","
        "           \"name\": \"\"}], \"unknown_rank\": false}},"
        "   \"w\": {\"dtype\": \"DT_FLOAT_REF\", \"tensor_shape\": {\"dim\": ["
        "           {\"size\": \"2\", \"name\": \"\"}, {\"size\": \"-1\", \"name\": \"\"},"
        "           {\"size\": \"5\", \"name\": \"\"}], \"unknown_rank\": false},"
        "     \"name\": \"w:0\"}},"
        "  \"outputs\": {\"o\": {\"dtype\": \"DT_INVALID\", \"tensor_shape\": {\"dim\": ["
        "           {\"size\": \"-1\", \"name\": \"\"}], \"unknown_rank\": false},"
        "     \"name\": \"o:0\"}},"
        "  \"method_name\": \"m\","
        "  \"defaults\": {"
        "   \"k\": {\"dtype\": \"DT_INT64\","
        "     \"tensor_shape\": {\"dim\": [], \"unknown_rank\": false},"
        "     " EMPTY_VALS "\"float_val\": [], \"double_val\": [], \"int_val\": [],"
        "     \"string_val\": [], \"int64_val\": [\"7\"], \"bool_val\": [], " VALS_TAIL "},"
        "   \"r\": {\"dtype\": \"DT_FLOAT\", \"tensor_shape\": {\"dim\": [{\"size\": \"2\","
        "     \"name\": \"\"}], \"unknown_rank\": false},"
        "     " EMPTY_VALS "\"float_val\": [1.5, 2], \"double_val\": [], \"int_val\": [],"
        "     \"string_val\": [], \"int64_val\": [], \"bool_val\": [], " VALS_TAIL "},"
        "   \"s\": {\"dtype\": \"DT_STRING\","
        "     \"tensor_shape\": {\"dim\": [], \"unknown_rank\": false},"
        "     " EMPTY_VALS "\"float_val\": [], \"double_val\": [], \"int_val\": [],"
        "     \"string_val\": [\"aGk=\"], \"int64_val\": [], \"bool_val\": [], " VALS_TAIL "}"
        "  }}}}}}");
    tfs__buf_deinit(&b);
    tfs_tensor_unref(d0);
    tfs_tensor_unref(d1);
    tfs_tensor_unref(d2);
}
END_TEST

/* The v2 datatype table against the Open Inference Protocol's list, written out here by hand. */
START_TEST(test_v2_datatypes)
{
    static const struct { const char *name; enum tfs_dtype dt; } spec[] = {
        {"BOOL", TFS_DTYPE_BOOL},     {"UINT8", TFS_DTYPE_UINT8},   {"UINT16", TFS_DTYPE_UINT16},
        {"UINT32", TFS_DTYPE_UINT32}, {"UINT64", TFS_DTYPE_UINT64}, {"INT8", TFS_DTYPE_INT8},
        {"INT16", TFS_DTYPE_INT16},   {"INT32", TFS_DTYPE_INT32},   {"INT64", TFS_DTYPE_INT64},
        {"FP16", TFS_DTYPE_HALF},     {"FP32", TFS_DTYPE_FLOAT},    {"FP64", TFS_DTYPE_DOUBLE},
        {"BYTES", TFS_DTYPE_STRING},
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        ck_assert_str_eq(tfs__v2_datatype(spec[i].dt), spec[i].name);
        ck_assert_int_eq(tfs__v2_dtype(spec[i].name, strlen(spec[i].name)), spec[i].dt);
    }
    ck_assert_str_eq(tfs__v2_datatype(TFS_DTYPE_FLOAT + TFS_DTYPE_REF_OFFSET), "FP32");
    ck_assert_ptr_null(tfs__v2_datatype(TFS_DTYPE_RESOURCE));
    ck_assert_ptr_null(tfs__v2_datatype(TFS_DTYPE_COMPLEX64));
    ck_assert_int_eq(tfs__v2_dtype("fp32", 4), TFS_DTYPE_INVALID);   /* the spec's case only */
    ck_assert_int_eq(tfs__v2_dtype("FP3", 3), TFS_DTYPE_INVALID);
    ck_assert_int_eq(tfs__v2_dtype("FP32X", 5), TFS_DTYPE_INVALID);
}
END_TEST

Suite *suite_server_json_meta(void);
Suite *suite_server_json_meta(void)
{
    Suite *s = suite_create("json_meta");
    TCase *tc = tcase_create("documents");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_json_meta_status_one_version);
    tcase_add_test(tc, test_json_meta_status_versions);
    tcase_add_test(tc, test_json_meta_shapes_and_defaults);
    tcase_add_test(tc, test_v2_datatypes);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("documents_fixtures", NULL);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_json_meta_matches_tf_serving);
    suite_add_tcase(s, tc);
    return s;
}
