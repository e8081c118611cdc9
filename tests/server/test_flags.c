/* tensorflow_model_server's flag syntax (server/flags.c): defaults, `--name=value`, bare and
 * explicit bools, values that do not parse, unknown arguments (reported, not fatal), --help. */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server.h"

static tfs_server_flags parse_ok(int argc, char **argv)
{
    tfs_server_flags f;
    tfs_status       st;
    ck_assert_msg(tfs_server_flags_parse(argc, argv, &f, &st) == TFS_OK, "%s", st.msg);
    return f;
}

START_TEST(test_flags_defaults)
{
    char            *argv[] = {"tfserve"};
    tfs_server_flags f = parse_ok(1, argv);
    ck_assert_int_eq(f.port, 8500);
    ck_assert_int_eq(f.rest_api_port, 0);
    cpu_set_t mask; /* "the CPUs": those the process may run on */
    ck_assert_int_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
    ck_assert_int_eq(f.rest_api_num_threads, 4 * CPU_COUNT(&mask));
    ck_assert_int_eq(f.rest_api_timeout_in_ms, 30000);
    ck_assert_int_eq(f.rest_connection_timeout_seconds, 60);
    ck_assert_int_eq(f.rest_max_connections, 4096);
    ck_assert_int_eq(f.grpc_num_threads, 2);
    ck_assert_int_eq(f.grpc_max_threads, 4 * CPU_COUNT(&mask));
    ck_assert_int_eq(f.tensorflow_intra_op_parallelism, 0);
    ck_assert_str_eq(f.grpc_channel_arguments, "");
    ck_assert_str_eq(f.model_name, "default");
    ck_assert_str_eq(f.model_base_path, "");
    ck_assert_str_eq(f.saved_model_tags, "serve");
    ck_assert(f.graph_rewrites);
    ck_assert_int_eq(f.verbosity, TFS_LOG_LEVEL_INFO);
    ck_assert(!f.version && !f.help);
    ck_assert_int_eq(f.n_unknown, 0);
    tfs_server_flags_deinit(&f);
}
END_TEST

START_TEST(test_flags_values)
{
    char *argv[] = {"tfserve", "--port=9000", "--rest_api_port=8501", "--model_name=half",
                    "--model_base_path=/models/half", "--rest_api_num_threads=3",
                    "--rest_api_timeout_in_ms=250", "--saved_model_tags=serve,gpu",
                    "--verbosity=debug", "--model_name=last_wins", "--grpc_num_threads=5",
                    "--grpc_max_threads=12",
                    "--grpc_channel_arguments=grpc.max_receive_message_length=1000,a=b",
                    "--graph_rewrites=false", "--tensorflow_intra_op_parallelism=3",
                    "--rest_connection_timeout_seconds=0", "--rest_max_connections=100"};
    tfs_server_flags f = parse_ok(17, argv);
    ck_assert_int_eq(f.rest_connection_timeout_seconds, 0);
    ck_assert_int_eq(f.rest_max_connections, 100);
    ck_assert(!f.graph_rewrites);
    ck_assert_int_eq(f.tensorflow_intra_op_parallelism, 3);
    ck_assert_int_eq(f.grpc_num_threads, 5);
    ck_assert_int_eq(f.grpc_max_threads, 12);
    /* the first '=' ends the flag name; the rest is the value, '=' and ',' included */
    ck_assert_str_eq(f.grpc_channel_arguments, "grpc.max_receive_message_length=1000,a=b");
    ck_assert_int_eq(f.port, 9000);
    ck_assert_int_eq(f.rest_api_port, 8501);
    ck_assert_int_eq(f.rest_api_num_threads, 3);
    ck_assert_int_eq(f.rest_api_timeout_in_ms, 250);
    ck_assert_str_eq(f.model_name, "last_wins");
    ck_assert_str_eq(f.model_base_path, "/models/half");
    ck_assert_str_eq(f.saved_model_tags, "serve,gpu");
    ck_assert_int_eq(f.verbosity, TFS_LOG_LEVEL_DEBUG);
    tfs_server_flags_deinit(&f);

    char *argv2[] = {"tfserve", "--model_name=", "--verbosity=WARN"};
    f = parse_ok(3, argv2);
    ck_assert_str_eq(f.model_name, "");   /* an empty string is a value */
    ck_assert_int_eq(f.verbosity, TFS_LOG_LEVEL_WARN);
    tfs_server_flags_deinit(&f);
}
END_TEST

