/* cublas_dl.h: cuBLAS loaded at run time. Linking libcublas would map its
 * ~700 MB into every zinc process (0.12 s and 220 MB per start, and
 * valgrind reading its symbols), while only fast-mode GEMMs on a GPU use it;
 * so the fast device loads it with dlopen (libcublas.so.13, or ZINC_CUBLAS_LIB). */
#ifndef ZN_CUBLAS_DL_H
#define ZN_CUBLAS_DL_H
#include <cublas_v2.h>
extern "C" {
#include "core/err.h"
}

typedef struct {
    cublasStatus_t (*Create)(cublasHandle_t *);
    cublasStatus_t (*Destroy)(cublasHandle_t);
    cublasStatus_t (*SetStream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*SetMathMode)(cublasHandle_t, cublasMath_t);
    const char *(*GetStatusString)(cublasStatus_t);
    cublasStatus_t (*Sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                            const float *, int, const float *, int, const float *, float *, int);
} ZnCublas;

/* The loaded entry points; NULL + err if cuBLAS cannot be loaded. */
const ZnCublas *zn_cublas(ZnErr *err);

#endif
