/* lm.cu: the language-model kernels of device.h (GPT-2: bias, embeddings,
 * LayerNorm, causal attention, GELU; spec Z-GPT-003..007) as exact twins of
 * the host's (device/lm_host.c, spec Z-CUDA-009). Every thread's work is one
 * function of src/device/lm_elem.h, the text gcc compiles for the CPU check
 * (tests/test_lm_elem.c runs these very launches as loops and compares the
 * bits with the host twins): an output element, or a row or column where
 * the definition is one serial sum (a row's statistics, a column summed
 * over rows in order). With -fmad=false -prec-div=true -prec-sqrt=true the
 * GPU computes what the CPU does.
 *
 * Correctness over speed: simple grid-stride loops, one work item a
 * thread, no shared memory, no reordered sums. Both tables use these
 * kernels (the fast table differs only in its GEMMs). */
#include "cuda_dev.h"
extern "C" {
#include "device/lm_elem.h"
}

/* the grid-stride loop every kernel here uses */
#define FOR_EACH(i, n) \
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

/* one launch of n work items on d's stream; returns from the calling entry
   point when d has failed before or the launch fails (recorded in d) */
#define LAUNCH(d, n, what, kernel, ...)                                                         \
    do {                                                                                        \
        if (!zn_cuda_ok(d)) return;                                                             \
        kernel<<<zn_cuda_blocks(d, n), ZN_CUDA_THREADS, 0, zn_cuda_dev(d)->stream>>>(__VA_ARGS__); \
        if (zn_cuda_launched(d, what)) return;                                                  \
    } while (0)

/* ------------------------------------------------------------ kernels */

__global__ void k_add_bias(long n, int N, const float *b, float *y) {
    FOR_EACH(e, n) zn_lm_add_bias_at(e, N, b, y);
}

__global__ void k_embed_fwd(long n, int T, int C, const int *tok, const float *wte, const float *wpe, float *out) {
    FOR_EACH(e, n) zn_lm_embed_fwd_at(e, T, C, tok, wte, wpe, out);
}

/* one thread per column: a repeated token makes a dwte element a serial sum */
__global__ void k_embed_bwd_cols(int B, int T, int C, const int *tok, const float *dout, float *dwte,
                                 float *dwpe) {
    FOR_EACH(c, C) zn_lm_embed_bwd_col(c, B, T, C, tok, dout, dwte, dwpe);
}

__global__ void k_ln_stats(int N, int C, const float *x, float *mean, float *rstd) {
    FOR_EACH(r, N) zn_lm_ln_stats_row(r, C, x, mean, rstd);
}

__global__ void k_ln_out(long n, int C, const float *x, const float *w, const float *b, const float *mean,
                         const float *rstd, float *out) {
    FOR_EACH(e, n) zn_lm_ln_out_at(e, C, x, w, b, mean, rstd, out);
}

__global__ void k_ln_dmeans(int N, int C, const float *dout, const float *x, const float *w, const float *mean,
                            const float *rstd, float *dm) {
    FOR_EACH(r, N) zn_lm_ln_dmeans_row(r, C, dout, x, w, mean, rstd, dm);
}

__global__ void k_ln_dx(long n, int C, const float *dout, const float *x, const float *w, const float *mean,
                        const float *rstd, const float *dm, float *dx) {
    FOR_EACH(e, n) zn_lm_ln_dx_at(e, C, dout, x, w, mean, rstd, dm, dx);
}

__global__ void k_ln_dwdb(int N, int C, const float *dout, const float *x, const float *mean, const float *rstd,
                          float *dw, float *db) {
    FOR_EACH(c, C) zn_lm_ln_dwdb_col(c, N, C, dout, x, mean, rstd, dw, db);
}

__global__ void k_attn_score(long n, int T, int C, int NH, const float *qkv, float *att) {
    FOR_EACH(e, n) zn_lm_attn_score_at(e, T, C, NH, qkv, att);
}

__global__ void k_attn_max(long rows, int T, const float *att, float *st) {
    FOR_EACH(row, rows) zn_lm_attn_max_row(row, T, att, st);
}

__global__ void k_attn_exp(long n, int T, const float *st, float *att) {
    FOR_EACH(e, n) zn_lm_attn_exp_at(e, T, st, att);
}

__global__ void k_attn_sum(long rows, int T, const float *att, float *st) {
    FOR_EACH(row, rows) zn_lm_attn_sum_row(row, T, att, st);
}

__global__ void k_attn_norm(long n, int T, const float *st, float *att) {
    FOR_EACH(e, n) zn_lm_attn_norm_at(e, T, st, att);
}

__global__ void k_attn_out(long n, int T, int C, int NH, const float *qkv, const float *att, float *out) {
    FOR_EACH(e, n) zn_lm_attn_out_at(e, T, C, NH, qkv, att, out);
}

__global__ void k_attn_dp(long n, int T, int C, int NH, const float *dout, const float *qkv, float *dS) {
    FOR_EACH(e, n) zn_lm_attn_dp_at(e, T, C, NH, dout, qkv, dS);
}

__global__ void k_attn_dsdot(long rows, int T, const float *att, const float *dS, float *dots) {
    FOR_EACH(row, rows) zn_lm_attn_dsdot_row(row, T, att, dS, dots);
}

__global__ void k_attn_ds(long n, int T, int C, int NH, const float *att, const float *dots, float *dS) {
    FOR_EACH(e, n) zn_lm_attn_ds_at(e, T, C, NH, att, dots, dS);
}

__global__ void k_attn_dqkv(long n, int T, int C, int NH, const float *dout, const float *qkv, const float *att,
                            const float *dS, float *dqkv) {
    FOR_EACH(e, n) zn_lm_attn_dqkv_at(e, T, C, NH, dout, qkv, att, dS, dqkv);
}

