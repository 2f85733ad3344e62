/* comm_tcp.c: the TCP communicator (spec Z-PROC-002). A star through rank 0:
 * every rank sends rank 0 its sequence record and its contribution; rank 0
 * checks the records, computes the result (reductions in the simulator's
 * tree over rank index) and sends each rank its part. Simple, and exactly
 * the simulator's bits; it is meant for tests and small runs, not speed
 * (rank 0 moves N times the data). */
#include "comm/comm_proc.h"
#include "comm/comm_seq.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    ZnStore *store;
    long calls;
    int broken;              /* a collective failed: later calls fail at once */
    ZnErr broken_err;
    char *scratch;           /* rank 0: every rank's contribution */
    size_t scratch_cap;
} TcpComm;

typedef struct {
    ZnSeqRec rec;
    int64_t payload;         /* bytes that follow */
} Frame;

typedef struct {
    uint32_t magic, ok;
    int64_t payload;         /* result bytes, or the error message's length */
} Reply;

static int reserve(TcpComm *t, size_t need, ZnErr *err) {
    if (need <= t->scratch_cap) return 0;
    char *p = realloc(t->scratch, need);
    if (!p) return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " (%zu bytes of collective scratch)", need);
    t->scratch = p;
    t->scratch_cap = need;
    return 0;
}

static long sum_counts(const long *counts, int world) {
    long s = 0;
    for (int q = 0; q < world; q++) s += counts[q];
    return s;
}

static long prefix(const long *counts, int r) {
    long s = 0;
    for (int q = 0; q < r; q++) s += counts[q];
    return s;
}

/* What rank q sends rank 0 for this call (bytes). */
static size_t contribution(const ZnSeqRec *r, const long *counts, int q, size_t es) {
    switch ((ZnCollOp)r->op) {
    case ZN_OP_ALL_REDUCE: return (size_t)r->count * es;
    case ZN_OP_REDUCE_SCATTER: return (size_t)r->count * es;
    case ZN_OP_ALL_GATHER: return (size_t)counts[q] * es;
    case ZN_OP_BROADCAST: return q == r->root ? (size_t)r->count * es : 0;
    default: return 0;
    }
}

/* Rank 0 tells every peer the call failed (the same message everywhere). */
static void send_error(TcpComm *t, int world, const ZnErr *e) {
    Reply rp = {ZN_SEQ_MAGIC, 0, (int64_t)strlen(e->msg)};
    ZnErr ignore;
    for (int q = 1; q < world; q++)
        if (!zn_store_send(t->store, q, &rp, sizeof rp, &ignore))
            zn_store_send(t->store, q, e->msg, (size_t)rp.payload, &ignore);
}

static int fail(TcpComm *t, ZnErr *err) {
    t->broken = 1;
    t->broken_err = *err;
    return err->code;
}

/* One collective. send/recv and the element counts follow comm.h; the
 * result lands in recv on every rank. */
