/* zeropp.c: hpZ, qwZ and qgZ in the engine (zeropp.h, spec Z-ZPP-*).
 * Sources: DeepSpeed runtime/zero/partition_parameters.py
 * (_partition_param_sec, all_gather_coalesced, CUDAQuantizer),
 * runtime/comm/coalesced_collectives.py (all_to_all_quant_reduce),
 * utils/groups.py (_create_zero_param_parallel_group,
 * _get_local_all_to_all_group); the ZeRO++ paper (arXiv 2306.10209) §3. */
#include <stdio.h>
#include "engine/zeropp.h"
#include "core/alloc.h"
#include "core/quant.h"
#include "comm/coll.h"

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

int zn_zpp_gathers(const ZnEngine *E) { return E->P.hpz > 1 || E->P.quant_weights; }

int zn_qgz_active(const ZnEngine *E) { return E->P.quant_grads && zn_world_nodes(&E->world) > 1; }

int zn_zpp_init(ZnEngine *E, ZnErr *err) {
    const ZnPlan *P = &E->P;
    if (P->hpz <= 1 && !P->quant_weights && !P->quant_grads) return 0;
    if ((P->quant_weights || P->quant_grads) && (!E->k->quant || !E->k->dequant))
        return zn_err(err, ZN_E_USAGE, "zero_quantized_weights/zero_quantized_gradients: the %s device has no "
                      "quantization kernels yet", E->dev->name);
    if (P->quant_grads && E->canonical)
        return zn_err(err, ZN_E_USAGE, "zero_quantized_gradients with --canonical: quantized sums depend on how "
                      "ranks sit on nodes, and canonical mode promises the same bits on any cluster");
    if (E->world.size % P->hpz)
        return zn_err(err, ZN_E_USAGE, "zero_hpz_partition_size %d does not divide the world size %d", P->hpz,
                      E->world.size);
    const ZnLayout *L = &E->L;
    const long W = E->world.size, G = P->hpz;
    size_t codes = 0, scales = 0;   /* one half of zq and zs */
    for (int p = 0; p < L->nparams; p++) {
        const long pn = L->s3_pn[p], sec = pn * W / G;
        if (P->quant_weights) {
            codes = max_z(codes, (size_t)(pn * W));
            scales = max_z(scales, (size_t)(W * zn_quant_ngroups(pn, ZN_Q8_GROUP)));
            scales = max_z(scales, (size_t)(G * zn_quant_ngroups(sec, ZN_Q8_GROUP)));
        } else if (E->dt != ZN_F32) {   /* 16-bit staging of a secondary gather */
            codes = max_z(codes, (size_t)(pn * W) * 2);
        }
    }
    const int nodes = zn_world_nodes(&E->world), per = E->world.per_node;
    if (zn_qgz_active(E)) {
        long B = 0;
        for (int b = 0; b < L->nbuckets; b++) if (L->buckets[b].block > B) B = L->buckets[b].block;
        const long n1 = (long)nodes * B;
        E->zpp.zf_n = (size_t)(W * B);
        codes = max_z(codes, (size_t)(per * zn_q4_bytes(n1)));
        codes = max_z(codes, (size_t)(nodes * zn_q4_bytes(B)));
        scales = max_z(scales, (size_t)(per * zn_quant_ngroups(n1, ZN_Q4_GROUP)));
        scales = max_z(scales, (size_t)(nodes * zn_quant_ngroups(B, ZN_Q4_GROUP)));
    } else if (P->quant_grads && E->world.rank == 0 && !E->hooks.quiet) {
        /* DeepSpeed takes the plain reduce-scatter on one node without a word */
        printf("[zinc] qgZ: all %d ranks are on one node, so gradients take the plain reduce-scatter "
               "(the quantized all-to-all needs more than one node; --ranks-per-node sets the simulator's)\n",
               E->world.size);
    }
    E->zpp.zq_half = codes;
    E->zpp.zs_half = scales;
    if (codes && !(E->zpp.zq = zn_dev_alloc(E->dev, 2 * codes, ZN_MEM_BUCKETS, err))) return err->code;
    if (scales && !(E->zpp.zs = zn_dev_alloc(E->dev, 2 * scales * sizeof(float), ZN_MEM_BUCKETS, err))) return err->code;
    if (E->zpp.zf_n && !(E->zpp.zf = zn_dev_alloc(E->dev, E->zpp.zf_n * sizeof(float), ZN_MEM_BUCKETS, err))) return err->code;
    if (P->hpz > 1) {
        E->zpp.sec = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof(float *));
        E->zpp.sec_src = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof(float *));
        if (!E->zpp.sec || !E->zpp.sec_src) return zn_nomem(err);
    }
    return 0;
}

