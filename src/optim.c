/* optim.c: FusedAdam's element update and the partition-independent norm. */
#include "optim.h"
#include <math.h>

/* The element update, one instance per mode so the loop has no branch and
 * vectorizes (the order of every fp32 operation is unchanged, Z-OPT-003). */
#define ADAM_LOOP(L2_DECAY, W_DECAY)                                           \
    for (long i = 0; i < n; i++) {                                            \
        float gi = g[i] * grad_mul;                                           \
        float pi = p[i];                                                      \
        if (L2_DECAY) gi = gi + wd * pi;  /* L2 mode: decay into the gradient */ \
        float mi = b1 * m[i] + omb1 * gi;                                     \
        float vi = b2 * v[i] + omb2 * gi * gi;                                \
        float denom = sqrtf(vi / bc2) + eps; /* eps after the bias correction */ \
        float u = (mi / bc1) / denom;                                         \
        if (W_DECAY) u = u + wd * pi;     /* decoupled decay on the old value */ \
        p[i] = pi - lr * u;                                                   \
        m[i] = mi;                                                            \
        v[i] = vi;                                                            \
    }

void zn_adam_step(long n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                  const ZnAdamParams *hp, long t, float grad_mul) {
    /* DeepSpeed computes the bias corrections in Python (double) and hands
       them to the kernel as float; every other hyper-parameter is a float
       kernel argument too. */
    float bc1 = 1.0f, bc2 = 1.0f;
    if (hp->bias_correction) {
        bc1 = (float)(1.0 - pow(hp->beta1, (double)t));
        bc2 = (float)(1.0 - pow(hp->beta2, (double)t));
    }
    const float b1 = (float)hp->beta1, b2 = (float)hp->beta2;
    const float lr = (float)hp->lr, eps = (float)hp->eps, wd = (float)hp->weight_decay;
    const float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
    /* g * 1.0f is g exactly, so an unscaled step multiplies by 1 */
    if (hp->adamw) ADAM_LOOP(0, 1)
    else ADAM_LOOP(1, 0)
}

ZnAbsMax zn_absmax(const float *g, long n) {
    ZnAbsMax r = {0.0f, 0};
    for (long i = 0; i < n; i++) {
        float a = fabsf(g[i]);
        if (!isfinite(a)) r.nonfinite = 1;
        else if (a > r.maxabs) r.maxabs = a;
    }
    return r;
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

void zn_sumsq_fixed(const float *g, long n, int shift, uint64_t *hi, uint64_t *lo) {
    /* g^2 is exact in double (24-bit mantissa squared); scaling by a power of
       two is exact; the truncation to an integer is the only rounding, and it
       happens per element, so the sum is independent of the visiting order. */
    const double scale = ldexp(1.0, shift);
    unsigned __int128 s = 0;
    for (long i = 0; i < n; i++) {
        double x = (double)g[i];
        s += (uint64_t)(x * x * scale);
    }
    unsigned __int128 acc = ((unsigned __int128)*hi << 64) | *lo;
    acc += s;
    *hi = (uint64_t)(acc >> 64);
    *lo = (uint64_t)acc;
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
