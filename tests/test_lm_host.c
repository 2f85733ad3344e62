/* test_lm_host.c: the host language-model kernels (device/lm_host.c, spec
 * Z-HOST-006..008) against element-at-a-time references written here from
 * the formulas of Z-GPT-003..007, on odd sizes, for 1, 2 and 3 host threads
 * and every instruction-set path this CPU runs: the bits must be equal
 * (memcmp), not just close. */
#include "testutil.h"
#include "core/cpu.h"
#include "core/zn_math.h"
#include "device/lm_host.h"

/* ------------------------------------------------------------------------ */
/* inputs */

static uint32_t lcg_state;
static float urand(void) {   /* in [-1, 1) */
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)(lcg_state >> 8) / 8388608.0f - 1.0f;
}
static float *rand_buf(long n, float scale) {
    float *p = malloc((size_t)n * sizeof(float));
    assert_non_null(p);
    for (long i = 0; i < n; i++) p[i] = scale * urand();
    return p;
}
static float *zbuf(long n) {
    float *p = calloc((size_t)n, sizeof(float));
    assert_non_null(p);
    return p;
}
static void same(const float *a, const float *b, long n, const char *what, int isa, int threads) {
    if (memcmp(a, b, (size_t)n * sizeof(float)) == 0) return;
    for (long i = 0; i < n; i++)
        if (!zt_same_bits(a[i], b[i])) {
            fail_msg("%s: element %ld differs (%.9g vs reference %.9g), isa %s, %d threads", what, i, (double)a[i],
                     (double)b[i], zn_isa_name((ZnIsa)isa), threads);
        }
}

/* The paths to try: every instruction set this CPU runs, each with 1, 2
 * and 3 threads. */
#define FOR_PATHS(body)                                                   \
    for (int isa = ZN_ISA_SCALAR; isa < ZN_ISA_N; isa++) {                \
        if (!zn_isa_supported((ZnIsa)isa)) continue;                      \
        zn_lm_host_set_isa((ZnIsa)isa);                                   \
        for (int threads = 1; threads <= 3; threads++) {                  \
            zn_set_host_threads(threads);                                 \
            body                                                          \
        }                                                                 \
    }                                                                     \
    zn_lm_host_set_isa(ZN_ISA_N);                                         \
    zn_set_host_threads(0);

/* ------------------------------------------------------------------------ */
/* references, one output element at a time, from the spec's formulas */

/* Z-MOD-009: per row the max and the sum of zn_softmax_row, the row loss
 * added to the total in row order, each gradient element its own formula */
static float ref_xent(int B, int C, const float *logits, const int *labels, float gs, float *dl) {
    float total = 0.0f;
    for (long b = 0; b < B; b++) {
        const float *z = logits + b * C;
        float m, s;
        zn_softmax_row(z, C, &m, &s);
        const int y = labels[b];
        total += zn_logf(s) - (z[y] - m);
        if (dl)
            for (long c = 0; c < C; c++) dl[b * C + c] = (zn_expf(z[c] - m) / s - (c == y ? 1.0f : 0.0f)) * gs;
    }
    return total / (float)B;
}

static void ref_bias(int M, int N, const float *b, float *y) {
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) y[i * N + j] = y[i * N + j] + b[j];
}

static void ref_embed_fwd(int B, int T, int C, const int *tok, const float *wte, const float *wpe, float *out) {
    for (long r = 0; r < (long)B * T; r++)
        for (long c = 0; c < C; c++) out[r * C + c] = wte[(long)tok[r] * C + c] + wpe[(r % T) * C + c];
}

/* dwte[v][c]: 0, then dout[r][c] for every r with tok[r] = v, r ascending;
 * dwpe[t][c]: 0, then dout[b T + t][c] for b ascending; rows t >= T 0. */
