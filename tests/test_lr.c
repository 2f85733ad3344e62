/* test_lr.c: DeepSpeed's learning-rate schedules (spec Z-SCHED-*).
 *
 * Three kinds of checks:
 *  - sequences against an independent transcription of each formula of
 *    deepspeed/runtime/lr_schedules.py written below (py_* functions, plain
 *    arguments, no ZnLrSched), compared bit for bit: both sides are C doing
 *    the same IEEE operations in the same order on the same libm;
 *  - the facts DeepSpeed's tests/unit/runtime/test_lr_schedulers.py asserts;
 *  - golden values from DeepSpeed itself (tests/data/lr_golden.txt, read by
 *    test_golden_values). */
#include "testutil.h"
#include "engine/lr_schedule.h"

#include <unistd.h>

#define OPT_LR 0.00015    /* the optimizer lr DeepSpeed's scheduler tests use */
#define OPT_B1 0.9
#define OPT_B2 0.999

/* ---- helpers ------------------------------------------------------------ */

/* equal bits: also tells 0.0 from -0.0 and catches a 1-ulp difference */
#define assert_bits(a, b)                                                           \
    do {                                                                            \
        double x_ = (a), y_ = (b);                                                  \
        if (memcmp(&x_, &y_, sizeof x_) != 0)                                       \
            fail_msg("%s = %.17g, expected %.17g", #a, x_, y_);                    \
    } while (0)
/* within `rel` of the expected value, relative */
#define assert_near(a, b, rel)                                                      \
    do {                                                                            \
        double x_ = (a), y_ = (b);                                                  \
        if (!(fabs(x_ - y_) <= (rel) * fabs(y_)))                                   \
            fail_msg("%s = %.17g, expected %.17g (rel %g)", #a, x_, y_, (double)(rel)); \
    } while (0)

/* DeepSpeed's constructor defaults, as zn_config_defaults sets them (the test
   does not link config.c); WarmupDecayLR's warmup_max_lr default is 0.001 */
static ZnSchedConfig dflt(ZnSchedType ty) {
    ZnSchedConfig c = {
        .type = ty,
        /* WarmupLR, WarmupDecayLR, WarmupCosineLR */
        .warmup_min_lr = 0.0, .warmup_max_lr = ty == ZN_SCHED_WARMUP_DECAY_LR ? 0.001 : NAN,
        .warmup_num_steps = 1000, .warmup_type_linear = 0, .total_num_steps = -1,
        .warmup_min_ratio = 0.0, .cos_min_ratio = 1e-4,
        /* OneCycle */
        .cycle_min_lr = NAN, .cycle_max_lr = NAN, .decay_lr_rate = 0.0,
        .cycle_first_step_size = 2000, .cycle_second_step_size = -1,
        .cycle_first_stair_count = 0, .cycle_second_stair_count = -1, .decay_step_size = 0,
        .cycle_momentum = 1, .cycle_min_mom = 0.8, .cycle_max_mom = 0.9, .decay_mom_rate = 0.0,
        /* LRRangeTest */
        .lr_range_test_min_lr = 1e-3, .lr_range_test_step_rate = 1.0,
        .lr_range_test_step_size = 2000, .lr_range_test_staircase = 0,
    };
    return c;
}

/* builds a schedule that must be valid */
static ZnLrSched mk(const ZnSchedConfig *c, double opt_lr) {
    ZnLrSched s;
    ZnErr e;
    memset(&e, 0, sizeof e);
    int rc = zn_sched_init(&s, c, opt_lr, OPT_B1, OPT_B2, &e);
    if (rc != ZN_OK) fail_msg("zn_sched_init failed (%d): %s", rc, e.msg);
    return s;
}

/* builds a schedule that must fail with ZN_E_USAGE and exactly `msg` */
static void init_fails(const ZnSchedConfig *c, const char *msg) {
    ZnLrSched s;
    ZnErr e;
    memset(&e, 0, sizeof e);
    int rc = zn_sched_init(&s, c, OPT_LR, OPT_B1, OPT_B2, &e);
    if (rc != ZN_E_USAGE) fail_msg("expected ZN_E_USAGE for '%s', got %d", msg, rc);
    assert_int_equal(e.code, ZN_E_USAGE);
    assert_string_equal(e.msg, msg);
}

/* Runs f(arg) with stderr sent to a temporary file; returns what was written
   (static buffer). Used to see the warnings zn_sched_init prints. */
static const char *stderr_of(void (*f)(void *), void *arg) {
    static char buf[4096];
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    f(arg);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    return buf;
}

/* zn_sched_init of warn_cfg with the optimizer lr warn_lr, for stderr_of.
   It only records the result: a cmocka failure raised while stderr is
   redirected would print its message into the temporary file. */
static ZnSchedConfig warn_cfg;
static double warn_lr = OPT_LR;
static int warn_rc;
static ZnErr warn_err;
static void init_warn_cfg(void *arg) {
    memset(&warn_err, 0, sizeof warn_err);
    warn_rc = zn_sched_init(arg, &warn_cfg, warn_lr, OPT_B1, OPT_B2, &warn_err);
}
#define assert_warn_init_ok()                                                        \
    do {                                                                             \
        if (warn_rc != ZN_OK) fail_msg("zn_sched_init failed (%d): %s", warn_rc, warn_err.msg); \
    } while (0)

/* mk() for configurations that may warn (T < Wn): the warning is
   Z-SCHED-008's business, so it is swallowed here */
static ZnLrSched mk_quiet(const ZnSchedConfig *c, double opt_lr) {
    ZnLrSched s;
    warn_cfg = *c;
    warn_lr = opt_lr;
    (void)stderr_of(init_warn_cfg, &s);
    assert_warn_init_ok();
    return s;
}

/* ---- independent transcription of lr_schedules.py ------------------------
 * Written from the Python, one function per schedule, with Python's max/min
 * (first argument unless the second is strictly larger/smaller). */

static double py_maxd(double a, double b) { return b > a ? b : a; }
static double py_mind(double a, double b) { return b < a ? b : a; }
static long py_maxl(long a, long b) { return b > a ? b : a; }

/* WarmupLR._get_gamma (also WarmupDecayLR's warmup half) */
static double py_warm_gamma(long t, long warmup_num_steps, int linear) {
    long W = py_maxl(2, warmup_num_steps);
    double inverse_log_warm_up = 1.0 / log((double)W);
    if (t < W) {
        if (!linear) return inverse_log_warm_up * log((double)(t + 1));
        return (double)t / (double)W;
    }
    return 1.0;
}

/* WarmupLR.get_lr */
static double py_warmup_lr(long t, double min_lr, double max_lr, long n, int linear) {
    if (t < 0) return min_lr;
    double delta = max_lr - min_lr;
    return min_lr + delta * py_warm_gamma(t, n, linear);
}

/* WarmupDecayLR.get_lr */
static double py_decay_lr(long t, double min_lr, double max_lr, long n, long T, int linear) {
    if (t < 0) return min_lr;
    long W = py_maxl(2, n);
    double delta = max_lr - min_lr, gamma;
    if (t < W) gamma = py_warm_gamma(t, n, linear);
    else gamma = py_maxd(0.0, (double)(T - t) / py_maxd(1.0, (double)(T - W)));
    return min_lr + delta * gamma;
}

/* WarmupCosineLR.get_lr */
static double py_cos_lr(long t, double org_lr, long n, long T, double wmin, double cmin, int linear) {
    if (t < 0) return 0.0;
    long W = py_maxl(2, n);
    double ratio;
    if (t < W) {
        ratio = linear ? (double)t / (double)W : (1.0 / log((double)W)) * log((double)(t + 1));
        double ratio_delta = 1. - wmin;
        ratio = wmin + ratio * ratio_delta;
    } else {
        long real_last_step = t - W + 1;
        long real_total_steps = py_maxl(1, T - W);
        double cosine_progress = py_mind(1.0, (double)real_last_step / (double)real_total_steps);
        double ratio_delta = 1. - cmin;
        ratio = (1 + cos(M_PI * cosine_progress)) / 2;
        ratio = py_maxd(0.0, cmin + ratio_delta * ratio);
    }
    return org_lr * ratio;
}

typedef struct {
    double min_lr, max_lr, decay_lr_rate;
    long first, second;               /* second -1: None */
    long stair1, stair2;              /* stair2 -1: None */
    long decay_step_size;
    double min_mom, max_mom, decay_mom_rate;
} PyCycle;

/* OneCycle._get_scale_factor */
static double py_cycle_scale(const PyCycle *p, long t) {
    double first = (double)p->first;
    double second = p->second == -1 ? first : (double)p->second;
    double total_size = first + second, step_ratio = first / total_size;
    long stair2 = p->stair2 == -1 ? p->stair1 : p->stair2;
    long batch_iteration = t + 1;
    double cycle = floor(1 + (double)batch_iteration / total_size);
    double x = 1. + (double)batch_iteration / total_size - cycle;
    double scale_factor;
    long stair_count;
    if (x <= step_ratio) {
        scale_factor = x / step_ratio;
        stair_count = p->stair1;
    } else {
        scale_factor = (x - 1) / (step_ratio - 1);
        stair_count = stair2;
    }
    if (stair_count > 0) {
        double cycle_iteration = fmod((double)batch_iteration, total_size);
        double stair_position;
        if (cycle_iteration <= first) stair_position = cycle_iteration * (double)stair_count / first;
        else stair_position = (total_size - cycle_iteration) * (double)stair_count / second;
        scale_factor = floor(stair_position) / (double)stair_count;
    }
    return scale_factor;
}

/* OneCycle: the lr and beta1 the optimizer holds at t (constructor at t = -1) */
static void py_cycle(const PyCycle *p, long t, double *lr, double *mom) {
    double first = (double)p->first;
    double total_size = first + (p->second == -1 ? first : (double)p->second);
    int skip_lr = p->decay_step_size == 0 || p->decay_lr_rate == 0;
    int skip_mom = p->decay_step_size == 0 || p->decay_mom_rate == 0;
    if (t == -1) {                    /* _initialize_lr / _initialize_momentum */
        *lr = p->min_lr;
        *mom = p->min_mom;
        return;
    }
    if ((double)t < total_size) {
        double sf = py_cycle_scale(p, t);
        *lr = p->min_lr + (p->max_lr - p->min_lr) * sf;
        *mom = p->max_mom - (p->max_mom - p->min_mom) * sf;
        return;
    }
    double decay_batch_iteration = (double)t - total_size + 1;
    double decay_interval = decay_batch_iteration / (double)p->decay_step_size;
    *lr = skip_lr ? p->min_lr : p->min_lr / (1 + p->decay_lr_rate * decay_interval);
    *mom = skip_mom ? p->max_mom : p->max_mom * (1 + p->decay_mom_rate * decay_interval);
}

static ZnSchedConfig cycle_cfg(const PyCycle *p) {
    ZnSchedConfig c = dflt(ZN_SCHED_ONE_CYCLE);
    c.cycle_min_lr = p->min_lr, c.cycle_max_lr = p->max_lr, c.decay_lr_rate = p->decay_lr_rate;
    c.cycle_first_step_size = p->first, c.cycle_second_step_size = p->second;
    c.cycle_first_stair_count = p->stair1, c.cycle_second_stair_count = p->stair2;
    c.decay_step_size = p->decay_step_size;
    c.cycle_min_mom = p->min_mom, c.cycle_max_mom = p->max_mom, c.decay_mom_rate = p->decay_mom_rate;
    return c;
}

/* A warmup schedule (WarmupLR, WarmupDecayLR) from DeepSpeed's defaults with
   the warmup bounds, warmup length, total length and warmup type given */
static ZnSchedConfig warm_cfg(ZnSchedType ty, double min_lr, double max_lr, long n, long T, int linear) {
    ZnSchedConfig c = dflt(ty);
    c.warmup_min_lr = min_lr, c.warmup_max_lr = max_lr;
    c.warmup_num_steps = n, c.total_num_steps = T, c.warmup_type_linear = linear;
    return c;
}

/* A WarmupCosineLR schedule: warmup length, total length, the two ratios
   and the warmup type */
static ZnSchedConfig cos_cfg(long n, long T, double wmin, double cmin, int linear) {
    ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_COSINE_LR);
    c.warmup_num_steps = n, c.total_num_steps = T, c.warmup_type_linear = linear;
    c.warmup_min_ratio = wmin, c.cos_min_ratio = cmin;
    return c;
}

/* An LRRangeTest schedule */
static ZnSchedConfig range_cfg(double min_lr, double rate, long size, int staircase) {
    ZnSchedConfig c = dflt(ZN_SCHED_LR_RANGE_TEST);
    c.lr_range_test_min_lr = min_lr, c.lr_range_test_step_rate = rate;
    c.lr_range_test_step_size = size, c.lr_range_test_staircase = staircase;
    return c;
}

/* LRRangeTest.get_lr */
static double py_range_lr(long t, double min_lr, long step_size, double step_rate, int staircase) {
    double interval = (double)(t + 1) / (double)step_size;
    if (staircase) interval = floor(interval);
    return min_lr * (1 + step_rate * interval);
}

/* Steps a fresh schedule to t = n - 1, checking at every t (from -1) that
   s->lr and zn_sched_lr_at equal `want[t + 1]` bit for bit. */
static void check_steps(ZnLrSched *s, const double *want, long n) {
    for (long t = -1; t < n; t++) {
        if (t >= 0) zn_sched_step(s);
        assert_int_equal(s->t, t);
        if (memcmp(&s->lr, &want[t + 1], sizeof s->lr) != 0)
            fail_msg("t=%ld: lr %.17g, expected %.17g", t, s->lr, want[t + 1]);
        double at = zn_sched_lr_at(s, t);
        assert_bits(at, want[t + 1]);
    }
}

#define NSTEP 400   /* steps compared in each sequence test */

/* ---- timing -------------------------------------------------------------- */

/* spec: Z-SCHED-001 */
static void test_first_steps_and_engine_timing(void **state) {
    (void)state;
    ZnSchedConfig c = warm_cfg(ZN_SCHED_WARMUP_LR, 0.1, 0.2, 10, -1, 0);
    ZnLrSched s = mk(&c, OPT_LR);
    /* constructor: t = -1 and the lr already set for it */
    assert_int_equal(s.t, -1);
    assert_bits(s.lr, 0.1);
    assert_bits(s.lr, zn_sched_lr_at(&s, -1));
    /* the engine's loop: read lr, run the step, then step the scheduler;
       applied step k runs with lr(k - 2) */
    for (long k = 1; k <= 40; k++) {
        double used = s.lr;
        assert_bits(used, zn_sched_lr_at(&s, k - 2));
        zn_sched_step(&s);
        /* DeepSpeed's get_lr() after step k is lr(k - 1) */
        assert_int_equal(s.t, k - 1);
        if (k == 1) assert_bits(s.lr, 0.1);               /* == warmup_min_lr */
        if (k >= 11) assert_bits(s.lr, 0.2);              /* step Wn + 1 on: max */
        /* log warmup: gamma(W - 1) = log(W) * (1 / log(W)), 1 up to rounding */
        if (k < 10) assert_true(s.lr < 0.2);
    }
    /* steps 1 and 2 both run with warmup_min_lr (lr(-1) = lr(0) = min) */
    assert_bits(zn_sched_lr_at(&s, -1), zn_sched_lr_at(&s, 0));
}

/* spec: Z-SCHED-002 */
static void test_skipped_steps_hold_lr(void **state) {
    (void)state;
    PyCycle p = {.min_lr = 1e-4, .max_lr = 1e-2, .first = 7, .second = -1, .stair2 = -1,
                 .min_mom = 0.8, .max_mom = 0.9};
    ZnSchedConfig cfgs[3];
    cfgs[0] = dflt(ZN_SCHED_WARMUP_DECAY_LR);
    cfgs[0].warmup_num_steps = 5;
    cfgs[0].total_num_steps = 30;
    cfgs[1] = cycle_cfg(&p);
    cfgs[2] = dflt(ZN_SCHED_WARMUP_COSINE_LR);
    cfgs[2].warmup_num_steps = 4;
    cfgs[2].total_num_steps = 25;
    for (int i = 0; i < 3; i++) {
        ZnLrSched s = mk(&cfgs[i], OPT_LR);
        long applied = 0;
        double prev_lr = NAN, prev_b1 = NAN;
        int prev_skipped = 0;
        for (long k = 1; k <= 60; k++) {
            /* an overflow pattern: skips at 1, 2, 5, 10, 11, ... */
            int skipped = k <= 2 || k % 5 == 0 || k % 11 == 0;
            /* the step runs with lr(applied - 1), whatever was skipped */
            assert_bits(s.lr, zn_sched_lr_at(&s, applied - 1));
            double b1, b2;
            zn_sched_betas_at(&s, applied - 1, &b1, &b2);
            assert_bits(s.beta1, b1);
            assert_bits(s.beta2, b2);
            /* a step after a skipped one runs with the skipped one's values */
            if (prev_skipped) {
                assert_bits(s.lr, prev_lr);
                assert_bits(s.beta1, prev_b1);
            }
            prev_lr = s.lr;
            prev_b1 = s.beta1;
            prev_skipped = skipped;
            if (!skipped) {
                zn_sched_step(&s);
                applied++;
            }
            assert_int_equal(s.t, applied - 1);
        }
    }
}

/* ---- construction --------------------------------------------------------- */

/* spec: Z-SCHED-003 */
static void test_validation_errors(void **state) {
    (void)state;
    ZnSchedConfig c;
    /* warmup_num_steps <= 0 (DeepSpeed: ValueError) for every warmup schedule */
    const ZnSchedType warm[] = {ZN_SCHED_WARMUP_LR, ZN_SCHED_WARMUP_DECAY_LR, ZN_SCHED_WARMUP_COSINE_LR};
    for (int i = 0; i < 3; i++) {
        c = dflt(warm[i]);
        c.total_num_steps = 100;
        c.warmup_num_steps = 0;
        init_fails(&c, "scheduler.params.warmup_num_steps: expected a positive integer, got 0");
        c.warmup_num_steps = -5;
        init_fails(&c, "scheduler.params.warmup_num_steps: expected a positive integer, got -5");
    }
    /* total_num_steps missing */
    c = dflt(ZN_SCHED_WARMUP_DECAY_LR);
    init_fails(&c, "scheduler.params.total_num_steps: required by WarmupDecayLR");
    c = dflt(ZN_SCHED_WARMUP_COSINE_LR);
    init_fails(&c, "scheduler.params.total_num_steps: required by WarmupCosineLR");
    /* OneCycle bounds are required */
    c = dflt(ZN_SCHED_ONE_CYCLE);
    c.cycle_max_lr = 0.1;
    init_fails(&c, "scheduler.params.cycle_min_lr: required by OneCycle");
    c = dflt(ZN_SCHED_ONE_CYCLE);
    c.cycle_min_lr = 0.001;
    init_fails(&c, "scheduler.params.cycle_max_lr: required by OneCycle");
    /* OneCycle step sizes: DeepSpeed's (0, 0), (0, None), (-1, None), (0, 100) */
    const long bad_first[][2] = {{0, 0}, {0, -1}, {-1, -1}, {0, 100}};
    for (int i = 0; i < 4; i++) {
        c = dflt(ZN_SCHED_ONE_CYCLE);
        c.cycle_min_lr = 0.001;
        c.cycle_max_lr = 0.1;
        c.cycle_first_step_size = bad_first[i][0];
        c.cycle_second_step_size = bad_first[i][1];
        char msg[128];
        snprintf(msg, sizeof msg, "scheduler.params.cycle_first_step_size: expected a positive integer, got %ld",
                 bad_first[i][0]);
        init_fails(&c, msg);
    }
    c = dflt(ZN_SCHED_ONE_CYCLE);
    c.cycle_min_lr = 0.001;
    c.cycle_max_lr = 0.1;
    c.cycle_first_step_size = 100;
    c.cycle_second_step_size = -5;
    init_fails(&c, "scheduler.params.cycle_second_step_size: expected a non-negative integer, got -5");
    /* -1 is None (= first), not an error */
    c.cycle_second_step_size = -1;
    ZnLrSched s = mk(&c, OPT_LR);
    assert_true(s.total_size == 200.0);
    /* LRRangeTest step size */
    c = dflt(ZN_SCHED_LR_RANGE_TEST);
    c.lr_range_test_step_size = 0;
    init_fails(&c, "scheduler.params.lr_range_test_step_size: expected a positive integer, got 0");
    c.lr_range_test_step_size = -5;
    init_fails(&c, "scheduler.params.lr_range_test_step_size: expected a positive integer, got -5");
    /* a type outside the enum */
    c = dflt(ZN_SCHED_WARMUP_LR);
    c.type = (ZnSchedType)42;
    init_fails(&c, "scheduler.type: unknown schedule 42");
    /* a NULL ZnErr is allowed: only the code comes back */
    c = dflt(ZN_SCHED_WARMUP_DECAY_LR);
    assert_int_equal(zn_sched_init(&s, &c, OPT_LR, OPT_B1, OPT_B2, NULL), ZN_E_USAGE);
    /* parameters of other schedules are not looked at: WarmupLR ignores a
       missing total_num_steps, LRRangeTest a zero warmup_num_steps */
    c = dflt(ZN_SCHED_WARMUP_LR);
    s = mk(&c, OPT_LR);
    c = dflt(ZN_SCHED_LR_RANGE_TEST);
    c.warmup_num_steps = 0;
    s = mk(&c, OPT_LR);
    (void)s;
}

/* golden values: lr, beta1, beta2 at t as DeepSpeed's optimizer param group
   holds them */
enum {
    G_WARM_LOG, G_WARM_LIN, G_WARM_DFLT, G_WARM_ONE, G_DECAY, G_DECAY_LIN, G_COS, G_COS_LIN,
    G_CYC, G_CYC_ASYM, G_CYC_STAIR, G_RANGE, G_RANGE_ST, G_NCASES
};

/* The configuration of each golden case, with its optimizer lr; `trans` is 1
   when the formula goes through log or cos, whose last bit may differ on
   another libm (those are compared within 1e-15 relative, the rest exactly). */
static ZnSchedConfig golden_cfg(int id, double *opt_lr, int *trans) {
    /* OneCycle: min/max lr, lr rate, first/second step size, stair counts,
       decay step size, min/max momentum, momentum rate */
    const PyCycle cyc = {1e-5, 1e-2, 1e-3, 10, -1, 0, -1, 10, 0.08, 0.09, 1e-3};
    const PyCycle asym = {0.001, 0.01, 0.0, 10, 21, 0, -1, 0, 0.8, 0.9, 0.0};
    const PyCycle stair = {0.001, 0.01, 0.0, 10, 21, 2, 3, 0, 0.8, 0.9, 0.0};
    *opt_lr = OPT_LR;
    *trans = 0;
    switch (id) {
    case G_WARM_LOG:
        *trans = 1;
        return warm_cfg(ZN_SCHED_WARMUP_LR, 0.1, 0.2, 10, -1, 0);
    case G_WARM_LIN:
        return warm_cfg(ZN_SCHED_WARMUP_LR, 0.1, 0.2, 15, -1, 1);
    case G_WARM_DFLT:
        *trans = 1;
        return dflt(ZN_SCHED_WARMUP_LR);
    case G_WARM_ONE:
        *opt_lr = 0.003;
        *trans = 1;
        return warm_cfg(ZN_SCHED_WARMUP_LR, 0.0, NAN, 1, -1, 0);
    case G_DECAY:
        *trans = 1;
        return warm_cfg(ZN_SCHED_WARMUP_DECAY_LR, 0.1, 0.2, 10, 20, 0);
    case G_DECAY_LIN:   /* default bounds 0 and 0.001 */
        return warm_cfg(ZN_SCHED_WARMUP_DECAY_LR, 0.0, 0.001, 7, 33, 1);
    case G_COS:
        *opt_lr = 0.0015;
        *trans = 1;
        return cos_cfg(10, 100, 0.2, 0.1, 0);
    case G_COS_LIN:
        *opt_lr = 0.0015;
        *trans = 1;
        return cos_cfg(300, 600, 0.0, 0.0, 1);
    case G_CYC:
        return cycle_cfg(&cyc);
    case G_CYC_ASYM:
        *opt_lr = 0.001;
        return cycle_cfg(&asym);
    case G_CYC_STAIR:
        *opt_lr = 0.001;
        return cycle_cfg(&stair);
    case G_RANGE:
    case G_RANGE_ST:
    default:
        return range_cfg(1e-2, 1e-2, 19, id == G_RANGE_ST);
    }
}

/* spec: Z-SCHED-004 */
static void test_golden_values(void **state) {
    (void)state;
    /* The values come from DeepSpeed 0.19.6's own lr_schedules.py, stepped
       under python3 and printed with repr() (tests/data/lr_golden.txt says
       how): one line per (case, t) with the lr and betas the optimizer's
       param group holds after t steps (t = -1: after construction). */
    static const char *const names[G_NCASES] = {
        "warm_log", "warm_lin", "warm_dflt", "warm_one", "decay", "decay_lin", "cos",
        "cos_lin", "cyc", "cyc_asym", "cyc_stair", "range", "range_st",
    };
    char *text = zt_read_text("tests/data/lr_golden.txt");
    assert_non_null(text);
    int seen[G_NCASES] = {0}, rows = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        char name[16];
        long t;
        double lr, b1, b2;
        if (sscanf(line, "%15s %ld %lf %lf %lf", name, &t, &lr, &b1, &b2) != 5) fail_msg("bad line: %s", line);
        int id = 0;
        while (id < G_NCASES && strcmp(names[id], name) != 0) id++;
        if (id == G_NCASES) fail_msg("unknown case: %s", line);
        double opt_lr;
        int trans;
        ZnSchedConfig c = golden_cfg(id, &opt_lr, &trans);
        ZnLrSched s = mk(&c, opt_lr);
        /* reach t by stepping (what training does) and by set_iteration (resume) */
        for (long k = -1; k < t; k++) zn_sched_step(&s);
        ZnLrSched r = mk(&c, opt_lr);
        zn_sched_set_iteration(&r, t);
        if (trans) {
            assert_near(s.lr, lr, 1e-15);
        } else {
            assert_bits(s.lr, lr);
        }
        assert_bits(r.lr, s.lr);
        /* betas come from plain arithmetic: exact */
        assert_bits(s.beta1, b1);
        assert_bits(s.beta2, b2);
        assert_bits(r.beta1, s.beta1);
        seen[id] = 1;
        rows++;
    }
    free(text);
    assert_int_equal(rows, 78);
    for (int i = 0; i < G_NCASES; i++) assert_true(seen[i]);
}

