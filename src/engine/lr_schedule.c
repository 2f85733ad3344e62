/* lr_schedule.c: DeepSpeed's learning-rate schedules (spec Z-SCHED-*).
 *
 * Each formula below is the Python of deepspeed/runtime/lr_schedules.py
 * restated in C, in the same order of operations: Python evaluates
 * `a + b * c - d` as `(a + (b * c)) - d` in IEEE double, and so does C with
 * -ffp-contract=off (no fused multiply-add). Integer divisions that Python
 * does with `/` are true divisions of exact small integers, which C's
 * (double)a / (double)b rounds identically. Python's max(a, b) returns a
 * unless b > a, and min(a, b) returns a unless b < a; the ternaries below
 * keep that argument order so that NaN and -0.0 come out as in Python. */
#include "engine/lr_schedule.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[] = {
    "none", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest",
};

/* OneCycle forces the second Adam beta to this value (OneCycle._initialize_momentum
   builds every momentum pair as (mom, 0.99)); spec Z-SCHED-013. */
#define ONE_CYCLE_BETA2 0.99

/* ------------------------------------------------------------------------ */
/* pieces shared by the warmup schedules                                     */

/* WarmupLR._get_gamma / WarmupCosineLR.get_lr_ratio during warmup, for
   0 <= t < wn: log: inverse_log_warm_up * log(t + 1); linear: t / wn. */
static double warm_gamma(const ZnLrSched *s, long t) {
    if (s->c.warmup_type_linear) return (double)t / (double)s->wn;
    return s->inv_log_wn * log((double)(t + 1));
}

/* OneCycle._get_scale_factor for iteration t >= 0 (inside the cycle). */
static double one_cycle_scale(const ZnLrSched *s, long t) {
    long b = t + 1;                              /* batch_iteration */
    double q = (double)b / s->total_size;
    double cycle = floor(1.0 + q);
    double x = 1.0 + q - cycle;                  /* (1 + q) - cycle, Python's order */
    double scale;
    long stairs;
    if (x <= s->step_ratio) {
        scale = x / s->step_ratio;
        stairs = s->first_stairs;
    } else {
        scale = (x - 1.0) / (s->step_ratio - 1.0);
        stairs = s->second_stairs;
    }
    /* Staircase: DeepSpeed quantises from the integer position in the cycle,
       not from `scale` (which can land 1e-16 under an exact stair). Note the
       half is chosen by `x <= step_ratio` for the stair count but by
       `cycle_iteration <= first_step_size` for the position; the two can
       disagree by rounding and DeepSpeed keeps it so, so we do too. */
    if (stairs > 0) {
        double ci = fmod((double)b, s->total_size); /* Python float % on b >= 0 */
        double pos;
        if (ci <= s->first_size) pos = ci * (double)stairs / s->first_size;
        else pos = (s->total_size - ci) * (double)stairs / s->second_size;
        scale = floor(pos) / (double)stairs;
    }
    return scale;
}

/* ------------------------------------------------------------------------ */
/* the formulas                                                              */

