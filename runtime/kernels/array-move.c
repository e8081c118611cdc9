/* Array kernels that move elements without computing on them: Pack, Unpack, ConcatV2, Split,
 * SplitV, Transpose, Tile, ReverseV2, Pad, PadV2 and MirrorPad. Every dtype the runtime holds
 * works (strings are deep-copied).
 *
 * Pack/Unpack/Concat/Split view each tensor as [outer, axis, inner] and move contiguous rows of
 * axis*inner elements. Transpose, Tile, ReverseV2 and Pad are one strided copy each (see
 * tfs__arr_strided_copy); MirrorPad maps every output coordinate to its mirrored source.
 */
#include <inttypes.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/runtime-impl.h"

static int64_t prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= dims[d];
    return p;
}

/* Takes over a new output tensor unless rc failed, in which case it is released. */
static enum tfs_code finish(tfs_kernel_ctx *k, int i, tfs_tensor *out, enum tfs_code rc)
{
    if (rc != TFS_OK)
        tfs_tensor_unref(out);
    else
        k->out[i] = out;
    return rc;
}

/* ---- Pack / Unpack -------------------------------------------------------------------------- */

enum tfs_code tfs__k_pack(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "needs at least one input");
    const tfs_tensor *a = k->in[0];
    enum tfs_code rc = tfs__arr_check_T(n, a, "T", "input 0", st);
    int64_t axis = 0;
    const tfs_attr_value *ax = tfs__attr(n, "axis");
    if (ax && ax->kind == TFS_ATTR_I)
        axis = ax->i;
    int ax_n;
    if (rc == TFS_OK)
        rc = tfs__arr_axis(n, axis, a->rank + 1, "axis", &ax_n, st);
    if (rc != TFS_OK)
        return rc;
    for (int i = 1; i < k->n_in; i++) {
        if (k->in[i]->dtype != a->dtype ||
            !tfs_shape_equal(k->in[i]->rank, k->in[i]->dims, a->rank, a->dims)) {
            char s0[128], si[128];
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Shapes of all inputs must match: values[0].shape = %s != "
                                 "values[%d].shape = %s (or dtypes differ)",
                                 tfs_shape_str(a->rank, a->dims, s0, sizeof s0), i,
                                 tfs_shape_str(k->in[i]->rank, k->in[i]->dims, si, sizeof si));
        }
    }
    int64_t dims[TFS_MAX_RANK + 1];
    for (int d = 0, j = 0; d <= a->rank; d++)
        dims[d] = d == ax_n ? k->n_in : a->dims[j++];
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_new_like(n, a->dtype, a->rank + 1, dims, &out, st)) != TFS_OK)
        return rc;
    int64_t outer = prod(a->dims, 0, ax_n), inner = prod(a->dims, ax_n, a->rank);
    for (int64_t o = 0; rc == TFS_OK && o < outer; o++)
        for (int i = 0; rc == TFS_OK && i < k->n_in; i++)
            rc = tfs__arr_copy(out, (o * k->n_in + i) * inner, k->in[i], o * inner, inner, st);
    return finish(k, 0, out, rc);
}

enum tfs_code tfs__k_unpack(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "value", st);
    int64_t axis = 0;
    const tfs_attr_value *ax = tfs__attr(n, "axis");
    if (ax && ax->kind == TFS_ATTR_I)
        axis = ax->i;
    int a;
    if (rc == TFS_OK)
        rc = tfs__arr_axis(n, axis, in->rank, "axis", &a, st);
    if (rc != TFS_OK)
        return rc;
    if (in->dims[a] != k->n_out)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Input shape axis %d must equal %d, got shape [%" PRId64 "] there", a,
                             k->n_out, in->dims[a]);
    int64_t dims[TFS_MAX_RANK];
    for (int d = 0, j = 0; d < in->rank; d++)
        if (d != a)
            dims[j++] = in->dims[d];
    int64_t outer = prod(in->dims, 0, a), inner = prod(in->dims, a + 1, in->rank);
    for (int i = 0; i < k->n_out; i++) {
        tfs_tensor *out = NULL;
        if ((rc = tfs__arr_new_like(n, in->dtype, in->rank - 1, dims, &out, st)) != TFS_OK)
            return rc;
        for (int64_t o = 0; rc == TFS_OK && o < outer; o++)
            rc = tfs__arr_copy(out, o * inner, in, (o * k->n_out + i) * inner, inner, st);
        if ((rc = finish(k, i, out, rc)) != TFS_OK)
            return rc;   /* the session releases the outputs already stored */
    }
    return TFS_OK;
}

