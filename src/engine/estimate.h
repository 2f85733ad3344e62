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

/* Which rows of the tables to print. */
enum {
    ZN_EST_ROWS_ALL = 0,   /* no --offload: every combination, as DeepSpeed */
    ZN_EST_ROWS_NONE,      /* --offload none */
    ZN_EST_ROWS_CPU,       /* --offload cpu: optimizer on the CPU, params on the GPU */
    ZN_EST_ROWS_BOTH,      /* --offload all: optimizer and params on the CPU (stage 3) */
};

/* The DeepSpeed tables, line for line (Z-EST-004, Z-EST-005). */
void zn_est_print_zero2(FILE *f, long long params, int gpus_per_node, int nodes,
                        double buffer_factor, int rows);
void zn_est_print_zero3(FILE *f, long long params, long long largest_layer, int gpus_per_node,
                        int nodes, double buffer_factor, int rows);
/* The ZeRO paper table for Nd devices (Z-EST-007). */
void zn_est_print_paper(FILE *f, long long params, int nd, int K);

#endif
