/* plan_svg.h: the picture of a dry run (`zinc plan ... --svg FILE`, spec
 * Z-PSVG-*): the capacity-planning figure. Left, one stacked bar per phase
 * (forward, backward, step) of the device's peak bytes by category, with the
 * device's capacity as a line; right, the step's timeline: per phase, its
 * compute, its communication, and the part of the communication that is
 * exposed (not hidden under compute), on one time axis.
 *
 * The input is plain numbers, so the drawing knows nothing of the engine.
 * Nothing here prints; errors come back in a ZnErr. */
#ifndef ZN_PLAN_SVG_H
#define ZN_PLAN_SVG_H
#include <stdio.h>
#include "core/err.h"

#define ZN_PSVG_MAX_CAT 12
#define ZN_PSVG_MAX_PHASE 4

typedef struct {
    const char *title;                         /* one line: model, stage, world (escaped when drawn) */
    int ncat;                                  /* 1..ZN_PSVG_MAX_CAT */
    const char *cat[ZN_PSVG_MAX_CAT];          /* category names: params16, grads, ... */
    int nphase;                                /* 1..ZN_PSVG_MAX_PHASE */
    const char *phase[ZN_PSVG_MAX_PHASE];      /* "forward", "backward", "step" */
    double mem[ZN_PSVG_MAX_PHASE][ZN_PSVG_MAX_CAT];   /* bytes (>= 0) of each category at the phase's peak */
    double capacity;                           /* device bytes, drawn as a line; 0: none */
    int timed;                                 /* 0: no timeline (no machine given) */
    double compute[ZN_PSVG_MAX_PHASE];         /* seconds of compute in the phase */
    double comm[ZN_PSVG_MAX_PHASE];            /* seconds of communication and transfers */
    double exposed[ZN_PSVG_MAX_PHASE];         /* of comm, the seconds not hidden under compute */
} ZnPlanSvg;

/* Writes the SVG document to f. ZN_E_USAGE for input it cannot draw
 * (counts out of range, a negative or non-finite number), ZN_E_IO when f
 * fails. */
int zn_plan_svg_write(FILE *f, const ZnPlanSvg *p, ZnErr *err);
/* The same, to path, atomically (a temporary file renamed over it): a failed
 * write leaves no file and no temporary behind. */
int zn_plan_svg_save(const char *path, const ZnPlanSvg *p, ZnErr *err);

#endif
