/* plot.c: `zinc plot`, training-run logs as curves on one SVG chart
 * (spec/SPEC.md §11, Z-PLOT-*).
 *
 * Four parts, top to bottom: nice axis ticks; CSV reading by header name; the
 * SVG writer; the command (flags, atomic file write). The SVG is written by
 * hand with fprintf: it is a few dozen elements, and doing it here keeps zinc
 * free of a graphics dependency. */
#include "io/plot.h"
#include "io/svg_text.h"
#include "core/alloc.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- metrics ------------------------------------------------------------- */

static const char *metric_flag[ZN_PLOT_NMETRICS] = {"loss", "grad_norm", "lr", "scale"};
static const char *metric_col[ZN_PLOT_NMETRICS] = {"loss", "grad_norm", "lr", "loss_scale"};
static const char *metric_label[ZN_PLOT_NMETRICS] = {"loss", "grad norm", "learning rate", "loss scale"};

int zn_plot_metric_parse(const char *s, ZnPlotMetric *m, ZnErr *err) {
    for (int i = 0; i < ZN_PLOT_NMETRICS; i++)
        if (!strcmp(s, metric_flag[i]) || !strcmp(s, metric_col[i])) {
            *m = (ZnPlotMetric)i;
            return 0;
        }
    return zn_err(err, ZN_E_USAGE, "--metric: expected loss, grad_norm, lr or scale, got '%s'", s);
}

const char *zn_plot_metric_column(ZnPlotMetric m) {
    return (unsigned)m < ZN_PLOT_NMETRICS ? metric_col[m] : "?";
}

const char *zn_plot_metric_label(ZnPlotMetric m) {
    return (unsigned)m < ZN_PLOT_NMETRICS ? metric_label[m] : "?";
}

/* ---- ticks --------------------------------------------------------------- */

#define LIN_MAX_TICKS 8
/* Index slack when snapping lo/s and hi/s to whole ticks: lo/s carries a
 * rounding error of a few ulps of the index, so 2.3/0.002 = 1149.9999999999998
 * must still count as tick 1150, or the axis grows a needless tick. */
#define IDX_EPS 1e-6

/* m * 10^k as the double nearest the decimal: for k < 0 divide by the exact
 * integer 10^-k (exact up to 10^22) instead of multiplying by the inexact
 * 10^k, so 3 * 0.1 prints as 0.3, not 0.30000000000000004. */
static double dec(double m, int k) {
    return k < 0 ? m / pow(10.0, -k) : m * pow(10.0, k);
}

/* Smallest %g precision (6 at least, the compact default) at which every
 * label reads back as its tick and neighbours differ: 2.3..2.30001 needs 7. */
static int label_prec(const ZnPlotTicks *t) {
    for (int p = 6; p <= 17; p++) {
        int ok = 1;
        char prev[64] = "", cur[64];
        for (int i = 0; i < t->n && ok; i++) {
            snprintf(cur, sizeof cur, "%.*g", p, t->v[i]);
            double back = strtod(cur, NULL);
            /* a tick gap is at least |v[i]| * 1e-9 (narrower ranges are drawn as
               constant), so 1e-3 of the neighbour gap is a safe "same value" */
            double gap = t->n > 1 ? fabs(t->v[t->n - 1] - t->v[0]) / (t->n - 1) : 1.0;
            if (fabs(back - t->v[i]) > 1e-3 * gap || !strcmp(prev, cur)) ok = 0;
            memcpy(prev, cur, sizeof prev);
        }
        if (ok) return p;
    }
    return 17;
}

/* Linear ticks: the smallest step of the form 1, 2 or 5 x 10^k that covers
 * [lo, hi] with at most 8 ticks. With a span > 0 that step always gives at
 * least 4: the next smaller step needed 9+ ticks, so the span is over 6 of
 * those steps, and steps grow by at most 2.5x, so it is over 2.4 of ours. */
