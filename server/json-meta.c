/* The GET documents of the REST API: model status and model metadata.
 *
 * TF Serving prints both with protobuf's JSON printer with "always print primitive fields" and
 * snake_case names, so every field appears even when empty, int64 values (versions, dim sizes) are
 * JSON strings, enums are their names, and the layout is one space of indent per level. The
 * metadata document nests `signature_def` twice: the key of the metadata map, then the field of
 * SignatureDefMap. The field order within each message is the .proto declaration order, which is
 * what the printer uses (TensorInfo: name is in a oneof declared first, but TF Serving's published
 * documents show dtype, tensor_shape, name; we follow the documents).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server-impl.h"

static void write_str(tfs__jw *w, const char *key, const char *val)
{
    tfs__jw_key(w, key);
    tfs__jw_cstring(w, val);
}

static void write_int64_str(tfs__jw *w, const char *key, int64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)v);
    write_str(w, key, t);
}

static enum tfs_code finish(tfs__buf *out, size_t start, const char *what, tfs_status *st)
{
    if (!out->oom) {
        tfs_status_clear(st);
        return TFS_OK;
    }
    out->len = start;
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing the %s document", what);
}

/* ---- status --------------------------------------------------------------------------------- */

enum tfs_code tfs__json_model_status(const tfs_version_status *vs, int n, tfs__buf *out,
                                     tfs_status *st)
{
    size_t  start = out->len;
    tfs__jw w;
    tfs__jw_init(&w, out, 1);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "model_version_status");
    tfs__jw_begin_array(&w);
    for (int i = 0; i < n; i++) {
        tfs__jw_begin_object(&w);
        write_int64_str(&w, "version", vs[i].version);
        write_str(&w, "state", tfs_version_state_name(vs[i].state));
        tfs__jw_key(&w, "status");
        tfs__jw_begin_object(&w);
        write_str(&w, "error_code", tfs_code_name(vs[i].status.code));
        write_str(&w, "error_message", vs[i].status.code == TFS_OK ? "" : vs[i].status.msg);
        tfs__jw_end_object(&w);
        tfs__jw_end_object(&w);
    }
    tfs__jw_end_array(&w);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
    return finish(out, start, "model status", st);
}

/* ---- metadata ------------------------------------------------------------------------------- */

/* TensorShapeProto: {"dim": [{"size": "N", "name": ""}, ...], "unknown_rank": bool} */
static void write_shape(tfs__jw *w, int rank, const int64_t *dims)
{
    tfs__jw_key(w, "tensor_shape");
    tfs__jw_begin_object(w);
    tfs__jw_key(w, "dim");
    tfs__jw_begin_array(w);
    for (int i = 0; i < rank; i++) {
        tfs__jw_begin_object(w);
        write_int64_str(w, "size", dims[i]);
        write_str(w, "name", "");
        tfs__jw_end_object(w);
    }
    tfs__jw_end_array(w);
    tfs__jw_key(w, "unknown_rank");
    tfs__jw_bool(w, rank < 0);
    tfs__jw_end_object(w);
}

static void write_tensor_info(tfs__jw *w, const tfs_tensor_info *ti)
{
    tfs__jw_key(w, ti->alias);
    tfs__jw_begin_object(w);
    write_str(w, "dtype", tfs_dtype_name(ti->dtype));
    write_shape(w, ti->shape.rank, ti->shape.dims);
    if (ti->tensor_name)
        write_str(w, "name", ti->tensor_name);
    tfs__jw_end_object(w);
}

/* Which TensorProto field holds the values of a dtype (AsProtoField), or NULL for none we print. */
static const char *proto_field(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_FLOAT:    return "float_val";
    case TFS_DTYPE_DOUBLE:   return "double_val";
    case TFS_DTYPE_INT32:
    case TFS_DTYPE_INT16:
    case TFS_DTYPE_INT8:
    case TFS_DTYPE_UINT8:
    case TFS_DTYPE_UINT16:   return "int_val";
    case TFS_DTYPE_STRING:   return "string_val";
    case TFS_DTYPE_INT64:    return "int64_val";
    case TFS_DTYPE_BOOL:     return "bool_val";
    case TFS_DTYPE_HALF:
    case TFS_DTYPE_BFLOAT16: return "half_val";
    case TFS_DTYPE_UINT32:   return "uint32_val";
    case TFS_DTYPE_UINT64:   return "uint64_val";
    default:                 return NULL;
    }
}

