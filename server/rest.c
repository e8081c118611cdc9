/* The REST API handler: one request in, one status + body out, as TF Serving's
 * HttpRestApiHandler answers. It knows nothing of sockets (http.c feeds it), so tests can drive it
 * directly.
 *
 * Predict follows TF Serving's order of work, which decides which error a bad request gets: parse
 * the JSON, read signature_name, resolve the model and the signature (404s and label errors
 * happen here), decode the tensors with the signature's dtypes, run, encode. The JSON document is
 * dropped as soon as the tensors are decoded. The run is asynchronous (tfs__rest_start hands it
 * to the loader, which batches it when batching is on; tfs__rest_call_finish encodes once the
 * completion has woken the HTTP layer), so no HTTP thread waits while a batch forms. The request
 * record travels with the pending call and is closed on the thread that encodes the answer.
 *
 * KServe v2's infer is the same call with another codec (v2-json.c): parsed, resolved with the
 * same helper, decoded into the same named tensors, run the same way, encoded as v2. Its other
 * endpoints are v2-rest.c's.
 */
#include <pthread.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/metrics-impl.h"
#include "server/server-impl.h"

static const char not_found_html[] =
    "<HTML><HEAD>\n<TITLE>404 Not Found</TITLE>\n</HEAD><BODY>\n"
    "<H1>Not Found</H1>\n</BODY></HTML>\n";

static void fail(tfs__rest_response *resp, const tfs_status *st)
{
    /* A partly written body (or an out-of-memory one) is replaced by the error document. */
    tfs__buf_deinit(&resp->body);
    tfs__buf_init(&resp->body);
    resp->json_len = -1;
    resp->http_status = tfs__http_status(st->code);
    resp->content_type = "application/json";
    tfs__json_error(&resp->body, st->msg);
}

/* ---- GET ------------------------------------------------------------------------------------ */

static enum tfs_code model_status(tfs_loader *l, const tfs__route *r, tfs__buf *out,
                                  tfs_status *st)
{
    tfs_version_status *vs = NULL;
    int                 n = 0;
    /* Labels are accepted in the URL but GetModelStatus ignores them: all versions come back. */
    enum tfs_code code = tfs_loader_model_status(l, r->name, r->version, &vs, &n, st);
    if (code == TFS_OK)
        code = tfs__json_model_status(vs, n, out, st);
    tfs_free(vs);
    return code;
}

static enum tfs_code model_metadata(tfs_loader *l, const tfs__route *r, tfs__buf *out,
                                    tfs_status *st)
{
    tfs_model_spec        spec = {r->name, r->version, r->label, NULL};
    tfs_servable         *s = NULL;
    const tfs_signature **sigs = NULL;
    enum tfs_code         code;

    if ((code = tfs_service_acquire(l, &spec, &s, st)) != TFS_OK)
        return code;
    const tfs_savedmodel *m = tfs_servable_model(s);
    int                   n = tfs_savedmodel_signature_count(m);
    sigs = tfs_calloc((size_t)(n > 0 ? n : 1), sizeof *sigs);
    if (!sigs) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory listing signatures");
        goto done;
    }
    for (int i = 0; i < n; i++)
        sigs[i] = tfs_savedmodel_signature_at(m, i);
    code = tfs__json_model_metadata(tfs_servable_name(s), tfs_servable_version(s), sigs, n, out,
                                    st);
done:
    tfs_free(sigs);
    tfs_servable_release(s);
    return code;
}

/* ---- predict -------------------------------------------------------------------------------- */

/* Everything a predict (or a v2 infer) holds between decoding and encoding. */
typedef struct predict_call {
    tfs_servable        *servable;
    const tfs_signature *sig;
    bool                 v2;    /* encoded by the v2 codec, as v2_req says */
    tfs__v2_infer        v2_req;
    enum tfs__json_format fmt;
    tfs_named_tensor    *inputs;
    int                  n_inputs;
    tfs_tensor         **outputs;
    tfs_tensor          *outputs_inline[4];   /* outputs, for up to 4 */
} predict_call;

static void predict_call_deinit(predict_call *c)
{
    if (c->outputs && c->sig)
        for (int i = 0; i < c->sig->n_outputs; i++)
            tfs_tensor_unref(c->outputs[i]);
    if (c->outputs != c->outputs_inline)
        tfs_free(c->outputs);
    tfs__named_tensors_free(c->inputs, c->n_inputs);
    tfs__v2_infer_deinit(&c->v2_req);
    tfs_servable_release(c->servable);
    memset(c, 0, sizeof *c);
}

