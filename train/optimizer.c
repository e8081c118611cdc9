/* Optimizers (model.h) as TensorFlow's training ops: each trainable variable gets its slot
 * variables (named "<var>/<Optimizer>[_k]" as TF1's optimizers name them) and one Apply* node;
 * gradients are clipped first when asked (tf.clip_by_value, tf.clip_by_norm,
 * tf.clip_by_global_norm). The learning rate is a placeholder fed every step, computed on the
 * host from global_step by the schedule, so schedules change values and never the graph.
 */
#include "train/model-impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[TFS_OPT_COUNT] = {
    [TFS_OPT_SGD] = "sgd",         [TFS_OPT_MOMENTUM] = "momentum", [TFS_OPT_ADAM] = "adam",
    [TFS_OPT_RMSPROP] = "rmsprop", [TFS_OPT_ADAGRAD] = "adagrad",
};

bool tfs_optimizer_parse(const char *name, enum tfs_optimizer_kind *out)
{
    for (int i = 0; i < TFS_OPT_COUNT; i++)
        if (name && !strcmp(name, NAMES[i])) {
            *out = (enum tfs_optimizer_kind)i;
            return true;
        }
    return false;
}

const char *tfs_optimizer_name(enum tfs_optimizer_kind k)
{
    return k >= 0 && k < TFS_OPT_COUNT ? NAMES[k] : "?";
}

tfs_optimizer_spec tfs_optimizer_spec_default(void)
{
    tfs_optimizer_spec o;
    memset(&o, 0, sizeof o);
    o.kind = TFS_OPT_ADAM;
    o.learning_rate = 0.001;
    o.momentum = 0.0;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.epsilon = 1e-7;
    o.rho = 0.9;
    o.initial_accumulator = 0.1;
    o.decay_rate = 1.0;
    return o;
}

double tfs_optimizer_learning_rate(const tfs_optimizer_spec *o, int64_t step)
{
    double lr = o->learning_rate;
    switch (o->schedule) {
    case TFS_LR_EXPONENTIAL:
        if (o->decay_steps > 0) {
            double p = (double)step / (double)o->decay_steps;
            lr *= pow(o->decay_rate, o->staircase ? floor(p) : p);
        }
        break;
    case TFS_LR_PIECEWISE: {
        int i = 0;
        while (i < o->n_pieces && step > o->boundaries[i])
            i++;
        lr = o->values[i];
        break;
    }
    case TFS_LR_COSINE:
        if (o->decay_steps > 0) {
            double s = (double)(step < o->decay_steps ? step : o->decay_steps);
            double cosine = 0.5 * (1.0 + cos(M_PI * s / (double)o->decay_steps));
            lr *= (1.0 - o->alpha) * cosine + o->alpha;
        }
        break;
    default:
        break;
    }
    if (o->warmup_steps > 0 && step < o->warmup_steps)
        lr *= (double)(step + 1) / (double)o->warmup_steps;
    return lr;
}

/* ---- graph ---------------------------------------------------------------------------------- */

static tfs_out scalar(tfs_build_ctx *b, double v)
{
    return tfs_build_scalar(b->g, TFS_DTYPE_FLOAT, v);
}

/* sqrt(sum(t^2)) of one tensor (2 * L2Loss). */
static tfs_out l2_norm(tfs_build_ctx *b, tfs_out t)
{
    tfs_out sq = tfs_build_binary(b->g, "Mul", tfs_build_unary(b->g, "L2Loss", t), scalar(b, 2));
    return tfs_build_unary(b->g, "Sqrt", sq);
}

/* t * clip / max(norm, clip). */
static tfs_out rescale(tfs_build_ctx *b, tfs_out t, tfs_out norm, double clip)
{
    tfs_out c = scalar(b, clip);
    tfs_out f = tfs_build_binary(b->g, "RealDiv", c, tfs_build_binary(b->g, "Maximum", norm, c));
    return tfs_build_binary(b->g, "Mul", t, f);
}

