/* The lifecycle of versions: START -> LOADING -> AVAILABLE -> UNLOADING -> END, or LOADING -> END
 * with the load error.
 *
 * DESIGN. Decisions are made in one place, tfs__model_reconcile, under the registry lock: from the
 * model's last listing and its policy it computes the aspired versions, queues loads for those not
 * loaded, cancels queued loads no longer aspired, and unloads with TF Serving's
 * availability-preserving rule (AvailabilityPreservingPolicy): an unaspired AVAILABLE version is
 * unloaded only when no version is aspired, or an aspired one is AVAILABLE, or more than one
 * unaspired one serves. So under latest{1} the new version is AVAILABLE before the old one goes,
 * and a new version that fails to load never takes the old one down. Reconcile runs after every
 * scan and after every load. Loads run on num_load_threads workers without the lock; an unload
 * only unpublishes the version and drops the registry's reference, and the last handle's release
 * frees the model and records END. The poll thread sleeps on a condition variable so that
 * tfs_loader_free wakes it at once.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "loader/loader-impl.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = tfs_malloc(la + lb + 2);
    if (s) {
        memcpy(s, a, la);
        s[la] = '/';
        memcpy(s + la + 1, b, lb + 1);
    }
    return s;
}

/* ---- handles -------------------------------------------------------------------------------- */

void tfs__servable_unref(tfs_servable *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    tfs_loader *l = s->loader;
    if (s->batch && tfs__servable_batch_busy(s->batch)) {
        /* Freeing its queues waits for their batch threads, and this may be one of them (a done
         * callback dropping the last handle): a load thread frees it (tfs_loader_free itself
         * when they are gone). */
        pthread_mutex_lock(&l->mu);
        if (!l->stopping) {
            s->rnext = l->reap;
            l->reap = s;
            pthread_cond_signal(&l->work_cv);
            pthread_mutex_unlock(&l->mu);
            return;
        }
        pthread_mutex_unlock(&l->mu);
    }
    tfs__servable_destroy(s);
}

void tfs__servable_destroy(tfs_servable *s)
{
    tfs_loader *l = s->loader;
    tfs__servable_batch_free(s->batch);
    tfs_savedmodel_free(s->model);
    tfs_alloc_release_free_memory();
    TFS_LOG_INFO(LOG_MODULE, "unloaded version %lld of model '%s'", (long long)s->version, s->name);
    pthread_mutex_lock(&l->mu);
    for (tfs_servable **p = &l->batched; *p; p = &(*p)->bnext)
        if (*p == s) {
            *p = s->bnext;
            break;
        }
    l->mem_in_use -= s->memory_bytes;
    l->unloads++;
    version_entry *v = s->entry;
    bool again = false;
    if (v->leaving == s) {
        v->leaving = NULL;
        v->state = TFS_VERSION_END;
        tfs_status_clear(&v->status);
        /* aspired again while it was leaving (and too late to revive): load it anew */
        again = v->aspired && v->model->configured && !l->stopping;
        if (again)
            tfs__model_reconcile(l, v->model);
    }
    pthread_cond_broadcast(&l->done_cv);
    pthread_mutex_unlock(&l->mu);
    tfs_free(s->name);
    tfs_free(s);
    if (again)
        tfs__flush_releases(l);
}

void tfs__flush_releases(tfs_loader *l)
{
    pthread_mutex_lock(&l->mu);
    tfs_servable **list = l->releases;
    int n = l->n_releases;
    l->releases = NULL;
    l->n_releases = l->cap_releases = 0;
    l->n_flushing++;
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < n; i++)
        tfs__servable_unref(list[i]);
    tfs_free(list);
    pthread_mutex_lock(&l->mu);
    l->n_flushing--;
    pthread_cond_broadcast(&l->done_cv);
    pthread_mutex_unlock(&l->mu);
}

/* Room for one more entry on l->releases, so that an unload never fails half-way. Under mu. */
static bool releases_reserve(tfs_loader *l)
{
    if (l->n_releases < l->cap_releases)
        return true;
    int cap = l->cap_releases ? 2 * l->cap_releases : 8;
    tfs_servable **r = tfs_realloc(l->releases, (size_t)cap * sizeof *r);
    if (!r)
        return false;
    l->releases = r;
    l->cap_releases = cap;
    return true;
}

