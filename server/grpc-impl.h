/* gRPC front end internals shared by server/grpc*.c: an allocation arena for response messages,
 * TensorProto <-> tfs_tensor, and the method handlers (one per RPC, bytes in, bytes out), which
 * know nothing about the completion queue.
 */
#ifndef TFS_SERVER_GRPC_IMPL_H
#define TFS_SERVER_GRPC_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "server/server-impl.h"
#include "kserve/grpc_predict_v2.pb-c.h"
#include "tensorflow/core/framework/tensor.pb-c.h"
#include "tensorflow_serving/apis/inference.pb-c.h"
#include "tensorflow_serving/apis/input.pb-c.h"
#include "tensorflow_serving/apis/model.pb-c.h"
#include "tensorflow_serving/apis/predict.pb-c.h"

/* ---- arena (grpc-tensor.c) ------------------------------------------------------------------ */

/* Response messages are built from many small pieces; an arena frees them all at once. Out of
 * memory is sticky (a->oom): allocations then return NULL and the caller checks once. */
typedef struct tfs__arena_blk tfs__arena_blk;
typedef struct tfs__arena {
    tfs__arena_blk *head;
    bool            oom;
} tfs__arena;

void  tfs__arena_init(tfs__arena *a);
void  tfs__arena_deinit(tfs__arena *a);                 /* frees everything; NULL-safe */
void *tfs__arena_alloc(tfs__arena *a, size_t n);         /* zeroed; NULL on OOM */
char *tfs__arena_strdup(tfs__arena *a, const char *s);

/* ---- TensorProto <-> tfs_tensor (grpc-tensor.c) --------------------------------------------- */

/* Decodes a TensorProto as TensorFlow's Tensor::FromProto does: a non-empty tensor_content holds
 * every element (its size must equal the shape's); otherwise the dtype's typed field, the last
 * value repeated to fill the shape (none: zeros). INVALID_ARGUMENT "tensor parsing error: NAME
 * (why)" for bad dtypes, shapes, sizes, half_val. *budget (NULL: none) is what the request's
 * tensors may still take, strings counted with their bytes: a tensor costing more is refused
 * before it is allocated, else its cost is taken off. Caller owns *out. */
enum tfs_code tfs__grpc_tensor_from_proto(const Tensorflow__TensorProto *p, const char *name,
                                     size_t *budget, tfs_tensor **out, tfs_status *st);
/* Fills *p (already __init'ed) from t with the typed fields (AsProtoField). Arrays may point into
 * t, which must outlive *p; the rest comes from the arena. */
enum tfs_code tfs__grpc_tensor_to_proto(const tfs_tensor *t, tfs__arena *a, Tensorflow__TensorProto *p,
                                   tfs_status *st);

/* ---- message helpers (grpc-api.c) ----------------------------------------------------------- */

/* Decodes a request with the project allocator; NULL and INVALID_ARGUMENT "Could not parse the
 * request as NAME" for bytes that are not that message, with ": message nests deeper than 100
 * levels (at byte N)" when it nests too deep to unpack (proto/unpack.h). Free with
 * tfs__grpc_free_unpacked. */
ProtobufCMessage *tfs__grpc_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *in,
                                  size_t n, tfs_status *st);
/* The same decoding for messages that are not requests (warmup records): *out and
 * tfs_proto_unpack_bounded's codes and messages, which callers put in their own words. */
enum tfs_code tfs__grpc_unpack_message(const ProtobufCMessageDescriptor *d, const uint8_t *in,
                                       size_t n, ProtobufCMessage **out, tfs_status *st);
void tfs__grpc_free_unpacked(void *m);   /* NULL-safe */
/* Packs m into a tfs_malloc'ed buffer (*out, *out_len). */
enum tfs_code tfs__grpc_pack(const ProtobufCMessage *m, uint8_t **out, size_t *out_len,
                            tfs_status *st);
/* A request's ModelSpec as the service layer takes it (strings borrowed from ms):
 * INVALID_ARGUMENT "Missing ModelSpec" when absent. */
