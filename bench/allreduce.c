/* allreduce-bench: the gradient allreduce of a data-parallel step alone, through the trainer's
 * own collectives (train/dist.h: MPI_Iallreduce in place, polled under the watchdog), so that
 * Open MPI's algorithm choice can be compared on one machine without the training around it.
 * Every rank sums FLOATS floats (default 3,274,634: the Fashion-MNIST CNN's gradients, 13.1 MB)
 * ROUNDS times after a barrier-like warm-up; rank 0 prints the median and the best time of one
 * allreduce and checks the sum. Not a test; run by hand under mpirun:
 *     mpirun -np 2 build/bench/allreduce-bench [FLOATS] [ROUNDS]
 *     mpirun -np 2 --mca coll_libnbc_iallreduce_algorithm 0 build/bench/allreduce-bench
 * (0: Open MPI's own choice, which the trainer overrides; see bench/README.md.)
 */
#include <stdio.h>
#include <stdlib.h>

#include "train/dist.h"

#define MAX_ROUNDS 200

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const tfs_status *st)
{
    fprintf(stderr, "allreduce-bench: %s: %s\n", what, st->msg);
    tfs_dist_finalize(false);
    exit(1);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 3274634;
    int  rounds = argc > 2 ? atoi(argv[2]) : 40;
    if (n < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: allreduce-bench [FLOATS >= 1] [ROUNDS 1..%d]\n", MAX_ROUNDS);
        return 2;
    }
    tfs_status st;
    if (tfs_dist_init(&st) != TFS_OK)
        die("joining the job", &st);
    int    ranks = tfs_dist_size(), rank = tfs_dist_rank();
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "allreduce-bench: out of memory\n");
        tfs_dist_finalize(false);
        return 1;
    }
    double secs[MAX_ROUNDS];
    bool   wrong = false;
    for (int r = -3; r < rounds; r++) { /* 3 warm-up rounds */
        for (long i = 0; i < n; i++)
            buf[i] = (float)(rank + 1);
        double ping = 0; /* lines the ranks up before the timed call */
        if (tfs_dist_sum_f64(&ping, 1, "line-up", &st) != TFS_OK)
            die("lining up", &st);
        tfs_dist_stats     before = tfs_dist_stats_get();
        tfs_dist_request *req;
        if (tfs_dist_allreduce_start(buf, n, "gradients", &req, &st) != TFS_OK ||
            tfs_dist_wait(req, &st) != TFS_OK)
            die("the allreduce", &st);
        if (r >= 0)
            secs[r] = tfs_dist_stats_get().wait_secs - before.wait_secs;
        /* 1 + 2 + ... + ranks, exact in float for any sane rank count */
        wrong |= buf[0] != (float)(ranks * (ranks + 1) / 2) ||
                 buf[n - 1] != (float)(ranks * (ranks + 1) / 2);
    }
    qsort(secs, (size_t)rounds, sizeof *secs, cmp_double);
    const char *alg = getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
    if (rank == 0)
        printf("allreduce-bench: %d ranks, %ld floats (%.1f MB), libnbc algorithm %s: "
               "median %.2f ms, best %.2f ms over %d rounds%s\n",
               ranks, n, (double)n * 4 / 1e6, alg ? alg : "(unset)", secs[rounds / 2] * 1e3,
               secs[0] * 1e3, rounds, wrong ? "; WRONG SUM" : "");
    free(buf);
    tfs_dist_finalize(!wrong);
    return wrong ? 1 : 0;
}
