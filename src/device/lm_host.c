/* lm_host.c: the host twins of the language-model kernels (device.h,
 * spec Z-GPT-003..007): embeddings, LayerNorm, causal attention, GELU and
 * the bias add. Each output element is computed in the order the spec
 * states, so that the CUDA twins in exact mode can reproduce every bit; exp
 * and tanh come from core/zn_math.h, the one definition gcc and nvcc share.
 *
 * Made fast only in ways that change no bit (spec Z-HOST-006..008): work is
 * split over the host threads by whole output elements (rows, columns,
 * (batch, head) pairs), each computed by one thread in its defined order;
 * the inner loops (lm_tile.h) run over independent output elements in
 * vector lanes; the dot products of attention go through the host GEMM
 * (Z-HOST-003), whose every element is the same ordered sum. */
#include <stdint.h>
#include <stdlib.h>
#include "device/lm_host.h"
#include "device/gemm_host.h"
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

/* test hook: attention as if its block buffer could not be allocated */
static int lm_no_tmp;
void zn_lm_host_test_no_buffer(int on) { lm_no_tmp = on; }

static inline float lm_gelu1(float v) {
    float u = GELU_S * (v + GELU_A * v * v * v);
    return 0.5f * v * (1.0f + zn_tanhf(u));
}

/* d/dx: 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) S (1 + 3 A x^2) */
static inline float lm_gelu_grad1(float v, float dy) {
    float u = GELU_S * (v + GELU_A * v * v * v);
    float th = zn_tanhf(u);
    float local = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * GELU_A * v * v);
    return local * dy;
}

/* ------------------------------------------------------------------------ */
/* the inner loops, one set per instruction set */

#define LT(x) x##_scalar
#define LT_VL 1
#include "device/lm_tile.h"
#undef LT
#undef LT_VL

#define LT(x) x##_sse2
#define LT_VL 4
#include "device/lm_tile.h"
#undef LT
#undef LT_VL

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZN_LM_X86 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define LT(x) x##_avx2
#define LT_VL 8
#include "device/lm_tile.h"
#undef LT
#undef LT_VL
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f")
#define LT(x) x##_avx512
#define LT_VL 16
#include "device/lm_tile.h"
#undef LT
#undef LT_VL
#pragma GCC pop_options
#endif

typedef struct {
    void (*gelu_fwd)(long lo, long hi, const float *x, float *y);
    void (*gelu_bwd)(long lo, long hi, const float *x, const float *dy, float *dx);
    void (*add_row)(long n, const float *b, float *y);
    void (*sum_row)(long n, const float *a, const float *b, float *y);
    void (*axpy)(long n, float s, const float *x, float *y);
    void (*scale_row)(long n, float s, const float *x, float *y);
    void (*div_row)(long n, float *a, float s);
    void (*dsoft_row)(long n, const float *p, float *ds, float dot, float scale);
    void (*ln_out)(long n, const float *x, float m, float rs, const float *w, const float *b, float *out);
    void (*ln_dx)(long n, const float *x, const float *g, const float *w, float m, float rs, float md, float mdn,
                  float *dx);
    void (*ln_dwdb)(long n, const float *x, const float *g, float m, float rs, float *dw, float *db);
    void (*dkdv)(long t2, long T, long hs, const float *q, long sq, const float *g, long sg, const float *ds,
                 const float *P, float *dk, float *dv);
    void (*exp_from)(long n, const float *x, float *a, float mx);
    float (*row_max)(long n, const float *z);
    void (*xent_grad)(long n, float *a, float s, float g);
} LmOps;

