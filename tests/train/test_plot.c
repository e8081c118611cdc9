/* Tests for the learning-curve plot (train/plot.c). The axis mapping is recovered from the SVG
 * itself: the first and last tick of each axis give (value, pixel) pairs, and every polyline
 * vertex and marker must be the given value mapped through them (to 0.02 px; coordinates are
 * printed to 0.01). Also: ticks cover the data, missing points break curves, edge cases (one
 * epoch, flat curves, all missing, many epochs, huge values), escaping, the file writer, every
 * allocation failing in turn, and well-formed XML parsed by /usr/bin/python3's xml.etree (skipped,
 * saying so, when it is absent).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "tests/support/tfs-test.h"
#include "train/plot.h"

Suite *suite_train_plot(void);

#define MAXP 2048

typedef struct tick {
    double pos, value;
} tick;

typedef struct panel {
    tick   x[64], y[64];
    int    nx, ny;
} panel;

/* The text of one panel: from <g id="NAME"> to the next top-level group. */
static char *panel_text(const char *svg, const char *id)
{
    char open[64];
    snprintf(open, sizeof open, "<g id=\"%s\">", id);
    const char *a = strstr(svg, open);
    ck_assert_ptr_nonnull(a);
    const char *b = strstr(a + 1, "<g id=\"");
    if (!b)
        b = a + strlen(a);
    return strndup(a, (size_t)(b - a));
}

static void parse_ticks(const char *text, panel *p)
{
    p->nx = p->ny = 0;
    for (int axis = 0; axis < 2; axis++) {
        const char *key = axis ? "<g class=\"ytick\" transform=\"translate("
                               : "<g class=\"xtick\" transform=\"translate(";
        for (const char *s = strstr(text, key); s; s = strstr(s + 1, key)) {
            double tx, ty;
            ck_assert_int_eq(sscanf(s + strlen(key), "%lf,%lf", &tx, &ty), 2);
            const char *label = strstr(strstr(s, "<text"), ">") + 1;
            tick        t     = {axis ? ty : tx, strtod(label, NULL)};
            if (axis)
                p->y[p->ny++] = t;
            else
                p->x[p->nx++] = t;
        }
    }
    /* y ticks go up the page, x ticks to the right, values increase. */
    for (int i = 1; i < p->ny; i++)
        ck_assert(p->y[i].value > p->y[i - 1].value && p->y[i].pos < p->y[i - 1].pos);
    for (int i = 1; i < p->nx; i++)
        ck_assert(p->x[i].value > p->x[i - 1].value && p->x[i].pos > p->x[i - 1].pos);
}

static double lin(const tick *t, int n, double v)
{
    if (n == 1) {
        ck_assert(v == t[0].value);
        return t[0].pos;
    }
    return t[0].pos + (v - t[0].value) * (t[n - 1].pos - t[0].pos) / (t[n - 1].value - t[0].value);
}

/* The polylines of class cls: their vertex lists, concatenated; *n_lines counts them. */
static int polyline_points(const char *text, const char *cls, double *xs, double *ys,
                           int *n_lines)
{
    char key[64];
    int  n = 0;
    snprintf(key, sizeof key, "<polyline class=\"%s\"", cls);
    *n_lines = 0;
    for (const char *s = strstr(text, key); s; s = strstr(s + 1, key)) {
        (*n_lines)++;
        const char *p   = strstr(s, "points=\"") + 8;
        const char *end = strchr(p, '"');
        while (p < end) {
            char *e;
            xs[n] = strtod(p, &e);
            ck_assert(*e == ',');
            ys[n] = strtod(e + 1, &e);
            n++;
            p = e;
            while (*p == ' ')
                p++;
        }
    }
    return n;
}

static int markers(const char *text, const char *cls, double *xs, double *ys)
{
    char key[64];
    int  n = 0;
    snprintf(key, sizeof key, "<circle class=\"%s-point\" cx=\"", cls);
    for (const char *s = strstr(text, key); s; s = strstr(s + 1, key)) {
        ck_assert_int_eq(sscanf(s + strlen(key), "%lf\" cy=\"%lf\"", &xs[n], &ys[n]), 2);
        n++;
    }
    return n;
}

/* Checks curve cls of a panel against values v[0..n): which points are drawn and where. Returns
 * the number of polylines. */
