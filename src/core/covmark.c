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

#define KEY_N 96
static char cur[KEY_N];      /* where the counts go now; "" the object folder */
static char saved[KEY_N];    /* cur before the world began */
static char noted[KEY_N];    /* the key a rank's engine named in this world */
static int in_world, spec;
static int have_env;         /* env0 holds the process's own GCOV_PREFIX */
static char env0[512], strip0[16];
/* the rank threads of a world name its key together */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Points libgcov's next dump (at a switch or at exit) at key's folder and
 * makes it cur. GCOV_PREFIX and GCOV_PREFIX_STRIP are read at every dump:
 * the strip drops the object folder from the compiled-in absolute .gcda
 * path, the prefix puts the key's folder in its place; no key: the
 * process's own settings (none: the object folder). */
static void aim(const char *key) {
    if (!have_env) {
        const char *p = getenv("GCOV_PREFIX"), *s = getenv("GCOV_PREFIX_STRIP");
        snprintf(env0, sizeof env0, "%s", p ? p : "");
        snprintf(strip0, sizeof strip0, "%s", s ? s : "");
        have_env = 1;
    }
    snprintf(cur, sizeof cur, "%s", key);
    if (!*key) {
        if (*env0) setenv("GCOV_PREFIX", env0, 1); else unsetenv("GCOV_PREFIX");
        if (*strip0) setenv("GCOV_PREFIX_STRIP", strip0, 1); else unsetenv("GCOV_PREFIX_STRIP");
        return;
    }
    const char *obj = ZN_COVERAGE;
    int strip = 0;
    for (const char *c = obj; *c; c++) strip += *c == '/';
    char dir[512], s[16];
    snprintf(dir, sizeof dir, "%s/covkeys/%s", obj, key);
    snprintf(s, sizeof s, "%d", strip);
    setenv("GCOV_PREFIX", dir, 1);
    setenv("GCOV_PREFIX_STRIP", s, 1);
}

/* Writes the counts so far under cur's folder, clears them, and sends the
 * next ones to key's. */
static void switch_to(const char *key) {
    if (!strcmp(key, cur)) return;
    __gcov_dump();
    __gcov_reset();
    aim(key);
}

static const char *tier(ZnTier t) { return t == ZN_TIER_HOST ? "cpu" : t == ZN_TIER_NVME ? "nvme" : "dev"; }

/* The key of cfg's plan in world w: the rows of the table it belongs to
 * (coverage/stage_table.py reads the same fields back). */
static void plan_key(const ZnConfig *cfg, const ZnWorld *w, char *key) {
    const ZnZeroConfig *z = &cfg->zero;
    ZnPlan P;
    ZnErr e = {0};
    if (zn_plan_build(&P, z->stage, &e)) { key[0] = 0; return; }   /* refused: the init fails */
    zn_plan_offload(&P, (int)z->offload_optimizer.device, (int)z->offload_param.device, z->offload_optimizer.ratio);
    zn_plan_zeropp(&P, z->zero_hpz_partition_size, z->zero_quantized_weights, z->zero_quantized_gradients, w->size);
    zn_plan_mics(&P, z->mics_shard_size, z->mics_hierarchical_params_gather);
    snprintf(key, KEY_N, "%s-s%d-o%s-p%s-h%d-w%d-g%d-m%d-a%d-%s", spec ? "spec" : "suite", P.stage,
             tier(P.optim_tier), tier(P.param_tier), P.hpz > 1, P.quant_weights != 0, P.quant_grads != 0,
             P.mics_shard > 0, cfg->grad_accum > 1, zn_dtype_name(cfg->model_dtype));
}

void zn_cov_world(int begin) {
    if (begin) {
        snprintf(saved, sizeof saved, "%s", cur);
        noted[0] = 0;
        switch_to("");   /* what ran before the world is not its plan's */
        in_world = 1;
    } else {
        in_world = 0;
        aim(noted);   /* the world's counts belong to its engines' plan */
        switch_to(saved);
    }
}

void zn_cov_engine(const ZnConfig *cfg, const ZnWorld *w) {
    char key[KEY_N];
    plan_key(cfg, w, key);
    if (!in_world) { switch_to(key); return; }
    pthread_mutex_lock(&mu);
    if (!noted[0]) snprintf(noted, sizeof noted, "%s", key);   /* every rank has the same plan */
    pthread_mutex_unlock(&mu);
}

void zn_cov_engine_end(void) {
    if (!in_world) switch_to("");
}

void zn_cov_spec(void) { spec = 1; }
#endif
