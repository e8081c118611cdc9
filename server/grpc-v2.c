/* KServe's Open Inference Protocol (v2) over gRPC: inference.GRPCInferenceService, next to TF
 * Serving's services on the same port. The probes and metadata read the loader and the health
 * state; ModelInfer decodes its tensors into the named tensors Predict hands the service layer and
 * runs through the same tfs__grpc_run (grpc-api.c), so the input checks, batching, the byte
 * budget, the deadline, drain and the metrics records are Predict's.
 *
 * Datatypes are server-impl.h's v2 table (tfs__v2_datatype / tfs__v2_dtype). A request's tensors
 * come either all in raw_input_contents (one entry per input, little-endian elements; BYTES as a
 * 4-byte little-endian length then the bytes, per element) or all in their typed contents, never
 * both. The answer takes the request's form, as Triton's does: raw_output_contents for raw
 * inputs, typed contents otherwise; FP16 and BF16 have no typed field, so an answer with such an
 * output is raw whatever the request used. The signature is serving_default unless the request
 * parameter "signature_name" (a string) names another; ModelMetadata describes serving_default.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/grpc-impl.h"
#include "server/metrics-impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw_input_contents / raw_output_contents are copied as the host's bytes: little-endian only"
#endif

#define PLATFORM        "tensorflow_savedmodel"
#define SIGNATURE_PARAM "signature_name"

/* ---- shared pieces -------------------------------------------------------------------------- */

/* A v2 version string: "" is the latest (-1), otherwise a decimal version number. */
static enum tfs_code read_version(const char *v, int64_t *out, tfs_status *st)
{
    int64_t x = 0;
    *out = -1;
    if (!v || !*v)
        return TFS_OK;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || x > (INT64_MAX - (*p - '0')) / 10)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "model version '%s' is not a version number",
                           v);
        x = x * 10 + (*p - '0');
    }
    *out = x;
    return TFS_OK;
}

/* The servable a v2 request names (model name and version string). */
static enum tfs_code acquire(tfs_loader *l, const char *name, const char *version,
                             tfs_servable **s, tfs_status *st)
{
    tfs_model_spec spec = {.name = name, .version = -1};
    enum tfs_code  code = read_version(version, &spec.version, st);
    *s = NULL;
    if (code != TFS_OK)
        return code;
    return tfs_service_acquire(l, &spec, s, st);
}

static enum tfs_code unpack(const ProtobufCMessageDescriptor *d, const uint8_t *in, size_t n,
                            ProtobufCMessage **m, tfs_status *st)
{
    *m = tfs__grpc_unpack(d, in, n, st);
    return *m ? TFS_OK : st->code;
}

/* ---- probes and metadata -------------------------------------------------------------------- */

enum tfs_code tfs__grpc_v2_server_live(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                       size_t n, uint8_t **out, size_t *out_len, tfs_status *st)
{
    ProtobufCMessage *req;
    enum tfs_code     code;
    (void)l;
    (void)h;
    if ((code = unpack(&inference__server_live_request__descriptor, in, n, &req, st)) != TFS_OK)
        return code;
    Inference__ServerLiveResponse resp = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    resp.live = 1;   /* answering at all is being live, during a drain too (as /healthz) */
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    tfs__grpc_free_unpacked(req);
    return code;
}

enum tfs_code tfs__grpc_v2_server_ready(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                        size_t n, uint8_t **out, size_t *out_len, tfs_status *st)
{
    ProtobufCMessage *req;
    enum tfs_code     code;
    if ((code = unpack(&inference__server_ready_request__descriptor, in, n, &req, st)) != TFS_OK)
        return code;
    Inference__ServerReadyResponse resp = INFERENCE__SERVER_READY_RESPONSE__INIT;
    resp.ready = h ? tfs_health_ready(h) : tfs_loader_ready(l);
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    tfs__grpc_free_unpacked(req);
    return code;
}

/* True when the loader has a model of this name configured (loaded or not). */
static bool model_known(tfs_loader *l, const char *name)
{
    char     **names = NULL;
    int        n = 0;
    bool       known = false;
    tfs_status st;
    if (tfs_loader_model_names(l, &names, &n, &st) != TFS_OK)
        return true;   /* cannot tell: let the caller's own answer stand */
    for (int i = 0; i < n && !known; i++)
        known = strcmp(names[i], name) == 0;
    tfs_loader_names_free(names, n);
    return known;
}

