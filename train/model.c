/* The model (model.h): one training graph holding the forward pass in training mode, the loss,
 * its autodiff gradients and the optimizer step, plus the forward pass in inference mode for
 * evaluation and prediction, all over the same variables in one session.
 *
 * DESIGN. A training step is one session run: feeds x, labels and the learning rate, fetches the
 * loss and the correct count, and runs the "train_op" NoOp, which depends on every optimizer
 * apply, BatchNorm moving-average update and the global_step increment. Every apply is ordered
 * after "gradients_done", a NoOp depending on every gradient (and with check_numerics on every
 * CheckNumerics), so no variable changes while the step still reads it. Restoring a checkpoint
 * runs per-variable Assign nodes fed from placeholders ("<var>/restore_value"), built with the
 * graph so that restoring needs no second graph.
 */
#include "train/model-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct tfs_model {
    tfs_model_spec     spec;
    tfs_layer_spec    *layers_spec; /* owned copy */
    tfs_optimizer_spec opt;
    tfs_graph         *g; /* the session's graph (a reference) */
    tfs_session       *s;
    int64_t            step; /* global_step as of the last run */
    int                n_vars;
    char             **var_names;    /* [n_vars] */
    bool              *var_weight;   /* [n_vars] */
    char             **restore_feed; /* [n_vars] "<var>/restore_value:0" */
    char             **restore_op;   /* [n_vars] "<var>/restore" */
    char             **grad_name;    /* [n_grad] gradient tensor of trainable weights, else NULL */
    int                n_grad;
    /* spec.data_parallel: [n_grad] "<var>/allreduced_gradient:0", the placeholder the optimizer
     * reads that variable's gradient from (NULL where grad_name is); and the target of the
     * gradient run (the gradients' barrier and the BatchNorm updates). */
    char             **grad_feed;
    char               updates_op[256];
    /* tensor names the runs use */
    char x[256], y[256], lr[256], loss[256], correct[256], train_op[256];
    char eval_loss[256], eval_correct[256], predict[256], global_step[256];
};

tfs_model_spec tfs_model_spec_default(void)
{
    tfs_model_spec s;
    memset(&s, 0, sizeof s);
    s.input_dtype = TFS_DTYPE_FLOAT;
    s.loss = TFS_LOSS_SPARSE_SOFTMAX_XENT;
    s.seed = 1;
    return s;
}

static const char *const LOSS_NAMES[TFS_LOSS_COUNT] = {
    [TFS_LOSS_SPARSE_SOFTMAX_XENT] = "sparse_softmax_cross_entropy",
    [TFS_LOSS_SOFTMAX_XENT] = "softmax_cross_entropy",
    [TFS_LOSS_SIGMOID_XENT] = "sigmoid_cross_entropy",
    [TFS_LOSS_MSE] = "mean_squared_error",
};

bool tfs_loss_parse(const char *name, enum tfs_loss *out)
{
    for (int i = 0; i < TFS_LOSS_COUNT; i++)
        if (name && !strcmp(name, LOSS_NAMES[i])) {
            *out = (enum tfs_loss)i;
            return true;
        }
    if (name && !strcmp(name, "mse")) {
        *out = TFS_LOSS_MSE;
        return true;
    }
    return false;
}

const char *tfs_loss_name(enum tfs_loss l)
{
    return l >= 0 && l < TFS_LOSS_COUNT ? LOSS_NAMES[l] : "?";
}

/* ---- losses and metrics --------------------------------------------------------------------- */

/* Mean over every axis but the batch axis of a tensor of rank 1 + r (r may be 0). */
static tfs_out mean_per_example(tfs_graph *g, tfs_out t, int r)
{
    if (r == 0)
        return t;
    int64_t axes[TFS_MAX_RANK];
    for (int a = 0; a < r; a++)
        axes[a] = a + 1;
    return tfs_build_reduce(g, "Mean", t, tfs_build_ints(g, r, axes), false);
}

/* The per-example loss [B] of logits (or outputs) against labels. */
static tfs_out per_example_loss(tfs_graph *g, enum tfs_loss loss, tfs_out logits, tfs_out y,
                                int out_rank)
{
    switch (loss) {
    case TFS_LOSS_SPARSE_SOFTMAX_XENT:
        return tfs_build_binary(g, "SparseSoftmaxCrossEntropyWithLogits", logits, y);
    case TFS_LOSS_SOFTMAX_XENT:
        return tfs_build_binary(g, "SoftmaxCrossEntropyWithLogits", logits, y);
    case TFS_LOSS_SIGMOID_XENT: {
        /* max(x, 0) - x z + log(1 + exp(-|x|)): stable for large |x| (tf.nn's formula). */
        tfs_out zero = tfs_build_scalar(g, TFS_DTYPE_FLOAT, 0);
        tfs_out relu = tfs_build_binary(g, "Maximum", logits, zero);
        tfs_out xz = tfs_build_binary(g, "Mul", logits, y);
        tfs_out soft = tfs_build_unary(
            g, "Log1p",
            tfs_build_unary(g, "Exp",
                            tfs_build_unary(g, "Neg", tfs_build_unary(g, "Abs", logits))));
        tfs_out l = tfs_build_binary(g, "AddV2", tfs_build_binary(g, "Sub", relu, xz), soft);
        return mean_per_example(g, l, out_rank);
    }
    case TFS_LOSS_MSE:
        return mean_per_example(g, tfs_build_binary(g, "SquaredDifference", logits, y), out_rank);
    default:
        return TFS_OUT_NONE;
    }
}

