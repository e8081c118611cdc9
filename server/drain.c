/* Graceful drain on SIGTERM/SIGINT, run on the main thread after its sigwait returned:
 *
 *   1. readiness turns 503 and gRPC health NOT_SERVING at once (tfs_health_start_drain);
 *   2. --drain_delay_seconds (default 0): keep serving and accepting, so that load balancers and
 *      Kubernetes endpoints notice the failing readiness probe before connections are refused;
 *   3. stop accepting: REST's listening socket is shut (connects are refused, responses carry
 *      "Connection: close") and gRPC's server is shut down (listener closed, GOAWAY);
 *   4. wait for the requests in flight, up to --drain_timeout_seconds, then return 0 so that
 *      main frees everything in order and exits 0. The C core's shutdown also waits for gRPC
 *      clients to close their connections (its graceful GOAWAY gives each up to 20 s, and an idle
 *      client that never answers the GOAWAY's ping takes all of them), so once no request of
 *      either protocol has been in flight for IDLE_GRACE_S, the connections left are closed.
 *
 * Signals stay blocked in every thread (main.c's design); instead of a handler, the waits are
 * sigtimedwait calls on the same set, so a second SIGTERM or SIGINT is seen within one poll tick
 * and ends the process at once with 128 + its number (the status a shell reports for a process
 * killed by that signal: 143 for SIGTERM, 130 for SIGINT). A drain that times out exits 1:
 * requests were cut off. In both cases the caller must _exit without freeing, because request
 * threads may still use what it would free. Each phase is one log line (module "drain").
 */
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "server/grpc.h"
#include "server/server.h"

#define LOG_MODULE "drain"
#define POLL_MS    20
/* Long enough for a call that a client started just before the GOAWAY to reach us and be counted
 * (loopback or LAN: well under a millisecond); short enough not to delay the exit noticeably. */
#define IDLE_GRACE_S 0.3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *sig_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

/* Waits up to ms for a signal of sigs; returns it, or 0 when none came. */
static int wait_signal(const sigset_t *sigs, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    int             sig;
    do {
        sig = sigtimedwait(sigs, NULL, &ts);
    } while (sig < 0 && errno == EINTR);
    return sig > 0 ? sig : 0;
}

static int interrupted(int sig, bool *exit_now)
{
    TFS_LOG_WARN(LOG_MODULE, "received %s during the drain; exiting at once with status %d",
                 sig_name(sig), 128 + sig);
    *exit_now = true;
    return 128 + sig;
}

int tfs_server_drain(tfs_health *h, struct tfs_rest *rest, struct tfs_grpc *grpc,
                     const sigset_t *sigs, int sig, const tfs_drain_opts *opts, bool *exit_now)
{
    double t0 = now_s();
    int    again;

    *exit_now = false;
    if (h)
        tfs_health_start_drain(h);
    TFS_LOG_INFO(LOG_MODULE, "received %s: draining; /readyz now answers 503 and gRPC health "
                 "NOT_SERVING (a second signal exits at once)", sig_name(sig));

    if (opts->delay_seconds > 0) {
        TFS_LOG_INFO(LOG_MODULE, "still accepting for %llds (--drain_delay_seconds) so that "
                     "load balancers see the server not ready", (long long)opts->delay_seconds);
        double until = t0 + (double)opts->delay_seconds;
        while (now_s() < until) {
            if ((again = wait_signal(sigs, POLL_MS)) != 0)
                return interrupted(again, exit_now);
        }
    }

    tfs_grpc_quiesce(grpc);
    tfs_rest_quiesce(rest);
    double t1 = now_s();
    TFS_LOG_INFO(LOG_MODULE, "stopped accepting connections; waiting up to %llds "
                 "(--drain_timeout_seconds) for %d REST and %d gRPC requests in flight",
                 (long long)opts->timeout_seconds, tfs_rest_in_flight(rest),
                 tfs_grpc_in_flight(grpc));

    double until = t1 + (double)opts->timeout_seconds;
    double idle_since = -1.0;   /* when both in-flight counts were last seen turning 0 */
    bool   closed = false;
    while (tfs_rest_in_flight(rest) > 0 || !tfs_grpc_drained(grpc)) {
        if (tfs_rest_in_flight(rest) > 0 || tfs_grpc_in_flight(grpc) > 0) {
            idle_since = -1.0;
        } else if (idle_since < 0) {
            idle_since = now_s();
        } else if (!closed && now_s() - idle_since >= IDLE_GRACE_S) {
            TFS_LOG_INFO(LOG_MODULE, "no request in flight for %.1fs; closing the gRPC "
                         "connections that clients still hold open", IDLE_GRACE_S);
            tfs_grpc_close_connections(grpc);
            closed = true;
        }
        if (now_s() >= until) {
            TFS_LOG_ERROR(LOG_MODULE, "timed out after %llds with %d REST and %d gRPC requests "
                          "still in flight; exiting with status 1",
                          (long long)opts->timeout_seconds, tfs_rest_in_flight(rest),
                          tfs_grpc_in_flight(grpc));
            *exit_now = true;
            return 1;
        }
        if ((again = wait_signal(sigs, POLL_MS)) != 0)
            return interrupted(again, exit_now);
    }
    TFS_LOG_INFO(LOG_MODULE, "requests in flight finished %.3fs after the listeners closed "
                 "(%.3fs after %s); shutting down", now_s() - t1, now_s() - t0, sig_name(sig));
    return 0;
}
