/* CPU kernels for the fused ops the graph rewrites produce (runtime/rewrite-fuse.c), with
 * TensorFlow's names, inputs and attrs (the ops grappler's remapper makes):
 *
 *   _FusedMatMul(a, b, args...)  attrs T, transpose_a, transpose_b, num_args, fused_ops,
 *                                epsilon, leakyrelu_alpha
 *   _FusedConv2D(input, filter, args...)  attrs T, num_args, strides, padding,
 *                                explicit_paddings, data_format, dilations, use_cudnn_on_gpu,
 *                                fused_ops, epsilon, leakyrelu_alpha
 *
 * fused_ops is ["BiasAdd"] (args: bias [C]) or, for _FusedConv2D, ["FusedBatchNorm"] (args:
 * scale, offset, mean, variance [C]; y = (x - mean) * scale * rsqrt(variance + epsilon) + offset
 * as the inference FusedBatchNorm kernel computes it), optionally followed by one activation:
 * "Relu", "Relu6", "Elu" or "LeakyRelu" (slope leakyrelu_alpha). float only, as TensorFlow's CPU
 * kernels; other combinations are UNIMPLEMENTED.
 *
 * The product goes through the same GEMM calls as MatMul's and Conv2D's kernels, and the bias and
 * activation are applied to the GEMM's output rows with the very expressions of the BiasAdd,
 * FusedBatchNorm and activation kernels, so a fused node computes the same bits as the nodes it
 * replaces. Conv2D applies them per chunk of rows right after that chunk's GEMM (still in cache;
 * tfs__nn_conv2d); MatMul makes one GEMM (as MatMul does) then one pass over its output. The pass
 * is split over rows with tfs__parallel_for.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"

enum act { ACT_NONE, ACT_RELU, ACT_RELU6, ACT_ELU, ACT_LEAKY_RELU };

typedef struct epilogue {
    const float *bias;     /* BiasAdd: [C] */
    const float *mean;     /* FusedBatchNorm: [C], with fac and offset */
    const float *offset;
    float       *fac;      /* scale * rsqrt(variance + epsilon), computed per call */
    enum act     act;
    float        alpha;    /* LeakyRelu */
    float       *rows;     /* the chunk being processed (set per call) */
    int64_t      n_cols;
} epilogue;

/* Parses fused_ops: the first op (BiasAdd or FusedBatchNorm) and the activation. */
static enum tfs_code parse_fused_ops(const tfs_node *n, bool allow_bn, bool *bn, enum act *act,
                                     tfs_status *st)
{
    const tfs_attr_list *ops;
    enum tfs_code rc = tfs__attr_list(n, "fused_ops", TFS_ATTR_S, &ops, st);
    if (rc != TFS_OK)
        return rc;
    *act = ACT_NONE;
    *bn = false;
    bool ok = ops->n == 1 || ops->n == 2;
    if (ok) {
        const char *first = ops->s[0].data ? ops->s[0].data : "";
        *bn = allow_bn && !strcmp(first, "FusedBatchNorm");
        ok = *bn || !strcmp(first, "BiasAdd");
    }
    if (ok && ops->n == 2) {
        static const char *const names[] = {"Relu", "Relu6", "Elu", "LeakyRelu"};
        static const enum act acts[] = {ACT_RELU, ACT_RELU6, ACT_ELU, ACT_LEAKY_RELU};
        const char *second = ops->s[1].data ? ops->s[1].data : "";
        ok = false;
        for (int i = 0; i < 4 && !ok; i++)
            if (!strcmp(second, names[i])) {
                *act = acts[i];
                ok = true;
            }
    }
    if (!ok) {
        char list[160] = "";
        size_t len = 0;
        for (int i = 0; i < ops->n && len < sizeof list; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
                                    ops->s[i].data ? ops->s[i].data : "");
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "fused_ops [%s] is not supported", list);
    }
    return TFS_OK;
}

