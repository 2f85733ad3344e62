/* test_lm_elem.c: the CPU check of the CUDA language-model kernels (spec
 * Z-CUDA-009). kernels/lm.cu launches, for every kernel, one or more grids
 * whose threads each call one device/lm_elem.h function on one index (an
 * output element, or a row or column whose definition is one serial sum).
 * Here the same functions run over the same index ranges in a plain loop,
 * launch by launch as the .cu file does, and the results must equal the
 * host twins' (device/lm_host.c) bit for bit (memcmp), on every instruction
 * set this CPU runs and with 1 and 2 host threads.
 *
 * Within one launch no work item reads what another writes, so the order
 * in which a GPU runs them cannot change a bit: the loop here stands for
 * any schedule. What remains between this check and the GPU is the
 * compiler (nvcc -fmad=false -prec-div=true -prec-sqrt=true against gcc
 * -ffp-contract=off), which tests/test_kernels_gpu.c checks on a GPU. */
#include "testutil.h"
#include "core/cpu.h"
#include "device/lm_host.h"
#include "device/lm_elem.h"
#include "engine/model.h"

/* ------------------------------------------------------------------------ */
/* inputs */

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
/* the CUDA twin's bits (a) against the host twin's (b) */
static void same(const float *a, const float *b, long n, const char *what, int isa, int threads) {
    if (memcmp(a, b, (size_t)n * sizeof(float)) == 0) return;
    for (long i = 0; i < n; i++)
        if (!zt_same_bits(a[i], b[i]))
            fail_msg("%s: element %ld differs (elem %.9g, host %.9g), host isa %s, %d threads", what, i, (double)a[i],
                     (double)b[i], zn_isa_name((ZnIsa)isa), threads);
}

/* every instruction set this CPU runs, each with 1 and 2 host threads */
#define FOR_PATHS(body)                                                   \
    for (int isa = ZN_ISA_SCALAR; isa < ZN_ISA_N; isa++) {                \
        if (!zn_isa_supported((ZnIsa)isa)) continue;                      \
        zn_lm_host_set_isa((ZnIsa)isa);                                   \
        for (int threads = 1; threads <= 2; threads++) {                  \
            zn_set_host_threads(threads);                                 \
            body                                                          \
        }                                                                 \
    }                                                                     \
    zn_lm_host_set_isa(ZN_ISA_N);                                         \
    zn_set_host_threads(0);

/* ------------------------------------------------------------------------ */
/* the CUDA kernels' grids, run on the CPU: one loop per launch of
 * kernels/lm.cu, over the same index range, calling the same function */

static void grid_add_bias(int M, int N, const float *b, float *y) {
    for (long e = 0; e < (long)M * N; e++) zn_lm_add_bias_at(e, N, b, y);
}

static void grid_embed_fwd(int B, int T, int C, const int *tok, const float *wte, const float *wpe, float *out) {
    for (long e = 0; e < (long)B * T * C; e++) zn_lm_embed_fwd_at(e, T, C, tok, wte, wpe, out);
}

static void grid_embed_bwd(int B, int T, int C, int V, int P, const int *tok, const float *dout, float *dwte,
                           float *dwpe) {
    memset(dwte, 0, (size_t)V * C * sizeof(float));   /* zn_cuda_zero */
    memset(dwpe, 0, (size_t)P * C * sizeof(float));
    for (long c = 0; c < C; c++) zn_lm_embed_bwd_col(c, B, T, C, tok, dout, dwte, dwpe);
}

static void grid_ln_fwd(int N, int C, const float *x, const float *w, const float *b, float *out, float *mean,
                        float *rstd) {
    for (long r = 0; r < N; r++) zn_lm_ln_stats_row(r, C, x, mean, rstd);
    for (long e = 0; e < (long)N * C; e++) zn_lm_ln_out_at(e, C, x, w, b, mean, rstd, out);
}

