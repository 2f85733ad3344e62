/* model_gpt2.c: GPT-2 (spec Z-GPT-001..009), Hugging Face
 * GPT2LMHeadModel's parameters with their names and layout:
 *
 *   transformer.wte.weight [V, C]   transformer.wpe.weight [P, C]
 *   per block l, prefix transformer.h.l.:
 *     ln_1.weight/bias [C]          attn.c_attn.weight [C, 3C], bias [3C]
 *     attn.c_proj.weight [C, C]     attn.c_proj.bias [C]
 *     ln_2.weight/bias [C]          mlp.c_fc.weight [C, 4C], bias [4C]
 *     mlp.c_proj.weight [4C, C]     mlp.c_proj.bias [C]
 *   transformer.ln_f.weight/bias [C]
 *   lm_head.weight: transformer.wte.weight itself (tied)
 *
 * Conv1D weights are [in, out]: y = x W + b (gemm_nn, then the bias).
 * Modules, in forward order: the embeddings; per block ln_1, attn.c_attn
 * (with the attention after it), attn.c_proj (with the residual add),
 * ln_2, mlp.c_fc (with the GELU), mlp.c_proj (with the residual add);
 * ln_f; lm_head. Each stores its outputs in the model dtype. */
#include "engine/model.h"
#include "engine/model_run.h"
#include "engine/data_text.h"
#include "core/rng.h"
#include "core/zn_math.h"
#include "core/alloc.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_BLOCK 12   /* params of one block */
#define MODS_PER_BLOCK 6

/* ------------------------------------------------------------------------ */
/* parsing */

typedef struct { const char *name; ZnGpt2Shape s; } Preset;
static const Preset presets[] = {
    {"gpt2-tiny", {2, 2, 32, 256, 32}},
    {"gpt2", {12, 12, 768, 50257, 1024}},
    {"gpt2-medium", {24, 16, 1024, 50257, 1024}},
    {"gpt2-large", {36, 20, 1280, 50257, 1024}},
    {"gpt2-xl", {48, 25, 1600, 50257, 1024}},
    /* GPT-3's shapes (Brown et al. 2020, Table 2.1) in GPT-2's architecture,
       2048 positions; XL and 13B take heads of 128 that divide n_embd (the
       table's 24 heads of 2048 and width 5140 do not) */
    {"gpt3-small", {12, 12, 768, 50257, 2048}},
    {"gpt3-medium", {24, 16, 1024, 50257, 2048}},
    {"gpt3-large", {24, 16, 1536, 50257, 2048}},
    {"gpt3-xl", {24, 16, 2048, 50257, 2048}},
    {"gpt3-2.7b", {32, 32, 2560, 50257, 2048}},
    {"gpt3-6.7b", {32, 32, 4096, 50257, 2048}},
    {"gpt3-13b", {40, 40, 5120, 50257, 2048}},
    {"gpt3-175b", {96, 96, 12288, 50257, 2048}},
};

