/* Rewrite passes that change kernels: FusedBatchNorm folded into the preceding convolution's
 * filter, and MatMul/Conv2D + BiasAdd (+ activation) fused into _FusedMatMul/_FusedConv2D
 * (kernels/nn-fused.c). rewrite.c runs them after constant folding, so weights that come from
 * frozen variables are Consts by then.
 *
 * BatchNorm folding. In inference (is_training false) FusedBatchNorm computes, per channel c,
 *     y = (x - mean[c]) * f[c] + offset[c],   f[c] = scale[c] / sqrt(variance[c] + epsilon)
 * and when x is a convolution with a constant filter W (and maybe a constant bias b) this is a
 * convolution with filter W[..., c] * f[c] plus a bias (b[c] - mean[c]) * f[c] + offset[c]. The
 * pattern Conv2D|DepthwiseConv2dNative [-> BiasAdd] -> FusedBatchNorm{,V2,V3} (NHWC, float, the
 * intermediate results used by nothing else, the statistics outputs unused) becomes the
 * convolution with a new filter Const followed by a BiasAdd with a new bias Const; the BiasAdd
 * takes the FusedBatchNorm's name, so its consumers and a fetch of it are unchanged. f is computed
 * as the FusedBatchNorm kernel computes it, in float; the results differ from the unfolded graph
 * only by rounding (the products are rounded once more), within 1e-5 relative in the tests.
 *
 * Fusion. BiasAdd(MatMul(a, b), bias) -> _FusedMatMul(a, b, bias) with fused_ops ["BiasAdd"], and
 * when the BiasAdd's only consumer is Relu, Relu6, Elu or LeakyRelu, that too (["BiasAdd",
 * "Relu"] ...); the same for Conv2D (NHWC) -> _FusedConv2D. The fused node takes the last node's
 * name and the product's attrs. Intermediates must have no other use (data or control) and no
 * protected name. The fused kernels compute the same bits as the nodes they replace.
 *
 * Residual Add. Then Add|AddV2(c, x) or (x, c), where c is such a _FusedConv2D with fused_ops
 * ["BiasAdd"] used only by the Add, becomes _FusedConv2D(input, filter, bias, x) with fused_ops
 * ["BiasAdd", "Add"], and with the Add's only consumer when that is an activation, ["BiasAdd",
 * "Add", act] (the names TensorFlow's oneDNN remapper uses): ResNet's block ends. Shapes are not
 * known here; the kernel adds x in its epilogue when x has the product's shape and otherwise
 * broadcasts as Add does, so the graph means what it meant.
 */
#include <math.h>
#include <string.h>

#include "runtime/rewrite-impl.h"

#define STR(lit) {sizeof(lit) - 1, (char *)(lit)}

/* Literal attr values the passes set (borrowed by the nodes until emitted). */
static tfs_string NHWC = STR("NHWC");
/* fused_ops for BiasAdd [+ Add] [+ activation]: [with Add][activation: none, then ACTS]. */
static const char *const ACTS[] = {"Relu", "Relu6", "Elu", "LeakyRelu"};
static tfs_string FUSED_OPS[2][5][3] = {
    {{STR("BiasAdd")},
     {STR("BiasAdd"), STR("Relu")},
     {STR("BiasAdd"), STR("Relu6")},
     {STR("BiasAdd"), STR("Elu")},
     {STR("BiasAdd"), STR("LeakyRelu")}},
    {{STR("BiasAdd"), STR("Add")},
     {STR("BiasAdd"), STR("Add"), STR("Relu")},
     {STR("BiasAdd"), STR("Add"), STR("Relu6")},
     {STR("BiasAdd"), STR("Add"), STR("Elu")},
     {STR("BiasAdd"), STR("Add"), STR("LeakyRelu")}},
};

static bool is_op(const tfs_rw_graph *rw, int node, const char *op)
{
    return !strcmp(rw->nodes[node].op, op);
}

/* Used exactly once, through data input 0 of output 0 of some node, and not protected. */
static bool sole_use(const tfs_rw_graph *rw, int node)
{
    if (rw->nodes[node].flags & TFS_RW_PROTECTED)
        return false;
    if (rw->use_start[node + 1] - rw->use_start[node] != 1)
        return false;
    const tfs_rw_use *u = &rw->uses[rw->use_start[node]];
    return u->input >= 0 && rw->nodes[u->node].in[u->input].index == 0;
}

