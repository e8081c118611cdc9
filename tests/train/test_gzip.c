/* Tests of gzip reading (train/gzip.c: tfs_gunzip over zlib, tfs_data_file_read).
 *
 * Reference data comes from the system's gzip(1) and from Python's gzip module (/usr/bin/python3),
 * run at test time on files the test writes: text, random bytes (stored blocks), zeros (long runs
 * at distance 1), an empty file and an 8 MB file, at levels 1, 6 and 9, and multi-member files.
 * Damaged inputs -- a flipped CRC, a wrong ISIZE, every truncation of a small file, every single
 * byte flipped in the compressed data, random garbage after a gzip header -- must end in DATA_LOSS
 * naming the file (or, for garbage, at worst RESOURCE_EXHAUSTED at the output limit), never in a
 * crash or a wrong "OK"; a small file that inflates past the output limit is RESOURCE_EXHAUSTED.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_gzip(void);

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
        fprintf(stderr, "SKIP gzip round trip: no gzip command\n");
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

START_TEST(test_gzip_levels)
{
    static const int levels[] = {1, 6, 9};
    for (int kind = 0; kind < 4; kind++)
        for (int l = 0; l < 3; l++)
            round_trip(kind, 300000, levels[l]);
}
END_TEST

START_TEST(test_gzip_small_and_empty)
{
    for (size_t n = 0; n < 40; n += 3)
        round_trip(0, n, 6);
    round_trip(1, 1, 9);
}
END_TEST

START_TEST(test_gzip_large)
{
    round_trip(3, 8u << 20, 6);
}
END_TEST

/* A plain file comes back as it is; a .gz name without gzip data is refused. */
START_TEST(test_gzip_plain_and_fake_gz)
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
    ck_assert_msg(code == TFS_OK || strstr(st->msg, "t.gz") != NULL, "%s", st->msg);
    tfs_free(out);
    return code;
}

