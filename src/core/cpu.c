/* cpu.c: instruction sets and host threads (core/cpu.h). */
#include "core/cpu.h"
#include <pthread.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *isa_names[ZN_ISA_N] = {"scalar", "sse2", "avx2", "avx512"};

const char *zn_isa_name(ZnIsa isa) { return isa >= 0 && isa < ZN_ISA_N ? isa_names[isa] : "?"; }

int zn_isa_supported(ZnIsa isa) {
    switch (isa) {
    case ZN_ISA_SCALAR: return 1;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    case ZN_ISA_SSE2: return 1;
    case ZN_ISA_AVX2: return __builtin_cpu_supports("avx2");
    case ZN_ISA_AVX512: return __builtin_cpu_supports("avx512f");
#endif
    default: return 0;
    }
}

static ZnIsa best;
static const char *env_problem;   /* a name this CPU cannot run: a warning */
static int env_unknown;           /* a name that is no instruction set: an error */
static char env_msg[160];
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void pick_best(void) {
    best = ZN_ISA_SCALAR;
    for (int i = ZN_ISA_N - 1; i > 0; i--)
        if (zn_isa_supported((ZnIsa)i)) { best = (ZnIsa)i; break; }
    const char *want = getenv("ZINC_ISA");
    if (!want) return;
    for (int i = 0; i < ZN_ISA_N; i++)
        if (!strcmp(want, isa_names[i])) {
            if (i <= (int)best) best = (ZnIsa)i;
            else {
                snprintf(env_msg, sizeof env_msg, "ZINC_ISA: this CPU cannot run '%.20s'; using %s", want,
                         isa_names[best]);
                env_problem = env_msg;
            }
            return;
        }
    snprintf(env_msg, sizeof env_msg, "ZINC_ISA: expected scalar, sse2, avx2 or avx512, got '%.20s'", want);
    env_unknown = 1;
}

/* AMD family 19h (Zen 3, Zen 4) runs a 512-bit operation as two 256-bit
 * halves: the GEMM's AVX-512 tile then only adds instruction overhead
 * (measured on Zen 4: 70 GFLOP/s against AVX2's 95, `build/bench gemm`). */
static int halves_512(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    const int amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;   /* "AuthenticAMD" */
    if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned fam = (a >> 8) & 0xf;
    if (fam == 0xf) fam += (a >> 20) & 0xff;
    return fam == 0x19;
#else
    return 0;
#endif
}

/* The GEMM's choice is made with the rest, once, by whichever thread asks
 * first (the CLI asks on the main thread before any rank starts, so thread
 * checkers see the writes before every read). */
static ZnIsa gemm_best;
static void pick(void) {
    pick_best();
    gemm_best = best == ZN_ISA_AVX512 && halves_512() ? ZN_ISA_AVX2 : best;
}

ZnIsa zn_isa_best(void) {
    pthread_once(&isa_once, pick);
    return best;
}

ZnIsa zn_isa_gemm(void) {   /* asked once per GEMM: cpuid ran once, in pick() */
    pthread_once(&isa_once, pick);
    return gemm_best;
}

const char *zn_isa_env_problem(void) {
    pthread_once(&isa_once, pick);
    return env_problem;
}

int zn_host_env_check(ZnErr *err) {
    pthread_once(&isa_once, pick);
    if (env_unknown) return zn_err(err, ZN_E_USAGE, "%s", env_msg);
    const char *e = getenv("ZINC_NUM_THREADS");
    int n;
    return e ? zn_parse_threads("ZINC_NUM_THREADS", e, &n, err) : 0;
}

static int threads_set;   /* 0: not set by the CLI */

int zn_parse_threads(const char *what, const char *s, int *out, ZnErr *err) {
    long v = 0;
    int n = 0;
    for (const char *p = s; *p; p++, n++) {
        if (*p < '0' || *p > '9' || n >= 4) { n = -1; break; }
        v = v * 10 + (*p - '0');
    }
    if (n <= 0 || v < 1 || v > ZN_MAX_HOST_THREADS)
        return zn_err(err, ZN_E_USAGE, "%s: expected a thread count in 1..%d, got '%.40s'", what, ZN_MAX_HOST_THREADS,
                      s);
    *out = (int)v;
    return 0;
}

void zn_set_host_threads(int n) { threads_set = n; }

int zn_host_threads(void) {
    if (threads_set > 0) return threads_set;
    const char *e = getenv("ZINC_NUM_THREADS");
    int n = 1;
    if (e && zn_parse_threads("ZINC_NUM_THREADS", e, &n, NULL)) n = 1;   /* checked at start-up by the CLI */
    return n;
}

void zn_run_parts(int T, void *(*fn)(void *), void *parts, size_t part_size) {
    pthread_t th[ZN_MAX_HOST_THREADS];
    int started[ZN_MAX_HOST_THREADS];
    char *base = parts;
    if (T > ZN_MAX_HOST_THREADS) T = ZN_MAX_HOST_THREADS;
    for (int k = 1; k < T; k++) started[k] = pthread_create(&th[k], NULL, fn, base + (size_t)k * part_size) == 0;
    if (T > 0) fn(base);
    for (int k = 1; k < T; k++) {
        if (started[k]) pthread_join(th[k], NULL);
        else fn(base + (size_t)k * part_size);
    }
}
