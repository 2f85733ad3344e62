/* test_dryrun.c: `zinc train --dry-run` (spec Z-DRY-*): the meta kernels and
 * the meta communicator, the dry run against a real simulated run byte for
 * byte, a 1.5B-parameter GPT-2 at 64 ranks in little real memory, and the
 * dry run's per-rank model states against DeepSpeed's estimators. */
#include "testutil.h"
#include "app/dryrun.h"
#include "app/run.h"
#include "comm/comm_meta.h"
#include "engine/estimate.h"

/* ------------------------------------------------------------------------ */
/* run options the way `zinc train` resolves them */

static ZnRunOpts opts(const char *model, const char *data, const char *cfg, int world, long steps, int dry) {
    ZnTrainFlags f = zt_train_flags(model, steps, world, -1);
    f.data_spec = data;
    f.dry_run = dry;   /* a dry run of a language model needs no --data */
    f.print_every = 0;
    return zt_resolve(&f, cfg);
}

static void assert_mem_cur_equal(const ZnMemStats *a, const ZnMemStats *b) {
    for (int c = 0; c < ZN_MEM_NCAT; c++) {
        if (a->cur[c] != b->cur[c]) fail_msg("%s: %ld != %ld", zn_mem_cat_name((ZnMemCat)c), a->cur[c], b->cur[c]);
    }
    assert_int_equal(a->cur_total, b->cur_total);
}

static void assert_comm_equal(const ZnCommStats *a, const ZnCommStats *b) {
    for (int op = 0; op < ZN_OP_N; op++) {
        assert_int_equal(a->calls[op], b->calls[op]);
        assert_int_equal(a->bytes_sent[op], b->bytes_sent[op]);
        assert_int_equal(a->bytes_recv[op], b->bytes_recv[op]);
    }
    assert_int_equal(a->ntags, b->ntags);
    for (int t = 0; t < a->ntags; t++) {
        long c1, s1, r1, c2, s2, r2;
        zn_comm_tag_totals(a, a->tags[t].tag, &c1, &s1, &r1);
        zn_comm_tag_totals(b, a->tags[t].tag, &c2, &s2, &r2);
        assert_int_equal(c1, c2);
        assert_int_equal(s1, s2);
        assert_int_equal(r1, r2);
    }
}

/* ------------------------------------------------------------------------ */
/* the meta device */

