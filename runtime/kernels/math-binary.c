/* CPU kernels of the math family's binary elementwise ops with TensorFlow broadcasting: Sub,
 * RealDiv, Div, Maximum, Minimum, Pow, SquaredDifference, FloorDiv, FloorMod, DivNoNan,
 * TruncateDiv (integers), TruncateMod and Mod (C's remainder, fmod for floats), the comparisons
 * (Less ... NotEqual, strings and bools for Equal/NotEqual) and LogicalAnd/LogicalOr.
 *
 * Semantics follow TensorFlow's CPU kernels: Maximum/Minimum propagate NaN; integer Div truncates
 * toward zero, FloorDiv/FloorMod round toward negative infinity, and an integer divisor of 0 is
 * INVALID_ARGUMENT "Integer division by zero"; integer Pow refuses negative exponents; integer
 * arithmetic wraps (computed in unsigned types, so INT_MIN / -1 wraps instead of trapping).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/kernels/math-impl.h"

enum bop {
    B_SUB, B_REALDIV, B_DIV, B_MAX, B_MIN, B_POW, B_SQDIFF, B_FLOORDIV, B_FLOORMOD, B_DIVNONAN,
    B_TRUNCMOD, B_TRUNCDIV,
    B_LESS, B_LESS_EQ, B_GREATER, B_GREATER_EQ, B_EQ, B_NE, B_AND, B_OR
};

enum bad { BAD_NONE, BAD_DIV_ZERO, BAD_NEG_POW };

/* Walks rows [r0, r1) of bc computing O[o] = EXPR of x = A[pa], y = B[pb]. */
#define WALK(TI, TO, EXPR)                                                                         \
    do {                                                                                           \
        const TI *A = a->data;                                                                     \
        const TI *B = b->data;                                                                     \
        TO *O = out->data;                                                                         \
        TFS_BCAST_WALK_ROWS(bc, r0, r1, {                                                          \
            TI x = A[pa];                                                                          \
            TI y = B[pb];                                                                          \
            O[o] = (TO)(EXPR);                                                                     \
        });                                                                                        \
        return BAD_NONE;                                                                           \
    } while (0)

/* Like WALK for ops that may find a bad operand: *bad is set and the element gets 0. */
#define WALK_CHECKED(TI, TO, BADCOND, WHY, EXPR)                                                   \
    do {                                                                                           \
        const TI *A = a->data;                                                                     \
        const TI *B = b->data;                                                                     \
        TO *O = out->data;                                                                         \
        enum bad bad_ = BAD_NONE;                                                                  \
        TFS_BCAST_WALK_ROWS(bc, r0, r1, {                                                          \
            TI x = A[pa];                                                                          \
            TI y = B[pb];                                                                          \
            if (BADCOND) {                                                                         \
                bad_ = (WHY);                                                                      \
                O[o] = 0;                                                                          \
            } else {                                                                               \
                O[o] = (TO)(EXPR);                                                                 \
            }                                                                                      \
        });                                                                                        \
        return bad_;                                                                               \
    } while (0)

/* Max/Min: a NaN operand wins (x != x is true only for NaN; for integers it is always false). */
#define MAXV(x, y) (((x) != (x) || (x) > (y)) ? (x) : (y))
#define MINV(x, y) (((x) != (x) || (x) < (y)) ? (x) : (y))

