/* libFuzzer target for the tf.Example decoder and the ParseExampleV2 kernel (runtime/kernels/
 * parsing.c). Each input is decoded completely by tfs__example_check, then parsed by the kernel,
 * called directly on a graph node built once, as a batch of one and as a scalar. Both must return
 * OK or INVALID_ARGUMENT and never read outside the input, and the kernel must refuse whatever the
 * decoder finds is not an Example at all.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay one
 * input with build-fuzz/tests/fuzz/fuzz_example FILE. Seeds: the .pbtxt Examples in
 * tests/fuzz/corpus/fuzz_example/, which scripts/fuzz.sh encodes with protoc.
 *
 * The keys the node asks for are one letter long so that the fuzzer finds them quickly:
 * sparse a (float), b (int64), c (string); dense d (float [2], default), e (int64 [-1, 2], varlen),
 * f (string [], default).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/graph.h"
#include "runtime/runtime-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tfs_graph *g;
static int        node;
static tfs_tensor *consts[8];   /* names, sparse keys, dense keys, ragged keys, 3 defaults */

static void die(const char *what, const tfs_status *st)
{
    fprintf(stderr, "fuzz_example setup: %s: %s\n", what, st->msg);
    abort();
}

static tfs_tensor *strings(int64_t n, const char *const *s)
{
    tfs_tensor *t;
    tfs_status st;
    if (tfs_tensor_new(TFS_DTYPE_STRING, 1, &n, &t, &st) != TFS_OK)
        die("strings", &st);
    for (int64_t i = 0; i < n; i++)
        if (tfs_tensor_set_string(t, i, s[i], strlen(s[i]), &st) != TFS_OK)
            die("strings", &st);
    return t;
}

static void set_list(const char *name, enum tfs_attr_kind kind, int n, void *items)
{
    tfs_attr_value v;
    memset(&v, 0, sizeof v);
    v.kind = TFS_ATTR_LIST;
    v.list.kind = n ? kind : TFS_ATTR_NONE;
    v.list.n = n;
    if (kind == TFS_ATTR_TYPE)
        v.list.type = items;
    else
        v.list.shape = items;
    tfs_graph_set_attr(g, node, name, &v);
}

static void setup(void)
{
    static const char *const skeys[3] = {"a", "b", "c"}, *const dkeys[3] = {"d", "e", "f"};
    static enum tfs_dtype stypes[3] = {TFS_DTYPE_FLOAT, TFS_DTYPE_INT64, TFS_DTYPE_STRING};
    static enum tfs_dtype dtypes[3] = {TFS_DTYPE_FLOAT, TFS_DTYPE_INT64, TFS_DTYPE_STRING};
    static tfs_shape shapes[3] = {{1, {2}}, {2, {-1, 2}}, {0, {0}}};
    tfs_status st;
    int64_t two = 2;
    consts[0] = strings(0, NULL);
    consts[1] = strings(3, skeys);
    consts[2] = strings(3, dkeys);
    consts[3] = strings(0, NULL);
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &two, &consts[4], &st) != TFS_OK ||
        tfs_tensor_new_scalar(TFS_DTYPE_INT64, &consts[5], &st) != TFS_OK ||
        tfs_tensor_new_scalar(TFS_DTYPE_STRING, &consts[6], &st) != TFS_OK)
        die("defaults", &st);
    if (tfs_graph_new(&g, &st) != TFS_OK)
        die("graph", &st);
    static const char *const inputs[7] = {"ser", "names", "sk", "dk", "rk", "d0", "d1"};
    int ser = tfs_graph_add_node(g, "ser", "Placeholder");
    tfs_graph_set_attr_type(g, ser, "dtype", TFS_DTYPE_STRING);
    for (int i = 1; i < 8; i++) {
        static const char *const names[8] = {"", "names", "sk", "dk", "rk", "d0", "d1", "d2"};
        int id = tfs_graph_add_node(g, names[i], "Const");
        tfs_graph_set_attr_type(g, id, "dtype", consts[i - 1]->dtype);
        tfs_graph_set_attr_tensor(g, id, "value", consts[i - 1]);
    }
    node = tfs_graph_add_node(g, "pe", "ParseExampleV2");
    for (int i = 0; i < 7; i++)
        tfs_graph_add_input(g, node, inputs[i]);
    tfs_graph_add_input(g, node, "d2");
    tfs_graph_set_attr_int(g, node, "num_sparse", 3);
    set_list("sparse_types", TFS_ATTR_TYPE, 3, stypes);
    set_list("Tdense", TFS_ATTR_TYPE, 3, dtypes);
    set_list("dense_shapes", TFS_ATTR_SHAPE, 3, shapes);
    set_list("ragged_value_types", TFS_ATTR_TYPE, 0, NULL);
    set_list("ragged_split_types", TFS_ATTR_TYPE, 0, NULL);
    if (tfs_graph_finalize(g, &st) != TFS_OK)
        die("finalize", &st);
}

/* Runs the kernel on `ser`; returns its code after checking the outputs it left. */
static enum tfs_code run_kernel(tfs_tensor *ser)
{
    tfs_tensor *in[8] = {ser, consts[0], consts[1], consts[2], consts[3], consts[4], consts[5],
                         consts[6]};
    tfs_tensor *out[12] = {NULL};
    tfs_status st;
    tfs_kernel_ctx k = {.graph = g, .node = tfs__graph_node(g, node), .in = in, .n_in = 8,
                        .out = out, .n_out = 12};
    enum tfs_code code = tfs__k_parse_example_v2(&k, &st);
    if (code != TFS_OK && code != TFS_INVALID_ARGUMENT) {
        fprintf(stderr, "unexpected %s: %s\n", tfs_code_name(code), st.msg);
        abort();
    }
    for (int i = 0; i < 12; i++) {
        if ((out[i] != NULL) != (code == TFS_OK)) {
            fprintf(stderr, "output %d %s after %s\n", i, out[i] ? "set" : "missing",
                    tfs_code_name(code));
            abort();
        }
        tfs_tensor_unref(out[i]);
    }
    return code;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g)
        setup();
    tfs_status st, cst;
    int64_t nf, nv;
    enum tfs_code check = tfs__example_check(data, size, &nf, &nv, &cst);
    if (check != TFS_OK && check != TFS_INVALID_ARGUMENT)
        abort();
    if (check == TFS_OK && (nf < 0 || nv < 0 || (size_t)nf > size || (size_t)nv > size))
        abort();   /* every key and every value costs at least one byte */
    for (int rank = 0; rank < 2; rank++) {
        int64_t one = 1;
        tfs_tensor *ser;
        if (tfs_tensor_new(TFS_DTYPE_STRING, rank, &one, &ser, &st) != TFS_OK ||
            tfs_tensor_set_string(ser, 0, data, size, &st) != TFS_OK)
            abort();
        enum tfs_code code = run_kernel(ser);
        tfs_tensor_unref(ser);
        /* A well-formed Example may still fail the kernel (a wrong kind or count), and the kernel
         * skips the values of keys it did not ask for; but bytes that are not an Example at all
         * never pass it. */
        if (check != TFS_OK && strncmp(cst.msg, "Could not parse", 15) == 0 && code == TFS_OK)
            abort();
    }
    return 0;
}
