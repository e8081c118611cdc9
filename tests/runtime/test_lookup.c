/* Tests of the lookup-table ops (runtime/kernels/lookup.c, lookup-table.c): HashTable(V2) and
 * MutableHashTable(V2) as session resources (shared_name, container, private tables), their
 * initialization rules, LookupTableFind with any-shaped keys and default values, import, insert,
 * size and export, InitializeTableFromTextFile(V2) over an in-memory file hook (key/value index
 * -2, -1 and columns, delimiter, vocab_size, offset, and TF's errors for bad lines), and the
 * INVALID_ARGUMENT / FAILED_PRECONDITION cases. Every expected value is written out by hand. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_lookup(void);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define STRS(...) ((const char *const[]){__VA_ARGS__})

/* ---- graph building ------------------------------------------------------------------------- */

/* Adds node `name` of type `op` with up to three inputs (NULL: none). */
static int add(tfs_graph *g, const char *name, const char *op, const char *a, const char *b,
               const char *c)
{
    int id = tfs_graph_add_node(g, name, op);
    const char *in[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        if (in[i])
            tfs_graph_add_input(g, id, in[i]);
    return id;
}

/* A table node: HashTableV2 / MutableHashTableV2 / HashTable with the given dtypes. */
static int table(tfs_graph *g, const char *name, const char *op, enum tfs_dtype kd,
                 enum tfs_dtype vd, const char *shared_name)
{
    int id = add(g, name, op, NULL, NULL, NULL);
    tfs_graph_set_attr_type(g, id, "key_dtype", kd);
    tfs_graph_set_attr_type(g, id, "value_dtype", vd);
    if (shared_name)
        tfs_graph_set_attr_string(g, id, "shared_name", shared_name);
    return id;
}

static tfs_graph *new_graph(void)
{
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    return g;
}

/* Runs target `target` (NULL: none) then fetches `fetch` (NULL: none) in one session run. */
static enum tfs_code run(tfs_session *s, const char *target, const char *fetch, tfs_tensor **out,
                         tfs_status *st)
{
    const char *t[1] = {target}, *f[1] = {fetch};
    tfs_tensor *o = NULL;
    enum tfs_code rc = tfs_session_run(s, NULL, 0, f, fetch ? 1 : 0, t, target ? 1 : 0, &o, st);
    if (out)
        *out = o;
    else
        tfs_tensor_unref(o);
    return rc;
}

static void run_ok(tfs_session *s, const char *target, const char *fetch, tfs_tensor **out)
{
    tfs_status st;
    ck_assert_msg(run(s, target, fetch, out, &st) == TFS_OK, "%s/%s: %s", target ? target : "",
                  fetch ? fetch : "", st.msg);
}

static void run_err(tfs_session *s, const char *target, const char *fetch, enum tfs_code code,
                    const char *needle)
{
    tfs_status st;
    tfs_tensor *out = NULL;
    ck_assert_int_eq(run(s, target, fetch, &out, &st), code);
    rt_assert_err(st, code, needle);
    ck_assert(out == NULL);
}

static int64_t fetch_size(tfs_session *s, const char *fetch)
{
    tfs_tensor *t;
    run_ok(s, NULL, fetch, &t);
    ck_assert(t->dtype == TFS_DTYPE_INT64 && t->rank == 0);
    int64_t v = *(int64_t *)t->data;
    tfs_tensor_unref(t);
    return v;
}

/* ---- HashTableV2 ---------------------------------------------------------------------------- */

START_TEST(test_hash_table_string_to_int64)
{
    tfs_graph *g = new_graph();
    table(g, "t", "HashTableV2", TFS_DTYPE_STRING, TFS_DTYPE_INT64, "vocab");
    rt_const(g, "k", at_strs(1, DIMS(3), STRS("a", "b", "c")));
    rt_const(g, "v", at_i64v(3, (const int64_t[]){1, 2, 3}));
    add(g, "init", "InitializeTableV2", "t", "k", "v");
    rt_const(g, "q", at_strs(2, DIMS(2, 2), STRS("a", "x", "c", "b")));
    rt_const(g, "d", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){-1}));
    int f = add(g, "find", "LookupTableFindV2", "t", "q", "d");
    tfs_graph_set_attr_type(g, f, "Tin", TFS_DTYPE_STRING);
    tfs_graph_set_attr_type(g, f, "Tout", TFS_DTYPE_INT64);
    add(g, "size", "LookupTableSizeV2", "t", NULL, NULL);
    rt_const(g, "qs", at_strs(0, NULL, STRS("b")));
    add(g, "find_scalar", "LookupTableFindV2", "t", "qs", "d");
    rt_const(g, "qe", at_strs(2, DIMS(0, 3), NULL));
    add(g, "find_empty", "LookupTableFindV2", "t", "qe", "d");
    tfs_session *s = rt_session(g, NULL);

    /* before initialization: find fails, size is 0 */
    run_err(s, NULL, "find:0", TFS_FAILED_PRECONDITION, "Table not initialized.");
    ck_assert_int_eq(fetch_size(s, "size:0"), 0);
    run_ok(s, "init", NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 2, DIMS(2, 2), ((const int64_t[]){1, -1, 3, 2}));
    ck_assert_int_eq(fetch_size(s, "size:0"), 3);
    run_ok(s, NULL, "find_scalar:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 0, NULL, ((const int64_t[]){2}));
    run_ok(s, NULL, "find_empty:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 2, DIMS(0, 3), NULL);
    /* initializing again with the same data succeeds */
    run_ok(s, "init", NULL, NULL);
    ck_assert_int_eq(fetch_size(s, "size:0"), 3);
    tfs_session_free(s);
}
END_TEST

START_TEST(test_hash_table_value_dtypes)
{
    /* int64 -> string, int32 -> float, int64 -> double, string -> bool, all through one graph */
    tfs_graph *g = new_graph();
    table(g, "ts", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_STRING, NULL);
    rt_const(g, "ks", at_i64v(2, (const int64_t[]){-5, 1LL << 40}));
    rt_const(g, "vs", at_strs(1, DIMS(2), STRS("neg", "big")));
    add(g, "is", "InitializeTableV2", "ts", "ks", "vs");
    rt_const(g, "qs", at_t(TFS_DTYPE_INT64, 2, DIMS(1, 3), (const int64_t[]){1LL << 40, 0, -5}));
    rt_const(g, "ds", at_strs(0, NULL, STRS("UNK")));
    add(g, "fs", "LookupTableFindV2", "ts", "qs", "ds");

    table(g, "tf", "HashTableV2", TFS_DTYPE_INT32, TFS_DTYPE_FLOAT, NULL);
    rt_const(g, "kf", at_i32v(2, (const int32_t[]){7, 9}));
    rt_const(g, "vf", at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), (const float[]){0.5f, -2}));
    add(g, "if", "InitializeTableV2", "tf", "kf", "vf");
    rt_const(g, "qf", at_i32v(3, (const int32_t[]){9, 8, 7}));
    rt_const(g, "df", rt_scalar_f32(3.25f));
    add(g, "ff", "LookupTableFindV2", "tf", "qf", "df");

    table(g, "td", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_DOUBLE, NULL);
    rt_const(g, "kd", at_i64v(1, (const int64_t[]){0}));
    rt_const(g, "vd", at_t(TFS_DTYPE_DOUBLE, 1, DIMS(1), (const double[]){1e300}));
    add(g, "id", "InitializeTableV2", "td", "kd", "vd");
    rt_const(g, "qd", at_i64v(2, (const int64_t[]){1, 0}));
    rt_const(g, "dd", at_t(TFS_DTYPE_DOUBLE, 0, NULL, (const double[]){-0.25}));
    add(g, "fd", "LookupTableFindV2", "td", "qd", "dd");

    table(g, "tb", "HashTableV2", TFS_DTYPE_STRING, TFS_DTYPE_BOOL, NULL);
    rt_const(g, "kb", at_strs(1, DIMS(2), STRS("", "yes")));
    rt_const(g, "vb", at_t(TFS_DTYPE_BOOL, 1, DIMS(2), (const bool[]){true, true}));
    add(g, "ib", "InitializeTableV2", "tb", "kb", "vb");
    rt_const(g, "qb", at_strs(1, DIMS(3), STRS("yes", "no", "")));
    rt_const(g, "db", at_t(TFS_DTYPE_BOOL, 0, NULL, (const bool[]){false}));
    add(g, "fb", "LookupTableFindV2", "tb", "qb", "db");
    tfs_session *s = rt_session(g, NULL);
    const char *inits[] = {"is", "if", "id", "ib"};
    for (int i = 0; i < 4; i++)
        run_ok(s, inits[i], NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "fs:0", &t);
    at_expect_strs(t, 2, DIMS(1, 3), STRS("big", "UNK", "neg"));
    run_ok(s, NULL, "ff:0", &t);
    at_expect(t, TFS_DTYPE_FLOAT, 1, DIMS(3), ((const float[]){-2, 3.25f, 0.5f}));
    run_ok(s, NULL, "fd:0", &t);
    at_expect(t, TFS_DTYPE_DOUBLE, 1, DIMS(2), ((const double[]){-0.25, 1e300}));
    run_ok(s, NULL, "fb:0", &t);
    at_expect(t, TFS_DTYPE_BOOL, 1, DIMS(3), ((const bool[]){true, false, true}));
    tfs_session_free(s);
}
END_TEST

