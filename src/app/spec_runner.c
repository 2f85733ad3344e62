/* spec_runner.c: `zinc spec run [CASE...]` runs the data-driven conformance
 * cases of spec/cases/ (one case per .json file, at any depth: spec/cases/<area>/<clause>-<case>.json)
 * on the simulator (or the GPU, or, with --backend tcp, with each rank in
 * its own process beside the simulator's run: Z-SPEC-005); `zinc spec
 * coverage` lists the clauses of spec/SPEC.md that no case or test names.
 *
 * A case:
 *   {"id": "...", "clauses": ["Z-ENG-001", ...], "description": "...",
 *    "model": "mlp:8,16,5", "steps": 20, "world": 3,
 *    "config": {DeepSpeed config} | "config_text": "raw text",
 *    "runs": [{"stage": 0}, {"stage": 1, "config": {patch}}, ...],
 *    "expect": {"bitwise": true, "close": {"loss_rtol": r, "param_atol": a},
 *               "loss_falls": {"first_near_lnC": t, "ratio": q},
 *               "comm_volume": true, "memory": true, "error": "substring", "exit": 1|2,
 *               "scale_after": [per-step loss scale after the update],
 *               "skipped": [1-based steps skipped], "lr_follows_schedule": true,
 *               "finite": false, "dry_run": true,
 *               "first_step": K (every run resumed at step K)}}
 * "inject": {"rank": r, "steps": [1-based], "value": "inf"|"-inf"|"nan"} plants a
 * non-finite gradient element on rank r at those steps (Z-PREC-006).
 * "fault": {"rank": r, "step": s, "index": i, "delta": d} (a run's) adds d to
 * element i of rank r's master partition after step s's update (zinc compare
 * --fault, Z-REP-001).
 * "repeat_layer": {"rank": r, "layer": l} (the case's or a run's) makes rank
 * r run layer l's forward twice in its first micro-step (--test-repeat-layer,
 * Z-SEQ-002).
 * Run keys: stage, world, per_node (the simulator's ranks per node, as
 * --ranks-per-node), grad_accum, micro_batch, train_batch_size, model,
 * steps, config (deep-merged into the case's config), resume (a checkpoint
 * folder, zinc's or DeepSpeed's, the run starts from; it saves nothing there),
 * trace (true: the run writes --trace to a fresh folder, removed after it,
 * and the file must hold the run's steps and collectives: Z-REP-004).
 * "tcp_skip": "why" -- the case cannot run with its ranks in processes;
 * `--backend tcp` prints "skip ID: why" instead (Z-SPEC-005).
 * "nvme": true gives the case a fresh folder under /tmp, removed after it:
 * every offload section of a run's config with device "nvme" and no
 * nvme_path gets it (cases run side by side must not share swap files). */
#include "app/cli.h"
#include "app/run_report.h"
#include "app/dryrun.h"
#include "app/run_procs.h"
#include "comm/comm_seq.h"
#include "core/alloc.h"
#include "core/covmark.h"
#include "core/json_track.h"
#include "core/layout.h"
#include "engine/lr_schedule.h"
#include "engine/engine.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "core/fileio.h"
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 32

/* a whole regular file (fileio's reader: a folder or a device is refused,
   not measured with ftell), or NULL */
static char *read_file(const char *path, size_t *len) {
    char *buf;
    size_t n;
    ZnErr err;
    if (zn_read_file(path, (size_t)64 << 20, &buf, &n, &err)) return NULL;
    if (len) *len = n;
    return buf;
}

/* patch's keys replace base's, recursively for objects */
static void merge(cJSON *base, const cJSON *patch) {
    const cJSON *it;
    cJSON_ArrayForEach(it, patch) {
        cJSON *old = cJSON_GetObjectItemCaseSensitive(base, it->string);
        if (old && cJSON_IsObject(old) && cJSON_IsObject(it)) { merge(old, it); continue; }
        if (old) cJSON_DeleteItemFromObjectCaseSensitive(base, it->string);
        zn_json_add(base, it->string, cJSON_Duplicate(it, 1));
    }
}

static long jint(const cJSON *o, const char *k, long dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (long)v->valuedouble : dflt;
}
static double jnum(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}
static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* `zinc spec run --backend cuda [--exact]` runs every case's ranks on the
 * GPU (Z-CUDA-006); the bitwise expectations then need --exact.
 * `--backend tcp` runs each rank of every run in its own process over the
 * tcp transport (Z-SPEC-005), and the same checks read the result. */
static int spec_cuda, spec_exact, spec_tcp;

static int case_run(ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    o->device_cuda = spec_cuda;
    if (spec_exact) o->cfg.exact = 1;
    return spec_tcp ? zn_run_procs_vs_sim(o, res, err) : zn_run(o, res, err);
}

typedef struct {
    ZnRunOpts opts;
    ZnRunResult res;
    int rc;
    ZnErr err;
    char trace_dir[32];     /* "trace": true: the run's --trace goes to trace_dir/trace.json */
    char trace_path[48];
} CaseRun;

/* Z-REP-004 for a run with "trace": true: the file is Chrome trace-event
 * JSON with a named track per rank, and each rank's events are its run:
 * one "step" event per optimizer step, as many comm events as the rank
 * made collective calls (set-up included), carrying the bytes it sent. */
static int check_trace(const CaseRun *r, char *why, size_t wn) {
    const int W = r->opts.world.size;
    size_t n;
    char *text = read_file(r->trace_path, &n);
    cJSON *root = text ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(evs)) {
        snprintf(why, wn, "trace: %s is not trace-event JSON", r->trace_path);
        cJSON_Delete(root);
        return 1;
    }
    int fail = 0;
    for (int q = 0; q < W && !fail; q++) {
        long named = 0, steps = 0, comm = 0, bytes = 0, calls = 0, sent = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, evs) {
            const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
            if (!cJSON_IsNumber(tid) || tid->valueint != q) continue;
            const char *name = jstr(e, "name"), *cat = jstr(e, "cat");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            char want[24];   /* "rank " and any int */
            snprintf(want, sizeof want, "rank %d", q);
            if (name && !strcmp(name, "thread_name") && jstr(args, "name") && !strcmp(jstr(args, "name"), want)) named++;
            if (name && !strcmp(name, "step")) steps++;
            if (cat && !strcmp(cat, "comm")) comm++, bytes += jint(args, "bytes", 0);
        }
        for (int op = 0; op < ZN_OP_N; op++) calls += r->res.comm_end[q].calls[op], sent += r->res.comm_end[q].bytes_sent[op];
        if (named != 1 || steps != r->res.steps || comm != calls || bytes != sent) {
            snprintf(why, wn, "trace: rank %d has %ld named tracks, %ld step events, %ld collectives sending %ld bytes; "
                     "the run: %ld steps, %ld collectives sending %ld bytes", q, named, steps, comm, bytes,
                     r->res.steps, calls, sent);
            fail = 1;
        }
    }
    cJSON_Delete(root);
    return fail;
}

