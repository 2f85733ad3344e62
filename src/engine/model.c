/* model.c: what every model kind shares: parsing by kind, sizes, the
 * initial weights by kind, and the run (model.h) handing each call to the
 * kind's half (model_mlp.c, model_gpt2.c). */
#include "engine/model.h"
#include "engine/model_run.h"
#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

int zn_model_parse(const char *spec, ZnModel *m, ZnErr *err) {
    if (spec && (!strncmp(spec, "gpt2", 4) || !strncmp(spec, "gpt3-", 5))) return zn_gpt2_parse(spec, m, err);
    return zn_mlp_parse(spec, m, err);
}

int zn_model_set_seq_len(ZnModel *m, long T, ZnErr *err) {
    if (m->kind != ZN_MODEL_GPT2)
        return zn_err(err, ZN_E_USAGE, "--seq-len applies to a language model (gpt2), not to an MLP");
    if (T < 1 || T > m->gpt2.n_positions)
        return zn_err(err, ZN_E_USAGE, "--seq-len %ld: must be 1..%d (the model's n_positions)", T,
                      m->gpt2.n_positions);
    m->seq_len = (int)T;
    return 0;
}

int zn_model_rows_per_sample(const ZnModel *m) { return m->kind == ZN_MODEL_GPT2 ? m->seq_len : 1; }

long zn_model_hidden_size(const ZnModel *m) {
    if (m->kind == ZN_MODEL_GPT2) return m->gpt2.n_embd;
    long h = 0;
    for (int i = 0; i <= m->nlayers; i++)
        if (m->dims[i] > h) h = m->dims[i];
    return h;
}

long zn_model_numel(const ZnModel *m) {
    long n = 0;
    for (int p = 0; p < m->nparams; p++) n += m->params[p].numel;
    return n;
}

static const ZnModelOps *model_ops(const ZnModel *m) { return m->kind == ZN_MODEL_GPT2 ? &zn_gpt2_ops : &zn_mlp_ops; }

void zn_model_init_param(const ZnModel *m, int p, uint64_t seed, long lo, long hi, float *out) {
    if (p < 0 || p >= m->nparams) return;   /* no such param: nothing to fill */
    model_ops(m)->init_param(m, p, seed, lo, hi, out);
}

/* ------------------------------------------------------------------------ */
/* the run */

/* A run's activations come back every micro-step in the same sizes. Freed,
 * they go back to the kernel (glibc maps blocks this large), and allocated
 * again every page faults in anew, zeroed by the kernel and then by the
 * backend: a tenth of a GPT-2 124M step on the host. So on the host backend
 * a released block gives back its charge but keeps its memory, and the next
 * request of the same sizes and category takes it, zero-filled as a new
 * block is. The counters (and every memory report) see the same charges in
 * the same order as with fresh blocks; a simulated capacity fails the same
 * request with the same message. */
struct ZnRunBlock {
    float *p;
    size_t alloc_n, charged_n;
    ZnMemCat cat;
    int busy;   /* handed out (charged); else idle in the pool */
};

/* frees the idle blocks (their charge was given back at release) */
static void pool_drop_idle(ZnModelRun *R) {
    int k = 0;
    for (int i = 0; i < R->npool; i++) {
        if (R->pool[i].busy) R->pool[k++] = R->pool[i];
        else zn_host_free_uncharged(R->pool[i].p);
    }
    R->npool = k;
}

static float *run_alloc(ZnModelRun *R, size_t alloc_n, size_t charged_n, ZnMemCat cat, ZnErr *err) {
    if (!zn_dev_is_host(R->d)) return (float *)zn_dev_alloc_as(R->d, alloc_n, charged_n, cat, err);
    for (int i = 0; i < R->npool; i++) {
        struct ZnRunBlock *b = &R->pool[i];
        if (b->busy || b->alloc_n != alloc_n || b->charged_n != charged_n || b->cat != cat) continue;
        if (zn_mem_charge(R->d, charged_n, cat, err)) return NULL;
        memset(b->p, 0, alloc_n);
        b->busy = 1;
        return b->p;
    }
    /* no idle block fits: the sizes changed (a new micro-batch shape), so
       the idle ones are stale; free them rather than let the pool grow */
    pool_drop_idle(R);
    float *p = (float *)zn_dev_alloc_as(R->d, alloc_n, charged_n, cat, err);
    if (!p) return NULL;
    if (R->npool == R->pool_cap) {   /* no room to track it: a plain block, freed at release */
        int cap = R->pool_cap ? 2 * R->pool_cap : 64;
        struct ZnRunBlock *np = realloc(R->pool, (size_t)cap * sizeof *np);
        if (!np) return p;
        R->pool = np;
        R->pool_cap = cap;
    }
    R->pool[R->npool++] = (struct ZnRunBlock){p, alloc_n, charged_n, cat, 1};
    return p;
}

