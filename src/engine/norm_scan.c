/* norm_scan.c: the two passes over a gradient behind the partition-
 * independent norm (spec Z-NORM-*, Z-HOST-004): the largest finite |g| with
 * a flag for inf/NaN, and the fixed-point sum of squares.
 *
 * Both results are exact and independent of the visiting order (a maximum;
 * an integer sum), so the passes are vectorised and compiled per
 * instruction set with the same bits as the element-at-a-time loop. The
 * maximum works on the bits of |g|: for finite floats the order of their
 * magnitudes is the order of those bits as unsigned integers. */
#include "engine/optim.h"
#include "core/cpu.h"
#include <math.h>
#include <string.h>

/* gcc -O2 vectorises only loops with no scalar epilogue: full blocks of a
   constant length, then the rest */
#define SCAN_BLOCK 1024

/* the largest |g| bits over finite elements, and over all of them */
typedef struct { uint32_t fin, all; } Max2;

/* the gradient's floats read as their bits (may_alias: reading a float
   through this type is allowed) */
typedef uint32_t bits32 __attribute__((may_alias));

static inline __attribute__((always_inline)) Max2 absmax_run(long n, const bits32 *restrict u, Max2 r) {
    for (long i = 0; i < n; i++) {
        uint32_t x = u[i] & 0x7fffffffu;
        /* inf and NaN do not count; a mask, not a ternary, which gcc -O2
           would not vectorise */
        uint32_t xf = x & (0u - (uint32_t)(x < 0x7f800000u));
        r.fin = xf > r.fin ? xf : r.fin;
        r.all = x > r.all ? x : r.all;
    }
    return r;
}

static inline __attribute__((always_inline)) ZnAbsMax absmax_loop(const float *g, long n) {
    const bits32 *u = (const bits32 *)g;
    Max2 m = {0, 0};
    long i = 0;
    for (; i + SCAN_BLOCK <= n; i += SCAN_BLOCK) m = absmax_run(SCAN_BLOCK, u + i, m);
    m = absmax_run(n - i, u + i, m);
    ZnAbsMax r;
    memcpy(&r.maxabs, &m.fin, 4);
    r.nonfinite = m.all >= 0x7f800000u;
    return r;
}

/* g^2 is exact in double (a 24-bit mantissa squared); scaling by a power
   of two is exact; the truncation to an integer is the only rounding and it
   happens per element. Each term is below 2^62 (zn_norm_shift), so the
   block sums its terms' high and low 32-bit halves in 64-bit lanes (at most
   1024 * 2^32 each) and the halves join the 128-bit total once a block. */
static inline __attribute__((always_inline)) void
sumsq_run(long n, const float *restrict g, double scale, unsigned __int128 *s) {
    uint64_t lo = 0, hi = 0;
    for (long i = 0; i < n; i++) {
        double x = (double)g[i];
        uint64_t t = (uint64_t)(int64_t)(x * x * scale);
        lo += t & 0xffffffffu;
        hi += t >> 32;
    }
    *s += ((unsigned __int128)hi << 32) + lo;
}

static inline __attribute__((always_inline)) unsigned __int128 sumsq_loop(const float *g, long n, double scale) {
    unsigned __int128 s = 0;
    long i = 0;
    for (; i + SCAN_BLOCK <= n; i += SCAN_BLOCK) sumsq_run(SCAN_BLOCK, g + i, scale, &s);
    sumsq_run(n - i, g + i, scale, &s);
    return s;
}

#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static ZnAbsMax absmax_scalar(const float *g, long n) { return absmax_loop(g, n); }
static ZnAbsMax absmax_sse2(const float *g, long n) { return absmax_loop(g, n); }
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static unsigned __int128 sumsq_scalar(const float *g, long n, double s) { return sumsq_loop(g, n, s); }
static unsigned __int128 sumsq_sse2(const float *g, long n, double s) { return sumsq_loop(g, n, s); }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZN_SCAN_X86 1
__attribute__((target("avx2"))) static ZnAbsMax absmax_avx2(const float *g, long n) { return absmax_loop(g, n); }
__attribute__((target("avx512f"))) static ZnAbsMax absmax_avx512(const float *g, long n) { return absmax_loop(g, n); }
__attribute__((target("avx2"))) static unsigned __int128 sumsq_avx2(const float *g, long n, double s) {
    return sumsq_loop(g, n, s);
}
/* double -> int64 in vector registers is AVX-512DQ's (vcvttpd2qq) */
__attribute__((target("avx512f,avx512dq"))) static unsigned __int128 sumsq_avx512(const float *g, long n, double s) {
    return sumsq_loop(g, n, s);
}
static int has_avx512dq(void) { return __builtin_cpu_supports("avx512dq"); }
#endif

ZnAbsMax zn_absmax_isa(ZnIsa isa, const float *g, long n) {
    if (!zn_isa_supported(isa)) isa = zn_isa_best();
    switch (isa) {
    case ZN_ISA_SCALAR: return absmax_scalar(g, n);
#ifdef ZN_SCAN_X86
    case ZN_ISA_AVX2: return absmax_avx2(g, n);
    case ZN_ISA_AVX512: return absmax_avx512(g, n);
#endif
    default: return absmax_sse2(g, n);
    }
}

void zn_sumsq_fixed_isa(ZnIsa isa, const float *g, long n, int shift, uint64_t *hi, uint64_t *lo) {
    const double scale = ldexp(1.0, shift);
    if (!zn_isa_supported(isa)) isa = zn_isa_best();
    unsigned __int128 s;
    switch (isa) {
    case ZN_ISA_SCALAR: s = sumsq_scalar(g, n, scale); break;
#ifdef ZN_SCAN_X86
    case ZN_ISA_AVX2: s = sumsq_avx2(g, n, scale); break;
    case ZN_ISA_AVX512: s = has_avx512dq() ? sumsq_avx512(g, n, scale) : sumsq_avx2(g, n, scale); break;
#endif
    default: s = sumsq_sse2(g, n, scale); break;
    }
    unsigned __int128 acc = ((unsigned __int128)*hi << 64) | *lo;
    acc += s;
    *hi = (uint64_t)(acc >> 64);
    *lo = (uint64_t)acc;
}

ZnAbsMax zn_absmax(const float *g, long n) { return zn_absmax_isa(zn_isa_best(), g, n); }

void zn_sumsq_fixed(const float *g, long n, int shift, uint64_t *hi, uint64_t *lo) {
    zn_sumsq_fixed_isa(zn_isa_best(), g, n, shift, hi, lo);
}
