/* gemm_host.h: the host GEMM behind the host device's gemm_nt, gemm_nn and
 * gemm_tn (spec Z-MOD-006, Z-HOST-003). */
#ifndef ZN_GEMM_HOST_H
#define ZN_GEMM_HOST_H
#include "core/cpu.h"

/* C[M,N] (row-major, ldc = N) = sum over k of A(i,k) * B(k,j) with
 * A(i,k) = A[i*sai + k*sak] and B(k,j) = B[j*sbj + k*sbk]; each element one
 * float sum over k in order from 0.0f, then + bias[j] if bias is set. On the
 * best instruction set and the host threads (core/cpu.h). */
void zn_host_gemm(int M, int N, int K, const float *A, long sai, long sak, const float *B, long sbj, long sbk,
                  const float *bias, float *C);
/* The same on a chosen instruction set (ZN_ISA_SCALAR: the element-at-a-time
 * definition; one this CPU cannot run falls back to the best) and thread
 * count. Every choice gives the same bits. */
void zn_host_gemm_isa(ZnIsa isa, int threads, int M, int N, int K, const float *A, long sai, long sak,
                      const float *B, long sbj, long sbk, const float *bias, float *C);
/* The same into rows of C at stride ldc >= N (C(i, j) = C[i*ldc + j]; the
 * columns past N are not touched). */
void zn_host_gemm_ldc(ZnIsa isa, int threads, int M, int N, int K, const float *A, long sai, long sak,
                      const float *B, long sbj, long sbk, const float *bias, float *C, long ldc);

#endif
