/* CPU kernels of the math family's unary elementwise ops: Neg, Abs, Exp, Log, Log1p, Sqrt, Rsqrt,
 * Square, Reciprocal/Inv, Sign, Floor, Ceil, Round, Tanh, Sigmoid, Relu, Relu6, Elu, Selu,
 * LeakyRelu, Softplus, Softsign, Erf, Expm1, Sin, Cos, IsNan, IsInf,
 * IsFinite and LogicalNot.
 *
 * Each is one flat loop over the input buffer (the output has the input's shape). Float ops take
 * float and double; the integer ones (Neg, Abs, Square, Sign, Relu, Relu6, Round) also take int32
 * and int64 and wrap like TensorFlow (Neg/Abs of INT_MIN is INT_MIN). Round rounds half to even, as
 * TensorFlow does. Activations let NaN through (Relu(NaN) = NaN); Sigmoid and Softplus are written
 * so that large |x| neither overflows nor loses the small side.
 */
#include <math.h>
#include <stdint.h>

#include "runtime/kernels/math-impl.h"

enum uop {
    U_NEG, U_ABS, U_EXP, U_LOG, U_LOG1P, U_SQRT, U_RSQRT, U_SQUARE, U_RECIPROCAL, U_SIGN, U_FLOOR,
    U_CEIL, U_ROUND, U_TANH, U_SIGMOID, U_RELU, U_RELU6, U_ELU, U_SELU, U_LEAKY_RELU, U_SOFTPLUS,
    U_ERF, U_IS_NAN, U_IS_FINITE, U_LOGICAL_NOT, U_EXPM1, U_SIN, U_COS, U_SOFTSIGN,
    U_IS_INF
};

/* SELU's constants (Klambauer et al.), as TensorFlow defines them. */
#define SELU_SCALE 1.0507009873554804934193349852946
#define SELU_ALPHA 1.6732632423543772848170429916717

/* Elements [i0, i1). */
#define LOOP(TI, TO, EXPR)                                                                         \
    do {                                                                                           \
        const TI *X = in->data;                                                                    \
        TO *O = out->data;                                                                         \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            TI x = X[i];                                                                           \
            O[i] = (TO)(EXPR);                                                                     \
        }                                                                                          \
        return true;                                                                               \
    } while (0)

/* The float forms use tfs__expf so the loops vectorize; the double forms call libm. */
static inline float exp_f(float x)
{
    return tfs__expf(x);
}

static inline float sigmoid_f(float x)
{
    float e = tfs__expf(x < 0 ? x : -x);   /* e^-|x| never overflows */
    return x < 0 ? e / (1.0f + e) : 1.0f / (1.0f + e);
}

/* Cephes' tanhf: an odd polynomial below 0.625, else 1 - 2/(e^2|x| + 1) with x's sign. */
static inline float tanh_f(float x)
{
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = p * z * x + x;
    float ax = x < 0 ? -x : x;
    float big = 1.0f - 2.0f / (tfs__expf(2.0f * ax) + 1.0f);
    big = x < 0 ? -big : big;
    return ax < 0.625f ? small : big;
}

static inline double exp_d(double x)
{
    return exp(x);
}

static inline double tanh_d(double x)
{
    return tanh(x);
}