START_TEST(test_hash_table_init_rules_and_errors)
{
    tfs_graph *g = new_graph();
    table(g, "t", "HashTableV2", TFS_DTYPE_STRING, TFS_DTYPE_INT64, "t");
    rt_const(g, "k", at_strs(1, DIMS(3), STRS("a", "b", "a")));
    rt_const(g, "v_same", at_i64v(3, (const int64_t[]){1, 2, 1}));
    rt_const(g, "v_diff", at_i64v(3, (const int64_t[]){1, 2, 5}));
    rt_const(g, "v_other", at_i64v(3, (const int64_t[]){1, 3, 1}));
    rt_const(g, "v_short", at_i64v(2, (const int64_t[]){1, 2}));
    rt_const(g, "k_mat", at_strs(2, DIMS(1, 3), STRS("a", "b", "c")));
    rt_const(g, "v_f", at_t(TFS_DTYPE_FLOAT, 1, DIMS(3), NULL));
    add(g, "init_diff", "InitializeTableV2", "t", "k", "v_diff");
    add(g, "init_same", "InitializeTableV2", "t", "k", "v_same");
    add(g, "init_other", "InitializeTableV2", "t", "k", "v_other");
    add(g, "init_short", "InitializeTableV2", "t", "k", "v_short");
    add(g, "init_mat", "InitializeTableV2", "t", "k_mat", "v_same");
    add(g, "init_f", "InitializeTableV2", "t", "k", "v_f");
    add(g, "size", "LookupTableSizeV2", "t", NULL, NULL);
    rt_const(g, "q64", at_i64v(1, (const int64_t[]){1}));
    rt_const(g, "qs", at_strs(1, DIMS(1), STRS("a")));
    rt_const(g, "d", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){0}));
    rt_const(g, "d_vec", at_i64v(2, (const int64_t[]){0, 0}));
    add(g, "find_badkey", "LookupTableFindV2", "t", "q64", "d");
    add(g, "find_baddef", "LookupTableFindV2", "t", "qs", "d_vec");
    add(g, "find_ok", "LookupTableFindV2", "t", "qs", "d");
    add(g, "insert", "LookupTableInsertV2", "t", "k", "v_same");
    /* a table handle that is not a table: a float tensor, a variable */
    rt_const(g, "notatable", rt_scalar_f32(1));
    add(g, "find_float", "LookupTableFindV2", "notatable", "qs", "d");
    int vh = add(g, "var", "VarHandleOp", NULL, NULL, NULL);
    tfs_graph_set_attr_type(g, vh, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_shape(g, vh, "shape", &(tfs_shape){.rank = 0});
    add(g, "find_var", "LookupTableFindV2", "var", "qs", "d");
    int rv = add(g, "read_table", "ReadVariableOp", "t", NULL, NULL);
    tfs_graph_set_attr_type(g, rv, "dtype", TFS_DTYPE_FLOAT);
    tfs_session *s = rt_session(g, NULL);

    /* one key with two values: refused, and the table stays uninitialized and empty */
    run_err(s, "init_diff", NULL, TFS_FAILED_PRECONDITION,
            "HashTable has different value for same key. Key a has 1 and trying to add value 5");
    ck_assert_int_eq(fetch_size(s, "size:0"), 0);
    run_err(s, "init_short", NULL, TFS_INVALID_ARGUMENT, "Keys and values must have the same size");
    run_err(s, "init_mat", NULL, TFS_INVALID_ARGUMENT, "Keys must be a vector");
    run_err(s, "init_f", NULL, TFS_INVALID_ARGUMENT,
            "Value must be type DT_INT64 but got DT_FLOAT");
    /* a repeated key with the same value is one entry */
    run_ok(s, "init_same", NULL, NULL);
    ck_assert_int_eq(fetch_size(s, "size:0"), 2);
    /* TF compares a re-initialization by entry count first: 3 pairs vs 2 entries differ */
    run_err(s, "init_same", NULL, TFS_FAILED_PRECONDITION,
            "Table was already initialized with different data.");
    run_err(s, "init_other", NULL, TFS_FAILED_PRECONDITION,
            "Table was already initialized with different data.");
    run_err(s, NULL, "find_badkey:0", TFS_INVALID_ARGUMENT,
            "Key must be type DT_STRING but got DT_INT64");
    run_err(s, NULL, "find_baddef:0", TFS_INVALID_ARGUMENT,
            "Expected shape [] for default value, got [2]");
    run_err(s, "insert", NULL, TFS_UNIMPLEMENTED, "Insert not supported");
    run_err(s, NULL, "find_float:0", TFS_INVALID_ARGUMENT, "must be a lookup table handle");
    run_err(s, NULL, "find_var:0", TFS_INVALID_ARGUMENT, "must be a lookup table handle");
    run_err(s, NULL, "read_table:0", TFS_INVALID_ARGUMENT, "wrong dtype");
    tfs_tensor *t;
    run_ok(s, NULL, "find_ok:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(1), ((const int64_t[]){1}));
    tfs_session_free(s);
}
END_TEST

START_TEST(test_table_sharing)
{
    tfs_graph *g = new_graph();
    /* same shared_name: one table; other container: another; no shared_name: private per node */
    table(g, "a", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, "shared");
    table(g, "b", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, "shared");
    int c = table(g, "c", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, "shared");
    tfs_graph_set_attr_string(g, c, "container", "other");
    table(g, "p1", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, NULL);
    table(g, "p2", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, NULL);
    int n1 = table(g, "byname", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, NULL);
    tfs_graph_set_attr_bool(g, n1, "use_node_name_sharing", true);
    table(g, "byname_explicit", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, "byname");
    table(g, "conflict", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_STRING, "shared");
    /* a variable of the same name is a different resource */
    int vh = add(g, "var", "VarHandleOp", NULL, NULL, NULL);
    tfs_graph_set_attr_type(g, vh, "dtype", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_string(g, vh, "shared_name", "shared");
    rt_const(g, "k", at_i64v(1, (const int64_t[]){4}));
    rt_const(g, "v", at_i64v(1, (const int64_t[]){40}));
    const char *tabs[] = {"a", "b", "c", "p1", "p2", "byname", "byname_explicit"};
    char name[32];
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof name, "init_%s", tabs[i]);
        add(g, name, "InitializeTableV2", tabs[i], "k", "v");
        snprintf(name, sizeof name, "size_%s", tabs[i]);
        add(g, name, "LookupTableSizeV2", tabs[i], NULL, NULL);
    }
    add(g, "size_conflict", "LookupTableSizeV2", "conflict", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_ok(s, "init_a", NULL, NULL);
    run_ok(s, "init_p1", NULL, NULL);
    run_ok(s, "init_byname", NULL, NULL);
    run_ok(s, NULL, "var:0", NULL);
    ck_assert_int_eq(fetch_size(s, "size_a:0"), 1);
    ck_assert_int_eq(fetch_size(s, "size_b:0"), 1);
    ck_assert_int_eq(fetch_size(s, "size_c:0"), 0);
    ck_assert_int_eq(fetch_size(s, "size_p1:0"), 1);
    ck_assert_int_eq(fetch_size(s, "size_p2:0"), 0);
    ck_assert_int_eq(fetch_size(s, "size_byname:0"), 1);
    ck_assert_int_eq(fetch_size(s, "size_byname_explicit:0"), 1);
    run_err(s, NULL, "size_conflict:0", TFS_INVALID_ARGUMENT, "Conflicting key/value dtypes");
    tfs_session_free(s);
}
END_TEST

START_TEST(test_table_bad_attrs)
{
    tfs_graph *g = new_graph();
    table(g, "fkeys", "HashTableV2", TFS_DTYPE_FLOAT, TFS_DTYPE_INT64, NULL);
    table(g, "u8vals", "MutableHashTableV2", TFS_DTYPE_STRING, TFS_DTYPE_UINT8, NULL);
    add(g, "nodtype", "HashTableV2", NULL, NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_err(s, NULL, "fkeys:0", TFS_INVALID_ARGUMENT, "tables of float keys and int64 values");
    run_err(s, NULL, "u8vals:0", TFS_INVALID_ARGUMENT, "tables of string keys and uint8 values");
    run_err(s, NULL, "nodtype:0", TFS_INVALID_ARGUMENT, "missing attr 'key_dtype'");
    tfs_session_free(s);
}
END_TEST

/* ---- MutableHashTableV2, import, insert, export --------------------------------------------- */

START_TEST(test_mutable_table_scalars)
{
    tfs_graph *g = new_graph();
    table(g, "t", "MutableHashTableV2", TFS_DTYPE_STRING, TFS_DTYPE_INT64, "m");
    rt_const(g, "k1", at_strs(1, DIMS(2), STRS("a", "b")));
    rt_const(g, "v1", at_i64v(2, (const int64_t[]){1, 2}));
    rt_const(g, "k2", at_strs(2, DIMS(2, 1), STRS("c", "c")));
    rt_const(g, "v2", at_t(TFS_DTYPE_INT64, 2, DIMS(2, 1), (const int64_t[]){3, 30}));
    rt_const(g, "k3", at_strs(0, NULL, STRS("a")));
    rt_const(g, "v3", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){7}));
    add(g, "import1", "LookupTableImportV2", "t", "k1", "v1");
    add(g, "import2", "LookupTableImportV2", "t", "k2", "v2");
    add(g, "insert", "LookupTableInsertV2", "t", "k3", "v3");
    add(g, "import_bad", "LookupTableImportV2", "t", "k1", "v3");
    add(g, "init", "InitializeTableV2", "t", "k1", "v1");
    rt_const(g, "q", at_strs(1, DIMS(3), STRS("a", "b", "c")));
    rt_const(g, "d", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){-1}));
    add(g, "find", "LookupTableFindV2", "t", "q", "d");
    add(g, "size", "LookupTableSizeV2", "t", NULL, NULL);
    add(g, "export", "LookupTableExportV2", "t", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    tfs_tensor *t;
    /* a mutable table is usable at once */
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){-1, -1, -1}));
    run_ok(s, "import1", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){1, 2, -1}));
    /* import replaces everything; the last of repeated keys wins */
    run_ok(s, "import2", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){-1, -1, 30}));
    ck_assert_int_eq(fetch_size(s, "size:0"), 1);
    run_ok(s, "insert", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){7, -1, 30}));
    /* export: insertion order */
    tfs_tensor *ex[2];
    tfs_status st;
    const char *fx[2] = {"export:0", "export:1"};
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, fx, 2, NULL, 0, ex, &st), TFS_OK);
    at_expect_strs(ex[0], 1, DIMS(2), STRS("c", "a"));
    at_expect(ex[1], TFS_DTYPE_INT64, 1, DIMS(2), ((const int64_t[]){30, 7}));
    run_err(s, "import_bad", NULL, TFS_INVALID_ARGUMENT, "Expected shape [2] for value, got []");
    run_err(s, "init", NULL, TFS_INVALID_ARGUMENT, "is not initializable");
    tfs_session_free(s);
}
END_TEST

