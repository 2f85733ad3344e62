/* covmark.c: coverage counts split by plan (covmark.h). Built into the
 * coverage build only (ZN_COVERAGE); elsewhere this file is empty. */
#include "core/covmark.h"
#ifdef ZN_COVERAGE
#include "core/plan.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libgcov (linked by --coverage): write the counts so far, clear them */
extern void __gcov_dump(void);
extern void __gcov_reset(void);
/* tests/failmalloc.c when LD_PRELOADed (tests/alloc_test.sh): a switch
   allocates (setenv, libgcov), and those allocations are not zinc's to fail */
extern void zn_failmalloc_hold(int on) __attribute__((weak));

#define KEY_N 96
static char cur[KEY_N] = "none";   /* the key the counts go to now */
static char saved[KEY_N];          /* cur before the world began */
static char noted[KEY_N];          /* the key a rank's engine named in this world */
static int in_world, spec, faults;
/* the rank threads of a world name its key together */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Points libgcov's next dump (at a switch or at exit) at key's folder and
 * makes it cur. GCOV_PREFIX and GCOV_PREFIX_STRIP are read at every dump:
 * the strip drops the object folder from the compiled-in absolute .gcda
 * path, the prefix puts <objdir>/covkeys/<key> in its place. */
static void aim(const char *key) {
    const char *obj = ZN_COVERAGE;
    int strip = 0;
    for (const char *c = obj; *c; c++) strip += *c == '/';
    char dir[512], s[16];
    snprintf(dir, sizeof dir, "%s/covkeys/%s", obj, key);
    snprintf(s, sizeof s, "%d", strip);
    setenv("GCOV_PREFIX", dir, 1);
    setenv("GCOV_PREFIX_STRIP", s, 1);
    snprintf(cur, sizeof cur, "%s", key);
}

/* Writes the counts so far under cur's folder, clears them, and sends the
 * next ones to key's. */
static void switch_to(const char *key) {
    if (!strcmp(key, cur)) return;
    __gcov_dump();
    __gcov_reset();
    aim(key);
}

/* Every process starts with no key, whatever GCOV_PREFIX it inherited from
   a parent that was inside one. */
__attribute__((constructor)) static void start(void) {
    aim("none");
    const char *k = getenv("ZN_FAIL_ALLOC");   /* tests/alloc_test.sh's runs that fail one */
    faults = k && atol(k) > 0;
}

static const char *tier(ZnTier t) { return t == ZN_TIER_HOST ? "cpu" : t == ZN_TIER_NVME ? "nvme" : "dev"; }

/* The key of cfg's plan: the rows of the table it belongs to
 * (coverage/stage_table.py reads the same fields back). */
static void plan_key(const ZnConfig *cfg, char *key) {
    const ZnPlan *P = &cfg->plan;
    snprintf(key, KEY_N, "%s-s%d-o%s-p%s-h%d-w%d-g%d-m%d-a%d-%s", faults ? "fault" : spec ? "spec" : "suite", P->stage,
             tier(P->optim_tier), tier(P->param_tier), P->hpz > 1, P->quant_weights != 0, P->quant_grads != 0,
             P->mics_shard > 0, cfg->grad_accum > 1, zn_dtype_name(cfg->model_dtype));
}

static void hold(int on) {
    if (zn_failmalloc_hold) zn_failmalloc_hold(on);
}

void zn_cov_world(int begin) {
    hold(1);
    if (begin) {
        snprintf(saved, sizeof saved, "%s", cur);
        snprintf(noted, sizeof noted, "none");
        /* what ran before the world is not its plan's: written now under
           the key in use, "none" included (switch_to would skip a switch to
           the key in use, and those counts would end up under the world's
           plan: a command's parsing and loading counted as the stage's) */
        __gcov_dump();
        __gcov_reset();
        aim("none");
        in_world = 1;
    } else {
        in_world = 0;
        aim(noted);   /* the world's counts belong to its engines' plan */
        switch_to(saved);
    }
    hold(0);
}

void zn_cov_engine(const ZnConfig *cfg) {
    char key[KEY_N];
    if (in_world) {
        plan_key(cfg, key);
        pthread_mutex_lock(&mu);
        if (!strcmp(noted, "none")) snprintf(noted, sizeof noted, "%s", key);   /* every rank has the same plan */
        pthread_mutex_unlock(&mu);
        return;
    }
    hold(1);
    plan_key(cfg, key);
    switch_to(key);
    hold(0);
}

void zn_cov_engine_end(void) {
    if (in_world) return;
    hold(1);
    switch_to("none");
    hold(0);
}

void zn_cov_spec(void) { spec = 1; }

void zn_cov_faults(int on) { faults = on; }

void zn_cov_forked(void) { __gcov_reset(); }
#endif
