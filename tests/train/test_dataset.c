/* Tests of the dataset pipeline (train/dataset.c, producer.c, prefetch.c). Each example carries
 * its index in an int64 component "id", so a batch says exactly which examples it holds.
 * Covered: batch/repeat/drop_remainder boundaries; maps; shuffle determinism (same seed, same
 * batches; another seed or another epoch, another order), coverage (each example once per epoch)
 * and locality (a buffer of K never reaches more than K-1 examples ahead); prefetch giving the
 * same sequence as no prefetch; positions (save, seek on a fresh dataset, continue: the same
 * batches as an uninterrupted run, with and without prefetch, in memory and streaming); freeing
 * a prefetching dataset at any point; streaming TFRecord sources against their in-memory twins.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/tfs-test.h"
#include "tests/train/example-writer.h"
#include "tests/train/helpers.h"
#include "train/train.h"

Suite *suite_train_dataset(void);

#define ASSERT_MSG_HAS(st, text) \
    ck_assert_msg(strstr((st).msg, (text)) != NULL, "message '%s' lacks '%s'", (st).msg, (text))

#define MAXB 4096   /* batches one run may collect */

/* The batches of one run: every component's tensors and the position after each. */
typedef struct run {
    int              nb, nc;
    tfs_tensor      *t[MAXB][3];
    tfs_dataset_pos  pos[MAXB];
    enum tfs_code    end;
} run;

static void run_free(run *r)
{
    for (int b = 0; b < r->nb; b++)
        for (int c = 0; c < r->nc; c++)
            tfs_tensor_unref(r->t[b][c]);
    free(r);
}

/* Collects up to `max` batches (to the end when max < 0). */
static run *collect(tfs_dataset *ds, int max)
{
    run       *r = calloc(1, sizeof *r);
    tfs_status st;
    r->nc = tfs_dataset_component_count(ds);
    while (max < 0 || r->nb < max) {
        ck_assert_int_lt(r->nb, MAXB);
        r->end = tfs_dataset_next(ds, r->t[r->nb], &st);
        if (r->end != TFS_OK) {
            ck_assert_msg(r->end == TFS_OUT_OF_RANGE, "%s", st.msg);
            break;
        }
        r->pos[r->nb++] = tfs_dataset_position(ds);
    }
    return r;
}

static void assert_same_batches(const run *a, int from_a, const run *b, int from_b, int n)
{
    for (int i = 0; i < n; i++)
        for (int c = 0; c < a->nc; c++)
            ck_assert_msg(tt_tensor_equal(a->t[from_a + i][c], b->t[from_b + i][c]),
                          "batch %d (component %d) differs", i, c);
}

static int64_t id_at(const run *r, int b, int64_t i)
{
    return ((const int64_t *)r->t[b][0]->data)[i];
}

/* An in-memory dataset of N examples: "id" int64 [N], "img" uint8 [N, 2, 3] (id + k, wrapping),
 * "y" uint8 [N] (id % 10). */
static tfs_dataset *make(int64_t N, const tfs_dataset_opts *o)
{
    tfs_tensor *id, *img, *y;
    tfs_status  st;
    int64_t     d3[3] = {N, 2, 3};
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_INT64, 1, &N, &id, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_UINT8, 3, d3, &img, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_UINT8, 1, &N, &y, &st), TFS_OK);
    for (int64_t i = 0; i < N; i++) {
        ((int64_t *)id->data)[i] = i;
        ((uint8_t *)y->data)[i] = (uint8_t)(i % 10);
        for (int k = 0; k < 6; k++)
            ((uint8_t *)img->data)[i * 6 + k] = (uint8_t)(i + k);
    }
    tfs_dataset *ds;
    ck_assert_msg(tfs_dataset_from_tensors((const char *[]){"id", "img", "y"},
                                           (tfs_tensor *[]){id, img, y}, 3, o, &ds, &st) == TFS_OK,
                  "%s", st.msg);
    tfs_tensor_unref(id);   /* the dataset keeps its own references */
    tfs_tensor_unref(img);
    tfs_tensor_unref(y);
    return ds;
}

static tfs_dataset_opts opts(int64_t B, bool drop, int64_t K, uint64_t seed, int64_t E, int pf)
{
    tfs_dataset_opts o = tfs_dataset_opts_default();
    o.batch_size = B;
    o.drop_remainder = drop;
    o.shuffle_buffer = K;
    o.seed = seed;
    o.epochs = E;
    o.prefetch = pf;
    return o;
}

