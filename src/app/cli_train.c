/* cli_train.c: `zinc train` and the flags it shares with the other tools. */
#include "app/cli.h"
#include "app/proc.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The built-in run a new user gets from a bare `zinc train`. */
#define ZN_DEFAULT_MODEL "mlp:32,64,64,10"
#define ZN_DEFAULT_WORLD 4
#define ZN_DEFAULT_STEPS 100
#define ZN_DEFAULT_PRINT 10
#define ZN_DEFAULT_MICRO 16
static const char *default_config =
    "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001}},"
    " \"zero_optimization\": {\"stage\": 3}}";

void zn_train_flags_init(ZnTrainFlags *f) {
    memset(f, 0, sizeof *f);
    f->steps = -1;
    f->print_every = -1;
    zn_config_args_init(&f->args);
    f->args.world_size = -1;
    f->repeat_rank = -1;
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out, ZnErr *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return zn_err(err, ZN_E_USAGE, "%s: expected an integer in %ld..%ld, got '%s'", flag, lo, hi, s);
    *out = v;
    return 0;
}

static int parse_double(const char *flag, const char *s, double lo, double *out, ZnErr *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo)
        return zn_err(err, ZN_E_USAGE, "%s: expected a number >= %g, got '%s'", flag, lo, s);
    *out = v;
    return 0;
}

int zn_train_flag(ZnTrainFlags *f, int argc, char **argv, int *i, ZnErr *err) {
    const char *a = argv[*i];
    static const char *known[] = {"--config", "--world-size", "--stage", "--model", "--steps",
                                  "--seed", "--train-batch-size", "--micro-batch", "--grad-accum",
                                  "--lr", "--steps-per-print", "--log", "--weight-decay", "--beta1",
                                  "--beta2", "--eps", "--max-grad-norm", "--warmup-steps", "--dtype",
                                  "--canonical", "--memory-report", "--comm-report", "--trace",
                                  "--checkpoint-dir", "--checkpoint-interval", "--resume", "--checkpoint-tag",
                                  "--universal-checkpoint", "--backend", "--rendezvous", "--test-repeat-layer", "--exact", NULL};
    int k = -1;
    for (int j = 0; known[j]; j++) if (!strcmp(a, known[j])) k = j;
    if (k < 0) return 0;
    /* switches without a value */
    if (k == 19) { f->args.canonical = 1; return 1; }
    if (k == 20) { f->memory_report = 1; return 1; }
    if (k == 21) { f->comm_report = 1; return 1; }
    if (k == 25) { f->resume = 1; return 1; }
    if (k == 27) { f->universal = 1; return 1; }
    if (k == 31) { f->args.exact = 1; return 1; }
    if (*i + 1 >= argc) { zn_err(err, ZN_E_USAGE, "%s needs a value", a); return -1; }
    const char *v = argv[++*i];
    long n;
    int rc = 0;
    switch (k) {
    case 0: f->config_path = v; break;
    case 1: if (!(rc = parse_long(a, v, 1, 4096, &n, err))) f->args.world_size = (int)n; break;
    case 2: if (!(rc = parse_long(a, v, 0, 3, &n, err))) f->args.stage = (int)n; break;
    case 3: f->model_spec = v; break;
    case 4: rc = parse_long(a, v, 0, 100000000, &f->steps, err); break;
    case 5: rc = parse_long(a, v, 0, 0x7fffffffL, &f->args.seed, err); break;
    case 6: rc = parse_long(a, v, 1, 1L << 30, &f->args.train_batch_size, err); break;
    case 7: rc = parse_long(a, v, 1, 1L << 30, &f->args.micro_batch, err); break;
    case 8: rc = parse_long(a, v, 1, 1L << 30, &f->args.grad_accum, err); break;
    case 9: rc = parse_double(a, v, 0.0, &f->args.lr, err); break;
    case 10: rc = parse_long(a, v, 0, 1L << 30, &f->print_every, err); break;
    case 11: f->log_path = v; break;
    case 12: rc = parse_double(a, v, 0.0, &f->args.weight_decay, err); break;
    case 13: rc = parse_double(a, v, 0.0, &f->args.beta1, err); break;
    case 14: rc = parse_double(a, v, 0.0, &f->args.beta2, err); break;
    case 15: rc = parse_double(a, v, 0.0, &f->args.eps, err); break;
    case 16: rc = parse_double(a, v, 0.0, &f->args.max_grad_norm, err); break;
    case 17: rc = parse_long(a, v, 1, 1L << 30, &f->args.warmup_steps, err); break;
    case 22: f->trace_path = v; break;
    case 23: f->ckpt_dir = v; break;
    case 24: rc = parse_long(a, v, 1, 1L << 40, &f->ckpt_interval, err); break;
    case 26: f->ckpt_tag = v; break;
    case 28: f->backend = v; break;
    case 29: f->rendezvous = v; break;
    case 30: {   /* R:L -- the divergent-control-flow test hook; strtol, as sscanf's %d overflows into UB */
        char *end, *end2 = NULL;
        errno = 0;
        long r = strtol(v, &end, 10), l = -1;
        if (end != v && *end == ':') l = strtol(end + 1, &end2, 10);
        if (errno || l < 0 || end2 == end + 1 || *end2 || r < 0 || r >= 4096 || l >= ZN_MAX_LAYERS)
            rc = zn_err(err, ZN_E_USAGE, "--test-repeat-layer: expected RANK:LAYER (0..4095:0..%d), got '%s'",
                        ZN_MAX_LAYERS - 1, v);
        else f->repeat_rank = (int)r, f->repeat_layer = (int)l;
        break;
    }
    case 18:
        if (!strcmp(v, "fp32")) f->args.dtype = ZN_F32;
        else if (!strcmp(v, "fp16")) f->args.dtype = ZN_F16;
        else if (!strcmp(v, "bf16")) f->args.dtype = ZN_BF16;
        else rc = zn_err(err, ZN_E_USAGE, "--dtype: expected fp32, fp16 or bf16, got '%s'", v);
        break;
    }
    return rc ? -1 : 1;
}

