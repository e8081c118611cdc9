/* The REST front end's HTTP layer on libmicrohttpd: a daemon with an internal poll() thread pool,
 * request bodies accumulated up to a limit, and responses handed back from rest.c.
 *
 * DESIGN. MHD calls the access handler several times per request: once with the headers (we
 * allocate the per-request http_call), then once per body chunk (appended), then once with no
 * data when the body is complete (we answer). The request-completed callback frees the call on
 * every path, including client disconnects.
 *
 * Batching. A predict is decoded and validated on the MHD thread (tfs__rest_start) and handed to
 * the loader; when its answer is not ready at once, the connection is suspended and the thread
 * goes back to MHD. The completion (wake, on a batch thread) marks the call ready and resumes the
 * connection; MHD then calls the handler again, which encodes and queues the response on its own
 * thread. r->mu orders suspend against resume (the wake may come before the suspend: then the
 * handler answers at once). MHD does not poll suspended sockets, so a watcher thread polls them
 * for a peer hang-up and cancels the queued task; the resumed handler then closes the connection
 * without writing. tfs_rest_stop waits for pending predicts before stopping MHD (which must not
 * be stopped with suspended connections); the drain waits for them too, since a suspended
 * request stays in in_flight.
 *
 * Drain (tfs_rest_quiesce): MHD_quiesce_daemon takes the listening socket out of every pool
 * thread's poll set and hands it back; we shut it down at once, so connection attempts are refused
 * instead of waiting in the kernel's backlog, and close it after MHD_stop_daemon (MHD's rule:
 * a pool thread may still hold it until then). From then on every response carries
 * "Connection: close", so keep-alive clients move elsewhere after their current request; the
 * requests in flight (counted from their headers to their request-completed callback) are what
 * the drain waits for. Idle keep-alive connections are closed by MHD_stop_daemon.
 *
 * Connections. Each pool thread polls its connections with poll(), which has no FD_SETSIZE cap,
 * rather than epoll: libmicrohttpd 0.9.75's epoll mode is edge-triggered and takes a short read
 * for a drained socket, so a client that sends part of a request and closes at once (data and FIN
 * in one go) is never seen to close, and its socket stays in CLOSE-WAIT until a timeout (a third
 * of a 2,000-connection flood did); poll() is level-triggered and sees the FIN. A thread holds at
 * most its share of opts.max_connections; past that, new connections wait in the kernel's backlog
 * until one closes. A connection with no traffic for opts.connection_timeout_s (idle keep-alive,
 * or a request whose bytes stopped coming) is closed by MHD, so idle clients cannot hold the limit
 * for good. Requests whose framing is ambiguous (see framing_error) or whose target has a NUL
 * (target_has_nul) are refused before their body, and the connection closed.
 *
 * We bind the listening socket ourselves so that a failed bind reports errno's reason, and install
 * an identity URL-unescaper: MHD would otherwise decode %XX in the path before routing, while TF
 * Serving matches the raw path and unescapes only the model name and label.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "server/metrics-impl.h"
#include "server/server-impl.h"

#define LOG_MODULE "http"

#define IN_FLIGHT_SLOTS 8

typedef struct in_flight_slot {
    atomic_int n;
    char       pad[64 - sizeof(atomic_int)];   /* 64 bytes apart: never two in one cache line */
} in_flight_slot;

/* This thread's slot (threads are given slots in turn). */
static int in_flight_slot_index(void)
{
    static atomic_int      next;
    static _Thread_local int mine = -1;
    if (mine < 0)
        mine = (int)((unsigned)atomic_fetch_add(&next, 1) % IN_FLIGHT_SLOTS);
    return mine;
}