double zn_sched_lr_at(const ZnLrSched *s, long t) {
    const ZnSchedConfig *c = &s->c;
    switch (c->type) {
    case ZN_SCHED_WARMUP_LR: {
        /* WarmupLR.get_lr: before the first step the min lr */
        if (t < 0) return s->min_lr;
        double gamma = t < s->wn ? warm_gamma(s, t) : 1.0;
        return s->min_lr + s->delta_lr * gamma;
    }
    case ZN_SCHED_WARMUP_DECAY_LR: {
        if (t < 0) return s->min_lr;
        double gamma;
        if (t < s->wn) {
            gamma = warm_gamma(s, t);
        } else {
            /* WarmupDecayLR._get_gamma: float(T - t) / float(max(1.0, T - wn)), floored at 0 */
            long den = c->total_num_steps - s->wn;
            double g = (double)(c->total_num_steps - t) / (double)(den > 1 ? den : 1);
            gamma = g > 0.0 ? g : 0.0;
        }
        return s->min_lr + s->delta_lr * gamma;
    }
    case ZN_SCHED_WARMUP_COSINE_LR: {
        /* WarmupCosineLR.get_lr: 0.0 before the first step (quirk replicated,
           spec Z-SCHED-009): the first optimizer step runs with lr 0 */
        if (t < 0) return 0.0;
        double ratio;
        if (t < s->wn) {
            double r = warm_gamma(s, t);
            ratio = c->warmup_min_ratio + r * (1.0 - c->warmup_min_ratio);
        } else {
            long real_last = t - s->wn + 1;
            long den = c->total_num_steps - s->wn;
            long real_total = den > 1 ? den : 1;
            double p = (double)real_last / (double)real_total;
            p = p < 1.0 ? p : 1.0;               /* min(1.0, p): clamp past the end */
            double r = (1.0 + cos(M_PI * p)) / 2.0;
            r = c->cos_min_ratio + (1.0 - c->cos_min_ratio) * r;
            ratio = r > 0.0 ? r : 0.0;           /* max(0.0, r) */
        }
        return s->base_lr * ratio;               /* org_lr * lr_ratio */
    }
    case ZN_SCHED_ONE_CYCLE: {
        /* the constructor writes cycle_min_lr straight into the optimizer */
        if (t < 0) return c->cycle_min_lr;
        if ((double)t < s->total_size) {
            double scale = one_cycle_scale(s, t);
            return c->cycle_min_lr + (c->cycle_max_lr - c->cycle_min_lr) * scale;
        }
        if (s->skip_lr_decay) return c->cycle_min_lr;
        double d = (double)t - s->total_size + 1.0;   /* decay_batch_iteration */
        double interval = d / (double)c->decay_step_size;
        return c->cycle_min_lr / (1.0 + c->decay_lr_rate * interval);
    }
    case ZN_SCHED_LR_RANGE_TEST: {
        /* at t = -1 the interval is 0, so this is also the constructor's min lr */
        if (t < 0) return c->lr_range_test_min_lr;
        double interval = (double)(t + 1) / (double)c->lr_range_test_step_size;
        if (c->lr_range_test_staircase) interval = floor(interval);
        return c->lr_range_test_min_lr * (1.0 + c->lr_range_test_step_rate * interval);
    }
    case ZN_SCHED_NONE:
    default:
        return s->base_lr;
    }
}

void zn_sched_betas_at(const ZnLrSched *s, long t, double *beta1, double *beta2) {
    const ZnSchedConfig *c = &s->c;
    if (!s->sets_betas) {
        *beta1 = s->opt_beta1;
        *beta2 = s->opt_beta2;
        return;
    }
    *beta2 = ONE_CYCLE_BETA2;
    if (t < 0) {
        /* The constructor sets betas to (cycle_min_mom, 0.99), although the
           cycle formula at t = -1 would give cycle_max_mom: the first step
           runs with the low momentum (quirk replicated, spec Z-SCHED-013). */
        *beta1 = c->cycle_min_mom;
    } else if ((double)t < s->total_size) {
        double scale = one_cycle_scale(s, t);
        *beta1 = c->cycle_max_mom - (c->cycle_max_mom - c->cycle_min_mom) * scale;
    } else if (s->skip_mom_decay) {
        *beta1 = c->cycle_max_mom;
    } else {
        /* OneCycle._get_decay_mom: momentum grows after the cycle (it multiplies) */
        double d = (double)t - s->total_size + 1.0;
        double interval = d / (double)c->decay_step_size;
        *beta1 = c->cycle_max_mom * (1.0 + c->decay_mom_rate * interval);
    }
}

/* ------------------------------------------------------------------------ */
/* construction and stepping                                                 */

static void refresh(ZnLrSched *s) {
    s->lr = zn_sched_lr_at(s, s->t);
    zn_sched_betas_at(s, s->t, &s->beta1, &s->beta2);
}

