/* CPU kernels of the math family: Mul, Add/AddV2 with NumPy/TensorFlow broadcasting, and Cast.
 *
 * Broadcasting (output shape and strides) is tfs__bcast_init's, see math-impl.h. Integer
 * arithmetic wraps around as TensorFlow's does (computed in unsigned types, so without undefined
 * behaviour).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/kernels/math-impl.h"

/* ---- Mul, Add ------------------------------------------------------------------------------ */

/* Walks rows [r0, r1) of the iteration space of bc with the shared walker (math-impl.h), whose
 * innermost loop has constant strides for equal shapes and scalar operands. T is the element type,
 * OT the type the operation is computed in. */
#define BINARY_LOOP(T, OT, OP)                                                                     \
    do {                                                                                           \
        const T *A = a->data;                                                                      \
        const T *B = b->data;                                                                      \
        T *O = out->data;                                                                          \
        TFS_BCAST_WALK_ROWS(bc, r0, r1, O[o] = (T)((OT)A[pa] OP (OT)B[pb]));                       \
        return true;                                                                               \
    } while (0)

/* Small integers are computed in uint32_t: int16 * int16 would overflow int after promotion. */
#define BINARY_DISPATCH(OP)                                                                        \
    switch (out->dtype) {                                                                          \
    case TFS_DTYPE_FLOAT:  BINARY_LOOP(float, float, OP);                                          \
    case TFS_DTYPE_DOUBLE: BINARY_LOOP(double, double, OP);                                        \
    case TFS_DTYPE_INT32:  BINARY_LOOP(int32_t, uint32_t, OP);                                     \
    case TFS_DTYPE_INT64:  BINARY_LOOP(int64_t, uint64_t, OP);                                     \
    case TFS_DTYPE_INT8:   BINARY_LOOP(int8_t, uint32_t, OP);                                      \
    case TFS_DTYPE_INT16:  BINARY_LOOP(int16_t, uint32_t, OP);                                     \
    case TFS_DTYPE_UINT8:  BINARY_LOOP(uint8_t, uint32_t, OP);                                     \
    default:               return false;                                                           \
    }

static bool mul_elements(const tfs_bcast *bc, const tfs_tensor *a, const tfs_tensor *b,
                         tfs_tensor *out, int64_t r0, int64_t r1)
{
    BINARY_DISPATCH(*)
}

static bool add_elements(const tfs_bcast *bc, const tfs_tensor *a, const tfs_tensor *b,
                         tfs_tensor *out, int64_t r0, int64_t r1)
{
    BINARY_DISPATCH(+)
}

typedef bool (*binary_fn)(const tfs_bcast *, const tfs_tensor *, const tfs_tensor *, tfs_tensor *,
                          int64_t, int64_t);

/* One range of rows of a binary op, for tfs__parallel_for. */
typedef struct binary_job {
    binary_fn         fn;
    const tfs_bcast  *bc;
    const tfs_tensor *a, *b;
    tfs_tensor       *out;
} binary_job;

static void binary_rows(void *arg, int64_t r0, int64_t r1)
{
    binary_job *j = arg;
    j->fn(j->bc, j->a, j->b, j->out, r0, r1);
}

static enum tfs_code binary_op(tfs_kernel_ctx *k, binary_fn fn, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype T;
    enum tfs_code rc = tfs__attr_type(n, "T", &T, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, has %d", k->n_in);
    for (int i = 0; i < 2; i++)
        if (k->in[i]->dtype != T)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "input %d has dtype %s, but attr T is %s", i,
                                 tfs_dtype_short_name(k->in[i]->dtype), tfs_dtype_short_name(T));
    tfs_bcast bc;
    if ((rc = tfs__bcast_init(k->in[0], k->in[1], NULL, &bc, st)) != TFS_OK)
        return rc;
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, T, bc.out_rank, bc.out_dims, &out, st)) != TFS_OK)
        return rc;
    if (!fn(&bc, k->in[0], k->in[1], out, 0, 0)) {   /* an empty range: is T supported? */
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                             n->op_type, tfs_dtype_short_name(T));
    }
    binary_job j = {fn, &bc, k->in[0], k->in[1], out};
    tfs__parallel_for(tfs__bcast_rows(&bc, out->nelem), tfs__math_grain(bc.dims[bc.rank - 1]),
                      binary_rows, &j);
    k->out[0] = out;
    return TFS_OK;
}

enum tfs_code tfs__k_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary_op(k, mul_elements, st);
}

enum tfs_code tfs__k_add(tfs_kernel_ctx *k, tfs_status *st)
{
    return binary_op(k, add_elements, st);
}

/* ---- Cast ----------------------------------------------------------------------------------- */

/* Float -> integer truncates toward zero. Out-of-range values are left to the platform by
 * TensorFlow (x86 gives INT_MIN); we saturate to [lo, hi] and map NaN to 0 so the result is
 * defined everywhere. */
static int64_t float_to_int(double x, int64_t lo, int64_t hi)
{
    if (isnan(x))
        return 0;
    if (x <= (double)lo)
        return lo;
    if (x >= (double)hi)   /* (double)INT64_MAX rounds up to 2^63, so this also guards int64 */
        return hi;
    return (int64_t)x;
}

static uint64_t float_to_uint64(double x)
{
    if (isnan(x) || x <= 0)
        return 0;
    if (x >= 18446744073709551616.0)   /* 2^64 */
        return UINT64_MAX;
    return (uint64_t)x;
}

#define CAST_LOOP(ST, DT, EXPR)                                                                    \
    do {                                                                                           \
        const ST *s_ = src;                                                                        \
        DT *d_ = dst;                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            ST x = s_[i];                                                                          \
            d_[i] = (DT)(EXPR);                                                                    \
        }                                                                                          \
        return true;                                                                               \
    } while (0)

