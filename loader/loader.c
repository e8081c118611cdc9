/* The model registry's public face: creating and freeing the loader, lookups (acquire by version,
 * latest or label; status; names; readiness; stats) and the counted handles.
 *
 * DESIGN. Every lookup takes the registry lock for a few comparisons and a reference-count bump;
 * nothing slow ever runs under it (loads, scans and frees happen outside, see lifecycle.c). A handle
 * (tfs_servable) holds the loaded model; the registry holds one reference while the version is
 * AVAILABLE and drops it when the version unloads, so the last request to release frees it.
 */
#include <stdio.h>
#include <string.h>

#include "loader/loader-impl.h"

tfs_loader_opts tfs_loader_opts_default(void)
{
    return (tfs_loader_opts){.tags = "serve", .file_system_poll_wait_seconds = 1,
                             .num_load_threads = 2};
}

const char *tfs_version_state_name(enum tfs_version_state s)
{
    switch (s) {
    case TFS_VERSION_START:     return "START";
    case TFS_VERSION_LOADING:   return "LOADING";
    case TFS_VERSION_AVAILABLE: return "AVAILABLE";
    case TFS_VERSION_UNLOADING: return "UNLOADING";
    case TFS_VERSION_END:       return "END";
    default:                    return "UNKNOWN";
    }
}

/* ---- entries -------------------------------------------------------------------------------- */

model_entry *tfs__model_find(tfs_loader *l, const char *name)
{
    for (int i = 0; i < l->n_models; i++)
        if (!strcmp(l->models[i]->name, name))
            return l->models[i];
    return NULL;
}

version_entry *tfs__version_find(model_entry *m, int64_t version)
{
    for (int i = 0; i < m->n_versions; i++)
        if (m->versions[i]->version == version)
            return m->versions[i];
    return NULL;
}

void tfs__model_free(model_entry *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_versions; i++) {
        tfs_free(m->versions[i]->dir);
        tfs_free(m->versions[i]);
    }
    tfs_free(m->versions);
    for (int i = 0; i < m->n_labels; i++)
        tfs_free(m->labels[i].label);
    tfs_free(m->labels);
    tfs__version_dirs_free(m->listing, m->n_listing);
    tfs__name_set_clear(&m->ignored);
    tfs_free((void *)m->policy.versions);
    tfs_free(m->base_path);
    tfs_free(m->name);
    tfs_free(m);
}

/* ---- create / free -------------------------------------------------------------------------- */

static bool sync_init(tfs_loader *l)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return false;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* the poll period ignores clock steps */
    bool ok = pthread_mutex_init(&l->mu, NULL) == 0 && pthread_mutex_init(&l->scan_mu, NULL) == 0 &&
              pthread_cond_init(&l->work_cv, NULL) == 0 &&
              pthread_cond_init(&l->done_cv, NULL) == 0 &&
              pthread_cond_init(&l->poll_cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    return ok;
}

enum tfs_code tfs_loader_new(const tfs_model_config *models, int n_models,
                             const tfs_loader_opts *opts, tfs_loader **out, tfs_status *st)
{
    *out = NULL;
    model_entry **entries = NULL;
    enum tfs_code rc = tfs__config_validate(models, n_models, st);
    if (rc != TFS_OK)
        return rc;
    tfs_loader *l = tfs_calloc(1, sizeof *l);
    if (!l)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating the loader");
    if (!sync_init(l)) {
        tfs_free(l);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot create the loader's locks");
    }
    l->opts = opts ? *opts : tfs_loader_opts_default();
    if (!(l->tags = tfs_strdup(l->opts.tags && l->opts.tags[0] ? l->opts.tags : "serve"))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating the loader");
        goto fail;
    }
    l->opts.tags = l->tags;
    if ((rc = tfs__batching_start(l, st)) != TFS_OK ||
        (rc = tfs__threads_start(l, st)) != TFS_OK)
        goto fail;
    pthread_mutex_lock(&l->scan_mu);
    pthread_mutex_lock(&l->mu);
    rc = tfs__config_apply(l, models, n_models, &entries, st);
    pthread_mutex_unlock(&l->mu);
    if (rc == TFS_OK)
        tfs__scan_pass_locked(l, entries, n_models);
    pthread_mutex_unlock(&l->scan_mu);
    tfs_free(entries);
    if (rc != TFS_OK)
        goto fail;
    tfs__wait_idle(l);
    /* Labels after the first loads, as TF Serving's ServerCore does at startup: a label on a
     * version that failed to load (or is absent) fails the start unless
     * allow_version_labels_for_unavailable_models. */
    pthread_mutex_lock(&l->mu);
    rc = tfs__labels_apply(l, models, n_models, st);
    pthread_mutex_unlock(&l->mu);
    if (rc != TFS_OK)
        goto fail;
    if ((rc = tfs__poll_start(l, st)) != TFS_OK)
        goto fail;
    *out = l;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_loader_free(l);
    return rc;
}