enum tfs_code tfs__grpc_v2_model_ready(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                       size_t n, uint8_t **out, size_t *out_len, tfs_status *st)
{
    Inference__ModelReadyRequest *req;
    tfs_servable                 *s = NULL;
    enum tfs_code                 code;
    if ((code = unpack(&inference__model_ready_request__descriptor, in, n,
                       (ProtobufCMessage **)&req, st)) != TFS_OK)
        return code;
    Inference__ModelReadyResponse resp = INFERENCE__MODEL_READY_RESPONSE__INIT;
    code = acquire(l, req->name, req->version, &s, st);
    /* A model the server serves but whose version is not AVAILABLE (loading, failed, not kept by
     * the version policy) is not ready; a name the server does not know is an error, as for
     * ModelInfer. */
    if (code == TFS_NOT_FOUND && model_known(l, req->name))
        code = TFS_OK;
    if (code != TFS_OK)
        goto done;
    resp.ready = s && !(h && tfs_health_draining(h));
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
done:
    tfs_servable_release(s);
    tfs__grpc_free_unpacked(req);
    return code;
}

enum tfs_code tfs__grpc_v2_server_metadata(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                           size_t n, uint8_t **out, size_t *out_len,
                                           tfs_status *st)
{
    ProtobufCMessage *req;
    enum tfs_code     code;
    (void)l;
    (void)h;
    if ((code = unpack(&inference__server_metadata_request__descriptor, in, n, &req, st)) !=
        TFS_OK)
        return code;
    Inference__ServerMetadataResponse resp = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    resp.name = "tfserve";
    resp.version = TFS_VERSION;
    /* None of the protocol's optional extensions (model repository, shared memory, ...). */
    resp.n_extensions = 0;
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    tfs__grpc_free_unpacked(req);
    return code;
}

/* One TensorMetadata: the alias, the v2 datatype ("" for a dtype v2 cannot name) and the shape
 * with -1 for unknown dimensions; an unknown rank is [-1] too, the closest v2 can say. */
static Inference__ModelMetadataResponse__TensorMetadata *tensor_meta(tfs__arena *a,
                                                                     const tfs_tensor_info *ti)
{
    Inference__ModelMetadataResponse__TensorMetadata *m = tfs__arena_alloc(a, sizeof *m);
    int                                               rank = ti->shape.rank;
    if (!m)
        return NULL;
    inference__model_metadata_response__tensor_metadata__init(m);
    const char *dt = tfs__v2_datatype(ti->dtype);
    m->name = ti->alias;
    m->datatype = (char *)(dt ? dt : "");
    if (!(m->shape = tfs__arena_alloc(a, (size_t)(rank > 0 ? rank : 1) * sizeof *m->shape)))
        return NULL;
    if (rank < 0) {
        m->shape[0] = -1;
        m->n_shape = 1;
        return m;
    }
    for (int i = 0; i < rank; i++)
        m->shape[i] = ti->shape.dims[i] >= 0 ? ti->shape.dims[i] : -1;
    m->n_shape = (size_t)rank;
    return m;
}

/* The model's AVAILABLE versions as strings (newest first, as the loader lists them). */
static enum tfs_code versions(tfs_loader *l, const char *name, tfs__arena *a, char ***out,
                              size_t *n_out, tfs_status *st)
{
    tfs_version_status *vs = NULL;
    int                 n = 0;
    enum tfs_code       code = tfs_loader_model_status(l, name, -1, &vs, &n, st);
    *n_out = 0;
    if (code != TFS_OK)
        return code;
    if (!(*out = tfs__arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof **out)))
        goto oom;
    for (int i = 0; i < n; i++) {
        char v[24];
        if (vs[i].state != TFS_VERSION_AVAILABLE)
            continue;
        snprintf(v, sizeof v, "%" PRId64, vs[i].version);
        if (!((*out)[(*n_out)++] = tfs__arena_strdup(a, v)))
            goto oom;
    }
    tfs_free(vs);
    return TFS_OK;
oom:
    tfs_free(vs);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory listing versions");
}

