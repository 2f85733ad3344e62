/* machine.h: the machine a step-time prediction is made for (spec Z-MACH-*).
 * A machine is a node of identical devices: how fast a device computes and
 * moves its own memory, the two link classes a collective crosses (inside a
 * node, between nodes) as latency-bandwidth (alpha-beta) pairs, and the host
 * paths offload uses (host<->device copies, the CPU optimizer, NVMe).
 *
 * Every figure is a sustained rate, what a kernel or a collective achieves,
 * not a datasheet peak: a preset derives its figures from the datasheet
 * times a stated efficiency (machine.c says which). A machine comes from a
 * preset name ("dgx-h100", "dgx-a100") or from a JSON file (keys below),
 * which may start from a preset and override single keys. */
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
    double device_flops;    /* FLOP/s a device sustains in its GEMMs (16-bit) */
    double device_mem_bw;   /* bytes/s a memory-bound kernel moves */
    double device_memory;   /* bytes a device holds */
    ZnLink intra;           /* device to device inside a node (NVLink) */
    ZnLink inter;           /* device to another node (its NIC's share) */
    double h2d_bw;          /* bytes/s between host memory and one device (either way) */
    double host_adam_rate;  /* optimizer elements/s the host updates for one rank (CPU Adam) */
    double nvme_bw;         /* bytes/s one rank reads or writes on NVMe */
} ZnMachine;

/* The presets' names, comma-separated ("dgx-h100, dgx-a100"). */
const char *zn_machine_preset_names(void);
/* A preset by name; ZN_E_USAGE naming the presets when there is none. */
int zn_machine_preset(const char *name, ZnMachine *m, ZnErr *err);
/* A preset name, or else a JSON file at that path: errors name the file and
 * the JSON path (and the byte offset of a syntax error). */
int zn_machine_load(const char *name_or_path, ZnMachine *m, ZnErr *err);
/* The JSON form of m, which zn_machine_load reads back to the same values. */
int zn_machine_write_json(FILE *f, const ZnMachine *m, ZnErr *err);

#endif
