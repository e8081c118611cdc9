/* Memory plans of runs (see memplan-impl.h): for each run plan and each set of feed shapes, where
 * in one arena every kernel output of the run goes, so that a run with a seen shape allocates
 * nothing but its escaping outputs, and outputs whose lifetimes do not overlap share memory.
 *
 * DESIGN. Sizes are learned from a first run, not inferred. The runtime has no static shape
 * inference: each kernel computes its output shape from its inputs' shapes and, for Reshape, Fill,
 * Tile, Slice and many more, from input VALUES. Inferring shapes ahead of the run would duplicate
 * that logic for 150 ops (and could disagree with it), and still be unable to size the
 * value-dependent ones. Learning instead records, in the first run with a given key (every feed's
 * dtype and shape), for each output that a kernel allocates with tfs__kernel_output its byte size,
 * the step that allocated it and the step at which its memory was really released -- measured by
 * the tensor's deallocator, so aliases (Identity passing a tensor on, Reshape views holding their
 * source, TensorLists, variables, function results, an input a kernel writes its output over:
 * tfs__kernel_take_input) extend a lifetime exactly as far as they should. Outputs still alive
 * when the run ends escape (fetched, assigned, stored): they are not planned. The rest get
 * offsets by "greedy by size" (largest first, each into the best-fitting gap among the already
 * placed buffers whose lifetimes overlap its own; TFLite's arena planner does the same), in one
 * arena per run. Arenas are pooled per plan, so a steady state mallocs none; learning costs one
 * unplanned run per key (the key cache is bounded, LRU). Idle arenas of all plans together stay
 * under a budget (512 MiB); beyond it an arena is freed after its run.
 *
 * Safety does not rest on the plan. A region is handed out only when no tensor over an
 * overlapping region is alive in this arena (each arena keeps the list of its live buffers; a
 * buffer turns dead from its tensor's deallocator, possibly on another thread), else the output
 * comes from the heap. A tensor over a planned region holds a reference to its arena, and the
 * arena one to its plan, so tensors may outlive the run, the plan cache and the session. A planned
 * run in which a buffer the plan thought would die stays alive (a data-dependent path) retires
 * the plan, so the next run with that key learns again.
 */
#include "runtime/memplan-impl.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64              /* region alignment: a cache line, and AVX-512 loads */
#define POOL_MAX 8            /* idle arenas kept per memory plan */
/* Default of the bytes of idle arenas kept by all plans of the process together: an arena that
 * would exceed it is freed when its run ends, so big models with many shape keys do not keep
 * gigabytes in reserve (tfs__plan_set_idle_budget). */
#define IDLE_BUDGET ((long long)512 << 20)
#define STEP_END INT32_MAX    /* "released after the run" */
#define NOT_RELEASED (-1)
#define MAX_PLANNED 4096      /* buffers per memory plan */

/* ---- test hooks ----------------------------------------------------------------------------- */

static atomic_uint test_flags;

void tfs__plan_set_test_flags(unsigned flags)
{
    atomic_store(&test_flags, flags);
}

unsigned tfs__plan_test_flags(void)
{
    return atomic_load_explicit(&test_flags, memory_order_relaxed);
}

/* ---- structures ----------------------------------------------------------------------------- */

enum { BUF_FREE = 0, BUF_LIVE, BUF_DEAD };

typedef struct mem_plan {
    atomic_int       refs;      /* the cache's + one per arena out of the pool */
    struct mem_plan *prev, *next;   /* the cache's list, most recently used first (cache mu) */
    bool             cached;
    uint64_t         hash;
    int              key_len;
    int64_t         *key;       /* per feed: dtype, rank, dims */
    int              n_bufs;
    int             *buf_of;    /* [n_outputs] buffer of each output, or -1 (heap) */
    size_t          *off;       /* [n_bufs] */
    size_t          *size;      /* [n_bufs] capacity in bytes (a multiple of ALIGN) */
    bool            *escapes;   /* [n_bufs] expected alive after the run (PLAN_ESCAPED only) */
    size_t           arena_bytes;
    _Atomic(struct mem_arena *) spare;   /* one idle arena, taken and given without the lock */
    pthread_mutex_t  pool_mu;
    struct mem_arena *pool;     /* more idle arenas */
    int              n_pool;
} mem_plan;

