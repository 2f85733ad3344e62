/* cli_peer.c: `zinc stepper --peer deepspeed` (spec Z-DSP-010) and `zinc
 * compare --peer deepspeed` (Z-DSP-012): DeepSpeed itself as the base engine
 * of ModelStepper, or compare's baseline. A DeepSpeed user holds zinc to
 * their own ds_config: zinc exports its step-0 weights (Hugging Face
 * format), DeepSpeed trains them under torchrun on its CPU accelerator from
 * the same config file on the same windows (tests/peer_ds_worker.py, which
 * records every step's fp32 masters), zinc trains the same run, and the two
 * are compared step by step in seed 004's format: STATUS lines, DIVERGED
 * PARAMETER / LOSS lines, TEST PASSED / TEST FAILED, with the bounds used in
 * the header. Python is needed by this command only. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
#include <cjson/cJSON.h>
#include "app/cli.h"
#include "app/compare_diff.h"
#include "app/run.h"
#include "core/fileio.h"
#include "io/safetensors.h"

extern char **environ;

typedef struct {
    const char *python, *worker;
    long status_every, test_every;
    double param_tol, loss_tol;   /* stepper's bounds */
    double rtol, atol;            /* compare's */
    int record_grads;             /* DeepSpeed records every step's gradients too (compare) */
} PeerOpts;

/* Runs argv with stdout and stderr into log (appended); returns the exit
 * status, or -1 with errno set when it could not start. */
static int spawn_wait(char *const argv[], const char *log, char *const envp[]) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp ? envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        errno = rc;
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The last non-empty line of a file, for an error message. */
static void last_line(const char *path, char *buf, size_t n) {
    char *t = NULL;
    size_t len = 0;
    ZnErr e;
    buf[0] = 0;
    if (zn_read_file(path, (size_t)64 << 20, &t, &len, &e)) return;
    while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' ')) t[--len] = 0;
    char *nl = strrchr(t, '\n');
    snprintf(buf, n, "%s", nl ? nl + 1 : t);
    free(t);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

/* This zinc binary's path. */
static void self_exe(char *buf, size_t n) {
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    buf[k > 0 ? k : 0] = 0;
}

/* Next to the zinc binary: build/zinc finds build/peer-venv and tests/. */
static void exe_dir(char *buf, size_t n) {
    self_exe(buf, n);
    char *s = strrchr(buf, '/');
    if (s) *s = 0;
    else snprintf(buf, n, ".");
}

/* The worker's path into out: ZINC_PEER_WORKER, else next to zinc; a usage
 * error where there is none to read. */
static int find_worker(char *out, size_t n, const char *dir, ZnErr *err) {
    const char *env = getenv("ZINC_PEER_WORKER");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        if (access(out, R_OK) == 0) return 0;
        return zn_err(err, ZN_E_USAGE, "ZINC_PEER_WORKER: cannot read '%s': %s", env, strerror(errno));
    }
    const char *tries[] = {"%s/../tests/peer_ds_worker.py", "%s/../share/zinc/peer_ds_worker.py"};
    for (size_t i = 0; i < sizeof tries / sizeof *tries; i++) {
        snprintf(out, n, tries[i], dir);
        if (access(out, R_OK) == 0) return 0;
    }
    return zn_err(err, ZN_E_USAGE, "peer_ds_worker.py not found next to zinc (set ZINC_PEER_WORKER)");
}

