/* Classify and Regress over gRPC. The request's tf.Examples are serialized again (protobuf-c has
 * no lazy fields) and handed to the protocol-neutral tfs__service_classify / _regress, the same
 * functions REST calls, so both protocols run the same checks with the same texts. With an
 * ExampleListWithContext each example is serialized(context) followed by serialized(example):
 * concatenated protobuf messages merge, which is how TF Serving feeds a context.
 *
 * MultiInference checks its tasks as TF Serving's multi_inference.cc does (same model, distinct
 * signatures, classify/regress methods) and then runs each task through the same service calls;
 * TF Serving runs them in one session run fetching the union of outputs, which only differs for
 * stateful graphs.
 */
#include <string.h>

#include "runtime/alloc.h"
#include "server/grpc-impl.h"
#include "tensorflow_serving/apis/classification.pb-c.h"
#include "tensorflow_serving/apis/inference.pb-c.h"
#include "tensorflow_serving/apis/regression.pb-c.h"

#define DEFAULT_SIGNATURE "serving_default"

void tfs__grpc_examples_free(tfs_string *ex, int64_t n)
{
    for (int64_t i = 0; ex && i < n; i++)
        tfs_free(ex[i].data);
    tfs_free(ex);
}

/* One serialized example per element of the Input; none (n = 0) when the input is absent, which
 * the service layer answers with "Input is empty.". */
enum tfs_code tfs__grpc_input_examples(const Tensorflow__Serving__Input *in, tfs_string **out,
                                      int64_t *n_out, tfs_status *st)
{
    Tensorflow__Example *const *exs = NULL;
    const Tensorflow__Example  *ctx = NULL;
    size_t                      n = 0;
    tfs_string                 *ex = NULL;

    *out = NULL;
    *n_out = 0;
    if (in && in->kind_case == TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST && in->example_list) {
        exs = in->example_list->examples;
        n = in->example_list->n_examples;
    } else if (in && in->kind_case == TENSORFLOW__SERVING__INPUT__KIND_EXAMPLE_LIST_WITH_CONTEXT &&
               in->example_list_with_context) {
        exs = in->example_list_with_context->examples;
        n = in->example_list_with_context->n_examples;
        ctx = in->example_list_with_context->context;
    }
    if (n == 0)
        return TFS_OK;
    size_t ctx_len = ctx ? tensorflow__example__get_packed_size(ctx) : 0;
    if (!(ex = tfs_calloc(n, sizeof *ex)))
        goto oom;
    for (size_t i = 0; i < n; i++) {
        size_t len = tensorflow__example__get_packed_size(exs[i]);
        if (!(ex[i].data = tfs_malloc(ctx_len + len + 1)))
            goto oom;
        if (ctx)
            tensorflow__example__pack(ctx, (uint8_t *)ex[i].data);
        tensorflow__example__pack(exs[i], (uint8_t *)ex[i].data + ctx_len);
        ex[i].len = ctx_len + len;
    }
    *out = ex;
    *n_out = (int64_t)n;
    return TFS_OK;
oom:
    tfs__grpc_examples_free(ex, (int64_t)n);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory serializing %zu examples", n);
}

/* Response model_spec: the request's name, the version that answered, the request's signature
 * name or "serving_default". */
static Tensorflow__Serving__ModelSpec *answer_spec(tfs__arena *a, const tfs_model_spec *spec,
                                                   int64_t version)
{
    Tensorflow__Serving__ModelSpec *ms = tfs__arena_alloc(a, sizeof *ms);
    Google__Protobuf__Int64Value   *v = tfs__arena_alloc(a, sizeof *v);
    if (!ms || !v)
        return NULL;
    tensorflow__serving__model_spec__init(ms);
    google__protobuf__int64_value__init(v);
    v->value = version;
    ms->name = tfs__arena_strdup(a, spec->name);
    ms->signature_name = tfs__arena_strdup(
        a, spec->signature_name && *spec->signature_name ? spec->signature_name
                                                         : DEFAULT_SIGNATURE);
    ms->version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
    ms->version = v;
    return ms->name && ms->signature_name ? ms : NULL;
}

/* Classifications per example from the service's result; NULL when the arena runs out. */
static Tensorflow__Serving__ClassificationResult *classify_result(tfs__arena *a,
                                                                  const tfs__classify_result *res)
{
    Tensorflow__Serving__ClassificationResult *result = tfs__arena_alloc(a, sizeof *result);
    if (!result)
        return NULL;
    tensorflow__serving__classification_result__init(result);
    result->classifications =
        tfs__arena_alloc(a, (size_t)(res->n_examples + 1) * sizeof *result->classifications);
    if (!result->classifications)
        return NULL;
    for (int64_t i = 0; i < res->n_examples; i++) {
        Tensorflow__Serving__Classifications *c = tfs__arena_alloc(a, sizeof *c);
        if (!c)
            return NULL;
        tensorflow__serving__classifications__init(c);
        c->classes = tfs__arena_alloc(a, (size_t)(res->n_classes + 1) * sizeof *c->classes);
        if (!c->classes)
            return NULL;
        for (int64_t k = 0; k < res->n_classes; k++) {
            Tensorflow__Serving__Class *cl = tfs__arena_alloc(a, sizeof *cl);
            int64_t                     at = i * res->n_classes + k;
            if (!cl)
                return NULL;
            tensorflow__serving__class__init(cl);
            if (res->labels) {
                /* Labels are bytes in the tensor; the proto field is a NUL-terminated string. */
                char *lab = tfs__arena_alloc(a, res->labels[at].len + 1);
                if (!lab)
                    return NULL;
                if (res->labels[at].len)
                    memcpy(lab, res->labels[at].data, res->labels[at].len);
                cl->label = lab;
            }
            cl->score = res->scores ? res->scores[at] : 0.0f;
            c->classes[c->n_classes++] = cl;
        }
        result->classifications[result->n_classifications++] = c;
    }
    return result;
}

