/* test_loss_scaler.c: the fp16 loss scaler against DeepSpeed's own test
 * scenarios (tests/unit/runtime/half_precision/test_zero_optim_overflow.py,
 * test_dynamic_loss_scale.py) and, over random overflow sequences, against
 * an independent transcription of DeepSpeed 0.19.6's Python. */
#include "testutil.h"
#include <float.h>
#include "engine/loss_scaler.h"

/* the fp16 section DeepSpeed's ZeRO overflow tests use */
static ZnFp16Config fp16_cfg(int power, long window, int hysteresis, double min_scale, int consecutive) {
    ZnFp16Config c = {.enabled = 1, .loss_scale = 0.0, .initial_scale_power = power, .loss_scale_window = window,
                      .hysteresis = hysteresis, .consecutive_hysteresis = consecutive, .min_loss_scale = min_scale};
    return c;
}

/* DeepSpeed 0.19.6's fp16 defaults (precision_config.py DeepSpeedFP16Config),
 * written out here because this test does not link config.c */
static ZnFp16Config fp16_defaults(void) {
    return fp16_cfg(16, 1000, 2, 1.0, 0);
}

/* a dynamic fp16 scaler built from fp16_cfg's parameters: most tests start
 * from one, and several build a second along the way */
static ZnLossScaler scaler(int power, long window, int hysteresis, double min_scale, int consecutive) {
    ZnFp16Config c = fp16_cfg(power, window, hysteresis, min_scale, consecutive);
    ZnLossScaler s;
    zn_scaler_init_fp16(&s, &c);
    return s;
}

/* field by field (struct padding is not part of the state) */
static void assert_same_state(const ZnLossScaler *a, const ZnLossScaler *b) {
    assert_int_equal(a->dynamic, b->dynamic);
    assert_true(a->cur_scale == b->cur_scale);
    assert_int_equal(a->cur_iter, b->cur_iter);
    assert_int_equal(a->last_overflow_iter, b->last_overflow_iter);
    assert_int_equal(a->cur_hysteresis, b->cur_hysteresis);
    assert_true(a->scale_factor == b->scale_factor);
    assert_int_equal(a->scale_window, b->scale_window);
    assert_true(a->min_scale == b->min_scale);
    assert_int_equal(a->delayed_shift, b->delayed_shift);
    assert_int_equal(a->consecutive_hysteresis, b->consecutive_hysteresis);
    assert_int_equal(a->raise_error_at_min_scale, b->raise_error_at_min_scale);
}

/* one update that must succeed */
static void step_ok(ZnLossScaler *s, int overflow) {
    ZnErr e = {0};
    int rc = zn_scaler_update(s, overflow, &e);
    if (rc != 0) fail_msg("zn_scaler_update failed: %d %s", rc, e.msg);
}

/* One update (overflow or not), after which the scale is want. */
static void step_scale(ZnLossScaler *s, int overflow, double want) {
    step_ok(s, overflow);
    if (s->cur_scale != want) fail_msg("scale %g after the update, expected %g", s->cur_scale, want);
}

/* spec: Z-SCALE-001 fp16 loss_scale 0 builds DeepSpeed's DynamicLossScaler
 * with the config's parameters; loss_scale > 0 and bf16/fp32 build static ones */
static void test_create(void **st) {
    (void)st;
    ZnFp16Config c = fp16_cfg(8, 2, 3, 2.0, 1);
    ZnLossScaler s;
    zn_scaler_init_fp16(&s, &c);
    assert_true(s.dynamic);
    assert_true(s.cur_scale == 256.0);
    assert_int_equal(s.cur_iter, 0);
    assert_int_equal(s.last_overflow_iter, -1);
    assert_int_equal(s.cur_hysteresis, 3);
    assert_int_equal(s.delayed_shift, 3);
    assert_true(s.scale_factor == 2.0);
    assert_int_equal(s.scale_window, 2);
    assert_true(s.min_scale == 2.0);
    assert_int_equal(s.consecutive_hysteresis, 1);
    assert_int_equal(s.raise_error_at_min_scale, 1);

    /* the largest power zinc's config admits is still exact */
    c.initial_scale_power = 127;
    zn_scaler_init_fp16(&s, &c);
    assert_true(s.cur_scale == ldexp(1.0, 127));
    c.initial_scale_power = 0;
    zn_scaler_init_fp16(&s, &c);
    assert_true(s.cur_scale == 1.0);

    /* any loss_scale other than 0 is static (TestZeroStaticScale uses 138.) */
    c.loss_scale = 138.0;
    zn_scaler_init_fp16(&s, &c);
    assert_false(s.dynamic);
    assert_true(s.cur_scale == 138.0);

    zn_scaler_init_static(&s, 1.0);
    assert_false(s.dynamic);
    assert_true(s.cur_scale == 1.0);
}

