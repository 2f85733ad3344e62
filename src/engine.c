/* engine.c: ZeRO stages 0-3 as one SPMD engine (spec Z-ENG-*).
 *
 * What each stage keeps on a rank (Ψ = parameter count, aligned/padded as the
 * layout says, N = world size):
 *   stage 0  full params, full grads, full Adam state; grads all-reduced at the
 *            accumulation boundary; every rank steps everything.
 *   stage 1  full params, full grads; optimizer state and master for its
 *            partition; grads reduce-scattered at the boundary; params
 *            all-gathered after the step.
 *   stage 2  full params; gradient, master and state partitions; grads
 *            reduce-scattered bucket by bucket every micro-step.
 *   stage 3  everything partitioned; params gathered before each layer's
 *            forward and backward and released after; grads reduce-scattered
 *            every micro-step.
 * Averaging: every stage divides the local gradient by N before the sum
 * (DeepSpeed's reduce-scatter path; Z-ENG-010), so that in fp32 without
 * accumulation all stages produce the same bits. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* ---------------------------------------------------------------------- */
/* small helpers */

static float *falloc(ZnEngine *E, long n, ZnMemCat cat, ZnErr *err) {
    return (float *)zn_dev_alloc(E->dev, (size_t)(n > 0 ? n : 1) * sizeof(float), cat, err);
}

static void copy_or_add(float *dst, const float *src, long n, int add) {
    if (add) for (long i = 0; i < n; i++) dst[i] = dst[i] + src[i];
    else memcpy(dst, src, (size_t)n * sizeof(float));
}

/* DeepSpeed's averaging on the reduce-scatter path: divide, then sum. */
static void predivide(const ZnEngine *E, float *x, long n) {
    if (E->cfg->allreduce_sum || E->world == 1) return;
    const float w = (float)E->world;
    for (long i = 0; i < n; i++) x[i] = x[i] / w;
}

static long prefix_count(const long *counts, int r) {
    long s = 0;
    for (int i = 0; i < r; i++) s += counts[i];
    return s;
}

/* offset of param p in model order (concatenated, unpadded) */
static long model_offset(const ZnLayout *L, int p) {
    long off = 0;
    for (int i = 0; i < p; i++) off += L->params[i].numel;
    return off;
}

/* ---------------------------------------------------------------------- */
/* stage 3: gather and release */

static int stage3_gather(ZnEngine *E, int p, ZnErr *err) {
    if (E->full[p]) return 0;
    const ZnLayout *L = &E->L;
    long pn = L->s3_pn[p];
    E->full[p] = falloc(E, pn * E->world, ZN_MEM_PARAMS16, err);
    if (!E->full[p]) return err->code;
    long *counts = malloc((size_t)E->world * sizeof(long));
    if (!counts) return zn_err(err, ZN_E_NOMEM, "out of host memory");
    for (int r = 0; r < E->world; r++) counts[r] = pn;
    int rc = E->comm->all_gather(E->comm, E->param_part + L->s3_off[p], E->full[p], counts,
                                 ZN_F32, "param_gather", err);
    free(counts);
    return rc;
}

static void stage3_release(ZnEngine *E, int p) {
    if (E->persistent[p] || !E->full[p]) return;
    zn_dev_free(E->dev, E->full[p]);
    E->full[p] = NULL;
}

/* DeepSpeed's persistence rule (parameter_offload.mark_persistent_parameters):
 * small params stay gathered; the model-wide budget is walked in model order.
 * The reuse rule (coordinator release): after a layer's forward, its params
 * are kept if their next use (the same layer's backward) comes within
 * max_reuse_distance elements of other layers' params. zinc knows the MLP's
 * schedule up front, so it applies the rule from the first step (DeepSpeed
 * applies it once its trace is recorded). */
static void stage3_plan_residency(ZnEngine *E) {
    const ZnZeroConfig *z = &E->cfg->zero;
    long persisted = 0;
    for (int p = 0; p < E->L.nparams; p++) {
        long n = E->L.params[p].numel;
        E->persistent[p] = 0;
        if (n <= z->param_persistence_threshold && persisted + n <= z->model_persistence_threshold) {
            E->persistent[p] = 1;
            persisted += n;
        }
    }
    const ZnModel *m = E->model;
    for (int l = 0; l < m->nlayers; l++) {
        long between = 0;   /* params of the layers used between fwd(l) and bwd(l) */
        for (int j = l + 1; j < m->nlayers; j++)
            between += 2 * (E->L.params[m->layer_param[j][0]].numel + E->L.params[m->layer_param[j][1]].numel);
        E->keep_after_fwd[l] = between < z->max_reuse_distance;
    }
}