/* ---- ConcatV2 ------------------------------------------------------------------------------- */

enum tfs_code tfs__k_concat_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    int nv = k->n_in - 1;
    if (nv < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "needs at least one value and an axis");
    const tfs_tensor *a = k->in[0];
    int64_t axis;
    enum tfs_code rc = tfs__arr_int_scalar(n, k->in[nv], "axis", &axis, st);
    if (rc == TFS_OK)
        rc = tfs__arr_check_T(n, a, "T", "values[0]", st);
    if (rc != TFS_OK)
        return rc;
    if (a->rank == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Can't concatenate scalars (use tf.stack "
                             "instead)");
    int ax;
    if ((rc = tfs__arr_axis(n, axis, a->rank, "ConcatOp : Expected concatenating dimensions in "
                            "the range [-rank, rank), but got", &ax, st)) != TFS_OK)
        return rc;
    int64_t dims[TFS_MAX_RANK];
    memcpy(dims, a->dims, sizeof dims);
    dims[ax] = 0;
    for (int i = 0; i < nv; i++) {
        const tfs_tensor *t = k->in[i];
        bool ok = t->dtype == a->dtype && t->rank == a->rank;
        for (int d = 0; ok && d < a->rank; d++)
            ok = d == ax || t->dims[d] == a->dims[d];
        if (!ok) {
            char s0[128], si[128];
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "ConcatOp : Dimensions of inputs should match: shape[0] = %s vs. "
                                 "shape[%d] = %s", tfs_shape_str(a->rank, a->dims, s0, sizeof s0),
                                 i, tfs_shape_str(t->rank, t->dims, si, sizeof si));
        }
        dims[ax] += t->dims[ax];
    }
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_output(k, 0, a->dtype, a->rank, dims, false, &out, st)) != TFS_OK)
        return rc;
    int64_t outer = prod(dims, 0, ax), inner = prod(dims, ax + 1, a->rank);
    int64_t pos = 0;
    for (int64_t o = 0; rc == TFS_OK && o < outer; o++) {
        for (int i = 0; rc == TFS_OK && i < nv; i++) {
            int64_t len = k->in[i]->dims[ax] * inner;
            rc = tfs__arr_copy(out, pos, k->in[i], o * len, len, st);
            pos += len;
        }
    }
    return finish(k, 0, out, rc);
}

/* ---- Split / SplitV ------------------------------------------------------------------------- */

/* Writes k->n_out outputs: slices of `in` along axis `ax` of sizes[i]. */
static enum tfs_code split_sizes(tfs_kernel_ctx *k, const tfs_tensor *in, int ax,
                                 const int64_t *sizes, tfs_status *st)
{
    int64_t outer = prod(in->dims, 0, ax), inner = prod(in->dims, ax + 1, in->rank);
    int64_t row = in->dims[ax] * inner, start = 0;
    enum tfs_code rc = TFS_OK;
    for (int i = 0; i < k->n_out; i++) {
        int64_t dims[TFS_MAX_RANK];
        memcpy(dims, in->dims, sizeof dims);
        dims[ax] = sizes[i];
        tfs_tensor *out = NULL;
        if ((rc = tfs__arr_new_like(k->node, in->dtype, in->rank, dims, &out, st)) != TFS_OK)
            return rc;
        int64_t len = sizes[i] * inner;
        for (int64_t o = 0; rc == TFS_OK && o < outer; o++)
            rc = tfs__arr_copy(out, o * len, in, o * row + start, len, st);
        if ((rc = finish(k, i, out, rc)) != TFS_OK)
            return rc;
        start += len;
    }
    return TFS_OK;
}

enum tfs_code tfs__k_split(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[1];
    int64_t axis;
    int ax;
    enum tfs_code rc = tfs__arr_int_scalar(n, k->in[0], "split_dim", &axis, st);
    if (rc == TFS_OK)
        rc = tfs__arr_check_T(n, in, "T", "value", st);
    if (rc == TFS_OK)
        rc = tfs__arr_axis(n, axis, in->rank, "split_dim", &ax, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_out < 1 || in->dims[ax] % k->n_out != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Number of ways to split should evenly divide the split dimension, "
                             "but got split_dim %d (size = %" PRId64 ") and num_split %d", ax,
                             in->dims[ax], k->n_out);
    int64_t *sizes = tfs_malloc(sizeof *sizes * (size_t)k->n_out);
    if (!sizes)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    for (int i = 0; i < k->n_out; i++)
        sizes[i] = in->dims[ax] / k->n_out;
    rc = split_sizes(k, in, ax, sizes, st);
    tfs_free(sizes);
    return rc;
}

