/* System tests of health probes and the graceful drain: the real tfserve binary on loopback.
 * /healthz and /readyz as a Kubernetes probe sees them (ready with the demo model; 503 naming the
 * model when its base path holds no loadable version; 503 as soon as a drain starts), SIGTERM
 * with a request in flight (held open with "Expect: 100-continue", so it is in flight for sure),
 * a second SIGTERM, the drain timeout, SIGTERM under load over keep-alive and fresh connections,
 * and --log_format=json.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/tfs-models.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

#define PREDICT_PATH "/v1/models/half_plus_two:predict"
#define PREDICT_BODY "{\"instances\": [1.0, 2.0, 5.0]}"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Starts tfserve on the bundled demo model (or `base`), with extra flags (NULL-terminated). */
static void start(tfs_test_server *s, const char *base, const char *const *extra)
{
    char        bflag[4200], demo[4096];
    const char *flags[16] = {"--model_name=half_plus_two", bflag};
    int         n = 2;
    snprintf(demo, sizeof demo, "%s/models/half_plus_two", TFS_BINARY_DIR);
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base ? base : demo);
    for (int i = 0; extra && extra[i] && n < 15; i++)
        flags[n++] = extra[i];
    flags[n] = NULL;
    ck_assert_msg(tfs_test_server_start(s, flags) == 0, "tfserve did not start; see %s",
                  s->log_path);
}

static json_t *parse(const tfs_http_reply *r)
{
    json_error_t err;
    json_t      *j = json_loads(r->body ? r->body : "", 0, &err);
    ck_assert_msg(j != NULL, "not JSON (%s): %s", err.text, r->body ? r->body : "(none)");
    return j;
}

static bool predict_ok(const tfs_http_reply *r)
{
    return r->status == 200 && !r->cut && r->body &&
           strstr(r->body, "2.5") && strstr(r->body, "4.5");
}

static void expect_exit(tfs_test_server *s, int timeout_ms, int code)
{
    int status = 0;
    ck_assert_msg(tfs_test_server_wait(s, timeout_ms, &status) == 0,
                  "tfserve still runs %d ms later; see %s", timeout_ms, s->log_path);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == code,
                  "tfserve exit status %d (raw %d), want %d; see %s",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, status, code, s->log_path);
}

/* Polls until a connection to port is refused (true) or timeout_ms passes (false). */
static bool refused_within(int port, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        int fd = tfs_http_open(port);
        if (fd < 0 && errno == ECONNREFUSED)
            return true;
        if (fd >= 0)
            close(fd);
        sleep_ms(20);
    }
    return false;
}

static bool log_has(const tfs_test_server *s, const char *needle)
{
    char *text = tfs_test_read_file(s->log_path, NULL);
    bool  found = text && strstr(text, needle);
    free(text);
    return found;
}

/* ---- probes --------------------------------------------------------------------------------- */

START_TEST(test_health_probes_ready)
{
    tfs_test_server s;
    const char     *extra[] = {"--log_format=json", NULL};
    start(&s, NULL, extra);

    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/healthz", NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok\n");
    tfs_http_reply_free(&r);

    r = tfs_http(s.rest_port, "GET", "/readyz", NULL);
    ck_assert_msg(r.status == 200, "/readyz %d: %s", r.status, r.body);
    json_t *j = parse(&r), *m = json_array_get(json_object_get(j, "models"), 0);
    ck_assert(json_is_true(json_object_get(j, "ready")));
    ck_assert(json_is_false(json_object_get(j, "draining")));
    ck_assert_str_eq(json_string_value(json_object_get(m, "name")), "half_plus_two");
    ck_assert_str_eq(json_string_value(json_object_get(m, "state")), "AVAILABLE");
    ck_assert_str_eq(json_string_value(json_object_get(m, "version")), "1");
    json_decref(j);
    tfs_http_reply_free(&r);

    /* Only GET/HEAD are probes; TF Serving's routes are unchanged. */
    r = tfs_http(s.rest_port, "POST", "/readyz", "{}");
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    r = tfs_http(s.rest_port, "POST", PREDICT_PATH, PREDICT_BODY);
    ck_assert(predict_ok(&r));
    tfs_http_reply_free(&r);

    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    expect_exit(&s, 10000, 0);

    /* --log_format=json: every line one object with a timestamp, level, module and message,
     * and the drain phases are among them. */
    char *text = tfs_test_read_file(s.log_path, NULL);
    ck_assert_ptr_nonnull(text);
    int lines = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), lines++) {
        json_t *o = json_loads(line, 0, NULL);
        ck_assert_msg(o && json_is_string(json_object_get(o, "ts")) &&
                          json_is_string(json_object_get(o, "level")) &&
                          json_is_string(json_object_get(o, "module")) &&
                          json_is_string(json_object_get(o, "msg")),
                      "log line is not a JSON record: %s", line);
        json_decref(o);
    }
    free(text);
    ck_assert_int_ge(lines, 5);
    ck_assert(log_has(&s, "\"module\":\"drain\",\"msg\":\"stopped accepting connections"));
    ck_assert(log_has(&s, "\"module\":\"main\",\"msg\":\"shutdown complete; exiting with "
                       "status 0"));
}
END_TEST