void zn_zpp_free(ZnEngine *E) {
    if (E->zpp.sec) zn_hpz_drop(E);
    ZN_FREE_ALL(E->zpp.sec, E->zpp.sec_src);
    E->zpp.sec = E->zpp.sec_src = NULL;
    if (E->dev) {
        zn_dev_free(E->dev, E->zpp.zq);
        zn_dev_free(E->dev, E->zpp.zs);
        zn_dev_free(E->dev, E->zpp.zf);
    }
    E->zpp.zq = NULL;
    E->zpp.zs = E->zpp.zf = NULL;
}

/* ------------------------------------------------------------------ hpZ */

/* Elements of param p's secondary, and where it starts in the gathered param. */
static long sec_numel(const ZnEngine *E, int p) { return E->L.s3_pn[p] * E->world.size / E->P.hpz; }
static long sec_start(const ZnEngine *E, int p) {
    return zn_group_index(&E->world, zn_group(E->P.hpz, 1)) * sec_numel(E, p);
}

int zn_hpz_on_release(ZnEngine *E, int p, ZnErr *err) {
    /* after the step the parameters are about to change: no secondary
       (DeepSpeed's _post_step invalidates them) */
    if (E->P.hpz <= 1 || E->zpp.sec[p] || E->fetch.gphase == 2) return 0;
    const long S = sec_numel(E, p);
    float *sec = zn_dev_alloc_as(E->dev, (size_t)(S > 0 ? S : 1) * sizeof(float),
                                 (size_t)S * zn_dtype_size(E->dt), ZN_MEM_HPZ, err);
    if (!sec) return -1;
    /* DeepSpeed zero-fills, then copies the group's slice of the full param */
    E->k->zero(E->dev, sec, (size_t)S * sizeof(float));
    E->zpp.sec[p] = sec;
    if (E->hooks.hpz_async_copy) {   /* the copy is queued, its source kept */
        E->zpp.sec_src[p] = E->full[p];
        E->zpp.sec_pending++;
        return 1;
    }
    if (S) E->k->copy(E->dev, sec, E->full[p] + sec_start(E, p), (size_t)S * sizeof(float));
    return 0;
}

void zn_hpz_sync(ZnEngine *E) {
    for (int p = 0; E->zpp.sec_pending && p < E->L.nparams; p++) {
        if (!E->zpp.sec_src[p]) continue;
        const long S = sec_numel(E, p);
        if (S) E->k->copy(E->dev, E->zpp.sec[p], E->zpp.sec_src[p] + sec_start(E, p), (size_t)S * sizeof(float));
        zn_dev_free(E->dev, E->zpp.sec_src[p]);
        E->zpp.sec_src[p] = NULL;
        E->zpp.sec_pending--;
    }
}

void zn_hpz_drop(ZnEngine *E) {
    if (!E->zpp.sec) return;
    zn_hpz_sync(E);
    for (int p = 0; p < E->L.nparams; p++) {
        zn_dev_free(E->dev, E->zpp.sec[p]);
        E->zpp.sec[p] = NULL;
    }
}

/* ------------------------------------------------------- the gathers */