enum tfs_code tfs__grpc_read_spec(const Tensorflow__Serving__ModelSpec *ms, tfs_model_spec *spec,
                                 tfs_status *st);
/* The model_spec a response echoes: the servable's name and version, and signature_name when
 * non-NULL; from the arena (NULL when it runs out). */
Tensorflow__Serving__ModelSpec *tfs__grpc_echo_spec(tfs__arena *a, const tfs_servable *s,
                                                   const char *signature_name);

/* ---- a model run on behalf of a call (grpc-api.c): Predict and ModelInfer ------------------- */

/* Work that a batch thread hands back to the front end: run(job) is to be called once, on a
 * gRPC thread. Embedded in its owner, which run() frees. */
typedef struct tfs__grpc_job {
    struct tfs__grpc_job *next;   /* for the poster's queue */
    void                (*run)(struct tfs__grpc_job *job);
} tfs__grpc_job;
/* Queues job for a gRPC thread; returns at once. Any thread. */
typedef void (*tfs__grpc_post_fn)(void *ctx, tfs__grpc_job *job);

/* How a call's answer comes back: cb runs exactly once with the packed response (*out
 * tfs_malloc'ed, the callee owns it; NULL on an error) or the error, and the run's times. Where:
 * on the calling thread before the call that starts the run returns when the run completes there
 * (unbatched, or refused); when it completes on a batch thread, on the thread that runs the job
 * given to post(post_ctx) (the encoding included), or on that batch thread when post is NULL.
 * Everything the request held is released before cb runs. */
typedef void (*tfs__grpc_predict_cb)(void *ctx, enum tfs_code code, const tfs_status *st,
                                     uint8_t *out, size_t out_len, const tfs_run_times *t);

typedef struct tfs__grpc_run tfs__grpc_run;
/* Packs the response from the signature's outputs (all of them, in signature order; the call
 * answers r->idx[0..r->n_idx-1]). Runs on the thread that completes the run. */
typedef enum tfs_code (*tfs__grpc_encode_fn)(const tfs__grpc_run *r, tfs_tensor **outputs,
                                            uint8_t **out, size_t *out_len, tfs_status *st);

/* One request between its decoding and its answer: the front ends fill it, hand it to the service
 * layer (tfs_service_run_async: the input checks, batching, the deadline, metrics notes) and get
 * the encoded answer through cb. Everything in it is owned by it. */
struct tfs__grpc_run {
    tfs__grpc_job        job;       /* first: the job is the run */
    ProtobufCMessage    *req;       /* the unpacked request; inputs' names may point into it */
    tfs_servable        *s;         /* the handle the request acquired */
    const tfs_signature *sig;       /* borrowed from s */
    tfs_named_tensor    *inputs;
    int                  n_in;
    int                 *idx;       /* the signature outputs to answer, in answer order */
    int                  n_idx;
    bool                 raw;       /* ModelInfer: the request sent raw_input_contents */
    tfs__grpc_encode_fn  encode;
    tfs__grpc_post_fn    post;
    void                *post_ctx;
    pthread_t            submitter;
    tfs__grpc_predict_cb cb;
    void                *cb_ctx;
    /* The outcome, kept from the completion until the job runs. */
    enum tfs_code        code;
    tfs_status           st;
    tfs_tensor         **outs;      /* sig->n_outputs, allocated with idx */
    int                  n_outs;
    tfs_run_times        times;
};

/* NULL when out of memory (the caller then answers cb itself). post may be NULL (see
 * tfs__grpc_predict_cb). */
tfs__grpc_run *tfs__grpc_run_new(tfs__grpc_encode_fn encode, tfs__grpc_post_fn post,
                                 void *post_ctx, tfs__grpc_predict_cb cb, void *cb_ctx);
/* r->idx from the names asked for (none: every output, in signature order), with TF Serving's
 * output_filter checks and texts (an alias the signature lacks, one given twice). Needs r->sig. */
enum tfs_code tfs__grpc_run_outputs(tfs__grpc_run *r, char *const *names, size_t n_names,
                                    tfs_status *st);
