/* The protocol-neutral service layer: what a Predict means once a front
 * end has decoded its request. It resolves a model spec to a counted servable handle and a
 * signature, checks the request's named inputs against the signature the way TF Serving's
 * predict_util.cc and saved_model/util.cc GetInputValues do (same checks, same order, same texts),
 * and runs the signature through the loader (which hands it to batching).
 *
 * REST and gRPC share everything here except the text and code for an unknown signature, which
 * differ in TF Serving (REST looks the signature up while decoding JSON, gRPC in Predict).
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "server/metrics-impl.h"
#include "server/server-impl.h"

#define DEFAULT_SIGNATURE "serving_default"

enum tfs_code tfs_service_acquire(tfs_loader *l, const tfs_model_spec *spec, tfs_servable **out,
                                  tfs_status *st)
{
    *out = NULL;
    tfs__request_note(spec->name, -1, spec->signature_name);
    if (!spec->name || !*spec->name)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "ModelSpec has no name specified.");
    enum tfs_code code = tfs_loader_acquire(l, spec->name, spec->version, spec->label, out, st);
    if (code == TFS_OK)
        tfs__request_note(NULL, tfs_servable_version(*out), NULL);
    return code;
}

enum tfs_code tfs_service_signature(const tfs_servable *s, const char *name, enum tfs_api api,
                                    const tfs_signature **out, tfs_status *st)
{
    return tfs__service_signature_model(tfs_servable_model(s), name, api, out, st);
}

enum tfs_code tfs__service_signature_model(const tfs_savedmodel *m, const char *name,
                                           enum tfs_api api, const tfs_signature **out,
                                           tfs_status *st)
{
    const char *key = name && *name ? name : DEFAULT_SIGNATURE;
    *out = tfs_savedmodel_signature(m, key);
    if (*out) {
        tfs_status_clear(st);
        return TFS_OK;
    }
    if (api == TFS_API_REST)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Serving signature name: \"%s\" not found in signature def", key);
    return TFS_ERR(st, TFS_FAILED_PRECONDITION, "Serving signature key \"%s\" not found.", key);
}

/* ---- input checks --------------------------------------------------------------------------- */

/* Each list of names in a message stops after this many bytes (then ",..."): a request with
 * thousands of names would otherwise fill the message with the first list and cut off the rest,
 * which names what is missing. */
#define LIST_MAX (TFS_STATUS_MSG_MAX / 4)

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool sig_has_default(const tfs_signature *sig, const char *name)
{
    for (int i = 0; i < sig->n_defaults; i++)
        if (strcmp(sig->default_names[i], name) == 0)
            return true;
    return false;
}

/* Appends to b, joined with ",", the names that are in `in` (want true) or not in it (want
 * false); every name when in is NULL. */
static void join(tfs__buf *b, const char *const *names, int n, const tfs__name_map *in, bool want)
{
    size_t start = b->len;
    bool   first = true;
    for (int i = 0; i < n; i++) {
        if (in && (tfs__name_map_get(in, names[i]) >= 0) != want)
            continue;
        if (b->len - start > LIST_MAX) {
            tfs__buf_puts(b, ",...");
            return;
        }
        if (!first)
            tfs__buf_putc(b, ',');
        tfs__buf_puts(b, names[i]);
        first = false;
    }
}

/* The common case, checked without allocating: every signature input once, in signature order
 * (the REST decoder builds them so, naming them with the signature's own strings). */
static bool inputs_exact(const tfs_signature *sig, const tfs_named_tensor *inputs, int n)
{
    if (n != sig->n_inputs)
        return false;
    for (int i = 0; i < n; i++)
        if (inputs[i].name != sig->inputs[i].alias &&
            strcmp(inputs[i].name, sig->inputs[i].alias) != 0)
            return false;
    return true;
}

/* TF Serving's checks and texts, in time linear in the number of names: the request's and the
 * signature's names go into hash maps once, and only an error sorts the request's names (TF
 * Serving prints them from a std::set). */
