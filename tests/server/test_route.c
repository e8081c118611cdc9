/* URL grammar of the REST API (server/route.c), the code -> HTTP status table (codes.c) and the
 * answers rest.c gives before it needs a model: TF Serving's regexes, matched case-insensitively,
 * with its exact texts for malformed requests. */
#include <check.h>
#include <jansson.h>
#include <string.h>

#include "server/server-impl.h"

/* Parses into *r and asserts success; the caller deinits. (A route is filled in place: its
 * strings may live inside it.) */
static void ok(tfs__route *r, const char *method, const char *path)
{
    tfs_status st;
    ck_assert_msg(tfs__route_parse(method, path, r, &st) == TFS_OK, "%s %s: %s", method, path,
                  st.msg);
}

static void bad(const char *method, const char *path, const char *msg)
{
    tfs__route r;
    tfs_status st;
    ck_assert_int_eq(tfs__route_parse(method, path, &r, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(st.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, msg);
}

START_TEST(test_route_predict_forms)
{
    tfs__route r;
    ok(&r, "POST", "/v1/models/half_plus_two:predict");
    ck_assert_int_eq(r.kind, TFS__ROUTE_PREDICT);
    ck_assert_str_eq(r.name, "half_plus_two");
    ck_assert_int_eq(r.version, -1);
    ck_assert_ptr_null(r.label);
    tfs__route_deinit(&r);

    ok(&r, "POST", "/v1/models/m/versions/00000123:predict");
    ck_assert_str_eq(r.name, "m");
    ck_assert_int_eq(r.version, 123);
    tfs__route_deinit(&r);

    ok(&r, "POST", "/v1/models/m/labels/stable:classify");
    ck_assert_int_eq(r.kind, TFS__ROUTE_CLASSIFY);
    ck_assert_str_eq(r.label, "stable");
    ck_assert_int_eq(r.version, -1);
    tfs__route_deinit(&r);

    ok(&r, "POST", "/v1/models/m:regress");
    ck_assert_int_eq(r.kind, TFS__ROUTE_REGRESS);
    tfs__route_deinit(&r);
}
END_TEST

START_TEST(test_route_case_insensitive)
{
    /* The literals match in any case; the verb must then be lower case exactly. */
    tfs__route r;
    ok(&r, "POST", "/V1/MODELS/Mixed/VERSIONS/7:predict");
    ck_assert_str_eq(r.name, "Mixed");
    ck_assert_int_eq(r.version, 7);
    tfs__route_deinit(&r);
    ok(&r, "GET", "/v1/Models/m/Labels/L");
    ck_assert_int_eq(r.kind, TFS__ROUTE_STATUS);
    ck_assert_str_eq(r.label, "L");
    tfs__route_deinit(&r);
    bad("POST", "/v1/models/m:PREDICT", "Malformed request: POST /v1/models/m:PREDICT");
    /* "/METADATA" matches the regex but is not "metadata": a status request, as in TF Serving */
    ok(&r, "GET", "/v1/models/m/METADATA");
    ck_assert_int_eq(r.kind, TFS__ROUTE_STATUS);
    ck_assert_str_eq(r.name, "m");
    tfs__route_deinit(&r);
}
END_TEST

START_TEST(test_route_get_forms)
{
    tfs__route r;
    ok(&r, "GET", "/v1/models/m");
    ck_assert_int_eq(r.kind, TFS__ROUTE_STATUS);
    ck_assert_int_eq(r.version, -1);
    tfs__route_deinit(&r);
    ok(&r, "GET", "/v1/models/m/versions/3");
    ck_assert_int_eq(r.kind, TFS__ROUTE_STATUS);
    ck_assert_int_eq(r.version, 3);
    tfs__route_deinit(&r);
    ok(&r, "GET", "/v1/models/m/metadata");
    ck_assert_int_eq(r.kind, TFS__ROUTE_METADATA);
    ck_assert_str_eq(r.name, "m");
    tfs__route_deinit(&r);
    ok(&r, "GET", "/v1/models/m/versions/3/metadata");
    ck_assert_int_eq(r.kind, TFS__ROUTE_METADATA);
    ck_assert_int_eq(r.version, 3);
    tfs__route_deinit(&r);
    ok(&r, "GET", "/v1/models/m/labels/canary/metadata");
    ck_assert_int_eq(r.kind, TFS__ROUTE_METADATA);
    ck_assert_str_eq(r.label, "canary");
    tfs__route_deinit(&r);
    /* The regex takes "metadata" as the model name when it is the only segment. */
    ok(&r, "GET", "/v1/models/metadata");
    ck_assert_int_eq(r.kind, TFS__ROUTE_STATUS);
    ck_assert_str_eq(r.name, "metadata");
    tfs__route_deinit(&r);
}
END_TEST

START_TEST(test_route_unescape)
{
    tfs__route r;
    ok(&r, "POST", "/v1/models/half%5Fplus%5ftwo/labels/a%2Fb:predict");
    ck_assert_str_eq(r.name, "half_plus_two");
    ck_assert_str_eq(r.label, "a/b");
    tfs__route_deinit(&r);
    /* a broken escape is kept as written */
    ok(&r, "GET", "/v1/models/a%zzb%4");
    ck_assert_str_eq(r.name, "a%zzb%4");
    tfs__route_deinit(&r);
}
END_TEST

/* A name with a control character, escaped or raw, is no model's name: NOT_FOUND, never the name
 * cut at a NUL; a label with one is an unrecognized label. */
START_TEST(test_route_control_characters)
{
    static const char *const names[] = {
        "/v1/models/half%00x", "/v1/models/half%00", "/v1/models/half%01/metadata",
        "/v1/models/half%1F", "/v1/models/half%7f/versions/1", "/v1/models/half%0a",
        "/v1/models/half\x01", "/v1/models/half\t",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tfs__route r;
        tfs_status st;
        ck_assert_int_eq(tfs__route_parse("GET", names[i], &r, &st), TFS_NOT_FOUND);
        ck_assert_msg(strstr(st.msg, "control character") != NULL, "%s: %s", names[i], st.msg);
    }
    tfs__route r;
    tfs_status st;
    ck_assert_int_eq(tfs__route_parse("POST", "/v1/models/half%00:predict", &r, &st),
                     TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Servable not found: the model name has control character 0x00 at "
                             "byte 4 (after percent-decoding); no model is named so");
    ck_assert_int_eq(tfs__route_parse("POST", "/v1/models/half/labels/a%00:predict", &r, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st.msg, "control character 0x00 at byte 1") != NULL, "%s", st.msg);
    /* %20 and bytes above 0x7f are not control characters */
    ok(&r, "GET", "/v1/models/a%20b%C3%A9");
    ck_assert_str_eq(r.name, "a b\xc3\xa9");
    tfs__route_deinit(&r);
}
END_TEST

START_TEST(test_route_errors)
{
    bad("GET", "/v1/models", "Missing model name in request.");
    bad("GET", "/v1/models/versions/3", "Missing model name in request.");
    bad("GET", "/v1/models/labels/x/metadata", "Missing model name in request.");
    bad("GET", "/v1/models/m/versions/99999999999999999999",
        "Failed to convert version: 99999999999999999999 to numeric.");
    bad("POST", "/v1/models/m/versions/99999999999999999999:predict",
        "Failed to convert version: 99999999999999999999 to numeric.");
    bad("PUT", "/v1/models/m:predict", "Malformed request: PUT /v1/models/m:predict");
    bad("DELETE", "/v1/models/m", "Malformed request: DELETE /v1/models/m");
    bad("GET", "/v1/models/m:predict", "Malformed request: GET /v1/models/m:predict");
    bad("POST", "/v1/models/m", "Malformed request: POST /v1/models/m");
    bad("POST", "/v1/models/m:explain", "Malformed request: POST /v1/models/m:explain");
    bad("POST", "/v1/models/m/versions/1/labels/x:predict",
        "Malformed request: POST /v1/models/m/versions/1/labels/x:predict");
    bad("GET", "/v1/models/m/versions/x", "Malformed request: GET /v1/models/m/versions/x");
    bad("GET", "/v1/models/m/extra", "Malformed request: GET /v1/models/m/extra");
    bad("POST", "/v1/models/:predict", "Malformed request: POST /v1/models/:predict");
    bad("GET", "/v1/other", "Malformed request: GET /v1/other");
}
END_TEST

START_TEST(test_route_is_api)
{
    ck_assert(tfs__route_is_api("/v1/models/m"));
    ck_assert(tfs__route_is_api("/V1/"));
    ck_assert(!tfs__route_is_api("/v1"));
    ck_assert(!tfs__route_is_api("/"));
    ck_assert(tfs__route_is_api("/v2/models/m"));
    ck_assert(tfs__route_is_api("/v2"));
    ck_assert(!tfs__route_is_api("/v2x"));
    ck_assert(!tfs__route_is_api("/V2/models/m"));   /* v2's strings are case-sensitive */
}
END_TEST

/* KServe v2 paths: each endpoint's kind, the version as a number, a label refused as no version
 * (404), ?signature_name= on model metadata, wrong methods and case malformed. */
START_TEST(test_route_v2)
{
    static const struct {
        const char          *method, *path;
        enum tfs__route_kind kind;
        const char          *name;
        int64_t              version;
    } ok[] = {
        {"GET", "/v2", TFS__ROUTE_V2_SERVER, NULL, -1},
        {"GET", "/v2/", TFS__ROUTE_V2_SERVER, NULL, -1},
        {"GET", "/v2/health/live", TFS__ROUTE_V2_LIVE, NULL, -1},
        {"GET", "/v2/health/ready", TFS__ROUTE_V2_READY, NULL, -1},
        {"GET", "/v2/models/m", TFS__ROUTE_V2_MODEL, "m", -1},
        {"GET", "/v2/models/m%2Fx/versions/12", TFS__ROUTE_V2_MODEL, "m/x", 12},
        {"GET", "/v2/models/m/ready", TFS__ROUTE_V2_MODEL_READY, "m", -1},
        {"GET", "/v2/models/m/versions/3/ready", TFS__ROUTE_V2_MODEL_READY, "m", 3},
        {"POST", "/v2/models/m/infer", TFS__ROUTE_V2_INFER, "m", -1},
        {"POST", "/v2/models/m/versions/007/infer", TFS__ROUTE_V2_INFER, "m", 7},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        tfs__route r;
        tfs_status st;
        ck_assert_msg(tfs__route_parse(ok[i].method, ok[i].path, &r, &st) == TFS_OK, "%s: %s",
                      ok[i].path, st.msg);
        ck_assert_int_eq(r.kind, ok[i].kind);
        ck_assert_int_eq(r.version, ok[i].version);
        if (ok[i].name)
            ck_assert_str_eq(r.name, ok[i].name);
        else
            ck_assert_ptr_null(r.name);
        ck_assert_ptr_null(r.signature);
        tfs__route_deinit(&r);
    }
    tfs__route r;
    tfs_status st;
    ck_assert_int_eq(tfs__route_parse("GET", "/v2/models/m?a=1&signature_name=s%20t", &r, &st),
                     TFS_OK);
    ck_assert_str_eq(r.signature, "s t");
    tfs__route_deinit(&r);
    ck_assert_int_eq(tfs__route_parse("GET", "/v2/models/m/versions/stable", &r, &st),
                     TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "labels are /v1 only"));
    ck_assert_int_eq(tfs__route_parse("POST", "/v2/models/m/ready", &r, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs__route_parse("GET", "/v2/models/m/infer", &r, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs__route_parse("POST", "/v2/models/m/INFER", &r, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs__route_parse("GET", "/v2/models/", &r, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs__route_parse("GET", "/v2/health", &r, &st), TFS_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_route_http_status_table)
{
    ck_assert_int_eq(tfs__http_status(TFS_OK), 200);
    ck_assert_int_eq(tfs__http_status(TFS_CANCELLED), 499);
    ck_assert_int_eq(tfs__http_status(TFS_UNKNOWN), 500);
    ck_assert_int_eq(tfs__http_status(TFS_INVALID_ARGUMENT), 400);
    ck_assert_int_eq(tfs__http_status(TFS_DEADLINE_EXCEEDED), 504);
    ck_assert_int_eq(tfs__http_status(TFS_NOT_FOUND), 404);
    ck_assert_int_eq(tfs__http_status(TFS_ALREADY_EXISTS), 409);
    ck_assert_int_eq(tfs__http_status(TFS_PERMISSION_DENIED), 403);
    ck_assert_int_eq(tfs__http_status(TFS_RESOURCE_EXHAUSTED), 429);
    ck_assert_int_eq(tfs__http_status(TFS_FAILED_PRECONDITION), 400);
    ck_assert_int_eq(tfs__http_status(TFS_ABORTED), 409);
    ck_assert_int_eq(tfs__http_status(TFS_OUT_OF_RANGE), 400);
    ck_assert_int_eq(tfs__http_status(TFS_UNIMPLEMENTED), 501);
    ck_assert_int_eq(tfs__http_status(TFS_INTERNAL), 500);
    ck_assert_int_eq(tfs__http_status(TFS_UNAVAILABLE), 503);
    ck_assert_int_eq(tfs__http_status(TFS_DATA_LOSS), 500);
    ck_assert_int_eq(tfs__http_status(TFS_UNAUTHENTICATED), 401);
}
END_TEST

/* rest.c answers these before it looks at any model, so no loader is needed. */
START_TEST(test_route_rest_answers_without_model)
{
    tfs__rest_response resp;
    tfs__rest_process(NULL, "GET", "/index.html", NULL, 0, &resp);
    ck_assert_int_eq(resp.http_status, 404);
    ck_assert_str_eq(resp.content_type, "text/html");
    tfs__buf_deinit(&resp.body);

    tfs__rest_process(NULL, "PATCH", "/v1/models/m", "", 0, &resp);
    ck_assert_int_eq(resp.http_status, 400);
    ck_assert_str_eq(resp.content_type, "application/json");
    json_t *j = json_loads(resp.body.data, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_object_size(j), 1);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")),
                     "Malformed request: PATCH /v1/models/m");
    json_decref(j);
    tfs__buf_deinit(&resp.body);

    tfs__rest_process(NULL, "GET", "/v1/models", "", 0, &resp);
    ck_assert_int_eq(resp.http_status, 400);
    ck_assert_str_eq(resp.body.data, "{\n    \"error\": \"Missing model name in request.\"\n}");
    tfs__buf_deinit(&resp.body);
}
END_TEST

Suite *suite_server_route(void);
Suite *suite_server_route(void)
{
    Suite *s = suite_create("route");
    TCase *tc = tcase_create("grammar");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_route_predict_forms);
    tcase_add_test(tc, test_route_case_insensitive);
    tcase_add_test(tc, test_route_get_forms);
    tcase_add_test(tc, test_route_unescape);
    tcase_add_test(tc, test_route_errors);
    tcase_add_test(tc, test_route_control_characters);
    tcase_add_test(tc, test_route_is_api);
    tcase_add_test(tc, test_route_v2);
    tcase_add_test(tc, test_route_http_status_table);
    tcase_add_test(tc, test_route_rest_answers_without_model);
    suite_add_tcase(s, tc);
    return s;
}
