/* Shortcuts shared by the runtime test suites for building small graphs and running them. They
 * ck_assert on anything that is not what the test is about (an allocation, a builder call). */
#ifndef TFS_TESTS_RUNTIME_HELPERS_H
#define TFS_TESTS_RUNTIME_HELPERS_H

#include "runtime/runtime-impl.h"
#include "tests/support/tfs-test.h"

/* A tensor of the given dtype and shape with its elements copied from `values` (NULL: zeros). */
tfs_tensor *rt_tensor(enum tfs_dtype dt, int rank, const int64_t *dims, const void *values);
tfs_tensor *rt_scalar_f32(float v);
/* A rank-1 string tensor from C strings. */
tfs_tensor *rt_strings(int n, const char *const *values);

/* Adds Const `name` holding t (takes ownership of t). Returns the node id. */
int rt_const(tfs_graph *g, const char *name, tfs_tensor *t);
/* Adds Placeholder `name` with attr dtype. */
int rt_placeholder(tfs_graph *g, const char *name, enum tfs_dtype dt);
/* Adds node `name` of type `op` with inputs a and b (NULL to omit) and attr T when T != INVALID. */
int rt_node(tfs_graph *g, const char *name, const char *op, const char *a, const char *b,
            enum tfs_dtype T);

/* Finalizes g (asserting OK), opens a session with `opts` (NULL: defaults) and drops the
 * caller's reference to g, which the session keeps. */
tfs_session *rt_session(tfs_graph *g, const tfs_session_opts *opts);
/* One fetch, no targets. */
enum tfs_code rt_run1(tfs_session *s, const tfs_feed *feeds, int nfeeds, const char *fetch,
                      tfs_tensor **out, tfs_status *st);
/* tfs_session_run, then -- unless op type `op` is stateful -- the same run again, which uses the
 * memory plan the first run learned (buffer reuse on; with tfs__plan_test_flags' POISON and
 * PLAN_ESCAPED, as main.c sets them, every migrated kernel then writes into a poisoned arena
 * region). Asserts that both runs give bit-identical outputs; outputs[] receives the second's.
 * This is how every kernel suite checks "same results with and without buffer reuse". */
enum tfs_code rt_run_twice(tfs_session *s, const char *op, const tfs_feed *feeds, int nfeeds,
                           const char *const *fetches, int nfetches, tfs_tensor **outputs,
                           tfs_status *st);
/* Asserts that a and b have the same dtype, shape and element bytes (strings by content). */
void rt_assert_same(const tfs_tensor *a, const tfs_tensor *b, const char *what);
/* Builds a graph of Placeholders "a" (and "b" when b is not NULL) feeding one node "op" of type
 * `op` (attr T = a's dtype unless T_attr is false), runs it (rt_run_twice) and frees everything
 * but the result. `extra` may add attrs to node id `op_id` before finalize. */
typedef void (*rt_attr_fn)(tfs_graph *g, int op_id, void *arg);
enum tfs_code rt_run_op(const char *op, tfs_tensor *a, tfs_tensor *b, bool T_attr,
                        rt_attr_fn extra, void *arg, tfs_tensor **out, tfs_status *st);

/* Asserts that st holds `code` and that its message contains `needle`. */
#define rt_assert_err(st, want_code, needle)                                                       \
    do {                                                                                           \
        ck_assert_msg((st).code == (want_code), "code %s (%s), want %s",                          \
                      tfs_code_name((st).code), (st).msg, tfs_code_name(want_code));               \
        ck_assert_msg(strstr((st).msg, (needle)) != NULL, "message '%s' lacks '%s'", (st).msg,     \
                      (needle));                                                                   \
    } while (0)

#endif
