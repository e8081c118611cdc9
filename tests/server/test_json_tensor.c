/* Predict request decoding (server/json-tensor.c): row and columnar formats against hand-written
 * signatures, dtypes taken from the signature, b64 strings, and every error text TF Serving gives
 * for a malformed body (util/json_tensor.cc). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "server/server-impl.h"

/* ---- signatures ----------------------------------------------------------------------------- */

static tfs_tensor_info x_f32 = {"x", "x:0", TFS_DTYPE_FLOAT, {2, {-1, 1}}};
static tfs_tensor_info y_f32 = {"y", "y:0", TFS_DTYPE_FLOAT, {2, {-1, 1}}};
static tfs_signature   sig_x = {.key = "serving_default",
                                .method_name = "tensorflow/serving/predict",
                                .n_inputs = 1, .inputs = &x_f32, .n_outputs = 1, .outputs = &y_f32};

/* two inputs, sorted by alias: a (int32), b (string) */
static tfs_tensor_info ab_in[] = {
    {"a", "a:0", TFS_DTYPE_INT32, {1, {-1}}},
    {"b", "b:0", TFS_DTYPE_STRING, {1, {-1}}},
};
static tfs_signature sig_ab = {.key = "two", .n_inputs = 2, .inputs = ab_in, .n_outputs = 1,
                               .outputs = &y_f32};

static tfs_tensor_info one_in(const char *alias, enum tfs_dtype dt)
{
    tfs_tensor_info t = {(char *)alias, "t:0", dt, {-1, {0}}};
    return t;
}

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct decoded {
    enum tfs_code         code;
    tfs_status            st;
    enum tfs__json_format fmt;
    tfs_named_tensor     *in;
    int                   n;
} decoded;

static decoded decode_named(const char *body, const tfs_signature *sig, const char *sig_name)
{
    decoded d = {0};
    json_t *doc = NULL;
    d.code = tfs__json_parse(body, strlen(body), &doc, &d.st);
    if (d.code == TFS_OK)
        d.code = tfs__json_decode_predict(doc, sig, sig_name, &d.fmt, &d.in, &d.n, &d.st);
    json_decref(doc);
    return d;
}

static decoded decode(const char *body, const tfs_signature *sig)
{
    return decode_named(body, sig, NULL);
}

static void decoded_free(decoded *d)
{
    tfs__named_tensors_free(d->in, d->n);
    d->in = NULL;
}

/* Asserts that decoding fails with `code` and exactly `msg`. */
static void expect_error(const char *body, const tfs_signature *sig, enum tfs_code code,
                         const char *msg)
{
    decoded d = decode(body, sig);
    ck_assert_msg(d.code == code, "%s: code %s, want %s (%s)", body, tfs_code_name(d.code),
                  tfs_code_name(code), d.st.msg);
    ck_assert_str_eq(d.st.msg, msg);
    ck_assert_ptr_null(d.in);
}

static void expect_shape(const tfs_tensor *t, enum tfs_dtype dt, int rank, const int64_t *dims)
{
    ck_assert_int_eq(t->dtype, dt);
    ck_assert_int_eq(t->rank, rank);
    for (int i = 0; i < rank; i++)
        ck_assert_int_eq(t->dims[i], dims[i]);
}

static void expect_f32(const tfs_tensor *t, int n, const float *want)
{
    ck_assert_int_eq(t->nelem, n);
    for (int i = 0; i < n; i++)   /* exact: small integers and halves are exact in float */
        ck_assert_float_eq(((const float *)t->data)[i], want[i]);
}

static void expect_str(const tfs_tensor *t, int64_t i, const char *want, size_t n)
{
    const tfs_string *s = &((const tfs_string *)t->data)[i];
    ck_assert_uint_eq(s->len, n);
    ck_assert_int_eq(memcmp(s->data, want, n), 0);
}

/* ---- success -------------------------------------------------------------------------------- */

