/* tfserve-perf: a load generator for TensorFlow-Serving-compatible servers (like Triton's
 * perf_analyzer), used by the serving benchmarks in bench/. It is a client: it speaks REST
 * (HTTP/1.1 keep-alive over raw sockets, epoll) or gRPC (the C core client API) to a server and
 * links no server code.
 *
 *     tfs_perf_opts o;
 *     tfs_perf_opts_default(&o);
 *     if (tfs_perf_opts_parse(&o, argc, argv, &st) != TFS_OK) ...     // --protocol, --model, ...
 *     tfs_perf_payload p;
 *     tfs_perf_payload_build(&o, &p, &st);                             // REST body, gRPC request
 *     tfs_perf_step_result r;
 *     tfs_perf_rest_run_step(&o, &p, &step, &r, &st);                  // or tfs_perf_grpc_...
 *     tfs_perf_report_table(stdout, &o, &r, 1);
 *
 * Files: options.c (flags), payload.c (request bodies), hist.c (latency histogram), http-parse.c
 * (incremental HTTP/1.1 response parser), rest.c and grpc.c (the two load drivers), report.c
 * (table, CSV, JSON, response checks), perf-main.c (the program).
 *
 * Conventions: as in the rest of tfserve (runtime/status.h, runtime/alloc.h). Times are
 * nanoseconds of CLOCK_MONOTONIC; latencies are reported in microseconds.
 */
#ifndef TFS_BENCH_PERF_PERF_H
#define TFS_BENCH_PERF_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/status.h"

/* ---------------------------------------------------------------- histogram */

/* Log-linear latency histogram in the manner of HdrHistogram: values below 256 are exact, above
 * that each power of two is split into 128 equal buckets, so a bucket is never wider than 1/128
 * (0.79 %) of its values and the midpoint we report is within 0.4 % of any value in it. Fixed
 * memory (about 60 KB), no allocation after init, one per worker, merged at the end. */
#define TFS_PERF_HIST_BUCKETS (256 + 56 * 128)

typedef struct tfs_perf_hist {
    uint64_t count;
    uint64_t min, max;
    double   sum;
    uint64_t buckets[TFS_PERF_HIST_BUCKETS];
} tfs_perf_hist;

void     tfs_perf_hist_init(tfs_perf_hist *h);
void     tfs_perf_hist_record(tfs_perf_hist *h, uint64_t v);
void     tfs_perf_hist_merge(tfs_perf_hist *into, const tfs_perf_hist *from);
/* Nearest-rank percentile (0 < p <= 100): a value within 0.4 % of the ceil(p/100*n)-th smallest
 * recorded value, clamped to [min, max]; the largest rank gives max exactly. 0 when empty. */
uint64_t tfs_perf_hist_percentile(const tfs_perf_hist *h, double p);
double   tfs_perf_hist_mean(const tfs_perf_hist *h);

/* ---------------------------------------------------------------- options */

enum tfs_perf_protocol { TFS_PERF_REST = 0, TFS_PERF_GRPC = 1 };
enum tfs_perf_dtype {
    TFS_PERF_DT_NONE = 0, /* from the JSON values: numbers -> float, strings -> string */
    TFS_PERF_DT_FLOAT,
    TFS_PERF_DT_DOUBLE,
    TFS_PERF_DT_INT32,
    TFS_PERF_DT_INT64,
    TFS_PERF_DT_STRING,
    TFS_PERF_DT_BOOL,
};

#define TFS_PERF_MAX_STEPS  32
#define TFS_PERF_MAX_INPUTS 16
#define TFS_PERF_MAX_DIMS   8

typedef struct tfs_perf_shape {
    char    name[128];
    int     rank;
    int64_t dims[TFS_PERF_MAX_DIMS];
} tfs_perf_shape;

typedef struct tfs_perf_opts {
    enum tfs_perf_protocol protocol;
    char    host[256];
    int     port;           /* 0: 8501 for REST, 8500 for gRPC */
    char    model[256];
    char    signature[256]; /* "" : the server's default */
    int64_t version;        /* 0: latest */
    char    input_json[1024];
    char    input_name[128]; /* name for the unnamed "instances"/"inputs" forms over gRPC */
    int     n_shapes;
    tfs_perf_shape shapes[TFS_PERF_MAX_INPUTS];
    enum tfs_perf_dtype dtype;
    /* Load: either concurrency steps or request-rate steps (exactly one list is non-empty). */
    int     n_concurrency;
    int     concurrency[TFS_PERF_MAX_STEPS];
    int     n_rates;
    double  rates[TFS_PERF_MAX_STEPS];
    double  warmup_s;       /* untimed load before each step */
    double  duration_s;     /* timed load per step */
    double  timeout_s;      /* per request; also how long a step waits for stragglers */
    int     threads;        /* driver threads */
    int     grpc_channels;  /* gRPC: channels (connections); driver thread i uses i % n */
    int     max_outstanding; /* open loop: cap on requests in flight (REST: connections) */
    char    csv[1024];
    char    json[1024];
    char    expect_json[1024];
    bool    check;
    uint64_t seed;
    bool    help;
} tfs_perf_opts;

