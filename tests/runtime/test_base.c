/* Tests of the base layer: status records (runtime/status.c), the allocator's counters and fault
 * hook (runtime/alloc.c) and the logger (runtime/log.c). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/runtime/helpers.h"

Suite *suite_runtime_base(void);

/* ---- status --------------------------------------------------------------------------------- */

START_TEST(test_status_set_and_clear)
{
    tfs_status st;
    ck_assert_int_eq(TFS_ERR(&st, TFS_NOT_FOUND, "model '%s' not found", "m"), TFS_NOT_FOUND);
    ck_assert_int_eq(st.code, TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "model 'm' not found");
    tfs_status_clear(&st);
    ck_assert_int_eq(st.code, TFS_OK);
    ck_assert_str_eq(st.msg, "");
    /* A NULL status is allowed wherever a caller wants only the code. */
    ck_assert_int_eq(TFS_ERR(NULL, TFS_INTERNAL, "x"), TFS_INTERNAL);
    tfs_status_clear(NULL);
}
END_TEST

START_TEST(test_status_prefix)
{
    tfs_status st;
    TFS_ERR(&st, TFS_DATA_LOSS, "bad crc");
    ck_assert_int_eq(tfs_status_prefix(&st, "loading '%s'", "dir"), TFS_DATA_LOSS);
    ck_assert_str_eq(st.msg, "loading 'dir': bad crc");
    tfs_status_clear(&st);
    ck_assert_int_eq(tfs_status_prefix(&st, "ignored"), TFS_OK);
    ck_assert_str_eq(st.msg, "");
}
END_TEST

START_TEST(test_status_truncates_long_messages)
{
    tfs_status st;
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    TFS_ERR(&st, TFS_INVALID_ARGUMENT, "%s", big);
    ck_assert_uint_eq(strlen(st.msg), TFS_STATUS_MSG_MAX - 1);
    tfs_status_prefix(&st, "%s", big);
    ck_assert_uint_eq(strlen(st.msg), TFS_STATUS_MSG_MAX - 1);
}
END_TEST

START_TEST(test_status_code_names)
{
    ck_assert_str_eq(tfs_code_name(TFS_OK), "OK");
    ck_assert_str_eq(tfs_code_name(TFS_INVALID_ARGUMENT), "INVALID_ARGUMENT");
    ck_assert_str_eq(tfs_code_name(TFS_FAILED_PRECONDITION), "FAILED_PRECONDITION");
    ck_assert_str_eq(tfs_code_name(TFS_UNAUTHENTICATED), "UNAUTHENTICATED");
    ck_assert_str_eq(tfs_code_name((enum tfs_code)99), "UNKNOWN");
}
END_TEST

START_TEST(test_status_assert_aborts)
{
    int zero = 0;
    TFS_ASSERT(zero == 1);
}
END_TEST

/* ---- alloc ---------------------------------------------------------------------------------- */

START_TEST(test_alloc_counts_bytes)
{
    int64_t base = tfs_alloc_bytes_in_use();
    void *p = tfs_malloc(1000);
    ck_assert_int_ge(tfs_alloc_bytes_in_use() - base, 1000);
    p = tfs_realloc(p, 5000);
    ck_assert_int_ge(tfs_alloc_bytes_in_use() - base, 5000);
    tfs_free(p);
    ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    tfs_free(NULL);
}
END_TEST

START_TEST(test_alloc_fail_after)
{
    tfs_alloc_fail_after(2);
    void *a = tfs_malloc(8);
    void *b = tfs_malloc(8);   /* the 2nd allocation from now fails */
    void *c = tfs_malloc(8);   /* and the hook is one-shot */
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(c);
    tfs_free(a);
    tfs_free(c);
    tfs_alloc_fail_after(1);
    ck_assert_ptr_null(tfs_strdup("x"));
    tfs_alloc_fail_after(0);
}
END_TEST

