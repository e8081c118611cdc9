/* Tests of runtime/session.c together with the state kernels: name resolution, pruning, feeds
 * that cut the graph, control dependencies, variables of both kinds, RestoreV2 through a fake
 * checkpoint reader, tfs_session_check, errors carrying the node name, and concurrent runs. */
#include <check.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_session(void);

static const int64_t d3[] = {3};

/* x (fed) * c, with c = [1, 2, 3]. */
static tfs_session *mul_session(void)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_const(g, "c", tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3}));
    rt_node(g, "y", "Mul", "x", "c", TFS_DTYPE_FLOAT);
    return rt_session(g, NULL);
}

START_TEST(test_session_run_feed_and_fetch)
{
    int64_t base = tfs_alloc_bytes_in_use();
    tfs_session *s = mul_session();
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){2, 3, 4});
    tfs_feed feed = {"x:0", x};
    tfs_tensor *y = NULL;
    tfs_status st;
    ck_assert_msg(rt_run1(s, &feed, 1, "y", &y, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(y, 1, d3, (const float[]){2, 6, 12}, 0);
    tfs_tensor_unref(y);
    /* Fetching a fed tensor returns what was fed. */
    ck_assert_int_eq(rt_run1(s, &feed, 1, "x:0", &y, &st), TFS_OK);
    ck_assert_ptr_eq(y, x);
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
    ck_assert_ptr_nonnull(tfs_session_graph(s));
    tfs_session_free(s);
    tfs_session_free(NULL);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);   /* intermediates were all released */
}
END_TEST

