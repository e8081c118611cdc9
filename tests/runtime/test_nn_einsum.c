/* Tests of the Einsum kernel (runtime/kernels/nn-einsum.c) against a naive einsum written here:
 * every assignment of every label, products summed in double into the output element the output
 * labels pick. The equations Keras' EinsumDense and MultiHeadAttention save, batch matmuls with
 * broadcasting ellipses, reduce labels, diagonals, one-operand einsums, empty dimensions, float,
 * double, int32 and int64, a Const right operand, and the INVALID_ARGUMENT cases. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_nn_einsum(void);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* ---- the reference -------------------------------------------------------------------------- */

typedef struct ref_in {
    int            rank;
    const int64_t *dims;
    const double  *v;
} ref_in;

/* Expands "..." in subscript s (for an operand of `rank` axes; rank < 0: the output) into
 * upper-case labels 'A'.. aligned at the right of max_bc broadcasting axes. */
static void expand(const char *s, size_t len, int rank, int max_bc, char *out)
{
    int named = 0;
    for (size_t i = 0; i < len; i++)
        named += s[i] != '.';
    int nb = rank < 0 ? max_bc : rank - named;
    int o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            for (int b = 0; b < nb; b++)
                out[o++] = (char)('A' + max_bc - nb + b);
            i += 2;
            continue;
        }
        out[o++] = s[i];
    }
    out[o] = 0;
}

/* out (zeroed by the caller, shape odims) = einsum(eq, in[0, nin)). */
static int ref_einsum(const char *eq, int nin, const ref_in *in, int64_t *odims, double **out)
{
    const char *arrow = strstr(eq, "->"), *comma = strchr(eq, ',');
    const char *sub[3] = {eq, comma ? comma + 1 : NULL, arrow + 2};
    size_t len[3] = {(size_t)((comma && comma < arrow ? comma : arrow) - eq),
                     comma ? (size_t)(arrow - comma - 1) : 0, strlen(arrow + 2)};
    int max_bc = 0;
    for (int i = 0; i < nin; i++) {
        int named = 0;
        for (size_t j = 0; j < len[i]; j++)
            named += sub[i][j] != '.';
        if (memchr(sub[i], '.', len[i]) && in[i].rank - named > max_bc)
            max_bc = in[i].rank - named;
    }
    char lab[3][32] = {{0}};
    for (int i = 0; i < nin; i++)
        expand(sub[i], len[i], in[i].rank, max_bc, lab[i]);
    expand(sub[2], len[2], -1, max_bc, lab[2]);
    int64_t size[128];
    for (int c = 0; c < 128; c++)
        size[c] = -1;   /* not seen */
    for (int i = 0; i < nin; i++)
        for (int a = 0; a < in[i].rank; a++) {
            int c = lab[i][a];
            if (size[c] < 0 || size[c] == 1)
                size[c] = in[i].dims[a];
        }
    char all[64];
    int nall = 0;
    for (int i = 0; i < 3; i++)
        for (const char *c = lab[i]; *c; c++)
            if (!memchr(all, *c, (size_t)nall))
                all[nall++] = *c;
    int orank = (int)strlen(lab[2]);
    int64_t onelem = 1;
    for (int a = 0; a < orank; a++) {
        odims[a] = size[(int)lab[2][a]];
        onelem *= odims[a];
    }
    *out = calloc((size_t)(onelem ? onelem : 1), sizeof **out);
    int64_t val[128] = {0}, total = 1;
    for (int l = 0; l < nall; l++)
        total *= size[(int)all[l]];
    for (int64_t t = 0; t < total; t++) {
        int64_t rest = t;
        for (int l = nall - 1; l >= 0; l--) {
            val[(int)all[l]] = rest % size[(int)all[l]];
            rest /= size[(int)all[l]];
        }
        double p = 1;
        for (int i = 0; i < nin; i++) {
            int64_t off = 0;
            for (int a = 0; a < in[i].rank; a++)   /* size-1 axes broadcast */
                off = off * in[i].dims[a] + (in[i].dims[a] == 1 ? 0 : val[(int)lab[i][a]]);
            p *= in[i].v[off];
        }
        int64_t o = 0;
        for (int a = 0; a < orank; a++)
            o = o * odims[a] + val[(int)lab[2][a]];
        (*out)[o] += p;
    }
    return orank;
}

