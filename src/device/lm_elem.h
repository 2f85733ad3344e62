/* lm_elem.h: the language-model kernels of device.h (GPT-2, spec
 * Z-GPT-003..007) one output element at a time, compiled by gcc (the CPU
 * check, tests/test_lm_elem.c) and by nvcc (the CUDA twins, kernels/lm.cu),
 * so both run the same fp32 operations in the same order (spec Z-CUDA-009).
 *
 * Each function is the body of one CUDA thread's work item, indexed the way
 * the kernel's grid indexes it: an output element, or a row (or column)
 * where the definition is one serial sum. The kernel runs
 *   for every index i of the grid: zn_lm_<name>(i, ...)
 * and tests/test_lm_elem.c runs the same loop on the CPU and compares the
 * bits with the host twins (device/lm_host.c), whose vector inner loops
 * (device/lm_tile.h) and GEMM (device/gemm_host.c) compute each element as
 * the same ordered sum:
 *   - every sum starts from 0.0f and adds its terms in the stated order,
 *     acc = acc + a * b (no FMA: gcc -ffp-contract=off, nvcc -fmad=false);
 *   - a GEMM element (the attention scores, dP) is one sum over the head's
 *     columns in order; attention's weighted sums over t2 <= t run t2
 *     ascending (the host's GEMM prefix over t2 < t0 continued by axpy is
 *     that same sequence of additions);
 *   - exp and tanh are core/zn_math.h's, division and sqrtf are IEEE on
 *     both sides (nvcc -prec-div=true -prec-sqrt=true).
 * Every expression below copies its host counterpart's order of operations
 * (lm_tile.h's ln_out, ln_dx, ln_dwdb, dsoft_row, scale_row, exp_from,
 * div_row, dkdv; lm_host.c's lm_gelu1, lm_gelu_grad1 and row sums). */
#ifndef ZN_LM_ELEM_H
#define ZN_LM_ELEM_H
#include <math.h>
#include "core/zn_hd.h"
#include "core/zn_math.h"

#define ZN_LM_GELU_S 0.7978845608f   /* sqrt(2 / pi) */
#define ZN_LM_GELU_A 0.044715f

/* ------------------------------------------------------------------------ */
/* bias and embeddings (Z-GPT-003) */

/* element e of y [M, N]: y + b[column] */
static inline ZN_HD void zn_lm_add_bias_at(long e, int N, const float *b, float *y) {
    y[e] = y[e] + b[e % N];
}

/* element e of out [B*T, C]: wte[tok[r]][c] + wpe[r mod T][c] */
static inline ZN_HD void zn_lm_embed_fwd_at(long e, int T, int C, const int *tok, const float *wte,
                                            const float *wpe, float *out) {
    const long r = e / C, c = e % C;
    out[e] = wte[(long)tok[r] * C + c] + wpe[(r % T) * C + c];
}

/* Column c of dwte [V, C] and dwpe [P, C], both zeroed before: the rows r =
 * 0..B*T-1 added in order, so dwte[v][c] sums its tokens' rows r ascending
 * and dwpe[t][c] its rows b ascending (a repeated token makes one element a
 * serial sum, hence a whole column per thread). */
static inline ZN_HD void zn_lm_embed_bwd_col(long c, int B, int T, int C, const int *tok, const float *dout,
                                             float *dwte, float *dwpe) {
    const long BT = (long)B * T;
    for (long r = 0; r < BT; r++) {
        const float g = dout[r * C + c];
        float *a = dwte + (long)tok[r] * C + c, *p = dwpe + (r % T) * C + c;
        *a = *a + g;
        *p = *p + g;
    }
}

/* ------------------------------------------------------------------------ */
/* LayerNorm (Z-GPT-004) */

/* row r's statistics: mean = sum(x)/C, rstd = 1/sqrtf(sum((x-mean)^2)/C + 1e-5f),
 * both sums over the columns in order */