/* spec: Z-SCALE-002 default fp16 section: 2^16, window 1000, hysteresis 2,
 * min 1; first growth on the 1001st clean step; first overflow only spends
 * hysteresis, the second halves */
static void test_defaults(void **st) {
    (void)st;
    ZnFp16Config c = fp16_defaults();
    ZnLossScaler s;
    zn_scaler_init_fp16(&s, &c);
    assert_true(s.dynamic);
    assert_true(s.cur_scale == 65536.0);
    assert_int_equal(s.scale_window, 1000);
    assert_int_equal(s.delayed_shift, 2);
    assert_int_equal(s.cur_hysteresis, 2);
    assert_true(s.min_scale == 1.0);
    assert_int_equal(s.consecutive_hysteresis, 0);
    assert_int_equal(s.raise_error_at_min_scale, 1);

    for (int i = 0; i < 1000; i++) step_ok(&s, 0);
    assert_true(s.cur_scale == 65536.0);   /* 1000 clean steps: not yet */
    step_scale(&s, 0, 131072.0);  /* the 1001st grows it */
    assert_int_equal(s.cur_iter, 1001);

    /* a fresh default scaler: the usual warm-up skips */
    zn_scaler_init_fp16(&s, &c);
    step_scale(&s, 1, 65536.0);
    assert_int_equal(s.cur_hysteresis, 1);
    step_scale(&s, 1, 32768.0);
    step_scale(&s, 1, 16384.0);   /* hysteresis stays spent */
    assert_int_equal(s.last_overflow_iter, 2);
    assert_int_equal(s.cur_iter, 3);
}

/* spec: Z-SCALE-005 no_overflow (TestZeROFloat16.test_no_overflow): init 2^8,
 * window 2, ten clean steps */
static void test_no_overflow(void **st) {
    (void)st;
    static const double want[10] = {256, 256, 512, 512, 1024, 1024, 2048, 2048, 4096, 4096};
    ZnLossScaler s = scaler(8, 2, 2, 1.0, 0);
    for (int n = 1; n <= 10; n++) {
        step_ok(&s, 0);
        if (s.cur_scale != want[n - 1]) fail_msg("step %d: scale %g, want %g", n, s.cur_scale, want[n - 1]);
        assert_int_equal(s.cur_iter, n);
        assert_int_equal(s.last_overflow_iter, -1);
    }
    /* window 1 grows on every clean step after the first */
    s = scaler(0, 1, 2, 1.0, 0);
    step_scale(&s, 0, 1.0);
    for (int n = 2; n <= 5; n++) {
        step_ok(&s, 0);
        assert_true(s.cur_scale == ldexp(1.0, n - 1));
    }
}

/* spec: Z-SCALE-004 all_overflow (TestZeROFloat16.test_all_overflow): init
 * 2^8, window 2, hysteresis 1, eight overflows halve down to 1 */
static void test_all_overflow(void **st) {
    (void)st;
    static const double want[8] = {128, 64, 32, 16, 8, 4, 2, 1};
    ZnLossScaler s = scaler(8, 2, 1, 1.0, 0);
    for (int n = 1; n <= 8; n++) {
        step_ok(&s, 1);
        if (s.cur_scale != want[n - 1]) fail_msg("step %d: scale %g, want %g", n, s.cur_scale, want[n - 1]);
        assert_int_equal(s.cur_iter, n);
        assert_int_equal(s.last_overflow_iter, n - 1);
    }
    /* a ninth overflow at the floor is the error of Z-SCALE-009 */
    ZnErr e = {0};
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);

    /* floor not a power of two: max(S/2, min) lands on it */
    s = scaler(4, 2, 1, 3.0, 0);
    step_scale(&s, 1, 8.0);
    step_scale(&s, 1, 4.0);
    step_scale(&s, 1, 3.0);
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);
}