START_TEST(test_mutable_table_vector_values)
{
    tfs_graph *g = new_graph();
    int id = table(g, "t", "MutableHashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_FLOAT, NULL);
    tfs_graph_set_attr_shape(g, id, "value_shape", &(tfs_shape){.rank = 1, .dims = {2}});
    rt_const(g, "k", at_i64v(2, (const int64_t[]){10, 20}));
    rt_const(g, "v", at_t(TFS_DTYPE_FLOAT, 2, DIMS(2, 2), (const float[]){1, 2, 3, 4}));
    rt_const(g, "v_flat", at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), (const float[]){1, 2}));
    add(g, "import", "LookupTableImportV2", "t", "k", "v");
    add(g, "import_bad", "LookupTableImportV2", "t", "k", "v_flat");
    rt_const(g, "q", at_t(TFS_DTYPE_INT64, 2, DIMS(1, 3), (const int64_t[]){20, 0, 10}));
    rt_const(g, "d", at_t(TFS_DTYPE_FLOAT, 1, DIMS(2), (const float[]){-1, -2}));
    rt_const(g, "d_scalar", rt_scalar_f32(0));
    add(g, "find", "LookupTableFindV2", "t", "q", "d");
    add(g, "find_bad", "LookupTableFindV2", "t", "q", "d_scalar");
    add(g, "export", "LookupTableExportV2", "t", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_ok(s, "import", NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_FLOAT, 3, DIMS(1, 3, 2), ((const float[]){3, 4, -1, -2, 1, 2}));
    run_ok(s, NULL, "export:1", &t);
    at_expect(t, TFS_DTYPE_FLOAT, 2, DIMS(2, 2), ((const float[]){1, 2, 3, 4}));
    run_err(s, "import_bad", NULL, TFS_INVALID_ARGUMENT, "Expected shape [2,2] for value, got [2]");
    run_err(s, NULL, "find_bad:0", TFS_INVALID_ARGUMENT,
            "Expected shape [2] for default value, got []");
    tfs_session_free(s);
}
END_TEST

