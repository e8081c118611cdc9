/* Helpers shared by the Check suites: fixture lookup, temporary directories, tensor comparison,
 * and (for system tests) starting the real tfserve binary and talking HTTP to it. */
#ifndef TFS_TESTS_SUPPORT_TFS_TEST_H
#define TFS_TESTS_SUPPORT_TFS_TEST_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "runtime/runtime.h"

/* Path of a file or folder under the TensorFlow fixtures ($TFS_FIXTURES, else
 * <source>/../shared/fixtures), or NULL when it does not exist. Static buffer per call site: copy it. */
const char *tfs_test_fixture(const char *rel, char *buf, size_t n);
/* Prints "SKIP <test>: fixture <rel> absent" once and returns true when the fixture is missing. */
bool tfs_test_skip_without_fixture(const char *test, const char *rel);

/* A fresh directory under $TMPDIR; removed (recursively) by tfs_test_rmtree. */
char *tfs_test_mkdtemp(void);           /* caller frees with free() */
void  tfs_test_rmtree(const char *path);
/* Copies a directory tree (for corrupting copies of fixtures). 0 on success. */
int   tfs_test_copytree(const char *from, const char *to);
/* Reads / writes a whole file; read returns malloc'ed bytes (NUL-terminated) or NULL. */
char *tfs_test_read_file(const char *path, size_t *len);
int   tfs_test_write_file(const char *path, const void *data, size_t len);

/* A float tensor of the given shape from values. ck_asserts on failure. */
tfs_tensor *tfs_test_tensor_f32(int rank, const int64_t *dims, const float *values);
/* Asserts dtype FLOAT, the shape, and |got - want| <= tol elementwise, printing the first mismatches. */
void tfs_test_assert_f32(const tfs_tensor *t, int rank, const int64_t *dims, const float *want,
                         double tol);

#endif