int zn_train_resolve(const ZnTrainFlags *f, const char *config_text, ZnRunOpts *o, ZnErr *err) {
    memset(o, 0, sizeof *o);
    int rc = zn_model_parse(f->model_spec ? f->model_spec : ZN_DEFAULT_MODEL, &o->model, err);
    if (rc) return rc;
    ZnConfigArgs args = f->args;
    if (args.world_size < 1) args.world_size = ZN_DEFAULT_WORLD;
    args.hidden_size = zn_model_hidden_size(&o->model);
    /* like the HF Trainer, the run length fills a schedule's "auto" total_num_steps */
    args.total_steps = f->steps >= 0 ? f->steps : ZN_DEFAULT_STEPS;
    if (f->config_path && !config_text)
        rc = zn_config_load(f->config_path, &args, &o->cfg, err);
    else if (config_text)
        rc = zn_config_parse(config_text, strlen(config_text), f->config_path ? f->config_path : "config",
                             &args, &o->cfg, err);
    else {
        /* the built-in config leaves the batch to the flags; with none, micro 16 */
        if (args.train_batch_size < 0 && args.micro_batch < 0 && args.grad_accum < 0)
            args.micro_batch = ZN_DEFAULT_MICRO;
        rc = zn_config_parse(default_config, strlen(default_config), "built-in config", &args, &o->cfg, err);
    }
    if (rc) return rc;
    /* what this build does not train yet is refused, never silently ignored */
    if (o->cfg.zero.offload_optimizer.device != ZN_OFFLOAD_NONE || o->cfg.zero.offload_param.device != ZN_OFFLOAD_NONE)
        return zn_err(err, ZN_E_USAGE, "zero_optimization.offload_*: offload is not available in this build");
    o->world = args.world_size;
    o->steps = f->steps >= 0 ? f->steps : ZN_DEFAULT_STEPS;
    o->print_every = f->print_every >= 0 ? f->print_every
                   : o->cfg.steps_per_print > 0 ? o->cfg.steps_per_print : ZN_DEFAULT_PRINT;
    o->log_path = f->log_path;
    o->memory_report = f->memory_report || o->cfg.memory_breakdown;
    o->time_breakdown = o->cfg.wall_clock_breakdown;
    o->comm_report = f->comm_report;
    o->trace_path = f->trace_path;
    o->fault_rank = -1;
    o->inject_rank = -1;
    o->repeat_on = f->repeat_rank >= 0;
    o->repeat_rank = f->repeat_rank;
    o->repeat_layer = f->repeat_layer;
    o->ckpt_dir = f->ckpt_dir;
    o->ckpt_interval = f->ckpt_interval;
    o->resume = f->resume;
    o->ckpt_tag = f->ckpt_tag;
    o->universal = f->universal;
    if ((o->resume || o->ckpt_interval > 0) && !o->ckpt_dir)
        return zn_err(err, ZN_E_USAGE, "--resume and --checkpoint-interval need --checkpoint-dir");
    if (o->universal && !o->resume)
        return zn_err(err, ZN_E_USAGE, "--universal-checkpoint only applies with --resume");
    snprintf(o->model_spec, sizeof o->model_spec, "%s", f->model_spec ? f->model_spec : ZN_DEFAULT_MODEL);
    o->config_text = config_text ? strdup(config_text) : NULL;
    if (!config_text && f->config_path) {   /* what was read from the file, for the manifest */
        size_t n;
        char *buf = NULL;
        FILE *cf = fopen(f->config_path, "rb");
        if (cf) {
            buf = malloc(1 << 20);
            n = buf ? fread(buf, 1, (1 << 20) - 1, cf) : 0;
            if (buf) buf[n] = 0;
            fclose(cf);
        }
        o->config_text = buf;
    }
    return 0;
}

