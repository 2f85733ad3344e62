/* estimate.c: the model-state memory estimators of `zinc estimate` (spec
 * Z-EST-001..Z-EST-007; its flags and report: src/app/cli_estimate.c).
 *
 * DeepSpeed's estimators are Python: products of ints are exact big ints,
 * an int times a float converts the int to the nearest double first, `/` is
 * true division, and int() truncates toward zero. We reproduce each step in
 * double arithmetic, in Python's order, so every figure equals DeepSpeed's to
 * the byte (Z-EST-003). The ZeRO paper's formula is plain arithmetic on top. */
#include "engine/estimate.h"
#include "core/config.h"
#include "engine/model.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What DeepSpeed prints for offload device "cpu". Its format_options writes
 * f'{OffloadDeviceEnum.cpu:4}'; OffloadDeviceEnum is a (str, Enum), and from
 * Python 3.11 format() of such a member gives "OffloadDeviceEnum.cpu" (the
 * width 4 pads nothing). Python <= 3.10 gave "cpu " instead, as DeepSpeed's
 * docs/code-docs/source/memory.rst still show (Z-EST-004). */
#define ZN_EST_CPU_STR "OffloadDeviceEnum.cpu"

/* 2^30: DeepSpeed divides by 2**30 and labels the result "GB". */
#define GIB 1073741824.0

/* ------------------------------------------------------------------------ */
/* Python semantics */

/* int(x) for a float x: truncation toward zero. Python would return a big
 * int past 2^63; we clamp so the cast is never undefined (Z-EST-013). */
static long long py_int(double x) {
    if (x != x) return 0;                 /* NaN: cannot happen for valid input */
    if (x >= 9223372036854775808.0) return LLONG_MAX;
    if (x <= -9223372036854775808.0) return LLONG_MIN;
    return (long long)x;
}

/* Python's max(a, b) for an int a and a float b returns a unless b > a (the
 * first maximal argument wins), and the winner keeps its type. Either way,
 * multiplying it by params afterwards gives the same double in C: an exact int
 * product rounded once (int path) or float(params) * b (float path), because
 * params and a are exact in a double. */
static double py_max_int_float(long long a, double b) {
    return b > (double)a ? b : (double)a;
}

/* The range in which the functions below are exact and free of overflow in
 * their integer steps (Z-EST-003): params and largest layer in
 * 0..ZN_EST_MAX_PARAMS, 1..ZN_EST_MAX_GPUS GPUs in total, a finite factor >= 0. */
