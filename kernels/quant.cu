/* quant.cu: ZeRO++'s block quantization on the GPU (spec Z-QNT-*,
 * Z-CUDA-003): the per-group and per-element math of core/quant.h, so the
 * codes, scales and values are the host's bits. Three passes on the rank's
 * stream: each group's absmax A (one block per group) into scales, the
 * codes (one thread per code byte: an int4 byte may hold elements of two
 * groups), then each scale from its A. */
#include "cuda_dev.h"
extern "C" {
#include "core/quant.h"
}

#define FOR_EACH(i, n) \
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

/* A of each group as zn_q_absmax: a NaN anywhere makes it NaN, else the
   largest |x| (inf included). A maximum is the same in any order. */
__global__ void k_group_absmax(const float *x, long n, long ng, float *A) {
    __shared__ float m[ZN_CUDA_THREADS];
    __shared__ int nan[ZN_CUDA_THREADS];
    const int t = threadIdx.x;
    for (long g = blockIdx.x; g < ng; g += gridDim.x) {
        long a = zn_quant_group_start(n, ng, g), b = zn_quant_group_start(n, ng, g + 1);
        float mx = 0.0f;
        int hn = 0;
        for (long i = a + t; i < b; i += blockDim.x) {
            float v = fabsf(x[i]);
            if (v != v) hn = 1;
            else if (v > mx) mx = v;
        }
        m[t] = mx;
        nan[t] = hn;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s) {
                m[t] = fmaxf(m[t], m[t + s]);
                nan[t] |= nan[t + s];
            }
            __syncthreads();
        }
        if (t == 0) A[g] = nan[0] ? NAN : m[0];
        __syncthreads();
    }
}

__device__ __forceinline__ int code_of(const float *x, long n, long ng, const float *A, long i, float half, int qmax) {
    float a = A[zn_quant_group_of(n, ng, i)];
    return zn_q_code(x[i], zn_q_pre(a), zn_q_inv(a, half), qmax);
}

__global__ void k_codes8(const float *x, long n, long ng, const float *A, int8_t *q) {
    FOR_EACH(i, n) q[i] = (int8_t)code_of(x, n, ng, A, i, 128.0f, 127);
}

__global__ void k_codes4(const float *x, long n, long ng, const float *A, uint8_t *q) {
    FOR_EACH(b, zn_q4_bytes(n)) {
        uint8_t v = zn_q4_nibble(code_of(x, n, ng, A, 2 * b, 8.0f, 7));
        if (2 * b + 1 < n) v = (uint8_t)(v | (zn_q4_nibble(code_of(x, n, ng, A, 2 * b + 1, 8.0f, 7)) << 4));
        q[b] = v;
    }
}

__global__ void k_scales(float *A, long ng, float half) {
    FOR_EACH(g, ng) A[g] = zn_q_scale(A[g], half);
}

template <int BITS> __global__ void k_dequant(const void *q, const float *scales, long n, long ng, ZnDtype dt, float *out) {
    FOR_EACH(i, n) {
        int c = BITS == 8 ? (int)((const int8_t *)q)[i] : zn_q4_get((const uint8_t *)q, i);
        out[i] = zn_q_round(zn_q_decode(c, scales[zn_quant_group_of(n, ng, i)]), dt);
    }
}

extern "C" void zn_cuda_quant(ZnDevice *d, int bits, const float *x, long n, long max_group, void *q, float *scales) {
    long ng = zn_quant_ngroups(n, max_group);
    if (n <= 0 || !zn_cuda_ok(d)) return;
    cudaStream_t st = zn_cuda_dev(d)->stream;
    k_group_absmax<<<zn_cuda_blocks(d, ng * ZN_CUDA_THREADS), ZN_CUDA_THREADS, 0, st>>>(x, n, ng, scales);
    if (zn_cuda_launched(d, "quant absmax")) return;
    if (bits == 8) k_codes8<<<zn_cuda_blocks(d, n), ZN_CUDA_THREADS, 0, st>>>(x, n, ng, scales, (int8_t *)q);
    else k_codes4<<<zn_cuda_blocks(d, zn_q4_bytes(n)), ZN_CUDA_THREADS, 0, st>>>(x, n, ng, scales, (uint8_t *)q);
    if (zn_cuda_launched(d, "quant codes")) return;
    k_scales<<<zn_cuda_blocks(d, ng), ZN_CUDA_THREADS, 0, st>>>(scales, ng, bits == 8 ? 128.0f : 8.0f);
    zn_cuda_launched(d, "quant scales");
}

extern "C" void zn_cuda_dequant(ZnDevice *d, int bits, const void *q, const float *scales, long n, long max_group,
                                ZnDtype dt, float *out) {
    long ng = zn_quant_ngroups(n, max_group);
    if (n <= 0 || !zn_cuda_ok(d)) return;
    cudaStream_t st = zn_cuda_dev(d)->stream;
    if (bits == 8) k_dequant<8><<<zn_cuda_blocks(d, n), ZN_CUDA_THREADS, 0, st>>>(q, scales, n, ng, dt, out);
    else k_dequant<4><<<zn_cuda_blocks(d, n), ZN_CUDA_THREADS, 0, st>>>(q, scales, n, ng, dt, out);
    zn_cuda_launched(d, "dequant");
}
