/* Layers (model.h) as graph nodes: Keras's names, static shapes per example, variables with
 * Keras's default initializers built from TensorFlow's random ops (seeded, so a run is
 * reproducible), and the forward pass in training or inference mode.
 *
 * DESIGN. Building is three passes over the layer list: plan (names and shapes, no graph, so
 * every configuration error is found before anything is built), variables (once per graph), and
 * forward (as often as needed: the training graph runs it twice, in training mode for the step
 * and in inference mode for evaluation, both reading the same variables through their
 * "<name>/read" Identity nodes, as TF1 graphs do).
 */
#include "train/model-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- specs ---------------------------------------------------------------------------------- */

static const char *const KIND_NAMES[TFS_LAYER_KIND_COUNT] = {
    [TFS_LAYER_DENSE] = "dense",
    [TFS_LAYER_CONV2D] = "conv2d",
    [TFS_LAYER_MAX_POOL2D] = "max_pooling2d",
    [TFS_LAYER_AVG_POOL2D] = "average_pooling2d",
    [TFS_LAYER_FLATTEN] = "flatten",
    [TFS_LAYER_DROPOUT] = "dropout",
    [TFS_LAYER_BATCH_NORM] = "batch_normalization",
    [TFS_LAYER_EMBEDDING] = "embedding",
    [TFS_LAYER_ACTIVATION] = "activation",
};

static const char *const ACT_NAMES[TFS_ACT_COUNT] = {
    [TFS_ACT_NONE] = "linear",       [TFS_ACT_RELU] = "relu", [TFS_ACT_RELU6] = "relu6",
    [TFS_ACT_SIGMOID] = "sigmoid",   [TFS_ACT_TANH] = "tanh", [TFS_ACT_SOFTMAX] = "softmax",
    [TFS_ACT_ELU] = "elu",           [TFS_ACT_SELU] = "selu", [TFS_ACT_LEAKY_RELU] = "leaky_relu",
    [TFS_ACT_SOFTPLUS] = "softplus",
};

static const char *const INIT_NAMES[TFS_INIT_COUNT] = {
    [TFS_INIT_DEFAULT] = "default",
    [TFS_INIT_ZEROS] = "zeros",
    [TFS_INIT_ONES] = "ones",
    [TFS_INIT_CONSTANT] = "constant",
    [TFS_INIT_RANDOM_NORMAL] = "random_normal",
    [TFS_INIT_TRUNCATED_NORMAL] = "truncated_normal",
    [TFS_INIT_RANDOM_UNIFORM] = "random_uniform",
    [TFS_INIT_GLOROT_UNIFORM] = "glorot_uniform",
    [TFS_INIT_GLOROT_NORMAL] = "glorot_normal",
    [TFS_INIT_HE_NORMAL] = "he_normal",
    [TFS_INIT_HE_UNIFORM] = "he_uniform",
};

bool tfs_activation_parse(const char *name, enum tfs_activation *out)
{
    for (int i = 0; i < TFS_ACT_COUNT; i++)
        if (name && !strcmp(name, ACT_NAMES[i])) {
            *out = (enum tfs_activation)i;
            return true;
        }
    if (name && !strcmp(name, "none")) {
        *out = TFS_ACT_NONE;
        return true;
    }
    return false;
}

const char *tfs_activation_name(enum tfs_activation a)
{
    return a >= 0 && a < TFS_ACT_COUNT ? ACT_NAMES[a] : "?";
}

bool tfs_init_parse(const char *name, enum tfs_init_kind *out)
{
    for (int i = 0; i < TFS_INIT_COUNT; i++)
        if (name && !strcmp(name, INIT_NAMES[i])) {
            *out = (enum tfs_init_kind)i;
            return true;
        }
    return false;
}

tfs_layer_spec tfs_layer_of(enum tfs_layer_kind kind)
{
    tfs_layer_spec l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.momentum = 0.99;
    l.epsilon = 0.001;
    l.alpha = 0.2;
    return l;
}

