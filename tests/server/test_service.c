/* The service layer's Predict input checks (server/service.c): TF Serving's texts for a wrong
 * number of inputs, a missing input without a default, an unknown input name, an unusable
 * signature, and an empty model name; the same checks on names alone for many names, and the
 * name map (server/name-map.c) they use. These are all decided before a servable is touched, so
 * no model is needed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server-impl.h"

static tfs_tensor_info two_in[] = {
    {"a", "a:0", TFS_DTYPE_FLOAT, {1, {-1}}},
    {"b", "b_in:0", TFS_DTYPE_FLOAT, {1, {-1}}},
};
static tfs_tensor_info one_out = {"y", "y:0", TFS_DTYPE_FLOAT, {1, {-1}}};

static void expect(const tfs_signature *sig, const tfs_named_tensor *in, int n, enum tfs_code code,
                   const char *msg)
{
    tfs_status  st;
    tfs_tensor *out[1] = {NULL};
    ck_assert_int_eq(tfs_service_run(NULL, sig, in, n, out, &st), code);
    ck_assert_str_eq(st.msg, msg);
    ck_assert_ptr_null(out[0]);
}

START_TEST(test_service_input_count)
{
    tfs_signature    sig = {.key = "k", .n_inputs = 2, .inputs = two_in, .n_outputs = 1,
                            .outputs = &one_out};
    tfs_named_tensor in[] = {{"z", NULL}, {"a", NULL}, {"c", NULL}};
    expect(&sig, in, 3, TFS_INVALID_ARGUMENT,
           "input size does not match signature: 3!=2 len({a,c,z}) != len({a,b}). "
           "Sent extra: {c,z}. Missing but required: {b}.");
    expect(&sig, in + 1, 1, TFS_INVALID_ARGUMENT,
           "input size does not match signature: 1!=2 len({a}) != len({a,b}). "
           "Sent extra: {}. Missing but required: {b}.");
}
END_TEST

START_TEST(test_service_missing_and_unknown)
{
    tfs_signature    sig = {.key = "k", .n_inputs = 2, .inputs = two_in, .n_outputs = 1,
                            .outputs = &one_out};
    tfs_named_tensor in[] = {{"a", NULL}, {"x", NULL}};
    /* same count, wrong name: the missing signature input is reported first */
    expect(&sig, in, 2, TFS_INVALID_ARGUMENT,
           "Signature input alias: b(feed name: b_in:0) not found in request and no default value "
           "provided. Inputs expected to be in the request {a,x}, or default input alias set: ");

    /* with a default for b, a missing b is fine but an unknown name is not */
    char       *dnames[] = {"b"};
    tfs_tensor *dvals[] = {NULL};
    sig.n_defaults = 1;
    sig.default_names = dnames;
    sig.defaults = dvals;
    expect(&sig, in, 2, TFS_INVALID_ARGUMENT,
           "Inputs contains invalid name. Used request inputs: a, request input: a,x");
}
END_TEST

START_TEST(test_service_unusable_signature)
{
    tfs_signature    sig = {.key = "k", .n_inputs = 2, .inputs = two_in, .n_outputs = 1,
                            .outputs = &one_out};
    sig.usable.code = TFS_UNIMPLEMENTED;
    strcpy(sig.usable.msg, "ops not supported by tfserve: Foo");
    tfs_named_tensor in[] = {{"a", NULL}, {"b", NULL}};
    expect(&sig, in, 2, TFS_UNIMPLEMENTED, "ops not supported by tfserve: Foo");
}
END_TEST

