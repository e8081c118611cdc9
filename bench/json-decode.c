/* json-decode: what a REST thread spends turning one predict body into the model's input tensor,
 * next to jansson (a well-kept C JSON library) doing the same job. Not a test; run by hand:
 *     build/bench/json-decode [BODY.json [runs [case]]]
 * BODY is a TF Serving predict body whose "instances" or "inputs" hold floats (bench/batching.sh
 * writes the Fashion-MNIST MLP's as $BENCH_TMP/mlp/row.json). Without one it makes the same shape
 * of body: {"instances": [[784 numbers]]}, pixel values b / 255 written as Python's json.dump
 * writes them (the shortest text that reads back to the double: "0.0", "0.00392156862745098",
 * up to 17 digits), the bytes b taken from a fixed pseudo-random sequence with half of them 0 as in
 * a Fashion-MNIST image.
 * Cases, each timed over `runs` bodies (default 20000) after a warm-up, printed as the median of 7
 * rounds in ns per body and ns per number:
 *   tfserve decode   tfs__json_parse + tfs__json_decode_predict into a float tensor [-1, n]
 *                    (what server/rest.c does before the batcher sees the request)
 *   tfserve parse    tfs__json_parse alone
 *   jansson decode   json_loadb, then every number of the instances into a float array
 *   strtod           glibc strtod over every number token of the body (a floor for any parser
 *                    that hands its numbers to the C library)
 * and the ratios jansson/tfserve and strtod/tfserve of the decode medians. With a case number
 * (0-3, in that order) it runs only that case, `runs` times, and prints nothing: for perf record.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

#define ROUNDS 7

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "json-decode: %s\n", what);
    exit(1);
}

/* The shortest %.*g text of x that strtod reads back to x, as Python's repr writes it. */
static int shortest(char *buf, size_t n, double x)
{
    int len = 0;
    for (int prec = 1; prec <= 17; prec++) {
        len = snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".e"))   /* Python writes 0.0 and 1.0 */
        len += snprintf(buf + len, n - (size_t)len, ".0");
    return len;
}

static char *synthetic_body(size_t *len)
{
    size_t cap = 64 + 784 * 24, o = 0;
    char  *b = malloc(cap);
    if (!b)
        die("out of memory");
    o += (size_t)snprintf(b + o, cap - o, "{\"instances\": [[");
    uint32_t x = 12345;
    for (int i = 0; i < 784; i++) {
        x = x * 1664525u + 1013904223u;
        unsigned byte = (x >> 31) ? (x >> 8) % 255 + 1 : 0;
        if (i)
            o += (size_t)snprintf(b + o, cap - o, ", ");
        o += (size_t)shortest(b + o, cap - o, byte / 255.0);
    }
    o += (size_t)snprintf(b + o, cap - o, "]]}");
    *len = o;
    return b;
}