/* Reads num_args, epsilon and leakyrelu_alpha and checks the args: count, dtype, shape [C]. */
static enum tfs_code setup_epilogue(tfs_kernel_ctx *k, bool bn, enum act act, int64_t C,
                                    epilogue *e, tfs_status *st)
{
    const tfs_node *n = k->node;
    int64_t num_args;
    float eps;
    enum tfs_code rc = tfs__attr_int(n, "num_args", &num_args, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_float(n, "epsilon", 1e-4f, &eps, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_float(n, "leakyrelu_alpha", 0.2f, &e->alpha, st);
    if (rc != TFS_OK)
        return rc;
    int want = bn ? 4 : 1;
    if (num_args != want || k->n_in != 2 + want)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s needs num_args = %d and %d inputs, "
                             "has num_args = %lld and %d inputs", bn ? "FusedBatchNorm" : "BiasAdd",
                             want, 2 + want, (long long)num_args, k->n_in);
    for (int i = 2; i < k->n_in; i++) {
        const tfs_tensor *t = k->in[i];
        char buf[128];
        if (t->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input %d has dtype %s, not float",
                                 i, tfs_dtype_short_name(t->dtype));
        if (t->rank != 1 || t->dims[0] != C)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "input %d must have shape [%lld] (the output channels), got %s", i,
                                 (long long)C, tfs_shape_str(t->rank, t->dims, buf, sizeof buf));
    }
    e->act = act;
    e->n_cols = C;
    if (!bn) {
        e->bias = k->in[2]->data;
        return TFS_OK;
    }
    const float *scale = k->in[2]->data, *var = k->in[5]->data;
    e->offset = k->in[3]->data;
    e->mean = k->in[4]->data;
    if (!(e->fac = tfs_malloc(((size_t)C + 1) * sizeof *e->fac)))
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    for (int64_t c = 0; c < C; c++)   /* as the FusedBatchNorm kernel computes it (nn-norm.c) */
        e->fac[c] = 1.0f / sqrtf(var[c] + eps) * scale[c];
    return TFS_OK;
}

/* Rows [r0, r1) of e->rows: bias or batch norm, then the activation (the expressions of the
 * BiasAdd, FusedBatchNorm and activation kernels). */
TFS_SIMD_CLONES static void epilogue_range(void *arg, int64_t r0, int64_t r1)
{
    const epilogue *e = arg;
    int64_t C = e->n_cols;
    for (int64_t r = r0; r < r1; r++) {
        float *y = e->rows + r * C;
        if (e->bias) {
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] + e->bias[c];
        } else {
            for (int64_t c = 0; c < C; c++)
                y[c] = (y[c] - e->mean[c]) * e->fac[c] + e->offset[c];
        }
        switch (e->act) {
        case ACT_RELU:
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] < 0 ? 0.0f : y[c];
            break;
        case ACT_RELU6:
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] < 0 ? 0.0f : y[c] > 6 ? 6.0f : y[c];
            break;
        case ACT_ELU:
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] < 0 ? expm1f(y[c]) : y[c];
            break;
        case ACT_LEAKY_RELU:
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] > 0 ? y[c] : y[c] * e->alpha;
            break;
        default:
            break;
        }
    }
}

/* Applies the epilogue to n_rows rows of C floats. Conv2D may call it from several threads at
 * once (for disjoint rows), so the rows go into a copy of the epilogue. */
static void epilogue_rows(void *arg, void *rows, int64_t n_rows, int64_t n_cols)
{
    epilogue e = *(const epilogue *)arg;
    e.rows = rows;
    e.n_cols = n_cols;
    int64_t grain = n_cols > 0 ? (16384 + n_cols - 1) / n_cols : 1;   /* ~64 KiB per range */
    tfs__parallel_for(n_rows, grain, epilogue_range, &e);
}

