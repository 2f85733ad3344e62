/* failmalloc.c: an LD_PRELOAD shim for the allocation-failure loop
 * (tests/alloc_test.sh, spec Z-CKPT-012). With ZN_FAIL_ALLOC=k it makes the
 * k-th allocation (malloc, calloc, realloc, posix_memalign, aligned_alloc,
 * memalign, strdup, strndup) counted from the first instruction of main()
 * return NULL (ENOMEM), once; every other call goes to glibc. What the
 * dynamic loader and the libraries' constructors allocate before main is
 * not counted: failing it would test glibc and OpenMPI, not zinc; nor is
 * what runs at exit (gcov writing its profile in a coverage build). The
 * shim finds main by wrapping __libc_start_main. Nor, in the coverage
 * build, what its per-plan switch allocates (zn_failmalloc_hold, called
 * by src/core/covmark.c): setenv and gcov writing its counts mid-run. At exit it writes "allocations N fired F" to the file
 * ZN_FAIL_ALLOC_REPORT names, so the loop knows when k has passed the end
 * of the run. (SQLite's malloc test loop is the model.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static long fail_at = 0;          /* 0: count only */
static atomic_long count;
static atomic_int fired;
static int armed;
static int counting;   /* this process is the one counted (ZN_FAIL_ALLOC_PROG) */
static atomic_int held;   /* zn_failmalloc_hold: nothing counted or failed */

static int (*real_main)(int, char **, char **);

/* exit() runs this before the destructors registered at load time (gcov's
   profile writer among them), so their allocations are not counted either */
static void disarm(void) { armed = 0; }

static int counted_main(int argc, char **argv, char **envp) {
    const char *k = getenv("ZN_FAIL_ALLOC");
    fail_at = k ? strtol(k, NULL, 10) : 0;
    /* ZN_FAIL_ALLOC_PROG=zinc: only a program of that name counts (a
       wrapper script in between, such as Debian's /usr/bin/valgrind, gets
       the shim too and must run untouched) */
    const char *prog = getenv("ZN_FAIL_ALLOC_PROG");
    const char *base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : argc > 0 && argv[0] ? argv[0] : "";
    if (prog && strcmp(prog, base) != 0) return real_main(argc, argv, envp);
    atexit(disarm);
    armed = counting = 1;
    return real_main(argc, argv, envp);
}

typedef int (*StartMain)(int (*)(int, char **, char **), int, char **, void (*)(void), void (*)(void),
                         void (*)(void), void *);

int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
    StartMain next = (StartMain)dlsym(RTLD_NEXT, "__libc_start_main");
    real_main = main;
    return next(counted_main, argc, argv, init, fini, rtld_fini, stack_end);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("ZN_FAIL_ALLOC_REPORT");
    if (!path || !counting) return;
    armed = 0;   /* fopen below allocates: not counted */
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "allocations %ld fired %d\n", atomic_load(&count), atomic_load(&fired));
    fclose(f);
}

/* The coverage build's switch of gcov's counts (src/core/covmark.c) holds
   the count while it runs: on 1 holds, 0 releases. */
void zn_failmalloc_hold(int on) { atomic_store(&held, on); }

/* 1 if this allocation is the one to fail */
static int fail_now(void) {
    if (!armed || atomic_load(&held)) return 0;
    long n = atomic_fetch_add(&count, 1) + 1;
    if (n != fail_at) return 0;
    atomic_store(&fired, 1);
    errno = ENOMEM;
    return 1;
}

void *malloc(size_t n) { return fail_now() ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return fail_now() ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return fail_now() ? NULL : __libc_realloc(p, n); }
void *memalign(size_t al, size_t n) { return fail_now() ? NULL : __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { return fail_now() ? NULL : __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n) {
    if (fail_now()) return ENOMEM;
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
char *strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}
char *strndup(const char *s, size_t max) {
    size_t n = strnlen(s, max);
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}
