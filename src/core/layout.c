/* layout.c: the partitioning core (spec Z-LAY-*). Every offset zinc uses is
 * computed here from the parameter sizes, the world size W and the stage:
 *   stage 0    one flat buffer, no padding, every rank owns everything;
 *   stage 1/2  one flat buffer padded to a multiple of 2W, cut into W equal
 *              contiguous partitions (stage_1_and_2.py);
 *   stage 3    every param cut on its own into W chunks of ceil(N/W)
 *              (partition_parameters.py), chunks grouped into sub-groups;
 * plus the gradient bucket plans for all stages. Pure: no I/O, no globals. */
#include "core/layout.h"
#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

/* DeepSpeed defaults used when opts is NULL (runtime/zero/config.py). */
#define DEF_REDUCE_BUCKET_SIZE 500000000L
#define DEF_SUB_GROUP_SIZE 1000000000L

static long ceil_div(long a, long b) { return (a + b - 1) / b; }
static long lmin(long a, long b) { return a < b ? a : b; }
static long lmax(long a, long b) { return a > b ? a : b; }

/* ---------------------------------------------------------------- checks */

static int check_args(const ZnParamSpec *params, int nparams, int world, const ZnPlan *P,
                      const ZnLayoutOpts *o, ZnErr *err) {
    if (nparams < 0) return zn_err(err, ZN_E_USAGE, "layout: nparams %d < 0", nparams);
    if (nparams > 0 && !params)
        return zn_err(err, ZN_E_USAGE, "layout: %d params but no parameter list", nparams);
    if (world < 1) return zn_err(err, ZN_E_USAGE, "layout: world size %d < 1", world);
    if (!P) return zn_err(err, ZN_E_USAGE, "layout: no plan");
    if (o->reduce_bucket_size <= 0)
        return zn_err(err, ZN_E_USAGE, "layout: reduce_bucket_size %ld must be > 0",
                      o->reduce_bucket_size);
    for (int p = 0; p < nparams; p++)
        if (params[p].numel < 0)
            return zn_err(err, ZN_E_USAGE, "layout: param %d '%.*s' has negative numel %ld", p,
                          ZN_MAX_NAME, params[p].name, params[p].numel);
    return 0;
}

/* ------------------------------------------------------- flat buffer 0/1/2 */

/* Flat order. Stage 1/2 with round_robin_gradients mirrors
 * DeepSpeedZeroOptimizer._round_robin_reorder: param k goes to bucket k mod W
 * and the new order is bucket 0's params, then bucket 1's, ... (Z-LAY-003).
 * Otherwise model order. */
static void build_flat_order(ZnLayout *L, int round_robin) {
    int k = 0;
    if (round_robin && (L->shard == ZN_SHARD_FLAT)) {
        for (int b = 0; b < L->world; b++)
            for (int p = b; p < L->nparams; p += L->world) L->flat_order[k++] = p;
    } else {
        for (int p = 0; p < L->nparams; p++) L->flat_order[k++] = p;
    }
}

/* flat_offset by prefix sums in flat order; aligned size and partition size.
 * Stage 1/2: align_dense_tensors pads to nccl_start_alignment_factor(2) * W and
 * get_data_parallel_partitions cuts W equal parts (Z-LAY-004, Z-LAY-005). */
static void build_flat_offsets(ZnLayout *L) {
    long off = 0;
    for (int k = 0; k < L->nparams; k++) {
        int p = L->flat_order[k];
        L->flat_offset[p] = off;
        off += L->params[p].numel;
    }
    if (L->shard == ZN_SHARD_FLAT) {
        long align = 2L * L->world;
        L->aligned_numel = ceil_div(L->total_numel, align) * align;
        L->part_numel = L->aligned_numel / L->world;
    } else if (L->shard == ZN_SHARD_NONE) {
        L->aligned_numel = L->total_numel;   /* Z-LAY-002: no padding */
        L->part_numel = L->total_numel;
    }
}

/* ------------------------------------------------------------ stage 3 */

