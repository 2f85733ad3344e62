/* testutil.h: what every unit test includes. cmocka needs these headers in
 * this order. The zt_ helpers are shared by several tests. Each test names
 * the spec clause it checks in a comment "spec: Z-XXX-NNN" (zinc spec
 * coverage reads them). */
#ifndef ZN_TESTUTIL_H
#define ZN_TESTUTIL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cmocka.h>
#include <unistd.h>
#include <ftw.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include "core/config.h"
#include "device/device.h"
#include "engine/engine.h"
#include "engine/data.h"
#include "comm/world.h"
#include "app/cli.h"
#include "io/checkpoint.h"
#include "core/fileio.h"

/* The number of elements of an array (an array, not a pointer). */
#define ZT_LEN(a) (sizeof(a) / sizeof *(a))

/* A table of cases written where it is checked: calls check(&case) for each,
 * in order. The cases are one static const array of `type`:
 *     ZT_CASES(ErrCase, err_case,
 *              {"[]", "ds.json: the top level must be a JSON object, got an array"},
 *              {"3", "ds.json: the top level must be a JSON object, got 3"});
 * (Tests that check many inputs the same way write them as such a table.) */
#define ZT_CASES(type, check, ...)                                              \
    do {                                                                        \
        static const type zt_cases_[] = {__VA_ARGS__};                         \
        for (size_t zt_k_ = 0; zt_k_ < ZT_LEN(zt_cases_); zt_k_++) check(&zt_cases_[zt_k_]); \
    } while (0)

/* bitwise float compare: equal bits, not just equal values */
static inline int zt_same_bits(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}
/* Everything in f (a tmpfile written by the code under test, or a file
 * opened for reading) as a malloc'd string with a NUL after it; closes f.
 * *len gets the size unless len is NULL. Tests that read back what was
 * written share it. (A tmpfile rather than open_memstream: GCC's
 * -Wdangling-pointer mistakes a memstream's buffer returned from a helper
 * for a pointer to the helper's local.) */
static inline char *zt_slurp(FILE *f, size_t *len) {
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    rewind(f);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return s;
}
/* ---- files: a temporary directory per test binary ---------------------- */

/* The binary's temporary directory, made by zt_tmpdir_setup as
 * /tmp/zn_test_XXXXXX and removed with everything in it by
 * zt_tmpdir_teardown: cmocka's group setup and teardown,
 * `cmocka_run_group_tests(tests, zt_tmpdir_setup, zt_tmpdir_teardown)`. */
static inline char *zt_tmpdir(void) {
    static char dir[64];
    return dir;
}
static inline int zt_tmpdir_setup(void **state) {
    (void)state;
    snprintf(zt_tmpdir(), 64, "/tmp/zn_test_XXXXXX");
    return mkdtemp(zt_tmpdir()) ? 0 : -1;
}
/* dir and everything in it gone (links not followed); 0 on success */
static inline int zt_rm_one_(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static inline int zt_rm_rf(const char *dir) { return nftw(dir, zt_rm_one_, 16, FTW_DEPTH | FTW_PHYS); }
static inline int zt_tmpdir_teardown(void **state) {
    (void)state;
    return zt_rm_rf(zt_tmpdir()) == 0 ? 0 : -1;
}
/* A fresh directory of its own, /tmp/<prefix>XXXXXX (malloc'd path), for a
   test that wants one apart from the binary's (zt_rm_rf and free it). */
static inline char *zt_mkdtemp(const char *prefix) {
    size_t n = strlen(prefix) + 12;
    char *d = malloc(n);
    assert_non_null(d);
    snprintf(d, n, "/tmp/%sXXXXXX", prefix);
    assert_non_null(mkdtemp(d));
    return d;
}
/* A path inside it: one of 8 rotating buffers, so hold a result briefly. */
static inline const char *zt_path(const char *name) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", zt_tmpdir(), name);
    return buf[k];
}
/* n bytes of text written to path (the test fails if they cannot be). */
static inline void zt_write_bytes(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}
static inline void zt_write_text(const char *path, const char *text) { zt_write_bytes(path, text, strlen(text)); }
/* The whole file, malloc'd and NUL-ended; NULL if it cannot be opened. */
static inline char *zt_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    return f ? zt_slurp(f, NULL) : NULL;
}
static inline int zt_file_exists(const char *path) { return access(path, F_OK) == 0; }