START_TEST(test_session_name_errors)
{
    tfs_session *s = mul_session();
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){2, 3, 4});
    tfs_feed feed = {"x:0", x};
    tfs_tensor *y = (tfs_tensor *)1;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y:3", &y, &st), TFS_NOT_FOUND);
    ck_assert_ptr_null(y);
    rt_assert_err(st, TFS_NOT_FOUND, "Tensor y:3 not found in graph");
    ck_assert_int_eq(rt_run1(s, &feed, 1, "nope:0", &y, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Tensor nope:0 not found in graph");
    tfs_feed bad = {"q:0", x};
    ck_assert_int_eq(rt_run1(s, &bad, 1, "y", &y, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Tensor q:0 not found in graph");
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y:", &y, &st), TFS_INVALID_ARGUMENT);
    const char *target = "ghost";
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st), TFS_NOT_FOUND);
    rt_assert_err(st, TFS_NOT_FOUND, "ghost");
    tfs_feed twice[2] = {{"x", x}, {"x:0", x}};
    ck_assert_int_eq(rt_run1(s, twice, 2, "y", &y, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "fed more than once");
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_session_placeholder_errors)
{
    tfs_session *s = mul_session();
    tfs_tensor *y = NULL;
    tfs_status st;
    /* Needed but not fed. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "y", &y, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'x': You must feed a value for placeholder tensor 'x' with "
                             "dtype float");
    /* Fed with the wrong dtype. */
    int64_t d[] = {3};
    tfs_tensor *xi = rt_tensor(TFS_DTYPE_INT32, 1, d, (const int32_t[]){1, 2, 3});
    tfs_feed feed = {"x", xi};
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y", &y, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "dtype float");
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "got int32");
    ck_assert_ptr_null(y);
    tfs_tensor_unref(xi);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_session_kernel_errors_name_the_node)
{
    tfs_session *s = mul_session();
    int64_t d2[] = {2};
    tfs_tensor *x = tfs_test_tensor_f32(1, d2, (const float[]){1, 2});
    tfs_feed feed = {"x", x};
    tfs_tensor *y = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y", &y, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "node 'y': Incompatible shapes: [2] vs. [3]");
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* p (unfed) -> unused; x -> id -> y = id * id. */
START_TEST(test_session_pruning)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "p", TFS_DTYPE_FLOAT);
    rt_node(g, "unused", "Identity", "p", NULL, TFS_DTYPE_FLOAT);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "id", "Identity", "x", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Mul", "id", "id", TFS_DTYPE_FLOAT);
    rt_const(g, "k", rt_scalar_f32(5));
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    tfs_tensor *out = NULL;

    /* The unfed placeholder p is not needed for k, so it never runs. */
    ck_assert_msg(rt_run1(s, NULL, 0, "k", &out, &st) == TFS_OK, "%s", st.msg);
    ck_assert_float_eq(*(float *)out->data, 5);
    tfs_tensor_unref(out);

    /* Feeding id:0 cuts the graph there: the unfed placeholder x behind it is not executed. */
    tfs_tensor *v = tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3});
    tfs_feed feed = {"id:0", v};
    ck_assert_msg(rt_run1(s, &feed, 1, "y", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d3, (const float[]){1, 4, 9}, 0);
    tfs_tensor_unref(out);

    /* Without the feed, x is needed and unfed. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "y", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "placeholder tensor 'x'");
    tfs_tensor_unref(v);
    tfs_session_free(s);
}
END_TEST

/* The fetch hook: a = x * c, then y = -a * c; fetching (y, a) reports a first, while y is
 * still to be computed, then y, each once and with the value the run returns; and after every
 * step a call with fetch -1 (what a trainer uses to move its transfers along). */
typedef struct hook_log {
    int   calls, order[4], steps, steps_before[4];
    float first[4];
} hook_log;

static void log_fetch(int fetch, const tfs_tensor *t, void *arg)
{
    hook_log *h = arg;
    if (fetch < 0) {
        ck_assert_ptr_null(t);
        h->steps++;
        return;
    }
    if (h->calls < 4) {
        h->order[h->calls] = fetch;
        h->first[h->calls] = ((const float *)t->data)[0];
        h->steps_before[h->calls] = h->steps;
    }
    h->calls++;
}

START_TEST(test_session_fetch_hook)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_const(g, "c", tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3}));
    rt_node(g, "a", "Mul", "x", "c", TFS_DTYPE_FLOAT);
    rt_node(g, "b", "Neg", "a", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Mul", "b", "c", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor  *x = tfs_test_tensor_f32(1, d3, (const float[]){2, 3, 4});
    tfs_feed     feed = {"x:0", x};
    const char  *fetches[2] = {"y:0", "a:0"};
    tfs_tensor  *out[2] = {NULL, NULL};
    tfs_status   st;
    hook_log     h = {0};
    tfs_session_set_thread_fetch_hook(log_fetch, &h);
    ck_assert_msg(tfs_session_run(s, &feed, 1, fetches, 2, NULL, 0, out, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(h.calls, 2);
    ck_assert_int_eq(h.order[0], 1);
    ck_assert_int_eq(h.order[1], 0);
    ck_assert_float_eq(h.first[0], 2);
    ck_assert_float_eq(h.first[1], -2);
    /* A step call after each of a, b and y at least; b's (and a's) between the two reports. */
    ck_assert_int_ge(h.steps, 3);
    ck_assert_int_ge(h.steps_before[1] - h.steps_before[0], 2);
    ck_assert_int_ge(h.steps, h.steps_before[1] + 1);
    tfs_test_assert_f32(out[0], 1, d3, (const float[]){-2, -12, -36}, 0);
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    /* Cleared: the next run calls nothing. */
    tfs_session_set_thread_fetch_hook(NULL, NULL);
    int steps = h.steps;
    ck_assert_int_eq(tfs_session_run(s, &feed, 1, fetches, 2, NULL, 0, out, &st), TFS_OK);
    ck_assert_int_eq(h.calls, 2);
    ck_assert_int_eq(h.steps, steps);
    tfs_tensor_unref(out[0]);
    tfs_tensor_unref(out[1]);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_session_cycle_detected)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_node(g, "a", "Identity", "b", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "b", "Identity", "a", NULL, TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "b", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "cycle");
    tfs_session_free(s);
}
END_TEST

/* v = VariableV2 [3] float; init = Assign(v, c); read = Identity(v); add = AssignAdd(v, c). */
static tfs_graph *ref_variable_graph(void)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int v = tfs_graph_add_node(g, "v", "VariableV2");
    tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
    tfs_shape sh = {1, {3}};
    tfs_graph_set_attr_shape(g, v, "shape", &sh);
    tfs_graph_set_attr_string(g, v, "container", "");
    tfs_graph_set_attr_string(g, v, "shared_name", "");
    rt_const(g, "c", tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3}));
    rt_node(g, "init", "Assign", "v", "c", TFS_DTYPE_FLOAT);
    rt_node(g, "read", "Identity", "v", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "add", "AssignAdd", "v", "c", TFS_DTYPE_FLOAT);
    return g;
}

