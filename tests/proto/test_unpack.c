/* The bounded unpack (proto/unpack.h): nesting up to 100 levels unpacks, 101 and 5000 levels are
 * refused with the reason, through every kind of message field (optional, repeated, map value,
 * the TensorFlow types' TensorProto -> variant_val -> tensors loop); unknown and bytes fields are
 * not descended; and broken framing (every truncation, long varints and tags, huge lengths, group
 * wire types, random bytes) is refused only where protobuf-c refuses it too, without reading out
 * of bounds: every input lives in a buffer of exactly its size, so the ASan build catches a byte
 * read past the end.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/unpack.h"
#include "tensorflow_serving/apis/predict.pb-c.h"
#include "textformat_test.pb-c.h"

#define NODE    (&tfs__test__node__descriptor)
#define PREDICT (&tensorflow__serving__predict_request__descriptor)

/* A message built back to front: the innermost bytes are written first at the end of the buffer,
 * so each level's length is known when its header goes in front. */
typedef struct wire {
    uint8_t *buf;
    size_t   cap;
    size_t   start;   /* content is buf[start..cap) */
} wire;

static void wire_init(wire *w, size_t cap)
{
    w->buf = malloc(cap);
    ck_assert_ptr_nonnull(w->buf);
    w->cap = cap;
    w->start = cap;
}

static void put_byte(wire *w, uint8_t b)
{
    ck_assert_uint_gt(w->start, 0);
    w->buf[--w->start] = b;
}

static void put_varint(wire *w, uint64_t v)
{
    uint8_t tmp[10];
    int     n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    while (n > 0)
        put_byte(w, tmp[--n]);
}

/* Wraps everything written so far as length-delimited field `field`. */
static void wrap(wire *w, uint32_t field)
{
    put_varint(w, w->cap - w->start);
    put_varint(w, (uint64_t)field << 3 | 2);
}

static void put_bytes(wire *w, const void *p, size_t n)
{
    ck_assert_uint_ge(w->start, n);
    w->start -= n;
    memcpy(w->buf + w->start, p, n);
}

/* A copy of the content in a buffer of exactly its size (ASan sees any read past its end). */
static uint8_t *exact_copy(const wire *w, size_t *len)
{
    *len = w->cap - w->start;
    uint8_t *p = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(p);
    memcpy(p, w->buf + w->start, *len);
    return p;
}

/* Node nested `depth` levels through Node.child (field 2). */
static uint8_t *node_chain(int depth, uint32_t field, size_t *len)
{
    wire w;
    wire_init(&w, 16 * (size_t)depth + 16);
    put_bytes(&w, "\x0a\x01x", 3);   /* name: "x" in the innermost node */
    for (int i = 0; i < depth; i++)
        wrap(&w, field);
    uint8_t *p = exact_copy(&w, len);
    free(w.buf);
    return p;
}

static int chain_depth(const Tfs__Test__Node *n)
{
    int d = 0;
    for (; n->child || n->n_children; d++)
        n = n->child ? n->child : n->children[0];
    ck_assert_str_eq(n->name, "x");
    return d;
}

START_TEST(depth_100_unpacks_101_is_refused)
{
    static const uint32_t fields[] = {2, 3};   /* child, children */
    for (int k = 0; k < 2; k++) {
        size_t            len;
        uint8_t          *p = node_chain(100, fields[k], &len);
        ProtobufCMessage *m = (ProtobufCMessage *)1;
        tfs_status        st;
        ck_assert_int_eq(tfs_proto_check_depth(NODE, p, len, &st), TFS_OK);
        ck_assert_int_eq(tfs_proto_unpack_bounded(NODE, NULL, p, len, &m, &st), TFS_OK);
        ck_assert_int_eq(st.code, TFS_OK);
        ck_assert_int_eq(chain_depth((Tfs__Test__Node *)m), 100);
        protobuf_c_message_free_unpacked(m, NULL);
        free(p);

        p = node_chain(101, fields[k], &len);
        m = (ProtobufCMessage *)1;
        ck_assert_int_eq(tfs_proto_unpack_bounded(NODE, NULL, p, len, &m, &st),
                         TFS_INVALID_ARGUMENT);
        ck_assert_ptr_null(m);
        /* The 101st header is the innermost, just before its 2-byte header and 3-byte body. */
        char want[80];
        snprintf(want, sizeof want, "message nests deeper than 100 levels (at byte %zu)",
                 len - 5);
        ck_assert_str_eq(st.msg, want);
        free(p);
    }
}
END_TEST

