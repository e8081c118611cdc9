/* Check suite for the optimizer ops (kernels/training.c) and the variable update ops AssignSub,
 * AssignAddVariableOp, AssignSubVariableOp (kernels/state.c): each optimizer's update over three
 * steps against the textbook formulas evaluated in float64 here, on reference (Apply*) and
 * resource (ResourceApply*) variables in float and double; bad inputs; in-place updates versus
 * copy-on-write; and atomicity against concurrent readers. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_training(void);

#define NE 4       /* elements per variable in the update tests */
#define STEPS 3

/* ---- graphs: variables, their initializers, one optimizer node ------------------------------ */

/* One optimizer under test. vals[] lists the non-variable inputs in TensorFlow's order; `grad` is
 * the index of the gradient among them. ref() advances vars[] by one step in float64 from the
 * scalar inputs s[] (input order, grad excluded). */
typedef void (*ref_step_fn)(double *const *vars, const double *s, const double *g, bool flag);
typedef struct opt_case {
    const char *op;         /* Apply* form, NULL when only the resource form exists */
    const char *resource_op;
    int         n_vars;
    int         n_vals;
    int         grad;
    const char *flag;       /* bool attr, or NULL */
    ref_step_fn ref;
    /* scalar inputs at step t (1-based), input order, grad excluded */
    void (*scalars)(int t, double *s);
} opt_case;

/* Variables v0..v{n-1} (VariableV2, or VarHandleOp with reads read<i>), initializers init<i>
 * fed by iv<i>, placeholders p0.. for the value inputs, and "apply". */
static tfs_session *opt_session(const char *op, bool resource, int n_vars, int n_vals,
                                enum tfs_dtype dt, const char *flag, bool flag_value,
                                int64_t n)
{
    tfs_graph *g;
    char name[32], in[32];
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    tfs_shape sh = {1, {n}};
    for (int i = 0; i < n_vars; i++) {
        snprintf(name, sizeof name, "v%d", i);
        int v = tfs_graph_add_node(g, name, resource ? "VarHandleOp" : "VariableV2");
        tfs_graph_set_attr_type(g, v, "dtype", dt);
        tfs_graph_set_attr_shape(g, v, "shape", &sh);
        tfs_graph_set_attr_string(g, v, "shared_name", name);
        snprintf(in, sizeof in, "iv%d", i);
        rt_placeholder(g, in, dt);
        snprintf(name, sizeof name, "init%d", i);
        snprintf(in, sizeof in, "v%d", i);
        int a = rt_node(g, name, resource ? "AssignVariableOp" : "Assign", in, NULL,
                        resource ? TFS_DTYPE_INVALID : dt);
        snprintf(in, sizeof in, "iv%d", i);
        tfs_graph_add_input(g, a, in);
        if (!resource)   /* so that a test can give a slot another shape than var */
            tfs_graph_set_attr_bool(g, a, "validate_shape", false);
        if (resource) {
            tfs_graph_set_attr_type(g, a, "dtype", dt);
            snprintf(name, sizeof name, "read%d", i);
            snprintf(in, sizeof in, "v%d", i);
            int r = rt_node(g, name, "ReadVariableOp", in, NULL, TFS_DTYPE_INVALID);
            tfs_graph_set_attr_type(g, r, "dtype", dt);
        }
    }
    int apply = rt_node(g, "apply", op, NULL, NULL, dt);
    for (int i = 0; i < n_vars; i++) {
        snprintf(in, sizeof in, "v%d", i);
        tfs_graph_add_input(g, apply, in);
    }
    for (int j = 0; j < n_vals; j++) {
        snprintf(name, sizeof name, "p%d", j);
        rt_placeholder(g, name, dt);
        tfs_graph_add_input(g, apply, name);
    }
    tfs_graph_set_attr_bool(g, apply, "use_locking", false);
    if (flag)
        tfs_graph_set_attr_bool(g, apply, flag, flag_value);
    return rt_session(g, NULL);
}

