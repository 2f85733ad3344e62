/* comm.c: what every communicator backend shares: the byte model of a ring
 * (spec Z-SIM-004), the per-call and per-tag counters (Z-SIM-005), and the
 * fixed reduction tree over ranks (Z-SIM-002). */
#include "comm/comm.h"
#include <string.h>

/* The name a tag is counted under. NULL counts as "" so a caller that does not
 * name its purpose still shows up; tags are cut to ZN_COMM_TAG_LEN - 1 chars. */
static const char *tag_or_empty(const char *tag) { return tag ? tag : ""; }

static int tag_equal(const char *stored, const char *tag) {
    return strncmp(stored, tag, ZN_COMM_TAG_LEN - 1) == 0;
}

static int tag_find(const ZnCommStats *s, const char *tag) {
    for (int i = 0; i < s->ntags; i++)
        if (tag_equal(s->tags[i].tag, tag)) return i;
    return -1;
}

static int tag_add(ZnCommStats *s, const char *tag) {
    int i = s->ntags++;
    memset(&s->tags[i], 0, sizeof s->tags[i]);
    strncpy(s->tags[i].tag, tag, ZN_COMM_TAG_LEN - 1);
    return i;
}

/* The slot of a tag: an existing one, a new one while more than one slot is
 * free, else "other". The last slot is kept for "other" so the per-tag totals
 * always add up to the per-op totals. */
static int tag_slot(ZnCommStats *s, const char *tag) {
    int i = tag_find(s, tag);
    if (i >= 0) return i;
    if (s->ntags < ZN_COMM_MAX_TAGS - 1) return tag_add(s, tag);
    i = tag_find(s, "other");
    return i >= 0 ? i : tag_add(s, "other");
}

void zn_comm_count(ZnComm *c, ZnCollOp op, const char *tag, long bytes_sent, long bytes_recv, long inter) {
    if (!c || (unsigned)op >= ZN_OP_N) return;
    ZnCommStats *s = &c->stats;
    s->calls[op]++;
    s->bytes_sent[op] += bytes_sent;
    s->bytes_recv[op] += bytes_recv;
    s->bytes_inter[op] += inter;
    int i = tag_slot(s, tag_or_empty(tag));
    s->tags[i].calls++;
    s->tags[i].bytes_sent += bytes_sent;
    s->tags[i].bytes_recv += bytes_recv;
    s->tags[i].bytes_inter += inter;
}

/* Piece r of n elements split over world ranks: the first n % world pieces
 * get one more (the all_reduce split of comm.h). */
static long even_piece(long n, int world, int r) {
    return n / world + (r < n % world ? 1 : 0);
}

static long sum_counts(const long *counts, int world) {
    long t = 0;
    for (int i = 0; counts && i < world; i++) t += counts[i];
    return t;
}

void zn_comm_ring_bytes(ZnCollOp op, int rank, int world, const long *counts, long count,
                        int root, ZnDtype dt, long *sent, long *recv) {
    long s = 0, r = 0; /* in elements */
    if (world >= 1 && rank >= 0 && rank < world) {
        switch (op) {
        case ZN_OP_ALL_REDUCE:
            /* reduce_scatter of the even split, then all_gather of it */
            s = r = 2 * (count - even_piece(count, world, rank));
            break;
        case ZN_OP_REDUCE_SCATTER:
        case ZN_OP_ALL_GATHER:
            /* N-1 ring steps; rank r passes on every piece but its own */
            s = r = sum_counts(counts, world) - (counts ? counts[rank] : 0);
            break;
        case ZN_OP_BROADCAST:
            /* a chain root -> root+1 -> ... -> root-1: everyone but the root
               receives, everyone but the last link sends */
            r = rank == root ? 0 : count;
            s = rank == (root - 1 + world) % world ? 0 : count;
            break;
        default: /* barrier: no payload */
            break;
        }
    }
    long size = (long)zn_dtype_size(dt);
    if (sent) *sent = s * size;
    if (recv) *recv = r * size;
}

/* Node of member j of this rank's group. */
static int member_node(const ZnWorld *w, ZnGroup g, int j) { return zn_group_member(w, g, j) / w->per_node; }

void zn_comm_call_bytes(const ZnWorld *w, ZnGroup g, ZnCollOp op, const long *counts, long count, int root,
                        ZnDtype dt, long *sent, long *recv, long *inter) {
    const int me = zn_group_index(w, g), node = w->rank / w->per_node;
    long s = 0, r = 0, x = 0;
    if (op == ZN_OP_ALL_TO_ALL) {
        long es = (long)zn_dtype_size(dt);
        for (int j = 0; j < g.size; j++) {
            if (j == me) continue;
            s += count * es;
            if (member_node(w, g, j) != node) x += count * es;
        }
        r = s;
    } else {
        /* the ring's root is a world rank for broadcast; groups do not broadcast */
        zn_comm_ring_bytes(op, me, g.size, counts, count, root, dt, &s, &r);
        if (g.size > 1 && member_node(w, g, (me + 1) % g.size) != node) x = s;
    }
    if (sent) *sent = s;
    if (recv) *recv = r;
    if (inter) *inter = x;
}

long zn_comm_tag_inter(const ZnCommStats *s, const char *tag) {
    int i = s ? tag_find(s, tag_or_empty(tag)) : -1;
    return i >= 0 ? s->tags[i].bytes_inter : 0;
}

void zn_comm_tag_totals(const ZnCommStats *s, const char *tag, long *calls, long *sent, long *recv) {
    int i = s ? tag_find(s, tag_or_empty(tag)) : -1;
    if (calls) *calls = i >= 0 ? s->tags[i].calls : 0;
    if (sent) *sent = i >= 0 ? s->tags[i].bytes_sent : 0;
    if (recv) *recv = i >= 0 ? s->tags[i].bytes_recv : 0;
}

void zn_comm_stats_reset(ZnCommStats *s) {
    if (s) memset(s, 0, sizeof *s);
}

/* Largest power of two strictly below n (n >= 2): the split point of the
 * tree, so the left subtree is always a full power-of-two block. */
static int tree_split(int n) {
    int h = 1;
    while (h * 2 < n) h *= 2;
    return h;
}

float zn_tree_sum_f32(const float *x, int n) {
    if (n <= 0) return 0.0f;
    if (n == 1) return x[0];
    int h = tree_split(n);
    return zn_tree_sum_f32(x, h) + zn_tree_sum_f32(x + h, n - h);
}

double zn_tree_sum_f64(const double *x, int n) {
    if (n <= 0) return 0.0;
    if (n == 1) return x[0];
    int h = tree_split(n);
    return zn_tree_sum_f64(x, h) + zn_tree_sum_f64(x + h, n - h);
}

void zn_comm_even_counts(long n, int world, long *counts) {
    for (int q = 0; q < world; q++) counts[q] = n / world + (q < n % world ? 1 : 0);
}
