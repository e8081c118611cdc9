/* Tests of the growable byte buffer and the varint reader/writer (runtime/buf.c). Expected bytes
 * are worked out by hand from protobuf's encoding: 7 bits a byte, least significant group first,
 * the high bit set on every byte but the last. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_buf(void);

/* ---- buffer --------------------------------------------------------------------------------- */

START_TEST(test_buf_appends)
{
    tfs__buf b = {0};
    tfs__buf_append(&b, "ab", 2);
    tfs__buf_putc(&b, 'c');
    tfs__buf_puts(&b, "de");
    tfs__buf_printf(&b, "[%d|%s]", 42, "x");
    tfs__buf_append(&b, NULL, 0);   /* nothing to append: allowed with NULL */
    ck_assert(!b.oom);
    ck_assert_uint_eq(b.len, 11);
    ck_assert_str_eq(b.data, "abcde[42|x]");
    /* Binary bytes, NULs included, count in len; the buffer still ends in a NUL of its own. */
    tfs__buf_append(&b, "\0\xff", 2);
    ck_assert_uint_eq(b.len, 13);
    ck_assert_int_eq(b.data[11], 0);
    ck_assert_int_eq((unsigned char)b.data[12], 0xff);
    ck_assert_int_eq(b.data[13], 0);
    tfs__buf_deinit(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    tfs__buf_deinit(NULL);
}
END_TEST

START_TEST(test_buf_long_printf_and_growth)
{
    /* Longer than printf's 256-byte stack buffer, and across many doublings. */
    char want[1001];
    memset(want, 'q', 1000);
    want[1000] = 0;
    tfs__buf b = {0};
    tfs__buf_printf(&b, "%s", want);
    ck_assert_uint_eq(b.len, 1000);
    ck_assert_str_eq(b.data, want);
    for (int i = 0; i < 100000; i++)
        tfs__buf_putc(&b, (char)('0' + i % 10));
    ck_assert(!b.oom);
    ck_assert_uint_eq(b.len, 101000);
    ck_assert_int_eq(b.data[1000], '0');
    ck_assert_int_eq(b.data[100999], '9');
    ck_assert_int_eq(b.data[101000], 0);
    tfs__buf_deinit(&b);
}
END_TEST

START_TEST(test_buf_reserve_then_append_allocates_nothing)
{
    tfs__buf b = {0};
    ck_assert(tfs__buf_reserve(&b, 5000));
    ck_assert_uint_ge(b.cap, 5001);
    char *before = b.data;
    char  block[5000];
    memset(block, 'r', sizeof block);
    tfs_alloc_fail_after(1);   /* any allocation now would fail */
    tfs__buf_append(&b, block, sizeof block);
    tfs_alloc_fail_after(0);
    ck_assert(!b.oom);
    ck_assert_ptr_eq(b.data, before);
    ck_assert_uint_eq(b.len, 5000);
    tfs__buf_deinit(&b);
}
END_TEST

START_TEST(test_buf_oom_is_sticky_and_reported)
{
    int64_t  base = tfs_alloc_bytes_in_use();
    tfs__buf b = {0};
    tfs__buf_puts(&b, "kept");
    tfs_alloc_fail_after(1);
    char big[4096] = {0};
    tfs__buf_append(&b, big, sizeof big);   /* must grow: the allocation fails */
    tfs_alloc_fail_after(0);
    ck_assert(b.oom);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_str_eq(b.data, "kept");   /* what was there stays */
    tfs__buf_puts(&b, "more");   /* memory is back, but the failure is sticky */
    ck_assert(b.oom);
    ck_assert(!tfs__buf_reserve(&b, 1));
    size_t len = 99;
    ck_assert_ptr_null(tfs__buf_take(&b, &len));   /* take reports it, and frees */
    ck_assert_ptr_null(b.data);
    ck_assert(!b.oom);   /* usable again */
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

START_TEST(test_buf_overflow_checked)
{
    int64_t  base = tfs_alloc_bytes_in_use();
    tfs__buf b = {0};
    tfs__buf_puts(&b, "x");
    /* len + extra + 1 would wrap size_t: refused before any allocation is tried. */
    ck_assert(!tfs__buf_reserve(&b, SIZE_MAX));
    ck_assert(b.oom);
    tfs__buf_deinit(&b);
    tfs__buf c = {0};
    ck_assert(!tfs__buf_reserve(&c, SIZE_MAX / 2 + 1));
    ck_assert(c.oom);
    ck_assert_ptr_null(c.data);
    tfs__buf_deinit(&c);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

START_TEST(test_buf_take)
{
    int64_t  base = tfs_alloc_bytes_in_use();
    tfs__buf b = {0};
    tfs__buf_printf(&b, "%s=%d", "n", 7);
    size_t len = 0;
    char  *s = tfs__buf_take(&b, &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(len, 3);
    ck_assert_str_eq(s, "n=7");
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    tfs_free(s);
    /* Nothing appended: still an allocation, an empty string. */
    s = tfs__buf_take(&b, &len);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(s, "");
    tfs_free(s);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

/* ---- varints -------------------------------------------------------------------------------- */

typedef struct varint_case {
    uint64_t      v;
    size_t        n;
    unsigned char bytes[10];
} varint_case;

static const varint_case varint_cases[] = {
    {0, 1, {0x00}},
    {1, 1, {0x01}},
    {127, 1, {0x7f}},
    {128, 2, {0x80, 0x01}},
    {300, 2, {0xac, 0x02}},   /* protobuf's documentation example */
    {16383, 2, {0xff, 0x7f}},
    {16384, 3, {0x80, 0x80, 0x01}},
    {UINT32_MAX, 5, {0xff, 0xff, 0xff, 0xff, 0x0f}},
    {(uint64_t)1 << 32, 5, {0x80, 0x80, 0x80, 0x80, 0x10}},
    {(uint64_t)1 << 63, 10, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
    {UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
};

START_TEST(test_varint_put_and_get_boundaries)
{
    const varint_case *c = &varint_cases[_i];
    uint8_t out[TFS_VARINT_MAX_BYTES + 1];
    memset(out, 0xee, sizeof out);
    ck_assert_uint_eq(tfs_varint_put(out, c->v), c->n);
    ck_assert_mem_eq(out, c->bytes, c->n);
    ck_assert_int_eq(out[c->n], 0xee);   /* nothing written past it */

    /* Read back, followed by a byte that is not part of it. */
    uint8_t in[11];
    memcpy(in, c->bytes, c->n);
    in[c->n] = 0x05;
    const uint8_t *p = in;
    uint64_t       v = 0;
    ck_assert(tfs_varint_get(&p, in + c->n + 1, TFS_VARINT_MAX_BYTES, &v));
    ck_assert_uint_eq(v, c->v);
    ck_assert_ptr_eq(p, in + c->n);

    /* Every truncation fails and moves nothing. */
    for (size_t cut = 0; cut < c->n; cut++) {
        p = in;
        v = 12345;
        ck_assert(!tfs_varint_get(&p, in + cut, TFS_VARINT_MAX_BYTES, &v));
        ck_assert_ptr_eq(p, in);
        ck_assert_uint_eq(v, 12345);
    }

    /* Appended to a buffer, the same bytes. */
    tfs__buf b = {0};
    tfs__buf_putc(&b, 'x');
    tfs__buf_varint(&b, c->v);
    ck_assert_uint_eq(b.len, 1 + c->n);
    ck_assert_mem_eq(b.data + 1, c->bytes, c->n);
    tfs__buf_deinit(&b);
}
END_TEST

START_TEST(test_varint_limits)
{
    const uint8_t *p;
    uint64_t       v = 0;

    /* Eleven bytes: the tenth still says more follow. */
    static const uint8_t too_long[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                         0x80, 0x01};
    p = too_long;
    ck_assert(!tfs_varint_get(&p, too_long + 11, TFS_VARINT_MAX_BYTES, &v));
    ck_assert_ptr_eq(p, too_long);

    /* A tenth byte above 1 carries bits past the 64th: dropped, as protobuf does. */
    static const uint8_t wide[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    p = wide;
    ck_assert(tfs_varint_get(&p, wide + 10, TFS_VARINT_MAX_BYTES, &v));
    ck_assert_uint_eq(v, UINT64_MAX);

    /* 32-bit fields: 5 bytes at most. 2^35 needs 6 and is refused; 2^32 fits in 5 and comes back
     * whole, for the caller to reject if it wants 32 bits. */
    static const uint8_t six[6] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    p = six;
    ck_assert(!tfs_varint_get(&p, six + 6, TFS_VARINT32_MAX_BYTES, &v));
    ck_assert_ptr_eq(p, six);
    static const uint8_t five[5] = {0x80, 0x80, 0x80, 0x80, 0x10};
    p = five;
    ck_assert(tfs_varint_get(&p, five + 5, TFS_VARINT32_MAX_BYTES, &v));
    ck_assert_uint_eq(v, (uint64_t)1 << 32);

    /* Redundant continuation bytes are legal: 0x80 0x00 is 0 in two bytes. */
    static const uint8_t padded[2] = {0x80, 0x00};
    p = padded;
    ck_assert(tfs_varint_get(&p, padded + 2, TFS_VARINT_MAX_BYTES, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_ptr_eq(p, padded + 2);

    /* Empty input. */
    p = padded;
    ck_assert(!tfs_varint_get(&p, padded, TFS_VARINT_MAX_BYTES, &v));
}
END_TEST

Suite *suite_runtime_buf(void)
{
    Suite *s = suite_create("runtime_buf");
    TCase *tc = tcase_create("buf");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_buf_appends);
    tcase_add_test(tc, test_buf_long_printf_and_growth);
    tcase_add_test(tc, test_buf_reserve_then_append_allocates_nothing);
    tcase_add_test(tc, test_buf_oom_is_sticky_and_reported);
    tcase_add_test(tc, test_buf_overflow_checked);
    tcase_add_test(tc, test_buf_take);
    suite_add_tcase(s, tc);
    tc = tcase_create("varint");
    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, test_varint_put_and_get_boundaries, 0,
                        (int)(sizeof varint_cases / sizeof varint_cases[0]));
    tcase_add_test(tc, test_varint_limits);
    suite_add_tcase(s, tc);
    return s;
}
