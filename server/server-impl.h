/* server internals shared by the files of server/ and by tests/server: the JSON writer (onto
 * runtime/buf.h's buffer), base64, URL routing, the code -> HTTP status table, the JSON <-> tensor
 * codecs, the status/metadata documents and the REST request processor. Not for use outside
 * server/.
 */
#ifndef TFS_SERVER_SERVER_IMPL_H
#define TFS_SERVER_SERVER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "runtime/buf.h"
#include "server/server.h"

/* ---- name map (name-map.c) ------------------------------------------------------------------ */

/* Names (borrowed; they must outlive the map) to non-negative ints, in time linear in the number
 * of names: the request checks use it instead of comparing names pairwise. */
typedef struct tfs__name_map_slot {
    const char *name;   /* NULL: empty */
    int         value;
} tfs__name_map_slot;

typedef struct tfs__name_map {
    tfs__name_map_slot *slots;
    size_t              mask;   /* slot count - 1 */
    size_t              n, max;
    tfs__name_map_slot  inline_slots[16];
} tfs__name_map;

/* Room for n_max names; RESOURCE_EXHAUSTED when that cannot be allocated. */
enum tfs_code tfs__name_map_init(tfs__name_map *m, size_t n_max, tfs_status *st);
void tfs__name_map_deinit(tfs__name_map *m);   /* NULL-safe, also after a failed init */
/* Adds name -> value (value >= 0) unless name is there: returns -1 when added, the value already
 * stored for name otherwise, and -2 (nothing added) past the n_max given to init. */
int tfs__name_map_put(tfs__name_map *m, const char *name, int value);
/* The value stored for name, or -1. */
int tfs__name_map_get(const tfs__name_map *m, const char *name);

/* ---- JSON writer (json-writer.c) ------------------------------------------------------------ */

/* Writes JSON the way rapidjson's PrettyWriter does (TF Serving's REST output): newline and
 * `indent` spaces per level; in single-line mode array elements are separated by ", " on one
 * line. Also used with indent 1 for the protobuf-JSON-style status and metadata documents. */
typedef struct tfs__jw_level {
    bool    in_array;
    int64_t count;
} tfs__jw_level;

typedef struct tfs__jw {
    tfs__buf      *out;          /* borrowed */
    int            indent;
    bool           single_line;  /* rapidjson kFormatSingleLineArray */
    size_t         stop_at;      /* tfs__jw_json stops past this output length; 0: never */
    int            depth;
    int            cap;
    tfs__jw_level *levels;
    tfs__jw_level  inline_levels[16];
} tfs__jw;

void tfs__jw_init(tfs__jw *w, tfs__buf *out, int indent);
void tfs__jw_deinit(tfs__jw *w);
void tfs__jw_begin_object(tfs__jw *w);
void tfs__jw_end_object(tfs__jw *w);
void tfs__jw_begin_array(tfs__jw *w);
void tfs__jw_end_array(tfs__jw *w);
void tfs__jw_key(tfs__jw *w, const char *key);
void tfs__jw_string(tfs__jw *w, const char *s, size_t n);
void tfs__jw_cstring(tfs__jw *w, const char *s);
void tfs__jw_int(tfs__jw *w, int64_t v);
void tfs__jw_uint(tfs__jw *w, uint64_t v);
void tfs__jw_bool(tfs__jw *w, bool v);
void tfs__jw_null(tfs__jw *w);
void tfs__jw_float(tfs__jw *w, float v);     /* TF Serving's decimal text, see tfs__format_float */
void tfs__jw_double(tfs__jw *w, double v);
void tfs__jw_raw(tfs__jw *w, const char *text);   /* a value written as is (a number token) */
/* Writes a request value (for error messages that quote the request). */
struct tfs__jv;
void tfs__jw_json(tfs__jw *w, const struct tfs__jv *v);
/* Appends s escaped as a JSON string body (no quotes). */
void tfs__json_escape(tfs__buf *b, const char *s, size_t n);

