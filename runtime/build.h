/* Building graphs in C: the API the trainer, the benchmarks and users' own programs use to make
 * TensorFlow graphs without protobuf. It sits on graph.h (nodes, string inputs, attrs) and adds
 * typed handles on node outputs, TensorFlow's naming (name scopes, unique names "MatMul",
 * "MatMul_1", ...), and the type attrs TensorFlow's op definitions require ("T", "Tidx",
 * "SrcT"/"DstT", "N", ...), filled in from the inputs' dtypes, so a built graph is one TensorFlow
 * itself accepts.
 *
 *     tfs_graph *g;  tfs_graph_new(&g, &st);
 *     tfs_out x = tfs_build_placeholder(g, "x", TFS_DTYPE_FLOAT, &(tfs_shape){2, {-1, 784}});
 *     tfs_build_scope_push(g, "dense");
 *     tfs_out w = tfs_build_variable(g, "kernel", TFS_DTYPE_FLOAT, &(tfs_shape){2, {784, 10}});
 *     tfs_out y = tfs_build_matmul(g, x, w, false, false);          // node "dense/MatMul"
 *     tfs_build_scope_pop(g);
 *     tfs_out p = tfs_build_unary(g, "Softmax", y);
 *     if (tfs_graph_finalize(g, &st) != TFS_OK) ...                  // the first builder error
 *     // run with tfs_session_run, fetching tfs_build_tensor_name(g, p, buf, sizeof buf)
 *
 * Errors are the graph's sticky builder errors (graph.h): after the first failure every builder
 * call returns TFS_OUT_NONE and does nothing, and tfs_graph_finalize reports that first error. A
 * TFS_OUT_NONE passed as an input is such a failure too (an error is recorded if none was).
 * Thread affinity: like graph.h, one thread builds a graph.
 */
#ifndef TFS_RUNTIME_BUILD_H
#define TFS_RUNTIME_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/graph.h"
#include "runtime/tensor.h"

/* An output of a node in a graph being built: node id (tfs_graph_add_node) and output index. */
typedef struct tfs_out {
    int node;    /* -1: no output (after an error, or "no gradient") */
    int index;
} tfs_out;

#define TFS_OUT_NONE ((tfs_out){-1, 0})

static inline bool tfs_out_ok(tfs_out o)
{
    return o.node >= 0;
}

/* Output `index` of the node that produced o. */
static inline tfs_out tfs_out_at(tfs_out o, int index)
{
    return (tfs_out){o.node, index};
}

/* ---- names ---------------------------------------------------------------------------------- */

/* Name scopes (tf.name_scope): nodes added while scopes are pushed are named "outer/inner/name".
 * An empty or NULL name pushes nothing visible but must still be popped. */
void tfs_build_scope_push(tfs_graph *g, const char *name);
void tfs_build_scope_pop(tfs_graph *g);
/* The current scope prefix ("outer/inner", "" at the top). Borrowed, valid until the next push
 * or pop. */
const char *tfs_build_scope(const tfs_graph *g);
/* "node:index" of o into buf (n bytes); returns buf ("" for TFS_OUT_NONE). */
char *tfs_build_tensor_name(const tfs_graph *g, tfs_out o, char *buf, size_t n);

/* ---- generic nodes -------------------------------------------------------------------------- */

/* Adds a node of TensorFlow op type `op` with data inputs in[0..n_in-1], named "<scope>/<name>"
 * (name NULL: the op type), made unique as TensorFlow does ("name_1", "name_2", ...). For op
 * types the builder knows it sets the type attrs from the inputs' dtypes (and "N" for list
 * inputs); other attrs are set by the caller with tfs_graph_set_attr_* on the returned node.
 * Returns output 0 of the new node. */
tfs_out tfs_build_op(tfs_graph *g, const char *op, const char *name, int n_in, const tfs_out *in);
/* Makes `dep` run before node's node (a "^dep" control input). */
void tfs_build_control(tfs_graph *g, tfs_out node, tfs_out dep);
/* The dtype of an output as far as the builder can tell from the node's op and attrs
 * (reference dtypes for VariableV2 outputs); TFS_DTYPE_INVALID when it cannot. */
enum tfs_dtype tfs_build_dtype(const tfs_graph *g, tfs_out o);

/* ---- common ops ----------------------------------------------------------------------------- */

