/* cli_check.c: the checkers. `zinc compare` (the seed's compare_loss: a
 * stage-K run against a stage-0 baseline) and `zinc stepper` (the seed's
 * ModelStepper: two engines with their own configs on the same batches).
 * Both record every step's full gradient and parameters (gathered from the
 * shards) and compare them on rank 0 (spec Z-REP-001, Z-REP-006). */
#include "app/cli.h"
#include "app/compare_diff.h"
#include "core/layout.h"
#include "engine/engine.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_compare_usage(FILE *f) {
    fprintf(f, "usage: zinc compare --stage K [--rtol R] [--atol A] [--offload none|cpu|nvme] [zinc train's flags]\n"
               "  trains stage K and a stage-0 baseline on the same batches in lockstep and compares the loss,\n"
               "  gradients and parameters every step (DeepSpeed's compare_loss): TEST PASSED / TEST FAILED\n");
    zn_compare_peer_usage(f);
}

static void print_stepper_usage(FILE *f) {
    fprintf(f, "usage: zinc stepper --base BASE.json --test TEST.json [--model SPEC] [--batches N]\n"
               "                    [--world-size N | --base-world-size N --test-world-size M]\n"
               "                    [--track params,grads,loss] [--param-tol X] [--grad-tol X] [--loss-tol X]\n"
               "                    [--test-every N] [--status-every N] [--fail]\n"
               "  steps two engines with their own configs on the same batches (ModelStepper):\n"
               "  STATUS lines, DIVERGED PARAMETER lines, TEST PASSED / TEST FAILED\n");
    zn_stepper_peer_usage(f);
}

static int usage_error(const ZnErr *err) {
    zn_err_print(stderr, "", err);
    return 2;
}

static int parse_num(const char *flag, const char *s, double *out, ZnErr *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0)
        return zn_err(err, ZN_E_USAGE, "%s: expected a non-negative number, got '%s'", flag, s);
    *out = v;
    return 0;
}

static int layout_of(const ZnRunOpts *o, ZnLayout *L, ZnErr *err) {
    return zn_config_layout(&o->cfg, &o->model, o->world.size, L, err);
}

/* ---------------------------------------------------------------------- */
/* zinc compare */

typedef struct {
    int found;
    long step;
    const char *what;     /* "loss", "gradient", "parameter" */
    int param;
    long elem;
    double base, test;
} Divergence;