static inline ZN_HD void zn_lm_ln_stats_row(long r, int C, const float *x, float *mean, float *rstd) {
    const float *xr = x + r * C;
    float s = 0.0f;
    for (long c = 0; c < C; c++) s += xr[c];
    const float m = s / (float)C;
    float v = 0.0f;
    for (long c = 0; c < C; c++) {
        float dx = xr[c] - m;
        v += dx * dx;
    }
    mean[r] = m;
    rstd[r] = 1.0f / sqrtf(v / (float)C + 1e-5f);
}

/* element e of out [N, C]: ((x - mean) rstd) w + b (lm_tile.h ln_out) */
static inline ZN_HD void zn_lm_ln_out_at(long e, int C, const float *x, const float *w, const float *b,
                                         const float *mean, const float *rstd, float *out) {
    const long r = e / C, c = e % C;
    out[e] = ((x[e] - mean[r]) * rstd[r]) * w[c] + b[c];
}

/* row r of the input gradient's two row means, stored at dm[2r] (mean of
 * w g) and dm[2r + 1] (mean of w g n, n the normalized input); the sums run
 * over the columns in order (lm_host.c ln_bwd_rows) */
static inline ZN_HD void zn_lm_ln_dmeans_row(long r, int C, const float *dout, const float *x, const float *w,
                                             const float *mean, const float *rstd, float *dm) {
    const float *xr = x + r * C, *g = dout + r * C;
    const float m = mean[r], rs = rstd[r];
    float sd = 0.0f, sdn = 0.0f;
    for (long c = 0; c < C; c++) {
        float n = (xr[c] - m) * rs, dn = w[c] * g[c];
        sd += dn;
        sdn += dn * n;
    }
    dm[2 * r] = sd / (float)C;
    dm[2 * r + 1] = sdn / (float)C;
}

/* element e of dx [N, C]: (w g - md - ((x - m) rs) mdn) rs (lm_tile.h ln_dx) */
static inline ZN_HD void zn_lm_ln_dx_at(long e, int C, const float *dout, const float *x, const float *w,
                                        const float *mean, const float *rstd, const float *dm, float *dx) {
    const long r = e / C, c = e % C;
    const float rs = rstd[r];
    const float nn = (x[e] - mean[r]) * rs, dn = w[c] * dout[e];
    dx[e] = (dn - dm[2 * r] - nn * dm[2 * r + 1]) * rs;
}

/* column c of dw and db: sums over the rows in order of ((x - m) rs) g and
 * of g (lm_tile.h ln_dwdb) */
static inline ZN_HD void zn_lm_ln_dwdb_col(long c, int N, int C, const float *dout, const float *x,
                                           const float *mean, const float *rstd, float *dw, float *db) {
    float aw = 0.0f, ab = 0.0f;
    for (long r = 0; r < N; r++) {
        const float g = dout[r * C + c];
        aw = aw + ((x[r * C + c] - mean[r]) * rstd[r]) * g;
        ab = ab + g;
    }
    dw[c] = aw;
    db[c] = ab;
}

/* ------------------------------------------------------------------------ */
/* causal attention (Z-GPT-005, Z-GPT-006). qkv is [B*T, 3C] (q | k | v),
 * head h at columns h*hs of each; a "row" of the probabilities is index
 * (b*NH + h)*T + t of att [B, NH, T, T]. */

/* 1/sqrt(head size), as the host computes it */
static inline ZN_HD float zn_lm_attn_scale(int C, int NH) { return 1.0f / sqrtf((float)(C / NH)); }