tfs_layer_spec tfs_layer_dense(int64_t units, enum tfs_activation act)
{
    tfs_layer_spec l = tfs_layer_of(TFS_LAYER_DENSE);
    l.units = units;
    l.activation = act;
    return l;
}

tfs_layer_spec tfs_layer_conv2d(int64_t filters, int64_t k, int64_t stride, bool same,
                                enum tfs_activation act)
{
    tfs_layer_spec l = tfs_layer_of(TFS_LAYER_CONV2D);
    l.units = filters;
    l.kernel[0] = l.kernel[1] = k;
    l.strides[0] = l.strides[1] = stride;
    l.same_padding = same;
    l.activation = act;
    return l;
}

tfs_layer_spec tfs_layer_pool2d(enum tfs_layer_kind kind, int64_t window, int64_t stride, bool same)
{
    tfs_layer_spec l = tfs_layer_of(kind);
    l.kernel[0] = l.kernel[1] = window;
    l.strides[0] = l.strides[1] = stride;
    l.same_padding = same;
    return l;
}

/* ---- plan: names and shapes ----------------------------------------------------------------- */

/* Output size of a window op along one axis, as TensorFlow computes it. */
static int64_t window_out(int64_t in, int64_t k, int64_t s, bool same)
{
    return same ? (in + s - 1) / s : (in - k + s) / s;
}

static enum tfs_code plan_one(const tfs_model_spec *spec, int i, tfs_layer *l, tfs_status *st)
{
    const tfs_layer_spec *ls = l->spec;
    int                   r = l->in_rank;
    const int64_t        *in = l->in_shape;
    l->out_rank = r;
    memcpy(l->out_shape, in, sizeof l->out_shape);
    if ((unsigned)ls->activation >= TFS_ACT_COUNT)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d (%s): unknown activation %d", i, l->name,
                       (int)ls->activation);
    if ((unsigned)ls->kernel_init.kind >= TFS_INIT_COUNT ||
        (unsigned)ls->bias_init.kind >= TFS_INIT_COUNT)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d (%s): unknown initializer", i, l->name);
    switch (ls->kind) {
    case TFS_LAYER_DENSE:
        if (r != 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "layer %d (%s): a dense layer needs a rank-1 "
                           "input per example, got rank %d (add a flatten layer)",
                           i, l->name, r);
        if (ls->units < 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d (%s): units must be >= 1", i,
                           l->name);
        l->out_shape[0] = ls->units;
        return TFS_OK;
    case TFS_LAYER_CONV2D:
    case TFS_LAYER_MAX_POOL2D:
    case TFS_LAYER_AVG_POOL2D: {
        if (r != 3)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "layer %d (%s): needs [height, width, "
                           "channels] per example, got rank %d",
                           i, l->name, r);
        bool conv = ls->kind == TFS_LAYER_CONV2D;
        for (int a = 0; a < 2; a++) {
            int64_t k = ls->kernel[a], s = ls->strides[a] > 0 ? ls->strides[a] : (conv ? 1 : k);
            if (k < 1 || s < 1)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                               "layer %d (%s): kernel and strides "
                               "must be >= 1",
                               i, l->name);
            if (!ls->same_padding && in[a] < k)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                               "layer %d (%s): input size %lld is "
                               "smaller than the window %lld with valid padding",
                               i, l->name, (long long)in[a], (long long)k);
            l->out_shape[a] = window_out(in[a], k, s, ls->same_padding);
        }
        if (conv) {
            if (ls->units < 1)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d (%s): filters must be >= 1", i,
                               l->name);
            l->out_shape[2] = ls->units;
        }
        return TFS_OK;
    }
    case TFS_LAYER_FLATTEN: {
        int64_t n = 1;
        for (int a = 0; a < r; a++)
            n *= in[a];
        l->out_rank = 1;
        l->out_shape[0] = n;
        return TFS_OK;
    }
    case TFS_LAYER_DROPOUT:
        if (!(ls->rate >= 0 && ls->rate < 1))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d (%s): rate must be in [0, 1)", i,
                           l->name);
        return TFS_OK;
    case TFS_LAYER_BATCH_NORM:
        if (r != 1 && r != 3)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "layer %d (%s): batch normalization takes "
                           "[features] or [height, width, channels] per example, got rank %d",
                           i, l->name, r);
        return TFS_OK;
    case TFS_LAYER_EMBEDDING:
        if (i != 0 || spec->input_dtype != TFS_DTYPE_INT32)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "layer %d (%s): an embedding must be the "
                           "first layer, on int32 ids",
                           i, l->name);
        if (ls->input_dim < 1 || ls->units < 1 || r + 1 > TFS_MAX_RANK - 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "layer %d (%s): needs input_dim >= 1 and "
                           "units >= 1",
                           i, l->name);
        l->out_rank = r + 1;
        l->out_shape[r] = ls->units;
        return TFS_OK;
    case TFS_LAYER_ACTIVATION:
        return TFS_OK;
    default:
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d: unknown kind %d", i, (int)ls->kind);
    }
}