/* From an integer or bool source every conversion is C's: wrap to narrower integers (as
 * TensorFlow's static_cast does), round to floats, x != 0 for bool. */
#define CAST_FROM_INT(ST)                                                                          \
    switch (dt) {                                                                                  \
    case TFS_DTYPE_FLOAT:  CAST_LOOP(ST, float, x);                                                \
    case TFS_DTYPE_DOUBLE: CAST_LOOP(ST, double, x);                                               \
    case TFS_DTYPE_BOOL:   CAST_LOOP(ST, bool, x != 0);                                            \
    case TFS_DTYPE_INT8:   CAST_LOOP(ST, int8_t, x);                                               \
    case TFS_DTYPE_INT16:  CAST_LOOP(ST, int16_t, x);                                              \
    case TFS_DTYPE_INT32:  CAST_LOOP(ST, int32_t, x);                                              \
    case TFS_DTYPE_INT64:  CAST_LOOP(ST, int64_t, x);                                              \
    case TFS_DTYPE_UINT8:  CAST_LOOP(ST, uint8_t, x);                                              \
    case TFS_DTYPE_UINT16: CAST_LOOP(ST, uint16_t, x);                                             \
    case TFS_DTYPE_UINT32: CAST_LOOP(ST, uint32_t, x);                                             \
    case TFS_DTYPE_UINT64: CAST_LOOP(ST, uint64_t, x);                                             \
    default:               return false;                                                           \
    }

#define CAST_FROM_FLOAT(ST)                                                                        \
    switch (dt) {                                                                                  \
    case TFS_DTYPE_FLOAT:  CAST_LOOP(ST, float, x);                                                \
    case TFS_DTYPE_DOUBLE: CAST_LOOP(ST, double, x);                                               \
    case TFS_DTYPE_BOOL:   CAST_LOOP(ST, bool, x != 0);                                            \
    case TFS_DTYPE_INT8:   CAST_LOOP(ST, int8_t, float_to_int(x, INT8_MIN, INT8_MAX));             \
    case TFS_DTYPE_INT16:  CAST_LOOP(ST, int16_t, float_to_int(x, INT16_MIN, INT16_MAX));          \
    case TFS_DTYPE_INT32:  CAST_LOOP(ST, int32_t, float_to_int(x, INT32_MIN, INT32_MAX));          \
    case TFS_DTYPE_INT64:  CAST_LOOP(ST, int64_t, float_to_int(x, INT64_MIN, INT64_MAX));          \
    case TFS_DTYPE_UINT8:  CAST_LOOP(ST, uint8_t, float_to_int(x, 0, UINT8_MAX));                  \
    case TFS_DTYPE_UINT16: CAST_LOOP(ST, uint16_t, float_to_int(x, 0, UINT16_MAX));                \
    case TFS_DTYPE_UINT32: CAST_LOOP(ST, uint32_t, float_to_int(x, 0, UINT32_MAX));                \
    case TFS_DTYPE_UINT64: CAST_LOOP(ST, uint64_t, float_to_uint64(x));                            \
    default:               return false;                                                           \
    }

/* Converts n elements of dtype st_ at src into dtype dt at dst; false for an unsupported pair. */
static bool cast_elements(enum tfs_dtype st_, const void *src, enum tfs_dtype dt, void *dst,
                          int64_t n)
{
    switch (st_) {
    case TFS_DTYPE_FLOAT:  CAST_FROM_FLOAT(float)
    case TFS_DTYPE_DOUBLE: CAST_FROM_FLOAT(double)
    case TFS_DTYPE_BOOL:   CAST_FROM_INT(bool)
    case TFS_DTYPE_INT8:   CAST_FROM_INT(int8_t)
    case TFS_DTYPE_INT16:  CAST_FROM_INT(int16_t)
    case TFS_DTYPE_INT32:  CAST_FROM_INT(int32_t)
    case TFS_DTYPE_INT64:  CAST_FROM_INT(int64_t)
    case TFS_DTYPE_UINT8:  CAST_FROM_INT(uint8_t)
    case TFS_DTYPE_UINT16: CAST_FROM_INT(uint16_t)
    case TFS_DTYPE_UINT32: CAST_FROM_INT(uint32_t)
    case TFS_DTYPE_UINT64: CAST_FROM_INT(uint64_t)
    default:               return false;
    }
}

enum tfs_code tfs__k_cast(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype src_t, dst_t;
    enum tfs_code rc = tfs__attr_type(n, "SrcT", &src_t, st);
    if (rc == TFS_OK)
        rc = tfs__attr_type(n, "DstT", &dst_t, st);
    if (rc != TFS_OK)
        return rc;
    /* Attr Truncate only changes rounding into half/bfloat16, which Cast does not support yet. */
    const tfs_tensor *in = k->in[0];
    if (in->dtype != src_t)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input has dtype %s, but attr SrcT is %s",
                             tfs_dtype_short_name(in->dtype), tfs_dtype_short_name(src_t));
    if (src_t == dst_t) {
        k->out[0] = tfs_tensor_ref(k->in[0]);
        return TFS_OK;
    }
    tfs_tensor *out = NULL;
    if ((rc = tfs__kernel_output(k, 0, dst_t, in->rank, in->dims, &out, st)) != TFS_OK)
        return rc;
    if (!cast_elements(src_t, in->data, dst_t, out->data, in->nelem)) {
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "Cast %s to %s is not supported",
                             tfs_dtype_short_name(src_t), tfs_dtype_short_name(dst_t));
    }
    k->out[0] = out;
    return TFS_OK;
}
