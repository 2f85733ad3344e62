/* comm_meta.c: the meta communicator of comm_meta.h (spec Z-DRY-002):
 * coll.c's entry points, argument checks and ring byte counts, with a run
 * that moves nothing and logs the call. Its buffers are tokens, 64-byte
 * heap blocks that stand for buffers of any size, so two of them can
 * "overlap" as address ranges without being one buffer: the communicator
 * is counts_only, and the checks look at counts, not addresses. */
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

/* The call, checked and counted by coll.c's call(): into the log. */
static int m_run(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    (void)err;
    if (!c->impl) return 0;
    long sent, recv, inter;
    zn_comm_call_bytes(&c->world, k->grp, k->op, k->counts, k->count, k->root, k->dt, &sent, &recv, &inter);
    log_call(c, k->grp, k->op, k->counts, k->count, k->root, k->dt, k->tag, sent, inter);
    return 0;
}

void zn_comm_meta_init(ZnComm *c, int world, int rank, int per_node) {
    memset(c, 0, sizeof *c);
    zn_coll_init(c, rank, world, NULL, m_run);
    c->world = zn_world(world, rank, per_node);
    c->counts_only = 1;
}
