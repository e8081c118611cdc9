/* Health for orchestrators and load balancers: the shared "draining" flag, the REST probes
 * GET /healthz (liveness: 200 "ok" while the process serves, drain or not) and GET /readyz
 * (readiness: 200 when every configured model has an AVAILABLE version and no drain has started,
 * 503 otherwise, with a JSON body saying why: "draining", or which models are not ready and their
 * load errors), and the answer of grpc.health.v1.Health/Check (grpc-health.c) is built on
 * tfs_health_ready too, so the two protocols cannot disagree.
 *
 * The paths are outside TF Serving's /v1/ space, so no TF Serving route is shadowed; the HTTP
 * layer asks here before it hands a request to the REST API handler.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

struct tfs_health {
    tfs_loader *loader;
    atomic_bool draining;
};

enum tfs_code tfs_health_new(tfs_loader *l, tfs_health **out, tfs_status *st)
{
    *out = NULL;
    tfs_health *h = tfs_calloc(1, sizeof *h);
    if (!h)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating the health state");
    h->loader = l;
    atomic_init(&h->draining, false);
    *out = h;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_health_free(tfs_health *h)
{
    tfs_free(h);
}

void tfs_health_start_drain(tfs_health *h)
{
    atomic_store(&h->draining, true);
}

bool tfs_health_draining(const tfs_health *h)
{
    return atomic_load(&((tfs_health *)h)->draining);
}

bool tfs_health_ready(const tfs_health *h)
{
    return !tfs_health_draining(h) && tfs_loader_ready(h->loader);
}

/* ---- REST probes ---------------------------------------------------------------------------- */

/* One model's entry of the /readyz document: its best version (AVAILABLE if any, else the
 * newest) and, when it does not serve, why. Returns whether it serves. */
static bool write_model(tfs__jw *w, tfs_loader *l, const char *name)
{
    tfs_version_status *vs = NULL;
    int                 n = 0;
    tfs_status          st;
    bool                available = false;

    tfs__jw_begin_object(w);
    tfs__jw_key(w, "name");
    tfs__jw_cstring(w, name);
    if (tfs_loader_model_status(l, name, -1, &vs, &n, &st) != TFS_OK || n == 0) {
        /* No version folder was found, or the base path cannot be read: say which. */
        tfs_status why;
        tfs__jw_key(w, "state");
        tfs__jw_cstring(w, "NO_VERSION");
        tfs__jw_key(w, "error");
        if (tfs_loader_base_path_error(l, name, &why) != TFS_OK) {
            tfs__buf msg;
            tfs__buf_init(&msg);
            tfs__buf_printf(&msg, "%s: %s", tfs_code_name(why.code), why.msg);
            tfs__jw_cstring(w, msg.data ? msg.data : "");
            tfs__buf_deinit(&msg);
        } else {
            tfs__jw_cstring(w, n == 0 && st.code == TFS_OK ? "no versions" : st.msg);
        }
    } else {
        int best = 0;
        for (int i = 0; i < n; i++) {
            if (vs[i].state == TFS_VERSION_AVAILABLE) {
                best = i;
                available = true;
                break;
            }
        }
        char version[24];   /* a string, as in TF Serving's status documents */
        snprintf(version, sizeof version, "%lld", (long long)vs[best].version);
        tfs__jw_key(w, "version");
        tfs__jw_cstring(w, version);
        tfs__jw_key(w, "state");
        tfs__jw_cstring(w, tfs_version_state_name(vs[best].state));
        if (!available && vs[best].status.code != TFS_OK) {
            tfs__jw_key(w, "error");
            tfs__buf msg;
            tfs__buf_init(&msg);
            tfs__buf_printf(&msg, "%s: %s", tfs_code_name(vs[best].status.code),
                            vs[best].status.msg);
            tfs__jw_cstring(w, msg.data ? msg.data : "");
            tfs__buf_deinit(&msg);
        }
    }
    tfs__jw_end_object(w);
    tfs_free(vs);
    return available;
}

/* {"ready": B, "draining": B, "models": [...]} ("reason" names the first cause when not ready). */
static void readyz(const tfs_health *h, tfs__rest_response *resp)
{
    char     **names = NULL;
    int        n = 0;
    tfs_status st;
    tfs__jw    w;
    bool       draining = tfs_health_draining(h);
    bool       ready = tfs_health_ready(h);

    tfs__jw_init(&w, &resp->body, 2);
    tfs__jw_begin_object(&w);
    tfs__jw_key(&w, "ready");
    tfs__jw_bool(&w, ready);
    if (!ready) {
        tfs__jw_key(&w, "reason");
        tfs__jw_cstring(&w, draining ? "draining: the server is shutting down"
                                     : "not every model has an AVAILABLE version");
    }
    tfs__jw_key(&w, "draining");
    tfs__jw_bool(&w, draining);
    tfs__jw_key(&w, "models");
    tfs__jw_begin_array(&w);
    if (tfs_loader_model_names(h->loader, &names, &n, &st) == TFS_OK) {
        for (int i = 0; i < n; i++)
            write_model(&w, h->loader, names[i]);
    }
    tfs__jw_end_array(&w);
    tfs__jw_end_object(&w);
    tfs__jw_deinit(&w);
    tfs_loader_names_free(names, n);
    resp->http_status = ready ? 200 : 503;
    resp->content_type = "application/json";
}

bool tfs__health_rest(const tfs_health *h, const char *method, const char *path,
                      tfs__rest_response *resp)
{
    if (!h || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0))
        return false;
    bool live = strcmp(path, "/healthz") == 0;
    if (!live && strcmp(path, "/readyz") != 0)
        return false;
    tfs__buf_init(&resp->body);
    if (live) {
        resp->http_status = 200;
        resp->content_type = "text/plain";
        tfs__buf_puts(&resp->body, "ok\n");
    } else {
        readyz(h, resp);
    }
    if (resp->body.oom) {
        tfs__buf_deinit(&resp->body);
        tfs__buf_init(&resp->body);
        resp->http_status = 500;
    }
    return true;
}
