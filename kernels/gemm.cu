/* gemm.cu: the three GEMMs of the table (row-major, device.h).
 *
 * Exact (spec Z-CUDA-003): every C[i][j] is one float accumulator that
 * starts at 0.0f and adds A(i,k) * B(k,j) for k = 0, 1, ..., K-1 in order,
 * a multiply then an add (-fmad=false), then + bias[j]: the host twin's
 * operations. Speed comes from tiling that only changes who loads what: a
 * block stages a 64 x 16 slice of A and a 16 x 64 slice of B in shared
 * memory, each thread keeps 4 x 4 accumulators in registers, and the k
 * slices are visited in increasing order.
 *
 * Fast (spec Z-CUDA-005): cuBLAS sgemm (fp32; TF32 only if allowed), whose
 * summation order is its own, then the bias in a separate pass. */
#include "cuda_dev.h"

#define BM 64
#define BN 64
#define BK 16
#define TM 4   /* rows per thread */
#define TN 4   /* columns per thread */

/* A(i,k) = A[i*sai + k*sak], B(k,j) = B[j*sbj + k*sbk]; C row-major, ld N. */
__global__ void __launch_bounds__(256)
k_gemm_exact(int M, int N, int K, const float *A, long sai, long sak, const float *B, long sbj, long sbk,
             const float *bias, float *C) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16, tid = threadIdx.x;
    const long i0 = (long)blockIdx.y * BM, j0 = (long)blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int a = 0; a < TM; a++)
#pragma unroll
        for (int b = 0; b < TN; b++) acc[a][b] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        /* stage the slices; the index order follows whichever stride is 1,
           so a warp reads consecutive addresses */
        for (int e = tid; e < BM * BK; e += 256) {
            int r, kk;
            if (sak == 1) { kk = e % BK; r = e / BK; } else { r = e % BM; kk = e / BM; }
            long i = i0 + r, k = k0 + kk;
            As[kk][r] = (i < M && k < K) ? A[i * sai + k * sak] : 0.0f;
        }
        for (int e = tid; e < BN * BK; e += 256) {
            int c, kk;
            if (sbk == 1) { kk = e % BK; c = e / BK; } else { c = e % BN; kk = e / BN; }
            long j = j0 + c, k = k0 + kk;
            Bs[kk][c] = (j < N && k < K) ? B[j * sbj + k * sbk] : 0.0f;
        }
        __syncthreads();
        /* only the real k of the last slice: no padded term is ever added */
        const int kn = K - k0 < BK ? K - k0 : BK;
        for (int kk = 0; kk < kn; kk++) {
            float a[TM], b[TN];
#pragma unroll
            for (int q = 0; q < TM; q++) a[q] = As[kk][ty + 16 * q];
#pragma unroll
            for (int q = 0; q < TN; q++) b[q] = Bs[kk][tx + 16 * q];
#pragma unroll
            for (int q = 0; q < TM; q++)
#pragma unroll
                for (int r = 0; r < TN; r++) acc[q][r] += a[q] * b[r];   /* multiply, then add */
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < TM; q++) {
        long i = i0 + ty + 16 * q;
        if (i >= M) continue;
#pragma unroll
        for (int r = 0; r < TN; r++) {
            long j = j0 + tx + 16 * r;
            if (j < N) C[i * N + j] = bias ? acc[q][r] + bias[j] : acc[q][r];   /* bias after the sum */
        }
    }
}

static void gemm_exact(ZnDevice *d, int M, int N, int K, const float *A, long sai, long sak, const float *B,
                       long sbj, long sbk, const float *bias, float *C) {
    if (M <= 0 || N <= 0 || !zn_cuda_ok(d)) return;
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    k_gemm_exact<<<grid, 256, 0, zn_cuda_dev(d)->stream>>>(M, N, K, A, sai, sak, B, sbj, sbk, bias, C);
    zn_cuda_launched(d, "gemm (exact)");
}

/* The strides of device.h's three shapes (the host twins' gemm_strided). */
extern "C" void zn_cuda_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B,
                                const float *bias, float *C) {
    gemm_exact(d, M, N, K, A, K, 1, B, K, 1, bias, C);
}
extern "C" void zn_cuda_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    gemm_exact(d, M, N, K, A, K, 1, B, 1, N, NULL, C);
}
extern "C" void zn_cuda_gemm_tn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    gemm_exact(d, M, N, K, A, 1, M, B, 1, N, NULL, C);
}

/* ------------------------------------------------------------- cuBLAS */

__global__ void k_add_bias(int M, int N, const float *bias, float *C) {
    long n = (long)M * N;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long)gridDim.x * blockDim.x)
        C[e] += bias[e % N];
}

/* Row-major C[M,N] is column-major C^T[N,M], so each product is issued as
 * its transpose: C^T = op(B) op(A) with the operands' own leading dims. */
static void sgemm(ZnDevice *d, cublasOperation_t opb, cublasOperation_t opa, int M, int N, int K, const float *B,
                  int ldb, const float *A, int lda, const float *bias, float *C) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (M <= 0 || N <= 0 || !zn_cuda_ok(d)) return;
    if (K <= 0) {   /* an empty sum is 0 (not left to cuBLAS's k = 0 convention) */
        if (zn_cuda_fail(d, "gemm (fast)", cudaMemsetAsync(C, 0, (size_t)M * N * sizeof(float), c->stream))) return;
    } else {
        const float one = 1.0f, zero = 0.0f;
        if (zn_cuda_fail_blas(d, "cublasSgemm",
                              zn_cublas(NULL)->Sgemm(c->blas, opb, opa, N, M, K, &one, B, ldb, A, lda, &zero, C, N)))
            return;
        if (zn_cuda_launched(d, "gemm (cublas)")) return;
    }
    if (bias) {
        k_add_bias<<<zn_cuda_blocks(d, (long)M * N), ZN_CUDA_THREADS, 0, c->stream>>>(M, N, bias, C);
        zn_cuda_launched(d, "gemm bias");
    }
}

/* C = A[M,K] B[N,K]^T: C^T[N,M] = B (col-major K x N, transposed) . A (col-major K x M) */
extern "C" void zn_cuda_gemm_nt_fast(ZnDevice *d, int M, int N, int K, const float *A, const float *B,
                                     const float *bias, float *C) {
    sgemm(d, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, B, K, A, K, bias, C);
}
/* C = A[M,K] B[K,N]: C^T = B (col-major N x K) . A (col-major K x M) */
extern "C" void zn_cuda_gemm_nn_fast(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    sgemm(d, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, B, N, A, K, NULL, C);
}
/* C = A[K,M]^T B[K,N]: C^T = B (col-major N x K) . A (col-major M x K, transposed) */
extern "C" void zn_cuda_gemm_tn_fast(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    sgemm(d, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, B, N, A, M, NULL, C);
}
