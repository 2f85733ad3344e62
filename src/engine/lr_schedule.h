/* lr_schedule.h: DeepSpeed's learning-rate schedules (spec Z-SCHED-*).
 *
 * A transcription of deepspeed/runtime/lr_schedules.py (DeepSpeed 0.19.6):
 * WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest, for the
 * one parameter group zinc has. Every formula is evaluated in double with the
 * operations in the order Python evaluates them (math.log, math.cos and
 * math.floor are the C library's log, cos and floor), so a value computed
 * here has the bits Python would give on the same libm.
 *
 * Timing, as in DeepSpeed: t ("last_batch_iteration") is -1 after
 * construction, and the constructor already sets lr (and betas) for t = -1.
 * The engine reads s->lr / s->beta1 / s->beta2 before an optimizer step and
 * calls zn_sched_step after it, so optimizer step k (1-based, counting only
 * applied steps) runs with lr(t = k - 2). A step skipped on overflow does not
 * call zn_sched_step (DeepSpeed engine._take_model_step), so the lr holds. */
#ifndef ZN_LR_SCHEDULE_H
#define ZN_LR_SCHEDULE_H
#include "core/config.h"
#include "core/err.h"

typedef struct {
    ZnSchedConfig c;         /* copy of the parsed scheduler section */
    double base_lr;          /* optimizer lr at construction */
    long t;                  /* DeepSpeed last_batch_iteration: -1 after construction */
    double lr;               /* lr for the next optimizer step */
    double beta1, beta2;     /* momentum for the next step (OneCycle cycles beta1 and forces beta2 = 0.99) */
    int sets_betas;          /* 1 if the schedule overrides betas (OneCycle with cycle_momentum) */

    /* resolved constants, fixed at construction (the attributes DeepSpeed's
       constructors store); read-only for callers */
    double opt_beta1, opt_beta2;   /* optimizer betas, kept when sets_betas is 0 */
    long wn;                       /* warmup_num_steps after max(2, .) */
    double inv_log_wn;             /* 1.0 / log(wn), as inverse_log_warm_up */
    double min_lr, max_lr, delta_lr; /* warmup min/max (max None -> base_lr), max - min */
    double total_size, step_ratio;   /* OneCycle: first + second, first / total */
    double first_size, second_size;  /* OneCycle half-cycle lengths (float, as DeepSpeed) */
    long first_stairs, second_stairs;/* OneCycle stair counts (second None -> first) */
    int skip_lr_decay, skip_mom_decay; /* OneCycle: no post-cycle decay */
} ZnLrSched;

/* Builds the schedule for c (type ZN_SCHED_NONE: constant lr = opt_lr, betas
 * unchanged) and sets lr/betas for t = -1. Checks what DeepSpeed's
 * constructors check and what zinc requires; on failure returns ZN_E_USAGE
 * with the JSON path, e.g.
 *   "scheduler.params.total_num_steps: required by WarmupDecayLR".
 * WarmupDecayLR/WarmupCosineLR with total_num_steps < max(2, warmup_num_steps)
 * print a "zinc: warning: " line on stderr, as DeepSpeed logs one. */
int zn_sched_init(ZnLrSched *s, const ZnSchedConfig *c, double opt_lr, double beta1, double beta2, ZnErr *err);
/* After each APPLIED optimizer step (never on overflow-skipped steps):
 * t += 1, then lr/betas recomputed for the new t. */
void zn_sched_step(ZnLrSched *s);
/* The lr the schedule holds at iteration t, without changing s. t = -1 (or
 * below) gives the value the constructor sets. */
double zn_sched_lr_at(const ZnLrSched *s, long t);
/* The betas the schedule holds at iteration t (the optimizer's own when the
 * schedule does not set them). */
void zn_sched_betas_at(const ZnLrSched *s, long t, double *beta1, double *beta2);
/* Checkpoint resume: DeepSpeed's load_state_dict({'last_batch_iteration': t})
 * with the lr/betas the saved optimizer state holds for that t, i.e. the
 * same state as zn_sched_init followed by t + 1 calls of zn_sched_step. */
void zn_sched_set_iteration(ZnLrSched *s, long t);

#endif