/* Number of correct predictions in the batch (int32 scalar); TFS_OUT_NONE for regression. */
static tfs_out correct_count(tfs_graph *g, enum tfs_loss loss, tfs_out logits, tfs_out y,
                             int out_rank)
{
    tfs_out eq;
    tfs_out last = tfs_build_scalar(g, TFS_DTYPE_INT32, -1);
    switch (loss) {
    case TFS_LOSS_SPARSE_SOFTMAX_XENT:
    case TFS_LOSS_SOFTMAX_XENT: {
        tfs_out am = tfs_build_binary(g, "ArgMax", logits, last);
        if (tfs_out_ok(am))
            tfs_graph_set_attr_type(g, am.node, "output_type", TFS_DTYPE_INT32);
        tfs_out want = y;
        if (loss == TFS_LOSS_SOFTMAX_XENT) {
            want = tfs_build_binary(g, "ArgMax", y, last);
            if (tfs_out_ok(want))
                tfs_graph_set_attr_type(g, want.node, "output_type", TFS_DTYPE_INT32);
        }
        eq = tfs_build_binary(g, "Equal", am, want);
        break;
    }
    case TFS_LOSS_SIGMOID_XENT: {
        tfs_out p = tfs_build_binary(g, "Greater", logits, tfs_build_scalar(g, TFS_DTYPE_FLOAT, 0));
        tfs_out t = tfs_build_binary(g, "Greater", y, tfs_build_scalar(g, TFS_DTYPE_FLOAT, 0.5));
        eq = tfs_build_binary(g, "Equal", p, t);
        break;
    }
    default:
        return TFS_OUT_NONE;
    }
    tfs_out c = tfs_build_cast(g, eq, TFS_DTYPE_INT32);
    return tfs_build_reduce_all(g, "Sum", c, loss == TFS_LOSS_SIGMOID_XENT ? 1 + out_rank : 1);
}

/* ---- building ------------------------------------------------------------------------------- */

static void name_of(tfs_graph *g, tfs_out o, char *buf)
{
    tfs_build_tensor_name(g, o, buf, 256);
}

static enum tfs_code check_loss_fits(const tfs_model_spec *spec, const tfs_layer *last,
                                     tfs_status *st)
{
    bool classes =
        spec->loss == TFS_LOSS_SPARSE_SOFTMAX_XENT || spec->loss == TFS_LOSS_SOFTMAX_XENT;
    if ((unsigned)spec->loss >= TFS_LOSS_COUNT)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "unknown loss %d", (int)spec->loss);
    if (classes && (last->out_rank != 1 || last->out_shape[0] < 2))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "loss %s needs the last layer (%s) to output "
                       "[classes] per example with at least 2 classes",
                       tfs_loss_name(spec->loss), last->name);
    return TFS_OK;
}

/* How many outputs of a node of op type `op` to check: the data outputs of the multi-output ops
 * the training graph has (FusedBatchNormV3: y, batch mean, batch variance; the cross-entropy
 * ops: loss and backprop), else output 0. */
static int checked_outputs(const char *op)
{
    if (!strcmp(op, "FusedBatchNormV3"))
        return 3;
    if (!strcmp(op, "SoftmaxCrossEntropyWithLogits") ||
        !strcmp(op, "SparseSoftmaxCrossEntropyWithLogits"))
        return 2;
    return 1;
}

/* Adds CheckNumerics on every float output of nodes [from, to) (tf.add_check_numerics_ops).
 * Each check runs after the checks of the nodes its node reads from, so when a NaN spreads
 * through the graph the check that fails is the one at the op that produced it, not one
 * further down that the executor happened to run first. */
static void add_check_numerics(tfs_graph *g, int from, int to, tfs_out **checks, int *n, int *cap)
{
    int *check_of = tfs_calloc((size_t)(to - from) + 1, sizeof *check_of);
    if (!check_of) {
        tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "out of memory adding CheckNumerics");
        return;
    }
    for (int id = from; id < to; id++) {
        check_of[id - from] = -1;
        const char *op = tfs_graph_node_op(g, id);
        if (!strcmp(op, "Const") || !strcmp(op, "VariableV2") || !strcmp(op, "Assign"))
            continue;
        for (int k = 0; k < checked_outputs(op); k++) {
            tfs_out o = {id, k};
            if (tfs_build_dtype(g, o) != TFS_DTYPE_FLOAT)
                continue;
            tfs_out c = tfs_build_unary(g, "CheckNumerics", o);
            if (!tfs_out_ok(c))
                break;
            char msg[300];
            snprintf(msg, sizeof msg, "%s:%d", tfs_graph_node_name(g, id), k);
            tfs_graph_set_attr_string(g, c.node, "message", msg);
            for (int i = 0; i < tfs_graph_node_input_count(g, id); i++) {
                char name[256];
                int  index;
                bool control;
                if (!tfs_tensor_name_parse(tfs_graph_node_input(g, id, i), name, sizeof name,
                                           &index, &control) ||
                    control)
                    continue;
                int p = tfs_graph_find_node(g, name);
                if (p >= from && p < id && check_of[p - from] >= 0)
                    tfs_build_control(g, c, (tfs_out){check_of[p - from], 0});
            }
            if (k == 0)
                check_of[id - from] = c.node;
            tfs__outs_push(g, checks, n, cap, c);
        }
    }
    tfs_free(check_of);
}

