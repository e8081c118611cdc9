/* The metrics store and the per-request records that feed it.
 *
 * DESIGN: per-thread counters merged on read, no lock on the hot path. Each recording thread owns
 * a shard, taken once (under g.mu) from the global list of shards or made new. A shard holds a
 * singly linked, append-only list of series, one per (api, method, model, signature, code) the
 * thread has seen. Only the owning thread writes a shard: it finds a series through a private
 * hash index (no one else reads it, so it needs no synchronisation), bumps the series' counters
 * with relaxed atomic stores (single writer, so load + store, no read-modify-write), and publishes
 * a new series by a release store of the list head after the series is fully built. A scrape
 * walks every shard's list from an acquire load of its head and sums the counters with relaxed
 * loads: each counter only grows, so every scrape sees totals at least as large as the previous
 * one, and a histogram's count is taken as the sum of its buckets so _count always equals the
 * +Inf bucket. Nothing is allocated per request once a series exists.
 *
 * When a thread exits, a pthread key destructor returns its shard to the pool (under g.mu), and
 * the next new thread adopts it with its counters: the hand-over through the mutex keeps the
 * single-writer rule. Shards are identified to the destructor by a never-reused id, so one that
 * runs after a teardown (which frees every shard) finds nothing and does nothing.
 *
 * Cardinality: the model and signature names come from the request. A name the loader is not
 * configured with is counted under model "~unknown~" and signature "", and a signature that the
 * model's latest available version lacks under signature "~unknown~" (checked only when a request
 * would start a new series, so served models pay nothing): a client asking for many made-up names
 * adds one series per method and code, not one per name. Beyond that a shard holds at most
 * MAX_SERIES series; once full, a request whose series is new is counted under model "~overflow~"
 * and signature "".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "server/metrics-impl.h"

#define MAX_SERIES    2048
#define OVERFLOW_NAME "~overflow~"
#define UNKNOWN_NAME  "~unknown~"

/* 10 * 1.8^k for k = 0..32, as TensorFlow's Buckets::Exponential(10, 1.8, 33) computes them
 * (repeated multiplication in double, printed here with every digit). */