/* spec: Z-DRY-001 */
static void test_meta_device(void **state) {
    (void)state;
    ZnDevice d;
    zn_device_meta_init(&d);
    assert_true(d.meta);
    assert_false(d.host_addressable);
    ZnErr err = {0};
    /* a buffer far larger than this machine: counted, never allocated */
    const size_t big = (size_t)1 << 40;
    float *a = zn_dev_alloc(&d, big, ZN_MEM_MASTER32, &err);
    float *b = zn_dev_alloc_as(&d, 4000, 2000, ZN_MEM_PARAMS16, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(d.mem.cur[ZN_MEM_MASTER32], (long)big);
    assert_int_equal(d.mem.cur[ZN_MEM_PARAMS16], 2000);
    /* every kernel is there (GPT-2's too) and touches no buffer: valgrind
       and ASan would report a read or write through a token */
    const ZnKernels *k = d.k;
    void *const *fn = (void *const *)k;
    for (size_t i = 0; i < sizeof *k / sizeof(void *); i++) assert_non_null(fn[i]);
    void *const *lm_fn = (void *const *)k->lm;
    for (size_t i = 0; i < sizeof *k->lm / sizeof(void *); i++) assert_non_null(lm_fn[i]);
    k->upload(&d, a, "x", 1);
    k->copy(&d, a, b, 1000);
    k->zero(&d, a, big);
    k->round_dt(&d, ZN_F16, a, 1L << 38);
    k->adam(&d, 1000, a, b, a, a, NULL, 1, 1.0f, b, ZN_F16);
    k->gemm_nt(&d, 1000, 1000, 1000, a, b, NULL, a);
    k->lm->attn_fwd(&d, 4, 1024, 1600, 25, a, a, b);
    /* what comes back to the host is defined: zero, finite, loss 0 */
    ZnAbsMax m = k->absmax(&d, a, 1000);
    assert_true(m.maxabs == 0.0f && m.nonfinite == 0);
    uint64_t hi = 7, lo = 9;
    k->sumsq_fixed(&d, a, 1000, 3, &hi, &lo);
    assert_true(hi == 7 && lo == 9);   /* adds zero */
    assert_true(k->softmax_xent(&d, 16, 10, a, (const int *)b, 1.0f, a) == 0.0f);
    float host[4] = {1, 2, 3, 4};
    k->download(&d, host, a, sizeof host);
    for (int i = 0; i < 4; i++) assert_true(host[i] == 0.0f);
    zn_dev_free(&d, a);
    zn_dev_free(&d, b);
    assert_int_equal(d.mem.nallocs, 0);
    assert_int_equal(d.mem.cur_total, 0);
    assert_int_equal(d.mem.peak_total, (long)big + 2000);
    /* a capacity fails a meta allocation as it would a real one */
    d.capacity = 1000;
    assert_null(zn_dev_alloc(&d, 2000, ZN_MEM_GRADS, &err));
    assert_int_equal(err.code, ZN_E_NOMEM);
}

/* ------------------------------------------------------------------------ */
/* the meta communicator against the simulator's */

#define NCOLL_WORLD 3
typedef struct { ZnCommStats stats[NCOLL_WORLD]; } CollCtx;

/* The same calls on any communicator; buf and out hold 16 floats each
 * where it moves data (out: a reduce-scatter's result, a gather's source). */
static int some_collectives(ZnComm *c, float *buf, float *out, ZnErr *err) {
    long counts[NCOLL_WORLD] = {3, 4, 5}, even[NCOLL_WORLD];
    zn_comm_even_counts(12, NCOLL_WORLD, even);
    int rc = c->all_reduce(c, buf, 11, ZN_F32, ZN_SUM, "norm", err);
    if (!rc) rc = c->all_reduce(c, buf, 7, ZN_F16, ZN_MAX, "overflow", err);
    if (!rc) rc = c->reduce_scatter(c, buf, out, counts, ZN_F16, ZN_SUM, "grad_reduce", err);
    if (!rc) rc = c->all_gather(c, out, buf, counts, ZN_BF16, "param_gather", err);
    /* in place: the rank's piece at its own offset */
    if (!rc) rc = c->all_gather(c, buf + 4 * c->world.rank, buf, even, ZN_F32, "param_gather", err);
    if (!rc) rc = c->broadcast(c, buf, 9, ZN_F32, 1, "digest", err);
    if (!rc) rc = c->barrier(c, "sync", err);
    return rc;
}

static int coll_rank(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    CollCtx *ctx = arg;
    float buf[16] = {0}, out[16] = {0};
    zn_comm_stats_reset(&comm->stats);
    int rc = some_collectives(comm, buf, out, err);
    ctx->stats[rank] = comm->stats;
    return rc;
}

/* spec: Z-DRY-002 */
static void test_meta_comm_counts(void **state) {
    (void)state;
    CollCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ZnErr err = {0};
    assert_int_equal(zt_sim_run(NCOLL_WORLD, coll_rank, &ctx, 60, &err), 0);
    for (int r = 0; r < NCOLL_WORLD; r++) {
        ZnComm c;
        zn_comm_meta_init(&c, NCOLL_WORLD, r, 0);
        assert_int_equal(c.world.size, NCOLL_WORLD);
        assert_int_equal(c.world.rank, r);
        /* tokens stand for the buffers: the meta communicator reads none */
        ZnDevice d;
        zn_device_meta_init(&d);
        float *t1 = zn_dev_alloc(&d, 64, ZN_MEM_BUCKETS, &err), *t2 = zn_dev_alloc(&d, 64, ZN_MEM_BUCKETS, &err);
        assert_int_equal(some_collectives(&c, t1, t2, &err), 0);
        zn_dev_free(&d, t1);
        zn_dev_free(&d, t2);
        assert_comm_equal(&c.stats, &ctx.stats[r]);
        assert_true(c.stats.bytes_sent[ZN_OP_REDUCE_SCATTER] > 0);
    }
    /* and it fails a bad call as the real layer does */
    ZnComm c;
    zn_comm_meta_init(&c, 2, 0, 0);
    long bad[2] = {1, -1};
    assert_int_equal(c.all_gather(&c, NULL, NULL, bad, ZN_F32, "x", &err), ZN_E_USAGE);
    assert_int_equal(c.broadcast(&c, NULL, 1, ZN_F32, 2, "x", &err), ZN_E_USAGE);
}

/* ------------------------------------------------------------------------ */
/* the dry run against a real simulated run */

static const char *const CFG_FP16 = "{\"train_micro_batch_size_per_gpu\": 2, \"fp16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": %d%s}}";
static const char *const CFG_BF16 = "{\"train_micro_batch_size_per_gpu\": 2, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": %d%s}}";
static const char *const OFF_NONE = "";
static const char *const OFF_CPU = ", \"offload_optimizer\": {\"device\": \"cpu\"}";
static const char *const OFF_BOTH = ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}";

/* One comparison: the dry run's init (and, with steps 1, its step) against
 * zn_run's result for the same options. */