struct tfs_rest {
    struct MHD_Daemon *daemon;
    tfs_loader        *loader;
    tfs_rest_opts      opts;
    int                port;
    /* Requests between headers and completion, counted in slots: each thread adds and subtracts
     * in its own cache line (one shared counter moved between cores twice per request); the
     * drain reads the sum. A request may start and end on different threads, so a slot can go
     * negative; only the sum means anything. */
    in_flight_slot     in_flight[IN_FLIGHT_SLOTS];
    atomic_bool        quiesced;      /* drain started: answer with Connection: close */
    int                quiesced_fd;   /* the listening socket MHD handed back, or -1 */
    /* Pending predicts (see "Batching" in the file comment). mu guards every http_call's
     * ready/suspended/orphaned/gone flags and the suspended list. */
    pthread_mutex_t    mu;
    pthread_cond_t     watch_cv;
    struct http_call  *suspended;     /* list of suspended calls, for the watcher */
    int                n_pending;     /* http_calls with a pending predict */
    bool               watch_stop;
    bool               watch_started;
    bool               stopping;      /* tfs_rest_stop waits for n_pending to reach 0 */
    pthread_t          watcher;
    char              *tls_cert;      /* PEM text of the HTTPS files, or NULL: plain HTTP */
    char              *tls_key;
};

/* libmicrohttpd's per-connection memory (request line, headers, read buffer). MHD zeroes all of
 * it between keep-alive requests, so its default 32 KiB costs a 32 KiB memset per request; 16 KiB
 * still holds any realistic request head (nginx's default limit for one header line is 8 KiB),
 * and a body larger than the rest is handed to us in pieces. */
#define CONNECTION_MEMORY (16 * 1024)

/* Bodies up to this size live inside the http_call: no allocation for a typical small predict. */
#define SMALL_BODY 480

/* Per request, owned by the connection (freed in request_completed; an orphaned pending call by
 * its wake). */
typedef struct http_call {
    tfs_rest              *r;
    struct MHD_Connection *conn;
    char                  *body;
    size_t                 len;
    size_t                 cap;
    size_t                 declared;   /* Content-Length, 0 when absent (chunked) */
    bool                   too_big;
    bool                   answered;
    bool                   counted;    /* in r->in_flight (from its headers on) */
    char                  *raw_url;    /* the request target as sent, when it has a query */
    const char            *target;     /* borrowed from MHD: the target at uri_seen, and ... */
    size_t                 target_len; /* ... its length as a C string then */
    tfs__rest_call        *pending;    /* a predict waiting for its batch */
    bool                   ready;      /* its wake ran */
    bool                   woken_here; /* ... on this thread inside tfs__rest_start */
    bool                   suspended;  /* the connection is suspended, waiting for the wake */
    bool                   orphaned;   /* request_completed came first: the wake frees */
    bool                   gone;       /* the client hung up while it was suspended */
    struct http_call      *prev, *next;   /* in r->suspended */
    char                   inline_body[SMALL_BODY + 1];   /* body while it fits */
} http_call;

/* The tfs_rest whose mu this thread holds while it cancels (the wake then must not lock). */
static _Thread_local tfs_rest *tls_locked;
/* The call this thread is starting (inside tfs__rest_start): its wake, when it comes on this
 * thread before the start returns (an unbatched run), only marks it ready, without r->mu. No
 * other thread knows the call yet, so nothing can race; this keeps the common synchronous
 * predict off the shared mutex altogether. */
static _Thread_local http_call *tls_starting;

tfs_rest_opts tfs_rest_opts_default(void)
{
    tfs_rest_opts o = {
        .port = 8501,
        .num_threads = 4,
        .timeout_ms = 30000,
        .max_body_bytes = (size_t)64 << 20,
        .connection_timeout_s = 60,
        .max_connections = 4096,
        .bind_address = "0.0.0.0",
    };
    return o;
}

int tfs_rest_port(const tfs_rest *r)
{
    return r ? r->port : 0;
}

/* ---- responses ------------------------------------------------------------------------------ */

static void free_body(void *p)
{
    tfs_free(p);
}

/* Queues `body` (takes ownership of its data) with the given status, content type and extra
 * headers (name, value pairs; NULL-terminated; may be NULL). */
static enum MHD_Result respond_with(const tfs_rest *r, struct MHD_Connection *conn, int status,
                                    const char *content_type, tfs__buf *body,
                                    const char *const *headers);

