/* The REST side of Classify and Regress: the request body's JSON examples become serialized
 * tf.Example bytes the way TF Serving's FillClassifyRegressRequestFromJson and AddValueToFeature
 * type them (the JSON token decides: `2` is an int64_list, `2.0` a float_list, so a float feature
 * sent as `2` fails later in ParseExample, as it does in TF Serving), and the results become
 * {"results": ...} as MakeJsonFromClassificationResult / MakeJsonFromRegressionResult write them.
 *
 * The protobuf wire bytes are written by hand, it is four tiny messages:
 *   Example  { 1: Features }            Features { 1: repeated entry { 1: key, 2: Feature } }
 *   Feature  oneof { 1: BytesList, 2: FloatList, 3: Int64List }, each { 1: repeated value }
 * with float and int64 values packed, as protobuf writes feature.proto's [packed = true] fields.
 * A context is serialized once and put in front of every example: protobuf parsing merges
 * concatenated messages, so an example's feature replaces the context's one of the same name,
 * exactly what TF Serving's InputToSerializedExampleTensor feeds.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

/* ---- wire writer ---------------------------------------------------------------------------- */

/* A length-delimited field: tag, length, bytes. */
static void put_bytes_field(tfs__buf *b, unsigned field, const void *p, size_t n)
{
    tfs__buf_varint(b, (uint64_t)field << 3 | 2);
    tfs__buf_varint(b, n);
    tfs__buf_append(b, p, n);
}

static void put_float_le(tfs__buf *b, float f)
{
    uint32_t u;
    char     le[4];
    memcpy(&u, &f, sizeof u);
    for (int i = 0; i < 4; i++)
        le[i] = (char)(u >> (8 * i));
    tfs__buf_append(b, le, 4);
}

static void buf_reset(tfs__buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

/* ---- JSON -> Feature ------------------------------------------------------------------------ */

/* Feature.kind as the list field number; 0 = not set. */
enum { KIND_NONE = 0, KIND_BYTES = 1, KIND_FLOAT = 2, KIND_INT64 = 3 };

static const char *kind_name(int kind)
{
    return kind == KIND_BYTES ? "bytes" : kind == KIND_FLOAT ? "float" : "int64";
}

static bool is_b64_object(const tfs__jv *v)
{
    return tfs__jv_is(v, TFS__J_OBJECT) && v->n == 1 &&
           tfs__jv_is(tfs__jv_get(v, "b64"), TFS__J_STRING);
}

/* AddValueToFeature: appends one element to the list being built in `list` (the list message's
 * body), after checking it agrees with the kind the feature already has. */
static enum tfs_code add_element(const tfs__jv *v, const char *name, int *kind, tfs__buf *list,
                                 tfs_status *st)
{
    int want;
    switch (v->type) {
    case TFS__J_TRUE:
    case TFS__J_FALSE:
        want = KIND_INT64;
        break;
    case TFS__J_NUMBER:
        want = v->num == TFS__JNUM_DOUBLE ? KIND_FLOAT : KIND_INT64;
        break;
    case TFS__J_STRING:
        want = KIND_BYTES;
        break;
    case TFS__J_OBJECT:
        if (is_b64_object(v)) {
            want = KIND_BYTES;
            break;
        }
        /* fall through */
    default:
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Feature: %s has element with unexpected JSON type: %s", name,
                       tfs__jv_type_name(v));
    }
    if (*kind != KIND_NONE && *kind != want)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Unexpected element type in feature: %s expecting type: %s", name,
                       kind_name(*kind));
    *kind = want;
    switch (v->type) {
    case TFS__J_TRUE:
    case TFS__J_FALSE:
        tfs__buf_varint(list, v->type == TFS__J_TRUE ? 1 : 0);
        break;
    case TFS__J_NUMBER:
        if (v->num == TFS__JNUM_UINT)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "Feature: %s has uint64_t element. Only int64_t is supported.", name);
        if (v->num == TFS__JNUM_INT) {
            /* negative int64 values are 10-byte varints of their two's complement, as protobuf */
            tfs__buf_varint(list, (uint64_t)v->i);
        } else {
            /* IsLosslessDecimal<float>: NaN and the infinities pass, finite values must fit */
            if (isfinite(v->d) && (v->d > FLT_MAX || v->d < -FLT_MAX)) {
                tfs__buf text;
                tfs__buf_init(&text);
                tfs__json_value_text(v, &text, 256);
                TFS_ERR(st, TFS_INVALID_ARGUMENT,
                        "Cannot convert JSON value: %s to float without loss of precision.",
                        text.data ? text.data : "");
                tfs__buf_deinit(&text);
                return TFS_INVALID_ARGUMENT;
            }
            put_float_le(list, (float)v->d);
        }
        break;
    case TFS__J_STRING:
        put_bytes_field(list, 1, v->s, v->n);
        break;
    default: { /* {"b64": ...} */
        const tfs__jv *s = tfs__jv_get(v, "b64");
        size_t         n = s->n, got = 0;
        char          *tmp = tfs_malloc(tfs__base64_decoded_max(n) + 1);
        if (!tmp)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED,
                           "out of memory decoding base64 of feature %s (%zu bytes)", name, n);
        if (!tfs__base64_decode(s->s, n, tmp, &got)) {
            tfs_free(tmp);
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Unable to base64 decode");
        }
        put_bytes_field(list, 1, tmp, got);
        tfs_free(tmp);
        break;
    }
    }
    return TFS_OK;
}

