/* Model warmup (server/warmup.c): warmup files built here with protobuf-c and the TFRecord writer,
 * replayed in process against the bundled demo model (and TF Serving's half_plus_two fixture for
 * classify, regress and multi-inference records, a case reported skipped without them), and
 * through the real tfserve binary: the log reports the records replayed, a damaged file leaves the
 * version END with the error in GetModelStatus, and --enable_model_warmup=false ignores the file.
 * Warmups made slow on purpose (many iterations of one record) keep a version LOADING long enough
 * to watch readiness through a model's lifecycle and to send SIGTERM while the server starts.
 *
 * In process, tfs_warmup_run is given the loaded model and, separately, a temporary "version dir"
 * holding only assets.extra/, so the build's demo model is never modified.
 */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "tensorflow_serving/apis/prediction_log.pb-c.h"
#include "tests/support/tfs-models.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

Suite *suite_server_warmup(void);

#define TF1_BASE "tf_serving/saved_model_half_plus_two_cpu"
#define TF1_DIR  TF1_BASE "/00000123"

/* ---- building warmup files ------------------------------------------------------------------ */

/* A serialized PredictionLog, malloc'ed. */
static uint8_t *pack_log(const Tensorflow__Serving__PredictionLog *log, size_t *len)
{
    *len = tensorflow__serving__prediction_log__get_packed_size(log);
    uint8_t *b = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(b);
    tensorflow__serving__prediction_log__pack(log, b);
    return b;
}

/* PredictionLog{predict_log{request{model_spec{name, signature_name}, inputs{input: float[n]}}}} */
static uint8_t *predict_record(const char *signature, const char *input, const float *x, int n,
                               size_t *len)
{
    Tensorflow__TensorShapeProto__Dim  dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim *dims[1] = {&dim};
    Tensorflow__TensorShapeProto       shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorProto            tp = TENSORFLOW__TENSOR_PROTO__INIT;
    Tensorflow__Serving__PredictRequest__InputsEntry e =
        TENSORFLOW__SERVING__PREDICT_REQUEST__INPUTS_ENTRY__INIT;
    Tensorflow__Serving__PredictRequest__InputsEntry *entries[1] = {&e};
    Tensorflow__Serving__ModelSpec      ms = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__PredictRequest req = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    Tensorflow__Serving__PredictLog     pl = TENSORFLOW__SERVING__PREDICT_LOG__INIT;
    Tensorflow__Serving__PredictionLog  log = TENSORFLOW__SERVING__PREDICTION_LOG__INIT;

    dim.size = n;
    shape.n_dim = 1;
    shape.dim = dims;
    tp.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tp.tensor_shape = &shape;
    tp.n_float_val = (size_t)n;
    tp.float_val = (float *)x;
    e.key = (char *)input;
    e.value = &tp;
    ms.name = "half_plus_two";
    ms.signature_name = (char *)signature;
    req.model_spec = &ms;
    req.n_inputs = 1;
    req.inputs = entries;
    pl.request = &req;
    log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG;
    log.predict_log = &pl;
    return pack_log(&log, len);
}

/* A classify (kind 2), regress (3) or multi-inference (4) record over one Example {x: value},
 * the feature float or (int64_feature) int64. For multi-inference the tasks are
 * classify_x_to_y and regress_x_to_y. */