static void add_param(ZnModel *m, const char *name, int ndim, long d0, long d1) {
    ZnParamSpec *p = &m->params[m->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->numel = ndim == 1 ? d0 : d0 * d1;
}

static void add_module(ZnModel *m, const char *name, int np, int p0, int p1, int block) {
    ZnModule *md = &m->modules[m->nmodules++];
    md->block = block;
    snprintf(md->name, sizeof md->name, "%s", name);
    md->nparams = np;
    md->param[0] = p0;
    md->param[1] = p1;
}

/* The parameters and modules of a shape (already checked). */
static void build(ZnModel *m) {
    const ZnGpt2Shape *g = &m->gpt2;
    const long C = g->n_embd;
    char n[ZN_MAX_NAME];
    m->kind = ZN_MODEL_GPT2;
    m->seq_len = g->n_positions;
    add_param(m, "transformer.wte.weight", 2, g->vocab_size, C);
    add_param(m, "transformer.wpe.weight", 2, g->n_positions, C);
    add_module(m, "transformer.wte+wpe", 2, 0, 1, -1);
    static const struct { const char *suffix; int ndim; long d0, d1; } blk[PER_BLOCK] = {
        {"ln_1.weight", 1, 1, 0},        {"ln_1.bias", 1, 1, 0},
        {"attn.c_attn.weight", 2, 1, 3}, {"attn.c_attn.bias", 1, 3, 0},
        {"attn.c_proj.weight", 2, 1, 1}, {"attn.c_proj.bias", 1, 1, 0},
        {"ln_2.weight", 1, 1, 0},        {"ln_2.bias", 1, 1, 0},
        {"mlp.c_fc.weight", 2, 1, 4},    {"mlp.c_fc.bias", 1, 4, 0},
        {"mlp.c_proj.weight", 2, 4, 1},  {"mlp.c_proj.bias", 1, 1, 0},
    };
    static const char *mods[MODS_PER_BLOCK] = {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"};
    for (int l = 0; l < g->n_layer; l++) {
        int base = m->nparams;
        for (int i = 0; i < PER_BLOCK; i++) {
            snprintf(n, sizeof n, "transformer.h.%d.%s", l, blk[i].suffix);
            add_param(m, n, blk[i].ndim, blk[i].d0 * C, blk[i].d1 * C);
        }
        for (int i = 0; i < MODS_PER_BLOCK; i++) {
            snprintf(n, sizeof n, "transformer.h.%d.%s", l, mods[i]);
            add_module(m, n, 2, base + 2 * i, base + 2 * i + 1, l);
        }
    }
    add_param(m, "transformer.ln_f.weight", 1, C, 0);
    add_param(m, "transformer.ln_f.bias", 1, C, 0);
    add_module(m, "transformer.ln_f", 2, m->nparams - 2, m->nparams - 1, -1);
    add_module(m, "lm_head", 1, 0, -1, -1);
    snprintf(m->aliases[0].name, sizeof m->aliases[0].name, "lm_head.weight");
    m->aliases[0].param = 0;
    m->naliases = 1;
}

/* One "key=value" of a gpt2: spec. */
static int set_key(const char *spec, const char *kv, size_t len, ZnGpt2Shape *s, ZnErr *err) {
    static const struct { const char *key; size_t off; long max; } keys[] = {
        {"n_layer", offsetof(ZnGpt2Shape, n_layer), (ZN_MAX_PARAMS - 4) / PER_BLOCK},
        {"n_head", offsetof(ZnGpt2Shape, n_head), 1 << 12},
        {"n_embd", offsetof(ZnGpt2Shape, n_embd), 1 << 16},
        {"vocab_size", offsetof(ZnGpt2Shape, vocab_size), 1 << 20},
        {"n_positions", offsetof(ZnGpt2Shape, n_positions), 1 << 16},
    };
    const char *eq = memchr(kv, '=', len);
    if (!eq)
        return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s' is not key=value", spec, (int)len, kv);
    size_t klen = (size_t)(eq - kv);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strlen(keys[i].key) != klen || strncmp(kv, keys[i].key, klen)) continue;
        const char *v = eq + 1;
        size_t vlen = len - klen - 1;
        long x = 0;
        if (vlen == 0) x = -1;
        for (size_t j = 0; j < vlen && x >= 0; j++) {
            if (v[j] < '0' || v[j] > '9') x = -1;
            else if (x <= keys[i].max) x = x * 10 + (v[j] - '0');
        }
        if (x < 1)
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': %s '%.*s' is not a positive integer", spec,
                          keys[i].key, (int)vlen, v);
        if (x > keys[i].max)
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': %s %.*s is too large (at most %ld)", spec,
                          keys[i].key, (int)vlen, v, keys[i].max);
        *(int *)((char *)s + keys[i].off) = (int)x;
        return 0;
    }
    return zn_err(err, ZN_E_USAGE,
                  "model spec '%.200s': unknown key '%.*s' (n_layer, n_head, n_embd, vocab_size, n_positions)", spec,
                  (int)klen, kv);
}

/* GPT-2's parameter count of a shape: V*C + P*C + L*(12C^2 + 13C) + 2C */
static double gpt2_count(double L, double C, double V, double P) {
    return V * C + P * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
}

/* --params P (Z-CAP-008): GPT-3's own shape (L layers of width 128 L, heads
 * of 128) when its count is within 1% of P; else, among widths 128 k near
 * it and depths from k/2 to 2k, the shape within 1% whose depth is
 * nearest its width's k (the most GPT-3-like), the nearer count on a tie;
 * a P so small that nothing is within 1% gets the nearest count. */