/* AVAILABLE -> UNLOADING: out of every lookup now; freed by the last release. Under mu. */
static bool unload_version(tfs_loader *l, version_entry *v)
{
    if (!releases_reserve(l))
        return false;   /* out of memory: stays AVAILABLE, the next reconcile tries again */
    TFS_LOG_INFO(LOG_MODULE, "unloading version %lld of model '%s'", (long long)v->version,
                 v->model->name);
    v->state = TFS_VERSION_UNLOADING;
    v->memory_bytes = 0;
    v->leaving = v->servable;
    l->releases[l->n_releases++] = v->servable;
    v->servable = NULL;
    return true;
}

/* UNLOADING -> AVAILABLE for a version aspired again while requests still hold it: the model is
 * still in memory, so it serves again at once instead of being freed and loaded anew. Under mu. */
static bool revive_version(tfs_loader *l, version_entry *v)
{
    tfs_servable *s = v->leaving;   /* valid: its final release clears v->leaving under mu first */
    bool revived = false;
    for (int i = 0; i < l->n_releases && !revived; i++) {
        if (l->releases[i] == s) {   /* the registry's reference was not dropped yet: keep it */
            l->releases[i] = l->releases[--l->n_releases];
            revived = true;
        }
    }
    int refs = atomic_load(&s->refs);
    while (!revived && refs > 0)
        revived = atomic_compare_exchange_weak(&s->refs, &refs, refs + 1);
    if (!revived)
        return false;   /* being freed now: its release records END and reconciles again */
    v->state = TFS_VERSION_AVAILABLE;
    v->servable = s;
    v->leaving = NULL;
    v->memory_bytes = s->memory_bytes;
    TFS_LOG_INFO(LOG_MODULE, "model '%s' version %lld is AVAILABLE again (it was unloading)",
                 v->model->name, (long long)v->version);
    return true;
}

/* ---- the task queue (under mu) -------------------------------------------------------------- */

static bool queue_push(tfs_loader *l, load_task t)
{
    if (l->n_tasks == l->cap_tasks) {
        int cap = l->cap_tasks ? 2 * l->cap_tasks : 16;
        load_task *nt = tfs_malloc((size_t)cap * sizeof *nt);
        if (!nt)
            return false;
        for (int i = 0; i < l->n_tasks; i++)
            nt[i] = l->tasks[(l->task_head + i) % l->cap_tasks];
        tfs_free(l->tasks);
        l->tasks = nt;
        l->cap_tasks = cap;
        l->task_head = 0;
    }
    l->tasks[(l->task_head + l->n_tasks) % l->cap_tasks] = t;
    l->n_tasks++;
    return true;
}

static load_task queue_pop(tfs_loader *l)
{
    load_task t = l->tasks[l->task_head];
    l->task_head = (l->task_head + 1) % l->cap_tasks;
    l->n_tasks--;
    return t;
}

/* ---- reconcile ------------------------------------------------------------------------------ */

static version_entry *version_add(model_entry *m, int64_t version)
{
    if (m->n_versions == m->cap_versions) {
        int cap = m->cap_versions ? 2 * m->cap_versions : 8;
        version_entry **nv = tfs_realloc(m->versions, (size_t)cap * sizeof *nv);
        if (!nv)
            return NULL;
        m->versions = nv;
        m->cap_versions = cap;
    }
    version_entry *v = tfs_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->version = version;
    v->model = m;
    v->state = TFS_VERSION_END;
    int at = 0;
    while (at < m->n_versions && m->versions[at]->version > version)
        at++;
    memmove(&m->versions[at + 1], &m->versions[at],
            (size_t)(m->n_versions - at) * sizeof *m->versions);
    m->versions[at] = v;
    m->n_versions++;
    return v;
}

static const tfs__version_dir *listing_find(const model_entry *m, int64_t version)
{
    for (int i = 0; i < m->n_listing; i++)
        if (m->listing[i].version == version)
            return &m->listing[i];
    return NULL;
}

static void start_load(tfs_loader *l, version_entry *v, const tfs__version_dir *d)
{
    char *dir = path_join(v->model->base_path, d->name);
    if (!dir)
        return;   /* out of memory: the next reconcile tries again */
    tfs_free(v->dir);
    v->dir = dir;
    v->state = TFS_VERSION_START;
    v->gen++;
    v->failed = false;
    v->tried_fp = d->fingerprint;
    v->disk_bytes = d->disk_bytes;
    tfs_status_clear(&v->status);
    if (!queue_push(l, (load_task){v, v->gen})) {
        v->state = TFS_VERSION_END;
        v->failed = true;
        TFS_ERR(&v->status, TFS_RESOURCE_EXHAUSTED, "out of memory queueing the load");
        return;
    }
    pthread_cond_signal(&l->work_cv);
}