/* An I/O fault sweep (core/fileio.h's injection): run(ctx, err) with its
   op-th I/O operation failing, for op = 1, 2, ... until a run needs fewer
   operations than op, which must succeed; every run before it must end in
   ZN_E_IO naming the injected fault, and then left(ctx, op, err) (NULL:
   nothing) checks what it left behind. Returns that last op. */
typedef int (*ZtIoRun)(void *ctx, ZnErr *err);
typedef void (*ZtIoLeft)(void *ctx, long op, const ZnErr *err);
static inline long zt_io_fault_sweep(const char *what, ZtIoRun run, void *ctx, ZtIoLeft left) {
    for (long op = 1;; op++) {
        ZnErr err = {0};
        zn_fault_set(op, 0, 0);
        int rc = run(ctx, &err);
        const long ops = zn_fault_ops();
        zn_fault_set(0, 0, 0);
        if (ops < op) {
            if (rc) fail_msg("%s without a fault: %s", what, err.msg);
            return op;
        }
        if (rc != ZN_E_IO || !strstr(err.msg, "injected I/O fault at op"))
            fail_msg("%s, I/O op %ld failing: rc %d: %s", what, op, rc, err.msg);
        if (left) left(ctx, op, &err);
    }
}
/* Bytes a test builds up (a zip, a pickle): zt_put appends, failing the
 * test past the buffer's end. */
typedef struct {
    unsigned char b[8192];
    size_t n;
} ZtBuf;
static inline void zt_put(ZtBuf *w, const void *p, size_t n) {
    assert_true(w->n + n <= sizeof w->b);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
/* How many times needle stands in hay, not overlapping. */
static inline int zt_count_of(const char *hay, const char *needle) {
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) k++;
    return k;
}

/* ---- engine tests: config, engine on a host device, a simulated world ---- */

/* The command-line args an engine test passes: world size, ZeRO stage, micro
   batch, gradient accumulation and dtype (-1: unset, as zn_config_args_init
   leaves them). */
static inline ZnConfigArgs zt_args(int world, int stage, long micro, long accum, int dtype) {
    ZnConfigArgs a;
    zn_config_args_init(&a);
    a.world_size = world;
    a.stage = stage;
    a.micro_batch = micro;
    a.grad_accum = accum;
    a.dtype = dtype;
    return a;
}

/* Parses config text into *cfg with args; fails the test with the message
   if it does not parse. */
static inline void zt_config(ZnConfig *cfg, const char *json, const ZnConfigArgs *args) {
    ZnErr err = {0};
    if (zn_config_parse(json, strlen(json), "cfg", args, cfg, &err)) fail_msg("config: %s", err.msg);
}

/* The plan of a bare ZeRO stage 0..3 (zn_config_stage_plan), for tests that
   build a layout or ask what a stage holds without a config. */
static inline const ZnPlan *zt_plan(int stage) {
    static ZnPlan P[4];
    ZnErr err = {0};
    if (stage < 0 || stage > 3 || zn_config_stage_plan(stage, &P[stage], &err)) fail_msg("stage %d: no plan", stage);
    return &P[stage];
}

/* The model of a spec that must parse (malloc'd: a ZnModel is large). */
static inline ZnModel *zt_model(const char *spec) {
    ZnModel *m = malloc(sizeof *m);
    assert_non_null(m);
    ZnErr err = {0};
    if (zn_model_parse(spec, m, &err)) fail_msg("model %s: %s", spec, err.msg);
    return m;
}

/* What an engine rank function starts with: a host device in *dev and an
   engine on it for this rank. */
static inline int zt_host_engine(ZnEngine *E, ZnDevice *dev, const ZnConfig *cfg, const ZnModel *model,
                                 const ZnData *data, ZnComm *comm, const ZnEngineHooks *hooks, ZnErr *err) {
    zn_device_host_init(dev);
    return zn_engine_init(E, cfg, model, data, comm, dev, hooks, err);
}

