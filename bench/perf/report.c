/* Results of tfserve-perf: the table on stdout (one row per step), the same rows as CSV and JSON
 * files, and the checks of the first response (--check, --expect-json). Latencies are printed in
 * microseconds from the merged histogram of the step. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/perf/perf.h"
#include "runtime/alloc.h"

static const char *grpc_code_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

static const char *slot_name(int slot, enum tfs_perf_protocol proto, char *buf, size_t cap)
{
    if (slot == 0)
        return "transport";
    if (proto == TFS_PERF_GRPC && slot < (int)(sizeof grpc_code_names / sizeof grpc_code_names[0]))
        return grpc_code_names[slot];
    snprintf(buf, cap, "%d", slot);
    return buf;
}

void tfs_perf_errors_text(const tfs_perf_stats *s, enum tfs_perf_protocol proto, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < TFS_PERF_ERR_SLOTS && n < cap; i++) {
        if (!s->err_by_slot[i])
            continue;
        char num[16];
        int w = snprintf(buf + n, cap - n, "%s%s:%llu", n ? " " : "", slot_name(i, proto, num, sizeof num),
                         (unsigned long long)s->err_by_slot[i]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

void tfs_perf_report_header(FILE *f, const tfs_perf_opts *o)
{
    fprintf(f, "tfserve-perf: %s %s:%d model %s%s%s, %d thread(s), warmup %gs, %gs per step\n",
            o->protocol == TFS_PERF_REST ? "rest" : "grpc", o->host, o->port, o->model,
            o->signature[0] ? " signature " : "", o->signature, o->threads, o->warmup_s, o->duration_s);
    fprintf(f, "%-11s %8s %11s %9s %9s %9s %9s %9s %9s  %s\n", "mode", "value", "req/s", "p50_us",
            "p90_us", "p99_us", "max_us", "ok", "errors", "error_detail");
    fflush(f);
}

void tfs_perf_report_row(FILE *f, const tfs_perf_step_result *r, enum tfs_perf_protocol proto)
{
    char det[512], val[32];
    const tfs_perf_hist *h = &r->stats.hist;
    tfs_perf_errors_text(&r->stats, proto, det, sizeof det);
    if (r->step.open_loop)
        snprintf(val, sizeof val, "%g", r->step.rate);
    else
        snprintf(val, sizeof val, "%d", r->step.concurrency);
    fprintf(f, "%-11s %8s %11.1f %9.1f %9.1f %9.1f %9.1f %9llu %9llu  %s\n",
            r->step.open_loop ? "rate" : "concurrency", val, r->throughput,
            us(tfs_perf_hist_percentile(h, 50)), us(tfs_perf_hist_percentile(h, 90)),
            us(tfs_perf_hist_percentile(h, 99)), us(h->count ? h->max : 0),
            (unsigned long long)r->stats.ok, (unsigned long long)r->stats.errors, det);
    const tfs_perf_hist *q = &r->stats.server_queue, *c = &r->stats.server_compute;
    if (q->count || c->count) /* tfserve's timing headers: where the latency went */
        fprintf(f, "%-11s %8s %11s   server: queue p50 %.0f p99 %.0f us, compute p50 %.0f p99 %.0f "
                   "us (%llu responses)\n", "", "", "", (double)tfs_perf_hist_percentile(q, 50),
                (double)tfs_perf_hist_percentile(q, 99), (double)tfs_perf_hist_percentile(c, 50),
                (double)tfs_perf_hist_percentile(c, 99), (unsigned long long)c->count);
    fflush(f);
}

/* A percentile of a histogram of the server's headers as CSV text: empty when none came. */
static const char *server_us(const tfs_perf_hist *h, double p, char buf[24])
{
    if (!h->count)
        return "";
    snprintf(buf, 24, "%llu", (unsigned long long)tfs_perf_hist_percentile(h, p));
    return buf;
}

