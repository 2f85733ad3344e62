/* config.h: DeepSpeed's JSON config as zinc reads it (spec/SPEC.md, Z-CFG-*).
 * Parsed with cJSON; every key of DeepSpeed 0.19.6's zero_optimization is
 * parsed and validated, the batch triad follows DeepSpeed's inference rules,
 * "auto" values are filled from the command line (ZnConfigArgs) the way
 * Hugging Face's Trainer fills them. */
#ifndef ZN_CONFIG_H
#define ZN_CONFIG_H
#define ZN_WD_EXCLUDE_MAX 16
#include "core/err.h"
#include "core/dtype.h"
#include "core/plan.h"

typedef enum { ZN_OPT_ADAM = 0, ZN_OPT_ADAMW } ZnOptType;
typedef enum {
    ZN_SCHED_NONE = 0, ZN_SCHED_WARMUP_LR, ZN_SCHED_WARMUP_DECAY_LR,
    ZN_SCHED_WARMUP_COSINE_LR, ZN_SCHED_ONE_CYCLE, ZN_SCHED_LR_RANGE_TEST
} ZnSchedType;
typedef enum { ZN_OFFLOAD_NONE = 0, ZN_OFFLOAD_CPU, ZN_OFFLOAD_NVME } ZnOffloadDevice;

typedef struct {
    ZnOffloadDevice device;
    int pin_memory;          /* default 1 */
    char nvme_path[256];
    long buffer_count;       /* param 5, optimizer 4 */
    double buffer_size;      /* param only, 1e8 */
    double max_in_cpu;       /* param only, 1e9 */
    int fast_init;           /* optimizer only, 0 */
    double ratio;            /* optimizer only, 1.0 (<1 only with stage 3) */
    int pipeline_read, pipeline_write;   /* optimizer only, 0: overlap the NVMe swap with the step */
    int present;             /* the section was given and not null */
} ZnOffloadConfig;

/* The "aio" section (DeepSpeed runtime/swap_tensor/aio_config.py): how the
 * NVMe swapper issues its I/O (io/aio.h). */
typedef struct {
    long block_size;                    /* bytes per request, 1048576 */
    long queue_depth;                   /* requests in flight, 8 */
    long intra_op_parallelism;          /* threads that split one transfer, 1 */
    int single_submit;                  /* 0: one submit call per batch; 1: one per request */
    int overlap_events;                 /* 1: refill the queue as requests complete */
    int use_gds;                        /* 0 (GPUDirect Storage: refused, zinc has none) */
} ZnAioConfig;

typedef struct {
    int stage;                          /* 0..3, default 0 */
    int contiguous_gradients;           /* 1 */
    int reduce_scatter;                 /* 1 */
    long reduce_bucket_size;            /* 5e8 elements */
    int use_multi_rank_bucket_allreduce;/* 1 */
    int allgather_partitions;           /* 1 */
    long allgather_bucket_size;         /* 5e8, must be even */
    int overlap_comm;                   /* -1 unset: 1 for stage 3, else 0 after resolution */
    int load_from_fp32_weights;         /* 1 */
    int elastic_checkpoint;             /* 0 */
    ZnOffloadConfig offload_param, offload_optimizer;
    long sub_group_size;                /* 1e9 */
    long prefetch_bucket_size;          /* stage3_prefetch_bucket_size, 5e7 */
    long param_persistence_threshold;   /* stage3_param_persistence_threshold, 1e5 */
    long model_persistence_threshold;   /* stage3_model_persistence_threshold, LONG_MAX */
    long max_live_parameters;           /* stage3_max_live_parameters, 1e9 */
    long max_reuse_distance;            /* stage3_max_reuse_distance, 1e9 */
    int gather_16bit_weights_on_model_save; /* 0 */
    long module_granularity_threshold;  /* 0 */
    int use_all_reduce_for_fetch_params;/* 0 */
    int allgather_sequential;           /* 0 (1 forces prefetch_bucket_size = 1) */
    int ignore_unused_parameters;       /* 1 */
    int round_robin_gradients;          /* 0 */
    int compute_grad_norm;              /* 1 (DeepSpeed 0.19.8; zinc computes the norm regardless) */
    long zero_hpz_partition_size;       /* 1 */
    int zero_quantized_weights, zero_quantized_gradients, zero_quantized_nontrainable_weights; /* 0 */
    long mics_shard_size;               /* -1 */
    int mics_hierarchical_params_gather;/* 0 */
    int memory_efficient_linear;        /* 1 */
    int pipeline_loading_checkpoint;    /* 0 */
    int override_module_apply;          /* 1 */
    int log_trace_cache_warnings;       /* 0 */
} ZnZeroConfig;

