#include <check.h>
Suite *suite_train_example(void);
Suite *suite_train_example(void)
{
    return suite_create("example");
}