enum tfs_code tfs_perf_report_csv(const char *path, const tfs_perf_opts *o,
                                  const tfs_perf_step_result *rs, int n, tfs_status *st)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return TFS_ERR(st, TFS_PERMISSION_DENIED, "cannot write '%s'", path);
    fprintf(f, "protocol,model,mode,value,duration_s,throughput_rps,p50_us,p90_us,p99_us,max_us,"
               "mean_us,ok,errors,error_detail,server_queue_p50_us,server_queue_p99_us,"
               "server_compute_p50_us,server_compute_p99_us\n");
    for (int i = 0; i < n; i++) {
        const tfs_perf_step_result *r = &rs[i];
        const tfs_perf_hist *h = &r->stats.hist;
        char det[512], q50[24], q99[24], c50[24], c99[24];
        tfs_perf_errors_text(&r->stats, o->protocol, det, sizeof det);
        const tfs_perf_hist *q = &r->stats.server_queue, *sc = &r->stats.server_compute;
        fprintf(f, "%s,%s,%s,%g,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%llu,%llu,%s,%s,%s,%s,%s\n",
                o->protocol == TFS_PERF_REST ? "rest" : "grpc", o->model,
                r->step.open_loop ? "rate" : "concurrency",
                r->step.open_loop ? r->step.rate : (double)r->step.concurrency, r->elapsed_s,
                r->throughput, us(tfs_perf_hist_percentile(h, 50)), us(tfs_perf_hist_percentile(h, 90)),
                us(tfs_perf_hist_percentile(h, 99)), us(h->count ? h->max : 0),
                tfs_perf_hist_mean(h) / 1000.0, (unsigned long long)r->stats.ok,
                (unsigned long long)r->stats.errors, det, server_us(q, 50, q50),
                server_us(q, 99, q99), server_us(sc, 50, c50), server_us(sc, 99, c99));
    }
    if (fclose(f) != 0)
        return TFS_ERR(st, TFS_DATA_LOSS, "writing '%s' failed", path);
    return TFS_OK;
}

enum tfs_code tfs_perf_report_json(const char *path, const tfs_perf_opts *o,
                                   const tfs_perf_step_result *rs, int n, tfs_status *st)
{
    json_t *root = json_object(), *steps = json_array();
    enum tfs_code c = TFS_OK;
    json_object_set_new(root, "protocol", json_string(o->protocol == TFS_PERF_REST ? "rest" : "grpc"));
    json_object_set_new(root, "host", json_string(o->host));
    json_object_set_new(root, "port", json_integer(o->port));
    json_object_set_new(root, "model", json_string(o->model));
    json_object_set_new(root, "threads", json_integer(o->threads));
    json_object_set_new(root, "warmup_s", json_real(o->warmup_s));
    json_object_set(root, "steps", steps);
    for (int i = 0; i < n; i++) {
        const tfs_perf_step_result *r = &rs[i];
        const tfs_perf_hist *h = &r->stats.hist;
        json_t *s = json_object(), *errs = json_object();
        json_object_set_new(s, "mode", json_string(r->step.open_loop ? "rate" : "concurrency"));
        if (r->step.open_loop)
            json_object_set_new(s, "rate", json_real(r->step.rate));
        else
            json_object_set_new(s, "concurrency", json_integer(r->step.concurrency));
        json_object_set_new(s, "duration_s", json_real(r->elapsed_s));
        json_object_set_new(s, "throughput_rps", json_real(r->throughput));
        json_object_set_new(s, "p50_us", json_real(us(tfs_perf_hist_percentile(h, 50))));
        json_object_set_new(s, "p90_us", json_real(us(tfs_perf_hist_percentile(h, 90))));
        json_object_set_new(s, "p99_us", json_real(us(tfs_perf_hist_percentile(h, 99))));
        json_object_set_new(s, "max_us", json_real(us(h->count ? h->max : 0)));
        json_object_set_new(s, "mean_us", json_real(tfs_perf_hist_mean(h) / 1000.0));
        json_object_set_new(s, "ok", json_integer((json_int_t)r->stats.ok));
        json_object_set_new(s, "errors", json_integer((json_int_t)r->stats.errors));
        for (int k = 0; k < TFS_PERF_ERR_SLOTS; k++)
            if (r->stats.err_by_slot[k]) {
                char num[16];
                json_object_set_new(errs, slot_name(k, o->protocol, num, sizeof num),
                                    json_integer((json_int_t)r->stats.err_by_slot[k]));
            }
        json_object_set_new(s, "errors_by_code", errs);
        const tfs_perf_hist *q = &r->stats.server_queue, *sc = &r->stats.server_compute;
        if (q->count || sc->count) {
            json_t *srv = json_object();
            const struct { const char *key; const tfs_perf_hist *h; double p; } pct[] = {
                {"queue_p50_us", q, 50}, {"queue_p99_us", q, 99},
                {"compute_p50_us", sc, 50}, {"compute_p99_us", sc, 99}};
            json_object_set_new(srv, "responses", json_integer((json_int_t)sc->count));
            for (size_t k = 0; k < sizeof pct / sizeof pct[0]; k++)
                json_object_set_new(srv, pct[k].key, json_integer((json_int_t)
                                    tfs_perf_hist_percentile(pct[k].h, pct[k].p)));
            json_object_set_new(s, "server", srv);
        }
        json_array_append_new(steps, s);
    }
    if (json_dump_file(root, path, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) != 0)
        c = TFS_ERR(st, TFS_PERMISSION_DENIED, "cannot write '%s'", path);
    json_decref(steps);
    json_decref(root);
    return c;
}