START_TEST(test_dataset_batch_repeat_boundaries)
{
    static const struct {
        int64_t N, B;
        bool    drop;
        int64_t E;
        int     want_batches;
        int64_t last_size;
    } cases[] = {{10, 3, false, 1, 4, 1}, {10, 3, true, 1, 3, 3}, {9, 3, false, 2, 6, 3},
                 {10, 3, false, 2, 8, 1}, {10, 10, true, 3, 3, 10}, {10, 11, false, 1, 1, 10},
                 {1, 1, false, 5, 5, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfs_dataset_opts o = opts(cases[k].B, cases[k].drop, 0, 0, cases[k].E, 0);
        tfs_dataset     *ds = make(cases[k].N, &o);
        run             *r = collect(ds, -1);
        ck_assert_msg(r->nb == cases[k].want_batches, "case %zu: %d batches", k, r->nb);
        ck_assert_int_eq(r->t[r->nb - 1][0]->dims[0], cases[k].last_size);
        /* In order, epoch after epoch; positions count examples within the epoch. */
        int64_t expect = 0, epoch = 0;
        for (int b = 0; b < r->nb; b++) {
            int64_t n = r->t[b][0]->dims[0];
            ck_assert(n == cases[k].B || (b == r->nb - 1 || r->pos[b].index == cases[k].N));
            if (expect + n > cases[k].N || (cases[k].drop && expect + cases[k].B > cases[k].N)) {
                expect = 0;
                epoch++;
            }
            for (int64_t i = 0; i < n; i++)
                ck_assert_int_eq(id_at(r, b, i), expect + i);
            expect += n;
            ck_assert_int_eq(r->pos[b].epoch, epoch);
            ck_assert_int_eq(r->pos[b].index, expect);
        }
        /* The last batch of an epoch leaves the index at the epoch's size. */
        int64_t per_epoch = tfs_dataset_epoch_examples(ds);
        ck_assert_int_eq(per_epoch, cases[k].drop ? cases[k].N - cases[k].N % cases[k].B
                                                  : cases[k].N);
        ck_assert_int_eq(r->pos[r->nb - 1].index, per_epoch);
        tfs_tensor *t[3];
        tfs_status  st;
        ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_OUT_OF_RANGE);   /* and it stays so */
        ck_assert_ptr_null(t[0]);
        run_free(r);
        tfs_dataset_free(ds);
    }
    /* Fewer examples than a batch with drop_remainder, for ever: ends instead of spinning. */
    tfs_dataset_opts o = opts(8, true, 0, 0, -1, 0);
    tfs_dataset     *ds = make(5, &o);
    tfs_tensor      *t[3];
    tfs_status       st;
    ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_OUT_OF_RANGE);
    ASSERT_MSG_HAS(st, "no batch");
    tfs_dataset_free(ds);
    /* For ever: keeps going past any number of epochs. */
    o = opts(4, false, 3, 1, -1, 0);
    ds = make(10, &o);
    run *r = collect(ds, 30);
    ck_assert_int_eq(r->nb, 30);
    ck_assert_int_eq(r->pos[29].epoch, 9);
    run_free(r);
    tfs_dataset_free(ds);
}
END_TEST