static int lin_ticks(double lo, double hi, ZnPlotTicks *t, ZnErr *err) {
    double span = hi - lo;
    double mag = fmax(fabs(lo), fabs(hi));
    if (!isfinite(span)) return zn_err(err, ZN_E_USAGE, "axis range %g..%g is too wide to draw", lo, hi);
    /* A range too narrow for its magnitude (or for a double) is drawn as a
       constant: its ticks could not be told apart at 17 digits anyway. */
    if (span <= mag * 1e-9 || span < 1e-200) {
        double mid = lo + 0.5 * span;
        double d = fabs(mid) >= 1e-200 ? fabs(mid) * 0.1 : 1.0;
        lo = mid - d;
        hi = mid + d;
        span = hi - lo;
    }
    static const int mant[3] = {1, 2, 5};
    int k0 = (int)floor(log10(span / LIN_MAX_TICKS)) - 1;
    for (int k = k0; k <= k0 + 4; k++)
        for (int j = 0; j < 3; j++) {
            double s = dec(mant[j], k);
            double a = floor(lo / s + IDX_EPS), b = ceil(hi / s - IDX_EPS);
            if (b - a + 1 > LIN_MAX_TICKS) continue;
            t->n = (int)(b - a) + 1;
            for (int i = 0; i < t->n; i++) t->v[i] = dec((a + i) * mant[j], k);
            t->lo = t->v[0];
            t->hi = t->v[t->n - 1];
            if (!isfinite(t->lo) || !isfinite(t->hi))
                return zn_err(err, ZN_E_USAGE, "axis range %g..%g is too wide to draw", lo, hi);
            t->prec = label_prec(t);
            return 0;
        }
    return zn_err(err, ZN_E_INTERNAL, "no tick step found for %g..%g", lo, hi);
}

/* Log ticks (Z-PLOT-012). Less than a decade of data: linear ticks, which on
 * so narrow a range look the same and say more. Three decades or more: powers
 * of ten, every d-th decade with d a nice step, at most 8. In between: the
 * 1-2-5 sequence (1, 2, 5, 10, 20, ...) from the last value at or below lo to
 * the first at or above hi. */
static int log_ticks(double lo, double hi, ZnPlotTicks *t, ZnErr *err) {
    /* 1e-300..1e300 keeps every tick and its log10 a normal finite double */
    if (!(lo >= 1e-300 && hi <= 1e300))
        return zn_err(err, ZN_E_USAGE, "values %g..%g are out of range for a log axis", lo, hi);
    if (hi / lo < 10.0) {
        ZnPlotTicks l;
        if (lin_ticks(lo, hi, &l, err)) return err->code;
        if (l.lo > 0) {
            *t = l;
            return 0;
        }
    }
    int e0 = (int)floor(log10(lo) + 1e-9), e1 = (int)ceil(log10(hi) - 1e-9);
    if (e1 <= e0) e1 = e0 + 1;
    if (e1 - e0 >= 3) {
        static const int mant[3] = {1, 2, 5};
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 3; j++) {
                int d = mant[j] * (int)dec(1, k);
                /* floor/ceil division for negative exponents too */
                int a = e0 >= 0 ? e0 / d * d : -((-e0 + d - 1) / d) * d;
                int b = e1 >= 0 ? (e1 + d - 1) / d * d : -((-e1) / d) * d;
                /* d divides 300 and -300 <= e0 < e1 <= 300, so the axis
                   stays inside the range accepted above */
                if ((b - a) / d + 1 > LIN_MAX_TICKS) continue;
                t->n = 0;
                for (int e = a; e <= b; e += d) t->v[t->n++] = dec(1, e);
                t->lo = t->v[0];
                t->hi = t->v[t->n - 1];
                t->prec = label_prec(t);
                return 0;
            }
        return zn_err(err, ZN_E_INTERNAL, "no log tick step found for %g..%g", lo, hi);
    }
    /* 1-2-5 candidates from 10^(e0-1) to 10^e1: at most 3 decades, 10 values */
    static const int m125[3] = {1, 2, 5};
    double c[16];
    int nc = 0;
    for (int e = e0 - 1; e <= e1; e++)
        for (int j = 0; j < 3 && nc < 16; j++) c[nc++] = dec(m125[j], e);
    int ia = 0, ib = nc - 1;
    for (int i = 0; i < nc; i++) if (c[i] <= lo * (1 + 1e-12)) ia = i;
    for (int i = nc - 1; i >= 0; i--) if (c[i] >= hi * (1 - 1e-12)) ib = i;
    t->n = ib - ia + 1;
    for (int i = 0; i < t->n; i++) t->v[i] = c[ia + i];
    t->lo = t->v[0];
    t->hi = t->v[t->n - 1];
    t->prec = label_prec(t);
    return 0;
}

