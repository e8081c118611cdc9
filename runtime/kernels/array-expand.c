/* Array kernels that Keras layers' SavedModels carry for shaping and masking: BroadcastTo (one
 * strided copy, stride 0 along the broadcast axes; every dtype, strings deep-copied) and
 * MatrixBandPart (the band of each innermost matrix kept, the rest zero: the causal masks of
 * attention layers). Both as tensorflow/core/kernels/broadcast_to_op.cc and
 * linalg/matrix_band_part_op.cc define them, with their error messages.
 */
#include <inttypes.h>

#include "runtime/runtime-impl.h"

/* ---- BroadcastTo ---------------------------------------------------------------------------- */

enum tfs_code tfs__k_broadcast_to(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    int64_t dims[TFS_MAX_RANK];
    int rank = 0;
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "input", st);
    if (rc == TFS_OK)
        rc = tfs__arr_int_vector(n, k->in[1], "shape", TFS_MAX_RANK, dims, &rank, st);
    if (rc != TFS_OK)
        return rc;
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Dimension %" PRId64 " must be >= 0",
                                 dims[d]);
    if (in->rank > rank)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Rank of input (%d) must be no greater than rank of output shape "
                             "(%d).", in->rank, rank);
    /* TensorFlow first broadcasts the two shapes both ways (sizes equal or one of them 1), then
     * asks that the result be the requested shape: [0] to [1] broadcasts, but to [0]. */
    char si[128], so[128];
    int lead = rank - in->rank;
    bool exact = true;
    for (int d = 0; d < rank; d++) {
        int64_t di = d >= lead ? in->dims[d - lead] : 1;
        if (di != dims[d] && di != 1 && dims[d] != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                                 tfs_shape_str(in->rank, in->dims, si, sizeof si),
                                 tfs_shape_str(rank, dims, so, sizeof so));
        exact = exact && (di == dims[d] || di == 1);
    }
    if (!exact)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Unable to broadcast tensor of shape %s to tensor of shape %s",
                             tfs_shape_str(in->rank, in->dims, si, sizeof si),
                             tfs_shape_str(rank, dims, so, sizeof so));
    if (rank == in->rank) {
        bool same = true;
        for (int d = 0; d < rank; d++)
            same = same && in->dims[d] == dims[d];
        if (same) {   /* nothing to broadcast: the input itself, as TensorFlow forwards it */
            k->out[0] = tfs_tensor_ref(k->in[0]);
            return TFS_OK;
        }
    }
    int64_t in_s[TFS_MAX_RANK], src[TFS_MAX_RANK], dst[TFS_MAX_RANK];
    tfs__arr_strides(in->rank, in->dims, in_s);
    tfs__arr_strides(rank, dims, dst);
    for (int d = 0; d < rank; d++)
        src[d] = d >= lead && in->dims[d - lead] == dims[d] ? in_s[d - lead] : 0;
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_output(k, 0, in->dtype, rank, dims, false, &out, st)) != TFS_OK)
        return rc;
    if ((rc = tfs__arr_strided_copy(out, 0, dst, in, 0, src, rank, dims, st)) != TFS_OK) {
        tfs_tensor_unref(out);
        return rc;
    }
    k->out[0] = out;
    return TFS_OK;
}

/* ---- MatrixBandPart ------------------------------------------------------------------------- */

/* A band limit: an int32/int64 scalar (Tindex). */
static enum tfs_code band_limit(const tfs_node *n, const tfs_tensor *t, const char *what,
                                int64_t *out, tfs_status *st)
{
    if (t->rank != 0) {
        char s[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be scalar, got shape %s",
                             what, tfs_shape_str(t->rank, t->dims, s, sizeof s));
    }
    return tfs__arr_int_scalar(n, t, what, out, st);
}

enum tfs_code tfs__k_matrix_band_part(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    int64_t lower = 0, upper = 0;
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "input", st);
    if (rc != TFS_OK)
        return rc;
    if (in->rank < 2) {
        char s[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "input must be at least 2-dim, received shape: %s",
                             tfs_shape_str(in->rank, in->dims, s, sizeof s));
    }
    if ((rc = band_limit(n, k->in[1], "num_lower", &lower, st)) != TFS_OK ||
        (rc = band_limit(n, k->in[2], "num_upper", &upper, st)) != TFS_OK)
        return rc;
    int64_t rows = in->dims[in->rank - 2], cols = in->dims[in->rank - 1];
    if (lower > rows)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "num_lower must be negative or less or equal to number of rows (%"
                             PRId64 ") got: %" PRId64, rows, lower);
    if (upper > cols)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "num_upper must be negative or less or equal to number of columns (%"
                             PRId64 ") got: %" PRId64, cols, upper);
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_output(k, 0, in->dtype, in->rank, in->dims, true, &out, st)) != TFS_OK)
        return rc;
    int64_t nmat = rows * cols > 0 ? in->nelem / (rows * cols) : 0;
    /* Row i keeps columns j with i - j <= lower and j - i <= upper (a negative limit: all). */
    for (int64_t b = 0; b < nmat; b++)
        for (int64_t i = 0; i < rows; i++) {
            int64_t j0 = lower < 0 || i - lower < 0 ? 0 : i - lower;
            int64_t j1 = upper < 0 || cols - i <= upper ? cols : i + upper + 1;
            if (j1 <= j0)
                continue;
            int64_t at = (b * rows + i) * cols + j0;
            if ((rc = tfs__arr_copy(out, at, in, at, j1 - j0, st)) != TFS_OK) {
                tfs_tensor_unref(out);
                return rc;
            }
        }
    k->out[0] = out;
    return TFS_OK;
}
