/* Row arithmetic for batching: gather the rows of several tasks into one batch tensor (padding the
 * non-batch dims for pad_variable_length_inputs, and appending padding rows for
 * allowed_batch_sizes), and cut batch outputs back into per-task row ranges.
 *
 * Layout: tensors are row-major, so rows [r0, r0+n) of a tensor are one contiguous run of
 * n * row_nelem elements. Padding the non-batch dims is a recursive walk over the inner dims that
 * copies the source's extent of each dim and fills the rest with the pad element. DT_STRING
 * elements are deep-copied element by element (the tensor owns their bytes); every other dtype is
 * plain memory.
 */
#include <string.h>

#include "batching/batching-impl.h"

int64_t tfs__row_nelem(const tfs_tensor *t)
{
    int64_t n = 1;
    for (int d = 1; d < t->rank; d++)
        n *= t->dims[d];
    return n;
}

/* ---- element copies ------------------------------------------------------------------------- */

typedef struct copier {
    tfs_tensor       *dst;
    const tfs_tensor *src;
    size_t            esz;
    int               inner;                  /* rank - 1 */
    const int64_t    *sdims, *ddims;          /* inner dims (dims + 1) */
    int64_t           sstride[TFS_MAX_RANK];  /* elements per step of inner dim d */
    int64_t           dstride[TFS_MAX_RANK];
    int64_t           pad_idx;                /* src element used as the pad value */
} copier;

/* dst[di, di+n) = src[si, si+n) */
static enum tfs_code copy_elems(const copier *c, int64_t di, int64_t si, int64_t n, tfs_status *st)
{
    if (n <= 0)
        return TFS_OK;
    if (c->dst->dtype != TFS_DTYPE_STRING) {
        memcpy((char *)c->dst->data + (size_t)di * c->esz,
               (const char *)c->src->data + (size_t)si * c->esz, (size_t)n * c->esz);
        return TFS_OK;
    }
    const tfs_string *s = (const tfs_string *)c->src->data;
    for (int64_t k = 0; k < n; k++)
        if (tfs_tensor_set_string(c->dst, di + k, s[si + k].data, s[si + k].len, st) != TFS_OK)
            return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    return TFS_OK;
}

/* dst[di, di+n) = src[pad_idx] */
static enum tfs_code fill_pad(const copier *c, int64_t di, int64_t n, tfs_status *st)
{
    if (n <= 0)
        return TFS_OK;
    if (c->dst->dtype != TFS_DTYPE_STRING) {
        const char *v = (const char *)c->src->data + (size_t)c->pad_idx * c->esz;
        char       *d = (char *)c->dst->data + (size_t)di * c->esz;
        for (int64_t k = 0; k < n; k++)
            memcpy(d + (size_t)k * c->esz, v, c->esz);
        return TFS_OK;
    }
    for (int64_t k = 0; k < n; k++)
        if (copy_elems(c, di + k, c->pad_idx, 1, st) != TFS_OK)
            return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    return TFS_OK;
}

/* Copies one source row block at inner dim d into the (larger or equal) destination block. */
static enum tfs_code copy_block(const copier *c, int d, int64_t di, int64_t si, tfs_status *st)
{
    if (d == c->inner - 1) {
        if (copy_elems(c, di, si, c->sdims[d], st) != TFS_OK)
            return st ? st->code : TFS_RESOURCE_EXHAUSTED;
        return fill_pad(c, di + c->sdims[d], c->ddims[d] - c->sdims[d], st);
    }
    for (int64_t i = 0; i < c->sdims[d]; i++)
        if (copy_block(c, d + 1, di + i * c->dstride[d], si + i * c->sstride[d], st) != TFS_OK)
            return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    return fill_pad(c, di + c->sdims[d] * c->dstride[d],
                    (c->ddims[d] - c->sdims[d]) * c->dstride[d], st);
}

static void strides(int inner, const int64_t *dims, int64_t *stride)
{
    int64_t s = 1;
    for (int d = inner - 1; d >= 0; d--) {
        stride[d] = s;
        s *= dims[d];
    }
}

/* Writes src's rows at destination row drow. */
static enum tfs_code copy_rows(tfs_tensor *dst, const tfs__rows *src, int64_t drow, tfs_status *st)
{
    copier c = {.dst = dst, .src = src->t, .esz = tfs_dtype_size(dst->dtype),
                .inner = dst->rank - 1, .sdims = src->t->dims + 1, .ddims = dst->dims + 1};
    int64_t srow_n = tfs__row_nelem(src->t), drow_n = tfs__row_nelem(dst);
    if (srow_n == drow_n)   /* same inner dims: one contiguous run */
        return copy_elems(&c, drow * drow_n, src->row0 * srow_n, src->rows * srow_n, st);
    strides(c.inner, c.sdims, c.sstride);
    strides(c.inner, c.ddims, c.dstride);
    c.pad_idx = src->row0 * srow_n;   /* TF pads with the first element of the task's tensor */
    for (int64_t r = 0; r < src->rows; r++) {
        if (copy_block(&c, 0, (drow + r) * drow_n, (src->row0 + r) * srow_n, st) != TFS_OK)
            return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    }
    return TFS_OK;
}