#define FLOAT_OPS(T, FLOOR, FMOD, POW)                                                             \
    switch (op) {                                                                                  \
    case B_SUB:      WALK(T, T, x - y);                                                            \
    case B_REALDIV:                                                                                \
    case B_DIV:      WALK(T, T, x / y);                                                            \
    case B_MAX:      WALK(T, T, MAXV(x, y));                                                       \
    case B_MIN:      WALK(T, T, MINV(x, y));                                                       \
    case B_POW:      WALK(T, T, POW(x, y));                                                        \
    case B_SQDIFF:   WALK(T, T, (x - y) * (x - y));                                                \
    case B_FLOORDIV: WALK(T, T, FLOOR(x / y));                                                     \
    case B_FLOORMOD: WALK(T, T, float_mod_##T(x, y));                                              \
    case B_DIVNONAN: WALK(T, T, y == 0 ? (T)0 : x / y);                                            \
    case B_TRUNCMOD: WALK(T, T, FMOD(x, y));                                                       \
    default:         return -1;                                                                    \
    }

/* TensorFlow's FloorMod for floats: fmod, then moved into the divisor's sign. */
static inline float float_mod_float(float x, float y)
{
    float r = fmodf(x, y);
    return r != 0 && ((y < 0) != (r < 0)) ? r + y : r;
}

static inline double float_mod_double(double x, double y)
{
    double r = fmod(x, y);
    return r != 0 && ((y < 0) != (r < 0)) ? r + y : r;
}

/* Integer helpers in the unsigned type UT of T. y == 0 never reaches them; y == -1 is handled
 * apart because INT_MIN / -1 overflows. */
#define INT_HELPERS(T, UT)                                                                         \
    static inline T trunc_div_##T(T x, T y)                                                        \
    {                                                                                              \
        return y == -1 ? (T)(0 - (UT)x) : (T)(x / y);                                              \
    }                                                                                              \
    static inline T floor_div_##T(T x, T y)                                                        \
    {                                                                                              \
        if (y == -1)                                                                               \
            return (T)(0 - (UT)x);                                                                 \
        T q = (T)(x / y);                                                                          \
        return (x % y != 0 && ((x < 0) != (y < 0))) ? (T)(q - 1) : q;                              \
    }                                                                                              \
    static inline T floor_mod_##T(T x, T y)                                                        \
    {                                                                                              \
        if (y == -1)                                                                               \
            return 0;                                                                              \
        T r = (T)(x % y);                                                                          \
        return (r != 0 && ((r < 0) != (y < 0))) ? (T)(r + y) : r;                                  \
    }                                                                                              \
    static inline T trunc_mod_##T(T x, T y)                                                        \
    {                                                                                              \
        return y == -1 ? 0 : (T)(x % y);                                                           \
    }                                                                                              \
    static inline T ipow_##T(T x, T y)                                                             \
    {                                                                                              \
        UT base = (UT)x, acc = 1;                                                                  \
        for (UT e = (UT)y; e; e >>= 1) {                                                           \
            if (e & 1)                                                                             \
                acc *= base;                                                                       \
            base *= base;                                                                          \
        }                                                                                          \
        return (T)acc;                                                                             \
    }

INT_HELPERS(int32_t, uint32_t)
INT_HELPERS(int64_t, uint64_t)

#define INT_OPS(T, UT)                                                                             \
    switch (op) {                                                                                  \
    case B_SUB:      WALK(T, T, (UT)x - (UT)y);                                                    \
    case B_DIV:      WALK_CHECKED(T, T, y == 0, BAD_DIV_ZERO, trunc_div_##T(x, y));                \
    case B_MAX:      WALK(T, T, MAXV(x, y));                                                       \
    case B_MIN:      WALK(T, T, MINV(x, y));                                                       \
    case B_POW:      WALK_CHECKED(T, T, y < 0, BAD_NEG_POW, ipow_##T(x, y));                       \
    case B_SQDIFF:   WALK(T, T, ((UT)x - (UT)y) * ((UT)x - (UT)y));                                \
    case B_FLOORDIV: WALK_CHECKED(T, T, y == 0, BAD_DIV_ZERO, floor_div_##T(x, y));                \
    case B_FLOORMOD: WALK_CHECKED(T, T, y == 0, BAD_DIV_ZERO, floor_mod_##T(x, y));                \
    case B_TRUNCDIV: WALK_CHECKED(T, T, y == 0, BAD_DIV_ZERO, trunc_div_##T(x, y));                \
    case B_TRUNCMOD: WALK_CHECKED(T, T, y == 0, BAD_DIV_ZERO, trunc_mod_##T(x, y));                \
    default:         return -1;                                                                    \
    }

/* Small integer types: only the ops that cannot divide. */
#define SMALL_INT_OPS(T, UT)                                                                       \
    switch (op) {                                                                                  \
    case B_SUB: WALK(T, T, (UT)x - (UT)y);                                                         \
    case B_MAX: WALK(T, T, MAXV(x, y));                                                            \
    case B_MIN: WALK(T, T, MINV(x, y));                                                            \
    default:    return -1;                                                                         \
    }

#define CMP_OPS(T)                                                                                 \
    switch (op) {                                                                                  \
    case B_LESS:       WALK(T, bool, x < y);                                                       \
    case B_LESS_EQ:    WALK(T, bool, x <= y);                                                      \
    case B_GREATER:    WALK(T, bool, x > y);                                                       \
    case B_GREATER_EQ: WALK(T, bool, x >= y);                                                      \
    case B_EQ:         WALK(T, bool, x == y);                                                      \
    case B_NE:         WALK(T, bool, x != y);                                                      \
    default:           return -1;                                                                  \
    }

static bool str_eq(const tfs_string *x, const tfs_string *y)
{
    return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

/* Computes rows [r0, r1) of out; returns a bad-operand code, or -1 when op does not take dtype T
 * (an empty range tells that without computing). */
static int compute(enum bop op, enum tfs_dtype T, const tfs_bcast *bc, const tfs_tensor *a,
                   const tfs_tensor *b, tfs_tensor *out, int64_t r0, int64_t r1)
{
    if (op >= B_LESS && op <= B_NE) {
        switch (T) {
        case TFS_DTYPE_FLOAT:  CMP_OPS(float)
        case TFS_DTYPE_DOUBLE: CMP_OPS(double)
        case TFS_DTYPE_INT32:  CMP_OPS(int32_t)
        case TFS_DTYPE_INT64:  CMP_OPS(int64_t)
        case TFS_DTYPE_INT8:   CMP_OPS(int8_t)
        case TFS_DTYPE_INT16:  CMP_OPS(int16_t)
        case TFS_DTYPE_UINT8:  CMP_OPS(uint8_t)
        case TFS_DTYPE_UINT16: CMP_OPS(uint16_t)
        case TFS_DTYPE_BOOL:
            if (op == B_EQ)
                WALK(bool, bool, x == y);
            if (op == B_NE)
                WALK(bool, bool, x != y);
            return -1;
        case TFS_DTYPE_STRING:
            if (op == B_EQ)
                WALK(tfs_string, bool, str_eq(&x, &y));
            if (op == B_NE)
                WALK(tfs_string, bool, !str_eq(&x, &y));
            return -1;
        default: return -1;
        }
    }
    if (op == B_AND || op == B_OR) {
        if (T != TFS_DTYPE_BOOL)
            return -1;
        if (op == B_AND)
            WALK(bool, bool, x && y);
        WALK(bool, bool, x || y);
    }
    switch (T) {
    case TFS_DTYPE_FLOAT:  FLOAT_OPS(float, floorf, fmodf, powf)
    case TFS_DTYPE_DOUBLE: FLOAT_OPS(double, floor, fmod, pow)
    case TFS_DTYPE_INT32:  INT_OPS(int32_t, uint32_t)
    case TFS_DTYPE_INT64:  INT_OPS(int64_t, uint64_t)
    case TFS_DTYPE_INT8:   SMALL_INT_OPS(int8_t, uint32_t)
    case TFS_DTYPE_INT16:  SMALL_INT_OPS(int16_t, uint32_t)
    case TFS_DTYPE_UINT8:  SMALL_INT_OPS(uint8_t, uint32_t)
    default:               return -1;
    }
}

/* One range of rows, for tfs__parallel_for; a bad operand anywhere is kept in `bad`. */
typedef struct binary_job {
    enum bop          op;
    enum tfs_dtype    T;
    const tfs_bcast  *bc;
    const tfs_tensor *a, *b;
    tfs_tensor       *out;
    atomic_int        bad;
} binary_job;

static void binary_rows(void *arg, int64_t r0, int64_t r1)
{
    binary_job *j = arg;
    int bad = compute(j->op, j->T, j->bc, j->a, j->b, j->out, r0, r1);
    if (bad != BAD_NONE)
        atomic_store(&j->bad, bad);
}

static enum tfs_code binary(tfs_kernel_ctx *k, enum bop op, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T = TFS_DTYPE_BOOL;
    enum tfs_code rc;
    if (op == B_AND || op == B_OR) {   /* no attr T: both inputs are bool */
        if (k->n_in != 2)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
        for (int i = 0; i < 2; i++)
            if (k->in[i]->dtype != TFS_DTYPE_BOOL)
                return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input %d has dtype %s, not bool",
                                     i, tfs_dtype_short_name(k->in[i]->dtype));
    } else if ((rc = tfs__math_check_T(k, 0, 2, &T, st)) != TFS_OK) {
        return rc;
    }
    enum tfs_dtype out_t = op >= B_LESS ? TFS_DTYPE_BOOL : T;
    tfs_bcast bc;
    if ((rc = tfs__bcast_init(k->in[0], k->in[1], NULL, &bc, st)) != TFS_OK) {
        bool ise = true;
        if (op != B_EQ && op != B_NE)
            return rc;
        const tfs_attr_value *v = tfs__attr(n, "incompatible_shape_error");
        if (v && v->kind == TFS_ATTR_B)
            ise = v->b;
        if (ise)
            return rc;
        /* TensorFlow answers a scalar: the shapes differ, so nothing is equal. */
        tfs_tensor *out = NULL;
        if ((rc = tfs_tensor_new_scalar(TFS_DTYPE_BOOL, &out, st)) != TFS_OK)
            return rc;
        *(bool *)out->data = op == B_NE;
        k->out[0] = out;
        return TFS_OK;
    }
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, out_t, bc.out_rank, bc.out_dims, &out, st)) != TFS_OK)
        return rc;
    int bad = compute(op, T, &bc, k->in[0], k->in[1], out, 0, 0);   /* T supported? */
    if (bad == BAD_NONE) {
        binary_job j = {op, T, &bc, k->in[0], k->in[1], out, BAD_NONE};
        tfs__parallel_for(tfs__bcast_rows(&bc, out->nelem),
                          tfs__math_grain(bc.dims[bc.rank - 1]), binary_rows, &j);
        bad = atomic_load(&j.bad);
    }
    if (bad != BAD_NONE) {
        tfs_tensor_unref(out);
        if (bad == BAD_DIV_ZERO)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Integer division by zero");
        if (bad == BAD_NEG_POW)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Integers to negative integer powers are not allowed");
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    }
    k->out[0] = out;
    return TFS_OK;
}

#define BINARY_KERNEL(fn, op)                                                                      \
    enum tfs_code fn(tfs_kernel_ctx *k, tfs_status *st) { return binary(k, op, st); }

BINARY_KERNEL(tfs__k_sub, B_SUB)
BINARY_KERNEL(tfs__k_div, B_DIV)
BINARY_KERNEL(tfs__k_maximum, B_MAX)
BINARY_KERNEL(tfs__k_minimum, B_MIN)
BINARY_KERNEL(tfs__k_pow, B_POW)
BINARY_KERNEL(tfs__k_squared_difference, B_SQDIFF)
BINARY_KERNEL(tfs__k_floor_div, B_FLOORDIV)
BINARY_KERNEL(tfs__k_floor_mod, B_FLOORMOD)
BINARY_KERNEL(tfs__k_truncate_div, B_TRUNCDIV)
BINARY_KERNEL(tfs__k_truncate_mod, B_TRUNCMOD)
BINARY_KERNEL(tfs__k_less, B_LESS)
BINARY_KERNEL(tfs__k_less_equal, B_LESS_EQ)
BINARY_KERNEL(tfs__k_greater, B_GREATER)
BINARY_KERNEL(tfs__k_greater_equal, B_GREATER_EQ)
BINARY_KERNEL(tfs__k_equal, B_EQ)
BINARY_KERNEL(tfs__k_not_equal, B_NE)
BINARY_KERNEL(tfs__k_logical_and, B_AND)
BINARY_KERNEL(tfs__k_logical_or, B_OR)

/* RealDiv and DivNoNan take floating-point types only (TensorFlow registers no integer kernel). */
static enum tfs_code float_only(tfs_kernel_ctx *k, enum bop op, tfs_status *st)
{
    const tfs_attr_value *v = tfs__attr(k->node, "T");
    if (v && v->kind == TFS_ATTR_TYPE && v->type != TFS_DTYPE_FLOAT && v->type != TFS_DTYPE_DOUBLE)
        return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             k->node->op_type, tfs_dtype_short_name(v->type));
    return binary(k, op, st);
}

enum tfs_code tfs__k_real_div(tfs_kernel_ctx *k, tfs_status *st)
{
    return float_only(k, B_REALDIV, st);
}

enum tfs_code tfs__k_div_no_nan(tfs_kernel_ctx *k, tfs_status *st)
{
    return float_only(k, B_DIVNONAN, st);
}