enum tfs_code tfs__layers_plan(const tfs_model_spec *spec, tfs_layer *layers, tfs_status *st)
{
    int count[TFS_LAYER_KIND_COUNT] = {0};
    if (spec->input_rank < 0 || spec->input_rank > TFS_MAX_RANK - 2)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input rank %d (at most %d per example)",
                       spec->input_rank, TFS_MAX_RANK - 2);
    for (int a = 0; a < spec->input_rank; a++)
        if (spec->input_shape[a] < 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input dimension %d is %lld (must be >= 1)", a,
                           (long long)spec->input_shape[a]);
    if (spec->input_dtype != TFS_DTYPE_FLOAT && spec->input_dtype != TFS_DTYPE_INT32)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input dtype must be float or int32");
    if (spec->n_layers < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "a model needs at least one layer");
    for (int i = 0; i < spec->n_layers; i++) {
        tfs_layer *l = &layers[i];
        memset(l, 0, sizeof *l);
        l->spec = &spec->layers[i];
        if ((unsigned)l->spec->kind >= TFS_LAYER_KIND_COUNT)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d: unknown kind", i);
        if (l->spec->name[0]) {
            snprintf(l->name, sizeof l->name, "%s", l->spec->name);
        } else {
            int k = count[l->spec->kind]++;
            if (k == 0)
                snprintf(l->name, sizeof l->name, "%s", KIND_NAMES[l->spec->kind]);
            else
                snprintf(l->name, sizeof l->name, "%s_%d", KIND_NAMES[l->spec->kind], k);
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(layers[j].name, l->name))
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "layer %d: duplicate name '%s'", i,
                               l->name);
        if (i == 0) {
            l->in_rank = spec->input_rank;
            memcpy(l->in_shape, spec->input_shape, (size_t)spec->input_rank * sizeof(int64_t));
        } else {
            l->in_rank = layers[i - 1].out_rank;
            memcpy(l->in_shape, layers[i - 1].out_shape, sizeof l->in_shape);
        }
        enum tfs_code rc = plan_one(spec, i, l, st);
        if (rc != TFS_OK)
            return rc;
        if (spec->input_dtype == TFS_DTYPE_INT32 && i == 0 && l->spec->kind != TFS_LAYER_EMBEDDING)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "int32 inputs need an embedding first layer");
    }
    return TFS_OK;
}

/* ---- variables and initializers ------------------------------------------------------------- */

void tfs__outs_push(tfs_graph *g, tfs_out **v, int *n, int *cap, tfs_out o)
{
    if (*n == *cap) {
        int      c = *cap ? 2 * *cap : 16;
        tfs_out *nv = tfs_realloc(*v, (size_t)c * sizeof *nv);
        if (!nv) {
            tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "out of memory building a model");
            return;
        }
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = o;
}

void tfs__build_ctx_free(tfs_build_ctx *b)
{
    tfs_free(b->vars);
    tfs_free(b->updates);
    tfs_free(b->reg);
    memset(b, 0, sizeof *b);
}

