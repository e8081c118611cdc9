/* A map from borrowed names to small non-negative ints, for the request checks that compare every
 * name of a request with a signature's or with each other (input aliases, output_filter,
 * MultiInference signatures, model names in a reload): a request may carry tens of thousands of
 * names, and a pairwise comparison of those held a gRPC thread for seconds. Open addressing with
 * linear probing over FNV-1a, sized once at init for at most n_max names (load factor <= 1/2), so
 * adding never rehashes. Up to 8 names live in the struct itself: the common request allocates
 * nothing.
 */
#include "runtime/alloc.h"
#include "server/server-impl.h"

enum tfs_code tfs__name_map_init(tfs__name_map *m, size_t n_max, tfs_status *st)
{
    size_t cap = sizeof m->inline_slots / sizeof m->inline_slots[0];
    memset(m, 0, sizeof *m);
    while (cap < 2 * n_max) {
        if (cap > SIZE_MAX / 4 / sizeof *m->slots)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%zu names is too many to index", n_max);
        cap *= 2;
    }
    m->slots = m->inline_slots;
    if (cap > sizeof m->inline_slots / sizeof m->inline_slots[0] &&
        !(m->slots = tfs_calloc(cap, sizeof *m->slots)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory indexing %zu names", n_max);
    m->mask = cap - 1;
    m->max = n_max;
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs__name_map_deinit(tfs__name_map *m)
{
    if (m && m->slots != m->inline_slots)
        tfs_free(m->slots);
    if (m)
        m->slots = NULL;
}

static size_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (size_t)(h ^ (h >> 32));
}

/* The slot holding name, or the empty slot where it would go. */
static tfs__name_map_slot *find(const tfs__name_map *m, const char *name)
{
    for (size_t i = hash(name) & m->mask;; i = (i + 1) & m->mask)
        if (!m->slots[i].name || strcmp(m->slots[i].name, name) == 0)
            return &m->slots[i];
}

int tfs__name_map_put(tfs__name_map *m, const char *name, int value)
{
    tfs__name_map_slot *s = find(m, name);
    if (s->name)
        return s->value;
    if (m->n >= m->max)   /* more than init promised: refuse rather than fill the table */
        return -2;
    s->name = name;
    s->value = value;
    m->n++;
    return -1;
}

int tfs__name_map_get(const tfs__name_map *m, const char *name)
{
    const tfs__name_map_slot *s = find(m, name);
    return s->name ? s->value : -1;
}
