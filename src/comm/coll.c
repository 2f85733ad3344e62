/* coll.c: the collective layer of coll.h: entry points, argument checks and
 * counters for every backend, and the process backends' collectives built
 * on a byte exchange. */
#include "comm/coll.h"
#include "core/alloc.h"
#include "comm/comm_seq.h"
#include "comm/pause.h"
#include "comm/store.h"
#include "comm/sumtree.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *tag_str(const char *tag) { return tag ? tag : ""; }

/* ------------------------------------------------------ argument checks */

static int check_reduce(const ZnCollCall *k, ZnErr *err) {
    if (k->dt != ZN_F32 && k->dt != ZN_F16 && k->dt != ZN_BF16 && k->dt != ZN_F64)
        return zn_err(err, ZN_E_USAGE, "%s '%s': dtype %s cannot be reduced (fp32, fp16, bf16, fp64 can)",
                      zn_coll_op_name(k->op), tag_str(k->tag), zn_dtype_name(k->dt));
    if (k->red != ZN_SUM && k->red != ZN_MAX)
        return zn_err(err, ZN_E_USAGE, "%s '%s': unknown reduction op %d", zn_coll_op_name(k->op),
                      tag_str(k->tag), (int)k->red);
    return 0;
}

static int check_copy_dtype(const ZnCollCall *k, ZnErr *err) {
    if (zn_dtype_size(k->dt) == 0)
        return zn_err(err, ZN_E_USAGE, "%s '%s': unknown dtype %d", zn_coll_op_name(k->op), tag_str(k->tag),
                      (int)k->dt);
    return 0;
}

static int check_count(const ZnComm *c, const ZnCollCall *k, long n, const void *buf, const char *what, ZnErr *err) {
    if (n < 0)
        return zn_err(err, ZN_E_USAGE, "%s '%s': negative count %ld", zn_coll_op_name(k->op), tag_str(k->tag), n);
    if (n > 0 && !buf && !c->counts_only)
        return zn_err(err, ZN_E_USAGE, "%s '%s': %s buffer is NULL for %ld elements", zn_coll_op_name(k->op),
                      tag_str(k->tag), what, n);
    return 0;
}

/* Sums counts (all must be >= 0, one per member) into k->count and this
 * rank's offset. */
static int check_counts(ZnCollCall *k, ZnErr *err) {
    if (!k->counts)
        return zn_err(err, ZN_E_USAGE, "%s '%s': counts is NULL", zn_coll_op_name(k->op), tag_str(k->tag));
    long t = 0;
    const int world = k->grp.size, rank = k->gi;
    for (int q = 0; q < world; q++) {
        if (k->counts[q] < 0)
            return zn_err(err, ZN_E_USAGE, "%s '%s': counts[%d] = %ld is negative", zn_coll_op_name(k->op),
                          tag_str(k->tag), q, k->counts[q]);
        if (q == rank) k->off = t;
        t += k->counts[q];
    }
    k->count = t;
    return 0;
}

/* The one overlap allowed between a rank's piece and the whole buffer is the
 * exact in-place position of NCCL (Z-SIM-010). */
static int check_alias(const ZnComm *c, const ZnCollCall *k, const void *piece, long len, const void *whole,
                       ZnErr *err) {
    if (c->counts_only) return 0;
    size_t es = zn_dtype_size(k->dt), np = (size_t)len * es, nw = (size_t)k->count * es;
    uintptr_t x = (uintptr_t)piece, y = (uintptr_t)whole;
    int overlap = np > 0 && nw > 0 && x < y + nw && y < x + np;
    if (!overlap || (const char *)piece == (const char *)whole + (size_t)k->off * es) return 0;
    return zn_err(err, ZN_E_USAGE, "%s '%s': send and recv overlap other than in place "
                  "(the rank's piece must sit at its own offset)", zn_coll_op_name(k->op), tag_str(k->tag));
}

