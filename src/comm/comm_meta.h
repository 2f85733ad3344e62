/* comm_meta.h: the dry run's communicator (spec Z-DRY-002). One rank of a
 * world that is never started: every collective moves no data and returns
 * at once, but is counted exactly as the real communicators count it (the
 * ring byte model of comm.h, through zn_comm_ring_bytes and zn_comm_count,
 * as comm/coll.c does after a call that succeeded). Buffers are meta tokens
 * and are neither read nor written; a result the engine downloads is the
 * meta device's zeros. */
#ifndef ZN_COMM_META_H
#define ZN_COMM_META_H
#include "comm/comm.h"

/* c becomes rank `rank` of `world` ranks, per_node ranks to a node. */
void zn_comm_meta_init(ZnComm *c, int world, int rank, int per_node);

/* The calls of a dry run by kind (spec Z-DRY-009), what the step-time model
 * prices: calls of one op, tag and group in one phase are one class. Per
 * call, the rank's bytes sent, those of them that cross to another node,
 * what all ranks of node 0 send together and what they send to other nodes
 * (the node's egress, which its NICs share): every node of a symmetric
 * world sends the same. */
#define ZN_META_MAX_CLASSES 256
typedef struct {
    ZnCollOp op;
    char tag[ZN_COMM_TAG_LEN];
    int phase;                 /* the meter's phase when the call was made */
    ZnGroup grp;               /* resolved: size and stride (the world: size N, stride 1) */
    long calls;
    double sent, inter;        /* the rank's, summed over the calls */
    double node_sent, node_inter;   /* node 0's ranks' together (0 on one node: nothing to share) */
} ZnMetaClass;
typedef struct {
    int phase;                 /* set by the caller (the phase meter) */
    int n, dropped;            /* classes; calls past ZN_META_MAX_CLASSES classes (counted nowhere) */
    ZnMetaClass cls[ZN_META_MAX_CLASSES];
} ZnMetaLog;
/* From now on c records its calls into log (NULL: stops). */
void zn_comm_meta_log(ZnComm *c, ZnMetaLog *log);

/* What a rank of class c sends inside its node (*intra) and to other nodes
 * (*inter) in a world of `size` ranks, per_node to a node: the mean over
 * node 0's ranks, as the step time prices it (Z-TIME-002). rank 0 alone is
 * no fair sample of the links: its ring neighbour, rank 1, shares its
 * node, so its own bytes never cross. On one node: rank 0's, all inside. */
void zn_meta_link_bytes(const ZnMetaClass *c, int per_node, int size, double *intra, double *inter);

#endif
