/* Memory planning of runs (runtime/memplan.c), as session.c drives it. Internal to runtime/.
 *
 * A run plan (session.c) numbers the outputs of the nodes it executes 0..n_outputs-1 (output j
 * of the node at step k is out_base[k] + j) and owns one tfs_mem_cache: the memory plans learned
 * for each set of feed shapes. plan_execute brackets a run with tfs__mem_run_begin/_end and sets
 * *step before each node; kernels reach the run through tfs_kernel_ctx.mem and
 * tfs__kernel_output (runtime-impl.h). See memplan.c's DESIGN for how plans are learned and why
 * a planned region is never handed out while a tensor over an overlapping region lives.
 */
#ifndef TFS_RUNTIME_MEMPLAN_IMPL_H
#define TFS_RUNTIME_MEMPLAN_IMPL_H

#include "runtime/runtime-impl.h"

/* Counters shared by a top session and its function bodies (tfs_plan_stats reads them). */
typedef struct tfs_mem_stats {
    atomic_llong plan_hits, plan_misses;
    atomic_llong mem_hits, mem_misses;
    atomic_llong planned_outputs, heap_outputs, arenas_created;
    atomic_llong taken_inputs;
} tfs_mem_stats;

/* True when the caller's reference to t is the only one and t owns its buffer: a heap tensor
 * (tfs_tensor_exclusive, or tfs__kernel_output's), one over a planned region or one made by a
 * learning run; not a view or a wrapper. Writing t->data in place is then seen by no one else. */
bool tfs__mem_exclusive(const tfs_tensor *t);

typedef struct tfs_mem_cache tfs_mem_cache;

/* A cache of memory plans for a run plan with n_outputs numbered outputs, keeping at most
 * `capacity` feed-shape keys (least recently used dropped first). stats must outlive every run
 * (not the tensors a run returns). */
enum tfs_code tfs__mem_cache_new(int n_outputs, int capacity, tfs_mem_stats *stats,
                                 tfs_mem_cache **out, tfs_status *st);
/* NULL-safe. Tensors still over planned regions keep their arena (and its plan) alive. */
void tfs__mem_cache_free(tfs_mem_cache *c);

struct mem_arena;
struct mem_recorder;

/* One run's memory state; lives on plan_execute's stack. */
struct tfs_mem_run {
    tfs_mem_cache        *cache;   /* NULL: inactive (kernel outputs come from the heap) */
    struct mem_arena     *arena;   /* planned mode: this run's arena (it holds the plan) */
    struct mem_recorder  *rec;     /* learning mode: records sizes and lifetimes */
    atomic_int           *step;    /* learning mode: the step being executed; else NULL */
};

/* Starts a run with these feeds (their dtypes and shapes are the key): planned when the cache
 * has a plan for the key, learning otherwise. c == NULL, or running out of memory, leaves r
 * inactive: every output then comes from the heap, which is always correct. */
void tfs__mem_run_begin(tfs_mem_run *r, tfs_mem_cache *c, const tfs_feed *feeds, int n_feeds);
/* Ends the run after the session has dropped its own references to the run's values. A learning
 * run that succeeded turns what it recorded into a plan for its key. */
void tfs__mem_run_end(tfs_mem_run *r, bool ok);

#endif
