/* Metrics and the access log (server/metrics*.c, server/access-log.c): the exposition text exactly
 * (escaping, cumulative buckets, +Inf, _sum/_count), the per-thread shards merged on read (exact
 * totals from many threads, scrapes while threads record), the series cap, the access log's line
 * and its sampling; then the real tfserve: counts in a scrape after real requests, the endpoint's
 * path and method rules, and the access log it writes. The real Prometheus server scraping tfserve
 * is prometheus_test.py.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "server/metrics-impl.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

static tfs__request_record rec(enum tfs_api api, enum tfs__method m, const char *model,
                               const char *sig, enum tfs_code code, double secs, double run)
{
    tfs__request_record r;
    memset(&r, 0, sizeof r);
    r.api = api;
    r.method = m;
    snprintf(r.model, sizeof r.model, "%s", model);
    snprintf(r.signature, sizeof r.signature, "%s", sig);
    r.version = 1;
    r.code = code;
    r.total_seconds = secs;
    r.runtime_seconds = run;
    r.ran = run > 0;
    return r;
}

static char *render(void)
{
    tfs__buf   b;
    tfs_status st;
    tfs__buf_init(&b);
    ck_assert_msg(tfs__metrics_render(&b, &st) == TFS_OK, "%s", st.msg);
    return b.data;   /* caller frees with tfs_free */
}

static void expect_line(const char *text, const char *line)
{
    char want[1024];
    snprintf(want, sizeof want, "\n%s\n", line);
    if (!strstr(text, want))   /* the whole text can be longer than Check's message limit */
        fprintf(stderr, "missing line: %s\nin:\n%s\n", line, text);
    ck_assert_msg(strstr(text, want) != NULL, "missing line: %s", line);
}

/* ---- the text format ------------------------------------------------------------------------ */

START_TEST(test_metrics_text_exact)
{
    tfs__buf b;
    tfs__buf_init(&b);
    tfs__prom_header(&b, "x_seconds", "histogram", "Help with \\ and\nnewline.");
    tfs__prom_label l[2] = {{"model", "a\"b\\c\nd"}, {"code", "OK"}};
    double   limits[2] = {0.5, 1};
    uint64_t counts[3] = {1, 2, 3};
    tfs__prom_histogram(&b, "x_seconds", l, 2, limits, 2, counts, 7.25);
    tfs__prom_sample(&b, "g", NULL, 0, 3);
    tfs__prom_sample(&b, "g", l + 1, 1, 0.1);
    tfs__prom_sample(&b, "g", NULL, 0, 1.0 / 0.0);
    tfs__prom_sample(&b, "g", NULL, 0, 1e21);
    ck_assert_str_eq(b.data,
                     "# HELP x_seconds Help with \\\\ and\\nnewline.\n"
                     "# TYPE x_seconds histogram\n"
                     "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",code=\"OK\",le=\"0.5\"} 1\n"
                     "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",code=\"OK\",le=\"1\"} 3\n"
                     "x_seconds_bucket{model=\"a\\\"b\\\\c\\nd\",code=\"OK\",le=\"+Inf\"} 6\n"
                     "x_seconds_sum{model=\"a\\\"b\\\\c\\nd\",code=\"OK\"} 7.25\n"
                     "x_seconds_count{model=\"a\\\"b\\\\c\\nd\",code=\"OK\"} 6\n"
                     "g 3\n"
                     "g{code=\"OK\"} 0.1\n"
                     "g +Inf\n"
                     "g 1e+21\n");
    tfs__buf_deinit(&b);
}
END_TEST

/* TF Serving's bucket bounds: 10 * 1.8^k, 33 of them. */
START_TEST(test_metrics_tf_buckets)
{
    ck_assert(tfs__tf_bucket_limits[0] == 10 && tfs__tf_bucket_limits[1] == 18);
    double v = 10;
    for (int k = 0; k < TFS__TF_BUCKETS - 1; k++, v *= 1.8)
        ck_assert_msg(tfs__tf_bucket_limits[k] == v, "bound %d: %.17g != %.17g", k,
                      tfs__tf_bucket_limits[k], v);
}
END_TEST

/* ---- families from records ------------------------------------------------------------------ */

