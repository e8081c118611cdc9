/* The session's cache of run plans keyed by feed, fetch and target names (runtime/plan-cache.c).
 * Internal to runtime/. Thread-safe; bounded (least recently used entries go first). Values are
 * opaque to the cache: it frees them with the function it was given once no entry refers to them
 * and no caller holds them.
 */
#ifndef TFS_RUNTIME_PLAN_CACHE_IMPL_H
#define TFS_RUNTIME_PLAN_CACHE_IMPL_H

#include "runtime/runtime-impl.h"

typedef struct tfs_plan_cache tfs_plan_cache;
typedef struct tfs_plan_entry tfs_plan_entry;
typedef void (*tfs_plan_free_fn)(void *value);

/* The names of one run, in the order the caller gave them (the order is part of the key: it
 * decides which feed fills which slot and which output receives which fetch). */
typedef struct tfs_plan_names {
    const char *const *list[3];   /* feeds, fetches, targets; a NULL name counts as "" */
    int                n[3];
} tfs_plan_names;

enum tfs_code tfs__plan_cache_new(int capacity, tfs_plan_free_fn free_value,
                                  tfs_plan_cache **out, tfs_status *st);
/* NULL-safe; entries still held by callers are freed when they release them. */
void tfs__plan_cache_free(tfs_plan_cache *c);
/* A held entry for these names, or NULL when none is cached. */
tfs_plan_entry *tfs__plan_cache_find(tfs_plan_cache *c, const tfs_plan_names *names);
/* Caches `value` under the names and returns it held, taking ownership; when another caller
 * cached the same names first, frees `value` and returns theirs. NULL when out of memory (the
 * caller keeps `value`). */
tfs_plan_entry *tfs__plan_cache_insert(tfs_plan_cache *c, const tfs_plan_names *names,
                                       void *value);
void *tfs__plan_entry_value(const tfs_plan_entry *e);
/* Ends a hold from find or insert. NULL-safe. */
void tfs__plan_entry_release(tfs_plan_entry *e);
/* Entries cached now. */
int tfs__plan_cache_count(tfs_plan_cache *c);

#endif
