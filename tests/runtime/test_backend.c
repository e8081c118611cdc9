/* Tests of runtime/session-gpu.c and runtime/backend-reg.c against a fake device, so that
 * placement, copies at the boundaries, kept constants, fetches and errors are checked on every
 * machine (the CUDA kernels themselves are checked by test-runtime-gpu, on a GPU).
 *
 * The fake device's memory is host memory it tracks: a "device tensor" is one whose data lies in
 * a live fake allocation. Its kernels are the CPU kernels, after checking that every input they
 * read on the device is a device tensor; their outputs are copied into fake device memory. Uploads
 * must get host tensors, downloads device tensors, and fetched outputs must be host tensors. */
#include <check.h>
#include <pthread.h>
#include <string.h>

#include "runtime/backend-impl.h"
#include "tests/runtime/helpers.h"

Suite *suite_runtime_backend(void);

/* ---- the fake device -------------------------------------------------------------------------- */

#define MAX_LIVE 256

static struct {
    pthread_mutex_t mu;
    void  *live[MAX_LIVE];
    size_t size[MAX_LIVE];
    int    n_live;
    int    uploads, const_uploads, downloads, execs_open, kernel_calls;
    bool   misplaced;   /* a kernel, upload or download saw a tensor on the wrong side */
    tfs_tensor *consts_host[64];
    tfs_tensor *consts_dev[64];
    int    n_consts;
} fk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool fake_on_dev(const tfs_tensor *t)
{
    if (!t->data)
        return false;
    bool found = false;
    pthread_mutex_lock(&fk.mu);
    for (int i = 0; i < fk.n_live && !found; i++)
        found = (char *)t->data >= (char *)fk.live[i] &&
                (char *)t->data < (char *)fk.live[i] + (fk.size[i] ? fk.size[i] : 1);
    pthread_mutex_unlock(&fk.mu);
    return found;
}

static void fake_free(void *data, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fk.mu);
    for (int i = 0; i < fk.n_live; i++) {
        if (fk.live[i] == data) {
            fk.live[i] = fk.live[fk.n_live - 1];
            fk.size[i] = fk.size[fk.n_live - 1];
            fk.n_live--;
            break;
        }
    }
    pthread_mutex_unlock(&fk.mu);
    tfs_free(data);
}

/* A device copy of host tensor t. */
static tfs_tensor *fake_copy_to_dev(const tfs_tensor *t)
{
    void *d = tfs_malloc(t->nbytes ? t->nbytes : 1);
    ck_assert_ptr_nonnull(d);
    memcpy(d, t->data, t->nbytes);
    pthread_mutex_lock(&fk.mu);
    ck_assert_int_lt(fk.n_live, MAX_LIVE);
    fk.live[fk.n_live] = d;
    fk.size[fk.n_live++] = t->nbytes;
    pthread_mutex_unlock(&fk.mu);
    tfs_tensor *out = NULL;
    ck_assert_int_eq(tfs_tensor_wrap(t->dtype, t->rank, t->dims, d, fake_free, NULL, &out, NULL),
                     TFS_OK);
    return out;
}

static enum tfs_placement fake_supports(const tfs_backend *b, const tfs_node *n)
{
    (void)b;
    if (n->op == &tfs__ops[TFS_OP_IDENTITY] || n->op == &tfs__ops[TFS_OP_RESHAPE])
        return TFS_PLACE_FOLLOW;
    if (n->op == &tfs__ops[TFS_OP_MAT_MUL] || n->op == &tfs__ops[TFS_OP_ADD_V2] ||
        n->op == &tfs__ops[TFS_OP_RELU] || n->op == &tfs__ops[TFS_OP_BIAS_ADD])
        return TFS_PLACE_DEVICE;
    return TFS_PLACE_CPU;
}

static unsigned fake_host_inputs(const tfs_backend *b, const tfs_node *n)
{
    (void)b;
    return n->op == &tfs__ops[TFS_OP_RESHAPE] ? 2u : 0u;
}

static int fake_exec_token;

