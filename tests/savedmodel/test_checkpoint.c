/* Tests for checkpoints (savedmodel/checkpoint.c, checkpoint-state.c): round trips of every dtype
 * kind, the `checkpoint` state file byte for byte as TensorFlow's Python writes it,
 * keep_checkpoint_max, continuing a state TensorFlow wrote, the read-side errors (missing,
 * corrupt, dangling), and failed saves (a full disk through RLIMIT_FSIZE, a state file that
 * cannot be replaced, every allocation failing in turn), after which the directory must hold
 * exactly what it held before.
 *
 * The double formatting is checked against values printed by CPython 3's repr(), which is what
 * protobuf's Python text_format uses for doubles (text_format.py: out.write(str(value))).
 */
#include <check.h>
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "savedmodel/checkpoint-impl.h"
#include "savedmodel/savedmodel.h"
#include "tests/support/tfs-test.h"

Suite *suite_savedmodel_checkpoint(void);

#define HP2V "tf_serving/saved_model_half_plus_two_2_versions/00000123/variables"

/* ---- helpers -------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in dir, joined by '\n' (malloc'ed). */
static char *listing(const char *dir)
{
    char          *names[256];
    int            n = 0;
    DIR           *d = opendir(dir);
    struct dirent *e;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) && n < 256)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *out = calloc(1, len);
    for (int i = 0; i < n; i++) {
        strcat(out, names[i]);
        strcat(out, "\n");
        free(names[i]);
    }
    return out;
}

static bool exists(const char *dir, const char *name)
{
    char        p[8192];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

static char *read_text(const char *dir, const char *name)
{
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return tfs_test_read_file(p, NULL);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_int_eq(tfs_test_write_file(p, text, strlen(text)), 0);
}

/* A [2,3] float tensor whose values are base + i. */
static tfs_tensor *weights(float base)
{
    float v[6];
    for (int i = 0; i < 6; i++)
        v[i] = base + (float)i;
    return tfs_test_tensor_f32(2, (int64_t[]){2, 3}, v);
}

/* Saves {"w": weights(step), "global_step": step} as <dir>/model.ckpt-<step>. */
static enum tfs_code save_step(const char *dir, int64_t step, int keep, tfs_status *st)
{
    tfs_tensor *w = weights((float)step), *gs = NULL;
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT64, &gs, st), TFS_OK);
    *(int64_t *)gs->data = step;
    tfs_named_tensor    t[] = {{"w", w}, {"global_step", gs}};
    tfs_checkpoint_opts o   = tfs_checkpoint_opts_default();
    o.keep_checkpoint_max   = keep;
    enum tfs_code rc = tfs_checkpoint_save(dir, "model.ckpt", step, t, 2, &o, NULL, st);
    tfs_tensor_unref(w);
    tfs_tensor_unref(gs);
    return rc;
}

/* Asserts that latest_checkpoint(dir) is model.ckpt-<step> and holds that step's values. */
static void expect_latest(const char *dir, int64_t step)
{
    tfs_status      st;
    char           *prefix = NULL, want[4096];
    tfs_checkpoint *c      = NULL;
    tfs_tensor     *t      = NULL;
    ck_assert_msg(tfs_checkpoint_latest(dir, &prefix, &st) == TFS_OK, "%s", st.msg);
    snprintf(want, sizeof want, "%s/model.ckpt-%lld", dir, (long long)step);
    ck_assert_str_eq(prefix, want);
    ck_assert_msg(tfs_checkpoint_open(prefix, &c, &st) == TFS_OK, "%s", st.msg);
    ck_assert_int_eq(tfs_checkpoint_read(c, "global_step", TFS_DTYPE_INT64, &t, &st), TFS_OK);
    ck_assert_int_eq(*(int64_t *)t->data, step);
    tfs_tensor_unref(t);
    ck_assert_int_eq(tfs_checkpoint_read(c, "w", TFS_DTYPE_FLOAT, &t, &st), TFS_OK);
    float v[6];
    for (int i = 0; i < 6; i++)
        v[i] = (float)step + (float)i;
    tfs_test_assert_f32(t, 2, (int64_t[]){2, 3}, v, 0);
    tfs_tensor_unref(t);
    tfs_checkpoint_close(c);
    tfs_free(prefix);
}

