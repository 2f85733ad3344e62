/* fetch.c: the trace of module visits and stage 3's parameter fetching
 * over it (fetch.h; spec Z-S3-001..007). The rules are DeepSpeed's
 * (runtime/zero/partitioned_param_coordinator.py, parameter_offload.py):
 *
 *   persistence  a param of at most stage3_param_persistence_threshold
 *                elements (while the model-wide total stays within
 *                stage3_model_persistence_threshold, walked in model order)
 *                is gathered once and never released (all of them
 *                in one coalesced call, at init and after each step);
 *   trace        the first micro-step after init records the visit order:
 *                during it every module's params are released after each
 *                visit, and nothing is prefetched;
 *   reuse        afterwards, after visit k a param is kept if it is used
 *                again before the modules visited in between hold
 *                stage3_max_reuse_distance elements (0: always release);
 *   prefetch     after each fetch, the params of the following visits are
 *                gathered ahead, walking the trace from where the last
 *                prefetch stopped, while the elements prefetched stay below
 *                min(stage3_max_live_parameters - elements gathered,
 *                stage3_prefetch_bucket_size); a prefetched param is not
 *                released before its use.
 *
 * They move bytes and memory, never values: every setting gives the same
 * bits. */
#include "engine/fetch.h"
#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

static long module_numel(const ZnEngine *E, int i) {
    const ZnModule *md = &E->model->modules[i];
    long n = 0;
    for (int q = 0; q < md->nparams; q++) n += E->L.params[md->param[q]].numel;
    return n;
}

/* The visits: modules forward in order; backward in reverse, a checkpointed
 * block's modules run forward again just before its last module's backward. */
static int build_trace(ZnEngine *E, ZnErr *err) {
    const ZnModel *m = E->model;
    const int n = m->nmodules, ckpt = E->cfg->activation_checkpointing;
    E->fetch.trace = zn_calloc(ZN_HOST_ENGINE, (size_t)3 * n + 1, sizeof *E->fetch.trace);
    if (!E->fetch.trace) return zn_nomem(err);
    int k = 0;
    for (int i = 0; i < n; i++) E->fetch.trace[k++] = (ZnVisit){i, ZN_VISIT_FWD};
    for (int i = n - 1; i >= 0; i--) {
        int b = m->modules[i].block;
        if (ckpt && b >= 0 && (i == n - 1 || m->modules[i + 1].block != b)) {
            int first = i;
            while (first > 0 && m->modules[first - 1].block == b) first--;
            for (int j = first; j <= i; j++) E->fetch.trace[k++] = (ZnVisit){j, ZN_VISIT_RECOMPUTE};
        }
        E->fetch.trace[k++] = (ZnVisit){i, ZN_VISIT_BWD};
    }
    E->fetch.ntrace = k;
    return 0;
}

/* The persistence rule, and the reuse rule for every visit and param. */
static void plan_residency(ZnEngine *E) {
    const ZnZeroConfig *z = &E->cfg->zero;
    const ZnModel *m = E->model;
    long persisted = 0;
    for (int p = 0; p < E->L.nparams; p++) {
        long n = E->L.params[p].numel;
        E->persistent[p] = 0;
        if (n <= z->param_persistence_threshold && persisted + n <= z->model_persistence_threshold) {
            E->persistent[p] = 1;
            persisted += n;
        }
    }
    for (int k = 0; k < E->fetch.ntrace; k++) {
        const ZnModule *md = &m->modules[E->fetch.trace[k].mod];
        for (int q = 0; q < md->nparams; q++) {
            int p = md->param[q], keep = 0;
            long traversed = 0;
            /* DeepSpeed checks the distance before each following module,
               then takes in all of its params */
            for (int j = k + 1; j < E->fetch.ntrace && !keep && z->max_reuse_distance > 0; j++) {
                if (traversed >= z->max_reuse_distance) break;
                const ZnModule *mj = &m->modules[E->fetch.trace[j].mod];
                for (int r = 0; r < mj->nparams; r++) keep |= mj->param[r] == p;
                traversed += module_numel(E, E->fetch.trace[j].mod);
            }
            E->fetch.keep[2 * k + q] = (unsigned char)keep;
        }
    }
}