START_TEST(test_session_variable_v2)
{
    tfs_session *s = rt_session(ref_variable_graph(), NULL);
    tfs_tensor *out = NULL;
    tfs_status st;
    /* Uninitialized: reading names the variable and the node that read it. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "read", &out, &st), TFS_FAILED_PRECONDITION);
    ck_assert_str_eq(st.msg, "node 'read': Attempting to use uninitialized value v");
    ck_assert_int_eq(rt_run1(s, NULL, 0, "v:0", &out, &st), TFS_FAILED_PRECONDITION);

    const char *init = "init";
    ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, &init, 1, NULL, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_msg(rt_run1(s, NULL, 0, "read", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d3, (const float[]){1, 2, 3}, 0);
    tfs_tensor_unref(out);
    /* Fetching the reference itself yields the value. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "v", &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 1, d3, (const float[]){1, 2, 3}, 0);
    tfs_tensor_unref(out);
    /* AssignAdd updates in place (as seen by later runs) and returns the new value. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "add", &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 1, d3, (const float[]){2, 4, 6}, 0);
    tfs_tensor_unref(out);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "add", &out, &st), TFS_OK);
    tfs_tensor_unref(out);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "read", &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 1, d3, (const float[]){3, 6, 9}, 0);
    tfs_tensor_unref(out);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_session_control_dependency_runs_assign)
{
    tfs_graph *g = ref_variable_graph();
    /* after = Identity(v) with ^init: the Assign must run first, in the same run. */
    int after = rt_node(g, "after", "Identity", "v", NULL, TFS_DTYPE_FLOAT);
    tfs_graph_add_input(g, after, "^init");
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(rt_run1(s, NULL, 0, "after", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d3, (const float[]){1, 2, 3}, 0);
    tfs_tensor_unref(out);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_session_assign_validates_shape)
{
    tfs_graph *g = ref_variable_graph();
    int64_t d2[] = {2};
    rt_const(g, "c2", tfs_test_tensor_f32(1, d2, (const float[]){1, 2}));
    rt_node(g, "bad", "Assign", "v", "c2", TFS_DTYPE_FLOAT);
    int loose = rt_node(g, "loose", "Assign", "v", "c2", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_bool(g, loose, "validate_shape", false);
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "bad", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "lhs shape= [3] rhs shape= [2]");
    ck_assert_msg(rt_run1(s, NULL, 0, "loose", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor_unref(out);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "read", &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 1, d2, (const float[]){1, 2}, 0);
    tfs_tensor_unref(out);
    /* AssignAdd needs equal shapes. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "add", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "shapes must be equal");
    tfs_session_free(s);
}
END_TEST

/* h = VarHandleOp(float, shared_name "w"); assign = AssignVariableOp(h, c); read = ReadVariableOp(h). */
static tfs_session *resource_session(void)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int h = tfs_graph_add_node(g, "h", "VarHandleOp");
    tfs_graph_set_attr_type(g, h, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_string(g, h, "shared_name", "w");
    tfs_shape sh = {1, {3}};
    tfs_graph_set_attr_shape(g, h, "shape", &sh);
    rt_const(g, "c", tfs_test_tensor_f32(1, d3, (const float[]){4, 5, 6}));
    int a = rt_node(g, "assign", "AssignVariableOp", "h", "c", TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, a, "dtype", TFS_DTYPE_FLOAT);
    int r = rt_node(g, "read", "ReadVariableOp", "h", NULL, TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, r, "dtype", TFS_DTYPE_FLOAT);
    int ri = rt_node(g, "read_int", "ReadVariableOp", "h", NULL, TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, ri, "dtype", TFS_DTYPE_INT32);
    rt_node(g, "inited", "VarIsInitializedOp", "h", NULL, TFS_DTYPE_INVALID);
    int dc = rt_node(g, "dcor", "DisableCopyOnRead", "h", NULL, TFS_DTYPE_INVALID);
    (void)dc;
    /* y = read * read, so the resource value flows into ordinary kernels. */
    rt_node(g, "y", "Mul", "read", "read", TFS_DTYPE_FLOAT);
    return rt_session(g, NULL);
}

START_TEST(test_session_resource_variable)
{
    tfs_session *s = resource_session();
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "inited", &out, &st), TFS_OK);
    ck_assert(!*(bool *)out->data);
    tfs_tensor_unref(out);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "read", &out, &st), TFS_FAILED_PRECONDITION);
    ck_assert_str_eq(st.msg, "node 'read': Attempting to use uninitialized value w");

    const char *targets[] = {"assign", "dcor"};
    ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, targets, 2, NULL, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "inited", &out, &st), TFS_OK);
    ck_assert(*(bool *)out->data);
    tfs_tensor_unref(out);
    ck_assert_msg(rt_run1(s, NULL, 0, "y", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d3, (const float[]){16, 25, 36}, 0);
    tfs_tensor_unref(out);
    ck_assert_int_eq(rt_run1(s, NULL, 0, "read_int", &out, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "wrong dtype");
    /* The handle itself is a DT_RESOURCE scalar; feeding one from outside is refused. */
    ck_assert_int_eq(rt_run1(s, NULL, 0, "h", &out, &st), TFS_OK);
    ck_assert_int_eq(out->dtype, TFS_DTYPE_RESOURCE);
    tfs_feed feed = {"h:0", out};
    tfs_tensor *y = NULL;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "read", &y, &st), TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "DT_RESOURCE");
    tfs_tensor_unref(out);
    tfs_session_free(s);
}
END_TEST