START_TEST(test_metrics_families)
{
    tfs__metrics_enable(true);
    /* 15 us -> le="18"; 100 us -> le="104.976"; 2 ms -> le="0.0025" in ours */
    tfs__request_record a = rec(TFS_API_REST, TFS__METHOD_PREDICT, "m\"1", "serving_default",
                                TFS_OK, 15e-6, 5e-6);
    tfs__request_record b = rec(TFS_API_REST, TFS__METHOD_PREDICT, "m\"1", "serving_default",
                                TFS_OK, 100e-6, 0);
    tfs__request_record c = rec(TFS_API_GRPC, TFS__METHOD_PREDICT, "m\"1", "other",
                                TFS_INVALID_ARGUMENT, 2e-3, 0);
    tfs__request_record d = rec(TFS_API_REST, TFS__METHOD_STATUS, "m\"1", "", TFS_OK, 1e-3, 0);
    /* a run too short for its microsecond clock: still a run */
    tfs__request_record e = rec(TFS_API_GRPC, TFS__METHOD_PREDICT, "m\"1", "serving_default",
                                TFS_OK, 20e-6, 0);
    e.ran = true;
    /* KServe v2 inference over both front ends: our family only, as v2-rest / v2-grpc */
    tfs__request_record f = rec(TFS_API_REST, TFS__METHOD_INFER, "m\"1", "serving_default",
                                TFS_OK, 1e-3, 0);
    tfs__request_record g2 = rec(TFS_API_GRPC, TFS__METHOD_INFER, "m\"1", "serving_default",
                                 TFS_NOT_FOUND, 1e-3, 0);
    tfs__metrics_record(&f);
    tfs__metrics_record(&g2);
    tfs__metrics_record(&e);
    tfs__metrics_record(&a);
    tfs__metrics_record(&b);
    tfs__metrics_record(&c);
    tfs__metrics_record(&d);
    char *t = render();
    /* TF Serving's counter: inference APIs only, gRPC and REST together, by status. */
    expect_line(t, ":tensorflow:serving:request_count{model_name=\"m\\\"1\",status=\"OK\"} 3");
    expect_line(t, ":tensorflow:serving:request_count{model_name=\"m\\\"1\","
                   "status=\"INVALID_ARGUMENT\"} 1");
    ck_assert(strstr(t, "API=\"GetModelStatus\"") == NULL);
    /* latency in microseconds, cumulative */
    const char *lat = ":tensorflow:serving:request_latency";
    char        line[512];
    snprintf(line, sizeof line, "%s_bucket{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"REST\",le=\"10\"} 0", lat);
    expect_line(t, line);
    snprintf(line, sizeof line, "%s_bucket{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"REST\",le=\"18\"} 1", lat);
    expect_line(t, line);
    snprintf(line, sizeof line, "%s_bucket{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"REST\",le=\"58.32\"} 1", lat);
    expect_line(t, line);
    snprintf(line, sizeof line, "%s_bucket{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"REST\",le=\"104.976\"} 2", lat);
    expect_line(t, line);
    snprintf(line, sizeof line, "%s_bucket{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"REST\",le=\"+Inf\"} 2", lat);
    expect_line(t, line);
    snprintf(line, sizeof line, "%s_sum{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"REST\"} 115", lat);
    expect_line(t, line);
    snprintf(line, sizeof line, "%s_count{model_name=\"m\\\"1\",API=\"Predict\","
             "entrypoint=\"GRPC\"} 2", lat);
    expect_line(t, line);
    /* the runtime: only the requests that reached a run */
    expect_line(t, ":tensorflow:serving:runtime_latency_count{model_name=\"m\\\"1\","
                   "API=\"Predict\",runtime=\"TF1\"} 2");
    expect_line(t, ":tensorflow:serving:runtime_latency_bucket{model_name=\"m\\\"1\","
                   "API=\"Predict\",runtime=\"TF1\",le=\"10\"} 2");
    expect_line(t, ":tensorflow:serving:runtime_latency_sum{model_name=\"m\\\"1\","
                   "API=\"Predict\",runtime=\"TF1\"} 5");
    /* ours: every API, by signature, protocol, method and code */
    expect_line(t, "tfserve_request_duration_seconds_bucket{model=\"m\\\"1\","
                   "signature=\"other\",protocol=\"grpc\",method=\"predict\","
                   "code=\"INVALID_ARGUMENT\",le=\"0.001\"} 0");
    expect_line(t, "tfserve_request_duration_seconds_bucket{model=\"m\\\"1\","
                   "signature=\"other\",protocol=\"grpc\",method=\"predict\","
                   "code=\"INVALID_ARGUMENT\",le=\"0.0025\"} 1");
    expect_line(t, "tfserve_request_duration_seconds_count{model=\"m\\\"1\",signature=\"\","
                   "protocol=\"rest\",method=\"status\",code=\"OK\"} 1");
    expect_line(t, "tfserve_request_duration_seconds_sum{model=\"m\\\"1\",signature=\"\","
                   "protocol=\"rest\",method=\"status\",code=\"OK\"} 0.001");
    expect_line(t, "tfserve_request_duration_seconds_count{model=\"m\\\"1\","
                   "signature=\"serving_default\",protocol=\"v2-rest\",method=\"infer\","
                   "code=\"OK\"} 1");
    expect_line(t, "tfserve_request_duration_seconds_count{model=\"m\\\"1\","
                   "signature=\"serving_default\",protocol=\"v2-grpc\",method=\"infer\","
                   "code=\"NOT_FOUND\"} 1");
    expect_line(t, "# TYPE :tensorflow:serving:request_count counter");
    expect_line(t, "# TYPE tfserve_requests_in_flight gauge");
    expect_line(t, "tfserve_requests_in_flight 0");
    ck_assert(strstr(t, "\n# TYPE tfserve_process_cpu_seconds_total counter\n"));
    ck_assert(strstr(t, "\ntfserve_process_resident_memory_bytes "));
    tfs_free(t);
    tfs__metrics_teardown();
}
END_TEST

