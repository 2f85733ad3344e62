/* cli_train.c: `zinc train` and the flags it shares with the other tools. */
#include "app/cli.h"
#include "app/cli_estimate.h"
#include "app/dryrun.h"
#include "app/plan_report.h"
#include "core/cpu.h"
#include "core/alloc.h"
#include "app/proc.h"
#include <errno.h>
#include <math.h>
#include <stddef.h>
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

/* --test-repeat-layer R:L -- the divergent-control-flow test hook; strtol, as
   sscanf's %d overflows into UB */
static int parse_repeat(ZnTrainFlags *f, const char *a, const char *v, ZnErr *err) {
    (void)a;
    char *end, *end2 = NULL;
    errno = 0;
    long r = strtol(v, &end, 10), l = -1;
    if (end != v && *end == ':') l = strtol(end + 1, &end2, 10);
    if (errno || l < 0 || end2 == end + 1 || *end2 || r < 0 || r >= 4096 || l >= ZN_MAX_LAYERS)
        return zn_err(err, ZN_E_USAGE, "--test-repeat-layer: expected RANK:LAYER (0..4095:0..%d), got '%s'",
                      ZN_MAX_LAYERS - 1, v);
    f->repeat_rank = (int)r;
    f->repeat_layer = (int)l;
    return 0;
}

static int parse_dtype(ZnTrainFlags *f, const char *a, const char *v, ZnErr *err) {
    (void)a;
    if (!strcmp(v, "fp32")) f->args.dtype = ZN_F32;
    else if (!strcmp(v, "fp16")) f->args.dtype = ZN_F16;
    else if (!strcmp(v, "bf16")) f->args.dtype = ZN_BF16;
    else return zn_err(err, ZN_E_USAGE, "--dtype: expected fp32, fp16 or bf16, got '%s'", v);
    return 0;
}

/* --device-memory: bytes, or a number with a unit: KB MB GB TB (powers of
   1000, as GPU data sheets count) or KiB MiB GiB TiB (powers of 1024). */
static int parse_params(ZnTrainFlags *f, const char *a, const char *v, ZnErr *err) {
    return zn_est_parse_count(a, v, 1, &f->params, err);
}

