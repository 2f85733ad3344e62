/* estimate.h: `zinc estimate`, the model-state memory estimators (spec
 * Z-EST-*). Two models side by side:
 *   - DeepSpeed's estimators (deepspeed/runtime/zero/stage_1_and_2.py
 *     estimate_zero2_model_states_mem_needs and stage3.py
 *     estimate_zero3_model_states_mem_needs, DeepSpeed 0.19.6), reproduced
 *     with Python's integer and float semantics, and their *_all_cold table;
 *   - the ZeRO paper's per-device formula (Rajbhandari et al., SC'20, §5,
 *     Figure 1, Table 1): (2 + 2 + K) bytes per parameter, K = 12.
 * The estimator functions are pure (no I/O, no allocation); the printers take
 * a FILE so tests can capture the text. */
#ifndef ZN_ESTIMATE_H
#define ZN_ESTIMATE_H
#include <stdio.h>
#include "core/err.h"

/* Bytes per CPU (per node) and per GPU, as DeepSpeed's estimators return
 * them: Python int() of the float result. A result beyond LLONG_MAX is
 * clamped to LLONG_MAX (Python would return a big int); the CLI refuses
 * inputs that reach it (Z-EST-013). */
typedef struct {
    long long cpu, gpu;
} ZnEst;

/* Largest parameter count the estimators accept: 10^14 (100T). Below it every
 * product DeepSpeed forms in Python integers (at most 18 * params) is below
 * 2^53, so a double holds it exactly and the float steps that follow round
 * exactly as CPython's do (Z-EST-003). */
#define ZN_EST_MAX_PARAMS 100000000000000LL
/* Most GPUs per node and most nodes (each). */
#define ZN_EST_MAX_GPUS (1 << 20)

/* DeepSpeed estimate_zero2_model_states_mem_needs (stage 1 and 2; Z-EST-001).
 * cpu_offload: offload_optimizer=cpu. */
ZnEst zn_est_zero2(long long params, int gpus_per_node, int nodes, int cpu_offload,
                   double buffer_factor);
/* DeepSpeed estimate_zero3_model_states_mem_needs (Z-EST-002).
 * cpu_offload: offload_optimizer=cpu; cpu_offload_params: offload_param=cpu;
 * zero_init: the model is built under deepspeed.zero.Init. */
ZnEst zn_est_zero3(long long params, long long largest_layer, int gpus_per_node, int nodes,
                   int cpu_offload, int cpu_offload_params, int zero_init, double buffer_factor);

/* ZeRO paper, bytes of model states per device (Z-EST-006). stage: 0 baseline
 * DP, 1 Pos, 2 Pos+g, 3 Pos+g+p. K: optimizer-state bytes per parameter (12
 * for mixed-precision Adam). NaN for nd < 1, stage outside 0..3 or K < 0. */
double zn_paper_bytes_per_device(long long params, int nd, int stage, int K);

/* Parses a parameter count (Z-EST-008): decimal digits with an optional
 * fraction, then an optional suffix K, M, B or T (any case: 10^3, 10^6, 10^9,
 * 10^12) or an exponent e<digits> ("2851e6"). The value must be a whole
 * number in lo..ZN_EST_MAX_PARAMS. flag names the flag in messages. */
int zn_est_parse_count(const char *flag, const char *s, long long lo, long long *out, ZnErr *err);

/* Which rows of the tables to print. */
enum {
    ZN_EST_ROWS_ALL = 0,   /* no --offload: every combination, as DeepSpeed */
    ZN_EST_ROWS_NONE,      /* --offload none */
    ZN_EST_ROWS_CPU,       /* --offload cpu: optimizer on the CPU, params on the GPU */
    ZN_EST_ROWS_BOTH,      /* --offload all: optimizer and params on the CPU (stage 3) */
};

typedef struct {
    long long params;       /* total trainable parameters (shared counted once) */
    long long largest_layer;/* the largest module's direct parameters */
    int have_largest;       /* --largest-layer or --model given */
    int gpus_per_node, nodes;
    int stage;              /* 1, 2 or 3 with --stage */
    int have_stage;         /* 0: no --stage: the stage 2 and stage 3 tables */
    int rows;               /* ZN_EST_ROWS_* */
    double buffer_factor;   /* additional_buffer_factor */
    const char *model_spec; /* --model, or NULL */
    int largest_layer_index;/* --model: index of the largest layer */
    int help;               /* -h / --help */
} ZnEstOpts;

/* Parses the flags after `zinc estimate` (Z-EST-009..Z-EST-013); with
 * --model, fills params and largest_layer from the model. */
int zn_est_parse_args(int argc, char **argv, ZnEstOpts *o, ZnErr *err);

/* The DeepSpeed tables, line for line (Z-EST-004, Z-EST-005). */
void zn_est_print_zero2(FILE *f, long long params, int gpus_per_node, int nodes,
                        double buffer_factor, int rows);
void zn_est_print_zero3(FILE *f, long long params, long long largest_layer, int gpus_per_node,
                        int nodes, double buffer_factor, int rows);
/* The ZeRO paper table for Nd devices (Z-EST-007). */
void zn_est_print_paper(FILE *f, long long params, int nd, int K);

/* The whole subcommand: parses, then writes the report to out and notes to
 * note. Returns 0, or ZN_E_USAGE with err set (nothing written to out). */
int zn_est_run(int argc, char **argv, FILE *out, FILE *note, ZnErr *err);
/* `zinc estimate ...` (argv: the flags after the subcommand name): exit
 * status 0, or 2 with one message "zinc: error: ..." on stderr. */
int zn_cmd_estimate(int argc, char **argv);

#endif
