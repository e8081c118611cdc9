/* CPU kernels of the math family's reductions: Sum, Mean, Max, Min, Prod, All, Any (attr keep_dims,
 * axes as an int32/int64 scalar or vector, negative axes counted from the end, an empty axis list
 * reducing nothing), ArgMax/ArgMin (attr output_type) and Cumsum/Cumprod (attrs exclusive and
 * reverse).
 *
 * A reduction reads its input once in memory order: the axes are merged into runs of reduced and
 * kept axes, and every element is folded into the output slot the kept axes name (output stride 0
 * along reduced axes). Reducing the last axes folds a contiguous row into one slot; reducing the
 * first folds rows into a contiguous output, both loops with constant strides. Float Sum/Mean/Prod
 * accumulate in double. Reducing an empty axis gives the identity (0, 1, -inf/+inf or the integer
 * extremes, true/false); Mean of nothing is NaN (0/0) for floats and 0 for integers. Max and Min
 * propagate NaN.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/alloc.h"
#include "runtime/kernels/math-impl.h"

enum rop { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_ALL, R_ANY };

/* Reads an axis tensor (int32/int64, scalar or vector) into axes[]; checks each against rank and
 * makes it non-negative. */
static enum tfs_code read_axes(const tfs_node *n, const tfs_tensor *t, int rank, int64_t *axes,
                               int *n_axes, tfs_status *st)
{
    if (t->dtype != TFS_DTYPE_INT32 && t->dtype != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "axis has dtype %s, not int32 or int64",
                             tfs_dtype_short_name(t->dtype));
    if (t->rank > 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "axis must be a scalar or a vector");
    if (t->nelem > 64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%lld axes for an input of rank %d",
                             (long long)t->nelem, rank);
    for (int64_t i = 0; i < t->nelem; i++) {
        int64_t a = t->dtype == TFS_DTYPE_INT32 ? ((const int32_t *)t->data)[i]
                                                : ((const int64_t *)t->data)[i];
        if (a < -rank || a >= rank)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Invalid reduction dimension (%lld for input with %d dimension(s)",
                                 (long long)a, rank);
        axes[i] = a < 0 ? a + rank : a;
    }
    *n_axes = (int)t->nelem;
    return TFS_OK;
}

/* The input's axes merged into runs: dims, whether each is reduced, and the output stride of each
 * (0 for a reduced one). */
typedef struct rplan {
    int     m;
    int64_t dims[TFS_MAX_RANK];
    int64_t ostr[TFS_MAX_RANK];
} rplan;

static void plan_init(const tfs_tensor *in, const bool *red, rplan *p)
{
    bool mred[TFS_MAX_RANK];
    int m = 0;
    for (int d = 0; d < in->rank; d++) {
        if (in->dims[d] == 1)
            continue;
        if (m > 0 && mred[m - 1] == red[d]) {
            p->dims[m - 1] *= in->dims[d];
        } else {
            p->dims[m] = in->dims[d];
            mred[m++] = red[d];
        }
    }
    if (m == 0) {
        p->dims[0] = 1;
        mred[0] = false;
        m = 1;
    }
    int64_t s = 1;
    for (int d = m - 1; d >= 0; d--) {
        p->ostr[d] = mred[d] ? 0 : s;
        if (!mred[d])
            s *= p->dims[d];
    }
    p->m = m;
}

/* Folds every element x of X with index [lo, hi) along the plan's first axis into ACC[off] with
 * FOLD(acc, x). */