START_TEST(test_mutable_table_remove)
{
    /* LookupTableRemoveV2 on 3000 int64 keys (value 5 * key): removing every third key (and
     * keys never inserted, and one key twice) leaves the others findable, in insertion order,
     * and the removed ones give the default; a removed key inserted again comes back last. */
    enum { N = 3000, R = N / 3 + 2 };
    static int64_t keys[N], vals[N], rm[R];
    for (int i = 0; i < N; i++) {
        keys[i] = (int64_t)(i * 7919 % N) - 1000;   /* a permutation of -1000..1999 */
        vals[i] = 5 * keys[i];
    }
    int nr = 0;
    for (int i = 0; i < N; i += 3)
        rm[nr++] = keys[i];
    rm[nr++] = 123456;   /* never inserted */
    rm[nr++] = keys[0];  /* twice */
    ck_assert_int_eq(nr, R);
    tfs_graph *g = new_graph();
    table(g, "t", "MutableHashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, NULL);
    table(g, "h", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, NULL);
    rt_const(g, "k", at_i64v(N, keys));
    rt_const(g, "v", at_i64v(N, vals));
    rt_const(g, "rm", at_i64v(R, rm));
    rt_const(g, "k0", at_i64v(1, keys));
    rt_const(g, "v0", at_i64v(1, (const int64_t[]){-7}));
    rt_const(g, "rm_i32", at_i32v(1, (const int32_t[]){1}));
    rt_const(g, "d", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){-1}));
    add(g, "insert", "LookupTableInsertV2", "t", "k", "v");
    add(g, "remove", "LookupTableRemoveV2", "t", "rm", NULL);
    add(g, "reinsert", "LookupTableInsertV2", "t", "k0", "v0");
    add(g, "remove_bad_dtype", "LookupTableRemoveV2", "t", "rm_i32", NULL);
    add(g, "remove_hash", "LookupTableRemoveV2", "h", "rm", NULL);
    add(g, "find", "LookupTableFindV2", "t", "k", "d");
    add(g, "size", "LookupTableSizeV2", "t", NULL, NULL);
    add(g, "export", "LookupTableExportV2", "t", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_ok(s, "insert", NULL, NULL);
    run_ok(s, "remove", NULL, NULL);
    ck_assert_int_eq(fetch_size(s, "size:0"), N - N / 3);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    for (int i = 0; i < N; i++)
        ck_assert_msg(((const int64_t *)t->data)[i] == (i % 3 ? vals[i] : -1), "key %lld: %lld",
                      (long long)keys[i], (long long)((const int64_t *)t->data)[i]);
    tfs_tensor_unref(t);
    run_ok(s, "reinsert", NULL, NULL);
    tfs_tensor *ex[2];
    tfs_status st;
    const char *fx[2] = {"export:0", "export:1"};
    ck_assert_int_eq(tfs_session_run(s, NULL, 0, fx, 2, NULL, 0, ex, &st), TFS_OK);
    ck_assert_int_eq(ex[0]->nelem, N - N / 3 + 1);
    const int64_t *ek = ex[0]->data, *ev = ex[1]->data;
    int64_t e = 0;
    for (int i = 0; i < N; i++)
        if (i % 3) {
            ck_assert_msg(ek[e] == keys[i] && ev[e] == vals[i], "export %lld", (long long)e);
            e++;
        }
    ck_assert(ek[e] == keys[0] && ev[e] == -7);
    tfs_tensor_unref(ex[0]);
    tfs_tensor_unref(ex[1]);
    run_err(s, "remove_bad_dtype", NULL, TFS_INVALID_ARGUMENT, "Key must be type DT_INT64 but got DT_INT32");
    run_err(s, "remove_hash", NULL, TFS_UNIMPLEMENTED,
            "Remove not supported by InitializableLookupTable implementations");
    tfs_session_free(s);
}
END_TEST