int zn_plot_ticks(double lo, double hi, int logy, ZnPlotTicks *t, ZnErr *err) {
    memset(t, 0, sizeof *t);
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return zn_err(err, ZN_E_USAGE, "bad axis range %g..%g", lo, hi);
    if (logy) {
        if (lo <= 0) return zn_err(err, ZN_E_USAGE, "a log axis needs values > 0, got %g", lo);
        if (lo == hi) {   /* a constant: a decade around it, 1-2-5 ticks */
            lo = hi / 1.5;
            hi = hi * 1.5;
        }
        return log_ticks(lo, hi, t, err);
    }
    return lin_ticks(lo, hi, t, err);
}

void zn_plot_tick_label(const ZnPlotTicks *t, double v, char *buf, size_t cap) {
    snprintf(buf, cap, "%.*g", t->prec > 0 ? t->prec : 6, v == 0 ? 0.0 : v);   /* never "-0" */
}

/* ---- CSV ----------------------------------------------------------------- */

/* A field of a line: [p, p+n), spaces and tabs trimmed. */
typedef struct {
    const char *p;
    size_t n;
} Field;

static Field trim(const char *p, size_t n) {
    while (n && (*p == ' ' || *p == '\t')) p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    return (Field){p, n};
}

static int field_is(Field f, const char *s) {
    return f.n == strlen(s) && !memcmp(f.p, s, f.n);
}

/* Splits a line on commas into out[0..cap); returns the number of fields
 * (which may exceed cap: only the first cap are stored). No quoting: zinc's
 * logs never quote, and a comma inside quotes shows up as a field-count
 * error naming the line rather than being misread silently. */
static int split(const char *p, size_t n, Field *out, int cap) {
    int k = 0;
    size_t s = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || p[i] == ',') {
            if (k < cap) out[k] = trim(p + s, i - s);
            k++;
            s = i + 1;
        }
    return k;
}

/* One number field. 0 and *v on success (an empty field sets *empty and v
 * NAN), else an error naming file:line and the column. */
static int parse_num(const char *path, long line, const char *col, int idx, Field f, double *v, int *empty,
                     ZnErr *err) {
    char buf[128];
    *empty = 0;
    if (f.n == 0) {
        *empty = 1;
        *v = NAN;
        return 0;
    }
    if (f.n >= sizeof buf)
        return zn_err(err, ZN_E_CORRUPT, "%s:%ld: column '%s' (field %d): not a number: '%.40s...'", path,
                      line, col, idx + 1, f.p);
    memcpy(buf, f.p, f.n);
    buf[f.n] = 0;
    char *end;
    errno = 0;
    *v = strtod(buf, &end);
    /* ERANGE is fine: 1e999 reads as inf (a gap), 1e-999 as 0 */
    if (end == buf || *end)
        return zn_err(err, ZN_E_CORRUPT, "%s:%ld: column '%s' (field %d): not a number: '%s'", path, line,
                      col, idx + 1, buf);
    return 0;
}

/* The columns a metric needs; -1 when absent. */
typedef struct {
    int step, val, skipped, nfields;
} Cols;