static int collective(ZnComm *c, ZnCollOp op, const void *send, void *recv, long count, const long *counts,
                      ZnDtype dt, ZnRedOp red, int root, const char *tag, ZnErr *err) {
    TcpComm *t = c->impl;
    const int world = c->world, me = c->rank;
    if (t->broken) {
        *err = t->broken_err;
        return err->code;
    }
    size_t es = zn_dtype_size(dt);
    if (!es) return zn_err(err, ZN_E_INTERNAL, "%s: bad dtype %d", zn_coll_op_name(op), (int)dt);
    Frame mine = {0};
    zn_seq_fill(&mine.rec, ++t->calls, op, dt, red, root, counts ? sum_counts(counts, world) : count, counts, world,
                tag);
    mine.payload = (int64_t)contribution(&mine.rec, counts, me, es);
    const char *my_data = op == ZN_OP_ALL_GATHER ? send : op == ZN_OP_BROADCAST || op == ZN_OP_ALL_REDUCE ? recv : send;
    size_t total = (size_t)mine.rec.count * es;
    int rc;
    if (me != 0) {
        if ((rc = zn_store_send(t->store, 0, &mine, sizeof mine, err))) return fail(t, err);
        if (mine.payload && (rc = zn_store_send(t->store, 0, my_data, (size_t)mine.payload, err))) return fail(t, err);
        Reply rp;
        if ((rc = zn_store_recv(t->store, 0, &rp, sizeof rp, err))) return fail(t, err);
        if (rp.magic != ZN_SEQ_MAGIC || rp.payload < 0) {
            zn_err(err, ZN_E_COMM, "rank 0 sent a malformed reply");
            return fail(t, err);
        }
        if (!rp.ok) {
            char msg[sizeof err->msg] = "";
            size_t n = (size_t)rp.payload < sizeof msg - 1 ? (size_t)rp.payload : sizeof msg - 1;
            if ((rc = zn_store_recv(t->store, 0, msg, n, err))) return fail(t, err);
            zn_err(err, ZN_E_COMM, "%s", msg);
            return fail(t, err);
        }
        size_t want = op == ZN_OP_REDUCE_SCATTER ? (size_t)counts[me] * es
                    : op == ZN_OP_BARRIER || (op == ZN_OP_BROADCAST && root == me) ? 0 : total;
        if ((size_t)rp.payload != want) {
            zn_err(err, ZN_E_COMM, "rank 0 sent %lld bytes for %s '%s', expected %zu", (long long)rp.payload,
                   zn_coll_op_name(op), tag ? tag : "", want);
            return fail(t, err);
        }
        if (want && (rc = zn_store_recv(t->store, 0, recv, want, err))) return fail(t, err);
    } else {
        /* gather every record and contribution; a mismatch is reported after
           the payloads are drained, so the streams stay in step */
        if ((rc = reserve(t, (size_t)world * total + 1, err))) return fail(t, err);
        ZnErr mismatch = {0};
        for (int q = 1; q < world; q++) {
            Frame f;
            if ((rc = zn_store_recv(t->store, q, &f, sizeof f, err))) break;
            if (!mismatch.code) zn_seq_compare(&mine.rec, 0, &f.rec, q, &mismatch);
            size_t expect = mismatch.code ? (size_t)f.payload : contribution(&f.rec, counts, q, es);
            if (f.payload < 0 || (size_t)f.payload != expect || (size_t)f.payload > total) {
                if (!mismatch.code)
                    zn_err(&mismatch, ZN_E_COMM, "rank %d sent %lld bytes for %s '%s' (call #%ld), expected %zu", q,
                           (long long)f.payload, zn_coll_op_name(op), tag ? tag : "", t->calls, expect);
                rc = mismatch.code;   /* the stream cannot be trusted past this */
                break;
            }
            char *slot = t->scratch + (size_t)q * total;
            if (f.payload && (rc = zn_store_recv(t->store, q, slot, (size_t)f.payload, err))) break;
        }
        if (!rc && mismatch.code) rc = mismatch.code;
        if (rc) {
            if (mismatch.code) *err = mismatch;
            send_error(t, world, err);
            return fail(t, err);
        }
        const char *result = NULL;
        if (op == ZN_OP_ALL_REDUCE || op == ZN_OP_REDUCE_SCATTER) {
            const void *bufs[64];
            const void **b = world <= 64 ? bufs : malloc((size_t)world * sizeof *b);
            if (!b) {
                zn_nomem(err);
                return fail(t, err);
            }
            b[0] = my_data;
            for (int q = 1; q < world; q++) b[q] = t->scratch + (size_t)q * total;
            /* slot 0 of the scratch is free: the result goes there */
            rc = zn_tree_reduce(b, world, dt, red, mine.rec.count, t->scratch, err);
            if (b != bufs) free(b);
            if (rc) return fail(t, err);
            result = t->scratch;
        } else if (op == ZN_OP_ALL_GATHER) {
            /* rank 0's own piece first (send may alias its place in recv) */
            memmove((char *)recv, send, (size_t)counts[0] * es);
            for (int q = 1; q < world; q++)
                memcpy((char *)recv + (size_t)prefix(counts, q) * es, t->scratch + (size_t)q * total,
                       (size_t)counts[q] * es);
            result = recv;
        } else if (op == ZN_OP_BROADCAST) {
            if (root != 0) memcpy(recv, t->scratch + (size_t)root * total, total);
            result = recv;
        }
        for (int q = 1; q < world && !rc; q++) {
            size_t off = op == ZN_OP_REDUCE_SCATTER ? (size_t)prefix(counts, q) * es : 0;
            size_t n = op == ZN_OP_REDUCE_SCATTER ? (size_t)counts[q] * es
                     : op == ZN_OP_BARRIER || (op == ZN_OP_BROADCAST && root == q) ? 0 : total;
            Reply rp = {ZN_SEQ_MAGIC, 1, (int64_t)n};
            rc = zn_store_send(t->store, q, &rp, sizeof rp, err);
            if (!rc && n) rc = zn_store_send(t->store, q, result + off, n, err);
        }
        if (rc) {
            /* rank q is gone: the peers before it read the message as the
               reply to their next call, those after it as this one's, so
               every survivor names the rank that failed (Z-FAULT-001) */
            send_error(t, world, err);
            return fail(t, err);
        }
        if (op == ZN_OP_ALL_REDUCE) memcpy(recv, result, total);
        if (op == ZN_OP_REDUCE_SCATTER) memmove(recv, result, (size_t)counts[0] * es);
    }
    long sent, rcvd;
    zn_comm_ring_bytes(op, me, world, counts, count, root, dt, &sent, &rcvd);
    zn_comm_count(c, op, tag, sent, rcvd);
    return 0;
}