static bool contains(const int64_t *v, int n, int64_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

void tfs__model_reconcile(tfs_loader *l, model_entry *m)
{
    int64_t *present = tfs_malloc((size_t)(m->n_listing + 1) * sizeof *present);
    int64_t *aspired = tfs_malloc((size_t)(m->n_listing + 1) * sizeof *aspired);
    if (!present || !aspired)
        goto done;   /* out of memory: nothing changes now */
    int np = 0;
    for (int i = 0; m->configured && i < m->n_listing; i++) {
        const tfs__version_dir *d = &m->listing[i];
        const version_entry *v = tfs__version_find(m, d->version);
        bool live = v && (v->state == TFS_VERSION_START || v->state == TFS_VERSION_LOADING ||
                          v->state == TFS_VERSION_AVAILABLE);
        /* A complete-looking folder counts for the policy even before it is loadable (stable),
         * so the version it replaces keeps serving meanwhile. */
        if (d->has_saved_model || live)
            present[np++] = d->version;
    }
    int na = tfs__policy_aspired(&m->policy, present, np, aspired);

    for (int i = 0; i < na; i++) {
        const tfs__version_dir *d = listing_find(m, aspired[i]);
        version_entry *v = tfs__version_find(m, aspired[i]);
        if (v && v->state == TFS_VERSION_UNLOADING) {
            revive_version(l, v);
            continue;
        }
        if ((v && v->state != TFS_VERSION_END) || !d->stable)
            continue;   /* already on its way, or wait for the folder to settle */
        if (v && v->failed && d->fingerprint == v->tried_fp)
            continue;   /* failed on these very files: retry only when they change */
        if (!v && !(v = version_add(m, aspired[i])))
            continue;
        start_load(l, v, d);
    }
    for (int i = 0; i < m->n_versions; i++) {
        version_entry *v = m->versions[i];
        v->aspired = contains(aspired, na, v->version);
        if (v->state == TFS_VERSION_START && !v->aspired) {   /* queued, no longer wanted */
            v->state = TFS_VERSION_END;
            v->gen++;
            tfs_status_clear(&v->status);
        }
    }
    for (;;) {
        bool aspired_serving = false;
        int n_unaspired = 0;
        version_entry *highest = NULL;
        for (int i = 0; i < m->n_versions; i++) {
            version_entry *v = m->versions[i];
            if (v->state != TFS_VERSION_AVAILABLE)
                continue;
            if (v->aspired) {
                aspired_serving = true;
            } else {
                n_unaspired++;
                if (!highest)
                    highest = v;   /* versions are kept highest first */
            }
        }
        if (!highest || !(na == 0 || aspired_serving || n_unaspired > 1) ||
            !unload_version(l, highest))
            break;
    }
    pthread_cond_broadcast(&l->done_cv);
done:
    tfs_free(present);
    tfs_free(aspired);
}

void tfs__model_apply_listing(model_entry *m, tfs__version_dir *d, int n)
{
    for (int i = 0; i < n; i++) {
        const tfs__version_dir *prev = listing_find(m, d[i].version);
        d[i].stable = d[i].has_saved_model &&
                      (!m->scanned || (prev && prev->has_saved_model &&
                                       prev->fingerprint == d[i].fingerprint));
    }
    tfs__version_dirs_free(m->listing, m->n_listing);
    m->listing = d;
    m->n_listing = n;
    m->scanned = true;
}

/* ---- loading (worker threads) --------------------------------------------------------------- */

static tfs_servable *servable_new(tfs_loader *l, version_entry *v, tfs_savedmodel *model,
                                  int64_t bytes)
{
    tfs_servable *s = tfs_calloc(1, sizeof *s);
    if (!s || !(s->name = tfs_strdup(v->model->name))) {
        tfs_free(s);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->loader = l;
    s->entry = v;
    s->gen = v->gen;
    s->version = v->version;
    s->memory_bytes = bytes;
    s->model = model;
    return s;
}

static enum tfs_code memory_refused(tfs_loader *l, const version_entry *v, int64_t need,
                                    tfs_status *st)
{
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED,
                   "model '%s' version %lld needs about %lld bytes; %lld of the %lld byte limit "
                   "(--max_model_memory_bytes) are in use", v->model->name, (long long)v->version,
                   (long long)need, (long long)(l->mem_in_use + l->mem_reserved),
                   (long long)l->opts.max_model_memory_bytes);
}

/* Counts one SavedModel load attempt of dir (TensorFlow's load_attempt_count and load_latency).
 * Under mu. Out of memory or past the cap: not counted. */
static void record_load(tfs_loader *l, const char *dir, bool ok, int64_t us)
{
    tfs__load_record *r = NULL;
    for (int i = 0; i < l->n_load_records && !r; i++)
        if (!strcmp(l->load_records[i].path, dir))
            r = &l->load_records[i];
    if (!r) {
        if (l->n_load_records >= TFS_LOADER_MAX_LOAD_RECORDS)
            return;
        if (l->n_load_records == l->cap_load_records) {
            int cap = l->cap_load_records ? 2 * l->cap_load_records : 8;
            tfs__load_record *nr = tfs_realloc(l->load_records, (size_t)cap * sizeof *nr);
            if (!nr)
                return;
            l->load_records = nr;
            l->cap_load_records = cap;
        }
        char *path = tfs_strdup(dir);
        if (!path)
            return;
        r = &l->load_records[l->n_load_records++];
        *r = (tfs__load_record){.path = path};
    }
    if (ok) {
        r->ok++;
        r->ok_us += us;
    } else {
        r->failed++;
    }
}

void tfs_loader_load_records(tfs_loader *l, tfs_load_record_fn fn, void *ctx)
{
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->n_load_records; i++) {
        const tfs__load_record *r = &l->load_records[i];
        fn(ctx, r->path, r->ok, r->failed, r->ok_us);
    }
    pthread_mutex_unlock(&l->mu);
}

