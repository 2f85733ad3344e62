/* mics.c: MiCS's groups and its hierarchical gather (mics.h, spec
 * Z-MICS-*). Sources: DeepSpeed runtime/zero/mics.py (MiCS_Init,
 * MiCS_AllGatherCoalescedHandle, MiCS_Optimizer.allreduce_mics_shard_grads),
 * runtime/zero/mics_utils.py (_generate_mics_config); the MiCS paper
 * (arXiv 2205.00119) §3. */
#include "engine/mics.h"
#include "comm/coll.h"

int zn_mics_init(ZnEngine *E, const ZnConfig *cfg, ZnErr *err) {
    const int W = E->world.size;
    const int S = E->P.mics_shard ? E->P.mics_shard : W;
    if (S > W || W % S)
        return zn_err(err, ZN_E_USAGE, "mics_shard_size %d does not divide the world size %d", S, W);
    E->pw = zn_world(S, E->world.rank % S, S);
    E->mics.shard = zn_group(S, 1);
    E->mics.repl = zn_group(W / S, S);
    if (!E->P.mics_shard) return 0;
    if (cfg->canonical)
        return zn_err(err, ZN_E_USAGE, "mics_shard_size with --canonical: canonical mode reduces in one tree over "
                      "the world, MiCS in the shard group and then across replicas");
    const int P = E->world.per_node;
    if (E->P.mics_hier && (S <= P || S % P))
        return zn_err(err, ZN_E_USAGE, "mics_hierarchical_params_gather: a shard group of %d ranks must span more "
                      "than one node of %d ranks, in whole nodes (DeepSpeed asserts it)", S, P);
    return 0;
}

void zn_mics_free(ZnEngine *E) {
    if (E->dev && E->mics.buf) zn_dev_free(E->dev, E->mics.buf);
    E->mics.buf = NULL;
}

/* The staging, made at the first gather for the largest parameter: K + S
 * pieces of its partition, in the model dtype (zn_mics_hier_gather_flat
 * counts on that size). */
static long max_pn(const ZnEngine *E) {
    long m = 0;
    for (int p = 0; p < E->L.nparams; p++) if (E->L.s3_pn[p] > m) m = E->L.s3_pn[p];
    return m;
}
static void *staging(ZnEngine *E, int K, ZnErr *err) {
    if (E->mics.buf) return E->mics.buf;
    size_t bytes = (size_t)(K + E->pw.size) * (size_t)max_pn(E) * zn_dtype_size(E->dt) + 1;
    E->mics.buf = zn_dev_alloc(E->dev, bytes, ZN_MEM_BUCKETS, err);
    return E->mics.buf;
}

/* The two-level gather through the staging X ((K + S) * pn values in the
 * model dtype). */
static int hier_gather(ZnEngine *E, const float *send, float *full, long pn, char *X, ZnErr *err) {
    const int S = E->pw.size, P = E->world.per_node, K = S / P;   /* K nodes per shard group */
    const ZnGroup inter = zn_group(K, P), intra = zn_group(P, 1);
    const int ji = zn_group_index(&E->world, inter);
    const ZnKernels *k = E->k;
    const ZnDtype dt = E->dt;
    const size_t es = zn_dtype_size(dt), piece = (size_t)pn * es;
    char *Y = X + (size_t)K * piece;
    /* this rank's piece, in the dtype that travels (16-bit values go as 16 bits) */
    if (dt == ZN_F32) k->copy(E->dev, X + ji * piece, send, piece);
    else k->pack16(E->dev, dt, (uint16_t *)(X + ji * piece), send, pn);
    /* across nodes: the pieces of this local rank on the group's K nodes */
    for (int j = 0; j < K; j++) E->counts[j] = pn;
    int rc = zn_group_all_gather(E->comm, inter, X + ji * piece, X, E->counts, dt, "param_gather", err);
    /* inside the node: every local rank's K pieces */
    for (int j = 0; j < P; j++) E->counts[j] = (long)K * pn;
    if (!rc) rc = zn_group_all_gather(E->comm, intra, X, Y, E->counts, dt, "param_gather", err);
    if (rc) return rc;
    /* Y holds local rank i's pieces of nodes 0..K-1 at (i*K + j): shard
       rank j*P + i's piece; into rank order */
    for (int i = 0; i < P; i++)
        for (int j = 0; j < K; j++) {
            const char *src = Y + (size_t)(i * K + j) * piece;
            float *dst = full + (long)(j * P + i) * pn;
            if (dt == ZN_F32) k->copy(E->dev, dst, src, piece);
            else k->unpack16(E->dev, dt, dst, (const uint16_t *)src, pn);
        }
    return 0;
}

int zn_mics_hier_gather(ZnEngine *E, const float *send, float *full, long pn, ZnErr *err) {
    char *X = staging(E, E->pw.size / E->world.per_node, err);
    return X ? hier_gather(E, send, full, pn, X, err) : err->code;
}

int zn_mics_hier_gather_flat(ZnEngine *E, const float *mine, float *flat, long n, ZnErr *err) {
    const int S = E->pw.size, K = S / E->world.per_node;
    if (n <= max_pn(E)) return zn_mics_hier_gather(E, mine, flat, n, err);   /* the engine's staging holds it */
    const size_t bytes = (size_t)(K + S) * (size_t)n * zn_dtype_size(E->dt) + 1;
    char *X = zn_dev_alloc(E->dev, bytes, ZN_MEM_BUCKETS, err);   /* this call's own */
    if (!X) return err->code;
    int rc = hier_gather(E, mine, flat, n, X, err);
    zn_dev_free(E->dev, X);
    return rc;
}