/* spec: Z-SCALE-006 some_overflow (TestZeROFloat16.test_some_overflow): init
 * 256, window 2, hysteresis 1: 2 overflows -> 64 (cur_iter 2); 3 clean -> 128
 * grown at cur_iter 4; 1 overflow -> 64 (cur_iter 6) */
static void test_some_overflow(void **st) {
    (void)st;
    ZnLossScaler s = scaler(8, 2, 1, 1.0, 0);
    step_ok(&s, 1);
    step_scale(&s, 1, 64.0);
    assert_int_equal(s.cur_iter, 2);
    assert_int_equal(s.last_overflow_iter, 1);
    step_ok(&s, 0);                    /* cur_iter 2: stable_interval 0 */
    step_ok(&s, 0);                    /* cur_iter 3: 1 */
    assert_true(s.cur_scale == 64.0);  /* old (pre-0.17.1) rule would have grown here */
    step_ok(&s, 0);                    /* cur_iter 4: 2 = window: grow */
    assert_true(s.cur_scale == 128.0);
    assert_int_equal(s.cur_iter, 5);
    step_scale(&s, 1, 64.0);
    assert_int_equal(s.cur_iter, 6);
    assert_int_equal(s.last_overflow_iter, 5);
    /* next growth again needs window + 1 clean steps: at cur_iter 5 + 2 + 1 */
    step_ok(&s, 0);
    step_scale(&s, 0, 64.0);
    step_scale(&s, 0, 128.0);
    assert_int_equal(s.cur_iter, 9);
    /* and then every window clean steps */
    step_scale(&s, 0, 128.0);
    step_scale(&s, 0, 256.0);
}

/* spec: Z-SCALE-007 hysteresis without consecutive_hysteresis: overflows
 * spend it, the scale drops once it is 1, and only a growth refills it */
static void test_hysteresis(void **st) {
    (void)st;
    ZnLossScaler s = scaler(8, 2, 2, 1.0, 0);
    step_ok(&s, 1);                    /* hysteresis 2 -> 1, scale kept */
    assert_true(s.cur_scale == 256.0);
    assert_int_equal(s.cur_hysteresis, 1);
    assert_int_equal(s.last_overflow_iter, 0);
    step_ok(&s, 1);                    /* now halves */
    assert_true(s.cur_scale == 128.0);
    assert_int_equal(s.cur_hysteresis, 1);
    step_ok(&s, 0);                    /* a clean step does not refill */
    assert_int_equal(s.cur_hysteresis, 1);
    step_ok(&s, 1);                    /* so this overflow halves at once */
    assert_true(s.cur_scale == 64.0);
    /* window+1 clean steps: growth at cur_iter 3+2+1 refills */
    step_ok(&s, 0);
    step_ok(&s, 0);
    assert_int_equal(s.cur_hysteresis, 1);
    step_scale(&s, 0, 128.0);
    assert_int_equal(s.cur_hysteresis, 2);
    step_ok(&s, 1);                    /* the refilled hysteresis absorbs one */
    assert_true(s.cur_scale == 128.0);
    assert_int_equal(s.cur_hysteresis, 1);

    /* hysteresis 3: two absorbed, the third and later drop */
    s = scaler(10, 100, 3, 1.0, 0);
    static const double want[5] = {1024, 1024, 512, 256, 128};
    for (int i = 0; i < 5; i++) {
        step_ok(&s, 1);
        assert_true(s.cur_scale == want[i]);
    }
    assert_int_equal(s.cur_hysteresis, 1);
}

/* spec: Z-SCALE-008 consecutive_hysteresis: every clean step refills the
 * hysteresis, so isolated overflows never lower the scale */
