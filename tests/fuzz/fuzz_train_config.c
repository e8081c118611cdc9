/* libFuzzer target for the tfserve-train config file reader (train/config.c): any bytes given to
 * tfs_train_config_parse must give OK, INVALID_ARGUMENT ("name:line:col: ...") or, never here,
 * RESOURCE_EXHAUSTED -- never a crash, an out-of-bounds read or a leak. A config that parses
 * must hold what the rest of the trainer relies on (1..64 layers pointing into the config, an
 * input shape, a training file, a piecewise schedule with one value more than boundaries).
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay
 * with build-fuzz/tests/fuzz/fuzz_train_config FILE. Seeds: tests/fuzz/corpus/fuzz_train_config/
 * (the examples/ configs and one with every key).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfs_train_config *c = NULL;
    tfs_status st;
    enum tfs_code code = tfs_train_config_parse("fuzz.ini", (const char *)data, size, &c, &st);
    if (code == TFS_OK) {
        if (!c || c->model.n_layers < 1 || c->model.n_layers > TFS_CONFIG_MAX_LAYERS ||
            c->model.layers != c->layers || c->model.input_rank < 1 || !c->data.train_features)
            abort();
        if (c->optimizer.schedule == TFS_LR_PIECEWISE &&
            (c->optimizer.n_pieces < 0 || c->optimizer.n_pieces > TFS_LR_MAX_PIECES))
            abort();
        /* Every string the config owns is readable. */
        for (int i = 0; i < c->n_strings; i++)
            if (strlen(c->strings[i]) > size)
                abort();
        (void)tfs_optimizer_learning_rate(&c->optimizer, 12345);
    } else if (c != NULL) {
        abort();
    } else if (code != TFS_INVALID_ARGUMENT && code != TFS_RESOURCE_EXHAUSTED) {
        fprintf(stderr, "fuzz_train_config: unexpected %s: %s\n", tfs_code_name(code), st.msg);
        abort();
    } else if (code == TFS_INVALID_ARGUMENT && strncmp(st.msg, "fuzz.ini:", 9) != 0) {
        fprintf(stderr, "fuzz_train_config: message without its place: %s\n", st.msg);
        abort();
    }
    tfs_train_config_free(c);
    return 0;
}
