/* libFuzzer driver for KServe v2 ModelInferRequest bytes, decoded the way server/grpc-v2.c decodes
 * them before a model is involved: the bounded unpack (proto/unpack.h, through tfs__grpc_unpack)
 * and every input's typed or raw contents into a tensor against a small hand-built signature
 * (tfs__grpc_v2_infer_inputs). Any status is accepted; what must hold:
 *   - no crash, sanitizer report or leak (every byte tfs_malloc handed out comes back);
 *   - the bounded unpack agrees with its own depth check;
 *   - every refusal has a message, and decoded tensors have the signature's dtypes.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; seeds in
 * tests/fuzz/corpus/fuzz_infer_request/.
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

/* Inputs of three kinds (sorted by alias, as a loaded signature's): any float shape, strings of
 * rank 1, a bool pair. */
static tfs_tensor_info ins[] = {
    {"b", "b:0", TFS_DTYPE_BOOL, {1, {2}}},
    {"s", "s:0", TFS_DTYPE_STRING, {1, {-1}}},
    {"x", "x:0", TFS_DTYPE_FLOAT, {-1, {0}}},
};
static const tfs_signature sig = {.key = "serving_default",
                                  .method_name = "tensorflow/serving/predict",
                                  .n_inputs = 3,
                                  .inputs = ins};

static void fail(const char *what, const char *detail)
{
    fuzz_fail("fuzz_infer_request", what, detail);
}

static void decode(const uint8_t *data, size_t size)
{
    Inference__ModelInferRequest *req =
        (Inference__ModelInferRequest *)fuzz_unpack_checked("fuzz_infer_request",
                                     &inference__model_infer_request__descriptor, data, size);
    tfs_status st;
    if (!req)
        return;
    tfs_named_tensor *in = NULL;
    int               n_in = 0;
    if (tfs__grpc_v2_infer_inputs(req, &sig, &in, &n_in, &st) == TFS_OK) {
        for (int i = 0; i < n_in; i++) {
            const tfs_tensor_info *ti = NULL;
            for (int k = 0; k < sig.n_inputs; k++)
                if (strcmp(sig.inputs[k].alias, in[i].name) == 0)
                    ti = &sig.inputs[k];
            if (!ti || in[i].tensor->dtype != ti->dtype)
                fail("an input decoded that the signature does not take", in[i].name);
        }
        tfs__named_tensors_free(in, n_in);
    } else if (!st.msg[0]) {
        fail("inputs refused without a message", tfs_code_name(st.code));
    }
    tfs__grpc_free_unpacked(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t before = tfs_alloc_bytes_in_use();
    decode(data, size);
    if (tfs_alloc_bytes_in_use() != before) {
        __lsan_do_recoverable_leak_check();   /* where they were allocated, when unreachable */
        fprintf(stderr, "fuzz_infer_request: %lld bytes not freed\n",
                (long long)(tfs_alloc_bytes_in_use() - before));
        abort();
    }
    return 0;
}
