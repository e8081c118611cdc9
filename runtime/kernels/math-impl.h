/* Shared by the math-family kernels (kernels/math*.c): TensorFlow/NumPy broadcasting of up to three
 * inputs, the loop that walks a broadcast iteration space, the attr-T check and a float exp that
 * vectorizes. Include only from runtime/kernels/.
 *
 * Broadcasting: shapes are aligned at their last axis; each set of sizes must be equal or 1. The
 * iteration space is the output shape with size-1 axes dropped and adjacent axes merged where every
 * input is laid out contiguously across them, so equal shapes become one flat loop and [2,3] x [3]
 * becomes two rows of three. Strides are in elements; 0 means the input repeats along that axis.
 */
#ifndef TFS_RUNTIME_KERNELS_MATH_IMPL_H
#define TFS_RUNTIME_KERNELS_MATH_IMPL_H

#include <stdint.h>
#include <string.h>

#include "runtime/runtime-impl.h"

typedef struct tfs_bcast {
    int     out_rank;
    int64_t out_dims[TFS_MAX_RANK];
    int     rank;                   /* iteration space (merged), >= 1 */
    int64_t dims[TFS_MAX_RANK];
    int64_t sa[TFS_MAX_RANK];       /* element strides of a, b and c per iteration axis */
    int64_t sb[TFS_MAX_RANK];
    int64_t sc[TFS_MAX_RANK];
} tfs_bcast;

/* Broadcasts a with b (and with c unless c is NULL; its strides are then all 0). INVALID_ARGUMENT
 * "Incompatible shapes: [3] vs. [2]" when they do not broadcast. */
enum tfs_code tfs__bcast_init(const tfs_tensor *a, const tfs_tensor *b, const tfs_tensor *c,
                              tfs_bcast *bc, tfs_status *st);

/* A reduction's shape (math-reduce.c; also the GPU's Sum/Mean/Max/Min): reads the axes tensor
 * (int32/int64 scalar or vector, negative from the end; INVALID_ARGUMENT "Invalid reduction
 * dimension" out of range), sets red[d] for each reduced axis of in, and gives the output shape
 * (attr keep_dims keeps reduced axes as 1) and count, the input elements folded into each output
 * element. */
enum tfs_code tfs__reduce_shape(const tfs_node *n, const tfs_tensor *in, const tfs_tensor *axes,
                                bool red[TFS_MAX_RANK], int *orank, int64_t *odims,
                                int64_t *count, tfs_status *st);

/* Runs BODY(o, pa, pb, pc) for every output element o (0..nelem-1) with the input offsets pa, pb,
 * pc, the innermost axis in a tight loop and the outer axes by an odometer. When both a and b are
 * contiguous or repeated scalars along the innermost axis, the loop has constant strides the
 * compiler can vectorize. */
#define TFS_BCAST_WALK(bc, nelem, BODY)                                                            \
    TFS_BCAST_WALK_ROWS(bc, 0, tfs__bcast_rows(bc, nelem), BODY)

/* The same over rows [row0, row1) of the iteration space (a row is its innermost axis), so that
 * disjoint row ranges can run on different threads (tfs__parallel_for). */