static void ref_embed_bwd(int B, int T, int C, int V, int P, const int *tok, const float *dout, float *dwte,
                          float *dwpe) {
    for (long v = 0; v < V; v++)
        for (long c = 0; c < C; c++) {
            float acc = 0.0f;
            for (long r = 0; r < (long)B * T; r++)
                if (tok[r] == v) acc += dout[r * C + c];
            dwte[v * C + c] = acc;
        }
    for (long t = 0; t < P; t++)
        for (long c = 0; c < C; c++) {
            float acc = 0.0f;
            if (t < T)
                for (long b = 0; b < B; b++) acc += dout[(b * T + t) * C + c];
            dwpe[t * C + c] = acc;
        }
}

static void ref_ln_stats(int C, const float *xr, float *m, float *rs) {
    float s = 0.0f;
    for (long c = 0; c < C; c++) s += xr[c];
    *m = s / (float)C;
    float v = 0.0f;
    for (long c = 0; c < C; c++) v += (xr[c] - *m) * (xr[c] - *m);
    *rs = 1.0f / sqrtf(v / (float)C + 1e-5f);
}

static void ref_ln_fwd(int N, int C, const float *x, const float *w, const float *b, float *out, float *mean,
                       float *rstd) {
    for (long r = 0; r < N; r++) {
        float m, rs;
        ref_ln_stats(C, x + r * C, &m, &rs);
        for (long c = 0; c < C; c++) out[r * C + c] = ((x[r * C + c] - m) * rs) * w[c] + b[c];
        mean[r] = m;
        rstd[r] = rs;
    }
}

static void ref_ln_bwd(int N, int C, const float *dout, const float *x, const float *w, const float *mean,
                       const float *rstd, float *dx, float *dw, float *db) {
    for (long r = 0; r < N; r++)
        for (long c = 0; c < C; c++) {
            float sd = 0.0f, sdn = 0.0f;
            for (long c2 = 0; c2 < C; c2++) {
                float n2 = (x[r * C + c2] - mean[r]) * rstd[r], dn2 = w[c2] * dout[r * C + c2];
                sd += dn2;
                sdn += dn2 * n2;
            }
            float n = (x[r * C + c] - mean[r]) * rstd[r], dn = w[c] * dout[r * C + c];
            dx[r * C + c] = (dn - sd / (float)C - n * (sdn / (float)C)) * rstd[r];
        }
    for (long c = 0; c < C; c++) {
        float aw = 0.0f, ab = 0.0f;
        for (long r = 0; r < N; r++) {
            aw += ((x[r * C + c] - mean[r]) * rstd[r]) * dout[r * C + c];
            ab += dout[r * C + c];
        }
        dw[c] = aw;
        db[c] = ab;
    }
}

/* q, k, v of row (b, t) and head h */
#define QP(b, t, h) (qkv + ((long)(b) * T + (t)) * 3 * C + (long)(h) * hs)
#define KP(b, t, h) (QP(b, t, h) + C)
#define VP(b, t, h) (QP(b, t, h) + 2 * C)

static float ref_score(const float *qkv, int T, int C, int hs, int b, int h, int t, int t2, float scale) {
    float dot = 0.0f;
    for (int i = 0; i < hs; i++) dot += QP(b, t, h)[i] * KP(b, t2, h)[i];
    return dot * scale;
}

static void ref_attn_fwd(int B, int T, int C, int NH, const float *qkv, float *att, float *out) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    float *s = malloc((size_t)T * sizeof(float));
    assert_non_null(s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                for (int t2 = 0; t2 <= t; t2++) s[t2] = ref_score(qkv, T, C, hs, b, h, t, t2, scale);
                float mx, sum;
                zn_softmax_row(s, t + 1, &mx, &sum);
                float *a = att + (((long)b * NH + h) * T + t) * T;
                for (int t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? zn_expf(s[t2] - mx) / sum : 0.0f;
                for (int i = 0; i < hs; i++) {
                    float acc = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) acc += a[t2] * VP(b, t2, h)[i];
                    out[((long)b * T + t) * C + (long)h * hs + i] = acc;
                }
            }
    free(s);
}

