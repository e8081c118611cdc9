/* test-runtime: the Check suites for runtime/. TFS_TEST_THREADS=N runs them with an intra-op pool
 * of N threads (default: the CPUs); CMakeLists.txt runs them at 1 and at 2. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime-impl.h"

Suite *suite_runtime_base(void);
Suite *suite_runtime_buf(void);
Suite *suite_runtime_file(void);
Suite *suite_runtime_tensor(void);
Suite *suite_runtime_graph(void);
Suite *suite_runtime_session(void);
Suite *suite_runtime_kernels(void);
Suite *suite_runtime_parsing(void);
Suite *suite_runtime_nn_matmul(void);
Suite *suite_runtime_nn_conv(void);
Suite *suite_runtime_nn_pool_norm(void);
Suite *suite_runtime_control(void);
Suite *suite_runtime_control_list(void);
Suite *suite_runtime_control_case(void);
Suite *suite_runtime_math_binary(void);
Suite *suite_runtime_math_unary(void);
Suite *suite_runtime_math_nn(void);
Suite *suite_runtime_math_reduce(void);
Suite *suite_runtime_array_slice(void);
Suite *suite_runtime_array_shape(void);
Suite *suite_runtime_array_move(void);
Suite *suite_runtime_array_index(void);
Suite *suite_runtime_array_string(void);
Suite *suite_runtime_gemm(void);
Suite *suite_runtime_threadpool(void);
Suite *suite_runtime_parallel(void);
Suite *suite_runtime_plan(void);
Suite *suite_runtime_plan_reuse(void);
Suite *suite_runtime_training(void);
Suite *suite_runtime_random(void);
Suite *suite_runtime_array_grad(void);
Suite *suite_runtime_gradients(void);
Suite *suite_runtime_build(void);
Suite *suite_runtime_nn_grad_act(void);
Suite *suite_runtime_nn_grad_conv(void);
Suite *suite_runtime_nn_grad_pool(void);
Suite *suite_runtime_nn_grad_norm(void);
Suite *suite_runtime_nn_grad_loss(void);
Suite *suite_runtime_rewrite(void);
Suite *suite_runtime_rewrite_fuse(void);
Suite *suite_runtime_nn_fused(void);
Suite *suite_runtime_image_resize(void);
Suite *suite_runtime_lookup(void);
Suite *suite_runtime_search_count(void);
Suite *suite_runtime_sparse(void);
Suite *suite_runtime_text_ragged(void);
Suite *suite_runtime_regex(void);
Suite *suite_runtime_backend(void);
Suite *suite_runtime_array_expand(void);
Suite *suite_runtime_nn_einsum(void);

/* TFS_TEST_BUFFER_REUSE=0 runs every suite with buffer reuse off (ctest's runtime-noreuse);
 * otherwise kernels write into poisoned arena regions wherever a test runs a graph twice
 * (rt_run_twice), and single-op graphs have their fetched output planned too. */
static void set_plan_test_flags(void)
{
    const char *v = getenv("TFS_TEST_BUFFER_REUSE");
    if (v && (!strcmp(v, "0") || !strcmp(v, "off")))
        tfs__plan_set_test_flags(TFS_PLAN_TEST_NO_REUSE);
    else
        tfs__plan_set_test_flags(TFS_PLAN_TEST_POISON | TFS_PLAN_TEST_PLAN_ESCAPED);
}

int main(void)
{
    set_plan_test_flags();
    const char *threads = getenv("TFS_TEST_THREADS");
    if (threads && *threads)
        tfs_runtime_set_num_threads(atoi(threads));
    SRunner *sr = srunner_create(suite_runtime_base());
    srunner_add_suite(sr, suite_runtime_buf());
    srunner_add_suite(sr, suite_runtime_file());
    srunner_add_suite(sr, suite_runtime_tensor());
    srunner_add_suite(sr, suite_runtime_graph());
    srunner_add_suite(sr, suite_runtime_session());
    srunner_add_suite(sr, suite_runtime_kernels());
    srunner_add_suite(sr, suite_runtime_parsing());
    srunner_add_suite(sr, suite_runtime_nn_matmul());
    srunner_add_suite(sr, suite_runtime_nn_conv());
    srunner_add_suite(sr, suite_runtime_nn_pool_norm());
    srunner_add_suite(sr, suite_runtime_control());
    srunner_add_suite(sr, suite_runtime_control_list());
    srunner_add_suite(sr, suite_runtime_control_case());
    srunner_add_suite(sr, suite_runtime_math_binary());
    srunner_add_suite(sr, suite_runtime_math_unary());
    srunner_add_suite(sr, suite_runtime_math_nn());
    srunner_add_suite(sr, suite_runtime_math_reduce());
    srunner_add_suite(sr, suite_runtime_array_slice());
    srunner_add_suite(sr, suite_runtime_array_shape());
    srunner_add_suite(sr, suite_runtime_array_move());
    srunner_add_suite(sr, suite_runtime_array_index());
    srunner_add_suite(sr, suite_runtime_array_string());
    srunner_add_suite(sr, suite_runtime_plan());
    srunner_add_suite(sr, suite_runtime_plan_reuse());
    srunner_add_suite(sr, suite_runtime_training());
    srunner_add_suite(sr, suite_runtime_random());
    srunner_add_suite(sr, suite_runtime_array_grad());
    srunner_add_suite(sr, suite_runtime_build());
    srunner_add_suite(sr, suite_runtime_gradients());
    srunner_add_suite(sr, suite_runtime_nn_grad_act());
    srunner_add_suite(sr, suite_runtime_nn_grad_conv());
    srunner_add_suite(sr, suite_runtime_nn_grad_pool());
    srunner_add_suite(sr, suite_runtime_nn_grad_norm());
    srunner_add_suite(sr, suite_runtime_nn_grad_loss());
    srunner_add_suite(sr, suite_runtime_rewrite());
    srunner_add_suite(sr, suite_runtime_rewrite_fuse());
    srunner_add_suite(sr, suite_runtime_nn_fused());
    srunner_add_suite(sr, suite_runtime_array_expand());
    srunner_add_suite(sr, suite_runtime_nn_einsum());
    srunner_add_suite(sr, suite_runtime_backend());
    srunner_add_suite(sr, suite_runtime_gemm());
    srunner_add_suite(sr, suite_runtime_threadpool());
    srunner_add_suite(sr, suite_runtime_parallel());
    srunner_add_suite(sr, suite_runtime_image_resize());
    srunner_add_suite(sr, suite_runtime_lookup());
    srunner_add_suite(sr, suite_runtime_search_count());
    srunner_add_suite(sr, suite_runtime_sparse());
    srunner_add_suite(sr, suite_runtime_text_ragged());
    srunner_add_suite(sr, suite_runtime_regex());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
