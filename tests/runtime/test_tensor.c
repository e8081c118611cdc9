/* Tests of runtime/tensor.c: the dtype table, tensor lifetime (refcounts, deallocators, views),
 * size and shape validation, strings and shape helpers. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_tensor(void);

START_TEST(test_tensor_dtype_table)
{
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_FLOAT), 4);
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_DOUBLE), 8);
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_INT64), 8);
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_BOOL), 1);
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_UINT16), 2);
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_STRING), sizeof(tfs_string));
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_RESOURCE), sizeof(void *));
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_COMPLEX64), 0);
    ck_assert_uint_eq(tfs_dtype_size(TFS_DTYPE_INVALID), 0);
    ck_assert_uint_eq(tfs_dtype_size((enum tfs_dtype)77), 0);
    ck_assert_str_eq(tfs_dtype_name(TFS_DTYPE_FLOAT), "DT_FLOAT");
    ck_assert_str_eq(tfs_dtype_name(TFS_DTYPE_UINT64), "DT_UINT64");
    ck_assert_str_eq(tfs_dtype_name((enum tfs_dtype)77), "DT_INVALID");
    ck_assert_str_eq(tfs_dtype_short_name(TFS_DTYPE_FLOAT), "float");
    ck_assert_str_eq(tfs_dtype_short_name(TFS_DTYPE_INT64), "int64");
    ck_assert_str_eq(tfs_dtype_short_name(TFS_DTYPE_STRING), "string");
    ck_assert_str_eq(tfs_dtype_short_name(TFS_DTYPE_BOOL), "bool");
    /* Reference dtypes are base + 100, pointer-sized, and spelled like TensorFlow's. */
    enum tfs_dtype fref = (enum tfs_dtype)(TFS_DTYPE_FLOAT + TFS_DTYPE_REF_OFFSET);
    ck_assert_str_eq(tfs_dtype_name(fref), "DT_FLOAT_REF");
    ck_assert_str_eq(tfs_dtype_short_name(fref), "float_ref");
    ck_assert_uint_eq(tfs_dtype_size(fref), sizeof(void *));
    ck_assert_int_eq(tfs_dtype_base(fref), TFS_DTYPE_FLOAT);
    ck_assert_int_eq(tfs_dtype_base(TFS_DTYPE_INT32), TFS_DTYPE_INT32);
    ck_assert_int_eq(tfs_dtype_from_name("DT_INT32"), TFS_DTYPE_INT32);
    ck_assert_int_eq(tfs_dtype_from_name("DT_FLOAT_REF"), fref);
    ck_assert_int_eq(tfs_dtype_from_name("DT_NOPE"), TFS_DTYPE_INVALID);
}
END_TEST

START_TEST(test_tensor_new_zeroed)
{
    int64_t base = tfs_alloc_bytes_in_use();
    int64_t dims[] = {3, 1};
    tfs_tensor *t;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, dims, &t, &st), TFS_OK);
    ck_assert_int_eq(st.code, TFS_OK);
    ck_assert_int_eq(t->nelem, 3);
    ck_assert_uint_eq(t->nbytes, 12);
    const float *x = t->data;
    ck_assert(x[0] == 0 && x[1] == 0 && x[2] == 0);
    tfs_tensor_unref(t);

    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT64, &t, &st), TFS_OK);
    ck_assert_int_eq(t->rank, 0);
    ck_assert_int_eq(t->nelem, 1);
    tfs_tensor_unref(t);

    int64_t empty[] = {0, 5};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, empty, &t, &st), TFS_OK);
    ck_assert_int_eq(t->nelem, 0);
    ck_assert_uint_eq(t->nbytes, 0);
    tfs_tensor_unref(t);
    tfs_tensor_unref(NULL);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

/* The unfilled form: writable in place by its one owner, the same limits as tfs_tensor_new, and
 * string elements still start empty (a string tensor's bytes are records, never left undefined). */