static enum tfs_code fake_exec_begin(tfs_backend *b, void **exec, tfs_status *st)
{
    (void)b;
    (void)st;
    __atomic_add_fetch(&fk.execs_open, 1, __ATOMIC_SEQ_CST);
    *exec = &fake_exec_token;
    return TFS_OK;
}

static enum tfs_code fake_exec_end(tfs_backend *b, void *exec, enum tfs_code rc, tfs_status *st)
{
    (void)b;
    (void)st;
    ck_assert_ptr_eq(exec, &fake_exec_token);
    __atomic_sub_fetch(&fk.execs_open, 1, __ATOMIC_SEQ_CST);
    return rc;
}

static void fake_exec_node(void *exec, const tfs_node *n)
{
    (void)exec;
    (void)n;
}

static enum tfs_code fake_upload(tfs_backend *b, void *exec, tfs_tensor *t, bool constant,
                                 tfs_tensor **out, tfs_status *st)
{
    (void)b;
    (void)exec;
    (void)st;
    if (fake_on_dev(t))
        fk.misplaced = true;
    if (constant) {
        for (int i = 0; i < fk.n_consts; i++) {
            if (fk.consts_host[i] == t) {
                *out = tfs_tensor_ref(fk.consts_dev[i]);
                return TFS_OK;
            }
        }
        ck_assert_int_lt(fk.n_consts, 64);
        fk.const_uploads++;
        fk.consts_host[fk.n_consts] = tfs_tensor_ref(t);
        fk.consts_dev[fk.n_consts++] = fake_copy_to_dev(t);
        *out = tfs_tensor_ref(fk.consts_dev[fk.n_consts - 1]);
        return TFS_OK;
    }
    fk.uploads++;
    *out = fake_copy_to_dev(t);
    return TFS_OK;
}

static enum tfs_code fake_download(tfs_backend *b, void *exec, const tfs_tensor *t,
                                   tfs_tensor **out, tfs_status *st)
{
    (void)b;
    (void)exec;
    if (!fake_on_dev(t))
        fk.misplaced = true;
    fk.downloads++;
    return tfs_tensor_copy(t, out, st);
}

static void fake_sweep(tfs_backend *b)
{
    (void)b;
}

static const char *fake_name(const tfs_backend *b)
{
    (void)b;
    return "fake:0";
}

/* The device kernel: the CPU kernel on device inputs, outputs moved to device memory. */
static enum tfs_code fake_kernel(tfs_kernel_ctx *k, tfs_status *st)
{
    fk.kernel_calls++;
    ck_assert_ptr_eq(k->exec, &fake_exec_token);
    ck_assert_ptr_null(k->mem);   /* device kernels never use the host memory plan */
    unsigned host = fake_host_inputs(NULL, k->node);
    for (int i = 0; i < k->n_in; i++)
        if (fake_on_dev(k->in[i]) != !((host >> i) & 1u))
            fk.misplaced = true;
    enum tfs_code rc = k->node->op->kernel(k, st);
    if (rc != TFS_OK || k->node->op == &tfs__ops[TFS_OP_IDENTITY] ||
        k->node->op == &tfs__ops[TFS_OP_RESHAPE])
        return rc;   /* views of a device tensor stay on the device */
    for (int j = 0; j < k->n_out; j++) {
        tfs_tensor *d = fake_copy_to_dev(k->out[j]);
        tfs_tensor_unref(k->out[j]);
        k->out[j] = d;
    }
    return TFS_OK;
}

static tfs_kernel_fn fake_kernels[TFS_OP_COUNT];

static const struct tfs_backend_i fake_iface = {
    .name = fake_name, .supports_op = fake_supports, .host_inputs = fake_host_inputs,
    .exec_begin = fake_exec_begin, .exec_end = fake_exec_end, .exec_node = fake_exec_node,
    .upload = fake_upload, .download = fake_download, .sweep = fake_sweep,
};

static tfs_backend fake_backend = {TFS_BACKEND_API_VERSION, &fake_iface, fake_kernels, NULL};

