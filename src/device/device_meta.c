/* device_meta.c: the meta device of a dry run (spec Z-DRY-001, Z-DRY-007).
 * Its allocations are the host device's meta tokens (device_host.c: counted
 * per category, no memory behind them), and every kernel does nothing but
 * count what it would have done in d->work: FLOPs of the GEMMs and of
 * attention, elements the memory-bound kernels read and write, elements
 * Adam updates, bytes copied to and from the host. A token must never be
 * dereferenced, so no kernel may touch its buffers. What the kernels return
 * to the host is fixed: reductions give zero and "finite", the loss is 0,
 * a download writes zeros (so the host never reads an uninitialised byte).
 * The engine then takes its ordinary path: no overflow, a zero norm, a step
 * that is applied. */
#include "device/device.h"
#include <string.h>

/* one kernel call: its FLOPs and the elements it reads plus writes */
static void work(ZnDevice *d, double flops, double elems) {
    d->work.flops += flops;
    d->work.mem_elems += elems;
    d->work.kernels++;
}

static void meta_upload(ZnDevice *d, void *dst, const void *src_host, size_t bytes) {
    (void)dst, (void)src_host;
    d->work.h2d_bytes += (double)bytes;
    d->work.kernels++;
}
/* the one kernel that writes host memory: zeros, a defined value */
static void meta_download(ZnDevice *d, void *dst_host, const void *src, size_t bytes) {
    (void)src;
    memset(dst_host, 0, bytes);
    d->work.d2h_bytes += (double)bytes;
    d->work.kernels++;
}
/* bytes of 4-byte elements: a copy reads and writes each */
static void meta_copy(ZnDevice *d, void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src;
    work(d, 0, 2.0 * (double)(bytes / 4));
}
static void meta_zero(ZnDevice *d, void *dst, size_t bytes) {
    (void)dst;
    work(d, 0, (double)(bytes / 4));
}
static void meta_round_dt(ZnDevice *d, ZnDtype dt, float *x, long n) { (void)dt, (void)x, work(d, 0, 2.0 * n); }
static void meta_add(ZnDevice *d, ZnDtype dt, float *dst, const float *src, long n) {
    (void)dt, (void)dst, (void)src;
    work(d, 0, 3.0 * n);
}
static void meta_div(ZnDevice *d, ZnDtype dt, float *x, long n, float div) { (void)dt, (void)x, (void)div, work(d, 0, 2.0 * n); }
static void meta_pack16(ZnDevice *d, ZnDtype dt, uint16_t *dst16, const float *src, long n) {
    (void)dt, (void)dst16, (void)src;
    work(d, 0, 2.0 * n);
}
static void meta_unpack16(ZnDevice *d, ZnDtype dt, float *dst, const uint16_t *src16, long n) {
    (void)dt, (void)dst, (void)src16;
    work(d, 0, 2.0 * n);
}
static void meta_quant(ZnDevice *d, int bits, const float *x, long n, long max_group, void *q, float *scales) {
    (void)bits, (void)x, (void)max_group, (void)q, (void)scales;
    work(d, 0, 2.0 * n);   /* a pass for the group's absmax, one for the codes */
}
static void meta_dequant(ZnDevice *d, int bits, const void *q, const float *scales, long n, long max_group,
                         ZnDtype dt, float *out) {
    (void)bits, (void)q, (void)scales, (void)max_group, (void)dt, (void)out;
    work(d, 0, 2.0 * n);
}
static ZnAbsMax meta_absmax(ZnDevice *d, const float *x, long n) {
    (void)x;
    work(d, 0, (double)n);
    return (ZnAbsMax){0.0f, 0};
}
/* adds nothing to the caller's (hi, lo) */
static void meta_sumsq_fixed(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo) {
    (void)x, (void)shift, (void)hi, (void)lo;
    work(d, 0, (double)n);
}
static void meta_adam(ZnDevice *d, long n, float *p, const float *g, float *m, float *v, const ZnAdamParams *hp,
                      long t, float grad_mul, float *work_copy, ZnDtype dt) {
    (void)p, (void)g, (void)m, (void)v, (void)hp, (void)t, (void)grad_mul, (void)work_copy, (void)dt;
    d->work.opt_elems += (double)n;
    d->work.kernels++;
}
static void meta_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B, const float *bias,
                         float *C) {
    (void)A, (void)B, (void)bias, (void)C;
    work(d, 2.0 * M * N * K, (double)M * K + (double)N * K + (double)M * N);
}
static void meta_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    (void)A, (void)B, (void)C;
    work(d, 2.0 * M * N * K, (double)M * K + (double)K * N + (double)M * N);
}
/* the same shape of arguments and the same count as gemm_nn; a name of its
   own so that the table is ZN_KERNELS_BY_PREFIX's */
