/* libFuzzer driver for KServe v2 infer bodies (server/v2-json.c over json-parse.c), taken the way
 * server/rest.c takes them, minus the model: the first two bytes are
 * Inference-Header-Content-Length (little-endian; 0xffff: no header, all JSON), the rest is the
 * body. Parse, pick the signature parameters.signature_name names from a small hand-built set,
 * decode the inputs (JSON data and binary tensors), and on success encode the answer as if the
 * model were the identity (each output is the input of the same name). What must hold:
 *   - no crash, sanitizer report or leak (every byte tfs_malloc handed out comes back);
 *   - a decoded request has one tensor per request input, named and typed as the signature says;
 *   - an encoded answer's binary part is exactly what its JSON says (binary_data_size sums);
 *   - every failure has a message.
 *
 * Signatures: "serving_default" with a int64 [-1] and b double [-1]; "s" with s string and
 * x float; "h" with h half and t bfloat16; "i" with b bool, i int8, u uint16, w uint64.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; seeds in
 * tests/fuzz/corpus/fuzz_v2_infer/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sanitizer/lsan_interface.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tfs_tensor_info ab[] = {
    {"a", "a:0", TFS_DTYPE_INT64, {1, {-1}}},
    {"b", "b:0", TFS_DTYPE_DOUBLE, {1, {-1}}},
};
static tfs_tensor_info sx[] = {
    {"s", "s:0", TFS_DTYPE_STRING, {1, {-1}}},
    {"x", "x:0", TFS_DTYPE_FLOAT, {1, {-1}}},
};
static tfs_tensor_info ht[] = {
    {"h", "h:0", TFS_DTYPE_HALF, {1, {-1}}},
    {"t", "t:0", TFS_DTYPE_BFLOAT16, {1, {-1}}},
};
static tfs_tensor_info iu[] = {
    {"b", "b:0", TFS_DTYPE_BOOL, {0, {0}}},
    {"i", "i:0", TFS_DTYPE_INT8, {1, {-1}}},
    {"u", "u:0", TFS_DTYPE_UINT16, {1, {-1}}},
    {"w", "w:0", TFS_DTYPE_UINT64, {1, {-1}}},
};

#define SIG(k, in) {.key = k, .method_name = "tensorflow/serving/predict",              \
                    .n_inputs = (int)(sizeof in / sizeof in[0]), .inputs = in,          \
                    .n_outputs = (int)(sizeof in / sizeof in[0]), .outputs = in}
static tfs_signature sigs[] = {SIG("serving_default", ab), SIG("s", sx), SIG("h", ht),
                               SIG("i", iu)};

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_v2_infer: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static const tfs_signature *find_signature(const char *name)
{
    const char *key = name && *name ? name : "serving_default";
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (strcmp(sigs[i].key, key) == 0)
            return &sigs[i];
    return NULL;
}

/* The binary part of an answer must be the sum of the binary_data_size values its JSON gives. */
static void check_answer(const tfs__buf *out, int64_t json_len)
{
    if (out->oom)
        return;
    if (!out->data)
        fail("no answer body", NULL);
    if (json_len < 0)
        return;
    if ((size_t)json_len > out->len)
        fail("header length past the answer", NULL);
    tfs__jdoc  doc;
    tfs_status st;
    tfs__jdoc_init(&doc);
    if (tfs__jdoc_parse(&doc, out->data, (size_t)json_len, &st) != TFS_OK)
        fail("the answer's JSON does not parse", st.msg);
    const tfs__jv *outs = tfs__jv_get(doc.root, "outputs");
    uint64_t       sum = 0;
    for (uint32_t i = 0; tfs__jv_is(outs, TFS__J_ARRAY) && i < outs->n; i++) {
        tfs__jv        o = tfs__jv_at(outs, i);
        const tfs__jv *p = tfs__jv_get(&o, "parameters");
        const tfs__jv *n = p ? tfs__jv_get(p, "binary_data_size") : NULL;
        if (n)
            sum += (uint64_t)n->i;
    }
    if (sum != out->len - (size_t)json_len)
        fail("binary part differs from the binary_data_size values", NULL);
    tfs__jdoc_deinit(&doc);
}

static void one_request(const uint8_t *data, size_t size)
{
    tfs__jdoc            doc;
    const char          *sig_name = NULL;
    const tfs_signature *sig = NULL;
    tfs_named_tensor    *in = NULL;
    int                  n = 0;
    tfs__v2_infer        req = {0};
    tfs_status           st;
    enum tfs_code        code;
    size_t               off = 0;

    if (size < 2)
        return;
    int64_t json_len = data[0] | data[1] << 8;
    if (json_len == 0xffff)
        json_len = -1;
    const char *body = (const char *)data + 2;
    size_t      len = size - 2;

    tfs__jdoc_init(&doc);
    if ((code = tfs__v2_parse(body, len, json_len, &doc, &off, &sig_name, &st)) != TFS_OK)
        goto done;
    if (off > len)
        fail("binary offset past the body", NULL);
    if (!(sig = find_signature(sig_name))) {
        code = TFS_ERR(&st, TFS_INVALID_ARGUMENT, "no signature %s", sig_name);
        goto done;
    }
    code = tfs__v2_decode_infer(doc.root, body + off, len - off, sig, &in, &n, &req, &st);
    /* The decoder is all the JSON the request needs: like rest.c, drop it before the run. */
    tfs__jdoc_deinit(&doc);
    if (code != TFS_OK)
        goto done;
    tfs_tensor *outs[4] = {NULL};
    for (int i = 0; i < n; i++) {
        int k = -1;
        for (int j = 0; j < sig->n_inputs; j++)
            if (in[i].name == sig->inputs[j].alias)
                k = j;
        if (k < 0 || !in[i].tensor || in[i].tensor->dtype != tfs_dtype_base(sig->inputs[k].dtype))
            fail("decoded input not named or typed as the signature's", in[i].name);
        outs[k] = in[i].tensor;
    }
    bool all = true;
    for (int j = 0; j < sig->n_outputs; j++)
        all = all && outs[j];
    if (all) {
        tfs__buf out;
        int64_t  out_json = -1;
        tfs__buf_init(&out);
        if (tfs__v2_encode_infer(&req, "m", 1, sig, outs, &out, &out_json, &st) == TFS_OK)
            check_answer(&out, out_json);
        tfs__buf_deinit(&out);
    }
done:
    tfs__jdoc_deinit(&doc);
    tfs__named_tensors_free(in, n);
    tfs__v2_infer_deinit(&req);
    if (code != TFS_OK && st.msg[0] == '\0')
        fail("error without a message", tfs_code_name(code));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t before = tfs_alloc_bytes_in_use();
    one_request(data, size);
    if (tfs_alloc_bytes_in_use() != before) {
        __lsan_do_recoverable_leak_check();   /* where they were allocated, when unreachable */
        fprintf(stderr, "fuzz_v2_infer: %lld bytes not freed\n",
                (long long)(tfs_alloc_bytes_in_use() - before));
        abort();
    }
    return 0;
}
