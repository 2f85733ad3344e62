/* run.c: drive a simulated run. Rank 0 prints; every rank trains. */
#include "app/run.h"
#include "app/phase_meter.h"
#include "core/alloc.h"
#include "engine/engine.h"
#include "engine/data.h"
#include "engine/lr_schedule.h"
#include "io/trace.h"
#include "io/checkpoint.h"
#include "core/layout.h"
#include <math.h>
#include <pthread.h>
#include "comm/world.h"
#if ZN_HAVE_CUDA
#include "device/cuda.h"
#endif
#include "engine/data_text.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const ZnRunOpts *o;
    ZnRunResult *res;
    ZnData data;
    ZnTokens tokens;   /* a language model's text (--data) */
    FILE *csv;
    int jsonl;         /* the log is JSON lines (by its .jsonl extension) */
    ZnLrSched sched;   /* built once, copied by every rank */
    ZnTrace *traces;   /* [world] when tracing */
    ZnPhaseMeter *meters;   /* [world]: each rank's step by phase (Z-DRY-008) */
    void *cuda_sim;    /* ZnCudaSim: the simulator's collectives over GPU memory */
    pthread_mutex_t print_lock;   /* one rank's report lines stay together */
} RunCtx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* DeepSpeed's "CPU Virtual Memory" line: the machine's used memory (total
 * less available, psutil's virtual_memory), in GB and percent. */
static void cpu_memory_line(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char line[256];
    long total = -1, avail = -1, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %ld kB", &v) == 1) total = v;
        else if (sscanf(line, "MemAvailable: %ld kB", &v) == 1) avail = v;
    }
    fclose(f);
    if (total <= 0 || avail < 0) return;
    const double used = (double)(total - avail) * 1024.0;
    printf("[zinc] [rank 0] CPU Virtual Memory:  used = %.2f GB, percent = %.1f%%\n", used / (1024.0 * 1024.0 * 1024.0),
           100.0 * (double)(total - avail) / (double)total);
}

/* An offload tier's bytes by category (Z-OFF-007): what the rank's offloaded
 * states take in host memory and on NVMe. */
static void tier_line(const char *tier, const ZnMemStats *m) {
    printf("[zinc] [rank 0] %s bytes by category:", tier);
    for (int c = 0; c < ZN_MEM_NCAT; c++) printf(" %s=%ld", zn_mem_cat_name((ZnMemCat)c), m->cur[c]);
    printf(" | total=%ld peak=%ld\n", m->cur_total, m->peak_total);
}

/* DeepSpeed's see_memory_usage lines (Z-REP-002), rank 0, then the
 * per-category split zinc adds; the peak window restarts after each report
 * as DeepSpeed resets the CUDA peak. */
static void memory_lines(RunCtx *ctx, ZnEngine *E, const char *what) {
    if (E->world.rank != 0 || !ctx->o->memory_report) return;
    ZnMemStats *m = &E->dev->mem;
    const double GB = 1024.0 * 1024.0 * 1024.0;
    printf("[zinc] [rank 0] see_memory_usage: Engine %s\n", what);
    printf("[zinc] [rank 0] MA %.2f GB         Max_MA %.2f GB         CA %.2f GB         Max_CA %.0f GB\n",
           m->cur_total / GB, m->win_peak_total / GB, m->cur_total / GB, m->win_peak_total / GB);
    printf("[zinc] [rank 0] bytes by category:");
    for (int c = 0; c < ZN_MEM_NCAT; c++) printf(" %s=%ld", zn_mem_cat_name((ZnMemCat)c), m->cur[c]);
    printf(" | MA=%ld Max_MA=%ld", m->cur_total, m->win_peak_total);
    if (E->P.gather_per_layer) {   /* stage 3's gathered parameters since the last report (Z-S3-006) */
        printf(" | gathered params peak %ld now %ld elements", E->live_peak, E->n_avail);
        E->live_peak = E->n_avail;
    }
    printf("\n");
    cpu_memory_line();
    if (E->P.optim_tier != ZN_TIER_DEVICE || E->P.param_tier != ZN_TIER_DEVICE) {   /* Z-OFF-007 */
        tier_line("host", &E->tier_host.mem);
        tier_line("nvme", &E->tier_nvme.mem);
    }
}

