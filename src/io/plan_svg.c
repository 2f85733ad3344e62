/* plan_svg.c: the picture of a dry run (`zinc plan ... --svg FILE`, spec
 * Z-PSVG-*). One SVG document, two panels side by side:
 *
 *   left   device memory per phase: a stacked bar per phase, one segment per
 *          category, the device's capacity as a dashed line;
 *   right  the step's timeline: the phases end to end on one time axis, a
 *          compute lane and a communication lane, the exposed communication
 *          darker; or, without a machine, one line saying how to get it.
 *
 * Top to bottom: checking the input; text (escaping, numbers); the memory
 * panel; the timeline panel; the document; the atomic save. Everything that
 * can fail is checked before the first byte is written, and the SVG is
 * written by hand with fprintf, as io/plot.c writes its chart. */
#include "io/plan_svg.h"
#include "io/plot.h"
#include "io/svg_text.h"
#include "core/fileio.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- geometry ------------------------------------------------------------ */

#define W 960
#define H 420
#define GIB 1073741824.0         /* 2^30 bytes: the axis unit, named GiB (Z-PSVG-004) */

/* Text sizes. SVG has no font metrics, so widths are estimates per code
 * point: 0.6 em errs on the roomy side for sans-serif, as in io/plot.c. */
#define FS_TICK 11
#define FS_LABEL 12
#define FS_PANEL 13
#define FS_TITLE 15
#define CHAR_W(fs) (0.6 * (fs))
#define TITLE_MAX_CP ((int)((W - 20) / (CHAR_W(FS_TITLE) * 1.05)))
#define LEGEND_MAX_CP 18         /* longer category names end in "…" */

#define SPLIT 470.0              /* the left panel is x in [0, SPLIT] */
#define RIGHT_L 490.0            /* the right panel starts here ... */
#define RIGHT_R 945.0            /* ... and its plot area ends here */
#define PANEL_Y 54.0             /* baseline of the panel titles */

/* Twelve distinct colours, one per category slot, so a category keeps its
 * colour in every bar: matplotlib's tab10 and two darker tab20b shades. */
static const char *palette[ZN_PSVG_MAX_CAT] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                               "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                               "#bcbd22", "#17becf", "#393b79", "#637939"};
#define COL_COMPUTE "#4c78a8"
#define COL_COMM "#f2b06b"       /* communication hidden under compute */
#define COL_EXPOSED "#b34700"    /* the same, darker: exposed communication */

/* ---- checking the input -------------------------------------------------- */

static int bad_number(double v) {
    return !isfinite(v) || v < 0;
}

/* One number of the input: finite and >= 0, or ZN_E_USAGE naming it. */
static int check_num(double v, const char *what, const char *a, const char *b, ZnErr *err) {
    if (!bad_number(v)) return 0;
    if (b) return zn_err(err, ZN_E_USAGE, "plan picture: %s of '%s' in '%s' is %g: expected a finite number >= 0",
                         what, a, b, v);
    if (a) return zn_err(err, ZN_E_USAGE, "plan picture: %s of '%s' is %g: expected a finite number >= 0", what, a,
                         v);
    return zn_err(err, ZN_E_USAGE, "plan picture: %s is %g: expected a finite number >= 0", what, v);
}

/* A phase's times: the hidden part of its communication (comm - exposed)
 * lies under its compute, so exposed <= comm and comm - exposed <= compute.
 * The second allows a relative 1e-9, the rounding of exposed = comm -
 * compute computed in doubles (Z-PSVG-011). */
static int check_times(const ZnPlanSvg *p, int i, ZnErr *err) {
    const char *ph = p->phase[i];
    int rc;
    if ((rc = check_num(p->compute[i], "compute seconds", ph, NULL, err)) ||
        (rc = check_num(p->comm[i], "communication seconds", ph, NULL, err)) ||
        (rc = check_num(p->exposed[i], "exposed seconds", ph, NULL, err)))
        return rc;
    if (p->exposed[i] > p->comm[i])
        return zn_err(err, ZN_E_USAGE, "plan picture: '%s' has %g exposed seconds of %g seconds of communication",
                      ph, p->exposed[i], p->comm[i]);
    double hidden = p->comm[i] - p->exposed[i];
    if (hidden > p->compute[i] + 1e-9 * (p->comm[i] + p->compute[i]))
        return zn_err(err, ZN_E_USAGE,
                      "plan picture: '%s' hides %g seconds of communication under %g seconds of compute", ph, hidden,
                      p->compute[i]);
    return 0;
}