enum tfs_code tfs__grpc_v2_model_metadata(tfs_loader *l, const tfs_health *h, const uint8_t *in,
                                          size_t n, uint8_t **out, size_t *out_len,
                                          tfs_status *st)
{
    Inference__ModelMetadataRequest *req;
    tfs_servable                    *s = NULL;
    const tfs_signature             *sig;
    tfs__arena                       a;
    enum tfs_code                    code;
    (void)h;
    tfs__arena_init(&a);
    if ((code = unpack(&inference__model_metadata_request__descriptor, in, n,
                       (ProtobufCMessage **)&req, st)) != TFS_OK)
        return code;
    Inference__ModelMetadataResponse resp = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    if ((code = acquire(l, req->name, req->version, &s, st)) != TFS_OK ||
        (code = tfs_service_signature(s, NULL, TFS_API_GRPC, &sig, st)) != TFS_OK ||
        (code = versions(l, tfs_servable_name(s), &a, &resp.versions, &resp.n_versions, st)) !=
            TFS_OK)
        goto done;
    resp.name = (char *)tfs_servable_name(s);
    resp.platform = PLATFORM;
    resp.inputs = tfs__arena_alloc(&a, (size_t)(sig->n_inputs + 1) * sizeof *resp.inputs);
    resp.outputs = tfs__arena_alloc(&a, (size_t)(sig->n_outputs + 1) * sizeof *resp.outputs);
    if (!resp.inputs || !resp.outputs)
        goto oom;
    for (int i = 0; i < sig->n_inputs; i++)
        if (!(resp.inputs[resp.n_inputs++] = tensor_meta(&a, &sig->inputs[i])))
            goto oom;
    for (int i = 0; i < sig->n_outputs; i++)
        if (!(resp.outputs[resp.n_outputs++] = tensor_meta(&a, &sig->outputs[i])))
            goto oom;
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a ModelMetadataResponse");
done:
    tfs__arena_deinit(&a);
    tfs_servable_release(s);
    tfs__grpc_free_unpacked(req);
    return code;
}

/* ---- ModelInfer: decoding ------------------------------------------------------------------- */

/* The typed contents' fields, in InferTensorContents order. */
enum field { F_BOOL, F_INT, F_INT64, F_UINT, F_UINT64, F_FP32, F_FP64, F_BYTES, F_COUNT };

static const char *const field_names[F_COUNT] = {
    "bool_contents",   "int_contents",  "int64_contents", "uint_contents",
    "uint64_contents", "fp32_contents", "fp64_contents",  "bytes_contents"};

/* The field a dtype's values come in; -1 for FP16 and BF16, which have none. */
static int field_of(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_BOOL:   return F_BOOL;
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_INT16:
    case TFS_DTYPE_INT32:  return F_INT;
    case TFS_DTYPE_INT64:  return F_INT64;
    case TFS_DTYPE_UINT8:
    case TFS_DTYPE_UINT16:
    case TFS_DTYPE_UINT32: return F_UINT;
    case TFS_DTYPE_UINT64: return F_UINT64;
    case TFS_DTYPE_FLOAT:  return F_FP32;
    case TFS_DTYPE_DOUBLE: return F_FP64;
    case TFS_DTYPE_STRING: return F_BYTES;
    default:               return -1;
    }
}

static void field_counts(const Inference__InferTensorContents *c, size_t n[F_COUNT])
{
    memset(n, 0, F_COUNT * sizeof *n);
    if (!c)
        return;
    n[F_BOOL] = c->n_bool_contents;
    n[F_INT] = c->n_int_contents;
    n[F_INT64] = c->n_int64_contents;
    n[F_UINT] = c->n_uint_contents;
    n[F_UINT64] = c->n_uint64_contents;
    n[F_FP32] = c->n_fp32_contents;
    n[F_FP64] = c->n_fp64_contents;
    n[F_BYTES] = c->n_bytes_contents;
}

/* Takes cost bytes off the request's budget, or refuses the tensor before it is allocated. */
static enum tfs_code take_budget(const char *name, size_t cost, size_t *budget, tfs_status *st)
{
    if (cost > *budget)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': its %zu bytes are over the %zu bytes "
                       "left of the request's limit (--max_tensor_bytes, for all its tensors "
                       "together)", name, cost, *budget);
    *budget -= cost;
    return TFS_OK;
}

/* Typed contents into a new tensor of dtype dt and the given shape. Narrow integer types take
 * int_contents / uint_contents truncated, as TensorFlow reads int_val. */
