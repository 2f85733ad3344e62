/* run_report.h: the lines a run prints beside its steps (spec Z-REP-*,
 * Z-OFF-009, Z-GRP-003, Z-NODE-008, Z-CLI-011): what run.c measured,
 * formatted. Rank 0 prints unless a function says otherwise; the caller
 * holds the print lock where ranks share stdout. */
#ifndef ZN_RUN_REPORT_H
#define ZN_RUN_REPORT_H
#include <stdint.h>
#include <stdio.h>
#include "app/run.h"
#include "engine/engine.h"

/* DeepSpeed's see_memory_usage lines at a phase of the step (Z-REP-002)
 * with zinc's split by category and offload tier; starts a new window of
 * the gathered-parameter peak. Rank 0, with --memory-report. */
void zn_report_memory(const ZnRunOpts *o, ZnEngine *E, const char *what);

/* The bytes an offloaded rank moved so far: host->device, device->host,
 * NVMe read, NVMe write. */
void zn_report_moved(const ZnEngine *E, unsigned long long m[4]);
/* The offload traffic of the `steps` steps since `before` (Z-OFF-009). */
void zn_report_offload(const ZnEngine *E, const char *what, const unsigned long long before[4], long steps);

/* DeepSpeed's per-rank time breakdown line (wall_clock_breakdown, Z-REP-003). */
void zn_report_time(const ZnEngine *E);

/* The ZeRO paper's elements a rank sends per optimizer step for gradients
 * and parameters, 2Ψ(N-1)/N (stages 0-2) or 3Ψ(N-1)/N (stage 3), with Ψ
 * counted with the layout's padding (*psi); *nbuckets: the layout's gradient
 * buckets. Negative if the layout cannot be built. */
double zn_run_zero_volume(const ZnRunOpts *o, long *psi, long *nbuckets);

/* --comm-report for rank `rank` between counters a and b over `steps`
 * steps (Z-REP-005): the volume against the ZeRO paper's, stage 3's
 * gathers by phase (ga/gb: the engine's bytes gathered in the forward, the
 * backward and after the step, ia/ib those that crossed nodes), and with
 * more than one node what crossed, in the ring's model and, under a process
 * backend, on the wire. Any rank. */
void zn_report_comm(const ZnRunOpts *o, int rank, const ZnCommStats *a, const ZnCommStats *b, long steps,
                    const char *what, const long *ga, const long *gb, const long *ia, const long *ib);
/* The bytes node 0 sends to other nodes per step in units of M (Z-GRP-003). */
void zn_report_node_inter(const ZnRunOpts *o, const ZnRunResult *res);

/* The step line "step=N loss=… time_ms=…" (t 0-based); mean_step_s, the
 * mean step of this run so far, prices the time left of a token model. */
void zn_report_step(FILE *out, const ZnRunOpts *o, long t, const ZnStepResult *sr, long skipped_steps, double ms,
                    long samples_before, double mean_step_s);
/* --log FILE: the CSV header (nothing for JSON lines), then a row a step
 * with the device's peak bytes by category. */
void zn_report_log_header(FILE *log, int jsonl);
void zn_report_log_row(FILE *log, int jsonl, long t, const ZnStepResult *sr, double ms, const ZnMemStats *mem);

/* "digest=%016llx", the run's last line (Z-ENG-014). */
void zn_report_digest(FILE *out, uint64_t digest);

#endif
