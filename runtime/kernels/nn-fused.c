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
 * "Relu", "Relu6", "Elu" or "LeakyRelu" (slope leakyrelu_alpha). _FusedConv2D also takes
 * ["BiasAdd", "Add"] and ["BiasAdd", "Add", activation] (args: bias, then the tensor added: the
 * names TensorFlow's oneDNN remapper gives a residual connection), computing
 * act(Add(BiasAdd(conv, bias), side)). float only; other combinations are UNIMPLEMENTED.
 *
 * The product goes through the same GEMM calls as MatMul's and Conv2D's kernels, and the bias and
 * activation are applied to the GEMM's output rows with the very expressions of the BiasAdd,
 * FusedBatchNorm, Add and activation kernels, so a fused node computes the same bits as the nodes
 * it replaces (float addition is commutative, so the side of the Add the product was on does not
 * matter). A bias, an added tensor of the output's own shape and Relu or Relu6 go into the GEMM
 * (tfs_gemm_epi), whose micro-kernel applies them to each value before storing it, which is
 * faster (ResNet-50's inference; figures in bench/README.md) since the outputs are not read
 * back and written again. A batch norm, Elu or LeakyRelu takes a pass over the output rows
 * instead: Conv2D's per chunk of rows right after that chunk's GEMM (still in cache;
 * tfs__nn_conv2d), MatMul's after its one GEMM, split over rows
 * with tfs__parallel_for. An added tensor of any other shape (one that broadcasts) takes the
 * general route: the product with its bias first, then Add's broadcasting into a new output,
 * then the activation.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/kernels/math-impl.h"

enum act { ACT_NONE, ACT_RELU, ACT_RELU6, ACT_ELU, ACT_LEAKY_RELU };

typedef struct epilogue {
    const float *bias;     /* BiasAdd: [C] */
    const float *mean;     /* FusedBatchNorm: [C], with fac and offset */
    const float *offset;
    float       *fac;      /* scale * rsqrt(variance + epsilon), computed per call */
    const float *side;     /* Add: the tensor added, shaped as the output (NULL: none) */
    enum act     act;
    float        alpha;    /* LeakyRelu */
    float       *rows;     /* the chunk being processed (set per call) */
    const float *side_rows;   /* side's rows of that chunk */
    int64_t      n_cols;
} epilogue;

/* Parses fused_ops: the first op (BiasAdd or FusedBatchNorm), an Add after BiasAdd (allow_add),
 * and the activation. */
static enum tfs_code parse_fused_ops(const tfs_node *n, bool allow_bn, bool allow_add, bool *bn,
                                     bool *add, enum act *act, tfs_status *st)
{
    const tfs_attr_list *ops;
    enum tfs_code rc = tfs__attr_list(n, "fused_ops", TFS_ATTR_S, &ops, st);
    if (rc != TFS_OK)
        return rc;
    *act = ACT_NONE;
    *bn = *add = false;
    int i = 0;
    bool ok = ops->n >= 1 && ops->n <= 3;
    if (ok) {
        const char *first = ops->s[0].data ? ops->s[0].data : "";
        *bn = allow_bn && !strcmp(first, "FusedBatchNorm");
        ok = *bn || !strcmp(first, "BiasAdd");
        i = 1;
    }
    if (ok && !*bn && allow_add && i < ops->n && ops->s[i].data && !strcmp(ops->s[i].data, "Add")) {
        *add = true;
        i++;
    }
    if (ok && i < ops->n) {
        static const char *const names[] = {"Relu", "Relu6", "Elu", "LeakyRelu"};
        static const enum act acts[] = {ACT_RELU, ACT_RELU6, ACT_ELU, ACT_LEAKY_RELU};
        const char *name = ops->s[i].data ? ops->s[i].data : "";
        ok = false;
        for (int j = 0; j < 4 && !ok; j++)
            if (!strcmp(name, names[j])) {
                *act = acts[j];
                ok = true;
            }
        i++;
    }
    if (!ok || i != ops->n) {
        char list[160] = "";
        size_t len = 0;
        for (int j = 0; j < ops->n && len < sizeof list; j++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", j ? ", " : "",
                                    ops->s[j].data ? ops->s[j].data : "");
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED, "fused_ops [%s] is not supported", list);
    }
    return TFS_OK;
}

/* Reads num_args, epsilon and leakyrelu_alpha and checks the args: count, dtype, shape [C] (the
 * tensor an Add adds: float, any shape; the caller decides how it is added). */
static enum tfs_code setup_epilogue(tfs_kernel_ctx *k, bool bn, bool add, enum act act, int64_t C,
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
    int want = bn ? 4 : add ? 2 : 1;
    if (num_args != want || k->n_in != 2 + want)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s needs num_args = %d and %d inputs, "
                             "has num_args = %lld and %d inputs",
                             bn ? "FusedBatchNorm" : add ? "BiasAdd + Add" : "BiasAdd", want,
                             2 + want, (long long)num_args, k->n_in);
    for (int i = 2; i < k->n_in; i++) {
        const tfs_tensor *t = k->in[i];
        char buf[128];
        if (t->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input %d has dtype %s, not float",
                                 i, tfs_dtype_short_name(t->dtype));
        if (add && i == 3)
            continue;
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

/* Rows [r0, r1) of e->rows: bias or batch norm (or neither), the added tensor (if any), then the
 * activation (the expressions of the BiasAdd, FusedBatchNorm, Add and activation kernels). */
TFS_SIMD_CLONES static void epilogue_range(void *arg, int64_t r0, int64_t r1)
{
    const epilogue *e = arg;
    int64_t C = e->n_cols;
    for (int64_t r = r0; r < r1; r++) {
        float *y = e->rows + r * C;
        if (e->bias) {
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] + e->bias[c];
        } else if (e->mean) {
            for (int64_t c = 0; c < C; c++)
                y[c] = (y[c] - e->mean[c]) * e->fac[c] + e->offset[c];
        }
        if (e->side_rows) {
            const float *x = e->side_rows + r * C;
            for (int64_t c = 0; c < C; c++)
                y[c] = y[c] + x[c];
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
static void epilogue_rows(void *arg, void *rows, int64_t row0, int64_t n_rows, int64_t n_cols)
{
    epilogue e = *(const epilogue *)arg;
    e.rows = rows;
    e.side_rows = e.side ? e.side + row0 * n_cols : NULL;
    e.n_cols = n_cols;
    int64_t grain = n_cols > 0 ? (16384 + n_cols - 1) / n_cols : 1;   /* ~64 KiB per range */
    tfs__parallel_for(n_rows, grain, epilogue_range, &e);
}

/* The epilogue as the GEMM applies it to each tile (tfs_gemm_epi: a bias, an added tensor of the
 * output's shape with rows of n_cols, Relu or Relu6), or false when it takes more (a batch norm,
 * another activation): then the pass over the output rows. */
static bool gemm_epilogue(const epilogue *e, int64_t n_cols, tfs_gemm_epi *ge)
{
    *ge = (tfs_gemm_epi){.bias = e->bias, .side = e->side, .ld_side = n_cols};
    if (!e->bias)   /* a batch norm */
        return false;
    switch (e->act) {
    case ACT_NONE:
        ge->act = TFS_GEMM_ACT_NONE;
        return true;
    case ACT_RELU:
        ge->act = TFS_GEMM_ACT_RELU;
        return true;
    case ACT_RELU6:
        ge->act = TFS_GEMM_ACT_RELU6;
        return true;
    default:
        return false;
    }
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

/* The general route of an Add whose tensor is not shaped as the product's output: Add's
 * broadcasting of k->out[0] (the product with its bias) and side into a new output, then act. */
static enum tfs_code add_broadcast(tfs_kernel_ctx *k, const tfs_tensor *side, enum act act,
                                   float alpha, tfs_status *st)
{
    tfs_tensor *y = k->out[0], *res = NULL;
    tfs_bcast bc;
    enum tfs_code rc = tfs__bcast_init(y, side, NULL, &bc, st);
    if (rc == TFS_OK)
        rc = tfs_tensor_new(TFS_DTYPE_FLOAT, bc.out_rank, bc.out_dims, &res, st);
    if (rc != TFS_OK) {
        char why[sizeof st->msg];
        snprintf(why, sizeof why, "%s", st->msg);
        tfs_tensor_unref(y);
        k->out[0] = NULL;
        return tfs__node_err(k->node, st, rc, "%s", why);
    }
    const float *A = y->data, *B = side->data;
    float *O = res->data;
    TFS_BCAST_WALK(&bc, res->nelem, O[o] = A[pa] + B[pb]);
    int64_t C = bc.out_dims[bc.out_rank - 1];
    if (act != ACT_NONE && res->nelem > 0) {
        epilogue e = {.act = act, .alpha = alpha};
        epilogue_rows(&e, res->data, 0, res->nelem / C, C);
    }
    tfs_tensor_unref(y);
    k->out[0] = res;
    return TFS_OK;
}

enum tfs_code tfs__k_fused_conv2d(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    bool bn, add;
    enum act act;
    epilogue e = {0};
    enum tfs_code rc = check_float(n, st);
    if (rc == TFS_OK)
        rc = parse_fused_ops(n, true, true, &bn, &add, &act, st);
    if (rc != TFS_OK)
        return rc;
    if (k->n_in < 2 || k->in[1]->rank != 4) {
        char buf[128];
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "filter must be 4-dimensional, got %s",
                             k->n_in < 2 ? "no filter"
                                         : tfs_shape_str(k->in[1]->rank, k->in[1]->dims, buf,
                                                         sizeof buf));
    }
    const tfs_tensor *f = k->in[1];
    if ((rc = setup_epilogue(k, bn, add, act, f->dims[3], &e, st)) != TFS_OK)
        goto done;
    bool general = false;
    if (add) {
        /* The product's output shape decides the route: the added tensor joins the epilogue when
         * it has that very shape. */
        const tfs_tensor *side = k->in[3];
        tfs_nn_geom g;
        if ((rc = tfs__nn_geom_init(n, k->in[0], f->dims[0], f->dims[1], true, &g, st)) != TFS_OK)
            goto done;
        int64_t od[4] = {g.batch, g.out_h, g.out_w, f->dims[3]};
        general = side->rank != 4 || memcmp(side->dims, od, sizeof od) != 0;
        if (general)
            e.act = ACT_NONE;   /* applied after the Add */
        else
            e.side = side->data;
    }
    tfs_gemm_epi ge;
    bool in_gemm = gemm_epilogue(&e, f->dims[3], &ge);
    rc = tfs__nn_conv2d(k, epilogue_rows, &e, in_gemm ? &ge : NULL, e.side ? 3 : -1, st);
    if (rc == TFS_OK && general)
        rc = add_broadcast(k, k->in[3], act, e.alpha, st);
done:
    tfs_free(e.fac);
    return rc;
}

enum tfs_code tfs__k_fused_mat_mul(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    bool bn, add;
    enum act act;
    epilogue e = {0};
    enum tfs_code rc = check_float(n, st);
    if (rc == TFS_OK)
        rc = parse_fused_ops(n, false, false, &bn, &add, &act, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_tensor *a = k->n_in >= 2 ? k->in[0] : NULL, *b = k->n_in >= 2 ? k->in[1] : NULL;
    if (!a)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects at least 2 inputs, has %d",
                             k->n_in);
    for (int i = 0; i < 2; i++)
        if (k->in[i]->dtype != TFS_DTYPE_FLOAT)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input %d has dtype %s, not float",
                                 i, tfs_dtype_short_name(k->in[i]->dtype));
    tfs_nn_matmul mm;
    if ((rc = tfs__nn_matmul_dims(n, a, b, &mm, st)) != TFS_OK)
        return rc;
    bool ta = mm.ta, tb = mm.tb;
    int64_t m = mm.m, nn = mm.n, ka = mm.k;
    if ((rc = setup_epilogue(k, bn, false, act, nn, &e, st)) != TFS_OK)
        return rc;
    tfs_tensor *out = NULL;
    int64_t dims[2] = {m, nn};
    /* An empty inner dimension makes no gemm call: the zeros must come from the allocation. */
    if ((rc = (ka == 0 ? tfs__kernel_output_zeroed : tfs__kernel_output)(k, 0, TFS_DTYPE_FLOAT, 2,
                                                                        dims, &out, st)) != TFS_OK)
        return rc;
    /* The call MatMul makes (sgemm with beta 0 writes every element of out), with the epilogue
     * inside when it can take it. */
    tfs_gemm_epi ge;
    bool in_gemm = gemm_epilogue(&e, nn, &ge) && ka > 0;
    if (m > 0 && nn > 0 && ka > 0)
        tfs__sgemm_epi(ta, tb, m, nn, ka, a->data, a->dims[1],
                       tfs__input_is_const(k, 1) ? b : NULL, b->data, b->dims[1], out->data, nn,
                       in_gemm ? &ge : NULL);
    if (out->nelem > 0 && !in_gemm)
        epilogue_rows(&e, out->data, 0, m, nn);
    k->out[0] = out;
    return TFS_OK;
}