/* A rank-1 tensor of dt from doubles. */
static tfs_tensor *vec(enum tfs_dtype dt, int64_t n, const double *v)
{
    tfs_tensor *t = rt_tensor(dt, 1, &n, NULL);
    for (int64_t i = 0; i < n; i++) {
        if (dt == TFS_DTYPE_FLOAT)
            ((float *)t->data)[i] = (float)v[i];
        else
            ((double *)t->data)[i] = v[i];
    }
    return t;
}

static tfs_tensor *scalar(enum tfs_dtype dt, double v)
{
    tfs_tensor *t = rt_tensor(dt, 0, NULL, NULL);
    if (dt == TFS_DTYPE_FLOAT)
        *(float *)t->data = (float)v;
    else
        *(double *)t->data = v;
    return t;
}

static void opt_init(tfs_session *s, int i, tfs_tensor *value)
{
    char feed[32], target[32];
    snprintf(feed, sizeof feed, "iv%d", i);
    snprintf(target, sizeof target, "init%d", i);
    tfs_feed f = {feed, value};
    const char *t = target;
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, &f, 1, NULL, 0, &t, 1, NULL, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor_unref(value);
}

/* Runs "apply" once with vals[] fed to p0..; releases vals. Ref ops' output is fetched. */
static enum tfs_code opt_step(tfs_session *s, bool resource, int n_vals, tfs_tensor **vals,
                              tfs_status *st)
{
    tfs_feed feeds[8];
    char names[8][16];
    for (int j = 0; j < n_vals; j++) {
        snprintf(names[j], sizeof names[j], "p%d", j);
        feeds[j] = (tfs_feed){names[j], vals[j]};
    }
    const char *apply = resource ? "apply" : "apply:0";
    tfs_tensor *out = NULL;
    enum tfs_code rc = resource ? tfs_session_run(s, feeds, n_vals, NULL, 0, &apply, 1, NULL, st)
                                : tfs_session_run(s, feeds, n_vals, &apply, 1, NULL, 0, &out, st);
    tfs_tensor_unref(out);
    for (int j = 0; j < n_vals; j++)
        tfs_tensor_unref(vals[j]);
    return rc;
}

/* Variable i's value (new reference). */
static tfs_tensor *opt_read(tfs_session *s, bool resource, int i)
{
    char name[32];
    snprintf(name, sizeof name, resource ? "read%d" : "v%d", i);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run1(s, NULL, 0, name, &out, &st) == TFS_OK, "%s", st.msg);
    return out;
}

static double elem(const tfs_tensor *t, int64_t i)
{
    return t->dtype == TFS_DTYPE_FLOAT ? ((const float *)t->data)[i]
                                       : ((const double *)t->data)[i];
}

/* ---- the reference formulas (float64) ------------------------------------------------------- */

static void ref_gd(double *const *v, const double *s, const double *g, bool flag)
{
    (void)flag;
    for (int i = 0; i < NE; i++)
        v[0][i] -= s[0] * g[i];
}

static void ref_momentum(double *const *v, const double *s, const double *g, bool nesterov)
{
    double lr = s[0], mu = s[1];
    for (int i = 0; i < NE; i++) {
        v[1][i] = mu * v[1][i] + g[i];
        v[0][i] -= nesterov ? lr * (g[i] + mu * v[1][i]) : lr * v[1][i];
    }
}

static void ref_keras_momentum(double *const *v, const double *s, const double *g, bool nesterov)
{
    double lr = s[0], mu = s[1];
    for (int i = 0; i < NE; i++) {
        v[1][i] = mu * v[1][i] - lr * g[i];
        v[0][i] += nesterov ? mu * v[1][i] - lr * g[i] : v[1][i];
    }
}

