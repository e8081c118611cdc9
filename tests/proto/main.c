/* test-proto: the Check suites for proto/; with --fixtures, only those that
 * read the TensorFlow fixtures (see tfs_test_run). */
#include <check.h>

#include "tests/support/tfs-test.h"

Suite *suite_proto_textformat(void);
Suite *suite_proto_textformat_configs(void);
Suite *suite_proto_unpack(void);

int main(int argc, char **argv)
{
    SRunner *sr = srunner_create(suite_proto_textformat());
    srunner_add_suite(sr, suite_proto_textformat_configs());
    srunner_add_suite(sr, suite_proto_unpack());
    return tfs_test_run(sr, argc, argv);
}
