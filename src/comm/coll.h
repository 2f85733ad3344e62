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
    long count;          /* all_reduce, broadcast: elements; reduce_scatter, all_gather: sum of counts;
                            all_to_all: elements per piece */
    const long *counts;  /* reduce_scatter, all_gather: the caller's array (one entry per group member) */
    long off;            /* reduce_scatter, all_gather: this rank's offset in elements */
    int root;
    const char *tag;     /* the caller's string; valid while it is inside the call */
    const void *send;    /* input base (all_reduce, broadcast: the buffer) */
    void *recv;          /* output base */
    long call;           /* 1-based index of the collective on this rank (set by the backend) */
    ZnGroup grp;         /* this rank's group ({0}: the world); resolved by the layer */
    int gi;              /* this rank's index in grp (set by the layer) */
};
typedef struct ZnCollCall ZnCollCall;
typedef int (*ZnCollRun)(ZnComm *c, ZnCollCall *k, ZnErr *err);

/* A communicator written without group collectives (a test's wrapper)
   refuses them rather than crash. */
static inline int zn_group_call(ZnComm *c, struct ZnCollCall *k, ZnErr *err) {
    if (!c->group) return zn_err(err, ZN_E_USAGE, "this communicator has no group collectives (ZeRO++, MiCS)");
    return c->group(c, k, err);
}

/* Collectives in groups of ranks (spec Z-GRP-001..004): every rank of the
 * world calls the same one at the same time, each in its own group g of
 * core/topo.h (all groups of one call have the same shape); pieces and
 * counts are in member order; sums follow the tree over member index. The
 * all-to-all sends piece j of send (count elements each) to member j, and
 * receives member j's piece for this rank into piece j of recv; send and
 * recv may not overlap. Broadcast and barrier stay world-wide. */
static inline int zn_group_all_gather(ZnComm *c, ZnGroup g, const void *send, void *recv, const long *counts,
                                      ZnDtype dt, const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_ALL_GATHER, .dt = dt, .counts = counts, .tag = tag, .send = send, .recv = recv,
                    .grp = g};
    return zn_group_call(c, &k, err);
}
static inline int zn_group_reduce_scatter(ZnComm *c, ZnGroup g, const void *send, void *recv, const long *counts,
                                          ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_REDUCE_SCATTER, .dt = dt, .red = op, .counts = counts, .tag = tag, .send = send,
                    .recv = recv, .grp = g};
    return zn_group_call(c, &k, err);
}
static inline int zn_group_all_reduce(ZnComm *c, ZnGroup g, void *buf, long count, ZnDtype dt, ZnRedOp op,
                                      const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_ALL_REDUCE, .dt = dt, .red = op, .count = count, .tag = tag, .send = buf,
                    .recv = buf, .grp = g};
    return zn_group_call(c, &k, err);
}
static inline int zn_group_all_to_all(ZnComm *c, ZnGroup g, const void *send, void *recv, long piece, ZnDtype dt,
                                      const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_ALL_TO_ALL, .dt = dt, .count = piece, .tag = tag, .send = send, .recv = recv,
                    .grp = g};
    return zn_group_call(c, &k, err);
}

/* Fills c: rank, world, impl, run and the six entry points. */
void zn_coll_init(ZnComm *c, int rank, int world, void *impl, ZnCollRun run);

/* Z-SIM-014, a test's drill: the call-th collective this rank makes from
 * now on (1-based, counted after its arguments are checked) fails with
 * ZN_E_COMM before its bytes move, as one whose peer was lost; call <= 0
 * removes the drill. Only the backend's run is replaced, so a run without
 * a drill pays nothing for it. */
void zn_coll_fail_at(ZnComm *c, long call);

/* A transport for ranks in separate processes: it only moves bytes. In one
 * exchange every rank sends nout[q] bytes at out[q] to each peer q and
 * receives nin[q] bytes from it into in[q]; entries for the rank itself are
 * ignored (the layer copies its own part). Blocking: on return every buffer
 * may be reused. A failure should name the peer. */
typedef struct {
    int (*exchange)(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                    ZnErr *err);
    void (*free)(void *x);
    void (*set_timeout)(void *x, double seconds);   /* the bound on one exchange; NULL: none */
} ZnXportOps;

/* A communicator over transport x (owned: freed with it). NULL on error. */
ZnComm *zn_coll_proc_new(int rank, int world, void *x, const ZnXportOps *ops, ZnErr *err);
void zn_coll_proc_free(ZnComm *c);
/* Bounds each exchange of a process communicator at `seconds` from now on
 * (Z-RDV-009); nothing for other communicators or a transport with no bound. */
void zn_coll_set_timeout(ZnComm *c, double seconds);

#endif
