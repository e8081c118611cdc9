/* Learning curves as SVG (train/plot.h): loss and accuracy per epoch, train and eval.
 *
 * DESIGN. The document is SVG 1.1 built from presentation attributes only (no CSS, no data-*
 * attributes, which SVG 1.1 lacks), so strict validators and old renderers accept it. Each axis
 * maps a domain to pixels linearly; y domains are the data's range widened by 5% on each side
 * (+-10% around the value of a flat curve, +-0.5 around 0), then snapped outward to "nice" tick
 * steps (1, 2 or 5 times a power of ten) so the ticks sit on round numbers and the axis ends are
 * ticks. The x domain is the epochs
 * padded by 4% of their span (half an epoch when there is one), so end points stay off the
 * frame. A missing point (NaN, an infinity, or a magnitude over 1e300, whose spans would
 * overflow) splits a curve into separate polylines; markers show every point while there are at
 * most 60 epochs, and isolated points always, so a single epoch is visible. Ticks are emitted as
 * <g class="xtick|ytick" transform="translate(x,y)"> holding their label, which is also what the
 * tests read to recover the axis mapping.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "train/plot.h"

#define WIDTH   960
#define HEIGHT  440
#define PANEL_W 480
#define LEFT    75    /* plot area inside a panel */
#define RIGHT   460
#define TOP     70
#define BOTTOM  350
#define MAX_EPOCHS 1000000
#define MARKER_EPOCHS 60
#define TRAIN_COLOR "#1f77b4"
#define EVAL_COLOR  "#ff7f0e"
#define FONT "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""

/* Appends s with XML's special characters escaped; control characters become spaces. */
static void put_text(tfs__buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': tfs__buf_printf(b, "&amp;"); break;
        case '<': tfs__buf_printf(b, "&lt;"); break;
        case '>': tfs__buf_printf(b, "&gt;"); break;
        case '"': tfs__buf_printf(b, "&quot;"); break;
        case '\'': tfs__buf_printf(b, "&apos;"); break;
        default:  tfs__buf_putc(b, *p < 32 ? ' ' : (char)*p);
        }
    }
}

static bool usable(double v)
{
    return isfinite(v) && fabs(v) <= 1e300;
}

/* 1, 2, 5 or 10 times a power of ten, at least raw (> 0). */
static double nice_step(double raw)
{
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    double n = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return n * p;
}

/* An axis: a domain [lo, hi] mapped onto pixels [p0, p1], ticks at first + k*step. */
typedef struct axis {
    double lo, hi, p0, p1;
    double first, step;
    int    n_ticks, decimals;
    bool   sci;
} axis;

static double map(const axis *a, double v)
{
    return a->p0 + (v - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0);
}

static void tick_label(const axis *a, double v, char *out, size_t n)
{
    if (fabs(v) < a->step * 1e-9)
        v = 0;   /* no "-0" */
    if (a->sci)
        snprintf(out, n, "%.6g", v);
    else
        snprintf(out, n, "%.*f", a->decimals, v);
}

/* The y axis of values a[0..n) and b[0..n) (either may be NULL). */
static axis y_axis(const double *a, const double *b, int n)
{
    axis   y  = {.p0 = BOTTOM, .p1 = TOP};
    double lo = INFINITY, hi = -INFINITY;
    for (int s = 0; s < 2; s++) {
        const double *v = s ? b : a;
        for (int i = 0; v && i < n; i++)
            if (usable(v[i])) {
                lo = fmin(lo, v[i]);
                hi = fmax(hi, v[i]);
            }
    }
    if (lo > hi) {   /* no data: a plain [0, 1] */
        lo = 0;
        hi = 1;
    } else if (hi - lo <= 1e-12 * fmax(fabs(lo), fabs(hi))) {
        double d = lo != 0 ? fabs(lo) * 0.1 : 0.5;
        lo -= d;
        hi += d;
    } else {
        double m = (hi - lo) * 0.05;   /* keep points off the frame */
        lo -= m;
        hi += m;
    }
    y.step = nice_step((hi - lo) / 5);
    double k0 = floor(lo / y.step + 1e-9), k1 = ceil(hi / y.step - 1e-9);
    y.lo      = k0 * y.step;
    y.hi      = k1 * y.step;
    y.first   = y.lo;
    y.n_ticks = (int)(k1 - k0) + 1;
    y.sci     = fmax(fabs(y.lo), fabs(y.hi)) >= 1e6 || y.step < 1e-4;
    for (y.decimals = 0; y.decimals < 10; y.decimals++) {
        double s = y.step * pow(10, y.decimals);
        if (fabs(s - round(s)) < 1e-6 * s)
            break;
    }
    return y;
}