/* spec: Z-SCHED-005 */
static void test_no_schedule(void **state) {
    (void)state;
    ZnSchedConfig c = dflt(ZN_SCHED_NONE);
    ZnLrSched s = mk(&c, 3e-4);
    assert_int_equal(s.sets_betas, 0);
    for (long t = -1; t < 50; t++) {
        if (t >= 0) zn_sched_step(&s);
        assert_int_equal(s.t, t);
        assert_bits(s.lr, 3e-4);
        assert_bits(s.beta1, OPT_B1);
        assert_bits(s.beta2, OPT_B2);
    }
    assert_bits(zn_sched_lr_at(&s, 123456), 3e-4);
}

/* ---- warmup schedules ---------------------------------------------------- */

/* spec: Z-SCHED-006 */
static void test_warmup_lr_sequence(void **state) {
    (void)state;
    const long ns[] = {1, 2, 3, 10, 15, 19, 33, 250, 1000};
    static double want[NSTEP + 1];
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        for (int lin = 0; lin <= 1; lin++) {
            for (int none = 0; none <= 1; none++) {
                ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_LR);
                c.warmup_num_steps = ns[i];
                c.warmup_type_linear = lin;
                c.warmup_min_lr = 1e-5;
                /* warmup_max_lr None: the optimizer's lr */
                c.warmup_max_lr = none ? NAN : 0.07;
                double max_lr = none ? OPT_LR : 0.07;
                for (long t = -1; t < NSTEP; t++) want[t + 1] = py_warmup_lr(t, 1e-5, max_lr, ns[i], lin);
                ZnLrSched s = mk(&c, OPT_LR);
                assert_int_equal(s.wn, ns[i] < 2 ? 2 : ns[i]);
                check_steps(&s, want, NSTEP);
                /* betas are the optimizer's throughout */
                assert_int_equal(s.sets_betas, 0);
                assert_bits(s.beta1, OPT_B1);
                assert_bits(s.beta2, OPT_B2);
            }
        }
    }
}

