/* drill.c: the planted faults of drill.h, as step hooks. */
#include "engine/drill.h"
#include "engine/offload.h"

static int drill_forward(void *ctx, const ZnEngine *E, int module) {
    (void)E;
    ZnDrill *d = ctx;
    if (!d->repeat_on || module != d->repeat_layer) return 0;
    d->repeat_on = 0;   /* once: the next visits run as every rank's */
    return 1;
}

static void drill_backward(void *ctx, ZnEngine *E, int module, float *const *dW) {
    const ZnDrill *d = ctx;
    if (module != E->model->nmodules - 1 || E->micro != 0) return;
    for (int i = 0; i < d->ninject; i++)
        if (d->inject_steps[i] == E->global_step + 1) {
            E->k->upload(E->dev, dW[0], &d->inject_value, sizeof(float));
            return;
        }
}

static int drill_updated(void *ctx, ZnEngine *E, float *work, ZnDevice *tier, ZnErr *err) {
    const ZnDrill *d = ctx;
    if (d->fault_step != E->global_step + 1 || d->fault_index < 0 || d->fault_index >= E->part_n) return 0;
    return zn_off_add_master(E, d->fault_index, d->fault_delta, work, tier, err);
}

ZnStepHooks zn_drill_hooks(ZnDrill *d) {
    ZnStepHooks h = {0};
    if (d->repeat_on) h.forward = drill_forward;
    if (d->ninject > 0) h.backward = drill_backward;
    if (d->fault_step > 0) h.updated = drill_updated;
    h.ctx = d;
    return h;
}