void tfs_loader_free(tfs_loader *l)
{
    if (!l)
        return;
    tfs__threads_stop(l);
    tfs__flush_releases(l);
    /* Only this thread is left: drop the registry's references (each takes mu itself). */
    for (int i = 0; i < l->n_models; i++)
        for (int j = 0; j < l->models[i]->n_versions; j++) {
            version_entry *v = l->models[i]->versions[j];
            tfs_servable *s = v->servable;
            if (s) {
                v->servable = NULL;
                v->state = TFS_VERSION_UNLOADING;
                v->leaving = s;
                tfs__servable_unref(s);
            }
        }
    /* Versions whose last handle went while the load threads were stopping. */
    while (l->reap) {
        tfs_servable *s = l->reap;
        l->reap = s->rnext;
        tfs__servable_destroy(s);
    }
    tfs__batching_stop(l);
    for (int i = 0; i < l->n_models; i++)
        tfs__model_free(l->models[i]);
    tfs_free(l->models);
    tfs_free(l->config);
    tfs_free(l->tasks);
    tfs_free(l->releases);
    for (int i = 0; i < l->n_load_records; i++)
        tfs_free(l->load_records[i].path);
    tfs_free(l->load_records);
    tfs_free(l->workers);
    tfs_free(l->tags);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    pthread_cond_destroy(&l->poll_cv);
    pthread_mutex_destroy(&l->scan_mu);
    pthread_mutex_destroy(&l->mu);
    tfs_free(l);
}

void tfs_loader_poll_now(tfs_loader *l)
{
    tfs__scan_pass(l, NULL, 0);
    tfs__wait_idle(l);
}

/* ---- lookups -------------------------------------------------------------------------------- */