/* ---- running one case ----------------------------------------------------------------------- */

static uint32_t rng = 12345;

static double next_value(enum tfs_dtype dt)
{
    rng = rng * 1664525u + 1013904223u;
    if (dt == TFS_DTYPE_INT32 || dt == TFS_DTYPE_INT64)
        return (double)((int)(rng >> 24) % 7 - 3);
    return (double)(rng >> 8) / (double)(1u << 24) * 2.0 - 1.0;
}

/* A tensor of random values, and the same values as doubles in *v (caller frees). */
static tfs_tensor *random_tensor(enum tfs_dtype dt, int rank, const int64_t *dims, double **v)
{
    int64_t n = tfs_shape_nelem(rank, dims);
    tfs_tensor *t = at_t(dt, rank, dims, NULL);
    *v = calloc((size_t)(n ? n : 1), sizeof **v);
    for (int64_t i = 0; i < n; i++) {
        double x = next_value(dt);
        switch (dt) {
        case TFS_DTYPE_FLOAT:  ((float *)t->data)[i] = (float)x; x = (float)x; break;
        case TFS_DTYPE_DOUBLE: ((double *)t->data)[i] = x; break;
        case TFS_DTYPE_INT32:  ((int32_t *)t->data)[i] = (int32_t)x; break;
        default:               ((int64_t *)t->data)[i] = (int64_t)x; break;
        }
        (*v)[i] = x;
    }
    return t;
}

static double elem(const tfs_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:  return ((const float *)t->data)[i];
    case TFS_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case TFS_DTYPE_INT32:  return ((const int32_t *)t->data)[i];
    default:               return (double)((const int64_t *)t->data)[i];
    }
}

static void set_equation(tfs_graph *g, int id, const void *arg)
{
    tfs_graph_set_attr_string(g, id, "equation", arg);
}

/* Asserts that got holds the reference's result for eq. */
static void expect_ref(const char *eq, tfs_tensor *got, int nin, const ref_in *in)
{
    int64_t odims[TFS_MAX_RANK];
    double *want = NULL;
    int orank = ref_einsum(eq, nin, in, odims, &want);
    char sg[128], sw[128];
    ck_assert_msg(tfs_shape_equal(got->rank, got->dims, orank, odims), "%s: shape %s, want %s", eq,
                  tfs_shape_str(got->rank, got->dims, sg, sizeof sg),
                  tfs_shape_str(orank, odims, sw, sizeof sw));
    double tol = got->dtype == TFS_DTYPE_FLOAT ? 2e-5 : got->dtype == TFS_DTYPE_DOUBLE ? 1e-12 : 0;
    for (int64_t i = 0; i < got->nelem; i++) {
        double g = elem(got, i), w = want[i];
        ck_assert_msg(fabs(g - w) <= tol * (1 + fabs(w)), "%s: element %lld is %.9g, want %.9g",
                      eq, (long long)i, g, w);
    }
    free(want);
    tfs_tensor_unref(got);
}

/* Runs Einsum(eq) on random operands of the given shapes (dims1 NULL: one operand) and checks
 * it against the reference. */
static void check_einsum(const char *eq, enum tfs_dtype dt, int r0, const int64_t *d0, int r1,
                         const int64_t *d1)
{
    int nin = d1 ? 2 : 1;
    double *v[2] = {NULL, NULL};
    tfs_tensor *ins[2];
    ins[0] = random_tensor(dt, r0, d0, &v[0]);
    if (d1)
        ins[1] = random_tensor(dt, r1, d1, &v[1]);
    ref_in in[2] = {{r0, d0, v[0]}, {r1, d1, v[1]}};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_msg(at_run("Einsum", nin, ins, true, set_equation, eq, 1, &out, &st) == TFS_OK,
                  "%s: %s", eq, st.msg);
    expect_ref(eq, out, nin, in);
    free(v[0]);
    free(v[1]);
}

/* ---- tests ---------------------------------------------------------------------------------- */