START_TEST(test_flags_bools)
{
    char            *a1[] = {"tfserve", "--version"};
    tfs_server_flags f = parse_ok(2, a1);
    ck_assert(f.version);
    tfs_server_flags_deinit(&f);
    char *a2[] = {"tfserve", "--version=true", "--version=false"};
    f = parse_ok(3, a2);
    ck_assert(!f.version);
    tfs_server_flags_deinit(&f);
    char *a3[] = {"tfserve", "--help=1"};
    f = parse_ok(2, a3);
    ck_assert(f.help);
    tfs_server_flags_deinit(&f);
}
END_TEST

START_TEST(test_flags_bad_values)
{
    struct {
        const char *arg, *msg;
    } cases[] = {
        {"--port=abc", "Couldn't interpret value abc for flag port."},
        {"--port=", "Couldn't interpret value  for flag port."},
        {"--rest_api_port=12x", "Couldn't interpret value 12x for flag rest_api_port."},
        {"--port=99999999999999999999",
         "Couldn't interpret value 99999999999999999999 for flag port."},
        {"--version=yes", "Couldn't interpret value yes for flag version."},
        {"--verbosity=loud", "Couldn't interpret value loud for flag verbosity."},
        {"--grpc_num_threads=two", "Couldn't interpret value two for flag grpc_num_threads."},
        {"--grpc_max_threads=", "Couldn't interpret value  for flag grpc_max_threads."},
        {"--tensorflow_intra_op_parallelism=all",
         "Couldn't interpret value all for flag tensorflow_intra_op_parallelism."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char            *argv[] = {"tfserve", (char *)cases[i].arg};
        tfs_server_flags f;
        tfs_status       st;
        ck_assert_int_eq(tfs_server_flags_parse(2, argv, &f, &st), TFS_INVALID_ARGUMENT);
        ck_assert_str_eq(st.msg, cases[i].msg);
        tfs_server_flags_deinit(&f);
    }
}
END_TEST

/* tfs_server_flags_check's rules between flags (the ranges are tested on the binary by
 * flags_bounds_test.py): the message, and whether it is a usage error. */
START_TEST(test_flags_check_rules)
{
#define M "--model_base_path=/m"
    struct {
        const char *args[5];
        const char *msg;   /* NULL: accepted */
        bool        usage;
    } cases[] = {
        {{"--model_name=m"}, "Both --model_base_path and --model_config_file are empty", true},
        {{"--model_config_file=/c"}, NULL, false},
        {{M, "--rest_api_port=8501", "--rest_max_connections=3", "--rest_api_num_threads=4"},
         "--rest_max_connections=3 is not in [--rest_api_num_threads (4), 1000000]", false},
        /* REST off: its connection limit and certificate do not matter */
        {{M, "--rest_max_connections=3", "--rest_api_num_threads=4", "--rest_api_ssl_cert_file=c"},
         NULL, false},
        {{M, "--rest_api_port=8501", "--rest_api_ssl_cert_file=c"},
         "--rest_api_ssl_key_file is missing", false},
        {{M, "--rest_api_port=8501", "--rest_api_ssl_key_file=k"},
         "--rest_api_ssl_cert_file is missing", false},
        {{M, "--rest_api_port=8501", "--rest_api_ssl_cert_file=c", "--rest_api_ssl_key_file=k"},
         NULL, false},
        {{M, "--batching_parameters_file=/b"}, "--batching_parameters_file is set without "
         "setting --enable_batching to true.", false},
        {{M, "--batching_parameters_file=/b", "--enable_batching"}, NULL, false},
        {{M, "--enable_batching", "--batching_scheduler=fixed"}, NULL, false},
        {{M, "--enable_batching", "--batching_scheduler=sometimes"},
         "--batching_scheduler=sometimes: expected adaptive or fixed", false},
        {{M, "--grpc_num_threads=65"}, "--grpc_num_threads=65 is not in [1, 64]", false},
    };
#undef M
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[6] = {"tfserve"};
        int   argc = 1;
        for (int j = 0; j < 5 && cases[i].args[j]; j++)
            argv[argc++] = (char *)cases[i].args[j];
        tfs_server_flags f = parse_ok(argc, argv);
        tfs_status       st;
        bool             usage = !cases[i].usage;
        enum tfs_code    code = tfs_server_flags_check(&f, &usage, &st);
        if (cases[i].msg) {
            ck_assert_msg(code == TFS_INVALID_ARGUMENT && strstr(st.msg, cases[i].msg),
                          "case %zu: %s", i, st.msg);
            ck_assert_msg(usage == cases[i].usage, "case %zu: usage %d", i, usage);
        } else {
            ck_assert_msg(code == TFS_OK, "case %zu: %s", i, st.msg);
        }
        tfs_server_flags_deinit(&f);
    }

    /* --rest_api_port equal to --port: REST is skipped (logged), not an error */
    char            *argv[] = {"tfserve", "--model_base_path=/m", "--port=9000",
                               "--rest_api_port=9000"};
    tfs_server_flags f = parse_ok(4, argv);
    tfs_status       st;
    bool             usage;
    ck_assert_int_eq(tfs_server_flags_check(&f, &usage, &st), TFS_OK);
    ck_assert_int_eq(f.rest_api_port, 0);
    ck_assert_int_eq(f.port, 9000);
    tfs_server_flags_deinit(&f);
}
END_TEST