/* Expected bytes a rank sends per optimizer step for gradient reduction and
 * parameter gathering: the ZeRO paper's 2Ψ(N-1)/N (stages 0-2) and
 * 3Ψ(N-1)/N (stage 3), Ψ counted with the layout's padding (spec Z-COMM-001). */
static int check_comm(const CaseRun *r, char *why, size_t wn) {
    const ZnRunOpts *o = &r->opts;
    const int N = o->world.size;
    long psi, nb;
    double per_step = zn_run_zero_volume(o, &psi, &nb);
    if (per_step < 0) {
        snprintf(why, wn, "layout: cannot be built");
        return 1;
    }
    double factor = o->cfg.plan.comm_volume_psi;
    double expect = per_step * 4.0 * (double)o->steps;
    double total = 0;
    for (int k = 0; k < N; k++) {
        long c0, s0, r0, c1, s1, r1, g0, gs0, gr0, g1, gs1, gr1;
        zn_comm_tag_totals(&r->res.comm_init[k], "grad_reduce", &c0, &s0, &r0);
        zn_comm_tag_totals(&r->res.comm_end[k], "grad_reduce", &c1, &s1, &r1);
        zn_comm_tag_totals(&r->res.comm_init[k], "param_gather", &g0, &gs0, &gr0);
        zn_comm_tag_totals(&r->res.comm_end[k], "param_gather", &g1, &gs1, &gr1);
        double sent = (double)(s1 - s0 + gs1 - gs0);
        total += sent;
        /* an all-reduce of unpadded buckets (stage 0): a rank's share may
           differ from the mean by the rounding of one chunk per bucket */
        double slack = o->cfg.plan.boundary_all_reduce ? 2.0 * 4.0 * (double)nb * (double)o->steps : 0.0;
        if (fabs(sent - expect) > slack) {
            snprintf(why, wn, "rank %d sent %.0f bytes for gradients and parameters in %ld steps, "
                     "expected %.0f (%.0fΨ(N-1)/N, Ψ=%ld, N=%d)", k, sent, o->steps, expect, factor, psi, N);
            return 1;
        }
    }
    if (fabs(total - expect * N) > 0.5) {
        snprintf(why, wn, "ranks sent %.0f bytes together, expected %.0f", total, expect * N);
        return 1;
    }
    return 0;
}

/* Model-state bytes per rank and category after training (spec Z-MEM-010). */
static int check_memory(const CaseRun *r, char *why, size_t wn) {
    const ZnRunOpts *o = &r->opts;
    ZnLayout L;
    ZnErr e;
    if (zn_config_layout(&o->cfg, &o->model, o->world.size, &L, &e)) {
        snprintf(why, wn, "layout: %s", e.msg);
        return 1;
    }
    const int N = o->world.size;
    const ZnPlan *P = &o->cfg.plan;
    /* the paper's table: a state held in full costs Ψ (the layout's padded
       flat size), a partitioned one Ψ/N (the rank's partition); an fp32
       run that keeps the optimizer state in full steps the working copy
       itself, without a master copy */
    const long full = L.aligned_numel * 4, part = L.part_numel * 4;
    long want[ZN_MEM_NCAT] = {0};
    want[ZN_MEM_PARAMS16] = P->params == ZN_HOLD_FULL ? full : part;
    want[ZN_MEM_GRADS] = P->grads == ZN_HOLD_FULL ? full : part;
    want[ZN_MEM_MASTER32] = P->optim == ZN_HOLD_FULL ? 0 : part;
    want[ZN_MEM_EXP_AVG] = want[ZN_MEM_EXP_AVG_SQ] = P->optim == ZN_HOLD_FULL ? full : part;
    if (P->gather_per_layer) {
        /* persistent params stay gathered */
        long persisted = 0;
        for (int p = 0; p < L.nparams; p++) {
            long n = L.params[p].numel;
            if (n <= o->cfg.zero.param_persistence_threshold &&
                persisted + n <= o->cfg.zero.model_persistence_threshold) {
                persisted += n;
                want[ZN_MEM_PARAMS16] += L.s3_pn[p] * N * 4;
            }
        }
    }
    zn_layout_free(&L);
    static const ZnMemCat cats[] = {ZN_MEM_PARAMS16, ZN_MEM_MASTER32, ZN_MEM_GRADS, ZN_MEM_EXP_AVG, ZN_MEM_EXP_AVG_SQ};
    for (int k = 0; k < N; k++)
        for (size_t c = 0; c < sizeof cats / sizeof cats[0]; c++)
            if (r->res.mem_end[k].cur[cats[c]] != want[cats[c]]) {
                snprintf(why, wn, "rank %d holds %ld bytes of %s, the stage-%d formula says %ld", k,
                         r->res.mem_end[k].cur[cats[c]], zn_mem_cat_name(cats[c]), P->stage, want[cats[c]]);
                return 1;
            }
    return 0;
}

