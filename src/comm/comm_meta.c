/* comm_meta.c: the meta communicator of comm_meta.h (spec Z-DRY-002).
 *
 * Why not zn_coll_init with a run function that does nothing: the checks
 * of coll.c compare buffer addresses (send and recv may overlap only in
 * place), and a meta token is a 64-byte heap block standing for a buffer of
 * any size, so two tokens can "overlap" as address ranges without being
 * the same buffer. Here the counts are checked as coll.c checks them and
 * the bytes counted by the same two functions; addresses are not looked at. */
#include "comm/comm_meta.h"
#include "comm/coll.h"
#include "comm/comm_seq.h"
#include <stdio.h>
#include <string.h>

static const char *tag_str(const char *tag) { return tag ? tag : ""; }

void zn_comm_meta_log(ZnComm *c, ZnMetaLog *log) { c->impl = log; }

/* One call into the log: node 0's bytes are what each of its ranks would
 * send, and send to other nodes, in the same call (the counts are every
 * rank's) */
static void log_call(ZnComm *c, ZnGroup g, ZnCollOp op, const long *counts, long n, int root, ZnDtype dt,
                     const char *tag, long sent, long inter) {
    ZnMetaLog *log = c->impl;
    ZnGroup rg = zn_group_resolve(&c->world, g);
    double node = 0.0, node_sent = 0.0;
    const int P = c->world.per_node;
    if (P < c->world.size)   /* one node: nothing leaves it */
        for (int l = 0; l < P; l++) {
            ZnWorld w = zn_world(c->world.size, l, P);
            long s, r, x;
            zn_comm_call_bytes(&w, zn_group_resolve(&w, g), op, counts, n, root, dt, &s, &r, &x);
            node += (double)x;
            node_sent += (double)s;
        }
    int k = 0;
    while (k < log->n && !(log->cls[k].op == op && log->cls[k].phase == log->phase &&
                           log->cls[k].grp.size == rg.size && log->cls[k].grp.stride == rg.stride &&
                           !strncmp(log->cls[k].tag, tag_str(tag), ZN_COMM_TAG_LEN - 1)))
        k++;
    if (k == ZN_META_MAX_CLASSES) {
        log->dropped++;
        return;
    }
    ZnMetaClass *m = &log->cls[k];
    if (k == log->n) {
        memset(m, 0, sizeof *m);
        m->op = op;
        snprintf(m->tag, sizeof m->tag, "%s", tag_str(tag));
        m->phase = log->phase;
        m->grp = rg;
        log->n++;
    }
    m->calls++;
    m->sent += (double)sent;
    m->inter += (double)inter;
    m->node_sent += node_sent;
    m->node_inter += node;
}

void zn_meta_link_bytes(const ZnMetaClass *c, int per_node, int size, double *intra, double *inter) {
    if (per_node >= size) {   /* one node: nothing was summed over a node (log_call) */
        *intra = c->sent - c->inter;
        *inter = c->inter;
        return;
    }
    *intra = (c->node_sent - c->node_inter) / per_node;
    *inter = c->node_inter / per_node;
}

/* The ring bytes of one call, counted as coll.c's call() does, with the
 * watch told before and after (the tracer and the CPU meter see the call). */
static int count_in(ZnComm *c, ZnGroup g, ZnCollOp op, const long *counts, long n, int root, ZnDtype dt,
                    const char *tag) {
    if (c->watch) c->watch->begin(c->watch, c);
    long sent, recv, inter;
    zn_comm_call_bytes(&c->world, zn_group_resolve(&c->world, g), op, counts, n, root, dt, &sent, &recv, &inter);
    zn_comm_count(c, op, tag, sent, recv, inter);
    if (c->impl) log_call(c, g, op, counts, n, root, dt, tag, sent, inter);
    if (c->watch) c->watch->end(c->watch, c, op, tag);
    return 0;
}

static int count(ZnComm *c, ZnCollOp op, const long *counts, long n, int root, ZnDtype dt, const char *tag) {
    return count_in(c, zn_group(0, 0), op, counts, n, root, dt, tag);
}

