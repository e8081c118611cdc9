/* Elementwise kernels of the CUDA executor (see cuda-impl.h): bias + activation (BiasAdd, Relu,
 * Relu6, Sigmoid, Tanh and the epilogue of the fused products), broadcasting binary ops (Add,
 * Sub, Mul, RealDiv, Maximum) and inference batch normalization. Expressions follow the CPU
 * kernels' (kernels/math-unary.c, math-binary.c, nn-norm.c) so results agree to float rounding;
 * exp and tanh are CUDA's expf/tanhf, not the CPU's polynomial, hence a tolerance in the parity
 * tests rather than bit equality. Every kernel is a grid-stride loop.
 *
 * Memory-bound, so the per-channel kernels (bias + activation, batch norm) and same-shape binary
 * ops take 4 floats a thread (float4 loads) where the channel count and the pointers allow it,
 * with 32-bit indices where the tensor has under 2^31 elements: on an H200 the scalar int64
 * versions ran ResNet-50's BatchNorm, Relu and Add well behind PyTorch's kernels (ncu; figures
 * in bench/README.md). The channel of an element is i % c, one integer division each, hence
 * the float4's one division for four elements. */
#include <stdint.h>

#include "runtime/cuda/stream-impl.h"

/* float4 access is possible: every pointer 16-byte aligned, n and c multiples of 4. */
static bool vec4_ok(int64_t n, int64_t c, const void *a, const void *b, const void *y)
{
    return n % 4 == 0 && c % 4 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)y) & 15) == 0;
}

__device__ static inline float apply_act(float x, int act, float alpha)
{
    switch (act) {
    case TFS_CUDA_ACT_RELU:
        return x < 0.0f ? 0.0f : x;
    case TFS_CUDA_ACT_RELU6:
        return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
    case TFS_CUDA_ACT_ELU:
        return x < 0.0f ? expm1f(x) : x;
    case TFS_CUDA_ACT_LEAKY_RELU:
        return x > 0.0f ? x : x * alpha;
    case TFS_CUDA_ACT_SIGMOID: {
        float e = expf(x < 0.0f ? x : -x);   /* e^-|x| never overflows */
        return x < 0.0f ? e / (1.0f + e) : 1.0f / (1.0f + e);
    }
    case TFS_CUDA_ACT_TANH:
        return tanhf(x);
    default:
        return x;
    }
}

__global__ static void bias_act_kernel(const float *x, const float *bias, float *y, int64_t n,
                                       int64_t c, int act, float alpha)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i];
        if (bias)
            v += bias[i % c];
        y[i] = apply_act(v, act, alpha);
    }
}

/* Four channels a thread: n4 = n / 4 float4s, c4 = c / 4 of them a row. */
template <typename I>
__global__ static void bias_act4_kernel(const float4 *x, const float4 *bias, float4 *y, I n4,
                                        I c4, int act, float alpha)
{
    I stride = (I)blockDim.x * gridDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        if (bias) {
            float4 b = bias[i % c4];
            v.x += b.x;
            v.y += b.y;
            v.z += b.z;
            v.w += b.w;
        }
        y[i] = make_float4(apply_act(v.x, act, alpha), apply_act(v.y, act, alpha),
                           apply_act(v.z, act, alpha), apply_act(v.w, act, alpha));
    }
}

extern "C" int tfs__cuda_bias_act(tfs_cuda_stream *s, const float *d_x, const float *d_bias,
                                  float *d_y, int64_t n, int64_t c, enum tfs_cuda_act act,
                                  float alpha, tfs_cuda_status *cs)
{
    if (n <= 0)
        return 0;
    c = c > 0 ? c : 1;
    if (vec4_ok(n, d_bias ? c : 4, d_x, d_bias, d_y)) {
        const float4 *x4 = (const float4 *)d_x, *b4 = (const float4 *)d_bias;
        float4 *y4 = (float4 *)d_y;
        int64_t n4 = n / 4, c4 = d_bias ? c / 4 : 1;
        if (n4 < INT32_MAX)
            bias_act4_kernel<uint32_t><<<grid_for(n4), 256, 0, s->stream>>>(
                x4, b4, y4, (uint32_t)n4, (uint32_t)c4, (int)act, alpha);
        else
            bias_act4_kernel<int64_t><<<grid_for(n4), 256, 0, s->stream>>>(x4, b4, y4, n4, c4,
                                                                            (int)act, alpha);
        return launch_check(cs, "bias_act4_kernel");
    }
    bias_act_kernel<<<grid_for(n), 256, 0, s->stream>>>(d_x, d_bias, d_y, n, c, (int)act, alpha);
    return launch_check(cs, "bias_act_kernel");
}

typedef struct bcast_args {
    int     rank;
    int64_t dims[TFS_CUDA_MAX_RANK];
    int64_t sa[TFS_CUDA_MAX_RANK];
    int64_t sb[TFS_CUDA_MAX_RANK];
} bcast_args;

__device__ static inline float binop(int op, float x, float y)
{
    switch (op) {
    case TFS_CUDA_ADD:
        return x + y;
    case TFS_CUDA_SUB:
        return x - y;
    case TFS_CUDA_MUL:
        return x * y;
    case TFS_CUDA_DIV:
        return x / y;
    default:   /* TFS_CUDA_MAXIMUM: NaN in x wins, as the CPU kernel's MAXV */
        return (x != x || x > y) ? x : y;
    }
}