static enum tfs_code build(tfs_model *m, tfs_build_ctx *b, tfs_layer *layers, tfs_status *st)
{
    const tfs_model_spec *spec = &m->spec;
    tfs_graph            *g = b->g;
    enum tfs_code         rc = tfs__layers_create_variables(b, spec, layers, st);
    if (rc != TFS_OK)
        return rc;
    const tfs_layer *last = &layers[spec->n_layers - 1];

    tfs_shape xs = {.rank = 1 + spec->input_rank};
    xs.dims[0] = -1;
    memcpy(xs.dims + 1, spec->input_shape, (size_t)spec->input_rank * sizeof(int64_t));
    tfs_out        x = tfs_build_placeholder(g, "x", spec->input_dtype, &xs);
    tfs_shape      ys = {.rank = 1, .dims = {-1}};
    enum tfs_dtype ydt = TFS_DTYPE_INT32;
    if (spec->loss != TFS_LOSS_SPARSE_SOFTMAX_XENT) {
        ys.rank = 1 + last->out_rank;
        memcpy(ys.dims + 1, last->out_shape, (size_t)last->out_rank * sizeof(int64_t));
        ydt = TFS_DTYPE_FLOAT;
    }
    tfs_out y = tfs_build_placeholder(g, "labels", ydt, &ys);
    tfs_out lr = tfs_build_placeholder(g, "learning_rate", TFS_DTYPE_FLOAT, &(tfs_shape){0});
    tfs_out gs = tfs__model_variable(b, "global_step", NULL, 0, TFS_DTYPE_INT64,
                                     tfs_build_scalar(g, TFS_DTYPE_INT64, 0), false, false);

    /* Training forward, loss and metrics. */
    int     first_train_node = tfs_graph_node_count(g);
    tfs_out logits;
    tfs__layers_forward(b, spec, layers, x, true, &logits);
    tfs_build_scope_push(g, "loss");
    tfs_out per = per_example_loss(g, spec->loss, logits, y, last->out_rank);
    tfs_out loss = tfs_build_reduce_all(g, "Mean", per, 1);
    for (int i = 0; i < b->n_reg; i++)
        loss = tfs_build_binary(g, "AddV2", loss, b->reg[i]);
    tfs_out correct = correct_count(g, spec->loss, logits, y, last->out_rank);
    tfs_build_scope_pop(g);

