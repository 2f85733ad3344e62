/* tables.cu: the two kernel tables. Everything but the GEMMs is shared:
 * those kernels are bit-exact twins of the host (spec Z-CUDA-003) and
 * gain nothing from a looser mode (memory-bound, or serial by definition).
 * The fast table is the exact one with cuBLAS's GEMMs (spec Z-CUDA-005). */
#include "cuda_dev.h"

/* C++ wants designators in declaration order. The language-model kernels
   (lm.cu) are exact twins too (spec Z-CUDA-009). */
static constexpr ZnKernels exact_kernels = {
    .upload = zn_cuda_upload,
    .download = zn_cuda_download,
    .copy = zn_cuda_copy,
    .zero = zn_cuda_zero,
    .round_dt = zn_cuda_round_dt,
    .add = zn_cuda_add,
    .div = zn_cuda_div,
    .pack16 = zn_cuda_pack16,
    .unpack16 = zn_cuda_unpack16,
    .quant = zn_cuda_quant,
    .dequant = zn_cuda_dequant,
    .absmax = zn_cuda_absmax,
    .sumsq_fixed = zn_cuda_sumsq_fixed,
    .adam = zn_cuda_adam,
    .gemm_nt = zn_cuda_gemm_nt_exact,
    .gemm_nn = zn_cuda_gemm_nn_exact,
    .gemm_tn = zn_cuda_gemm_tn_exact,
    .colsum = zn_cuda_colsum,
    .relu_fwd = zn_cuda_relu_fwd,
    .relu_bwd = zn_cuda_relu_bwd,
    .softmax_xent = zn_cuda_softmax_xent,
    .add_bias = zn_cuda_add_bias,
    .embed_fwd = zn_cuda_embed_fwd,
    .embed_bwd = zn_cuda_embed_bwd,
    .layernorm_fwd = zn_cuda_layernorm_fwd,
    .layernorm_bwd = zn_cuda_layernorm_bwd,
    .attn_fwd = zn_cuda_attn_fwd,
    .attn_bwd = zn_cuda_attn_bwd,
    .gelu_fwd = zn_cuda_gelu_fwd,
    .gelu_bwd = zn_cuda_gelu_bwd,
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
