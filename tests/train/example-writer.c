/* The tf.Example encoder of the train/ tests: see example-writer.h. Wire format:
 *   Example { 1: Features { 1: repeated entry { 1: key, 2: Feature } } }
 *   Feature oneof { 1: BytesList, 2: FloatList, 3: Int64List }, each { 1: repeated value }
 * (float and int64 values packed). */
#include "tests/train/example-writer.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

static void put(tt_wbuf *w, const void *p, size_t n)
{
    if (w->cap - w->n < n) {
        w->cap = (w->cap + n) * 2;
        w->b = realloc(w->b, w->cap);
        ck_assert_ptr_nonnull(w->b);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void varint(tt_wbuf *w, uint64_t v)
{
    uint8_t b[10];
    int     n = 0;
    do {
        b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(w, b, (size_t)n);
}

/* A length-delimited field `field` holding inner's bytes. */
static void submsg(tt_wbuf *w, int field, const tt_wbuf *inner)
{
    varint(w, (uint64_t)field << 3 | 2);
    varint(w, inner->n);
    put(w, inner->b, inner->n);
}

static void entry(tt_wbuf *ex, const char *key, int kind, const tt_wbuf *list)
{
    tt_wbuf feature = {0}, e = {0};
    submsg(&feature, kind, list);
    tt_wbuf k = {(uint8_t *)key, strlen(key), 0};
    submsg(&e, 1, &k);
    submsg(&e, 2, &feature);
    submsg(ex, 1, &e);
    free(feature.b);
    free(e.b);
}

void tt_example_begin(tt_wbuf *ex)
{
    ex->n = 0;
}

void tt_example_floats(tt_wbuf *ex, const char *key, const float *v, int n)
{
    tt_wbuf packed = {0}, list = {0};
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        put(&packed, le, 4);
    }
    submsg(&list, 1, &packed);
    entry(ex, key, 2, &list);
    free(packed.b);
    free(list.b);
}

void tt_example_int64s(tt_wbuf *ex, const char *key, const int64_t *v, int n)
{
    tt_wbuf packed = {0}, list = {0};
    for (int i = 0; i < n; i++)
        varint(&packed, (uint64_t)v[i]);
    submsg(&list, 1, &packed);
    entry(ex, key, 3, &list);
    free(packed.b);
    free(list.b);
}

void tt_example_bytes(tt_wbuf *ex, const char *key, const char *s)
{
    tt_wbuf list = {0};
    tt_wbuf v = {(uint8_t *)s, strlen(s), 0};
    submsg(&list, 1, &v);
    entry(ex, key, 1, &list);
    free(list.b);
}

void tt_example_end(tt_wbuf *ex)
{
    tt_wbuf out = {0};
    submsg(&out, 1, ex);   /* Example.features */
    free(ex->b);
    *ex = out;
}

void tt_write_examples(const char *path, int first, int count, void (*make)(tt_wbuf *ex, int i))
{
    tfs_tfrecord_writer *w;
    tfs_status           st;
    ck_assert_int_eq(tfs_tfrecord_writer_open(path, &w, &st), TFS_OK);
    for (int i = first; i < first + count; i++) {
        tt_wbuf ex = {0};
        make(&ex, i);
        tt_example_end(&ex);
        ck_assert_int_eq(tfs_tfrecord_writer_write(w, ex.b, ex.n, &st), TFS_OK);
        free(ex.b);
    }
    ck_assert_int_eq(tfs_tfrecord_writer_close(w, &st), TFS_OK);
}