static int parse_header(const char *path, long line, const char *p, size_t n, ZnPlotMetric m, Cols *c,
                        ZnErr *err) {
    const char *want = metric_col[m];
    c->step = c->val = c->skipped = -1;
    c->nfields = split(p, n, NULL, 0);
    Field *f = zn_malloc(ZN_HOST_IO, (size_t)c->nfields * sizeof *f);
    if (!f) return zn_nomem(err);
    split(p, n, f, c->nfields);
    int rc = 0;
    for (int i = 0; i < c->nfields && !rc; i++) {
        int *slot = field_is(f[i], "step") ? &c->step
                  : field_is(f[i], want) ? &c->val
                  /* skipped only matters for grad_norm (Z-PLOT-006) */
                  : (m == ZN_PLOT_GRAD_NORM && field_is(f[i], "skipped")) ? &c->skipped
                  : NULL;
        if (!slot) continue;   /* unknown and unneeded columns are ignored */
        if (*slot >= 0)
            rc = zn_err(err, ZN_E_CORRUPT, "%s:%ld: column '%.*s' appears twice in the header", path, line,
                        (int)f[i].n, f[i].p);
        *slot = i;
    }
    free(f);
    if (rc) return rc;
    if (c->step < 0 || c->val < 0)
        return zn_err(err, ZN_E_CORRUPT, "%s:%ld: the header has no '%s' column (header: '%.*s')", path, line,
                      c->step < 0 ? "step" : want, n > 200 ? 200 : (int)n, p);
    return 0;
}

int zn_plot_parse_csv(const char *path, const char *text, size_t len, ZnPlotMetric m, ZnPlotRun *run,
                      ZnErr *err) {
    run->n = 0;
    run->x = run->y = NULL;
    if ((unsigned)m >= ZN_PLOT_NMETRICS) return zn_err(err, ZN_E_INTERNAL, "bad plot metric %d", (int)m);
    Cols c = {-1, -1, -1, 0};
    int have_header = 0, rc = 0;
    long line = 0, cap = 0;
    Field *f = NULL;
    double *x = NULL, *y = NULL;
    size_t pos = 0;
    /* a UTF-8 byte-order mark (spreadsheets write one) is not part of "step" */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) pos = 3;
    while (pos < len) {
        const char *p = text + pos;
        const char *nl = memchr(p, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - p) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        if (n && p[n - 1] == '\r') n--;   /* CRLF files */
        if (trim(p, n).n == 0) continue;  /* blank lines carry nothing */
        if (!have_header) {
            if ((rc = parse_header(path, line, p, n, m, &c, err))) goto fail;
            have_header = 1;
            f = zn_malloc(ZN_HOST_IO, (size_t)c.nfields * sizeof *f);
            if (!f) { rc = zn_nomem(err); goto fail; }
            continue;
        }
        int k = split(p, n, f, c.nfields);
        if (k != c.nfields) {
            rc = zn_err(err, ZN_E_CORRUPT, "%s:%ld: expected %d fields, got %d", path, line, c.nfields, k);
            goto fail;
        }
        double sx, sy, sk = 0;
        int empty;
        if ((rc = parse_num(path, line, "step", c.step, f[c.step], &sx, &empty, err))) goto fail;
        if (empty || !isfinite(sx)) {
            /* a row without a step has no place on the x axis */
            rc = zn_err(err, ZN_E_CORRUPT, "%s:%ld: column 'step' (field %d): expected a finite number, got '%.*s'",
                        path, line, c.step + 1, (int)f[c.step].n, f[c.step].p);
            goto fail;
        }
        if ((rc = parse_num(path, line, metric_col[m], c.val, f[c.val], &sy, &empty, err))) goto fail;
        if (c.skipped >= 0 && (rc = parse_num(path, line, "skipped", c.skipped, f[c.skipped], &sk, &empty, err)))
            goto fail;
        /* gaps (Z-PLOT-006): non-finite; grad_norm < 0 ("not computed", -1)
           or on a skipped step (its norm is of gradients never applied); an
           empty skipped field (NAN) means "not skipped" */
        if (!isfinite(sy)) sy = NAN;
        if (m == ZN_PLOT_GRAD_NORM && (sy < 0 || (sk != 0 && !isnan(sk)))) sy = NAN;
        if (run->n == cap) {
            cap = cap ? 2 * cap : 256;
            double *nx = zn_realloc(ZN_HOST_IO, x, (size_t)cap * sizeof *x);
            if (nx) x = nx;
            double *ny = nx ? zn_realloc(ZN_HOST_IO, y, (size_t)cap * sizeof *y) : NULL;
            if (ny) y = ny;
            if (!nx || !ny) { rc = zn_nomem(err); goto fail; }
        }
        x[run->n] = sx;
        y[run->n] = sy;
        run->n++;
    }
    if (!have_header) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s:1: empty file, expected a CSV header line", path);
        goto fail;
    }
    if (run->n == 0) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s:%ld: no data rows after the header", path, line);
        goto fail;
    }
    free(f);
    run->x = x;
    run->y = y;
    return 0;
