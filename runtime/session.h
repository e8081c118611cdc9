/* Sessions run a finalized graph: feed any tensor by name ("node:idx"), fetch tensors, run target
 * ops. A run prunes the graph to what the fetches and targets need (data and control inputs),
 * stopping at fed tensors, and executes the rest in topological order. That plan is made once per
 * combination of feed, fetch and target names and cached; the memory for kernel outputs is
 * planned once per combination of feed shapes (see tfs_session_opts).
 *
 *     tfs_session *s;  tfs_session_new(g, NULL, &s, &st);
 *     tfs_feed feed = {"x:0", x};
 *     const char *fetch = "y:0";
 *     tfs_tensor *y;
 *     if (tfs_session_run(s, &feed, 1, &fetch, 1, NULL, 0, &y, &st) == TFS_OK) { ...; tfs_tensor_unref(y); }
 *
 * A session owns the graph's state: variables (VariableV2 and VarHandleOp resources). Runs may be
 * made from several threads at once; variable reads and writes are atomic per variable.
 *
 * Functions (graph.h's library): tfs_session_new prepares every library function once -- a
 * sub-session over its body sharing this session's variables, and the plan from its argument
 * nodes to its results -- so While/If kernels run bodies without planning per iteration. A
 * preparation error (a result that names no tensor, an op without a kernel) is kept, not
 * returned: it is reported by tfs_session_check / tfs_session_missing_ops / tfs_session_run for
 * runs that need a node calling that function, as is a func attr naming no library function.
 */
#ifndef TFS_RUNTIME_SESSION_H
#define TFS_RUNTIME_SESSION_H

#include "runtime/device.h"
#include "runtime/graph.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

typedef struct tfs_session tfs_session;

/* How RestoreV2 reads checkpoint tensors and InitializeTableFromTextFile(V2) reads vocabulary
 * files: the runtime knows no files, so the owner of the session (savedmodel/) supplies this.
 * `read` returns a new tensor (caller owns) of the given dtype. `read_file` (NULL: the text-file
 * table initializers fail with UNIMPLEMENTED) gives the whole file at `path` as a tfs_malloc'ed
 * buffer of *len bytes (caller frees; may be NULL when *len is 0); its errors name the path. */
typedef struct tfs_checkpoint_reader {
    enum tfs_code (*read)(void *user, const char *prefix, const char *tensor_name,
                          enum tfs_dtype dtype, tfs_tensor **out, tfs_status *st);
    void *user;
    enum tfs_code (*read_file)(void *user, const char *path, char **data, size_t *len,
                               tfs_status *st);
} tfs_checkpoint_reader;

/* Default of tfs_session_opts.max_loop_iterations. */
#define TFS_SESSION_MAX_LOOP_ITERATIONS 10000000
/* Defaults of tfs_session_opts.plan_cache_size and .memory_plans. */
#define TFS_SESSION_PLAN_CACHE_SIZE 64
#define TFS_SESSION_MEMORY_PLANS 16

/* A zero-filled tfs_session_opts means the defaults, as does tfs_session_opts_default(). */
typedef struct tfs_session_opts {
    tfs_checkpoint_reader checkpoint;   /* {NULL, NULL}: RestoreV2 fails with UNIMPLEMENTED */
    /* Iterations one While node may make in one run before it fails with RESOURCE_EXHAUSTED
     * naming the node (a guard against loops that never end); <= 0 means the default. */
    int64_t max_loop_iterations;
    /* Run plans (what a run with given feed, fetch and target names executes, in order) kept
     * for later runs with the same names; the least recently used go first. <= 0: default. */
    int plan_cache_size;
    /* Memory plans (one per set of feed dtypes and shapes) kept per run plan, least recently
     * used first out. <= 0: default. */
    int memory_plans;
    /* true: no buffer reuse; every kernel output is a zero-filled heap tensor of its own. The
     * default (false) places outputs by a memory plan learned from the first run with each set
     * of feed shapes: same results, fewer allocations. */
    bool disable_buffer_reuse;
    /* Where the session runs its kernels (device.h). TFS_DEVICE_CPU (the default): the CPU only.
     * AUTO: GPU gpu_id when present, else the CPU. GPU: GPU gpu_id, or tfs_session_new fails
     * with FAILED_PRECONDITION saying why. SERVING: as tfs_runtime_set_device chose. A top
     * session with a GPU logs its choice once; function bodies (While/If) run on the CPU. */
    enum tfs_device device;
    int             gpu_id;
} tfs_session_opts;

tfs_session_opts tfs_session_opts_default(void);

typedef struct tfs_feed {
    const char *name;     /* "node:idx" or "node" */
    tfs_tensor *tensor;   /* borrowed */
} tfs_feed;

/* Keeps a reference to g (which must be finalized). opts may be NULL (defaults). */
enum tfs_code tfs_session_new(tfs_graph *g, const tfs_session_opts *opts, tfs_session **out,
                              tfs_status *st);
void tfs_session_free(tfs_session *s);   /* NULL-safe; no run may be in progress */
const tfs_graph *tfs_session_graph(const tfs_session *s);
/* Bytes held by the current values of the session's variables (for memory accounting). */
size_t tfs_session_variable_bytes(const tfs_session *s);

/* Checks, without running, that a run with these feed names, fetches and targets could execute:
 * NOT_FOUND for a name that is not in the graph or an output index out of range; UNIMPLEMENTED
 * naming every op type without a kernel among the nodes the run would execute
 * ("ops not supported by tfserve: ParseExample, SaveV2"). */