static bool is_float(const tfs_rw_graph *rw, int node, const char *attr)
{
    return tfs__rw_attr_type(rw, node, attr) == TFS_DTYPE_FLOAT;
}

static bool nhwc(const tfs_rw_graph *rw, int node)
{
    const char *f = tfs__rw_attr_str(rw, node, "data_format", "NHWC");
    return f && !strcmp(f, "NHWC");
}

/* The float vector of length C that edge e carries when it is a Const, else NULL. */
static const float *const_vector(const tfs_rw_graph *rw, tfs_edge e, int64_t C)
{
    const tfs_tensor *t = e.index == 0 ? tfs__rw_const_value(rw, e.node) : NULL;
    bool ok = t && t->dtype == TFS_DTYPE_FLOAT && t->rank == 1 && t->dims[0] == C;
    return ok ? t->data : NULL;
}

/* ---- BatchNorm folding ----------------------------------------------------------------------- */

static bool is_batch_norm(const char *op)
{
    return !strcmp(op, "FusedBatchNorm") || !strcmp(op, "FusedBatchNormV2") ||
           !strcmp(op, "FusedBatchNormV3");
}

/* A FusedBatchNorm that can fold into a convolution: fills conv, bias (the BiasAdd between them,
 * or -1) and the channel count. */
static bool bn_foldable(const tfs_rw_graph *rw, int bn, int *conv, int *bias, int64_t *C)
{
    const tfs_rw_node *n = &rw->nodes[bn];
    bool training;
    if ((n->flags & (TFS_RW_FED | TFS_RW_FETCHED_MORE)) || n->n_in != 5 || n->in[0].index != 0)
        return false;
    if (!tfs__rw_attr_bool(rw, bn, "is_training", true, &training) || training ||
        !nhwc(rw, bn) || !is_float(rw, bn, "T"))
        return false;
    if (tfs__rw_attr(rw, bn, "U") && !is_float(rw, bn, "U"))
        return false;
    for (int j = 1; j < n->n_out; j++)
        if (tfs__rw_data_uses(rw, bn, j) > 0)
            return false;   /* the statistics are used */
    int p = n->in[0].node;
    *bias = -1;
    if (is_op(rw, p, "BiasAdd")) {
        if (!sole_use(rw, p) || !nhwc(rw, p) || !is_float(rw, p, "T") ||
            rw->nodes[p].n_in != 2 || rw->nodes[p].in[0].index != 0)
            return false;
        *bias = p;
        p = rw->nodes[p].in[0].node;
    }
    bool depthwise = is_op(rw, p, "DepthwiseConv2dNative");
    if ((!depthwise && !is_op(rw, p, "Conv2D")) || !sole_use(rw, p) || !nhwc(rw, p) ||
        !is_float(rw, p, "T") || rw->nodes[p].n_in != 2)
        return false;
    const tfs_tensor *w = rw->nodes[p].in[1].index == 0
                              ? tfs__rw_const_value(rw, rw->nodes[p].in[1].node) : NULL;
    if (!w || w->dtype != TFS_DTYPE_FLOAT || w->rank != 4 || w->nelem == 0)
        return false;
    *conv = p;
    *C = depthwise ? w->dims[2] * w->dims[3] : w->dims[3];
    for (int i = 1; i < 5; i++)
        if (!const_vector(rw, n->in[i], *C))
            return false;
    return *bias < 0 || const_vector(rw, rw->nodes[*bias].in[1], *C);
}

