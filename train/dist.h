/* train/ dist: the few collectives data-parallel training needs (Horovod's model: every rank
 * holds the whole model, trains on its slice of each global batch, and the gradients are
 * averaged before each optimizer step), over MPI. Part of train/train.h. This is the only file
 * pair that knows MPI: the rest of the trainer calls these functions, and a build without MPI
 * compiles the same calls against a one-rank stub (rank 0 of 1, collectives that return at once).
 *
 *     if (tfs_dist_init(&st) != TFS_OK) ...                // mpirun -np 2 tfserve-train ...
 *     tfs_dist_set_timeout(60);
 *     float g[1000];                                        // this rank's gradients, pre-scaled
 *     tfs_dist_request *r;
 *     tfs_dist_allreduce_start(g, 1000, "gradients", &r, &st);   // sums over the ranks
 *     tfs_dist_wait(r, &st);
 *     tfs_dist_finalize(true);
 *
 * Every collective is started non-blocking and then polled: one that makes no progress for the
 * timeout (a rank died or hangs) fails with DEADLINE_EXCEEDED naming the collective, so the
 * survivors exit instead of waiting for ever. MPI errors are returned (MPI_ERRORS_RETURN on the
 * communicator), not fatal, and become UNAVAILABLE naming the collective.
 * Thread affinity: the thread that called tfs_dist_init (MPI_THREAD_FUNNELED).
 */
#ifndef TFS_TRAIN_DIST_H
#define TFS_TRAIN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

/* True when this build has MPI. */
bool tfs_dist_available(void);

/* Joins the job mpirun (or another PMI launcher) started when the environment says it has more
 * than one rank (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_SIZE above 1); otherwise the run is one
 * rank and MPI is not touched. A second call does nothing. Without MPI in the build, an
 * environment of more than one rank is FAILED_PRECONDITION: multi-process runs need a build
 * with MPI. */
enum tfs_code tfs_dist_init(tfs_status *st);
/* Leaves the job: MPI_Finalize when ok (every rank gets here), else MPI_Abort, which ends the
 * other ranks too (one of them may be waiting in a collective this rank will never join). */
void tfs_dist_finalize(bool ok);

int tfs_dist_rank(void); /* 0 without a job */
int tfs_dist_size(void); /* 1 without a job */

/* The watchdog: seconds a collective may go without completing (default 60; <= 0: no limit). */
void tfs_dist_set_timeout(double secs);

/* Rank 0's n bytes into buf on every rank. `what` names the collective in messages. */
enum tfs_code tfs_dist_broadcast(void *buf, size_t n, const char *what, tfs_status *st);

/* Sums n doubles element-wise over the ranks, in place (metrics). */
enum tfs_code tfs_dist_sum_f64(double *buf, int n, const char *what, tfs_status *st);

/* FAILED_PRECONDITION on every rank when `value` is not the same on all of them ("<what>
 * differs between the ranks"); through one allreduce of (min, max). */
enum tfs_code tfs_dist_check_same(uint64_t value, const char *what, tfs_status *st);

/* An allreduce in flight. */
typedef struct tfs_dist_request tfs_dist_request;

/* Starts summing n floats of buf over the ranks, in place (MPI_Iallreduce): buf must stay valid
 * and untouched until tfs_dist_wait. Callers pre-scale what they send for a weighted average.
 * Caller owns *out (tfs_dist_wait frees it). */
enum tfs_code tfs_dist_allreduce_start(float *buf, int64_t n, const char *what,
                                       tfs_dist_request **out, tfs_status *st);
/* Lets MPI move r along (MPI has no progress thread of its own by default: a request advances
 * inside MPI calls); *done tells whether it has completed. Call it now and then while computing;
 * tfs_dist_wait is still needed. NULL-safe (done). */
enum tfs_code tfs_dist_test(tfs_dist_request *r, bool *done, tfs_status *st);
/* Waits for r (under the watchdog) and frees it; NULL-safe. */
enum tfs_code tfs_dist_wait(tfs_dist_request *r, tfs_status *st);

/* Counters of the float allreduces since tfs_dist_init: calls, payload bytes, and seconds spent
 * waiting for them to finish in tfs_dist_wait. */
typedef struct tfs_dist_stats {
    int64_t allreduces;
    int64_t bytes;
    double  wait_secs;
} tfs_dist_stats;

tfs_dist_stats tfs_dist_stats_get(void);

#endif