typedef struct arena_handle {
    struct mem_arena *a;
    int               buf;
} arena_handle;

typedef struct mem_arena {
    atomic_int             refs;    /* the run's + one per tensor handed out */
    mem_plan              *mp;
    void                  *raw;     /* tfs_malloc'ed; base is raw rounded up to ALIGN */
    char                  *base;
    _Atomic unsigned char *state;   /* [n_bufs] BUF_* */
    arena_handle          *handles; /* [n_bufs] deallocator arguments */
    int                   *live;    /* buffers handed out and not yet seen dead (run thread) */
    int                    n_live;
    struct mem_arena      *next;    /* pool link */
} mem_arena;

typedef struct rec_entry {
    size_t     size;      /* 0: not allocated through tfs__kernel_output */
    int        t0;        /* step that allocated it */
    atomic_int t1;        /* step at which it was released, NOT_RELEASED or STEP_END */
    bool       unplannable;   /* allocated twice in one run */
} rec_entry;

typedef struct rec_handle {
    struct mem_recorder *rec;
    int                  idx;
} rec_handle;

typedef struct mem_recorder {
    atomic_int  refs;     /* the run's + one per tensor handed out */
    atomic_int  step;
    int         n;
    rec_entry  *e;        /* [n] */
    rec_handle *handles;  /* [n] */
    uint64_t    hash;
    int         key_len;
    int64_t    *key;
} mem_recorder;

struct tfs_mem_cache {
    pthread_mutex_t mu;
    int             n_outputs;
    int             capacity;
    int             count;
    mem_plan       *head, *tail;
    tfs_mem_stats  *stats;
};

static void stat_add(atomic_llong *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- plans and arenas ----------------------------------------------------------------------- */

static atomic_llong idle_bytes;   /* data bytes of the arenas in every plan's pool */
static atomic_llong idle_budget = IDLE_BUDGET;

void tfs__plan_set_idle_budget(int64_t bytes)
{
    atomic_store(&idle_budget, bytes >= 0 ? (long long)bytes : IDLE_BUDGET);
}

static long long arena_cost(const mem_plan *mp)
{
    return (long long)mp->arena_bytes + ALIGN;
}

/* Reserves room in the idle budget for an arena about to be pooled; false: free it instead. */
static bool idle_reserve(const mem_plan *mp)
{
    long long c = arena_cost(mp);
    long long budget = atomic_load_explicit(&idle_budget, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&idle_bytes, c, memory_order_relaxed) + c <= budget)
        return true;
    atomic_fetch_sub_explicit(&idle_bytes, c, memory_order_relaxed);
    return false;
}

static void arena_free(mem_arena *a)
{
    if (!a)
        return;
    tfs_free(a->raw);
    tfs_free(a);
}

/* Frees an arena that was pooled (it leaves the idle budget). */
static void idle_arena_free(mem_arena *a)
{
    if (!a)
        return;
    atomic_fetch_sub_explicit(&idle_bytes, arena_cost(a->mp), memory_order_relaxed);
    arena_free(a);
}

static void plan_unref(mem_plan *mp)
{
    if (!mp || atomic_fetch_sub_explicit(&mp->refs, 1, memory_order_acq_rel) != 1)
        return;
    idle_arena_free(atomic_load(&mp->spare));
    while (mp->pool) {
        mem_arena *a = mp->pool;
        mp->pool = a->next;
        idle_arena_free(a);
    }
    pthread_mutex_destroy(&mp->pool_mu);
    tfs_free(mp->key);
    tfs_free(mp->buf_of);
    tfs_free(mp->off);
    tfs_free(mp->size);
    tfs_free(mp->escapes);
    tfs_free(mp);
}