int zn_cmd_compare(int argc, char **argv) {
    for (int i = 0; i < argc; i++)   /* DeepSpeed itself as the baseline (cli_peer.c) */
        if (!strcmp(argv[i], "--peer")) return zn_cmd_compare_peer(argc, argv);
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    ZnErr err = {0};
    double rtol = -1, atol = -1;
    long fault_step = 0, fault_index = -1;
    int fault_rank = -1;
    double fault_delta = 1e-3;
    ZnOffloadDevice offload = ZN_OFFLOAD_NONE;   /* --offload: the tested engine's (Z-OFF-014) */
    for (int i = 0; i < argc; i++) {
        int c = zn_train_flag(&f, argc, argv, &i, &err);
        if (c < 0) return usage_error(&err);
        if (c > 0) continue;
        const char *a = argv[i];
        if (i + 1 >= argc) { zn_err(&err, ZN_E_USAGE, "unknown flag '%s' for 'zinc compare'", a); return usage_error(&err); }
        const char *v = argv[++i];
        if (!strcmp(a, "--rtol")) { if (parse_num(a, v, &rtol, &err)) return usage_error(&err); }
        else if (!strcmp(a, "--atol")) { if (parse_num(a, v, &atol, &err)) return usage_error(&err); }
        else if (!strcmp(a, "--offload") || !strcmp(a, "--offload_device")) {   /* the seed's spelling too */
            if (!strcmp(v, "none")) offload = ZN_OFFLOAD_NONE;
            else if (!strcmp(v, "cpu")) offload = ZN_OFFLOAD_CPU;
            else if (!strcmp(v, "nvme")) offload = ZN_OFFLOAD_NVME;
            else {
                zn_err(&err, ZN_E_USAGE, "%s: expected none, cpu or nvme, got '%s'", a, v);
                return usage_error(&err);
            }
        } else if (!strcmp(a, "--fault")) {   /* test-only: STEP:RANK:INDEX[:DELTA] */
            if (sscanf(v, "%ld:%d:%ld:%lf", &fault_step, &fault_rank, &fault_index, &fault_delta) < 3 ||
                fault_step < 1 || fault_rank < 0 || fault_index < 0) {
                zn_err(&err, ZN_E_USAGE, "--fault: expected STEP:RANK:INDEX[:DELTA], got '%s'", v);
                return usage_error(&err);
            }
        } else {
            zn_err(&err, ZN_E_USAGE, "unknown flag '%s' for 'zinc compare'", a);
            return usage_error(&err);
        }
    }
    if (f.args.stage == -1) { zn_err(&err, ZN_E_USAGE, "zinc compare needs --stage K"); return usage_error(&err); }
    if (f.steps < 0) f.steps = 10;
    ZnRunOpts test, base;
    if (zn_train_resolve(&f, NULL, &test, &err)) return usage_error(&err);
    ZnTrainFlags fb = f;
    fb.args.stage = 0;
    if (zn_train_resolve(&fb, NULL, &base, &err)) return usage_error(&err);
    /* zinc's stages agree bit for bit in every dtype without accumulation,
       so the default tolerance is zero (Z-REP-001) */
    if (rtol < 0) rtol = 0;
    if (atol < 0) atol = 0;
    if (fault_rank >= test.world.size) {
        zn_err(&err, ZN_E_USAGE, "--fault: rank %d is not below the world size %d", fault_rank, test.world.size);
        return usage_error(&err);
    }
    if (fault_rank >= 0) {   /* the index must fall in the rank's master partition */
        ZnLayout L;
        if (zn_config_layout(&test.cfg, &test.model, test.world.size, &L, &err)) return usage_error(&err);
        long n = zn_layout_master_numel(&L, &test.cfg.plan);
        zn_layout_free(&L);
        if (fault_index >= n) {
            zn_err(&err, ZN_E_USAGE, "--fault: index %ld is not in rank %d's master partition of %ld elements (stage %d)",
                   fault_index, fault_rank, n, test.cfg.zero.stage);
            return usage_error(&err);
        }
    }
    /* --offload: the tested engine offloads its optimizer, and at stage 3 its
       parameters, to the device named; nvme swaps under a fresh directory */
    char swapdir[64] = "";
    if (offload != ZN_OFFLOAD_NONE) {
        /* the plan says what a stage partitions (Z-BUILD-003) */
        if (test.cfg.plan.optim == ZN_HOLD_FULL) {
            zn_err(&err, ZN_E_USAGE, "--offload needs --stage 1, 2 or 3 (stage 0 has no optimizer partition to offload)");
            return usage_error(&err);
        }
        ZnOffloadConfig *oo = &test.cfg.zero.offload_optimizer, *op = &test.cfg.zero.offload_param;
        oo->device = op->device = offload;
        oo->present = op->present = 1;
        if (offload == ZN_OFFLOAD_NVME) {
            snprintf(swapdir, sizeof swapdir, "/tmp/zinc_compare_XXXXXX");
            if (!mkdtemp(swapdir)) {
                zn_err(&err, ZN_E_IO, "--offload nvme: cannot create a swap directory under /tmp: %s", strerror(errno));
                return usage_error(&err);
            }
            snprintf(oo->nvme_path, sizeof oo->nvme_path, "%s", swapdir);
            snprintf(op->nvme_path, sizeof op->nvme_path, "%s", swapdir);
        }
        if (zn_config_plan(&test.cfg, &err)) return usage_error(&err);   /* the plan with the offload */
    }
    test.record = base.record = 1;
    test.print_every = base.print_every = 0;
    test.hooks.fault_step = fault_step;
    test.hooks.fault_rank = fault_rank;
    test.hooks.fault_index = fault_index;
    test.hooks.fault_delta = (float)fault_delta;
    printf("zinc compare: stage %d%s%s against stage 0, %s, world size %d, %ld steps, rtol %g, atol %g\n",
           test.cfg.zero.stage, offload ? " with offload " : "",
           offload == ZN_OFFLOAD_CPU ? "cpu" : offload == ZN_OFFLOAD_NVME ? "nvme" : "",
           zn_dtype_name(test.cfg.model_dtype), test.world.size, test.steps, rtol, atol);
    zn_run_opts_free(&test);   /* checkers save no checkpoints: the config text is not needed */
    zn_run_opts_free(&base);
    ZnRunResult rb, rt;
    if (zn_run(&base, &rb, &err)) { zn_err_print(stderr, "baseline: ", &err); return 1; }
    int trc = zn_run(&test, &rt, &err);
    if (swapdir[0]) rmdir(swapdir);   /* the run removed its zinc_swap/ */
    if (trc) {
        zn_run_result_free(&rb);
        char what[32];
        snprintf(what, sizeof what, "stage %d: ", test.cfg.zero.stage);
        zn_err_print(stderr, what, &err);
        return 1;
    }
    ZnLayout L;
    if (layout_of(&test, &L, &err)) { zn_run_result_free(&rb); zn_run_result_free(&rt); return usage_error(&err); }
    const long n = rb.numel;
    Divergence dv = {0};
    for (long t = 0; t < rb.steps; t++) {
        ZnDiff dl = {0, 0}, dg = {0, 0}, dp = {0, 0};
        zn_diff_update(&dl, rb.loss[t], rt.loss[t]);
        if (!dv.found && zn_diff_beyond(rb.loss[t], rt.loss[t], rtol, atol))
            dv = (Divergence){1, t + 1, "loss", -1, -1, rb.loss[t], rt.loss[t]};
        const float *gb = rb.rec_grads + t * n, *gt = rt.rec_grads + t * n;
        const float *pb = rb.rec_params + t * n, *pt = rt.rec_params + t * n;
        for (int pass = 0; pass < 2; pass++) {
            const float *b = pass ? pb : gb, *x = pass ? pt : gt;
            long off = 0;
            for (int p = 0; p < L.nparams; p++) {
                for (long j = 0; j < L.params[p].numel; j++) {
                    zn_diff_update(pass ? &dp : &dg, b[off + j], x[off + j]);
                    if (!dv.found && zn_diff_beyond(b[off + j], x[off + j], rtol, atol))
                        dv = (Divergence){1, t + 1, pass ? "parameter" : "gradient", p, j, b[off + j], x[off + j]};
                }
                off += L.params[p].numel;
            }
        }
        zn_diff_print_step(t + 1, rb.loss[t], rt.loss[t], &dl, &dg, &dp);
    }
    int rc = 0;
    if (!dv.found) {
        printf("TEST PASSED\n");
    } else if (dv.param < 0) {
        printf("TEST FAILED: step %ld, loss: baseline %.9g, stage %d %.9g (|diff| %.3e > atol %g + rtol %g * |baseline|)\n",
               dv.step, dv.base, test.cfg.zero.stage, dv.test, fabs(dv.test - dv.base), atol, rtol);
        rc = 1;
    } else {
        printf("TEST FAILED: step %ld, %s '%s' element %ld (rank %d): baseline %.9g, stage %d %.9g "
               "(|diff| %.3e > atol %g + rtol %g * |baseline|)\n",
               dv.step, dv.what, L.params[dv.param].name, dv.elem, zn_layout_owner(&L, dv.param, dv.elem), dv.base,
               test.cfg.zero.stage, dv.test, fabs(dv.test - dv.base), atol, rtol);
        rc = 1;
    }
    zn_layout_free(&L);
    zn_run_result_free(&rb);
    zn_run_result_free(&rt);
    return rc;
}

