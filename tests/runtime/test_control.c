/* Tests of functional control flow (runtime/kernels/control.c) and the graph function library:
 * While loops computing factorials and sums, a While carrying TensorLists the way Keras LSTMs do,
 * an If nested in a While body, If conditions of every kind (TensorFlow's ToBool), resource
 * handles passed into a loop body, and the guards: the iteration limit, unknown functions, ops
 * without a kernel inside a body, recursion, and errors raised inside a body. Expected values are
 * computed by plain C loops in the tests; integer results are exact, float results of the loop
 * tests use tolerance 1e-6 (same operations in the same order as the reference). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_control(void);

/* ---- building helpers ------------------------------------------------------------------------ */

static tfs_graph *new_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    return g;
}

static void set_types(tfs_graph *g, int id, const char *attr, int n, const enum tfs_dtype *types)
{
    tfs_attr_value v = {.kind = TFS_ATTR_LIST};
    v.list.kind = TFS_ATTR_TYPE;
    v.list.n = n;
    v.list.type = (enum tfs_dtype *)types;
    tfs_graph_set_attr(g, id, attr, &v);
}

static void set_func(tfs_graph *g, int id, const char *attr, const char *fname)
{
    tfs_attr_value v = {.kind = TFS_ATTR_FUNC, .func = (char *)fname};
    tfs_graph_set_attr(g, id, attr, &v);
}

/* Finalizes body and adds it to g's library, dropping the caller's reference. */
static void add_fn(tfs_graph *g, const char *name, tfs_graph *body, int n_in,
                   const char *const *in, int n_out, const char *const *out)
{
    tfs_status st;
    ck_assert_msg(tfs_graph_finalize(body, &st) == TFS_OK, "body %s: %s", name, st.msg);
    tfs_graph_add_function(g, name, body, n_in, in, n_out, out);
    tfs_graph_unref(body);
}

static int const_i32(tfs_graph *g, const char *name, int32_t v)
{
    return rt_const(g, name, rt_tensor(TFS_DTYPE_INT32, 0, NULL, &v));
}

/* A While node `name` over the given inputs with attr T, cond and body. */
static int add_while(tfs_graph *g, const char *name, const char *op, int n, const char *const *in,
                     const enum tfs_dtype *T, const char *cond, const char *body)
{
    int id = tfs_graph_add_node(g, name, op);
    for (int i = 0; i < n; i++)
        tfs_graph_add_input(g, id, in[i]);
    set_types(g, id, "T", n, T);
    set_func(g, id, "cond", cond);
    set_func(g, id, "body", body);
    tfs_graph_set_attr_int(g, id, "parallel_iterations", 10);
    return id;
}

static int32_t scalar_i32(const tfs_tensor *t)
{
    ck_assert_int_eq(t->dtype, TFS_DTYPE_INT32);
    ck_assert_int_eq(t->rank, 0);
    return *(const int32_t *)t->data;
}

/* cond(n, ...) = n: loops while the int32 counter is non-zero (ToBool of a number). */
static tfs_graph *cond_first_nonzero(int n_vars, const enum tfs_dtype *T, const char **out)
{
    tfs_graph *b = new_graph();
    char name[16];
    for (int i = 0; i < n_vars; i++) {
        snprintf(name, sizeof name, "v%d", i);
        rt_placeholder(b, name, T[i]);
    }
    *out = "v0:0";
    return b;
}

static const char *const V2[] = {"v0", "v1"};
static const char *const V3[] = {"v0", "v1", "v2"};

/* The factorial loop: (n, acc) -> (n - 1, acc * n) while n != 0. */
static tfs_session *factorial_session(const tfs_session_opts *opts)
{
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32, TFS_DTYPE_INT32};
    tfs_graph *g = new_graph();
    const char *cond_out;
    tfs_graph *cond = cond_first_nonzero(2, T, &cond_out);
    add_fn(g, "fact_cond", cond, 2, V2, 1, &cond_out);
    tfs_graph *body = new_graph();
    rt_placeholder(body, "v0", TFS_DTYPE_INT32);
    rt_placeholder(body, "v1", TFS_DTYPE_INT32);
    const_i32(body, "minus1", -1);
    rt_node(body, "next_n", "AddV2", "v0", "minus1", TFS_DTYPE_INT32);
    rt_node(body, "next_acc", "Mul", "v1", "v0", TFS_DTYPE_INT32);
    add_fn(g, "fact_body", body, 2, V2, 2, (const char *const[]){"next_n:0", "next_acc"});
    rt_placeholder(g, "n", TFS_DTYPE_INT32);
    const_i32(g, "one", 1);
    add_while(g, "loop", "StatelessWhile", 2, (const char *const[]){"n", "one"}, T, "fact_cond",
              "fact_body");
    return rt_session(g, opts);
}

/* ---- While ----------------------------------------------------------------------------------- */

START_TEST(test_control_while_factorial)
{
    tfs_session *s = factorial_session(NULL);
    for (int32_t n = 0; n <= 10; n++) {
        int32_t want = 1;
        for (int32_t i = 2; i <= n; i++)
            want *= i;
        tfs_tensor *x = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &n);
        tfs_feed feed = {"n:0", x};
        const char *fetch[] = {"loop:0", "loop:1"};
        tfs_tensor *out[2];
        tfs_status st;
        ck_assert_msg(tfs_session_run(s, &feed, 1, fetch, 2, NULL, 0, out, &st) == TFS_OK, "%s",
                      st.msg);
        ck_assert_int_eq(scalar_i32(out[0]), 0);
        ck_assert_int_eq(scalar_i32(out[1]), want);   /* 10! = 3628800 */
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);
        tfs_tensor_unref(x);
    }
    tfs_session_free(s);
}
END_TEST

