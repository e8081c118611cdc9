/* The Einsum kernel: one or two operands, TensorFlow's equation rules
 * (tensorflow/core/kernels/linalg/einsum_op_impl.h and util/einsum_op_util.cc).
 *
 * An equation is "in0->out" or "in0,in1->out"; a label is any character but '.', ',' and the
 * arrow; "..." (at most once per subscript) stands for broadcasting axes, which line up from the
 * right across the operands and must be equal or 1 there (NumPy's rule; named labels must have
 * equal sizes). A label repeated within an operand takes its diagonal ("ii->i"); repeated in the
 * output it writes the diagonal of zeros ("i->ii"). float, double, int32 and int64.
 *
 * With two operands every label is, as TensorFlow classifies it: batch (both operands and the
 * output), free (one operand and the output), contract (both operands, not the output) or reduce
 * (one operand only: summed out first). Each operand is brought to a batched matrix, [batch, free,
 * contract] or [batch, contract, free], and the product is one GEMM per batch element
 * (tfs__nn_gemm, MatMul's) into [batch, free0, free1]. An operand already laid out that way is
 * used in place, and the product is written straight into the output when its order is that
 * one (or [batch, free1, free0]: the operands are then swapped), so the equations that Keras'
 * EinsumDense and MultiHeadAttention save ("abc,cd->abd", "aecd,abcd->acbe", ...) copy little or
 * nothing; any other order costs one strided copy per operand and one for the result. Summing a
 * reduce label (and a one-operand einsum that drops labels) is a plain loop, accumulating in
 * double (float, double) or wrapping around in 64 bits (integers).
 */
#include <inttypes.h>
#include <limits.h>
#include <string.h>

#include "runtime/kernels/math-impl.h"
#include "runtime/runtime-impl.h"

#define EIN_MAX_LABELS (5 * TFS_MAX_RANK)   /* named labels (<= 3 * 8), then broadcasting */
#define EIN_MAX_SUB 64                      /* characters of one subscript */

typedef struct ein_sub {
    int  n;                      /* labels, the ellipsis counted as one */
    int  label[EIN_MAX_SUB];     /* label ids; -1 for the ellipsis */
    bool ellipsis;
} ein_sub;

typedef struct einsum {
    int     nin;
    int     nlab;                        /* distinct labels: named, then broadcasting */
    int64_t size[EIN_MAX_LABELS];        /* each label's size (broadcast over the operands) */
    int     rank[2];
    int     lab[2][TFS_MAX_RANK];        /* each operand axis's label */
    int     out_rank;
    int     out_lab[TFS_MAX_RANK];
    int     cnt[3][EIN_MAX_LABELS];      /* occurrences in operand 0, 1 and the output */
} einsum;

/* ---- parsing -------------------------------------------------------------------------------- */

/* c's label id, a new one when c is new; -1 when there is no room for one. */
static int label_id(char c, char *chars, int *n)
{
    for (int i = 0; i < *n; i++)
        if (chars[i] == c)
            return i;
    if (*n == 3 * TFS_MAX_RANK)
        return -1;
    chars[*n] = c;
    return (*n)++;
}

/* One subscript s[0, len) into sub, named labels mapped through chars/nchars. */
static enum tfs_code parse_sub(const tfs_node *nd, const char *eq, const char *s, size_t len,
                               char *chars, int *nchars, ein_sub *sub, tfs_status *st)
{
    sub->n = 0;
    sub->ellipsis = false;
    for (size_t i = 0; i < len; i++) {
        if (sub->n == EIN_MAX_SUB)
            return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                 "einsum equation '%s' has too many labels", eq);
        if (s[i] == '.') {
            if (sub->ellipsis || len - i < 3 || s[i + 1] != '.' || s[i + 2] != '.')
                return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                     "einsum equation '%s': a subscript may hold one ellipsis "
                                     "(...) and no other '.'", eq);
            sub->ellipsis = true;
            sub->label[sub->n++] = -1;
            i += 2;
            continue;
        }
        if ((sub->label[sub->n++] = label_id(s[i], chars, nchars)) < 0)
            return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                 "einsum equation '%s' has too many labels", eq);
    }
    return TFS_OK;
}