static int check(const ZnPlanSvg *p, ZnErr *err) {
    int rc;
    if (!p) return zn_err(err, ZN_E_USAGE, "plan picture: no input");
    if (!p->title) return zn_err(err, ZN_E_USAGE, "plan picture: no title");
    if (p->ncat < 1 || p->ncat > ZN_PSVG_MAX_CAT)
        return zn_err(err, ZN_E_USAGE, "plan picture: %d categories, expected 1..%d", p->ncat, ZN_PSVG_MAX_CAT);
    if (p->nphase < 1 || p->nphase > ZN_PSVG_MAX_PHASE)
        return zn_err(err, ZN_E_USAGE, "plan picture: %d phases, expected 1..%d", p->nphase, ZN_PSVG_MAX_PHASE);
    for (int c = 0; c < p->ncat; c++)
        if (!p->cat[c]) return zn_err(err, ZN_E_USAGE, "plan picture: category %d has no name", c + 1);
    for (int i = 0; i < p->nphase; i++)
        if (!p->phase[i]) return zn_err(err, ZN_E_USAGE, "plan picture: phase %d has no name", i + 1);
    for (int i = 0; i < p->nphase; i++)
        for (int c = 0; c < p->ncat; c++)
            if ((rc = check_num(p->mem[i][c], "memory", p->cat[c], p->phase[i], err))) return rc;
    if ((rc = check_num(p->capacity, "device capacity", NULL, NULL, err))) return rc;
    if (p->timed)
        for (int i = 0; i < p->nphase; i++)
            if ((rc = check_times(p, i, err))) return rc;
    return 0;
}

/* ---- text ---------------------------------------------------------------- */


/* A number as the picture prints it: 4 significant digits, never "-0". */
static void fmt_num(char *buf, size_t cap, double v) {
    snprintf(buf, cap, "%.4g", v == 0 ? 0.0 : v);
}

/* Bytes as "12.3 GiB": one decimal from 1 GiB up, else 3 significant digits,
 * so small memories do not all read "0.0 GiB" (Z-PSVG-005). */
static void fmt_gib(char *buf, size_t cap, double bytes) {
    double g = bytes / GIB;
    if (g >= 1) snprintf(buf, cap, "%.1f GiB", g);
    else snprintf(buf, cap, "%.3g GiB", g == 0 ? 0.0 : g);
}

/* <text class=... x y font-size text-anchor> with s escaped (at most max_cp
 * code points) and a white halo, so a label stays legible over a line. */
static void put_text(FILE *f, const char *cls, double x, double y, int fs, const char *anchor, const char *s,
                     long max_cp) {
    fprintf(f, "<text class=\"%s\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" text-anchor=\"%s\" "
               "stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">",
            cls, x, y, fs, anchor);
    zn_svg_put_esc(f, s, max_cp);
    fputs("</text>\n", f);
}

/* ---- the memory panel ---------------------------------------------------- */

typedef struct {
    double l, r, t, b;           /* plot area, pixels */
    ZnPlotTicks yt;              /* in GiB, from 0 */
    double total[ZN_PSVG_MAX_PHASE];   /* bytes of each bar */
    int used[ZN_PSVG_MAX_CAT];   /* category non-zero in some phase */
    long legend_cp;              /* widest legend name, code points */
} MemFrame;

/* Pixel height of `bytes` on the memory axis: computed from the value itself,
 * not as a difference of two positions, so a segment's height is exactly
 * proportional to its bytes (Z-PSVG-003). */
static double mem_h(const MemFrame *m, double bytes) {
    return bytes / (m->yt.hi * GIB) * (m->b - m->t);
}
static double mem_y(const MemFrame *m, double bytes) {
    return m->b - mem_h(m, bytes);
}