static char *read_body(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open the body file");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
        die("cannot read the body file");
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The numbers of the body's first nested array, counted the way the cases read them. */
static size_t count_numbers(const char *b, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if ((b[i] >= '0' && b[i] <= '9') || b[i] == '-') {
            n++;
            while (i < len && strchr("0123456789.eE+-", b[i]))
                i++;
        }
    return n;
}

typedef struct bench {
    const char    *body;
    size_t         len;
    size_t         numbers;
    tfs_signature *sig;
    float         *out;   /* jansson's floats */
    double         sink;
} bench;

static void tfserve_decode(bench *b, bool decode)
{
    tfs__jdoc  doc;
    tfs_status st;
    tfs__jdoc_init(&doc);
    if (tfs__json_parse(b->body, b->len, &doc, &st) != TFS_OK)
        die(st.msg);
    if (decode) {
        enum tfs__json_format fmt;
        tfs_named_tensor     *in = NULL;
        int                   n_in = 0;
        if (tfs__json_decode_predict(doc.root, b->sig, NULL, &fmt, &in, &n_in, &st) != TFS_OK)
            die(st.msg);
        b->sink += ((float *)in[0].tensor->data)[0];
        tfs__named_tensors_free(in, n_in);
    }
    tfs__jdoc_deinit(&doc);
}

static size_t jansson_floats(const json_t *v, float *out, size_t at)
{
    if (json_is_array(v)) {
        size_t  i;
        json_t *e;
        json_array_foreach(v, i, e) at = jansson_floats(e, out, at);
    } else if (json_is_number(v)) {
        out[at++] = (float)json_number_value(v);
    }
    return at;
}

static void jansson_decode(bench *b)
{
    json_error_t err;
    json_t      *doc = json_loadb(b->body, b->len, 0, &err);
    if (!doc)
        die(err.text);
    json_t *rows = json_object_get(doc, "instances");
    if (!rows)
        rows = json_object_get(doc, "inputs");
    if (jansson_floats(rows, b->out, 0) != b->numbers)
        die("jansson read a different count of numbers");
    b->sink += b->out[0];
    json_decref(doc);
}

static void strtod_all(bench *b)
{
    const char *p = b->body, *end = b->body + b->len;
    char       *next;
    while (p < end) {
        if ((*p >= '0' && *p <= '9') || *p == '-') {
            b->sink += strtod(p, &next);
            p = next;
        } else {
            p++;
        }
    }
}

enum which { TFS_DECODE, TFS_PARSE, JANSSON, STRTOD, N_CASES };
static const char *const case_name[] = {"tfserve decode", "tfserve parse", "jansson decode",
                                        "strtod"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double time_case(bench *b, enum which c, int runs)
{
    double t0 = now_ns();
    for (int i = 0; i < runs; i++) {
        switch (c) {
        case TFS_DECODE: tfserve_decode(b, true); break;
        case TFS_PARSE: tfserve_decode(b, false); break;
        case JANSSON: jansson_decode(b); break;
        default: strtod_all(b); break;
        }
    }
    return (now_ns() - t0) / runs;
}

int main(int argc, char **argv)
{
    bench b = {0};
    char *body = argc > 1 ? read_body(argv[1], &b.len) : synthetic_body(&b.len);
    int   runs = argc > 2 ? atoi(argv[2]) : 20000;
    if (runs <= 0)
        die("runs must be positive");
    b.body = body;
    b.numbers = count_numbers(body, b.len);
    b.out = malloc(b.numbers * sizeof *b.out + 1);
    tfs_tensor_info x = {"x", "x:0", TFS_DTYPE_FLOAT, {2, {-1, -1}}};
    tfs_signature   sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                           .n_inputs = 1, .inputs = &x};
    b.sig = &sig;
    if (!b.out)
        die("out of memory");
    if (argc > 3) {
        int only = atoi(argv[3]);
        if (only < 0 || only >= N_CASES)
            die("case must be 0-3");
        time_case(&b, (enum which)only, runs);
        free(b.out);
        free(body);
        return 0;
    }

    double t[N_CASES][ROUNDS];
    for (int c = 0; c < N_CASES; c++)
        time_case(&b, (enum which)c, runs / 10 + 1);
    for (int r = 0; r < ROUNDS; r++)   /* interleaved, so drift hits every case alike */
        for (int c = 0; c < N_CASES; c++)
            t[c][r] = time_case(&b, (enum which)c, runs);

    printf("body: %zu bytes, %zu numbers, %d runs x %d rounds\n", b.len, b.numbers, runs, ROUNDS);
    double med[N_CASES];
    for (int c = 0; c < N_CASES; c++) {
        qsort(t[c], ROUNDS, sizeof t[c][0], cmp_double);
        med[c] = t[c][ROUNDS / 2];
        printf("%-15s median %9.0f ns/body  %6.1f ns/number  (min %.0f, max %.0f)\n",
               case_name[c], med[c], med[c] / (double)b.numbers, t[c][0], t[c][ROUNDS - 1]);
    }
    printf("jansson/tfserve decode = %.2fx, strtod/tfserve decode = %.2fx (sink %g)\n",
           med[JANSSON] / med[TFS_DECODE], med[STRTOD] / med[TFS_DECODE], b.sink);
    free(b.out);
    free(body);
    return 0;
}