/* spec: Z-SCHED-006 */
static void test_warmup_lr_deepspeed_facts(void **state) {
    (void)state;
    /* TestLrSchedule.test_lr_warmup_schedule: min 0.1, max 0.2, W in {10, 15,
       19, 33} x {log, linear}, 2W steps; step_lrs[i] is get_lr() after step
       i + 1, i.e. lr(i) */
    const long ws[] = {10, 15, 19, 33};
    for (int i = 0; i < 4; i++) {
        for (int lin = 0; lin <= 1; lin++) {
            ZnSchedConfig c = warm_cfg(ZN_SCHED_WARMUP_LR, 0.1, 0.2, ws[i], -1, lin);
            ZnLrSched s = mk(&c, OPT_LR);
            for (long n = 0; n < 2 * ws[i]; n++) {
                zn_sched_step(&s);
                if (n == 0) assert_bits(s.lr, 0.1);
                if (n >= ws[i]) assert_bits(s.lr, 0.2);
                if (n > 0 && n < ws[i]) assert_true(s.lr > 0.1 && s.lr <= 0.2);
            }
        }
    }
    /* test_warmup_lr_inherits_per_group_lr_when_max_unspecified: W = 10,
       optimizer lr 0.1, step(10) gives 0.1 */
    ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_LR);
    c.warmup_num_steps = 10;
    ZnLrSched s = mk(&c, 0.1);
    assert_bits(s.max_lr, 0.1);
    zn_sched_set_iteration(&s, 10);
    assert_bits(s.lr, 0.1);
    /* TENSOR_LR_CONTRACTS "WarmupLR": 0.0 at construction, 0.1*log(2)/log(10) at t = 1 */
    zn_sched_set_iteration(&s, -1);
    assert_bits(s.lr, 0.0);
    zn_sched_set_iteration(&s, 1);
    assert_near(s.lr, 0.1 * log(2) / log(10), 1e-15);
}