tfs_out tfs__model_read(tfs_graph *g, tfs_out var)
{
    return tfs_build_op(g, "Identity", "read", 1, &var);
}

tfs_out tfs__model_variable(tfs_build_ctx *b, const char *name, const int64_t *dims, int rank,
                            enum tfs_dtype dt, tfs_out init_value, bool weight, bool trainable)
{
    tfs_shape shape = {.rank = rank};
    if (rank > 0) /* scalars (global_step, the beta powers) pass dims NULL */
        memcpy(shape.dims, dims, (size_t)rank * sizeof(int64_t));
    tfs_out v = tfs_build_variable(b->g, name, dt, &shape);
    tfs_out init = TFS_OUT_NONE;
    if (!b->no_init) {
        tfs_build_scope_push(b->g, name);
        init = tfs_build_assign(b->g, v, init_value);
        tfs_build_scope_pop(b->g);
    }
    if (!tfs_out_ok(v) || (!b->no_init && !tfs_out_ok(init)))
        return TFS_OUT_NONE;
    if (b->n_vars == b->cap_vars) {
        int            c = b->cap_vars ? 2 * b->cap_vars : 16;
        tfs_model_var *nv = tfs_realloc(b->vars, (size_t)c * sizeof *nv);
        if (!nv) {
            tfs_graph_set_error(b->g, TFS_RESOURCE_EXHAUSTED, "out of memory building a model");
            return TFS_OUT_NONE;
        }
        b->vars = nv;
        b->cap_vars = c;
    }
    b->vars[b->n_vars++] = (tfs_model_var){v, init, weight, trainable};
    return v;
}

static tfs_out random_op(tfs_build_ctx *b, const char *op, const int64_t *dims, int rank,
                         int64_t seed2)
{
    tfs_out shape = tfs_build_ints(b->g, rank, dims);
    tfs_out r = tfs_build_op(b->g, op, NULL, 1, &shape);
    if (tfs_out_ok(r)) {
        tfs_graph_set_attr_type(b->g, r.node, "dtype", TFS_DTYPE_FLOAT);
        tfs_graph_set_attr_int(b->g, r.node, "seed", b->seed);
        tfs_graph_set_attr_int(b->g, r.node, "seed2", seed2 ? seed2 : ++b->op_seed);
    }
    return r;
}

static tfs_out affine(tfs_build_ctx *b, tfs_out x, double scale, double shift)
{
    tfs_out y = tfs_build_binary(b->g, "Mul", x, tfs_build_scalar(b->g, TFS_DTYPE_FLOAT, scale));
    return shift == 0
               ? y
               : tfs_build_binary(b->g, "AddV2", y, tfs_build_scalar(b->g, TFS_DTYPE_FLOAT, shift));
}