/* Loads one START version. Called and returns with mu held; drops it while loading. */
static void load_one(tfs_loader *l, version_entry *v)
{
    model_entry *m = v->model;
    int64_t limit = l->opts.max_model_memory_bytes, estimate = v->disk_bytes, bytes = 0;
    char *dir = tfs_strdup(v->dir), *name = tfs_strdup(m->name);
    tfs_savedmodel *model = NULL;
    tfs_servable *s = NULL;
    tfs_status st = {0};
    enum tfs_code rc;
    double t0 = now_s();
    v->state = TFS_VERSION_LOADING;
    l->n_loading++;
    if (!dir || !name) {
        rc = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory starting the load");
    } else if (limit > 0 && l->mem_in_use + l->mem_reserved + estimate > limit) {
        rc = memory_refused(l, v, estimate, &st);
    } else {
        l->mem_reserved += estimate;
        /* No tensor made while loading may be larger than what the budget has left (a few KB
         * of graph can make a huge one); the whole is checked against it after the load. */
        int64_t left = limit > 0 ? limit - (l->mem_in_use + l->mem_reserved - estimate) : 0;
        pthread_mutex_unlock(&l->mu);
        TFS_LOG_INFO(LOG_MODULE, "loading version %lld of model '%s' from %s",
                     (long long)v->version, name, dir);
        tfs_savedmodel_opts so = tfs_savedmodel_opts_default();
        so.tags = l->tags;
        so.disable_graph_rewrites = l->opts.disable_graph_rewrites;
        double t_load = now_s();
        size_t cap = tfs_runtime_set_thread_max_tensor_bytes(
            limit > 0 ? (size_t)(left > 0 ? left : 1) : 0);
        rc = tfs_savedmodel_load(dir, &so, &model, &st);
        int64_t load_us = (int64_t)((now_s() - t_load) * 1e6);
        bool    load_ok = rc == TFS_OK;
        if (rc == TFS_OK && l->opts.warmup) {
            rc = l->opts.warmup(l->opts.warmup_ctx, name, v->version, dir, model, &st);
            if (rc != TFS_OK && st.code == TFS_OK)
                TFS_ERR(&st, rc, "warmup of model '%s' version %lld failed", name,
                        (long long)v->version);
        }
        tfs_runtime_set_thread_max_tensor_bytes(cap);
        if (rc == TFS_OK)
            bytes = tfs_savedmodel_memory_bytes(model);
        pthread_mutex_lock(&l->mu);
        record_load(l, dir, load_ok, load_us);
        l->mem_reserved -= estimate;
        if (rc == TFS_OK && limit > 0 && l->mem_in_use + l->mem_reserved + bytes > limit)
            rc = memory_refused(l, v, bytes, &st);
    }
    if (rc == TFS_OK && !(s = servable_new(l, v, model, bytes)))
        rc = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory publishing the model");
    if (rc == TFS_OK && l->batcher) {
        /* Reads the version's batching_params.pbtxt (a file read): outside mu. */
        pthread_mutex_unlock(&l->mu);
        rc = tfs__servable_batch_new(l, dir, model, &s->batch, &st);
        pthread_mutex_lock(&l->mu);
        if (rc != TFS_OK) {
            s->model = NULL;   /* freed below with `model` */
            tfs_free(s->name);
            tfs_free(s);
            s = NULL;
        } else if (s->batch) {
            s->bnext = l->batched;
            l->batched = s;
        }
    }
    v->load_seconds = now_s() - t0;
    l->load_seconds_total += v->load_seconds;
    if (rc == TFS_OK) {
        v->state = TFS_VERSION_AVAILABLE;
        v->servable = s;
        v->memory_bytes = bytes;
        tfs_status_clear(&v->status);
        l->mem_in_use += bytes;
        l->loads_ok++;
        model = NULL;
        TFS_LOG_INFO(LOG_MODULE, "model '%s' version %lld is AVAILABLE (%lld bytes, %.3f s)",
                     m->name, (long long)v->version, (long long)bytes, v->load_seconds);
    } else {
        v->state = TFS_VERSION_END;
        v->failed = true;
        v->status = st;
        l->loads_failed++;
        TFS_LOG_ERROR(LOG_MODULE, "model '%s' version %lld failed to load: %s: %s", m->name,
                      (long long)v->version, tfs_code_name(st.code), st.msg);
    }
    tfs__model_reconcile(l, m);
    pthread_mutex_unlock(&l->mu);
    tfs_savedmodel_free(model);
    tfs_free(dir);
    tfs_free(name);
    tfs__flush_releases(l);
    pthread_mutex_lock(&l->mu);
    l->n_loading--;   /* only now is this load's work done (tfs__wait_idle waits for it) */
    pthread_cond_broadcast(&l->done_cv);
}

