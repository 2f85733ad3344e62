/* dryrun.c: `zinc train --dry-run` (dryrun.h, spec Z-DRY-*). One engine, rank
 * 0's, on the meta device and the meta communicator: init, and optionally
 * one optimizer step, with every allocation and every collective counted
 * and no byte of the model ever held. */
#include "app/dryrun.h"
#include "app/cli_estimate.h"
#include "comm/comm_meta.h"
#include "core/alloc.h"
#include "engine/data_text.h"
#include "engine/engine.h"
#include "engine/estimate.h"
#include "core/plan.h"
#include <stdlib.h>
#include <string.h>

long zn_dry_model_states(const ZnMemStats *m) {
    return m->cur[ZN_MEM_PARAMS16] + m->cur[ZN_MEM_GRADS] + m->cur[ZN_MEM_MASTER32] + m->cur[ZN_MEM_EXP_AVG] +
           m->cur[ZN_MEM_EXP_AVG_SQ];
}

/* The see_memory_usage points of the step (Z-REP-002): the device as it is
 * there, with the peak since the point before; a point met again (each
 * micro-step) keeps its latest bytes and its highest peak. */
typedef struct { ZnDryRun *r; ZnPhaseMeter meter; } DryCtx;

static void dry_phase(void *arg, ZnEngine *E, const char *what) {
    DryCtx *ctx = arg;
    ZnDryRun *r = ctx->r;
    ZnMemStats *m = &E->dev->mem;
    int i = 0;
    while (i < r->nphases && strcmp(r->phase[i].what, what)) i++;
    long peak = m->win_peak_total;
    if (i < r->nphases) {
        if (r->phase[i].dev.win_peak_total > peak) peak = r->phase[i].dev.win_peak_total;
    } else if (i < ZN_DRY_MAX_PHASES) {   /* the engine names seven points */
        snprintf(r->phase[i].what, sizeof r->phase[i].what, "%s", what);
        r->nphases++;
    }
    if (i < ZN_DRY_MAX_PHASES) {
        r->phase[i].dev = *m;
        r->phase[i].dev.win_peak_total = peak;
    }
    zn_phase_meter_point(&ctx->meter, E, what);   /* and a new window on every tier */
}

/* The data a step reads, as small as the model allows: the MLP's samples
 * are zeros (no teacher); a language model reads one window of T + 1 zero
 * tokens (the meta kernels look at no token anyway). */
static int dry_data(const ZnRunOpts *o, ZnData *data, ZnTokens *tokens, ZnErr *err) {
    memset(data, 0, sizeof *data);
    memset(tokens, 0, sizeof *tokens);
    if (o->model.kind == ZN_MODEL_GPT2) {
        tokens->n = (long)o->model.seq_len + 1;
        tokens->tok = zn_calloc(ZN_HOST_APP, (size_t)tokens->n, sizeof(uint16_t));
        if (!tokens->tok) return zn_nomem(err);
        tokens->vocab = o->model.gpt2.vocab_size;
        snprintf(tokens->path, sizeof tokens->path, "(dry run)");
        data->seed = (uint64_t)o->cfg.seed;
        data->tokens = tokens;
        return 0;
    }
    /* no teacher: [classes, d_in] floats would be the one host array that
       grows with the model (Z-DRY-004), and the meta kernels read no sample */
    data->d_in = o->model.dims[0];
    data->classes = o->model.dims[o->model.nlayers];
    data->seed = (uint64_t)o->cfg.seed;
    return 0;
}

/* What a real step would read and write on NVMe (a dry run swaps nothing):
 * the optimizer states on NVMe are read and written back once per step;
 * the 16-bit parameter partitions on NVMe are read for the forward and the
 * backward gathers and written once after the step (Z-DRY-009). */
static void nvme_traffic(const ZnEngine *E, ZnDryRun *r) {
    const ZnMemStats *m = &E->off.tier_nvme.mem;
    const double opt = (double)m->cur[ZN_MEM_MASTER32] + m->cur[ZN_MEM_EXP_AVG] + m->cur[ZN_MEM_EXP_AVG_SQ];
    const double p16 = (double)m->cur[ZN_MEM_PARAMS16];
    r->nvme_read = opt + 2.0 * p16 * E->cfg->grad_accum;
    r->nvme_write = opt + p16;
}

