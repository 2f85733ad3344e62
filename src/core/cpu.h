/* cpu.h: what the host CPU can run, and how many threads host kernels use
 * (spec Z-HOST-001, Z-HOST-002).
 *
 * Host kernels with a vectorised path (Adam) are compiled once per
 * instruction set and the best one the CPU supports is chosen at run time,
 * so one binary runs everywhere. Every path gives the same bits: the
 * kernels do element-wise IEEE fp32 operations only (+, *, /, sqrt, each
 * correctly rounded in SSE, AVX2 and AVX-512 alike) and the build forbids
 * FMA contraction (-ffp-contract=off), so a wider register changes how many
 * elements go at once, never a result. */
#ifndef ZN_CPU_H
#define ZN_CPU_H
#include <stddef.h>
#include "core/err.h"

typedef enum {
    ZN_ISA_SCALAR = 0,   /* the reference twin: one element at a time */
    ZN_ISA_SSE2,         /* x86-64's baseline (what -O2 vectorises for) */
    ZN_ISA_AVX2,
    ZN_ISA_AVX512,
    ZN_ISA_N
} ZnIsa;

const char *zn_isa_name(ZnIsa isa);
/* 1 when this build has a path for isa and the CPU runs it. */
int zn_isa_supported(ZnIsa isa);
/* The widest supported path, lowered by ZINC_ISA=scalar|sse2|avx2|avx512
 * (read once; a name this CPU cannot run is ignored, and
 * zn_isa_env_problem says so). */
ZnIsa zn_isa_best(void);
/* The instruction set the GEMM runs on: zn_isa_best(), except AVX2 on a CPU
 * that runs 512-bit operations in two halves (AMD Zen 3/4), where it is the
 * faster of the two. The same bits either way (device/gemm_host.c). */
ZnIsa zn_isa_gemm(void);
/* NULL, or the warning for a ZINC_ISA this CPU cannot run. */
const char *zn_isa_env_problem(void);
/* ZN_E_USAGE for a ZINC_ISA that names no instruction set or a
 * ZINC_NUM_THREADS that is not a thread count (the CLI checks at start). */
int zn_host_env_check(ZnErr *err);

/* Threads a host kernel may use: zn_set_host_threads (the --threads flag),
 * else ZINC_NUM_THREADS, else 1. At most ZN_MAX_HOST_THREADS. */
#define ZN_MAX_HOST_THREADS 256
int zn_host_threads(void);
void zn_set_host_threads(int n);
/* Runs fn(parts + k * part_size) for k = 0..T-1 (T <= ZN_MAX_HOST_THREADS):
 * parts 1..T-1 on threads of their own, part 0 on the caller, then waits.
 * A thread that cannot be started leaves its part to the caller, so every
 * part runs exactly once whatever happens (the same bits either way: each
 * output element belongs to one part). */
void zn_run_parts(int T, void *(*fn)(void *), void *parts, size_t part_size);
/* Parses a thread count (ZINC_NUM_THREADS, --threads): 1..ZN_MAX_HOST_THREADS. */
int zn_parse_threads(const char *what, const char *s, int *out, ZnErr *err);

#endif