/* TF Serving's float text: NaN, Infinity, -Infinity bare; otherwise printf %g (6 significant
 * digits), or %.9g (float) / %.17g (double) when that does not read back as the same value, with
 * ".0" appended when the text has neither '.' nor 'e'. 3 -> "3.0", 2.05f -> "2.05",
 * 9000000 -> "9e+06", 0.00003 -> "3e-05". buf must hold 32 bytes; returns the length. */
size_t tfs__format_float(float v, char *buf);
size_t tfs__format_double(double v, char *buf);

/* ---- base64 (base64.c) ---------------------------------------------------------------------- */

/* Standard alphabet with '=' padding. */
void tfs__base64_encode(tfs__buf *b, const void *data, size_t n);
/* Decodes standard base64, padding optional, ASCII whitespace skipped. out must hold
 * tfs__base64_decoded_max(n) bytes. Returns false on a character outside the alphabet, bad
 * padding or a dangling single character. */
size_t tfs__base64_decoded_max(size_t n);
bool   tfs__base64_decode(const char *in, size_t n, char *out, size_t *out_len);

/* ---- routes (route.c) ----------------------------------------------------------------------- */

enum tfs__route_kind {
    TFS__ROUTE_STATUS = 0,   /* GET  /v1/models/NAME[/versions/N|/labels/L] */
    TFS__ROUTE_METADATA,     /* GET  /v1/models/NAME[/versions/N|/labels/L]/metadata */
    TFS__ROUTE_PREDICT,      /* POST /v1/models/NAME[/versions/N|/labels/L]:predict */
    TFS__ROUTE_CLASSIFY,
    TFS__ROUTE_REGRESS,
    /* KServe's v2 protocol (v2-rest.c): names and paths are case-sensitive, as the spec says. */
    TFS__ROUTE_V2_SERVER,        /* GET  /v2 */
    TFS__ROUTE_V2_LIVE,          /* GET  /v2/health/live */
    TFS__ROUTE_V2_READY,         /* GET  /v2/health/ready */
    TFS__ROUTE_V2_MODEL,         /* GET  /v2/models/NAME[/versions/N][?signature_name=S] */
    TFS__ROUTE_V2_MODEL_READY,   /* GET  /v2/models/NAME[/versions/N]/ready */
    TFS__ROUTE_V2_INFER,         /* POST /v2/models/NAME[/versions/N]/infer */
};

/* Filled in place by tfs__route_parse and not to be copied: name and label live in buf when they
 * fit (no allocation for a request's route), on the heap otherwise. */
typedef struct tfs__route {
    enum tfs__route_kind kind;
    char                *name;      /* URL-unescaped, owned */
    int64_t              version;   /* -1 when absent */
    char                *label;     /* URL-unescaped, owned; NULL when absent */
    char                *signature; /* v2 metadata's ?signature_name=, owned; NULL when absent */
    char                 buf[128];
} tfs__route;

/* True when the path is handed to the API handler at all: (?i)/v1/.* , or /v2 and /v2/.* ;
 * anything else is the HTTP layer's plain 404. */
bool tfs__route_is_api(const char *path);
/* Matches TF Serving's two URL regexes, or a v2 path. INVALID_ARGUMENT "Malformed request:
 * METHOD PATH", "Failed to convert version: N to numeric.", "Missing model name in request.";
 * NOT_FOUND for a v2 version that is not a number (TF Serving's labels are not v2's). *r is set
 * (and owns its strings) only on success. */
enum tfs_code tfs__route_parse(const char *method, const char *path, tfs__route *r,
                               tfs_status *st);
void tfs__route_deinit(tfs__route *r);
/* %XX decoding (invalid escapes are kept as is). Caller owns the result; NULL on OOM. */
char *tfs__url_unescape(const char *s, size_t n);

/* ---- KServe v2 datatypes (v2-types.c) -------------------------------------------------------- */

/* The v2 datatype name of a dtype ("FP32" for DT_FLOAT, "BYTES" for DT_STRING; _REF dtypes as
 * their base), or NULL for a dtype v2 has no name for. */
const char *tfs__v2_datatype(enum tfs_dtype dt);
/* The dtype of the v2 datatype name[0..n) (case-sensitive, as the spec writes them), or
 * TFS_DTYPE_INVALID. */
