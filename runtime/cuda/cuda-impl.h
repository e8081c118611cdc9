/* The CUDA executor's device layer: the extern "C" entry points of the .cu files of runtime/cuda/, called by
 * the CUDA backend (runtime/cuda/backend.c, ops.c) and nothing else. They are built into the
 * module libtfserve-cuda.so, which the runtime opens at run time (module.c) and calls only
 * through the table tfs_cuda_api at the end of this header: the runtime links no CUDA
 * library. Plain C types only, so the .cu
 * files need none of the runtime's headers (which use C11 atomics nvcc's C++ cannot read).
 *
 * Every fallible call returns 0 on success and non-zero on failure, with a message in *cs that
 * names the API call and its error ("cublasSgemm_v2: CUBLAS_STATUS_EXECUTION_FAILED"); the
 * backend turns it into TFS_INTERNAL naming the node. Kernels are launched asynchronously on the
 * stream's CUDA stream: a launch error is reported by the call, an error while the kernel runs
 * by a later tfs__cuda_sync (or copy to the host) on that stream.
 *
 * Layout legend: N batch, H height, W width, C channels (NHWC, channels innermost); filters are
 * TensorFlow's HWIO [KH, KW, C, OC]. Pointers named d_* are device memory.
 */
#ifndef TFS_RUNTIME_CUDA_CUDA_IMPL_H
#define TFS_RUNTIME_CUDA_CUDA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfs_cuda_status {
    char msg[200];
} tfs_cuda_status;

/* ---- devices (device.cu) ---------------------------------------------------------------------- */

typedef struct tfs_cuda_device_info {
    char   name[128];
    size_t total_bytes;
    size_t free_bytes;
    int    cc_major, cc_minor;
    int    runtime_version;   /* 13000 = 13.0 */
    int    driver_version;    /* 0 without a driver */
    size_t cudnn_version;     /* 91900 = 9.19.0 */
} tfs_cuda_device_info;

/* Number of CUDA devices. Any error (no driver: cudaErrorInsufficientDriver; driver without a
 * device: cudaErrorNoDevice) is returned with "cudaGetDeviceCount: <error text>" and *count 0. */
int tfs__cuda_device_count(int *count, tfs_cuda_status *cs);
/* Versions only (no device needed): fills runtime_version, driver_version, cudnn_version. */
void tfs__cuda_versions(tfs_cuda_device_info *out);
int tfs__cuda_device_info(int dev, tfs_cuda_device_info *out, tfs_cuda_status *cs);

/* Device and pinned host memory: only at executor creation (model load), never per request. */
int  tfs__cuda_malloc(int dev, size_t n, void **d_out, tfs_cuda_status *cs);
void tfs__cuda_free(int dev, void *d_p);
int  tfs__cuda_host_alloc(int dev, size_t n, void **out, tfs_cuda_status *cs);
void tfs__cuda_host_free(int dev, void *p);

/* One executor's stream, cuBLAS handle and cuDNN handle, all on device `dev`. `d_workspace`
 * (ws_bytes of device memory, owned by the caller) is lent to cuBLAS and cuDNN. allow_tf32
 * lets cuBLAS and cuDNN use TF32 tensor cores for float (10-bit mantissa products); off, float
 * math is IEEE fp32 FMA as on the CPU. */
typedef struct tfs_cuda_stream tfs_cuda_stream;
int  tfs__cuda_stream_new(int dev, bool allow_tf32, void *d_workspace, size_t ws_bytes,
                          tfs_cuda_stream **out, tfs_cuda_status *cs);
void tfs__cuda_stream_free(tfs_cuda_stream *s);   /* NULL-safe */
/* Makes the stream's device current on the calling thread (CUDA's current device is per thread). */
int tfs__cuda_stream_begin(tfs_cuda_stream *s, tfs_cuda_status *cs);
/* Waits for everything queued on the stream; reports an error any of it raised. */
int tfs__cuda_sync(tfs_cuda_stream *s, tfs_cuda_status *cs);
/* Asynchronous copies on the stream (host memory must be pinned for a truly asynchronous copy;
 * pageable memory is copied synchronously by CUDA). */
int tfs__cuda_copy_h2d(tfs_cuda_stream *s, void *d_dst, const void *src, size_t n,
                       tfs_cuda_status *cs);
int tfs__cuda_copy_d2h(tfs_cuda_stream *s, void *dst, const void *d_src, size_t n,
                       tfs_cuda_status *cs);
int tfs__cuda_copy_d2d(tfs_cuda_stream *s, void *d_dst, const void *d_src, size_t n,
                       tfs_cuda_status *cs);
int tfs__cuda_memset(tfs_cuda_stream *s, void *d_dst, int byte, size_t n, tfs_cuda_status *cs);

/* ---- matrix products (blas.cu) ---------------------------------------------------------------- */

/* Row-major C[m,n] = op(A)[m,k] * op(B)[k,n] (op transposes when ta/tb), as tfs__sgemm with
 * alpha 1, beta 0; cuBLAS. Sizes must fit an int (the caller checks). */