/* One element in protobuf-JSON form: int64/uint64 as strings, floats shortest, bytes base64. */
static void write_proto_value(tfs__jw *w, const tfs_tensor *t, int64_t i)
{
    const void *d = t->data;
    char        txt[32];
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT: {
        float f = ((const float *)d)[i];
        if (isnan(f) || isinf(f)) {
            tfs__jw_cstring(w, isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
        } else {
            snprintf(txt, sizeof txt, "%.6g", (double)f);
            if (strtof(txt, NULL) != f)
                snprintf(txt, sizeof txt, "%.9g", (double)f);
            tfs__jw_raw(w, txt);
        }
        break;
    }
    case TFS_DTYPE_DOUBLE: {
        double f = ((const double *)d)[i];
        if (isnan(f) || isinf(f)) {
            tfs__jw_cstring(w, isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
        } else {
            snprintf(txt, sizeof txt, "%.15g", f);
            if (strtod(txt, NULL) != f)
                snprintf(txt, sizeof txt, "%.17g", f);
            tfs__jw_raw(w, txt);
        }
        break;
    }
    case TFS_DTYPE_INT32:    tfs__jw_int(w, ((const int32_t *)d)[i]); break;
    case TFS_DTYPE_INT16:    tfs__jw_int(w, ((const int16_t *)d)[i]); break;
    case TFS_DTYPE_INT8:     tfs__jw_int(w, ((const int8_t *)d)[i]); break;
    case TFS_DTYPE_UINT8:    tfs__jw_int(w, ((const uint8_t *)d)[i]); break;
    case TFS_DTYPE_UINT16:
    case TFS_DTYPE_HALF:
    case TFS_DTYPE_BFLOAT16: tfs__jw_int(w, ((const uint16_t *)d)[i]); break;
    case TFS_DTYPE_UINT32:   tfs__jw_uint(w, ((const uint32_t *)d)[i]); break;
    case TFS_DTYPE_BOOL:     tfs__jw_bool(w, ((const bool *)d)[i]); break;
    case TFS_DTYPE_INT64:
        snprintf(txt, sizeof txt, "%lld", (long long)((const int64_t *)d)[i]);
        tfs__jw_cstring(w, txt);
        break;
    case TFS_DTYPE_UINT64:
        snprintf(txt, sizeof txt, "%llu", (unsigned long long)((const uint64_t *)d)[i]);
        tfs__jw_cstring(w, txt);
        break;
    case TFS_DTYPE_STRING: {
        const tfs_string *s = &((const tfs_string *)d)[i];
        tfs__buf          b64;
        tfs__buf_init(&b64);
        tfs__base64_encode(&b64, s->data, s->len);
        if (b64.oom)
            w->out->oom = true;
        tfs__jw_string(w, b64.data ? b64.data : "", b64.len);
        tfs__buf_deinit(&b64);
        break;
    }
    default:
        break;
    }
}

/* A default value as a TensorProto in protobuf JSON (every field printed). */
static void write_tensor_proto(tfs__jw *w, const tfs_tensor *t)
{
    static const char *const fields[] = {
        "half_val",  "float_val", "double_val", "int_val",      "string_val", "scomplex_val",
        "int64_val", "bool_val",  "dcomplex_val", "resource_handle_val", "variant_val",
        "uint32_val", "uint64_val",
    };
    const char *mine = proto_field(t->dtype);
    tfs__jw_begin_object(w);
    write_str(w, "dtype", tfs_dtype_name(t->dtype));
    write_shape(w, t->rank, t->dims);
    tfs__jw_key(w, "version_number");
    tfs__jw_int(w, 0);
    write_str(w, "tensor_content", "");
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        tfs__jw_key(w, fields[f]);
        tfs__jw_begin_array(w);
        if (mine && strcmp(mine, fields[f]) == 0)
            for (int64_t i = 0; i < t->nelem; i++)
                write_proto_value(w, t, i);
        tfs__jw_end_array(w);
    }
    tfs__jw_end_object(w);
}

static void write_signature(tfs__jw *w, const tfs_signature *sig)
{
    tfs__jw_key(w, sig->key);
    tfs__jw_begin_object(w);
    tfs__jw_key(w, "inputs");
    tfs__jw_begin_object(w);
    for (int i = 0; i < sig->n_inputs; i++)
        write_tensor_info(w, &sig->inputs[i]);
    tfs__jw_end_object(w);
    tfs__jw_key(w, "outputs");
    tfs__jw_begin_object(w);
    for (int i = 0; i < sig->n_outputs; i++)
        write_tensor_info(w, &sig->outputs[i]);
    tfs__jw_end_object(w);
    write_str(w, "method_name", sig->method_name ? sig->method_name : "");
    tfs__jw_key(w, "defaults");
    tfs__jw_begin_object(w);
    for (int i = 0; i < sig->n_defaults; i++) {
        tfs__jw_key(w, sig->default_names[i]);
        write_tensor_proto(w, sig->defaults[i]);
    }
    tfs__jw_end_object(w);
    tfs__jw_end_object(w);
}

enum tfs_code tfs__json_model_metadata(const char *model_name, int64_t version,
                                       const tfs_signature *const *sigs, int n_sigs,
                                       tfs__buf *out, tfs_status *st)
{
    size_t  start = out->len;
    tfs__jw w;
    tfs__jw_init(&w, out, 1);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "model_spec");
    tfs__jw_begin_object(&w);
    write_str(&w, "name", model_name);
    write_str(&w, "signature_name", "");
    write_int64_str(&w, "version", version);
    tfs__jw_end_object(&w);
    tfs__jw_key(&w, "metadata");
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "signature_def");
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "signature_def");
    tfs__jw_begin_object(&w);
    for (int i = 0; i < n_sigs; i++)
        write_signature(&w, sigs[i]);
    tfs__jw_end_object(&w);
    tfs__jw_end_object(&w);
    tfs__jw_end_object(&w);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
    return finish(out, start, "model metadata", st);
}