/* sum over i = n..1 of i, as float, with "While" (the stateful variant): n(n+1)/2. */
START_TEST(test_control_while_sum_float)
{
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32, TFS_DTYPE_FLOAT, TFS_DTYPE_FLOAT};
    tfs_graph *g = new_graph();
    const char *cond_out;
    add_fn(g, "c", cond_first_nonzero(3, T, &cond_out), 3, V3, 1, &cond_out);
    tfs_graph *body = new_graph();
    rt_placeholder(body, "v0", TFS_DTYPE_INT32);   /* remaining */
    rt_placeholder(body, "v1", TFS_DTYPE_FLOAT);   /* i */
    rt_placeholder(body, "v2", TFS_DTYPE_FLOAT);   /* sum */
    const_i32(body, "m1", -1);
    rt_const(body, "p1", rt_scalar_f32(1.0f));
    rt_node(body, "rem", "AddV2", "v0", "m1", TFS_DTYPE_INT32);
    rt_node(body, "i", "AddV2", "v1", "p1", TFS_DTYPE_FLOAT);
    rt_node(body, "sum", "AddV2", "v2", "v1", TFS_DTYPE_FLOAT);
    add_fn(g, "b", body, 3, V3, 3, (const char *const[]){"rem", "i", "sum"});
    rt_placeholder(g, "n", TFS_DTYPE_INT32);
    rt_const(g, "i0", rt_scalar_f32(1.0f));
    rt_const(g, "s0", rt_scalar_f32(0.0f));
    add_while(g, "w", "While", 3, (const char *const[]){"n", "i0", "s0"}, T, "c", "b");
    tfs_session *s = rt_session(g, NULL);
    int32_t n = 1000;
    tfs_tensor *x = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &n), *out = NULL;
    tfs_feed feed = {"n", x};
    tfs_status st;
    ck_assert_msg(rt_run1(s, &feed, 1, "w:2", &out, &st) == TFS_OK, "%s", st.msg);
    float want = 0;
    for (int i = 1; i <= n; i++)
        want += (float)i;
    ck_assert_float_eq(want, 500500.0f);
    ck_assert_float_eq_tol(*(const float *)out->data, want, 1e-6);
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* The Keras LSTM pattern: the input sequence as a TensorList read with GetItem at the step
 * counter, a state carried through the loop, each step's output written with SetItem into a
 * reserved list that is stacked after the loop. Step: h = 0.5 * h + x[t]. */