/* The engine's phase hook: the report lines, then the rank's phase meter,
 * which starts a new peak window on every tier. */
static void memory_phase(void *arg, ZnEngine *E, const char *what) {
    RunCtx *ctx = arg;
    memory_lines(ctx, E, what);
    zn_phase_meter_point(&ctx->meters[E->world.rank], E, what);
}

/* Bytes an offloaded rank moved so far: H2D, D2H, NVMe read, NVMe write. */
static void moved_now(const ZnEngine *E, unsigned long long m[4]) {
    m[0] = E->h2d_bytes;
    m[1] = E->d2h_bytes;
    zn_engine_nvme_stats(E, &m[2], &m[3]);
}

/* The offload traffic of the steps since `before` (Z-OFF-009), rank 0. */
static void offload_line(const ZnEngine *E, const char *what, const unsigned long long before[4], long steps) {
    if (E->P.optim_tier == ZN_TIER_DEVICE && E->P.param_tier == ZN_TIER_DEVICE) return;
    unsigned long long m[4];
    moved_now(E, m);
    const double s = (double)steps;
    printf("[zinc] offload %s rank %d: device->host %.0f B/step, host->device %.0f B/step, nvme read %.0f B/step, "
           "nvme write %.0f B/step (optimizer on %s, parameters on %s)\n",
           what, E->world.rank, (double)(m[1] - before[1]) / s, (double)(m[0] - before[0]) / s,
           (double)(m[2] - before[2]) / s, (double)(m[3] - before[3]) / s,
           E->P.optim_tier == ZN_TIER_NVME ? "nvme" : E->P.optim_tier == ZN_TIER_HOST ? "cpu" : "device",
           E->P.param_tier == ZN_TIER_HOST ? "cpu" : E->P.param_tier == ZN_TIER_NVME ? "nvme" : "device");
}

static void time_line(RunCtx *ctx, const ZnEngine *E) {
    const double ga = (double)E->cfg->grad_accum;
    pthread_mutex_lock(&ctx->print_lock);
    printf("[Rank %d] time (ms) | fwd_microstep: %.2f | bwd_microstep: %.2f | bwd_inner_microstep: %.2f | "
           "bwd_allreduce_microstep: %.2f | step_microstep: %.2f\n",
           E->world.rank, E->t_fwd / ga, E->t_bwd / ga, (E->t_bwd - E->t_reduce) / ga, E->t_reduce / ga, E->t_step);
    fflush(stdout);
    pthread_mutex_unlock(&ctx->print_lock);
}

/* Gradient and parameter bytes per step against the ZeRO paper (Z-REP-005). */
double zn_run_zero_volume(const ZnRunOpts *o, long *psi, long *nbuckets) {
    ZnLayout L;
    ZnErr e;
    if (zn_config_layout(&o->cfg, &o->model, o->world.size, &L, &e)) return -1;
    ZnPlan P;
    if (zn_plan_build(&P, o->cfg.zero.stage, &e)) { zn_layout_free(&L); return -1; }
    const int N = o->world.size;
    *psi = L.aligned_numel;   /* every rank's partition times N: Ψ with the padding */
    if (nbuckets) *nbuckets = L.nbuckets;
    zn_layout_free(&L);
    return P.comm_volume_psi * (double)*psi * (N - 1) / N;
}

