/* Batching's figures in the Prometheus exposition, written at scrape time by a collector
 * (tfs__metrics_add_collector) from the loader's batch queues (tfs_loader_batch_stats), one
 * series per (model, version, signature) queue:
 *
 *   tfserve_batch_size                  histogram of the (padded) size of each batch run
 *   tfserve_batch_queue_delay_seconds   histogram of each task's wait from submit to its batch
 *   tfserve_batches_total               batches run; tfserve_batch_failures_total of those failed
 *   tfserve_batch_rows_total            request rows run; tfserve_batch_padding_rows_total added
 *   tfserve_batch_queue_depth           tasks waiting now
 *   tfserve_batch_rejections_total{reason}  queue_full (503 / UNAVAILABLE), invalid, deadline
 *                                       (DEADLINE_EXCEEDED before running), cancelled
 *
 * TF Serving's own batching metrics belong to its BatchFunction ops and thread pools (labels we
 * have no equivalent for), so these are ours. Each queue keeps its histograms itself, cumulative
 * like its counters and over every batch and task piece, so this file only writes them out: a
 * series lives exactly as long as its queue, and any number of scrapers see the same figures.
 */
#include <stdio.h>

#include "server/metrics-impl.h"

static struct {
    tfs_loader *loader;   /* under the scrape lock (collectors run under it) */
} b_;

/* The families, each gathered in its own buffer: a family's samples must be one group in the
 * exposition. */
enum { F_BATCHES, F_FAILURES, F_ROWS, F_PADDING, F_DEPTH, F_REJECT, F_SIZE, F_DELAY, N_FAM };
static const char *const fam_name[N_FAM] = {
    "tfserve_batches_total", "tfserve_batch_failures_total", "tfserve_batch_rows_total",
    "tfserve_batch_padding_rows_total", "tfserve_batch_queue_depth",
    "tfserve_batch_rejections_total", "tfserve_batch_size", "tfserve_batch_queue_delay_seconds"};
static const char *const fam_type[N_FAM] = {"counter", "counter", "counter",   "counter",
                                            "gauge",   "counter", "histogram", "histogram"};
static const char *const fam_help[N_FAM] = {
    "Batches run, per queue.", "Batches whose run failed.", "Request rows run in batches.",
    "Rows added to reach an allowed batch size.", "Tasks waiting in the queue.",
    "Tasks not run: queue_full (UNAVAILABLE), invalid, deadline, cancelled.",
    "Size of each batch run (padded).",
    "Wait of each task from submit to the start of its batch."};

typedef struct scrape {
    tfs__buf fam[N_FAM];
    double   size_limits[TFS_BATCH_SIZE_BOUNDS];
    double   delay_limits[TFS_BATCH_DELAY_BOUNDS];   /* seconds */
} scrape;

static void one_queue(void *ctx, const char *model, int64_t version, const char *sig,
                      const tfs_batch_queue_stats *st)
{
    scrape *sc = ctx;
    char    ver[24];
    snprintf(ver, sizeof ver, "%lld", (long long)version);
    tfs__prom_label lab[4] = {{"model", model}, {"version", ver}, {"signature", sig}, {0}};
    double v[F_REJECT] = {(double)st->batches_run, (double)st->batches_failed,
                          (double)st->rows_run, (double)st->padding_rows,
                          (double)st->queued_tasks};
    for (int f = 0; f < F_REJECT; f++)
        tfs__prom_sample(&sc->fam[f], fam_name[f], lab, 3, v[f]);
    const char *reasons[4] = {"queue_full", "invalid", "deadline", "cancelled"};
    int64_t     counts[4] = {st->rejected_full, st->rejected_invalid, st->deadline_exceeded,
                             st->cancelled};
    for (int i = 0; i < 4; i++) {
        lab[3] = (tfs__prom_label){"reason", reasons[i]};
        tfs__prom_sample(&sc->fam[F_REJECT], fam_name[F_REJECT], lab, 4, (double)counts[i]);
    }
    tfs__prom_histogram(&sc->fam[F_SIZE], fam_name[F_SIZE], lab, 3, sc->size_limits,
                        TFS_BATCH_SIZE_BOUNDS, st->batch_size_counts, (double)st->batch_size_sum);
    tfs__prom_histogram(&sc->fam[F_DELAY], fam_name[F_DELAY], lab, 3, sc->delay_limits,
                        TFS_BATCH_DELAY_BOUNDS, st->queue_delay_counts,
                        (double)st->queue_delay_sum_us / 1e6);
}

static void collect(tfs__buf *b, void *ctx)
{
    (void)ctx;
    if (!b_.loader)
        return;
    scrape sc;
    for (int f = 0; f < N_FAM; f++)
        tfs__buf_init(&sc.fam[f]);
    for (int i = 0; i < TFS_BATCH_SIZE_BOUNDS; i++)
        sc.size_limits[i] = (double)tfs_batch_size_bounds[i];
    for (int i = 0; i < TFS_BATCH_DELAY_BOUNDS; i++)
        sc.delay_limits[i] = (double)tfs_batch_delay_bounds_us[i] / 1e6;
    tfs_loader_batch_stats(b_.loader, one_queue, &sc);
    for (int f = 0; f < N_FAM; f++) {
        tfs__prom_header(b, fam_name[f], fam_type[f], fam_help[f]);
        if (sc.fam[f].data)
            tfs__buf_append(b, sc.fam[f].data, sc.fam[f].len);
        tfs__buf_deinit(&sc.fam[f]);
    }
}

void tfs__metrics_add_batching(tfs_loader *l)
{
    if (!l || !tfs_loader_batching(l) || b_.loader)
        return;
    b_.loader = l;
    tfs__metrics_add_collector(collect, NULL);
}

void tfs__metrics_batching_teardown(void)
{
    b_.loader = NULL;
}
