/* The gRPC methods of tensorflow_model_server as functions from request bytes to response bytes:
 * decode with protobuf-c, answer through the protocol-neutral service layer (the same
 * tfs_service_* calls REST makes, so the two cannot disagree), encode. The checks that are gRPC's
 * own (a missing ModelSpec, output_filter, metadata_field) follow TF Serving's predict_util.cc,
 * get_model_metadata_impl.cc and get_model_status_impl.cc, with their texts.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "proto/unpack.h"
#include "runtime/alloc.h"
#include "server/config-impl.h"
#include "server/grpc-impl.h"
#include "server/metrics-impl.h"
#include "tensorflow_serving/apis/get_model_metadata.pb-c.h"
#include "tensorflow_serving/apis/model_management.pb-c.h"
#include "tensorflow_serving/apis/get_model_status.pb-c.h"
#include "tensorflow_serving/apis/predict.pb-c.h"

#define LOG_MODULE "grpc"
#define SIGNATURE_DEF_MAP_URL "type.googleapis.com/tensorflow.serving.SignatureDefMap"

/* protobuf-c's decoder allocates through the project allocator like everything else. */
static void *pb_alloc(void *data, size_t n)
{
    (void)data;
    return tfs_malloc(n ? n : 1);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    tfs_free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

void tfs__grpc_free_unpacked(void *m)
{
    if (m)
        protobuf_c_message_free_unpacked(m, &pb_allocator);
}

enum tfs_code tfs__grpc_unpack_message(const ProtobufCMessageDescriptor *d, const uint8_t *in,
                                       size_t n, ProtobufCMessage **out, tfs_status *st)
{
    return tfs_proto_unpack_bounded(d, &pb_allocator, in, n, out, st);
}

ProtobufCMessage *tfs__grpc_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *in,
                                  size_t n, tfs_status *st)
{
    ProtobufCMessage *m;
    tfs_status        why;
    enum tfs_code     code = tfs__grpc_unpack_message(d, in, n, &m, &why);
    if (code == TFS_INVALID_ARGUMENT)   /* too deep: a peer should learn why */
        TFS_ERR(st, TFS_INVALID_ARGUMENT, "Could not parse the request as %s (%zu bytes): %s",
                d->name, n, why.msg);
    else if (code != TFS_OK)
        TFS_ERR(st, TFS_INVALID_ARGUMENT, "Could not parse the request as %s (%zu bytes)",
                d->name, n);
    return m;
}

enum tfs_code tfs__grpc_pack(const ProtobufCMessage *m, uint8_t **out, size_t *out_len,
                            tfs_status *st)
{
    size_t   n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = tfs_malloc(n ? n : 1);
    if (!b)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory packing a %s of %zu bytes",
                       m->descriptor->name, n);
    protobuf_c_message_pack(m, b);
    *out = b;
    *out_len = n;
    tfs_status_clear(st);
    return TFS_OK;
}

/* A request's ModelSpec as the service layer takes it (strings borrowed from ms). */
enum tfs_code tfs__grpc_read_spec(const Tensorflow__Serving__ModelSpec *ms, tfs_model_spec *spec,
                                 tfs_status *st)
{
    if (!ms)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing ModelSpec");
    spec->name = ms->name;
    spec->version = -1;
    spec->label = NULL;
    spec->signature_name = ms->signature_name;
    tfs__request_note(ms->name, -1, ms->signature_name);
    if (ms->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION) {
        spec->version = ms->version ? ms->version->value : 0;
        /* -1 means "latest" to the loader; to TF Serving it is a version that does not exist. */
        if (spec->version < 0 && spec->name && *spec->name)
            return TFS_ERR(st, TFS_NOT_FOUND, "Servable not found for request: Specific(%s, %lld)",
                           spec->name, (long long)spec->version);
    } else if (ms->version_choice_case ==
                   TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL &&
               ms->version_label && *ms->version_label) {
        spec->label = ms->version_label;
    }
    return TFS_OK;
}

