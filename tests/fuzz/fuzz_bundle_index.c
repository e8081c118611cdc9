/* libFuzzer driver for the TensorBundle index parser: the LevelDB table (footer, block trailers,
 * crc32c, Snappy, prefix-compressed entries) plus the BundleHeaderProto/BundleEntryProto checks.
 * Any input must either parse or fail with a status; crashes, sanitizer reports and leaks are bugs.
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay one
 * input with build-fuzz/tests/fuzz/fuzz_bundle_index FILE.
 *
 * FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (the OSS-Fuzz convention) makes table.c accept bad block
 * checksums, so mutations reach Snappy and the entry parser instead of dying at the crc.
 * Seeds (copied in by scripts/fuzz.sh at run time, not kept in the repository): the demo model's
 * variables.index and the fixtures' variables/variables.index files (Snappy and raw). */
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
