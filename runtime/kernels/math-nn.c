/* CPU kernels of the math family that are not one-to-one elementwise: Select (TensorFlow 1
 * rules), SelectV2 (broadcasting), ClipByValue, Softmax and LogSoftmax over the last axis,
 * BiasAdd/BiasAddV1 and AddN.
 *
 * Select: `then` and `else` have one shape; the condition is a scalar (the whole of one input is
 * the answer, passed through without a copy), the same shape, or a vector choosing rows along axis
 * 0. SelectV2 broadcasts all three. Softmax subtracts the row's maximum before exponentiating, so
 * large logits do not overflow, and sums in double.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/kernels/math-impl.h"

/* ---- Select, SelectV2 ----------------------------------------------------------------------- */

#define SELECT_LOOP(ET)                                                                            \
    do {                                                                                           \
        const bool *C = c->data;                                                                   \
        const ET *X = x->data;                                                                     \
        const ET *Y = y->data;                                                                     \
        ET *O = out->data;                                                                         \
        if (same) {                                                                                \
            for (int64_t i = 0; i < out->nelem; i++)                                               \
                O[i] = C[i] ? X[i] : Y[i];                                                         \
        } else {                                                                                   \
            TFS_BCAST_WALK(bc, out->nelem, O[o] = C[pa] ? X[pb] : Y[pc]);                          \
        }                                                                                          \
    } while (0)

/* out[i] = c[i] ? x[i] : y[i] over the broadcast space bc (c's shape as bcast saw it). */
static enum tfs_code select_elements(const tfs_bcast *bc, bool same, const tfs_tensor *c,
                                     const tfs_tensor *x, const tfs_tensor *y, tfs_tensor *out,
                                     tfs_status *st)
{
    if (out->dtype == TFS_DTYPE_STRING) {
        const tfs_string *X = x->data, *Y = y->data;
        const bool *C = c->data;
        enum tfs_code rc = TFS_OK;
        TFS_BCAST_WALK(bc, out->nelem, {
            const tfs_string *s = C[pa] ? &X[pb] : &Y[pc];
            if (rc == TFS_OK)
                rc = tfs_tensor_set_string(out, o, s->data, s->len, st);
        });
        return rc;
    }
    switch (tfs_dtype_size(out->dtype)) {
    case 1: SELECT_LOOP(uint8_t); break;
    case 2: SELECT_LOOP(uint16_t); break;
    case 4: SELECT_LOOP(uint32_t); break;
    case 8: SELECT_LOOP(uint64_t); break;
    default:
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "selecting elements of dtype %s is not supported",
                       tfs_dtype_short_name(out->dtype));
    }
    return TFS_OK;
}

static enum tfs_code select_common(tfs_kernel_ctx *k, bool v2, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 1, 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *c = k->in[0], *x = k->in[1], *y = k->in[2];
    if (c->dtype != TFS_DTYPE_BOOL)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "condition has dtype %s, not bool",
                             tfs_dtype_short_name(c->dtype));
    char s1[128], s2[128];
    tfs_tensor cview;   /* c's shape as broadcasting should see it (Select's row vector case) */
    memset(&cview, 0, sizeof cview);
    cview.rank = c->rank;
    memcpy(cview.dims, c->dims, sizeof c->dims);
    if (!v2) {
        if (!tfs_shape_equal(x->rank, x->dims, y->rank, y->dims))
            return tfs__node_err(
                n, st, TFS_INVALID_ARGUMENT,
                "'then' and 'else' must have the same size. but received: %s vs. %s",
                tfs_shape_str(x->rank, x->dims, s1, sizeof s1),
                tfs_shape_str(y->rank, y->dims, s2, sizeof s2));
        if (c->rank == 0) {   /* the whole of one input */
            k->out[0] = tfs_tensor_ref(k->in[*(const bool *)c->data ? 1 : 2]);
            return TFS_OK;
        }
        if (!tfs_shape_equal(c->rank, c->dims, x->rank, x->dims)) {
            if (c->rank != 1 || x->rank < 1 || c->dims[0] != x->dims[0])
                return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                     "condition %s must be a scalar, the shape of 'then' %s or a "
                                     "vector of its first dimension",
                                     tfs_shape_str(c->rank, c->dims, s1, sizeof s1),
                                     tfs_shape_str(x->rank, x->dims, s2, sizeof s2));
            cview.rank = x->rank;   /* [n] -> [n,1,...,1] */
            for (int d = 1; d < x->rank; d++)
                cview.dims[d] = 1;
        }
    }
    tfs_bcast bc;
    if ((rc = tfs__bcast_init(&cview, x, y, &bc, st)) != TFS_OK)
        return rc;
    bool same = tfs_shape_equal(c->rank, c->dims, x->rank, x->dims) &&
                tfs_shape_equal(x->rank, x->dims, y->rank, y->dims);
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, bc.out_rank, bc.out_dims, &out, st)) != TFS_OK)
        return rc;
    if ((rc = select_elements(&bc, same, c, x, y, out, st)) != TFS_OK) {
        tfs_tensor_unref(out);
        return rc;   /* the session puts the node's name in front */
    }
    k->out[0] = out;
    return TFS_OK;
}