bool tfs_perf_json_close(const void *a_json, const void *b_json, double rel)
{
    const json_t *a = a_json, *b = b_json;
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        double m = fmax(1.0, fmax(fabs(x), fabs(y)));
        return fabs(x - y) <= rel * m;
    }
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!tfs_perf_json_close(json_array_get(a, i), json_array_get(b, i), rel))
                return false;
        return true;
    }
    if (json_is_object(a)) {
        const char *k;
        json_t *v;
        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_foreach((json_t *)a, k, v) {
            json_t *w = json_object_get(b, k);
            if (!w || !tfs_perf_json_close(v, w, rel))
                return false;
        }
        return true;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

enum tfs_code tfs_perf_check_response(const tfs_perf_opts *o, const tfs_perf_step_result *r,
                                      tfs_status *st)
{
    char *text = NULL;
    json_t *got = NULL, *want = NULL;
    json_error_t err;
    enum tfs_code c = TFS_OK;
    if (!o->check && !o->expect_json[0])
        return TFS_OK;
    if (!r->first_body)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "no successful response to check");
    if (o->protocol == TFS_PERF_GRPC) {
        if ((c = tfs_perf_grpc_response_json((const uint8_t *)r->first_body, r->first_len, &text, st)) != TFS_OK)
            return c;
    }
    got = json_loads(text ? text : r->first_body, 0, &err);
    if (!json_is_object(got)) {
        c = TFS_ERR(st, TFS_DATA_LOSS, "response is not a JSON object (%s): %.200s", got ? "" : err.text,
                    text ? text : r->first_body);
        goto done;
    }
    json_t *out = json_object_get(got, "predictions");
    if (!out)
        out = json_object_get(got, "outputs");
    if (!out || (json_is_object(out) && json_object_size(out) == 0)) {
        c = TFS_ERR(st, TFS_DATA_LOSS, "response has no \"predictions\" or \"outputs\": %.200s",
                    text ? text : r->first_body);
        goto done;
    }
    if (o->expect_json[0]) {
        want = json_load_file(o->expect_json, 0, &err);
        if (!want) {
            c = TFS_ERR(st, TFS_INVALID_ARGUMENT, "--expect-json '%s': %s", o->expect_json, err.text);
            goto done;
        }
        if (!tfs_perf_json_close(got, want, 1e-6)) {
            char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
            c = TFS_ERR(st, TFS_DATA_LOSS, "response %.300s differs from '%s'", g ? g : "?", o->expect_json);
            free(g);
        }
    }
done:
    json_decref(got);
    json_decref(want);
    tfs_free(text);
    return c;
}
