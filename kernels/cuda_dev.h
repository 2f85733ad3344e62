/* cuda_dev.h: inside the CUDA device (private to the kernels/ sources). The state a
 * ZnDevice's impl points at, error recording, launch helpers. */
#ifndef ZN_CUDA_DEV_H
#define ZN_CUDA_DEV_H
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "cublas_dl.h"
#include "device/cuda.h"

/* One live allocation: the accounting a free must give back. */
typedef struct {
    void *p;           /* NULL: empty slot */
    size_t accounted;
    int cat;
    int meta;          /* a meta token (host malloc), not GPU memory */
} ZnCudaAlloc;

typedef struct {
    int gpu;
    int sm_count;
    int allow_tf32;
    cudaStream_t stream;
    cublasHandle_t blas;
    /* the first failure of a kernel (kernels have no status, zn_cuda_check) */
    int failed;
    ZnErr first_err;
    /* live allocations: open addressing on the pointer, linear probing */
    ZnCudaAlloc *tab;
    size_t tab_cap, tab_n;
    /* kernel scratch (reduction partials, softmax rows): not model state,
       so not accounted (the host twins need none) */
    void *scratch;
    size_t scratch_cap;
    void *pinned;      /* small pinned host buffer for results returned to the host */
} ZnCudaDev;

#define ZN_CUDA_PINNED_BYTES 256

static inline ZnCudaDev *zn_cuda_dev(ZnDevice *d) { return (ZnCudaDev *)d->impl; }

/* Records the first failure (later ones are consequences). Returns 1 if
 * e is an error. */
int zn_cuda_fail(ZnDevice *d, const char *what, cudaError_t e);
int zn_cuda_fail_blas(ZnDevice *d, const char *what, cublasStatus_t s);
/* After a launch: records a launch error. Returns 1 on error. */
int zn_cuda_launched(ZnDevice *d, const char *what);
/* Whether kernels of d should still run. */
static inline int zn_cuda_ok(ZnDevice *d) { return !zn_cuda_dev(d)->failed; }
/* Kernel scratch of at least bytes (grown, never shrunk); NULL on failure
 * (recorded). Valid until the next call; used in stream order only. */
void *zn_cuda_scratch(ZnDevice *d, size_t bytes, const char *what);
/* Waits for d's stream; records and returns 1 on error. */
int zn_cuda_sync(ZnDevice *d, const char *what);

/* Blocks for n elements with 256 threads, capped so a grid-stride loop
 * keeps every SM busy without launching millions of blocks. */
#define ZN_CUDA_THREADS 256
static inline unsigned zn_cuda_blocks(ZnDevice *d, long n) {
    long b = (n + ZN_CUDA_THREADS - 1) / ZN_CUDA_THREADS;
    long cap = 32L * zn_cuda_dev(d)->sm_count;
    if (b > cap) b = cap;
    return (unsigned)(b < 1 ? 1 : b);
}

/* The per-mode entry points the two tables share or differ in. */
extern "C" {
void zn_cuda_upload(ZnDevice *d, void *dst, const void *src_host, size_t bytes);
void zn_cuda_download(ZnDevice *d, void *dst_host, const void *src, size_t bytes);
void zn_cuda_copy(ZnDevice *d, void *dst, const void *src, size_t bytes);
void zn_cuda_zero(ZnDevice *d, void *dst, size_t bytes);
void zn_cuda_round_dt(ZnDevice *d, ZnDtype dt, float *x, long n);
void zn_cuda_add(ZnDevice *d, ZnDtype dt, float *dst, const float *src, long n);
void zn_cuda_div(ZnDevice *d, ZnDtype dt, float *x, long n, float div);
void zn_cuda_pack16(ZnDevice *d, ZnDtype dt, uint16_t *dst16, const float *src, long n);
void zn_cuda_unpack16(ZnDevice *d, ZnDtype dt, float *dst, const uint16_t *src16, long n);
/* ZeRO++'s block quantization (quant.cu): the host's bits (core/quant.h) */
void zn_cuda_quant(ZnDevice *d, int bits, const float *x, long n, long max_group, void *q, float *scales);
void zn_cuda_dequant(ZnDevice *d, int bits, const void *q, const float *scales, long n, long max_group, ZnDtype dt,
                     float *out);
void zn_cuda_relu_fwd(ZnDevice *d, long n, const float *x, float *y);
void zn_cuda_relu_bwd(ZnDevice *d, long n, const float *y, const float *dy, float *dx);
ZnAbsMax zn_cuda_absmax(ZnDevice *d, const float *x, long n);
void zn_cuda_sumsq_fixed(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo);
void zn_cuda_colsum(ZnDevice *d, int M, int N, const float *A, float *out);
void zn_cuda_adam(ZnDevice *d, long n, float *p, const float *g, float *m, float *v, const ZnAdamParams *hp,
                  long t, float grad_mul, float *work, ZnDtype dt);
float zn_cuda_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels, float grad_scale,
                           float *dlogits);
/* the language-model kernels (lm.cu), exact twins shared by both tables */
extern const ZnLmKernels zn_cuda_lm_kernels;
/* the exact GEMMs (gemm.cu) and cuBLAS's (the fast table's) */
void zn_cuda_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B, const float *bias,
                     float *C);
void zn_cuda_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C);
void zn_cuda_gemm_tn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C);
void zn_cuda_gemm_nt_fast(ZnDevice *d, int M, int N, int K, const float *A, const float *B, const float *bias,
                          float *C);
void zn_cuda_gemm_nn_fast(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C);
void zn_cuda_gemm_tn_fast(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C);
}

#endif
