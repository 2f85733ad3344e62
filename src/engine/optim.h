/* optim.h: the optimizer step and the gradient norm.
 *
 * Adam/AdamW follow DeepSpeed's FusedAdam (csrc/adam/multi_tensor_adam.cu)
 * element by element in fp32 (spec Z-OPT-*), with the gradient multiplier of
 * unscaling and clipping fused into the same pass.
 *
 * The global gradient norm is computed so that it cannot depend on how the
 * gradient is partitioned (spec Z-NORM-*): every rank contributes the exact
 * integer sum of floor(g^2 * 2^shift), where shift is fixed by the global
 * max |g|. Integer addition is associative, so the stage, the world size and
 * the order in which partitions are visited cannot change a single bit. */
#ifndef ZN_OPTIM_H
#define ZN_OPTIM_H
#include "core/cpu.h"
#include <stdint.h>

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int adamw;              /* decoupled weight decay (AdamW) */
    int bias_correction;
} ZnAdamParams;

/* The float constants of step t (bias corrections computed in double, as
 * DeepSpeed does in Python); the host loop and the CUDA kernel both use them. */
typedef struct ZnAdamConsts ZnAdamConsts;
ZnAdamConsts zn_adam_consts(const ZnAdamParams *hp, long t, float grad_mul);

/* One Adam step over n elements; t is the 1-based step count; each gradient
 * is first multiplied by grad_mul (1.0f: untouched). */
void zn_adam_step(long n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                  const ZnAdamParams *hp, long t, float grad_mul);
/* The same on one instruction set's path (core/cpu.h; one this CPU cannot
 * run falls back to zn_isa_best()). Every path gives the same bits
 * (Z-HOST-001); zn_adam_step takes the best. */
void zn_adam_step_isa(ZnIsa isa, long n, float *restrict p, const float *restrict g, float *restrict m,
                      float *restrict v, const ZnAdamParams *hp, long t, float grad_mul);

/* Norm pieces. */
typedef struct { float maxabs; int nonfinite; } ZnAbsMax;
ZnAbsMax zn_absmax(const float *g, long n);
/* shift such that maxabs^2 * 2^shift < 2^62 */
int zn_norm_shift(float maxabs);
/* sum of floor(g[i]^2 * 2^shift) as a 128-bit integer split in (hi, lo) */
void zn_sumsq_fixed(const float *g, long n, int shift, uint64_t *hi, uint64_t *lo);
/* The same two passes on a chosen instruction set (norm_scan.c): the same
 * bits on every one (Z-HOST-004). */
ZnAbsMax zn_absmax_isa(ZnIsa isa, const float *g, long n);
void zn_sumsq_fixed_isa(ZnIsa isa, const float *g, long n, int shift, uint64_t *hi, uint64_t *lo);
/* adds (hi2, lo2) into (hi, lo) */
void zn_u128_add(uint64_t *hi, uint64_t *lo, uint64_t hi2, uint64_t lo2);
/* sqrt(sum * 2^-shift) */
double zn_norm_from_fixed(uint64_t hi, uint64_t lo, int shift);
/* the whole thing over one buffer (tests, stage 0) */
double zn_norm_local(const float *g, long n);

#endif
