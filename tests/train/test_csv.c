#include <check.h>
Suite *suite_train_csv(void);
Suite *suite_train_csv(void)
{
    return suite_create("csv");
}