/* One allocation for the arena and its per-buffer arrays, one for its data. */
static mem_arena *arena_new(mem_plan *mp)
{
    size_t n = (size_t)mp->n_bufs;
    size_t head = (sizeof(mem_arena) + 15) & ~(size_t)15;
    size_t handles = n * sizeof(arena_handle), live = n * sizeof(int);
    mem_arena *a = tfs_calloc(1, head + handles + live + n);
    if (!a)
        return NULL;
    char *p = (char *)a + head;
    a->handles = (arena_handle *)p;
    a->live = (int *)(p + handles);
    a->state = (_Atomic unsigned char *)(p + handles + live);
    a->raw = tfs_malloc(mp->arena_bytes + ALIGN);
    if (!a->raw) {
        tfs_free(a);
        return NULL;
    }
    a->base = (char *)(((uintptr_t)a->raw + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    a->mp = mp;
    for (size_t i = 0; i < n; i++) {
        a->handles[i] = (arena_handle){a, (int)i};
        atomic_init(&a->state[i], BUF_FREE);
    }
    return a;
}

/* Drops a reference; the last one returns the arena to its plan's pool (every tensor over it is
 * gone, so every region is free again) and drops the arena's reference to the plan. */
static void arena_unref(mem_arena *a)
{
    if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
        return;
    mem_plan *mp = a->mp;
    for (int i = 0; i < mp->n_bufs; i++)
        atomic_store_explicit(&a->state[i], BUF_FREE, memory_order_relaxed);
    a->n_live = 0;
    if (!idle_reserve(mp)) {
        arena_free(a);
        plan_unref(mp);
        return;
    }
    mem_arena *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&mp->spare, &none, a, memory_order_acq_rel,
                                                memory_order_relaxed)) {
        plan_unref(mp);
        return;
    }
    bool pooled = false;
    pthread_mutex_lock(&mp->pool_mu);
    if (mp->n_pool < POOL_MAX) {
        a->next = mp->pool;
        mp->pool = a;
        mp->n_pool++;
        pooled = true;
    }
    pthread_mutex_unlock(&mp->pool_mu);
    if (!pooled)
        idle_arena_free(a);
    plan_unref(mp);
}

/* The deallocator of a tensor over a planned region. */
static void arena_release(void *data, void *arg)
{
    (void)data;
    arena_handle *h = arg;
    atomic_store_explicit(&h->a->state[h->buf], BUF_DEAD, memory_order_release);
    arena_unref(h->a);
}

/* An arena of mp for one run, holding the caller's reference to mp; NULL when out of memory
 * (the reference is then dropped). */
static mem_arena *arena_get(mem_plan *mp, tfs_mem_stats *stats)
{
    mem_arena *a = atomic_exchange_explicit(&mp->spare, NULL, memory_order_acq_rel);
    if (!a) {
        pthread_mutex_lock(&mp->pool_mu);
        a = mp->pool;
        if (a) {
            mp->pool = a->next;
            mp->n_pool--;
        }
        pthread_mutex_unlock(&mp->pool_mu);
    }
    if (a) {
        atomic_fetch_sub_explicit(&idle_bytes, arena_cost(mp), memory_order_relaxed);
    } else {
        a = arena_new(mp);
        if (!a) {
            plan_unref(mp);
            return NULL;
        }
        stat_add(&stats->arenas_created);
    }
    a->next = NULL;
    atomic_store_explicit(&a->refs, 1, memory_order_relaxed);
    return a;
}

/* ---- the cache ------------------------------------------------------------------------------ */

enum tfs_code tfs__mem_cache_new(int n_outputs, int capacity, tfs_mem_stats *stats,
                                 tfs_mem_cache **out, tfs_status *st)
{
    *out = NULL;
    tfs_mem_cache *c = tfs_calloc(1, sizeof *c);
    if (!c)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a memory plan cache");
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        tfs_free(c);
        return TFS_ERR(st, TFS_INTERNAL, "cannot create a mutex");
    }
    c->n_outputs = n_outputs;
    c->capacity = capacity > 0 ? capacity : 1;
    c->stats = stats;
    *out = c;
    return TFS_OK;
}