static enum tfs_code check_float(const tfs_node *n, tfs_status *st)
{
    enum tfs_dtype T;
    enum tfs_code rc = tfs__attr_type(n, "T", &T, st);
    if (rc == TFS_OK && T != TFS_DTYPE_FLOAT)
        rc = tfs__node_err(n, st, TFS_UNIMPLEMENTED, "%s is not supported for dtype %s",
                           n->op_type, tfs_dtype_short_name(T));
    return rc;
}

enum tfs_code tfs__k_fused_conv2d(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    bool bn;
    enum act act;
    epilogue e = {0};
    enum tfs_code rc = check_float(n, st);
    if (rc == TFS_OK)
        rc = parse_fused_ops(n, true, &bn, &act, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in < 2 || k->in[1]->rank != 4) {
        char buf[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "filter must be 4-dimensional, got %s",
                             k->n_in < 2 ? "no filter"
                                         : tfs_shape_str(k->in[1]->rank, k->in[1]->dims, buf,
                                                         sizeof buf));
    }
    if ((rc = setup_epilogue(k, bn, act, k->in[1]->dims[3], &e, st)) == TFS_OK)
        rc = tfs__nn_conv2d(k, epilogue_rows, &e, st);
    tfs_free(e.fac);
    return rc;
}

enum tfs_code tfs__k_fused_mat_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    bool ta, tb, bn;
    enum act act;
    epilogue e = {0};
    enum tfs_code rc = check_float(n, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "transpose_a", false, &ta, st);
    if (rc == TFS_OK)
        rc = tfs__nn_attr_bool(n, "transpose_b", false, &tb, st);
    if (rc == TFS_OK)
        rc = parse_fused_ops(n, false, &bn, &act, st);
    if (rc != TFS_OK)
        return rc;
    char sa[128], sb[128];
    const tfs_tensor *a = k->n_in >= 2 ? k->in[0] : NULL, *b = k->n_in >= 2 ? k->in[1] : NULL;
    if (!a)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects at least 2 inputs, has %d",
                             k->n_in);
    for (int i = 0; i < 2; i++)
        if (k->in[i]->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input %d has dtype %s, not float",
                                 i, tfs_dtype_short_name(k->in[i]->dtype));
    if (a->rank != 2 || b->rank != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "In[0] and In[1] must be matrices, got %s and %s",
                             tfs_shape_str(a->rank, a->dims, sa, sizeof sa),
                             tfs_shape_str(b->rank, b->dims, sb, sizeof sb));
    int64_t m = a->dims[ta ? 1 : 0], ka = a->dims[ta ? 0 : 1];
    int64_t kb = b->dims[tb ? 1 : 0], nn = b->dims[tb ? 0 : 1];
    if (ka != kb)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                             tfs_shape_str(a->rank, a->dims, sa, sizeof sa),
                             tfs_shape_str(b->rank, b->dims, sb, sizeof sb));
    for (int i = 0; i < 2; i++) {
        const tfs_tensor *t = k->in[i];
        if (t->dims[0] > INT_MAX || t->dims[1] > INT_MAX)
            return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                                 "input %d: matrix dimensions above %d are not supported", i,
                                 INT_MAX);
    }
    if ((rc = setup_epilogue(k, bn, act, nn, &e, st)) != TFS_OK)
        return rc;
    tfs_tensor *out = NULL;
    int64_t dims[2] = {m, nn};
    /* An empty inner dimension makes no gemm call: the zeros must come from the allocation. */
    if ((rc = (ka == 0 ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, TFS_DTYPE_FLOAT, 2,
                                                                        dims, &out, st)) != TFS_OK)
        return rc;
    /* The call MatMul makes (sgemm with beta 0 writes every element of out). */
    if (m > 0 && nn > 0 && ka > 0)
        tfs__sgemm(ta, tb, m, nn, ka, 1.0f, a->data, a->dims[1], b->data, b->dims[1], 0.0f,
                   out->data, nn);
    if (out->nelem > 0)
        epilogue_rows(&e, out->data, m, nn);
    k->out[0] = out;
    return TFS_OK;
}