int zn_fetch_init(ZnEngine *E, ZnErr *err) {
    int rc = build_trace(E, err);
    if (rc || !E->P.gather_per_layer) return rc;
    const int np = E->L.nparams;
    E->persistent = zn_calloc(ZN_HOST_ENGINE, (size_t)np + 1, sizeof(int));
    E->fetch.prefetched = zn_calloc(ZN_HOST_ENGINE, (size_t)np + 1, sizeof(int));
    E->fetch.keep = zn_calloc(ZN_HOST_ENGINE, (size_t)2 * E->fetch.ntrace + 1, 1);
    if (!E->persistent || !E->fetch.prefetched || !E->fetch.keep) return zn_nomem(err);
    plan_residency(E);
    return zn_engine_gather_persistent(E, err);   /* gathered once now, then kept */
}

void zn_fetch_free(ZnEngine *E) {
    ZN_FREE_ALL(E->fetch.trace, E->persistent, E->fetch.prefetched, E->fetch.keep);
    E->fetch.trace = NULL;
    E->persistent = E->fetch.prefetched = NULL;
    E->fetch.keep = NULL;
}

/* Gathers ahead along the trace from visit k + 1 (Z-S3-005). */
static int prefetch(ZnEngine *E, int k, ZnErr *err) {
    const ZnZeroConfig *z = &E->cfg->zero;
    long budget = z->max_live_parameters - E->fetch.n_avail;
    if (z->prefetch_bucket_size < budget) budget = z->prefetch_bucket_size;
    /* the trace's param slots: visit j's params at 2j, 2j + 1 */
    long slot = 2L * (k + 1);
    if (E->fetch.pf_cursor > slot) slot = E->fetch.pf_cursor;
    long fetched = 0;
    while (slot < 2L * E->fetch.ntrace && fetched < budget) {
        const ZnModule *md = &E->model->modules[E->fetch.trace[slot / 2].mod];
        int q = (int)(slot % 2);
        slot++;
        if (q >= md->nparams) continue;
        int p = md->param[q];
        if (E->full[p]) continue;
        int rc = zn_engine_gather_param(E, p, err);
        if (rc) return rc;
        E->fetch.prefetched[p] = 1;
        fetched += E->L.params[p].numel;
    }
    E->fetch.pf_cursor = slot;
    return 0;
}

int zn_fetch_module(ZnEngine *E, int k, float **W, ZnErr *err) {
    const ZnModule *md = &E->model->modules[E->fetch.trace[k].mod];
    for (int q = 0; q < md->nparams; q++) {
        int p = md->param[q];
        if (E->P.gather_per_layer) {
            E->fetch.prefetched[p] = 0;   /* its use is now */
            int rc = zn_engine_gather_param(E, p, err);
            if (rc) return rc;
        }
        W[q] = zn_engine_param_ptr(E, p);
    }
    if (E->P.gather_per_layer && E->fetch.n_avail > E->fetch.live_peak) E->fetch.live_peak = E->fetch.n_avail;
    if (E->P.gather_per_layer && E->fetch.trace_complete && E->cfg->zero.prefetch_bucket_size > 0) {
        int rc = prefetch(E, k, err);
        if (rc) return rc;
        if (E->fetch.n_avail > E->fetch.live_peak) E->fetch.live_peak = E->fetch.n_avail;
    }
    return 0;
}

int zn_fetch_release(ZnEngine *E, int k, ZnErr *err) {
    if (!E->P.gather_per_layer) return 0;
    const ZnModule *md = &E->model->modules[E->fetch.trace[k].mod];
    for (int q = 0; q < md->nparams; q++) {
        int p = md->param[q];
        if (E->fetch.prefetched[p] || (E->fetch.trace_complete && E->fetch.keep[2 * k + q])) continue;
        int rc = zn_engine_release_param(E, p, err);
        if (rc) return rc;
    }
    return 0;
}

int zn_fetch_end_micro(ZnEngine *E, ZnErr *err) {
    if (!E->P.gather_per_layer) return 0;
    ZnErr spare = {0};
    int first = 0;
    for (int p = 0; p < E->L.nparams; p++) {   /* every param released, whatever fails */
        E->fetch.prefetched[p] = 0;
        int rc = zn_engine_release_param(E, p, first || !err ? &spare : err);
        if (rc && !first) first = rc;
    }
    E->fetch.pf_cursor = 0;
    E->fetch.trace_complete = 1;
    return err ? first : 0;
}
