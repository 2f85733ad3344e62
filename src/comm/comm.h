/* comm.h: the communicator seam. One ZnComm per rank; the engine calls it and
 * never asks which backend it runs on. Implementations: sim (threads in one
 * process, sim/sim_comm.c), tcp and mpi (comm_proc.h) and nccl, all behind
 * the entry points of comm/coll.h.
 *
 * Summation order (spec Z-SIM-002): a reduction over ranks is one fixed
 * binary tree over rank index: tree(lo, n) = x[lo] if n == 1, else
 * tree(lo, h) + tree(lo + h, n - h) with h the largest power of two < n.
 * For 16-bit dtypes every partial sum is rounded to the dtype (add in fp32,
 * round to nearest even). Results never depend on thread timing.
 *
 * Byte counters model a ring algorithm (spec Z-SIM-004): for a reduction or
 * gather whose per-rank pieces are c[0..N-1] (an all_reduce of n elements is
 * split evenly, the first n%N pieces one larger), rank r
 *   all_reduce:     sends and receives 2 * (sum c - c[r]) elements
 *   reduce_scatter: sends and receives (sum c - c[r])
 *   all_gather:     sends and receives (sum c - c[r])
 *   broadcast n:    receives n unless root; sends n unless it is the rank
 *                   just before the root (the end of the chain)
 *   barrier:        nothing.
 * times the dtype size. Summed over a stage's optimizer step these give the
 * ZeRO paper's volumes (2Ψ(N-1)/N for stages 0-2, 3Ψ(N-1)/N for stage 3). */
#ifndef ZN_COMM_H
#define ZN_COMM_H
#include "core/err.h"
#include "core/dtype.h"
#include "core/topo.h"

typedef enum { ZN_SUM = 0, ZN_MAX } ZnRedOp;
typedef enum { ZN_OP_ALL_REDUCE = 0, ZN_OP_REDUCE_SCATTER, ZN_OP_ALL_GATHER,
               ZN_OP_BROADCAST, ZN_OP_BARRIER, ZN_OP_ALL_TO_ALL, ZN_OP_N } ZnCollOp;

#define ZN_COMM_MAX_TAGS 24
#define ZN_COMM_TAG_LEN 24

typedef struct {
    long calls[ZN_OP_N];
    long bytes_sent[ZN_OP_N];
    long bytes_recv[ZN_OP_N];
    long bytes_inter[ZN_OP_N];   /* of bytes_sent, those that cross to another node (Z-GRP-003) */
    /* the same, per tag (the call site names its purpose: "grad_reduce",
       "param_gather", "norm", "loss", "digest", ...) */
    int ntags;
    struct { char tag[ZN_COMM_TAG_LEN]; long calls, bytes_sent, bytes_recv, bytes_inter; } tags[ZN_COMM_MAX_TAGS];
    /* what a process backend (tcp, mpi) handed its transport, sequence
       records included, for ranks of other nodes and of its own node: the
       direct exchange's bytes, where the counts above model a ring (Z-NODE-008) */
    long wire_inter, wire_intra, wire_msgs_inter;   /* wire_msgs_inter: messages to other nodes, empty ones too */
} ZnCommStats;

typedef struct ZnComm ZnComm;
struct ZnCollCall;
/* What watches a communicator (the tracer, the CPU-time meter): the
 * collective layer calls begin before and end after every collective,
 * failed ones included, once its bytes are counted. */
typedef struct ZnCommWatch ZnCommWatch;
struct ZnCommWatch {
    void (*begin)(ZnCommWatch *w, const ZnComm *c);
    void (*end)(ZnCommWatch *w, const ZnComm *c, ZnCollOp op, const char *tag);
};
struct ZnComm {
    ZnWorld world;   /* the run's size, this rank, ranks per node (core/topo.h) */
    void *impl;
    /* the backend's data movement for one checked call (comm/coll.h) */
    int (*run)(ZnComm *c, struct ZnCollCall *k, ZnErr *err);
    /* a dry run's communicator (comm_meta.h): its buffers are tokens that
       stand for any size, so the checks look at counts, not addresses */
    int counts_only;
    /* in place on buf (count elements) */
    int (*all_reduce)(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op,
                      const char *tag, ZnErr *err);
    /* send holds sum(counts) elements in rank order; rank r receives the
       reduced counts[r] elements that start at sum(counts[0..r-1]). recv may
       alias send (NCCL's in-place form). counts must agree on all ranks. */
    int (*reduce_scatter)(ZnComm *c, const void *send, void *recv, const long *counts,
                          ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err);
    /* rank r contributes counts[r] elements from send; recv receives
       sum(counts) elements in rank order. send may alias recv + offset_r. */
    int (*all_gather)(ZnComm *c, const void *send, void *recv, const long *counts,
                      ZnDtype dt, const char *tag, ZnErr *err);
    int (*broadcast)(ZnComm *c, void *buf, long count, ZnDtype dt, int root,
                     const char *tag, ZnErr *err);
    int (*barrier)(ZnComm *c, const char *tag, ZnErr *err);
    /* a collective in groups of ranks (comm/coll.h zn_group_*): k->grp
       names this rank's group; every rank of the world calls it at once */
    int (*group)(ZnComm *c, struct ZnCollCall *k, ZnErr *err);
    ZnCommStats stats;
    ZnCommWatch *watch;   /* NULL: nobody watches */
    /* a test's planted failure (zn_coll_fail_at, Z-SIM-014): the backend's
       own run, the call that fails and the calls seen so far */
    int (*fail_real)(ZnComm *c, struct ZnCollCall *k, ZnErr *err);
    long fail_at, fail_seen;
};

/* The even split of comm.h: counts[r] for n elements over world ranks (the
 * first n % world pieces one larger). */
void zn_comm_even_counts(long n, int world, long *counts);
/* Adds one call's bytes to c->stats (shared by all implementations);
   inter: of the bytes sent, those to another node. */
void zn_comm_count(ZnComm *c, ZnCollOp op, const char *tag, long bytes_sent, long bytes_recv, long inter);
/* Bytes this rank (w) sends and receives in one call in group g (resolved:
 * counts has g.size entries, in member order), and of those sent, the ones
 * that cross to another node (Z-GRP-003): the ring ops send everything to
 * the next member of the group's ring, the all-to-all sends piece j to
 * member j directly (count: elements per piece). */
void zn_comm_call_bytes(const ZnWorld *w, ZnGroup g, ZnCollOp op, const long *counts, long count, int root,
                        ZnDtype dt, long *sent, long *recv, long *inter);
/* Bytes a rank sends/receives for op under the ring model above. */
void zn_comm_ring_bytes(ZnCollOp op, int rank, int world, const long *counts, long count,
                        int root, ZnDtype dt, long *sent, long *recv);
/* Looks up a tag's totals; zero if the tag never occurred. */
void zn_comm_tag_totals(const ZnCommStats *s, const char *tag, long *calls, long *sent, long *recv);
/* A tag's bytes sent to another node; zero if the tag never occurred. */
long zn_comm_tag_inter(const ZnCommStats *s, const char *tag);
void zn_comm_stats_reset(ZnCommStats *s);

/* The fixed reduction tree of Z-SIM-002 over n values, fp32. */
float zn_tree_sum_f32(const float *x, int n);
double zn_tree_sum_f64(const double *x, int n);

#endif