static uint8_t *example_record(int kind, const char *signature, float value, bool int64_feature,
                               size_t *len)
{
    Tensorflow__FloatList             fl = TENSORFLOW__FLOAT_LIST__INIT;
    Tensorflow__Int64List             il = TENSORFLOW__INT64_LIST__INIT;
    Tensorflow__Feature               f = TENSORFLOW__FEATURE__INIT;
    Tensorflow__Features__FeatureEntry fe = TENSORFLOW__FEATURES__FEATURE_ENTRY__INIT;
    Tensorflow__Features__FeatureEntry *fes[1] = {&fe};
    Tensorflow__Features              feats = TENSORFLOW__FEATURES__INIT;
    Tensorflow__Example               ex = TENSORFLOW__EXAMPLE__INIT;
    Tensorflow__Example              *exs[1] = {&ex};
    Tensorflow__Serving__ExampleList  el = TENSORFLOW__SERVING__EXAMPLE_LIST__INIT;
    Tensorflow__Serving__Input        in = TENSORFLOW__SERVING__INPUT__INIT;
    Tensorflow__Serving__ModelSpec    ms = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__ModelSpec    ms2 = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
    Tensorflow__Serving__ClassificationRequest creq =
        TENSORFLOW__SERVING__CLASSIFICATION_REQUEST__INIT;
    Tensorflow__Serving__RegressionRequest     rreq = TENSORFLOW__SERVING__REGRESSION_REQUEST__INIT;
    Tensorflow__Serving__InferenceTask         t1 = TENSORFLOW__SERVING__INFERENCE_TASK__INIT;
    Tensorflow__Serving__InferenceTask         t2 = TENSORFLOW__SERVING__INFERENCE_TASK__INIT;
    Tensorflow__Serving__InferenceTask        *tasks[2] = {&t1, &t2};
    Tensorflow__Serving__MultiInferenceRequest mreq =
        TENSORFLOW__SERVING__MULTI_INFERENCE_REQUEST__INIT;
    Tensorflow__Serving__ClassifyLog       cl = TENSORFLOW__SERVING__CLASSIFY_LOG__INIT;
    Tensorflow__Serving__RegressLog        rl = TENSORFLOW__SERVING__REGRESS_LOG__INIT;
    Tensorflow__Serving__MultiInferenceLog ml = TENSORFLOW__SERVING__MULTI_INFERENCE_LOG__INIT;
    Tensorflow__Serving__PredictionLog     log = TENSORFLOW__SERVING__PREDICTION_LOG__INIT;
    int64_t                                iv = (int64_t)value;

    if (int64_feature) {
        il.n_value = 1;
        il.value = &iv;
        f.kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
        f.int64_list = &il;
    } else {
        fl.n_value = 1;
        fl.value = &value;
        f.kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
        f.float_list = &fl;
    }
    fe.key = "x";
    fe.value = &f;
    feats.n_feature = 1;
    feats.feature = fes;
    ex.features = &feats;
    el.n_examples = 1;
    el.examples = exs;
    in.kind_case = TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST;
    in.example_list = &el;
    ms.name = "half_plus_two";
    ms.signature_name = (char *)signature;
    if (kind == 2) {
        creq.model_spec = &ms;
        creq.input = &in;
        cl.request = &creq;
        log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_CLASSIFY_LOG;
        log.classify_log = &cl;
    } else if (kind == 3) {
        rreq.model_spec = &ms;
        rreq.input = &in;
        rl.request = &rreq;
        log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_REGRESS_LOG;
        log.regress_log = &rl;
    } else {
        ms.signature_name = "classify_x_to_y";
        ms2.name = "half_plus_two";
        ms2.signature_name = "regress_x_to_y";
        t1.model_spec = &ms;
        t1.method_name = "tensorflow/serving/classify";
        t2.model_spec = &ms2;
        t2.method_name = "tensorflow/serving/regress";
        mreq.n_tasks = 2;
        mreq.tasks = tasks;
        mreq.input = &in;
        ml.request = &mreq;
        log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_MULTI_INFERENCE_LOG;
        log.multi_inference_log = &ml;
    }
    return pack_log(&log, len);
}

/* <dir>/assets.extra/tf_serving_warmup_requests holding the given records (each freed here). */
static void write_warmup(const char *dir, uint8_t **recs, const size_t *lens, int n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/assets.extra", dir);
    ck_assert(mkdir(path, 0755) == 0 || access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/%s", dir, TFS_WARMUP_FILE);
    tfs_status           st;
    tfs_tfrecord_writer *w = NULL;
    ck_assert_msg(tfs_tfrecord_writer_open(path, &w, &st) == TFS_OK, "%s", st.msg);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(tfs_tfrecord_writer_write(w, recs[i], lens[i], &st) == TFS_OK, "%s", st.msg);
        free(recs[i]);
    }
    ck_assert_int_eq(tfs_tfrecord_writer_close(w, &st), TFS_OK);
}

/* Three good predict records on the demo model (y = 0.5 x + 2, input x). */
static void write_three_predicts(const char *dir)
{
    static const float a[] = {1.0f}, b[] = {1.0f, 2.0f, 5.0f}, c[] = {0.0f, 4.0f};
    uint8_t *recs[3];
    size_t   lens[3];
    recs[0] = predict_record(NULL, "x", a, 1, &lens[0]);
    recs[1] = predict_record("serving_default", "x", b, 3, &lens[1]);
    recs[2] = predict_record("", "x", c, 2, &lens[2]);
    write_warmup(dir, recs, lens, 3);
}

/* ---- in process ----------------------------------------------------------------------------- */

static char log_lines[8192];

static void capture(enum tfs_log_level level, const char *module, const char *line, void *user)
{
    (void)level, (void)user;
    size_t used = strlen(log_lines);
    snprintf(log_lines + used, sizeof log_lines - used, "%s: %s\n", module, line);
}

