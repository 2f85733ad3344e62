/* zn_hd.h: what lets one header be compiled by gcc for the host and by nvcc
 * for both host and device (the exact-mode twins: half.h, zn_math.h,
 * optim_elem.h). ZN_HD marks a function callable on both sides. */
#ifndef ZN_HD_H
#define ZN_HD_H
#include <stdint.h>

#ifdef __CUDACC__
#define ZN_HD __host__ __device__
#else
#define ZN_HD
#endif

#if defined(__CUDA_ARCH__)
/* device code: the intrinsics are register moves */
static inline ZN_HD uint32_t zn_hd_f32_bits(float f) { return __float_as_uint(f); }
static inline ZN_HD float zn_hd_bits_f32(uint32_t u) { return __uint_as_float(u); }
#else
#include <string.h>
/* host: memcpy is the type pun C11 defines; compilers emit a register move */
static inline ZN_HD uint32_t zn_hd_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline ZN_HD float zn_hd_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
#endif

#endif