void zn_run_opts_free(ZnRunOpts *o) {
    free(o->config_text);
    o->config_text = NULL;
}

/* What every rank of a multi-process run must agree on: the config text,
 * the model and every setting the run resolved (Z-PROC-005). The summary
 * lists the settings by name, so a mismatch can say which one differs. */
static ZnConfigId config_id(const ZnRunOpts *o) {
    ZnConfigId id;
    const ZnConfig *c = &o->cfg;
    char sum[1024];   /* cut to ZN_CONFIG_SUMMARY below: the hash still covers everything */
    snprintf(sum, sizeof sum,
             "stage=%d model=%s dtype=%s world=%d micro_batch=%ld grad_accum=%ld train_batch=%ld steps=%ld "
             "seed=%ld lr=%.9g canonical=%d exact=%d checkpoint_interval=%ld resume=%d universal=%d tag=%s",
             c->zero.stage, o->model_spec, zn_dtype_name(c->model_dtype), o->world, c->micro_batch, c->grad_accum,
             c->train_batch_size, o->steps, (long)c->seed, c->lr, c->canonical, c->exact, o->ckpt_interval,
             o->resume, o->universal, o->ckpt_tag ? o->ckpt_tag : "");
    size_t n = strnlen(sum, sizeof id.summary - 1);
    memcpy(id.summary, sum, n);
    id.summary[n] = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "world=%d stage=%d dtype=%d micro=%ld ga=%ld tbs=%ld steps=%ld seed=%ld lr=%.17g "
             "canonical=%d ckpt=%ld resume=%d universal=%d tag=%s",
             o->world, c->zero.stage, (int)c->model_dtype, c->micro_batch, c->grad_accum, c->train_batch_size,
             o->steps, (long)c->seed, c->lr, c->canonical, o->ckpt_interval, o->resume, o->universal,
             o->ckpt_tag ? o->ckpt_tag : "");
    uint64_t h = zn_fnv_str(ZN_FNV_INIT, buf);
    h = zn_fnv_str(h, c->exact ? "exact" : "fast");
    h = zn_fnv_str(h, o->model_spec);
    id.hash = zn_fnv_str(h, o->config_text);
    return id;
}