    /* Gradients of the loss with respect to every trainable variable. */
    int      n_train = 0;
    tfs_out *vars = tfs_calloc((size_t)b->n_vars + 1, sizeof *vars);
    tfs_out *grads = tfs_calloc((size_t)b->n_vars + 1, sizeof *grads);
    tfs_out *ops = NULL, *deps = NULL, *checks = NULL;
    int      n_ops = 0, n_deps = 0, cap_deps = 0, n_checks = 0, cap_checks = 0;
    if (!vars || !grads) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
        goto done;
    }
    int  n_vars_at_gradients = b->n_vars;
    int *train_index = tfs_calloc((size_t)b->n_vars + 1, sizeof *train_index);
    m->grad_name = tfs_calloc((size_t)b->n_vars + 1, sizeof *m->grad_name);
    m->n_grad = m->grad_name ? b->n_vars : 0;
    if (!train_index || !m->grad_name) {
        tfs_free(train_index);
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
        goto done;
    }
    for (int i = 0; i < b->n_vars; i++)
        if (b->vars[i].trainable) {
            train_index[n_train] = i;
            vars[n_train++] = b->vars[i].var;
        }
    rc = tfs_build_gradients(g, 1, &loss, NULL, n_train, vars, grads, st);
    for (int k = 0; rc == TFS_OK && k < n_train; k++) {
        char buf[256];
        if (!tfs_out_ok(grads[k]))
            continue;
        name_of(g, grads[k], buf);
        if (!(m->grad_name[train_index[k]] = tfs_strdup(buf)))
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
    }
    tfs_free(train_index);
    if (rc != TFS_OK)
        goto done;
    if (spec->check_numerics)
        add_check_numerics(g, first_train_node, tfs_graph_node_count(g), &checks, &n_checks,
                           &cap_checks);
    for (int i = 0; i < n_train; i++)
        if (tfs_out_ok(grads[i]))
            tfs__outs_push(g, &deps, &n_deps, &cap_deps, grads[i]);
    for (int i = 0; i < n_checks; i++)
        tfs__outs_push(g, &deps, &n_deps, &cap_deps, checks[i]);
    tfs__outs_push(g, &deps, &n_deps, &cap_deps, loss);
    if (tfs_out_ok(correct))
        tfs__outs_push(g, &deps, &n_deps, &cap_deps, correct);
    tfs_out barrier = tfs_build_group(g, "gradients_done", n_deps, deps);

    /* Data-parallel: the step is two runs around the gradients' allreduce. The optimizer reads
     * each gradient from a placeholder (its applies need no barrier: that run computes no
     * gradient), and the first run's target is the BatchNorm updates. */
    tfs_out *apply_grads = grads, apply_barrier = barrier;
    if (spec->data_parallel) {
        m->grad_feed = tfs_calloc((size_t)b->n_vars + 1, sizeof *m->grad_feed);
        apply_grads = tfs_calloc((size_t)n_train + 1, sizeof *apply_grads);
        if (!m->grad_feed || !apply_grads) {
            tfs_free(apply_grads);
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
            goto done;
        }
        for (int k = 0, i = 0; i < b->n_vars; i++) {
            if (!b->vars[i].trainable)
                continue;
            apply_grads[k] = TFS_OUT_NONE;
            if (tfs_out_ok(grads[k])) {
                char buf[256];
                tfs_build_scope_push(g, tfs_graph_node_name(g, b->vars[i].var.node));
                apply_grads[k] =
                    tfs_build_placeholder(g, "allreduced_gradient", TFS_DTYPE_FLOAT, NULL);
                tfs_build_scope_pop(g);
                name_of(g, apply_grads[k], buf);
                if (!(m->grad_feed[i] = tfs_strdup(buf))) {
                    tfs_free(apply_grads);
                    rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
                    goto done;
                }
            }
            k++;
        }
        apply_barrier = tfs_build_group(g, "allreduced_gradients", 0, NULL);
    }
    rc = tfs__optimizer_build(b, &m->opt, vars, apply_grads, n_train, lr, apply_barrier, gs, &ops,
                              &n_ops, st);
    if (apply_grads != grads)
        tfs_free(apply_grads);
    if (rc != TFS_OK)
        goto done;
    int      cap_ops = n_ops; /* the array is full: the next push grows it */
    tfs_out *upd = NULL;
    int      n_upd = 0, cap_upd = 0;
    for (int i = 0; i < b->n_updates; i++) {
        tfs_build_control(g, b->updates[i], barrier);
        if (spec->data_parallel)
            tfs__outs_push(g, &upd, &n_upd, &cap_upd, b->updates[i]);
        else
            tfs__outs_push(g, &ops, &n_ops, &cap_ops, b->updates[i]);
    }
    if (spec->data_parallel) {
        /* The gradient run's target: the barrier (so check_numerics' checks run) and the
         * BatchNorm updates. */
        tfs__outs_push(g, &upd, &n_upd, &cap_upd, barrier);
        tfs_out u = tfs_build_group(g, "gradient_run", n_upd, upd);
        snprintf(m->updates_op, sizeof m->updates_op, "%s",
                 tfs_out_ok(u) ? tfs_graph_node_name(g, u.node) : "");
    }
    tfs_free(upd);
    tfs_out train_op = tfs_build_group(g, "train_op", n_ops, ops);

    /* Inference-mode forward for evaluation and prediction. */
    tfs_build_scope_push(g, "eval");
    tfs_out elogits;
    tfs_out out = tfs__layers_forward(b, spec, layers, x, false, &elogits);
    tfs_out eper = per_example_loss(g, spec->loss, elogits, y, last->out_rank);
    tfs_out eloss = tfs_build_reduce_all(g, "Sum", eper, 1);
    tfs_out ecorrect = correct_count(g, spec->loss, elogits, y, last->out_rank);
    tfs_out pred = out;
    if (spec->loss == TFS_LOSS_SPARSE_SOFTMAX_XENT || spec->loss == TFS_LOSS_SOFTMAX_XENT)
        pred = tfs_build_unary(g, "Softmax", elogits);
    else if (spec->loss == TFS_LOSS_SIGMOID_XENT)
        pred = tfs_build_unary(g, "Sigmoid", elogits);
    tfs_build_scope_pop(g);

    /* Restore: one Assign per variable from a placeholder. The optimizer added slot variables
     * after the gradients were named: grad_name grows to cover them (NULL: no gradient). */
    char **gn = tfs_realloc(m->grad_name, ((size_t)b->n_vars + 1) * sizeof *gn);
    if (!gn) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
        goto done;
    }
    for (int i = n_vars_at_gradients; i <= b->n_vars; i++)
        gn[i] = NULL;
    m->grad_name = gn;
    if (m->grad_feed) {
        char **gf = tfs_realloc(m->grad_feed, ((size_t)b->n_vars + 1) * sizeof *gf);
        if (!gf) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
            goto done;
        }
        for (int i = n_vars_at_gradients; i <= b->n_vars; i++)
            gf[i] = NULL;
        m->grad_feed = gf;
    }
    m->n_grad = b->n_vars;
    m->n_vars = b->n_vars;
    m->var_names = tfs_calloc((size_t)b->n_vars + 1, sizeof *m->var_names);
    m->var_weight = tfs_calloc((size_t)b->n_vars + 1, sizeof *m->var_weight);
    m->restore_feed = tfs_calloc((size_t)b->n_vars + 1, sizeof *m->restore_feed);
    m->restore_op = tfs_calloc((size_t)b->n_vars + 1, sizeof *m->restore_op);
    if (!m->var_names || !m->var_weight || !m->restore_feed || !m->restore_op) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
        goto done;
    }
    for (int i = 0; i < b->n_vars; i++) {
        tfs_out     v = b->vars[i].var;
        const char *vn = tfs_graph_node_name(g, v.node);
        tfs_build_scope_push(g, vn);
        const tfs_attr_value *dt = tfs_graph_node_attr(g, v.node, "dtype");
        tfs_out               p =
            tfs_build_placeholder(g, "restore_value", dt ? dt->type : TFS_DTYPE_FLOAT, NULL);
        tfs_out a = tfs_build_op(g, "Assign", "restore", 2, (tfs_out[]){v, p});
        if (tfs_out_ok(a))
            tfs_graph_set_attr_bool(g, a.node, "validate_shape", true);
        tfs_build_scope_pop(g);
        char buf[256];
        m->var_names[i] = tfs_strdup(vn);
        m->var_weight[i] = b->vars[i].weight;
        name_of(g, p, buf);
        m->restore_feed[i] = tfs_strdup(buf);
        m->restore_op[i] = tfs_strdup(tfs_out_ok(a) ? tfs_graph_node_name(g, a.node) : "");
        if (!m->var_names[i] || !m->restore_feed[i] || !m->restore_op[i]) {
            rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building the model");
            goto done;
        }
    }
    name_of(g, x, m->x);
    name_of(g, y, m->y);
    name_of(g, lr, m->lr);
    name_of(g, loss, m->loss);
    name_of(g, correct, m->correct);
    snprintf(m->train_op, sizeof m->train_op, "%s",
             tfs_out_ok(train_op) ? tfs_graph_node_name(g, train_op.node) : "");
    name_of(g, eloss, m->eval_loss);
    name_of(g, ecorrect, m->eval_correct);
    name_of(g, pred, m->predict);
    name_of(g, gs, m->global_step);
    rc = tfs_graph_status(g, st);