/* The model_spec a response echoes: name, served version and (when given) signature name. */
Tensorflow__Serving__ModelSpec *tfs__grpc_echo_spec(tfs__arena *a, const tfs_servable *s,
                                                 const char *signature_name)
{
    Tensorflow__Serving__ModelSpec *ms = tfs__arena_alloc(a, sizeof *ms);
    Google__Protobuf__Int64Value   *v = tfs__arena_alloc(a, sizeof *v);
    if (!ms || !v)
        return NULL;
    tensorflow__serving__model_spec__init(ms);
    google__protobuf__int64_value__init(v);
    v->value = tfs_servable_version(s);
    ms->name = tfs__arena_strdup(a, tfs_servable_name(s));
    if (signature_name && !(ms->signature_name = tfs__arena_strdup(a, signature_name)))
        return NULL;
    ms->version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
    ms->version = v;
    return ms->name ? ms : NULL;
}

/* ---- output selection and Predict's inputs ------------------------------------------------- */

/* The outputs to return, in response order: output_filter (checked as TF Serving does) or all.
 * The aliases are looked up in a hash map, so a filter of any length costs its length. */
static enum tfs_code select_outputs(const tfs_signature *sig, char *const *filter,
                                    size_t n_filter, int *idx, int *n_idx, tfs_status *st)
{
    tfs__name_map outs, seen;
    enum tfs_code code;

    *n_idx = 0;
    if (n_filter == 0) {
        for (int i = 0; i < sig->n_outputs; i++)
            idx[(*n_idx)++] = i;
        return TFS_OK;
    }
    memset(&seen, 0, sizeof seen);
    if ((code = tfs__name_map_init(&outs, (size_t)sig->n_outputs, st)) != TFS_OK ||
        (code = tfs__name_map_init(&seen, (size_t)sig->n_outputs, st)) != TFS_OK)
        goto done;
    for (int i = 0; i < sig->n_outputs; i++)
        tfs__name_map_put(&outs, sig->outputs[i].alias, i);
    for (size_t f = 0; f < n_filter; f++) {
        int i = tfs__name_map_get(&outs, filter[f]);
        if (i < 0) {
            tfs__buf names;
            tfs__buf_init(&names);
            for (int k = 0; k < sig->n_outputs; k++) {
                if (k)
                    tfs__buf_putc(&names, ',');
                tfs__buf_puts(&names, sig->outputs[k].alias);
            }
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "output tensor alias not found in signature: "
                           "%s Outputs expected to be in the set {%s}.", filter[f],
                           names.data ? names.data : "");
            tfs__buf_deinit(&names);
            goto done;
        }
        /* seen holds at most every output once: a second alias for one stops here. */
        if (tfs__name_map_put(&seen, sig->outputs[i].alias, i) != -1) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "duplicate output tensor alias: %s",
                           filter[f]);
            goto done;
        }
        idx[(*n_idx)++] = i;
    }
    code = TFS_OK;
done:
    tfs__name_map_deinit(&outs);
    tfs__name_map_deinit(&seen);
    return code;
}

enum tfs_code tfs__grpc_check_output_filter(const tfs_signature *sig, char *const *filter,
                                           size_t n_filter, tfs_status *st)
{
    int *idx = tfs_calloc((size_t)(sig->n_outputs > 0 ? sig->n_outputs : 1), sizeof *idx);
    int  n_idx = 0;
    if (!idx)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory checking output_filter");
    enum tfs_code code = select_outputs(sig, filter, n_filter, idx, &n_idx, st);
    tfs_free(idx);
    return code;
}

