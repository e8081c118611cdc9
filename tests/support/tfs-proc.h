/* System-test helpers: start the real tfserve binary on free loopback ports, talk HTTP/1.1 to it
 * with a small blocking client, and stop it. */
#ifndef TFS_TESTS_SUPPORT_TFS_PROC_H
#define TFS_TESTS_SUPPORT_TFS_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct tfs_test_server {
    pid_t pid;
    int   rest_port;
    int   grpc_port;
    char  log_path[256];
} tfs_test_server;

/* A TCP port on 127.0.0.1 that was free a moment ago, and not among the last 64 returned. */
int tfs_test_free_port(void);

/* Starts <build>/server/tfserve with the given extra flags (NULL-terminated) plus --port and
 * --rest_api_port on free ports; waits (up to 30 s) until the REST port accepts connections.
 * Output goes to a log file. Returns 0 on success. */
int tfs_test_server_start(tfs_test_server *s, const char *const *flags);
/* SIGTERM, then wait (SIGKILL after 10 s). Returns the exit status as waitpid reports it. */
int tfs_test_server_stop(tfs_test_server *s);
/* Sends sig to the server and returns at once (0, or -1 when there is no server). */
int tfs_test_server_signal(const tfs_test_server *s, int sig);
/* Waits up to timeout_ms for the server to exit: 0 with *status (as waitpid reports it) and
 * s->pid cleared when it did, -1 when it still runs. */
int tfs_test_server_wait(tfs_test_server *s, int timeout_ms, int *status);

typedef struct tfs_http_reply {
    int    status;         /* HTTP status, or -1 when the request failed */
    char  *body;           /* malloc'ed, NUL-terminated */
    size_t body_len;
    char  *headers;        /* malloc'ed raw header block */
    int    cut;            /* a response began but ended before its Content-Length (or headers) */
} tfs_http_reply;

/* One request on a fresh connection (Connection: close). body may be NULL. */
tfs_http_reply tfs_http(int port, const char *method, const char *path, const char *body);
void tfs_http_reply_free(tfs_http_reply *r);

/* Keep-alive use: a connected socket to 127.0.0.1:port, or -1 with errno (ECONNREFUSED when
 * nothing listens). */
int tfs_http_open(int port);
/* Sends one request on fd (no Connection header: HTTP/1.1 keep-alive) and reads its response.
 * extra_headers ("Name: value\r\n"...) may be NULL. status -1: no response at all. */
tfs_http_reply tfs_http_send(int fd, const char *method, const char *path, const char *body,
                             const char *extra_headers);
/* Reads one response from fd, its body by Content-Length (1xx: none; no length: to EOF). */
tfs_http_reply tfs_http_read_reply(int fd);

#endif
