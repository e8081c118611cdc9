/* See tfs-proc.h. */
#include "tests/support/tfs-proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tfs_test_free_port(void)
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