static void test_consecutive_hysteresis(void **st) {
    (void)st;
    ZnLossScaler s = scaler(8, 1000, 2, 1.0, 1);
    for (int i = 0; i < 10; i++) {
        step_scale(&s, 1, 256.0);
        assert_int_equal(s.cur_hysteresis, 1);
        step_ok(&s, 0);
        assert_int_equal(s.cur_hysteresis, 2);
    }
    assert_true(s.cur_scale == 256.0);
    /* two in a row still drop */
    step_ok(&s, 1);
    step_scale(&s, 1, 128.0);
    /* hysteresis 3: two overflows leave 1, a single clean step restores 3 */
    s = scaler(8, 2, 3, 1.0, 1);
    step_ok(&s, 1);
    step_ok(&s, 1);
    assert_int_equal(s.cur_hysteresis, 1);
    step_ok(&s, 0);
    assert_int_equal(s.cur_hysteresis, 3);
    assert_true(s.cur_scale == 256.0);

    /* without consecutive_hysteresis the same pattern drops every other overflow */
    s = scaler(8, 1000, 2, 1.0, 0);
    step_ok(&s, 1);
    step_ok(&s, 0);
    step_scale(&s, 1, 128.0);
}

/* spec: Z-SCALE-009 an overflow at the minimum with hysteresis spent is
 * ZN_E_NUMERIC with DeepSpeed's exception text, the state untouched; the
 * hysteresis is consulted first; without the raise the floor holds */
static void test_min_scale(void **st) {
    (void)st;
    ZnLossScaler s = scaler(2, 2, 1, 1.0, 0), before;
    ZnErr e = {0};
    step_ok(&s, 1);
    step_scale(&s, 1, 1.0);
    before = s;
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);
    assert_int_equal(e.code, ZN_E_NUMERIC);
    assert_str_contains(e.msg, "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.");
    assert_str_contains(e.msg, "min_loss_scale 1");
    assert_same_state(&s, &before);
    /* a NULL ZnErr is allowed */
    assert_int_equal(zn_scaler_update(&s, 1, NULL), ZN_E_NUMERIC);
    /* a clean step is still fine afterwards */
    step_ok(&s, 0);
    assert_int_equal(s.cur_iter, 3);

    /* starting at the minimum: the very first overflow fails */
    s = scaler(0, 2, 1, 1.0, 0);
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);
    assert_int_equal(s.cur_iter, 0);
    assert_int_equal(s.last_overflow_iter, -1);

    /* hysteresis left: at the minimum the overflow spends it, no error */
    s = scaler(0, 2, 2, 1.0, 0);
    step_ok(&s, 1);
    assert_int_equal(s.cur_hysteresis, 1);
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);

    /* min_loss_scale 2 (the Lamb test's floor) */
    s = scaler(4, 2, 1, 2.0, 0);
    static const double want[3] = {8, 4, 2};
    for (int i = 0; i < 3; i++) {
        step_ok(&s, 1);
        assert_true(s.cur_scale == want[i]);
    }
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);

    /* raise_error_at_min_scale off: max(min/2, min) keeps the floor */
    s = scaler(1, 2, 1, 1.0, 0);
    s.raise_error_at_min_scale = 0;
    for (int i = 0; i < 5; i++) step_ok(&s, 1);
    assert_true(s.cur_scale == 1.0);
    assert_int_equal(s.cur_iter, 5);
    assert_int_equal(s.last_overflow_iter, 4);

    /* no upper cap: 1100 doublings from 2^127 reach inf (DeepSpeed has no cap either) */
    s = scaler(127, 1, 1, 1.0, 0);
    for (int i = 0; i < 1100; i++) step_ok(&s, 0);
    assert_true(isinf(s.cur_scale));
}