/* The probabilities in five launches, so that the work of a row spreads
 * over its T elements (one thread a row left most of an H200 idle: 430 ms
 * of a GPT-2 124M step at T = 1024). Element e of att [B, NH, T, T] is
 * (row, t2) = (e / T, e % T); a row's serial parts, its max and its sum,
 * are the two row launches, and the element launches read only what an
 * earlier launch wrote:
 *   score  s[t2] = (q_t . k_t2) * scale, t2 <= t (the dot product over the
 *          head's columns in order from 0.0f, as the host GEMM)
 *   max    zn_softmax_row's: s[0], then each s[t2] greater than the max so far
 *   exp    s[t2] = zn_expf(s[t2] - max)
 *   sum    zn_softmax_row's: from 0.0f over t2 = 0..t ascending (it adds the
 *          same zn_expf values, computed here once)
 *   norm   s[t2] / sum, and zero above the diagonal.
 * st holds two floats a row: the max, then the sum. */
static inline ZN_HD long zn_lm_attn_t(long row, int T) { return row % T; }

static inline ZN_HD void zn_lm_attn_score_at(long e, int T, int C, int NH, const float *qkv, float *att) {
    const long row = e / T, t2 = e % T, t = zn_lm_attn_t(row, T);
    if (t2 > t) return;
    const long hs = C / NH, C3 = 3L * C;
    const long bh = row / T, b = bh / NH, h = bh % NH;
    const float *q = qkv + (b * T + t) * C3 + h * hs;
    const float *k = qkv + (b * T + t2) * C3 + C + h * hs;
    float dot = 0.0f;
    for (long i = 0; i < hs; i++) dot += q[i] * k[i];
    att[e] = dot * zn_lm_attn_scale(C, NH);
}

static inline ZN_HD void zn_lm_attn_max_row(long row, int T, const float *att, float *st) {
    const float *a = att + row * T;
    const long t = zn_lm_attn_t(row, T);
    float mx = a[0];
    for (long t2 = 1; t2 <= t; t2++) if (a[t2] > mx) mx = a[t2];
    st[2 * row] = mx;
}

static inline ZN_HD void zn_lm_attn_exp_at(long e, int T, const float *st, float *att) {
    const long row = e / T;
    if (e % T <= zn_lm_attn_t(row, T)) att[e] = zn_expf(att[e] - st[2 * row]);
}

static inline ZN_HD void zn_lm_attn_sum_row(long row, int T, const float *att, float *st) {
    const float *a = att + row * T;
    const long t = zn_lm_attn_t(row, T);
    float sum = 0.0f;
    for (long t2 = 0; t2 <= t; t2++) sum += a[t2];
    st[2 * row + 1] = sum;
}

static inline ZN_HD void zn_lm_attn_norm_at(long e, int T, const float *st, float *att) {
    const long row = e / T;
    att[e] = e % T <= zn_lm_attn_t(row, T) ? att[e] / st[2 * row + 1] : 0.0f;
}

/* element e of out [B*T, C]: sum over t2 = 0..t ascending of
 * att[b][h][t][t2] v_t2[i] */
static inline ZN_HD void zn_lm_attn_out_at(long e, int T, int C, int NH, const float *qkv, const float *att,
                                           float *out) {
    const long hs = C / NH, C3 = 3L * C;
    const long r = e / C, c = e % C, b = r / T, t = r % T, h = c / hs;
    const float *a = att + ((b * NH + h) * T + t) * T;
    const float *v = qkv + b * T * C3 + 2L * C + c;   /* column c of v at row b*T */
    float acc = 0.0f;
    for (long t2 = 0; t2 <= t; t2++) acc = acc + a[t2] * v[t2 * C3];
    out[e] = acc;
}

/* dS (scratch [B, NH, T, T], only t2 <= t written) in three launches, as
 * the probabilities above (element e is (row, t2) = (e / T, e % T)):
 *   dp     dS[t2] = dO_t . v_t2        (the head's columns in order)
 *   dot    sum_{t2 <= t} P[t2] dS[t2]  (t2 ascending, from 0.0f), one a row
 *   ds     dS[t2] = (P[t2] (dS[t2] - dot)) scale  (lm_tile.h dsoft_row)
 * so dq, dk below read the softmax gradient already scaled. */
