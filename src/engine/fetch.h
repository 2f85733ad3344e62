/* fetch.h: the order a micro-step visits the model's modules (the trace)
 * and stage 3's parameter fetching over it, as DeepSpeed's
 * PartitionedParameterCoordinator does it (spec Z-S3-001..007): gather a
 * module's parameters before each visit, release them after unless they
 * are persistent or reused soon, prefetch the next ones once the trace is
 * recorded. Private to the engine. */
#ifndef ZN_FETCH_H
#define ZN_FETCH_H
#include "engine/engine.h"

typedef enum { ZN_VISIT_FWD = 0, ZN_VISIT_RECOMPUTE, ZN_VISIT_BWD } ZnVisitKind;

/* Builds E->trace (forward visits 0..n-1, then backward with each
 * checkpointed block's recompute before its backward) and, for stage 3,
 * the persistence and reuse plans. */
int zn_fetch_init(ZnEngine *E, ZnErr *err);
void zn_fetch_free(ZnEngine *E);
/* Before visit k: this module's params gathered (W[q] set to each), then
 * the prefetch. At stages 0-2 only W is set. */
int zn_fetch_module(ZnEngine *E, int k, float **W, ZnErr *err);
/* After visit k: release what the rules do not keep (a release may make
 * hpZ's secondary, which may fail for memory). */
int zn_fetch_release(ZnEngine *E, int k, ZnErr *err);
/* End of a micro-step: everything but the persistent params released; the
 * trace counts as recorded from now on. err NULL: release without making
 * secondaries' errors known (the step already failed). */
int zn_fetch_end_micro(ZnEngine *E, ZnErr *err);

/* engine.c's gather and release of one stage-3 parameter */
int zn_engine_gather_param(ZnEngine *E, int p, ZnErr *err);
int zn_engine_release_param(ZnEngine *E, int p, ZnErr *err);
/* every persistent param not yet gathered, in one coalesced all-gather */
int zn_engine_gather_persistent(ZnEngine *E, ZnErr *err);
float *zn_engine_param_ptr(ZnEngine *E, int p);
#endif
