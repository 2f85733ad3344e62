/* engine.c: ZeRO stages 0-3 as one SPMD engine (spec Z-ENG-*).
 *
 * What each stage keeps on a rank (Ψ = parameter count, aligned/padded as the
 * layout says, N = world size):
 *   stage 0  full params, full grads, full Adam state; grads all-reduced at the
 *            accumulation boundary; every rank steps everything.
 *   stage 1  full params, full grads; optimizer state and master for its
 *            partition; grads reduce-scattered at the boundary; params
 *            all-gathered after the step.
 *   stage 2  full params; gradient, master and state partitions; grads
 *            reduce-scattered bucket by bucket every micro-step.
 *   stage 3  everything partitioned; params gathered before each layer's
 *            forward and backward and released after; grads reduce-scattered
 *            every micro-step.
 * Averaging: every stage divides the local gradient by N before the sum
 * (DeepSpeed's reduce-scatter path; Z-ENG-010), so that in fp32 without
 * accumulation all stages produce the same bits. */
#include "engine/engine.h"
#include "core/alloc.h"
#include "core/covmark.h"
#include "core/hash.h"
#include "core/ipg.h"
#include "engine/fetch.h"
#include "engine/zeropp.h"
#include "engine/mics.h"
#include "comm/coll.h"
#include "engine/decay.h"
#include "engine/offload.h"
#include "io/swap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* ---------------------------------------------------------------------- */
/* small helpers */

static float *falloc(ZnEngine *E, long n, ZnMemCat cat, ZnErr *err) {
    return (float *)zn_dev_alloc(E->dev, (size_t)(n > 0 ? n : 1) * sizeof(float), cat, err);
}

/* A tensor of the model dtype. The simulator keeps 16-bit tensors as fp32
 * values rounded to the 16-bit grid -- the same values a 16-bit buffer holds
 * -- and charges the device their 16-bit size (Z-PREC-001). */
static float *talloc(ZnEngine *E, long n, ZnMemCat cat, ZnErr *err) {
    size_t m = (size_t)(n > 0 ? n : 1);
    return (float *)zn_dev_alloc_as(E->dev, m * sizeof(float), m * zn_dtype_size(E->dt), cat, err);
}

/* Every buffer below is device memory: the engine moves and computes on it
 * only through the device's kernels (Z-DEV-001). These wrappers name the
 * few operations the engine repeats. */

/* Rounds to the grid of the model dtype (round to nearest even); fp32:
 * nothing. Every value stored in a model-dtype tensor goes through here or
 * through a kernel that rounds the same way (Z-PREC-001). */
static void round_dt(ZnEngine *E, float *x, long n) {
    E->k->round_dt(E->dev, E->dt, x, n);
}

static void dcopy(ZnEngine *E, float *dst, const float *src, long n) {
    E->k->copy(E->dev, dst, src, (size_t)n * sizeof(float));
}

/* dst = src, or dst = round_dt(dst + src): the fp32 sum rounded once */
static void copy_or_add(ZnEngine *E, float *dst, const float *src, long n, int add) {
    if (add) E->k->add(E->dev, E->dt, dst, src, n);
    else if (dst != src) dcopy(E, dst, src, n);   /* computed in place (grad_dest) */
}

/* dst = round_dt(src), or dst = round_dt(dst + src): a received gradient
 * entering a partition held in the model dtype */
static void put_grad(ZnEngine *E, float *dst, const float *src, long n, int add) {
    if (E->off.gdev != E->dev) {   /* an offloaded optimizer's partition: down to the host (Z-OFF-003) */
        zn_off_put_grad(E, dst, src, n, add);
        return;
    }
    copy_or_add(E, dst, src, n, add);
    if (!add) round_dt(E, dst, n);
}

/* DeepSpeed's averaging on the reduce-scatter path: divide, then sum. In
 * canonical mode the average is one final scale instead (Z-CANON-003). */
static void predivide(ZnEngine *E, float *x, long n) {
    if (E->cfg->allreduce_sum || E->world.size == 1 || E->canonical) return;
    E->k->div(E->dev, E->dt, x, n, (float)E->world.size);
}

/* ---------------------------------------------------------------------- */
/* collectives in the communication dtype: 16-bit collectives go through a
 * staging buffer of real 16-bit values, so the simulator's reduction rounds
 * every partial sum to 16 bits and the counters count 2-byte elements */

static int stage16(ZnEngine *E, long n, ZnErr *err) {
    if (n <= E->comm16_cap) return 0;
    zn_dev_free(E->dev, E->comm16);
    E->comm16 = (uint16_t *)zn_dev_alloc(E->dev, (size_t)n * 2, ZN_MEM_BUCKETS, err);
    E->comm16_cap = E->comm16 ? n : 0;
    return E->comm16 ? 0 : err->code;
}

static long prefix_count(const long *counts, int r);
static double ms_since(double t0) { return 1e3 * (zn_now_s() - t0); }

/* The collectives of the ranks that split the states: the world's entry
 * points unless MiCS makes that a shard group (a communicator needs group
 * collectives only for MiCS and ZeRO++). */
static int part_reduce_scatter(ZnEngine *E, const void *send, void *recv, const long *counts, ZnDtype dt,
                               ZnErr *err) {
    ZnComm *c = E->comm;
    if (E->mics.shard.size == E->world.size) return c->reduce_scatter(c, send, recv, counts, dt, ZN_SUM, "grad_reduce", err);
    return zn_group_reduce_scatter(c, E->mics.shard, send, recv, counts, dt, ZN_SUM, "grad_reduce", err);
}

static int part_all_gather(ZnEngine *E, const void *send, void *recv, const long *counts, ZnDtype dt,
                           const char *tag, ZnErr *err) {
    ZnComm *c = E->comm;
    if (E->mics.shard.size == E->world.size) return c->all_gather(c, send, recv, counts, dt, tag, err);
    return zn_group_all_gather(c, E->mics.shard, send, recv, counts, dt, tag, err);
}

/* Reduce-scatter over the ranks that split the states; with MiCS the
 * reduced piece is then all-reduced across the replicas (Z-MICS-003). */
static int rs_dt(ZnEngine *E, float *buf, float *recv, const long *counts, ZnErr *err) {
    ZnComm *c = E->comm;
    const long mine = counts[E->pw.rank];
    int rc;
    if (E->cdt == ZN_F32) {
        rc = part_reduce_scatter(E, buf, recv, counts, ZN_F32, err);
        if (!rc && E->mics.repl.size > 1) rc = zn_group_all_reduce(c, E->mics.repl, recv, mine, ZN_F32, ZN_SUM, "grad_reduce", err);
        return rc;
    }
    long n = prefix_count(counts, E->pw.size), off = prefix_count(counts, E->pw.rank);
    if ((rc = stage16(E, n, err))) return rc;
    E->k->pack16(E->dev, E->cdt, E->comm16, buf, n);
    rc = part_reduce_scatter(E, E->comm16, E->comm16 + off, counts, E->cdt, err);
    if (!rc && E->mics.repl.size > 1)
        rc = zn_group_all_reduce(c, E->mics.repl, E->comm16 + off, mine, E->cdt, ZN_SUM, "grad_reduce", err);
    if (!rc) E->k->unpack16(E->dev, E->cdt, recv, E->comm16 + off, mine);
    return rc;
}

static int ar_dt(ZnEngine *E, float *buf, long n, ZnErr *err) {
    ZnComm *c = E->comm;
    if (E->cdt == ZN_F32) return c->all_reduce(c, buf, n, ZN_F32, ZN_SUM, "grad_reduce", err);
    int rc = stage16(E, n, err);
    if (rc) return rc;
    E->k->pack16(E->dev, E->cdt, E->comm16, buf, n);
    rc = c->all_reduce(c, E->comm16, n, E->cdt, ZN_SUM, "grad_reduce", err);
    if (!rc) E->k->unpack16(E->dev, E->cdt, buf, E->comm16, n);
    return rc;
}

