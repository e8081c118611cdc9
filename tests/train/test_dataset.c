#include <check.h>
Suite *suite_train_dataset(void);
Suite *suite_train_dataset(void)
{
    return suite_create("dataset");
}
