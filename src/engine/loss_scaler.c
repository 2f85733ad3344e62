/* loss_scaler.c: DeepSpeed's fp16 loss scaler (spec/draft-scaler.md).
 * Restated from DeepSpeed 0.19.6 deepspeed/runtime/fp16/loss_scaler.py
 * (DynamicLossScaler.update_scale, CreateLossScaler); the order of the tests
 * and assignments below is the order of that code, because the order decides
 * the result (e.g. hysteresis is consulted before the minimum-scale check). */
#include "engine/loss_scaler.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void zn_scaler_init_fp16(ZnLossScaler *s, const ZnFp16Config *c) {
    if (c->loss_scale != 0) {
        /* CreateLossScaler: dynamic only when loss_scale is 0 (Z-SCALE-001) */
        zn_scaler_init_static(s, c->loss_scale);
        return;
    }
    memset(s, 0, sizeof *s);
    s->dynamic = 1;
    /* DeepSpeedFP16Config.dynamic_loss_scale_args: init_scale = 2**power.
     * ldexp is exact for every power the config admits (0..127). */
    s->cur_scale = ldexp(1.0, c->initial_scale_power);
    s->cur_iter = 0;
    s->last_overflow_iter = -1;
    s->scale_factor = 2.0;  /* DynamicLossScaler.__init__ hard-codes 2.0 */
    s->scale_window = c->loss_scale_window;
    s->min_scale = c->min_loss_scale;
    s->delayed_shift = c->hysteresis;
    s->cur_hysteresis = c->hysteresis;
    s->consecutive_hysteresis = c->consecutive_hysteresis ? 1 : 0;
    /* the ZeRO optimizers never pass raise_error_at_min_scale, so the
     * constructor default True applies */
    s->raise_error_at_min_scale = 1;
}

void zn_scaler_init_fp16_fused(ZnLossScaler *s, const ZnFp16Config *c) {
    zn_scaler_init_fp16(s, c);
    if (!s->dynamic) return;
    /* FP16_Optimizer._update_scale has no hysteresis (LossScaleConfig does not
     * even keep delayed_shift) and takes max(S/2, min) unconditionally: with
     * delayed_shift 1 every overflow drops, and without the raise the drop at
     * the floor is max(min/2, min) = min, exactly that rule */
    s->delayed_shift = 1;
    s->cur_hysteresis = 1;
    s->consecutive_hysteresis = 0;
    s->raise_error_at_min_scale = 0;
}

void zn_scaler_init_static(ZnLossScaler *s, double scale) {
    memset(s, 0, sizeof *s);
    s->dynamic = 0;
    s->cur_scale = scale;
    /* LossScaler has no iteration state; these values only make the struct
     * printable and keep a static scaler from looking like a fresh dynamic one */
    s->last_overflow_iter = -1;
    s->scale_factor = 1.0;
    s->min_scale = scale;
    s->raise_error_at_min_scale = 0;
}

/* Python's int(x) of a float, as text: truncation toward zero printed in
 * full. trunc() of a double is an integer-valued double and "%.0f" prints
 * it exactly (glibc prints the exact decimal), so 2^70 prints all 22 digits
 * as Python does. Non-finite values (where Python's int() would raise) print
 * as inf/nan so a log line never fails. */