START_TEST(test_control_while_tensorlist_accumulate)
{
    enum { T_STEPS = 5, F = 3 };
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32, TFS_DTYPE_INT32, TFS_DTYPE_FLOAT,
                                       TFS_DTYPE_VARIANT, TFS_DTYPE_VARIANT};
    const char *const V5[] = {"v0", "v1", "v2", "v3", "v4"};
    tfs_graph *g = new_graph();
    const char *cond_out;
    tfs_graph *cond = new_graph();
    rt_placeholder(cond, "v0", TFS_DTYPE_INT32);   /* step */
    rt_placeholder(cond, "v1", TFS_DTYPE_INT32);   /* steps left */
    rt_placeholder(cond, "v2", TFS_DTYPE_FLOAT);
    rt_placeholder(cond, "v3", TFS_DTYPE_VARIANT);
    rt_placeholder(cond, "v4", TFS_DTYPE_VARIANT);
    cond_out = "v1";
    add_fn(g, "lstm_cond", cond, 5, V5, 1, &cond_out);

    tfs_graph *b = new_graph();
    rt_placeholder(b, "v0", TFS_DTYPE_INT32);
    rt_placeholder(b, "v1", TFS_DTYPE_INT32);
    rt_placeholder(b, "v2", TFS_DTYPE_FLOAT);
    rt_placeholder(b, "v3", TFS_DTYPE_VARIANT);   /* input list */
    rt_placeholder(b, "v4", TFS_DTYPE_VARIANT);   /* output list */
    rt_const(b, "eshape", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){1},
                                    (const int32_t[]){F}));
    int gi = tfs_graph_add_node(b, "x_t", "TensorListGetItem");
    tfs_graph_add_input(b, gi, "v3");
    tfs_graph_add_input(b, gi, "v0");
    tfs_graph_add_input(b, gi, "eshape");
    tfs_graph_set_attr_type(b, gi, "element_dtype", TFS_DTYPE_FLOAT);
    rt_const(b, "half", rt_scalar_f32(0.5f));
    rt_node(b, "decay", "Mul", "v2", "half", TFS_DTYPE_FLOAT);
    rt_node(b, "h", "AddV2", "decay", "x_t", TFS_DTYPE_FLOAT);
    int si = tfs_graph_add_node(b, "out", "TensorListSetItem");
    tfs_graph_add_input(b, si, "v4");
    tfs_graph_add_input(b, si, "v0");
    tfs_graph_add_input(b, si, "h");
    tfs_graph_set_attr_type(b, si, "element_dtype", TFS_DTYPE_FLOAT);
    const_i32(b, "one", 1);
    const_i32(b, "m1", -1);
    rt_node(b, "step", "AddV2", "v0", "one", TFS_DTYPE_INT32);
    rt_node(b, "left", "AddV2", "v1", "m1", TFS_DTYPE_INT32);
    add_fn(g, "lstm_body", b, 5, V5, 5, (const char *const[]){"step", "left", "h", "v3", "out"});

    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);   /* [T, F] */
    rt_const(g, "eshape", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){1},
                                    (const int32_t[]){F}));
    int ft = tfs_graph_add_node(g, "in_list", "TensorListFromTensor");
    tfs_graph_add_input(g, ft, "x");
    tfs_graph_add_input(g, ft, "eshape");
    tfs_graph_set_attr_type(g, ft, "element_dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_type(g, ft, "shape_type", TFS_DTYPE_INT32);
    const_i32(g, "steps", T_STEPS);
    int rs = tfs_graph_add_node(g, "out_list", "TensorListReserve");
    tfs_graph_add_input(g, rs, "eshape");
    tfs_graph_add_input(g, rs, "steps");
    tfs_graph_set_attr_type(g, rs, "element_dtype", TFS_DTYPE_FLOAT);
    const_i32(g, "zero", 0);
    rt_const(g, "h0", rt_tensor(TFS_DTYPE_FLOAT, 1, (const int64_t[]){F}, NULL));
    add_while(g, "while", "StatelessWhile", 5,
              (const char *const[]){"zero", "steps", "h0", "in_list", "out_list"}, T,
              "lstm_cond", "lstm_body");
    int sk = tfs_graph_add_node(g, "stack", "TensorListStack");
    tfs_graph_add_input(g, sk, "while:4");
    tfs_graph_add_input(g, sk, "eshape");
    tfs_graph_set_attr_type(g, sk, "element_dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_int(g, sk, "num_elements", T_STEPS);
    tfs_session *s = rt_session(g, NULL);

    float xv[T_STEPS * F], want[T_STEPS * F], h[F] = {0};
    for (int i = 0; i < T_STEPS * F; i++)
        xv[i] = (float)(i % 7) - 2.5f;
    for (int t = 0; t < T_STEPS; t++)
        for (int f = 0; f < F; f++)
            want[t * F + f] = h[f] = 0.5f * h[f] + xv[t * F + f];
    int64_t dx[] = {T_STEPS, F};
    tfs_tensor *x = rt_tensor(TFS_DTYPE_FLOAT, 2, dx, xv);
    tfs_feed feed = {"x", x};
    const char *fetch[] = {"stack:0", "while:2", "while:0"};
    tfs_tensor *out[3];
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, &feed, 1, fetch, 3, NULL, 0, out, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_test_assert_f32(out[0], 2, dx, want, 1e-6);
    tfs_test_assert_f32(out[1], 1, (const int64_t[]){F}, h, 1e-6);
    ck_assert_int_eq(scalar_i32(out[2]), T_STEPS);
    for (int i = 0; i < 3; i++)
        tfs_tensor_unref(out[i]);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* A loop whose body branches with an If on a flag that alternates between iterations:
 * flag ? acc + n : acc * n; flag = 1 - flag; n -= 1. */
START_TEST(test_control_if_nested_in_while)
{
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32, TFS_DTYPE_INT32, TFS_DTYPE_INT32};
    static const enum tfs_dtype T2[] = {TFS_DTYPE_INT32, TFS_DTYPE_INT32};
    static const enum tfs_dtype T1[] = {TFS_DTYPE_INT32};
    tfs_graph *g = new_graph();
    tfs_graph *add = new_graph();
    rt_placeholder(add, "a", TFS_DTYPE_INT32);
    rt_placeholder(add, "b", TFS_DTYPE_INT32);
    rt_node(add, "r", "AddV2", "a", "b", TFS_DTYPE_INT32);
    add_fn(g, "add", add, 2, (const char *const[]){"a", "b"}, 1, (const char *const[]){"r"});
    tfs_graph *mul = new_graph();
    rt_placeholder(mul, "a", TFS_DTYPE_INT32);
    rt_placeholder(mul, "b", TFS_DTYPE_INT32);
    rt_node(mul, "r", "Mul", "a", "b", TFS_DTYPE_INT32);
    add_fn(g, "mul", mul, 2, (const char *const[]){"a", "b"}, 1, (const char *const[]){"r"});
    const char *cond_out;
    add_fn(g, "c", cond_first_nonzero(3, T, &cond_out), 3, V3, 1, &cond_out);
    tfs_graph *b = new_graph();
    rt_placeholder(b, "v0", TFS_DTYPE_INT32);   /* n */
    rt_placeholder(b, "v1", TFS_DTYPE_INT32);   /* acc */
    rt_placeholder(b, "v2", TFS_DTYPE_INT32);   /* flag */
    int iff = tfs_graph_add_node(b, "branch", "StatelessIf");
    tfs_graph_add_input(b, iff, "v2");
    tfs_graph_add_input(b, iff, "v1");
    tfs_graph_add_input(b, iff, "v0");
    tfs_graph_set_attr_type(b, iff, "Tcond", TFS_DTYPE_INT32);
    set_types(b, iff, "Tin", 2, T2);
    set_types(b, iff, "Tout", 1, T1);
    set_func(b, iff, "then_branch", "add");
    set_func(b, iff, "else_branch", "mul");
    const_i32(b, "m1", -1);
    const_i32(b, "p1", 1);
    rt_node(b, "n", "AddV2", "v0", "m1", TFS_DTYPE_INT32);
    rt_node(b, "negflag", "Mul", "v2", "m1", TFS_DTYPE_INT32);
    rt_node(b, "flag", "AddV2", "negflag", "p1", TFS_DTYPE_INT32);
    add_fn(g, "b", b, 3, V3, 3, (const char *const[]){"n", "branch:0", "flag"});
    rt_placeholder(g, "n", TFS_DTYPE_INT32);
    const_i32(g, "acc0", 0);
    const_i32(g, "flag0", 1);
    add_while(g, "w", "While", 3, (const char *const[]){"n", "acc0", "flag0"}, T, "c", "b");
    tfs_session *s = rt_session(g, NULL);
    for (int32_t n = 0; n < 9; n++) {
        int32_t acc = 0, flag = 1;
        for (int32_t i = n; i != 0; i--, flag = 1 - flag)
            acc = flag ? acc + i : acc * i;
        tfs_tensor *x = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &n), *out = NULL;
        tfs_feed feed = {"n", x};
        tfs_status st;
        ck_assert_msg(rt_run1(s, &feed, 1, "w:1", &out, &st) == TFS_OK, "%s", st.msg);
        ck_assert_int_eq(scalar_i32(out), acc);   /* n = 5: ((5*4)+3)*2+1 = 47 */
        tfs_tensor_unref(out);
        tfs_tensor_unref(x);
    }
    tfs_session_free(s);
}
END_TEST

