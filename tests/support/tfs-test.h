/* Helpers shared by the Check suites: fixture lookup, temporary directories, tensor comparison,
 * and (for system tests) starting the real tfserve binary and talking HTTP to it. */
#ifndef TFS_TESTS_SUPPORT_TFS_TEST_H
#define TFS_TESTS_SUPPORT_TFS_TEST_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "runtime/runtime.h"

/* Path of a file or folder under the TensorFlow fixtures ($TFS_FIXTURES, else a shared/fixtures
 * folder beside the source tree), or NULL when it does not exist. The path is written to buf
 * either way. */
const char *tfs_test_fixture(const char *rel, char *buf, size_t n);
/* Prints "SKIP <test>: fixture <rel> absent" and returns true when the fixture is missing. Every
 * test that reads the fixtures starts with `if (tfs_test_skip_without_fixture(...)) return;` and
 * lives in a TCase made by tfs_test_fixture_case: tfs_test_run counts these calls, so a missing
 * fixture reports the run as skipped, never as passed. */
bool tfs_test_skip_without_fixture(const char *test, const char *rel);

/* A TCase for the tests that read the TensorFlow fixtures, tagged "fixtures" and the
 * space-separated tags (NULL: none): tfs_test_run runs these apart from the others, so that ctest
 * can show them as skipped while the rest passes. */
TCase *tfs_test_fixture_case(const char *name, const char *tags);
/* main() of a Check binary: runs sr and frees it, returning the exit status. Without arguments it
 * runs every TCase except the fixture ones, and fails when one of its tests asks for a fixture
 * (it belongs in a fixture case). With "--fixtures" it runs only the fixture cases and returns 77
 * (ctest's SKIP_RETURN_CODE) when none failed but some found their fixture absent. CK_RUN_SUITE,
 * CK_RUN_CASE and CK_EXCLUDE_TAGS still narrow either run. */
int tfs_test_run(SRunner *sr, int argc, char **argv);

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