const double tfs__tf_bucket_limits[TFS__TF_BUCKETS - 1] = {
    10.0, 18.0, 32.4, 58.32, 104.976, 188.95680000000002, 340.12224000000003, 612.2200320000001,
    1101.9960576, 1983.5929036800003, 3570.4672266240004, 6426.841007923201, 11568.31381426176,
    20822.96486567117, 37481.336758208105, 67466.40616477458, 121439.53109659425,
    218591.15597386964, 393464.08075296535, 708235.3453553376, 1274823.6216396077,
    2294682.518951294, 4130428.534112329, 7434771.361402192, 13382588.450523946,
    24088659.210943103, 43359586.57969759, 78047255.84345566, 140485060.5182202,
    252873108.93279633, 455171596.0790334, 819308872.9422601, 1474755971.2960682,
};
const double tfs__dur_bucket_limits[TFS__DUR_BUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

typedef struct series {
    struct series   *next;        /* immutable once published */
    uint64_t         hash;
    enum tfs_api     api;
    enum tfs__method method;
    enum tfs_code    code;
    char            *model;       /* owned */
    char            *signature;   /* owned */
    _Atomic uint64_t latency[TFS__TF_BUCKETS];
    _Atomic uint64_t latency_sum_ns;
    _Atomic uint64_t runtime[TFS__TF_BUCKETS];
    _Atomic uint64_t runtime_sum_ns;
    _Atomic uint64_t duration[TFS__DUR_BUCKETS];
} series;

typedef struct shard {
    /* Shards are separate allocations that may sit next to each other: the padding keeps one
     * thread's counters off the cache lines of another's. */
    char              pad_front[64];
    struct shard     *next_shard;   /* g.shards, under g.mu */
    uint64_t          id;
    bool              owned;        /* under g.mu */
    _Atomic(series *) head;
    _Atomic uint64_t  begun;        /* requests started on this shard's thread */
    _Atomic uint64_t  done;
    /* owner-private */
    series           *last;         /* the series recorded last: most requests repeat it */
    series          **index;        /* open addressing, cap a power of two */
    size_t            cap;
    size_t            n;
    char              pad_back[64];
} shard;

static struct {
    pthread_mutex_t  mu;
    shard           *shards;
    uint64_t         next_id;
    _Atomic uint64_t gen;        /* bumped by teardown; a thread's cached shard is stale after */
    atomic_bool      enabled;
    pthread_key_t    key;
    pthread_once_t   once;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1, .once = PTHREAD_ONCE_INIT};

static _Thread_local shard               *tls_shard;
static _Thread_local uint64_t             tls_gen;
static _Thread_local tfs__request_record *tls_current;

/* ---- names ---------------------------------------------------------------------------------- */

static const char *const method_names[TFS__METHOD_COUNT] = {
    "predict", "classify", "regress", "multi_inference", "metadata", "status", "reload_config",
    "infer", "model_metadata", "model_ready", "server_metadata", "server_ready", "server_live",
    "other",
};

const char *tfs__method_name(enum tfs__method m)
{
    return (unsigned)m < TFS__METHOD_COUNT ? method_names[m] : "other";
}

bool tfs__method_is_v2(enum tfs__method m)
{
    return m >= TFS__METHOD_INFER && m < TFS__METHOD_OTHER;
}

enum tfs__method tfs__method_from_grpc_path(const char *path)
{
    static const struct {
        const char      *rpc;
        enum tfs__method m;
    } rpcs[] = {
        {"/tensorflow.serving.PredictionService/Predict", TFS__METHOD_PREDICT},
        {"/tensorflow.serving.PredictionService/Classify", TFS__METHOD_CLASSIFY},
        {"/tensorflow.serving.PredictionService/Regress", TFS__METHOD_REGRESS},
        {"/tensorflow.serving.PredictionService/MultiInference", TFS__METHOD_MULTI_INFERENCE},
        {"/tensorflow.serving.PredictionService/GetModelMetadata", TFS__METHOD_METADATA},
        {"/tensorflow.serving.ModelService/GetModelStatus", TFS__METHOD_STATUS},
        {"/tensorflow.serving.ModelService/HandleReloadConfigRequest", TFS__METHOD_RELOAD_CONFIG},
        {"/inference.GRPCInferenceService/ModelInfer", TFS__METHOD_INFER},
        {"/inference.GRPCInferenceService/ModelMetadata", TFS__METHOD_MODEL_METADATA},
        {"/inference.GRPCInferenceService/ModelReady", TFS__METHOD_MODEL_READY},
        {"/inference.GRPCInferenceService/ServerMetadata", TFS__METHOD_SERVER_METADATA},
        {"/inference.GRPCInferenceService/ServerReady", TFS__METHOD_SERVER_READY},
        {"/inference.GRPCInferenceService/ServerLive", TFS__METHOD_SERVER_LIVE},
    };
    for (size_t i = 0; path && i < sizeof rpcs / sizeof rpcs[0]; i++)
        if (strcmp(path, rpcs[i].rpc) == 0)
            return rpcs[i].m;
    return TFS__METHOD_OTHER;
}

/* ---- shards --------------------------------------------------------------------------------- */

static void free_shard(shard *sh)
{
    series *s = atomic_load_explicit(&sh->head, memory_order_acquire);
    while (s) {
        series *next = s->next;
        tfs_free(s->model);
        tfs_free(s->signature);
        tfs_free(s);
        s = next;
    }
    tfs_free(sh->index);
    tfs_free(sh);
}

/* Thread exit: the shard goes back to the pool if it still exists. */
static void release_shard(void *v)
{
    uint64_t id = (uint64_t)(uintptr_t)v;
    pthread_mutex_lock(&g.mu);
    for (shard *sh = g.shards; sh; sh = sh->next_shard)
        if (sh->id == id)
            sh->owned = false;
    pthread_mutex_unlock(&g.mu);
}

static void make_key(void)
{
    if (pthread_key_create(&g.key, release_shard) != 0)
        abort();   /* only when the process is out of keys: nothing sensible to do */
}

/* The calling thread's shard; NULL when out of memory. */
static shard *my_shard(void)
{
    uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
    if (tls_shard && tls_gen == gen)
        return tls_shard;
    pthread_once(&g.once, make_key);
    pthread_mutex_lock(&g.mu);
    shard *sh = g.shards;
    while (sh && sh->owned)
        sh = sh->next_shard;
    if (!sh && (sh = tfs_calloc(1, sizeof *sh)) != NULL) {
        sh->id = g.next_id++;
        sh->next_shard = g.shards;
        g.shards = sh;
    }
    if (sh)
        sh->owned = true;
    pthread_mutex_unlock(&g.mu);
    if (!sh)
        return NULL;
    pthread_setspecific(g.key, (void *)(uintptr_t)sh->id);
    tls_shard = sh;
    tls_gen = gen;
    return sh;
}

void tfs__metrics_teardown(void)
{
    pthread_mutex_lock(&g.mu);
    shard *sh = g.shards;
    g.shards = NULL;
    atomic_fetch_add(&g.gen, 1);
    pthread_mutex_unlock(&g.mu);
    while (sh) {
        shard *next = sh->next_shard;
        free_shard(sh);
        sh = next;
    }
    tls_shard = NULL;
    tfs__metrics_set_loader(NULL);
    tfs__metrics_batching_teardown();
}

/* ---- series lookup (owner thread only) ------------------------------------------------------ */

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;   /* FNV-1a */
    return (h ^ 0xff) * 1099511628211ull;
}

