/* The text-format parser on TensorFlow Serving's own config messages: ModelServerConfig (policies,
 * version labels, the deprecated model_type, custom_model_config), BatchingParameters (wrapper
 * messages), MonitoringConfig, and TF Serving's testdata files from the TensorFlow fixtures (a
 * case of its own, reported skipped when they are absent). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "proto/textformat.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"
#include "tensorflow_serving/config/monitoring_config.pb-c.h"
#include "tensorflow_serving/servables/tensorflow/session_bundle_config.pb-c.h"
#include "tests/support/tfs-test.h"

#define MSC (&tensorflow__serving__model_server_config__descriptor)

typedef Tensorflow__Serving__ModelServerConfig MSConfig;
typedef Tensorflow__Serving__FileSystemStoragePathSourceConfig__ServableVersionPolicy Policy;

static void *parse_ok(const ProtobufCMessageDescriptor *d, const char *text)
{
    ProtobufCMessage *m = NULL;
    tfs_status        st;
    ck_assert_msg(tfs_textformat_parse(d, text, strlen(text), "cfg", &m, &st) == TFS_OK,
                  "parse failed: %s", st.msg);
    return m;
}

START_TEST(model_server_config_full)
{
    MSConfig *c = parse_ok(MSC,
        "model_config_list {\n"
        "  config {\n"
        "    name: \"half_plus_two\"\n"
        "    base_path: \"/models/half_plus_two\"   # absolute path\n"
        "    model_platform: \"tensorflow\"\n"
        "    model_version_policy { latest { num_versions: 2 } }\n"
        "    version_labels { key: \"stable\" value: 42 }\n"
        "    version_labels { key: \"canary\" value: 43 }\n"
        "  }\n"
        "  config {\n"
        "    name: 'b' base_path: '/m/b' model_type: TENSORFLOW\n"
        "    model_version_policy { specific { versions: 42 versions: [43, 44] } }\n"
        "    logging_config { sampling_config { sampling_rate: 0.5 }\n"
        "                     log_collector_config { type: 'file' filename_prefix: '/tmp/l' } }\n"
        "  }\n"
        "  config { name: 'c' base_path: '/m/c' model_version_policy { all {} } }\n"
        "  config { name: 'd' base_path: '/m/d' model_version_policy: { } }\n"
        "}\n");
    ck_assert_int_eq(c->config_case, TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST);
    Tensorflow__Serving__ModelConfigList *l = c->model_config_list;
    ck_assert_int_eq(l->n_config, 4);

    Tensorflow__Serving__ModelConfig *m = l->config[0];
    ck_assert_str_eq(m->name, "half_plus_two");
    ck_assert_str_eq(m->base_path, "/models/half_plus_two");
    ck_assert_str_eq(m->model_platform, "tensorflow");
    ck_assert_int_eq(m->model_type, TENSORFLOW__SERVING__MODEL_TYPE__MODEL_TYPE_UNSPECIFIED);
    Policy *p = m->model_version_policy;
    ck_assert_int_eq(p->policy_choice_case,
                     TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_LATEST);
    ck_assert_uint_eq(p->latest->num_versions, 2);
    ck_assert_int_eq(m->n_version_labels, 2);
    ck_assert_str_eq(m->version_labels[0]->key, "stable");
    ck_assert_int_eq(m->version_labels[0]->value, 42);
    ck_assert_str_eq(m->version_labels[1]->key, "canary");
    ck_assert_int_eq(m->version_labels[1]->value, 43);
    ck_assert_ptr_null(m->logging_config);

    m = l->config[1];
    ck_assert_str_eq(m->model_platform, "");
    ck_assert_int_eq(m->model_type, TENSORFLOW__SERVING__MODEL_TYPE__TENSORFLOW);
    p = m->model_version_policy;
    ck_assert_int_eq(p->policy_choice_case,
                     TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_SPECIFIC);
    ck_assert_int_eq(p->specific->n_versions, 3);
    ck_assert(p->specific->versions[0] == 42 && p->specific->versions[2] == 44);
    ck_assert(m->logging_config->sampling_config->sampling_rate == 0.5);
    ck_assert_str_eq(m->logging_config->log_collector_config->type, "file");
    ck_assert_str_eq(m->logging_config->log_collector_config->filename_prefix, "/tmp/l");

    p = l->config[2]->model_version_policy;
    ck_assert_int_eq(p->policy_choice_case,
                     TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_ALL);
    ck_assert_ptr_nonnull(p->all);
    /* An empty policy message: present, no choice (the converter treats it as latest 1). */
    p = l->config[3]->model_version_policy;
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->policy_choice_case,
                     TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE__NOT_SET);
    protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