enum tfs_code tfs__service_check_input_names(const tfs_signature *sig, const char *const *names,
                                             int n, tfs_status *st)
{
    enum tfs_code code = TFS_OK;
    tfs__name_map in_sig, in_req;
    tfs__buf      a, b, c, d;
    const char  **req = NULL;
    const char  **sig_names = NULL;
    int           bad = -1;   /* the signature input that is missing */

    tfs__buf_init(&a);
    tfs__buf_init(&b);
    tfs__buf_init(&c);
    tfs__buf_init(&d);
    memset(&in_req, 0, sizeof in_req);
    if ((code = tfs__name_map_init(&in_sig, (size_t)sig->n_inputs, st)) != TFS_OK)
        goto done;
    if ((code = tfs__name_map_init(&in_req, (size_t)(n > 0 ? n : 0), st)) != TFS_OK)
        goto done;
    for (int i = 0; i < sig->n_inputs; i++)
        tfs__name_map_put(&in_sig, sig->inputs[i].alias, i);
    for (int i = 0; i < n; i++) {
        if (tfs__name_map_put(&in_req, names[i], i) >= 0) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "duplicate input tensor alias: %s",
                           names[i]);
            goto done;
        }
    }
    bool count_bad = sig->n_defaults == 0 && n != sig->n_inputs;
    for (int i = 0; !count_bad && bad < 0 && i < sig->n_inputs; i++)
        if (tfs__name_map_get(&in_req, sig->inputs[i].alias) < 0 &&
            !sig_has_default(sig, sig->inputs[i].alias))
            bad = i;
    bool unknown = false;
    for (int i = 0; !count_bad && bad < 0 && !unknown && i < n; i++)
        unknown = tfs__name_map_get(&in_sig, names[i]) < 0;
    if (!count_bad && bad < 0 && !unknown) {
        tfs_status_clear(st);
        goto done;
    }

    /* An error: the texts want the request's names sorted. */
    req = tfs_calloc((size_t)(n > 0 ? n : 1), sizeof *req);
    sig_names = tfs_calloc((size_t)(sig->n_inputs > 0 ? sig->n_inputs : 1), sizeof *sig_names);
    if (!req || !sig_names) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory checking predict inputs");
        goto done;
    }
    if (n > 0)
        memcpy(req, names, (size_t)n * sizeof *req);
    qsort(req, (size_t)n, sizeof *req, cmp_str);
    for (int i = 0; i < sig->n_inputs; i++)
        sig_names[i] = sig->inputs[i].alias;

    if (count_bad) {
        /* VerifyRequestInputsSize (only meaningful when no defaults can fill a gap). */
        join(&a, req, n, NULL, true);
        join(&b, sig_names, sig->n_inputs, NULL, true);
        join(&c, req, n, &in_sig, false);
        join(&d, sig_names, sig->n_inputs, &in_req, false);
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "input size does not match signature: %d!=%d len({%s}) != len({%s}). "
                       "Sent extra: {%s}. Missing but required: {%s}.",
                       n, sig->n_inputs, a.data ? a.data : "", b.data ? b.data : "",
                       c.data ? c.data : "", d.data ? d.data : "");
    } else if (bad >= 0) {
        /* GetInputValues: each signature input from the request or from the defaults. */
        const tfs_tensor_info *ti = &sig->inputs[bad];
        join(&a, req, n, NULL, true);
        join(&b, (const char *const *)sig->default_names, sig->n_defaults, NULL, true);
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Signature input alias: %s(feed name: %s) not found in request and no "
                       "default value provided. Inputs expected to be in the request {%s}, or "
                       "default input alias set: %s",
                       ti->alias, ti->tensor_name ? ti->tensor_name : "", a.data ? a.data : "",
                       b.data ? b.data : "");
    } else {
        join(&a, req, n, &in_sig, true);
        join(&b, req, n, NULL, true);
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Inputs contains invalid name. Used request inputs: %s, request input: %s",
                       a.data ? a.data : "", b.data ? b.data : "");
    }
