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
#include "lm_check.h"
#include "device/lm_elem.h"
#include "engine/model.h"

/* ------------------------------------------------------------------------ */
/* the CUDA kernels' grids, run on the CPU: one loop per launch of
 * kernels/lm.cu, over the same index range, calling the same function */

static void grid_bias(int M, int N, const float *b, float *y) {
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

/* GELU's grids call one function per element */
#define grid_gelu zn_lm_gelu
#define grid_gelu_grad zn_lm_gelu_grad

/* ------------------------------------------------------------------------ */
/* the tests */

/* the CUDA grids as the host kernels' twin: 1 and 2 host threads */
static const LmTwin grids = LM_TWIN(grid, 2);

/* spec: Z-CUDA-009 Z-GPT-003 the bias add and the embeddings, forward and
 * backward (tokens repeating, B*T past the vocabulary, positions past T,
 * C not a multiple of 16): the CUDA grids' bits are the host twins' */
static void test_bias_embed(void **st) {
    (void)st;
    lcg_state = 3u;
    const int bias_shapes[3][2] = {{205, 69}, {3, 16}, {1, 1}};
    for (int s = 0; s < 3; s++) lm_check_bias(&grids, bias_shapes[s][0], bias_shapes[s][1]);
    /* B, T, C, V, P */
    const int emb[3][5] = {{5, 41, 69, 37, 50}, {2, 67, 16, 300, 67}, {3, 1, 7, 2, 4}};
    for (int s = 0; s < 3; s++) lm_check_embed(&grids, emb[s][0], emb[s][1], emb[s][2], emb[s][3], emb[s][4]);
}

/* spec: Z-CUDA-009 Z-GPT-004 LayerNorm forward (out, mean, rstd) and
 * backward (dx, dw, db) on odd shapes, one column included: the CUDA
 * grids' bits are the host twins' */
static void test_layernorm(void **st) {
    (void)st;
    lcg_state = 5u;
    const int sizes[4][2] = {{205, 69}, {67, 771}, {130, 48}, {9, 1}};
    for (int s = 0; s < 4; s++) lm_check_layernorm(&grids, sizes[s][0], sizes[s][1]);
}

/* spec: Z-CUDA-009 Z-GPT-005 Z-GPT-006 causal attention forward
 * (probabilities, output) and backward (dq, dk, dv, and the softmax
 * gradient left in the scratch on and below the diagonal) for head sizes
 * 17, 23, 40, 64, T of 1, 7, 45, 67, 70, 131 (the host's blocks of 64
 * queries: one, two and a partial third), several heads, scores far apart:
 * the CUDA grids' bits are the host twins' */
static void test_attention(void **st) {
    (void)st;
    lm_check_attention_cases(&grids);
}

/* spec: Z-CUDA-009 Z-GPT-007 GELU forward and backward on values past
 * tanh's cut-off, zeros of both signs, infinities, NaN, subnormals: the
 * CUDA grids' bits are the host twins' (in place too, as the engine calls
 * the backward) */
static void test_gelu(void **st) {
    (void)st;
    lcg_state = 17u;
    lm_check_gelu(&grids);
}

/* spec: Z-CUDA-009 Z-GPT-013 a kernel table without the language-model
 * table, or with one that lacks any GPT-2 kernel (a backend without them),
 * refuses the model at init with ZN_E_USAGE naming the device, instead of
 * calling a NULL kernel later */
static void test_table_without_lm_kernels(void **st) {
    (void)st;
    ZnModel *m = zt_model("gpt2:n_layer=1,n_head=2,n_embd=8,vocab_size=11,n_positions=4");
    ZnErr err = {0};
    for (int which = 0; which < 10; which++) {
        ZnLmKernels lm = zn_host_lm_kernels;
        ZnKernels k = zn_host_kernels;
        k.lm = &lm;
        switch (which) {
        case 0: lm.add_bias = NULL; break;
        case 1: lm.embed_fwd = NULL; break;
        case 2: lm.embed_bwd = NULL; break;
        case 3: lm.layernorm_fwd = NULL; break;
        case 4: lm.layernorm_bwd = NULL; break;
        case 5: lm.attn_fwd = NULL; break;
        case 6: lm.attn_bwd = NULL; break;
        case 7: lm.gelu_fwd = NULL; break;
        case 8: lm.gelu_bwd = NULL; break;
        default: k.lm = NULL; break;
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