static uint64_t key_hash(const tfs__request_record *r, const char *model, const char *sig)
{
    uint64_t h = 14695981039346656037ull;
    h = (h ^ (uint64_t)r->api) * 1099511628211ull;
    h = (h ^ (uint64_t)r->method) * 1099511628211ull;
    h = (h ^ (uint64_t)r->code) * 1099511628211ull;
    return hash_str(hash_str(h, model), sig);
}

static bool key_eq(const series *s, uint64_t h, const tfs__request_record *r, const char *model,
                   const char *sig)
{
    return s->hash == h && s->api == r->api && s->method == r->method && s->code == r->code &&
           strcmp(s->model, model) == 0 && strcmp(s->signature, sig) == 0;
}

static series *index_find(const shard *sh, uint64_t h, const tfs__request_record *r,
                          const char *model, const char *sig)
{
    if (!sh->cap)
        return NULL;
    for (size_t i = h & (sh->cap - 1);; i = (i + 1) & (sh->cap - 1)) {
        series *s = sh->index[i];
        if (!s || key_eq(s, h, r, model, sig))
            return s;
    }
}

static bool index_put(shard *sh, series *s)
{
    if ((sh->n + 1) * 2 > sh->cap) {
        size_t   cap = sh->cap ? sh->cap * 2 : 16;
        series **idx = tfs_calloc(cap, sizeof *idx);
        if (!idx)
            return false;
        for (size_t i = 0; i < sh->cap; i++) {
            series *o = sh->index[i];
            if (!o)
                continue;
            size_t k = o->hash & (cap - 1);
            while (idx[k])
                k = (k + 1) & (cap - 1);
            idx[k] = o;
        }
        tfs_free(sh->index);
        sh->index = idx;
        sh->cap = cap;
    }
    size_t k = s->hash & (sh->cap - 1);
    while (sh->index[k])
        k = (k + 1) & (sh->cap - 1);
    sh->index[k] = s;
    sh->n++;
    return true;
}

static series *series_new(shard *sh, uint64_t h, const tfs__request_record *r, const char *model,
                          const char *sig)
{
    series *s = tfs_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->hash = h;
    s->api = r->api;
    s->method = r->method;
    s->code = r->code;
    s->model = tfs_strdup(model);
    s->signature = tfs_strdup(sig);
    if (!s->model || !s->signature || !index_put(sh, s)) {
        tfs_free(s->model);
        tfs_free(s->signature);
        tfs_free(s);
        return NULL;
    }
    /* Publish: everything above is visible to a scraper that acquires the new head. */
    s->next = atomic_load_explicit(&sh->head, memory_order_relaxed);
    atomic_store_explicit(&sh->head, s, memory_order_release);
    return s;
}

