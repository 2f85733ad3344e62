/* sim_comm.c: the simulator's ZnComm. Each collective follows the protocol
 * of sim_world.h: check the arguments, post, sync, sequence check, compute
 * this rank's own output from the posted buffers, final sync. Each rank
 * computes its result itself, in the fixed order of comm.h, so the bits do
 * not depend on which thread runs first (spec Z-SIM-007).
 *
 * In-place forms follow NCCL (spec Z-SIM-010): reduce_scatter with
 * recv == send + offset(rank), all_gather with send == recv + offset(rank),
 * all_reduce and broadcast on one buffer. Any other overlap is refused. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "sim_world.h"

static SimRank *rank_of(ZnComm *c) { return c->impl; }
static int world_of(ZnComm *c) { return c->world; }
static const char *tag_str(const char *tag) { return tag ? tag : ""; }

/* ------------------------------------------------------ argument checks */

static int is_reduce_dtype(ZnDtype dt) {
    return dt == ZN_F32 || dt == ZN_F16 || dt == ZN_BF16 || dt == ZN_F64;
}

static int check_reduce(const SimPost *p, ZnErr *err) {
    if (!is_reduce_dtype(p->dt))
        return zn_err(err, ZN_E_USAGE, "%s '%s': dtype %s cannot be reduced (fp32, fp16, bf16, fp64 can)",
                      sim_op_name(p->op), tag_str(p->tag), zn_dtype_name(p->dt));
    if (p->red != ZN_SUM && p->red != ZN_MAX)
        return zn_err(err, ZN_E_USAGE, "%s '%s': unknown reduction op %d", sim_op_name(p->op),
                      tag_str(p->tag), (int)p->red);
    return 0;
}

static int check_copy_dtype(const SimPost *p, ZnErr *err) {
    if (zn_dtype_size(p->dt) == 0)
        return zn_err(err, ZN_E_USAGE, "%s '%s': unknown dtype %d", sim_op_name(p->op),
                      tag_str(p->tag), (int)p->dt);
    return 0;
}

static int check_count(const SimPost *p, long n, const void *buf, const char *what, ZnErr *err) {
    if (n < 0)
        return zn_err(err, ZN_E_USAGE, "%s '%s': negative count %ld", sim_op_name(p->op),
                      tag_str(p->tag), n);
    if (n > 0 && !buf)
        return zn_err(err, ZN_E_USAGE, "%s '%s': %s buffer is NULL for %ld elements",
                      sim_op_name(p->op), tag_str(p->tag), what, n);
    return 0;
}

/* Sums counts (all must be >= 0) into *total and this rank's offset. */
static int check_counts(const SimPost *p, int world, int rank, long *total, long *off, ZnErr *err) {
    if (!p->counts)
        return zn_err(err, ZN_E_USAGE, "%s '%s': counts is NULL", sim_op_name(p->op), tag_str(p->tag));
    long t = 0;
    for (int q = 0; q < world; q++) {
        if (p->counts[q] < 0)
            return zn_err(err, ZN_E_USAGE, "%s '%s': counts[%d] = %ld is negative",
                          sim_op_name(p->op), tag_str(p->tag), q, p->counts[q]);
        if (q == rank) *off = t;
        t += p->counts[q];
    }
    *total = t;
    return 0;
}

/* Byte ranges [a, a+na) and [b, b+nb) share a byte. */
static int overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/* The one overlap allowed between a rank's piece and the whole buffer is the
 * exact in-place position (Z-SIM-010). */
static int check_alias(const SimPost *p, const void *piece, size_t piece_bytes, const void *whole,
                       size_t whole_bytes, size_t off_bytes, ZnErr *err) {
    if (!overlaps(piece, piece_bytes, whole, whole_bytes)) return 0;
    if ((const char *)piece == (const char *)whole + off_bytes) return 0;
    return zn_err(err, ZN_E_USAGE, "%s '%s': send and recv overlap other than in place "
                  "(the rank's piece must sit at its own offset)", sim_op_name(p->op), tag_str(p->tag));
}