static enum MHD_Result respond(const tfs_rest *r, struct MHD_Connection *conn, int status,
                               const char *content_type, tfs__buf *body)
{
    return respond_with(r, conn, status, content_type, body, NULL);
}

static enum MHD_Result respond_with(const tfs_rest *r, struct MHD_Connection *conn, int status,
                                    const char *content_type, tfs__buf *body,
                                    const char *const *headers)
{
    struct MHD_Response *resp;
    if (body->data) {
        resp = MHD_create_response_from_buffer_with_free_callback(body->len, body->data,
                                                                  free_body);
        body->data = NULL;
    } else {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    tfs__buf_deinit(body);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    for (int i = 0; headers && headers[i]; i += 2)
        MHD_add_response_header(resp, headers[i], headers[i + 1]);
    if (atomic_load(&((tfs_rest *)r)->quiesced) &&
        !MHD_get_response_header(resp, MHD_HTTP_HEADER_CONNECTION))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result respond_too_big(struct MHD_Connection *conn, const tfs_rest *r,
                                       http_call *c, unsigned long long declared)
{
    tfs__buf b;
    char     msg[160];
    tfs__buf_init(&b);
    if (declared)
        snprintf(msg, sizeof msg, "Request body of %llu bytes exceeds the limit of %zu bytes",
                 declared, r->opts.max_body_bytes);
    else
        snprintf(msg, sizeof msg, "Request body exceeds the limit of %zu bytes",
                 r->opts.max_body_bytes);
    tfs__json_error(&b, msg);
    c->answered = true;
    TFS_LOG_DEBUG(LOG_MODULE, "413: %s", msg);
    return respond(r, conn, 413, "application/json", &b);
}

/* Message framing. Behind a proxy, a request whose length two hops may read differently (two
 * Content-Length headers, or Content-Length with Transfer-Encoding) lets a client hide a second
 * request in the first one's body (request smuggling). libmicrohttpd takes the first
 * Content-Length, or chunked over Content-Length, without complaint. RFC 9112 section 6.3 makes
 * differing lengths a 400 and lets a server refuse Content-Length with Transfer-Encoding, closing
 * the connection either way, since where the next request starts is unknown; equal duplicates are
 * refused too, as a proxy in front may not read them the same way. */
typedef struct framing {
    int         n_length;     /* Content-Length headers */
    int         n_encoding;   /* Transfer-Encoding headers */
    const char *encoding;     /* the last one's value */
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    framing *f = cls;
    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        f->n_length++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->n_encoding++;
        f->encoding = value;
    }
    return MHD_YES;
}

/* Why the request's framing is ambiguous, or NULL when it is not. */
static const char *framing_error(struct MHD_Connection *conn)
{
    framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
    if (f.n_length > 1)
        return "Request has more than one Content-Length header";
    if (f.n_length && f.n_encoding)
        return "Request has both Content-Length and Transfer-Encoding headers";
    if (f.n_encoding > 1)
        return "Request has more than one Transfer-Encoding header";
    /* MHD reads anything else ("gzip, chunked") as no framing at all and waits for the body
     * until the client closes; RFC 9112 section 6.1 wants 400 when chunked is not final, and
     * we decode no other coding. */
    if (f.n_encoding && (!f.encoding || strcasecmp(f.encoding, "chunked") != 0))
        return "Transfer-Encoding must be exactly \"chunked\"";
    return NULL;
}

/* True when the request target had a NUL byte in it. MHD hands the target on as a C string, so
 * "GET /v1/models/m\0x HTTP/1.1" would be routed as /v1/models/m. MHD ends the target by
 * writing a NUL over the space before the version, in its read buffer, and passes the handler
 * the same pointer it gave uri_seen: the version then starts right after the target's first NUL
 * unless the target held one of its own. */
static bool target_has_nul(const http_call *c, const char *url, const char *version)
{
    if (!c->target || url != c->target || !version || !*version)
        return false;
    uintptr_t end = (uintptr_t)c->target + c->target_len + 1, v = (uintptr_t)version;
    return v > end && v - end < CONNECTION_MEMORY;
}

/* 400 and close: after a malformed request the rest of the stream cannot be trusted. */
static enum MHD_Result respond_malformed(struct MHD_Connection *conn, const tfs_rest *r,
                                         http_call *c, const char *why)
{
    static const char *const close_hdr[] = {MHD_HTTP_HEADER_CONNECTION, "close", NULL};
    tfs__buf b;
    tfs__buf_init(&b);
    tfs__json_error(&b, why);
    c->answered = true;
    TFS_LOG_DEBUG(LOG_MODULE, "400: %s", why);
    return respond_with(r, conn, 400, "application/json", &b, close_hdr);
}

/* ---- handler -------------------------------------------------------------------------------- */

static void body_free(http_call *c)
{
    if (c->body != c->inline_body)
        tfs_free(c->body);
    c->body = NULL;
    c->len = c->cap = 0;
}

static bool append_body(http_call *c, const char *data, size_t n, size_t max)
{
    if (n > max - c->len)
        return false;
    if (!c->body && c->len + n <= SMALL_BODY && c->declared <= SMALL_BODY) {
        c->body = c->inline_body;
        c->cap = SMALL_BODY;
    }
    if (c->len + n > c->cap) {
        /* The declared length is the whole body: one allocation for the common case. */
        size_t cap = c->cap ? c->cap : c->declared >= n ? c->declared : 4096;
        while (cap < c->len + n)
            cap *= 2;
        if (cap > max)
            cap = max;
        char *p = tfs_malloc(cap + 1);
        if (!p)
            return false;
        size_t len = c->len;
        if (len)
            memcpy(p, c->body, len);
        body_free(c);
        c->body = p;
        c->len = len;
        c->cap = cap;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
    c->body[c->len] = 0;
    return true;
}

/* ---- pending predicts ------------------------------------------------------------------------ */

static void unlink_suspended(tfs_rest *r, http_call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (r->suspended == c)
        r->suspended = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void pending_finished(tfs_rest *r)
{
    pthread_mutex_lock(&r->mu);
    r->n_pending--;
    /* Only tfs_rest_stop waits for this; waking the watcher on every predict would cost a
     * context switch per request. */
    if (r->stopping && r->n_pending == 0)
        pthread_cond_broadcast(&r->watch_cv);
    pthread_mutex_unlock(&r->mu);
}

static void drop_pending(http_call *c)
{
    tfs__rest_response resp;
    tfs__rest_call_finish(c->pending, &resp);   /* records the request */
    tfs__buf_deinit(&resp.body);
    c->pending = NULL;
    pending_finished(c->r);
}

/* tfs__rest_wake_fn: the predict's outcome is in. On a batch thread, on the MHD thread inside
 * tfs__rest_start, or inside a cancel made with r->mu held. */
static void wake(void *ctx)
{
    http_call *c = ctx;
    tfs_rest  *r = c->r;
    if (c == tls_starting) {
        c->ready = c->woken_here = true;
        return;
    }
    bool       lock = tls_locked != r;
    if (lock)
        pthread_mutex_lock(&r->mu);
    c->ready = true;
    bool orphan = c->orphaned && lock;
    if (c->suspended) {
        c->suspended = false;
        unlink_suspended(r, c);
        MHD_resume_connection(c->conn);   /* c belongs to the MHD thread from here on */
    }
    if (lock)
        pthread_mutex_unlock(&r->mu);
    if (orphan) {
        drop_pending(c);
        body_free(c);
        tfs_free(c->raw_url);
        tfs_free(c);
    }
}

/* Suspended connections are not polled by MHD, so a client that hangs up would only be noticed
 * when its answer is written. This thread looks at their sockets every WATCH_MS and cancels the
 * task of a connection whose peer has closed (POLLRDHUP / POLLHUP). */
#define WATCH_MS 20

static void *watch_main(void *arg)
{
    tfs_rest *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->watch_stop) {
        if (!r->suspended) {
            pthread_cond_wait(&r->watch_cv, &r->mu);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WATCH_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->watch_cv, &r->mu, &until);
        tls_locked = r;
        for (http_call *c = r->suspended, *next; c; c = next) {
            next = c->next;
            const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
            struct pollfd pfd = {.fd = ci ? ci->connect_fd : -1, .events = POLLRDHUP};
            if (pfd.fd < 0 || poll(&pfd, 1, 0) != 1 ||
                !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                continue;
            c->gone = true;
            /* A task not yet running completes now (wake runs here, without locking, and
             * resumes the connection); a running one completes when its batch does. */
            if (tfs__rest_call_cancel(c->pending))
                TFS_LOG_DEBUG(LOG_MODULE, "client hung up while its predict was queued: "
                              "cancelled");
            next = r->suspended;   /* the list may have changed under the cancel */
            while (next && (next->gone || next == c))
                next = next->next;
        }
        tls_locked = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static int64_t deadline_for(const tfs_rest *r)
{
    return r->opts.timeout_ms > 0 ? tfs_batch_now_ns() + r->opts.timeout_ms * 1000000 : 0;
}

/* KServe v2's binary tensor extension: Inference-Header-Content-Length, the bytes of JSON before
 * the binary tensors. -1 when absent, -2 when it is not a decimal number (the v2 codec says so). */
static int64_t json_length(struct MHD_Connection *conn)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                "Inference-Header-Content-Length");
    if (!v)
        return -1;
    int64_t n = 0;
    if (!*v)
        return -2;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || n > (INT64_MAX - 9) / 10)
            return -2;
        n = n * 10 + (*v - '0');
    }
    return n;
}

/* ---- handler -------------------------------------------------------------------------------- */

/* v >= 0 in decimal (snprintf costs more than the rest of a small answer's headers). */
static void int_text(int64_t v, char out[24])
{
    char   tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
}

static enum MHD_Result answer(tfs_rest *r, struct MHD_Connection *conn, const char *method,
                              const char *url, tfs__rest_response *resp)
{
    if (resp->http_status >= 500)
        TFS_LOG_WARN(LOG_MODULE, "%s %s -> %d %s", method, url, resp->http_status,
                     resp->body.data ? resp->body.data : "");
    else
        TFS_LOG_DEBUG(LOG_MODULE, "%s %s -> %d", method, url, resp->http_status);
    char q[24], t[24], j[24];
    const char *hdr[7] = {NULL};
    int         h = 0;
    if (resp->queue_us >= 0) {
        int_text(resp->queue_us, q);
        int_text(resp->compute_us, t);
        hdr[h++] = "X-Tfserve-Queue-Micros";
        hdr[h++] = q;
        hdr[h++] = "X-Tfserve-Compute-Micros";
        hdr[h++] = t;
    }
    if (resp->json_len >= 0) {
        int_text(resp->json_len, j);
        hdr[h++] = "Inference-Header-Content-Length";
        hdr[h++] = j;
    }
    return respond_with(r, conn, resp->http_status, resp->content_type, &resp->body, hdr);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    tfs_rest  *r = cls;
    http_call *c = *con_cls;

    if (!c || !c->counted) {
        /* Headers only. Refuse a declared oversized body before reading any of it. */
        if (!c && !(c = tfs_calloc(1, sizeof *c)))
            return MHD_NO;
        *con_cls = c;
        c->counted = true;
        atomic_fetch_add_explicit(&r->in_flight[in_flight_slot_index()].n, 1,
                                  memory_order_relaxed);   /* until request_completed */
        const char *why = target_has_nul(c, url, version)
                              ? "Request target has a NUL byte"
                              : framing_error(conn);
        if (why)
            return respond_malformed(conn, r, c, why);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
        if (declared > r->opts.max_body_bytes)
            return respond_too_big(conn, r, c, declared);
        c->declared = (size_t)declared;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!c->answered && !c->too_big &&
            !append_body(c, upload_data, *upload_data_size, r->opts.max_body_bytes))
            c->too_big = true;   /* keep reading (and dropping) so we can answer */
        *upload_data_size = 0;
        return MHD_YES;
    }
    tfs__rest_response resp;
    if (c->pending) {
        /* Called again after the wake resumed the connection (or the wake came first). */
        c->answered = true;
        tfs__rest_call_finish(c->pending, &resp);
        c->pending = NULL;
        pending_finished(r);
        if (c->gone) {
            /* No write to a connection whose client hung up: close it. */
            tfs__buf_deinit(&resp.body);
            return MHD_NO;
        }
        return answer(r, conn, method, url, &resp);
    }
    if (c->answered)
        return MHD_YES;
    if (c->too_big)
        return respond_too_big(conn, r, c, 0);

    resp.queue_us = resp.compute_us = resp.json_len = -1;
    if (tfs__health_rest(r->opts.health, method, url, &resp) ||
        tfs__metrics_serve_http(method, url, &resp)) {
        c->answered = true;
        return answer(r, conn, method, url, &resp);
    }
    c->r = r;
    c->conn = conn;
    tfs__rest_request req = {
        .method = method,
        .path = c->raw_url ? c->raw_url : url,
        .body = c->body ? c->body : "",
        .body_len = c->len,
        .json_len = json_length(conn),
        .deadline_ns = deadline_for(r),
        .health = r->opts.health,
    };
    tls_starting = c;
    c->pending = tfs__rest_start(r->loader, &req, wake, c, &resp);
    tls_starting = NULL;
    if (!c->pending) {
        c->answered = true;
        return answer(r, conn, method, url, &resp);
    }
    if (c->woken_here) {
        /* Woken on this thread inside the start (an unbatched run, a refused task): answer
         * now, with no lock and no pending count, since no other thread saw the call. */
        c->answered = true;
        tfs__rest_call_finish(c->pending, &resp);
        c->pending = NULL;
        return answer(r, conn, method, url, &resp);
    }
    /* The body is decoded into tensors: drop it now rather than hold it while queued. */
    body_free(c);
    pthread_mutex_lock(&r->mu);
    r->n_pending++;
    if (c->ready) {
        /* The outcome came before we could suspend (an unbatched run, a refused task). */
        pthread_mutex_unlock(&r->mu);
        c->answered = true;
        tfs__rest_call_finish(c->pending, &resp);
        c->pending = NULL;
        pending_finished(r);
        return answer(r, conn, method, url, &resp);
    }
    /* Suspend with mu held, so that the wake (which takes mu) resumes only a suspended
     * connection. */
    c->suspended = true;
    c->next = r->suspended;
    if (c->next)
        c->next->prev = c;
    r->suspended = c;
    MHD_suspend_connection(conn);
    /* Only the first suspended connection wakes the watcher, which sleeps untimed while there
     * are none; with some it already looks every WATCH_MS. Waking it on every suspend cost a
     * context switch and a poll of every suspended socket per request (a noticeable share of a
     * batched server's CPU at 64 clients; bench/README.md). A broadcast, since tfs_rest_stop
     * may wait on the same condition and a signal could wake it instead of the watcher. */
    if (!c->next)
        pthread_cond_broadcast(&r->watch_cv);
    pthread_mutex_unlock(&r->mu);
    return MHD_YES;
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    tfs_rest  *r = cls;
    http_call *c = *con_cls;
    if (!c)
        return;
    if (c->counted)
        atomic_fetch_sub_explicit(&r->in_flight[in_flight_slot_index()].n, 1,
                                  memory_order_relaxed);
    *con_cls = NULL;
    tfs_free(c->raw_url);
    c->raw_url = NULL;
    if (c->pending) {
        /* Only at shutdown can a connection end with its predict still pending. */
        pthread_mutex_lock(&r->mu);
        tls_locked = r;
        if (!c->ready) {
            c->orphaned = true;
            c->gone = true;
            if (c->suspended) {
                c->suspended = false;
                unlink_suspended(r, c);
            }
            tfs__rest_call_cancel(c->pending);
        }
        bool later = !c->ready;   /* its wake frees it */
        tls_locked = NULL;
        pthread_mutex_unlock(&r->mu);
        if (later)
            return;
        drop_pending(c);
    }
    body_free(c);
    tfs_free(c);
}

