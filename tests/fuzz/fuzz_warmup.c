/* libFuzzer target for warmup files (assets.extra/tf_serving_warmup_requests): each input is
 * written as that file of a small SavedModel made once (y = 0.5 x + 1, input x) and replayed by
 * tfs_warmup_run, as the loader does when a version loads: TFRecord framing and both CRCs, the
 * PredictionLog (through the bounded unpack), and the requests it holds run against the model.
 * Any input must end in OK or an error status, never a crash, a leak or a read out of bounds.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay one
 * input with build-fuzz/tests/fuzz/fuzz_warmup FILE. Seeds: tests/fuzz/corpus/fuzz_warmup/
 * (records written by the warmup tests' format: a length, its masked crc32c, the data and its
 * masked crc32c). FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION does not skip the CRCs here: mutations
 * that keep them valid are the seeds' job. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "savedmodel/savedmodel.h"
#include "server/server.h"
#include "tests/support/tfs-models.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char            dir[256];
static char            file[320];
static tfs_savedmodel *model;

static void setup(void)
{
    char tmpl[] = "/tmp/tfs-fuzz-warmup-XXXXXX";
    if (!mkdtemp(tmpl))
        abort();
    snprintf(dir, sizeof dir, "%s/1", tmpl);
    tfs_test_write_model(dir, 1, 0);
    char extra[300];
    snprintf(extra, sizeof extra, "%s/assets.extra", dir);
    snprintf(file, sizeof file, "%s/tf_serving_warmup_requests", extra);
    tfs_status st;
    if (mkdir(extra, 0755) != 0 || tfs_savedmodel_load(dir, NULL, &model, &st) != TFS_OK)
        abort();
    tfs_log_set_level(TFS_LOG_LEVEL_ERROR);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model)
        setup();
    FILE *f = fopen(file, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    tfs_status st;
    tfs_warmup_run(NULL, "m", 1, dir, model, &st);
    return 0;
}
