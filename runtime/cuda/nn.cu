/* Neural-network kernels of the CUDA executor (see cuda-impl.h): Softmax and Conv2D through
 * cuDNN's legacy descriptor API (still in cuDNN 9; the _v7 algorithm query replaces the
 * removed cudnnGetConvolutionForwardAlgorithm), and MaxPool/AvgPool as own kernels.
 *
 * Conv2D. cuDNN wants an NHWC filter as KRSC [OC, KH, KW, C]; TensorFlow's is HWIO, so the filter
 * is transposed into scratch first. cuDNN pads symmetrically; TensorFlow's SAME padding puts an
 * odd pixel at the bottom/right, so such inputs are first copied into a zero-padded buffer and
 * convolved without padding. TF32 is off unless the stream allows it: the convolution's math
 * type is CUDNN_FMA_MATH and algorithms cuDNN reports as tensor-core ones are passed over. The
 * algorithm is chosen once per geometry and stream (measured by cuDNN, kept in the stream), and
 * the descriptors are the stream's, set per call. */
#include <math.h>

#include "runtime/cuda/stream-impl.h"

extern "C" int tfs__cuda_softmax(tfs_cuda_stream *s, const float *d_x, float *d_y, int rows,
                                 int cols, tfs_cuda_status *cs)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    const float one = 1.0f, zero = 0.0f;
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, rows, cols, 1,
                                         1));
    CUDNN_TRY(cudnnSoftmaxForward(s->dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one,
                                  s->xd, d_x, &zero, s->xd, d_y));
    return launch_check(cs, "cudnnSoftmaxForward");
}

/* ---- Conv2D ------------------------------------------------------------------------------------ */

static bool asymmetric(const tfs_cuda_window *g)
{
    return g->pad_top != g->pad_bottom || g->pad_left != g->pad_right;
}

static size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

extern "C" size_t tfs__cuda_conv2d_scratch(const tfs_cuda_window *g)
{
    size_t f = (size_t)g->k_h * (size_t)g->k_w * (size_t)g->c * (size_t)g->out_c * sizeof(float);
    size_t p = 0;
    if (asymmetric(g))
        p = (size_t)g->n * (size_t)(g->h + g->pad_top + g->pad_bottom) *
            (size_t)(g->w + g->pad_left + g->pad_right) * (size_t)g->c * sizeof(float);
    return align256(f) + p;
}

/* HWIO [KH, KW, C, OC] -> KRSC [OC, KH, KW, C]. */
__global__ static void filter_to_krsc(const float *src, float *dst, int kh, int kw, int c, int oc)
{
    int64_t n = (int64_t)kh * kw * c * oc;
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t t = i;
        int ci = (int)(t % c);
        t /= c;
        int x = (int)(t % kw);
        t /= kw;
        int y = (int)(t % kh);
        int o = (int)(t / kh);
        dst[i] = src[(((int64_t)y * kw + x) * c + ci) * oc + o];
    }
}

/* x [N, H, W, C] -> xp [N, H + pt + pb, W + pl + pr, C], zeros around. */
__global__ static void pad_nhwc(const float *x, float *xp, int n, int h, int w, int c, int pt,
                                int pl, int hp, int wp)
{
    int64_t total = (int64_t)n * hp * wp * c;
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int64_t t = i;
        int ci = (int)(t % c);
        t /= c;
        int xw = (int)(t % wp) - pl;
        t /= wp;
        int yh = (int)(t % hp) - pt;
        int64_t b = t / hp;
        bool in = yh >= 0 && yh < h && xw >= 0 && xw < w;
        xp[i] = in ? x[((b * h + yh) * w + xw) * c + ci] : 0.0f;
    }
}

/* The fastest algorithm for the descriptors set on s, measured: cuDNN runs each candidate once
 * on the real buffers (y is written, then overwritten by the call itself) with the stream's
 * workspace, so nothing is allocated. With TF32 off, tensor-core algorithms are passed over and
 * the descriptor stays CUDNN_FMA_MATH; with TF32 allowed it takes the math type cuDNN reports.
 * Measuring, not the heuristics' first pick: on an H200, ResNet-50 at batch 1 and 8 ran much
 * faster with measured picks (batch 64 and 256 the same within noise). The cost is the first
 * call of each geometry on each stream, which takes many times a batch's usual time (figures:
 * bench/README.md, "Figures from source comments"). Where the measurement fails
 * (it may run out of workspace), the heuristics' order is taken instead. */
