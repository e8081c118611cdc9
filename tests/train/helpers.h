/* Helpers shared by the train/ suites: temporary files, shell commands, tensors to compare. */
#ifndef TFS_TESTS_TRAIN_HELPERS_H
#define TFS_TESTS_TRAIN_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

/* "<dir>/<name>" in a static ring of buffers (valid for the next 7 calls). */
const char *tt_path(const char *dir, const char *name);
/* Runs a shell command; returns its exit status (-1 if it could not run). */
int tt_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* True when `prog` runs (`prog --version` exits 0). */
bool tt_have(const char *cmd);
/* Deterministic pseudo-random bytes (xorshift) for test data. */
uint64_t tt_rand(uint64_t *s);
/* Byte-for-byte equality of two tensors (dtype, shape, data; strings by content). */
bool tt_tensor_equal(const tfs_tensor *a, const tfs_tensor *b);

#endif
