/* lm_check.h: what test_lm_host.c and test_lm_elem.c share. Both hold the
 * host language-model kernels (device/lm_host.c) against a twin written
 * another way (element-at-a-time references, or the CUDA kernels' grids
 * run on the CPU): the lm_check_* functions draw the inputs from urand, let
 * the twin compute the expected outputs into buffers of stale values, then
 * run the host kernel on every path (every instruction set this CPU runs,
 * with 1 .. max_threads host threads) and compare the bits (memcmp).
 * Include it after testutil.h. */
#ifndef ZN_TEST_LM_CHECK_H
#define ZN_TEST_LM_CHECK_H
#include "core/cpu.h"
#include "device/lm_host.h"

/* ---- inputs ---------------------------------------------------------------- */

static uint32_t lcg_state;
static float urand(void) {   /* in [-1, 1) */
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)(lcg_state >> 8) / 8388608.0f - 1.0f;
}
static float *rand_buf(long n, float scale) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (long i = 0; i < n; i++) p[i] = scale * urand();
    return p;
}
static float *fbuf(long n, float v) {   /* n floats of value v (stale data a kernel must overwrite) */
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (long i = 0; i < n; i++) p[i] = v;
    return p;
}
/* n tokens in [0, V - 1], repeating */
static int *rand_tokens(long n, int V) {
    int *tok = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    assert_non_null(tok);
    for (long r = 0; r < n; r++) tok[r] = (int)((urand() + 1.0f) * 0.5f * (V - 1));
    return tok;
}
/* the host kernel's bits (got) against the twin's (want) */
static void same(const float *got, const float *want, long n, const char *what, int isa, int threads) {
    if (memcmp(got, want, (size_t)n * sizeof(float)) == 0) return;
    for (long i = 0; i < n; i++)
        if (!zt_same_bits(got[i], want[i]))
            fail_msg("%s: element %ld differs (host %.9g, expected %.9g), isa %s, %d threads", what, i,
                     (double)got[i], (double)want[i], zn_isa_name((ZnIsa)isa), threads);
}

/* every instruction set this CPU runs, each with 1 .. max_threads host threads */
#define FOR_PATHS(max_threads, body)                                      \
    for (int isa = ZN_ISA_SCALAR; isa < ZN_ISA_N; isa++) {                \
        if (!zn_isa_supported((ZnIsa)isa)) continue;                      \
        zn_lm_host_set_isa((ZnIsa)isa);                                   \
        for (int threads = 1; threads <= (max_threads); threads++) {      \
            zn_set_host_threads(threads);                                 \
            body                                                          \
        }                                                                 \
    }                                                                     \
    zn_lm_host_set_isa(ZN_ISA_N);                                         \
    zn_set_host_threads(0);

/* ---- the twin ---------------------------------------------------------------- */

/* The other implementation, kernel by kernel, with the host kernels'
 * arguments less the device. attn_bwd leaves the softmax gradient dS in
 * scratch on and below the diagonal, as the host does. */
typedef struct {
    int max_threads;
    void (*bias)(int M, int N, const float *b, float *y);
    void (*embed_fwd)(int B, int T, int C, const int *tok, const float *wte, const float *wpe, float *out);
    void (*embed_bwd)(int B, int T, int C, int V, int P, const int *tok, const float *dout, float *dwte,
                      float *dwpe);
    void (*ln_fwd)(int N, int C, const float *x, const float *w, const float *b, float *out, float *mean,
                   float *rstd);
    void (*ln_bwd)(int N, int C, const float *dout, const float *x, const float *w, const float *mean,
                   const float *rstd, float *dx, float *dw, float *db);
    void (*attn_fwd)(int B, int T, int C, int NH, const float *qkv, float *att, float *out);
    void (*attn_bwd)(int B, int T, int C, int NH, const float *dout, const float *qkv, const float *att,
                     float *dqkv, float *scratch);
    float (*gelu)(float x);                /* GELU and its backward, one element */
    float (*gelu_grad)(float x, float dy);
} LmTwin;

/* The twin whose functions are named prefix_bias, prefix_embed_fwd, ...
   prefix_gelu_grad, checked with 1 .. max_threads host threads. */
#define LM_TWIN(prefix, max_threads)                                                             \
    {                                                                                            \
        (max_threads), prefix##_bias, prefix##_embed_fwd, prefix##_embed_bwd, prefix##_ln_fwd,   \
            prefix##_ln_bwd, prefix##_attn_fwd, prefix##_attn_bwd, prefix##_gelu, prefix##_gelu_grad \
    }

/* ---- the checks ---------------------------------------------------------------- */

/* the bias add of an M x N matrix */
static void lm_check_bias(const LmTwin *tw, int M, int N) {
    const long n = (long)M * N;
    float *b = rand_buf(N, 1.0f), *y0 = rand_buf(n, 3.0f), *want = fbuf(n, 0.0f), *got = fbuf(n, 0.0f);
    memcpy(want, y0, (size_t)n * sizeof(float));
    tw->bias(M, N, b, want);
    FOR_PATHS(tw->max_threads, {
        memcpy(got, y0, (size_t)n * sizeof(float));
        zn_host_lm_kernels.add_bias(NULL, M, N, b, got);
        same(got, want, n, "add_bias", isa, threads);
    })
    free(b); free(y0); free(want); free(got);
}

