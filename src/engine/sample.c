/* sample.c: generation from a GPT-2's weights (sample.h, spec
 * Z-SAMPLE-002..004). The forward is the engine's own module code
 * (zn_run_*) on the host device, in fp32, batch 1: the window is handed
 * over as token data of exactly T + 1 tokens, whose only window starts at
 * 0 whatever the seed (data_text.h: starts are mod n - T). */
#include "engine/sample.h"
#include "engine/data_text.h"
#include "core/alloc.h"
#include "core/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cand_cmp(const void *a, const void *b) {
    const ZnSampleCand *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

int zn_sample_pick(const float *logits, int V, float temperature, int top_k, uint64_t seed, uint64_t pos,
                   ZnSampleCand *c) {
    if (temperature <= 0.0f) {   /* greedy: the first maximum */
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    for (int i = 0; i < V; i++) {
        c[i].l = isnan(logits[i]) ? -INFINITY : logits[i];
        c[i].id = i;
    }
    qsort(c, (size_t)V, sizeof *c, cand_cmp);
    const int k = top_k > 0 && top_k < V ? top_k : V;
    double total = 0.0;
    for (int i = 0; i < k; i++) total += exp(((double)c[i].l - (double)c[0].l) / temperature);
    const double target = (double)zn_rng_uniform(zn_mix64(seed ^ ZN_SAMPLE_SALT), pos) * total;
    double run = 0.0;
    for (int i = 0; i < k; i++) {
        run += exp(((double)c[i].l - (double)c[0].l) / temperature);
        if (run > target) return c[i].id;
    }
    return c[k - 1].id;
}

int zn_sample_forward(ZnModel *m, float *weights, const int *tok, int T, int row, int n, float *out, ZnErr *err) {
    int rc = zn_model_set_seq_len(m, T, err);
    if (rc) return rc;
    ZnTokens data_tok;
    memset(&data_tok, 0, sizeof data_tok);
    data_tok.tok = zn_calloc(ZN_HOST_APP, (size_t)T + 1, sizeof(uint16_t));
    if (!data_tok.tok) return zn_nomem(err);
    for (int i = 0; i < T; i++) data_tok.tok[i] = (uint16_t)tok[i];   /* token T: a target nobody reads */
    data_tok.n = T + 1;
    data_tok.vocab = m->gpt2.vocab_size;
    ZnData data;
    memset(&data, 0, sizeof data);
    data.tokens = &data_tok;
    ZnDevice dev;
    zn_device_host_init(&dev);
    ZnModelRun *R = zn_run_new(m, &dev, ZN_F32, 1, err);
    rc = R ? zn_run_begin(R, &data, 0, err) : err->code;
    if (!rc) {
        long off[ZN_MAX_PARAMS], o = 0;
        for (int p = 0; p < m->nparams; p++) { off[p] = o; o += m->params[p].numel; }
        for (int mod = 0; mod < m->nmodules; mod++) {
            const ZnModule *md = &m->modules[mod];
            float *W[2] = {NULL, NULL};
            for (int k = 0; k < md->nparams; k++) W[k] = weights + off[md->param[k]];
            zn_run_forward(R, mod, W);
        }
        zn_run_logits(R, row, n, out);
    }
    zn_run_free(R);
    free(data_tok.tok);
    return rc;
}

int zn_sample_generate(ZnModel *m, float *weights, int *tok, long n, const ZnSampleOpts *o,
                       void (*emit)(int token, void *ctx), void *ctx, ZnErr *err) {
    const int V = m->gpt2.vocab_size, P = m->gpt2.n_positions;
    float *logits = zn_malloc(ZN_HOST_APP, (size_t)V * sizeof(float));
    ZnSampleCand *cand = zn_malloc(ZN_HOST_APP, (size_t)V * sizeof *cand);
    int rc = logits && cand ? 0 : zn_nomem(err);
    for (long i = 0; !rc && i < o->max_new; i++) {
        const long len = n + i;
        const int T = len < P ? (int)len : P;
        rc = zn_sample_forward(m, weights, tok + len - T, T, T - 1, 1, logits, err);
        if (rc) break;
        tok[len] = zn_sample_pick(logits, V, o->temperature, o->top_k, o->seed, (uint64_t)len, cand);
        if (emit) emit(tok[len], ctx);
    }
    free(logits);
    free(cand);
    return rc;
}
