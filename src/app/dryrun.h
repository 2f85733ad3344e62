/* dryrun.h: `zinc train --dry-run` (spec Z-DRY-*). The real engine, built
 * for one rank on the meta device (device.h: allocations counted, no memory)
 * with the meta communicator (comm_meta.h: collectives counted, no data):
 * what the rank holds on the device, in host memory and on NVMe, by
 * category, and what its collectives send, for a model of any size, in
 * seconds and in little real memory.
 *
 * Ranks are symmetric: every rank's partitions have the same size (the
 * layout pads the flat buffer to 2N and each stage-3 parameter to N pieces
 * of ceil(numel/N); the padding sits in the last ranks' pieces, but each
 * rank allocates the full piece), so one rank stands for all. Rank 0 is the
 * one simulated: it owns the remainder of every uneven split (comm.h's even
 * counts give the first n % N ranks one more element), so it is never
 * smaller than another. */
#ifndef ZN_DRYRUN_H
#define ZN_DRYRUN_H
#include <stdio.h>
#include "app/phase_meter.h"
#include "app/run.h"
#include "comm/comm_meta.h"

enum { ZN_DRY_DEVICE = 0, ZN_DRY_HOST, ZN_DRY_NVME, ZN_DRY_NTIERS };

#define ZN_DRY_MAX_PHASES 8

typedef struct {
    int rank;                         /* the rank simulated (0) */
    ZnWorld world;
    long numel;                       /* model parameters */
    long padded;                      /* the layout's padded total (stage 3: N * partition) */
    long part_n;                      /* elements of the rank's optimizer partition */
    long long largest_layer;          /* DeepSpeed's largest_layer_params (cli_estimate.h) */
    long persistent;                  /* stage 3: elements of the persistent parameters, gathered
                                         whole (N pieces each) at init and kept (Z-S3-002) */
    /* after zn_engine_init: cur = what the rank holds, peak = init's peak */
    ZnMemStats init[ZN_DRY_NTIERS];
    ZnCommStats comm_init;            /* init's collectives */
    /* one zn_engine_train_step on meta data (when asked): cur after it,
       peak over it (activations, gathered parameters, buckets included) */
    int stepped;
    ZnMemStats step[ZN_DRY_NTIERS];
    ZnCommStats comm_step;            /* the step's collectives alone */
    long gathered_peak;               /* stage 3: most parameter elements gathered at once in the step */
    /* the device at each see_memory_usage point of the step (Z-REP-002):
       cur at that point, win_peak since the point before */
    int nphases;
    struct { char what[24]; ZnMemStats dev; } phase[ZN_DRY_MAX_PHASES];
    /* the step by phase (forward, backward, step: phase_meter.h) and its
       collectives by kind (comm_meta.h), what the step-time model prices */
    ZnPhaseStats ph[ZN_PH_N];
    ZnMetaLog calls;
    double nvme_read, nvme_write;     /* NVMe bytes a real step would move (the dry run moves none): Z-DRY-009 */
} ZnDryRun;

/* The dry run of o (resolved config, model, world; o->device_memory is the
 * device's capacity as in a real run) for rank 0; step: also run one
 * optimizer step. Errors are the engine's (a capacity too small fails the
 * same allocation a real run would). */
int zn_dry_run(const ZnRunOpts *o, int step, ZnDryRun *res, ZnErr *err);

/* The five model-state categories (params16, grads, master32, exp_avg,
 * exp_avg_sq) of m: what DeepSpeed's estimators count. */
long zn_dry_model_states(const ZnMemStats *m);

/* The report of `zinc train --dry-run`: every tier by category (the names of
 * the memory report) with totals in GiB, the step's phases, the collectives,
 * and per tier a line next to DeepSpeed's estimator. */
void zn_dry_run_print(FILE *f, const ZnRunOpts *o, const ZnDryRun *r);

#endif
