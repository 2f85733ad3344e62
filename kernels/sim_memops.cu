/* sim_memops.cu: the simulator's collectives over GPU memory (spec
 * Z-CUDA-006): N rank threads sharing one GPU keep the simulator's
 * protocol, tree order, rounding and byte counters (sim/); only the memory
 * operations move to the GPU. Each rank's copies and reductions run on its
 * own device's stream and are waited for before the collective's next sync;
 * before a rank posts its buffers its stream is synchronised, so peers read
 * finished data. Host buffers (a loss, a norm's pieces) still work: copies
 * between host memory use memcpy, a reduction over host memory the host
 * tree. */
#include <stdlib.h>
#include <string.h>
#include "cuda_dev.h"
#include "comm/nccl.h"
extern "C" {
#include "core/half.h"
}

struct ZnCudaSim {
    int world;
    ZnDevice **dev;        /* [world]: attached by each rank on its thread */
    void **dscratch;       /* [world] device staging */
    size_t *dcap;
    void **hscratch;       /* [world] host staging */
    size_t *hcap;
    void **tiles;          /* [world] host tree tiles */
    const void ***dsends;  /* [world] device copy of the send pointers */
};

/* ------------------------------------------------------------ the tree */

/* The fixed tree of comm.h over world leaves, for one element: the leaves
 * split into blocks of the binary digits of world (largest first), each a
 * full pairwise tree; tree(lo, n) = full(lo, h) + tree(lo + h, n - h), so the
 * blocks combine from the right. Left operands stay on the left (a max of
 * two NaNs keeps the left one, as on the host). */
template <typename T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

template <int DT> __device__ __forceinline__ float load_leaf(const void *p, long i) {
    if (DT == ZN_F16) return zn_f16_to_f32(((const uint16_t *)p)[i]);
    if (DT == ZN_BF16) return zn_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
/* comm/sumtree.c's combine: add rounded to the dtype after every add, or the
 * NaN-keeping max */
template <int DT, int MAX> __device__ __forceinline__ float comb(float a, float b) {
    if (MAX) {
        float m = b > a ? b : a;
        m = b != b ? b : m;
        return a != a ? a : m;
    }
    float s = a + b;
    if (DT == ZN_F16) return zn_round_f16(s);
    if (DT == ZN_BF16) return zn_round_bf16(s);
    return s;
}
template <int MAX> __device__ __forceinline__ double comb64(double a, double b) {
    if (MAX) {
        double m = b > a ? b : a;
        m = b != b ? b : m;
        return a != a ? a : m;
    }
    return a + b;
}

/* 2^12 = ZN_SIM_MAX_WORLD leaves: 13 levels, and at most 12 power-of-two
   blocks in the binary digits of the world size */
#define MAX_LEVELS 13
#define ZN_SIM_MAX_WORLD_CUDA 4096

/* full pairwise tree over leaves [lo, lo + n), n a power of two: a binary
 * counter of partial sums, one per level (the left operand is the older) */
template <int DT, int MAX>
__device__ float full32(const void *const *sends, int lo, int n, long i) {
    float st[MAX_LEVELS];
    for (int q = 0; q < n; q++) {
        float v = load_leaf<DT>(sends[lo + q], i);
        int lvl = 0;
        for (int b = q; b & 1; b >>= 1) v = comb<DT, MAX>(st[lvl++], v);
        st[lvl] = v;
    }
    int top = 0;
    while ((1 << top) < n) top++;
    return st[top];
}
template <int MAX>
__device__ double full64(const void *const *sends, int lo, int n, long i) {
    double st[MAX_LEVELS];
    for (int q = 0; q < n; q++) {
        double v = ((const double *)sends[lo + q])[i];
        int lvl = 0;
        for (int b = q; b & 1; b >>= 1) v = comb64<MAX>(st[lvl++], v);
        st[lvl] = v;
    }
    int top = 0;
    while ((1 << top) < n) top++;
    return st[top];
}

/* the power-of-two blocks of tree(0, world): the split h is the largest
 * power of two strictly below n, and a power of two is one full block */
__host__ __device__ static int next_block(int n) {
    if ((n & (n - 1)) == 0) return n;
    int h = 1;
    while (h * 2 < n) h *= 2;
    return h;
}

/* tree(0, world) as its power-of-two blocks, left to right: block b covers
 * ranks start[b] .. start[b] + size[b] - 1. Returns the number of blocks. */
__host__ __device__ static int tree_blocks(int world, int *start, int *size) {
    int nb = 0;
    for (int lo = 0, n = world; n > 0; nb++) {
        int h = next_block(n);
        start[nb] = lo;
        size[nb] = h;
        lo += h;
        n -= h;
    }
    return nb;
}

template <int DT, int MAX>
__global__ void k_tree32(const void *const *sends, int world, long off, long len, void *out) {
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < len; e += (long)gridDim.x * blockDim.x) {
        long i = off + e;
        /* blocks left to right, then combined right to left */
        int start[MAX_LEVELS], size[MAX_LEVELS];
        int nb = tree_blocks(world, start, size);
        float acc = full32<DT, MAX>(sends, start[nb - 1], size[nb - 1], i);
        for (int b = nb - 2; b >= 0; b--) acc = comb<DT, MAX>(full32<DT, MAX>(sends, start[b], size[b], i), acc);
        if (DT == ZN_F16) ((uint16_t *)out)[e] = zn_f32_to_f16(acc);
        else if (DT == ZN_BF16) ((uint16_t *)out)[e] = zn_f32_to_bf16(acc);
        else ((float *)out)[e] = acc;
    }
}

