/* Model warmup, as TF Serving's saved_model_warmup.cc and saved_model_warmup_util.cc do it: before
 * a version becomes AVAILABLE, replay the requests recorded in
 * <version dir>/assets.extra/tf_serving_warmup_requests so that the first real requests do not pay
 * for lazy work (plan building, allocations, caches). The file is a TFRecord file of serialized
 * tensorflow.serving.PredictionLog; the request in each record (predict, classify, regress or
 * multi-inference) is run against the freshly loaded model and its result discarded.
 *
 * The loader calls tfs_warmup_run through its tfs_warmup_fn hook while the version is LOADING, so
 * requests run on the tfs_savedmodel directly (there is no servable to acquire yet). Decoding and
 * checking reuse the gRPC front end's pieces and the service layer's *_model functions: a warmup
 * request is checked exactly as the same request sent over gRPC would be.
 *
 * Rules (TF Serving's): no file, no warmup; at most TFS_WARMUP_MAX_RECORDS records (more:
 * INVALID_ARGUMENT, the load fails); a record that does not parse: INVALID_ARGUMENT; a request that
 * fails fails the load with its own code; a damaged file: DATA_LOSS "... Please verify your warmup
 * data is in TFRecord format."; session_run_log and predict_streamed_log records: UNIMPLEMENTED.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "server/grpc-impl.h"
#include "tensorflow_serving/apis/prediction_log.pb-c.h"

#define LOG_MODULE "warmup"

#define CLASSIFY_METHOD "tensorflow/serving/classify"

tfs_warmup_opts tfs_warmup_opts_default(void)
{
    return (tfs_warmup_opts){.num_request_iterations = 1};
}

/* ---- one request ---------------------------------------------------------------------------- */

/* RunPredict: signature, output_filter and inputs checked as Predict over gRPC checks them. */
static enum tfs_code warm_predict(const tfs_savedmodel *m,
                                  const Tensorflow__Serving__PredictRequest *req, tfs_status *st)
{
    const tfs_signature *sig = NULL;
    tfs_named_tensor    *inputs = NULL;
    tfs_tensor         **outputs = NULL;
    int                  n_in = 0;
    enum tfs_code        code;
    const char          *name = req->model_spec ? req->model_spec->signature_name : NULL;

    if ((code = tfs__service_signature_model(m, name, TFS_API_GRPC, &sig, st)) != TFS_OK ||
        (code = tfs__grpc_check_output_filter(sig, req->output_filter, req->n_output_filter,
                                              st)) != TFS_OK ||
        (code = tfs__grpc_predict_inputs(req, sig, &inputs, &n_in, st)) != TFS_OK)
        goto done;
    if (!(outputs = tfs_calloc((size_t)(sig->n_outputs > 0 ? sig->n_outputs : 1),
                               sizeof *outputs))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running a warmup request");
        goto done;
    }
    code = tfs__service_run_model(m, sig, inputs, n_in, outputs, st);
done:
    for (int i = 0; outputs && i < sig->n_outputs; i++)
        tfs_tensor_unref(outputs[i]);
    tfs_free(outputs);
    tfs__named_tensors_free(inputs, n_in);
    return code;
}

/* RunClassify / RunRegress on the request's Input (NULL signature name = serving_default). */
static enum tfs_code warm_examples(const tfs_savedmodel *m, bool classify, const char *signature,
                                   const Tensorflow__Serving__Input *in, tfs_status *st)
{
    tfs_string   *ex = NULL;
    int64_t       n_ex = 0;
    enum tfs_code code = tfs__grpc_input_examples(in, &ex, &n_ex, st);
    if (code != TFS_OK)
        return code;
    if (classify) {
        tfs__classify_result res;
        code = tfs__service_classify_model(m, signature, ex, n_ex, &res, st);
        tfs__classify_result_deinit(&res);
    } else {
        tfs__regress_result res;
        code = tfs__service_regress_model(m, signature, ex, n_ex, &res, st);
        tfs__regress_result_deinit(&res);
    }
    tfs__grpc_examples_free(ex, n_ex);
    return code;
}

/* RunMultiInference: the request-level checks, then each task on the shared input. */
static enum tfs_code warm_multi(const tfs_savedmodel *m,
                                const Tensorflow__Serving__MultiInferenceRequest *req,
                                tfs_status *st)
{
    enum tfs_code code = tfs__grpc_check_tasks(req, st);
    for (size_t i = 0; code == TFS_OK && i < req->n_tasks; i++) {
        const Tensorflow__Serving__InferenceTask *t = req->tasks[i];
        code = warm_examples(m, strcmp(t->method_name, CLASSIFY_METHOD) == 0,
                             t->model_spec->signature_name, req->input, st);
    }
    return code;
}