static void comm_line(const ZnRunOpts *o, int rank, const ZnCommStats *a, const ZnCommStats *b, long steps,
                      const char *what, const long *ga, const long *gb, const long *ia, const long *ib) {
    long c, g0, g1, p0, p1, r;
    zn_comm_tag_totals(a, "grad_reduce", &c, &g0, &r);
    zn_comm_tag_totals(b, "grad_reduce", &c, &g1, &r);
    zn_comm_tag_totals(a, "param_gather", &c, &p0, &r);
    zn_comm_tag_totals(b, "param_gather", &c, &p1, &r);
    long psi = 0;
    double vol = zn_run_zero_volume(o, &psi, NULL);
    ZnPlan P;
    ZnErr e;
    if (zn_plan_build(&P, o->cfg.zero.stage, &e)) return;
    const double es = (double)zn_dtype_size(o->cfg.model_dtype), N = o->world.size;
    const double total = (double)(g1 - g0 + p1 - p0) / steps;
    /* the measured volume in the paper's unit psi(N-1)/N */
    const double unit = N > 1 ? (double)psi * (N - 1) / N * es : 0.0;
    char phases[160] = "";
    if (P.gather_per_layer)   /* stage 3: where the gathers happened (Z-S3-006) */
        snprintf(phases, sizeof phases, " (forward %.0f, backward %.0f, after the step %.0f)",
                 (double)(gb[0] - ga[0]) / steps, (double)(gb[1] - ga[1]) / steps, (double)(gb[2] - ga[2]) / steps);
    printf("[zinc] comm %s rank %d: grad_reduce %.0f B/step, param_gather %.0f B/step%s, total %.0f B/step = "
           "%.2fpsi(N-1)/N; ZeRO paper %dpsi(N-1)/N = %.0f B/step (psi=%ld with padding, %.0f B/element)\n",
           what, rank, (double)(g1 - g0) / steps, (double)(p1 - p0) / steps, phases, total,
           unit > 0 ? total / unit : 0.0, P.comm_volume_psi, vol * es, psi, es);
    if (o->world.per_node < o->world.size) {   /* more than one node: what crossed (Z-GRP-003) */
        const long gi = zn_comm_tag_inter(b, "grad_reduce") - zn_comm_tag_inter(a, "grad_reduce");
        const long pi = zn_comm_tag_inter(b, "param_gather") - zn_comm_tag_inter(a, "param_gather");
        printf("[zinc] comm %s rank %d inter-node: grad_reduce %.0f B/step, param_gather %.0f B/step (forward %.0f, "
               "backward %.0f, after the step %.0f)\n", what, rank, (double)gi / steps, (double)pi / steps,
               (double)(ib[0] - ia[0]) / steps, (double)(ib[1] - ia[1]) / steps, (double)(ib[2] - ia[2]) / steps);
        if (o->proc_comm) {   /* what the transport really sent, beside the ring's model (Z-NODE-008) */
            const long wi = b->wire_inter - a->wire_inter, wo = b->wire_intra - a->wire_intra,
                       wm = b->wire_msgs_inter - a->wire_msgs_inter;
            printf("[zinc] comm %s rank %d on the wire: to other nodes %.0f B/step in %.0f messages, to its own node "
                   "%.0f B/step (%ld B in %ld messages and %ld B in %ld steps: the transport's direct exchange, each "
                   "piece to each peer, sequence records included)\n", what, rank, (double)wi / steps,
                   (double)wm / steps, (double)wo / steps, wi, wm, wo, steps);
        }
    }
}

/* The ZeRO++ paper's figure (Z-GRP-003): the bytes one node sends to the
 * others per step, summed over its ranks, by phase, in units of M, the
 * model's 16-bit bytes (2 per element, padding included). */
static void node_inter_line(const ZnRunOpts *o, const ZnRunResult *res) {
    double ph[4] = {0};
    for (int r = 0; r < o->world.per_node; r++)   /* node 0; every node sends alike */
        for (int j = 0; j < 4; j++) ph[j] += (double)res->inter[4 * r + j] / (double)o->steps;
    long psi = 0;
    zn_run_zero_volume(o, &psi, NULL);
    const double M = 2.0 * (double)psi, tot = ph[0] + ph[1] + ph[2] + ph[3];
    printf("[zinc] comm inter-node: node 0 sends %.0f B/step = %.4fM (forward gather %.4fM, backward gather "
           "%.4fM, after the step %.4fM, gradient reduction %.4fM; M = %.0f B, the 16-bit model)\n",
           tot, tot / M, ph[0] / M, ph[1] / M, ph[2] / M, ph[3] / M, M);
}