static tfs_savedmodel *load_demo(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models/half_plus_two/1", TFS_BINARY_DIR);
    tfs_savedmodel *m = NULL;
    tfs_status      st;
    ck_assert_msg(tfs_savedmodel_load(dir, NULL, &m, &st) == TFS_OK, "%s: %s", dir, st.msg);
    return m;
}

static enum tfs_code warm(const char *dir, const tfs_savedmodel *m, tfs_status *st)
{
    return tfs_warmup_run(NULL, "half_plus_two", 1, dir, m, st);
}

START_TEST(test_warmup_replays_predict_records)
{
    tfs_savedmodel *m = load_demo();
    char           *dir = tfs_test_mkdtemp();
    tfs_status      st;
    write_three_predicts(dir);
    log_lines[0] = 0;
    tfs_log_set_sink(capture, NULL);
    ck_assert_msg(warm(dir, m, &st) == TFS_OK, "%s", st.msg);
    tfs_log_set_sink(NULL, NULL);
    ck_assert_msg(strstr(log_lines, "Number of warmup records read: 3."), "log: %s", log_lines);
    ck_assert_msg(strstr(log_lines, "Elapsed time (microseconds): "), "log: %s", log_lines);

    /* iterations are reported; each record still counts once */
    tfs_warmup_opts wo = tfs_warmup_opts_default();
    wo.num_request_iterations = 3;
    log_lines[0] = 0;
    tfs_log_set_sink(capture, NULL);
    ck_assert_msg(tfs_warmup_run(&wo, "half_plus_two", 1, dir, m, &st) == TFS_OK, "%s", st.msg);
    tfs_log_set_sink(NULL, NULL);
    ck_assert_msg(strstr(log_lines, "3 iterations per record"), "log: %s", log_lines);
    ck_assert_msg(strstr(log_lines, "Number of warmup records read: 3."), "log: %s", log_lines);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}
END_TEST

START_TEST(test_warmup_absent_file_is_no_warmup)
{
    tfs_savedmodel *m = load_demo();
    char           *dir = tfs_test_mkdtemp();
    tfs_status      st;
    log_lines[0] = 0;
    tfs_log_set_sink(capture, NULL);
    ck_assert_msg(warm(dir, m, &st) == TFS_OK, "%s", st.msg);
    tfs_log_set_sink(NULL, NULL);
    ck_assert_msg(strstr(log_lines, "No warmup data file found at "), "log: %s", log_lines);
    /* an empty file is a file with no records: nothing to replay, not an error */
    write_warmup(dir, NULL, NULL, 0);
    ck_assert_msg(warm(dir, m, &st) == TFS_OK, "%s", st.msg);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}
END_TEST

/* Records: good, then `bad`; warmup must fail with `code` naming record 1 and containing `why`. */
static void expect_bad_request(uint8_t *bad, size_t bad_len, enum tfs_code code, const char *why)
{
    static const float x[] = {3.0f};
    tfs_savedmodel *m = load_demo();
    char           *dir = tfs_test_mkdtemp();
    tfs_status      st;
    uint8_t        *recs[2];
    size_t          lens[2];
    char            want[4300];
    recs[0] = predict_record(NULL, "x", x, 1, &lens[0]);
    recs[1] = bad;
    lens[1] = bad_len;
    write_warmup(dir, recs, lens, 2);
    ck_assert_int_eq(warm(dir, m, &st), code);
    ck_assert_int_eq(st.code, code);
    snprintf(want, sizeof want, "Warmup request in record 1 of %s/%s failed: ", dir,
             TFS_WARMUP_FILE);
    ck_assert_msg(strstr(st.msg, want), "'%s' lacks '%s'", st.msg, want);
    ck_assert_msg(strstr(st.msg, why), "'%s' lacks '%s'", st.msg, why);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}

