/* REST load driver of tfserve-perf: HTTP/1.1 keep-alive over raw non-blocking sockets. A few
 * threads (--threads) each run an epoll loop over their share of the connections, so 64 or 1,000
 * clients cost no more threads than 1 (a thread per connection would swamp a 2-core machine).
 *
 * Closed loop (--concurrency=N): N connections, each sends the next request as soon as the
 * previous response is complete; latency is measured from the send.
 * Open loop (--request-rate=R): request k of the step is due at start + k/R whatever happened
 * before; a due request takes an idle connection (opening one, up to --max-outstanding, when none
 * is idle) and its latency is measured from when it was due, not when it could be sent, so a
 * slow server cannot hide its queueing behind a client that waited (coordinated omission).
 *
 * A request counts in the step when it was due (open) or sent (closed) inside the timed window;
 * it counts as success only with status 200 and a complete, well-formed response. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "bench/perf/perf.h"
#include "runtime/alloc.h"

typedef struct rest_worker rest_worker;

typedef struct rest_conn {
    int          fd;       /* -1: closed */
    bool         busy;     /* a request is in flight */
    size_t       sent;     /* bytes of the request written */
    uint64_t     t_sched;  /* due (open loop) or send (closed loop) time */
    tfs_perf_http http;
    rest_worker *w;
} rest_conn;

struct rest_worker {
    pthread_t              thread;
    int                    index, n_workers;
    const tfs_perf_opts   *o;
    const tfs_perf_payload *p;
    const tfs_perf_step   *step;
    const tfs_perf_clock  *clock;
    const struct sockaddr_storage *addr;
    socklen_t              addr_len;
    int                    ep, timer;
    int                    cap, n_conns;   /* connections allowed / opened */
    rest_conn             *conns;
    int                   *idle;           /* open loop: indexes of idle connections */
    int                    n_idle;
    int                    outstanding;
    uint64_t               k;              /* open loop: next request number of this worker */
    double                 interval_ns;    /* open loop: between this worker's requests */
    tfs_perf_stats         stats;
    char                  *first_body;
    size_t                 first_len;
    tfs_status             st;             /* setup failure (epoll, sockets) */
};

static bool running(const rest_worker *w, uint64_t now)
{
    return now < w->clock->t1_ns;
}

static bool measured(const rest_worker *w, uint64_t t)
{
    return t >= w->clock->t0_ns && t < w->clock->t1_ns;
}

static void conn_close(rest_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static bool conn_open(rest_conn *c)
{
    rest_worker *w = c->w;
    c->fd = socket(w->addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return false;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (const struct sockaddr *)w->addr, w->addr_len) < 0 && errno != EINPROGRESS) {
        conn_close(c);
        return false;
    }
    /* Edge-triggered in and out, registered once: no epoll_ctl per request. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        conn_close(c);
        return false;
    }
    return true;
}

static void request_start(rest_conn *c, uint64_t t_sched);

/* The request on c is over: slot < 0 success, else the error slot. Then c sends the next one
 * (closed loop) or goes back to the idle list (open loop). */
static void request_done(rest_conn *c, int slot, bool reopen)
{
    rest_worker *w   = c->w;
    uint64_t     now = tfs_perf_now_ns();
    c->busy = false;
    w->outstanding--;
    if (measured(w, c->t_sched)) {
        tfs_perf_stats_add(&w->stats, slot, now - c->t_sched, now);
        if (slot < 0)
            tfs_perf_stats_add_server(&w->stats, c->http.server_queue_us,
                                      c->http.server_compute_us);
    }
    if (reopen) {
        conn_close(c);
        if (running(w, now) && !conn_open(c) && measured(w, now))
            tfs_perf_stats_add(&w->stats, 0, 0, now); /* cannot even open a socket */
    }
    if (c->fd < 0 || !running(w, now))
        return;
    if (w->step->open_loop)
        w->idle[w->n_idle++] = (int)(c - w->conns);
    else
        request_start(c, now);
}

static void try_send(rest_conn *c)
{
    const tfs_perf_payload *p = c->w->p;
    while (c->sent < p->request_len) {
        ssize_t n = send(c->fd, p->request + c->sent, p->request_len - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return; /* EPOLLOUT will tell us */
        } else {
            request_done(c, 0, true);
            return;
        }
    }
}

static void request_start(rest_conn *c, uint64_t t_sched)
{
    rest_worker *w = c->w;
    c->busy    = true;
    c->sent    = 0;
    c->t_sched = t_sched;
    w->outstanding++;
    tfs_perf_http_reset(&c->http, w->first_body == NULL);
    try_send(c);
}

static void on_readable(rest_conn *c)
{
    char buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (!c->busy) { /* bytes or a close with nothing asked: drop the connection */
            rest_worker *w = c->w;
            conn_close(c);
            if (w->step->open_loop) { /* take it off the idle list; a new one opens on demand */
                for (int i = 0; i < w->n_idle; i++)
                    if (w->idle[i] == (int)(c - w->conns)) {
                        w->idle[i] = w->idle[--w->n_idle];
                        break;
                    }
            } else if (running(w, tfs_perf_now_ns()) && conn_open(c)) {
                request_start(c, tfs_perf_now_ns());
            }
            return;
        }
        if (n <= 0) {
            tfs_perf_http_eof(&c->http);
        } else {
            size_t used = tfs_perf_http_feed(&c->http, buf, (size_t)n);
            if (c->http.state == TFS_PERF_HTTP_DONE && used < (size_t)n)
                c->http.close = true; /* more than one response: we did not pipeline */
        }
        if (c->http.state == TFS_PERF_HTTP_ERROR) {
            request_done(c, 0, true);
            return;
        }
        if (c->http.state != TFS_PERF_HTTP_DONE) {
            if (n <= 0)
                return;
            continue;
        }
        int slot = c->http.status == 200 ? -1 : c->http.status < TFS_PERF_ERR_SLOTS ? c->http.status : 0;
        rest_worker *w = c->w;
        if (c->http.status == 200 && !w->first_body && c->http.keep_body) {
            w->first_body = c->http.body ? c->http.body : tfs_strdup("");
            w->first_len  = c->http.body_len;
            c->http.body  = NULL;
            c->http.body_cap = c->http.body_len = 0;
        }
        request_done(c, slot, c->http.close || n <= 0);
        return;
    }
}

