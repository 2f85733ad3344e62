/* engine.h: the SPMD training engine. One ZnEngine per rank; each calls its
 * comm and its device and never asks which backend it runs on. Stages 0-3
 * differ only in what the layout says each rank owns and in when gradients
 * are reduced and parameters gathered (spec Z-ENG-*).
 *
 * Every buffer below that holds parameters, gradients, optimizer state,
 * activations or collective staging lives in the device's memory (all but
 * the model run's host staging): code outside the device never dereferences it,
 * but moves it with E->k->upload/download (spec Z-DEV-001). */
#ifndef ZN_ENGINE_H
#define ZN_ENGINE_H
#include <stdint.h>
#include "core/config.h"
#include "engine/model.h"
#include "engine/data.h"
#include "core/layout.h"
#include "comm/comm.h"
#include "device/device.h"
#include "engine/optim.h"
#include "engine/loss_scaler.h"
#include "engine/lr_schedule.h"
#include "io/trace.h"

struct ZnEngine;
/* the subsystems' own state, each a field of the engine */
#include "engine/offload.h"
#include "engine/zeropp.h"
#include "engine/mics.h"
#include "engine/fetch.h"

typedef struct {
    double loss;        /* mean loss over the global batch */
    double grad_norm;   /* unscaled, pre-clip global L2 norm of the averaged gradient */
    double lr;          /* learning rate the step used */
    int skipped;        /* the optimizer step was skipped (overflow) */
    double loss_scale;  /* the scale the step's backward used (1 unless fp16) */
    long samples;       /* samples seen after this step */
} ZnStepResult;

/* Hooks into the step, as PyTorch's module and optimizer hooks (NULL:
 * none). The drills of drill.h plant their faults through them. */
typedef struct {
    /* after module m's forward: 1 runs that forward again */
    int (*forward)(void *ctx, const struct ZnEngine *E, int module);
    /* after module m's backward, before its gradients reach their buckets:
       dW[q] is its q-th parameter's gradient, on the device */
    void (*backward)(void *ctx, struct ZnEngine *E, int module, float *const *dW);
    /* after the optimizer updated the masters, before the working weights
       are published: work is the working image on tier (offload.h) */
    int (*updated)(void *ctx, struct ZnEngine *E, float *work, ZnDevice *tier, ZnErr *err);
    void *ctx;
} ZnStepHooks;

/* Optional inputs of zn_engine_init (NULL: none). */
typedef struct {
    const ZnLrSched *sched;     /* a scheduler built once for the run (copied); NULL: built here */
    int quiet;                  /* 1: no overflow lines */
    /* called at DeepSpeed's see_memory_usage points: "init", "before forward",
       "after forward", "before backward", "after backward", "before step",
       "after step" (Z-REP-002) */
    void (*phase)(void *ctx, struct ZnEngine *E, const char *what);
    void *phase_ctx;
    ZnTrace *trace;             /* forward / backward / step events, or NULL */
    ZnStepHooks step;
    /* hpZ's secondary copies are queued, as an asynchronous device copy is,
       and made when the engine synchronises before a secondary gather
       (zeropp.h; the race of DeepSpeed #5059, Z-ZPP-004); 0: made at once */
    int hpz_async_copy;
} ZnEngineHooks;