START_TEST(test_warmup_bad_request_fails)
{
    static const float x[] = {1.0f, 2.0f};
    size_t len;
    uint8_t *r = predict_record("nope", "x", x, 2, &len);
    expect_bad_request(r, len, TFS_FAILED_PRECONDITION,
                       "Serving signature key \"nope\" not found.");
    r = predict_record(NULL, "z", x, 2, &len);
    expect_bad_request(r, len, TFS_INVALID_ARGUMENT,
                       "Signature input alias: x(feed name: x:0) not found in request");
    /* a shape whose element count does not match the values */
    Tensorflow__TensorShapeProto__Dim  dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
    Tensorflow__TensorShapeProto__Dim *dims[1] = {&dim};
    Tensorflow__TensorShapeProto       shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    Tensorflow__TensorProto            tp = TENSORFLOW__TENSOR_PROTO__INIT;
    Tensorflow__Serving__PredictRequest__InputsEntry e =
        TENSORFLOW__SERVING__PREDICT_REQUEST__INPUTS_ENTRY__INIT;
    Tensorflow__Serving__PredictRequest__InputsEntry *entries[1] = {&e};
    Tensorflow__Serving__PredictRequest req = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    Tensorflow__Serving__PredictLog     pl = TENSORFLOW__SERVING__PREDICT_LOG__INIT;
    Tensorflow__Serving__PredictionLog  log = TENSORFLOW__SERVING__PREDICTION_LOG__INIT;
    dim.size = 3;
    shape.n_dim = 1;
    shape.dim = dims;
    tp.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tp.tensor_shape = &shape;
    tp.tensor_content.len = 5;   /* 3 floats need 12 bytes */
    tp.tensor_content.data = (uint8_t *)"12345";
    e.key = "x";
    e.value = &tp;
    req.n_inputs = 1;
    req.inputs = entries;
    pl.request = &req;
    log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG;
    log.predict_log = &pl;
    r = pack_log(&log, &len);
    expect_bad_request(r, len, TFS_INVALID_ARGUMENT, "tensor parsing error: x");
    /* a session_run_log is not replayed (TF Serving: UNIMPLEMENTED) */
    Tensorflow__Serving__SessionRunLog sl = TENSORFLOW__SERVING__SESSION_RUN_LOG__INIT;
    Tensorflow__Serving__PredictionLog slog = TENSORFLOW__SERVING__PREDICTION_LOG__INIT;
    slog.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_SESSION_RUN_LOG;
    slog.session_run_log = &sl;
    r = pack_log(&slog, &len);
    expect_bad_request(r, len, TFS_UNIMPLEMENTED, "Unsupported log_type for warmup: 5");
}
END_TEST

/* Writes raw bytes as the warmup file and expects the load-failing status. */
static void expect_file_error(const void *bytes, size_t n, enum tfs_code code, const char *why)
{
    tfs_savedmodel *m = load_demo();
    char           *dir = tfs_test_mkdtemp();
    char            path[4200];
    tfs_status      st;
    write_warmup(dir, NULL, NULL, 0);
    snprintf(path, sizeof path, "%s/%s", dir, TFS_WARMUP_FILE);
    ck_assert_int_eq(tfs_test_write_file(path, bytes, n), 0);
    ck_assert_int_eq(warm(dir, m, &st), code);
    ck_assert_msg(strstr(st.msg, path), "'%s' does not name %s", st.msg, path);
    ck_assert_msg(strstr(st.msg, why), "'%s' lacks '%s'", st.msg, why);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}

START_TEST(test_warmup_corrupt_file_fails)
{
    /* A good file with one byte of the second record's data flipped. */
    char *dir = tfs_test_mkdtemp(), path[4200];
    size_t n;
    write_three_predicts(dir);
    snprintf(path, sizeof path, "%s/%s", dir, TFS_WARMUP_FILE);
    char *bytes = tfs_test_read_file(path, &n);
    ck_assert_ptr_nonnull(bytes);
    uint64_t first = 0;
    memcpy(&first, bytes, 8);   /* little-endian length of record 0 (x86 and arm64 hosts) */
    size_t at = 12 + (size_t)first + 4 + 12 + 3;   /* inside record 1's data */
    ck_assert_uint_lt(at, n);
    bytes[at] ^= 0x40;
    expect_file_error(bytes, n, TFS_DATA_LOSS, "record 1: corrupted record");
    expect_file_error(bytes, n, TFS_DATA_LOSS, "Please verify your warmup data is in TFRecord "
                                               "format.");
    /* cut short */
    expect_file_error(bytes, 20, TFS_DATA_LOSS, "truncated");
    /* not TFRecord at all */
    expect_file_error("{\"instances\": [1.0]}\n", 21, TFS_DATA_LOSS, "record 0");
    free(bytes);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_warmup_record_not_a_prediction_log)
{
    /* Valid TFRecord framing around bytes that are not a PredictionLog (field 1 as a varint,
     * where LogMetadata is a message). */
    uint8_t *recs[1];
    size_t   lens[1] = {2};
    recs[0] = malloc(2);
    recs[0][0] = 0x08;
    recs[0][1] = 0x01;
    tfs_savedmodel *m = load_demo();
    char           *dir = tfs_test_mkdtemp();
    tfs_status      st;
    write_warmup(dir, recs, lens, 1);
    ck_assert_int_eq(warm(dir, m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "Failed to parse warmup record 0"), "%s", st.msg);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}
END_TEST