START_TEST(deep_nesting_is_refused_without_recursing)
{
    /* 5000 levels would take protobuf-c's recursion past a small stack; the walk has none. */
    size_t     len;
    uint8_t   *p = node_chain(5000, 3, &len);
    tfs_status st;
    ck_assert_int_eq(tfs_proto_check_depth(NODE, p, len, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "message nests deeper than 100 levels"));
    free(p);

    /* The serving types: PredictRequest.inputs["x"] = TensorProto whose variant_val holds a
     * VariantTensorDataProto whose tensors hold a TensorProto, and so on, 2500 times. */
    wire w;
    wire_init(&w, 5000 * 8 + 64);
    for (int i = 0; i < 2500; i++) {
        wrap(&w, 3);    /* VariantTensorDataProto.tensors */
        wrap(&w, 15);   /* TensorProto.variant_val */
    }
    wrap(&w, 2);                      /* map entry value */
    put_bytes(&w, "\x0a\x01x", 3);    /* map entry key */
    wrap(&w, 2);                      /* PredictRequest.inputs */
    p = exact_copy(&w, &len);
    free(w.buf);
    ProtobufCMessage *m = (ProtobufCMessage *)1;
    ck_assert_int_eq(tfs_proto_unpack_bounded(PREDICT, NULL, p, len, &m, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(st.msg, "message nests deeper than 100 levels"));
    free(p);
}
END_TEST

START_TEST(unknown_and_bytes_fields_are_not_descended)
{
    /* 5000 levels of message-shaped bytes under an unknown field number (99), under a bytes
     * field (Scalars.byt inside Node.scalars) and under map<string,int64> labels' key: protobuf-c
     * keeps or skips them without parsing, so they are no deeper than one level. */
    static const uint32_t outer[][3] = {{99, 0, 0}, {15, 6, 0}, {1, 7, 0}};
    for (int k = 0; k < 3; k++) {
        wire w;
        wire_init(&w, 5000 * 4 + 64);
        for (int i = 0; i < 5000; i++)
            wrap(&w, 2);
        for (int j = 0; j < 3 && outer[k][j]; j++)
            wrap(&w, outer[k][j]);
        size_t            len;
        uint8_t          *p = exact_copy(&w, &len);
        ProtobufCMessage *m = NULL;
        tfs_status        st;
        free(w.buf);
        ck_assert_msg(tfs_proto_unpack_bounded(NODE, NULL, p, len, &m, &st) == TFS_OK,
                      "case %d: %s", k, st.msg);
        protobuf_c_message_free_unpacked(m, NULL);
        free(p);
    }
}
END_TEST

/* check_depth refuses p only where protobuf-c refuses it too; returns the code. */
static enum tfs_code agrees(const uint8_t *p, size_t len, const char *what)
{
    tfs_status    st;
    enum tfs_code code = tfs_proto_check_depth(NODE, p, len, &st);
    ck_assert_msg(code == TFS_OK || code == TFS_DATA_LOSS || code == TFS_INVALID_ARGUMENT,
                  "%s: code %d", what, code);
    if (code == TFS_DATA_LOSS) {
        ck_assert_ptr_nonnull(strstr(st.msg, "malformed tfs.test.Node ("));
        ProtobufCMessage *m = protobuf_c_message_unpack(NODE, NULL, len, p);
        ck_assert_msg(m == NULL, "%s: refused (%s) but protobuf-c accepts it", what, st.msg);
    }
    return code;
}

START_TEST(truncations_never_read_past_the_end)
{
    /* Every wire type, nested three levels deep (child -> children -> scalars), cut at every
     * length. */
    wire w;
    wire_init(&w, 512);
    put_bytes(&w, "\x3d\x01\x02\x03\x04", 5);                  /* f32 */
    put_bytes(&w, "\x41\x01\x02\x03\x04\x05\x06\x07\x08", 9);  /* f64 */
    put_bytes(&w, "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);   /* i64: -1 */
    wrap(&w, 6);                                               /* Node.scalars */
    put_bytes(&w, "\x0a\x03" "abc", 5);                        /* Node.name */
    wrap(&w, 3);                                               /* Node.children */
    wrap(&w, 2);                                               /* Node.child */
    size_t   len;
    uint8_t *full = exact_copy(&w, &len);
    free(w.buf);
    ProtobufCMessage *m;
    tfs_status        st;
    ck_assert_int_eq(tfs_proto_unpack_bounded(NODE, NULL, full, len, &m, &st), TFS_OK);
    ck_assert_int_eq(((Tfs__Test__Node *)m)->child->children[0]->scalars->i64, -1);
    protobuf_c_message_free_unpacked(m, NULL);
    ck_assert_int_eq(agrees(full, len, "whole"), TFS_OK);
    int refused = 0;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, full, cut);
        char what[32];
        snprintf(what, sizeof what, "cut at %zu", cut);
        refused += agrees(cut ? p : NULL, cut, what) == TFS_DATA_LOSS;
        free(p);
    }
    /* Only the cuts at a field boundary of the top level leave a whole message. */
    ck_assert_int_eq(refused, (int)len - 1);
    free(full);
}
END_TEST