/* begin/note/done on one thread: notes land in the record; in-flight counts the open one. */
START_TEST(test_metrics_begin_done)
{
    tfs__metrics_enable(true);
    tfs__request_record outer, r;
    tfs__request_begin(&outer, TFS_API_REST, TFS__METHOD_METADATA);   /* still in flight */
    tfs__request_begin(&r, TFS_API_GRPC, TFS__METHOD_PREDICT);
    tfs__request_note("mod", -1, NULL);
    tfs__request_note(NULL, 7, "sig");
    tfs__request_note_runtime(0.25);
    tfs__request_note_runtime(0.25);
    r.code = TFS_NOT_FOUND;
    tfs__request_done(&r);
    ck_assert_str_eq(r.model, "mod");
    ck_assert_str_eq(r.signature, "sig");
    ck_assert_int_eq(r.version, 7);
    ck_assert(r.runtime_seconds == 0.5 && r.ran);
    ck_assert(r.total_seconds >= 0 && r.total_seconds < 5);
    tfs__request_note("after", 1, "x");   /* no current record: ignored */
    ck_assert_str_eq(r.model, "mod");

    tfs__metrics_snapshot s;
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.in_flight, 1);
    ck_assert_str_eq(s.rows[0].model, "mod");
    ck_assert_int_eq(s.rows[0].code, TFS_NOT_FOUND);
    ck_assert_int_eq(tfs__metrics_row_count(&s.rows[0]), 1);
    tfs__metrics_snapshot_deinit(&s);
    tfs__request_done(&outer);
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    ck_assert_int_eq(s.in_flight, 0);
    ck_assert_int_eq(s.n, 2);
    tfs__metrics_snapshot_deinit(&s);

    /* a model name longer than a label is cut, not overflowed */
    char longname[400];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    tfs__request_begin(&r, TFS_API_REST, TFS__METHOD_PREDICT);
    tfs__request_note(longname, -1, NULL);
    tfs__request_done(&r);
    ck_assert_int_eq(strlen(r.model), TFS__LABEL_MAX - 1);
    tfs__metrics_teardown();

    /* off: nothing recorded */
    tfs__metrics_enable(false);
    tfs__request_begin(&r, TFS_API_REST, TFS__METHOD_PREDICT);
    tfs__request_done(&r);
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    ck_assert_int_eq(s.n, 0);
    tfs__metrics_snapshot_deinit(&s);
}
END_TEST