/* ---- If conditions --------------------------------------------------------------------------- */

/* Graph: y = If(c, x) with then: x * 10, else: x + 1 (float x). */
static tfs_session *if_session(enum tfs_dtype cond_dtype)
{
    static const enum tfs_dtype T1[] = {TFS_DTYPE_FLOAT};
    tfs_graph *g = new_graph();
    tfs_graph *t = new_graph();
    rt_placeholder(t, "x", TFS_DTYPE_FLOAT);
    rt_const(t, "ten", rt_scalar_f32(10.0f));
    rt_node(t, "r", "Mul", "x", "ten", TFS_DTYPE_FLOAT);
    add_fn(g, "times10", t, 1, (const char *const[]){"x"}, 1, (const char *const[]){"r"});
    tfs_graph *e = new_graph();
    rt_placeholder(e, "x", TFS_DTYPE_FLOAT);
    rt_const(e, "one", rt_scalar_f32(1.0f));
    rt_node(e, "r", "AddV2", "x", "one", TFS_DTYPE_FLOAT);
    add_fn(g, "plus1", e, 1, (const char *const[]){"x"}, 1, (const char *const[]){"r:0"});
    rt_placeholder(g, "c", cond_dtype);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    int id = tfs_graph_add_node(g, "y", "If");
    tfs_graph_add_input(g, id, "c");
    tfs_graph_add_input(g, id, "x");
    tfs_graph_set_attr_type(g, id, "Tcond", cond_dtype);
    set_types(g, id, "Tin", 1, T1);
    set_types(g, id, "Tout", 1, T1);
    set_func(g, id, "then_branch", "times10");
    set_func(g, id, "else_branch", "plus1");
    return rt_session(g, NULL);
}

/* Runs y for cond c (taken) and x = 3: 30 means then, 4 means else. */
static float run_if(tfs_session *s, tfs_tensor *c)
{
    tfs_tensor *x = rt_scalar_f32(3.0f), *out = NULL;
    tfs_feed feeds[] = {{"c", c}, {"x", x}};
    tfs_status st;
    ck_assert_msg(rt_run1(s, feeds, 2, "y", &out, &st) == TFS_OK, "%s", st.msg);
    float v = *(const float *)out->data;
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(c);
    return v;
}

START_TEST(test_control_if_conditions)
{
    tfs_session *s = if_session(TFS_DTYPE_BOOL);
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_BOOL, 0, NULL, (const uint8_t[]){1})), 30);
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_BOOL, 0, NULL, (const uint8_t[]){0})), 4);
    /* Non-scalar: true iff it has elements, whatever their values. */
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_BOOL, 1, (const int64_t[]){2},
                                           (const uint8_t[]){0, 0})), 30);
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_BOOL, 1, (const int64_t[]){0}, NULL)), 4);
    tfs_session_free(s);

    s = if_session(TFS_DTYPE_FLOAT);
    ck_assert_float_eq(run_if(s, rt_scalar_f32(0.0f)), 4);
    ck_assert_float_eq(run_if(s, rt_scalar_f32(-0.0f)), 4);
    ck_assert_float_eq(run_if(s, rt_scalar_f32(0.25f)), 30);
    ck_assert_float_eq(run_if(s, rt_scalar_f32(NAN)), 30);   /* NaN != 0 */
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_FLOAT, 2, (const int64_t[]){1, 1},
                                           (const float[]){0})), 30);
    tfs_session_free(s);

    s = if_session(TFS_DTYPE_INT64);
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){0})), 4);
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_INT64, 0, NULL,
                                           (const int64_t[]){(int64_t)1 << 40})), 30);
    tfs_session_free(s);

    s = if_session(TFS_DTYPE_STRING);
    ck_assert_float_eq(run_if(s, rt_tensor(TFS_DTYPE_STRING, 0, NULL, NULL)), 4);   /* "" */
    tfs_tensor *str = rt_tensor(TFS_DTYPE_STRING, 0, NULL, NULL);
    ck_assert_int_eq(tfs_tensor_set_string(str, 0, "a", 1, NULL), TFS_OK);
    ck_assert_float_eq(run_if(s, str), 30);
    tfs_session_free(s);
}
END_TEST

/* ---- resources in loops ---------------------------------------------------------------------- */

/* A resource handle as a loop variable: the body reads the session's variable (Keras passes its
 * weights into RNN loops this way). acc += w for n iterations, w = 2.5. */