START_TEST(test_mutable_table_remove_strings)
{
    /* String keys and string values: what a removal frees and moves (ASan, valgrind). */
    tfs_graph *g = new_graph();
    table(g, "t", "MutableHashTableV2", TFS_DTYPE_STRING, TFS_DTYPE_STRING, NULL);
    rt_const(g, "k", at_strs(1, DIMS(4), STRS("a", "bb", "ccc", "dddd")));
    rt_const(g, "v", at_strs(1, DIMS(4), STRS("A", "BB", "CCC", "DDDD")));
    rt_const(g, "rm", at_strs(1, DIMS(3), STRS("bb", "zz", "a")));
    rt_const(g, "d", at_strs(0, NULL, STRS("-")));
    add(g, "insert", "LookupTableInsertV2", "t", "k", "v");
    add(g, "remove", "LookupTableRemoveV2", "t", "rm", NULL);
    add(g, "find", "LookupTableFindV2", "t", "k", "d");
    add(g, "export", "LookupTableExportV2", "t", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_ok(s, "insert", NULL, NULL);
    run_ok(s, "remove", NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    at_expect_strs(t, 1, DIMS(4), STRS("-", "-", "CCC", "DDDD"));
    run_ok(s, NULL, "export:0", &t);
    at_expect_strs(t, 1, DIMS(2), STRS("ccc", "dddd"));
    run_ok(s, "insert", NULL, NULL);   /* the removed keys come back after the others */
    run_ok(s, NULL, "export:1", &t);
    at_expect_strs(t, 1, DIMS(4), STRS("CCC", "DDDD", "A", "BB"));
    tfs_session_free(s);
}
END_TEST

START_TEST(test_hash_table_import_and_many_keys)
{
    /* LookupTableImportV2 initializes a HashTable; 5000 keys exercise the index growth and the
     * parallel find (expected values: 3 * key + 1, default 0 for odd probes). */
    enum { N = 5000 };
    static int64_t keys[N], vals[N], q[2 * N], want[2 * N];
    for (int i = 0; i < N; i++) {
        keys[i] = (int64_t)i * 2;
        vals[i] = 3 * keys[i] + 1;
    }
    for (int i = 0; i < 2 * N; i++) {
        q[i] = 2 * N - 1 - i;
        want[i] = q[i] % 2 ? 0 : 3 * q[i] + 1;
    }
    tfs_graph *g = new_graph();
    table(g, "t", "HashTableV2", TFS_DTYPE_INT64, TFS_DTYPE_INT64, NULL);
    rt_const(g, "k", at_i64v(N, keys));
    rt_const(g, "v", at_i64v(N, vals));
    add(g, "import", "LookupTableImportV2", "t", "k", "v");
    rt_const(g, "q", at_i64v(2 * N, q));
    rt_const(g, "d", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){0}));
    add(g, "find", "LookupTableFindV2", "t", "q", "d");
    add(g, "size", "LookupTableSizeV2", "t", NULL, NULL);
    add(g, "export", "LookupTableExportV2", "t", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_ok(s, "import", NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(2 * N), want);
    ck_assert_int_eq(fetch_size(s, "size:0"), N);
    run_ok(s, NULL, "export:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(N), keys);
    tfs_session_free(s);
}
END_TEST

/* ---- the legacy Ref(string) handles --------------------------------------------------------- */

START_TEST(test_legacy_hash_table)
{
    tfs_graph *g = new_graph();
    table(g, "t", "HashTable", TFS_DTYPE_STRING, TFS_DTYPE_INT64, NULL);
    rt_const(g, "k", at_strs(1, DIMS(2), STRS("x", "y")));
    rt_const(g, "v", at_i64v(2, (const int64_t[]){5, 6}));
    add(g, "init", "InitializeTable", "t", "k", "v");
    rt_const(g, "q", at_strs(1, DIMS(3), STRS("y", "z", "x")));
    rt_const(g, "d", at_t(TFS_DTYPE_INT64, 0, NULL, (const int64_t[]){-1}));
    add(g, "find", "LookupTableFind", "t", "q", "d");
    add(g, "size", "LookupTableSize", "t", NULL, NULL);
    tfs_session *s = rt_session(g, NULL);
    run_ok(s, "init", NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){6, -1, 5}));
    ck_assert_int_eq(fetch_size(s, "size:0"), 2);
    tfs_session_free(s);
}
END_TEST

