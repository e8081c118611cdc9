/* test-train: the Check suites for train/. */
#include <check.h>
#include <stdlib.h>

Suite *suite_train_model(void);
Suite *suite_train_plot(void);

int main(void)
{
    SRunner *sr = srunner_create(suite_train_model());
    srunner_add_suite(sr, suite_train_plot());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
