/* ds_tools.c: `zinc ckpt inspect` and `zinc ckpt consolidate` on a
 * DeepSpeed folder (spec Z-DSCK-005, Z-DSCK-006), over ds_ckpt.h's reader. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"
#include "core/half.h"
#include "io/ds_ckpt.h"
#include "io/safetensors.h"

/* Every parameter's fp32 master and Adam moments finite, over the real
 * elements only: DeepSpeed's stage 3 never initialises a partition's
 * padding (NaN was seen there in a bf16 run), and zero_to_fp32 never
 * reads it. */
static int check_finite(const ZnDsCkpt *ck, ZnErr *err) {
    static const char *const WHAT[3] = {"the fp32 master", "exp_avg", "exp_avg_sq"};
    uint64_t most = 1;
    for (int i = 0; i < ck->nparams; i++) most = ck->param[i].numel > most ? ck->param[i].numel : most;
    float *buf = zn_malloc(ZN_HOST_IO, most * sizeof *buf);
    if (!buf) return zn_nomem(err);
    int rc = 0;
    for (int w = 0; w < 3 && !rc; w++)
        for (int i = 0; zn_ds_has_state(ck, w) && i < ck->nparams && !rc; i++) {
            rc = zn_ds_read_state(ck, w, i, buf, err);
            for (uint64_t k = 0; !rc && k < ck->param[i].numel; k++)
                if (!isfinite(buf[k]))
                    rc = zn_err(err, ZN_E_CORRUPT, "%s: parameter '%s' element %llu: %s is %g (in rank %d's file %s)",
                                ck->path, ck->param[i].name, (unsigned long long)k, WHAT[w], (double)buf[k],
                                zn_ds_rank_of(ck, i, k), strrchr(ck->optim[zn_ds_rank_of(ck, i, k)].zip.path, '/') + 1);
        }
    free(buf);
    return rc;
}

/* Stages 1-2 keep the whole module in the model file: each tensor's shape
 * must be param_shapes'. */
static int check_module(const ZnDsCkpt *ck, ZnErr *err) {
    const ZnPt *m = &ck->model[0];
    const ZnPy *mod = zn_py_get(m->root, "module");
    if (!mod || mod->kind != ZN_PY_DICT) return zn_err(err, ZN_E_CORRUPT, "%s: no 'module' dict", m->zip.path);
    for (int i = 0; i < ck->nparams; i++) {
        const ZnDsParam *p = &ck->param[i];
        const ZnPy *v = zn_py_get(mod, p->name);
        ZnPtTensor t;
        char what[300];
        snprintf(what, sizeof what, "module['%.200s']", p->name);
        if (!v) return zn_err(err, ZN_E_CORRUPT, "%s: %s is missing; param_shapes lists it", m->zip.path, what);
        int rc = zn_pt_tensor(m, v, what, &t, err);
        if (rc) return rc;
        if (ck->per_param) continue;   /* stage 3's module holds tensors of shape (0,) */
        int same = t.ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t.shape[d] == p->shape[d];
        if (!same) return zn_err(err, ZN_E_CORRUPT, "%s: %s has %d dimensions (first %lld), param_shapes says %d (first "
                                 "%lld)", m->zip.path, what, t.ndim, t.ndim ? (long long)t.shape[0] : 0, p->ndim,
                                 p->ndim ? (long long)p->shape[0] : 0);
    }
    return 0;
}

static int check_file(const ZnPt *f, FILE *out, ZnErr *err) {
    for (int e = 0; e < f->zip.n; e++) {
        int rc = zn_zip_check_crc(&f->zip, &f->zip.e[e], err);
        if (rc) return rc;
    }
    const char *base = strrchr(f->zip.path, '/');
    fprintf(out, "  %-52s %12llu bytes  %3d entries  crc32 ok\n", base ? base + 1 : f->zip.path,
            (unsigned long long)f->zip.file_size, f->zip.n);
    return 0;
}