static void compare_with_sim(const char *model, const char *data, const char *fmt, int stage, const char *off,
                             int world, long steps) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, fmt, stage, off);
    ZnRunOpts o = opts(model, data, cfg, world, steps, 0);
    ZnErr err = {0};
    ZnDryRun dr;
    if (zn_dry_run(&o, steps > 0, &dr, &err)) fail_msg("dry run: %s", err.msg);
    ZnRunResult res;
    if (zn_run(&o, &res, &err)) fail_msg("run: %s", err.msg);
    if (steps == 0) {
        /* mem_end is taken after the final gather of the parameters, which
           frees what it allocates: cur is init's; the host tier's counters
           are untouched by it, peak included */
        assert_mem_cur_equal(&dr.init[ZN_DRY_DEVICE], &res.mem_end[0]);
        assert_mem_cur_equal(&dr.init[ZN_DRY_HOST], &res.host_end[0]);
        assert_int_equal(dr.init[ZN_DRY_HOST].peak_total, res.host_end[0].peak_total);
        assert_mem_cur_equal(&dr.init[ZN_DRY_NVME], &res.nvme_end[0]);
        assert_comm_equal(&dr.comm_init, &res.comm_init[0]);
        /* one rank stands for all: every rank holds the same bytes */
        for (int r = 1; r < world; r++) {
            assert_mem_cur_equal(&dr.init[ZN_DRY_DEVICE], &res.mem_end[r]);
            assert_mem_cur_equal(&dr.init[ZN_DRY_HOST], &res.host_end[r]);
        }
    } else {
        assert_true(dr.stepped);
        assert_mem_cur_equal(&dr.step[ZN_DRY_DEVICE], &res.mem_end[0]);
        assert_mem_cur_equal(&dr.step[ZN_DRY_HOST], &res.host_end[0]);
        /* the step's own peaks: the run resets the device peak before each
           step, and its final gather allocates less than the step did */
        for (int c = 0; c < ZN_MEM_NCAT; c++)
            if (c != ZN_MEM_BUCKETS) assert_int_equal(dr.step[ZN_DRY_DEVICE].peak[c], res.mem_end[0].peak[c]);
        assert_true(dr.step[ZN_DRY_DEVICE].peak_total >= dr.step[ZN_DRY_DEVICE].cur_total);
        assert_true(dr.step[ZN_DRY_DEVICE].peak[ZN_MEM_ACTIVATIONS] > 0);
        /* the step's collectives: the run's totals less init's */
        ZnCommStats step = res.comm_end[0];
        for (int op = 0; op < ZN_OP_N; op++) {
            step.calls[op] -= res.comm_init[0].calls[op];
            step.bytes_sent[op] -= res.comm_init[0].bytes_sent[op];
            step.bytes_recv[op] -= res.comm_init[0].bytes_recv[op];
        }
        for (int op = 0; op < ZN_OP_N; op++) {
            assert_int_equal(dr.comm_step.calls[op], step.calls[op]);
            assert_int_equal(dr.comm_step.bytes_sent[op], step.bytes_sent[op]);
            assert_int_equal(dr.comm_step.bytes_recv[op], step.bytes_recv[op]);
        }
    }
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
}

/* spec: Z-DRY-003 */
static void test_dry_equals_sim_init(void **state) {
    (void)state;
    const char *const offs[3] = {OFF_NONE, OFF_CPU, OFF_BOTH};
    for (int world = 1; world <= 4; world++)
        for (int stage = 0; stage <= 3; stage++)
            for (int k = 0; k < 3; k++) {
                if ((stage == 0 && k > 0) || (stage < 3 && k == 2)) continue;   /* offload: stages 1-3; params: 3 */
                /* 7 + 2 parameters of odd sizes: uneven splits and padding */
                compare_with_sim("mlp:7,13,5,3", NULL, CFG_FP16, stage, offs[k], world, 0);
            }
}

/* spec: Z-DRY-003 */
static void test_dry_equals_sim_nvme(void **state) {
    (void)state;
    /* the optimizer (and at stage 3 the parameters) on NVMe: the dry run
       writes no file, and counts what the swap files and their host
       buffers take; 1M parameters, so a partition is past the 1 MiB below
       which a group stays in host memory */
    char dir[] = "/tmp/zinc-dryrun-nvme-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char off[512];
    for (int stage = 1; stage <= 3; stage++) {
        snprintf(off, sizeof off, ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}%s%s%s", dir,
                 stage == 3 ? ", \"offload_param\": {\"device\": \"nvme\", \"max_in_cpu\": 0, \"nvme_path\": \"" : "", stage == 3 ? dir : "",
                 stage == 3 ? "\"}" : "");
        compare_with_sim("mlp:1024,1024,8", NULL, CFG_FP16, stage, off, 2, 0);
    }
    /* a step with parameters on NVMe: the dry run reads nothing (a meta
       buffer stands for each partition) and counts the step as a real one:
       the same device peaks and collectives as the real run's step */
    char cfg[1024];
    snprintf(cfg, sizeof cfg, CFG_BF16, 3, off);
    ZnRunOpts o = opts("mlp:1024,1024,8", NULL, cfg, 2, 1, 1);
    ZnDryRun dr;
    ZnErr err = {0};
    assert_int_equal(zn_dry_run(&o, 1, &dr, &err), 0);
    assert_true(dr.init[ZN_DRY_NVME].cur[ZN_MEM_PARAMS16] > 0);
    assert_true(dr.init[ZN_DRY_NVME].cur[ZN_MEM_MASTER32] > 0);
    compare_with_sim("mlp:1024,1024,8", NULL, CFG_BF16, 3, off, 2, 1);
    zn_run_opts_free(&o);
    assert_int_equal(rmdir(dir), 0);   /* empty: the runs' swap files went at exit */
}