static inline double sigmoid_d(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x, no 0 for very negative x. */
#define SOFTPLUS(x, SFX) ((x) > 0 ? (x) + log1p##SFX(exp##SFX(-(x))) : log1p##SFX(exp##SFX(x)))

/* SFX is the C math library's suffix: f for float, empty for double. */
#define FLOAT_UNARY(T, SFX, SIGMOID, EXP, TANH)                                                    \
    switch (op) {                                                                                  \
    case U_NEG:        LOOP(T, T, -x);                                                             \
    case U_ABS:        LOOP(T, T, fabs##SFX(x));                                                   \
    case U_EXP:        LOOP(T, T, EXP(x));                                                         \
    case U_LOG:        LOOP(T, T, log##SFX(x));                                                    \
    case U_LOG1P:      LOOP(T, T, log1p##SFX(x));                                                  \
    case U_SQRT:       LOOP(T, T, sqrt##SFX(x));                                                   \
    case U_RSQRT:      LOOP(T, T, (T)1 / sqrt##SFX(x));                                            \
    case U_SQUARE:     LOOP(T, T, x * x);                                                          \
    case U_RECIPROCAL: LOOP(T, T, (T)1 / x);                                                       \
    case U_SIGN:       LOOP(T, T, x != x ? x : (T)((x > 0) - (x < 0)));                            \
    case U_FLOOR:      LOOP(T, T, floor##SFX(x));                                                  \
    case U_CEIL:       LOOP(T, T, ceil##SFX(x));                                                   \
    case U_ROUND:      LOOP(T, T, rint##SFX(x));   /* default FE_TONEAREST: half to even */        \
    case U_TANH:       LOOP(T, T, TANH(x));                                                        \
    case U_SIGMOID:    LOOP(T, T, SIGMOID(x));                                                     \
    case U_RELU:       LOOP(T, T, x < 0 ? (T)0 : x);                                               \
    case U_RELU6:      LOOP(T, T, x < 0 ? (T)0 : x > 6 ? (T)6 : x);                                \
    case U_ELU:        LOOP(T, T, x < 0 ? expm1##SFX(x) : x);                                      \
    case U_SELU:                                                                                   \
        LOOP(T, T, x < 0 ? (T)(SELU_SCALE * SELU_ALPHA) * expm1##SFX(x) : (T)SELU_SCALE * x);      \
    case U_LEAKY_RELU: LOOP(T, T, x > 0 ? x : x * (T)alpha);                                       \
    case U_SOFTPLUS:   LOOP(T, T, SOFTPLUS(x, SFX));                                               \
    case U_ERF:        LOOP(T, T, erf##SFX(x));                                                    \
    case U_IS_NAN:     LOOP(T, bool, isnan(x));                                                    \
    case U_IS_FINITE:  LOOP(T, bool, isfinite(x));                                                 \
    case U_IS_INF:     LOOP(T, bool, isinf(x));                                                    \
    case U_EXPM1:      LOOP(T, T, expm1##SFX(x));                                                  \
    case U_SIN:        LOOP(T, T, sin##SFX(x));                                                    \
    case U_COS:        LOOP(T, T, cos##SFX(x));                                                    \
    case U_SOFTSIGN:   LOOP(T, T, x / ((T)1 + fabs##SFX(x)));                                      \
    default:           return false;                                                               \
    }

#define INT_UNARY(T, UT)                                                                           \
    switch (op) {                                                                                  \
    case U_NEG:    LOOP(T, T, 0 - (UT)x);                                                          \
    case U_ABS:    LOOP(T, T, x < 0 ? 0 - (UT)x : (UT)x);                                          \
    case U_SQUARE: LOOP(T, T, (UT)x * (UT)x);                                                      \
    case U_SIGN:   LOOP(T, T, (x > 0) - (x < 0));                                                  \
    case U_ROUND:  LOOP(T, T, x);                                                                  \
    case U_RELU:   LOOP(T, T, x < 0 ? 0 : x);                                                      \
    case U_RELU6:  LOOP(T, T, x < 0 ? 0 : x > 6 ? 6 : x);                                          \
    default:       return false;                                                                   \
    }

/* Elements [i0, i1) of out; false when op does not take the dtype (an empty range tells that
 * without computing). */
static bool compute(enum uop op, const tfs_tensor *in, tfs_tensor *out, double alpha, int64_t i0,
                    int64_t i1)
{
    switch (in->dtype) {
    case TFS_DTYPE_FLOAT:  FLOAT_UNARY(float, f, sigmoid_f, exp_f, tanh_f)
    case TFS_DTYPE_DOUBLE: FLOAT_UNARY(double, , sigmoid_d, exp_d, tanh_d)
    case TFS_DTYPE_INT32:  INT_UNARY(int32_t, uint32_t)
    case TFS_DTYPE_INT64:  INT_UNARY(int64_t, uint64_t)
    case TFS_DTYPE_BOOL:
        if (op == U_LOGICAL_NOT)
            LOOP(bool, bool, !x);
        return false;
    default: return false;
    }
}

/* One range of elements, for tfs__parallel_for. */
typedef struct unary_job {
    enum uop          op;
    const tfs_tensor *in;
    tfs_tensor       *out;
    double            alpha;
} unary_job;

static void unary_range(void *arg, int64_t i0, int64_t i1)
{
    unary_job *j = arg;
    compute(j->op, j->in, j->out, j->alpha, i0, i1);
}

static enum tfs_code unary(tfs_kernel_ctx *k, enum uop op, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T = TFS_DTYPE_BOOL;
    enum tfs_code rc;
    if (op == U_LOGICAL_NOT) {   /* no attr T */
        if (k->n_in != 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 1 input, has %d", k->n_in);
        if (k->in[0]->dtype != TFS_DTYPE_BOOL)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input 0 has dtype %s, not bool",
                                 tfs_dtype_short_name(k->in[0]->dtype));
    } else if ((rc = tfs__math_check_T(k, 0, 1, &T, st)) != TFS_OK) {
        return rc;
    }
    double alpha = 0.2;   /* LeakyRelu's default */
    if (op == U_LEAKY_RELU) {
        const tfs_attr_value *v = tfs__attr(n, "alpha");
        if (v && v->kind == TFS_ATTR_F)
            alpha = v->f;
        else if (v)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr 'alpha' is not a float");
    }
    const tfs_tensor *in = k->in[0];
    bool to_bool = op == U_IS_NAN || op == U_IS_FINITE || op == U_IS_INF;
    enum tfs_dtype out_t = to_bool ? TFS_DTYPE_BOOL : T;
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, out_t, in->rank, in->dims, &out, st)) != TFS_OK)
        return rc;
    if (!compute(op, in, out, alpha, 0, 0)) {
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    }
    unary_job j = {op, in, out, alpha};
    /* Ops with a polynomial or a libm call per element pay for a thread at a quarter the size. */
    bool cheap = op == U_NEG || op == U_ABS || op == U_SQUARE || op == U_RELU || op == U_RELU6 ||
                 op == U_LEAKY_RELU || op == U_SIGN || op == U_FLOOR || op == U_CEIL ||
                 op == U_ROUND || op == U_IS_NAN || op == U_IS_FINITE || op == U_IS_INF ||
                 op == U_LOGICAL_NOT || op == U_RECIPROCAL;
    tfs__parallel_for(in->nelem, cheap ? TFS_MATH_GRAIN : TFS_MATH_GRAIN / 4, unary_range, &j);
    k->out[0] = out;
    return TFS_OK;
}

#define UNARY_KERNEL(fn, op)                                                                       \
    enum tfs_code fn(tfs_kernel_ctx *k, tfs_status *st) { return unary(k, op, st); }

UNARY_KERNEL(tfs__k_neg, U_NEG)
UNARY_KERNEL(tfs__k_abs, U_ABS)
UNARY_KERNEL(tfs__k_exp, U_EXP)
UNARY_KERNEL(tfs__k_log, U_LOG)
UNARY_KERNEL(tfs__k_log1p, U_LOG1P)
UNARY_KERNEL(tfs__k_sqrt, U_SQRT)
UNARY_KERNEL(tfs__k_rsqrt, U_RSQRT)
UNARY_KERNEL(tfs__k_square, U_SQUARE)
UNARY_KERNEL(tfs__k_reciprocal, U_RECIPROCAL)
UNARY_KERNEL(tfs__k_sign, U_SIGN)
UNARY_KERNEL(tfs__k_floor, U_FLOOR)
UNARY_KERNEL(tfs__k_ceil, U_CEIL)
UNARY_KERNEL(tfs__k_round, U_ROUND)
UNARY_KERNEL(tfs__k_tanh, U_TANH)
UNARY_KERNEL(tfs__k_sigmoid, U_SIGMOID)
UNARY_KERNEL(tfs__k_relu, U_RELU)
UNARY_KERNEL(tfs__k_relu6, U_RELU6)
UNARY_KERNEL(tfs__k_elu, U_ELU)
UNARY_KERNEL(tfs__k_selu, U_SELU)
UNARY_KERNEL(tfs__k_leaky_relu, U_LEAKY_RELU)
UNARY_KERNEL(tfs__k_softplus, U_SOFTPLUS)
UNARY_KERNEL(tfs__k_erf, U_ERF)
UNARY_KERNEL(tfs__k_is_nan, U_IS_NAN)
UNARY_KERNEL(tfs__k_is_finite, U_IS_FINITE)
UNARY_KERNEL(tfs__k_logical_not, U_LOGICAL_NOT)
UNARY_KERNEL(tfs__k_expm1, U_EXPM1)
UNARY_KERNEL(tfs__k_sin, U_SIN)
UNARY_KERNEL(tfs__k_cos, U_COS)
UNARY_KERNEL(tfs__k_softsign, U_SOFTSIGN)
UNARY_KERNEL(tfs__k_is_inf, U_IS_INF)
