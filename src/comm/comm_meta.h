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

#endif
