/* server/v2-json.c: the KServe v2 infer codec without a server. FP16 rounding (ties to even,
 * subnormals, the largest finite value), the per-request --max_tensor_bytes budget across
 * inputs, and a fault-injection loop over decode and encode of a mixed JSON + binary body: every
 * failing allocation gives RESOURCE_EXHAUSTED or success, and nothing leaks. */
#include <check.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/runtime.h"
#include "server/server-impl.h"

static tfs_tensor_info in_xs[] = {
    {"s", "s:0", TFS_DTYPE_STRING, {1, {-1}}},
    {"x", "x:0", TFS_DTYPE_FLOAT, {1, {-1}}},
};
static tfs_tensor_info in_h[] = {
    {"h", "h:0", TFS_DTYPE_HALF, {1, {-1}}},
};
static tfs_signature sig_xs = {.key = "serving_default", .n_inputs = 2, .inputs = in_xs,
                               .n_outputs = 2, .outputs = in_xs};
static tfs_signature sig_h = {.key = "h", .n_inputs = 1, .inputs = in_h, .n_outputs = 1,
                              .outputs = in_h};

typedef struct decoded {
    enum tfs_code     code;
    tfs_status        st;
    tfs_named_tensor *in;
    int               n;
    tfs__v2_infer     req;
} decoded;

/* Parses and decodes body (JSON of json_len bytes, then binary; json_len -1: all JSON). */
static decoded decode(const char *body, size_t len, int64_t json_len, const tfs_signature *sig)
{
    decoded     d = {0};
    tfs__jdoc   doc;
    size_t      off;
    const char *sig_name;
    tfs__jdoc_init(&doc);
    d.code = tfs__v2_parse(body, len, json_len, &doc, &off, &sig_name, &d.st);
    if (d.code == TFS_OK)
        d.code = tfs__v2_decode_infer(doc.root, body + off, len - off, sig, &d.in, &d.n, &d.req,
                                      &d.st);
    tfs__jdoc_deinit(&doc);
    return d;
}

static void decoded_free(decoded *d)
{
    tfs__named_tensors_free(d->in, d->n);
    tfs__v2_infer_deinit(&d->req);
}

START_TEST(test_v2_json_half_rounding)
{
    /* 65504 is FP16's largest; 2^-24 its smallest subnormal; 1 + 2^-11 is halfway between 1
     * and 1 + 2^-10 (ties to the even 1); 1 + 3 * 2^-11 halfway between 1 + 2^-10 and
     * 1 + 2^-9 (ties to the even 1 + 2^-9); -0 keeps its sign. */
    const char *body = "{\"parameters\": {\"signature_name\": \"h\"}, \"inputs\": [{\"name\": "
                       "\"h\", \"datatype\": \"FP16\", \"shape\": [5], \"data\": [65504, "
                       "5.9604644775390625e-08, 1.00048828125, 1.00146484375, -0.0]}]}";
    static const uint16_t want[] = {0x7bff, 0x0001, 0x3c00, 0x3c02, 0x8000};
    decoded d = decode(body, strlen(body), -1, &sig_h);
    ck_assert_msg(d.code == TFS_OK, "%s", d.st.msg);
    ck_assert_int_eq(d.n, 1);
    ck_assert_int_eq(d.in[0].tensor->dtype, TFS_DTYPE_HALF);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(((const uint16_t *)d.in[0].tensor->data)[i], want[i]);
    decoded_free(&d);

    body = "{\"parameters\": {\"signature_name\": \"h\"}, \"inputs\": [{\"name\": \"h\", "
           "\"datatype\": \"FP16\", \"shape\": [1], \"data\": [65520]}]}";
    d = decode(body, strlen(body), -1, &sig_h);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(d.st.msg, "not a FP16 value"));
    decoded_free(&d);
}
END_TEST