/* Scratch buffers reused across features and examples. */
typedef struct scratch {
    tfs__buf list;     /* the list message body */
    tfs__buf feature;  /* one Feature message */
    tfs__buf entry;    /* one map entry */
    tfs__buf features; /* the Features message body */
} scratch;

/* FillExampleFromJson: one JSON object -> serialized Example appended to out. */
static enum tfs_code example_bytes(const tfs__jv *obj, scratch *s, tfs__buf *out,
                                   tfs_status *st)
{
    if (!tfs__jv_is(obj, TFS__J_OBJECT))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Example must be JSON object but got JSON %s",
                       tfs__jv_type_name(obj));
    buf_reset(&s->features);
    for (uint32_t m = 0; m < obj->n; m++) {
        const tfs__jv *k = tfs__jv_key(obj, m), *val = tfs__jv_val(obj, m);
        const char    *key = k->s;
        int            kind = KIND_NONE;
        enum tfs_code  code = TFS_OK;
        buf_reset(&s->list);
        if (tfs__jv_is(val, TFS__J_ARRAY)) {
            for (uint32_t i = 0; i < val->n; i++) {
                tfs__jv e = tfs__jv_at(val, i);
                if ((code = add_element(&e, key, &kind, &s->list, st)) != TFS_OK)
                    return code;
            }
        } else if ((code = add_element(val, key, &kind, &s->list, st)) != TFS_OK) {
            return code;
        }
        buf_reset(&s->feature);
        if (kind == KIND_BYTES) {
            put_bytes_field(&s->feature, KIND_BYTES, s->list.data, s->list.len);
        } else if (kind != KIND_NONE) {
            /* the packed values are field 1 of the FloatList / Int64List */
            buf_reset(&s->entry);
            put_bytes_field(&s->entry, 1, s->list.data, s->list.len);
            put_bytes_field(&s->feature, (unsigned)kind, s->entry.data, s->entry.len);
        }
        buf_reset(&s->entry);
        put_bytes_field(&s->entry, 1, key, k->n);
        put_bytes_field(&s->entry, 2, s->feature.data, s->feature.len);
        put_bytes_field(&s->features, 1, s->entry.data, s->entry.len);
    }
    /* protobuf writes `features` only once something set it: {} is the empty Example */
    if (obj->n > 0)
        put_bytes_field(out, 1, s->features.data, s->features.len);
    return TFS_OK;
}

