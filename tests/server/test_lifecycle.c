/* System tests of the model lifecycle through the real tfserve binary: the lifecycle flags, a new
 * version copied in (written under a temporary name, then renamed, as users deploy) answering REST
 * predictions within two polls, a removed version reported as TF Serving reports it,
 * --max_model_memory_bytes refusing a version with a clear status, and versions added and removed
 * 20 times while three clients predict nonstop without a single failure (and /readyz never leaves
 * 200). Version V of the test model computes 0.5 x + V, so each answer names the version that
 * served it. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "tests/support/tfs-models.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

START_TEST(test_lifecycle_flags)
{
    char *a1[] = {"tfserve"};
    tfs_server_flags f;
    tfs_status st;
    ck_assert_int_eq(tfs_server_flags_parse(1, a1, &f, &st), TFS_OK);
    ck_assert_int_eq(f.file_system_poll_wait_seconds, 1);
    ck_assert(!f.allow_version_labels_for_unavailable_models);
    ck_assert_int_eq(f.max_model_memory_bytes, 0);
    tfs_server_flags_deinit(&f);
    char *a2[] = {"tfserve", "--file_system_poll_wait_seconds=0",
                  "--allow_version_labels_for_unavailable_models", "--max_model_memory_bytes=1000"};
    ck_assert_int_eq(tfs_server_flags_parse(4, a2, &f, &st), TFS_OK);
    ck_assert_int_eq(f.file_system_poll_wait_seconds, 0);
    ck_assert(f.allow_version_labels_for_unavailable_models);
    ck_assert_int_eq(f.max_model_memory_bytes, 1000);
    ck_assert_int_eq(f.n_unknown, 0);
    tfs_server_flags_deinit(&f);
    char *a3[] = {"tfserve", "--file_system_poll_wait_seconds=0.5"};
    ck_assert_int_eq(tfs_server_flags_parse(2, a3, &f, &st), TFS_INVALID_ARGUMENT);
    tfs_server_flags_deinit(&f);
}
END_TEST

/* The version that answered POST :predict for x = 2 (y = 1 + V), or -1 with the status. */
static int64_t predict_version(int port, int *status)
{
    tfs_http_reply r = tfs_http(port, "POST", "/v1/models/m:predict", "{\"instances\": [2.0]}");
    *status = r.status;
    int64_t v = -1;
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *y = json_array_get(json_object_get(j, "predictions"), 0);
    if (json_is_number(y)) {
        double got = json_number_value(y) - 1.0;
        v = fabs(got - round(got)) < 1e-6 ? (int64_t)round(got) : -2;
    }
    json_decref(j);
    tfs_http_reply_free(&r);
    return v;
}

/* "2:AVAILABLE:OK 1:END:OK" from GET /v1/models/m. Static buffer. */
static const char *status_text(int port)
{
    static char buf[1024];
    buf[0] = 0;
    tfs_http_reply r = tfs_http(port, "GET", "/v1/models/m", NULL);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *list = json_object_get(j, "model_version_status");
    size_t used = 0;
    for (size_t i = 0; i < json_array_size(list) && used < sizeof buf; i++) {
        json_t *v = json_array_get(list, i);
        used += (size_t)snprintf(
            buf + used, sizeof buf - used, "%s%s:%s:%s", i ? " " : "",
            json_string_value(json_object_get(v, "version")),
            json_string_value(json_object_get(v, "state")),
            json_string_value(json_object_get(json_object_get(v, "status"), "error_code")));
    }
    json_decref(j);
    tfs_http_reply_free(&r);
    return buf;
}

/* Waits (up to `limit` s) until predictions come from `version`; returns the seconds it took. */
static double wait_for_version(int port, int64_t version, double limit)
{
    double t0 = now_s();
    int status;
    while (predict_version(port, &status) != version && now_s() - t0 < limit)
        sleep_s(0.02);
    ck_assert_msg(predict_version(port, &status) == version, "version %lld not served after %g s "
                  "(status %s)", (long long)version, limit, status_text(port));
    return now_s() - t0;
}