enum tfs_code tfs__k_split_v(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0], *ss = k->in[1];
    int64_t axis;
    int ax;
    enum tfs_code rc = tfs__arr_int_scalar(n, k->in[2], "split_dim", &axis, st);
    if (rc == TFS_OK)
        rc = tfs__arr_check_T(n, in, "T", "value", st);
    if (rc == TFS_OK)
        rc = tfs__arr_axis(n, axis, in->rank, "split_dim", &ax, st);
    if (rc != TFS_OK)
        return rc;
    if ((ss->dtype != TFS_DTYPE_INT32 && ss->dtype != TFS_DTYPE_INT64) || ss->rank != 1 ||
        ss->nelem != k->n_out)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "size_splits must be an int32/int64 vector of num_split (%d) "
                             "elements", k->n_out);
    int64_t *sizes = tfs_malloc(sizeof *sizes * (size_t)(k->n_out ? k->n_out : 1));
    if (!sizes)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    int unknown = -1;
    int64_t known = 0;
    for (int i = 0; i < k->n_out; i++) {
        sizes[i] = tfs__arr_int_at(ss, i);
        if (sizes[i] == -1 && unknown < 0) {
            unknown = i;
        } else if (sizes[i] < 0) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, sizes[i] == -1
                               ? "There can only be one -1 in the input."
                               : "Split size at index %d must be >= 0. Got: %" PRId64, i, sizes[i]);
            goto done;
        } else if ((known += sizes[i]) > in->dims[ax]) {
            break;
        }
    }
    if (unknown >= 0 && known <= in->dims[ax])
        sizes[unknown] = in->dims[ax] - known;
    else if (known != in->dims[ax] || unknown >= 0) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Determined shape must either match input shape along split_dim "
                           "exactly if fully specified, or be less than the size of the input "
                           "along split_dim if not fully specified.  Got: %" PRId64, known);
        goto done;
    }
    rc = split_sizes(k, in, ax, sizes, st);
done:
    tfs_free(sizes);
    return rc;
}

/* ---- Transpose / Tile / ReverseV2 ----------------------------------------------------------- */

enum tfs_code tfs__k_transpose(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    int64_t perm[TFS_MAX_RANK];
    int np = 0;
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "x", st);
    if (rc == TFS_OK)
        rc = tfs__arr_int_vector(n, k->in[1], "perm", TFS_MAX_RANK, perm, &np, st);
    if (rc != TFS_OK)
        return rc;
    if (np != in->rank)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "transpose expects a vector of size %d. But input(1) is a vector of "
                             "size %d", in->rank, np);
    bool seen[TFS_MAX_RANK] = {false};
    int64_t dims[TFS_MAX_RANK], in_strides[TFS_MAX_RANK], src[TFS_MAX_RANK], dst[TFS_MAX_RANK];
    tfs__arr_strides(in->rank, in->dims, in_strides);
    for (int i = 0; i < np; i++) {
        if (perm[i] < 0 || perm[i] >= np || seen[perm[i]])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "%" PRId64 " is %s in perm", perm[i],
                                 perm[i] < 0 || perm[i] >= np ? "out of range" : "duplicated");
        seen[perm[i]] = true;
        dims[i] = in->dims[perm[i]];
        src[i] = in_strides[perm[i]];
    }
    tfs__arr_strides(np, dims, dst);
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_output(k, 0, in->dtype, np, dims, false, &out, st)) != TFS_OK)
        return rc;
    return finish(k, 0, out, tfs__arr_strided_copy(out, 0, dst, in, 0, src, np, dims, st));
}