static void cache_unlink(tfs_mem_cache *c, mem_plan *mp)
{
    if (mp->prev)
        mp->prev->next = mp->next;
    else
        c->head = mp->next;
    if (mp->next)
        mp->next->prev = mp->prev;
    else
        c->tail = mp->prev;
    mp->prev = mp->next = NULL;
    mp->cached = false;
    c->count--;
}

static void cache_push_front(tfs_mem_cache *c, mem_plan *mp)
{
    mp->prev = NULL;
    mp->next = c->head;
    if (c->head)
        c->head->prev = mp;
    else
        c->tail = mp;
    c->head = mp;
    mp->cached = true;
    c->count++;
}

void tfs__mem_cache_free(tfs_mem_cache *c)
{
    if (!c)
        return;
    while (c->head) {
        mem_plan *mp = c->head;
        cache_unlink(c, mp);
        plan_unref(mp);
    }
    pthread_mutex_destroy(&c->mu);
    tfs_free(c);
}

/* ---- keys ----------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, int64_t v)
{
    h ^= (uint64_t)v;
    h *= 0x100000001b3ULL;   /* FNV-1a prime */
    return h ^ (h >> 29);
}

static uint64_t feeds_hash(const tfs_feed *feeds, int n, int *key_len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int len = 0;
    for (int i = 0; i < n; i++) {
        const tfs_tensor *t = feeds[i].tensor;
        h = mix(h, t->dtype);
        h = mix(h, t->rank);
        for (int d = 0; d < t->rank; d++)
            h = mix(h, t->dims[d]);
        len += 2 + t->rank;
    }
    *key_len = len;
    return h;
}

static bool key_matches(const int64_t *key, int key_len, const tfs_feed *feeds, int n)
{
    int at = 0;
    for (int i = 0; i < n; i++) {
        const tfs_tensor *t = feeds[i].tensor;
        if (at + 2 + t->rank > key_len || key[at] != t->dtype || key[at + 1] != t->rank)
            return false;
        for (int d = 0; d < t->rank; d++)
            if (key[at + 2 + d] != t->dims[d])
                return false;
        at += 2 + t->rank;
    }
    return at == key_len;
}

