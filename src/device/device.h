/* device.h: the device seam. Memory with a category tag, accounted per rank
 * (current and peak per category), and the math kernels the engine and the
 * model need. Implementations: host (src/device_host.c, the reference twins)
 * and, with the CUDA work, kernels/. In meta mode allocations are counted but
 * no memory is touched (dry runs of the memory report). */
#ifndef ZN_DEVICE_H
#define ZN_DEVICE_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "core/dtype.h"
#include "engine/optim.h"

typedef enum {
    ZN_MEM_PARAMS16 = 0,  /* working (model-dtype) weights; 16-bit in mixed precision */
    ZN_MEM_MASTER32,      /* fp32 master partition */
    ZN_MEM_GRADS,         /* gradient buffers / partitions */
    ZN_MEM_EXP_AVG,
    ZN_MEM_EXP_AVG_SQ,
    ZN_MEM_BUCKETS,       /* reduce buckets, gather staging */
    ZN_MEM_ACTIVATIONS,
    ZN_MEM_WORKSPACE,     /* per-layer gradient scratch, temporaries */
    ZN_MEM_HPZ,           /* hpZ secondary partitions of the 16-bit parameters (Z-ZPP-003) */
    ZN_MEM_NCAT
} ZnMemCat;

const char *zn_mem_cat_name(ZnMemCat c);

typedef struct {
    long cur[ZN_MEM_NCAT], peak[ZN_MEM_NCAT];
    long cur_total, peak_total;
    /* a second peak for reports that reset their own window (DeepSpeed's
       see_memory_usage resets the peak after printing) */
    long win_peak[ZN_MEM_NCAT], win_peak_total;
    long win_at_peak[ZN_MEM_NCAT];   /* the categories when win_peak_total was reached */
    long nallocs;              /* live allocations */
} ZnMemStats;

/* What the kernels of a meta device would have done (spec Z-DRY-007): the
 * step-time model's compute. Counted by the meta device only. */
typedef struct {
    double flops;        /* GEMMs (2*M*N*K) and attention (Megatron's 4*B*T*T*C forward, twice that backward) */
    double mem_elems;    /* elements the memory-bound kernels read plus write (model dtype) */
    double opt_elems;    /* elements an Adam kernel updated (fp32 states, counted apart) */
    double h2d_bytes, d2h_bytes;   /* upload, download */
    long kernels;        /* kernel calls, data movement included */
} ZnWork;

typedef struct ZnKernels ZnKernels;
/* declared ahead: the backend hooks inside the struct take the device */
typedef struct ZnDevice ZnDevice;

struct ZnDevice {
    const char *name;          /* "host", "cuda" */
    long capacity;             /* bytes; 0 = unlimited. Exceeding it fails the alloc */
    int meta;                  /* 1: account only, return a non-dereferenceable token */
    int host_addressable;      /* 1: buffers are plain host memory the CPU may read in place */
    ZnMemStats mem;
    ZnWork work;               /* meta device: what its kernels would have done */
    const ZnKernels *k;
    /* the backend's raw memory: alloc_n bytes, zero-filled, charging
       accounted_n bytes to cat through zn_mem_charge; free gives both back */
    void *(*alloc)(struct ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err);
    void (*free)(struct ZnDevice *d, void *p);
    void *impl;
};

/* Accounting shared by every backend (spec Z-MEM-*): charges n bytes to cat,
 * updating current and peak counters; fails with ZN_E_NOMEM and a message
 * naming the category when the device's capacity would be exceeded. */
int zn_mem_charge(ZnDevice *d, size_t n, ZnMemCat cat, ZnErr *err);
void zn_mem_uncharge(ZnDevice *d, size_t n, ZnMemCat cat);

void zn_device_host_init(ZnDevice *d);
/* Zero-filled allocation of n bytes in category cat; NULL + err on failure. */
void *zn_dev_alloc(ZnDevice *d, size_t n, ZnMemCat cat, ZnErr *err);
/* Allocates alloc_n bytes but charges accounted_n to the category: the
 * simulator keeps 16-bit tensors as fp32 values rounded to the 16-bit grid
 * (bit-identical values) and charges the device their 16-bit size. */
void *zn_dev_alloc_as(ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err);
void zn_dev_free(ZnDevice *d, void *p);
/* 1: d is the plain host backend (real memory, no meta mode, its own alloc
 * and free), whose blocks a caller may keep past zn_mem_uncharge and free
 * later with zn_host_free_uncharged (the model run's block pool). */
int zn_dev_is_host(const ZnDevice *d);
void zn_host_free_uncharged(void *p);
void zn_mem_reset_peak(ZnMemStats *m);
void zn_mem_reset_window(ZnMemStats *m);

/* The language-model kernels (GPT-2, spec Z-GPT-*), a table of their own
 * that ZnKernels points at: each backend keeps them static beside their
 * helpers (device/lm_host.c, kernels/lm.cu, device_meta.c) and exports only
 * this table, so their signatures are written here alone. Rows are the B*T
 * positions, row r = b*T + t. Every sum runs in the order stated, from
 * 0.0f; outputs are fp32 (the caller rounds to the model dtype). */