/* ---------------------------------------------------------------------- */
/* gradient reduction */

/* Stage 1/2 bucket in the bucket buffer (flat order): average, reduce-scatter
 * to the owners, and put this rank's slice into its gradient partition. */
static int stage12_reduce_bucket(ZnEngine *E, int b, float *buf, float *part, int add, ZnErr *err) {
    const ZnBucket *bk = &E->L.buckets[b];
    predivide(E, buf, bk->numel);
    long off = prefix_count(bk->counts, E->rank);
    int rc = E->comm->reduce_scatter(E->comm, buf, buf + off, bk->counts, ZN_F32, ZN_SUM,
                                     "grad_reduce", err);
    if (rc) return rc;
    int np = zn_layout_recv_pieces(&E->L, b, E->rank, NULL, 0);
    ZnRecvPiece *pc = malloc((size_t)(np > 0 ? np : 1) * sizeof *pc);
    if (!pc) return zn_err(err, ZN_E_NOMEM, "out of host memory");
    zn_layout_recv_pieces(&E->L, b, E->rank, pc, np);
    for (int i = 0; i < np; i++)
        copy_or_add(part + pc[i].part_off, buf + off + pc[i].recv_off, pc[i].n, add);
    free(pc);
    return 0;
}

/* Stage 3 bucket (rank-major chunks): average, reduce-scatter, accumulate. */
static int stage3_reduce_bucket(ZnEngine *E, int b, int add, ZnErr *err) {
    const ZnBucket *bk = &E->L.buckets[b];
    float *buf = E->bucket_buf;
    predivide(E, buf, bk->numel);
    float *mine = buf + (long)E->rank * bk->block;
    int rc = E->comm->reduce_scatter(E->comm, buf, mine, bk->counts, ZN_F32, ZN_SUM,
                                     "grad_reduce", err);
    if (rc) return rc;
    for (int i = 0; i < bk->nentries; i++) {
        int p = bk->e[i].param;
        copy_or_add(E->grad_part + E->L.s3_off[p], mine + bk->e[i].buf_off, E->L.s3_pn[p], add);
    }
    return 0;
}

/* The gradient hook: called with each param's gradient of this micro-step,
 * in backward order (the order the layout's bucket plan was built in). */
static int grad_hook(ZnEngine *E, int p, const float *g, ZnErr *err) {
    const ZnLayout *L = &E->L;
    long n = L->params[p].numel;
    if (n == 0) return 0;
    if (E->stage <= 1) {   /* accumulate locally; reduce at the boundary */
        copy_or_add(E->flat_grads + L->flat_offset[p], g, n, E->micro > 0);
        return 0;
    }
    if (E->next_bucket >= L->nbuckets)
        return zn_err(err, ZN_E_INTERNAL, "gradient of '%s' arrived after the last bucket", L->params[p].name);
    const ZnBucket *bk = &L->buckets[E->next_bucket];
    const ZnBucketEntry *e = &bk->e[E->next_entry];
    if (e->param != p)
        return zn_err(err, ZN_E_INTERNAL, "gradient of '%s' arrived where the bucket plan expects '%s'",
                      L->params[p].name, L->params[e->param].name);
    if (E->stage == 2) {
        memcpy(E->bucket_buf + e->buf_off, g, (size_t)n * sizeof(float));
        if (e->numel > n)   /* the flat padding rides with the last flat param */
            memset(E->bucket_buf + e->buf_off + n, 0, (size_t)(e->numel - n) * sizeof(float));
    } else {
        long pn = L->s3_pn[p];
        for (int r = 0; r < E->world; r++) {
            long lo = (long)r * pn, cnt = n - lo;
            if (cnt < 0) cnt = 0;
            if (cnt > pn) cnt = pn;
            float *dst = E->bucket_buf + (long)r * bk->block + e->buf_off;
            if (cnt) memcpy(dst, g + lo, (size_t)cnt * sizeof(float));
            if (pn > cnt) memset(dst + cnt, 0, (size_t)(pn - cnt) * sizeof(float));
        }
    }
    if (++E->next_entry == bk->nentries) {
        int b = E->next_bucket++;
        E->next_entry = 0;
        int add = E->micro > 0;
        return E->stage == 2 ? stage12_reduce_bucket(E, b, E->bucket_buf, E->grad_part, add, err)
                             : stage3_reduce_bucket(E, b, add, err);
    }
    return 0;
}