enum tfs_code tfs__k_select(tfs_kernel_ctx *k, tfs_status *st)
{
    return select_common(k, false, st);
}

enum tfs_code tfs__k_select_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    return select_common(k, true, st);
}

/* ---- ClipByValue ---------------------------------------------------------------------------- */

#define CLIP_LOOP(T)                                                                               \
    do {                                                                                           \
        const T *X = x->data;                                                                      \
        const T *L = lo->data;                                                                     \
        const T *H = hi->data;                                                                     \
        T *O = out->data;                                                                          \
        TFS_BCAST_WALK(&bc, out->nelem, {                                                          \
            T v = X[pa];                                                                           \
            v = v < L[pb] ? L[pb] : v;                                                             \
            O[o] = v > H[pc] ? H[pc] : v;                                                          \
        });                                                                                        \
    } while (0)

/* min(max(t, lo), hi); lo and hi are scalars or have t's shape (TensorFlow's rule). */
enum tfs_code tfs__k_clip_by_value(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 0, 3, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *x = k->in[0], *lo = k->in[1], *hi = k->in[2];
    char s1[128], s2[128];
    for (int i = 1; i < 3; i++) {
        const tfs_tensor *b = k->in[i];
        if (b->rank != 0 && !tfs_shape_equal(b->rank, b->dims, x->rank, x->dims))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "clip_value_%s must be a scalar or have the shape of t: %s vs. %s",
                                 i == 1 ? "min" : "max",
                                 tfs_shape_str(b->rank, b->dims, s1, sizeof s1),
                                 tfs_shape_str(x->rank, x->dims, s2, sizeof s2));
    }
    tfs_bcast bc;
    if ((rc = tfs__bcast_init(x, lo, hi, &bc, st)) != TFS_OK)
        return rc;
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, x->rank, x->dims, &out, st)) != TFS_OK)
        return rc;
    switch (T) {
    case TFS_DTYPE_FLOAT:  CLIP_LOOP(float); break;
    case TFS_DTYPE_DOUBLE: CLIP_LOOP(double); break;
    case TFS_DTYPE_INT32:  CLIP_LOOP(int32_t); break;
    case TFS_DTYPE_INT64:  CLIP_LOOP(int64_t); break;
    case TFS_DTYPE_UINT8:  CLIP_LOOP(uint8_t); break;
    default:
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "ClipByValue is not supported for dtype %s",
                             tfs_dtype_short_name(T));
    }
    k->out[0] = out;
    return TFS_OK;
}

/* ---- Softmax, LogSoftmax -------------------------------------------------------------------- */

/* Three passes per row so the exponentials run in a loop the compiler vectorizes: y = e^(x - max),
 * then the sum (in double), then the scaling (Softmax) or x - max - log(sum) (LogSoftmax). Rows
 * [r0, r1). */
