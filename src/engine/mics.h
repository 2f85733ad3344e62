/* mics.h: MiCS inside the engine (spec Z-MICS-*, reference
 * offload-and-zeropp.md §B5; DeepSpeed runtime/zero/mics.py, mics_utils.py).
 * The states are split within shard groups of S consecutive ranks and
 * replicated across the W/S groups: the layout is cut for S ranks, the
 * partition collectives run in the shard group (E->mics.shard), and a reduced
 * gradient piece is then all-reduced across the replicas (E->mics.repl). Private
 * to the engine. */
#ifndef ZN_MICS_H
#define ZN_MICS_H
#include "core/err.h"
#include "core/config.h"
#include "core/topo.h"

typedef struct ZnEngine ZnEngine;   /* engine.h, which holds a ZnMics */

/* MiCS's state in a rank's engine (E->mics): the shard group that splits
   the states and the replicas that hold the same partition (size 1 without
   MiCS). */
typedef struct {
    ZnGroup shard, repl;
    void *buf;              /* the hierarchical gather's staging */
} ZnMics;

/* The plan's MiCS fields, E->pw, E->mics.shard and E->mics.repl (the whole world and
 * no replicas without MiCS); the errors a config check cannot see (the
 * node size of processes). */
int zn_mics_init(ZnEngine *E, const ZnConfig *cfg, ZnErr *err);
void zn_mics_free(ZnEngine *E);
/* The hierarchical gather (mics_hierarchical_params_gather): this rank's
 * pn values of send gathered from the shard group into full (S * pn, rank
 * order) by an all-gather across nodes among the ranks of one local rank,
 * then one inside the node. */
int zn_mics_hier_gather(ZnEngine *E, const float *send, float *full, long pn, ZnErr *err);
/* The same for a coalesced gather (Z-S3-008): n values a rank, through the
 * engine's staging when n fits it (it is sized for the largest parameter),
 * else through a buffer of this call's own. */
int zn_mics_hier_gather_flat(ZnEngine *E, const float *mine, float *flat, long n, ZnErr *err);
#include "engine/engine.h"
#endif