START_TEST(test_warmup_record_limit)
{
    static const float x[] = {1.0f};
    enum { N = TFS_WARMUP_MAX_RECORDS + 1 };
    uint8_t **recs = malloc(N * sizeof *recs);
    size_t   *lens = malloc(N * sizeof *lens);
    for (int i = 0; i < N - 1; i++)
        recs[i] = predict_record(NULL, "x", x, 1, &lens[i]);
    tfs_savedmodel *m = load_demo();
    char           *dir = tfs_test_mkdtemp();
    tfs_status      st;
    /* exactly the maximum is fine */
    write_warmup(dir, recs, lens, N - 1);
    ck_assert_msg(warm(dir, m, &st) == TFS_OK, "%s", st.msg);
    /* one more is refused */
    for (int i = 0; i < N; i++)
        recs[i] = predict_record(NULL, "x", x, 1, &lens[i]);
    write_warmup(dir, recs, lens, N);
    ck_assert_int_eq(warm(dir, m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "Number of warmup records exceeds the maximum (1000) at "),
                  "%s", st.msg);
    free(recs);
    free(lens);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}
END_TEST

START_TEST(test_warmup_classify_regress_multi_fixture)
{
    if (tfs_test_skip_without_fixture(__func__, TF1_DIR))
        return;
    char fixture[4096];
    tfs_test_fixture(TF1_DIR, fixture, sizeof fixture);
    tfs_savedmodel *m = NULL;
    tfs_status      st;
    ck_assert_msg(tfs_savedmodel_load(fixture, NULL, &m, &st) == TFS_OK, "%s", st.msg);
    char    *dir = tfs_test_mkdtemp();
    uint8_t *recs[4];
    size_t   lens[4];
    recs[0] = example_record(2, "classify_x_to_y", 1.0f, false, &lens[0]);
    recs[1] = example_record(3, "regress_x_to_y", 2.0f, false, &lens[1]);
    recs[2] = example_record(4, NULL, 3.0f, false, &lens[2]);
    static const float x[] = {1.0f, 2.0f};
    recs[3] = predict_record(NULL, "x", x, 2, &lens[3]);
    write_warmup(dir, recs, lens, 4);
    log_lines[0] = 0;
    tfs_log_set_sink(capture, NULL);
    ck_assert_msg(tfs_warmup_run(NULL, "half_plus_two", 123, dir, m, &st) == TFS_OK, "%s", st.msg);
    tfs_log_set_sink(NULL, NULL);
    ck_assert_msg(strstr(log_lines, "Number of warmup records read: 4."), "log: %s", log_lines);

    /* The graph really runs: an int64 "x" where ParseExample wants float fails in the run. */
    recs[0] = example_record(3, "regress_x_to_y", 2.0f, true, &lens[0]);
    write_warmup(dir, recs, lens, 1);
    ck_assert_int_eq(tfs_warmup_run(NULL, "half_plus_two", 123, dir, m, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "Warmup request in record 0 of "), "%s", st.msg);
    /* a classify record on a regress signature: the service layer's contract check */
    recs[0] = example_record(2, "regress_x_to_y", 2.0f, false, &lens[0]);
    write_warmup(dir, recs, lens, 1);
    ck_assert_int_eq(tfs_warmup_run(NULL, "half_plus_two", 123, dir, m, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "Expected classification signature outputs"), "%s", st.msg);
    tfs_test_rmtree(dir);
    free(dir);
    tfs_savedmodel_free(m);
}
END_TEST

/* ---- the real tfserve ----------------------------------------------------------------------- */

/* <tmp>/half_plus_two/1 = a copy of the demo model; returns the base path (caller frees). */
static char *demo_copy(char **tmp)
{
    char src[4096], base[4200], ver[4300];
    *tmp = tfs_test_mkdtemp();
    snprintf(src, sizeof src, "%s/models/half_plus_two/1", TFS_BINARY_DIR);
    snprintf(base, sizeof base, "%s/half_plus_two", *tmp);
    snprintf(ver, sizeof ver, "%s/1", base);
    ck_assert_int_eq(mkdir(base, 0755), 0);
    ck_assert_int_eq(tfs_test_copytree(src, ver), 0);
    return strdup(ver);
}

static void start(tfs_test_server *s, const char *base, const char *extra)
{
    char bflag[4300];
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base);
    const char *flags[] = {"--model_name=half_plus_two", bflag, extra, NULL};
    ck_assert_msg(tfs_test_server_start(s, flags) == 0, "tfserve did not start; see %s",
                  s->log_path);
}

static void stop(tfs_test_server *s)
{
    int status = tfs_test_server_stop(s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "tfserve did not exit 0 (status %d); see %s", status, s->log_path);
}

