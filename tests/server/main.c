/* test-server: the Check suites for server/; with --fixtures, only those that
 * read the TensorFlow fixtures (see tfs_test_run). */
#include <check.h>

#include "tests/support/tfs-test.h"

Suite *suite_server_route(void);
Suite *suite_server_json_tensor(void);
Suite *suite_server_json_out(void);
Suite *suite_server_json_meta(void);
Suite *suite_server_flags(void);
Suite *suite_server_service(void);
Suite *suite_server_rest(void);
Suite *suite_server_e2e(void);
Suite *suite_server_classify(void);
Suite *suite_server_health(void);
Suite *suite_server_config_file(void);
Suite *suite_server_warmup(void);
Suite *suite_server_lifecycle(void);
Suite *suite_server_metrics(void);
Suite *suite_server_v2_json(void);

int main(int argc, char **argv)
{
    SRunner *sr = srunner_create(suite_server_route());
    srunner_add_suite(sr, suite_server_json_tensor());
    srunner_add_suite(sr, suite_server_json_out());
    srunner_add_suite(sr, suite_server_json_meta());
    srunner_add_suite(sr, suite_server_flags());
    srunner_add_suite(sr, suite_server_service());
    srunner_add_suite(sr, suite_server_rest());
    srunner_add_suite(sr, suite_server_e2e());
    srunner_add_suite(sr, suite_server_classify());
    srunner_add_suite(sr, suite_server_health());
    srunner_add_suite(sr, suite_server_config_file());
    srunner_add_suite(sr, suite_server_warmup());
    srunner_add_suite(sr, suite_server_lifecycle());
    srunner_add_suite(sr, suite_server_metrics());
    srunner_add_suite(sr, suite_server_v2_json());
    return tfs_test_run(sr, argc, argv);
}
