/* ipg.c: DeepSpeed's IPG buffer bytes (spec Z-MEM-011). */
#include "core/ipg.h"
#include "core/dtype.h"

long zn_ds_ipg_bytes(const ZnConfig *cfg, const ZnPlan *P) {
    const ZnZeroConfig *z = &cfg->zero;
    const long n = z->reduce_bucket_size;
    if (P->ds_optimizer == ZN_DS_ZERO12) {
        /* stage_1_and_2.py: contiguous_gradients or cpu_offload */
        if (!z->contiguous_gradients && P->optim_tier == ZN_TIER_DEVICE) return 0;
        const long nbuf = z->overlap_comm > 0 ? 2 : 1;   /* double buffers against the overlap */
        return nbuf * n * (long)zn_dtype_size(cfg->model_dtype);
    }
    if (P->ds_optimizer == ZN_DS_ZERO3) {
        if (!z->contiguous_gradients) return 0;
        const ZnDtype comm = cfg->communication_data_type >= 0 ? (ZnDtype)cfg->communication_data_type
                                                                : cfg->model_dtype;
        return n * (long)zn_dtype_size(comm);
    }
    return 0;
}
