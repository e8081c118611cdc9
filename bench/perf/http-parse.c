/* Incremental HTTP/1.1 response parser for the REST driver. Bytes arrive in whatever pieces the
 * socket hands over, so every state can stop mid-way and resume: header and chunk-size lines are
 * collected in a fixed line buffer (a longer line is an error, not an allocation), bodies are
 * counted down (Content-Length, chunked, or until the connection closes) and only copied when the
 * caller wants the body (the first response, for --check). One response per reset; feed() stops
 * at its end so that pipelined bytes after it stay with the caller. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/perf/perf.h"
#include "runtime/alloc.h"

#define BODY_KEEP_MAX (64u << 20) /* a kept body larger than this is cut (only --check reads it) */

void tfs_perf_http_reset(tfs_perf_http *h, bool keep_body)
{
    h->state          = TFS_PERF_HTTP_STATUS;
    h->status         = 0;
    h->chunked        = false;
    h->close          = false;
    h->keep_body      = keep_body;
    h->content_length = -1;
    h->remaining      = 0;
    h->line_len       = 0;
    h->body_len       = 0;
    h->server_queue_us   = -1;
    h->server_compute_us = -1;
    if (h->body)
        h->body[0] = 0;
}

void tfs_perf_http_deinit(tfs_perf_http *h)
{
    if (!h)
        return;
    tfs_free(h->body);
    h->body = NULL;
    h->body_cap = h->body_len = 0;
}

static void keep(tfs_perf_http *h, const char *p, size_t n)
{
    if (!h->keep_body || h->body_len + n > BODY_KEEP_MAX)
        return;
    if (h->body_len + n + 1 > h->body_cap) {
        size_t cap = h->body_cap ? h->body_cap : 1024;
        while (cap < h->body_len + n + 1)
            cap *= 2;
        char *b = tfs_realloc(h->body, cap);
        if (!b)
            return; /* out of memory only loses the copy for --check, which then fails */
        h->body     = b;
        h->body_cap = cap;
    }
    memcpy(h->body + h->body_len, p, n);
    h->body_len += n;
    h->body[h->body_len] = 0;
}

static bool header_is(const char *line, size_t n, const char *name, const char **value)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1;
    while (v < line + n && (*v == ' ' || *v == '\t'))
        v++;
    *value = v;
    return true;
}

static bool contains_token(const char *v, size_t n, const char *tok)
{
    size_t k = strlen(tok);
    for (size_t i = 0; i + k <= n; i++)
        if (!strncasecmp(v + i, tok, k))
            return true;
    return false;
}

static void end_of_headers(tfs_perf_http *h)
{
    if (h->status >= 100 && h->status < 200) { /* 100 Continue and friends: the real one follows */
        h->state = TFS_PERF_HTTP_STATUS;
        h->chunked = false;
        h->content_length = -1;
        return;
    }
    if (h->status == 204 || h->status == 304)
        h->state = TFS_PERF_HTTP_DONE;
    else if (h->chunked)
        h->state = TFS_PERF_HTTP_CHUNK_SIZE;
    else if (h->content_length > 0) {
        h->remaining = (uint64_t)h->content_length;
        h->state     = TFS_PERF_HTTP_BODY;
    } else if (h->content_length == 0)
        h->state = TFS_PERF_HTTP_DONE;
    else
        h->state = TFS_PERF_HTTP_UNTIL_CLOSE;
}