/* ---- concatenation -------------------------------------------------------------------------- */

bool tfs__rows_concat_is_view(const tfs__rows *src, int n, int64_t padded_rows)
{
    if (n != 1 || padded_rows != src[0].rows)
        return false;
    const tfs_tensor *t = src[0].t;
    /* tfs__rows_slice copies string elements and empty results; all of a tensor is itself. */
    return (src[0].row0 == 0 && src[0].rows == t->dims[0]) ||
           (t->dtype != TFS_DTYPE_STRING && src[0].rows > 0 && tfs__row_nelem(t) > 0);
}

enum tfs_code tfs__rows_concat(const tfs__rows *src, int n, int64_t padded_rows, bool pad_inner,
                               tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    TFS_ASSERT(n >= 1);
    const tfs_tensor *t0 = src[0].t;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += src[i].rows;
    TFS_ASSERT(padded_rows >= total && (total > 0 || padded_rows == 0));
    /* The one task of a batch, or a split task's piece: the run reads the rows where they are. */
    if (tfs__rows_concat_is_view(src, n, padded_rows))
        return tfs__rows_slice((tfs_tensor *)t0, src[0].row0, src[0].rows, out, st);
    int64_t dims[TFS_MAX_RANK];
    memcpy(dims, t0->dims, sizeof dims);
    dims[0] = padded_rows;
    for (int i = 1; i < n && pad_inner; i++)
        for (int d = 1; d < t0->rank; d++)
            if (src[i].t->dims[d] > dims[d])
                dims[d] = src[i].t->dims[d];
    tfs_tensor *dst = NULL;
    /* Concatenation writes every element exactly once (rows, inner padding, padding rows), so a
     * zero fill first would write the whole batch twice. */
    enum tfs_code rc = tfs_tensor_new_uninit(t0->dtype, t0->rank, dims, &dst, st);
    if (rc != TFS_OK)
        return rc;
    int64_t row = 0, last = -1;
    for (int i = 0; i < n; i++) {
        if (src[i].rows == 0)
            continue;
        if ((rc = copy_rows(dst, &src[i], row, st)) != TFS_OK)
            goto fail;
        last = row;
        row += src[i].rows;
    }
    if (row < padded_rows) {
        /* Padding rows repeat the first row of the last source, already laid out in dst. */
        tfs__rows pad = {.t = dst, .row0 = last, .rows = 1};
        for (; row < padded_rows; row++)
            if ((rc = copy_rows(dst, &pad, row, st)) != TFS_OK)
                goto fail;
    }
    *out = dst;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_tensor_unref(dst);
    return rc;
}

/* ---- slicing -------------------------------------------------------------------------------- */

static void unref_parent(void *data, void *arg)
{
    (void)data;
    tfs_tensor_unref(arg);
}

enum tfs_code tfs__rows_slice(tfs_tensor *t, int64_t row0, int64_t rows, tfs_tensor **out,
                              tfs_status *st)
{
    *out = NULL;
    TFS_ASSERT(t->rank >= 1 && row0 >= 0 && rows >= 0 && row0 + rows <= t->dims[0]);
    if (row0 == 0 && rows == t->dims[0]) {
        *out = tfs_tensor_ref(t);
        tfs_status_clear(st);
        return TFS_OK;
    }
    int64_t dims[TFS_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    dims[0] = rows;
    int64_t rn = tfs__row_nelem(t);
    size_t  esz = tfs_dtype_size(t->dtype);
    if (t->dtype != TFS_DTYPE_STRING && rows > 0 && rn > 0) {
        char *p = (char *)t->data + (size_t)(row0 * rn) * esz;
        enum tfs_code rc = tfs_tensor_wrap(t->dtype, t->rank, dims, p, unref_parent, t, out, st);
        if (rc == TFS_OK)
            tfs_tensor_ref(t);   /* released by unref_parent with the slice */
        return rc;
    }
    tfs_tensor *dst = NULL;
    enum tfs_code rc = tfs_tensor_new(t->dtype, t->rank, dims, &dst, st);
    if (rc != TFS_OK)
        return rc;
    tfs__rows src = {.t = t, .row0 = row0, .rows = rows};
    if ((rc = copy_rows(dst, &src, 0, st)) != TFS_OK) {
        tfs_tensor_unref(dst);
        return rc;
    }
    *out = dst;
    tfs_status_clear(st);
    return TFS_OK;
}