enum tfs_dtype tfs__v2_dtype(const char *name, size_t n);

/* ---- status codes (codes.c) ----------------------------------------------------------------- */

/* TF Serving's ToHTTPStatusCode: the one canonical code -> HTTP status table. */
int tfs__http_status(enum tfs_code code);

/* ---- JSON documents (json-parse.c) --------------------------------------------------------- */

/* A parsed request body: rapidjson's grammar and errors (see json-parse.c), values in an arena
 * owned by the document. Every string is a NUL-terminated copy (it may also hold NUL bytes: use
 * n), so a document does not borrow from the text it was parsed from. */
enum tfs__jtype {
    TFS__J_NULL = 0,
    TFS__J_FALSE,
    TFS__J_TRUE,
    TFS__J_NUMBER,
    TFS__J_STRING,
    TFS__J_ARRAY,
    TFS__J_OBJECT,
};

/* How a number token was read, as rapidjson classifies it. */
enum tfs__jnum {
    TFS__JNUM_INT = 0,   /* an integer in int64 range: .i */
    TFS__JNUM_UINT,      /* an integer in (INT64_MAX, UINT64_MAX]: .u */
    TFS__JNUM_DOUBLE,    /* a fraction or exponent, NaN/Infinity, or an integer beyond uint64: .d */
};

/* How an array holds its elements. An array of numbers only is packed: 8 bytes an element
 * instead of a 16-byte value, which keeps a body of short numbers from costing many times its
 * size. */
enum tfs__jarr {
    TFS__JARR_VALUES = 0,   /* .items: n values */
    TFS__JARR_INT,          /* .nums: n int64 */
    TFS__JARR_UINT,         /* .nums: n uint64 */
    TFS__JARR_DOUBLE,       /* .nums: n doubles (their bits) */
    TFS__JARR_MIXED,        /* .nums: n numbers, then n bytes, each its enum tfs__jnum */
};

typedef struct tfs__jv {
    uint8_t  type;   /* enum tfs__jtype */
    uint8_t  num;    /* numbers: enum tfs__jnum; arrays: enum tfs__jarr */
    uint32_t n;      /* string: bytes; array: elements; object: members */
    union {
        int64_t                i;
        uint64_t               u;
        double                 d;
        const char            *s;
        const struct tfs__jv *items;   /* array: n values; object: 2n, key then value */
        const uint64_t        *nums;    /* a packed array's numbers (see enum tfs__jarr) */
    };
} tfs__jv;

typedef struct tfs__jdoc {
    const tfs__jv       *root;     /* NULL until a parse succeeds */
    struct tfs__jchunk  *chunks;   /* arena blocks beyond mem */
    char                *cur;
    size_t               left;
    size_t               next_chunk;
    max_align_t          mem[1024 / sizeof(max_align_t)];   /* the arena's first block */
} tfs__jdoc;

void tfs__jdoc_init(tfs__jdoc *d);
void tfs__jdoc_deinit(tfs__jdoc *d);   /* frees the values; the doc can be parsed into again */
/* Parses len bytes (NUL not needed) into d, replacing what it held. INVALID_ARGUMENT
 * "<rapidjson's message> at offset: N" (e.g. "Invalid value. at offset: 3"), RESOURCE_EXHAUSTED
 * when out of memory. On failure d is empty. */
enum tfs_code tfs__jdoc_parse(tfs__jdoc *d, const char *text, size_t len, tfs_status *st);

