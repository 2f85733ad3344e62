/* quant.h: block quantization, the int8 weights of ZeRO++'s qwZ and the
 * int4 gradients of its qgZ (spec Z-QNT-001..007).
 *
 * A flat tensor is cut into groups of at most G elements (Z-QNT-001); each
 * group gets one fp32 scale from its absolute maximum A and every element a
 * signed code (symmetric quantization, no zero point):
 *
 *   int8:  q = clamp(rne(x * (128 / A)), -128, 127)   scale s = A / 128
 *   int4:  q = clamp(rne(x * (8 / A)),     -8,   7)   scale s = A / 8
 *   back:  x^ = (float)q * s, then rounded to the model's dtype
 *
 * The per-group and per-element math below is `static inline ZN_HD`, so nvcc
 * can compile this same text into a CUDA kernel (one thread per element)
 * and get the host's bits: every step is one IEEE fp32 operation in the
 * default rounding mode (round to nearest even, which C and CUDA start in),
 * and the rounding to an integer is done with a truncating conversion and
 * exact comparisons, so it does not depend on the rounding mode at all.
 *
 * Sources: DeepSpeed runtime/zero/partition_parameters.py CUDAQuantizer
 * (qwZ: groups of at most target_group_size = 8000 weights, symmetric int8),
 * csrc/quantization/quantize.cu and csrc/includes/quantization_utils.h (the
 * symmetric scale 2^bits / (2 * absmax), q clamped to the signed range),
 * runtime/comm/coalesced_collectives.py all_to_all_quant_reduce (qgZ: int4).
 * zinc differs where DeepSpeed fails: any element count works (DeepSpeed
 * asserts a multiple of 8, issue #4386), bf16 values are quantized from
 * their fp32 form with no fp16 cast (issues #4852, #7775), and a group
 * holding inf or NaN dequantizes to NaN so an overflow is still seen. */
#ifndef ZN_QUANT_H
#define ZN_QUANT_H
#include <math.h>
#include <stdint.h>
#include "core/zn_hd.h"
#include "core/half.h"
#include "core/dtype.h"

#define ZN_Q8_GROUP 8000   /* qwZ: DeepSpeed's groups are at most 8000 weights */
#define ZN_Q4_GROUP 512    /* qgZ: smaller groups, since 4 bits are coarse */

/* ------------------------------------------------------------------------ */
/* groups (Z-QNT-001): ng = ceil(n / G) groups whose sizes differ by at most
   one, the first n % ng of them one element longer. */

/* Number of groups of n elements with groups of at most max_group (a
   max_group below 1 counts as 1; n <= 0 has no groups). */
static inline ZN_HD long zn_quant_ngroups(long n, long max_group) {
    if (n <= 0) return 0;
    if (max_group < 1) max_group = 1;
    return n / max_group + (n % max_group != 0);   /* ceil without n + G - 1 overflowing */
}

/* First element of group g of ng (g = ng gives n): the first n % ng groups
   have n / ng + 1 elements, the rest n / ng. */
static inline ZN_HD long zn_quant_group_start(long n, long ng, long g) {
    if (ng <= 0) return 0;
    long base = n / ng, longer = n % ng;
    return g * base + (g < longer ? g : longer);
}

/* The group holding element i (0 <= i < n, ng = zn_quant_ngroups(n, G)):
   what a kernel's thread for element i needs to find its scale. */
static inline ZN_HD long zn_quant_group_of(long n, long ng, long i) {
    if (ng <= 0) return 0;
    long base = n / ng, longer = n % ng;
    long split = longer * (base + 1);   /* where the longer groups end */
    return i < split ? i / (base + 1) : longer + (i - split) / base;
}

/* ------------------------------------------------------------------------ */
/* one group (Z-QNT-002, Z-QNT-004) */

/* A = max |x| over a group. Any NaN makes A NaN and any inf (without NaN)
   makes it inf, so a group that is not all finite is seen by its A alone.
   (fmaxf would drop the NaN: that is why the comparison is written out.) */
static inline ZN_HD float zn_q_absmax(const float *x, long len) {
    float A = 0.0f;
    for (long i = 0; i < len; i++) {
        float a = fabsf(x[i]);
        if (!(a <= A) && A == A) A = a;   /* a NaN enters once, then stays */
    }
    return A;
}

/* Subnormal A makes half / A overflow fp32 (128 / A is inf below ~2^-121):
   groups with A < 2^-64 are scaled by 2^64 first. Multiplying by a power of
   two is exact, so this changes no code wherever half / A was finite. */
#define ZN_Q_TINY 0x1p-64f
#define ZN_Q_LIFT 0x1p64f
static inline ZN_HD float zn_q_pre(float A) { return A < ZN_Q_TINY ? ZN_Q_LIFT : 1.0f; }