int zn_gpt3_spec_for(long long P, char *spec, size_t n, ZnErr *err) {
    const int maxl = (ZN_MAX_PARAMS - 4) / PER_BLOCK;
    if (P < 1) return zn_err(err, ZN_E_USAGE, "--params: %lld is not a positive count", P);
    if ((double)P > gpt2_count(maxl, 128.0 * maxl, 50257, 2048))
        return zn_err(err, ZN_E_USAGE, "--params: %lld is past the largest GPT-3 shape zinc builds (%d layers: %.0f)", P,
                      maxl, gpt2_count(maxl, 128.0 * maxl, 50257, 2048));
    const double want = (double)P, tol = 0.01 * want;
    int l0 = (int)cbrt(want / (12.0 * 128 * 128)), bl = 1, bk = 1;
    double bd = -1;   /* the nearest GPT-3 shape (L = k) */
    for (int l = l0 - 1; l <= l0 + 1; l++) {
        if (l < 1 || l > maxl) continue;
        double d = fabs(gpt2_count(l, 128.0 * l, 50257, 2048) - want);
        if (bd < 0 || d < bd) bl = bk = l, bd = d;
    }
    if (bd > tol) {
        int found = 0, bskew = 0;
        for (int k = l0 - 8; k <= l0 + 8; k++) {
            if (k < 1) continue;
            for (int l = k / 2; l <= 2 * k; l++) {
                if (l < 1 || l > maxl) continue;
                double d = fabs(gpt2_count(l, 128.0 * k, 50257, 2048) - want);
                int skew = abs(l - k);
                if (d <= tol && (!found || skew < bskew || (skew == bskew && d < bd))) {
                    bl = l, bk = k, bd = d, bskew = skew;
                    found = 1;
                }
            }
        }
    }
    snprintf(spec, n, "gpt2:n_layer=%d,n_embd=%d,n_head=%d,n_positions=2048", bl, 128 * bk, bk);
    return 0;
}

int zn_gpt2_parse(const char *spec, ZnModel *m, ZnErr *err) {
    memset(m, 0, sizeof *m);
    ZnGpt2Shape s = presets[1].s;   /* gpt2:... starts from GPT-2 124M */
    int found = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(spec, presets[i].name)) { s = presets[i].s; found = 1; }
    if (!found) {
        if (strncmp(spec, "gpt2:", 5))
            return zn_err(err, ZN_E_USAGE,
                          "model spec '%.200s': unknown model (GPT-2: gpt2:key=value,... or a preset gpt2-tiny, gpt2, "
                          "gpt2-medium, gpt2-large, gpt2-xl, gpt3-small, gpt3-medium, gpt3-large, gpt3-xl, "
                          "gpt3-2.7b, gpt3-6.7b, gpt3-13b, gpt3-175b)", spec);
        const char *p = spec + 5;
        for (;;) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            int rc = set_key(spec, p, len, &s, err);
            if (rc) return rc;
            if (!end) break;
            p = end + 1;
        }
    }
    if (s.n_embd % s.n_head)
        return zn_err(err, ZN_E_USAGE, "model spec '%.200s': n_embd %d is not a multiple of n_head %d", spec, s.n_embd,
                      s.n_head);
    m->gpt2 = s;
    build(m);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* initial weights (Hugging Face GPT2PreTrainedModel._init_weights) */

/* A standard normal for element i of the stream key: Marsaglia's polar
 * method on pairs of uniforms at counters (i * 128 + j) * 2 and + 1, the
 * first accepted attempt j (a pure function of (key, i); 128 rejections in
 * a row, probability 1e-86, give 0). */