/* spec: Z-SCALE-010 a static scaler never changes, whatever the overflows */
static void test_static(void **st) {
    (void)st;
    ZnFp16Config c = fp16_defaults();
    c.loss_scale = 128.5;
    ZnLossScaler s, before;
    char line[256];
    zn_scaler_init_fp16(&s, &c);
    before = s;
    for (int i = 0; i < 50; i++) {
        ZnErr e = {0};
        zn_scaler_overflow_msg(&s, 0, line, sizeof line);
        assert_string_equal(line, "");   /* LossScaler logs nothing */
        assert_int_equal(zn_scaler_update(&s, i % 3 != 0, &e), 0);
    }
    assert_same_state(&s, &before);
    assert_true(s.cur_scale == 128.5);

    /* bf16 / fp32: static 1 */
    zn_scaler_init_static(&s, 1.0);
    before = s;
    for (int i = 0; i < 50; i++) step_ok(&s, i & 1);
    assert_same_state(&s, &before);
    assert_true(s.cur_scale == 1.0);
}

/* spec: Z-SCALE-011 DeepSpeed's overflow log lines, word for word, with the
 * scales printed as Python int() */
static void test_overflow_line(void **st) {
    (void)st;
    char b[512];
    zn_scaler_overflow_line(b, sizeof b, 0, 65536.0, 32768.0);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768");
    /* issue #697's line (raise off, at the floor) */
    zn_scaler_overflow_line(b, sizeof b, 0, 1.0, 1.0);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1");
    /* int() truncates: 0.5 -> 0, 3.75 -> 3 */
    zn_scaler_overflow_line(b, sizeof b, 3, 0.5, 0.25);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 3 Skipping step. Attempted loss scale: 0, reducing to 0");
    zn_scaler_overflow_line(b, sizeof b, 0, 7.5, 3.75);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 7, reducing to 3");
    /* beyond 2^63 Python's int() is exact; so is this */
    zn_scaler_overflow_line(b, sizeof b, 0, ldexp(1.0, 70), ldexp(1.0, 69));
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: "
                           "1180591620717411303424, reducing to 590295810358705651712");
    zn_scaler_hysteresis_line(b, sizeof b, 0, 65536.0, 2);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, "
                           "but hysteresis is 2. Reducing hysteresis to 1");
    /* a short buffer truncates, never overruns */
    char small[12];
    memset(small, 'x', sizeof small);
    zn_scaler_overflow_line(small, sizeof small, 0, 65536.0, 32768.0);
    assert_string_equal(small, "[deepspeed]");
    zn_scaler_overflow_line(small, 0, 0, 1.0, 1.0);   /* n == 0: nothing written */

    /* the line for the scaler's state, chosen before the update */
    ZnFp16Config c = fp16_defaults();
    ZnLossScaler s;
    zn_scaler_init_fp16(&s, &c);
    zn_scaler_overflow_msg(&s, 0, b, sizeof b);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, "
                           "but hysteresis is 2. Reducing hysteresis to 1");
    step_ok(&s, 1);
    zn_scaler_overflow_msg(&s, 0, b, sizeof b);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768");
    /* at the minimum DeepSpeed raises instead of logging */
    s = scaler(0, 2, 1, 1.0, 0);
    zn_scaler_overflow_msg(&s, 0, b, sizeof b);
    assert_string_equal(b, "");
}

/* spec: Z-SCALE-012 stage 0 (FP16_Optimizer): hysteresis ignored, every
 * overflow halves, the minimum is a floor (TestFused.test_all_overflow:
 * init 2^4, eight overflows -> 8,4,2,1,1,1,1,1) */
static void test_fused_stage0(void **st) {
    (void)st;
    static const double want[8] = {8, 4, 2, 1, 1, 1, 1, 1};
    ZnFp16Config c = fp16_cfg(4, 2, 2, 1.0, 0);   /* default hysteresis 2 is ignored */
    ZnLossScaler s;
    zn_scaler_init_fp16_fused(&s, &c);
    assert_true(s.dynamic);
    for (int n = 1; n <= 8; n++) {
        step_ok(&s, 1);
        assert_true(s.cur_scale == want[n - 1]);
        assert_int_equal(s.cur_iter, n);
    }
    /* TestFused.test_some_overflow: same sequence as the ZeRO one */
    c = fp16_cfg(8, 2, 2, 1.0, 0);
    zn_scaler_init_fp16_fused(&s, &c);
    step_ok(&s, 1);
    step_scale(&s, 1, 64.0);
    for (int i = 0; i < 3; i++) step_ok(&s, 0);
    assert_true(s.cur_scale == 128.0);
    step_scale(&s, 1, 64.0);
    assert_int_equal(s.cur_iter, 6);
    /* a static config stays static */
    c.loss_scale = 4.0;
    zn_scaler_init_fp16_fused(&s, &c);
    assert_false(s.dynamic);
    assert_true(s.cur_scale == 4.0);
}

