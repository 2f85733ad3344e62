/* comm_nccl.cu: the NCCL communicator (spec Z-NCCL-*): one process per GPU,
 * collectives on the rank's CUDA stream, the simulator's byte counters.
 *
 * NCCL is loaded at run time (dlopen of libnccl.so.2, or ZINC_NCCL_LIB), so
 * zinc links and starts without it and GPU runners use the NCCL their
 * PyTorch environment carries (its lib directory on LD_LIBRARY_PATH).
 *
 * Exact mode: a reduce-scatter is grouped send/recv of each owner's slices
 * followed by the owner's sum in the simulator's fixed tree over rank index
 * (the tree kernel of sim_memops.cu), so results do not depend on NCCL's
 * algorithm or topology; an all-reduce is that reduce-scatter of comm.h's
 * even split plus an all-gather. Fast mode uses NCCL's own reductions where
 * they apply (equal counts), within the tolerances of Z-CUDA-005.
 *
 * Every collective waits on its stream with a deadline (ZINC_COMM_TIMEOUT,
 * default 1800 s) while polling ncclCommGetAsyncError: an NCCL error or a
 * timeout aborts the communicator and becomes a zinc error naming the rank
 * and the collective (the engine adds the step). Before every collective
 * the ranks all-gather their sequence records (comm_seq.h), as the other
 * process backends do. Arguments and byte counters are comm/coll.c's. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cuda_dev.h"
#include "comm/nccl.h"
extern "C" {
#include "comm/coll.h"
#include "comm/comm_seq.h"
#include "comm/store.h"
}

/* The NCCL entry points zinc uses, resolved once. */
typedef struct {
    void *lib;
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    const char *(*GetErrorString)(ncclResult_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
} NcclApi;

static NcclApi api;

static int load_nccl(ZnErr *err) {
    if (api.lib) return 0;
    const char *path = getenv("ZINC_NCCL_LIB");
    void *h = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return zn_err(err, ZN_E_USAGE, "NCCL: cannot load %s (%s); put NCCL's lib directory on LD_LIBRARY_PATH "
                      "(PyTorch environments: site-packages/nvidia/nccl/lib) or set ZINC_NCCL_LIB",
                      path && *path ? path : "libnccl.so.2", dlerror());
    struct { const char *name; void **slot; } syms[] = {
        {"ncclGetUniqueId", (void **)&api.GetUniqueId}, {"ncclCommInitRank", (void **)&api.CommInitRank},
        {"ncclCommDestroy", (void **)&api.CommDestroy}, {"ncclCommAbort", (void **)&api.CommAbort},
        {"ncclCommGetAsyncError", (void **)&api.CommGetAsyncError}, {"ncclGetErrorString", (void **)&api.GetErrorString},
        {"ncclAllReduce", (void **)&api.AllReduce}, {"ncclReduceScatter", (void **)&api.ReduceScatter},
        {"ncclAllGather", (void **)&api.AllGather}, {"ncclBroadcast", (void **)&api.Broadcast},
        {"ncclSend", (void **)&api.Send}, {"ncclRecv", (void **)&api.Recv},
        {"ncclGroupStart", (void **)&api.GroupStart}, {"ncclGroupEnd", (void **)&api.GroupEnd},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            dlclose(h);
            memset(&api, 0, sizeof api);
            return zn_err(err, ZN_E_USAGE, "NCCL: the library has no %s (NCCL >= 2.7 needed)", syms[i].name);
        }
    }
    api.lib = h;
    return 0;
}

typedef struct {
    ncclComm_t nccl;
    ZnDevice *dev;
    int exact;
    long calls;
    int broken;
    ZnErr broken_err;
    double timeout_s;
    ZnSeqRec *recs_host;     /* [world] */
    void *recs_dev;          /* [world] records on the GPU */
    char *slots;             /* exact reduce-scatter: every rank's slice of my piece */
    size_t slots_cap;
    const void **slot_ptrs;  /* [world] host array of slot pointers */
} NcclComm;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ncclDataType_t nccl_type(ZnDtype dt) {
    switch (dt) {
    case ZN_F32: return ncclFloat32;
    case ZN_F16: return ncclFloat16;
    case ZN_BF16: return ncclBfloat16;
    case ZN_F64: return ncclFloat64;
    case ZN_U64: return ncclUint64;
    default: return ncclUint8;
    }
}

