/* test-savedmodel: the Check suites for savedmodel/; with --fixtures, only those that
 * read the TensorFlow fixtures (see tfs_test_run). */
#include <check.h>

#include "tests/support/tfs-test.h"

Suite *suite_savedmodel_bundle(void);
Suite *suite_savedmodel_import(void);
Suite *suite_savedmodel_writer(void);
Suite *suite_savedmodel_load(void);
Suite *suite_savedmodel_tfrecord(void);
Suite *suite_savedmodel_import_control(void);
Suite *suite_savedmodel_array_ops(void);
Suite *suite_savedmodel_checkpoint(void);
Suite *suite_savedmodel_events(void);
Suite *suite_savedmodel_rewrite(void);
Suite *suite_savedmodel_tables(void);

int main(int argc, char **argv)
{
    SRunner *sr = srunner_create(suite_savedmodel_bundle());
    srunner_add_suite(sr, suite_savedmodel_import());
    srunner_add_suite(sr, suite_savedmodel_writer());
    srunner_add_suite(sr, suite_savedmodel_load());
    srunner_add_suite(sr, suite_savedmodel_tfrecord());
    srunner_add_suite(sr, suite_savedmodel_import_control());
    srunner_add_suite(sr, suite_savedmodel_array_ops());
    srunner_add_suite(sr, suite_savedmodel_checkpoint());
    srunner_add_suite(sr, suite_savedmodel_events());
    srunner_add_suite(sr, suite_savedmodel_rewrite());
    srunner_add_suite(sr, suite_savedmodel_tables());
    return tfs_test_run(sr, argc, argv);
}
