/* test_plot.c: `zinc plot` (spec Z-PLOT-*): nice ticks, CSV reading by
 * header name, gaps, the SVG (well-formed, one path per run, escaping,
 * layout), the atomic write and the command's errors.
 *
 * Well-formedness is checked twice: by xml_check below, a small self-contained
 * checker (balanced tags, quoted attributes, valid entities, valid UTF-8, one
 * root), and by Python's xml.dom.minidom when python3 is installed. */
#include "testutil.h"
#include "xml_check.h"
#include "io/plot.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

static char *tpath_keep(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", zt_tmpdir(), name);
    return buf;
}

/* a run owning malloc'd copies, so zn_plot_run_free can free it */
static ZnPlotRun make_run(const char *name, long n, const double *x, const double *y) {
    ZnPlotRun r;
    r.name = strdup(name);
    r.n = n;
    r.x = malloc((size_t)(n ? n : 1) * sizeof(double));
    r.y = malloc((size_t)(n ? n : 1) * sizeof(double));
    assert_true(r.name && r.x && r.y);
    if (n) memcpy(r.x, x, (size_t)n * sizeof(double));
    if (n) memcpy(r.y, y, (size_t)n * sizeof(double));
    return r;
}

/* The SVG as a string (caller frees); asserts success. */
static char *svg_of(const ZnPlotRun *runs, int n, const ZnPlotOpts *o) {
    /* a tmpfile, not open_memstream: see zt_slurp */
    FILE *f = tmpfile();
    assert_non_null(f);
    ZnErr err = {0};
    int rc = zn_plot_svg(f, runs, n, o, &err);
    if (rc) fail_msg("zn_plot_svg: %s", err.msg);
    size_t len;
    char *buf = zt_slurp(f, &len);
    assert_true(len > 0);
    return buf;
}

static int parse_text(const char *text, ZnPlotMetric m, ZnPlotRun *r, ZnErr *err) {
    memset(r, 0, sizeof *r);
    return zn_plot_parse_csv("t.csv", text, strlen(text), m, r, err);
}

/* the run text parses to for metric m, which must succeed */
static ZnPlotRun csv_of(const char *text, ZnPlotMetric m) {
    ZnPlotRun r;
    ZnErr err = {0};
    if (parse_text(text, m, &r, &err)) fail_msg("parse: %s", err.msg);
    return r;
}

#define HDR "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms\n"

/* text must be refused as corrupt, the message containing part
 * (csv_refused) or equal to msg (csv_refused_is): most reader checks are
 * one of these two */
