/* Internals of train/ shared between its files (and its tests): byte buffers, the shuffle RNG,
 * and the dataset's source interface. Include only from train/ and tests/.
 */
#ifndef TFS_TRAIN_TRAIN_IMPL_H
#define TFS_TRAIN_TRAIN_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "train/train.h"

/* ---- bytes (gzip.c) ------------------------------------------------------------------------- */

/* A growable byte buffer: data is tfs_malloc'ed; len bytes are valid; cap >= len. */
typedef struct tfs__bytes {
    uint8_t *data;
    size_t   len;
    size_t   cap;
} tfs__bytes;

/* Appends n bytes; false when memory runs out (b unchanged). */
bool tfs__bytes_append(tfs__bytes *b, const void *data, size_t n);
/* Appends printf output and its terminating NUL (counted in len). */
bool tfs__bytes_printf(tfs__bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A tfs_tensor_dealloc that tfs_frees `data` (for tensors wrapping tfs_malloc'ed buffers). */
void tfs__free_data(void *data, void *arg);

/* ---- the shuffle RNG (dataset.c) ----------------------------------------------------------- */

/* SplitMix64: one 64-bit state word, every value of which is a valid state. */
uint64_t tfs__rng_next(uint64_t *state);
/* Uniform in [0, n), n >= 1, without modulo bias (Lemire's multiply-and-reject). */
uint64_t tfs__rng_below(uint64_t *state, uint64_t n);

#endif