static series *find_series(shard *sh, const tfs__request_record *r)
{
    const char *model = r->model, *sig = r->signature;
    series     *s = sh->last;
    /* Skips hashing the strings for the common case of one model per thread. */
    if (s && s->api == r->api && s->method == r->method && s->code == r->code &&
        strcmp(s->model, model) == 0 && strcmp(s->signature, sig) == 0)
        return s;
    uint64_t h = key_hash(r, model, sig);
    if ((s = index_find(sh, h, r, model, sig)) == NULL) {
        if (!tfs__metrics_model_served(model)) {
            model = UNKNOWN_NAME;
            sig = "";
        } else if (!tfs__metrics_signature_served(model, sig)) {
            sig = UNKNOWN_NAME;
        }
        if (model != r->model || sig != r->signature) {
            h = key_hash(r, model, sig);
            s = index_find(sh, h, r, model, sig);
        }
    }
    if (!s && sh->n >= MAX_SERIES) {
        model = OVERFLOW_NAME;
        sig = "";
        h = key_hash(r, model, sig);
        s = index_find(sh, h, r, model, sig);
    }
    if (!s)
        s = series_new(sh, h, r, model, sig);
    if (s)
        sh->last = s;
    return s;
}

/* ---- recording ------------------------------------------------------------------------------ */

static inline void bump(_Atomic uint64_t *c, uint64_t by)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