enum tfs_code tfs__k_tile(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    int64_t m[TFS_MAX_RANK];
    int nm = 0;
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "input", st);
    if (rc == TFS_OK)
        rc = tfs__arr_int_vector(n, k->in[1], "multiples", TFS_MAX_RANK, m, &nm, st);
    if (rc != TFS_OK)
        return rc;
    if (nm != in->rank)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Expected multiples argument to be a vector of length %d but got "
                             "length %d", in->rank, nm);
    int64_t dims[TFS_MAX_RANK];
    for (int d = 0; d < in->rank; d++) {
        if (m[d] < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Expected multiples[%d] >= 0, but got %" PRId64, d, m[d]);
        if (__builtin_mul_overflow(in->dims[d], m[d], &dims[d]))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "tiled dimension %d overflows", d);
    }
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_new_like(n, in->dtype, in->rank, dims, &out, st)) != TFS_OK)
        return rc;
    /* Index space [m0, d0, m1, d1, ...]: the copy index t on axis 2d repeats the input. */
    int64_t in_s[TFS_MAX_RANK], out_s[TFS_MAX_RANK];
    int64_t sp[2 * TFS_MAX_RANK], src[2 * TFS_MAX_RANK], dst[2 * TFS_MAX_RANK];
    tfs__arr_strides(in->rank, in->dims, in_s);
    tfs__arr_strides(in->rank, dims, out_s);
    for (int d = 0; d < in->rank; d++) {
        sp[2 * d] = m[d];
        src[2 * d] = 0;
        dst[2 * d] = in->dims[d] * out_s[d];
        sp[2 * d + 1] = in->dims[d];
        src[2 * d + 1] = in_s[d];
        dst[2 * d + 1] = out_s[d];
    }
    return finish(k, 0, out,
                  tfs__arr_strided_copy(out, 0, dst, in, 0, src, 2 * in->rank, sp, st));
}

enum tfs_code tfs__k_reverse_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    int64_t axes[TFS_MAX_RANK];
    int na = 0;
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "tensor", st);
    if (rc == TFS_OK)
        rc = tfs__arr_int_vector(n, k->in[1], "axis", TFS_MAX_RANK, axes, &na, st);
    if (rc != TFS_OK)
        return rc;
    bool rev[TFS_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
        int a;
        if ((rc = tfs__arr_axis(n, axes[i], in->rank, "axis", &a, st)) != TFS_OK)
            return rc;
        if (rev[a])
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "axis %d specified more than once.",
                                 a);
        rev[a] = true;
    }
    int64_t s[TFS_MAX_RANK], src[TFS_MAX_RANK], base = 0;
    tfs__arr_strides(in->rank, in->dims, s);
    for (int d = 0; d < in->rank; d++) {
        src[d] = rev[d] ? -s[d] : s[d];
        if (rev[d] && in->dims[d] > 0)
            base += (in->dims[d] - 1) * s[d];
    }
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_new_like(n, in->dtype, in->rank, in->dims, &out, st)) != TFS_OK)
        return rc;
    return finish(k, 0, out, tfs__arr_strided_copy(out, 0, s, in, base, src, in->rank, in->dims,
                                                   st));
}

/* ---- Pad / PadV2 / MirrorPad ---------------------------------------------------------------- */

/* Reads paddings [rank, 2] (non-negative) and computes the padded shape. */
static enum tfs_code read_paddings(const tfs_node *n, const tfs_tensor *in, const tfs_tensor *p,
                                   int64_t before[], int64_t after[], int64_t dims[],
                                   tfs_status *st)
{
    if ((p->dtype != TFS_DTYPE_INT32 && p->dtype != TFS_DTYPE_INT64) || p->rank != 2 ||
        p->dims[0] != in->rank || p->dims[1] != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "paddings must be an int32/int64 matrix of shape [%d,2]", in->rank);
    for (int d = 0; d < in->rank; d++) {
        before[d] = tfs__arr_int_at(p, 2 * d);
        after[d] = tfs__arr_int_at(p, 2 * d + 1);
        if (before[d] < 0 || after[d] < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Paddings must be non-negative: %" PRId64 " %" PRId64, before[d],
                                 after[d]);
        if (__builtin_add_overflow(in->dims[d], before[d], &dims[d]) ||
            __builtin_add_overflow(dims[d], after[d], &dims[d]))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "padded dimension %d overflows", d);
    }
    return TFS_OK;
}