/* The initial value of a float variable of the given shape; fans as Keras computes them. */
static tfs_out initializer(tfs_build_ctx *b, tfs_init_spec init, enum tfs_init_kind dflt,
                           const int64_t *dims, int rank)
{
    double fan_in = 1, fan_out = 1, receptive = 1;
    if (rank >= 2) {
        for (int a = 0; a < rank - 2; a++)
            receptive *= (double)dims[a];
        fan_in = (double)dims[rank - 2] * receptive;
        fan_out = (double)dims[rank - 1] * receptive;
    } else if (rank == 1) {
        fan_in = fan_out = (double)dims[0];
    }
    enum tfs_init_kind kind = init.kind == TFS_INIT_DEFAULT ? dflt : init.kind;
    /* Keras's VarianceScaling truncated normal divides by the stddev of a unit normal truncated
     * at two standard deviations. */
    const double trunc = 0.87962566103423978;
    switch (kind) {
    case TFS_INIT_ONES:
    case TFS_INIT_ZEROS:
    case TFS_INIT_CONSTANT: {
        double  v = kind == TFS_INIT_ONES ? 1.0 : kind == TFS_INIT_ZEROS ? 0.0 : init.value;
        tfs_out in[2] = {tfs_build_ints(b->g, rank, dims),
                         tfs_build_scalar(b->g, TFS_DTYPE_FLOAT, v)};
        return tfs_build_op(b->g, "Fill", NULL, 2, in);
    }
    case TFS_INIT_RANDOM_NORMAL:
        return affine(b, random_op(b, "RandomStandardNormal", dims, rank, init.seed),
                      init.stddev > 0 ? init.stddev : 0.05, init.mean);
    case TFS_INIT_TRUNCATED_NORMAL:
        return affine(b, random_op(b, "TruncatedNormal", dims, rank, init.seed),
                      init.stddev > 0 ? init.stddev : 0.05, init.mean);
    case TFS_INIT_RANDOM_UNIFORM: {
        double lo = init.minval, hi = init.maxval;
        if (lo == 0 && hi == 0) {
            lo = -0.05;
            hi = 0.05;
        }
        return affine(b, random_op(b, "RandomUniform", dims, rank, init.seed), hi - lo, lo);
    }
    case TFS_INIT_GLOROT_UNIFORM:
    case TFS_INIT_HE_UNIFORM: {
        double limit =
            kind == TFS_INIT_GLOROT_UNIFORM ? sqrt(6.0 / (fan_in + fan_out)) : sqrt(6.0 / fan_in);
        return affine(b, random_op(b, "RandomUniform", dims, rank, init.seed), 2 * limit, -limit);
    }
    case TFS_INIT_GLOROT_NORMAL:
    case TFS_INIT_HE_NORMAL: {
        double sd =
            kind == TFS_INIT_GLOROT_NORMAL ? sqrt(2.0 / (fan_in + fan_out)) : sqrt(2.0 / fan_in);
        return affine(b, random_op(b, "TruncatedNormal", dims, rank, init.seed), sd / trunc, 0);
    }
    default:
        tfs_graph_set_error(b->g, TFS_INVALID_ARGUMENT, "unknown initializer %d", (int)kind);
        return TFS_OUT_NONE;
    }
}

static tfs_out weight(tfs_build_ctx *b, const char *name, const int64_t *dims, int rank,
                      tfs_init_spec init, enum tfs_init_kind dflt, bool trainable, tfs_out *read)
{
    tfs_out value = b->no_init ? TFS_OUT_NONE : initializer(b, init, dflt, dims, rank);
    tfs_out v = tfs__model_variable(b, name, dims, rank, TFS_DTYPE_FLOAT, value, true, trainable);
    tfs_build_scope_push(b->g, name);
    *read = tfs__model_read(b->g, v);
    tfs_build_scope_pop(b->g);
    return v;
}

enum tfs_code tfs__layers_create_variables(tfs_build_ctx *b, const tfs_model_spec *spec,
                                           tfs_layer *layers, tfs_status *st)
{
    tfs_graph    *g = b->g;
    tfs_init_spec none = {0};
    for (int i = 0; i < spec->n_layers; i++) {
        tfs_layer            *l = &layers[i];
        const tfs_layer_spec *ls = l->spec;
        tfs_build_scope_push(g, l->name);
        switch (ls->kind) {
        case TFS_LAYER_DENSE:
        case TFS_LAYER_CONV2D: {
            int64_t kd[4];
            int     kr;
            if (ls->kind == TFS_LAYER_DENSE) {
                kd[0] = l->in_shape[0];
                kd[1] = ls->units;
                kr = 2;
            } else {
                kd[0] = ls->kernel[0];
                kd[1] = ls->kernel[1];
                kd[2] = l->in_shape[2];
                kd[3] = ls->units;
                kr = 4;
            }
            l->kernel = weight(b, "kernel", kd, kr, ls->kernel_init, TFS_INIT_GLOROT_UNIFORM, true,
                               &l->kernel_read);
            if (!ls->no_bias)
                l->bias = weight(b, "bias", &ls->units, 1, ls->bias_init, TFS_INIT_ZEROS, true,
                                 &l->bias_read);
            if (ls->l2 > 0) {
                /* Keras's l2(λ): λ * sum(w^2) = 2λ * L2Loss(w). */
                tfs_out l2 = tfs_build_unary(g, "L2Loss", l->kernel_read);
                tfs__outs_push(g, &b->reg, &b->n_reg, &b->cap_reg,
                               tfs_build_binary(g, "Mul", l2,
                                                tfs_build_scalar(g, TFS_DTYPE_FLOAT, 2 * ls->l2)));
            }
            break;
        }
        case TFS_LAYER_BATCH_NORM: {
            int64_t c = l->in_shape[l->in_rank - 1];
            l->gamma = weight(b, "gamma", &c, 1, none, TFS_INIT_ONES, true, &l->gamma_read);
            l->beta = weight(b, "beta", &c, 1, none, TFS_INIT_ZEROS, true, &l->beta_read);
            l->moving_mean =
                weight(b, "moving_mean", &c, 1, none, TFS_INIT_ZEROS, false, &l->mean_read);
            l->moving_var =
                weight(b, "moving_variance", &c, 1, none, TFS_INIT_ONES, false, &l->var_read);
            break;
        }
        case TFS_LAYER_EMBEDDING: {
            int64_t d[2] = {ls->input_dim, ls->units};
            l->kernel = weight(b, "embeddings", d, 2, ls->kernel_init, TFS_INIT_RANDOM_UNIFORM,
                               true, &l->kernel_read);
            break;
        }
        default:
            break;
        }
        tfs_build_scope_pop(g);
    }
    return tfs_graph_status(g, st);
}

