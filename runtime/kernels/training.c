/* CPU kernels of TensorFlow's dense optimizer ops (training_ops): ApplyGradientDescent,
 * ApplyMomentum, ApplyAdam, ApplyRMSProp, ApplyCenteredRMSProp, ApplyAdagrad and ApplyAdagradV2 on
 * reference variables (VariableV2 outputs; the output `out` is the var reference), their Resource*
 * forms on VarHandleOp handles (no outputs), and ResourceApplyKerasMomentum. float and double.
 *
 * DESIGN. One driver (apply_op) does what the ops share; each op is a table entry (input names,
 * where grad is, its bool attr) and an elementwise range function.
 *  - The var and slot inputs name variables. The other inputs are values, dereferenced when a
 *    reference variable feeds them (a learning rate kept in a VariableV2).
 *  - All the op's variables stay locked for the whole update, taken in address order so that ops
 *    sharing variables cannot deadlock: a reader sees all of a step or none of it, and concurrent
 *    steps do not lose updates. That is TensorFlow's use_locking=true; we always lock, so the attr
 *    is accepted and changes nothing.
 *  - Each variable is updated in place when nothing else references its value, and on a copy
 *    otherwise (tfs__variable_update_begin): a training step copies no weights, yet a value that a
 *    fetch or a later node of the same run still holds never changes under its holder.
 *  - The arithmetic follows TensorFlow's CPU functors (training_ops.cc) expression by expression,
 *    in T, so results round as TensorFlow's do. The loops are vectorisable (restrict buffers: the
 *    variables' values are distinct tensors, and grad is never one of them because a value that
 *    grad shares is not exclusive and gets copied) and split by tfs__parallel_for.
 */
#include <tgmath.h>

#include "runtime/runtime-impl.h"

enum { MAX_VARS = 4, MAX_INPUTS = 10, MAX_SCALARS = 6 };

/* What a range function sees: the variables' buffers (updated in place), grad and the scalars. */
typedef struct opt_ctx {
    enum tfs_dtype dt;
    void          *var[MAX_VARS];   /* in input order: var, then the slots */
    const void    *grad;
    double         s[MAX_SCALARS];  /* scalar inputs in input order (exact copies of T values) */
    bool           flag;            /* use_nesterov, or update_slots */
} opt_ctx;

typedef struct opt_spec {
    int          n_in;
    int          n_vars;               /* inputs 0 .. n_vars-1 are variables */
    int          grad;                 /* input index of the gradient (var's shape) */
    const char  *names[MAX_INPUTS];    /* input names as TensorFlow's messages use them */
    const char  *flag;                 /* bool attr besides use_locking, or NULL */
    bool         flag_dflt;
    tfs_range_fn fn;
} opt_spec;

/* Runs the statements in __VA_ARGS__ with T = float or double as c->dt says (block-scope typedef,
 * so each loop is compiled and vectorised for its own type). */
#define FOR_T(c, ...)                                                                              \
    do {                                                                                           \
        if ((c)->dt == TFS_DTYPE_FLOAT) {                                                          \
            typedef float T;                                                                       \
            __VA_ARGS__                                                                            \
        } else {                                                                                   \
            typedef double T;                                                                      \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)

/* ---- the updates (TensorFlow's functors; var -= x is var = var - x) ------------------------- */

/* var -= delta * alpha */
static void gradient_descent_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        const T *restrict g = c->grad;
        const T alpha = (T)c->s[0];
        for (int64_t i = b; i < e; i++)
            var[i] -= g[i] * alpha;
    });
}

/* accum = accum * momentum + grad; var -= lr * accum, or with Nesterov
 * var -= grad * lr + accum * momentum * lr. */
static void momentum_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict acc = c->var[1];
        const T *restrict g = c->grad;
        const T lr = (T)c->s[0], mom = (T)c->s[1];
        if (c->flag) {
            for (int64_t i = b; i < e; i++) {
                acc[i] = acc[i] * mom + g[i];
                var[i] -= g[i] * lr + acc[i] * mom * lr;
            }
        } else {
            for (int64_t i = b; i < e; i++) {
                acc[i] = acc[i] * mom + g[i];
                var[i] -= lr * acc[i];
            }
        }
    });
}

/* Keras' form: accum = accum * momentum - grad * lr; var += accum, or with Nesterov
 * var += accum * momentum - grad * lr. */
static void keras_momentum_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict acc = c->var[1];
        const T *restrict g = c->grad;
        const T lr = (T)c->s[0], mom = (T)c->s[1];
        if (c->flag) {
            for (int64_t i = b; i < e; i++) {
                acc[i] = acc[i] * mom - g[i] * lr;
                var[i] += acc[i] * mom - g[i] * lr;
            }
        } else {
            for (int64_t i = b; i < e; i++) {
                acc[i] = acc[i] * mom - g[i] * lr;
                var[i] += acc[i];
            }
        }
    });
}

/* alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - m) * (1 - beta1);
 * v += (grad^2 - v) * (1 - beta2); var -= m * alpha / (sqrt(v) + epsilon), or with Nesterov
 * var -= (grad * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon). */
static void adam_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict m = c->var[1];
        T *restrict v = c->var[2];
        const T *restrict g = c->grad;
        const T b1p = (T)c->s[0], b2p = (T)c->s[1], lr = (T)c->s[2];
        const T b1 = (T)c->s[3], b2 = (T)c->s[4], eps = (T)c->s[5];
        const T alpha = lr * sqrt((T)1 - b2p) / ((T)1 - b1p);
        const T one_b1 = (T)1 - b1, one_b2 = (T)1 - b2;
        if (c->flag) {
            for (int64_t i = b; i < e; i++) {
                m[i] += (g[i] - m[i]) * one_b1;
                v[i] += (g[i] * g[i] - v[i]) * one_b2;
                var[i] -= ((g[i] * one_b1 + b1 * m[i]) * alpha) / (sqrt(v[i]) + eps);
            }
        } else {
            for (int64_t i = b; i < e; i++) {
                m[i] += (g[i] - m[i]) * one_b1;
                v[i] += (g[i] * g[i] - v[i]) * one_b2;
                var[i] -= (m[i] * alpha) / (sqrt(v[i]) + eps);
            }
        }
    });
}

/* ms += (grad^2 - ms) * (1 - rho); mom = mom * momentum + grad * lr / sqrt(ms + epsilon);
 * var -= mom. */
static void rms_prop_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict ms = c->var[1];
        T *restrict mom = c->var[2];
        const T *restrict g = c->grad;
        const T lr = (T)c->s[0], rho = (T)c->s[1], momentum = (T)c->s[2], eps = (T)c->s[3];
        const T one_rho = (T)1 - rho;
        for (int64_t i = b; i < e; i++) {
            ms[i] += (g[i] * g[i] - ms[i]) * one_rho;
            mom[i] = mom[i] * momentum + (g[i] * lr) / sqrt(ms[i] + eps);
            var[i] -= mom[i];
        }
    });
}

/* As RMSProp, with the mean gradient mg += (grad - mg) * (1 - rho) taken off the second moment:
 * mom = mom * momentum + grad * lr / sqrt(ms - mg^2 + epsilon). */
static void centered_rms_prop_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict mg = c->var[1];
        T *restrict ms = c->var[2];
        T *restrict mom = c->var[3];
        const T *restrict g = c->grad;
        const T lr = (T)c->s[0], rho = (T)c->s[1], momentum = (T)c->s[2], eps = (T)c->s[3];
        const T one_rho = (T)1 - rho;
        for (int64_t i = b; i < e; i++) {
            ms[i] += (g[i] * g[i] - ms[i]) * one_rho;
            mg[i] += (g[i] - mg[i]) * one_rho;
            const T denom = (ms[i] - mg[i] * mg[i]) + eps;
            mom[i] = mom[i] * momentum + (g[i] * lr) / sqrt(denom);
            var[i] -= mom[i];
        }
    });
}

/* accum += grad^2 (when update_slots); var -= grad * lr * rsqrt(accum). */
static void adagrad_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict acc = c->var[1];
        const T *restrict g = c->grad;
        const T lr = (T)c->s[0];
        if (c->flag)
            for (int64_t i = b; i < e; i++)
                acc[i] += g[i] * g[i];
        for (int64_t i = b; i < e; i++)
            var[i] -= g[i] * lr * ((T)1 / sqrt(acc[i]));
    });
}

/* accum += grad^2 (when update_slots); var -= grad * lr / (sqrt(accum) + epsilon). */
static void adagrad_v2_range(void *arg, int64_t b, int64_t e)
{
    const opt_ctx *c = arg;
    FOR_T(c, {
        T *restrict var = c->var[0];
        T *restrict acc = c->var[1];
        const T *restrict g = c->grad;
        const T lr = (T)c->s[0], eps = (T)c->s[1];
        if (c->flag)
            for (int64_t i = b; i < e; i++)
                acc[i] += g[i] * g[i];
        for (int64_t i = b; i < e; i++)
            var[i] -= g[i] * lr / (sqrt(acc[i]) + eps);
    });
}

/* ---- the ops' input layouts (TensorFlow's op definitions) ----------------------------------- */

static const opt_spec GRADIENT_DESCENT = {
    3, 1, 2, {"var", "alpha", "delta"}, NULL, false, gradient_descent_range};