fail:
    free(f);
    free(x);
    free(y);
    run->n = 0;
    return rc;
}

char *zn_plot_default_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    const char *dot = strrchr(b, '.');
    /* a leading dot is a hidden file's name, not an extension */
    if (dot && dot != b) n = (size_t)(dot - b);
    char *s = zn_malloc(ZN_HOST_IO, n + 1);
    if (!s) return NULL;
    memcpy(s, b, n);
    s[n] = 0;
    return s;
}

/* Reads a whole file. Loops on fread rather than asking for the size, so a
 * pipe or process substitution (<(...)) works too. */
static int read_all(const char *path, char **out, size_t *len, ZnErr *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return zn_err(err, ZN_E_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = zn_malloc(ZN_HOST_IO, cap);
    int rc = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        char *nb = zn_realloc(ZN_HOST_IO, buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    if (!buf) rc = zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " reading '%s'", path);
    else if (ferror(fp)) rc = zn_err(err, ZN_E_IO, "cannot read '%s': %s", path, strerror(errno));
    fclose(fp);
    if (rc) { free(buf); return rc; }
    *out = buf;
    *len = n;
    return 0;
}

int zn_plot_read_csv(const char *path, ZnPlotMetric m, ZnPlotRun *run, ZnErr *err) {
    memset(run, 0, sizeof *run);
    char *text = NULL;
    size_t len = 0;
    int rc = read_all(path, &text, &len, err);
    if (rc) return rc;
    rc = zn_plot_parse_csv(path, text, len, m, run, err);
    free(text);
    if (rc) return rc;
    if (!(run->name = zn_plot_default_name(path))) {
        zn_plot_run_free(run);
        return zn_nomem(err);
    }
    return 0;
}

void zn_plot_run_free(ZnPlotRun *run) {
    free(run->name);
    free(run->x);
    free(run->y);
    memset(run, 0, sizeof *run);
}

/* ---- SVG ----------------------------------------------------------------- */

/* matplotlib's default "tab10" palette (Tableau 10), the colors of the
 * DeepSpeed demo pictures; runs 11-20 repeat it dashed, 21-30 dotted, ... */
static const char *palette[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
static const char *dashes[4] = {NULL, "7 4", "1.5 3.5", "8 3 1.5 3"};

/* Text sizes, and the widths used to lay text out. SVG has no font metrics,
 * so widths are estimates per code point: 0.6 em is wider than the average
 * sans-serif glyph, so estimated boxes err on the roomy side. */
#define FS_TICK 11
#define FS_LEGEND 12
#define FS_AXIS 13
#define FS_TITLE 15
#define CHAR_W(fs) (0.6 * (fs))
#define LEGEND_MAX_CP 24   /* longer names are cut with "…" in the legend */
/* the most title code points the chart's width holds (bold runs wider) */
#define TITLE_MAX_CP ((int)((ZN_PLOT_WIDTH - 20) / (CHAR_W(FS_TITLE) * 1.05)))


/* A point is drawn when its value is finite, and > 0 on a log axis. */
static int drawable(double y, int logy) {
    return isfinite(y) && (!logy || y > 0);
}

long zn_plot_drawn_points(const ZnPlotRun *run, int logy) {
    long d = 0;
    for (long i = 0; i < run->n; i++) d += drawable(run->y[i], logy);
    return d;
}

typedef struct {
    double l, r, t, b;        /* plot area, pixels */
    ZnPlotTicks xt, yt;
    int logy;
} Frame;

static double px(const Frame *fr, double x) {
    return fr->l + (x - fr->xt.lo) / (fr->xt.hi - fr->xt.lo) * (fr->r - fr->l);
}
static double py(const Frame *fr, double y) {
    double a = fr->yt.lo, b = fr->yt.hi;
    if (fr->logy) y = log10(y), a = log10(a), b = log10(b);
    return fr->b - (y - a) / (b - a) * (fr->b - fr->t);
}

/* One run's curve (Z-PLOT-006, Z-PLOT-012): one <path>, a new subpath ("M") after each gap;
 * a point alone between gaps gets a zero-length segment, which round caps
 * draw as a dot, so it does not vanish. */
static void put_run(FILE *f, const Frame *fr, const ZnPlotRun *r, int idx) {
    fputs("<path class=\"run\" data-run=\"", f);
    zn_svg_put_esc(f, r->name ? r->name : "", -1);
    fprintf(f, "\" stroke=\"%s\" stroke-width=\"1.5\" fill=\"none\" stroke-linejoin=\"round\" "
               "stroke-linecap=\"round\"", palette[idx % 10]);
    const char *dash = dashes[(idx / 10) % 4];
    if (dash) fprintf(f, " stroke-dasharray=\"%s\"", dash);
    fputs(" d=\"", f);
    int in = 0, onpath = 0;
    for (long i = 0; i < r->n; i++) {
        if (!drawable(r->y[i], fr->logy)) {
            in = 0;
            continue;
        }
        /* a newline every few points keeps long paths diff- and editor-friendly;
           XML turns it into a space, which path syntax allows */
        if (onpath && onpath % 8 == 0) fputc('\n', f);
        fprintf(f, "%s%s%.2f,%.2f", onpath ? " " : "", in ? "L" : "M", px(fr, r->x[i]), py(fr, r->y[i]));
        onpath++;
        int next = i + 1 < r->n && drawable(r->y[i + 1], fr->logy);
        if (!in && !next) fputs(" l0,0", f);
        in = 1;
    }
    fputs("\"/>\n", f);
}

int zn_plot_svg(FILE *f, const ZnPlotRun *runs, int nruns, const ZnPlotOpts *o, ZnErr *err) {
    const char *col = zn_plot_metric_column(o->metric);
    /* the data range over every drawable point of every run */
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < nruns; k++)
        for (long i = 0; i < runs[k].n; i++) {
            if (!drawable(runs[k].y[i], o->logy)) continue;
            xlo = fmin(xlo, runs[k].x[i]);
            xhi = fmax(xhi, runs[k].x[i]);
            ylo = fmin(ylo, runs[k].y[i]);
            yhi = fmax(yhi, runs[k].y[i]);
        }
    if (ylo > yhi)
        return zn_err(err, ZN_E_USAGE, "nothing to plot: no run has a %s '%s' value", o->logy ? "positive" : "finite",
                      col);
    Frame fr = {0};
    fr.logy = o->logy;
    if (zn_plot_ticks(xlo, xhi, 0, &fr.xt, err)) return zn_err_prefix(err, "x axis (step): ");
    if (zn_plot_ticks(ylo, yhi, o->logy, &fr.yt, err)) return zn_err_prefix(err, "y axis (%s): ", col);

    /* Layout (Z-PLOT-013). Left margin: room for the rotated y title and the
       widest y tick label. Right: the legend, outside the plot area, so it
       never hides a curve. Top: the title. Bottom: x labels and x title. */
    char lab[64];
    long wmax = 0;
    for (int i = 0; i < fr.yt.n; i++) {
        zn_plot_tick_label(&fr.yt, fr.yt.v[i], lab, sizeof lab);
        if ((long)strlen(lab) > wmax) wmax = (long)strlen(lab);
    }
    fr.l = fmax(60.0, 30.0 + 8.0 + wmax * CHAR_W(FS_TICK));
    long ncp = 1;
    for (int k = 0; k < nruns; k++) {
        long c = zn_svg_cp_count(runs[k].name ? runs[k].name : "");
        ncp = c > ncp ? c : ncp;
    }
    if (ncp > LEGEND_MAX_CP) ncp = LEGEND_MAX_CP + 1;   /* + the "…" */
    double legend_w = 30.0 + ncp * CHAR_W(FS_LEGEND);
    fr.t = 44.0;
    fr.b = ZN_PLOT_HEIGHT - 52.0;
    /* legend rows: as many as the plot area's height holds; when runs are
       left over the last row says how many, and the legend must be wide
       enough for that line too */
    double row = 18.0;
    int fit = (int)((fr.b - fr.t) / row);
    int shown = nruns <= fit ? nruns : fit - 1;
    char more[64];
    snprintf(more, sizeof more, "\xE2\x80\xA6 and %d more", nruns - shown);
    if (shown < nruns) legend_w = fmax(legend_w, zn_svg_cp_count(more) * CHAR_W(FS_LEGEND));
    fr.r = ZN_PLOT_WIDTH - 12.0 - legend_w - 14.0;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n"
               "<rect class=\"background\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            ZN_PLOT_WIDTH, ZN_PLOT_HEIGHT, ZN_PLOT_WIDTH, ZN_PLOT_HEIGHT, ZN_PLOT_WIDTH, ZN_PLOT_HEIGHT);

    /* grid: light lines at every tick, under everything else */
    fputs("<g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n", f);
    for (int i = 0; i < fr.xt.n; i++) {
        double x = px(&fr, fr.xt.v[i]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, fr.t, x, fr.b);
    }
    for (int i = 0; i < fr.yt.n; i++) {
        double y = py(&fr, fr.yt.v[i]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", fr.l, y, fr.r, y);
    }
    fputs("</g>\n", f);

    /* axes: the left and bottom edges of the plot area, tick marks outside */
    fputs("<g class=\"axes\" stroke=\"#333333\" stroke-width=\"1\">\n", f);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", fr.l, fr.b, fr.r, fr.b);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", fr.l, fr.t, fr.l, fr.b);
    for (int i = 0; i < fr.xt.n; i++) {
        double x = px(&fr, fr.xt.v[i]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, fr.b, x, fr.b + 5);
    }
    for (int i = 0; i < fr.yt.n; i++) {
        double y = py(&fr, fr.yt.v[i]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", fr.l - 5, y, fr.l, y);
    }
    fputs("</g>\n", f);

    /* tick labels: x centered under its mark, y right-aligned left of it and
       centered on it (dy 0.35em: dominant-baseline is not supported everywhere) */
    fprintf(f, "<g class=\"ticks\" font-size=\"%d\" fill=\"#333333\">\n", FS_TICK);
    for (int i = 0; i < fr.xt.n; i++) {
        zn_plot_tick_label(&fr.xt, fr.xt.v[i], lab, sizeof lab);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%s</text>\n", px(&fr, fr.xt.v[i]),
                fr.b + 19, lab);
    }
    for (int i = 0; i < fr.yt.n; i++) {
        zn_plot_tick_label(&fr.yt, fr.yt.v[i], lab, sizeof lab);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\" text-anchor=\"end\">%s</text>\n", fr.l - 8,
                py(&fr, fr.yt.v[i]), lab);
    }
    fputs("</g>\n", f);

    /* axis titles and the chart title */
    double cx = 0.5 * (fr.l + fr.r), cy = 0.5 * (fr.t + fr.b);
    fprintf(f, "<text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" text-anchor=\"middle\">step</text>\n",
            cx, (double)ZN_PLOT_HEIGHT - 12, FS_AXIS);
    fprintf(f, "<text class=\"ylabel\" transform=\"translate(18,%.2f) rotate(-90)\" font-size=\"%d\" "
               "text-anchor=\"middle\">%s%s</text>\n",
            cy, FS_AXIS, zn_plot_metric_label(o->metric), o->logy ? " (log scale)" : "");
    /* the title centres over the plot area, shifted just enough to stay on
       the chart when it is wider than the plot area (a narrow plot area next
       to a wide legend) */
    const char *title = o->title ? o->title : zn_plot_metric_label(o->metric);
    long tcp = zn_svg_cp_count(title);
    double tw = (tcp > TITLE_MAX_CP ? TITLE_MAX_CP + 1 : tcp) * CHAR_W(FS_TITLE) * 1.05;
    double tx = fmin(fmax(cx, 10.0 + 0.5 * tw), ZN_PLOT_WIDTH - 10.0 - 0.5 * tw);
    fprintf(f, "<text class=\"title\" x=\"%.2f\" y=\"26\" font-size=\"%d\" font-weight=\"bold\" "
               "text-anchor=\"middle\">", tx, FS_TITLE);
    zn_svg_put_esc(f, title, TITLE_MAX_CP);
    fputs("</text>\n", f);

    /* curves in argument order: later runs draw over earlier ones */
    for (int k = 0; k < nruns; k++) put_run(f, &fr, &runs[k], k);

    /* legend: a sample of each run's line and its name, top-aligned right of
       the plot area; runs that do not fit in its height end in "… and N more" */
    double lx = fr.r + 14.0;
    fprintf(f, "<g class=\"legend\" font-size=\"%d\" fill=\"#333333\">\n", FS_LEGEND);
    for (int k = 0; k < shown; k++) {
        double y = fr.t + 8.0 + k * row;
        const char *dash = dashes[(k / 10) % 4];
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"1.5\" "
                   "stroke-linecap=\"round\"", lx, y, lx + 22, y, palette[k % 10]);
        if (dash) fprintf(f, " stroke-dasharray=\"%s\"", dash);
        fprintf(f, "/>\n<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">", lx + 28, y);
        zn_svg_put_esc(f, runs[k].name ? runs[k].name : "", LEGEND_MAX_CP);
        fputs("</text>\n", f);
    }
    if (shown < nruns)
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">%s</text>\n", lx, fr.t + 8.0 + shown * row, more);
    fputs("</g>\n</svg>\n", f);
    if (ferror(f)) return zn_err(err, ZN_E_IO, "writing the SVG failed: %s", strerror(errno));
    return 0;
}

/* fsync the directory holding path, so the rename itself survives a crash.
 * Best effort: some file systems refuse fsync on a directory, and the file
 * is already complete either way. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int zn_plot_write(const char *path, const ZnPlotRun *runs, int nruns, const ZnPlotOpts *o, ZnErr *err) {
    size_t n = strlen(path);
    char *tmp = zn_malloc(ZN_HOST_IO, n + 5);
    if (!tmp) return zn_nomem(err);
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        int rc = zn_err(err, ZN_E_IO, "cannot write '%s': %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    int rc = zn_plot_svg(f, runs, nruns, o, err);
    /* the bytes must be on disk before the rename makes them the file: else a
       crash could leave path naming an empty or partial SVG */
    if (!rc && (fflush(f) || fsync(fileno(f))))
        rc = zn_err(err, ZN_E_IO, "writing '%s' failed: %s", tmp, strerror(errno));
    if (fclose(f) && !rc) rc = zn_err(err, ZN_E_IO, "writing '%s' failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path))
        rc = zn_err(err, ZN_E_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc) unlink(tmp);
    else sync_dir(path);
    free(tmp);
    return rc;
}
