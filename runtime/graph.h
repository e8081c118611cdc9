/* Graphs: named nodes of TensorFlow op types, with data inputs ("src", "src:1"), control inputs
 * ("^src") and typed attributes, exactly as a GraphDef describes them.
 *
 *     tfs_graph *g; tfs_graph_new(&g, &st);
 *     int x = tfs_graph_add_node(g, "x", "Placeholder");
 *     tfs_graph_set_attr_type(g, x, "dtype", TFS_DTYPE_FLOAT);
 *     int y = tfs_graph_add_node(g, "y", "Mul");
 *     tfs_graph_add_input(g, y, "x");  tfs_graph_add_input(g, y, "x:0");
 *     tfs_graph_set_attr_type(g, y, "T", TFS_DTYPE_FLOAT);
 *     if (tfs_graph_finalize(g, &st) != TFS_OK) ...   // reports the first builder error
 *
 * Builder errors are sticky: after the first failure (duplicate name, out of memory) the other
 * builder calls do nothing and tfs_graph_finalize reports that first error. A finalized graph is
 * immutable and may be shared between threads; the last tfs_graph_unref frees it.
 * Attribute setters copy what they are given (tensors: keeps a reference).
 *
 * Function library. Functional control flow (While, StatelessWhile, If, StatelessIf, Case,
 * StatelessCase) names its bodies in func attrs ("cond", "body", "then_branch", "else_branch") or
 * a list(func) attr (Case's "branches"); those bodies cannot be inlined, so a graph carries a
 * library of functions, each a finalized graph of its own with named argument nodes and result
 * tensors (tfs_graph_add_function). As in a GraphDef's
 * FunctionDefLibrary the library is flat: a func attr anywhere -- in the graph or inside a function
 * body -- names a function of the top-level graph's library, and bodies have no library of their
 * own. Sessions prepare every function once (session.h) and control-flow kernels run them.
 */
#ifndef TFS_RUNTIME_GRAPH_H
#define TFS_RUNTIME_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/status.h"
#include "runtime/tensor.h"

typedef struct tfs_graph tfs_graph;

enum tfs_attr_kind {
    TFS_ATTR_NONE = 0,
    TFS_ATTR_S,        /* bytes */
    TFS_ATTR_I,
    TFS_ATTR_F,
    TFS_ATTR_B,
    TFS_ATTR_TYPE,
    TFS_ATTR_SHAPE,
    TFS_ATTR_TENSOR,
    TFS_ATTR_FUNC,     /* function name (its attrs are dropped) */
    TFS_ATTR_LIST
};

typedef struct tfs_attr_list {
    enum tfs_attr_kind kind;   /* element kind; TFS_ATTR_NONE for an empty list */
    int                n;
    union {
        tfs_string      *s;
        int64_t         *i;
        float           *f;
        bool            *b;
        enum tfs_dtype  *type;
        tfs_shape       *shape;
        tfs_tensor     **tensor;
        char           **func;
    };
} tfs_attr_list;

typedef struct tfs_attr_value {
    enum tfs_attr_kind kind;
    union {
        tfs_string     s;
        int64_t        i;
        float          f;
        bool           b;
        enum tfs_dtype type;
        tfs_shape      shape;
        tfs_tensor    *tensor;
        char          *func;
        tfs_attr_list  list;
    };
} tfs_attr_value;

/* Frees what v owns (strings, tensors, lists) and zeroes it; NULL is fine. */
void tfs_attr_value_clear(tfs_attr_value *v);

enum tfs_code tfs_graph_new(tfs_graph **out, tfs_status *st);
tfs_graph    *tfs_graph_ref(tfs_graph *g);
void          tfs_graph_unref(tfs_graph *g);

/* ---- building (before finalize) ------------------------------------------------------------ */

/* Adds a node; returns its id (>= 0), or -1 after a sticky error (duplicate or empty name). */
int  tfs_graph_add_node(tfs_graph *g, const char *name, const char *op_type);
/* Appends an input in GraphDef text form: "src" (= "src:0"), "src:2", or "^src" (control). */
void tfs_graph_add_input(tfs_graph *g, int node, const char *input);
/* Sets (or replaces) an attribute; deep-copies v. */
void tfs_graph_set_attr(tfs_graph *g, int node, const char *name, const tfs_attr_value *v);
void tfs_graph_set_attr_type(tfs_graph *g, int node, const char *name, enum tfs_dtype dt);
void tfs_graph_set_attr_int(tfs_graph *g, int node, const char *name, int64_t i);
void tfs_graph_set_attr_float(tfs_graph *g, int node, const char *name, float f);
void tfs_graph_set_attr_bool(tfs_graph *g, int node, const char *name, bool b);
void tfs_graph_set_attr_string(tfs_graph *g, int node, const char *name, const char *s);
void tfs_graph_set_attr_shape(tfs_graph *g, int node, const char *name, const tfs_shape *shape);
void tfs_graph_set_attr_tensor(tfs_graph *g, int node, const char *name, tfs_tensor *t);
/* Records a builder error (e.g. from an importer); the first one sticks. */
void tfs_graph_set_error(tfs_graph *g, enum tfs_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The graph's sticky builder error: OK (st cleared) while building has not failed. */
enum tfs_code tfs_graph_status(const tfs_graph *g, tfs_status *st);
/* Resolves every input to a node (NOT_FOUND "node 'y': input 'z' not found"), checks output
 * indices against the op's output count where the op is known, then freezes the graph. */
enum tfs_code tfs_graph_finalize(tfs_graph *g, tfs_status *st);

/* Adds function `name` to g's library (before finalize; sticky errors like the other builder calls:
 * empty or duplicate name, a body that is not finalized, is g itself or has a library of its own).
 * `inputs` (n_inputs node names, normally Placeholders) receive the call's arguments in order;
 * `outputs` (n_outputs tensor names, "node:idx" or "node") are its results in order. g keeps a
 * reference to body and copies the names. Names are checked when a session prepares the function. */
void tfs_graph_add_function(tfs_graph *g, const char *name, tfs_graph *body, int n_inputs,
                            const char *const *inputs, int n_outputs, const char *const *outputs);
/* True when g's library has a function of that name. */
bool tfs_graph_has_function(const tfs_graph *g, const char *name);
int  tfs_graph_function_count(const tfs_graph *g);

/* ---- reading ------------------------------------------------------------------------------- */

int         tfs_graph_node_count(const tfs_graph *g);
int         tfs_graph_find_node(const tfs_graph *g, const char *name);   /* -1 when absent */
const char *tfs_graph_node_name(const tfs_graph *g, int node);
const char *tfs_graph_node_op(const tfs_graph *g, int node);
int         tfs_graph_node_input_count(const tfs_graph *g, int node);
const char *tfs_graph_node_input(const tfs_graph *g, int node, int i); /* text as added */
int         tfs_graph_node_attr_count(const tfs_graph *g, int node);
const char *tfs_graph_node_attr_name(const tfs_graph *g, int node, int i);
const tfs_attr_value *tfs_graph_node_attr_at(const tfs_graph *g, int node, int i);
/* NULL when the node has no attribute of that name. Borrowed: lives as long as the graph. */
const tfs_attr_value *tfs_graph_node_attr(const tfs_graph *g, int node, const char *name);

/* Parses "node:3" / "node" / "^node" into its parts; returns false for "" or a bad index.
 * name_out receives at most n bytes (terminated). */
bool tfs_tensor_name_parse(const char *text, char *name_out, size_t n, int *index, bool *control);

/* True when the runtime has a CPU kernel for this TensorFlow op type. */
bool tfs_op_is_supported(const char *op_type);

#endif