/* Regressions per example; NULL when the arena runs out. */
static Tensorflow__Serving__RegressionResult *regress_result(tfs__arena *a,
                                                             const tfs__regress_result *res)
{
    Tensorflow__Serving__RegressionResult *result = tfs__arena_alloc(a, sizeof *result);
    if (!result)
        return NULL;
    tensorflow__serving__regression_result__init(result);
    result->regressions =
        tfs__arena_alloc(a, (size_t)(res->n_examples + 1) * sizeof *result->regressions);
    if (!result->regressions)
        return NULL;
    for (int64_t i = 0; i < res->n_examples; i++) {
        Tensorflow__Serving__Regression *r = tfs__arena_alloc(a, sizeof *r);
        if (!r)
            return NULL;
        tensorflow__serving__regression__init(r);
        r->value = res->values[i];
        result->regressions[result->n_regressions++] = r;
    }
    return result;
}

enum tfs_code tfs__grpc_classify(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                 size_t *out_len, tfs_status *st)
{
    Tensorflow__Serving__ClassificationRequest *req = NULL;
    tfs__classify_result res;
    tfs_string          *ex = NULL;
    int64_t              n_ex = 0;
    tfs_model_spec       spec;
    tfs__arena           a;
    enum tfs_code        code;

    memset(&res, 0, sizeof res);
    tfs__arena_init(&a);
    req = (Tensorflow__Serving__ClassificationRequest *)tfs__grpc_unpack(
        &tensorflow__serving__classification_request__descriptor, in, n, st);
    if (!req) {
        code = st ? st->code : TFS_INVALID_ARGUMENT;
        goto fail;
    }
    if ((code = tfs__grpc_read_spec(req->model_spec, &spec, st)) != TFS_OK ||
        (code = tfs__grpc_input_examples(req->input, &ex, &n_ex, st)) != TFS_OK ||
        (code = tfs__service_classify(l, &spec, ex, n_ex, &res, st)) != TFS_OK)
        goto fail;

    Tensorflow__Serving__ClassificationResponse resp =
        TENSORFLOW__SERVING__CLASSIFICATION_RESPONSE__INIT;
    resp.model_spec = answer_spec(&a, &spec, res.version);
    resp.result = classify_result(&a, &res);
    if (!resp.model_spec || !resp.result)
        goto oom;
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a ClassificationResponse");
fail:
done:
    tfs__classify_result_deinit(&res);
    tfs__grpc_examples_free(ex, n_ex);
    tfs__arena_deinit(&a);
    tfs__grpc_free_unpacked(req);
    return code;
}

enum tfs_code tfs__grpc_regress(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                size_t *out_len, tfs_status *st)
{
    Tensorflow__Serving__RegressionRequest *req = NULL;
    tfs__regress_result res;
    tfs_string         *ex = NULL;
    int64_t             n_ex = 0;
    tfs_model_spec      spec;
    tfs__arena          a;
    enum tfs_code       code;

    memset(&res, 0, sizeof res);
    tfs__arena_init(&a);
    req = (Tensorflow__Serving__RegressionRequest *)tfs__grpc_unpack(
        &tensorflow__serving__regression_request__descriptor, in, n, st);
    if (!req) {
        code = st ? st->code : TFS_INVALID_ARGUMENT;
        goto fail;
    }
    if ((code = tfs__grpc_read_spec(req->model_spec, &spec, st)) != TFS_OK ||
        (code = tfs__grpc_input_examples(req->input, &ex, &n_ex, st)) != TFS_OK ||
        (code = tfs__service_regress(l, &spec, ex, n_ex, &res, st)) != TFS_OK)
        goto fail;

    Tensorflow__Serving__RegressionResponse resp = TENSORFLOW__SERVING__REGRESSION_RESPONSE__INIT;
    resp.model_spec = answer_spec(&a, &spec, res.version);
    resp.result = regress_result(&a, &res);
    if (!resp.model_spec || !resp.result)
        goto oom;
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a RegressionResponse");
fail:
done:
    tfs__regress_result_deinit(&res);
    tfs__grpc_examples_free(ex, n_ex);
    tfs__arena_deinit(&a);
    tfs__grpc_free_unpacked(req);
    return code;
}