START_TEST(test_dataset_maps)
{
    tfs_dataset_opts o = opts(4, false, 0, 0, 1, 0);
    tfs_dataset     *ds = make(6, &o);
    tfs_status       st;
    ck_assert_int_eq(tfs_dataset_map(ds, "img", TFS_DTYPE_FLOAT, 1.0 / 255, -0.5, &st), TFS_OK);
    run *r = collect(ds, 1);
    /* Defaults: uint8 labels become int32, int64 stays. */
    ck_assert_int_eq(r->t[0][0]->dtype, TFS_DTYPE_INT64);
    ck_assert_int_eq(r->t[0][2]->dtype, TFS_DTYPE_INT32);
    ck_assert_int_eq(((int32_t *)r->t[0][2]->data)[3], 3);
    const tfs_tensor *img = r->t[0][1];
    ck_assert(img->dtype == TFS_DTYPE_FLOAT && img->rank == 3 && img->dims[0] == 4 &&
              img->dims[1] == 2 && img->dims[2] == 3);
    for (int64_t i = 0; i < 4 * 6; i++) {
        double want = (double)(i / 6 + i % 6) / 255 - 0.5;
        ck_assert_double_eq_tol(((float *)img->data)[i], want, 1e-7);
    }
    /* After the first batch the map is fixed; unknown names and bad dtypes are refused. */
    ck_assert_int_eq(tfs_dataset_map(ds, "y", TFS_DTYPE_INT64, 1, 0, &st), TFS_FAILED_PRECONDITION);
    run_free(r);
    tfs_dataset_free(ds);
    ds = make(6, &o);
    ck_assert_int_eq(tfs_dataset_map(ds, "nope", TFS_DTYPE_FLOAT, 1, 0, &st), TFS_NOT_FOUND);
    ck_assert_int_eq(tfs_dataset_map(ds, "y", TFS_DTYPE_INT32, 2, 0, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_dataset_map(ds, "y", TFS_DTYPE_STRING, 1, 0, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_dataset_map(ds, "y", TFS_DTYPE_FLOAT, NAN, 0, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_dataset_map(ds, "y", TFS_DTYPE_INT64, 1, 0, &st), TFS_OK);
    ck_assert_int_eq(tfs_dataset_map(ds, "id", TFS_DTYPE_DOUBLE, 0.5, 1, &st), TFS_OK);
    r = collect(ds, 1);
    ck_assert(r->t[0][2]->dtype == TFS_DTYPE_INT64 && ((int64_t *)r->t[0][2]->data)[2] == 2);
    ck_assert(r->t[0][0]->dtype == TFS_DTYPE_DOUBLE && ((double *)r->t[0][0]->data)[3] == 2.5);
    run_free(r);
    tfs_dataset_free(ds);
    /* Float to int: truncation toward zero, NaN to 0, saturation; double defaults to float. */
    int64_t     n = 5;
    tfs_tensor *f, *d;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &n, &f, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_DOUBLE, 1, &n, &d, &st), TFS_OK);
    const float fv[5] = {2.9f, -2.9f, NAN, 1e20f, -1e20f};
    memcpy(f->data, fv, sizeof fv);
    for (int i = 0; i < 5; i++)
        ((double *)d->data)[i] = i + 0.25;
    o = opts(5, false, 0, 0, 1, 0);
    tfs_dataset *ds2;
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"f", "d"}, (tfs_tensor *[]){f, d},
                                              2, &o, &ds2, &st), TFS_OK);
    ck_assert_int_eq(tfs_dataset_map(ds2, "f", TFS_DTYPE_INT32, 1, 0, &st), TFS_OK);
    r = collect(ds2, 1);
    const int32_t *iv = r->t[0][0]->data;
    ck_assert(iv[0] == 2 && iv[1] == -2 && iv[2] == 0 && iv[3] == INT32_MAX && iv[4] == INT32_MIN);
    ck_assert(r->t[0][1]->dtype == TFS_DTYPE_FLOAT && ((float *)r->t[0][1]->data)[4] == 4.25f);
    run_free(r);
    tfs_dataset_free(ds2);
    tfs_tensor_unref(f);
    tfs_tensor_unref(d);
}
END_TEST

/* Checks that each epoch of r (batch size B, N examples, no drop) is a permutation of 0..N-1 and
 * that no output is more than K-1 examples ahead of its position; returns the first epoch's
 * order through first (N entries) when not NULL. */
static void check_epochs(const run *r, int64_t N, int64_t K, int64_t *first, int64_t *second)
{
    char   *seen = calloc((size_t)N, 1);
    int64_t at = 0, epoch = 0;
    for (int b = 0; b < r->nb; b++) {
        for (int64_t i = 0; i < r->t[b][0]->dims[0]; i++, at++) {
            int64_t id = id_at(r, b, i);
            ck_assert(id >= 0 && id < N);
            ck_assert_msg(!seen[id], "epoch %lld: example %lld twice", (long long)epoch,
                          (long long)id);
            seen[id] = 1;
            ck_assert_msg(id <= at + (K > 1 ? K - 1 : 0), "example %lld at %lld with buffer %lld",
                          (long long)id, (long long)at, (long long)K);
            if (epoch == 0 && first)
                first[at] = id;
            if (epoch == 1 && second)
                second[at] = id;
        }
        if (at == N) {
            for (int64_t i = 0; i < N; i++)
                ck_assert(seen[i]);
            memset(seen, 0, (size_t)N);
            at = 0;
            epoch++;
        }
    }
    ck_assert_int_eq(at, 0);
    free(seen);
}