static void meta_gemm_tn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    meta_gemm_nn(d, M, N, K, A, B, C);
}
static void meta_colsum(ZnDevice *d, int M, int N, const float *A, float *out) {
    (void)A, (void)out;
    work(d, 0, (double)M * N + N);
}
static void meta_relu_fwd(ZnDevice *d, long n, const float *x, float *y) { (void)x, (void)y, work(d, 0, 2.0 * n); }
static void meta_relu_bwd(ZnDevice *d, long n, const float *y, const float *dy, float *dx) {
    (void)y, (void)dy, (void)dx;
    work(d, 0, 3.0 * n);
}
static float meta_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels, float grad_scale,
                               float *dlogits) {
    (void)labels, (void)grad_scale, (void)logits;
    work(d, 0, (dlogits ? 2.0 : 1.0) * B * C);
    return 0.0f;
}
static void meta_add_bias(ZnDevice *d, int M, int N, const float *b, float *y) {
    (void)b, (void)y;
    work(d, 0, 2.0 * M * N);
}
static void meta_embed_fwd(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte, const float *wpe,
                           float *out) {
    (void)tok, (void)wte, (void)wpe, (void)out;
    work(d, 0, 3.0 * B * T * C);
}
static void meta_embed_bwd(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok, const float *dout,
                           float *dwte, float *dwpe) {
    (void)tok, (void)dout, (void)dwte, (void)dwpe;
    work(d, 0, (double)V * C + (double)P * C + 3.0 * B * T * C);   /* zeroing both, then the rows */
}
static void meta_layernorm_fwd(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b, float *out,
                               float *mean, float *rstd) {
    (void)x, (void)w, (void)b, (void)out, (void)mean, (void)rstd;
    work(d, 0, 2.0 * N * C);
}
static void meta_layernorm_bwd(ZnDevice *d, int N, int C, const float *dout, const float *x, const float *w,
                               const float *mean, const float *rstd, float *dx, float *dw, float *db) {
    (void)dout, (void)x, (void)w, (void)mean, (void)rstd, (void)dx, (void)dw, (void)db;
    work(d, 0, 3.0 * N * C);
}
/* Megatron's count (Narayanan et al. 2021): Q.K^T and P.V over the whole
   T x T square, 2*B*T*T*C FLOPs each, backward twice the forward; the
   probabilities [B, NH, T, T] are written forward and read backward */
static void meta_attn_fwd(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att, float *out) {
    (void)qkv, (void)att, (void)out;
    work(d, 4.0 * B * T * T * C, 4.0 * B * T * C + (double)B * NH * T * T);
}
static void meta_attn_bwd(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                          const float *att, float *dqkv, float *scratch) {
    (void)dout, (void)qkv, (void)att, (void)dqkv, (void)scratch;
    work(d, 8.0 * B * T * T * C, 7.0 * B * T * C + 2.0 * B * NH * T * T);
}
static void meta_gelu_fwd(ZnDevice *d, long n, const float *x, float *y) { (void)x, (void)y, work(d, 0, 2.0 * n); }
static void meta_gelu_bwd(ZnDevice *d, long n, const float *x, const float *dy, float *dx) {
    (void)x, (void)dy, (void)dx;
    work(d, 0, 3.0 * n);
}

static const ZnLmKernels meta_lm_kernels = {ZN_LM_KERNELS_BY_PREFIX(meta)};

/* Every entry set: the language-model ones too, so a GPT-2 model is
   accepted (a backend without them refuses GPT-2 at init). */
const ZnKernels zn_meta_kernels = {
    ZN_KERNELS_BY_PREFIX(meta),
    .softmax_xent = meta_softmax_xent,
    .lm = &meta_lm_kernels,
};

void zn_device_meta_init(ZnDevice *d) {
    zn_device_host_init(d);   /* the host's accounting and meta tokens */
    d->name = "meta";
    d->meta = 1;
    d->host_addressable = 0;  /* a token is no host memory to read in place */
    d->k = &zn_meta_kernels;
    memset(&d->work, 0, sizeof d->work);
}
