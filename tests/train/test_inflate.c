/* Tests of inflate and the gzip container (train/inflate.c, train/gzip.c).
 *
 * Reference data comes from the system's gzip(1) (zlib's implementation of the same formats,
 * independent of ours), run at test time on files the test writes: text, random bytes (stored
 * blocks), zeros (long runs at distance 1), an empty file and an 8 MB file, at levels 1, 6 and 9.
 * Damaged inputs -- a flipped CRC, a wrong ISIZE, every truncation of a small file, every single
 * byte flipped in the compressed data, random garbage -- must end in DATA_LOSS (or, for garbage,
 * at worst RESOURCE_EXHAUSTED at the output limit), never in a crash or a wrong "OK". Deflate
 * streams with specific defects (block type 3, bad stored length, over-subscribed and incomplete
 * codes, a missing end-of-block code, a distance before the start) are written bit by bit.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train-impl.h"

Suite *suite_train_inflate(void);

#define ASSERT_MSG_HAS(st, text) \
    ck_assert_msg(strstr((st).msg, (text)) != NULL, "message '%s' lacks '%s'", (st).msg, (text))

/* Test data of n bytes of the given kind: 0 text-like, 1 random, 2 zeros, 3 mixed. */
static uint8_t *make_data(int kind, size_t n, uint64_t seed)
{
    static const char *const words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ",
                                        "lazy ", "dog ", "tensor ", "graph ", "\n", "serving, "};
    uint8_t *d = malloc(n ? n : 1);
    uint64_t s = seed;
    for (size_t i = 0; i < n;) {
        int k = kind == 3 ? (int)((i / 4096) % 3) : kind;
        if (k == 0) {
            const char *w = words[tt_rand(&s) % 12];
            for (; *w && i < n; w++)
                d[i++] = (uint8_t)*w;
        } else if (k == 1) {
            d[i++] = (uint8_t)tt_rand(&s);
        } else {
            d[i++] = 0;
        }
    }
    return d;
}

/* Writes data to dir/name and gzips it with `gzip -<level>` into dir/name.gz. */
static void gzip_file(const char *dir, const char *name, const uint8_t *d, size_t n, int level)
{
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, name), d, n), 0);
    ck_assert_int_eq(tt_sh("gzip -%d -k -f '%s'", level, tt_path(dir, name)), 0);
}

static void round_trip(int kind, size_t n, int level)
{
    if (!tt_have("gzip")) {
        fprintf(stderr, "SKIP inflate round trip: no gzip command\n");
        return;
    }
    char    *dir = tfs_test_mkdtemp();
    uint8_t *d = make_data(kind, n, 1234 + (uint64_t)kind);
    gzip_file(dir, "data", d, n, level);
    void      *out;
    size_t     len;
    tfs_status st;
    ck_assert_msg(tfs_data_file_read(tt_path(dir, "data.gz"), &out, &len, &st) == TFS_OK,
                  "kind %d, %zu bytes, level %d: %s", kind, n, level, st.msg);
    ck_assert_uint_eq(len, n);
    ck_assert_msg(n == 0 || memcmp(out, d, n) == 0, "kind %d level %d: data differs", kind, level);
    tfs_free(out);
    free(d);
    tfs_test_rmtree(dir);
    free(dir);
}

START_TEST(test_inflate_gzip_levels)
{
    static const int levels[] = {1, 6, 9};
    for (int kind = 0; kind < 4; kind++)
        for (int l = 0; l < 3; l++)
            round_trip(kind, 300000, levels[l]);
}
END_TEST

START_TEST(test_inflate_gzip_small_and_empty)
{
    for (size_t n = 0; n < 40; n += 3)
        round_trip(0, n, 6);
    round_trip(1, 1, 9);
}
END_TEST

START_TEST(test_inflate_gzip_large)
{
    round_trip(3, 8u << 20, 6);
}
END_TEST

