/* lm_host.c: the host twins of the language-model kernels (device.h,
 * spec Z-GPT-003..007): embeddings, LayerNorm, causal attention, GELU and
 * the bias add. Plain loops in the order the spec states, so that the CUDA
 * twins in exact mode can reproduce every bit. exp and tanh come from
 * core/zn_math.h, the one definition gcc and nvcc share. */
#include "device/lm_host.h"
#include "core/zn_math.h"
#include <math.h>
#include <string.h>

#define GELU_S 0.7978845608f   /* sqrt(2 / pi) */
#define GELU_A 0.044715f

static int lm_isa = -1;   /* -1: zn_isa_gemm() */
void zn_lm_host_set_isa(ZnIsa isa) {
    lm_isa = (int)isa >= 0 && isa < ZN_ISA_N && zn_isa_supported(isa) ? (int)isa : -1;
}
ZnIsa zn_lm_host_isa(void) { return lm_isa >= 0 ? (ZnIsa)lm_isa : zn_isa_gemm(); }

void zn_host_add_bias(ZnDevice *d, int M, int N, const float *b, float *y) {
    (void)d;
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) y[i * N + j] = y[i * N + j] + b[j];
}

void zn_host_embed_fwd(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte, const float *wpe,
                       float *out) {
    (void)d;
    for (long r = 0; r < (long)B * T; r++) {
        const float *e = wte + (long)tok[r] * C, *p = wpe + (r % T) * C;
        for (long c = 0; c < C; c++) out[r * C + c] = e[c] + p[c];
    }
}

void zn_host_embed_bwd(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok, const float *dout,
                       float *dwte, float *dwpe) {
    (void)d;
    memset(dwte, 0, (size_t)V * C * sizeof(float));
    memset(dwpe, 0, (size_t)P * C * sizeof(float));   /* positions past T get no gradient */
    for (long r = 0; r < (long)B * T; r++) {
        float *e = dwte + (long)tok[r] * C, *p = dwpe + (r % T) * C;
        const float *g = dout + r * C;
        for (long c = 0; c < C; c++) {
            e[c] += g[c];
            p[c] += g[c];   /* rows of one t arrive in order of b */
        }
    }
}

void zn_host_layernorm_fwd(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b, float *out,
                           float *mean, float *rstd) {
    (void)d;
    for (long r = 0; r < N; r++) {
        const float *xr = x + r * C;
        float s = 0.0f;
        for (long c = 0; c < C; c++) s += xr[c];
        float m = s / (float)C;
        float v = 0.0f;
        for (long c = 0; c < C; c++) {
            float dx = xr[c] - m;
            v += dx * dx;
        }
        float rs = 1.0f / sqrtf(v / (float)C + 1e-5f);
        for (long c = 0; c < C; c++) out[r * C + c] = ((xr[c] - m) * rs) * w[c] + b[c];
        mean[r] = m;
        rstd[r] = rs;
    }
}

void zn_host_layernorm_bwd(ZnDevice *d, int N, int C, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, float *dx, float *dw, float *db) {
    (void)d;
    memset(dw, 0, (size_t)C * sizeof(float));
    memset(db, 0, (size_t)C * sizeof(float));
    for (long r = 0; r < N; r++) {
        const float *xr = x + r * C, *g = dout + r * C;
        const float m = mean[r], rs = rstd[r];
        /* the two row means of the input gradient's formula */
        float sd = 0.0f, sdn = 0.0f;
        for (long c = 0; c < C; c++) {
            float n = (xr[c] - m) * rs, dn = w[c] * g[c];
            sd += dn;
            sdn += dn * n;
        }
        float md = sd / (float)C, mdn = sdn / (float)C;
        for (long c = 0; c < C; c++) {
            float n = (xr[c] - m) * rs, dn = w[c] * g[c];
            dx[r * C + c] = (dn - md - n * mdn) * rs;
            dw[c] += n * g[c];
            db[c] += g[c];
        }
    }
}

/* Row t of one head: scores s[t2] = (q_t . k_t2) * scale for t2 <= t (the
 * dot product summed over the head's columns in order), softmax over them
 * (zn_softmax_row's max and sum, then each exp divided by the sum). */