static void grid_ln_bwd(int N, int C, const float *dout, const float *x, const float *w, const float *mean,
                        const float *rstd, float *dx, float *dw, float *db) {
    float *dm = fbuf(2L * N, 7.0f);   /* the device scratch: stale values */
    for (long r = 0; r < N; r++) zn_lm_ln_dmeans_row(r, C, dout, x, w, mean, rstd, dm);
    for (long e = 0; e < (long)N * C; e++) zn_lm_ln_dx_at(e, C, dout, x, w, mean, rstd, dm, dx);
    for (long c = 0; c < C; c++) zn_lm_ln_dwdb_col(c, N, C, dout, x, mean, rstd, dw, db);
    free(dm);
}

/* att starts as stale values (7.0f), as a reused device buffer would */
static void grid_attn_fwd(int B, int T, int C, int NH, const float *qkv, float *att, float *out) {
    const long rows = (long)B * NH * T, na = rows * T;
    float *st = fbuf(2 * rows, 7.0f);   /* the device scratch: stale values */
    for (long e = 0; e < na; e++) att[e] = 7.0f;
    for (long e = 0; e < na; e++) zn_lm_attn_score_at(e, T, C, NH, qkv, att);
    for (long row = 0; row < rows; row++) zn_lm_attn_max_row(row, T, att, st);
    for (long e = 0; e < na; e++) zn_lm_attn_exp_at(e, T, st, att);
    for (long row = 0; row < rows; row++) zn_lm_attn_sum_row(row, T, att, st);
    for (long e = 0; e < na; e++) zn_lm_attn_norm_at(e, T, st, att);
    for (long e = 0; e < (long)B * T * C; e++) zn_lm_attn_out_at(e, T, C, NH, qkv, att, out);
    free(st);
}

static void grid_attn_bwd(int B, int T, int C, int NH, const float *dout, const float *qkv, const float *att,
                          float *dqkv, float *scratch) {
    const long rows = (long)B * NH * T, na = rows * T;
    float *dots = fbuf(rows, 7.0f);
    for (long e = 0; e < na; e++) zn_lm_attn_dp_at(e, T, C, NH, dout, qkv, scratch);
    for (long row = 0; row < rows; row++) zn_lm_attn_dsdot_row(row, T, att, scratch, dots);
    for (long e = 0; e < na; e++) zn_lm_attn_ds_at(e, T, C, NH, att, dots, scratch);
    for (long e = 0; e < (long)B * T * 3 * C; e++) zn_lm_attn_dqkv_at(e, T, C, NH, dout, qkv, att, scratch, dqkv);
    free(dots);
}

static void grid_gelu_fwd(long n, const float *x, float *y) {
    for (long i = 0; i < n; i++) y[i] = zn_lm_gelu(x[i]);
}

static void grid_gelu_bwd(long n, const float *x, const float *dy, float *dx) {
    for (long i = 0; i < n; i++) dx[i] = zn_lm_gelu_grad(x[i], dy[i]);
}

/* ------------------------------------------------------------------------ */
/* the tests */

/* spec: Z-CUDA-009 Z-GPT-003 the bias add and the embeddings, forward and
 * backward (tokens repeating, B*T past the vocabulary, positions past T,
 * C not a multiple of 16): the CUDA grids' bits are the host twins' */
