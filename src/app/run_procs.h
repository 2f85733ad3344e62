/* run_procs.h: one run with each rank in its own process over the tcp
 * transport, for `zinc spec run --backend tcp` (spec Z-SPEC-005). The
 * ranks are forked children that meet through a file rendezvous in a fresh
 * folder and run zn_run with their own communicator (Z-PROC-004); each
 * sends its part of the result back through a pipe, and the parent
 * assembles the ZnRunResult the simulated run of the same options fills. */
#ifndef ZN_RUN_PROCS_H
#define ZN_RUN_PROCS_H
#include "app/run.h"

/* Runs o (its world: size and ranks per node; o->proc_comm NULL) in
 * o->world.size processes. A rank's error comes back as that rank's (the
 * first one not caused by a lost peer); a rank that dies without a result,
 * or a run past ZINC_SPEC_TIMEOUT seconds (default 600), is ZN_E_COMM
 * naming the rank and its signal or exit status, the other ranks killed. */
int zn_run_procs(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err);

/* zn_run_procs, and the simulator's run of o beside it: the processes'
 * result must be the simulator's bit for bit (Z-PROC-002: losses, grad
 * norms, learning rates, loss scales, skipped steps, final parameters and
 * digest; per rank the collective counters by operation and tag, memory by
 * tier and category, offload and inter-node bytes, the phase records), else
 * ZN_E_INTERNAL naming the first difference. Where both fail, the
 * processes' error; where only one does, ZN_E_INTERNAL saying which. */
int zn_run_procs_vs_sim(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err);

/* The comparison zn_run_procs_vs_sim makes (Z-SPEC-005): 0 where p, the
 * processes' result of o, is s, the simulator's, bit for bit; else
 * ZN_E_INTERNAL "ranks in processes differ from the simulator: " and the
 * first difference (the step, the final parameters, or the rank and what). */
int zn_run_procs_compare(const ZnRunOpts *o, const ZnRunResult *p, const ZnRunResult *s, ZnErr *err);

#endif