enum tfs_code tfs__grpc_predict_inputs(const Tensorflow__Serving__PredictRequest *req,
                                       const tfs_signature *sig, tfs_named_tensor **inputs,
                                       int *n_inputs, tfs_status *st)
{
    tfs_named_tensor *in = NULL;
    const char      **names = NULL;
    bool             *keep = NULL;
    tfs__name_map     seen;
    int               n = 0;
    size_t            n_req = req->n_inputs;
    enum tfs_code     code;

    *inputs = NULL;
    *n_inputs = 0;
    memset(&seen, 0, sizeof seen);
    if (n_req > INT_MAX) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%zu inputs is too many", n_req);
        goto fail;
    }
    if (!(in = tfs_calloc(n_req > 0 ? n_req : 1, sizeof *in)) ||
        !(names = tfs_calloc(n_req > 0 ? n_req : 1, sizeof *names)) ||
        !(keep = tfs_calloc(n_req > 0 ? n_req : 1, sizeof *keep))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding a PredictRequest");
        goto fail;
    }
    if ((code = tfs__name_map_init(&seen, n_req, st)) != TFS_OK)
        goto fail;
    /* A map key sent twice arrives twice: the last one wins, as in protobuf's map parsing, so
     * the keys are taken from the back. */
    for (size_t i = n_req; i-- > 0;)
        keep[i] = tfs__name_map_put(&seen, req->inputs[i]->key, 0) == -1;
    for (size_t i = 0; i < n_req; i++)
        if (keep[i])
            names[n++] = req->inputs[i]->key;
    /* Every name against the signature before any tensor is decoded: a request is refused for
     * its names at the cost of reading them. */
    if (sig && (code = tfs__service_check_input_names(sig, names, n, st)) != TFS_OK)
        goto fail;
    tfs__name_map_deinit(&seen);
    if (sig) {
        /* From here `seen` maps the signature's aliases to their inputs, for the dtype check. */
        if ((code = tfs__name_map_init(&seen, (size_t)sig->n_inputs, st)) != TFS_OK)
            goto fail;
        for (int k = 0; k < sig->n_inputs; k++)
            tfs__name_map_put(&seen, sig->inputs[k].alias, k);
    }
    n = 0;
    size_t budget = tfs_runtime_max_tensor_bytes();   /* for all the request's tensors */
    for (size_t i = 0; i < n_req; i++) {
        const Tensorflow__Serving__PredictRequest__InputsEntry *e = req->inputs[i];
        if (!keep[i])
            continue;
        in[n].name = e->key;
        if ((code = tfs__grpc_tensor_from_proto(e->value, e->key, &budget, &in[n].tensor,
                                                 st)) != TFS_OK)
            goto fail;
        n++;
        /* The graph would refuse another dtype too, but in terms of its nodes ("input 1 of
         * 'Mul'"); the signature names the input. A signature without a dtype is not checked. */
        int k = sig ? tfs__name_map_get(&seen, e->key) : -1;
        enum tfs_dtype want = k >= 0 ? tfs_dtype_base(sig->inputs[k].dtype) : TFS_DTYPE_INVALID;
        if (want != TFS_DTYPE_INVALID && in[n - 1].tensor->dtype != want) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': expected dtype %s, got %s",
                           e->key, tfs_dtype_name(want), tfs_dtype_name(in[n - 1].tensor->dtype));
            goto fail;
        }
    }
    tfs__name_map_deinit(&seen);
    tfs_free(names);
    tfs_free(keep);
    *inputs = in;
    *n_inputs = n;
    return TFS_OK;
fail:
    tfs__name_map_deinit(&seen);
    tfs_free(names);
    tfs_free(keep);
    tfs__named_tensors_free(in, n);
    return code;
}

/* ---- a model run on behalf of a call: Predict and ModelInfer ------------------------------- */

tfs__grpc_run *tfs__grpc_run_new(tfs__grpc_encode_fn encode, tfs__grpc_post_fn post,
                                 void *post_ctx, tfs__grpc_predict_cb cb, void *cb_ctx)
{
    tfs__grpc_run *r = tfs_calloc(1, sizeof *r);
    if (r) {
        r->encode = encode;
        r->post = post;
        r->post_ctx = post_ctx;
        r->submitter = pthread_self();
        r->cb = cb;
        r->cb_ctx = cb_ctx;
    }
    return r;
}

static void run_free(tfs__grpc_run *r)
{
    if (!r)
        return;
    tfs__named_tensors_free(r->inputs, r->n_in);
    for (int i = 0; i < r->n_outs; i++)
        tfs_tensor_unref(r->outs[i]);
    tfs_free(r->outs);
    tfs_free(r->idx);
    tfs_servable_release(r->s);
    tfs__grpc_free_unpacked(r->req);
    tfs_free(r);
}