/* ---- threads -------------------------------------------------------------------------------- */

#define N_THREADS 8
#define N_RECORDS 20000

static const char *const models[2] = {"alpha", "beta"};

static void *recorder(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < N_RECORDS; i++) {
        tfs__request_record r;
        tfs__request_begin(&r, (i & 1) ? TFS_API_GRPC : TFS_API_REST, TFS__METHOD_PREDICT);
        tfs__request_note(models[(i + id) % 2], 1, "serving_default");
        r.code = (i % 4 == 3) ? TFS_INVALID_ARGUMENT : TFS_OK;
        tfs__request_done(&r);
    }
    return NULL;
}

/* Totals per (api, model, code) over a snapshot; `settled`: no thread is recording. */
static void totals(const tfs__metrics_snapshot *s, uint64_t t[2][2][2], bool settled)
{
    memset(t, 0, sizeof(uint64_t) * 8);
    for (int i = 0; i < s->n; i++) {
        const tfs__metrics_row *r = &s->rows[i];
        int m = strcmp(r->model, "beta") == 0;
        t[r->api][m][r->code != TFS_OK] += tfs__metrics_row_count(r);
        /* The two histograms of a row were fed the same requests. Only checked once the
         * recorders stopped: a scrape reads one histogram after the other while the owning
         * thread keeps recording, so mid-run they may differ by any amount. */
        uint64_t d = 0, c = tfs__metrics_row_count(r);
        for (int k = 0; k < TFS__DUR_BUCKETS; k++)
            d += r->duration[k];
        if (settled)
            ck_assert_msg(d == c, "row %d: duration count %llu, request count %llu", i,
                          (unsigned long long)d, (unsigned long long)c);
    }
}

static void expect_exact(const uint64_t t[2][2][2])
{
    /* Per thread: i odd -> gRPC; i % 4 == 3 (odd) -> error; the model alternates with i + id.
     * Over all threads each (api, model) pair gets N_THREADS * N_RECORDS / 4 requests; of the
     * gRPC ones half are errors. */
    uint64_t q = (uint64_t)N_THREADS * N_RECORDS / 4;
    for (int m = 0; m < 2; m++) {
        ck_assert_int_eq(t[TFS_API_REST][m][0], q);
        ck_assert_int_eq(t[TFS_API_REST][m][1], 0);
        ck_assert_int_eq(t[TFS_API_GRPC][m][0] + t[TFS_API_GRPC][m][1], q);
    }
    ck_assert_int_eq(t[TFS_API_GRPC][0][1] + t[TFS_API_GRPC][1][1],
                     (uint64_t)N_THREADS * N_RECORDS / 4);
}

START_TEST(test_metrics_threads_exact)
{
    pthread_t th[N_THREADS];
    tfs__metrics_enable(true);
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, recorder, (void *)(intptr_t)i), 0);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    tfs__metrics_snapshot s;
    uint64_t              t[2][2][2];
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    ck_assert_int_eq(s.n, 6);   /* rows merged across shards: rest x2 models, grpc x2 x2 codes */
    ck_assert_int_eq(s.in_flight, 0);
    totals(&s, t, true);
    expect_exact(t);
    tfs__metrics_snapshot_deinit(&s);

    /* Threads that exited gave their shards back: a second round adds to the same totals. */
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, recorder, (void *)(intptr_t)i), 0);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    totals(&s, t, true);
    ck_assert_int_eq(t[TFS_API_REST][0][0], 2 * (uint64_t)N_THREADS * N_RECORDS / 4);
    tfs__metrics_snapshot_deinit(&s);
    tfs__metrics_teardown();
}
END_TEST