/* ---- RestoreV2 ------------------------------------------------------------------------------ */

typedef struct fake_ckpt {
    int  calls;
    char last_prefix[64];
} fake_ckpt;

/* "weights" -> [1.5, -2, 8] (float); anything else NOT_FOUND. */
static enum tfs_code fake_read(void *user, const char *prefix, const char *name,
                               enum tfs_dtype dtype, tfs_tensor **out, tfs_status *st)
{
    fake_ckpt *f = user;
    f->calls++;
    snprintf(f->last_prefix, sizeof f->last_prefix, "%s", prefix);
    *out = NULL;
    if (strcmp(name, "weights") != 0)
        return TFS_ERR(st, TFS_NOT_FOUND, "Key %s not found in checkpoint", name);
    if (dtype != TFS_DTYPE_FLOAT)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "weights is float");
    *out = tfs_test_tensor_f32(1, d3, (const float[]){1.5f, -2, 8});
    return TFS_OK;
}

/* VariableV2 "weights" restored from the checkpoint: restore_all = Assign(weights, restore:0). */
static tfs_graph *restore_graph(const char *name, const char *slice)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int v = tfs_graph_add_node(g, "weights", "VariableV2");
    tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
    tfs_tensor *prefix = rt_strings(1, (const char *[]){"/models/m/1/variables/variables"});
    tfs_tensor *flat = NULL;
    ck_assert_int_eq(tfs_tensor_reshape(prefix, 0, NULL, &flat, NULL), TFS_OK);
    tfs_tensor_unref(prefix);
    rt_const(g, "save/Const", flat);
    rt_const(g, "save/names", rt_strings(1, (const char *[]){name}));
    rt_const(g, "save/slices", rt_strings(1, (const char *[]){slice}));
    int r = tfs_graph_add_node(g, "save/RestoreV2", "RestoreV2");
    tfs_graph_add_input(g, r, "save/Const");
    tfs_graph_add_input(g, r, "save/names");
    tfs_graph_add_input(g, r, "save/slices");
    enum tfs_dtype types[1] = {TFS_DTYPE_FLOAT};
    tfs_attr_value dv = {.kind = TFS_ATTR_LIST};
    dv.list.kind = TFS_ATTR_TYPE;
    dv.list.n = 1;
    dv.list.type = types;
    tfs_graph_set_attr(g, r, "dtypes", &dv);
    rt_node(g, "save/Assign", "Assign", "weights", "save/RestoreV2:0", TFS_DTYPE_FLOAT);
    int all = tfs_graph_add_node(g, "save/restore_all", "NoOp");
    tfs_graph_add_input(g, all, "^save/Assign");
    return g;
}