static bool keys_equal(const int64_t *a, int na, const int64_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

/* ---- learning ------------------------------------------------------------------------------- */

static void rec_unref(mem_recorder *rec)
{
    if (!rec || atomic_fetch_sub_explicit(&rec->refs, 1, memory_order_acq_rel) != 1)
        return;
    tfs_free(rec->key);
    tfs_free(rec);
}

/* The deallocator of a tensor allocated by a learning run: records when it went. */
static void rec_release(void *data, void *arg)
{
    rec_handle *h = arg;
    mem_recorder *rec = h->rec;
    int step = atomic_load_explicit(&rec->step, memory_order_relaxed);
    atomic_store_explicit(&rec->e[h->idx].t1, step, memory_order_release);
    tfs_free(data);
    rec_unref(rec);
}

static mem_recorder *rec_new(int n, const tfs_feed *feeds, int n_feeds, uint64_t hash,
                             int key_len)
{
    size_t head = (sizeof(mem_recorder) + 15) & ~(size_t)15;
    size_t entries = (size_t)n * sizeof(rec_entry);
    mem_recorder *rec = tfs_calloc(1, head + entries + (size_t)n * sizeof(rec_handle));
    int64_t *key = tfs_malloc((size_t)(key_len + 1) * sizeof *key);
    if (!rec || !key) {
        tfs_free(rec);
        tfs_free(key);
        return NULL;
    }
    rec->e = (rec_entry *)((char *)rec + head);
    rec->handles = (rec_handle *)((char *)rec + head + entries);
    rec->n = n;
    for (int i = 0; i < n; i++) {
        atomic_init(&rec->e[i].t1, NOT_RELEASED);
        rec->handles[i] = (rec_handle){rec, i};
    }
    atomic_init(&rec->refs, 1);
    atomic_init(&rec->step, 0);
    int at = 0;
    for (int i = 0; i < n_feeds; i++) {
        const tfs_tensor *t = feeds[i].tensor;
        key[at++] = t->dtype;
        key[at++] = t->rank;
        for (int d = 0; d < t->rank; d++)
            key[at++] = t->dims[d];
    }
    rec->hash = hash;
    rec->key_len = key_len;
    rec->key = key;
    return rec;
}

typedef struct cand {
    int    idx;       /* output number */
    size_t size;
    int    t0, t1;    /* lifetime in steps, inclusive */
    size_t off;
} cand;

static int cmp_cand(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    if (a->t0 != b->t0)
        return a->t0 < b->t0 ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_off(const void *pa, const void *pb)
{
    const cand *a = *(const cand *const *)pa, *b = *(const cand *const *)pb;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Greedy by size: c sorted by cmp_cand; each buffer, largest first, goes into the smallest gap that fits among the
 * placed buffers whose lifetimes overlap its own, or after the last of them. Returns the arena
 * size; false when out of memory. */
static bool assign_offsets(cand *c, int n, size_t *total)
{
    const cand **busy = tfs_malloc(((size_t)n + 1) * sizeof *busy);
    if (!busy)
        return false;
    *total = 0;
    for (int i = 0; i < n; i++) {
        int nb = 0;
        for (int j = 0; j < i; j++)
            if (!(c[j].t1 < c[i].t0 || c[i].t1 < c[j].t0))
                busy[nb++] = &c[j];
        qsort(busy, (size_t)nb, sizeof *busy, cmp_off);
        size_t at = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
        for (int j = 0; j < nb; j++) {
            if (busy[j]->off > at) {
                size_t gap = busy[j]->off - at;
                if (gap >= c[i].size && gap < best_gap) {
                    best = at;
                    best_gap = gap;
                }
            }
            if (busy[j]->off + busy[j]->size > at)
                at = busy[j]->off + busy[j]->size;
        }
        c[i].off = best != SIZE_MAX ? best : at;
        if (c[i].off + c[i].size > *total)
            *total = c[i].off + c[i].size;
    }
    tfs_free(busy);
    return true;
}

/* What a successful learning run recorded -> a plan (NULL when out of memory). Entries not yet
 * released escaped the run: unplanned, or (PLAN_ESCAPED) planned with a lifetime to the end. */
static mem_plan *plan_from_record(mem_recorder *rec)
{
    bool plan_escaped = tfs__plan_test_flags() & TFS_PLAN_TEST_PLAN_ESCAPED;
    int n = rec->n;
    cand *c = tfs_malloc(((size_t)n + 1) * sizeof *c);
    mem_plan *mp = tfs_calloc(1, sizeof *mp);
    if (!c || !mp)
        goto fail;
    int nc = 0;
    for (int i = 0; i < n; i++) {
        const rec_entry *e = &rec->e[i];
        if (e->size == 0 || e->unplannable)
            continue;
        int t1 = atomic_load_explicit(&e->t1, memory_order_acquire);
        bool escaped = t1 == NOT_RELEASED || t1 == STEP_END;
        if (escaped && !plan_escaped)
            continue;
        if (e->size > SIZE_MAX / 2)
            continue;
        c[nc++] = (cand){i, (e->size + ALIGN - 1) & ~(size_t)(ALIGN - 1), e->t0,
                         escaped ? STEP_END : t1, 0};
    }
    /* Placement is quadratic in the buffers: beyond MAX_PLANNED the smallest stay on the heap. */
    qsort(c, (size_t)nc, sizeof *c, cmp_cand);
    if (nc > MAX_PLANNED)
        nc = MAX_PLANNED;
    size_t total = 0;
    if (!assign_offsets(c, nc, &total))
        goto fail;
    mp->n_bufs = nc;
    mp->arena_bytes = total;
    mp->buf_of = tfs_malloc(((size_t)n + 1) * sizeof *mp->buf_of);
    mp->off = tfs_malloc(((size_t)nc + 1) * sizeof *mp->off);
    mp->size = tfs_malloc(((size_t)nc + 1) * sizeof *mp->size);
    mp->escapes = tfs_calloc((size_t)nc + 1, sizeof *mp->escapes);
    if (!mp->buf_of || !mp->off || !mp->size || !mp->escapes)
        goto fail;
    for (int i = 0; i < n; i++)
        mp->buf_of[i] = -1;
    for (int b = 0; b < nc; b++) {
        mp->buf_of[c[b].idx] = b;
        mp->off[b] = c[b].off;
        mp->size[b] = c[b].size;
        mp->escapes[b] = c[b].t1 == STEP_END;
    }
    if (pthread_mutex_init(&mp->pool_mu, NULL) != 0)
        goto fail;
    atomic_init(&mp->refs, 1);
    atomic_init(&mp->spare, NULL);
    mp->hash = rec->hash;
    mp->key_len = rec->key_len;
    mp->key = rec->key;   /* taken over */
    rec->key = NULL;
    tfs_free(c);
    return mp;
fail:
    tfs_free(c);
    if (mp) {
        tfs_free(mp->buf_of);
        tfs_free(mp->off);
        tfs_free(mp->size);
        tfs_free(mp->escapes);
        tfs_free(mp);
    }
    return NULL;
}

/* Adds mp under its key unless another run added one first; drops the least recently used
 * plans beyond the capacity. Takes mp's reference. */
static void cache_insert(tfs_mem_cache *c, mem_plan *mp)
{
    mem_plan *evicted = NULL;
    pthread_mutex_lock(&c->mu);
    for (mem_plan *q = c->head; q; q = q->next) {
        if (q->hash == mp->hash && keys_equal(q->key, q->key_len, mp->key, mp->key_len)) {
            pthread_mutex_unlock(&c->mu);
            plan_unref(mp);
            return;
        }
    }
    cache_push_front(c, mp);
    if (c->count > c->capacity) {
        evicted = c->tail;
        cache_unlink(c, evicted);
    }
    pthread_mutex_unlock(&c->mu);
    plan_unref(evicted);
}

/* ---- runs ----------------------------------------------------------------------------------- */

void tfs__mem_run_begin(tfs_mem_run *r, tfs_mem_cache *c, const tfs_feed *feeds, int n_feeds)
{
    memset(r, 0, sizeof *r);
    if (!c)
        return;
    int key_len;
    uint64_t hash = feeds_hash(feeds, n_feeds, &key_len);
    mem_plan *mp = NULL;
    pthread_mutex_lock(&c->mu);
    for (mem_plan *q = c->head; q; q = q->next) {
        if (q->hash == hash && key_matches(q->key, q->key_len, feeds, n_feeds)) {
            mp = q;
            atomic_fetch_add_explicit(&mp->refs, 1, memory_order_relaxed);
            if (c->head != mp) {
                cache_unlink(c, mp);
                cache_push_front(c, mp);
            }
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (mp) {
        stat_add(&c->stats->mem_hits);
        if (mp->n_bufs == 0) {
            plan_unref(mp);   /* nothing to place: every output on the heap */
            r->cache = c;
            return;
        }
        r->arena = arena_get(mp, c->stats);   /* takes our reference to mp */
        if (r->arena)
            r->cache = c;   /* else out of memory: an inactive (heap) run */
        return;
    }
    stat_add(&c->stats->mem_misses);
    mem_recorder *rec = rec_new(c->n_outputs, feeds, n_feeds, hash, key_len);
    if (!rec)
        return;
    r->cache = c;
    r->rec = rec;
    r->step = &rec->step;
}

void tfs__mem_run_end(tfs_mem_run *r, bool ok)
{
    if (r->arena) {
        /* A buffer the plan expected to die that is still referenced took a path the learning
         * run did not: retire the plan so the next run with this key learns again. */
        mem_arena *a = r->arena;
        mem_plan *mp = a->mp;
        bool stale = false;
        for (int i = 0; i < a->n_live && !stale; i++) {
            int b = a->live[i];
            stale = !mp->escapes[b] &&
                    atomic_load_explicit(&a->state[b], memory_order_acquire) == BUF_LIVE;
        }
        if (stale) {
            bool drop = false;
            pthread_mutex_lock(&r->cache->mu);
            if (mp->cached) {
                cache_unlink(r->cache, mp);
                drop = true;
            }
            pthread_mutex_unlock(&r->cache->mu);
            if (drop)
                plan_unref(mp);   /* the cache's reference; the arena still holds one */
        }
        arena_unref(a);
    } else if (r->rec) {
        mem_recorder *rec = r->rec;
        atomic_store_explicit(&rec->step, STEP_END, memory_order_relaxed);
        if (ok) {
            mem_plan *mp = plan_from_record(rec);
            if (mp)
                cache_insert(r->cache, mp);
        }
        rec_unref(rec);
    }
    memset(r, 0, sizeof *r);
}

/* ---- kernel outputs ------------------------------------------------------------------------- */

/* Dtypes whose elements are plain bytes (strings, resources and variants are not). */
static bool plannable(enum tfs_dtype dt)
{
    switch (dt) {
    case TFS_DTYPE_FLOAT: case TFS_DTYPE_DOUBLE: case TFS_DTYPE_INT32: case TFS_DTYPE_UINT8:
    case TFS_DTYPE_INT16: case TFS_DTYPE_INT8: case TFS_DTYPE_INT64: case TFS_DTYPE_BOOL:
    case TFS_DTYPE_BFLOAT16: case TFS_DTYPE_UINT16: case TFS_DTYPE_HALF: case TFS_DTYPE_UINT32:
    case TFS_DTYPE_UINT64:
        return true;
    default:
        return false;
    }
}

/* Byte size of a valid shape, or false (tfs_tensor_new then reports what is wrong). */
static bool shape_bytes(enum tfs_dtype dt, int rank, const int64_t *dims, size_t *nbytes)
{
    if (rank < 0 || rank > TFS_MAX_RANK || (rank > 0 && !dims))
        return false;
    int64_t n = tfs_shape_nelem(rank, dims);
    size_t esz = tfs_dtype_size(dt);
    if (n < 0 || esz == 0 || (uint64_t)n > tfs_runtime_max_tensor_bytes() / esz)
        return false;   /* tfs_tensor_new refuses it, before allocating anything */
    *nbytes = (size_t)n * esz;
    return true;
}

static void fill(void *data, size_t n, bool zero)
{
    if (zero)
        memset(data, 0, n);
    else if (tfs__plan_test_flags() & TFS_PLAN_TEST_POISON)
        memset(data, 0xff, n);
}

bool tfs__mem_exclusive(const tfs_tensor *t)
{
    if (tfs_tensor_exclusive(t))
        return true;
    return atomic_load_explicit(&((tfs_tensor *)t)->refs, memory_order_acquire) == 1 &&
           (t->dealloc == arena_release || t->dealloc == rec_release);
}

/* A heap tensor: zeroed when the kernel asked (tfs__kernel_output_zeroed) or its type needs it,
 * else left as the allocator gives it, as a planned region is (poisoned under the test hook):
 * the kernel writes every element, and zeroing a large output (a data-parallel step's 13 MB
 * gradient, fetched, so never planned) cost a pass over its memory per run. */
static enum tfs_code heap_output(enum tfs_dtype dt, int rank, const int64_t *dims, bool zero,
                                 tfs_tensor **out, tfs_status *st)
{
    if (zero || !plannable(dt))
        return tfs_tensor_new(dt, rank, dims, out, st);
    enum tfs_code rc = tfs_tensor_new_uninit(dt, rank, dims, out, st);
    if (rc == TFS_OK && (*out)->nbytes > 0)
        fill((*out)->data, (*out)->nbytes, false);
    return rc;
}

/* The planned region of output idx, or NULL when it has none, the size does not fit, or a live
 * buffer overlaps it (see the reuse rule in runtime-impl.h). */
static tfs_tensor *planned_output(tfs_mem_run *r, int idx, enum tfs_dtype dt, int rank,
                                  const int64_t *dims, size_t nbytes, tfs_status *st)
{
    mem_arena *a = r->arena;
    mem_plan *mp = a->mp;
    int b = mp->buf_of[idx];
    if (b < 0 || nbytes > mp->size[b] ||
        atomic_load_explicit(&a->state[b], memory_order_relaxed) != BUF_FREE)
        return NULL;
    size_t lo = mp->off[b], hi = lo + mp->size[b];
    for (int i = 0; i < a->n_live;) {
        int q = a->live[i];
        if (atomic_load_explicit(&a->state[q], memory_order_acquire) == BUF_DEAD) {
            a->live[i] = a->live[--a->n_live];
            continue;
        }
        if (mp->off[q] < hi && lo < mp->off[q] + mp->size[q])
            return NULL;
        i++;
    }
    tfs_tensor *t = NULL;
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    if (tfs_tensor_wrap(dt, rank, dims, a->base + lo, arena_release, &a->handles[b], &t, st) !=
        TFS_OK) {
        atomic_fetch_sub_explicit(&a->refs, 1, memory_order_relaxed);   /* the run holds one */
        return NULL;
    }
    atomic_store_explicit(&a->state[b], BUF_LIVE, memory_order_relaxed);
    a->live[a->n_live++] = b;
    return t;
}

/* A heap tensor whose deallocator records when it goes (learning runs). */
static enum tfs_code recorded_output(tfs_mem_run *r, int idx, enum tfs_dtype dt, int rank,
                                     const int64_t *dims, size_t nbytes, bool zero,
                                     tfs_tensor **out, tfs_status *st)
{
    mem_recorder *rec = r->rec;
    rec_entry *e = &rec->e[idx];
    if (e->size != 0 || e->unplannable) {
        e->unplannable = true;
        return heap_output(dt, rank, dims, zero, out, st);
    }
    void *data = tfs_malloc(nbytes);
    if (!data)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory allocating %zu bytes", nbytes);
    fill(data, nbytes, zero);
    atomic_fetch_add_explicit(&rec->refs, 1, memory_order_relaxed);
    enum tfs_code rc = tfs_tensor_wrap(dt, rank, dims, data, rec_release, &rec->handles[idx],
                                       out, st);
    if (rc != TFS_OK) {
        atomic_fetch_sub_explicit(&rec->refs, 1, memory_order_relaxed);
        tfs_free(data);
        e->unplannable = true;
        return rc;
    }
    e->size = nbytes;
    e->t0 = atomic_load_explicit(&rec->step, memory_order_relaxed);
    return TFS_OK;
}

static enum tfs_code kernel_output(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                                   const int64_t *dims, bool zero, tfs_tensor **out,
                                   tfs_status *st)
{
    *out = NULL;
    tfs_mem_run *r = k->mem;
    size_t nbytes = 0;
    bool active = r && r->cache;
    if (active && plannable(dt) && j >= 0 && j < k->n_out && k->mem_out0 >= 0 &&
        k->mem_out0 + j < r->cache->n_outputs && shape_bytes(dt, rank, dims, &nbytes) &&
        nbytes > 0) {
        int idx = k->mem_out0 + j;
        if (r->arena) {
            tfs_tensor *t = planned_output(r, idx, dt, rank, dims, nbytes, st);
            if (t) {
                fill(t->data, nbytes, zero);
                stat_add(&r->cache->stats->planned_outputs);
                *out = t;
                tfs_status_clear(st);
                return TFS_OK;
            }
        } else if (r->rec) {
            stat_add(&r->cache->stats->heap_outputs);
            return recorded_output(r, idx, dt, rank, dims, nbytes, zero, out, st);
        }
    }
    if (active)
        stat_add(&r->cache->stats->heap_outputs);
    return heap_output(dt, rank, dims, zero, out, st);
}

enum tfs_code tfs__kernel_output(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                                 const int64_t *dims, tfs_tensor **out, tfs_status *st)
{
    return kernel_output(k, j, dt, rank, dims, false, out, st);
}

enum tfs_code tfs__kernel_output_zeroed(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                                        const int64_t *dims, tfs_tensor **out, tfs_status *st)
{
    return kernel_output(k, j, dt, rank, dims, true, out, st);
}