static void clip(tfs_build_ctx *b, const tfs_optimizer_spec *o, tfs_out *grads, int n)
{
    tfs_graph *g = b->g;
    tfs_build_scope_push(g, "clip");
    if (o->clip_value > 0)
        for (int i = 0; i < n; i++) {
            tfs_out in[3] = {grads[i], scalar(b, -o->clip_value), scalar(b, o->clip_value)};
            grads[i] = tfs_build_op(g, "ClipByValue", NULL, 3, in);
        }
    if (o->clip_norm > 0)
        for (int i = 0; i < n; i++)
            grads[i] = rescale(b, grads[i], l2_norm(b, grads[i]), o->clip_norm);
    if (o->clip_global_norm > 0 && n > 0) {
        tfs_out *sq = tfs_calloc((size_t)n, sizeof *sq);
        if (!sq) {
            tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "out of memory clipping gradients");
        } else {
            for (int i = 0; i < n; i++)
                sq[i] = tfs_build_unary(g, "L2Loss", grads[i]);
            tfs_out total = tfs_build_binary(g, "Mul", tfs_build_add_n(g, n, sq), scalar(b, 2));
            tfs_out norm = tfs_build_unary(g, "Sqrt", total);
            for (int i = 0; i < n; i++)
                grads[i] = rescale(b, grads[i], norm, o->clip_global_norm);
            tfs_free(sq);
        }
    }
    tfs_build_scope_pop(g);
}

/* A slot variable "<var>/<slot>" shaped like var, filled with v. */
static tfs_out slot(tfs_build_ctx *b, tfs_out var, const char *slot_name, double v)
{
    tfs_graph            *g = b->g;
    const tfs_attr_value *sa = tfs_graph_node_attr(g, var.node, "shape");
    char                  name[256];
    snprintf(name, sizeof name, "%s/%s", tfs_graph_node_name(g, var.node), slot_name);
    if (!sa || sa->kind != TFS_ATTR_SHAPE || sa->shape.rank < 0) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "variable '%s' has no static shape",
                            tfs_graph_node_name(g, var.node));
        return TFS_OUT_NONE;
    }
    /* Slots live at the top scope, named after their variable. */
    const tfs_shape *s = &sa->shape;
    tfs_out          in[2] = {tfs_build_ints(g, s->rank, s->dims), scalar(b, v)};
    tfs_out          init = tfs_build_op(g, "Fill", NULL, 2, in);
    return tfs__model_variable(b, name, s->dims, s->rank, TFS_DTYPE_FLOAT, init, false, false);
}

static tfs_out scalar_var(tfs_build_ctx *b, const char *name, double v)
{
    return tfs__model_variable(b, name, NULL, 0, TFS_DTYPE_FLOAT, scalar(b, v), false, false);
}

static tfs_out apply(tfs_build_ctx *b, const char *op, int n, const tfs_out *in, tfs_out barrier)
{
    tfs_out a = tfs_build_op(b->g, op, NULL, n, in);
    if (tfs_out_ok(a)) {
        tfs_graph_set_attr_bool(b->g, a.node, "use_locking", false);
        tfs_build_control(b->g, a, barrier);
    }
    return a;
}