START_TEST(test_flags_unknown_arguments)
{
    /* reported and ignored: a non-bool flag without "=", a flag we lack, a single dash, a word */
    char *argv[] = {"tfserve", "--model_name", "--enable_profiler", "-port=1", "extra",
                    "--rest_api_port=8501"};
    tfs_server_flags f = parse_ok(6, argv);
    ck_assert_int_eq(f.n_unknown, 4);
    ck_assert_str_eq(f.unknown[0], "--model_name");
    ck_assert_str_eq(f.unknown[1], "--enable_profiler");
    ck_assert_str_eq(f.unknown[2], "-port=1");
    ck_assert_str_eq(f.unknown[3], "extra");
    ck_assert_int_eq(f.rest_api_port, 8501);
    ck_assert_str_eq(f.model_name, "default");
    tfs_server_flags_deinit(&f);
}
END_TEST

START_TEST(test_flags_usage_and_version)
{
    char  *text = NULL;
    size_t len = 0;
    FILE  *out = open_memstream(&text, &len);
    tfs_server_flags_usage(out, "tfserve");
    fclose(out);
    const char *names[] = {"--port=8500", "--rest_api_port=0", "--rest_api_num_threads=",
                           "--rest_api_timeout_in_ms=30000", "--model_name=default",
                           "--model_base_path=", "--saved_model_tags=serve", "--verbosity=info",
                           "--version=false", "--help=false", "--grpc_num_threads=2",
                           "--grpc_max_threads=", "--grpc_channel_arguments=",
                           "--graph_rewrites=true", "--tensorflow_intra_op_parallelism=0"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(strstr(text, names[i]), "usage lacks %s:\n%s", names[i], text);
    free(text);

    out = open_memstream(&text, &len);
    tfs_server_version(out);
    fclose(out);
    ck_assert_msg(strncmp(text, "TensorFlow ModelServer: ", 24) == 0, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\nTensorFlow Library: tfserve\n"));
    free(text);
}
END_TEST

Suite *suite_server_flags(void);
Suite *suite_server_flags(void)
{
    Suite *s = suite_create("flags");
    TCase *tc = tcase_create("parse");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_flags_defaults);
    tcase_add_test(tc, test_flags_values);
    tcase_add_test(tc, test_flags_bools);
    tcase_add_test(tc, test_flags_bad_values);
    tcase_add_test(tc, test_flags_check_rules);
    tcase_add_test(tc, test_flags_unknown_arguments);
    tcase_add_test(tc, test_flags_usage_and_version);
    suite_add_tcase(s, tc);
    return s;
}