static int pick_algo(tfs_cuda_stream *s, const float *x, const float *filt, float *y,
                     cudnnConvolutionFwdAlgo_t *algo, cudnnMathType_t *math, tfs_cuda_status *cs)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    cudnnStatus_t e = cudnnFindConvolutionForwardAlgorithmEx(
        s->dnn, s->xd, x, s->wd, filt, s->cd, s->yd, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
        perf, s->d_ws, s->ws_bytes);
    if (e != CUDNN_STATUS_SUCCESS || got == 0) {
        cudaGetLastError();   /* a failed measurement must not fail the next launch check */
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(s->dnn, s->xd, s->wd, s->cd, s->yd,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                         perf));
    }
    for (int i = 0; i < got; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > s->ws_bytes)
            continue;
        bool tensor_ops = perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                          perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (!s->tf32 && tensor_ops)
            continue;
        *algo = perf[i].algo;
        *math = s->tf32 ? perf[i].mathType : CUDNN_FMA_MATH;
        return 0;
    }
    *algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;   /* needs no workspace, always there */
    *math = s->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    return 0;
}

/* The cached choice for g, or a new entry (used = false) to fill. */
static tfs_cuda_conv_choice *conv_choice(tfs_cuda_stream *s, const tfs_cuda_window *g)
{
    for (int i = 0; i < TFS_CUDA_CONV_CACHE; i++)
        if (s->conv[i].used && !memcmp(&s->conv[i].g, g, sizeof *g))
            return &s->conv[i];
    tfs_cuda_conv_choice *c = &s->conv[s->conv_next];
    s->conv_next = (s->conv_next + 1) % TFS_CUDA_CONV_CACHE;
    memset(c, 0, sizeof *c);
    c->g = *g;
    return c;
}