typedef struct ZnEngine {
    const ZnConfig *cfg;
    const ZnModel *model;
    const ZnData *data;
    ZnComm *comm;
    ZnDevice *dev;
    const ZnKernels *k;
    ZnWorld world;          /* this rank's world: its communicator's (core/topo.h) */
    /* the ranks that split the states among them: the world, or with MiCS
       this rank's shard group of S consecutive ranks (size S, rank r % S);
       repl: the ranks holding the same partition (MiCS), size 1 without */
    ZnWorld pw;
    ZnMics mics;            /* MiCS's groups and staging (mics.h) */
    ZnPlan P;               /* the stage plan: what this rank holds, when it reduces */
    /* host scratch sized at init, so a step allocates nothing on the host */
    long *counts;           /* [world] counts of a collective */
    ZnRecvPiece *pieces;    /* [npieces] a flat bucket's received pieces */
    int npieces;
    uint64_t *norm_all;     /* [2 * world] the norm's fixed-point partial sums */
    float *losses, *loss_all;   /* [GA], [GA * world] */
    double *loss_ordered;       /* [GA * world] */
    ZnLayout L;
    ZnAdamParams adam;

    /* stages 0-2: the flat working copy of all parameters (flat order) */
    float *flat_params;
    /* stages 0/1: full gradient accumulated over micro-steps (flat order) */
    float *flat_grads;
    /* stage 3: this rank's flat partition of the working parameters */
    float *param_part;
    float **full;           /* stage 3: gathered full parameters (pn*W) or NULL */
    int *persistent;        /* stage 3: params never released (Z-S3-002) */
    ZnFetch fetch;          /* the module visits and stage 3's fetching (fetch.h) */

    /* optimizer partition: master weights, gradients, Adam moments. The
       master and moments live in the optimizer groups (offload.h); fp32
       stage 0's master is flat_params itself */
    long part_n;
    float *grad_part;       /* stage 0: flat_grads; stage 1: flat_grads + r*S_p */
    struct ZnOptGroup *og;  /* [nog] ranges of the partition with their states and tier */
    int nog;

    ZnOffload off;          /* the tiers besides the device (offload.h, Z-OFF-*) */
    /* the partition cut by weight-decay rule (decay.h): Adam runs once per range */
    struct ZnDecayRange *decay;
    int ndecay;

    float *bucket_buf;      /* reduce bucket (stages 2/3, stage 1 with round robin) */
    long bucket_cap;
    long ipg_extra;         /* bytes of DeepSpeed's IPG buffers charged beyond bucket_buf (Z-MEM-011) */
    int next_bucket, next_entry;   /* where the next gradient hook writes */
    float *grad_scratch;    /* per-layer dW|db from backward */
    /* tied weights (Z-ENG-016): a param used by several layers collects its
       gradient over the uses and enters its bucket once, at its last use */
    int *first_use;         /* [nparams] lowest layer using the param */
    float **tied_acc;       /* [nparams] accumulator, NULL unless tied */
    int *tied_cnt;          /* [nparams] contributions so far this micro-step */

    /* precision (Z-PREC-*) */
    ZnDtype dt;             /* model dtype: weights, activations, gradients */
    ZnDtype cdt;            /* dtype of gradient collectives */
    ZnLossScaler scaler;
    ZnLrSched sched;
    int check_overflow;     /* skip steps whose gradient holds inf/NaN */
    ZnZeroPP zpp;           /* hpZ's secondaries, qwZ's and qgZ's staging (zeropp.h) */
    uint16_t *comm16;       /* staging for 16-bit collectives */
    long comm16_cap;
    /* collectives on a few host values (norm pieces, the overflow flag, the
       losses, checkpoint sums) go through this device buffer: a
       communicator takes device buffers only */
    void *scratch;
    size_t scratch_bytes;
    /* the model's activations of a micro-step and its host staging */
    ZnModelRun *run;
    ZnEngineHooks hooks;

    /* canonical mode (Z-CANON-*): binary-counter accumulation over micro-steps */
    int canonical;
    int nlevels;
    float **levels;         /* [nlevels] partition-sized partial sums */
    unsigned long occupied; /* bit k: levels[k] holds a partial sum */

    /* this step's wall-clock breakdown in ms (Z-REP-003): forward, backward
       (with the reductions it triggers), reductions alone, optimizer step */
    double t_fwd, t_bwd, t_reduce, t_step;

    long opt_step;          /* optimizer steps applied (Adam's t) */
    long skipped_steps;
    long global_step;       /* steps taken, skipped ones included */
    long global_samples;
    int micro;              /* micro-step within the current optimizer step */
} ZnEngine;