static void ref_attn_bwd(int B, int T, int C, int NH, const float *dout, const float *qkv, const float *att,
                         float *dqkv) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    float *dS = malloc((size_t)T * T * sizeof(float));
    assert_non_null(dS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *P = att + ((long)b * NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *g = dout + ((long)b * T + t) * C + (long)h * hs;
                /* dP[t][t2] and the row sum of P dP, t2 ascending */
                float rowsum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    float dp = 0.0f;
                    for (int i = 0; i < hs; i++) dp += g[i] * VP(b, t2, h)[i];
                    rowsum += P[(long)t * T + t2] * dp;
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    float dp = 0.0f;
                    for (int i = 0; i < hs; i++) dp += g[i] * VP(b, t2, h)[i];
                    dS[(long)t * T + t2] = (P[(long)t * T + t2] * (dp - rowsum)) * scale;
                }
            }
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++) {
                    float dq = 0.0f, dk = 0.0f, dv = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) dq += dS[(long)t * T + t2] * KP(b, t2, h)[i];
                    for (int t1 = t; t1 < T; t1++) {
                        dk += dS[(long)t1 * T + t] * QP(b, t1, h)[i];
                        dv += P[(long)t1 * T + t] * dout[((long)b * T + t1) * C + (long)h * hs + i];
                    }
                    float *row = dqkv + ((long)b * T + t) * 3 * C + (long)h * hs + i;
                    row[0] = dq;
                    row[C] = dk;
                    row[2 * C] = dv;
                }
        }
    free(dS);
}

static float ref_gelu(float x) {
    float u = 0.7978845608f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + zn_tanhf(u));
}
static float ref_gelu_grad(float x, float dy) {
    float u = 0.7978845608f * (x + 0.044715f * x * x * x);
    float th = zn_tanhf(u);
    return (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x)) *
           dy;
}

/* ------------------------------------------------------------------------ */
/* the tests */

/* spec: Z-HOST-006 the bias add and the embeddings (forward and backward,
 * repeated tokens, positions past T) on every path and 1, 2, 3 threads give
 * the element-at-a-time definition's bits */
static void test_bias_embed(void **st) {
    (void)st;
    lcg_state = 7u;
    const int M = 205, N = 69;
    float *b = rand_buf(N, 1.0f), *y0 = rand_buf((long)M * N, 3.0f), *yr = malloc((size_t)M * N * sizeof(float)),
          *y = malloc((size_t)M * N * sizeof(float));
    assert_true(yr && y);
    memcpy(yr, y0, (size_t)M * N * sizeof(float));
    ref_bias(M, N, b, yr);
    FOR_PATHS({
        memcpy(y, y0, (size_t)M * N * sizeof(float));
        zn_host_add_bias(NULL, M, N, b, y);
        same(y, yr, (long)M * N, "add_bias", isa, threads);
    })
    free(b); free(y0); free(yr); free(y);

    const int B = 5, T = 41, C = 69, V = 37, P = 50;
    int *tok = malloc((size_t)B * T * sizeof(int));
    assert_non_null(tok);
    for (long r = 0; r < (long)B * T; r++) tok[r] = (int)((urand() + 1.0f) * 0.5f * (V - 1));   /* repeats */
    float *wte = rand_buf((long)V * C, 1.0f), *wpe = rand_buf((long)P * C, 1.0f), *dout = rand_buf((long)B * T * C, 1.0f);
    float *outr = zbuf((long)B * T * C), *out = zbuf((long)B * T * C);
    float *dwter = zbuf((long)V * C), *dwper = zbuf((long)P * C), *dwte = zbuf((long)V * C), *dwpe = zbuf((long)P * C);
    ref_embed_fwd(B, T, C, tok, wte, wpe, outr);
    ref_embed_bwd(B, T, C, V, P, tok, dout, dwter, dwper);
    FOR_PATHS({
        for (long i = 0; i < (long)V * C; i++) dwte[i] = 5.0f;   /* stale values: the kernel zeroes */
        for (long i = 0; i < (long)P * C; i++) dwpe[i] = 5.0f;
        zn_host_embed_fwd(NULL, B, T, C, tok, wte, wpe, out);
        zn_host_embed_bwd(NULL, B, T, C, V, P, tok, dout, dwte, dwpe);
        same(out, outr, (long)B * T * C, "embed_fwd", isa, threads);
        same(dwte, dwter, (long)V * C, "embed_bwd dwte", isa, threads);
        same(dwpe, dwper, (long)P * C, "embed_bwd dwpe", isa, threads);
    })
    free(tok); free(wte); free(wpe); free(dout); free(outr); free(out);
    free(dwter); free(dwper); free(dwte); free(dwpe);
}

