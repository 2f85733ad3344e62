/* alloc_sweep.h: the allocation-failure sweep of the tests linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (Makefile): test_io_alloc.c
 * and test_app_alloc.c. For k = 1, 2, ... the k-th allocation of one call
 * on the calling thread fails, as on a machine out of memory, until k passes
 * the call's last allocation. Include it in one file of the binary. */
#ifndef ZT_ALLOC_SWEEP_H
#define ZT_ALLOC_SWEEP_H
#include "testutil.h"
#include "core/covmark.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);

/* the fail_at-th allocation from arm() on fails (0: none); seen counts them */
static _Thread_local long fail_at, seen;

/* src/core/covmark.c holds the count while a coverage build switches its
   counts (setenv, libgcov's dump): those allocations are not zinc's */
static _Thread_local int held;
void zn_failmalloc_hold(int on) { held = on; }

static int failing(void) { return !held && fail_at && ++seen == fail_at; }
/* the test's own allocations (and libc's on its behalf) are not failed */
static long pause_failing(void) {
    long at = fail_at;
    fail_at = 0;
    return at;
}
void *__wrap_malloc(size_t n) { return failing() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) {
    if (failing() || (n && k > SIZE_MAX / n)) return NULL;
    return __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n) { return failing() ? NULL : __real_realloc(p, n); }

typedef int (*Op)(const void *arg, ZnErr *err);
/* What an op returns when a failed allocation did not stop it and it
 * checked that its result is the unfailed run's (a cache that does without
 * the block it could not track, say) */
#define ZT_RECOVERED (-1000)

/* Runs op with its k-th allocation failing, for every k: each failure
 * is a clean ZN_E_NOMEM.
 * Returns how many allocations the op makes when none fails. */
static long sweep(const char *what, Op op, const void *arg) {
    /* under valgrind (ci/memcheck.sh) every 7th point: the sweep is
     * quadratic, and memcheck's interest is what each kind of failure frees */
    const long step = getenv("ZINC_UNDER_VALGRIND") ? 7 : 1;
    zn_cov_faults(1);   /* the coverage build's rows leave these runs out */
    for (long k = 1;; k += step) {
        ZnErr err = {0};
        seen = 0;
        fail_at = k;
        int rc = op(arg, &err);
        fail_at = 0;
        if (seen < k) {   /* the op's allocations all came before k: it ran unfailed */
            if (rc) fail_msg("%s with every allocation granted: rc %d: %s", what, rc, err.msg);
            if (getenv("ZT_SWEEP_VERBOSE")) fprintf(stderr, "sweep %s: %ld allocations\n", what, seen);
            zn_cov_faults(0);
            return seen;
        }
        if (rc == ZT_RECOVERED) continue;   /* the op absorbed the failure and checked its result */
        if (rc != ZN_E_NOMEM) fail_msg("%s, allocation %ld failing: rc %d: %s", what, k, rc, err.msg);
        if (!strstr(err.msg, "out of host memory") && !strstr(err.msg, "out of memory"))
            fail_msg("%s, allocation %ld failing: message '%s'", what, k, err.msg);
    }
}

#endif
