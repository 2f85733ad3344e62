/* test_reports.c: the memory report, the time breakdown and the
 * communication report print the numbers the accounting holds. */
#include "testutil.h"
#include <unistd.h>
#include "app/run.h"
#include "app/cli.h"

/* runs with stdout redirected to a temp file; returns its contents */
static char *run_captured(ZnRunOpts *o, ZnRunResult *res) {
    char path[] = "/tmp/zinc-report-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    ZnErr err;
    int rc = zn_run(o, res, &err);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    if (rc) fail_msg("run failed: %s", err.msg);
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = calloc((size_t)n + 1, 1);
    assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
    close(fd);
    unlink(path);
    return buf;
}

static void resolve(const char *cfg, int world, int stage, long steps, ZnRunOpts *o) {
    ZnTrainFlags f = zt_train_flags("mlp:12,16,6", steps, world, stage);
    ZnErr err;
    if (zn_train_resolve(&f, cfg, o, &err)) fail_msg("%s", err.msg);
    zn_run_opts_free(o);   /* only the recorded config text */
    o->out = NULL;
    o->print_every = 1;
}

/* spec: Z-REP-002 the memory report prints DeepSpeed's see_memory_usage
 * points, and its per-category bytes after the step are the accounting's
 * (the numbers the Z-MEM-010 formula checks) */
static void test_memory_report(void **st) {
    (void)st;
    for (int stage = 0; stage <= 3; stage++) {
        ZnRunOpts o;
        resolve("{\"train_micro_batch_size_per_gpu\": 4, \"memory_breakdown\": true}", 2, stage, 2, &o);
        assert_true(o.memory_report);
        ZnRunResult res;
        char *out = run_captured(&o, &res);
        static const char *points[] = {"init", "before forward", "after forward", "before backward",
                                       "after backward", "before step", "after step"};
        for (size_t i = 0; i < sizeof points / sizeof *points; i++) {
            char want[96];
            snprintf(want, sizeof want, "[zinc] [rank 0] see_memory_usage: Engine %s\n", points[i]);
            assert_str_contains(out, want);
        }
        assert_str_contains(out, "[zinc] [rank 0] MA ");
        assert_str_contains(out, " GB         Max_MA ");
        /* the last "after step" block holds the state after training */
        char *last = NULL;
        for (char *p = out; (p = strstr(p, "see_memory_usage: Engine after step")); p++) last = p;
        assert_non_null(last);
        char *line = strstr(last, "bytes by category:");
        assert_non_null(line);
        for (int c = 0; c < ZN_MEM_NCAT; c++) {
            char key[64];
            snprintf(key, sizeof key, " %s=", zn_mem_cat_name((ZnMemCat)c));
            char *k = strstr(line, key);
            assert_non_null(k);
            long v = atol(k + strlen(key));
            if (v != res.mem_end[0].cur[c])
                fail_msg("stage %d: report says %s=%ld, accounting %ld", stage, zn_mem_cat_name((ZnMemCat)c), v,
                         res.mem_end[0].cur[c]);
        }
        free(out);
        zn_run_result_free(&res);
    }
}

/* spec: Z-REP-003 wall_clock_breakdown prints DeepSpeed's time line for every rank */
static void test_time_breakdown(void **st) {
    (void)st;
    ZnRunOpts o;
    resolve("{\"train_micro_batch_size_per_gpu\": 4, \"wall_clock_breakdown\": true}", 3, 2, 2, &o);
    ZnRunResult res;
    char *out = run_captured(&o, &res);
    for (int r = 0; r < 3; r++) {
        char want[64];
        snprintf(want, sizeof want, "[Rank %d] time (ms) | fwd_microstep: ", r);
        assert_str_contains(out, want);
    }
    assert_str_contains(out, " | bwd_microstep: ");
    assert_str_contains(out, " | bwd_inner_microstep: ");
    assert_str_contains(out, " | bwd_allreduce_microstep: ");
    assert_str_contains(out, " | step_microstep: ");
    free(out);
    zn_run_result_free(&res);
}

/* spec: Z-REP-005 the communication report's per-step bytes equal the ZeRO
 * paper's volume it prints beside them */
static void test_comm_report(void **st) {
    (void)st;
    for (int stage = 1; stage <= 3; stage++) {
        ZnRunOpts o;
        resolve("{\"train_micro_batch_size_per_gpu\": 4, \"zero_optimization\": "
                "{\"stage3_param_persistence_threshold\": 0, \"stage3_max_reuse_distance\": 0}}", 4, stage, 2, &o);
        o.comm_report = 1;
        ZnRunResult res;
        char *out = run_captured(&o, &res);
        char *p = strstr(out, "[zinc] comm run rank 0: ");
        assert_non_null(p);
        char *tot = strstr(p, "total ");
        char *paper = strstr(p, "/N = ");
        assert_non_null(tot);
        assert_non_null(paper);
        long a = atol(tot + 6), b = atol(paper + 5);
        if (a != b) fail_msg("stage %d: total %ld B/step, paper %ld B/step", stage, a, b);
        free(out);
        zn_run_result_free(&res);
    }
}

ZT_MAIN(
    cmocka_unit_test(test_memory_report),
    cmocka_unit_test(test_time_breakdown),
    cmocka_unit_test(test_comm_report))