int zn_cmd_train(int argc, char **argv) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    ZnErr err = {0};
    for (int i = 0; i < argc; i++) {
        int c = zn_train_flag(&f, argc, argv, &i, &err);
        if (c < 0) goto usage_error;
        if (c == 0) {
            zn_err(&err, ZN_E_USAGE, "unknown flag '%s' for 'zinc train'", argv[i]);
            goto usage_error;
        }
    }
    ZnBackend backend = ZN_BACKEND_SIM;
    if (f.backend && zn_backend_parse(f.backend, &backend, &err)) goto usage_error;
    const int multi = backend == ZN_BACKEND_TCP || backend == ZN_BACKEND_MPI || backend == ZN_BACKEND_NCCL;
    if (!multi && f.rendezvous) {
        zn_err(&err, ZN_E_USAGE, "--rendezvous applies to --backend tcp and nccl (the simulator runs every rank itself)");
        goto usage_error;
    }
    ZnProc proc = {0};
    if (multi) {   /* this process is one rank */
        if (zn_proc_start(backend, f.rendezvous, f.args.world_size, &proc, &err)) goto proc_error;
        f.args.world_size = proc.world;
    }
    ZnRunOpts o;
    if (zn_train_resolve(&f, NULL, &o, &err)) {
        if (multi) zn_proc_end(&proc, 0);
        goto usage_error;
    }
    o.out = proc.rank == 0 ? stdout : NULL;
    o.device_cuda = backend == ZN_BACKEND_CUDA || backend == ZN_BACKEND_NCCL;
    const ZnConfigId cid = multi ? config_id(&o) : (ZnConfigId){0};
    if (multi && (zn_proc_check_config(&proc, &cid, &err) ||
                  (backend == ZN_BACKEND_NCCL && zn_proc_nccl(&proc, o.cfg.exact, &err)))) {
        zn_run_opts_free(&o);
        zn_proc_end(&proc, 0);
        goto proc_error;
    }
    o.proc_comm = proc.comm;
    o.proc_dev = proc.dev;
    char how[96];
    if (backend == ZN_BACKEND_SIM) snprintf(how, sizeof how, "simulated");
    else if (backend == ZN_BACKEND_CUDA) snprintf(how, sizeof how, "simulated on one GPU, %s mode", o.cfg.exact ? "exact" : "fast");
    else snprintf(how, sizeof how, "%d processes, backend %s", proc.world, zn_backend_name(backend));
    if (proc.rank == 0)
        printf("zinc train: %s, stage %d, world size %d (%s), micro batch %ld, grad accum %ld, "
               "train batch %ld, %ld steps\n",
               f.model_spec ? f.model_spec : ZN_DEFAULT_MODEL, o.cfg.zero.stage, o.world, how, o.cfg.micro_batch,
               o.cfg.grad_accum, o.cfg.train_batch_size, o.steps);
    fflush(stdout);
    ZnRunResult res;
    int rc = zn_run(&o, &res, &err);
    zn_run_opts_free(&o);
    if (multi) zn_proc_end(&proc, rc == 0);
    if (rc) {
        fprintf(stderr, "zinc: error: %s\n", err.msg);
        return err.code == ZN_E_USAGE ? 2 : 1;
    }
    zn_run_result_free(&res);
    return 0;
proc_error:
    fprintf(stderr, "zinc: error: %s\n", err.msg);
    return err.code == ZN_E_USAGE ? 2 : 1;
usage_error:
    fprintf(stderr, "zinc: error: %s\n", err.msg);
    return 2;
}