done:
    tfs_free(vars);
    tfs_free(grads);
    tfs_free(ops);
    tfs_free(deps);
    tfs_free(checks);
    return rc;
}

/* Runs every variable's initializer (a group built after the graph is complete). */
static enum tfs_code initialize(tfs_model *m, tfs_build_ctx *b, const char *init_name,
                                tfs_status *st)
{
    (void)b;
    const char *target = init_name;
    return tfs_session_run(m->s, NULL, 0, NULL, 0, &target, 1, NULL, st);
}

enum tfs_code tfs_model_new(const tfs_model_spec *spec, const tfs_optimizer_spec *opt,
                            tfs_model **out, tfs_status *st)
{
    *out = NULL;
    tfs_model    *m = tfs_calloc(1, sizeof *m);
    tfs_layer    *layers = NULL;
    tfs_build_ctx b = {0};
    enum tfs_code rc;
    if (!m || spec->n_layers < 1 || !spec->layers) {
        rc = m ? TFS_ERR(st, TFS_INVALID_ARGUMENT, "a model needs at least one layer")
               : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a model");
        goto fail;
    }
    m->spec = *spec;
    m->opt = opt ? *opt : tfs_optimizer_spec_default();
    m->layers_spec = tfs_calloc((size_t)spec->n_layers, sizeof *m->layers_spec);
    layers = tfs_calloc((size_t)spec->n_layers, sizeof *layers);
    if (!m->layers_spec || !layers) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a model");
        goto fail;
    }
    memcpy(m->layers_spec, spec->layers, (size_t)spec->n_layers * sizeof *m->layers_spec);
    m->spec.layers = m->layers_spec;
    if (m->spec.seed == 0)
        m->spec.seed = 1;
    if ((rc = tfs__layers_plan(&m->spec, layers, st)) != TFS_OK)
        goto fail;
    if ((rc = check_loss_fits(&m->spec, &layers[spec->n_layers - 1], st)) != TFS_OK)
        goto fail;
    if ((rc = tfs_graph_new(&b.g, st)) != TFS_OK)
        goto fail;
    b.seed = m->spec.seed;
    if ((rc = build(m, &b, layers, st)) != TFS_OK)
        goto fail;
    tfs_out *inits = tfs_calloc((size_t)b.n_vars + 1, sizeof *inits);
    if (!inits) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a model");
        goto fail;
    }
    for (int i = 0; i < b.n_vars; i++)
        inits[i] = b.vars[i].init;
    tfs_out init = tfs_build_group(b.g, "init", b.n_vars, inits);
    tfs_free(inits);
    char init_name[256];
    snprintf(init_name, sizeof init_name, "%s",
             tfs_out_ok(init) ? tfs_graph_node_name(b.g, init.node) : "");
    if ((rc = tfs_graph_finalize(b.g, st)) != TFS_OK)
        goto fail;
    if ((rc = tfs_session_new(b.g, NULL, &m->s, st)) != TFS_OK)
        goto fail;
    m->g = b.g;
    b.g = NULL;
    if ((rc = initialize(m, &b, init_name, st)) != TFS_OK) {
        tfs_status_prefix(st, "initializing the model's variables");
        goto fail;
    }
    tfs__build_ctx_free(&b);
    tfs_free(layers);
    *out = m;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_graph_unref(b.g);
    tfs__build_ctx_free(&b);
    tfs_free(layers);
    tfs_model_free(m);
    return rc;
}

