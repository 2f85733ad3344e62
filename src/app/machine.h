/* machine.h: the machine a step-time prediction is made for (spec Z-MACH-*).
 * A machine is a node of identical devices: how fast a device computes and
 * moves its own memory, the two link classes a collective crosses (inside a
 * node, between nodes) as latency-bandwidth (alpha-beta) pairs, and the host
 * paths offload uses (host<->device copies, the CPU optimizer, NVMe).
 *
 * Every figure is a sustained rate, what a kernel or a collective achieves,
 * not a datasheet peak: a preset derives its figures from the datasheet
 * times a stated efficiency (machine.c says which). A machine comes from a
 * preset name ("dgx-h100", "dgx-a100") or from a JSON file, which may start
 * from a preset and override single keys.
 *
 * The file (at most 1 MiB) speaks human units, named in the keys:
 *
 *   {"name": "my-node", "preset": "dgx-h100", "gpus_per_node": 8,
 *    "device_tflops": 593.6,      10^12 FLOP/s    -> device_flops
 *    "device_tflops_fp32": 40.14, 10^12 FLOP/s    -> device_flops_fp32 (optional)
 *    "device_mem_gbps": 2680,     10^9 bytes/s    -> device_mem_bw
 *    "device_memory_gib": 80,     2^30 bytes      -> device_memory
 *    "intra_node": {"latency_us": 3, "bandwidth_gbps": 360},   -> intra
 *    "inter_node": {"latency_us": 8, "bandwidth_gbps": 45},    -> inter
 *    "host_device_gbps": 51.2,    10^9 bytes/s    -> h2d_bw
 *    "host_adam_gelems": 1.0,     10^9 elements/s -> host_adam_rate
 *    "nvme_gbps": 3.0}            10^9 bytes/s    -> nvme_bw
 *
 * (latency_us: 10^-6 s.) With "preset", every other key is optional and
 * overrides the preset's figure ("name" too: without it the machine keeps
 * the preset's name); without "preset", every key is required but
 * device_tflops_fp32, which is device_tflops wherever the file gives that and
 * not it (a device whose GEMMs run fp32 as fast as 16-bit, as zinc's host's). Unknown or
 * repeated keys are errors, as are wrong types, numbers that are not finite
 * and > 0 (in the file and once scaled), and a gpus_per_node that is not an
 * integer from 1 to 4096. A name is 1 to 63 bytes of printable UTF-8. A
 * number is scaled as decimal text (593.6 TFLOP/s is the double nearest
 * 593.6e12, not 593.6 * 1e12), so the writer's output reads back bit for
 * bit. */
#ifndef ZN_MACHINE_H
#define ZN_MACHINE_H
#include <stdio.h>
#include "core/err.h"

/* One link class, per device: time(bytes, steps) = steps*alpha + bytes/beta. */
typedef struct {
    double alpha;   /* seconds per message step (latency) */
    double beta;    /* bytes per second one device sends on this class */
} ZnLink;

typedef struct {
    char name[64];          /* preset name, or the file's "name" */
    int gpus_per_node;      /* devices per node (>= 1) */
    int overlap;            /* 1: collectives and copies run beside compute (a GPU's streams); 0: they
                               stop it (zinc's CPU ranks, whose collectives block): file key "overlap",
                               true unless the file or the preset says otherwise */
    double device_flops;    /* FLOP/s a device sustains in its GEMMs (16-bit) */
    double device_flops_fp32; /* the same for fp32 GEMMs, a model in fp32 (no TF32: PyTorch's
                                 default for matmuls, and cuBLAS's in zinc's fast mode) */
    double device_mem_bw;   /* bytes/s a memory-bound kernel moves */
    double device_memory;   /* bytes a device holds */
    ZnLink intra;           /* device to device inside a node (NVLink) */
    ZnLink inter;           /* device to another node (its NIC's share) */
    double h2d_bw;          /* bytes/s between host memory and one device (either way) */
    double host_adam_rate;  /* optimizer elements/s the host updates for one rank (CPU Adam) */
    double nvme_bw;         /* bytes/s one rank reads or writes on NVMe */
} ZnMachine;

/* 1 when s is a machine's name: 1 to 63 bytes of printable UTF-8 (what the
 * loader and the writer accept; zinc calibrate checks --name with it). */
int zn_machine_name_ok(const char *s);
/* The presets' names, comma-separated ("dgx-h100, dgx-a100"). */
const char *zn_machine_preset_names(void);
/* A preset by name; ZN_E_USAGE naming the presets when there is none. */
int zn_machine_preset(const char *name, ZnMachine *m, ZnErr *err);
/* A preset name, or else a JSON file at that path (a preset's name wins: a
 * file of that name is reached as "./dgx-h100"). Errors name the file and
 * the JSON path (and the byte offset of a syntax error): ZN_E_USAGE for the
 * content, ZN_E_IO for a file that cannot be read. m is untouched by a
 * failed load. */
int zn_machine_load(const char *name_or_path, ZnMachine *m, ZnErr *err);
/* The JSON form of m, every key ("name" too, "preset" never), each number
 * the shortest decimal (at most 17 digits) that zn_machine_load reads back
 * to the same double. ZN_E_USAGE, writing nothing, for a machine that
 * would not load (the checks of a file). */
int zn_machine_write_json(FILE *f, const ZnMachine *m, ZnErr *err);

#endif