int zn_sched_init(ZnLrSched *s, const ZnSchedConfig *c, double opt_lr, double beta1, double beta2, ZnErr *err) {
    memset(s, 0, sizeof *s);
    if ((int)c->type < ZN_SCHED_NONE || (int)c->type > ZN_SCHED_LR_RANGE_TEST)
        return zn_err(err, ZN_E_USAGE, "scheduler.type: unknown schedule %d", (int)c->type);
    const char *name = NAMES[c->type];
    ZnSchedType ty = c->type;
    int warm = ty == ZN_SCHED_WARMUP_LR || ty == ZN_SCHED_WARMUP_DECAY_LR || ty == ZN_SCHED_WARMUP_COSINE_LR;

    /* checks: DeepSpeed's ValueErrors, plus the required arguments whose
       absence is a TypeError there (spec Z-SCHED-003) */
    if (warm && c->warmup_num_steps <= 0)
        return zn_err(err, ZN_E_USAGE, "scheduler.params.warmup_num_steps: expected a positive integer, got %ld",
                      c->warmup_num_steps);
    if ((ty == ZN_SCHED_WARMUP_DECAY_LR || ty == ZN_SCHED_WARMUP_COSINE_LR) && c->total_num_steps == -1)
        return zn_err(err, ZN_E_USAGE, "scheduler.params.total_num_steps: required by %s", name);
    if (ty == ZN_SCHED_ONE_CYCLE) {
        if (isnan(c->cycle_min_lr))
            return zn_err(err, ZN_E_USAGE, "scheduler.params.cycle_min_lr: required by OneCycle");
        if (isnan(c->cycle_max_lr))
            return zn_err(err, ZN_E_USAGE, "scheduler.params.cycle_max_lr: required by OneCycle");
        /* a zero first half would make step_ratio 0 and divide by it */
        if (c->cycle_first_step_size <= 0)
            return zn_err(err, ZN_E_USAGE, "scheduler.params.cycle_first_step_size: expected a positive integer, got %ld",
                          c->cycle_first_step_size);
        /* -1 is None (= first); any other negative is DeepSpeed's ValueError */
        if (c->cycle_second_step_size < -1)
            return zn_err(err, ZN_E_USAGE,
                          "scheduler.params.cycle_second_step_size: expected a non-negative integer, got %ld",
                          c->cycle_second_step_size);
    }
    if (ty == ZN_SCHED_LR_RANGE_TEST && c->lr_range_test_step_size <= 0)
        return zn_err(err, ZN_E_USAGE, "scheduler.params.lr_range_test_step_size: expected a positive integer, got %ld",
                      c->lr_range_test_step_size);

    s->c = *c;
    s->base_lr = opt_lr;
    s->opt_beta1 = beta1;
    s->opt_beta2 = beta2;

    if (warm) {
        /* WarmupLR.__init__: warmup_num_steps = max(2, n), so log(wn) > 0 */
        s->wn = c->warmup_num_steps > 2 ? c->warmup_num_steps : 2;
        s->inv_log_wn = 1.0 / log((double)s->wn);
        s->min_lr = c->warmup_min_lr;
        /* warmup_max_lr None -> the optimizer's lr (also when WarmupDecayLR is
           given an explicit null, which DeepSpeed passes on as None) */
        s->max_lr = isnan(c->warmup_max_lr) ? opt_lr : c->warmup_max_lr;
        s->delta_lr = s->max_lr - s->min_lr;
        /* DeepSpeed compares with the clamped wn but prints the given value */
        if (ty != ZN_SCHED_WARMUP_LR && c->total_num_steps < s->wn)
            fprintf(stderr, "zinc: warning: scheduler.params: total_num_steps %ld is less than warmup_num_steps %ld\n",
                    c->total_num_steps, c->warmup_num_steps);
    }
    if (ty == ZN_SCHED_ONE_CYCLE) {
        /* OneCycle._initialize_cycle works with float step sizes */
        s->first_size = (double)c->cycle_first_step_size;
        s->second_size = c->cycle_second_step_size == -1 ? s->first_size : (double)c->cycle_second_step_size;
        s->total_size = s->first_size + s->second_size;
        s->step_ratio = s->first_size / s->total_size;
        s->first_stairs = c->cycle_first_stair_count;
        s->second_stairs = c->cycle_second_stair_count == -1 ? c->cycle_first_stair_count : c->cycle_second_stair_count;
        /* math.isclose(x, 0) with the default tolerances holds only for x == 0 */
        s->skip_lr_decay = c->decay_step_size == 0 || c->decay_lr_rate == 0.0;
        s->skip_mom_decay = c->decay_step_size == 0 || c->decay_mom_rate == 0.0;
        /* zinc's optimizers (Adam/AdamW) always have betas, so cycle_momentum
           is never switched off for want of them */
        s->sets_betas = c->cycle_momentum != 0;
    }
    s->t = -1;
    refresh(s);
    return ZN_OK;
}

void zn_sched_step(ZnLrSched *s) {
    s->t += 1;
    refresh(s);
}

void zn_sched_set_iteration(ZnLrSched *s, long t) {
    /* below -1 there is nothing to resume; clamp to the fresh state */
    s->t = t < -1 ? -1 : t;
    refresh(s);
}