void tfs__grpc_run_fail(tfs__grpc_run *r, enum tfs_code code, const tfs_status *st)
{
    tfs__grpc_predict_cb cb = r->cb;
    void                *cb_ctx = r->cb_ctx;
    tfs_run_times        t = {0};
    tfs_status           est = st ? *st : (tfs_status){.code = code};
    run_free(r);
    cb(cb_ctx, code, &est, NULL, 0, &t);
}

enum tfs_code tfs__grpc_run_outputs(tfs__grpc_run *r, char *const *names, size_t n_names,
                                    tfs_status *st)
{
    const tfs_signature *sig = r->sig;
    size_t               n_sig = (size_t)(sig->n_outputs > 0 ? sig->n_outputs : 1);
    r->idx = tfs_calloc(n_sig, sizeof *r->idx);
    r->outs = tfs_calloc(n_sig, sizeof *r->outs);
    if (!r->idx || !r->outs)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory selecting the outputs");
    return select_outputs(sig, names, n_names, r->idx, &r->n_idx, st);
}

/* Encodes the outcome, drops everything the request held, then hands the bytes on. */
static void run_finish(tfs__grpc_job *j)
{
    tfs__grpc_run       *r = (tfs__grpc_run *)j;
    uint8_t             *out = NULL;
    size_t               out_len = 0;
    tfs_status           est = r->st;
    tfs_run_times        t = r->times;
    tfs__grpc_predict_cb cb = r->cb;
    void                *cb_ctx = r->cb_ctx;
    enum tfs_code        code = r->code;

    if (code == TFS_OK)
        code = r->encode(r, r->outs, &out, &out_len, &est);
    run_free(r);
    cb(cb_ctx, code, &est, out, out_len, &t);
}

/* tfs_servable_done_fn: keeps the outcome. On a batch thread that is all: the encoding and the
 * send are the front end's work, posted to its thread, so that the batch thread starts its next
 * batch at once (bench/README.md, "gRPC answers off the batch threads"). On the submitting thread
 * (an unbatched run, or a task refused at submit) the answer goes out from here. */
static void run_done(void *ctx, enum tfs_code code, const tfs_status *st, tfs_tensor **outputs,
                     int n_outputs, const tfs_run_times *t)
{
    tfs__grpc_run *r = ctx;

    r->code = code;
    if (code != TFS_OK)
        r->st = st ? *st : (tfs_status){.code = code};
    else
        tfs_status_clear(&r->st);
    for (int i = 0; i < n_outputs; i++)   /* n_outputs is the signature's: outs has room */
        r->outs[i] = outputs[i];
    r->n_outs = n_outputs;
    r->times = *t;
    r->job.run = run_finish;
    if (r->post && !pthread_equal(pthread_self(), r->submitter))
        r->post(r->post_ctx, &r->job);
    else
        run_finish(&r->job);
}

void tfs__grpc_run_start(tfs__grpc_run *r, int64_t deadline_ns)
{
    tfs_status st;
    /* run_done runs exactly once from here, maybe before this returns, with the reason of a
     * failure in its status (the one passed here when the failure is found before queueing). */
    tfs_service_run_async(r->s, r->sig, r->inputs, r->n_in, deadline_ns, run_done, r, NULL, &st);
}

/* ---- Predict -------------------------------------------------------------------------------- */