static inline bool tfs__jv_is(const tfs__jv *v, enum tfs__jtype t)
{
    return v && v->type == t;
}
static inline bool tfs__jv_is_bool(const tfs__jv *v)
{
    return v && (v->type == TFS__J_TRUE || v->type == TFS__J_FALSE);
}
/* rapidjson's IsInt64 / IsUint64 / IsInt / IsUint / IsDouble: range tests on integers. */
static inline bool tfs__jv_is_int64(const tfs__jv *v)
{
    return v->type == TFS__J_NUMBER && v->num == TFS__JNUM_INT;
}
static inline bool tfs__jv_is_uint64(const tfs__jv *v)
{
    return v->type == TFS__J_NUMBER &&
           (v->num == TFS__JNUM_UINT || (v->num == TFS__JNUM_INT && v->i >= 0));
}
static inline bool tfs__jv_is_int32(const tfs__jv *v)
{
    return tfs__jv_is_int64(v) && v->i >= INT32_MIN && v->i <= INT32_MAX;
}
static inline bool tfs__jv_is_uint32(const tfs__jv *v)
{
    return tfs__jv_is_int64(v) && v->i >= 0 && v->i <= (int64_t)UINT32_MAX;
}
static inline bool tfs__jv_is_double(const tfs__jv *v)
{
    return v->type == TFS__J_NUMBER && v->num == TFS__JNUM_DOUBLE;
}
/* Array element i, as a value of its own (a packed array's numbers have no node to point to). */
static inline tfs__jv tfs__jv_at(const tfs__jv *a, size_t i)
{
    if (a->num == TFS__JARR_VALUES)
        return a->items[i];
    tfs__jv v = {.type = TFS__J_NUMBER, .u = a->nums[i]};
    v.num = a->num == TFS__JARR_MIXED ? ((const uint8_t *)(a->nums + a->n))[i]
                                      : (uint8_t)(a->num - TFS__JARR_INT + TFS__JNUM_INT);
    return v;
}
/* A number's value (GetDouble). Inline: the tensor decoders call it for every element. */
static inline double tfs__jv_double(const tfs__jv *v)
{
    switch (v->num) {
    case TFS__JNUM_INT:  return (double)v->i;
    case TFS__JNUM_UINT: return (double)v->u;
    default:             return v->d;
    }
}
/* Object member i's key and value. */
static inline const tfs__jv *tfs__jv_key(const tfs__jv *o, size_t i)
{
    return &o->items[2 * i];
}
static inline const tfs__jv *tfs__jv_val(const tfs__jv *o, size_t i)
{
    return &o->items[2 * i + 1];
}
/* The first member named key (as rapidjson's FindMember), NULL when absent or v is no object. */
const tfs__jv *tfs__jv_get(const tfs__jv *obj, const char *key);
const char    *tfs__jv_type_name(const tfs__jv *v);  /* "Null", "False", ... "Number" */

/* ---- JSON <-> tensors (json-tensor.c, json-tensor-out.c) ------------------------------------ */

enum tfs__json_format { TFS__JSON_ROW = 0, TFS__JSON_COLUMNAR = 1 };

/* Parses a request body as TF Serving's ParseJson: INVALID_ARGUMENT "JSON Parse error: The
 * document is empty" (no bytes) / "JSON Parse error: <message> at offset: N" / "JSON Value: ...
 * Is not object"; RESOURCE_EXHAUSTED when out of memory. doc must be initialised; release it with
 * tfs__jdoc_deinit whatever the outcome. On success doc->root is an object. */
enum tfs_code tfs__json_parse(const char *body, size_t len, tfs__jdoc *doc, tfs_status *st);
/* The optional "signature_name" of a request object (borrowed from doc; NULL when absent).
 * INVALID_ARGUMENT when it is not a string. */
enum tfs_code tfs__json_signature_name(const tfs__jv *doc, const char **name, tfs_status *st);

/* Decodes the "instances" (row) or "inputs" (columnar) of a predict request into one tensor per
 * signature input, each with the signature's dtype. `sig_name` is the name the request gave (NULL
 * when absent), used only in messages. On success *inputs is an array of *n_inputs tensors whose
 * names are borrowed from sig; free it with tfs__named_tensors_free. INVALID_ARGUMENT with TF
 * Serving's texts, UNIMPLEMENTED for input dtypes JSON cannot carry. */
enum tfs_code tfs__json_decode_predict(const tfs__jv *doc, const tfs_signature *sig,
                                       const char *sig_name, enum tfs__json_format *fmt,
                                       tfs_named_tensor **inputs, int *n_inputs, tfs_status *st);