const ZnCommand zn_compare_command = {"compare", zn_cmd_compare, print_compare_usage};

/* ---------------------------------------------------------------------- */
/* zinc stepper: ModelStepper's output format */

typedef struct {
    const char *base_path, *test_path, *model;
    long batches, test_every, status_every;
    int track_params, track_grads, track_loss, fail;
    double param_tol, grad_tol, loss_tol;
    int world, base_world, test_world;
} StepperOpts;

static int stepper_flags(StepperOpts *s, int argc, char **argv, ZnErr *err) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--fail")) { s->fail = 1; continue; }
        if (i + 1 >= argc) return zn_err(err, ZN_E_USAGE, "%s needs a value (or is unknown to 'zinc stepper')", a);
        const char *v = argv[++i];
        double d;
        if (!strcmp(a, "--base")) s->base_path = v;
        else if (!strcmp(a, "--test")) s->test_path = v;
        else if (!strcmp(a, "--model")) s->model = v;
        else if (!strcmp(a, "--track")) {
            s->track_params = strstr(v, "params") != NULL;
            s->track_grads = strstr(v, "grads") != NULL;
            s->track_loss = strstr(v, "loss") != NULL;
            if (!s->track_params && !s->track_grads && !s->track_loss)
                return zn_err(err, ZN_E_USAGE, "--track: expected a list of params,grads,loss, got '%s'", v);
        } else if (!strcmp(a, "--param-tol") || !strcmp(a, "--grad-tol") || !strcmp(a, "--loss-tol")) {
            if (parse_num(a, v, &d, err)) return err->code;
            if (a[2] == 'p') s->param_tol = d; else if (a[2] == 'g') s->grad_tol = d; else s->loss_tol = d;
        } else if (!strcmp(a, "--batches") || !strcmp(a, "--test-every") || !strcmp(a, "--status-every") ||
                   !strcmp(a, "--world-size") || !strcmp(a, "--base-world-size") || !strcmp(a, "--test-world-size")) {
            char *end;
            errno = 0;
            long x = strtol(v, &end, 10);
            if (errno || *end || end == v || x < 1 || x > 1000000)
                return zn_err(err, ZN_E_USAGE, "%s: expected a positive integer, got '%s'", a, v);
            if (!strcmp(a, "--batches")) s->batches = x;
            else if (!strcmp(a, "--test-every")) s->test_every = x;
            else if (!strcmp(a, "--status-every")) s->status_every = x;
            else if (!strcmp(a, "--world-size")) s->world = (int)x;
            else if (!strcmp(a, "--base-world-size")) s->base_world = (int)x;
            else s->test_world = (int)x;
        } else return zn_err(err, ZN_E_USAGE, "unknown flag '%s' for 'zinc stepper'", a);
    }
    if (!s->base_path || !s->test_path) return zn_err(err, ZN_E_USAGE, "zinc stepper needs --base A.json and --test B.json");
    return 0;
}