/* ------------------------------------------------------- sequence check */

static int counts_equal(const long *a, const long *b, int world) {
    for (int q = 0; q < world; q++)
        if (a[q] != b[q]) return 0;
    return 1;
}

static int has_counts(ZnCollOp op) { return op == ZN_OP_REDUCE_SCATTER || op == ZN_OP_ALL_GATHER; }

/* Whether two ranks' records describe different collectives; *by_counts is
 * set when only the counts arrays tell them apart. */
static int records_differ(const SimPost *a, const SimPost *b, int world, int *by_counts) {
    *by_counts = 0;
    if (a->op != b->op || strcmp(tag_str(a->tag), tag_str(b->tag)) != 0) return 1;
    if (a->op == ZN_OP_BARRIER) return 0;
    if (a->dt != b->dt || a->count != b->count) return 1;
    if ((a->op == ZN_OP_ALL_REDUCE || a->op == ZN_OP_REDUCE_SCATTER) && a->red != b->red) return 1;
    if (a->op == ZN_OP_BROADCAST && a->root != b->root) return 1;
    if (has_counts(a->op) && !counts_equal(a->counts, b->counts, world)) return *by_counts = 1;
    return 0;
}

/* Appends to s (capacity cap, *k used), truncating quietly. */
static void append(char *s, size_t cap, size_t *k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *s, size_t cap, size_t *k, const char *fmt, ...) {
    if (*k >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s + *k, cap - *k, fmt, ap);
    va_end(ap);
    if (n > 0) *k += (size_t)n;
}

/* "rank 1 reduce_scatter fp32 n=64 'grad_reduce'", with the max op, the root
 * and the counts array where they can be what differs. */
static void format_record(char *s, size_t cap, int rank, const SimPost *p, int world, int show_counts) {
    size_t k = 0;
    s[0] = 0;
    append(s, cap, &k, "rank %d %s", rank, sim_op_name(p->op));
    if (p->op != ZN_OP_BARRIER)
        append(s, cap, &k, "%s %s n=%ld", p->red == ZN_MAX ? "(max)" : "", zn_dtype_name(p->dt), p->count);
    if (p->op == ZN_OP_BROADCAST) append(s, cap, &k, " root=%d", p->root);
    if (show_counts) {
        append(s, cap, &k, " counts=[");
        for (int q = 0; q < world && q < 8; q++) append(s, cap, &k, "%s%ld", q ? "," : "", p->counts[q]);
        append(s, cap, &k, "%s]", world > 8 ? ",..." : "");
    }
    append(s, cap, &k, " '%s'", tag_str(p->tag));
}

/* Every rank runs the same comparison on the same records, so all reach the
 * same verdict and take the same path to the final sync. */