START_TEST(test_control_while_reads_variable)
{
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32, TFS_DTYPE_FLOAT, TFS_DTYPE_RESOURCE};
    tfs_graph *g = new_graph();
    const char *cond_out;
    add_fn(g, "c", cond_first_nonzero(3, T, &cond_out), 3, V3, 1, &cond_out);
    tfs_graph *b = new_graph();
    rt_placeholder(b, "v0", TFS_DTYPE_INT32);
    rt_placeholder(b, "v1", TFS_DTYPE_FLOAT);
    rt_placeholder(b, "v2", TFS_DTYPE_RESOURCE);
    int rd = tfs_graph_add_node(b, "w", "ReadVariableOp");
    tfs_graph_add_input(b, rd, "v2");
    tfs_graph_set_attr_type(b, rd, "dtype", TFS_DTYPE_FLOAT);
    rt_node(b, "acc", "AddV2", "v1", "w", TFS_DTYPE_FLOAT);
    const_i32(b, "m1", -1);
    rt_node(b, "n", "AddV2", "v0", "m1", TFS_DTYPE_INT32);
    add_fn(g, "b", b, 3, V3, 3, (const char *const[]){"n", "acc", "v2"});
    int h = tfs_graph_add_node(g, "var", "VarHandleOp");
    tfs_graph_set_attr_type(g, h, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_string(g, h, "shared_name", "weight");
    rt_const(g, "init_value", rt_scalar_f32(2.5f));
    int as = tfs_graph_add_node(g, "init", "AssignVariableOp");
    tfs_graph_add_input(g, as, "var");
    tfs_graph_add_input(g, as, "init_value");
    tfs_graph_set_attr_type(g, as, "dtype", TFS_DTYPE_FLOAT);
    const_i32(g, "n", 4);
    rt_const(g, "acc0", rt_scalar_f32(1.0f));
    add_while(g, "loop", "While", 3, (const char *const[]){"n", "acc0", "var"}, T, "c", "b");
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    tfs_tensor *out = NULL;
    /* Before the variable is initialized the body's read fails, naming the body's node. */
    ck_assert_int_ne(rt_run1(s, NULL, 0, "loop:1", &out, &st), TFS_OK);
    ck_assert_msg(strstr(st.msg, "'loop'") && strstr(st.msg, "'w'"), "%s", st.msg);
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, (const char *const[]){"init"}, 1, NULL,
                                     &st), TFS_OK);
    ck_assert_msg(rt_run1(s, NULL, 0, "loop:1", &out, &st) == TFS_OK, "%s", st.msg);
    ck_assert_float_eq(*(const float *)out->data, 1.0f + 4 * 2.5f);
    tfs_tensor_unref(out);
    tfs_session_free(s);
}
END_TEST

/* ---- guards ---------------------------------------------------------------------------------- */

/* "spin": a StatelessWhile whose cond is always true, counting up from 0. */
static tfs_graph *endless_loop_graph(void)
{
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32};
    tfs_graph *g = new_graph();
    tfs_graph *c = new_graph();
    rt_placeholder(c, "v0", TFS_DTYPE_INT32);
    rt_const(c, "yes", rt_tensor(TFS_DTYPE_BOOL, 0, NULL, (const uint8_t[]){1}));
    add_fn(g, "forever", c, 1, (const char *const[]){"v0"}, 1, (const char *const[]){"yes"});
    tfs_graph *b = new_graph();
    rt_placeholder(b, "v0", TFS_DTYPE_INT32);
    const_i32(b, "p1", 1);
    rt_node(b, "n", "AddV2", "v0", "p1", TFS_DTYPE_INT32);
    add_fn(g, "inc", b, 1, (const char *const[]){"v0"}, 1, (const char *const[]){"n"});
    const_i32(g, "zero", 0);
    add_while(g, "spin", "StatelessWhile", 1, (const char *const[]){"zero"}, T, "forever", "inc");
    return g;
}

/* cond always true: the session's iteration limit stops the loop with an error naming it. */
START_TEST(test_control_while_iteration_limit)
{
    tfs_graph *g = endless_loop_graph();
    tfs_session_opts o = tfs_session_opts_default();
    ck_assert_int_eq(o.max_loop_iterations, TFS_SESSION_MAX_LOOP_ITERATIONS);
    o.max_loop_iterations = 1000;
    tfs_session *s = rt_session(g, &o);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "spin", &out, &st), TFS_RESOURCE_EXHAUSTED);
    rt_assert_err(st, TFS_RESOURCE_EXHAUSTED, "node 'spin'");
    rt_assert_err(st, TFS_RESOURCE_EXHAUSTED, "1000 iterations");
    ck_assert_ptr_null(out);
    tfs_session_free(s);
}
END_TEST

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A run stops at the thread's deadline inside a loop that would go on for seconds, says where,
 * and the next run on the thread, with the deadline put back, completes. */
START_TEST(test_control_while_stops_at_deadline)
{
    tfs_graph *g = endless_loop_graph();
    tfs_session *s = rt_session(g, NULL);   /* the default cap: 10M iterations, seconds */
    tfs_tensor *out = NULL;
    tfs_status st;
    int64_t t0 = now_ns();
    ck_assert_int_eq(tfs_session_set_thread_deadline(t0 + 50 * 1000000), 0);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "spin", &out, &st), TFS_DEADLINE_EXCEEDED);
    int64_t took = now_ns() - t0;
    ck_assert_int_eq(tfs_session_set_thread_deadline(0), t0 + 50 * 1000000);
    rt_assert_err(st, TFS_DEADLINE_EXCEEDED, "deadline passed");
    rt_assert_err(st, TFS_DEADLINE_EXCEEDED, "node 'spin'");
    ck_assert_ptr_null(out);
    ck_assert_msg(took < 1000 * 1000000, "stopped after %lld ms", (long long)(took / 1000000));
    tfs_session_free(s);

    /* No deadline: a short loop runs to its end. */
    s = factorial_session(NULL);
    int32_t n = 5;
    tfs_tensor *x = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &n);
    tfs_feed feed = {"n:0", x};
    const char *fetch[] = {"loop:1"};
    ck_assert_int_eq(tfs_session_run(s, &feed, 1, fetch, 1, NULL, 0, &out, &st), TFS_OK);
    ck_assert_int_eq(scalar_i32(out), 120);
    tfs_tensor_unref(out);
    /* A deadline already passed stops the run before its first kernel. */
    tfs_session_set_thread_deadline(now_ns() - 1);
    ck_assert_int_eq(tfs_session_run(s, &feed, 1, fetch, 1, NULL, 0, &out, &st),
                     TFS_DEADLINE_EXCEEDED);
    tfs_session_set_thread_deadline(0);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* ---- TF1 conditionals: Switch / Merge ------------------------------------------------------- */

/* What tf.cond(pred, lambda: x * 10, lambda: x + 20) builds in a TF1 graph: a Switch per input,
 * Identity "pivots" on each side, branch constants that hang on the pivots by control edges, and
 * a Merge of the two results. */