/* The fp16 and bf16 sections (their defaults live in config.c's key tables,
 * like every key's) */
typedef struct {
    int enabled, auto_cast;
    double loss_scale;           /* 0 = dynamic */
    int initial_scale_power, hysteresis, consecutive_hysteresis;
    long loss_scale_window;
    double min_loss_scale;
    int fp16_master_weights_and_grads;
} ZnFp16Config;

typedef struct {
    int enabled, immediate_grad_update, check_grad_overflow;
    int bf16_master_weights_and_grads, bf16_optimizer_states;
} ZnBf16Config;

/* Scheduler parameters; a field not given keeps DeepSpeed's default. NaN
 * marks "None" where DeepSpeed's default is None (resolved at use). */
typedef struct {
    ZnSchedType type;
    double warmup_min_lr, warmup_max_lr;   /* WarmupLR max None -> optimizer lr (NaN) */
    long warmup_num_steps;                 /* 1000 */
    int warmup_type_linear;                /* 0 = 'log', 1 = 'linear' */
    long total_num_steps;                  /* WarmupDecayLR / WarmupCosineLR, required */
    double warmup_min_ratio, cos_min_ratio;/* 0.0, 1e-4 */
    double cycle_min_lr, cycle_max_lr, decay_lr_rate;
    long cycle_first_step_size, cycle_second_step_size;   /* 2000, -1 = same as first */
    long cycle_first_stair_count, cycle_second_stair_count;/* 0, -1 = same as first */
    long decay_step_size;
    int cycle_momentum;
    double cycle_min_mom, cycle_max_mom, decay_mom_rate;
    double lr_range_test_min_lr, lr_range_test_step_rate;
    long lr_range_test_step_size;
    int lr_range_test_staircase;
} ZnSchedConfig;

typedef struct {
    /* batch triad, resolved against the world size */
    long train_batch_size, micro_batch, grad_accum;
    /* optimizer */
    int optimizer_present;
    ZnOptType opt_type;     /* type as written ("Adam" / "AdamW") */
    int adamw;              /* effective decoupled weight decay (adam_w_mode, default 1) */
    int torch_adam;         /* 0 */
    int bias_correction;    /* 1 */
    double lr, beta1, beta2, eps, weight_decay; /* 1e-3, 0.9, 0.999, 1e-8, 0 */
    ZnZeroConfig zero;
    ZnFp16Config fp16;
    ZnBf16Config bf16;
    ZnSchedConfig sched;
    ZnAioConfig aio;
    double gradient_clipping;       /* 1.0 (DeepSpeed >= 0.19.3); 0 disables */
    int prescale_gradients;         /* 0 */
    double gradient_predivide_factor; /* 1.0 */
    int allreduce_sum;              /* gradient_allreduce_op: 0 "mean" (default), 1 "sum" */
    int communication_data_type;    /* -1 None, else a ZnDtype */
    long steps_per_print;           /* 0 = None (no progress lines) */
    int wall_clock_breakdown;       /* 0 */
    int memory_breakdown;           /* 0 */
    long seed;                      /* 1234 (zinc's default; DeepSpeed takes the seed from the script) */
    int managed_gradient_accumulation; /* 1 */
    int zero_allow_untested_optimizer;  /* 0 */
    int zero_force_ds_cpu_optimizer;    /* 1 */
    int load_universal;             /* checkpoint.load_universal, 0 */
    /* "zinc": { ... } section: zinc's own switches */
    int canonical;                  /* 0 */
    int activation_checkpointing;   /* the "activation_checkpointing" section is present: recompute each block */
    int exact;                      /* 0 */
    int deepspeed_quirks;           /* 0: zinc's fixes; 1: reproduce DeepSpeed's quirks (Z-PREC-*) */
    double comm_timeout;            /* 0: unset; zinc.comm_timeout, seconds a collective may take (Z-RDV-009) */
    /* zinc.weight_decay_exclude (Z-OPT-020): parameters whose name contains
       one of these get no weight decay; -1 count: not given (the model's
       default, engine/decay.c) */
    int n_wd_exclude;
    char wd_exclude[ZN_WD_EXCLUDE_MAX][64];
    /* derived */
    ZnDtype model_dtype;            /* fp32 unless fp16/bf16 enabled */
    int world_size;                 /* the world the config was resolved for */
    ZnPlan plan;                    /* the whole plan: stage, offload, ZeRO++, MiCS (zn_config_plan) */
} ZnConfig;