/* Placeholder of dtype dt; shape NULL = unknown. */
tfs_out tfs_build_placeholder(tfs_graph *g, const char *name, enum tfs_dtype dt,
                              const tfs_shape *shape);
/* Const holding `value` (the graph keeps a reference). name NULL = "Const". */
tfs_out tfs_build_const(tfs_graph *g, const char *name, tfs_tensor *value);
/* A scalar Const of dtype dt (float, double, int32, int64, bool) holding v. */
tfs_out tfs_build_scalar(tfs_graph *g, enum tfs_dtype dt, double v);
/* A 1-D int32 Const (shapes, axes, permutations). */
tfs_out tfs_build_ints(tfs_graph *g, int n, const int64_t *v);
/* VariableV2 named "<scope>/<name>" (exactly: a variable's name is its checkpoint key, so it is
 * not made unique; a duplicate is an error). Output 0 is reference-typed. */
tfs_out tfs_build_variable(tfs_graph *g, const char *name, enum tfs_dtype dt,
                           const tfs_shape *shape);
/* Assign(ref, value) with validate_shape true; output 0 is the variable after the assignment. */
tfs_out tfs_build_assign(tfs_graph *g, tfs_out ref, tfs_out value);
tfs_out tfs_build_identity(tfs_graph *g, tfs_out x);
/* An elementwise or single-input op whose only type attr is T: Relu, Neg, Exp, Softmax, ... */
tfs_out tfs_build_unary(tfs_graph *g, const char *op, tfs_out x);
/* A two-input op whose inputs share T: Add, AddV2, Sub, Mul, RealDiv, Maximum, BiasAdd, ... */
tfs_out tfs_build_binary(tfs_graph *g, const char *op, tfs_out a, tfs_out b);
tfs_out tfs_build_matmul(tfs_graph *g, tfs_out a, tfs_out b, bool transpose_a, bool transpose_b);
/* Sum, Mean, Max, Min, Prod over `axes` (an int32 tensor) with keep_dims. */
tfs_out tfs_build_reduce(tfs_graph *g, const char *op, tfs_out x, tfs_out axes, bool keep_dims);
/* The same over every axis of a tensor of the given rank (Const axes 0..rank-1). */
tfs_out tfs_build_reduce_all(tfs_graph *g, const char *op, tfs_out x, int rank);
tfs_out tfs_build_reshape(tfs_graph *g, tfs_out x, tfs_out shape);
tfs_out tfs_build_cast(tfs_graph *g, tfs_out x, enum tfs_dtype dt);
/* Shape(x) with out_type int32. */
tfs_out tfs_build_shape(tfs_graph *g, tfs_out x);
/* AddN over n >= 1 tensors of one dtype (n == 1 returns in[0] itself, adding nothing). */
tfs_out tfs_build_add_n(tfs_graph *g, int n, const tfs_out *in);
/* NoOp depending on every dep (a training step's target). */
tfs_out tfs_build_group(tfs_graph *g, const char *name, int n, const tfs_out *deps);

/* ---- gradients ------------------------------------------------------------------------------ */

/* Adds the nodes computing the gradients of sum_i(sum(ys[i] * dys[i])) with respect to xs, as
 * tf.gradients(ys, xs, grad_ys) does: dys NULL means ones (the gradient of sum(ys)). Gradients
 * do not flow through StopGradient or PreventGradient, nor through integer or boolean tensors.
 * grads[j] receives the gradient of xs[j] (same shape and dtype), or TFS_OUT_NONE when ys does
 * not depend on xs[j] (as TensorFlow's None). A reference-typed x (a VariableV2 output) gets the
 * gradient of its value. Nodes are added under the scope "gradients" (made unique).
 * Errors: UNIMPLEMENTED naming the op when a node on a path from xs to ys has no gradient
 * function; INVALID_ARGUMENT for an unknown dtype on such a path. The graph must not be
 * finalized; the graph's sticky error is returned as well. */
enum tfs_code tfs_build_gradients(tfs_graph *g, int n_y, const tfs_out *ys, const tfs_out *dys,
                                  int n_x, const tfs_out *xs, tfs_out *grads, tfs_status *st);
/* True when the runtime has a gradient function for this TensorFlow op type. */
bool tfs_op_has_gradient(const char *op_type);

#endif