/* A fresh simulated world of n ranks (zn_sim_world_free it). */
static inline ZnSimWorld *zt_sim_world(int n) {
    ZnErr err = {0};
    ZnSimWorld *w = zn_sim_world_new(n, &err);
    if (!w) fail_msg("a world of %d ranks: %s", n, err.msg);
    return w;
}

/* Runs fn on a fresh simulated world of `world` ranks and frees it; returns
   zn_sim_run's result (its message in *err). alarm_s > 0: a run that hangs
   that long kills the test instead of the suite. */
static inline int zt_sim_run(int world, ZnRankFn fn, void *arg, unsigned alarm_s, ZnErr *err) {
    ZnSimWorld *w = zt_sim_world(world);
    if (alarm_s) alarm(alarm_s);
    int rc = zn_sim_run(w, fn, arg, err);
    if (alarm_s) alarm(0);
    zn_sim_world_free(w);
    return rc;
}

/* What every rank of an engine test shares: the config, the model and the
   data its engine is built from. */
typedef struct {
    ZnConfig cfg;
    ZnModel model;
    ZnData data;
} ZtRig;

/* What one rank does with its engine (E, built and freed by zt_engines_run). */
typedef int (*ZtEngineFn)(ZnEngine *E, int rank, void *arg, ZnErr *err);

typedef struct {
    const ZtRig *rig;
    ZtEngineFn fn;
    void *arg;
} ZtEngines_;

static inline int zt_engines_rank_(int rank, ZnComm *comm, void *p, ZnErr *err) {
    const ZtEngines_ *x = p;
    ZnDevice dev;
    ZnEngine E;
    int rc = zt_host_engine(&E, &dev, &x->rig->cfg, &x->rig->model, &x->rig->data, comm, NULL, err);
    if (rc) return rc;
    rc = x->fn(&E, rank, x->arg, err);
    zn_engine_free(&E);
    return rc;
}

/* Runs fn(E, rank, arg, err) on each rank of a fresh simulated world of
   `world` ranks, E that rank's engine from rig on a host device of its own
   (no hooks), freed after; returns zn_sim_run's result (its message in *err). */
static inline int zt_engines_run(int world, const ZtRig *rig, ZtEngineFn fn, void *arg, ZnErr *err) {
    ZtEngines_ x = {rig, fn, arg};
    return zt_sim_run(world, zt_engines_rank_, &x, 0, err);
}

/* A checkpoint folder every rank's engine loads, and where rank 0 puts what
   it gathers after: the master weights and both Adam moments (the model's
   numel floats each, the caller's). */
typedef struct {
    const char *dir;
    float *m, *a, *s;
} ZtLoad;

/* zt_engines_run's fn for a ZtLoad (arg): load, gather, rank 0 copies out */
static inline int zt_load_gather(ZnEngine *E, int rank, void *arg, ZnErr *err) {
    const ZtLoad *l = arg;
    size_t bytes = (size_t)zn_model_numel(E->model) * sizeof(float);
    float *m = malloc(bytes), *a = malloc(bytes), *s = malloc(bytes);
    /* no cmocka assert here: this runs on a rank's thread */
    int rc = m && a && s ? zn_ckpt_load(E, l->dir, NULL, 0, err) : zn_err(err, ZN_E_NOMEM, "out of memory");
    if (!rc) rc = zn_engine_gather_params(E, m, err);
    if (!rc) rc = zn_engine_gather_moments(E, a, s, err);
    if (!rc && rank == 0) {
        memcpy(l->m, m, bytes);
        memcpy(l->a, a, bytes);
        memcpy(l->s, s, bytes);
    }
    free(m);
    free(a);
    free(s);
    return rc;
}

/* The flags of `zinc train --model model --steps steps --world-size world
   --stage stage` (stage -1: not given). */
static inline ZnTrainFlags zt_train_flags(const char *model, long steps, int world, int stage) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = model;
    f.steps = steps;
    f.args.world_size = world;
    f.args.stage = stage;
    return f;
}

/* zinc train's options from flags f and config text cfg; fails the test
   with the message if they do not resolve. */