/* all-gather of model-dtype values (parameters): 2 bytes each in 16-bit */
static int ag_dt(ZnEngine *E, const float *send, float *recv, const long *counts, ZnErr *err) {
    if (E->P.mics_hier) return zn_mics_hier_gather(E, send, recv, counts[0], err);
    if (E->dt == ZN_F32) return part_all_gather(E, send, recv, counts, ZN_F32, "param_gather", err);
    long n = prefix_count(counts, E->pw.size), off = prefix_count(counts, E->pw.rank);
    int rc = stage16(E, n, err);
    if (rc) return rc;
    E->k->pack16(E->dev, E->dt, E->comm16 + off, send, counts[E->pw.rank]);
    rc = part_all_gather(E, E->comm16 + off, E->comm16, counts, E->dt, "param_gather", err);
    if (!rc) E->k->unpack16(E->dev, E->dt, recv, E->comm16, n);
    return rc;
}

static long prefix_count(const long *counts, int r) {
    long s = 0;
    for (int i = 0; i < r; i++) s += counts[i];
    return s;
}

/* Collectives on host values: the communicator takes device buffers (a
 * NCCL communicator would get these very pointers), so the values go up to
 * the engine's small device scratch, through the collective, and back. */
static int all_reduce_host_f32(ZnEngine *E, float *x, ZnRedOp op, const char *tag, ZnErr *err) {
    E->k->upload(E->dev, E->scratch, x, sizeof *x);
    int rc = E->comm->all_reduce(E->comm, E->scratch, 1, ZN_F32, op, tag, err);
    if (!rc) E->k->download(E->dev, x, E->scratch, sizeof *x);
    return rc;
}

/* The counts array of a collective whose every rank holds n elements: the
   engine's own (sized at init), so a step allocates nothing. */
static long *even_counts(ZnEngine *E, long n) {
    for (int r = 0; r < E->pw.size; r++) E->counts[r] = n;
    return E->counts;
}

