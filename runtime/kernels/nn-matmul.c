/* CPU kernels for matrix products: MatMul (transpose_a/transpose_b) and BatchMatMul,
 * BatchMatMulV2, BatchMatMulV3 (adj_x/adj_y; V2 and V3 broadcast the batch dimensions as NumPy
 * does, V1 requires them equal).
 *
 * float and double go to tfs__sgemm/tfs__dgemm (runtime/cpu.c); int32 and int64 use a plain loop
 * that wraps around on overflow as TensorFlow's does (computed in unsigned types). An inner
 * dimension of 0 gives a zero-filled result (the output is allocated zeroed then, and no BLAS call
 * is made for an empty product). OpenBLAS's own thread count is left alone here. A float
 * A x B^T with a few dozen rows and many more columns is computed transposed (see below).
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "runtime/runtime-impl.h"

/* C[m,n] = op(A)[m,k] * op(B)[k,n] with row-major A (lda), B (ldb), C (ldc = n). */
#define INT_GEMM(T, UT)                                                                            \
    do {                                                                                           \
        const T *A_ = A;                                                                           \
        const T *B_ = B;                                                                           \
        T *C_ = C;                                                                                 \
        for (int64_t i = 0; i < m; i++)                                                            \
            for (int64_t j = 0; j < n; j++) {                                                      \
                UT acc = 0;                                                                        \
                for (int64_t p = 0; p < k; p++) {                                                  \
                    UT av = (UT)(ta ? A_[p * lda + i] : A_[i * lda + p]);                          \
                    UT bv = (UT)(tb ? B_[j * ldb + p] : B_[p * ldb + j]);                          \
                    acc += av * bv;                                                                \
                }                                                                                  \
                C_[i * n + j] = (T)acc;                                                            \
            }                                                                                      \
    } while (0)

/* A x B^T with a few dozen rows and many more columns, e.g. a dense layer's input gradient
 * dY [64, 1024] x W^T (W [3136, 1024]): tfs__sgemm would pack all of B transposed for five row
 * slivers; the transposed product C^T = B x A^T reads B row-wise and packs only the small A,
 * faster on that shape even with the transposition of C^T into C (figure in bench/README.md).
 * Same bits: each element is the same chain of products over k in the same order (a * b = b * a,
 * exactly, fused or not). */
#define TRANSPOSED_MIN_M 32
#define TRANSPOSED_MAX_M 128

/* C[m, n] = A[m, k] x B[n, k]^T through C^T; false (nothing done) when no scratch memory. */
static bool sgemm_abt_transposed(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda,
                                 const float *B, int64_t ldb, float *C)
{
    float *T = tfs_malloc((size_t)(m * n) * sizeof *T);
    if (!T)
        return false;
    tfs__sgemm(false, true, n, m, k, 1.0f, B, ldb, A, lda, 0.0f, T, m);
    /* C[i][j] = T[j][i], in 32 x 32 blocks so reads and writes both stay in cache lines. */
    for (int64_t j0 = 0; j0 < n; j0 += 32)
        for (int64_t i0 = 0; i0 < m; i0 += 32) {
            int64_t j1 = n - j0 < 32 ? n : j0 + 32, i1 = m - i0 < 32 ? m : i0 + 32;
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = j0; j < j1; j++)
                    C[i * n + j] = T[j * m + i];
        }
    tfs_free(T);
    return true;
}

/* One product into C (which holds zeros). False for a dtype we have no kernel for. The caller
 * has checked that m, n, k, lda and ldb fit in an int. b_const: the Const tensor B lies in, or
 * NULL (tfs__sgemm_const_b). */
static bool gemm(enum tfs_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const void *A, int64_t lda, const tfs_tensor *b_const, const void *B, int64_t ldb,
                 void *C)
{
    bool blas = m > 0 && n > 0 && k > 0;
    switch (dt) {
    case TFS_DTYPE_FLOAT:
        if (blas && !ta && tb && m >= TRANSPOSED_MIN_M && m <= TRANSPOSED_MAX_M && n >= 4 * m &&
            sgemm_abt_transposed(m, n, k, A, lda, B, ldb, C))
            return true;
        if (blas)
            tfs__sgemm_const_b(ta, tb, m, n, k, 1.0f, A, lda, b_const, B, ldb, 0.0f, C, n);
        return true;
    case TFS_DTYPE_DOUBLE:
        if (blas)
            tfs__dgemm(ta, tb, m, n, k, 1.0, A, lda, B, ldb, 0.0, C, n);
        return true;
    case TFS_DTYPE_INT32:
        INT_GEMM(int32_t, uint32_t);
        return true;
    case TFS_DTYPE_INT64:
        INT_GEMM(int64_t, uint64_t);
        return true;
    default:
        return false;
    }
}

