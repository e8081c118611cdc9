/* Tests for the TensorBundle pieces: crc32c against published vectors, the LevelDB table builder
 * and parser, reading TensorFlow's own checkpoints from the fixtures (Snappy and raw indexes,
 * TF1 and TF2 keys, a DT_STRING tensor), our writer (round trips, and byte-identical output to a
 * TensorFlow-written bundle), and corrupted copies, which must fail with the right code and a
 * message naming the file, never crash. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "savedmodel/bundle-impl.h"
#include "tests/support/tfs-test.h"

Suite *suite_savedmodel_bundle(void);

#define HP2  "tf_serving/saved_model_half_plus_two_cpu/00000123/variables"
#define HP2V "tf_serving/saved_model_half_plus_two_2_versions/00000123/variables"
#define TF2  "tf_serving/saved_model_half_plus_two_tf2_cpu/00000123/variables"
#define CNT  "tf_serving/saved_model_counter/00000123/variables"

/* ---- helpers ------------------------------------------------------------------------------------ */

/* <fixture dir>/variables as a prefix, in buf. */
static const char *fixture_prefix(const char *rel, char *buf, size_t n)
{
    char dir[4096];
    ck_assert_ptr_nonnull(tfs_test_fixture(rel, dir, sizeof dir));
    ck_assert_int_lt(snprintf(buf, n, "%s/variables", dir), (int)n);
    return buf;
}

/* Reads a float scalar and checks its value exactly (the fixtures hold exact binary fractions). */
static void assert_scalar(tfs_bundle *b, const char *key, float want)
{
    tfs_status  st;
    tfs_tensor *t = NULL;
    ck_assert_msg(tfs_bundle_read(b, key, TFS_DTYPE_FLOAT, &t, &st) == TFS_OK, "%s: %s", key,
                  st.msg);
    ck_assert_int_eq(t->rank, 0);
    ck_assert_int_eq(t->nelem, 1);
    ck_assert_msg(*(float *)t->data == want, "%s = %g, want %g", key, *(float *)t->data, want);
    tfs_tensor_unref(t);
}

/* A temp copy of a fixture's variables/ directory; returns the prefix inside it. */
static char *copy_fixture(const char *rel, char **dir_out)
{
    char src[4096];
    ck_assert_ptr_nonnull(tfs_test_fixture(rel, src, sizeof src));
    char *dir = tfs_test_mkdtemp();
    char  dst[4096];
    snprintf(dst, sizeof dst, "%s/variables", dir);
    ck_assert_int_eq(tfs_test_copytree(src, dst), 0);
    char *prefix = malloc(strlen(dst) + 16);
    sprintf(prefix, "%s/variables", dst);
    *dir_out = dir;
    return prefix;
}

static void flip_byte(const char *path, size_t off)
{
    size_t n;
    char  *data = tfs_test_read_file(path, &n);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_lt(off, n);
    data[off] ^= 0x40;
    ck_assert_int_eq(tfs_test_write_file(path, data, n), 0);
    free(data);
}

static void truncate_file(const char *path, size_t len)
{
    size_t n;
    char  *data = tfs_test_read_file(path, &n);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_le(len, n);
    ck_assert_int_eq(tfs_test_write_file(path, data, len), 0);
    free(data);
}

/* ---- crc32c ------------------------------------------------------------------------------------- */

START_TEST(crc32c_known_vectors)
{
    /* The standard check value of CRC-32C. */
    ck_assert_uint_eq(tfs__crc32c("123456789", 9), 0xe3069283u);
    /* RFC 3720 (iSCSI) B.4: 32 bytes of zeros, and 32 bytes of 0xff. */
    uint8_t z[32] = {0}, f[32];
    memset(f, 0xff, sizeof f);
    ck_assert_uint_eq(tfs__crc32c(z, 32), 0x8a9136aau);
    ck_assert_uint_eq(tfs__crc32c(f, 32), 0x62a8ab43u);
    /* float 0.5 as stored for `a` in half_plus_two: crc 647446098, masked 522663942. */
    const uint8_t half[4] = {0x00, 0x00, 0x00, 0x3f};
    ck_assert_uint_eq(tfs__crc32c(half, 4), 647446098u);
    ck_assert_uint_eq(tfs__crc_mask(tfs__crc32c(half, 4)), 522663942u);
    ck_assert_uint_eq(tfs__crc_unmask(522663942u), 647446098u);
    /* Extending in pieces equals one pass, across the 8-byte fast path boundary. */
    const char *s = "The quick brown fox jumps over the lazy dog";
    for (size_t cut = 0; cut <= strlen(s); cut++)
        ck_assert_uint_eq(tfs__crc32c_extend(tfs__crc32c(s, cut), s + cut, strlen(s) - cut),
                          tfs__crc32c(s, strlen(s)));
    ck_assert_uint_eq(tfs__crc32c("", 0), 0);
}
END_TEST