/* A named label's size, checked against the sizes seen so far (TensorFlow's message). */
static enum tfs_code record_size(const tfs_node *nd, einsum *e, int label, const tfs_tensor *t,
                                 int axis, bool *seen, tfs_status *st)
{
    if (seen[label] && e->size[label] != t->dims[axis]) {
        char s[128];
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                             "Expected dimension %" PRId64 " at axis %d of the input shaped %s "
                             "but got dimension %" PRId64, e->size[label], axis,
                             tfs_shape_str(t->rank, t->dims, s, sizeof s), t->dims[axis]);
    }
    seen[label] = true;
    e->size[label] = t->dims[axis];
    return TFS_OK;
}

/* Parses the equation against the operands' shapes into e (labels per axis, label sizes). */
static enum tfs_code einsum_parse(const tfs_node *nd, const char *eq, const tfs_tensor *const *in,
                                  int nin, einsum *e, tfs_status *st)
{
    memset(e, 0, sizeof *e);
    const char *arrow = strstr(eq, "->");
    if (!arrow || strstr(arrow + 2, "->"))
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                             "Expecting exactly one '->' in einsum equation: %s", eq);
    const char *comma = memchr(eq, ',', (size_t)(arrow - eq));
    int nsub = 1;
    for (const char *c = eq; c < arrow; c++)
        nsub += *c == ',';
    if (nsub > 2)
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                             "Expecting 1 or 2 input subscripts in equation '%s' but got: %d", eq,
                             nsub);
    if (nsub != nin)
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT, "Expected %d inputs but got: %d", nsub,
                             nin);
    char chars[EIN_MAX_LABELS];
    int nchars = 0;
    ein_sub sub[3];
    enum tfs_code rc = parse_sub(nd, eq, eq, (size_t)((comma ? comma : arrow) - eq), chars,
                                 &nchars, &sub[0], st);
    if (rc == TFS_OK && comma)
        rc = parse_sub(nd, eq, comma + 1, (size_t)(arrow - comma - 1), chars, &nchars, &sub[1],
                       st);
    if (rc == TFS_OK)
        rc = parse_sub(nd, eq, arrow + 2, strlen(arrow + 2), chars, &nchars, &sub[2], st);
    if (rc != TFS_OK)
        return rc;
    int named = nchars;
    bool seen[EIN_MAX_LABELS] = {false};
    int nbc[2] = {0, 0}, max_bc = 0;
    e->nin = nin;
    /* Named labels first, and how many broadcasting axes each ellipsis stands for. */
    for (int i = 0; i < nin; i++) {
        const tfs_tensor *t = in[i];
        int nlabels = sub[i].n - (sub[i].ellipsis ? 1 : 0);
        if (!sub[i].ellipsis && t->rank != nlabels)
            return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                 "Expected input %d to have rank %d but got: %d", i, nlabels,
                                 t->rank);
        if (sub[i].ellipsis && t->rank < nlabels)
            return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                 "Expected input %d to have rank at least %d but got: %d", i,
                                 nlabels, t->rank);
        nbc[i] = t->rank - nlabels;
        max_bc = nbc[i] > max_bc ? nbc[i] : max_bc;
        e->rank[i] = t->rank;
        for (int j = 0, axis = 0; j < sub[i].n; j++) {
            if (sub[i].label[j] < 0) {
                axis += nbc[i];
                continue;
            }
            if ((rc = record_size(nd, e, sub[i].label[j], t, axis, seen, st)) != TFS_OK)
                return rc;
            e->lab[i][axis++] = sub[i].label[j];
        }
    }
    if (named + max_bc > EIN_MAX_LABELS)
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                             "einsum equation '%s' has too many labels", eq);
    e->nlab = named + max_bc;
    /* Broadcasting labels: named + 0 .. max_bc - 1, aligned at the right of each ellipsis. */
    for (int b = 0; b < max_bc; b++)
        e->size[named + b] = 1;
    for (int i = 0; i < nin; i++) {
        int at = 0;
        while (at < sub[i].n && sub[i].label[at] >= 0)
            at++;   /* the ellipsis's axis */
        for (int b = 0; b < nbc[i]; b++) {
            int label = named + max_bc - nbc[i] + b;
            int64_t d = in[i]->dims[at + b], *sz = &e->size[label];
            e->lab[i][at + b] = label;
            if (*sz == 1) {
                *sz = d;
            } else if (d != 1 && d != *sz) {
                char s0[128], s1[128];
                return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                     "Invalid broadcasting dimensions: %s vs. %s",
                                     tfs_shape_str(in[0]->rank, in[0]->dims, s0, sizeof s0),
                                     tfs_shape_str(in[nin - 1]->rank, in[nin - 1]->dims, s1,
                                                   sizeof s1));
            }
        }
    }
    /* The output. */
    int out_named = sub[2].n - (sub[2].ellipsis ? 1 : 0);
    if (!sub[2].ellipsis && max_bc > 0)
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                             "Output contains %d broadcasting dimension(s) but no ellipsis (...) "
                             "was found in the output subscripts.", max_bc);
    if (out_named + (sub[2].ellipsis ? max_bc : 0) > TFS_MAX_RANK)
        return tfs__node_err(nd, st, TFS_UNIMPLEMENTED,
                             "einsum output would have rank above %d", TFS_MAX_RANK);
    for (int j = 0; j < sub[2].n; j++) {
        int label = sub[2].label[j];
        if (label < 0) {
            for (int b = 0; b < max_bc; b++)
                e->out_lab[e->out_rank++] = named + b;
            continue;
        }
        if (!seen[label])
            return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                                 "einsum equation '%s': output label '%c' appears in no input",
                                 eq, chars[label]);
        e->out_lab[e->out_rank++] = label;
    }
    for (int i = 0; i < nin; i++)
        for (int a = 0; a < e->rank[i]; a++)
            e->cnt[i][e->lab[i][a]]++;
    for (int a = 0; a < e->out_rank; a++)
        e->cnt[2][e->out_lab[a]]++;
    return TFS_OK;
}

