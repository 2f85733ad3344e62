/* optim.c: FusedAdam's element update and the partition-independent norm. */
#include "engine/optim.h"
#include "engine/optim_elem.h"
#include "core/cpu.h"
#include <math.h>

/* The loop over elements, one instance per mode so the body has no branch;
 * the element update itself is shared with the CUDA kernel (optim_elem.h),
 * so every fp32 operation is the same, in the same order, on both
 * (Z-OPT-003). gcc -O2's vectoriser (the "very cheap" cost model) only takes
 * a loop whose trip count needs no scalar epilogue, so full blocks run with
 * the constant ADAM_BLOCK and the rest with the remainder. */
#define ADAM_BLOCK 1024
static inline __attribute__((always_inline)) void
adam_run(const ZnAdamConsts c, const int adamw, long n, float *restrict p, const float *restrict g,
         float *restrict m, float *restrict v) {
    for (long i = 0; i < n; i++) {
        float pi = p[i], mi = m[i], vi = v[i];
        zn_adam_elem(c, adamw, g[i], &pi, &mi, &vi);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
}

static inline __attribute__((always_inline)) void
adam_loop(const ZnAdamConsts c, const int adamw, long n, float *restrict p, const float *restrict g,
          float *restrict m, float *restrict v) {
    long i = 0;
    for (; i + ADAM_BLOCK <= n; i += ADAM_BLOCK)
        adam_run(c, adamw, ADAM_BLOCK, p + i, g + i, m + i, v + i);
    adam_run(c, adamw, n - i, p + i, g + i, m + i, v + i);
}

ZnAdamConsts zn_adam_consts(const ZnAdamParams *hp, long t, float grad_mul) {
    /* DeepSpeed hands the betas to its kernels as float arguments and both
       uses derive from that float: FusedAdam's host code computes
       1 - std::pow(beta, step) (pow of the float promoted to double, the
       result stored as float) and the kernel forms 1 - beta in float.
       Taking the bias corrections from the double beta instead makes
       m_hat/sqrt(v_hat) overshoot by ~6.4e-6 at betas (0.9, 0.999)
       (Z-OPT-001). Every other hyper-parameter is a float kernel argument. */
    ZnAdamConsts c;
    c.b1 = (float)hp->beta1;
    c.b2 = (float)hp->beta2;
    c.bc1 = 1.0f;
    c.bc2 = 1.0f;
    if (hp->bias_correction) {
        c.bc1 = (float)(1.0 - pow((double)c.b1, (double)t));
        c.bc2 = (float)(1.0 - pow((double)c.b2, (double)t));
    }
    c.lr = (float)hp->lr;
    c.eps = (float)hp->eps;
    c.wd = (float)hp->weight_decay;
    c.omb1 = 1.0f - c.b1;
    c.omb2 = 1.0f - c.b2;
    c.grad_mul = grad_mul;   /* g * 1.0f is g exactly, so an unscaled step multiplies by 1 */
    return c;
}

/* One instance of the loop per instruction set (core/cpu.h). The body is
 * the same inlined code; only the register width differs, and with
 * element-wise IEEE operations and no FMA contraction that changes no bit
 * (Z-HOST-001). The scalar instance is the reference twin the others are
 * tested against. */
#define ADAM_ARGS const ZnAdamConsts c, int adamw, long n, float *restrict p, const float *restrict g, \
                  float *restrict m, float *restrict v
#define ADAM_BODY                                   \
    if (adamw) adam_loop(c, 1, n, p, g, m, v);      \
    else adam_loop(c, 0, n, p, g, m, v);

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static void adam_scalar(ADAM_ARGS) { ADAM_BODY }
static void adam_sse2(ADAM_ARGS) { ADAM_BODY }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx2"))) static void adam_avx2(ADAM_ARGS) { ADAM_BODY }
__attribute__((target("avx512f"))) static void adam_avx512(ADAM_ARGS) { ADAM_BODY }
#endif

void zn_adam_step_isa(ZnIsa isa, long n, float *restrict p, const float *restrict g, float *restrict m,
                      float *restrict v, const ZnAdamParams *hp, long t, float grad_mul) {
    const ZnAdamConsts c = zn_adam_consts(hp, t, grad_mul);
    const int w = hp->adamw != 0;
    if (!zn_isa_supported(isa)) isa = zn_isa_best();
    switch (isa) {
    case ZN_ISA_SCALAR: adam_scalar(c, w, n, p, g, m, v); return;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    case ZN_ISA_AVX2: adam_avx2(c, w, n, p, g, m, v); return;
    case ZN_ISA_AVX512: adam_avx512(c, w, n, p, g, m, v); return;
#endif
    default: adam_sse2(c, w, n, p, g, m, v); return;
    }
}

void zn_adam_step(long n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                  const ZnAdamParams *hp, long t, float grad_mul) {
    zn_adam_step_isa(zn_isa_best(), n, p, g, m, v, hp, t, grad_mul);
}

int zn_norm_shift(float maxabs) {
    if (!(maxabs > 0.0f)) return 0;
    int k;
    frexp((double)maxabs * (double)maxabs, &k);   /* max^2 < 2^k */
    return 62 - k;
}

void zn_u128_add(uint64_t *hi, uint64_t *lo, uint64_t hi2, uint64_t lo2) {
    uint64_t l = *lo + lo2;
    *hi += hi2 + (l < *lo);
    *lo = l;
}

double zn_norm_from_fixed(uint64_t hi, uint64_t lo, int shift) {
    unsigned __int128 s = ((unsigned __int128)hi << 64) | lo;
    return sqrt(ldexp((double)s, -shift));
}

double zn_norm_local(const float *g, long n) {
    ZnAbsMax am = zn_absmax(g, n);
    if (am.nonfinite) return NAN;
    int shift = zn_norm_shift(am.maxabs);
    uint64_t hi = 0, lo = 0;
    zn_sumsq_fixed(g, n, shift, &hi, &lo);
    return zn_norm_from_fixed(hi, lo, shift);
}