/* ---- table -------------------------------------------------------------------------------------- */

START_TEST(table_build_parse_many_blocks)
{
    /* 4000 entries of ~100 bytes: several 256 KiB data blocks, many restart points. */
    enum { N = 4000 };
    tfs__table_entry *e = calloc(N, sizeof *e);
    for (int i = 0; i < N; i++) {
        e[i].key = malloc(32);
        e[i].key_len = (size_t)sprintf(e[i].key, "layer_%05d/kernel", i);
        e[i].value_len = (size_t)(i % 7) * 60;
        e[i].value = malloc(e[i].value_len + 1);
        memset(e[i].value, 'a' + i % 26, e[i].value_len);
    }
    tfs_status st;
    uint8_t   *bytes;
    size_t     n;
    ck_assert_int_eq(tfs__table_build(e, N, &bytes, &n, &st), TFS_OK);
    ck_assert_uint_gt(n, 2 * 256 * 1024);

    tfs__table *t;
    ck_assert_msg(tfs__table_parse(bytes, n, "mem", &t, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(t->count, N);
    for (int i = 0; i < N; i++) {
        ck_assert_str_eq(t->entries[i].key, e[i].key);
        ck_assert_uint_eq(t->entries[i].value_len, e[i].value_len);
        ck_assert(memcmp(t->entries[i].value, e[i].value, e[i].value_len) == 0);
    }
    tfs__table_free(t);

    /* Keys must be given strictly increasing. */
    tfs__table_entry two[2] = {{"b", 1, (uint8_t *)"", 0}, {"a", 1, (uint8_t *)"", 0}};
    uint8_t *bad;
    size_t   badn;
    ck_assert_int_eq(tfs__table_build(two, 2, &bad, &badn, &st), TFS_INVALID_ARGUMENT);

    tfs_free(bytes);
    for (int i = 0; i < N; i++) {
        free(e[i].key);
        free(e[i].value);
    }
    free(e);
}
END_TEST

START_TEST(table_empty_and_garbage)
{
    tfs_status  st;
    tfs__table *t;
    uint8_t    *bytes;
    size_t      n;
    /* An empty table: LevelDB writes an empty metaindex and index block. */
    ck_assert_int_eq(tfs__table_build(NULL, 0, &bytes, &n, &st), TFS_OK);
    ck_assert_int_eq(tfs__table_parse(bytes, n, "empty", &t, &st), TFS_OK);
    ck_assert_int_eq(t->count, 0);
    tfs__table_free(t);
    tfs_free(bytes);

    uint8_t junk[100];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    ck_assert_int_eq(tfs__table_parse(junk, sizeof junk, "junk.index", &t, &st), TFS_DATA_LOSS);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(st.msg, "junk.index"));
    ck_assert_int_eq(tfs__table_parse(junk, 10, "short.index", &t, &st), TFS_DATA_LOSS);
    ck_assert_int_eq(tfs__table_parse(junk, 0, "zero.index", &t, &st), TFS_DATA_LOSS);
}
END_TEST

/* ---- reading TensorFlow's checkpoints ------------------------------------------------------------ */

START_TEST(read_half_plus_two_snappy)
{
    if (tfs_test_skip_without_fixture("read_half_plus_two_snappy", HP2))
        return;
    char        prefix[4096];
    tfs_status  st;
    tfs_bundle *b;
    ck_assert_msg(tfs_bundle_open(fixture_prefix(HP2, prefix, sizeof prefix), &b, &st) == TFS_OK,
                  "%s", st.msg);
    ck_assert_int_eq(tfs_bundle_num_shards(b), 1);
    ck_assert_int_eq(tfs_bundle_count(b), 5);
    const char *keys[] = {"a", "a2", "b", "c", "c2"};
    for (int i = 0; i < 5; i++) {
        const tfs_bundle_entry *e = tfs_bundle_entry_at(b, i);
        ck_assert_str_eq(e->key, keys[i]);
        ck_assert_int_eq(e->dtype, TFS_DTYPE_FLOAT);
        ck_assert_int_eq(e->rank, 0);
        ck_assert_int_eq(e->size, 4);
        ck_assert_int_eq(e->offset, 4 * i);
    }
    ck_assert_uint_eq(tfs_bundle_find(b, "a")->crc32c_masked, 522663942u);
    assert_scalar(b, "a", 0.5f);
    assert_scalar(b, "b", 2.0f);
    assert_scalar(b, "c", 3.0f);
    assert_scalar(b, "a2", 0.5f);
    assert_scalar(b, "c2", 3.0f);

    /* DT_FLOAT_REF asks for the same data (TF1 signatures carry _REF dtypes). */
    tfs_tensor *t = NULL;
    ck_assert_int_eq(tfs_bundle_read(b, "b", TFS_DTYPE_FLOAT + TFS_DTYPE_REF_OFFSET, &t, &st),
                     TFS_OK);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_bundle_read(b, "b", TFS_DTYPE_INT32, &t, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(t);
    ck_assert_ptr_null(tfs_bundle_find(b, "d"));
    ck_assert_ptr_null(tfs_bundle_find(b, ""));
    ck_assert_int_eq(tfs_bundle_read(b, "nope", TFS_DTYPE_INVALID, &t, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "nope"));
    tfs_bundle_free(b);
}
END_TEST

START_TEST(read_raw_index_fixtures)
{
    if (tfs_test_skip_without_fixture("read_raw_index_fixtures", HP2V) ||
        tfs_test_skip_without_fixture("read_raw_index_fixtures", CNT))
        return;
    char        prefix[4096];
    tfs_status  st;
    tfs_bundle *b;
    ck_assert_int_eq(tfs_bundle_open(fixture_prefix(HP2V, prefix, sizeof prefix), &b, &st), TFS_OK);
    ck_assert_int_eq(tfs_bundle_count(b), 3);
    assert_scalar(b, "a", 0.5f);
    assert_scalar(b, "b", 2.0f);
    assert_scalar(b, "c", 3.0f);
    tfs_bundle_free(b);

    ck_assert_int_eq(tfs_bundle_open(fixture_prefix(CNT, prefix, sizeof prefix), &b, &st), TFS_OK);
    ck_assert_int_eq(tfs_bundle_count(b), 1);
    assert_scalar(b, "counter", 0.0f);
    tfs_bundle_free(b);
}
END_TEST

START_TEST(read_tf2_object_graph_string)
{
    if (tfs_test_skip_without_fixture("read_tf2_object_graph_string", TF2))
        return;
    char        prefix[4096];
    tfs_status  st;
    tfs_bundle *b;
    ck_assert_msg(tfs_bundle_open(fixture_prefix(TF2, prefix, sizeof prefix), &b, &st) == TFS_OK,
                  "%s", st.msg);
    ck_assert_int_eq(tfs_bundle_count(b), 4);
    assert_scalar(b, "a/.ATTRIBUTES/VARIABLE_VALUE", 0.5f);
    assert_scalar(b, "b/.ATTRIBUTES/VARIABLE_VALUE", 2.0f);
    assert_scalar(b, "c/.ATTRIBUTES/VARIABLE_VALUE", 3.0f);

    const tfs_bundle_entry *e = tfs_bundle_find(b, "_CHECKPOINTABLE_OBJECT_GRAPH");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->dtype, TFS_DTYPE_STRING);
    ck_assert_int_eq(e->size, 619);   /* 2 length bytes + 4 checksum bytes + 613 */
    tfs_tensor *t = NULL;
    ck_assert_msg(tfs_bundle_read(b, "_CHECKPOINTABLE_OBJECT_GRAPH", TFS_DTYPE_STRING, &t, &st) ==
                      TFS_OK, "%s", st.msg);
    ck_assert_int_eq(t->rank, 0);
    ck_assert_int_eq(t->nelem, 1);
    tfs_string *s = tfs_tensor_strings(t);
    ck_assert_uint_eq(s[0].len, 613);
    /* A serialized TrackableObjectGraph: field 1 (nodes), length-delimited; the root's children
     * name the variables. */
    ck_assert_uint_eq((uint8_t)s[0].data[0], 0x0a);
    ck_assert_ptr_nonnull(memmem(s[0].data, s[0].len, "VARIABLE_VALUE", 14));
    tfs_tensor_unref(t);
    tfs_bundle_free(b);
}
END_TEST

/* ---- writer ------------------------------------------------------------------------------------- */

START_TEST(writer_round_trip)
{
    char       *dir = tfs_test_mkdtemp();
    char        prefix[4096];
    tfs_status  st;
    snprintf(prefix, sizeof prefix, "%s/ckpt", dir);

    tfs_bundle_writer *w;
    ck_assert_int_eq(tfs_bundle_writer_new(prefix, &w, &st), TFS_OK);

    int64_t     d23[] = {2, 3};
    float       fv[]  = {1.5f, -2.25f, 0.0f, 1e-30f, 3.4e38f, -0.0f};
    tfs_tensor *f     = tfs_test_tensor_f32(2, d23, fv);
    ck_assert_int_eq(tfs_bundle_writer_add(w, "dense/kernel", f, &st), TFS_OK);

    int64_t     d4[] = {4};
    tfs_tensor *i64;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT64, 1, d4, &i64, &st), TFS_OK);
    int64_t iv[] = {INT64_MIN, -1, 0, INT64_MAX};
    memcpy(i64->data, iv, sizeof iv);
    ck_assert_int_eq(tfs_bundle_writer_add(w, "global_step", i64, &st), TFS_OK);

    int64_t     d5[] = {5};
    tfs_tensor *str;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 1, d5, &str, &st), TFS_OK);
    char long200[200];
    for (int i = 0; i < 200; i++)
        long200[i] = (char)(i * 7);   /* includes NUL and high bytes; 200 needs a 2-byte varint */
    ck_assert_int_eq(tfs_tensor_set_string(str, 0, "", 0, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(str, 1, "hello", 5, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(str, 2, long200, 200, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(str, 3, "x", 1, &st), TFS_OK);
    ck_assert_int_eq(tfs_bundle_writer_add(w, "vocab", str, &st), TFS_OK);

    int64_t     d232[] = {2, 3, 2};
    tfs_tensor *r3;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT32, 3, d232, &r3, &st), TFS_OK);
    for (int i = 0; i < 12; i++)
        ((int32_t *)r3->data)[i] = i * i - 50;
    ck_assert_int_eq(tfs_bundle_writer_add(w, "a/rank3", r3, &st), TFS_OK);

    tfs_tensor *sc;
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_DOUBLE, &sc, &st), TFS_OK);
    *(double *)sc->data = 0.1;
    ck_assert_int_eq(tfs_bundle_writer_add(w, "lr", sc, &st), TFS_OK);

    /* Duplicates and the header's empty key are refused. */
    ck_assert_int_eq(tfs_bundle_writer_add(w, "lr", sc, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "lr"));
    ck_assert_int_eq(tfs_bundle_writer_add(w, "", sc, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_bundle_writer_finish(w, &st), TFS_OK);
    ck_assert_int_eq(tfs_bundle_writer_add(w, "late", sc, &st), TFS_FAILED_PRECONDITION);
    tfs_bundle_writer_free(w);

    tfs_bundle *b;
    ck_assert_msg(tfs_bundle_open(prefix, &b, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(tfs_bundle_count(b), 5);
    const char *sorted[] = {"a/rank3", "dense/kernel", "global_step", "lr", "vocab"};
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(tfs_bundle_entry_at(b, i)->key, sorted[i]);

    tfs_tensor *t;
    ck_assert_int_eq(tfs_bundle_read(b, "dense/kernel", TFS_DTYPE_FLOAT, &t, &st), TFS_OK);
    tfs_test_assert_f32(t, 2, d23, fv, 0.0);
    tfs_tensor_unref(t);

    ck_assert_int_eq(tfs_bundle_read(b, "global_step", TFS_DTYPE_INT64, &t, &st), TFS_OK);
    ck_assert_int_eq(t->rank, 1);
    ck_assert_int_eq(t->dims[0], 4);
    ck_assert(memcmp(t->data, iv, sizeof iv) == 0);
    tfs_tensor_unref(t);

    ck_assert_msg(tfs_bundle_read(b, "vocab", TFS_DTYPE_STRING, &t, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(t->nelem, 5);
    tfs_string *s = tfs_tensor_strings(t);
    ck_assert_uint_eq(s[0].len, 0);
    ck_assert_uint_eq(s[1].len, 5);
    ck_assert(memcmp(s[1].data, "hello", 5) == 0);
    ck_assert_uint_eq(s[2].len, 200);
    ck_assert(memcmp(s[2].data, long200, 200) == 0);
    ck_assert_uint_eq(s[3].len, 1);
    ck_assert_uint_eq(s[4].len, 0);
    /* 5 varints (one of 2 bytes) + 4 checksum bytes + 206 string bytes. */
    ck_assert_int_eq(tfs_bundle_find(b, "vocab")->size, 6 + 4 + 206);
    tfs_tensor_unref(t);

    ck_assert_int_eq(tfs_bundle_read(b, "a/rank3", TFS_DTYPE_INVALID, &t, &st), TFS_OK);
    ck_assert_int_eq(t->dtype, TFS_DTYPE_INT32);
    ck_assert_int_eq(t->rank, 3);
    ck_assert(t->dims[0] == 2 && t->dims[1] == 3 && t->dims[2] == 2);
    ck_assert_int_eq(((int32_t *)t->data)[11], 121 - 50);
    ck_assert(memcmp(t->data, r3->data, 48) == 0);
    tfs_tensor_unref(t);

    ck_assert_int_eq(tfs_bundle_read(b, "lr", TFS_DTYPE_DOUBLE, &t, &st), TFS_OK);
    ck_assert_int_eq(t->rank, 0);
    ck_assert(*(double *)t->data == 0.1);
    tfs_tensor_unref(t);

    /* Corrupting one string byte or one length byte is caught. */
    char data_path[4200];
    snprintf(data_path, sizeof data_path, "%s.data-00000-of-00001", prefix);
    const tfs_bundle_entry *ve = tfs_bundle_find(b, "vocab");
    flip_byte(data_path, (size_t)ve->offset + 6 + 4 + 3);   /* inside "hello" */
    ck_assert_int_eq(tfs_bundle_read(b, "vocab", TFS_DTYPE_STRING, &t, &st), TFS_DATA_LOSS);
    ck_assert_ptr_nonnull(strstr(st.msg, "vocab"));
    flip_byte(data_path, (size_t)ve->offset + 6 + 4 + 3);
    flip_byte(data_path, (size_t)ve->offset + 1);            /* the length 5 */
    ck_assert_int_eq(tfs_bundle_read(b, "vocab", TFS_DTYPE_STRING, &t, &st), TFS_DATA_LOSS);
    ck_assert_ptr_null(t);

    tfs_bundle_free(b);
    tfs_tensor_unref(f);
    tfs_tensor_unref(i64);
    tfs_tensor_unref(str);
    tfs_tensor_unref(r3);
    tfs_tensor_unref(sc);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Writing a=0.5, b=2.0, c=3.0 must reproduce TensorFlow's own files byte for byte. */
START_TEST(writer_matches_tensorflow_bytes)
{
    if (tfs_test_skip_without_fixture("writer_matches_tensorflow_bytes", HP2V))
        return;
    char *dir = tfs_test_mkdtemp();
    char  prefix[4096], ours[4200], theirs[4200], tfp[4096];
    snprintf(prefix, sizeof prefix, "%s/variables", dir);
    fixture_prefix(HP2V, tfp, sizeof tfp);

    tfs_status         st;
    tfs_bundle_writer *w;
    ck_assert_int_eq(tfs_bundle_writer_new(prefix, &w, &st), TFS_OK);
    /* Data goes to the shard in the order added (as in TensorFlow); the index is key-sorted. */
    const char *keys[] = {"a", "b", "c"};
    float       vals[] = {0.5f, 2.0f, 3.0f};
    for (int i = 0; i < 3; i++) {
        tfs_tensor *t = tfs_test_tensor_f32(0, NULL, &vals[i]);
        ck_assert_int_eq(tfs_bundle_writer_add(w, keys[i], t, &st), TFS_OK);
        tfs_tensor_unref(t);
    }
    ck_assert_int_eq(tfs_bundle_writer_finish(w, &st), TFS_OK);
    tfs_bundle_writer_free(w);

    const char *suffix[] = {".index", ".data-00000-of-00001"};
    for (int k = 0; k < 2; k++) {
        snprintf(ours, sizeof ours, "%s%s", prefix, suffix[k]);
        snprintf(theirs, sizeof theirs, "%s%s", tfp, suffix[k]);
        size_t na, nb;
        char  *a = tfs_test_read_file(ours, &na), *b = tfs_test_read_file(theirs, &nb);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_msg(na == nb && memcmp(a, b, na) == 0, "%s differs from TensorFlow's (%zu vs %zu)",
                      suffix[k], na, nb);
        free(a);
        free(b);
    }
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(writer_free_unfinished_removes_files)
{
    char      *dir = tfs_test_mkdtemp();
    char       prefix[4096], path[4200];
    tfs_status st;
    snprintf(prefix, sizeof prefix, "%s/x", dir);
    tfs_bundle_writer *w;
    ck_assert_int_eq(tfs_bundle_writer_new(prefix, &w, &st), TFS_OK);
    float       v = 1.0f;
    tfs_tensor *t = tfs_test_tensor_f32(0, NULL, &v);
    ck_assert_int_eq(tfs_bundle_writer_add(w, "v", t, &st), TFS_OK);
    tfs_bundle_writer_free(w);
    tfs_tensor_unref(t);
    /* The directory is empty again: rmdir succeeds only then. */
    ck_assert_int_eq(rmdir(dir), 0);
    free(dir);

    /* A prefix in a missing directory is NOT_FOUND, naming the path. */
    snprintf(path, sizeof path, "/nonexistent-dir-%d/ckpt", 12345);
    ck_assert_int_eq(tfs_bundle_writer_new(path, &w, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "/nonexistent-dir-12345/ckpt"));
}
END_TEST

/* ---- corrupted copies --------------------------------------------------------------------------- */

START_TEST(corrupt_index_byte)
{
    if (tfs_test_skip_without_fixture("corrupt_index_byte", HP2))
        return;
    char      *dir, index[4200];
    char      *prefix = copy_fixture(HP2, &dir);
    tfs_status st;
    tfs_bundle *b = NULL;
    snprintf(index, sizeof index, "%s.index", prefix);
    flip_byte(index, 10);   /* inside the Snappy data block */
    ck_assert_int_eq(tfs_bundle_open(prefix, &b, &st), TFS_DATA_LOSS);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(st.msg, "variables.index") != NULL, "message: %s", st.msg);
    tfs_test_rmtree(dir);
    free(dir);
    free(prefix);
}
END_TEST

/* Every single-byte flip of a real index either fails with DATA_LOSS or leaves the table's
 * meaning intact (the footer's zero padding is not covered by any checksum, as in LevelDB). */
START_TEST(corrupt_index_every_byte)
{
    if (tfs_test_skip_without_fixture("corrupt_index_every_byte", HP2))
        return;
    char   prefix[4096], index[4200];
    size_t n;
    fixture_prefix(HP2, prefix, sizeof prefix);
    snprintf(index, sizeof index, "%s.index", prefix);
    uint8_t *orig = (uint8_t *)tfs_test_read_file(index, &n);
    ck_assert_ptr_nonnull(orig);
    int losses = 0;
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            orig[i] ^= (uint8_t)(1u << bit);
            tfs_status  st;
            tfs_bundle *b = NULL;
            enum tfs_code rc = tfs__bundle_parse_index(orig, n, prefix, &b, &st);
            if (rc == TFS_OK) {
                ck_assert_int_eq(tfs_bundle_count(b), 5);
                ck_assert_msg(i >= n - 48 && i < n - 8, "flip at %zu accepted", i);
            } else {
                ck_assert_msg(rc == TFS_DATA_LOSS, "flip at %zu: %s %s", i, tfs_code_name(rc),
                              st.msg);
                losses++;
            }
            tfs_bundle_free(b);
            orig[i] ^= (uint8_t)(1u << bit);
        }
    }
    ck_assert_int_gt(losses, (int)(n * 8 / 2));
    /* Every truncation fails. */
    for (size_t len = 0; len < n; len++) {
        tfs_status  st;
        tfs_bundle *b = NULL;
        ck_assert_int_eq(tfs__bundle_parse_index(orig, len, prefix, &b, &st), TFS_DATA_LOSS);
        ck_assert_ptr_null(b);
    }
    free(orig);
}
END_TEST

START_TEST(corrupt_data_shard)
{
    if (tfs_test_skip_without_fixture("corrupt_data_shard", HP2))
        return;
    char       *dir, data[4200];
    char       *prefix = copy_fixture(HP2, &dir);
    tfs_status  st;
    tfs_bundle *b;
    tfs_tensor *t = NULL;
    snprintf(data, sizeof data, "%s.data-00000-of-00001", prefix);

    /* A flipped byte in b's bytes: b fails, naming the shard and key; a is still fine. */
    flip_byte(data, 9);
    ck_assert_int_eq(tfs_bundle_open(prefix, &b, &st), TFS_OK);
    ck_assert_int_eq(tfs_bundle_read(b, "b", TFS_DTYPE_FLOAT, &t, &st), TFS_DATA_LOSS);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(st.msg, "variables.data-00000-of-00001") && strstr(st.msg, "'b'"),
                  "message: %s", st.msg);
    assert_scalar(b, "a", 0.5f);

    /* Truncated after c (bytes 12..15): c2 at offset 16 is DATA_LOSS, c is fine. */
    truncate_file(data, 16);
    ck_assert_int_eq(tfs_bundle_read(b, "c2", TFS_DTYPE_FLOAT, &t, &st), TFS_DATA_LOSS);
    ck_assert_msg(strstr(st.msg, "truncated") && strstr(st.msg, "'c2'"), "message: %s", st.msg);
    assert_scalar(b, "c", 3.0f);

    /* A missing shard is NOT_FOUND naming it. */
    ck_assert_int_eq(unlink(data), 0);
    ck_assert_int_eq(tfs_bundle_read(b, "a", TFS_DTYPE_FLOAT, &t, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "variables.data-00000-of-00001"));
    tfs_bundle_free(b);
    tfs_test_rmtree(dir);
    free(dir);
    free(prefix);
}
END_TEST

START_TEST(corrupt_index_truncated_garbage_missing)
{
    if (tfs_test_skip_without_fixture("corrupt_index_truncated_garbage_missing", HP2))
        return;
    char       *dir, index[4200];
    char       *prefix = copy_fixture(HP2, &dir);
    tfs_status  st;
    tfs_bundle *b = NULL;
    snprintf(index, sizeof index, "%s.index", prefix);

    truncate_file(index, 100);
    ck_assert_int_eq(tfs_bundle_open(prefix, &b, &st), TFS_DATA_LOSS);
    ck_assert_ptr_nonnull(strstr(st.msg, "variables.index"));

    char garbage[172];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (char)(i * 131 + 7);
    ck_assert_int_eq(tfs_test_write_file(index, garbage, sizeof garbage), 0);
    ck_assert_int_eq(tfs_bundle_open(prefix, &b, &st), TFS_DATA_LOSS);
    ck_assert_int_eq(tfs_test_write_file(index, "", 0), 0);
    ck_assert_int_eq(tfs_bundle_open(prefix, &b, &st), TFS_DATA_LOSS);

    ck_assert_int_eq(unlink(index), 0);
    ck_assert_int_eq(tfs_bundle_open(prefix, &b, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "variables.index"));
    ck_assert_ptr_null(b);
    tfs_test_rmtree(dir);
    free(dir);
    free(prefix);
}
END_TEST

/* Index entries that lie about sizes are refused before anything is allocated or read. */
START_TEST(lying_entries)
{
    tfs_status st;
    /* Hand-made index: header, then "big" claiming a [1<<20, 1<<20] float tensor of 4 bytes,
     * and "neg" with a negative offset. */
    uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
    uint8_t big[] = {0x08, 0x01, 0x12, 0x0c, 0x12, 0x04, 0x08, 0x80, 0x80, 0x40, 0x12, 0x04,
                     0x08, 0x80, 0x80, 0x40, 0x28, 0x04};
    tfs__table_entry e[] = {{"", 0, hdr, sizeof hdr}, {"big", 3, big, sizeof big}};
    uint8_t *bytes;
    size_t   n;
    ck_assert_int_eq(tfs__table_build(e, 2, &bytes, &n, &st), TFS_OK);
    tfs_bundle *b;
    ck_assert_msg(tfs__bundle_parse_index(bytes, n, "/nonexistent/v", &b, &st) == TFS_OK, "%s",
                  st.msg);
    tfs_tensor *t = NULL;
    ck_assert_int_eq(tfs_bundle_read(b, "big", TFS_DTYPE_FLOAT, &t, &st), TFS_DATA_LOSS);
    ck_assert_ptr_nonnull(strstr(st.msg, "big"));
    tfs_bundle_free(b);
    tfs_free(bytes);

    uint8_t neg[] = {0x08, 0x01, 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                     0x28, 0x04};
    tfs__table_entry e2[] = {{"", 0, hdr, sizeof hdr}, {"neg", 3, neg, sizeof neg}};
    ck_assert_int_eq(tfs__table_build(e2, 2, &bytes, &n, &st), TFS_OK);
    ck_assert_int_eq(tfs__bundle_parse_index(bytes, n, "/nonexistent/v", &b, &st), TFS_DATA_LOSS);
    ck_assert_ptr_nonnull(strstr(st.msg, "neg"));
    tfs_free(bytes);

    /* A big-endian bundle is refused. */
    uint8_t bige[] = {0x08, 0x01, 0x10, 0x01};
    tfs__table_entry e3[] = {{"", 0, bige, sizeof bige}};
    ck_assert_int_eq(tfs__table_build(e3, 1, &bytes, &n, &st), TFS_OK);
    ck_assert_int_eq(tfs__bundle_parse_index(bytes, n, "/nonexistent/v", &b, &st),
                     TFS_UNIMPLEMENTED);
    ck_assert_ptr_nonnull(strstr(st.msg, "big-endian"));
    tfs_free(bytes);

    /* No header entry. */
    tfs__table_entry e4[] = {{"k", 1, big, sizeof big}};
    ck_assert_int_eq(tfs__table_build(e4, 1, &bytes, &n, &st), TFS_OK);
    ck_assert_int_eq(tfs__bundle_parse_index(bytes, n, "/nonexistent/v", &b, &st), TFS_DATA_LOSS);
    tfs_free(bytes);
}
END_TEST

Suite *suite_savedmodel_bundle(void)
{
    Suite *s  = suite_create("savedmodel_bundle");
    TCase *tc = tcase_create("bundle");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, crc32c_known_vectors);
    tcase_add_test(tc, table_build_parse_many_blocks);
    tcase_add_test(tc, table_empty_and_garbage);
    tcase_add_test(tc, writer_round_trip);
    tcase_add_test(tc, writer_free_unfinished_removes_files);
    tcase_add_test(tc, lying_entries);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("bundle_fixtures", NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, read_half_plus_two_snappy);
    tcase_add_test(tc, read_raw_index_fixtures);
    tcase_add_test(tc, read_tf2_object_graph_string);
    tcase_add_test(tc, writer_matches_tensorflow_bytes);
    tcase_add_test(tc, corrupt_index_byte);
    tcase_add_test(tc, corrupt_index_every_byte);
    tcase_add_test(tc, corrupt_data_shard);
    tcase_add_test(tc, corrupt_index_truncated_garbage_missing);
    suite_add_tcase(s, tc);
    return s;
}