/* spec: Z-SCALE-013 replicated quirks: a scale that starts below
 * min_loss_scale is raised to the minimum by an overflow; hysteresis <= 0
 * never lowers the scale */
static void test_below_min_quirk(void **st) {
    (void)st;
    ZnLossScaler s = scaler(0, 2, 1, 4.0, 0);   /* init 1 < min 4 */
    char b[256];
    assert_true(s.cur_scale == 1.0);
    zn_scaler_overflow_msg(&s, 0, b, sizeof b);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 4");
    step_scale(&s, 1, 4.0);
    ZnErr e = {0};
    assert_int_equal(zn_scaler_update(&s, 1, &e), ZN_E_NUMERIC);

    /* hysteresis 0 (zinc's config rejects it, DeepSpeed does not): the
     * test is "== 1", so the count runs 0, -1, -2, ... and the scale never drops */
    s = scaler(8, 1000, 0, 1.0, 0);
    zn_scaler_overflow_msg(&s, 0, b, sizeof b);
    assert_string_equal(b, "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 256, "
                           "but hysteresis is 0. Reducing hysteresis to -1");
    for (int i = 0; i < 20; i++) step_ok(&s, 1);
    assert_true(s.cur_scale == 256.0);
    assert_int_equal(s.cur_hysteresis, -20);
    /* hysteresis 1 drops even when cur_hysteresis says otherwise (a state
     * restored from elsewhere): DeepSpeed tests delayed_shift first */
    s = scaler(8, 1000, 1, 1.0, 0);
    s.cur_hysteresis = 5;
    step_scale(&s, 1, 128.0);
    assert_int_equal(s.cur_hysteresis, 5);
}

/* spec: Z-SCALE-014 the caller sees the pre-update scale before the call and
 * the post-update one after it; on a growth step they differ by the factor */
static void test_prev_and_new_scale(void **st) {
    (void)st;
    ZnLossScaler s = scaler(8, 2, 1, 1.0, 0);
    double prev[4], post[4];
    for (int i = 0; i < 4; i++) {
        prev[i] = s.cur_scale;
        step_ok(&s, 0);
        post[i] = s.cur_scale;
    }
    assert_true(prev[0] == 256 && post[0] == 256);
    assert_true(prev[1] == 256 && post[1] == 256);
    assert_true(prev[2] == 256 && post[2] == 512);  /* growth step: grads carry 256, DeepSpeed unscales by 512 */
    assert_true(prev[3] == 512 && post[3] == 512);
}

/* ---- property test: an independent transcription of DeepSpeed 0.19.6 ----
 * Written from loss_scaler.py DynamicLossScaler line by line, with Python's
 * names, instead of sharing any helper with src/engine/loss_scaler.c. */
typedef struct {
    double cur_scale;
    long long cur_iter, last_overflow_iter;
    long long cur_hysteresis;   /* Python int */
    double scale_factor, min_scale;
    long long scale_window, delayed_shift;
    int consecutive_hysteresis, raise_error_at_min_scale;
    int raised;                 /* the last update raised */
    char msg[256];              /* what it logged ("" for nothing) */
} PyScaler;

/* Python int() of a float that fits in long long */
static long long py_int(double x) { return (long long)x; }