int zn_engine_all_gather_host(ZnEngine *E, const void *send, void *recv, long count, ZnDtype dt,
                              const char *tag, ZnErr *err) {
    const size_t es = zn_dtype_size(dt), mine = (size_t)count * es;
    if (count < 0 || mine * (size_t)E->world.size > E->scratch_bytes)
        return zn_err(err, ZN_E_INTERNAL, "%s: %ld elements per rank do not fit the %zu-byte collective scratch",
                      tag, count, E->scratch_bytes);
    long *counts = E->counts;   /* the whole world: every rank's piece */
    for (int r = 0; r < E->world.size; r++) counts[r] = count;
    /* this rank's piece in its slot: the in-place form of all_gather */
    char *slot = (char *)E->scratch + (size_t)E->world.rank * mine;
    E->k->upload(E->dev, slot, send, mine);
    int rc = E->comm->all_gather(E->comm, slot, E->scratch, counts, dt, tag, err);
    if (!rc) E->k->download(E->dev, recv, E->scratch, mine * (size_t)E->world.size);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* stage 3: gather and release */

/* The parameter gathers' bytes, counted into the phase they ran in (the
 * comm report's forward / backward / after the step): a mark before the
 * gather's calls, the count after them. */
typedef struct {
    long sent, inter;
} GatherMark;
static GatherMark gather_mark(const ZnEngine *E) {
    long c, s, r;
    zn_comm_tag_totals(&E->comm->stats, "param_gather", &c, &s, &r);
    return (GatherMark){s, zn_comm_tag_inter(&E->comm->stats, "param_gather")};
}
static void gather_count(ZnEngine *E, GatherMark m) {
    const GatherMark now = gather_mark(E);
    E->fetch.gather_sent[E->fetch.gphase] += now.sent - m.sent;
    E->fetch.gather_inter[E->fetch.gphase] += now.inter - m.inter;
}

/* plan: gather_per_layer=1 */
int zn_engine_gather_param(ZnEngine *E, int p, ZnErr *err) {
    if (E->full[p]) return 0;
    const ZnLayout *L = &E->L;
    const long pn = L->s3_pn[p];
    E->full[p] = talloc(E, pn * E->pw.size, ZN_MEM_PARAMS16, err);
    if (!E->full[p]) return err->code;
    const float *send = E->off.pslot ? zn_offp_fetch(E, p, err) : E->param_part + L->s3_off[p];
    if (!send) {
        zn_dev_free(E->dev, E->full[p]);
        E->full[p] = NULL;
        return err->code;
    }
    if (E->off.pdev != E->dev) {   /* an offloaded partition goes up before its gather (Z-OFF-005) */
        zn_off_copy(E, E->off.pstage, E->dev, send, E->off.pdev, pn, zn_dtype_size(E->dt));
        send = E->off.pstage;
    }
    const GatherMark m = gather_mark(E);
    int rc = zn_zpp_gathers(E) ? zn_zpp_gather(E, p, send, E->full[p], err)
                               : ag_dt(E, send, E->full[p], even_counts(E, pn), err);
    gather_count(E, m);
    E->fetch.n_avail += L->params[p].numel;
    return rc;
}

/* The model-dtype values of a flat buffer of S elements a rank, gathered
 * rank-major into flat (S * W): ag_dt (or MiCS's two levels) through the
 * engine's staging when the flat buffer fits it, else through a buffer of
 * this call's own, so the staging never grows to the persistent total. */
static int ag_flat(ZnEngine *E, const float *mine, float *flat, long S, ZnErr *err) {
    if (E->P.mics_hier) return zn_mics_hier_gather_flat(E, mine, flat, S, err);
    long *counts = even_counts(E, S);
    if (E->dt == ZN_F32 || S * E->pw.size <= E->comm16_cap) return ag_dt(E, mine, flat, counts, err);
    const long n = S * E->pw.size, off = S * E->pw.rank;
    uint16_t *wire = zn_dev_alloc(E->dev, (size_t)(n > 0 ? n : 1) * 2, ZN_MEM_BUCKETS, err);
    if (!wire) return err->code;
    E->k->pack16(E->dev, E->dt, wire + off, mine, S);
    int rc = part_all_gather(E, wire + off, wire, counts, E->dt, "param_gather", err);
    if (!rc) E->k->unpack16(E->dev, E->dt, flat, wire, n);
    zn_dev_free(E->dev, wire);
    return rc;
}

/* The persistent params, gathered once at init and again after every step
 * (DeepSpeed's _post_step). DeepSpeed gathers them as one coalesced call:
 * every rank sends its pieces of all of them back to back, so one
 * all-gather moves what one gather per param would (the same bytes, the
 * same values) at one call's latency; each param's rank-major copy is then
 * cut out of the rank-major flat buffer, as AllGatherCoalescedHandle does.
 * qwZ quantizes each piece on its own groups and moves the codes and the
 * scales in one call each; hierarchical MiCS makes its two levels once
 * (Z-S3-008). With hpZ the secondaries are gone after the step (and not
 * made yet at init): these gathers span the world, as zn_zpp_gather's. */
/* plan: gather_per_layer=1 */
int zn_engine_gather_persistent(ZnEngine *E, ZnErr *err) {
    const ZnLayout *L = &E->L;
    long S = 0;
    int n = 0;
    for (int p = 0; p < L->nparams; p++)
        if (E->persistent[p] && !E->full[p]) S += L->s3_pn[p], n++;
    if (n == 0) return 0;
    if (n == 1) {
        int rc = 0;
        for (int p = 0; p < L->nparams && !rc; p++) {
            if (!E->persistent[p] || E->full[p]) continue;
            E->persistent[p] = 0;
            rc = zn_engine_gather_param(E, p, err);
            E->persistent[p] = 1;
        }
        return rc;
    }
    const int W = E->pw.size;
    int *plist = zn_malloc(ZN_HOST_ENGINE, (size_t)n * sizeof(int));
    if (!plist) return zn_nomem(err);
    float *mine = talloc(E, S, ZN_MEM_PARAMS16, err);
    if (!mine) {
        free(plist);
        return err->code;
    }
    const size_t es = zn_dtype_size(E->dt);
    int rc = 0;
    long off = 0;
    n = 0;
    for (int p = 0; p < L->nparams && !rc; p++) {   /* this rank's pieces, back to back */
        if (!E->persistent[p] || E->full[p]) continue;
        const long pn = L->s3_pn[p];
        const float *send = E->off.pslot ? zn_offp_fetch(E, p, err) : E->param_part + L->s3_off[p];
        if (!send || !(E->full[p] = talloc(E, pn * W, ZN_MEM_PARAMS16, err))) {
            rc = err->code;
            break;
        }
        zn_off_copy(E, mine + off, E->dev, send, E->off.pdev, pn, es);
        E->fetch.n_avail += L->params[p].numel;
        plist[n++] = p;
        off += pn;
    }
    const GatherMark m = gather_mark(E);
    if (!rc && E->P.quant_weights) {
        rc = zn_qwz_gather_coalesced(E, mine, plist, n, err);
    } else if (!rc) {
        float *flat = talloc(E, S * W, ZN_MEM_PARAMS16, err);
        rc = flat ? ag_flat(E, mine, flat, S, err) : err->code;
        off = 0;
        for (int i = 0; i < n && !rc; i++) {   /* rank r's piece of p: flat[r*S + off] */
            const long pn = L->s3_pn[plist[i]];
            for (int r = 0; r < W; r++) dcopy(E, E->full[plist[i]] + (long)r * pn, flat + (long)r * S + off, pn);
            off += pn;
        }
        zn_dev_free(E->dev, flat);
    }
    gather_count(E, m);
    zn_dev_free(E->dev, mine);
    free(plist);
    return rc;
}

/* plan: gather_per_layer=1 */
int zn_engine_release_param(ZnEngine *E, int p, ZnErr *err) {
    if (E->persistent[p] || !E->full[p]) return 0;
    int kept = E->zpp.sec ? zn_hpz_on_release(E, p, err) : 0;   /* hpZ's secondary (Z-ZPP-003) */
    if (kept < 0) return err->code;
    if (!kept) zn_dev_free(E->dev, E->full[p]);   /* else the pending copy frees it */
    E->full[p] = NULL;
    E->fetch.n_avail -= E->L.params[p].numel;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* gradient reduction */

/* Stage 1/2 bucket in the bucket buffer (flat order): average, reduce-scatter
 * to the owners, and put this rank's slice into its gradient partition. */
/* plan: shard=flat */
static int flat_reduce_bucket(ZnEngine *E, int b, float *buf, float *part, int add, ZnErr *err) {
    const ZnBucket *bk = &E->L.buckets[b];
    predivide(E, buf, bk->numel);
    long off = prefix_count(bk->counts, E->pw.rank);
    int rc = rs_dt(E, buf, buf + off, bk->counts, err);
    if (rc) return rc;
    ZnRecvPiece *pc = E->pieces;   /* sized at init for the bucket with the most */
    int np = zn_layout_recv_pieces(&E->L, b, E->pw.rank, pc, E->npieces);
    for (int i = 0; i < np; i++)   /* rounded to the gradient accumulation dtype */
        put_grad(E, part + pc[i].part_off, buf + off + pc[i].recv_off, pc[i].n, add);
    return 0;
}

/* Stage 3 bucket (rank-major chunks): average, reduce-scatter, accumulate. */
/* plan: reduce_per_micro=1 shard=param */
static int chunk_reduce_bucket(ZnEngine *E, int b, int add, ZnErr *err) {
    const ZnBucket *bk = &E->L.buckets[b];
    float *buf = E->bucket_buf;
    predivide(E, buf, bk->numel);
    float *mine = buf + (long)E->pw.rank * bk->block;
    int rc = zn_qgz_active(E) ? zn_qgz_reduce(E, bk, buf, mine, err) : rs_dt(E, buf, mine, bk->counts, err);
    if (rc) return rc;
    for (int i = 0; i < bk->nentries; i++) {
        int p = bk->e[i].param;
        put_grad(E, E->grad_part + E->L.s3_off[p], mine + bk->e[i].buf_off, E->L.s3_pn[p], add);
    }
    return 0;
}

/* The gradient hook: called with each param's gradient of this micro-step,
 * in backward order (the order the layout's bucket plan was built in). */
static int grad_hook(ZnEngine *E, int p, const float *g, ZnErr *err) {
    const ZnLayout *L = &E->L;
    long n = L->params[p].numel;
    if (n == 0) return 0;
    const int add = E->micro > 0 && !E->canonical;
    if (!E->P.reduce_per_micro) {   /* accumulate locally; reduce at the boundary */
        copy_or_add(E, E->flat_grads + L->flat_offset[p], g, n, add);
        return 0;
    }
    if (E->next_bucket >= L->nbuckets)
        return zn_err(err, ZN_E_INTERNAL, "gradient of '%s' arrived after the last bucket", L->params[p].name);
    const ZnBucket *bk = &L->buckets[E->next_bucket];
    const ZnBucketEntry *e = &bk->e[E->next_entry];
    if (e->param != p)
        return zn_err(err, ZN_E_INTERNAL, "gradient of '%s' arrived where the bucket plan expects '%s'",
                      L->params[p].name, L->params[e->param].name);
    if (E->P.shard == ZN_SHARD_FLAT) {
        dcopy(E, E->bucket_buf + e->buf_off, g, n);
        if (e->numel > n)   /* the flat padding rides with the last flat param */
            E->k->zero(E->dev, E->bucket_buf + e->buf_off + n, (size_t)(e->numel - n) * sizeof(float));
    } else {
        long pn = L->s3_pn[p];
        for (int r = 0; r < E->pw.size; r++) {
            long lo = (long)r * pn, cnt = n - lo;
            if (cnt < 0) cnt = 0;
            if (cnt > pn) cnt = pn;
            float *dst = E->bucket_buf + (long)r * bk->block + e->buf_off;
            if (cnt) dcopy(E, dst, g + lo, cnt);
            if (pn > cnt) E->k->zero(E->dev, dst + cnt, (size_t)(pn - cnt) * sizeof(float));
        }
    }
    if (++E->next_entry == bk->nentries) {
        int b = E->next_bucket++;
        E->next_entry = 0;
        double t0 = zn_now_s();
        int rc = E->P.shard == ZN_SHARD_FLAT ? flat_reduce_bucket(E, b, E->bucket_buf, E->grad_part, add, err)
                               : chunk_reduce_bucket(E, b, add, err);
        E->t_reduce += ms_since(t0);
        return rc;
    }
    return 0;
}

/* All-reduce a bucket of the accumulated flat gradient in place. */
/* plan: boundary_all_reduce=1 */
static int allreduce_bucket(ZnEngine *E, const ZnBucket *bk, ZnErr *err) {
    float *region = E->flat_grads + bk->flat_lo;
    long n = bk->flat_hi - bk->flat_lo;
    predivide(E, region, n);
    int rc = ar_dt(E, region, n, err);
    round_dt(E, region, n);
    return rc;
}

/* Stage 1: reduce-scatter a bucket of the accumulated flat gradient to its
 * owners, in place when its params are adjacent; with round robin they are
 * not, and the bucket goes through the bucket buffer like stage 2's. */
/* plan: reduce_per_micro=0 boundary_all_reduce=0 */
static int scatter_bucket(ZnEngine *E, int b, ZnErr *err) {
    const ZnLayout *L = &E->L;
    const ZnBucket *bk = &L->buckets[b];
    if (bk->flat_lo < 0) {
        for (int i = 0; i < bk->nentries; i++) {
            const ZnBucketEntry *e = &bk->e[i];
            dcopy(E, E->bucket_buf + e->buf_off, E->flat_grads + L->flat_offset[e->param], e->numel);
        }
        return flat_reduce_bucket(E, b, E->bucket_buf, E->grad_part, 0, err);
    }
    float *region = E->flat_grads + bk->flat_lo;
    predivide(E, region, bk->flat_hi - bk->flat_lo);
    long off = prefix_count(bk->counts, E->pw.rank);
    int rc = rs_dt(E, region, region + off, bk->counts, err);
    round_dt(E, region + off, bk->counts[E->pw.rank]);
    return rc;
}

/* Stages 0/1 at the accumulation boundary (canonical mode: every micro-step):
 * reduce the flat gradient bucket by bucket, the same bucket plan as the
 * other stages. */
/* plan: reduce_per_micro=0 */
static int reduce_at_boundary(ZnEngine *E, ZnErr *err) {
    double t0 = zn_now_s();
    int rc = 0;
    for (int b = 0; b < E->L.nbuckets && !rc; b++)
        rc = E->P.boundary_all_reduce ? allreduce_bucket(E, &E->L.buckets[b], err) : scatter_bucket(E, b, err);
    /* DeepSpeed counts the boundary all-reduce in the backward */
    E->t_reduce += ms_since(t0);
    E->t_bwd += ms_since(t0);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* forward and backward of one micro-batch */

float *zn_engine_param_ptr(ZnEngine *E, int p) {
    return E->P.gather_per_layer ? E->full[p] : E->flat_params + E->L.flat_offset[p];
}

/* A param's gradient from module l's backward. A weight several modules
 * share adds up the contributions of the later modules (in backward order:
 * the highest module first) and reaches its bucket once, with the sum, at
 * its first module (Z-ENG-016). */
static int weight_grad(ZnEngine *E, int l, int p, const float *g, ZnErr *err) {
    if (!E->tied_acc || !E->tied_acc[p]) return grad_hook(E, p, g, err);
    long n = E->L.params[p].numel;
    float *acc = E->tied_acc[p];
    copy_or_add(E, acc, g, n, E->tied_cnt[p] > 0);
    E->tied_cnt[p]++;
    if (l > E->first_use[p]) return 0;
    E->tied_cnt[p] = 0;
    return grad_hook(E, p, acc, err);
}

static void phase(ZnEngine *E, const char *what) {
    if (E->hooks.phase) E->hooks.phase(E->hooks.phase_ctx, E, what);
}

/* Where a parameter's gradient is computed: straight into the flat gradient
 * when grad_hook would only copy it there (a plan that reduces at the
 * boundary, the first contribution of the step, an untied parameter), else
 * the scratch. The same values land in the same place either way; the copy
 * of every weight gradient (a tenth of a small step) is saved. */
static float *grad_dest(ZnEngine *E, int p, float *scratch) {
    const int add = E->micro > 0 && !E->canonical;
    if (E->P.reduce_per_micro || add || (E->tied_acc && E->tied_acc[p])) return scratch;
    return E->flat_grads + E->L.flat_offset[p];
}

static int micro_step(ZnEngine *E, long first_sample, float grad_scale, float *loss, ZnErr *err) {
    const int nm = E->model->nmodules;
    ZnModelRun *R = E->run;
    int rc = zn_run_begin(R, E->data, first_sample, err);
    if (rc) goto done;
    phase(E, "before forward");
    double t_f = zn_now_s();
    float *W[2] = {NULL, NULL}, *dW[2] = {NULL, NULL};
    E->fetch.gphase = 0;
    for (int k = 0; k < nm; k++) {   /* the first nm visits: forward */
        if ((rc = zn_fetch_module(E, k, W, err))) goto done;
        zn_run_forward(R, k, W);
        if ((rc = zn_fetch_release(E, k, err))) goto done;
        if (E->hooks.step.forward && E->hooks.step.forward(E->hooks.step.ctx, E, k)) k--;
    }
    *loss = zn_run_loss(R, grad_scale);
    E->t_fwd += ms_since(t_f);
    zn_trace_add(E->hooks.trace, "forward", t_f, zn_now_s(), -1, E->global_step + 1);
    phase(E, "after forward");
    phase(E, "before backward");
    double t_b = zn_now_s();

    E->fetch.gphase = 1;
    for (int k = nm; k < E->fetch.ntrace; k++) {
        const ZnVisit v = E->fetch.trace[k];
        const ZnModule *md = &E->model->modules[v.mod];
        if ((rc = zn_fetch_module(E, k, W, err))) goto done;
        if (v.kind == ZN_VISIT_RECOMPUTE) {   /* activation checkpointing: the same forward again */
            zn_run_forward(R, v.mod, W);
            if ((rc = zn_fetch_release(E, k, err))) goto done;
            continue;
        }
        long off = 0;
        for (int q = 0; q < md->nparams; q++) {
            dW[q] = grad_dest(E, md->param[q], E->grad_scratch + off);
            off += E->L.params[md->param[q]].numel;
        }
        zn_run_backward(R, v.mod, W, dW);
        for (int q = 0; q < md->nparams; q++) round_dt(E, dW[q], E->L.params[md->param[q]].numel);
        if (E->hooks.step.backward) E->hooks.step.backward(E->hooks.step.ctx, E, v.mod, dW);
        if ((rc = zn_fetch_release(E, k, err))) goto done;
        /* backward order: a module's params last to first (reverse model order) */
        for (int q = md->nparams - 1; q >= 0; q--)
            if ((rc = weight_grad(E, v.mod, md->param[q], dW[q], err))) goto done;
    }
    if (E->P.reduce_per_micro && E->next_bucket != E->L.nbuckets) {
        rc = zn_err(err, ZN_E_INTERNAL, "backward ended with %d of %d buckets reduced",
                    E->next_bucket, E->L.nbuckets);
        goto done;
    }
    E->next_bucket = 0;
    E->next_entry = 0;
    E->t_bwd += ms_since(t_b);
    zn_trace_add(E->hooks.trace, "backward", t_b, zn_now_s(), -1, E->global_step + 1);
done:
    zn_run_end(R);
    int rc2 = zn_fetch_end_micro(E, rc ? NULL : err);
    if (!rc) rc = rc2;
    if (!rc) phase(E, "after backward");
    return rc;
}

/* ---------------------------------------------------------------------- */
/* the optimizer step */

/* Global norm of the averaged gradient over every rank's partition. */
static int global_norm(ZnEngine *E, double *norm, ZnErr *err) {
    ZnDevice *gd = E->off.gdev;   /* the gradient partition's tier (Z-OFF-003) */
    ZnAbsMax am = gd->k->absmax(gd, E->grad_part, E->part_n);
    float mx = am.nonfinite ? INFINITY : am.maxabs;
    if (E->P.norm_across_ranks) {   /* else every rank already holds the whole gradient */
        int rc = all_reduce_host_f32(E, &mx, ZN_MAX, "norm", err);
        if (rc) return rc;
    }
    if (!isfinite(mx)) { *norm = -1.0; return 0; }   /* DeepSpeed masks a non-finite norm to -1 */
    int shift = zn_norm_shift(mx);
    uint64_t mine[2] = {0, 0};   /* the kernel adds into (hi, lo): start from zero */
    gd->k->sumsq_fixed(gd, E->grad_part, E->part_n, shift, &mine[0], &mine[1]);
    uint64_t hi = mine[0], lo = mine[1];
    if (E->P.norm_across_ranks) {
        uint64_t *all = E->norm_all;   /* 2 per rank */
        int rc = zn_engine_all_gather_host(E, mine, all, 2, ZN_U64, "norm", err);
        hi = lo = 0;
        /* the first shard group's partitions cover the model once (with
           MiCS the other groups hold the same reduced values) */
        for (int r = 0; r < E->pw.size && !rc; r++) zn_u128_add(&hi, &lo, all[2 * r], all[2 * r + 1]);
        if (rc) return rc;
    }
    *norm = zn_norm_from_fixed(hi, lo, shift);
    return 0;
}

/* Any inf/NaN in any rank's gradient partition (Z-PREC-004): every rank
 * takes the same skip decision. */
static int global_overflow(ZnEngine *E, int *overflow, ZnErr *err) {
    float flag = E->off.gdev->k->absmax(E->off.gdev, E->grad_part, E->part_n).nonfinite ? 1.0f : 0.0f;
    if (E->P.norm_across_ranks) {   /* else every rank holds the same whole gradient */
        int rc = all_reduce_host_f32(E, &flag, ZN_MAX, "overflow", err);
        if (rc) return rc;
    }
    *overflow = flag != 0.0f;
    return 0;
}

static int publish_params(ZnEngine *E, int cast, ZnErr *err);

/* The working copy as one contiguous image of the master partition, which
 * the fused Adam kernel writes as it goes; NULL when the master is the
 * working copy itself (fp32 stage 0). */
static float *working_image(ZnEngine *E) {
    if (E->P.optim == ZN_HOLD_FULL) return E->dt != ZN_F32 ? E->flat_params : NULL;
    if (E->P.params == ZN_HOLD_FULL) return E->flat_params + (long)E->pw.rank * E->L.part_numel;
    return E->param_part;   /* NULL with parameters on NVMe: the step writes them back (offload_param.c) */
}

/* The tier of the working image: the stage-3 partition's, else the device. */
static ZnDevice *working_tier(ZnEngine *E) { return E->P.params == ZN_HOLD_PART ? E->off.pdev : E->dev; }

static int optimizer_step(ZnEngine *E, ZnStepResult *res, ZnErr *err) {
    const ZnConfig *cfg = E->cfg;
    const int quirks = cfg->deepspeed_quirks;
    const double S = E->scaler.cur_scale;   /* the scale this step's backward used */
    int overflow = 0, rc;
    if (E->check_overflow && (rc = global_overflow(E, &overflow, err))) return rc;
    char line[256] = "";
    if (overflow) zn_scaler_overflow_msg(&E->scaler, E->world.rank, line, sizeof line);
    if ((rc = zn_scaler_update(&E->scaler, overflow, err))) return rc;
    const double S_post = E->scaler.cur_scale;
    res->loss_scale = S;
    res->lr = E->sched.lr;
    if (overflow) {   /* skip: no optimizer step, no scheduler step (Z-PREC-004) */
        if (E->world.rank == 0 && line[0] && !E->hooks.quiet) { printf("%s\n", line); fflush(stdout); }
        E->skipped_steps++;
        res->skipped = 1;
        res->grad_norm = -1.0;
        return 0;
    }
    double gs = 0.0;   /* norm of the scaled gradient */
    if ((rc = global_norm(E, &gs, err))) return rc;
    /* zinc unscales with the scale the backward used; DeepSpeed uses the
       scale after update_scale, and its stage 3 reports the norm with it
       too (Z-PREC-005; "deepspeed_quirks" reproduces both) */
    const double S_unscale = quirks ? S_post : S;
    const double S_report = quirks && E->P.ds_optimizer == ZN_DS_ZERO3 ? S_post : S;
    double combined = S_unscale;
    if (cfg->gradient_clipping > 0.0 && gs >= 0.0) {
        double c = (gs / S_unscale + 1e-6) / cfg->gradient_clipping;
        if (c > 1.0) combined = c * S_unscale;
    }
    float mul = combined != 1.0 ? (float)(1.0 / combined) : 1.0f;
    E->opt_step++;
    ZnAdamParams hp = E->adam;
    hp.lr = E->sched.lr;
    if (E->sched.sets_betas) { hp.beta1 = E->sched.beta1; hp.beta2 = E->sched.beta2; }
    /* Adam per optimizer group (one per sub-group at stage 3), one call per
       weight-decay range (Z-OPT-020), writing the cast working copy in the
       same pass where it lives with the master (offload.c). Adam is
       element-wise, so the cuts change no bit. Elements outside every
       sub-group (none today) keep their old master value, whose cast the
       working copy already holds. */
    float *work = working_image(E);
    if ((rc = zn_off_step(E, &hp, mul, work, working_tier(E), err))) return rc;
    zn_sched_step(&E->sched);
    if (E->hooks.step.updated && (rc = E->hooks.step.updated(E->hooks.step.ctx, E, work, working_tier(E), err)))
        return rc;
    res->grad_norm = gs < 0.0 ? -1.0 : gs / S_report;
    return publish_params(E, 0, err);
}

/* The updated master partition becomes the working (model-dtype) weights of
 * every rank: cast (unless the fused Adam already wrote the cast: cast 0),
 * then all-gather (stages 1/2) or re-gather the persistent parameters
 * (stage 3). */
static int publish_params(ZnEngine *E, int cast, ZnErr *err) {
    const ZnLayout *L = &E->L;
    int rc = 0;
    float *work = working_image(E);
    if (cast && (work || E->off.pslot) && (rc = zn_off_cast_work(E, work, working_tier(E), err))) return rc;
    if (E->P.allgather_after_step) {
        rc = ag_dt(E, work, E->flat_params, even_counts(E, L->part_numel), err);
    } else if (E->P.gather_per_layer) {
        E->fetch.gphase = 2;
        zn_hpz_drop(E);   /* the secondaries hold the old values (DeepSpeed _post_step) */
        for (int p = 0; p < L->nparams && !rc; p++) {   /* the old values go */
            if (!E->persistent[p]) continue;
            E->persistent[p] = 0;
            rc = zn_engine_release_param(E, p, err);
            E->persistent[p] = 1;
        }
        if (!rc) rc = zn_engine_gather_persistent(E, err);
    }
    return rc;
}

/* ---------------------------------------------------------------------- */
/* canonical mode: after every micro-step the reduced block (the sum over the
 * N micro-batches of that micro-step) joins a binary counter of partial
 * sums, so the micro-steps combine along the same binary tree over
 * micro-batch index whatever N and GA are (Z-CANON-002) */

static void canon_push(ZnEngine *E) {
    ZnDevice *gd = E->off.gdev;   /* the levels live with the gradient partition */
    const float *carry = E->grad_part;
    int k = 0;
    while (E->occupied & (1ul << k)) {   /* levels[k] holds earlier micro-batches: it goes left */
        float *acc = E->levels[k];
        gd->k->add(gd, E->dt, acc, carry, E->part_n);
        E->occupied &= ~(1ul << k);
        carry = acc;
        k++;
    }
    if (carry != E->levels[k]) gd->k->copy(gd, E->levels[k], carry, (size_t)E->part_n * sizeof(float));
    E->occupied |= 1ul << k;
}

/* the total (levels from the highest, i.e. earliest, down) scaled once by 1/M */
static void canon_finish(ZnEngine *E, long M) {
    ZnDevice *gd = E->off.gdev;
    float *g = E->grad_part;
    int first = 1;
    for (int k = E->nlevels - 1; k >= 0; k--) {
        if (!(E->occupied & (1ul << k))) continue;
        if (first) gd->k->copy(gd, g, E->levels[k], (size_t)E->part_n * sizeof(float));
        else gd->k->add(gd, E->dt, g, E->levels[k], E->part_n);
        first = 0;
    }
    E->occupied = 0;
    if (!E->cfg->allreduce_sum && M > 1) gd->k->div(gd, E->dt, g, E->part_n, (float)M);
}

/* ---------------------------------------------------------------------- */
/* public */

int zn_engine_train_step(ZnEngine *E, ZnStepResult *res, ZnErr *err) {
    const ZnConfig *cfg = E->cfg;
    const long ga = cfg->grad_accum, mb = cfg->micro_batch;
    /* the loss gradient: scale S, mean over the micro-batch's rows, and (default
       mode) 1/GA as DeepSpeed's scale_wrt_gas; canonical mode scales once at
       the end instead (Z-ENG-003, Z-CANON-003) */
    const double S = E->scaler.cur_scale;
    const double rows = (double)mb * zn_model_rows_per_sample(E->model);   /* the loss is a mean over rows */
    const float grad_scale = (float)(E->canonical ? S / rows : S / (rows * (double)ga));
    /* the step's losses: this rank's GA, then every rank's (sized at init) */
    float *losses = E->losses, *all = E->loss_all;
    double *ordered = E->loss_ordered;
    int rc = 0;
    memset(res, 0, sizeof *res);
    E->t_fwd = E->t_bwd = E->t_reduce = E->t_step = 0.0;
    for (E->micro = 0; E->micro < ga; E->micro++) {
        /* micro-batch m of the global batch goes to rank m mod N at micro-step m div N */
        long m = (long)E->micro * E->world.size + E->world.rank;
        long first = E->global_step * cfg->train_batch_size + m * mb;
        if ((rc = micro_step(E, first, grad_scale, &losses[E->micro], err))) goto out;
        if (E->canonical) {   /* every rank reduces every micro-step */
            if (!E->P.reduce_per_micro && (rc = reduce_at_boundary(E, err))) goto out;
            if (E->nlevels) canon_push(E);
        }
    }
    E->micro = ga - 1;   /* the boundary belongs to the last micro-step */
    if (E->canonical) {
        if (E->nlevels) canon_finish(E, ga * E->world.size);
        else if (!cfg->allreduce_sum && E->world.size > 1)   /* GA 1: just the final scale */
            E->off.gdev->k->div(E->off.gdev, E->dt, E->grad_part, E->part_n, (float)E->world.size);
    } else if (!E->P.reduce_per_micro && (rc = reduce_at_boundary(E, err))) goto out;
    E->micro = 0;
    phase(E, "before step");
    double t_s = zn_now_s();
    if ((rc = optimizer_step(E, res, err))) goto out;
    E->t_step = ms_since(t_s);
    zn_trace_add(E->hooks.trace, "step", t_s, zn_now_s(), -1, E->global_step + 1);
    phase(E, "after step");
    /* the reported loss: mean over all micro-batches of the global batch,
       summed in the fixed tree over micro-batch index */
    if ((rc = zn_engine_all_gather_host(E, losses, all, ga, ZN_F32, "loss", err))) goto out;
    for (int r = 0; r < E->world.size; r++)
        for (long s = 0; s < ga; s++) ordered[s * E->world.size + r] = all[r * ga + s];
    res->loss = zn_tree_sum_f64(ordered, (int)(ga * E->world.size)) / (double)(ga * E->world.size);
    E->global_step++;
    E->global_samples += cfg->train_batch_size;
    res->samples = E->global_samples;
out:
    if (rc) zn_err_prefix(err, "step %ld: ", E->global_step + 1);   /* zn_sim_run adds the rank */
    return rc;
}

/* Gathers a partition-shaped device buffer (master, moments or gradient)
 * of every rank into the full model-order vector out, in host memory: the
 * gather runs in a device temporary, then each parameter is downloaded. */
static int gather_partitions(ZnEngine *E, const float *src, float *out, ZnErr *err) {
    const ZnLayout *L = &E->L;
    const ZnKernels *k = E->k;
    int rc = 0;
    if (L->shard == ZN_SHARD_NONE) {   /* every rank holds it all */
        for (int p = 0; p < L->nparams; p++)
            k->download(E->dev, out + L->model_offset[p], src + L->flat_offset[p],
                        (size_t)L->params[p].numel * sizeof(float));
        return 0;
    }
    if (L->shard == ZN_SHARD_FLAT) {
        float *tmp = falloc(E, L->aligned_numel, ZN_MEM_BUCKETS, err);
        if (!tmp) return err->code;
        rc = part_all_gather(E, src, tmp, even_counts(E, L->part_numel), ZN_F32, "digest", err);
        for (int p = 0; p < L->nparams && !rc; p++)
            k->download(E->dev, out + L->model_offset[p], tmp + L->flat_offset[p],
                        (size_t)L->params[p].numel * sizeof(float));
        zn_dev_free(E->dev, tmp);
    } else {
        for (int p = 0; p < L->nparams && !rc; p++) {
            long pn = L->s3_pn[p];
            float *tmp = falloc(E, pn * E->pw.size, ZN_MEM_BUCKETS, err);
            if (!tmp) { rc = err->code; break; }
            rc = part_all_gather(E, src + L->s3_off[p], tmp, even_counts(E, pn), ZN_F32, "digest", err);
            if (!rc) k->download(E->dev, out + L->model_offset[p], tmp, (size_t)L->params[p].numel * sizeof(float));
            zn_dev_free(E->dev, tmp);
        }
    }
    return rc;
}

/* gather_partitions of a buffer on another tier, or of an optimizer state
 * (which: 0..2; src NULL), through a device copy: the communicator takes
 * device buffers. */
static int gather_via_device(ZnEngine *E, const float *src, ZnDevice *sd, int which, float *out, ZnErr *err) {
    float *dev = zn_off_state_in_place(E, which);
    if (src && sd == E->dev) return gather_partitions(E, src, out, err);
    if (!src && E->nog == 1 && E->og[0].tier == ZN_TIER_DEVICE) return gather_partitions(E, E->og[0].st[which], out, err);
    float *tmp = falloc(E, E->part_n, ZN_MEM_BUCKETS, err);
    float *host = src ? NULL : zn_malloc(ZN_HOST_ENGINE, (size_t)(E->part_n + 1) * sizeof(float));
    int rc = tmp ? 0 : err->code;
    if (!rc && !src && !host) rc = zn_nomem(err);
    if (!rc && src) zn_off_copy(E, tmp, E->dev, src, sd, E->part_n, sizeof(float));
    if (!rc && !src) {
        if (dev) memcpy(host, dev, (size_t)E->part_n * sizeof(float));
        else rc = zn_off_state_read(E, which, host, err);
        if (!rc) zn_off_copy(E, tmp, E->dev, host, &E->off.tier_host, E->part_n, sizeof(float));
    }
    if (!rc) rc = gather_partitions(E, tmp, out, err);
    zn_dev_free(E->dev, tmp);
    free(host);
    return rc;
}

int zn_engine_gather_params(ZnEngine *E, float *out, ZnErr *err) {
    return gather_via_device(E, NULL, NULL, 0, out, err);
}

int zn_engine_gather_moments(ZnEngine *E, float *exp_avg, float *exp_avg_sq, ZnErr *err) {
    int rc = gather_via_device(E, NULL, NULL, 1, exp_avg, err);
    return rc ? rc : gather_via_device(E, NULL, NULL, 2, exp_avg_sq, err);
}

int zn_engine_gather_grads(ZnEngine *E, float *out, ZnErr *err) {
    return gather_via_device(E, E->grad_part, E->off.gdev, 0, out, err);
}

void zn_engine_get_state(const ZnEngine *E, ZnEngineState *s) {
    s->opt_step = E->opt_step;
    s->global_step = E->global_step;
    s->global_samples = E->global_samples;
    s->skipped_steps = E->skipped_steps;
    s->scaler = E->scaler;
    s->sched_t = E->sched.t;
}

int zn_engine_set_state(ZnEngine *E, const ZnEngineState *s, const float *master, const float *exp_avg,
                        const float *exp_avg_sq, ZnErr *err) {
    E->opt_step = s->opt_step;
    E->global_step = s->global_step;
    E->global_samples = s->global_samples;
    E->skipped_steps = s->skipped_steps;
    /* the scaler's state; its parameters stay those of the current config */
    E->scaler.cur_scale = s->scaler.cur_scale;
    E->scaler.cur_iter = s->scaler.cur_iter;
    E->scaler.last_overflow_iter = s->scaler.last_overflow_iter;
    E->scaler.cur_hysteresis = s->scaler.cur_hysteresis;
    zn_sched_set_iteration(&E->sched, s->sched_t);
    /* a state read in place (zn_engine_part_in_place) is there already */
    const float *st[3] = {master, exp_avg, exp_avg_sq};
    for (int w = 0; w < 3; w++) {
        int rc = zn_off_state_write(E, w, st[w], err);
        if (rc) return rc;
    }
    return publish_params(E, 1, err);
}

int zn_engine_read_part(ZnEngine *E, ZnPartState which, float *host, ZnErr *err) {
    if (which != ZN_PART_PARAMS) return zn_off_state_read(E, (int)which, host, err);
    if (E->off.pslot) return zn_offp_read_all(E, host, err);
    if (E->param_part) E->off.pdev->k->download(E->off.pdev, host, E->param_part, (size_t)E->part_n * sizeof(float));
    return 0;
}

float *zn_engine_part_in_place(const ZnEngine *E, ZnPartState which) {
    if (which != ZN_PART_PARAMS) return zn_off_state_in_place(E, (int)which);
    return E->off.pdev && E->off.pdev->host_addressable && !E->off.pdev->meta ? E->param_part : NULL;
}

void zn_engine_nvme_stats(const ZnEngine *E, unsigned long long *read_bytes, unsigned long long *write_bytes) {
    ZnSwapStats st = {0, 0, 0}, sp = {0, 0, 0};
    if (E->off.swap) st = zn_swap_stats(E->off.swap);
    if (E->off.pswap && E->off.pswap != E->off.swap) sp = zn_swap_stats(E->off.pswap);
    *read_bytes = st.read_bytes + sp.read_bytes;
    *write_bytes = st.write_bytes + sp.write_bytes;
}

uint64_t zn_digest(const float *params, long n) {
    return zn_fnv1a64(ZN_FNV_INIT, params, (size_t)n * 4);
}

ZnLayoutOpts zn_layout_opts(const ZnConfig *cfg) {
    return (ZnLayoutOpts){cfg->zero.round_robin_gradients, cfg->zero.sub_group_size, cfg->zero.reduce_bucket_size};
}

int zn_config_layout(const ZnConfig *cfg, const ZnModel *model, int world, ZnLayout *L, ZnErr *err) {
    ZnLayoutOpts lo = zn_layout_opts(cfg);
    /* MiCS: the shard group splits the states (a bad shard size is the
       config check's and zn_mics_init's to report) */
    const int S = cfg->plan.mics_shard;
    if (S > 0 && S < world && world % S == 0) world = S;
    return zn_layout_build(L, model->params, model->nparams, world, &cfg->plan, &lo, err);
}

/* Precision set-up (Z-PREC-*): dtypes, the loss scaler, who checks overflow. */
static int init_precision(ZnEngine *E, ZnErr *err) {
    const ZnConfig *cfg = E->cfg;
    E->dt = cfg->model_dtype;
    E->cdt = cfg->communication_data_type >= 0 ? (ZnDtype)cfg->communication_data_type : E->dt;
    if (E->dt == ZN_F16) {
        if (cfg->deepspeed_quirks && E->P.ds_optimizer == ZN_DS_FP16_OPTIMIZER) zn_scaler_init_fp16_fused(&E->scaler, &cfg->fp16);
        else zn_scaler_init_fp16(&E->scaler, &cfg->fp16);
        E->check_overflow = 1;
    } else {
        zn_scaler_init_static(&E->scaler, 1.0);
        /* bf16: check_grad_overflow; DeepSpeed's stage 3 never checks (quirk) */
        E->check_overflow = E->dt == ZN_BF16 && cfg->bf16.check_grad_overflow &&
                            !(cfg->deepspeed_quirks && E->P.ds_optimizer == ZN_DS_ZERO3);
    }
    if (E->hooks.sched) {
        E->sched = *E->hooks.sched;
        return 0;
    }
    return zn_sched_init(&E->sched, &cfg->sched, cfg->lr, cfg->beta1, cfg->beta2, err);
}

int zn_engine_init(ZnEngine *E, const ZnConfig *cfg, const ZnModel *model, const ZnData *data,
                   ZnComm *comm, ZnDevice *dev, const ZnEngineHooks *hooks, ZnErr *err) {
    float *hinit = NULL;   /* stage 3: this rank's initial partition on the host */
    memset(E, 0, sizeof *E);
    E->cfg = cfg;
    E->model = model;
    E->data = data;
    E->comm = comm;
    E->dev = dev;
    E->k = dev->k;
    E->world = comm->world;
    /* the plan config resolution built, for the world it was resolved for
       (hpZ's group is clamped to that world) */
    E->P = cfg->plan;
    if (cfg->world_size != E->world.size)
        return zn_err(err, ZN_E_USAGE, "the config was resolved for world size %d, the engine runs on %d",
                      cfg->world_size, E->world.size);
    int rc;
    if ((rc = zn_mics_init(E, cfg, err))) return rc;   /* E->pw, shard, repl */
    if (hooks) E->hooks = *hooks;
    E->canonical = cfg->canonical;
    E->adam = (ZnAdamParams){cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay,
                             cfg->adamw, cfg->bias_correction};
    if ((rc = zn_off_init(E, err))) return rc;   /* where grads, params and the optimizer live */
    if ((rc = zn_config_layout(cfg, model, E->world.size, &E->L, err))) return rc;   /* cut over pw.size */
    if ((rc = init_precision(E, err))) { zn_layout_free(&E->L); return rc; }
    const ZnLayout *L = &E->L;
    const uint64_t seed = (uint64_t)cfg->seed;
    long maxmod = 0;
    for (int i = 0; i < model->nmodules; i++) {
        long n = 0;
        for (int q = 0; q < model->modules[i].nparams; q++) n += L->params[model->modules[i].param[q]].numel;
        if (n > maxmod) maxmod = n;
    }
    if (!(E->grad_scratch = talloc(E, maxmod, ZN_MEM_WORKSPACE, err))) goto fail;
    /* the collective scratch: the largest host-value collective is the
       norm's 2 uint64 (and the checkpoint's 2 sums) or the GA losses, per rank */
    size_t per_rank = 2 * sizeof(uint64_t);
    if ((size_t)cfg->grad_accum * sizeof(float) > per_rank) per_rank = (size_t)cfg->grad_accum * sizeof(float);
    E->scratch_bytes = per_rank * (size_t)E->world.size;
    if (!(E->scratch = zn_dev_alloc(dev, E->scratch_bytes, ZN_MEM_WORKSPACE, err))) goto fail;
    if (!(E->run = zn_run_new(model, dev, E->dt, (int)cfg->micro_batch, err))) goto fail;
    zn_run_set_recompute(E->run, cfg->activation_checkpointing);
    /* the host scratch of every step, so that a step allocates nothing
       on the host (Z-ENG-017): collective counts, a bucket's received
       pieces, the norm's partial sums, the step's losses */
    for (int b = 0; b < L->nbuckets; b++) {
        int np = L->shard == ZN_SHARD_FLAT ? zn_layout_recv_pieces(L, b, E->pw.rank, NULL, 0) : 0;
        if (np > E->npieces) E->npieces = np;
    }
    const size_t ga = (size_t)cfg->grad_accum, W = (size_t)E->world.size;
    E->counts = zn_malloc(ZN_HOST_ENGINE, W * sizeof(long));
    E->pieces = zn_malloc(ZN_HOST_ENGINE, (size_t)(E->npieces + 1) * sizeof(ZnRecvPiece));
    E->norm_all = zn_malloc(ZN_HOST_ENGINE, 2 * W * sizeof(uint64_t));
    E->losses = zn_malloc(ZN_HOST_ENGINE, ga * sizeof(float));
    E->loss_all = zn_malloc(ZN_HOST_ENGINE, ga * W * sizeof(float));
    E->loss_ordered = zn_malloc(ZN_HOST_ENGINE, ga * W * sizeof(double));
    if (!E->counts || !E->pieces || !E->norm_all || !E->losses || !E->loss_all || !E->loss_ordered) {
        zn_nomem(err);
        goto fail;
    }
    /* tied weights: who uses what */
    E->first_use = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof(int));
    E->tied_cnt = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof(int));
    if (!E->first_use || !E->tied_cnt) { zn_nomem(err); goto fail; }
    for (int p = 0; p < L->nparams; p++) E->first_use[p] = -1;
    for (int i = 0; i < model->nmodules; i++)
        for (int q = 0; q < model->modules[i].nparams; q++) {
            int p = model->modules[i].param[q];
            if (E->first_use[p] < 0) {
                E->first_use[p] = i;
                continue;
            }
            /* a second user: the param is tied */
            if (!E->tied_acc && !(E->tied_acc = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof(float *)))) {
                zn_nomem(err);
                goto fail;
            }
            if (!E->tied_acc[p] && !(E->tied_acc[p] = talloc(E, L->params[p].numel, ZN_MEM_WORKSPACE, err))) goto fail;
        }

    /* Initial weights are cast to the model dtype first, and the fp32 master
       copies the cast values (DeepSpeed casts the module before ZeRO init). */
    if (E->P.params == ZN_HOLD_FULL) {
        if (!(E->flat_params = talloc(E, L->aligned_numel, ZN_MEM_PARAMS16, err))) goto fail;
        /* generated on the host (padding zero), uploaded, cast on the device;
           a dry run has no values to fill, and a host copy of a billion
           parameters would be the one thing it cannot afford (Z-DRY-004) */
        if (!dev->meta) {
            float *h = zn_calloc(ZN_HOST_ENGINE, (size_t)L->aligned_numel + 1, sizeof(float));
            if (!h) { zn_nomem(err); goto fail; }
            for (int p = 0; p < L->nparams; p++)
                zn_model_init_param(model, p, seed, 0, L->params[p].numel, h + L->flat_offset[p]);
            E->k->upload(dev, E->flat_params, h, (size_t)L->aligned_numel * sizeof(float));
            free(h);
            round_dt(E, E->flat_params, L->aligned_numel);
        }
    }
    if (E->P.grads == ZN_HOLD_FULL && !(E->flat_grads = talloc(E, L->aligned_numel, ZN_MEM_GRADS, err))) goto fail;

    long bucket_need = 0;
    for (int b = 0; b < L->nbuckets; b++)
        if (L->buckets[b].numel > bucket_need) bucket_need = L->buckets[b].numel;
    /* round robin cuts the boundary reduce-scatter's buckets out of order: they
       go through the bucket buffer too */
    int needs_bucket = E->P.reduce_per_micro || (!E->P.boundary_all_reduce && cfg->zero.round_robin_gradients);
    if (needs_bucket && !(E->bucket_buf = talloc(E, bucket_need, ZN_MEM_BUCKETS, err))) goto fail;
    E->bucket_cap = bucket_need;
    /* DeepSpeed holds its IPG buffers whatever the buckets hold (Z-MEM-011):
       the device is charged their bytes, the bucket buffer standing inside
       them; a bucket larger than they are (one oversized parameter) keeps
       its own size */
    {
        const long ipg = zn_ds_ipg_bytes(cfg, &E->P);
        const long own = E->bucket_buf ? bucket_need * (long)zn_dtype_size(E->dt) : 0;
        if (ipg > own) {
            if (zn_mem_charge(dev, (size_t)(ipg - own), ZN_MEM_BUCKETS, err)) goto fail;
            E->ipg_extra = ipg - own;
        }
    }

    /* the optimizer partition; with offload the master, the moments and
       (stages 2/3) the gradient partition live off the device (offload.c) */
    E->part_n = zn_layout_master_numel(L, &E->P);
    const int grads_dt = E->off.gdev == dev;   /* on the host the gradient partition is fp32 (DeepSpeed's) */
    const float *init = NULL;              /* the master's first values (part_n floats on init_dev) */
    ZnDevice *init_dev = dev;
    if (E->P.optim == ZN_HOLD_FULL) {
        E->grad_part = E->flat_grads;
        init = E->flat_params;             /* fp32 stage 0 steps the model weights themselves */
    } else if (E->P.shard == ZN_SHARD_FLAT) {
        init = E->flat_params + (long)E->pw.rank * L->part_numel;
        if (E->P.grads == ZN_HOLD_FULL) E->grad_part = E->flat_grads + (long)E->pw.rank * L->part_numel;
        else if (!(E->grad_part = zn_off_alloc(E, E->off.gdev, E->part_n, ZN_MEM_GRADS, grads_dt, err))) goto fail;
    } else {
        ZnDevice *pd = E->off.pdev;
        const int nvme = E->P.param_tier == ZN_TIER_NVME;   /* the partitions go to offload_param.c */
        if (!nvme && !(E->param_part = zn_off_alloc(E, pd, E->part_n, ZN_MEM_PARAMS16, 1, err))) goto fail;
        if (!(E->grad_part = zn_off_alloc(E, E->off.gdev, E->part_n, ZN_MEM_GRADS, grads_dt, err))) goto fail;
        /* a dry run fills no values: a host copy of a billion parameters
           would be the one thing it cannot afford (Z-DRY-004) */
        if (!dev->meta) {
            if (!(hinit = zn_calloc(ZN_HOST_ENGINE, (size_t)E->part_n + 1, sizeof(float)))) {   /* host, padding zero */
                zn_nomem(err);
                goto fail;
            }
            for (int p = 0; p < L->nparams; p++) {
                long lo2, hi2, off;
                zn_layout_owned(L, p, E->pw.rank, &lo2, &hi2, &off);
                if (hi2 > lo2) zn_model_init_param(model, p, seed, lo2, hi2, hinit + off);
            }
        }
        if (nvme) {   /* rounded on the host, the parameter tier's memory */
            if (hinit) E->off.tier_host.k->round_dt(&E->off.tier_host, E->dt, hinit, E->part_n);
            init = hinit;
        } else {
            if (hinit) {
                pd->k->upload(pd, E->param_part, hinit, (size_t)E->part_n * sizeof(float));
                pd->k->round_dt(pd, E->dt, E->param_part, E->part_n);
            }
            init = E->param_part;
        }
        init_dev = pd;
        E->full = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof(float *));
        if (!E->full) { zn_nomem(err); goto fail; }
        if (pd != dev) {   /* a partition's way up to its gather */
            long maxpn = 0;
            for (int p = 0; p < L->nparams; p++) if (L->s3_pn[p] > maxpn) maxpn = L->s3_pn[p];
            if (!(E->off.pstage = talloc(E, maxpn, ZN_MEM_BUCKETS, err))) goto fail;
        }
    }
    if ((rc = zn_decay_ranges(model, cfg, L, E->pw.rank, E->part_n, &E->decay, &E->ndecay, err))) goto fail;
    if ((rc = zn_off_groups_init(E, init, init_dev, err))) goto fail;
    /* after the optimizer's swap space, which the parameters may share */
    if (E->P.param_tier == ZN_TIER_NVME && (rc = zn_offp_init(E, hinit, err))) goto fail;
    free(hinit);
    hinit = NULL;
    /* ZeRO++'s groups and staging, then the trace and the persistent
       gathers: the partitions are in place now */
    if ((rc = zn_zpp_init(E, err)) || (rc = zn_fetch_init(E, err))) goto fail;
    if (E->canonical && cfg->grad_accum > 1) {
        /* the binary counter over GA micro-steps needs floor(log2 GA) + 1
           partition-sized partial sums: canonical mode's memory cost */
        while ((1L << E->nlevels) <= cfg->grad_accum) E->nlevels++;
        E->levels = zn_calloc(ZN_HOST_ENGINE, (size_t)E->nlevels, sizeof(float *));
        if (!E->levels) { zn_nomem(err); goto fail; }
        for (int k = 0; k < E->nlevels; k++)
            if (!(E->levels[k] = zn_off_alloc(E, E->off.gdev, E->part_n, ZN_MEM_GRADS, grads_dt, err))) goto fail;
    }
    zn_cov_engine(cfg);   /* the coverage build's per-plan counts (core/covmark.h) */
    phase(E, "init");
    return 0;