void zn_run_release(ZnModelRun *R, void *p) {
    if (!p) return;
    for (int i = 0; i < R->npool; i++) {
        struct ZnRunBlock *b = &R->pool[i];
        if (b->p != p || !b->busy) continue;
        zn_mem_uncharge(R->d, b->charged_n, b->cat);
        b->busy = 0;
        return;
    }
    zn_dev_free(R->d, p);
}

float *zn_run_talloc(ZnModelRun *R, long n, ZnMemCat cat, ZnErr *err) {
    size_t k = (size_t)(n > 0 ? n : 1);
    return run_alloc(R, k * sizeof(float), k * zn_dtype_size(R->dt), cat, err);
}

float *zn_run_falloc(ZnModelRun *R, long n, ZnMemCat cat, ZnErr *err) {
    size_t k = (size_t)(n > 0 ? n : 1) * sizeof(float);
    return run_alloc(R, k, k, cat, err);
}

void zn_run_round(ZnModelRun *R, float *x, long n) { R->k->round_dt(R->d, R->dt, x, n); }

ZnModelRun *zn_run_new(const ZnModel *m, ZnDevice *d, ZnDtype dt, int B, ZnErr *err) {
    ZnModelRun *R = zn_calloc(ZN_HOST_ENGINE, 1, sizeof *R);
    if (!R) { zn_nomem(err); return NULL; }
    R->m = m;
    R->ops = model_ops(m);
    R->d = d;
    R->k = d->k;
    R->dt = dt;
    R->B = B;
    /* a meta device's run stages no sample on the host (its kernels read
       none): the host then holds nothing that grows with the micro-batch */
    long rows = d->meta ? 0 : (long)B * zn_model_rows_per_sample(m);
    long xn = m->kind == ZN_MODEL_MLP && !d->meta ? (long)B * m->dims[0] : 0;
    R->host_x = zn_malloc(ZN_HOST_ENGINE, (size_t)(xn + 1) * sizeof(float));
    R->host_in = zn_malloc(ZN_HOST_ENGINE, (size_t)(rows + 1) * sizeof(int));
    R->host_tgt = zn_malloc(ZN_HOST_ENGINE, (size_t)(rows + 1) * sizeof(int));
    if (!R->host_x || !R->host_in || !R->host_tgt) {
        zn_nomem(err);
        zn_run_free(R);
        return NULL;
    }
    if (R->ops->run_init && R->ops->run_init(R, err)) {
        zn_run_free(R);
        return NULL;
    }
    return R;
}

void zn_run_set_recompute(ZnModelRun *R, int on) { R->recompute = on; }

void zn_run_free(ZnModelRun *R) {
    if (!R) return;
    zn_run_end(R);
    pool_drop_idle(R);   /* zn_run_end released every block: all are idle */
    free(R->pool);
    if (R->ops->run_free) R->ops->run_free(R);
    free(R->host_x);
    free(R->host_in);
    free(R->host_tgt);
    free(R);
}

int zn_run_begin(ZnModelRun *R, const ZnData *data, long first, ZnErr *err) {
    return R->ops->begin(R, data, first, err);
}

void zn_run_forward(ZnModelRun *R, int mod, float *const *W) { R->ops->forward(R, mod, W); }

float zn_run_loss(ZnModelRun *R, float grad_scale) { return R->ops->loss(R, grad_scale); }

void zn_run_backward(ZnModelRun *R, int mod, float *const *W, float *const *dW) { R->ops->backward(R, mod, W, dW); }

void zn_run_end(ZnModelRun *R) {
    R->ops->end(R);
    zn_dev_free(R->d, R->labels);
    R->labels = NULL;
}

void zn_run_logits(ZnModelRun *R, long row, long n, float *out) {
    const int V = R->m->kind == ZN_MODEL_GPT2 ? R->m->gpt2.vocab_size : R->m->dims[R->m->nlayers];
    const float *logits = R->ops->logits(R);
    R->k->download(R->d, out, logits + row * V, (size_t)(n * V) * sizeof(float));
}