START_TEST(test_tensor_new_uninit)
{
    int64_t     base = tfs_alloc_bytes_in_use();
    int64_t     dims[] = {4, 2};
    tfs_tensor *t = NULL;
    tfs_status  st;
    ck_assert_int_eq(tfs_tensor_new_uninit(TFS_DTYPE_FLOAT, 2, dims, &t, &st), TFS_OK);
    ck_assert_int_eq(t->nelem, 8);
    ck_assert_uint_eq(t->nbytes, 32);
    ck_assert(tfs_tensor_exclusive(t));
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_tensor_new_uninit(TFS_DTYPE_STRING, 1, dims, &t, &st), TFS_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(tfs_tensor_strings(t)[i].len, 0);
    tfs_tensor_unref(t);
    int64_t empty[] = {0, 3};
    ck_assert_int_eq(tfs_tensor_new_uninit(TFS_DTYPE_FLOAT, 2, empty, &t, &st), TFS_OK);
    ck_assert_uint_eq(t->nbytes, 0);
    tfs_tensor_unref(t);
    int64_t big[] = {INT64_C(1) << 35}, neg[] = {-1};
    ck_assert_int_eq(tfs_tensor_new_uninit(TFS_DTYPE_FLOAT, 1, big, &t, &st),
                     TFS_RESOURCE_EXHAUSTED);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(tfs_tensor_new_uninit(TFS_DTYPE_FLOAT, 1, neg, &t, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

START_TEST(test_tensor_rejects_bad_shapes)
{
    tfs_tensor *t = (tfs_tensor *)1;
    tfs_status st;
    int64_t neg[] = {2, -1};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, neg, &t, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(t);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 9, nine, &t, &st), TFS_INVALID_ARGUMENT);
    /* The element count overflows int64. */
    int64_t huge[] = {INT64_C(1) << 40, INT64_C(1) << 40};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, huge, &t, &st), TFS_RESOURCE_EXHAUSTED);
    /* The count fits, but count * 8 bytes does not fit in size_t. */
    int64_t wide[] = {INT64_C(1) << 62};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_DOUBLE, 1, wide, &t, &st), TFS_RESOURCE_EXHAUSTED);
    /* Representable, but above the per-tensor limit. */
    int64_t big[] = {INT64_C(1) << 35};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, big, &t, &st), TFS_RESOURCE_EXHAUSTED);
    ck_assert_ptr_nonnull(strstr(st.msg, "[34359738368]"));
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_COMPLEX64, &t, &st), TFS_UNIMPLEMENTED);
}
END_TEST

/* The limit on one tensor's allocation (runtime.h): the default is half the memory, a setting
 * holds to the byte, wrapped memory is not limited, and no setting passes TFS_TENSOR_MAX_BYTES. */
START_TEST(test_tensor_max_bytes_setting)
{
    tfs_runtime_set_max_tensor_bytes(0);
    size_t def = tfs_runtime_max_tensor_bytes();
    uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    ck_assert_msg(def > 0 && def <= TFS_TENSOR_MAX_BYTES && def <= phys / 2,
                  "default %zu, physical memory %llu", def, (unsigned long long)phys);

    tfs_tensor *t = NULL;
    tfs_status st;
    tfs_runtime_set_max_tensor_bytes(1 << 20);
    ck_assert_uint_eq(tfs_runtime_max_tensor_bytes(), 1 << 20);
    int64_t fits[] = {512, 512}, over[] = {512, 513};   /* 1 MiB and 1 MiB + 2 KiB of floats */
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, fits, &t, &st), TFS_OK);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, over, &t, &st), TFS_RESOURCE_EXHAUSTED);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(st.msg, "[512,513]") &&
                  strstr(st.msg, "exceeds the 1048576-byte limit on one tensor"), "%s", st.msg);
    /* memory that exists already is only wrapped, whatever its size */
    float *buf = malloc(512 * 513 * sizeof(float));
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(tfs_tensor_wrap(TFS_DTYPE_FLOAT, 2, over, buf, NULL, NULL, &t, &st), TFS_OK);
    tfs_tensor_unref(t);
    free(buf);

    tfs_runtime_set_max_tensor_bytes(SIZE_MAX);
    ck_assert_uint_eq(tfs_runtime_max_tensor_bytes(), TFS_TENSOR_MAX_BYTES);
    tfs_runtime_set_max_tensor_bytes(0);
    ck_assert_uint_eq(tfs_runtime_max_tensor_bytes(), def);
}
END_TEST