/* Open loop: hands every due request an idle (or new) connection. */
static void dispatch_due(rest_worker *w, uint64_t now)
{
    for (;;) {
        uint64_t due = w->clock->start_ns + (uint64_t)((double)w->k * w->interval_ns) +
                       (uint64_t)((double)w->index * w->interval_ns / w->n_workers);
        if (due > now || due >= w->clock->t1_ns)
            break;
        rest_conn *c = NULL;
        if (w->n_idle) {
            c = &w->conns[w->idle[--w->n_idle]];
        } else {
            for (int i = 0; i < w->n_conns && !c; i++)
                if (w->conns[i].fd < 0)
                    c = &w->conns[i];
            if (!c && w->n_conns < w->cap)
                c = &w->conns[w->n_conns++];
            if (!c)
                break; /* all connections busy: the due request waits, its latency grows */
            if (!conn_open(c)) {
                w->k++;
                if (measured(w, due))
                    tfs_perf_stats_add(&w->stats, 0, 0, now);
                continue;
            }
        }
        w->k++;
        request_start(c, due);
    }
}

static void arm_timer(rest_worker *w)
{
    uint64_t due = w->clock->start_ns + (uint64_t)((double)w->k * w->interval_ns) +
                   (uint64_t)((double)w->index * w->interval_ns / w->n_workers);
    struct itimerspec its = {0};
    its.it_value.tv_sec  = (time_t)(due / 1000000000u);
    its.it_value.tv_nsec = (long)(due % 1000000000u);
    if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
        its.it_value.tv_nsec = 1;
    timerfd_settime(w->timer, TFD_TIMER_ABSTIME, &its, NULL);
}

static void *worker_main(void *arg)
{
    rest_worker *w = arg;
    struct epoll_event evs[256];
    uint64_t now = tfs_perf_now_ns();
    if (!w->step->open_loop) {
        for (int i = 0; i < w->cap; i++) {
            rest_conn *c = &w->conns[w->n_conns++];
            if (conn_open(c))
                request_start(c, now);
            else if (measured(w, now))
                tfs_perf_stats_add(&w->stats, 0, 0, now);
        }
    }
    for (;;) {
        now = tfs_perf_now_ns();
        if (w->step->open_loop && running(w, now)) {
            dispatch_due(w, now);
            arm_timer(w);
        }
        if (!running(w, now) && (w->outstanding == 0 || now >= w->clock->drain_ns))
            break;
        int n = epoll_wait(w->ep, evs, (int)(sizeof evs / sizeof evs[0]), 5);
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) { /* the timer */
                uint64_t ticks;
                ssize_t  r = read(w->timer, &ticks, sizeof ticks);
                (void)r;
                continue;
            }
            rest_conn *c = evs[i].data.ptr;
            if (c->fd < 0)
                continue;
            if ((evs[i].events & EPOLLOUT) && c->busy && c->sent < w->p->request_len)
                try_send(c);
            if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                on_readable(c);
        }
    }
    /* Requests still out after the drain deadline: timeouts. */
    now = tfs_perf_now_ns();
    for (int i = 0; i < w->n_conns; i++) {
        rest_conn *c = &w->conns[i];
        if (c->busy && measured(w, c->t_sched))
            tfs_perf_stats_add(&w->stats, 0, 0, now);
        conn_close(c);
    }
    return NULL;
}