static void fmt_int(char *buf, size_t n, double x) {
    if (!isfinite(x)) {
        snprintf(buf, n, "%s", isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf"));
        return;
    }
    double t = trunc(x);
    if (t == 0) t = 0.0;  /* int(-0.5) is 0, not "-0" */
    snprintf(buf, n, "%.0f", t);
}

void zn_scaler_overflow_line(char *buf, size_t n, int rank, double attempted, double new_scale) {
    char a[400], b[400];
    if (!buf || n == 0) return;
    fmt_int(a, sizeof a, attempted);
    fmt_int(b, sizeof b, new_scale);
    /* loss_scaler.py update_scale, scale-reduction branch (f-string with
     * int(self.cur_scale) and int(next_scale)); no trailing period there */
    snprintf(buf, n, "[deepspeed] OVERFLOW! Rank %d Skipping step. Attempted loss scale: %s, reducing to %s",
             rank, a, b);
}

void zn_scaler_hysteresis_line(char *buf, size_t n, int rank, double attempted, int cur_hysteresis) {
    char a[400];
    if (!buf || n == 0) return;
    fmt_int(a, sizeof a, attempted);
    /* loss_scaler.py update_scale, hysteresis branch; the second number is
     * computed in Python ints, so long arithmetic keeps INT_MIN-1 right */
    snprintf(buf, n,
             "[deepspeed] OVERFLOW! Rank %d Skipping step. Attempted loss scale: %s, but hysteresis is %d. "
             "Reducing hysteresis to %ld",
             rank, a, cur_hysteresis, (long)cur_hysteresis - 1);
}

/* True when an overflow in state s lowers the scale (or fails at the floor)
 * instead of spending hysteresis: DeepSpeed's "delayed_shift == 1 or
 * cur_hysteresis == 1". */
static int drops_scale(const ZnLossScaler *s) {
    return s->delayed_shift == 1 || s->cur_hysteresis == 1;
}

/* max(cur/factor, min) as Python's max(): the first argument unless the
 * second is greater; equal values are the same double either way. */
static double next_scale(const ZnLossScaler *s) {
    double down = s->cur_scale / s->scale_factor;
    return s->min_scale > down ? s->min_scale : down;
}

static int at_min_and_raises(const ZnLossScaler *s) {
    return s->cur_scale == s->min_scale && s->raise_error_at_min_scale;
}

void zn_scaler_overflow_msg(const ZnLossScaler *s, int rank, char *buf, size_t n) {
    if (!buf || n == 0) return;
    buf[0] = 0;
    /* LossScalerBase.update_scale is a no-op and logs nothing */
    if (!s->dynamic) return;
    if (drops_scale(s)) {
        /* DeepSpeed raises before it would log */
        if (at_min_and_raises(s)) return;
        zn_scaler_overflow_line(buf, n, rank, s->cur_scale, next_scale(s));
    } else {
        zn_scaler_hysteresis_line(buf, n, rank, s->cur_scale, s->cur_hysteresis);
    }
}

int zn_scaler_update(ZnLossScaler *s, int overflow, ZnErr *err) {
    /* static LossScaler: update_scale is LossScalerBase's `pass` (Z-SCALE-010) */
    if (!s->dynamic) return ZN_OK;
    if (overflow) {
        if (drops_scale(s)) {
            if (at_min_and_raises(s))
                /* DeepSpeed's exception text verbatim, then the numbers that
                 * tell a user why (issue #697: runs stuck at scale 1). The
                 * state is untouched: Python raises before any assignment. */
                return zn_err(err, ZN_E_NUMERIC,
                              "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."
                              " (loss scale %.17g == min_loss_scale %.17g, overflow at scaler iteration %ld)",
                              s->cur_scale, s->min_scale, s->cur_iter);
            s->cur_scale = next_scale(s);
        } else {
            /* hysteresis absorbs this overflow: the scale stays, the step is
             * still skipped by the caller. Python ints never wrap; stopping
             * at INT_MIN only matters for hysteresis <= 0 (which zinc's
             * config rejects) after 2^31 overflows, and both values are
             * equally "never 1" so behaviour is unchanged. */
            if (s->cur_hysteresis > INT_MIN) s->cur_hysteresis -= 1;
        }
        s->last_overflow_iter = s->cur_iter;
    } else {
        /* consecutive_hysteresis: every clean step refills the hysteresis */
        if (s->consecutive_hysteresis) s->cur_hysteresis = s->delayed_shift;
        /* clean steps before this one since the last overflow (or since the
         * start); the "- 1" is DeepSpeed PR #6976 (v0.17.1): growth on the
         * (W+1)-th clean step, not the W-th */
        long stable_interval = (s->cur_iter - s->last_overflow_iter) - 1;
        if (stable_interval > 0) {
            /* Python evaluates the % only when stable_interval > 0, and a
             * zero window raises ZeroDivisionError there */
            if (s->scale_window == 0)
                return zn_err(err, ZN_E_INTERNAL,
                              "loss scaler: loss_scale_window is 0 (DeepSpeed: ZeroDivisionError in update_scale)");
            /* k % w == 0 has the same truth value in C and Python for any
             * nonzero w, negative included (only the sign of a nonzero
             * remainder differs) */
            if (stable_interval % s->scale_window == 0) {
                if (!s->consecutive_hysteresis) s->cur_hysteresis = s->delayed_shift;
                s->cur_scale *= s->scale_factor;
            }
        }
    }
    s->cur_iter += 1;
    return ZN_OK;
}
