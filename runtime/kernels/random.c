/* CPU kernels of TensorFlow's stateful random ops: RandomUniform, RandomStandardNormal and
 * TruncatedNormal (dtype float or double) and RandomUniformInt (Tout int32 or int64), drawing the
 * numbers TensorFlow draws for the same seeds.
 *
 * DESIGN. Each node has a Philox4x32-10 generator in the session (rng-impl.h), seeded from attrs
 * seed and seed2 as TensorFlow seeds it. The rest follows TensorFlow's random_op_cpu.h and
 * random_distributions.h:
 *  - a run with n outputs reserves n * 256 blocks of the generator (ReserveRandomOutputs(n, 256)),
 *    so the next run starts 256 n blocks further;
 *  - outputs come in groups. For the fixed-cost distributions group g is made from the one block
 *    at base + g: uniform float takes 4 words -> 4 floats (23 mantissa bits: [1, 2) minus 1),
 *    uniform double 2 words per double (52 bits), standard normal float Box-Muller on the word
 *    pairs (0,1) and (2,3), standard normal double one Box-Muller on two 52-bit uniforms (words
 *    0-1 and 2-3), int32 4 outputs lo + word % (hi - lo), int64 2 outputs from 64-bit words;
 *  - truncated normal groups (4 floats or 2 doubles) start at block base + 256 g (float) or
 *    base + 128 g (double) and take words one at a time, Box-Muller pairs of them, keeping the
 *    values with |x| < 2 in order until the group is full.
 * A trailing partial group keeps its first outputs. Groups depend only on their index, so
 * tfs__parallel_for may split them any way and the numbers do not change.
 */
#include <math.h>
#include <string.h>

#include "runtime/rng-impl.h"

#define RANDOM_BLOCKS_PER_OUTPUT 256   /* TensorFlow's multiplier; do not change alone */
#define RANDOM_GRAIN 1024              /* groups per tfs__parallel_for range */

/* ---- TensorFlow's conversions (random_distributions_utils.h) -------------------------------- */

/* 23 random mantissa bits under exponent 0: a float in [1, 2), minus 1. */
static float u32_to_float(uint32_t x)
{
    uint32_t bits = (127u << 23) | (x & 0x7fffffu);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f - 1.0f;
}

/* 52 mantissa bits (20 from x0, 32 from x1) under exponent 0, minus 1: a double in [0, 1). */
static double u64_to_double(uint32_t x0, uint32_t x1)
{
    uint64_t bits = (1023ull << 52) | ((uint64_t)(x0 & 0xfffffu) << 32) | x1;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d - 1.0;
}

/* Box-Muller on two uniform words, in float as TensorFlow's BoxMullerFloat: the angle is computed
 * in double (2.0f * M_PI promotes) and rounded to float; u1 is kept away from 0 for log. */
static void box_muller_float(uint32_t x0, uint32_t x1, float *f0, float *f1)
{
    float u1 = u32_to_float(x0);
    if (u1 < 1.0e-7f)
        u1 = 1.0e-7f;
    const float v1 = (float)(2.0 * M_PI * (double)u32_to_float(x1));
    const float u2 = sqrtf(-2.0f * logf(u1));
    sincosf(v1, f0, f1);
    *f0 *= u2;
    *f1 *= u2;
}

static void box_muller_double(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double *d0,
                              double *d1)
{
    double u1 = u64_to_double(x0, x1);
    if (u1 < 1.0e-7)
        u1 = 1.0e-7;
    const double v1 = 2 * M_PI * u64_to_double(x2, x3);
    const double u2 = sqrt(-2.0 * log(u1));
    sincos(v1, d0, d1);
    *d0 *= u2;
    *d1 *= u2;
}

/* ---- filling the output --------------------------------------------------------------------- */

typedef struct fill_ctx {
    tfs_philox base;     /* the generator position this run reserved */
    void      *data;
    int64_t    n;        /* outputs */
    int64_t    lo;       /* RandomUniformInt: minval and maxval - minval (as unsigned) */
    uint64_t   range;
} fill_ctx;