static enum tfs_code encode_predict(const tfs__grpc_run *p, tfs_tensor **outputs, uint8_t **out,
                                    size_t *out_len, tfs_status *st)
{
    tfs__arena    a;
    enum tfs_code code;
    tfs__arena_init(&a);
    Tensorflow__Serving__PredictResponse resp = TENSORFLOW__SERVING__PREDICT_RESPONSE__INIT;
    resp.model_spec = tfs__grpc_echo_spec(&a, p->s, p->sig->key);
    resp.outputs = tfs__arena_alloc(&a, (size_t)(p->n_idx > 0 ? p->n_idx : 1) *
                                            sizeof *resp.outputs);
    if (!resp.model_spec || !resp.outputs)
        goto oom;
    for (int k = 0; k < p->n_idx; k++) {
        Tensorflow__Serving__PredictResponse__OutputsEntry *e = tfs__arena_alloc(&a, sizeof *e);
        Tensorflow__TensorProto *tp = tfs__arena_alloc(&a, sizeof *tp);
        if (!e || !tp)
            goto oom;
        tensorflow__serving__predict_response__outputs_entry__init(e);
        tensorflow__tensor_proto__init(tp);
        e->key = p->sig->outputs[p->idx[k]].alias;
        e->value = tp;
        if ((code = tfs__grpc_tensor_to_proto(outputs[p->idx[k]], &a, tp, st)) != TFS_OK)
            goto done;
        resp.outputs[resp.n_outputs++] = e;
    }
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a PredictResponse");
done:
    tfs__arena_deinit(&a);
    return code;
}

void tfs__grpc_predict_async(tfs_loader *l, const uint8_t *in, size_t n, int64_t deadline_ns,
                             tfs__grpc_post_fn post, void *post_ctx, tfs__grpc_predict_cb cb,
                             void *cb_ctx)
{
    tfs__grpc_run *p = tfs__grpc_run_new(encode_predict, post, post_ctx, cb, cb_ctx);
    tfs_model_spec spec;
    tfs_status     st;
    enum tfs_code  code;

    if (!p) {
        tfs_run_times t = {0};
        code = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding a PredictRequest");
        cb(cb_ctx, code, &st, NULL, 0, &t);
        return;
    }
    p->req = tfs__grpc_unpack(&tensorflow__serving__predict_request__descriptor, in, n, &st);
    const Tensorflow__Serving__PredictRequest *req =
        (const Tensorflow__Serving__PredictRequest *)p->req;
    if (!req) {
        code = st.code;
        goto fail;
    }
    if ((code = tfs__grpc_read_spec(req->model_spec, &spec, &st)) != TFS_OK ||
        (code = tfs_service_acquire(l, &spec, &p->s, &st)) != TFS_OK ||
        (code = tfs_service_signature(p->s, spec.signature_name, TFS_API_GRPC, &p->sig, &st)) !=
            TFS_OK ||
        (code = tfs__grpc_run_outputs(p, req->output_filter, req->n_output_filter, &st)) !=
            TFS_OK ||
        (code = tfs__grpc_predict_inputs(req, p->sig, &p->inputs, &p->n_in, &st)) != TFS_OK)
        goto fail;
    tfs__grpc_run_start(p, deadline_ns);
    return;
fail:
    tfs__grpc_run_fail(p, code, &st);
}

/* The synchronous form (bytes in, bytes out) waits on this thread. */
typedef struct sync_predict {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    bool            done;
    enum tfs_code   code;
    tfs_status      st;
    uint8_t        *out;
    size_t          out_len;
} sync_predict;