int tfs__cuda_sgemm(tfs_cuda_stream *s, bool ta, bool tb, int m, int n, int k, const float *d_a,
                    const float *d_b, float *d_c, tfs_cuda_status *cs);

/* ---- elementwise (elementwise.cu) ------------------------------------------------------------- */

enum tfs_cuda_act {
    TFS_CUDA_ACT_NONE = 0,
    TFS_CUDA_ACT_RELU,
    TFS_CUDA_ACT_RELU6,
    TFS_CUDA_ACT_ELU,
    TFS_CUDA_ACT_LEAKY_RELU,   /* slope alpha */
    TFS_CUDA_ACT_SIGMOID,
    TFS_CUDA_ACT_TANH,
};

/* y[i] = act(x[i] + bias[i % c]) for i < n (bias NULL: no bias; c > 0 when bias is given).
 * y may equal x. */
int tfs__cuda_bias_act(tfs_cuda_stream *s, const float *d_x, const float *d_bias, float *d_y,
                       int64_t n, int64_t c, enum tfs_cuda_act act, float alpha,
                       tfs_cuda_status *cs);

enum tfs_cuda_binop {
    TFS_CUDA_ADD = 0,
    TFS_CUDA_SUB,
    TFS_CUDA_MUL,
    TFS_CUDA_DIV,
    TFS_CUDA_MAXIMUM,
};
#define TFS_CUDA_MAX_RANK 8
/* Broadcasting y = a op b over an output of `rank` dims (rank <= TFS_CUDA_MAX_RANK, n elements):
 * element (i0..i_{r-1}) reads a at sum(i_d * a_strides[d]) and b likewise (stride 0 along a
 * broadcast dimension). Maximum propagates NaN as TensorFlow's CPU kernel does. */
int tfs__cuda_binary(tfs_cuda_stream *s, enum tfs_cuda_binop op, int rank, const int64_t *dims,
                     const int64_t *a_strides, const int64_t *b_strides, const float *d_a,
                     const float *d_b, float *d_y, int64_t n, tfs_cuda_status *cs);

/* Inference batch normalization over channels-last x ([n / c, c]):
 * y = (x - mean[ch]) * (scale[ch] / sqrtf(variance[ch] + eps)) + offset[ch]. d_fac: c floats of
 * device scratch for the per-channel factor. */
int tfs__cuda_batch_norm(tfs_cuda_stream *s, const float *d_x, const float *d_scale,
                         const float *d_offset, const float *d_mean, const float *d_var, float eps,
                         float *d_y, int64_t n, int64_t c, float *d_fac, tfs_cuda_status *cs);

/* ---- reductions (reduce.cu) ------------------------------------------------------------------ */

enum tfs_cuda_reduce {
    TFS_CUDA_RED_SUM = 0,
    TFS_CUDA_RED_MEAN,
    TFS_CUDA_RED_MAX,
    TFS_CUDA_RED_MIN,
};
/* y = op of x [dims] over the axes d with red[d] (rank <= TFS_CUDA_MAX_RANK); y holds the kept
 * axes in order. As the CPU's kernel: Sum and Mean accumulate in double, Max and Min propagate
 * NaN, an empty reduction gives 0, NaN (Mean), -inf (Max) or +inf (Min). */
int tfs__cuda_reduce(tfs_cuda_stream *s, enum tfs_cuda_reduce op, int rank, const int64_t *dims,
                     const bool *red, const float *d_x, float *d_y, tfs_cuda_status *cs);

/* ---- nn (nn.cu) ------------------------------------------------------------------------------- */

/* Softmax over the last dimension of x [rows, cols]; cuDNN (accurate mode: max subtracted). */
int tfs__cuda_softmax(tfs_cuda_stream *s, const float *d_x, float *d_y, int rows, int cols,
                      tfs_cuda_status *cs);

/* The geometry of an NHWC window op, with TensorFlow's (possibly asymmetric) padding. */
typedef struct tfs_cuda_window {
    int n, h, w, c;               /* input */
    int k_h, k_w, out_c;          /* window; out_c: Conv2D's output channels */
    int stride_h, stride_w, dil_h, dil_w;
    int pad_top, pad_bottom, pad_left, pad_right;
    int out_h, out_w;
} tfs_cuda_window;

/* Device scratch bytes tfs__cuda_conv2d needs for this geometry (filter in cuDNN's KRSC order,
 * plus a zero-padded copy of the input when the padding is asymmetric). */
size_t tfs__cuda_conv2d_scratch(const tfs_cuda_window *g);
/* y [N, OH, OW, OC] = Conv2D(x [N, H, W, C], filter [KH, KW, C, OC]); cuDNN with the fastest
 * algorithm (measured by cuDNN, once per geometry) whose workspace fits the stream's. d_scratch
 * holds tfs__cuda_conv2d_scratch(g) bytes. */
