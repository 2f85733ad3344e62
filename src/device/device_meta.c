/* device_meta.c: the meta device of a dry run (spec Z-DRY-001). Its
 * allocations are the host device's meta tokens (device_host.c: counted per
 * category, no memory behind them), and every kernel does nothing: a token
 * must never be dereferenced, so no kernel may touch its buffers. What the
 * kernels return to the host is fixed: reductions give zero and "finite",
 * the loss is 0, a download writes zeros (so the host never reads an
 * uninitialised byte). The engine then takes its ordinary path: no
 * overflow, a zero norm, a step that is applied. */
#include "device/device.h"
#include <string.h>

static void meta_upload(ZnDevice *d, void *dst, const void *src_host, size_t bytes) {
    (void)d, (void)dst, (void)src_host, (void)bytes;
}
/* the one kernel that writes host memory: zeros, a defined value */
static void meta_download(ZnDevice *d, void *dst_host, const void *src, size_t bytes) {
    (void)d, (void)src;
    memset(dst_host, 0, bytes);
}
static void meta_copy(ZnDevice *d, void *dst, const void *src, size_t bytes) { (void)d, (void)dst, (void)src, (void)bytes; }
static void meta_zero(ZnDevice *d, void *dst, size_t bytes) { (void)d, (void)dst, (void)bytes; }
static void meta_round_dt(ZnDevice *d, ZnDtype dt, float *x, long n) { (void)d, (void)dt, (void)x, (void)n; }
static void meta_add(ZnDevice *d, ZnDtype dt, float *dst, const float *src, long n) {
    (void)d, (void)dt, (void)dst, (void)src, (void)n;
}
static void meta_div(ZnDevice *d, ZnDtype dt, float *x, long n, float div) { (void)d, (void)dt, (void)x, (void)n, (void)div; }
static void meta_pack16(ZnDevice *d, ZnDtype dt, uint16_t *dst16, const float *src, long n) {
    (void)d, (void)dt, (void)dst16, (void)src, (void)n;
}
static void meta_unpack16(ZnDevice *d, ZnDtype dt, float *dst, const uint16_t *src16, long n) {
    (void)d, (void)dt, (void)dst, (void)src16, (void)n;
}
static void meta_quant(ZnDevice *d, int bits, const float *x, long n, long max_group, void *q, float *scales) {
    (void)d, (void)bits, (void)x, (void)n, (void)max_group, (void)q, (void)scales;
}
static void meta_dequant(ZnDevice *d, int bits, const void *q, const float *scales, long n, long max_group,
                         ZnDtype dt, float *out) {
    (void)d, (void)bits, (void)q, (void)scales, (void)n, (void)max_group, (void)dt, (void)out;
}
static ZnAbsMax meta_absmax(ZnDevice *d, const float *x, long n) {
    (void)d, (void)x, (void)n;
    return (ZnAbsMax){0.0f, 0};
}
/* adds nothing to the caller's (hi, lo) */
static void meta_sumsq_fixed(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo) {
    (void)d, (void)x, (void)n, (void)shift, (void)hi, (void)lo;
}
static void meta_adam(ZnDevice *d, long n, float *p, const float *g, float *m, float *v, const ZnAdamParams *hp,
                      long t, float grad_mul, float *work, ZnDtype dt) {
    (void)d, (void)n, (void)p, (void)g, (void)m, (void)v, (void)hp, (void)t, (void)grad_mul, (void)work, (void)dt;
}
static void meta_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B, const float *bias,
                         float *C) {
    (void)d, (void)M, (void)N, (void)K, (void)A, (void)B, (void)bias, (void)C;
}
static void meta_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    (void)d, (void)M, (void)N, (void)K, (void)A, (void)B, (void)C;
}
static void meta_colsum(ZnDevice *d, int M, int N, const float *A, float *out) { (void)d, (void)M, (void)N, (void)A, (void)out; }
static void meta_relu_fwd(ZnDevice *d, long n, const float *x, float *y) { (void)d, (void)n, (void)x, (void)y; }
static void meta_relu_bwd(ZnDevice *d, long n, const float *y, const float *dy, float *dx) {
    (void)d, (void)n, (void)y, (void)dy, (void)dx;
}
static float meta_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels, float grad_scale,
                               float *dlogits) {
    (void)d, (void)B, (void)C, (void)logits, (void)labels, (void)grad_scale, (void)dlogits;
    return 0.0f;
}
static void meta_add_bias(ZnDevice *d, int M, int N, const float *b, float *y) { (void)d, (void)M, (void)N, (void)b, (void)y; }
static void meta_embed_fwd(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte, const float *wpe,
                           float *out) {
    (void)d, (void)B, (void)T, (void)C, (void)tok, (void)wte, (void)wpe, (void)out;
}
static void meta_embed_bwd(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok, const float *dout,
                           float *dwte, float *dwpe) {
    (void)d, (void)B, (void)T, (void)C, (void)V, (void)P, (void)tok, (void)dout, (void)dwte, (void)dwpe;
}
static void meta_layernorm_fwd(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b, float *out,
                               float *mean, float *rstd) {
    (void)d, (void)N, (void)C, (void)x, (void)w, (void)b, (void)out, (void)mean, (void)rstd;
}
static void meta_layernorm_bwd(ZnDevice *d, int N, int C, const float *dout, const float *x, const float *w,
                               const float *mean, const float *rstd, float *dx, float *dw, float *db) {
    (void)d, (void)N, (void)C, (void)dout, (void)x, (void)w, (void)mean, (void)rstd, (void)dx, (void)dw, (void)db;
}
static void meta_attn_fwd(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att, float *out) {
    (void)d, (void)B, (void)T, (void)C, (void)NH, (void)qkv, (void)att, (void)out;
}
static void meta_attn_bwd(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                          const float *att, float *dqkv, float *scratch) {
    (void)d, (void)B, (void)T, (void)C, (void)NH, (void)dout, (void)qkv, (void)att, (void)dqkv, (void)scratch;
}
static void meta_gelu_fwd(ZnDevice *d, long n, const float *x, float *y) { (void)d, (void)n, (void)x, (void)y; }
static void meta_gelu_bwd(ZnDevice *d, long n, const float *x, const float *dy, float *dx) {
    (void)d, (void)n, (void)x, (void)dy, (void)dx;
}