static void sync_cb(void *ctx, enum tfs_code code, const tfs_status *st, uint8_t *out,
                    size_t out_len, const tfs_run_times *t)
{
    sync_predict *w = ctx;
    (void)t;
    pthread_mutex_lock(&w->mu);
    w->code = code;
    w->st = *st;
    w->out = out;
    w->out_len = out_len;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

enum tfs_code tfs__grpc_predict(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                size_t *out_len, tfs_status *st)
{
    sync_predict w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    tfs__grpc_predict_async(l, in, n, 0, NULL, NULL, sync_cb, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (st)
        *st = w.st;
    *out = w.out;
    *out_len = w.out_len;
    return w.code;
}

/* ---- GetModelMetadata ----------------------------------------------------------------------- */

static Tensorflow__TensorShapeProto *shape_proto(tfs__arena *a, const tfs_shape *s)
{
    Tensorflow__TensorShapeProto *p = tfs__arena_alloc(a, sizeof *p);
    int                           rank = s->rank > 0 ? s->rank : 0;
    if (!p)
        return NULL;
    tensorflow__tensor_shape_proto__init(p);
    if (s->rank < 0) {
        p->unknown_rank = 1;
        return p;
    }
    if (!(p->dim = tfs__arena_alloc(a, (size_t)(rank > 0 ? rank : 1) * sizeof *p->dim)))
        return NULL;
    for (int i = 0; i < rank; i++) {
        if (!(p->dim[i] = tfs__arena_alloc(a, sizeof *p->dim[i])))
            return NULL;
        tensorflow__tensor_shape_proto__dim__init(p->dim[i]);
        p->dim[i]->size = s->dims[i];
    }
    p->n_dim = (size_t)rank;
    return p;
}

static Tensorflow__TensorInfo *info_proto(tfs__arena *a, const tfs_tensor_info *ti)
{
    Tensorflow__TensorInfo *p = tfs__arena_alloc(a, sizeof *p);
    if (!p)
        return NULL;
    tensorflow__tensor_info__init(p);
    if (ti->tensor_name) {
        p->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
        p->name = ti->tensor_name;
    }
    p->dtype = (Tensorflow__DataType)ti->dtype;
    p->tensor_shape = shape_proto(a, &ti->shape);
    return p->tensor_shape ? p : NULL;
}

/* Rebuilds a SignatureDef from the loaded signature (inputs, outputs, method, defaults). */
static Tensorflow__SignatureDef *signature_proto(tfs__arena *a, const tfs_signature *sig,
                                                 tfs_status *st)
{
    Tensorflow__SignatureDef *p = tfs__arena_alloc(a, sizeof *p);
    if (!p)
        return NULL;
    tensorflow__signature_def__init(p);
    p->method_name = sig->method_name ? sig->method_name : "";
    p->inputs = tfs__arena_alloc(a, (size_t)(sig->n_inputs + 1) * sizeof *p->inputs);
    p->outputs = tfs__arena_alloc(a, (size_t)(sig->n_outputs + 1) * sizeof *p->outputs);
    p->defaults = tfs__arena_alloc(a, (size_t)(sig->n_defaults + 1) * sizeof *p->defaults);
    if (!p->inputs || !p->outputs || !p->defaults)
        return NULL;
    for (int i = 0; i < sig->n_inputs; i++) {
        Tensorflow__SignatureDef__InputsEntry *e = tfs__arena_alloc(a, sizeof *e);
        if (!e)
            return NULL;
        tensorflow__signature_def__inputs_entry__init(e);
        e->key = sig->inputs[i].alias;
        if (!(e->value = info_proto(a, &sig->inputs[i])))
            return NULL;
        p->inputs[p->n_inputs++] = e;
    }
    for (int i = 0; i < sig->n_outputs; i++) {
        Tensorflow__SignatureDef__OutputsEntry *e = tfs__arena_alloc(a, sizeof *e);
        if (!e)
            return NULL;
        tensorflow__signature_def__outputs_entry__init(e);
        e->key = sig->outputs[i].alias;
        if (!(e->value = info_proto(a, &sig->outputs[i])))
            return NULL;
        p->outputs[p->n_outputs++] = e;
    }
    for (int i = 0; i < sig->n_defaults; i++) {
        Tensorflow__SignatureDef__DefaultsEntry *e = tfs__arena_alloc(a, sizeof *e);
        Tensorflow__TensorProto *tp = tfs__arena_alloc(a, sizeof *tp);
        if (!e || !tp)
            return NULL;
        tensorflow__signature_def__defaults_entry__init(e);
        tensorflow__tensor_proto__init(tp);
        e->key = sig->default_names[i];
        e->value = tp;
        /* A default the writer cannot express is left out rather than failing the call. */
        if (tfs__grpc_tensor_to_proto(sig->defaults[i], a, tp, st) != TFS_OK)
            continue;
        p->defaults[p->n_defaults++] = e;
    }
    return p;
}

enum tfs_code tfs__grpc_metadata(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                 size_t *out_len, tfs_status *st)
{
    Tensorflow__Serving__GetModelMetadataRequest *req = NULL;
    tfs_servable  *s = NULL;
    uint8_t       *map_bytes = NULL;
    size_t         map_len = 0;
    tfs_model_spec spec;
    tfs__arena     a;
    enum tfs_code  code;

    tfs__arena_init(&a);
    req = (Tensorflow__Serving__GetModelMetadataRequest *)tfs__grpc_unpack(
        &tensorflow__serving__get_model_metadata_request__descriptor, in, n, st);
    if (!req) {
        code = st ? st->code : TFS_INVALID_ARGUMENT;
        goto fail;
    }
    if ((code = tfs__grpc_read_spec(req->model_spec, &spec, st)) != TFS_OK)
        goto fail;
    if (req->n_metadata_field == 0) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "GetModelMetadataRequest must specify at least one metadata_field");
        goto fail;
    }
    for (size_t i = 0; i < req->n_metadata_field; i++) {
        if (strcmp(req->metadata_field[i], "signature_def") != 0) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Metadata field %s is not supported",
                           req->metadata_field[i]);
            goto fail;
        }
    }
    if ((code = tfs_service_acquire(l, &spec, &s, st)) != TFS_OK)
        goto fail;

    const tfs_savedmodel *m = tfs_servable_model(s);
    int                   n_sigs = tfs_savedmodel_signature_count(m);
    Tensorflow__Serving__SignatureDefMap map = TENSORFLOW__SERVING__SIGNATURE_DEF_MAP__INIT;
    map.signature_def = tfs__arena_alloc(&a, (size_t)(n_sigs + 1) * sizeof *map.signature_def);
    if (!map.signature_def)
        goto oom;
    for (int i = 0; i < n_sigs; i++) {
        const tfs_signature *sig = tfs_savedmodel_signature_at(m, i);
        Tensorflow__Serving__SignatureDefMap__SignatureDefEntry *e =
            tfs__arena_alloc(&a, sizeof *e);
        if (!e)
            goto oom;
        tensorflow__serving__signature_def_map__signature_def_entry__init(e);
        e->key = sig->key;
        if (!(e->value = signature_proto(&a, sig, st)))
            goto oom;
        map.signature_def[map.n_signature_def++] = e;
    }
    if ((code = tfs__grpc_pack(&map.base, &map_bytes, &map_len, st)) != TFS_OK)
        goto fail;

    Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
    any.type_url = SIGNATURE_DEF_MAP_URL;
    any.value.data = map_bytes;
    any.value.len = map_len;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry entry =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__METADATA_ENTRY__INIT;
    entry.key = "signature_def";
    entry.value = &any;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry *entries[1] = {&entry};
    Tensorflow__Serving__GetModelMetadataResponse resp =
        TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__INIT;
    if (!(resp.model_spec = tfs__grpc_echo_spec(&a, s, NULL)))
        goto oom;
    resp.n_metadata = 1;
    resp.metadata = entries;
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a GetModelMetadataResponse");
fail:
done:
    tfs_free(map_bytes);
    tfs__arena_deinit(&a);
    tfs_servable_release(s);
    tfs__grpc_free_unpacked(req);
    return code;
}