/* The job file peer_ds_worker.py reads. */
static int write_job(const char *path, const PeerOpts *p, const ZnTrainFlags *f, const ZnRunOpts *o, const char *tmp, ZnErr *err) {
    cJSON *jobs = cJSON_CreateArray(), *j = cJSON_CreateObject();
    char buf[PATH_MAX + 64];
    cJSON_AddItemToArray(jobs, j);
    cJSON_AddStringToObject(j, "name", "stepper");
    cJSON_AddStringToObject(j, "config", realpath(f->config_path, buf) ? buf : f->config_path);
    snprintf(buf, sizeof buf, "%s/hf0", tmp);
    cJSON_AddStringToObject(j, "hf0", buf);
    cJSON_AddStringToObject(j, "data", f->data_spec + 5);   /* text:FILE */
    cJSON_AddNumberToObject(j, "seed", (double)o->cfg.seed);
    cJSON_AddNumberToObject(j, "T", o->model.seq_len);
    cJSON_AddNumberToObject(j, "steps", (double)o->steps);
    cJSON_AddNumberToObject(j, "threads", 1);
    snprintf(buf, sizeof buf, "%s/ds", tmp);
    cJSON_AddStringToObject(j, "out", buf);
    cJSON_AddBoolToObject(j, "record", 1);
    cJSON_AddBoolToObject(j, "record_grads", p->record_grads);
    char *text = cJSON_Print(jobs);
    cJSON_Delete(jobs);
    if (!text) return zn_nomem(err);
    int rc = zn_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

/* The torchrun beside the python (its venv's bin/). */
static void torchrun_path(const char *python, char *out, size_t n) {
    snprintf(out, n, "%s", python);
    char *s = strrchr(out, '/');
    snprintf(s ? s + 1 : out, n - (size_t)(s ? s + 1 - out : 0), "torchrun");
}

/* DeepSpeed's side: the step-0 export, then torchrun. */
static int run_deepspeed(const PeerOpts *p, const ZnTrainFlags *f, const ZnRunOpts *o, const char *tmp, ZnErr *err) {
    char self[PATH_MAX], log[PATH_MAX + 16], ck[PATH_MAX + 16], tag[PATH_MAX + 32], hf[PATH_MAX + 16];
    char seed[32], T[32], jobs[PATH_MAX + 16], torchrun[2 * PATH_MAX], nproc[32], why[512];
    self_exe(self, sizeof self);
    snprintf(log, sizeof log, "%s/peer.log", tmp);
    snprintf(ck, sizeof ck, "%s/ck", tmp);
    snprintf(tag, sizeof tag, "%s/ck/global_step0", tmp);
    snprintf(hf, sizeof hf, "%s/hf0", tmp);
    snprintf(seed, sizeof seed, "%ld", o->cfg.seed);
    snprintf(T, sizeof T, "%d", o->model.seq_len);
    char *init[] = {self, "train", "--model", (char *)o->model_spec, "--data", (char *)f->data_spec, "--seq-len", T,
                    "--stage", "0", "--world-size", "1", "--seed", seed, "--steps", "0", "--steps-per-print", "0",
                    "--checkpoint-dir", ck, NULL};
    char *exp[] = {self, "ckpt", "consolidate", "--input", tag, "--hf", hf, NULL};
    if (spawn_wait(init, log, NULL) || spawn_wait(exp, log, NULL)) {
        last_line(log, why, sizeof why);
        return zn_err(err, ZN_E_IO, "exporting zinc's step-0 weights failed: %s", why);
    }
    snprintf(jobs, sizeof jobs, "%s/jobs.json", tmp);
    int rc = write_job(jobs, p, f, o, tmp, err);
    if (rc) return rc;
    torchrun_path(p->python, torchrun, sizeof torchrun);
    snprintf(nproc, sizeof nproc, "%d", o->world.size);
    char *ds[] = {torchrun, "--standalone", "--nproc-per-node", nproc, (char *)p->worker, jobs, NULL};
    setenv("DS_ACCELERATOR", "cpu", 1);
    setenv("OMP_NUM_THREADS", "1", 0);
    rc = spawn_wait(ds, log, NULL);
    if (rc < 0)   /* not started: the log's last line is zinc's export, not torchrun's */
        return zn_err(err, ZN_E_IO, "cannot run %s: %s", torchrun, strerror(errno));
    char errf[PATH_MAX + 32];
    snprintf(errf, sizeof errf, "%s/ds/error.txt", tmp);
    if (access(errf, R_OK) == 0) {
        last_line(errf, why, sizeof why);
        return zn_err(err, ZN_E_USAGE, "DeepSpeed cannot run this config: %s", why);
    }
    if (rc) {
        last_line(log, why, sizeof why);
        return zn_err(err, ZN_E_IO, "%s exited %d: %s", torchrun, rc, why);
    }
    return 0;
}

/* DeepSpeed's losses (OUT/losses.json) into loss[steps]. */
static int ds_losses(const char *tmp, long steps, double *loss, ZnErr *err) {
    char path[PATH_MAX + 32], *t = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/ds/losses.json", tmp);
    if (zn_read_file(path, (size_t)16 << 20, &t, &len, err)) return err->code;
    cJSON *j = cJSON_ParseWithLength(t, len);
    free(t);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "loss");
    long i = 0;
    for (const cJSON *e = a ? a->child : NULL; e && i < steps; e = e->next) loss[i++] = e->valuedouble;
    cJSON_Delete(j);
    if (i != steps) return zn_err(err, ZN_E_CORRUPT, "%s: %ld losses, expected %ld", path, i, steps);
    return 0;
}