static void py_update_scale(PyScaler *self, int overflow) {
    self->raised = 0;
    self->msg[0] = 0;
    if (overflow) {
        if (self->delayed_shift == 1 || self->cur_hysteresis == 1) {
            if ((self->cur_scale == self->min_scale) && self->raise_error_at_min_scale) {
                self->raised = 1;   /* raise Exception(...): nothing below runs */
                return;
            } else {
                double a = self->cur_scale / self->scale_factor;
                double next_scale = a >= self->min_scale ? a : self->min_scale;
                if (self->cur_scale < 0x1p62 && next_scale < 0x1p62)
                    snprintf(self->msg, sizeof self->msg,
                             "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: %lld, reducing to %lld",
                             py_int(self->cur_scale), py_int(next_scale));
                self->cur_scale = next_scale;
            }
        } else {
            if (self->cur_scale < 0x1p62)
                snprintf(self->msg, sizeof self->msg,
                         "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: %lld, but hysteresis "
                         "is %lld. Reducing hysteresis to %lld",
                         py_int(self->cur_scale), self->cur_hysteresis, self->cur_hysteresis - 1);
            self->cur_hysteresis -= 1;
        }
        self->last_overflow_iter = self->cur_iter;
    } else {
        if (self->consecutive_hysteresis) self->cur_hysteresis = self->delayed_shift;
        long long stable_interval = (self->cur_iter - self->last_overflow_iter) - 1;
        if ((stable_interval > 0) && (stable_interval % self->scale_window == 0)) {
            if (!self->consecutive_hysteresis) self->cur_hysteresis = self->delayed_shift;
            self->cur_scale *= self->scale_factor;
        }
    }
    self->cur_iter += 1;
}

/* FP16_Optimizer._update_scale (fused_optimizer.py), dynamic branch */
static void py_fused_update_scale(PyScaler *self, int skip) {
    if (skip) {
        double a = self->cur_scale / self->scale_factor;
        self->cur_scale = a >= self->min_scale ? a : self->min_scale;
        self->last_overflow_iter = self->cur_iter;
    } else {
        long long stable_interval = (self->cur_iter - self->last_overflow_iter) - 1;
        if ((stable_interval > 0) && (stable_interval % self->scale_window == 0))
            self->cur_scale *= self->scale_factor;
    }
    self->cur_iter += 1;
}

/* splitmix64: a fixed-seed source of overflow flags */
static uint64_t sm64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct {
    int power;
    long window;
    int hysteresis;
    double min_scale;
    int consecutive, raise;
    double p_overflow;
    int fused;
} PropCase;

/* spec: Z-SCALE-003 update_scale equals DeepSpeed's code for every overflow
 * sequence: 18 parameter sets x 40 random sequences x 300 steps, fixed seed */