/* The rank's device: the host, or (Z-CUDA-006) the GPU, whose buffers the
 * simulator's collectives then reach through the CUDA memops. */
static int rank_device(RunCtx *ctx, int rank, ZnDevice *d, ZnErr *err) {
    if (!ctx->o->device_cuda) {
        zn_device_host_init(d);
        return 0;
    }
#if ZN_HAVE_CUDA
    int rc = zn_device_cuda_init(d, ctx->o->gpu, ctx->o->cfg.exact, err);
    if (!rc && ctx->cuda_sim && (rc = zn_cuda_sim_attach(ctx->cuda_sim, rank, d, err))) zn_device_cuda_free(d);
    return rc;
#else
    (void)rank;
    return zn_err(err, ZN_E_USAGE, "--backend cuda: this zinc was built without CUDA (nvcc was not found at build time)");
#endif
}

static void rank_device_free(RunCtx *ctx, int rank, ZnDevice *d) {
#if ZN_HAVE_CUDA
    if (ctx->o->device_cuda) {
        if (ctx->cuda_sim) zn_cuda_sim_attach(ctx->cuda_sim, rank, NULL, NULL);
        zn_device_cuda_free(d);
    }
#else
    (void)ctx, (void)rank, (void)d;
#endif
}

/* Kernels have no status: a CUDA device records its first failure, read
 * back after every step. */
static int device_check(ZnDevice *d, ZnErr *err) {
#if ZN_HAVE_CUDA
    if (!strcmp(d->name, "cuda")) return zn_cuda_check(d, err);
#else
    (void)d, (void)err;
#endif
    return 0;
}

