#include <check.h>
Suite *suite_train_fashion_mnist(void);
Suite *suite_train_fashion_mnist(void)
{
    return suite_create("fashion_mnist");
}