START_TEST(test_alloc_calloc_overflow_and_strings)
{
    ck_assert_ptr_null(tfs_calloc(SIZE_MAX / 2, 4));
    ck_assert_ptr_null(tfs_strdup(NULL));
    char *s = tfs_strndup("abcdef", 3);
    ck_assert_str_eq(s, "abc");
    tfs_free(s);
    s = tfs_strndup("ab", 10);
    ck_assert_str_eq(s, "ab");
    tfs_free(s);
}
END_TEST

/* ---- log ------------------------------------------------------------------------------------ */

typedef struct captured {
    int                count;
    enum tfs_log_level level;
    char               module[32];
    char               line[256];
} captured;

static void capture_sink(enum tfs_log_level level, const char *module, const char *line, void *user)
{
    captured *c = user;
    c->count++;
    c->level = level;
    snprintf(c->module, sizeof c->module, "%s", module);
    snprintf(c->line, sizeof c->line, "%s", line);
}

static int evaluated;
static int side_effect(void)
{
    return ++evaluated;
}

START_TEST(test_log_sink_and_levels)
{
    captured c = {0};
    tfs_log_set_sink(capture_sink, &c);
    tfs_log_set_level(TFS_LOG_LEVEL_INFO);
    ck_assert_int_eq(tfs_log_level(), TFS_LOG_LEVEL_INFO);
    TFS_LOG_WARN("loader", "loaded version %d of model '%s'", 7, "m");
    ck_assert_int_eq(c.count, 1);
    ck_assert_int_eq(c.level, TFS_LOG_LEVEL_WARN);
    ck_assert_str_eq(c.module, "loader");
    ck_assert_str_eq(c.line, "loaded version 7 of model 'm'");
    /* Below the level: dropped, and the arguments are not even evaluated. */
    evaluated = 0;
    TFS_LOG_DEBUG("loader", "%d", side_effect());
    ck_assert_int_eq(c.count, 1);
    ck_assert_int_eq(evaluated, 0);
    tfs_log_set_level(TFS_LOG_LEVEL_OFF);
    TFS_LOG_ERROR("loader", "quiet");
    ck_assert_int_eq(c.count, 1);
    tfs_log_set_level(TFS_LOG_LEVEL_INFO);
    tfs_log_set_sink(NULL, NULL);
}
END_TEST

START_TEST(test_log_stderr_format)
{
    /* The default sink writes "YYYY-MM-DDTHH:MM:SS.mmmZ L module: message" to stderr. */
    char path[] = "/tmp/tfs-log-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    tfs_log_set_sink(NULL, NULL);
    tfs_log_set_level(TFS_LOG_LEVEL_INFO);
    tfs_log_write(TFS_LOG_LEVEL_ERROR, "session", "boom %d", 3);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *text = tfs_test_read_file(path, NULL);
    unlink(path);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(strlen(text), 24 + strlen(" E session: boom 3\n"));
    ck_assert_int_eq(text[4], '-');
    ck_assert_int_eq(text[10], 'T');
    ck_assert_int_eq(text[19], '.');
    ck_assert_int_eq(text[23], 'Z');
    ck_assert_str_eq(text + 24, " E session: boom 3\n");
    free(text);
}
END_TEST

Suite *suite_runtime_base(void)
{
    Suite *s = suite_create("runtime_base");
    TCase *tc = tcase_create("status");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_status_set_and_clear);
    tcase_add_test(tc, test_status_prefix);
    tcase_add_test(tc, test_status_truncates_long_messages);
    tcase_add_test(tc, test_status_code_names);
    tcase_add_test_raise_signal(tc, test_status_assert_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    tc = tcase_create("alloc");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_alloc_counts_bytes);
    tcase_add_test(tc, test_alloc_fail_after);
    tcase_add_test(tc, test_alloc_calloc_overflow_and_strings);
    suite_add_tcase(s, tc);
    tc = tcase_create("log");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_log_sink_and_levels);
    tcase_add_test(tc, test_log_stderr_format);
    suite_add_tcase(s, tc);
    return s;
}