/* spec: Z-SCHED-007 */
static void test_warmup_decay_sequence(void **state) {
    (void)state;
    const long ns[] = {1, 5, 10, 33, 120};
    const long Ts[] = {1, 10, 20, 66, 300, 1000};
    static double want[NSTEP + 1];
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        for (size_t j = 0; j < sizeof Ts / sizeof *Ts; j++) {
            for (int lin = 0; lin <= 1; lin++) {
                ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_DECAY_LR);
                c.warmup_num_steps = ns[i];
                c.total_num_steps = Ts[j];
                c.warmup_type_linear = lin;
                c.warmup_min_lr = 2e-5;
                /* default max 0.001 */
                for (long t = -1; t < NSTEP; t++) want[t + 1] = py_decay_lr(t, 2e-5, 0.001, ns[i], Ts[j], lin);
                ZnLrSched s = mk_quiet(&c, OPT_LR);
                check_steps(&s, want, NSTEP);
            }
        }
    }
    /* an explicit null warmup_max_lr is the optimizer's lr */
    ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_DECAY_LR);
    c.warmup_max_lr = NAN;
    c.warmup_num_steps = 10;
    c.total_num_steps = 20;
    ZnLrSched s = mk(&c, OPT_LR);
    zn_sched_set_iteration(&s, 10);
    assert_bits(s.lr, OPT_LR);
}

