/* Internals of train/ shared between its files (and its tests): byte buffers, CRC-32, raw
 * inflate, the shuffle RNG, and the dataset's source interface. Include only from train/ and
 * tests/.
 */
#ifndef TFS_TRAIN_TRAIN_IMPL_H
#define TFS_TRAIN_TRAIN_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "train/train.h"

/* ---- bytes, CRC-32, inflate (inflate.c, gzip.c) --------------------------------------------- */

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

/* CRC-32 as gzip and zlib compute it (reflected polynomial 0xEDB88320): start with crc = 0 and
 * feed the running value back in for the next piece. */
uint32_t tfs__crc32(uint32_t crc, const void *data, size_t n);

/* Inflates the raw deflate stream starting at in[0] (n bytes available), appending to out (which
 * grows as needed; out->len beyond max_out is RESOURCE_EXHAUSTED). Back-references may reach only
 * the bytes appended by this call (those before out->len on entry are another stream's).
 * *consumed: the input bytes the stream occupied (up to its last byte, padding bits included).
 * DATA_LOSS "<what>: deflate: <why> (compressed byte N)" for a malformed or truncated stream;
 * N counts from in[0] plus in_offset, the stream's offset in its file. */
enum tfs_code tfs__inflate(const uint8_t *in, size_t n, size_t in_offset, tfs__bytes *out,
                           size_t max_out, size_t *consumed, const char *what, tfs_status *st);

/* A tfs_tensor_dealloc that tfs_frees `data` (for tensors wrapping tfs_malloc'ed buffers). */
void tfs__free_data(void *data, void *arg);

/* ---- the shuffle RNG (dataset.c) ----------------------------------------------------------- */

/* SplitMix64: one 64-bit state word, every value of which is a valid state. */
uint64_t tfs__rng_next(uint64_t *state);
/* Uniform in [0, n), n >= 1, without modulo bias (Lemire's multiply-and-reject). */
uint64_t tfs__rng_below(uint64_t *state, uint64_t n);

#endif
