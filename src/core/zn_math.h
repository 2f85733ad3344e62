/* zn_math.h: exp and log in plain float and integer arithmetic, one text that
 * gcc (host) and nvcc (device) both compile (spec Z-CUDA-004), so the
 * simulator's softmax and the GPU's exact-mode softmax give the same bits.
 * libm's expf/logf and CUDA's __expf/expf differ from each other in the last
 * bit, so neither may be used by a kernel whose host twin must match it.
 *
 * Same bits on both compilers needs: no FMA contraction (gcc
 * -ffp-contract=off, nvcc -fmad=false), round-to-nearest (the default on
 * both), IEEE float add/multiply (both), and no library call. Only +, -, *,
 * comparisons, float<->int conversion of exact integers and bit moves occur.
 *
 * Method (Cephes expf/logf, S. Moshier):
 *   exp: n = round(x log2 e); r = x - n ln2 in two pieces (Cody-Waite: the
 *        high piece has 9 significant bits, so n * hi is exact); e^r by a
 *        degree-6 polynomial on |r| <= ln2/2; times 2^n built from bits.
 *   log: x = m 2^e with m in [sqrt(1/2), sqrt(2)); f = m - 1; log(1+f) by
 *        f - f^2/2 + f^3 P(f) (degree-8 P); plus e ln2 in two pieces.
 *
 * Measured against libm's double exp/log (the true value to far below a
 * float ulp), in float ulps at the true value, by tests/test_zn_math.c
 * (spec Z-CUDA-004), gcc 12 -O2 -ffp-contract=off, every 97th float:
 *   zn_expf [-87, 0) (the softmax range): max 0.963 ulp;
 *           (0, 88.72]: 0.956 ulp; [-103.97, -87] (subnormal results): 0.747;
 *   zn_logf (0, inf) (subnormals included): max 0.793 ulp; [1, 1e6]: 0.816.
 * So both are faithful (always one of the two floats around the true value).
 * The test asserts <= 2 ulp for both (margin for other compilers).
 * Special cases are exact: exp(0) = 1,
 * exp(x > 88.72...) = inf, exp(-inf) = exp(x < -103.97) = 0, exp(NaN) = NaN;
 * log(1) = 0, log(+-0) = -inf, log(inf) = inf, log(x < 0) = NaN, log(NaN) =
 * NaN; subnormal inputs and outputs are handled. */
#ifndef ZN_MATH_H
#define ZN_MATH_H
#include <stdint.h>

#include "core/zn_hd.h"

static inline ZN_HD uint32_t zn_m_bits(float f) { return zn_hd_f32_bits(f); }
static inline ZN_HD float zn_m_float(uint32_t u) { return zn_hd_bits_f32(u); }

/* 2^k for k in [-126, 127] (a normal float), from its bits */
static inline ZN_HD float zn_m_pow2(int k) { return zn_m_float((uint32_t)(k + 127) << 23); }

static inline ZN_HD float zn_expf(float x) {
    /* beyond these e^x is inf or rounds to 0 (below half the smallest
       subnormal, 2^-150); the comparisons are false for NaN */
    if (x > 88.72283935546875f) return zn_m_float(0x7f800000u);
    if (x < -103.97208404541015625f) return 0.0f;
    if (x != x) return x + x;  /* NaN in, (quiet) NaN out */
    /* round to nearest integer without rintf: adding 1.5 * 2^23 leaves no
       fraction bits (|x log2 e| < 2^22), subtracting it back is exact */
    const float shifter = 12582912.0f;
    float nf = (x * 1.44269504088896341f + shifter) - shifter;
    int n = (int)nf;
    /* Cody-Waite: 0.693359375 = 355/512 has 9 bits, n < 2^8, so nf * C1 is
       exact and x - nf * C1 is exact too (Sterbenz); C2 is ln2 - C1. */
    float r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * z + r + 1.0f;
    /* y * 2^n: the exponent may fall outside [-126, 127], so scale in two
       steps of which only the last rounds (into the subnormals when small) */
    if (n > 127) return y * 2.0f * zn_m_pow2(n - 1);
    if (n < -125) return (y * zn_m_pow2(n + 100)) * zn_m_pow2(-100);
    return y * zn_m_pow2(n);
}

static inline ZN_HD float zn_logf(float x) {
    uint32_t u = zn_m_bits(x);
    if (x != x) return x + x;                         /* NaN */
    if ((u & 0x7fffffffu) == 0) return zn_m_float(0xff800000u);  /* +-0: -inf */
    if (u >> 31) return zn_m_float(0x7fc00000u);      /* negative: NaN */
    if (u == 0x7f800000u) return x;                   /* +inf */
    int e = 0;
    if (u < 0x00800000u) {                            /* subnormal: make it normal */
        x = x * 16777216.0f;                          /* 2^24, exact */
        u = zn_m_bits(x);
        e = -24;
    }
    /* x = m 2^e with m in [0.5, 1) */
    e += (int)(u >> 23) - 126;
    float m = zn_m_float((u & 0x007fffffu) | 0x3f000000u);
    /* move m into [sqrt(1/2), sqrt(2)) so f = m - 1 is small both ways;
       m + m - 1 and m - 1 are exact (Sterbenz) */
    float f;
    if (m < 0.707106781186547524f) {
        e -= 1;
        f = (m + m) - 1.0f;
    } else {
        f = m - 1.0f;
    }
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    float y = p * f * z;
    float fe = (float)e;                              /* |e| <= 150: exact */
    /* ln2 = 0.693359375 - 2.12194440e-4: the small piece joins the small
       terms, the exact large piece comes last */
    y = y + fe * -2.12194440e-4f;
    y = y - 0.5f * z;
    float r = f + y;
    return r + fe * 0.693359375f;
}

/* tanh from zn_expf, the same bits on gcc and nvcc: for x >= 0,
 * tanh(x) = 1 - 2 / (exp(2x) + 1), odd symmetry for x < 0; past |x| = 9
 * the float result is 1 (tanh(9) = 1 - 3e-8). Near 0 the subtraction loses
 * relative precision (absolute error below 1e-7), which GELU's 1 + tanh
 * never sees. */
static inline ZN_HD float zn_tanhf(float x) {
    float a = x < 0.0f ? -x : x;
    float t = a > 9.0f ? 1.0f : 1.0f - 2.0f / (zn_expf(2.0f * a) + 1.0f);
    return x < 0.0f ? -t : t;
}

/* One softmax row z[0..C): its max *m and the sum *s of exp(z[c] - m) in
 * column order (subtracting the max keeps expf from overflowing). The host
 * and CUDA cross-entropy both start here, so they agree bit for bit. */
static inline ZN_HD void zn_softmax_row(const float *z, int C, float *m, float *s) {
    float mx = z[0];
    for (int c = 1; c < C; c++) if (z[c] > mx) mx = z[c];
    float sum = 0.0f;
    for (int c = 0; c < C; c++) sum += zn_expf(z[c] - mx);
    *m = mx;
    *s = sum;
}

#endif