START_TEST(test_metrics_scrape_while_recording)
{
    pthread_t th[N_THREADS];
    uint64_t  prev[2][2][2] = {{{0}}}, t[2][2][2];
    int       scrapes = 0;
    tfs__metrics_enable(true);
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, recorder, (void *)(intptr_t)i), 0);
    /* Scrape (snapshot and full text) while they record: every count only grows. */
    for (;;) {
        tfs__metrics_snapshot s;
        ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
        totals(&s, t, false);
        tfs__metrics_snapshot_deinit(&s);
        for (int k = 0; k < 8; k++)
            ck_assert(((uint64_t *)t)[k] >= ((uint64_t *)prev)[k]);
        memcpy(prev, t, sizeof t);
        char *text = render();
        tfs_free(text);
        scrapes++;
        uint64_t all = 0;
        for (int k = 0; k < 8; k++)
            all += ((uint64_t *)t)[k];
        if (all == (uint64_t)N_THREADS * N_RECORDS)
            break;
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    tfs__metrics_snapshot s;
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    totals(&s, t, true);
    expect_exact(t);
    tfs__metrics_snapshot_deinit(&s);
    ck_assert(scrapes >= 1);
    tfs__metrics_teardown();
}
END_TEST

/* Model names from requests cannot grow a shard without bound. */
START_TEST(test_metrics_series_cap)
{
    tfs__metrics_enable(true);
    int n = 3000;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%d", i);
        tfs__request_record r = rec(TFS_API_REST, TFS__METHOD_PREDICT, name, "", TFS_NOT_FOUND,
                                    1e-4, 0);
        tfs__metrics_record(&r);
    }
    tfs__metrics_snapshot s;
    ck_assert(tfs__metrics_snapshot_take(&s, NULL) == TFS_OK);
    ck_assert_int_eq(s.n, 2048 + 1);
    uint64_t all = 0, over = 0;
    for (int i = 0; i < s.n; i++) {
        all += tfs__metrics_row_count(&s.rows[i]);
        if (strcmp(s.rows[i].model, "~overflow~") == 0)
            over = tfs__metrics_row_count(&s.rows[i]);
    }
    ck_assert_int_eq(all, n);
    ck_assert_int_eq(over, n - 2048);
    tfs__metrics_snapshot_deinit(&s);
    tfs__metrics_teardown();
}
END_TEST

/* ---- access log ----------------------------------------------------------------------------- */

START_TEST(test_access_log_line)
{
    char                line[512];
    tfs__request_record r = rec(TFS_API_REST, TFS__METHOD_PREDICT, "a \"q\"\\\n\x01", "sig",
                                TFS_INVALID_ARGUMENT, 0.0012345, 0);
    r.http_status = 400;
    /* 2021-03-04T05:06:07.089012Z */
    int64_t ns = 1614834367LL * 1000000000 + 89012345;
    tfs__access_log_format(&r, ns, line, sizeof line);
    ck_assert_str_eq(line, "2021-03-04T05:06:07.089012Z rest predict \"a \\\"q\\\"\\\\\\n\\x01\" 1 "
                           "\"sig\" INVALID_ARGUMENT 400 1.234\n");
    r = rec(TFS_API_GRPC, TFS__METHOD_STATUS, "m", "", TFS_OK, 0.5, 0);
    r.version = -1;
    tfs__access_log_format(&r, ns, line, sizeof line);
    ck_assert_str_eq(line, "2021-03-04T05:06:07.089012Z grpc status \"m\" - \"\" OK - 500.000\n");
    /* cut to the buffer, NUL-terminated */
    ck_assert_uint_eq(tfs__access_log_format(&r, ns, line, 10), 9);
    ck_assert_str_eq(line, "2021-03-0");
}
END_TEST

static int count_lines(const char *path)
{
    size_t len = 0;
    char  *text = tfs_test_read_file(path, &len);
    int    n = 0;
    for (size_t i = 0; text && i < len; i++)
        n += text[i] == '\n';
    free(text);
    return text ? n : -1;
}

static int log_n(const char *dir, const char *name, double rate, int requests)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tfs_status st;
    ck_assert_msg(tfs__access_log_open(path, rate, &st) == TFS_OK, "%s", st.msg);
    for (int i = 0; i < requests; i++) {
        tfs__request_record r;
        tfs__request_begin(&r, TFS_API_REST, TFS__METHOD_PREDICT);
        tfs__request_note("m", 1, NULL);
        tfs__request_done(&r);
    }
    tfs__access_log_close();
    return count_lines(path);
}