static void *worker_main(void *arg)
{
    tfs_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stopping && l->n_tasks == 0 && !l->reap)
            pthread_cond_wait(&l->work_cv, &l->mu);
        if (l->stopping)
            break;
        if (l->reap) {
            tfs_servable *s = l->reap;
            l->reap = s->rnext;
            pthread_mutex_unlock(&l->mu);
            tfs__servable_destroy(s);
            pthread_mutex_lock(&l->mu);
            continue;
        }
        load_task t = queue_pop(l);
        if (t.v->gen == t.gen && t.v->state == TFS_VERSION_START)
            load_one(l, t.v);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* ---- scanning ------------------------------------------------------------------------------- */

/* Warns once per change about versions a specific policy lists that are not on disk. */
static void warn_missing(model_entry *m)
{
    if (m->policy.kind != TFS_POLICY_SPECIFIC)
        return;
    uint64_t sig = 0;
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; i < m->policy.n_versions; i++) {
        int64_t want = m->policy.versions[i];
        if (listing_find(m, want))
            continue;
        sig = sig * 1000003u + (uint64_t)want + 1;
        int w = snprintf(list + used, sizeof list - used, "%s%lld", used ? ", " : "",
                         (long long)want);
        if (w > 0 && (size_t)w < sizeof list - used)
            used += (size_t)w;
    }
    if (sig && sig != m->missing_sig)
        TFS_LOG_WARN(LOG_MODULE, "model '%s': the specific version policy lists version(s) %s, "
                     "not found under %s", m->name, list, m->base_path);
    m->missing_sig = sig;
}

static void scan_one(tfs_loader *l, model_entry *m)
{
    tfs__version_dir *d = NULL;
    int n = 0;
    tfs_status st;
    enum tfs_code rc = tfs__scan_base(m->base_path, m->name, &m->ignored, &d, &n, &st);
    pthread_mutex_lock(&l->mu);
    if (!m->configured) {
        tfs__version_dirs_free(d, n);
    } else if (rc != TFS_OK) {
        /* Keep serving what is loaded: a base path that cannot be read now is not "empty". */
        if (strcmp(m->scan_error.msg, st.msg) != 0)
            TFS_LOG_WARN(LOG_MODULE, "%s", st.msg);
        m->scan_error = st;
    } else {
        tfs_status_clear(&m->scan_error);
        if (n == 0 && !m->warned_empty) {
            char skipped[256], note[320] = "";
            tfs__scan_describe_skipped(m->base_path, skipped, sizeof skipped);
            if (skipped[0])
                snprintf(note, sizeof note, " (version folders are named by integers; ignored: "
                         "%s)", skipped);
            TFS_LOG_WARN(LOG_MODULE, "No versions of servable %s found under base path %s%s",
                         m->name, m->base_path, note);
        }
        m->warned_empty = n == 0;
        tfs__model_apply_listing(m, d, n);
        warn_missing(m);
        tfs__model_reconcile(l, m);
    }
    pthread_mutex_unlock(&l->mu);
    tfs__flush_releases(l);
}