/* Stages 0/1 at the accumulation boundary: reduce the accumulated flat grads
 * bucket by bucket (same bucket plan as the other stages). */
static int stage01_reduce_at_boundary(ZnEngine *E, ZnErr *err) {
    const ZnLayout *L = &E->L;
    for (int b = 0; b < L->nbuckets; b++) {
        const ZnBucket *bk = &L->buckets[b];
        if (bk->flat_lo >= 0) {
            float *region = E->flat_grads + bk->flat_lo;
            long n = bk->flat_hi - bk->flat_lo;
            predivide(E, region, n);
            int rc;
            if (E->stage == 0) {
                rc = E->comm->all_reduce(E->comm, region, n, ZN_F32, ZN_SUM, "grad_reduce", err);
            } else {
                long off = prefix_count(bk->counts, E->rank);
                rc = E->comm->reduce_scatter(E->comm, region, region + off, bk->counts, ZN_F32,
                                             ZN_SUM, "grad_reduce", err);
            }
            if (rc) return rc;
        } else {   /* stage 1 with round robin: params of a bucket are not adjacent */
            for (int i = 0; i < bk->nentries; i++) {
                const ZnBucketEntry *e = &bk->e[i];
                memcpy(E->bucket_buf + e->buf_off, E->flat_grads + L->flat_offset[e->param],
                       (size_t)e->numel * sizeof(float));
            }
            int rc = stage12_reduce_bucket(E, b, E->bucket_buf, E->grad_part, 0, err);
            if (rc) return rc;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* forward and backward of one micro-batch */

static float *param_ptr(ZnEngine *E, int p) {
    return E->stage == 3 ? E->full[p] : E->flat_params + E->L.flat_offset[p];
}

static int micro_step(ZnEngine *E, long first_sample, float grad_scale, float *loss, ZnErr *err) {
    const ZnModel *m = E->model;
    const int B = (int)E->cfg->micro_batch, nl = m->nlayers, C = m->dims[nl];
    int rc = 0;
    /* acts[0] = input, acts[l+1] = output of layer l (ReLU output, logits last) */
    float *acts[ZN_MAX_LAYERS + 1] = {0};
    float *dbuf[2] = {0}, *yscratch = NULL;
    int *labels = (int *)zn_dev_alloc(E->dev, (size_t)B * sizeof(int), ZN_MEM_ACTIVATIONS, err);
    long maxw = 0;
    for (int l = 0; l <= nl; l++) if (m->dims[l] > maxw) maxw = m->dims[l];
    if (!labels) return err->code;
    for (int l = 0; l <= nl; l++)
        if (!(acts[l] = falloc(E, (long)B * m->dims[l], ZN_MEM_ACTIVATIONS, err))) { rc = err->code; goto done; }
    for (int i = 0; i < 2; i++)
        if (!(dbuf[i] = falloc(E, (long)B * maxw, ZN_MEM_ACTIVATIONS, err))) { rc = err->code; goto done; }
    if (!(yscratch = falloc(E, (long)B * maxw, ZN_MEM_WORKSPACE, err))) { rc = err->code; goto done; }

    zn_data_batch(E->data, first_sample, B, acts[0], labels);

    for (int l = 0; l < nl; l++) {
        int pw = m->layer_param[l][0], pb = m->layer_param[l][1];
        if (E->stage == 3 && ((rc = stage3_gather(E, pw, err)) || (rc = stage3_gather(E, pb, err)))) goto done;
        int last = l == nl - 1;
        zn_layer_forward(E->k, m, l, B, param_ptr(E, pw), param_ptr(E, pb), acts[l],
                         last ? acts[l + 1] : yscratch, last ? NULL : acts[l + 1]);
        if (E->stage == 3 && !E->keep_after_fwd[l]) { stage3_release(E, pw); stage3_release(E, pb); }
    }

    *loss = E->k->softmax_xent(B, C, acts[nl], labels, grad_scale, dbuf[0]);

    float *dout = dbuf[0];
    for (int l = nl - 1; l >= 0; l--) {
        int pw = m->layer_param[l][0], pb = m->layer_param[l][1];
        if (E->stage == 3 && ((rc = stage3_gather(E, pw, err)) || (rc = stage3_gather(E, pb, err)))) goto done;
        long nw = E->L.params[pw].numel;
        float *dx = l > 0 ? (dout == dbuf[0] ? dbuf[1] : dbuf[0]) : NULL;
        zn_layer_backward(E->k, m, l, B, param_ptr(E, pw), acts[l], l == nl - 1 ? NULL : acts[l + 1],
                          dout, E->grad_scratch, E->grad_scratch + nw, dx, yscratch);
        if (E->stage == 3) { stage3_release(E, pw); stage3_release(E, pb); }
        /* backward order: bias, then weight (reverse model order) */
        if ((rc = grad_hook(E, pb, E->grad_scratch + nw, err))) goto done;
        if ((rc = grad_hook(E, pw, E->grad_scratch, err))) goto done;
        dout = dx;
    }
    if (E->stage >= 2 && E->next_bucket != E->L.nbuckets) {
        rc = zn_err(err, ZN_E_INTERNAL, "backward ended with %d of %d buckets reduced",
                    E->next_bucket, E->L.nbuckets);
        goto done;
    }
    E->next_bucket = 0;
    E->next_entry = 0;
done:
    zn_dev_free(E->dev, labels);
    for (int l = 0; l <= nl; l++) zn_dev_free(E->dev, acts[l]);
    zn_dev_free(E->dev, dbuf[0]);
    zn_dev_free(E->dev, dbuf[1]);
    zn_dev_free(E->dev, yscratch);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* the optimizer step */

/* Global norm of the averaged gradient over every rank's partition. */
static int global_norm(ZnEngine *E, double *norm, ZnErr *err) {
    ZnAbsMax am = zn_absmax(E->grad_part, E->part_n);
    float mx = am.nonfinite ? INFINITY : am.maxabs;
    if (E->stage > 0) {   /* stage 0: every rank already holds the whole gradient */
        int rc = E->comm->all_reduce(E->comm, &mx, 1, ZN_F32, ZN_MAX, "norm", err);
        if (rc) return rc;
    }
    if (!isfinite(mx)) { *norm = -1.0; return 0; }   /* DeepSpeed masks a non-finite norm to -1 */
    int shift = zn_norm_shift(mx);
    uint64_t mine[2] = {0, 0};
    zn_sumsq_fixed(E->grad_part, E->part_n, shift, &mine[0], &mine[1]);
    uint64_t hi = mine[0], lo = mine[1];
    if (E->stage > 0) {
        uint64_t *all = malloc((size_t)E->world * 2 * sizeof(uint64_t));
        long *counts = malloc((size_t)E->world * sizeof(long));
        if (!all || !counts) { free(all); free(counts); return zn_err(err, ZN_E_NOMEM, "out of host memory"); }
        for (int r = 0; r < E->world; r++) counts[r] = 2;
        int rc = E->comm->all_gather(E->comm, mine, all, counts, ZN_U64, "norm", err);
        hi = lo = 0;
        for (int r = 0; r < E->world && !rc; r++) zn_u128_add(&hi, &lo, all[2 * r], all[2 * r + 1]);
        free(all);
        free(counts);
        if (rc) return rc;
    }
    *norm = zn_norm_from_fixed(hi, lo, shift);
    return 0;
}

static int optimizer_step(ZnEngine *E, ZnStepResult *res, ZnErr *err) {
    const ZnConfig *cfg = E->cfg;
    double norm = 0.0;
    int rc = global_norm(E, &norm, err);
    if (rc) return rc;
    /* unscale and clip in one multiplier (DeepSpeed unscale_and_clip_grads) */
    double combined = 1.0;
    if (cfg->gradient_clipping > 0.0 && norm >= 0.0) {
        double c = (norm + 1e-6) / cfg->gradient_clipping;
        if (c > 1.0) combined = c;
    }
    float mul = combined != 1.0 ? (float)(1.0 / combined) : 1.0f;
    E->opt_step++;
    ZnAdamParams hp = E->adam;
    if (E->stage == 3) {   /* one optimizer group per sub-group */
        const ZnLayout *L = &E->L;
        for (int s = 0; s < L->nsubgroups; s++) {
            int p0 = L->subgroup_first[s], p1 = L->subgroup_first[s + 1];
            if (p1 <= p0) continue;
            long lo = L->s3_off[p0], hi = L->s3_off[p1 - 1] + L->s3_pn[p1 - 1];
            zn_adam_step(hi - lo, E->master + lo, E->grad_part + lo, E->exp_avg + lo,
                         E->exp_avg_sq + lo, &hp, E->opt_step, mul);
        }
    } else {
        zn_adam_step(E->part_n, E->master, E->grad_part, E->exp_avg, E->exp_avg_sq, &hp,
                     E->opt_step, mul);
    }
    /* publish the new weights */
    if (E->stage == 1 || E->stage == 2) {
        const ZnLayout *L = &E->L;
        float *mine = E->flat_params + (long)E->rank * L->part_numel;
        memcpy(mine, E->master, (size_t)L->part_numel * sizeof(float));
        long *counts = malloc((size_t)E->world * sizeof(long));
        if (!counts) return zn_err(err, ZN_E_NOMEM, "out of host memory");
        for (int r = 0; r < E->world; r++) counts[r] = L->part_numel;
        rc = E->comm->all_gather(E->comm, mine, E->flat_params, counts, ZN_F32, "param_gather", err);
        free(counts);
        if (rc) return rc;
    } else if (E->stage == 3) {
        memcpy(E->param_part, E->master, (size_t)E->part_n * sizeof(float));
        for (int p = 0; p < E->L.nparams; p++) {   /* DeepSpeed _post_step: re-gather persistent params */
            if (!E->persistent[p]) continue;
            zn_dev_free(E->dev, E->full[p]);
            E->full[p] = NULL;
            E->persistent[p] = 0;
            rc = stage3_gather(E, p, err);
            E->persistent[p] = 1;
            if (rc) return rc;
        }
    }
    res->grad_norm = norm;
    res->lr = hp.lr;
    res->skipped = 0;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* public */

int zn_engine_train_step(ZnEngine *E, ZnStepResult *res, ZnErr *err) {
    const ZnConfig *cfg = E->cfg;
    const long ga = cfg->grad_accum, mb = cfg->micro_batch;
    const float grad_scale = (float)(1.0 / ((double)mb * (double)ga));
    float *losses = malloc((size_t)ga * sizeof(float));
    float *all = malloc((size_t)ga * E->world * sizeof(float));
    double *ordered = malloc((size_t)ga * E->world * sizeof(double));
    long *counts = malloc((size_t)E->world * sizeof(long));
    int rc = 0;
    if (!losses || !all || !ordered || !counts) { rc = zn_err(err, ZN_E_NOMEM, "out of host memory"); goto out; }
    memset(res, 0, sizeof *res);
    for (E->micro = 0; E->micro < ga; E->micro++) {
        /* micro-batch m of the global batch goes to rank m mod N at micro-step m div N */
        long m = (long)E->micro * E->world + E->rank;
        long first = E->global_step * cfg->train_batch_size + m * mb;
        if ((rc = micro_step(E, first, grad_scale, &losses[E->micro], err))) goto out;
    }
    E->micro = ga - 1;   /* the boundary belongs to the last micro-step */
    if (E->stage <= 1 && (rc = stage01_reduce_at_boundary(E, err))) goto out;
    E->micro = 0;
    if ((rc = optimizer_step(E, res, err))) goto out;
    /* the reported loss: mean over all micro-batches of the global batch,
       summed in the fixed tree over micro-batch index */
    for (int r = 0; r < E->world; r++) counts[r] = ga;
    if ((rc = E->comm->all_gather(E->comm, losses, all, counts, ZN_F32, "loss", err))) goto out;
    for (int r = 0; r < E->world; r++)
        for (long s = 0; s < ga; s++) ordered[s * E->world + r] = all[r * ga + s];
    res->loss = zn_tree_sum_f64(ordered, (int)(ga * E->world)) / (double)(ga * E->world);
    E->global_step++;
    E->global_samples += cfg->train_batch_size;
    res->samples = E->global_samples;
out:
    free(losses);
    free(all);
    free(ordered);
    free(counts);
    if (rc) zn_err_prefix(err, "rank %d, step %ld: ", E->rank, E->global_step + 1);
    return rc;
}

int zn_engine_gather_params(ZnEngine *E, float *out, ZnErr *err) {
    const ZnLayout *L = &E->L;
    int rc = 0;
    long *counts = malloc((size_t)E->world * sizeof(long));
    if (!counts) return zn_err(err, ZN_E_NOMEM, "out of host memory");
    if (E->stage == 0) {
        for (int p = 0; p < L->nparams; p++)
            memcpy(out + model_offset(L, p), E->flat_params + L->flat_offset[p],
                   (size_t)L->params[p].numel * sizeof(float));
    } else if (E->stage <= 2) {
        float *tmp = malloc((size_t)L->aligned_numel * sizeof(float));
        if (!tmp) { free(counts); return zn_err(err, ZN_E_NOMEM, "out of host memory"); }
        for (int r = 0; r < E->world; r++) counts[r] = L->part_numel;
        rc = E->comm->all_gather(E->comm, E->master, tmp, counts, ZN_F32, "digest", err);
        for (int p = 0; p < L->nparams && !rc; p++)
            memcpy(out + model_offset(L, p), tmp + L->flat_offset[p], (size_t)L->params[p].numel * sizeof(float));
        free(tmp);
    } else {
        for (int p = 0; p < L->nparams && !rc; p++) {
            long pn = L->s3_pn[p];
            float *tmp = malloc((size_t)(pn * E->world + 1) * sizeof(float));
            if (!tmp) { rc = zn_err(err, ZN_E_NOMEM, "out of host memory"); break; }
            for (int r = 0; r < E->world; r++) counts[r] = pn;
            rc = E->comm->all_gather(E->comm, E->master + L->s3_off[p], tmp, counts, ZN_F32, "digest", err);
            if (!rc) memcpy(out + model_offset(L, p), tmp, (size_t)L->params[p].numel * sizeof(float));
            free(tmp);
        }
    }
    free(counts);
    return rc;
}

uint64_t zn_digest(const float *params, long n) {
    const unsigned char *b = (const unsigned char *)params;
    uint64_t h = 0xcbf29ce484222325ull;
    for (long i = 0; i < n * 4; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

int zn_engine_init(ZnEngine *E, const ZnConfig *cfg, const ZnModel *model, const ZnData *data,
                   ZnComm *comm, ZnDevice *dev, ZnErr *err) {
    memset(E, 0, sizeof *E);
    E->cfg = cfg;
    E->model = model;
    E->data = data;
    E->comm = comm;
    E->dev = dev;
    E->k = dev->k;
    E->rank = comm->rank;
    E->world = comm->world;
    E->stage = cfg->zero.stage;
    E->adam = (ZnAdamParams){cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay,
                             cfg->adamw, cfg->bias_correction};
    ZnLayoutOpts lo = {cfg->zero.round_robin_gradients, cfg->zero.sub_group_size,
                       cfg->zero.reduce_bucket_size};
    int rc = zn_layout_build(&E->L, model->params, model->nparams, E->world, E->stage, &lo, err);
    if (rc) return rc;
    const ZnLayout *L = &E->L;
    const uint64_t seed = (uint64_t)cfg->seed;
    long maxlayer = 0;
    for (int l = 0; l < model->nlayers; l++) {
        long n = L->params[model->layer_param[l][0]].numel + L->params[model->layer_param[l][1]].numel;
        if (n > maxlayer) maxlayer = n;
    }
    if (!(E->grad_scratch = falloc(E, maxlayer, ZN_MEM_WORKSPACE, err))) goto fail;

    if (E->stage <= 2) {
        if (!(E->flat_params = falloc(E, L->aligned_numel, ZN_MEM_PARAMS16, err))) goto fail;
        for (int p = 0; p < L->nparams; p++)
            zn_model_init_param(model, p, seed, 0, L->params[p].numel, E->flat_params + L->flat_offset[p]);
    }
    if (E->stage <= 1 && !(E->flat_grads = falloc(E, L->aligned_numel, ZN_MEM_GRADS, err))) goto fail;

    long bucket_need = 0;
    for (int b = 0; b < L->nbuckets; b++)
        if (L->buckets[b].numel > bucket_need) bucket_need = L->buckets[b].numel;
    int needs_bucket = E->stage >= 2 || (E->stage == 1 && cfg->zero.round_robin_gradients);
    if (needs_bucket && !(E->bucket_buf = falloc(E, bucket_need, ZN_MEM_BUCKETS, err))) goto fail;
    E->bucket_cap = bucket_need;

    if (E->stage == 0) {
        E->part_n = L->aligned_numel;
        E->master = E->flat_params;   /* fp32 stage 0 steps the model weights themselves */
        E->grad_part = E->flat_grads;
    } else if (E->stage <= 2) {
        E->part_n = L->part_numel;
        if (!(E->master = falloc(E, E->part_n, ZN_MEM_MASTER32, err))) goto fail;
        memcpy(E->master, E->flat_params + (long)E->rank * L->part_numel, (size_t)E->part_n * sizeof(float));
        if (E->stage == 1) E->grad_part = E->flat_grads + (long)E->rank * L->part_numel;
        else if (!(E->grad_part = falloc(E, E->part_n, ZN_MEM_GRADS, err))) goto fail;
    } else {
        E->part_n = L->s3_rank_numel;
        if (!(E->param_part = falloc(E, E->part_n, ZN_MEM_PARAMS16, err))) goto fail;
        if (!(E->master = falloc(E, E->part_n, ZN_MEM_MASTER32, err))) goto fail;
        if (!(E->grad_part = falloc(E, E->part_n, ZN_MEM_GRADS, err))) goto fail;
        for (int p = 0; p < L->nparams; p++) {
            long lo2, hi2, off;
            zn_layout_owned(L, p, E->rank, &lo2, &hi2, &off);
            if (hi2 > lo2) zn_model_init_param(model, p, seed, lo2, hi2, E->param_part + off);
        }
        memcpy(E->master, E->param_part, (size_t)E->part_n * sizeof(float));
        E->full = calloc((size_t)L->nparams + 1, sizeof(float *));
        E->persistent = calloc((size_t)L->nparams + 1, sizeof(int));
        E->keep_after_fwd = calloc((size_t)model->nlayers + 1, sizeof(int));
        if (!E->full || !E->persistent || !E->keep_after_fwd) { zn_err(err, ZN_E_NOMEM, "out of host memory"); goto fail; }
        stage3_plan_residency(E);
        for (int p = 0; p < L->nparams; p++) {
            if (!E->persistent[p]) continue;
            E->persistent[p] = 0;   /* gather once now, then keep */
            rc = stage3_gather(E, p, err);
            E->persistent[p] = 1;
            if (rc) goto fail;
        }
    }
    if (!(E->exp_avg = falloc(E, E->part_n, ZN_MEM_EXP_AVG, err))) goto fail;
    if (!(E->exp_avg_sq = falloc(E, E->part_n, ZN_MEM_EXP_AVG_SQ, err))) goto fail;
    return 0;
fail:
    rc = err->code ? err->code : ZN_E_INTERNAL;
    zn_engine_free(E);
    return rc;
}

void zn_engine_free(ZnEngine *E) {
    if (E->full) {
        for (int p = 0; p < E->L.nparams; p++) zn_dev_free(E->dev, E->full[p]);
        free(E->full);
    }
    free(E->persistent);
    free(E->keep_after_fwd);
    if (E->dev) {
        if (E->master != E->flat_params) zn_dev_free(E->dev, E->master);
        if (E->stage >= 2) zn_dev_free(E->dev, E->grad_part);
        zn_dev_free(E->dev, E->flat_params);
        zn_dev_free(E->dev, E->flat_grads);
        zn_dev_free(E->dev, E->param_part);
        zn_dev_free(E->dev, E->exp_avg);
        zn_dev_free(E->dev, E->exp_avg_sq);
        zn_dev_free(E->dev, E->bucket_buf);
        zn_dev_free(E->dev, E->grad_scratch);
    }
    zn_layout_free(&E->L);
    memset(E, 0, sizeof *E);
}