int zn_zpp_gather(ZnEngine *E, int p, const float *send, float *full, ZnErr *err) {
    const long pn = E->L.s3_pn[p];
    ZnGroup g = zn_group(E->world.size, 1);
    long piece = pn;
    if (E->zpp.sec && E->zpp.sec[p]) {   /* hpZ: inside the group, from the secondaries */
        /* the secondary must be complete before a peer reads it: the
           synchronize DeepSpeed added for the race of #5059 (PR #5216) */
        if (E->zpp.sec_pending) zn_hpz_sync(E);
        g = zn_group(E->P.hpz, 1);
        piece = sec_numel(E, p);
        send = E->zpp.sec[p];
    }
    ZnComm *c = E->comm;
    const ZnKernels *k = E->k;
    const int gi = zn_group_index(&E->world, g);
    for (int j = 0; j < g.size; j++) E->counts[j] = piece;
    if (!E->P.quant_weights) {
        if (E->dt == ZN_F32) return zn_group_all_gather(c, g, send, full, E->counts, ZN_F32, "param_gather", err);
        uint16_t *st = (uint16_t *)E->zpp.zq;   /* real 16-bit values travel, as in ag_dt */
        k->pack16(E->dev, E->dt, st + gi * piece, send, piece);
        int rc = zn_group_all_gather(c, g, st + gi * piece, st, E->counts, E->dt, "param_gather", err);
        if (!rc) k->unpack16(E->dev, E->dt, full, st, piece * g.size);
        return rc;
    }
    /* qwZ: int8 codes and fp32 scales of this rank's piece, gathered in
       place; every piece, this rank's too, comes back dequantized */
    const long ng = zn_quant_ngroups(piece, ZN_Q8_GROUP);
    unsigned char *q = E->zpp.zq;
    float *s = E->zpp.zs;
    k->quant(E->dev, 8, send, piece, ZN_Q8_GROUP, q + gi * piece, s + gi * ng);
    int rc = zn_group_all_gather(c, g, q + gi * piece, q, E->counts, ZN_U8, "param_gather", err);
    for (int j = 0; j < g.size; j++) E->counts[j] = ng;
    if (!rc) rc = zn_group_all_gather(c, g, s + gi * ng, s, E->counts, ZN_F32, "param_gather", err);
    for (int j = 0; j < g.size && !rc; j++)
        k->dequant(E->dev, 8, q + j * piece, s + j * ng, piece, ZN_Q8_GROUP, E->dt, full + j * piece);
    return rc;
}

/* qwZ's coalesced gather of the persistent params (Z-S3-008): each param's
 * piece quantized on its own groups, as zn_zpp_gather does, into one codes
 * and one scales block per rank; one all-gather of each over the world;
 * every rank's piece of each param dequantized into its full copy. */
int zn_qwz_gather_coalesced(ZnEngine *E, const float *mine, const int *plist, int n, ZnErr *err) {
    const ZnLayout *L = &E->L;
    const ZnKernels *k = E->k;
    const ZnGroup g = zn_group(E->world.size, 1);
    const int gi = zn_group_index(&E->world, g), W = g.size;
    long Sc = 0, Ss = 0;   /* one rank's codes (1 byte an element) and scales */
    for (int i = 0; i < n; i++) {
        Sc += L->s3_pn[plist[i]];
        Ss += zn_quant_ngroups(L->s3_pn[plist[i]], ZN_Q8_GROUP);
    }
    unsigned char *q = zn_dev_alloc(E->dev, (size_t)(Sc > 0 ? Sc : 1) * (size_t)W, ZN_MEM_BUCKETS, err);
    float *sc = q ? zn_dev_alloc(E->dev, (size_t)(Ss > 0 ? Ss : 1) * (size_t)W * sizeof(float), ZN_MEM_BUCKETS, err)
                  : NULL;
    if (!sc) {
        zn_dev_free(E->dev, q);
        return err->code;
    }
    long oc = 0, os = 0;
    for (int i = 0; i < n; i++) {
        const long pn = L->s3_pn[plist[i]];
        k->quant(E->dev, 8, mine + oc, pn, ZN_Q8_GROUP, q + gi * Sc + oc, sc + gi * Ss + os);
        oc += pn;
        os += zn_quant_ngroups(pn, ZN_Q8_GROUP);
    }
    for (int j = 0; j < W; j++) E->counts[j] = Sc;
    int rc = zn_group_all_gather(E->comm, g, q + gi * Sc, q, E->counts, ZN_U8, "param_gather", err);
    for (int j = 0; j < W; j++) E->counts[j] = Ss;
    if (!rc) rc = zn_group_all_gather(E->comm, g, sc + gi * Ss, sc, E->counts, ZN_F32, "param_gather", err);
    oc = os = 0;
    for (int i = 0; i < n && !rc; i++) {
        const long pn = L->s3_pn[plist[i]];
        for (int j = 0; j < W; j++)
            k->dequant(E->dev, 8, q + j * Sc + oc, sc + j * Ss + os, pn, ZN_Q8_GROUP, E->dt,
                       E->full[plist[i]] + (long)j * pn);
        oc += pn;
        os += zn_quant_ngroups(pn, ZN_Q8_GROUP);
    }
    zn_dev_free(E->dev, sc);
    zn_dev_free(E->dev, q);
    return rc;
}

