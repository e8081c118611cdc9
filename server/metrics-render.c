/* The Prometheus text exposition format (version 0.0.4) and the families tfserve exports.
 *
 * Names. TensorFlow Serving exports TensorFlow's monitoring metrics with every character outside
 * [a-zA-Z0-9_] replaced by ':' (util/prometheus_exporter.cc), and dashboards query those names,
 * so the request families keep them, with TF Serving's label names and values:
 *   :tensorflow:serving:request_count{model_name,status}      counter; status "OK" or the
 *       canonical code name ("INVALID_ARGUMENT"), as Code_Name writes it
 *   :tensorflow:serving:request_latency{model_name,API,entrypoint}   histogram, microseconds,
 *       buckets 10 * 1.8^k (k < 33) and +Inf; API "Predict" | "Classify" | "Regress" |
 *       "MultiInference", entrypoint "REST" | "GRPC"
 *   :tensorflow:serving:runtime_latency{model_name,API,runtime}      histogram, microseconds, the
 *       time in model runs; runtime "TF1" (TF Serving's value for a SavedModel session), only
 *       for requests that reached a run
 * Like TF Serving, these count only the inference APIs (Predict, Classify, Regress,
 * MultiInference). Ours, for every API request:
 *   tfserve_request_duration_seconds{model,signature,protocol,method,code}   histogram, seconds
 *   tfserve_requests_in_flight                                            gauge
 * from the loader (collector, when a loader is set):
 *   tfserve_models_loaded (AVAILABLE versions), tfserve_model_memory_bytes{model,version},
 *   tfserve_model_loads_total{result="ok"|"failed"}, tfserve_model_unloads_total,
 *   tfserve_model_load_seconds_total
 * and of the process: tfserve_process_cpu_seconds_total, tfserve_process_resident_memory_bytes,
 * tfserve_process_start_time_seconds. Batching's figures will come from a collector of its own
 * (tfs__metrics_add_collector), written after the loader's.
 *
 * and TensorFlow's SavedModel load counters, per version folder (tfs_loader_load_records):
 *   :tensorflow:cc:saved_model:load_attempt_count{model_path,status}   counter; status "success"
 *       or "fail", as TensorFlow's loader counts them
 *   :tensorflow:cc:saved_model:load_latency{model_path}   counter, microseconds of the successful
 *       loads (the SavedModel load itself, not the warmup)
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "server/metrics-impl.h"

#define MAX_COLLECTORS 8

static struct {
    pthread_mutex_t mu;   /* serialises scrapes and guards the fields below */
    struct {
        tfs__metrics_collector fn;
        void                  *ctx;
    } collectors[MAX_COLLECTORS];
    int         n_collectors;
    tfs_loader *loader;
    bool        loader_registered;
} r_ = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* r_.loader again, for tfs__metrics_model_served on the recording path, which must not wait for
 * a scrape holding r_.mu. */
static _Atomic(tfs_loader *) served_loader;

/* ---- the text format ------------------------------------------------------------------------ */

void tfs__prom_escape(tfs__buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\\': tfs__buf_puts(b, "\\\\"); break;
        case '"':  tfs__buf_puts(b, "\\\""); break;
        case '\n': tfs__buf_puts(b, "\\n"); break;
        default:   tfs__buf_putc(b, *s); break;
        }
    }
}

void tfs__prom_header(tfs__buf *b, const char *name, const char *type, const char *help)
{
    tfs__buf_printf(b, "# HELP %s ", name);
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            tfs__buf_puts(b, "\\\\");
        else if (*p == '\n')
            tfs__buf_puts(b, "\\n");
        else
            tfs__buf_putc(b, *p);
    }
    tfs__buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