void tfs_perf_opts_default(tfs_perf_opts *o);
/* Parses argv[1..argc-1] (--key=value or --key value) into o, which holds the defaults. Fills in
 * the protocol's default port and concurrency 1 when no load was given. */
enum tfs_code tfs_perf_opts_parse(tfs_perf_opts *o, int argc, char **argv, tfs_status *st);
void tfs_perf_opts_usage(FILE *f);
const char *tfs_perf_dtype_name(enum tfs_perf_dtype d);

/* ---------------------------------------------------------------- payload */

typedef struct tfs_perf_payload {
    char    *path;       /* REST: /v1/models/M[/versions/V]:predict */
    char    *request;    /* REST: the complete HTTP request (headers + body); caller owns */
    size_t   request_len;
    uint8_t *grpc_msg;   /* gRPC: the packed PredictRequest; caller owns */
    size_t   grpc_len;
} tfs_perf_payload;

/* Builds the request for o: the --input-json file or random data for --shape. */
enum tfs_code tfs_perf_payload_build(const tfs_perf_opts *o, tfs_perf_payload *p, tfs_status *st);
/* Converts a TF Serving REST predict body (text) to a packed PredictRequest. Supports the row
 * ("instances") and columnar ("inputs") forms, named or not (unnamed uses input_name), with
 * number, bool, string and {"b64": ...} leaves in rectangular nested lists. Caller frees *out. */
enum tfs_code tfs_perf_json_to_predict(const char *json, const tfs_perf_opts *o, uint8_t **out,
                                       size_t *out_len, tfs_status *st);
void tfs_perf_payload_deinit(tfs_perf_payload *p);

/* ---------------------------------------------------------------- HTTP response parser */

enum tfs_perf_http_state {
    TFS_PERF_HTTP_STATUS = 0,
    TFS_PERF_HTTP_HEADERS,
    TFS_PERF_HTTP_BODY,        /* Content-Length body */
    TFS_PERF_HTTP_CHUNK_SIZE,
    TFS_PERF_HTTP_CHUNK_DATA,
    TFS_PERF_HTTP_CHUNK_CRLF,
    TFS_PERF_HTTP_TRAILERS,
    TFS_PERF_HTTP_UNTIL_CLOSE, /* neither length nor chunked: body ends at EOF */
    TFS_PERF_HTTP_DONE,
    TFS_PERF_HTTP_ERROR,
};

#define TFS_PERF_HTTP_LINE_MAX 8192

typedef struct tfs_perf_http {
    enum tfs_perf_http_state state;
    int      status;
    bool     chunked;
    bool     close;         /* the server said Connection: close (or HTTP/1.0) */
    bool     keep_body;     /* collect the body into body/body_len */
    int64_t  content_length; /* -1: none */
    uint64_t remaining;     /* body or chunk bytes left */
    size_t   line_len;
    char     line[TFS_PERF_HTTP_LINE_MAX];
    char    *body;          /* when keep_body; owned, NUL-terminated */
    size_t   body_len, body_cap;
    /* tfserve's X-Tfserve-Queue-Micros and X-Tfserve-Compute-Micros headers (the task's wait for
     * its batch, the run of the batch it was in); -1 when the response has none. */
    int64_t  server_queue_us, server_compute_us;
} tfs_perf_http;

/* The value of tfserve's timing header or trailer text v[0..n): 1 to 15 decimal digits, else -1. */
int64_t tfs_perf_micros_value(const char *v, size_t n);
/* Starts a new response (keeps the body buffer for reuse). */
void   tfs_perf_http_reset(tfs_perf_http *h, bool keep_body);
/* Feeds bytes; returns how many were used. Stops at the end of a response (state DONE), so the
 * rest of buf belongs to the next one. State ERROR on a malformed response. */
size_t tfs_perf_http_feed(tfs_perf_http *h, const char *buf, size_t len);
/* The connection closed: completes an until-close body, otherwise an error unless DONE. */
void   tfs_perf_http_eof(tfs_perf_http *h);
void   tfs_perf_http_deinit(tfs_perf_http *h);

/* ---------------------------------------------------------------- runs and results */

/* Error slot 0: transport (connection refused or reset, timeout, unparsable response); REST uses
 * the HTTP status (1..599) as slot, gRPC the status code (1..16). */
#define TFS_PERF_ERR_SLOTS 600

typedef struct tfs_perf_step {
    bool   open_loop;   /* true: rate, false: concurrency */
    int    concurrency;
    double rate;
} tfs_perf_step;

