/* System tests: the real tfserve binary on loopback, driven over HTTP like a user's client would.
 * The demo model (written at build time by tfserve's own writer) is always available; the real
 * TensorFlow fixtures are used when present (their own case, reported skipped otherwise). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

#define TF1_BASE "tf_serving/saved_model_half_plus_two_cpu"
#define TF2_BASE "tf_serving/saved_model_half_plus_two_tf2_cpu"

static json_t *parse(const tfs_http_reply *r)
{
    json_error_t err;
    json_t *j = json_loads(r->body ? r->body : "", 0, &err);
    ck_assert_msg(j != NULL, "reply is not JSON (%s): %s", err.text, r->body ? r->body : "(none)");
    return j;
}

/* Asserts status and that the body equals `want` as JSON. */
static void expect_json(int port, const char *method, const char *path, const char *body,
                        int status, const char *want)
{
    tfs_http_reply r = tfs_http(port, method, path, body);
    ck_assert_msg(r.status == status, "%s %s: status %d, want %d; body %s", method, path, r.status,
                  status, r.body ? r.body : "");
    json_t *got = parse(&r), *exp = json_loads(want, 0, NULL);
    ck_assert_ptr_nonnull(exp);
    char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(json_equal(got, exp), "%s %s: got %s, want %s", method, path, g, want);
    free(g);
    json_decref(got);
    json_decref(exp);
    tfs_http_reply_free(&r);
}

/* Asserts status and an {"error": "..."} body containing `needle`. */
static void expect_error(int port, const char *method, const char *path, const char *body,
                         int status, const char *needle)
{
    tfs_http_reply r = tfs_http(port, method, path, body);
    ck_assert_msg(r.status == status, "%s %s: status %d, want %d; body %s", method, path, r.status,
                  status, r.body ? r.body : "");
    json_t *j = parse(&r);
    const char *msg = json_string_value(json_object_get(j, "error"));
    ck_assert_msg(msg && json_object_size(j) == 1, "%s %s: not an error body: %s", method, path, r.body);
    ck_assert_msg(strstr(msg, needle), "%s %s: error '%s' lacks '%s'", method, path, msg, needle);
    json_decref(j);
    tfs_http_reply_free(&r);
}

static void start(tfs_test_server *s, const char *name, const char *base)
{
    char nflag[256], bflag[4200];
    snprintf(nflag, sizeof nflag, "--model_name=%s", name);
    snprintf(bflag, sizeof bflag, "--model_base_path=%s", base);
    const char *flags[] = {nflag, bflag, NULL};
    ck_assert_msg(tfs_test_server_start(s, flags) == 0, "tfserve did not start; see %s", s->log_path);
}

static void stop(tfs_test_server *s)
{
    int status = tfs_test_server_stop(s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "tfserve did not exit 0 on SIGTERM (status %d); see %s", status, s->log_path);
}

static void check_half_plus_two(int port, const char *model)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s:predict", model);
    expect_json(port, "POST", path, "{\"instances\": [1.0, 2.0, 5.0]}", 200,
                "{\"predictions\": [2.5, 3.0, 4.5]}");
    expect_json(port, "POST", path, "{\"inputs\": [1.0, 2.0, 5.0]}", 200,
                "{\"outputs\": [2.5, 3.0, 4.5]}");
    expect_json(port, "POST", path,
                "{\"signature_name\": \"serving_default\", \"inputs\": {\"x\": [1.0, 2.0, 5.0]}}", 200,
                "{\"outputs\": [2.5, 3.0, 4.5]}");
    /* the float text TF Serving writes: 3 -> 3.0 */
    tfs_http_reply r = tfs_http(port, "POST", path, "{\"instances\": [2]}");
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.body, "3.0") != NULL, "body %s", r.body);
    tfs_http_reply_free(&r);
}

static void check_errors(int port, const char *model)
{
    char path[256], spath[256];
    snprintf(path, sizeof path, "/v1/models/%s:predict", model);
    snprintf(spath, sizeof spath, "/v1/models/%s", model);
    expect_error(port, "POST", path, "{\"instances\": [1.0,", 400, "JSON Parse error");
    expect_error(port, "POST", path, "{\"inputs\": {\"nope\": [1.0]}}", 400, "Missing named input: x");
    expect_error(port, "POST", path, "{\"instances\": [\"a\"]}", 400, "is not of expected type");
    expect_error(port, "POST", path, "{\"signature_name\": \"nope\", \"instances\": [1.0]}", 400,
                 "\"nope\" not found in signature def");
    expect_error(port, "POST", "/v1/models/nope:predict", "{\"instances\": [1.0]}", 404,
                 "Servable not found for request: Latest(nope)");
    expect_error(port, "GET", "/v1/models/nope", NULL, 404, "Could not find any versions of model nope");
    /* and still serving */
    check_half_plus_two(port, model);
}