__global__ static void binary_kernel(bcast_args bc, int op, const float *a, const float *b,
                                     float *y, int64_t n)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t t = i, pa = 0, pb = 0;
        for (int d = bc.rank - 1; d >= 0; d--) {
            int64_t idx = t % bc.dims[d];
            t /= bc.dims[d];
            pa += idx * bc.sa[d];
            pb += idx * bc.sb[d];
        }
        y[i] = binop(op, a[pa], b[pb]);
    }
}

/* a and b of the output's shape: no index arithmetic. */
__global__ static void binary4_kernel(int op, const float4 *a, const float4 *b, float4 *y,
                                      int64_t n4)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 u = a[i], v = b[i];
        y[i] = make_float4(binop(op, u.x, v.x), binop(op, u.y, v.y), binop(op, u.z, v.z),
                           binop(op, u.w, v.w));
    }
}

__global__ static void binary_flat_kernel(int op, const float *a, const float *b, float *y,
                                          int64_t n)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = binop(op, a[i], b[i]);
}

extern "C" int tfs__cuda_binary(tfs_cuda_stream *s, enum tfs_cuda_binop op, int rank,
                                const int64_t *dims, const int64_t *a_strides,
                                const int64_t *b_strides, const float *d_a, const float *d_b,
                                float *d_y, int64_t n, tfs_cuda_status *cs)
{
    if (n <= 0)
        return 0;
    if (rank < 1 || rank > TFS_CUDA_MAX_RANK) {
        snprintf(cs->msg, sizeof cs->msg, "binary kernel: rank %d out of range", rank);
        return 1;
    }
    bool same = true;   /* both inputs have the output's shape (contiguous strides) */
    int64_t st = 1;
    for (int d = rank - 1; d >= 0 && same; d--) {
        same = dims[d] <= 1 || (a_strides[d] == st && b_strides[d] == st);
        st *= dims[d];
    }
    if (same) {
        if (vec4_ok(n, 4, d_a, d_b, d_y))
            binary4_kernel<<<grid_for(n / 4), 256, 0, s->stream>>>(
                (int)op, (const float4 *)d_a, (const float4 *)d_b, (float4 *)d_y, n / 4);
        else
            binary_flat_kernel<<<grid_for(n), 256, 0, s->stream>>>((int)op, d_a, d_b, d_y, n);
        return launch_check(cs, "binary_flat_kernel");
    }
    bcast_args bc;
    memset(&bc, 0, sizeof bc);
    bc.rank = rank;
    for (int d = 0; d < rank; d++) {
        bc.dims[d] = dims[d] > 0 ? dims[d] : 1;
        bc.sa[d] = a_strides[d];
        bc.sb[d] = b_strides[d];
    }
    binary_kernel<<<grid_for(n), 256, 0, s->stream>>>(bc, (int)op, d_a, d_b, d_y, n);
    return launch_check(cs, "binary_kernel");
}

/* fac[ch] = scale / sqrtf(var + eps), once per channel, as nn-norm.c computes it. */
__global__ static void batch_norm_fac_kernel(const float *scale, const float *var, float eps,
                                             float *fac, int64_t c)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < c; i += stride)
        fac[i] = 1.0f / sqrtf(var[i] + eps) * scale[i];
}

__global__ static void batch_norm_kernel(const float *x, const float *fac, const float *offset,
                                         const float *mean, float *y, int64_t n, int64_t c)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t ch = i % c;
        y[i] = (x[i] - mean[ch]) * fac[ch] + offset[ch];
    }
}

template <typename I>
__global__ static void batch_norm4_kernel(const float4 *x, const float4 *fac,
                                          const float4 *offset, const float4 *mean, float4 *y,
                                          I n4, I c4)
{
    I stride = (I)blockDim.x * gridDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        I ch = i % c4;
        float4 v = x[i], f = fac[ch], o = offset[ch], m = mean[ch];
        y[i] = make_float4((v.x - m.x) * f.x + o.x, (v.y - m.y) * f.y + o.y,
                           (v.z - m.z) * f.z + o.z, (v.w - m.w) * f.w + o.w);
    }
}

extern "C" int tfs__cuda_batch_norm(tfs_cuda_stream *s, const float *d_x, const float *d_scale,
                                    const float *d_offset, const float *d_mean,
                                    const float *d_var, float eps, float *d_y, int64_t n,
                                    int64_t c, float *d_fac, tfs_cuda_status *cs)
{
    if (n <= 0 || c <= 0)
        return 0;
    batch_norm_fac_kernel<<<grid_for(c), 256, 0, s->stream>>>(d_scale, d_var, eps, d_fac, c);
    int rc = launch_check(cs, "batch_norm_fac_kernel");
    if (rc)
        return rc;
    bool v4 = vec4_ok(n, c, d_x, d_y, d_fac) && vec4_ok(n, c, d_offset, d_mean, d_fac);
    if (v4 && n / 4 < INT32_MAX) {
        batch_norm4_kernel<uint32_t><<<grid_for(n / 4), 256, 0, s->stream>>>(
            (const float4 *)d_x, (const float4 *)d_fac, (const float4 *)d_offset,
            (const float4 *)d_mean, (float4 *)d_y, (uint32_t)(n / 4), (uint32_t)(c / 4));
    } else if (v4) {
        batch_norm4_kernel<int64_t><<<grid_for(n / 4), 256, 0, s->stream>>>(
            (const float4 *)d_x, (const float4 *)d_fac, (const float4 *)d_offset,
            (const float4 *)d_mean, (float4 *)d_y, n / 4, c / 4);
    } else {
        batch_norm_kernel<<<grid_for(n), 256, 0, s->stream>>>(d_x, d_fac, d_offset, d_mean, d_y,
                                                              n, c);
    }
    return launch_check(cs, "batch_norm_kernel");
}
