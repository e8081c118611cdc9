/* TensorBoard event files: Event protos (tensorflow/core/util/event.proto) framed as TFRecords,
 * written the way TensorFlow's EventsWriter and its HistogramSummary op write them, so TensorBoard
 * shows our scalars, histograms and graph.
 *
 * DESIGN. Scalars are TF1-style Summary.Value.simple_value, which every TensorBoard reads (its
 * data_compat layer turns them into scalar-plugin series). Histograms reproduce
 * tensorflow/core/lib/histogram: the default bucket limits are built by the same double
 * arithmetic (v = 1e-12; v *= 1.1 while v < 1e20, mirrored negative, 0, +-DBL_MAX), a value goes
 * to the first bucket whose limit is greater (upper_bound), and encoding collapses each run of
 * empty buckets into its last one; the HistogramProto is then bit-identical to TensorFlow's for
 * the same values. Events are packed into one buffer per call and handed to the TFRecord writer,
 * which masks the CRC32Cs; its stdio buffer batches the writes until flush.
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "savedmodel/checkpoint-impl.h"
#include "savedmodel/savedmodel-impl.h"
#include "tensorflow/core/util/event.pb-c.h"

#define FILE_VERSION "brain.Event:2"
#define WRITER_NAME  "tfserve"
/* 774 limits from 1e-12 to 1e20, times two, plus 0 and +-DBL_MAX. */
#define MAX_LIMITS 1600

struct tfs_events_writer {
    tfs_tfrecord_writer *rec;
    char                *path;
};

static double default_limits[MAX_LIMITS];
static int    n_default_limits;
static pthread_once_t limits_once = PTHREAD_ONCE_INIT;

static void init_default_limits(void)
{
    double pos[MAX_LIMITS / 2];
    int    np = 0, k = 0;
    for (double v = 1.0e-12; v < 1.0e20 && np < MAX_LIMITS / 2 - 1; v *= 1.1)
        pos[np++] = v;
    pos[np++] = DBL_MAX;
    for (int i = np - 1; i >= 0; i--)
        default_limits[k++] = -pos[i];
    default_limits[k++] = 0.0;
    for (int i = 0; i < np; i++)
        default_limits[k++] = pos[i];
    n_default_limits = k;
}

static double now_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Packs ev and appends it as one record. */
static enum tfs_code write_event(tfs_events_writer *w, const Tensorflow__Event *ev,
                                 tfs_status *st)
{
    size_t   n   = tensorflow__event__get_packed_size(ev);
    uint8_t *buf = tfs_malloc(n ? n : 1);
    if (!buf)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory for an event of %zu bytes",
                       w->path, n);
    tensorflow__event__pack(ev, buf);
    enum tfs_code rc = tfs_tfrecord_writer_write(w->rec, buf, n, st);
    tfs_free(buf);
    return rc;
}

enum tfs_code tfs_events_writer_open(const char *logdir, tfs_events_writer **out, tfs_status *st)
{
    tfs_events_writer     *w = NULL;
    Tensorflow__Event      ev  = TENSORFLOW__EVENT__INIT;
    Tensorflow__SourceMetadata src = TENSORFLOW__SOURCE_METADATA__INIT;
    char                   host[256], path[PATH_MAX];
    struct stat            sb;
    enum tfs_code          rc;