START_TEST(test_dataset_shuffle)
{
    const int64_t N = 257;
    static const int64_t buffers[] = {0, 1, 2, 7, 64, 257, 10000};
    int64_t       a1[257], a2[257], b1[257];
    for (size_t k = 0; k < sizeof buffers / sizeof *buffers; k++) {
        int64_t          K = buffers[k];
        tfs_dataset_opts o = opts(10, false, K, 42, 3, 0);
        tfs_dataset     *ds = make(N, &o), *same = make(N, &o);
        o.seed = 43;
        tfs_dataset *other = make(N, &o);
        run *r = collect(ds, -1), *rs = collect(same, -1), *ro = collect(other, -1);
        ck_assert_int_eq(r->nb, 3 * 26);
        check_epochs(r, N, K, a1, a2);
        check_epochs(ro, N, K, b1, NULL);
        assert_same_batches(r, 0, rs, 0, r->nb);   /* same seed: same batches */
        bool identity = true;
        for (int64_t i = 0; i < N; i++)
            identity = identity && a1[i] == i;
        ck_assert_msg(identity == (K <= 1), "buffer %lld: identity %d", (long long)K, identity);
        if (K > 1) {
            ck_assert(memcmp(a1, a2, sizeof a1) != 0);   /* reshuffled each epoch */
            ck_assert(memcmp(a1, b1, sizeof a1) != 0);   /* another seed, another order */
        }
        run_free(r);
        run_free(rs);
        run_free(ro);
        tfs_dataset_free(ds);
        tfs_dataset_free(same);
        tfs_dataset_free(other);
    }
}
END_TEST

START_TEST(test_dataset_prefetch_same_sequence)
{
    static const int depths[] = {1, 2, 5};
    for (int drop = 0; drop < 2; drop++) {
        tfs_dataset_opts o = opts(7, drop, 50, 9, 4, 0);
        tfs_dataset     *ds = make(100, &o);
        run             *ref = collect(ds, -1);
        tfs_dataset_free(ds);
        for (int d = 0; d < 3; d++) {
            o.prefetch = depths[d];
            ds = make(100, &o);
            ck_assert_int_eq(tfs_dataset_map(ds, "img", TFS_DTYPE_FLOAT, 1, 0, NULL), TFS_OK);
            tfs_dataset_free(ds);   /* never started */
            ds = make(100, &o);
            run *r = collect(ds, -1);
            ck_assert_int_eq(r->nb, ref->nb);
            assert_same_batches(ref, 0, r, 0, r->nb);
            for (int b = 0; b < r->nb; b++)
                ck_assert(r->pos[b].epoch == ref->pos[b].epoch &&
                          r->pos[b].index == ref->pos[b].index && r->pos[b].rng == ref->pos[b].rng);
            run_free(r);
            tfs_dataset_free(ds);
        }
        run_free(ref);
    }
}
END_TEST

/* Stops after k batches, saves the position, resumes on a fresh dataset: the batches that follow
 * are the uninterrupted run's. */
static void check_resume(tfs_dataset *(*mk)(const tfs_dataset_opts *), tfs_dataset_opts o,
                         int pf_first, int pf_second)
{
    o.prefetch = 0;
    tfs_dataset *ds = mk(&o);
    run         *ref = collect(ds, -1);
    tfs_dataset_free(ds);
    int cuts[] = {0, 1, ref->nb / 3, ref->nb / 2, ref->nb - 1, ref->nb};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        int k = cuts[c];
        o.prefetch = pf_first;
        tfs_dataset *a = mk(&o);
        run         *ra = collect(a, k);
        tfs_dataset_pos pos = tfs_dataset_position(a);
        if (k > 0)
            ck_assert(pos.epoch == ref->pos[k - 1].epoch && pos.index == ref->pos[k - 1].index &&
                      pos.rng == ref->pos[k - 1].rng);
        tfs_dataset_free(a);   /* mid-epoch, with batches still queued */
        o.prefetch = pf_second;
        tfs_dataset *b = mk(&o);
        tfs_status   st;
        ck_assert_msg(tfs_dataset_seek(b, &pos, &st) == TFS_OK, "%s", st.msg);
        run *rb = collect(b, -1);
        ck_assert_msg(rb->nb == ref->nb - k, "cut %d: %d batches after resuming, want %d", k,
                      rb->nb, ref->nb - k);
        assert_same_batches(ref, k, rb, 0, rb->nb);
        /* Seeking back on the same dataset replays too. */
        if (k < ref->nb) {
            ck_assert_int_eq(tfs_dataset_seek(b, &pos, &st), TFS_OK);
            run *again = collect(b, 2);
            assert_same_batches(ref, k, again, 0, again->nb);
            run_free(again);
        }
        run_free(ra);
        run_free(rb);
        tfs_dataset_free(b);
    }
    run_free(ref);
}