static void test_bias_embed(void **st) {
    (void)st;
    lcg_state = 3u;
    const int bias_shapes[3][2] = {{205, 69}, {3, 16}, {1, 1}};
    for (int s = 0; s < 3; s++) {
        const int M = bias_shapes[s][0], N = bias_shapes[s][1];
        const long n = (long)M * N;
        float *b = rand_buf(N, 1.0f), *y0 = rand_buf(n, 3.0f), *ye = fbuf(n, 0.0f), *yh = fbuf(n, 0.0f);
        memcpy(ye, y0, (size_t)n * sizeof(float));
        grid_add_bias(M, N, b, ye);
        FOR_PATHS({
            memcpy(yh, y0, (size_t)n * sizeof(float));
            zn_host_add_bias(NULL, M, N, b, yh);
            same(ye, yh, n, "add_bias", isa, threads);
        })
        free(b); free(y0); free(ye); free(yh);
    }

    /* B, T, C, V, P */
    const int emb_shapes[3][5] = {{5, 41, 69, 37, 50}, {2, 67, 16, 300, 67}, {3, 1, 7, 2, 4}};
    for (int s = 0; s < 3; s++) {
        const int B = emb_shapes[s][0], T = emb_shapes[s][1], C = emb_shapes[s][2], V = emb_shapes[s][3],
                  P = emb_shapes[s][4];
        const long BT = (long)B * T;
        int *tok = malloc((size_t)BT * sizeof(int));
        assert_non_null(tok);
        for (long r = 0; r < BT; r++) tok[r] = (int)((urand() + 1.0f) * 0.5f * (V - 1));   /* repeats */
        float *wte = rand_buf((long)V * C, 1.0f), *wpe = rand_buf((long)P * C, 1.0f), *dout = rand_buf(BT * C, 1.0f);
        float *oute = fbuf(BT * C, 9.0f), *outh = fbuf(BT * C, 9.0f);
        float *dwtee = fbuf((long)V * C, 5.0f), *dwpee = fbuf((long)P * C, 5.0f);
        float *dwteh = fbuf((long)V * C, 5.0f), *dwpeh = fbuf((long)P * C, 5.0f);
        grid_embed_fwd(B, T, C, tok, wte, wpe, oute);
        grid_embed_bwd(B, T, C, V, P, tok, dout, dwtee, dwpee);
        FOR_PATHS({
            for (long i = 0; i < (long)V * C; i++) dwteh[i] = 5.0f;   /* stale values: the kernel zeroes */
            for (long i = 0; i < (long)P * C; i++) dwpeh[i] = 5.0f;
            zn_host_embed_fwd(NULL, B, T, C, tok, wte, wpe, outh);
            zn_host_embed_bwd(NULL, B, T, C, V, P, tok, dout, dwteh, dwpeh);
            same(oute, outh, BT * C, "embed_fwd", isa, threads);
            same(dwtee, dwteh, (long)V * C, "embed_bwd dwte", isa, threads);
            same(dwpee, dwpeh, (long)P * C, "embed_bwd dwpe", isa, threads);
        })
        free(tok); free(wte); free(wpe); free(dout); free(oute); free(outh);
        free(dwtee); free(dwpee); free(dwteh); free(dwpeh);
    }
}

/* spec: Z-CUDA-009 Z-GPT-004 LayerNorm forward (out, mean, rstd) and
 * backward (dx, dw, db) on odd shapes, one column included: the CUDA
 * grids' bits are the host twins' */
static void test_layernorm(void **st) {
    (void)st;
    lcg_state = 5u;
    const int sizes[4][2] = {{205, 69}, {67, 771}, {130, 48}, {9, 1}};
    for (int s = 0; s < 4; s++) {
        const int N = sizes[s][0], C = sizes[s][1];
        const long NC = (long)N * C;
        float *x = rand_buf(NC, 2.0f), *w = rand_buf(C, 1.5f), *b = rand_buf(C, 0.5f), *g = rand_buf(NC, 1.0f);
        float *oute = fbuf(NC, 3.0f), *me = fbuf(N, 3.0f), *re = fbuf(N, 3.0f);
        float *dxe = fbuf(NC, 3.0f), *dwe = fbuf(C, 3.0f), *dbe = fbuf(C, 3.0f);
        float *outh = fbuf(NC, 4.0f), *mh = fbuf(N, 4.0f), *rh = fbuf(N, 4.0f);
        float *dxh = fbuf(NC, 4.0f), *dwh = fbuf(C, 4.0f), *dbh = fbuf(C, 4.0f);
        grid_ln_fwd(N, C, x, w, b, oute, me, re);
        grid_ln_bwd(N, C, g, x, w, me, re, dxe, dwe, dbe);
        FOR_PATHS({
            zn_host_layernorm_fwd(NULL, N, C, x, w, b, outh, mh, rh);
            same(oute, outh, NC, "layernorm_fwd out", isa, threads);
            same(me, mh, N, "layernorm_fwd mean", isa, threads);
            same(re, rh, N, "layernorm_fwd rstd", isa, threads);
            for (long i = 0; i < C; i++) dwh[i] = dbh[i] = 9.0f;
            zn_host_layernorm_bwd(NULL, N, C, g, x, w, mh, rh, dxh, dwh, dbh);
            same(dxe, dxh, NC, "layernorm_bwd dx", isa, threads);
            same(dwe, dwh, C, "layernorm_bwd dw", isa, threads);
            same(dbe, dbh, C, "layernorm_bwd db", isa, threads);
        })
        free(x); free(w); free(b); free(g); free(oute); free(me); free(re); free(dxe); free(dwe); free(dbe);
        free(outh); free(mh); free(rh); free(dxh); free(dwh); free(dbh);
    }
}