static char *write_text(void) {
    static char path[] = "/tmp/zinc-dryrun-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++) fprintf(f, "the quick brown fox %d jumps over the lazy dog\n", i);
    fclose(f);
    return path;
}

/* spec: Z-DRY-003 */
static void test_dry_equals_sim_step(void **state) {
    (void)state;
    /* bf16 (no overflow check): the real run takes the step the dry run
       takes; fp16 may skip its first step, which allocates differently */
    for (int world = 1; world <= 3; world++)
        for (int stage = 0; stage <= 3; stage++) {
            compare_with_sim("mlp:7,13,5,3", NULL, CFG_BF16, stage, OFF_NONE, world, 1);
            if (stage >= 1) compare_with_sim("mlp:7,13,5,3", NULL, CFG_BF16, stage, OFF_CPU, world, 1);
        }
    char *text = write_text();
    char data[64];
    snprintf(data, sizeof data, "text:%s", text);
    for (int stage = 1; stage <= 3; stage++) {
        compare_with_sim("gpt2-tiny", data, CFG_BF16, stage, OFF_NONE, 2, 0);
        compare_with_sim("gpt2-tiny", data, CFG_BF16, stage, OFF_NONE, 2, 1);
    }
    compare_with_sim("gpt2-tiny", data, CFG_BF16, 3, OFF_BOTH, 2, 1);
    unlink(text);
}

/* ------------------------------------------------------------------------ */
/* it scales */

/* spec: Z-DRY-004 */
static void test_scale(void **state) {
    (void)state;
    static const char *const models[2] = {"gpt2:n_layer=48,n_embd=1600,n_head=25",
                                          "mlp:16384,16384,16384,16384,16384,10"};
    const long rss0 = zt_maxrss_kb();
    for (int m = 0; m < 2; m++)
        for (int stage = 1; stage <= 3; stage++) {
            char cfg[512];
            snprintf(cfg, sizeof cfg, CFG_FP16, stage, OFF_NONE);
            ZnRunOpts o = opts(models[m], NULL, cfg, 64, 1, 1);
            ZnErr err = {0};
            ZnDryRun dr;
            if (zn_dry_run(&o, 1, &dr, &err)) fail_msg("%s stage %d: %s", models[m], stage, err.msg);
            assert_true(dr.numel > 1000000000L);
            assert_true(dr.stepped);
            /* the partition: DeepSpeed's flat padding to 2N (stages 1/2),
               ceil(numel/N) per parameter (stage 3) */
            long part = 0;
            if (stage < 3) {
                part = (dr.numel + 127) / 128 * 128 / 64;
            } else {
                for (int p = 0; p < o.model.nparams; p++) part += (o.model.params[p].numel + 63) / 64;
            }
            assert_int_equal(dr.part_n, part);
            const ZnMemStats *d = &dr.init[ZN_DRY_DEVICE];
            assert_int_equal(d->cur[ZN_MEM_MASTER32], 4 * part);
            assert_int_equal(d->cur[ZN_MEM_EXP_AVG], 4 * part);
            assert_int_equal(d->cur[ZN_MEM_EXP_AVG_SQ], 4 * part);
            assert_int_equal(d->cur[ZN_MEM_GRADS], stage == 1 ? 2 * 64 * part : 2 * part);
            assert_int_equal(d->cur[ZN_MEM_PARAMS16], stage < 3 ? 2 * 64 * part : 2 * part + 2 * dr.persistent);
            /* the step holds more: activations and, at stage 3, gathered parameters */
            assert_true(dr.step[ZN_DRY_DEVICE].peak_total > d->cur_total);
            if (stage == 3) assert_true(dr.gathered_peak > dr.persistent);
            zn_run_opts_free(&o);
        }
    /* a real run of any one of these would hold gigabytes; the dry runs
       together grew the process by a few megabytes at most (their host
       arrays scale with parameters counted, not elements) */
    assert_true(zt_maxrss_kb() - rss0 < 64 * 1024);
}

/* ------------------------------------------------------------------------ */
/* against DeepSpeed's estimators */

/* GPT-2 with 36 layers of width 4096: 7,459,729,408 parameters, trained on
 * 2 nodes of 8 GPUs. */
