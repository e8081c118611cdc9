/* --model_config_file: the ModelServerConfig -> tfs_model_config converter (policies, labels,
 * platform rules, error texts with file:line:col), and the real tfserve started with a config
 * file serving two models, serving TF Serving's version policies (latest{2}, all, specific) and
 * labels over REST, refusing a broken file and a duplicated model name with messages that name
 * the file; and the poller re-reading a file (acting on real changes only, logging a broken file
 * once).
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/config-impl.h"
#include "tests/support/tfs-models.h"
#include "tests/support/tfs-proc.h"
#include "tests/support/tfs-test.h"

/* Writes text to <dir>/name (through a rename, so a poller never reads half of it) and returns
 * the path (static buffer). */
static const char *write_config(const char *dir, const char *name, const char *text)
{
    static char path[4200];
    char        tmp[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_eq(tfs_test_write_file(tmp, text, strlen(text)), 0);
    ck_assert_int_eq(rename(tmp, path), 0);
    return path;
}

static tfs__model_list *read_ok(const char *dir, const char *text)
{
    tfs__model_list *l = NULL;
    tfs_status       st;
    const char      *path = write_config(dir, "ok.config", text);
    ck_assert_msg(tfs__config_read_file(path, &l, &st) == TFS_OK, "%s", st.msg);
    ck_assert_ptr_nonnull(l);
    return l;
}

/* Asserts reading text fails with code and the message "<path>" + want_after_path. */
static void read_err(const char *dir, const char *text, enum tfs_code code, const char *want)
{
    tfs__model_list *l = (tfs__model_list *)1;
    tfs_status       st;
    const char      *path = write_config(dir, "bad.config", text);
    ck_assert_int_eq(tfs__config_read_file(path, &l, &st), code);
    ck_assert_ptr_null(l);
    char full[4400];
    snprintf(full, sizeof full, "%s%s", path, want);
    ck_assert_msg(strcmp(st.msg, full) == 0, "\n got  '%s'\n want '%s'", st.msg, full);
}

START_TEST(converter_policies_labels_platform)
{
    char            *dir = tfs_test_mkdtemp();
    tfs__model_list *l = read_ok(dir,
        "model_config_list {\n"
        "  config { name: 'a' base_path: '/m/a' model_platform: 'tensorflow' }\n"
        "  config { name: 'b' base_path: '/m/b' model_platform: 'tensorflow'\n"
        "           model_version_policy { latest { num_versions: 3 } } }\n"
        "  config { name: 'c' base_path: '/m/c' model_type: TENSORFLOW\n"
        "           model_version_policy { all {} } }\n"
        "  config { name: 'd' base_path: '/m/d' model_platform: 'tensorflow'\n"
        "           model_version_policy { specific { versions: [3, 1] } }\n"
        "           version_labels { key: 'stable' value: 1 }\n"
        "           version_labels { key: 'canary' value: 3 } }\n"
        "  config { name: 'e' base_path: '/m/e' model_platform: 'tensorflow'\n"
        "           model_version_policy { latest {} } }\n"
        "  config { name: 'f' base_path: '/m/f' model_platform: 'tensorflow'\n"
        "           model_version_policy {} version_labels { key: 'x' value: 7 } }\n"
        "}\n");
    ck_assert_int_eq(l->n_models, 6);
    ck_assert(!l->config_unset);
    const tfs_model_config *m = l->models;
    ck_assert_str_eq(m[0].name, "a");
    ck_assert_str_eq(m[0].base_path, "/m/a");
    ck_assert_str_eq(m[0].platform, "tensorflow");
    ck_assert_int_eq(m[0].policy.kind, TFS_POLICY_LATEST);   /* unset: latest 1 */
    ck_assert_int_eq(m[0].policy.num_versions, 1);
    ck_assert_int_eq(m[0].n_labels, 0);
    ck_assert_int_eq(m[1].policy.kind, TFS_POLICY_LATEST);
    ck_assert_int_eq(m[1].policy.num_versions, 3);
    ck_assert_str_eq(m[2].platform, "tensorflow");            /* from the deprecated model_type */
    ck_assert_int_eq(m[2].policy.kind, TFS_POLICY_ALL);
    ck_assert_int_eq(m[3].policy.kind, TFS_POLICY_SPECIFIC);
    ck_assert_int_eq(m[3].policy.n_versions, 2);
    ck_assert(m[3].policy.versions[0] == 3 && m[3].policy.versions[1] == 1);
    ck_assert_int_eq(m[3].n_labels, 2);
    ck_assert_str_eq(m[3].labels[0].label, "stable");
    ck_assert(m[3].labels[0].version == 1);
    ck_assert_str_eq(m[3].labels[1].label, "canary");
    ck_assert(m[3].labels[1].version == 3);
    ck_assert_int_eq(m[4].policy.kind, TFS_POLICY_LATEST);    /* num_versions 0 means 1 */
    ck_assert_int_eq(m[4].policy.num_versions, 1);
    ck_assert_int_eq(m[5].policy.kind, TFS_POLICY_LATEST);    /* empty policy: latest 1 */
    ck_assert_int_eq(m[5].policy.num_versions, 1);
    ck_assert_int_eq(m[5].n_labels, 1);
    ck_assert_str_eq(m[5].labels[0].label, "x");
    tfs__config_free(l);

    /* An empty file is an unset config (serves nothing); an empty list is a set one. */
    l = read_ok(dir, "# nothing here\n");
    ck_assert(l->config_unset && l->n_models == 0);
    tfs__config_free(l);
    l = read_ok(dir, "model_config_list {}");
    ck_assert(!l->config_unset && l->n_models == 0);
    tfs__config_free(l);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(converter_errors)
{
    char *dir = tfs_test_mkdtemp();
    read_err(dir, "model_config_list {\n  config {\n    nmae: 'x'\n  }\n}\n", TFS_INVALID_ARGUMENT,
             ":3:5: unknown field 'nmae' in tensorflow.serving.ModelConfig");
    read_err(dir, "model_config_list { config { name: 'x' base_path: '/x' }", TFS_INVALID_ARGUMENT,
             ":1:57: expected '}' before end of input (to close the '{' at 1:19)");
    read_err(dir, "model_config_list { config { name: 'x' base_path: '/x' } }",
             TFS_FAILED_PRECONDITION,
             ": model 'x': Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
             "ModelServerConfig::model_platform.");
    read_err(dir, "model_config_list { config { name: 'y' model_type: TENSORFLOW "
                  "model_platform: 'tensorflow' } }", TFS_FAILED_PRECONDITION,
             ": model 'y': Illegal setting both ModelServerConfig::model_type (deprecated) and "
             "ModelServerConfig::model_platform.");
    read_err(dir, "model_config_list { config { name: 'z' model_type: OTHER } }",
             TFS_INVALID_ARGUMENT, ": model 'z': ModelServerConfig::model_type choice 2 not "
             "supported.");
    /* The loader's checks, located at the offending model's `config {`. */
    read_err(dir, "model_config_list {\n  config { name: 'a' base_path: '/a' model_platform: "
                  "'tensorflow' }\n  config { name: 'a' base_path: '/b' model_platform: "
                  "'tensorflow' }\n}\n", TFS_INVALID_ARGUMENT,
             ":3:10: Illegal to list model a multiple times in config list");
    read_err(dir, "model_config_list {\n  config <\n    name: 'r' base_path: 'rel/path'\n"
                  "    model_platform: 'tensorflow'\n  >\n}\n", TFS_INVALID_ARGUMENT,
             ":2:10: Expected model r to have an absolute path or URI; got base_path()=rel/path");
    read_err(dir, "model_config_list { config { name: 's' base_path: '/s' model_platform: "
                  "'tensorflow' model_version_policy { specific { } } } }", TFS_INVALID_ARGUMENT,
             ":1:28: model 's': the specific version policy lists no versions");
    read_err(dir, "custom_model_config { type_url: 'x' }", TFS_INVALID_ARGUMENT,
             ": custom_model_config is not supported (tfserve serves a model_config_list only)");

    tfs__model_list *l = (tfs__model_list *)1;
    tfs_status       st;
    ck_assert_int_eq(tfs__config_read_file("/nonexistent/models.config", &l, &st), TFS_NOT_FOUND);
    ck_assert_ptr_null(l);
    ck_assert_str_eq(st.msg, "could not open '/nonexistent/models.config': No such file or "
                             "directory");
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- the poller ------------------------------------------------------------------------------ */

/* Log lines of module "config", collected by a sink. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char            log_buf[16384];

static void sink(enum tfs_log_level level, const char *module, const char *line, void *user)
{
    (void)level, (void)user;
    if (strcmp(module, "config") != 0)
        return;
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(log_buf);
    snprintf(log_buf + n, sizeof log_buf - n, "%s\n", line);
    pthread_mutex_unlock(&log_mu);
}

static int count_in_log(const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&log_mu);
    for (const char *p = log_buf; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    pthread_mutex_unlock(&log_mu);
    return n;
}

/* Waits up to 5 s for needle to appear `times` times in the log. */
static bool wait_log(const char *needle, int times)
{
    for (int i = 0; i < 100; i++) {
        if (count_in_log(needle) >= times)
            return true;
        usleep(50000);
    }
    return false;
}

START_TEST(poller_acts_on_changes_only)
{
    char *dir = tfs_test_mkdtemp();
    char  demo[4200], one[9000], two[9000], want[4400];
    snprintf(demo, sizeof demo, "%s/models/half_plus_two", TFS_BINARY_DIR);
    snprintf(one, sizeof one, "model_config_list { config { name: 'a' base_path: '%s' "
             "model_platform: 'tensorflow' } }\n", demo);
    snprintf(two, sizeof two, "model_config_list { config { name: 'a' base_path: '%s' "
             "model_platform: 'tensorflow' } config { name: 'b' base_path: '%s' "
             "model_platform: 'tensorflow' } }\n", demo, demo);
    const char      *path = write_config(dir, "poll.config", one);
    char             cfg_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s", path);
    tfs__model_list *start = NULL;
    tfs_status       st;
    ck_assert_int_eq(tfs__config_read_file(cfg_path, &start, &st), TFS_OK);
    tfs_loader_opts lo = tfs_loader_opts_default();
    lo.file_system_poll_wait_seconds = 0;
    tfs_loader *l = NULL;
    ck_assert_msg(tfs_loader_new(start->models, start->n_models, &lo, &l, &st) == TFS_OK, "%s",
                  st.msg);
    log_buf[0] = 0;
    tfs_log_set_sink(sink, NULL);
    tfs__config_poll *p = NULL;
    ck_assert_int_eq(tfs__config_poll_start(l, cfg_path, 0.1, start, &p, &st), TFS_OK);

    /* Same content, other comments and spacing: nothing to apply. */
    char edited[9100];
    snprintf(edited, sizeof edited, "# a comment\n\n%s", one);
    write_config(dir, "poll.config", edited);
    usleep(400000);
    ck_assert_int_eq(count_in_log("changed: applying"), 0);
    /* A broken file: its error with file:line:col, logged once however many polls see it. */
    write_config(dir, "poll.config", "model_config_list {\n  config { nmae: 'a' }\n}\n");
    snprintf(want, sizeof want, "%s:2:12: unknown field 'nmae'", cfg_path);
    ck_assert_msg(wait_log(want, 1), "no error logged; log:\n%s", log_buf);
    usleep(400000);
    ck_assert_int_eq(count_in_log(want), 1);
    /* A real change is applied (the loader's reload decides whether it succeeds). */
    write_config(dir, "poll.config", two);
    ck_assert_msg(wait_log("changed: applying 2 model(s)", 1), "log:\n%s", log_buf);
    usleep(400000);
    ck_assert_int_eq(count_in_log("changed: applying"), 1);   /* once, not every period */
    tfs__config_poll_stop(p);
    tfs_log_set_sink(NULL, NULL);
    tfs_loader_free(l);
    tfs__config_free(start);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- the real tfserve ------------------------------------------------------------------------ */

/* Runs tfserve with args until it exits (it must: these configs are broken); returns its exit
 * status and its output in out. */
static int run_to_exit(const char *args, char *out, size_t n)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "timeout 30 %s/server/tfserve --port=%d %s 2>&1", TFS_BINARY_DIR,
             tfs_test_free_port(), args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t len = fread(out, 1, n - 1, p);
    out[len] = 0;
    return pclose(p);
}

static void expect_predict(int port, const char *model, const char *body, const char *want)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s:predict", model);
    tfs_http_reply r = tfs_http(port, "POST", path, body);
    ck_assert_msg(r.status == 200, "%s: status %d: %s", path, r.status, r.body ? r.body : "");
    json_t *got = json_loads(r.body, 0, NULL), *exp = json_loads(want, 0, NULL);
    ck_assert_msg(got && exp && json_equal(got, exp), "%s: got %s, want %s", path, r.body, want);
    json_decref(got);
    json_decref(exp);
    tfs_http_reply_free(&r);
}

/* Serves the demo model as "first" and the model under second_base (NULL: the demo model again)
 * as "second" from one config file, both answering half_plus_two. */
static void serve_two_models(const char *second_base)
{
    char *dir = tfs_test_mkdtemp();
    char  demo[4200], text[10000], flag[4300];
    snprintf(demo, sizeof demo, "%s/models/half_plus_two", TFS_BINARY_DIR);
    snprintf(text, sizeof text,
             "# two models\n"
             "model_config_list {\n"
             "  config { name: 'first' base_path: '%s' model_platform: 'tensorflow' }\n"
             "  config: {\n"
             "    name: \"second\", base_path: \"%s\", model_platform: \"tensorflow\",\n"
             "    model_version_policy { latest { num_versions: 1 } }\n"
             "  }\n"
             "}\n", demo, second_base ? second_base : demo);
    snprintf(flag, sizeof flag, "--model_config_file=%s", write_config(dir, "models.config", text));
    /* --model_base_path is ignored when a config file is given, as in TF Serving. */
    const char     *flags[] = {flag, "--model_base_path=/does/not/exist", NULL};
    tfs_test_server s;
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    expect_predict(s.rest_port, "first", "{\"instances\": [1.0, 2.0]}",
                   "{\"predictions\": [2.5, 3.0]}");
    expect_predict(s.rest_port, "second", "{\"instances\": [[1.0], [6.0]]}",
                   "{\"predictions\": [[2.5], [5.0]]}");
    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/v1/models/default", NULL);
    ck_assert_int_eq(r.status, 404);   /* the single-model flags did not add a model */
    tfs_http_reply_free(&r);
    int status = tfs_test_server_stop(&s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    tfs_test_rmtree(dir);
    free(dir);
}

START_TEST(tfserve_serves_two_models_from_a_config_file)
{
    serve_two_models(NULL);
}
END_TEST

/* The second model is TF Serving's own TF1 export. */
START_TEST(tfserve_serves_a_tf_serving_export_from_a_config_file)
{
    char tf1[4200];
    if (tfs_test_skip_without_fixture(__func__, "tf_serving/saved_model_half_plus_two_cpu"))
        return;
    serve_two_models(tfs_test_fixture("tf_serving/saved_model_half_plus_two_cpu", tf1, sizeof tf1));
}
END_TEST

static bool log_has(const char *path, const char *needle)
{
    char *text = tfs_test_read_file(path, NULL);
    bool  found = text && strstr(text, needle);
    free(text);
    return found;
}

/* POST {"instances": [2.0]} to /v1/models/<path>:predict: the version that answered (the test
 * models compute 0.5 x + V), or -HTTP status; the error text goes to err. */
static int64_t served_by(int port, const char *path, char *err, size_t n)
{
    char url[512];
    snprintf(url, sizeof url, "/v1/models/%s:predict", path);
    tfs_http_reply r = tfs_http(port, "POST", url, "{\"instances\": [2.0]}");
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    int64_t v = -r.status;
    if (r.status == 200)
        v = (int64_t)(json_number_value(json_array_get(json_object_get(j, "predictions"), 0)) -
                      1.0 + 0.5);
    snprintf(err, n, "%s", r.status == 200 ? "" : json_string_value(json_object_get(j, "error")));
    json_decref(j);
    tfs_http_reply_free(&r);
    return v;
}

/* GET /v1/models/<name>: "3:AVAILABLE 2:END ..." in the order served (static buffer). */
static const char *version_states(int port, const char *name)
{
    static char buf[512];
    char        url[300];
    snprintf(url, sizeof url, "/v1/models/%s", name);
    tfs_http_reply r = tfs_http(port, "GET", url, NULL);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *list = json_object_get(j, "model_version_status");
    size_t  used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < json_array_size(list) && used < sizeof buf; i++) {
        json_t *v = json_array_get(list, i);
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s:%s", i ? " " : "",
                                 json_string_value(json_object_get(v, "version")),
                                 json_string_value(json_object_get(v, "state")));
    }
    json_decref(j);
    tfs_http_reply_free(&r);
    return buf;
}

static void expect_served(int port, const char *path, int64_t want, const char *want_err)
{
    char    err[512];
    int64_t got = served_by(port, path, err, sizeof err);
    ck_assert_msg(got == want, "%s: served by %lld (%s), want %lld", path, (long long)got, err,
                  (long long)want);
    if (want_err)
        ck_assert_msg(strcmp(err, want_err) == 0, "%s: error '%s', want '%s'", path, err,
                      want_err);
}

/* Waits up to 10 s for GET /v1/models/<name> to list `want`. */
static void expect_states(int port, const char *name, const char *want)
{
    for (int i = 0; i < 200 && strcmp(version_states(port, name), want) != 0; i++)
        usleep(50000);
    ck_assert_msg(strcmp(version_states(port, name), want) == 0, "%s: '%s', want '%s'", name,
                  version_states(port, name), want);
}

/* TF Serving's version policies and labels through the real server, from one config file over
 * one base path holding versions 1-3 (version V answers 0.5 x + V): latest{2} serves 3 and 2,
 * all{} every version, specific{1, 3, 7} the listed versions present, labels pick versions; a
 * version outside a policy is NOT_FOUND with TF Serving's text, an unknown label
 * INVALID_ARGUMENT. A new version 4 is taken by latest{2} (2 unloads) and all{}, not by specific.
 */
START_TEST(tfserve_version_policies_and_labels)
{
    char *dir = tfs_test_mkdtemp(), base[4200], text[20000], flag[4300];
    snprintf(base, sizeof base, "%s/m", dir);
    ck_assert_int_eq(mkdir(base, 0755), 0);
    for (int v = 1; v <= 3; v++)
        tfs_test_write_version(base, v);
    char notes[4300];
    snprintf(notes, sizeof notes, "%s/notes", base);   /* not a version: ignored */
    ck_assert_int_eq(mkdir(notes, 0755), 0);
    snprintf(text, sizeof text,
             "model_config_list {\n"
             "  config { name: 'latest2' base_path: '%s' model_platform: 'tensorflow'\n"
             "           model_version_policy { latest { num_versions: 2 } } }\n"
             "  config { name: 'all' base_path: '%s' model_platform: 'tensorflow'\n"
             "           model_version_policy { all {} } }\n"
             "  config { name: 'specific' base_path: '%s' model_platform: 'tensorflow'\n"
             "           model_version_policy { specific { versions: [1, 3, 7] } }\n"
             "           version_labels { key: 'stable' value: 1 }\n"
             "           version_labels { key: 'canary' value: 3 } }\n"
             "}\n", base, base, base);
    snprintf(flag, sizeof flag, "--model_config_file=%s", write_config(dir, "models.config", text));
    const char     *flags[] = {flag, "--file_system_poll_wait_seconds=1", "--verbosity=debug",
                               NULL};
    tfs_test_server s;
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    int p = s.rest_port;
    /* --verbosity=debug: the debug line about the entry that is not a version */
    ck_assert_msg(log_has(s.log_path, " D loader: model 'latest2': ignoring 'notes' under "),
                  "no debug line; see %s", s.log_path);
    ck_assert_str_eq(version_states(p, "latest2"), "3:AVAILABLE 2:AVAILABLE");
    expect_served(p, "latest2", 3, NULL);
    expect_served(p, "latest2/versions/2", 2, NULL);
    expect_served(p, "latest2/versions/1", -404,
                  "Servable not found for request: Specific(latest2, 1)");
    ck_assert_str_eq(version_states(p, "all"), "3:AVAILABLE 2:AVAILABLE 1:AVAILABLE");
    expect_served(p, "all", 3, NULL);
    expect_served(p, "all/versions/1", 1, NULL);
    ck_assert_str_eq(version_states(p, "specific"), "3:AVAILABLE 1:AVAILABLE");
    expect_served(p, "specific", 3, NULL);
    expect_served(p, "specific/versions/2", -404,
                  "Servable not found for request: Specific(specific, 2)");
    expect_served(p, "specific/labels/stable", 1, NULL);
    expect_served(p, "specific/labels/canary", 3, NULL);
    expect_served(p, "specific/labels/nope", -400, "Unrecognized servable version label: nope");
    expect_served(p, "latest2/labels/stable", -400, "Unrecognized servable version label: stable");

    tfs_test_write_version(base, 4);
    expect_states(p, "latest2", "4:AVAILABLE 3:AVAILABLE 2:END");
    expect_served(p, "latest2", 4, NULL);
    expect_states(p, "all", "4:AVAILABLE 3:AVAILABLE 2:AVAILABLE 1:AVAILABLE");
    ck_assert_str_eq(version_states(p, "specific"), "3:AVAILABLE 1:AVAILABLE");
    expect_served(p, "specific", 3, NULL);
    int status = tfs_test_server_stop(&s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    unlink(s.log_path);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* TF Serving's saved_model_half_plus_two_2_versions (00000123, 00000124) under latest{2}: both
 * versions, compared as the integers their zero-padded folder names spell. */
START_TEST(tfserve_latest2_of_tf_serving_versions)
{
    const char *rel = "tf_serving/saved_model_half_plus_two_2_versions";
    char       *dir, fx[4200], text[5000], flag[4300];
    if (tfs_test_skip_without_fixture(__func__, rel))
        return;
    dir = tfs_test_mkdtemp();
    snprintf(text, sizeof text,
             "model_config_list {\n"
             "  config { name: 'hp2' base_path: '%s' model_platform: 'tensorflow'\n"
             "           model_version_policy { latest { num_versions: 2 } } }\n"
             "}\n", tfs_test_fixture(rel, fx, sizeof fx));
    snprintf(flag, sizeof flag, "--model_config_file=%s", write_config(dir, "models.config", text));
    const char     *flags[] = {flag, NULL};
    tfs_test_server s;
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    expect_states(s.rest_port, "hp2", "124:AVAILABLE 123:AVAILABLE");
    int status = tfs_test_server_stop(&s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    unlink(s.log_path);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* /readyz's entry for one model: "STATE|ERROR" (static buffer). */
static const char *ready_entry(int port, const char *name)
{
    static char buf[1024];
    tfs_http_reply r = tfs_http(port, "GET", "/readyz", NULL);
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL), *m;
    size_t  i;
    buf[0] = 0;
    json_array_foreach(json_object_get(j, "models"), i, m) {
        if (!strcmp(json_string_value(json_object_get(m, "name")), name))
            snprintf(buf, sizeof buf, "%s|%s", json_string_value(json_object_get(m, "state")),
                     json_is_string(json_object_get(m, "error"))
                         ? json_string_value(json_object_get(m, "error")) : "");
    }
    json_decref(j);
    tfs_http_reply_free(&r);
    return buf;
}

/* Base paths that cannot be read in a config file -- missing, a symlink loop, a regular file:
 * tfserve starts and serves the good model, warns at each bad model's `config {` (file:line:col),
 * and /readyz names each bad model with its reason; the missing one is served once its base path
 * appears (within two polls). A polled config that adds another bad model warns at its line and
 * changes nothing for the others. Run with --verbosity=warn: warnings only, no info lines. */
START_TEST(tfserve_unreadable_base_paths)
{
    char *dir = tfs_test_mkdtemp(), demo[4200], missing[4200], loop[4200], file[4200];
    char  text[32768], flag[4300], want[9000], cfg[4200];
    snprintf(demo, sizeof demo, "%s/models/half_plus_two", TFS_BINARY_DIR);
    snprintf(missing, sizeof missing, "%s/missing", dir);
    snprintf(loop, sizeof loop, "%s/loop", dir);
    ck_assert_int_eq(symlink(loop, loop), 0);
    snprintf(file, sizeof file, "%s/file", dir);
    ck_assert_int_eq(tfs_test_write_file(file, "not a folder", 12), 0);
    const char *fmt = "model_config_list {\n"
                      "  config { name: 'good' base_path: '%s' model_platform: 'tensorflow' }\n"
                      "  config { name: 'missing' base_path: '%s' model_platform: 'tensorflow' }\n"
                      "  config { name: 'loop' base_path: '%s' model_platform: 'tensorflow' }\n"
                      "  config { name: 'file' base_path: '%s' model_platform: 'tensorflow' }\n"
                      "%s}\n";
    snprintf(text, sizeof text, fmt, demo, missing, loop, file, "");
    snprintf(cfg, sizeof cfg, "%s", write_config(dir, "models.config", text));
    snprintf(flag, sizeof flag, "--model_config_file=%s", cfg);
    const char *flags[] = {flag, "--file_system_poll_wait_seconds=1",
                           "--model_config_file_poll_wait_seconds=1", "--verbosity=warn", NULL};
    tfs_test_server s;
    ck_assert_msg(tfs_test_server_start(&s, flags) == 0, "tfserve did not start; see %s",
                  s.log_path);
    expect_predict(s.rest_port, "good", "{\"instances\": [1.0]}", "{\"predictions\": [2.5]}");
    snprintf(want, sizeof want, "%s:3:10: model 'missing': base path %s cannot be read: No such "
             "file or directory", cfg, missing);
    ck_assert_msg(log_has(s.log_path, want), "log lacks '%s'; see %s", want, s.log_path);
    snprintf(want, sizeof want, "%s:4:10: model 'loop': base path %s cannot be read: Too many "
             "levels of symbolic links", cfg, loop);
    ck_assert_msg(log_has(s.log_path, want), "log lacks '%s'; see %s", want, s.log_path);
    snprintf(want, sizeof want, "%s:5:10: model 'file': base path %s cannot be read: Not a "
             "directory", cfg, file);
    ck_assert_msg(log_has(s.log_path, want), "log lacks '%s'; see %s", want, s.log_path);
    ck_assert_msg(!log_has(s.log_path, " I "), "--verbosity=warn logged info lines; see %s",
                  s.log_path);

    tfs_http_reply r = tfs_http(s.rest_port, "GET", "/readyz", NULL);
    ck_assert_int_eq(r.status, 503);
    tfs_http_reply_free(&r);
    ck_assert_str_eq(ready_entry(s.rest_port, "good"), "AVAILABLE|");
    snprintf(want, sizeof want, "NO_VERSION|NOT_FOUND: model 'missing': cannot read base path %s: "
             "No such file or directory", missing);
    ck_assert_str_eq(ready_entry(s.rest_port, "missing"), want);
    /* codes by TensorFlow's errno table: ELOOP UNKNOWN, ENOTDIR FAILED_PRECONDITION */
    snprintf(want, sizeof want, "NO_VERSION|UNKNOWN: model 'loop': cannot read base path %s: "
             "Too many levels of symbolic links", loop);
    ck_assert_str_eq(ready_entry(s.rest_port, "loop"), want);
    snprintf(want, sizeof want, "NO_VERSION|FAILED_PRECONDITION: model 'file': cannot read base "
             "path %s: Not a directory", file);
    ck_assert_str_eq(ready_entry(s.rest_port, "file"), want);

    /* the missing base path appears: served within two polls */
    ck_assert_int_eq(mkdir(missing, 0755), 0);
    tfs_test_write_version(missing, 5);
    for (int i = 0; i < 100 && strcmp(ready_entry(s.rest_port, "missing"), "AVAILABLE|"); i++)
        usleep(50000);
    ck_assert_str_eq(ready_entry(s.rest_port, "missing"), "AVAILABLE|");
    expect_predict(s.rest_port, "missing", "{\"instances\": [2.0]}", "{\"predictions\": [6.0]}");

    /* a polled config adds one more unreadable base path: warned at its line */
    char later[4300], extra[4600];
    snprintf(later, sizeof later, "%s/later", dir);
    snprintf(extra, sizeof extra, "  config { name: 'later' base_path: '%s' model_platform: "
             "'tensorflow' }\n", later);
    snprintf(text, sizeof text, fmt, demo, missing, loop, file, extra);
    write_config(dir, "models.config", text);
    snprintf(want, sizeof want, "%s:6:10: model 'later': base path %s cannot be read: No such "
             "file or directory", cfg, later);
    for (int i = 0; i < 100 && !log_has(s.log_path, want); i++)
        usleep(50000);
    ck_assert_msg(log_has(s.log_path, want), "log lacks '%s'; see %s", want, s.log_path);
    expect_predict(s.rest_port, "good", "{\"instances\": [1.0]}", "{\"predictions\": [2.5]}");
    expect_predict(s.rest_port, "missing", "{\"instances\": [2.0]}", "{\"predictions\": [6.0]}");
    int status = tfs_test_server_stop(&s);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    unlink(s.log_path);
    unlink(loop);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(tfserve_refuses_a_broken_config_file)
{
    char *dir = tfs_test_mkdtemp();
    char  out[8192], args[4400], want[4400];
    const char *path = write_config(dir, "broken.config",
                                    "model_config_list {\n  config {\n    name: 'x'\n"
                                    "    base_path: '/m' model_platform: 'tensorflow'\n"
                                    "    model_version_policy { latest { num_versions: x } }\n");
    snprintf(args, sizeof args, "--model_config_file=%s", path);
    int status = run_to_exit(args, out, sizeof out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, out);
    snprintf(want, sizeof want, "Failed to start server. Error: INVALID_ARGUMENT: %s:5:51: "
             "expected an integer for field 'num_versions', found 'x'", path);
    ck_assert_msg(strstr(out, want), "output lacks '%s':\n%s", want, out);

    /* The loader's validation errors name the config file too. */
    char demo[4200], text[10000];
    snprintf(demo, sizeof demo, "%s/models/half_plus_two", TFS_BINARY_DIR);
    snprintf(text, sizeof text,
             "model_config_list {\n"
             "  config { name: 'twice' base_path: '%s' model_platform: 'tensorflow' }\n"
             "  config { name: 'twice' base_path: '%s' model_platform: 'tensorflow' }\n"
             "}\n", demo, demo);
    path = write_config(dir, "dup.config", text);
    snprintf(args, sizeof args, "--model_config_file=%s", path);
    status = run_to_exit(args, out, sizeof out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, out);
    snprintf(want, sizeof want, "Failed to start server. Error: INVALID_ARGUMENT: %s:3:10: ", path);
    ck_assert_msg(strstr(out, want) && strstr(out, "twice"), "output lacks '%s' and the model "
                  "name:\n%s", want, out);

    /* A missing file, and neither a file nor a base path. */
    snprintf(args, sizeof args, "--model_config_file=%s/none.config", dir);
    status = run_to_exit(args, out, sizeof out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d: %s", status, out);
    ck_assert_msg(strstr(out, "NOT_FOUND: could not open") && strstr(out, "none.config"), "%s",
                  out);
    status = run_to_exit("", out, sizeof out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 255, "status %d: %s", status, out);
    ck_assert_msg(strstr(out, "Both --model_base_path and --model_config_file are empty"), "%s",
                  out);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_server_config_file(void);
Suite *suite_server_config_file(void)
{
    Suite *s = suite_create("server_config_file");
    TCase *tc = tcase_create("converter");
    tcase_add_test(tc, converter_policies_labels_platform);
    tcase_add_test(tc, converter_errors);
    tcase_add_test(tc, poller_acts_on_changes_only);
    suite_add_tcase(s, tc);
    TCase *sys = tcase_create("system");
    tcase_set_timeout(sys, 120);
    tcase_add_test(sys, tfserve_serves_two_models_from_a_config_file);
    tcase_add_test(sys, tfserve_version_policies_and_labels);
    tcase_add_test(sys, tfserve_unreadable_base_paths);
    tcase_add_test(sys, tfserve_refuses_a_broken_config_file);
    suite_add_tcase(s, sys);
    sys = tfs_test_fixture_case("system_fixtures", "system");
    tcase_set_timeout(sys, 120);
    tcase_add_test(sys, tfserve_serves_a_tf_serving_export_from_a_config_file);
    tcase_add_test(sys, tfserve_latest2_of_tf_serving_versions);
    suite_add_tcase(s, sys);
    return s;
}
