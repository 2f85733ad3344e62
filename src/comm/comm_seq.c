/* comm_seq.c: collective-sequence records (spec Z-SEQ-001..003). */
#include "comm/comm_seq.h"
#include "core/hash.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *zn_coll_op_name(ZnCollOp op) {
    static const char *n[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier", "all_to_all"};
    return (unsigned)op < ZN_OP_N ? n[op] : "?";
}

void zn_seq_fill(ZnSeqRec *r, long call, ZnCollOp op, ZnDtype dt, ZnRedOp red, int root, long count,
                 const long *counts, int world, const char *tag) {
    memset(r, 0, sizeof *r);
    r->magic = ZN_SEQ_MAGIC;
    r->call = call;
    r->op = (int32_t)op;
    r->dt = (int32_t)dt;
    r->red = (int32_t)red;
    r->root = root;
    r->count = count;
    uint64_t h = ZN_FNV_INIT;
    for (int q = 0; counts && q < world; q++) {
        /* the little-endian bytes of each count, whatever the host order */
        unsigned char le[8];
        for (int b = 0; b < 8; b++) le[b] = (unsigned char)((uint64_t)counts[q] >> (8 * b));
        h = zn_fnv1a64(h, le, 8);
        if (q < 8) r->counts[q] = counts[q];
    }
    r->ncounts = counts ? world : 0;
    r->counts_hash = h;
    snprintf(r->tag, sizeof r->tag, "%s", tag ? tag : "");
}

static int has_counts(int op) { return op == ZN_OP_REDUCE_SCATTER || op == ZN_OP_ALL_GATHER; }

/* Whether two records describe different collectives; *by_counts is 1
 * when only the counts arrays tell them apart, 2 when the groups do. */
static int differ(const ZnSeqRec *a, const ZnSeqRec *b, int *by_counts) {
    *by_counts = 0;
    if (a->op != b->op || strncmp(a->tag, b->tag, sizeof a->tag)) return 1;
    if (a->gsize != b->gsize || a->gstride != b->gstride) return *by_counts = 2;
    if (a->op == ZN_OP_BARRIER) return 0;
    if (a->dt != b->dt || a->count != b->count) return 1;
    if ((a->op == ZN_OP_ALL_REDUCE || a->op == ZN_OP_REDUCE_SCATTER) && a->red != b->red) return 1;
    if (a->op == ZN_OP_BROADCAST && a->root != b->root) return 1;
    if (has_counts(a->op) && a->counts_hash != b->counts_hash) return *by_counts = 1;
    return 0;
}

static void format(char *s, size_t cap, int rank, const ZnSeqRec *r, int show_counts) {
    int k = snprintf(s, cap, "rank %d %s", rank, zn_coll_op_name((ZnCollOp)r->op));
    if (r->op != ZN_OP_BARRIER && k < (int)cap)
        k += snprintf(s + k, cap - (size_t)k, "%s %s n=%lld", r->red == ZN_MAX ? "(max)" : "",
                      zn_dtype_name((ZnDtype)r->dt), (long long)r->count);
    if (r->op == ZN_OP_BROADCAST && k < (int)cap) k += snprintf(s + k, cap - (size_t)k, " root=%d", r->root);
    if (show_counts == 2 && k < (int)cap)   /* only the groups differ */
        k += snprintf(s + k, cap - (size_t)k, " group=%d stride=%d", r->gsize, r->gstride);
    if (show_counts == 1) {
        for (int q = 0; q < r->ncounts && q < 8 && k < (int)cap; q++)
            k += snprintf(s + k, cap - (size_t)k, "%s%lld", q ? "," : " counts=[", (long long)r->counts[q]);
        if (k < (int)cap) k += snprintf(s + k, cap - (size_t)k, "%s]", r->ncounts > 8 ? ",..." : "");
    }
    if (k < (int)cap) snprintf(s + k, cap - (size_t)k, " '%.*s'", (int)sizeof r->tag, r->tag);
}

int zn_seq_compare(const ZnSeqRec *a, int rank_a, const ZnSeqRec *b, int rank_b, ZnErr *err) {
    int by_counts;
    if (b->magic != ZN_SEQ_MAGIC)
        return zn_err(err, ZN_E_COMM, "collective at call #%lld: rank %d sent a malformed record", (long long)a->call,
                      rank_b);
    if (!differ(a, b, &by_counts)) return 0;
    char x[256], y[256];
    format(x, sizeof x, rank_a, a, by_counts);
    format(y, sizeof y, rank_b, b, by_counts);
    return zn_err(err, ZN_E_COMM, "collective mismatch at call #%lld: %s vs %s", (long long)a->call, x, y);
}

int zn_seq_check_all(const ZnSeqRec *recs, int world, ZnErr *err) {
    for (int q = 1; q < world; q++) {
        int rc = zn_seq_compare(&recs[0], 0, &recs[q], q, err);
        if (rc) return rc;
    }
    return 0;
}