START_TEST(test_e2e_demo_model)
{
    char base[4096];
    snprintf(base, sizeof base, "%s/models/half_plus_two", TFS_BINARY_DIR);
    tfs_test_server s;
    start(&s, "half_plus_two", base);
    check_half_plus_two(s.rest_port, "half_plus_two");
    expect_json(s.rest_port, "GET", "/v1/models/half_plus_two", NULL, 200,
                "{\"model_version_status\": [{\"version\": \"1\", \"state\": \"AVAILABLE\","
                " \"status\": {\"error_code\": \"OK\", \"error_message\": \"\"}}]}");
    check_errors(s.rest_port, "half_plus_two");
    stop(&s);
}
END_TEST

START_TEST(test_e2e_tf1_fixture)
{
    if (tfs_test_skip_without_fixture(__func__, TF1_BASE))
        return;
    char base[4096], meta[4096];
    tfs_test_fixture(TF1_BASE, base, sizeof base);
    tfs_test_server s;
    /* the expected metadata document names the model "default" (TF Serving's default name) */
    start(&s, "default", base);
    check_half_plus_two(s.rest_port, "default");
    expect_json(s.rest_port, "GET", "/v1/models/default", NULL, 200,
                "{\"model_version_status\": [{\"version\": \"123\", \"state\": \"AVAILABLE\","
                " \"status\": {\"error_code\": \"OK\", \"error_message\": \"\"}}]}");
    char *want = tfs_test_read_file(tfs_test_fixture("tf_serving/half_plus_two_model_metadata.json",
                                                     meta, sizeof meta), NULL);
    ck_assert_ptr_nonnull(want);
    expect_json(s.rest_port, "GET", "/v1/models/default/metadata", NULL, 200, want);
    expect_json(s.rest_port, "GET", "/v1/models/default/versions/123/metadata", NULL, 200, want);
    free(want);
    expect_error(s.rest_port, "POST", "/v1/models/default/versions/7:predict", "{\"instances\": [1.0]}",
                 404, "Servable not found for request: Specific(default, 7)");
    check_errors(s.rest_port, "default");
    stop(&s);
}
END_TEST

START_TEST(test_e2e_tf2_fixture)
{
    if (tfs_test_skip_without_fixture(__func__, TF2_BASE))
        return;
    char base[4096];
    tfs_test_fixture(TF2_BASE, base, sizeof base);
    tfs_test_server s;
    start(&s, "half_plus_two", base);
    check_half_plus_two(s.rest_port, "half_plus_two");
    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/v1/models/half_plus_two/metadata", NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *j = parse(&r);
    json_t *sigs = json_object_get(json_object_get(json_object_get(j, "metadata"), "signature_def"),
                                   "signature_def");
    ck_assert_int_eq(json_object_size(sigs), 7);   /* 6 signatures + __saved_model_init_op */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(
                         json_object_get(sigs, "serving_default"), "inputs"), "x"), "name")),
                     "serving_default_x:0");
    json_decref(j);
    tfs_http_reply_free(&r);
    stop(&s);
}
END_TEST

/* A version that cannot load is reported, and the server keeps answering. */
START_TEST(test_e2e_broken_model_reported)
{
    if (tfs_test_skip_without_fixture(__func__, TF1_BASE))
        return;
    char src[4096], dir[4200];
    tfs_test_fixture(TF1_BASE "/00000123", src, sizeof src);
    char *tmp = tfs_test_mkdtemp();
    snprintf(dir, sizeof dir, "%s/5", tmp);
    ck_assert_int_eq(tfs_test_copytree(src, dir), 0);
    snprintf(dir, sizeof dir, "%s/5/saved_model.pb", tmp);
    ck_assert_int_eq(tfs_test_write_file(dir, "not a protobuf at all", 21), 0);
    tfs_test_server s;
    start(&s, "broken", tmp);
    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/v1/models/broken", NULL);
    ck_assert_int_eq(r.status, 200);
    json_t *j = parse(&r);
    json_t *v0 = json_array_get(json_object_get(j, "model_version_status"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(v0, "state")), "END");
    json_t *status = json_object_get(v0, "status");
    ck_assert_str_eq(json_string_value(json_object_get(status, "error_code")), "DATA_LOSS");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(status, "error_message")),
                                 "saved_model.pb"));
    json_decref(j);
    tfs_http_reply_free(&r);
    expect_error(s.rest_port, "POST", "/v1/models/broken:predict", "{\"instances\": [1.0]}", 404,
                 "Servable not found for request: Latest(broken)");
    stop(&s);
    tfs_test_rmtree(tmp);
    free(tmp);
}
END_TEST

Suite *suite_server_e2e(void);
Suite *suite_server_e2e(void)
{
    Suite *s = suite_create("e2e");
    TCase *tc = tcase_create("rest");
    tcase_set_timeout(tc, 120);
    tcase_set_tags(tc, "system");
    tcase_add_test(tc, test_e2e_demo_model);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("rest_fixtures", "system");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_e2e_tf1_fixture);
    tcase_add_test(tc, test_e2e_tf2_fixture);
    tcase_add_test(tc, test_e2e_broken_model_reported);
    suite_add_tcase(s, tc);
    return s;
}