/* --max_tensor_bytes counts all of a request's tensors together. */
START_TEST(test_v2_json_budget)
{
    const char *body = "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [4], "
                       "\"data\": [1, 2, 3, 4]}, {\"name\": \"s\", \"datatype\": \"BYTES\", "
                       "\"shape\": [1], \"data\": [\"abcdefgh\"]}]}";
    tfs_runtime_set_max_tensor_bytes(24);   /* x's 16 bytes fit; s's 16 + 8 then do not */
    decoded d = decode(body, strlen(body), -1, &sig_xs);
    tfs_runtime_set_max_tensor_bytes(0);
    ck_assert_int_eq(d.code, TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(d.st.msg, "input 's'") && strstr(d.st.msg, "8 bytes left"), "%s",
                  d.st.msg);
    decoded_free(&d);
}
END_TEST

START_TEST(test_v2_json_fault_injection)
{
    /* x in binary (FP32), s as JSON, then s asked for in binary and x as JSON. */
    static const char head[] =
        "{\"id\": \"f\", \"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [2], "
        "\"parameters\": {\"binary_data_size\": 8}}, {\"name\": \"s\", \"datatype\": \"BYTES\", "
        "\"shape\": [2], \"data\": [\"ab\", \"\"]}], \"outputs\": [{\"name\": \"s\", "
        "\"parameters\": {\"binary_data\": true}}, {\"name\": \"x\"}]}";
    char  body[sizeof head + 8];
    float xs[2] = {1.5f, -2.0f};
    memcpy(body, head, sizeof head - 1);
    memcpy(body + sizeof head - 1, xs, 8);
    size_t len = sizeof head - 1 + 8;

    int64_t base = tfs_alloc_bytes_in_use();
    bool    done = false;
    for (int64_t n = 1; n < 2000 && !done; n++) {
        tfs_alloc_fail_after(n);
        decoded       d = decode(body, len, (int64_t)sizeof head - 1, &sig_xs);
        tfs__buf      out;
        int64_t       json_len = -1;
        enum tfs_code code = d.code;
        tfs__buf_init(&out);
        if (code == TFS_OK) {
            /* The identity model: each output is the input of the same name. */
            tfs_tensor *outs[2] = {d.in[1].tensor, d.in[0].tensor};
            ck_assert_str_eq(d.in[0].name, "x");
            code = tfs__v2_encode_infer(&d.req, "m", 3, &sig_xs, outs, &out, &json_len, &d.st);
        }
        tfs_alloc_fail_after(0);
        ck_assert_msg(code == TFS_OK || code == TFS_RESOURCE_EXHAUSTED,
                      "failing allocation %lld: %s: %s", (long long)n, tfs_code_name(code),
                      d.st.msg);
        done = code == TFS_OK;
        if (done) {
            /* s's binary form: 4-byte lengths 2 and 0, then "ab". */
            static const char bin[] = "\x02\0\0\0ab\0\0\0\0";
            ck_assert_int_ge(json_len, 0);
            ck_assert_uint_eq(out.len - (size_t)json_len, sizeof bin - 1);
            ck_assert_mem_eq(out.data + json_len, bin, sizeof bin - 1);
            ck_assert_ptr_nonnull(strstr(out.data, "\"binary_data_size\": 10"));
            ck_assert_ptr_nonnull(strstr(out.data, "\"data\": [1.5, -2.0]"));
            ck_assert_ptr_nonnull(strstr(out.data, "\"id\": \"f\""));
        }
        tfs__buf_deinit(&out);
        decoded_free(&d);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    }
    ck_assert(done);
}
END_TEST

Suite *suite_server_v2_json(void);
Suite *suite_server_v2_json(void)
{
    Suite *s = suite_create("v2_json");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_v2_json_half_rounding);
    tcase_add_test(tc, test_v2_json_budget);
    tcase_add_test(tc, test_v2_json_fault_injection);
    suite_add_tcase(s, tc);
    return s;
}
