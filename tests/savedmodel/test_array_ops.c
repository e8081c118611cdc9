/* End-to-end check of array-family kernels on nodes TensorFlow itself wrote: every Pack node of the
 * fixtures' graphs (the saver's checkpoint-prefix list, N string scalars stacked into a vector) is
 * copied with all its attrs (N, T, axis, as the importer restored them) into a graph where
 * Placeholders feed its data inputs (its real producers are save ops, which have no kernel), and
 * run. Skips when the fixtures are absent. */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"
#include "savedmodel/savedmodel-impl.h"
#include "tests/support/tfs-test.h"

Suite *suite_savedmodel_array_ops(void);

static const char *const fixtures[] = {
    "tf_serving/saved_model_half_plus_two_cpu/00000123",
    "tf_serving/saved_model_half_plus_two_tf2_cpu/00000123",
};

START_TEST(test_fixture_pack_nodes_run)
{
    const char *rel = fixtures[_i];
    if (tfs_test_skip_without_fixture(__func__, rel))
        return;
    char dir[4096];
    tfs_test_fixture(rel, dir, sizeof dir);
    Tensorflow__SavedModel *sm = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs__saved_model_read(dir, &sm, &st), TFS_OK);
    const Tensorflow__MetaGraphDef *mg = tfs__saved_model_find_meta_graph(sm, "serve");
    ck_assert_ptr_nonnull(mg);
    tfs_graph *g = NULL;
    ck_assert_msg(tfs__import_graph(mg, &g, &st) == TFS_OK, "%s", st.msg);
    int packs = 0;
    for (int id = 0; id < tfs_graph_node_count(g); id++) {
        if (strcmp(tfs_graph_node_op(g, id), "Pack") != 0)
            continue;
        packs++;
        int n = 0;   /* data inputs: control inputs ("^x") come last */
        while (n < tfs_graph_node_input_count(g, id) && tfs_graph_node_input(g, id, n)[0] != '^')
            n++;
        ck_assert_int_ge(n, 1);
        ck_assert_int_le(n, 4);
        tfs_graph *copy = NULL;
        ck_assert_int_eq(tfs_graph_new(&copy, NULL), TFS_OK);
        int pack = tfs_graph_add_node(copy, "pack", "Pack");
        for (int a = 0; a < tfs_graph_node_attr_count(g, id); a++)
            tfs_graph_set_attr(copy, pack, tfs_graph_node_attr_name(g, id, a),
                               tfs_graph_node_attr_at(g, id, a));
        tfs_feed feeds[4];
        char names[4][32], want[4][32];
        for (int i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "in%d", i);
            int ph = tfs_graph_add_node(copy, names[i], "Placeholder");
            tfs_graph_set_attr_type(copy, ph, "dtype", TFS_DTYPE_STRING);
            tfs_graph_add_input(copy, pack, names[i]);
            snprintf(want[i], sizeof want[i], "prefix-%d", i);
            ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_STRING, &feeds[i].tensor, &st),
                             TFS_OK);
            ck_assert_int_eq(tfs_tensor_set_string(feeds[i].tensor, 0, want[i], strlen(want[i]),
                                                   &st), TFS_OK);
            feeds[i].name = names[i];
            strcat(names[i], ":0");
        }
        ck_assert_msg(tfs_graph_finalize(copy, &st) == TFS_OK, "%s", st.msg);
        tfs_session *s = NULL;
        ck_assert_msg(tfs_session_new(copy, NULL, &s, &st) == TFS_OK, "%s", st.msg);
        const char *f = "pack:0";
        tfs_tensor *out = NULL;
        ck_assert_msg(tfs_session_run(s, feeds, n, &f, 1, NULL, 0, &out, &st) == TFS_OK, "%s: %s",
                      tfs_graph_node_name(g, id), st.msg);
        ck_assert_int_eq(out->dtype, TFS_DTYPE_STRING);
        ck_assert_int_eq(out->rank, 1);
        ck_assert_int_eq(out->dims[0], n);
        const tfs_string *got = tfs_tensor_strings(out);
        for (int i = 0; i < n; i++) {
            ck_assert_uint_eq(got[i].len, strlen(want[i]));
            ck_assert(memcmp(got[i].data, want[i], got[i].len) == 0);
            tfs_tensor_unref(feeds[i].tensor);
        }
        tfs_tensor_unref(out);
        tfs_session_free(s);
        tfs_graph_unref(copy);
    }
    ck_assert_int_ge(packs, 1);
    tfs_graph_unref(g);
    tensorflow__saved_model__free_unpacked(sm, NULL);
}
END_TEST

Suite *suite_savedmodel_array_ops(void)
{
    Suite *s = suite_create("array_ops");
    TCase *tc = tfs_test_fixture_case("array_ops_fixtures", NULL);
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_fixture_pack_nodes_run, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