static void fake_setup(void)
{
    memset(fk.live, 0, sizeof fk.live);
    fk.n_live = fk.uploads = fk.const_uploads = fk.downloads = fk.execs_open = 0;
    fk.kernel_calls = 0;
    fk.misplaced = false;
    fk.n_consts = 0;
    fake_kernels[TFS_OP_MAT_MUL] = fake_kernel;
    fake_kernels[TFS_OP_ADD_V2] = fake_kernel;
    fake_kernels[TFS_OP_RELU] = fake_kernel;
    fake_kernels[TFS_OP_BIAS_ADD] = fake_kernel;
    fake_kernels[TFS_OP_IDENTITY] = fake_kernel;
    fake_kernels[TFS_OP_RESHAPE] = fake_kernel;
    tfs__backend_set_fake(&fake_backend);
}

static void fake_teardown(void)
{
    tfs__backend_set_fake(NULL);
    for (int i = 0; i < fk.n_consts; i++) {
        tfs_tensor_unref(fk.consts_host[i]);
        tfs_tensor_unref(fk.consts_dev[i]);
    }
    fk.n_consts = 0;
}

/* ---- graphs ----------------------------------------------------------------------------------- */

static const int64_t d23[] = {2, 3}, d33[] = {3, 3}, d3[] = {3}, d2[] = {2}, d6[] = {6};

/* x [2,3] -> MatMul(W) -> BiasAdd(b) -> Relu -> Reshape([6]) -> Square (CPU) -> Reshape([2,3])
 *   -> MatMul(W) -> "out"; and "mid" = Identity(Relu) fetched directly. */
static tfs_graph *mlp_graph(void)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_const(g, "W", tfs_test_tensor_f32(2, d33, (const float[]){1, -2, 3, 0.5f, 1, -1, 2, 0, 1}));
    rt_const(g, "b", tfs_test_tensor_f32(1, d3, (const float[]){0.25f, -8, 1}));
    rt_const(g, "flat", rt_tensor(TFS_DTYPE_INT32, 1, (const int64_t[]){1}, (const int32_t[]){6}));
    rt_const(g, "shape2", rt_tensor(TFS_DTYPE_INT32, 1, d2, (const int32_t[]){2, 3}));
    rt_node(g, "mm", "MatMul", "x", "W", TFS_DTYPE_FLOAT);
    rt_node(g, "ba", "BiasAdd", "mm", "b", TFS_DTYPE_FLOAT);
    rt_node(g, "relu", "Relu", "ba", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "mid", "Identity", "relu", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "r1", "Reshape", "relu", "flat", TFS_DTYPE_FLOAT);
    rt_node(g, "sq", "Square", "r1", NULL, TFS_DTYPE_FLOAT);
    rt_node(g, "r2", "Reshape", "sq", "shape2", TFS_DTYPE_FLOAT);
    rt_node(g, "out", "MatMul", "r2", "W", TFS_DTYPE_FLOAT);
    return g;
}

static void run_mlp(tfs_session *s, tfs_tensor **out, tfs_tensor **mid)
{
    tfs_tensor *x = tfs_test_tensor_f32(2, d23, (const float[]){1, 2, 3, -1, 0.5f, 2});
    tfs_feed feed = {"x:0", x};
    const char *fetches[] = {"out:0", "mid:0"};
    tfs_tensor *o[2] = {NULL, NULL};
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, &feed, 1, fetches, 2, NULL, 0, o, &st) == TFS_OK, "%s",
                  st.msg);
    *out = o[0];
    *mid = o[1];
    tfs_tensor_unref(x);
}

START_TEST(test_backend_placed_run_matches_cpu)
{
    tfs_tensor *want_out, *want_mid;
    tfs_session *cpu = rt_session(mlp_graph(), NULL);
    run_mlp(cpu, &want_out, &want_mid);
    tfs_session_free(cpu);

    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_session *s = rt_session(mlp_graph(), &o);
    for (int run = 0; run < 3; run++) {
        tfs_tensor *out, *mid;
        run_mlp(s, &out, &mid);
        rt_assert_same(out, want_out, "out");
        rt_assert_same(mid, want_mid, "mid");
        ck_assert(!fake_on_dev(out) && !fake_on_dev(mid));   /* fetches come back to the host */
        tfs_tensor_unref(out);
        tfs_tensor_unref(mid);
        /* Per run: x up once; relu's value down once for the CPU Square (through the Reshape
         * view) and fetched via mid; Square's result up once. W and b only on the first run. */
        ck_assert_int_eq(fk.uploads, 2 * (run + 1));
        ck_assert_int_eq(fk.const_uploads, 2);
        ck_assert_int_eq(fk.downloads, 3 * (run + 1));
        ck_assert_int_eq(fk.kernel_calls, 6 * (run + 1));   /* mm ba relu mid r1 out */
    }
    ck_assert(!fk.misplaced);
    ck_assert_int_eq(fk.execs_open, 0);
    tfs_session_free(s);
    ck_assert_int_eq(fk.n_live, fk.n_consts);   /* only kept constants remain on the device */
    tfs_tensor_unref(want_out);
    tfs_tensor_unref(want_mid);
}
END_TEST