typedef struct {
    /* y[i][j] = y[i][j] + b[j] */
    void (*add_bias)(ZnDevice *d, int M, int N, const float *b, float *y);
    /* out[r][c] = wte[tok[r]][c] + wpe[r mod T][c] */
    void (*embed_fwd)(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte,
                      const float *wpe, float *out);
    /* dwpe (P rows) and dwte (V rows) zeroed; dwpe[t][c] = sum over b in
       order of dout[b*T+t][c]; dwte[tok[r]][c] += dout[r][c] for r = 0..B*T-1
       in order */
    void (*embed_bwd)(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok, const float *dout,
                      float *dwte, float *dwpe);
    /* per row: mean = sum(x)/C, var = sum((x-mean)^2)/C, rstd = 1/sqrtf(var + 1e-5f),
       out = ((x - mean) * rstd) * w + b; mean and rstd kept (fp32) for backward */
    void (*layernorm_fwd)(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b,
                          float *out, float *mean, float *rstd);
    /* dx written; dw[c], db[c] = sums over rows in order (Z-GPT-004) */
    void (*layernorm_bwd)(ZnDevice *d, int N, int C, const float *dout, const float *x, const float *w,
                          const float *mean, const float *rstd, float *dx, float *dw, float *db);
    /* causal self-attention of NH heads over qkv [B*T, 3C] (q | k | v, head h
       at columns h*C/NH); att [B, NH, T, T] keeps the probabilities (zero
       above the diagonal); out [B*T, C] (Z-GPT-005) */
    void (*attn_fwd)(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att, float *out);
    /* dqkv [B*T, 3C] written; scratch [B, NH, T, T] (Z-GPT-006) */
    void (*attn_bwd)(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                     const float *att, float *dqkv, float *scratch);
    /* GELU, tanh form: y = 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3))) (Z-GPT-007) */
    void (*gelu_fwd)(ZnDevice *d, long n, const float *x, float *y);
    void (*gelu_bwd)(ZnDevice *d, long n, const float *x, const float *dy, float *dx);
} ZnLmKernels;

/* The math and data movement the engine, the model and the optimizer need,
 * on buffers that live in the device's memory. The engine never dereferences
 * a device buffer: it moves data with upload/download/copy and computes with
 * these kernels, so the same engine code runs on the host device (these
 * reference twins, src/device_host.c) and on CUDA (kernels/).
 *
 * Every kernel takes the rank's device first (the CUDA backend finds its
 * stream and cuBLAS handle there). All loops accumulate in a fixed,
 * documented order and the host build uses -ffp-contract=off, so the CUDA
 * twins in exact mode can match bit for bit. "Round to dt" means: for
 * ZN_F16/ZN_BF16 replace the fp32 value by the nearest value of that grid
 * (round to nearest even, zn_round_f16/zn_round_bf16); for ZN_F32 nothing.
 * 16-bit model tensors are fp32 buffers holding grid values (Z-PREC-001). */
struct ZnKernels {
    /* --- data movement (synchronous: the data is in place on return) --- */
    void (*upload)(ZnDevice *d, void *dst, const void *src_host, size_t bytes);
    void (*download)(ZnDevice *d, void *dst_host, const void *src, size_t bytes);
    void (*copy)(ZnDevice *d, void *dst, const void *src, size_t bytes);   /* device to device; no overlap */
    void (*zero)(ZnDevice *d, void *dst, size_t bytes);

    /* --- elementwise on fp32 buffers --- */
    /* x[i] = round_dt(x[i]) */
    void (*round_dt)(ZnDevice *d, ZnDtype dt, float *x, long n);
    /* dst[i] = round_dt(dst[i] + src[i]) */
    void (*add)(ZnDevice *d, ZnDtype dt, float *dst, const float *src, long n);
    /* x[i] = round_dt(x[i] / div) (a true division, not a multiply by 1/div) */
    void (*div)(ZnDevice *d, ZnDtype dt, float *x, long n, float div);
    /* dst16[i] = bits of src[i] rounded to dt (ZN_F16 or ZN_BF16) */
    void (*pack16)(ZnDevice *d, ZnDtype dt, uint16_t *dst16, const float *src, long n);
    /* dst[i] = value of the dt bit pattern src16[i] */
    void (*unpack16)(ZnDevice *d, ZnDtype dt, float *dst, const uint16_t *src16, long n);
    /* ZeRO++'s block quantization (core/quant.h, spec Z-QNT-*): bits 8
       writes int8 codes to q, bits 4 packed int4 codes; one fp32 scale per
       group of at most max_group. dequant writes the values rounded to dt.
       NULL on a device without these kernels (the engine then refuses qwZ
       and qgZ by name). */
    void (*quant)(ZnDevice *d, int bits, const float *x, long n, long max_group, void *q, float *scales);
    void (*dequant)(ZnDevice *d, int bits, const void *q, const float *scales, long n, long max_group, ZnDtype dt,
                    float *out);