#define REDUCE_WALK(TA, TX, FOLD)                                                                  \
    do {                                                                                           \
        const TX *X = in->data;                                                                    \
        TA *ACC = acc;                                                                             \
        int m = p->m;                                                                              \
        int64_t inner = p->dims[m - 1], ostr = p->ostr[m - 1], idx[TFS_MAX_RANK] = {0};            \
        int64_t span0 = 1; /* input elements per index of the first axis */                        \
        for (int d = 1; d < m; d++)                                                                \
            span0 *= p->dims[d];                                                                   \
        int64_t off = lo * p->ostr[0];                                                             \
        idx[0] = lo;                                                                               \
        for (int64_t i = lo * span0; i < hi * span0; i += inner) {                                 \
            if (ostr == 0) {                                                                       \
                /* four independent chains, so the fold is not one long dependency */             \
                TA a = ACC[off];                                                                   \
                int64_t j = 0;                                                                     \
                if (inner >= 8) {                                                                  \
                    TA a1 = (TA)X[i + 1], a2 = (TA)X[i + 2], a3 = (TA)X[i + 3];                    \
                    FOLD(a, X[i]);                                                                 \
                    for (j = 4; j + 4 <= inner; j += 4) {                                          \
                        FOLD(a, X[i + j]);                                                         \
                        FOLD(a1, X[i + j + 1]);                                                    \
                        FOLD(a2, X[i + j + 2]);                                                    \
                        FOLD(a3, X[i + j + 3]);                                                    \
                    }                                                                              \
                    FOLD(a, a1);                                                                   \
                    FOLD(a2, a3);                                                                  \
                    FOLD(a, a2);                                                                   \
                }                                                                                  \
                for (; j < inner; j++)                                                             \
                    FOLD(a, X[i + j]);                                                             \
                ACC[off] = a;                                                                      \
            } else {                                                                               \
                for (int64_t j = 0; j < inner; j++)                                                \
                    FOLD(ACC[off + j], X[i + j]);                                                  \
            }                                                                                      \
            for (int d = m - 2; d >= 0; d--) {                                                     \
                off += p->ostr[d];                                                                 \
                if (++idx[d] < p->dims[d])                                                         \
                    break;                                                                         \
                off -= p->ostr[d] * p->dims[d];                                                    \
                idx[d] = 0;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define F_SUM(a, x)  ((a) += (x))
#define F_PROD(a, x) ((a) *= (x))
#define F_MAX(a, x)  ((a) = ((x) > (a) || (x) != (x)) ? (x) : (a))
#define F_MIN(a, x)  ((a) = ((x) < (a) || (x) != (x)) ? (x) : (a))
#define F_AND(a, x)  ((a) = (a) && (x))
#define F_OR(a, x)   ((a) = (a) || (x))
/* Integer sums and products wrap in the unsigned type. */
#define F_USUM(a, x)  ((a) += (x))
#define F_UPROD(a, x) ((a) *= (x))

/* One range of the first axis of a reduction, for tfs__parallel_for: the fold reduce_compute
 * chose for (op, dtype), into acc. */
typedef struct reduce_job {
    enum rop          op;
    const rplan      *p;
    const tfs_tensor *in;
    void             *acc;
} reduce_job;

static void reduce_range(void *arg, int64_t lo, int64_t hi)
{
    const reduce_job *job = arg;
    const rplan *p = job->p;
    const tfs_tensor *in = job->in;
    void *acc = job->acc;
    enum rop op = job->op;
    bool sum = op == R_SUM || op == R_MEAN;
    switch (in->dtype) {
    case TFS_DTYPE_FLOAT:
        if (sum)
            REDUCE_WALK(double, float, F_SUM);
        else if (op == R_PROD)
            REDUCE_WALK(double, float, F_PROD);
        else if (op == R_MAX)
            REDUCE_WALK(float, float, F_MAX);
        else
            REDUCE_WALK(float, float, F_MIN);
        break;
    case TFS_DTYPE_DOUBLE:
        if (sum)
            REDUCE_WALK(double, double, F_SUM);
        else if (op == R_PROD)
            REDUCE_WALK(double, double, F_PROD);
        else if (op == R_MAX)
            REDUCE_WALK(double, double, F_MAX);
        else
            REDUCE_WALK(double, double, F_MIN);
        break;
    case TFS_DTYPE_INT32:
        if (sum)
            REDUCE_WALK(uint32_t, int32_t, F_USUM);
        else if (op == R_PROD)
            REDUCE_WALK(uint32_t, int32_t, F_UPROD);
        else if (op == R_MAX)
            REDUCE_WALK(int32_t, int32_t, F_MAX);
        else
            REDUCE_WALK(int32_t, int32_t, F_MIN);
        break;
    case TFS_DTYPE_INT64:
        if (sum)
            REDUCE_WALK(uint64_t, int64_t, F_USUM);
        else if (op == R_PROD)
            REDUCE_WALK(uint64_t, int64_t, F_UPROD);
        else if (op == R_MAX)
            REDUCE_WALK(int64_t, int64_t, F_MAX);
        else
            REDUCE_WALK(int64_t, int64_t, F_MIN);
        break;
    case TFS_DTYPE_BOOL:
        if (op == R_ALL)
            REDUCE_WALK(bool, bool, F_AND);
        else
            REDUCE_WALK(bool, bool, F_OR);
        break;
    default:
        break;
    }
}

/* Folds the whole input into acc. When the plan's first axis is kept, its indices name disjoint
 * output slots, so ranges of it run on the pool; each slot is folded in the same order either
 * way. */
static void reduce_walk(enum rop op, const rplan *p, const tfs_tensor *in, void *acc)
{
    reduce_job job = {op, p, in, acc};
    if (p->m >= 2 && p->ostr[0] != 0 && p->dims[0] > 0)
        tfs__parallel_for(p->dims[0], tfs__math_grain(in->nelem / p->dims[0]), reduce_range,
                          &job);
    else
        reduce_range(&job, 0, p->dims[0]);
}

/* Float Sum/Mean/Prod: accumulate in a double buffer, then store. */
#define FLOAT_SUM_PROD(T)                                                                          \
    do {                                                                                           \
        double *acc = tfs_malloc((size_t)(out->nelem ? out->nelem : 1) * sizeof(double));          \
        if (!acc)                                                                                  \
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");                           \
        for (int64_t i = 0; i < out->nelem; i++)                                                   \
            acc[i] = op == R_PROD ? 1 : 0;                                                         \
        reduce_walk(op, p, in, acc);                                                               \
        T *O = out->data;                                                                          \
        for (int64_t i = 0; i < out->nelem; i++)                                                   \
            O[i] = (T)(op == R_MEAN ? acc[i] / (double)count : acc[i]);                            \
        tfs_free(acc);                                                                             \
        return TFS_OK;                                                                             \
    } while (0)

#define FILL(T, V)                                                                                 \
    for (int64_t i = 0; i < out->nelem; i++)                                                       \
        ((T *)out->data)[i] = (V)

#define FLOAT_REDUCE(T)                                                                            \
    do {                                                                                           \
        if (op == R_SUM || op == R_MEAN || op == R_PROD)                                           \
            FLOAT_SUM_PROD(T);                                                                     \
        T *acc = out->data;                                                                        \
        if (op == R_MAX) {                                                                         \
            FILL(T, -(T)INFINITY);                                                                 \
            reduce_walk(op, p, in, acc);                                                           \
        } else if (op == R_MIN) {                                                                  \
            FILL(T, (T)INFINITY);                                                                  \
            reduce_walk(op, p, in, acc);                                                           \
        } else {                                                                                   \
            return TFS_UNIMPLEMENTED;                                                              \
        }                                                                                          \
        return TFS_OK;                                                                             \
    } while (0)

#define INT_REDUCE(T, UT, LO, HI)                                                                  \
    do {                                                                                           \
        if (op == R_MAX || op == R_MIN) {                                                          \
            T *acc = out->data;                                                                    \
            if (op == R_MAX)                                                                       \
                FILL(T, LO);                                                                       \
            else                                                                                   \
                FILL(T, HI);                                                                       \
            reduce_walk(op, p, in, acc);                                                           \
            return TFS_OK;                                                                         \
        }                                                                                          \
        if (op != R_SUM && op != R_MEAN && op != R_PROD)                                           \
            return TFS_UNIMPLEMENTED;                                                              \
        UT *acc = out->data; /* same size and representation as T */                               \
        FILL(UT, op == R_PROD ? 1 : 0);                                                            \
        reduce_walk(op, p, in, acc);                                                               \
        if (op == R_MEAN) {                                                                        \
            T *O = out->data;                                                                      \
            for (int64_t i = 0; i < out->nelem; i++)                                               \
                O[i] = count ? (T)((int64_t)O[i] / count) : 0;                                     \
        }                                                                                          \
        return TFS_OK;                                                                             \
    } while (0)

/* TFS_UNIMPLEMENTED (without touching st) when op does not take the dtype. */
static enum tfs_code reduce_compute(enum rop op, const rplan *p, int64_t count,
                                    const tfs_tensor *in, tfs_tensor *out, tfs_status *st)
{
    switch (in->dtype) {
    case TFS_DTYPE_FLOAT:  FLOAT_REDUCE(float);
    case TFS_DTYPE_DOUBLE: FLOAT_REDUCE(double);
    case TFS_DTYPE_INT32:  INT_REDUCE(int32_t, uint32_t, INT32_MIN, INT32_MAX);
    case TFS_DTYPE_INT64:  INT_REDUCE(int64_t, uint64_t, INT64_MIN, INT64_MAX);
    case TFS_DTYPE_BOOL: {
        bool *acc = out->data;
        if (op == R_ALL)
            FILL(bool, true);
        else if (op == R_ANY)
            FILL(bool, false);
        else
            return TFS_UNIMPLEMENTED;
        reduce_walk(op, p, in, acc);
        return TFS_OK;
    }
    default:
        return TFS_UNIMPLEMENTED;
    }
}

enum tfs_code tfs__reduce_shape(const tfs_node *n, const tfs_tensor *in, const tfs_tensor *axes_t,
                                bool red[TFS_MAX_RANK], int *orank, int64_t *odims,
                                int64_t *count, tfs_status *st)
{
    bool keep = false;
    const tfs_attr_value *kv = tfs__attr(n, "keep_dims");
    if (kv && kv->kind == TFS_ATTR_B)
        keep = kv->b;
    int64_t axes[64];
    int n_axes = 0;
    enum tfs_code rc = read_axes(n, axes_t, in->rank, axes, &n_axes, st);
    if (rc != TFS_OK)
        return rc;
    memset(red, 0, TFS_MAX_RANK * sizeof *red);
    for (int i = 0; i < n_axes; i++)
        red[axes[i]] = true;
    *count = 1;
    *orank = 0;
    for (int d = 0; d < in->rank; d++) {
        if (red[d])
            *count *= in->dims[d];
        if (!red[d])
            odims[(*orank)++] = in->dims[d];
        else if (keep)
            odims[(*orank)++] = 1;
    }
    return TFS_OK;
}

static enum tfs_code reduce(tfs_kernel_ctx *k, enum rop op, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_code rc;
    enum tfs_dtype T;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
    if (op != R_ALL && op != R_ANY && (rc = tfs__math_check_T(k, 0, 1, &T, st)) != TFS_OK)
        return rc;   /* All and Any have no attr T: their input is bool */
    const tfs_tensor *in = k->in[0];
    bool red[TFS_MAX_RANK];
    int64_t odims[TFS_MAX_RANK], count;
    int orank;
    if ((rc = tfs__reduce_shape(n, in, k->in[1], red, &orank, odims, &count, st)) != TFS_OK)
        return rc;
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, in->dtype, orank, odims, &out, st)) != TFS_OK)
        return rc;
    rplan p;
    plan_init(in, red, &p);
    rc = reduce_compute(op, &p, count, in, out, st);
    if (rc != TFS_OK) {
        tfs_tensor_unref(out);
        if (rc == TFS_UNIMPLEMENTED)
            return tfs__node_err(n, st, rc, "%s is not supported for dtype %s", n->op_type,
                                 tfs_dtype_short_name(in->dtype));
        return rc;
    }
    k->out[0] = out;
    return TFS_OK;
}

#define REDUCE_KERNEL(fn, op)                                                                      \
    enum tfs_code fn(tfs_kernel_ctx *k, tfs_status *st) { return reduce(k, op, st); }

REDUCE_KERNEL(tfs__k_sum, R_SUM)
REDUCE_KERNEL(tfs__k_mean, R_MEAN)
REDUCE_KERNEL(tfs__k_max, R_MAX)
REDUCE_KERNEL(tfs__k_min, R_MIN)
REDUCE_KERNEL(tfs__k_prod, R_PROD)
REDUCE_KERNEL(tfs__k_all, R_ALL)
REDUCE_KERNEL(tfs__k_any, R_ANY)

/* ---- ArgMax, ArgMin, Cumsum, Cumprod: one axis, the input seen as [outer, len, inner] -------- */

static enum tfs_code one_axis(const tfs_node *n, const tfs_tensor *in, const tfs_tensor *axis_t,
                              int *axis, int64_t *outer, int64_t *len, int64_t *inner,
                              tfs_status *st)
{
    if (axis_t->rank != 0 && !(axis_t->rank == 1 && axis_t->nelem == 1))
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "axis must be a scalar");
    int64_t a;
    int na = 0;
    enum tfs_code rc = read_axes(n, axis_t, in->rank, &a, &na, st);
    if (rc != TFS_OK)
        return rc;
    *axis = (int)a;
    *outer = *inner = 1;
    for (int d = 0; d < a; d++)
        *outer *= in->dims[d];
    for (int d = (int)a + 1; d < in->rank; d++)
        *inner *= in->dims[d];
    *len = in->dims[a];
    return TFS_OK;
}