static tfs_dataset *make_mem(const tfs_dataset_opts *o)
{
    return make(53, o);
}

START_TEST(test_dataset_resume)
{
    check_resume(make_mem, opts(5, false, 16, 77, 3, 0), 0, 0);
    check_resume(make_mem, opts(5, true, 100, 78, 3, 0), 3, 0);
    check_resume(make_mem, opts(8, false, 0, 0, 2, 0), 2, 4);
    /* Bad positions. */
    tfs_dataset_opts o = opts(5, false, 0, 0, 2, 0);
    tfs_dataset     *ds = make(10, &o);
    tfs_status       st;
    tfs_dataset_pos  bad = {0, 11, 0};
    ck_assert_int_eq(tfs_dataset_seek(ds, &bad, &st), TFS_INVALID_ARGUMENT);
    bad = (tfs_dataset_pos){3, 0, 0};
    ck_assert_int_eq(tfs_dataset_seek(ds, &bad, &st), TFS_INVALID_ARGUMENT);
    bad = (tfs_dataset_pos){-1, 0, 0};
    ck_assert_int_eq(tfs_dataset_seek(ds, &bad, &st), TFS_INVALID_ARGUMENT);
    tfs_dataset_pos end = {2, 0, 0};   /* just past the last epoch: nothing left */
    ck_assert_int_eq(tfs_dataset_seek(ds, &end, &st), TFS_OK);
    tfs_tensor *t[3];
    ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_OUT_OF_RANGE);
    tfs_dataset_pos start = {0, 0, 0};
    ck_assert_int_eq(tfs_dataset_seek(ds, &start, &st), TFS_OK);   /* and back to the start */
    ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_OK);
    for (int i = 0; i < 3; i++)
        tfs_tensor_unref(t[i]);
    tfs_dataset_free(ds);
}
END_TEST

START_TEST(test_dataset_early_free)
{
    for (int k = 0; k < 6; k++) {
        tfs_dataset_opts o = opts(3, false, 10, 5, -1, 4);
        tfs_dataset     *ds = make(100, &o);
        run             *r = collect(ds, k);
        run_free(r);
        tfs_dataset_free(ds);   /* the prefetcher is blocked on a full queue or mid-batch */
    }
    tfs_dataset_free(NULL);
}
END_TEST

START_TEST(test_dataset_bad_construction)
{
    tfs_tensor *a, *b, *s;
    tfs_status  st;
    int64_t     n3 = 3, n4 = 4;
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &n3, &a, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new(TFS_DTYPE_FLOAT, 1, &n4, &b, &st), TFS_OK);
    ck_assert_int_eq(tfs_tensor_new_scalar(TFS_DTYPE_FLOAT, &s, &st), TFS_OK);
    tfs_dataset     *ds;
    tfs_dataset_opts o = tfs_dataset_opts_default();
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"a", "b"}, (tfs_tensor *[]){a, b},
                                              2, &o, &ds, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "'b' has 4 examples");
    ck_assert_ptr_null(ds);
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"a", "a"}, (tfs_tensor *[]){a, a},
                                              2, &o, &ds, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"s"}, (tfs_tensor *[]){s}, 1, &o,
                                              &ds, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_dataset_from_tensors(NULL, NULL, 0, &o, &ds, &st), TFS_INVALID_ARGUMENT);
    const tfs_dataset_opts bad[] = {opts(0, false, 0, 0, 1, 0), opts(1, false, 0, 0, 0, 0),
                                    opts(1, false, -1, 0, 1, 0), opts(1, false, 0, 0, 1, -1),
                                    opts(1, false, 0, 0, -2, 0)};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"a"}, (tfs_tensor *[]){a}, 1,
                                                  &bad[i], &ds, &st), TFS_INVALID_ARGUMENT);
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"a"}, (tfs_tensor *[]){a}, 1, NULL,
                                              &ds, &st), TFS_OK);
    ck_assert_int_eq(tfs_dataset_cardinality(ds), 3);
    ck_assert_int_eq(tfs_dataset_component_index(ds, "a"), 0);
    ck_assert_int_eq(tfs_dataset_component_index(ds, "z"), -1);
    ck_assert_str_eq(tfs_dataset_component_name(ds, 0), "a");
    tfs_dataset_free(ds);
    tfs_tensor_unref(a);
    tfs_tensor_unref(b);
    tfs_tensor_unref(s);
}
END_TEST

