/* Philox4x32-10 and the generators of a session's stateful random ops (runtime/rng.c). Internal to
 * runtime/: kernels/random.c draws from them, session.c owns one table per (sub)session and
 * exposes the positions through tfs_session_rng_state_* (session.h).
 */
#ifndef TFS_RUNTIME_RNG_IMPL_H
#define TFS_RUNTIME_RNG_IMPL_H

#include "runtime/runtime-impl.h"

/* A position in a Philox4x32-10 stream, as TensorFlow's random::PhiloxRandom holds it. */
typedef struct tfs_philox {
    uint32_t key[2];
    uint32_t ctr[4];   /* 128-bit block counter, word 0 least significant */
} tfs_philox;

/* TensorFlow's PhiloxRandom(seed_lo, seed_hi): key = seed_lo, counter words 2-3 = seed_hi, the
 * rest 0. Random ops seed it with (attr seed, attr seed2). */
void tfs__philox_seed(tfs_philox *p, uint64_t seed_lo, uint64_t seed_hi);
/* Moves the counter `count` 128-bit blocks ahead (TensorFlow's PhiloxRandom::Skip). */
void tfs__philox_skip(tfs_philox *p, uint64_t count);
/* The bijection itself: out = Philox4x32-10(ctr, key) (Random123's philox4x32, 10 rounds). */
void tfs__philox_block(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* out = the block at p's position, and p moves one block ahead (PhiloxRandom::operator()). */
void tfs__philox_next(tfs_philox *p, uint32_t out[4]);

/* The generators of one session's graph: one per node whose op has TFS_OPF_RANDOM, each seeded
 * from the node's attrs seed and seed2 when first used. Thread-safe per generator. */
typedef struct tfs_rng_table tfs_rng_table;

/* A table for g's random nodes (none: an empty table). */
enum tfs_code tfs__rng_table_new(const tfs_graph *g, tfs_rng_table **out, tfs_status *st);
void tfs__rng_table_free(tfs_rng_table *t);   /* NULL-safe */
int  tfs__rng_table_count(const tfs_rng_table *t);   /* NULL-safe: 0 */
/* Node id of generator i (0 <= i < count), in increasing node order. */
int  tfs__rng_table_node(const tfs_rng_table *t, int i);
/* Generator i's current position; an unused generator is seeded first (see rng.c). */
void tfs__rng_table_get(tfs_rng_table *t, int i, tfs_philox *out);
/* Sets generator i's position (it counts as seeded from then on). */
void tfs__rng_table_set(tfs_rng_table *t, int i, const tfs_philox *p);
/* For kernels: reserves `count` blocks of node n's generator. *out = its position, and the stored
 * position moves count blocks ahead, as TensorFlow's GuardedPhiloxRandom::ReserveSamples128.
 * INTERNAL naming the node when the table has no generator for it. */
enum tfs_code tfs__rng_reserve(tfs_rng_table *t, const tfs_graph *g, const tfs_node *n,
                               uint64_t count, tfs_philox *out, tfs_status *st);

/* The table of the (sub)session a kernel runs in (session.c). */
tfs_rng_table *tfs__session_rng(tfs_session *s);

#endif