/* best[j] is the index along the axis so far; a later element wins only when strictly better,
 * so ties give the first index (as TensorFlow). */
#define ARG_LOOP(T, OT, BETTER)                                                                    \
    do {                                                                                           \
        const T *X = in->data;                                                                     \
        OT *O = out->data;                                                                         \
        for (int64_t o = 0; o < outer; o++) {                                                      \
            const T *x = X + o * len * inner;                                                      \
            OT *y = O + o * inner;                                                                 \
            for (int64_t j = 0; j < inner; j++)                                                    \
                y[j] = 0;                                                                          \
            for (int64_t i = 1; i < len; i++)                                                      \
                for (int64_t j = 0; j < inner; j++)                                                \
                    if (x[i * inner + j] BETTER x[(int64_t)y[j] * inner + j])                      \
                        y[j] = (OT)i;                                                              \
        }                                                                                          \
    } while (0)

#define ARG_TYPES(OT, BETTER)                                                                      \
    switch (in->dtype) {                                                                           \
    case TFS_DTYPE_FLOAT:  ARG_LOOP(float, OT, BETTER); break;                                     \
    case TFS_DTYPE_DOUBLE: ARG_LOOP(double, OT, BETTER); break;                                    \
    case TFS_DTYPE_INT32:  ARG_LOOP(int32_t, OT, BETTER); break;                                   \
    case TFS_DTYPE_INT64:  ARG_LOOP(int64_t, OT, BETTER); break;                                   \
    case TFS_DTYPE_UINT8:  ARG_LOOP(uint8_t, OT, BETTER); break;                                   \
    case TFS_DTYPE_INT8:   ARG_LOOP(int8_t, OT, BETTER); break;                                    \
    case TFS_DTYPE_INT16:  ARG_LOOP(int16_t, OT, BETTER); break;                                   \
    default:               ok = false;                                                             \
    }

