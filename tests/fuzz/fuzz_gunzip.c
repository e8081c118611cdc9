/* libFuzzer target for train/'s gzip reader (train/gzip.c: tfs_gunzip, over zlib). The whole input
 * is a gzip file. The reader must return OK, DATA_LOSS or (past the 8 MB output limit set here)
 * RESOURCE_EXHAUSTED, never touch memory outside the input and its output buffer, free everything
 * (zlib's state included, on every error path), and on OK hand back a buffer even for 0 bytes.
 * zlib itself is the system library, not instrumented: coverage feedback and the sanitizers see
 * our side of it (member loop, padding, output growth and limit, error paths).
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay
 * with build-fuzz/tests/fuzz/fuzz_gunzip FILE. Seeds: tests/fuzz/corpus/fuzz_gunzip/ (gzip files
 * of text, zeros and random bytes at levels 1 and 9).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/alloc.h"
#include "train/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OUT ((size_t)8 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfs_status    st;
    void         *out = NULL;
    size_t        len = 0;
    enum tfs_code code = tfs_gunzip("fuzz.gz", data, size, MAX_OUT, &out, &len, &st);
    if (code == TFS_OK && (out == NULL || len > MAX_OUT))
        abort();
    if (code != TFS_OK && out != NULL)
        abort();
    tfs_free(out);
    if (code != TFS_OK && code != TFS_DATA_LOSS && code != TFS_RESOURCE_EXHAUSTED) {
        fprintf(stderr, "fuzz_gunzip: unexpected %s: %s\n", tfs_code_name(code), st.msg);
        abort();
    }
    return 0;
}