void zn_stepper_peer_usage(FILE *f) {
    fprintf(f, "       zinc stepper --peer deepspeed --config DS.json --model gpt2...|gpt2-tiny --data text:FILE\n"
               "                    [--seq-len T] [--batches N] [--world-size N] [--python PY]\n"
               "                    [--param-tol X] [--loss-tol X] [--test-every N] [--status-every N]\n"
               "  steps DeepSpeed (the base, on its CPU accelerator under torchrun, from the same config file)\n"
               "  and zinc (the test) on the same weights and windows\n");
}

void zn_compare_peer_usage(FILE *f) {
    fprintf(f, "       zinc compare --peer deepspeed --config DS.json --model gpt2...|gpt2-tiny --data text:FILE\n"
               "                    [--seq-len T] [--steps N] [--world-size N] [--python PY] [--rtol R] [--atol A]\n"
               "  trains DeepSpeed (the baseline, on its CPU accelerator under torchrun) and zinc from the same\n"
               "  config file and compares the loss, gradients and fp32 masters every step\n");
}

/* DeepSpeed's tensor K/NAME (or K/grad/NAME) of n floats into *w. */
static int ds_tensor(ZnStFile *st, const char *rec, const char *name, long n, float **w, ZnErr *err) {
    const ZnStTensor *t = zn_st_find(st, name);
    if (!t || (long)t->numel != n || t->dtype != ZN_F32)
        return zn_err(err, ZN_E_CORRUPT, "%s: no fp32 tensor '%s' of %ld elements", rec, name, n);
    float *nw = realloc(*w, (size_t)n * sizeof **w);
    if (!nw) return zn_nomem(err);
    *w = nw;
    return zn_st_read(st, t, *w, (size_t)n * sizeof **w, err);
}

/* Seed 004's report: STATUS / DIVERGED lines, TEST PASSED / FAILED.
 * Returns 1 when a bound was crossed, 0 when none, -1 on a read error. */