static void test_property_vs_transcription(void **st) {
    (void)st;
    static const PropCase cases[] = {
        {8, 2, 1, 1.0, 0, 1, 0.30, 0},   {16, 1000, 2, 1.0, 0, 1, 0.01, 0},
        {16, 3, 2, 1.0, 0, 1, 0.40, 0},  {8, 2, 2, 1.0, 1, 1, 0.40, 0},
        {4, 1, 3, 2.0, 0, 0, 0.50, 0},   {0, 2, 2, 4.0, 0, 1, 0.50, 0},
        {10, 5, 3, 1.0, 1, 0, 0.60, 0},  {12, 7, 1, 1.0, 0, 0, 0.90, 0},
        {3, 1, 2, 1.0, 1, 1, 0.05, 0},   {20, 4, 4, 3.0, 0, 1, 0.70, 0},
        {6, 3, 5, 1.0, 1, 1, 0.80, 0},   {30, 10, 2, 1.0, 0, 0, 0.20, 0},
        {4, 2, 2, 1.0, 0, 0, 0.50, 1},   {8, 1, 3, 2.0, 1, 0, 0.30, 1},
        {16, 6, 1, 1.0, 0, 0, 0.75, 1},  {5, 3, 2, 1.0, 0, 0, 0.10, 1},
        {8, 2, 0, 1.0, 0, 1, 0.50, 0},   {8, 3, -1, 1.0, 1, 1, 0.50, 0},
    };
    uint64_t seed = 20240901u;
    long raised_total = 0, grew_total = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const PropCase *pc = &cases[ci];
        ZnFp16Config c = fp16_cfg(pc->power, pc->window, pc->hysteresis, pc->min_scale, pc->consecutive);
        for (int seq = 0; seq < 40; seq++) {
            ZnLossScaler s;
            if (pc->fused) {
                zn_scaler_init_fp16_fused(&s, &c);
            } else {
                zn_scaler_init_fp16(&s, &c);
                s.raise_error_at_min_scale = pc->raise;
            }
            PyScaler r;
            memset(&r, 0, sizeof r);
            r.cur_scale = ldexp(1.0, pc->power);   /* 2**initial_scale_power */
            r.cur_iter = 0;
            r.last_overflow_iter = -1;
            r.scale_factor = 2.0;
            r.scale_window = pc->window;
            r.min_scale = pc->min_scale;
            r.delayed_shift = pc->hysteresis;
            r.cur_hysteresis = pc->hysteresis;
            r.consecutive_hysteresis = pc->consecutive;
            r.raise_error_at_min_scale = pc->raise;
            for (int t = 0; t < 300; t++) {
                int ovf = (double)(sm64(&seed) >> 11) * 0x1p-53 < pc->p_overflow;
                char line[256];
                ZnErr e = {0};
                double before = s.cur_scale;
                zn_scaler_overflow_msg(&s, 0, line, sizeof line);
                int rc = zn_scaler_update(&s, ovf, &e);
                if (pc->fused) {
                    py_fused_update_scale(&r, ovf);
                } else {
                    py_update_scale(&r, ovf);
                    if (ovf && before < 0x1p61 && strcmp(line, r.msg) != 0)
                        fail_msg("case %zu seq %d step %d: line '%s', want '%s'", ci, seq, t, line, r.msg);
                }
                if ((rc == ZN_E_NUMERIC) != r.raised || (rc != 0 && rc != ZN_E_NUMERIC))
                    fail_msg("case %zu seq %d step %d: rc %d, DeepSpeed raised %d", ci, seq, t, rc, r.raised);
                raised_total += r.raised;
                grew_total += s.cur_scale > before;
                if (s.cur_scale != r.cur_scale || s.cur_iter != r.cur_iter ||
                    s.last_overflow_iter != r.last_overflow_iter ||
                    (!pc->fused && s.cur_hysteresis != r.cur_hysteresis))
                    fail_msg("case %zu seq %d step %d (overflow %d): scale %g iter %ld last %ld hyst %d; "
                             "want %g %lld %lld %lld",
                             ci, seq, t, ovf, s.cur_scale, s.cur_iter, s.last_overflow_iter, s.cur_hysteresis,
                             r.cur_scale, r.cur_iter, r.last_overflow_iter, r.cur_hysteresis);
            }
        }
    }
    /* the sequences must actually reach the interesting branches */
    assert_true(raised_total > 0);
    assert_true(grew_total > 0);
}

/* spec: Z-SCALE-003 scale_window 0 (rejected by the config) is an error
 * where DeepSpeed divides by zero, not undefined behaviour */
static void test_zero_window(void **st) {
    (void)st;
    ZnLossScaler s = scaler(8, 0, 2, 1.0, 0);
    ZnErr e = {0};
    /* Python only evaluates the % once stable_interval > 0 (cur_iter 1) */
    assert_int_equal(zn_scaler_update(&s, 0, &e), 0);
    assert_int_equal(zn_scaler_update(&s, 0, &e), ZN_E_INTERNAL);
    assert_str_contains(e.msg, "ZeroDivisionError");
}

ZT_MAIN(
    cmocka_unit_test(test_create),
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_no_overflow),
    cmocka_unit_test(test_all_overflow),
    cmocka_unit_test(test_some_overflow),
    cmocka_unit_test(test_hysteresis),
    cmocka_unit_test(test_consecutive_hysteresis),
    cmocka_unit_test(test_min_scale),
    cmocka_unit_test(test_static),
    cmocka_unit_test(test_overflow_line),
    cmocka_unit_test(test_fused_stage0),
    cmocka_unit_test(test_below_min_quirk),
    cmocka_unit_test(test_prev_and_new_scale),
    cmocka_unit_test(test_property_vs_transcription),
    cmocka_unit_test(test_zero_window))