enum tfs_code tfs_session_check(tfs_session *s, const char *const *feeds, int nfeeds,
                                const char *const *fetches, int nfetches,
                                const char *const *targets, int ntargets, tfs_status *st);

/* Like tfs_session_check, but op types without a kernel are not an error: *missing receives
 * them (sorted, each once) as a tfs_malloc'ed array of *n_missing names borrowed from the graph,
 * NULL when there are none; the caller frees the array with tfs_free. Other errors as above. */
enum tfs_code tfs_session_missing_ops(tfs_session *s, const char *const *feeds, int nfeeds,
                                     const char *const *fetches, int nfetches,
                                     const char *const *targets, int ntargets,
                                     const char ***missing, int *n_missing, tfs_status *st);

/* The calling thread's run deadline, on CLOCK_MONOTONIC in nanoseconds (0: none), for the runs it
 * starts from now on. A run checks it before each kernel, so also before each function call and
 * loop iteration inside it; once it has passed, the run stops with DEADLINE_EXCEEDED and frees its
 * values at once. Returns the previous deadline, for the caller to put back. */
int64_t tfs_session_set_thread_deadline(int64_t deadline_ns);

/* Whether runs the calling thread starts may execute ops that read files their inputs name
 * (RestoreV2, InitializeTableFromTextFile(V2)): true by default (loading a model runs them), false
 * for the runs a server makes for requests, where a client could choose the path. A refused op
 * fails the run with PERMISSION_DENIED naming the node. Returns the previous setting. */
bool tfs_session_set_thread_file_ops(bool allowed);

/* A hook for the runs the calling thread starts from now on (NULL: none): on a CPU plan,
 * fn(i, t, arg) is called on the running thread as soon as fetch i's value is computed, before
 * the rest of the run goes on, once per fetch (t borrowed for the call; not for reference-typed
 * fetches), and fn(-1, NULL, arg) after every step of the run. A trainer uses it to start
 * sending gradients while the backward pass still runs, and the per-step call to move the
 * transfers in flight along (MPI advances a transfer only inside its own calls).
 * GPU plans do not call it. The runs of function bodies inside a run do not see it. */
typedef void (*tfs_fetch_hook_fn)(int fetch, const tfs_tensor *t, void *arg);
void tfs_session_set_thread_fetch_hook(tfs_fetch_hook_fn fn, void *arg);

/* Runs. outputs[i] receives a new reference to fetch i (caller owns) on success; all NULL on
 * failure. Fetching a reference-typed tensor (a VariableV2 output) yields the variable's value.
 * Errors from kernels carry the node name: "node 'mul': Incompatible shapes: [3] vs. [2]". */
enum tfs_code tfs_session_run(tfs_session *s, const tfs_feed *feeds, int nfeeds,
                              const char *const *fetches, int nfetches,
                              const char *const *targets, int ntargets, tfs_tensor **outputs,
                              tfs_status *st);

/* ---- random ops' generators ------------------------------------------------------------------
 * Every stateful random op node (RandomUniform, RandomStandardNormal, TruncatedNormal,
 * RandomUniformInt) of the graph and of its library functions has a Philox4x32-10 generator in
 * the session, as TensorFlow keeps one per kernel: seeded at first use from the node's attrs
 * (key = seed, counter = seed2 << 64; both 0: random seeds from the OS) and moved ahead by every
 * run, so successive runs give new numbers. A trainer saves the positions with a checkpoint and
 * restores them into a new session over the same graph, so a resumed run draws the same numbers
 * as an uninterrupted one:
 *
 *     for (int i = 0; i < tfs_session_rng_state_count(s); i++)          // save
 *         tfs_session_rng_state_get(s, i, &function, &node, &state[i], &st);
 *     int i = tfs_session_rng_state_find(s2, function, node);           // restore
 *     if (i >= 0) tfs_session_rng_state_set(s2, i, &state[i], &st);
 *
 * Generators are numbered in a fixed order (the graph's nodes, then each library function's body
 * in library order); get and set are atomic per generator with respect to concurrent runs. */
typedef struct tfs_rng_state {
    uint64_t key;          /* Philox key: word 0 | word 1 << 32 */
    uint64_t counter_lo;   /* 128-bit block counter: words 0 | 1 << 32 ... */
    uint64_t counter_hi;   /* ... and words 2 | 3 << 32 */
} tfs_rng_state;

/* Number of random generators (call on the session tfs_session_new made). */
int tfs_session_rng_state_count(const tfs_session *s);
/* Generator i's position (a generator not used yet is seeded first, so the position returned is
 * the one its first run will start from). *function receives the library function whose body
 * holds the node, or NULL for the graph's own nodes, *node the node's name (both borrowed from
 * the graph; either pointer may be NULL). OUT_OF_RANGE when i is not in [0, count). */
enum tfs_code tfs_session_rng_state_get(tfs_session *s, int i, const char **function,
                                        const char **node, tfs_rng_state *state, tfs_status *st);
/* Index of the generator of `node` (in library function `function`, or the graph itself when
 * NULL), or -1. */
int tfs_session_rng_state_find(const tfs_session *s, const char *function, const char *node);
/* Sets generator i's position; the node's next run starts there. OUT_OF_RANGE as above. */
enum tfs_code tfs_session_rng_state_set(tfs_session *s, int i, const tfs_rng_state *state,
                                        tfs_status *st);

#endif
