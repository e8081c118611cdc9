/* test-batching: the Check suites for batching/. */
#include <check.h>
#include <stdlib.h>

Suite *suite_batching_merge(void);
Suite *suite_batching_formation(void);
Suite *suite_batching_lifecycle(void);
Suite *suite_batching_scheduler(void);

int main(void)
{
    SRunner *sr = srunner_create(suite_batching_merge());
    srunner_add_suite(sr, suite_batching_formation());
    srunner_add_suite(sr, suite_batching_lifecycle());
    srunner_add_suite(sr, suite_batching_scheduler());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
