/* Shortcuts shared by the gradient-kernel suites (test_nn_grad_*.c): a one-op graph with any
 * number of inputs and outputs kept open for repeated runs, float/double tensors read and written
 * as double, comparison with a float64 reference, and central finite differences of a forward
 * op run through a session. */
#ifndef TFS_TESTS_RUNTIME_GRAD_HELPERS_H
#define TFS_TESTS_RUNTIME_GRAD_HELPERS_H

#include "tests/runtime/nn-helpers.h"

#define GH_MAX_IO 8

/* A session over one node "op" of type `op` fed by Placeholders i0, i1, ... */
typedef struct gh_op {
    tfs_session *s;
    int          n_in, n_out;
} gh_op;

/* Opens o: placeholders with the dtypes of ins[0..n_in), attr T when T is not INVALID, then the
 * attrs in at (may be NULL); fetches outputs 0..n_out-1. */
void gh_open(gh_op *o, const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
             const nn_attrs *at, int n_out);
enum tfs_code gh_run(gh_op *o, tfs_tensor *const *ins, tfs_tensor **outs, tfs_status *st);
void gh_close(gh_op *o);
/* Open, run once, close. */
enum tfs_code gh_run_op(const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
                        const nn_attrs *at, int n_out, tfs_tensor **outs, tfs_status *st);
/* Runs and asserts OK (what names the case). */
void gh_run_ok(const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
               const nn_attrs *at, int n_out, tfs_tensor **outs, const char *what);

/* Tensors of float or double read and written as double. */
tfs_tensor *gh_random(enum tfs_dtype dt, int rank, const int64_t *dims, uint32_t seed);
double gh_get(const tfs_tensor *t, int64_t i);
void gh_set(tfs_tensor *t, int64_t i, double v);
/* A 1-D int32 tensor. */
tfs_tensor *gh_i32(int n, const int32_t *v);
/* A copy of t converted to dtype dt (float <-> double). */
tfs_tensor *gh_convert(const tfs_tensor *t, enum tfs_dtype dt);
/* A tensor of dtype dt filled from double values (NULL: zeros). */
tfs_tensor *gh_from(enum tfs_dtype dt, int rank, const int64_t *dims, const double *v);

/* Asserts t has dtype dt and the shape, and |t[i] - want[i]| <= rel * mag[i] + abs_tol (mag NULL:
 * |want[i]|). */
void gh_assert_close(const tfs_tensor *t, enum tfs_dtype dt, int rank, const int64_t *dims,
                     const double *want, const double *mag, double rel, double abs_tol,
                     const char *what);
/* Asserts that the run of op failed with code and a message containing needle. */
void gh_assert_fails(const char *op, int n_in, tfs_tensor *const *ins, enum tfs_dtype T,
                     const nn_attrs *at, int n_out, enum tfs_code code, const char *needle);

/* The gradient of L = sum_i w[i] * out[i] (out: output out_idx of o run on ins, float or double)
 * with respect to every element of ins[wrt], by central differences with step h (the step
 * actually taken after rounding x +- h to the tensor's dtype divides). ins[wrt] is perturbed in
 * place and restored. Returns tfs_malloc'ed doubles, one per element of ins[wrt]. */
double *gh_fd(gh_op *o, tfs_tensor **ins, int wrt, int out_idx, const tfs_tensor *w, double h);
/* L itself (sum_i w[i] * out[i]) for one run. */
double gh_weighted_sum(gh_op *o, tfs_tensor *const *ins, int out_idx, const tfs_tensor *w);

#endif
