/* tfserve-inspect DIR: what `saved_model_cli show --all --dir DIR` shows, for a SavedModel version
 * directory: tag sets, signatures, variables, and the op types the graph uses.
 * tfserve-inspect --check [--tags=T] DIR: would tfserve serve it? The import a server makes and a
 * dry run of every signature (tfs_savedmodel_check); exit 0 when it would serve, else 1. */
#include <stdio.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

static int usage(const char *prog, int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: %s SAVED_MODEL_DIR\n"
            "       %s --check [--tags=TAG[,TAG...]] SAVED_MODEL_DIR\n"
            "Prints the tag sets, signatures, variables and op types of a SavedModel.\n"
            "--check loads it as tfserve would (tags, ops, variables, signatures) and dry-runs\n"
            "every signature once on zeros of its declared shapes; exit 0 when it would serve,\n"
            "1 with every reason when it would not. --tags: as --saved_model_tags (default "
            "serve).\n", prog, prog);
    return rc;
}

int main(int argc, char **argv)
{
    bool check = false;
    const char *tags = NULL, *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return usage(argv[0], 0);
        if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strncmp(argv[i], "--tags=", 7))
            tags = argv[i] + 7;
        else if (argv[i][0] == '-' || dir)
            return usage(argv[0], 2);
        else
            dir = argv[i];
    }
    if (!dir || (tags && !check))
        return usage(argv[0], 2);
    if (check)
        return tfs_savedmodel_check(dir, tags, stdout) ? 1 : 0;
    tfs_status st;
    if (tfs_savedmodel_inspect(dir, stdout, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-inspect: %s: %s\n", tfs_code_name(st.code), st.msg);
        return 1;
    }
    return 0;
}
