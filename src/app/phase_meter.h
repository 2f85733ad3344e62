/* phase_meter.h: what one optimizer step does, phase by phase (spec
 * Z-DRY-008). The engine names its see_memory_usage points (Z-REP-002);
 * the meter turns the stretches between them into three phases -- forward
 * (from "before forward", the loss included), backward (from "before
 * backward", the reduction at the accumulation boundary included) and step
 * (from "before step" to the end of the step, the loss gather included) --
 * and keeps, per phase: each tier's highest total bytes and the categories
 * at that moment, the collectives, the meta kernels' work and the offload
 * copies. A phase met again (each micro-step) adds its work and keeps its
 * highest peak. The dry run and the real run use the same meter, so their
 * figures can be compared exactly. */
#ifndef ZN_PHASE_METER_H
#define ZN_PHASE_METER_H
#include "comm/comm.h"
#include "core/plan.h"
#include "device/device.h"

enum { ZN_PH_FORWARD = 0, ZN_PH_BACKWARD, ZN_PH_STEP, ZN_PH_N };
#define ZN_NTIERS 3   /* plan.h's tiers: ZN_TIER_DEVICE, ZN_TIER_HOST, ZN_TIER_NVME */

const char *zn_phase_name(int ph);   /* "forward", "backward", "step" */
const char *zn_tier_name(int t);     /* "device", "host", "nvme" */

typedef struct {
    int seen;                             /* the phase ran */
    long peak[ZN_NTIERS];                 /* highest total bytes held in the phase */
    long at_peak[ZN_NTIERS][ZN_MEM_NCAT]; /* the categories at that moment */
    ZnWork dev, host;                     /* what the meta kernels would have done (dry run) */
    double h2d, d2h;                      /* offload copies, bytes at the width a real run moves */
    ZnCommStats comm;                     /* the phase's collectives */
} ZnPhaseStats;

struct ZnEngine;
typedef struct {
    ZnPhaseStats ph[ZN_PH_N];
    int cur;                              /* the phase of the stretch now open */
    int *phase_out;                       /* if set, kept equal to cur (the meta communicator's log) */
    /* where the open stretch started */
    ZnCommStats comm0;
    ZnWork dev0, host0;
    double h2d0, d2h0;
} ZnPhaseMeter;

/* Starts a step: clears pm and every tier's peak window, and marks where
 * the engine's counters stand. */
void zn_phase_meter_start(ZnPhaseMeter *pm, struct ZnEngine *E);
/* The engine's phase hook (ZnEngineHooks.phase, ctx = the meter): closes
 * the open stretch into its phase and opens the one `what` begins. */
void zn_phase_meter_point(void *ctx, struct ZnEngine *E, const char *what);
/* Ends the step: closes the open stretch. */
void zn_phase_meter_finish(ZnPhaseMeter *pm, struct ZnEngine *E);

/* dst += (now - before), per op and per tag (tags matched by name). */
void zn_comm_stats_add_delta(ZnCommStats *dst, const ZnCommStats *now, const ZnCommStats *before);

#endif
