/* libFuzzer driver for saved_model.pb: the bounded unpack (proto/unpack.h, as
 * tfs__saved_model_read does) reads the bytes as a SavedModel, then the same steps
 * tfs_savedmodel_load takes before it touches variables or runs anything: pick the MetaGraphDef
 * tagged "serve" (else the first one, so inputs whose tags the fuzzer mutated still reach the
 * importer), import its GraphDef (function inlining, stripped default attrs, Const tensors),
 * convert its SignatureDefs. What must hold for any input:
 *   - no crash, sanitizer report or leak (every byte tfs_malloc handed out comes back);
 *   - success leaves an OK status, a failure leaves no graph behind and says why;
 *   - signatures come back sorted by key, inputs and outputs sorted by alias.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh. Seeds: the
 * .pbtxt text protos in tests/fuzz/corpus/fuzz_saved_model/, which scripts/fuzz.sh encodes with
 * protoc, plus the bundled demo model's saved_model.pb, written at build time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sanitizer/lsan_interface.h>

#include "proto/unpack.h"
#include "runtime/alloc.h"
#include "savedmodel/savedmodel-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* TFS_FUZZ_VERBOSE=1 prints every status: handy when replaying one input (./fuzz_saved_model FILE). */
static int verbose = -1;

static void report(const char *step, const tfs_status *st)
{
    if (verbose)
        fprintf(stderr, "%s: %s %s\n", step, tfs_code_name(st->code), st->msg);
}

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_saved_model: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_sorted(const tfs_tensor_info *t, int n, const char *sig)
{
    for (int i = 0; i < n; i++) {
        if (!t[i].alias)
            fail("tensor info without an alias in signature", sig);
        if (i > 0 && strcmp(t[i - 1].alias, t[i].alias) > 0)
            fail("aliases not sorted in signature", sig);
    }
}

static void one_model(const Tensorflow__SavedModel *sm)
{
    const Tensorflow__MetaGraphDef *mg = tfs__saved_model_find_meta_graph(sm, "serve");
    tfs_graph     *g = NULL;
    tfs_signature *sigs = NULL;
    int            n = 0;
    tfs_status     st;

    if (!mg && sm->n_meta_graphs > 0)
        mg = sm->meta_graphs[0];
    if (!mg)
        return;
    enum tfs_code code = tfs__import_graph(mg, &g, &st);
    report("import", &st);
    if (code == TFS_OK) {
        if (!g || st.code != TFS_OK || st.msg[0])
            fail("import succeeded without a graph or with a status", st.msg);
    } else if (g || st.msg[0] == '\0') {
        fail("import failed leaving a graph or without a message", tfs_code_name(st.code));
    }
    tfs_graph_unref(g);

    code = tfs__signatures_from_proto(mg, &sigs, &n, &st);
    report("signatures", &st);
    if (code == TFS_OK) {
        if (n < 0 || (n > 0 && !sigs) || st.code != TFS_OK || st.msg[0])
            fail("signatures converted with a bad count or a status", st.msg);
        for (int i = 0; i < n; i++) {
            if (!sigs[i].key)
                fail("signature without a key", NULL);
            if (i > 0 && strcmp(sigs[i - 1].key, sigs[i].key) > 0)
                fail("signatures not sorted by key", sigs[i].key);
            check_sorted(sigs[i].inputs, sigs[i].n_inputs, sigs[i].key);
            check_sorted(sigs[i].outputs, sigs[i].n_outputs, sigs[i].key);
        }
        tfs__signatures_free(sigs, n);
    } else if (st.msg[0] == '\0') {
        fail("signature conversion failed without a message", tfs_code_name(st.code));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* protobuf-c allocates the message with the system allocator (LeakSanitizer watches it);
     * everything tfserve allocates is counted by tfs_malloc. */
    if (verbose < 0)
        verbose = getenv("TFS_FUZZ_VERBOSE") != NULL;
    Tensorflow__SavedModel *sm;
    tfs_status              ust;
    if (tfs_proto_unpack_bounded(&tensorflow__saved_model__descriptor, NULL, data, size,
                                 (ProtobufCMessage **)&sm, &ust) != TFS_OK) {
        if (verbose)
            fprintf(stderr, "unpack: %s\n", ust.msg);
        return 0;
    }
    /* The op registry's table is parsed on first use and kept for the process: not a leak. */
    (void)tfs_op_signature_at(0);
    int64_t before = tfs_alloc_bytes_in_use();
    one_model(sm);
    if (tfs_alloc_bytes_in_use() != before) {
        __lsan_do_recoverable_leak_check();   /* where they were allocated, when unreachable */
        fprintf(stderr, "fuzz_saved_model: %lld bytes not freed\n",
                (long long)(tfs_alloc_bytes_in_use() - before));
        abort();
    }
    tensorflow__saved_model__free_unpacked(sm, NULL);
    return 0;
}
