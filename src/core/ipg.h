/* ipg.h: the bytes of DeepSpeed's IPG ("independent partition gradient")
 * buffers, the gradient staging a rank holds whatever the buckets hold
 * (spec Z-MEM-011). zinc's own bucket buffer lives inside them. */
#ifndef ZN_IPG_H
#define ZN_IPG_H

#include "core/config.h"
#include "core/plan.h"

/* Per rank, in bytes: at stages 1 and 2 (DeepSpeedZeroOptimizer.setup_buckets)
 * one buffer of reduce_bucket_size elements of the model dtype where
 * contiguous_gradients is on (an optimizer offload turns it on), a second
 * with overlap_comm; at stage 3 (DeepSpeedZeroOptimizer_Stage3.__init__) one
 * of the communication dtype where contiguous_gradients is on; 0 at stage 0. */
long zn_ds_ipg_bytes(const ZnConfig *cfg, const ZnPlan *P);

#endif