static int stepper_resolve(const StepperOpts *s, const char *path, int world, ZnRunOpts *o, ZnErr *err) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.config_path = path;
    f.model_spec = s->model;
    f.steps = s->batches;
    f.args.world_size = world;
    int rc = zn_train_resolve(&f, NULL, o, err);
    if (rc) return rc;
    zn_run_opts_free(o);   /* no checkpoints here: the config text is not needed */
    o->record = 1;
    o->print_every = 0;
    return 0;
}

static const char *tf(int b) { return b ? "True" : "False"; }

/* the largest |test - base| over one parameter's elements, relative to the
 * largest |base| of that parameter */
static void param_diff(const float *b, const float *t, long n, double *abs_d, double *rel_d) {
    double a = 0, m = 0;
    for (long j = 0; j < n; j++) {
        double d = fabs((double)t[j] - b[j]);
        if (!(d <= a)) a = d;
        if (fabs(b[j]) > m) m = fabs(b[j]);
    }
    *abs_d = a;
    *rel_d = m > 0 ? a / m : (a > 0 ? INFINITY : 0);
}

int zn_cmd_stepper(int argc, char **argv) {
    for (int i = 0; i < argc; i++)   /* DeepSpeed itself as the base engine (cli_peer.c) */
        if (!strcmp(argv[i], "--peer")) return zn_cmd_stepper_peer(argc, argv);
    StepperOpts s = {NULL, NULL, NULL, 50, 1, 5, 1, 1, 1, 0, 1e-5, 1e-5, 1e-5, 1, 0, 0};
    ZnErr err = {0};
    if (stepper_flags(&s, argc, argv, &err)) return usage_error(&err);
    ZnRunOpts base, test;
    if (stepper_resolve(&s, s.base_path, s.base_world ? s.base_world : s.world, &base, &err)) return usage_error(&err);
    if (stepper_resolve(&s, s.test_path, s.test_world ? s.test_world : s.world, &test, &err)) return usage_error(&err);
    if (base.cfg.train_batch_size != test.cfg.train_batch_size) {
        zn_err(&err, ZN_E_USAGE, "base and test see different batches: train_batch_size %ld vs %ld",
               base.cfg.train_batch_size, test.cfg.train_batch_size);
        return usage_error(&err);
    }
    if (s.fail) {   /* ModelStepper's --fail: the test engine does not learn */
        test.cfg.lr = 0.0;
        test.cfg.sched.type = ZN_SCHED_NONE;
    }
    printf("--- Model Stepper Configuration ---\n");
    printf("batches=%ld\ntest_every=%ld\nstatus_every=%ld\n", s.batches, s.test_every, s.status_every);
    printf("track_params=%s\nparam_tol=%e\n", tf(s.track_params), s.param_tol);
    printf("track_loss=%s\nloss_tol=%e\n", tf(s.track_loss), s.loss_tol);
    printf("track_grads=%s\ngrad_tol=%e\n\n", tf(s.track_grads), s.grad_tol);
    ZnRunResult rb, rt;
    if (zn_run(&base, &rb, &err)) { zn_err_print(stderr, "base: ", &err); return 1; }
    if (zn_run(&test, &rt, &err)) {
        zn_run_result_free(&rb);
        zn_err_print(stderr, "test: ", &err);
        return 1;
    }
    ZnLayout L;
    if (layout_of(&test, &L, &err)) { zn_run_result_free(&rb); zn_run_result_free(&rt); return usage_error(&err); }
    const long n = rb.numel;
    int failed = 0;
    for (long b = 0; b < s.batches && !failed; b++) {
        double la = fabs(rt.loss[b] - rb.loss[b]);
        double lr = rb.loss[b] != 0 ? la / fabs(rb.loss[b]) : 0;
        if (b % s.test_every == 0) {
            for (int kind = 0; kind < 2; kind++) {   /* parameters, then gradients */
                if (kind == 0 ? !s.track_params : !s.track_grads) continue;
                const float *vb = (kind == 0 ? rb.rec_params : rb.rec_grads) + b * n;
                const float *vt = (kind == 0 ? rt.rec_params : rt.rec_grads) + b * n;
                double tol = kind == 0 ? s.param_tol : s.grad_tol;
                long off = 0;
                for (int p = 0; p < L.nparams; p++) {
                    double ad, rd;
                    param_diff(vb + off, vt + off, L.params[p].numel, &ad, &rd);
                    if (!(ad <= tol)) {
                        /* one line per rank holding part of the parameter, as
                           each DeepSpeed rank reports its own view */
                        int lo = zn_layout_owner(&L, p, 0), hi = zn_layout_owner(&L, p, L.params[p].numel - 1);
                        if (L.shard == ZN_SHARD_NONE) { lo = 0; hi = test.world.size - 1; }
                        for (int r = lo; r <= hi; r++)
                            printf("DIVERGED %s rank=%d batch=%ld param_idx=%d abs_diff=%.5e rel_diff=%.5e tol=%.5e\n",
                                   kind == 0 ? "PARAMETER" : "GRADIENT", r, b, p, ad, rd, tol);
                        failed = 1;
                    }
                    off += L.params[p].numel;
                }
            }
            if (s.track_loss && !(la <= s.loss_tol)) {
                printf("DIVERGED LOSS batch=%ld base_loss=%.6g test_loss=%.6g abs_diff=%.5e rel_diff=%.5e tol=%.5e\n",
                       b, rb.loss[b], rt.loss[b], la, lr, s.loss_tol);
                failed = 1;
            }
        }
        if (failed || b % s.status_every == 0 || b == s.batches - 1)
            printf("STATUS batch=%ld / %ld base_loss=%.6g test_loss=%.6g abs_diff=%.5e rel_diff=%.5e\n", b,
                   s.batches, rb.loss[b], rt.loss[b], la, lr);
    }
    printf(failed ? "TEST FAILED\n" : "TEST PASSED\n");
    zn_layout_free(&L);
    zn_run_result_free(&rb);
    zn_run_result_free(&rt);
    return failed ? 1 : 0;
}

const ZnCommand zn_stepper_command = {"stepper", zn_cmd_stepper, print_stepper_usage};