/* ---- InitializeTableFromTextFileV2 ---------------------------------------------------------- */

typedef struct fake_files {
    const char *const *paths;
    const char *const *contents;
    int n;
    int reads;
} fake_files;

static enum tfs_code fake_read_file(void *user, const char *path, char **data, size_t *len,
                                    tfs_status *st)
{
    fake_files *f = user;
    f->reads++;
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->paths[i], path) != 0)
            continue;
        *len = strlen(f->contents[i]);
        *data = *len ? tfs_malloc(*len) : NULL;
        if (*len)
            memcpy(*data, f->contents[i], *len);
        return TFS_OK;
    }
    return TFS_ERR(st, TFS_NOT_FOUND, "%s: no such file", path);
}

static const char *const PATHS[] = {"words.txt", "cols.csv", "crlf.txt", "gap.txt", "empty.txt",
                                    "short.csv", "badint.csv", "ints.txt"};
static const char *const CONTENTS[] = {
    "hello world\nfoo\nbar\n",
    "a,10,0.5\nb,-20,1e3\nc,30,-inf\n",
    "x\r\ny\r\n",
    "one\n\nthree\n",
    "",
    "a,1\nb\n",
    "a,12x\n",
    " 7 \n-3\n",
};

typedef struct file_init {
    const char *file;
    enum tfs_dtype kd, vd;
    int64_t key_index, value_index, vocab_size, offset;
    const char *delimiter;
} file_init;

