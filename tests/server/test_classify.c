/* Classify and Regress: the JSON -> tf.Example wire bytes (server/json-example.c, checked byte for
 * byte against what protobuf writes for feature.proto), every request error text of TF Serving's
 * section 1.7, the service layer's signature checks (server/service-example.c), and the REST
 * answers on TF Serving's half_plus_two fixtures (TF1 and TF2), in process through rest.c and
 * through the real tfserve binary. Fixture tests are cases of their own, reported skipped when the
 * TensorFlow fixtures are absent.
 *
 * Expected numbers are hand-computed from the fixtures' variables: y = 0.5 x + 2, y3 = 0.5 x2 + 3;
 * all inputs and results are exact in binary floating point, so JSON texts compare exactly. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

#define TF1_BASE "tf_serving/saved_model_half_plus_two_cpu"
#define TF2_BASE "tf_serving/saved_model_half_plus_two_tf2_cpu"

/* ---- JSON -> serialized Example ------------------------------------------------------------- */

/* Decodes body and returns the serialized examples; asserts success. The signature name is
 * borrowed from *doc (tfs__jdoc_deinit it last). */
static tfs__json_examples decode_ok(const char *body, tfs__jdoc *doc)
{
    tfs_status         st;
    tfs__json_examples ex;
    tfs__jdoc_init(doc);
    ck_assert_msg(tfs__json_parse(body, strlen(body), doc, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs__json_decode_examples(doc->root, &ex, &st) == TFS_OK, "%s: %s", body,
                  st.msg);
    return ex;
}

static void expect_bytes(const tfs_string *s, const unsigned char *want, size_t n)
{
    ck_assert_msg(s->len == n, "serialized length %zu, want %zu", s->len, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg((unsigned char)s->data[i] == want[i], "byte %zu: %02x, want %02x", i,
                      (unsigned char)s->data[i], want[i]);
}

START_TEST(test_example_wire_bytes)
{
    /* {"x": 1.0}: Example{features{feature{key "x" value{float_list{value [1.0] packed}}}}} */
    static const unsigned char x_float[] = {0x0a, 0x0f, 0x0a, 0x0d, 0x0a, 0x01, 0x78, 0x12, 0x08,
                                            0x12, 0x06, 0x0a, 0x04, 0x00, 0x00, 0x80, 0x3f};
    /* {"x": 2}: int64_list [2] */
    static const unsigned char x_int[] = {0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 0x78,
                                          0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x02};
    /* {"s": ["ab", {"b64": "AAE="}]}: bytes_list ["ab", "\0\1"] */
    static const unsigned char s_bytes[] = {0x0a, 0x11, 0x0a, 0x0f, 0x0a, 0x01, 0x73,
                                            0x12, 0x0a, 0x0a, 0x08, 0x0a, 0x02, 0x61,
                                            0x62, 0x0a, 0x02, 0x00, 0x01};
    /* {"b": [true, false, -1]}: int64_list [1, 0, -1], -1 as a 10-byte varint */
    static const unsigned char b_bools[] = {0x0a, 0x17, 0x0a, 0x15, 0x0a, 0x01, 0x62, 0x12, 0x10,
                                            0x1a, 0x0e, 0x0a, 0x0c, 0x01, 0x00, 0xff, 0xff, 0xff,
                                            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};

    tfs__jdoc          doc;
    tfs__json_examples ex = decode_ok("{\"examples\": [{\"x\": 1.0}, {\"x\": [2]}, {}]}", &doc);
    ck_assert_int_eq(ex.n, 3);
    ck_assert_ptr_null(ex.signature_name);
    expect_bytes(&ex.examples[0], x_float, sizeof x_float);
    expect_bytes(&ex.examples[1], x_int, sizeof x_int);
    ck_assert_uint_eq(ex.examples[2].len, 0); /* {} is the empty Example */
    tfs__json_examples_deinit(&ex);
    tfs__jdoc_deinit(&doc);

    ex = decode_ok("{\"signature_name\": \"s\", \"examples\": [{\"s\": [\"ab\", {\"b64\": "
                   "\"AAE=\"}]}, {\"b\": [true, false, -1]}]}",
                   &doc);
    ck_assert_str_eq(ex.signature_name, "s");
    expect_bytes(&ex.examples[0], s_bytes, sizeof s_bytes);
    expect_bytes(&ex.examples[1], b_bools, sizeof b_bools);
    tfs__json_examples_deinit(&ex);
    tfs__jdoc_deinit(&doc);

    /* NaN / -Infinity tokens and an integer beyond uint64 are decimals: a float_list (TF Serving
     * parses them as rapidjson doubles) */
    static const unsigned char x_nonfinite[] = {
        0x0a, 0x17, 0x0a, 0x15, 0x0a, 0x01, 0x78, 0x12, 0x10, 0x12, 0x0e, 0x0a, 0x0c,
        0x00, 0x00, 0xc0, 0x7f, 0x00, 0x00, 0x80, 0xff, 0x00, 0x00, 0x80, 0x5f};
    ex = decode_ok("{\"examples\": [{\"x\": [NaN, -Infinity, 18446744073709551616]}]}", &doc);
    expect_bytes(&ex.examples[0], x_nonfinite, sizeof x_nonfinite);
    tfs__json_examples_deinit(&ex);
    tfs__jdoc_deinit(&doc);

    /* {"i": -9223372036854775808}: int64 min, a 10-byte varint */
    static const unsigned char i_min[] = {0x0a, 0x15, 0x0a, 0x13, 0x0a, 0x01, 0x69, 0x12, 0x0e,
                                          0x1a, 0x0c, 0x0a, 0x0a, 0x80, 0x80, 0x80, 0x80, 0x80,
                                          0x80, 0x80, 0x80, 0x80, 0x01};
    ex = decode_ok("{\"examples\": [{\"i\": -9223372036854775808}]}", &doc);
    expect_bytes(&ex.examples[0], i_min, sizeof i_min);
    tfs__json_examples_deinit(&ex);
    tfs__jdoc_deinit(&doc);

    /* with a context: serialized(context) immediately followed by serialized(example) */
    ex = decode_ok("{\"context\": {\"x\": 2}, \"examples\": [{\"x\": 1.0}]}", &doc);
    ck_assert_int_eq(ex.n, 1);
    unsigned char both[sizeof x_int + sizeof x_float];
    memcpy(both, x_int, sizeof x_int);
    memcpy(both + sizeof x_int, x_float, sizeof x_float);
    expect_bytes(&ex.examples[0], both, sizeof both);
    tfs__json_examples_deinit(&ex);
    tfs__jdoc_deinit(&doc);
}
END_TEST

static void expect_decode_error(const char *body, const char *msg)
{
    tfs__jdoc          doc;
    tfs_status         st;
    tfs__json_examples ex;
    tfs__jdoc_init(&doc);
    ck_assert_msg(tfs__json_parse(body, strlen(body), &doc, &st) == TFS_OK, "%s", st.msg);
    ck_assert_msg(tfs__json_decode_examples(doc.root, &ex, &st) == TFS_INVALID_ARGUMENT,
                  "%s: accepted", body);
    /* a leading '*' asks for a substring match (texts that quote the whole request) */
    ck_assert_msg(msg[0] == '*' ? strstr(st.msg, msg + 1) != NULL : strcmp(st.msg, msg) == 0,
                  "%s:\n got  %s\n want %s", body, st.msg, msg);
    ck_assert_int_eq(ex.n, 0);
    ck_assert_ptr_null(ex.examples);
    tfs__jdoc_deinit(&doc);
}

START_TEST(test_example_json_errors)
{
    expect_decode_error("{}",
                        "When method is classify, key 'examples' is expected and was not found");
    expect_decode_error("{\"examples\": {\"x\": 1}}",
                        "Expecting 'examples' value to be an list/array");
    expect_decode_error("{\"examples\": []}", "'examples' value is an empty array");
    expect_decode_error("{\"examples\": [[1]]}", "Example must be JSON object but got JSON Array");
    expect_decode_error("{\"examples\": [{\"x\": 1}, 3]}",
                        "Example must be JSON object but got JSON Number");
    expect_decode_error("{\"context\": \"c\", \"examples\": [{}]}",
                        "Example must be JSON object but got JSON String");
    expect_decode_error("{\"examples\": [{\"f\": null}]}",
                        "Feature: f has element with unexpected JSON type: Null");
    expect_decode_error("{\"examples\": [{\"f\": [[1]]}]}",
                        "Feature: f has element with unexpected JSON type: Array");
    expect_decode_error("{\"examples\": [{\"f\": {\"a\": 1}}]}",
                        "Feature: f has element with unexpected JSON type: Object");
    expect_decode_error("{\"examples\": [{\"f\": [1, 2.5]}]}",
                        "Unexpected element type in feature: f expecting type: int64");
    expect_decode_error("{\"examples\": [{\"f\": [2.5, \"a\"]}]}",
                        "Unexpected element type in feature: f expecting type: float");
    expect_decode_error("{\"examples\": [{\"f\": [\"a\", true]}]}",
                        "Unexpected element type in feature: f expecting type: bytes");
    expect_decode_error("{\"examples\": [{\"f\": {\"b64\": \"*\"}}]}", "Unable to base64 decode");
    expect_decode_error("{\"examples\": [{\"f\": [1, NaN]}]}",
                        "Unexpected element type in feature: f expecting type: int64");
    expect_decode_error("{\"signature_name\": 1, \"examples\": [{}]}",
                        "*not formatted correctly. 'signature_name' key must be a string value.");
}
END_TEST

/* ---- REST, in process ----------------------------------------------------------------------- */

static tfs_loader *load(const char *name, const char *base)
{
    tfs_loader      *l;
    tfs_status       st;
    tfs_model_config mc = {.name = name, .base_path = base};
    tfs_loader_opts  lo = tfs_loader_opts_default();
    lo.file_system_poll_wait_seconds = 0;   /* no poll thread allocating beside the OOM tests */
    ck_assert_msg(tfs_loader_new(&mc, 1, &lo, &l, &st) == TFS_OK, "%s", st.msg);
    return l;
}

static tfs_loader *load_demo(void)
{
    static char base[4096];
    snprintf(base, sizeof base, "%s/models/half_plus_two", TFS_BINARY_DIR);
    return load("half_plus_two", base);
}

/* Status and body (compared as JSON) of one request through rest.c. */
static void expect(tfs_loader *l, const char *path, const char *body, int status, const char *want)
{
    tfs__rest_response r;
    json_error_t       err;
    tfs__rest_process(l, "POST", path, body, strlen(body), &r);
    ck_assert_msg(r.http_status == status, "%s %s: %d, want %d: %s", path, body, r.http_status,
                  status, r.body.data);
    ck_assert_str_eq(r.content_type, "application/json");
    json_t *got = json_loads(r.body.data, 0, &err), *exp = json_loads(want, 0, &err);
    ck_assert_msg(got && exp, "bad JSON: %s / %s", r.body.data, want);
    ck_assert_msg(json_equal(got, exp), "%s %s:\n got  %s\n want %s", path, body, r.body.data,
                  want);
    json_decref(got);
    json_decref(exp);
    tfs__buf_deinit(&r.body);
}

/* Status and an error body that starts with `prefix`. */
static void expect_error(tfs_loader *l, const char *path, const char *body, int status,
                         const char *prefix)
{
    tfs__rest_response r;
    tfs__rest_process(l, "POST", path, body, strlen(body), &r);
    json_t     *j = json_loads(r.body.data, 0, NULL);
    const char *msg = json_string_value(json_object_get(j, "error"));
    ck_assert_msg(r.http_status == status && msg && json_object_size(j) == 1, "%s %s: %d %s", path,
                  body, r.http_status, r.body.data);
    ck_assert_msg(strncmp(msg, prefix, strlen(prefix)) == 0, "%s %s:\n got  %s\n want %s...", path,
                  body, msg, prefix);
    json_decref(j);
    tfs__buf_deinit(&r.body);
}

/* Status and an error body that contains `needle`. */
static void expect_error_has(tfs_loader *l, const char *path, const char *body, int status,
                             const char *needle)
{
    tfs__rest_response r;
    tfs__rest_process(l, "POST", path, body, strlen(body), &r);
    json_t     *j = json_loads(r.body.data, 0, NULL);
    const char *msg = json_string_value(json_object_get(j, "error"));
    ck_assert_msg(r.http_status == status && msg && json_object_size(j) == 1, "%s %s: %d %s", path,
                  body, r.http_status, r.body.data);
    ck_assert_msg(strstr(msg, needle), "%s %s:\n got  %s\n want ...%s...", path, body, msg, needle);
    json_decref(j);
    tfs__buf_deinit(&r.body);
}

/* The demo model has only serving_default (x -> y): no classify/regress signature. */
START_TEST(test_classify_signature_contract)
{
    tfs_loader *l = load_demo();
    const char *c = "/v1/models/half_plus_two:classify", *r = "/v1/models/half_plus_two:regress";
    expect_error(
        l, c, "{\"examples\": [{\"x\": 1.0}]}", 400,
        "No classification inputs found in SignatureDef: inputs {\n  key: \"x\"\n  value {\n"
        "    name: \"x:0\"\n    dtype: DT_FLOAT\n");
    expect_error(l, r, "{\"examples\": [{\"x\": 1.0}]}", 400,
                 "No regression inputs found in SignatureDef: inputs {");
    expect_error(l, c, "{\"signature_name\": \"nope\", \"examples\": [{}]}", 400,
                 "No signature was found with the name: nope");
    expect_error(l, r, "{\"signature_name\": \"nope\", \"examples\": [{}]}", 400,
                 "No signature was found with the name: nope");
    /* JSON errors come before the model lookup, as in TF Serving */
    expect_error(l, "/v1/models/nope:regress", "{\"examples\": []}", 400,
                 "'examples' value is an empty array");
    expect_error(l, "/v1/models/nope:regress", "{\"examples\": [{}]}", 404,
                 "Servable not found for request: Latest(nope)");
    expect_error(l, "/v1/models/half_plus_two/versions/9:classify", "{\"examples\": [{}]}", 404,
                 "Servable not found for request: Specific(half_plus_two, 9)");
    expect_error(l, c, "{\"examples\": [{\"x\": 1.0}", 400, "JSON Parse error");
    /* integers above int64 parse (as rapidjson's uint64) and are refused by the feature typing;
     * beyond uint64 they are decimals, so float features */
    expect_error(l, c, "{\"examples\": [{\"x\": 18446744073709551615}]}", 400,
                 "Feature: x has uint64_t element. Only int64_t is supported.");
    expect_error(l, c, "{\"examples\": [{\"x\": 9223372036854775808}]}", 400,
                 "Feature: x has uint64_t element. Only int64_t is supported.");
    expect_error(l, c, "{\"examples\": [{\"x\": 1e39}]}", 400,
                 "Cannot convert JSON value: 1e+39 to float without loss of precision.");
    tfs_loader_free(l);

    /* the service layer itself: no examples */
    tfs_status          st;
    tfs__regress_result rr;
    tfs_model_spec      spec = {"half_plus_two", -1, NULL, NULL};
    l = load_demo();
    ck_assert_int_eq(tfs__service_regress(l, &spec, NULL, 0, &rr, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "No regression inputs found in SignatureDef: inputs {\n  key: \"x\"\n"
                             "  value {\n    name: \"x:0\"\n    dtype: DT_FLOAT\n"
                             "    tensor_shape {\n      dim {\n        size: -1\n      }\n    }\n"
                             "  }\n}\noutputs {\n  key: \"y\"\n  value {\n    name: \"y:0\"\n"
                             "    dtype: DT_FLOAT\n    tensor_shape {\n      dim {\n"
                             "        size: -1\n      }\n    }\n  }\n}\n"
                             "method_name: \"tensorflow/serving/predict\"\n");
    tfs__regress_result_deinit(&rr);
    tfs_loader_free(l);
}
END_TEST

/* Every signature of a half_plus_two fixture that takes Examples. */
static void check_fixture(tfs_loader *l, bool tf2)
{
    const char *c = "/v1/models/m:classify", *r = "/v1/models/m:regress";
    expect(l, r,
           "{\"signature_name\": \"regress_x_to_y\", \"examples\": [{\"x\": 1.0}, {\"x\": 2.0}]}",
           200, "{\"results\": [2.5, 3.0]}");
    expect(l, c,
           "{\"signature_name\": \"classify_x_to_y\", \"examples\": [{\"x\": 1.0}, {\"x\": 2.0}]}",
           200, "{\"results\": [[[\"\", 2.5]], [[\"\", 3.0]]]}");
    /* y2 = 0.5 x + 3 */
    expect(l, r, "{\"signature_name\": \"regress_x_to_y2\", \"examples\": [{\"x\": 4.0}]}", 200,
           "{\"results\": [5.0]}");
    /* context x=1.0, example x=3.0: the example's feature wins; extra features are ignored */
    expect(l, r,
           "{\"signature_name\": \"regress_x_to_y\", \"context\": {\"x\": 1.0, \"k\": \"v\"},"
           " \"examples\": [{\"x\": 3.0}, {\"x\": -4.0, \"z\": [1, 2]}]}",
           200, "{\"results\": [3.5, 0.0]}");
    /* only the context has x */
    expect(
        l, c,
        "{\"signature_name\": \"classify_x_to_y\", \"context\": {\"x\": 6.0}, \"examples\": [{}]}",
        200, "{\"results\": [[[\"\", 5.0]]]}");
    /* `2` is an int64_list: ParseExample refuses it for the float feature x */
    expect_error_has(l, r, "{\"signature_name\": \"regress_x_to_y\", \"examples\": [{\"x\": 2}]}",
                     400, "Data types don't match. Data type: int64 but expected type: float");
    expect_error_has(l, c,
                     "{\"signature_name\": \"classify_x_to_y\", \"examples\": [{\"x\": \"a\"}]}",
                     400, "Data types don't match. Data type: string but expected type: float");
    /* x is required (no default) */
    expect_error_has(l, r, "{\"signature_name\": \"regress_x_to_y\", \"examples\": [{\"y\": 2.0}]}",
                     400, "Feature: x (data type: float) is required but could not be found.");
    /* the signatures' contracts: regress wants one output "outputs", classify classes/scores */
    expect_error(l, c, "{\"signature_name\": \"regress_x_to_y\", \"examples\": [{\"x\": 1.0}]}",
                 400,
                 "Expected classification signature outputs to contain at least one of "
                 "\"classes\" or \"scores\". Signature was: inputs {");
    expect_error(l, r, "{\"signature_name\": \"classify_x_to_y\", \"examples\": [{\"x\": 1.0}]}",
                 400, "No regression outputs found in SignatureDef: inputs {");
    expect_error(l, r, "{\"examples\": [{\"x\": 1.0}]}", 400,
                 "No regression inputs found in SignatureDef: inputs {\n  key: \"x\"");
    expect_error(l, c, "{\"signature_name\": \"nope\", \"examples\": [{}]}", 400,
                 "No signature was found with the name: nope");
    /* regress_x2_to_y3's input is the float tensor x2 (TF1: x2:0, TF2: a float [1] placeholder),
     * not serialized Examples: feeding it the DT_STRING batch fails (TF Serving: "Expects arg[0]
     * to be float but string is provided", also INVALID_ARGUMENT); the graph's own check names
     * the placeholder (TF2) or the Mul node (TF1, whose x2:0 is an Identity) */
    expect_error_has(l, r,
                     "{\"signature_name\": \"regress_x2_to_y3\", \"examples\": [{\"x2\": 1.0}]}",
                     400, "string");
    if (!tf2) /* the same signature through Predict (method names are not checked): y3 = 0.5 x2 + 3
               */
        expect(l, "/v1/models/m:predict",
               "{\"signature_name\": \"regress_x2_to_y3\", \"inputs\": [[1.0], [2.0]]}", 200,
               "{\"outputs\": [[3.5], [4.0]]}");
}

START_TEST(test_classify_tf1_fixture)
{
    char base[4096];
    if (tfs_test_skip_without_fixture(__func__, TF1_BASE))
        return;
    tfs_loader *l = load("m", tfs_test_fixture(TF1_BASE, base, sizeof base));
    check_fixture(l, false);
    tfs_loader_free(l);
}
END_TEST

START_TEST(test_classify_tf2_fixture)
{
    char base[4096];
    if (tfs_test_skip_without_fixture(__func__, TF2_BASE))
        return;
    tfs_loader *l = load("m", tfs_test_fixture(TF2_BASE, base, sizeof base));
    check_fixture(l, true);
    tfs_loader_free(l);
}
END_TEST

/* What rest.c does for :classify / :regress once the body is parsed. */
static enum tfs_code call(tfs_loader *l, const char *model, bool classify, const tfs__jv *doc,
                          tfs__buf *out, tfs_status *st)
{
    tfs__json_examples   ex;
    tfs__classify_result cr = {0};
    tfs__regress_result  rr = {0};
    enum tfs_code        code = tfs__json_decode_examples(doc, &ex, st);
    tfs_model_spec       spec = {model, -1, NULL, ex.signature_name};
    if (code == TFS_OK && classify &&
        (code = tfs__service_classify(l, &spec, ex.examples, ex.n, &cr, st)) == TFS_OK)
        code = tfs__json_encode_classify(&cr, out, st);
    if (code == TFS_OK && !classify &&
        (code = tfs__service_regress(l, &spec, ex.examples, ex.n, &rr, st)) == TFS_OK)
        code = tfs__json_encode_regress(&rr, out, st);
    tfs__classify_result_deinit(&cr);
    tfs__regress_result_deinit(&rr);
    tfs__json_examples_deinit(&ex);
    return code;
}

/* Every allocation of a classify/regress call failing in turn: the right answer or
 * RESOURCE_EXHAUSTED, nothing leaked. On the TF1 fixture (tf1: the whole success path) or on the
 * demo model (the signature-contract failure path). The JSON is parsed before the failures start
 * (the parser's own out-of-memory paths are tested in test_json_tensor.c). Frees l. */
static void out_of_memory(tfs_loader *l, bool tf1)
{
    const char *bodies[] = {
        "{\"signature_name\": \"regress_x_to_y\", \"context\": {\"k\": [\"v\", {\"b64\": "
        "\"AA==\"}]},"
        " \"examples\": [{\"x\": 1.0}, {\"x\": [2.0], \"i\": [1, true]}]}",
        "{\"signature_name\": \"classify_x_to_y\", \"examples\": [{\"x\": 1.0}, {\"x\": 2.0}]}"};
    const char *want[] = {"{\n    \"results\": [2.5, 3.0]\n}",
                          "{\n    \"results\": [[[\"\", 2.5]], [[\"\", 3.0]]]\n}"};
    for (int k = 0; k < 2; k++) {
        enum tfs_code got = TFS_RESOURCE_EXHAUSTED;
        tfs__jdoc     doc;
        tfs_status    st;
        tfs__jdoc_init(&doc);
        ck_assert(tfs__json_parse(bodies[k], strlen(bodies[k]), &doc, &st) == TFS_OK);
        int64_t before = tfs_alloc_bytes_in_use();
        for (int64_t n = 1; n < 5000 && got == TFS_RESOURCE_EXHAUSTED; n++) {
            tfs__buf out;
            tfs__buf_init(&out);
            tfs_alloc_fail_after(n);
            got = call(l, tf1 ? "m" : "half_plus_two", k == 1, doc.root, &out, &st);
            tfs_alloc_fail_after(0);
            if (got == TFS_OK)
                ck_assert_str_eq(out.data, want[k]);
            tfs__buf_deinit(&out);
            ck_assert_int_eq(tfs_alloc_bytes_in_use(), before);
        }
        ck_assert_msg(got == (tf1 ? TFS_OK : TFS_INVALID_ARGUMENT), "%d %s", got, st.msg);
        tfs__jdoc_deinit(&doc);
    }
    tfs_loader_free(l);
}

START_TEST(test_classify_out_of_memory_demo)
{
    out_of_memory(load_demo(), false);
}
END_TEST

START_TEST(test_classify_out_of_memory_tf1_fixture)
{
    char base[4096];
    if (tfs_test_skip_without_fixture(__func__, TF1_BASE))
        return;
    out_of_memory(load("m", tfs_test_fixture(TF1_BASE, base, sizeof base)), true);
}
END_TEST

/* ---- the real tfserve ----------------------------------------------------------------------- */

static void http_expect(int port, const char *path, const char *body, int status,
                        const char *want_json, const char *want_error)
{
    tfs_http_reply r = tfs_http(port, "POST", path, body);
    ck_assert_msg(r.status == status, "%s %s: %d, want %d: %s", path, body, r.status, status,
                  r.body ? r.body : "");
    json_t *got = json_loads(r.body ? r.body : "", 0, NULL);
    ck_assert_msg(got != NULL, "not JSON: %s", r.body ? r.body : "");
    if (want_json) {
        json_t *exp = json_loads(want_json, 0, NULL);
        ck_assert_msg(exp && json_equal(got, exp), "%s: got %s, want %s", path, r.body, want_json);
        json_decref(exp);
    } else {
        const char *msg = json_string_value(json_object_get(got, "error"));
        ck_assert_msg(msg && strstr(msg, want_error), "%s: got %s, want ...%s...", path, r.body,
                      want_error);
    }
    json_decref(got);
    tfs_http_reply_free(&r);
}

static void e2e_fixture(const char *rel)
{
    char            base[4096], bflag[4200];
    tfs_test_server s;
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", tfs_test_fixture(rel, base, sizeof base));
    const char *flags[] = {"--model_name=hpt", bflag, NULL};
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    http_expect(
        s.rest_port, "/v1/models/hpt:regress",
        "{\"signature_name\": \"regress_x_to_y\", \"examples\": [{\"x\": 1.0}, {\"x\": 2.0}]}", 200,
        "{\"results\": [2.5, 3.0]}", NULL);
    http_expect(
        s.rest_port, "/v1/models/hpt/versions/123:classify",
        "{\"signature_name\": \"classify_x_to_y\", \"examples\": [{\"x\": 1.0}, {\"x\": 2.0}]}",
        200, "{\"results\": [[[\"\", 2.5]], [[\"\", 3.0]]]}", NULL);
    http_expect(s.rest_port, "/v1/models/hpt:regress",
                "{\"signature_name\": \"regress_x_to_y\", \"context\": {\"x\": 1.0},"
                " \"examples\": [{\"x\": 3.0}]}",
                200, "{\"results\": [3.5]}", NULL);
    http_expect(s.rest_port, "/v1/models/hpt:regress",
                "{\"signature_name\": \"regress_x_to_y\", \"examples\": [{\"x\": 2}]}", 400, NULL,
                "Data types don't match");
    http_expect(s.rest_port, "/v1/models/hpt:classify",
                "{\"signature_name\": \"nope\", \"examples\": [{}]}", 400, NULL,
                "No signature was found with the name: nope");
    http_expect(s.rest_port, "/v1/models/hpt:classify", "{\"examples\": 1}", 400, NULL,
                "Expecting 'examples' value to be an list/array");
    int st = tfs_test_server_stop(&s);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tfserve exit status %d; see %s", st,
                  s.log_path);
}

START_TEST(test_classify_e2e_tf1)
{
    if (!tfs_test_skip_without_fixture(__func__, TF1_BASE))
        e2e_fixture(TF1_BASE);
}
END_TEST

START_TEST(test_classify_e2e_tf2)
{
    if (!tfs_test_skip_without_fixture(__func__, TF2_BASE))
        e2e_fixture(TF2_BASE);
}
END_TEST

Suite *suite_server_classify(void);
Suite *suite_server_classify(void)
{
    Suite *s = suite_create("classify");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_example_wire_bytes);
    tcase_add_test(tc, test_example_json_errors);
    tcase_add_test(tc, test_classify_signature_contract);
    tcase_add_test(tc, test_classify_out_of_memory_demo);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("examples_fixtures", NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_classify_tf1_fixture);
    tcase_add_test(tc, test_classify_tf2_fixture);
    tcase_add_test(tc, test_classify_out_of_memory_tf1_fixture);
    suite_add_tcase(s, tc);
    TCase *sys = tfs_test_fixture_case("e2e_fixtures", "system");
    tcase_set_timeout(sys, 120);
    tcase_add_test(sys, test_classify_e2e_tf1);
    tcase_add_test(sys, test_classify_e2e_tf2);
    suite_add_tcase(s, sys);
    return s;
}
