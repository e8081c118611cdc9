/* libFuzzer driver for the TensorBundle index parser: the LevelDB table (footer, block trailers,
 * crc32c, Snappy, prefix-compressed entries) plus the BundleHeaderProto/BundleEntryProto checks.
 * Any input must either parse or fail with a status; crashes, sanitizer reports and leaks are bugs.
 * BUILD is a configured build dir whose gen/ holds the protoc-c output (target tfs-proto):
 *
 *   clang -std=c11 -D_GNU_SOURCE -I. -isystem BUILD/gen -g -O1 -fsanitize=fuzzer,address,undefined \
 *       -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
 *       tests/fuzz/fuzz_bundle_index.c savedmodel/crc32c.c savedmodel/table.c savedmodel/bundle.c \
 *       runtime/alloc.c runtime/status.c runtime/tensor.c runtime/log.c \
 *       $(find BUILD/gen -name '*.pb-c.c') \
 *       -lprotobuf-c -lsnappy -lm -lpthread -o fuzz_bundle_index
 *   ./fuzz_bundle_index -max_total_time=60 CORPUS_DIR SEED_DIR
 *
 * FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (the OSS-Fuzz convention) makes table.c accept bad block
 * checksums, so mutations reach Snappy and the entry parser instead of dying at the crc.
 * Seeds: the fixtures' variables/variables.index files (Snappy and raw). */
#include <stddef.h>
#include <stdint.h>

#include "savedmodel/bundle-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfs_status  st;
    tfs_bundle *b = NULL;
    /* A prefix that does not exist: parsing never touches the data shards. */
    if (tfs__bundle_parse_index(data, size, "/nonexistent/fuzz", &b, &st) == TFS_OK) {
        for (int i = 0; i < tfs_bundle_count(b); i++) {
            const tfs_bundle_entry *e = tfs_bundle_entry_at(b, i);
            if (tfs_bundle_find(b, e->key) != e)
                __builtin_trap();   /* the entries must be sorted and unique */
        }
        tfs_bundle_free(b);
    }
    return 0;
}