START_TEST(test_einsum_keras)
{
    /* EinsumDense */
    check_einsum("abc,cd->abd", TFS_DTYPE_FLOAT, 3, DIMS(2, 3, 4), 2, DIMS(4, 5));
    check_einsum("abc,cde->abde", TFS_DTYPE_FLOAT, 3, DIMS(2, 3, 4), 3, DIMS(4, 5, 6));
    check_einsum("ab,bc->ac", TFS_DTYPE_FLOAT, 2, DIMS(7, 33), 2, DIMS(33, 5));
    /* MultiHeadAttention: query/key/value projections, scores, attention output, output dense */
    check_einsum("abc,cde->abde", TFS_DTYPE_FLOAT, 3, DIMS(2, 5, 8), 3, DIMS(8, 2, 4));
    check_einsum("aecd,abcd->acbe", TFS_DTYPE_FLOAT, 4, DIMS(2, 6, 3, 4), 4, DIMS(2, 5, 3, 4));
    check_einsum("acbe,aecd->abcd", TFS_DTYPE_FLOAT, 4, DIMS(2, 3, 5, 6), 4, DIMS(2, 6, 3, 4));
    check_einsum("abcd,cde->abe", TFS_DTYPE_FLOAT, 4, DIMS(2, 5, 3, 4), 3, DIMS(3, 4, 8));
    /* the same in double, int32 and int64 */
    check_einsum("aecd,abcd->acbe", TFS_DTYPE_DOUBLE, 4, DIMS(2, 6, 3, 4), 4, DIMS(2, 5, 3, 4));
    check_einsum("abc,cd->abd", TFS_DTYPE_INT32, 3, DIMS(2, 3, 4), 2, DIMS(4, 5));
    check_einsum("acbe,aecd->abcd", TFS_DTYPE_INT32, 4, DIMS(2, 3, 5, 6), 4, DIMS(2, 6, 3, 4));
    check_einsum("ab,bc->ac", TFS_DTYPE_INT64, 2, DIMS(3, 4), 2, DIMS(4, 5));
    check_einsum("ab,bc->ac", TFS_DTYPE_DOUBLE, 2, DIMS(3, 4), 2, DIMS(4, 5));
}
END_TEST

START_TEST(test_einsum_batch_broadcast)
{
    check_einsum("bij,bjk->bik", TFS_DTYPE_FLOAT, 3, DIMS(3, 2, 4), 3, DIMS(3, 4, 5));
    /* the output as [batch, free of operand 1, free of operand 0]: the operands swap */
    check_einsum("bij,bjk->bki", TFS_DTYPE_FLOAT, 3, DIMS(3, 2, 4), 3, DIMS(3, 4, 5));
    /* transposed operands used in place */
    check_einsum("bji,bkj->bik", TFS_DTYPE_FLOAT, 3, DIMS(3, 4, 2), 3, DIMS(3, 5, 4));
    check_einsum("...ij,...jk->...ik", TFS_DTYPE_FLOAT, 4, DIMS(2, 3, 4, 5), 4,
                 DIMS(2, 3, 5, 6));
    /* ellipses of different lengths and sizes 1 broadcast against 5 */
    check_einsum("...ij,...jk->...ik", TFS_DTYPE_FLOAT, 4, DIMS(2, 1, 3, 4), 3, DIMS(5, 4, 2));
    check_einsum("...ij,...jk->...ik", TFS_DTYPE_INT32, 3, DIMS(1, 3, 4), 4, DIMS(2, 3, 4, 2));
    check_einsum("...ij,jk->...ik", TFS_DTYPE_FLOAT, 4, DIMS(2, 3, 4, 5), 2, DIMS(5, 6));
    check_einsum("ij,...jk->i...k", TFS_DTYPE_DOUBLE, 2, DIMS(3, 4), 4, DIMS(2, 2, 4, 5));
    check_einsum("...ij,...jk->...ik", TFS_DTYPE_FLOAT, 2, DIMS(3, 4), 2, DIMS(4, 2));
}
END_TEST