static int same_bits_d(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Canonical mode's cost against the default run of the same shape
 * (Z-CANON-004): extra gradient buffers and extra gradient bytes. */
static int check_canonical_cost(const CaseRun *def, const CaseRun *can, char *why, size_t wn) {
    const ZnRunOpts *o = &can->opts;
    const int N = o->world.size;
    const long g = o->cfg.grad_accum;
    const ZnPlan *P = &o->cfg.plan;
    ZnLayout L;
    ZnErr e;
    if (zn_config_layout(&o->cfg, &o->model, N, &L, &e)) {
        snprintf(why, wn, "layout: %s", e.msg);
        return 1;
    }
    long part = L.part_numel;
    zn_layout_free(&L);
    int levels = 0;
    if (g > 1) while ((1L << levels) <= g) levels++;
    long want_mem = levels * part * (long)zn_dtype_size(o->cfg.model_dtype);
    for (int k = 0; k < N; k++) {
        long extra = can->res.mem_end[k].cur[ZN_MEM_GRADS] - def->res.mem_end[k].cur[ZN_MEM_GRADS];
        if (extra != want_mem) {
            snprintf(why, wn, "rank %d: canonical mode holds %ld extra gradient bytes, expected %d levels x %ld = %ld",
                     k, extra, levels, part, want_mem);
            return 1;
        }
        long c0, s0, r0, c1, s1, r1;
        zn_comm_tag_totals(&def->res.comm_end[k], "grad_reduce", &c0, &s0, &r0);
        zn_comm_tag_totals(&can->res.comm_end[k], "grad_reduce", &c1, &s1, &r1);
        long want = P->reduce_per_micro ? s0 : g * s0;
        if (s1 != want) {
            snprintf(why, wn, "rank %d: canonical mode sent %ld gradient bytes, default %ld, expected %ld", k, s1, s0, want);
            return 1;
        }
    }
    return 0;
}

/* The case's NVMe folder ("nvme": true), else empty. */
static char nvme_dir[64];

/* Points config's NVMe offload sections without a path at nvme_dir. */
static void fill_nvme_path(cJSON *config) {
    cJSON *z = cJSON_GetObjectItemCaseSensitive(config, "zero_optimization");
    const char *sec[] = {"offload_optimizer", "offload_param"};
    for (int i = 0; i < 2; i++) {
        cJSON *o = cJSON_GetObjectItemCaseSensitive(z, sec[i]);
        const char *dev = jstr(o, "device");
        if (dev && !strcmp(dev, "nvme") && !cJSON_GetObjectItemCaseSensitive(o, "nvme_path"))
            zn_json_add(o, "nvme_path", cJSON_CreateString(nvme_dir));
    }
}

/* Z-DRY-003: the dry run of a run's options (0 steps: init only; 1: one
 * step) holds what rank 0 of the real run holds, category by category, on
 * the device and the host (and NVMe after init), and makes its collectives;
 * after a step, the step's device peaks too (the buckets' aside: the run's
 * final gather allocates its own). */
static int check_dry(const CaseRun *r, char *why, size_t wn) {
    static const char *tier[ZN_DRY_NTIERS] = {"device", "host", "nvme"};
    const ZnRunResult *res = &r->res;
    const int step = r->opts.steps > 0;
    if (r->opts.steps > 1) { snprintf(why, wn, "dry_run: a run of 0 or 1 steps"); return 1; }
    ZnDryRun *dr = zn_calloc(ZN_HOST_APP, 1, sizeof *dr);
    ZnErr e = {0};
    if (!dr) { snprintf(why, wn, "out of memory"); return 1; }
    int fail = 0;
    if (zn_dry_run(&r->opts, step, dr, &e)) { snprintf(why, wn, "dry run: %s", e.msg); free(dr); return 1; }
    const ZnMemStats *got = step ? dr->step : dr->init;
    const ZnMemStats *want[ZN_DRY_NTIERS] = {&res->mem_end[0], &res->host_end[0], &res->nvme_end[0]};
    for (int t = 0; t < ZN_DRY_NTIERS - step && !fail; t++)
        for (int c = 0; c < ZN_MEM_NCAT && !fail; c++)
            if (got[t].cur[c] != want[t]->cur[c]) {
                snprintf(why, wn, "dry run: %s %s holds %ld bytes, the run's rank 0 %ld", tier[t],
                         zn_mem_cat_name((ZnMemCat)c), got[t].cur[c], want[t]->cur[c]);
                fail = 1;
            }
    for (int c = 0; c < ZN_MEM_NCAT && step && !fail; c++)
        if (c != ZN_MEM_BUCKETS && got[ZN_DRY_DEVICE].peak[c] != want[ZN_DRY_DEVICE]->peak[c]) {
            snprintf(why, wn, "dry run: the step's device peak of %s is %ld bytes, the run's %ld",
                     zn_mem_cat_name((ZnMemCat)c), got[ZN_DRY_DEVICE].peak[c], want[ZN_DRY_DEVICE]->peak[c]);
            fail = 1;
        }
    /* the collectives: init's, or the step's (the run's totals less init's) */
    const ZnCommStats *dc = step ? &dr->comm_step : &dr->comm_init;
    for (int op = 0; op < ZN_OP_N && !fail; op++) {
        long calls = res->comm_init[0].calls[op], sent = res->comm_init[0].bytes_sent[op];
        if (step) calls = res->comm_end[0].calls[op] - calls, sent = res->comm_end[0].bytes_sent[op] - sent;
        if (dc->calls[op] != calls || dc->bytes_sent[op] != sent) {
            snprintf(why, wn, "dry run: %s: %ld calls sending %ld bytes, the run's rank 0 %ld sending %ld",
                     zn_coll_op_name((ZnCollOp)op), dc->calls[op], dc->bytes_sent[op], calls, sent);
            fail = 1;
        }
    }
    free(dr);
    return fail;
}

/* Resolves one run of a case: the case's settings, the run's overrides. */
static void resolve_run(const cJSON *cs, const cJSON *run, CaseRun *c) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = jstr(run, "model") ? jstr(run, "model") : jstr(cs, "model");
    f.data_spec = jstr(run, "data") ? jstr(run, "data") : jstr(cs, "data");
    f.seq_len = jint(run, "seq_len", jint(cs, "seq_len", 0));
    f.steps = jint(run, "steps", jint(cs, "steps", 10));
    f.args.world_size = (int)jint(run, "world", jint(cs, "world", 1));
    f.ranks_per_node = (int)jint(run, "per_node", jint(cs, "per_node", 0));
    f.args.stage = (int)jint(run, "stage", jint(cs, "stage", -1));
    f.args.grad_accum = jint(run, "grad_accum", jint(cs, "grad_accum", -1));
    f.args.micro_batch = jint(run, "micro_batch", jint(cs, "micro_batch", -1));
    f.args.train_batch_size = jint(run, "train_batch_size", jint(cs, "train_batch_size", -1));
    char *text = NULL;
    const char *raw = jstr(cs, "config_text");
    if (raw) {
        text = zn_strdup(ZN_HOST_APP, raw);
    } else {
        cJSON *base = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cs, "config"), 1);
        if (!base) base = cJSON_CreateObject();
        const cJSON *patch = cJSON_GetObjectItemCaseSensitive(run, "config");
        if (patch) merge(base, patch);
        if (nvme_dir[0]) fill_nvme_path(base);
        text = zn_json_print(base, 0);
        cJSON_Delete(base);
    }
    f.config_path = "case-config";
    c->rc = zn_train_resolve(&f, text, &c->opts, &c->err);
    free(text);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(run, "trace");
    if (!c->rc && cJSON_IsTrue(tr ? tr : cJSON_GetObjectItemCaseSensitive(cs, "trace"))) {
        snprintf(c->trace_dir, sizeof c->trace_dir, "/tmp/zinc-trace-XXXXXX");
        if (!mkdtemp(c->trace_dir)) {
            c->trace_dir[0] = 0;
            c->rc = zn_err(&c->err, ZN_E_IO, "trace: cannot make a temporary folder: %s", strerror(errno));
        } else {
            snprintf(c->trace_path, sizeof c->trace_path, "%s/trace.json", c->trace_dir);
            c->opts.trace_path = c->trace_path;
        }
    }
    const char *from = jstr(run, "resume") ? jstr(run, "resume") : jstr(cs, "resume");
    if (!c->rc && from) {   /* the case's JSON outlives the run */
        c->opts.ckpt_dir = from;
        c->opts.resume = 1;
    }
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(run, "repeat_layer");
    if (!rep) rep = cJSON_GetObjectItemCaseSensitive(cs, "repeat_layer");
    if (!c->rc && rep) {   /* --test-repeat-layer R:L (Z-SEQ-002) */
        c->opts.hooks.repeat_on = 1;
        c->opts.hooks.repeat_rank = (int)jint(rep, "rank", 0);
        c->opts.hooks.repeat_layer = (int)jint(rep, "layer", 0);
    }
    const cJSON *flt = cJSON_GetObjectItemCaseSensitive(run, "fault");
    if (!c->rc && flt) {   /* zinc compare --fault STEP:RANK:INDEX:DELTA (Z-REP-001) */
        c->opts.hooks.fault_rank = (int)jint(flt, "rank", 0);
        c->opts.hooks.fault_step = jint(flt, "step", 1);
        c->opts.hooks.fault_index = jint(flt, "index", 0);
        c->opts.hooks.fault_delta = (float)jnum(flt, "delta", 0);
    }
    const cJSON *inj = cJSON_GetObjectItemCaseSensitive(cs, "inject");
    if (!c->rc && inj) {
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(inj, "steps");
        const char *v = jstr(inj, "value");
        c->opts.hooks.inject_rank = (int)jint(inj, "rank", 0);
        c->opts.hooks.inject_value = v && !strcmp(v, "nan") ? NAN : v && !strcmp(v, "-inf") ? -INFINITY : INFINITY;
        const cJSON *st;
        cJSON_ArrayForEach(st, steps)
            if (c->opts.hooks.ninject < 16) c->opts.hooks.inject_steps[c->opts.hooks.ninject++] = (long)st->valuedouble;
    }
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