static int rank_main(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    RunCtx *ctx = arg;
    const ZnRunOpts *o = ctx->o;
    ZnRunResult *res = ctx->res;
    ZnDevice own, *dev = o->proc_dev ? o->proc_dev : &own;
    int rc = o->proc_dev ? 0 : rank_device(ctx, rank, &own, err);
    if (rc) return rc;
    if (o->device_memory > 0) dev->capacity = o->device_memory;   /* --device-memory (Z-OFF-008) */
    ZnEngine E;
    ZnEngineHooks hooks = {&ctx->sched, o->hooks.inject_steps, rank == o->hooks.inject_rank ? o->hooks.ninject : 0,
                           o->hooks.inject_value, o->out == NULL, memory_phase, ctx,
                           ctx->traces ? &ctx->traces[rank] : NULL,
                           rank == o->hooks.fault_rank ? o->hooks.fault_step : 0, o->hooks.fault_index, o->hooks.fault_delta};
    hooks.repeat_on = o->hooks.repeat_on && rank == o->hooks.repeat_rank;
    hooks.repeat_layer = o->hooks.repeat_layer;
    hooks.hpz_copy_delay = o->hooks.hpz_copy_delay;
    /* with a trace, the tracer watches every collective */
    ZnTraceWatch tw;
    long trace_step = 0;
    double cpu0 = 0.0;
    zn_trace_watch_init(&tw, ctx->traces ? &ctx->traces[rank] : NULL, &trace_step);
    if (ctx->traces || o->measure_cpu) comm->watch = &tw.watch;
    if (!o->proc_comm) comm->world.per_node = o->world.per_node;   /* the simulator's nodes (Z-GRP-002) */
    rc = zn_engine_init(&E, &o->cfg, &o->model, &ctx->data, comm, dev, &hooks, err);
    if (rc) {
        comm->watch = NULL;
        if (!o->proc_dev) rank_device_free(ctx, rank, &own);
        return rc;
    }
    if (o->resume && (rc = zn_ckpt_load(&E, o->ckpt_dir, o->ckpt_tag, o->universal, err))) {
        zn_engine_free(&E);
        comm->watch = NULL;
        if (!o->proc_dev) rank_device_free(ctx, rank, &own);
        return rc;
    }
    if (rank == 0) res->first_step = E.global_step;
    float *gbuf = NULL;
    res->comm_init[rank] = comm->stats;
    long gather_init[3];
    memcpy(gather_init, E.gather_sent, sizeof gather_init);
    long inter_init[3], grad_inter0 = zn_comm_tag_inter(&comm->stats, "grad_reduce");
    memcpy(inter_init, E.gather_inter, sizeof inter_init);
    unsigned long long moved_init[4];
    moved_now(&E, moved_init);
    float *params = NULL;
    if (o->record && !(gbuf = zn_malloc(ZN_HOST_APP, (size_t)(res->numel > 0 ? res->numel : 1) * sizeof(float)))) {
        rc = zn_nomem(err);
        goto out;
    }
    /* a run of 0 steps with a checkpoint dir saves the initial state as
       global_step0, so the weights before training can be exported (Z-HF-009) */
    if (o->ckpt_dir && o->steps == 0 && E.global_step == 0 &&
        (rc = zn_ckpt_save(&E, o->ckpt_dir, o->model_spec, o->config_text, err)))
        goto out;
    cpu0 = zn_thread_cpu_s();   /* the steps alone, not the set-up */
    tw.cpu_s = 0.0;
    const double steps_t0 = now_s();   /* the ETA: the mean step of this run so far */
    const long step0 = E.global_step;
    for (long t = E.global_step; t < o->steps; t++) {
        ZnStepResult sr;
        trace_step = t + 1;
        zn_mem_reset_peak(&dev->mem);
        ZnCommStats before = comm->stats;
        long gather_before[3], inter_before[3];
        memcpy(gather_before, E.gather_sent, sizeof gather_before);
        memcpy(inter_before, E.gather_inter, sizeof inter_before);
        unsigned long long moved_before[4];
        moved_now(&E, moved_before);
        const long samples_before = E.global_samples;
        double t0 = now_s();
        zn_phase_meter_start(&ctx->meters[rank], &E);
        if ((rc = zn_engine_train_step(&E, &sr, err)) || (rc = device_check(dev, err))) goto out;
        zn_phase_meter_finish(&ctx->meters[rank], &E);
        memcpy(&res->phases[ZN_PH_N * rank], ctx->meters[rank].ph, sizeof ctx->meters[rank].ph);
        double ms = 1e3 * (now_s() - t0);
        const int report = o->print_every > 0 && (t + 1) % o->print_every == 0;
        if (o->record) {   /* every rank takes part in the gathers */
            if ((rc = zn_engine_gather_params(&E, gbuf, err))) goto out;
            if (rank == 0) memcpy(res->rec_params + t * res->numel, gbuf, (size_t)res->numel * sizeof(float));
            if ((rc = zn_engine_gather_grads(&E, gbuf, err))) goto out;
            if (rank == 0)
                for (long j = 0; j < res->numel; j++)
                    res->rec_grads[t * res->numel + j] = (float)(gbuf[j] / sr.loss_scale);
        }
        if (o->ckpt_dir && o->ckpt_interval > 0 && E.global_step % o->ckpt_interval == 0 &&
            (rc = zn_ckpt_save(&E, o->ckpt_dir, o->model_spec, o->config_text, err)))
            goto out;
        if (o->time_breakdown && report) time_line(ctx, &E);
        if (rank != 0) continue;
        if (o->comm_report && report) {
            comm_line(o, rank, &before, &comm->stats, 1, "step", gather_before, E.gather_sent, inter_before,
                      E.gather_inter);
            offload_line(&E, "step", moved_before, 1);
        }
        res->loss[t] = sr.loss;
        res->grad_norm[t] = sr.grad_norm;
        res->lr[t] = sr.lr;
        res->scale[t] = sr.loss_scale;
        res->skipped[t] = sr.skipped;
        res->step_ms[t] = ms;
        res->scale_after[t] = E.scaler.cur_scale;
        if (o->out && o->print_every > 0 && (t + 1) % o->print_every == 0) {
            char scale[48] = "";
            if (o->cfg.model_dtype == ZN_F16) snprintf(scale, sizeof scale, " scale=%g", sr.loss_scale);
            /* a token model's throughput and the time left (Z-CLI-011), as llm.c and nanoGPT print */
            char tok[80] = "";
            if (o->model.kind == ZN_MODEL_GPT2 && ms > 0) {
                const double per_step = (now_s() - steps_t0) / (double)(t + 1 - step0);
                snprintf(tok, sizeof tok, " tokens_per_s=%.0f eta_s=%.0f",
                         (double)(sr.samples - samples_before) * o->model.seq_len / (ms * 1e-3),
                         per_step * (double)(o->steps - t - 1));
            }
            fprintf(o->out, "step=%ld loss=%.6f lr=%g grad_norm=%.6f%s skipped=%ld samples=%ld time_ms=%.2f%s\n",
                    t + 1, sr.loss, sr.lr, sr.grad_norm, scale, E.skipped_steps, sr.samples, ms, tok);
        }
        if (ctx->csv && !ctx->jsonl) {
            fprintf(ctx->csv, "%ld,%.9g,%.9g,%.9g,%g,%d,%ld,%.3f", t + 1, sr.loss, sr.lr,
                    sr.grad_norm, sr.loss_scale, sr.skipped, sr.samples, ms);
            for (int c = 0; c < ZN_MEM_NCAT; c++) fprintf(ctx->csv, ",%ld", dev->mem.peak[c]);
            fprintf(ctx->csv, "\n");
        } else if (ctx->csv) {
            fprintf(ctx->csv, "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, "
                              "\"loss_scale\": %g, \"skipped\": %d, \"samples\": %ld, \"step_time_ms\": %.3f, "
                              "\"peak_memory\": {",
                    t + 1, isfinite(sr.loss) ? sr.loss : -1.0, sr.lr, sr.grad_norm, sr.loss_scale, sr.skipped,
                    sr.samples, ms);
            for (int c = 0; c < ZN_MEM_NCAT; c++)
                fprintf(ctx->csv, "%s\"%s\": %ld", c ? ", " : "", zn_mem_cat_name((ZnMemCat)c), dev->mem.peak[c]);
            fprintf(ctx->csv, "}}\n");
        }
    }
    res->comm_end[rank] = comm->stats;
    if (o->comm_report && o->steps > 0) {
        pthread_mutex_lock(&ctx->print_lock);
        comm_line(o, rank, &res->comm_init[rank], &comm->stats, o->steps, "run", gather_init, E.gather_sent,
                  inter_init, E.gather_inter);
        if (rank == 0) offload_line(&E, "run", moved_init, o->steps);
        pthread_mutex_unlock(&ctx->print_lock);
    }
    unsigned long long moved_end[4];
    moved_now(&E, moved_end);
    for (int j = 0; j < 4; j++) res->moved[4 * rank + j] = moved_end[j] - moved_init[j];
    for (int j = 0; j < 3; j++) res->inter[4 * rank + j] = E.gather_inter[j] - inter_init[j];
    res->inter[4 * rank + 3] = zn_comm_tag_inter(&comm->stats, "grad_reduce") - grad_inter0;
    res->host_end[rank] = E.tier_host.mem;
    res->nvme_end[rank] = E.tier_nvme.mem;
    params = zn_malloc(ZN_HOST_APP, (size_t)(res->numel > 0 ? res->numel : 1) * sizeof(float));
    if (!params) { rc = zn_nomem(err); goto out; }
    if ((rc = zn_engine_gather_params(&E, params, err))) goto out;
    res->mem_end[rank] = dev->mem;
    if (rank == 0) {
        memcpy(res->params, params, (size_t)res->numel * sizeof(float));
        res->digest = zn_digest(params, res->numel);
    }
out:
    free(params);
    free(gbuf);
    zn_engine_free(&E);
    comm->watch = NULL;
    if (o->measure_cpu) {
        pthread_mutex_lock(&ctx->print_lock);
        res->cpu_total_s += zn_thread_cpu_s() - cpu0;
        res->cpu_comm_s += tw.cpu_s;
        pthread_mutex_unlock(&ctx->print_lock);
    }
    if (!rc && dev->mem.nallocs != 0)
        rc = zn_err(err, ZN_E_INTERNAL, "rank %d leaked %ld device allocations", rank, dev->mem.nallocs);
    if (!o->proc_dev) rank_device_free(ctx, rank, &own);
    return rc;
}

