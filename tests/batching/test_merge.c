/* Row arithmetic of batching/merge.c: concatenation (zero-copy for a lone whole task), padding of
 * non-batch dims with the task's first element, padding rows copied from the last task's first
 * row, slices sharing the batch buffer, and DT_STRING deep copies. */
#include <check.h>
#include <string.h>

#include "batching/batching-impl.h"
#include "tests/batching/helpers.h"

Suite *suite_batching_merge(void);

START_TEST(test_concat_single_whole_task_is_not_copied)
{
    tfs_tensor *x = ramp(3, 2, 0), *y = NULL;
    tfs_status st;
    tfs__rows src = {.t = x, .row0 = 0, .rows = 3};
    ck_assert_int_eq(tfs__rows_concat(&src, 1, 3, false, &y, &st), TFS_OK);
    ck_assert_ptr_eq(y, x);
    tfs_tensor_unref(y);
    /* With padding rows it must copy. */
    ck_assert_int_eq(tfs__rows_concat(&src, 1, 4, false, &y, &st), TFS_OK);
    ck_assert_ptr_ne(y, x);
    ck_assert_int_eq(y->dims[0], 4);
    const float want[] = {0, 1, 2, 3, 4, 5, 0, 1};   /* padding row = first row of the task */
    ck_assert_mem_eq(y->data, want, sizeof want);
    tfs_tensor_unref(y);
    tfs_tensor_unref(x);
}
END_TEST

START_TEST(test_concat_rows_and_padding_rows)
{
    tfs_tensor *a = ramp(2, 2, 10), *b = ramp(3, 2, 20), *y = NULL;
    tfs_status st;
    /* b's rows 1..2 only (a split piece), then padding to 6 rows from b's piece's first row. */
    tfs__rows src[] = {{a, 0, 2}, {b, 1, 2}};
    ck_assert_int_eq(tfs__rows_concat(src, 2, 6, false, &y, &st), TFS_OK);
    const float want[] = {10, 11, 12, 13, 22, 23, 24, 25, 22, 23, 22, 23};
    ck_assert_int_eq(y->dims[0], 6);
    ck_assert_mem_eq(y->data, want, sizeof want);
    tfs_tensor_unref(y);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
}
END_TEST

START_TEST(test_concat_pads_inner_dims_with_first_element)
{
    int64_t d1[] = {1, 2, 2}, d2[] = {2, 1, 3};
    const float v1[] = {7, 8, 9, 10}, v2[] = {1, 2, 3, 4, 5, 6};
    tfs_tensor *a = tfs_test_tensor_f32(3, d1, v1), *b = tfs_test_tensor_f32(3, d2, v2), *y = NULL;
    tfs_status st;
    tfs__rows src[] = {{a, 0, 1}, {b, 0, 2}};
    ck_assert_int_eq(tfs__rows_concat(src, 2, 3, true, &y, &st), TFS_OK);
    int64_t want_dims[] = {3, 2, 3};
    /* a padded with 7 (its first element); b's rows padded with 1 along dim 1. */
    const float want[] = {7, 8, 7, 9, 10, 7, 1, 2, 3, 1, 1, 1, 4, 5, 6, 1, 1, 1};
    tfs_test_assert_f32(y, 3, want_dims, want, 0);
    tfs_tensor_unref(y);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
}
END_TEST

START_TEST(test_slice_shares_the_batch_buffer)
{
    tfs_tensor *x = ramp(4, 3, 0), *s = NULL, *whole = NULL, *empty = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__rows_slice(x, 1, 2, &s, &st), TFS_OK);
    ck_assert_ptr_eq(s->data, (float *)x->data + 3);
    ck_assert_int_eq(s->dims[0], 2);
    ck_assert_int_eq(s->dims[1], 3);
    ck_assert_int_eq(tfs__rows_slice(x, 0, 4, &whole, &st), TFS_OK);
    ck_assert_ptr_eq(whole, x);
    ck_assert_int_eq(tfs__rows_slice(x, 4, 0, &empty, &st), TFS_OK);
    ck_assert_int_eq(empty->dims[0], 0);
    ck_assert_int_eq(empty->dims[1], 3);
    tfs_tensor_unref(whole);
    tfs_tensor_unref(x);   /* the slice keeps the buffer alive */
    ck_assert_float_eq(((float *)s->data)[5], 8.0f);
    tfs_tensor_unref(s);
    tfs_tensor_unref(empty);
}
END_TEST