typedef struct tfs_perf_stats {
    tfs_perf_hist hist;      /* latency of successful requests, ns */
    uint64_t ok;
    uint64_t errors;
    uint64_t err_by_slot[TFS_PERF_ERR_SLOTS];
    uint64_t last_done_ns;   /* completion time of the last measured request */
    /* What the server said of the successful requests that carried tfserve's timing headers
     * (REST) or trailing metadata (gRPC), us: queue (wait for the batch) and compute (the run of
     * the request's batch). */
    tfs_perf_hist server_queue, server_compute;
} tfs_perf_stats;

typedef struct tfs_perf_step_result {
    tfs_perf_step  step;
    tfs_perf_stats stats;    /* merged over workers */
    double   elapsed_s;      /* from the start of the timed window to the last measured completion */
    double   throughput;     /* ok / elapsed_s */
    char    *first_body;     /* the first successful response (REST: body text; gRPC: the packed
                                PredictResponse); owned, NULL when none */
    size_t   first_len;
} tfs_perf_step_result;

void tfs_perf_stats_init(tfs_perf_stats *s);
void tfs_perf_stats_merge(tfs_perf_stats *into, const tfs_perf_stats *from);
/* Counts one measured request: latency_ns when slot < 0 (success), else an error in slot. */
void tfs_perf_stats_add(tfs_perf_stats *s, int slot, uint64_t latency_ns, uint64_t done_ns);
/* Counts the server's timing headers of one measured successful response (each only when >= 0). */
void tfs_perf_stats_add_server(tfs_perf_stats *s, int64_t queue_us, int64_t compute_us);
void tfs_perf_step_result_deinit(tfs_perf_step_result *r);

/* The schedule of one step, shared by both drivers: warmup, then the timed window. */
typedef struct tfs_perf_clock {
    uint64_t start_ns;   /* warmup begins */
    uint64_t t0_ns;      /* timed window begins */
    uint64_t t1_ns;      /* timed window ends: no request is sent at or after it */
    uint64_t drain_ns;   /* give up on outstanding requests */
} tfs_perf_clock;

uint64_t tfs_perf_now_ns(void);
void     tfs_perf_clock_init(tfs_perf_clock *c, const tfs_perf_opts *o);
/* How many of n workers/clients/rate share go to worker i of n_workers. */
int      tfs_perf_share(int n, int i, int n_workers);

/* REST: o->threads epoll threads drive the step's connections. */
enum tfs_code tfs_perf_rest_run_step(const tfs_perf_opts *o, const tfs_perf_payload *p,
                                     const tfs_perf_step *step, tfs_perf_step_result *r,
                                     tfs_status *st);

/* gRPC: one channel for the whole run; each step's calls run on o->threads completion queues. */
typedef struct tfs_perf_grpc tfs_perf_grpc;
enum tfs_code tfs_perf_grpc_new(const tfs_perf_opts *o, tfs_perf_grpc **out, tfs_status *st);
enum tfs_code tfs_perf_grpc_run_step(tfs_perf_grpc *g, const tfs_perf_opts *o,
                                     const tfs_perf_payload *p, const tfs_perf_step *step,
                                     tfs_perf_step_result *r, tfs_status *st);
void tfs_perf_grpc_free(tfs_perf_grpc *g);
/* The outputs of a packed PredictResponse as {"outputs": {name: nested list}} JSON text; caller
 * frees with tfs_free. */
enum tfs_code tfs_perf_grpc_response_json(const uint8_t *msg, size_t len, char **out,
                                          tfs_status *st);

/* ---------------------------------------------------------------- report */

/* "404:12 conn:1" (REST) or "NOT_FOUND:12" (gRPC) into buf; "" when no errors. */
void tfs_perf_errors_text(const tfs_perf_stats *s, enum tfs_perf_protocol proto, char *buf,
                          size_t cap);
void tfs_perf_report_header(FILE *f, const tfs_perf_opts *o);
void tfs_perf_report_row(FILE *f, const tfs_perf_step_result *r, enum tfs_perf_protocol proto);
enum tfs_code tfs_perf_report_csv(const char *path, const tfs_perf_opts *o,
                                  const tfs_perf_step_result *rs, int n, tfs_status *st);
enum tfs_code tfs_perf_report_json(const char *path, const tfs_perf_opts *o,
                                   const tfs_perf_step_result *rs, int n, tfs_status *st);
/* Checks the first response: JSON with "predictions" or "outputs" (check), and equal to the
 * --expect-json file within 1e-6 relative (expect). For gRPC the response is turned into
 * {"outputs": {...}} first. */
enum tfs_code tfs_perf_check_response(const tfs_perf_opts *o, const tfs_perf_step_result *r,
                                      tfs_status *st);
/* JSON equality with numbers equal within rel relative tolerance (ints and reals compare as numbers). */
bool tfs_perf_json_close(const void *a_json, const void *b_json, double rel);

#endif
