/* Data-parallel collectives (dist.h) over MPI, or the one-rank stub in a build without it.
 *
 * DESIGN. One communicator, a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so an MPI
 * error is a status and not an abort inside the library. Every collective is the non-blocking
 * form followed by a polling wait: the poll is where the watchdog lives (MPI has no timeout of
 * its own), and polling (MPI_Test) is also what drives Open MPI's progress for the requests in
 * flight. The poll yields first and then sleeps a little, since ranks often share cores.
 */
#include "train/dist.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TFS_USE_MPI
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#endif

static double         timeout_secs = 60;
static tfs_dist_stats stats;

/* More than one rank in the environment a launcher (Open MPI's mpirun, a PMI launcher) set. */
static bool launched_multi(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1)
            return true;
    }
    return false;
}

void tfs_dist_set_timeout(double secs)
{
    timeout_secs = secs;
}

tfs_dist_stats tfs_dist_stats_get(void)
{
    return stats;
}

#ifdef TFS_USE_MPI

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static MPI_Comm comm = MPI_COMM_NULL;
static int      rank, size = 1;

struct tfs_dist_request {
    MPI_Request req;
    char        what[96];
};

bool tfs_dist_available(void)
{
    return true;
}

enum tfs_code tfs_dist_init(tfs_status *st)
{
    if (comm != MPI_COMM_NULL || !launched_multi()) {
        tfs_status_clear(st);
        return TFS_OK;
    }
    /* Open MPI's non-blocking allreduce takes a binomial tree for every in-place buffer (a
     * reduce to rank 0, then a broadcast back, through a temporary of the whole size): rank 0
     * does every addition and the whole buffer crosses twice. Rabenseifner's reduce-scatter +
     * allgather splits both evenly in log2(ranks) rounds; on 2 ranks it took half the time for
     * the CNN's 13 MB of gradients (bench/README.md). An algorithm the user chose (the
     * environment, or mpirun --mca) stands. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS)
        return TFS_ERR(st, TFS_UNAVAILABLE, "MPI_Init failed (error %d)", rc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm)) != MPI_SUCCESS)
        return TFS_ERR(st, TFS_UNAVAILABLE, "MPI_Comm_dup failed (error %d)", rc);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    memset(&stats, 0, sizeof stats);
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_dist_finalize(bool ok)
{
    if (comm == MPI_COMM_NULL)
        return;
    if (!ok)
        MPI_Abort(comm, 1);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    comm = MPI_COMM_NULL;
    rank = 0;
    size = 1;
}

int tfs_dist_rank(void)
{
    return rank;
}

int tfs_dist_size(void)
{
    return size;
}

static enum tfs_code mpi_error(int rc, const char *what, tfs_status *st)
{
    char msg[MPI_MAX_ERROR_STRING];
    int  len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return TFS_ERR(st, TFS_UNAVAILABLE, "MPI collective '%s' failed: %s", what, msg);
}

/* Polls req until it completes, an error, or the watchdog. */
static enum tfs_code wait_req(MPI_Request *req, const char *what, tfs_status *st)
{
    double start = now();
    for (int polls = 0;; polls++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, what, st);
        if (done)
            return TFS_OK;
        if (polls < 200) {
            sched_yield();
            continue;
        }
        if (timeout_secs > 0 && now() - start > timeout_secs)
            return TFS_ERR(st, TFS_DEADLINE_EXCEEDED,
                           "MPI collective '%s' made no progress in %g s: another rank has died "
                           "or stopped",
                           what, timeout_secs);
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

enum tfs_code tfs_dist_broadcast(void *buf, size_t n, const char *what, tfs_status *st)
{
    if (size == 1 || n == 0)
        return TFS_OK;
    if (n > INT_MAX)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "broadcast '%s': %zu bytes is too many", what, n);
    MPI_Request req;
    int         rc = MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, what, st);
    return wait_req(&req, what, st);
}

enum tfs_code tfs_dist_sum_f64(double *buf, int n, const char *what, tfs_status *st)
{
    if (size == 1 || n == 0)
        return TFS_OK;
    MPI_Request req;
    int         rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, what, st);
    return wait_req(&req, what, st);
}

