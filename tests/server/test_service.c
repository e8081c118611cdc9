/* The service layer's Predict input checks (server/service.c): TF Serving's texts for a wrong
 * number of inputs, a missing input without a default, an unknown input name, an unusable
 * signature, and an empty model name. These are all decided before a servable is touched, so
 * no model is needed. */
#include <check.h>
#include <string.h>

#include "server/server.h"

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
    suite_add_tcase(s, tc);
    return s;
}
