/* half.h: fp32 <-> fp16 and fp32 <-> bf16 conversions (spec Z-HALF-001..006).
 *
 * Pure integer bit manipulation: no F16C/AVX512 intrinsics, no _Float16, no
 * dependence on the host FPU's rounding mode. The same text is compiled by
 * nvcc for the GPU (ZN_HD, spec Z-CUDA-003), so host and device round
 * identically.
 *
 *   fp32 -> 16 bit: round to nearest, ties to even; too large -> inf of the
 *                   same sign; fp16 subnormals rounded correctly; NaN stays
 *                   NaN (quiet bit set, sign and top payload bits kept).
 *   16 bit -> fp32: exact (every fp16 and bf16 value is an fp32 value);
 *                   a signalling NaN comes back quiet.
 */
#ifndef ZN_HALF_H
#define ZN_HALF_H
#include <stdint.h>
#include <string.h>
#include "core/zn_hd.h"

/* memcpy on the host (the type pun C11 defines), the bit-move intrinsics on
   the device: both are a register move. */
static inline ZN_HD uint32_t zn_f32_bits(float f) { return zn_hd_f32_bits(f); }
static inline ZN_HD float zn_bits_f32(uint32_t u) { return zn_hd_bits_f32(u); }

static inline ZN_HD uint16_t zn_f32_to_f16(float f) {
    uint32_t x = zn_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep the top 9 payload bits, force quiet (0x200) */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    /* 65520 = halfway between 65504 (max fp16, odd mantissa) and 65536:
       the tie goes to the even neighbour, which is inf. Covers inf too. */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal fp16 (>= 2^-14) */
        /* rebias the exponent from 127 to 15 (subtract 112 << 23), then
           round the 13 dropped bits to nearest even; a carry out of the
           mantissa correctly bumps the exponent. */
        uint32_t r = ax - 0x38000000u;
        r = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
        return (uint16_t)(sign | r);
    }
    /* below 2^-25 (half the smallest subnormal) everything rounds to zero;
       exactly 2^-25 is a tie and goes to the even neighbour, zero, too. */
    if (ax <= 0x33000000u) return (uint16_t)sign;
    /* fp16 subnormal: value = m * 2^(e-150) with the implicit bit in m; in
       units of 2^-24 that is m >> (126 - e), shift in 14..24. */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++; /* may reach 0x400: the smallest normal, still right */
    return (uint16_t)(sign | q);
}

static inline ZN_HD float zn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1fu) { /* inf, or NaN made quiet (fp32 quiet bit 0x400000) */
        uint32_t nan_quiet = m ? 0x400000u : 0u;
        return zn_bits_f32(sign | 0x7f800000u | (m << 13) | nan_quiet);
    }
    if (e == 0) {
        if (m == 0) return zn_bits_f32(sign); /* +-0 */
        /* subnormal m * 2^-24: shift until the leading 1 reaches the
           implicit-bit position; each shift lowers the exponent by one. A
           loop, not clz, so it stays free of intrinsics (at most 10 steps). */
        uint32_t e32 = 113u; /* 127 - 14: exponent of 2^-14 */
        while (!(m & 0x400u)) { m <<= 1; e32--; }
        return zn_bits_f32(sign | (e32 << 23) | ((m & 0x3ffu) << 13));
    }
    return zn_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline ZN_HD uint16_t zn_f32_to_bf16(float f) {
    uint32_t x = zn_f32_bits(f);
    /* NaN: truncating could clear every payload bit and make inf; setting the
       bf16 quiet bit (0x40) keeps it a NaN. */
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    /* bf16 is the top half of fp32: round the low 16 bits to nearest even.
       The carry handles mantissa overflow, the FLT_MAX -> inf case and the
       subnormal -> normal case with no special branches. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline ZN_HD float zn_bf16_to_f32(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x400000u; /* quiet a signalling NaN */
    return zn_bits_f32(x);
}

/* Round an fp32 value to the nearest 16-bit value and back: what one
   low-precision reduction step keeps (spec Z-SIM-003). */
static inline ZN_HD float zn_round_f16(float f) { return zn_f16_to_f32(zn_f32_to_f16(f)); }
static inline ZN_HD float zn_round_bf16(float f) { return zn_bf16_to_f32(zn_f32_to_bf16(f)); }

#endif
