/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
 * Random123 library's philox4x32 with 10 rounds) and the per-session generator table of the
 * stateful random ops (rng-impl.h).
 *
 * DESIGN. TensorFlow keeps one GuardedPhiloxRandom per random-op kernel, and a kernel lives as long
 * as the session (or eager context) that made it: successive runs continue one stream. We keep the
 * same state per (session, node) here, in a table the session creates with its graph, so the
 * kernels stay stateless. A generator is seeded from the node's attrs at its first use exactly as
 * TensorFlow seeds it -- key = seed, counter words 2-3 = seed2, and two random 64-bit seeds when
 * both attrs are 0 -- and each run reserves a block range under the generator's own mutex, so
 * concurrent runs draw disjoint numbers. Positions can be read and written (session.h) so that a
 * trainer checkpoints them and a resumed run continues the same streams.
 */
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "runtime/rng-impl.h"

/* ---- Philox4x32-10 -------------------------------------------------------------------------- */

#define PHILOX_M0 0xD2511F53u   /* round multipliers */
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u   /* key schedule increments (golden ratio, sqrt(3) - 1) */
#define PHILOX_W1 0xBB67AE85u

void tfs__philox_seed(tfs_philox *p, uint64_t seed_lo, uint64_t seed_hi)
{
    p->key[0] = (uint32_t)seed_lo;
    p->key[1] = (uint32_t)(seed_lo >> 32);
    p->ctr[0] = 0;
    p->ctr[1] = 0;
    p->ctr[2] = (uint32_t)seed_hi;
    p->ctr[3] = (uint32_t)(seed_hi >> 32);
}

void tfs__philox_skip(tfs_philox *p, uint64_t count)
{
    /* 128-bit counter += count, with the carry out of word 1 rippling into words 2 and 3. */
    uint64_t lo = ((uint64_t)p->ctr[1] << 32 | p->ctr[0]);
    uint64_t sum = lo + count;
    p->ctr[0] = (uint32_t)sum;
    p->ctr[1] = (uint32_t)(sum >> 32);
    if (sum < lo && ++p->ctr[2] == 0)
        ++p->ctr[3];
}

void tfs__philox_block(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void tfs__philox_next(tfs_philox *p, uint32_t out[4])
{
    tfs__philox_block(p->ctr, p->key, out);
    tfs__philox_skip(p, 1);
}

/* ---- the generator table -------------------------------------------------------------------- */

typedef struct rng_gen {
    pthread_mutex_t mu;
    int             node;
    uint64_t        seed, seed2;   /* the node's attrs, as TensorFlow casts them */
    bool            seeded;
    tfs_philox      pos;
} rng_gen;

struct tfs_rng_table {
    int      n;
    rng_gen *gens;   /* sorted by node id */
};

/* A 64-bit seed from the OS (TensorFlow's random::New64 for unseeded ops). */
static uint64_t random_seed64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    /* No entropy source: mix the clock and an address (splitmix64's finalizer). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&ts;
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    return v ^ (v >> 31);
}

/* An int attr, 0 when absent or of another kind (TensorFlow's default for seed and seed2; the
 * kernels report a malformed attr themselves). */
static uint64_t seed_attr(const tfs_node *n, const char *name)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    return v && v->kind == TFS_ATTR_I ? (uint64_t)v->i : 0;
}

enum tfs_code tfs__rng_table_new(const tfs_graph *g, tfs_rng_table **out, tfs_status *st)
{
    *out = NULL;
    tfs_rng_table *t = tfs_calloc(1, sizeof *t);
    if (!t)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating random generators");
    int count = 0;
    for (int id = 0; id < g->n_nodes; id++)
        if (g->nodes[id].op && (g->nodes[id].op->flags & TFS_OPF_RANDOM))
            count++;
    if (count > 0) {
        t->gens = tfs_calloc((size_t)count, sizeof *t->gens);
        if (!t->gens) {
            tfs_free(t);
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating random generators");
        }
    }
    for (int id = 0; id < g->n_nodes; id++) {
        const tfs_node *n = &g->nodes[id];
        if (!n->op || !(n->op->flags & TFS_OPF_RANDOM))
            continue;
        rng_gen *gen = &t->gens[t->n];
        if (pthread_mutex_init(&gen->mu, NULL) != 0) {
            tfs__rng_table_free(t);
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot create a random generator mutex");
        }
        t->n++;
        gen->node = id;
        gen->seed = seed_attr(n, "seed");
        gen->seed2 = seed_attr(n, "seed2");
    }
    *out = t;
    return TFS_OK;
}

void tfs__rng_table_free(tfs_rng_table *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++)
        pthread_mutex_destroy(&t->gens[i].mu);
    tfs_free(t->gens);
    tfs_free(t);
}

int tfs__rng_table_count(const tfs_rng_table *t)
{
    return t ? t->n : 0;
}

int tfs__rng_table_node(const tfs_rng_table *t, int i)
{
    TFS_ASSERT(t && i >= 0 && i < t->n);
    return t->gens[i].node;
}

/* With gen->mu held: seeds an unused generator as TensorFlow's GuardedPhiloxRandom::Init. */
static void ensure_seeded(rng_gen *gen)
{
    if (gen->seeded)
        return;
    uint64_t seed = gen->seed, seed2 = gen->seed2;
    if (seed == 0 && seed2 == 0) {
        seed = random_seed64();
        seed2 = random_seed64();
    }
    tfs__philox_seed(&gen->pos, seed, seed2);
    gen->seeded = true;
}

void tfs__rng_table_get(tfs_rng_table *t, int i, tfs_philox *out)
{
    TFS_ASSERT(t && i >= 0 && i < t->n);
    rng_gen *gen = &t->gens[i];
    pthread_mutex_lock(&gen->mu);
    ensure_seeded(gen);
    *out = gen->pos;
    pthread_mutex_unlock(&gen->mu);
}

void tfs__rng_table_set(tfs_rng_table *t, int i, const tfs_philox *p)
{
    TFS_ASSERT(t && i >= 0 && i < t->n);
    rng_gen *gen = &t->gens[i];
    pthread_mutex_lock(&gen->mu);
    gen->pos = *p;
    gen->seeded = true;
    pthread_mutex_unlock(&gen->mu);
}

static int cmp_gen_node(const void *key, const void *elem)
{
    int a = *(const int *)key, b = ((const rng_gen *)elem)->node;
    return (a > b) - (a < b);
}

enum tfs_code tfs__rng_reserve(tfs_rng_table *t, const tfs_graph *g, const tfs_node *n,
                               uint64_t count, tfs_philox *out, tfs_status *st)
{
    int id = (int)(n - g->nodes);
    rng_gen *gen = t && t->n > 0 ? bsearch(&id, t->gens, (size_t)t->n, sizeof *t->gens,
                                           cmp_gen_node)
                                 : NULL;
    if (!gen)
        return tfs__node_err(n, st, TFS_INTERNAL, "the session has no random generator for it");
    pthread_mutex_lock(&gen->mu);
    ensure_seeded(gen);
    *out = gen->pos;
    tfs__philox_skip(&gen->pos, count);
    pthread_mutex_unlock(&gen->mu);
    return TFS_OK;
}
