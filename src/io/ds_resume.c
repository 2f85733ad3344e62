/* ds_resume.c: `zinc train --resume` from a DeepSpeed folder (spec
 * Z-DSCK-007). Every rank opens the folder (pickles only; tensors stay in
 * their files), gathers each parameter's fp32 master and Adam moments by
 * name into full model-order vectors, and takes its own partition of the
 * current layout: any world size, any stage, as a resharded zinc resume
 * (Z-CKPT-004). The counters come from the model and optimizer states as
 * DeepSpeed's load_checkpoint restores them. */
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"
#include "io/checkpoint.h"
#include "io/ds_ckpt.h"

/* The zinc dtype of the module as DeepSpeed saved it. */
static ZnDtype module_dtype(const ZnDsCkpt *ck) {
    return ck->module_type == ZN_PT_BF16 ? ZN_BF16 : ck->module_type == ZN_PT_F16 ? ZN_F16 : ZN_F32;
}

/* The checkpoint's parameters are this model's: same names and shapes
 * (DeepSpeed lists them by optimizer group, zinc in model order). */
static int check_model(const ZnDsCkpt *ck, const ZnLayout *L, int *index, ZnErr *err) {
    if (ck->nparams != L->nparams)
        return zn_err(err, ZN_E_USAGE, "%s: the checkpoint holds %d parameters, this model has %d", ck->path,
                      ck->nparams, L->nparams);
    for (int p = 0; p < L->nparams; p++) {
        const ZnParamSpec *a = &L->params[p];
        int i = zn_ds_find(ck, a->name);
        if (i < 0) return zn_err(err, ZN_E_USAGE, "%s: this model's parameter '%s' is not in the checkpoint (its "
                                 "first is '%s')", ck->path, a->name, ck->param[0].name);
        const ZnDsParam *b = &ck->param[i];
        int same = a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) return zn_err(err, ZN_E_USAGE, "%s: parameter '%s' has %d dimensions (first %lld) in the checkpoint, "
                                 "%d (first %ld) in this model", ck->path, a->name, b->ndim,
                                 b->ndim ? (long long)b->shape[0] : 0, a->ndim, a->ndim ? a->shape[0] : 0);
        index[p] = i;
    }
    return 0;
}

int zn_ds_load(ZnEngine *E, const char *path, ZnErr *err) {
    ZnDsCkpt ck;
    int rc = zn_ds_open(&ck, path, err);
    if (rc) return rc;
    const ZnLayout *L = &E->L;
    const long total = L->total_numel;
    int *index = zn_calloc(ZN_HOST_IO, (size_t)L->nparams + 1, sizeof *index);
    float *full[3] = {NULL, NULL, NULL}, *part[3] = {NULL, NULL, NULL};
    if (!index) rc = zn_nomem(err);
    if (!rc) rc = check_model(&ck, L, index, err);
    if (!rc && module_dtype(&ck) != E->dt)
        rc = zn_err(err, ZN_E_USAGE, "%s: saved with model dtype %s, resuming with %s", ck.path,
                    zn_dtype_name(module_dtype(&ck)), zn_dtype_name(E->dt));
    if (!rc && (!zn_ds_has_state(&ck, ZN_DS_EXP_AVG) || ck.adam_step < 0))
        rc = zn_err(err, ZN_E_USAGE, "%s: no Adam state (exp_avg, exp_avg_sq, step): zinc resumes Adam and AdamW",
                    ck.path);
    for (int w = 0; w < 3 && !rc; w++) {
        full[w] = zn_malloc(ZN_HOST_IO, (size_t)(total + 1) * 4);
        part[w] = zn_malloc(ZN_HOST_IO, (size_t)(E->part_n > 0 ? E->part_n : 1) * 4);
        if (!full[w] || !part[w]) rc = zn_nomem(err);
        for (int p = 0; p < L->nparams && !rc; p++)
            rc = zn_ds_read_state(&ck, w, index[p], full[w] + L->model_offset[p], err);
        if (!rc) zn_ckpt_take_partition(E, full[w], part[w]);
        free(full[w]);
        full[w] = NULL;
    }
    ZnEngineState st;
    if (!rc) {
        zn_engine_get_state(E, &st);   /* the scaler's fixed parameters stay this config's */
        st.global_step = ck.global_steps;
        st.global_samples = ck.global_samples;
        st.skipped_steps = ck.skipped_steps;
        st.opt_step = ck.adam_step;
        st.sched_t = ck.sched_t;
        st.scaler.dynamic = ck.dynamic_scale;
        st.scaler.cur_scale = ck.cur_scale;
        if (ck.scaler_cur_iter >= 0) st.scaler.cur_iter = ck.scaler_cur_iter;
        if (ck.scaler_cur_iter >= 0) st.scaler.last_overflow_iter = ck.scaler_last_overflow;   /* -1: none yet */
        if (ck.scaler_hysteresis >= 0) st.scaler.cur_hysteresis = (int)ck.scaler_hysteresis;
        if (st.global_step < 0 || st.global_samples < 0 || st.skipped_steps < 0)
            rc = zn_err(err, ZN_E_CORRUPT, "%s: global_steps, global_samples or skipped_steps missing from %s",
                        ck.path, ck.model[0].zip.path);
    }
    /* collective; a rank that failed above returns instead, and the others
       fail at their next collective with its message (Z-SIM-008) */
    if (!rc) rc = zn_engine_set_state(E, &st, part[0], part[1], part[2], err);
    ZN_FREE_ALL(index, part[0], part[1], part[2]);
    zn_ds_close(&ck);
    return rc;
}