static enum tfs_code arg_common(tfs_kernel_ctx *k, bool is_max, tfs_status *st)
{
    const tfs_node *n = k->node;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 0, 1, &T, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *in = k->in[0];
    enum tfs_dtype ot = TFS_DTYPE_INT64;
    const tfs_attr_value *v = tfs__attr(n, "output_type");
    if (v && v->kind == TFS_ATTR_TYPE)
        ot = v->type;
    if (ot != TFS_DTYPE_INT32 && ot != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "output_type %s is not int32 or int64",
                             tfs_dtype_short_name(ot));
    int axis;
    int64_t outer, len, inner;
    if ((rc = one_axis(n, in, k->in[1], &axis, &outer, &len, &inner, st)) != TFS_OK)
        return rc;
    char s1[128];
    if (len == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Reduction axis %d is empty in shape %s",
                             axis, tfs_shape_str(in->rank, in->dims, s1, sizeof s1));
    if (ot == TFS_DTYPE_INT32 && len > INT32_MAX)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "axis of %lld elements for int32 output",
                             (long long)len);
    int64_t odims[TFS_MAX_RANK];
    int orank = 0;
    for (int d = 0; d < in->rank; d++)
        if (d != axis)
            odims[orank++] = in->dims[d];
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, ot, orank, odims, &out, st)) != TFS_OK)
        return rc;
    bool ok = true;
    if (ot == TFS_DTYPE_INT32) {
        if (is_max) ARG_TYPES(int32_t, >) else ARG_TYPES(int32_t, <)
    } else {
        if (is_max) ARG_TYPES(int64_t, >) else ARG_TYPES(int64_t, <)
    }
    if (!ok) {
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(in->dtype));
    }
    k->out[0] = out;
    return TFS_OK;
}

