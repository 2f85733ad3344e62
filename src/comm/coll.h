/* coll.h: the one collective layer. Every backend's five ZnComm entry points
 * are the ones here: they describe the call (ZnCollCall), check its
 * arguments (the simulator's rules, spec Z-SIM-010), hand it to the
 * backend's run function and, when that succeeds, count it under the ring
 * byte model of comm.h (Z-SIM-004/005), so --comm-report reads the same on
 * every backend. A backend writes only how its data moves:
 *   sim       the shared-memory rendezvous (sim/sim_comm.c);
 *   nccl      NCCL's own collectives (kernels/comm_nccl.cu);
 *   tcp, mpi  just a byte exchange (ZnXportOps): this file builds the
 *             sequence check (comm_seq.h) and all five collectives on it,
 *             summing in the one tree (sumtree.h) and gathering in rank
 *             order, so both give the simulator's bits. */
#ifndef ZN_COLL_H
#define ZN_COLL_H
#include <stddef.h>
#include "comm/comm.h"

struct ZnCollCall {
    ZnCollOp op;
    ZnDtype dt;
    ZnRedOp red;
    long count;          /* all_reduce, broadcast: elements; reduce_scatter, all_gather: sum of counts */
    const long *counts;  /* reduce_scatter, all_gather: the caller's array (world entries) */
    long off;            /* reduce_scatter, all_gather: this rank's offset in elements */
    int root;
    const char *tag;     /* the caller's string; valid while it is inside the call */
    const void *send;    /* input base (all_reduce, broadcast: the buffer) */
    void *recv;          /* output base */
    long call;           /* 1-based index of the collective on this rank (set by the backend) */
};
typedef struct ZnCollCall ZnCollCall;
typedef int (*ZnCollRun)(ZnComm *c, ZnCollCall *k, ZnErr *err);

/* Fills c: rank, world, impl, run and the five entry points. */
void zn_coll_init(ZnComm *c, int rank, int world, void *impl, ZnCollRun run);

/* A transport for ranks in separate processes: it only moves bytes. In one
 * exchange every rank sends nout[q] bytes at out[q] to each peer q and
 * receives nin[q] bytes from it into in[q]; entries for the rank itself are
 * ignored (the layer copies its own part). Blocking: on return every buffer
 * may be reused. A failure should name the peer. */
typedef struct {
    int (*exchange)(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                    ZnErr *err);
    void (*free)(void *x);
} ZnXportOps;

/* A communicator over transport x (owned: freed with it). NULL on error. */
ZnComm *zn_coll_proc_new(int rank, int world, void *x, const ZnXportOps *ops, ZnErr *err);
void zn_coll_proc_free(ZnComm *c);

#endif