/* ---- moving and summing operands ------------------------------------------------------------ */

/* The product of the labels' sizes, INT64_MAX when it overflows (a tensor that large is then
 * refused by the size limit). */
static int64_t labels_nelem(const einsum *e, const int *labels, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(p, e->size[labels[i]], &p))
            return INT64_MAX;
    return p;
}

/* Operand i's element stride per label: the sum over its axes carrying it (a diagonal for a
 * repeated label), 0 where the operand has size 1 and the label more (broadcast). */
static void label_strides(const einsum *e, int i, const tfs_tensor *t, int64_t *stride)
{
    int64_t s[TFS_MAX_RANK];
    tfs__arr_strides(t->rank, t->dims, s);
    for (int l = 0; l < e->nlab; l++)
        stride[l] = 0;
    for (int a = 0; a < t->rank; a++)
        if (t->dims[a] == e->size[e->lab[i][a]])
            stride[e->lab[i][a]] += s[a];
}

/* Element p of t as a double or as 64 bits (integers), and back. */
static double elem_f(const tfs_tensor *t, int64_t p)
{
    return t->dtype == TFS_DTYPE_FLOAT ? (double)((const float *)t->data)[p]
                                       : ((const double *)t->data)[p];
}

static uint64_t elem_i(const tfs_tensor *t, int64_t p)
{
    return t->dtype == TFS_DTYPE_INT32 ? (uint64_t)(int64_t)((const int32_t *)t->data)[p]
                                       : (uint64_t)((const int64_t *)t->data)[p];
}

/* dst (contiguous, labels keep[0, nk) in that order) = src summed over labels red[0, nr). */
static void sum_labels(const einsum *e, const tfs_tensor *src, const int64_t *stride,
                       const int *keep, int nk, const int *red, int nr, tfs_tensor *dst)
{
    int64_t kidx[EIN_MAX_LABELS] = {0}, ridx[EIN_MAX_LABELS] = {0};
    int64_t nred = labels_nelem(e, red, nr);
    bool fp = dst->dtype == TFS_DTYPE_FLOAT || dst->dtype == TFS_DTYPE_DOUBLE;
    int64_t base = 0;
    for (int64_t o = 0; o < dst->nelem; o++) {
        double accf = 0;
        uint64_t acci = 0;
        int64_t p = base;
        for (int64_t r = 0; r < nred; r++) {
            if (fp)
                accf += elem_f(src, p);
            else
                acci += elem_i(src, p);
            for (int d = nr - 1; d >= 0; d--) {   /* next reduce index */
                p += stride[red[d]];
                if (++ridx[d] < e->size[red[d]])
                    break;
                p -= stride[red[d]] * e->size[red[d]];
                ridx[d] = 0;
            }
        }
        switch (dst->dtype) {
        case TFS_DTYPE_FLOAT:  ((float *)dst->data)[o] = (float)accf; break;
        case TFS_DTYPE_DOUBLE: ((double *)dst->data)[o] = accf; break;
        case TFS_DTYPE_INT32:  ((int32_t *)dst->data)[o] = (int32_t)(uint32_t)acci; break;
        default:               ((int64_t *)dst->data)[o] = (int64_t)acci; break;
        }
        for (int d = nk - 1; d >= 0; d--) {   /* next kept index */
            base += stride[keep[d]];
            if (++kidx[d] < e->size[keep[d]])
                break;
            base -= stride[keep[d]] * e->size[keep[d]];
            kidx[d] = 0;
        }
    }
}