static const opt_spec MOMENTUM = {
    5, 2, 3, {"var", "accum", "lr", "grad", "momentum"}, "use_nesterov", false, momentum_range};
static const opt_spec KERAS_MOMENTUM = {
    5, 2, 3, {"var", "accum", "lr", "grad", "momentum"}, "use_nesterov", false,
    keras_momentum_range};
static const opt_spec ADAM = {
    10, 3, 9,
    {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
    "use_nesterov", false, adam_range};
static const opt_spec RMS_PROP = {
    8, 3, 7, {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, NULL, false,
    rms_prop_range};
static const opt_spec CENTERED_RMS_PROP = {
    9, 4, 8, {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, NULL, false,
    centered_rms_prop_range};
static const opt_spec ADAGRAD = {
    4, 2, 3, {"var", "accum", "lr", "grad"}, "update_slots", true, adagrad_range};
static const opt_spec ADAGRAD_V2 = {
    5, 2, 4, {"var", "accum", "lr", "epsilon", "grad"}, "update_slots", true, adagrad_v2_range};

/* ---- the driver ----------------------------------------------------------------------------- */

/* Elements per tfs__parallel_for range: well above the cost of handing out a range. */
#define OPT_GRAIN 16384

/* Attr T, or var's dtype when the node lacks it; float or double. */
static enum tfs_code opt_dtype(const tfs_node *n, const tfs_variable *var, enum tfs_dtype *T,
                               tfs_status *st)
{
    *T = var->dtype;
    if (tfs__attr(n, "T")) {
        enum tfs_code rc = tfs__attr_type(n, "T", T, st);
        if (rc != TFS_OK)
            return rc;
    }
    if (*T != TFS_DTYPE_FLOAT && *T != TFS_DTYPE_DOUBLE)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "%s of dtype %s is not supported (float and double are)", n->op_type,
                             tfs_dtype_short_name(*T));
    return TFS_OK;
}

/* Checks the value inputs' dtypes and the scalars' shapes (a scalar, or one element in a vector
 * as TensorFlow's legacy scalars) and copies the scalars into c->s. */
static enum tfs_code opt_values(const tfs_node *n, const opt_spec *sp, tfs_tensor *const *vals,
                                enum tfs_dtype T, opt_ctx *c, tfs_status *st)
{
    char sh[128];
    int j = 0;
    for (int i = sp->n_vars; i < sp->n_in; i++) {
        const tfs_tensor *t = vals[i];
        if (t->dtype != T)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be %s, got %s",
                                 sp->names[i], tfs_dtype_short_name(T),
                                 tfs_dtype_short_name(t->dtype));
        if (i == sp->grad)
            continue;
        if (t->nelem != 1 || t->rank > 1)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s is not a scalar: %s",
                                 sp->names[i], tfs_shape_str(t->rank, t->dims, sh, sizeof sh));
        c->s[j++] = T == TFS_DTYPE_FLOAT ? (double)*(const float *)t->data
                                         : *(const double *)t->data;
    }
    return TFS_OK;
}

/* With every variable locked: all initialized, slots and grad of var's shape. */
static enum tfs_code opt_check_locked(const tfs_node *n, const opt_spec *sp,
                                      tfs_variable *const *vars, const tfs_tensor *grad,
                                      tfs_status *st)
{
    for (int i = 0; i < sp->n_vars; i++)
        if (!vars[i]->value)
            return tfs__node_err(n, st, TFS_FAILED_PRECONDITION,
                                 "Attempting to use uninitialized variables: %s", vars[i]->name);
    const tfs_tensor *var = vars[0]->value;
    char a[128], b[128];
    for (int i = 1; i <= sp->n_vars; i++) {
        const tfs_tensor *t = i < sp->n_vars ? vars[i]->value : grad;
        if (!tfs_shape_equal(var->rank, var->dims, t->rank, t->dims))
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "var and %s do not have the same shape: %s vs. %s",
                                 sp->names[i < sp->n_vars ? i : sp->grad],
                                 tfs_shape_str(var->rank, var->dims, a, sizeof a),
                                 tfs_shape_str(t->rank, t->dims, b, sizeof b));
    }
    return TFS_OK;
}

