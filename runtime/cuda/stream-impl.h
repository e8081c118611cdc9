/* Shared by the .cu files of runtime/cuda/ only (compiled by nvcc): the stream object and the
 * helpers that turn cudaError_t, cublasStatus_t and cudnnStatus_t into a tfs_cuda_status
 * message naming the call that failed. */
#ifndef TFS_RUNTIME_CUDA_STREAM_IMPL_H
#define TFS_RUNTIME_CUDA_STREAM_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cuda/cuda-impl.h"

/* A convolution algorithm chosen for one geometry (nn.cu), so the choice is made once per shape
 * and stream rather than once per call. Entries are replaced round-robin, so the cache must hold
 * a model's whole set: ResNet-50 has over 16 geometries a batch size, and with 16 entries every
 * call missed, several times slower than with this size (an H200; bench/README.md). */
#define TFS_CUDA_CONV_CACHE 256
typedef struct tfs_cuda_conv_choice {
    bool                      used;
    tfs_cuda_window           g;      /* the key (ints only: compared with memcmp) */
    cudnnConvolutionFwdAlgo_t algo;
    cudnnMathType_t           math;
} tfs_cuda_conv_choice;

struct tfs_cuda_stream {
    int            dev;
    bool           tf32;
    cudaStream_t   stream;
    cublasHandle_t blas;
    cudnnHandle_t  dnn;
    void          *d_ws;       /* cuBLAS/cuDNN workspace (borrowed) */
    size_t         ws_bytes;
    /* Descriptors made once and set per call (Set is cheap, Create allocates). */
    cudnnTensorDescriptor_t      xd, yd;
    cudnnFilterDescriptor_t      wd;
    cudnnConvolutionDescriptor_t cd;
    tfs_cuda_conv_choice         conv[TFS_CUDA_CONV_CACHE];
    int                          conv_next;   /* the entry replaced next */
};

static inline int cuda_fail(tfs_cuda_status *cs, const char *call, cudaError_t e)
{
    snprintf(cs->msg, sizeof cs->msg, "%s: %s (%s, %d)", call, cudaGetErrorString(e),
             cudaGetErrorName(e), (int)e);
    return 1;
}

static inline int cublas_fail(tfs_cuda_status *cs, const char *call, cublasStatus_t e)
{
    snprintf(cs->msg, sizeof cs->msg, "%s: %s (%s)", call, cublasGetStatusName(e),
             cublasGetStatusString(e));
    return 1;
}

static inline int cudnn_fail(tfs_cuda_status *cs, const char *call, cudnnStatus_t e)
{
    snprintf(cs->msg, sizeof cs->msg, "%s: %s", call, cudnnGetErrorString(e));
    return 1;
}

/* Checks a call; on failure records it and returns 1 from the enclosing function, or jumps to
 * `fail` (the _GOTO forms, for functions with cleanup). */
#define CUDA_TRY(call)                                                                        \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            return cuda_fail(cs, #call, e_);                                                  \
    } while (0)
#define CUDNN_TRY(call)                                                                       \
    do {                                                                                      \
        cudnnStatus_t e_ = (call);                                                            \
        if (e_ != CUDNN_STATUS_SUCCESS)                                                       \
            return cudnn_fail(cs, #call, e_);                                                 \
    } while (0)
#define CUDNN_TRY_GOTO(call)                                                                  \
    do {                                                                                      \
        cudnnStatus_t e_ = (call);                                                            \
        if (e_ != CUDNN_STATUS_SUCCESS) {                                                     \
            rc = cudnn_fail(cs, #call, e_);                                                   \
            goto fail;                                                                        \
        }                                                                                     \
    } while (0)

/* After a kernel launch: a bad configuration or a sticky error from an earlier kernel. */
static inline int launch_check(tfs_cuda_status *cs, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_fail(cs, kernel, e);
}

/* Blocks of 256 threads covering n elements with a grid-stride loop; the grid is capped so
 * the count fits CUDA's limit whatever n is. */
static inline unsigned grid_for(int64_t n)
{
    int64_t b = (n + 255) / 256;
    if (b < 1)
        b = 1;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b);
}

#endif