#define SOFTMAX_ROWS(T, EXP)                                                                       \
    do {                                                                                           \
        const T *X = in->data;                                                                     \
        T *O = out->data;                                                                          \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const T *x = X + r * cols;                                                             \
            T *y = O + r * cols;                                                                   \
            T m = x[0];                                                                            \
            for (int64_t j = 1; j < cols; j++)                                                     \
                m = x[j] > m || x[j] != x[j] ? x[j] : m;                                           \
            for (int64_t j = 0; j < cols; j++)                                                     \
                y[j] = EXP(x[j] - m);                                                              \
            double sum = 0;                                                                        \
            for (int64_t j = 0; j < cols; j++)                                                     \
                sum += y[j];                                                                       \
            if (log_) {                                                                            \
                T ls = (T)log(sum);                                                                \
                for (int64_t j = 0; j < cols; j++)                                                 \
                    y[j] = (x[j] - m) - ls;                                                        \
            } else {                                                                               \
                T inv = (T)(1.0 / sum);                                                            \
                for (int64_t j = 0; j < cols; j++)                                                 \
                    y[j] *= inv;                                                                   \
            }                                                                                      \
        }                                                                                          \
    } while (0)

typedef struct softmax_job {
    const tfs_tensor *in;
    tfs_tensor       *out;
    int64_t           cols;
    bool              log_;
} softmax_job;

static void softmax_rows(void *arg, int64_t r0, int64_t r1)
{
    const softmax_job *job = arg;
    const tfs_tensor *in = job->in;
    tfs_tensor *out = job->out;
    int64_t cols = job->cols;
    bool log_ = job->log_;
    if (out->dtype == TFS_DTYPE_FLOAT)
        SOFTMAX_ROWS(float, tfs__expf);
    else
        SOFTMAX_ROWS(double, exp);
}

static enum tfs_code softmax_common(tfs_kernel_ctx *k, bool log_, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 0, 1, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0];
    if (in->rank < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "logits must have >= 1 dimension, got []");
    if (T != TFS_DTYPE_FLOAT && T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, in->rank, in->dims, &out, st)) != TFS_OK)
        return rc;
    int64_t cols = in->dims[in->rank - 1];
    int64_t rows = cols ? in->nelem / cols : 0;
    softmax_job j = {in, out, cols, log_};
    tfs__parallel_for(rows, tfs__math_grain(cols * 4), softmax_rows, &j);   /* 4 passes */
    k->out[0] = out;
    return TFS_OK;
}

enum tfs_code tfs__k_softmax(tfs_kernel_ctx *k, tfs_status *st)
{
    return softmax_common(k, false, st);
}

enum tfs_code tfs__k_log_softmax(tfs_kernel_ctx *k, tfs_status *st)
{
    return softmax_common(k, true, st);
}

/* ---- BiasAdd -------------------------------------------------------------------------------- */

/* value viewed as [outer, C, inner]: NHWC has inner = 1 (rows of C), NCHW has C at axis 1.
 * Rows [o0, o1) of outer. */
#define BIAS_LOOP(T, UT)                                                                           \
    do {                                                                                           \
        const T *X = v->data;                                                                      \
        const T *B = b->data;                                                                      \
        T *O = out->data;                                                                          \
        if (inner == 1) {                                                                          \
            for (int64_t o = o0; o < o1; o++)                                                      \
                for (int64_t c = 0; c < C; c++)                                                    \
                    O[o * C + c] = (T)((UT)X[o * C + c] + (UT)B[c]);                               \
            break;                                                                                 \
        }                                                                                          \
        for (int64_t o = o0; o < o1; o++)                                                          \
            for (int64_t c = 0; c < C; c++) {                                                      \
                const T *x = X + (o * C + c) * inner;                                              \
                T *y = O + (o * C + c) * inner;                                                    \
                for (int64_t i = 0; i < inner; i++)                                                \
                    y[i] = (T)((UT)x[i] + (UT)B[c]);                                               \
            }                                                                                      \
    } while (0)

typedef struct bias_job {
    const tfs_tensor *v, *b;
    tfs_tensor       *out;
    int64_t           C, inner;
} bias_job;

static void bias_rows(void *arg, int64_t o0, int64_t o1)
{
    const bias_job *j = arg;
    const tfs_tensor *v = j->v, *b = j->b;
    tfs_tensor *out = j->out;
    int64_t C = j->C, inner = j->inner;
    switch (out->dtype) {
    case TFS_DTYPE_FLOAT:  BIAS_LOOP(float, float); break;
    case TFS_DTYPE_DOUBLE: BIAS_LOOP(double, double); break;
    case TFS_DTYPE_INT32:  BIAS_LOOP(int32_t, uint32_t); break;
    case TFS_DTYPE_INT64:  BIAS_LOOP(int64_t, uint64_t); break;
    default:               break;
    }
}