START_TEST(bad_framing_is_refused_as_protobuf_c_does)
{
    static const struct {
        const char *bytes;
        size_t      len;
        const char *why;   /* NULL: accepted */
    } cases[] = {
        {"\x00", 1, "bad tag at byte 0"},                        /* field number 0 */
        {"\x80\x01\x00", 3, NULL},                /* number bits only in the second byte */
        {"\xf8\xff\xff\xff\x0f\x00", 6, NULL},                   /* 5-byte tag, largest number */
        {"\xf8\xff\xff\xff\xff\x01\x00", 7, "bad tag at byte 0"},   /* 6-byte tag */
        {"\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, NULL},     /* 10-byte varint */
        {"\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x01", 12,
         "unterminated varint at byte 0"},                              /* 11 bytes */
        {"\x20\x80", 2, "unterminated varint at byte 0"},
        {"\x0a\xff\xff\xff\xff\x07", 6, "bad length at byte 0"},       /* INT_MAX, too short */
        {"\x0a\x80\x80\x80\x80\x08", 6, "bad length at byte 0"},       /* INT_MAX + 1 */
        {"\x0a\x80\x80\x80\x80\x80\x01", 7, "bad length at byte 0"},   /* 6-byte length */
        {"\x0a\x80\x80\x80\x80\x00", 6, NULL},                         /* 5-byte zero length */
        {"\x12\x04\x0a\x03" "ab\x20\x01", 8, "bad length at byte 2"},  /* inner overruns outer */
        {"\x13\x14", 2, "unsupported wire type at byte 0"},            /* start/end group */
        {"\x0e", 1, "unsupported wire type at byte 0"},                 /* wire type 6 */
        {"\x3d\x01\x02\x03", 4, "truncated fixed-size field at byte 0"},
        {"\x12\x08\x41\x01\x02\x03\x04\x05\x06\x07", 10,
         "truncated fixed-size field at byte 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *p = malloc(cases[i].len);
        memcpy(p, cases[i].bytes, cases[i].len);
        tfs_status    st;
        enum tfs_code code = tfs_proto_check_depth(NODE, p, cases[i].len, &st);
        if (!cases[i].why) {
            ck_assert_msg(code == TFS_OK, "case %zu: %s", i, st.msg);
        } else {
            char want[128];
            snprintf(want, sizeof want, "malformed tfs.test.Node (%s)", cases[i].why);
            ck_assert_msg(code == TFS_DATA_LOSS, "case %zu: code %d", i, code);
            ck_assert_str_eq(st.msg, want);
        }
        agrees(p, cases[i].len, "case");
        free(p);
    }
}
END_TEST

START_TEST(random_bytes_agree_with_protobuf_c)
{
    /* Short random buffers biased towards the framing bytes that matter; a fixed seed keeps the
     * run repeatable. */
    static const uint8_t pick[] = {0x08, 0x0a, 0x12, 0x1a, 0x31, 0x35, 0x3d, 0x41, 0x80, 0xff,
                                   0x00, 0x01, 0x02, 0x05, 0x7f, 0x13};
    uint64_t x = 0x9e3779b97f4a7c15u;
    int      n_ok = 0, n_bad = 0;
    for (int iter = 0; iter < 200000; iter++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t   len = 1 + (size_t)(x % 24);
        uint8_t *p = malloc(len);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            p[i] = (x & 1) ? pick[(x >> 1) % sizeof pick] : (uint8_t)(x >> 8);
        }
        enum tfs_code code = agrees(p, len, "random");
        n_ok += code == TFS_OK;
        n_bad += code == TFS_DATA_LOSS;
        free(p);
    }
    /* Both outcomes are exercised. */
    ck_assert_int_gt(n_ok, 1000);
    ck_assert_int_gt(n_bad, 1000);
}
END_TEST

Suite *suite_proto_unpack(void);
Suite *suite_proto_unpack(void)
{
    Suite *s = suite_create("proto_unpack");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, depth_100_unpacks_101_is_refused);
    tcase_add_test(tc, deep_nesting_is_refused_without_recursing);
    tcase_add_test(tc, unknown_and_bytes_fields_are_not_descended);
    tcase_add_test(tc, truncations_never_read_past_the_end);
    tcase_add_test(tc, bad_framing_is_refused_as_protobuf_c_does);
    tcase_add_test(tc, random_bytes_agree_with_protobuf_c);
    suite_add_tcase(s, tc);
    return s;
}