/* `zinc ckpt` with argv (argc of them), its report line to /dev/null; its exit status */
static int quiet_ckpt(int argc, char **argv) {
    fflush(stdout);
    int saved = dup(1), devnull = open("/dev/null", 1);
    dup2(devnull, 1);
    int rc = zn_cmd_ckpt(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(devnull);
    return rc;
}

/* Z-CKPT-008: tag (a checkpoint of r's run) verifies, and its consolidation
 * (written to out) holds r's final fp32 parameters, each under its name. */
static int check_consolidate(const CaseRun *r, char *tag, char *out, char *why, size_t wn) {
    char *inspect[] = {"inspect", tag, NULL};
    char *cons[] = {"consolidate", "--input", tag, "--output", out, NULL};
    if (quiet_ckpt(2, inspect)) { snprintf(why, wn, "zinc ckpt inspect %s: not OK", tag); return 1; }
    if (quiet_ckpt(5, cons)) { snprintf(why, wn, "zinc ckpt consolidate failed"); return 1; }
    ZnStFile *f = NULL;
    ZnErr e = {0};
    if (zn_st_open(&f, out, &e)) { snprintf(why, wn, "consolidated file: %s", e.msg); return 1; }
    const ZnModel *m = &r->opts.model;
    int fail = 0;
    long off = 0;
    for (int p = 0; p < m->nparams && !fail; p++) {
        const ZnStTensor *t = zn_st_find(f, m->params[p].name);
        const long n = m->params[p].numel;
        float *got = t && t->dtype == ZN_F32 && (long)t->numel == n ? zn_malloc(ZN_HOST_APP, (size_t)n * 4 + 1) : NULL;
        if (!got || zn_st_read(f, t, got, (size_t)n * 4, &e)) {
            snprintf(why, wn, "consolidated file: no fp32 tensor '%s' of %ld elements", m->params[p].name, n);
            fail = 1;
        } else if (memcmp(got, r->res.params + off, (size_t)n * 4)) {
            snprintf(why, wn, "consolidated '%s' differs from the saving run's parameters", m->params[p].name);
            fail = 1;
        }
        free(got);
        off += n;
    }
    zn_st_close(f);
    return fail;
}

/* A checkpoint case (Z-CKPT-*):
 *   "checkpoint": {"save_at": K, "save": {run keys}, "universal": true|false,
 *                  "deepspeed": true|false, "consolidate": true|false,
 *                  "resume": [{run keys, "universal": bool, "deepspeed": bool,
 *                              "tag": "TAG", "error": "substring"}, ...]}
 * Run 0 ("runs"[0] or the case itself) trains without interruption; the save
 * run trains the first K steps with a checkpoint at K; each resume run
 * starts from it (or from its universal conversion, or from the DeepSpeed
 * folder `zinc ckpt to-deepspeed` wrote of it, Z-DSCK-009) and must
 * reproduce run 0's losses after step K and its final parameters bit for bit.
 * "consolidate": the checkpoint must verify (`zinc ckpt inspect`) and
 * consolidate to the saving run's final parameters, bit for bit (Z-CKPT-008).
 * A resume with "error" must be refused with a message containing it (a
 * checkpoint of another model, dtype or world that cannot be read; "tag"
 * names the tag it resumes instead of the saved one). */
static int run_ckpt_case(const cJSON *cs, char *why, size_t wn) {
    const cJSON *ck = cJSON_GetObjectItemCaseSensitive(cs, "checkpoint");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(cs, "runs");
    const cJSON *resume = cJSON_GetObjectItemCaseSensitive(ck, "resume");
    const long save_at = jint(ck, "save_at", 1);
    char dir[] = "/tmp/zinc-ckpt-XXXXXX";
    if (!mkdtemp(dir)) { snprintf(why, wn, "cannot make a temporary folder"); return 1; }
    CaseRun base, save;
    memset(&base, 0, sizeof base);
    memset(&save, 0, sizeof save);
    int fail = 0;
    resolve_run(cs, cJSON_GetArrayItem(runs, 0), &base);
    if (!base.rc) base.rc = case_run(&base.opts, &base.res, &base.err);
    if (base.rc) { snprintf(why, wn, "uninterrupted run: %s", base.err.msg); fail = 1; }
    if (!fail) {
        resolve_run(cs, cJSON_GetObjectItemCaseSensitive(ck, "save"), &save);
        if (!save.rc) {
            save.opts.steps = save_at;
            save.opts.ckpt_dir = dir;
            save.opts.ckpt_interval = save_at;
            save.rc = case_run(&save.opts, &save.res, &save.err);
        }
        if (save.rc) { snprintf(why, wn, "saving run: %s", save.err.msg); fail = 1; }
    }
    char tag[64], utag[80], in[128], out[128], dsdir[64];
    snprintf(tag, sizeof tag, "global_step%ld", save_at);
    snprintf(utag, sizeof utag, "global_step%ld_universal", save_at);
    snprintf(in, sizeof in, "%s/%s", dir, tag);
    snprintf(out, sizeof out, "%s/consolidated.safetensors", dir);
    if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ck, "consolidate")))
        fail = check_consolidate(&save, in, out, why, wn);
    if (!save.rc) zn_run_result_free(&save.res);
    if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ck, "universal"))) {
        snprintf(out, sizeof out, "%s/%s", dir, utag);
        char *argv[] = {"to-universal", "--input-folder", in, "--output-folder", out, "--num-workers", "2", NULL};
        int rc = quiet_ckpt(7, argv);
        if (rc) { snprintf(why, wn, "zinc ckpt to-universal failed (%d)", rc); fail = 1; }
    }
    /* DeepSpeed's folder beside zinc's: its own latest, its own tag */
    snprintf(dsdir, sizeof dsdir, "%s/ds", dir);
    if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ck, "deepspeed"))) {
        char *argv[] = {"to-deepspeed", "--input", in, "--output-folder", dsdir, NULL};
        int rc = quiet_ckpt(5, argv);
        if (rc) { snprintf(why, wn, "zinc ckpt to-deepspeed failed (%d)", rc); fail = 1; }
    }
    const cJSON *item;
    int k = 0;
    cJSON_ArrayForEach(item, resume) {
        if (fail) break;
        CaseRun r;
        memset(&r, 0, sizeof r);
        resolve_run(cs, item, &r);
        int uni = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "universal"));
        int ds = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "deepspeed"));
        const char *rerr = jstr(item, "error"), *rtag = jstr(item, "tag");
        if (!r.rc) {
            r.opts.ckpt_dir = ds ? dsdir : dir;
            r.opts.resume = 1;
            r.opts.universal = uni;
            r.opts.ckpt_tag = rtag ? rtag : uni ? utag : tag;
            r.rc = case_run(&r.opts, &r.res, &r.err);
        }
        if (rerr) {   /* a resume that must be refused, saying this */
            if (!r.rc) {
                snprintf(why, wn, "resume %d succeeded, expected an error containing '%s'", k, rerr);
                zn_run_result_free(&r.res);
                fail = 1;
            } else if (!strstr(r.err.msg, rerr)) {
                snprintf(why, wn, "resume %d: error '%s', expected one containing '%s'", k, r.err.msg, rerr);
                fail = 1;
            }
        } else if (r.rc) {
            snprintf(why, wn, "resume %d: %s", k, r.err.msg);
            fail = 1;
        } else {
            for (long t = save_at; t < base.res.steps && !fail; t++)
                if (!same_bits_d(base.res.loss[t], r.res.loss[t])) {
                    snprintf(why, wn, "resume %d (world %d, GA %ld, stage %d%s) step %ld: loss %.17g, uninterrupted %.17g",
                             k, r.opts.world.size, r.opts.cfg.grad_accum, r.opts.cfg.zero.stage, uni ? ", universal" : ds ? ", deepspeed" : "",
                             t + 1, r.res.loss[t], base.res.loss[t]);
                    fail = 1;
                }
            if (!fail && (r.res.digest != base.res.digest || r.res.first_step != save_at)) {
                snprintf(why, wn, "resume %d (world %d, GA %ld, stage %d%s): digest %016llx, uninterrupted %016llx", k,
                         r.opts.world.size, r.opts.cfg.grad_accum, r.opts.cfg.zero.stage, uni ? ", universal" : ds ? ", deepspeed" : "",
                         (unsigned long long)r.res.digest, (unsigned long long)base.res.digest);
                fail = 1;
            }
            zn_run_result_free(&r.res);
        }
        zn_run_opts_free(&r.opts);
        k++;
    }
    if (!base.rc) zn_run_result_free(&base.res);
    zn_run_opts_free(&base.opts);
    zn_run_opts_free(&save.opts);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return fail;
}

