/* run.h: a whole simulated training run -- N rank threads, one engine each --
 * with the step lines, the CSV log and everything the tests and the spec
 * runner check afterwards (losses, final parameters, digest, counters). */
#ifndef ZN_RUN_H
#define ZN_RUN_H
#include <stdio.h>
#include <stdint.h>
#include "core/config.h"
#include "engine/model.h"
#include "comm/comm.h"
#include "device/device.h"
#include "app/phase_meter.h"

/* Faults and quirks the tests plant in a run, apart from the options a
 * user sets (a rank of -1 turns each off). */
typedef struct {
    /* rank inject_rank plants inject_value in its gradient at the optimizer
       steps inject_steps (1-based; Z-PREC-006) */
    int inject_rank;
    int ninject;
    long inject_steps[16];
    float inject_value;
    /* with repeat_on, rank repeat_rank runs layer repeat_layer's forward
       twice in its first micro-step (Z-SEQ-002) */
    int repeat_on, repeat_rank, repeat_layer;
    /* zinc compare --fault (Z-REP-001): perturb one master element */
    long fault_step, fault_index;
    int fault_rank;
    float fault_delta;
    int hpz_copy_delay;    /* Z-ZPP-004: hpZ's secondary copies stay pending until synchronised (ZnEngineHooks.hpz_async_copy) */
    /* Z-SIM-014: rank comm_fail_rank's comm_fail_call-th collective of the
       run fails (0: none) */
    int comm_fail_rank;
    long comm_fail_call;
} ZnRunTestHooks;

typedef struct {
    ZnConfig cfg;          /* resolved for world.size */
    ZnModel model;
    ZnWorld world;         /* the run's world; rank: this process's (0 when it runs every rank) */
    long steps;
    FILE *out;             /* step lines and the digest line; NULL = silent */
    long print_every;      /* 0: no step lines */
    const char *log_path;  /* per-step CSV, or NULL */
    /* reports (Z-REP-*) */
    int record;            /* keep every step's full parameters and gradients */
    int memory_report;     /* DeepSpeed's see_memory_usage lines, rank 0 */
    int time_breakdown;    /* DeepSpeed's "time (ms) | fwd_microstep ..." line, every rank */
    int comm_report;       /* per-step and per-run collective bytes against the ZeRO volumes */
    long device_memory;    /* each rank's simulated device capacity in bytes (Z-OFF-008); 0: unlimited */
    const char *trace_path;/* Chrome trace-event JSON */
    int measure_cpu;       /* split each rank's CPU time into collectives and the rest (bench) */
    /* checkpoints (Z-CKPT-*) */
    const char *ckpt_dir;  /* save every ckpt_interval optimizer steps into it */
    long ckpt_interval;
    int resume;            /* start from ckpt_dir/ckpt_tag (NULL tag: latest) */
    const char *ckpt_tag;
    int universal;         /* the tag is a universal checkpoint */
    char model_spec[256];  /* recorded in the manifest */
    char data_spec[512];   /* --data (language models), or empty */
    char *config_text;     /* recorded in the manifest (owned by the caller) */
    /* ranks in separate processes (Z-PROC-004): this process runs one rank
       on this communicator (world = its world) instead of simulating all;
       NULL: the simulator */
    ZnComm *proc_comm;
    /* the device: 0 the host (the simulator's), 1 CUDA (Z-CUDA-*): every rank
       on GPU `gpu` (the simulator's ranks share it), exact per cfg.exact;
       proc_dev: a device the caller made for this process's one rank (the
       nccl backend, whose communicator lives on its stream), or NULL */
    int device_cuda, gpu;
    ZnDevice *proc_dev;
    ZnRunTestHooks hooks;  /* what tests plant; all off (rank -1) for a real run */
} ZnRunOpts;

typedef struct {
    long steps;
    long first_step;                 /* 0, or the global step a resumed run started from */
    double *loss, *grad_norm, *lr, *scale;   /* [steps]; scale: the loss scale the step used */
    double *scale_after;             /* [steps]: the loss scale after the step's update */
    int *skipped;                    /* [steps] */
    double *step_ms;                 /* [steps]: rank 0's wall time of each step */
    long numel;
    float *params;                   /* final fp32 parameters, model order */
    uint64_t digest;
    ZnCommStats *comm_init, *comm_end; /* [world.size of the options]: after init, after the last step */
    ZnMemStats *mem_end;             /* [world.size of the options]: device memory after the last step */
    ZnMemStats *host_end, *nvme_end; /* [world.size]: the offload tiers after the last step (Z-OFF-007) */
    unsigned long long *moved;       /* [4 * world.size]: H2D, D2H, NVMe read, NVMe write bytes of the steps */
    long *inter;                     /* [4 * world.size]: bytes sent to another node by the steps: forward,
                                        backward and after-step parameter gathers, gradient reduction (Z-GRP-003) */
    ZnPhaseStats *phases;            /* [ZN_PH_N * world.size]: each rank's last step by phase (Z-DRY-008) */
    double wall_s;
    double cpu_total_s, cpu_comm_s;  /* with measure_cpu: thread CPU time of all ranks, and the part
                                        spent inside the simulator's collectives */
    float *rec_params, *rec_grads;   /* [steps * numel] when o->record: after each step;
                                        grads unscaled (divided by the step's loss scale) */
} ZnRunResult;

int zn_run(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err);

/* A result with every array of o's run allocated and zeroed, as zn_run
 * starts it (its rank slots for o->world.size ranks); ZN_E_NOMEM frees
 * what it got. */
int zn_run_result_alloc(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err);

void zn_run_result_free(ZnRunResult *res);

#endif