/* ---- streaming TFRecord sources ------------------------------------------------------------- */

static char  *sdir;
static const char *spaths[2];

static void example_i(tt_wbuf *ex, int i)
{
    int64_t id = i;
    float   x[2] = {(float)i, (float)(i * i % 17)};
    char    s[16];
    snprintf(s, sizeof s, "n%d", i);
    tt_example_begin(ex);
    tt_example_int64s(ex, "id", &id, 1);
    tt_example_floats(ex, "x", x, 2);
    tt_example_bytes(ex, "s", s);
}

static const tfs_feature_spec SPEC[3] = {
    {.name = "id", .dtype = TFS_DTYPE_INT64, .rank = 0},
    {.name = "x", .dtype = TFS_DTYPE_FLOAT, .rank = 1, .dims = {2}},
    {.name = "s", .dtype = TFS_DTYPE_STRING, .rank = 0},
};

static void stream_setup(void)
{
    sdir = tfs_test_mkdtemp();
    spaths[0] = strdup(tt_path(sdir, "one.tfrecord"));
    spaths[1] = strdup(tt_path(sdir, "two.tfrecord"));
    tt_write_examples(spaths[0], 0, 23, example_i);
    tt_write_examples(spaths[1], 23, 18, example_i);
}

static void stream_teardown(void)
{
    tfs_test_rmtree(sdir);
    free(sdir);
    free((void *)spaths[0]);
    free((void *)spaths[1]);
}

static tfs_dataset *make_stream(const tfs_dataset_opts *o)
{
    tfs_dataset *ds;
    tfs_status   st;
    ck_assert_msg(tfs_dataset_from_tfrecord(spaths, 2, SPEC, 3, o, &ds, &st) == TFS_OK, "%s",
                  st.msg);
    ck_assert_int_eq(tfs_dataset_map(ds, "x", TFS_DTYPE_FLOAT, 0.5, 1, &st), TFS_OK);
    return ds;
}

static tfs_dataset *make_stream_twin(const tfs_dataset_opts *o)
{
    tfs_tensor  *t[3];
    tfs_dataset *ds;
    tfs_status   st;
    ck_assert_int_eq(tfs_tfrecord_examples_read(spaths, 2, SPEC, 3, t, &st), TFS_OK);
    ck_assert_int_eq(tfs_dataset_from_tensors((const char *[]){"id", "x", "s"}, t, 3, o, &ds, &st),
                     TFS_OK);
    ck_assert_int_eq(tfs_dataset_map(ds, "x", TFS_DTYPE_FLOAT, 0.5, 1, &st), TFS_OK);
    for (int i = 0; i < 3; i++)
        tfs_tensor_unref(t[i]);
    return ds;
}

START_TEST(test_dataset_stream_matches_memory)
{
    static const int64_t buffers[] = {0, 4, 41, 100};
    for (size_t k = 0; k < 4; k++)
        for (int pf = 0; pf < 3; pf += 2) {
            tfs_dataset_opts o = opts(6, k == 1, buffers[k], 1000 + k, 3, pf);
            tfs_dataset     *m = make_stream_twin(&o), *s = make_stream(&o);
            ck_assert_int_eq(tfs_dataset_cardinality(s), -1);
            ck_assert_int_eq(tfs_dataset_epoch_examples(s), -1);
            run *rm = collect(m, -1), *rs = collect(s, -1);
            ck_assert_int_eq(tfs_dataset_cardinality(s), 41);
            ck_assert_int_eq(tfs_dataset_epoch_examples(s), k == 1 ? 36 : 41);
            ck_assert_int_eq(rm->nb, rs->nb);
            assert_same_batches(rm, 0, rs, 0, rm->nb);
            if (k != 1)
                check_epochs(rs, 41, buffers[k], NULL, NULL);
            ck_assert(((float *)rs->t[0][1]->data)[0] ==
                      (float)id_at(rs, 0, 0) * 0.5f + 1.0f);
            run_free(rm);
            run_free(rs);
            tfs_dataset_free(m);
            tfs_dataset_free(s);
        }
}
END_TEST