static void csv_refused(const char *text, ZnPlotMetric m, const char *part) {
    ZnPlotRun r;
    ZnErr err = {0};
    assert_int_equal(parse_text(text, m, &r, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, part);
}
static void csv_refused_is(const char *text, ZnPlotMetric m, const char *msg) {
    ZnPlotRun r;
    ZnErr err = {0};
    assert_int_equal(parse_text(text, m, &r, &err), ZN_E_CORRUPT);
    assert_string_equal(err.msg, msg);
}

/* ---- ticks -------------------------------------------------------------- */

static void assert_ticks(const ZnPlotTicks *t, const double *want, int n) {
    if (t->n != n) fail_msg("%d ticks, expected %d (first %g, last %g)", t->n, n, t->v[0], t->v[t->n - 1]);
    for (int i = 0; i < n; i++)
        if (fabs(t->v[i] - want[i]) > 1e-12 * fmax(1.0, fabs(want[i])))
            fail_msg("tick %d = %.17g, expected %.17g", i, t->v[i], want[i]);
    assert_true(t->lo == t->v[0] && t->hi == t->v[n - 1]);
}

/* the ticks of zn_plot_ticks over [lo, hi] (log scale if lg), which must
 * succeed */
static ZnPlotTicks ticks_of(double lo, double hi, int lg) {
    ZnPlotTicks t;
    ZnErr err = {0};
    if (zn_plot_ticks(lo, hi, lg, &t, &err)) fail_msg("ticks of %g..%g: %s", lo, hi, err.msg);
    return t;
}

/* zn_plot_ticks over [lo, hi] must refuse with ZN_E_USAGE (and a message
 * holding part, unless NULL) */
static void ticks_refused(double lo, double hi, int lg, const char *part) {
    ZnPlotTicks t;
    ZnErr err = {0};
    assert_int_equal(zn_plot_ticks(lo, hi, lg, &t, &err), ZN_E_USAGE);
    if (part) assert_str_contains(err.msg, part);
}

/* zn_plot_ticks over [lo, hi] (log scale if lg) succeeds with exactly the n
 * ticks want: most hand cases are this */
static void ticks_are(double lo, double hi, int lg, const double *want, int n) {
    ZnPlotTicks t = ticks_of(lo, hi, lg);
    assert_ticks(&t, want, n);
}

/* the step of t is m * 10^k, m in {1,2,5}, the same between all ticks */
static void assert_nice_step(const ZnPlotTicks *t) {
    double s = t->v[1] - t->v[0];
    double k = floor(log10(s) + 1e-9);
    double m = s / pow(10.0, k);
    double mr = round(m);
    if (fabs(m - mr) > 1e-6 || (mr != 1 && mr != 2 && mr != 5)) fail_msg("step %.17g is not 1/2/5 x 10^k", s);
    for (int i = 1; i < t->n; i++)
        if (fabs((t->v[i] - t->v[i - 1]) - s) > 1e-6 * s) fail_msg("uneven tick step at %d", i);
}

/* spec: Z-PLOT-007 */
static void test_ticks_hand_cases(void **state) {
    (void)state;
    ticks_are(0, 100, 0, (double[]){0, 20, 40, 60, 80, 100}, 6);
    ticks_are(2.3, 2.31, 0, (double[]){2.3, 2.302, 2.304, 2.306, 2.308, 2.31}, 6);
    ticks_are(1, 200, 0, (double[]){0, 50, 100, 150, 200}, 5);
    /* negative ranges, and ranges across zero */
    ticks_are(-5, -1, 0, (double[]){-5, -4, -3, -2, -1}, 5);
    ticks_are(-0.7, 0.25, 0, (double[]){-0.8, -0.6, -0.4, -0.2, 0, 0.2, 0.4}, 7);
    /* tiny (learning rates) and huge magnitudes */
    ticks_are(1e-7, 3e-7, 0, (double[]){1e-7, 1.5e-7, 2e-7, 2.5e-7, 3e-7}, 5);
    ticks_are(1e20, 5e20, 0, (double[]){1e20, 2e20, 3e20, 4e20, 5e20}, 5);
    ticks_are(0, 1e300, 0, (double[]){0, 2e299, 4e299, 6e299, 8e299, 1e300}, 6);
    /* ticks are the doubles nearest the decimals: 0.1 steps hit 0.3 exactly */
    ZnPlotTicks t = ticks_of(0, 0.7, 0);
    assert_true(t.v[3] == 0.3);
}

/* spec: Z-PLOT-007 */
static void test_ticks_property(void **state) {
    (void)state;
    /* many ranges, a fixed LCG: 4..8 ticks, a nice even step, the range
       covered, and by less than one step on either side */
    uint64_t r = 12345;
    for (int it = 0; it < 20000; it++) {
        double u[3];
        for (int j = 0; j < 3; j++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            u[j] = (double)(r >> 11) / 9007199254740992.0;
        }
        double mag = pow(10.0, floor(u[0] * 40) - 20);
        double lo = (u[1] - 0.5) * 10 * mag, hi = lo + u[2] * 10 * mag + 1e-3 * mag;
        ZnPlotTicks t = ticks_of(lo, hi, 0);
        if (t.n < 4 || t.n > 8) fail_msg("%g..%g: %d ticks", lo, hi, t.n);
        assert_nice_step(&t);
        double s = t.v[1] - t.v[0];
        if (!(t.lo <= lo + 1e-9 * s && t.hi >= hi - 1e-9 * s)) fail_msg("%g..%g not covered", lo, hi);
        if (!(lo - t.lo < s && t.hi - hi < s)) fail_msg("%g..%g: axis a whole step too wide", lo, hi);
    }
}

/* spec: Z-PLOT-008 */
static void test_ticks_degenerate(void **state) {
    (void)state;
    /* a constant series: its value in the middle of a v +- 10% axis */
    ticks_are(1, 1, 0, (double[]){0.9, 0.95, 1, 1.05, 1.1}, 5);
    ticks_are(0, 0, 0, (double[]){-1, -0.5, 0, 0.5, 1}, 5);
    ZnPlotTicks t = ticks_of(-65536, -65536, 0);
    assert_true(t.n >= 4 && t.n <= 8 && t.lo < -65536 && t.hi > -65536);
    /* narrower than 1e-9 of the magnitude: drawn as constant */
    t = ticks_of(1.0, 1.0 + 1e-12, 0);
    assert_true(t.n >= 4 && t.lo < 1.0 && t.hi > 1.0);
    t = ticks_of(1e-250, 2e-250, 0);
    assert_true(t.n >= 4 && t.n <= 8);
    /* too wide for a double, or not finite: errors */
    ticks_refused(-1e308, 1e308, 0, "too wide");
    ticks_refused(0, 1.7e308, 0, NULL);
    ticks_refused(0, INFINITY, 0, NULL);
    ticks_refused(NAN, 1, 0, NULL);
    ticks_refused(2, 1, 0, NULL);
}

/* spec: Z-PLOT-009 */
static void test_ticks_log(void **state) {
    (void)state;
    /* a loss scale from 65536 down to 1: six decades, powers of ten */
    ticks_are(1, 65536, 1, (double[]){1, 10, 100, 1000, 1e4, 1e5}, 6);
    /* 2048..65536: between one and three decades, the 1-2-5 sequence */
    ticks_are(2048, 65536, 1, (double[]){2000, 5000, 1e4, 2e4, 5e4, 1e5}, 6);
    ticks_are(0.5, 9, 1, (double[]){0.5, 1, 2, 5, 10}, 5);
    /* under a decade: the linear ticks */
    ticks_are(2.3, 2.31, 1, (double[]){2.3, 2.302, 2.304, 2.306, 2.308, 2.31}, 6);
    /* 11 decades: every second power of ten, at most 8 */
    ticks_are(1e-8, 1e3, 1, (double[]){1e-8, 1e-6, 1e-4, 1e-2, 1, 1e2, 1e4}, 7);
    ZnPlotTicks t = ticks_of(1e-300, 1e300, 1);
    assert_true(t.n >= 2 && t.n <= 8 && t.lo <= 1e-300 && t.hi >= 1e300);
    /* a constant */
    t = ticks_of(65536, 65536, 1);
    assert_true(t.n >= 2 && t.n <= 8 && t.lo < 65536 && t.hi > 65536 && t.lo > 0);
    /* every log tick set is positive, increasing, covers the data */
    for (double lo = 1e-6; lo < 1e6; lo *= 3.7)
        for (double f = 1.01; f < 1e9; f *= 4.3) {
            t = ticks_of(lo, lo * f, 1);
            assert_true(t.n >= 2 && t.n <= 8 && t.lo > 0 && t.lo <= lo && t.hi >= lo * f * (1 - 1e-12));
            for (int i = 1; i < t.n; i++) assert_true(t.v[i] > t.v[i - 1]);
        }
    ticks_refused(0, 10, 1, NULL);
    ticks_refused(1e-320, 10, 1, NULL);
}

/* spec: Z-PLOT-010 */
static void test_tick_labels(void **state) {
    (void)state;
    ZnPlotTicks t;
    char a[64], b[64];
    t = ticks_of(0, 100, 0);
    zn_plot_tick_label(&t, t.v[1], a, sizeof a);
    assert_string_equal(a, "20");
    t = ticks_of(0, 0.0002, 0);
    zn_plot_tick_label(&t, t.v[t.n - 1], a, sizeof a);
    assert_string_equal(a, "0.0002");
    t = ticks_of(1e-5, 3e-5, 0);
    zn_plot_tick_label(&t, t.v[0], a, sizeof a);
    assert_string_equal(a, "1e-05");
    t = ticks_of(0, 70000, 0);
    zn_plot_tick_label(&t, 65536, a, sizeof a);
    assert_string_equal(a, "65536");
    zn_plot_tick_label(&t, -0.0, a, sizeof a);
    assert_string_equal(a, "0");
    /* 2.3..2.30001 needs 7 digits to tell the ticks apart */
    t = ticks_of(2.3, 2.30001, 0);
    assert_true(t.prec >= 7);
    for (int i = 1; i < t.n; i++) {
        zn_plot_tick_label(&t, t.v[i - 1], a, sizeof a);
        zn_plot_tick_label(&t, t.v[i], b, sizeof b);
        if (!strcmp(a, b)) fail_msg("ticks %d and %d both read '%s'", i - 1, i, a);
    }
}

/* ---- CSV ---------------------------------------------------------------- */

/* spec: Z-PLOT-003 */
static void test_csv_by_header_name(void **state) {
    (void)state;
    static const struct { const char *text; ZnPlotMetric m; int n; double x[3], y[3]; } C[] = {
        /* zinc's own header */
        {HDR "1,2.5,0.001,0.7,65536,0,16,1.5\n2,2.25,0.001,0.6,65536,0,32,1.4\n", ZN_PLOT_LOSS, 2, {1, 2}, {2.5, 2.25}},
        /* reordered, with unknown columns (peak memory) holding non-numbers */
        {"peak_mem,loss,note,step\n1024,3.5,warm up,7\n2048,3.25,x y z,8\n", ZN_PLOT_LOSS, 2, {7, 8}, {3.5, 3.25}},
        /* a newer log: zinc's columns plus appended ones */
        {"step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms,peak_bytes,x\n1,2,0.1,0.5,1,0,8,1.0,999,?\n",
         ZN_PLOT_LR, 1, {1}, {0.1}},
        /* BOM, CRLF, spaces around fields, blank lines, no final newline */
        {"\xEF\xBB\xBF step , loss \r\n\r\n 1 , 4 \r\n\n2,3\r\n   \n3,2", ZN_PLOT_LOSS, 3, {1, 2, 3}, {4, 3, 2}},
        /* file order is kept, even when steps go back (a log appended
         * after a restart from a checkpoint) */
        {"step,loss\n10,1\n11,0.9\n5,1.5\n", ZN_PLOT_LOSS, 3, {10, 11, 5}, {1, 0.9, 1.5}},
    };
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        ZnPlotRun r = csv_of(C[i].text, C[i].m);
        assert_int_equal(r.n, C[i].n);
        for (int k = 0; k < C[i].n; k++)
            if (r.x[k] != C[i].x[k] || r.y[k] != C[i].y[k])
                fail_msg("case %zu, point %d: (%g, %g), expected (%g, %g)", i, k, r.x[k], r.y[k], C[i].x[k], C[i].y[k]);
        zn_plot_run_free(&r);
    }
}