/* Session over: table t (kd -> vd), init from fi's file; find q (keys) default d; size. */
static tfs_session *file_session(const file_init *fi, fake_files *ff, tfs_tensor *q,
                                 tfs_tensor *d)
{
    tfs_graph *g = new_graph();
    table(g, "t", "HashTableV2", fi->kd, fi->vd, NULL);
    rt_const(g, "fname", at_strs(0, NULL, &fi->file));
    int id = add(g, "init", "InitializeTableFromTextFileV2", "t", "fname", NULL);
    tfs_graph_set_attr_int(g, id, "key_index", fi->key_index);
    tfs_graph_set_attr_int(g, id, "value_index", fi->value_index);
    if (fi->vocab_size != -1)
        tfs_graph_set_attr_int(g, id, "vocab_size", fi->vocab_size);
    if (fi->offset)
        tfs_graph_set_attr_int(g, id, "offset", fi->offset);
    if (fi->delimiter)
        tfs_graph_set_attr_string(g, id, "delimiter", fi->delimiter);
    rt_const(g, "q", q);
    rt_const(g, "d", d);
    add(g, "find", "LookupTableFindV2", "t", "q", "d");
    add(g, "size", "LookupTableSizeV2", "t", NULL, NULL);
    tfs_session_opts o = tfs_session_opts_default();
    if (ff) {
        ff->paths = PATHS;
        ff->contents = CONTENTS;
        ff->n = (int)(sizeof PATHS / sizeof PATHS[0]);
        o.checkpoint.read_file = fake_read_file;
        o.checkpoint.user = ff;
    }
    return rt_session(g, &o);
}

static tfs_tensor *i64s(int64_t v)
{
    return at_t(TFS_DTYPE_INT64, 0, NULL, &v);
}

START_TEST(test_text_file_whole_line_and_line_number)
{
    fake_files ff = {0};
    /* key -2 (whole line, string) -> value -1 (line number) */
    file_init fi = {"words.txt", TFS_DTYPE_STRING, TFS_DTYPE_INT64, -2, -1, -1, 0, NULL};
    tfs_session *s = file_session(&fi, &ff,
                                  at_strs(1, DIMS(4), STRS("bar", "hello world", "hello", "foo")),
                                  i64s(-1));
    run_ok(s, "init", NULL, NULL);
    tfs_tensor *t;
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(4), ((const int64_t[]){2, 0, -1, 1}));
    ck_assert_int_eq(fetch_size(s, "size:0"), 3);
    /* a second file initialization of an initialized table succeeds and changes nothing */
    run_ok(s, "init", NULL, NULL);
    ck_assert_int_eq(ff.reads, 2);
    tfs_session_free(s);

    /* key -1 (line number, int64) -> value -2 (string), with offset 10 and vocab_size 2 */
    fi = (file_init){"words.txt", TFS_DTYPE_INT64, TFS_DTYPE_STRING, -1, -2, 2, 10, NULL};
    s = file_session(&fi, &ff, at_i64v(3, (const int64_t[]){10, 11, 12}), at_strs(0, NULL,
                                                                                   STRS("?")));
    run_ok(s, "init", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect_strs(t, 1, DIMS(3), STRS("hello world", "foo", "?"));
    tfs_session_free(s);

    /* CR LF line ends lose the CR */
    fi = (file_init){"crlf.txt", TFS_DTYPE_STRING, TFS_DTYPE_INT64, -2, -1, -1, 0, NULL};
    s = file_session(&fi, &ff, at_strs(1, DIMS(2), STRS("y", "x")), i64s(-1));
    run_ok(s, "init", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(2), ((const int64_t[]){1, 0}));
    tfs_session_free(s);

    /* whole line parsed as int32 keys (whitespace allowed around numbers), offset added */
    fi = (file_init){"ints.txt", TFS_DTYPE_INT32, TFS_DTYPE_INT64, -2, -1, -1, 100, NULL};
    s = file_session(&fi, &ff, at_i32v(3, (const int32_t[]){107, 97, 7}), i64s(-1));
    run_ok(s, "init", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){100, 101, -1}));
    tfs_session_free(s);
}
END_TEST