static int check(const ZnComm *c, ZnCollCall *k, ZnErr *err) {
    int rc = 0;
    long len;
    k->grp = zn_group_resolve(&c->world, k->grp);
    if ((rc = zn_group_check(&c->world, k->grp, err))) return rc;
    k->gi = zn_group_index(&c->world, k->grp);
    switch (k->op) {
    case ZN_OP_ALL_REDUCE:
        if (!(rc = check_reduce(k, err))) rc = check_count(c, k, k->count, k->recv, "the", err);
        return rc;
    case ZN_OP_REDUCE_SCATTER:
        if ((rc = check_reduce(k, err)) || (rc = check_counts(k, err))) return rc;
        len = k->counts[k->gi];
        if ((rc = check_count(c, k, k->count, k->send, "send", err))) return rc;
        if ((rc = check_count(c, k, len, k->recv, "recv", err))) return rc;
        return check_alias(c, k, k->recv, len, k->send, err);
    case ZN_OP_ALL_GATHER:
        if ((rc = check_copy_dtype(k, err)) || (rc = check_counts(k, err))) return rc;
        len = k->counts[k->gi];
        if ((rc = check_count(c, k, len, k->send, "send", err))) return rc;
        if ((rc = check_count(c, k, k->count, k->recv, "recv", err))) return rc;
        return check_alias(c, k, k->send, len, k->recv, err);
    case ZN_OP_BROADCAST:
        if ((rc = check_copy_dtype(k, err)) || (rc = check_count(c, k, k->count, k->recv, "the", err))) return rc;
        if (k->root < 0 || k->root >= c->world.size)
            return zn_err(err, ZN_E_USAGE, "broadcast '%s': root %d is not a rank of a world of %d",
                          tag_str(k->tag), k->root, c->world.size);
        return 0;
    case ZN_OP_ALL_TO_ALL: {
        long n = k->count * k->grp.size;
        size_t bytes = (size_t)n * zn_dtype_size(k->dt);
        if ((rc = check_copy_dtype(k, err)) || (rc = check_count(c, k, k->count, k->send, "send", err)) ||
            (rc = check_count(c, k, k->count, k->recv, "recv", err)))
            return rc;
        uintptr_t x = (uintptr_t)k->send, y = (uintptr_t)k->recv;
        if (bytes > 0 && x < y + bytes && y < x + bytes && !c->counts_only)
            return zn_err(err, ZN_E_USAGE, "all_to_all '%s': send and recv overlap", tag_str(k->tag));
        return 0;
    }
    default: /* barrier: no arguments */
        return 0;
    }
}

/* ------------------------------------------------------- entry points */

/* Check, run, and count a call that succeeded (ring model, Z-SIM-004). */
static int call(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    if (c->watch) c->watch->begin(c->watch, c);
    int rc = check(c, k, err);
    if (!rc) rc = c->run(c, k, err);
    if (rc == ZN_E_COMM && zn_comm_timed_out(err)) {   /* which collective waited: op, tag, call number (Z-RDV-009) */
        long calls = 0;
        zn_comm_tag_totals(&c->stats, k->tag, &calls, NULL, NULL);
        zn_err_prefix(err, "%s '%s' (call %ld): ", zn_coll_op_name(k->op), tag_str(k->tag), calls + 1);
    }
    if (!rc) {
        long sent, recv, inter;
        zn_comm_call_bytes(&c->world, k->grp, k->op, k->counts, k->count, k->root, k->dt, &sent, &recv, &inter);
        zn_comm_count(c, k->op, k->tag, sent, recv, inter);
    }
    if (c->watch) c->watch->end(c->watch, c, k->op, k->tag);
    return rc;
}

static int e_all_reduce(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_ALL_REDUCE, .dt = dt, .red = op, .count = count, .tag = tag, .send = buf,
                    .recv = buf};
    return call(c, &k, err);
}

static int e_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp op,
                            const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_REDUCE_SCATTER, .dt = dt, .red = op, .counts = counts, .tag = tag, .send = send,
                    .recv = recv};
    return call(c, &k, err);
}

static int e_all_gather(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, const char *tag,
                        ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_ALL_GATHER, .dt = dt, .counts = counts, .tag = tag, .send = send, .recv = recv};
    return call(c, &k, err);
}