/* spec: Z-SCHED-007 */
static void test_warmup_decay_deepspeed_facts(void **state) {
    (void)state;
    /* TestLrSchedule.test_lr_warmup_decay_schedule: min 0.1, max 0.2,
       T = 2W; lr(0) = min, lr(W) = max, then strictly decreasing */
    const long ws[] = {10, 15, 19, 33};
    for (int i = 0; i < 4; i++) {
        for (int lin = 0; lin <= 1; lin++) {
            ZnSchedConfig c = warm_cfg(ZN_SCHED_WARMUP_DECAY_LR, 0.1, 0.2, ws[i], 2 * ws[i], lin);
            ZnLrSched s = mk(&c, OPT_LR);
            double prev = 0.0;
            for (long n = 0; n < 4 * ws[i]; n++) {
                zn_sched_step(&s);
                if (n == 0) assert_bits(s.lr, 0.1);
                if (n == ws[i]) assert_bits(s.lr, 0.2);
                if (n > ws[i] && n <= 2 * ws[i]) assert_true(s.lr < prev);
                /* from T on, gamma is 0: warmup_min_lr */
                if (n >= 2 * ws[i]) assert_bits(s.lr, 0.1);
                prev = s.lr;
            }
        }
    }
    /* TENSOR_LR_CONTRACTS "WarmupDecayLR": T 100, W 10, max 0.1: 0.1*log(2)/log(10) at t = 1 */
    ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_DECAY_LR);
    c.total_num_steps = 100;
    c.warmup_num_steps = 10;
    c.warmup_max_lr = 0.1;
    ZnLrSched s = mk(&c, 0.5);
    assert_bits(s.lr, 0.0);
    zn_sched_set_iteration(&s, 1);
    assert_near(s.lr, 0.1 * log(2) / log(10), 1e-15);
}

/* spec: Z-SCHED-008 */
static void test_total_below_warmup_warns(void **state) {
    (void)state;
    ZnLrSched s;
    warn_lr = OPT_LR;
    const ZnSchedType tys[] = {ZN_SCHED_WARMUP_DECAY_LR, ZN_SCHED_WARMUP_COSINE_LR};
    for (int i = 0; i < 2; i++) {
        warn_cfg = dflt(tys[i]);
        warn_cfg.warmup_num_steps = 10;
        warn_cfg.total_num_steps = 5;
        assert_string_equal(stderr_of(init_warn_cfg, &s),
                            "zinc: warning: scheduler.params: total_num_steps 5 is less than warmup_num_steps 10\n");
        /* compared with the clamped Wn = 2, printed as given */
        warn_cfg.warmup_num_steps = 1;
        warn_cfg.total_num_steps = 1;
        assert_string_equal(stderr_of(init_warn_cfg, &s),
                            "zinc: warning: scheduler.params: total_num_steps 1 is less than warmup_num_steps 1\n");
        /* T == Wn and T > Wn: quiet */
        warn_cfg.warmup_num_steps = 10;
        warn_cfg.total_num_steps = 10;
        assert_string_equal(stderr_of(init_warn_cfg, &s), "");
        warn_cfg.total_num_steps = 20;
        assert_string_equal(stderr_of(init_warn_cfg, &s), "");
    }
    /* WarmupLR has no total: never warns */
    warn_cfg = dflt(ZN_SCHED_WARMUP_LR);
    assert_string_equal(stderr_of(init_warn_cfg, &s), "");
}

/* spec: Z-SCHED-009 */
static void test_warmup_cosine_sequence(void **state) {
    (void)state;
    const long ns[] = {1, 2, 10, 30, 300};
    const long Ts[] = {5, 10, 100, 200, 350, 600};
    const double ratios[][2] = {{0.0, 1e-4}, {0.2, 0.1}, {0.0, 0.0}, {0.5, 1.5}};
    static double want[NSTEP + 1];
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (size_t j = 0; j < sizeof Ts / sizeof *Ts; j++)
            for (size_t k = 0; k < sizeof ratios / sizeof *ratios; k++)
                for (int lin = 0; lin <= 1; lin++) {
                    ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_COSINE_LR);
                    c.warmup_num_steps = ns[i];
                    c.total_num_steps = Ts[j];
                    c.warmup_min_ratio = ratios[k][0];
                    c.cos_min_ratio = ratios[k][1];
                    c.warmup_type_linear = lin;
                    for (long t = -1; t < NSTEP; t++)
                        want[t + 1] = py_cos_lr(t, 0.0015, ns[i], Ts[j], ratios[k][0], ratios[k][1], lin);
                    ZnLrSched s = mk_quiet(&c, 0.0015);
                    check_steps(&s, want, NSTEP);
                }
}

/* spec: Z-SCHED-009 */
static void test_warmup_cosine_zero_before_first_step(void **state) {
    (void)state;
    ZnSchedConfig c = dflt(ZN_SCHED_WARMUP_COSINE_LR);
    c.total_num_steps = 100;
    c.warmup_num_steps = 10;
    c.warmup_min_ratio = 0.3;   /* even a nonzero warmup floor does not help */
    ZnLrSched s = mk(&c, 0.0015);
    /* the first optimizer step runs with lr 0 (+0.0, not -0.0) */
    assert_bits(s.lr, 0.0);
    assert_bits(zn_sched_lr_at(&s, -1), 0.0);
    zn_sched_step(&s);
    assert_bits(s.lr, 0.0015 * 0.3);   /* step 2: base * wmin */
    /* test_warmup_cosine_lr_initializes_all_param_groups: wmin 0, t = 1 */
    c.warmup_min_ratio = 0.0;
    s = mk(&c, 0.0015);
    assert_bits(s.lr, 0.0);
    zn_sched_set_iteration(&s, 1);
    assert_near(s.lr, 0.0015 * (log(2) / log(10)), 1e-15);
    /* TestWarmupCosineLR.test_lr: lr(0) = base*wmin, lr(W-1) = base,
       lr(T-1) = base*cmin (within 1e-7); strictly increasing over warmup,
       strictly decreasing from W to T - 1 */
    const struct { long T, W; double cmin, wmin; } P[] = {
        {100, 10, 0.1, 0.2}, {200, 20, 0.1, 0.2}, {500, 30, 0.0, 0.2}, {600, 300, 0.1, 0.0}, {600, 550, 0.0, 0.0},
    };
    for (int i = 0; i < 5; i++) {
        c = dflt(ZN_SCHED_WARMUP_COSINE_LR);
        c.total_num_steps = P[i].T;
        c.warmup_num_steps = P[i].W;
        c.cos_min_ratio = P[i].cmin;
        c.warmup_min_ratio = P[i].wmin;
        s = mk(&c, 0.0015);
        assert_true(fabs(zn_sched_lr_at(&s, 0) - 0.0015 * P[i].wmin) < 1e-7);
        assert_true(fabs(zn_sched_lr_at(&s, P[i].W - 1) - 0.0015) < 1e-7);
        assert_true(fabs(zn_sched_lr_at(&s, P[i].T - 1) - 0.0015 * P[i].cmin) < 1e-7);
        for (long t = 1; t < P[i].W; t++) assert_true(zn_sched_lr_at(&s, t) > zn_sched_lr_at(&s, t - 1));
        for (long t = P[i].W + 1; t < P[i].T; t++) assert_true(zn_sched_lr_at(&s, t) < zn_sched_lr_at(&s, t - 1));
    }
}