enum tfs_code tfs__json_decode_examples(const tfs__jv *doc, tfs__json_examples *out,
                                        tfs_status *st)
{
    scratch        s;
    tfs__buf       ctx, ex;
    enum tfs_code  code;
    const tfs__jv *context = tfs__jv_get(doc, "context");
    const tfs__jv *examples = tfs__jv_get(doc, "examples");

    memset(out, 0, sizeof *out);
    memset(&s, 0, sizeof s);
    tfs__buf_init(&ctx);
    tfs__buf_init(&ex);
    if ((code = tfs__json_signature_name(doc, &out->signature_name, st)) != TFS_OK)
        goto fail;
    if (context && (code = example_bytes(context, &s, &ctx, st)) != TFS_OK)
        goto fail;
    if (!examples) {
        /* TF Serving says "classify" for regress requests too */
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "When method is classify, key 'examples' is expected and was not found");
        goto fail;
    }
    if (!tfs__jv_is(examples, TFS__J_ARRAY)) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expecting 'examples' value to be an list/array");
        goto fail;
    }
    size_t n = examples->n;
    if (n == 0) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "'examples' value is an empty array");
        goto fail;
    }
    out->examples = tfs_calloc(n, sizeof *out->examples);
    if (!out->examples) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory decoding %zu examples", n);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        buf_reset(&ex);
        if (ctx.len)
            tfs__buf_append(&ex, ctx.data, ctx.len);
        tfs__jv example = tfs__jv_at(examples, i);
        if ((code = example_bytes(&example, &s, &ex, st)) != TFS_OK)
            goto fail;
        if (ex.oom || ctx.oom || s.list.oom || s.feature.oom || s.entry.oom || s.features.oom) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory serializing example %zu", i);
            goto fail;
        }
        /* hand the buffer over (a fresh one for the next example) */
        out->examples[i].data = ex.data;
        out->examples[i].len = ex.len;
        out->n = (int64_t)i + 1;
        tfs__buf_init(&ex);
    }
    code = TFS_OK;
    tfs_status_clear(st);
    goto done;
fail:
    tfs__json_examples_deinit(out);
done:
    tfs__buf_deinit(&ctx);
    tfs__buf_deinit(&ex);
    tfs__buf_deinit(&s.list);
    tfs__buf_deinit(&s.feature);
    tfs__buf_deinit(&s.entry);
    tfs__buf_deinit(&s.features);
    return code;
}

void tfs__json_examples_deinit(tfs__json_examples *e)
{
    if (!e)
        return;
    for (int64_t i = 0; i < e->n; i++)
        tfs_free(e->examples[i].data);
    tfs_free(e->examples);
    memset(e, 0, sizeof *e);
}

/* ---- results -> JSON ------------------------------------------------------------------------ */

static enum tfs_code finish(tfs__jw *w, tfs__buf *out, size_t start, const char *what,
                            tfs_status *st)
{
    tfs__jw_deinit(w);
    if (!out->oom) {
        tfs_status_clear(st);
        return TFS_OK;
    }
    out->len = start;
    if (out->data)
        out->data[start] = 0;
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing the %s response", what);
}

enum tfs_code tfs__json_encode_classify(const tfs__classify_result *res, tfs__buf *out,
                                        tfs_status *st)
{
    tfs__jw w;
    size_t  start = out->len;

    if (res->n_examples <= 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "empty ClassificationResults");
    tfs__jw_init(&w, out, 4);
    w.single_line = true; /* rapidjson kFormatSingleLineArray */
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "results");
    tfs__jw_begin_array(&w);
    for (int64_t i = 0; i < res->n_examples && !out->oom; i++) {
        tfs__jw_begin_array(&w);
        for (int64_t c = 0; c < res->n_classes; c++) {
            int64_t k = i * res->n_classes + c;
            tfs__jw_begin_array(&w);
            if (res->labels)
                tfs__jw_string(&w, res->labels[k].data ? res->labels[k].data : "",
                               res->labels[k].len);
            else
                tfs__jw_cstring(&w, "");
            tfs__jw_float(&w, res->scores ? res->scores[k] : 0.0f);
            tfs__jw_end_array(&w);
        }
        tfs__jw_end_array(&w);
    }
    tfs__jw_end_array(&w);
    tfs__jw_end_object(&w);
    return finish(&w, out, start, "classify", st);
}

enum tfs_code tfs__json_encode_regress(const tfs__regress_result *res, tfs__buf *out,
                                       tfs_status *st)
{
    tfs__jw w;
    size_t  start = out->len;

    if (res->n_examples <= 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "empty RegressionResults");
    tfs__jw_init(&w, out, 4);
    w.single_line = true;
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "results");
    tfs__jw_begin_array(&w);
    for (int64_t i = 0; i < res->n_examples && !out->oom; i++)
        tfs__jw_float(&w, res->values[i]);
    tfs__jw_end_array(&w);
    tfs__jw_end_object(&w);
    return finish(&w, out, start, "regress", st);
}