static void expect_predict(int port)
{
    tfs_http_reply r = tfs_http(port, "POST", "/v1/models/half_plus_two:predict",
                                "{\"instances\": [1.0, 2.0, 5.0]}");
    ck_assert_msg(r.status == 200, "predict: %d %s", r.status, r.body ? r.body : "");
    json_t *got = json_loads(r.body, 0, NULL), *want = json_loads(
        "{\"predictions\": [2.5, 3.0, 4.5]}", 0, NULL);
    ck_assert_msg(got && json_equal(got, want), "predict: %s", r.body);
    json_decref(got);
    json_decref(want);
    tfs_http_reply_free(&r);
}

/* GET the model status: the one version's state, error code and message (copied into msg). */
static void model_status(int port, char *state, char *code, char *msg, size_t msg_n)
{
    tfs_http_reply r = tfs_http(port, "GET", "/v1/models/half_plus_two", NULL);
    ck_assert_msg(r.status == 200, "status: %d %s", r.status, r.body ? r.body : "");
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *v = json_array_get(json_object_get(j, "model_version_status"), 0);
    ck_assert_msg(v != NULL, "status body %s", r.body);
    snprintf(state, 32, "%s", json_string_value(json_object_get(v, "state")));
    json_t *s = json_object_get(v, "status");
    snprintf(code, 32, "%s", json_string_value(json_object_get(s, "error_code")));
    snprintf(msg, msg_n, "%s", json_string_value(json_object_get(s, "error_message")));
    json_decref(j);
    tfs_http_reply_free(&r);
}

START_TEST(test_warmup_e2e)
{
    char *tmp, *ver = demo_copy(&tmp), base[4200], state[32], code[32], msg[2048];
    snprintf(base, sizeof base, "%s/half_plus_two", tmp);
    write_three_predicts(ver);

    tfs_test_server s;
    start(&s, base, NULL);
    expect_predict(s.rest_port);
    model_status(s.rest_port, state, code, msg, sizeof msg);
    ck_assert_str_eq(state, "AVAILABLE");
    stop(&s);
    char *log = tfs_test_read_file(s.log_path, NULL);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(strstr(log, "Number of warmup records read: 3."), "log: %s", log);
    free(log);
    unlink(s.log_path);

    /* damage record 0's data: the version fails to load and says why */
    char path[4400];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", ver, TFS_WARMUP_FILE);
    char *bytes = tfs_test_read_file(path, &n);
    bytes[14] ^= 0x01;
    ck_assert_int_eq(tfs_test_write_file(path, bytes, n), 0);
    free(bytes);
    start(&s, base, NULL);
    model_status(s.rest_port, state, code, msg, sizeof msg);
    ck_assert_str_eq(state, "END");
    ck_assert_str_eq(code, "DATA_LOSS");
    ck_assert_msg(strstr(msg, path) && strstr(msg, "Please verify your warmup data"), "%s", msg);
    tfs_http_reply r = tfs_http(s.rest_port, "POST", "/v1/models/half_plus_two:predict",
                                "{\"instances\": [1.0]}");
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    stop(&s);
    unlink(s.log_path);

    /* without warmup the same file is never read */
    start(&s, base, "--enable_model_warmup=false");
    model_status(s.rest_port, state, code, msg, sizeof msg);
    ck_assert_str_eq(state, "AVAILABLE");
    expect_predict(s.rest_port);
    stop(&s);
    log = tfs_test_read_file(s.log_path, NULL);
    ck_assert_msg(log && !strstr(log, "warmup"), "log mentions warmup: %s", log ? log : "");
    free(log);
    unlink(s.log_path);
    tfs_test_rmtree(tmp);
    free(tmp);
    free(ver);
}
END_TEST

/* ---- slow warmups: a load that lasts long enough to watch ----------------------------------- */

/* Warmup iterations per record that keep a version LOADING for about 0.35 s here (the demo model
 * answers one warmup request in about 1 us); the tests below need a window of tens of
 * milliseconds. */
#define SLOW_ITERATIONS "--num_request_iterations_for_warmup=300000"

/* Deploys version v of the lifecycle test model (y = 0.5 x + v) with a one-record warmup file:
 * written under a temporary name, then renamed into place. */