#define EST_MODEL "gpt2:n_layer=36,n_embd=4096,n_head=32"
#define EST_GPN 8
#define EST_NODES 2
#define EST_N (EST_GPN * EST_NODES)
/* and an MLP of odd sizes, whose layout pads: 18 elements of flat padding
   at stages 1/2, per-parameter padding at stage 3 (the GPT-2's sizes are
   all multiples of 2N = 32: it has none) */
static const char *const EST_MODELS[2] = {EST_MODEL, "mlp:1001,999,17"};

typedef struct {
    ZnDryRun dr;
    long long P;        /* parameters */
    long long Pa;       /* the layout's padded count: the flat buffer (stages 1/2) or N x partition (3) */
    long long S;        /* the rank's partition */
    long long L;        /* largest layer */
    long long dev_ms, host_ms;   /* model-state bytes: params16 + grads + master32 + exp_avg + exp_avg_sq */
} Est;

static Est est_dry(const char *model, int stage, const char *off, int gpn, int nodes) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, CFG_FP16, stage, off);
    ZnRunOpts o = opts(model, NULL, cfg, gpn * nodes, 0, 1);
    o.world = zn_world(gpn * nodes, 0, gpn);
    Est e;
    ZnErr err = {0};
    if (zn_dry_run(&o, 0, &e.dr, &err)) fail_msg("stage %d: %s", stage, err.msg);
    e.P = e.dr.numel;
    e.S = e.dr.part_n;
    e.Pa = e.S * gpn * nodes;
    e.L = e.dr.largest_layer;
    e.dev_ms = zn_dry_model_states(&e.dr.init[ZN_DRY_DEVICE]);
    e.host_ms = zn_dry_model_states(&e.dr.init[ZN_DRY_HOST]);
    zn_run_opts_free(&o);
    return e;
}

/* |a - b| <= tol */
static void assert_near(long long a, long long b, long long tol) {
    long long d = a > b ? a - b : b - a;
    if (d > tol) fail_msg("%lld and %lld differ by %lld > %lld", a, b, d, tol);
}

static void row(const char *what, long long est_gpu, long long dev, double est_cpu_gpn, long long host) {
    print_message("  %-28s estimator GPU %14lld  dry device %14lld  estimator CPU/gpn %16.1f  dry host %14lld\n", what,
                  est_gpu, dev, est_cpu_gpn, host);
}

/* Stages 1 and 2 against estimate_zero2_model_states_mem_needs. Its terms:
 * GPU 2P (fp16 parameters, whole) + 18P/N, "18 = 2 fp16 grads + 4 fp32
 * grads + 4 fp32 params + 8 optimizer states", partitioned; with the
 * optimizer offloaded GPU 2P, CPU P * max(4 * total_gpus, 16) per node.
 *
 * What zinc holds differently, so the assertions leave it out:
 *  - no fp32 gradient partition on the device: zinc's Adam reads the 16-bit
 *    gradient and unscales it in the same pass (device.h adam, grad_mul);
 *    DeepSpeed copies it to fp32 first (4 of the 18 bytes);
 *  - stage 1 keeps the whole averaged fp16 gradient, reduced once at the
 *    boundary (Z-ENG-*; DeepSpeed's stage 1 does the same), where the
 *    estimator, written for stage 2, counts a partition;
 *  - on the CPU, max(4 * total_gpus, 16): the 4 * total_gpus branch is the
 *    fp32 model every process loads on the host before partitioning;
 *    zinc builds each rank's parameters on its device, so holds none of
 *    it. The 16 bytes a parameter are the offloaded states of the whole
 *    model (4 fp32 gradient + 4 master + 8 moments) that the node's
 *    processes share; zinc's stage 1 keeps no fp32 gradient on the host
 *    (its fp16 gradient goes down in 4 MiB chunks, the buckets category),
 *    so it holds 12 of the 16.
 * Padding: the flat buffer is padded to a multiple of 2N elements
 * (Z-LAY-004), so each byte-per-parameter term is counted on Pa >= P; the
 * estimator called with Pa gives zinc's bytes exactly (every 18 Pa / N is
 * a whole number), and with P they agree to within 16 bytes a padding
 * element plus the int() truncation of one byte. */