/* A plain file comes back as it is; a .gz name without gzip data is refused. */
START_TEST(test_inflate_plain_and_fake_gz)
{
    char      *dir = tfs_test_mkdtemp();
    void      *out;
    size_t     len;
    tfs_status st;
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "p.txt"), "hello", 5), 0);
    ck_assert_int_eq(tfs_data_file_read(tt_path(dir, "p.txt"), &out, &len, &st), TFS_OK);
    ck_assert_uint_eq(len, 5);
    ck_assert(memcmp(out, "hello", 5) == 0);
    tfs_free(out);
    ck_assert_int_eq(tfs_test_write_file(tt_path(dir, "p.gz"), "hello", 5), 0);
    ck_assert_int_eq(tfs_data_file_read(tt_path(dir, "p.gz"), &out, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "p.gz");
    ASSERT_MSG_HAS(st, "not in gzip format");
    ck_assert_ptr_null(out);
    ck_assert_int_eq(tfs_data_file_read(tt_path(dir, "absent"), &out, &len, &st), TFS_NOT_FOUND);
    ASSERT_MSG_HAS(st, "absent");
    ck_assert_int_eq(tfs_data_file_read(dir, &out, &len, &st), TFS_FAILED_PRECONDITION);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Reads dir/name.gz into memory (malloc'ed). */
static uint8_t *load_gz(const char *dir, const char *name, size_t *n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    uint8_t *b = (uint8_t *)tfs_test_read_file(path, n);
    ck_assert_ptr_nonnull(b);
    return b;
}

static enum tfs_code gunzip(const uint8_t *b, size_t n, size_t *len, tfs_status *st)
{
    void         *out = NULL;
    enum tfs_code code = tfs_gunzip("t.gz", b, n, (size_t)1 << 26, &out, len, st);
    ck_assert(code == TFS_OK || out == NULL);
    tfs_free(out);
    return code;
}

START_TEST(test_inflate_corrupt_trailer)
{
    if (!tt_have("gzip"))
        return;
    char    *dir = tfs_test_mkdtemp();
    uint8_t *d = make_data(0, 5000, 7);
    gzip_file(dir, "x", d, 5000, 6);
    size_t     n, len;
    tfs_status st;
    uint8_t   *b = load_gz(dir, "x", &n);
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_OK);
    b[n - 8] ^= 1;   /* CRC-32 */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "CRC-32 mismatch");
    ASSERT_MSG_HAS(st, "t.gz");
    b[n - 8] ^= 1;
    b[n - 3] ^= 1;   /* ISIZE */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "length mismatch");
    b[n - 3] ^= 1;
    b[3] = 0x20;   /* a reserved flag */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "reserved");
    b[3] = 0x08;   /* FNAME, as gzip wrote it */
    b[2] = 7;      /* not deflate */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "compression method");
    b[2] = 8;
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_OK);
    free(b);
    free(d);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Every prefix of a gzip file is DATA_LOSS; every flipped byte after the header is too (the
 * deflate decoder or the CRC-32 catches it). */