/* ---- forward -------------------------------------------------------------------------------- */

static tfs_out activate(tfs_build_ctx *b, const tfs_layer_spec *ls, tfs_out x)
{
    static const char *const OPS[TFS_ACT_COUNT] = {
        [TFS_ACT_RELU] = "Relu",         [TFS_ACT_RELU6] = "Relu6",
        [TFS_ACT_SIGMOID] = "Sigmoid",   [TFS_ACT_TANH] = "Tanh",
        [TFS_ACT_SOFTMAX] = "Softmax",   [TFS_ACT_ELU] = "Elu",
        [TFS_ACT_SELU] = "Selu",         [TFS_ACT_LEAKY_RELU] = "LeakyRelu",
        [TFS_ACT_SOFTPLUS] = "Softplus",
    };
    if (ls->activation == TFS_ACT_NONE || (unsigned)ls->activation >= TFS_ACT_COUNT)
        return x;
    tfs_out y = tfs_build_unary(b->g, OPS[ls->activation], x);
    if (ls->activation == TFS_ACT_LEAKY_RELU && tfs_out_ok(y))
        tfs_graph_set_attr_float(b->g, y.node, "alpha", (float)ls->alpha);
    return y;
}

static void set_ints(tfs_graph *g, tfs_out o, const char *name, int64_t a, int64_t b, int64_t c,
                     int64_t d)
{
    int64_t        v[4] = {a, b, c, d};
    tfs_attr_value attr = {.kind = TFS_ATTR_LIST};
    attr.list.kind = TFS_ATTR_I;
    attr.list.n = 4;
    attr.list.i = v;
    if (tfs_out_ok(o))
        tfs_graph_set_attr(g, o.node, name, &attr);
}

static tfs_out window_op(tfs_build_ctx *b, const tfs_layer *l, const char *op, tfs_out x,
                         tfs_out filter)
{
    const tfs_layer_spec *ls = l->spec;
    bool                  conv = ls->kind == TFS_LAYER_CONV2D;
    int64_t               sh = ls->strides[0] > 0 ? ls->strides[0] : (conv ? 1 : ls->kernel[0]);
    int64_t               sw = ls->strides[1] > 0 ? ls->strides[1] : (conv ? 1 : ls->kernel[1]);
    tfs_out y = conv ? tfs_build_binary(b->g, op, x, filter) : tfs_build_unary(b->g, op, x);
    if (!tfs_out_ok(y))
        return y;
    tfs_graph_set_attr_string(b->g, y.node, "padding", ls->same_padding ? "SAME" : "VALID");
    tfs_graph_set_attr_string(b->g, y.node, "data_format", "NHWC");
    set_ints(b->g, y, "strides", 1, sh, sw, 1);
    if (conv) {
        set_ints(b->g, y, "dilations", 1, 1, 1, 1);
        tfs_graph_set_attr_bool(b->g, y.node, "use_cudnn_on_gpu", true);
    } else {
        set_ints(b->g, y, "ksize", 1, ls->kernel[0], ls->kernel[1], 1);
    }
    return y;
}

