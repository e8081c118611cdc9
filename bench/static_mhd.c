/* static_mhd: the REST baseline for bench/rest_predict.sh. A minimal libmicrohttpd server that
 * answers every request with the static body {"predictions": [2.5, 3.0, 4.5]}, in the same MHD
 * mode tfserve uses (internal epoll, thread pool of 2, suspend/resume allowed), so the ratio
 * tfserve/static_mhd isolates what tfserve spends on routing, JSON and the model.
 * It reads the POST body (and drops it) like a real handler would; it does not parse it.
 * Usage: static_mhd PORT   (binds 127.0.0.1 only; stops on SIGINT/SIGTERM). Not a test. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] = "{\"predictions\": [2.5, 3.0, 4.5]}";

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* A non-NULL *con_cls marks "headers seen"; any non-NULL pointer will do, nothing is allocated. */
static int marker;

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    if (!*con_cls) {
        *con_cls = &marker; /* headers only: ask for the body */
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* body chunk: consumed and dropped */
        return MHD_YES;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result r = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return r;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long port = argc == 2 ? strtol(argv[1], &end, 10) : -1;
    if (argc != 2 || !end || *end || port < 1 || port > 65535) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family      = AF_INET;
    addr.sin_port        = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, (uint16_t)port, NULL, NULL,
        handler, NULL, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)2, MHD_OPTION_SOCK_ADDR,
        (const struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1024,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "static_mhd: cannot listen on 127.0.0.1:%ld\n", port);
        return 1;
    }
    fprintf(stderr, "static_mhd: listening on 127.0.0.1:%ld\n", port);
    while (!stop_requested)
        pause();
    MHD_stop_daemon(d);
    return 0;
}