template <int MAX>
__global__ void k_tree64(const void *const *sends, int world, long off, long len, void *out) {
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < len; e += (long)gridDim.x * blockDim.x) {
        long i = off + e;
        int start[MAX_LEVELS], size[MAX_LEVELS];
        int nb = tree_blocks(world, start, size);
        double acc = full64<MAX>(sends, start[nb - 1], size[nb - 1], i);
        for (int b = nb - 2; b >= 0; b--) acc = comb64<MAX>(full64<MAX>(sends, start[b], size[b], i), acc);
        ((double *)out)[e] = acc;
    }
}

/* ------------------------------------------------------------ the hooks */

static int rank_dev(ZnCudaSim *s, int rank, ZnDevice **d, ZnErr *err) {
    *d = s->dev[rank];
    if (!*d) return zn_err(err, ZN_E_INTERNAL, "cuda sim: rank %d has no device attached (zn_cuda_sim_attach)", rank);
    return 0;
}

static int cuda_err(ZnErr *err, int rank, const char *what, cudaError_t e) {
    return zn_err(err, ZN_E_COMM, "cuda sim: rank %d: %s: %s", rank, what, cudaGetErrorString(e));
}

/* Whether a kernel can read p: GPU, managed or pinned (mapped) memory. */
static int on_device(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();   /* clear it: an unknown pointer is host memory */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged || a.type == cudaMemoryTypeHost;
}

static int ops_ready(void *ctx, int rank, ZnErr *err) {
    ZnCudaSim *s = (ZnCudaSim *)ctx;
    ZnDevice *d;
    int rc = rank_dev(s, rank, &d, err);
    if (rc) return rc;
    if (!zn_cuda_ok(d)) return zn_cuda_check(d, err);   /* a failed kernel: its buffers are not valid */
    cudaError_t e = cudaStreamSynchronize(zn_cuda_dev(d)->stream);
    return e == cudaSuccess ? 0 : cuda_err(err, rank, "synchronising before the collective", e);
}

static int ops_copy(void *ctx, int rank, void *dst, const void *src, size_t bytes, ZnErr *err) {
    ZnCudaSim *s = (ZnCudaSim *)ctx;
    ZnDevice *d;
    int rc = rank_dev(s, rank, &d, err);
    if (rc) return rc;
    if (!on_device(dst) && !on_device(src)) {
        memcpy(dst, src, bytes);
        return 0;
    }
    cudaStream_t st = zn_cuda_dev(d)->stream;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    return e == cudaSuccess ? 0 : cuda_err(err, rank, "collective copy", e);
}