/* Makes the folded filter and bias Consts; ids in *wc, *bc. */
static enum tfs_code bn_constants(tfs_rw_graph *rw, int bn, int conv, int bias, int64_t C,
                                  int *wc, int *bc, tfs_status *st)
{
    const tfs_rw_node *n = &rw->nodes[bn];
    const float *scale = const_vector(rw, n->in[1], C), *offset = const_vector(rw, n->in[2], C);
    const float *mean = const_vector(rw, n->in[3], C), *var = const_vector(rw, n->in[4], C);
    const float *b = bias >= 0 ? const_vector(rw, rw->nodes[bias].in[1], C) : NULL;
    const tfs_tensor *w = tfs__rw_const_value(rw, rw->nodes[conv].in[1].node);
    float eps;
    tfs__rw_attr_float(rw, bn, "epsilon", 1e-4f, &eps);
    tfs_tensor *nw = NULL, *nb = NULL;
    float *fac = tfs_malloc((size_t)C * sizeof *fac);
    enum tfs_code rc = TFS_OK;
    if (!fac) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding a batch norm");
        goto done;
    }
    if ((rc = tfs_tensor_new(TFS_DTYPE_FLOAT, w->rank, w->dims, &nw, st)) != TFS_OK ||
        (rc = tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &C, &nb, st)) != TFS_OK)
        goto done;
    for (int64_t c = 0; c < C; c++)   /* as the FusedBatchNorm kernel (nn-norm.c) */
        fac[c] = 1.0f / sqrtf(var[c] + eps) * scale[c];
    /* The output channel of a filter element is its index modulo C, for Conv2D [kh,kw,in,C] and
     * for DepthwiseConv2dNative [kh,kw,in,mult] (channel in * mult + m) alike. */
    const float *W = w->data;
    float *NW = nw->data, *NB = nb->data;
    for (int64_t i = 0; i < w->nelem; i++)
        NW[i] = W[i] * fac[i % C];
    for (int64_t c = 0; c < C; c++)
        NB[c] = (float)(((b ? (double)b[c] : 0.0) - mean[c]) * fac[c] + offset[c]);
    *wc = tfs__rw_add(rw, rw->nodes[conv].name, "/folded_filter", "Const");
    *bc = *wc < 0 ? -1 : tfs__rw_add(rw, rw->nodes[bn].name, "/folded_bias", "Const");
    if (*bc < 0) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding a batch norm");
        goto done;
    }
    tfs__rw_make_const(rw, *wc, nw);
    tfs__rw_make_const(rw, *bc, nb);
done:
    tfs_free(fac);
    tfs_tensor_unref(nw);
    tfs_tensor_unref(nb);
    return rc;
}

enum tfs_code tfs__rw_fold_batch_norms(tfs_rw_graph *rw, tfs_status *st)
{
    enum tfs_code rc = tfs__rw_uses(rw, st);
    int n0 = rw->n;
    for (int id = 0; rc == TFS_OK && id < n0; id++) {
        int conv = -1, bias = -1, wc = -1, bc = -1;
        int64_t C;
        if (!rw->nodes[id].alive || !is_batch_norm(rw->nodes[id].op) ||
            !bn_foldable(rw, id, &conv, &bias, &C))
            continue;
        if ((rc = bn_constants(rw, id, conv, bias, C, &wc, &bc, st)) != TFS_OK)
            break;
        rw->nodes[conv].in[1] = (tfs_edge){wc, 0};
        tfs_rw_node *n = &rw->nodes[id];
        n->op = "BiasAdd";
        n->def = tfs__op_lookup("BiasAdd");
        n->src = -1;
        n->n_attrs = 0;
        n->n_out = 1;
        n->n_in = 2;
        n->in[0] = (tfs_edge){conv, 0};
        n->in[1] = (tfs_edge){bc, 0};
        tfs__rw_set_attr(n, "T", &(tfs_attr_value){.kind = TFS_ATTR_TYPE, .type = TFS_DTYPE_FLOAT});
        tfs__rw_set_attr(n, "data_format", &(tfs_attr_value){.kind = TFS_ATTR_S, .s = NHWC});
        if (bias >= 0) {
            rw->nodes[bias].alive = false;
            for (int i = 0; i < rw->nodes[bias].n_ctrl; i++)
                if (!tfs__rw_add_ctrl(rw, id, rw->nodes[bias].ctrl[i]))
                    rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory folding a batch norm");
        }
        rw->stats->batch_norms_folded++;
    }
    return rc;
}

/* ---- MatMul / Conv2D fusion ------------------------------------------------------------------ */

/* fused_ops for BiasAdd [+ Add] [+ act] (act NULL: none), n of them; NULL when act cannot be
 * fused. */