/* Keras's batch normalization: FusedBatchNormV3 on NHWC (a [B, C] input goes through
 * [B, 1, 1, C]); in training mode the batch statistics, and moving averages updated as
 * moving -= (moving - batch) * (1 - momentum). The batch variance the moving variance moves
 * toward is Keras's: on images, the fused op's (unbiased, n / (n - 1)); on [B, C] inputs, which
 * Keras normalizes without the fused op, the biased variance of tf.nn.moments. */
static tfs_out batch_norm(tfs_build_ctx *b, tfs_layer *l, tfs_out x, bool training)
{
    tfs_graph            *g = b->g;
    const tfs_layer_spec *ls = l->spec;
    int64_t               c = l->in_shape[l->in_rank - 1];
    bool                  flat = l->in_rank == 1;
    tfs_out               x2d = x;
    if (flat)
        x = tfs_build_reshape(g, x, tfs_build_ints(g, 4, (int64_t[]){-1, 1, 1, c}));
    tfs_out mean = l->mean_read, var = l->var_read;
    if (training) {
        tfs_tensor *empty = NULL;
        tfs_status  st;
        if (tfs_tensor_new(TFS_DTYPE_FLOAT, 1, (int64_t[]){0}, &empty, &st) != TFS_OK) {
            tfs_graph_set_error(g, st.code, "%s", st.msg);
            return TFS_OUT_NONE;
        }
        mean = var = tfs_build_const(g, "empty", empty);
        tfs_tensor_unref(empty);
    }
    tfs_out in[5] = {x, l->gamma_read, l->beta_read, mean, var};
    tfs_out y = tfs_build_op(g, "FusedBatchNormV3", NULL, 5, in);
    if (!tfs_out_ok(y))
        return y;
    tfs_graph_set_attr_type(g, y.node, "U", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_float(g, y.node, "epsilon", (float)ls->epsilon);
    tfs_graph_set_attr_float(g, y.node, "exponential_avg_factor", 1.0f);
    tfs_graph_set_attr_string(g, y.node, "data_format", "NHWC");
    tfs_graph_set_attr_bool(g, y.node, "is_training", training);
    if (training) {
        tfs_out decay = tfs_build_scalar(g, TFS_DTYPE_FLOAT, 1.0 - ls->momentum);
        tfs_out stats[2] = {tfs_out_at(y, 1), tfs_out_at(y, 2)};
        if (flat)
            stats[1] =
                tfs_build_reduce(g, "Mean", tfs_build_binary(g, "SquaredDifference", x2d, stats[0]),
                                 tfs_build_ints(g, 1, (int64_t[]){0}), false);
        tfs_out moving[2] = {l->moving_mean, l->moving_var};
        tfs_out reads[2] = {l->mean_read, l->var_read};
        for (int k = 0; k < 2; k++) {
            tfs_out delta =
                tfs_build_binary(g, "Mul", tfs_build_binary(g, "Sub", reads[k], stats[k]), decay);
            tfs_out in2[2] = {moving[k], delta};
            tfs_out upd = tfs_build_op(g, "AssignSub", NULL, 2, in2);
            if (tfs_out_ok(upd))
                tfs_graph_set_attr_bool(g, upd.node, "use_locking", false);
            tfs__outs_push(g, &b->updates, &b->n_updates, &b->cap_updates, upd);
        }
    }
    if (flat)
        y = tfs_build_reshape(g, y, tfs_build_ints(g, 2, (int64_t[]){-1, c}));
    return y;
}

static tfs_out dropout(tfs_build_ctx *b, const tfs_layer *l, tfs_out x)
{
    tfs_graph *g = b->g;
    double     rate = l->spec->rate;
    if (rate <= 0)
        return x;
    tfs_out shape = tfs_build_shape(g, x);
    tfs_out r = tfs_build_op(g, "RandomUniform", NULL, 1, &shape);
    if (tfs_out_ok(r)) {
        tfs_graph_set_attr_type(g, r.node, "dtype", TFS_DTYPE_FLOAT);
        tfs_graph_set_attr_int(g, r.node, "seed", b->seed);
        tfs_graph_set_attr_int(g, r.node, "seed2", ++b->op_seed);
    }
    tfs_out keep =
        tfs_build_binary(g, "GreaterEqual", r, tfs_build_scalar(g, TFS_DTYPE_FLOAT, rate));
    tfs_out mask = tfs_build_cast(g, keep, TFS_DTYPE_FLOAT);
    tfs_out scaled =
        tfs_build_binary(g, "Mul", x, tfs_build_scalar(g, TFS_DTYPE_FLOAT, 1 / (1 - rate)));
    return tfs_build_binary(g, "Mul", scaled, mask);
}

tfs_out tfs__layers_forward(tfs_build_ctx *b, const tfs_model_spec *spec, tfs_layer *layers,
                            tfs_out x, bool training, tfs_out *logits)
{
    tfs_graph *g = b->g;
    *logits = TFS_OUT_NONE;
    for (int i = 0; i < spec->n_layers; i++) {
        tfs_layer            *l = &layers[i];
        const tfs_layer_spec *ls = l->spec;
        bool                  last = i == spec->n_layers - 1;
        tfs_build_scope_push(g, l->name);
        tfs_out pre = x;
        switch (ls->kind) {
        case TFS_LAYER_DENSE:
            pre = tfs_build_matmul(g, x, l->kernel_read, false, false);
            if (!ls->no_bias)
                pre = tfs_build_binary(g, "BiasAdd", pre, l->bias_read);
            x = activate(b, ls, pre);
            break;
        case TFS_LAYER_CONV2D:
            pre = window_op(b, l, "Conv2D", x, l->kernel_read);
            if (!ls->no_bias)
                pre = tfs_build_binary(g, "BiasAdd", pre, l->bias_read);
            x = activate(b, ls, pre);
            break;
        case TFS_LAYER_MAX_POOL2D:
            x = window_op(b, l, "MaxPool", x, TFS_OUT_NONE);
            break;
        case TFS_LAYER_AVG_POOL2D:
            x = window_op(b, l, "AvgPool", x, TFS_OUT_NONE);
            break;
        case TFS_LAYER_FLATTEN:
            x = tfs_build_reshape(g, x, tfs_build_ints(g, 2, (int64_t[]){-1, l->out_shape[0]}));
            break;
        case TFS_LAYER_DROPOUT:
            if (training)
                x = dropout(b, l, x);
            break;
        case TFS_LAYER_BATCH_NORM:
            x = batch_norm(b, l, x, training);
            break;
        case TFS_LAYER_EMBEDDING: {
            tfs_out in[3] = {l->kernel_read, x, tfs_build_scalar(g, TFS_DTYPE_INT32, 0)};
            x = tfs_build_op(g, "GatherV2", NULL, 3, in);
            if (tfs_out_ok(x))
                tfs_graph_set_attr_int(g, x.node, "batch_dims", 0);
            break;
        }
        case TFS_LAYER_ACTIVATION:
            x = activate(b, ls, x);
            break;
        default:
            break;
        }
        tfs_build_scope_pop(g);
        if (last)
            *logits = (ls->activation == TFS_ACT_SOFTMAX || ls->activation == TFS_ACT_SIGMOID) &&
                              (ls->kind == TFS_LAYER_DENSE || ls->kind == TFS_LAYER_CONV2D ||
                               ls->kind == TFS_LAYER_ACTIVATION)
                          ? pre
                          : x;
    }
    return x;
}