static int stepper_report(const PeerOpts *p, const ZnRunOpts *o, const ZnRunResult *rz, const double *dl, long batches,
                          ZnStFile *st, const char *rec, ZnErr *err) {
    float *w = NULL;
    int failed = 0;
    for (long b = 0; b < batches; b++) {
        const double la = fabs(rz->loss[b] - dl[b]), lr = dl[b] != 0 ? la / fabs(dl[b]) : 0;
        if (b % p->test_every == 0) {
            long off = 0;
            for (int q = 0; q < o->model.nparams; q++) {
                const ZnParamSpec *ps = &o->model.params[q];
                char name[320];
                snprintf(name, sizeof name, "%ld/%s", b, ps->name);
                if (ds_tensor(st, rec, name, ps->numel, &w, err)) { free(w); return -1; }
                const float *z = rz->rec_params + b * rz->numel + off;
                double a = 0, m = 0;
                for (long j = 0; j < ps->numel; j++) {
                    double d = fabs((double)z[j] - w[j]);
                    if (!(d <= a)) a = d;
                    if (fabs(w[j]) > m) m = fabs(w[j]);
                }
                if (!(a <= p->param_tol)) {
                    printf("DIVERGED PARAMETER rank=0 batch=%ld param_idx=%d name=%s abs_diff=%.5e rel_diff=%.5e tol=%.5e\n",
                           b, q, ps->name, a, m > 0 ? a / m : 0, p->param_tol);
                    failed = 1;
                }
                off += ps->numel;
            }
            if (!(la <= p->loss_tol)) {
                printf("DIVERGED LOSS batch=%ld base_loss=%.6g test_loss=%.6g abs_diff=%.5e rel_diff=%.5e tol=%.5e\n",
                       b, dl[b], rz->loss[b], la, lr, p->loss_tol);
                failed = 1;
            }
        }
        if (failed || b % p->status_every == 0 || b == batches - 1)
            printf("STATUS batch=%ld / %ld base_loss=%.6g test_loss=%.6g abs_diff=%.5e rel_diff=%.5e\n", b, batches,
                   dl[b], rz->loss[b], la, lr);
        if (failed) break;
    }
    printf(failed ? "TEST FAILED\n" : "TEST PASSED\n");
    free(w);
    return failed;
}

typedef struct {
    long step, elem;
    const char *what, *name;
    double base, test;
} PeerDivergence;

/* zinc compare's report (Z-REP-001's format), DeepSpeed the baseline: a line
 * per step with the largest differences of loss, gradient and fp32 master,
 * then TEST PASSED or TEST FAILED naming the first value beyond the bound. */
static int compare_report(const PeerOpts *p, const ZnRunOpts *o, const ZnRunResult *rz, const double *dl, long steps,
                          ZnStFile *st, const char *rec, ZnErr *err) {
    float *w = NULL;
    PeerDivergence dv = {0, -1, NULL, NULL, 0, 0};
    for (long t = 0; t < steps; t++) {
        ZnDiff dls = {0, 0}, dg = {0, 0}, dp = {0, 0};
        zn_diff_update(&dls, dl[t], rz->loss[t]);
        if (!dv.what && zn_diff_beyond(dl[t], rz->loss[t], p->rtol, p->atol))
            dv = (PeerDivergence){t + 1, -1, "loss", NULL, dl[t], rz->loss[t]};
        for (int pass = 0; pass < 2; pass++) {   /* gradients, then masters */
            const float *zt = (pass ? rz->rec_params : rz->rec_grads) + t * rz->numel;
            long off = 0;
            for (int q = 0; q < o->model.nparams; q++) {
                const ZnParamSpec *ps = &o->model.params[q];
                char name[320];
                snprintf(name, sizeof name, pass ? "%ld/%s" : "%ld/grad/%s", t, ps->name);
                if (ds_tensor(st, rec, name, ps->numel, &w, err)) { free(w); return -1; }
                for (long j = 0; j < ps->numel; j++) {
                    zn_diff_update(pass ? &dp : &dg, w[j], zt[off + j]);
                    if (!dv.what && zn_diff_beyond(w[j], zt[off + j], p->rtol, p->atol))
                        dv = (PeerDivergence){t + 1, j, pass ? "parameter" : "gradient", ps->name, w[j], zt[off + j]};
                }
                off += ps->numel;
            }
        }
        zn_diff_print_step(t + 1, dl[t], rz->loss[t], &dls, &dg, &dp);
    }
    free(w);
    if (!dv.what) {
        printf("TEST PASSED\n");
        return 0;
    }
    if (!dv.name)
        printf("TEST FAILED: step %ld, loss: DeepSpeed %.9g, zinc %.9g (|diff| %.3e > atol %g + rtol %g * |DeepSpeed|)\n",
               dv.step, dv.base, dv.test, fabs(dv.test - dv.base), p->atol, p->rtol);
    else
        printf("TEST FAILED: step %ld, %s '%s' element %ld: DeepSpeed %.9g, zinc %.9g "
               "(|diff| %.3e > atol %g + rtol %g * |DeepSpeed|)\n",
               dv.step, dv.what, dv.name, dv.elem, dv.base, dv.test, fabs(dv.test - dv.base), p->atol, p->rtol);
    return 1;
}