static const tfs_string *fused_ops_for(bool add, const char *act, int *n)
{
    int a = 0;
    if (act) {
        for (a = 1; a <= 4 && strcmp(act, ACTS[a - 1]); a++) {
        }
        if (a > 4)
            return NULL;
    }
    *n = 1 + add + (a > 0);
    return FUSED_OPS[add][a];
}

/* The product a BiasAdd can fuse with (MatMul or NHWC Conv2D, float, used only by it), or -1. */
static int fusable_base(const tfs_rw_graph *rw, int bias_add)
{
    const tfs_rw_node *b = &rw->nodes[bias_add];
    if ((b->flags & TFS_RW_FED) || b->n_in != 2 || b->in[0].index != 0 ||
        !is_float(rw, bias_add, "T"))
        return -1;
    int p = b->in[0].node;
    const char *fmt = tfs__rw_attr_str(rw, bias_add, "data_format", "NHWC");
    bool fmt_ok = fmt && (!strcmp(fmt, "NHWC") || !strcmp(fmt, "NCHW"));
    /* A BiasAdd of a matrix adds along its last axis in either data format. */
    bool mm = is_op(rw, p, "MatMul") && rw->opts->fuse_matmul && fmt_ok;
    bool conv = is_op(rw, p, "Conv2D") && rw->opts->fuse_conv2d && nhwc(rw, p) &&
                nhwc(rw, bias_add);
    if (!mm && !conv)
        return -1;
    if (!sole_use(rw, p) || !is_float(rw, p, "T") || rw->nodes[p].n_in != 2)
        return -1;
    return p;
}

/* The activation after a BiasAdd that can join the fusion, or -1. */
static int fusable_activation(const tfs_rw_graph *rw, int bias_add)
{
    if (!sole_use(rw, bias_add))
        return -1;
    int a = rw->uses[rw->use_start[bias_add]].node;
    const tfs_rw_node *n = &rw->nodes[a];
    int k;
    if (!n->alive || !fused_ops_for(false, n->op, &k) || (n->flags & TFS_RW_FED) || n->n_in != 1 ||
        !is_float(rw, a, "T"))
        return -1;
    return a;
}

/* Turns `tail` into `op` over the n_in inputs in[] (num_args = n_in - 2) with the attrs of base
 * (the product or the fused convolution), fused_ops BiasAdd [+ Add] [+ tail's activation when
 * tail is not mid], and the control inputs of base and mid (the BiasAdd or the Add); base, and
 * mid when it is not tail, die. */
static bool make_fused(tfs_rw_graph *rw, int tail, const char *op, int base, int mid,
                       const tfs_edge *in, int n_in, bool add)
{
    tfs_rw_node *t = &rw->nodes[tail];
    const tfs_rw_node *p = &rw->nodes[base], *m = &rw->nodes[mid];
    const char *act = tail != mid ? t->op : NULL;
    float alpha = 0.2f;
    if (act && !strcmp(act, "LeakyRelu"))
        tfs__rw_attr_float(rw, tail, "alpha", 0.2f, &alpha);
    int n_ops = 0;   /* act was checked by fusable_activation: ops is never NULL */
    const tfs_string *ops = fused_ops_for(add, act, &n_ops);
    t->n_in = 0;
    for (int i = 0; i < n_in; i++)
        if (!tfs__rw_add_input(rw, tail, in[i]))
            return false;
    for (int i = 0; i < p->n_ctrl; i++)
        if (!tfs__rw_add_ctrl(rw, tail, p->ctrl[i]))
            return false;
    if (tail != mid)
        for (int i = 0; i < m->n_ctrl; i++)
            if (!tfs__rw_add_ctrl(rw, tail, m->ctrl[i]))
                return false;
    t->op = op;
    t->def = tfs__op_lookup(t->op);
    t->src = p->src;
    t->n_attrs = 0;
    for (int i = 0; i < p->n_attrs; i++)
        tfs__rw_set_attr(t, p->attrs[i].name, &p->attrs[i].v);
    tfs_attr_value v = {.kind = TFS_ATTR_LIST,
                        .list = {.kind = TFS_ATTR_S, .n = n_ops, .s = (tfs_string *)ops}};
    tfs__rw_set_attr(t, "fused_ops", &v);
    tfs__rw_set_attr(t, "num_args", &(tfs_attr_value){.kind = TFS_ATTR_I, .i = n_in - 2});
    tfs__rw_set_attr(t, "epsilon", &(tfs_attr_value){.kind = TFS_ATTR_F, .f = 1e-4f});
    tfs__rw_set_attr(t, "leakyrelu_alpha", &(tfs_attr_value){.kind = TFS_ATTR_F, .f = alpha});
    t->n_out = 1;
    rw->nodes[base].alive = false;
    if (tail != mid)
        rw->nodes[mid].alive = false;
    return true;
}