/* Init._partition_param: pn = ceil(N/W) per param; s3_off = prefix sums of pn
 * in model order (Z-LAY-009). */
static void build_s3_partitions(ZnLayout *L) {
    long off = 0;
    for (int p = 0; p < L->nparams; p++) {
        L->s3_pn[p] = ceil_div(L->params[p].numel, L->world);
        L->s3_off[p] = off;
        off += L->s3_pn[p];
    }
    L->s3_rank_numel = off;
    L->part_numel = off;                 /* Z-LAY-010: same meaning as stage 1/2 */
    L->aligned_numel = off * L->world;
}

/* DeepSpeedZeroOptimizer_Stage3._create_fp16_sub_groups: one sub-group if the
 * whole Σpn fits; else walk params in model order, closing the current
 * sub-group once its Σpn reaches >= sub_group_size (and at the last param).
 * sub_group_size 0 (DeepSpeed accepts it): every param closes its own
 * sub-group; below 0: unlimited, zinc's own sentinel (Z-LAY-011). */
static int build_subgroups(ZnLayout *L, long sub_group_size) {
    L->subgroup_first = zn_calloc(ZN_HOST_CORE, (size_t)L->nparams + 2, sizeof(int));
    if (!L->subgroup_first) return ZN_E_NOMEM;
    L->nsubgroups = 0;
    if (L->nparams == 0) return 0;      /* no params: no sub-group; first = {0} */
    if (sub_group_size < 0 || L->s3_rank_numel <= sub_group_size) {
        L->subgroup_first[1] = L->nparams;
        L->nsubgroups = 1;
        return 0;
    }
    long run = 0;
    for (int p = 0; p < L->nparams; p++) {
        run += L->s3_pn[p];
        if (run >= sub_group_size || p == L->nparams - 1) {
            L->subgroup_first[++L->nsubgroups] = p + 1;
            run = 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ buckets */

/* Bucket assignment in backward order (params nparams-1 down to 0), the add
 * rule of reduce_independent_p_g_buckets_and_remove_grads (stage_1_and_2.py
 * and stage3.py): skip numel 0; close a non-empty bucket that would exceed
 * reduce_bucket_size; a param larger than the limit is a bucket of its own
 * (Z-LAY-013, Z-LAY-014). bid[p] = bucket of p or -1. Returns the number
 * of buckets. */
static int assign_buckets(const ZnLayout *L, long limit, int *bid) {
    int nb = 0, nopen = 0;
    long elems = 0;
    for (int p = L->nparams - 1; p >= 0; p--) {
        long n = L->params[p].numel;
        bid[p] = -1;
        if (n == 0) continue;
        if (nopen && elems + n > limit) { nb++; nopen = 0; elems = 0; }
        bid[p] = nb;
        if (n > limit) { nb++; continue; }   /* oversized: alone, closed at once */
        nopen++;
        elems += n;
    }
    return nb + (nopen ? 1 : 0);
}

/* The param whose entry carries the flat padding: the last param of nonzero
 * numel in flat order, whose range ends where the padding starts (Z-LAY-015). */
static int padding_carrier(const ZnLayout *L) {
    for (int k = L->nparams - 1; k >= 0; k--)
        if (L->params[L->flat_order[k]].numel > 0) return L->flat_order[k];
    return -1;
}

/* Stage 0-2: buf_off in flat order within each bucket (walk the flat order
 * once, each bucket keeps a cursor), flat range (Z-LAY-016), reduce-scatter
 * counts (Z-LAY-017). */
static void finish_flat_buckets(ZnLayout *L, const int *bid, const int *eidx, long *cursor) {
    for (int k = 0; k < L->nparams; k++) {
        int p = L->flat_order[k];
        if (bid[p] < 0) continue;
        ZnBucketEntry *e = &L->buckets[bid[p]].e[eidx[p]];
        e->buf_off = cursor[bid[p]];
        cursor[bid[p]] += e->numel;
    }
    for (int b = 0; b < L->nbuckets; b++) {
        ZnBucket *B = &L->buckets[b];
        long lo = -1, hi = -1;
        for (int i = 0; i < B->nentries; i++) {
            long fo = L->flat_offset[B->e[i].param];
            lo = (lo < 0) ? fo : lmin(lo, fo);
            hi = lmax(hi, fo + B->e[i].numel);
        }
        /* entries are disjoint flat ranges: contiguous iff they fill [lo, hi) */
        B->flat_lo = (hi - lo == B->numel) ? lo : -1;
        B->flat_hi = (hi - lo == B->numel) ? hi : -1;
        if (!B->counts) continue;            /* stage 0: no reduce-scatter */
        long S = L->part_numel;
        for (int i = 0; i < B->nentries; i++) {
            long fo = L->flat_offset[B->e[i].param], end = fo + B->e[i].numel;
            for (long r = fo / S; r < L->world && r * S < end; r++)
                B->counts[r] += lmin(end, (r + 1) * S) - lmax(fo, r * S);
        }
    }
}

/* Stage 3 (__reduce_and_partition_ipg_grads): each entry is padded to pn*W
 * and cut into W chunks; the bucket buffer is rank-major, rank r's block
 * holds chunk r of every entry in add order (Z-LAY-019). */
static void finish_s3_buckets(ZnLayout *L) {
    for (int b = 0; b < L->nbuckets; b++) {
        ZnBucket *B = &L->buckets[b];
        long block = 0;
        for (int i = 0; i < B->nentries; i++) {
            B->e[i].buf_off = block;
            block += L->s3_pn[B->e[i].param];
        }
        B->block = block;
        B->flat_lo = B->flat_hi = -1;
        for (int r = 0; r < L->world; r++) B->counts[r] = block;
    }
}

static int build_buckets(ZnLayout *L, long limit) {
    int n = L->nparams, rc = ZN_E_NOMEM;
    int *bid = zn_malloc(ZN_HOST_CORE, sizeof(int) * (size_t)(n + 1));
    int *eidx = zn_malloc(ZN_HOST_CORE, sizeof(int) * (size_t)(n + 1));
    long *cursor = zn_calloc(ZN_HOST_CORE, (size_t)n + 1, sizeof(long));
    if (!bid || !eidx || !cursor) goto out;
    L->nbuckets = assign_buckets(L, limit, bid);
    L->buckets = zn_calloc(ZN_HOST_CORE, (size_t)L->nbuckets + 1, sizeof(ZnBucket));
    if (!L->buckets) goto out;
    for (int p = 0; p < n; p++)
        if (bid[p] >= 0) L->buckets[bid[p]].nentries++;
    for (int b = 0; b < L->nbuckets; b++) {
        ZnBucket *B = &L->buckets[b];
        B->e = zn_calloc(ZN_HOST_CORE, (size_t)B->nentries, sizeof(ZnBucketEntry));
        if (!B->e) goto out;
        if (L->shard != ZN_SHARD_NONE) {
            B->counts = zn_calloc(ZN_HOST_CORE, (size_t)L->world, sizeof(long));
            if (!B->counts) goto out;
        }
        B->nentries = 0;                     /* refilled below */
    }
    int carrier = (L->shard == ZN_SHARD_FLAT) ? padding_carrier(L) : -1;
    for (int p = n - 1; p >= 0; p--) {       /* backward order = add order */
        if (bid[p] < 0) continue;
        ZnBucket *B = &L->buckets[bid[p]];
        ZnBucketEntry *e = &B->e[B->nentries];
        eidx[p] = B->nentries++;
        e->param = p;
        if (L->shard == ZN_SHARD_PARAM) {
            e->numel = L->s3_pn[p] * L->world;
        } else {
            e->numel = L->params[p].numel;
            if (p == carrier) e->numel += L->aligned_numel - L->total_numel;
        }
        B->numel += e->numel;
        B->oversized = L->params[p].numel > limit;   /* only ever alone */
    }
    if (L->shard == ZN_SHARD_PARAM) finish_s3_buckets(L);
    else finish_flat_buckets(L, bid, eidx, cursor);
    rc = 0;
out:
    free(bid);
    free(eidx);
    free(cursor);
    return rc;
}

/* ------------------------------------------------------------ public */

int zn_layout_build(ZnLayout *L, const ZnParamSpec *params, int nparams, int world,
                    const ZnPlan *P, const ZnLayoutOpts *opts, ZnErr *err) {
    ZnLayoutOpts defaults = {0, DEF_SUB_GROUP_SIZE, DEF_REDUCE_BUCKET_SIZE};
    const ZnLayoutOpts *o = opts ? opts : &defaults;
    memset(L, 0, sizeof *L);
    int rc = check_args(params, nparams, world, P, o, err);
    if (rc) return rc;
    L->nparams = nparams;
    L->world = world;
    L->shard = P->shard;
    size_t n = (size_t)nparams + 1;          /* +1: no zero-size allocations */
    L->params = zn_calloc(ZN_HOST_CORE, n, sizeof(ZnParamSpec));
    L->flat_order = zn_calloc(ZN_HOST_CORE, n, sizeof(int));
    L->flat_offset = zn_calloc(ZN_HOST_CORE, n, sizeof(long));
    L->model_offset = zn_calloc(ZN_HOST_CORE, n, sizeof(long));
    if (!L->params || !L->flat_order || !L->flat_offset || !L->model_offset) goto nomem;
    if (nparams > 0) memcpy(L->params, params, sizeof(ZnParamSpec) * (size_t)nparams);
    for (int p = 0; p < nparams; p++) {
        L->model_offset[p] = L->total_numel;
        L->total_numel += params[p].numel;
    }
    build_flat_order(L, o->round_robin_gradients);
    build_flat_offsets(L);
    if (L->shard == ZN_SHARD_PARAM) {
        L->s3_pn = zn_calloc(ZN_HOST_CORE, n, sizeof(long));
        L->s3_off = zn_calloc(ZN_HOST_CORE, n, sizeof(long));
        if (!L->s3_pn || !L->s3_off) goto nomem;
        build_s3_partitions(L);
        if (build_subgroups(L, o->sub_group_size)) goto nomem;
    }
    if (build_buckets(L, o->reduce_bucket_size)) goto nomem;
    return 0;
nomem:
    zn_layout_free(L);
    return zn_err(err, ZN_E_NOMEM, "layout: out of memory (%d params, world %d)", nparams,
                  world);
}

void zn_layout_free(ZnLayout *L) {
    if (!L) return;
    for (int b = 0; b < L->nbuckets && L->buckets; b++) {
        free(L->buckets[b].e);
        free(L->buckets[b].counts);
    }
    ZN_FREE_ALL(L->buckets, L->params, L->flat_order, L->flat_offset, L->model_offset, L->s3_pn, L->s3_off,
                L->subgroup_first);
    memset(L, 0, sizeof *L);
}

/* get_partition_info / groups_padding (stage 1/2, Z-LAY-006); stage 3: the
 * per-param padding rank r holds, Σ(pn - owned) (Z-LAY-010). */
long zn_layout_rank_padding(const ZnLayout *L, int rank) {
    if (rank < 0 || rank >= L->world || L->shard == ZN_SHARD_NONE) return 0;
    if (L->shard == ZN_SHARD_PARAM) {
        long pad = 0, lo, hi, off;
        for (int p = 0; p < L->nparams; p++) {
            zn_layout_owned(L, p, rank, &lo, &hi, &off);
            pad += L->s3_pn[p] - (hi - lo);
        }
        return pad;
    }
    long S = L->part_numel, start = (long)rank * S, N = L->total_numel;
    if (N <= start) return S;
    if (N < start + S) return start + S - N;
    return 0;
}

void zn_layout_owned(const ZnLayout *L, int p, int r, long *lo, long *hi, long *part_off) {
    *lo = *hi = *part_off = 0;
    if (p < 0 || p >= L->nparams || r < 0 || r >= L->world) return;
    long N = L->params[p].numel;
    if (L->shard == ZN_SHARD_NONE) {                     /* Z-LAY-002: replicated */
        *hi = N;
        *part_off = L->flat_offset[p];
    } else if (L->shard == ZN_SHARD_PARAM) {              /* Z-LAY-009: chunk r of the param */
        long pn = L->s3_pn[p];
        *lo = lmin(N, r * pn);
        *hi = lmin(N, r * pn + pn);
        *part_off = L->s3_off[p];            /* = s3_off + (lo - r*pn) when non-empty */
    } else {                                 /* Z-LAY-007: flat range ∩ rank range */
        long S = L->part_numel, fo = L->flat_offset[p];
        long a = lmax(fo, r * S), b = lmin(fo + N, (r + 1) * S);
        if (a >= b) return;
        *lo = a - fo;
        *hi = b - fo;
        *part_off = a - r * S;
    }
}

/* Appends piece pc, merging it into the previous one (*last) when both are
 * contiguous (DeepSpeed merges adjacent same-owner slices). The count does
 * not depend on cap. */
static void push_piece(ZnRecvPiece *out, int cap, int *k, ZnRecvPiece *last, ZnRecvPiece pc) {
    if (*k > 0 && last->part_off + last->n == pc.part_off &&
        last->recv_off + last->n == pc.recv_off) {
        last->n += pc.n;
        if (*k - 1 < cap) out[*k - 1] = *last;
        return;
    }
    *last = pc;
    if (*k < cap) out[*k] = pc;
    (*k)++;
}

/* Entry of bucket B whose buffer range starts at pos (buffer = flat order). */
static const ZnBucketEntry *entry_at(const ZnBucket *B, long pos) {
    for (int i = 0; i < B->nentries; i++)
        if (B->e[i].buf_off == pos && B->e[i].numel > 0) return &B->e[i];
    return NULL;
}

/* Z-LAY-018: rank r's received slice is the bucket buffer (flat order)
 * restricted to r's partition; each piece says where it goes. */
int zn_layout_recv_pieces(const ZnLayout *L, int b, int r, ZnRecvPiece *out, int cap) {
    if (L->shard != ZN_SHARD_FLAT || b < 0 || b >= L->nbuckets || r < 0 ||
        r >= L->world)
        return 0;
    const ZnBucket *B = &L->buckets[b];
    long S = L->part_numel, rlo = r * S, rhi = rlo + S, recv = 0;
    int k = 0;
    ZnRecvPiece last = {0, 0, 0};
    if (B->flat_lo >= 0) {                   /* contiguous bucket: one piece at most */
        long a = lmax(B->flat_lo, rlo), c = lmin(B->flat_hi, rhi);
        if (a < c) push_piece(out, cap, &k, &last, (ZnRecvPiece){0, a - rlo, c - a});
        return k;
    }
    for (long pos = 0; pos < B->numel;) {    /* walk the buffer in flat order */
        const ZnBucketEntry *e = entry_at(B, pos);
        if (!e) break;                       /* cannot happen: buf_off tiles the buffer */
        long fo = L->flat_offset[e->param];
        long a = lmax(fo, rlo), c = lmin(fo + e->numel, rhi);
        if (a < c) {
            push_piece(out, cap, &k, &last, (ZnRecvPiece){recv, a - rlo, c - a});
            recv += c - a;
        }
        pos += e->numel;
    }
    return k;
}

long zn_layout_max_param_numel(const ZnLayout *L) {
    long m = 0;
    for (int p = 0; p < L->nparams; p++) m = lmax(m, L->params[p].numel);
    return m;
}

long zn_layout_master_numel(const ZnLayout *L, const ZnPlan *P) {
    if (P->optim == ZN_HOLD_FULL) return L->aligned_numel;
    return P->shard == ZN_SHARD_FLAT ? L->part_numel : L->s3_rank_numel;
}

int zn_layout_owner(const ZnLayout *L, int p, long j) {
    if (L->shard == ZN_SHARD_NONE) return 0;
    if (L->shard == ZN_SHARD_FLAT) return (int)((L->flat_offset[p] + j) / L->part_numel);
    return L->s3_pn[p] > 0 ? (int)(j / L->s3_pn[p]) : 0;
}