void tfs__scan_pass_locked(tfs_loader *l, model_entry **models, int n)
{
    model_entry **snap = NULL;
    if (!models) {
        pthread_mutex_lock(&l->mu);
        n = l->n_config;
        snap = tfs_malloc((size_t)(n + 1) * sizeof *snap);
        if (snap)
            memcpy(snap, l->config, (size_t)n * sizeof *snap);
        pthread_mutex_unlock(&l->mu);
        if (!snap)
            return;
        models = snap;
    }
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&l->mu);
        bool stopping = l->stopping;
        pthread_mutex_unlock(&l->mu);
        if (stopping)
            break;
        scan_one(l, models[i]);
    }
    tfs_free(snap);
}

void tfs__scan_pass(tfs_loader *l, model_entry **models, int n)
{
    pthread_mutex_lock(&l->scan_mu);
    tfs__scan_pass_locked(l, models, n);
    pthread_mutex_unlock(&l->scan_mu);
}

static bool busy(const tfs_loader *l)
{
    if (l->n_releases || l->n_flushing || l->n_loading)
        return true;
    for (int i = 0; i < l->n_models; i++)
        for (int j = 0; j < l->models[i]->n_versions; j++) {
            const version_entry *v = l->models[i]->versions[j];
            if (v->state == TFS_VERSION_START || v->state == TFS_VERSION_LOADING)
                return true;
            /* its last release is freeing it right now: END (and maybe a reload) comes next */
            if (v->state == TFS_VERSION_UNLOADING && v->leaving && !atomic_load(&v->leaving->refs))
                return true;
        }
    return false;
}

void tfs__wait_idle(tfs_loader *l)
{
    pthread_mutex_lock(&l->mu);
    while (!l->stopping && busy(l))
        pthread_cond_wait(&l->done_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

/* ---- threads -------------------------------------------------------------------------------- */

static void *poll_main(void *arg)
{
    tfs_loader *l = arg;
    double period = l->opts.file_system_poll_wait_seconds;
    pthread_mutex_lock(&l->mu);
    while (!l->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        double whole = (double)(time_t)period;
        until.tv_sec += (time_t)period;
        until.tv_nsec += (long)((period - whole) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        while (!l->stopping && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&l->poll_cv, &l->mu, &until);
        if (l->stopping)
            break;
        pthread_mutex_unlock(&l->mu);
        tfs__scan_pass(l, NULL, 0);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

enum tfs_code tfs__threads_start(tfs_loader *l, tfs_status *st)
{
    int n = l->opts.num_load_threads < 1 ? 1 : l->opts.num_load_threads > 64 ? 64
                                                                             : l->opts.num_load_threads;
    if (!(l->workers = tfs_calloc((size_t)n, sizeof *l->workers)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory starting the load threads");
    for (; l->n_workers < n; l->n_workers++)
        if (pthread_create(&l->workers[l->n_workers], NULL, worker_main, l) != 0)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot start a load thread");
    return TFS_OK;
}

enum tfs_code tfs__poll_start(tfs_loader *l, tfs_status *st)
{
    if (l->opts.file_system_poll_wait_seconds <= 0)
        return TFS_OK;
    if (pthread_create(&l->poll_thread, NULL, poll_main, l) != 0)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot start the poll thread");
    l->poll_started = true;
    return TFS_OK;
}

void tfs__threads_stop(tfs_loader *l)
{
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_cond_broadcast(&l->poll_cv);
    pthread_cond_broadcast(&l->done_cv);
    pthread_mutex_unlock(&l->mu);
    if (l->poll_started)
        pthread_join(l->poll_thread, NULL);
    l->poll_started = false;
    for (int i = 0; i < l->n_workers; i++)
        pthread_join(l->workers[i], NULL);
    l->n_workers = 0;
}
