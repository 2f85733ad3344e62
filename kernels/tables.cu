/* tables.cu: the two kernel tables. Everything but the GEMMs is shared:
 * those kernels are bit-exact twins of the host (spec Z-CUDA-003) and
 * gain nothing from a looser mode (memory-bound, or serial by definition).
 * The fast table is the exact one with cuBLAS's GEMMs (spec Z-CUDA-005). */
#include "cuda_dev.h"

/* The language-model kernels (lm.cu) are exact twins too (spec Z-CUDA-009). */
static constexpr ZnKernels exact_kernels = {
    ZN_KERNELS_BY_PREFIX(zn_cuda),
    .softmax_xent = zn_cuda_softmax_xent,
    .lm = &zn_cuda_lm_kernels,
};

/* k with cuBLAS's GEMMs in place of the exact ones */
static constexpr ZnKernels with_cublas_gemms(ZnKernels k) {
    k.gemm_nt = zn_cuda_gemm_nt_fast;
    k.gemm_nn = zn_cuda_gemm_nn_fast;
    k.gemm_tn = zn_cuda_gemm_tn_fast;
    return k;
}

/* constinit: both filled in at compile time, as a C table is (no
   constructor runs at start-up) */
extern "C" constinit const ZnKernels zn_cuda_kernels_exact = exact_kernels;
extern "C" constinit const ZnKernels zn_cuda_kernels_fast = with_cublas_gemms(exact_kernels);