static int e_broadcast(ZnComm *c, void *buf, long count, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_BROADCAST, .dt = dt, .count = count, .root = root, .tag = tag, .send = buf,
                    .recv = buf};
    return call(c, &k, err);
}

static int e_barrier(ZnComm *c, const char *tag, ZnErr *err) {
    ZnCollCall k = {.op = ZN_OP_BARRIER, .dt = ZN_U8, .tag = tag};
    return call(c, &k, err);
}

/* A group collective: the four data-moving ops; broadcast and barrier are
 * world-wide only. */
static int e_group(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    if (k->op == ZN_OP_BROADCAST || k->op == ZN_OP_BARRIER || (unsigned)k->op >= ZN_OP_N)
        return zn_err(err, ZN_E_USAGE, "%s '%s' cannot run in a group of ranks", zn_coll_op_name(k->op),
                      tag_str(k->tag));
    return call(c, k, err);
}

static int failing_run(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    if (++c->fail_seen == c->fail_at)
        return zn_err(err, ZN_E_COMM, "%s '%s': injected failure of collective call %ld", zn_coll_op_name(k->op),
                      tag_str(k->tag), c->fail_at);
    return c->fail_real(c, k, err);
}

void zn_coll_fail_at(ZnComm *c, long call) {
    if (c->run == failing_run) c->run = c->fail_real;
    c->fail_at = call;
    c->fail_seen = 0;
    if (call <= 0) return;
    c->fail_real = c->run;
    c->run = failing_run;
}

void zn_coll_init(ZnComm *c, int rank, int world, void *impl, ZnCollRun run) {
    c->world = zn_world(world, rank, 0);   /* one node until the process set-up knows better */
    c->impl = impl;
    c->run = run;
    c->counts_only = 0;
    c->watch = NULL;
    c->fail_real = NULL;
    c->fail_at = c->fail_seen = 0;
    c->all_reduce = e_all_reduce;
    c->reduce_scatter = e_reduce_scatter;
    c->all_gather = e_all_gather;
    c->broadcast = e_broadcast;
    c->barrier = e_barrier;
    c->group = e_group;
}

/* ------------------------------------------- process backends (tcp, mpi) */

typedef struct {
    void *x;
    const ZnXportOps *ops;
    long calls;
    int broken;              /* a collective failed: later calls fail at once, the same way */
    ZnErr broken_err;
    ZnPause pause;           /* ZINC_COMM_PAUSE's drill (pause.h) */
    ZnSeqRec *recs;          /* [world] every rank's sequence record */
    const void **out;        /* [world] exchange arguments */
    void **in;
    size_t *nout, *nin;
    const void **leaves;     /* [world] tree inputs */
    long *even;              /* [world] all_reduce's split */
    char *scratch;           /* every rank's slice of this rank's piece */
    size_t scratch_cap;
} Proc;

/* One exchange of the transport, its bytes counted by the node they go to:
 * every rank sends each peer its own piece, no ring (Z-NODE-008). */
static int exchange(ZnComm *c, Proc *p, ZnErr *err) {
    const int W = c->world.size, me = c->world.rank, P = c->world.per_node > 0 ? c->world.per_node : W;
    long inter = 0, intra = 0, msgs = 0;
    for (int q = 0; q < W; q++) {
        if (q == me) continue;
        if (q / P != me / P) {
            inter += (long)p->nout[q];
            msgs++;
        } else intra += (long)p->nout[q];
    }
    int rc = p->ops->exchange(p->x, p->out, p->nout, p->in, p->nin, err);
    if (!rc) {
        c->stats.wire_inter += inter;
        c->stats.wire_intra += intra;
        c->stats.wire_msgs_inter += msgs;
    }
    return rc;
}

static void clear(Proc *p, int world) {
    memset(p->nout, 0, (size_t)world * sizeof *p->nout);
    memset(p->nin, 0, (size_t)world * sizeof *p->nin);
}

/* Every rank's record on every rank, each compared with rank 0's: all reach
 * the same verdict (Z-SEQ-001). */