enum tfs_code tfs__optimizer_build(tfs_build_ctx *b, const tfs_optimizer_spec *o,
                                   const tfs_out *vars, tfs_out *grads, int n, tfs_out lr,
                                   tfs_out barrier, tfs_out global_step, tfs_out **ops, int *n_ops,
                                   tfs_status *st)
{
    tfs_graph *g = b->g;
    int        cap = 0;
    *ops = NULL;
    *n_ops = 0;
    if ((unsigned)o->kind >= TFS_OPT_COUNT || !(o->learning_rate >= 0))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "optimizer: unknown kind or negative learning "
                       "rate");
    clip(b, o, grads, n);
    tfs_out beta1_power = TFS_OUT_NONE, beta2_power = TFS_OUT_NONE;
    if (o->kind == TFS_OPT_ADAM) {
        beta1_power = scalar_var(b, "beta1_power", o->beta1);
        beta2_power = scalar_var(b, "beta2_power", o->beta2);
    }
    const char *scope = o->kind == TFS_OPT_ADAM       ? "Adam"
                        : o->kind == TFS_OPT_MOMENTUM ? "Momentum"
                        : o->kind == TFS_OPT_RMSPROP  ? "RMSProp"
                        : o->kind == TFS_OPT_ADAGRAD  ? "Adagrad"
                                                      : "GradientDescent";
    for (int i = 0; i < n; i++) {
        tfs_out v = vars[i], gr = grads[i], a = TFS_OUT_NONE;
        if (!tfs_out_ok(gr))
            continue;
        switch (o->kind) {
        case TFS_OPT_SGD: {
            tfs_build_scope_push(g, scope);
            tfs_out in[3] = {v, lr, gr};
            a = apply(b, "ApplyGradientDescent", 3, in, barrier);
            break;
        }
        case TFS_OPT_MOMENTUM: {
            tfs_out acc = slot(b, v, "Momentum", 0);
            tfs_build_scope_push(g, scope);
            tfs_out in[5] = {v, acc, lr, gr, scalar(b, o->momentum)};
            a = apply(b, "ApplyMomentum", 5, in, barrier);
            if (tfs_out_ok(a))
                tfs_graph_set_attr_bool(g, a.node, "use_nesterov", o->nesterov);
            break;
        }
        case TFS_OPT_ADAM: {
            tfs_out m = slot(b, v, "Adam", 0), s = slot(b, v, "Adam_1", 0);
            tfs_build_scope_push(g, scope);
            tfs_out in[10] = {v,
                              m,
                              s,
                              beta1_power,
                              beta2_power,
                              lr,
                              scalar(b, o->beta1),
                              scalar(b, o->beta2),
                              scalar(b, o->epsilon),
                              gr};
            a = apply(b, "ApplyAdam", 10, in, barrier);
            if (tfs_out_ok(a))
                tfs_graph_set_attr_bool(g, a.node, "use_nesterov", o->nesterov);
            break;
        }
        case TFS_OPT_RMSPROP: {
            tfs_out mg = o->centered ? slot(b, v, "RMSProp_2", 0) : TFS_OUT_NONE;
            tfs_out ms = slot(b, v, "RMSProp", 0), mom = slot(b, v, "RMSProp_1", 0);
            tfs_build_scope_push(g, scope);
            if (o->centered) {
                tfs_out in[9] = {v,
                                 mg,
                                 ms,
                                 mom,
                                 lr,
                                 scalar(b, o->rho),
                                 scalar(b, o->momentum),
                                 scalar(b, o->epsilon),
                                 gr};
                a = apply(b, "ApplyCenteredRMSProp", 9, in, barrier);
            } else {
                tfs_out in[8] = {v,
                                 ms,
                                 mom,
                                 lr,
                                 scalar(b, o->rho),
                                 scalar(b, o->momentum),
                                 scalar(b, o->epsilon),
                                 gr};
                a = apply(b, "ApplyRMSProp", 8, in, barrier);
            }
            break;
        }
        case TFS_OPT_ADAGRAD: {
            tfs_out acc = slot(b, v, "Adagrad", o->initial_accumulator);
            tfs_build_scope_push(g, scope);
            tfs_out in[5] = {v, acc, lr, scalar(b, o->epsilon), gr};
            a = apply(b, "ApplyAdagradV2", 5, in, barrier);
            if (tfs_out_ok(a))
                tfs_graph_set_attr_bool(g, a.node, "update_slots", true);
            break;
        }
        default:
            break;
        }
        tfs_build_scope_pop(g);
        tfs__outs_push(g, ops, n_ops, &cap, a);
    }
    int n_apply = *n_ops;
    if (o->kind == TFS_OPT_ADAM && n_apply > 0) {
        /* TF1's AdamOptimizer._finish: the beta powers advance after every apply has read them. */
        tfs_build_scope_push(g, scope);
        tfs_out powers[2] = {beta1_power, beta2_power};
        double  betas[2] = {o->beta1, o->beta2};
        for (int k = 0; k < 2; k++) {
            tfs_out next =
                tfs_build_binary(g, "Mul", tfs__model_read(g, powers[k]), scalar(b, betas[k]));
            tfs_out upd = tfs_build_assign(g, powers[k], next);
            for (int i = 0; i < n_apply; i++)
                tfs_build_control(g, upd, (*ops)[i]);
            tfs__outs_push(g, ops, n_ops, &cap, upd);
        }
        tfs_build_scope_pop(g);
    }
    if (tfs_out_ok(global_step)) {
        tfs_out in[2] = {global_step, tfs_build_op(g, "Const", "one", 0, NULL)};
        if (tfs_out_ok(in[1])) {
            tfs_tensor *one = NULL;
            if (tfs_tensor_new_scalar(TFS_DTYPE_INT64, &one, st) != TFS_OK)
                return st ? st->code : TFS_RESOURCE_EXHAUSTED;
            *(int64_t *)one->data = 1;
            tfs_graph_set_attr_tensor(g, in[1].node, "value", one);
            tfs_graph_set_attr_type(g, in[1].node, "dtype", TFS_DTYPE_INT64);
            tfs_tensor_unref(one);
        }
        tfs_out inc = tfs_build_op(g, "AssignAdd", "global_step_inc", 2, in);
        for (int i = 0; i < n_apply; i++)
            tfs_build_control(g, inc, (*ops)[i]);
        tfs__outs_push(g, ops, n_ops, &cap, inc);
    }
    return tfs_graph_status(g, st);
}