static int sequence_check(const ZnSimWorld *w, ZnErr *e) {
    const SimPost *p0 = &w->posts[0];
    for (int q = 1; q < w->world; q++) {
        int by_counts;
        if (!records_differ(p0, &w->posts[q], w->world, &by_counts)) continue;
        char a[256], b[256];
        format_record(a, sizeof a, 0, p0, w->world, by_counts);
        format_record(b, sizeof b, q, &w->posts[q], w->world, by_counts);
        return zn_err(e, ZN_E_COMM, "collective mismatch at call #%ld: %s vs %s", p0->call, a, b);
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

static SimPost post_new(SimRank *rk, ZnCollOp op, ZnDtype dt, const char *tag) {
    SimPost p = {0};
    p.op = op;
    p.dt = dt;
    p.tag = tag;
    p.call = ++rk->calls;
    return p;
}

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

/* Counts the call under the ring byte model (Z-SIM-004). */
static int done(SimRank *rk, const SimPost *p) {
    long sent, recv;
    zn_comm_ring_bytes(p->op, rk->rank, rk->comm.world, p->counts, p->count, p->root, p->dt, &sent, &recv);
    zn_comm_count(&rk->comm, p->op, p->tag, sent, recv);
    return 0;
}

/* ------------------------------------------------------- collectives */

/* The even split of n over world ranks (comm.h): piece r and its offset. */
static void even_split(long n, int world, int r, long *off, long *len) {
    long base = n / world, extra = n % world;
    *len = base + (r < extra ? 1 : 0);
    *off = r * base + (r < extra ? r : extra);
}

/* Reduce-scatter of the even split into a private buffer, write the piece
 * into buf, then gather the peers' pieces from their buffers. Each rank
 * reads every input once instead of computing all n elements itself. */
static int sim_all_reduce(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op,
                          const char *tag, ZnErr *err) {
    SimRank *rk = rank_of(c);
    int world = world_of(c);
    SimPost p = post_new(rk, ZN_OP_ALL_REDUCE, dt, tag);
    p.red = op;
    p.count = count;
    p.send = buf;
    p.recv = buf;
    int rc = check_reduce(&p, err);
    if (!rc) rc = check_count(&p, count, buf, "the", err);
    if (rc) return rc;
    if (world == 1) return done(rk, &p); /* the tree of one value is the value */
    size_t es = zn_dtype_size(dt);
    long off, len;
    even_split(count, world, rk->rank, &off, &len);
    void *out = NULL;
    if ((rc = sim_reserve(&rk->tree_buf, &rk->tree_cap, zn_tree_tiles_bytes(world), err))) return rc;
    if ((rc = sim_mem_scratch(rk, (size_t)len * es, buf, &out, err))) return rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, &p, err))) return rc;
    const SimPost *posts = rk->w->posts;
    rc = sim_mem_reduce(rk, dt, op, off, len, out, err);
    sim_sync(rk); /* every rank has read every input */
    if (!rc) rc = sim_mem_copy(rk, (char *)buf + off * es, out, (size_t)len * es, err);
    sim_sync(rk); /* every reduced piece is in its owner's buffer */
    for (int q = 0; q < world && !rc; q++) {
        long qoff, qlen;
        even_split(count, world, q, &qoff, &qlen);
        if (q != rk->rank)
            rc = sim_mem_copy(rk, (char *)buf + qoff * es, (const char *)posts[q].recv + qoff * es,
                              (size_t)qlen * es, err);
    }
    sim_sync(rk); /* nobody still reads this rank's piece */
    return rc ? rc : done(rk, &p);
}

static int sim_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts,
                              ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    SimRank *rk = rank_of(c);
    int world = world_of(c);
    SimPost p = post_new(rk, ZN_OP_REDUCE_SCATTER, dt, tag);
    p.red = op;
    p.counts = counts;
    p.send = send;
    p.recv = recv;
    long total = 0, off = 0;
    int rc = check_reduce(&p, err);
    if (!rc) rc = check_counts(&p, world, rk->rank, &total, &off, err);
    if (rc) return rc;
    p.count = total;
    long len = counts[rk->rank];
    size_t es = zn_dtype_size(dt);
    if ((rc = check_count(&p, total, send, "send", err))) return rc;
    if ((rc = check_count(&p, len, recv, "recv", err))) return rc;
    if ((rc = check_alias(&p, recv, (size_t)len * es, send, (size_t)total * es, (size_t)off * es, err)))
        return rc;
    if (world == 1) {
        if (recv != send && (rc = sim_mem_copy(rk, recv, send, (size_t)len * es, err))) return rc;
        return done(rk, &p);
    }
    /* in place, recv is part of what peers read: stage the result privately */
    int direct = !overlaps(recv, (size_t)len * es, send, (size_t)total * es);
    void *out = recv;
    if ((rc = sim_reserve(&rk->tree_buf, &rk->tree_cap, zn_tree_tiles_bytes(world), err))) return rc;
    if (!direct && (rc = sim_mem_scratch(rk, (size_t)len * es, recv, &out, err))) return rc;
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, &p, err))) return rc;
    rc = sim_mem_reduce(rk, dt, op, off, len, out, err);
    sim_sync(rk); /* every rank has read every input */
    if (!rc && !direct) rc = sim_mem_copy(rk, recv, out, (size_t)len * es, err);
    return rc ? rc : done(rk, &p);
}