#define TFS_BCAST_WALK_ROWS(bc, row0, row1, BODY)                                                  \
    do {                                                                                           \
        const tfs_bcast *bw_ = (bc);                                                               \
        int r_ = bw_->rank;                                                                        \
        int64_t in_ = bw_->dims[r_ - 1], ia_ = bw_->sa[r_ - 1], ib_ = bw_->sb[r_ - 1];             \
        int64_t ic_ = bw_->sc[r_ - 1];                                                             \
        int64_t idx_[TFS_MAX_RANK] = {0}, oa_ = 0, ob_ = 0, oc_ = 0;                               \
        int64_t row_ = (row0), rend_ = (row1);                                                     \
        for (int64_t t_ = row_, d_ = r_ - 2; row_ < rend_ && d_ >= 0; d_--) {                      \
            idx_[d_] = t_ % bw_->dims[d_];                                                         \
            t_ /= bw_->dims[d_];                                                                   \
            oa_ += idx_[d_] * bw_->sa[d_];                                                         \
            ob_ += idx_[d_] * bw_->sb[d_];                                                         \
            oc_ += idx_[d_] * bw_->sc[d_];                                                         \
        }                                                                                          \
        for (; row_ < rend_; row_++) {                                                             \
            int64_t o0_ = row_ * in_;                                                              \
            if (ia_ == 1 && ib_ == 1 && ic_ == 0) {                                                \
                for (int64_t i_ = 0; i_ < in_; i_++) {                                             \
                    int64_t o = o0_ + i_, pa = oa_ + i_, pb = ob_ + i_, pc = oc_;                  \
                    (void)pa, (void)pb, (void)pc; BODY;                                            \
                }                                                                                  \
            } else if (ia_ == 1 && ib_ == 0 && ic_ == 0) {                                         \
                for (int64_t i_ = 0; i_ < in_; i_++) {                                             \
                    int64_t o = o0_ + i_, pa = oa_ + i_, pb = ob_, pc = oc_;                       \
                    (void)pa, (void)pb, (void)pc; BODY;                                            \
                }                                                                                  \
            } else if (ia_ == 0 && ib_ == 1 && ic_ == 0) {                                         \
                for (int64_t i_ = 0; i_ < in_; i_++) {                                             \
                    int64_t o = o0_ + i_, pa = oa_, pb = ob_ + i_, pc = oc_;                       \
                    (void)pa, (void)pb, (void)pc; BODY;                                            \
                }                                                                                  \
            } else {                                                                               \
                for (int64_t i_ = 0; i_ < in_; i_++) {                                             \
                    int64_t o = o0_ + i_, pa = oa_ + i_ * ia_, pb = ob_ + i_ * ib_;                \
                    int64_t pc = oc_ + i_ * ic_;                                                   \
                    (void)pa, (void)pb, (void)pc; BODY;                                            \
                }                                                                                  \
            }                                                                                      \
            for (int d_ = r_ - 2; d_ >= 0; d_--) {                                                 \
                oa_ += bw_->sa[d_];                                                                \
                ob_ += bw_->sb[d_];                                                                \
                oc_ += bw_->sc[d_];                                                                \
                if (++idx_[d_] < bw_->dims[d_])                                                    \
                    break;                                                                         \
                oa_ -= bw_->sa[d_] * bw_->dims[d_];                                                \
                ob_ -= bw_->sb[d_] * bw_->dims[d_];                                                \
                oc_ -= bw_->sc[d_] * bw_->dims[d_];                                                \
                idx_[d_] = 0;                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Rows (of the innermost axis) of bc's iteration space holding nelem output elements. */
static inline int64_t tfs__bcast_rows(const tfs_bcast *bc, int64_t nelem)
{
    int64_t in = bc->dims[bc->rank - 1];
    return in > 0 ? nelem / in : 0;
}

/* Elements an elementwise loop gives one thread at least (tfs__parallel_for's grain): below
 * about this much work (a few microseconds) another thread costs more than it saves. */
#define TFS_MATH_GRAIN ((int64_t)1 << 15)

/* The grain in units of `per` elements (rows of a walk, pixels of a pool), at least 1. */
static inline int64_t tfs__math_grain(int64_t per)
{
    return per >= TFS_MATH_GRAIN ? 1 : per > 0 ? TFS_MATH_GRAIN / per : TFS_MATH_GRAIN;
}

/* Reads attr T and checks that inputs [first, first+n) have it. */
enum tfs_code tfs__math_check_T(const tfs_kernel_ctx *k, int first, int n, enum tfs_dtype *T,
                                tfs_status *st);

/* e^x for float, written so that GCC vectorizes loops calling it (no libm call, no branches):
 * Cephes' expf reduction e^x = 2^n * e^r, |r| <= ln2/2, with its degree-6 polynomial; 2^n is
 * applied in two halves so results down to the subnormals come out right. Relative error about
 * 2e-7 for normal results; 0 below -104, +inf above 88.8, NaN passes through. */
static inline float tfs__expf(float x)
{
    float xc = x > -104.0f ? x : -104.0f;   /* NaN goes low here and is restored at the end */
    xc = xc < 88.8f ? xc : 88.8f;
    float t = xc * 1.44269504088896341f + 0.5f;
    int32_t n = (int32_t)t;
    n -= (float)n > t;   /* floor(t) for negative t too */
    float fn = (float)n;
    float r = xc - fn * 0.693359375f - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    int32_t n1 = n / 2, n2 = n - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    y = y * s1 * s2;
    y = x < -104.0f ? 0.0f : y;
    return x != x ? x : y;
}

#endif