/* spec: Z-MOD-009 the softmax cross-entropy on the host (rows over the
 * threads, the max and the exps in vector lanes, the sum in column order)
 * on every path and 1, 2, 3 threads gives the definition's bits: the loss
 * and every gradient element, without a gradient, in place, at 3 rows (the
 * losses on the stack) and 70 (on the heap), on rows with a NaN first or
 * later, infinities, a max of -0 before +0, and exps that underflow */
static void test_softmax_xent(void **st) {
    (void)st;
    lcg_state = 11u;
    const int C = 1003;
    const int Bs[2] = {3, 70};
    for (int k = 0; k < 2; k++) {
        const int B = Bs[k];
        const long n = (long)B * C;
        float *z = rand_buf(n, 8.0f), *dlr = zbuf(n), *dl = zbuf(n), *zi = zbuf(n);
        int *y = malloc((size_t)B * sizeof(int));
        assert_non_null(y);
        for (long r = 0; r < B; r++) y[r] = (int)((urand() + 1.0f) * 0.5f * (C - 1));
        if (B > 8) {
            z[0 * C + 0] = NAN;                          /* a NaN max */
            z[1 * C + 517] = NAN;                        /* a NaN the max skips */
            z[2 * C + 40] = INFINITY;                    /* an infinite max: NaN exps */
            z[3 * C + 9] = -INFINITY;                    /* one exp of 0 */
            for (long c = 0; c < C; c++) z[4 * C + c] = -fabsf(z[4 * C + c]);
            z[4 * C + 3] = -0.0f;                        /* the max: -0 first, */
            z[4 * C + 700] = 0.0f;                       /* then +0 (not greater) */
            for (long c = 0; c < C; c += 3) z[5 * C + c] = -150.0f + z[5 * C + c];   /* underflow */
            z[5 * C + 11] = 30.0f;
            for (long c = 0; c < C; c++) z[6 * C + c] = 0.0f;   /* all +0 */
            z[6 * C + 0] = -0.0f;
        }
        const float gs = 1.0f / 3.0f;
        const float lr = ref_xent(B, C, z, y, gs, dlr), lr0 = ref_xent(B, C, z, y, gs, NULL);
        FOR_PATHS({
            memset(dl, 0, (size_t)n * sizeof(float));
            float l = zn_host_softmax_xent(NULL, B, C, z, y, gs, dl);
            same(&l, &lr, 1, "softmax_xent loss", isa, threads);
            same(dl, dlr, n, "softmax_xent dlogits", isa, threads);
            l = zn_host_softmax_xent(NULL, B, C, z, y, gs, NULL);
            same(&l, &lr0, 1, "softmax_xent loss without dlogits", isa, threads);
            memcpy(zi, z, (size_t)n * sizeof(float));
            l = zn_host_softmax_xent(NULL, B, C, zi, y, gs, zi);
            same(&l, &lr, 1, "softmax_xent loss in place", isa, threads);
            same(zi, dlr, n, "softmax_xent dlogits in place", isa, threads);
        })
        free(z); free(dlr); free(dl); free(zi); free(y);
    }
}