/* The servable and signature a request names: the one lookup both codecs share. */
static enum tfs_code resolve(tfs_loader *l, const tfs__route *r, const char *sig_name,
                             predict_call *c, tfs_status *st)
{
    tfs_model_spec spec = {r->name, r->version, r->label, sig_name};
    enum tfs_code  code = tfs_service_acquire(l, &spec, &c->servable, st);
    if (code != TFS_OK)
        return code;
    return tfs_service_signature(c->servable, sig_name, TFS_API_REST, &c->sig, st);
}

/* Parse, resolve, decode: everything up to the run. */
static enum tfs_code predict_begin(tfs_loader *l, const tfs__route *r,
                                   const tfs__rest_request *req, predict_call *c,
                                   tfs_status *st)
{
    tfs__jdoc     doc;
    const char   *sig_name = NULL;
    enum tfs_code code;

    tfs__jdoc_init(&doc);
    if ((code = tfs__json_parse(req->body, req->body_len, &doc, st)) != TFS_OK ||
        (code = tfs__json_signature_name(doc.root, &sig_name, st)) != TFS_OK ||
        (code = resolve(l, r, sig_name, c, st)) != TFS_OK)
        goto done;
    code = tfs__json_decode_predict(doc.root, c->sig, sig_name, &c->fmt, &c->inputs,
                                    &c->n_inputs, st);
done:
    tfs__jdoc_deinit(&doc);
    return code;
}

/* The same for a v2 infer: its JSON (and binary tensors) through the v2 codec. */
static enum tfs_code infer_begin(tfs_loader *l, const tfs__route *r,
                                 const tfs__rest_request *req, predict_call *c, tfs_status *st)
{
    tfs__jdoc     doc;
    const char   *sig_name = NULL;
    size_t        bin = 0;
    enum tfs_code code;

    c->v2 = true;
    tfs__jdoc_init(&doc);
    if ((code = tfs__v2_parse(req->body, req->body_len, req->json_len, &doc, &bin, &sig_name,
                              st)) != TFS_OK ||
        (code = tfs__v2_not_ready(l, r, resolve(l, r, sig_name, c, st), st)) != TFS_OK)
        goto done;
    code = tfs__v2_decode_infer(doc.root, req->body + bin, req->body_len - bin, c->sig,
                                &c->inputs, &c->n_inputs, &c->v2_req, st);
done:
    tfs__jdoc_deinit(&doc);
    return code;
}

/* Encode the outputs under their signature aliases. */
static enum tfs_code predict_finish(predict_call *c, tfs__rest_response *resp, tfs_status *st)
{
    tfs__buf *out = &resp->body;
    if (c->v2) {
        enum tfs_code code = tfs__v2_encode_infer(&c->v2_req, tfs_servable_name(c->servable),
                                                  tfs_servable_version(c->servable), c->sig,
                                                  c->outputs, out, &resp->json_len, st);
        if (code == TFS_OK && resp->json_len >= 0)
            resp->content_type = "application/octet-stream";
        return code;
    }
    int               n = c->sig->n_outputs;
    tfs_named_tensor  small[8];
    tfs_named_tensor *named = n <= 8 ? small : tfs_calloc((size_t)n, sizeof *named);
    if (!named)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory encoding a predict response");
    for (int i = 0; i < n; i++) {
        named[i].name = c->sig->outputs[i].alias;
        named[i].tensor = c->outputs[i];
    }
    enum tfs_code code = tfs__json_encode_predict(c->fmt, named, n, out, st);
    if (named != small)
        tfs_free(named);
    return code;
}

/* ---- classify / regress -------------------------------------------------------------------- */

/* As TF Serving's ProcessClassifyRequest / ProcessRegressRequest: the whole body is decoded into
 * serialized Examples first (so JSON errors come before model lookup errors), then the service
 * layer runs them. */