static void write_slow_version(const char *base, int v)
{
    static const float x[] = {1.0f};
    char     tmp[4200], dst[4200];
    uint8_t *rec[1];
    size_t   len[1];
    snprintf(tmp, sizeof tmp, "%s/tmp-%d", base, v);
    snprintf(dst, sizeof dst, "%s/%d", base, v);
    tfs_test_write_model(tmp, (float)v, 0);
    rec[0] = predict_record(NULL, "x", x, 1, &len[0]);
    write_warmup(tmp, rec, len, 1);
    ck_assert_int_eq(rename(tmp, dst), 0);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool file_has(const char *path, const char *needle)
{
    char *text = tfs_test_read_file(path, NULL);
    bool  found = text && strstr(text, needle);
    free(text);
    return found;
}

/* A SIGTERM that arrives while the server is still starting (a version warming up, the main
 * thread not yet waiting for signals) is kept until startup ends, then drains: exit 0. It used to
 * land on a thread OpenBLAS starts before main() (which does not block the signal) and kill the
 * process outright. */
START_TEST(test_warmup_sigterm_during_startup)
{
    char *tmp = tfs_test_mkdtemp(), base[4200], bin[4200], log_path[4300], bflag[4300];
    char  port[64], rest[64];
    snprintf(base, sizeof base, "%s/m", tmp);
    ck_assert_int_eq(mkdir(base, 0755), 0);
    write_slow_version(base, 1);
    snprintf(bin, sizeof bin, "%s/server/tfserve", TFS_BINARY_DIR);
    snprintf(log_path, sizeof log_path, "%s/tfserve.log", tmp);
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base);
    snprintf(port, sizeof port, "--port=%d", tfs_test_free_port());
    snprintf(rest, sizeof rest, "--rest_api_port=%d", tfs_test_free_port());
    char *argv[] = {bin, port, rest, "--model_name=m", bflag, SLOW_ITERATIONS, NULL};
    tfs_test_server s = {0};
    s.pid = fork();
    ck_assert_int_ge(s.pid, 0);
    if (s.pid == 0) {
        FILE *log = fopen(log_path, "w");
        if (log) {
            dup2(fileno(log), 1);
            dup2(fileno(log), 2);
        }
        execv(bin, argv);
        _exit(127);
    }
    double t0 = mono_s();
    while (!file_has(log_path, "Starting to read warmup data") && mono_s() - t0 < 20)
        usleep(2000);
    ck_assert_msg(file_has(log_path, "Starting to read warmup data"), "no warmup; see %s",
                  log_path);
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    bool starting = !file_has(log_path, "Exporting HTTP/REST API");
    int status = 0;
    ck_assert_msg(tfs_test_server_wait(&s, 60000, &status) == 0, "tfserve still runs; see %s",
                  log_path);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "SIGTERM during startup: exit %d, signal %d (want exit 0); see %s",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, log_path);
    ck_assert_msg(starting, "the warmup ended before the signal was sent: raise SLOW_ITERATIONS");
    ck_assert(file_has(log_path, "Exporting HTTP/REST API"));
    ck_assert(file_has(log_path, "received SIGTERM: draining"));
    char       *text = tfs_test_read_file(log_path, NULL);
    const char *us = text ? strstr(text, "Elapsed time (microseconds): ") : NULL;
    fprintf(stderr, "SIGTERM during a %.3f s warmup at startup: drained, exit 0\n",
            us ? strtod(us + 29, NULL) / 1e6 : -1.0);
    free(text);
    tfs_test_rmtree(tmp);
    free(tmp);
}
END_TEST

/* GET /readyz: the HTTP status, and the first model's "state" copied into state. */
static int readyz(int port, char *state, size_t n)
{
    tfs_http_reply r = tfs_http(port, "GET", "/readyz", NULL);
    json_t *j = r.status > 0 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *m = json_array_get(json_object_get(j, "models"), 0);
    snprintf(state, n, "%s", m ? json_string_value(json_object_get(m, "state")) : "");
    int status = r.status;
    json_decref(j);
    tfs_http_reply_free(&r);
    return status;
}

/* GET /v1/models/m: "2:LOADING 1:AVAILABLE" (static buffer). */
static const char *states(int port)
{
    static char buf[512];
    tfs_http_reply r = tfs_http(port, "GET", "/v1/models/m", NULL);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *list = json_object_get(j, "model_version_status");
    size_t  used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < json_array_size(list) && used < sizeof buf; i++) {
        json_t *v = json_array_get(list, i);
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s:%s", i ? " " : "",
                                 json_string_value(json_object_get(v, "version")),
                                 json_string_value(json_object_get(v, "state")));
    }
    json_decref(j);
    tfs_http_reply_free(&r);
    return buf;
}

/* What /readyz answered while waiting for GET /v1/models/m to show `until`. */
typedef struct watch {
    int  n_200, n_503;
    bool saw_loading;   /* a version was LOADING (in /readyz's model or the status list) */
} watch;