static inline ZN_HD void zn_lm_attn_dp_at(long e, int T, int C, int NH, const float *dout, const float *qkv,
                                          float *dS) {
    const long row = e / T, t2 = e % T, t = zn_lm_attn_t(row, T);
    if (t2 > t) return;
    const long hs = C / NH, C3 = 3L * C;
    const long bh = row / T, b = bh / NH, h = bh % NH;
    const float *g = dout + (b * T + t) * C + h * hs;
    const float *v = qkv + (b * T + t2) * C3 + 2L * C + h * hs;
    float dp = 0.0f;
    for (long i = 0; i < hs; i++) dp += g[i] * v[i];
    dS[e] = dp;
}

static inline ZN_HD void zn_lm_attn_dsdot_row(long row, int T, const float *att, const float *dS, float *dots) {
    const float *p = att + row * T, *ds = dS + row * T;
    const long t = zn_lm_attn_t(row, T);
    float dot = 0.0f;
    for (long t2 = 0; t2 <= t; t2++) dot += p[t2] * ds[t2];
    dots[row] = dot;
}

static inline ZN_HD void zn_lm_attn_ds_at(long e, int T, int C, int NH, const float *att, const float *dots,
                                          float *dS) {
    const long row = e / T;
    if (e % T <= zn_lm_attn_t(row, T)) dS[e] = (att[e] * (dS[e] - dots[row])) * zn_lm_attn_scale(C, NH);
}

/* Element e of dqkv [B*T, 3C], from dS of zn_lm_attn_ds_at:
 *   dq_t[i]  = sum_{t2 = 0..t} dS[t][t2] k_t2[i]          (t2 ascending)
 *   dk_t[i]  = sum_{t1 = t..T-1} dS[t1][t] q_t1[i]         (t1 ascending)
 *   dv_t[i]  = sum_{t1 = t..T-1} P[t1][t] dO_t1[i]         (t1 ascending) */
static inline ZN_HD void zn_lm_attn_dqkv_at(long e, int T, int C, int NH, const float *dout, const float *qkv,
                                            const float *att, const float *dS, float *dqkv) {
    const long hs = C / NH, C3 = 3L * C;
    const long r = e / C3, col = e % C3, part = col / C, c = col % C;
    const long b = r / T, t = r % T, h = c / hs;
    const long bh = b * NH + h;
    const float *S = dS + bh * T * T, *P = att + bh * T * T;
    float acc = 0.0f;
    if (part == 0) {
        const float *k = qkv + b * T * C3 + C + c;
        for (long t2 = 0; t2 <= t; t2++) acc = acc + S[t * T + t2] * k[t2 * C3];
    } else if (part == 1) {
        const float *q = qkv + b * T * C3 + c;
        for (long t1 = t; t1 < T; t1++) acc = acc + S[t1 * T + t] * q[t1 * C3];
    } else {
        const float *g = dout + b * T * C + c;
        for (long t1 = t; t1 < T; t1++) acc = acc + P[t1 * T + t] * g[t1 * C];
    }
    dqkv[e] = acc;
}

/* ------------------------------------------------------------------------ */
/* GELU, tanh form (Z-GPT-007): lm_host.c's lm_gelu1 and lm_gelu_grad1,
 * operation for operation */

static inline ZN_HD float zn_lm_gelu(float v) {
    float u = ZN_LM_GELU_S * (v + ZN_LM_GELU_A * v * v * v);
    return 0.5f * v * (1.0f + zn_tanhf(u));
}

/* dy times d/dx: 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) S (1 + 3 A x^2) */
static inline ZN_HD float zn_lm_gelu_grad(float v, float dy) {
    float u = ZN_LM_GELU_S * (v + ZN_LM_GELU_A * v * v * v);
    float th = zn_tanhf(u);
    float local = 0.5f * (1.0f + th) +
                  0.5f * v * (1.0f - th * th) * ZN_LM_GELU_S * (1.0f + 3.0f * ZN_LM_GELU_A * v * v);
    return local * dy;
}

#endif
