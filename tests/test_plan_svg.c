/* test_plan_svg.c: the picture of a dry run (spec Z-PSVG-*): a well-formed
 * document, bar segments proportional to bytes, the capacity line, the
 * legend of non-zero categories, the timeline adding up to the step total,
 * escaping, refused inputs, and the atomic save.
 *
 * Well-formedness is checked twice, as test_plot.c does: by xml_check (a
 * copy of test_plot.c's small checker) and by Python's xml.dom.minidom when
 * python3 is installed. Numbers are read back from the attributes the
 * writer puts on its elements (class, data-phase, data-cat, ...). */
#include "testutil.h"
#include "xml_check.h"
#include "io/plan_svg.h"
#include "core/fileio.h"

#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------ */

/* Files in zt_tmpdir() whose name contains ".tmp": leftovers of an atomic write. */
static int temporaries(void) {
    DIR *d = opendir(zt_tmpdir());
    assert_non_null(d);
    int k = 0;
    for (struct dirent *e; (e = readdir(d));) k += strstr(e->d_name, ".tmp") != NULL;
    closedir(d);
    return k;
}

/* A plausible stage-2 dry run: 4 categories, 3 phases, 80 GiB, timed. */
static ZnPlanSvg demo(void) {
    ZnPlanSvg p;
    memset(&p, 0, sizeof p);
    p.title = "gpt2-1.5b, ZeRO stage 2, world 8";
    p.ncat = 4;
    p.cat[0] = "params16";
    p.cat[1] = "grads";
    p.cat[2] = "optim";
    p.cat[3] = "activations";
    p.nphase = 3;
    p.phase[0] = "forward";
    p.phase[1] = "backward";
    p.phase[2] = "step";
    const double G = 1073741824.0;
    double mem[3][4] = {{3 * G, 0.5 * G, 2.25 * G, 20 * G}, {3 * G, 1.5 * G, 2.25 * G, 24 * G}, {3 * G, 0.5 * G, 2.25 * G, 0}};
    /* p.mem is [MAX_PHASE][MAX_CAT]: copy row by row */
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < 4; c++) p.mem[i][c] = mem[i][c];
    p.capacity = 80 * G;
    p.timed = 1;
    double compute[3] = {1.25, 2.5, 0.125}, comm[3] = {0.5, 3.0, 0.75}, exposed[3] = {0, 0.5, 0.625};
    memcpy(p.compute, compute, sizeof compute);
    memcpy(p.comm, comm, sizeof comm);
    memcpy(p.exposed, exposed, sizeof exposed);
    return p;
}

/* The SVG of p as a string (caller frees); asserts success. */
static char *svg_of(const ZnPlanSvg *p) {
    /* a tmpfile, not open_memstream: see zt_slurp */
    FILE *f = tmpfile();
    assert_non_null(f);
    ZnErr err = {0};
    int rc = zn_plan_svg_write(f, p, &err);
    if (rc) fail_msg("zn_plan_svg_write: %s", err.msg);
    size_t len;
    char *buf = zt_slurp(f, &len);
    assert_true(len > 0);
    return buf;
}

/* The value of attribute `name` of the element that starts at el ('<'), in
   out; 0 if the element has no such attribute. */
static int attr(const char *el, const char *name, char *out, size_t cap) {
    const char *end = strchr(el, '>');
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *a = strstr(el, key);
    if (!a || !end || a > end) return 0;
    a += strlen(key);
    const char *q = strchr(a, '"');
    snprintf(out, cap, "%.*s", (int)(q - a), a);
    return 1;
}

static double attr_num(const char *el, const char *name) {
    char v[128];
    if (!attr(el, name, v, sizeof v)) fail_msg("no attribute %s in '%.80s'", name, el);
    char *e;
    double d = strtod(v, &e);
    if (*e || !isfinite(d)) fail_msg("attribute %s='%s' is not a finite number", name, v);
    return d;
}

/* The n-th element (0-based) that starts with `start` ("<rect class=\"seg\""),
   or NULL. */
