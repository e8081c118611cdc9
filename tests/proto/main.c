/* test-proto: the Check suites for proto/. */
#include <check.h>
#include <stdlib.h>

Suite *suite_proto_textformat(void);
Suite *suite_proto_textformat_configs(void);
Suite *suite_proto_unpack(void);

int main(void)
{
    SRunner *sr = srunner_create(suite_proto_textformat());
    srunner_add_suite(sr, suite_proto_textformat_configs());
    srunner_add_suite(sr, suite_proto_unpack());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