START_TEST(test_session_restore_v2)
{
    fake_ckpt f = {0};
    tfs_session_opts opts = tfs_session_opts_default();
    opts.checkpoint.read = fake_read;
    opts.checkpoint.user = &f;
    tfs_session *s = rt_session(restore_graph("weights", ""), &opts);
    tfs_status st;
    const char *target = "save/restore_all";
    ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(f.calls, 1);
    ck_assert_str_eq(f.last_prefix, "/models/m/1/variables/variables");
    tfs_tensor *out = NULL;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "weights", &out, &st), TFS_OK);
    tfs_test_assert_f32(out, 1, d3, (const float[]){1.5f, -2, 8}, 0);
    tfs_tensor_unref(out);
    tfs_session_free(s);

    /* A reader error reaches the caller with the node name in front. */
    s = rt_session(restore_graph("missing", ""), &opts);
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "node 'save/RestoreV2': Key missing not found in checkpoint");
    tfs_session_free(s);

    /* A slice spec that covers the whole tensor, as TensorFlow writes on unpartitioned
     * variables, is an ordinary restore. */
    const char *whole[] = {"3 0,3", "3 -", "3 0,-"};
    for (int i = 0; i < 3; i++) {
        s = rt_session(restore_graph("weights", whole[i]), &opts);
        ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st) == TFS_OK,
                      "%s: %s", whole[i], st.msg);
        ck_assert_int_eq(rt_run1(s, NULL, 0, "weights", &out, &st), TFS_OK);
        tfs_test_assert_f32(out, 1, d3, (const float[]){1.5f, -2, 8}, 0);
        tfs_tensor_unref(out);
        tfs_session_free(s);
    }
    /* Partitioned variables (a slice spec naming part of the tensor) are not supported. */
    s = rt_session(restore_graph("weights", "4 0,2"), &opts);
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st),
                     TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "partitioned variables");
    tfs_session_free(s);
    /* A whole-tensor spec whose shape is not the checkpoint's, and malformed specs. */
    const char *bad[] = {"4 0,4", "3", "3 0,3:0,1", "x 0,3", "3 0;3", "3 -1,3"};
    for (int i = 0; i < 6; i++) {
        s = rt_session(restore_graph("weights", bad[i]), &opts);
        ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st) ==
                          TFS_INVALID_ARGUMENT, "%s", bad[i]);
        ck_assert_msg(strstr(st.msg, "shape_and_slice") != NULL, "%s: %s", bad[i], st.msg);
        tfs_session_free(s);
    }
    /* Without a reader RestoreV2 cannot run. */
    s = rt_session(restore_graph("weights", ""), NULL);
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &target, 1, NULL, &st),
                     TFS_UNIMPLEMENTED);
    rt_assert_err(st, TFS_UNIMPLEMENTED, "checkpoint reader");
    tfs_session_free(s);
}
END_TEST

/* ---- tfs_session_check ---------------------------------------------------------------------- */