void tfs__named_tensors_free(tfs_named_tensor *t, int n);   /* unrefs tensors; NULL-safe */

/* Writes {"predictions": ...} (row) or {"outputs": ...} (columnar) for the named output tensors
 * (in the given order). INVALID_ARGUMENT "Tensor name: X has inconsistent batch size: ...",
 * "... has no shape information ", "Failed to write JSON value for tensor type: T". */
enum tfs_code tfs__json_encode_predict(enum tfs__json_format fmt, const tfs_named_tensor *outputs,
                                       int n_outputs, tfs__buf *out, tfs_status *st);

/* Writes TF Serving's error body {"error": "<msg>"}. */
void tfs__json_error(tfs__buf *out, const char *msg);

/* The text TF Serving uses for a JSON value inside an error message (rapidjson pretty form), cut
 * to at most `max` bytes (with "..." appended when cut) so the rest of a message survives. */
void tfs__json_value_text(const tfs__jv *v, tfs__buf *out, size_t max);

/* ---- status and metadata documents (json-meta.c) -------------------------------------------- */

/* GetModelStatusResponse as protobuf's JSON printer writes it (snake_case, version as a string,
 * state and error_code names). vs[0..n-1] in the order given (the loader's: newest first). */
enum tfs_code tfs__json_model_status(const tfs_version_status *vs, int n, tfs__buf *out,
                                     tfs_status *st);
/* GetModelMetadataResponse for metadata_field "signature_def": model_spec {name, signature_name "",
 * version} and metadata.signature_def.signature_def.{key: SignatureDef}. */
enum tfs_code tfs__json_model_metadata(const char *model_name, int64_t version,
                                       const tfs_signature *const *sigs, int n_sigs,
                                       tfs__buf *out, tfs_status *st);

/* ---- REST request processing (rest.c) ------------------------------------------------------- */

typedef struct tfs__rest_response {
    int         http_status;
    const char *content_type;   /* static string */
    tfs__buf    body;
    int64_t     queue_us;       /* a predict's time in the batch queue and in the model run, */
    int64_t     compute_us;     /* for the X-Tfserve-*-Micros headers; -1 when none ran */
    int64_t     json_len;       /* a v2 body with binary tensors after its JSON: the JSON's bytes,
                                 * for Inference-Header-Content-Length; -1 otherwise */
} tfs__rest_response;

/* One REST request as the HTTP layer hands it over. */
typedef struct tfs__rest_request {
    const char       *method;
    const char       *path;       /* the target as sent, query included */
    const char       *body;
    size_t            body_len;
    int64_t           json_len;   /* Inference-Header-Content-Length (a v2 infer body's JSON
                                   * bytes, binary tensors after them); -1 when absent, -2 when
                                   * it is no decimal number */
    int64_t           deadline_ns;   /* tfs_batch_now_ns() clock, 0 = none */
    const tfs_health *health;     /* for v2's readiness (drain); NULL: the loader alone */
} tfs__rest_request;

/* Answers one REST request completely (routing, model lookup, JSON decode, run, encode), as TF
 * Serving's HttpRestApiHandler does, waiting for a batched predict on this thread. Never fails:
 * errors become {"error": ...} bodies with the mapped status. resp->body must be released with
 * tfs__buf_deinit. (Tests; the HTTP layer uses the two halves below.) */
void tfs__rest_process(tfs_loader *l, const char *method, const char *path, const char *body,
                       size_t body_len, tfs__rest_response *resp);

/* The two halves, so that no HTTP thread waits while a batch forms. tfs__rest_start answers into
 * *resp and returns NULL, except for a predict that reached its run: it then returns the pending
 * call, and wake(wake_ctx) runs exactly once when its outcome is in (on a batch thread, or on this
 * thread before tfs__rest_start returns, or in tfs__rest_call_cancel); after wake, and only then,
 * tfs__rest_call_finish encodes the answer into *resp, records the request and frees the call.
 * A predict or v2 infer not started by req->deadline_ns is 504. */