static int parse_device_memory(ZnTrainFlags *f, const char *a, const char *v, ZnErr *err) {
    static const struct { const char *unit; double mul; } U[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    for (size_t i = 0; !errno && end != v && x > 0 && i < sizeof U / sizeof *U; i++) {
        if (strcmp(end, U[i].unit)) continue;
        double b = x * U[i].mul;
        if (b >= 1.0 && b < 9.0e18) {
            f->device_memory = (long)b;
            return 0;
        }
    }
    return zn_err(err, ZN_E_USAGE, "%s: expected a size such as 80GB, 40GiB or 1000000 (bytes), got '%s'", a, v);
}

/* The flags of `zinc train` (and of the tools that share them), one row
   each: where the value goes, what it may be, and its words in the usage
   (`zinc help`, the README): rows are in usage order; a usage ending in a
   newline ends its line; NULL: written in another row's usage, or a test
   hook left out. */
typedef enum { FL_SWITCH, FL_STR, FL_INT, FL_LONG, FL_DOUBLE, FL_FN } FlagKind;
typedef struct {
    const char *name;
    FlagKind kind;
    size_t off;                 /* field of ZnTrainFlags */
    long lo, hi;                /* FL_INT, FL_LONG: range; FL_DOUBLE: lo */
    int (*fn)(ZnTrainFlags *f, const char *flag, const char *v, ZnErr *err);   /* FL_FN */
    const char *usage;
} Flag;

/* zinc plan prices today's largest clusters; the simulator runs a thread a
   rank, and a run of processes is bounded by its launcher long before this */
#define ZN_PLAN_MAX_WORLD 131072
#define ZN_TRAIN_MAX_WORLD 4096
#define F(x) offsetof(ZnTrainFlags, x)
static const Flag TRAIN_FLAGS[] = {
    {"--config", FL_STR, F(config_path), .usage = "[--config FILE]"},
    {"--world-size", FL_INT, F(args.world_size), 1, ZN_PLAN_MAX_WORLD, .usage = "[--world-size N]"},
    {"--ranks-per-node", FL_INT, F(ranks_per_node), 1, 4096, .usage = "[--ranks-per-node P]\n"},
    {"--stage", FL_INT, F(args.stage), 0, 3, .usage = "[--stage 0-3]"},
    {"--model", FL_STR, F(model_spec), .usage = "[--model mlp:D0,D1,...,Dk|gpt2-tiny|gpt2|gpt2:key=value,...|gpt3-175b | --params P]\n"},
    {"--params", FL_FN, .fn = parse_params},
    {"--data", FL_STR, F(data_spec), .usage = "[--data text:FILE|tokens:FILE]"},
    {"--seq-len", FL_LONG, F(seq_len), 1, 1L << 16, .usage = "[--seq-len T]\n"},
    {"--steps", FL_LONG, F(steps), 0, 100000000, .usage = "[--steps S]"},
    {"--seed", FL_LONG, F(args.seed), 0, 0x7fffffffL, .usage = "[--seed X]"},
    {"--train-batch-size", FL_LONG, F(args.train_batch_size), 1, 1L << 30, .usage = "[--train-batch-size B]"},
    {"--micro-batch", FL_LONG, F(args.micro_batch), 1, 1L << 30, .usage = "[--micro-batch M]\n"},
    {"--grad-accum", FL_LONG, F(args.grad_accum), 1, 1L << 30, .usage = "[--grad-accum G]"},
    {"--lr", FL_DOUBLE, F(args.lr), .usage = "[--lr LR]"},
    {"--weight-decay", FL_DOUBLE, F(args.weight_decay), .usage = "[--weight-decay WD]"},
    {"--beta1", FL_DOUBLE, F(args.beta1), .usage = "[--beta1 B1]"},
    {"--beta2", FL_DOUBLE, F(args.beta2), .usage = "[--beta2 B2]\n"},
    {"--eps", FL_DOUBLE, F(args.eps), .usage = "[--eps EPS]"},
    {"--max-grad-norm", FL_DOUBLE, F(args.max_grad_norm), .usage = "[--max-grad-norm C]"},
    {"--warmup-steps", FL_LONG, F(args.warmup_steps), 0, 1L << 30, .usage = "[--warmup-steps W]"},
    {"--dtype", FL_FN, .fn = parse_dtype, .usage = "[--dtype fp32|fp16|bf16]\n"},
    {"--canonical", FL_SWITCH, F(args.canonical), .usage = "[--canonical]"},
    {"--steps-per-print", FL_LONG, F(print_every), 0, 1L << 30, .usage = "[--steps-per-print K]"},
    {"--log", FL_STR, F(log_path), .usage = "[--log FILE.csv|FILE.jsonl]\n"},
    {"--memory-report", FL_SWITCH, F(memory_report), .usage = "[--memory-report]"},
    {"--comm-report", FL_SWITCH, F(comm_report), .usage = "[--comm-report]"},
    {"--device-memory", FL_FN, .fn = parse_device_memory, .usage = "[--device-memory SIZE]\n"},
    {"--dry-run", FL_SWITCH, F(dry_run), .usage = "[--dry-run [--machine NAME|FILE.json] [--json] [--svg FILE]]"},
    {"--machine", FL_STR, F(machine)},
    {"--json", FL_SWITCH, F(json)},
    {"--svg", FL_STR, F(svg_path)},
    {"--trace", FL_STR, F(trace_path), .usage = "[--trace FILE.json]\n"},
    {"--checkpoint-dir", FL_STR, F(ckpt_dir), .usage = "[--checkpoint-dir DIR --checkpoint-interval K]"},
    {"--checkpoint-interval", FL_LONG, F(ckpt_interval), 1, 1L << 40},
    {"--resume", FL_SWITCH, F(resume), .usage = "[--resume [--checkpoint-tag TAG]\n"},
    {"--checkpoint-tag", FL_STR, F(ckpt_tag)},
    {"--universal-checkpoint", FL_SWITCH, F(universal), .usage = " [--universal-checkpoint]]"},
    {"--backend", FL_STR, F(backend), .usage = "[--backend sim|cuda|tcp|mpi|nccl]"},
    {"--threads", FL_INT, F(threads), 1, ZN_MAX_HOST_THREADS, .usage = "[--threads N]"},
    {"--exact", FL_SWITCH, F(args.exact), .usage = "[--exact]\n"},
    {"--rendezvous", FL_STR, F(rendezvous), .usage = "[--rendezvous env|tcp://HOST:PORT|file:PATH]"},
    {"--comm-timeout", FL_DOUBLE, F(comm_timeout), 1, .usage = "[--comm-timeout S]"},
    {"--verbose", FL_SWITCH, F(verbose), .usage = "[--verbose]\n"},
    {"--test-repeat-layer", FL_FN, .fn = parse_repeat},
};
#undef F

/* The usage lines of `zinc train`, from the flag table. */
static void print_train_usage(FILE *out) {
    const char *lead = "zinc train ";
    int fresh = 1;   /* at the start of a line */
    fputs(lead, out);
    for (size_t j = 0; j < sizeof TRAIN_FLAGS / sizeof *TRAIN_FLAGS; j++) {
        const char *u = TRAIN_FLAGS[j].usage;
        if (!u) continue;
        if (fresh && j) fprintf(out, "%*s", (int)strlen(lead), "");
        else if (!fresh) fputc(' ', out);
        fputs(u, out);
        fresh = u[strlen(u) - 1] == '\n';
    }
    if (!fresh) fputc('\n', out);
}

int zn_train_flag(ZnTrainFlags *f, int argc, char **argv, int *i, ZnErr *err) {
    const char *a = argv[*i];
    const Flag *fl = NULL;
    for (size_t j = 0; j < sizeof TRAIN_FLAGS / sizeof *TRAIN_FLAGS; j++)
        if (!strcmp(a, TRAIN_FLAGS[j].name)) fl = &TRAIN_FLAGS[j];
    if (!fl) return 0;
    char *field = (char *)f + fl->off;
    if (fl->kind == FL_SWITCH) {
        *(int *)field = 1;
        /* at once, so a bad flag after it is reported with its place too */
        if (fl->off == offsetof(ZnTrainFlags, verbose)) zn_err_set_verbose(1);
        return 1;
    }
    if (*i + 1 >= argc) { zn_err(err, ZN_E_USAGE, "%s needs a value", a); return -1; }
    const char *v = argv[++*i];
    long n = 0;
    int rc = 0;
    switch (fl->kind) {
    case FL_STR: *(const char **)field = v; break;
    case FL_INT: if (!(rc = parse_long(a, v, fl->lo, fl->hi, &n, err))) *(int *)field = (int)n; break;
    case FL_LONG: rc = parse_long(a, v, fl->lo, fl->hi, (long *)field, err); break;
    case FL_DOUBLE: rc = parse_double(a, v, (double)fl->lo, (double *)field, err); break;
    case FL_FN: rc = fl->fn(f, a, v, err); break;
    case FL_SWITCH: break;
    }
    return rc ? -1 : 1;
}

int zn_train_resolve(const ZnTrainFlags *f, const char *config_text, ZnRunOpts *o, ZnErr *err) {
    memset(o, 0, sizeof *o);
    /* host threads and instruction set: --threads, else ZINC_NUM_THREADS (Z-HOST-002) */
    int rc = zn_host_env_check(err);
    if (rc) return rc;
    zn_set_host_threads(f->threads);
    /* --params: the GPT-3 shape of about that many parameters */
    char shaped[128];
    const char *spec = f->model_spec ? f->model_spec : ZN_DEFAULT_MODEL;
    if (f->params && f->model_spec)
        return zn_err(err, ZN_E_USAGE, "--params builds a model: give --model or --params, not both");
    if (f->params && (rc = zn_gpt3_spec_for(f->params, shaped, sizeof shaped, err))) return rc;
    if (f->params) spec = shaped;
    rc = zn_model_parse(spec, &o->model, err);
    if (rc) return rc;
    if (f->seq_len > 0 && (rc = zn_model_set_seq_len(&o->model, f->seq_len, err))) return rc;
    /* a dry run reads no text: its step looks at no token (Z-DRY-005) */
    if (o->model.kind == ZN_MODEL_GPT2 && !f->data_spec && !f->dry_run)
        return zn_err(err, ZN_E_USAGE, "--model %s trains on text: give --data text:FILE or --data tokens:FILE",
                      spec);
    if (o->model.kind != ZN_MODEL_GPT2 && f->data_spec)
        return zn_err(err, ZN_E_USAGE, "--data feeds a language model (--model gpt2...); the MLP makes its own data");
    if (f->data_spec) snprintf(o->data_spec, sizeof o->data_spec, "%s", f->data_spec);
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
    o->world = zn_world(args.world_size, 0, f->ranks_per_node);
    if (f->ranks_per_node > 0 && args.world_size % f->ranks_per_node)
        return zn_err(err, ZN_E_USAGE, "--ranks-per-node %d does not divide --world-size %d into whole nodes",
                      f->ranks_per_node, args.world_size);
    o->steps = f->steps >= 0 ? f->steps : ZN_DEFAULT_STEPS;
    o->print_every = f->print_every >= 0 ? f->print_every
                   : o->cfg.steps_per_print > 0 ? o->cfg.steps_per_print : ZN_DEFAULT_PRINT;
    o->log_path = f->log_path;
    o->memory_report = f->memory_report || o->cfg.memory_breakdown;
    o->time_breakdown = o->cfg.wall_clock_breakdown;
    o->comm_report = f->comm_report;
    o->device_memory = f->device_memory;
    o->trace_path = f->trace_path;
    o->hooks.fault_rank = -1;
    o->hooks.inject_rank = -1;
    o->hooks.repeat_on = f->repeat_rank >= 0;
    o->hooks.repeat_rank = f->repeat_rank;
    o->hooks.repeat_layer = f->repeat_layer;
    o->ckpt_dir = f->ckpt_dir;
    o->ckpt_interval = f->ckpt_interval;
    o->resume = f->resume;
    o->ckpt_tag = f->ckpt_tag;
    o->universal = f->universal;
    if ((o->resume || o->ckpt_interval > 0) && !o->ckpt_dir)
        return zn_err(err, ZN_E_USAGE, "--resume and --checkpoint-interval need --checkpoint-dir");
    if (o->universal && !o->resume)
        return zn_err(err, ZN_E_USAGE, "--universal-checkpoint only applies with --resume");
    snprintf(o->model_spec, sizeof o->model_spec, "%s", spec);
    /* the text a checkpoint's manifest records: without it a resume could
       not say which config wrote the checkpoint, so its allocation counts */
    o->config_text = config_text ? zn_strdup(ZN_HOST_APP, config_text) : NULL;
    if (config_text && !o->config_text) return zn_nomem(err);
    if (!config_text && f->config_path) {   /* what was read from the file, for the manifest */
        size_t n;
        char *buf = NULL;
        FILE *cf = fopen(f->config_path, "rb");
        if (cf) {
            buf = zn_malloc(ZN_HOST_APP, 1 << 20);
            n = buf ? fread(buf, 1, (1 << 20) - 1, cf) : 0;
            if (buf) buf[n] = 0;
            fclose(cf);
            if (!buf) return zn_nomem(err);
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
             c->zero.stage, o->model_spec, zn_dtype_name(c->model_dtype), o->world.size, c->micro_batch, c->grad_accum,
             c->train_batch_size, o->steps, (long)c->seed, c->lr, c->canonical, c->exact, o->ckpt_interval,
             o->resume, o->universal, o->ckpt_tag ? o->ckpt_tag : "");
    size_t n = strnlen(sum, sizeof id.summary - 1);
    memcpy(id.summary, sum, n);
    id.summary[n] = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "world=%d stage=%d dtype=%d micro=%ld ga=%ld tbs=%ld steps=%ld seed=%ld lr=%.17g "
             "canonical=%d ckpt=%ld resume=%d universal=%d tag=%s",
             o->world.size, c->zero.stage, (int)c->model_dtype, c->micro_batch, c->grad_accum, c->train_batch_size,
             o->steps, (long)c->seed, c->lr, c->canonical, o->ckpt_interval, o->resume, o->universal,
             o->ckpt_tag ? o->ckpt_tag : "");
    uint64_t h = zn_fnv_str(ZN_FNV_INIT, buf);
    h = zn_fnv_str(h, c->exact ? "exact" : "fast");
    h = zn_fnv_str(h, o->model_spec);
    id.hash = zn_fnv_str(h, o->config_text);
    return id;
}

/* A dry run's report (Z-CAP-*): the step priced on --machine, else on
 * dgx-h100 where the run's nodes can be its nodes; the machine sets the
 * ranks per node when the flag does not, and --device-memory else the
 * machine's memory is the capacity to fit in. */
#define ZN_DEFAULT_MACHINE "dgx-h100"
static int plan(const ZnTrainFlags *f, ZnRunOpts *o, ZnErr *err) {
    ZnMachine m;
    ZnPlanOpts po = {0};
    int rc = zn_machine_load(f->machine ? f->machine : ZN_DEFAULT_MACHINE, &m, err);
    if (rc) return rc;
    const int W = o->world.size, G = m.gpus_per_node;
    int use = 1;
    if (!f->ranks_per_node && W > G) {
        if (W % G == 0) o->world = zn_world(W, 0, G);
        else if (f->machine)
            return zn_err(err, ZN_E_USAGE, "--world-size %d is not a whole number of %s nodes of %d GPUs", W, m.name, G);
        else use = 0;
    } else if (!f->machine && o->world.per_node != G && !(o->world.per_node == W && W <= G)) {
        use = 0;   /* the flag's nodes are not the default machine's: no time rather than an error */
    }
    if (use) {
        po.machine = &m;
        po.capacity = (long)m.device_memory;
    }
    po.default_machine = !f->machine;
    if (f->device_memory > 0) po.capacity = f->device_memory;
    po.json = f->json;
    po.svg_path = f->svg_path;
    return zn_plan_run(o, &po, stdout, err);
}

static int train(int argc, char **argv, int dry) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.dry_run = dry;
    ZnErr err = {0};
    for (int i = 0; i < argc; i++) {
        int c = zn_train_flag(&f, argc, argv, &i, &err);
        if (c < 0) goto usage_error;
        if (c == 0) {
            zn_err(&err, ZN_E_USAGE, "unknown flag '%s' for 'zinc %s'", argv[i], dry ? "plan" : "train");
            goto usage_error;
        }
    }
    if (!f.dry_run && f.args.world_size > ZN_TRAIN_MAX_WORLD) {   /* a plan reaches further than a run (Z-DRY-011) */
        zn_err(&err, ZN_E_USAGE, "--world-size: zinc train runs at most %d ranks, got %d (a dry run, zinc plan, "
               "takes up to %d)", ZN_TRAIN_MAX_WORLD, f.args.world_size, ZN_PLAN_MAX_WORLD);
        goto usage_error;
    }
    if (!f.dry_run && (f.machine || f.json || f.svg_path)) {
        zn_err(&err, ZN_E_USAGE, "%s describes a dry run: add --dry-run (or use zinc plan)",
               f.machine ? "--machine" : f.json ? "--json" : "--svg");
        goto usage_error;
    }
    if (f.comm_timeout > 0) {   /* the transports read it where they are made (Z-RDV-006) */
        char v[40];
        snprintf(v, sizeof v, "%.17g", f.comm_timeout);
        setenv("ZINC_COMM_TIMEOUT", v, 1);
    }
    ZnBackend backend = ZN_BACKEND_SIM;
    if (f.backend && zn_backend_parse(f.backend, &backend, &err)) goto usage_error;
    if (zn_isa_env_problem()) fprintf(stderr, "zinc: warning: %s\n", zn_isa_env_problem());
    const int multi = backend == ZN_BACKEND_TCP || backend == ZN_BACKEND_MPI || backend == ZN_BACKEND_NCCL;
    if (!multi && f.rendezvous) {
        zn_err(&err, ZN_E_USAGE, "--rendezvous applies to --backend tcp and nccl (the simulator runs every rank itself)");
        goto usage_error;
    }
    if (multi && f.dry_run) {
        zn_err(&err, ZN_E_USAGE, "--dry-run simulates one rank itself: use it without --backend %s",
               zn_backend_name(backend));
        goto usage_error;
    }
    if (multi && f.ranks_per_node > 0) {
        zn_err(&err, ZN_E_USAGE, "--ranks-per-node sets the simulator's nodes; processes take theirs from the "
               "launcher (LOCAL_WORLD_SIZE: zinc launch --nproc-per-node P --nnodes M)");
        goto usage_error;
    }
    ZnProc proc = {0};
    if (multi) {   /* this process is one rank */
        if (zn_proc_start(backend, f.rendezvous, f.args.world_size, &proc, &err)) goto proc_error;
        f.args.world_size = proc.world.size;
    }
    ZnRunOpts o;
    if (zn_train_resolve(&f, NULL, &o, &err)) {
        if (multi) zn_proc_end(&proc, 0);
        goto usage_error;
    }
    if (multi) o.world = proc.world;   /* this process's rank and its node */
    if (multi) zn_proc_config_timeout(&proc, o.cfg.comm_timeout);
    o.out = proc.world.rank == 0 ? stdout : NULL;
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
    else snprintf(how, sizeof how, "%d processes, backend %s", proc.world.size, zn_backend_name(backend));
    /* --params: the count it built beside the spec (Z-CAP-008) */
    char built[96] = "";
    if (f.params) snprintf(built, sizeof built, " (%ld parameters for --params %lld)", zn_model_numel(&o.model), f.params);
    if (proc.world.rank == 0 && !f.json)
        printf("zinc train: %s%s, stage %d, world size %d (%s), micro batch %ld, grad accum %ld, "
               "train batch %ld, %ld steps\n",
               o.model_spec, built, o.cfg.zero.stage, o.world.size, how, o.cfg.micro_batch,
               o.cfg.grad_accum, o.cfg.train_batch_size, o.steps);
    fflush(stdout);
    if (f.dry_run) {   /* one rank on the meta device: memory and collectives, no training (Z-DRY-005) */
        int drc = plan(&f, &o, &err);
        zn_run_opts_free(&o);
        if (drc) {
            zn_err_print(stderr, "", &err);
            return err.code == ZN_E_USAGE ? 2 : 1;
        }
        return 0;
    }
    ZnRunResult res;
    int rc = zn_run(&o, &res, &err);
    zn_run_opts_free(&o);
    if (multi) zn_proc_end(&proc, rc == 0);
    if (rc) {
        zn_err_print(stderr, "", &err);
        return err.code == ZN_E_USAGE ? 2 : 1;
    }
    zn_run_result_free(&res);
    return 0;
proc_error:
    zn_err_print(stderr, "", &err);
    return err.code == ZN_E_USAGE ? 2 : 1;
usage_error:
    zn_err_print(stderr, "", &err);
    return 2;
}

int zn_cmd_train(int argc, char **argv) { return train(argc, argv, 0); }
int zn_cmd_plan(int argc, char **argv) { return train(argc, argv, 1); }

static void print_plan_usage(FILE *f) {
    fprintf(f, "usage: zinc plan [zinc train's flags] [--machine dgx-h100|dgx-a100|FILE.json] [--device-memory SIZE]\n"
               "  a dry run (zinc train --dry-run): memory per phase, tier and category, bytes per collective\n"
               "  and link, the largest micro-batch that fits, the step time on the machine. zinc train's flags:\n");
    print_train_usage(f);
}

const ZnCommand zn_train_command = {"train", zn_cmd_train, print_train_usage};
const ZnCommand zn_plan_command = {"plan", zn_cmd_plan, print_plan_usage};