static float normal_at(uint64_t key, uint64_t i) {
    for (uint64_t j = 0; j < 128; j++) {
        uint64_t c = (i * 128 + j) * 2;
        float u = 2.0f * zn_rng_uniform(key, c) - 1.0f, v = 2.0f * zn_rng_uniform(key, c + 1) - 1.0f;
        float s = u * u + v * v;
        if (s > 0.0f && s < 1.0f) return u * sqrtf(-2.0f * zn_logf(s) / s);
    }
    return 0.0f;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static void gpt2_init_param(const ZnModel *m, int p, uint64_t seed, long lo, long hi, float *out) {
    const char *name = m->params[p].name;
    float fill = -1.0f;   /* LayerNorm weight 1, every bias and LayerNorm bias 0 */
    if (ends_with(name, ".bias")) fill = 0.0f;
    else if (strstr(name, ".ln_")) fill = 1.0f;
    if (fill >= 0.0f) {
        for (long i = lo; i < hi; i++) out[i - lo] = fill;
        return;
    }
    /* normal(0, 0.02); the residual projections 0.02 / sqrt(2 n_layer) */
    float std = 0.02f;
    if (ends_with(name, "c_proj.weight")) std = 0.02f / sqrtf(2.0f * (float)m->gpt2.n_layer);
    uint64_t key = zn_mix64(seed) ^ zn_hash_str(name);
    for (long i = lo; i < hi; i++) out[i - lo] = normal_at(key, (uint64_t)i) * std;
}

/* ------------------------------------------------------------------------ */
/* the run */

struct ZnGpt2Acts {
    int *tok;                      /* input tokens [BT] */
    float **x;                     /* [L+1] residual stream: block inputs, x[L] the last output */
    float **ln1, **qkv, **att, **atty, **res2, **ln2, **fch, **fchg;   /* [L] each */
    float **ln1_mean, **ln1_rstd, **ln2_mean, **ln2_rstd;              /* [L], fp32 */
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *dlogits;
    /* backward: the residual's gradient, one [BT, C] and one [BT, 4C]
       temporary, the LayerNorm input gradient, dqkv, attention scratch */
    float *dres, *dtmp, *dln, *dbig, *dqkv, *datt;
};

#define NPERLAYER 12   /* the per-layer pointer arrays above */

static int gpt2_run_init(ZnModelRun *R, ZnErr *err) {
    const ZnKernels *k = R->k;
    /* the host and both CUDA tables have them (spec Z-CUDA-009); a table
       without them (a new backend) is told here, not by a NULL call */
    const ZnLmKernels *lm = k->lm;
    if (!lm || !lm->embed_fwd || !lm->embed_bwd || !lm->layernorm_fwd || !lm->layernorm_bwd || !lm->attn_fwd ||
        !lm->attn_bwd || !lm->gelu_fwd || !lm->gelu_bwd || !lm->add_bias)
        return zn_err(err, ZN_E_USAGE, "the %s device has no GPT-2 kernels in this build (the MLP runs on it)",
                      R->d->name);
    const int L = R->m->gpt2.n_layer;
    struct ZnGpt2Acts *g = zn_calloc(ZN_HOST_ENGINE, 1, sizeof *g);
    float **arrays = zn_calloc(ZN_HOST_ENGINE, (size_t)NPERLAYER * L + L + 1, sizeof(float *));
    if (!g || !arrays) {
        free(g);
        free(arrays);
        return zn_nomem(err);
    }
    float ***slots[NPERLAYER] = {&g->ln1, &g->qkv, &g->att, &g->atty, &g->res2, &g->ln2,
                                 &g->fch, &g->fchg, &g->ln1_mean, &g->ln1_rstd, &g->ln2_mean, &g->ln2_rstd};
    for (int i = 0; i < NPERLAYER; i++) *slots[i] = arrays + (long)i * L;
    g->x = arrays + (long)NPERLAYER * L;
    R->g = g;
    return 0;
}

static void gpt2_run_free(ZnModelRun *R) {
    if (!R->g) return;
    free(R->g->ln1);   /* the one block of pointer arrays */
    free(R->g);
    R->g = NULL;
}

static int gpt2_run_begin(ZnModelRun *R, const ZnData *data, long first, ZnErr *err) {
    const ZnGpt2Shape *s = &R->m->gpt2;
    struct ZnGpt2Acts *g = R->g;
    const int B = R->B, T = R->m->seq_len, L = s->n_layer, NH = s->n_head;
    const long BT = (long)B * T, C = s->n_embd, V = s->vocab_size;
    if (!data->tokens)
        return zn_err(err, ZN_E_USAGE, "a GPT-2 model trains on text: give --data text:FILE or --data tokens:FILE");
#define ACT(p, n) if (!((p) = zn_run_talloc(R, (n), ZN_MEM_ACTIVATIONS, err))) return err->code
#define STAT(p, n) if (!((p) = zn_run_falloc(R, (n), ZN_MEM_ACTIVATIONS, err))) return err->code
#define WORK(p, n) if (!((p) = zn_run_talloc(R, (n), ZN_MEM_WORKSPACE, err))) return err->code
    if (!(g->tok = (int *)zn_dev_alloc(R->d, (size_t)BT * sizeof(int), ZN_MEM_ACTIVATIONS, err))) return err->code;
    if (!(R->labels = (int *)zn_dev_alloc(R->d, (size_t)BT * sizeof(int), ZN_MEM_ACTIVATIONS, err))) return err->code;
    ACT(g->x[0], BT * C);
    for (int l = 0; l < L; l++) {
        if (R->recompute && l > 0) {   /* one block's activations, shared: backward recomputes them */
            for (int i = 0; i < NPERLAYER; i++) g->ln1[(long)i * L + l] = g->ln1[(long)i * L];
            ACT(g->x[l + 1], BT * C);
            continue;
        }
        ACT(g->ln1[l], BT * C);
        STAT(g->ln1_mean[l], BT);
        STAT(g->ln1_rstd[l], BT);
        ACT(g->qkv[l], BT * 3 * C);
        ACT(g->att[l], (long)B * NH * T * T);
        ACT(g->atty[l], BT * C);
        ACT(g->res2[l], BT * C);
        ACT(g->ln2[l], BT * C);
        STAT(g->ln2_mean[l], BT);
        STAT(g->ln2_rstd[l], BT);
        ACT(g->fch[l], BT * 4 * C);
        ACT(g->fchg[l], BT * 4 * C);
        ACT(g->x[l + 1], BT * C);
    }
    ACT(g->lnf, BT * C);
    STAT(g->lnf_mean, BT);
    STAT(g->lnf_rstd, BT);
    ACT(g->logits, BT * V);
    ACT(g->dlogits, BT * V);
    WORK(g->dres, BT * C);
    WORK(g->dtmp, BT * C);
    WORK(g->dln, BT * C);
    WORK(g->dbig, BT * 4 * C);
    WORK(g->dqkv, BT * 3 * C);
    if (!(g->datt = zn_run_falloc(R, (long)B * NH * T * T, ZN_MEM_WORKSPACE, err))) return err->code;
#undef ACT
#undef STAT
#undef WORK
    for (int b = 0; b < B && !R->d->meta; b++)   /* a meta device's upload reads nothing */
        zn_tokens_window(data->tokens, data->seed, (uint64_t)(first + b), T, R->host_in + (long)b * T,
                         R->host_tgt + (long)b * T);
    R->k->upload(R->d, g->tok, R->host_in, (size_t)BT * sizeof(int));
    R->k->upload(R->d, R->labels, R->host_tgt, (size_t)BT * sizeof(int));
    return 0;
}

/* out[BT, C] = round(LayerNorm(x) with weight W[0] and bias W[1]); the row
   means and rstd kept (fp32) for the backward */
static void layernorm(ZnModelRun *R, int BT, int C, const float *x, float *const *W, float *out, float *mean,
                      float *rstd) {
    R->k->lm->layernorm_fwd(R->d, BT, C, x, W[0], W[1], out, mean, rstd);
    zn_run_round(R, out, (long)BT * C);
}

/* a LayerNorm's backward: dW[0], dW[1] its weight and bias gradients,
   dx = round(its input's gradient) */
static void layernorm_bwd(ZnModelRun *R, int BT, int C, const float *dy, const float *x, float *const *W,
                          const float *mean, const float *rstd, float *const *dW, float *dx) {
    R->k->lm->layernorm_bwd(R->d, BT, C, dy, x, W[0], mean, rstd, dx, dW[0], dW[1]);
    zn_run_round(R, dx, (long)BT * C);
}

/* y[BT, N] = round(x[BT, K] . W[K, N] + b) (a Conv1D) */
static void conv1d(ZnModelRun *R, int BT, int K, int N, const float *x, const float *W, const float *b, float *y) {
    R->k->gemm_nn(R->d, BT, N, K, x, W, y);
    R->k->lm->add_bias(R->d, BT, N, b, y);
    zn_run_round(R, y, (long)BT * N);
}

/* a Conv1D's backward: dW = x^T dy, db = colsum(dy), dx = round(dy W^T) */
static void conv1d_bwd(ZnModelRun *R, int BT, int K, int N, const float *x, const float *W, const float *dy,
                       float *dW, float *db, float *dx) {
    R->k->gemm_tn(R->d, K, N, BT, x, dy, dW);
    R->k->colsum(R->d, BT, N, dy, db);
    R->k->gemm_nt(R->d, BT, K, N, dy, W, NULL, dx);
    zn_run_round(R, dx, (long)BT * K);
}

static void gpt2_run_forward(ZnModelRun *R, int mod, float *const *W) {
    const ZnGpt2Shape *s = &R->m->gpt2;
    const ZnKernels *k = R->k;
    ZnDevice *d = R->d;
    struct ZnGpt2Acts *g = R->g;
    const int B = R->B, T = R->m->seq_len, BT = B * T, C = s->n_embd, L = s->n_layer, V = s->vocab_size;
    if (mod == 0) {
        k->lm->embed_fwd(d, B, T, C, g->tok, W[0], W[1], g->x[0]);
        zn_run_round(R, g->x[0], (long)BT * C);
        return;
    }
    if (mod == 1 + MODS_PER_BLOCK * L) {   /* ln_f */
        layernorm(R, BT, C, g->x[L], W, g->lnf, g->lnf_mean, g->lnf_rstd);
        return;
    }
    if (mod == 2 + MODS_PER_BLOCK * L) {   /* lm_head: logits = lnf wte^T */
        k->gemm_nt(d, BT, V, C, g->lnf, W[0], NULL, g->logits);
        zn_run_round(R, g->logits, (long)BT * V);
        return;
    }
    const int l = (mod - 1) / MODS_PER_BLOCK;
    switch ((mod - 1) % MODS_PER_BLOCK) {
    case 0:   /* ln_1 */
        layernorm(R, BT, C, g->x[l], W, g->ln1[l], g->ln1_mean[l], g->ln1_rstd[l]);
        break;
    case 1:   /* attn.c_attn, then the attention */
        conv1d(R, BT, C, 3 * C, g->ln1[l], W[0], W[1], g->qkv[l]);
        k->lm->attn_fwd(d, B, T, C, s->n_head, g->qkv[l], g->att[l], g->atty[l]);
        zn_run_round(R, g->att[l], (long)B * s->n_head * T * T);
        zn_run_round(R, g->atty[l], (long)BT * C);
        break;
    case 2:   /* attn.c_proj, then the residual: res2 = x + proj */
        conv1d(R, BT, C, C, g->atty[l], W[0], W[1], g->res2[l]);
        k->add(d, R->dt, g->res2[l], g->x[l], (long)BT * C);
        break;
    case 3:   /* ln_2 */
        layernorm(R, BT, C, g->res2[l], W, g->ln2[l], g->ln2_mean[l], g->ln2_rstd[l]);
        break;
    case 4:   /* mlp.c_fc, then the GELU */
        conv1d(R, BT, C, 4 * C, g->ln2[l], W[0], W[1], g->fch[l]);
        k->lm->gelu_fwd(d, (long)BT * 4 * C, g->fch[l], g->fchg[l]);
        zn_run_round(R, g->fchg[l], (long)BT * 4 * C);
        break;
    default:  /* mlp.c_proj, then the residual: x[l+1] = res2 + proj */
        conv1d(R, BT, 4 * C, C, g->fchg[l], W[0], W[1], g->x[l + 1]);
        k->add(d, R->dt, g->x[l + 1], g->res2[l], (long)BT * C);
        break;
    }
}

static float gpt2_run_loss(ZnModelRun *R, float grad_scale) {
    struct ZnGpt2Acts *g = R->g;
    const int BT = R->B * R->m->seq_len, V = R->m->gpt2.vocab_size;
    float loss = R->k->softmax_xent(R->d, BT, V, g->logits, R->labels, grad_scale, g->dlogits);
    zn_run_round(R, g->dlogits, (long)BT * V);
    return loss;
}

static void gpt2_run_backward(ZnModelRun *R, int mod, float *const *W, float *const *dW) {
    const ZnGpt2Shape *s = &R->m->gpt2;
    const ZnKernels *k = R->k;
    ZnDevice *d = R->d;
    struct ZnGpt2Acts *g = R->g;
    const int B = R->B, T = R->m->seq_len, BT = B * T, C = s->n_embd, L = s->n_layer, V = s->vocab_size;
    const long n = (long)BT * C;
    if (mod == 2 + MODS_PER_BLOCK * L) {   /* lm_head: dwte = dlogits^T lnf, dlnf = dlogits wte */
        k->gemm_tn(d, V, C, BT, g->dlogits, g->lnf, dW[0]);
        k->gemm_nn(d, BT, C, V, g->dlogits, W[0], g->dtmp);
        zn_run_round(R, g->dtmp, n);
        return;
    }
    if (mod == 1 + MODS_PER_BLOCK * L) {   /* ln_f: the residual's gradient starts here */
        layernorm_bwd(R, BT, C, g->dtmp, g->x[L], W, g->lnf_mean, g->lnf_rstd, dW, g->dres);
        return;
    }
    if (mod == 0) {
        k->lm->embed_bwd(d, B, T, C, V, s->n_positions, g->tok, g->dres, dW[0], dW[1]);
        return;
    }
    const int l = (mod - 1) / MODS_PER_BLOCK;
    switch ((mod - 1) % MODS_PER_BLOCK) {
    case 5:   /* mlp.c_proj: its output's gradient is the residual's */
        conv1d_bwd(R, BT, 4 * C, C, g->fchg[l], W[0], g->dres, dW[0], dW[1], g->dbig);
        break;
    case 4:   /* the GELU, then mlp.c_fc */
        k->lm->gelu_bwd(d, (long)BT * 4 * C, g->fch[l], g->dbig, g->dbig);
        zn_run_round(R, g->dbig, (long)BT * 4 * C);
        conv1d_bwd(R, BT, C, 4 * C, g->ln2[l], W[0], g->dbig, dW[0], dW[1], g->dtmp);
        break;
    case 3:   /* ln_2, joining the residual */
        layernorm_bwd(R, BT, C, g->dtmp, g->res2[l], W, g->ln2_mean[l], g->ln2_rstd[l], dW, g->dln);
        k->add(d, R->dt, g->dres, g->dln, n);
        break;
    case 2:   /* attn.c_proj */
        conv1d_bwd(R, BT, C, C, g->atty[l], W[0], g->dres, dW[0], dW[1], g->dtmp);
        break;
    case 1:   /* the attention, then attn.c_attn */
        k->lm->attn_bwd(d, B, T, C, s->n_head, g->dtmp, g->qkv[l], g->att[l], g->dqkv, g->datt);
        zn_run_round(R, g->dqkv, (long)BT * 3 * C);
        conv1d_bwd(R, BT, C, 3 * C, g->ln1[l], W[0], g->dqkv, dW[0], dW[1], g->dtmp);
        break;
    default:  /* ln_1, joining the residual */
        layernorm_bwd(R, BT, C, g->dtmp, g->x[l], W, g->ln1_mean[l], g->ln1_rstd[l], dW, g->dln);
        k->add(d, R->dt, g->dres, g->dln, n);
        break;
    }
}

/* the logits [B * T, V] of the last forward */
static const float *gpt2_run_logits(const ZnModelRun *R) { return R->g->logits; }

static void gpt2_run_end(ZnModelRun *R) {
    struct ZnGpt2Acts *g = R->g;
    if (!g) return;
    ZnDevice *d = R->d;
    const int L = R->m->gpt2.n_layer;
    zn_dev_free(d, g->tok);
    g->tok = NULL;
    for (int l = 0; l <= L; l++) {
        zn_run_release(R, g->x[l]);
        g->x[l] = NULL;
    }
    for (int i = 0; i < NPERLAYER; i++) {
        float **a = g->ln1 + (long)i * L;   /* the arrays lie one after another */
        for (int l = 0; l < L; l++) {
            if (!R->recompute || l == 0) zn_run_release(R, a[l]);   /* shared ones freed once */
            a[l] = NULL;
        }
    }
    float **one[] = {&g->lnf, &g->lnf_mean, &g->lnf_rstd, &g->logits, &g->dlogits, &g->dres,
                     &g->dtmp, &g->dln, &g->dbig, &g->dqkv, &g->datt};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        zn_run_release(R, *one[i]);
        *one[i] = NULL;
    }
}

/* in ZnModelOps's order */
const ZnModelOps zn_gpt2_ops = {gpt2_init_param, gpt2_run_init, gpt2_run_free, gpt2_run_begin, gpt2_run_forward,
                                gpt2_run_loss, gpt2_run_backward, gpt2_run_end, gpt2_run_logits};
