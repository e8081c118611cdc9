/* Reductions of the CUDA executor (see cuda-impl.h): Sum, Mean, Max and Min of float tensors
 * over any set of axes, with the CPU kernel's semantics (kernels/math-reduce.c): Sum and Mean
 * accumulate in double, so they agree with the CPU's to float rounding (the CPU sums a reduced
 * last axis in four interleaved chains, this kernel in one); Max and Min propagate NaN; an empty
 * reduction gives 0, NaN (Mean: 0/0), -inf or +inf.
 *
 * One thread per output element folds its elements with an odometer over the reduced axes. The
 * axes are first merged into runs of kept and reduced ones (size-1 axes dropped), so the commonest
 * case, a global average pool [N, H, W, C] over {1, 2}, is one reduced run of H*W at stride C:
 * neighbouring threads read neighbouring channels, so loads coalesce. */
#include "runtime/cuda/stream-impl.h"

typedef struct reduce_args {
    int     n_kept, n_red;
    int64_t kept_dims[TFS_CUDA_MAX_RANK], kept_str[TFS_CUDA_MAX_RANK];   /* innermost last */
    int64_t red_dims[TFS_CUDA_MAX_RANK], red_str[TFS_CUDA_MAX_RANK];
} reduce_args;

__global__ static void reduce_kernel(reduce_args r, int op, const float *x, float *y,
                                     int64_t n_out, int64_t count)
{
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < n_out; o += stride) {
        int64_t t = o, off = 0;
        for (int d = r.n_kept - 1; d >= 0; d--) {
            off += (t % r.kept_dims[d]) * r.kept_str[d];
            t /= r.kept_dims[d];
        }
        int64_t idx[TFS_CUDA_MAX_RANK] = {0};
        double sum = 0.0;
        float m = op == TFS_CUDA_RED_MAX ? -INFINITY : INFINITY;
        for (int64_t j = 0; j < count; j++) {
            float v = x[off];
            if (op == TFS_CUDA_RED_SUM || op == TFS_CUDA_RED_MEAN)
                sum += (double)v;
            else if (op == TFS_CUDA_RED_MAX)
                m = (v > m || v != v) ? v : m;   /* a NaN sticks, as on the CPU */
            else
                m = (v < m || v != v) ? v : m;
            for (int d = r.n_red - 1; d >= 0; d--) {
                off += r.red_str[d];
                if (++idx[d] < r.red_dims[d])
                    break;
                off -= r.red_str[d] * r.red_dims[d];
                idx[d] = 0;
            }
        }
        if (op == TFS_CUDA_RED_SUM)
            y[o] = (float)sum;
        else if (op == TFS_CUDA_RED_MEAN)
            y[o] = (float)(sum / (double)count);
        else
            y[o] = m;
    }
}

extern "C" int tfs__cuda_reduce(tfs_cuda_stream *s, enum tfs_cuda_reduce op, int rank,
                                const int64_t *dims, const bool *red, const float *d_x,
                                float *d_y, tfs_cuda_status *cs)
{
    if (rank < 0 || rank > TFS_CUDA_MAX_RANK) {
        snprintf(cs->msg, sizeof cs->msg, "reduce kernel: rank %d out of range", rank);
        return 1;
    }
    /* Runs of kept and reduced axes, innermost last, with their input strides. */
    int64_t mdims[TFS_CUDA_MAX_RANK], mstr[TFS_CUDA_MAX_RANK];
    bool mred[TFS_CUDA_MAX_RANK];
    int m = 0;
    int64_t n_out = 1, count = 1;
    for (int d = 0; d < rank; d++) {
        if (red[d])
            count *= dims[d];
        else
            n_out *= dims[d];
        if (dims[d] == 1)
            continue;
        if (m > 0 && mred[m - 1] == red[d]) {
            mdims[m - 1] *= dims[d];
        } else {
            mdims[m] = dims[d];
            mred[m++] = red[d];
        }
    }
    if (n_out == 0)
        return 0;
    int64_t st = 1;
    for (int d = m - 1; d >= 0; d--) {
        mstr[d] = st;
        st *= mdims[d];
    }
    reduce_args r;
    memset(&r, 0, sizeof r);
    for (int d = 0; d < m; d++) {
        if (mred[d]) {
            r.red_dims[r.n_red] = mdims[d];
            r.red_str[r.n_red++] = mstr[d];
        } else {
            r.kept_dims[r.n_kept] = mdims[d];
            r.kept_str[r.n_kept++] = mstr[d];
        }
    }
    reduce_kernel<<<grid_for(n_out), 256, 0, s->stream>>>(r, (int)op, d_x, d_y, n_out, count);
    return launch_check(cs, "reduce_kernel");
}
