/* The table libtfserve-cuda.so exports (cuda-impl.h): its only visible symbol (the module is
 * built with hidden visibility), through which the runtime reaches every entry point. */
#include "runtime/cuda/cuda-impl.h"

extern "C" __attribute__((visibility("default"))) const tfs_cuda_api tfs_cuda_module = {
    TFS_CUDA_ABI_VERSION,
    sizeof(tfs_cuda_api),
    tfs__cuda_device_count,
    tfs__cuda_device_info,
    tfs__cuda_malloc,
    tfs__cuda_free,
    tfs__cuda_host_alloc,
    tfs__cuda_host_free,
    tfs__cuda_stream_new,
    tfs__cuda_stream_free,
    tfs__cuda_stream_begin,
    tfs__cuda_sync,
    tfs__cuda_copy_h2d,
    tfs__cuda_copy_d2h,
    tfs__cuda_copy_d2d,
    tfs__cuda_memset,
    tfs__cuda_sgemm,
    tfs__cuda_bias_act,
    tfs__cuda_binary,
    tfs__cuda_batch_norm,
    tfs__cuda_reduce,
    tfs__cuda_softmax,
    tfs__cuda_conv2d_scratch,
    tfs__cuda_conv2d,
    tfs__cuda_pool,
};