/* A fed value wins over its producer, and lives on the host. */
START_TEST(test_backend_feed_overrides_device_value)
{
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_AUTO;
    tfs_session *s = rt_session(mlp_graph(), &o);
    tfs_tensor *x = tfs_test_tensor_f32(2, d23, (const float[]){1, 2, 3, -1, 0.5f, 2});
    tfs_tensor *relu = tfs_test_tensor_f32(2, d23, (const float[]){1, 0, 2, 0, 3, 1});
    tfs_feed feeds[] = {{"x:0", x}, {"relu:0", relu}};
    const char *fetch = "out:0";
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(tfs_session_run(s, feeds, 2, &fetch, 1, NULL, 0, &out, &st) == TFS_OK, "%s",
                  st.msg);
    /* sq = [1,0,4,0,9,1] as [2,3]; out = sq . W */
    double want[6];
    const float sq[6] = {1, 0, 4, 0, 9, 1}, W[9] = {1, -2, 3, 0.5f, 1, -1, 2, 0, 1};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            want[i * 3 + j] = 0;
            for (int k = 0; k < 3; k++)
                want[i * 3 + j] += (double)sq[i * 3 + k] * W[k * 3 + j];
        }
    float wantf[6];
    for (int i = 0; i < 6; i++)
        wantf[i] = (float)want[i];
    tfs_test_assert_f32(out, 2, d23, wantf, 1e-6);
    ck_assert(!fk.misplaced);
    tfs_tensor_unref(out);
    tfs_tensor_unref(x);
    tfs_tensor_unref(relu);
    tfs_session_free(s);
}
END_TEST

/* A device kernel's error fails the run with the node's name, and the executor comes back. */
START_TEST(test_backend_kernel_error_names_node)
{
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_session *s = rt_session(mlp_graph(), &o);
    tfs_tensor *x = tfs_test_tensor_f32(1, d6, (const float[]){1, 2, 3, 4, 5, 6});
    tfs_feed feed = {"x:0", x};
    tfs_tensor *out = (tfs_tensor *)1;
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "out:0", &out, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "node 'mm'");
    ck_assert_int_eq(fk.execs_open, 0);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    ck_assert_int_eq(fk.n_live, fk.n_consts);
}
END_TEST

/* The step loop's deadline check holds for placed plans: a run past its deadline stops before its
 * first kernel, fails with DEADLINE_EXCEEDED, returns no output, gives the executor back and
 * leaves nothing of the run on the device. */