/* Stores group g's `size` results r[] into the output, fewer for a trailing partial group. */
#define STORE_GROUP(T, c, g, size, r)                                                              \
    do {                                                                                           \
        int64_t first_ = (g) * (size), left_ = (c)->n - first_;                                    \
        size_t count_ = (size_t)(left_ < (size) ? left_ : (size));                                 \
        memcpy((T *)(c)->data + first_, (r), count_ * sizeof(T));                                  \
    } while (0)

static void uniform_float_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    tfs_philox p = c->base;
    tfs__philox_skip(&p, (uint64_t)gb);
    for (int64_t g = gb; g < ge; g++) {
        uint32_t w[4];
        float r[4];
        tfs__philox_next(&p, w);
        for (int j = 0; j < 4; j++)
            r[j] = u32_to_float(w[j]);
        STORE_GROUP(float, c, g, 4, r);
    }
}

static void uniform_double_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    tfs_philox p = c->base;
    tfs__philox_skip(&p, (uint64_t)gb);
    for (int64_t g = gb; g < ge; g++) {
        uint32_t w[4];
        double r[2];
        tfs__philox_next(&p, w);
        r[0] = u64_to_double(w[0], w[1]);
        r[1] = u64_to_double(w[2], w[3]);
        STORE_GROUP(double, c, g, 2, r);
    }
}

static void normal_float_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    tfs_philox p = c->base;
    tfs__philox_skip(&p, (uint64_t)gb);
    for (int64_t g = gb; g < ge; g++) {
        uint32_t w[4];
        float r[4];
        tfs__philox_next(&p, w);
        box_muller_float(w[0], w[1], &r[0], &r[1]);
        box_muller_float(w[2], w[3], &r[2], &r[3]);
        STORE_GROUP(float, c, g, 4, r);
    }
}

static void normal_double_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    tfs_philox p = c->base;
    tfs__philox_skip(&p, (uint64_t)gb);
    for (int64_t g = gb; g < ge; g++) {
        uint32_t w[4];
        double r[2];
        tfs__philox_next(&p, w);
        box_muller_double(w[0], w[1], w[2], w[3], &r[0], &r[1]);
        STORE_GROUP(double, c, g, 2, r);
    }
}

/* One 32-bit word at a time from consecutive blocks (TensorFlow's SingleSampleAdapter). */
typedef struct word_stream {
    tfs_philox p;
    uint32_t   w[4];
    int        used;   /* words of w[] consumed; 4 = fetch a new block */
} word_stream;

static uint32_t next_word(word_stream *s)
{
    if (s->used == 4) {
        tfs__philox_next(&s->p, s->w);
        s->used = 0;
    }
    return s->w[s->used++];
}

static void word_stream_at(word_stream *s, const tfs_philox *base, uint64_t skip)
{
    s->p = *base;
    tfs__philox_skip(&s->p, skip);
    s->used = 4;
}

static void truncated_float_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    for (int64_t g = gb; g < ge; g++) {
        word_stream s;
        float r[4];
        int k = 0;
        /* 4 outputs * 256 reserved samples / 4 words per block = 256 blocks per group. */
        word_stream_at(&s, &c->base, (uint64_t)g * 256);
        while (k < 4) {
            uint32_t x0 = next_word(&s), x1 = next_word(&s);
            float f[2];
            box_muller_float(x0, x1, &f[0], &f[1]);
            for (int j = 0; j < 2 && k < 4; j++)
                if (fabsf(f[j]) < 2.0f)
                    r[k++] = f[j];
        }
        STORE_GROUP(float, c, g, 4, r);
    }
}