/* 503 naming the model, with the loader's reason, while /healthz stays 200. */
static void expect_not_ready(const char *base, const char *state, const char *why)
{
    tfs_test_server s;
    start(&s, base, NULL);
    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/healthz", NULL);
    ck_assert_int_eq(r.status, 200);
    tfs_http_reply_free(&r);

    r = tfs_http(s.rest_port, "GET", "/readyz", NULL);
    ck_assert_msg(r.status == 503, "/readyz %d: %s", r.status, r.body);
    json_t *j = parse(&r), *m = json_array_get(json_object_get(j, "models"), 0);
    ck_assert(json_is_false(json_object_get(j, "ready")));
    ck_assert_str_eq(json_string_value(json_object_get(m, "name")), "half_plus_two");
    ck_assert_str_eq(json_string_value(json_object_get(m, "state")), state);
    const char *err = json_string_value(json_object_get(m, "error"));
    ck_assert_msg(err && strstr(err, why), "error '%s' lacks '%s'", err ? err : "(none)", why);
    json_decref(j);
    tfs_http_reply_free(&r);
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    expect_exit(&s, 10000, 0);
}

START_TEST(test_health_not_ready)
{
    char *base = tfs_test_mkdtemp(), path[4200];
    ck_assert_ptr_nonnull(base);
    expect_not_ready(base, "NO_VERSION", "Could not find any versions of model half_plus_two");

    /* A version folder whose saved_model.pb is not a SavedModel: the load fails (END). */
    snprintf(path, sizeof path, "%s/1", base);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/1/saved_model.pb", base);
    ck_assert_int_eq(tfs_test_write_file(path, "\xff\xff\xff garbage", 12), 0);
    expect_not_ready(base, "END", "");
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

/* Polls /readyz until it answers `want` (up to timeout_ms); returns the last status. */
static int readyz_until(int port, int want, int timeout_ms)
{
    int status = -1;
    for (double end = now_s() + timeout_ms / 1000.0; now_s() < end; sleep_ms(100)) {
        tfs_http_reply r = tfs_http(port, "GET", "/readyz", NULL);
        status = r.status;
        tfs_http_reply_free(&r);
        if (status == want)
            break;
    }
    return status;
}

/* Readiness follows the lifecycle: 503 while the base path has no version, 200 once a version
 * folder appears and loads (within two polls), 503 again when it is removed and unloaded. */
START_TEST(test_health_ready_follows_versions)
{
    char *base = tfs_test_mkdtemp(), path[4200];
    ck_assert_ptr_nonnull(base);
    const char *extra[] = {"--file_system_poll_wait_seconds=1", NULL};
    tfs_test_server s;
    start(&s, base, extra);
    ck_assert_int_eq(readyz_until(s.rest_port, 503, 1000), 503);
    tfs_test_write_version(base, 1);
    double t0 = now_s();
    ck_assert_int_eq(readyz_until(s.rest_port, 200, 6000), 200);
    ck_assert_msg(now_s() - t0 < 4.0, "ready %.1f s after the version appeared", now_s() - t0);
    snprintf(path, sizeof path, "%s/1", base);
    tfs_test_rmtree(path);
    ck_assert_int_eq(readyz_until(s.rest_port, 503, 6000), 503);
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    expect_exit(&s, 10000, 0);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

/* ---- drain ---------------------------------------------------------------------------------- */

/* With --drain_delay_seconds: not ready at once, still serving and accepting during the delay,
 * refusing after it, exit 0. */
START_TEST(test_health_drain_delay)
{
    tfs_test_server s;
    const char     *extra[] = {"--drain_delay_seconds=2", NULL};
    start(&s, NULL, extra);
    double t0 = now_s();
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);

    tfs_http_reply r = {.status = -1};
    for (int i = 0; i < 50 && r.status != 503; i++) {
        tfs_http_reply_free(&r);
        r = tfs_http(s.rest_port, "GET", "/readyz", NULL);
        if (r.status != 503)
            sleep_ms(10);
    }
    ck_assert_msg(r.status == 503, "/readyz %d during the drain: %s", r.status, r.body);
    ck_assert_msg(now_s() - t0 < 1.0, "readiness turned 503 only after %.2fs", now_s() - t0);
    json_t *j = parse(&r);
    ck_assert(json_is_true(json_object_get(j, "draining")));
    ck_assert_msg(strstr(json_string_value(json_object_get(j, "reason")), "draining"), "%s",
                  r.body);
    json_decref(j);
    tfs_http_reply_free(&r);

    r = tfs_http(s.rest_port, "GET", "/healthz", NULL);
    ck_assert_int_eq(r.status, 200);
    tfs_http_reply_free(&r);
    r = tfs_http(s.rest_port, "POST", PREDICT_PATH, PREDICT_BODY);
    ck_assert_msg(predict_ok(&r), "predict during the delay: %d %s", r.status, r.body);
    tfs_http_reply_free(&r);
    ck_assert_msg(now_s() - t0 < 1.8, "the delay checks ran too late to mean anything");

    ck_assert(refused_within(s.rest_port, 5000));
    ck_assert_msg(now_s() - t0 >= 1.9, "connections refused after %.2fs, before the delay",
                  now_s() - t0);
    expect_exit(&s, 5000, 0);
    ck_assert(log_has(&s, "(--drain_delay_seconds)"));
}
END_TEST

/* Sends the headers of a predict with "Expect: 100-continue" and waits for "100 Continue": the
 * server has taken the request (it is in flight) and waits for the body. Returns the socket. */
static int hold_request(int port)
{
    int fd = tfs_http_open(port);
    ck_assert_int_ge(fd, 0);
    char head[512];
    int  n = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nExpect: 100-continue\r\n\r\n",
                      PREDICT_PATH, strlen(PREDICT_BODY));
    ck_assert_int_eq(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    tfs_http_reply r = tfs_http_read_reply(fd);
    ck_assert_msg(r.status == 100, "wanted 100 Continue, got %d", r.status);
    tfs_http_reply_free(&r);
    return fd;
}

/* SIGTERM with a request in flight: the listener closes at once, the request still gets its
 * whole 200 answer (with Connection: close), then the server exits 0. */
START_TEST(test_health_drain_in_flight)
{
    tfs_test_server s;
    start(&s, NULL, NULL);
    int fd = hold_request(s.rest_port);
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    ck_assert_msg(refused_within(s.rest_port, 3000), "new connections still accepted");
    int status;
    ck_assert_msg(tfs_test_server_wait(&s, 300, &status) != 0,
                  "tfserve exited with a request in flight");

    size_t blen = strlen(PREDICT_BODY);
    ck_assert_int_eq(send(fd, PREDICT_BODY, blen, MSG_NOSIGNAL), (ssize_t)blen);
    tfs_http_reply r = tfs_http_read_reply(fd);
    ck_assert_msg(predict_ok(&r), "in-flight request: %d cut=%d %s", r.status, r.cut, r.body);
    ck_assert_msg(strstr(r.headers, "Connection: close") || strstr(r.headers, "connection: close"),
                  "no Connection: close while draining: %s", r.headers);
    tfs_http_reply_free(&r);
    close(fd);
    expect_exit(&s, 5000, 0);
    ck_assert(log_has(&s, "for 1 REST and 0 gRPC requests in flight"));
}
END_TEST

START_TEST(test_health_second_signal)
{
    tfs_test_server s;
    start(&s, NULL, NULL);
    int fd = hold_request(s.rest_port);
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    int status;
    ck_assert_msg(tfs_test_server_wait(&s, 300, &status) != 0, "exited with a request in flight");
    double t0 = now_s();
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    expect_exit(&s, 2000, 128 + SIGTERM);
    ck_assert_msg(now_s() - t0 < 1.0, "second SIGTERM took %.2fs", now_s() - t0);
    close(fd);
    ck_assert(log_has(&s, "received SIGTERM during the drain; exiting at once with status 143"));
}
END_TEST

START_TEST(test_health_drain_timeout)
{
    tfs_test_server s;
    const char     *extra[] = {"--drain_timeout_seconds=1", NULL};
    start(&s, NULL, extra);
    int fd = hold_request(s.rest_port);
    double t0 = now_s();
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    expect_exit(&s, 5000, 1);
    double dt = now_s() - t0;
    ck_assert_msg(dt >= 0.9 && dt < 3.0, "exit %.2fs after SIGTERM, want about 1s", dt);
    close(fd);
    ck_assert(log_has(&s, "timed out after 1s with 1 REST and 0 gRPC requests still in flight"));
}
END_TEST

/* ---- SIGTERM under load --------------------------------------------------------------------- */

typedef struct load {
    int         port;
    bool        keep_alive;
    atomic_bool *stop;
    int         ok, bad, cut, no_reply, refused;
    char        first_bad[256];
} load;

static void load_record(load *l, tfs_http_reply *r)
{
    if (predict_ok(r)) {
        l->ok++;
    } else if (r->cut) {
        l->cut++;
    } else if (r->status < 0) {
        l->no_reply++;   /* closed before any byte of a response: the request was not taken */
    } else {
        if (!l->bad++)
            snprintf(l->first_bad, sizeof l->first_bad, "%d %s", r->status,
                     r->body ? r->body : "");
    }
    tfs_http_reply_free(r);
}

static void *load_main(void *arg)
{
    load *l = arg;
    int   fd = -1;
    while (!atomic_load(l->stop)) {
        if (fd < 0 && (fd = tfs_http_open(l->port)) < 0) {
            l->refused++;
            sleep_ms(5);
            continue;
        }
        tfs_http_reply r = tfs_http_send(fd, "POST", PREDICT_PATH, PREDICT_BODY, NULL);
        bool closing = !l->keep_alive || r.status < 0 || r.cut ||
                       (r.headers && strcasestr(r.headers, "Connection: close"));
        load_record(l, &r);
        if (closing) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

START_TEST(test_health_sigterm_under_load)
{
    enum { N = 4 };
    tfs_test_server s;
    const char     *extra[] = {"--rest_api_num_threads=4", "--drain_timeout_seconds=10", NULL};
    start(&s, NULL, extra);
    atomic_bool stop;
    atomic_init(&stop, false);
    load      loads[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        loads[i] = (load){.port = s.rest_port, .keep_alive = i % 2 == 0, .stop = &stop};
        ck_assert_int_eq(pthread_create(&th[i], NULL, load_main, &loads[i]), 0);
    }
    /* Load until some requests were answered (a fixed wait can see too few under sanitizers on a
     * busy machine), then signal. The reads race with the clients: good enough to wait on. */
    int before = 0;
    for (double end = now_s() + 10; now_s() < end && before <= 40; sleep_ms(50)) {
        before = 0;
        for (int i = 0; i < N; i++)
            before += loads[i].ok;
    }
    double t0 = now_s();
    ck_assert_int_eq(tfs_test_server_signal(&s, SIGTERM), 0);
    int status = 0, exited = tfs_test_server_wait(&s, 10000, &status);
    double dt = now_s() - t0;
    sleep_ms(100);   /* let the clients see the refusals */
    atomic_store(&stop, true);
    int ok = 0, bad = 0, cut = 0, no_reply = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += loads[i].ok;
        bad += loads[i].bad;
        cut += loads[i].cut;
        no_reply += loads[i].no_reply;
        refused += loads[i].refused;
        ck_assert_msg(loads[i].bad == 0, "client %d got a non-200: %s", i, loads[i].first_bad);
    }
    printf("SIGTERM under load: %d answered 200 (about %d before the signal), %d cut, %d without a "
           "reply, %d connects refused; exit %.3fs after SIGTERM\n",
           ok, before, cut, no_reply, refused, dt);
    ck_assert_msg(exited == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "tfserve did not exit 0 within the drain timeout (status %d); see %s", status,
                  s.log_path);
    ck_assert_int_eq(bad, 0);
    ck_assert_msg(cut == 0, "%d responses were cut off mid-way", cut);
    ck_assert_int_gt(ok, 20);
    ck_assert_msg(refused > 0, "no client saw a refused connection after the drain");
    int fd = tfs_http_open(s.rest_port);
    ck_assert_msg(fd < 0 && errno == ECONNREFUSED, "the REST port still accepts after exit");
}
END_TEST

Suite *suite_server_health(void);
Suite *suite_server_health(void)
{
    Suite *s = suite_create("server_health");
    TCase *tc = tcase_create("system");
    tcase_set_timeout(tc, 60);
    tcase_set_tags(tc, "system");
    tcase_add_test(tc, test_health_probes_ready);
    tcase_add_test(tc, test_health_not_ready);
    tcase_add_test(tc, test_health_ready_follows_versions);
    tcase_add_test(tc, test_health_drain_delay);
    tcase_add_test(tc, test_health_drain_in_flight);
    tcase_add_test(tc, test_health_second_signal);
    tcase_add_test(tc, test_health_drain_timeout);
    tcase_add_test(tc, test_health_sigterm_under_load);
    suite_add_tcase(s, tc);
    return s;
}
