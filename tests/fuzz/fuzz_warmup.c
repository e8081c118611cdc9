/* libFuzzer target for warmup files (assets.extra/tf_serving_warmup_requests): each input is
 * written as that file of the bundled demo model (half_plus_two: y = 0.5 x + 2, input x; a copy
 * whose saved_model.pb and variables/ link to the one the build writes) and replayed by
 * tfs_warmup_run, as the loader does when a version loads: TFRecord framing and both CRCs, the
 * PredictionLog (through the bounded unpack), and the requests it holds run against the model.
 * Any input must end in OK or an error status, never a crash, a leak or a read out of bounds.
 *
 * Built by tests/fuzz/CMakeLists.txt (-DTFS_FUZZ=ON, clang) and run by scripts/fuzz.sh; replay one
 * input with build-fuzz/tests/fuzz/fuzz_warmup FILE. Seeds: tests/fuzz/corpus/fuzz_warmup/
 * (valid records: a length, its masked crc32c, the data and its masked crc32c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "savedmodel/savedmodel.h"
#include "server/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char            dir[256];
static char            file[320];
static tfs_savedmodel *model;

static void link_or_die(const char *model_dir, const char *name)
{
    char src[512], dst[320];
    snprintf(src, sizeof src, "%s/1/%s", model_dir, name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (symlink(src, dst) != 0)
        abort();
}

static void setup(void)
{
    char tmpl[] = "/tmp/tfs-fuzz-warmup-XXXXXX";
    if (!mkdtemp(tmpl))
        abort();
    snprintf(dir, sizeof dir, "%s/1", tmpl);
    char extra[300];
    snprintf(extra, sizeof extra, "%s/assets.extra", dir);
    snprintf(file, sizeof file, "%s/tf_serving_warmup_requests", extra);
    if (mkdir(dir, 0755) != 0 || mkdir(extra, 0755) != 0)
        abort();
    link_or_die(TFS_FUZZ_DEMO_MODEL, "saved_model.pb");
    link_or_die(TFS_FUZZ_DEMO_MODEL, "variables");
    tfs_log_set_level(TFS_LOG_LEVEL_ERROR);
    tfs_status st;
    if (tfs_savedmodel_load(dir, NULL, &model, &st) != TFS_OK) {
        fprintf(stderr, "fuzz_warmup: cannot load the demo model: %s\n", st.msg);
        abort();
    }
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