/* Bar totals, used categories, the GiB axis and the panel's layout. */
static int mem_frame(const ZnPlanSvg *p, MemFrame *m, ZnErr *err) {
    memset(m, 0, sizeof *m);
    double top = p->capacity;
    for (int i = 0; i < p->nphase; i++) {
        for (int c = 0; c < p->ncat; c++) {
            m->total[i] += p->mem[i][c];
            if (p->mem[i][c] > 0) m->used[c] = 1;
        }
        if (!isfinite(m->total[i]))
            return zn_err(err, ZN_E_USAGE, "plan picture: the bytes of '%s' are too many to add up", p->phase[i]);
        top = fmax(top, m->total[i]);
    }
    /* an all-zero chart still gets an axis (0..1 GiB), and no division by 0 */
    double hi = top > 0 ? top / GIB : 1.0;
    int rc = zn_plot_ticks(0, hi, 0, &m->yt, err);
    if (rc) {
        if (err) zn_err_prefix(err, "plan picture: memory axis: ");
        return rc;
    }
    char lab[64];
    long wmax = 1;
    for (int i = 0; i < m->yt.n; i++) {
        zn_plot_tick_label(&m->yt, m->yt.v[i], lab, sizeof lab);
        wmax = (long)strlen(lab) > wmax ? (long)strlen(lab) : wmax;
    }
    m->legend_cp = 1;
    for (int c = 0; c < p->ncat; c++)
        if (m->used[c]) {
            long k = zn_svg_cp_count(p->cat[c]);
            m->legend_cp = k > m->legend_cp ? k : m->legend_cp;
        }
    if (m->legend_cp > LEGEND_MAX_CP) m->legend_cp = LEGEND_MAX_CP + 1;   /* + the "…" */
    /* left: the tick labels; right: the legend, outside the bars */
    m->l = fmax(44.0, 18.0 + wmax * CHAR_W(FS_TICK));
    m->r = SPLIT - 10.0 - (20.0 + m->legend_cp * CHAR_W(FS_LABEL)) - 14.0;
    m->t = 78.0;
    m->b = H - 48.0;
    return 0;
}

static void put_mem_axes(FILE *f, const MemFrame *m) {
    char lab[64];
    fputs("<g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n", f);
    for (int i = 0; i < m->yt.n; i++) {
        double y = mem_y(m, m->yt.v[i] * GIB);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", m->l, y, m->r, y);
    }
    fputs("</g>\n<g class=\"axes\" stroke=\"#333333\" stroke-width=\"1\">\n", f);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", m->l, m->b, m->r, m->b);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", m->l, m->t, m->l, m->b);
    fputs("</g>\n", f);
    fprintf(f, "<g class=\"ticks\" font-size=\"%d\" fill=\"#333333\">\n", FS_TICK);
    for (int i = 0; i < m->yt.n; i++) {
        zn_plot_tick_label(&m->yt, m->yt.v[i], lab, sizeof lab);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\" text-anchor=\"end\">%s</text>\n", m->l - 6,
                mem_y(m, m->yt.v[i] * GIB), lab);
    }
    fputs("</g>\n", f);
}

/* One bar: its segments bottom-up in category order (zero ones draw
 * nothing), its total above it, its phase name under it. Each segment names
 * its category and phase, and its exact bytes, for readers of the file. */
static void put_bar(FILE *f, const ZnPlanSvg *p, const MemFrame *m, int i) {
    double slot = (m->r - m->l) / p->nphase;
    double bw = 0.6 * slot, x = m->l + (i + 0.5) * slot - 0.5 * bw;
    double below = 0;
    for (int c = 0; c < p->ncat; c++) {
        double v = p->mem[i][c];
        if (v <= 0) continue;
        fputs("<rect class=\"seg\" data-phase=\"", f);
        zn_svg_put_esc(f, p->phase[i], -1);
        fputs("\" data-cat=\"", f);
        zn_svg_put_esc(f, p->cat[c], -1);
        fprintf(f, "\" data-bytes=\"%.17g\" x=\"%.3f\" y=\"%.3f\" width=\"%.3f\" height=\"%.3f\" fill=\"%s\"/>\n",
                v, x, mem_y(m, below + v), bw, mem_h(m, v), palette[c]);
        below += v;
    }
    char lab[64];
    fmt_gib(lab, sizeof lab, m->total[i]);
    put_text(f, "bar-total", x + 0.5 * bw, mem_y(m, m->total[i]) - 5, FS_TICK, "middle", lab, -1);
    put_text(f, "phase-name", x + 0.5 * bw, m->b + 17, FS_LABEL, "middle", p->phase[i],
             (long)(slot / CHAR_W(FS_LABEL)));
}