START_TEST(test_service_empty_model_name)
{
    tfs_model_spec spec = {"", -1, NULL, NULL};
    tfs_servable  *s = (tfs_servable *)1;
    tfs_status     st;
    ck_assert_int_eq(tfs_service_acquire(NULL, &spec, &s, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "ModelSpec has no name specified.");
    ck_assert_ptr_null(s);
}
END_TEST

START_TEST(test_service_input_names)
{
    tfs_signature sig = {.key = "k", .n_inputs = 2, .inputs = two_in, .n_outputs = 1,
                         .outputs = &one_out};
    tfs_status    st;
    const char   *dup[] = {"b", "a", "b"};
    ck_assert_int_eq(tfs__service_check_input_names(&sig, dup, 3, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "duplicate input tensor alias: b");
    const char *ok[] = {"b", "a"};
    ck_assert_int_eq(tfs__service_check_input_names(&sig, ok, 2, &st), TFS_OK);
    ck_assert_str_eq(st.msg, "");

    /* 100,000 names, a among them: refused in linear time (pairwise it took seconds), and every
     * list in the message is cut short so that the missing b still shows. */
    enum { N = 100000 };
    char        *text = malloc((size_t)N * 8);
    const char **names = malloc((size_t)N * sizeof *names);
    ck_assert(text && names);
    names[0] = "a";
    for (int i = 1; i < N; i++) {
        snprintf(text + 8 * i, 8, "n%05d", N - i);   /* reversed: the text sorts them */
        names[i] = text + 8 * i;
    }
    clock_t t0 = clock();
    ck_assert_int_eq(tfs__service_check_input_names(&sig, names, N, &st), TFS_INVALID_ARGUMENT);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(secs < 2.0, "100,000 names checked in %.2f s", secs);
    ck_assert_msg(strncmp(st.msg, "input size does not match signature: 100000!=2 "
                                  "len({a,n00001,n00002,", 68) == 0, "%s", st.msg);
    ck_assert_msg(strstr(st.msg, ",...}) != len({a,b}). Sent extra: {n00001,n00002,"), "%s",
                  st.msg);
    size_t len = strlen(st.msg), tail = strlen(",...}. Missing but required: {b}.");
    ck_assert_msg(len > tail && strcmp(st.msg + len - tail, ",...}. Missing but required: {b}.")
                  == 0, "%s", st.msg);
    free(names);
    free(text);
}
END_TEST

static void keep_status(void *ctx, enum tfs_code code, const tfs_status *st, tfs_tensor **outputs,
                        int n_outputs, const tfs_run_times *t)
{
    (void)outputs;
    (void)n_outputs;
    (void)t;
    tfs_status *got = ctx;
    ck_assert_ptr_nonnull(st);
    *got = *st;
    ck_assert_int_eq(got->code, code);
}

/* A caller that passes no status still has the reason handed to its done callback (REST and
 * gRPC passed NULL and answered "predict failed" or nothing). */
START_TEST(test_service_run_async_reason)
{
    tfs_signature    sig = {.key = "k", .n_inputs = 2, .inputs = two_in, .n_outputs = 1,
                            .outputs = &one_out};
    tfs_named_tensor in[] = {{"a", NULL}, {"x", NULL}};
    tfs_status       got = {TFS_OK, ""};
    ck_assert_int_eq(tfs_service_run_async(NULL, &sig, in, 2, 0, keep_status, &got, NULL, NULL),
                     TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(got.msg, "Signature input alias: b(feed name: b_in:0) not found in request "
                              "and no default value provided. Inputs expected to be in the "
                              "request {a,x}, or default input alias set: ");
    sig.usable.code = TFS_UNIMPLEMENTED;
    strcpy(sig.usable.msg, "ops not supported by tfserve: Foo");
    in[1].name = "b";
    ck_assert_int_eq(tfs_service_run_async(NULL, &sig, in, 2, 0, keep_status, &got, NULL, NULL),
                     TFS_UNIMPLEMENTED);
    ck_assert_str_eq(got.msg, "ops not supported by tfserve: Foo");
}
END_TEST

START_TEST(test_service_name_map)
{
    tfs__name_map m;
    tfs_status    st;
    char          names[40][16];   /* "k" and any int fit */
    ck_assert_int_eq(tfs__name_map_init(&m, 40, &st), TFS_OK);
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        ck_assert_int_eq(tfs__name_map_put(&m, names[i], i), -1);
    }
    ck_assert_int_eq(tfs__name_map_put(&m, "k7", 99), 7);   /* there already: kept */
    ck_assert_int_eq(tfs__name_map_put(&m, "k40", 40), -2);  /* past the 40 promised */
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(tfs__name_map_get(&m, names[i]), i);
    ck_assert_int_eq(tfs__name_map_get(&m, "k40"), -1);
    ck_assert_int_eq(tfs__name_map_get(&m, ""), -1);
    tfs__name_map_deinit(&m);
    /* Small maps live in the struct. */
    ck_assert_int_eq(tfs__name_map_init(&m, 2, &st), TFS_OK);
    ck_assert_ptr_eq(m.slots, m.inline_slots);
    ck_assert_int_eq(tfs__name_map_put(&m, "", 0), -1);
    ck_assert_int_eq(tfs__name_map_get(&m, ""), 0);
    tfs__name_map_deinit(&m);
    tfs__name_map_deinit(NULL);
}
END_TEST

Suite *suite_server_service(void);
Suite *suite_server_service(void)
{
    Suite *s = suite_create("service");
    TCase *tc = tcase_create("inputs");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_service_input_count);
    tcase_add_test(tc, test_service_missing_and_unknown);
    tcase_add_test(tc, test_service_unusable_signature);
    tcase_add_test(tc, test_service_empty_model_name);
    tcase_add_test(tc, test_service_input_names);
    tcase_add_test(tc, test_service_run_async_reason);
    tcase_add_test(tc, test_service_name_map);
    suite_add_tcase(s, tc);
    return s;
}