static axis x_axis(int n, double p0, double p1)
{
    axis x = {.p0 = p0, .p1 = p1};
    if (n == 1) {
        x.lo = 0.5;
        x.hi = 1.5;
    } else {
        double pad = (n - 1) * 0.04;
        x.lo = 1 - pad;
        x.hi = n + pad;
    }
    x.step    = n <= 10 ? 1 : ceil(nice_step((n - 1) / 8.0));
    x.first   = x.step == 1 ? 1 : x.step;
    x.n_ticks = (int)floor((n - x.first) / x.step) + 1;
    return x;
}

/* One curve: polylines over its runs of usable points, then markers. */
static void put_curve(tfs__buf *b, const char *cls, const double *v, int n, const axis *x,
                      const axis *y, bool train)
{
    const char *color = train ? TRAIN_COLOR : EVAL_COLOR;
    for (int i = 0; i < n;) {
        if (!usable(v[i])) {
            i++;
            continue;
        }
        int j = i;
        while (j < n && usable(v[j]))
            j++;
        if (j - i >= 2) {
            tfs__buf_printf(b, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" "
                               "stroke-width=\"2\"%s stroke-linejoin=\"round\" points=\"", cls,
                            color, train ? "" : " stroke-dasharray=\"7,4\"");
            for (int k = i; k < j; k++)
                tfs__buf_printf(b, "%s%.2f,%.2f", k > i ? " " : "", map(x, k + 1), map(y, v[k]));
            tfs__buf_printf(b, "\"/>\n");
        }
        for (int k = i; k < j; k++)
            if (n <= MARKER_EPOCHS || j - i == 1)
                tfs__buf_printf(b, "<circle class=\"%s-point\" cx=\"%.2f\" cy=\"%.2f\" "
                                   "r=\"3.5\" fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                                cls, map(x, k + 1), map(y, v[k]), train ? color : "#ffffff",
                                color);
        i = j;
    }
}

static void put_panel(tfs__buf *b, int p, const char *id, const char *title, const char *ylabel,
                      const double *train, const char *train_cls, const double *eval,
                      const char *eval_cls, int n)
{
    double ox = p * PANEL_W, x0 = ox + LEFT, x1 = ox + RIGHT;
    axis   x = x_axis(n, x0, x1), y = y_axis(train, eval, n);
    char   label[64];

    tfs__buf_printf(b, "<g id=\"%s\">\n", id);
    tfs__buf_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"15\" "
                       "font-weight=\"bold\" fill=\"#222222\">%s</text>\n", (x0 + x1) / 2,
                    TOP - 14, title);
    /* grid, frame */
    for (int k = 0; k < y.n_ticks; k++) {
        double py = map(&y, y.first + k * y.step);
        tfs__buf_printf(b, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" "
                           "stroke=\"#e8e8e8\"/>\n", x0, py, x1, py);
    }
    tfs__buf_printf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"none\" "
                       "stroke=\"#555555\"/>\n", x0, TOP, x1 - x0, BOTTOM - TOP);
    /* ticks */
    tfs__buf_printf(b, "<g " FONT " font-size=\"12\" fill=\"#333333\">\n");
    for (int k = 0; k < y.n_ticks; k++) {
        double v = y.first + k * y.step;
        tick_label(&y, v, label, sizeof label);
        tfs__buf_printf(b, "<g class=\"ytick\" transform=\"translate(%.1f,%.2f)\">"
                           "<line x1=\"-5\" y1=\"0\" x2=\"0\" y2=\"0\" stroke=\"#555555\"/>"
                           "<text x=\"-8\" y=\"0\" dy=\"0.35em\" text-anchor=\"end\">%s</text>"
                           "</g>\n", x0, map(&y, v), label);
    }
    for (int k = 0; k < x.n_ticks; k++) {
        double v = x.first + k * x.step;
        tfs__buf_printf(b, "<g class=\"xtick\" transform=\"translate(%.2f,%d)\">"
                           "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"#555555\"/>"
                           "<text x=\"0\" y=\"18\" "
                           "text-anchor=\"middle\">%.0f</text></g>\n", map(&x, v), BOTTOM, v);
    }
    tfs__buf_printf(b, "</g>\n");
    /* axis labels */
    tfs__buf_printf(b, "<text " FONT " font-size=\"13\" fill=\"#222222\" x=\"%.1f\" y=\"%d\" "
                       "text-anchor=\"middle\">epoch</text>\n", (x0 + x1) / 2, BOTTOM + 38);
    tfs__buf_printf(b, "<text " FONT " font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\" "
                       "transform=\"translate(%.1f,%d) rotate(-90)\">%s</text>\n", ox + 20,
                    (TOP + BOTTOM) / 2, ylabel);
    /* curves: eval under train */
    bool any = false;
    for (int i = 0; i < n; i++)
        any = any || (train && usable(train[i])) || (eval && usable(eval[i]));
    if (eval)
        put_curve(b, eval_cls, eval, n, &x, &y, false);
    if (train)
        put_curve(b, train_cls, train, n, &x, &y, true);
    if (!any)
        tfs__buf_printf(b, "<text " FONT " font-size=\"14\" fill=\"#888888\" x=\"%.1f\" y=\"%d\" "
                           "text-anchor=\"middle\">no data</text>\n", (x0 + x1) / 2,
                        (TOP + BOTTOM) / 2);
    tfs__buf_printf(b, "</g>\n");
}