    *out = NULL;
    if (!logdir || !logdir[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "event files: empty log directory name");
    if ((rc = tfs__mkdirs(logdir, st)) != TFS_OK)
        return rc;
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    long long secs = (long long)time(NULL);
    /* TensorFlow's name; a writer opened in the same second on this host gets a suffix instead
     * of truncating the other's file. */
    for (int k = 0;; k++) {
        int len = k ? snprintf(path, sizeof path, "%s/events.out.tfevents.%010lld.%s.%d", logdir,
                               secs, host, k)
                    : snprintf(path, sizeof path, "%s/events.out.tfevents.%010lld.%s", logdir,
                               secs, host);
        if (len < 0 || (size_t)len >= sizeof path)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", logdir);
        if (stat(path, &sb) != 0)
            break;
        if (k == 1000)
            return TFS_ERR(st, TFS_ALREADY_EXISTS, "%s: event file names all taken", logdir);
    }
    if (!(w = tfs_calloc(1, sizeof *w)) || !(w->path = tfs_strdup(path))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", path);
        goto fail;
    }
    if ((rc = tfs_tfrecord_writer_open(path, &w->rec, st)) != TFS_OK)
        goto fail;
    ev.wall_time       = (double)secs;
    ev.what_case       = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
    ev.file_version    = FILE_VERSION;
    src.writer         = WRITER_NAME;
    ev.source_metadata = &src;
    if ((rc = write_event(w, &ev, st)) != TFS_OK ||
        (rc = tfs_tfrecord_writer_flush(w->rec, st)) != TFS_OK)
        goto fail;
    *out = w;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    if (w && w->rec) {
        tfs_tfrecord_writer_close(w->rec, NULL);
        unlink(path);
    }
    if (w)
        tfs_free(w->path);
    tfs_free(w);
    return rc;
}

const char *tfs_events_writer_path(const tfs_events_writer *w)
{
    return w->path;
}

static enum tfs_code check_tag(const tfs_events_writer *w, const char *tag, tfs_status *st)
{
    if (!tag || !tag[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: a summary needs a non-empty tag", w->path);
    return TFS_OK;
}

/* Writes an Event{wall_time now, step, summary{value}}. */
static enum tfs_code write_summary(tfs_events_writer *w, int64_t step,
                                   Tensorflow__Summary__Value *v, tfs_status *st)
{
    Tensorflow__Event   ev  = TENSORFLOW__EVENT__INIT;
    Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
    sum.n_value  = 1;
    sum.value    = &v;
    ev.wall_time = now_seconds();
    ev.step      = step;
    ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
    ev.summary   = &sum;
    return write_event(w, &ev, st);
}

enum tfs_code tfs_events_writer_scalar(tfs_events_writer *w, const char *tag, int64_t step,
                                       double value, tfs_status *st)
{
    Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT;
    enum tfs_code              rc;

    if ((rc = check_tag(w, tag, st)) != TFS_OK)
        return rc;
    v.tag          = (char *)tag;
    v.value_case   = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    return write_summary(w, step, &v, st);
}

/* Element i of a real-valued tensor as a double; false for dtypes a histogram does not take. */
static bool element(const tfs_tensor *t, int64_t i, double *out)
{
    const void *d = t->data;
    switch (t->dtype) {
    case TFS_DTYPE_FLOAT:  *out = ((const float *)d)[i]; return true;
    case TFS_DTYPE_DOUBLE: *out = ((const double *)d)[i]; return true;
    case TFS_DTYPE_INT8:   *out = ((const int8_t *)d)[i]; return true;
    case TFS_DTYPE_UINT8:  *out = ((const uint8_t *)d)[i]; return true;
    case TFS_DTYPE_INT16:  *out = ((const int16_t *)d)[i]; return true;
    case TFS_DTYPE_UINT16: *out = ((const uint16_t *)d)[i]; return true;
    case TFS_DTYPE_INT32:  *out = ((const int32_t *)d)[i]; return true;
    case TFS_DTYPE_UINT32: *out = ((const uint32_t *)d)[i]; return true;
    case TFS_DTYPE_INT64:  *out = (double)((const int64_t *)d)[i]; return true;
    case TFS_DTYPE_UINT64: *out = (double)((const uint64_t *)d)[i]; return true;
    default:               return false;
    }
}

/* Index of the first limit greater than x (std::upper_bound), capped at the last bucket: DBL_MAX
 * itself is not greater than the last limit, and TensorFlow would index past its array. */
static int bucket_of(double x)
{
    int lo = 0, hi = n_default_limits;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (default_limits[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < n_default_limits ? lo : n_default_limits - 1;
}

enum tfs_code tfs_events_writer_histogram(tfs_events_writer *w, const char *tag, int64_t step,
                                          const tfs_tensor *values, tfs_status *st)
{
    Tensorflow__Summary__Value v  = TENSORFLOW__SUMMARY__VALUE__INIT;
    Tensorflow__HistogramProto h  = TENSORFLOW__HISTOGRAM_PROTO__INIT;
    double                    *counts = NULL, *out_limits = NULL, *out_counts = NULL;
    enum tfs_code              rc;
    double                     x;

    if ((rc = check_tag(w, tag, st)) != TFS_OK)
        return rc;
    if (values->nelem > 0 && !element(values, 0, &x))
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: histogram '%s': dtype %s is not supported",
                       w->path, tag, tfs_dtype_name(values->dtype));
    pthread_once(&limits_once, init_default_limits);
    int nl = n_default_limits;
    if (!(counts = tfs_calloc((size_t)nl, sizeof *counts)) ||
        !(out_limits = tfs_malloc((size_t)nl * sizeof *out_limits)) ||
        !(out_counts = tfs_malloc((size_t)nl * sizeof *out_counts))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", w->path);
        goto done;
    }
    /* Histogram::Clear: min starts at the last limit, max at -DBL_MAX. */
    h.min = default_limits[nl - 1];
    h.max = -DBL_MAX;
    for (int64_t i = 0; i < values->nelem; i++) {
        element(values, i, &x);
        if (isnan(x) || isinf(x)) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s in summary histogram for: %s",
                         isnan(x) ? "Nan" : "Infinity", tag);
            goto done;
        }
        counts[bucket_of(x)] += 1.0;
        if (h.min > x)
            h.min = x;
        if (h.max < x)
            h.max = x;
        h.num += 1.0;
        h.sum += x;
        h.sum_squares += x * x;
    }
    /* Histogram::EncodeToProto(preserve_zero_buckets = false). */
    size_t nb = 0;
    for (int i = 0; i < nl;) {
        double end = default_limits[i], count = counts[i];
        i++;
        if (count <= 0.0) {
            while (i < nl && counts[i] <= 0.0) {
                end   = default_limits[i];
                count = counts[i];
                i++;
            }
        }
        out_limits[nb] = end;
        out_counts[nb] = count;
        nb++;
    }
    h.n_bucket_limit = h.n_bucket = nb;
    h.bucket_limit   = out_limits;
    h.bucket         = out_counts;
    v.tag            = (char *)tag;
    v.value_case     = TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO;
    v.histo          = &h;
    rc = write_summary(w, step, &v, st);
done:
    tfs_free(counts);
    tfs_free(out_limits);
    tfs_free(out_counts);
    return rc;
}

enum tfs_code tfs_events_writer_graph(tfs_events_writer *w, const tfs_graph *graph,
                                      tfs_status *st)
{
    Tensorflow__Event ev    = TENSORFLOW__EVENT__INIT;
    uint8_t          *bytes = NULL;
    size_t            n     = 0;
    enum tfs_code     rc;

    if ((rc = tfs__graph_def_pack(graph, &bytes, &n, st)) != TFS_OK) {
        tfs_status_prefix(st, "%s: graph", w->path);
        return rc;
    }
    ev.wall_time      = now_seconds();
    ev.what_case      = TENSORFLOW__EVENT__WHAT_GRAPH_DEF;
    ev.graph_def.data = bytes;
    ev.graph_def.len  = n;
    rc = write_event(w, &ev, st);
    tfs_free(bytes);
    return rc;
}

enum tfs_code tfs_events_writer_flush(tfs_events_writer *w, tfs_status *st)
{
    return tfs_tfrecord_writer_flush(w->rec, st);
}

enum tfs_code tfs_events_writer_close(tfs_events_writer *w, tfs_status *st)
{
    if (!w)
        return TFS_OK;
    enum tfs_code rc = tfs_tfrecord_writer_flush(w->rec, st);
    tfs_status    st2;
    enum tfs_code rc2 = tfs_tfrecord_writer_close(w->rec, &st2);
    if (rc == TFS_OK && rc2 != TFS_OK) {
        rc = rc2;
        if (st)
            *st = st2;
    }
    tfs_free(w->path);
    tfs_free(w);
    return rc;
}