/* The layout a config gives a model at a world size (what every engine,
 * checker and report of that run uses). */
ZnLayoutOpts zn_layout_opts(const ZnConfig *cfg);
int zn_config_layout(const ZnConfig *cfg, const ZnModel *model, int world, ZnLayout *L, ZnErr *err);

int zn_engine_init(ZnEngine *E, const ZnConfig *cfg, const ZnModel *model, const ZnData *data,
                   ZnComm *comm, ZnDevice *dev, const ZnEngineHooks *hooks, ZnErr *err);
void zn_engine_free(ZnEngine *E);

/* One optimizer step: gradient_accumulation_steps micro-steps of forward and
 * backward on this rank's micro-batches of global step E->global_step, the
 * reductions the stage prescribes, then the optimizer. */
int zn_engine_train_step(ZnEngine *E, ZnStepResult *res, ZnErr *err);

/* Collective: every rank receives the full fp32 master parameters in model
 * order (total_numel floats; padding stripped). */
int zn_engine_gather_params(ZnEngine *E, float *out, ZnErr *err);

/* Collective: the averaged gradient of the last step (times the loss scale
 * it used), gathered like zn_engine_gather_params. */
int zn_engine_gather_grads(ZnEngine *E, float *out, ZnErr *err);

/* Collective: the full Adam moments in model order (checkpoint tests). */
int zn_engine_gather_moments(ZnEngine *E, float *exp_avg, float *exp_avg_sq, ZnErr *err);

/* Everything besides the partitions that a checkpoint must restore for a
 * bitwise-exact resume (Z-CKPT-003). */
typedef struct {
    long opt_step, global_step, global_samples, skipped_steps;
    ZnLossScaler scaler;
    long sched_t;           /* the scheduler's last_batch_iteration */
} ZnEngineState;

void zn_engine_get_state(const ZnEngine *E, ZnEngineState *s);
/* Collective: installs the counters and this rank's master / exp_avg /
 * exp_avg_sq partitions (E->part_n floats each), then publishes the working
 * weights (cast and gather) exactly as after an optimizer step. */
int zn_engine_set_state(ZnEngine *E, const ZnEngineState *s, const float *master, const float *exp_avg,
                        const float *exp_avg_sq, ZnErr *err);

/* Collective: every rank contributes count elements of dt from send (host
 * memory) and receives world * count elements in rank order into recv (host
 * memory), staged through the engine's device scratch (at least 2 uint64 or
 * gradient_accumulation_steps floats per rank). */
int zn_engine_all_gather_host(ZnEngine *E, const void *send, void *recv, long count, ZnDtype dt,
                              const char *tag, ZnErr *err);

/* FNV-1a 64 over the little-endian bytes of the parameters in model order. */
uint64_t zn_digest(const float *params, long n);

/* This rank's partition of one state, copied to the host (E->part_n floats;
 * ZN_PART_PARAMS: the working-parameter partition of a plan that partitions
 * parameters). What a checkpoint saves, without reaching into the device. */
typedef enum { ZN_PART_MASTER, ZN_PART_EXP_AVG, ZN_PART_EXP_AVG_SQ, ZN_PART_PARAMS } ZnPartState;
int zn_engine_read_part(ZnEngine *E, ZnPartState which, float *host, ZnErr *err);
/* The partition itself when the device's buffers are host memory (the
 * simulator), else NULL: a checkpoint save writes it without a copy, and a
 * load reads a shard straight into it (then hands it to
 * zn_engine_set_state, which sees it is in place). */
float *zn_engine_part_in_place(const ZnEngine *E, ZnPartState which);
/* Swap statistics of this rank's NVMe files (zeros without NVMe). */
void zn_engine_nvme_stats(const ZnEngine *E, unsigned long long *read_bytes, unsigned long long *write_bytes);

#endif
