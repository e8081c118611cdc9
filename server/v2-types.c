/* KServe v2 (Open Inference Protocol) datatype names <-> the runtime's dtypes: the one table both
 * v2 codecs (REST JSON and gRPC) use. Names are the spec's tensor data types.
 */
#include "server/server-impl.h"

static const struct {
    const char    *name;
    enum tfs_dtype dtype;
} v2_types[] = {
    {"BOOL", TFS_DTYPE_BOOL},     {"UINT8", TFS_DTYPE_UINT8},   {"UINT16", TFS_DTYPE_UINT16},
    {"UINT32", TFS_DTYPE_UINT32}, {"UINT64", TFS_DTYPE_UINT64}, {"INT8", TFS_DTYPE_INT8},
    {"INT16", TFS_DTYPE_INT16},   {"INT32", TFS_DTYPE_INT32},   {"INT64", TFS_DTYPE_INT64},
    {"FP16", TFS_DTYPE_HALF},     {"FP32", TFS_DTYPE_FLOAT},    {"FP64", TFS_DTYPE_DOUBLE},
    {"BYTES", TFS_DTYPE_STRING},  {"BF16", TFS_DTYPE_BFLOAT16},
};

const char *tfs__v2_datatype(enum tfs_dtype dt)
{
    dt = tfs_dtype_base(dt);
    for (size_t i = 0; i < sizeof v2_types / sizeof v2_types[0]; i++)
        if (v2_types[i].dtype == dt) return v2_types[i].name;
    return NULL;
}

enum tfs_dtype tfs__v2_dtype(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof v2_types / sizeof v2_types[0]; i++)
        if (strlen(v2_types[i].name) == n && memcmp(v2_types[i].name, name, n) == 0)
            return v2_types[i].dtype;
    return TFS_DTYPE_INVALID;
}