/* the embeddings forward and backward: B x T tokens repeating below V,
   width C, P positions */
static void lm_check_embed(const LmTwin *tw, int B, int T, int C, int V, int P) {
    const long BT = (long)B * T, nv = (long)V * C, np = (long)P * C;
    int *tok = rand_tokens(BT, V);
    float *wte = rand_buf(nv, 1.0f), *wpe = rand_buf(np, 1.0f), *dout = rand_buf(BT * C, 1.0f);
    float *oute = fbuf(BT * C, 9.0f), *outh = fbuf(BT * C, 9.0f);
    float *dwtee = fbuf(nv, 5.0f), *dwpee = fbuf(np, 5.0f), *dwteh = fbuf(nv, 5.0f), *dwpeh = fbuf(np, 5.0f);
    tw->embed_fwd(B, T, C, tok, wte, wpe, oute);
    tw->embed_bwd(B, T, C, V, P, tok, dout, dwtee, dwpee);
    FOR_PATHS(tw->max_threads, {
        for (long i = 0; i < nv; i++) dwteh[i] = 5.0f;   /* stale values: the kernel zeroes */
        for (long i = 0; i < np; i++) dwpeh[i] = 5.0f;
        zn_host_lm_kernels.embed_fwd(NULL, B, T, C, tok, wte, wpe, outh);
        zn_host_lm_kernels.embed_bwd(NULL, B, T, C, V, P, tok, dout, dwteh, dwpeh);
        same(outh, oute, BT * C, "embed_fwd", isa, threads);
        same(dwteh, dwtee, nv, "embed_bwd dwte", isa, threads);
        same(dwpeh, dwpee, np, "embed_bwd dwpe", isa, threads);
    })
    free(tok); free(wte); free(wpe); free(dout); free(oute); free(outh);
    free(dwtee); free(dwpee); free(dwteh); free(dwpeh);
}

/* LayerNorm forward (out, mean, rstd) and backward (dx, dw, db) of N rows
   of C */
static void lm_check_layernorm(const LmTwin *tw, int N, int C) {
    const long NC = (long)N * C;
    float *x = rand_buf(NC, 2.0f), *w = rand_buf(C, 1.5f), *b = rand_buf(C, 0.5f), *g = rand_buf(NC, 1.0f);
    float *oute = fbuf(NC, 3.0f), *me = fbuf(N, 3.0f), *re = fbuf(N, 3.0f);
    float *dxe = fbuf(NC, 3.0f), *dwe = fbuf(C, 3.0f), *dbe = fbuf(C, 3.0f);
    float *outh = fbuf(NC, 4.0f), *mh = fbuf(N, 4.0f), *rh = fbuf(N, 4.0f);
    float *dxh = fbuf(NC, 4.0f), *dwh = fbuf(C, 4.0f), *dbh = fbuf(C, 4.0f);
    tw->ln_fwd(N, C, x, w, b, oute, me, re);
    tw->ln_bwd(N, C, g, x, w, me, re, dxe, dwe, dbe);
    FOR_PATHS(tw->max_threads, {
        zn_host_lm_kernels.layernorm_fwd(NULL, N, C, x, w, b, outh, mh, rh);
        same(outh, oute, NC, "layernorm_fwd out", isa, threads);
        same(mh, me, N, "layernorm_fwd mean", isa, threads);
        same(rh, re, N, "layernorm_fwd rstd", isa, threads);
        for (long i = 0; i < C; i++) dwh[i] = dbh[i] = 9.0f;
        zn_host_lm_kernels.layernorm_bwd(NULL, N, C, g, x, w, mh, rh, dxh, dwh, dbh);
        same(dxh, dxe, NC, "layernorm_bwd dx", isa, threads);
        same(dwh, dwe, C, "layernorm_bwd dw", isa, threads);
        same(dbh, dbe, C, "layernorm_bwd db", isa, threads);
    })
    free(x); free(w); free(b); free(g); free(oute); free(me); free(re); free(dxe); free(dwe); free(dbe);
    free(outh); free(mh); free(rh); free(dxh); free(dwh); free(dbh);
}

/* causal attention forward (probabilities, output) and backward (dqkv and
   dS), q, k, v drawn at `scale`; then again without the host's block buffer
   (as when its allocation fails: row at a time) */