/* spec: Z-SCHED-010 */
static void test_warmup_cosine_clamped_at_end(void **state) {
    (void)state;
    /* past the end the lr stays at base * cmin instead of rising again */
    ZnSchedConfig c = cos_cfg(10, 50, 0.0, 0.1, 0);
    ZnLrSched s = mk(&c, 0.01);
    double floor_lr = zn_sched_lr_at(&s, 49);
    assert_bits(floor_lr, 0.01 * (0.1 + 0.9 * ((1 + cos(M_PI * 1.0)) / 2)));
    for (long t = 49; t < 500; t++) assert_bits(zn_sched_lr_at(&s, t), floor_lr);
    /* test_warmup_cosine_lr_total_num_steps_equals_warmup_num_steps: T == W
       == 10, cmin 0.1: every t >= 10 has ratio cmin */
    c.total_num_steps = 10;
    c.warmup_num_steps = 10;
    s = mk(&c, 0.01);
    for (long t = 10; t < 15; t++) assert_near(zn_sched_lr_at(&s, t), 0.01 * 0.1, 1e-15);
    /* T < W: no decay window either (quiet: the warning is Z-SCHED-008's) */
    c.total_num_steps = 3;
    s = mk_quiet(&c, 0.01);
    for (long t = 10; t < 15; t++) assert_bits(zn_sched_lr_at(&s, t), zn_sched_lr_at(&s, 100));
}

/* ---- OneCycle -------------------------------------------------------------- */

/* compares a OneCycle schedule with py_cycle over NSTEP steps, lr and betas */
static void check_cycle(const PyCycle *p) {
    ZnSchedConfig c = cycle_cfg(p);
    ZnLrSched s = mk(&c, OPT_LR);
    ZnLrSched r = mk(&c, OPT_LR);
    assert_int_equal(s.sets_betas, 1);
    for (long t = -1; t < NSTEP; t++) {
        if (t >= 0) zn_sched_step(&s);
        double lr, mom, b1, b2;
        py_cycle(p, t, &lr, &mom);
        if (memcmp(&s.lr, &lr, sizeof lr) != 0) fail_msg("t=%ld: lr %.17g, expected %.17g", t, s.lr, lr);
        if (memcmp(&s.beta1, &mom, sizeof mom) != 0) fail_msg("t=%ld: beta1 %.17g, expected %.17g", t, s.beta1, mom);
        assert_bits(s.beta2, 0.99);
        assert_bits(zn_sched_lr_at(&s, t), lr);
        zn_sched_betas_at(&s, t, &b1, &b2);
        assert_bits(b1, mom);
        assert_bits(b2, 0.99);
        zn_sched_set_iteration(&r, t);
        assert_bits(r.lr, lr);
        assert_bits(r.beta1, mom);
    }
}

/* spec: Z-SCHED-011 */
static void test_one_cycle_lr_sequence(void **state) {
    (void)state;
    /* TestOneCycle.test_lr's parameters, then asymmetric and one-sided cycles */
    const PyCycle P[] = {
        {1e-5, 1e-2, 1e-3, 10, -1, 0, -1, 10, 0.8, 0.9, 0},
        {1e-3, 1e-1, 0, 21, -1, 0, -1, 21, 0.8, 0.9, 0},
        {1e-3, 1e-1, 1e-1, 21, -1, 0, -1, 21, 0.8, 0.9, 0},
        {1e-5, 1e-1, 0, 10, -1, 0, -1, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 0, 10, 21, 0, -1, 0, 0.85, 0.95, 0},
        {1e-3, 1e-2, 0, 37, 3, 0, -1, 0, 0.85, 0.95, 0},
        {1e-3, 1e-1, 0, 100, 0, 0, -1, 0, 0.8, 0.9, 0},
        {1e-4, 3e-3, 0.5, 2000, -1, 0, -1, 7, 0.8, 0.9, 0.01},  /* DeepSpeed's default step size */
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) check_cycle(&P[i]);

    /* DeepSpeed's facts (step_lrs[i] = get_lr() before step i + 1 = lr(i - 1)):
       lr(-1) = min, lr(c - 1) = max, rising over the first c values, falling
       over the next c */
    for (int i = 0; i < 5; i++) {
        if (P[i].second != -1) continue;
        ZnSchedConfig c = cycle_cfg(&P[i]);
        ZnLrSched s = mk(&c, OPT_LR);
        long cs = P[i].first;
        assert_bits(zn_sched_lr_at(&s, -1), P[i].min_lr);
        assert_bits(zn_sched_lr_at(&s, cs - 1), P[i].max_lr);
        for (long k = 1; k < cs; k++) assert_true(zn_sched_lr_at(&s, k - 1) > zn_sched_lr_at(&s, k - 2));
        for (long k = cs + 1; k < 2 * cs; k++) assert_true(zn_sched_lr_at(&s, k - 1) < zn_sched_lr_at(&s, k - 2));
    }
    /* test_one_cycle_allows_zero_second_step_size: ratio 1, lr rises */
    ZnSchedConfig c = cycle_cfg(&P[6]);
    ZnLrSched s = mk(&c, 0.1);
    assert_true(s.step_ratio == 1.0);
    assert_bits(s.lr, 1e-3);
    for (int k = 0; k < 3; k++) zn_sched_step(&s);
    assert_true(s.lr > 1e-3);
    /* TENSOR_LR_CONTRACTS "OneCycle": 0.01 -> 0.1, 10 + 10 steps, no momentum: lr(1) */
    c = dflt(ZN_SCHED_ONE_CYCLE);
    c.cycle_min_lr = 0.01;
    c.cycle_max_lr = 0.1;
    c.cycle_first_step_size = 10;
    c.cycle_second_step_size = 10;
    c.cycle_momentum = 0;
    s = mk(&c, 0.1);
    assert_bits(s.lr, 0.01);
    zn_sched_set_iteration(&s, 1);
    assert_near(s.lr, 0.01 + (0.1 - 0.01) * 2 / 10, 1e-15);
}

/* OneCycle lrs after each of `steps` steps (DeepSpeed's _one_cycle_lrs helper) */
static void one_cycle_lrs(double *out, long stair1, long steps, long first, long second, long stair2) {
    PyCycle p = {0.001, 0.01, 0, first, second, stair1, stair2, 0, 0.8, 0.9, 0};
    ZnSchedConfig c = cycle_cfg(&p);
    ZnLrSched s = mk(&c, 0.001);
    for (long i = 0; i < steps; i++) {
        zn_sched_step(&s);
        out[i] = s.lr;
    }
}