/* The paths the state file lists, joined by ' '. */
static void expect_state_paths(const char *dir, const char *want_model, const char *want_all)
{
    tfs_status            st;
    tfs_checkpoint_state *s = NULL;
    char                  all[1024] = "";
    ck_assert_msg(tfs_checkpoint_state_read(dir, &s, &st) == TFS_OK, "%s", st.msg);
    ck_assert_str_eq(s->model_checkpoint_path, want_model);
    for (int i = 0; i < s->n_paths; i++) {
        if (i)
            strcat(all, " ");
        strcat(all, s->all_model_checkpoint_paths[i]);
    }
    ck_assert_str_eq(all, want_all);
    ck_assert_int_eq(s->n_timestamps, s->n_paths);
    for (int i = 1; i < s->n_timestamps; i++)
        ck_assert(s->all_model_checkpoint_timestamps[i] >=
                  s->all_model_checkpoint_timestamps[i - 1]);
    tfs_checkpoint_state_free(s);
}

/* ---- tests ---------------------------------------------------------------------------------- */

START_TEST(double_repr_matches_python)
{
    static const struct {
        double      v;
        const char *want;
    } cases[] = {
        {1700000000.123456, "1700000000.123456"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {1e-5, "1e-05"},
        {1e-4, "0.0001"},
        {0.1, "0.1"},
        {1.0 / 3.0, "0.3333333333333333"},
        {123.0, "123.0"},
        {-2.5, "-2.5"},
        {5e-324, "5e-324"},
        {DBL_MAX, "1.7976931348623157e+308"},
        {1699999999.0, "1699999999.0"},
        {1234567890123456.7, "1234567890123456.8"},
        {12345678901234567.0, "1.2345678901234568e+16"},
        {0.00012345, "0.00012345"},
        {9.313225746154785e-10, "9.313225746154785e-10"},
        {1.5e300, "1.5e+300"},
        {-0.0, "-0.0"},
        {0.0, "0.0"},
        {100.0, "100.0"},
        {1e22, "1e+22"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_str_eq(tfs__format_double_repr(cases[i].v, buf), cases[i].want);
    ck_assert_str_eq(tfs__format_double_repr(NAN, buf), "nan");
    ck_assert_str_eq(tfs__format_double_repr(-INFINITY, buf), "-inf");
    /* Round trip of many values, and never more than 17 significant digits. */
    double x = 1.0;
    for (int i = 0; i < 2000; i++) {
        x = x * 1.37 + 0.001 * i;
        if (x > 1e300)
            x = 1e-300 * (i + 1);
        tfs__format_double_repr(x, buf);
        ck_assert_msg(strtod(buf, NULL) == x, "%s does not read back as %.17g", buf, x);
    }
}
END_TEST

START_TEST(state_render_escapes_like_text_format)
{
    char                *paths[] = {"a\"b\\c", "tab\there", "caf\xc3\xa9\x01"};
    double               ts[]    = {1.5, 2.25, 3.0};
    tfs_checkpoint_state s = {paths[2], 3, paths, 3, ts, 0.5};
    char                *text = NULL;
    tfs_status           st;
    ck_assert_int_eq(tfs__checkpoint_state_render(&s, &text, &st), TFS_OK);
    ck_assert_str_eq(text, "model_checkpoint_path: \"caf\\303\\251\\001\"\n"
                           "all_model_checkpoint_paths: \"a\\\"b\\\\c\"\n"
                           "all_model_checkpoint_paths: \"tab\\there\"\n"
                           "all_model_checkpoint_paths: \"caf\\303\\251\\001\"\n"
                           "all_model_checkpoint_timestamps: 1.5\n"
                           "all_model_checkpoint_timestamps: 2.25\n"
                           "all_model_checkpoint_timestamps: 3.0\n"
                           "last_preserved_timestamp: 0.5\n");
    tfs_free(text);
}
END_TEST

/* Every dtype kind a trainer saves, read back by name with dtype and shape. */
START_TEST(save_and_read_back)
{
    char       *dir = tfs_test_mkdtemp(), sub[4096];
    tfs_status  st;
    tfs_tensor *f = weights(0.25f), *d = NULL, *s = NULL, *i8 = NULL, *e = NULL, *b = NULL;
    snprintf(sub, sizeof sub, "%s/run/ckpt/", dir);   /* created, trailing slash tolerated */
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_DOUBLE, 1, (int64_t[]){2}, &d, &st), TFS_OK);
    ((double *)d->data)[0] = M_PI;
    ((double *)d->data)[1] = -1e-300;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_STRING, 1, (int64_t[]){2}, &s, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(s, 0, "hello", 5, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_set_string(s, 1, "", 0, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT8, 0, NULL, &i8, &st), TFS_OK);
    *(int8_t *)i8->data = -7;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 2, (int64_t[]){0, 4}, &e, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_BOOL, 1, (int64_t[]){3}, &b, &st), TFS_OK);
    ((bool *)b->data)[1] = true;
    tfs_named_tensor t[] = {{"dense/kernel", f}, {"dense/bias_double", d}, {"vocab", s},
                            {"a_scalar", i8}, {"empty", e}, {"mask", b}};
    char *prefix = NULL;
    ck_assert_msg(tfs_checkpoint_save(sub, "model.ckpt", 42, t, 6, NULL, &prefix, &st) == TFS_OK,
                  "%s", st.msg);
    char want[4096];
    snprintf(want, sizeof want, "%s/run/ckpt/model.ckpt-42", dir);
    ck_assert_str_eq(prefix, want);
    tfs_free(prefix);

    /* The state file, exactly as text_format.MessageToString prints it. */
    snprintf(sub, sizeof sub, "%s/run/ckpt", dir);
    char *text = read_text(sub, "checkpoint");
    double t0, t1;
    int    used = 0;
    ck_assert_msg(sscanf(text, "model_checkpoint_path: \"model.ckpt-42\"\n"
                               "all_model_checkpoint_paths: \"model.ckpt-42\"\n"
                               "all_model_checkpoint_timestamps: %lf\n"
                               "last_preserved_timestamp: %lf\n%n", &t0, &t1, &used) == 2 &&
                      text[used] == 0, "unexpected state file:\n%s", text);
    ck_assert(fabs(t1 - (t0 - 1.0)) < 1e-6);   /* a new state: now - 1 */
    ck_assert(fabs(t0 - (double)time(NULL)) < 60);
    free(text);
    char *names = listing(sub);
    ck_assert_str_eq(names, "checkpoint\nmodel.ckpt-42.data-00000-of-00001\nmodel.ckpt-42.index\n");
    free(names);

    char           *latest = NULL;
    tfs_checkpoint *c      = NULL;
    ck_assert_int_eq(tfs_checkpoint_latest(sub, &latest, &st), TFS_OK);
    ck_assert_str_eq(latest, want);
    ck_assert_int_eq(tfs_checkpoint_open(latest, &c, &st), TFS_OK);
    ck_assert_int_eq(tfs_checkpoint_count(c), 6);
    const char *sorted[] = {"a_scalar", "dense/bias_double", "dense/kernel", "empty", "mask",
                            "vocab"};
    const enum tfs_dtype dts[] = {TFS_DTYPE_INT8, TFS_DTYPE_DOUBLE, TFS_DTYPE_FLOAT,
                                  TFS_DTYPE_FLOAT, TFS_DTYPE_BOOL, TFS_DTYPE_STRING};
    const int ranks[] = {0, 1, 2, 2, 1, 1};
    for (int i = 0; i < 6; i++) {
        tfs_checkpoint_var v = tfs_checkpoint_var_at(c, i);
        ck_assert_str_eq(v.name, sorted[i]);
        ck_assert_int_eq(v.dtype, dts[i]);
        ck_assert_int_eq(v.shape.rank, ranks[i]);
        ck_assert_int_eq(tfs_checkpoint_find(c, sorted[i]), i);
    }
    ck_assert_int_eq(tfs_checkpoint_var_at(c, 3).shape.dims[0], 0);
    ck_assert_int_eq(tfs_checkpoint_var_at(c, 3).shape.dims[1], 4);
    ck_assert_int_eq(tfs_checkpoint_find(c, "nope"), -1);

    tfs_tensor *r = NULL;
    ck_assert_int_eq(tfs_checkpoint_read(c, "dense/kernel", TFS_DTYPE_FLOAT, &r, &st), TFS_OK);
    tfs_test_assert_f32(r, 2, (int64_t[]){2, 3}, (float[]){0.25f, 1.25f, 2.25f, 3.25f, 4.25f,
                                                           5.25f}, 0);
    tfs_tensor_unref(r);
    ck_assert_int_eq(tfs_checkpoint_read(c, "dense/bias_double", TFS_DTYPE_INVALID, &r, &st),
                     TFS_OK);
    ck_assert(((double *)r->data)[0] == M_PI && ((double *)r->data)[1] == -1e-300);
    tfs_tensor_unref(r);
    ck_assert_int_eq(tfs_checkpoint_read(c, "vocab", TFS_DTYPE_STRING, &r, &st), TFS_OK);
    tfs_string *str = tfs_tensor_strings(r);
    ck_assert(str[0].len == 5 && memcmp(str[0].data, "hello", 5) == 0 && str[1].len == 0);
    tfs_tensor_unref(r);
    ck_assert_int_eq(tfs_checkpoint_read(c, "a_scalar", TFS_DTYPE_INT8, &r, &st), TFS_OK);
    ck_assert_int_eq(r->rank, 0);
    ck_assert_int_eq(*(int8_t *)r->data, -7);
    tfs_tensor_unref(r);
    ck_assert_int_eq(tfs_checkpoint_read(c, "mask", TFS_DTYPE_BOOL, &r, &st), TFS_OK);
    ck_assert(!((bool *)r->data)[0] && ((bool *)r->data)[1] && !((bool *)r->data)[2]);
    tfs_tensor_unref(r);
    ck_assert_int_eq(tfs_checkpoint_read(c, "empty", TFS_DTYPE_FLOAT, &r, &st), TFS_OK);
    ck_assert_int_eq(r->nelem, 0);
    tfs_tensor_unref(r);
    /* Wrong dtype, unknown name. */
    ck_assert_int_eq(tfs_checkpoint_read(c, "mask", TFS_DTYPE_FLOAT, &r, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_checkpoint_read(c, "nope", TFS_DTYPE_INVALID, &r, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "nope"));
    tfs_checkpoint_close(c);
    tfs_free(latest);

    tfs_tensor_unref(f);
    tfs_tensor_unref(d);
    tfs_tensor_unref(s);
    tfs_tensor_unref(i8);
    tfs_tensor_unref(e);
    tfs_tensor_unref(b);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Saved through tfs_checkpoint_save, TensorFlow's own variables bundle comes out byte for byte:
 * the header entry (key "", num_shards 1, LITTLE, version producer 1), the entries and the data. */
START_TEST(matches_tensorflow_bundle_bytes)
{
    if (tfs_test_skip_without_fixture("matches_tensorflow_bundle_bytes", HP2V))
        return;
    char *dir = tfs_test_mkdtemp(), tfp[4096], ours[4200], theirs[4200];
    ck_assert_ptr_nonnull(tfs_test_fixture(HP2V, tfp, sizeof tfp));
    tfs_status  st;
    float       vals[] = {0.5f, 2.0f, 3.0f};
    tfs_tensor *a = tfs_test_tensor_f32(0, NULL, &vals[0]);
    tfs_tensor *b = tfs_test_tensor_f32(0, NULL, &vals[1]);
    tfs_tensor *c = tfs_test_tensor_f32(0, NULL, &vals[2]);
    tfs_named_tensor t[] = {{"a", a}, {"b", b}, {"c", c}};
    ck_assert_int_eq(tfs_checkpoint_save(dir, "variables", -1, t, 3, NULL, NULL, &st), TFS_OK);
    const char *suffix[] = {".index", ".data-00000-of-00001"};
    for (int k = 0; k < 2; k++) {
        snprintf(ours, sizeof ours, "%s/variables%s", dir, suffix[k]);
        snprintf(theirs, sizeof theirs, "%s/variables%s", tfp, suffix[k]);
        size_t na, nb;
        char  *x = tfs_test_read_file(ours, &na), *y = tfs_test_read_file(theirs, &nb);
        ck_assert_msg(x && y && na == nb && memcmp(x, y, na) == 0, "%s differs", suffix[k]);
        free(x);
        free(y);
    }
    /* And the fixture reads through the checkpoint API. */
    char            prefix[4200];
    tfs_checkpoint *ck = NULL;
    tfs_tensor     *r  = NULL;
    snprintf(prefix, sizeof prefix, "%s/variables", tfp);
    ck_assert_int_eq(tfs_checkpoint_open(prefix, &ck, &st), TFS_OK);
    ck_assert_int_eq(tfs_checkpoint_count(ck), 3);
    ck_assert_str_eq(tfs_checkpoint_var_at(ck, 1).name, "b");
    ck_assert_int_eq(tfs_checkpoint_read(ck, "c", TFS_DTYPE_FLOAT, &r, &st), TFS_OK);
    ck_assert(*(float *)r->data == 3.0f);
    tfs_tensor_unref(r);
    tfs_checkpoint_close(ck);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_tensor_unref(c);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(keep_checkpoint_max_deletes_oldest)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_status st;
    for (int s = 1; s <= 7; s++)
        ck_assert_msg(save_step(dir, s * 10, 3, &st) == TFS_OK, "%s", st.msg);
    expect_state_paths(dir, "model.ckpt-70", "model.ckpt-50 model.ckpt-60 model.ckpt-70");
    char *names = listing(dir);
    ck_assert_str_eq(names, "checkpoint\n"
                            "model.ckpt-50.data-00000-of-00001\nmodel.ckpt-50.index\n"
                            "model.ckpt-60.data-00000-of-00001\nmodel.ckpt-60.index\n"
                            "model.ckpt-70.data-00000-of-00001\nmodel.ckpt-70.index\n");
    free(names);
    expect_latest(dir, 70);
    /* last_preserved_timestamp stays what the first save set. */
    tfs_checkpoint_state *s = NULL;
    ck_assert_int_eq(tfs_checkpoint_state_read(dir, &s, &st), TFS_OK);
    ck_assert(s->last_preserved_timestamp < s->all_model_checkpoint_timestamps[0]);
    tfs_checkpoint_state_free(s);

    /* Saving step 60 again moves it to the end; nothing is deleted (3 managed). */
    ck_assert_int_eq(save_step(dir, 60, 3, &st), TFS_OK);
    expect_state_paths(dir, "model.ckpt-60", "model.ckpt-50 model.ckpt-70 model.ckpt-60");
    expect_latest(dir, 60);
    /* A smaller max on a later run trims the older ones. */
    ck_assert_int_eq(save_step(dir, 80, 1, &st), TFS_OK);
    expect_state_paths(dir, "model.ckpt-80", "model.ckpt-80");
    ck_assert(!exists(dir, "model.ckpt-50.index") && !exists(dir, "model.ckpt-70.index") &&
              !exists(dir, "model.ckpt-60.data-00000-of-00001"));
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(keep_zero_keeps_all)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_status st;
    for (int s = 1; s <= 8; s++)
        ck_assert_int_eq(save_step(dir, s, 0, &st), TFS_OK);
    expect_state_paths(dir, "model.ckpt-8", "model.ckpt-1 model.ckpt-2 model.ckpt-3 model.ckpt-4 "
                                            "model.ckpt-5 model.ckpt-6 model.ckpt-7 model.ckpt-8");
    ck_assert(exists(dir, "model.ckpt-1.index"));
    ck_assert_int_eq(save_step(dir, 9, -1, &st), TFS_INVALID_ARGUMENT);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* A state TensorFlow left (absolute and relative paths, a shard pattern of several files, and an
 * entry recorded before last_preserved_timestamp): continued as CheckpointManager does. */
START_TEST(continues_tensorflow_state)
{
    char      *dir = tfs_test_mkdtemp(), text[8192];
    tfs_status st;
    const char *files[] = {"old-1.index", "old-1.data-00000-of-00002", "old-1.data-00001-of-00002",
                           "old-2.index", "old-2.data-00000-of-00001", "kept.index",
                           "old-1.data-00000-of-00002.tempstate123", "old-10.index"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        write_text(dir, files[i], "x");
    snprintf(text, sizeof text,
             "model_checkpoint_path: \"old-2\"\n"
             "all_model_checkpoint_paths: \"kept\"\n"
             "all_model_checkpoint_paths: \"%s/old-1\"\n"
             "all_model_checkpoint_paths: \"old-2\"\n"
             "all_model_checkpoint_timestamps: 1000.0\n"
             "all_model_checkpoint_timestamps: 3000.5\n"
             "all_model_checkpoint_timestamps: 4000.25\n"
             "last_preserved_timestamp: 2000.0\n", dir);
    write_text(dir, "checkpoint", text);
    ck_assert_int_eq(save_step(dir, 5, 2, &st), TFS_OK);
    /* "kept" (before last_preserved) is no longer managed and stays; old-1 is the oldest managed
     * one and goes with all its shards; old-1's temp file and old-10 are other files. */
    expect_state_paths(dir, "model.ckpt-5", "old-2 model.ckpt-5");
    ck_assert(!exists(dir, "old-1.index") && !exists(dir, "old-1.data-00000-of-00002") &&
              !exists(dir, "old-1.data-00001-of-00002"));
    ck_assert(exists(dir, "kept.index") && exists(dir, "old-2.index") &&
              exists(dir, "old-1.data-00000-of-00002.tempstate123") && exists(dir, "old-10.index"));
    tfs_checkpoint_state *s = NULL;
    ck_assert_int_eq(tfs_checkpoint_state_read(dir, &s, &st), TFS_OK);
    ck_assert(s->last_preserved_timestamp == 2000.0);
    ck_assert(s->all_model_checkpoint_timestamps[0] == 4000.25);
    tfs_checkpoint_state_free(s);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(read_errors)
{
    char                 *dir = tfs_test_mkdtemp(), *prefix = (char *)1;
    tfs_status            st;
    tfs_checkpoint_state *s = (tfs_checkpoint_state *)1;

    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_NOT_FOUND);
    ck_assert_ptr_null(prefix);
    ck_assert_ptr_nonnull(strstr(st.msg, "no checkpoint state file"));
    ck_assert_int_eq(tfs_checkpoint_state_read(dir, &s, &st), TFS_NOT_FOUND);
    ck_assert_ptr_null(s);

    write_text(dir, "checkpoint", "model_checkpoint_path: \"a\"\nbogus_field: 3\n");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_DATA_LOSS);
    ck_assert_msg(strstr(st.msg, "corrupt checkpoint state") && strstr(st.msg, ":2:") &&
                      strstr(st.msg, "bogus_field"), "%s", st.msg);
    write_text(dir, "checkpoint", "model_checkpoint_path: \"unterminated\n");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_DATA_LOSS);
    write_text(dir, "checkpoint", "\x89PNG\r\n\x1a\n\x00\x01garbage");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_DATA_LOSS);
    write_text(dir, "checkpoint", "all_model_checkpoint_paths: \"a\"\n");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_DATA_LOSS);
    ck_assert_ptr_nonnull(strstr(st.msg, "model_checkpoint_path is empty"));
    write_text(dir, "checkpoint", "model_checkpoint_path: \"a\"\nall_model_checkpoint_paths: "
                                  "\"a\"\nall_model_checkpoint_timestamps: [1, 2]\n");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_DATA_LOSS);
    ck_assert_ptr_nonnull(strstr(st.msg, "2 timestamps for 1 paths"));
    /* A state naming a checkpoint that is not there. */
    write_text(dir, "checkpoint", "model_checkpoint_path: \"model.ckpt-9\"\n");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "model.ckpt-9.index"));
    /* ... which it is once the index exists; absolute paths are taken as they are. */
    write_text(dir, "model.ckpt-9.index", "");
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_OK);
    tfs_free(prefix);
    char text[4200];
    snprintf(text, sizeof text, "model_checkpoint_path: \"%s/model.ckpt-9\"\n", dir);
    write_text(dir, "checkpoint", text);
    ck_assert_int_eq(tfs_checkpoint_latest(dir, &prefix, &st), TFS_OK);
    snprintf(text, sizeof text, "%s/model.ckpt-9", dir);
    ck_assert_str_eq(prefix, text);
    tfs_free(prefix);
    /* Opening a prefix without an index. */
    tfs_checkpoint *c = (tfs_checkpoint *)1;
    snprintf(text, sizeof text, "%s/nothing", dir);
    ck_assert_int_eq(tfs_checkpoint_open(text, &c, &st), TFS_NOT_FOUND);
    ck_assert_ptr_null(c);
    /* An empty index file is corrupt. */
    snprintf(text, sizeof text, "%s/model.ckpt-9", dir);
    ck_assert_int_eq(tfs_checkpoint_open(text, &c, &st), TFS_DATA_LOSS);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* A corrupt state file does not stop training: the save starts a new state (as TensorFlow's
 * get_checkpoint_state ignores a file it cannot parse). */
