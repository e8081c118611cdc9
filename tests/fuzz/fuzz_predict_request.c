/* libFuzzer driver for gRPC PredictRequest bytes, decoded the way server/grpc-api.c decodes them
 * before a model is involved: the bounded unpack (proto/unpack.h, through tfs__grpc_unpack), the
 * ModelSpec, the output_filter against a small hand-built signature, and every input TensorProto
 * into a tensor (grpc-tensor.c). Any status is accepted; what must hold:
 *   - no crash, stack overflow, sanitizer report or leak (every byte tfs_malloc handed out, the
 *     message's included, comes back);
 *   - the bounded unpack agrees with its own depth check: a refusal for nesting is never
 *     unpacked, and whatever unpacks nests at most 100 levels;
 *   - every refusal has a message.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; seeds in
 * tests/fuzz/corpus/fuzz_predict_request/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sanitizer/lsan_interface.h>

#include "proto/unpack.h"
#include "runtime/alloc.h"
#include "server/grpc-impl.h"
#include "tests/fuzz/fuzz-unpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Outputs sorted by alias, as tfs__grpc_check_output_filter expects of a loaded signature. */
static tfs_tensor_info outs[] = {
    {"y", "y:0", TFS_DTYPE_FLOAT, {1, {-1}}},
    {"z", "z:0", TFS_DTYPE_INT64, {1, {-1}}},
};
static const tfs_signature sig = {.key = "serving_default",
                                  .method_name = "tensorflow/serving/predict",
                                  .n_outputs = 2,
                                  .outputs = outs};

static void fail(const char *what, const char *detail)
{
    fuzz_fail("fuzz_predict_request", what, detail);
}

static void decode(const uint8_t *data, size_t size)
{
    Tensorflow__Serving__PredictRequest *req =
        (Tensorflow__Serving__PredictRequest *)fuzz_unpack_checked("fuzz_predict_request",
                                     &tensorflow__serving__predict_request__descriptor, data, size);
    tfs_status st;
    if (!req)
        return;
    tfs_model_spec spec;
    if (tfs__grpc_read_spec(req->model_spec, &spec, &st) != TFS_OK && !st.msg[0])
        fail("ModelSpec refused without a message", tfs_code_name(st.code));
    if (req->n_output_filter > 0 &&
        tfs__grpc_check_output_filter(&sig, req->output_filter, req->n_output_filter, &st) !=
            TFS_OK &&
        !st.msg[0])
        fail("output_filter refused without a message", tfs_code_name(st.code));
    tfs_named_tensor *in = NULL;
    int               n_in = 0;
    if (tfs__grpc_predict_inputs(req, NULL, &in, &n_in, &st) == TFS_OK)
        tfs__named_tensors_free(in, n_in);
    else if (!st.msg[0])
        fail("inputs refused without a message", tfs_code_name(st.code));
    tfs__grpc_free_unpacked(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t before = tfs_alloc_bytes_in_use();
    decode(data, size);
    if (tfs_alloc_bytes_in_use() != before) {
        __lsan_do_recoverable_leak_check();   /* where they were allocated, when unreachable */
        fprintf(stderr, "fuzz_predict_request: %lld bytes not freed\n",
                (long long)(tfs_alloc_bytes_in_use() - before));
        abort();
    }
    return 0;
}