static enum tfs_code bias_add_common(tfs_kernel_ctx *k, bool v1, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 0, 2, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *v = k->in[0], *b = k->in[1];
    const char *fmt = v1 ? "NHWC" : tfs__attr_str(n, "data_format", "NHWC");
    bool nchw = !strcmp(fmt, "NCHW");
    if (!nchw && strcmp(fmt, "NHWC") != 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "unknown data_format '%s'", fmt);
    char s1[128], s2[128];
    if (v->rank < 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Input tensor must be at least 2D: %s",
                             tfs_shape_str(v->rank, v->dims, s1, sizeof s1));
    int cax = nchw ? 1 : v->rank - 1;
    if (b->rank != 1 || b->dims[0] != v->dims[cax])
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Must provide as many biases as the channel dimension of the input "
                             "tensor: %s vs. %s",
                             tfs_shape_str(b->rank, b->dims, s1, sizeof s1),
                             tfs_shape_str(v->rank, v->dims, s2, sizeof s2));
    int64_t outer = 1, C = v->dims[cax], inner = 1;
    for (int d = 0; d < cax; d++)
        outer *= v->dims[d];
    for (int d = cax + 1; d < v->rank; d++)
        inner *= v->dims[d];
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, v->rank, v->dims, &out, st)) != TFS_OK)
        return rc;
    if (T != TFS_DTYPE_FLOAT && T != TFS_DTYPE_DOUBLE && T != TFS_DTYPE_INT32 &&
        T != TFS_DTYPE_INT64) {
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    }
    bias_job j = {v, b, out, C, inner};
    tfs__parallel_for(outer, tfs__math_grain(C * inner), bias_rows, &j);
    k->out[0] = out;
    return TFS_OK;
}

enum tfs_code tfs__k_bias_add(tfs_kernel_ctx *k, tfs_status *st)
{
    return bias_add_common(k, false, st);
}

enum tfs_code tfs__k_bias_add_v1(tfs_kernel_ctx *k, tfs_status *st)
{
    return bias_add_common(k, true, st);
}

/* ---- AddN ----------------------------------------------------------------------------------- */

#define ADDN_LOOP(T, UT)                                                                           \
    do {                                                                                           \
        T *O = out->data;                                                                          \
        const T *X0 = k->in[0]->data;                                                              \
        for (int64_t j = 0; j < out->nelem; j++)                                                   \
            O[j] = X0[j];                                                                          \
        for (int i = 1; i < k->n_in; i++) {                                                        \
            const T *X = k->in[i]->data;                                                           \
            for (int64_t j = 0; j < out->nelem; j++)                                               \
                O[j] = (T)((UT)O[j] + (UT)X[j]);                                                   \
        }                                                                                          \
    } while (0)

enum tfs_code tfs__k_add_n(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    if (k->n_in < 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects at least 1 input");
    enum tfs_code rc = tfs__math_check_T(k, 0, k->n_in, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *a = k->in[0];
    for (int i = 1; i < k->n_in; i++)
        if (!tfs_shape_equal(a->rank, a->dims, k->in[i]->rank, k->in[i]->dims)) {
            char s1[128], s2[128];
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Inputs to operation AddN must have the same size and shape. "
                                 "Input 0: %s != input %d: %s",
                                 tfs_shape_str(a->rank, a->dims, s1, sizeof s1), i,
                                 tfs_shape_str(k->in[i]->rank, k->in[i]->dims, s2, sizeof s2));
        }
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, a->rank, a->dims, &out, st)) != TFS_OK)
        return rc;
    switch (T) {
    case TFS_DTYPE_FLOAT:  ADDN_LOOP(float, float); break;
    case TFS_DTYPE_DOUBLE: ADDN_LOOP(double, double); break;
    case TFS_DTYPE_INT32:  ADDN_LOOP(int32_t, uint32_t); break;
    case TFS_DTYPE_INT64:  ADDN_LOOP(int64_t, uint64_t); break;
    default:
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "AddN is not supported for dtype %s",
                             tfs_dtype_short_name(T));
    }
    k->out[0] = out;
    return TFS_OK;
}