typedef struct tfs__rest_call tfs__rest_call;
typedef void (*tfs__rest_wake_fn)(void *ctx);
tfs__rest_call *tfs__rest_start(tfs_loader *l, const tfs__rest_request *req,
                                tfs__rest_wake_fn wake, void *wake_ctx, tfs__rest_response *resp);
void tfs__rest_call_finish(tfs__rest_call *c, tfs__rest_response *resp);
/* The client went away: cancels a call still queued (wake then runs on this thread, and the
 * answer is CANCELLED). False when it runs already; it completes normally. */
bool tfs__rest_call_cancel(tfs__rest_call *c);

/* GET|HEAD /healthz and /readyz (health.c): true when the request was one of them and *resp
 * holds the answer (release its body with tfs__buf_deinit); false (resp untouched) otherwise or
 * when h is NULL. */
bool tfs__health_rest(const tfs_health *h, const char *method, const char *path,
                      tfs__rest_response *resp);

/* ---- KServe v2 over REST (v2-json.c: the infer codec; v2-rest.c: the other endpoints) ------ */

/* What an infer request asked of its answer, kept from decoding to encoding: the JSON document is
 * dropped before the run, as v1's is. */
typedef struct tfs__v2_infer {
    char *id;           /* the request's "id", owned; NULL when it had none */
    bool  binary_all;   /* parameters.binary_data_output */
    int   n_outputs;    /* outputs asked for by name; 0: every output of the signature */
    int  *outputs;      /* [n_outputs] indexes into sig->outputs, owned */
    bool *binary;       /* [n_outputs] each one's binary_data, owned */
} tfs__v2_infer;

/* Parses the JSON part of an infer body: the first json_len bytes (Inference-Header-Content-Length)
 * or, with json_len < 0, all of them. *bin_off is where the binary tensors start (len when none);
 * *sig_name is parameters.signature_name (borrowed from doc; NULL when absent). INVALID_ARGUMENT
 * for a header length past the body or json_len -2 (a header that is no number), the JSON parser's errors, a root that is no object, a
 * "parameters" that is no object, a signature_name that is no string. doc must be initialised;
 * release it with tfs__jdoc_deinit whatever the outcome. */
enum tfs_code tfs__v2_parse(const char *body, size_t len, int64_t json_len, tfs__jdoc *doc,
                            size_t *bin_off, const char **sig_name, tfs_status *st);
/* Decodes "inputs" into one tensor per request input (names borrowed from sig, in request order;
 * free with tfs__named_tensors_free), with bin[0..bin_len) the binary tensors, and "id",
 * "outputs" and binary_data_output into *req (release with tfs__v2_infer_deinit, also after a
 * failure). The input names get the service layer's checks before any tensor is decoded; every
 * tensor counts against one --max_tensor_bytes budget for the request. INVALID_ARGUMENT naming
 * the input (or output) and what was expected: datatype, shape against the data's element
 * count, binary sizes against shape x datatype, binary bytes left over. */
enum tfs_code tfs__v2_decode_infer(const tfs__jv *root, const char *bin, size_t bin_len,
                                   const tfs_signature *sig, tfs_named_tensor **inputs,
                                   int *n_inputs, tfs__v2_infer *req, tfs_status *st);
void tfs__v2_infer_deinit(tfs__v2_infer *req);   /* NULL-safe */
/* Writes the infer response for the signature's outputs (outputs[i] is sig->outputs[i]'s value),
 * those req asked for: JSON, then the binary tensors of the outputs asked for in binary, in
 * order; *json_len is the JSON's length when there are any, -1 otherwise. */
enum tfs_code tfs__v2_encode_infer(const tfs__v2_infer *req, const char *model, int64_t version,
                                   const tfs_signature *sig, tfs_tensor *const *outputs,
                                   tfs__buf *out, int64_t *json_len, tfs_status *st);

/* GET /v2, /v2/health/live, /v2/health/ready, /v2/models/NAME[/versions/N][/ready]: the answer
 * into resp (status and body). Readiness is /readyz's (tfs_health_ready; the loader's alone
 * when h is NULL); a model version is ready when it is AVAILABLE and no drain has started.
 * Returns the request's code for the record; errors are left in st for the caller's body. */