enum tfs_code tfs__k_arg_max(tfs_kernel_ctx *k, tfs_status *st)
{
    return arg_common(k, true, st);
}

enum tfs_code tfs__k_arg_min(tfs_kernel_ctx *k, tfs_status *st)
{
    return arg_common(k, false, st);
}

/* Running sum/product along the axis; exclusive shifts by one (starting at the identity),
 * reverse runs from the end. AT is the accumulation type. */
#define CUM_LOOP(T, AT, OPER, IDENT)                                                               \
    do {                                                                                           \
        const T *X = in->data;                                                                     \
        T *O = out->data;                                                                          \
        for (int64_t o = 0; o < outer; o++)                                                        \
            for (int64_t j = 0; j < inner; j++) {                                                  \
                AT acc = IDENT;                                                                    \
                for (int64_t s = 0; s < len; s++) {                                                \
                    int64_t i = reverse ? len - 1 - s : s;                                         \
                    int64_t at = (o * len + i) * inner + j;                                        \
                    if (exclusive) {                                                               \
                        O[at] = (T)acc;                                                            \
                        acc = acc OPER (AT)X[at];                                                  \
                    } else {                                                                       \
                        acc = acc OPER (AT)X[at];                                                  \
                        O[at] = (T)acc;                                                            \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
    } while (0)

#define CUM_TYPES(OPER, IDENT)                                                                     \
    switch (in->dtype) {                                                                           \
    case TFS_DTYPE_FLOAT:  CUM_LOOP(float, float, OPER, IDENT); break;                             \
    case TFS_DTYPE_DOUBLE: CUM_LOOP(double, double, OPER, IDENT); break;                           \
    case TFS_DTYPE_INT32:  CUM_LOOP(int32_t, uint32_t, OPER, IDENT); break;                        \
    case TFS_DTYPE_INT64:  CUM_LOOP(int64_t, uint64_t, OPER, IDENT); break;                        \
    default:               ok = false;                                                             \
    }

static enum tfs_code cum_common(tfs_kernel_ctx *k, bool prod, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__math_check_T(k, 0, 1, &T, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
    const tfs_tensor *in = k->in[0];
    bool exclusive = false, reverse = false;
    const tfs_attr_value *v;
    if ((v = tfs__attr(n, "exclusive")) && v->kind == TFS_ATTR_B)
        exclusive = v->b;
    if ((v = tfs__attr(n, "reverse")) && v->kind == TFS_ATTR_B)
        reverse = v->b;
    if (in->rank == 0)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input must be at least rank 1");
    int axis;
    int64_t outer, len, inner;
    if ((rc = one_axis(n, in, k->in[1], &axis, &outer, &len, &inner, st)) != TFS_OK)
        return rc;
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, in->rank, in->dims, &out, st)) != TFS_OK)
        return rc;
    bool ok = true;
    if (prod)
        CUM_TYPES(*, 1)
    else
        CUM_TYPES(+, 0)
    if (!ok) {
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    }
    k->out[0] = out;
    return TFS_OK;
}

enum tfs_code tfs__k_cumsum(tfs_kernel_ctx *k, tfs_status *st)
{
    return cum_common(k, false, st);
}

enum tfs_code tfs__k_cumprod(tfs_kernel_ctx *k, tfs_status *st)
{
    return cum_common(k, true, st);
}
