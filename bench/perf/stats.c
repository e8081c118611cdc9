/* Latency statistics for tfserve-perf: the log-linear histogram each worker records into (see
 * perf.h for its error bound), the per-step counters (successes, errors by HTTP status or gRPC
 * code), and the step clock both load drivers share. Workers never share these structures while
 * a step runs; the driver merges them when the step's threads have joined. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "bench/perf/perf.h"
#include "runtime/alloc.h"

#define SUB_BITS 7                  /* 128 buckets per power of two above 256 */
#define SUB_HALF (1u << SUB_BITS)   /* 128 */
#define LINEAR   (2u * SUB_HALF)    /* values below 256 are counted exactly */

static int bucket_of(uint64_t v)
{
    if (v < LINEAR)
        return (int)v;
    int msb   = 63 - __builtin_clzll(v);
    int shift = msb - SUB_BITS;
    uint64_t sub = v >> shift; /* in [128, 256) */
    return (int)(LINEAR + (uint64_t)(shift - 1) * SUB_HALF + (sub - SUB_HALF));
}

/* The middle of bucket i's value range. */
static uint64_t bucket_mid(int i)
{
    if (i < (int)LINEAR)
        return (uint64_t)i;
    int      shift = (i - (int)LINEAR) / (int)SUB_HALF + 1;
    uint64_t sub   = (uint64_t)((i - (int)LINEAR) % (int)SUB_HALF) + SUB_HALF;
    uint64_t low   = sub << shift, width = (uint64_t)1 << shift;
    return low + (width - 1) / 2;
}

void tfs_perf_hist_init(tfs_perf_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

void tfs_perf_hist_record(tfs_perf_hist *h, uint64_t v)
{
    h->buckets[bucket_of(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void tfs_perf_hist_merge(tfs_perf_hist *into, const tfs_perf_hist *from)
{
    if (!from->count)
        return;
    for (int i = 0; i < TFS_PERF_HIST_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    into->sum += from->sum;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
}

uint64_t tfs_perf_hist_percentile(const tfs_perf_hist *h, double p)
{
    if (!h->count)
        return 0;
    double   r    = ceil(p / 100.0 * (double)h->count);
    uint64_t rank = r < 1 ? 1 : r > (double)h->count ? h->count : (uint64_t)r;
    uint64_t seen = 0;
    if (rank == h->count)
        return h->max; /* kept exactly */
    for (int i = 0; i < TFS_PERF_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = bucket_mid(i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

double tfs_perf_hist_mean(const tfs_perf_hist *h)
{
    return h->count ? h->sum / (double)h->count : 0.0;
}

void tfs_perf_stats_init(tfs_perf_stats *s)
{
    memset(s, 0, sizeof *s);
    tfs_perf_hist_init(&s->hist);
    tfs_perf_hist_init(&s->server_queue);
    tfs_perf_hist_init(&s->server_compute);
}

void tfs_perf_stats_merge(tfs_perf_stats *into, const tfs_perf_stats *from)
{
    tfs_perf_hist_merge(&into->hist, &from->hist);
    tfs_perf_hist_merge(&into->server_queue, &from->server_queue);
    tfs_perf_hist_merge(&into->server_compute, &from->server_compute);
    into->ok += from->ok;
    into->errors += from->errors;
    for (int i = 0; i < TFS_PERF_ERR_SLOTS; i++)
        into->err_by_slot[i] += from->err_by_slot[i];
    if (from->last_done_ns > into->last_done_ns)
        into->last_done_ns = from->last_done_ns;
}

void tfs_perf_stats_add(tfs_perf_stats *s, int slot, uint64_t latency_ns, uint64_t done_ns)
{
    if (slot < 0) {
        s->ok++;
        tfs_perf_hist_record(&s->hist, latency_ns);
    } else {
        s->errors++;
        s->err_by_slot[slot < TFS_PERF_ERR_SLOTS ? slot : 0]++;
    }
    if (done_ns > s->last_done_ns)
        s->last_done_ns = done_ns;
}

void tfs_perf_stats_add_server(tfs_perf_stats *s, int64_t queue_us, int64_t compute_us)
{
    if (queue_us >= 0)
        tfs_perf_hist_record(&s->server_queue, (uint64_t)queue_us);
    if (compute_us >= 0)
        tfs_perf_hist_record(&s->server_compute, (uint64_t)compute_us);
}

void tfs_perf_step_result_deinit(tfs_perf_step_result *r)
{
    if (!r)
        return;
    tfs_free(r->first_body);
    r->first_body = NULL;
    r->first_len  = 0;
}

uint64_t tfs_perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tfs_perf_clock_init(tfs_perf_clock *c, const tfs_perf_opts *o)
{
    c->start_ns = tfs_perf_now_ns();
    c->t0_ns    = c->start_ns + (uint64_t)(o->warmup_s * 1e9);
    c->t1_ns    = c->t0_ns + (uint64_t)(o->duration_s * 1e9);
    c->drain_ns = c->t1_ns + (uint64_t)(o->timeout_s * 1e9);
}

int tfs_perf_share(int n, int i, int n_workers)
{
    return n / n_workers + (i < n % n_workers ? 1 : 0);
}