/* TF Serving routes on the raw path; see the file comment. */
static size_t keep_escapes(void *cls, struct MHD_Connection *conn, char *s)
{
    return strlen(s);
}

/* The first sight of a request: its target as sent. MHD cuts the query off the URL it hands the
 * handler, but TF Serving routes on path and query together (net_http's uri_path is
 * "path?query"), so a model named "m?x=1" is what GET /v1/models/m?x=1 asks for. The call is
 * allocated here (MHD passes the return value to the handler as its context) and keeps a copy of
 * the target only when there is a query. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
    http_call *c = tfs_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->target = uri;
    c->target_len = strlen(uri);
    if (strchr(uri, '?'))
        c->raw_url = tfs_strdup(uri);   /* NULL when out of memory: routed without the query */
    return c;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = 0;
    TFS_LOG_WARN(LOG_MODULE, "libmicrohttpd: %s", line);
}

/* ---- start / stop --------------------------------------------------------------------------- */

static enum tfs_code listen_on(const tfs_rest_opts *o, int *fd_out, int *port_out, tfs_status *st)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    socklen_t          sl = sizeof sa;
    int                one = 1;
    const char        *addr = o->bind_address ? o->bind_address : "0.0.0.0";

    *fd_out = -1;
    if (o->port < 0 || o->port > 65535)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "REST port %d is not in [0, 65535]", o->port);
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "REST bind address '%s' is not an IPv4 address",
                       addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return TFS_ERR(st, TFS_UNAVAILABLE, "could not create the REST socket: %s",
                       strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1024) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        int err = errno;
        close(fd);
        return TFS_ERR(st, TFS_UNAVAILABLE, "could not bind the REST API to %s:%d: %s", addr,
                       o->port, strerror(err));
    }
    *fd_out = fd;
    *port_out = ntohs(sa.sin_port);
    return TFS_OK;
}