/* spec: Z-PLOT-005 */
static void test_csv_metric_columns(void **state) {
    (void)state;
    const char *text = HDR "3,2.5,0.0001,0.75,1024,0,48,1.5\n";
    const double want[ZN_PLOT_NMETRICS] = {2.5, 0.75, 0.0001, 1024};
    for (int m = 0; m < ZN_PLOT_NMETRICS; m++) {
        ZnPlotRun r = csv_of(text, (ZnPlotMetric)m);
        assert_true(r.n == 1 && r.x[0] == 3 && r.y[0] == want[m]);
        zn_plot_run_free(&r);
    }
    ZnPlotMetric m;
    ZnErr err = {0};
    assert_int_equal(zn_plot_metric_parse("scale", &m, &err), 0);
    assert_int_equal(m, ZN_PLOT_SCALE);
    assert_string_equal(zn_plot_metric_column(m), "loss_scale");
    assert_string_equal(zn_plot_metric_label(m), "loss scale");
    assert_int_equal(zn_plot_metric_parse("loss_scale", &m, &err), 0);
    assert_int_equal(m, ZN_PLOT_SCALE);
    assert_int_equal(zn_plot_metric_parse("grad_norm", &m, &err), 0);
    assert_int_equal(m, ZN_PLOT_GRAD_NORM);
    assert_int_equal(zn_plot_metric_parse("lr", &m, &err), 0);
    assert_int_equal(m, ZN_PLOT_LR);
    assert_string_equal(zn_plot_metric_label(m), "learning rate");
    assert_int_equal(zn_plot_metric_parse("accuracy", &m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "'accuracy'");
}

/* spec: Z-PLOT-006 */
static void test_csv_gaps(void **state) {
    (void)state;
    const char *text = HDR
        "1,2.0,0.1,0.5,8,0,8,1\n"
        "2,nan,0.1,-1,8,0,8,1\n"      /* loss nan; grad_norm not computed */
        "3,inf,0.1,0.4,4,1,8,1\n"     /* loss inf; a skipped step */
        "4,-nan,0.1,nan,4,0,8,1\n"
        "5,,0.1,,4,,8,1\n"            /* empty fields; empty skipped = not skipped */
        "6,1.5,0.1,0.3,4,0,8,1\n"
        "7,1e999,0.1,1e999,4,0,8,1\n";
    ZnPlotRun r = csv_of(text, ZN_PLOT_LOSS);
    assert_int_equal(r.n, 7);
    int gap_loss[7] = {0, 1, 1, 1, 1, 0, 1};
    for (int i = 0; i < 7; i++) assert_int_equal(isnan(r.y[i]) != 0, gap_loss[i]);
    zn_plot_run_free(&r);
    r = csv_of(text, ZN_PLOT_GRAD_NORM);
    int gap_gn[7] = {0, 1, 1, 1, 1, 0, 1};   /* -1 and skipped=1 are gaps */
    for (int i = 0; i < 7; i++) assert_int_equal(isnan(r.y[i]) != 0, gap_gn[i]);
    zn_plot_run_free(&r);
    /* a skipped step stays on the loss scale curve (the scale drop shows) */
    r = csv_of(text, ZN_PLOT_SCALE);
    assert_true(r.y[2] == 4);
    zn_plot_run_free(&r);
    /* any negative grad_norm is a gap, and any non-zero skipped */
    r = csv_of("step,grad_norm,skipped\n1,-0.5,0\n2,0.5,2\n3,0.5,0\n", ZN_PLOT_GRAD_NORM);
    assert_true(isnan(r.y[0]) && isnan(r.y[1]) && r.y[2] == 0.5);
    zn_plot_run_free(&r);
    /* without a skipped column grad_norm is read alone */
    r = csv_of("step,grad_norm\n1,0.5\n", ZN_PLOT_GRAD_NORM);
    assert_true(r.n == 1 && r.y[0] == 0.5);
    zn_plot_run_free(&r);
}

/* spec: Z-PLOT-004 */
static void test_csv_errors(void **state) {
    (void)state;
    ZnPlotRun r;
    ZnErr err = {0};
    /* the brief's own example: file and line, fields expected and got */
    const char *short_row = HDR "1,2,3,4,5,0,7,8\n1,2\n";
    assert_int_equal(zn_plot_parse_csv("loss.csv", short_row, strlen(short_row), ZN_PLOT_LOSS, &r, &err),
                     ZN_E_CORRUPT);
    assert_string_equal(err.msg, "loss.csv:3: expected 8 fields, got 2");
    assert_null(r.x);
    csv_refused_is(HDR "1,2,3,4,5,0,7,8,9\n", ZN_PLOT_LOSS, "t.csv:2: expected 8 fields, got 9");
    /* a malformed number: file, line, column name and field */
    csv_refused_is(HDR "1,2,3,4,5,0,7,8\n\n2,abc,3,4,5,0,7,8\n", ZN_PLOT_LOSS,
                   "t.csv:4: column 'loss' (field 2): not a number: 'abc'");
    csv_refused(HDR "1,2.5x,3,4,5,0,7,8\n", ZN_PLOT_LOSS, "t.csv:2: column 'loss'");
    csv_refused(HDR "1x,2,3,4,5,0,7,8\n", ZN_PLOT_LOSS, "t.csv:2: column 'step' (field 1)");
    csv_refused(HDR "1,2,3,4,5,yes,7,8\n", ZN_PLOT_GRAD_NORM, "t.csv:2: column 'skipped' (field 6)");
    /* a bad field in a column the metric does not use is not read */
    r = csv_of(HDR "1,2,3,4,5,yes,7,8\n", ZN_PLOT_LOSS);
    zn_plot_run_free(&r);
    /* a step must be a finite number */
    csv_refused("step,loss\n,1\n", ZN_PLOT_LOSS, "t.csv:2: column 'step'");
    csv_refused("step,loss\nnan,1\n", ZN_PLOT_LOSS, "t.csv:2: column 'step'");
    /* the metric's column, or step, missing from the header */
    csv_refused("step,lr\n1,0.1\n", ZN_PLOT_LOSS, "t.csv:1: the header has no 'loss' column");
    csv_refused("step,loss\n1,2\n", ZN_PLOT_SCALE, "no 'loss_scale' column");
    csv_refused("\n\niter,loss\n1,2\n", ZN_PLOT_LOSS, "t.csv:3: the header has no 'step' column");
    csv_refused("step,loss,loss\n1,2,3\n", ZN_PLOT_LOSS, "t.csv:1: column 'loss' appears twice");
    /* empty files and a header without rows */
    csv_refused_is("", ZN_PLOT_LOSS, "t.csv:1: empty file, expected a CSV header line");
    csv_refused("\n  \r\n", ZN_PLOT_LOSS, "empty file");
    csv_refused_is(HDR, ZN_PLOT_LOSS, "t.csv:1: no data rows after the header");
    /* a cut-short last line (a run still writing) is reported, not guessed */
    csv_refused_is(HDR "1,2,3,4,5,0,7,8\n2,2.1,0.00", ZN_PLOT_LOSS, "t.csv:3: expected 8 fields, got 3");
    /* files: missing, a directory */
    assert_int_equal(zn_plot_read_csv(zt_path("missing.csv"), ZN_PLOT_LOSS, &r, &err), ZN_E_IO);
    assert_str_contains(err.msg, "missing.csv");
    assert_str_contains(err.msg, "No such file");
    assert_int_equal(zn_plot_read_csv(zt_tmpdir(), ZN_PLOT_LOSS, &r, &err), ZN_E_IO);
    assert_str_contains(err.msg, zt_tmpdir());
}

/* spec: Z-PLOT-002 */
static void test_default_names(void **state) {
    (void)state;
    const char *cases[][2] = {{"logs/resume_uc.csv", "resume_uc"}, {"baseline.csv", "baseline"},
                              {"a.b.csv", "a.b"}, {"/abs/dir/x", "x"}, {".hidden", ".hidden"},
                              {"d.v1/run", "run"}, {"dir/.h.csv", ".h"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = zn_plot_default_name(cases[i][0]);
        assert_non_null(s);
        assert_string_equal(s, cases[i][1]);
        free(s);
    }
    /* read_csv names the run after the file */
    zt_write_text(zt_path("base_run.csv"), "step,loss\n1,2\n");
    ZnPlotRun r;
    ZnErr err = {0};
    assert_int_equal(zn_plot_read_csv(zt_path("base_run.csv"), ZN_PLOT_LOSS, &r, &err), 0);
    assert_string_equal(r.name, "base_run");
    zn_plot_run_free(&r);
}

/* ---- SVG ---------------------------------------------------------------- */

/* three runs like the universal-checkpoint demo: a baseline over 1..200 and
   two resumed over 101..200, one with gaps */
static void demo_runs(ZnPlotRun *runs) {
    double x[200], y[200];
    for (int i = 0; i < 200; i++) x[i] = i + 1, y[i] = 2.3 * exp(-(i + 1) / 60.0) + 0.4;
    runs[0] = make_run("baseline", 200, x, y);
    runs[1] = make_run("resume_no_uc", 100, x + 100, y + 100);
    for (int i = 100; i < 200; i++) y[i] += 0.01;
    y[150] = NAN;
    y[151] = NAN;
    y[170] = NAN;
    runs[2] = make_run("resume_uc", 100, x + 100, y + 100);
}

/* spec: Z-PLOT-011 */
static void test_svg_well_formed(void **state) {
    (void)state;
    /* the checker itself rejects what it must */
    const char *bad[] = {"<a><b></a></b>", "<a x=1/>", "<a>&</a>", "<a>&bogus;</a>", "<a x=\"<\"/>",
                         "<a/><b/>", "<a>", "text<a/>", "<a x=\"1\" x=\"2\"/>", "<a x=\"1\"y=\"2\"/>",
                         "<a>\x01</a>", "<a>\xC3</a>", "</a>", "<a x=\"1/>"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!xml_check(bad[i])) fail_msg("checker accepts '%s'", bad[i]);
    assert_null(xml_check("<?xml version=\"1.0\"?>\n<a x='1' y=\"&amp;&#10;&#x41;\"><b/>t&lt;<!-- c --></a>\n"));

    ZnPlotRun runs[3];
    demo_runs(runs);
    ZnPlotOpts o = {ZN_PLOT_LOSS, "Universal checkpoint: resume tracks baseline", 0};
    char *svg = svg_of(runs, 3, &o);
    assert_well_formed(svg);
    const char *head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
                       "width=\"800\" height=\"500\" viewBox=\"0 0 800 500\"";
    assert_true(!strncmp(svg, head, strlen(head)));
    /* the first child: a white background rect over the whole chart */
    const char *rect = strstr(svg, "<rect");
    assert_non_null(rect);
    assert_true(rect == strchr(strchr(svg + 40, '>') + 1, '<'));
    assert_str_contains(svg, "<rect class=\"background\" x=\"0\" y=\"0\" width=\"800\" height=\"500\" fill=\"#ffffff\"/>");
    /* deterministic: same input, same bytes */
    char *again = svg_of(runs, 3, &o);
    assert_string_equal(svg, again);
    free(again);
    /* log axis and every metric label also produce well-formed output */
    for (int m = 0; m < ZN_PLOT_NMETRICS; m++) {
        ZnPlotOpts lo = {(ZnPlotMetric)m, NULL, m % 2};
        char *s = svg_of(runs, 3, &lo);
        const char *why = xml_check(s);
        if (why) fail_msg("metric %d: %s", m, why);
        free(s);
    }
    free(svg);
    for (int k = 0; k < 3; k++) zn_plot_run_free(&runs[k]);
}

/* spec: Z-PLOT-012 */
static void test_svg_one_path_per_run(void **state) {
    (void)state;
    enum { N = 23 };
    ZnPlotRun runs[N];
    double x[3] = {1, 2, 3}, y[3];
    for (int k = 0; k < N; k++) {
        char name[16];
        snprintf(name, sizeof name, "r%02d", k);
        for (int i = 0; i < 3; i++) y[i] = k + i;
        runs[k] = make_run(name, 3, x, y);
    }
    ZnPlotOpts o = {ZN_PLOT_LOSS, NULL, 0};
    char *svg = svg_of(runs, N, &o);
    assert_well_formed(svg);
    assert_int_equal(zt_count_of(svg, "<path"), N);
    assert_int_equal(zt_count_of(svg, "<path class=\"run\""), N);
    static const char *tab10[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    const char *prev = svg;
    for (int k = 0; k < N; k++) {
        char want[64];
        snprintf(want, sizeof want, "<path class=\"run\" data-run=\"r%02d\"", k);
        const char *p = strstr(svg, want);
        if (!p) fail_msg("no path for run %d", k);
        assert_true(p > prev);   /* argument order: later runs draw over earlier */
        prev = p;
        const char *end = strchr(p, '>');
        char el[4096];
        snprintf(el, sizeof el, "%.*s", (int)(end - p), p);
        char col[32];
        snprintf(col, sizeof col, "stroke=\"%s\"", tab10[k % 10]);
        assert_str_contains(el, col);
        assert_str_contains(el, "stroke-width=\"1.5\"");
        assert_str_contains(el, "fill=\"none\"");
        /* the first ten solid, the next ten dashed, then dotted */
        if (k < 10) assert_null(strstr(el, "stroke-dasharray"));
        else if (k < 20) assert_str_contains(el, "stroke-dasharray=\"7 4\"");
        else assert_str_contains(el, "stroke-dasharray=\"1.5 3.5\"");
    }
    free(svg);
    for (int k = 0; k < N; k++) zn_plot_run_free(&runs[k]);
}

/* The d attribute of the path of run `name` (static buffer). */
static const char *path_d(const char *svg, const char *name) {
    static char d[1 << 16];
    char want[128];
    snprintf(want, sizeof want, "data-run=\"%s\"", name);
    const char *p = strstr(svg, want);
    assert_non_null(p);
    p = strstr(p, " d=\"");
    assert_non_null(p);
    p += 4;
    const char *e = strchr(p, '"');
    snprintf(d, sizeof d, "%.*s", (int)(e - p), p);
    return d;
}

/* spec: Z-PLOT-006 */
/* spec: Z-PLOT-012 */
static void test_svg_gaps(void **state) {
    (void)state;
    /* points: ok ok gap ok gap gap ok ok ok gap -> subpaths of 2, 1 (a dot), 3 */
    double x[10], y[10] = {1, 2, NAN, 3, INFINITY, NAN, 4, 5, 6, NAN};
    for (int i = 0; i < 10; i++) x[i] = i;
    ZnPlotRun r = make_run("g", 10, x, y);
    ZnPlotOpts o = {ZN_PLOT_LOSS, NULL, 0};
    char *svg = svg_of(&r, 1, &o);
    const char *d = path_d(svg, "g");
    assert_int_equal(zt_count_of(d, "M"), 3);
    assert_int_equal(zt_count_of(d, "L"), 1 + 2);
    assert_int_equal(zt_count_of(d, "l0,0"), 1);   /* the lone point is a dot */
    free(svg);
    /* on a log axis values <= 0 are gaps too */
    double yl[5] = {1, 0, 10, -3, 100};
    ZnPlotRun rl = make_run("l", 5, x, yl);
    ZnPlotOpts ol = {ZN_PLOT_SCALE, NULL, 1};
    svg = svg_of(&rl, 1, &ol);
    d = path_d(svg, "l");
    assert_int_equal(zt_count_of(d, "M"), 3);
    assert_int_equal(zt_count_of(d, "L"), 0);
    assert_int_equal(zt_count_of(d, "l0,0"), 3);
    assert_str_contains(svg, "loss scale (log scale)");
    free(svg);
    /* a run with no drawable point keeps its (empty) path and legend entry */
    double yn[2] = {NAN, NAN};
    ZnPlotRun two[2] = {make_run("ok", 3, x, y), make_run("empty", 2, x, yn)};
    svg = svg_of(two, 2, &o);
    assert_string_equal(path_d(svg, "empty"), "");
    assert_int_equal(zt_count_of(svg, "<path class=\"run\""), 2);
    assert_str_contains(svg, ">empty</text>");
    free(svg);
    zn_plot_run_free(&r);
    zn_plot_run_free(&rl);
    zn_plot_run_free(&two[0]);
    zn_plot_run_free(&two[1]);
}

/* the line elements of a group, as x1,y1,x2,y2 */
static int group_lines(const char *svg, const char *cls, double out[][4], int cap) {
    char want[64];
    snprintf(want, sizeof want, "<g class=\"%s\"", cls);
    const char *p = strstr(svg, want);
    assert_non_null(p);
    const char *end = strstr(p, "</g>");
    int n = 0;
    while ((p = strstr(p, "<line ")) && p < end && n < cap) {
        assert_int_equal(sscanf(p, "<line x1=\"%lf\" y1=\"%lf\" x2=\"%lf\" y2=\"%lf\"", &out[n][0], &out[n][1],
                                &out[n][2], &out[n][3]), 4);
        n++;
        p++;
    }
    return n;
}

/* spec: Z-PLOT-014 */
static void test_svg_points_inside_plot_area(void **state) {
    (void)state;
    ZnPlotRun runs[3];
    demo_runs(runs);
    for (int logy = 0; logy < 2; logy++) {
        ZnPlotOpts o = {ZN_PLOT_LOSS, NULL, logy};
        char *svg = svg_of(runs, 3, &o);
        double ax[32][4];
        assert_true(group_lines(svg, "axes", ax, 32) >= 2);
        double l = ax[0][0], r = ax[0][2], b = ax[0][1], t = ax[1][1];   /* x axis, then y axis */
        assert_true(l < r && t < b && l > 0 && r < ZN_PLOT_WIDTH && t > 0 && b < ZN_PLOT_HEIGHT);
        double minx = 1e9, maxx = -1e9, miny = 1e9, maxy = -1e9;
        const char *names[3] = {"baseline", "resume_no_uc", "resume_uc"};
        for (int k = 0; k < 3; k++) {
            const char *d = path_d(svg, names[k]);
            for (const char *p = d; *p;) {
                if (*p == 'M' || *p == 'L') {
                    double px, py;
                    assert_int_equal(sscanf(p + 1, "%lf,%lf", &px, &py), 2);
                    if (px < l - 0.01 || px > r + 0.01 || py < t - 0.01 || py > b + 0.01)
                        fail_msg("run %s point %g,%g outside %g..%g x %g..%g", names[k], px, py, l, r, t, b);
                    /* a resumed run starts at the middle of the x axis */
                    if (k > 0 && p == d) assert_true(fabs(px - (l + r) / 2) < 1.01 * (r - l) / 200);
                    minx = fmin(minx, px), maxx = fmax(maxx, px);
                    miny = fmin(miny, py), maxy = fmax(maxy, py);
                }
                p++;
            }
        }
        /* the data reach both ends of the x axis (steps 0..200, data 1..200) */
        assert_true(maxx > r - 0.01 && minx < l + 0.01 * (r - l));
        free(svg);
    }
    for (int k = 0; k < 3; k++) zn_plot_run_free(&runs[k]);
}

/* Every legend text fits on the chart, at 0.6 em per code point (font 12);
   entities count as one character. */
static void assert_legend_on_chart(const char *svg) {
    const char *lg = strstr(svg, "<g class=\"legend\"");
    assert_non_null(lg);
    int n = 0;
    for (const char *p = lg; (p = strstr(p, "<text x=\"")); p++, n++) {
        double x = atof(p + 9);
        const char *t = strchr(p, '>') + 1, *e = strstr(t, "</text>");
        int cps = 0;
        for (const char *q = t; q < e; q++) {
            if (*q == '&') q = strchr(q, ';');
            if ((*q & 0xC0) != 0x80) cps++;
        }
        if (x + cps * 0.6 * 12 > ZN_PLOT_WIDTH) fail_msg("legend text '%.*s' at x=%g runs off the chart", (int)(e - t), t, x);
    }
    assert_true(n > 0);
}

/* spec: Z-PLOT-013 */
static void test_svg_layout(void **state) {
    (void)state;
    ZnPlotRun runs[3];
    demo_runs(runs);
    free(runs[2].name);
    runs[2].name = strdup("a_run_name_much_longer_than_the_legend_allows");
    ZnPlotOpts o = {ZN_PLOT_GRAD_NORM, NULL, 0};
    char *svg = svg_of(runs, 3, &o);
    assert_well_formed(svg);
    double ax[32][4], grid[32][4];
    group_lines(svg, "axes", ax, 32);
    double r = ax[0][2];
    /* axis lines, tick marks at every tick, grid lines at every tick */
    int ng = group_lines(svg, "grid", grid, 32);
    int na = group_lines(svg, "axes", ax, 32);
    assert_int_equal(na, 2 + ng);
    assert_true(ng >= 8 && ng <= 16);
    assert_int_equal(zt_count_of(svg, "<g class=\"ticks\""), 1);
    /* the grid comes before the curves (under them), the legend after */
    assert_true(strstr(svg, "class=\"grid\"") < strstr(svg, "class=\"run\""));
    assert_true(strstr(svg, "class=\"legend\"") > strstr(svg, "data-run=\"a_run"));
    /* titles: default title and y title are the metric label */
    assert_str_contains(svg, ">step</text>");
    assert_str_contains(svg, "class=\"ylabel\"");
    assert_str_contains(svg, "rotate(-90)");
    assert_str_contains(svg, "font-weight=\"bold\" text-anchor=\"middle\">grad norm</text>");
    /* the legend lies right of the plot area, never over a curve */
    const char *lg = strstr(svg, "<g class=\"legend\"");
    static const char *xattr[3] = {" x=\"", " x1=\"", " x2=\""};
    int nx = 0;
    for (int a = 0; a < 3; a++)
        for (const char *p = lg; (p = strstr(p, xattr[a])); p++, nx++) {
            double v = atof(p + strlen(xattr[a]));
            if (v <= r) fail_msg("legend element at x=%g inside the plot area (right edge %g)", v, r);
        }
    assert_int_equal(nx, 3 * 3);   /* a line (x1, x2) and a text (x) per run */
    assert_int_equal(zt_count_of(lg, "<line"), 3);
    /* a long name is cut in the legend, whole in data-run */
    assert_str_contains(lg, ">a_run_name_much_longer_t\xE2\x80\xA6</text>");
    assert_str_contains(svg, "data-run=\"a_run_name_much_longer_than_the_legend_allows\"");
    assert_legend_on_chart(svg);
    free(svg);
    for (int k = 0; k < 3; k++) zn_plot_run_free(&runs[k]);

    /* more runs than the legend has rows: "... and N more" */
    enum { N = 40 };
    ZnPlotRun many[N];
    double x[2] = {1, 2}, y[2] = {1, 2};
    for (int k = 0; k < N; k++) {
        char name[16];
        snprintf(name, sizeof name, "run%d", k);
        many[k] = make_run(name, 2, x, y);
    }
    svg = svg_of(many, N, &o);
    assert_well_formed(svg);
    assert_int_equal(zt_count_of(svg, "<path class=\"run\""), N);
    lg = strstr(svg, "<g class=\"legend\"");
    int shown = zt_count_of(lg, "<line");
    assert_true(shown > 10 && shown < N);
    char more[64];
    snprintf(more, sizeof more, "\xE2\x80\xA6 and %d more</text>", N - shown);
    assert_str_contains(lg, more);
    assert_legend_on_chart(svg);
    free(svg);
    /* a long title next to a wide legend: cut, and kept on the chart */
    char title[256];
    memset(title, 'W', 200);
    title[200] = 0;
    ZnPlotOpts ot = {ZN_PLOT_LOSS, title, 0};
    svg = svg_of(many, 2, &ot);
    const char *tt = strstr(svg, "<text class=\"title\" x=\"");
    assert_non_null(tt);
    double tx = atof(tt + strlen("<text class=\"title\" x=\""));
    const char *txt = strchr(tt, '>') + 1;
    int ncp = (int)(strstr(txt, "</text>") - txt) - 3 + 1;   /* 'W's, plus the 3-byte "…" */
    assert_true(ncp > 40 && ncp < 100);
    assert_str_contains(txt, "W\xE2\x80\xA6</text>");
    /* at 0.6 em (15 px) per glyph the text stays inside the 800 px chart */
    double half = 0.5 * ncp * 0.6 * 15;
    if (tx - half < 0 || tx + half > ZN_PLOT_WIDTH) fail_msg("title at x=%g, %d glyphs, leaves the chart", tx, ncp);
    free(svg);
    for (int k = 0; k < N; k++) zn_plot_run_free(&many[k]);
}

/* spec: Z-PLOT-015 */
static void test_svg_escaping(void **state) {
    (void)state;
    double x[2] = {1, 2}, y[2] = {1, 2};
    ZnPlotRun runs[3] = {make_run("a<b&\"c\"", 2, x, y),
                         make_run("tab\there 'q' >\x01\xFF\xC3\xA9\xEF\xBF\xBE", 2, x, y),
                         make_run("]]>", 2, x, y)};
    ZnPlotOpts o = {ZN_PLOT_LOSS, "<title> & \"quotes\" \xE2\x9C\x93", 0};
    char *svg = svg_of(runs, 3, &o);
    assert_well_formed(svg);
    assert_str_contains(svg, "data-run=\"a&lt;b&amp;&quot;c&quot;\"");
    assert_str_contains(svg, ">a&lt;b&amp;&quot;c&quot;</text>");
    /* tab kept as a reference; control byte, invalid byte and U+FFFE become
       U+FFFD; valid UTF-8 (e acute) passes through */
    assert_str_contains(svg, "data-run=\"tab&#9;here &apos;q&apos; &gt;\xEF\xBF\xBD\xEF\xBF\xBD\xC3\xA9\xEF\xBF\xBD\"");
    assert_str_contains(svg, "data-run=\"]]&gt;\"");
    assert_str_contains(svg, ">&lt;title&gt; &amp; &quot;quotes&quot; \xE2\x9C\x93</text>");
    assert_int_equal(zt_count_of(svg, "<path class=\"run\""), 3);
    free(svg);
    for (int k = 0; k < 3; k++) zn_plot_run_free(&runs[k]);
}

/* spec: Z-PLOT-016 */
static void test_atomic_write(void **state) {
    (void)state;
    ZnPlotRun runs[3];
    demo_runs(runs);
    ZnPlotOpts o = {ZN_PLOT_LOSS, NULL, 0};
    ZnErr err = {0};
    char p1[256], p2[256];
    const char *out = tpath_keep(p1, sizeof p1, "atomic.svg"), *tmp = tpath_keep(p2, sizeof p2, "atomic.svg.tmp");
    zt_write_text(out, "old contents");
    assert_int_equal(zn_plot_write(out, runs, 3, &o, &err), 0);
    assert_false(zt_file_exists(tmp));
    char *s = zt_read_text(out);
    assert_non_null(s);
    assert_true(!strncmp(s, "<?xml", 5));
    assert_true(strstr(s, "</svg>\n") == s + strlen(s) - 7);
    assert_well_formed(s);
    free(s);
    /* a failure after the temporary was opened (nothing to plot) removes it
       and leaves the old file as it was */
    zt_write_text(out, "old contents");
    double x[1] = {1}, y[1] = {NAN};
    ZnPlotRun none = make_run("none", 1, x, y);
    assert_int_equal(zn_plot_write(out, &none, 1, &o, &err), ZN_E_USAGE);
    assert_false(zt_file_exists(tmp));
    s = zt_read_text(out);
    assert_string_equal(s, "old contents");
    free(s);
    /* a directory that does not exist: an I/O error naming the path */
    assert_int_equal(zn_plot_write(zt_path("no/such/dir.svg"), runs, 3, &o, &err), ZN_E_IO);
    assert_str_contains(err.msg, "no/such/dir.svg.tmp");
    zn_plot_run_free(&none);
    for (int k = 0; k < 3; k++) zn_plot_run_free(&runs[k]);
}

/* spec: Z-PLOT-017 */
static void test_nothing_to_plot(void **state) {
    (void)state;
    double x[2] = {1, 2}, y[2] = {NAN, INFINITY}, yneg[2] = {-1, 0};
    ZnPlotRun r[2] = {make_run("a", 2, x, y), make_run("b", 2, x, yneg)};
    ZnPlotOpts o = {ZN_PLOT_LOSS, NULL, 0};
    ZnErr err = {0};
    FILE *f = tmpfile();
    assert_int_equal(zn_plot_svg(f, r, 1, &o, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "nothing to plot: no run has a finite 'loss' value");
    o.logy = 1;
    assert_int_equal(zn_plot_svg(f, r, 2, &o, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "nothing to plot: no run has a positive 'loss' value");
    assert_int_equal(zn_plot_svg(f, r, 0, &o, &err), ZN_E_USAGE);
    fclose(f);
    zn_plot_run_free(&r[0]);
    zn_plot_run_free(&r[1]);
}

/* ---- the command -------------------------------------------------------- */

/* Runs zn_cmd_plot with stdout and stderr captured; returns the exit status. */
static int run_cmd(int argc, const char **argv, char *errbuf, size_t cap) {
    char *out, *errs;
    int rc = zt_capture(zn_cmd_plot, argc, argv, &out, &errs);
    snprintf(errbuf, cap, "%s", errs);
    free(out);
    free(errs);
    return rc;
}

/* RUN("a.csv", "-o", "x.svg"): the arguments as a compound-literal array */
#define RUN(...)                                                                          \
    run_cmd((int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)),         \
            (const char *[]){__VA_ARGS__}, errbuf, sizeof errbuf)

/* one line on stderr, starting "zinc: error: " and containing `sub` */
static void assert_one_error(const char *errbuf, const char *sub) {
    if (strncmp(errbuf, "zinc: error: ", 13)) fail_msg("stderr '%s' is not a zinc error", errbuf);
    if (zt_count_of(errbuf, "\n") != 1) fail_msg("expected one line, got '%s'", errbuf);
    assert_str_contains(errbuf, sub);
}

/* spec: Z-PLOT-001 */
static void test_cmd_errors(void **state) {
    (void)state;
    char errbuf[4096];
    char pa[256], pb[256], po[256];
    const char *a = tpath_keep(pa, sizeof pa, "a.csv"), *bad = tpath_keep(pb, sizeof pb, "bad.csv"),
               *out = tpath_keep(po, sizeof po, "cmd.svg");
    zt_write_text(a, HDR "1,2,0.1,0.5,8,0,8,1\n2,1.5,0.1,0.5,8,0,8,1\n");
    zt_write_text(bad, HDR "1,2,0.1,0.5,8,0,8,1\n1,2\n");
    assert_int_equal(RUN(a), 2);
    assert_one_error(errbuf, "no output file: give -o OUT.svg");
    assert_int_equal(RUN("-o", out), 2);
    assert_one_error(errbuf, "no CSV files given");
    assert_int_equal(RUN(a, "-o"), 2);
    assert_one_error(errbuf, "-o needs a value");
    assert_int_equal(RUN(a, "-o", out, "--frobnicate"), 2);
    assert_one_error(errbuf, "unknown flag '--frobnicate'");
    assert_int_equal(RUN(a, "-o", out, "--metric", "acc"), 2);
    assert_one_error(errbuf, "--metric: expected loss, grad_norm, lr or scale, got 'acc'");
    assert_int_equal(RUN(a, a, "-o", out, "--names", "x"), 2);
    assert_one_error(errbuf, "--names: 1 name for 2 files");
    assert_int_equal(RUN(a, a, "-o", out, "--names", "x,"), 2);
    assert_one_error(errbuf, "--names: name 2 is empty");
    assert_int_equal(RUN(a, zt_path("nope.csv"), "-o", out), 2);
    assert_one_error(errbuf, "cannot open '");
    assert_str_contains(errbuf, "nope.csv': No such file or directory");
    assert_int_equal(RUN(a, bad, "-o", out), 2);
    assert_one_error(errbuf, "bad.csv:3: expected 8 fields, got 2");
    assert_int_equal(RUN(a, "-o", out, "--metric", "scale", "--logy"), 0);   /* sanity: this one works */
    /* the output may not be an input: by name, and by inode */
    assert_int_equal(RUN(a, "-o", a), 2);
    assert_one_error(errbuf, "is also an input file");
    char alias[300];
    snprintf(alias, sizeof alias, "%s/./a.csv", zt_tmpdir());
    assert_int_equal(RUN(a, "-o", alias), 2);
    assert_one_error(errbuf, "is also an input file");
    char *s = zt_read_text(a);
    assert_true(!strncmp(s, "step,", 5));   /* the log survived */
    free(s);
    /* nothing to plot */
    zt_write_text(zt_path("nan.csv"), "step,loss\n1,nan\n");
    assert_int_equal(RUN(zt_path("nan.csv"), "-o", zt_path("nan.svg")), 2);
    assert_one_error(errbuf, "nothing to plot");
    assert_false(zt_file_exists(zt_path("nan.svg")));
    assert_false(zt_file_exists(zt_path("nan.svg.tmp")));
    /* an unwritable output */
    assert_int_equal(RUN(a, "-o", zt_path("no/dir/x.svg")), 2);
    assert_one_error(errbuf, "cannot write");
    assert_int_equal(RUN("--help"), 0);
}

/* spec: Z-PLOT-001 */
/* spec: Z-PLOT-002 */
static void test_cmd_success(void **state) {
    (void)state;
    char errbuf[4096];
    char p1[256], p2[256], p3[256], p4[256];
    const char *base = tpath_keep(p1, sizeof p1, "baseline.csv"), *res = tpath_keep(p2, sizeof p2, "resume.csv"),
               *empty = tpath_keep(p3, sizeof p3, "empty_gn.csv"), *out = tpath_keep(p4, sizeof p4, "demo.svg");
    zt_write_text(base, HDR "1,2.5,0.001,0.7,65536,0,16,1.5\n2,2.25,0.001,0.6,65536,0,32,1.4\n"
                         "3,2.0,0.001,0.5,65536,0,48,1.4\n");
    zt_write_text(res, "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms,peak_mem\n"
                    "2,2.26,0.001,0.6,65536,0,32,1.4,1000\n3,2.01,0.001,-1,65536,1,48,1.4,1000\n");
    assert_int_equal(RUN(base, res, "-o", out, "--title", "resume vs baseline"), 0);
    assert_string_equal(errbuf, "");
    assert_false(zt_file_exists(zt_path("demo.svg.tmp")));
    char *svg = zt_read_text(out);
    assert_well_formed(svg);
    assert_str_contains(svg, "data-run=\"baseline\"");
    assert_str_contains(svg, "data-run=\"resume\"");
    assert_str_contains(svg, ">resume vs baseline</text>");
    free(svg);
    /* --names, --metric, --logy; a run with no drawable value warns */
    zt_write_text(empty, "step,grad_norm\n1,-1\n2,-1\n");
    assert_int_equal(RUN(base, empty, "--names", "a<b&\"c\",second", "--metric", "grad_norm", "--logy", "--output",
                         out), 0);
    assert_str_contains(errbuf, "zinc: warning: ");
    assert_str_contains(errbuf, "empty_gn.csv: no positive 'grad_norm' value");
    svg = zt_read_text(out);
    assert_well_formed(svg);
    assert_int_equal(zt_count_of(svg, "<path class=\"run\""), 2);
    assert_str_contains(svg, "data-run=\"a&lt;b&amp;&quot;c&quot;\"");
    assert_str_contains(svg, "data-run=\"second\"");
    assert_str_contains(svg, "grad norm (log scale)");
    free(svg);
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_ticks_hand_cases),
    cmocka_unit_test(test_ticks_property),
    cmocka_unit_test(test_ticks_degenerate),
    cmocka_unit_test(test_ticks_log),
    cmocka_unit_test(test_tick_labels),
    cmocka_unit_test(test_csv_by_header_name),
    cmocka_unit_test(test_csv_metric_columns),
    cmocka_unit_test(test_csv_gaps),
    cmocka_unit_test(test_csv_errors),
    cmocka_unit_test(test_default_names),
    cmocka_unit_test(test_svg_well_formed),
    cmocka_unit_test(test_svg_one_path_per_run),
    cmocka_unit_test(test_svg_gaps),
    cmocka_unit_test(test_svg_points_inside_plot_area),
    cmocka_unit_test(test_svg_layout),
    cmocka_unit_test(test_svg_escaping),
    cmocka_unit_test(test_atomic_write),
    cmocka_unit_test(test_nothing_to_plot),
    cmocka_unit_test(test_cmd_errors),
    cmocka_unit_test(test_cmd_success))