static int fail(NcclComm *m, ZnErr *err) {
    m->broken = 1;
    m->broken_err = *err;
    return err->code;
}

static int nccl_fail(NcclComm *m, ncclResult_t r, const char *what, const char *tag, ZnErr *err) {
    zn_err(err, ZN_E_COMM, "NCCL %s '%s' failed: %s", what, tag ? tag : "", api.GetErrorString(r));
    return fail(m, err);
}

/* Waits for the rank's stream, polling NCCL's async error, with a deadline;
 * a failure or a timeout aborts the communicator (no rank waits forever). */
static int wait_done(ZnComm *c, const char *what, const char *tag, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    double deadline = now_s() + m->timeout_s;
    for (;;) {
        cudaError_t q = cudaStreamQuery(st);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) {
            zn_err(err, ZN_E_COMM, "rank %d: %s '%s': CUDA error %s", c->world.rank, what, tag ? tag : "", cudaGetErrorString(q));
            return fail(m, err);
        }
        ncclResult_t ae = ncclSuccess;
        api.CommGetAsyncError(m->nccl, &ae);
        if (ae != ncclSuccess && ae != ncclInProgress) {
            api.CommAbort(m->nccl);
            m->nccl = NULL;
            zn_err(err, ZN_E_COMM, "rank %d: NCCL %s '%s' failed: %s (a peer failed or the network broke)", c->world.rank,
                   what, tag ? tag : "", api.GetErrorString(ae));
            return fail(m, err);
        }
        if (now_s() > deadline) {
            api.CommAbort(m->nccl);
            m->nccl = NULL;
            /* the mark last: the collective layer then names the call (op,
               tag, call number) as for tcp and mpi (Z-RDV-009); NCCL cannot
               tell which peer it waits for */
            zn_err(err, ZN_E_COMM, "NCCL %s timed out after %.0f s: a peer is stuck or gone " ZN_COMM_TIMEOUT_MARK,
                   what, m->timeout_s);
            return fail(m, err);
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

static int check_sequence(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    const char *tag = k->tag;
    if (m->broken) {
        *err = m->broken_err;
        return err->code;
    }
    ZnSeqRec mine;
    k->call = ++m->calls;
    zn_seq_fill(&mine, k->call, k->op, k->dt, k->red, k->root, k->count, k->counts, k->grp.size, tag);
    zn_seq_group(&mine, k->grp);
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    char *mine_dev = (char *)m->recs_dev + (size_t)c->world.rank * sizeof mine;
    cudaError_t e = cudaMemcpyAsync(mine_dev, &mine, sizeof mine, cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess) return fail(m, (zn_err(err, ZN_E_COMM, "sequence record: %s", cudaGetErrorString(e)), err));
    ncclResult_t r = api.AllGather(mine_dev, m->recs_dev, sizeof mine, ncclUint8, m->nccl, st);
    if (r != ncclSuccess) return nccl_fail(m, r, "all-gather of sequence records", tag, err);
    int rc = wait_done(c, "sequence check", tag, err);
    if (rc) return rc;
    e = cudaMemcpy(m->recs_host, m->recs_dev, (size_t)c->world.size * sizeof mine, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return fail(m, (zn_err(err, ZN_E_COMM, "sequence record: %s", cudaGetErrorString(e)), err));
    if (zn_seq_check_all(m->recs_host, c->world.size, err)) return fail(m, err);
    return 0;
}

static int equal_counts(const long *counts, int world) {
    for (int q = 1; q < world; q++) if (counts[q] != counts[0]) return 0;
    return 1;
}

/* Exact reduce-scatter: every rank's slice of my piece arrives by grouped
 * send/recv, then the tree kernel sums them in rank-index order. */
static int scatter_sum(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp red,
                       const char *tag, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    const int W = c->world.size, me = c->world.rank;
    size_t es = zn_dtype_size(dt), piece = (size_t)counts[me] * es;
    if ((size_t)W * piece > m->slots_cap) {
        cudaFree(m->slots);
        m->slots = NULL;
        m->slots_cap = 0;
        cudaError_t e = cudaMalloc((void **)&m->slots, (size_t)W * piece);
        if (e != cudaSuccess)
            return fail(m, (zn_err(err, ZN_E_NOMEM, "NCCL reduce-scatter staging (%zu bytes): %s", (size_t)W * piece,
                                   cudaGetErrorString(e)), err));
        m->slots_cap = (size_t)W * piece;
    }
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    ncclDataType_t t = nccl_type(dt);
    api.GroupStart();
    size_t off = 0;
    for (int q = 0; q < W; q++) {
        const char *slice = (const char *)send + off;
        if (q != me) {
            api.Send(slice, (size_t)counts[q], t, q, m->nccl, st);
            api.Recv(m->slots + (size_t)q * piece, (size_t)counts[me], t, q, m->nccl, st);
        } else {
            cudaMemcpyAsync(m->slots + (size_t)q * piece, slice, piece, cudaMemcpyDeviceToDevice, st);
        }
        off += (size_t)counts[q] * es;
    }
    ncclResult_t r = api.GroupEnd();
    if (r != ncclSuccess) return nccl_fail(m, r, "reduce-scatter (send/recv)", tag, err);
    for (int q = 0; q < W; q++) m->slot_ptrs[q] = m->slots + (size_t)q * piece;
    int rc = zn_cuda_tree_reduce(m->dev, m->slot_ptrs, W, dt, red, counts[me], recv, err);
    if (rc) return fail(m, err);
    return wait_done(c, "reduce-scatter", tag, err);
}

/* All-gather of pieces of any sizes: one broadcast per owner in a group. */
static int gather_pieces(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, const char *tag,
                         ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    size_t es = zn_dtype_size(dt), off = 0;
    ncclResult_t r;
    if (equal_counts(counts, c->world.size)) {
        r = api.AllGather(send, recv, (size_t)counts[0], nccl_type(dt), m->nccl, st);
    } else {
        api.GroupStart();
        for (int q = 0; q < c->world.size; q++) {
            char *dst = (char *)recv + off;
            api.Broadcast(q == c->world.rank ? send : dst, dst, (size_t)counts[q], nccl_type(dt), q, m->nccl, st);
            off += (size_t)counts[q] * es;
        }
        r = api.GroupEnd();
    }
    if (r != ncclSuccess) return nccl_fail(m, r, "all-gather", tag, err);
    return wait_done(c, "all-gather", tag, err);
}

static int nc_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp op,
                             const char *tag, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    int rc;
    if (!m->exact && equal_counts(counts, c->world.size)) {   /* fast: NCCL's own reduction */
        ncclResult_t r = api.ReduceScatter(send, recv, (size_t)counts[0], nccl_type(dt), op == ZN_MAX ? ncclMax : ncclSum,
                                           m->nccl, zn_cuda_dev(m->dev)->stream);
        if (r != ncclSuccess) return nccl_fail(m, r, "reduce-scatter", tag, err);
        rc = wait_done(c, "reduce-scatter", tag, err);
    } else {
        rc = scatter_sum(c, send, recv, counts, dt, op, tag, err);
    }
    return rc;
}

static int nc_all_reduce(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    int rc = 0;
    if (!m->exact) {
        ncclResult_t r = api.AllReduce(buf, buf, (size_t)count, nccl_type(dt), op == ZN_MAX ? ncclMax : ncclSum, m->nccl,
                                       zn_cuda_dev(m->dev)->stream);
        if (r != ncclSuccess) return nccl_fail(m, r, "all-reduce", tag, err);
        rc = wait_done(c, "all-reduce", tag, err);
    } else {   /* the even split of comm.h, reduce-scattered in the tree and gathered back */
        const int W = c->world.size;
        long *counts = (long *)malloc((size_t)W * sizeof(long));
        if (!counts) return fail(m, (zn_nomem(err), err));
        zn_comm_even_counts(count, W, counts);
        long off = 0;
        for (int q = 0; q < c->world.rank; q++) off += counts[q];
        size_t es = zn_dtype_size(dt);
        void *tmp = NULL;
        cudaError_t e = cudaMalloc(&tmp, (size_t)counts[c->world.rank] * es + 16);
        if (e != cudaSuccess) rc = fail(m, (zn_err(err, ZN_E_NOMEM, "all-reduce staging: %s", cudaGetErrorString(e)), err));
        if (!rc) rc = scatter_sum(c, buf, tmp, counts, dt, op, tag, err);
        char *piece = (char *)buf + (size_t)off * es;
        if (!rc && cudaMemcpyAsync(piece, tmp, (size_t)counts[c->world.rank] * es, cudaMemcpyDeviceToDevice,
                                   zn_cuda_dev(m->dev)->stream) != cudaSuccess)
            rc = fail(m, (zn_err(err, ZN_E_COMM, "all-reduce: copy failed"), err));
        if (!rc) rc = gather_pieces(c, piece, buf, counts, dt, tag, err);
        cudaFree(tmp);
        free(counts);
    }
    return rc;
}

static int nc_broadcast(ZnComm *c, void *buf, long count, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    ncclResult_t r = api.Broadcast(buf, buf, (size_t)count, nccl_type(dt), root, m->nccl, zn_cuda_dev(m->dev)->stream);
    if (r != ncclSuccess) return nccl_fail(m, r, "broadcast", tag, err);
    return wait_done(c, "broadcast", tag, err);
}

/* ------------------------------------------------ group collectives */
/* Collectives inside groups of ranks (ZeRO++, MiCS; spec Z-GRP-004): point
 * to point among the members over the world communicator, grouped, and
 * sums in the tree kernel over member index, so no split communicator is
 * needed and the bits are the simulator's in either mode. */

static int group_slots(NcclComm *m, size_t bytes, ZnErr *err) {
    if (bytes <= m->slots_cap) return 0;
    cudaFree(m->slots);
    m->slots = NULL;
    m->slots_cap = 0;
    cudaError_t e = cudaMalloc((void **)&m->slots, bytes);
    if (e != cudaSuccess)
        return fail(m, (zn_err(err, ZN_E_NOMEM, "NCCL group staging (%zu bytes): %s", bytes, cudaGetErrorString(e)), err));
    m->slots_cap = bytes;
    return 0;
}

static int group_scatter_sum(ZnComm *c, const ZnCollCall *k, const void *send, void *recv, const long *counts,
                             ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    const int G = k->grp.size, me = k->gi;
    size_t es = zn_dtype_size(k->dt), piece = (size_t)counts[me] * es;
    int rc = group_slots(m, (size_t)G * piece + 1, err);
    if (rc) return rc;
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    ncclDataType_t t = nccl_type(k->dt);
    api.GroupStart();
    size_t off = 0;
    for (int j = 0; j < G; j++) {
        const char *slice = (const char *)send + off;
        int q = zn_group_member(&c->world, k->grp, j);
        if (j != me) {
            if (counts[j]) api.Send(slice, (size_t)counts[j], t, q, m->nccl, st);
            if (counts[me]) api.Recv(m->slots + (size_t)j * piece, (size_t)counts[me], t, q, m->nccl, st);
        } else if (piece) {
            cudaMemcpyAsync(m->slots + (size_t)j * piece, slice, piece, cudaMemcpyDeviceToDevice, st);
        }
        off += (size_t)counts[j] * es;
    }
    ncclResult_t r = api.GroupEnd();
    if (r != ncclSuccess) return nccl_fail(m, r, "group reduce-scatter (send/recv)", k->tag, err);
    for (int j = 0; j < G; j++) m->slot_ptrs[j] = m->slots + (size_t)j * piece;
    if (counts[me] && zn_cuda_tree_reduce(m->dev, m->slot_ptrs, G, k->dt, k->red, counts[me], recv, err)) return fail(m, err);
    return wait_done(c, "group reduce-scatter", k->tag, err);
}

static int group_gather(ZnComm *c, const ZnCollCall *k, const void *send, void *recv, const long *counts, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    const int G = k->grp.size, me = k->gi;
    size_t es = zn_dtype_size(k->dt), off = 0;
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    ncclDataType_t t = nccl_type(k->dt);
    api.GroupStart();
    for (int j = 0; j < G; j++) {
        char *dst = (char *)recv + off;
        int q = zn_group_member(&c->world, k->grp, j);
        if (j == me) {
            if (dst != send && counts[j]) cudaMemcpyAsync(dst, send, (size_t)counts[j] * es, cudaMemcpyDeviceToDevice, st);
        } else {
            if (counts[me]) api.Send(send, (size_t)counts[me], t, q, m->nccl, st);
            if (counts[j]) api.Recv(dst, (size_t)counts[j], t, q, m->nccl, st);
        }
        off += (size_t)counts[j] * es;
    }
    ncclResult_t r = api.GroupEnd();
    if (r != ncclSuccess) return nccl_fail(m, r, "group all-gather (send/recv)", k->tag, err);
    return wait_done(c, "group all-gather", k->tag, err);
}

static int group_all_reduce(ZnComm *c, const ZnCollCall *k, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    const int G = k->grp.size;
    long *counts = (long *)malloc((size_t)G * sizeof(long));
    if (!counts) return fail(m, (zn_nomem(err), err));
    zn_comm_even_counts(k->count, G, counts);
    long off = 0;
    for (int j = 0; j < k->gi; j++) off += counts[j];
    size_t es = zn_dtype_size(k->dt);
    char *piece = (char *)k->recv + (size_t)off * es;
    void *tmp = NULL;
    int rc = 0;
    if (cudaMalloc(&tmp, (size_t)counts[k->gi] * es + 16) != cudaSuccess)
        rc = fail(m, (zn_err(err, ZN_E_NOMEM, "group all-reduce staging"), err));
    if (!rc) rc = group_scatter_sum(c, k, k->recv, tmp, counts, err);
    if (!rc && counts[k->gi] && cudaMemcpyAsync(piece, tmp, (size_t)counts[k->gi] * es, cudaMemcpyDeviceToDevice,
                                                 zn_cuda_dev(m->dev)->stream) != cudaSuccess)
        rc = fail(m, (zn_err(err, ZN_E_COMM, "group all-reduce: copy failed"), err));
    if (!rc) rc = group_gather(c, k, piece, k->recv, counts, err);
    cudaFree(tmp);
    free(counts);
    return rc;
}

static int group_all_to_all(ZnComm *c, const ZnCollCall *k, ZnErr *err) {
    NcclComm *m = (NcclComm *)c->impl;
    size_t piece = (size_t)k->count * zn_dtype_size(k->dt);
    cudaStream_t st = zn_cuda_dev(m->dev)->stream;
    ncclDataType_t t = nccl_type(k->dt);
    if (!piece) return 0;
    api.GroupStart();
    for (int j = 0; j < k->grp.size; j++) {
        const char *src = (const char *)k->send + (size_t)j * piece;
        char *dst = (char *)k->recv + (size_t)j * piece;
        int q = zn_group_member(&c->world, k->grp, j);
        if (j == k->gi) cudaMemcpyAsync(dst, src, piece, cudaMemcpyDeviceToDevice, st);
        else {
            api.Send(src, (size_t)k->count, t, q, m->nccl, st);
            api.Recv(dst, (size_t)k->count, t, q, m->nccl, st);
        }
    }
    ncclResult_t r = api.GroupEnd();
    if (r != ncclSuccess) return nccl_fail(m, r, "all-to-all (send/recv)", k->tag, err);
    return wait_done(c, "all-to-all", k->tag, err);
}

/* One call the layer has checked: the sequence check, then NCCL. */
static int nc_run(ZnComm *c, ZnCollCall *k, ZnErr *err) {
    int rc = check_sequence(c, k, err);
    if (rc) return rc;
    if (k->grp.size != c->world.size || k->op == ZN_OP_ALL_TO_ALL) {
        switch (k->op) {
        case ZN_OP_REDUCE_SCATTER: return group_scatter_sum(c, k, k->send, k->recv, k->counts, err);
        case ZN_OP_ALL_GATHER: return group_gather(c, k, k->send, k->recv, k->counts, err);
        case ZN_OP_ALL_REDUCE: return group_all_reduce(c, k, err);
        case ZN_OP_ALL_TO_ALL: return group_all_to_all(c, k, err);
        default: return zn_err(err, ZN_E_INTERNAL, "%s in a group", zn_coll_op_name(k->op));
        }
    }
    switch (k->op) {
    case ZN_OP_ALL_REDUCE: return nc_all_reduce(c, k->recv, k->count, k->dt, k->red, k->tag, err);
    case ZN_OP_REDUCE_SCATTER: return nc_reduce_scatter(c, k->send, k->recv, k->counts, k->dt, k->red, k->tag, err);
    case ZN_OP_ALL_GATHER: return gather_pieces(c, k->send, k->recv, k->counts, k->dt, k->tag, err);
    case ZN_OP_BROADCAST: return nc_broadcast(c, k->recv, k->count, k->dt, k->root, k->tag, err);
    default: return 0; /* barrier: the sequence check is an all-gather every rank must reach */
    }
}

extern "C" int zn_nccl_unique_id(unsigned char id[ZN_NCCL_ID_BYTES], ZnErr *err) {
    int rc = load_nccl(err);
    if (rc) return rc;
    ncclUniqueId u;
    ncclResult_t r = api.GetUniqueId(&u);
    if (r != ncclSuccess) return zn_err(err, ZN_E_COMM, "ncclGetUniqueId failed: %s", api.GetErrorString(r));
    memcpy(id, &u, sizeof u);
    return 0;
}

/* Frees an NcclComm at any stage of its making (m may be NULL): a failed
 * communicator is aborted, a healthy one destroyed. */
static void nc_free_impl(NcclComm *m) {
    if (!m) return;
    if (m->nccl) (m->broken ? api.CommAbort : api.CommDestroy)(m->nccl);
    cudaFree(m->recs_dev);
    cudaFree(m->slots);
    free(m->recs_host);
    free(m->slot_ptrs);
    free(m);
}

extern "C" ZnComm *zn_comm_nccl_new(ZnDevice *dev, int rank, int world, const unsigned char id[ZN_NCCL_ID_BYTES],
                                    int exact, ZnErr *err) {
    if (load_nccl(err)) return NULL;
    ZnComm *c = (ZnComm *)calloc(1, sizeof *c);
    NcclComm *m = (NcclComm *)calloc(1, sizeof *m);
    if (m) {
        m->recs_host = (ZnSeqRec *)calloc((size_t)world, sizeof(ZnSeqRec));
        m->slot_ptrs = (const void **)calloc((size_t)world, sizeof(void *));
    }
    if (!c || !m || !m->recs_host || !m->slot_ptrs) {
        nc_free_impl(m);
        free(c);
        zn_nomem(err);
        return NULL;
    }
    m->dev = dev;
    m->exact = exact;
    /* the bound of every process transport, torch.distributed's default (Z-RDV-009) */
    m->timeout_s = zn_comm_env_seconds("ZINC_COMM_TIMEOUT", ZN_COMM_TIMEOUT_DEFAULT);
    cudaError_t e = cudaMalloc(&m->recs_dev, (size_t)world * sizeof(ZnSeqRec));
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = e == cudaSuccess ? api.CommInitRank(&m->nccl, world, u, rank) : ncclUnhandledCudaError;
    if (e != cudaSuccess || r != ncclSuccess) {
        zn_err(err, ZN_E_COMM, "rank %d: NCCL init of %d ranks failed: %s", rank, world,
               e != cudaSuccess ? cudaGetErrorString(e) : api.GetErrorString(r));
        m->nccl = NULL;   /* a failed init leaves nothing to destroy */
        nc_free_impl(m);
        free(c);
        return NULL;
    }
    zn_coll_init(c, rank, world, m, nc_run);
    return c;
}

extern "C" void zn_comm_nccl_free(ZnComm *c) {
    if (!c) return;
    nc_free_impl((NcclComm *)c->impl);
    free(c);
}
