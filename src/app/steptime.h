/* steptime.h: how long one optimizer step takes on a machine (spec
 * Z-TIME-*). The model prices what a dry run counted -- the meta kernels'
 * FLOPs and memory traffic, the collectives by kind (op, tag, group, phase),
 * the offload copies and the NVMe traffic -- on a machine (machine.h):
 *
 *   compute: FLOPs / device_flops + bytes / device_mem_bw per phase, the
 *            CPU optimizer's elements / host_adam_rate in the step;
 *   a collective of n ranks: steps * alpha + max(a rank's intra-node bytes
 *            / intra beta, node egress / (gpus_per_node * inter beta)), the
 *            rank's bytes the mean over node 0's ranks, steps = n - 1
 *            (ring all-gather, reduce-scatter, broadcast, all-to-all) or
 *            2(n - 1) (all-reduce, barrier), alpha the inter-node one when
 *            the group spans nodes;
 *   copies: host<->device bytes / h2d_bw, NVMe bytes / nvme_bw.
 *
 * The overlap rules (what DeepSpeed hides under compute): in the forward
 * and the backward, stage 3's parameter gathers and parameter fetches
 * (prefetched while stage3_prefetch_bucket_size > 0), and in the backward
 * the gradient reduction and the gradients' copy to the host when
 * overlap_comm is on; nothing in the step (the optimizer waits for every
 * gradient, the next forward for every parameter). A phase takes compute +
 * exposed, exposed = what cannot overlap + max(0, what can - compute). */
#ifndef ZN_STEPTIME_H
#define ZN_STEPTIME_H
#include "app/dryrun.h"
#include "app/machine.h"

typedef struct {
    double compute[ZN_PH_N];   /* seconds of device (and, in the step, CPU optimizer) work */
    double comm[ZN_PH_N];      /* seconds of collectives, copies and NVMe traffic */
    double overlap[ZN_PH_N];   /* of comm, the seconds allowed to run under compute */
    double exposed[ZN_PH_N];   /* of comm, the seconds that add to the phase */
    double total[ZN_PH_N];     /* compute + exposed */
    /* comm by kind, per phase */
    double intra[ZN_PH_N], inter[ZN_PH_N], latency[ZN_PH_N], copies[ZN_PH_N], nvme[ZN_PH_N];
    double step_s;             /* the sum of the phases */
    double flops;              /* the rank's device FLOPs in the step */
    double device_flops;       /* the GEMM rate they run at: the machine's fp32 one for an fp32 model */
    double tflops_per_gpu;     /* flops / step_s / 1e12 */
    double samples_per_s;      /* the global batch / step_s */
    double tokens_per_s;       /* samples * sequence length (a language model; else 0) */
} ZnStepTime;

/* The step of dry run r (made with one step) of options o on machine m.
 * ZN_E_USAGE when the run's nodes differ from the machine's (the run must
 * put m->gpus_per_node ranks on a node, or fit on one node). */
int zn_step_time(const ZnRunOpts *o, const ZnDryRun *r, const ZnMachine *m, ZnStepTime *t, ZnErr *err);

#endif
