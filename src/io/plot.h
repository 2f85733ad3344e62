/* plot.h: `zinc plot` draws training runs (the per-step CSV logs that
 * `zinc train --log FILE.csv` writes) as curves on one SVG chart: the picture
 * DeepSpeed's universal-checkpoint demo uses to show that a resumed run tracks
 * its baseline. Spec: spec/SPEC.md §11 (Z-PLOT-*).
 *
 * The pieces are separate so tests can reach each one: nice axis ticks, CSV
 * reading by header name, SVG writing to a FILE, and the atomic file write the
 * command uses. Nothing here prints; errors come back in a ZnErr. */
#ifndef ZN_PLOT_H
#define ZN_PLOT_H
#include <stdio.h>
#include <stddef.h>
#include "core/err.h"

/* What the y axis shows. Each metric is one column of the log (Z-PLOT-004). */
typedef enum {
    ZN_PLOT_LOSS = 0,
    ZN_PLOT_GRAD_NORM,
    ZN_PLOT_LR,
    ZN_PLOT_SCALE,      /* the loss_scale column */
    ZN_PLOT_NMETRICS
} ZnPlotMetric;

/* "loss", "grad_norm", "lr", "scale" (also "loss_scale"); 0 or ZN_E_USAGE. */
int zn_plot_metric_parse(const char *s, ZnPlotMetric *m, ZnErr *err);
/* The CSV column a metric reads ("loss_scale" for ZN_PLOT_SCALE). */
const char *zn_plot_metric_column(ZnPlotMetric m);
/* The y axis title ("loss", "grad norm", "learning rate", "loss scale"). */
const char *zn_plot_metric_label(ZnPlotMetric m);

/* Axis ticks (Z-PLOT-010..012). The axis runs from lo to hi, which are the
 * first and last tick, so every data value lies inside the axis. */
#define ZN_PLOT_MAX_TICKS 16
typedef struct {
    int n;                        /* number of ticks, 4..8 on a linear axis */
    double v[ZN_PLOT_MAX_TICKS];  /* tick values, increasing */
    double lo, hi;                /* axis range: v[0] and v[n-1] */
    int prec;                     /* %.*g precision that tells the labels apart */
} ZnPlotTicks;

/* Ticks for data in [lo, hi] (lo <= hi, both finite; on a log axis both > 0).
 * Fails with ZN_E_USAGE when the range cannot be drawn (not finite, or too
 * wide for a double). */
int zn_plot_ticks(double lo, double hi, int logy, ZnPlotTicks *t, ZnErr *err);
/* The label of tick value v: "%.*g" with t->prec, "-0" printed as "0". */
void zn_plot_tick_label(const ZnPlotTicks *t, double v, char *buf, size_t cap);

/* One run: its points in file order. y is NAN where the curve has a gap
 * (Z-PLOT-006). */
typedef struct {
    char *name;     /* legend name (owned) */
    long n;         /* data rows */
    double *x;      /* step */
    double *y;      /* metric value, or NAN for a gap */
} ZnPlotRun;

/* Parses CSV text (len bytes, need not be NUL-terminated) into run->n, x, y.
 * `path` is only used in messages ("loss.csv:3: ..."). run->name is left
 * alone. On error run holds nothing that needs freeing. */
int zn_plot_parse_csv(const char *path, const char *text, size_t len, ZnPlotMetric m, ZnPlotRun *run,
                      ZnErr *err);
/* Reads and parses a file; the name defaults to zn_plot_default_name(path). */
int zn_plot_read_csv(const char *path, ZnPlotMetric m, ZnPlotRun *run, ZnErr *err);
/* The base name of a path without its last extension ("runs/base.csv" ->
 * "base"); malloc'd, NULL when out of memory. */
char *zn_plot_default_name(const char *path);
void zn_plot_run_free(ZnPlotRun *run);
/* How many of run's points a chart draws: finite values (positive ones on a
 * log axis). A run with none gets an empty curve. */
long zn_plot_drawn_points(const ZnPlotRun *run, int logy);

typedef struct {
    ZnPlotMetric metric;
    const char *title;  /* NULL: the metric label */
    int logy;           /* log10 y axis; values <= 0 become gaps */
} ZnPlotOpts;

/* Chart geometry (Z-PLOT-011, Z-PLOT-013). */
#define ZN_PLOT_WIDTH 800
#define ZN_PLOT_HEIGHT 500

/* Writes the SVG document for nruns runs to f. Fails (ZN_E_USAGE) when no
 * run has a single point to draw. */
int zn_plot_svg(FILE *f, const ZnPlotRun *runs, int nruns, const ZnPlotOpts *o, ZnErr *err);
/* Writes the SVG to path atomically: path.tmp, fflush, fsync, rename
 * (Z-PLOT-016). On any failure path is untouched and path.tmp is removed. */
int zn_plot_write(const char *path, const ZnPlotRun *runs, int nruns, const ZnPlotOpts *o, ZnErr *err);


#endif