/* The device's capacity: a dashed line across the plot area, labelled at its
 * right end (Z-PSVG-006). */
static void put_capacity(FILE *f, const ZnPlanSvg *p, const MemFrame *m) {
    double y = mem_y(m, p->capacity);
    fprintf(f, "<line class=\"capacity\" x1=\"%.2f\" y1=\"%.3f\" x2=\"%.2f\" y2=\"%.3f\" stroke=\"#d62728\" "
               "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
            m->l, y, m->r, y);
    char gib[64], lab[96];
    fmt_gib(gib, sizeof gib, p->capacity);
    snprintf(lab, sizeof lab, "device memory %s", gib);
    put_text(f, "capacity-label", m->r, y - 5, FS_TICK, "end", lab, -1);
}

/* The legend: a swatch and the name of each category that is non-zero in
 * some phase, top-aligned right of the bars (Z-PSVG-007). */
static void put_legend(FILE *f, const ZnPlanSvg *p, const MemFrame *m) {
    double x = m->r + 14.0, y = m->t + 6.0;
    fprintf(f, "<g class=\"legend\" font-size=\"%d\" fill=\"#333333\">\n", FS_LABEL);
    for (int c = 0; c < p->ncat; c++) {
        if (!m->used[c]) continue;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x, y - 6, palette[c]);
        fprintf(f, "<text class=\"legend-cat\" x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">", x + 18, y);
        zn_svg_put_esc(f, p->cat[c], LEGEND_MAX_CP);
        fputs("</text>\n", f);
        y += 18.0;
    }
    fputs("</g>\n", f);
}

static void put_memory_panel(FILE *f, const ZnPlanSvg *p, const MemFrame *m) {
    fprintf(f, "<text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" font-weight=\"bold\" "
               "text-anchor=\"middle\">device memory per phase (GiB)</text>\n",
            0.5 * (m->l + m->r), PANEL_Y, FS_PANEL);
    put_mem_axes(f, m);
    for (int i = 0; i < p->nphase; i++) put_bar(f, p, m, i);
    if (p->capacity > 0) put_capacity(f, p, m);
    put_legend(f, p, m);
}

/* ---- the timeline panel -------------------------------------------------- */

typedef struct {
    double l, r;                 /* time axis, pixels */
    double start[ZN_PSVG_MAX_PHASE];   /* seconds from the step's start */
    double len[ZN_PSVG_MAX_PHASE];     /* compute + exposed */
    double total;                /* the step: the sum of the lengths */
    ZnPlotTicks xt;
} TimeFrame;

/* Lanes and rows, top to bottom (pixels). */
#define LANE_H 34.0
#define COMPUTE_Y 96.0
#define COMM_Y 146.0
#define SPAN_Y 192.0
#define AXIS_Y 236.0

static double t_x(const TimeFrame *t, double s) {
    return t->l + s / t->xt.hi * (t->r - t->l);
}

static int time_frame(const ZnPlanSvg *p, TimeFrame *t, ZnErr *err) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < p->nphase; i++) {
        t->start[i] = t->total;
        t->len[i] = p->compute[i] + p->exposed[i];
        t->total += t->len[i];
    }
    if (!isfinite(t->total)) return zn_err(err, ZN_E_USAGE, "plan picture: the step's seconds are too many to add up");
    /* a step of no time still gets an axis (0..1 s) */
    int rc = zn_plot_ticks(0, t->total > 0 ? t->total : 1.0, 0, &t->xt, err);
    if (rc) {
        if (err) zn_err_prefix(err, "plan picture: time axis: ");
        return rc;
    }
    t->l = RIGHT_L + strlen("communication") * CHAR_W(FS_LABEL) + 12.0;
    t->r = RIGHT_R;
    return 0;
}