START_TEST(test_backend_deadline_stops_placed_run)
{
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_session *s = rt_session(mlp_graph(), &o);
    tfs_tensor *x = tfs_test_tensor_f32(2, d23, (const float[]){1, 2, 3, -1, 0.5f, 2});
    tfs_feed feed = {"x:0", x};
    tfs_tensor *out = (tfs_tensor *)1;
    tfs_status st;
    int64_t old = tfs_session_set_thread_deadline(1);   /* long past on the monotonic clock */
    enum tfs_code rc = rt_run1(s, &feed, 1, "out:0", &out, &st);
    tfs_session_set_thread_deadline(old);
    ck_assert_int_eq(rc, TFS_DEADLINE_EXCEEDED);
    rt_assert_err(st, TFS_DEADLINE_EXCEEDED, "deadline passed; stopped before node '");
    ck_assert_ptr_null(out);
    ck_assert_int_eq(fk.kernel_calls + fk.uploads + fk.downloads, 0);
    ck_assert_int_eq(fk.execs_open, 0);
    ck_assert_int_eq(fk.n_live, fk.n_consts);
    /* Without the deadline the same session runs. */
    tfs_tensor *mid;
    run_mlp(s, &out, &mid);
    tfs_tensor_unref(out);
    tfs_tensor_unref(mid);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* A device step reading a variable (VariableV2, a reference) gets the variable's current value
 * uploaded for the run, never a host tensor and never a value kept from an earlier run. */
START_TEST(test_backend_variable_read_on_device)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    int v = tfs_graph_add_node(g, "v", "VariableV2");
    tfs_graph_set_attr_type(g, v, "dtype", TFS_DTYPE_FLOAT);
    tfs_shape sh = {1, {3}};
    tfs_graph_set_attr_shape(g, v, "shape", &sh);
    tfs_graph_set_attr_string(g, v, "container", "");
    tfs_graph_set_attr_string(g, v, "shared_name", "");
    rt_const(g, "c", tfs_test_tensor_f32(1, d3, (const float[]){1, -2, 3}));
    rt_node(g, "init", "Assign", "v", "c", TFS_DTYPE_FLOAT);
    rt_node(g, "add", "AssignAdd", "v", "c", TFS_DTYPE_FLOAT);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "sum", "AddV2", "x", "v", TFS_DTYPE_FLOAT);
    rt_node(g, "out", "Relu", "sum", NULL, TFS_DTYPE_FLOAT);
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_session *s = rt_session(g, &o);
    tfs_status st;
    const char *init = "init";
    ck_assert_msg(tfs_session_run(s, NULL, 0, NULL, 0, &init, 1, NULL, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(fk.kernel_calls + fk.uploads, 0);   /* Assign runs on the CPU */
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){0.5f, 1, -4}), *out = NULL;
    tfs_feed feed = {"x:0", x};
    /* relu(x + v), v = c = [1, -2, 3] */
    ck_assert_msg(rt_run1(s, &feed, 1, "out:0", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d3, (const float[]){1.5f, 0, 0}, 0);
    ck_assert(!fake_on_dev(out));
    tfs_tensor_unref(out);
    ck_assert_int_eq(fk.uploads, 2);   /* x and v's value */
    ck_assert_int_eq(fk.const_uploads, 0);
    ck_assert_int_eq(fk.downloads, 1);   /* the fetch */
    ck_assert_int_eq(fk.kernel_calls, 2);   /* sum, out */
    /* v += c on the CPU; the next run's device step sees v = [2, -4, 6]. */
    ck_assert_msg(rt_run1(s, NULL, 0, "add:0", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_tensor_unref(out);
    ck_assert_msg(rt_run1(s, &feed, 1, "out:0", &out, &st) == TFS_OK, "%s", st.msg);
    tfs_test_assert_f32(out, 1, d3, (const float[]){2.5f, 0, 2}, 0);
    tfs_tensor_unref(out);
    ck_assert_int_eq(fk.uploads, 4);
    ck_assert(!fk.misplaced);
    ck_assert_int_eq(fk.execs_open, 0);
    tfs_tensor_unref(x);
    tfs_session_free(s);
    ck_assert_int_eq(fk.n_live, fk.n_consts);
}
END_TEST

/* A graph with nothing the device runs: AUTO stays on the CPU path (no executor taken). */
START_TEST(test_backend_auto_without_device_ops)
{
    tfs_graph *g;
    tfs_graph_new(&g, NULL);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_node(g, "y", "Square", "x", NULL, TFS_DTYPE_FLOAT);
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_AUTO;
    tfs_session *s = rt_session(g, &o);
    tfs_tensor *x = tfs_test_tensor_f32(1, d3, (const float[]){1, 2, 3}), *y = NULL;
    tfs_feed feed = {"x:0", x};
    tfs_status st;
    ck_assert_int_eq(rt_run1(s, &feed, 1, "y:0", &y, &st), TFS_OK);
    tfs_test_assert_f32(y, 1, d3, (const float[]){1, 4, 9}, 0);
    ck_assert_int_eq(fk.uploads + fk.downloads + fk.kernel_calls, 0);
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
    tfs_session_free(s);
}
END_TEST

/* ---- without any device ----------------------------------------------------------------------- */

START_TEST(test_backend_no_gpu)
{
    char why[256] = "";
    int n = tfs_runtime_gpu_count(why, sizeof why);
    if (n > 0)
        return;   /* a GPU machine: test-runtime-gpu covers it */
    ck_assert_msg(!strncmp(why, "no GPU: ", 8), "%s", why);
    /* GPU requested: the session fails and says why; AUTO falls back to the CPU. */
    tfs_session_opts o = tfs_session_opts_default();
    o.device = TFS_DEVICE_GPU;
    tfs_graph *g = mlp_graph();
    ck_assert_int_eq(tfs_graph_finalize(g, NULL), TFS_OK);
    tfs_session *s = (tfs_session *)1;
    tfs_status st;
    ck_assert_int_eq(tfs_session_new(g, &o, &s, &st), TFS_FAILED_PRECONDITION);
    ck_assert_ptr_null(s);
    rt_assert_err(st, TFS_FAILED_PRECONDITION, "no GPU: ");
    o.device = TFS_DEVICE_AUTO;
    ck_assert_int_eq(tfs_session_new(g, &o, &s, &st), TFS_OK);
    tfs_tensor *out, *mid;
    run_mlp(s, &out, &mid);
    tfs_tensor_unref(out);
    tfs_tensor_unref(mid);
    tfs_session_free(s);
    tfs_graph_unref(g);
}
END_TEST

START_TEST(test_backend_device_parse)
{
    enum tfs_device d;
    int id;
    tfs_status st;
    ck_assert_int_eq(tfs_device_parse("auto", &d, &id, &st), TFS_OK);
    ck_assert_int_eq(d, TFS_DEVICE_AUTO);
    ck_assert_int_eq(tfs_device_parse("cpu", &d, &id, &st), TFS_OK);
    ck_assert_int_eq(d, TFS_DEVICE_CPU);
    ck_assert_int_eq(tfs_device_parse("gpu", &d, &id, &st), TFS_OK);
    ck_assert(d == TFS_DEVICE_GPU && id == 0);
    ck_assert_int_eq(tfs_device_parse("gpu:3", &d, &id, &st), TFS_OK);
    ck_assert(d == TFS_DEVICE_GPU && id == 3);
    const char *bad[] = {"", "GPU", "gpu:", "gpu:-1", "gpu:1x", "gpu:99999999999", "tpu"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(tfs_device_parse(bad[i], &d, &id, &st), TFS_INVALID_ARGUMENT);
        ck_assert_msg(strstr(st.msg, "device '") != NULL, "%s", st.msg);
    }
    tfs_device_opts o = tfs_device_opts_default();
    o.memory_fraction = 1.5;
    ck_assert_int_eq(tfs_runtime_set_device(&o, &st), TFS_INVALID_ARGUMENT);
    o = tfs_device_opts_default();
    o.gpu_id = -1;
    ck_assert_int_eq(tfs_runtime_set_device(&o, &st), TFS_INVALID_ARGUMENT);
    o = tfs_device_opts_default();
    ck_assert_int_eq(tfs_runtime_set_device(&o, &st), TFS_OK);
}
END_TEST

Suite *suite_runtime_backend(void)
{
    Suite *s = suite_create("runtime_backend");
    TCase *tc = tcase_create("fake_device");
    tcase_add_checked_fixture(tc, fake_setup, fake_teardown);
    tcase_add_test(tc, test_backend_placed_run_matches_cpu);
    tcase_add_test(tc, test_backend_feed_overrides_device_value);
    tcase_add_test(tc, test_backend_kernel_error_names_node);
    tcase_add_test(tc, test_backend_deadline_stops_placed_run);
    tcase_add_test(tc, test_backend_variable_read_on_device);
    tcase_add_test(tc, test_backend_auto_without_device_ops);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    tc = tcase_create("device");
    tcase_add_test(tc, test_backend_no_gpu);
    tcase_add_test(tc, test_backend_device_parse);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}