static tfs_graph *cond_graph(void)
{
    tfs_graph *g = new_graph();
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "pred", TFS_DTYPE_BOOL);
    rt_node(g, "sw", "Switch", "x", "pred", TFS_DTYPE_FLOAT);
    rt_node(g, "pred_sw", "Switch", "pred", "pred", TFS_DTYPE_BOOL);
    rt_node(g, "pivot_t", "Identity", "pred_sw:1", NULL, TFS_DTYPE_BOOL);
    rt_node(g, "pivot_f", "Identity", "pred_sw:0", NULL, TFS_DTYPE_BOOL);
    int ten = rt_const(g, "ten", rt_scalar_f32(10));
    tfs_graph_add_input(g, ten, "^pivot_t");
    int twenty = rt_const(g, "twenty", rt_scalar_f32(20));
    tfs_graph_add_input(g, twenty, "^pivot_f");
    rt_node(g, "then", "Mul", "sw:1", "ten", TFS_DTYPE_FLOAT);
    rt_node(g, "else", "AddV2", "sw:0", "twenty", TFS_DTYPE_FLOAT);
    int m = rt_node(g, "merge", "Merge", "else", "then", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_int(g, m, "N", 2);
    /* A constant-only branch result: live only through its pivot's control edge. */
    int seven = rt_const(g, "seven", rt_scalar_f32(7));
    tfs_graph_add_input(g, seven, "^pivot_t");
    int m2 = rt_node(g, "merge_const", "Merge", "twenty", "seven", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_int(g, m2, "N", 2);
    return g;
}

static tfs_session *cond_session(void)
{
    return rt_session(cond_graph(), NULL);
}

START_TEST(test_control_switch_merge_cond)
{
    tfs_session *s = cond_session();
    /* Both ways, twice each, so that a learned memory plan meets the other branch. */
    for (int round = 0; round < 4; round++) {
        bool pred = round % 2 == 0;
        float x = 3.0f + (float)round;
        tfs_tensor *tx = rt_scalar_f32(x);
        tfs_tensor *tp = rt_tensor(TFS_DTYPE_BOOL, 0, NULL, (const uint8_t[]){pred});
        tfs_feed feeds[] = {{"x", tx}, {"pred", tp}};
        const char *fetch[] = {"merge:0", "merge:1", "merge_const:0"};
        tfs_tensor *out[3];
        tfs_status st;
        ck_assert_msg(tfs_session_run(s, feeds, 2, fetch, 3, NULL, 0, out, &st) == TFS_OK, "%s",
                      st.msg);
        ck_assert_float_eq(*(const float *)out[0]->data, pred ? x * 10 : x + 20);
        ck_assert_int_eq(scalar_i32(out[1]), pred ? 1 : 0);
        ck_assert_float_eq(*(const float *)out[2]->data, pred ? 7 : 20);
        for (int i = 0; i < 3; i++)
            tfs_tensor_unref(out[i]);
        /* The untaken side has no value: fetching it is an error, not garbage. */
        tfs_tensor *o = NULL;
        ck_assert_int_eq(rt_run1(s, feeds, 2, pred ? "else:0" : "then:0", &o, &st),
                         TFS_INVALID_ARGUMENT);
        rt_assert_err(st, TFS_INVALID_ARGUMENT, "not taken");
        ck_assert_ptr_null(o);
        ck_assert_int_eq(rt_run1(s, feeds, 2, pred ? "then:0" : "else:0", &o, &st), TFS_OK);
        tfs_tensor_unref(o);
        tfs_tensor_unref(tx);
        tfs_tensor_unref(tp);
    }
    /* pred must be a scalar bool, as TensorFlow says. */
    tfs_tensor *tx = rt_scalar_f32(1), *tp = rt_scalar_f32(1), *o = NULL;
    tfs_feed feeds[] = {{"x", tx}, {"pred", tp}};
    tfs_status st;
    ck_assert_int_ne(rt_run1(s, feeds, 2, "merge:0", &o, &st), TFS_OK);
    ck_assert_ptr_null(o);
    tfs_tensor_unref(tx);
    tfs_tensor_unref(tp);
    tfs_session_free(s);
}
END_TEST

/* The serving rewrites keep a cond's meaning: the pivots stay (Identity removal would hand their
 * control edges to the Switch, which is live on both sides), and both branches answer as before. */
START_TEST(test_control_switch_merge_rewritten)
{
    tfs_graph *g = cond_graph();
    tfs_status st;
    ck_assert_msg(tfs_graph_finalize(g, &st) == TFS_OK, "%s", st.msg);
    tfs_session *values = NULL;
    ck_assert_int_eq(tfs_session_new(g, NULL, &values, &st), TFS_OK);
    const char *feeds[] = {"x:0", "pred:0"}, *fetches[] = {"merge:0", "merge:1", "merge_const:0"};
    tfs_rewrite_run run = {.n_feeds = 2, .feeds = feeds, .n_fetches = 3, .fetches = fetches};
    tfs_rewrite_opts o = tfs_rewrite_opts_default();
    tfs_rewrite_stats stats;
    tfs_graph *rg = NULL;
    ck_assert_msg(tfs_graph_rewrite(g, values, &run, 1, &o, &rg, &stats, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_ptr_nonnull(rg);
    ck_assert_int_ge(tfs_graph_find_node(rg, "pivot_t"), 0);
    tfs_session *s = rt_session(rg, NULL);
    for (int pred = 0; pred <= 1; pred++) {
        tfs_tensor *tx = rt_scalar_f32(2), *out[3];
        tfs_tensor *tp = rt_tensor(TFS_DTYPE_BOOL, 0, NULL, (const uint8_t[]){(uint8_t)pred});
        tfs_feed fd[] = {{"x", tx}, {"pred", tp}};
        ck_assert_msg(tfs_session_run(s, fd, 2, fetches, 3, NULL, 0, out, &st) == TFS_OK, "%s",
                      st.msg);
        ck_assert_float_eq(*(const float *)out[0]->data, pred ? 20 : 22);
        ck_assert_int_eq(scalar_i32(out[1]), pred);
        ck_assert_float_eq(*(const float *)out[2]->data, pred ? 7 : 20);
        for (int i = 0; i < 3; i++)
            tfs_tensor_unref(out[i]);
        tfs_tensor_unref(tx);
        tfs_tensor_unref(tp);
    }
    tfs_session_free(s);
    tfs_session_free(values);
    tfs_graph_unref(g);
}
END_TEST

/* A func attr naming no library function: check, missing_ops and run all say which. */
START_TEST(test_control_unknown_function)
{
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32};
    tfs_graph *g = new_graph();
    tfs_graph *b = new_graph();
    rt_placeholder(b, "v0", TFS_DTYPE_INT32);
    add_fn(g, "id", b, 1, (const char *const[]){"v0"}, 1, (const char *const[]){"v0"});
    const_i32(g, "zero", 0);
    add_while(g, "w", "StatelessWhile", 1, (const char *const[]){"zero"}, T, "id", "no_such_body");
    tfs_session *s = rt_session(g, NULL);
    const char *fetch = "w:0";
    tfs_status st;
    ck_assert_int_eq(tfs_session_check(s, NULL, 0, &fetch, 1, NULL, 0, &st), TFS_NOT_FOUND);
    rt_assert_err(st, TFS_NOT_FOUND, "'no_such_body'");
    rt_assert_err(st, TFS_NOT_FOUND, "node 'w'");
    const char **ops = NULL;
    int n_ops = 0;
    ck_assert_int_eq(tfs_session_missing_ops(s, NULL, 0, &fetch, 1, NULL, 0, &ops, &n_ops, &st),
                     TFS_NOT_FOUND);
    tfs_tensor *out = NULL;
    ck_assert_int_eq(rt_run1(s, NULL, 0, fetch, &out, &st), TFS_NOT_FOUND);
    rt_assert_err(st, TFS_NOT_FOUND, "no_such_body");
    tfs_session_free(s);
}
END_TEST

/* Ops without a kernel inside a body are reported like the graph's own, before anything runs;
 * so is a function result that names no tensor. */
START_TEST(test_control_body_problems_reported_by_check)
{
    static const enum tfs_dtype T1[] = {TFS_DTYPE_FLOAT};
    tfs_graph *g = new_graph();
    tfs_graph *t = new_graph();
    rt_placeholder(t, "x", TFS_DTYPE_FLOAT);
    rt_node(t, "r", "NoSuchOpInBody", "x", NULL, TFS_DTYPE_FLOAT);
    add_fn(g, "then", t, 1, (const char *const[]){"x"}, 1, (const char *const[]){"r"});
    tfs_graph *e = new_graph();
    rt_placeholder(e, "x", TFS_DTYPE_FLOAT);
    add_fn(g, "else", e, 1, (const char *const[]){"x"}, 1, (const char *const[]){"missing:0"});
    rt_placeholder(g, "c", TFS_DTYPE_BOOL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    for (int i = 0; i < 2; i++) {
        int id = tfs_graph_add_node(g, i ? "y2" : "y1", "StatelessIf");
        tfs_graph_add_input(g, id, "c");
        tfs_graph_add_input(g, id, "x");
        set_types(g, id, "Tin", 1, T1);
        set_types(g, id, "Tout", 1, T1);
        set_func(g, id, "then_branch", "then");
        set_func(g, id, "else_branch", i ? "else" : "then");
    }
    tfs_session *s = rt_session(g, NULL);
    const char *feeds[] = {"c", "x"};
    const char *fetch = "y1";
    const char **ops = NULL;
    int n_ops = 0;
    tfs_status st;
    ck_assert_int_eq(tfs_session_missing_ops(s, feeds, 2, &fetch, 1, NULL, 0, &ops, &n_ops, &st),
                     TFS_OK);
    ck_assert_int_eq(n_ops, 1);
    ck_assert_str_eq(ops[0], "NoSuchOpInBody");
    tfs_free(ops);
    ck_assert_int_eq(tfs_session_check(s, feeds, 2, &fetch, 1, NULL, 0, &st), TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "NoSuchOpInBody");
    fetch = "y2";
    ck_assert_int_eq(tfs_session_check(s, feeds, 2, &fetch, 1, NULL, 0, &st), TFS_NOT_FOUND);
    rt_assert_err(st, TFS_NOT_FOUND, "function 'else'");
    rt_assert_err(st, TFS_NOT_FOUND, "missing:0");
    tfs_session_free(s);
}
END_TEST

/* A function that calls itself without end fails with an error instead of overflowing the stack,
 * and an error inside a loop body names the loop node, the body's node and the iteration. */
START_TEST(test_control_recursion_and_body_errors)
{
    static const enum tfs_dtype T1[] = {TFS_DTYPE_FLOAT};
    tfs_graph *g = new_graph();
    tfs_graph *r = new_graph();
    rt_placeholder(r, "x", TFS_DTYPE_FLOAT);
    int id = tfs_graph_add_node(r, "again", "If");
    tfs_graph_add_input(r, id, "x");
    tfs_graph_add_input(r, id, "x");
    set_types(r, id, "Tout", 1, T1);
    set_func(r, id, "then_branch", "rec");
    set_func(r, id, "else_branch", "rec");
    add_fn(g, "rec", r, 1, (const char *const[]){"x"}, 1, (const char *const[]){"again"});
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    id = tfs_graph_add_node(g, "y", "If");
    tfs_graph_add_input(g, id, "x");
    tfs_graph_add_input(g, id, "x");
    set_types(g, id, "Tout", 1, T1);
    set_func(g, id, "then_branch", "rec");
    set_func(g, id, "else_branch", "rec");
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor *x = rt_scalar_f32(1.0f), *out = NULL;
    tfs_feed feed = {"x", x};
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "nest deeper than 64 (does 'rec' call itself?)");
    ck_assert_msg(!strncmp(st.msg, "node 'y' (If): then_branch function 'rec'", 40), "%s", st.msg);
    tfs_session_free(s);
    tfs_tensor_unref(x);

    /* A loop counting n = -1, -2, ... (non-zero, so it goes on) whose body reshapes by n: fine
     * for -1 in iteration 0, an error for -2 in iteration 1. */
    static const enum tfs_dtype T[] = {TFS_DTYPE_INT32, TFS_DTYPE_INT32};
    g = new_graph();
    const char *cond_out;
    add_fn(g, "c", cond_first_nonzero(2, T, &cond_out), 2, V2, 1, &cond_out);
    tfs_graph *b = new_graph();
    rt_placeholder(b, "v0", TFS_DTYPE_INT32);
    rt_placeholder(b, "v1", TFS_DTYPE_INT32);
    const_i32(b, "m1", -1);
    rt_node(b, "n", "AddV2", "v0", "m1", TFS_DTYPE_INT32);
    rt_node(b, "shape", "Reshape", "v1", "v0", TFS_DTYPE_INT32);
    tfs_graph_set_attr_type(b, tfs_graph_find_node(b, "shape"), "Tshape", TFS_DTYPE_INT32);
    add_fn(g, "b", b, 2, V2, 2, (const char *const[]){"n", "shape"});
    const_i32(g, "n0", -1);
    const_i32(g, "seven", 7);
    add_while(g, "loop", "StatelessWhile", 2, (const char *const[]){"n0", "seven"}, T, "c", "b");
    s = rt_session(g, NULL);
    ck_assert_int_ne(rt_run1(s, NULL, 0, "loop:1", &out, &st), TFS_OK);
    ck_assert_msg(strstr(st.msg, "node 'loop'") && strstr(st.msg, "'shape'") &&
                  strstr(st.msg, "body function 'b', iteration 1: node 'shape'"), "%s", st.msg);
    tfs_session_free(s);
}
END_TEST

/* Library builder errors are sticky and reported by finalize. */
START_TEST(test_control_library_builder_errors)
{
    tfs_graph *g = new_graph(), *body = new_graph();
    rt_placeholder(body, "x", TFS_DTYPE_FLOAT);
    tfs_graph_add_function(g, "f", body, 1, (const char *const[]){"x"}, 1,
                           (const char *const[]){"x"});   /* body not finalized */
    tfs_status st;
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "'f'");
    tfs_graph_unref(g);

    g = new_graph();
    ck_assert_int_eq(tfs_graph_finalize(body, &st), TFS_OK);
    tfs_graph_add_function(g, "f", body, 1, (const char *const[]){"x"}, 0, NULL);
    ck_assert(tfs_graph_has_function(g, "f"));
    ck_assert(!tfs_graph_has_function(g, "g"));
    ck_assert_int_eq(tfs_graph_function_count(g), 1);
    tfs_graph_add_function(g, "f", body, 1, (const char *const[]){"x"}, 0, NULL);
    ck_assert_int_eq(tfs_graph_finalize(g, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "duplicate library function 'f'");
    tfs_graph_unref(g);
    tfs_graph_unref(body);
}
END_TEST

/* Runs from several threads share the prepared bodies. */
typedef struct fact_job {
    tfs_session *s;
    int32_t      n;
    int32_t      got;
} fact_job;

static void *fact_thread(void *arg)
{
    fact_job *j = arg;
    for (int rep = 0; rep < 50; rep++) {
        tfs_tensor *x = rt_tensor(TFS_DTYPE_INT32, 0, NULL, &j->n), *out = NULL;
        tfs_feed feed = {"n", x};
        tfs_status st;
        j->got = rt_run1(j->s, &feed, 1, "loop:1", &out, &st) == TFS_OK ? scalar_i32(out) : -1;
        tfs_tensor_unref(out);
        tfs_tensor_unref(x);
    }
    return NULL;
}

START_TEST(test_control_concurrent_runs)
{
    tfs_session *s = factorial_session(NULL);
    pthread_t th[4];
    fact_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (fact_job){s, 3 + i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, fact_thread, &jobs[i]), 0);
    }
    static const int32_t want[] = {6, 24, 120, 720};
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(jobs[i].got, want[i]);
    }
    tfs_session_free(s);
}
END_TEST

Suite *suite_runtime_control(void)
{
    Suite *s = suite_create("runtime_control");
    TCase *tc = tcase_create("control");
    tcase_add_test(tc, test_control_while_factorial);
    tcase_add_test(tc, test_control_while_sum_float);
    tcase_add_test(tc, test_control_while_tensorlist_accumulate);
    tcase_add_test(tc, test_control_if_nested_in_while);
    tcase_add_test(tc, test_control_if_conditions);
    tcase_add_test(tc, test_control_while_reads_variable);
    tcase_add_test(tc, test_control_while_iteration_limit);
    tcase_add_test(tc, test_control_while_stops_at_deadline);
    tcase_add_test(tc, test_control_switch_merge_cond);
    tcase_add_test(tc, test_control_switch_merge_rewritten);
    tcase_add_test(tc, test_control_unknown_function);
    tcase_add_test(tc, test_control_body_problems_reported_by_check);
    tcase_add_test(tc, test_control_recursion_and_body_errors);
    tcase_add_test(tc, test_control_library_builder_errors);
    tcase_add_test(tc, test_control_concurrent_runs);
    suite_add_tcase(s, tc);
    return s;
}