static int ops_reduce(void *ctx, int rank, const void *const *sends, int world, ZnDtype dt, ZnRedOp red, long off,
                      long len, void *out, ZnErr *err) {
    ZnCudaSim *s = (ZnCudaSim *)ctx;
    ZnDevice *d;
    int rc = rank_dev(s, rank, &d, err);
    if (rc) return rc;
    int ndev = on_device(out);
    for (int q = 0; q < world; q++) ndev += on_device(sends[q]);
    if (ndev == 0) {   /* all host memory: the simulator's own tree */
        zn_tree_reduce_host(sends, world, dt, red, off, len, out, s->tiles[rank]);
        return 0;
    }
    if (ndev != world + 1)
        return zn_err(err, ZN_E_USAGE, "cuda sim: rank %d: a reduction mixes host and GPU buffers", rank);
    cudaStream_t st = zn_cuda_dev(d)->stream;
    cudaError_t e = cudaMemcpyAsync(s->dsends[rank], sends, (size_t)world * sizeof(void *), cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess) return cuda_err(err, rank, "collective reduce", e);
    const void *const *ds = s->dsends[rank];
    unsigned blocks = zn_cuda_blocks(d, len);
    int mx = red == ZN_MAX;
    if (dt == ZN_F64) {
        if (mx) k_tree64<1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
        else k_tree64<0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
    } else if (dt == ZN_F16) {
        if (mx) k_tree32<ZN_F16, 1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
        else k_tree32<ZN_F16, 0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
    } else if (dt == ZN_BF16) {
        if (mx) k_tree32<ZN_BF16, 1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
        else k_tree32<ZN_BF16, 0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
    } else {
        if (mx) k_tree32<ZN_F32, 1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
        else k_tree32<ZN_F32, 0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(ds, world, off, len, out);
    }
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    return e == cudaSuccess ? 0 : cuda_err(err, rank, "collective reduce", e);
}

/* Staging like `like`: GPU memory for GPU buffers, host memory otherwise. */
static int ops_scratch(void *ctx, int rank, size_t bytes, const void *like, void **out, ZnErr *err) {
    ZnCudaSim *s = (ZnCudaSim *)ctx;
    if (like && on_device(like)) {
        if (bytes > s->dcap[rank]) {
            if (s->dscratch[rank]) cudaFree(s->dscratch[rank]);
            s->dscratch[rank] = NULL;
            s->dcap[rank] = 0;
            cudaError_t e = cudaMalloc(&s->dscratch[rank], bytes);
            if (e != cudaSuccess) return cuda_err(err, rank, "collective staging", e);
            s->dcap[rank] = bytes;
        }
        *out = s->dscratch[rank];
        return 0;
    }
    if (bytes > s->hcap[rank]) {
        void *p = realloc(s->hscratch[rank], bytes);
        if (!p) return zn_err(err, ZN_E_NOMEM, "cuda sim: rank %d: " ZN_NOMEM_MSG " for staging", rank);
        s->hscratch[rank] = p;
        s->hcap[rank] = bytes;
    }
    *out = s->hscratch[rank];
    return 0;
}

/* ---------------------------------------------------------- lifetime */

extern "C" ZnCudaSim *zn_cuda_sim_new(int world, ZnErr *err) {
    if (world < 1 || world > ZN_SIM_MAX_WORLD_CUDA) {
        zn_err(err, ZN_E_USAGE, "cuda sim: world %d out of range 1..%d", world, ZN_SIM_MAX_WORLD_CUDA);
        return NULL;
    }
    ZnCudaSim *s = (ZnCudaSim *)calloc(1, sizeof *s);
    size_t w = (size_t)world;
    if (s) {
        s->world = world;
        s->dev = (ZnDevice **)calloc(w, sizeof *s->dev);
        s->dscratch = (void **)calloc(w, sizeof(void *));
        s->hscratch = (void **)calloc(w, sizeof(void *));
        s->tiles = (void **)calloc(w, sizeof(void *));
        s->dsends = (const void ***)calloc(w, sizeof *s->dsends);
        s->dcap = (size_t *)calloc(w, sizeof(size_t));
        s->hcap = (size_t *)calloc(w, sizeof(size_t));
    }
    int ok = s && s->dev && s->dscratch && s->hscratch && s->tiles && s->dsends && s->dcap && s->hcap;
    for (int r = 0; ok && r < world; r++) ok = (s->tiles[r] = malloc(zn_tree_tiles_bytes(world))) != NULL;
    if (!ok) {
        zn_cuda_sim_free(s);
        zn_err(err, ZN_E_NOMEM, "cuda sim: " ZN_NOMEM_MSG);
        return NULL;
    }
    return s;
}