enum tfs_code tfs_loader_model_status(tfs_loader *l, const char *name, int64_t version,
                                      tfs_version_status **out, int *n, tfs_status *st)
{
    *out = NULL;
    *n = 0;
    enum tfs_code rc = TFS_OK;
    pthread_mutex_lock(&l->mu);
    model_entry *m = name ? tfs__model_find(l, name) : NULL;
    if (!m || m->n_versions == 0) {
        rc = TFS_ERR(st, TFS_NOT_FOUND, "Could not find any versions of model %s",
                     name ? name : "");
        goto done;
    }
    int count = 0;
    for (int i = 0; i < m->n_versions; i++)
        count += version < 0 || m->versions[i]->version == version;
    if (count == 0) {
        rc = TFS_ERR(st, TFS_NOT_FOUND, "Could not find version %lld of model %s",
                     (long long)version, name);
        goto done;
    }
    if (!(*out = tfs_calloc((size_t)count, sizeof **out))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    for (int i = 0; i < m->n_versions; i++) {
        const version_entry *v = m->versions[i];
        if (version >= 0 && v->version != version)
            continue;
        (*out)[(*n)++] = (tfs_version_status){
            .version = v->version, .state = v->state, .status = v->status,
            .memory_bytes = v->state == TFS_VERSION_AVAILABLE ? v->memory_bytes : 0,
            .load_seconds = v->load_seconds};
    }
    tfs_status_clear(st);
done:
    pthread_mutex_unlock(&l->mu);
    return rc;
}

enum tfs_code tfs_loader_model_names(tfs_loader *l, char ***names, int *n, tfs_status *st)
{
    *names = NULL;
    *n = 0;
    pthread_mutex_lock(&l->mu);
    int count = l->n_config;
    char **v = tfs_calloc((size_t)count + 1, sizeof *v);
    for (int i = 0; v && i < count; i++)
        if (!(v[i] = tfs_strdup(l->config[i]->name))) {
            tfs_loader_names_free(v, i);
            v = NULL;
        }
    pthread_mutex_unlock(&l->mu);
    if (!v)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    *names = v;
    *n = count;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_loader_names_free(char **names, int n)
{
    if (!names)
        return;
    for (int i = 0; i < n; i++)
        tfs_free(names[i]);
    tfs_free(names);
}

static version_entry *latest_available(model_entry *m)
{
    for (int i = 0; i < m->n_versions; i++)   /* highest first */
        if (m->versions[i]->state == TFS_VERSION_AVAILABLE)
            return m->versions[i];
    return NULL;
}

bool tfs_loader_ready(tfs_loader *l)
{
    pthread_mutex_lock(&l->mu);
    bool ready = true;
    for (int i = 0; i < l->n_config && ready; i++)
        ready = latest_available(l->config[i]) != NULL;
    pthread_mutex_unlock(&l->mu);
    return ready;
}

enum tfs_code tfs_loader_base_path_error(tfs_loader *l, const char *name, tfs_status *st)
{
    tfs_status e = {0};
    pthread_mutex_lock(&l->mu);
    const model_entry *m = name ? tfs__model_find(l, name) : NULL;
    if (m && m->configured)
        e = m->scan_error;
    pthread_mutex_unlock(&l->mu);
    if (st)
        *st = e;
    return e.code;
}

void tfs_loader_get_stats(tfs_loader *l, tfs_loader_stats *out)
{
    *out = (tfs_loader_stats){0};
    pthread_mutex_lock(&l->mu);
    out->loads_ok = l->loads_ok;
    out->loads_failed = l->loads_failed;
    out->unloads = l->unloads;
    out->load_seconds_total = l->load_seconds_total;
    out->memory_bytes = l->mem_in_use;
    for (int i = 0; i < l->n_models; i++)
        for (int j = 0; j < l->models[i]->n_versions; j++)
            out->versions_available += l->models[i]->versions[j]->state == TFS_VERSION_AVAILABLE;
    pthread_mutex_unlock(&l->mu);
}

enum tfs_code tfs_loader_acquire(tfs_loader *l, const char *name, int64_t version,
                                 const char *label, tfs_servable **out, tfs_status *st)
{
    *out = NULL;
    if (!name || !name[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "ModelSpec has no name specified.");
    enum tfs_code rc = TFS_OK;
    pthread_mutex_lock(&l->mu);
    model_entry *m = tfs__model_find(l, name);
    if (m && !m->configured)
        m = NULL;
    if (label) {
        const label_entry *le = NULL;
        for (int i = 0; m && i < m->n_labels && !le; i++)
            if (!strcmp(m->labels[i].label, label))
                le = &m->labels[i];
        if (!le) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Unrecognized servable version label: %s",
                         label);
            goto done;
        }
        version = le->version;
    }
    version_entry *v = NULL;
    if (m && version < 0)
        v = latest_available(m);
    else if (m && (v = tfs__version_find(m, version)) && v->state != TFS_VERSION_AVAILABLE)
        v = NULL;
    if (!v) {
        if (version >= 0)
            rc = TFS_ERR(st, TFS_NOT_FOUND, "Servable not found for request: Specific(%s, %lld)",
                         name, (long long)version);
        else
            rc = TFS_ERR(st, TFS_NOT_FOUND, "Servable not found for request: Latest(%s)", name);
        goto done;
    }
    atomic_fetch_add(&v->servable->refs, 1);
    *out = v->servable;
    tfs_status_clear(st);
done:
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void tfs_servable_release(tfs_servable *s) { tfs__servable_unref(s); }
const char *tfs_servable_name(const tfs_servable *s) { return s->name; }
int64_t tfs_servable_version(const tfs_servable *s) { return s->version; }
const tfs_savedmodel *tfs_servable_model(const tfs_servable *s) { return s->model; }