int64_t tfs_perf_micros_value(const char *v, size_t n)
{
    int64_t x = 0;
    if (n == 0 || n > 15)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return -1;
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

/* A timing header's value: its digits, trailing blanks dropped. */
static int64_t micros_value(const char *v, const char *end)
{
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return tfs_perf_micros_value(v, (size_t)(end - v));
}

/* One complete line without its CR LF. */
static void on_line(tfs_perf_http *h, const char *l, size_t n)
{
    const char *v;
    switch (h->state) {
    case TFS_PERF_HTTP_STATUS:
        /* "HTTP/1.1 200 OK" */
        if (n < 12 || strncmp(l, "HTTP/1.", 7) != 0 || l[8] != ' ' || !isdigit((unsigned char)l[9]) ||
            !isdigit((unsigned char)l[10]) || !isdigit((unsigned char)l[11]) || (n > 12 && l[12] != ' ')) {
            h->state = TFS_PERF_HTTP_ERROR;
            return;
        }
        h->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
        h->close  = l[7] == '0';
        h->state  = TFS_PERF_HTTP_HEADERS;
        return;
    case TFS_PERF_HTTP_HEADERS:
        if (n == 0) {
            end_of_headers(h);
        } else if (header_is(l, n, "content-length", &v)) {
            int64_t len = 0;
            const char *e = l + n;
            if (v == e)
                h->state = TFS_PERF_HTTP_ERROR;
            for (; v < e && h->state != TFS_PERF_HTTP_ERROR; v++) {
                if (!isdigit((unsigned char)*v) || len > ((int64_t)1 << 50))
                    h->state = TFS_PERF_HTTP_ERROR;
                len = len * 10 + (*v - '0');
            }
            if (h->content_length >= 0 && h->content_length != len)
                h->state = TFS_PERF_HTTP_ERROR; /* two different lengths */
            h->content_length = len;
        } else if (header_is(l, n, "transfer-encoding", &v)) {
            h->chunked = contains_token(v, (size_t)(l + n - v), "chunked");
        } else if (header_is(l, n, "connection", &v)) {
            if (contains_token(v, (size_t)(l + n - v), "close"))
                h->close = true;
        } else if (header_is(l, n, "x-tfserve-queue-micros", &v)) {
            h->server_queue_us = micros_value(v, l + n);
        } else if (header_is(l, n, "x-tfserve-compute-micros", &v)) {
            h->server_compute_us = micros_value(v, l + n);
        }
        return;
    case TFS_PERF_HTTP_CHUNK_SIZE: {
        uint64_t size = 0;
        size_t   i    = 0;
        for (; i < n && isxdigit((unsigned char)l[i]); i++) {
            if (size > ((uint64_t)1 << 40)) {
                h->state = TFS_PERF_HTTP_ERROR;
                return;
            }
            int c = tolower((unsigned char)l[i]);
            size  = size * 16 + (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        if (i == 0 || (i < n && l[i] != ';' && l[i] != ' ')) {
            h->state = TFS_PERF_HTTP_ERROR;
            return;
        }
        h->remaining = size;
        h->state     = size ? TFS_PERF_HTTP_CHUNK_DATA : TFS_PERF_HTTP_TRAILERS;
        return;
    }
    case TFS_PERF_HTTP_CHUNK_CRLF:
        h->state = n == 0 ? TFS_PERF_HTTP_CHUNK_SIZE : TFS_PERF_HTTP_ERROR;
        return;
    case TFS_PERF_HTTP_TRAILERS:
        if (n == 0)
            h->state = TFS_PERF_HTTP_DONE;
        return;
    default:
        h->state = TFS_PERF_HTTP_ERROR;
        return;
    }
}

static bool line_state(enum tfs_perf_http_state s)
{
    return s == TFS_PERF_HTTP_STATUS || s == TFS_PERF_HTTP_HEADERS || s == TFS_PERF_HTTP_CHUNK_SIZE ||
           s == TFS_PERF_HTTP_CHUNK_CRLF || s == TFS_PERF_HTTP_TRAILERS;
}

size_t tfs_perf_http_feed(tfs_perf_http *h, const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && h->state != TFS_PERF_HTTP_DONE && h->state != TFS_PERF_HTTP_ERROR) {
        if (line_state(h->state)) {
            const char *nl = memchr(buf + i, '\n', len - i);
            size_t take = nl ? (size_t)(nl - (buf + i)) : len - i;
            if (h->line_len + take >= TFS_PERF_HTTP_LINE_MAX) {
                h->state = TFS_PERF_HTTP_ERROR;
                break;
            }
            if (!nl) { /* the line continues in the next read */
                memcpy(h->line + h->line_len, buf + i, take);
                h->line_len += take;
                i = len;
                break;
            }
            const char *l = buf + i;
            size_t n = take;
            if (h->line_len) {
                memcpy(h->line + h->line_len, buf + i, take);
                l = h->line;
                n = h->line_len + take;
            }
            if (n && l[n - 1] == '\r')
                n--;
            i += take + 1;
            h->line_len = 0;
            on_line(h, l, n);
        } else if (h->state == TFS_PERF_HTTP_UNTIL_CLOSE) {
            keep(h, buf + i, len - i);
            i = len;
        } else { /* BODY or CHUNK_DATA */
            size_t take = len - i < h->remaining ? len - i : (size_t)h->remaining;
            keep(h, buf + i, take);
            i += take;
            h->remaining -= take;
            if (!h->remaining)
                h->state = h->state == TFS_PERF_HTTP_BODY ? TFS_PERF_HTTP_DONE : TFS_PERF_HTTP_CHUNK_CRLF;
        }
    }
    return i;
}

void tfs_perf_http_eof(tfs_perf_http *h)
{
    if (h->state == TFS_PERF_HTTP_UNTIL_CLOSE) {
        h->state = TFS_PERF_HTTP_DONE;
        h->close = true;
    } else if (h->state != TFS_PERF_HTTP_DONE) {
        h->state = TFS_PERF_HTTP_ERROR;
    }
}