/* Operand i laid out as labels order[0, n) (contiguous), summed over red[0, nr): into *out, a new
 * tensor of rows * cols elements (or the output tensor `into` when not NULL). */
static enum tfs_code arrange(const tfs_node *nd, const einsum *e, int i, const tfs_tensor *t,
                             const int *order, int n, const int *red, int nr, int64_t rows,
                             int64_t cols, tfs_tensor *into, tfs_tensor **out, tfs_status *st)
{
    int64_t stride[EIN_MAX_LABELS], dims[EIN_MAX_LABELS], dst[EIN_MAX_LABELS];
    label_strides(e, i, t, stride);
    tfs_tensor *r = into;
    enum tfs_code rc = TFS_OK;
    int64_t total;
    if (__builtin_mul_overflow(rows, cols, &total))
        total = INT64_MAX;   /* refused as too large */
    if (!r && (rc = tfs__arr_new_like(nd, t->dtype, 1, &total, &r, st)) != TFS_OK)
        return rc;
    if (nr > 0 || n == 0) {
        sum_labels(e, t, stride, order, n, red, nr, r);
    } else {
        int64_t src[EIN_MAX_LABELS];
        for (int d = 0; d < n; d++) {
            dims[d] = e->size[order[d]];
            src[d] = stride[order[d]];
        }
        tfs__arr_strides(n, dims, dst);
        rc = tfs__arr_strided_copy(r, 0, dst, t, 0, src, n, dims, st);
    }
    if (rc != TFS_OK) {
        if (r != into)
            tfs_tensor_unref(r);
        return rc;
    }
    *out = r;
    return TFS_OK;
}

/* Writes the contiguous result res (labels order[0, n)) into the zeroed output, each output axis
 * taking its label's index (so a label repeated in the output fills a diagonal). */
static enum tfs_code scatter_output(const einsum *e, const tfs_tensor *res, const int *order,
                                    int n, tfs_tensor *out, tfs_status *st)
{
    int64_t os[TFS_MAX_RANK], dst[EIN_MAX_LABELS] = {0}, src[EIN_MAX_LABELS], dims[EIN_MAX_LABELS];
    tfs__arr_strides(out->rank, out->dims, os);
    for (int d = 0; d < n; d++) {
        dims[d] = e->size[order[d]];
        for (int a = 0; a < e->out_rank; a++)
            if (e->out_lab[a] == order[d])
                dst[d] += os[a];
    }
    tfs__arr_strides(n, dims, src);
    return tfs__arr_strided_copy(out, 0, dst, res, 0, src, n, dims, st);
}

/* Whether operand i's axes are exactly the labels g0, g1, g2 (in order), each once, at full
 * size: then it is usable in place as that layout. */
static bool laid_out(const einsum *e, int i, const tfs_tensor *t, const int *g0, int n0,
                     const int *g1, int n1, const int *g2, int n2)
{
    if (t->rank != n0 + n1 + n2)
        return false;
    for (int a = 0; a < t->rank; a++) {
        int want = a < n0 ? g0[a] : a < n0 + n1 ? g1[a - n0] : g2[a - n0 - n1];
        if (e->lab[i][a] != want || t->dims[a] != e->size[want])
            return false;
    }
    return true;
}

/* The distinct output labels in output order. */
static int out_distinct(const einsum *e, int *order)
{
    int n = 0;
    for (int a = 0; a < e->out_rank; a++) {
        bool dup = false;
        for (int b = 0; b < n; b++)
            dup = dup || order[b] == e->out_lab[a];
        if (!dup)
            order[n++] = e->out_lab[a];
    }
    return n;
}