static enum tfs_code from_typed(const Inference__ModelInferRequest__InferInputTensor *in,
                                enum tfs_dtype dt, int rank, const int64_t *dims, int64_t nelem,
                                size_t *budget, tfs_tensor **out, tfs_status *st)
{
    const Inference__InferTensorContents *c = in->contents;
    size_t                                n[F_COUNT];
    int                                   f = field_of(dt);
    tfs_tensor                           *t = NULL;
    enum tfs_code                         code;

    field_counts(c, n);
    for (int k = 0; k < F_COUNT; k++)
        if (k != f && n[k])
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': datatype %s takes %s, got %zu "
                           "values in %s", in->name, in->datatype,
                           f >= 0 ? field_names[f] : "raw_input_contents", n[k], field_names[k]);
    if (f < 0 && nelem > 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': datatype %s has no typed contents; "
                       "send it in raw_input_contents", in->name, in->datatype);
    if (f >= 0 && n[f] != (size_t)nelem)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': %zu values in %s, shape %s needs "
                       "%" PRId64, in->name, n[f], field_names[f],
                       tfs_shape_str(rank, dims, (char[96]){0}, 96), nelem);
    size_t cost = (size_t)nelem * tfs_dtype_size(dt);
    for (int64_t i = 0; dt == TFS_DTYPE_STRING && i < nelem; i++)
        cost += c->bytes_contents[i].len;
    if ((code = take_budget(in->name, cost, budget, st)) != TFS_OK ||
        (code = tfs_tensor_new(dt, rank, dims, &t, st)) != TFS_OK)
        return code;
    void *d = t->data;
    for (int64_t i = 0; i < nelem; i++) {
        switch (dt) {
        case TFS_DTYPE_BOOL:   ((bool *)d)[i] = c->bool_contents[i] != 0; break;
        case TFS_DTYPE_INT8:   ((int8_t *)d)[i] = (int8_t)c->int_contents[i]; break;
        case TFS_DTYPE_INT16:  ((int16_t *)d)[i] = (int16_t)c->int_contents[i]; break;
        case TFS_DTYPE_INT32:  ((int32_t *)d)[i] = c->int_contents[i]; break;
        case TFS_DTYPE_INT64:  ((int64_t *)d)[i] = c->int64_contents[i]; break;
        case TFS_DTYPE_UINT8:  ((uint8_t *)d)[i] = (uint8_t)c->uint_contents[i]; break;
        case TFS_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)c->uint_contents[i]; break;
        case TFS_DTYPE_UINT32: ((uint32_t *)d)[i] = c->uint_contents[i]; break;
        case TFS_DTYPE_UINT64: ((uint64_t *)d)[i] = c->uint64_contents[i]; break;
        case TFS_DTYPE_FLOAT:  ((float *)d)[i] = c->fp32_contents[i]; break;
        case TFS_DTYPE_DOUBLE: ((double *)d)[i] = c->fp64_contents[i]; break;
        case TFS_DTYPE_STRING:
            if ((code = tfs_tensor_set_string(t, i, c->bytes_contents[i].data,
                                              c->bytes_contents[i].len, st)) != TFS_OK) {
                tfs_tensor_unref(t);
                return code;
            }
            break;
        default: break;
        }
    }
    *out = t;
    return TFS_OK;
}

/* One raw_input_contents entry into a new tensor: nelem elements of the dtype's size, or for
 * BYTES nelem (4-byte little-endian length, bytes) records that use up the entry exactly. */