fail:
    rc = err->code ? err->code : ZN_E_INTERNAL;
    free(hinit);
    zn_engine_free(E);
    return rc;
}

void zn_engine_free(ZnEngine *E) {
    zn_zpp_free(E);   /* pending secondary copies free their sources */
    zn_mics_free(E);
    if (E->full) {
        for (int p = 0; p < E->L.nparams; p++) zn_dev_free(E->dev, E->full[p]);
        free(E->full);
    }
    zn_fetch_free(E);
    free(E->decay);
    if (E->tied_acc) {
        for (int p = 0; p < E->L.nparams; p++) if (E->dev) zn_dev_free(E->dev, E->tied_acc[p]);
        free(E->tied_acc);
    }
    free(E->first_use);
    free(E->tied_cnt);
    zn_off_free(E);
    if (E->dev) {
        if (E->P.grads == ZN_HOLD_PART) zn_dev_free(E->off.gdev, E->grad_part);
        zn_dev_free(E->dev, E->flat_params);
        zn_dev_free(E->dev, E->flat_grads);
        if (E->off.pdev) zn_dev_free(E->off.pdev, E->param_part);
        zn_dev_free(E->dev, E->off.pstage);
        zn_dev_free(E->dev, E->bucket_buf);
        if (E->ipg_extra) zn_mem_uncharge(E->dev, (size_t)E->ipg_extra, ZN_MEM_BUCKETS);
        zn_dev_free(E->dev, E->grad_scratch);
        zn_dev_free(E->dev, E->comm16);
        zn_dev_free(E->dev, E->scratch);
        for (int k = 0; k < E->nlevels && E->levels; k++) zn_dev_free(E->off.gdev, E->levels[k]);
    }
    zn_run_free(E->run);
    ZN_FREE_ALL(E->levels, E->counts, E->pieces, E->norm_all, E->losses, E->loss_all, E->loss_ordered);
    zn_layout_free(&E->L);
    memset(E, 0, sizeof *E);
    zn_cov_engine_end();
}