/* spec: Z-CUDA-009 Z-GPT-005 Z-GPT-006 causal attention forward
 * (probabilities, output) and backward (dq, dk, dv, and the softmax
 * gradient left in the scratch on and below the diagonal) for head sizes
 * 17, 23, 40, 64, T of 1, 7, 45, 67, 70, 131 (the host's blocks of 64
 * queries: one, two and a partial third), several heads, scores far apart:
 * the CUDA grids' bits are the host twins' */
static void test_attention(void **st) {
    (void)st;
    lcg_state = 13u;
    /* B, T, C, NH, the scale of q, k, v (12: scores far apart, softmax
       arguments out of the host's vector exp range) */
    const int cases[6][5] = {{2, 7, 69, 3, 1}, {1, 131, 51, 3, 1}, {2, 67, 80, 2, 1},
                             {3, 1, 17, 1, 1}, {1, 70, 128, 2, 1}, {2, 45, 46, 2, 12}};
    for (int cs = 0; cs < 6; cs++) {
        const int B = cases[cs][0], T = cases[cs][1], C = cases[cs][2], NH = cases[cs][3];
        const long nq = (long)B * T * 3 * C, na = (long)B * NH * T * T, no = (long)B * T * C;
        float *qkv = rand_buf(nq, 1.5f * (float)cases[cs][4]), *dout = rand_buf(no, 1.0f);
        float *atte = fbuf(na, 3.0f), *oute = fbuf(no, 3.0f), *dqkve = fbuf(nq, 3.0f), *se = fbuf(na, 3.0f);
        float *atth = fbuf(na, 4.0f), *outh = fbuf(no, 4.0f), *dqkvh = fbuf(nq, 4.0f), *sh = fbuf(na, 4.0f);
        grid_attn_fwd(B, T, C, NH, qkv, atte, oute);
        grid_attn_bwd(B, T, C, NH, dout, qkv, atte, dqkve, se);
        FOR_PATHS({
            for (long i = 0; i < na; i++) atth[i] = 3.0f;   /* stale values above the diagonal */
            zn_host_attn_fwd(NULL, B, T, C, NH, qkv, atth, outh);
            same(atte, atth, na, "attn_fwd att", isa, threads);
            same(oute, outh, no, "attn_fwd out", isa, threads);
            for (long i = 0; i < nq; i++) dqkvh[i] = 4.0f;
            zn_host_attn_bwd(NULL, B, T, C, NH, dout, qkv, atth, dqkvh, sh);
            same(dqkve, dqkvh, nq, "attn_bwd dqkv", isa, threads);
            /* the scratch: dS on and below the diagonal (above it the
               host leaves dP, the CUDA twin nothing: neither is read) */
            for (long bh = 0; bh < (long)B * NH; bh++)
                for (long t = 0; t < T; t++) {
                    const long at = (bh * T + t) * T;
                    same(se + at, sh + at, t + 1, "attn_bwd dS", isa, threads);
                }
        })
        free(qkv); free(dout); free(atte); free(oute); free(dqkve); free(se);
        free(atth); free(outh); free(dqkvh); free(sh);
    }
}

