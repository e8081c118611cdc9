/* tfserve-inspect DIR: what `saved_model_cli show --all --dir DIR` shows, for a SavedModel version
 * directory: tag sets, signatures, variables, and the op types the graph uses. */
#include <stdio.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

int main(int argc, char **argv)
{
    if (argc != 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(stderr, "usage: %s SAVED_MODEL_DIR\n"
                "Prints the tag sets, signatures, variables and op types of a SavedModel.\n", argv[0]);
        return argc == 2 ? 0 : 2;
    }
    tfs_status st;
    if (tfs_savedmodel_inspect(argv[1], stdout, &st) != TFS_OK) {
        fprintf(stderr, "tfserve-inspect: %s: %s\n", tfs_code_name(st.code), st.msg);
        return 1;
    }
    return 0;
}