/* Copies straight into recv: peers read only the send pieces, and the one
 * piece that may lie inside recv (in place) is not written. */
static int sim_all_gather(ZnComm *c, const void *send, void *recv, const long *counts,
                          ZnDtype dt, const char *tag, ZnErr *err) {
    SimRank *rk = rank_of(c);
    int world = world_of(c);
    SimPost p = post_new(rk, ZN_OP_ALL_GATHER, dt, tag);
    p.counts = counts;
    p.send = send;
    p.recv = recv;
    long total = 0, off = 0;
    int rc = check_copy_dtype(&p, err);
    if (!rc) rc = check_counts(&p, world, rk->rank, &total, &off, err);
    if (rc) return rc;
    p.count = total;
    long len = counts[rk->rank];
    size_t es = zn_dtype_size(dt);
    if ((rc = check_count(&p, len, send, "send", err))) return rc;
    if ((rc = check_count(&p, total, recv, "recv", err))) return rc;
    if ((rc = check_alias(&p, send, (size_t)len * es, recv, (size_t)total * es, (size_t)off * es, err)))
        return rc;
    if (world == 1) {
        if (recv != send && (rc = sim_mem_copy(rk, recv, send, (size_t)len * es, err))) return rc;
        return done(rk, &p);
    }
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, &p, err))) return rc;
    const SimPost *posts = rk->w->posts;
    long qoff = 0;
    for (int q = 0; q < world && !rc; q++) {
        char *dst = (char *)recv + qoff * es;
        size_t n = (size_t)counts[q] * es;
        if ((const void *)dst != posts[q].send) rc = sim_mem_copy(rk, dst, posts[q].send, n, err);
        qoff += counts[q];
    }
    sim_sync(rk); /* nobody still reads this rank's send */
    return rc ? rc : done(rk, &p);
}

static int sim_broadcast(ZnComm *c, void *buf, long count, ZnDtype dt, int root, const char *tag,
                         ZnErr *err) {
    SimRank *rk = rank_of(c);
    int world = world_of(c);
    SimPost p = post_new(rk, ZN_OP_BROADCAST, dt, tag);
    p.count = count;
    p.root = root;
    p.send = buf;
    p.recv = buf;
    int rc = check_copy_dtype(&p, err);
    if (!rc) rc = check_count(&p, count, buf, "the", err);
    if (rc) return rc;
    if (root < 0 || root >= world)
        return zn_err(err, ZN_E_USAGE, "broadcast '%s': root %d is not a rank of a world of %d",
                      tag_str(tag), root, world);
    if (world == 1) return done(rk, &p);
    if ((rc = sim_mem_ready(rk, err))) return rc;
    if ((rc = begin(rk, &p, err))) return rc;
    if (rk->rank != root)
        rc = sim_mem_copy(rk, buf, rk->w->posts[root].send, (size_t)count * zn_dtype_size(dt), err);
    sim_sync(rk); /* the root's buffer is no longer read */
    return rc ? rc : done(rk, &p);
}

static int sim_barrier(ZnComm *c, const char *tag, ZnErr *err) {
    SimRank *rk = rank_of(c);
    SimPost p = post_new(rk, ZN_OP_BARRIER, ZN_U8, tag);
    if (world_of(c) == 1) return done(rk, &p);
    int rc = begin(rk, &p, err);
    if (rc) return rc;
    sim_sync(rk); /* the records are no longer read */
    return done(rk, &p);
}

void sim_comm_init(SimRank *rk) {
    ZnComm *c = &rk->comm;
    c->rank = rk->rank;
    c->world = rk->w->world;
    c->impl = rk;
    c->all_reduce = sim_all_reduce;
    c->reduce_scatter = sim_reduce_scatter;
    c->all_gather = sim_all_gather;
    c->broadcast = sim_broadcast;
    c->barrier = sim_barrier;
}