static int tcp_all_reduce(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    return collective(c, ZN_OP_ALL_REDUCE, buf, buf, count, NULL, dt, op, 0, tag, err);
}

static int tcp_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp op,
                              const char *tag, ZnErr *err) {
    return collective(c, ZN_OP_REDUCE_SCATTER, send, recv, 0, counts, dt, op, 0, tag, err);
}

static int tcp_all_gather(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, const char *tag,
                          ZnErr *err) {
    return collective(c, ZN_OP_ALL_GATHER, send, recv, 0, counts, dt, ZN_SUM, 0, tag, err);
}

static int tcp_broadcast(ZnComm *c, void *buf, long count, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    if (root < 0 || root >= c->world)
        return zn_err(err, ZN_E_INTERNAL, "broadcast '%s': root %d outside 0..%d", tag ? tag : "", root, c->world - 1);
    return collective(c, ZN_OP_BROADCAST, buf, buf, count, NULL, dt, ZN_SUM, root, tag, err);
}

static int tcp_barrier(ZnComm *c, const char *tag, ZnErr *err) {
    return collective(c, ZN_OP_BARRIER, NULL, NULL, 0, NULL, ZN_U8, ZN_SUM, 0, tag, err);
}

ZnComm *zn_comm_tcp_new(ZnStore *s, ZnErr *err) {
    ZnComm *c = calloc(1, sizeof *c);
    TcpComm *t = calloc(1, sizeof *t);
    if (!c || !t) {
        free(c);
        free(t);
        zn_nomem(err);
        return NULL;
    }
    t->store = s;
    c->impl = t;
    c->rank = zn_store_rank(s);
    c->world = zn_store_world(s);
    c->all_reduce = tcp_all_reduce;
    c->reduce_scatter = tcp_reduce_scatter;
    c->all_gather = tcp_all_gather;
    c->broadcast = tcp_broadcast;
    c->barrier = tcp_barrier;
    return c;
}

void zn_comm_tcp_free(ZnComm *c) {
    if (!c) return;
    TcpComm *t = c->impl;
    if (t) free(t->scratch);
    free(t);
    free(c);
}