START_TEST(test_einsum_general)
{
    /* reduce labels (in one operand only, not in the output) */
    check_einsum("abc,cd->ad", TFS_DTYPE_FLOAT, 3, DIMS(2, 3, 4), 2, DIMS(4, 5));
    check_einsum("ab,cd->ac", TFS_DTYPE_DOUBLE, 2, DIMS(2, 3), 2, DIMS(4, 5));
    check_einsum("abc,cd->ad", TFS_DTYPE_INT64, 3, DIMS(2, 3, 4), 2, DIMS(4, 5));
    /* outer and inner products, a diagonal inside an operand */
    check_einsum("i,j->ij", TFS_DTYPE_FLOAT, 1, DIMS(3), 1, DIMS(4));
    check_einsum("i,i->", TFS_DTYPE_FLOAT, 1, DIMS(9), 1, DIMS(9));
    check_einsum("iij,jk->ik", TFS_DTYPE_FLOAT, 3, DIMS(3, 3, 4), 2, DIMS(4, 2));
    check_einsum("ab,ab->ab", TFS_DTYPE_INT32, 2, DIMS(3, 4), 2, DIMS(3, 4));
    check_einsum("bd,ab->dba", TFS_DTYPE_FLOAT, 2, DIMS(3, 4), 2, DIMS(2, 3));
    /* one operand: transpose, sums, diagonal, trace, a diagonal written out */
    check_einsum("ij->ji", TFS_DTYPE_FLOAT, 2, DIMS(3, 4), 0, NULL);
    check_einsum("ij->i", TFS_DTYPE_FLOAT, 2, DIMS(3, 4), 0, NULL);
    check_einsum("ij->", TFS_DTYPE_INT32, 2, DIMS(3, 4), 0, NULL);
    check_einsum("ii->i", TFS_DTYPE_DOUBLE, 2, DIMS(4, 4), 0, NULL);
    check_einsum("ii->", TFS_DTYPE_FLOAT, 2, DIMS(4, 4), 0, NULL);
    check_einsum("i->ii", TFS_DTYPE_FLOAT, 1, DIMS(3), 0, NULL);
    check_einsum("...ij->...ji", TFS_DTYPE_INT64, 3, DIMS(2, 3, 4), 0, NULL);
    check_einsum("abc->abc", TFS_DTYPE_FLOAT, 3, DIMS(2, 3, 4), 0, NULL);
    /* empty dimensions: a contraction over 0 elements gives zeros; an empty output */
    check_einsum("ab,bc->ac", TFS_DTYPE_FLOAT, 2, DIMS(3, 0), 2, DIMS(0, 5));
    check_einsum("ab,bc->ac", TFS_DTYPE_INT32, 2, DIMS(3, 0), 2, DIMS(0, 5));
    check_einsum("ab,bc->ac", TFS_DTYPE_FLOAT, 2, DIMS(0, 4), 2, DIMS(4, 5));
    check_einsum("ij->", TFS_DTYPE_FLOAT, 2, DIMS(0, 4), 0, NULL);
}
END_TEST

/* EinsumDense as a served model has it: the kernel a Const (whose packed panels the product
 * keeps), the input fed; two runs, so the second uses the kept panels. */
START_TEST(test_einsum_const_kernel)
{
    double *vx, *vw;
    tfs_tensor *x = random_tensor(TFS_DTYPE_FLOAT, 3, DIMS(4, 40, 64), &vx);
    tfs_tensor *w = random_tensor(TFS_DTYPE_FLOAT, 2, DIMS(64, 96), &vw);
    tfs_graph *g = NULL;
    ck_assert_int_eq(tfs_graph_new(&g, NULL), TFS_OK);
    rt_placeholder(g, "x", TFS_DTYPE_FLOAT);
    rt_const(g, "w", tfs_tensor_ref(w));
    int id = tfs_graph_add_node(g, "e", "Einsum");
    tfs_graph_add_input(g, id, "x");
    tfs_graph_add_input(g, id, "w");
    tfs_graph_set_attr_type(g, id, "T", TFS_DTYPE_FLOAT);
    tfs_graph_set_attr_int(g, id, "N", 2);
    tfs_graph_set_attr_string(g, id, "equation", "abc,cd->abd");
    tfs_session *s = rt_session(g, NULL);
    tfs_feed feed = {.name = "x:0", .tensor = x};
    const char *fetch = "e:0";
    ref_in in[2] = {{3, DIMS(4, 40, 64), vx}, {2, DIMS(64, 96), vw}};
    for (int run = 0; run < 2; run++) {
        tfs_tensor *out = NULL;
        tfs_status st;
        ck_assert_msg(rt_run_twice(s, "Einsum", &feed, 1, &fetch, 1, &out, &st) == TFS_OK, "%s",
                      st.msg);
        expect_ref("abc,cd->abd", out, 2, in);
    }
    tfs_session_free(s);
    tfs_tensor_unref(x);
    tfs_tensor_unref(w);
    free(vx);
    free(vw);
}
END_TEST