static void start_server(tfs_test_server *s, const char *base)
{
    char bflag[4200];
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base);
    const char *flags[] = {"--model_name=m", bflag, "--file_system_poll_wait_seconds=1", NULL};
    ck_assert_msg(tfs_test_server_start(s, flags) == 0, "tfserve did not start; see %s",
                  s->log_path);
}

static void stop_server(tfs_test_server *s)
{
    int status = tfs_test_server_stop(s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "tfserve did not exit 0 on SIGTERM (status %d); see %s", status, s->log_path);
}

START_TEST(test_lifecycle_new_and_removed_version)
{
    char *base = tfs_test_mkdtemp();
    tfs_test_write_version(base, 1);
    tfs_test_server s;
    start_server(&s, base);
    int status;
    ck_assert_int_eq(predict_version(s.rest_port, &status), 1);
    ck_assert_str_eq(status_text(s.rest_port), "1:AVAILABLE:OK");

    tfs_test_write_version(base, 2);
    double took = wait_for_version(s.rest_port, 2, 10);
    fprintf(stderr, "tfserve: new version served %.2f s after it was copied in (poll 1 s)\n", took);
    ck_assert_msg(took < 3.5, "two polls of 1 s took %.2f s", took);
    ck_assert_str_eq(status_text(s.rest_port), "2:AVAILABLE:OK 1:END:OK");

    /* removed: the old version comes back, and 2 is reported END as TF Serving does */
    tfs_test_remove_version(base, 2);
    wait_for_version(s.rest_port, 1, 5);
    double t0 = now_s();
    while (strcmp(status_text(s.rest_port), "2:END:OK 1:AVAILABLE:OK") != 0 && now_s() - t0 < 5)
        sleep_s(0.05);
    ck_assert_str_eq(status_text(s.rest_port), "2:END:OK 1:AVAILABLE:OK");
    stop_server(&s);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

/* --max_model_memory_bytes on the real server: a version that does not fit is END with
 * RESOURCE_EXHAUSTED naming the limit (GET /v1/models/m), /readyz is 503, the server runs on and
 * exits 0; with room enough the same version serves. */
START_TEST(test_lifecycle_memory_limit)
{
    char *base = tfs_test_mkdtemp(), bflag[4200];
    tfs_test_write_version(base, 1);
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base);
    const char *flags[] = {"--model_name=m", bflag, "--max_model_memory_bytes=64", NULL};
    tfs_test_server s;
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/v1/models/m", NULL);
    ck_assert_msg(r.status == 200 && strstr(r.body, "\"state\": \"END\"") &&
                  strstr(r.body, "\"error_code\": \"RESOURCE_EXHAUSTED\"") &&
                  strstr(r.body, "of the 64 byte limit (--max_model_memory_bytes)"), "%d %s",
                  r.status, r.body);
    tfs_http_reply_free(&r);
    r = tfs_http(s.rest_port, "GET", "/readyz", NULL);
    ck_assert_int_eq(r.status, 503);
    tfs_http_reply_free(&r);
    stop_server(&s);
    unlink(s.log_path);
    const char *roomy[] = {"--model_name=m", bflag, "--max_model_memory_bytes=1000000", NULL};
    ck_assert_msg(tfs_test_server_start(&s, roomy) == 0, "tfserve did not start; see %s",
                  s.log_path);
    int status;
    ck_assert_int_eq(predict_version(s.rest_port, &status), 1);
    stop_server(&s);
    unlink(s.log_path);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

typedef struct client {
    int          port;
    atomic_bool *stop;
    long         ok, failed, wrong, not_ready, backwards;
    int          first_status;
    int64_t      lo, hi;
} client;

/* Predicts nonstop; every 8th request also asks /readyz, which must stay 200 throughout. Versions
 * only ever go up in this test, so one client must never see an older version after a newer one
 * (it would mean a retired version served again). */
static void *client_main(void *arg)
{
    client *c = arg;
    c->lo = INT64_MAX;
    for (long i = 0; !atomic_load(c->stop); i++) {
        int status;
        int64_t v = predict_version(c->port, &status);
        if (status != 200) {
            if (!c->failed++)
                c->first_status = status;
        } else if (v < 1 || v > 21) {
            c->wrong++;
        } else {
            c->ok++;
            c->backwards += v < c->hi;
            c->lo = v < c->lo ? v : c->lo;
            c->hi = v > c->hi ? v : c->hi;
        }
        if (i % 8 == 0) {
            tfs_http_reply r = tfs_http(c->port, "GET", "/readyz", NULL);
            c->not_ready += r.status != 200;
            tfs_http_reply_free(&r);
        }
    }
    return NULL;
}

/* 20 rounds: version k+1 is copied in and version k removed right after, mostly faster than the
 * server can load (so the version being replaced keeps serving from memory); every 4th round
 * waits until the new version serves. Three clients predict nonstop meanwhile. */
START_TEST(test_lifecycle_churn_under_requests)
{
    enum { N_CLIENTS = 3 };
    char *base = tfs_test_mkdtemp();
    tfs_test_write_version(base, 1);
    tfs_test_server s;
    start_server(&s, base);
    atomic_bool stop;
    atomic_init(&stop, false);
    client cs[N_CLIENTS];
    pthread_t t[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        cs[i] = (client){.port = s.rest_port, .stop = &stop};
        ck_assert_int_eq(pthread_create(&t[i], NULL, client_main, &cs[i]), 0);
    }
    for (int k = 1; k <= 20; k++) {
        tfs_test_write_version(base, k + 1);
        sleep_s(0.1);
        tfs_test_remove_version(base, k);
        if (k % 4 == 0)
            wait_for_version(s.rest_port, k + 1, 10);
        else
            sleep_s(0.15);
    }
    wait_for_version(s.rest_port, 21, 10);
    atomic_store(&stop, true);
    client c = {.lo = INT64_MAX};
    for (int i = 0; i < N_CLIENTS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(cs[i].failed == 0, "client %d: %ld requests failed (first status %d); see "
                      "%s", i, cs[i].failed, cs[i].first_status, s.log_path);
        c.ok += cs[i].ok;
        c.wrong += cs[i].wrong;
        c.not_ready += cs[i].not_ready;
        c.backwards += cs[i].backwards;
        c.lo = cs[i].lo < c.lo ? cs[i].lo : c.lo;
        c.hi = cs[i].hi > c.hi ? cs[i].hi : c.hi;
    }
    fprintf(stderr, "tfserve churn: %ld predictions by %d clients, versions %lld..%lld answered, "
            "0 failed, %ld /readyz not 200\n", c.ok, N_CLIENTS, (long long)c.lo, (long long)c.hi,
            c.not_ready);
    ck_assert_int_eq(c.wrong, 0);
    ck_assert_int_eq(c.not_ready, 0);
    ck_assert_int_eq(c.backwards, 0);
    ck_assert(c.ok > 50 && c.hi == 21);
    ck_assert_ptr_nonnull(strstr(status_text(s.rest_port), "21:AVAILABLE:OK"));
    stop_server(&s);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

Suite *suite_server_lifecycle(void);
Suite *suite_server_lifecycle(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 180);
    tcase_set_tags(tc, "system");
    tcase_add_test(tc, test_lifecycle_flags);
    tcase_add_test(tc, test_lifecycle_new_and_removed_version);
    tcase_add_test(tc, test_lifecycle_memory_limit);
    tcase_add_test(tc, test_lifecycle_churn_under_requests);
    suite_add_tcase(s, tc);
    return s;
}
