/* plan.h: the stage plan (spec Z-PLAN-*). A ZeRO stage is a choice of what
 * each rank holds of each training state and when it talks to its peers;
 * the plan states that choice as data, built once from the stage number.
 * The engine, the layout, checkpoints, the spec runner, the estimator and
 * the CLI read the plan's fields; plan.c is the only place that compares a
 * stage number. Config resolution (zn_config_plan, core/config.c) is the one
 * caller of the builders below: it builds the whole plan once, stage,
 * offload, ZeRO++ and MiCS, into ZnConfig.plan, and everything reads that.
 * A future dimension is a new field here, set there, not a branch in every
 * file.
 *
 *                          stage 0   stage 1   stage 2   stage 3
 *   shard (layout)         none      flat      flat      per param
 *   params (model dtype)   full      full      full      part
 *   grads                  full      full      part      part
 *   optimizer state        full      part      part      part
 *   grads reduced          boundary  boundary  micro     micro
 *   boundary collective    all-red.  red.-sc.  -         -
 *   params after the step  -         all-gath. all-gath. gather per layer
 *   DeepSpeed optimizer    FP16_Opt. ZeRO 1/2  ZeRO 1/2  ZeRO 3 */
#ifndef ZN_PLAN_H
#define ZN_PLAN_H
#include "core/err.h"

/* How the layout cuts the parameters over the ranks. */
typedef enum {
    ZN_SHARD_NONE = 0,   /* every rank holds the whole flat buffer */
    ZN_SHARD_FLAT,       /* one flat buffer cut in W equal parts (aligned to 2W) */
    ZN_SHARD_PARAM,      /* each parameter cut in W chunks on its own */
} ZnShard;

/* What a rank holds of one state. */
typedef enum { ZN_HOLD_FULL = 0, ZN_HOLD_PART } ZnHold;

/* Where a state lives (offload, spec Z-OFF-*): the accelerator, host memory,
 * or NVMe files staged through host buffers. */
typedef enum { ZN_TIER_DEVICE = 0, ZN_TIER_HOST, ZN_TIER_NVME } ZnTier;

/* The DeepSpeed optimizer class a stage reproduces (its quirks differ:
 * Z-PREC-005, Z-PREC-010). */
typedef enum { ZN_DS_FP16_OPTIMIZER = 0, ZN_DS_ZERO12, ZN_DS_ZERO3 } ZnDsOptimizer;

typedef struct {
    int stage;              /* 0..3: named in logs, checkpoints and reports, never branched on */
    ZnShard shard;
    ZnHold params;          /* the model-dtype working copy */
    ZnHold grads;           /* the gradient accumulation buffer */
    ZnHold optim;           /* fp32 master and Adam moments */
    /* gradients: 0 accumulate the full gradient locally and reduce it at
       the accumulation boundary; 1 reduce-scatter through the bucket
       buffer as backward produces them, every micro-step */
    int reduce_per_micro;
    /* at the boundary: 1 all-reduce (everyone keeps the whole gradient),
       0 reduce-scatter to the owners of the optimizer partitions */
    int boundary_all_reduce;
    /* after the step: 1 all-gather the updated partitions into every
       rank's full working copy (optimizer state partitioned, params not) */
    int allgather_after_step;
    /* params gathered before a layer's forward/backward and released
       after (the persistence and reuse rules keep some) */
    int gather_per_layer;
    /* one Adam call per sub-group of the partition (DeepSpeed stage 3) */
    int step_per_subgroup;
    /* a global norm or overflow flag needs the peers' partitions */
    int norm_across_ranks;
    ZnDsOptimizer ds_optimizer;
    /* a checkpoint's model-states shard holds this rank's working-param
       partition as well (stage 3's zero_pp files) */
    int ckpt_param_partition;
    /* the ZeRO paper's per-step traffic in units of Ψ·(N−1)/N (§7): 2 for
       reduce-scatter + all-gather, 3 with the second gather of stage 3 */
    int comm_volume_psi;
    /* offload (zn_plan_offload; device and 1.0 without it) */
    ZnTier optim_tier;      /* fp32 master and Adam moments */
    ZnTier param_tier;      /* the stage-3 working-parameter partition */
    int grads_on_host;      /* the gradient partition lives with a host optimizer */
    double optim_ratio;     /* fraction of sub-groups, the last ones, kept off the device */
    /* ZeRO++ (zn_plan_zeropp; off without it): where parameters are
       partitioned per layer, how their gathers and the gradients travel */
    int hpz;                /* hpZ: ranks of a secondary-partition group (1: off) */
    int quant_weights;      /* qwZ: parameter gathers move int8 values and fp32 scales */
    int quant_grads;        /* qgZ: gradients reduce by the two-hop int4 all-to-all */
    /* MiCS (zn_plan_mics; 0 without it): the states split within shard
       groups of mics_shard consecutive ranks, replicated across them */
    int mics_shard;
    int mics_hier;          /* gathers go across nodes first, then inside the node */
} ZnPlan;

/* The plan of ZeRO stage `stage` (0..3); ZN_E_USAGE for another number. */
int zn_plan_build(ZnPlan *P, int stage, ZnErr *err);
/* Adds offload to a built plan: optim_device and param_device as in the
 * config (0 none, 1 cpu, 2 nvme), ratio its offload_optimizer.ratio.
 * DeepSpeed's rules: nvme swaps only at stage 3 (stages 1/2 keep the state
 * in host memory), parameters move only where they are partitioned. */
void zn_plan_offload(ZnPlan *P, int optim_device, int param_device, double ratio);
/* Adds ZeRO++ to a built plan (spec Z-ZPP-001): hpz the config's
 * zero_hpz_partition_size (0 and 1: off; above the world: the world, as
 * DeepSpeed takes min(hpz, world)), qw and qg its zero_quantized_weights
 * and zero_quantized_gradients. Like DeepSpeed, only a plan that gathers
 * parameters per layer (stage 3) takes them. */
void zn_plan_zeropp(ZnPlan *P, long hpz, int qw, int qg, int world);
/* Adds MiCS to a built plan (spec Z-MICS-001): shard the config's
 * mics_shard_size (<= 0: off), hier its mics_hierarchical_params_gather.
 * Like DeepSpeed, only stage 3 (parameters partitioned per layer). */
void zn_plan_mics(ZnPlan *P, long shard, int hier);
/* 1 when a and b are the same plan: every field equal. */
int zn_plan_same(const ZnPlan *a, const ZnPlan *b);
/* 1 when a and b cut and hold the states alike: the same shard, holds and
 * sub-groups, so over the same number of partitions (MiCS: the shard group)
 * a checkpoint saved under one is read shard for shard under the other.
 * Where a state lives (offload) and how it travels (ZeRO++) do not change
 * what a checkpoint holds. */
int zn_plan_same_layout(const ZnPlan *a, const ZnPlan *b);
#endif