/* ---- GetModelStatus ------------------------------------------------------------------------- */

enum tfs_code tfs__grpc_model_status(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                     size_t *out_len, tfs_status *st)
{
    Tensorflow__Serving__GetModelStatusRequest *req = NULL;
    tfs_version_status *vs = NULL;
    int                 n_vs = 0;
    tfs_model_spec      spec;
    tfs__arena          a;
    enum tfs_code       code;

    tfs__arena_init(&a);
    req = (Tensorflow__Serving__GetModelStatusRequest *)tfs__grpc_unpack(
        &tensorflow__serving__get_model_status_request__descriptor, in, n, st);
    if (!req) {
        code = st ? st->code : TFS_INVALID_ARGUMENT;
        goto fail;
    }
    if ((code = tfs__grpc_read_spec(req->model_spec, &spec, st)) != TFS_OK)
        goto fail;
    /* Labels are ignored, as in TF Serving: all versions, or the one version asked for. */
    if ((code = tfs_loader_model_status(l, spec.name, spec.version, &vs, &n_vs, st)) != TFS_OK)
        goto fail;

    Tensorflow__Serving__GetModelStatusResponse resp =
        TENSORFLOW__SERVING__GET_MODEL_STATUS_RESPONSE__INIT;
    resp.model_version_status =
        tfs__arena_alloc(&a, (size_t)(n_vs + 1) * sizeof *resp.model_version_status);
    if (!resp.model_version_status)
        goto oom;
    for (int i = 0; i < n_vs; i++) {
        Tensorflow__Serving__ModelVersionStatus *v = tfs__arena_alloc(&a, sizeof *v);
        Tensorflow__Serving__StatusProto        *sp = tfs__arena_alloc(&a, sizeof *sp);
        if (!v || !sp)
            goto oom;
        tensorflow__serving__model_version_status__init(v);
        tensorflow__serving__status_proto__init(sp);
        v->version = vs[i].version;
        v->state = (Tensorflow__Serving__ModelVersionStatus__State)vs[i].state;
        sp->error_code = (Tensorflow__Error__Code)vs[i].status.code;
        sp->error_message = vs[i].status.code == TFS_OK ? "" : vs[i].status.msg;
        v->status = sp;
        resp.model_version_status[resp.n_model_version_status++] = v;
    }
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a GetModelStatusResponse");
fail:
done:
    tfs_free(vs);
    tfs__arena_deinit(&a);
    tfs__grpc_free_unpacked(req);
    return code;
}