int zn_run(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    memset(res, 0, sizeof *res);
    RunCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.o = o;
    ctx.res = res;
    pthread_mutex_init(&ctx.print_lock, NULL);
    int rc = 0;
    res->steps = o->steps;
    res->numel = zn_model_numel(&o->model);
    res->loss = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(double));
    res->grad_norm = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(double));
    res->lr = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(double));
    res->scale = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(double));
    res->scale_after = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(double));
    res->skipped = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(int));
    res->step_ms = zn_calloc(ZN_HOST_APP, (size_t)o->steps + 1, sizeof(double));
    res->params = zn_calloc(ZN_HOST_APP, (size_t)res->numel + 1, sizeof(float));
    if (o->record) {
        res->rec_params = zn_calloc(ZN_HOST_APP, (size_t)(o->steps * res->numel) + 1, sizeof(float));
        res->rec_grads = zn_calloc(ZN_HOST_APP, (size_t)(o->steps * res->numel) + 1, sizeof(float));
        if (!res->rec_params || !res->rec_grads) {
            zn_run_result_free(res);
            return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " for %ld recorded steps", o->steps);
        }
    }
    res->comm_init = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnCommStats));
    res->comm_end = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnCommStats));
    res->mem_end = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnMemStats));
    res->host_end = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnMemStats));
    res->nvme_end = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnMemStats));
    res->moved = zn_calloc(ZN_HOST_APP, 4 * (size_t)o->world.size, sizeof(unsigned long long));
    res->inter = zn_calloc(ZN_HOST_APP, 4 * (size_t)o->world.size, sizeof(long));
    res->phases = zn_calloc(ZN_HOST_APP, ZN_PH_N * (size_t)o->world.size, sizeof(ZnPhaseStats));
    if (!res->phases || !res->loss || !res->grad_norm || !res->lr || !res->scale || !res->scale_after || !res->skipped || !res->step_ms || !res->params || !res->comm_init ||
        !res->comm_end || !res->mem_end || !res->host_end || !res->nvme_end || !res->moved || !res->inter) {
        zn_run_result_free(res);
        return zn_nomem(err);
    }
    if (zn_sched_init(&ctx.sched, &o->cfg.sched, o->cfg.lr, o->cfg.beta1, o->cfg.beta2, err)) {
        zn_run_result_free(res);
        return err->code;
    }
    if (o->model.kind == ZN_MODEL_GPT2) {   /* windows of the text (Z-DATA-012) */
        memset(&ctx.data, 0, sizeof ctx.data);
        ctx.data.seed = (uint64_t)o->cfg.seed;
        if ((rc = zn_tokens_open(o->data_spec, &ctx.tokens, err)) ||
            (rc = zn_tokens_check(&ctx.tokens, o->model.seq_len, o->model.gpt2.vocab_size, err))) {
            zn_tokens_free(&ctx.tokens);
            zn_run_result_free(res);
            return rc;
        }
        ctx.data.tokens = &ctx.tokens;
    } else if (zn_data_init(&ctx.data, o->model.dims[0], o->model.dims[o->model.nlayers], (uint64_t)o->cfg.seed)) {
        zn_run_result_free(res);
        return zn_nomem(err);
    }
    const int my_rank = o->world.rank;
    if (!(ctx.meters = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnPhaseMeter)))) {
        rc = zn_nomem(err);
        goto out;
    }
    if (o->proc_comm && memcmp(&o->proc_comm->world, &o->world, sizeof o->world)) {
        rc = zn_err(err, ZN_E_INTERNAL, "run options say rank %d of %d, the communicator rank %d of %d", o->world.rank,
                    o->world.size, o->proc_comm->world.rank, o->proc_comm->world.size);
        goto out;
    }
    if (o->proc_comm && o->trace_path) {
        rc = zn_err(err, ZN_E_USAGE, "--trace records the simulator's ranks; with ranks in separate processes "
                    "it is not available");
        goto out;
    }
    if (o->log_path && my_rank == 0) {   /* rank 0 writes the log */
        ctx.csv = fopen(o->log_path, "w");
        if (!ctx.csv) {
            rc = zn_err(err, ZN_E_IO, "cannot open log file '%s'", o->log_path);
            goto out;
        }
        size_t pl = strlen(o->log_path);
        ctx.jsonl = pl > 6 && !strcmp(o->log_path + pl - 6, ".jsonl");
        if (!ctx.jsonl) {
            fprintf(ctx.csv, "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms");
            for (int c = 0; c < ZN_MEM_NCAT; c++) fprintf(ctx.csv, ",peak_%s", zn_mem_cat_name((ZnMemCat)c));
            fprintf(ctx.csv, "\n");
        }
    }
    double t0 = now_s();
    if (o->proc_comm) {   /* one rank of a multi-process run */
        rc = rank_main(my_rank, o->proc_comm, &ctx, err);
        if (rc) zn_err_prefix(err, "rank %d: ", my_rank);
        res->wall_s = now_s() - t0;
        if (!rc && o->out && my_rank == 0) fprintf(o->out, "digest=%016llx\n", (unsigned long long)res->digest);
        goto out;
    }
    ZnSimWorld *w = zn_sim_world_new(o->world.size, err);
    if (!w) { rc = err->code; goto out; }