bool tfs__nn_gemm(enum tfs_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  const void *a, int64_t lda, const tfs_tensor *b_const, const void *b,
                  int64_t ldb, void *c)
{
    return gemm(dt, ta, tb, m, n, k, a, lda, b_const, b, ldb, c);
}

static bool gemm_dtype_ok(enum tfs_dtype dt)
{
    return dt == TFS_DTYPE_FLOAT || dt == TFS_DTYPE_DOUBLE || dt == TFS_DTYPE_INT32 ||
           dt == TFS_DTYPE_INT64;
}

static enum tfs_code check_inputs(tfs_kernel_ctx *k, enum tfs_dtype T, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
    for (int i = 0; i < 2; i++)
        if (k->in[i]->dtype != T)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "input %d has dtype %s, but the op's type is %s", i,
                                 tfs_dtype_short_name(k->in[i]->dtype), tfs_dtype_short_name(T));
    if (!gemm_dtype_ok(T))
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    return TFS_OK;
}

static enum tfs_code size_incompatible(const tfs_node *n, const tfs_tensor *a, const tfs_tensor *b,
                                       tfs_status *st)
{
    char sa[128], sb[128];
    return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                         tfs_shape_str(a->rank, a->dims, sa, sizeof sa),
                         tfs_shape_str(b->rank, b->dims, sb, sizeof sb));
}

/* BLAS takes int sizes; matrices beyond that are refused rather than truncated. */
static enum tfs_code check_blas_sizes(const tfs_node *n, const tfs_tensor *a, const tfs_tensor *b,
                                      tfs_status *st)
{
    for (int i = 0; i < 2; i++) {
        const tfs_tensor *t = i ? b : a;
        if (t->dims[t->rank - 1] > INT_MAX || t->dims[t->rank - 2] > INT_MAX)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "input %d: matrix dimensions above %d are not supported", i,
                                 INT_MAX);
    }
    return TFS_OK;
}

enum tfs_code tfs__nn_matmul_dims(const tfs_node *n, const tfs_tensor *a, const tfs_tensor *b,
                                  tfs_nn_matmul *mm, tfs_status *st)
{
    enum tfs_code rc = tfs__nn_attr_bool(n, "transpose_a", false, &mm->ta, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "transpose_b", false, &mm->tb, st);
    if (rc != TFS_OK)
        return rc;
    if (a->rank != 2 || b->rank != 2) {
        char sa[128], sb[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "In[0] and In[1] must be matrices, got %s and %s",
                             tfs_shape_str(a->rank, a->dims, sa, sizeof sa),
                             tfs_shape_str(b->rank, b->dims, sb, sizeof sb));
    }
    mm->m = a->dims[mm->ta ? 1 : 0];
    mm->k = a->dims[mm->ta ? 0 : 1];
    mm->n = b->dims[mm->tb ? 0 : 1];
    if (b->dims[mm->tb ? 1 : 0] != mm->k)
        return size_incompatible(n, a, b, st);
    return check_blas_sizes(n, a, b, st);
}

enum tfs_code tfs__k_mat_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    tfs_nn_matmul mm;
    enum tfs_code rc = tfs__attr_type(n, "T", &T, st);
    if (rc == TFS_OK)
        rc = check_inputs(k, T, st);
    if (rc == TFS_OK)
        rc = tfs__nn_matmul_dims(n, k->in[0], k->in[1], &mm, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *a = k->in[0], *b = k->in[1];
    tfs_tensor *out = NULL;
    int64_t dims[2] = {mm.m, mm.n};
    /* An empty inner dimension makes no gemm call: the zeros must come from the allocation. */
    if ((rc = (mm.k == 0 ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, T, 2, dims, &out,
                                                                          st)) != TFS_OK)
        return rc;
    gemm(T, mm.ta, mm.tb, mm.m, mm.n, mm.k, a->data, a->dims[1],
         tfs__input_is_const(k, 1) ? b : NULL, b->data, b->dims[1], out->data);
    k->out[0] = out;
    return TFS_OK;
}

/* ---- BatchMatMul, V2, V3 -------------------------------------------------------------------- */