static enum tfs_code from_raw(const Inference__ModelInferRequest__InferInputTensor *in,
                              const ProtobufCBinaryData *raw, enum tfs_dtype dt, int rank,
                              const int64_t *dims, int64_t nelem, size_t *budget,
                              tfs_tensor **out, tfs_status *st)
{
    tfs_tensor   *t = NULL;
    enum tfs_code code;
    char          shape[96];
    tfs_shape_str(rank, dims, shape, sizeof shape);

    if (dt != TFS_DTYPE_STRING) {
        size_t want = (size_t)nelem * tfs_dtype_size(dt);
        if (raw->len != want)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': raw_input_contents has %zu "
                           "bytes, shape %s of %s needs %zu", in->name, raw->len, shape,
                           in->datatype, want);
        if ((code = take_budget(in->name, want, budget, st)) != TFS_OK ||
            (code = tfs_tensor_new(dt, rank, dims, &t, st)) != TFS_OK)
            return code;
        if (dt == TFS_DTYPE_BOOL) {
            /* A bool byte other than 0/1 would be undefined behaviour in C. */
            for (int64_t i = 0; i < nelem; i++)
                ((bool *)t->data)[i] = raw->data[i] != 0;
        } else if (want) {
            memcpy(t->data, raw->data, want);
        }
        *out = t;
        return TFS_OK;
    }
    /* BYTES: walk the records once to check them and count their bytes before allocating. */
    size_t pos = 0, cost = (size_t)nelem * tfs_dtype_size(dt);
    for (int64_t i = 0; i < nelem; i++) {
        uint32_t len;
        if (raw->len - pos < 4)
            goto truncated;
        memcpy(&len, raw->data + pos, 4);
        if (raw->len - pos - 4 < len)
            goto truncated;
        pos += 4 + (size_t)len;
        cost += len;
    }
    if (pos != raw->len)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': raw_input_contents has %zu bytes "
                       "after the %" PRId64 " BYTES elements of shape %s", in->name,
                       raw->len - pos, nelem, shape);
    if ((code = take_budget(in->name, cost, budget, st)) != TFS_OK ||
        (code = tfs_tensor_new(dt, rank, dims, &t, st)) != TFS_OK)
        return code;
    pos = 0;
    for (int64_t i = 0; i < nelem; i++) {
        uint32_t len;
        memcpy(&len, raw->data + pos, 4);
        if ((code = tfs_tensor_set_string(t, i, raw->data + pos + 4, len, st)) != TFS_OK) {
            tfs_tensor_unref(t);
            return code;
        }
        pos += 4 + (size_t)len;
    }
    *out = t;
    return TFS_OK;
truncated:
    return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': raw_input_contents of %zu bytes ends "
                   "before the %" PRId64 " BYTES elements of shape %s (4-byte length, then the "
                   "bytes, per element)", in->name, raw->len, nelem, shape);
}

/* The request's shape against the signature's, where the signature knows the rank and dims. */
static enum tfs_code check_shape(const char *name, const tfs_tensor *t, const tfs_shape *want,
                                 tfs_status *st)
{
    bool ok = want->rank < 0 || want->rank == t->rank;
    for (int i = 0; ok && want->rank >= 0 && i < t->rank; i++)
        ok = want->dims[i] < 0 || want->dims[i] == t->dims[i];
    if (ok)
        return TFS_OK;
    char got[96], need[96];
    return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': shape %s does not match the model's %s",
                   name, tfs_shape_str(t->rank, t->dims, got, sizeof got),
                   tfs_shape_str(want->rank, want->dims, need, sizeof need));
}

/* One input tensor: its datatype name and shape checked, then its raw entry (raw non-NULL) or
 * its typed contents decoded under *budget. */
static enum tfs_code decode_input(const Inference__ModelInferRequest__InferInputTensor *e,
                                  const ProtobufCBinaryData *raw, size_t *budget,
                                  enum tfs_dtype *dt, tfs_tensor **out, tfs_status *st)
{
    int64_t dims[TFS_MAX_RANK];
    int     rank = (int)(e->n_shape < TFS_MAX_RANK ? e->n_shape : TFS_MAX_RANK);

    *dt = tfs__v2_dtype(e->datatype, strlen(e->datatype));
    if (*dt == TFS_DTYPE_INVALID)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': unknown datatype '%s'", e->name,
                       e->datatype);
    if (e->n_shape > TFS_MAX_RANK)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': rank %zu is over %d", e->name,
                       e->n_shape, TFS_MAX_RANK);
    if (rank)   /* a scalar's shape may be NULL, which memcpy may not be given */
        memcpy(dims, e->shape, (size_t)rank * sizeof *dims);
    int64_t nelem = tfs_shape_nelem(rank, dims);
    if (nelem < 0 || (uint64_t)nelem > TFS_TENSOR_MAX_BYTES)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': shape %s is not a tensor shape",
                       e->name, tfs_shape_str(rank, dims, (char[96]){0}, 96));
    if (!raw)
        return from_typed(e, *dt, rank, dims, nelem, budget, out, st);
    size_t nc[F_COUNT], sum = 0;
    field_counts(e->contents, nc);
    for (int k = 0; k < F_COUNT; k++)
        sum += nc[k];
    if (sum)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': contents given as well as "
                       "raw_input_contents (send one or the other)", e->name);
    return from_raw(e, raw, *dt, rank, dims, nelem, budget, out, st);
}