/* A dry run fails where a real run would fail its argument check. */
static int check_n(const char *what, const char *tag, long n, ZnErr *err) {
    if (n < 0) return zn_err(err, ZN_E_USAGE, "%s '%s': negative count %ld", what, tag_str(tag), n);
    return 0;
}
static int check_counts_n(int n, const char *what, const char *tag, const long *counts, ZnErr *err) {
    if (!counts) return zn_err(err, ZN_E_USAGE, "%s '%s': counts is NULL", what, tag_str(tag));
    for (int q = 0; q < n; q++)
        if (counts[q] < 0)
            return zn_err(err, ZN_E_USAGE, "%s '%s': counts[%d] = %ld is negative", what, tag_str(tag), q, counts[q]);
    return 0;
}

static int check_counts(const ZnComm *c, const char *what, const char *tag, const long *counts, ZnErr *err) {
    return check_counts_n(c->world.size, what, tag, counts, err);
}

static int m_all_reduce(ZnComm *c, void *buf, long n, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    (void)buf, (void)op;
    int rc = check_n("all_reduce", tag, n, err);
    return rc ? rc : count(c, ZN_OP_ALL_REDUCE, NULL, n, 0, dt, tag);
}

static int m_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp op,
                            const char *tag, ZnErr *err) {
    (void)send, (void)recv, (void)op;
    int rc = check_counts(c, "reduce_scatter", tag, counts, err);
    return rc ? rc : count(c, ZN_OP_REDUCE_SCATTER, counts, 0, 0, dt, tag);
}

static int m_all_gather(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, const char *tag,
                        ZnErr *err) {
    (void)send, (void)recv;
    int rc = check_counts(c, "all_gather", tag, counts, err);
    return rc ? rc : count(c, ZN_OP_ALL_GATHER, counts, 0, 0, dt, tag);
}

static int m_broadcast(ZnComm *c, void *buf, long n, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    (void)buf;
    int rc = check_n("broadcast", tag, n, err);
    if (!rc && (root < 0 || root >= c->world.size))
        rc = zn_err(err, ZN_E_USAGE, "broadcast '%s': root %d is not a rank of a world of %d", tag_str(tag), root,
                    c->world.size);
    return rc ? rc : count(c, ZN_OP_BROADCAST, NULL, n, root, dt, tag);
}

static int m_barrier(ZnComm *c, const char *tag, ZnErr *err) {
    (void)err;
    return count(c, ZN_OP_BARRIER, NULL, 0, 0, ZN_U8, tag);
}

static int m_group(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    ZnGroup g = zn_group_resolve(&c->world, k->grp);
    int rc = zn_group_check(&c->world, g, err);
    if (rc) return rc;
    switch (k->op) {
    case ZN_OP_REDUCE_SCATTER:
    case ZN_OP_ALL_GATHER:
        rc = check_counts_n(g.size, zn_coll_op_name(k->op), k->tag, k->counts, err);
        break;
    case ZN_OP_ALL_REDUCE:
    case ZN_OP_ALL_TO_ALL:
        rc = check_n(zn_coll_op_name(k->op), k->tag, k->count, err);
        break;
    default:
        return zn_err(err, ZN_E_USAGE, "%s '%s' cannot run in a group of ranks", zn_coll_op_name(k->op),
                      tag_str(k->tag));
    }
    return rc ? rc : count_in(c, g, k->op, k->counts, k->count, 0, k->dt, k->tag);
}

/* The engine calls the entry points only; run is what coll.c's
   entry points would hand a call to, and none is ever made here. */
static int m_run(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    (void)c, (void)k;
    return zn_err(err, ZN_E_INTERNAL, "meta communicator: no data moves");
}

void zn_comm_meta_init(ZnComm *c, int world, int rank, int per_node) {
    memset(c, 0, sizeof *c);
    c->world = zn_world(world, rank, per_node);
    c->run = m_run;
    c->all_reduce = m_all_reduce;
    c->reduce_scatter = m_reduce_scatter;
    c->all_gather = m_all_gather;
    c->broadcast = m_broadcast;
    c->barrier = m_barrier;
    c->group = m_group;
}