START_TEST(test_access_log_sampling)
{
    char *dir = tfs_test_mkdtemp();
    ck_assert_int_eq(log_n(dir, "all.log", 1, 25), 25);
    ck_assert_int_eq(log_n(dir, "half.log", 0.5, 25), 12);
    ck_assert_int_eq(log_n(dir, "tenth.log", 0.1, 100), 10);
    ck_assert_int_eq(log_n(dir, "none.log", 0, 25), 0);
    tfs_status st;
    ck_assert_int_eq(tfs__access_log_open("/nonexistent-dir/x.log", 1, &st), TFS_NOT_FOUND);
    ck_assert_msg(strstr(st.msg, "/nonexistent-dir/x.log"), "%s", st.msg);
    ck_assert_int_eq(tfs__access_log_open("/tmp/x.log", 1.5, &st), TFS_INVALID_ARGUMENT);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- the real server ------------------------------------------------------------------------ */

#define METRICS_PATH "/monitoring/prometheus/metrics"

static void start_with(tfs_test_server *s, const char *const *extra)
{
    char        base[4200];
    const char *flags[12] = {"--model_name=half_plus_two"};
    int         n = 1;
    snprintf(base, sizeof base, "--model_base_path=%s/models/half_plus_two", TFS_BINARY_DIR);
    flags[n++] = base;
    for (int i = 0; extra[i] && n < 11; i++)
        flags[n++] = extra[i];
    flags[n] = NULL;
    ck_assert_msg(tfs_test_server_start(s, flags) == 0, "tfserve did not start; see %s",
                  s->log_path);
}

static void stop_ok(tfs_test_server *s)
{
    int status = tfs_test_server_stop(s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "tfserve did not exit 0 (status %d); see %s", status, s->log_path);
}

static void post_n(int port, const char *path, const char *body, int n, int want)
{
    for (int i = 0; i < n; i++) {
        tfs_http_reply r = tfs_http(port, "POST", path, body);
        ck_assert_msg(r.status == want, "POST %s: %d, want %d", path, r.status, want);
        tfs_http_reply_free(&r);
    }
}

START_TEST(test_metrics_e2e)
{
    char *dir = tfs_test_mkdtemp();
    char  logflag[4400], logpath[4200];
    snprintf(logpath, sizeof logpath, "%s/access.log", dir);
    snprintf(logflag, sizeof logflag, "--access_log_file=%s", logpath);
    const char     *extra[] = {"--metrics_path=" METRICS_PATH, logflag, NULL};
    tfs_test_server s;
    start_with(&s, extra);
    const char *pp = "/v1/models/half_plus_two:predict";
    post_n(s.rest_port, pp, "{\"instances\": [1.0, 2.0]}", 7, 200);
    post_n(s.rest_port, pp, "{\"instances\": [1.0,", 3, 400);
    post_n(s.rest_port, "/v1/models/nope:predict", "{\"instances\": [1.0]}", 2, 404);
    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/v1/models/half_plus_two", NULL);
    ck_assert_int_eq(r.status, 200);
    tfs_http_reply_free(&r);

    r = tfs_http(s.rest_port, "GET", METRICS_PATH, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.headers, "text/plain; version=0.0.4"), "%s", r.headers);
    const char *t = r.body;
    expect_line(t, ":tensorflow:serving:request_count{model_name=\"half_plus_two\","
                   "status=\"OK\"} 7");
    expect_line(t, ":tensorflow:serving:request_count{model_name=\"half_plus_two\","
                   "status=\"INVALID_ARGUMENT\"} 3");
    /* a name the server is not configured with is counted under one value, not its own */
    expect_line(t, ":tensorflow:serving:request_count{model_name=\"~unknown~\","
                   "status=\"NOT_FOUND\"} 2");
    ck_assert_msg(!strstr(t, "\"nope\""), "an unknown name has its own series");
    expect_line(t, ":tensorflow:serving:request_latency_count{model_name=\"half_plus_two\","
                   "API=\"Predict\",entrypoint=\"REST\"} 10");
    expect_line(t, ":tensorflow:serving:request_latency_bucket{model_name=\"half_plus_two\","
                   "API=\"Predict\",entrypoint=\"REST\",le=\"+Inf\"} 10");
    expect_line(t, ":tensorflow:serving:runtime_latency_count{model_name=\"half_plus_two\","
                   "API=\"Predict\",runtime=\"TF1\"} 7");
    expect_line(t, "tfserve_request_duration_seconds_count{model=\"half_plus_two\","
                   "signature=\"serving_default\",protocol=\"rest\",method=\"predict\","
                   "code=\"OK\"} 7");
    expect_line(t, "tfserve_request_duration_seconds_count{model=\"half_plus_two\","
                   "signature=\"\",protocol=\"rest\",method=\"status\",code=\"OK\"} 1");
    expect_line(t, "tfserve_models_loaded 1");
    expect_line(t, "tfserve_requests_in_flight 0");
    const char *mem = strstr(t, "\ntfserve_model_memory_bytes{model=\"half_plus_two\","
                                "version=\"1\"} ");
    ck_assert_msg(mem && strtod(strchr(mem, '}') + 2, NULL) > 0, "no model memory line:\n%s", t);
    /* TensorFlow's SavedModel load counters, per version folder */
    char want[4400];
    snprintf(want, sizeof want, ":tensorflow:cc:saved_model:load_attempt_count{model_path=\""
             "%s/models/half_plus_two/1\",status=\"success\"} 1", TFS_BINARY_DIR);
    expect_line(t, want);
    ck_assert_msg(!strstr(t, "status=\"fail\""), "a failed load counted:\n%s", t);
    snprintf(want, sizeof want, "\n:tensorflow:cc:saved_model:load_latency{model_path=\""
             "%s/models/half_plus_two/1\"} ", TFS_BINARY_DIR);
    const char *lat = strstr(t, want);
    ck_assert_msg(lat && strtod(lat + strlen(want), NULL) > 0, "no load latency line:\n%s", t);
    tfs_http_reply_free(&r);

    /* GET only, exact path: the rest is any other non-API path's 404 */
    r = tfs_http(s.rest_port, "POST", METRICS_PATH, "");
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    r = tfs_http(s.rest_port, "GET", "/metrics", NULL);
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    stop_ok(&s);

    /* one line per API request (the scrapes are not API requests), flushed at shutdown */
    ck_assert_int_eq(count_lines(logpath), 7 + 3 + 2 + 1);
    char *text = tfs_test_read_file(logpath, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "Z rest predict \"half_plus_two\" 1 \"serving_default\" OK 200 "),
                  "%s", text);
    ck_assert_msg(strstr(text, "Z rest predict \"half_plus_two\" - \"\" INVALID_ARGUMENT 400 "),
                  "%s", text);
    ck_assert_msg(strstr(text, "Z rest predict \"nope\" - \"\" NOT_FOUND 404 "), "%s", text);
    ck_assert_msg(strstr(text, "Z rest status \"half_plus_two\" - \"\" OK 200 "), "%s", text);
    free(text);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_metrics_e2e_off_and_sampled)
{
    char *dir = tfs_test_mkdtemp();
    char  logflag[4400], logpath[4200];
    snprintf(logpath, sizeof logpath, "%s/access.log", dir);
    snprintf(logflag, sizeof logflag, "--access_log_file=%s", logpath);
    const char     *extra[] = {logflag, "--access_log_sample_rate=0.5", NULL};
    tfs_test_server s;
    start_with(&s, extra);
    post_n(s.rest_port, "/v1/models/half_plus_two:predict", "{\"instances\": [1.0]}", 10, 200);
    /* metrics are off without a path: TF Serving's 404 */
    tfs_http_reply r = tfs_http(s.rest_port, "GET", METRICS_PATH, NULL);
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    stop_ok(&s);
    ck_assert_int_eq(count_lines(logpath), 5);
    tfs_test_rmtree(dir);
    free(dir);

    /* a bad rate refuses to start */
    const char *bad[] = {"--access_log_file=/tmp/x", "--access_log_sample_rate=2", NULL};
    char        base[4200], bin[8800];
    snprintf(base, sizeof base, "--model_base_path=%s/models/half_plus_two", TFS_BINARY_DIR);
    snprintf(bin, sizeof bin, "%s/server/tfserve %s %s %s --port=0 >/dev/null 2>&1",
             TFS_BINARY_DIR, base, bad[0], bad[1]);
    int rc = system(bin);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "rc %d", rc);
}
END_TEST