static void ref_adam(double *const *v, const double *s, const double *g, bool nesterov)
{
    double b1p = s[0], b2p = s[1], lr = s[2], b1 = s[3], b2 = s[4], eps = s[5];
    double lr_t = lr * sqrt(1 - b2p) / (1 - b1p);
    for (int i = 0; i < NE; i++) {
        v[1][i] = b1 * v[1][i] + (1 - b1) * g[i];
        v[2][i] = b2 * v[2][i] + (1 - b2) * g[i] * g[i];
        double m = nesterov ? b1 * v[1][i] + (1 - b1) * g[i] : v[1][i];
        v[0][i] -= lr_t * m / (sqrt(v[2][i]) + eps);
    }
}

static void ref_rms_prop(double *const *v, const double *s, const double *g, bool flag)
{
    (void)flag;
    double lr = s[0], rho = s[1], mu = s[2], eps = s[3];
    for (int i = 0; i < NE; i++) {
        v[1][i] = rho * v[1][i] + (1 - rho) * g[i] * g[i];
        v[2][i] = mu * v[2][i] + lr * g[i] / sqrt(v[1][i] + eps);
        v[0][i] -= v[2][i];
    }
}

static void ref_centered_rms_prop(double *const *v, const double *s, const double *g, bool flag)
{
    (void)flag;
    double lr = s[0], rho = s[1], mu = s[2], eps = s[3];
    for (int i = 0; i < NE; i++) {   /* v: var, mg, ms, mom */
        v[1][i] = rho * v[1][i] + (1 - rho) * g[i];
        v[2][i] = rho * v[2][i] + (1 - rho) * g[i] * g[i];
        v[3][i] = mu * v[3][i] + lr * g[i] / sqrt(v[2][i] - v[1][i] * v[1][i] + eps);
        v[0][i] -= v[3][i];
    }
}

static void ref_adagrad(double *const *v, const double *s, const double *g, bool update_slots)
{
    for (int i = 0; i < NE; i++) {
        if (update_slots)
            v[1][i] += g[i] * g[i];
        v[0][i] -= s[0] * g[i] / sqrt(v[1][i]);
    }
}

static void ref_adagrad_v2(double *const *v, const double *s, const double *g, bool update_slots)
{
    for (int i = 0; i < NE; i++) {
        if (update_slots)
            v[1][i] += g[i] * g[i];
        v[0][i] -= s[0] * g[i] / (sqrt(v[1][i]) + s[1]);
    }
}

static void sc_gd(int t, double *s)
{
    s[0] = 0.1 / t;   /* a decaying rate: each step's scalars are really read */
}

static void sc_momentum(int t, double *s)
{
    s[0] = 0.05 * t;
    s[1] = 0.9;
}

static void sc_adam(int t, double *s)
{
    s[3] = 0.9;
    s[4] = 0.999;
    s[0] = pow(s[3], t);
    s[1] = pow(s[4], t);
    s[2] = 0.01;
    s[5] = 1e-7;
}

static void sc_rms(int t, double *s)
{
    s[0] = 0.01 * t;
    s[1] = 0.9;
    s[2] = 0.5;
    s[3] = 1e-6;
}

static void sc_adagrad(int t, double *s)
{
    s[0] = 0.1 + 0.01 * t;
    s[1] = 0.001;
}

