/* KServe v2's REST endpoints other than infer: server metadata, liveness, readiness, model
 * metadata and model readiness. Infer goes through rest.c's predict machinery with the v2 codec
 * (v2-json.c).
 *
 * Readiness is the one rule /readyz and gRPC health use (tfs_health_ready: every configured
 * model has an AVAILABLE version and no drain has started), so the probes cannot disagree. Model
 * metadata describes one signature, serving_default unless ?signature_name= names another (v2
 * has one input list per model; tfserve's models may have several signatures). Versions are
 * tfserve's numbers as strings; TF Serving's version labels are not part of v2.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

#ifndef TFS_VERSION
#define TFS_VERSION "unknown"
#endif

/* ---- server ----------------------------------------------------------------------------------- */

static void server_metadata(tfs__buf *out)
{
    tfs__jw w;
    tfs__jw_init(&w, out, 2);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "name");
    tfs__jw_cstring(&w, "tfserve");
    tfs__jw_key(&w, "version");
    tfs__jw_cstring(&w, TFS_VERSION);
    tfs__jw_key(&w, "extensions");
    w.single_line = true;
    tfs__jw_begin_array(&w);
    tfs__jw_cstring(&w, "binary_tensor_data");
    tfs__jw_end_array(&w);
    w.single_line = false;
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
}

static void flag_document(tfs__buf *out, const char *key, bool value)
{
    tfs__buf_printf(out, "{\"%s\": %s}", key, value ? "true" : "false");
}

/* ---- models ----------------------------------------------------------------------------------- */

static void write_tensors(tfs__jw *w, const char *key, const tfs_tensor_info *ti, int n)
{
    tfs__jw_key(w, key);
    tfs__jw_begin_array(w);
    for (int i = 0; i < n; i++) {
        const char *dt = tfs__v2_datatype(ti[i].dtype);
        tfs__jw_begin_object(w);
        tfs__jw_key(w, "name");
        tfs__jw_cstring(w, ti[i].alias);
        tfs__jw_key(w, "datatype");
        /* A dtype v2 cannot name (resource, variant) is shown by TensorFlow's name. */
        tfs__jw_cstring(w, dt ? dt : tfs_dtype_name(ti[i].dtype));
        tfs__jw_key(w, "shape");
        w->single_line = true;
        tfs__jw_begin_array(w);
        if (ti[i].shape.rank < 0)
            tfs__jw_int(w, -1);   /* unknown rank: v2 has no form for it */
        for (int d = 0; d < ti[i].shape.rank; d++)
            tfs__jw_int(w, ti[i].shape.dims[d] < 0 ? -1 : ti[i].shape.dims[d]);
        tfs__jw_end_array(w);
        w->single_line = false;
        tfs__jw_end_object(w);
    }
    tfs__jw_end_array(w);
}

enum tfs_code tfs__v2_not_ready(tfs_loader *l, const tfs__route *r, enum tfs_code code,
                                tfs_status *st)
{
    tfs_version_status *vs = NULL;
    int                 n = 0;
    tfs_status          ms;
    if (code != TFS_NOT_FOUND ||
        tfs_loader_model_status(l, r->name, r->version, &vs, &n, &ms) != TFS_OK || n == 0)
        goto done;
    for (int i = 0; i < n; i++)
        if (vs[i].state == TFS_VERSION_AVAILABLE)
            goto done;   /* not found for another reason (a version the policy does not serve) */
    char why[TFS_STATUS_MSG_MAX];
    snprintf(why, sizeof why, "%s", vs[0].status.code != TFS_OK ? vs[0].status.msg : "");
    code = TFS_ERR(st, TFS_UNAVAILABLE, "model '%s' version %lld is not ready: %s%s%s", r->name,
                   (long long)vs[0].version, tfs_version_state_name(vs[0].state),
                   why[0] ? ": " : "", why);
done:
    tfs_free(vs);
    return code;
}