int zn_ds_describe(const ZnDsCkpt *ck, FILE *out, ZnErr *err) {
    uint64_t elements = 0;
    for (int i = 0; i < ck->nparams; i++) elements += ck->param[i].numel;
    fprintf(out, "DeepSpeed %scheckpoint %s (tag %s), written by DeepSpeed %s\n", ck->universal ? "universal " : "",
            ck->path, ck->tag, ck->ds_version);
    fprintf(out, "  ZeRO stage %d, %s %d, module %s, fp32 master in %d group%s%s\n", ck->stage,
            ck->universal ? "saved by world size" : "world size", ck->universal ? ck->saved_world : ck->world,
            zn_pt_type_name(ck->module_type), ck->ngroups, ck->ngroups == 1 ? "" : "s",
            ck->bf16_names ? " (bf16 optimizer files)" : "");
    fprintf(out, "  %d parameters, %llu elements; %d shared", ck->nparams, (unsigned long long)elements, ck->nshared);
    for (int s = 0; s < ck->nshared; s++)
        fprintf(out, "%s%s -> %s", s ? ", " : " (", ck->shared[2 * s], ck->shared[2 * s + 1]);
    fprintf(out, "%s; %d frozen; %d buffers\n", ck->nshared ? ")" : "", ck->nfrozen, ck->nbuffers);
    fprintf(out, "  global step %lld, skipped %lld, samples %lld, loss scale %g (%s), lr_scheduler %s\n",
            ck->global_steps, ck->skipped_steps, ck->global_samples, ck->cur_scale,
            ck->dynamic_scale ? "dynamic" : "static", ck->lr_scheduler);
    int rc = check_module(ck, err);
    for (int r = 0; r < ck->nmodel && !rc; r++) rc = check_file(&ck->model[r], out, err);
    for (int r = 0; r < ck->world && !rc; r++) rc = check_file(&ck->optim[r], out, err);
    if (!rc) rc = check_finite(ck, err);
    if (!rc && ck->universal)
        fprintf(out, "  zero/: %d parameters' fp32, exp_avg and exp_avg_sq files: every tensor's CRC-32, its shape, "
                "finite: ok\n", ck->nparams);
    else if (!rc)
        fprintf(out, "  %d files: every entry's CRC-32, the shapes, the partitions of %d ranks, the fp32 masters "
                "%sfinite: ok\n", ck->nmodel + ck->world, ck->world, ck->state[1] ? "and Adam moments " : "");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* consolidate                                                              */

typedef struct {
    const ZnDsCkpt *ck;
    const ZnStEntry *entries;
    const int *param;   /* entries[k] is parameter param[k] */
    long n;             /* entries, in the order the writer fills them (by name: one dtype) */
    ZnDtype dtype;
    float *tmp;         /* the largest parameter, for a cast */
} Fill;

static int fill(void *ctx, const ZnStEntry *e, void *buf, size_t bytes, ZnErr *err) {
    const Fill *f = ctx;
    const long at = e - f->entries;
    const int i = f->param[at];
    if (at + 1 < f->n) zn_ds_prefetch(f->ck, ZN_DS_FP32, f->param[at + 1]);   /* read ahead while this one writes */
    const uint64_t n = f->ck->param[i].numel;
    (void)bytes;
    if (f->dtype == ZN_F32) return zn_ds_read_state(f->ck, ZN_DS_FP32, i, buf, err);
    int rc = zn_ds_read_state(f->ck, ZN_DS_FP32, i, f->tmp, err);
    uint16_t *h = buf;
    for (uint64_t k = 0; !rc && k < n; k++)
        h[k] = f->dtype == ZN_BF16 ? zn_f32_to_bf16(f->tmp[k]) : zn_f32_to_f16(f->tmp[k]);
    return rc;
}

typedef struct {
    ZnStEntry e;
    int p;
} Named;

static int by_name(const void *a, const void *b) { return strcmp(((const Named *)a)->e.name, ((const Named *)b)->e.name); }

int zn_ds_consolidate(const ZnDsCkpt *ck, const char *out, ZnDtype dtype, int hf, int *ntensors, long long *nelements,
                      ZnErr *err) {
    if (ck->nfrozen || ck->nbuffers)
        return zn_err(err, ZN_E_USAGE, "%s: %d frozen parameters and %d buffers: zinc consolidates trainable "
                      "parameters only", ck->path, ck->nfrozen, ck->nbuffers);
    const int most = ck->nparams + ck->nshared;
    ZnStEntry *e = zn_calloc(ZN_HOST_IO, (size_t)most + 1, sizeof *e);
    int *param = zn_calloc(ZN_HOST_IO, (size_t)most + 1, sizeof *param);
    uint64_t biggest = 0;
    int n = 0;
    long long elements = 0;
    for (int i = 0; e && param && i < most; i++) {
        /* zero_to_fp32's order: the parameters, then each shared name whose parameter is there */
        int p = i < ck->nparams ? i : zn_ds_find(ck, ck->shared[2 * (i - ck->nparams)]);
        if (p < 0 || (hf && i >= ck->nparams)) continue;
        e[n].name = i < ck->nparams ? ck->param[p].name : ck->shared[2 * (i - ck->nparams)];
        e[n].dtype = dtype;
        e[n].ndim = ck->param[p].ndim;
        memcpy(e[n].shape, ck->param[p].shape, sizeof e[n].shape);
        param[n++] = p;
        biggest = ck->param[p].numel > biggest ? ck->param[p].numel : biggest;
        if (i < ck->nparams) elements += (long long)ck->param[p].numel;
    }
    /* the writer fills tensors of one dtype by name: so is the read-ahead order */
    Named *by = e && param ? zn_calloc(ZN_HOST_IO, (size_t)n + 1, sizeof *by) : NULL;
    for (int a = 0; by && a < n; a++) by[a] = (Named){e[a], param[a]};
    if (by) qsort(by, (size_t)n, sizeof *by, by_name);
    for (int a = 0; by && a < n; a++) e[a] = by[a].e, param[a] = by[a].p;
    Fill f = {ck, e, param, n, dtype, NULL};
    int rc = !by || (dtype != ZN_F32 && !(f.tmp = zn_malloc(ZN_HOST_IO, biggest * sizeof(float) + 1)))
                 ? zn_nomem(err) : 0;
    static const char *const meta[] = {"format", "pt", NULL};
    if (!rc) rc = zn_st_write_fill(out, e, n, meta, fill, &f, err);
    ZN_FREE_ALL(e, param, by, f.tmp);
    *ntensors = n;
    *nelements = elements;
    return rc;
}