#if ZN_HAVE_CUDA
    if (o->device_cuda) {   /* N ranks on one GPU: collectives over device memory */
        if (!(ctx.cuda_sim = zn_cuda_sim_new(o->world.size, err))) { zn_sim_world_free(w); rc = err->code; goto out; }
        ZnSimMemOps ops;
        zn_cuda_sim_memops(ctx.cuda_sim, &ops);
        zn_sim_world_set_memops(w, &ops);
    }
#endif
    if (o->trace_path) {
        ctx.traces = zn_calloc(ZN_HOST_APP, (size_t)o->world.size, sizeof(ZnTrace));
        if (!ctx.traces) { zn_sim_world_free(w); rc = zn_nomem(err); goto out; }
        for (int r = 0; r < o->world.size; r++) { ctx.traces[r].rank = r; ctx.traces[r].t0 = t0; }
    }
    rc = zn_sim_run(w, rank_main, &ctx, err);
    res->wall_s = now_s() - t0;
    zn_sim_world_free(w);
#if ZN_HAVE_CUDA
    zn_cuda_sim_free(ctx.cuda_sim);
#endif
    if (!rc && ctx.traces) {
        ZnTrace **tp = zn_malloc(ZN_HOST_APP, (size_t)o->world.size * sizeof *tp);
        if (!tp) rc = zn_nomem(err);
        for (int r = 0; r < o->world.size && tp; r++) tp[r] = &ctx.traces[r];
        if (tp) rc = zn_trace_write(o->trace_path, tp, o->world.size, err);
        free(tp);
    }
    if (!rc && o->comm_report && o->steps > 0 && o->world.per_node < o->world.size) node_inter_line(o, res);
    if (!rc && o->out) fprintf(o->out, "digest=%016llx\n", (unsigned long long)res->digest);
out:
    if (ctx.csv && fclose(ctx.csv) && !rc) rc = zn_err(err, ZN_E_IO, "writing log file '%s' failed", o->log_path);
    zn_data_free(&ctx.data);
    zn_tokens_free(&ctx.tokens);
    free(ctx.meters);
    if (ctx.traces) {
        for (int r = 0; r < o->world.size; r++) zn_trace_free(&ctx.traces[r]);
        free(ctx.traces);
    }
    pthread_mutex_destroy(&ctx.print_lock);
    if (rc) zn_run_result_free(res);
    return rc;
}

void zn_run_result_free(ZnRunResult *res) {
    ZN_FREE_ALL(res->loss, res->grad_norm, res->lr, res->scale, res->scale_after, res->skipped, res->params,
                res->rec_params, res->rec_grads, res->comm_init, res->comm_end, res->mem_end, res->host_end, res->nvme_end, res->moved, res->inter, res->step_ms, res->phases);
    memset(res, 0, sizeof *res);
}
