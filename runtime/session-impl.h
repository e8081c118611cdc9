/* Internal to runtime/session.c and runtime/session-gpu.c: a session's tables, run plans and
 * per-run state (see session.c's DESIGN). */
#ifndef TFS_RUNTIME_SESSION_IMPL_H
#define TFS_RUNTIME_SESSION_IMPL_H

#include "runtime/backend-impl.h"
#include "runtime/memplan-impl.h"
#include "runtime/plan-cache-impl.h"
#include "runtime/rng-impl.h"
#include "runtime/runtime-impl.h"
#include "runtime/variable-impl.h"

typedef struct consumer {
    int node;    /* consuming node */
    int input;   /* its data input index, or -1 for a control dependency */
} consumer;

/* A library function prepared by the top session (see DESIGN). */
enum { FN_UNPREPARED = 0, FN_PREPARING, FN_READY };
typedef struct run_plan run_plan;

typedef struct prepared_fn {
    int          state;
    tfs_session *sess;       /* child session over the body; NULL when creating it failed */
    run_plan    *plan;       /* NULL when planning failed */
    tfs_status   err;        /* why sess or plan is missing */
    const char **missing;    /* op types without a kernel in the body (borrowed from the graphs) */
    int          n_missing;
} prepared_fn;

#define MAX_FUNCTION_NESTING 64
#define STATE_POOL_MAX 8     /* idle per-run states kept per plan */
#define STACK_FEEDS 16       /* feed names a run keys its plan with without allocating */

struct tfs_session {
    tfs_graph            *graph;
    tfs_checkpoint_reader ckpt;
    tfs_session          *top;          /* the session tfs_session_new made (itself for that one) */
    int64_t               max_iters;    /* While iteration limit */
    prepared_fn          *fns;          /* top session only: [graph->n_funcs] */
    int                   prep_depth;   /* top session only: nesting of function preparation */
    /* Immutable after tfs_session_new. */
    int       n_slots;
    int      *slot_base;    /* [n_nodes] first value slot of each node */
    int      *slot_count;   /* [n_nodes] value slots (outputs) of each node */
    int      *slot_owner;   /* [n_slots] the node each slot belongs to */
    int      *cons_start;   /* [n_nodes + 1] offsets into cons */
    consumer *cons;         /* every edge, grouped by producer */
    int       max_in;       /* largest data input count of any node */
    int       max_out;      /* largest slot count of any node */
    tfs_var_map *vars;      /* thread-safe on its own; owned by the top session */
    tfs_rng_table *rng;     /* this graph's random-op generators (each session its own) */
    bool            reuse;       /* memory plans on (from the top session's opts) */
    int             mem_plans;   /* memory plans kept per run plan */
    tfs_mem_stats  *stats;       /* the top session's counters */
    tfs_mem_stats   own_stats;   /* top session only */
    tfs_plan_cache *plans;       /* top session only: run plans by names */
    tfs_backend    *gpu;         /* top session only: the device it runs on; NULL: the CPU */
};

/* Per-run state of plan_execute, pooled per plan (one allocation each). */
typedef struct run_state {
    tfs_tensor **vals;        /* [n_slots] current value of each slot (owned), or NULL */
    int         *remaining;   /* [n_slots] uses not yet made */
    tfs_tensor **in;          /* [max_in] kernel inputs (borrowed or from derefs) */
    tfs_tensor **derefs;      /* [max_in] variable values read for ref inputs (owned) */
    tfs_tensor **out;         /* [max_out] kernel outputs */
    tfs_tensor **alt;         /* [n_slots] a slot's value copied to the other side (host or
                               * device) of a placed plan, or NULL (session-gpu.c) */
    char        *dead;        /* [n_nodes] nodes a run of a plan with Switch left dead */
    struct run_state *next;   /* pool link */
} run_state;

/* The plan of one run: what plan_build computes from names alone. */
struct run_plan {
    int       n_feeds;
    int      *feed_slot;    /* [n_feeds] */
    int       n_fetches;
    int      *fetch_slot;   /* [n_fetches] */
    int       n_order;
    int      *order;        /* nodes to execute, producers first */
    int      *feed_of;      /* [n_slots] feed index filling the slot, or -1 */
    int      *uses;         /* [n_slots] consumers in the plan + fetches reading the slot */
    /* Set by plan_prepare for plans that run (not for tfs_session_check's). */
    bool      prepared;
    bool      dead_flow;    /* runs a Switch: dead values may flow (run_node) */
    int      *feed_dtype;   /* [n_feeds] the dtype a fed Placeholder demands, or -1 */
    int      *out_base;     /* [n_order] the run's number of each step's output 0 (memplan) */
    tfs_mem_cache  *mem;    /* memory plans; NULL when buffer reuse is off */
    _Atomic(run_state *) spare;   /* one idle per-run state, taken and given without the lock */
    pthread_mutex_t pool_mu;
    run_state *pool;        /* more idle per-run states */
    int        n_pool;
    /* Placement (session-gpu.c), NULL when every node runs on the CPU. */
    struct tfs_gpu_plan *gpu;
};

