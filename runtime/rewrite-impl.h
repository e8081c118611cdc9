/* Internals of the graph rewrites (rewrite.h) shared by runtime/rewrite*.c: a small mutable copy of
 * the graph being rewritten (the "rewrite graph") and the passes over it. Include only from
 * runtime/ (and tests).
 *
 * A finalized tfs_graph is immutable, so the passes work on this copy: one node per node of the
 * source graph (alive when the served runs need it) plus the nodes the passes add, with resolved
 * edges, attrs copied lazily from the source node (`src`) and overridden by the node's own list.
 * tfs__rw_emit turns the alive nodes back into a finalized tfs_graph.
 */
#ifndef TFS_RUNTIME_REWRITE_IMPL_H
#define TFS_RUNTIME_REWRITE_IMPL_H

#include "runtime/rewrite.h"
#include "runtime/runtime-impl.h"

#define TFS_RW_MAX_ATTRS 8

/* An attr set by a pass. Its contents are borrowed (literals, or tensors the node holds). */
typedef struct tfs_rw_attr {
    const char    *name;
    tfs_attr_value v;
} tfs_rw_attr;

/* Why a node's name must survive (a run feeds, fetches or targets it). */
enum {
    TFS_RW_FED = 1u << 0,          /* an output is fed: the node stays exactly as it is */
    TFS_RW_FETCHED = 1u << 1,      /* output 0 is fetched */
    TFS_RW_FETCHED_MORE = 1u << 2, /* another output is fetched */
    TFS_RW_TARGET = 1u << 3,
};
#define TFS_RW_PROTECTED (TFS_RW_FED | TFS_RW_FETCHED | TFS_RW_FETCHED_MORE | TFS_RW_TARGET)

typedef struct tfs_rw_node {
    const char              *name;        /* borrowed from the source graph, or owned_name */
    char                    *owned_name;
    const char              *op;          /* borrowed from the source graph, or a literal */
    const struct tfs_op_def *def;         /* NULL: no kernel for op */
    int                      src;         /* source node whose attrs it has, -1: none */
    int                      n_in, cap_in;
    tfs_edge                *in;          /* data inputs: rewrite-graph node ids */
    int                      n_ctrl, cap_ctrl;
    int                     *ctrl;        /* control inputs */
    int                      n_attrs;
    tfs_rw_attr              attrs[TFS_RW_MAX_ATTRS];   /* over the source node's */
    tfs_tensor              *value;       /* a Const a pass made: its value (owned reference) */
    bool                     value_shared; /* value is a variable's or a Const's own tensor */
    int                      n_out;       /* outputs (the source node's count; 1 for new nodes) */
    unsigned                 flags;       /* TFS_RW_FED ... */
    bool                     alive;
    bool                     frozen;      /* a VariableV2/VarHandleOp of a frozen variable */
} tfs_rw_node;

/* One use of a node: consumer `node`, its data input `input`, or -1 for a control input. */
typedef struct tfs_rw_use {
    int node;
    int input;
} tfs_rw_use;

typedef struct tfs_rw_graph {
    tfs_graph              *g;         /* the source graph */
    tfs_session            *values;    /* evaluates constants: the caller's, or a temporary one */
    const tfs_rewrite_opts *opts;
    tfs_rewrite_stats      *stats;
    int                     n, cap;
    tfs_rw_node            *nodes;
    int                    *use_start; /* [n + 1] by tfs__rw_uses: uses of node i are */
    tfs_rw_use             *uses;      /* uses[use_start[i] .. use_start[i + 1]) */
} tfs_rw_graph;

/* ---- the rewrite graph (rewrite-graph.c) ----------------------------------------------------- */

/* Copies g's nodes (all dead; the caller marks the kept ones alive). */
enum tfs_code tfs__rw_init(tfs_rw_graph *rw, tfs_graph *g, tfs_status *st);
void tfs__rw_free(tfs_rw_graph *rw);
/* Appends a node named base + suffix, made unique in g and the rewrite graph; alive, no inputs,
 * no attrs, one output. Returns its id, or -1 when out of memory. */
int tfs__rw_add(tfs_rw_graph *rw, const char *base, const char *suffix, const char *op);
bool tfs__rw_add_input(tfs_rw_graph *rw, int node, tfs_edge e);
/* Adds a control input unless the node already has it (as data or control input). */
bool tfs__rw_add_ctrl(tfs_rw_graph *rw, int node, int src);
/* Sets (or replaces) attr `name` on the node. False when the node has no room (a bug). */
bool tfs__rw_set_attr(tfs_rw_node *n, const char *name, const tfs_attr_value *v);
/* The node's attr `name` (its own, else its source node's), NULL when absent. */
const tfs_attr_value *tfs__rw_attr(const tfs_rw_graph *rw, int node, const char *name);
/* Attr helpers with TensorFlow's defaults for absent attrs; false when present but mistyped. */
bool tfs__rw_attr_bool(const tfs_rw_graph *rw, int node, const char *name, bool dflt, bool *out);
bool tfs__rw_attr_float(const tfs_rw_graph *rw, int node, const char *name, float dflt, float *out);
const char *tfs__rw_attr_str(const tfs_rw_graph *rw, int node, const char *name, const char *dflt);
enum tfs_dtype tfs__rw_attr_type(const tfs_rw_graph *rw, int node, const char *name);
/* Turns the node into a Const holding t (keeps a reference): no inputs, attrs dtype and value. */
void tfs__rw_make_const(tfs_rw_graph *rw, int node, tfs_tensor *t);
/* The value of a Const node (the source's attr or the one a pass set), NULL for other nodes. */
tfs_tensor *tfs__rw_const_value(const tfs_rw_graph *rw, int node);
/* Rebuilds the use lists of the alive nodes (after passes changed edges). */
enum tfs_code tfs__rw_uses(tfs_rw_graph *rw, tfs_status *st);
/* Number of uses of output `index` of node (data), and of the node by control edges. */
int tfs__rw_data_uses(const tfs_rw_graph *rw, int node, int index);
int tfs__rw_ctrl_uses(const tfs_rw_graph *rw, int node);
/* Marks dead every node no protected node needs (through inputs and control inputs). */
enum tfs_code tfs__rw_prune(tfs_rw_graph *rw, tfs_status *st);
int tfs__rw_alive_count(const tfs_rw_graph *rw);
/* The alive nodes as a new finalized graph with g's function library. */
enum tfs_code tfs__rw_emit(tfs_rw_graph *rw, tfs_graph **out, tfs_status *st);

/* ---- passes (rewrite-fold.c, rewrite-fuse.c); each updates rw->stats ------------------------- */

enum tfs_code tfs__rw_fold_constants(tfs_rw_graph *rw, tfs_status *st);
enum tfs_code tfs__rw_remove_identities(tfs_rw_graph *rw, tfs_status *st);
enum tfs_code tfs__rw_fold_batch_norms(tfs_rw_graph *rw, tfs_status *st);
enum tfs_code tfs__rw_fuse(tfs_rw_graph *rw, tfs_status *st);
enum tfs_code tfs__rw_fuse_add(tfs_rw_graph *rw, tfs_status *st);

/* Identity-like ops: one input passed through unchanged (what identity removal removes). */
bool tfs__rw_is_identity_op(const char *op);

#endif
