/* zeropp.h: ZeRO++ inside the engine (spec Z-ZPP-*, reference
 * offload-and-zeropp.md §B1-B3). Three fields of the stage plan, all at
 * stage 3:
 *   hpZ  a secondary copy of each parameter, partitioned inside a group of
 *        P.hpz consecutive ranks, made when a gathered parameter is
 *        released (so at the end of forward), used by every later gather
 *        of the step, dropped before the parameters change;
 *   qwZ  every parameter gather moves int8 codes and fp32 scales
 *        (core/quant.h) instead of model-dtype values;
 *   qgZ  a stage-3 gradient bucket is averaged by the two-hop int4
 *        all-to-all instead of the reduce-scatter.
 * Private to the engine. */
#ifndef ZN_ZEROPP_H
#define ZN_ZEROPP_H
#include <stddef.h>
#include "core/err.h"
#include "core/layout.h"

typedef struct ZnEngine ZnEngine;   /* engine.h, which holds a ZnZeroPP */

/* ZeRO++'s state in a rank's engine (E->zpp). */
typedef struct {
    float **sec;            /* [nparams] hpZ secondary partition (pn*W/hpz values) or NULL */
    float **sec_src;        /* [nparams] the gathered param a pending secondary copy reads */
    int sec_pending;        /* copies not yet made (hpz_async_copy) */
    float *zf;              /* fp32 staging of qgZ (W * largest bucket block) */
    unsigned char *zq;      /* codes: send half then receive half (zq_half bytes each) */
    float *zs;              /* scales: send half then receive half (zs_half floats each) */
    size_t zf_n, zq_half, zs_half;
} ZnZeroPP;

/* Checks what the plan asks against the run (devices, canonical mode) and
 * sizes the staging; nothing to do without ZeRO++. */
int zn_zpp_init(ZnEngine *E, ZnErr *err);
void zn_zpp_free(ZnEngine *E);
/* 1 when parameter gathers go through zn_zpp_gather. */
int zn_zpp_gathers(const ZnEngine *E);
/* Param p gathered into full (pn*W values) from this rank's primary
 * partition send, or from the secondaries when p has one; bytes counted
 * under "param_gather". */
int zn_zpp_gather(ZnEngine *E, int p, const float *send, float *full, ZnErr *err);
/* qwZ's one call for the persistent params (Z-S3-008): plist's n params,
 * their pieces back to back in mine (device, s3_pn each), gathered over the
 * world into E->full[plist[i]] (already allocated) with the bits
 * zn_zpp_gather would give each. */
int zn_qwz_gather_coalesced(ZnEngine *E, const float *mine, const int *plist, int n, ZnErr *err);
/* Before param p's gathered copy is freed: makes its secondary if hpZ asks
 * for one. Returns 1 when a pending copy still reads full (the caller must
 * not free it: the sync will). */
int zn_hpz_on_release(ZnEngine *E, int p, ZnErr *err);
/* Completes the pending secondary copies and frees their sources. */
void zn_hpz_sync(ZnEngine *E);
/* Drops every secondary (after the optimizer step, DeepSpeed's
 * invalidate_secondary_tensor). */
void zn_hpz_drop(ZnEngine *E);
/* qgZ: 1 when bucket reductions take the quantized path (more than one node). */
int zn_qgz_active(const ZnEngine *E);
/* qgZ: the bucket in buf (W rank-major blocks of bk->block values, already
 * divided by the world size) reduced into mine (bk->block values, rounded
 * to the communication dtype). */
int zn_qgz_reduce(ZnEngine *E, const ZnBucket *bk, float *buf, float *mine, ZnErr *err);
#include "engine/engine.h"
#endif
