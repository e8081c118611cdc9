/* A tiny tf.Example encoder for the train/ tests (protobuf wire format by hand, so each test
 * states its bytes) and a helper that writes a TFRecord file of such Examples. */
#ifndef TFS_TESTS_TRAIN_EXAMPLE_WRITER_H
#define TFS_TESTS_TRAIN_EXAMPLE_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tt_wbuf {
    uint8_t *b;   /* malloc'ed */
    size_t   n, cap;
} tt_wbuf;

/* Example building: begin, any number of features, end (which leaves the serialized Example in
 * ex->b, ex->n). */
void tt_example_begin(tt_wbuf *ex);
void tt_example_floats(tt_wbuf *ex, const char *key, const float *v, int n);
void tt_example_int64s(tt_wbuf *ex, const char *key, const int64_t *v, int n);
void tt_example_bytes(tt_wbuf *ex, const char *key, const char *s);
void tt_example_end(tt_wbuf *ex);

/* Writes a TFRecord file of `count` Examples made by make(ex, i) for i = first, first + 1, ... */
void tt_write_examples(const char *path, int first, int count, void (*make)(tt_wbuf *ex, int i));

#endif
