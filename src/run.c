/* run.c: drive a simulated run. Rank 0 prints; every rank trains. */
#include "run.h"
#include "engine.h"
#include "data.h"
#include "lr_schedule.h"
#include "../sim/sim.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const ZnRunOpts *o;
    ZnRunResult *res;
    ZnData data;
    FILE *csv;
    ZnLrSched sched;   /* built once, copied by every rank */
} RunCtx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int rank_main(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    RunCtx *ctx = arg;
    const ZnRunOpts *o = ctx->o;
    ZnRunResult *res = ctx->res;
    ZnDevice dev;
    zn_device_host_init(&dev);
    ZnEngine E;
    ZnEngineHooks hooks = {&ctx->sched, o->inject_steps, rank == o->inject_rank ? o->ninject : 0,
                           o->inject_value, o->out == NULL};
    int rc = zn_engine_init(&E, &o->cfg, &o->model, &ctx->data, comm, &dev, &hooks, err);
    if (rc) return rc;
    res->comm_init[rank] = comm->stats;
    float *params = NULL;
    for (long t = 0; t < o->steps; t++) {
        ZnStepResult sr;
        double t0 = now_s();
        if ((rc = zn_engine_train_step(&E, &sr, err))) goto out;
        double ms = 1e3 * (now_s() - t0);
        if (rank != 0) continue;
        res->loss[t] = sr.loss;
        res->grad_norm[t] = sr.grad_norm;
        res->lr[t] = sr.lr;
        res->scale[t] = sr.loss_scale;
        res->skipped[t] = sr.skipped;
        res->scale_after[t] = E.scaler.cur_scale;
        if (o->out && o->print_every > 0 && (t + 1) % o->print_every == 0) {
            char scale[48] = "";
            if (o->cfg.model_dtype == ZN_F16) snprintf(scale, sizeof scale, " scale=%g", sr.loss_scale);
            fprintf(o->out, "step=%ld loss=%.6f lr=%g grad_norm=%.6f%s skipped=%ld samples=%ld time_ms=%.2f\n",
                    t + 1, sr.loss, sr.lr, sr.grad_norm, scale, E.skipped_steps, sr.samples, ms);
        }
        if (ctx->csv)
            fprintf(ctx->csv, "%ld,%.9g,%.9g,%.9g,%g,%d,%ld,%.3f\n", t + 1, sr.loss, sr.lr,
                    sr.grad_norm, sr.loss_scale, sr.skipped, sr.samples, ms);
    }
    res->comm_end[rank] = comm->stats;
    params = malloc((size_t)(res->numel > 0 ? res->numel : 1) * sizeof(float));
    if (!params) { rc = zn_err(err, ZN_E_NOMEM, "out of host memory"); goto out; }
    if ((rc = zn_engine_gather_params(&E, params, err))) goto out;
    res->mem_end[rank] = dev.mem;
    if (rank == 0) {
        memcpy(res->params, params, (size_t)res->numel * sizeof(float));
        res->digest = zn_digest(params, res->numel);
    }
out:
    free(params);
    zn_engine_free(&E);
    if (!rc && dev.mem.nallocs != 0)
        rc = zn_err(err, ZN_E_INTERNAL, "rank %d leaked %ld device allocations", rank, dev.mem.nallocs);
    return rc;
}

int zn_run(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    memset(res, 0, sizeof *res);
    RunCtx ctx = {o, res, {0}, NULL};
    int rc = 0;
    res->steps = o->steps;
    res->world = o->world;
    res->numel = zn_model_numel(&o->model);
    res->loss = calloc((size_t)o->steps + 1, sizeof(double));
    res->grad_norm = calloc((size_t)o->steps + 1, sizeof(double));
    res->lr = calloc((size_t)o->steps + 1, sizeof(double));
    res->scale = calloc((size_t)o->steps + 1, sizeof(double));
    res->scale_after = calloc((size_t)o->steps + 1, sizeof(double));
    res->skipped = calloc((size_t)o->steps + 1, sizeof(int));
    res->params = calloc((size_t)res->numel + 1, sizeof(float));
    res->comm_init = calloc((size_t)o->world, sizeof(ZnCommStats));
    res->comm_end = calloc((size_t)o->world, sizeof(ZnCommStats));
    res->mem_end = calloc((size_t)o->world, sizeof(ZnMemStats));
    if (!res->loss || !res->grad_norm || !res->lr || !res->scale || !res->scale_after || !res->skipped || !res->params || !res->comm_init ||
        !res->comm_end || !res->mem_end) {
        zn_run_result_free(res);
        return zn_err(err, ZN_E_NOMEM, "out of host memory");
    }
    if (zn_sched_init(&ctx.sched, &o->cfg.sched, o->cfg.lr, o->cfg.beta1, o->cfg.beta2, err)) {
        zn_run_result_free(res);
        return err->code;
    }
    if (zn_data_init(&ctx.data, o->model.dims[0], o->model.dims[o->model.nlayers], (uint64_t)o->cfg.seed)) {
        zn_run_result_free(res);
        return zn_err(err, ZN_E_NOMEM, "out of host memory");
    }
    if (o->log_path) {
        ctx.csv = fopen(o->log_path, "w");
        if (!ctx.csv) {
            rc = zn_err(err, ZN_E_IO, "cannot open log file '%s'", o->log_path);
            goto out;
        }
        fprintf(ctx.csv, "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms\n");
    }
    ZnSimWorld *w = zn_sim_world_new(o->world, err);
    if (!w) { rc = err->code; goto out; }
    double t0 = now_s();
    rc = zn_sim_run(w, rank_main, &ctx, err);
    res->wall_s = now_s() - t0;
    zn_sim_world_free(w);
    if (!rc && o->out) fprintf(o->out, "digest=%016llx\n", (unsigned long long)res->digest);
out:
    if (ctx.csv && fclose(ctx.csv) && !rc) rc = zn_err(err, ZN_E_IO, "writing log file '%s' failed", o->log_path);
    zn_data_free(&ctx.data);
    if (rc) zn_run_result_free(res);
    return rc;
}

void zn_run_result_free(ZnRunResult *res) {
    free(res->loss);
    free(res->grad_norm);
    free(res->lr);
    free(res->scale);
    free(res->scale_after);
    free(res->skipped);
    free(res->params);
    free(res->comm_init);
    free(res->comm_end);
    free(res->mem_end);
    memset(res, 0, sizeof *res);
}