/* Values from the command line. A field left at its "unset" value (-1, or NaN
 * for doubles, see zn_config_args_init) neither overrides the config nor fills
 * an "auto". world_size is always set. */
typedef struct {
    int world_size;
    long train_batch_size, micro_batch, grad_accum;   /* -1 unset */
    int stage;                                        /* -1 unset */
    long seed;                                        /* -1 unset */
    double lr, weight_decay, beta1, beta2, eps;       /* NaN unset */
    double max_grad_norm;                             /* NaN unset: fills "gradient_clipping": "auto" */
    long warmup_steps;                                /* -1: fills scheduler warmup_num_steps "auto" */
    long total_steps;                                 /* -1: fills total_num_steps "auto" */
    int dtype;                                        /* -1 unset, else ZnDtype (fp32/fp16/bf16): overrides fp16/bf16.enabled */
    long hidden_size;                                 /* -1 unknown; model width for bucket-size "auto" */
    int canonical;                                    /* -1 unset, 0/1 */
    int exact;                                        /* -1 unset, 0/1 */
} ZnConfigArgs;

void zn_config_args_init(ZnConfigArgs *a);   /* everything unset, world_size 1 */
void zn_config_defaults(ZnConfig *c);         /* DeepSpeed defaults, batch triad unset (-1) */

/* Parses config JSON text (len bytes, need not be NUL-terminated) named
 * `source` in messages, applies args (overrides and "auto"), resolves and
 * validates. On error returns ZN_E_USAGE with a message such as
 *   "ds.json:3:17: JSON syntax error near '}'"
 *   "ds.json: zero_optimization.stage: expected an integer 0..3, got 7"
 *   "ds.json: zero_optimization.foo: unknown key (DeepSpeed forbids unknown keys here)"
 * Unknown keys outside zero_optimization produce a warning line on stderr
 * (prefix "zinc: warning: ") and are otherwise ignored. text may be NULL
 * (no config file): defaults plus args. */
int zn_config_parse(const char *text, size_t len, const char *source,
                    const ZnConfigArgs *args, ZnConfig *out, ZnErr *err);
/* Reads the file and calls zn_config_parse. */
int zn_config_load(const char *path, const ZnConfigArgs *args, ZnConfig *out, ZnErr *err);

/* Builds c->plan, the whole plan (stage, offload, ZeRO++, MiCS), from
 * c->zero at c->world_size: the one place zinc builds a plan, so every reader
 * sees the same one (spec Z-PLAN-003). zn_config_parse calls it; a caller
 * that changes zero_optimization after parsing (zinc compare --offload)
 * calls it again. ZN_E_USAGE for a stage outside 0..3. */
int zn_config_plan(ZnConfig *c, ZnErr *err);
/* The plan of a bare ZeRO stage, DeepSpeed's defaults otherwise, nothing
 * offloaded: for what knows only a stage number (the estimators' --stage, a
 * checkpoint's saved stage). */
int zn_config_stage_plan(int stage, ZnPlan *P, ZnErr *err);

/* DeepSpeed's batch triad inference and checks (reference §8.1); -1 = not given.
 * Exposed separately for the DeepSpeed TestBatchConfig matrix. */
int zn_config_resolve_batch(long *tb, long *mb, long *ga, int world, ZnErr *err);

#endif
