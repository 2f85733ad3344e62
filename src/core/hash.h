/* hash.h: FNV-1a 64, the one checksum zinc uses (digests, checkpoint files
 * and manifests, parameter-name keys, sequence records, config identity). */
#ifndef ZN_HASH_H
#define ZN_HASH_H
#include <stddef.h>
#include <stdint.h>

#define ZN_FNV_INIT 0xcbf29ce484222325ull

/* h chained over n bytes at p (start with ZN_FNV_INIT). */
static inline uint64_t zn_fnv1a64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}
#endif