static enum tfs_code classify_regress(tfs_loader *l, const tfs__route *r, const char *body,
                                      size_t len, tfs__buf *out, tfs_status *st)
{
    tfs__jdoc            doc;
    tfs__json_examples   ex = {0};
    tfs__classify_result cr = {0};
    tfs__regress_result  rr = {0};
    enum tfs_code        code;

    tfs__jdoc_init(&doc);
    if ((code = tfs__json_parse(body, len, &doc, st)) != TFS_OK ||
        (code = tfs__json_decode_examples(doc.root, &ex, st)) != TFS_OK)
        goto done;
    tfs_model_spec spec = {r->name, r->version, r->label, ex.signature_name};
    if (r->kind == TFS__ROUTE_CLASSIFY) {
        if ((code = tfs__service_classify(l, &spec, ex.examples, ex.n, &cr, st)) == TFS_OK)
            code = tfs__json_encode_classify(&cr, out, st);
    } else {
        if ((code = tfs__service_regress(l, &spec, ex.examples, ex.n, &rr, st)) == TFS_OK)
            code = tfs__json_encode_regress(&rr, out, st);
    }
done:
    tfs__classify_result_deinit(&cr);
    tfs__regress_result_deinit(&rr);
    tfs__json_examples_deinit(&ex);
    tfs__jdoc_deinit(&doc);   /* last: ex.signature_name is borrowed from it */
    return code;
}

/* ---- entry ---------------------------------------------------------------------------------- */

static enum tfs__method route_method(enum tfs__route_kind k)
{
    switch (k) {
    case TFS__ROUTE_STATUS:   return TFS__METHOD_STATUS;
    case TFS__ROUTE_METADATA: return TFS__METHOD_METADATA;
    case TFS__ROUTE_PREDICT:  return TFS__METHOD_PREDICT;
    case TFS__ROUTE_CLASSIFY: return TFS__METHOD_CLASSIFY;
    case TFS__ROUTE_REGRESS:  return TFS__METHOD_REGRESS;
    case TFS__ROUTE_V2_SERVER:      return TFS__METHOD_SERVER_METADATA;
    case TFS__ROUTE_V2_LIVE:        return TFS__METHOD_SERVER_LIVE;
    case TFS__ROUTE_V2_READY:       return TFS__METHOD_SERVER_READY;
    case TFS__ROUTE_V2_MODEL:       return TFS__METHOD_MODEL_METADATA;
    case TFS__ROUTE_V2_MODEL_READY: return TFS__METHOD_MODEL_READY;
    case TFS__ROUTE_V2_INFER:       return TFS__METHOD_INFER;
    }
    return TFS__METHOD_OTHER;
}

/* A request whose answer is not known when tfs__rest_start returns: a predict handed to a batch
 * queue. The done callback (batch thread) stores the outcome and calls wake. The error status is
 * allocated only when there is one: a 1 KiB message buffer in every call would make each predict
 * a large allocation. */
struct tfs__rest_call {
    tfs__request_record rec;
    predict_call        pc;
    tfs__rest_wake_fn   wake;
    void               *wake_ctx;
    tfs_servable_task  *task;
    enum tfs_code       code;
    tfs_status         *err;     /* the failed run's status; NULL if OK or out of memory */
    tfs_run_times       times;
};

static void predict_done(void *ctx, enum tfs_code code, const tfs_status *st,
                         tfs_tensor **outputs, int n_outputs, const tfs_run_times *t)
{
    tfs__rest_call *c = ctx;
    c->code = code;
    if (code != TFS_OK && (c->err = tfs_malloc(sizeof *c->err)) != NULL) {
        /* The service layer always says why; a status without a reason would be our bug, and
         * the client still learns the code's name. */
        if (st && st->msg[0])
            *c->err = *st;
        else
            TFS_ERR(c->err, code, "predict failed: %s", tfs_code_name(code));
    }
    for (int i = 0; i < n_outputs && c->pc.outputs; i++)
        c->pc.outputs[i] = outputs[i];
    c->times = *t;
    c->rec.runtime_seconds = (double)t->compute_us * 1e-6;
    c->rec.ran = code == TFS_OK || t->compute_us > 0;
    c->wake(c->wake_ctx);   /* last: c may be finished and freed from here on */
}

static void call_free(tfs__rest_call *c)
{
    if (!c)
        return;
    tfs_servable_task_release(c->task);
    predict_call_deinit(&c->pc);
    tfs_free(c->err);
    tfs_free(c);
}

static void finish_record(tfs__request_record *rec, enum tfs_code code, int http_status)
{
    rec->code = code;
    rec->http_status = http_status;
    tfs__request_done(rec);
}

