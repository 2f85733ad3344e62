/* cpu.c: instruction sets and host threads (core/cpu.h). */
#include "core/cpu.h"
#include <pthread.h>
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

static void pick(void) {
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

ZnIsa zn_isa_best(void) {
    pthread_once(&isa_once, pick);
    return best;
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