void tfs_model_free(tfs_model *m)
{
    if (!m)
        return;
    tfs_session_free(m->s);
    tfs_graph_unref(m->g);
    for (int i = 0; i < m->n_vars; i++) {
        if (m->var_names)
            tfs_free(m->var_names[i]);
        if (m->restore_feed)
            tfs_free(m->restore_feed[i]);
        if (m->restore_op)
            tfs_free(m->restore_op[i]);
    }
    for (int i = 0; i < m->n_grad; i++) {
        tfs_free(m->grad_name[i]);
        if (m->grad_feed)
            tfs_free(m->grad_feed[i]);
    }
    tfs_free(m->grad_name);
    tfs_free(m->grad_feed);
    tfs_free(m->var_names);
    tfs_free(m->var_weight);
    tfs_free(m->restore_feed);
    tfs_free(m->restore_op);
    tfs_free(m->layers_spec);
    tfs_free(m);
}

/* ---- running -------------------------------------------------------------------------------- */

static double scalar_value(const tfs_tensor *t)
{
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:
        return *(const float *)t->data;
    case TFS_DTYPE_DOUBLE:
        return *(const double *)t->data;
    case TFS_DTYPE_INT32:
        return *(const int32_t *)t->data;
    case TFS_DTYPE_INT64:
        return (double)*(const int64_t *)t->data;
    default:
        return NAN;
    }
}

enum tfs_code tfs_model_train_step(tfs_model *m, tfs_tensor *x, tfs_tensor *y, double *loss,
                                   int64_t *correct, tfs_status *st)
{
    if (m->grad_feed)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "a model built for data-parallel steps trains through "
                       "tfs_model_compute_gradients and tfs_model_apply_gradients");
    tfs_tensor   *lr = NULL;
    enum tfs_code rc = tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &lr, st);
    if (rc != TFS_OK)
        return rc;
    *(float *)lr->data = (float)tfs_optimizer_learning_rate(&m->opt, m->step);
    tfs_feed    feeds[3] = {{m->x, x}, {m->y, y}, {m->lr, lr}};
    bool        has_correct = m->correct[0] != '\0';
    const char *fetches[2] = {m->loss, m->correct};
    const char *target = m->train_op;
    tfs_tensor *out[2] = {NULL, NULL};
    rc = tfs_session_run(m->s, feeds, 3, fetches, has_correct ? 2 : 1, &target, 1, out, st);
    tfs_tensor_unref(lr);
    if (rc != TFS_OK) {
        tfs_status_prefix(st, "step %lld", (long long)m->step + 1);
        return rc;
    }
    m->step++;
    double l = scalar_value(out[0]);
    if (loss)
        *loss = l;
    if (correct)
        *correct = has_correct ? (int64_t)scalar_value(out[1]) : 0;
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    if (!isfinite(l))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "step %lld: loss is %s", (long long)m->step,
                       isnan(l) ? "nan" : "inf");
    return TFS_OK;
}

/* The session's fetch hook during a gradient run: fetch index to variable index. */
typedef struct gradient_hook {
    const int            *var_of;   /* [fetches]; -1: not a gradient */
    int                   n;
    tfs_model_gradient_fn ready;
    void                 *arg;
} gradient_hook;

static void on_fetch(int fetch, const tfs_tensor *t, void *arg)
{
    const gradient_hook *h = arg;
    if (fetch < 0)
        h->ready(-1, NULL, h->arg);
    else if (fetch < h->n && h->var_of[fetch] >= 0 && t->dtype == TFS_DTYPE_FLOAT)
        h->ready(h->var_of[fetch], t, h->arg);
}

enum tfs_code tfs_model_compute_gradients(tfs_model *m, tfs_tensor *x, tfs_tensor *y,
                                          tfs_model_gradient_fn ready, void *arg,
                                          tfs_tensor **grads, double *loss, int64_t *correct,
                                          tfs_status *st)
{
    for (int i = 0; i < m->n_vars; i++)
        grads[i] = NULL;
    if (!m->grad_feed)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "the model was not built for data-parallel steps (spec.data_parallel)");
    bool         has_correct = m->correct[0] != '\0';
    int          nf = 0;
    const char **fetches = tfs_calloc((size_t)m->n_vars + 2, sizeof *fetches);
    int         *var_of = tfs_calloc((size_t)m->n_vars + 2, sizeof *var_of);
    tfs_tensor **out = tfs_calloc((size_t)m->n_vars + 2, sizeof *out);
    enum tfs_code rc = TFS_OK;
    if (!fetches || !var_of || !out) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a step");
        goto done;
    }
    var_of[nf] = -1;
    fetches[nf++] = m->loss;
    if (has_correct) {
        var_of[nf] = -1;
        fetches[nf++] = m->correct;
    }
    int first_grad = nf;
    for (int i = 0; i < m->n_grad; i++)
        if (m->grad_feed[i]) {
            var_of[nf] = i;
            fetches[nf++] = m->grad_name[i];
        }
    tfs_feed    feeds[2] = {{m->x, x}, {m->y, y}};
    const char   *target = m->updates_op;
    gradient_hook hook = {var_of, nf, ready, arg};
    if (ready)
        tfs_session_set_thread_fetch_hook(on_fetch, &hook);
    rc = tfs_session_run(m->s, feeds, 2, fetches, nf, &target, target[0] ? 1 : 0, out, st);
    if (ready)
        tfs_session_set_thread_fetch_hook(NULL, NULL);
    if (rc != TFS_OK) {
        tfs_status_prefix(st, "step %lld", (long long)m->step + 1);
        goto done;
    }
    if (loss)
        *loss = scalar_value(out[0]);
    if (correct)
        *correct = has_correct ? (int64_t)scalar_value(out[1]) : 0;
    for (int k = first_grad; k < nf; k++) {
        if (out[k]->dtype != TFS_DTYPE_FLOAT) {
            rc = TFS_ERR(st, TFS_UNIMPLEMENTED, "the gradient of '%s' is %s: data-parallel "
                         "steps average float gradients only", m->var_names[var_of[k]],
                         tfs_dtype_short_name(out[k]->dtype));
            goto done;
        }
    }
    for (int k = first_grad; k < nf; k++) {
        grads[var_of[k]] = out[k];
        out[k] = NULL;
    }