/* Runs one case in its NVMe folder, if any; returns 0 pass, 1 fail (why filled). */
static int run_case_in(const cJSON *cs, char *why, size_t wn) {
    if (cJSON_GetObjectItemCaseSensitive(cs, "checkpoint")) return run_ckpt_case(cs, why, wn);
    const cJSON *expect = cJSON_GetObjectItemCaseSensitive(cs, "expect");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(cs, "runs");
    const char *experr = jstr(expect, "error");
    int nruns = cJSON_IsArray(runs) ? cJSON_GetArraySize(runs) : 1;
    if (nruns < 1 || nruns > MAX_RUNS) { snprintf(why, wn, "bad 'runs'"); return 1; }
    CaseRun *cr = zn_calloc(ZN_HOST_APP, (size_t)nruns, sizeof *cr);
    if (!cr) { snprintf(why, wn, "out of memory"); return 1; }
    int fail = 0;
    for (int i = 0; i < nruns && !fail; i++) {
        const cJSON *run = cJSON_IsArray(runs) ? cJSON_GetArrayItem(runs, i) : NULL;
        resolve_run(cs, run, &cr[i]);
        if (!cr[i].rc) {
            cr[i].opts.out = NULL;
            cr[i].rc = case_run(&cr[i].opts, &cr[i].res, &cr[i].err);
        }
        if (experr) {
            if (!cr[i].rc) { snprintf(why, wn, "run %d succeeded, expected an error containing '%s'", i, experr); fail = 1; }
            else if (!strstr(cr[i].err.msg, experr)) {
                snprintf(why, wn, "run %d: error '%s' does not contain '%s'", i, cr[i].err.msg, experr); fail = 1;
            } else if ((jint(expect, "exit", 2) == 2) != (cr[i].err.code == ZN_E_USAGE)) {
                snprintf(why, wn, "run %d: error '%s' has the wrong exit status (expected %ld)", i,
                         cr[i].err.msg, jint(expect, "exit", 2));
                fail = 1;
            }
        } else if (cr[i].rc) {
            snprintf(why, wn, "run %d failed: %s", i, cr[i].err.msg);
            fail = 1;
        } else if (cr[i].trace_dir[0]) {
            fail = check_trace(&cr[i], why, wn);
        }
    }
    if (!fail && !experr) {
        const CaseRun *a = &cr[0];
        const cJSON *close = cJSON_GetObjectItemCaseSensitive(expect, "close");
        const cJSON *falls = cJSON_GetObjectItemCaseSensitive(expect, "loss_falls");
        for (int i = 1; i < nruns && !fail; i++) {
            const CaseRun *b = &cr[i];
            if (b->res.steps != a->res.steps || b->res.numel != a->res.numel) {
                snprintf(why, wn, "run %d has a different shape than run 0", i);
                fail = 1;
                break;
            }
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "bitwise"))) {
                for (long t = 0; t < a->res.steps && !fail; t++)
                    if (!same_bits_d(a->res.loss[t], b->res.loss[t])) {
                        snprintf(why, wn, "run %d step %ld: loss %.17g != run 0's %.17g", i, t + 1,
                                 b->res.loss[t], a->res.loss[t]);
                        fail = 1;
                    }
                for (long j = 0; j < a->res.numel && !fail; j++)
                    if (memcmp(&a->res.params[j], &b->res.params[j], 4)) {
                        snprintf(why, wn, "run %d: parameter element %ld is %.9g, run 0 has %.9g", i, j,
                                 b->res.params[j], a->res.params[j]);
                        fail = 1;
                    }
                if (!fail && a->res.digest != b->res.digest) {
                    snprintf(why, wn, "run %d: digest differs", i);
                    fail = 1;
                }
            }
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "differs_from_first")) && !fail &&
                !memcmp(a->res.params, b->res.params, (size_t)a->res.numel * sizeof(float))) {
                snprintf(why, wn, "run %d has exactly run 0's parameters; expected a difference", i);
                fail = 1;
            }
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "canonical_cost")) && !fail && (i % 2) == 1)
                fail = check_canonical_cost(&cr[i - 1], b, why, wn);
            if (close && !fail) {
                double lr = jnum(close, "loss_rtol", 0), pa = jnum(close, "param_atol", 0);
                for (long t = 0; t < a->res.steps && !fail; t++)
                    if (fabs(a->res.loss[t] - b->res.loss[t]) > lr * fabs(a->res.loss[t])) {
                        snprintf(why, wn, "run %d step %ld: loss %.9g vs %.9g beyond rtol %g", i, t + 1,
                                 b->res.loss[t], a->res.loss[t], lr);
                        fail = 1;
                    }
                for (long j = 0; j < a->res.numel && !fail; j++)
                    if (fabs((double)a->res.params[j] - b->res.params[j]) > pa) {
                        snprintf(why, wn, "run %d: parameter element %ld: %.9g vs %.9g beyond atol %g", i, j,
                                 b->res.params[j], a->res.params[j], pa);
                        fail = 1;
                    }
            }
        }
        for (int i = 0; i < nruns && !fail; i++) {
            const CaseRun *r = &cr[i];
            if (falls) {
                const ZnModel *md = &r->opts.model;   /* classes: the vocabulary of a language model */
                int C = md->kind == ZN_MODEL_GPT2 ? md->gpt2.vocab_size : md->dims[md->nlayers];
                double first = r->res.loss[0], last = r->res.loss[r->res.steps - 1];
                double tol = jnum(falls, "first_near_lnC", 0.5), q = jnum(falls, "ratio", 0.9);
                if (fabs(first - log((double)C)) > tol || !(last < q * first)) {
                    snprintf(why, wn, "run %d: loss went %.6f -> %.6f (ln C = %.4f): expected to start near "
                             "ln C and fall below %.2f of the first", i, first, last, log((double)C), q);
                    fail = 1;
                }
            }
            const cJSON *sa = cJSON_GetObjectItemCaseSensitive(expect, "scale_after");
            if (!fail && sa) {
                int k = 0;
                const cJSON *v;
                cJSON_ArrayForEach(v, sa) {
                    if (k >= r->res.steps || r->res.scale_after[k] != v->valuedouble) {
                        snprintf(why, wn, "run %d step %d: loss scale after the step is %g, expected %g", i, k + 1,
                                 k < r->res.steps ? r->res.scale_after[k] : -1.0, v->valuedouble);
                        fail = 1;
                        break;
                    }
                    k++;
                }
            }
            const cJSON *sk = cJSON_GetObjectItemCaseSensitive(expect, "skipped");
            if (!fail && sk) {
                for (long t = 0; t < r->res.steps && !fail; t++) {
                    int want = 0;
                    const cJSON *v;
                    cJSON_ArrayForEach(v, sk) if ((long)v->valuedouble == t + 1) want = 1;
                    if (want != r->res.skipped[t]) {
                        snprintf(why, wn, "run %d step %ld: skipped=%d, expected %d", i, t + 1, r->res.skipped[t], want);
                        fail = 1;
                    }
                }
            }
            if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "lr_follows_schedule"))) {
                /* step k uses lr(t) with t = (applied steps before k) - 1 (Z-SCHED-001, Z-SCHED-002) */
                ZnLrSched ls;
                ZnErr e2;
                if (zn_sched_init(&ls, &r->opts.cfg.sched, r->opts.cfg.lr, r->opts.cfg.beta1, r->opts.cfg.beta2, &e2)) {
                    snprintf(why, wn, "scheduler: %s", e2.msg);
                    fail = 1;
                }
                long applied = 0;
                for (long t = 0; t < r->res.steps && !fail; t++) {
                    double want = zn_sched_lr_at(&ls, applied - 1);
                    if (!same_bits_d(r->res.lr[t], want)) {
                        snprintf(why, wn, "run %d step %ld: lr %.17g, the schedule says %.17g", i, t + 1, r->res.lr[t], want);
                        fail = 1;
                    }
                    applied += !r->res.skipped[t];
                }
            }
            const cJSON *fin = cJSON_GetObjectItemCaseSensitive(expect, "finite");
            if (!fail && fin) {
                int allfinite = 1;
                for (long j = 0; j < r->res.numel; j++) if (!isfinite(r->res.params[j])) allfinite = 0;
                if (allfinite != cJSON_IsTrue(fin)) {
                    snprintf(why, wn, "run %d: parameters %s finite", i, allfinite ? "are" : "are not");
                    fail = 1;
                }
            }
            if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "comm_volume")))
                fail = check_comm(r, why, wn);
            if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "memory")))
                fail = check_memory(r, why, wn);
            if (!fail && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(expect, "dry_run")))
                fail = check_dry(r, why, wn);
            const long first = jint(expect, "first_step", -1);
            if (!fail && first >= 0 && r->res.first_step != first) {
                snprintf(why, wn, "run %d started after step %ld, expected %ld", i, r->res.first_step, first);
                fail = 1;
            }
        }
    }
    for (int i = 0; i < nruns; i++) {
        if (!cr[i].rc) zn_run_result_free(&cr[i].res);
        zn_run_opts_free(&cr[i].opts);
        if (cr[i].trace_dir[0]) nftw(cr[i].trace_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    free(cr);
    return fail;
}

/* Runs one case; returns 0 pass, 1 fail, 2 skipped (why filled). A case
 * that cannot run with its ranks in processes says why in "tcp_skip"
 * (Z-SPEC-005); --backend tcp skips it, the other backends run it. */
static int run_case(const cJSON *cs, char *why, size_t wn) {
    const char *skip = jstr(cs, "tcp_skip");
    if (spec_tcp && skip) {
        snprintf(why, wn, "%s", skip);
        return 2;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "nvme"))) return run_case_in(cs, why, wn);
    snprintf(nvme_dir, sizeof nvme_dir, "/tmp/zinc-nvme-XXXXXX");
    if (!mkdtemp(nvme_dir)) {
        nvme_dir[0] = 0;
        snprintf(why, wn, "cannot make a temporary folder");
        return 1;
    }
    int fail = run_case_in(cs, why, wn);
    nftw(nvme_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    nvme_dir[0] = 0;
    return fail;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The case files under a folder, one behaviour each (Z-SPEC-001): every
 * .json file at any depth, in sorted path order. nftw's callback takes no
 * argument, hence the collector in statics (the CLI runs one walk at a time). */
static struct { char **v; int n, cap, oom; } walk;

static int collect_case(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st; (void)ftw;
    size_t l = strlen(path);
    if (type != FTW_F || l < 6 || strcmp(path + l - 5, ".json")) return 0;
    if (walk.n == walk.cap) {
        int cap = walk.cap ? 2 * walk.cap : 64;
        char **nv = zn_realloc(ZN_HOST_APP, walk.v, (size_t)cap * sizeof *nv);
        if (!nv) { walk.oom = 1; return 1; }
        walk.v = nv;
        walk.cap = cap;
    }
    if (!(walk.v[walk.n] = zn_strdup(ZN_HOST_APP, path))) { walk.oom = 1; return 1; }
    walk.n++;
    return 0;
}

/* Appends dir's case files, sorted, to *v (n entries, growing). -1: no such folder or out of memory. */
static int list_cases(const char *dir, char ***v, int *n) {
    walk.v = *v;
    walk.n = *n;
    walk.cap = *n;
    walk.oom = 0;
    int first = walk.n;
    errno = 0;
    int rc = nftw(dir, collect_case, 16, FTW_PHYS);
    if (rc && errno == ENOMEM) walk.oom = 1;   /* nftw's own allocation failed */
    if (walk.n > first) qsort(walk.v + first, (size_t)(walk.n - first), sizeof *walk.v, cmp_str);
    *v = walk.v;
    *n = walk.n;
    return walk.oom ? -2 : rc ? -1 : 0;
}

/* The error line for a failed list_cases (rc -1: unreadable, -2: memory). */
static void list_error(const char *what, int rc, int hint) {
    if (rc == -2) fprintf(stderr, "zinc: error: " ZN_NOMEM_MSG " while listing the cases of %s\n", what);
    else fprintf(stderr, "zinc: error: cannot list the cases of %s%s\n", what, hint ? " (run from the repository root)" : "");
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Runs the cases of the files and folders given (none: spec/cases). */
static int spec_run(int argc, char **argv) {
    char **files = NULL;
    int n = 0;
    const char *deflt = "spec/cases";
    if (argc == 0) { argv = (char **)&deflt; argc = 1; }
    int bad = 0;
    for (int i = 0; i < argc && !bad; i++) {
        if (is_dir(argv[i])) bad = list_cases(argv[i], &files, &n);
        else {   /* a file: run as given (an unreadable one fails below) */
            char **nv = zn_realloc(ZN_HOST_APP, files, (size_t)(n + 1) * sizeof *nv);
            if (nv) files = nv;
            if (!nv || !(files[n] = zn_strdup(ZN_HOST_APP, argv[i]))) bad = -2;
            else n++;
        }
        if (bad) list_error(argv[i], bad, argv[i] == deflt);
    }
    if (bad) {
        for (int i = 0; i < n; i++) free(files[i]);
        free(files);
        return 2;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        char *text;
        ZnErr rerr;
        if (zn_read_file(files[i], (size_t)64 << 20, &text, &len, &rerr)) {
            printf("FAIL %s: %s\n", files[i], rerr.code == ZN_E_NOMEM ? ZN_NOMEM_MSG : "cannot read");
            failed++;
            continue;
        }
        const char *end = NULL;
        zn_json_track();   /* a parse that ran out of memory is not a syntax error */
        cJSON *doc = zn_json_parse(text, len + 1, &end, 1);
        if (!doc) {
            if (zn_json_failed()) printf("FAIL %s: " ZN_NOMEM_MSG "\n", files[i]);
            else printf("FAIL %s: not JSON (byte %ld)\n", files[i], end ? (long)(end - text) : -1L);
            failed++;
        } else if (!cJSON_IsArray(doc) && !cJSON_IsObject(doc)) {
            printf("FAIL %s: not a case (a case file holds an object or an array of objects)\n", files[i]);
            failed++;
        } else {
            /* a file holds one case or an array of cases */
            int m = cJSON_IsArray(doc) ? cJSON_GetArraySize(doc) : 1;
            for (int k = 0; k < m; k++) {
                const cJSON *cs = cJSON_IsArray(doc) ? cJSON_GetArrayItem(doc, k) : doc;
                const char *id = jstr(cs, "id");
                char why[1400] = "";
                int f = run_case(cs, why, sizeof why);
                if (f == 2) { printf("skip %s: %s\n", id ? id : "?", why); skipped++; }
                else if (f) { printf("FAIL %s [%s]: %s\n", id ? id : "?", files[i], why); failed++; }
                else { printf("ok   %s\n", id ? id : "?"); passed++; }
                fflush(stdout);
            }
        }
        cJSON_Delete(doc);
        free(text);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    if (spec_tcp) printf("spec: %d passed, %d failed, %d skipped (tcp)\n", passed, failed, skipped);
    else printf("spec: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* Clause ids defined in SPEC.md ("**Z-ABC-123**") and mentioned elsewhere,
   each once; with twice, a definition seen before is printed and counted. */
static int collect_ids(const char *text, char ids[][24], int cap, int defs_only, int *twice) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, "Z-")); p++) {
        if (defs_only && (p < text + 2 || strncmp(p - 2, "**", 2))) continue;
        const char *q = p + 2;
        while ((*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) q++;
        if (*q != '-') continue;
        q++;
        const char *dstart = q;
        while (*q >= '0' && *q <= '9') q++;
        if (q - dstart != 3 || q - p >= 24) continue;
        char id[24];
        memcpy(id, p, (size_t)(q - p));
        id[q - p] = 0;
        int seen = 0;
        for (int i = 0; i < n; i++) if (!strcmp(ids[i], id)) seen = 1;
        if (seen && twice) { printf("defined twice %s\n", id); (*twice)++; }
        if (!seen && n < cap) strcpy(ids[n++], id);
    }
    return n;
}

/* Adds the clause ids a file names to used[0..*nu) (a folder or an
   unreadable file names none). */
static void note_ids(const char *path, char used[][24], int *nu) {
    char *t = read_file(path, NULL);
    if (!t) return;
    static char tmp[4096][24];
    int k = collect_ids(t, tmp, 4096, 0, NULL);
    for (int i = 0; i < k; i++) {
        int seen = 0;
        for (int j = 0; j < *nu; j++) if (!strcmp(used[j], tmp[i])) seen = 1;
        if (!seen && *nu < 4096) strcpy(used[(*nu)++], tmp[i]);
    }
    free(t);
}

static void print_spec_usage(FILE *f) {
    /* one line: a usage error prints exactly this (tests/cli_cover_test.sh) */
    fprintf(f, "usage: zinc spec run [--backend sim|cuda|tcp] [--exact] [CASE.json...] | zinc spec coverage\n");
}

static int spec_coverage(void) {
    static char defs[2048][24], used[4096][24];
    char *spec = read_file("spec/SPEC.md", NULL);
    if (!spec) { fprintf(stderr, "zinc: error: cannot read spec/SPEC.md (run from the repository root)\n"); return 2; }
    int twice = 0;   /* a clause id defined twice is an error: a case could name either */
    int nd = collect_ids(spec, defs, 2048, 1, &twice);
    free(spec);
    int nu = 0;
    /* the case files at any depth; the test sources of tests/ and tests/fuzz */
    char **files = NULL;
    int nf = 0;
    int lrc = list_cases("spec/cases", &files, &nf);
    if (lrc) {
        for (int i = 0; i < nf; i++) free(files[i]);
        free(files);
        list_error("spec/cases", lrc, 1);
        return 2;
    }
    const char *dirs[] = {"tests", "tests/fuzz"};
    for (int d = 0; d < 2; d++) {
        DIR *dh = opendir(dirs[d]);
        if (!dh) continue;
        struct dirent *de;
        while ((de = readdir(dh))) {
            if (de->d_name[0] == '.') continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dirs[d], de->d_name);
            note_ids(path, used, &nu);
        }
        closedir(dh);
    }
    for (int i = 0; i < nf; i++) {
        note_ids(files[i], used, &nu);
        free(files[i]);
    }
    free(files);
    int uncovered = 0, unknown = 0;
    for (int i = 0; i < nd; i++) {
        int seen = 0;
        for (int j = 0; j < nu; j++) if (!strcmp(defs[i], used[j])) seen = 1;
        if (!seen) { printf("uncovered %s\n", defs[i]); uncovered++; }
    }
    for (int j = 0; j < nu; j++) {
        int seen = 0;
        for (int i = 0; i < nd; i++) if (!strcmp(defs[i], used[j])) seen = 1;
        if (!seen) { printf("unknown   %s (named by a test or case, not defined in SPEC.md)\n", used[j]); unknown++; }
    }
    printf("spec coverage: %d clauses, %d covered, %d uncovered, %d unknown ids\n", nd, nd - uncovered,
           uncovered, unknown);
    return uncovered || unknown || twice ? 1 : 0;
}

static int is_backend(const char *s) { return !strcmp(s, "sim") || !strcmp(s, "cuda") || !strcmp(s, "tcp"); }

int zn_cmd_spec(int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "run")) {
        int k = 1;
        for (; k < argc; k++) {   /* options first, then case files */
            if (!strcmp(argv[k], "--exact")) spec_exact = 1;
            else if (!strcmp(argv[k], "--backend") && k + 1 < argc && is_backend(argv[k + 1])) {
                spec_cuda = !strcmp(argv[k + 1], "cuda");   /* the last --backend counts */
                spec_tcp = !strcmp(argv[k + 1], "tcp");
                k++;
            } else if (!strcmp(argv[k], "--backend")) {
                fprintf(stderr, "zinc: error: zinc spec run --backend: expected sim, cuda or tcp\n");
                return 2;
            } else break;
        }
        zn_cov_spec();   /* the coverage build: these are conformance cases */
        return spec_run(argc - k, argv + k);
    }
    if (argc >= 1 && !strcmp(argv[0], "coverage")) return spec_coverage();
    print_spec_usage(stderr);
    return 2;
}

const ZnCommand zn_spec_command = {"spec", zn_cmd_spec, print_spec_usage};