/* Every entry set: the language-model ones too, so a GPT-2 model is
   accepted (a backend without them refuses GPT-2 at init). */
const ZnKernels zn_meta_kernels = {
    .upload = meta_upload,
    .download = meta_download,
    .copy = meta_copy,
    .zero = meta_zero,
    .round_dt = meta_round_dt,
    .add = meta_add,
    .div = meta_div,
    .pack16 = meta_pack16,
    .unpack16 = meta_unpack16,
    .quant = meta_quant,
    .dequant = meta_dequant,
    .absmax = meta_absmax,
    .sumsq_fixed = meta_sumsq_fixed,
    .adam = meta_adam,
    .gemm_nt = meta_gemm_nt,
    .gemm_nn = meta_gemm_nn,
    .gemm_tn = meta_gemm_nn,   /* the same shape of arguments, and nothing done */
    .colsum = meta_colsum,
    .relu_fwd = meta_relu_fwd,
    .relu_bwd = meta_relu_bwd,
    .softmax_xent = meta_softmax_xent,
    .add_bias = meta_add_bias,
    .embed_fwd = meta_embed_fwd,
    .embed_bwd = meta_embed_bwd,
    .layernorm_fwd = meta_layernorm_fwd,
    .layernorm_bwd = meta_layernorm_bwd,
    .attn_fwd = meta_attn_fwd,
    .attn_bwd = meta_attn_bwd,
    .gelu_fwd = meta_gelu_fwd,
    .gelu_bwd = meta_gelu_bwd,
};

void zn_device_meta_init(ZnDevice *d) {
    zn_device_host_init(d);   /* the host's accounting and meta tokens */
    d->name = "meta";
    d->meta = 1;
    d->host_addressable = 0;  /* a token is no host memory to read in place */
    d->k = &zn_meta_kernels;
}