START_TEST(test_gzip_corrupt_trailer)
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
    ASSERT_MSG_HAS(st, "incorrect data check");
    ASSERT_MSG_HAS(st, "t.gz");
    b[n - 8] ^= 1;
    b[n - 3] ^= 1;   /* ISIZE */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "incorrect length check");
    b[n - 3] ^= 1;
    b[3] = 0x20;   /* a reserved flag */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "unknown header flags");
    b[3] = 0x08;   /* FNAME, as gzip wrote it */
    b[2] = 7;      /* not deflate */
    ck_assert_int_eq(gunzip(b, n, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "unknown compression method");
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
START_TEST(test_gzip_truncated_and_flipped)
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

START_TEST(test_gzip_multi_member_and_padding)
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

/* Header fields gzip(1) does not write: FEXTRA, FCOMMENT and FHCRC (its CRC checked). The CRCs
 * come from zlib's crc32, checked first against the published check value. */
START_TEST(test_gzip_header_fields)
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
    /* The published check value of CRC-32/ISO-HDLC. */
    ck_assert_uint_eq(crc32(0, (const Bytef *)"123456789", 9), 0xCBF43926u);
    uint32_t hc = (uint32_t)crc32(0, g, (uInt)n);
    size_t   hcrc_at = n;
    g[n++] = (uint8_t)hc;
    g[n++] = (uint8_t)(hc >> 8);
    memcpy(g + n, body, sizeof body);
    n += sizeof body;
    uint32_t crc = (uint32_t)crc32(0, (const Bytef *)"abc", 3);
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
    ASSERT_MSG_HAS(st, "header crc mismatch");
    ck_assert_int_eq(tfs_gunzip("h.gz", g, 0, 100, &out, &len, &st), TFS_DATA_LOSS);
    ck_assert_int_eq(tfs_gunzip("h.gz", g, 15, 100, &out, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "h.gz: truncated");
}
END_TEST

/* A file that inflates far beyond the output limit (a decompression bomb, here 1000:1) is
 * RESOURCE_EXHAUSTED without the whole output ever being held. */
START_TEST(test_gzip_output_limit)
{
    if (!tt_have("gzip"))
        return;
    char    *dir = tfs_test_mkdtemp();
    uint8_t *d = make_data(2, 16u << 20, 0);
    gzip_file(dir, "z", d, 16u << 20, 9);
    size_t     n, len;
    void      *out;
    tfs_status st;
    uint8_t   *b = load_gz(dir, "z", &n);
    ck_assert_uint_lt(n, 100000);
    ck_assert_int_eq(tfs_gunzip("z.gz", b, n, (size_t)1 << 20, &out, &len, &st),
                     TFS_RESOURCE_EXHAUSTED);
    ASSERT_MSG_HAS(st, "z.gz");
    ASSERT_MSG_HAS(st, "output exceeds the limit of 1048576 bytes");
    ck_assert_ptr_null(out);
    /* Exactly at the limit is fine. */
    ck_assert_msg(tfs_gunzip("z.gz", b, n, 16u << 20, &out, &len, &st) == TFS_OK, "%s", st.msg);
    ck_assert_uint_eq(len, 16u << 20);
    ck_assert(memcmp(out, d, len) == 0);
    tfs_free(out);
    free(b);
    free(d);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Python's gzip module writes its own headers and appends one member per open in "ab" mode; the
 * reader must return the members' data concatenated, as gunzip does. */
START_TEST(test_gzip_python_members)
{
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("SKIP python gzip check: /usr/bin/python3 absent\n");
        return;
    }
    char *dir = tfs_test_mkdtemp();
    ck_assert_int_eq(
        tt_sh("cd '%s' && /usr/bin/python3 -c \"import gzip, random\n"
              "r = random.Random(5)\n"
              "parts = [bytes(r.getrandbits(8) for _ in range(3000)), b'', b'tfserve ' * 9000]\n"
              "open('ref', 'wb').write(b''.join(parts))\n"
              "for i, p in enumerate(parts):\n"
              "    with gzip.open('m.gz', 'ab', compresslevel=1 + 4 * i) as f: f.write(p)\n"
              "open('one.gz', 'wb').write(gzip.compress(parts[2], mtime=0))\n\"",
              dir),
        0);
    size_t   nref;
    uint8_t *ref = (uint8_t *)tfs_test_read_file(tt_path(dir, "ref"), &nref);
    ck_assert_ptr_nonnull(ref);
    ck_assert_uint_eq(nref, 3000 + 8 * 9000);
    void      *out;
    size_t     len;
    tfs_status st;
    ck_assert_msg(tfs_data_file_read(tt_path(dir, "m.gz"), &out, &len, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_uint_eq(len, nref);
    ck_assert(memcmp(out, ref, nref) == 0);
    tfs_free(out);
    ck_assert_msg(tfs_data_file_read(tt_path(dir, "one.gz"), &out, &len, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_uint_eq(len, 8 * 9000);
    ck_assert(memcmp(out, ref + 3000, len) == 0);
    tfs_free(out);
    /* The same file cut inside its third member: DATA_LOSS naming the file and the member. */
    ck_assert_int_eq(
        tt_sh("cd '%s' && head -c $(( $(stat -c %%s m.gz) - 50 )) m.gz > cut.gz", dir), 0);
    ck_assert_int_eq(tfs_data_file_read(tt_path(dir, "cut.gz"), &out, &len, &st), TFS_DATA_LOSS);
    ASSERT_MSG_HAS(st, "cut.gz: gzip member 3: truncated");
    ck_assert_ptr_null(out);
    free(ref);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Random bytes after a gzip header (and random bytes alone): any result but a crash or a leak,
 * and every error names the file. */
START_TEST(test_gzip_garbage)
{
    static const uint8_t hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    uint64_t             s = 99;
    uint8_t              buf[600];
    for (int round = 0; round < 3000; round++) {
        size_t n = tt_rand(&s) % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)tt_rand(&s);
        if (round % 2 == 0 && n >= sizeof hdr)
            memcpy(buf, hdr, sizeof hdr);
        void         *out = NULL;
        size_t        len;
        tfs_status    st;
        enum tfs_code c = tfs_gunzip("g.gz", buf, n, 1 << 20, &out, &len, &st);
        ck_assert_msg(c == TFS_OK || c == TFS_DATA_LOSS || c == TFS_RESOURCE_EXHAUSTED, "%s",
                      tfs_code_name(c));
        ck_assert_msg(c == TFS_OK || strstr(st.msg, "g.gz") != NULL, "%s", st.msg);
        tfs_free(out);
    }
}
END_TEST

Suite *suite_train_gzip(void)
{
    Suite *s = suite_create("gzip");
    TCase *tc = tcase_create("gzip");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gzip_levels);
    tcase_add_test(tc, test_gzip_small_and_empty);
    tcase_add_test(tc, test_gzip_large);
    tcase_add_test(tc, test_gzip_plain_and_fake_gz);
    tcase_add_test(tc, test_gzip_corrupt_trailer);
    tcase_add_test(tc, test_gzip_truncated_and_flipped);
    tcase_add_test(tc, test_gzip_multi_member_and_padding);
    tcase_add_test(tc, test_gzip_header_fields);
    tcase_add_test(tc, test_gzip_output_limit);
    tcase_add_test(tc, test_gzip_python_members);
    tcase_add_test(tc, test_gzip_garbage);
    suite_add_tcase(s, tc);
    return s;
}