static int sequence(ZnComm *c, Proc *p, ZnCollCall *k, ZnErr *err) {
    ZnSeqRec mine;
    k->call = ++p->calls;
    zn_seq_fill(&mine, k->call, k->op, k->dt, k->red, k->root, k->count, k->counts, k->grp.size, k->tag);
    zn_seq_group(&mine, k->grp);
    for (int q = 0; q < c->world.size; q++) {
        p->out[q] = &mine;
        p->in[q] = &p->recs[q];
        p->nout[q] = p->nin[q] = sizeof mine;
    }
    int rc = exchange(c, p, err);
    if (rc) return rc;
    p->recs[c->world.rank] = mine;
    return zn_seq_check_all(p->recs, c->world.size, err);
}

/* Reduce-scatter: every owner receives every member's slice of its piece
 * and sums them in the tree over member index, whatever the transport's
 * order. The owner's own slice is a leaf where it lies in send, not a copy:
 * out may be that very slice (in place), which the tree allows, as it
 * writes each tile of out only after reading every leaf's tile. Peers are
 * world ranks (the exchange's index), members the group's. */
static int scatter_sum(ZnComm *c, Proc *p, ZnGroup g, const void *send, const long *counts, ZnDtype dt, ZnRedOp red,
                       void *out, ZnErr *err) {
    const int W = g.size, me = zn_group_index(&c->world, g);
    size_t es = zn_dtype_size(dt), piece = (size_t)counts[me] * es, need = (size_t)W * piece + 1;
    if (need > p->scratch_cap) {
        char *s = zn_realloc(ZN_HOST_COMM, p->scratch, need);
        if (!s) return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " (%zu bytes of collective scratch)", need);
        p->scratch = s;
        p->scratch_cap = need;
    }
    size_t off = 0;
    for (int j = 0; j < W; j++) {
        int q = zn_group_member(&c->world, g, j);
        p->out[q] = (const char *)send + off;
        p->nout[q] = (size_t)counts[j] * es;
        p->in[q] = p->scratch + (size_t)j * piece;
        p->nin[q] = piece;
        p->leaves[j] = p->in[q];
        off += (size_t)counts[j] * es;
    }
    p->leaves[me] = p->out[c->world.rank];
    int rc = exchange(c, p, err);
    return rc ? rc : zn_tree_reduce(p->leaves, W, dt, red, counts[me], out, err);
}

/* All-gather: every member's piece lands in recv in member order. send
 * may be this rank's own place in recv. */
static int gather(ZnComm *c, Proc *p, ZnGroup g, const void *send, void *recv, const long *counts, ZnDtype dt,
                  ZnErr *err) {
    size_t es = zn_dtype_size(dt), off = 0;
    const int me = zn_group_index(&c->world, g);
    for (int j = 0; j < g.size; j++) {
        int q = zn_group_member(&c->world, g, j);
        p->out[q] = send;
        p->nout[q] = (size_t)counts[me] * es;
        p->in[q] = (char *)recv + off;
        p->nin[q] = (size_t)counts[j] * es;
        off += p->nin[q];
    }
    if (p->nin[c->world.rank]) memmove(p->in[c->world.rank], send, p->nin[c->world.rank]);
    return exchange(c, p, err);
}