void zn_host_attn_fwd(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att, float *out) {
    (void)d;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (long b = 0; b < B; b++)
        for (long h = 0; h < NH; h++)
            for (long t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * C3 + h * hs;
                float *a = att + ((b * NH + h) * T + t) * T;
                for (long t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (b * T + t2) * C3 + C + h * hs;
                    float dot = 0.0f;
                    for (long i = 0; i < hs; i++) dot += q[i] * k[i];
                    a[t2] = dot * scale;
                }
                float mx, sum;
                zn_softmax_row(a, (int)t + 1, &mx, &sum);
                for (long t2 = 0; t2 <= t; t2++) a[t2] = zn_expf(a[t2] - mx) / sum;
                for (long t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                float *o = out + (b * T + t) * C + h * hs;
                for (long i = 0; i < hs; i++) {
                    float acc = 0.0f;
                    for (long t2 = 0; t2 <= t; t2++) acc += a[t2] * qkv[(b * T + t2) * C3 + 2 * C + h * hs + i];
                    o[i] = acc;
                }
            }
}

/* For one head, with P = att and dO = dout (Z-GPT-006):
 *   dP[t][t2] = dO_t . v_t2                       (columns in order)
 *   dS[t][t2] = P[t][t2] * (dP[t][t2] - sum_{t2' <= t} P[t][t2'] dP[t][t2'])
 *   dq_t      = sum_{t2 <= t} (dS[t][t2] * scale) k_t2     (t2 ascending)
 *   dk_t2     = sum_{t >= t2} (dS[t][t2] * scale) q_t      (t ascending)
 *   dv_t2     = sum_{t >= t2} P[t][t2] dO_t                (t ascending) */
void zn_host_attn_bwd(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                      const float *att, float *dqkv, float *scratch) {
    (void)d;
    const int hs = C / NH;
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    memset(dqkv, 0, (size_t)B * T * C3 * sizeof(float));
    for (long b = 0; b < B; b++)
        for (long h = 0; h < NH; h++) {
            const float *P = att + (b * NH + h) * T * T;
            float *dS = scratch + (b * NH + h) * T * T;
            for (long t = 0; t < T; t++) {
                const float *g = dout + (b * T + t) * C + h * hs;
                const float *p = P + t * T;
                float *ds = dS + t * T;
                float dot = 0.0f;
                for (long t2 = 0; t2 <= t; t2++) {
                    const float *v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
                    float dp = 0.0f;
                    for (long i = 0; i < hs; i++) dp += g[i] * v[i];
                    ds[t2] = dp;
                    dot += p[t2] * dp;
                }
                for (long t2 = 0; t2 <= t; t2++) ds[t2] = p[t2] * (ds[t2] - dot) * scale;
                float *dq = dqkv + (b * T + t) * C3 + h * hs;
                for (long i = 0; i < hs; i++) {
                    float acc = 0.0f;
                    for (long t2 = 0; t2 <= t; t2++) acc += ds[t2] * qkv[(b * T + t2) * C3 + C + h * hs + i];
                    dq[i] = acc;
                }
            }
            /* keys and values: each row t2 collects the queries t >= t2 in order */
            for (long t2 = 0; t2 < T; t2++) {
                float *dk = dqkv + (b * T + t2) * C3 + C + h * hs, *dv = dk + C;
                for (long t = t2; t < T; t++) {
                    const float *q = qkv + (b * T + t) * C3 + h * hs;
                    const float *g = dout + (b * T + t) * C + h * hs;
                    const float s = dS[t * T + t2], p = P[t * T + t2];
                    for (long i = 0; i < hs; i++) {
                        dk[i] += s * q[i];
                        dv[i] += p * g[i];
                    }
                }
            }
        }
}

void zn_host_gelu_fwd(ZnDevice *d, long n, const float *x, float *y) {
    (void)d;
    for (long i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_S * (v + GELU_A * v * v * v);
        y[i] = 0.5f * v * (1.0f + zn_tanhf(u));
    }
}

/* d/dx: 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) S (1 + 3 A x^2) */
void zn_host_gelu_bwd(ZnDevice *d, long n, const float *x, const float *dy, float *dx) {
    (void)d;
    for (long i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_S * (v + GELU_A * v * v * v);
        float th = zn_tanhf(u);
        float local = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = local * dy[i];
    }
}