enum tfs_code tfs__v2_rest_get(tfs_loader *l, const tfs_health *h, const tfs__route *r,
                               tfs__rest_response *resp, tfs_status *st);
/* v2 answers 503 for a model that is configured but not ready, where the loader's lookup says
 * NOT_FOUND for any version that does not serve: code, or UNAVAILABLE naming the version's state
 * (and its load error) when code is NOT_FOUND and no version of r's model (r's version, when
 * given) is AVAILABLE. */
enum tfs_code tfs__v2_not_ready(tfs_loader *l, const tfs__route *r, enum tfs_code code,
                                tfs_status *st);

/* ---- classify and regress (service-example.c, json-example.c) ------------------------------- */

/* Classify and Regress as TF Serving's classifier.cc / regressor.cc run them, protocol-neutral:
 * the REST front end (JSON examples) and the gRPC one (ClassificationRequest.input, whose Examples
 * it serializes) both call these with the batch of serialized tf.Example bytes, one per example
 * (with a context, each is serialized(context) followed by serialized(example)).
 *
 * Order of work and errors: ModelSpec name and servable lookup (tfs_service_acquire's texts); the
 * signature spec->signature_name (NULL or "" = "serving_default"), unknown: INVALID_ARGUMENT "No
 * signature was found with the name: S"; the signature contract (INVALID_ARGUMENT "Expected one
 * input Tensor.", "Expected one or two output Tensors, found N" / "Expected one output Tensor.",
 * "No classification inputs found in SignatureDef: ...", "Expected classification signature
 * outputs to contain at least one of \"classes\" or \"scores\". Signature was: ...", "No
 * regression inputs/outputs found in SignatureDef: ..."); "Input is empty." for no examples; the
 * run (ParseExample's INVALID_ARGUMENT texts for bad features); then the output checks with
 * TensorFlow Serving's texts ("Expected classes Tensor of DT_STRING.  Got: DT_INT32", "Expected
 * output Tensor shape to be either [batch_size] or [batch_size, 1] but got [2,2]", ...). The
 * signature's method_name is not checked (TF2 exports call every signature "predict"). */
typedef struct tfs__classify_result {
    int64_t           n_examples;
    int64_t           n_classes;
    const tfs_string *labels;    /* [n_examples][n_classes] row-major; NULL: no "classes" output,
                                  * every label is "" */
    const float      *scores;    /* [n_examples][n_classes]; NULL: no "scores" output, every
                                  * score is 0 (protobuf's default) */
    int64_t           version;   /* the version that answered (for a response's model_spec) */
    /* private: the output tensors labels and scores point into */
    tfs_tensor       *classes_t;
    tfs_tensor       *scores_t;
} tfs__classify_result;

typedef struct tfs__regress_result {
    int64_t n_examples;
    float  *values;    /* [n_examples], owned */
    int64_t version;   /* the version that answered */
} tfs__regress_result;

/* On success *res is filled (release with the matching _deinit); on failure it is empty and safe to
 * deinit. */
enum tfs_code tfs__service_classify(tfs_loader *l, const tfs_model_spec *spec,
                                    const tfs_string *examples, int64_t n_examples,
                                    tfs__classify_result *res, tfs_status *st);
enum tfs_code tfs__service_regress(tfs_loader *l, const tfs_model_spec *spec,
                                   const tfs_string *examples, int64_t n_examples,
                                   tfs__regress_result *res, tfs_status *st);
void tfs__classify_result_deinit(tfs__classify_result *res);   /* NULL-safe */
void tfs__regress_result_deinit(tfs__regress_result *res);     /* NULL-safe */

/* ---- predict input names (service.c) --------------------------------------------------------- */

/* The Predict input checks of tfs_service_run on the request's input names alone (each given
 * once), so that a front end refuses a request before it decodes any tensor: TF Serving's texts
 * for a wrong count, a signature input neither sent nor defaulted, a name the signature lacks;
 * "duplicate input tensor alias: NAME" for a name given twice. Time linear in n. */