/* Hands r (s, sig, inputs and idx filled) to the service layer; r belongs to the run from here
 * and cb answers. deadline_ns: tfs_batch_now_ns() clock, 0 = none. */
void tfs__grpc_run_start(tfs__grpc_run *r, int64_t deadline_ns);
/* Frees r and answers cb with the error. */
void tfs__grpc_run_fail(tfs__grpc_run *r, enum tfs_code code, const tfs_status *st);

/* ---- request pieces (grpc-api.c, grpc-example.c), also used by model warmup (warmup.c) ------- */

/* A PredictRequest's inputs as named tensors (names borrowed from req; a map key sent twice: the
 * last wins). With a signature, the names are checked against it first
 * (tfs__service_check_input_names), so a request with a missing or unknown input is refused
 * before any tensor is decoded. Time linear in the number of inputs. Free *inputs with
 * tfs__named_tensors_free(*inputs, *n_inputs). */
enum tfs_code tfs__grpc_predict_inputs(const Tensorflow__Serving__PredictRequest *req,
                                       const tfs_signature *sig, tfs_named_tensor **inputs,
                                       int *n_inputs, tfs_status *st);
/* INVALID_ARGUMENT with TF Serving's texts for an output_filter alias the signature lacks or one
 * given twice. */
enum tfs_code tfs__grpc_check_output_filter(const tfs_signature *sig, char *const *filter,
                                           size_t n_filter, tfs_status *st);
/* One serialized tf.Example per element of an Input (with a context: serialized(context) then
 * serialized(example)); none when the input is absent. Free with tfs__grpc_examples_free. */
enum tfs_code tfs__grpc_input_examples(const Tensorflow__Serving__Input *in, tfs_string **out,
                                      int64_t *n_out, tfs_status *st);
void tfs__grpc_examples_free(tfs_string *ex, int64_t n);   /* NULL-safe */
/* The request-level checks of TF Serving's multi_inference.cc (tasks present, one model, distinct
 * signatures, classify/regress methods), before anything runs. */
enum tfs_code tfs__grpc_check_tasks(const Tensorflow__Serving__MultiInferenceRequest *req,
                                   tfs_status *st);

/* ---- handlers (grpc-api.c, grpc-example.c) -------------------------------------------------- */

/* One RPC: decodes in[0..n-1], answers through the service layer and packs the response into
 * *out (tfs_malloc'ed, caller frees) with its length. On failure the status holds the gRPC code
 * (tfs_code numbers are gRPC's) and message, and nothing is allocated. */
typedef enum tfs_code (*tfs__grpc_handler)(tfs_loader *l, const uint8_t *in, size_t n,
                                           uint8_t **out, size_t *out_len, tfs_status *st);

enum tfs_code tfs__grpc_predict(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                size_t *out_len, tfs_status *st);
/* Predict without waiting for its batch: the PredictResponse comes through cb (see
 * tfs__grpc_predict_cb). deadline_ns: tfs_batch_now_ns() clock, 0 = none. */
void tfs__grpc_predict_async(tfs_loader *l, const uint8_t *in, size_t n, int64_t deadline_ns,
                             tfs__grpc_post_fn post, void *post_ctx, tfs__grpc_predict_cb cb,
                             void *cb_ctx);
enum tfs_code tfs__grpc_metadata(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                 size_t *out_len, tfs_status *st);
enum tfs_code tfs__grpc_model_status(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                     size_t *out_len, tfs_status *st);
/* Classify and Regress: the request's tf.Examples serialized and handed to the service layer
 * (tfs__service_classify / _regress), the same functions REST calls. */
enum tfs_code tfs__grpc_classify(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                 size_t *out_len, tfs_status *st);
enum tfs_code tfs__grpc_regress(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                size_t *out_len, tfs_status *st);
enum tfs_code tfs__grpc_multi_inference(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                        size_t *out_len, tfs_status *st);
/* grpc.health.v1.Health/Check (grpc-health.c): takes the health state instead of the loader. */
enum tfs_code tfs__grpc_health_check(const tfs_health *h, const uint8_t *in, size_t n,
                                     uint8_t **out, size_t *out_len, tfs_status *st);
