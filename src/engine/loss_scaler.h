/* loss_scaler.h: the fp16 loss scale (spec/draft-scaler.md, Z-SCALE-*).
 *
 * A restatement of DeepSpeed 0.19.6 deepspeed/runtime/fp16/loss_scaler.py:
 * DynamicLossScaler (fp16 with "loss_scale": 0) and the static LossScaler
 * (fp16 with "loss_scale" > 0, and bf16/fp32 with scale 1). The state fields
 * carry DeepSpeed's names so that a checkpointed DeepSpeed scaler maps onto
 * this struct field by field.
 *
 * Use, once per optimizer step at the accumulation boundary, before the
 * parameter update (stage_1_and_2.py / stage3.py step()):
 *     double prev = s.cur_scale;
 *     if (overflow && rank == 0) { zn_scaler_overflow_msg(&s, 0, line, sizeof line); log(line); }
 *     if ((rc = zn_scaler_update(&s, overflow, err))) return rc;
 *     if (overflow) skip the step;
 *     ... prev is the scale the gradients carry, s.cur_scale the one DeepSpeed unscales by.
 */
#ifndef ZN_LOSS_SCALER_H
#define ZN_LOSS_SCALER_H
#include <stddef.h>
#include "core/err.h"
#include "core/config.h"

typedef struct {
    int dynamic;              /* 0: static scale (fp16 loss_scale > 0, or bf16/fp32 with scale 1) */
    double cur_scale;         /* S: the loss is multiplied by it before backward */
    long cur_iter;            /* DeepSpeed cur_iter: update_scale calls so far (dynamic only) */
    long last_overflow_iter;  /* cur_iter of the last overflow; -1 before the first */
    int cur_hysteresis;       /* overflows still tolerated before the scale drops */
    /* parameters (fixed after init) */
    double scale_factor;      /* 2.0 (DeepSpeed hard-codes it) */
    long scale_window;        /* fp16.loss_scale_window */
    double min_scale;         /* fp16.min_loss_scale */
    int delayed_shift;        /* fp16.hysteresis */
    int consecutive_hysteresis; /* fp16.consecutive_hysteresis */
    int raise_error_at_min_scale; /* 1: an overflow at min_scale is an error */
} ZnLossScaler;

/* fp16 model: dynamic (init scale 2^initial_scale_power) if c->loss_scale == 0,
 * else static at c->loss_scale. Does not validate c (zn_config does, Z-CFG-031/032). */
void zn_scaler_init_fp16(ZnLossScaler *s, const ZnFp16Config *c);
/* Stage 0 fp16 (DeepSpeed's FP16_Optimizer, fused_optimizer.py _update_scale):
 * the same window rule, but every overflow halves the scale (fp16.hysteresis is
 * ignored) and the minimum is a floor, never an error. Expressed as this
 * scaler with delayed_shift = 1 and raise_error_at_min_scale = 0 (Z-SCALE-012). */
void zn_scaler_init_fp16_fused(ZnLossScaler *s, const ZnFp16Config *c);
/* Static scaler: fp16 with an explicit loss_scale, or bf16/fp32 with 1.0. */
void zn_scaler_init_static(ZnLossScaler *s, double scale);

/* DeepSpeed DynamicLossScaler.update_scale(overflow). Static scalers never
 * change. Returns 0, or ZN_E_NUMERIC when an overflow comes with cur_scale
 * already equal to min_scale and raise_error_at_min_scale is set; the state
 * is then left as it was (DeepSpeed raises before touching anything). Returns
 * ZN_E_INTERNAL for scale_window 0 where DeepSpeed would divide by zero. */
int zn_scaler_update(ZnLossScaler *s, int overflow, ZnErr *err);

/* DeepSpeed's log line for an overflow that lowers the scale:
 * "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768".
 * Scales print as Python's int() of them (truncated toward zero). */
void zn_scaler_overflow_line(char *buf, size_t n, int rank, double attempted, double new_scale);
/* DeepSpeed's log line for an overflow absorbed by hysteresis:
 * "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1". */
void zn_scaler_hysteresis_line(char *buf, size_t n, int rank, double attempted, int cur_hysteresis);
/* The line DeepSpeed logs if update_scale(True) runs on s as it is now; call
 * it before zn_scaler_update. Writes "" where DeepSpeed logs nothing: a
 * static scaler, or an overflow at the minimum (DeepSpeed raises instead).
 * This is the ZeRO wording (stages 1-3); stage 0's FP16_Optimizer prints no
 * such line (only "Grad overflow on iteration N" when verbose), so a caller
 * holding a zn_scaler_init_fp16_fused scaler should not print it. */
void zn_scaler_overflow_msg(const ZnLossScaler *s, int rank, char *buf, size_t n);

#endif