enum tfs_code tfs_dist_check_same(uint64_t value, const char *what, tfs_status *st)
{
    if (size == 1)
        return TFS_OK;
    /* min(v) and min(-v), i.e. -max(v), in one allreduce. */
    uint64_t    v[2] = {value, ~value};
    MPI_Request req;
    int         rc = MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MIN, comm, &req);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, what, st);
    enum tfs_code c = wait_req(&req, what, st);
    if (c != TFS_OK)
        return c;
    if (v[0] != ~v[1])
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "%s differs between the ranks: every rank must run the same config file "
                       "and flags",
                       what);
    return TFS_OK;
}

enum tfs_code tfs_dist_allreduce_start(float *buf, int64_t n, const char *what,
                                       tfs_dist_request **out, tfs_status *st)
{
    *out = NULL;
    if (size == 1 || n == 0)
        return TFS_OK;
    if (n > INT_MAX)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "allreduce '%s': %lld floats is too many", what,
                       (long long)n);
    tfs_dist_request *r = tfs_calloc(1, sizeof *r);
    if (!r)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory starting '%s'", what);
    snprintf(r->what, sizeof r->what, "%s", what);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm, &r->req);
    if (rc != MPI_SUCCESS) {
        tfs_free(r);
        return mpi_error(rc, what, st);
    }
    stats.allreduces++;
    stats.bytes += n * (int64_t)sizeof(float);
    *out = r;
    return TFS_OK;
}

enum tfs_code tfs_dist_test(tfs_dist_request *r, bool *done, tfs_status *st)
{
    *done = true;
    if (!r)
        return TFS_OK;
    int flag = 0, rc = MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_error(rc, r->what, st);
    *done = flag != 0;
    return TFS_OK;
}

enum tfs_code tfs_dist_wait(tfs_dist_request *r, tfs_status *st)
{
    if (!r)
        return TFS_OK;
    double        t = now();
    enum tfs_code rc = wait_req(&r->req, r->what, st);
    stats.wait_secs += now() - t;
    /* A request that failed is left to MPI_Abort: freeing it could block on a dead peer. */
    tfs_free(r);
    return rc;
}

#else /* one rank, no MPI */

struct tfs_dist_request {
    int unused;
};

bool tfs_dist_available(void)
{
    return false;
}

enum tfs_code tfs_dist_init(tfs_status *st)
{
    if (launched_multi())
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "this build has no MPI (configured with TFS_MPI=OFF or without Open MPI): "
                       "multi-process runs (mpirun -np N) need a build with MPI");
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs_dist_finalize(bool ok)
{
    (void)ok;
}

int tfs_dist_rank(void)
{
    return 0;
}

int tfs_dist_size(void)
{
    return 1;
}

enum tfs_code tfs_dist_broadcast(void *buf, size_t n, const char *what, tfs_status *st)
{
    (void)buf, (void)n, (void)what, (void)st;
    return TFS_OK;
}

enum tfs_code tfs_dist_sum_f64(double *buf, int n, const char *what, tfs_status *st)
{
    (void)buf, (void)n, (void)what, (void)st;
    return TFS_OK;
}

enum tfs_code tfs_dist_check_same(uint64_t value, const char *what, tfs_status *st)
{
    (void)value, (void)what, (void)st;
    return TFS_OK;
}

enum tfs_code tfs_dist_allreduce_start(float *buf, int64_t n, const char *what,
                                       tfs_dist_request **out, tfs_status *st)
{
    (void)buf, (void)n, (void)what, (void)st;
    *out = NULL;
    return TFS_OK;
}

enum tfs_code tfs_dist_test(tfs_dist_request *r, bool *done, tfs_status *st)
{
    (void)r, (void)st;
    *done = true;
    return TFS_OK;
}

enum tfs_code tfs_dist_wait(tfs_dist_request *r, tfs_status *st)
{
    (void)r, (void)st;
    return TFS_OK;
}

#endif
