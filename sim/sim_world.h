/* sim_world.h: inside the simulator (private to the sim sources). The world holds
 * one SimRank per rank and one posted record per rank; sim_world.c runs the
 * rank threads and the rendezvous, sim_comm.c implements the collectives on
 * top of it; the reduction kernels are src/comm/sumtree.c.
 *
 * Protocol of one collective (spec Z-SIM-006..009):
 *   1. the rank checks its own arguments (comm/coll.c), then writes its record into
 *      posts[rank] (op, dtype, counts, root, tag, buffers);
 *   2. sync (may fail: a peer failed or exited, the world is broken);
 *   3. every rank compares all records with rank 0's (sequence check);
 *   4. every rank computes its own output by reading the posted buffers;
 *   5. a final sync, after which nobody reads a peer's buffers or record, so
 *      each rank may return and reuse them.
 * Between steps 2 and 5 no sync can fail: every rank is inside the same
 * collective, running only simulator code, so all of them reach step 5. */
#ifndef ZN_SIM_WORLD_H
#define ZN_SIM_WORLD_H
#include <pthread.h>
#include "comm/world.h"
#include "comm/coll.h"
#include "comm/comm_seq.h"

#define ZN_SIM_MAX_WORLD 4096

typedef enum {
    SIM_IDLE = 0,     /* outside zn_sim_run */
    SIM_RUNNING,
    SIM_DONE_OK,      /* fn returned 0 */
    SIM_FAILED,       /* fn returned an error of its own */
    SIM_FAILED_PEER,  /* fn returned an error after the sim reported a peer's failure to it */
} SimRankState;

/* a rank's posted record: the checked call of comm/coll.h */
typedef ZnCollCall SimPost;

typedef struct SimRank {
    ZnComm comm;          /* handed out by zn_sim_comm; comm.impl points back here */
    ZnSimWorld *w;
    int rank;
    /* written only by the rank's own thread; peers read calls (under w->mu)
       once the rank has finished */
    long calls;
    int peer_err;         /* the sim returned "rank R failed/exited" to this rank */
    void *tree_buf;       /* reduction tiles, one per tree level */
    size_t tree_cap;
    void *out_buf;        /* private result when it may not go straight to recv */
    size_t out_cap;
    const void **sends;   /* [world]: the posted send buffers of the current reduction */
    /* written by the rank's thread before it sets state under w->mu */
    int rc;
    ZnErr err;            /* the ZnErr its fn receives */
    /* guarded by w->mu */
    SimRankState state;
    pthread_t thread;
} SimRank;

struct ZnSimWorld {
    int world;
    SimRank *ranks;
    SimPost *posts;       /* posts[r] written by rank r only, before its first sync */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* guarded by mu */
    long gen;             /* completed syncs; a waiter leaves when it changes */
    int arrived;          /* ranks waiting in the current sync */
    int in_run;
    int nfinished;        /* ranks whose fn has returned (or never started) */
    int mismatch;         /* a sequence check failed: every later call fails too */
    ZnErr mismatch_err;
    int exit_seen_rank;   /* first rank told "rank R exited ..." (-1: none) */
    ZnErr exit_seen_err;
    ZnSimMemOps ops;      /* zeroed: host memcpy and the host tree (set outside runs) */
    ZnRankFn fn;          /* set before threads start, read-only during the run */
    void *arg;
};

/* Fills rk->comm: rank, world, impl and the collective entry points. */
void sim_comm_init(SimRank *rk);
/* Steps 1-2: posts p and waits for every rank (or a failure). */
int sim_sync_enter(SimRank *rk, const SimPost *p, ZnErr *err);
/* A sync after step 2: cannot fail. */
void sim_sync(SimRank *rk);
/* Records a sequence mismatch (after the final sync) so later calls fail. */
void sim_set_mismatch(ZnSimWorld *w, const ZnErr *e);
/* Grows a private buffer to need bytes. */
int sim_reserve(void **buf, size_t *cap, size_t need, ZnErr *err);

/* Tiles one host reduction needs: one per tree level plus the accumulator. */

/* The memory operations of a collective, through w->ops (comm/world.h): */
/* before posting: the rank's queued work on its buffers is complete */
int sim_mem_ready(SimRank *rk, ZnErr *err);
/* dst <- src (bytes may be 0) */
int sim_mem_copy(SimRank *rk, void *dst, const void *src, size_t bytes, ZnErr *err);
/* out[0..len) = the tree reduction (Z-SIM-002/003) over the members of
 * this rank's group g of elements [off, off+len) of their posted sends,
 * in dtype dt */
int sim_mem_reduce(SimRank *rk, ZnGroup g, ZnDtype dt, ZnRedOp red, long off, long len, void *out, ZnErr *err);
/* the rank's private staging, the same kind of memory as like */
int sim_mem_scratch(SimRank *rk, size_t bytes, const void *like, void **out, ZnErr *err);

#endif