static void lm_check_attention(const LmTwin *tw, int B, int T, int C, int NH, float scale) {
    const long nq = (long)B * T * 3 * C, na = (long)B * NH * T * T, no = (long)B * T * C;
    float *qkv = rand_buf(nq, scale), *dout = rand_buf(no, 1.0f);
    float *atte = fbuf(na, 3.0f), *oute = fbuf(no, 3.0f), *dqkve = fbuf(nq, 3.0f), *se = fbuf(na, 3.0f);
    float *atth = fbuf(na, 4.0f), *outh = fbuf(no, 4.0f), *dqkvh = fbuf(nq, 4.0f), *sh = fbuf(na, 4.0f);
    tw->attn_fwd(B, T, C, NH, qkv, atte, oute);
    tw->attn_bwd(B, T, C, NH, dout, qkv, atte, dqkve, se);
    FOR_PATHS(tw->max_threads, {
        for (int nobuf = 0; nobuf <= 1; nobuf++) {
            const char *how = nobuf ? " (no buffer)" : "";
            char what[64];
            zn_lm_host_test_no_buffer(nobuf);
            for (long i = 0; i < na; i++) atth[i] = 3.0f;   /* stale values above the diagonal */
            for (long i = 0; i < no; i++) outh[i] = 5.0f;
            zn_host_lm_kernels.attn_fwd(NULL, B, T, C, NH, qkv, atth, outh);
            snprintf(what, sizeof what, "attn_fwd att%s", how);
            same(atth, atte, na, what, isa, threads);
            snprintf(what, sizeof what, "attn_fwd out%s", how);
            same(outh, oute, no, what, isa, threads);
            for (long i = 0; i < nq; i++) dqkvh[i] = 4.0f;
            zn_host_lm_kernels.attn_bwd(NULL, B, T, C, NH, dout, qkv, atth, dqkvh, sh);
            snprintf(what, sizeof what, "attn_bwd dqkv%s", how);
            same(dqkvh, dqkve, nq, what, isa, threads);
            /* the scratch: dS on and below the diagonal (above it the
               host leaves dP, the CUDA twin nothing: neither is read) */
            snprintf(what, sizeof what, "attn_bwd dS%s", how);
            for (long bh = 0; bh < (long)B * NH; bh++)
                for (long t = 0; t < T; t++) {
                    const long at = (bh * T + t) * T;
                    same(sh + at, se + at, t + 1, what, isa, threads);
                }
        }
        zn_lm_host_test_no_buffer(0);
    })
    free(qkv); free(dout); free(atte); free(oute); free(dqkve); free(se);
    free(atth); free(outh); free(dqkvh); free(sh);
}

/* attention for head sizes 17, 23, 40, 64, T of 1, 7, 45, 67, 70, 131 (the
   host's blocks of 64 queries: one, two and a partial third), several
   heads, scores far apart; the inputs drawn from seed 13 */
static void lm_check_attention_cases(const LmTwin *tw) {
    lcg_state = 13u;
    /* B, T, C, NH, the scale of q, k, v (12: scores far apart, so softmax
       arguments out of the host's vector exp range) */
    const int cases[6][5] = {{2, 7, 69, 3, 1}, {1, 131, 51, 3, 1}, {2, 67, 80, 2, 1},
                             {3, 1, 17, 1, 1}, {1, 70, 128, 2, 1}, {2, 45, 46, 2, 12}};
    for (int cs = 0; cs < 6; cs++)
        lm_check_attention(tw, cases[cs][0], cases[cs][1], cases[cs][2], cases[cs][3], 1.5f * (float)cases[cs][4]);
}

/* GELU forward and backward, in place too (as the engine calls the
   backward), on n values with zeros of both signs, infinities, NaN,
   subnormals and values past tanh's cut-off among them; n = 100003, not a
   multiple of any vector width */
static void lm_check_gelu(const LmTwin *tw) {
    const long n = 100003;
    static const float odd[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 20.0f, -20.0f, 1e-30f, -3e-39f, 11.3f, -11.3f};
    float *x = rand_buf(n, 6.0f), *dy = rand_buf(n, 1.0f);
    for (long i = 0; i < n; i += 97) x[i] = odd[(i / 97) % 11];
    float *ye = fbuf(n, 0.0f), *dxe = fbuf(n, 0.0f), *yh = fbuf(n, 0.0f), *dxh = fbuf(n, 0.0f);
    for (long i = 0; i < n; i++) {
        ye[i] = tw->gelu(x[i]);
        dxe[i] = tw->gelu_grad(x[i], dy[i]);
    }
    FOR_PATHS(tw->max_threads, {
        zn_host_lm_kernels.gelu_fwd(NULL, n, x, yh);
        zn_host_lm_kernels.gelu_bwd(NULL, n, x, dy, dxh);
        same(yh, ye, n, "gelu_fwd", isa, threads);
        same(dxh, dxe, n, "gelu_bwd", isa, threads);
        memcpy(dxh, dy, (size_t)n * sizeof(float));
        zn_host_lm_kernels.gelu_bwd(NULL, n, x, dxh, dxh);   /* dx aliasing dy */
        same(dxh, dxe, n, "gelu_bwd in place", isa, threads);
    })
    free(x); free(dy); free(ye); free(dxe); free(yh); free(dxh);
}

#endif