int zn_dry_run(const ZnRunOpts *o, int step, ZnDryRun *res, ZnErr *err) {
    memset(res, 0, sizeof *res);
    /* rank 0: it holds the largest piece of every uneven split (dryrun.h) */
    const int rank = 0;
    res->rank = rank;
    res->world = zn_world(o->world.size, rank, o->world.per_node);
    res->numel = zn_model_numel(&o->model);
    res->largest_layer = zn_est_largest_layer(&o->model, NULL, NULL, 0);
    ZnDevice dev;
    zn_device_meta_init(&dev);
    if (o->device_memory > 0) dev.capacity = o->device_memory;   /* the out-of-memory a real run would hit */
    ZnComm comm;
    zn_comm_meta_init(&comm, o->world.size, rank, o->world.per_node);
    ZnData data;
    ZnTokens tokens;
    memset(&data, 0, sizeof data);     /* init reads no sample: empty data will do */
    memset(&tokens, 0, sizeof tokens);
    int rc = step ? dry_data(o, &data, &tokens, err) : 0;
    if (rc) return rc;
    ZnEngineHooks hooks = {0};
    hooks.quiet = 1;
    ZnEngine E;
    if ((rc = zn_engine_init(&E, &o->cfg, &o->model, &data, &comm, &dev, &hooks, err))) goto out_data;
    res->padded = E.L.aligned_numel;
    res->part_n = E.part_n;
    for (int p = 0; E.persistent && p < E.L.nparams; p++)
        if (E.persistent[p]) res->persistent += E.L.s3_pn[p] * (long)E.world.size;
    res->init[ZN_DRY_DEVICE] = dev.mem;
    res->init[ZN_DRY_HOST] = E.off.tier_host.mem;
    res->init[ZN_DRY_NVME] = E.off.tier_nvme.mem;
    res->comm_init = comm.stats;
    if (step) {
        /* the step's own peaks, and its phases from here on */
        zn_mem_reset_peak(&dev.mem);
        zn_mem_reset_window(&dev.mem);
        zn_mem_reset_peak(&E.off.tier_host.mem);
        zn_mem_reset_peak(&E.off.tier_nvme.mem);
        DryCtx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.r = res;
        ctx.meter.phase_out = &res->calls.phase;
        E.hooks.phase = dry_phase;
        E.hooks.phase_ctx = &ctx;
        E.fetch.live_peak = E.fetch.n_avail;
        zn_comm_stats_reset(&comm.stats);
        zn_phase_meter_start(&ctx.meter, &E);
        zn_comm_meta_log(&comm, &res->calls);
        ZnStepResult sr;
        rc = zn_engine_train_step(&E, &sr, err);
        zn_comm_meta_log(&comm, NULL);
        if (rc) goto out;
        zn_phase_meter_finish(&ctx.meter, &E);
        memcpy(res->ph, ctx.meter.ph, sizeof res->ph);
        nvme_traffic(&E, res);
        res->stepped = 1;
        res->step[ZN_DRY_DEVICE] = dev.mem;
        res->step[ZN_DRY_HOST] = E.off.tier_host.mem;
        res->step[ZN_DRY_NVME] = E.off.tier_nvme.mem;
        res->comm_step = comm.stats;
        res->gathered_peak = E.fetch.live_peak;
    }
out:
    zn_engine_free(&E);
    if (!rc && dev.mem.nallocs != 0)
        rc = zn_err(err, ZN_E_INTERNAL, "dry run: %ld device allocations left after the engine was freed",
                    dev.mem.nallocs);
out_data:
    zn_data_free(&data);
    free(tokens.tok);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* the report */

/* zinc's own lines say GiB; the lines that quote DeepSpeed (see_memory_usage's
   MA / Max_MA, its estimators) keep its "GB", which is the same 2^30 */
#define GIB (1024.0 * 1024.0 * 1024.0)

static void tier_lines(FILE *f, int rank, const char *tier, const char *when, const ZnMemStats *m) {
    fprintf(f, "[zinc] dry run [rank %d] %s bytes by category (%s):", rank, tier, when);
    for (int c = 0; c < ZN_MEM_NCAT; c++) fprintf(f, " %s=%ld", zn_mem_cat_name((ZnMemCat)c), m->cur[c]);
    fprintf(f, " | total=%ld peak=%ld\n", m->cur_total, m->peak_total);
    fprintf(f, "[zinc] dry run [rank %d] %s peak bytes by category (%s):", rank, tier, when);
    for (int c = 0; c < ZN_MEM_NCAT; c++) fprintf(f, " %s=%ld", zn_mem_cat_name((ZnMemCat)c), m->peak[c]);
    fprintf(f, "\n");
    fprintf(f, "[zinc] dry run [rank %d] %s total %.2f GiB, peak %.2f GiB, model states %.2f GiB\n", rank, tier,
            m->cur_total / GIB, m->peak_total / GIB, zn_dry_model_states(m) / GIB);
}

void zn_dry_run_print(FILE *f, const ZnRunOpts *o, const ZnDryRun *r) {
    static const char *const tiers[ZN_DRY_NTIERS] = {"device", "host", "nvme"};
    const ZnZeroConfig *z = &o->cfg.zero;
    const ZnPlan *P = &o->cfg.plan;   /* what the stage holds: the lines below ask it, not the stage number */
    fprintf(f, "[zinc] dry run: rank %d of %d (%d per node), stage %d, %ld parameters (%ld padded), "
               "partition %ld elements, offload optimizer %s, offload param %s\n",
            r->rank, r->world.size, r->world.per_node, z->stage, r->numel, r->padded, r->part_n,
            z->offload_optimizer.device == ZN_OFFLOAD_CPU ? "cpu" : z->offload_optimizer.device == ZN_OFFLOAD_NVME ? "nvme" : "none",
            z->offload_param.device == ZN_OFFLOAD_CPU ? "cpu" : z->offload_param.device == ZN_OFFLOAD_NVME ? "nvme" : "none");
    for (int t = 0; t < ZN_DRY_NTIERS; t++) tier_lines(f, r->rank, tiers[t], "after init", &r->init[t]);
    if (r->stepped) {
        for (int t = 0; t < ZN_DRY_NTIERS; t++) tier_lines(f, r->rank, tiers[t], "one step", &r->step[t]);
        for (int i = 0; i < r->nphases; i++)
            fprintf(f, "[zinc] dry run [rank %d] device at %s: MA %.2f GB, Max_MA %.2f GB\n", r->rank, r->phase[i].what,
                    r->phase[i].dev.cur_total / GIB, r->phase[i].dev.win_peak_total / GIB);
        if (P->gather_per_layer) fprintf(f, "[zinc] dry run [rank %d] gathered params peak %ld elements\n", r->rank, r->gathered_peak);
    }
    const ZnCommStats *cs[2] = {&r->comm_init, &r->comm_step};
    for (int k = 0; k < 1 + r->stepped; k++) {
        long calls = 0, sent = 0, recv = 0;
        for (int op = 0; op < ZN_OP_N; op++) {
            calls += cs[k]->calls[op];
            sent += cs[k]->bytes_sent[op];
            recv += cs[k]->bytes_recv[op];
        }
        fprintf(f, "[zinc] dry run [rank %d] collectives (%s): %ld calls, %ld bytes sent, %ld received\n", r->rank,
                k ? "one step" : "init", calls, sent, recv);
    }
    /* next to DeepSpeed's estimators (Z-DRY-006): per GPU, and per node
       divided by the node's GPUs, additional_buffer_factor 1; zinc builds
       its model partitioned, as under deepspeed.zero.Init */
    const int gpn = r->world.per_node, nodes = r->world.size / r->world.per_node;
    const int off = z->offload_optimizer.device != ZN_OFFLOAD_NONE, offp = z->offload_param.device != ZN_OFFLOAD_NONE;
    /* estimate_zero3 where the parameters are partitioned, estimate_zero2
       where only the optimizer state (and gradients) are; none for plain
       data parallelism */
    const int zero3 = P->params == ZN_HOLD_PART;
    const char *est = zero3 ? "estimate_zero3" : "estimate_zero2";
    ZnEst e = zero3 ? zn_est_zero3(r->numel, r->largest_layer, gpn, nodes, off, offp, 1, 1.0)
                    : zn_est_zero2(r->numel, gpn, nodes, off, 1.0);
    if (P->optim == ZN_HOLD_PART && e.gpu >= 0) {
        fprintf(f, "[zinc] dry run [rank %d] device model states %.2f GiB | DeepSpeed %s per GPU %.2f GB\n", r->rank,
                zn_dry_model_states(&r->init[ZN_DRY_DEVICE]) / GIB, est, e.gpu / GIB);
        fprintf(f, "[zinc] dry run [rank %d] host model states %.2f GiB | DeepSpeed %s per CPU / %d GPUs "
                   "(buffer factor 1) %.2f GB\n",
                r->rank, zn_dry_model_states(&r->init[ZN_DRY_HOST]) / GIB, est, gpn, (double)e.cpu / gpn / GIB);
        fprintf(f, "[zinc] dry run [rank %d] nvme model states %.2f GiB | DeepSpeed's estimators count no NVMe\n",
                r->rank, zn_dry_model_states(&r->init[ZN_DRY_NVME]) / GIB);
    }
}
