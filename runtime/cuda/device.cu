/* CUDA devices, memory and streams for the CUDA executor (see cuda-impl.h): device detection,
 * the allocations made once when an executor is created, one stream with its cuBLAS and cuDNN
 * handles per executor, and the copies between host and device.
 *
 * Any error from device detection means "no GPU" to the caller: a machine without a driver
 * answers cudaErrorInsufficientDriver, one with a driver and no device cudaErrorNoDevice. */
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/stream-impl.h"

extern "C" int tfs__cuda_device_count(int *count, tfs_cuda_status *cs)
{
    int n = 0;   /* not written on failure */
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = 0;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();   /* not sticky, but leave nothing behind */
        return cuda_fail(cs, "cudaGetDeviceCount", e);
    }
    *count = n;
    return 0;
}

extern "C" void tfs__cuda_versions(tfs_cuda_device_info *out)
{
    int v = 0;
    out->runtime_version = cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
    v = 0;
    out->driver_version = cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
    out->cudnn_version = cudnnGetVersion();
}

extern "C" int tfs__cuda_device_info(int dev, tfs_cuda_device_info *out, tfs_cuda_status *cs)
{
    memset(out, 0, sizeof *out);
    tfs__cuda_versions(out);
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, dev));
    snprintf(out->name, sizeof out->name, "%.127s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    CUDA_TRY(cudaSetDevice(dev));
    CUDA_TRY(cudaMemGetInfo(&out->free_bytes, &out->total_bytes));
    return 0;
}

extern "C" int tfs__cuda_malloc(int dev, size_t n, void **d_out, tfs_cuda_status *cs)
{
    *d_out = NULL;
    CUDA_TRY(cudaSetDevice(dev));
    CUDA_TRY(cudaMalloc(d_out, n));
    return 0;
}

extern "C" void tfs__cuda_free(int dev, void *d_p)
{
    if (!d_p)
        return;
    if (cudaSetDevice(dev) == cudaSuccess)
        (void)cudaFree(d_p);
}

extern "C" int tfs__cuda_host_alloc(int dev, size_t n, void **out, tfs_cuda_status *cs)
{
    *out = NULL;
    CUDA_TRY(cudaSetDevice(dev));
    CUDA_TRY(cudaMallocHost(out, n));
    return 0;
}

extern "C" void tfs__cuda_host_free(int dev, void *p)
{
    (void)dev;
    if (p)
        (void)cudaFreeHost(p);
}

extern "C" int tfs__cuda_stream_new(int dev, bool allow_tf32, void *d_workspace, size_t ws_bytes,
                                    tfs_cuda_stream **out, tfs_cuda_status *cs)
{
    *out = NULL;
    int rc = 0;
    cublasStatus_t bs;
    /* The C library's heap: the module links no part of the runtime, whose allocator it would
     * otherwise call (the stream is the module's own, made and freed here). */
    tfs_cuda_stream *s = (tfs_cuda_stream *)calloc(1, sizeof *s);
    if (!s) {
        snprintf(cs->msg, sizeof cs->msg, "out of host memory creating a CUDA stream");
        return 1;
    }
    s->dev = dev;
    s->tf32 = allow_tf32;
    s->d_ws = d_workspace;
    s->ws_bytes = ws_bytes;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        rc = cuda_fail(cs, "cudaStreamCreateWithFlags", e);
        goto fail;
    }
    if ((bs = cublasCreate(&s->blas)) != CUBLAS_STATUS_SUCCESS) {
        rc = cublas_fail(cs, "cublasCreate", bs);
        goto fail;
    }
    bs = cublasSetStream(s->blas, s->stream);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetWorkspace(s->blas, d_workspace, ws_bytes);
    /* CUBLAS_DEFAULT_MATH keeps float products in fp32 (TF32 only when asked for, or when the
     * NVIDIA_TF32_OVERRIDE environment variable forces it). */
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(s->blas,
                               allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        rc = cublas_fail(cs, "cublasSetStream/SetWorkspace/SetMathMode", bs);
        goto fail;
    }
    CUDNN_TRY_GOTO(cudnnCreate(&s->dnn));
    CUDNN_TRY_GOTO(cudnnSetStream(s->dnn, s->stream));
    CUDNN_TRY_GOTO(cudnnCreateTensorDescriptor(&s->xd));
    CUDNN_TRY_GOTO(cudnnCreateTensorDescriptor(&s->yd));
    CUDNN_TRY_GOTO(cudnnCreateFilterDescriptor(&s->wd));
    CUDNN_TRY_GOTO(cudnnCreateConvolutionDescriptor(&s->cd));
    *out = s;
    return 0;
fail:
    tfs__cuda_stream_free(s);
    return rc;
}

extern "C" void tfs__cuda_stream_free(tfs_cuda_stream *s)
{
    if (!s)
        return;
    if (cudaSetDevice(s->dev) == cudaSuccess) {
        if (s->stream)
            (void)cudaStreamSynchronize(s->stream);
        if (s->cd)
            (void)cudnnDestroyConvolutionDescriptor(s->cd);
        if (s->wd)
            (void)cudnnDestroyFilterDescriptor(s->wd);
        if (s->yd)
            (void)cudnnDestroyTensorDescriptor(s->yd);
        if (s->xd)
            (void)cudnnDestroyTensorDescriptor(s->xd);
        if (s->dnn)
            (void)cudnnDestroy(s->dnn);
        if (s->blas)
            (void)cublasDestroy(s->blas);
        if (s->stream)
            (void)cudaStreamDestroy(s->stream);
    }
    free(s);
}

extern "C" int tfs__cuda_stream_begin(tfs_cuda_stream *s, tfs_cuda_status *cs)
{
    CUDA_TRY(cudaSetDevice(s->dev));
    return 0;
}

extern "C" int tfs__cuda_sync(tfs_cuda_stream *s, tfs_cuda_status *cs)
{
    CUDA_TRY(cudaStreamSynchronize(s->stream));
    return 0;
}

extern "C" int tfs__cuda_copy_h2d(tfs_cuda_stream *s, void *d_dst, const void *src, size_t n,
                                  tfs_cuda_status *cs)
{
    if (n)
        CUDA_TRY(cudaMemcpyAsync(d_dst, src, n, cudaMemcpyHostToDevice, s->stream));
    return 0;
}

extern "C" int tfs__cuda_copy_d2h(tfs_cuda_stream *s, void *dst, const void *d_src, size_t n,
                                  tfs_cuda_status *cs)
{
    if (n)
        CUDA_TRY(cudaMemcpyAsync(dst, d_src, n, cudaMemcpyDeviceToHost, s->stream));
    return 0;
}

extern "C" int tfs__cuda_copy_d2d(tfs_cuda_stream *s, void *d_dst, const void *d_src, size_t n,
                                  tfs_cuda_status *cs)
{
    if (n)
        CUDA_TRY(cudaMemcpyAsync(d_dst, d_src, n, cudaMemcpyDeviceToDevice, s->stream));
    return 0;
}

extern "C" int tfs__cuda_memset(tfs_cuda_stream *s, void *d_dst, int byte, size_t n,
                                tfs_cuda_status *cs)
{
    if (n)
        CUDA_TRY(cudaMemsetAsync(d_dst, byte, n, s->stream));
    return 0;
}