/* spec: Z-HOST-006 LayerNorm forward (out, mean, rstd) and backward (dx,
 * dw, db) and GELU forward and backward (in place too, as the engine calls
 * it; zeros of both signs, infinities, NaN and |x| past tanh's cut-off among
 * the inputs) on every path and 1, 2, 3 threads give the element-at-a-time
 * definition's bits */
static void test_layernorm_gelu(void **st) {
    (void)st;
    lcg_state = 11u;
    const int sizes[2][2] = {{205, 69}, {67, 771}};
    for (int s = 0; s < 2; s++) {
        const int N = sizes[s][0], C = sizes[s][1];
        const long NC = (long)N * C;
        float *x = rand_buf(NC, 2.0f), *w = rand_buf(C, 1.5f), *b = rand_buf(C, 0.5f), *g = rand_buf(NC, 1.0f);
        float *outr = zbuf(NC), *mr = zbuf(N), *rr = zbuf(N), *dxr = zbuf(NC), *dwr = zbuf(C), *dbr = zbuf(C);
        float *out = zbuf(NC), *m = zbuf(N), *r = zbuf(N), *dx = zbuf(NC), *dw = zbuf(C), *db = zbuf(C);
        ref_ln_fwd(N, C, x, w, b, outr, mr, rr);
        ref_ln_bwd(N, C, g, x, w, mr, rr, dxr, dwr, dbr);
        FOR_PATHS({
            zn_host_layernorm_fwd(NULL, N, C, x, w, b, out, m, r);
            same(out, outr, NC, "layernorm_fwd out", isa, threads);
            same(m, mr, N, "layernorm_fwd mean", isa, threads);
            same(r, rr, N, "layernorm_fwd rstd", isa, threads);
            for (long i = 0; i < C; i++) dw[i] = db[i] = 9.0f;
            zn_host_layernorm_bwd(NULL, N, C, g, x, w, mr, rr, dx, dw, db);
            same(dx, dxr, NC, "layernorm_bwd dx", isa, threads);
            same(dw, dwr, C, "layernorm_bwd dw", isa, threads);
            same(db, dbr, C, "layernorm_bwd db", isa, threads);
        })
        free(x); free(w); free(b); free(g); free(outr); free(mr); free(rr); free(dxr); free(dwr); free(dbr);
        free(out); free(m); free(r); free(dx); free(dw); free(db);
    }

    const long n = 100003;
    static const float odd[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 20.0f, -20.0f, 1e-30f, -3e-39f, 11.3f, -11.3f};
    float *x = rand_buf(n, 6.0f), *dy = rand_buf(n, 1.0f);
    for (long i = 0; i < n; i += 97) x[i] = odd[(i / 97) % 11];
    float *yr = zbuf(n), *dxr = zbuf(n), *y = zbuf(n), *dx = zbuf(n);
    for (long i = 0; i < n; i++) {
        yr[i] = ref_gelu(x[i]);
        dxr[i] = ref_gelu_grad(x[i], dy[i]);
    }
    FOR_PATHS({
        zn_host_gelu_fwd(NULL, n, x, y);
        zn_host_gelu_bwd(NULL, n, x, dy, dx);
        same(y, yr, n, "gelu_fwd", isa, threads);
        same(dx, dxr, n, "gelu_bwd", isa, threads);
        memcpy(dx, dy, (size_t)n * sizeof(float));
        zn_host_gelu_bwd(NULL, n, x, dx, dx);   /* dx aliasing dy */
        same(dx, dxr, n, "gelu_bwd in place", isa, threads);
    })
    free(x); free(dy); free(yr); free(dxr); free(y); free(dx);
}

/* spec: Z-HOST-007 causal attention forward (probabilities and output) and
 * backward (dq, dk, dv) with odd head sizes (17, 23, 40, 64), T of 1, 7, 67,
 * 70 and 131 (past one block of queries), scores far apart (exponents out of
 * the vector range), on every path and 1, 2, 3 threads
 * give the element-at-a-time definition's bits */