/* Reads and checks the HTTPS key and certificate into r (both or neither, as the flags). */
static enum tfs_code read_tls(tfs_rest *r, const tfs_rest_opts *o, tfs_status *st)
{
    bool          cert = o->tls_cert_file && *o->tls_cert_file;
    bool          key = o->tls_key_file && *o->tls_key_file;
    enum tfs_code code;

    if (!cert && !key)
        return TFS_OK;
    if (!cert || !key)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "--rest_api_ssl_cert_file and "
                       "--rest_api_ssl_key_file go together: %s is missing",
                       cert ? "--rest_api_ssl_key_file" : "--rest_api_ssl_cert_file");
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "this libmicrohttpd was built without TLS: REST "
                       "cannot serve HTTPS");
    if ((code = tfs__tls_read_file(o->tls_cert_file, &r->tls_cert, st)) != TFS_OK) {
        tfs_status_prefix(st, "--rest_api_ssl_cert_file");
        return code;
    }
    if ((code = tfs__tls_read_file(o->tls_key_file, &r->tls_key, st)) != TFS_OK) {
        tfs_status_prefix(st, "--rest_api_ssl_key_file");
        return code;
    }
    tfs__tls_pems pems = {.key = r->tls_key, .cert = r->tls_cert,
                          .key_name = o->tls_key_file, .cert_name = o->tls_cert_file};
    return tfs__tls_check(&pems, st);
}