extern "C" int tfs__cuda_conv2d(tfs_cuda_stream *s, const tfs_cuda_window *g, const float *d_x,
                                const float *d_filter, float *d_y, void *d_scratch,
                                tfs_cuda_status *cs)
{
    if ((int64_t)g->n * g->out_h * g->out_w * g->out_c == 0)
        return 0;
    if ((int64_t)g->n * g->h * g->w * g->c == 0 || (int64_t)g->k_h * g->k_w == 0) {
        /* An empty sum per output element (TensorFlow gives zeros). */
        size_t bytes = (size_t)g->n * g->out_h * g->out_w * g->out_c * sizeof(float);
        CUDA_TRY(cudaMemsetAsync(d_y, 0, bytes, s->stream));
        return 0;
    }
    int rc;
    const float one = 1.0f, zero = 0.0f;
    float *filt = (float *)d_scratch;
    size_t fbytes = (size_t)g->k_h * g->k_w * g->c * g->out_c * sizeof(float);
    const float *x = d_x;
    int h = g->h, w = g->w, ph = g->pad_top, pw = g->pad_left;
    int64_t fn = (int64_t)g->k_h * g->k_w * g->c * g->out_c;
    filter_to_krsc<<<grid_for(fn), 256, 0, s->stream>>>(d_filter, filt, g->k_h, g->k_w, g->c,
                                                        g->out_c);
    if ((rc = launch_check(cs, "filter_to_krsc")) != 0)
        return rc;
    if (asymmetric(g)) {
        h = g->h + g->pad_top + g->pad_bottom;
        w = g->w + g->pad_left + g->pad_right;
        float *xp = (float *)((char *)d_scratch + align256(fbytes));
        int64_t pn = (int64_t)g->n * h * w * g->c;
        pad_nhwc<<<grid_for(pn), 256, 0, s->stream>>>(d_x, xp, g->n, g->h, g->w, g->c,
                                                      g->pad_top, g->pad_left, h, w);
        if ((rc = launch_check(cs, "pad_nhwc")) != 0)
            return rc;
        x = xp;
        ph = pw = 0;
    }
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, g->n, g->c,
                                         h, w));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(s->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, g->out_c,
                                         g->c, g->k_h, g->k_w));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(s->cd, ph, pw, g->stride_h, g->stride_w, g->dil_h,
                                              g->dil_w, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    CUDNN_TRY(cudnnSetConvolutionMathType(s->cd, s->tf32 ? CUDNN_TENSOR_OP_MATH
                                                         : CUDNN_FMA_MATH));
    int on, oc, oh, ow;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(s->cd, s->xd, s->wd, &on, &oc, &oh, &ow));
    if (on != g->n || oc != g->out_c || oh != g->out_h || ow != g->out_w) {
        snprintf(cs->msg, sizeof cs->msg, "cuDNN computes a convolution output of "
                 "[%d,%d,%d,%d], expected [%d,%d,%d,%d]", on, oh, ow, oc, g->n, g->out_h,
                 g->out_w, g->out_c);
        return 1;
    }
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, g->n,
                                         g->out_c, g->out_h, g->out_w));
    tfs_cuda_conv_choice *c = conv_choice(s, g);
    if (!c->used) {
        if ((rc = pick_algo(s, x, filt, d_y, &c->algo, &c->math, cs)) != 0)
            return rc;
        c->used = true;
    }
    CUDNN_TRY(cudnnSetConvolutionMathType(s->cd, c->math));
    cudnnStatus_t e = cudnnConvolutionForward(s->dnn, &one, s->xd, x, s->wd, filt, s->cd, c->algo,
                                              s->d_ws, s->ws_bytes, &zero, s->yd, d_y);
    if (e == CUDNN_STATUS_NOT_SUPPORTED && c->algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM) {
        /* The heuristics' pick refused (math type, layout): the algorithm that takes all, from
         * now on for this geometry. */
        c->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        c->math = s->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
        CUDNN_TRY(cudnnSetConvolutionMathType(s->cd, c->math));
        e = cudnnConvolutionForward(s->dnn, &one, s->xd, x, s->wd, filt, s->cd, c->algo, s->d_ws,
                                    s->ws_bytes, &zero, s->yd, d_y);
    }
    if (e != CUDNN_STATUS_SUCCESS)
        return cudnn_fail(cs, "cudnnConvolutionForward", e);
    return launch_check(cs, "cudnnConvolutionForward");
}

/* ---- pooling ----------------------------------------------------------------------------------- */

__global__ static void pool_kernel(tfs_cuda_window g, bool is_max, const float *x, float *y)
{
    int64_t total = (int64_t)g.n * g.out_h * g.out_w * g.c;
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int64_t t = i;
        int c = (int)(t % g.c);
        t /= g.c;
        int ow = (int)(t % g.out_w);
        t /= g.out_w;
        int oh = (int)(t % g.out_h);
        int64_t b = t / g.out_h;
        int h0 = oh * g.stride_h - g.pad_top, w0 = ow * g.stride_w - g.pad_left;
        int h1 = min(h0 + g.k_h, g.h), w1 = min(w0 + g.k_w, g.w);
        h0 = max(h0, 0);
        w0 = max(w0, 0);
        float acc = is_max ? -INFINITY : 0.0f;
        for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++) {
                float v = x[((b * g.h + ih) * g.w + iw) * g.c + c];
                if (is_max)
                    acc = (v > acc || v != v) ? v : acc;   /* a NaN sticks, as on the CPU */
                else
                    acc += v;
            }
        if (!is_max) {
            int count = (h1 - h0) * (w1 - w0);
            acc = count > 0 ? acc / (float)count : 0.0f;
        }
        y[i] = acc;
    }
}

extern "C" int tfs__cuda_pool(tfs_cuda_stream *s, bool max, const tfs_cuda_window *g,
                              const float *d_x, float *d_y, tfs_cuda_status *cs)
{
    int64_t total = (int64_t)g->n * g->out_h * g->out_w * g->c;
    if (total <= 0)
        return 0;
    pool_kernel<<<grid_for(total), 256, 0, s->stream>>>(*g, max, d_x, d_y);
    return launch_check(cs, "pool_kernel");
}