enum tfs_code tfs__service_check_input_names(const tfs_signature *sig, const char *const *names,
                                             int n, tfs_status *st);

/* ---- the service layer on a model that is not served yet (service.c, service-example.c) ------ */

/* Model warmup runs requests on a freshly loaded model before its version is AVAILABLE, so there
 * is no servable handle to acquire: these are tfs_service_signature, tfs_service_run and
 * tfs__service_classify / _regress with the same checks and texts, on a borrowed model
 * (res->version is left 0). */
enum tfs_code tfs__service_signature_model(const tfs_savedmodel *m, const char *name,
                                           enum tfs_api api, const tfs_signature **out,
                                           tfs_status *st);
enum tfs_code tfs__service_run_model(const tfs_savedmodel *m, const tfs_signature *sig,
                                     const tfs_named_tensor *inputs, int n_inputs,
                                     tfs_tensor **outputs, tfs_status *st);
enum tfs_code tfs__service_classify_model(const tfs_savedmodel *m, const char *signature_name,
                                          const tfs_string *examples, int64_t n_examples,
                                          tfs__classify_result *res, tfs_status *st);
enum tfs_code tfs__service_regress_model(const tfs_savedmodel *m, const char *signature_name,
                                         const tfs_string *examples, int64_t n_examples,
                                         tfs__regress_result *res, tfs_status *st);

/* A classify/regress REST body decoded as TF Serving's FillClassifyRegressRequestFromJson does:
 * signature_name (borrowed from the document) and one serialized tf.Example per element of
 * "examples" (context bytes first when a "context" is given). */
typedef struct tfs__json_examples {
    const char *signature_name;   /* NULL when absent; borrowed from the JSON document */
    int64_t     n;
    tfs_string *examples;         /* [n], owned */
} tfs__json_examples;

/* JSON -> tf.Example typing: integer -> int64_list, decimal -> float_list, true/false -> int64
 * 1/0, string -> bytes_list, {"b64": s} -> bytes_list of the decoded bytes. INVALID_ARGUMENT with
 * TF Serving's texts ("When method is classify, key 'examples' is expected and was not found",
 * "Expecting 'examples' value to be an list/array", "'examples' value is an empty array",
 * "Example must be JSON object but got JSON Array", "Feature: f has element with unexpected JSON
 * type: Null", "Unexpected element type in feature: f expecting type: int64", "Unable to base64
 * decode"). On failure *out is empty and safe to deinit. */
enum tfs_code tfs__json_decode_examples(const tfs__jv *doc, tfs__json_examples *out,
                                        tfs_status *st);
void tfs__json_examples_deinit(tfs__json_examples *e);   /* NULL-safe */

/* {"results": [[["label", score], ...], ...]} and {"results": [v0, v1, ...]}, rapidjson's pretty
 * form with single-line arrays and TF Serving's float text. */
enum tfs_code tfs__json_encode_classify(const tfs__classify_result *res, tfs__buf *out,
                                        tfs_status *st);
enum tfs_code tfs__json_encode_regress(const tfs__regress_result *res, tfs__buf *out,
                                       tfs_status *st);

/* ---- TLS material (tls.c) ------------------------------------------------------------------- */

/* Reads a whole PEM file (at most 1 MiB) as a NUL-terminated string the caller frees with
 * tfs_free. NOT_FOUND / PERMISSION_DENIED / INVALID_ARGUMENT "could not open 'PATH': why". */
enum tfs_code tfs__tls_read_file(const char *path, char **out, tfs_status *st);

/* A server's key, certificate (chain) and optional CA certificates as PEM text, with the names
 * errors give them (a config field or a flag). */
typedef struct tfs__tls_pems {
    const char *key, *cert, *ca;   /* borrowed; ca may be NULL or "" */
    const char *key_name, *cert_name, *ca_name;
} tfs__tls_pems;

/* INVALID_ARGUMENT naming the part unless the key parses (and needs no passphrase), the
 * certificate parses and matches the key, and ca (when given) holds at least one certificate. */
enum tfs_code tfs__tls_check(const tfs__tls_pems *p, tfs_status *st);

#endif