static watch watch_until(int port, const char *until, double limit_s)
{
    watch  w = {0};
    char   state[64];
    double t0 = mono_s();
    for (;;) {
        int code = readyz(port, state, sizeof state);
        const char *now = states(port);
        w.n_200 += code == 200;
        w.n_503 += code == 503;
        w.saw_loading |= !strcmp(state, "LOADING") || strstr(now, ":LOADING") != NULL;
        if (!strcmp(now, until))
            return w;
        ck_assert_msg(mono_s() - t0 < limit_s, "no '%s' after %g s (now '%s')", until, limit_s,
                      now);
        usleep(10000);
    }
}

/* Readiness through a model's lifecycle on the real server, each load slowed by its warmup:
 * 503 (NO_VERSION) with an empty base path; 503 while the first version is LOADING, 200 once it
 * is AVAILABLE; 200 throughout while a second version loads and replaces it (the first unloads),
 * and while the first comes back when the second is deleted (the second unloads); 503 at once
 * after SIGTERM, and exit 0. (503 once every version is gone: test_health.c.) */
START_TEST(test_warmup_readiness_transitions)
{
    char *tmp = tfs_test_mkdtemp(), base[4200], bflag[4300], state[64];
    snprintf(base, sizeof base, "%s/m", tmp);
    ck_assert_int_eq(mkdir(base, 0755), 0);
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base);
    const char *flags[] = {"--model_name=m", bflag, "--file_system_poll_wait_seconds=1",
                           "--drain_delay_seconds=1", SLOW_ITERATIONS, NULL};
    tfs_test_server s;
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    ck_assert_int_eq(readyz(s.rest_port, state, sizeof state), 503);
    ck_assert_str_eq(state, "NO_VERSION");

    write_slow_version(base, 1);   /* load: 503 while LOADING, then 200 */
    watch w = watch_until(s.rest_port, "1:AVAILABLE", 30);
    ck_assert_msg(w.saw_loading && w.n_503 > 0, "version 1 was never seen LOADING with /readyz "
                  "503 (%d answers 503, %d 200)", w.n_503, w.n_200);
    ck_assert_int_eq(readyz(s.rest_port, state, sizeof state), 200);
    ck_assert_str_eq(state, "AVAILABLE");

    write_slow_version(base, 2);   /* a new version loads while 1 serves: ready throughout */
    w = watch_until(s.rest_port, "2:AVAILABLE 1:END", 30);
    ck_assert_msg(w.saw_loading && w.n_503 == 0, "while version 2 loaded: LOADING seen %d, "
                  "%d answers 503", w.saw_loading, w.n_503);

    tfs_test_remove_version(base, 2);   /* 1 comes back (loading again) before 2 unloads */
    w = watch_until(s.rest_port, "2:END 1:AVAILABLE", 30);
    ck_assert_msg(w.saw_loading && w.n_503 == 0, "while version 1 came back: LOADING seen %d, "
                  "%d answers 503", w.saw_loading, w.n_503);

    ck_assert_int_eq(readyz(s.rest_port, state, sizeof state), 200);
    double t0 = mono_s();
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);   /* drain: 503 at once */
    int code = 200;
    while (code == 200 && mono_s() - t0 < 0.9)
        code = readyz(s.rest_port, state, sizeof state);
    ck_assert_msg(code == 503, "/readyz %d %.2f s into the drain", code, mono_s() - t0);
    int status = 0;
    ck_assert_int_eq(tfs_test_server_wait(&s, 10000, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    unlink(s.log_path);
    tfs_test_rmtree(tmp);
    free(tmp);
}
END_TEST

Suite *suite_server_warmup(void)
{
    Suite *s = suite_create("server_warmup");
    TCase *tc = tcase_create("warmup");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_warmup_replays_predict_records);
    tcase_add_test(tc, test_warmup_absent_file_is_no_warmup);
    tcase_add_test(tc, test_warmup_bad_request_fails);
    tcase_add_test(tc, test_warmup_corrupt_file_fails);
    tcase_add_test(tc, test_warmup_record_not_a_prediction_log);
    tcase_add_test(tc, test_warmup_record_limit);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("warmup_fixtures", NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_warmup_classify_regress_multi_fixture);
    suite_add_tcase(s, tc);
    TCase *sys = tcase_create("warmup_e2e");
    tcase_set_tags(sys, "system");
    tcase_set_timeout(sys, 120);
    tcase_add_test(sys, test_warmup_e2e);
    tcase_add_test(sys, test_warmup_sigterm_during_startup);
    tcase_add_test(sys, test_warmup_readiness_transitions);
    suite_add_tcase(s, sys);
    return s;
}