enum tfs_code tfs__grpc_v2_infer_inputs(const Inference__ModelInferRequest *req,
                                        const tfs_signature *sig, tfs_named_tensor **inputs,
                                        int *n_inputs, tfs_status *st)
{
    size_t            n_req = req->n_inputs;
    bool              raw = req->n_raw_input_contents > 0;
    tfs_named_tensor *in = NULL;
    const char      **names = NULL;
    tfs__name_map     aliases;
    int               n = 0;
    enum tfs_code     code;

    *inputs = NULL;
    *n_inputs = 0;
    memset(&aliases, 0, sizeof aliases);
    if (n_req > INT_MAX)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%zu inputs is too many", n_req);
    if (raw && req->n_raw_input_contents != n_req)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "raw_input_contents has %zu entries for %zu "
                       "inputs (one per input, in order)", req->n_raw_input_contents, n_req);
    if (!(in = tfs_calloc(n_req > 0 ? n_req : 1, sizeof *in)) ||
        !(names = tfs_calloc(n_req > 0 ? n_req : 1, sizeof *names))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding a ModelInferRequest");
        goto fail;
    }
    for (size_t i = 0; i < n_req; i++)
        names[i] = req->inputs[i]->name;
    if ((code = tfs__service_check_input_names(sig, names, (int)n_req, st)) != TFS_OK ||
        (code = tfs__name_map_init(&aliases, (size_t)sig->n_inputs, st)) != TFS_OK)
        goto fail;
    for (int k = 0; k < sig->n_inputs; k++)
        tfs__name_map_put(&aliases, sig->inputs[k].alias, k);
    size_t budget = tfs_runtime_max_tensor_bytes();   /* for all the request's tensors */
    for (size_t i = 0; i < n_req; i++) {
        const Inference__ModelInferRequest__InferInputTensor *e = req->inputs[i];
        enum tfs_dtype                                        dt;
        code = decode_input(e, raw ? &req->raw_input_contents[i] : NULL, &budget, &dt,
                            &in[n].tensor, st);
        if (code != TFS_OK)
            goto fail;
        in[n++].name = e->name;
        /* The graph would refuse another dtype or shape too, but in terms of its nodes; the
         * signature names the input. What a signature does not say is not checked. */
        int            k = tfs__name_map_get(&aliases, e->name);
        enum tfs_dtype want = k >= 0 ? tfs_dtype_base(sig->inputs[k].dtype) : TFS_DTYPE_INVALID;
        if (want != TFS_DTYPE_INVALID && dt != want) {
            const char *w = tfs__v2_datatype(want);
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "input '%s': expected datatype %s, got %s",
                           e->name, w ? w : tfs_dtype_name(want), e->datatype);
            goto fail;
        }
        if (k >= 0 && (code = check_shape(e->name, in[n - 1].tensor, &sig->inputs[k].shape,
                                          st)) != TFS_OK)
            goto fail;
    }
    tfs__name_map_deinit(&aliases);
    tfs_free(names);
    *inputs = in;
    *n_inputs = n;
    return TFS_OK;
fail:
    tfs__name_map_deinit(&aliases);
    tfs_free(names);
    tfs__named_tensors_free(in, n);
    return code;
}

/* ---- ModelInfer: encoding ------------------------------------------------------------------- */

/* t's elements as one raw_output_contents entry: the tensor's own bytes where the layout is the
 * wire's (no copy), BYTES records built in the arena. */
static bool to_raw(const tfs_tensor *t, tfs__arena *a, ProtobufCBinaryData *b)
{
    if (t->dtype != TFS_DTYPE_STRING) {
        b->data = t->data;
        b->len = t->nbytes;
        return true;
    }
    const tfs_string *s = t->data;
    size_t            len = 0;
    for (int64_t i = 0; i < t->nelem; i++)
        len += 4 + s[i].len;
    uint8_t *p = tfs__arena_alloc(a, len);
    if (!p)
        return false;
    b->data = p;
    b->len = len;
    for (int64_t i = 0; i < t->nelem; i++) {
        uint32_t n = (uint32_t)s[i].len;
        memcpy(p, &n, 4);
        if (n)
            memcpy(p + 4, s[i].data, n);
        p += 4 + n;
    }
    return true;
}

