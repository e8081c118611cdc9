#include <check.h>
Suite *suite_train_npy(void);
Suite *suite_train_npy(void)
{
    return suite_create("npy");
}