/* spec: Z-CUDA-009 Z-GPT-007 GELU forward and backward on values past
 * tanh's cut-off, zeros of both signs, infinities, NaN, subnormals: the
 * CUDA grids' bits are the host twins' (in place too, as the engine calls
 * the backward) */
static void test_gelu(void **st) {
    (void)st;
    lcg_state = 17u;
    const long n = 100003;   /* not a multiple of any vector width */
    static const float odd[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 20.0f, -20.0f, 1e-30f, -3e-39f, 11.3f, -11.3f};
    float *x = rand_buf(n, 6.0f), *dy = rand_buf(n, 1.0f);
    for (long i = 0; i < n; i += 97) x[i] = odd[(i / 97) % 11];
    float *ye = fbuf(n, 0.0f), *dxe = fbuf(n, 0.0f), *yh = fbuf(n, 0.0f), *dxh = fbuf(n, 0.0f);
    grid_gelu_fwd(n, x, ye);
    grid_gelu_bwd(n, x, dy, dxe);
    FOR_PATHS({
        zn_host_gelu_fwd(NULL, n, x, yh);
        zn_host_gelu_bwd(NULL, n, x, dy, dxh);
        same(ye, yh, n, "gelu_fwd", isa, threads);
        same(dxe, dxh, n, "gelu_bwd", isa, threads);
        memcpy(dxh, dy, (size_t)n * sizeof(float));
        zn_host_gelu_bwd(NULL, n, x, dxh, dxh);   /* dx aliasing dy */
        same(dxe, dxh, n, "gelu_bwd in place", isa, threads);
    })
    free(x); free(dy); free(ye); free(dxe); free(yh); free(dxh);
}

/* spec: Z-CUDA-009 Z-GPT-013 a kernel table that lacks any GPT-2 kernel
 * (a backend without them) refuses the model at init with ZN_E_USAGE
 * naming the device, instead of calling a NULL kernel later */
static void test_table_without_lm_kernels(void **st) {
    (void)st;
    ZnModel *m = malloc(sizeof *m);
    assert_non_null(m);
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("gpt2:n_layer=1,n_head=2,n_embd=8,vocab_size=11,n_positions=4", m, &err), 0);
    for (int which = 0; which < 9; which++) {
        ZnKernels k = zn_host_kernels;
        switch (which) {
        case 0: k.add_bias = NULL; break;
        case 1: k.embed_fwd = NULL; break;
        case 2: k.embed_bwd = NULL; break;
        case 3: k.layernorm_fwd = NULL; break;
        case 4: k.layernorm_bwd = NULL; break;
        case 5: k.attn_fwd = NULL; break;
        case 6: k.attn_bwd = NULL; break;
        case 7: k.gelu_fwd = NULL; break;
        default: k.gelu_bwd = NULL; break;
        }
        ZnDevice d;
        zn_device_host_init(&d);
        d.k = &k;
        err = (ZnErr){0};
        ZnModelRun *R = zn_run_new(m, &d, ZN_F32, 2, &err);
        if (R) zn_run_free(R);
        assert_null(R);
        assert_int_equal(err.code, ZN_E_USAGE);
        assert_non_null(strstr(err.msg, "host"));
        assert_non_null(strstr(err.msg, "GPT-2 kernels"));
    }
    /* the full table: the same model starts */
    ZnDevice d;
    zn_device_host_init(&d);
    ZnModelRun *R = zn_run_new(m, &d, ZN_F32, 2, &err);
    assert_non_null(R);
    zn_run_free(R);
    free(m);
}

ZT_MAIN(
    cmocka_unit_test(test_bias_embed),
    cmocka_unit_test(test_layernorm),
    cmocka_unit_test(test_attention),
    cmocka_unit_test(test_gelu),
    cmocka_unit_test(test_table_without_lm_kernels))