static void test_attention(void **st) {
    (void)st;
    lcg_state = 13u;
    /* B, T, C, NH, the scale of q, k, v (12: scores far apart, so softmax
       arguments below zn_expf's vector range) */
    const int cases[6][5] = {{2, 7, 69, 3, 1}, {1, 131, 51, 3, 1}, {2, 67, 80, 2, 1},
                             {3, 1, 17, 1, 1}, {1, 70, 128, 2, 1}, {2, 45, 46, 2, 12}};
    for (int cs = 0; cs < 6; cs++) {
        const int B = cases[cs][0], T = cases[cs][1], C = cases[cs][2], NH = cases[cs][3];
        const long nq = (long)B * T * 3 * C, na = (long)B * NH * T * T, no = (long)B * T * C;
        float *qkv = rand_buf(nq, 1.5f * (float)cases[cs][4]), *dout = rand_buf(no, 1.0f);
        float *attr = zbuf(na), *outr = zbuf(no), *dqkvr = zbuf(nq);
        float *att = zbuf(na), *out = zbuf(no), *dqkv = zbuf(nq), *scratch = zbuf(na);
        ref_attn_fwd(B, T, C, NH, qkv, attr, outr);
        ref_attn_bwd(B, T, C, NH, dout, qkv, attr, dqkvr);
        FOR_PATHS({
            for (long i = 0; i < na; i++) att[i] = 3.0f;   /* stale values above the diagonal */
            zn_host_attn_fwd(NULL, B, T, C, NH, qkv, att, out);
            same(att, attr, na, "attn_fwd att", isa, threads);
            same(out, outr, no, "attn_fwd out", isa, threads);
            for (long i = 0; i < nq; i++) dqkv[i] = 4.0f;
            zn_host_attn_bwd(NULL, B, T, C, NH, dout, qkv, attr, dqkv, scratch);
            same(dqkv, dqkvr, nq, "attn_bwd dqkv", isa, threads);
            /* without the block buffer (its allocation failed): row at a time */
            zn_lm_host_test_no_buffer(1);
            for (long i = 0; i < no; i++) out[i] = 5.0f;
            zn_host_attn_fwd(NULL, B, T, C, NH, qkv, att, out);
            same(out, outr, no, "attn_fwd out (no buffer)", isa, threads);
            for (long i = 0; i < nq; i++) dqkv[i] = 4.0f;
            zn_host_attn_bwd(NULL, B, T, C, NH, dout, qkv, attr, dqkv, scratch);
            same(dqkv, dqkvr, nq, "attn_bwd dqkv (no buffer)", isa, threads);
            zn_lm_host_test_no_buffer(0);
        })
        free(qkv); free(dout); free(attr); free(outr); free(dqkvr); free(att); free(out); free(dqkv); free(scratch);
    }
}

/* spec: Z-HOST-008 the path override: an instruction set this CPU cannot
 * run, or ZN_ISA_N, leaves the kernels on the best path they have */
static void test_isa_override(void **st) {
    (void)st;
    zn_lm_host_set_isa(ZN_ISA_N);
    assert_int_equal(zn_lm_host_isa(), zn_isa_gemm());
    zn_lm_host_set_isa(ZN_ISA_SCALAR);
    assert_int_equal(zn_lm_host_isa(), ZN_ISA_SCALAR);
    for (int isa = 0; isa < ZN_ISA_N; isa++) {
        zn_lm_host_set_isa((ZnIsa)isa);
        assert_int_equal(zn_lm_host_isa(), zn_isa_supported((ZnIsa)isa) ? isa : (int)zn_isa_gemm());
    }
    zn_lm_host_set_isa(ZN_ISA_N);
}

ZT_MAIN(
    cmocka_unit_test(test_bias_embed),
    cmocka_unit_test(test_softmax_xent),
    cmocka_unit_test(test_layernorm_gelu),
    cmocka_unit_test(test_attention),
    cmocka_unit_test(test_isa_override))
