/* run.c: drive a simulated run. Rank 0 prints; every rank trains. */
#include "app/run.h"
#include "app/run_report.h"
#include "app/phase_meter.h"
#include "core/alloc.h"
#include "engine/engine.h"
#include "engine/drill.h"
#include "engine/data.h"
#include "engine/lr_schedule.h"
#include "io/trace.h"
#include "io/checkpoint.h"
#include "core/layout.h"
#include <pthread.h>
#include "comm/world.h"
#include "comm/coll.h"
#if ZN_HAVE_CUDA
#include "device/cuda.h"
#endif
#include "engine/data_text.h"
#include <stdlib.h>
#include <errno.h>
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

/* The engine's phase hook: the report lines, then the rank's phase meter,
 * which starts a new peak window on every tier. */
static void memory_phase(void *arg, ZnEngine *E, const char *what) {
    RunCtx *ctx = arg;
    zn_report_memory(ctx->o, E, what);
    zn_phase_meter_point(&ctx->meters[E->world.rank], E, what);
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

static int rank_train(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    RunCtx *ctx = arg;
    const ZnRunOpts *o = ctx->o;
    ZnRunResult *res = ctx->res;
    ZnDevice own, *dev = o->proc_dev ? o->proc_dev : &own;
    int rc = o->proc_dev ? 0 : rank_device(ctx, rank, &own, err);
    if (rc) return rc;
    if (o->device_memory > 0) dev->capacity = o->device_memory;   /* --device-memory (Z-OFF-008) */
    ZnEngine E;
    /* what the tests plant in this rank (drill.h) */
    ZnDrill drill = {o->hooks.inject_steps, rank == o->hooks.inject_rank ? o->hooks.ninject : 0, o->hooks.inject_value,
                     rank == o->hooks.fault_rank ? o->hooks.fault_step : 0, o->hooks.fault_index, o->hooks.fault_delta,
                     o->hooks.repeat_on && rank == o->hooks.repeat_rank, o->hooks.repeat_layer};
    ZnEngineHooks hooks = {&ctx->sched, o->out == NULL, memory_phase, ctx, ctx->traces ? &ctx->traces[rank] : NULL,
                           zn_drill_hooks(&drill), o->hooks.hpz_copy_delay};
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
    memcpy(gather_init, E.fetch.gather_sent, sizeof gather_init);
    long inter_init[3], grad_inter0 = zn_comm_tag_inter(&comm->stats, "grad_reduce");
    memcpy(inter_init, E.fetch.gather_inter, sizeof inter_init);
    unsigned long long moved_init[4];
    zn_report_moved(&E, moved_init);
    float *params = NULL;
    if (o->record && !(gbuf = zn_malloc(ZN_HOST_APP, (size_t)(res->numel > 0 ? res->numel : 1) * sizeof(float)))) {
        rc = zn_nomem(err);
        goto out;
    }
    /* a run of 0 steps with a checkpoint dir saves the initial state as
       global_step0, so the weights before training can be exported (Z-HF-008) */
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
        memcpy(gather_before, E.fetch.gather_sent, sizeof gather_before);
        memcpy(inter_before, E.fetch.gather_inter, sizeof inter_before);
        unsigned long long moved_before[4];
        zn_report_moved(&E, moved_before);
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
        if (o->time_breakdown && report) {
            pthread_mutex_lock(&ctx->print_lock);
            zn_report_time(&E);
            pthread_mutex_unlock(&ctx->print_lock);
        }
        if (rank != 0) continue;
        if (o->comm_report && report) {
            zn_report_comm(o, rank, &before, &comm->stats, 1, "step", gather_before, E.fetch.gather_sent, inter_before,
                           E.fetch.gather_inter);
            zn_report_offload(&E, "step", moved_before, 1);
        }
        res->loss[t] = sr.loss;
        res->grad_norm[t] = sr.grad_norm;
        res->lr[t] = sr.lr;
        res->scale[t] = sr.loss_scale;
        res->skipped[t] = sr.skipped;
        res->step_ms[t] = ms;
        res->scale_after[t] = E.scaler.cur_scale;
        if (o->out && o->print_every > 0 && (t + 1) % o->print_every == 0)
            zn_report_step(o->out, o, t, &sr, E.skipped_steps, ms, samples_before,
                           (now_s() - steps_t0) / (double)(t + 1 - step0));
        if (ctx->csv) zn_report_log_row(ctx->csv, ctx->jsonl, t, &sr, ms, &dev->mem);
    }
    res->comm_end[rank] = comm->stats;
    /* the trace and the CPU meter end with the training: the gather of the
       result below is zinc's, not the run's (Z-REP-004) */
    comm->watch = NULL;
    /* the run's averages are over the steps this run took: a resumed run
       starts after its checkpoint's step (Z-REP-005) */
    const long ran = o->steps > step0 ? o->steps - step0 : 0;
    if (o->comm_report && ran > 0) {
        pthread_mutex_lock(&ctx->print_lock);
        zn_report_comm(o, rank, &res->comm_init[rank], &comm->stats, ran, "run", gather_init, E.fetch.gather_sent,
                       inter_init, E.fetch.gather_inter);
        if (rank == 0) zn_report_offload(&E, "run", moved_init, ran);
        pthread_mutex_unlock(&ctx->print_lock);
    }
    unsigned long long moved_end[4];
    zn_report_moved(&E, moved_end);
    for (int j = 0; j < 4; j++) res->moved[4 * rank + j] = moved_end[j] - moved_init[j];
    for (int j = 0; j < 3; j++) res->inter[4 * rank + j] = E.fetch.gather_inter[j] - inter_init[j];
    res->inter[4 * rank + 3] = zn_comm_tag_inter(&comm->stats, "grad_reduce") - grad_inter0;
    res->host_end[rank] = E.off.tier_host.mem;
    res->nvme_end[rank] = E.off.tier_nvme.mem;
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

/* One rank's run, with the collective failure a test planted in it
   (Z-SIM-014) for the run only: a process's communicator outlives it. */
static int rank_main(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    const ZnRunOpts *o = ((RunCtx *)arg)->o;
    const int drill = o->hooks.comm_fail_call > 0 && rank == o->hooks.comm_fail_rank;
    if (drill) zn_coll_fail_at(comm, o->hooks.comm_fail_call);
    int rc = rank_train(rank, comm, arg, err);
    if (drill) zn_coll_fail_at(comm, 0);
    return rc;
}

int zn_run_result_alloc(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    memset(res, 0, sizeof *res);
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
    return 0;
}

int zn_run(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    RunCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.o = o;
    ctx.res = res;
    pthread_mutex_init(&ctx.print_lock, NULL);
    int rc = 0;
    if ((rc = zn_run_result_alloc(o, res, err))) return rc;
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
    if (o->trace_path && (rc = zn_trace_check(o->trace_path, err))) goto out;   /* before, not after, the training */
    if (o->log_path && my_rank == 0) {   /* rank 0 writes the log */
        ctx.csv = fopen(o->log_path, "w");
        if (!ctx.csv) {
            rc = zn_err(err, ZN_E_IO, "cannot open log file '%s': %s", o->log_path, strerror(errno));
            goto out;
        }
        size_t pl = strlen(o->log_path);
        ctx.jsonl = pl > 6 && !strcmp(o->log_path + pl - 6, ".jsonl");
        zn_report_log_header(ctx.csv, ctx.jsonl);
    }
    double t0 = now_s();
    if (o->proc_comm) {   /* one rank of a multi-process run */
        rc = rank_main(my_rank, o->proc_comm, &ctx, err);
        if (rc) zn_err_prefix(err, "rank %d: ", my_rank);
        res->wall_s = now_s() - t0;
        if (!rc && o->out && my_rank == 0) zn_report_digest(o->out, res->digest);
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
    if (!rc && o->comm_report && o->steps > res->first_step && o->world.per_node < o->world.size)
        zn_report_node_inter(o, res);
    if (!rc && o->out) zn_report_digest(o->out, res->digest);
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