/* ------------------------------------------------------------------ qgZ */

/* x[0..len) = the fixed tree (Z-SIM-002) over pieces lo..lo+n-1 of x, each
 * len values, summed in fp32; the result lands in piece lo. */
static void tree_sum(ZnEngine *E, float *x, int lo, int n, long len) {
    if (n <= 1) return;
    int h = 1;
    while (h * 2 < n) h *= 2;
    tree_sum(E, x, lo, h, len);
    tree_sum(E, x, lo + h, n - h, len);
    E->k->add(E->dev, ZN_F32, x + (long)lo * len, x + (long)(lo + h) * len, len);
}

/* One hop: pieces of len values in f quantized to int4, exchanged in group
 * g (piece j to member j), dequantized back into f in member order and
 * summed over members; the sum is in f[0..len). */
static int hop(ZnEngine *E, ZnGroup g, float *f, long len, ZnErr *err) {
    const ZnKernels *k = E->k;
    const long nb = zn_q4_bytes(len), ng = zn_quant_ngroups(len, ZN_Q4_GROUP);
    unsigned char *qs = E->zpp.zq, *qr = E->zpp.zq + E->zpp.zq_half;
    float *ss = E->zpp.zs, *sr = E->zpp.zs + E->zpp.zs_half;
    for (int j = 0; j < g.size; j++) k->quant(E->dev, 4, f + j * len, len, ZN_Q4_GROUP, qs + j * nb, ss + j * ng);
    int rc = zn_group_all_to_all(E->comm, g, qs, qr, nb, ZN_U8, "grad_reduce", err);
    if (!rc) rc = zn_group_all_to_all(E->comm, g, ss, sr, ng, ZN_F32, "grad_reduce", err);
    if (rc) return rc;
    for (int j = 0; j < g.size; j++) k->dequant(E->dev, 4, qr + j * nb, sr + j * ng, len, ZN_Q4_GROUP, ZN_F32, f + j * len);
    tree_sum(E, f, 0, g.size, len);
    return 0;
}

int zn_qgz_reduce(ZnEngine *E, const ZnBucket *bk, float *buf, float *mine, ZnErr *err) {
    const int per = E->world.per_node, nodes = zn_world_nodes(&E->world);
    const long B = bk->block, n1 = (long)nodes * B;
    float *f = E->zpp.zf;
    /* the piece for local peer j: the blocks of every node's rank j, in node
       order (DeepSpeed's swizzle) */
    for (int j = 0; j < per; j++)
        for (int b = 0; b < nodes; b++)
            E->k->copy(E->dev, f + (long)j * n1 + (long)b * B, buf + (long)(b * per + j) * B, (size_t)B * sizeof(float));
    /* hop 1, inside the node: f[0..n1) = this node's sum of the blocks of
       local rank l on every node */
    int rc = hop(E, zn_group(per, 1), f, n1, err);
    /* hop 2, across nodes among the ranks of one local rank: block b goes
       to node b; f[0..B) = the sum over nodes of this rank's block */
    if (!rc) rc = hop(E, zn_group(nodes, per), f, B, err);
    if (rc) return rc;
    E->k->copy(E->dev, mine, f, (size_t)B * sizeof(float));
    if (E->cdt != ZN_F32) E->k->round_dt(E->dev, E->cdt, mine, B);
    return 0;
}
