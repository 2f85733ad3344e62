/* fetch.h: the order a micro-step visits the model's modules (the trace)
 * and stage 3's parameter fetching over it, as DeepSpeed's
 * PartitionedParameterCoordinator does it (spec Z-S3-001..007): gather a
 * module's parameters before each visit, release them after unless they
 * are persistent or reused soon, prefetch the next ones once the trace is
 * recorded. Private to the engine. */
#ifndef ZN_FETCH_H
#define ZN_FETCH_H
#include "core/err.h"

typedef struct ZnEngine ZnEngine;   /* engine.h, which holds a ZnFetch */

/* One module visit of a micro-step: kind 0 forward, 1 the forward again
   (activation checkpointing's recompute), 2 backward. */
typedef struct { int mod, kind; } ZnVisit;

/* The fetching state of a rank's engine (E->fetch). */
typedef struct {
    /* the micro-step's module visits in order: forward, then backward with
       each checkpointed block recomputed before it */
    int ntrace;
    ZnVisit *trace;
    /* stage 3 fetching (Z-S3-*) */
    int trace_complete;     /* 0 during the first micro-step: DeepSpeed records the trace then */
    unsigned char *keep;    /* [ntrace * 2]: keep param slot q gathered after visit k (reuse rule) */
    int *prefetched;        /* [nparams] gathered ahead of its next use */
    long pf_cursor;         /* next trace param slot the prefetch considers */
    long n_avail;           /* parameter elements gathered now (persistent ones too) */
    long live_peak;         /* the most gathered at once, this step */
    int gphase;             /* what gathers now: 0 forward, 1 backward, 2 after the step */
    long gather_sent[3];    /* bytes this rank sent gathering parameters, per phase, since init */
    long gather_inter[3];   /* of gather_sent, bytes sent to another node, per phase */
} ZnFetch;

typedef enum { ZN_VISIT_FWD = 0, ZN_VISIT_RECOMPUTE, ZN_VISIT_BWD } ZnVisitKind;

/* Builds E->fetch.trace (forward visits 0..n-1, then backward with each
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
#include "engine/engine.h"
#endif