START_TEST(save_over_corrupt_state)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_status st;
    write_text(dir, "checkpoint", "this is { not a CheckpointState");
    ck_assert_msg(save_step(dir, 3, 5, &st) == TFS_OK, "%s", st.msg);
    expect_state_paths(dir, "model.ckpt-3", "model.ckpt-3");
    expect_latest(dir, 3);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(bad_arguments_leave_nothing)
{
    char       *dir = tfs_test_mkdtemp();
    tfs_status  st;
    tfs_tensor *w = weights(1), *r = NULL;
    ck_assert_int_eq(save_step(dir, 1, 5, &st), TFS_OK);
    char *before = listing(dir), *state = read_text(dir, "checkpoint");

    tfs_named_tensor dup[] = {{"w", w}, {"w", w}};
    ck_assert_int_eq(tfs_checkpoint_save(dir, "model.ckpt", 2, dup, 2, NULL, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(st.msg, "added twice"));
    tfs_named_tensor unnamed[] = {{"", w}};
    ck_assert_int_eq(tfs_checkpoint_save(dir, "model.ckpt", 2, unnamed, 1, NULL, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    tfs_named_tensor null_t[] = {{"w", NULL}};
    ck_assert_int_eq(tfs_checkpoint_save(dir, "model.ckpt", 2, null_t, 1, NULL, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_RESOURCE, &r, &st), TFS_OK);
    tfs_named_tensor res[] = {{"w", w}, {"r", r}};
    ck_assert_int_eq(tfs_checkpoint_save(dir, "model.ckpt", 2, res, 2, NULL, NULL, &st),
                     TFS_UNIMPLEMENTED);
    tfs_named_tensor ok[] = {{"w", w}};
    const char *bad_names[] = {"", "a/b", "checkpoint", ".."};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(tfs_checkpoint_save(dir, bad_names[i], -1, ok, 1, NULL, NULL, &st),
                         TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_checkpoint_save(dir, NULL, 3, ok, 1, NULL, NULL, &st),
                     TFS_INVALID_ARGUMENT);
    char *after = listing(dir), *state2 = read_text(dir, "checkpoint");
    ck_assert_str_eq(after, before);
    ck_assert_str_eq(state2, state);
    expect_latest(dir, 1);
    free(before);
    free(after);
    free(state);
    free(state2);
    tfs_tensor_unref(w);
    tfs_tensor_unref(r);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* A full disk: RLIMIT_FSIZE below the new checkpoint's size makes its writes fail with EFBIG
 * (SIGXFSZ ignored), as ENOSPC would. The save reports OUT_OF_RANGE (TensorFlow's code for EFBIG;
 * ENOSPC would be RESOURCE_EXHAUSTED) and the directory is exactly as before: same files, same
 * state, the previous checkpoint readable. */
START_TEST(disk_full_keeps_previous)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_status st;
    ck_assert_int_eq(save_step(dir, 1, 5, &st), TFS_OK);
    ck_assert_int_eq(save_step(dir, 2, 5, &st), TFS_OK);
    char *before = listing(dir), *state = read_text(dir, "checkpoint");

    int64_t     dims[] = {1 << 20};
    tfs_tensor *big    = NULL;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, dims, &big, &st), TFS_OK);
    memset(big->data, 0x3f, big->nbytes);
    tfs_named_tensor t[] = {{"big", big}};

    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 256 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    enum tfs_code rc = tfs_checkpoint_save(dir, "model.ckpt", 3, t, 1, NULL, NULL, &st);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    ck_assert_msg(rc == TFS_OUT_OF_RANGE, "%s: %s", tfs_code_name(rc), st.msg);
    ck_assert_ptr_nonnull(strstr(st.msg, "model.ckpt-3"));

    char *after = listing(dir), *state2 = read_text(dir, "checkpoint");
    ck_assert_str_eq(after, before);
    ck_assert_str_eq(state2, state);
    expect_latest(dir, 2);
    free(before);
    free(after);
    free(state);
    free(state2);
    tfs_tensor_unref(big);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* The state file cannot be replaced (a directory is in its way): the complete new bundle is
 * removed again, so no checkpoint that no state names is left behind. */
START_TEST(state_write_failure_removes_bundle)
{
    char      *dir = tfs_test_mkdtemp(), sub[4200];
    tfs_status st;
    snprintf(sub, sizeof sub, "%s/checkpoint", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    write_text(sub, "keep-me", "x");
    ck_assert_int_ne(save_step(dir, 1, 5, &st), TFS_OK);
    char *names = listing(dir);
    ck_assert_str_eq(names, "checkpoint\n");
    free(names);
    ck_assert(exists(sub, "keep-me"));
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Every allocation of a save failing in turn (with a sweep to do): RESOURCE_EXHAUSTED or success,
 * nothing leaked, and after a failure the directory as it was. */
START_TEST(save_out_of_memory)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_status st;
    ck_assert_int_eq(save_step(dir, 1, 2, &st), TFS_OK);
    ck_assert_int_eq(save_step(dir, 2, 2, &st), TFS_OK);
    char       *before = listing(dir), *state = read_text(dir, "checkpoint");
    tfs_tensor *w = weights(3), *gs = NULL;
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_INT64, &gs, &st), TFS_OK);
    *(int64_t *)gs->data = 3;
    tfs_named_tensor    t[] = {{"w", w}, {"global_step", gs}};
    tfs_checkpoint_opts o   = {.keep_checkpoint_max = 2};
    int64_t             base = tfs_alloc_bytes_in_use();
    bool                done = false;
    int64_t             n;
    for (n = 1; n < 2000 && !done; n++) {
        tfs_alloc_fail_after(n);
        enum tfs_code rc = tfs_checkpoint_save(dir, "model.ckpt", 3, t, 2, &o, NULL, &st);
        tfs_alloc_fail_after(0);
        ck_assert_msg(rc == TFS_OK || rc == TFS_RESOURCE_EXHAUSTED, "allocation %lld: %s: %s",
                      (long long)n, tfs_code_name(rc), st.msg);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
        done = rc == TFS_OK;
        if (!done) {
            char *after = listing(dir), *state2 = read_text(dir, "checkpoint");
            ck_assert_str_eq(after, before);
            ck_assert_str_eq(state2, state);
            free(after);
            free(state2);
            expect_latest(dir, 2);
        }
    }
    ck_assert(done);
    ck_assert_int_gt(n, 10);
    tfs_tensor_unref(w);
    tfs_tensor_unref(gs);
    expect_state_paths(dir, "model.ckpt-3", "model.ckpt-2 model.ckpt-3");
    expect_latest(dir, 3);
    free(before);
    free(state);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

/* Every allocation of latest + open + list + read failing in turn. */
START_TEST(read_out_of_memory)
{
    char      *dir = tfs_test_mkdtemp();
    tfs_status st;
    ck_assert_int_eq(save_step(dir, 7, 2, &st), TFS_OK);
    int64_t base = tfs_alloc_bytes_in_use();
    bool    done = false;
    for (int64_t n = 1; n < 1000 && !done; n++) {
        char           *prefix = NULL;
        tfs_checkpoint *c      = NULL;
        tfs_tensor     *t      = NULL;
        tfs_alloc_fail_after(n);
        enum tfs_code rc = tfs_checkpoint_latest(dir, &prefix, &st);
        if (rc == TFS_OK)
            rc = tfs_checkpoint_open(prefix, &c, &st);
        if (rc == TFS_OK && tfs_checkpoint_count(c) != 2)
            rc = TFS_INTERNAL;
        if (rc == TFS_OK)
            rc = tfs_checkpoint_read(c, "w", TFS_DTYPE_FLOAT, &t, &st);
        tfs_alloc_fail_after(0);
        ck_assert_msg(rc == TFS_OK || rc == TFS_RESOURCE_EXHAUSTED, "allocation %lld: %s: %s",
                      (long long)n, tfs_code_name(rc), st.msg);
        done = rc == TFS_OK;
        if (done)
            ck_assert(((float *)t->data)[5] == 12.0f);
        tfs_tensor_unref(t);
        tfs_checkpoint_close(c);
        tfs_free(prefix);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    }
    ck_assert(done);
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

Suite *suite_savedmodel_checkpoint(void)
{
    Suite *s  = suite_create("savedmodel_checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, double_repr_matches_python);
    tcase_add_test(tc, state_render_escapes_like_text_format);
    tcase_add_test(tc, save_and_read_back);
    tcase_add_test(tc, keep_checkpoint_max_deletes_oldest);
    tcase_add_test(tc, keep_zero_keeps_all);
    tcase_add_test(tc, continues_tensorflow_state);
    tcase_add_test(tc, read_errors);
    tcase_add_test(tc, save_over_corrupt_state);
    tcase_add_test(tc, bad_arguments_leave_nothing);
    tcase_add_test(tc, disk_full_keeps_previous);
    tcase_add_test(tc, state_write_failure_removes_bundle);
    tcase_add_test(tc, save_out_of_memory);
    tcase_add_test(tc, read_out_of_memory);
    suite_add_tcase(s, tc);
    tc = tfs_test_fixture_case("checkpoint_fixtures", NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, matches_tensorflow_bundle_bytes);
    suite_add_tcase(s, tc);
    return s;
}
