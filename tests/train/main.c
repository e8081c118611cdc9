/* test-train: the Check suites for train/. */
#include <check.h>
#include <stdlib.h>

Suite *suite_train_gzip(void);
Suite *suite_train_idx(void);
Suite *suite_train_csv(void);
Suite *suite_train_npy(void);
Suite *suite_train_example(void);
Suite *suite_train_dataset(void);
Suite *suite_train_fashion_mnist(void);
Suite *suite_train_faults(void);
Suite *suite_train_model(void);
Suite *suite_train_plot(void);
Suite *suite_train_config(void);
Suite *suite_train_optimizers(void);
Suite *suite_train_layers(void);
Suite *suite_train_fit(void);
Suite *suite_train_fit_json(void);

int main(void)
{
    SRunner *sr = srunner_create(suite_train_gzip());
    srunner_add_suite(sr, suite_train_idx());
    srunner_add_suite(sr, suite_train_csv());
    srunner_add_suite(sr, suite_train_npy());
    srunner_add_suite(sr, suite_train_example());
    srunner_add_suite(sr, suite_train_dataset());
    srunner_add_suite(sr, suite_train_fashion_mnist());
    srunner_add_suite(sr, suite_train_faults());
    srunner_add_suite(sr, suite_train_model());
    srunner_add_suite(sr, suite_train_plot());
    srunner_add_suite(sr, suite_train_config());
    srunner_add_suite(sr, suite_train_optimizers());
    srunner_add_suite(sr, suite_train_layers());
    srunner_add_suite(sr, suite_train_fit());
    srunner_add_suite(sr, suite_train_fit_json());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