static int count_distinct(const double *v, int n) {
    int d = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= v[j] == v[i];
        d += !seen;
    }
    return d;
}

/* spec: Z-SCHED-012 */
static void test_one_cycle_stairs(void **state) {
    (void)state;
    /* against the transcription, for several stair counts and shapes */
    const PyCycle P[] = {
        {1e-3, 1e-2, 0, 8, 8, 2, -1, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 0, 10, 21, 2, 3, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 0, 10, 21, 10, 21, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 0, 10, 21, 0, 3, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 0, 10, 21, 3, 0, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 1e-2, 13, 7, 4, 5, 3, 0.8, 0.9, 1e-2},
        {1e-3, 1e-2, 0, 7, 0, 3, -1, 0, 0.8, 0.9, 0},
        {1e-3, 1e-2, 0, 9, 9, -2, -1, 0, 0.8, 0.9, 0},   /* negative count: continuous */
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) check_cycle(&P[i]);

    /* test_one_cycle_stair_count_holds_lr_flat (8 + 8, 16 steps) */
    double cont[31], st[31], tmp[31];
    one_cycle_lrs(cont, 0, 16, 8, 8, -1);
    one_cycle_lrs(st, 2, 16, 8, 8, -1);
    assert_int_equal(count_distinct(cont, 8), 8);
    assert_true(memcmp(st, cont, 16 * sizeof *st) != 0);
    assert_true(count_distinct(st, 8) < count_distinct(cont, 8));
    assert_bits(st[0], st[1]);
    one_cycle_lrs(tmp, 8, 16, 8, 8, -1);
    assert_memory_equal(tmp, cont, 16 * sizeof *tmp);   /* k = half length: continuous */

    /* test_one_cycle_stair_count_handles_asymmetric_cycle (10 + 21, 31 steps) */
    one_cycle_lrs(cont, 0, 31, 10, 21, 0);
    one_cycle_lrs(st, 10, 31, 10, 21, 21);
    for (int i = 0; i < 31; i++) assert_near(st[i], cont[i], 1e-6);
    assert_near(st[9], 0.01, 1e-6);
    one_cycle_lrs(st, 2, 31, 10, 21, 0);               /* first half only */
    assert_true(memcmp(st, cont, 10 * sizeof *st) != 0);
    assert_memory_equal(st + 10, cont + 10, 21 * sizeof *st);
    one_cycle_lrs(st, 0, 31, 10, 21, 3);               /* second half only */
    assert_memory_equal(st, cont, 10 * sizeof *st);
    assert_true(memcmp(st + 10, cont + 10, 20 * sizeof *st) != 0);
    /* the stair count also moves the momentum */
    PyCycle p = {1e-3, 1e-2, 0, 8, 8, 2, -1, 0, 0.8, 0.9, 0};
    ZnSchedConfig c = cycle_cfg(&p);
    ZnLrSched s = mk(&c, 0.001);
    zn_sched_step(&s);
    double b0 = s.beta1;
    zn_sched_step(&s);
    assert_bits(s.beta1, b0);
}

/* spec: Z-SCHED-013 */
static void test_one_cycle_betas(void **state) {
    (void)state;
    /* construction: (cycle_min_mom, 0.99), not the formula's max_mom at t = -1 */
    PyCycle p = {1e-3, 1e-2, 0, 10, -1, 0, -1, 10, 0.08, 0.09, 1e-3};
    ZnSchedConfig c = cycle_cfg(&p);
    ZnLrSched s = mk(&c, OPT_LR);
    assert_int_equal(s.sets_betas, 1);
    assert_bits(s.beta1, 0.08);
    assert_bits(s.beta2, 0.99);
    /* step 2 jumps back near max_mom: 0.09 - 0.01 * (1/20 / 0.5) */
    zn_sched_step(&s);
    assert_bits(s.beta1, 0.09 - (0.09 - 0.08) * ((1.0 + 1.0 / 20.0 - 1.0) / 0.5));
    assert_true(s.beta1 > 0.0889);
    /* TestOneCycle.test_mom, step_moms[i] = get_mom() at t = i - 1, for i >= 1:
       min_mom at t = step - 1, decreasing before, increasing after, and
       increasing through the decay when the rate is > 0 */
    const struct { double rate; long step; } M[] = {{1e-3, 10}, {0, 21}};
    for (int i = 0; i < 2; i++) {
        PyCycle q = {1e-3, 1e-2, 0, M[i].step, -1, 0, -1, M[i].step, 0.08, 0.09, M[i].rate};
        c = cycle_cfg(&q);
        s = mk(&c, OPT_LR);
        double mom[200], b2;
        for (long t = 0; t < 200; t++) zn_sched_betas_at(&s, t, &mom[t], &b2);
        long n = M[i].step;
        assert_bits(mom[n - 1], 0.08);
        for (long t = 1; t < n; t++) assert_true(mom[t] < mom[t - 1]);
        for (long t = n; t < 2 * n; t++) assert_true(mom[t] > mom[t - 1]);
        if (M[i].rate > 0)
            for (long t = 2 * n; t < 200; t++) assert_true(mom[t] > mom[t - 1]);
        else
            for (long t = 2 * n; t < 200; t++) assert_bits(mom[t], 0.09);
    }
    /* beta2 is 0.99 whatever the optimizer's */
    ZnErr e;
    assert_int_equal(zn_sched_init(&s, &c, OPT_LR, 0.5, 0.95, &e), ZN_OK);
    for (int k = 0; k < 50; k++) {
        assert_bits(s.beta2, 0.99);
        zn_sched_step(&s);
    }
    /* cycle_momentum false: the optimizer's betas, untouched */
    c.cycle_momentum = 0;
    assert_int_equal(zn_sched_init(&s, &c, OPT_LR, 0.5, 0.95, &e), ZN_OK);
    assert_int_equal(s.sets_betas, 0);
    for (int k = 0; k < 50; k++) {
        assert_bits(s.beta1, 0.5);
        assert_bits(s.beta2, 0.95);
        zn_sched_step(&s);
    }
}

/* spec: Z-SCHED-014 */
static void test_one_cycle_decay(void **state) {
    (void)state;
    /* decay on and off: decay_step_size 0 turns both off, a rate of 0 its own */
    const PyCycle P[] = {
        {1e-3, 1e-1, 1e-1, 21, -1, 0, -1, 21, 0.8, 0.9, 1e-2},
        {1e-3, 1e-1, 1e-1, 5, 5, 0, -1, 0, 0.8, 0.9, 1e-2},
        {1e-3, 1e-1, 0, 5, 5, 0, -1, 3, 0.8, 0.9, 1e-2},
        {1e-3, 1e-1, 0.3, 5, 5, 0, -1, 3, 0.8, 0.9, 0},
    };
    for (size_t i = 0; i < sizeof P / sizeof *P; i++) check_cycle(&P[i]);
    /* the decay formulas written out at the first decay step t = total */
    ZnSchedConfig c = cycle_cfg(&P[0]);
    ZnLrSched s = mk(&c, OPT_LR);
    zn_sched_set_iteration(&s, 42);
    assert_bits(s.lr, 1e-3 / (1 + 1e-1 * (1.0 / 21)));
    assert_bits(s.beta1, 0.9 * (1 + 1e-2 * (1.0 / 21)));
    /* DeepSpeed TestOneCycle.test_lr: with a rate the lr keeps decreasing */
    for (long t = 43; t < 300; t++) assert_true(zn_sched_lr_at(&s, t) < zn_sched_lr_at(&s, t - 1));
    /* P[1], decay_step_size 0: min lr and max momentum forever; P[2], only
       the lr rate 0: lr holds, momentum grows; P[3], only the momentum rate
       0: lr decays, momentum holds */
    const struct { int skip_lr, skip_mom; } K[] = {{1, 1}, {1, 0}, {0, 1}};
    for (int i = 0; i < 3; i++) {
        c = cycle_cfg(&P[i + 1]);
        s = mk(&c, OPT_LR);
        assert_int_equal(s.skip_lr_decay, K[i].skip_lr);
        assert_int_equal(s.skip_mom_decay, K[i].skip_mom);
        zn_sched_set_iteration(&s, 1000);
        if (K[i].skip_lr) assert_bits(s.lr, 1e-3);
        else assert_true(s.lr < 1e-3);
        if (K[i].skip_mom) assert_bits(s.beta1, 0.9);
        else assert_true(s.beta1 > 0.9);
    }
}

