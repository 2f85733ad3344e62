/* plan.c: the four ZeRO stages as plans (spec Z-PLAN-001). The only file
 * of zinc that compares a stage number. */
#include <limits.h>
#include <string.h>
#include "core/plan.h"

static ZnShard stage_shard(int stage) {
    if (stage == 1 || stage == 2) return ZN_SHARD_FLAT;
    if (stage == 3) return ZN_SHARD_PARAM;
    return ZN_SHARD_NONE;
}

int zn_plan_build(ZnPlan *P, int stage, ZnErr *err) {
    if (stage < 0 || stage > 3) return zn_err(err, ZN_E_USAGE, "ZeRO stage %d not in 0..3", stage);
    memset(P, 0, sizeof *P);
    P->stage = stage;
    P->optim_ratio = 1.0;   /* no offload until zn_plan_offload */
    P->hpz = 1;             /* no ZeRO++ until zn_plan_zeropp */
    P->shard = stage_shard(stage);
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

/* Field by field (a memcmp would compare the padding between them too). */
int zn_plan_same(const ZnPlan *a, const ZnPlan *b) {
    return zn_plan_same_layout(a, b) && a->stage == b->stage && a->reduce_per_micro == b->reduce_per_micro &&
           a->boundary_all_reduce == b->boundary_all_reduce && a->allgather_after_step == b->allgather_after_step &&
           a->gather_per_layer == b->gather_per_layer && a->norm_across_ranks == b->norm_across_ranks &&
           a->ds_optimizer == b->ds_optimizer && a->comm_volume_psi == b->comm_volume_psi &&
           a->optim_tier == b->optim_tier && a->param_tier == b->param_tier && a->grads_on_host == b->grads_on_host &&
           a->optim_ratio == b->optim_ratio && a->hpz == b->hpz && a->quant_weights == b->quant_weights &&
           a->quant_grads == b->quant_grads && a->mics_shard == b->mics_shard && a->mics_hier == b->mics_hier;
}

int zn_plan_same_layout(const ZnPlan *a, const ZnPlan *b) {
    return a->shard == b->shard && a->params == b->params && a->grads == b->grads && a->optim == b->optim &&
           a->step_per_subgroup == b->step_per_subgroup && a->ckpt_param_partition == b->ckpt_param_partition;
}