/* Turns `tail` into the fused node of base -> bias_add [-> tail]. */
static bool fuse(tfs_rw_graph *rw, int base, int bias_add, int tail)
{
    const tfs_rw_node *p = &rw->nodes[base];
    tfs_edge in[3] = {p->in[0], p->in[1], rw->nodes[bias_add].in[1]};
    bool mm = is_op(rw, base, "MatMul");
    if (!make_fused(rw, tail, mm ? "_FusedMatMul" : "_FusedConv2D", base, bias_add, in, 3, false))
        return false;
    if (mm)
        rw->stats->matmuls_fused++;
    else
        rw->stats->conv2ds_fused++;
    return true;
}

enum tfs_code tfs__rw_fuse(tfs_rw_graph *rw, tfs_status *st)
{
    enum tfs_code rc = tfs__rw_uses(rw, st);
    for (int id = 0; rc == TFS_OK && id < rw->n; id++) {
        if (!rw->nodes[id].alive ||
            !(is_op(rw, id, "BiasAdd") || is_op(rw, id, "BiasAddV1")))
            continue;
        int base = fusable_base(rw, id);
        if (base < 0)
            continue;
        int act = fusable_activation(rw, id);
        if (!fuse(rw, base, id, act >= 0 ? act : id))
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory fusing nodes");
    }
    return rc;
}

/* ---- Residual Add ---------------------------------------------------------------------------- */

/* Input i of the Add is a _FusedConv2D ["BiasAdd"] (float, output 0) used by nothing else. */
static bool plain_fused_conv(const tfs_rw_graph *rw, int add, int i)
{
    tfs_edge e = rw->nodes[add].in[i];
    const tfs_rw_node *c = &rw->nodes[e.node];
    if (e.index != 0 || !c->alive || !is_op(rw, e.node, "_FusedConv2D") || c->n_in != 3 ||
        !sole_use(rw, e.node))
        return false;
    const tfs_attr_value *ops = tfs__rw_attr(rw, e.node, "fused_ops");
    return ops && ops->kind == TFS_ATTR_LIST && ops->list.kind == TFS_ATTR_S &&
           ops->list.n == 1 && ops->list.s[0].data && !strcmp(ops->list.s[0].data, "BiasAdd");
}

/* Turns `tail` (the Add, or the activation after it) into the conv with the Add (and act). */
static bool fuse_add(tfs_rw_graph *rw, int conv, int add, tfs_edge side, int tail)
{
    const tfs_rw_node *c = &rw->nodes[conv];
    tfs_edge in[4] = {c->in[0], c->in[1], c->in[2], side};
    if (!make_fused(rw, tail, "_FusedConv2D", conv, add, in, 4, true))
        return false;
    rw->stats->adds_fused++;
    return true;
}

enum tfs_code tfs__rw_fuse_add(tfs_rw_graph *rw, tfs_status *st)
{
    enum tfs_code rc = tfs__rw_uses(rw, st);   /* the conv fusion changed them */
    for (int id = 0; rc == TFS_OK && id < rw->n; id++) {
        const tfs_rw_node *a = &rw->nodes[id];
        if (!a->alive || !(is_op(rw, id, "Add") || is_op(rw, id, "AddV2")) || a->n_in != 2 ||
            (a->flags & TFS_RW_FED) || !is_float(rw, id, "T"))
            continue;
        int i = plain_fused_conv(rw, id, 0) ? 0 : plain_fused_conv(rw, id, 1) ? 1 : -1;
        if (i < 0)
            continue;
        int act = fusable_activation(rw, id);
        if (!fuse_add(rw, a->in[i].node, id, a->in[1 - i], act >= 0 ? act : id))
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory fusing nodes");
    }
    return rc;
}
