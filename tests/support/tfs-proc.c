/* See tfs-proc.h. */
#include "tests/support/tfs-proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A port the kernel just gave out for a bind to port 0. */
static int kernel_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

int tfs_test_free_port(void)
{
    /* The kernel may hand out the same ephemeral port to two binds in a row once the first
     * socket is closed: a server's REST and gRPC ports then collide (tfserve refuses to export
     * REST on its gRPC port, and a readiness probe of the "REST" port reaches gRPC). So no port
     * is returned again among the last RECENT. Not thread-safe; the tests pick ports from
     * one thread. */
    enum { RECENT = 64 };
    static int recent[RECENT], n_recent;
    int port = -1;
    for (int tries = 0; tries < 50; tries++) {
        port = kernel_port();
        bool seen = false;
        for (int i = 0; i < RECENT && i < n_recent; i++)
            seen = seen || recent[i] == port;
        if (port > 0 && !seen)
            break;
    }
    if (port > 0)
        recent[n_recent++ % RECENT] = port;
    return port;
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int tfs_test_server_start(tfs_test_server *s, const char *const *flags)
{
    memset(s, 0, sizeof *s);
    s->rest_port = tfs_test_free_port();
    s->grpc_port = tfs_test_free_port();
    snprintf(s->log_path, sizeof s->log_path, "/tmp/tfserve-test-%d-%d.log", (int)getpid(),
             s->rest_port);
    char bin[4096], rest[64], grpc[64];
    snprintf(bin, sizeof bin, "%s/server/tfserve", TFS_BINARY_DIR);
    snprintf(rest, sizeof rest, "--rest_api_port=%d", s->rest_port);
    snprintf(grpc, sizeof grpc, "--port=%d", s->grpc_port);
    const char *argv[32] = {bin, grpc, rest};
    int n = 3;
    for (int i = 0; flags && flags[i] && n < 31; i++)
        argv[n++] = flags[i];
    argv[n] = NULL;
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        FILE *log = fopen(s->log_path, "w");
        if (log) {
            dup2(fileno(log), 1);
            dup2(fileno(log), 2);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "tfserve exited early (status %d); log %s\n", status, s->log_path);
            s->pid = 0;
            return -1;
        }
        int fd = connect_port(s->rest_port);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        sleep_ms(100);
    }
    tfs_test_server_stop(s);
    return -1;
}

int tfs_test_server_stop(tfs_test_server *s)
{
    int status = -1;
    if (s->pid <= 0)
        return status;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return status;
        }
        sleep_ms(50);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return status;
}

int tfs_test_server_signal(const tfs_test_server *s, int sig)
{
    return s->pid > 0 ? kill(s->pid, sig) : -1;
}

int tfs_test_server_wait(tfs_test_server *s, int timeout_ms, int *status)
{
    for (int waited = 0; s->pid > 0; waited += 10) {
        if (waitpid(s->pid, status, WNOHANG) == s->pid) {
            s->pid = 0;
            return 0;
        }
        if (waited >= timeout_ms)
            return -1;
        sleep_ms(10);
    }
    return -1;
}

int tfs_http_open(int port)
{
    return connect_port(port);
}

/* Reads until want bytes are buffered or EOF; false on EOF/error first. */
static int read_more(int fd, char **buf, size_t *n, size_t *cap, size_t want)
{
    while (*n < want) {
        if (want + 1 > *cap) {
            size_t nc = want + 1 > *cap * 2 ? want + 1 : *cap * 2;
            char  *nb = realloc(*buf, nc);
            if (!nb)
                return 0;
            *buf = nb;
            *cap = nc;
        }
        ssize_t got = read(fd, *buf + *n, *cap - 1 - *n);
        if (got <= 0)
            return 0;
        *n += (size_t)got;
    }
    return 1;
}

tfs_http_reply tfs_http_read_reply(int fd)
{
    tfs_http_reply r = {.status = -1};
    size_t cap = 4096, n = 0, head = 0;
    char  *buf = malloc(cap);
    char  *sep = NULL;
    if (!buf)
        return r;
    while (!sep) {
        if (!read_more(fd, &buf, &n, &cap, n + 1)) {
            r.cut = n > 0;   /* something arrived, but not a whole header block */
            free(buf);
            return r;
        }
        buf[n] = 0;
        sep = strstr(buf, "\r\n\r\n");
    }
    head = (size_t)(sep - buf) + 4;
    if (sscanf(buf, "HTTP/1.%*d %d", &r.status) != 1) {
        r.status = -1;
        r.cut = 1;
        free(buf);
        return r;
    }
    *sep = 0;
    r.headers = strdup(buf);
    long long len = -1;
    for (char *line = strstr(r.headers, "\r\n"); line; line = strstr(line + 2, "\r\n"))
        if (strncasecmp(line + 2, "Content-Length:", 15) == 0)
            len = atoll(line + 17);
    if (r.status >= 100 && r.status < 200)
        len = 0;
    int whole;
    if (len >= 0) {
        whole = read_more(fd, &buf, &n, &cap, head + (size_t)len);
        if (whole)
            n = head + (size_t)len;
    } else {
        while (read_more(fd, &buf, &n, &cap, n + 1)) {
        }
        whole = 1;
    }
    r.cut = !whole;
    buf[n] = 0;
    r.body = strdup(buf + head);
    r.body_len = n - head;
    free(buf);
    return r;
}

tfs_http_reply tfs_http_send(int fd, const char *method, const char *path, const char *body,
                             const char *extra_headers)
{
    tfs_http_reply r = {.status = -1};
    size_t blen = body ? strlen(body) : 0;
    char head[8192];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n%s\r\n", method, path, blen,
                      extra_headers ? extra_headers : "");
    /* MSG_NOSIGNAL: a server that closed the connection is a result, not a SIGPIPE. */
    if (send(fd, head, (size_t)hn, MSG_NOSIGNAL) != hn ||
        (blen && send(fd, body, blen, MSG_NOSIGNAL) != (ssize_t)blen))
        return r;
    return tfs_http_read_reply(fd);
}

tfs_http_reply tfs_http(int port, const char *method, const char *path, const char *body)
{
    tfs_http_reply r = {.status = -1};
    int fd = connect_port(port);
    if (fd < 0)
        return r;
    size_t blen = body ? strlen(body) : 0;
    char head[8192];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      method, path, blen);
    if (write(fd, head, (size_t)hn) != hn || (blen && write(fd, body, blen) != (ssize_t)blen)) {
        close(fd);
        return r;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    ssize_t got;
    while (buf && (got = read(fd, buf + n, cap - n)) > 0) {
        n += (size_t)got;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (!buf)
        return r;
    buf[n] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep || sscanf(buf, "HTTP/1.%*d %d", &r.status) != 1) {
        free(buf);
        r.status = -1;
        return r;
    }
    *sep = 0;
    r.headers = strdup(buf);
    r.body = strdup(sep + 4);
    r.body_len = strlen(r.body);
    free(buf);
    return r;
}

void tfs_http_reply_free(tfs_http_reply *r)
{
    free(r->body);
    free(r->headers);
    r->body = r->headers = NULL;
}
