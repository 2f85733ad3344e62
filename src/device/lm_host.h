/* lm_host.h: the host twins of the language-model kernels of device.h
 * (GPT-2: embeddings, LayerNorm, attention, GELU, bias) as one table, and
 * softmax cross-entropy, exported so the host kernel table and the tests
 * can name them. */
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

/* the host's language-model kernels, for zn_host_kernels.lm and the tests */
extern const ZnLmKernels zn_host_lm_kernels;
/* softmax cross-entropy (Z-MOD-009), rows over the host threads */
float zn_host_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels, float grad_scale,
                           float *dlogits);

#endif
