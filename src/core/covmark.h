/* covmark.h: which plan the code that runs belongs to, for the per-stage
 * and per-feature coverage table of `make coverage` (coverage/run.sh,
 * coverage/stage_table.py). Only the coverage build defines ZN_COVERAGE
 * (its object folder, e.g. "/repo/build-cov"); in every other build these
 * calls are empty and compile to nothing.
 *
 * gcov counts per process, not per thread, so counts are split by time:
 * while an engine of a plan is alive, the counts belong to that plan's key
 * (e.g. "spec-s3-ocpu-pdev-h0-w1-g0-m0-a1-bf16"). At each switch the counts
 * so far are written (__gcov_dump) under the old key's folder,
 * <objdir>/covkeys/<key>/, laid out like the object folder, and cleared
 * (__gcov_reset); counts outside any engine go to the key "none", where
 * every process starts. A switch happens only where no rank thread runs:
 * around a simulated world's run (zn_sim_run, whose rank engines name the
 * key), and where an engine is built (its init succeeded) or freed outside
 * such a run (one rank per process, a dry run, a test's lone engine). */
#ifndef ZN_COVMARK_H
#define ZN_COVMARK_H
#include "core/config.h"

#ifdef ZN_COVERAGE
/* zn_sim_run: begin 1 before its rank threads start, 0 after they end */
void zn_cov_world(int begin);
/* zn_engine_init, once it succeeded: this engine's plan (cfg->plan) names
   the key */
void zn_cov_engine(const ZnConfig *cfg);
/* zn_engine_free: outside a world, the counts go back to no key */
void zn_cov_engine_end(void);
/* zinc spec run: this process runs conformance cases (the keys say "spec") */
void zn_cov_spec(void);
/* on: the engines from now on run with a failure injected (an allocation,
   an I/O operation, a collective): their keys say "fault", and the table's
   rows leave them out (a row measures what its plan runs when nothing is
   made to fail); off: back to "suite". zn_fault_set and the tests' sweeps
   call it; a process under tests/failmalloc.c failing an allocation
   (ZN_FAIL_ALLOC=k, k > 0) starts with it on. */
void zn_cov_faults(int on);
/* a forked child (zinc spec run --backend tcp): drops the counts inherited
   from its parent, which the parent writes itself */
void zn_cov_forked(void);
#else
static inline void zn_cov_world(int begin) { (void)begin; }
static inline void zn_cov_engine(const ZnConfig *cfg) { (void)cfg; }
static inline void zn_cov_engine_end(void) {}
static inline void zn_cov_spec(void) {}
static inline void zn_cov_faults(int on) { (void)on; }
static inline void zn_cov_forked(void) {}
#endif
#endif