/* A bar of [s0, s0 + len) seconds in one lane; zero-length bars draw nothing. */
static void put_span_rect(FILE *f, const TimeFrame *t, const char *cls, const char *phase, double s0, double len,
                          double y, const char *fill) {
    if (len <= 0) return;
    fprintf(f, "<rect class=\"%s\" data-phase=\"", cls);
    zn_svg_put_esc(f, phase, -1);
    fprintf(f, "\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"%.2f\" fill=\"%s\"/>\n", t_x(t, s0), y,
            t_x(t, s0 + len) - t_x(t, s0), LANE_H, fill);
}

/* One phase: compute from its start; communication from its start, the
 * hidden part (comm - exposed, at most the compute) then the exposed part,
 * which is the phase's last `exposed` seconds, after compute ends
 * (Z-PSVG-009). Under the lanes, the phase's span and name. */
static void put_phase_time(FILE *f, const ZnPlanSvg *p, const TimeFrame *t, int i) {
    double s0 = t->start[i], hidden = fmin(p->comm[i] - p->exposed[i], p->compute[i]);
    put_span_rect(f, t, "compute", p->phase[i], s0, p->compute[i], COMPUTE_Y, COL_COMPUTE);
    put_span_rect(f, t, "comm", p->phase[i], s0, hidden, COMM_Y, COL_COMM);
    put_span_rect(f, t, "exposed", p->phase[i], s0 + p->compute[i], p->exposed[i], COMM_Y, COL_EXPOSED);
    /* the span: a thin bar in alternating greys, so neighbours stay apart;
       data-seconds is the phase's length, which the step total adds up */
    double x0 = t_x(t, s0), x1 = t_x(t, s0 + t->len[i]);
    fputs("<rect class=\"span\" data-phase=\"", f);
    zn_svg_put_esc(f, p->phase[i], -1);
    fprintf(f, "\" data-seconds=\"%.17g\" x=\"%.3f\" y=\"%.2f\" width=\"%.3f\" height=\"5\" fill=\"%s\"/>\n",
            t->len[i], x0, SPAN_Y, x1 - x0, i % 2 ? "#bbbbbb" : "#777777");
    long fit = (long)((x1 - x0) / CHAR_W(FS_TICK));
    if (fit >= 1) put_text(f, "phase-name", 0.5 * (x0 + x1), SPAN_Y + 20, FS_TICK, "middle", p->phase[i], fit - 1);
}

static void put_time_axis(FILE *f, const TimeFrame *t) {
    char lab[64];
    fputs("<g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n", f);
    for (int i = 0; i < t->xt.n; i++) {
        double x = t_x(t, t->xt.v[i]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, COMPUTE_Y - 8, x, AXIS_Y);
    }
    fputs("</g>\n<g class=\"axes\" stroke=\"#333333\" stroke-width=\"1\">\n", f);
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", t->l, AXIS_Y, t->r, AXIS_Y);
    for (int i = 0; i < t->xt.n; i++) {
        double x = t_x(t, t->xt.v[i]);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, AXIS_Y, x, AXIS_Y + 5);
    }
    fputs("</g>\n", f);
    fprintf(f, "<g class=\"ticks\" font-size=\"%d\" fill=\"#333333\">\n", FS_TICK);
    for (int i = 0; i < t->xt.n; i++) {
        zn_plot_tick_label(&t->xt, t->xt.v[i], lab, sizeof lab);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%s</text>\n", t_x(t, t->xt.v[i]),
                AXIS_Y + 19, lab);
    }
    fputs("</g>\n", f);
}

/* The key of the lanes' colours, one entry a row under the step total. */
static void put_time_key(FILE *f, double x, double y) {
    static const char *name[3] = {"compute", "communication under compute", "exposed communication"};
    static const char *col[3] = {COL_COMPUTE, COL_COMM, COL_EXPOSED};
    fprintf(f, "<g class=\"time-key\" font-size=\"%d\" fill=\"#333333\">\n", FS_TICK);
    for (int k = 0; k < 3; k++) {
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x, y - 6, col[k]);
        fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">%s</text>\n", x + 18, y, name[k]);
        y += 17.0;
    }
    fputs("</g>\n", f);
}

