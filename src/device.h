/* device.h: the device seam. Memory with a category tag, accounted per rank
 * (current and peak per category), and the math kernels the engine and the
 * model need. Implementations: host (src/device_host.c, the reference twins)
 * and, with the CUDA work, kernels/. In meta mode allocations are counted but
 * no memory is touched (dry runs of the memory report). */
#ifndef ZN_DEVICE_H
#define ZN_DEVICE_H
#include <stddef.h>
#include <stdint.h>
#include "err.h"

typedef enum {
    ZN_MEM_PARAMS16 = 0,  /* working (model-dtype) weights; 16-bit in mixed precision */
    ZN_MEM_MASTER32,      /* fp32 master partition */
    ZN_MEM_GRADS,         /* gradient buffers / partitions */
    ZN_MEM_EXP_AVG,
    ZN_MEM_EXP_AVG_SQ,
    ZN_MEM_BUCKETS,       /* reduce buckets, gather staging */
    ZN_MEM_ACTIVATIONS,
    ZN_MEM_WORKSPACE,     /* per-layer gradient scratch, temporaries */
    ZN_MEM_NCAT
} ZnMemCat;

const char *zn_mem_cat_name(ZnMemCat c);

typedef struct {
    long cur[ZN_MEM_NCAT], peak[ZN_MEM_NCAT];
    long cur_total, peak_total;
    /* a second peak for reports that reset their own window (DeepSpeed's
       see_memory_usage resets the peak after printing) */
    long win_peak[ZN_MEM_NCAT], win_peak_total;
    long nallocs;              /* live allocations */
} ZnMemStats;

typedef struct ZnKernels ZnKernels;

typedef struct ZnDevice {
    const char *name;          /* "host", "cuda" */
    long capacity;             /* bytes; 0 = unlimited. Exceeding it fails the alloc */
    int meta;                  /* 1: account only, return a non-dereferenceable token */
    ZnMemStats mem;
    const ZnKernels *k;
    void *impl;
} ZnDevice;

void zn_device_host_init(ZnDevice *d);
/* Zero-filled allocation of n bytes in category cat; NULL + err on failure. */
void *zn_dev_alloc(ZnDevice *d, size_t n, ZnMemCat cat, ZnErr *err);
/* Allocates alloc_n bytes but charges accounted_n to the category: the
 * simulator keeps 16-bit tensors as fp32 values rounded to the 16-bit grid
 * (bit-identical values) and charges the device their 16-bit size. */
void *zn_dev_alloc_as(ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err);
void zn_dev_free(ZnDevice *d, void *p);
void zn_mem_reset_peak(ZnMemStats *m);
void zn_mem_reset_window(ZnMemStats *m);

/* Host math. All loops accumulate in a fixed, documented order and the host
 * build uses -ffp-contract=off, so the CUDA twins in exact mode can match
 * bit for bit. */
struct ZnKernels {
    /* C[M,N] = A[M,K] . B[N,K]^T, each C[i][j] summed over k = 0..K-1 in
       order from 0.0f; then + bias[j] if bias != NULL. */
    void (*gemm_nt)(int M, int N, int K, const float *A, const float *B,
                    const float *bias, float *C);
    /* C[M,N] = A[M,K] . B[K,N], k in order. */
    void (*gemm_nn)(int M, int N, int K, const float *A, const float *B, float *C);
    /* C[M,N] = A[K,M]^T . B[K,N], k in order. */
    void (*gemm_tn)(int M, int N, int K, const float *A, const float *B, float *C);
    /* out[j] = sum_{i=0..M-1} A[i][j] in order of i. */
    void (*colsum)(int M, int N, const float *A, float *out);
    void (*relu_fwd)(long n, const float *x, float *y);
    /* dx = dy where y > 0 else 0 (y: the ReLU output) */
    void (*relu_bwd)(long n, const float *y, const float *dy, float *dx);
    /* Softmax cross-entropy over B rows of C logits; returns the mean loss
       (sum of per-row losses in row order, divided by B). dlogits (if not
       NULL) = (softmax - onehot) * grad_scale. */
    float (*softmax_xent)(int B, int C, const float *logits, const int *labels,
                          float grad_scale, float *dlogits);
};

extern const ZnKernels zn_host_kernels;

#endif