static int move(ZnComm *c, Proc *p, ZnCollCall *k, ZnErr *err) {
    const int W = c->world.size, me = c->world.rank, G = k->grp.size;
    size_t es = zn_dtype_size(k->dt);
    clear(p, W);
    switch (k->op) {
    case ZN_OP_REDUCE_SCATTER:
        return scatter_sum(c, p, k->grp, k->send, k->counts, k->dt, k->red, k->recv, err);
    case ZN_OP_ALL_GATHER:
        return gather(c, p, k->grp, k->send, k->recv, k->counts, k->dt, err);
    case ZN_OP_ALL_REDUCE: {
        /* comm.h's even split reduce-scattered, then gathered back */
        zn_comm_even_counts(k->count, G, p->even);
        long off = 0;
        for (int j = 0; j < k->gi; j++) off += p->even[j];
        char *piece = (char *)k->recv + (size_t)off * es;
        int rc = scatter_sum(c, p, k->grp, k->recv, p->even, k->dt, k->red, piece, err);
        if (!rc) clear(p, W);
        return rc ? rc : gather(c, p, k->grp, piece, k->recv, p->even, k->dt, err);
    }
    case ZN_OP_ALL_TO_ALL: {
        size_t piece = (size_t)k->count * es;
        for (int j = 0; j < G; j++) {
            int q = zn_group_member(&c->world, k->grp, j);
            p->out[q] = (const char *)k->send + (size_t)j * piece;
            p->in[q] = (char *)k->recv + (size_t)j * piece;
            p->nout[q] = p->nin[q] = piece;
        }
        if (piece) memcpy((char *)k->recv + (size_t)k->gi * piece, (const char *)k->send + (size_t)k->gi * piece, piece);
        return exchange(c, p, err);
    }
    case ZN_OP_BROADCAST:
        for (int q = 0; q < W; q++) {
            p->out[q] = k->send;
            p->nout[q] = me == k->root ? (size_t)k->count * es : 0;
            p->in[q] = k->recv;
            p->nin[q] = q == k->root ? (size_t)k->count * es : 0;
        }
        return exchange(c, p, err);
    default: /* barrier: the record exchange already waited for every rank */
        return 0;
    }
}

static int proc_run(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    Proc *p = c->impl;
    if (p->broken) {
        *err = p->broken_err;
        return err->code;
    }
    if (p->pause.rank >= 0) {
        long done = 0;
        zn_comm_tag_totals(&c->stats, k->tag, &done, NULL, NULL);
        zn_pause_check(&p->pause, c, k->op, k->tag, done);
    }
    int rc = sequence(c, p, k, err);
    if (!rc) rc = move(c, p, k, err);
    if (rc) {
        p->broken = 1;
        p->broken_err = *err;
    }
    return rc;
}

ZnComm *zn_coll_proc_new(int rank, int world, void *x, const ZnXportOps *ops, ZnErr *err) {
    ZnPause pause;
    if (zn_pause_from_env(&pause, err)) {   /* as on every failure here, the transport is freed */
        if (ops && x) ops->free(x);
        return NULL;
    }
    ZnComm *c = zn_calloc(ZN_HOST_COMM, 1, sizeof *c);
    Proc *p = zn_calloc(ZN_HOST_COMM, 1, sizeof *p);
    size_t W = (size_t)world;
    if (p) {
        p->x = x;
        p->ops = ops;
        p->pause = pause;
    }
    if (c) c->impl = p;
    const ZnHostCat H = ZN_HOST_COMM;   /* every rank's exchange arguments, records, tree leaves and split */
    if (!c || !p || !(ZN_NEW_ARRAY(H, p->recs, W) && ZN_NEW_ARRAY(H, p->out, W) && ZN_NEW_ARRAY(H, p->in, W) &&
                      ZN_NEW_ARRAY(H, p->nout, W) && ZN_NEW_ARRAY(H, p->nin, W) && ZN_NEW_ARRAY(H, p->leaves, W) &&
                      ZN_NEW_ARRAY(H, p->even, W))) {
        if (c && p) zn_coll_proc_free(c);
        else {
            if (ops && x) ops->free(x);
            free(c);
            free(p);
        }
        zn_nomem(err);
        return NULL;
    }
    zn_coll_init(c, rank, world, p, proc_run);
    return c;
}

void zn_coll_set_timeout(ZnComm *c, double seconds) {
    if (!c || c->run != proc_run) return;
    Proc *p = c->impl;
    if (p->ops->set_timeout) p->ops->set_timeout(p->x, seconds);
}

void zn_coll_proc_free(ZnComm *c) {
    if (!c) return;
    Proc *p = c->impl;
    if (p) {
        if (p->ops && p->x) p->ops->free(p->x);
        ZN_FREE_ALL(p->recs, p->out, p->in, p->nout, p->nin, p->leaves, p->even, p->scratch, p);
    }
    free(c);
}