/* spec: Z-DRY-006 */
static void test_estimator_zero2(void **state) {
    (void)state;
    for (int mi = 0; mi < 2; mi++)
    for (int stage = 1; stage <= 2; stage++) {
        const char *model = EST_MODELS[mi];
        Est e = est_dry(model, stage, OFF_NONE, EST_GPN, EST_NODES);
        const long long tol = 16 * (e.Pa - e.P) + 1;
        assert_true(e.Pa - e.P < 2 * EST_N);
        ZnEst ds = zn_est_zero2(e.Pa, EST_GPN, EST_NODES, 0, 1.0), dsP = zn_est_zero2(e.P, EST_GPN, EST_NODES, 0, 1.0);
        /* fp32 gradient partition (4 Pa / N) not held; stage 1: whole fp16 gradient (2 Pa) for the partitioned one */
        long long adjust = -4 * e.Pa / EST_N + (stage == 1 ? 2 * e.Pa - 2 * e.Pa / EST_N : 0);
        assert_int_equal(e.dev_ms, ds.gpu + adjust);
        assert_near(e.dev_ms, dsP.gpu + adjust, tol);
        /* without offload DeepSpeed's CPU figure is the fp32 model loaded by
           every process of the node (4 P gpn): zinc holds no state on the host */
        assert_int_equal(e.host_ms, 0);
        assert_int_equal(e.dr.init[ZN_DRY_HOST].cur_total, 0);
        char what[64];
        snprintf(what, sizeof what, "%s st%d none", mi ? "mlp" : "gpt2", stage);
        row(what, dsP.gpu, e.dev_ms, (double)dsP.cpu / EST_GPN, e.host_ms);

        /* optimizer offloaded to the CPU */
        e = est_dry(model, stage, OFF_CPU, EST_GPN, EST_NODES);
        ds = zn_est_zero2(e.Pa, EST_GPN, EST_NODES, 1, 1.0);
        dsP = zn_est_zero2(e.P, EST_GPN, EST_NODES, 1, 1.0);
        /* GPU: the fp16 parameters, exactly; stage 1 also its whole fp16 gradient */
        assert_int_equal(e.dev_ms, ds.gpu + (stage == 1 ? 2 * e.Pa : 0));
        assert_near(e.dev_ms, dsP.gpu + (stage == 1 ? 2 * e.P : 0), tol);
        /* CPU: the 16-bytes-a-parameter states (the formula at one GPU, where
           max(4, 16) = 16) are what all N ranks' host partitions add up to;
           stage 1 holds 12 of the 16 (no fp32 gradient on the host) */
        long long states = zn_est_zero2(e.Pa, 1, 1, 1, 1.0).cpu;
        assert_int_equal(states, 16 * e.Pa);
        assert_int_equal(e.host_ms * EST_N, stage == 1 ? states / 16 * 12 : states);
        /* at 16 GPUs the CPU figure is the 4 * total_gpus model-load branch */
        assert_int_equal(dsP.cpu, 4LL * EST_N * e.P);
        snprintf(what, sizeof what, "%s st%d cpu", mi ? "mlp" : "gpt2", stage);
        row(what, dsP.gpu, e.dev_ms, (double)dsP.cpu / EST_GPN, e.host_ms);
    }
    /* one node of 4 GPUs, where max(4 * 4, 16) = 16: DeepSpeed's per-node
       CPU figure over the node's GPUs is the rank's host states exactly */
    Est e = est_dry(EST_MODEL, 2, OFF_CPU, 4, 1);
    ZnEst ds = zn_est_zero2(e.Pa, 4, 1, 1, 1.0), dsP = zn_est_zero2(e.P, 4, 1, 1, 1.0);
    assert_int_equal(e.host_ms, ds.cpu / 4);
    assert_int_equal(e.dev_ms, ds.gpu);
    assert_near(e.host_ms, dsP.cpu / 4, 16 * (e.Pa - e.P) / 4 + 1);
    row("gpt2 st2 cpu, 1 node x 4", dsP.gpu, e.dev_ms, (double)dsP.cpu / 4, e.host_ms);
}

/* Stage 3 against estimate_zero3_model_states_mem_needs with zero_init
 * (zinc builds each rank's partition only, as deepspeed.zero.Init does):
 * GPU 4 L + 18P/N without offload, 4 L + 2P/N with the optimizer offloaded,
 * 4 L with the parameters too; CPU per node 4 L gpn without offload (the
 * largest layer built in fp32 by each process: zinc builds partitions on
 * the device, so holds none), else 16P or 18P over the nodes (the
 * offloaded states, and the fp16 parameters with offload_param).
 *
 * Terms zinc holds differently:
 *  - 4 L, the largest layer gathered (fp16 parameter and gradient), is a
 *    cost of the step, not of init; at init zinc holds instead its
 *    persistent parameters gathered whole (Z-S3-002, dr.persistent
 *    elements at 2 bytes), which the estimator does not count. The step's
 *    gathered peak is checked to hold at least the largest layer.
 *  - without offload, the estimator's 18 bytes over N are 2 fp16 params +
 *    4 fp32 grads + 4 fp32 master + 8 moments: zinc's device gradient
 *    partition is fp16 (2 bytes, read by Adam with its unscale in the same
 *    pass), so it holds 16. With the optimizer offloaded the host gradient
 *    partition is fp32, as DeepSpeed's, and the CPU figures agree.
 * Padding: each parameter is cut in N pieces of ceil(numel/N) (Z-LAY-009),
 * Pa = N x partition; with Pa the figures are exact, with P within the
 * per-byte terms times Pa - P. */