START_TEST(test_dataset_stream_resume)
{
    check_resume(make_stream, opts(4, false, 9, 3, 2, 0), 0, 0);
    check_resume(make_stream, opts(5, true, 50, 4, 2, 0), 2, 3);
    tfs_dataset_opts o = opts(4, false, 9, 3, 2, 0);
    tfs_dataset     *ds = make_stream(&o);
    tfs_dataset_pos  past = {0, 42, 0};
    tfs_status       st;
    ck_assert_int_eq(tfs_dataset_seek(ds, &past, &st), TFS_INVALID_ARGUMENT);
    ASSERT_MSG_HAS(st, "past the end");
    tfs_tensor *t[3];
    ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_INVALID_ARGUMENT);   /* until a seek */
    tfs_dataset_pos start = {0, 0, 3};
    ck_assert_int_eq(tfs_dataset_seek(ds, &start, &st), TFS_OK);
    ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_OK);
    for (int i = 0; i < 3; i++)
        tfs_tensor_unref(t[i]);
    tfs_dataset_free(ds);
}
END_TEST

/* A record damaged in the second file: the batches before it come out, then the error (naming
 * the file), and the same error on every later call. */
START_TEST(test_dataset_stream_corrupt)
{
    size_t n;
    char  *b = tfs_test_read_file(spaths[1], &n);
    b[n / 2] ^= 0x10;
    ck_assert_int_eq(tfs_test_write_file(spaths[1], b, n), 0);
    free(b);
    for (int pf = 0; pf < 2; pf++) {
        tfs_dataset_opts o = opts(5, false, 0, 0, 1, pf);
        tfs_dataset     *ds = make_stream(&o);
        tfs_tensor      *t[3];
        tfs_status       st;
        int              good = 0;
        enum tfs_code    c;
        while ((c = tfs_dataset_next(ds, t, &st)) == TFS_OK) {
            good++;
            for (int i = 0; i < 3; i++)
                tfs_tensor_unref(t[i]);
        }
        ck_assert_int_eq(c, TFS_DATA_LOSS);
        ASSERT_MSG_HAS(st, "two.tfrecord");
        ck_assert_int_ge(good, 4);   /* the 23 records of the first file */
        ck_assert_int_eq(tfs_dataset_next(ds, t, &st), TFS_DATA_LOSS);
        ck_assert_ptr_null(t[0]);
        tfs_dataset_free(ds);
    }
    tfs_dataset *ds;
    tfs_status   st;
    const char  *absent[1] = {tt_path(sdir, "absent.tfrecord")};
    ck_assert_int_eq(tfs_dataset_from_tfrecord(absent, 1, SPEC, 3, NULL, &ds, &st), TFS_NOT_FOUND);
    ck_assert_ptr_null(ds);
}
END_TEST

Suite *suite_train_dataset(void)
{
    Suite *s = suite_create("dataset");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dataset_batch_repeat_boundaries);
    tcase_add_test(tc, test_dataset_maps);
    tcase_add_test(tc, test_dataset_shuffle);
    tcase_add_test(tc, test_dataset_prefetch_same_sequence);
    tcase_add_test(tc, test_dataset_resume);
    tcase_add_test(tc, test_dataset_early_free);
    tcase_add_test(tc, test_dataset_bad_construction);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("stream");
    tcase_set_timeout(ts, 60);
    tcase_add_checked_fixture(ts, stream_setup, stream_teardown);
    tcase_add_test(ts, test_dataset_stream_matches_memory);
    tcase_add_test(ts, test_dataset_stream_resume);
    tcase_add_test(ts, test_dataset_stream_corrupt);
    suite_add_tcase(s, ts);
    return s;
}
