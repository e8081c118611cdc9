/* Predict request decoding (server/json-tensor.c): row and columnar formats against hand-written
 * signatures, dtypes taken from the signature, b64 strings, and every error text TF Serving gives
 * for a malformed body (util/json_tensor.cc). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
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
    decoded   d = {0};
    tfs__jdoc doc;
    tfs__jdoc_init(&doc);
    d.code = tfs__json_parse(body, strlen(body), &doc, &d.st);
    if (d.code == TFS_OK)
        d.code = tfs__json_decode_predict(doc.root, sig, sig_name, &d.fmt, &d.in, &d.n, &d.st);
    tfs__jdoc_deinit(&doc);
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

    /* a decimal too small for a float becomes 0, as TF Serving's cast does (only values beyond
     * the finite range are refused, see test_json_tensor_numbers) */
    d = decode("{\"inputs\": [1e-300]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert(((float *)d.in[0].tensor->data)[0] == 0.0f);
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
    tfs__jdoc   doc;
    const char *name = NULL;
    tfs_status  st;
    const char *body = "{\"signature_name\": 1, \"instances\": [1]}";
    tfs__jdoc_init(&doc);
    ck_assert_int_eq(tfs__json_parse(body, strlen(body), &doc, &st), TFS_OK);
    ck_assert_int_eq(tfs__json_signature_name(doc.root, &name, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "JSON Value: {\n    \"signature_name\": 1,\n    \"instances\": [\n"
                             "        1\n    ]\n} not formatted correctly. 'signature_name' key "
                             "must be a string value.");
    body = "{\"signature_name\": \"sig\", \"instances\": [1]}";
    ck_assert_int_eq(tfs__json_parse(body, strlen(body), &doc, &st), TFS_OK);
    ck_assert_int_eq(tfs__json_signature_name(doc.root, &name, &st), TFS_OK);
    ck_assert_str_eq(name, "sig");
    tfs__jdoc_deinit(&doc);

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

    /* trailing bytes after the document are refused, as rapidjson's ParseStream does without
     * kParseStopWhenDoneFlag; whitespace is fine */
    expect_error("{\"instances\": [1]} trailing", &sig_x, TFS_INVALID_ARGUMENT,
                 "JSON Parse error: The document root must not be followed by other values. at "
                 "offset: 19");
    d = decode("{\"instances\": [1]} \r\n\t", &sig_x);
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


/* ---- rapidjson's grammar (json-parse.c) ----------------------------------------------------- */

/* Decodes len bytes (which may hold NULs). */
static decoded decode_len(const char *body, size_t len, const tfs_signature *sig)
{
    decoded   d = {0};
    tfs__jdoc doc;
    tfs__jdoc_init(&doc);
    d.code = tfs__json_parse(body, len, &doc, &d.st);
    if (d.code == TFS_OK)
        d.code = tfs__json_decode_predict(doc.root, sig, NULL, &d.fmt, &d.in, &d.n, &d.st);
    tfs__jdoc_deinit(&doc);
    return d;
}

/* rapidjson's GetParseError_En texts and error offsets (TF Serving's "JSON Parse error: ..."). */
START_TEST(test_json_tensor_parse_errors)
{
    static const struct {
        const char *body, *msg;
    } cases[] = {
        {"{", "Missing a name for object member. at offset: 1"},
        {"{\"a\" 1}", "Missing a colon after a name of object member. at offset: 5"},
        {"{\"a\": 1 \"b\": 2}", "Missing a comma or '}' after an object member. at offset: 8"},
        {"{\"a\": 1,}", "Missing a name for object member. at offset: 8"},
        {"{\"a\": [1 2]}", "Missing a comma or ']' after an array element. at offset: 9"},
        {"{\"a\": [1,]}", "Invalid value. at offset: 9"},
        {"{\"a\": [1}", "Missing a comma or ']' after an array element. at offset: 8"},
        {"{\"a\": tru}", "Invalid value. at offset: 9"},
        {"{\"a\": nul", "Invalid value. at offset: 9"},
        {"{\"a\": -}", "Invalid value. at offset: 7"},
        {"{\"a\": .5}", "Invalid value. at offset: 6"},
        {"{\"a\": 1.}", "Miss fraction part in number. at offset: 8"},
        {"{\"a\": 1e}", "Miss exponent in number. at offset: 8"},
        {"{\"a\": 1e+}", "Miss exponent in number. at offset: 9"},
        {"{\"a\": 1e309}", "Number too big to be stored in double. at offset: 6"},
        {"{\"a\": -2e308}", "Number too big to be stored in double. at offset: 6"},
        {"{\"a\": 0e400}", "Number too big to be stored in double. at offset: 6"},
        {"{\"a\": NaX}", "Invalid value. at offset: 8"},
        {"{\"a\": Infinit}", "Invalid value. at offset: 13"},
        {"{\"a\": nan}", "Invalid value. at offset: 7"},
        {"{\"a\": 01}", "Missing a comma or '}' after an object member. at offset: 7"},
        {"{\"a\": \"x}", "Missing a closing quotation mark in string. at offset: 9"},
        {"{\"a\": \"x\ty\"}", "Invalid encoding in string. at offset: 8"},
        {"{\"a\": \"\\x\"}", "Invalid escape character in string. at offset: 7"},
        {"{\"a\": \"\\u12G4\"}", "Incorrect hex digit after \\u escape in string. at offset: 7"},
        {"{\"a\": \"\\ud800\"}", "The surrogate pair in string is invalid. at offset: 7"},
        {"{\"a\": \"\\ud800\\u0041\"}", "The surrogate pair in string is invalid. at offset: 7"},
        {"{\"a\": \"\\udc00\"}", "The surrogate pair in string is invalid. at offset: 7"},
        {"{'a': 1}", "Missing a name for object member. at offset: 1"},
        {"[1] [2]", "The document root must not be followed by other values. at offset: 4"},
        {" \t\r\n", "The document is empty. at offset: 4"},
        {"{\"a\": [[[[", "Invalid value. at offset: 10"},
    };
    char want[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(want, sizeof want, "JSON Parse error: %s", cases[i].msg);
        expect_error(cases[i].body, &sig_x, TFS_INVALID_ARGUMENT, want);
    }
    /* a NUL byte reads as the end of the input, as rapidjson's stream Peek() makes it */
    static const char nul_tail[] = "{\"instances\": [1]}\0garbage";
    decoded d = decode_len(nul_tail, sizeof nul_tail - 1, &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    decoded_free(&d);
    static const char nul_in[] = "{\"instances\": [1\0]}";
    d = decode_len(nul_in, sizeof nul_in - 1, &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(d.st.msg, "JSON Parse error: Missing a comma or ']' after an array element. "
                               "at offset: 16");
    decoded_free(&d);
}
END_TEST

/* NaN / Infinity tokens, integers past int64, and TF Serving's lossless-conversion rule. */
START_TEST(test_json_tensor_numbers)
{
    decoded d = decode("{\"instances\": [NaN, Infinity, -Infinity, Inf, -Inf, -NaN]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const float *f = d.in[0].tensor->data;
    ck_assert(isnan(f[0]) && isnan(f[5]));
    ck_assert(isinf(f[1]) && f[1] > 0 && isinf(f[3]) && f[3] > 0);
    ck_assert(isinf(f[2]) && f[2] < 0 && isinf(f[4]) && f[4] < 0);
    decoded_free(&d);

    tfs_tensor_info f64 = one_in("d", TFS_DTYPE_DOUBLE);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &f64};
    d = decode("{\"inputs\": [NaN, -Infinity, 9007199254740991, -9007199254740991, 1e308, "
               "0.1, 18446744073709551616]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const double *g = d.in[0].tensor->data;
    ck_assert(isnan(g[0]) && isinf(g[1]) && g[1] < 0);
    ck_assert(g[2] == 9007199254740991.0 && g[3] == -9007199254740991.0);
    ck_assert(g[4] == 1e308 && g[5] == 0.1 && g[6] == 18446744073709551616.0);
    decoded_free(&d);
    expect_error("{\"inputs\": [9007199254740992]}", &sig, TFS_INVALID_ARGUMENT,
                 "Cannot convert JSON value: 9007199254740992 to double without loss of "
                 "precision.");
    expect_error("{\"inputs\": [-9223372036854775808]}", &sig, TFS_INVALID_ARGUMENT,
                 "Cannot convert JSON value: -9223372036854775808 to double without loss of "
                 "precision.");

    /* float: integers up to 2^24 - 1 in magnitude, decimals within the finite range */
    d = decode("{\"inputs\": [16777215, -16777215, 3.4e38, 1e-50, 2.5]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    f = d.in[0].tensor->data;
    ck_assert(f[0] == 16777215.0f && f[1] == -16777215.0f && f[2] == 3.4e38f && f[3] == 0.0f);
    decoded_free(&d);
    expect_error("{\"inputs\": [16777216]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Cannot convert JSON value: 16777216 to float without loss of precision.");
    expect_error("{\"inputs\": [3.5e38]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Cannot convert JSON value: 3.5e+38 to float without loss of precision.");
    expect_error("{\"inputs\": [-1e300]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Cannot convert JSON value: -1e+300 to float without loss of precision.");
    expect_error("{\"inputs\": [18446744073709551615]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Cannot convert JSON value: 18446744073709551615 to float without loss of "
                 "precision.");
    /* beyond uint64 an integer is a decimal: within float range it converts */
    d = decode("{\"inputs\": [100000000000000000000]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert(((float *)d.in[0].tensor->data)[0] == 1e20f);
    decoded_free(&d);

    /* integer inputs take their ranges, up to 2^64 - 1 for uint64 */
    tfs_tensor_info u64 = one_in("u", TFS_DTYPE_UINT64);
    sig.inputs = &u64;
    d = decode("{\"inputs\": [18446744073709551615, 9223372036854775808, 0]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const uint64_t *u = d.in[0].tensor->data;
    ck_assert(u[0] == UINT64_MAX && u[1] == (uint64_t)1 << 63 && u[2] == 0);
    decoded_free(&d);
    expect_error("{\"inputs\": [18446744073709551616]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 1.84467441e+19 Type: Number is not of expected type: uint64");
    tfs_tensor_info i64 = one_in("i", TFS_DTYPE_INT64);
    sig.inputs = &i64;
    d = decode("{\"inputs\": [-9223372036854775808, 9223372036854775807, -0]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const int64_t *s64 = d.in[0].tensor->data;
    ck_assert(s64[0] == INT64_MIN && s64[1] == INT64_MAX && s64[2] == 0);
    decoded_free(&d);
    expect_error("{\"inputs\": [9223372036854775808]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 9223372036854775808 Type: Number is not of expected type: int64");
    expect_error("{\"inputs\": [-9223372036854775809]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: -9.22337204e+18 Type: Number is not of expected type: int64");
    expect_error("{\"inputs\": [NaN]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: NaN Type: Number is not of expected type: int64");
    expect_error("{\"inputs\": [1e2]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 100.0 Type: Number is not of expected type: int64");
    tfs_tensor_info u32 = one_in("u", TFS_DTYPE_UINT32);
    sig.inputs = &u32;
    d = decode("{\"inputs\": [4294967295]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_uint_eq(((uint32_t *)d.in[0].tensor->data)[0], UINT32_MAX);
    decoded_free(&d);
    expect_error("{\"inputs\": [4294967296]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 4294967296 Type: Number is not of expected type: uint32");
}
END_TEST

/* Every decimal token reads as strtod reads it (correctly rounded), whichever path the parser
 * takes: random significands of 1 to 25 digits, point anywhere, exponents from -330 to 310. */
START_TEST(test_json_tensor_number_values)
{
    tfs_tensor_info f64 = one_in("d", TFS_DTYPE_DOUBLE);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &f64};
    uint32_t        x = 2463534242u;
    char            tok[64], body[128];
    for (int i = 0; i < 20000; i++) {
        size_t o = 0;
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        if (x & 1)
            tok[o++] = '-';
        int ndig = 1 + (int)(x >> 3) % 25, point = (int)(x >> 8) % (ndig + 1);
        for (int k = 0; k < ndig; k++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            if (k == point && k > 0)
                tok[o++] = '.';
            tok[o++] = (char)('0' + (k == 0 && ndig > 1 && point != 1 ? 1 + x % 9 : x % 10));
        }
        if ((x >> 4) & 1)
            o += (size_t)sprintf(tok + o, "e%d", (int)((x >> 5) % 640) - 330);
        tok[o] = 0;
        if (point == 1 && tok[o - 1] == '.')
            continue;
        double want = strtod(tok, NULL);
        snprintf(body, sizeof body, "{\"inputs\": [%s]}", tok);
        decoded d = decode(body, &sig);
        if (isinf(want) || (ndig > 0 && strchr(tok, 'e') && atoi(strchr(tok, 'e') + 1) > 308)) {
            decoded_free(&d);   /* too big for a double: rapidjson's error, tested above */
            continue;
        }
        bool is_int = !strchr(tok, '.') && !strchr(tok, 'e');
        if (is_int && fabs(want) >= 9007199254740992.0) {
            decoded_free(&d);   /* the lossless rule refuses these integers for a double input */
            continue;
        }
        ck_assert_msg(d.code == TFS_OK, "%s: %s", tok, d.st.msg);
        double got = ((double *)d.in[0].tensor->data)[0];
        /* an integer -0 is rapidjson's Int(0): +0 */
        ck_assert_msg(got == want && (is_int || signbit(got) == signbit(want)),
                      "%s: got %.17g, want %.17g", tok, got, want);
        decoded_free(&d);
    }
    /* 19- and 20-digit integers around the int64 / uint64 edges */
    tfs_tensor_info u64 = one_in("u", TFS_DTYPE_UINT64);
    sig.inputs = &u64;
    decoded d = decode("{\"inputs\": [1234567890123456789, 12345678901234567890, "
                       "10000000000000000000]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const uint64_t *u = d.in[0].tensor->data;
    ck_assert(u[0] == 1234567890123456789ULL && u[1] == 12345678901234567890ULL &&
              u[2] == 10000000000000000000ULL);
    decoded_free(&d);
    expect_error("{\"inputs\": [18446744073709551616]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 1.84467441e+19 Type: Number is not of expected type: uint64");
    expect_error("{\"inputs\": [99999999999999999999]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Value: 1e+20 Type: Number is not of expected type: uint64");
}
END_TEST

/* The numbers clients send most: 15 to 19 significant digits (a float or double printed in full),
 * the point anywhere, "0.000..." prefixes, exponents that keep the power of ten within 10^+-30,
 * read as strtod reads them; the digits scanned eight at a time end at any byte. 200,000 tokens, in
 * bodies of 500. Then three tokens whose 80-bit quotient lands exactly halfway between two doubles
 * although the value does not (rounding that quotient again would be an ulp off). */
START_TEST(test_json_tensor_number_full_digits)
{
    tfs_tensor_info f64 = one_in("d", TFS_DTYPE_DOUBLE);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &f64};
    enum { PER_BODY = 500, BODIES = 400 };
    uint32_t x = 88675123u;
    size_t   cap = 32 + PER_BODY * 48;
    char    *body = malloc(cap);
    double  *want = malloc(PER_BODY * sizeof *want);
    char     tok[48];
    ck_assert(body && want);
    for (int b = 0; b < BODIES; b++) {
        size_t o = (size_t)sprintf(body, "{\"inputs\": [");
        for (int i = 0; i < PER_BODY; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            size_t t = 0;
            if (x & 1)
                tok[t++] = '-';
            int ndig = 15 + (int)(x >> 1) % 5, zeros = (x >> 4) % 4 == 0 ? (int)(x >> 6) % 4 : -1;
            int point = (int)(x >> 8) % (ndig + 1);
            if (zeros >= 0) {   /* 0.[zeros]ddd... */
                t += (size_t)sprintf(tok + t, "0.%.*s", zeros, "000");
                point = -1;
            }
            for (int k = 0; k < ndig; k++) {
                x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                if (k == point && k > 0)
                    tok[t++] = '.';
                tok[t++] = (char)('0' + (k == 0 ? 1 + x % 9 : x % 10));
            }
            if (point == 0 || point == ndig)   /* make it a decimal: an exponent */
                t += (size_t)sprintf(tok + t, "e%d", (int)((x >> 9) % 23) - 11);
            tok[t] = 0;
            want[i] = strtod(tok, NULL);
            o += (size_t)sprintf(body + o, i ? ",%s" : "%s", tok);
        }
        sprintf(body + o, "]}");
        decoded d = decode(body, &sig);
        ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
        const double *got = d.in[0].tensor->data;
        for (int i = 0; i < PER_BODY; i++)
            ck_assert_msg(got[i] == want[i], "body %d number %d: got %.17g, want %.17g", b, i,
                          got[i], want[i]);
        decoded_free(&d);
    }
    free(body);
    free(want);

    decoded d = decode("{\"inputs\": [80748.72045841556246, 92878458.05294498056, "
                       "0.07272225891798445724]}", &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const double *g = d.in[0].tensor->data;
    ck_assert(g[0] == strtod("80748.72045841556246", NULL) && g[0] == 80748.720458415555);
    ck_assert(g[1] == strtod("92878458.05294498056", NULL) && g[1] == 92878458.052944973);
    ck_assert(g[2] == strtod("0.07272225891798445724", NULL) && g[2] == 0.072722258917984464);
    decoded_free(&d);
    /* eight digits and then a byte next to '0' or '9' in ASCII */
    expect_error("{\"inputs\": [12345678/]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Parse error: Missing a comma or ']' after an array element. at offset: 20");
    expect_error("{\"inputs\": [0.12345678:]}", &sig, TFS_INVALID_ARGUMENT,
                 "JSON Parse error: Missing a comma or ']' after an array element. at offset: 22");
}
END_TEST

/* Rows of numbers only, as clients write them: integers (pixels 0-255), integers and fractions
 * mixed (JavaScript writes 0 for 0.0), fractions only, and the largest integers each float type
 * holds exactly, into float and double tensors, row by row; a lossy element anywhere in a row is
 * refused with its value. */
START_TEST(test_json_tensor_number_rows)
{
    tfs_tensor_info f64 = one_in("d", TFS_DTYPE_DOUBLE);
    tfs_signature   sig64 = {.key = "k", .n_inputs = 1, .inputs = &f64};
    const char     *body = "{\"instances\": [[0, 12, 255, -7], [0, 0.5, 1, -2.25], "
                           "[0.0, 1e-3, 3.5e2, -0.125], [16777215, -16777215, 2, 3]]}";
    const double    want[16] = {0, 12, 255, -7, 0, 0.5, 1, -2.25,
                                0, 1e-3, 3.5e2, -0.125, 16777215, -16777215, 2, 3};
    for (int k = 0; k < 2; k++) {
        decoded d = decode(body, k ? &sig64 : &sig_x);
        ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
        ck_assert(d.in[0].tensor->rank == 2 && d.in[0].tensor->dims[0] == 4 &&
                  d.in[0].tensor->dims[1] == 4);
        for (int i = 0; i < 16; i++) {
            double got = k ? ((double *)d.in[0].tensor->data)[i]
                           : ((float *)d.in[0].tensor->data)[i];
            ck_assert_msg(got == (k ? want[i] : (double)(float)want[i]), "%d/%d: %.17g", k, i,
                          got);
        }
        decoded_free(&d);
    }
    expect_error("{\"instances\": [[1, 2], [3, 16777216]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
                 "Cannot convert JSON value: 16777216 to float without loss of precision.");
    expect_error("{\"instances\": [[1.5, 2], [3, 1e39]]}", &sig_x, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
                 "Cannot convert JSON value: 1e+39 to float without loss of precision.");
    expect_error("{\"instances\": [[0.5, 9007199254740993]]}", &sig64, TFS_INVALID_ARGUMENT,
                 "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
                 "Cannot convert JSON value: 9007199254740993 to double without loss of "
                 "precision.");
    decoded d = decode("{\"instances\": [[0.5, 9007199254740991, 18446744073709551615e0]]}",
                       &sig64);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    const double *g = d.in[0].tensor->data;
    ck_assert(g[0] == 0.5 && g[1] == 9007199254740991.0 && g[2] == 18446744073709551615e0);
    decoded_free(&d);
}
END_TEST

/* Large tensors are checked before they are allocated (past ONE_PASS_ELEMS), small ones in the
 * same walk that fills them: the same answers either way. A value whose first elements claim a
 * 100^4-element shape is refused for its shape, without allocating it. */
START_TEST(test_json_tensor_large_and_claimed)
{
    size_t n = 70000, o = 0;
    char  *body = malloc(n * 8 + 64);
    ck_assert_ptr_nonnull(body);
    o += (size_t)sprintf(body, "{\"instances\": [");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(body + o, i ? ",[%zu]" : "[%zu]", i % 1000);
    strcpy(body + o, "]}");
    decoded d = decode(body, &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_shape(d.in[0].tensor, TFS_DTYPE_FLOAT, 2, (int64_t[]){70000, 1});
    ck_assert(((float *)d.in[0].tensor->data)[69999] == 999.0f);
    decoded_free(&d);
    strcpy(body + o - 5, "[1,2]]}");   /* the last row is ragged */
    d = decode(body, &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(d.st.msg, "Failed to process element: 69999 of 'instances' list. Error: "
                               "INVALID_ARGUMENT: Expecting tensor size: 1 but got: 2");
    /* [[[[1, 1, ...], 1, ...], 1, ...], 1, ...]: 100 elements at each of 4 levels */
    o = (size_t)sprintf(body, "{\"inputs\": ");
    for (int l = 0; l < 4; l++)
        body[o++] = '[';
    for (int l = 0; l < 4; l++) {
        for (int k = 0; k < (l == 0 ? 100 : 99); k++)
            o += (size_t)sprintf(body + o, k || l == 0 ? (k ? ",1" : "1") : ",1");
        body[o++] = ']';
    }
    strcpy(body + o, "}");
    tfs_tensor_info f = one_in("f", TFS_DTYPE_FLOAT);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &f};
    int64_t         before = tfs_alloc_bytes_in_use();
    d = decode(body, &sig);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(d.st.msg, "JSON Value: 1 found at incorrect level: 4 in the JSON DOM. "
                               "Expected at level: 4");
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), before);
    free(body);
}
END_TEST

/* Strings are bytes: escapes decoded, anything else (invalid UTF-8 included) kept as sent. */
START_TEST(test_json_tensor_string_bytes)
{
    tfs_tensor_info s = one_in("s", TFS_DTYPE_STRING);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &s};
    static const char body[] = "{\"inputs\": [\"\xff\xfe\x80\", \"a\\u0000b\", \"\\u00e9\\ud83d\\ude00\","
                               " \"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\xc3\xa9\"]}";
    decoded d = decode_len(body, sizeof body - 1, &sig);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_str(d.in[0].tensor, 0, "\xff\xfe\x80", 3);
    expect_str(d.in[0].tensor, 1, "a\0b", 3);
    expect_str(d.in[0].tensor, 2, "\xc3\xa9\xf0\x9f\x98\x80", 6);
    expect_str(d.in[0].tensor, 3, "\"\\/\b\f\n\r\t", 8);
    expect_str(d.in[0].tensor, 4, "\xc3\xa9", 2);
    decoded_free(&d);

    /* the first of repeated keys counts, as rapidjson's FindMember finds it */
    d = decode("{\"instances\": [1], \"instances\": [2, 3]}", &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    expect_f32(d.in[0].tensor, 1, (float[]){1});
    decoded_free(&d);
}
END_TEST

static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
                : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || (n == 2 && *p < 0xC2))
            return false;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return false;
        p += n;
    }
    return true;
}

/* A quoted request value is cut at 256 bytes, never inside a UTF-8 character; the error body
 * holds valid UTF-8 whatever bytes the request quoted. */
START_TEST(test_json_tensor_quoted_utf8)
{
    char body[2048];
    for (int shift = 0; shift < 4; shift++) {
        /* "é" (2 bytes) and "😀" (4 bytes) repeated, shifted so the cut falls everywhere */
        int o = snprintf(body, sizeof body, "{\"inputs\": 1, \"instances\": [\"%.*s", shift,
                         "xxxx");
        for (int i = 0; i < 60; i++)
            o += snprintf(body + o, sizeof body - (size_t)o, "\xc3\xa9\xf0\x9f\x98\x80");
        snprintf(body + o, sizeof body - (size_t)o, "\"]}");
        decoded d = decode(body, &sig_x);
        ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
        ck_assert_msg(strstr(d.st.msg, "...") && valid_utf8(d.st.msg), "%s", d.st.msg);
    }
    /* invalid bytes quoted in a message become U+FFFD in the error body */
    tfs_tensor_info i32 = one_in("i", TFS_DTYPE_INT32);
    tfs_signature   sig = {.key = "k", .n_inputs = 1, .inputs = &i32};
    decoded d = decode("{\"inputs\": [\"a\xff\xc3\"]}", &sig);
    ck_assert_str_eq(d.st.msg, "JSON Value: \"a\xff\xc3\" Type: String is not of expected type: "
                               "int32");
    tfs__buf b;
    tfs__buf_init(&b);
    tfs__json_error(&b, d.st.msg);
    ck_assert_str_eq(b.data, "{\n    \"error\": \"JSON Value: \\\"a\xef\xbf\xbd\xef\xbf\xbd\\\" Type: "
                             "String is not of expected type: int32\"\n}");
    tfs__buf_deinit(&b);
    /* a message cut to the status size inside a character loses the partial character only */
    tfs__buf_init(&b);
    tfs__json_error(&b, "ab\xc3\xa9\xe2\x82");
    ck_assert_str_eq(b.data, "{\n    \"error\": \"ab\xc3\xa9\"\n}");
    tfs__buf_deinit(&b);
}
END_TEST

/* No depth limit and no recursion: deep JSON parses or fails with a message, never a crash. */
START_TEST(test_json_tensor_deep_nesting)
{
    size_t depth = 200000, o = 0;
    char  *body = malloc(2 * depth + 64);
    ck_assert_ptr_nonnull(body);
    o += (size_t)sprintf(body, "{\"ignored\": ");
    memset(body + o, '[', depth);
    o += depth;
    memset(body + o, ']', depth);
    o += depth;
    o += (size_t)sprintf(body + o, ", \"instances\": [1]}");
    decoded d = decode_len(body, o, &sig_x);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    decoded_free(&d);

    /* the whole document is quoted in this error: the quote is cut, not walked to the bottom */
    memcpy(body + o - 19, ", \"instances\": {}} ", 19);
    d = decode_len(body, o, &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(d.st.msg, "Excepting 'instances' to be an list/array"), "%s", d.st.msg);

    /* 10,000 deep as the value itself: more dimensions than a tensor has */
    o = (size_t)sprintf(body, "{\"instances\": ");
    memset(body + o, '[', 10000);
    o += 10000;
    body[o++] = '1';
    memset(body + o, ']', 10000);
    o += 10000;
    body[o++] = '}';
    d = decode_len(body, o, &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(d.st.msg, "Failed to process element: 0 of 'instances' list. Error: "
                               "INVALID_ARGUMENT: input 'x' has more than 8 dimensions, the most "
                               "tfserve supports");
    /* unterminated */
    d = decode_len(body, 14 + 10000, &sig_x);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(d.st.msg, "JSON Parse error: Invalid value. at offset: 10014");
    free(body);
}
END_TEST

/* Every allocation of a decode failing in turn: the result is success or RESOURCE_EXHAUSTED (or
 * the request's own error, never a different one), and nothing leaks. */
START_TEST(test_json_tensor_out_of_memory)
{
    /* the third is large and deep enough for the parser's arena and stacks to grow */
    char big[8192];
    int  o = snprintf(big, sizeof big, "{\"pad\": [[[[[[[[[[[[[[[[[[[[[[[[\"%0400d\"", 0);
    for (int i = 0; i < 300; i++)
        o += snprintf(big + o, sizeof big - (size_t)o, ", %d.5", i);
    snprintf(big + o, sizeof big - (size_t)o, "]]]]]]]]]]]]]]]]]]]]]]]], \"inputs\": {\"a\": [[1], [2]],"
             " \"b\": [\"p\\n\", {\"b64\": \"AAE=\"}]}}");
    const char *bodies[] = {
        "{\"instances\": [{\"a\": [1, 2], \"b\": [{\"b64\": \"aGVsbG8=\"}, \"x\"]},"
        " {\"a\": [3, 4], \"b\": [\"y\", \"z\"]}]}",
        "{\"inputs\": {\"a\": [[1], [2]], \"b\": [\"p\", {\"b64\": \"AAE=\"}]}}",
        big,
    };
    for (size_t k = 0; k < 3; k++) {
        int64_t base = tfs_alloc_bytes_in_use();
        bool    done = false;
        for (int64_t n = 1; n < 2000 && !done; n++) {
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
                if (k == 2)
                    expect_str(d.in[1].tensor, 0, "p\n", 2);
            }
            decoded_free(&d);
            ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
        }
        ck_assert(done);
    }
}
END_TEST

/* Arrays of numbers are held packed and turn into values when anything else joins them; large
 * ones are adopted from the parser's stack. Every element must read back the same either way. */
START_TEST(test_json_tensor_packed_arrays)
{
    enum { BIG = 20000 };
    tfs__buf b;
    tfs__buf_init(&b);
    tfs__buf_puts(&b, "{\"a\": [1, -2, 2.5, 18446744073709551615, \"x\", [3], 4], \"b\": [");
    for (int i = 0; i < BIG; i++)
        tfs__buf_printf(&b, "%d,", i);
    tfs__buf_puts(&b, "\"end\"], \"c\": [");
    for (int i = 0; i < BIG; i++)
        tfs__buf_printf(&b, "%s%d", i ? "," : "", -i);
    tfs__buf_puts(&b, "], \"d\": [[], [1e300, NaN], 7]}");
    ck_assert(!b.oom);

    tfs__jdoc  doc;
    tfs_status st;
    tfs__jdoc_init(&doc);
    ck_assert_int_eq(tfs__json_parse(b.data, b.len, &doc, &st), TFS_OK);

    const tfs__jv *a = tfs__jv_get(doc.root, "a");
    ck_assert_uint_eq(a->n, 7);
    tfs__jv e = tfs__jv_at(a, 0);
    ck_assert(tfs__jv_is_int64(&e) && e.i == 1);
    e = tfs__jv_at(a, 1);
    ck_assert(tfs__jv_is_int64(&e) && e.i == -2);
    e = tfs__jv_at(a, 2);
    ck_assert(tfs__jv_is_double(&e) && e.d == 2.5);
    e = tfs__jv_at(a, 3);
    ck_assert(e.type == TFS__J_NUMBER && e.num == TFS__JNUM_UINT && e.u == UINT64_MAX);
    e = tfs__jv_at(a, 4);
    ck_assert(tfs__jv_is(&e, TFS__J_STRING) && strcmp(e.s, "x") == 0);
    e = tfs__jv_at(a, 5);
    ck_assert(tfs__jv_is(&e, TFS__J_ARRAY) && e.n == 1);
    tfs__jv inner = tfs__jv_at(&e, 0);
    ck_assert(tfs__jv_is_int64(&inner) && inner.i == 3);
    e = tfs__jv_at(a, 6);
    ck_assert(tfs__jv_is_int64(&e) && e.i == 4);

    const tfs__jv *bv = tfs__jv_get(doc.root, "b");
    ck_assert_uint_eq(bv->n, BIG + 1);
    for (int i = 0; i < BIG; i++) {
        e = tfs__jv_at(bv, (size_t)i);
        ck_assert(tfs__jv_is_int64(&e) && e.i == i);
    }
    e = tfs__jv_at(bv, BIG);
    ck_assert(tfs__jv_is(&e, TFS__J_STRING) && strcmp(e.s, "end") == 0);

    const tfs__jv *c = tfs__jv_get(doc.root, "c");
    ck_assert_uint_eq(c->n, BIG);
    ck_assert_int_eq(c->num, TFS__JARR_INT);
    for (int i = 0; i < BIG; i++) {
        e = tfs__jv_at(c, (size_t)i);
        ck_assert(tfs__jv_is_int64(&e) && e.i == -i);
    }

    const tfs__jv *d = tfs__jv_get(doc.root, "d");
    ck_assert_uint_eq(d->n, 3);
    e = tfs__jv_at(d, 0);
    ck_assert(tfs__jv_is(&e, TFS__J_ARRAY) && e.n == 0);
    e = tfs__jv_at(d, 1);
    ck_assert_int_eq(e.num, TFS__JARR_DOUBLE);
    inner = tfs__jv_at(&e, 0);
    ck_assert(tfs__jv_is_double(&inner) && inner.d == 1e300);
    inner = tfs__jv_at(&e, 1);
    ck_assert(tfs__jv_is_double(&inner) && isnan(inner.d));

    /* The writer reads packed arrays the same way (error messages quote request values). */
    tfs__buf text;
    tfs__buf_init(&text);
    tfs__json_value_text(a, &text, 1000);
    ck_assert_str_eq(text.data, "[\n    1,\n    -2,\n    2.5,\n    18446744073709551615,\n    \"x\",\n"
                                "    [\n        3\n    ],\n    4\n]");
    tfs__buf_deinit(&text);
    tfs__jdoc_deinit(&doc);
    tfs__buf_deinit(&b);
}
END_TEST

/* ---- parse memory ---------------------------------------------------------------------------- */

/* A body `{"instances": [TOKEN,TOKEN,...]}` of about `size` bytes (TOKEN repeated, comma-separated;
 * the caller frees it). */
static char *repeated_body(const char *token, size_t size, size_t *len)
{
    const char *head = "{\"instances\": [", *tail = "]}";
    size_t      tl = strlen(token), n = (size - strlen(head) - strlen(tail)) / (tl + 1);
    char       *b = malloc(strlen(head) + n * (tl + 1) + strlen(tail) + 1), *o = b;
    ck_assert_ptr_nonnull(b);
    o += sprintf(o, "%s", head);
    for (size_t i = 0; i < n; i++) {
        if (i)
            *o++ = ',';
        memcpy(o, token, tl);
        o += tl;
    }
    o += sprintf(o, "%s", tail);
    *len = (size_t)(o - b);
    return b;
}

/* The most bytes parsing a body holds at once (counted as allocated, capacity included), against
 * the body's size: parsing must cost a small constant times the body whatever its shape, so that
 * a client cannot turn a 16 MiB body into hundreds of MB, and less than the body where numbers
 * are written out in full. A number in an array of numbers keeps 8 bytes and any other value a
 * 16-byte node, so the shortest tokens ("[]," and "\"\",": 3 bytes) set the worst ratio. (Copying
 * the value stack into the arena on close would double each of these; "1," cost 16x so.) */
START_TEST(test_json_tensor_parse_memory)
{
    static const struct {
        const char *token;
        double      max_ratio;
    } shapes[] = {
        {"1", 5.0},                  /* packed numbers: 8 bytes for 2, and a kind byte */
        {"0.12345678", 1.25},        /* a float written out in full */
        {"[1]", 6.5},                /* one-element rows: a node and a packed number */
        {"[1,2.5,3,-4]", 5.5},       /* integers and fractions mixed: a kind byte each */
        {"[]", 8.5},                 /* empty rows: a 16-byte node for 3 bytes */
        {"{\"a\":1}", 7.5},          /* objects: key and value nodes */
        {"\"\"", 8.5},               /* empty strings: a node, no bytes */
        {"\"abcdefgh\"", 3.75},      /* short strings: a node and the bytes */
        {"true", 4.25},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        size_t     len;
        char      *body = repeated_body(shapes[k].token, 4u << 20, &len);
        tfs__jdoc  doc;
        tfs_status st;
        tfs__jdoc_init(&doc);
        tfs_alloc_thread_peak_reset();
        ck_assert_int_eq(tfs__json_parse(body, len, &doc, &st), TFS_OK);
        double ratio = (double)tfs_alloc_thread_peak() / (double)len;
        tfs__jdoc_deinit(&doc);
        free(body);
        printf("json parse memory: [%s, ...] %zu-byte body, peak %.2fx the body\n",
               shapes[k].token, len, ratio);
        ck_assert_msg(ratio <= shapes[k].max_ratio, "[%s, ...]: %.2fx the body (at most %.1fx)",
                      shapes[k].token, ratio, shapes[k].max_ratio);
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
    tcase_add_test(tc, test_json_tensor_parse_errors);
    tcase_add_test(tc, test_json_tensor_numbers);
    tcase_add_test(tc, test_json_tensor_number_values);
    tcase_add_test(tc, test_json_tensor_number_full_digits);
    tcase_add_test(tc, test_json_tensor_number_rows);
    tcase_add_test(tc, test_json_tensor_parse_memory);
    tcase_add_test(tc, test_json_tensor_packed_arrays);
    tcase_add_test(tc, test_json_tensor_large_and_claimed);
    tcase_add_test(tc, test_json_tensor_string_bytes);
    tcase_add_test(tc, test_json_tensor_quoted_utf8);
    tcase_add_test(tc, test_json_tensor_deep_nesting);
    tcase_add_test(tc, test_json_tensor_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