/* spec: Z-DRY-006 */
static void test_estimator_zero3(void **state) {
    (void)state;
    const char *const offs[3] = {OFF_NONE, OFF_CPU, OFF_BOTH};
    static const char *const names[2][3] = {{"gpt2 st3 none", "gpt2 st3 cpu", "gpt2 st3 cpu+param"},
                                            {"mlp st3 none", "mlp st3 cpu", "mlp st3 cpu+param"}};
    for (int mi = 0; mi < 2; mi++)
    for (int k = 0; k < 3; k++) {
        Est e = est_dry(EST_MODELS[mi], 3, offs[k], EST_GPN, EST_NODES);
        const int offo = k >= 1, offp = k == 2;
        const long long tol = (18 * (e.Pa - e.P) + EST_N - 1) / EST_N + 1;
        ZnEst ds = zn_est_zero3(e.Pa, e.L, EST_GPN, EST_NODES, offo, offp, 1, 1.0);
        ZnEst dsP = zn_est_zero3(e.P, e.L, EST_GPN, EST_NODES, offo, offp, 1, 1.0);
        const long long persist = 2 * e.dr.persistent;
        assert_true(e.dr.persistent > 0 && e.dr.persistent < e.P / (mi ? 10 : 1000));
        assert_int_equal(e.dr.init[ZN_DRY_DEVICE].cur[ZN_MEM_PARAMS16], (offp ? 0 : 2 * e.S) + persist);
        long long adjust = -4 * e.L + persist - (k == 0 ? 2 * e.S : 0);
        assert_int_equal(e.dev_ms, ds.gpu + adjust);
        assert_near(e.dev_ms, dsP.gpu + adjust, tol);
        if (k == 0) {
            assert_int_equal(e.host_ms, 0);   /* the CPU figure is the fp32 largest layer per process */
            assert_int_equal(ds.cpu, 4 * e.L * EST_GPN);
        } else {
            /* per node over its GPUs: 16 (18 with the parameters) bytes a
               parameter over N, exactly the rank's host states */
            assert_int_equal(e.host_ms * EST_GPN, ds.cpu);
            assert_int_equal(e.host_ms, (offp ? 18 : 16) * e.S);
            assert_near(e.host_ms, dsP.cpu / EST_GPN, tol);
        }
        row(names[mi][k], dsP.gpu, e.dev_ms, (double)dsP.cpu / EST_GPN, e.host_ms);
    }
    /* the 4 L term: one step gathers at least the largest layer whole */
    char cfg[512];
    snprintf(cfg, sizeof cfg, CFG_FP16, 3, OFF_NONE);
    ZnRunOpts o = opts("gpt2:n_layer=12,n_embd=768,n_head=12", NULL, cfg, EST_N, 1, 1);
    ZnDryRun dr;
    ZnErr err = {0};
    assert_int_equal(zn_dry_run(&o, 1, &dr, &err), 0);
    assert_true(dr.gathered_peak >= dr.largest_layer);
    assert_true(dr.step[ZN_DRY_DEVICE].peak[ZN_MEM_PARAMS16] >= 2 * dr.largest_layer);
    zn_run_opts_free(&o);
}

/* ------------------------------------------------------------------------ */
/* the command */

/* spec: Z-DRY-005 */
static void test_cli(void **state) {
    (void)state;
    char *out, *errs;
    const char *argv[] = {"--model", "gpt2:n_layer=48,n_embd=1600,n_head=25", "--world-size", "64", "--stage", "3",
                          "--dtype", "fp16", "--steps", "1", "--dry-run"};
    int rc = zt_capture(zn_cmd_train, 11, argv, &out, &errs);
    assert_int_equal(rc, 0);
    /* no --machine: priced on dgx-h100, whose nodes of 8 the run takes */
    assert_str_contains(out, "[zinc] dry run: rank 0 of 64 (8 per node), stage 3, 1557611200 parameters");
    assert_str_contains(out, "[zinc] plan: machine dgx-h100 (8 GPUs per node, ");
    assert_str_contains(out, ", the default: --machine NAME|FILE.json for another");
    for (int c = 0; c < ZN_MEM_NCAT; c++) {
        char want[64];
        snprintf(want, sizeof want, " %s=", zn_mem_cat_name((ZnMemCat)c));
        assert_str_contains(out, want);
    }
    assert_str_contains(out, "device bytes by category (after init): params16=");
    assert_str_contains(out, "host bytes by category (after init)");
    assert_str_contains(out, "nvme bytes by category (after init)");
    assert_str_contains(out, "device bytes by category (one step)");
    assert_str_contains(out, "device at after forward: MA ");
    assert_str_contains(out, "| DeepSpeed estimate_zero3 per GPU ");
    assert_str_contains(out, "per CPU / 8 GPUs (buffer factor 1)");
    assert_str_contains(out, "gathered params peak ");
    free(out);
    free(errs);
    /* --steps 0: init only */
    const char *argv0[] = {"--model", "mlp:8,12,5", "--world-size", "3", "--stage", "2", "--steps", "0", "--dry-run"};
    rc = zt_capture(zn_cmd_train, 9, argv0, &out, &errs);
    assert_int_equal(rc, 0);
    assert_str_contains(out, "device bytes by category (after init)");
    assert_null(strstr(out, "(one step)"));
    free(out);
    free(errs);
    /* refused with a multi-process backend */
    const char *argv1[] = {"--model", "mlp:8,12,5", "--backend", "tcp", "--dry-run"};
    rc = zt_capture(zn_cmd_train, 5, argv1, &out, &errs);
    assert_int_equal(rc, 2);
    assert_str_contains(errs, "--dry-run simulates one rank itself");
    free(out);
    free(errs);
}

