/* comm_seq.h: the collective-sequence record every communicator
 * compare before every collective (spec Z-SEQ-*): the simulator's ranks
 * from their posts (sim_comm.c), ranks in separate processes after
 * exchanging this fixed-size record (comm/coll.c), so a rank that issues a
 * different collective than its peers (the stage-3 "module called a
 * different number of times on one rank" deadlock) is reported with the
 * first differing record from each side, in the simulator's words:
 *   collective mismatch at call #12: rank 0 all_gather fp32 n=4096
 *   'param_gather' vs rank 1 reduce_scatter fp32 n=64 'grad_reduce' */
#ifndef ZN_COMM_SEQ_H
#define ZN_COMM_SEQ_H
#include <stdint.h>
#include "comm/comm.h"

#define ZN_SEQ_MAGIC 0x5a4e5351u   /* "ZNSQ" */

typedef struct {
    uint32_t magic;
    int32_t op, dt, red, root;
    int32_t ncounts;          /* group size (0 without counts); messages show the first 8 */
    int32_t gsize, gstride;   /* the group of the call (world: size, 1); 0 until zn_seq_group */
    int64_t call;             /* 1-based index of the collective on this rank */
    int64_t count;            /* all_reduce/broadcast: elements; reduce_scatter/all_gather: sum of counts */
    uint64_t counts_hash;     /* FNV-1a of the whole counts array */
    int64_t counts[8];
    char tag[ZN_COMM_TAG_LEN];
} ZnSeqRec;

/* Fills r for one call (counts: world entries or NULL). */
void zn_seq_fill(ZnSeqRec *r, long call, ZnCollOp op, ZnDtype dt, ZnRedOp red, int root, long count,
                 const long *counts, int world, const char *tag);
/* Records the call's group (resolved) in r. */
static inline void zn_seq_group(ZnSeqRec *r, ZnGroup g) {
    r->gsize = g.size;
    r->gstride = g.stride;
}
/* 0 if a and b describe the same collective; else fills err (ZN_E_COMM)
 * with the mismatch naming rank_a's and rank_b's records. */
int zn_seq_compare(const ZnSeqRec *a, int rank_a, const ZnSeqRec *b, int rank_b, ZnErr *err);
/* Every rank's record (recs[0..world)) against rank 0's, in rank order:
 * every rank that holds all records reaches the same verdict. */
int zn_seq_check_all(const ZnSeqRec *recs, int world, ZnErr *err);
const char *zn_coll_op_name(ZnCollOp op);

#endif