extern "C" void zn_cuda_sim_memops(ZnCudaSim *s, ZnSimMemOps *ops) {
    ops->ready = ops_ready;
    ops->copy = ops_copy;
    ops->reduce = ops_reduce;
    ops->scratch = ops_scratch;
    ops->ctx = s;
}

/* Runs on the rank's thread with its GPU current: the per-rank device
 * memory is made (and later freed) there. */
extern "C" int zn_cuda_sim_attach(ZnCudaSim *s, int rank, ZnDevice *d, ZnErr *err) {
    if (!s || rank < 0 || rank >= s->world) return zn_err(err, ZN_E_INTERNAL, "cuda sim: bad rank %d", rank);
    if (!d) {
        if (s->dsends[rank]) cudaFree((void *)s->dsends[rank]);
        if (s->dscratch[rank]) cudaFree(s->dscratch[rank]);
        s->dsends[rank] = NULL;
        s->dscratch[rank] = NULL;
        s->dcap[rank] = 0;
        s->dev[rank] = NULL;
        return 0;
    }
    if (!zn_cuda_dev(d) || strcmp(d->name, "cuda") != 0)
        return zn_err(err, ZN_E_INTERNAL, "cuda sim: rank %d attached a device that is not CUDA", rank);
    if (!s->dsends[rank]) {
        cudaError_t e = cudaMalloc((void **)&s->dsends[rank], (size_t)s->world * sizeof(void *));
        if (e != cudaSuccess) return cuda_err(err, rank, "attaching", e);
    }
    s->dev[rank] = d;
    return 0;
}

extern "C" void zn_cuda_sim_free(ZnCudaSim *s) {
    if (!s) return;
    for (int r = 0; r < s->world; r++) {
        if (s->dsends && s->dsends[r]) cudaFree((void *)s->dsends[r]);
        if (s->dscratch && s->dscratch[r]) cudaFree(s->dscratch[r]);
        if (s->hscratch) free(s->hscratch[r]);
        if (s->tiles) free(s->tiles[r]);
    }
    free(s->dev);
    free(s->dscratch);
    free(s->hscratch);
    free(s->tiles);
    free((void *)s->dsends);
    free(s->dcap);
    free(s->hcap);
    free(s);
}

/* ---------------------------------------- the tree for other communicators */

extern "C" int zn_cuda_tree_reduce(ZnDevice *d, const void *const *sends, int world, ZnDtype dt, ZnRedOp red,
                                   long len, void *out, ZnErr *err) {
    cudaStream_t st = zn_cuda_dev(d)->stream;
    /* the kernels read the buffer pointers from device memory */
    void *ds = zn_cuda_scratch(d, (size_t)world * sizeof(void *), "tree reduce pointers");
    if (!ds) return zn_cuda_check(d, err);
    cudaError_t e = cudaMemcpyAsync(ds, sends, (size_t)world * sizeof(void *), cudaMemcpyHostToDevice, st);
    if (e != cudaSuccess) return zn_err(err, ZN_E_COMM, "tree reduce: %s", cudaGetErrorString(e));
    const void *const *p = (const void *const *)ds;
    unsigned blocks = zn_cuda_blocks(d, len);
    int mx = red == ZN_MAX;
    if (dt == ZN_F64) {
        if (mx) k_tree64<1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
        else k_tree64<0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
    } else if (dt == ZN_F16) {
        if (mx) k_tree32<ZN_F16, 1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
        else k_tree32<ZN_F16, 0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
    } else if (dt == ZN_BF16) {
        if (mx) k_tree32<ZN_BF16, 1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
        else k_tree32<ZN_BF16, 0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
    } else if (dt == ZN_F32) {
        if (mx) k_tree32<ZN_F32, 1><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
        else k_tree32<ZN_F32, 0><<<blocks, ZN_CUDA_THREADS, 0, st>>>(p, world, 0, len, out);
    } else {
        return zn_err(err, ZN_E_INTERNAL, "tree reduce: dtype %s cannot be reduced", zn_dtype_name(dt));
    }
    e = cudaGetLastError();
    return e == cudaSuccess ? 0 : zn_err(err, ZN_E_COMM, "tree reduce: %s", cudaGetErrorString(e));
}
