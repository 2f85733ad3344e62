/* plan.c: the four ZeRO stages as plans (spec Z-PLAN-001). The only file
 * of zinc that compares a stage number. */
#include <limits.h>
#include <string.h>
#include "core/plan.h"

int zn_plan_build(ZnPlan *P, int stage, ZnErr *err) {
    if (stage < 0 || stage > 3) return zn_err(err, ZN_E_USAGE, "ZeRO stage %d not in 0..3", stage);
    memset(P, 0, sizeof *P);
    P->stage = stage;
    P->optim_ratio = 1.0;   /* no offload until zn_plan_offload */
    P->hpz = 1;             /* no ZeRO++ until zn_plan_zeropp */
    P->shard = zn_plan_shard(stage);
    P->params = stage == 3 ? ZN_HOLD_PART : ZN_HOLD_FULL;
    P->grads = stage >= 2 ? ZN_HOLD_PART : ZN_HOLD_FULL;
    P->optim = stage >= 1 ? ZN_HOLD_PART : ZN_HOLD_FULL;
    P->reduce_per_micro = P->grads == ZN_HOLD_PART;
    P->boundary_all_reduce = P->optim == ZN_HOLD_FULL;
    P->allgather_after_step = P->optim == ZN_HOLD_PART && P->params == ZN_HOLD_FULL;
    P->gather_per_layer = P->params == ZN_HOLD_PART;
    P->step_per_subgroup = P->shard == ZN_SHARD_PARAM;
    P->norm_across_ranks = P->optim == ZN_HOLD_PART;
    P->ds_optimizer = stage == 0 ? ZN_DS_FP16_OPTIMIZER : stage == 3 ? ZN_DS_ZERO3 : ZN_DS_ZERO12;
    P->ckpt_param_partition = P->params == ZN_HOLD_PART;
    P->comm_volume_psi = P->gather_per_layer ? 3 : 2;
    return 0;
}

ZnShard zn_plan_shard(int stage) {
    if (stage == 1 || stage == 2) return ZN_SHARD_FLAT;
    if (stage == 3) return ZN_SHARD_PARAM;
    return ZN_SHARD_NONE;
}

void zn_plan_offload(ZnPlan *P, int optim_device, int param_device, double ratio) {
    P->optim_tier = ZN_TIER_DEVICE;
    P->param_tier = ZN_TIER_DEVICE;
    P->optim_ratio = 1.0;
    if (optim_device && P->optim == ZN_HOLD_PART) {
        P->optim_tier = optim_device == 2 && P->step_per_subgroup ? ZN_TIER_NVME : ZN_TIER_HOST;
        P->optim_ratio = P->step_per_subgroup ? ratio : 1.0;
    }
    if (param_device && P->params == ZN_HOLD_PART) P->param_tier = param_device == 2 ? ZN_TIER_NVME : ZN_TIER_HOST;
    P->grads_on_host = P->optim_tier != ZN_TIER_DEVICE && P->grads == ZN_HOLD_PART;
}

void zn_plan_zeropp(ZnPlan *P, long hpz, int qw, int qg, int world) {
    P->hpz = 1;
    P->quant_weights = P->quant_grads = 0;
    if (!P->gather_per_layer) return;
    P->hpz = hpz > 1 ? (int)(hpz < world ? hpz : world) : 1;
    P->quant_weights = qw != 0;
    P->quant_grads = qg != 0;
}

void zn_plan_mics(ZnPlan *P, long shard, int hier) {
    /* a size beyond any world stays beyond it (the engine refuses it by name) */
    P->mics_shard = P->gather_per_layer && shard > 0 ? (int)(shard < INT_MAX ? shard : INT_MAX) : 0;
    P->mics_hier = P->mics_shard && hier;
}

int zn_plan_same(const ZnPlan *a, const ZnPlan *b) { return a->stage == b->stage; }
