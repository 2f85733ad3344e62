/* sim_comm.c: the simulator's data movement behind comm/coll.h (which has
 * already checked the arguments and counts the bytes). Each collective
 * follows the protocol of sim_world.h: post, sync, sequence check, compute
 * this rank's own output from the posted buffers, final sync. Each rank
 * computes its result itself, in the fixed order of comm.h, so the bits do
 * not depend on which thread runs first (spec Z-SIM-007).
 *
 * In-place forms follow NCCL (spec Z-SIM-010): reduce_scatter with
 * recv == send + offset(rank), all_gather with send == recv + offset(rank),
 * all_reduce and broadcast on one buffer. */
#include <stdint.h>
#include <string.h>
#include "sim_world.h"

/* Every rank compares the same records the way the process backends do
 * (comm_seq.h), so all reach the same verdict and take the same path to the
 * final sync. */
static int sequence_check(const ZnSimWorld *w, ZnErr *e) {
    ZnSeqRec a, b;
    const SimPost *p0 = &w->posts[0];
    zn_seq_fill(&a, p0->call, p0->op, p0->dt, p0->red, p0->root, p0->count, p0->counts, p0->grp.size, p0->tag);
    zn_seq_group(&a, p0->grp);
    for (int q = 1; q < w->world; q++) {
        const SimPost *p = &w->posts[q];
        zn_seq_fill(&b, p->call, p->op, p->dt, p->red, p->root, p->count, p->counts, p->grp.size, p->tag);
        zn_seq_group(&b, p->grp);
        if (zn_seq_compare(&a, 0, &b, q, e)) return e->code;
    }
    return 0;
}

/* ------------------------------------------------------- common frame */

/* Memory operations run through the world's memops (comm/world.h): host memcpy and
 * the host tree by default, device copies and kernels for ranks on a GPU.
 * Once a collective is past its first sync every rank must reach the final
 * sync, so a failing memory operation is remembered, the syncs are still
 * taken, and the error is returned at the end (the peers' results are then
 * not to be trusted, and the failing rank's error ends the run). */

/* Post, sync, sequence check. On a mismatch the rank still takes the final
 * sync (peers may be reading its counts array), then records the mismatch so
 * every later call fails as well. */
static int begin(SimRank *rk, const SimPost *p, ZnErr *err) {
    int rc = sim_sync_enter(rk, p, err);
    if (rc) return rc;
    ZnErr e = {0};
    if (!sequence_check(rk->w, &e)) return 0;
    sim_sync(rk);
    sim_set_mismatch(rk->w, &e);
    if (err) *err = e;
    return e.code;
}

/* ------------------------------------------------------- collectives */

/* The even split of n over world ranks (comm.h): piece r and its offset. */
static void even_split(long n, int world, int r, long *off, long *len) {
    long base = n / world, extra = n % world;
    *len = base + (r < extra ? 1 : 0);
    *off = r * base + (r < extra ? r : extra);
}

/* Byte ranges [a, a+na) and [b, b+nb) share a byte. */
static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/* Reduce-scatter of the even split into a private buffer, write the piece
 * into buf, then gather the peers' pieces from their buffers. Each rank
 * reads every input once instead of computing all n elements itself. */
static int sim_all_reduce(SimRank *rk, const SimPost *p, ZnErr *err) {
    int world = p->grp.size, rc;
    char *buf = p->recv;
    size_t es = zn_dtype_size(p->dt);
    long off, len;
    even_split(p->count, world, p->gi, &off, &len);
    void *out = NULL;
    if ((rc = sim_reserve(&rk->tree_buf, &rk->tree_cap, zn_tree_tiles_bytes(world), err))) return rc;
    if ((rc = sim_mem_scratch(rk, (size_t)len * es, buf, &out, err))) return rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, p, err))) return rc;
    const SimPost *posts = rk->w->posts;
    rc = sim_mem_reduce(rk, p->grp, p->dt, p->red, off, len, out, err);
    sim_sync(rk); /* every rank has read every input */
    if (!rc) rc = sim_mem_copy(rk, buf + off * es, out, (size_t)len * es, err);
    sim_sync(rk); /* every reduced piece is in its owner's buffer */
    for (int j = 0; j < world && !rc; j++) {
        long qoff, qlen;
        even_split(p->count, world, j, &qoff, &qlen);
        int q = zn_group_member(&rk->comm.world, p->grp, j);
        if (q != rk->rank)
            rc = sim_mem_copy(rk, buf + qoff * es, (const char *)posts[q].recv + qoff * es, (size_t)qlen * es, err);
    }
    sim_sync(rk); /* nobody still reads this rank's piece */
    return rc;
}