START_TEST(test_json_tensor_row_scalars)
{
    /* ints are fine for a float input: the signature decides the dtype */
    decoded d = decode("{\"instances\": [1.0, 2, 5.5]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(d.fmt, TFS__JSON_ROW);
    ck_assert_int_eq(d.n, 1);
    ck_assert_str_eq(d.in[0].name, "x");
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 1, (int64_t[]){3});
    expect_f32(d.in[0].tensor, 3, (float[]){1.0f, 2.0f, 5.5f});
    decoded_free(&d);
}
END_TEST

START_TEST(test_json_tensor_row_lists)
{
    decoded d =
        decode("{\"instances\": [[1, 2], [3, 4], [5, 6]], \"ignored\": {\"k\": 1}}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 2, (int64_t[]){3, 2});
    expect_f32(d.in[0].tensor, 6, (float[]){1, 2, 3, 4, 5, 6});
    decoded_free(&d);

    /* rows that are empty lists: shape [2, 0] */
    d = decode("{\"instances\": [[], []]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 0});
    decoded_free(&d);
}
END_TEST

START_TEST(test_json_tensor_columnar)
{
    decoded d = decode("{\"inputs\": [[1.5, 2], [3, 4]]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(d.fmt, TFS__JSON_COLUMNAR);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2});
    expect_f32(d.in[0].tensor, 4, (float[]){1.5f, 2, 3, 4});
    decoded_free(&d);

    /* a bare scalar is a rank-0 tensor */
    d = decode("{\"inputs\": 3}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 0, NULL);
    expect_f32(d.in[0].tensor, 1, (float[]){3});
    decoded_free(&d);

    /* an object keyed by input name (extra keys ignored) */
    d = decode("{\"inputs\": {\"x\": [7], \"extra\": \"zzz\"}}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 1, (int64_t[]){1});
    expect_f32(d.in[0].tensor, 1, (float[]){7});
    decoded_free(&d);
}
END_TEST

START_TEST(test_json_tensor_multi_input)
{
    /* columnar: each input may have its own batch size */
    decoded d = decode("{\"inputs\": {\"b\": [\"p\", \"q\", \"r\"], \"a\": [[1], [-2]]}}", &sig_ab);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(d.n, 2);
    ck_assert_str_eq(d.in[0].name, "a");
    expect_shape(d.in[0].tensor, TFS_DTYPE_INT32, 2, (int64_t[]){2, 1});
    ck_assert_int_eq(((int32_t *)d.in[0].tensor->data)[1], -2);
    ck_assert_str_eq(d.in[1].name, "b");
    expect_shape(d.in[1].tensor, TFS_DTYPE_STRING, 1, (int64_t[]){3});
    expect_str(d.in[1].tensor, 2, "r", 1);
    decoded_free(&d);

    /* rows: one object per row, batched along dim 0 */
    d = decode("{\"instances\": [{\"a\": 1, \"b\": \"s\"},"
               " {\"b\": {\"b64\": \"AAE=\"}, \"a\": 2}]}",
               &sig_ab);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(d.fmt, TFS__JSON_ROW);
    ck_assert_int_eq(d.n, 2);
    expect_shape(d.in[0].tensor, TFS_DTYPE_INT32, 1, (int64_t[]){2});
    ck_assert_int_eq(((int32_t *)d.in[0].tensor->data)[0], 1);
    ck_assert_int_eq(((int32_t *)d.in[0].tensor->data)[1], 2);
    expect_shape(d.in[1].tensor, TFS_DTYPE_STRING, 1, (int64_t[]){2});
    expect_str(d.in[1].tensor, 0, "s", 1);
    expect_str(d.in[1].tensor, 1, "\x00\x01", 2);
    decoded_free(&d);

    /* a single-input signature also takes rows as objects */
    d = decode("{\"instances\": [{\"x\": [1, 2]}, {\"x\": [3, 4]}]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 2, (int64_t[]){2, 2});
    decoded_free(&d);
}
END_TEST

START_TEST(test_json_tensor_strings_b64)
{
    tfs_tensor_info s = one_in("s", TFS_DTYPE_STRING);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &s};
    decoded d = decode("{\"instances\": [{\"b64\": \"aGVsbG8=\"}, \"raw\", {\"b64\": \"aGk\"}, "
                       "{\"b64\": \" d29y\\nbGQ= \"}, \"a\\u0000b\"]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_STRING, 1, (int64_t[]){5});
    expect_str(d.in[0].tensor, 0, "hello", 5);
    expect_str(d.in[0].tensor, 1, "raw", 3);
    expect_str(d.in[0].tensor, 2, "hi", 2);      /* padding optional */
    expect_str(d.in[0].tensor, 3, "world", 5);   /* whitespace skipped */
    expect_str(d.in[0].tensor, 4, "a\0b", 3);    /* embedded NUL kept */
    decoded_free(&d);

    /* columnar: a lone b64 object is the scalar tensor */
    d = decode("{\"inputs\": {\"b64\": \"AP8=\"}}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_STRING, 0, NULL);
    expect_str(d.in[0].tensor, 0, "\x00\xff", 2);
    decoded_free(&d);
}
END_TEST

START_TEST(test_json_tensor_other_dtypes)
{
    tfs_tensor_info b = one_in("b", TFS_DTYPE_BOOL);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &b};
    decoded d = decode("{\"inputs\": [true, false, true]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(((bool *)d.in[0].tensor->data)[0], 1);
    ck_assert_int_eq(((bool *)d.in[0].tensor->data)[1], 0);
    decoded_free(&d);

    tfs_tensor_info i64 = one_in("i", TFS_DTYPE_INT64);
    sig.inputs = &i64;
    d = decode("{\"inputs\": [9007199254740993, -9223372036854775807]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert(((int64_t *)d.in[0].tensor->data)[0] == 9007199254740993LL);
    ck_assert(((int64_t *)d.in[0].tensor->data)[1] == -9223372036854775807LL);
    decoded_free(&d);

    tfs_tensor_info f64 = one_in("d", TFS_DTYPE_DOUBLE);
    sig.inputs = &f64;
    d = decode("{\"inputs\": [0.1, 1e300]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert(((double *)d.in[0].tensor->data)[0] == 0.1);
    ck_assert(((double *)d.in[0].tensor->data)[1] == 1e300);
    decoded_free(&d);

    /* a double beyond float range becomes inf for a float input, as TF Serving's cast does */
    d = decode("{\"inputs\": [1e300]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert(isinf(((float *)d.in[0].tensor->data)[0]));
    decoded_free(&d);

    tfs_tensor_info u8 = one_in("u", TFS_DTYPE_UINT8);
    sig.inputs = &u8;
    d = decode("{\"inputs\": [0, 255, 7]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(((uint8_t *)d.in[0].tensor->data)[1], 255);
    decoded_free(&d);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------- */

START_TEST(test_json_tensor_document_errors)
{
    expect_error("", &sig_x, TFS_INVALID_ARGUMENT, "JSON Parse error: The document is empty");
    expect_error("  \n", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Parse error: The document is empty. at offset: 3");
    decoded d = decode("{\"instances\": [1.0,", &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_msg(strncmp(d.st.msg, "JSON Parse error: ", 18) == 0 &&
                      strstr(d.st.msg, " at offset: "),
                  "%s", d.st.msg);
    expect_error("[1, 2]", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: [\n    1,\n    2\n] Is not object");
    expect_error("\"s\"", &sig_x, TFS_INVALID_ARGUMENT, "JSON Value: \"s\" Is not object");
    expect_error("{\"a\": 1}", &sig_x, TFS_INVALID_ARGUMENT, "Missing 'inputs' or 'instances' key");
    expect_error("{\"inputs\": [1], \"instances\": [1]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: {\n    \"inputs\": [\n        1\n    ],\n    \"instances\": [\n"
                 "        1\n    ]\n} Not formatted correctly expecting only one of 'inputs' or "
                 "'instances' keys to exist ");
    expect_error("{\"instances\": 1}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: {\n    \"instances\": 1\n} Excepting 'instances' to be an "
                 "list/array");
    expect_error("{\"instances\": []}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array");

    /* signature_name must be a string */
    json_t    *doc = NULL;
    const char *name = NULL;
    tfs_status st;
    const char *body = "{\"signature_name\": 1, \"instances\": [1]}";
    ck_assert_int_eq(tfs__json_parse(body, strlen(body), &doc, &st), TFS_OK);
    ck_assert_int_eq(tfs__json_signature_name(doc, &name, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "JSON Value: {\n    \"signature_name\": 1,\n    \"instances\": [\n"
                             "        1\n    ]\n} not formatted correctly. 'signature_name' key "
                             "must be a string value.");
    json_decref(doc);
    body = "{\"signature_name\": \"sig\", \"instances\": [1]}";
    ck_assert_int_eq(tfs__json_parse(body, strlen(body), &doc, &st), TFS_OK);
    ck_assert_int_eq(tfs__json_signature_name(doc, &name, &st), TFS_OK);
    ck_assert_str_eq(name, "sig");
    json_decref(doc);

    /* a long quoted request is cut so that the rest of the message survives */
    char big[8192];
    int  o = snprintf(big, sizeof big, "{\"inputs\": 1, \"instances\": [");
    for (int i = 0; i < 1000; i++)
        o += snprintf(big + o, sizeof big - (size_t)o, i ? ",%d" : "%d", i);
    snprintf(big + o, sizeof big - (size_t)o, "]}");
    d = decode(big, &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_msg(strlen(d.st.msg) < 512 && strstr(d.st.msg, "...") &&
                      strstr(d.st.msg, "} Not formatted correctly expecting only one of 'inputs' ") ==
                          NULL &&
                      strstr(d.st.msg, " Not formatted correctly expecting only one of 'inputs' or "
                                       "'instances' keys to exist "),
                  "%s", d.st.msg);

    /* trailing bytes after the document are ignored, as rapidjson stops after one value */
    d = decode("{\"instances\": [1]} trailing", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    decoded_free(&d);
}
END_TEST

START_TEST(test_json_tensor_signature_errors)
{
    tfs_signature empty = {.key = "none"};
    expect_error("{\"instances\": [1]}", &empty, TFS_INVALID_ARGUMENT,
                 "Failed to get input map for signature: DEFAULT");
    decoded d = decode_named("{\"instances\": [1]}", &empty, "none");
    ck_assert_str_eq(d.st.msg, "Failed to get input map for signature: none");
    expect_error("{\"instances\": [1, 2]}", &sig_ab, TFS_INVALID_ARGUMENT,
                 "instances is a plain list, but expecting list of objects as multiple input "
                 "tensors required as per tensorinfo_map");
    expect_error("{\"inputs\": [1, 2]}", &sig_ab, TFS_INVALID_ARGUMENT,
                 "inputs is a plain value/list, but expecting an object as multiple input tensors "
                 "required as per tensorinfo_map");
    expect_error("{\"inputs\": {\"a\": [1]}}", &sig_ab, TFS_INVALID_ARGUMENT,
                 "Missing named input: b in 'inputs' object.");
    expect_error("{\"inputs\": {}}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Missing named input: x in 'inputs' object.");
}
END_TEST

START_TEST(test_json_tensor_row_errors)
{
    expect_error("{\"instances\": [{\"a\": 1, \"b\": \"s\"}, [1]]}", &sig_ab, TFS_INVALID_ARGUMENT,
                 "Expecting object but got list at item 1 of input list");
    expect_error("{\"instances\": [1, {\"x\": 1}]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Expecting value/list but got object at item 1 of input list");
    expect_error("{\"instances\": [{\"a\": 1, \"c\": 2}]}", &sig_ab, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 0 key: c of 'instances' list. Error: "
                 "INVALID_ARGUMENT: "
                 "JSON object: does not have named input: c");
    expect_error("{\"instances\": [{\"a\": 1, \"b\": \"s\"}, {\"a\": 1}]}", &sig_ab,
                 TFS_INVALID_ARGUMENT,
                 "Failed to process element: 1 of 'instances' list. JSON object: "
                 "{\n    \"a\": 1\n} "
                 "keys must be equal to: a,b");
    expect_error("{\"instances\": [[1, 2], [1, 2, 3]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
                 "Expecting tensor size: 2 but got: 3");
    expect_error("{\"instances\": [[[1, 2]], [1, 2]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
                 "Expecting shape [1,2] but got: [2]");
    expect_error("{\"instances\": [{\"a\": \"x\", \"b\": \"s\"}]}", &sig_ab, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 0 key: a of 'instances' list. Error: "
                 "INVALID_ARGUMENT: "
                 "JSON Value: \"x\" Type: String is not of expected type: int32");
    tfs_tensor_info h = one_in("h", TFS_DTYPE_HALF);
    tfs_signature   sig_h = {.key = "k", .n_inputs = 1, .inputs = &h};
    expect_error("{\"instances\": [1.5]}", &sig_h, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 0 of 'instances' list. Error: UNIMPLEMENTED: "
                 "Conversion of JSON Value: 1.5 to type: half");
}
END_TEST

START_TEST(test_json_tensor_shape_errors)
{
    expect_error("{\"inputs\": [[1, 2], [3]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Encountered list at unexpected size: 1 at level: 1 expected size: 2");
    expect_error("{\"inputs\": [1, [2]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Encountered list at unexpected level: 1 expected < 1");
    expect_error("{\"inputs\": [[1, 2], 3]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: 3 found at incorrect level: 2 in the JSON DOM. Expected at level: 2");
    expect_error("{\"inputs\": [[[[[[[[[1]]]]]]]]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "input 'x' has more than 8 dimensions, the most tfserve supports");
}
END_TEST

START_TEST(test_json_tensor_value_errors)
{
    expect_error("{\"inputs\": [\"a\"]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: \"a\" Type: String is not of expected type: float");
    expect_error("{\"inputs\": [null]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: null Type: Null is not of expected type: float");
    expect_error("{\"inputs\": [true]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: true Type: True is not of expected type: float");
    expect_error("{\"inputs\": [{\"b64\": \"AA==\"}]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Value: {\n    \"b64\": \"AA==\"\n} Type: Object is not of expected "
                 "type: float");
    tfs_tensor_info i32 = one_in("i", TFS_DTYPE_INT32);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &i32};
    expect_error("{\"inputs\": [1.5]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 1.5 Type: Number is not of expected type: int32");
    expect_error("{\"inputs\": [3000000000]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 3000000000 Type: Number is not of expected type: int32");
    tfs_tensor_info b = one_in("b", TFS_DTYPE_BOOL);
    sig.inputs = &b;
    expect_error("{\"inputs\": [1]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 1 Type: Number is not of expected type: bool");
    tfs_tensor_info u32 = one_in("u", TFS_DTYPE_UINT32);
    sig.inputs = &u32;
    expect_error("{\"inputs\": [-1]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: -1 Type: Number is not of expected type: uint32");
    tfs_tensor_info s = one_in("s", TFS_DTYPE_STRING);
    sig.inputs = &s;
    expect_error("{\"inputs\": [{\"b64\": 1}]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: {\n    \"b64\": 1\n} not formatted correctly for base64 data");
    expect_error("{\"inputs\": [{\"b64\": \"AA==\", \"x\": 1}]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: {\n    \"b64\": \"AA==\",\n    \"x\": 1\n} not formatted correctly "
                 "for base64 data");
    expect_error("{\"inputs\": {\"b64\": \"!!!!\"}}", &sig, TFS_INVALID_ARGUMENT,
                 "Unable to base64 decode");
    expect_error("{\"inputs\": [5]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 5 Type: Number is not of expected type: string");
    tfs_tensor_info h = one_in("h", TFS_DTYPE_HALF);
    sig.inputs = &h;
    expect_error("{\"inputs\": [0.1]}", &sig, TFS_UNIMPLEMENTED,
                 "Conversion of JSON Value: 0.1 to type: half");
}
END_TEST

START_TEST(test_json_tensor_base64_codec)
{
    char   out[16];
    size_t n = 0;
    ck_assert(tfs__base64_decode("TWFu", 4, out, &n) && n == 3 && memcmp(out, "Man", 3) == 0);
    ck_assert(tfs__base64_decode("TWE=", 4, out, &n) && n == 2 && memcmp(out, "Ma", 2) == 0);
    ck_assert(tfs__base64_decode("TQ==", 4, out, &n) && n == 1 && out[0] == 'M');
    ck_assert(tfs__base64_decode("TQ", 2, out, &n) && n == 1 && out[0] == 'M');
    ck_assert(tfs__base64_decode("", 0, out, &n) && n == 0);
    ck_assert(!tfs__base64_decode("T", 1, out, &n));
    ck_assert(!tfs__base64_decode("TQ=", 3, out, &n));
    ck_assert(!tfs__base64_decode("T===", 4, out, &n));
    ck_assert(!tfs__base64_decode("TQ==TQ==", 8, out, &n));
    ck_assert(!tfs__base64_decode("a-b_", 4, out, &n));   /* web-safe alphabet is not accepted */
    tfs__buf b;
    tfs__buf_init(&b);
    tfs__base64_encode(&b, "Man", 3);
    tfs__base64_encode(&b, "Ma", 2);
    tfs__base64_encode(&b, "M", 1);
    tfs__base64_encode(&b, "\xff\xfe", 2);
    ck_assert_str_eq(b.data, "TWFuTWE=TQ==//4=");
    tfs__buf_deinit(&b);
}
END_TEST

/* Every allocation of a decode failing in turn: the result is success or RESOURCE_EXHAUSTED (or
 * the request's own error, never a different one), and nothing leaks. */
START_TEST(test_json_tensor_out_of_memory)
{
    const char *bodies[] = {
        "{\"instances\": [{\"a\": [1, 2], \"b\": [{\"b64\": \"aGVsbG8=\"}, \"x\"]},"
        " {\"a\": [3, 4], \"b\": [\"y\", \"z\"]}]}",
        "{\"inputs\": {\"a\": [[1], [2]], \"b\": [\"p\", {\"b64\": \"AAE=\"}]}}",
    };
    for (size_t k = 0; k < 2; k++) {
        int64_t base = tfs_alloc_bytes_in_use();
        bool    done = false;
        for (int64_t n = 1; n < 500 && !done; n++) {
            tfs_alloc_fail_after(n);
            decoded d = decode(bodies[k], &sig_ab);
            tfs_alloc_fail_after(0);
            ck_assert_msg(d.code == TFS_OK || d.code == TFS_RESOURCE_EXHAUSTED,
                          "body %zu, failing allocation %lld: %s: %s", k, (long long)n,
                          tfs_code_name(d.code), d.st.msg);
            done = d.code == TFS_OK;
            if (done) {
                ck_assert_int_eq(d.n, 2);
                expect_shape(d.in[1].tensor, TFS_DTYPE_STRING, k == 0 ? 2 : 1,
                             k == 0 ? (int64_t[]){2, 2} : (int64_t[]){2});
            }
            decoded_free(&d);
            ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
        }
        ck_assert(done);
    }
}
END_TEST

Suite *suite_server_json_tensor(void);
Suite *suite_server_json_tensor(void)
{
    Suite *s = suite_create("json_tensor");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_json_tensor_row_scalars);
    tcase_add_test(tc, test_json_tensor_row_lists);
    tcase_add_test(tc, test_json_tensor_columnar);
    tcase_add_test(tc, test_json_tensor_multi_input);
    tcase_add_test(tc, test_json_tensor_strings_b64);
    tcase_add_test(tc, test_json_tensor_other_dtypes);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_json_tensor_document_errors);
    tcase_add_test(tc, test_json_tensor_signature_errors);
    tcase_add_test(tc, test_json_tensor_row_errors);
    tcase_add_test(tc, test_json_tensor_shape_errors);
    tcase_add_test(tc, test_json_tensor_value_errors);
    tcase_add_test(tc, test_json_tensor_base64_codec);
    tcase_add_test(tc, test_json_tensor_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
