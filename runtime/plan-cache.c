/* The session's run-plan cache (see plan-cache-impl.h): a hash table of entries keyed by the
 * feed, fetch and target names of a run, with a least-recently-used list bounding its size.
 *
 * An entry is reference-counted: the table holds one reference while the entry is cached and
 * each caller one while it runs the plan, so evicting an entry (or freeing the cache) while
 * another thread still executes its plan is safe; the value is freed with the last reference.
 * Lookups hash the caller's name strings in place and allocate nothing; only inserting copies
 * the names (one block per entry).
 */
#include "runtime/plan-cache-impl.h"

#include <string.h>

struct tfs_plan_entry {
    atomic_int             refs;
    uint64_t               hash;
    int                    n[3];
    char                  *names;      /* every name NUL-terminated, lists in order */
    void                  *value;
    tfs_plan_free_fn       free_value;
    struct tfs_plan_entry *chain;      /* bucket chain */
    struct tfs_plan_entry *prev, *next;   /* LRU list, most recent first */
};

struct tfs_plan_cache {
    pthread_mutex_t   mu;
    int               capacity;
    int               count;
    size_t            n_buckets;   /* a power of two */
    tfs_plan_entry  **buckets;
    tfs_plan_entry   *head, *tail;
    tfs_plan_free_fn  free_value;
};

static const char *name_at(const tfs_plan_names *k, int l, int i)
{
    const char *s = k->list[l] ? k->list[l][i] : NULL;
    return s ? s : "";
}

static uint64_t names_hash(const tfs_plan_names *k)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int l = 0; l < 3; l++) {
        h = (h ^ (uint64_t)(k->n[l] + 1)) * 0x100000001b3ULL;
        for (int i = 0; i < k->n[l]; i++) {
            for (const unsigned char *p = (const unsigned char *)name_at(k, l, i); *p; p++)
                h = (h ^ *p) * 0x100000001b3ULL;
            h = (h ^ 0xffu) * 0x100000001b3ULL;   /* separator: "ab","c" != "a","bc" */
        }
    }
    return h ^ (h >> 31);
}

static bool entry_matches(const tfs_plan_entry *e, uint64_t hash, const tfs_plan_names *k)
{
    if (e->hash != hash)
        return false;
    for (int l = 0; l < 3; l++)
        if (e->n[l] != k->n[l])
            return false;
    const char *p = e->names;
    for (int l = 0; l < 3; l++) {
        for (int i = 0; i < k->n[l]; i++) {
            const char *s = name_at(k, l, i);
            size_t len = strlen(s);
            if (memcmp(p, s, len + 1) != 0)
                return false;
            p += len + 1;
        }
    }
    return true;
}