static int sim_reduce_scatter(SimRank *rk, const SimPost *p, ZnErr *err) {
    int world = p->grp.size, rc;
    long len = p->counts[p->gi];
    size_t es = zn_dtype_size(p->dt);
    /* in place, recv is part of what peers read: stage the result privately */
    int direct = !overlaps(p->recv, (size_t)len * es, p->send, (size_t)p->count * es);
    void *out = p->recv;
    if ((rc = sim_reserve(&rk->tree_buf, &rk->tree_cap, zn_tree_tiles_bytes(world), err))) return rc;
    if (!direct && (rc = sim_mem_scratch(rk, (size_t)len * es, p->recv, &out, err))) return rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, p, err))) return rc;
    rc = sim_mem_reduce(rk, p->grp, p->dt, p->red, p->off, len, out, err);
    sim_sync(rk); /* every rank has read every input */
    if (!rc && !direct) rc = sim_mem_copy(rk, p->recv, out, (size_t)len * es, err);
    return rc;
}

/* Copies straight into recv: peers read only the send pieces, and the one
 * piece that may lie inside recv (in place) is not written. */
static int sim_all_gather(SimRank *rk, const SimPost *p, ZnErr *err) {
    size_t es = zn_dtype_size(p->dt);
    int rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, p, err))) return rc;
    const SimPost *posts = rk->w->posts;
    long qoff = 0;
    for (int j = 0; j < p->grp.size && !rc; j++) {
        char *dst = (char *)p->recv + qoff * es;
        const void *src = posts[zn_group_member(&rk->comm.world, p->grp, j)].send;
        if ((const void *)dst != src) rc = sim_mem_copy(rk, dst, src, (size_t)p->counts[j] * es, err);
        qoff += p->counts[j];
    }
    sim_sync(rk); /* nobody still reads this rank's send */
    return rc;
}

/* Piece j of recv is piece gi of member j's send. */
static int sim_all_to_all(SimRank *rk, const SimPost *p, ZnErr *err) {
    size_t piece = (size_t)p->count * zn_dtype_size(p->dt);
    int rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, p, err))) return rc;
    const SimPost *posts = rk->w->posts;
    for (int j = 0; j < p->grp.size && !rc; j++) {
        const char *src = posts[zn_group_member(&rk->comm.world, p->grp, j)].send;
        rc = sim_mem_copy(rk, (char *)p->recv + (size_t)j * piece, src + (size_t)p->gi * piece, piece, err);
    }
    sim_sync(rk); /* nobody still reads this rank's send */
    return rc;
}

static int sim_broadcast(SimRank *rk, const SimPost *p, ZnErr *err) {
    int rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, p, err))) return rc;
    if (rk->rank != p->root)
        rc = sim_mem_copy(rk, p->recv, rk->w->posts[p->root].send, (size_t)p->count * zn_dtype_size(p->dt), err);
    sim_sync(rk); /* the root's buffer is no longer read */
    return rc;
}

static int sim_run(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    SimRank *rk = c->impl;
    k->call = ++rk->calls;
    if (c->world.size == 1) {
        /* the tree of one value is the value; only an out-of-place piece moves */
        int moves = (k->op == ZN_OP_REDUCE_SCATTER || k->op == ZN_OP_ALL_GATHER) && k->recv != k->send;
        if (k->op == ZN_OP_ALL_TO_ALL) return sim_mem_copy(rk, k->recv, k->send, (size_t)k->count * zn_dtype_size(k->dt), err);
        return moves ? sim_mem_copy(rk, k->recv, k->send, (size_t)k->counts[0] * zn_dtype_size(k->dt), err) : 0;
    }
    switch (k->op) {
    case ZN_OP_ALL_REDUCE: return sim_all_reduce(rk, k, err);
    case ZN_OP_REDUCE_SCATTER: return sim_reduce_scatter(rk, k, err);
    case ZN_OP_ALL_GATHER: return sim_all_gather(rk, k, err);
    case ZN_OP_BROADCAST: return sim_broadcast(rk, k, err);
    case ZN_OP_ALL_TO_ALL: return sim_all_to_all(rk, k, err);
    default: {
        int rc = begin(rk, k, err);
        if (!rc) sim_sync(rk); /* the records are no longer read */
        return rc;
    }
    }
}

void sim_comm_init(SimRank *rk) { zn_coll_init(&rk->comm, rk->rank, rk->w->world, rk, sim_run); }