/* Momentum's inputs are (var, accum, lr, grad, momentum): grad is value 1 of 3. */
static const opt_case CASES[] = {
    {"ApplyGradientDescent", "ResourceApplyGradientDescent", 1, 2, 1, NULL, ref_gd, sc_gd},
    {"ApplyMomentum", "ResourceApplyMomentum", 2, 3, 1, "use_nesterov", ref_momentum,
     sc_momentum},
    {NULL, "ResourceApplyKerasMomentum", 2, 3, 1, "use_nesterov", ref_keras_momentum,
     sc_momentum},
    {"ApplyAdam", "ResourceApplyAdam", 3, 7, 6, "use_nesterov", ref_adam, sc_adam},
    {"ApplyRMSProp", "ResourceApplyRMSProp", 3, 5, 4, NULL, ref_rms_prop, sc_rms},
    {"ApplyCenteredRMSProp", "ResourceApplyCenteredRMSProp", 4, 5, 4, NULL,
     ref_centered_rms_prop, sc_rms},
    {"ApplyAdagrad", "ResourceApplyAdagrad", 2, 2, 1, "update_slots", ref_adagrad, sc_adagrad},
    {"ApplyAdagradV2", "ResourceApplyAdagradV2", 2, 3, 2, "update_slots", ref_adagrad_v2,
     sc_adagrad},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* Runs STEPS steps of case c in one form, dtype and flag, comparing every variable after each. */
static void run_case(const opt_case *c, bool resource, enum tfs_dtype dt, bool flag)
{
    const char *op = resource ? c->resource_op : c->op;
    tfs_session *s = opt_session(op, resource, c->n_vars, c->n_vals, dt, c->flag, flag, NE);
    double want[4][NE], *wp[4] = {want[0], want[1], want[2], want[3]};
    /* Slots start positive where a square root of them is taken (Adagrad's accumulator). */
    for (int i = 0; i < c->n_vars; i++) {
        for (int e = 0; e < NE; e++)
            want[i][e] = i == 0 ? 0.5 * e - 0.7 : 0.1 + 0.05 * (i + e);
        opt_init(s, i, vec(dt, NE, want[i]));
    }
    double tol = dt == TFS_DTYPE_FLOAT ? 2e-6 : 1e-13;
    for (int t = 1; t <= STEPS; t++) {
        double g[NE], sc[8];
        for (int e = 0; e < NE; e++)
            g[e] = (e % 2 ? 0.3 : -0.2) * t + 0.05 * e;
        c->scalars(t, sc);
        tfs_tensor *vals[8];
        for (int j = 0, k = 0; j < c->n_vals; j++)
            vals[j] = j == c->grad ? vec(dt, NE, g) : scalar(dt, sc[k++]);
        tfs_status st;
        ck_assert_msg(opt_step(s, resource, c->n_vals, vals, &st) == TFS_OK, "%s: %s", op,
                      st.msg);
        c->ref(wp, sc, g, flag);
        for (int i = 0; i < c->n_vars; i++) {
            tfs_tensor *got = opt_read(s, resource, i);
            ck_assert_int_eq(got->dtype, dt);
            for (int e = 0; e < NE; e++)
                ck_assert_msg(fabs(elem(got, e) - want[i][e]) <= tol * (1 + fabs(want[i][e])),
                              "%s %s flag=%d step %d var %d [%d]: got %.9g, want %.9g", op,
                              tfs_dtype_short_name(dt), flag, t, i, e, elem(got, e), want[i][e]);
            tfs_tensor_unref(got);
        }
    }
    tfs_session_free(s);
}

START_TEST(test_training_updates)
{
    /* _i: one case, every form, dtype and flag value. */
    const opt_case *c = &CASES[_i];
    for (int form = 0; form < 2; form++) {
        if (form == 0 && !c->op)
            continue;
        for (int d = 0; d < 2; d++)
            for (int flag = 0; flag < (c->flag ? 2 : 1); flag++)
                run_case(c, form == 1, d ? TFS_DTYPE_DOUBLE : TFS_DTYPE_FLOAT, flag);
    }
}
END_TEST

/* ---- bad inputs ----------------------------------------------------------------------------- */

/* A momentum session (ref or resource) with var [NE] and accum [acc_n], both initialized unless
 * init_accum is false. */
static tfs_session *momentum_session(bool resource, int64_t acc_n, bool init_accum)
{
    tfs_session *s = opt_session(resource ? "ResourceApplyMomentum" : "ApplyMomentum", resource,
                                 2, 3, TFS_DTYPE_FLOAT, NULL, false, NE);
    double z[NE + 2] = {0};
    opt_init(s, 0, vec(TFS_DTYPE_FLOAT, NE, z));
    if (init_accum)
        opt_init(s, 1, vec(TFS_DTYPE_FLOAT, acc_n, z));
    return s;
}

static enum tfs_code momentum_step(tfs_session *s, bool resource, tfs_tensor *lr, tfs_tensor *g,
                                   tfs_status *st)
{
    tfs_tensor *vals[3] = {lr, g, scalar(TFS_DTYPE_FLOAT, 0.9)};
    return opt_step(s, resource, 3, vals, st);
}

START_TEST(test_training_bad_inputs)
{
    double g[NE + 1] = {1, 2, 3, 4, 5};
    tfs_status st;
    for (int resource = 0; resource < 2; resource++) {
        /* grad of another shape */
        tfs_session *s = momentum_session(resource, NE, true);
        ck_assert_int_eq(momentum_step(s, resource, scalar(TFS_DTYPE_FLOAT, 0.1),
                                       vec(TFS_DTYPE_FLOAT, NE + 1, g), &st),
                         TFS_INVALID_ARGUMENT);
        rt_assert_err(st, TFS_INVALID_ARGUMENT, "var and grad do not have the same shape");
        rt_assert_err(st, TFS_INVALID_ARGUMENT, "[4] vs. [5]");
        /* lr not a scalar */
        ck_assert_int_eq(momentum_step(s, resource, vec(TFS_DTYPE_FLOAT, 2, g),
                                       vec(TFS_DTYPE_FLOAT, NE, g), &st),
                         TFS_INVALID_ARGUMENT);
        rt_assert_err(st, TFS_INVALID_ARGUMENT, "lr is not a scalar: [2]");
        /* The failed steps changed nothing. */
        tfs_tensor *v = opt_read(s, resource, 0);
        for (int e = 0; e < NE; e++)
            ck_assert(elem(v, e) == 0);
        tfs_tensor_unref(v);
        tfs_session_free(s);

        /* a slot of another shape */
        s = momentum_session(resource, NE + 1, true);
        ck_assert_int_eq(momentum_step(s, resource, scalar(TFS_DTYPE_FLOAT, 0.1),
                                       vec(TFS_DTYPE_FLOAT, NE, g), &st),
                         TFS_INVALID_ARGUMENT);
        rt_assert_err(st, TFS_INVALID_ARGUMENT, "var and accum do not have the same shape");
        tfs_session_free(s);

        /* an uninitialized slot */
        s = momentum_session(resource, NE, false);
        ck_assert_int_eq(momentum_step(s, resource, scalar(TFS_DTYPE_FLOAT, 0.1),
                                       vec(TFS_DTYPE_FLOAT, NE, g), &st),
                         TFS_FAILED_PRECONDITION);
        rt_assert_err(st, TFS_FAILED_PRECONDITION, "Attempting to use uninitialized variables: v1");
        tfs_session_free(s);
    }
}
END_TEST

START_TEST(test_training_bad_types)
{
    /* T = int32: no kernel for it. */
    tfs_session *s = opt_session("ResourceApplyGradientDescent", true, 1, 2, TFS_DTYPE_INT32, NULL,
                                 false, 2);
    opt_init(s, 0, rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){2}, NULL));
    tfs_tensor *vals[2] = {rt_tensor(TFS_DTYPE_INT32, 0, NULL, NULL),
                           rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){2}, NULL)};
    tfs_status st;
    ck_assert_int_eq(opt_step(s, true, 2, vals, &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "not supported");
    tfs_session_free(s);

    /* delta of another dtype than T (Consts: a Placeholder would refuse the feed first). */
    tfs_graph *g;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    int h = tfs_graph_add_node(g, "h", "VarHandleOp");
    tfs_graph_set_attr_type(g, h, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_string(g, h, "shared_name", "h");
    rt_const(g, "zeros", rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){2}, NULL));
    int init = rt_node(g, "init", "AssignVariableOp", "h", "zeros", TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, init, "dtype", TFS_DTYPE_FLOAT);
    rt_const(g, "alpha", scalar(TFS_DTYPE_FLOAT, 1));
    rt_const(g, "delta", rt_tensor(TFS_DTYPE_DOUBLE, 1, (const int64_t[]){2}, NULL));
    int a = rt_node(g, "apply", "ResourceApplyGradientDescent", "h", "alpha", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, a, "delta");
    s = rt_session(g, NULL);
    const char *targets[2] = {"init", "apply"};
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, targets, 1, NULL, &st), TFS_OK);
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, targets + 1, 1, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "delta must be float, got double");
    tfs_session_free(s);

    /* The same variable as var and accum. */
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    int v = tfs_graph_add_node(g, "v", "VariableV2");
    tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "lr", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "grad", TFS_DTYPE_FLOAT);
    a = rt_node(g, "apply", "ApplyMomentum", "v", "v", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, a, "lr");
    tfs_graph_add_input(g, a, "grad");
    tfs_graph_add_input(g, a, "lr");
    s = rt_session(g, NULL);
    tfs_feed f[2] = {{"lr", scalar(TFS_DTYPE_FLOAT, 1)}, {"grad", scalar(TFS_DTYPE_FLOAT, 1)}};
    tfs_tensor *out = NULL;
    ck_assert_int_eq(rt_run1(s, f, 2, "apply", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "var and accum are the same variable 'v'");
    tfs_tensor_unref(f[0].tensor);
    tfs_tensor_unref(f[1].tensor);
    tfs_session_free(s);
}
END_TEST