static enum tfs_code model_metadata(tfs_loader *l, const tfs__route *r, tfs__buf *out,
                                    tfs_status *st)
{
    tfs_model_spec       spec = {r->name, r->version, NULL, r->signature};
    tfs_servable        *s = NULL;
    const tfs_signature *sig;
    tfs_version_status  *vs = NULL;
    int                  n = 0;
    enum tfs_code        code;
    tfs__jw              w;

    if ((code = tfs__v2_not_ready(l, r, tfs_service_acquire(l, &spec, &s, st), st)) != TFS_OK ||
        (code = tfs_service_signature(s, r->signature, TFS_API_REST, &sig, st)) != TFS_OK ||
        (code = tfs_loader_model_status(l, r->name, r->version, &vs, &n, st)) != TFS_OK)
        goto done;
    tfs__jw_init(&w, out, 2);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "name");
    tfs__jw_cstring(&w, tfs_servable_name(s));
    tfs__jw_key(&w, "versions");
    w.single_line = true;
    tfs__jw_begin_array(&w);
    for (int i = 0; i < n; i++) {
        char v[24];
        if (vs[i].state != TFS_VERSION_AVAILABLE)
            continue;
        snprintf(v, sizeof v, "%lld", (long long)vs[i].version);
        tfs__jw_cstring(&w, v);
    }
    tfs__jw_end_array(&w);
    w.single_line = false;
    tfs__jw_key(&w, "platform");
    tfs__jw_cstring(&w, "tensorflow_savedmodel");
    write_tensors(&w, "inputs", sig->inputs, sig->n_inputs);
    write_tensors(&w, "outputs", sig->outputs, sig->n_outputs);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
    if (out->oom)
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing model metadata");
done:
    tfs_free(vs);
    tfs_servable_release(s);
    return code;
}

static enum tfs_code model_ready(tfs_loader *l, const tfs_health *h, const tfs__route *r,
                                 tfs__buf *out, tfs_status *st)
{
    tfs_version_status *vs = NULL;
    int                 n = 0;
    enum tfs_code       code;
    int                 best = -1;

    if ((code = tfs_loader_model_status(l, r->name, r->version, &vs, &n, st)) != TFS_OK)
        goto done;
    for (int i = 0; i < n && best < 0; i++)
        if (vs[i].state == TFS_VERSION_AVAILABLE)
            best = i;
    if (best >= 0 && h && tfs_health_draining(h)) {
        code = TFS_ERR(st, TFS_UNAVAILABLE, "model '%s' is not ready: the server is draining",
                       r->name);
    } else if (best < 0) {
        code = tfs__v2_not_ready(l, r, TFS_NOT_FOUND, st);
        if (code == TFS_NOT_FOUND)   /* the loader knows the model but holds no version */
            code = TFS_ERR(st, TFS_UNAVAILABLE, "model '%s' is not ready: no versions", r->name);
    } else {
        flag_document(out, "ready", true);
    }
done:
    tfs_free(vs);
    return code;
}

enum tfs_code tfs__v2_rest_get(tfs_loader *l, const tfs_health *h, const tfs__route *r,
                               tfs__rest_response *resp, tfs_status *st)
{
    enum tfs_code code = TFS_OK;
    switch (r->kind) {
    case TFS__ROUTE_V2_SERVER:
        server_metadata(&resp->body);
        break;
    case TFS__ROUTE_V2_LIVE:
        flag_document(&resp->body, "live", true);
        break;
    case TFS__ROUTE_V2_READY:
        if (h ? !tfs_health_ready(h) : !tfs_loader_ready(l))
            code = TFS_ERR(st, TFS_UNAVAILABLE, "not ready: %s",
                           h && tfs_health_draining(h)
                               ? "draining: the server is shutting down"
                               : "not every model has an AVAILABLE version");
        else
            flag_document(&resp->body, "ready", true);
        break;
    case TFS__ROUTE_V2_MODEL:
        code = model_metadata(l, r, &resp->body, st);
        break;
    case TFS__ROUTE_V2_MODEL_READY:
        code = model_ready(l, h, r, &resp->body, st);
        break;
    default:
        code = TFS_ERR(st, TFS_INTERNAL, "route %d is not a v2 GET", (int)r->kind);
    }
    if (code == TFS_OK && resp->body.oom)
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory answering a v2 request");
    return code;
}