START_TEST(model_server_config_errors)
{
    struct {
        const char *text, *want;
    } cases[] = {
        {"model_config_list { config { nmae: 'x' } }",
         "cfg:1:30: unknown field 'nmae' in tensorflow.serving.ModelConfig"},
        {"model_config_list { config { name: 'x' name: 'y' } }",
         "cfg:1:40: non-repeated field 'name' is specified multiple times"},
        {"model_config_list { config { model_version_policy { latest {} all {} } } }",
         "cfg:1:63: field 'all' is specified along with field 'latest', another member of the "
         "same oneof"},
        {"model_config_list {}\ncustom_model_config {}",
         "cfg:2:1: field 'custom_model_config' is specified along with field "
         "'model_config_list', another member of the same oneof"},
        {"model_config_list { config { model_version_policy { latest { num_versions: -1 } } } }",
         "cfg:1:77: integer out of range for field 'num_versions' (uint32)"},
        {"model_config_list { config { version_labels { key: 'a' value: 'b' } } }",
         "cfg:1:63: expected an integer for field 'value', found ''b''"},
        {"model_config_list { config { model_type: TENSORFLOW2 } }",
         "cfg:1:42: unknown enum value 'TENSORFLOW2' for field 'model_type'"},
        {"model_config_list { config { name: 'x' }",
         "cfg:1:41: expected '}' before end of input (to close the '{' at 1:19)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ProtobufCMessage *m = NULL;
        tfs_status        st;
        ck_assert_int_eq(tfs_textformat_parse(MSC, cases[i].text, strlen(cases[i].text), "cfg",
                                              &m, &st), TFS_INVALID_ARGUMENT);
        ck_assert_ptr_null(m);
        ck_assert_msg(strcmp(st.msg, cases[i].want) == 0, "case %zu:\n got  '%s'\n want '%s'", i,
                      st.msg, cases[i].want);
    }
    /* custom_model_config parses (an Any); refusing it is the server's job. */
    MSConfig *c = parse_ok(MSC, "custom_model_config { type_url: 'x/y' value: '\\001\\002' }");
    ck_assert_int_eq(c->config_case,
                     TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_CUSTOM_MODEL_CONFIG);
    ck_assert_str_eq(c->custom_model_config->type_url, "x/y");
    ck_assert_int_eq(c->custom_model_config->value.len, 2);
    protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

START_TEST(batching_parameters_wrappers)
{
    Tensorflow__Serving__BatchingParameters *b = parse_ok(
        &tensorflow__serving__batching_parameters__descriptor,
        "max_batch_size { value: 128 }\n"
        "batch_timeout_micros { value: 0 }\n"
        "max_enqueued_batches: { value: 1000000 }\n"
        "num_batch_threads < value: 8 >\n"
        "thread_pool_name { value: 'pool' }\n"
        "allowed_batch_sizes: [8, 32] allowed_batch_sizes: 128\n"
        "pad_variable_length_inputs: true\n"
        "enable_large_batch_splitting { value: false }\n"
        "max_execution_batch_size { value: 64 }\n"
        "batch_padding_policy { value: 'PAD_UP' }\n");
    ck_assert_int_eq(b->max_batch_size->value, 128);
    ck_assert_ptr_nonnull(b->batch_timeout_micros);   /* set to 0: distinct from unset */
    ck_assert_int_eq(b->batch_timeout_micros->value, 0);
    ck_assert_int_eq(b->max_enqueued_batches->value, 1000000);
    ck_assert_int_eq(b->num_batch_threads->value, 8);
    ck_assert_str_eq(b->thread_pool_name->value, "pool");
    ck_assert_int_eq(b->n_allowed_batch_sizes, 3);
    ck_assert(b->allowed_batch_sizes[0] == 8 && b->allowed_batch_sizes[2] == 128);
    ck_assert(b->pad_variable_length_inputs);
    ck_assert_ptr_nonnull(b->enable_large_batch_splitting);
    ck_assert(!b->enable_large_batch_splitting->value);
    ck_assert_int_eq(b->max_execution_batch_size->value, 64);
    ck_assert_str_eq(b->batch_padding_policy->value, "PAD_UP");
    protobuf_c_message_free_unpacked(&b->base, NULL);

    b = parse_ok(&tensorflow__serving__batching_parameters__descriptor, "");
    ck_assert_ptr_null(b->max_batch_size);
    ck_assert_ptr_null(b->enable_large_batch_splitting);
    protobuf_c_message_free_unpacked(&b->base, NULL);
}
END_TEST

START_TEST(monitoring_config)
{
    Tensorflow__Serving__MonitoringConfig *m = parse_ok(
        &tensorflow__serving__monitoring_config__descriptor,
        "prometheus_config { enable: true, path: \"/monitoring/prometheus/metrics\" }");
    ck_assert(m->prometheus_config->enable);
    ck_assert_str_eq(m->prometheus_config->path, "/monitoring/prometheus/metrics");
    protobuf_c_message_free_unpacked(&m->base, NULL);
}
END_TEST

START_TEST(fixture_good_model_config)
{
    if (tfs_test_skip_without_fixture("fixture_good_model_config",
                                      "tf_serving/good_model_config.txt"))
        return;
    char path[4096];
    ck_assert_ptr_nonnull(tfs_test_fixture("tf_serving/good_model_config.txt", path, sizeof path));
    ProtobufCMessage *msg;
    tfs_status        st;
    ck_assert_msg(tfs_textformat_parse_file(MSC, path, &msg, &st) == TFS_OK, "%s", st.msg);
    MSConfig *c = (MSConfig *)msg;
    ck_assert_int_eq(c->config_case, TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST);
    ck_assert_int_eq(c->model_config_list->n_config, 2);
    Tensorflow__Serving__ModelConfig **cf = c->model_config_list->config;
    ck_assert_str_eq(cf[0]->name, "half_plus_two");
    ck_assert_str_eq(cf[0]->base_path, "${TEST_HALF_PLUS_TWO_DIR}");
    ck_assert_str_eq(cf[0]->model_platform, "tensorflow");
    ck_assert_str_eq(cf[1]->name, "half_plus_three");
    ck_assert_str_eq(cf[1]->base_path, "${TEST_HALF_PLUS_THREE_DIR}");
    ck_assert_str_eq(cf[1]->model_platform, "tensorflow");
    ck_assert_ptr_null(cf[1]->model_version_policy);
    protobuf_c_message_free_unpacked(msg, NULL);
}
END_TEST

START_TEST(fixture_batching_config)
{
    if (tfs_test_skip_without_fixture("fixture_batching_config", "tf_serving/batching_config.txt"))
        return;
    char path[4096];
    ck_assert_ptr_nonnull(tfs_test_fixture("tf_serving/batching_config.txt", path, sizeof path));
    ProtobufCMessage *msg;
    tfs_status        st;
    ck_assert_msg(tfs_textformat_parse_file(&tensorflow__serving__batching_parameters__descriptor,
                                            path, &msg, &st) == TFS_OK, "%s", st.msg);
    Tensorflow__Serving__BatchingParameters *b = (Tensorflow__Serving__BatchingParameters *)msg;
    ck_assert_int_eq(b->max_batch_size->value, 128);
    ck_assert_int_eq(b->batch_timeout_micros->value, 0);
    ck_assert_int_eq(b->max_enqueued_batches->value, 1000000);
    ck_assert_int_eq(b->num_batch_threads->value, 8);
    ck_assert_ptr_null(b->thread_pool_name);
    ck_assert_int_eq(b->n_allowed_batch_sizes, 0);
    protobuf_c_message_free_unpacked(msg, NULL);
}
END_TEST

/* Positions of nested messages, for errors found after parsing. */
START_TEST(located_messages)
{
    const char *text = "model_config_list {\n"
                       "  config { name: 'a' }\n"
                       "  config <\n    name: 'b'\n  >\n"
                       "}\n";
    ProtobufCMessage   *m;
    tfs_textformat_locs locs = {0};
    tfs_status          st;
    ck_assert_int_eq(tfs_textformat_parse_located(
                         &tensorflow__serving__model_server_config__descriptor, text,
                         strlen(text), "x", &m, &locs, &st), TFS_OK);
    const Tensorflow__Serving__ModelServerConfig *c = (const void *)m;
    ck_assert_uint_eq(locs.n, 3);   /* the list and its two configs */
    int line = 0, col = 0;
    ck_assert(tfs_textformat_locate(&locs, c->model_config_list, &line, &col));
    ck_assert_int_eq(line, 1);
    ck_assert_int_eq(col, 19);
    ck_assert(tfs_textformat_locate(&locs, c->model_config_list->config[0], &line, &col));
    ck_assert_int_eq(line, 2);
    ck_assert_int_eq(col, 10);
    ck_assert(tfs_textformat_locate(&locs, c->model_config_list->config[1], &line, &col));
    ck_assert_int_eq(line, 3);
    ck_assert_int_eq(col, 10);
    ck_assert(!tfs_textformat_locate(&locs, m, &line, &col));   /* the top level has no brace */
    tfs_textformat_locs_free(&locs);
    ck_assert_ptr_null(locs.v);
    protobuf_c_message_free_unpacked(m, NULL);
}
END_TEST

Suite *suite_proto_textformat_configs(void);
Suite *suite_proto_textformat_configs(void)
{
    Suite *s = suite_create("proto_textformat_configs");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, model_server_config_full);
    tcase_add_test(tc, model_server_config_errors);
    tcase_add_test(tc, batching_parameters_wrappers);
    tcase_add_test(tc, monitoring_config);
    tcase_add_test(tc, located_messages);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("fixtures", NULL);
    tcase_add_test(tc, fixture_good_model_config);
    tcase_add_test(tc, fixture_batching_config);
    suite_add_tcase(s, tc);
    return s;
}