static int valid_inputs(long long params, long long largest, int gpn, int nodes, double f) {
    if (params < 0 || params > ZN_EST_MAX_PARAMS) return 0;
    if (largest < 0 || largest > ZN_EST_MAX_PARAMS) return 0;
    if (gpn < 1 || nodes < 1 || gpn > ZN_EST_MAX_GPUS || nodes > ZN_EST_MAX_GPUS) return 0;
    if ((long long)gpn * nodes > ZN_EST_MAX_GPUS) return 0;
    if (!isfinite(f) || f < 0) return 0;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* the estimators */

ZnEst zn_est_zero2(long long params, int gpus_per_node, int nodes, int cpu_offload,
                   double buffer_factor) {
    ZnEst r = {-1, -1};
    if (!valid_inputs(params, 0, gpus_per_node, nodes, buffer_factor)) return r;
    long long total_gpus = (long long)nodes * gpus_per_node;
    double P = (double)params;            /* exact: params < 2^53 */
    double cpu;
    if (cpu_offload) {
        /* GPU keeps the fp16 params; CPU keeps everything else for every GPU
           of the node, at least 16 bytes a param */
        r.gpu = 2 * params;
        long long m = 4 * total_gpus > 16 ? 4 * total_gpus : 16;  /* max of two ints */
        cpu = P * (double)m * buffer_factor;
    } else {
        /* 2 = fp16 params; 18 = 2 fp16 grads + 4 fp32 grads + 4 fp32 params
           + 8 Adam states, partitioned. 18*params is an exact int in Python
           and below 2^53 here, so the double quotient is Python's true division */
        r.gpu = 2 * params + py_int((double)(18 * params) / (double)total_gpus);
        /* (params*4)*gpus_per_node is exact in Python, rounded once when
           multiplied by the factor; P*4.0 is exact, so one rounding here too */
        cpu = P * 4.0 * (double)gpus_per_node * buffer_factor;
    }
    r.cpu = py_int(cpu);
    return r;
}

ZnEst zn_est_zero3(long long params, long long largest_layer, int gpus_per_node, int nodes,
                   int cpu_offload, int cpu_offload_params, int zero_init, double buffer_factor) {
    ZnEst r = {-1, -1};
    if (!valid_inputs(params, largest_layer, gpus_per_node, nodes, buffer_factor)) return r;
    long long total_gpus = (long long)nodes * gpus_per_node;
    double P = (double)params;
    /* 1/num_nodes: a float, so e.g. 16 * (1/3) is not 16/3 and the CPU figure
       may land one byte below the exact value (Z-EST-003) */
    double gpus_factor = 1.0 / (double)nodes;
    /* gathering the largest layer: 2 bytes fp16 param + 2 bytes fp16 grad */
    long long largest_layer_memory = 4 * largest_layer;
    double cpu;
    if (cpu_offload) {
        /* the CPU holds 18 bytes a parameter with the parameters offloaded
           too, 16 without (then the GPU keeps the fp16 parameters) */
        const double per_param = cpu_offload_params ? 18.0 : 16.0;
        r.gpu = largest_layer_memory +
                (cpu_offload_params ? 0 : py_int((double)(2 * params) / (double)total_gpus));
        /* Python: ((params*18) * gpus_factor) * factor, left to right */
        if (zero_init)
            cpu = P * per_param * gpus_factor * buffer_factor;
        else
            cpu = P * py_max_int_float(4LL * gpus_per_node, per_param * gpus_factor) * buffer_factor;
    } else {
        r.gpu = largest_layer_memory + py_int((double)(18 * params) / (double)total_gpus);
        /* with zero.Init only the largest layer is ever whole on the CPU */
        if (zero_init)
            cpu = (double)largest_layer * 4.0 * (double)gpus_per_node * buffer_factor;
        else
            cpu = P * 4.0 * (double)gpus_per_node * buffer_factor;
    }
    r.cpu = py_int(cpu);
    return r;
}

/* The paper's table read off the stage plan: 2 bytes of fp16 parameters,
 * 2 of gradients and K of optimizer state per parameter, each state held in
 * full or split N ways (baseline, Pos, Pos+g, Pos+g+p for stages 0..3). */
double zn_paper_bytes_per_device(long long params, int nd, int stage, int K) {
    ZnPlan S;
    ZnErr e;
    if (nd < 1 || K < 0 || params < 0 || zn_config_stage_plan(stage, &S, &e)) return NAN;
    double P = (double)params, N = (double)nd, k = (double)K;
    double full = 0.0, split = 0.0;   /* bytes per parameter held in full / split */
    *(S.params == ZN_HOLD_FULL ? &full : &split) += 2.0;
    *(S.grads == ZN_HOLD_FULL ? &full : &split) += 2.0;
    *(S.optim == ZN_HOLD_FULL ? &full : &split) += k;
    return full * P + split * P / N;
}

/* ------------------------------------------------------------------------ */
/* printing: DeepSpeed's *_all_cold tables, line for line */

/* the first two lines; the SW line and the column header follow (callers) */
static void print_header(FILE *f, int gpn, int nodes) {
    fprintf(f, "Estimated memory needed for params, optim states and gradients for a:\n");
    fprintf(f, "HW: Setup with %d %s, %d %s per node.\n", nodes, nodes > 1 ? "nodes" : "node", gpn,
            gpn > 1 ? "GPUs" : "GPU");
}

/* One row: f" {cpu/2**30:7.2f}GB | {gpu/2**30:6.2f}GB | {options}". The
 * division is exact scaling of the double nearest the int, which is what
 * Python's int/int true division gives; %.2f rounds the exact binary value
 * to nearest-even like Python's format. */
static void print_row(FILE *f, ZnEst e, const char *options) {
    fprintf(f, " %7.2fGB | %6.2fGB | %s\n", (double)e.cpu / GIB, (double)e.gpu / GIB, options);
}

/* int(n/1e6): millions, truncated, as the SW line prints them */
static long long millions(long long n) {
    return (long long)((double)n / 1e6);
}

void zn_est_print_zero2(FILE *f, long long params, int gpus_per_node, int nodes,
                        double buffer_factor, int rows) {
    print_header(f, gpus_per_node, nodes);
    fprintf(f, "SW: Model with %lldM total params.\n", millions(params));
    fprintf(f, "  per CPU  |  per GPU |   Options\n");
    /* DeepSpeed's order: offload first, then none */
    for (int off = 1; off >= 0; off--) {
        /* --offload all has no stage 2 row: parameters stay on the GPU */
        int keep = rows == ZN_EST_ROWS_ALL || (rows == ZN_EST_ROWS_NONE && !off) ||
                   (rows == ZN_EST_ROWS_CPU && off);
        if (!keep) continue;
        ZnEst e = zn_est_zero2(params, gpus_per_node, nodes, off, buffer_factor);
        print_row(f, e, off ? "offload_optimizer=" ZN_EST_CPU_STR : "offload_optimizer=none");
    }
}

void zn_est_print_zero3(FILE *f, long long params, long long largest_layer, int gpus_per_node,
                        int nodes, double buffer_factor, int rows) {
    print_header(f, gpus_per_node, nodes);
    fprintf(f, "SW: Model with %lldM total params, %lldM largest layer params.\n", millions(params),
            millions(largest_layer));
    fprintf(f, "  per CPU  |  per GPU |   Options\n");
    /* DeepSpeed's loops: optimizer offload yes/no, param offload yes/no
       (skipping params offloaded without the optimizer), zero_init yes/no */
    for (int off = 1; off >= 0; off--)
        for (int offp = 1; offp >= 0; offp--) {
            if (!off && offp) continue;
            int keep = rows == ZN_EST_ROWS_ALL || (rows == ZN_EST_ROWS_NONE && !off) ||
                       (rows == ZN_EST_ROWS_CPU && off && !offp) ||
                       (rows == ZN_EST_ROWS_BOTH && off && offp);
            if (!keep) continue;
            for (int zi = 1; zi >= 0; zi--) {
                ZnEst e = zn_est_zero3(params, largest_layer, gpus_per_node, nodes, off, offp, zi,
                                       buffer_factor);
                char opts[160];
                snprintf(opts, sizeof opts, "offload_param=%s, offload_optimizer=%s, zero_init=%d",
                         offp ? ZN_EST_CPU_STR : "none", off ? ZN_EST_CPU_STR : "none", zi);
                print_row(f, e, opts);
            }
        }
}

void zn_est_print_paper(FILE *f, long long params, int nd, int K) {
    static const char *what[4] = {
        "baseline DP     (2+2+K)*P",
        "Pos     stage 1 2P + 2P + K*P/Nd",
        "Pos+g   stage 2 2P + (2+K)*P/Nd",
        "Pos+g+p stage 3 (2+2+K)*P/Nd",
    };
    fprintf(f, "ZeRO paper (K=%d%s): model states per device, P = %lld params, Nd = %d, GB = 1e9 bytes\n",
            K, K == 12 ? ", mixed-precision Adam" : "", params, nd);
    fprintf(f, "  paper GB |     formula GB | stage   formula\n");
    for (int s = 0; s < 4; s++) {
        double gb = zn_paper_bytes_per_device(params, nd, s, K) / 1e9;
        /* the paper prints one decimal (Figure 1: 31.4, 16.6, 1.9) */
        fprintf(f, " %9.1f | %14.6f | %s\n", gb, gb, what[s]);
    }
}