static enum tfs_code resolve(const tfs_perf_opts *o, struct sockaddr_storage *ss, socklen_t *len,
                             tfs_status *st)
{
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(o->host, port, &hints, &res);
    if (rc != 0 || !res)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "host '%s': %s", o->host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return TFS_OK;
}

static void worker_deinit(rest_worker *w)
{
    for (int i = 0; w->conns && i < w->cap; i++) {
        conn_close(&w->conns[i]);
        tfs_perf_http_deinit(&w->conns[i].http);
    }
    tfs_free(w->conns);
    tfs_free(w->idle);
    tfs_free(w->first_body);
    if (w->ep >= 0)
        close(w->ep);
    if (w->timer >= 0)
        close(w->timer);
}

enum tfs_code tfs_perf_rest_run_step(const tfs_perf_opts *o, const tfs_perf_payload *p,
                                     const tfs_perf_step *step, tfs_perf_step_result *r,
                                     tfs_status *st)
{
    struct sockaddr_storage addr;
    socklen_t addr_len = 0;
    tfs_perf_clock clock;
    rest_worker *ws = NULL;
    int n_workers = o->threads, started = 0;
    enum tfs_code code = TFS_OK;

    memset(r, 0, sizeof *r);
    r->step = *step;
    tfs_perf_stats_init(&r->stats);
    if ((code = resolve(o, &addr, &addr_len, st)) != TFS_OK)
        return code;
    if (!step->open_loop && step->concurrency < n_workers)
        n_workers = step->concurrency;
    ws = tfs_calloc((size_t)n_workers, sizeof *ws);
    if (!ws)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for %d workers", n_workers);
    for (int i = 0; i < n_workers; i++) {
        rest_worker *w = &ws[i];
        w->ep = w->timer = -1;
        w->index = i;
        w->n_workers = n_workers;
        w->o = o;
        w->p = p;
        w->step = step;
        w->clock = &clock;
        w->addr = &addr;
        w->addr_len = addr_len;
        w->cap = step->open_loop ? tfs_perf_share(o->max_outstanding, i, n_workers)
                                 : tfs_perf_share(step->concurrency, i, n_workers);
        if (w->cap < 1)
            w->cap = 1;
        w->interval_ns = step->open_loop ? 1e9 * n_workers / step->rate : 0;
        tfs_perf_stats_init(&w->stats);
        w->conns = tfs_calloc((size_t)w->cap, sizeof *w->conns);
        w->idle  = tfs_calloc((size_t)w->cap, sizeof *w->idle);
        w->ep    = epoll_create1(EPOLL_CLOEXEC);
        w->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (!w->conns || !w->idle || w->ep < 0 || w->timer < 0) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "worker %d: out of memory or descriptors", i);
            goto fail;
        }
        for (int j = 0; j < w->cap; j++) {
            w->conns[j].fd = -1;
            w->conns[j].w  = w;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->timer, &ev) < 0) {
            code = TFS_ERR(st, TFS_INTERNAL, "worker %d: epoll_ctl: %s", i, strerror(errno));
            goto fail;
        }
    }
    tfs_perf_clock_init(&clock, o);
    for (; started < n_workers; started++)
        if (pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]) != 0) {
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot start driver thread %d", started);
            break;
        }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    if (code != TFS_OK)
        goto fail;
    for (int i = 0; i < n_workers; i++) {
        tfs_perf_stats_merge(&r->stats, &ws[i].stats);
        if (!r->first_body && ws[i].first_body) {
            r->first_body = ws[i].first_body;
            r->first_len  = ws[i].first_len;
            ws[i].first_body = NULL;
        }
    }
    uint64_t end = r->stats.last_done_ns > clock.t1_ns ? r->stats.last_done_ns : clock.t1_ns;
    r->elapsed_s  = (double)(end - clock.t0_ns) / 1e9;
    r->throughput = r->elapsed_s > 0 ? (double)r->stats.ok / r->elapsed_s : 0;
fail:
    for (int i = 0; i < n_workers; i++)
        worker_deinit(&ws[i]);
    tfs_free(ws);
    return code;
}
