/* reduce.cu: reductions whose result cannot depend on the order of the sum
 * (spec Z-NORM-*, Z-CUDA-003): absmax (a max of integers: the bits of |x|)
 * and sumsq_fixed (a 128-bit integer sum of per-element truncations), so a
 * parallel tree gives the host's bits; and colsum, whose float sums keep
 * the host's row order (one thread per column). */
#include "cuda_dev.h"

#define RED_THREADS 256
#define RED_BLOCKS_MAX 1024   /* partials the final pass sums */

/* ---------------------------------------------------------------- absmax */

/* For non-negative floats the order of the bit patterns is the order of the
 * values, so max over finite |x| is a max of uint32 (exact, any order). */
__global__ void k_absmax(const float *x, long n, unsigned *out /* [0]: max bits, [1]: nonfinite */) {
    unsigned mx = 0, bad = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        unsigned a = __float_as_uint(x[i]) & 0x7fffffffu;
        if (a >= 0x7f800000u) bad = 1;   /* inf or NaN */
        else mx = a > mx ? a : mx;
    }
    mx = __reduce_max_sync(0xffffffffu, mx);
    bad = __reduce_or_sync(0xffffffffu, bad);
    if ((threadIdx.x & 31) == 0) {
        atomicMax(&out[0], mx);
        if (bad) atomicOr(&out[1], 1u);
    }
}

extern "C" ZnAbsMax zn_cuda_absmax(ZnDevice *d, const float *x, long n) {
    ZnAbsMax r = {0.0f, 0};
    ZnCudaDev *c = zn_cuda_dev(d);
    if (n <= 0) return r;
    unsigned *acc = (unsigned *)zn_cuda_scratch(d, 2 * sizeof(unsigned), "absmax scratch");
    if (!acc || !zn_cuda_ok(d)) return (ZnAbsMax){0.0f, 1};   /* a failure must not look like finite data */
    if (zn_cuda_fail(d, "absmax", cudaMemsetAsync(acc, 0, 2 * sizeof(unsigned), c->stream))) return (ZnAbsMax){0.0f, 1};
    long blocks = (n + RED_THREADS - 1) / RED_THREADS;
    if (blocks > RED_BLOCKS_MAX) blocks = RED_BLOCKS_MAX;
    k_absmax<<<(unsigned)blocks, RED_THREADS, 0, c->stream>>>(x, n, acc);
    if (zn_cuda_launched(d, "absmax")) return (ZnAbsMax){0.0f, 1};
    unsigned *h = (unsigned *)c->pinned;
    if (zn_cuda_fail(d, "absmax", cudaMemcpyAsync(h, acc, 2 * sizeof(unsigned), cudaMemcpyDeviceToHost, c->stream)) ||
        zn_cuda_sync(d, "absmax"))
        return (ZnAbsMax){0.0f, 1};
    uint32_t bits = h[0];
    memcpy(&r.maxabs, &bits, sizeof bits);
    r.nonfinite = h[1] != 0;
    return r;
}

/* ----------------------------------------------------------- sumsq_fixed */

/* 128-bit accumulation with carry: integer addition, so any grouping gives
 * the same sum. */
struct U128 { unsigned long long hi, lo; };
__device__ __forceinline__ U128 u128_add(U128 a, U128 b) {
    U128 r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo ? 1ull : 0ull);
    return r;
}
__device__ __forceinline__ U128 warp_sum(U128 v) {
    for (int o = 16; o > 0; o >>= 1) {
        U128 w;
        w.hi = __shfl_down_sync(0xffffffffu, v.hi, o);
        w.lo = __shfl_down_sync(0xffffffffu, v.lo, o);
        v = u128_add(v, w);
    }
    return v;
}
/* lane 0 of warp 0 gets the block's sum */
__device__ U128 block_sum(U128 v) {
    __shared__ U128 part[RED_THREADS / 32];
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        U128 z = {0, 0};
        v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : z;
        v = warp_sum(v);
    }
    return v;
}

/* The term of zn_sumsq_fixed: g^2 is exact in double, the power-of-two
 * scale is exact, the truncation to an integer the only rounding (the cast
 * truncates toward zero like C's). */
__global__ void k_sumsq_partial(const float *x, long n, double scale, U128 *part) {
    U128 s = {0, 0};
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        double v = (double)x[i];
        U128 t = {0, (unsigned long long)(v * v * scale)};
        s = u128_add(s, t);
    }
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void k_sumsq_final(const U128 *part, int nparts, U128 *out) {
    U128 s = {0, 0};
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s = u128_add(s, part[i]);
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

/* Adds the sum into (*hi, *lo), as zn_sumsq_fixed does. */
extern "C" void zn_cuda_sumsq_fixed(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (n <= 0 || !zn_cuda_ok(d)) return;
    long blocks = (n + RED_THREADS - 1) / RED_THREADS;
    if (blocks > RED_BLOCKS_MAX) blocks = RED_BLOCKS_MAX;
    U128 *part = (U128 *)zn_cuda_scratch(d, (size_t)(blocks + 1) * sizeof(U128), "sumsq scratch");
    if (!part) return;
    k_sumsq_partial<<<(unsigned)blocks, RED_THREADS, 0, c->stream>>>(x, n, ldexp(1.0, shift), part);
    if (zn_cuda_launched(d, "sumsq_fixed")) return;
    k_sumsq_final<<<1, RED_THREADS, 0, c->stream>>>(part, (int)blocks, part + blocks);
    if (zn_cuda_launched(d, "sumsq_fixed")) return;
    U128 *h = (U128 *)c->pinned;
    if (zn_cuda_fail(d, "sumsq_fixed", cudaMemcpyAsync(h, part + blocks, sizeof(U128), cudaMemcpyDeviceToHost,
                                                       c->stream)) ||
        zn_cuda_sync(d, "sumsq_fixed"))
        return;
    zn_u128_add(hi, lo, h->hi, h->lo);
}

/* ---------------------------------------------------------------- colsum */

/* out[j] = sum over rows i in order from 0.0f: one thread per column, so
 * each sum has the host's order; neighbouring threads read neighbouring
 * columns (coalesced). */
__global__ void k_colsum(int M, int N, const float *A, float *out) {
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < N; j += (long)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (long i = 0; i < M; i++) s += A[i * N + j];
        out[j] = s;
    }
}

extern "C" void zn_cuda_colsum(ZnDevice *d, int M, int N, const float *A, float *out) {
    if (N <= 0 || !zn_cuda_ok(d)) return;
    k_colsum<<<zn_cuda_blocks(d, N), ZN_CUDA_THREADS, 0, zn_cuda_dev(d)->stream>>>(M, N, A, out);
    zn_cuda_launched(d, "colsum");
}
