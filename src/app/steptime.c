/* steptime.c: the step-time model of steptime.h (spec Z-TIME-*). */
#include "app/steptime.h"
#include "core/plan.h"
#include <string.h>

/* The latency of one call in group g: a chunk goes once around the ring
 * (twice for an all-reduce: reduce-scatter then all-gather), paying alpha
 * per hop, the inter-node alpha on the hops from one node to the next
 * (members j*stride, j = 0..n-1, and back to 0). */
static double ring_latency(ZnCollOp op, ZnGroup g, int per_node, int one_node, const ZnMachine *m) {
    if (g.size <= 1) return 0.0;
    long cross = 0;
    for (int j = 0; j < g.size && !one_node; j++) {
        long a = (long)j * g.stride, b = (long)((j + 1) % g.size) * g.stride;
        cross += a / per_node != b / per_node;
    }
    double hops = (double)(g.size - cross) * m->intra.alpha + (double)cross * m->inter.alpha;
    return op == ZN_OP_ALL_REDUCE || op == ZN_OP_BARRIER ? 2.0 * hops : hops;
}

/* what may run under the phase's compute (steptime.h's overlap rules) */
static int may_overlap(const ZnRunOpts *o, int ph, const char *tag) {
    const ZnZeroConfig *z = &o->cfg.zero;
    if (ph == ZN_PH_STEP) return 0;
    if (!strcmp(tag, "param_gather")) return z->prefetch_bucket_size > 0;
    if (!strcmp(tag, "grad_reduce")) return ph == ZN_PH_BACKWARD && z->overlap_comm > 0;
    return 0;
}

int zn_step_time(const ZnRunOpts *o, const ZnDryRun *r, const ZnMachine *m, ZnStepTime *t, ZnErr *err) {
    memset(t, 0, sizeof *t);
    const int N = r->world.size, P = r->world.per_node;
    if (!r->stepped) return zn_err(err, ZN_E_USAGE, "a step time needs a dry run with one step (--steps 1)");
    if (P != N && P != m->gpus_per_node)
        return zn_err(err, ZN_E_USAGE, "the run puts %d ranks on a node and machine '%s' has %d GPUs per node", P,
                      m->name, m->gpus_per_node);
    if (P == N && N > m->gpus_per_node)
        return zn_err(err, ZN_E_USAGE, "%d ranks on one node, and machine '%s' has %d GPUs per node", N, m->name,
                      m->gpus_per_node);
    const double es = (double)zn_dtype_size(o->cfg.model_dtype);
    /* 16-bit GEMMs run on the tensor cores, fp32 ones (no TF32) beside them */
    t->device_flops = o->cfg.model_dtype == ZN_F32 ? m->device_flops_fp32 : m->device_flops;
    const ZnZeroConfig *z = &o->cfg.zero;
    double ovl[ZN_PH_N] = {0}, fixed[ZN_PH_N] = {0};
    for (int ph = 0; ph < ZN_PH_N; ph++) {
        const ZnPhaseStats *s = &r->ph[ph];
        /* the device: GEMM FLOPs at the GEMM rate, every other kernel at
           memory speed; Adam reads and writes three fp32 states and reads
           the gradient and writes the 16-bit copy */
        double bytes = s->dev.mem_elems * es + s->dev.opt_elems * (24.0 + 2.0 * es);
        t->compute[ph] = s->dev.flops / t->device_flops + bytes / m->device_mem_bw;
        t->compute[ph] += s->host.opt_elems / m->host_adam_rate;   /* the CPU optimizer (offload) */
        t->flops += s->dev.flops;
        /* copies between host and device: the gradients' way down in the
           backward may overlap (overlap_comm), parameter fetches with the
           prefetch; the step's copies cannot */
        const double up = s->h2d / m->h2d_bw, down = s->d2h / m->h2d_bw;
        const int up_ovl = ph != ZN_PH_STEP && z->prefetch_bucket_size > 0;
        const int down_ovl = ph == ZN_PH_BACKWARD && z->overlap_comm > 0;
        t->copies[ph] = up + down;
        ovl[ph] += (up_ovl ? up : 0.0) + (down_ovl ? down : 0.0);
        fixed[ph] += (up_ovl ? 0.0 : up) + (down_ovl ? 0.0 : down);
    }
    /* NVMe: parameter reads with the forward and backward fetches, the
       optimizer's read and write back and the parameters' write in the step */
    if (r->nvme_read > 0 || r->nvme_write > 0) {
        const ZnMemStats *nv = &r->init[ZN_DRY_NVME];
        double p16 = (double)nv->cur[ZN_MEM_PARAMS16];
        double ga = (double)o->cfg.grad_accum;
        double rd[ZN_PH_N] = {p16 * ga, p16 * ga, r->nvme_read - 2.0 * p16 * ga};
        double wr[ZN_PH_N] = {0, 0, r->nvme_write};
        for (int ph = 0; ph < ZN_PH_N; ph++) {
            t->nvme[ph] = (rd[ph] + wr[ph]) / m->nvme_bw;
            if (ph != ZN_PH_STEP && z->prefetch_bucket_size > 0) ovl[ph] += t->nvme[ph];
            else fixed[ph] += t->nvme[ph];
        }
    }
    for (int k = 0; k < r->calls.n; k++) {
        const ZnMetaClass *c = &r->calls.cls[k];
        double lat = (double)c->calls * ring_latency(c->op, c->grp, P, P == N, m);
        /* a rank's bytes by link as the report prints them (the node's
           mean: each GPU is its node's exit for its share of the rings) */
        double intra, inter;
        zn_meta_link_bytes(c, P, N, &intra, &inter);
        double ti = intra / m->intra.beta, tx = c->node_inter / ((double)P * m->inter.beta);
        double bw = ti > tx ? ti : tx;
        t->latency[c->phase] += lat;
        t->intra[c->phase] += ti;
        t->inter[c->phase] += tx;
        if (may_overlap(o, c->phase, c->tag)) ovl[c->phase] += lat + bw;
        else fixed[c->phase] += lat + bw;
    }
    for (int ph = 0; ph < ZN_PH_N; ph++) {
        if (!m->overlap) {   /* the machine's collectives stop its compute */
            fixed[ph] += ovl[ph];
            ovl[ph] = 0;
        }
        t->comm[ph] = ovl[ph] + fixed[ph];
        t->overlap[ph] = ovl[ph];
        double spill = ovl[ph] - t->compute[ph];
        t->exposed[ph] = fixed[ph] + (spill > 0 ? spill : 0.0);
        t->total[ph] = t->compute[ph] + t->exposed[ph];
        t->step_s += t->total[ph];
    }
    const double samples = (double)o->cfg.train_batch_size;
    if (t->step_s > 0) {
        t->tflops_per_gpu = t->flops / t->step_s / 1e12;
        t->samples_per_s = samples / t->step_s;
        if (o->model.kind == ZN_MODEL_GPT2) t->tokens_per_s = t->samples_per_s * o->model.seq_len;
    }
    return 0;
}