enum tfs_code tfs_rest_start(tfs_loader *l, const tfs_rest_opts *opts, tfs_rest **out,
                             tfs_status *st)
{
    tfs_rest     *r = NULL;
    int           fd = -1;
    enum tfs_code code;

    *out = NULL;
    if (opts->num_threads < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "REST thread count must be >= 1, got %d",
                       opts->num_threads);
    /* MHD splits the connection limit among its pool threads and refuses to start when a thread
     * would get none. */
    if (opts->max_connections < opts->num_threads)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "REST connection limit %d is below the REST "
                       "thread count %d (each thread needs at least one connection)",
                       opts->max_connections, opts->num_threads);
    if (opts->connection_timeout_s < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "REST connection timeout must be >= 0, got %d",
                       opts->connection_timeout_s);
    r = tfs_calloc(1, sizeof *r);
    if (!r)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory starting the REST API");
    r->loader = l;
    r->opts = *opts;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->watch_cv, NULL);
    r->quiesced_fd = -1;
    for (int i = 0; i < IN_FLIGHT_SLOTS; i++)
        atomic_init(&r->in_flight[i].n, 0);
    atomic_init(&r->quiesced, false);
    r->opts.bind_address = NULL;   /* borrowed string; only needed for the bind below */
    r->opts.tls_cert_file = r->opts.tls_key_file = NULL;   /* borrowed too; read just below */
    if ((code = read_tls(r, opts, st)) != TFS_OK ||
        (code = listen_on(opts, &fd, &r->port, st)) != TFS_OK)
        goto fail;

    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    /* HTTPS when the files were given; an empty array leaves the daemon on plain HTTP. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, r->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, r->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    if (r->tls_cert)
        flags |= MHD_USE_TLS;
    else
        tls[0].option = MHD_OPTION_END;
    r->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, r,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, r,   /* first, so that it sees every message */
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)opts->num_threads,
        MHD_OPTION_NOTIFY_COMPLETED, request_completed, r,
        MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, r,
        MHD_OPTION_URI_LOG_CALLBACK, uri_seen, r,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        /* MHD's defaults are no timeout and FD_SETSIZE - 4 connections (even with poll): about
         * a thousand idle connections then shut every new client out for good. */
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)opts->connection_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)opts->max_connections,
        MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    if (!r->daemon) {
        code = TFS_ERR(st, TFS_INTERNAL, "libmicrohttpd could not start the REST API on port %d",
                       r->port);
        goto fail;
    }
    if (pthread_create(&r->watcher, NULL, watch_main, r) != 0) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not start the REST watcher thread");
        MHD_stop_daemon(r->daemon);
        r->daemon = NULL;
        fd = -1;   /* MHD closed it */
        goto fail;
    }
    r->watch_started = true;
    *out = r;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    if (fd >= 0)
        close(fd);
    tfs_free(r->tls_cert);
    tfs_free(r->tls_key);
    tfs_free(r);
    return code;
}