START_TEST(test_inflate_truncated_and_flipped)
{
    if (!tt_have("gzip"))
        return;
    char    *dir = tfs_test_mkdtemp();
    uint8_t *d = make_data(3, 12000, 9);
    gzip_file(dir, "x", d, 12000, 9);
    size_t     n, len;
    tfs_status st;
    uint8_t   *b = load_gz(dir, "x", &n);
    for (size_t cut = 0; cut < n; cut++) {
        enum tfs_code c = gunzip(b, cut, &len, &st);
        ck_assert_msg(c == TFS_DATA_LOSS, "cut at %zu of %zu: %s %s", cut, n, tfs_code_name(c),
                      st.msg);
    }
    size_t hdr = 10 + strlen("x") + 1;   /* gzip stores the name */
    for (size_t i = hdr; i < n; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            b[i] ^= (uint8_t)(1u << bit);
            enum tfs_code c = gunzip(b, n, &len, &st);
            ck_assert_msg(c == TFS_DATA_LOSS, "byte %zu bit %d flipped: %s", i, bit,
                          tfs_code_name(c));
            b[i] ^= (uint8_t)(1u << bit);
        }
    free(b);
    free(d);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(test_inflate_multi_member_and_padding)
{
    if (!tt_have("gzip"))
        return;
    char    *dir = tfs_test_mkdtemp();
    uint8_t *a = make_data(0, 1000, 1), *c = make_data(1, 777, 2);
    gzip_file(dir, "a", a, 1000, 1);
    gzip_file(dir, "c", c, 777, 9);
    size_t   na, nc, len;
    uint8_t *ga = load_gz(dir, "a", &na), *gc = load_gz(dir, "c", &nc);
    uint8_t *both = malloc(na + nc + 16);
    memcpy(both, ga, na);
    memcpy(both + na, gc, nc);
    memset(both + na + nc, 0, 16);
    void      *out;
    tfs_status st;
    ck_assert_int_eq(tfs_gunzip("ac.gz", both, na + nc + 16, 1 << 20, &out, &len, &st), TFS_OK);
    ck_assert_uint_eq(len, 1777);
    ck_assert(memcmp(out, a, 1000) == 0 && memcmp((uint8_t *)out + 1000, c, 777) == 0);
    tfs_free(out);
    both[na + nc + 5] = 'x';   /* garbage after the zeros */
    ck_assert_int_eq(tfs_gunzip("ac.gz", both, na + nc + 16, 1 << 20, &out, &len, &st),
                     TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "ac.gz");
    /* The output limit. */
    ck_assert_int_eq(tfs_gunzip("ac.gz", both, na + nc, 1500, &out, &len, &st),
                     TFS_RESOURCE_EXHAUSTED);
    ck_assert_ptr_null(out);
    free(both);
    free(ga);
    free(gc);
    free(a);
    free(c);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Header fields gzip(1) does not write: FEXTRA, FCOMMENT and FHCRC (its CRC checked). */
START_TEST(test_inflate_header_fields)
{
    /* A stored deflate block holding "abc". */
    static const uint8_t body[] = {0x01, 0x03, 0x00, 0xfc, 0xff, 'a', 'b', 'c'};
    uint8_t  g[128];
    size_t   n = 0;
    uint8_t  hdr[] = {0x1f, 0x8b, 8, 0x04 | 0x08 | 0x10 | 0x02, 0, 0, 0, 0, 0, 3};
    memcpy(g, hdr, sizeof hdr);
    n = sizeof hdr;
    g[n++] = 3;   /* XLEN */
    g[n++] = 0;
    memcpy(g + n, "xyz", 3);
    n += 3;
    memcpy(g + n, "name", 5);
    n += 5;
    memcpy(g + n, "a comment", 10);
    n += 10;
    uint32_t hc = tfs__crc32(0, g, n);
    size_t   hcrc_at = n;
    g[n++] = (uint8_t)hc;
    g[n++] = (uint8_t)(hc >> 8);
    memcpy(g + n, body, sizeof body);
    n += sizeof body;
    uint32_t crc = tfs__crc32(0, "abc", 3);
    /* The published check value of CRC-32/ISO-HDLC, independent of our table. */
    ck_assert_uint_eq(tfs__crc32(0, "123456789", 9), 0xCBF43926u);
    for (int i = 0; i < 4; i++)
        g[n++] = (uint8_t)(crc >> (8 * i));
    for (int i = 0; i < 4; i++)   /* ISIZE 3 */
        g[n++] = i == 0 ? 3 : 0;
    void      *out;
    size_t     len;
    tfs_status st;
    ck_assert_msg(tfs_gunzip("h.gz", g, n, 100, &out, &len, &st) == TFS_OK, "%s", st.msg);
    ck_assert_uint_eq(len, 3);
    ck_assert(memcmp(out, "abc", 3) == 0);
    tfs_free(out);
    g[hcrc_at] ^= 0xff;
    ck_assert_int_eq(tfs_gunzip("h.gz", g, n, 100, &out, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "header CRC");
    ck_assert_int_eq(tfs_gunzip("h.gz", g, 0, 100, &out, &len, &st), TFS_DATA_LOSS);
    ck_assert_int_eq(tfs_gunzip("h.gz", g, 15, 100, &out, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "truncated header");
}
END_TEST

/* ---- hand-made deflate streams -------------------------------------------------------------- */

typedef struct bw {
    uint8_t b[256];
    size_t  nbits;
} bw;

static void put(bw *w, unsigned v, unsigned n)   /* n bits of v, least significant first */
{
    for (unsigned i = 0; i < n; i++, w->nbits++)
        if (v >> i & 1)
            w->b[w->nbits / 8] |= (uint8_t)(1u << (w->nbits % 8));
}

static void put_code(bw *w, unsigned code, unsigned len)   /* Huffman codes: MSB first */
{
    for (unsigned i = len; i-- > 0; w->nbits++)
        if (code >> i & 1)
            w->b[w->nbits / 8] |= (uint8_t)(1u << (w->nbits % 8));
}

static enum tfs_code inflate_bytes(const uint8_t *in, size_t n, tfs__bytes *o, tfs_status *st)
{
    size_t used;
    memset(o, 0, sizeof *o);
    return tfs__inflate(in, n, 0, o, 1 << 20, &used, "raw", st);
}

static void expect_raw_error(bw *w, const char *text)
{
    tfs__bytes o;
    tfs_status st;
    ck_assert_int_eq(inflate_bytes(w->b, (w->nbits + 7) / 8, &o, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, text);
    ASSERT_MSG_HAS(st, "raw: deflate");
    tfs_free(o.data);
}

START_TEST(test_inflate_bad_streams)
{
    bw w;
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 3, 2);   /* block type 3 */
    expect_raw_error(&w, "invalid block type");

    memset(&w, 0, sizeof w);   /* stored, LEN 5 with NLEN 0 */
    put(&w, 1, 1);
    put(&w, 0, 2);
    w.nbits = 8;
    put(&w, 5, 16);
    put(&w, 0, 16);
    expect_raw_error(&w, "complement");

    memset(&w, 0, sizeof w);   /* fixed block: length 3 at distance 1 with nothing before */
    put(&w, 1, 1);
    put(&w, 1, 2);
    put_code(&w, 1, 7);   /* symbol 257: length 3 */
    put_code(&w, 0, 5);   /* distance code 0: distance 1 */
    put_code(&w, 0, 7);   /* end of block */
    expect_raw_error(&w, "distance too far back");

    memset(&w, 0, sizeof w);   /* fixed block: literal/length symbol 286 is never valid */
    put(&w, 1, 1);
    put(&w, 1, 2);
    put_code(&w, 0xc6, 8);   /* 280..287 are 11000000..11000111 */
    expect_raw_error(&w, "invalid literal/length code");

    memset(&w, 0, sizeof w);   /* dynamic: 19 code-length codes of length 1 */
    put(&w, 1, 1);
    put(&w, 2, 2);
    put(&w, 0, 5);
    put(&w, 0, 5);
    put(&w, 15, 4);
    for (int i = 0; i < 19; i++)
        put(&w, 1, 3);
    expect_raw_error(&w, "invalid code lengths code");

    /* dynamic: code-length code {18: 1 bit (code 1), 8: 1 bit (code 0)}; all 258 lengths zero,
     * so there is no end-of-block code. CL_ORDER starts 16 17 18 0 8: HCLEN 5 - 4 = 1. */
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 2, 2);
    put(&w, 0, 5);   /* 257 */
    put(&w, 0, 5);   /* 1 */
    put(&w, 1, 4);
    put(&w, 0, 3);   /* 16 */
    put(&w, 0, 3);   /* 17 */
    put(&w, 1, 3);   /* 18 */
    put(&w, 0, 3);   /* 0 */
    put(&w, 1, 3);   /* 8 */
    put_code(&w, 1, 1);
    put(&w, 127, 7);   /* 138 zeros */
    put_code(&w, 1, 1);
    put(&w, 109, 7);   /* 120 zeros */
    expect_raw_error(&w, "end-of-block");

    /* dynamic: literal 0 and end-of-block with 2-bit codes only: an incomplete code. Code-length
     * code: 18 -> 1 bit (0), 0 -> 2 bits (10), 2 -> 2 bits (11); 2 is entry 15 of CL_ORDER. */
    memset(&w, 0, sizeof w);
    put(&w, 1, 1);
    put(&w, 2, 2);
    put(&w, 0, 5);
    put(&w, 0, 5);
    put(&w, 12, 4);   /* 16 entries */
    static const uint8_t cl[16] = {0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    for (int i = 0; i < 16; i++)
        put(&w, cl[i], 3);
    put_code(&w, 3, 2);   /* literal 0: length 2 */
    put_code(&w, 0, 1);
    put(&w, 127, 7);      /* 138 zeros: 1..138 */
    put_code(&w, 0, 1);
    put(&w, 106, 7);      /* 117 zeros: 139..255 */
    put_code(&w, 3, 2);   /* 256: length 2 */
    put_code(&w, 2, 2);   /* the one distance: unused */
    expect_raw_error(&w, "incomplete literal/length code");

    /* A good stored block followed by nothing although BFINAL was 0: truncated. */
    static const uint8_t stored[] = {0x00, 0x03, 0x00, 0xfc, 0xff, 'a', 'b', 'c'};
    tfs__bytes o;
    tfs_status st;
    ck_assert_int_eq(inflate_bytes(stored, sizeof stored, &o, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "truncated");
    tfs_free(o.data);
    uint8_t fin[sizeof stored];
    memcpy(fin, stored, sizeof stored);
    fin[0] = 1;
    ck_assert_int_eq(inflate_bytes(fin, sizeof fin, &o, &st), TFS_OK);
    ck_assert_uint_eq(o.len, 3);
    tfs_free(o.data);
}
END_TEST

/* Random bytes and random mutations of a real stream: any result but a crash or a leak. */
START_TEST(test_inflate_garbage)
{
    uint64_t s = 99;
    uint8_t  buf[600];
    for (int round = 0; round < 3000; round++) {
        size_t n = tt_rand(&s) % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)tt_rand(&s);
        if (round % 3 == 0 && n > 0)
            buf[0] = (uint8_t)((buf[0] & ~6u) | 4u);   /* steer towards dynamic blocks */
        tfs__bytes    o;
        tfs_status    st;
        enum tfs_code c = inflate_bytes(buf, n, &o, &st);
        ck_assert_msg(c == TFS_OK || c == TFS_DATA_LOSS || c == TFS_RESOURCE_EXHAUSTED, "%s",
                      tfs_code_name(c));
        tfs_free(o.data);
    }
}
END_TEST

Suite *suite_train_inflate(void)
{
    Suite *s = suite_create("inflate");
    TCase *tc = tcase_create("inflate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_inflate_gzip_levels);
    tcase_add_test(tc, test_inflate_gzip_small_and_empty);
    tcase_add_test(tc, test_inflate_gzip_large);
    tcase_add_test(tc, test_inflate_plain_and_fake_gz);
    tcase_add_test(tc, test_inflate_corrupt_trailer);
    tcase_add_test(tc, test_inflate_truncated_and_flipped);
    tcase_add_test(tc, test_inflate_multi_member_and_padding);
    tcase_add_test(tc, test_inflate_header_fields);
    tcase_add_test(tc, test_inflate_bad_streams);
    tcase_add_test(tc, test_inflate_garbage);
    suite_add_tcase(s, tc);
    return s;
}
