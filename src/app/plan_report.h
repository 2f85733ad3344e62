/* plan_report.h: `zinc plan` and `zinc train --dry-run` (spec Z-CAP-*):
 * the dry run of one step, then what a user planning a cluster asks of it
 * -- the memory of each phase by tier and category, the bytes of each kind
 * of collective and of each link class, whether the device memory holds
 * and the largest micro-batch it holds, the step's time on a machine --
 * as text, as JSON (--json) and as a picture (--svg FILE). */
#ifndef ZN_PLAN_REPORT_H
#define ZN_PLAN_REPORT_H
#include <stdio.h>
#include "app/dryrun.h"
#include "app/machine.h"
#include "app/steptime.h"

typedef struct {
    const ZnMachine *machine;   /* NULL: no step time */
    int default_machine;        /* the machine is the default, not the user's: the report says so */
    long capacity;              /* device bytes to fit in (--device-memory, else the machine's); 0: none */
    int json;                   /* the JSON document instead of the text */
    const char *svg_path;       /* NULL: no picture */
} ZnPlanOpts;

/* Whether the device holds the run (capacity > 0, a dry run with a step). */
typedef struct {
    long capacity;
    int overflow;               /* -1: it fits; 0 init, 1 + ZN_PH_*: the first phase whose peak passes it */
    long peak;                  /* the device's highest total: init's or a phase's */
    long max_micro;             /* the largest micro-batch that fits (0: none; capped at 1 << 20) */
    long max_micro_peak;        /* its device peak */
} ZnPlanFit;

/* The name of an overflow point: "init", "forward", "backward", "step". */
const char *zn_plan_point_name(int overflow);
/* The device's highest total in r: init's and every phase's. */
long zn_plan_device_peak(const ZnDryRun *r);
/* Where r's device overflows capacity, and the largest micro-batch of o that
 * fits (dry runs of o with other micro-batches: train_batch_size follows). */
int zn_plan_fit(const ZnRunOpts *o, const ZnDryRun *r, long capacity, ZnPlanFit *fit, ZnErr *err);

/* The whole of it: the dry run of o (uncapped: the capacity is po's), then
 * the report on out, the picture if asked. */
int zn_plan_run(const ZnRunOpts *o, const ZnPlanOpts *po, FILE *out, ZnErr *err);

#endif