static void truncated_double_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    for (int64_t g = gb; g < ge; g++) {
        word_stream s;
        double r[2];
        int k = 0;
        word_stream_at(&s, &c->base, (uint64_t)g * 128);   /* 2 outputs * 256 / 4 */
        while (k < 2) {
            uint32_t x0 = next_word(&s), x1 = next_word(&s);
            uint32_t x2 = next_word(&s), x3 = next_word(&s);
            double d[2];
            box_muller_double(x0, x1, x2, x3, &d[0], &d[1]);
            for (int j = 0; j < 2 && k < 2; j++)
                if (fabs(d[j]) < 2.0)
                    r[k++] = d[j];
        }
        STORE_GROUP(double, c, g, 2, r);
    }
}

/* lo + word % range: the sum is in [lo, hi), so wrapping unsigned addition gives it exactly. */
static void uniform_int32_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    tfs_philox p = c->base;
    tfs__philox_skip(&p, (uint64_t)gb);
    uint32_t lo = (uint32_t)c->lo, range = (uint32_t)c->range;
    for (int64_t g = gb; g < ge; g++) {
        uint32_t w[4];
        int32_t r[4];
        tfs__philox_next(&p, w);
        for (int j = 0; j < 4; j++)
            r[j] = (int32_t)(lo + w[j] % range);
        STORE_GROUP(int32_t, c, g, 4, r);
    }
}

static void uniform_int64_range(void *arg, int64_t gb, int64_t ge)
{
    const fill_ctx *c = arg;
    tfs_philox p = c->base;
    tfs__philox_skip(&p, (uint64_t)gb);
    uint64_t lo = (uint64_t)c->lo;
    for (int64_t g = gb; g < ge; g++) {
        uint32_t w[4];
        int64_t r[2];
        tfs__philox_next(&p, w);
        for (int j = 0; j < 2; j++)
            r[j] = (int64_t)(lo + ((uint64_t)w[2 * j] | (uint64_t)w[2 * j + 1] << 32) % c->range);
        STORE_GROUP(int64_t, c, g, 2, r);
    }
}

/* ---- kernels -------------------------------------------------------------------------------- */

/* Checks attrs seed and seed2 (ints, default 0; the session's generator read them) and input
 * 0, the output shape (a vector of int32 or int64 of attr T), and allocates the output. */
static enum tfs_code random_output(tfs_kernel_ctx *k, int n_in, enum tfs_dtype dt,
                                   tfs_tensor **out, tfs_status *st)
{
    const tfs_node *n = k->node;
    int64_t seed;
    enum tfs_code rc = TFS_OK;
    if (k->n_in != n_in)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects %d inputs, got %d", n_in,
                             k->n_in);
    if ((tfs__attr(n, "seed") && (rc = tfs__attr_int(n, "seed", &seed, st)) != TFS_OK) ||
        (tfs__attr(n, "seed2") && (rc = tfs__attr_int(n, "seed2", &seed, st)) != TFS_OK))
        return rc;
    const tfs_tensor *shape = k->in[0];
    char sh[128];
    if ((shape->dtype != TFS_DTYPE_INT32 && shape->dtype != TFS_DTYPE_INT64) || shape->rank != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "shape must be a vector of {int32,int64}, got a %s tensor of shape %s",
                             tfs_dtype_short_name(shape->dtype),
                             tfs_shape_str(shape->rank, shape->dims, sh, sizeof sh));
    if ((rc = tfs__arr_check_T(n, shape, "T", "shape", st)) != TFS_OK)
        return rc;
    if (shape->nelem > TFS_MAX_RANK)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "shape has %lld dimensions; at most %d are supported",
                             (long long)shape->nelem, TFS_MAX_RANK);
    int64_t dims[TFS_MAX_RANK];
    for (int i = 0; i < (int)shape->nelem; i++) {
        dims[i] = tfs__arr_int_at(shape, i);
        if (dims[i] < 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Dimension %lld must be >= 0",
                                 (long long)dims[i]);
    }
    return tfs__arr_new_like(n, dt, (int)shape->nelem, dims, out, st);
}

