/* The access log (--access_log_file, --access_log_sample_rate): one line per sampled API request,
 *
 *     2025-01-02T03:04:05.678901Z rest predict "half_plus_two" 1 "serving_default" OK 200 0.412
 *
 * time the request finished (UTC, microseconds), protocol, method, model, version that answered
 * ("-" when none did), signature (see tfs__request_record), canonical code, HTTP status
 * ("-" for gRPC), latency in milliseconds. Model and signature come from the request, so they are
 * quoted and escaped (\\, \", \n, \t, other control bytes as \xHH) and a line is always one line.
 *
 * Sampling is by a counter, not rand(): request k (from 1) is written when floor(k * rate) >
 * floor((k - 1) * rate), so rate 0.5 writes every second request and N requests write
 * floor(N * rate) lines. Lines are formatted on the calling thread and written with one fwrite
 * under a mutex into a 64 KiB stdio buffer, flushed when a second has passed since the last flush
 * and at close. The log is off by default, so its lock is not on the default hot path.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "server/metrics-impl.h"

static struct {
    pthread_mutex_t  mu;
    FILE            *f;          /* under mu */
    char            *buf;        /* stdio buffer of f */
    int64_t          last_flush_ns;
    double           rate;
    atomic_bool      on;
    _Atomic uint64_t seen;
} a_ = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define BUF_BYTES ((size_t)64 << 10)

enum tfs_code tfs__access_log_open(const char *path, double rate, tfs_status *st)
{
    if (!(rate >= 0 && rate <= 1))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "access log sample rate %g is not in [0, 1]",
                       rate);
    tfs__access_log_close();
    FILE *f = fopen(path, "ae");
    if (!f)
        return TFS_ERR(st, tfs_code_from_errno(errno), "could not open the access log '%s': %s",
                       path, strerror(errno));
    char *buf = tfs_malloc(BUF_BYTES);
    if (buf)
        setvbuf(f, buf, _IOFBF, BUF_BYTES);
    pthread_mutex_lock(&a_.mu);
    a_.f = f;
    a_.buf = buf;
    a_.rate = rate;
    a_.last_flush_ns = tfs__clock_ns();
    atomic_store(&a_.seen, 0);
    atomic_store(&a_.on, true);
    pthread_mutex_unlock(&a_.mu);
    tfs_status_clear(st);
    return TFS_OK;
}

bool tfs__access_log_enabled(void)
{
    /* acquire: a reader that sees the log on also sees the rate set before it. */
    return atomic_load_explicit(&a_.on, memory_order_acquire);
}

void tfs__access_log_close(void)
{
    pthread_mutex_lock(&a_.mu);
    atomic_store(&a_.on, false);
    if (a_.f)
        fclose(a_.f);   /* flushes */
    tfs_free(a_.buf);
    a_.f = NULL;
    a_.buf = NULL;
    pthread_mutex_unlock(&a_.mu);
}

/* Appends s quoted, at most n - *len - 1 bytes in all. */
static void put_quoted(char *out, size_t n, size_t *len, const char *s)
{
    char tmp[4 * TFS__LABEL_MAX + 3];
    size_t k = 0;
    tmp[k++] = '"';
    for (; *s && k < sizeof tmp - 6; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"') {
            tmp[k++] = '\\';
            tmp[k++] = (char)c;
        } else if (c == '\n') {
            tmp[k++] = '\\';
            tmp[k++] = 'n';
        } else if (c == '\t') {
            tmp[k++] = '\\';
            tmp[k++] = 't';
        } else if (c < 0x20 || c == 0x7f) {
            k += (size_t)snprintf(tmp + k, sizeof tmp - k, "\\x%02x", c);
        } else {
            tmp[k++] = (char)c;
        }
    }
    tmp[k++] = '"';
    tmp[k] = 0;
    int w = snprintf(out + *len, n - *len, "%s", tmp);
    if (w > 0)
        *len = *len + (size_t)w < n ? *len + (size_t)w : n - 1;
}

static void put_fmt(char *out, size_t n, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put_fmt(char *out, size_t n, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *len, n - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len = *len + (size_t)w < n ? *len + (size_t)w : n - 1;
}

size_t tfs__access_log_format(const tfs__request_record *r, int64_t unix_ns, char *buf, size_t n)
{
    time_t    secs = (time_t)(unix_ns / 1000000000);
    struct tm tm;
    size_t    len = 0;

    if (n == 0)
        return 0;
    buf[0] = 0;
    gmtime_r(&secs, &tm);
    put_fmt(buf, n, &len, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ %s %s ", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            (int)(unix_ns % 1000000000 / 1000), r->api == TFS_API_GRPC ? "grpc" : "rest",
            tfs__method_name(r->method));
    put_quoted(buf, n, &len, r->model);
    if (r->version >= 0)
        put_fmt(buf, n, &len, " %lld ", (long long)r->version);
    else
        put_fmt(buf, n, &len, " - ");
    put_quoted(buf, n, &len, r->signature);
    put_fmt(buf, n, &len, " %s ", tfs_code_name(r->code));
    if (r->api == TFS_API_GRPC || r->http_status <= 0)
        put_fmt(buf, n, &len, "-");
    else
        put_fmt(buf, n, &len, "%d", r->http_status);
    put_fmt(buf, n, &len, " %.3f\n", r->total_seconds * 1e3);
    return len;
}

void tfs__access_log_write(const tfs__request_record *r)
{
    if (!tfs__access_log_enabled())
        return;
    uint64_t k = atomic_fetch_add_explicit(&a_.seen, 1, memory_order_relaxed) + 1;
    double   rate = a_.rate;
    if (rate < 1 && floor((double)k * rate) == floor((double)(k - 1) * rate))
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char   line[1024];
    size_t len = tfs__access_log_format(r, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, line,
                                        sizeof line);
    if (len && line[len - 1] != '\n')
        line[len - 1] = '\n';   /* cut: still one line */
    int64_t t = tfs__clock_ns();
    pthread_mutex_lock(&a_.mu);
    if (a_.f) {
        fwrite(line, 1, len, a_.f);
        if (t - a_.last_flush_ns > 1000000000) {
            fflush(a_.f);
            a_.last_flush_ns = t;
        }
    }
    pthread_mutex_unlock(&a_.mu);
}