START_TEST(test_strings_are_deep_copied)
{
    int64_t d1[] = {1}, d2[] = {2};
    tfs_tensor *a = NULL, *b = NULL, *y = NULL, *s = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 1, d1, &a, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 1, d2, &b, &st), TFS_OK);
    tfs_tensor_set_string(a, 0, "alpha", 5, &st);
    tfs_tensor_set_string(b, 0, "be", 2, &st);
    tfs_tensor_set_string(b, 1, "gamma", 5, &st);
    tfs__rows src[] = {{a, 0, 1}, {b, 0, 2}};
    ck_assert_int_eq(tfs__rows_concat(src, 2, 4, false, &y, &st), TFS_OK);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_string *v = tfs_tensor_strings(y);
    ck_assert_int_eq(y->dims[0], 4);
    ck_assert_mem_eq(v[0].data, "alpha", 5);
    ck_assert_mem_eq(v[2].data, "gamma", 5);
    ck_assert_mem_eq(v[3].data, "be", 2);   /* padding: first row of the last source */
    ck_assert_int_eq(tfs__rows_slice(y, 1, 2, &s, &st), TFS_OK);
    tfs_tensor_unref(y);
    v = tfs_tensor_strings(s);
    ck_assert_int_eq((int)v[0].len, 2);
    ck_assert_mem_eq(v[1].data, "gamma", 5);
    tfs_tensor_unref(s);
}
END_TEST

/* The batch tensor is not zero-filled before the rows are written into it (each element is
 * written once), so every element must come from a row, an inner pad or a padding row: with the
 * allocator handing back memory full of NaN bytes, a piece of a split task (rows 1..2), a task
 * padded to the batch's inner dims and padding rows still give the exact batch. */
START_TEST(test_concat_writes_every_element_of_dirty_memory)
{
    int64_t da[] = {2, 1, 2}, db[] = {3, 2, 1};
    const float va[] = {1, 2, 3, 4}, vb[] = {10, 20, 30, 40, 50, 60};
    tfs_tensor *a = tfs_test_tensor_f32(3, da, va), *b = tfs_test_tensor_f32(3, db, vb), *y = NULL;
    tfs_status st;
    const float want[] = {1,  2,  1,  1,  3,  4,  1,  1,  30, 30, 40, 30,
                          50, 30, 60, 30, 30, 30, 40, 30, 30, 30, 40, 30};
    for (int round = 0; round < 3; round++) {
        void *dirty = tfs_malloc(sizeof want);   /* the size the batch will ask for */
        ck_assert_ptr_nonnull(dirty);
        memset(dirty, 0xff, sizeof want);
        tfs_free(dirty);
        tfs__rows src[] = {{a, 0, 2}, {b, 1, 2}};
        ck_assert_int_eq(tfs__rows_concat(src, 2, 6, true, &y, &st), TFS_OK);
        /* a pads with its first element (1), b's piece with its own first element (30); the
         * padding rows repeat the piece's first row. */
        int64_t want_dims[] = {6, 2, 2};
        tfs_test_assert_f32(y, 3, want_dims, want, 0);
        ck_assert_uint_eq(y->nbytes, sizeof want);
        tfs_tensor_unref(y);
    }
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
}
END_TEST

Suite *suite_batching_merge(void)
{
    Suite *s = suite_create("batching-merge");
    TCase *tc = tcase_create("rows");
    tcase_add_test(tc, test_concat_single_whole_task_is_not_copied);
    tcase_add_test(tc, test_concat_rows_and_padding_rows);
    tcase_add_test(tc, test_concat_pads_inner_dims_with_first_element);
    tcase_add_test(tc, test_concat_writes_every_element_of_dirty_memory);
    tcase_add_test(tc, test_slice_shares_the_batch_buffer);
    tcase_add_test(tc, test_strings_are_deep_copied);
    suite_add_tcase(s, tc);
    return s;
}