/* spec: Z-SCHED-017 */
static void test_one_cycle_inverted_bounds(void **state) {
    (void)state;
    /* max < min and max_mom < min_mom are accepted; the cycle runs upside down */
    PyCycle p = {1e-2, 1e-4, 1e-2, 6, 4, 0, -1, 2, 0.95, 0.85, 1e-2};
    check_cycle(&p);
    ZnSchedConfig c = cycle_cfg(&p);
    ZnLrSched s = mk(&c, OPT_LR);
    for (long t = 0; t < 5; t++) assert_true(zn_sched_lr_at(&s, t + 1) < zn_sched_lr_at(&s, t));
    /* the bottom of the inverted cycle is at t = first - 1 */
    assert_near(zn_sched_lr_at(&s, 5), 1e-4, 1e-9);
    /* momentum mirrors it: cycle_min_mom (0.95) at the scale-1 point,
       cycle_max_mom (0.85) at the cycle's ends */
    zn_sched_set_iteration(&s, 5);
    assert_near(s.beta1, 0.95, 1e-9);
    zn_sched_set_iteration(&s, 9);
    assert_bits(s.beta1, 0.85);
}

/* ---- LRRangeTest ----------------------------------------------------------- */

/* spec: Z-SCHED-015 */
static void test_lr_range_test(void **state) {
    (void)state;
    /* TestLrRange's parameter table, then DeepSpeed's defaults */
    const struct { double min_lr, rate; long size; int stair; } P[] = {
        {1e-4, 1e-5, 1, 1}, {1e-5, 1e-5, 1, 0}, {1e-4, 1e-3, 10, 1}, {1e-3, 1e-3, 10, 0},
        {1e-2, 1e-2, 19, 1}, {1e-2, 1e-2, 19, 0}, {1e-3, 1.0, 2000, 0}, {1e-3, 1.0, 2000, 1},
    };
    static double want[NSTEP + 1];
    for (int i = 0; i < 8; i++) {
        ZnSchedConfig c = dflt(ZN_SCHED_LR_RANGE_TEST);
        if (i < 6) {
            c.lr_range_test_min_lr = P[i].min_lr;
            c.lr_range_test_step_rate = P[i].rate;
            c.lr_range_test_step_size = P[i].size;
        }
        c.lr_range_test_staircase = P[i].stair;
        for (long t = -1; t < NSTEP; t++) want[t + 1] = py_range_lr(t, P[i].min_lr, P[i].size, P[i].rate, P[i].stair);
        ZnLrSched s = mk(&c, OPT_LR);
        check_steps(&s, want, NSTEP);
        assert_int_equal(s.sets_betas, 0);
        /* DeepSpeed's facts: step_lrs[i] = lr(i - 1) over max(25, size) steps;
           lr(-1) = min, flat within each block of `size` (staircase) or
           strictly increasing (continuous) */
        long n = P[i].size > 25 ? P[i].size : 25;
        assert_bits(zn_sched_lr_at(&s, -1), P[i].min_lr);
        for (long k = 0; k < n; k++) {
            double v = zn_sched_lr_at(&s, k - 1);
            if (P[i].stair) assert_bits(v, zn_sched_lr_at(&s, (k / P[i].size) * P[i].size - 1));
            else if (k > 0) assert_true(v > zn_sched_lr_at(&s, k - 2));
        }
    }
    /* TENSOR_LR_CONTRACTS "LRRangeTest": defaults, 1e-3 then 1e-3*(1 + 2/2000) at t = 1 */
    ZnSchedConfig c = dflt(ZN_SCHED_LR_RANGE_TEST);
    ZnLrSched s = mk(&c, 0.1);
    assert_bits(s.lr, 1e-3);
    zn_sched_set_iteration(&s, 1);
    assert_near(s.lr, 1e-3 * (1 + 2.0 / 2000), 1e-15);
}

/* ---- resume ------------------------------------------------------------------ */

/* spec: Z-SCHED-016 */
static void test_set_iteration_equals_stepping(void **state) {
    (void)state;
    for (int id = 0; id < G_NCASES; id++) {
        double opt_lr;
        int trans;
        ZnSchedConfig c = golden_cfg(id, &opt_lr, &trans);
        ZnLrSched s = mk(&c, opt_lr);
        for (long t = -1; t < 700; t++) {
            if (t >= 0) zn_sched_step(&s);
            ZnLrSched r = mk(&c, opt_lr);
            zn_sched_set_iteration(&r, t);
            assert_int_equal(r.t, s.t);
            assert_bits(r.lr, s.lr);
            assert_bits(r.beta1, s.beta1);
            assert_bits(r.beta2, s.beta2);
            /* lr_at is pure: it does not move t */
            assert_bits(zn_sched_lr_at(&s, t), s.lr);
            assert_int_equal(s.t, t);
        }
        /* going back to -1 (and below) restores the constructor's values */
        ZnLrSched fresh = mk(&c, opt_lr);
        zn_sched_set_iteration(&s, -1);
        assert_int_equal(s.t, -1);
        assert_bits(s.lr, fresh.lr);
        assert_bits(s.beta1, fresh.beta1);
        zn_sched_set_iteration(&s, -7);
        assert_int_equal(s.t, -1);
        assert_bits(s.lr, fresh.lr);
        /* and stepping on from a restored iteration continues the sequence */
        ZnLrSched a = mk(&c, opt_lr), b = mk(&c, opt_lr);
        for (int k = 0; k < 60; k++) zn_sched_step(&a);
        zn_sched_set_iteration(&b, 29);
        for (int k = 0; k < 30; k++) zn_sched_step(&b);
        assert_int_equal(a.t, b.t);
        assert_bits(a.lr, b.lr);
        assert_bits(a.beta1, b.beta1);
    }
}

ZT_MAIN(
    cmocka_unit_test(test_first_steps_and_engine_timing),
    cmocka_unit_test(test_skipped_steps_hold_lr),
    cmocka_unit_test(test_validation_errors),
    cmocka_unit_test(test_golden_values),
    cmocka_unit_test(test_no_schedule),
    cmocka_unit_test(test_warmup_lr_sequence),
    cmocka_unit_test(test_warmup_lr_deepspeed_facts),
    cmocka_unit_test(test_warmup_decay_sequence),
    cmocka_unit_test(test_warmup_decay_deepspeed_facts),
    cmocka_unit_test(test_total_below_warmup_warns),
    cmocka_unit_test(test_warmup_cosine_sequence),
    cmocka_unit_test(test_warmup_cosine_zero_before_first_step),
    cmocka_unit_test(test_warmup_cosine_clamped_at_end),
    cmocka_unit_test(test_one_cycle_lr_sequence),
    cmocka_unit_test(test_one_cycle_stairs),
    cmocka_unit_test(test_one_cycle_betas),
    cmocka_unit_test(test_one_cycle_decay),
    cmocka_unit_test(test_one_cycle_inverted_bounds),
    cmocka_unit_test(test_lr_range_test),
    cmocka_unit_test(test_set_iteration_equals_stepping))