static int dealloc_calls;
static void count_dealloc(void *data, void *arg)
{
    ck_assert_ptr_eq(data, arg);
    dealloc_calls++;
}

START_TEST(test_tensor_wrap_deallocates_on_last_unref)
{
    static float buf[4] = {1, 2, 3, 4};
    int64_t dims[] = {2, 2};
    tfs_tensor *t;
    dealloc_calls = 0;
    ck_assert_int_eq(tfs_tensor_wrap(TFS_DTYPE_FLOAT, 2, dims, buf, count_dealloc, buf, &t, NULL),
                     TFS_OK);
    ck_assert_ptr_eq(t->data, buf);
    tfs_tensor_ref(t);
    tfs_tensor_unref(t);
    ck_assert_int_eq(dealloc_calls, 0);
    tfs_tensor_unref(t);
    ck_assert_int_eq(dealloc_calls, 1);
    /* Strings own their bytes, so they cannot wrap foreign memory. */
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_wrap(TFS_DTYPE_STRING, 1, dims, buf, NULL, NULL, &t, &st),
                     TFS_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_tensor_reshape_is_a_view)
{
    int64_t base = tfs_alloc_bytes_in_use();
    int64_t d23[] = {2, 3}, d6[] = {6}, d4[] = {4};
    const float v[] = {1, 2, 3, 4, 5, 6};
    tfs_tensor *src = tfs_test_tensor_f32(2, d23, v);
    tfs_tensor *view;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_reshape(src, 1, d6, &view, &st), TFS_OK);
    ck_assert_ptr_eq(view->data, src->data);
    ck_assert_int_eq(view->rank, 1);
    ck_assert_int_eq(view->dims[0], 6);
    /* The view keeps the buffer alive after the source's owner lets go. */
    tfs_tensor_unref(src);
    tfs_test_assert_f32(view, 1, d6, v, 0);
    tfs_tensor_unref(view);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);

    src = tfs_test_tensor_f32(2, d23, v);
    ck_assert_int_eq(tfs_tensor_reshape(src, 1, d4, &view, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(view);
    ck_assert_str_eq(st.msg, "cannot reshape a tensor of shape [2,3] into shape [4]");
    tfs_tensor_unref(src);
}
END_TEST

START_TEST(test_tensor_strings_and_copy)
{
    int64_t base = tfs_alloc_bytes_in_use();
    const char *words[] = {"alpha", "", "gamma"};
    tfs_tensor *t = rt_strings(3, words);
    tfs_string *s = tfs_tensor_strings(t);
    ck_assert_uint_eq(s[0].len, 5);
    ck_assert_int_eq(memcmp(s[0].data, "alpha", 5), 0);
    ck_assert_uint_eq(s[1].len, 0);
    /* Bytes may contain NULs; the tensor keeps a copy. */
    char raw[] = {'a', 0, 'b'};
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_set_string(t, 2, raw, 3, &st), TFS_OK);
    raw[0] = 'z';
    ck_assert_int_eq(memcmp(s[2].data, "a\0b", 3), 0);
    ck_assert_int_eq(tfs_tensor_set_string(t, 3, "x", 1, &st), TFS_OUT_OF_RANGE);

    tfs_tensor *c;
    ck_assert_int_eq(tfs_tensor_copy(t, &c, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(t, 0, "changed", 7, &st), TFS_OK);
    tfs_string *cs = tfs_tensor_strings(c);
    ck_assert_uint_eq(cs[0].len, 5);
    ck_assert_int_eq(memcmp(cs[0].data, "alpha", 5), 0);
    ck_assert_ptr_ne(cs[2].data, s[2].data);

    /* Reshaping strings copies (each tensor owns its element bytes). */
    int64_t d13[] = {1, 3};
    tfs_tensor *r;
    ck_assert_int_eq(tfs_tensor_reshape(c, 2, d13, &r, &st), TFS_OK);
    ck_assert_int_eq(r->rank, 2);
    ck_assert_int_eq(memcmp(tfs_tensor_strings(r)[0].data, "alpha", 5), 0);
    tfs_tensor *f = rt_scalar_f32(1);
    ck_assert_ptr_null(tfs_tensor_strings(f));   /* not a string tensor */
    tfs_tensor_unref(f);

    tfs_tensor_unref(r);
    tfs_tensor_unref(c);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
}
END_TEST

START_TEST(test_tensor_copy_numbers)
{
    int64_t d[] = {3};
    const int32_t v[] = {7, -8, 9};
    tfs_tensor *a = rt_tensor(TFS_DTYPE_INT32, 1, d, v);
    tfs_tensor *b;
    ck_assert_int_eq(tfs_tensor_copy(a, &b, NULL), TFS_OK);
    ck_assert_ptr_ne(a->data, b->data);
    ck_assert_int_eq(memcmp(a->data, b->data, 12), 0);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
}
END_TEST

START_TEST(test_tensor_shape_helpers)
{
    char buf[64];
    int64_t d[] = {3, -1, 2};
    ck_assert_str_eq(tfs_shape_str(3, d, buf, sizeof buf), "[3,-1,2]");
    ck_assert_str_eq(tfs_shape_str(0, d, buf, sizeof buf), "[]");
    ck_assert_str_eq(tfs_shape_str(-1, d, buf, sizeof buf), "<unknown>");
    char tiny[4];
    ck_assert_str_eq(tfs_shape_str(3, d, tiny, sizeof tiny), "[3,");
    ck_assert_int_eq(tfs_shape_nelem(3, d), -1);
    int64_t ok[] = {3, 4, 2};
    ck_assert_int_eq(tfs_shape_nelem(3, ok), 24);
    ck_assert_int_eq(tfs_shape_nelem(0, ok), 1);
    int64_t over[] = {INT64_C(1) << 32, INT64_C(1) << 32};
    ck_assert_int_eq(tfs_shape_nelem(2, over), -1);
    ck_assert(tfs_shape_equal(3, ok, 3, ok));
    ck_assert(!tfs_shape_equal(3, ok, 2, ok));
    ck_assert(!tfs_shape_equal(3, ok, 3, d));
}
END_TEST

/* Every allocation inside tfs_tensor_copy may fail; each failure is RESOURCE_EXHAUSTED and leaks
 * nothing, and the loop ends with a success. */
START_TEST(test_tensor_copy_under_allocation_failures)
{
    const char *words[] = {"one", "two", "three"};
    tfs_tensor *t = rt_strings(3, words);
    int64_t base = tfs_alloc_bytes_in_use();
    for (int n = 1;; n++) {
        tfs_tensor *c = NULL;
        tfs_status st;
        tfs_alloc_fail_after(n);
        enum tfs_code rc = tfs_tensor_copy(t, &c, &st);
        tfs_alloc_fail_after(0);
        if (rc == TFS_OK) {
            ck_assert_int_eq(memcmp(tfs_tensor_strings(c)[2].data, "three", 5), 0);
            tfs_tensor_unref(c);
            ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
            ck_assert_int_gt(n, 5);   /* header, buffer and three strings were all tried */
            break;
        }
        ck_assert_int_eq(rc, TFS_RESOURCE_EXHAUSTED);
        ck_assert_ptr_null(c);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    }
    tfs_tensor_unref(t);
}
END_TEST

Suite *suite_runtime_tensor(void)
{
    Suite *s = suite_create("runtime_tensor");
    TCase *tc = tcase_create("dtypes");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_tensor_dtype_table);
    suite_add_tcase(s, tc);
    tc = tcase_create("lifetime");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_tensor_new_zeroed);
    tcase_add_test(tc, test_tensor_new_uninit);
    tcase_add_test(tc, test_tensor_rejects_bad_shapes);
    tcase_add_test(tc, test_tensor_max_bytes_setting);
    tcase_add_test(tc, test_tensor_wrap_deallocates_on_last_unref);
    tcase_add_test(tc, test_tensor_reshape_is_a_view);
    tcase_add_test(tc, test_tensor_copy_numbers);
    tcase_add_test(tc, test_tensor_copy_under_allocation_failures);
    suite_add_tcase(s, tc);
    tc = tcase_create("strings_and_shapes");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_tensor_strings_and_copy);
    tcase_add_test(tc, test_tensor_shape_helpers);
    suite_add_tcase(s, tc);
    return s;
}