static void entry_unref(tfs_plan_entry *e)
{
    if (!e || atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (e->value)
        e->free_value(e->value);
    tfs_free(e->names);
    tfs_free(e);
}

enum tfs_code tfs__plan_cache_new(int capacity, tfs_plan_free_fn free_value,
                                  tfs_plan_cache **out, tfs_status *st)
{
    *out = NULL;
    if (capacity < 1)
        capacity = 1;
    tfs_plan_cache *c = tfs_calloc(1, sizeof *c);
    if (!c)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a plan cache");
    c->n_buckets = 16;
    while (c->n_buckets < (size_t)capacity * 2 && c->n_buckets < ((size_t)1 << 24))
        c->n_buckets <<= 1;
    c->buckets = tfs_calloc(c->n_buckets, sizeof *c->buckets);
    if (!c->buckets || pthread_mutex_init(&c->mu, NULL) != 0) {
        tfs_free(c->buckets);
        tfs_free(c);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a plan cache");
    }
    c->capacity = capacity;
    c->free_value = free_value;
    *out = c;
    return TFS_OK;
}

/* Removes e from the table and the list (under mu); the caller drops the table's reference. */
static void unlink_entry(tfs_plan_cache *c, tfs_plan_entry *e)
{
    tfs_plan_entry **pp = &c->buckets[e->hash & (c->n_buckets - 1)];
    while (*pp != e)
        pp = &(*pp)->chain;
    *pp = e->chain;
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = e->chain = NULL;
    c->count--;
}

static void push_front(tfs_plan_cache *c, tfs_plan_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    else
        c->tail = e;
    c->head = e;
}

void tfs__plan_cache_free(tfs_plan_cache *c)
{
    if (!c)
        return;
    while (c->head) {
        tfs_plan_entry *e = c->head;
        unlink_entry(c, e);
        entry_unref(e);
    }
    pthread_mutex_destroy(&c->mu);
    tfs_free(c->buckets);
    tfs_free(c);
}

/* The cached entry for (hash, k), moved to the front of the list; NULL when absent. Under mu. */
static tfs_plan_entry *lookup(tfs_plan_cache *c, uint64_t hash, const tfs_plan_names *k)
{
    for (tfs_plan_entry *e = c->buckets[hash & (c->n_buckets - 1)]; e; e = e->chain) {
        if (!entry_matches(e, hash, k))
            continue;
        if (c->head != e) {
            if (e->prev)
                e->prev->next = e->next;
            if (e->next)
                e->next->prev = e->prev;
            else
                c->tail = e->prev;
            push_front(c, e);
        }
        return e;
    }
    return NULL;
}

tfs_plan_entry *tfs__plan_cache_find(tfs_plan_cache *c, const tfs_plan_names *names)
{
    uint64_t hash = names_hash(names);
    pthread_mutex_lock(&c->mu);
    tfs_plan_entry *e = lookup(c, hash, names);
    if (e)
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->mu);
    return e;
}

tfs_plan_entry *tfs__plan_cache_insert(tfs_plan_cache *c, const tfs_plan_names *names,
                                       void *value)
{
    uint64_t hash = names_hash(names);
    size_t len = 0;
    for (int l = 0; l < 3; l++)
        for (int i = 0; i < names->n[l]; i++)
            len += strlen(name_at(names, l, i)) + 1;
    tfs_plan_entry *e = tfs_calloc(1, sizeof *e);
    char *blob = tfs_malloc(len + 1);
    if (!e || !blob) {
        tfs_free(e);
        tfs_free(blob);
        return NULL;
    }
    char *p = blob;
    for (int l = 0; l < 3; l++) {
        e->n[l] = names->n[l];
        for (int i = 0; i < names->n[l]; i++) {
            const char *s = name_at(names, l, i);
            size_t n = strlen(s) + 1;
            memcpy(p, s, n);
            p += n;
        }
    }
    e->hash = hash;
    e->names = blob;
    e->value = value;
    e->free_value = c->free_value;
    atomic_init(&e->refs, 2);   /* the table's and the caller's */

    tfs_plan_entry *evicted = NULL;
    pthread_mutex_lock(&c->mu);
    tfs_plan_entry *old = lookup(c, hash, names);
    if (old) {   /* another thread planned the same run first: use theirs */
        atomic_fetch_add_explicit(&old->refs, 1, memory_order_relaxed);
        pthread_mutex_unlock(&c->mu);
        c->free_value(value);   /* the caller gave it to us */
        tfs_free(blob);
        tfs_free(e);
        return old;
    }
    size_t b = hash & (c->n_buckets - 1);
    e->chain = c->buckets[b];
    c->buckets[b] = e;
    push_front(c, e);
    c->count++;
    if (c->count > c->capacity) {
        evicted = c->tail;
        unlink_entry(c, evicted);
    }
    pthread_mutex_unlock(&c->mu);
    entry_unref(evicted);
    return e;
}

void *tfs__plan_entry_value(const tfs_plan_entry *e)
{
    return e->value;
}

void tfs__plan_entry_release(tfs_plan_entry *e)
{
    entry_unref(e);
}

int tfs__plan_cache_count(tfs_plan_cache *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->count;
    pthread_mutex_unlock(&c->mu);
    return n;
}