static void put_legend(tfs__buf *b, bool train, bool eval)
{
    int    items = train + eval;
    double x     = WIDTH / 2.0 - items * 55;
    tfs__buf_printf(b, "<g id=\"legend\" " FONT " font-size=\"13\" fill=\"#222222\">\n");
    for (int s = 0; s < 2; s++) {
        if (!(s ? eval : train))
            continue;
        const char *color = s ? EVAL_COLOR : TRAIN_COLOR;
        tfs__buf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
                           "stroke-width=\"2\"%s/>\n", x, HEIGHT - 25, x + 30, HEIGHT - 25, color,
                        s ? " stroke-dasharray=\"7,4\"" : "");
        tfs__buf_printf(b, "<circle cx=\"%.1f\" cy=\"%d\" r=\"3.5\" fill=\"%s\" stroke=\"%s\" "
                           "stroke-width=\"1.5\"/>\n", x + 15, HEIGHT - 25, s ? "#ffffff" : color,
                        color);
        tfs__buf_printf(b, "<text x=\"%.1f\" y=\"%d\" dy=\"0.35em\">%s</text>\n", x + 38,
                        HEIGHT - 25, s ? "eval" : "train");
        x += 110;
    }
    tfs__buf_printf(b, "</g>\n");
}

enum tfs_code tfs_plot_svg(const tfs_plot_curves *c, char **out, size_t *len, tfs_status *st)
{
    tfs__buf b = {0};
    int      n = c->n_epochs;

    *out = NULL;
    *len = 0;
    if (n < 1 || n > MAX_EPOCHS)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "plot: %d epochs (want 1 to %d)", n,
                       MAX_EPOCHS);
    tfs__buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
                        "height=\"%d\" viewBox=\"0 0 %d %d\">\n", WIDTH, HEIGHT, WIDTH, HEIGHT);
    tfs__buf_printf(&b, "<title>");
    put_text(&b, c->title ? c->title : "Training curves");
    tfs__buf_printf(&b, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
                        "fill=\"#ffffff\"/>\n", WIDTH, HEIGHT);
    tfs__buf_printf(&b, "<text " FONT " x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" "
                        "font-weight=\"bold\" fill=\"#111111\">", WIDTH / 2);
    put_text(&b, c->title ? c->title : "Training curves");
    tfs__buf_printf(&b, "</text>\n<g " FONT ">\n");
    put_panel(&b, 0, "loss", "Loss", "loss", c->train_loss, "train_loss", c->eval_loss,
              "eval_loss", n);
    put_panel(&b, 1, "accuracy", "Accuracy", "accuracy", c->train_accuracy, "train_accuracy",
              c->eval_accuracy, "eval_accuracy", n);
    tfs__buf_printf(&b, "</g>\n");
    put_legend(&b, c->train_loss || c->train_accuracy, c->eval_loss || c->eval_accuracy);
    tfs__buf_printf(&b, "</svg>\n");
    if (!(*out = tfs__buf_take(&b, len)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "plot: out of memory for %d epochs", n);
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_plot_write_svg(const char *path, const tfs_plot_curves *c, tfs_status *st)
{
    char         *svg = NULL;
    size_t        n   = 0;
    enum tfs_code rc;

    if ((rc = tfs_plot_svg(c, &svg, &n, st)) != TFS_OK)
        return rc;
    rc = tfs_atomic_file_write(path, svg, n, st);
    tfs_free(svg);
    return rc;
}