int tfs__cuda_conv2d(tfs_cuda_stream *s, const tfs_cuda_window *g, const float *d_x,
                     const float *d_filter, float *d_y, void *d_scratch, tfs_cuda_status *cs);
/* MaxPool / AvgPool [N, OH, OW, C] with TensorFlow's semantics: padding cells are ignored by
 * MaxPool and not counted by AvgPool's divisor. Own kernels: cuDNN pools with symmetric padding
 * only, and TensorFlow's SAME puts the odd pixel at the bottom/right. */
int tfs__cuda_pool(tfs_cuda_stream *s, bool max, const tfs_cuda_window *g, const float *d_x,
                   float *d_y, tfs_cuda_status *cs);

/* ---- the module's table (module.cu; opened by module.c) --------------------------------------- */

/* The one symbol the module exports: a const tfs_cuda_api named TFS_CUDA_MODULE_SYMBOL. The
 * runtime refuses a module whose abi_version differs from its own: bump TFS_CUDA_ABI_VERSION
 * whenever this table, a signature above or a type they pass (tfs_cuda_window, the enums,
 * tfs_cuda_device_info, tfs_cuda_status) changes. abi_version stays the first member in every
 * version, so any module's version can be read. */
#define TFS_CUDA_ABI_VERSION 1
#define TFS_CUDA_MODULE_SYMBOL "tfs_cuda_module"
#define TFS_CUDA_MODULE_FILE "libtfserve-cuda.so"

typedef struct tfs_cuda_api {
    int    abi_version;   /* TFS_CUDA_ABI_VERSION */
    size_t size;          /* sizeof(tfs_cuda_api) */
    int  (*device_count)(int *count, tfs_cuda_status *cs);
    int  (*device_info)(int dev, tfs_cuda_device_info *out, tfs_cuda_status *cs);
    int  (*malloc)(int dev, size_t n, void **d_out, tfs_cuda_status *cs);
    void (*free)(int dev, void *d_p);
    int  (*host_alloc)(int dev, size_t n, void **out, tfs_cuda_status *cs);
    void (*host_free)(int dev, void *p);
    int  (*stream_new)(int dev, bool allow_tf32, void *d_workspace, size_t ws_bytes,
                       tfs_cuda_stream **out, tfs_cuda_status *cs);
    void (*stream_free)(tfs_cuda_stream *s);
    int  (*stream_begin)(tfs_cuda_stream *s, tfs_cuda_status *cs);
    int  (*sync)(tfs_cuda_stream *s, tfs_cuda_status *cs);
    int  (*copy_h2d)(tfs_cuda_stream *s, void *d_dst, const void *src, size_t n,
                     tfs_cuda_status *cs);
    int  (*copy_d2h)(tfs_cuda_stream *s, void *dst, const void *d_src, size_t n,
                     tfs_cuda_status *cs);
    int  (*copy_d2d)(tfs_cuda_stream *s, void *d_dst, const void *d_src, size_t n,
                     tfs_cuda_status *cs);
    int  (*memset)(tfs_cuda_stream *s, void *d_dst, int byte, size_t n, tfs_cuda_status *cs);
    int  (*sgemm)(tfs_cuda_stream *s, bool ta, bool tb, int m, int n, int k, const float *d_a,
                  const float *d_b, float *d_c, tfs_cuda_status *cs);
    int  (*bias_act)(tfs_cuda_stream *s, const float *d_x, const float *d_bias, float *d_y,
                     int64_t n, int64_t c, enum tfs_cuda_act act, float alpha,
                     tfs_cuda_status *cs);
    int  (*binary)(tfs_cuda_stream *s, enum tfs_cuda_binop op, int rank, const int64_t *dims,
                   const int64_t *a_strides, const int64_t *b_strides, const float *d_a,
                   const float *d_b, float *d_y, int64_t n, tfs_cuda_status *cs);
    int  (*batch_norm)(tfs_cuda_stream *s, const float *d_x, const float *d_scale,
                       const float *d_offset, const float *d_mean, const float *d_var, float eps,
                       float *d_y, int64_t n, int64_t c, float *d_fac, tfs_cuda_status *cs);
    int  (*reduce)(tfs_cuda_stream *s, enum tfs_cuda_reduce op, int rank, const int64_t *dims,
                   const bool *red, const float *d_x, float *d_y, tfs_cuda_status *cs);
    int  (*softmax)(tfs_cuda_stream *s, const float *d_x, float *d_y, int rows, int cols,
                    tfs_cuda_status *cs);
    size_t (*conv2d_scratch)(const tfs_cuda_window *g);
    int  (*conv2d)(tfs_cuda_stream *s, const tfs_cuda_window *g, const float *d_x,
                   const float *d_filter, float *d_y, void *d_scratch, tfs_cuda_status *cs);
    int  (*pool)(tfs_cuda_stream *s, bool max, const tfs_cuda_window *g, const float *d_x,
                 float *d_y, tfs_cuda_status *cs);
} tfs_cuda_api;

#ifdef __cplusplus
}
#endif

#endif