/* --monitoring_config_file: TF Serving's MonitoringConfig text enables the endpoint. */
START_TEST(test_metrics_e2e_monitoring_config)
{
    char *dir = tfs_test_mkdtemp();
    char  cfg[4200], flag[4400];
    snprintf(cfg, sizeof cfg, "%s/monitoring.config", dir);
    snprintf(flag, sizeof flag, "--monitoring_config_file=%s", cfg);
    const char *extra[] = {flag, NULL};
    /* enable with no path: TF Serving's default path */
    const char *text = "# comment\nprometheus_config {\n  enable: true\n}\n";
    ck_assert_int_eq(tfs_test_write_file(cfg, text, strlen(text)), 0);
    tfs_test_server s;
    start_with(&s, extra);
    post_n(s.rest_port, "/v1/models/half_plus_two:predict", "{\"instances\": [1.0]}", 2, 200);
    tfs_http_reply r = tfs_http(s.rest_port, "GET", METRICS_PATH, NULL);
    ck_assert_int_eq(r.status, 200);
    expect_line(r.body, ":tensorflow:serving:request_count{model_name=\"half_plus_two\","
                        "status=\"OK\"} 2");
    tfs_http_reply_free(&r);
    stop_ok(&s);

    /* a path of its own; the default path is then a plain 404 */
    text = "prometheus_config { enable: true, path: \"/my/metrics\" }";
    ck_assert_int_eq(tfs_test_write_file(cfg, text, strlen(text)), 0);
    start_with(&s, extra);
    r = tfs_http(s.rest_port, "GET", "/my/metrics", NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strstr(r.body, "# TYPE :tensorflow:serving:request_count counter\n"));
    tfs_http_reply_free(&r);
    r = tfs_http(s.rest_port, "GET", METRICS_PATH, NULL);
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    stop_ok(&s);

    /* enable: false serves nothing */
    text = "prometheus_config { enable: false path: \"/my/metrics\" }";
    ck_assert_int_eq(tfs_test_write_file(cfg, text, strlen(text)), 0);
    start_with(&s, extra);
    r = tfs_http(s.rest_port, "GET", "/my/metrics", NULL);
    ck_assert_int_eq(r.status, 404);
    tfs_http_reply_free(&r);
    stop_ok(&s);

    /* a broken file refuses to start, naming the file and the field */
    text = "prometheus_config { enabled: true }";
    ck_assert_int_eq(tfs_test_write_file(cfg, text, strlen(text)), 0);
    char cmd[9000], out[4300];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "%s/server/tfserve --model_base_path=%s/models/half_plus_two "
             "--port=0 %s >%s 2>&1", TFS_BINARY_DIR, TFS_BINARY_DIR, flag, out);
    int rc = system(cmd);
    ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "rc %d", rc);
    char *msg = tfs_test_read_file(out, NULL);
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, "monitoring.config") && strstr(msg, "enabled"), "%s", msg);
    free(msg);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_server_metrics(void);
Suite *suite_server_metrics(void)
{
    Suite *s = suite_create("server_metrics");
    TCase *tc = tcase_create("unit");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_metrics_text_exact);
    tcase_add_test(tc, test_metrics_tf_buckets);
    tcase_add_test(tc, test_metrics_families);
    tcase_add_test(tc, test_metrics_begin_done);
    tcase_add_test(tc, test_metrics_threads_exact);
    tcase_add_test(tc, test_metrics_scrape_while_recording);
    tcase_add_test(tc, test_metrics_series_cap);
    tcase_add_test(tc, test_access_log_line);
    tcase_add_test(tc, test_access_log_sampling);
    suite_add_tcase(s, tc);
    TCase *sys = tcase_create("system");
    tcase_set_timeout(sys, 120);
    tcase_add_test(sys, test_metrics_e2e);
    tcase_add_test(sys, test_metrics_e2e_off_and_sampled);
    tcase_add_test(sys, test_metrics_e2e_monitoring_config);
    suite_add_tcase(s, sys);
    return s;
}