/* Reserves this run's blocks and fills out[0] group by group. */
static enum tfs_code random_fill(tfs_kernel_ctx *k, fill_ctx *c, int group, tfs_range_fn fn,
                                 tfs_status *st)
{
    tfs_tensor *t = k->out[0];
    c->data = t->data;
    c->n = t->nelem;
    enum tfs_code rc = tfs__rng_reserve(tfs__session_rng(k->sess), k->graph, k->node,
                                        (uint64_t)t->nelem * RANDOM_BLOCKS_PER_OUTPUT, &c->base,
                                        st);
    if (rc == TFS_OK)
        tfs__parallel_for((t->nelem + group - 1) / group, RANDOM_GRAIN, fn, c);
    return rc;
}

/* RandomUniform, RandomStandardNormal, TruncatedNormal: (shape) -> dtype float or double. */
static enum tfs_code random_real(tfs_kernel_ctx *k, tfs_range_fn f32, tfs_range_fn f64,
                                 tfs_status *st)
{
    enum tfs_dtype dt;
    enum tfs_code rc = tfs__attr_type(k->node, "dtype", &dt, st);
    if (rc != TFS_OK)
        return rc;
    if (dt != TFS_DTYPE_FLOAT && dt != TFS_DTYPE_DOUBLE)
        return tfs__node_err(k->node, st, TFS_UNIMPLEMENTED,
                             "dtype %s is not supported (float and double are)",
                             tfs_dtype_short_name(dt));
    if ((rc = random_output(k, 1, dt, &k->out[0], st)) != TFS_OK)
        return rc;
    fill_ctx c = {.lo = 0};
    if (dt == TFS_DTYPE_FLOAT)
        return random_fill(k, &c, 4, f32, st);
    return random_fill(k, &c, 2, f64, st);
}

enum tfs_code tfs__k_random_uniform(tfs_kernel_ctx *k, tfs_status *st)
{
    return random_real(k, uniform_float_range, uniform_double_range, st);
}

enum tfs_code tfs__k_random_standard_normal(tfs_kernel_ctx *k, tfs_status *st)
{
    return random_real(k, normal_float_range, normal_double_range, st);
}

enum tfs_code tfs__k_truncated_normal(tfs_kernel_ctx *k, tfs_status *st)
{
    return random_real(k, truncated_float_range, truncated_double_range, st);
}

/* RandomUniformInt(shape, minval, maxval) -> Tout int32 or int64 in [minval, maxval). */
enum tfs_code tfs__k_random_uniform_int(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    enum tfs_dtype dt;
    enum tfs_code rc = tfs__attr_type(n, "Tout", &dt, st);
    if (rc != TFS_OK)
        return rc;
    if (dt != TFS_DTYPE_INT32 && dt != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                             "Tout %s is not supported (int32 and int64 are)",
                             tfs_dtype_short_name(dt));
    if ((rc = random_output(k, 3, dt, &k->out[0], st)) != TFS_OK)
        return rc;
    char sh[128];
    for (int i = 1; i <= 2; i++) {
        const tfs_tensor *t = k->in[i];
        const char *what = i == 1 ? "minval" : "maxval";
        if (t->dtype != dt)
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be %s, got %s", what,
                               tfs_dtype_short_name(dt), tfs_dtype_short_name(t->dtype));
        else if (t->rank != 0)
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "%s must be 0-D, got shape %s", what,
                               tfs_shape_str(t->rank, t->dims, sh, sizeof sh));
        if (rc != TFS_OK)
            return rc;   /* the session releases out[0] */
    }
    if (k->out[0]->nelem == 0)
        return TFS_OK;   /* as TensorFlow: no numbers drawn, and minval < maxval not required */
    int64_t lo = tfs__arr_int_at(k->in[1], 0), hi = tfs__arr_int_at(k->in[2], 0);
    if (lo >= hi)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Need minval < maxval: %lld >= %lld",
                             (long long)lo, (long long)hi);
    fill_ctx c = {.lo = lo, .range = (uint64_t)hi - (uint64_t)lo};
    if (dt == TFS_DTYPE_INT32)
        return random_fill(k, &c, 4, uniform_int32_range, st);
    return random_fill(k, &c, 2, uniform_int64_range, st);
}