/* ---- ModelService/HandleReloadConfigRequest --------------------------------------------------- */

/* The loader's duplicate-name check with its text, first and through a hash map: a request listing
 * one name thousands of times is refused at the cost of reading it. (Names the loader refuses for
 * other reasons, such as an empty one, are left to it.) */
static enum tfs_code check_model_names(const tfs__model_list *list, tfs_status *st)
{
    tfs__name_map names;
    enum tfs_code code = tfs__name_map_init(&names, (size_t)list->n_models, st);
    for (int i = 0; code == TFS_OK && i < list->n_models; i++) {
        const char *name = list->models[i].name;
        if (*name && tfs__name_map_put(&names, name, i) != -1)
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Illegal to list model %s multiple times in config list", name);
    }
    tfs__name_map_deinit(&names);
    return code;
}

/* TF Serving's model_service_impl.cc: only a model_config_list is accepted; the list replaces the
 * served one (tfs_loader_reload); the status goes both into the gRPC status and, on success, the
 * response's StatusProto. */
enum tfs_code tfs__grpc_reload_config(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                      size_t *out_len, tfs_status *st)
{
    tfs__model_list *list = NULL;
    enum tfs_code    code;
    *out = NULL;
    *out_len = 0;
    Tensorflow__Serving__ReloadConfigRequest *req = (Tensorflow__Serving__ReloadConfigRequest *)
        tfs__grpc_unpack(&tensorflow__serving__reload_config_request__descriptor, in, n, st);
    if (!req)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    if (!req->config || req->config->config_case !=
                            TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "ServerModelConfig type not supported by "
                       "HandleReloadConfigRequest. Only ModelConfigList is currently supported");
        goto fail;
    }
    if ((code = tfs__config_convert(req->config, "ReloadConfigRequest", &list, st)) != TFS_OK ||
        (code = check_model_names(list, st)) != TFS_OK)
        goto fail;
    for (int i = 0; i < list->n_models; i++)
        TFS_LOG_INFO(LOG_MODULE, "ReloadConfigRequest config entry %d: name %s, base_path %s, "
                     "platform %s", i, list->models[i].name, list->models[i].base_path,
                     list->models[i].platform);
    if ((code = tfs_loader_reload(l, list->models, list->n_models, st)) != TFS_OK)
        goto fail;

    Tensorflow__Serving__ReloadConfigResponse resp =
        TENSORFLOW__SERVING__RELOAD_CONFIG_RESPONSE__INIT;
    Tensorflow__Serving__StatusProto status = TENSORFLOW__SERVING__STATUS_PROTO__INIT;
    resp.status = &status;   /* error_code OK, error_message "" */
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
fail:
    TFS_LOG_ERROR(LOG_MODULE, "ReloadConfig failed: %s", st ? st->msg : "");
done:
    tfs__config_free(list);
    tfs__grpc_free_unpacked(req);
    return code;
}