/* ---- MultiInference ------------------------------------------------------------------------- */

#define CLASSIFY_METHOD "tensorflow/serving/classify"
#define REGRESS_METHOD "tensorflow/serving/regress"

static const char *task_signature(const Tensorflow__Serving__InferenceTask *t)
{
    const char *s = t->model_spec ? t->model_spec->signature_name : NULL;
    return s && *s ? s : DEFAULT_SIGNATURE;
}

/* The request-level checks of multi_inference.cc, before anything runs; the signatures are
 * compared through a hash map, so a request with any number of tasks costs its length. */
enum tfs_code tfs__grpc_check_tasks(const Tensorflow__Serving__MultiInferenceRequest *req,
                                   tfs_status *st)
{
    tfs__name_map sigs;
    enum tfs_code code;

    if (req->n_tasks == 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Found no tasks in the MultiInferenceRequest");
    if ((code = tfs__name_map_init(&sigs, req->n_tasks, st)) != TFS_OK)
        return code;
    const char *model = req->tasks[0]->model_spec ? req->tasks[0]->model_spec->name : NULL;
    for (size_t i = 0; i < req->n_tasks && code == TFS_OK; i++) {
        const Tensorflow__Serving__InferenceTask *t = req->tasks[i];
        if (!t->model_spec)
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing ModelSpec");
        else if (!model || strcmp(t->model_spec->name, model) != 0)
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "All ModelSpecs in a MultiInferenceRequest "
                           "must access the same model name.");
        else if (tfs__name_map_put(&sigs, task_signature(t), 0) != -1)
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Duplicate evaluation of signature: %s",
                           task_signature(t));
        else if (strcmp(t->method_name, CLASSIFY_METHOD) != 0 &&
                 strcmp(t->method_name, REGRESS_METHOD) != 0)
            code = TFS_ERR(st, TFS_UNIMPLEMENTED, "Unsupported signature method_name: %s",
                           t->method_name);
    }
    tfs__name_map_deinit(&sigs);
    return code;
}

enum tfs_code tfs__grpc_multi_inference(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                        size_t *out_len, tfs_status *st)
{
    Tensorflow__Serving__MultiInferenceRequest *req = NULL;
    tfs_string   *ex = NULL;
    int64_t       n_ex = 0;
    tfs__arena    a;
    enum tfs_code code;

    tfs__arena_init(&a);
    req = (Tensorflow__Serving__MultiInferenceRequest *)tfs__grpc_unpack(
        &tensorflow__serving__multi_inference_request__descriptor, in, n, st);
    if (!req) {
        code = st ? st->code : TFS_INVALID_ARGUMENT;
        goto fail;
    }
    if ((code = tfs__grpc_check_tasks(req, st)) != TFS_OK ||
        (code = tfs__grpc_input_examples(req->input, &ex, &n_ex, st)) != TFS_OK)
        goto fail;

    Tensorflow__Serving__MultiInferenceResponse resp =
        TENSORFLOW__SERVING__MULTI_INFERENCE_RESPONSE__INIT;
    if (!(resp.results = tfs__arena_alloc(&a, (req->n_tasks + 1) * sizeof *resp.results)))
        goto oom;
    for (size_t i = 0; i < req->n_tasks; i++) {
        const Tensorflow__Serving__InferenceTask *t = req->tasks[i];
        Tensorflow__Serving__InferenceResult     *r = tfs__arena_alloc(&a, sizeof *r);
        tfs_model_spec                            spec;
        if (!r)
            goto oom;
        tensorflow__serving__inference_result__init(r);
        if ((code = tfs__grpc_read_spec(t->model_spec, &spec, st)) != TFS_OK)
            goto fail;
        if (strcmp(t->method_name, CLASSIFY_METHOD) == 0) {
            tfs__classify_result res;
            memset(&res, 0, sizeof res);
            code = tfs__service_classify(l, &spec, ex, n_ex, &res, st);
            if (code == TFS_OK) {
                r->result_case = TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_CLASSIFICATION_RESULT;
                r->classification_result = classify_result(&a, &res);
                r->model_spec = answer_spec(&a, &spec, res.version);
            }
            tfs__classify_result_deinit(&res);
        } else {
            tfs__regress_result res;
            memset(&res, 0, sizeof res);
            code = tfs__service_regress(l, &spec, ex, n_ex, &res, st);
            if (code == TFS_OK) {
                r->result_case = TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_REGRESSION_RESULT;
                r->regression_result = regress_result(&a, &res);
                r->model_spec = answer_spec(&a, &spec, res.version);
            }
            tfs__regress_result_deinit(&res);
        }
        if (code != TFS_OK)
            goto fail;
        if (!r->model_spec || (!r->classification_result && !r->regression_result))
            goto oom;
        resp.results[resp.n_results++] = r;
    }
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a MultiInferenceResponse");
fail:
done:
    tfs__grpc_examples_free(ex, n_ex);
    tfs__arena_deinit(&a);
    tfs__grpc_free_unpacked(req);
    return code;
}