static inline ZnRunOpts zt_resolve(const ZnTrainFlags *f, const char *cfg) {
    ZnRunOpts o;
    ZnErr err = {0};
    if (zn_train_resolve(f, cfg, &o, &err)) fail_msg("resolve %s: %s", f->model_spec ? f->model_spec : "", err.msg);
    return o;
}

/* zinc train with flags f (config text cfg): resolve, run, free; returns
   zn_run's result (its message in *err). */
static inline int zt_train(const ZnTrainFlags *f, const char *cfg, ZnErr *err) {
    ZnRunOpts o;
    int rc = zn_train_resolve(f, cfg, &o, err);
    if (rc) return rc;
    ZnRunResult res;
    rc = zn_run(&o, &res, err);
    if (!rc) zn_run_result_free(&res);
    zn_run_opts_free(&o);
    return rc;
}

/* Runs a CLI command function (zn_cmd_ckpt, zn_cmd_plot, ...) on argv with
   stdout and stderr captured into *out and *errs (malloc'd, NUL-ended);
   returns its exit status. */
static inline int zt_capture(int (*cmd)(int, char **), int argc, const char *const *argv, char **out, char **errs) {
    fflush(stdout);
    fflush(stderr);
    FILE *fo = tmpfile(), *fe = tmpfile();
    assert_non_null(fo);
    assert_non_null(fe);
    int so = dup(1), se = dup(2);
    assert_true(so >= 0 && se >= 0);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    int rc = cmd(argc, (char **)argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    *out = zt_slurp(fo, NULL);
    *errs = zt_slurp(fe, NULL);
    return rc;
}

/* 1 under valgrind, the sanitizers and coverage (ZN_LIGHT_TESTS): a test
   with a sweep then takes a fraction of its cases, the same code paths. */
static inline int zt_light(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(ZN_LIGHT_TESTS)
    return 1;
#else
    return getenv("ZINC_UNDER_VALGRIND") != NULL;
#endif
}

/* The process's peak resident memory so far, in KiB. */
static inline long zt_maxrss_kb(void) {
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* ZT_FILTER=test_name (a cmocka glob) runs a subset of a test binary, e.g.
   under DRD: main calls this before cmocka_run_group_tests. */
static inline void zt_filter_from_env(void) {
    const char *f = getenv("ZT_FILTER");
    if (f) cmocka_set_test_filter(f);
}

/* A test binary's main: runs the listed cmocka tests (ZT_FILTER honoured):
 *   ZT_MAIN(cmocka_unit_test(test_a), cmocka_unit_test(test_b))
 * ZT_MAIN_TMPDIR: the same with the binary's temporary directory made
 * before the first test and removed after the last (zt_tmpdir, zt_path);
 * ZT_MAIN_GROUP: with the group setup and teardown given. */
#define ZT_MAIN_GROUP(setup, teardown, ...)                          \
    int main(void) {                                                 \
        const struct CMUnitTest zt_tests[] = {__VA_ARGS__};          \
        zt_filter_from_env();                                        \
        return cmocka_run_group_tests(zt_tests, setup, teardown);    \
    }
#define ZT_MAIN(...) ZT_MAIN_GROUP(NULL, NULL, __VA_ARGS__)
#define ZT_MAIN_TMPDIR(...) ZT_MAIN_GROUP(zt_tmpdir_setup, zt_tmpdir_teardown, __VA_ARGS__)

/* A test function that takes nothing from cmocka's state (most do not):
 *     ZT_TEST(test_defaults) { ... }
 * listed as cmocka_unit_test(test_defaults) like any other. */
#define ZT_TEST(name) static void name(void **zt_state_ __attribute__((unused)))
/* One test function serving several cases, each a test of its own name:
 * ZT_TEST_WITH("test_f16_walk", test_walk, &FMT_F16) runs test_walk with
 * *state = &FMT_F16 under the name test_f16_walk. */
#define ZT_TEST_WITH(name, fn, arg) {name, fn, NULL, NULL, (void *)(arg)}

#define assert_str_contains(hay, needle)                                        \
    do {                                                                        \
        if (!strstr((hay), (needle)))                                           \
            fail_msg("expected '%s' to contain '%s'", (hay), (needle));         \
    } while (0)
#endif