START_TEST(test_text_file_columns)
{
    fake_files ff = {0};
    tfs_tensor *t;
    /* column 0 -> column 1 (int64), delimiter ',' */
    file_init fi = {"cols.csv", TFS_DTYPE_STRING, TFS_DTYPE_INT64, 0, 1, -1, 0, ","};
    tfs_session *s = file_session(&fi, &ff, at_strs(1, DIMS(3), STRS("c", "a", "b")), i64s(0));
    run_ok(s, "init", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_INT64, 1, DIMS(3), ((const int64_t[]){30, 10, -20}));
    tfs_session_free(s);
    /* column 0 -> column 2 (float, with an exponent and -inf) */
    fi = (file_init){"cols.csv", TFS_DTYPE_STRING, TFS_DTYPE_FLOAT, 0, 2, -1, 0, ","};
    s = file_session(&fi, &ff, at_strs(1, DIMS(3), STRS("b", "a", "c")), rt_scalar_f32(0));
    run_ok(s, "init", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect(t, TFS_DTYPE_FLOAT, 1, DIMS(3), ((const float[]){1000, 0.5f, -INFINITY}));
    tfs_session_free(s);
    /* column 1 (int64) -> whole line (string) */
    fi = (file_init){"cols.csv", TFS_DTYPE_INT64, TFS_DTYPE_STRING, 1, -2, -1, 0, ","};
    s = file_session(&fi, &ff, at_i64v(2, (const int64_t[]){-20, 30}),
                     at_strs(0, NULL, STRS("")));
    run_ok(s, "init", NULL, NULL);
    run_ok(s, NULL, "find:0", &t);
    at_expect_strs(t, 1, DIMS(2), STRS("b,-20,1e3", "c,30,-inf"));
    tfs_session_free(s);
}
END_TEST

static void file_err(const file_init *fi, bool reader, enum tfs_code code, const char *needle)
{
    fake_files ff = {0};
    tfs_session *s = file_session(fi, reader ? &ff : NULL, at_strs(1, DIMS(1), STRS("a")),
                                  i64s(0));
    run_err(s, "init", NULL, code, needle);
    /* the table stays uninitialized */
    run_err(s, NULL, "find:0", TFS_FAILED_PRECONDITION, "Table not initialized.");
    tfs_session_free(s);
}

START_TEST(test_text_file_errors)
{
    const enum tfs_dtype S = TFS_DTYPE_STRING, I = TFS_DTYPE_INT64;
    file_err(&(file_init){"gap.txt", S, I, -2, -1, -1, 0, NULL}, true, TFS_INVALID_ARGUMENT,
             "Invalid content in gap.txt: empty line found at position 5.");
    file_err(&(file_init){"short.csv", S, I, 0, 1, -1, 0, ","}, true, TFS_INVALID_ARGUMENT,
             "Invalid number of columns in short.csv line 1 (b) : expected at least 2 got 1");
    file_err(&(file_init){"badint.csv", S, I, 0, 1, -1, 0, ","}, true, TFS_INVALID_ARGUMENT,
             "Field 12x in line 0 is not a valid int64.");
    file_err(&(file_init){"words.txt", S, I, -2, -1, 5, 0, NULL}, true, TFS_INVALID_ARGUMENT,
             "Invalid vocab_size in words.txt: expected 5 but got 3");
    file_err(&(file_init){"empty.txt", S, I, -2, -1, -1, 0, NULL}, true, TFS_OUT_OF_RANGE,
             "empty.txt: no line to read");
    file_err(&(file_init){"missing.txt", S, I, -2, -1, -1, 0, NULL}, true, TFS_NOT_FOUND,
             "missing.txt: no such file");
    file_err(&(file_init){"words.txt", S, I, -2, -1, -1, 0, NULL}, false, TFS_UNIMPLEMENTED,
             "no file reader was given to the session");
    file_err(&(file_init){"words.txt", S, I, -1, -2, -1, 0, NULL}, true, TFS_INVALID_ARGUMENT,
             "Key index for line number requires table key dtype of int64, got DT_STRING");
    file_err(&(file_init){"words.txt", S, TFS_DTYPE_FLOAT, -2, -2, -1, 0, NULL}, true,
             TFS_INVALID_ARGUMENT, "Value index for whole line requires table value dtype of");
    file_err(&(file_init){"words.txt", S, TFS_DTYPE_BOOL, -2, 0, -1, 0, NULL}, true,
             TFS_INVALID_ARGUMENT, "Data type DT_BOOL not supported.");
    file_err(&(file_init){"words.txt", S, I, -2, -1, -1, 0, "ab"}, true, TFS_INVALID_ARGUMENT,
             "delimiter should be only 1 char");
    file_err(&(file_init){"words.txt", S, I, -3, -1, -1, 0, NULL}, true, TFS_INVALID_ARGUMENT,
             "key_index and value_index must be >= -2");
    file_err(&(file_init){"", S, I, -2, -1, -1, 0, NULL}, true, TFS_INVALID_ARGUMENT,
             "filename cannot be empty.");
}
END_TEST

Suite *suite_runtime_lookup(void)
{
    Suite *s = suite_create("runtime_lookup");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_hash_table_string_to_int64);
    tcase_add_test(tc, test_hash_table_value_dtypes);
    tcase_add_test(tc, test_hash_table_init_rules_and_errors);
    tcase_add_test(tc, test_table_sharing);
    tcase_add_test(tc, test_table_bad_attrs);
    tcase_add_test(tc, test_mutable_table_scalars);
    tcase_add_test(tc, test_mutable_table_vector_values);
    tcase_add_test(tc, test_hash_table_import_and_many_keys);
    tcase_add_test(tc, test_legacy_hash_table);
    tcase_add_test(tc, test_text_file_whole_line_and_line_number);
    tcase_add_test(tc, test_text_file_columns);
    tcase_add_test(tc, test_text_file_errors);
    tcase_add_test(tc, test_mutable_table_remove);
    tcase_add_test(tc, test_mutable_table_remove_strings);
    suite_add_tcase(s, tc);
    return s;
}