static int check_curve(const char *text, const panel *p, const char *cls, const double *v, int n,
                       bool expect_markers)
{
    static double xs[MAXP], ys[MAXP];
    int           lines, np = polyline_points(text, cls, xs, ys, &lines), k = 0;
    /* Vertices: the points of every run of two or more, in order. */
    for (int i = 0; i < n; i++) {
        bool ok   = isfinite(v[i]);
        bool prev = i > 0 && isfinite(v[i - 1]), next = i + 1 < n && isfinite(v[i + 1]);
        if (!ok || (!prev && !next))
            continue;
        ck_assert_int_lt(k, np);
        ck_assert_msg(fabs(xs[k] - lin(p->x, p->nx, i + 1)) < 0.02, "%s point %d: x %.2f, want "
                      "%.2f", cls, i, xs[k], lin(p->x, p->nx, i + 1));
        ck_assert_msg(fabs(ys[k] - lin(p->y, p->ny, v[i])) < 0.02, "%s point %d: y %.2f, want "
                      "%.2f", cls, i, ys[k], lin(p->y, p->ny, v[i]));
        k++;
    }
    ck_assert_int_eq(k, np);
    /* Markers: every usable point (or only isolated ones when there are many epochs). */
    int nm = markers(text, cls, xs, ys), m = 0;
    for (int i = 0; i < n; i++) {
        bool prev = i > 0 && isfinite(v[i - 1]), next = i + 1 < n && isfinite(v[i + 1]);
        if (!isfinite(v[i]) || (!expect_markers && (prev || next)))
            continue;
        ck_assert_int_lt(m, nm);
        ck_assert(fabs(xs[m] - lin(p->x, p->nx, i + 1)) < 0.02);
        ck_assert(fabs(ys[m] - lin(p->y, p->ny, v[i])) < 0.02);
        m++;
    }
    ck_assert_int_eq(m, nm);
    /* The ticks span the data. */
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            ck_assert(v[i] >= p->y[0].value - 1e-9 && v[i] <= p->y[p->ny - 1].value + 1e-9);
    return lines;
}

static char *render(const tfs_plot_curves *c)
{
    char      *svg = NULL;
    size_t     len = 0;
    tfs_status st;
    ck_assert_msg(tfs_plot_svg(c, &svg, &len, &st) == TFS_OK, "%s", st.msg);
    ck_assert_uint_eq(strlen(svg), len);
    return svg;
}

/* Parses the SVG with Python's XML parser: well-formed, an SVG 1.1 root, the panels and the
 * polyline count. */
static void python_parses(const char *svg, int want_polylines)
{
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("SKIP python xml check: /usr/bin/python3 absent\n");
        return;
    }
    char *dir = tfs_test_mkdtemp(), path[4200];
    snprintf(path, sizeof path, "%s/plot.svg", dir);
    ck_assert_int_eq(tfs_test_write_file(path, svg, strlen(svg)), 0);
    static const char script[] =
        "import sys, xml.etree.ElementTree as ET\n"
        "r = ET.parse(sys.argv[1]).getroot()\n"
        "ns = '{http://www.w3.org/2000/svg}'\n"
        "assert r.tag == ns + 'svg' and r.get('version') == '1.1', r.tag\n"
        "ids = [g.get('id') for g in r.iter(ns + 'g') if g.get('id')]\n"
        "assert ids == ['loss', 'accuracy', 'legend'], ids\n"
        "n = len(list(r.iter(ns + 'polyline')))\n"
        "assert n == int(sys.argv[2]), n\n"
        "assert all(e.tag.startswith(ns) for e in r.iter())\n";
    char want[16];
    snprintf(want, sizeof want, "%d", want_polylines);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", "-c", script, path, want, (char *)NULL);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "xml.etree rejected the SVG");
    tfs_test_rmtree(dir);
    free(dir);
}