/* The multiplier half / (A * pre), half = 128 (int8) or 8 (int4), one fp32
   division. 0 marks a group whose codes are all 0: A == 0 or A not finite. */
static inline ZN_HD float zn_q_inv(float A, float half) {
    if (!(A > 0.0f) || A == INFINITY) return 0.0f;   /* 0, inf or NaN */
    return half / (A * zn_q_pre(A));
}

/* The stored scale s = A / half: 0 for an all-zero group and NaN for a group
   holding inf or NaN, so every dequantized element of it is NaN. */
static inline ZN_HD float zn_q_scale(float A, float half) {
    if (A == 0.0f) return 0.0f;
    if (!(A < INFINITY)) return NAN;
    return A / half;
}

/* ------------------------------------------------------------------------ */
/* one element */

/* Round to the nearest integer, ties to even, for |y| < 2^31. The (int)
   conversion truncates toward zero in C and CUDA whatever the rounding mode,
   y - t is exact (it is y's fraction), and the comparisons are exact, so the
   result does not depend on the FPU rounding mode (rintf and nearbyintf do). */
static inline ZN_HD int zn_q_rne(float y) {
    int t = (int)y;
    float f = y - (float)t;
    if (f > 0.5f || (f == 0.5f && t % 2 != 0)) t++;
    else if (f < -0.5f || (f == -0.5f && t % 2 != 0)) t--;
    return t;
}

/* The code of x in a group with multipliers pre = zn_q_pre(A) and inv =
   zn_q_inv(A, half); qmax = 127 (int8) or 7 (int4), the codes run
   -qmax-1..qmax. y = (x * pre) * inv, two fp32 products; y >= qmax + 0.5 is
   +A's neighbourhood, which would round to qmax + 1: it clamps to qmax. */
static inline ZN_HD int zn_q_code(float x, float pre, float inv, int qmax) {
    if (inv == 0.0f) return 0;               /* all-zero or non-finite group */
    float y = (x * pre) * inv;
    if (y != y) return 0;                    /* x NaN: only if A was not x's group's */
    if (y >= (float)qmax + 0.5f) return qmax;
    if (y <= -(float)qmax - 1.5f) return -qmax - 1;
    return zn_q_rne(y);
}

/* x^ = q * s, one fp32 product; a non-finite group's NaN scale gives the
   NAN constant itself: a product with a NaN keeps the NaN operand's payload
   on x86 but is the canonical 0x7fffffff on a GPU (seen on an H200), and
   Z-CUDA-003 wants the host's bits. */
static inline ZN_HD float zn_q_decode(int q, float s) { return s != s ? NAN : (float)q * s; }

/* x^ rounded to the model's dtype (Z-QNT-006): fp16 and bf16 to nearest
   even (core/half.h), anything else left as fp32. */
static inline ZN_HD float zn_q_round(float v, ZnDtype dt) {
    if (dt == ZN_F16) return zn_round_f16(v);
    if (dt == ZN_BF16) return zn_round_bf16(v);
    return v;
}

/* int4 codes, two per byte (Z-QNT-005): element 2i in the low nibble,
   2i+1 in the high one, each a two's complement nibble. */
static inline ZN_HD uint8_t zn_q4_nibble(int q) { return (uint8_t)((unsigned)q & 0xfu); }
static inline ZN_HD int zn_q4_get(const uint8_t *packed, long i) {
    unsigned v = (i % 2 == 0) ? (packed[i / 2] & 0xfu) : (unsigned)(packed[i / 2] >> 4);
    return v >= 8u ? (int)v - 16 : (int)v;
}
/* bytes holding n int4 codes */
static inline ZN_HD long zn_q4_bytes(long n) { return n > 0 ? (n + 1) / 2 : 0; }

/* ------------------------------------------------------------------------ */
/* arrays (quant.c). n elements in zn_quant_ngroups(n, max_group) groups;
   scales has one float per group. n <= 0 does nothing. The same call with
   the same input gives the same bits (Z-QNT-007). */

/* x[n] (fp32, fp16 or bf16 values held in fp32) -> q[n] int8 codes and
   scales[ng]. */
void zn_quant8(const float *x, long n, long max_group, int8_t *q, float *scales);
/* q[n], scales[ng] -> out[n] = q * s rounded to dt (ZN_F32: left as is). */
void zn_dequant8(const int8_t *q, const float *scales, long n, long max_group, ZnDtype dt, float *out);
/* x[n] -> q[zn_q4_bytes(n)] packed int4 codes (an odd n leaves the last
   high nibble 0) and scales[ng]. */
void zn_quant4(const float *x, long n, long max_group, uint8_t *q, float *scales);
/* packed q, scales[ng] -> out[n] = q * s rounded to dt. */
void zn_dequant4(const uint8_t *q, const float *scales, long n, long max_group, ZnDtype dt, float *out);

#endif