/* The op's element type: T, or for V3 Ta = Tb = Tout (mixed types are not supported). */
static enum tfs_code batch_type(const tfs_node *n, enum tfs_dtype *T, tfs_status *st)
{
    if (!tfs__attr(n, "Ta"))
        return tfs__attr_type(n, "T", T, st);
    enum tfs_dtype ta, tb, tout;
    enum tfs_code rc = tfs__attr_type(n, "Ta", &ta, st);
    if (rc == TFS_OK)
        rc = tfs__attr_type(n, "Tb", &tb, st);
    if (rc == TFS_OK)
        rc = tfs__attr_type(n, "Tout", &tout, st);
    if (rc != TFS_OK)
        return rc;
    if (ta != tb || ta != tout)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "mixed types Ta=%s, Tb=%s, Tout=%s are not supported",
                             tfs_dtype_short_name(ta), tfs_dtype_short_name(tb),
                             tfs_dtype_short_name(tout));
    *T = ta;
    return TFS_OK;
}

enum tfs_code tfs__k_batch_mat_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    bool adj_x, adj_y;
    enum tfs_code rc = batch_type(n, &T, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "adj_x", false, &adj_x, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "adj_y", false, &adj_y, st);
    if (rc == TFS_OK)
        rc = check_inputs(k, T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0], *y = k->in[1];
    char sx[128], sy[128];
    if (x->rank < 2 || y->rank < 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "inputs must be at least rank 2, got %s and %s",
                             tfs_shape_str(x->rank, x->dims, sx, sizeof sx),
                             tfs_shape_str(y->rank, y->dims, sy, sizeof sy));
    bool broadcast = strcmp(n->op_type, "BatchMatMul") != 0;
    if (!broadcast && !tfs_shape_equal(x->rank - 2, x->dims, y->rank - 2, y->dims))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "batch dimensions must be equal: %s vs. %s",
                             tfs_shape_str(x->rank, x->dims, sx, sizeof sx),
                             tfs_shape_str(y->rank, y->dims, sy, sizeof sy));
    /* Output batch shape by broadcasting, with per-axis strides (in matrices) of x and y. */
    int xb = x->rank - 2, yb = y->rank - 2, ob = xb > yb ? xb : yb;
    int64_t odims[TFS_MAX_RANK], xs[TFS_MAX_RANK], ys[TFS_MAX_RANK];
    int64_t stride_x = 1, stride_y = 1;
    for (int d = ob - 1; d >= 0; d--) {
        int ix = d - (ob - xb), iy = d - (ob - yb);
        int64_t dx = ix >= 0 ? x->dims[ix] : 1, dy = iy >= 0 ? y->dims[iy] : 1;
        if (dx != dy && dx != 1 && dy != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "In[0] and In[1] must have compatible batch dimensions: %s vs. %s",
                                 tfs_shape_str(x->rank, x->dims, sx, sizeof sx),
                                 tfs_shape_str(y->rank, y->dims, sy, sizeof sy));
        odims[d] = dx == 1 ? dy : dx;
        xs[d] = dx == 1 ? 0 : stride_x;
        ys[d] = dy == 1 ? 0 : stride_y;
        stride_x *= dx;
        stride_y *= dy;
    }
    int64_t xr = x->dims[xb], xc = x->dims[xb + 1], yr = y->dims[yb], yc = y->dims[yb + 1];
    int64_t m = adj_x ? xc : xr, kx = adj_x ? xr : xc, ky = adj_y ? yc : yr, nn = adj_y ? yr : yc;
    if (kx != ky)
        return size_incompatible(n, x, y, st);
    if ((rc = check_blas_sizes(n, x, y, st)) != TFS_OK)
        return rc;
    odims[ob] = m;
    odims[ob + 1] = nn;
    tfs_tensor *out = NULL;
    if ((rc = (kx == 0 ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, T, ob + 2, odims,
                                                                        &out, st)) != TFS_OK)
        return rc;
    size_t esz = tfs_dtype_size(T);
    int64_t nbatch = 1;
    for (int d = 0; d < ob; d++)
        nbatch *= odims[d];
    if (out->nelem == 0 || kx == 0)
        nbatch = 0;   /* nothing to compute: empty, or all zeros (allocated zeroed) */
    const char *X = x->data, *Y = y->data;
    char *O = out->data;
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t rest = bi, offx = 0, offy = 0;
        for (int d = ob - 1; d >= 0; d--) {
            int64_t c = rest % odims[d];
            rest /= odims[d];
            offx += c * xs[d];
            offy += c * ys[d];
        }
        gemm(T, adj_x, adj_y, m, nn, kx, X + (size_t)(offx * xr * xc) * esz, xc, NULL,
             Y + (size_t)(offy * yr * yc) * esz, yc, O + (size_t)(bi * m * nn) * esz);
    }
    k->out[0] = out;
    return TFS_OK;
}