static enum tfs_code warm_record(const tfs_savedmodel *m,
                                 const Tensorflow__Serving__PredictionLog *log, tfs_status *st)
{
    /* An absent request is an empty one, as a protobuf getter would return. */
    static const Tensorflow__Serving__PredictRequest        empty_predict =
        TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
    static const Tensorflow__Serving__MultiInferenceRequest empty_multi =
        TENSORFLOW__SERVING__MULTI_INFERENCE_REQUEST__INIT;

    switch (log->log_type_case) {
    case TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG: {
        const Tensorflow__Serving__PredictRequest *r = log->predict_log->request;
        return warm_predict(m, r ? r : &empty_predict, st);
    }
    case TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_CLASSIFY_LOG: {
        const Tensorflow__Serving__ClassificationRequest *r = log->classify_log->request;
        return warm_examples(m, true, r && r->model_spec ? r->model_spec->signature_name : NULL,
                             r ? r->input : NULL, st);
    }
    case TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_REGRESS_LOG: {
        const Tensorflow__Serving__RegressionRequest *r = log->regress_log->request;
        return warm_examples(m, false, r && r->model_spec ? r->model_spec->signature_name : NULL,
                             r ? r->input : NULL, st);
    }
    case TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_MULTI_INFERENCE_LOG: {
        const Tensorflow__Serving__MultiInferenceRequest *r = log->multi_inference_log->request;
        return warm_multi(m, r ? r : &empty_multi, st);
    }
    default:
        /* session_run_log (5), predict_streamed_log (7), or none set (0). */
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "Unsupported log_type for warmup: %d",
                       (int)log->log_type_case);
    }
}

/* ---- the file ------------------------------------------------------------------------------- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum tfs_code tfs_warmup_run(void *ctx, const char *model_name, int64_t version, const char *dir,
                             const tfs_savedmodel *model, tfs_status *st)
{
    const tfs_warmup_opts *opts = ctx;
    int                    iterations = opts && opts->num_request_iterations > 0
                                            ? opts->num_request_iterations : 1;
    tfs_tfrecord_reader   *r = NULL;
    Tensorflow__Serving__PredictionLog *log = NULL;
    char                  *path = NULL;
    int64_t                n_records = 0;
    enum tfs_code          code;
    const uint8_t         *rec;
    size_t                 len;

    if (!(path = tfs_malloc(strlen(dir) + sizeof "/" TFS_WARMUP_FILE))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    sprintf(path, "%s/%s", dir, TFS_WARMUP_FILE);
    if ((code = tfs_tfrecord_reader_open(path, &r, st)) == TFS_NOT_FOUND) {
        TFS_LOG_INFO(LOG_MODULE, "No warmup data file found at %s", path);
        tfs_status_clear(st);
        code = TFS_OK;
        goto done;
    }
    if (code != TFS_OK)
        goto done;
    TFS_LOG_INFO(LOG_MODULE, "Starting to read warmup data for model '%s' version %lld at %s "
                 "(%d iteration%s per record)", model_name, (long long)version, path, iterations,
                 iterations == 1 ? "" : "s");
    double t0 = now_seconds();
    while ((code = tfs_tfrecord_reader_next(r, &rec, &len, st)) == TFS_OK) {
        if (n_records == TFS_WARMUP_MAX_RECORDS) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Number of warmup records exceeds the maximum (%d) at %s",
                           TFS_WARMUP_MAX_RECORDS, path);
            goto done;
        }
        tfs_status why;
        if (tfs__grpc_unpack_message(&tensorflow__serving__prediction_log__descriptor, rec, len,
                                     (ProtobufCMessage **)&log, &why) != TFS_OK) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Failed to parse warmup record %lld (%zu bytes) from %s as a "
                           "tensorflow.serving.PredictionLog: %s", (long long)n_records, len,
                           path, why.msg);
            goto done;
        }
        for (int i = 0; i < iterations; i++) {
            if ((code = warm_record(model, log, st)) != TFS_OK) {
                tfs_status_prefix(st, "Warmup request in record %lld of %s failed",
                                  (long long)n_records, path);
                goto done;
            }
        }
        tfs__grpc_free_unpacked(log);
        log = NULL;
        n_records++;
    }
    if (code != TFS_OUT_OF_RANGE) {
        /* The reader's message names the file, the record and what is wrong with it. */
        if (code == TFS_DATA_LOSS && st) {
            char why[sizeof st->msg];
            memcpy(why, st->msg, sizeof why);
            TFS_ERR(st, TFS_DATA_LOSS, "%s. Please verify your warmup data is in TFRecord format.",
                    why);
        }
        goto done;
    }
    TFS_LOG_INFO(LOG_MODULE, "Finished reading warmup data for model at %s. Number of warmup "
                 "records read: %lld. Elapsed time (microseconds): %lld.", path,
                 (long long)n_records, (long long)((now_seconds() - t0) * 1e6));
    tfs_status_clear(st);
    code = TFS_OK;
done:
    tfs__grpc_free_unpacked(log);
    tfs_tfrecord_reader_close(r);
    tfs_free(path);
    return code;
}