static void expect_error(const char *eq, enum tfs_dtype dt, int r0, const int64_t *d0, int r1,
                         const int64_t *d1, enum tfs_code code, const char *needle)
{
    tfs_tensor *ins[2] = {at_t(dt, r0, d0, NULL), d1 ? at_t(dt, r1, d1, NULL) : NULL};
    tfs_tensor *out = NULL;
    tfs_status st;
    ck_assert_int_eq(at_run("Einsum", d1 ? 2 : 1, ins, true, set_equation, eq, 1, &out, &st),
                     code);
    rt_assert_err(st, code, needle);
    rt_assert_err(st, code, "node 'op' (Einsum)");
}

START_TEST(test_einsum_errors)
{
    const enum tfs_dtype F = TFS_DTYPE_FLOAT;
    const enum tfs_code E = TFS_INVALID_ARGUMENT;
    expect_error("ab,bc", F, 2, DIMS(2, 3), 2, DIMS(3, 4), E, "Expecting exactly one '->'");
    expect_error("ab,bc->a->c", F, 2, DIMS(2, 3), 2, DIMS(3, 4), E, "Expecting exactly one");
    expect_error("a,b,c->abc", F, 1, DIMS(2), 1, DIMS(3), E, "Expecting 1 or 2 input subscripts");
    expect_error("ab->ab", F, 2, DIMS(2, 3), 2, DIMS(3, 4), E, "Expected 1 inputs but got: 2");
    expect_error("ab,bc->ac", F, 2, DIMS(2, 3), 2, DIMS(4, 5), E,
                 "Expected dimension 3 at axis 0 of the input shaped [4,5] but got dimension 4");
    expect_error("abc,cd->abd", F, 2, DIMS(2, 3), 2, DIMS(3, 4), E,
                 "Expected input 0 to have rank 3 but got: 2");
    expect_error("...abc,cd->...abd", F, 2, DIMS(2, 3), 2, DIMS(3, 4), E,
                 "Expected input 0 to have rank at least 3 but got: 2");
    expect_error("...ij,...jk->ik", F, 3, DIMS(2, 3, 4), 3, DIMS(2, 4, 5), E,
                 "Output contains 1 broadcasting dimension(s) but no ellipsis");
    expect_error("...ij,...jk->...ik", F, 3, DIMS(2, 3, 4), 3, DIMS(3, 4, 5), E,
                 "Invalid broadcasting dimensions: [2,3,4] vs. [3,4,5]");
    expect_error("ab,bc->az", F, 2, DIMS(2, 3), 2, DIMS(3, 4), E, "output label 'z'");
    expect_error("a..b->ab", F, 2, DIMS(2, 3), 0, NULL, E, "one ellipsis");
    expect_error("...a...->a", F, 2, DIMS(2, 3), 0, NULL, E, "one ellipsis");
    expect_error("ab,bc->ac", TFS_DTYPE_INT8, 2, DIMS(2, 3), 2, DIMS(3, 4), TFS_UNIMPLEMENTED,
                 "not supported for dtype");
    /* a broadcast result beyond the per-tensor byte limit is refused, not allocated */
    expect_error("i,j->ij", F, 1, DIMS(1 << 20), 1, DIMS(1 << 20), TFS_RESOURCE_EXHAUSTED,
                 "limit");
}
END_TEST

Suite *suite_runtime_nn_einsum(void)
{
    Suite *s = suite_create("runtime_nn_einsum");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_einsum_keras);
    tcase_add_test(tc, test_einsum_batch_broadcast);
    tcase_add_test(tc, test_einsum_general);
    tcase_add_test(tc, test_einsum_const_kernel);
    tcase_add_test(tc, test_einsum_errors);
    suite_add_tcase(s, tc);
    return s;
}