done:
    for (int k = 0; out && k < nf; k++)
        tfs_tensor_unref(out[k]);
    tfs_free(out);
    tfs_free(fetches);
    tfs_free(var_of);
    return rc;
}

enum tfs_code tfs_model_apply_gradients(tfs_model *m, tfs_tensor *const *grads, double lr_scale,
                                        tfs_status *st)
{
    if (!m->grad_feed)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "the model was not built for data-parallel steps (spec.data_parallel)");
    tfs_tensor   *lr = NULL;
    tfs_feed     *feeds = tfs_calloc((size_t)m->n_vars + 1, sizeof *feeds);
    enum tfs_code rc = feeds ? tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &lr, st)
                             : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a step");
    if (rc != TFS_OK)
        goto done;
    *(float *)lr->data = (float)(tfs_optimizer_learning_rate(&m->opt, m->step) * lr_scale);
    int nf = 0;
    feeds[nf++] = (tfs_feed){m->lr, lr};
    for (int i = 0; i < m->n_grad; i++)
        if (m->grad_feed[i]) {
            if (!grads[i]) {
                rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "no gradient given for '%s'",
                             m->var_names[i]);
                goto done;
            }
            feeds[nf++] = (tfs_feed){m->grad_feed[i], grads[i]};
        }
    const char *target = m->train_op;
    rc = tfs_session_run(m->s, feeds, nf, NULL, 0, &target, 1, NULL, st);
    if (rc != TFS_OK) {
        tfs_status_prefix(st, "step %lld", (long long)m->step + 1);
        goto done;
    }
    m->step++;
done:
    tfs_tensor_unref(lr);
    tfs_free(feeds);
    return rc;
}

enum tfs_code tfs_model_eval_batch(tfs_model *m, tfs_tensor *x, tfs_tensor *y, double *loss_sum,
                                   int64_t *correct, tfs_status *st)
{
    tfs_feed      feeds[2] = {{m->x, x}, {m->y, y}};
    bool          has_correct = m->eval_correct[0] != '\0';
    const char   *fetches[2] = {m->eval_loss, m->eval_correct};
    tfs_tensor   *out[2] = {NULL, NULL};
    enum tfs_code rc =
        tfs_session_run(m->s, feeds, 2, fetches, has_correct ? 2 : 1, NULL, 0, out, st);
    if (rc != TFS_OK)
        return rc;
    if (loss_sum)
        *loss_sum = scalar_value(out[0]);
    if (correct)
        *correct = has_correct ? (int64_t)scalar_value(out[1]) : 0;
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    return TFS_OK;
}

enum tfs_code tfs_model_predict(tfs_model *m, tfs_tensor *x, tfs_tensor **out, tfs_status *st)
{
    tfs_feed    feed = {m->x, x};
    const char *fetch = m->predict;
    return tfs_session_run(m->s, &feed, 1, &fetch, 1, NULL, 0, out, st);
}

int64_t tfs_model_accuracy_units(const tfs_model *m, const tfs_tensor *y)
{
    switch (m->spec.loss) {
    case TFS_LOSS_SPARSE_SOFTMAX_XENT:
    case TFS_LOSS_SOFTMAX_XENT:
        return y->rank > 0 ? y->dims[0] : 0;
    case TFS_LOSS_SIGMOID_XENT:
        return y->nelem;
    default:
        return 0;
    }
}

int64_t tfs_model_global_step(const tfs_model *m)
{
    return m->step;
}

double tfs_model_learning_rate(const tfs_model *m)
{
    return tfs_optimizer_learning_rate(&m->opt, m->step);
}

/* ---- variables ------------------------------------------------------------------------------ */

int tfs_model_variable_count(const tfs_model *m)
{
    return m->n_vars;
}

const char *tfs_model_variable_name(const tfs_model *m, int i)
{
    return i >= 0 && i < m->n_vars ? m->var_names[i] : NULL;
}

bool tfs_model_variable_is_weight(const tfs_model *m, int i)
{
    return i >= 0 && i < m->n_vars && m->var_weight[i];
}

bool tfs_model_variable_has_gradient(const tfs_model *m, int i)
{
    return i >= 0 && i < m->n_grad && m->grad_name[i] != NULL;
}