/* t's elements in the typed field of its datatype: pointing into t where the element layout is
 * the field's, converted into the arena otherwise. */
static bool to_typed(const tfs_tensor *t, tfs__arena *a, Inference__InferTensorContents *c)
{
    size_t n = (size_t)t->nelem;
    size_t m = n ? n : 1;
    void  *d = t->data;
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:  c->fp32_contents = d; c->n_fp32_contents = n; return true;
    case TFS_DTYPE_DOUBLE: c->fp64_contents = d; c->n_fp64_contents = n; return true;
    case TFS_DTYPE_INT32:  c->int_contents = d; c->n_int_contents = n; return true;
    case TFS_DTYPE_INT64:  c->int64_contents = d; c->n_int64_contents = n; return true;
    case TFS_DTYPE_UINT32: c->uint_contents = d; c->n_uint_contents = n; return true;
    case TFS_DTYPE_UINT64: c->uint64_contents = d; c->n_uint64_contents = n; return true;
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_INT16:
        if (!(c->int_contents = tfs__arena_alloc(a, m * sizeof *c->int_contents)))
            return false;
        for (size_t i = 0; i < n; i++)
            c->int_contents[i] = t->dtype == TFS_DTYPE_INT8 ? ((const int8_t *)d)[i]
                                                            : ((const int16_t *)d)[i];
        c->n_int_contents = n;
        return true;
    case TFS_DTYPE_UINT8:
    case TFS_DTYPE_UINT16:
        if (!(c->uint_contents = tfs__arena_alloc(a, m * sizeof *c->uint_contents)))
            return false;
        for (size_t i = 0; i < n; i++)
            c->uint_contents[i] = t->dtype == TFS_DTYPE_UINT8 ? ((const uint8_t *)d)[i]
                                                              : ((const uint16_t *)d)[i];
        c->n_uint_contents = n;
        return true;
    case TFS_DTYPE_BOOL:
        if (!(c->bool_contents = tfs__arena_alloc(a, m * sizeof *c->bool_contents)))
            return false;
        for (size_t i = 0; i < n; i++)
            c->bool_contents[i] = ((const bool *)d)[i];
        c->n_bool_contents = n;
        return true;
    case TFS_DTYPE_STRING: {
        const tfs_string *s = d;
        if (!(c->bytes_contents = tfs__arena_alloc(a, m * sizeof *c->bytes_contents)))
            return false;
        for (size_t i = 0; i < n; i++)
            c->bytes_contents[i] = (ProtobufCBinaryData){s[i].len, (uint8_t *)s[i].data};
        c->n_bytes_contents = n;
        return true;
    }
    default: return false;   /* FP16, BF16: callers answer raw */
    }
}

static enum tfs_code encode_infer(const tfs__grpc_run *r, tfs_tensor **outputs, uint8_t **out,
                                  size_t *out_len, tfs_status *st)
{
    const Inference__ModelInferRequest *req = (const Inference__ModelInferRequest *)r->req;
    size_t                              n = (size_t)(r->n_idx > 0 ? r->n_idx : 1);
    bool                                raw = r->raw;
    tfs__arena                          a;
    enum tfs_code                       code;
    char                                version[24];

    tfs__arena_init(&a);
    Inference__ModelInferResponse resp = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    snprintf(version, sizeof version, "%" PRId64, tfs_servable_version(r->s));
    resp.model_name = (char *)tfs_servable_name(r->s);
    resp.model_version = version;
    resp.id = req->id;
    for (int k = 0; k < r->n_idx; k++) {
        const tfs_tensor *t = outputs[r->idx[k]];
        if (!tfs__v2_datatype(t->dtype)) {
            code = TFS_ERR(st, TFS_UNIMPLEMENTED, "output '%s' has dtype %s, which the v2 "
                           "protocol has no datatype for", r->sig->outputs[r->idx[k]].alias,
                           tfs_dtype_name(t->dtype));
            goto done;
        }
        raw = raw || t->dtype == TFS_DTYPE_HALF || t->dtype == TFS_DTYPE_BFLOAT16;
    }
    resp.outputs = tfs__arena_alloc(&a, n * sizeof *resp.outputs);
    if (raw && !(resp.raw_output_contents = tfs__arena_alloc(&a, n * sizeof
                                                             *resp.raw_output_contents)))
        goto oom;
    if (!resp.outputs)
        goto oom;
    for (int k = 0; k < r->n_idx; k++) {
        tfs_tensor                                  *t = outputs[r->idx[k]];
        Inference__ModelInferResponse__InferOutputTensor *o = tfs__arena_alloc(&a, sizeof *o);
        if (!o)
            goto oom;
        inference__model_infer_response__infer_output_tensor__init(o);
        o->name = r->sig->outputs[r->idx[k]].alias;
        o->datatype = (char *)tfs__v2_datatype(t->dtype);
        o->shape = t->dims;   /* t outlives the packing */
        o->n_shape = (size_t)t->rank;
        if (raw) {
            if (!to_raw(t, &a, &resp.raw_output_contents[k]))
                goto oom;
            resp.n_raw_output_contents++;
        } else {
            Inference__InferTensorContents *c = tfs__arena_alloc(&a, sizeof *c);
            if (!c)
                goto oom;
            inference__infer_tensor_contents__init(c);
            if (!to_typed(t, &a, c))
                goto oom;
            o->contents = c;
        }
        resp.outputs[resp.n_outputs++] = o;
    }
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing a ModelInferResponse");
done:
    tfs__arena_deinit(&a);
    return code;
}