static inline int edge_slot(const tfs_session *s, tfs_edge e)
{
    return s->slot_base[e.node] + e.index;
}

/* The tfs_variable behind a reference-typed tensor (VariableV2 output). */
static inline tfs_variable *ref_variable(const tfs_tensor *t)
{
    return t->nelem == 1 ? *(tfs_variable *const *)t->data : NULL;
}

static inline bool is_ref_dtype(enum tfs_dtype dt)
{
    return dt > TFS_DTYPE_REF_OFFSET;
}
/* One use of the slot made: after the last, its value (and a placed plan's copy of it on the
 * other side) goes. */
static inline void slot_release(run_state *r, int slot)
{
    if (--r->remaining[slot] == 0) {
        tfs_tensor_unref(r->vals[slot]);
        r->vals[slot] = NULL;
        if (r->alt[slot]) {
            tfs_tensor_unref(r->alt[slot]);
            r->alt[slot] = NULL;
        }
    }
}

/* ---- shared by session.c and session-gpu.c --------------------------------------------------- */

/* session-gpu.c: the device of a new top session (NULL: the CPU), logging the choice. */
enum tfs_code tfs__session_device(const tfs_graph *g, const tfs_session_opts *opts,
                                  tfs_backend **out, tfs_status *st);
/* Places a prepared plan's nodes (p->gpu stays NULL when none goes to the device). */
enum tfs_code tfs__plan_place(const tfs_session *s, run_plan *p, tfs_status *st);
void tfs__plan_place_free(run_plan *p);
/* DEADLINE_EXCEEDED naming `node` once the thread's run deadline (tfs_session_set_thread_deadline)
 * has passed; OK otherwise, and at once when there is none. The step loop calls it per kernel. */
enum tfs_code tfs__run_check_deadline(const tfs_graph *g, int node, tfs_status *st);

/* ---- the device side of a run (session-gpu.c) ------------------------------------------------ */

/* session.c's plan_execute is the one step loop for every plan, on the CPU or placed on a device:
 * order, dead values, deadlines, variable reads, storing outputs, releasing values, fetches and
 * error messages. Where a placed plan's step depends on the side it runs on, the loop calls these
 * hooks; a run of a plan without placement (p->gpu NULL) calls none of them. */
typedef struct run_device {
    tfs_backend               *b;
    void                      *exec;   /* the backend's executor, held for the whole run */
    const struct tfs_gpu_plan *gp;     /* the plan's placement */
} run_device;

/* Takes an executor of the session's backend for a run of placed plan p (waits while all are
 * busy). */
enum tfs_code tfs__run_device_begin(const tfs_session *s, const run_plan *p, run_device *d,
                                    tfs_status *st);
/* Ends the run once its values are released (device memory returns to the pool here) and gives
 * the executor back; an asynchronous device error fails a run that had not failed (run_rc). */
enum tfs_code tfs__run_device_end(run_device *d, enum tfs_code run_rc, tfs_status *st);
/* Input i of the step as the step's side needs it: *t, the value of `slot` (or, from_var, a
 * variable's value held in r->derefs[i]), becomes its copy on that side when it lives on the
 * other (r->alt[slot], shared by the side's consumers; a variable's upload replaces derefs[i]). */
enum tfs_code tfs__run_device_input(const tfs_session *s, const run_plan *p, const run_device *d,
                                    run_state *r, int step, int i, int slot, bool from_var,
                                    tfs_tensor **t, tfs_status *st);
/* Runs the step's kernel where the step is placed: the op's CPU kernel, or the backend's with k
 * set up for the device (its executor; no memory plan, no taking inputs). */
enum tfs_code tfs__run_device_kernel(const run_device *d, int step, tfs_kernel_ctx *k,
                                     tfs_status *st);
/* Fetched `slot`'s value on the host: *t, or its copy there (r->alt[slot]). */
enum tfs_code tfs__run_device_fetch(const tfs_session *s, const run_plan *p, const run_device *d,
                                    run_state *r, int slot, tfs_tensor **t, tfs_status *st);

#endif