static enum tfs_code pad(tfs_kernel_ctx *k, const tfs_tensor *value, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    int64_t before[TFS_MAX_RANK], after[TFS_MAX_RANK], dims[TFS_MAX_RANK];
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "input", st);
    if (rc == TFS_OK)
        rc = read_paddings(n, in, k->in[1], before, after, dims, st);
    if (rc != TFS_OK)
        return rc;
    if (value && (value->dtype != in->dtype || value->nelem != 1))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "constant_values must be a scalar of the input's dtype");
    tfs_tensor *out = NULL;   /* zeroed: the padding is left as allocated unless value != 0 */
    if ((rc = tfs__arr_output(k, 0, in->dtype, in->rank, dims, true, &out, st)) != TFS_OK)
        return rc;
    size_t esz = tfs_dtype_size(in->dtype);
    static const char zero[16];
    if (value && memcmp(value->data, zero, esz) != 0)   /* zero-filled already */
        for (int64_t i = 0; rc == TFS_OK && i < out->nelem; i++)
            rc = tfs__arr_copy(out, i, value, 0, 1, st);
    int64_t in_s[TFS_MAX_RANK], out_s[TFS_MAX_RANK], base = 0;
    tfs__arr_strides(in->rank, in->dims, in_s);
    tfs__arr_strides(in->rank, dims, out_s);
    for (int d = 0; d < in->rank; d++)
        base += before[d] * out_s[d];
    if (rc == TFS_OK)
        rc = tfs__arr_strided_copy(out, base, out_s, in, 0, in_s, in->rank, in->dims, st);
    return finish(k, 0, out, rc);
}

enum tfs_code tfs__k_pad(tfs_kernel_ctx *k, tfs_status *st)
{
    return pad(k, NULL, st);
}

enum tfs_code tfs__k_pad_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    if (k->n_in != 3)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, has %d",
                             k->n_in);
    return pad(k, k->in[2], st);
}

enum tfs_code tfs__k_mirror_pad(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    const char *mode = tfs__attr_str(n, "mode", "");
    /* REFLECT leaves the edge element out of the mirror image; SYMMETRIC repeats it. */
    int offset;
    if (!strcmp(mode, "REFLECT"))
        offset = 1;
    else if (!strcmp(mode, "SYMMETRIC"))
        offset = 0;
    else
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "mode must be REFLECT or SYMMETRIC, got '%s'", mode);
    int64_t before[TFS_MAX_RANK], after[TFS_MAX_RANK], dims[TFS_MAX_RANK];
    enum tfs_code rc = tfs__arr_check_T(n, in, "T", "input", st);
    if (rc == TFS_OK)
        rc = read_paddings(n, in, k->in[1], before, after, dims, st);
    if (rc != TFS_OK)
        return rc;
    for (int d = 0; d < in->rank; d++)
        if (before[d] > in->dims[d] - offset || after[d] > in->dims[d] - offset)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "paddings must be no greater than the dimension size%s: %" PRId64
                                 ", %" PRId64 " greater than %" PRId64,
                                 offset ? " minus 1" : "", before[d], after[d],
                                 in->dims[d] - offset);
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_new_like(n, in->dtype, in->rank, dims, &out, st)) != TFS_OK)
        return rc;
    /* map[d][o]: the source index along axis d of output index o. */
    int64_t *map[TFS_MAX_RANK] = {NULL};
    int64_t in_s[TFS_MAX_RANK];
    tfs__arr_strides(in->rank, in->dims, in_s);
    for (int d = 0; d < in->rank; d++) {
        map[d] = tfs_malloc(sizeof(int64_t) * (size_t)(dims[d] ? dims[d] : 1));
        if (!map[d]) {
            rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
            goto done;
        }
        for (int64_t o = 0; o < dims[d]; o++) {
            int64_t i = o - before[d];
            if (i < 0)
                i = -i - 1 + offset;
            else if (i >= in->dims[d])
                i = 2 * in->dims[d] - 1 - offset - i;
            map[d][o] = i * in_s[d];
        }
    }
    int64_t idx[TFS_MAX_RANK] = {0};
    for (int64_t e = 0; rc == TFS_OK && e < out->nelem; e++) {
        int64_t src = 0;
        for (int d = 0; d < in->rank; d++)
            src += map[d][idx[d]];
        rc = tfs__arr_copy(out, e, in, src, 1, st);
        for (int d = in->rank - 1; d >= 0 && ++idx[d] == dims[d]; d--)
            idx[d] = 0;
    }
done:
    for (int d = 0; d < in->rank; d++)
        tfs_free(map[d]);
    return finish(k, 0, out, rc);
}