void tfs_rest_quiesce(tfs_rest *r)
{
    if (!r || atomic_exchange(&r->quiesced, true))
        return;
    MHD_socket fd = MHD_quiesce_daemon(r->daemon);
    if (fd == MHD_INVALID_SOCKET) {
        TFS_LOG_WARN(LOG_MODULE, "libmicrohttpd could not stop listening on port %d; new "
                     "connections are accepted until the server stops", r->port);
        return;
    }
    r->quiesced_fd = fd;
    /* Resets the backlog and refuses new connections; the descriptor stays open (see above). */
    shutdown(fd, SHUT_RDWR);
}

int tfs_rest_in_flight(const tfs_rest *r)
{
    if (!r)
        return 0;
    int n = 0;
    for (int i = 0; i < IN_FLIGHT_SLOTS; i++)
        n += atomic_load_explicit(&((tfs_rest *)r)->in_flight[i].n, memory_order_relaxed);
    return n;
}

void tfs_rest_stop(tfs_rest *r)
{
    if (!r)
        return;
    /* MHD must not be stopped with connections suspended: wait for the pending predicts first
     * (their batches run; the batch threads outlive us). New ones are refused meanwhile only by
     * the drain having quiesced the daemon; a client that keeps sending keeps us here no longer
     * than the queue timeouts, since every predict completes. */
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    while (r->n_pending > 0)
        pthread_cond_wait(&r->watch_cv, &r->mu);
    r->watch_stop = true;
    pthread_cond_broadcast(&r->watch_cv);
    pthread_mutex_unlock(&r->mu);
    if (r->watch_started)
        pthread_join(r->watcher, NULL);
    /* MHD closes the listening socket unless it was quiesced; then it is ours to close, after
     * the pool threads are gone. */
    if (r->daemon)
        MHD_stop_daemon(r->daemon);
    if (r->quiesced_fd >= 0)
        close(r->quiesced_fd);
    pthread_cond_destroy(&r->watch_cv);
    pthread_mutex_destroy(&r->mu);
    tfs_free(r->tls_cert);
    tfs_free(r->tls_key);
    tfs_free(r);
}
