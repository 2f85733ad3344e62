/* optim_elem.h: one Adam/AdamW element update, compiled by gcc for the host
 * loop (src/optim.c) and by nvcc for the CUDA kernel (kernels/adam.cu), so
 * both perform the same fp32 operations in the same order (spec Z-OPT-003,
 * Z-CUDA-003). With no FMA contraction on either side (gcc -ffp-contract=off,
 * nvcc -fmad=false) and IEEE division and square root (nvcc -prec-div=true
 * -prec-sqrt=true), the two give the same bits.
 *
 * The function works on values, not pointers, and the mode is a
 * compile-time constant at every call site, so the host loop it is inlined
 * into has no branch and no aliasing question: gcc still vectorises it. */
#ifndef ZN_OPTIM_ELEM_H
#define ZN_OPTIM_ELEM_H
#include <math.h>
#include "core/zn_hd.h"
#include "engine/optim.h"

/* The per-step constants, as floats, the way DeepSpeed's FusedAdam hands
 * them to its kernel (zn_adam_consts computes them). */
struct ZnAdamConsts {
    float b1, b2, omb1, omb2;   /* beta1, beta2, 1 - beta1, 1 - beta2 */
    float bc1, bc2;             /* bias corrections (1 when disabled) */
    float lr, eps, wd;
    float grad_mul;             /* unscale * clip; 1.0f leaves g untouched */
};

/* One element: *p, *m, *v updated from gradient g. adamw = 1: decoupled
 * weight decay on the old value; 0: L2 decay added to the gradient. */
static inline ZN_HD void zn_adam_elem(const ZnAdamConsts c, const int adamw, float g, float *p, float *m,
                                      float *v) {
    float gi = g * c.grad_mul;
    float pi = *p;
    if (!adamw) gi = gi + c.wd * pi;             /* L2 mode: decay into the gradient */
    float mi = c.b1 * *m + c.omb1 * gi;
    float vi = c.b2 * *v + c.omb2 * gi * gi;
    float denom = sqrtf(vi / c.bc2) + c.eps;   /* eps after the bias correction */
    float u = (mi / c.bc1) / denom;
    if (adamw) u = u + c.wd * pi;               /* decoupled decay on the old value */
    *p = pi - c.lr * u;
    *m = mi;
    *v = vi;
}

#endif