/* zinc stepper --peer (compare 0) and zinc compare --peer (compare 1): the
 * same runs, seed 004's report or compare's. */
static int peer_main(int argc, char **argv, int compare) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    PeerOpts p = {NULL, NULL, 5, 1, 1e-4, 1e-4, 0, 1e-4};
    long batches = compare ? 10 : 20;
    const char *peer = NULL;
    const char *cmd = compare ? "zinc compare --peer" : "zinc stepper --peer";
    ZnErr err = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = zn_train_flag(&f, argc, argv, &i, &err);
        if (r < 0) goto usage;
        if (r > 0) continue;
        if (i + 1 >= argc) { zn_err(&err, ZN_E_USAGE, "%s needs a value (or is unknown to '%s')", a, cmd); goto usage; }
        const char *v = argv[++i];
        char *end;
        errno = 0;
        const int tol = compare ? !strcmp(a, "--rtol") || !strcmp(a, "--atol")
                                : !strcmp(a, "--param-tol") || !strcmp(a, "--loss-tol");
        if (!strcmp(a, "--peer")) peer = v;
        else if (!strcmp(a, "--python")) p.python = v;
        else if (tol) {
            double d = strtod(v, &end);
            if (errno || *end || end == v || !(d >= 0) || isinf(d)) { zn_err(&err, ZN_E_USAGE, "%s: expected a number >= 0, got '%s'", a, v); goto usage; }
            if (!strcmp(a, "--param-tol")) p.param_tol = d;
            else if (!strcmp(a, "--loss-tol")) p.loss_tol = d;
            else if (!strcmp(a, "--rtol")) p.rtol = d;
            else p.atol = d;
        } else if (!compare && (!strcmp(a, "--batches") || !strcmp(a, "--test-every") || !strcmp(a, "--status-every"))) {
            long x = strtol(v, &end, 10);
            if (errno || *end || end == v || x < 1 || x > 1000000) { zn_err(&err, ZN_E_USAGE, "%s: expected a positive integer, got '%s'", a, v); goto usage; }
            if (a[2] == 'b') batches = x; else if (a[2] == 't') p.test_every = x; else p.status_every = x;
        } else { zn_err(&err, ZN_E_USAGE, "unknown flag '%s' for '%s'", a, cmd); goto usage; }
    }
    if (!peer || strcmp(peer, "deepspeed")) { zn_err(&err, ZN_E_USAGE, "--peer: the one peer is deepspeed, got '%s'", peer ? peer : ""); goto usage; }
    if (!f.config_path) { zn_err(&err, ZN_E_USAGE, "--peer deepspeed needs --config DS.json: the file both engines read"); goto usage; }
    if (!f.data_spec || strncmp(f.data_spec, "text:", 5)) { zn_err(&err, ZN_E_USAGE, "--peer deepspeed needs --data text:FILE and a GPT-2 --model (the windows both engines train on)"); goto usage; }
    if (f.steps >= 0) batches = f.steps;
    f.steps = batches;
    ZnRunOpts o;
    if (zn_train_resolve(&f, NULL, &o, &err)) goto usage;
    zn_run_opts_free(&o);
    /* --data text:FILE made zn_train_resolve refuse any model but GPT-2 */
    char dir[PATH_MAX], py[PATH_MAX + 32], worker[PATH_MAX + 64];
    exe_dir(dir, sizeof dir);
    if (!p.python) { snprintf(py, sizeof py, "%s/peer-venv/bin/python", dir); p.python = py; }
    if (access(p.python, X_OK)) { zn_err(&err, ZN_E_USAGE, "--python: %s is not an executable python (make test-deepspeed makes build/peer-venv)", p.python); goto usage; }
    char torchrun[PATH_MAX + 32];
    torchrun_path(p.python, torchrun, sizeof torchrun);
    if (access(torchrun, X_OK)) { zn_err(&err, ZN_E_USAGE, "--python: no executable torchrun beside it (%s): %s", torchrun, strerror(errno)); goto usage; }
    if (find_worker(worker, sizeof worker, dir, &err)) goto usage;
    p.worker = worker;
    p.record_grads = compare;

    char tmp[PATH_MAX];
    const char *td = getenv("TMPDIR");
    if (!td || !*td) td = "/tmp";
    snprintf(tmp, sizeof tmp, "%s/zinc-peer-XXXXXX", td);
    if (!mkdtemp(tmp)) { fprintf(stderr, "zinc: error: cannot make a folder in %s: %s\n", td, strerror(errno)); return 1; }
    if (compare) {
        printf("zinc compare: zinc (simulator) against DeepSpeed (%s, torchrun, %d processes, CPU accelerator), "
               "config %s, stage %d, %s, world size %d, %ld steps, rtol %g, atol %g\n",
               p.python, o.world.size, f.config_path, o.cfg.zero.stage, zn_dtype_name(o.cfg.model_dtype), o.world.size,
               batches, p.rtol, p.atol);
    } else {
        printf("--- Model Stepper Configuration ---\n");
        printf("base=deepspeed (%s, torchrun, %d processes, CPU accelerator)\ntest=zinc (simulator, world size %d)\n",
               p.python, o.world.size, o.world.size);
        printf("config=%s\nbatches=%ld\ntest_every=%ld\nstatus_every=%ld\n", f.config_path, batches, p.test_every, p.status_every);
        printf("track_params=True\nparam_tol=%e\ntrack_loss=True\nloss_tol=%e\ntrack_grads=False\n\n", p.param_tol, p.loss_tol);
    }
    fflush(stdout);
    int rc = 1, failed = 0;
    double *dl = calloc((size_t)batches, sizeof *dl);
    ZnStFile *st = NULL;
    ZnRunResult rz;
    memset(&rz, 0, sizeof rz);
    o.record = 1;
    o.print_every = 0;
    o.out = NULL;
    if (!dl) { zn_nomem(&err); goto fail; }
    if (run_deepspeed(&p, &f, &o, tmp, &err) || ds_losses(tmp, batches, dl, &err)) goto fail;
    if (zn_run(&o, &rz, &err)) goto fail;
    char rec[PATH_MAX + 32];
    snprintf(rec, sizeof rec, "%s/ds/record.safetensors", tmp);
    if (zn_st_open(&st, rec, &err)) goto fail;
    failed = compare ? compare_report(&p, &o, &rz, dl, batches, st, rec, &err)
                     : stepper_report(&p, &o, &rz, dl, batches, st, rec, &err);
    if (failed < 0) {
        failed = 0;
        goto fail;
    }
    rc = failed;
    goto done;
fail:
    fflush(stdout);
    zn_err_print(stderr, "", &err);
    fprintf(stderr, "zinc: DeepSpeed's log and files are kept in %s\n", tmp);
    rc = err.code == ZN_E_USAGE ? 2 : 1;
done:
    zn_st_close(st);
    free(dl);
    zn_run_result_free(&rz);
    /* kept where something failed before the comparison, or when asked */
    if ((rc == 0 || failed) && !getenv("ZINC_PEER_KEEP")) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
usage:   /* one line, as every usage error (Z-FUZZ-010); --help shows the usage */
    zn_err_print(stderr, "", &err);
    return 2;
}

int zn_cmd_stepper_peer(int argc, char **argv) { return peer_main(argc, argv, 0); }
int zn_cmd_compare_peer(int argc, char **argv) { return peer_main(argc, argv, 1); }