__global__ void k_gelu_fwd(long n, const float *x, float *y) {
    FOR_EACH(i, n) y[i] = zn_lm_gelu(x[i]);
}

/* dx may be dy: each element reads its own dy before writing its dx */
__global__ void k_gelu_bwd(long n, const float *x, const float *dy, float *dx) {
    FOR_EACH(i, n) dx[i] = zn_lm_gelu_grad(x[i], dy[i]);
}

/* ------------------------------------------------------- entry points */

static void cuda_add_bias(ZnDevice *d, int M, int N, const float *b, float *y) {
    const long n = (long)M * N;
    if (n > 0) LAUNCH(d, n, "add_bias", k_add_bias, n, N, b, y);
}

static void cuda_embed_fwd(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte,
                           const float *wpe, float *out) {
    const long n = (long)B * T * C;
    if (n > 0) LAUNCH(d, n, "embed_fwd", k_embed_fwd, n, T, C, tok, wte, wpe, out);
}

static void cuda_embed_bwd(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok,
                           const float *dout, float *dwte, float *dwpe) {
    /* every element starts from 0.0f, as the host's memset */
    zn_cuda_zero(d, dwte, (size_t)V * C * sizeof(float));
    zn_cuda_zero(d, dwpe, (size_t)P * C * sizeof(float));
    if ((long)B * T > 0 && C > 0) LAUNCH(d, C, "embed_bwd", k_embed_bwd_cols, B, T, C, tok, dout, dwte, dwpe);
}

static void cuda_layernorm_fwd(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b,
                               float *out, float *mean, float *rstd) {
    const long n = (long)N * C;
    /* each launch over its own count: rows get statistics even with no
       columns, as on the host */
    if (N <= 0) return;
    LAUNCH(d, N, "layernorm_fwd stats", k_ln_stats, N, C, x, mean, rstd);
    if (n > 0) LAUNCH(d, n, "layernorm_fwd", k_ln_out, n, C, x, w, b, mean, rstd, out);
}

static void cuda_layernorm_bwd(ZnDevice *d, int N, int C, const float *dout, const float *x,
                               const float *w, const float *mean, const float *rstd, float *dx, float *dw,
                               float *db) {
    if (C <= 0) return;
    const long n = (long)N * C;
    if (n > 0) {
        /* the two row means of dx's formula, per row: kernel scratch */
        float *dm = (float *)zn_cuda_scratch(d, (size_t)2 * N * sizeof(float), "layernorm_bwd scratch");
        if (!dm) return;
        LAUNCH(d, N, "layernorm_bwd means", k_ln_dmeans, N, C, dout, x, w, mean, rstd, dm);
        LAUNCH(d, n, "layernorm_bwd dx", k_ln_dx, n, C, dout, x, w, mean, rstd, dm, dx);
    }
    /* with no rows dw and db are zeros, as on the host */
    LAUNCH(d, C, "layernorm_bwd dw db", k_ln_dwdb, N, C, dout, x, mean, rstd, dw, db);
}

static void cuda_attn_fwd(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att,
                          float *out) {
    const long rows = (long)B * NH * T, na = rows * T, n = (long)B * T * C;
    if (rows <= 0) return;
    /* each row's max and sum: kernel scratch */
    float *st = (float *)zn_cuda_scratch(d, (size_t)2 * rows * sizeof(float), "attn_fwd scratch");
    if (!st) return;
    LAUNCH(d, na, "attn_fwd score", k_attn_score, na, T, C, NH, qkv, att);
    LAUNCH(d, rows, "attn_fwd max", k_attn_max, rows, T, att, st);
    LAUNCH(d, na, "attn_fwd exp", k_attn_exp, na, T, st, att);
    LAUNCH(d, rows, "attn_fwd sum", k_attn_sum, rows, T, att, st);
    LAUNCH(d, na, "attn_fwd norm", k_attn_norm, na, T, st, att);
    if (n > 0) LAUNCH(d, n, "attn_fwd out", k_attn_out, n, T, C, NH, qkv, att, out);
}

static void cuda_attn_bwd(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                          const float *att, float *dqkv, float *scratch) {
    const long rows = (long)B * NH * T, na = rows * T, n = (long)B * T * 3 * C;
    if (rows <= 0) return;
    float *dots = (float *)zn_cuda_scratch(d, (size_t)rows * sizeof(float), "attn_bwd scratch");
    if (!dots) return;
    LAUNCH(d, na, "attn_bwd dp", k_attn_dp, na, T, C, NH, dout, qkv, scratch);
    LAUNCH(d, rows, "attn_bwd dot", k_attn_dsdot, rows, T, att, scratch, dots);
    LAUNCH(d, na, "attn_bwd dS", k_attn_ds, na, T, C, NH, att, dots, scratch);
    if (n > 0) LAUNCH(d, n, "attn_bwd dqkv", k_attn_dqkv, n, T, C, NH, dout, qkv, att, scratch, dqkv);
}

static void cuda_gelu_fwd(ZnDevice *d, long n, const float *x, float *y) {
    if (n > 0) LAUNCH(d, n, "gelu_fwd", k_gelu_fwd, n, x, y);
}

static void cuda_gelu_bwd(ZnDevice *d, long n, const float *x, const float *dy, float *dx) {
    if (n > 0) LAUNCH(d, n, "gelu_bwd", k_gelu_bwd, n, x, dy, dx);
}

/* the table both kernel tables point at (tables.cu) */
extern "C" constinit const ZnLmKernels zn_cuda_lm_kernels = {ZN_LM_KERNELS_BY_PREFIX(cuda)};
