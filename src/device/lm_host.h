/* lm_host.h: the host twins of the language-model kernels of device.h
 * (GPT-2: embeddings, LayerNorm, attention, GELU, bias), exported so the
 * host kernel table and the tests can name them. */
#ifndef ZN_LM_HOST_H
#define ZN_LM_HOST_H
#include "device/device.h"
#include "core/cpu.h"

/* The instruction set the kernels run on: zn_isa_gemm() unless a test chose
 * another with zn_lm_host_set_isa (one this CPU cannot run, or ZN_ISA_N,
 * goes back to the default). Every choice gives the same bits (Z-HOST-008).
 * Not for use while kernels run. */
void zn_lm_host_set_isa(ZnIsa isa);
/* Test hook: 1 makes attention run as when its block buffer's allocation
 * fails (row at a time; the same bits). */
void zn_lm_host_test_no_buffer(int on);
ZnIsa zn_lm_host_isa(void);

void zn_host_add_bias(ZnDevice *d, int M, int N, const float *b, float *y);
void zn_host_embed_fwd(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte, const float *wpe,
                       float *out);
void zn_host_embed_bwd(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok, const float *dout,
                       float *dwte, float *dwpe);
void zn_host_layernorm_fwd(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b, float *out,
                           float *mean, float *rstd);
void zn_host_layernorm_bwd(ZnDevice *d, int N, int C, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, float *dx, float *dw, float *db);
void zn_host_attn_fwd(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att, float *out);
void zn_host_attn_bwd(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                      const float *att, float *dqkv, float *scratch);
void zn_host_gelu_fwd(ZnDevice *d, long n, const float *x, float *y);
void zn_host_gelu_bwd(ZnDevice *d, long n, const float *x, const float *dy, float *dx);
/* softmax cross-entropy (Z-MOD-009), rows over the host threads */
float zn_host_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels, float grad_scale,
                           float *dlogits);

#endif