START_TEST(test_session_check_names_missing_ops)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "conv", "CustomConv", "x", "x", TFS_DTYPE_FLOAT);
    rt_node(g, "conv2", "CustomConv", "conv", "x", TFS_DTYPE_FLOAT);
    rt_node(g, "act", "MadeUpActivation", "conv2", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Mul", "act", "x", TFS_DTYPE_FLOAT);
    int save = rt_node(g, "save", "SaveV2", "x", NULL, TFS_DTYPE_INVALID);
    (void)save;
    rt_node(g, "unused", "Softmax", "x", NULL, TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    const char *feeds[] = {"x"};
    const char *fetches[] = {"y"};
    const char *targets[] = {"save"};
    /* Each missing type once, sorted; Softmax is not needed so it is not named. */
    ck_assert_int_eq(tfs_session_check(s, feeds, 1, fetches, 1, targets, 1, &st),
                     TFS_UNIMPLEMENTED);
    ck_assert_str_eq(st.msg, "ops not supported by tfserve: CustomConv, MadeUpActivation, SaveV2");
    /* A run says the same without executing anything. */
    tfs_tensor *out = NULL;
    ck_assert_int_eq(rt_run1(s, NULL, 0, "y", &out, &st), TFS_UNIMPLEMENTED);
    ck_assert_str_eq(st.msg, "ops not supported by tfserve: CustomConv, MadeUpActivation");
    /* Feeding the output of the unsupported part makes the rest runnable. */
    const char *cut[] = {"x", "act:0"};
    ck_assert_int_eq(tfs_session_check(s, cut, 2, fetches, 1, NULL, 0, &st), TFS_OK);
    ck_assert_str_eq(st.msg, "");
    const char *bad[] = {"y:1"};
    ck_assert_int_eq(tfs_session_check(s, feeds, 1, bad, 1, NULL, 0, &st), TFS_NOT_FOUND);
    tfs_session_free(s);
}
END_TEST

/* The same check with the missing op types as data: OK, and the list sorted, each type once. */
START_TEST(test_session_missing_ops_as_list)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "conv", "CustomConv", "x", "x", TFS_DTYPE_FLOAT);
    rt_node(g, "conv2", "CustomConv", "conv", "x", TFS_DTYPE_FLOAT);
    rt_node(g, "act", "MadeUpActivation", "conv2", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Mul", "act", "x", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    tfs_status st;
    const char *feeds[] = {"x"}, *fetches[] = {"y"};
    const char **ops = NULL;
    int n = -1;
    ck_assert_int_eq(tfs_session_missing_ops(s, feeds, 1, fetches, 1, NULL, 0, &ops, &n, &st),
                     TFS_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(ops[0], "CustomConv");
    ck_assert_str_eq(ops[1], "MadeUpActivation");
    tfs_free(ops);
    /* nothing missing: an empty list */
    const char *cut[] = {"x", "act:0"};
    ck_assert_int_eq(tfs_session_missing_ops(s, cut, 2, fetches, 1, NULL, 0, &ops, &n, &st),
                     TFS_OK);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(ops);
    /* other errors are still errors, and leave no list */
    const char *bad[] = {"y:1"};
    ops = (const char **)&n;   /* a stale value the call must overwrite, never free */
    ck_assert_int_eq(tfs_session_missing_ops(s, feeds, 1, bad, 1, NULL, 0, &ops, &n, &st),
                     TFS_NOT_FOUND);
    ck_assert_ptr_null(ops);
    ck_assert_int_eq(n, 0);
    tfs_session_free(s);
}
END_TEST

/* ---- concurrency ---------------------------------------------------------------------------- */

typedef struct worker {
    tfs_session *s;
    int          id;
    int          failures;
} worker;

/* Each thread feeds its own x and checks y = x * [1,2,3] + w, with w a resource variable. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    for (int it = 0; it < 200; it++) {
        float base = (float)(w->id * 1000 + it);
        tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){base, base + 1, base + 2});
        tfs_feed feed = {"x", x};
        const char *fetches[] = {"z", "y"};
        tfs_tensor *out[2] = {NULL, NULL};
        tfs_status st;
        if (tfs_session_run(w->s, &feed, 1, fetches, 2, NULL, 0, out, &st) != TFS_OK) {
            w->failures++;
        } else {
            const float *z = out[0]->data, *y = out[1]->data;
            for (int i = 0; i < 3; i++) {
                float want_y = (base + (float)i) * (float)(i + 1);
                if (y[i] != want_y || z[i] != want_y + (float)(10 * (i + 1)))
                    w->failures++;
            }
        }
        tfs_tensor_unref(out[0]);
        tfs_tensor_unref(out[1]);
        tfs_tensor_unref(x);
    }
    return NULL;
}

START_TEST(test_session_concurrent_runs)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_const(g, "c", tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3}));
    rt_node(g, "y", "Mul", "x", "c", TFS_DTYPE_FLOAT);
    int h = tfs_graph_add_node(g, "h", "VarHandleOp");
    tfs_graph_set_attr_type(g, h, "dtype", TFS_DTYPE_FLOAT);
    rt_const(g, "w0", tfs_test_tensor_f32(1, d3, (const float[]){10, 20, 30}));
    int a = rt_node(g, "init", "AssignVariableOp", "h", "w0", TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, a, "dtype", TFS_DTYPE_FLOAT);
    int r = rt_node(g, "read", "ReadVariableOp", "h", NULL, TFS_DTYPE_INVALID);
    tfs_graph_set_attr_type(g, r, "dtype", TFS_DTYPE_FLOAT);
    rt_node(g, "z", "AddV2", "y", "read", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);
    const char *init = "init";
    tfs_status st;
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &init, 1, NULL, &st), TFS_OK);

    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){s, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
    }
    tfs_session_free(s);
}
END_TEST

/* ---- allocation failures -------------------------------------------------------------------- */

/* Every allocation of a run may fail: the run then reports RESOURCE_EXHAUSTED, returns no outputs
 * and leaks nothing, and the session stays usable. */
START_TEST(test_session_run_under_allocation_failures)
{
    tfs_session *s = rt_session(ref_variable_graph(), NULL);
    const char *init = "init";
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, NULL, 0, &init, 1, NULL, NULL), TFS_OK);
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){1, 1, 1});
    int64_t base = tfs_alloc_bytes_in_use();
    for (int n = 1;; n++) {
        tfs_tensor *out = NULL;
        tfs_status st;
        tfs_alloc_fail_after(n);
        enum tfs_code rc = rt_run1(s, NULL, 0, "read", &out, &st);
        tfs_alloc_fail_after(0);
        if (rc == TFS_OK) {
            tfs_test_assert_f32(out, 1, d3, (const float[]){1, 2, 3}, 0);
            tfs_tensor_unref(out);
            ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
            break;
        }
        ck_assert_msg(rc == TFS_RESOURCE_EXHAUSTED, "n=%d: %s", n, st.msg);
        ck_assert_ptr_null(out);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    }
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_session_needs_finalized_graph)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    tfs_session *s = (tfs_session *)1;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(g, NULL, &s, &st), TFS_FAILED_PRECONDITION);
    ck_assert_ptr_null(s);
    tfs_graph_unref(g);
}
END_TEST

Suite *suite_runtime_session(void)
{
    Suite *s = suite_create("runtime_session");
    TCase *tc = tcase_create("run");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_session_run_feed_and_fetch);
    tcase_add_test(tc, test_session_name_errors);
    tcase_add_test(tc, test_session_placeholder_errors);
    tcase_add_test(tc, test_session_kernel_errors_name_the_node);
    tcase_add_test(tc, test_session_pruning);
    tcase_add_test(tc, test_session_fetch_hook);
    tcase_add_test(tc, test_session_cycle_detected);
    tcase_add_test(tc, test_session_needs_finalized_graph);
    tcase_add_test(tc, test_session_check_names_missing_ops);
    tcase_add_test(tc, test_session_missing_ops_as_list);
    tcase_add_test(tc, test_session_run_under_allocation_failures);
    suite_add_tcase(s, tc);
    tc = tcase_create("variables");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_session_variable_v2);
    tcase_add_test(tc, test_session_control_dependency_runs_assign);
    tcase_add_test(tc, test_session_assign_validates_shape);
    tcase_add_test(tc, test_session_resource_variable);
    tcase_add_test(tc, test_session_restore_v2);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_session_concurrent_runs);
    suite_add_tcase(s, tc);
    return s;
}