static enum tfs_code apply_op(tfs_kernel_ctx *k, const opt_spec *sp, bool resource,
                              tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_variable *vars[MAX_VARS] = {NULL};
    tfs_tensor *vals[MAX_INPUTS] = {NULL};   /* value inputs, indexed by input */
    tfs_tensor *dst[MAX_VARS] = {NULL}, *replaced[MAX_VARS] = {NULL};
    tfs_variable *lock_order[MAX_VARS];
    opt_ctx c = {.dt = TFS_DTYPE_INVALID};
    enum tfs_code rc = TFS_OK;
    if (k->n_in != sp->n_in)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects %d inputs, got %d", sp->n_in,
                             k->n_in);
    for (int i = 0; i < sp->n_vars; i++) {
        if ((rc = tfs__variable_input(k, i, !resource, &vars[i], st)) != TFS_OK)
            return rc;
        for (int j = 0; j < i; j++)
            if (vars[j] == vars[i])
                return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                     "%s and %s are the same variable '%s'", sp->names[j],
                                     sp->names[i], vars[i]->name);
    }
    for (int i = sp->n_vars; i < sp->n_in; i++)
        if ((rc = tfs__value_input(k, i, &vals[i], st)) != TFS_OK)
            goto done;
    if ((rc = opt_dtype(n, vars[0], &c.dt, st)) != TFS_OK)
        goto done;
    for (int i = 0; i < sp->n_vars; i++) {
        if (vars[i]->dtype != c.dt) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "%s is variable '%s' of dtype %s, but T is %s", sp->names[i],
                               vars[i]->name, tfs_dtype_short_name(vars[i]->dtype),
                               tfs_dtype_short_name(c.dt));
            goto done;
        }
    }
    if ((rc = opt_values(n, sp, vals, c.dt, &c, st)) != TFS_OK)
        goto done;
    c.flag = sp->flag_dflt;   /* TensorFlow's default when a stripped NodeDef lacks the attr */
    if (sp->flag && tfs__attr(n, sp->flag)) {
        if ((rc = tfs__attr_bool(n, sp->flag, &c.flag, st)) != TFS_OK)
            goto done;
    }

    /* Lock every variable, lowest address first (a global order: no deadlock between ops). */
    for (int i = 0; i < sp->n_vars; i++) {
        int j = i;
        for (; j > 0 && (uintptr_t)lock_order[j - 1] > (uintptr_t)vars[i]; j--)
            lock_order[j] = lock_order[j - 1];
        lock_order[j] = vars[i];
    }
    for (int i = 0; i < sp->n_vars; i++)
        pthread_mutex_lock(&lock_order[i]->mu);
    rc = opt_check_locked(n, sp, vars, vals[sp->grad], st);
    for (int i = 0; rc == TFS_OK && i < sp->n_vars; i++)
        rc = tfs__variable_update_begin(vars[i], &dst[i], st);
    if (rc == TFS_OK) {
        for (int i = 0; i < sp->n_vars; i++)
            c.var[i] = dst[i]->data;
        c.grad = vals[sp->grad]->data;
        tfs__parallel_for(dst[0]->nelem, OPT_GRAIN, sp->fn, &c);
        for (int i = 0; i < sp->n_vars; i++)
            replaced[i] = tfs__variable_update_commit(vars[i], dst[i]);
    } else {
        for (int i = 0; i < sp->n_vars; i++)   /* drop copies made before a failure */
            if (dst[i] && dst[i] != vars[i]->value)
                tfs_tensor_unref(dst[i]);
    }
    for (int i = sp->n_vars - 1; i >= 0; i--)
        pthread_mutex_unlock(&lock_order[i]->mu);
    for (int i = 0; i < sp->n_vars; i++)
        tfs_tensor_unref(replaced[i]);
    if (rc == TFS_OK && !resource)
        k->out[0] = tfs_tensor_ref(k->in[0]);   /* `out`: the var reference, as TensorFlow */
done:
    for (int i = 0; i < sp->n_in; i++)
        tfs_tensor_unref(vals[i]);
    return rc;
}

/* ---- kernels -------------------------------------------------------------------------------- */

#define OPT_KERNELS(name, spec)                                                                    \
    enum tfs_code tfs__k_apply_##name(tfs_kernel_ctx *k, tfs_status *st)                           \
    {                                                                                              \
        return apply_op(k, &(spec), false, st);                                                    \
    }                                                                                              \
    enum tfs_code tfs__k_resource_apply_##name(tfs_kernel_ctx *k, tfs_status *st)                  \
    {                                                                                              \
        return apply_op(k, &(spec), true, st);                                                     \
    }

OPT_KERNELS(gradient_descent, GRADIENT_DESCENT)
OPT_KERNELS(momentum, MOMENTUM)
OPT_KERNELS(adam, ADAM)
OPT_KERNELS(rms_prop, RMS_PROP)
OPT_KERNELS(centered_rms_prop, CENTERED_RMS_PROP)
OPT_KERNELS(adagrad, ADAGRAD)
OPT_KERNELS(adagrad_v2, ADAGRAD_V2)

enum tfs_code tfs__k_resource_apply_keras_momentum(tfs_kernel_ctx *k, tfs_status *st)
{
    return apply_op(k, &KERAS_MOMENTUM, true, st);
}