static void put_timeline_panel(FILE *f, const ZnPlanSvg *p, const TimeFrame *t) {
    fprintf(f, "<text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" font-weight=\"bold\" "
               "text-anchor=\"middle\">step timeline (s)</text>\n",
            0.5 * (RIGHT_L + RIGHT_R), PANEL_Y, FS_PANEL);
    put_time_axis(f, t);
    fprintf(f, "<g class=\"lanes\" font-size=\"%d\" fill=\"#333333\">\n", FS_LABEL);
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">compute</text>\n", RIGHT_L, COMPUTE_Y + 0.5 * LANE_H);
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">communication</text>\n", RIGHT_L, COMM_Y + 0.5 * LANE_H);
    fputs("</g>\n", f);
    for (int i = 0; i < p->nphase; i++) put_phase_time(f, p, t, i);
    /* the phases' boundaries, dashed across both lanes */
    for (int i = 1; i < p->nphase; i++) {
        double x = t_x(t, t->start[i]);
        fprintf(f, "<line class=\"boundary\" x1=\"%.3f\" y1=\"%.2f\" x2=\"%.3f\" y2=\"%.2f\" stroke=\"#555555\" "
                   "stroke-width=\"1\" stroke-dasharray=\"3 3\"/>\n",
                x, COMPUTE_Y - 8, x, SPAN_Y + 5);
    }
    char num[64], lab[96];
    fmt_num(num, sizeof num, t->total);
    snprintf(lab, sizeof lab, "step %s s", num);
    fprintf(f, "<text class=\"step-total\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" font-weight=\"bold\">%s</text>\n",
            t->l, AXIS_Y + 52, FS_PANEL, lab);
    put_time_key(f, t->l, AXIS_Y + 74);
}

/* Without a machine there are no times: the panel says how to get them
 * (Z-PSVG-010). */
static void put_no_timeline(FILE *f) {
    fprintf(f, "<text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" font-weight=\"bold\" "
               "text-anchor=\"middle\">step timeline (s)</text>\n",
            0.5 * (RIGHT_L + RIGHT_R), PANEL_Y, FS_PANEL);
    fprintf(f, "<text class=\"no-timeline\" x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" fill=\"#555555\" "
               "text-anchor=\"middle\">no machine given: pass --machine for the timeline</text>\n",
            0.5 * (RIGHT_L + RIGHT_R), 0.5 * H, FS_LABEL);
}

/* ---- the document -------------------------------------------------------- */

int zn_plan_svg_write(FILE *f, const ZnPlanSvg *p, ZnErr *err) {
    /* everything that can be refused is refused before the first byte */
    MemFrame m;
    TimeFrame t = {0};
    int rc;
    if ((rc = check(p, err)) || (rc = mem_frame(p, &m, err))) return rc;
    if (p->timed && (rc = time_frame(p, &t, err))) return rc;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n"
               "<rect class=\"background\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            W, H, W, H, W, H);
    fprintf(f, "<text class=\"title\" x=\"%.2f\" y=\"26\" font-size=\"%d\" font-weight=\"bold\" "
               "text-anchor=\"middle\">", 0.5 * W, FS_TITLE);
    zn_svg_put_esc(f, p->title, TITLE_MAX_CP);
    fputs("</text>\n", f);
    put_memory_panel(f, p, &m);
    if (p->timed) put_timeline_panel(f, p, &t);
    else put_no_timeline(f);
    fputs("</svg>\n", f);
    if (fflush(f) || ferror(f)) return zn_err(err, ZN_E_IO, "writing the plan picture failed: %s", strerror(errno));
    return 0;
}

/* The document is built in memory and handed to zn_write_file_atomic, which
 * writes "<path>.tmp.<pid>", fsyncs it, renames it over path and removes it
 * on any failure (Z-FILE-001..003): so a refused input creates no file at
 * all, and a failed write leaves neither a file nor a temporary (Z-PSVG-013). */
int zn_plan_svg_save(const char *path, const ZnPlanSvg *p, ZnErr *err) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return zn_nomem(err);
    int rc = zn_plan_svg_write(f, p, err);
    if (fclose(f) && !rc) rc = zn_nomem(err);
    if (!rc) rc = zn_write_file_atomic(path, buf, n, err);
    free(buf);
    return rc;
}
