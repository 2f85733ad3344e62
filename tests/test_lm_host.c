/* test_lm_host.c: the host language-model kernels (device/lm_host.c, spec
 * Z-HOST-006..008) against element-at-a-time references written here from
 * the formulas of Z-GPT-003..007, on odd sizes, for 1, 2 and 3 host threads
 * and every instruction-set path this CPU runs: the bits must be equal
 * (memcmp), not just close. */
#include "testutil.h"
#include "lm_check.h"
#include "core/zn_math.h"

/* an output buffer of n zeros */
static float *zbuf(long n) { return fbuf(n, 0.0f); }

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

/* dS of head (b, h), row t, column t2 <= t, is left at scratch[((b NH + h)
   T + t) T + t2] */
static void ref_attn_bwd(int B, int T, int C, int NH, const float *dout, const float *qkv, const float *att,
                         float *dqkv, float *scratch) {
    const int hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *P = att + ((long)b * NH + h) * T * T;
            float *dS = scratch + ((long)b * NH + h) * T * T;
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

/* the references as the host kernels' twin: 1, 2 and 3 host threads */
static const LmTwin refs = LM_TWIN(ref, 3);

/* ------------------------------------------------------------------------ */
/* the tests */

/* spec: Z-HOST-006 the bias add and the embeddings (forward and backward,
 * repeated tokens, positions past T) on every path and 1, 2, 3 threads give
 * the element-at-a-time definition's bits */
static void test_bias_embed(void **st) {
    (void)st;
    lcg_state = 7u;
    lm_check_bias(&refs, 205, 69);
    lm_check_embed(&refs, 5, 41, 69, 37, 50);   /* B, T, C, V, P */
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
        int *y = rand_tokens(B, C);
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
        FOR_PATHS(3, {
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
    for (int s = 0; s < 2; s++) lm_check_layernorm(&refs, sizes[s][0], sizes[s][1]);
    lm_check_gelu(&refs);
}

/* spec: Z-HOST-007 causal attention forward (probabilities and output) and
 * backward (dq, dk, dv, and the softmax gradient dS left in the scratch),
 * with the block buffer and without it, with odd head sizes (17, 23, 40,
 * 64), T of 1, 7, 67, 70 and 131 (past one block of queries), scores far
 * apart (exponents out of the vector range), on every path and 1, 2, 3
 * threads give the element-at-a-time definition's bits */
static void test_attention(void **st) {
    (void)st;
    lm_check_attention_cases(&refs);
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
