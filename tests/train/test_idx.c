#include <check.h>
Suite *suite_train_idx(void);
Suite *suite_train_idx(void)
{
    return suite_create("idx");
}