static const char *nth(const char *svg, const char *start, int n) {
    const char *p = svg;
    for (int k = 0; (p = strstr(p, start)); p++, k++)
        if (k == n) return p;
    return NULL;
}

/* The segment rect of (phase, cat), or NULL. */
static const char *seg_of(const char *svg, const char *phase, const char *cat) {
    char want_p[64], want_c[64], v[64];
    snprintf(want_p, sizeof want_p, "%s", phase);
    snprintf(want_c, sizeof want_c, "%s", cat);
    for (int k = 0;; k++) {
        const char *el = nth(svg, "<rect class=\"seg\"", k);
        if (!el) return NULL;
        if (attr(el, "data-phase", v, sizeof v) && !strcmp(v, want_p) && attr(el, "data-cat", v, sizeof v) &&
            !strcmp(v, want_c))
            return el;
    }
}

/* No attribute anywhere holds a number that is not finite (nan, inf), and no
   printed label says one. */
static void assert_no_nonfinite(const char *svg) {
    for (const char *p = svg; (p = strstr(p, "=\"")); p += 2) {
        const char *v = p + 2;
        if (*v == '-') v++;
        if (!strncasecmp(v, "nan", 3) || !strncasecmp(v, "inf", 3)) fail_msg("non-finite attribute at '%.40s'", p);
    }
    const char *bad[] = {">nan", ">inf", ">-nan", ">-inf", " nan", " inf", " -nan", " -inf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (strstr(svg, bad[i])) fail_msg("non-finite number printed: '%s'", bad[i]);
}

/* ---- the document ------------------------------------------------------- */

/* spec: Z-PSVG-001 */
/* spec: Z-PSVG-002 */
ZT_TEST(test_well_formed) {
    ZnPlanSvg p = demo();
    char *svg = svg_of(&p);
    assert_true(!strncmp(svg, "<?xml", 5));
    assert_true(strstr(svg, "</svg>\n") == svg + strlen(svg) - 7);
    assert_str_contains(svg, "width=\"960\" height=\"420\"");
    assert_str_contains(svg, "<text class=\"title\"");
    assert_str_contains(svg, ">gpt2-1.5b, ZeRO stage 2, world 8</text>");
    assert_str_contains(svg, ">device memory per phase (GiB)</text>");
    assert_str_contains(svg, ">step timeline (s)</text>");
    assert_well_formed(svg);
    assert_no_nonfinite(svg);
    free(svg);
    p.timed = 0;
    svg = svg_of(&p);
    assert_well_formed(svg);
    assert_no_nonfinite(svg);
    free(svg);
}

/* ---- the memory panel --------------------------------------------------- */

/* spec: Z-PSVG-003 */
/* spec: Z-PSVG-004 */
/* spec: Z-PSVG-005 */
ZT_TEST(test_segments_proportional) {
    ZnPlanSvg p = demo();
    char *svg = svg_of(&p);
    /* one segment per non-zero (phase, category); zeros draw nothing */
    int nonzero = 0;
    for (int i = 0; i < p.nphase; i++)
        for (int c = 0; c < p.ncat; c++) nonzero += p.mem[i][c] > 0;
    assert_int_equal(zt_count_of(svg, "<rect class=\"seg\""), nonzero);
    assert_null(seg_of(svg, "step", "activations"));
    /* height / bytes is one constant over every segment of every bar */
    const char *ref = seg_of(svg, "forward", "params16");
    assert_non_null(ref);
    double k = attr_num(ref, "height") / p.mem[0][0];
    for (int i = 0; i < p.nphase; i++) {
        double below_y = -1;   /* the top of the segment under this one */
        for (int c = 0; c < p.ncat; c++) {
            if (p.mem[i][c] == 0) continue;
            const char *el = seg_of(svg, p.phase[i], p.cat[c]);
            if (!el) fail_msg("no segment %s/%s", p.phase[i], p.cat[c]);
            double h = attr_num(el, "height"), y = attr_num(el, "y");
            if (fabs(h - k * p.mem[i][c]) > 2e-3) fail_msg("%s/%s: height %g, expected %g", p.phase[i], p.cat[c], h,
                                                             k * p.mem[i][c]);
            assert_true(attr_num(el, "data-bytes") == p.mem[i][c]);
            /* stacked: each segment sits on the one below it */
            if (below_y >= 0 && fabs(y + h - below_y) > 2e-3) fail_msg("%s/%s is not stacked", p.phase[i], p.cat[c]);
            below_y = y;
        }
    }
    /* the same category has the same colour in every bar, and categories
       differ from each other */
    char f0[32], f1[32];
    assert_true(attr(seg_of(svg, "forward", "grads"), "fill", f0, sizeof f0));
    assert_true(attr(seg_of(svg, "step", "grads"), "fill", f1, sizeof f1));
    assert_string_equal(f0, f1);
    assert_true(attr(seg_of(svg, "step", "optim"), "fill", f1, sizeof f1));
    assert_string_not_equal(f0, f1);
    /* totals above the bars, in GiB (2^30 bytes) */
    assert_str_contains(svg, ">25.8 GiB</text>");   /* forward: 3 + 0.5 + 2.25 + 20 */
    assert_str_contains(svg, ">30.8 GiB</text>");   /* backward */
    assert_str_contains(svg, ">5.8 GiB</text>");    /* step: 5.75 */
    free(svg);
    /* below 1 GiB: three significant digits */
    memset(p.mem, 0, sizeof p.mem);
    p.mem[0][0] = 0.25 * 1073741824.0;
    p.mem[1][0] = 1e6;
    p.capacity = 0;
    svg = svg_of(&p);
    assert_str_contains(svg, ">0.25 GiB</text>");
    assert_str_contains(svg, ">0.000931 GiB</text>");
    assert_str_contains(svg, ">0 GiB</text>");
    assert_str_contains(svg, ">forward</text>");
    free(svg);
}

/* spec: Z-PSVG-003 */
ZT_TEST(test_twelve_colours) {
    ZnPlanSvg p = demo();
    static const char *names[12] = {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11"};
    p.ncat = 12;
    for (int c = 0; c < 12; c++) {
        p.cat[c] = names[c];
        for (int i = 0; i < p.nphase; i++) p.mem[i][c] = (c + 1) * 1e8;
    }
    char *svg = svg_of(&p);
    assert_well_formed(svg);
    char fill[12][32];
    for (int c = 0; c < 12; c++) {
        assert_true(attr(seg_of(svg, "backward", names[c]), "fill", fill[c], sizeof fill[c]));
        for (int d = 0; d < c; d++)
            if (!strcmp(fill[c], fill[d])) fail_msg("categories %d and %d share colour %s", d, c, fill[c]);
    }
    assert_int_equal(zt_count_of(svg, "class=\"legend-cat\""), 12);
    free(svg);
}

/* spec: Z-PSVG-004 */
/* spec: Z-PSVG-006 */
ZT_TEST(test_capacity_line) {
    ZnPlanSvg p = demo();
    char *svg = svg_of(&p);
    assert_int_equal(zt_count_of(svg, "<line class=\"capacity\""), 1);
    assert_str_contains(svg, ">device memory 80.0 GiB</text>");
    /* the axis reaches the capacity, the tallest thing here: its top tick
       label is at least 80 */
    assert_str_contains(svg, ">80</text>");
    /* the line's height is the capacity's, on the segments' scale */
    const char *seg = seg_of(svg, "forward", "params16");
    double k = attr_num(seg, "height") / p.mem[0][0];
    double base = attr_num(seg, "y") + attr_num(seg, "height");
    const char *line = strstr(svg, "<line class=\"capacity\"");
    assert_true(fabs(base - attr_num(line, "y1") - k * p.capacity) < 1e-2);
    free(svg);
    /* no capacity: no line, no label */
    p.capacity = 0;
    svg = svg_of(&p);
    assert_int_equal(zt_count_of(svg, "class=\"capacity"), 0);
    assert_null(strstr(svg, "device memory 0"));
    free(svg);
}

/* spec: Z-PSVG-007 */
ZT_TEST(test_legend_nonzero_only) {
    ZnPlanSvg p = demo();
    p.ncat = 5;
    p.cat[4] = "offload_buf";   /* zero in every phase */
    char *svg = svg_of(&p);
    assert_int_equal(zt_count_of(svg, "class=\"legend-cat\""), 4);
    assert_null(strstr(svg, "offload_buf"));
    for (int c = 0; c < 4; c++) {
        char want[64];
        snprintf(want, sizeof want, "dy=\"0.35em\">%s</text>", p.cat[c]);
        assert_str_contains(svg, want);
    }
    free(svg);
    /* activations are zero only in "step": still in the legend */
    assert_true(p.mem[2][3] == 0);
    p.mem[0][1] = p.mem[1][1] = p.mem[2][1] = 0;   /* grads gone everywhere */
    svg = svg_of(&p);
    assert_int_equal(zt_count_of(svg, "class=\"legend-cat\""), 3);
    assert_null(strstr(svg, ">grads<"));
    assert_null(strstr(svg, "data-cat=\"grads\""));
    assert_str_contains(svg, ">activations</text>");
    free(svg);
}

/* spec: Z-PSVG-008 */
ZT_TEST(test_all_zero_memory) {
    ZnPlanSvg p = demo();
    memset(p.mem, 0, sizeof p.mem);
    p.capacity = 0;
    p.timed = 0;
    char *svg = svg_of(&p);
    assert_well_formed(svg);
    assert_no_nonfinite(svg);
    assert_int_equal(zt_count_of(svg, "<rect class=\"seg\""), 0);
    assert_int_equal(zt_count_of(svg, "class=\"legend-cat\""), 0);
    assert_int_equal(zt_count_of(svg, ">0 GiB</text>"), 3);
    assert_str_contains(svg, ">1</text>");   /* the axis still runs 0..1 GiB */
    free(svg);
    /* a step of no time at all: an axis 0..1 s, a total of 0 */
    p = demo();
    memset(p.compute, 0, sizeof p.compute);
    memset(p.comm, 0, sizeof p.comm);
    memset(p.exposed, 0, sizeof p.exposed);
    svg = svg_of(&p);
    assert_well_formed(svg);
    assert_no_nonfinite(svg);
    assert_str_contains(svg, ">step 0 s</text>");
    free(svg);
}

/* ---- the timeline ------------------------------------------------------- */

/* spec: Z-PSVG-009 */
ZT_TEST(test_timeline_adds_up) {
    ZnPlanSvg p = demo();
    char *svg = svg_of(&p);
    assert_well_formed(svg);
    /* the printed total */
    const char *tot = strstr(svg, "<text class=\"step-total\"");
    assert_non_null(tot);
    double printed;
    assert_int_equal(sscanf(strchr(tot, '>') + 1, "step %lf s<", &printed), 1);
    /* the spans: one per phase, end to end, their seconds adding up to it */
    assert_int_equal(zt_count_of(svg, "<rect class=\"span\""), 3);
    double sum = 0, x_end = -1, px_per_s = 0;
    for (int i = 0; i < 3; i++) {
        const char *el = nth(svg, "<rect class=\"span\"", i);
        char ph[32];
        assert_true(attr(el, "data-phase", ph, sizeof ph));
        assert_string_equal(ph, p.phase[i]);
        double s = attr_num(el, "data-seconds");
        assert_true(s == p.compute[i] + p.exposed[i]);
        double x = attr_num(el, "x"), w = attr_num(el, "width");
        if (x_end >= 0 && fabs(x - x_end) > 2e-3) fail_msg("span %d does not start where %d ends", i, i - 1);
        if (i == 0) px_per_s = w / s;
        if (fabs(w - px_per_s * s) > 2e-3) fail_msg("span %d: width not proportional to its seconds", i);
        x_end = x + w;
        sum += s;
    }
    if (fabs(sum - printed) > 5e-4 * sum) fail_msg("spans add up to %g, printed %g", sum, printed);
    assert_str_contains(svg, ">step 5 s</text>");   /* 1.25 + (2.5 + 0.5) + (0.125 + 0.625) */
    /* backward: compute from its start; the exposed 0.5 s right after the
       compute, to the phase's end; the hidden 2.5 s from its start */
    const char *comp = nth(svg, "<rect class=\"compute\" data-phase=\"backward\"", 0);
    const char *hid = nth(svg, "<rect class=\"comm\" data-phase=\"backward\"", 0);
    const char *exp_ = nth(svg, "<rect class=\"exposed\" data-phase=\"backward\"", 0);
    const char *span = nth(svg, "<rect class=\"span\" data-phase=\"backward\"", 0);
    assert_true(comp && hid && exp_ && span);
    assert_true(fabs(attr_num(comp, "x") - attr_num(span, "x")) < 2e-3);
    assert_true(fabs(attr_num(hid, "x") - attr_num(span, "x")) < 2e-3);
    assert_true(fabs(attr_num(hid, "width") - 2.5 * px_per_s) < 2e-3);
    assert_true(fabs(attr_num(exp_, "x") - (attr_num(comp, "x") + attr_num(comp, "width"))) < 2e-3);
    assert_true(fabs(attr_num(exp_, "x") + attr_num(exp_, "width") - (attr_num(span, "x") + attr_num(span, "width"))) <
                2e-3);
    char c0[32], c1[32];
    assert_true(attr(hid, "fill", c0, sizeof c0) && attr(exp_, "fill", c1, sizeof c1));
    assert_string_not_equal(c0, c1);
    /* forward has nothing exposed: no exposed bar */
    assert_null(nth(svg, "<rect class=\"exposed\" data-phase=\"forward\"", 0));
    /* phase names under their spans, lane names */
    assert_str_contains(svg, ">compute</text>");
    assert_str_contains(svg, ">communication</text>");
    assert_int_equal(zt_count_of(svg, ">backward</text>"), 2);   /* under its bar and under its span */
    assert_null(strstr(svg, "no machine given"));
    free(svg);
}

/* spec: Z-PSVG-010 */
ZT_TEST(test_untimed) {
    ZnPlanSvg p = demo();
    p.timed = 0;
    p.exposed[1] = 99;   /* times are not read without a machine */
    char *svg = svg_of(&p);
    assert_str_contains(svg, ">no machine given: pass --machine for the timeline</text>");
    assert_null(strstr(svg, "step-total"));
    assert_null(strstr(svg, "class=\"span\""));
    assert_null(strstr(svg, "class=\"compute\""));
    assert_int_equal(zt_count_of(svg, "<rect class=\"seg\""), 11);   /* the memory panel is all there */
    free(svg);
}

/* ---- text --------------------------------------------------------------- */

/* spec: Z-PSVG-012 */
ZT_TEST(test_escaping) {
    ZnPlanSvg p = demo();
    p.title = "<&\">";
    p.cat[1] = "a<b&'c'";
    p.phase[0] = "\"fwd\" & <more>";
    char *svg = svg_of(&p);
    assert_well_formed(svg);
    assert_str_contains(svg, ">&lt;&amp;&quot;&gt;</text>");
    assert_str_contains(svg, "data-cat=\"a&lt;b&amp;&apos;c&apos;\"");
    assert_str_contains(svg, "data-phase=\"&quot;fwd&quot; &amp; &lt;more&gt;\"");
    assert_null(strstr(svg, "<&"));
    assert_null(strstr(svg, "a<b"));
    free(svg);
    /* control characters and invalid UTF-8 stay well-formed XML */
    p.title = "tab\there\x01 bad \xff end";
    svg = svg_of(&p);
    assert_well_formed(svg);
    assert_str_contains(svg, "tab&#9;here\xEF\xBF\xBD bad \xEF\xBF\xBD end");
    free(svg);
}

/* ---- refused input ------------------------------------------------------ */

typedef void (*Mutate)(ZnPlanSvg *p);
static void m_ncat0(ZnPlanSvg *p) { p->ncat = 0; }
static void m_ncat13(ZnPlanSvg *p) { p->ncat = ZN_PSVG_MAX_CAT + 1; }
static void m_nphase0(ZnPlanSvg *p) { p->nphase = 0; }
static void m_nphase5(ZnPlanSvg *p) { p->nphase = ZN_PSVG_MAX_PHASE + 1; }
static void m_title(ZnPlanSvg *p) { p->title = NULL; }
static void m_cat(ZnPlanSvg *p) { p->cat[2] = NULL; }
static void m_phase(ZnPlanSvg *p) { p->phase[1] = NULL; }
static void m_mem_neg(ZnPlanSvg *p) { p->mem[1][2] = -1; }
static void m_mem_nan(ZnPlanSvg *p) { p->mem[0][0] = NAN; }
static void m_mem_inf(ZnPlanSvg *p) { p->mem[2][1] = INFINITY; }
static void m_mem_sum(ZnPlanSvg *p) { p->mem[1][0] = p->mem[1][1] = 1.7e308; }
static void m_cap_neg(ZnPlanSvg *p) { p->capacity = -5; }
static void m_cap_nan(ZnPlanSvg *p) { p->capacity = NAN; }
static void m_compute_neg(ZnPlanSvg *p) { p->compute[0] = -0.5; }
static void m_comm_inf(ZnPlanSvg *p) { p->comm[1] = INFINITY; }
static void m_exposed_nan(ZnPlanSvg *p) { p->exposed[2] = NAN; }
static void m_exposed_gt(ZnPlanSvg *p) { p->exposed[0] = p->comm[0] + 0.1; }
static void m_hidden_gt(ZnPlanSvg *p) { p->comm[2] = 5; }   /* 4.375 s hidden under 0.125 s of compute */
static void m_time_sum(ZnPlanSvg *p) { p->compute[0] = p->compute[1] = 1.7e308; }

/* spec: Z-PSVG-011 */
ZT_TEST(test_bad_inputs) {
    static const struct {
        Mutate m;
        const char *msg;
    } bad[] = {
        {m_ncat0, "0 categories, expected 1..12"},
        {m_ncat13, "13 categories, expected 1..12"},
        {m_nphase0, "0 phases, expected 1..4"},
        {m_nphase5, "5 phases, expected 1..4"},
        {m_title, "no title"},
        {m_cat, "category 3 has no name"},
        {m_phase, "phase 2 has no name"},
        {m_mem_neg, "memory of 'optim' in 'backward' is -1"},
        {m_mem_nan, "memory of 'params16' in 'forward' is nan"},
        {m_mem_inf, "memory of 'grads' in 'step' is inf"},
        {m_mem_sum, "the bytes of 'backward' are too many to add up"},
        {m_cap_neg, "device capacity is -5"},
        {m_cap_nan, "device capacity is nan"},
        {m_compute_neg, "compute seconds of 'forward' is -0.5"},
        {m_comm_inf, "communication seconds of 'backward' is inf"},
        {m_exposed_nan, "exposed seconds of 'step' is nan"},
        {m_exposed_gt, "'forward' has 0.6 exposed seconds of 0.5 seconds of communication"},
        {m_hidden_gt, "'step' hides 4.375 seconds of communication under 0.125 seconds of compute"},
        {m_time_sum, "the step's seconds are too many to add up"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ZnPlanSvg p = demo();
        bad[k].m(&p);
        FILE *f = tmpfile();
        assert_non_null(f);
        ZnErr err = {0};
        int rc = zn_plan_svg_write(f, &p, &err);
        if (rc != ZN_E_USAGE) fail_msg("case %zu: rc %d (%s)", k, rc, err.msg);
        assert_str_contains(err.msg, bad[k].msg);
        /* refused before anything was written */
        size_t len;
        free(zt_slurp(f, &len));
        if (len) fail_msg("case %zu: %zu bytes written", k, len);
        /* and with no ZnErr to fill, the same code */
        f = tmpfile();
        assert_int_equal(zn_plan_svg_write(f, &p, NULL), ZN_E_USAGE);
        fclose(f);
    }
    /* a NULL input */
    ZnErr err = {0};
    FILE *f = tmpfile();
    assert_int_equal(zn_plan_svg_write(f, NULL, &err), ZN_E_USAGE);
    fclose(f);
    /* what is refused on a machine is not read without one */
    ZnPlanSvg p = demo();
    m_hidden_gt(&p);
    p.timed = 0;
    char *svg = svg_of(&p);
    free(svg);
    /* exposed = comm - compute computed in doubles may hide an ulp more than
       the compute: allowed */
    p = demo();
    p.compute[0] = 0.1;
    p.comm[0] = 0.7;
    p.exposed[0] = 0.7 - 0.1 - 1e-17;
    svg = svg_of(&p);
    assert_no_nonfinite(svg);
    free(svg);
}

/* ---- saving ------------------------------------------------------------- */

/* spec: Z-PSVG-013 */
ZT_TEST(test_save_atomic) {
    ZnPlanSvg p = demo();
    ZnErr err = {0};
    char out[256];
    snprintf(out, sizeof out, "%s", zt_path("plan.svg"));
    zt_write_text(out, "old contents");
    assert_int_equal(zn_plan_svg_save(out, &p, &err), 0);
    assert_int_equal(temporaries(), 0);
    char *s = zt_read_text(out), *want = svg_of(&p);
    assert_non_null(s);
    assert_string_equal(s, want);   /* the same bytes zn_plan_svg_write writes */
    assert_well_formed(s);
    free(s);
    free(want);
    /* refused input: the old file as it was, no temporary */
    zt_write_text(out, "old contents");
    p.mem[0][0] = -1;
    assert_int_equal(zn_plan_svg_save(out, &p, &err), ZN_E_USAGE);
    s = zt_read_text(out);
    assert_string_equal(s, "old contents");
    free(s);
    assert_int_equal(temporaries(), 0);
    /* refused input for a new path: no file at all */
    assert_int_equal(zn_plan_svg_save(zt_path("never.svg"), &p, &err), ZN_E_USAGE);
    assert_false(zt_file_exists(zt_path("never.svg")));
    p = demo();
    /* a directory that does not exist: an I/O error naming the path, no file */
    assert_int_equal(zn_plan_svg_save(zt_path("no/such/dir.svg"), &p, &err), ZN_E_IO);
    assert_str_contains(err.msg, "no/such/dir.svg");
    assert_false(zt_file_exists(zt_path("no/such/dir.svg")));
    assert_false(zt_file_exists(zt_path("no")));
    assert_int_equal(temporaries(), 0);
    /* an I/O failure at each operation of the write: the old file stays
       whole and no temporary is left (a failure of the last operation, the
       directory's fsync, comes after the rename: the new file is in place) */
    zn_fault_set(0, 0, 0);
    assert_int_equal(zn_plan_svg_save(out, &p, &err), 0);
    long ops = zn_fault_ops();
    assert_true(ops >= 3);
    for (long op = 1; op <= ops; op++) {
        zt_write_text(out, "old contents");
        zn_fault_set(op, 0, 0);
        int rc = zn_plan_svg_save(out, &p, &err);
        zn_fault_set(0, 0, 0);
        if (rc != ZN_E_IO) fail_msg("fault at op %ld of %ld: rc %d", op, ops, rc);
        assert_int_equal(temporaries(), 0);
        s = zt_read_text(out);
        assert_non_null(s);
        if (strcmp(s, "old contents") && strncmp(s, "<?xml", 5)) fail_msg("fault at op %ld: a torn file", op);
        if (op < ops - 1 && strcmp(s, "old contents")) fail_msg("fault at op %ld: file replaced", op);
        free(s);
    }
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_well_formed),
    cmocka_unit_test(test_segments_proportional),
    cmocka_unit_test(test_twelve_colours),
    cmocka_unit_test(test_capacity_line),
    cmocka_unit_test(test_legend_nonzero_only),
    cmocka_unit_test(test_all_zero_memory),
    cmocka_unit_test(test_timeline_adds_up),
    cmocka_unit_test(test_untimed),
    cmocka_unit_test(test_escaping),
    cmocka_unit_test(test_bad_inputs),
    cmocka_unit_test(test_save_atomic))