/* ---- in place, copy-on-write, reference inputs ---------------------------------------------- */

static tfs_variable *session_var(tfs_session *s, const char *name)
{
    tfs_variable *v = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__session_variable(s, "", name, TFS_DTYPE_FLOAT, &v, &st), TFS_OK);
    return v;
}

START_TEST(test_training_in_place_and_copy_on_write)
{
    tfs_session *s = opt_session("ResourceApplyGradientDescent", true, 1, 2, TFS_DTYPE_FLOAT,
                                 NULL, false, NE);
    double init[NE] = {1, 2, 3, 4}, g[NE] = {1, 1, 1, 1};
    opt_init(s, 0, vec(TFS_DTYPE_FLOAT, NE, init));
    tfs_variable *v = session_var(s, "v0");
    tfs_status st;
    /* Nothing but the variable holds its value (the initializer's feed was released): steps
     * update that tensor in place. */
    tfs_tensor *before = v->value;
    tfs_tensor *vals[2];
    for (int i = 0; i < 2; i++) {
        vals[0] = scalar(TFS_DTYPE_FLOAT, 0.5);
        vals[1] = vec(TFS_DTYPE_FLOAT, NE, g);
        ck_assert_int_eq(opt_step(s, true, 2, vals, &st), TFS_OK);
        ck_assert_ptr_eq(v->value, before);
    }
    /* A fetched value is held by the caller: the next step copies and the fetch stays as it was. */
    tfs_tensor *held = opt_read(s, true, 0);
    ck_assert_ptr_eq(held, before);
    vals[0] = scalar(TFS_DTYPE_FLOAT, 0.5);
    vals[1] = vec(TFS_DTYPE_FLOAT, NE, g);
    ck_assert_int_eq(opt_step(s, true, 2, vals, &st), TFS_OK);
    ck_assert_ptr_ne(v->value, held);
    tfs_test_assert_f32(held, 1, (const int64_t[]){NE}, (const float[]){0, 1, 2, 3}, 0);
    tfs_tensor *now = opt_read(s, true, 0);
    tfs_test_assert_f32(now, 1, (const int64_t[]){NE}, (const float[]){-0.5f, 0.5f, 1.5f, 2.5f},
                        0);
    tfs_tensor_unref(now);
    tfs_tensor_unref(held);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_training_ref_inputs)
{
    /* ApplyGradientDescent(w, lr, grad) with lr itself a VariableV2 (dereferenced), and the output
     * `out` consumed downstream as w's updated value. */
    tfs_graph *g;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    const char *vars[2] = {"w", "lr"};
    for (int i = 0; i < 2; i++) {
        int v = tfs_graph_add_node(g, vars[i], "VariableV2");
        tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
    }
    int64_t d2[] = {2};
    rt_const(g, "w0", tfs_test_tensor_f32(1, d2, (const float[]){1, 2}));
    rt_const(g, "lr0", tfs_test_tensor_f32(0, NULL, (const float[]){0.25f}));
    rt_node(g, "init_w", "Assign", "w", "w0", TFS_DTYPE_FLOAT);
    rt_node(g, "init_lr", "Assign", "lr", "lr0", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "grad", TFS_DTYPE_FLOAT);
    int a = rt_node(g, "apply", "ApplyGradientDescent", "w", "lr", TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, a, "grad");
    rt_node(g, "twice", "AddV2", "apply", "apply", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    const char *inits[] = {"init_w", "init_lr"};
    ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, inits, 2, NULL, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_feed f = {"grad", tfs_test_tensor_f32(1, d2, (const float[]){4, -4})};
    tfs_tensor *out = NULL;
    ck_assert_msg(rt_run1(s, &f, 1, "twice", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d2, (const float[]){0, 6}, 0);   /* w = [0, 3] */
    tfs_tensor_unref(out);
    tfs_tensor_unref(f.tensor);
    tfs_session_free(s);
}
END_TEST

/* ---- atomicity: readers never see part of a step -------------------------------------------- */

#define BIG (1 << 16)

typedef struct reader_arg {
    tfs_session *s;
    atomic_int  *stop;
    int          torn;   /* reads whose elements disagreed */
    int          reads;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *r = p;
    while (!atomic_load(r->stop)) {
        tfs_tensor *t = opt_read(r->s, true, 0);
        const float *x = t->data;
        for (int i = 1; i < BIG; i++)
            if (x[i] != x[0]) {
                r->torn++;
                break;
            }
        r->reads++;
        tfs_tensor_unref(t);
    }
    return NULL;
}

START_TEST(test_training_atomic_against_readers)
{
    tfs_session *s = opt_session("ResourceApplyGradientDescent", true, 1, 2, TFS_DTYPE_FLOAT,
                                 NULL, false, BIG);
    int64_t n = BIG;
    opt_init(s, 0, rt_tensor(TFS_DTYPE_FLOAT, 1, &n, NULL));
    atomic_int stop = 0;
    reader_arg r[2] = {{s, &stop, 0, 0}, {s, &stop, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &r[i]), 0);
    tfs_tensor *g = rt_tensor(TFS_DTYPE_FLOAT, 1, &n, NULL);
    for (int i = 0; i < BIG; i++)
        ((float *)g->data)[i] = -1;
    tfs_status st;
    for (int step = 0; step < 300; step++) {
        tfs_tensor *vals[2] = {scalar(TFS_DTYPE_FLOAT, 1), tfs_tensor_ref(g)};
        ck_assert_int_eq(opt_step(s, true, 2, vals, &st), TFS_OK);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(r[0].torn + r[1].torn, 0);
    tfs_tensor *v = opt_read(s, true, 0);
    ck_assert(((float *)v->data)[0] == 300 && ((float *)v->data)[BIG - 1] == 300);
    tfs_tensor_unref(v);
    tfs_tensor_unref(g);
    tfs_session_free(s);
}
END_TEST

/* ---- AssignSub, AssignAddVariableOp, AssignSubVariableOp ------------------------------------ */

START_TEST(test_training_assign_updates)
{
    tfs_graph *g;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    int64_t d3[] = {3};
    tfs_shape sh = {1, {3}};
    int v = tfs_graph_add_node(g, "v", "VariableV2");
    tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_INT32);
    tfs_graph_set_attr_shape(g, v, "shape", &sh);
    int h = tfs_graph_add_node(g, "h", "VarHandleOp");
    tfs_graph_set_attr_type(g, h, "dtype", TFS_DTYPE_INT32);
    tfs_graph_set_attr_shape(g, h, "shape", &sh);
    tfs_graph_set_attr_string(g, h, "shared_name", "h");
    rt_const(g, "c", rt_tensor(TFS_DTYPE_INT32, 1, d3, (const int32_t[]){10, 20, INT32_MIN}));
    rt_const(g, "d", rt_tensor(TFS_DTYPE_INT32, 1, d3, (const int32_t[]){1, 2, 1}));
    rt_const(g, "bad", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){2}, NULL));
    rt_node(g, "init_v", "Assign", "v", "c", TFS_DTYPE_INT32);
    int ih = rt_node(g, "init_h", "AssignVariableOp", "h", "c", TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, ih, "dtype", TFS_DTYPE_INT32);
    rt_node(g, "sub", "AssignSub", "v", "d", TFS_DTYPE_INT32);
    const char *upd[][3] = {{"add_h", "AssignAddVariableOp", "d"},
                            {"sub_h", "AssignSubVariableOp", "d"},
                            {"bad_h", "AssignAddVariableOp", "bad"}};
    for (int i = 0; i < 3; i++) {
        int u = rt_node(g, upd[i][0], upd[i][1], "h", upd[i][2], TFS_DTYPE_INVALID);
        tfs_graph_set_attr_type(g, u, "dtype", TFS_DTYPE_INT32);
    }
    int r = rt_node(g, "read_h", "ReadVariableOp", "h", NULL, TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, r, "dtype", TFS_DTYPE_INT32);
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    tfs_tensor *out = NULL;
    /* Uninitialized. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "sub", &out, &st), TFS_FAILED_PRECONDITION);
    const char *t = "add_h";
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &t, 1, NULL, &st),
                     TFS_FAILED_PRECONDITION);
    const char *inits[] = {"init_v", "init_h"};
    ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, inits, 2, NULL, &st) == TFS_OK, "%s",
                  st.msg);
    /* AssignSub returns the new value; INT32_MIN - 1 wraps as TensorFlow's int32 does. */
    ck_assert_msg(rt_run1(s, NULL, 0, "sub", &out, &st) == TFS_OK, "%s", st.msg);
    ck_assert_mem_eq(out->data, ((const int32_t[]){9, 18, INT32_MAX}), 12);
    tfs_tensor_unref(out);
    const char *steps[] = {"add_h", "add_h", "sub_h"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, &steps[i], 1, NULL, &st) == TFS_OK,
                      "%s", st.msg);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "read_h", &out, &st), TFS_OK);
    ck_assert_mem_eq(out->data, ((const int32_t[]){11, 22, INT32_MIN + 1}), 12);
    tfs_tensor_unref(out);
    t = "bad_h";
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &t, 1, NULL, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "shapes must be equal");
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_training(void)
{
    Suite *s = suite_create("runtime_training");
    TCase *tc = tcase_create("optimizers");
    tcase_add_loop_test(tc, test_training_updates, 0, N_CASES);
    tcase_add_test(tc, test_training_bad_inputs);
    tcase_add_test(tc, test_training_bad_types);
    tcase_add_test(tc, test_training_in_place_and_copy_on_write);
    tcase_add_test(tc, test_training_ref_inputs);
    tcase_add_test(tc, test_training_atomic_against_readers);
    tcase_add_test(tc, test_training_assign_updates);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}