/* The bucket of v: the first bound >= v (Prometheus' le), n_limits for +Inf. */
static int bucket_of(const double *limits, int n_limits, double v)
{
    int lo = 0, hi = n_limits;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v <= limits[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static uint64_t to_ns(double seconds)
{
    return seconds > 0 ? (uint64_t)(seconds * 1e9 + 0.5) : 0;
}

void tfs__metrics_enable(bool on)
{
    atomic_store(&g.enabled, on);
}

bool tfs__metrics_enabled(void)
{
    return atomic_load_explicit(&g.enabled, memory_order_relaxed);
}

void tfs__metrics_record(const tfs__request_record *r)
{
    shard *sh = my_shard();
    if (!sh)
        return;
    series *s = find_series(sh, r);
    if (!s)
        return;   /* out of memory: this request goes uncounted */
    double us = r->total_seconds * 1e6;
    bump(&s->latency[bucket_of(tfs__tf_bucket_limits, TFS__TF_BUCKETS - 1, us)], 1);
    bump(&s->latency_sum_ns, to_ns(r->total_seconds));
    bump(&s->duration[bucket_of(tfs__dur_bucket_limits, TFS__DUR_BUCKETS - 1, r->total_seconds)],
         1);
    if (r->ran) {   /* a run of a tiny model can take less than the microsecond it is timed in */
        double rus = r->runtime_seconds * 1e6;
        bump(&s->runtime[bucket_of(tfs__tf_bucket_limits, TFS__TF_BUCKETS - 1, rus)], 1);
        bump(&s->runtime_sum_ns, to_ns(r->runtime_seconds));
    }
}

int64_t tfs__clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void tfs__request_begin(tfs__request_record *r, enum tfs_api api, enum tfs__method m)
{
    r->api = api;
    r->method = m;
    r->model[0] = 0;
    r->version = -1;
    r->signature[0] = 0;
    r->code = TFS_OK;
    r->http_status = 0;
    r->total_seconds = 0;
    r->runtime_seconds = 0;
    r->ran = false;
    r->start_ns = 0;
    bool metrics = tfs__metrics_enabled();
    if (!metrics && !tfs__access_log_enabled())
        return;
    r->start_ns = tfs__clock_ns();
    if (r->start_ns == 0)
        r->start_ns = 1;
    tls_current = r;
    if (metrics) {
        shard *sh = my_shard();
        if (sh)
            bump(&sh->begun, 1);
    }
}

static void copy_label(char *dst, const char *src)
{
    size_t n = strnlen(src, TFS__LABEL_MAX - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

void tfs__request_note(const char *model, int64_t version, const char *signature)
{
    tfs__request_record *r = tls_current;
    if (!r)
        return;
    if (model)
        copy_label(r->model, model);
    if (version >= 0)
        r->version = version;
    if (signature)
        copy_label(r->signature, signature);
}

void tfs__request_note_runtime(double seconds)
{
    if (tls_current) {
        tls_current->runtime_seconds += seconds;
        tls_current->ran = true;
    }
}

void tfs__request_detach(tfs__request_record *r)
{
    if (tls_current == r)
        tls_current = NULL;
}

void tfs__request_done(tfs__request_record *r)
{
    if (tls_current == r)
        tls_current = NULL;
    if (!r->start_ns)
        return;
    r->total_seconds = (double)(tfs__clock_ns() - r->start_ns) * 1e-9;
    /* A version answered, so the signature was resolved: name the default one. */
    if (!r->signature[0] && r->version >= 0 &&
        (r->method == TFS__METHOD_PREDICT || r->method == TFS__METHOD_CLASSIFY ||
         r->method == TFS__METHOD_REGRESS))
        copy_label(r->signature, "serving_default");
    if (tfs__metrics_enabled()) {
        tfs__metrics_record(r);
        shard *sh = my_shard();
        if (sh)
            bump(&sh->done, 1);
    }
    if (tfs__access_log_enabled())
        tfs__access_log_write(r);
}

/* ---- snapshot ------------------------------------------------------------------------------- */

static int row_cmp(const void *a, const void *b)
{
    const tfs__metrics_row *x = a, *y = b;
    if (x->api != y->api)
        return x->api < y->api ? -1 : 1;
    if (x->method != y->method)
        return x->method < y->method ? -1 : 1;
    int c = strcmp(x->model, y->model);
    if (c)
        return c;
    if ((c = strcmp(x->signature, y->signature)) != 0)
        return c;
    return x->code < y->code ? -1 : x->code > y->code;
}

static uint64_t load(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static bool grow_rows(tfs__metrics_snapshot *s, size_t *cap)
{
    size_t            ncap = *cap ? *cap * 2 : 64;
    tfs__metrics_row *rows = tfs_realloc(s->rows, ncap * sizeof *rows);
    if (!rows)
        return false;
    s->rows = rows;
    *cap = ncap;
    return true;
}

enum tfs_code tfs__metrics_snapshot_take(tfs__metrics_snapshot *s, tfs_status *st)
{
    int64_t begun = 0, done = 0;
    size_t  n = 0, cap = 0;

    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&g.mu);
    /* done before begun: a request seen done was begun earlier. */
    for (const shard *sh = g.shards; sh; sh = sh->next_shard)
        done += (int64_t)load(&sh->done);
    for (const shard *sh = g.shards; sh; sh = sh->next_shard)
        begun += (int64_t)load(&sh->begun);
    for (const shard *sh = g.shards; sh; sh = sh->next_shard) {
        const series *x = atomic_load_explicit(&sh->head, memory_order_acquire);
        for (; x; x = x->next) {
            if (n == cap && !grow_rows(s, &cap)) {
                pthread_mutex_unlock(&g.mu);
                tfs__metrics_snapshot_deinit(s);
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED,
                               "out of memory taking a metrics snapshot");
            }
            tfs__metrics_row *r = &s->rows[n++];
            r->api = x->api;
            r->method = x->method;
            r->code = x->code;
            r->model = x->model;
            r->signature = x->signature;
            for (int i = 0; i < TFS__TF_BUCKETS; i++) {
                r->latency[i] = load(&x->latency[i]);
                r->runtime[i] = load(&x->runtime[i]);
            }
            for (int i = 0; i < TFS__DUR_BUCKETS; i++)
                r->duration[i] = load(&x->duration[i]);
            r->latency_sum_ns = load(&x->latency_sum_ns);
            r->runtime_sum_ns = load(&x->runtime_sum_ns);
        }
    }
    pthread_mutex_unlock(&g.mu);

    /* The same series from several shards: sort, then fold neighbours together. */
    if (n)
        qsort(s->rows, n, sizeof *s->rows, row_cmp);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w && row_cmp(&s->rows[w - 1], &s->rows[i]) == 0) {
            tfs__metrics_row *d = &s->rows[w - 1], *x = &s->rows[i];
            for (int k = 0; k < TFS__TF_BUCKETS; k++) {
                d->latency[k] += x->latency[k];
                d->runtime[k] += x->runtime[k];
            }
            for (int k = 0; k < TFS__DUR_BUCKETS; k++)
                d->duration[k] += x->duration[k];
            d->latency_sum_ns += x->latency_sum_ns;
            d->runtime_sum_ns += x->runtime_sum_ns;
        } else {
            if (w != i)
                s->rows[w] = s->rows[i];
            w++;
        }
    }
    s->n = (int)w;
    s->in_flight = begun > done ? begun - done : 0;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs__metrics_snapshot_deinit(tfs__metrics_snapshot *s)
{
    if (!s)
        return;
    tfs_free(s->rows);
    memset(s, 0, sizeof *s);
}

uint64_t tfs__metrics_row_count(const tfs__metrics_row *r)
{
    uint64_t n = 0;
    for (int i = 0; i < TFS__TF_BUCKETS; i++)
        n += r->latency[i];
    return n;
}