done:
    tfs__name_map_deinit(&in_sig);
    tfs__name_map_deinit(&in_req);
    tfs__buf_deinit(&a);
    tfs__buf_deinit(&b);
    tfs__buf_deinit(&c);
    tfs__buf_deinit(&d);
    tfs_free(req);
    tfs_free(sig_names);
    return code;
}

static enum tfs_code check_inputs(const tfs_signature *sig, const tfs_named_tensor *inputs, int n,
                                  tfs_status *st)
{
    if (inputs_exact(sig, inputs, n))
        return TFS_OK;
    const char  *small[8] = {NULL};
    const char **names = n <= 8 ? small : tfs_calloc((size_t)n, sizeof *names);
    if (!names)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory checking predict inputs");
    for (int i = 0; i < n; i++)
        names[i] = inputs[i].name;
    enum tfs_code code = tfs__service_check_input_names(sig, names, n, st);
    if (names != small)
        tfs_free(names);
    return code;
}

/* The checks before any run: the inputs against the signature, then whether it can run at all. */
static enum tfs_code check_runnable(const tfs_signature *sig, const tfs_named_tensor *inputs,
                                    int n_inputs, tfs_status *st)
{
    enum tfs_code code = check_inputs(sig, inputs, n_inputs, st);
    if (code != TFS_OK)
        return code;
    if (sig->usable.code != TFS_OK) {
        if (st)
            *st = sig->usable;
        return sig->usable.code;
    }
    return TFS_OK;
}

enum tfs_code tfs_service_run(const tfs_servable *s, const tfs_signature *sig,
                              const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                              tfs_status *st)
{
    enum tfs_code code = check_runnable(sig, inputs, n_inputs, st);
    if (code != TFS_OK)
        return code;
    int64_t t0 = tfs__clock_ns();
    code = tfs_servable_run(s, sig, inputs, n_inputs, outputs, st);
    tfs__request_note_runtime((double)(tfs__clock_ns() - t0) * 1e-9);
    return code;
}

enum tfs_code tfs__service_run_model(const tfs_savedmodel *m, const tfs_signature *sig,
                                     const tfs_named_tensor *inputs, int n_inputs,
                                     tfs_tensor **outputs, tfs_status *st)
{
    enum tfs_code code = check_runnable(sig, inputs, n_inputs, st);
    if (code != TFS_OK)
        return code;
    return tfs_savedmodel_run(m, sig, inputs, n_inputs, outputs, st);
}

enum tfs_code tfs_service_predict(tfs_loader *l, const tfs_model_spec *spec, enum tfs_api api,
                                  const tfs_named_tensor *inputs, int n_inputs,
                                  tfs_servable **servable, const tfs_signature **sig,
                                  tfs_tensor **outputs, tfs_status *st)
{
    tfs_servable        *s = NULL;
    const tfs_signature *g = NULL;
    enum tfs_code        code;

    *servable = NULL;
    *sig = NULL;
    if ((code = tfs_service_acquire(l, spec, &s, st)) != TFS_OK)
        return code;
    if ((code = tfs_service_signature(s, spec->signature_name, api, &g, st)) != TFS_OK ||
        (code = tfs_service_run(s, g, inputs, n_inputs, outputs, st)) != TFS_OK) {
        tfs_servable_release(s);
        return code;
    }
    *servable = s;
    *sig = g;
    return TFS_OK;
}

enum tfs_code tfs_service_run_async(tfs_servable *s, const tfs_signature *sig,
                                    const tfs_named_tensor *inputs, int n_inputs,
                                    int64_t deadline_ns, tfs_servable_done_fn done, void *ctx,
                                    tfs_servable_task **task, tfs_status *st)
{
    tfs_status local;
    /* done must always get a status with the reason: a caller that passes none gets ours. */
    if (!st)
        st = &local;
    if (task)
        *task = NULL;
    enum tfs_code code = check_runnable(sig, inputs, n_inputs, st);
    if (code != TFS_OK) {
        tfs_run_times t = {0};
        done(ctx, code, st, NULL, 0, &t);
        return code;
    }
    return tfs_servable_run_async(s, sig, inputs, n_inputs, deadline_ns, done, ctx, task, st);
}