/* The request parameter "signature_name": NULL when absent (serving_default). */
static enum tfs_code signature_param(const Inference__ModelInferRequest *req, const char **out,
                                     tfs_status *st)
{
    *out = NULL;
    for (size_t i = 0; i < req->n_parameters; i++) {
        const Inference__ModelInferRequest__ParametersEntry *e = req->parameters[i];
        if (strcmp(e->key, SIGNATURE_PARAM) != 0)
            continue;
        if (!e->value || e->value->parameter_choice_case !=
                             INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "parameter '%s' must be a string_param",
                           SIGNATURE_PARAM);
        *out = e->value->string_param;
    }
    return TFS_OK;
}

void tfs__grpc_v2_infer_async(tfs_loader *l, const uint8_t *in, size_t n, int64_t deadline_ns,
                              tfs__grpc_post_fn post, void *post_ctx, tfs__grpc_predict_cb cb,
                              void *cb_ctx)
{
    tfs__grpc_run *r = tfs__grpc_run_new(encode_infer, post, post_ctx, cb, cb_ctx);
    const char    *sig_name = NULL;
    char         **names = NULL;
    tfs_status     st;
    enum tfs_code  code;

    if (!r) {
        tfs_run_times t = {0};
        code = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding a ModelInferRequest");
        cb(cb_ctx, code, &st, NULL, 0, &t);
        return;
    }
    r->req = tfs__grpc_unpack(&inference__model_infer_request__descriptor, in, n, &st);
    const Inference__ModelInferRequest *req = (const Inference__ModelInferRequest *)r->req;
    if (!req) {
        code = st.code;
        goto fail;
    }
    size_t n_out = req->n_outputs;
    if (!(names = tfs_calloc(n_out ? n_out : 1, sizeof *names))) {
        code = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding a ModelInferRequest");
        goto fail;
    }
    for (size_t i = 0; i < n_out; i++)
        names[i] = req->outputs[i]->name;
    if ((code = signature_param(req, &sig_name, &st)) != TFS_OK)
        goto fail;
    tfs__request_note(req->model_name, -1, sig_name);
    if ((code = acquire(l, req->model_name, req->model_version, &r->s, &st)) != TFS_OK ||
        (code = tfs_service_signature(r->s, sig_name, TFS_API_GRPC, &r->sig, &st)) != TFS_OK)
        goto fail;
    tfs__request_note(NULL, -1, r->sig->key);   /* the metrics name the signature that ran */
    if ((code = tfs__grpc_run_outputs(r, names, n_out, &st)) != TFS_OK ||
        (code = tfs__grpc_v2_infer_inputs(req, r->sig, &r->inputs, &r->n_in, &st)) != TFS_OK)
        goto fail;
    tfs_free(names);
    r->raw = req->n_raw_input_contents > 0;
    tfs__grpc_run_start(r, deadline_ns);
    return;
fail:
    tfs_free(names);
    tfs__grpc_run_fail(r, code, &st);
}