/* The shortest of %.15g, %.16g, %.17g that reads back as v. */
static void put_double(tfs__buf *b, double v)
{
    if (isnan(v)) {
        tfs__buf_puts(b, "NaN");
        return;
    }
    if (isinf(v)) {
        tfs__buf_puts(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char text[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(text, sizeof text, "%.*g", prec, v);
        if (strtod(text, NULL) == v)
            break;
    }
    tfs__buf_puts(b, text);
}

static void put_labels(tfs__buf *b, const tfs__prom_label *labels, int n, const char *le)
{
    if (n == 0 && !le)
        return;
    tfs__buf_putc(b, '{');
    for (int i = 0; i < n; i++) {
        tfs__buf_printf(b, "%s%s=\"", i ? "," : "", labels[i].name);
        tfs__prom_escape(b, labels[i].value);
        tfs__buf_putc(b, '"');
    }
    if (le)
        tfs__buf_printf(b, "%sle=\"%s\"", n ? "," : "", le);
    tfs__buf_putc(b, '}');
}

void tfs__prom_sample(tfs__buf *b, const char *name, const tfs__prom_label *labels, int n,
                      double value)
{
    tfs__buf_puts(b, name);
    put_labels(b, labels, n, NULL);
    tfs__buf_putc(b, ' ');
    put_double(b, value);
    tfs__buf_putc(b, '\n');
}

void tfs__prom_histogram(tfs__buf *b, const char *name, const tfs__prom_label *labels, int n,
                         const double *limits, int n_limits, const uint64_t *counts, double sum)
{
    uint64_t cum = 0;
    char     le[40];
    for (int i = 0; i <= n_limits; i++) {
        cum += counts[i];
        if (i < n_limits)
            snprintf(le, sizeof le, "%.15g", limits[i]);   /* a label: short beats exact */
        else
            strcpy(le, "+Inf");
        tfs__buf_printf(b, "%s_bucket", name);
        put_labels(b, labels, n, le);
        tfs__buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
    tfs__buf_printf(b, "%s_sum", name);
    put_labels(b, labels, n, NULL);
    tfs__buf_putc(b, ' ');
    put_double(b, sum);
    tfs__buf_printf(b, "\n%s_count", name);
    put_labels(b, labels, n, NULL);
    tfs__buf_printf(b, " %llu\n", (unsigned long long)cum);
}

/* ---- request families ----------------------------------------------------------------------- */

enum which { LATENCY, RUNTIME, DURATION };

#define MAX_LABELS 5

/* A row's label values in one family; rows with equal values are summed. */
typedef struct group {
    const char             *v[MAX_LABELS];
    int                     n;
    const tfs__metrics_row *row;
} group;

typedef bool (*labeler)(const tfs__metrics_row *r, const char **v);

static int group_cmp(const void *a, const void *b)
{
    const group *x = a, *y = b;
    for (int i = 0; i < x->n; i++) {
        int c = strcmp(x->v[i], y->v[i]);
        if (c)
            return c;
    }
    return 0;
}

static const char *tf_api(enum tfs__method m)
{
    switch (m) {
    case TFS__METHOD_PREDICT:         return "Predict";
    case TFS__METHOD_CLASSIFY:        return "Classify";
    case TFS__METHOD_REGRESS:         return "Regress";
    case TFS__METHOD_MULTI_INFERENCE: return "MultiInference";
    default:                          return NULL;
    }
}

static bool label_tf_count(const tfs__metrics_row *r, const char **v)
{
    v[0] = r->model;
    v[1] = tfs_code_name(r->code);
    return tf_api(r->method) != NULL;
}

static bool label_tf_latency(const tfs__metrics_row *r, const char **v)
{
    v[0] = r->model;
    v[1] = tf_api(r->method);
    v[2] = r->api == TFS_API_GRPC ? "GRPC" : "REST";
    return v[1] != NULL;
}

static bool label_tf_runtime(const tfs__metrics_row *r, const char **v)
{
    v[0] = r->model;
    v[1] = tf_api(r->method);
    v[2] = "TF1";
    return v[1] != NULL;
}

static bool label_ours(const tfs__metrics_row *r, const char **v)
{
    v[0] = r->model;
    v[1] = r->signature;
    if (tfs__method_is_v2(r->method))
        v[2] = r->api == TFS_API_GRPC ? "v2-grpc" : "v2-rest";
    else
        v[2] = r->api == TFS_API_GRPC ? "grpc" : "rest";
    v[3] = tfs__method_name(r->method);
    v[4] = tfs_code_name(r->code);
    return true;
}

typedef struct family {
    const char *name;
    const char *type;   /* "counter" or "histogram" */
    const char *help;
    const char *labels[MAX_LABELS];
    int         n_labels;
    labeler     fn;
    enum which  which;
} family;

static const family families[] = {
    {":tensorflow:serving:request_count", "counter", "The total number of requests.",
     {"model_name", "status"}, 2, label_tf_count, LATENCY},
    {":tensorflow:serving:request_latency", "histogram",
     "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
     {"model_name", "API", "entrypoint"}, 3, label_tf_latency, LATENCY},
    {":tensorflow:serving:runtime_latency", "histogram",
     "Distribution of wall time (in microseconds) for Tensorflow runtime.",
     {"model_name", "API", "runtime"}, 3, label_tf_runtime, RUNTIME},
    {"tfserve_request_duration_seconds", "histogram",
     "Time from the start of answering an API request to its answer, in seconds.",
     {"model", "signature", "protocol", "method", "code"}, 5, label_ours, DURATION},
};

/* Accumulates the chosen histogram of a row into counts/sum. */
static void add_row(const tfs__metrics_row *r, enum which w, uint64_t *counts, uint64_t *sum_ns)
{
    switch (w) {
    case LATENCY:
        for (int i = 0; i < TFS__TF_BUCKETS; i++)
            counts[i] += r->latency[i];
        *sum_ns += r->latency_sum_ns;
        break;
    case RUNTIME:
        for (int i = 0; i < TFS__TF_BUCKETS; i++)
            counts[i] += r->runtime[i];
        *sum_ns += r->runtime_sum_ns;
        break;
    case DURATION:
        for (int i = 0; i < TFS__DUR_BUCKETS; i++)
            counts[i] += r->duration[i];
        *sum_ns += r->latency_sum_ns;
        break;
    }
}

static void write_group(tfs__buf *b, const family *f, const group *gr, const uint64_t *counts,
                        uint64_t sum_ns)
{
    tfs__prom_label labels[MAX_LABELS];
    uint64_t        total = 0;
    int             nb = f->which == DURATION ? TFS__DUR_BUCKETS : TFS__TF_BUCKETS;
    for (int i = 0; i < nb; i++)
        total += counts[i];
    if (total == 0)
        return;   /* e.g. no run reached the model: no runtime series */
    for (int i = 0; i < f->n_labels; i++) {
        labels[i].name = f->labels[i];
        labels[i].value = gr->v[i];
    }
    if (strcmp(f->type, "counter") == 0)
        tfs__prom_sample(b, f->name, labels, f->n_labels, (double)total);
    else if (f->which == DURATION)
        tfs__prom_histogram(b, f->name, labels, f->n_labels, tfs__dur_bucket_limits, nb - 1,
                            counts, (double)sum_ns / 1e9);
    else
        tfs__prom_histogram(b, f->name, labels, f->n_labels, tfs__tf_bucket_limits, nb - 1,
                            counts, (double)sum_ns / 1e3);
}

static void write_family(tfs__buf *b, const family *f, const tfs__metrics_snapshot *s,
                         group *groups)
{
    int n = 0;
    tfs__prom_header(b, f->name, f->type, f->help);
    for (int i = 0; i < s->n; i++) {
        group *gr = &groups[n];
        gr->n = f->n_labels;
        gr->row = &s->rows[i];
        if (f->fn(&s->rows[i], gr->v))
            n++;
    }
    qsort(groups, (size_t)n, sizeof *groups, group_cmp);
    for (int i = 0; i < n;) {
        uint64_t counts[TFS__TF_BUCKETS] = {0}, sum_ns = 0;
        int      j = i;
        for (; j < n && group_cmp(&groups[i], &groups[j]) == 0; j++)
            add_row(groups[j].row, f->which, counts, &sum_ns);
        write_group(b, f, &groups[i], counts, sum_ns);
        i = j;
    }
}

/* ---- loader and process --------------------------------------------------------------------- */

typedef struct load_pass {
    tfs__buf *b;
    bool      latency;   /* load_latency; else load_attempt_count */
} load_pass;

static void load_record_row(void *ctx, const char *path, int64_t ok, int64_t failed, int64_t us)
{
    const load_pass *p = ctx;
    if (p->latency) {
        tfs__prom_label lab = {"model_path", path};
        if (ok > 0)
            tfs__prom_sample(p->b, ":tensorflow:cc:saved_model:load_latency", &lab, 1,
                             (double)us);
        return;
    }
    tfs__prom_label lab[2] = {{"model_path", path}, {"status", "success"}};
    if (ok > 0)
        tfs__prom_sample(p->b, ":tensorflow:cc:saved_model:load_attempt_count", lab, 2,
                         (double)ok);
    lab[1].value = "fail";
    if (failed > 0)
        tfs__prom_sample(p->b, ":tensorflow:cc:saved_model:load_attempt_count", lab, 2,
                         (double)failed);
}

static void load_records(tfs__buf *b, tfs_loader *l)
{
    load_pass p = {b, false};
    tfs__prom_header(b, ":tensorflow:cc:saved_model:load_attempt_count", "counter",
                     "The number of times a SavedModel was successfully loaded.");
    tfs_loader_load_records(l, load_record_row, &p);
    p.latency = true;
    tfs__prom_header(b, ":tensorflow:cc:saved_model:load_latency", "counter",
                     "Latency in microseconds for SavedModels that were successfully loaded.");
    tfs_loader_load_records(l, load_record_row, &p);
}

static void loader_collector(tfs__buf *b, void *ctx)
{
    tfs_loader      *l = r_.loader;   /* under r_.mu */
    tfs_loader_stats ls;
    char           **names = NULL;
    int              n_names = 0;
    (void)ctx;
    if (!l)
        return;
    tfs_loader_get_stats(l, &ls);
    tfs__prom_header(b, "tfserve_models_loaded", "gauge", "Model versions serving (AVAILABLE).");
    tfs__prom_sample(b, "tfserve_models_loaded", NULL, 0, ls.versions_available);
    tfs__prom_header(b, "tfserve_model_memory_bytes", "gauge",
                     "Bytes of tensors held by an AVAILABLE model version.");
    if (tfs_loader_model_names(l, &names, &n_names, NULL) == TFS_OK) {
        for (int i = 0; i < n_names; i++) {
            tfs_version_status *vs = NULL;
            int                 n_vs = 0;
            if (tfs_loader_model_status(l, names[i], -1, &vs, &n_vs, NULL) != TFS_OK)
                continue;
            for (int k = 0; k < n_vs; k++) {
                if (vs[k].state != TFS_VERSION_AVAILABLE)
                    continue;
                char ver[24];
                snprintf(ver, sizeof ver, "%lld", (long long)vs[k].version);
                tfs__prom_label lab[2] = {{"model", names[i]}, {"version", ver}};
                tfs__prom_sample(b, "tfserve_model_memory_bytes", lab, 2,
                                 (double)vs[k].memory_bytes);
            }
            tfs_free(vs);
        }
        tfs_loader_names_free(names, n_names);
    }
    tfs__prom_header(b, "tfserve_model_loads_total", "counter",
                     "Model version load attempts since start, by result.");
    tfs__prom_label ok = {"result", "ok"}, failed = {"result", "failed"};
    tfs__prom_sample(b, "tfserve_model_loads_total", &ok, 1, (double)ls.loads_ok);
    tfs__prom_sample(b, "tfserve_model_loads_total", &failed, 1, (double)ls.loads_failed);
    tfs__prom_header(b, "tfserve_model_unloads_total", "counter",
                     "Model versions unloaded since start.");
    tfs__prom_sample(b, "tfserve_model_unloads_total", NULL, 0, (double)ls.unloads);
    tfs__prom_header(b, "tfserve_model_load_seconds_total", "counter",
                     "Time spent loading model versions (incl. warmup), in seconds.");
    tfs__prom_sample(b, "tfserve_model_load_seconds_total", NULL, 0, ls.load_seconds_total);
    load_records(b, l);
}

/* /proc/self/stat fields after the ")" closing the command name: utime is the 12th, stime the
 * 13th, starttime the 20th (fields 14, 15 and 22 of proc(5)). */
static bool proc_stat(double *cpu_seconds, double *start_unix)
{
    char  buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return false;
    unsigned long long v[21] = {0};
    int                k = 0;
    for (char *tok = strtok(p + 1, " "); tok && k < 21; tok = strtok(NULL, " "))
        v[k++] = strtoull(tok, NULL, 10);
    if (k < 21)
        return false;
    double tck = (double)sysconf(_SC_CLK_TCK);
    *cpu_seconds = (double)(v[11] + v[12]) / tck;
    /* starttime is in ticks since boot; boot time is /proc/stat's btime. */
    *start_unix = 0;
    FILE *s = fopen("/proc/stat", "r");
    if (s) {
        char line[256];
        while (fgets(line, sizeof line, s)) {
            if (strncmp(line, "btime ", 6) == 0) {
                *start_unix = (double)strtoull(line + 6, NULL, 10) + (double)v[19] / tck;
                break;
            }
        }
        fclose(s);
    }
    return true;
}

static void process_figures(tfs__buf *b)
{
    double cpu, start;
    if (proc_stat(&cpu, &start)) {
        tfs__prom_header(b, "tfserve_process_cpu_seconds_total", "counter",
                         "User and system CPU time of the process, in seconds.");
        tfs__prom_sample(b, "tfserve_process_cpu_seconds_total", NULL, 0, cpu);
        if (start > 0) {
            tfs__prom_header(b, "tfserve_process_start_time_seconds", "gauge",
                             "Start time of the process since the Unix epoch, in seconds.");
            tfs__prom_sample(b, "tfserve_process_start_time_seconds", NULL, 0, start);
        }
    }
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long long size, resident;
        if (fscanf(f, "%llu %llu", &size, &resident) == 2) {
            tfs__prom_header(b, "tfserve_process_resident_memory_bytes", "gauge",
                             "Resident memory of the process, in bytes.");
            tfs__prom_sample(b, "tfserve_process_resident_memory_bytes", NULL, 0,
                             (double)resident * (double)sysconf(_SC_PAGESIZE));
        }
        fclose(f);
    }
}

/* ---- entry points --------------------------------------------------------------------------- */

void tfs__metrics_add_collector(tfs__metrics_collector fn, void *ctx)
{
    pthread_mutex_lock(&r_.mu);
    if (r_.n_collectors < MAX_COLLECTORS) {
        r_.collectors[r_.n_collectors].fn = fn;
        r_.collectors[r_.n_collectors].ctx = ctx;
        r_.n_collectors++;
    }
    pthread_mutex_unlock(&r_.mu);
}

void tfs__metrics_set_loader(tfs_loader *l)
{
    bool add;
    pthread_mutex_lock(&r_.mu);
    r_.loader = l;
    atomic_store(&served_loader, l);
    add = l && !r_.loader_registered;
    if (add)
        r_.loader_registered = true;
    if (!l) {
        /* Teardown: forget every collector (they may point at freed modules). */
        r_.n_collectors = 0;
        r_.loader_registered = false;
    }
    pthread_mutex_unlock(&r_.mu);
    if (add)
        tfs__metrics_add_collector(loader_collector, NULL);
}

bool tfs__metrics_model_served(const char *name)
{
    tfs_loader *l = atomic_load(&served_loader);
    char      **names = NULL;
    int         n = 0;
    bool        found = false;
    if (!l || !*name)
        return true;
    if (tfs_loader_model_names(l, &names, &n, NULL) != TFS_OK)
        return false;   /* out of memory: the bounded answer */
    /* A record keeps TFS__LABEL_MAX - 1 bytes of a name: a longer served name matches its cut. */
    size_t cut = strlen(name) >= TFS__LABEL_MAX - 1 ? TFS__LABEL_MAX - 1 : (size_t)-1;
    for (int i = 0; i < n && !found; i++)
        found = cut == (size_t)-1 ? strcmp(names[i], name) == 0
                                  : strncmp(names[i], name, cut) == 0;
    tfs_loader_names_free(names, n);
    return found;
}

bool tfs__metrics_signature_served(const char *model, const char *signature)
{
    tfs_loader   *l = atomic_load(&served_loader);
    tfs_servable *s = NULL;
    if (!l || !*signature)
        return true;
    if (tfs_loader_acquire(l, model, -1, NULL, &s, NULL) != TFS_OK)
        return false;
    bool found = tfs_savedmodel_signature(tfs_servable_model(s), signature) != NULL;
    tfs_servable_release(s);
    return found;
}

enum tfs_code tfs__metrics_render(tfs__buf *out, tfs_status *st)
{
    tfs__metrics_snapshot s;
    enum tfs_code         code;

    pthread_mutex_lock(&r_.mu);
    if ((code = tfs__metrics_snapshot_take(&s, st)) != TFS_OK)
        goto done;
    group *groups = tfs_calloc((size_t)(s.n > 0 ? s.n : 1), sizeof *groups);
    if (!groups) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing the metrics");
        goto done;
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        write_family(out, &families[i], &s, groups);
    tfs_free(groups);
    tfs__prom_header(out, "tfserve_requests_in_flight", "gauge",
                     "API requests being answered now.");
    tfs__prom_sample(out, "tfserve_requests_in_flight", NULL, 0, (double)s.in_flight);
    for (int i = 0; i < r_.n_collectors; i++)
        r_.collectors[i].fn(out, r_.collectors[i].ctx);
    process_figures(out);
    if (out->oom)
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory writing the metrics");
done:
    pthread_mutex_unlock(&r_.mu);
    tfs__metrics_snapshot_deinit(&s);
    return code;
}