START_TEST(typical_run)
{
    double tl[] = {0.62, 0.44, 0.39, 0.355, 0.33}, el[] = {0.48, 0.43, 0.40, 0.385, 0.38};
    double ta[] = {0.78, 0.842, 0.861, 0.872, 0.879}, ea[] = {0.83, 0.845, 0.853, 0.86, 0.866};
    tfs_plot_curves c = {.n_epochs = 5, .train_loss = tl, .eval_loss = el, .train_accuracy = ta,
                         .eval_accuracy = ea, .title = "fashion-mnist MLP"};
    char *svg = render(&c);
    ck_assert_ptr_nonnull(strstr(svg, "<?xml version=\"1.0\""));
    ck_assert_ptr_nonnull(strstr(svg, ">fashion-mnist MLP</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">epoch</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">train</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">eval</text>"));
    const char *ids[]    = {"loss", "accuracy"};
    const double *tr[]   = {tl, ta}, *ev[] = {el, ea};
    const char *tcls[]   = {"train_loss", "train_accuracy"};
    const char *ecls[]   = {"eval_loss", "eval_accuracy"};
    for (int k = 0; k < 2; k++) {
        char *text = panel_text(svg, ids[k]);
        panel p;
        parse_ticks(text, &p);
        ck_assert_int_eq(p.nx, 5);
        ck_assert(p.x[0].value == 1 && p.x[4].value == 5);
        ck_assert_int_ge(p.ny, 3);
        ck_assert_int_le(p.ny, 12);
        ck_assert_int_eq(check_curve(text, &p, tcls[k], tr[k], 5, true), 1);
        ck_assert_int_eq(check_curve(text, &p, ecls[k], ev[k], 5, true), 1);
        free(text);
    }
    /* Loss ticks by hand: data 0.33 .. 0.62 widened by 5% of its span (0.0145) each side, a
     * fifth of that (0.0638) rounded up to a nice step, 0.1: ticks 0.3 to 0.7. */
    char *text = panel_text(svg, "loss");
    ck_assert_ptr_nonnull(strstr(text, ">0.3</text>"));
    ck_assert_ptr_nonnull(strstr(text, ">0.7</text>"));
    ck_assert_ptr_null(strstr(text, ">0.8</text>"));
    ck_assert_ptr_null(strstr(text, ">0.2</text>"));
    free(text);
    python_parses(svg, 4);
    tfs_free(svg);
}
END_TEST

START_TEST(missing_points_break_curves)
{
    double tl[] = {1.0, 0.8, NAN, 0.5, 0.4}, el[] = {NAN, 0.9, NAN, INFINITY, 0.7};
    double ta[] = {NAN, NAN, NAN, NAN, NAN};
    tfs_plot_curves c = {.n_epochs = 5, .train_loss = tl, .eval_loss = el, .train_accuracy = ta};
    char *svg = render(&c), *text = panel_text(svg, "loss");
    panel p;
    parse_ticks(text, &p);
    ck_assert_int_eq(check_curve(text, &p, "train_loss", tl, 5, true), 2);
    ck_assert_int_eq(check_curve(text, &p, "eval_loss", el, 5, true), 0);   /* markers only */
    free(text);
    text = panel_text(svg, "accuracy");
    ck_assert_ptr_nonnull(strstr(text, ">no data</text>"));
    ck_assert_ptr_null(strstr(text, "<polyline"));
    ck_assert_ptr_null(strstr(text, "<circle"));
    parse_ticks(text, &p);
    ck_assert(p.y[0].value == 0 && p.y[p.ny - 1].value == 1);   /* a default axis */
    free(text);
    python_parses(svg, 2);
    tfs_free(svg);
}
END_TEST

START_TEST(one_epoch)
{
    double tl[] = {0.7}, el[] = {0.65}, ta[] = {0.75}, ea[] = {0.8};
    tfs_plot_curves c = {.n_epochs = 1, .train_loss = tl, .eval_loss = el, .train_accuracy = ta,
                         .eval_accuracy = ea};
    char *svg = render(&c), *text = panel_text(svg, "accuracy");
    panel p;
    parse_ticks(text, &p);
    ck_assert_int_eq(p.nx, 1);
    ck_assert(p.x[0].value == 1);
    ck_assert_int_eq(check_curve(text, &p, "train_accuracy", ta, 1, true), 0);
    ck_assert_int_eq(check_curve(text, &p, "eval_accuracy", ea, 1, true), 0);
    /* The point is inside the frame, not on it. */
    ck_assert(p.y[0].value < 0.75 && p.y[p.ny - 1].value > 0.8);
    ck_assert_ptr_nonnull(strstr(svg, ">Training curves</text>"));
    free(text);
    python_parses(svg, 0);
    tfs_free(svg);
}
END_TEST

START_TEST(flat_curves)
{
    double flat[] = {0.5, 0.5, 0.5}, zero[] = {0, 0, 0}, big[] = {-1e7, 3e7, 2.5e7};
    tfs_plot_curves c = {.n_epochs = 3, .train_loss = flat, .train_accuracy = zero};
    char *svg = render(&c), *text = panel_text(svg, "loss");
    panel p;
    parse_ticks(text, &p);
    ck_assert_int_eq(check_curve(text, &p, "train_loss", flat, 3, true), 1);
    ck_assert(p.y[0].value < 0.5 && p.y[p.ny - 1].value > 0.5);
    ck_assert(p.y[0].value >= 0.4 && p.y[p.ny - 1].value <= 0.6);
    free(text);
    text = panel_text(svg, "accuracy");
    parse_ticks(text, &p);
    ck_assert_int_eq(check_curve(text, &p, "train_accuracy", zero, 3, true), 1);
    ck_assert(p.y[0].value < 0 && p.y[p.ny - 1].value > 0);
    free(text);
    /* No eval curves: the legend has train only. */
    ck_assert_ptr_null(strstr(svg, ">eval</text>"));
    python_parses(svg, 2);
    tfs_free(svg);

    c   = (tfs_plot_curves){.n_epochs = 3, .eval_loss = big};
    svg = render(&c);
    text = panel_text(svg, "loss");
    parse_ticks(text, &p);
    ck_assert_int_eq(check_curve(text, &p, "eval_loss", big, 3, true), 1);
    ck_assert_ptr_nonnull(strstr(text, "e+07</text>"));   /* scientific labels */
    free(text);
    ck_assert_ptr_null(strstr(svg, ">train</text>"));
    tfs_free(svg);
}
END_TEST

START_TEST(many_epochs)
{
    enum { N = 300 };
    static double tl[N], el[N];
    for (int i = 0; i < N; i++) {
        tl[i] = 2.0 / (1 + 0.05 * i);
        el[i] = i % 10 == 9 ? 2.2 / (1 + 0.05 * i) : NAN;   /* eval every 10th epoch */
    }
    tfs_plot_curves c = {.n_epochs = N, .train_loss = tl, .eval_loss = el};
    char *svg = render(&c), *text = panel_text(svg, "loss");
    panel p;
    parse_ticks(text, &p);
    ck_assert_int_le(p.nx, 12);
    ck_assert(p.x[p.nx - 1].value <= N);
    ck_assert_int_eq(check_curve(text, &p, "train_loss", tl, N, false), 1);
    /* Isolated eval points keep their markers. */
    ck_assert_int_eq(check_curve(text, &p, "eval_loss", el, N, false), 0);
    free(text);
    python_parses(svg, 1);
    tfs_free(svg);
}
END_TEST

START_TEST(bad_input_and_escaping)
{
    double          v[] = {1};
    tfs_plot_curves c   = {.n_epochs = 0, .train_loss = v};
    char           *svg = (char *)1;
    size_t          len;
    tfs_status      st;
    ck_assert_int_eq(tfs_plot_svg(&c, &svg, &len, &st), TFS_INVALID_ARGUMENT);
    ck_assert_ptr_null(svg);
    c.n_epochs = -3;
    ck_assert_int_eq(tfs_plot_svg(&c, &svg, &len, &st), TFS_INVALID_ARGUMENT);
    c = (tfs_plot_curves){.n_epochs = 1, .train_loss = v, .title = "a<b & \"c\" 'd'\x01>"};
    svg = render(&c);
    ck_assert_ptr_nonnull(strstr(svg, ">a&lt;b &amp; &quot;c&quot; &apos;d&apos; &gt;</text>"));
    ck_assert_ptr_null(strstr(svg, "a<b"));
    python_parses(svg, 0);
    tfs_free(svg);
}
END_TEST

START_TEST(write_file)
{
    char      *dir = tfs_test_mkdtemp(), path[4200];
    tfs_status st;
    double     tl[] = {0.9, 0.5}, ta[] = {0.6, 0.8};
    tfs_plot_curves c = {.n_epochs = 2, .train_loss = tl, .train_accuracy = ta};
    snprintf(path, sizeof path, "%s/curves.svg", dir);
    ck_assert_int_eq(tfs_plot_write_svg(path, &c, &st), TFS_OK);
    ck_assert_int_eq(tfs_plot_write_svg(path, &c, &st), TFS_OK);   /* replaces */
    size_t n;
    char  *got = tfs_test_read_file(path, &n), *want = render(&c);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(got);
    tfs_free(want);
    snprintf(path, sizeof path, "%s/missing/curves.svg", dir);
    ck_assert_int_eq(tfs_plot_write_svg(path, &c, &st), TFS_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(st.msg, "missing/curves.svg"));
    tfs_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(out_of_memory)
{
    double tl[40];
    for (int i = 0; i < 40; i++)
        tl[i] = 1.0 / (i + 1);
    tfs_plot_curves c    = {.n_epochs = 40, .train_loss = tl, .eval_accuracy = tl};
    int64_t         base = tfs_alloc_bytes_in_use();
    bool            done = false;
    for (int64_t n = 1; n < 100 && !done; n++) {
        char      *svg = NULL;
        size_t     len;
        tfs_status st;
        tfs_alloc_fail_after(n);
        enum tfs_code rc = tfs_plot_svg(&c, &svg, &len, &st);
        tfs_alloc_fail_after(0);
        ck_assert(rc == TFS_OK || rc == TFS_RESOURCE_EXHAUSTED);
        ck_assert(rc == TFS_OK || svg == NULL);
        done = rc == TFS_OK;
        tfs_free(svg);
        ck_assert_int_eq(tfs_alloc_bytes_in_use(), base);
    }
    ck_assert(done);
}
END_TEST

Suite *suite_train_plot(void)
{
    Suite *s  = suite_create("train_plot");
    TCase *tc = tcase_create("plot");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, typical_run);
    tcase_add_test(tc, missing_points_break_curves);
    tcase_add_test(tc, one_epoch);
    tcase_add_test(tc, flat_curves);
    tcase_add_test(tc, many_epochs);
    tcase_add_test(tc, bad_input_and_escaping);
    tcase_add_test(tc, write_file);
    tcase_add_test(tc, out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