#define LM_OPS(sfx)                                                                                      \
    {gelu_fwd_##sfx, gelu_bwd_##sfx, add_row_##sfx, sum_row_##sfx, axpy_##sfx,            \
     scale_row_##sfx, div_row_##sfx, dsoft_row_##sfx, ln_out_##sfx, ln_dx_##sfx, ln_dwdb_##sfx, dkdv_##sfx,    \
     exp_from_##sfx, row_max_##sfx, xent_grad_##sfx}

static const LmOps lm_ops_scalar = LM_OPS(scalar), lm_ops_sse2 = LM_OPS(sse2);
#ifdef ZN_LM_X86
static const LmOps lm_ops_avx2 = LM_OPS(avx2), lm_ops_avx512 = LM_OPS(avx512);
#endif

static const LmOps *lm_ops(ZnIsa isa) {
    switch (isa) {
    case ZN_ISA_SCALAR: return &lm_ops_scalar;
#ifdef ZN_LM_X86
    case ZN_ISA_AVX2: return &lm_ops_avx2;
    case ZN_ISA_AVX512: return &lm_ops_avx512;
#endif
    default: return &lm_ops_sse2;
    }
}

/* ------------------------------------------------------------------------ */
/* threads: n items in zn_host_threads() contiguous ranges, at least grain
 * items a thread. A thread that cannot start leaves its range to the caller
 * (the same items, the same bits). */

typedef struct LmJob LmJob;
typedef void (*LmRange)(const LmJob *j, long lo, long hi);
struct LmJob {
    LmRange fn;
    const LmOps *op;
    ZnIsa isa;
    int B, T, C, NH, V, P;
    long n;
    const int *tok;
    const float *x, *w, *b, *y, *g, *mean, *rstd;
    float *out, *out2, *out3, *out4;
    float scale;
};
typedef struct { const LmJob *j; long lo, hi; } LmPart;

static void *lm_part_run(void *arg) {
    const LmPart *p = arg;
    p->j->fn(p->j, p->lo, p->hi);
    return NULL;
}

static void lm_par(LmJob *j, LmRange fn, long n, long grain) {
    j->fn = fn;
    j->isa = zn_lm_host_isa();
    j->op = lm_ops(j->isa);
    long T = zn_host_threads();
    if (grain < 1) grain = 1;
    if (T > n / grain) T = n / grain;
    if (T <= 1) {
        if (n > 0) fn(j, 0, n);
        return;
    }
    LmPart part[ZN_MAX_HOST_THREADS];
    for (long k = 0; k < T; k++) part[k] = (LmPart){j, n * k / T, n * (k + 1) / T};
    zn_run_parts((int)T, lm_part_run, part, sizeof *part);
}

/* column ranges go in whole blocks of LM_CB columns (a cache line) */
#define LM_CB 16
static void lm_cols(long C, long lo, long hi, long *c0, long *c1) {
    *c0 = lo * LM_CB;
    *c1 = hi * LM_CB < C ? hi * LM_CB : C;
}

/* ------------------------------------------------------------------------ */
/* bias, embeddings */

static void bias_rows(const LmJob *j, long lo, long hi) {
    for (long i = lo; i < hi; i++) j->op->add_row(j->C, j->b, j->out + i * j->C);
}

static void host_add_bias(ZnDevice *d, int M, int N, const float *b, float *y) {
    (void)d;
    LmJob j = {.C = N, .b = b, .out = y};
    lm_par(&j, bias_rows, M, 4096 / (N > 0 ? N : 1) + 1);
}

static void embed_rows(const LmJob *j, long lo, long hi) {
    const long C = j->C;
    for (long r = lo; r < hi; r++)
        j->op->sum_row(C, j->x + (long)j->tok[r] * C, j->w + (r % j->T) * C, j->out + r * C);
}

static void host_embed_fwd(ZnDevice *d, int B, int T, int C, const int *tok, const float *wte, const float *wpe,
                           float *out) {
    (void)d;
    LmJob j = {.T = T, .C = C, .tok = tok, .x = wte, .w = wpe, .out = out};
    lm_par(&j, embed_rows, (long)B * T, 4096 / (C > 0 ? C : 1) + 1);
}

/* rows [lo, hi) of dwte then dwpe (one range of V + P rows) to zero */
static void embed_bwd_zero(const LmJob *j, long lo, long hi) {
    const long C = j->C, V = j->V;
    if (lo < V) memset(j->out + lo * C, 0, (size_t)((hi < V ? hi : V) - lo) * C * sizeof(float));
    if (hi > V) {
        long p0 = lo > V ? lo - V : 0;
        memset(j->out2 + p0 * C, 0, (size_t)(hi - V - p0) * C * sizeof(float));
    }
}

/* a range of column blocks: add the rows in order (every element of
 * dwpe[t] sees b ascending, of dwte[v] r ascending) */
static void embed_bwd_cols(const LmJob *j, long lo, long hi) {
    const long C = j->C, BT = (long)j->B * j->T;
    long c0, c1;
    lm_cols(C, lo, hi, &c0, &c1);
    for (long r = 0; r < BT; r++) {
        const float *g = j->g + r * C + c0;
        j->op->add_row(c1 - c0, g, j->out + (long)j->tok[r] * C + c0);
        j->op->add_row(c1 - c0, g, j->out2 + (r % j->T) * C + c0);
    }
}

static void host_embed_bwd(ZnDevice *d, int B, int T, int C, int V, int P, const int *tok, const float *dout,
                           float *dwte, float *dwpe) {
    (void)d;
    LmJob j = {.B = B, .T = T, .C = C, .V = V, .P = P, .tok = tok, .g = dout, .out = dwte, .out2 = dwpe};
    lm_par(&j, embed_bwd_zero, (long)V + P, 16);
    lm_par(&j, embed_bwd_cols, (C + LM_CB - 1) / LM_CB, 1);
}

/* ------------------------------------------------------------------------ */
/* LayerNorm */

static void ln_fwd_rows(const LmJob *j, long lo, long hi) {
    const long C = j->C;
    for (long r = lo; r < hi; r++) {
        const float *xr = j->x + r * C;
        float s = 0.0f;
        for (long c = 0; c < C; c++) s += xr[c];
        float m = s / (float)C;
        float v = 0.0f;
        for (long c = 0; c < C; c++) {
            float dx = xr[c] - m;
            v += dx * dx;
        }
        float rs = 1.0f / sqrtf(v / (float)C + 1e-5f);
        j->op->ln_out(C, xr, m, rs, j->w, j->b, j->out + r * C);
        j->out2[r] = m;
        j->out3[r] = rs;
    }
}

static void host_layernorm_fwd(ZnDevice *d, int N, int C, const float *x, const float *w, const float *b, float *out,
                               float *mean, float *rstd) {
    (void)d;
    LmJob j = {.C = C, .x = x, .w = w, .b = b, .out = out, .out2 = mean, .out3 = rstd};
    lm_par(&j, ln_fwd_rows, N, 8);
}

/* the input gradient, row by row: the two row means of its formula */
static void ln_bwd_rows(const LmJob *j, long lo, long hi) {
    const long C = j->C;
    const float *w = j->w;
    for (long r = lo; r < hi; r++) {
        const float *xr = j->x + r * C, *g = j->g + r * C;
        const float m = j->mean[r], rs = j->rstd[r];
        float sd = 0.0f, sdn = 0.0f;
        for (long c = 0; c < C; c++) {
            float n = (xr[c] - m) * rs, dn = w[c] * g[c];
            sd += dn;
            sdn += dn * n;
        }
        j->op->ln_dx(C, xr, g, w, m, rs, sd / (float)C, sdn / (float)C, j->out + r * C);
    }
}

/* the weight gradients, a range of column blocks: every column sums the
 * rows in order */
static void ln_bwd_cols(const LmJob *j, long lo, long hi) {
    const long C = j->C;
    long c0, c1;
    lm_cols(C, lo, hi, &c0, &c1);
    float *dw = j->out2 + c0, *db = j->out3 + c0;
    memset(dw, 0, (size_t)(c1 - c0) * sizeof(float));
    memset(db, 0, (size_t)(c1 - c0) * sizeof(float));
    for (long r = 0; r < j->n; r++)
        j->op->ln_dwdb(c1 - c0, j->x + r * C + c0, j->g + r * C + c0, j->mean[r], j->rstd[r], dw, db);
}

static void host_layernorm_bwd(ZnDevice *d, int N, int C, const float *dout, const float *x, const float *w,
                               const float *mean, const float *rstd, float *dx, float *dw, float *db) {
    (void)d;
    LmJob j = {.C = C, .n = N, .x = x, .w = w, .g = dout, .mean = mean, .rstd = rstd, .out = dx, .out2 = dw,
               .out3 = db};
    lm_par(&j, ln_bwd_rows, N, 8);
    lm_par(&j, ln_bwd_cols, (C + LM_CB - 1) / LM_CB, 1);
}

/* ------------------------------------------------------------------------ */
/* causal attention: (batch, head) pairs over the threads */

/* queries go in blocks of LM_QB rows: the keys before a block's first row
 * are summed by every row of the block in full (one GEMM), the rest row by
 * row, continuing from the GEMM's partial sum */
#define LM_QB 64

/* One (batch, head) pair: its q, k and v columns in qkv [B*T, 3C] (rows at
 * stride C3), and tmp, LM_QB x hs floats for causal_rows, or NULL (its
 * allocation failed, or a test asked): then causal_rows goes row by row. */
typedef struct {
    long T, C, C3, hs, b, h, bh;
    float scale;   /* 1 / sqrt(hs) */
    const float *q, *k, *v;
    float *tmp;
} AttnHead;
typedef void (*AttnHeadFn)(const LmJob *j, const AttnHead *a);

/* The pairs [lo, hi) in order, each handed to one, with one block buffer
 * for the range. */
static void attn_heads(const LmJob *j, long lo, long hi, AttnHeadFn one) {
    const long T = j->T, C = j->C, NH = j->NH, hs = C / NH, C3 = 3 * C;
    float *tmp = lm_no_tmp ? NULL : malloc((size_t)(LM_QB * hs) * sizeof(float));
    for (long bh = lo; bh < hi; bh++) {
        const long b = bh / NH, h = bh % NH;
        const float *q = j->x + b * T * C3 + h * hs;
        const AttnHead a = {T, C, C3, hs, b, h, bh, 1.0f / sqrtf((float)hs), q, q + C, q + 2 * C, tmp};
        one(j, &a);
    }
    free(tmp);
}

/* out[t][t2] = X_t . Y_t2 (the GEMM's ordered sums over the head's columns)
 * for the keys up to the end of t's block of queries, not the whole square;
 * X rows at stride sx, Y rows at stride C3, out rows at stride T. */
static void causal_dots(const LmJob *j, const AttnHead *a, const float *X, long sx, const float *Y, float *out) {
    const long T = a->T;
    for (long t0 = 0; t0 < T; t0 += LM_QB) {
        const long nb = T - t0 < LM_QB ? T - t0 : LM_QB;
        zn_host_gemm_ldc(j->isa, 1, (int)nb, (int)(t0 + nb), (int)a->hs, X + t0 * sx, sx, 1, Y, a->C3, 1, NULL,
                         out + t0 * T, T);
    }
}

/* For every row t of one head: y_t[i] = sum over t2 <= t in order of
 * A[t][t2] X_t2[i]; A rows at stride T, X rows at stride C3, y rows at
 * stride sy. Without a block buffer each row sums into its place in y, a
 * GEMM over t2 < t continued by t2 = t -- the same ordered sum, so the same
 * bits. */
static void causal_rows(const LmJob *j, const AttnHead *a, const float *A, const float *X, float *y, long sy) {
    const long T = a->T, hs = a->hs, sx = a->C3;
    for (long t0 = 0; t0 < T; t0 += LM_QB) {
        const long nb = T - t0 < LM_QB ? T - t0 : LM_QB;
        if (!a->tmp) {
            for (long t = t0; t < t0 + nb; t++) {
                float *acc = y + t * sy;
                if (t > 0) zn_host_gemm_isa(j->isa, 1, 1, (int)hs, (int)t, A + t * T, T, 1, X, 1, sx, NULL, acc);
                else memset(acc, 0, (size_t)hs * sizeof(float));
                j->op->axpy(hs, A[t * T + t], X + t * sx, acc);
            }
            continue;
        }
        if (t0 > 0)
            zn_host_gemm_isa(j->isa, 1, (int)nb, (int)hs, (int)t0, A + t0 * T, T, 1, X, 1, sx, NULL, a->tmp);
        else
            memset(a->tmp, 0, (size_t)(nb * hs) * sizeof(float));
        for (long r = 0; r < nb; r++) {
            const long t = t0 + r;
            float *acc = a->tmp + r * hs;
            const float *at = A + t * T;
            for (long t2 = t0; t2 <= t; t2++) j->op->axpy(hs, at[t2], X + t2 * sx, acc);
            memcpy(y + t * sy, acc, (size_t)hs * sizeof(float));
        }
    }
}

static void attn_fwd_head(const LmJob *j, const AttnHead *a) {
    const long T = a->T;
    float *att = j->out + a->bh * T * T;
    /* the scores q_t . k_t2; above the diagonal overwritten with 0 below */
    causal_dots(j, a, a->q, a->C3, a->k, att);
    for (long t = 0; t < T; t++) {
        float *p = att + t * T;
        j->op->scale_row(t + 1, a->scale, p, p);
        /* zn_softmax_row's max and sum, the exps evaluated once (in
           vector lanes) and summed in order from 0.0f: the same bits */
        const float mx = j->op->row_max(t + 1, p);
        j->op->exp_from(t + 1, p, p, mx);
        float sum = 0.0f;
        for (long t2 = 0; t2 <= t; t2++) sum += p[t2];
        j->op->div_row(t + 1, p, sum);
        memset(p + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
    }
    causal_rows(j, a, att, a->v, j->out2 + a->b * T * a->C + a->h * a->hs, a->C);
}
static void attn_fwd_pairs(const LmJob *j, long lo, long hi) { attn_heads(j, lo, hi, attn_fwd_head); }

/* Row t of one head: scores s[t2] = (q_t . k_t2) * scale for t2 <= t (the
 * dot product summed over the head's columns in order), softmax over them
 * (zn_softmax_row's max and sum, then each exp divided by the sum). */
static void host_attn_fwd(ZnDevice *d, int B, int T, int C, int NH, const float *qkv, float *att, float *out) {
    (void)d;
    LmJob j = {.B = B, .T = T, .C = C, .NH = NH, .x = qkv, .out = att, .out2 = out};
    lm_par(&j, attn_fwd_pairs, (long)B * NH, 1);
}

static void attn_bwd_head(const LmJob *j, const AttnHead *a) {
    const long T = a->T, C = a->C, C3 = a->C3, hs = a->hs;
    const float *g = j->g + a->b * T * C + a->h * hs;
    const float *P = j->y + a->bh * T * T;
    float *dS = j->out2 + a->bh * T * T;
    float *dq = j->out + a->b * T * C3 + a->h * hs, *dk = dq + C, *dv = dq + 2 * C;
    /* dP[t][t2] = dO_t . v_t2; only t2 <= t is read, so the rest of the
       square is left as it is */
    causal_dots(j, a, g, C, a->v, dS);
    for (long t = 0; t < T; t++) {
        const float *p = P + t * T;
        float *ds = dS + t * T;
        float dot = 0.0f;
        for (long t2 = 0; t2 <= t; t2++) dot += p[t2] * ds[t2];
        j->op->dsoft_row(t + 1, p, ds, dot, a->scale);
    }
    causal_rows(j, a, dS, a->k, dq, C3);
    for (long t2 = 0; t2 < T; t2++) j->op->dkdv(t2, T, hs, a->q, C3, g, C, dS, P, dk + t2 * C3, dv + t2 * C3);
}
static void attn_bwd_pairs(const LmJob *j, long lo, long hi) { attn_heads(j, lo, hi, attn_bwd_head); }

/* For one head, with P = att and dO = dout (Z-GPT-006):
 *   dP[t][t2] = dO_t . v_t2                       (columns in order)
 *   dS[t][t2] = P[t][t2] * (dP[t][t2] - sum_{t2' <= t} P[t][t2'] dP[t][t2'])
 *   dq_t      = sum_{t2 <= t} (dS[t][t2] * scale) k_t2     (t2 ascending)
 *   dk_t2     = sum_{t >= t2} (dS[t][t2] * scale) q_t      (t ascending)
 *   dv_t2     = sum_{t >= t2} P[t][t2] dO_t                (t ascending)
 * Every element of dqkv belongs to one (batch, head) pair and is written
 * whole by it. */
static void host_attn_bwd(ZnDevice *d, int B, int T, int C, int NH, const float *dout, const float *qkv,
                          const float *att, float *dqkv, float *scratch) {
    (void)d;
    LmJob j = {.B = B, .T = T, .C = C, .NH = NH, .x = qkv, .g = dout, .y = att, .out = dqkv, .out2 = scratch};
    lm_par(&j, attn_bwd_pairs, (long)B * NH, 1);
}

/* ------------------------------------------------------------------------ */
/* GELU, in ranges of elements (dx may be dy: element-wise) */

#define LM_EB 4096
static void gelu_fwd_blocks(const LmJob *j, long lo, long hi) {
    long e0 = lo * LM_EB, e1 = hi * LM_EB < j->n ? hi * LM_EB : j->n;
    j->op->gelu_fwd(e0, e1, j->x, j->out);
}
static void gelu_bwd_blocks(const LmJob *j, long lo, long hi) {
    long e0 = lo * LM_EB, e1 = hi * LM_EB < j->n ? hi * LM_EB : j->n;
    j->op->gelu_bwd(e0, e1, j->x, j->g, j->out);
}

static void host_gelu_fwd(ZnDevice *d, long n, const float *x, float *y) {
    (void)d;
    LmJob j = {.n = n, .x = x, .out = y};
    lm_par(&j, gelu_fwd_blocks, (n + LM_EB - 1) / LM_EB, 4);
}

static void host_gelu_bwd(ZnDevice *d, long n, const float *x, const float *dy, float *dx) {
    (void)d;
    LmJob j = {.n = n, .x = x, .g = dy, .out = dx};
    lm_par(&j, gelu_bwd_blocks, (n + LM_EB - 1) / LM_EB, 4);
}

/* the table zn_host_kernels.lm points at */
const ZnLmKernels zn_host_lm_kernels = {ZN_LM_KERNELS_BY_PREFIX(host)};

/* ------------------------------------------------------------------------ */
/* softmax cross-entropy (Z-MOD-009) */

/* rows [lo, hi): each row's loss into out2[r], its gradient into out (when
 * there is one). The exps go into the gradient row (or, without one, a
 * block on the stack) in vector lanes, then s sums them one at a time in
 * column order from 0.0f, as the definition does: the same bits. */
static void xent_rows(const LmJob *j, long lo, long hi) {
    const long C = j->C;
    for (long r = lo; r < hi; r++) {
        const float *z = j->x + r * C;
        const int y = j->tok[r];
        const float zy = z[y];   /* read before the gradient row is written (it may be z) */
        const float m = j->op->row_max(C, z);
        float s = 0.0f;
        if (j->out) {
            float *dl = j->out + r * C;
            j->op->exp_from(C, z, dl, m);
            for (long c = 0; c < C; c++) s += dl[c];
            const float ey = dl[y];
            j->op->xent_grad(C, dl, s, j->scale);
            dl[y] = (ey / s - 1.0f) * j->scale;   /* the label's column */
        } else {
            float e[512];
            for (long c0 = 0; c0 < C; c0 += 512) {
                const long n = C - c0 < 512 ? C - c0 : 512;
                j->op->exp_from(n, z + c0, e, m);
                for (long c = 0; c < n; c++) s += e[c];
            }
        }
        j->out2[r] = zn_logf(s) - (zy - m);
    }
}

float zn_host_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels, float grad_scale,
                           float *dlogits) {
    (void)d;
    if (B <= 0 || C <= 0) return 0.0f;  /* no rows: no loss (and no 0/0) */
    float one[64];   /* the row losses; a heap block past 64 rows */
    float *loss = B <= 64 ? one : malloc((size_t)B * sizeof(float));
    LmJob j = {.C = C, .x = logits, .tok = labels, .out = dlogits, .out2 = loss, .scale = grad_scale};
    if (loss) {
        lm_par(&j, xent_rows, B, 1);
    } else {   /* no block for the losses: one row at a time, the same bits */
        float l1;
        j.out2 = &l1;
        j.isa = zn_lm_host_isa();
        j.op = lm_ops(j.isa);
        float total = 0.0f;
        for (long r = 0; r < B; r++) {
            j.x = logits + r * C;
            j.tok = labels + r;
            j.out = dlogits ? dlogits + r * C : NULL;
            xent_rows(&j, 0, 1);
            total += l1;
        }
        return total / (float)B;
    }
    float total = 0.0f;   /* the mean: row losses summed in row order */
    for (long r = 0; r < B; r++) total += loss[r];
    if (loss != one) free(loss);
    return total / (float)B;
}