/* A handler that also reads the health state (NULL when the server runs without one, as in
 * tests): grpc.health.v1 and the v2 probes. */
typedef enum tfs_code (*tfs__grpc_state_handler)(tfs_loader *l, const tfs_health *h,
                                                 const uint8_t *in, size_t n, uint8_t **out,
                                                 size_t *out_len, tfs_status *st);
/* A call answered through cb once its run completes (Predict, ModelInfer). */
typedef void (*tfs__grpc_async_handler)(tfs_loader *l, const uint8_t *in, size_t n,
                                        int64_t deadline_ns, tfs__grpc_post_fn post,
                                        void *post_ctx, tfs__grpc_predict_cb cb, void *cb_ctx);

/* KServe's v2 protocol, inference.GRPCInferenceService (grpc-v2.c). ServerLive: true while the
 * process answers. ServerReady: tfs_health_ready (the loader's readiness without a health
 * state). ModelReady: the version asked for (none: the latest) is AVAILABLE and no drain has
 * started; NOT_FOUND for a model name the server does not know. ServerMetadata: "tfserve", its
 * version. ModelMetadata: the serving_default signature's tensors. */
enum tfs_code tfs__grpc_v2_server_live(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                       size_t n, uint8_t **out, size_t *out_len, tfs_status *st);
enum tfs_code tfs__grpc_v2_server_ready(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                        size_t n, uint8_t **out, size_t *out_len, tfs_status *st);
enum tfs_code tfs__grpc_v2_model_ready(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                       size_t n, uint8_t **out, size_t *out_len, tfs_status *st);
enum tfs_code tfs__grpc_v2_server_metadata(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                           size_t n, uint8_t **out, size_t *out_len,
                                           tfs_status *st);
enum tfs_code tfs__grpc_v2_model_metadata(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                          size_t n, uint8_t **out, size_t *out_len,
                                          tfs_status *st);
/* A ModelInferRequest's inputs as named tensors (names borrowed from req), checked as Predict's
 * are: the names against sig first (tfs__service_check_input_names, nothing decoded yet), then
 * each tensor decoded from its typed or raw contents under the request's byte budget and checked
 * against its signature input's dtype and shape. INVALID_ARGUMENT naming the input and why.
 * Free *inputs with tfs__named_tensors_free(*inputs, *n_inputs). */
enum tfs_code tfs__grpc_v2_infer_inputs(const Inference__ModelInferRequest *req,
                                        const tfs_signature *sig, tfs_named_tensor **inputs,
                                        int *n_inputs, tfs_status *st);
/* ModelInfer: the request decoded into the named tensors Predict hands the service layer, run
 * the same way (tfs__grpc_run_start), answered through cb with a ModelInferResponse. */
void tfs__grpc_v2_infer_async(tfs_loader *l, const uint8_t *in, size_t n, int64_t deadline_ns,
                              tfs__grpc_post_fn post, void *post_ctx, tfs__grpc_predict_cb cb,
                              void *cb_ctx);
/* ModelService/HandleReloadConfigRequest: the request's ModelServerConfig through
 * tfs__config_convert (config-impl.h) into tfs_loader_reload. */
enum tfs_code tfs__grpc_reload_config(tfs_loader *l, const uint8_t *in, size_t n, uint8_t **out,
                                      size_t *out_len, tfs_status *st);

/* ---- TLS (tls.c) ---------------------------------------------------------------------------- */

struct grpc_server_credentials;

/* Reads --ssl_config_file (TF Serving's SSLConfig text: server_key, server_cert, custom_ca,
 * client_verify), checks its PEM (tfs__tls_check) and makes the server credentials: custom_ca as
 * the roots, and with client_verify every client must present a certificate signed by it.
 * Errors name the file. The caller releases *out with grpc_server_credentials_release. */
enum tfs_code tfs__grpc_ssl_credentials(const char *path, struct grpc_server_credentials **out,
                                        tfs_status *st);

#endif