static bool same_labels(const int *a, int na, const int *b, int nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

/* ---- the kernel ----------------------------------------------------------------------------- */

static enum tfs_code einsum_one(tfs_kernel_ctx *k, const einsum *e, tfs_tensor *out,
                                tfs_status *st)
{
    int order[TFS_MAX_RANK], red[TFS_MAX_RANK], nred = 0;
    int n = out_distinct(e, order);
    for (int l = 0; l < e->nlab; l++)
        if (e->cnt[0][l] && !e->cnt[2][l])
            red[nred++] = l;
    bool direct = n == e->out_rank;
    tfs_tensor *res = NULL;
    int64_t total = labels_nelem(e, order, n);
    enum tfs_code rc = arrange(k->node, e, 0, k->in[0], order, n, red, nred, 1, total,
                               direct ? out : NULL, &res, st);
    if (rc == TFS_OK && !direct)
        rc = scatter_output(e, res, order, n, out, st);
    if (res != out)
        tfs_tensor_unref(res);
    return rc;
}

static enum tfs_code einsum_two(tfs_kernel_ctx *k, const einsum *e, tfs_tensor *out,
                                tfs_status *st)
{
    const tfs_node *nd = k->node;
    int order[TFS_MAX_RANK];
    int n_out = out_distinct(e, order);
    int bl[TFS_MAX_RANK], fr[2][TFS_MAX_RANK], kl[TFS_MAX_RANK], rd[2][TFS_MAX_RANK];
    int nb = 0, nf[2] = {0, 0}, nk = 0, nr[2] = {0, 0};
    for (int a = 0; a < n_out; a++) {
        int l = order[a];
        if (e->cnt[0][l] && e->cnt[1][l])
            bl[nb++] = l;
        else
            fr[e->cnt[0][l] ? 0 : 1][nf[e->cnt[0][l] ? 0 : 1]++] = l;
    }
    for (int a = 0; a < e->rank[0]; a++) {
        int l = e->lab[0][a];
        bool dup = false;
        for (int j = 0; j < nk; j++)
            dup = dup || kl[j] == l;
        if (!e->cnt[2][l] && e->cnt[1][l] && !dup)
            kl[nk++] = l;
    }
    for (int i = 0; i < 2; i++)
        for (int l = 0; l < e->nlab; l++)
            if (e->cnt[i][l] && !e->cnt[1 - i][l] && !e->cnt[2][l])
                rd[i][nr[i]++] = l;
    /* Operand x (the product's left) gives the rows: operand 1 when the output reads
     * [batch, free1, free0]. */
    int cat[2 * TFS_MAX_RANK], ncat = 0;
    memcpy(cat, bl, (size_t)nb * sizeof *bl);
    ncat = nb;
    memcpy(cat + ncat, fr[1], (size_t)nf[1] * sizeof *bl);
    ncat += nf[1];
    memcpy(cat + ncat, fr[0], (size_t)nf[0] * sizeof *bl);
    ncat += nf[0];
    int x = nf[0] && nf[1] && same_labels(cat, ncat, e->out_lab, e->out_rank) ? 1 : 0, y = 1 - x;
    int64_t batch = labels_nelem(e, bl, nb), m = labels_nelem(e, fr[x], nf[x]);
    int64_t n = labels_nelem(e, fr[y], nf[y]), kk = labels_nelem(e, kl, nk);
    if (m > INT_MAX || n > INT_MAX || kk > INT_MAX)
        return tfs__node_err(nd, st, TFS_UNIMPLEMENTED,
                             "einsum matrix dimensions above %d are not supported", INT_MAX);
    /* Each operand in place when it is laid out as a batched matrix already, else arranged. */
    const tfs_tensor *op[2] = {k->in[x], k->in[y]};
    int opi[2] = {x, y};
    const int *free_l[2] = {fr[x], fr[y]};
    int nfree[2] = {nf[x], nf[y]};
    bool trans[2] = {false, false};
    tfs_tensor *tmp[2] = {NULL, NULL}, *res = NULL;
    enum tfs_code rc = TFS_OK;
    for (int s = 0; s < 2 && rc == TFS_OK; s++) {
        int i = opi[s];
        /* Left operand [batch, m, k] (or [batch, k, m]: transposed); right [batch, k, n] (or
         * [batch, n, k]). */
        bool as_is = nr[i] == 0 && laid_out(e, i, op[s], bl, nb, s ? kl : free_l[s],
                                            s ? nk : nfree[s], s ? free_l[s] : kl,
                                            s ? nfree[s] : nk);
        bool as_t = !as_is && nr[i] == 0 &&
                    laid_out(e, i, op[s], bl, nb, s ? free_l[s] : kl, s ? nfree[s] : nk,
                             s ? kl : free_l[s], s ? nk : nfree[s]);
        if (as_t)
            trans[s] = true;
        if (as_is || as_t)
            continue;
        int lay[3 * TFS_MAX_RANK], nl = 0;
        memcpy(lay, bl, (size_t)nb * sizeof *lay);
        nl = nb;
        const int *g1 = s ? kl : free_l[s], *g2 = s ? free_l[s] : kl;
        int n1 = s ? nk : nfree[s], n2 = s ? nfree[s] : nk;
        memcpy(lay + nl, g1, (size_t)n1 * sizeof *lay);
        nl += n1;
        memcpy(lay + nl, g2, (size_t)n2 * sizeof *lay);
        nl += n2;
        rc = arrange(nd, e, i, op[s], lay, nl, rd[i], nr[i], batch,
                     labels_nelem(e, g1, n1) * labels_nelem(e, g2, n2), NULL, &tmp[s], st);
        op[s] = tmp[s];
    }
    /* The product's order [batch, free x, free y]: the output itself when it is that. */
    int prod_l[3 * TFS_MAX_RANK], np = 0;
    memcpy(prod_l, bl, (size_t)nb * sizeof *prod_l);
    np = nb;
    memcpy(prod_l + np, fr[x], (size_t)nf[x] * sizeof *prod_l);
    np += nf[x];
    memcpy(prod_l + np, fr[y], (size_t)nf[y] * sizeof *prod_l);
    np += nf[y];
    bool direct = same_labels(prod_l, np, e->out_lab, e->out_rank);
    if (rc == TFS_OK && !direct) {
        int64_t dims[3] = {batch, m, n};
        rc = tfs__arr_new_like(nd, out->dtype, 3, dims, &res, st);   /* zeroed */
    }
    tfs_tensor *c = direct ? out : res;
    size_t esz = tfs_dtype_size(out->dtype);
    if (rc == TFS_OK && c->nelem > 0) {
        const char *A = op[0]->data, *B = op[1]->data;
        char *C = c->data;
        /* A Const B's packed panels are cached per tensor, so only for a single product. */
        const tfs_tensor *b_const =
            batch == 1 && !tmp[1] && tfs__input_is_const(k, y) ? k->in[y] : NULL;
        for (int64_t b = 0; b < batch; b++)
            tfs__nn_gemm(out->dtype, trans[0], trans[1], m, n, kk,
                         A + (size_t)(b * m * kk) * esz, trans[0] ? m : kk,
                         b_const,
                         B + (size_t)(b * kk * n) * esz, trans[1] ? kk : n,
                         C + (size_t)(b * m * n) * esz);
    }
    if (rc == TFS_OK && !direct)
        rc = scatter_output(e, res, prod_l, np, out, st);
    tfs_tensor_unref(res);
    tfs_tensor_unref(tmp[0]);
    tfs_tensor_unref(tmp[1]);
    return rc;
}

enum tfs_code tfs__k_einsum(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *nd = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = TFS_OK;
    if (k->n_in < 1 || k->n_in > 2)
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT,
                             "Expecting 1 or 2 inputs, got %d", k->n_in);
    if ((rc = tfs__math_check_T(k, 0, k->n_in, &T, st)) != TFS_OK)
        return rc;
    if (T != TFS_DTYPE_FLOAT && T != TFS_DTYPE_DOUBLE && T != TFS_DTYPE_INT32 &&
        T != TFS_DTYPE_INT64)
        return tfs__node_err(nd, st, TFS_UNIMPLEMENTED, "Einsum is not supported for dtype %s",
                             tfs_dtype_short_name(T));
    const char *eq = tfs__attr_str(nd, "equation", NULL);
    if (!eq)
        return tfs__node_err(nd, st, TFS_INVALID_ARGUMENT, "missing attr 'equation'");
    einsum e;
    if ((rc = einsum_parse(nd, eq, (const tfs_tensor *const *)k->in, k->n_in, &e, st)) != TFS_OK)
        return rc;
    int64_t dims[TFS_MAX_RANK];
    for (int a = 0; a < e.out_rank; a++)
        dims[a] = e.size[e.out_lab[a]];
    /* Zeroed: a product over an empty contraction, and a diagonal output, leave zeros. */
    tfs_tensor *out = NULL;
    if ((rc = tfs__arr_output(k, 0, T, e.out_rank, dims, true, &out, st)) != TFS_OK)
        return rc;
    if (out->nelem == 0) {
        k->out[0] = out;
        return TFS_OK;
    }
    rc = e.nin == 1 ? einsum_one(k, &e, out, st) : einsum_two(k, &e, out, st);
    if (rc != TFS_OK) {
        tfs_tensor_unref(out);
        return rc;
    }
    k->out[0] = out;
    return TFS_OK;
}
