/* rng.h: counter-based random numbers. A value is a pure function of
 * (key, counter), so any rank can produce any sample or weight element, and
 * nothing depends on world size, stage or resume point (spec Z-DATA-001). */
#ifndef ZN_RNG_H
#define ZN_RNG_H
#include <stdint.h>
#include <string.h>
#include "core/hash.h"

/* splitmix64 finaliser: a bijective 64-bit mix. */
static inline uint64_t zn_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t zn_rng_u64(uint64_t key, uint64_t counter) {
    return zn_mix64(zn_mix64(key) ^ zn_mix64(counter + 0x632BE59BD9B4E019ull));
}
/* Uniform in [0, 1) with 24 random bits: exactly representable in fp32. */
static inline float zn_rng_uniform(uint64_t key, uint64_t counter) {
    return (float)(zn_rng_u64(key, counter) >> 40) * (1.0f / 16777216.0f);
}
/* FNV-1a over a string: the key of a parameter name. */
static inline uint64_t zn_hash_str(const char *s) {
    return zn_fnv1a64(ZN_FNV_INIT, s, strlen(s));
}
#endif
