/* Helpers shared by the train/ suites: see helpers.h. */
#include "tests/train/helpers.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

const char *tt_path(const char *dir, const char *name)
{
    static char buf[8][4096];
    static int  i;
    char       *b = buf[i++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

int tt_sh(const char *fmt, ...)
{
    char    cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool tt_have(const char *cmd)
{
    return tt_sh("%s --version >/dev/null 2>&1", cmd) == 0;
}

uint64_t tt_rand(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

bool tt_tensor_equal(const tfs_tensor *a, const tfs_tensor *b)
{
    if (a->dtype != b->dtype || !tfs_shape_equal(a->rank, a->dims, b->rank, b->dims))
        return false;
    if (a->dtype != TFS_DTYPE_STRING)
        return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0;
    const tfs_string *x = tfs_tensor_strings((tfs_tensor *)a), *y = tfs_tensor_strings((tfs_tensor *)b);
    for (int64_t i = 0; i < a->nelem; i++)
        if (x[i].len != y[i].len || (x[i].len && memcmp(x[i].data, y[i].data, x[i].len) != 0))
            return false;
    return true;
}