int tfs_model_variable_find(const tfs_model *m, const char *name)
{
    for (int i = 0; name && i < m->n_vars; i++)
        if (!strcmp(m->var_names[i], name))
            return i;
    return -1;
}

enum tfs_code tfs_model_variable_value(tfs_model *m, int i, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    if (i < 0 || i >= m->n_vars)
        return TFS_ERR(st, TFS_NOT_FOUND, "variable %d does not exist", i);
    char name[300];
    snprintf(name, sizeof name, "%s:0", m->var_names[i]);
    const char *fetch = name;
    return tfs_session_run(m->s, NULL, 0, &fetch, 1, NULL, 0, out, st);
}

enum tfs_code tfs_model_variable_assign(tfs_model *m, int i, tfs_tensor *value, tfs_status *st)
{
    if (i < 0 || i >= m->n_vars)
        return TFS_ERR(st, TFS_NOT_FOUND, "variable %d does not exist", i);
    tfs_tensor   *cur = NULL;
    enum tfs_code rc = tfs_model_variable_value(m, i, &cur, st);
    if (rc != TFS_OK)
        return rc;
    bool ok = cur->dtype == value->dtype &&
              tfs_shape_equal(cur->rank, cur->dims, value->rank, value->dims);
    char want[128], got[128];
    tfs_shape_str(cur->rank, cur->dims, want, sizeof want);
    tfs_shape_str(value->rank, value->dims, got, sizeof got);
    enum tfs_dtype wdt = cur->dtype;
    tfs_tensor_unref(cur);
    if (!ok)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "variable '%s': expected %s %s, got %s %s",
                       m->var_names[i], tfs_dtype_short_name(wdt), want,
                       tfs_dtype_short_name(value->dtype), got);
    tfs_feed    feed = {m->restore_feed[i], value};
    const char *target = m->restore_op[i];
    rc = tfs_session_run(m->s, &feed, 1, NULL, 0, &target, 1, NULL, st);
    if (rc == TFS_OK && !strcmp(m->var_names[i], "global_step"))
        m->step = *(const int64_t *)value->data;
    return rc;
}

enum tfs_code tfs_model_gradient(tfs_model *m, int i, tfs_tensor *x, tfs_tensor *y,
                                 tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    if (i < 0 || i >= m->n_grad || !m->grad_name[i])
        return TFS_ERR(st, TFS_NOT_FOUND, "variable %d has no gradient", i);
    /* The run draws dropout masks: put the generators back afterwards, so that asking for a
     * gradient (TensorBoard histograms) leaves the steps' random numbers, and resume
     * equality, as they were. */
    tfs_tensor   *rng = NULL;
    enum tfs_code rc = tfs_model_rng_state(m, &rng, st);
    if (rc != TFS_OK)
        return rc;
    tfs_feed    feeds[2] = {{m->x, x}, {m->y, y}};
    const char *fetch = m->grad_name[i];
    rc = tfs_session_run(m->s, feeds, 2, &fetch, 1, NULL, 0, out, st);
    if (rng) {
        tfs_status    rst;
        enum tfs_code rrc = tfs_model_set_rng_state(m, rng, &rst);
        if (rrc != TFS_OK && rc == TFS_OK) {
            tfs_tensor_unref(*out);
            *out = NULL;
            rc = rrc;
            if (st)
                *st = rst;
        }
        tfs_tensor_unref(rng);
    }
    return rc;
}

enum tfs_code tfs_model_rng_state(tfs_model *m, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    int n = tfs_session_rng_state_count(m->s);
    if (n == 0)
        return TFS_OK;
    tfs_tensor   *t = NULL;
    enum tfs_code rc = tfs_tensor_new(TFS_DTYPE_INT64, 2, (int64_t[]){n, 3}, &t, st);
    int64_t      *v = t ? t->data : NULL;
    for (int i = 0; rc == TFS_OK && i < n; i++) {
        tfs_rng_state r;
        rc = tfs_session_rng_state_get(m->s, i, NULL, NULL, &r, st);
        v[3 * i] = (int64_t)r.key;
        v[3 * i + 1] = (int64_t)r.counter_lo;
        v[3 * i + 2] = (int64_t)r.counter_hi;
    }
    if (rc != TFS_OK) {
        tfs_tensor_unref(t);
        return rc;
    }
    *out = t;
    return TFS_OK;
}

enum tfs_code tfs_model_set_rng_state(tfs_model *m, const tfs_tensor *t, tfs_status *st)
{
    int n = tfs_session_rng_state_count(m->s);
    if (t->dtype != TFS_DTYPE_INT64 || t->rank != 2 || t->dims[0] != n || t->dims[1] != 3)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "random generator state: expected int64 "
                       "[%d, 3] for this model",
                       n);
    const int64_t *v = t->data;
    for (int i = 0; i < n; i++) {
        tfs_rng_state r = {(uint64_t)v[3 * i], (uint64_t)v[3 * i + 1], (uint64_t)v[3 * i + 2]};
        enum tfs_code rc = tfs_session_rng_state_set(m->s, i, &r, st);
        if (rc != TFS_OK)
            return rc;
    }
    return TFS_OK;
}

const tfs_model_spec *tfs__model_spec(const tfs_model *m)
{
    return &m->spec;
}

const tfs_graph *tfs_model_graph(const tfs_model *m)
{
    return m->g;
}
