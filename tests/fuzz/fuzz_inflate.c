/* libFuzzer target for train/'s own inflate and gzip reader (train/inflate.c, train/gzip.c).
 * The first byte picks the entry point: even, the input's remainder is a gzip file for
 * tfs_gunzip; odd, a raw deflate stream for tfs__inflate. Either must return OK, DATA_LOSS or
 * (past the 8 MB output limit set here) RESOURCE_EXHAUSTED, never read outside the input, and
 * free everything (the gzip reader checks each member's CRC-32 and ISIZE itself).
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay
 * with build-fuzz/tests/fuzz/fuzz_inflate FILE. Seeds: tests/fuzz/corpus/fuzz_inflate/ (gzip
 * files of text, zeros and random bytes at several levels, each prefixed with its mode byte).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/alloc.h"
#include "train/train-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OUT ((size_t)8 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    tfs_status    st;
    enum tfs_code code;
    if (data[0] % 2 == 0) {
        void  *out = NULL;
        size_t len = 0;
        code = tfs_gunzip("fuzz.gz", data + 1, size - 1, MAX_OUT, &out, &len, &st);
        if (code == TFS_OK && out == NULL)
            abort();
        tfs_free(out);
    } else {
        tfs__bytes o = {NULL, 0, 0};
        size_t     used = 0;
        code = tfs__inflate(data + 1, size - 1, 0, &o, MAX_OUT, &used, "fuzz", &st);
        if (code == TFS_OK && used > size - 1)
            abort();
        tfs_free(o.data);
    }
    if (code != TFS_OK && code != TFS_DATA_LOSS && code != TFS_RESOURCE_EXHAUSTED) {
        fprintf(stderr, "fuzz_inflate: unexpected %s: %s\n", tfs_code_name(code), st.msg);
        abort();
    }
    return 0;
}