tfs__rest_call *tfs__rest_start(tfs_loader *l, const tfs__rest_request *req,
                                tfs__rest_wake_fn wake, void *wake_ctx, tfs__rest_response *resp)
{
    const char     *method = req->method, *path = req->path;
    tfs_status      st;
    tfs__route      r = {0};
    tfs__rest_call *c = NULL;
    enum tfs_code   code;

    tfs_status_clear(&st);
    tfs__buf_init(&resp->body);
    resp->http_status = 200;
    resp->content_type = "application/json";
    resp->queue_us = resp->compute_us = resp->json_len = -1;
    if (!tfs__route_is_api(path)) {
        resp->http_status = 404;
        resp->content_type = "text/html";
        tfs__buf_puts(&resp->body, not_found_html);
        return NULL;
    }
    tfs__request_record rec;
    tfs__request_begin(&rec, TFS_API_REST, TFS__METHOD_OTHER);
    if ((code = tfs__route_parse(method, path, &r, &st)) != TFS_OK) {
        fail(resp, &st);
        goto done;
    }
    rec.method = route_method(r.kind);
    tfs__request_note(r.name, r.version, NULL);
    switch (r.kind) {
    case TFS__ROUTE_STATUS:
        code = model_status(l, &r, &resp->body, &st);
        break;
    case TFS__ROUTE_METADATA:
        code = model_metadata(l, &r, &resp->body, &st);
        break;
    case TFS__ROUTE_PREDICT:
    case TFS__ROUTE_V2_INFER:
        if (!(c = tfs_calloc(1, sizeof *c))) {
            code = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory starting a predict");
            break;
        }
        code = r.kind == TFS__ROUTE_PREDICT ? predict_begin(l, &r, req, &c->pc, &st)
                                            : infer_begin(l, &r, req, &c->pc, &st);
        if (code != TFS_OK)
            break;
        c->pc.outputs = c->pc.sig->n_outputs <= 4
                            ? c->pc.outputs_inline
                            : tfs_calloc((size_t)c->pc.sig->n_outputs, sizeof *c->pc.outputs);
        if (!c->pc.outputs) {
            code = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory running a predict");
            break;
        }
        /* From here the record travels with the call; the notes so far are in it. */
        c->rec = rec;
        tfs__request_detach(&rec);
        c->wake = wake;
        c->wake_ctx = wake_ctx;
        tfs_service_run_async(c->pc.servable, c->pc.sig, c->pc.inputs, c->pc.n_inputs,
                              req->deadline_ns, predict_done, c, &c->task, &st);
        tfs__route_deinit(&r);
        return c;
    case TFS__ROUTE_CLASSIFY:
    case TFS__ROUTE_REGRESS:
        code = classify_regress(l, &r, req->body, req->body_len, &resp->body, &st);
        break;
    case TFS__ROUTE_V2_SERVER:
    case TFS__ROUTE_V2_LIVE:
    case TFS__ROUTE_V2_READY:
    case TFS__ROUTE_V2_MODEL:
    case TFS__ROUTE_V2_MODEL_READY:
        code = tfs__v2_rest_get(l, req->health, &r, resp, &st);
        break;
    }
    call_free(c);
    if (code != TFS_OK)
        fail(resp, &st);
    tfs__route_deinit(&r);
done:
    finish_record(&rec, code, resp->http_status);
    return NULL;
}

void tfs__rest_call_finish(tfs__rest_call *c, tfs__rest_response *resp)
{
    tfs_status    st;
    enum tfs_code code = c->code;

    if (code != TFS_OK) {
        if (c->err)
            st = *c->err;
        else
            TFS_ERR(&st, code, "out of memory keeping the status of a failed predict");
    }
    tfs__buf_init(&resp->body);
    resp->http_status = 200;
    resp->content_type = "application/json";
    resp->queue_us = c->times.queue_us;
    resp->compute_us = c->times.compute_us;
    resp->json_len = -1;
    if (code == TFS_OK)
        code = predict_finish(&c->pc, resp, &st);
    if (code != TFS_OK)
        fail(resp, &st);
    finish_record(&c->rec, code, resp->http_status);
    call_free(c);
}

bool tfs__rest_call_cancel(tfs__rest_call *c)
{
    return tfs_servable_task_cancel(c->task);
}

/* ---- synchronous form ----------------------------------------------------------------------- */

typedef struct sync_wake {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    bool            woken;
} sync_wake;

static void wake_sync(void *ctx)
{
    sync_wake *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->woken = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void tfs__rest_process(tfs_loader *l, const char *method, const char *path, const char *body,
                       size_t body_len, tfs__rest_response *resp)
{
    sync_wake w = {.woken = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    tfs__rest_request req = {.method = method, .path = path, .body = body ? body : "",
                             .body_len = body_len, .json_len = -1};
    tfs__rest_call   *c = tfs__rest_start(l, &req, wake_sync, &w, resp);
    if (c) {
        pthread_mutex_lock(&w.mu);
        while (!w.woken)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        tfs__buf_deinit(&resp->body);
        tfs__rest_call_finish(c, resp);
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}