    /* --- reductions (results returned to the host) --- */
    /* max |x[i]| over the finite values and whether any value is inf/NaN */
    ZnAbsMax (*absmax)(ZnDevice *d, const float *x, long n);
    /* the exact 128-bit sum of floor(x[i]^2 * 2^shift), added into the
       (*hi, *lo) given, as zn_sumsq_fixed does (the engine passes zeros) */
    void (*sumsq_fixed)(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo);

    /* --- the optimizer --- */
    /* One Adam/AdamW step over n elements exactly as zn_adam_step (gradient
       first multiplied by grad_mul: unscale and clip in the same pass). If
       work != NULL it also writes work[i] = round_dt(p[i]) after the update
       (the working copy; DeepSpeed needs a separate pass). */
    void (*adam)(ZnDevice *d, long n, float *p, const float *g, float *m, float *v,
                 const ZnAdamParams *hp, long t, float grad_mul, float *work, ZnDtype dt);

    /* --- the model --- */
    /* C[M,N] = A[M,K] . B[N,K]^T, each C[i][j] summed over k = 0..K-1 in
       order from 0.0f; then + bias[j] if bias != NULL. */
    void (*gemm_nt)(ZnDevice *d, int M, int N, int K, const float *A, const float *B,
                    const float *bias, float *C);
    /* C[M,N] = A[M,K] . B[K,N], k in order. */
    void (*gemm_nn)(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C);
    /* C[M,N] = A[K,M]^T . B[K,N], k in order. */
    void (*gemm_tn)(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C);
    /* out[j] = sum_{i=0..M-1} A[i][j] in order of i. */
    void (*colsum)(ZnDevice *d, int M, int N, const float *A, float *out);
    void (*relu_fwd)(ZnDevice *d, long n, const float *x, float *y);
    /* dx = dy where y > 0 else 0 (y: the ReLU output) */
    void (*relu_bwd)(ZnDevice *d, long n, const float *y, const float *dy, float *dx);
    /* Softmax cross-entropy over B rows of C logits (labels: B ints in device
       memory); returns the mean loss to the host (sum of per-row losses in
       row order, divided by B). dlogits (if not NULL) = (softmax - onehot) *
       grad_scale. exp and log come from src/zn_math.h (one definition that
       gcc and nvcc both compile). */
    float (*softmax_xent)(ZnDevice *d, int B, int C, const float *logits, const int *labels,
                          float grad_scale, float *dlogits);

    /* --- the language model: NULL on a backend without it, which then
       refuses a GPT-2 run at init --- */
    const ZnLmKernels *lm;
};

/* A backend's entries upload .. relu_bwd, from its kernels' names: p_upload,
 * p_download, ... The list is written once for every backend, so a kernel
 * added to the seam is added to each table here, and a backend that lacks
 * it fails to build instead of leaving a NULL in silence (the build allows
 * missing initializers). Each table then names softmax_xent and lm by hand,
 * since a backend may keep those in another file (the host's are in
 * lm_host.c). In declaration order: C++ (kernels/tables.cu) requires it. */
#define ZN_KERNELS_BY_PREFIX(p)                                                 \
    .upload = p##_upload, .download = p##_download, .copy = p##_copy,           \
    .zero = p##_zero, .round_dt = p##_round_dt, .add = p##_add,                 \
    .div = p##_div, .pack16 = p##_pack16, .unpack16 = p##_unpack16,             \
    .quant = p##_quant, .dequant = p##_dequant, .absmax = p##_absmax,           \
    .sumsq_fixed = p##_sumsq_fixed, .adam = p##_adam,                           \
    .gemm_nt = p##_gemm_nt, .gemm_nn = p##_gemm_nn, .gemm_tn = p##_gemm_tn,     \
    .colsum = p##_colsum, .relu_fwd = p##_relu_fwd, .relu_bwd = p##_relu_bwd

/* A backend's whole ZnLmKernels from its kernels' names (p_add_bias, ...),
 * for the same reasons. */
#define ZN_LM_KERNELS_BY_PREFIX(p)                                              \
    .add_bias = p##_add_bias, .embed_fwd = p##_embed_fwd,                       \
    .embed_bwd = p##_embed_bwd, .layernorm_fwd = p##_layernorm_fwd,             \
    .layernorm_bwd = p##_layernorm_bwd, .attn_fwd = p##_attn_fwd,               \
    .attn_bwd = p##_attn_bwd, .gelu_fwd = p##_gelu_fwd, .gelu_bwd = p##_gelu_bwd

extern const ZnKernels zn_host_kernels;

/* The dry run's device (device_meta.c, spec Z-DRY-001): the host device in
 * meta mode (allocations counted per category, no memory behind them) with
 * a kernel table that does nothing -- reductions return zero and finite,
 * softmax_xent 0, download writes zeros -- so an engine can run on it. */
extern const ZnKernels zn_meta_kernels;
void zn_device_meta_init(ZnDevice *d);

#endif