/* DeepSpeed's IPG buffers after init: the expected bytes are written from
 * DeepSpeed 0.19.8's rules (stage_1_and_2.py setup_buckets: reduce_bucket_size
 * elements of the model dtype, twice with overlap_comm, where
 * contiguous_gradients or an optimizer offload; stage3.py: once, of the
 * communication dtype), not computed by zn_ds_ipg_bytes. mlp:7,13,5,3 has
 * 192 parameters; its largest is 91 (7x13). */
/* spec: Z-MEM-011 */
static void test_ipg_buffers(void **state) {
    (void)state;
    /* world, top-level keys, stage, reduce_bucket_size, more zero_optimization keys, bytes */
    static const struct { int world; const char *top; int stage; long bucket; const char *zero; long want; } C[] = {
        {2, "", 0, 1000, "", 0},   /* stage 0 has no ZeRO optimizer and no IPG buffer */
        {2, "", 1, 1000, "", 4000},
        {2, "", 1, 1000, ", \"overlap_comm\": true", 8000},
        {1, "", 2, 1000, ", \"overlap_comm\": true", 8000},
        {2, ", \"fp16\": {\"enabled\": true}", 2, 1000, ", \"overlap_comm\": true", 4000},
        /* stage 1/2: the model dtype, whatever the communication dtype */
        {2, ", \"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp32\"", 1, 1000, "", 2000},
        /* without contiguous_gradients: stage 1 keeps none, stage 2 its own
           bucket buffer (all 192 parameters, fp32) */
        {2, "", 1, 1000, ", \"contiguous_gradients\": false", 0},
        {2, "", 2, 1000, ", \"contiguous_gradients\": false", 768},
        /* one parameter (91) larger than the bucket (50): zinc's own buffer, larger */
        {2, "", 2, 50, "", 364},
        /* stage 3: once, in the communication dtype; overlap_comm changes nothing */
        {2, ", \"bf16\": {\"enabled\": true}", 3, 1000, "", 2000},
        {2, ", \"bf16\": {\"enabled\": true}", 3, 1000, ", \"overlap_comm\": false", 2000},
        {2, ", \"bf16\": {\"enabled\": true}, \"communication_data_type\": \"fp32\"", 3, 1000, "", 4000},
    };
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"train_micro_batch_size_per_gpu\": 1%s, \"zero_optimization\": {\"stage\": %d,"
                 " \"reduce_bucket_size\": %ld%s}}", C[i].top, C[i].stage, C[i].bucket, C[i].zero);
        const long want = C[i].want;
        ZnRunOpts o = opts("mlp:7,13,5,3", NULL, cfg, C[i].world, 0, 1);
        ZnErr err = {0};
        ZnDryRun dr;
        if (zn_dry_run(&o, 0, &dr, &err)) fail_msg("case %zu: %s", i, err.msg);
        if (dr.init[ZN_DRY_DEVICE].cur[ZN_MEM_BUCKETS] != want)
            fail_msg("case %zu (%s): buckets %ld, want %ld", i, cfg, dr.init[ZN_DRY_DEVICE].cur[ZN_MEM_BUCKETS], want);
        zn_run_opts_free(&o);
    }
}

ZT_MAIN(cmocka_unit_test(test_meta_device), cmocka_unit_test(test_ipg_buffers), cmocka_unit_test(test_meta_comm_counts),
        cmocka_unit_test(test_dry_equals_sim_init), cmocka_unit_test(test_dry_equals_sim_nvme),
        cmocka_unit_test(test_dry_equals_sim_step),
        cmocka_unit_test(test_scale), cmocka_unit_test(test_estimator_zero2), cmocka_unit_test(test_estimator_zero3),
        cmocka_unit_test(test_cli))
