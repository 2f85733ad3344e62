/* ds_ckpt.c: DeepSpeed's checkpoint folders (spec Z-DSCK-004..006). The
 * layouts, from DeepSpeed 0.19.8's deepspeed/utils/zero_to_fp32.py and
 * runtime/zero/stage_1_and_2.py, stage3.py (state_dict):
 *
 * - stages 1 and 2: rank r's optimizer file holds, per parameter group g,
 *   single_partition_of_fp32_groups[g], its slice of the group's flat fp32
 *   vector; the slices of ranks 0..W-1 laid end to end are the vector, in
 *   which the group's parameters (param_shapes[g], in order) follow one
 *   another, each after param_alignment_paddings[g][j] elements of padding
 *   where that list exists. The vector is padded to a multiple of 2W.
 * - stage 3: rank r's fp32_flat_groups[g] laid end to end make rank r's
 *   partition; every parameter (all of param_shapes, in order) takes
 *   ceil(numel / W) elements of every rank's partition, and rank r's piece
 *   is elements [r * that, ...) of the parameter, the last rank's padded.
 */
#include "io/ds_ckpt.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/alloc.h"

#define fail(x, ...) zn_err_src(err, ZN_E_CORRUPT, (x), __VA_ARGS__)

/* DeepSpeed's layout of each ZeroStageEnum value (1-3): stage 3 partitions
 * every parameter; stages 1 and 2 slice flat groups. */
static const int PER_PARAM[4] = {0, 0, 0, 1};

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n > k && !strcmp(s + n - k, tail);
}

static int has_optim_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d))) found = ends_with(de->d_name, "_optim_states.pt");
    closedir(d);
    return found;
}

/* path/name's tag (name: latest or latest_universal) into tag[cap], or -1. */
static int read_tag_file(const char *path, const char *name, char *tag, size_t cap) {
    char p[4200];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", path, name) >= sizeof p) return -1;
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    size_t n = fread(tag, 1, cap - 1, f);
    fclose(f);
    tag[n] = 0;
    while (n && (tag[n - 1] == '\n' || tag[n - 1] == ' ' || tag[n - 1] == '\r')) tag[--n] = 0;
    return n && !strchr(tag, '/') ? 0 : -1;
}

/* A universal checkpoint folder, as ds_to_universal writes it. */
static int is_universal(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/zero/optimizer_state.pt", dir);
    return access(p, R_OK) == 0;
}

/* The folder path names, through `latest` or `latest_universal` where it
 * holds neither kind itself, into out[cap]; 0 when it is DeepSpeed's. */
static int resolve(const char *path, char *out, size_t cap) {
    char tag[256];
    if (has_optim_files(path) || is_universal(path)) return snprintf(out, cap, "%s", path) >= (int)cap;
    if (!read_tag_file(path, "latest", tag, sizeof tag) && snprintf(out, cap, "%s/%s", path, tag) < (int)cap &&
        has_optim_files(out))
        return 0;
    if (!read_tag_file(path, "latest_universal", tag, sizeof tag) && snprintf(out, cap, "%s/%s", path, tag) < (int)cap &&
        is_universal(out))
        return 0;
    return -1;
}

int zn_ds_is_folder(const char *path) {
    char p[4500];
    return !resolve(path, p, sizeof p);
}

/* ------------------------------------------------------------------------ */
/* plain values out of the pickles                                          */

static const ZnPy *get(const ZnPy *d, const char *key) { return zn_py_get(d, key); }

static int as_int(const ZnPy *v, long long *out) {
    if (!v || (v->kind != ZN_PY_INT && v->kind != ZN_PY_BOOL)) return -1;
    *out = v->i;
    return 0;
}

/* torch.Size((a, b, ...)) or a plain tuple of non-negative integers. */
static int as_shape(const ZnPy *v, ZnDsParam *p) {
    if (v && v->kind == ZN_PY_CALL && v->item[0]->kind == ZN_PY_GLOBAL && !strcmp(v->item[0]->s, "torch Size") &&
        v->item[1]->n == 1)
        v = v->item[1]->item[0];
    if (!v || v->kind != ZN_PY_TUPLE || v->n > ZN_PT_MAX_DIMS) return -1;
    p->ndim = v->n;
    p->numel = 1;
    for (int i = 0; i < v->n; i++) {
        if (v->item[i]->kind != ZN_PY_INT || v->item[i]->i < 0) return -1;
        p->shape[i] = v->item[i]->i;
        if (__builtin_mul_overflow(p->numel, (uint64_t)p->shape[i], &p->numel)) return -1;
    }
    return 0;
}

static const char *file_of(const ZnPt *f) { return f->zip.path; }

/* ------------------------------------------------------------------------ */
/* opening                                                                  */

static int open_file(ZnPt *f, const char *dir, const char *name, ZnErr *err) {
    char p[4200];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p)
        return zn_err(err, ZN_E_USAGE, "%s: path too long", dir);
    struct stat st;
    if (stat(p, &st))
        return zn_err(err, ZN_E_CORRUPT, "%s: missing: DeepSpeed's layout needs this file (%s)", p, strerror(errno));
    return zn_pt_open(f, p, err);
}

/* The optimizer files: which naming, how many, none missing, none extra. */
static int find_optim_files(ZnDsCkpt *ck, int *count, ZnErr *err) {
    DIR *d = opendir(ck->path);
    if (!d) return zn_err(err, ZN_E_IO, "%s: cannot open the folder (%s)", ck->path, strerror(errno));
    struct dirent *de;
    int plain = 0, bf16 = 0, rc = 0;
    while ((de = readdir(d)) && !rc) {
        int r, k = 0;
        const char *s = de->d_name;
        size_t n = strlen(s);
        if (!ends_with(s, "_optim_states.pt")) continue;
        int is_bf16 = !strncmp(s, "bf16_", 5);
        if (sscanf(s + (is_bf16 ? 5 : 0), "zero_pp_rank_%d_mp_rank_00_optim_states.pt%n", &r, &k) != 1 ||
            (size_t)k != n - (is_bf16 ? 5 : 0) || r < 0)
            rc = zn_err(err, ZN_E_CORRUPT, "%s/%s: not a name DeepSpeed gives a data-parallel optimizer file "
                        "(zinc reads mp_rank_00 checkpoints: no tensor or pipeline parallelism)", ck->path, s);
        else if (is_bf16) bf16++;
        else plain++;
    }
    closedir(d);
    if (rc) return rc;
    if (plain && bf16)
        return fail(ck->path, "holds both zero_pp_rank_* and bf16_zero_pp_rank_* optimizer files: two checkpoints "
                    "in one folder");
    if (!plain && !bf16) return fail(ck->path, "no *_optim_states.pt files: not a DeepSpeed ZeRO checkpoint");
    ck->bf16_names = bf16 > 0;
    *count = plain + bf16;
    return 0;
}

static void optim_name(const ZnDsCkpt *ck, int r, char *buf, size_t cap) {
    snprintf(buf, cap, "%szero_pp_rank_%d_mp_rank_00_optim_states.pt", ck->bf16_names ? "bf16_" : "", r);
}

/* The optimizer state's dict of one rank's file. */
static const ZnPy *osd(const ZnPt *f) {
    const ZnPy *o = get(f->root, "optimizer_state_dict");
    return o || !get(f->root, "zero_stage") ? o : f->root;   /* a universal folder's optimizer_state.pt: the dict itself */
}

static int read_stage_world(const ZnPt *f, int *stage, int *world, ZnErr *err) {
    const ZnPy *o = osd(f), *z = get(o, "zero_stage");
    long long v;
    if (!o) return fail(file_of(f), "no 'optimizer_state_dict': not a DeepSpeed optimizer file");
    /* ZeroStageEnum(N): a call whose one argument is the number */
    if (z && z->kind == ZN_PY_CALL && z->item[1]->n == 1) z = z->item[1]->item[0];
    if (as_int(z, &v) || v < 1 || v > 3)
        return fail(file_of(f), "optimizer_state_dict.zero_stage is not 1, 2 or 3: zinc reads ZeRO checkpoints");
    *stage = (int)v;
    const ZnPy *pc = get(o, "partition_count");
    long long w = 0;
    if (pc && pc->kind == ZN_PY_LIST) {   /* stages 1-2: one per group; the data-parallel size is the largest */
        for (int i = 0; i < pc->n; i++) {
            if (as_int(pc->item[i], &v) || v < 1) return fail(file_of(f), "partition_count[%d] is not a count", i);
            w = v > w ? v : w;
        }
    } else if (as_int(pc, &w) || w < 1) {
        return fail(file_of(f), "optimizer_state_dict.partition_count is not a count");
    }
    if (w > 1 << 20) return fail(file_of(f), "partition_count %lld is past zinc's limit", w);
    *world = (int)w;
    return 0;
}

static int read_meta(ZnDsCkpt *ck, ZnErr *err) {
    const ZnPt *m = &ck->model[0];
    const ZnPy *r = m->root;
    long long v;
    if (!get(r, "buffer_names") || !get(r, "param_shapes"))
        return fail(file_of(m), "no 'buffer_names' or 'param_shapes': not a DeepSpeed model-states file");
    ck->global_steps = as_int(get(r, "global_steps"), &v) ? -1 : v;
    ck->global_samples = as_int(get(r, "global_samples"), &v) ? -1 : v;
    ck->skipped_steps = as_int(get(r, "skipped_steps"), &v) ? -1 : v;
    const ZnPy *ver = get(r, "ds_version");
    snprintf(ck->ds_version, sizeof ck->ds_version, "%s", ver && ver->kind == ZN_PY_STR ? ver->s : "?");
    zn_py_repr(get(r, "lr_scheduler"), ck->lr_scheduler, sizeof ck->lr_scheduler);
    const ZnPy *o = osd(&ck->optim[0]);
    const ZnPy *dyn = get(o, "dynamic_loss_scale");
    ck->dynamic_scale = dyn && dyn->kind == ZN_PY_BOOL && dyn->i;
    /* the scaler: LossScaler/DynamicLossScaler, its attributes in BUILD's state */
    const ZnPy *ls = get(o, "loss_scaler"), *cur = NULL;
    if (ls && ls->kind == ZN_PY_CALL && ls->n == 3 && ls->item[2]) cur = get(ls->item[2], "cur_scale");
    ck->cur_scale = !cur ? 1.0 : cur->kind == ZN_PY_FLOAT ? cur->f : (double)cur->i;
    const ZnPy *lst = ls && ls->kind == ZN_PY_CALL && ls->n == 3 ? ls->item[2] : NULL;
    ck->scaler_cur_iter = as_int(get(lst, "cur_iter"), &v) ? -1 : v;
    ck->scaler_last_overflow = as_int(get(lst, "last_overflow_iter"), &v) ? -1 : v;
    ck->scaler_hysteresis = as_int(get(lst, "cur_hysteresis"), &v) ? -1 : v;
    const ZnPy *lr = get(get(r, "lr_scheduler"), "last_batch_iteration");
    ck->sched_t = as_int(lr, &v) ? ck->global_steps - 1 : v;
    /* buffers and shared names */
    const ZnPy *b = get(r, "buffer_names"), *sh = get(r, "shared_params");
    if (b->kind != ZN_PY_LIST) return fail(file_of(m), "buffer_names is not a list");
    if (sh && sh->kind != ZN_PY_DICT) return fail(file_of(m), "shared_params is not a dict");
    ck->nbuffers = b->n;
    const ZnPy *fz = get(r, "frozen_param_shapes");
    ck->nfrozen = fz && fz->kind == ZN_PY_DICT ? fz->n / 2 : 0;
    ck->nshared = sh ? sh->n / 2 : 0;
    ck->shared = zn_calloc(ZN_HOST_IO, (size_t)ck->nshared * 2 + 1, sizeof *ck->shared);
    if (!ck->shared) return zn_nomem(err);
    for (int i = 0; sh && i < sh->n; i++) {
        if (sh->item[i]->kind != ZN_PY_STR) return fail(file_of(m), "shared_params holds a name that is not a string");
        if (!(ck->shared[i] = zn_strdup(ZN_HOST_IO, sh->item[i]->s))) return zn_nomem(err);
    }
    const ZnPy *mod = get(r, "module");
    ck->module_type = ZN_PT_F32;
    if (mod && mod->kind == ZN_PY_DICT && mod->n >= 2) {
        ZnPtTensor t;
        if (!zn_pt_tensor(m, mod->item[1], "module's first tensor", &t, err)) ck->module_type = t.type;
    }
    return 0;
}

static int read_params(ZnDsCkpt *ck, ZnErr *err) {
    const ZnPt *m = &ck->model[0];
    const ZnPy *ps = get(m->root, "param_shapes");
    if (ps->kind != ZN_PY_LIST || ps->n < 1) return fail(file_of(m), "param_shapes is not a list of groups");
    int n = 0;
    for (int g = 0; g < ps->n; g++) {
        if (ps->item[g]->kind != ZN_PY_DICT) return fail(file_of(m), "param_shapes[%d] is not a dict", g);
        n += ps->item[g]->n / 2;
    }
    ck->param = zn_calloc(ZN_HOST_IO, (size_t)(n ? n : 1), sizeof *ck->param);
    if (!ck->param) return zn_nomem(err);
    for (int g = 0; g < ps->n; g++) {
        const ZnPy *d = ps->item[g];
        for (int k = 0; k < d->n; k += 2) {
            ZnDsParam *p = &ck->param[ck->nparams];
            if (d->item[k]->kind != ZN_PY_STR || as_shape(d->item[k + 1], p))
                return fail(file_of(m), "param_shapes[%d] entry %d is not name: torch.Size", g, k / 2);
            if (!(p->name = zn_strdup(ZN_HOST_IO, d->item[k]->s))) return zn_nomem(err);
            p->group = g;
            ck->nparams++;
        }
    }
    ck->ngroups = ps->n;
    return 0;
}

/* Every rank's fp32 partitions, and each group's count equal across ranks. */
static int read_flat(ZnDsCkpt *ck, ZnErr *err) {
    const char *key = !ck->per_param ? "single_partition_of_fp32_groups" : "fp32_flat_groups";
    int ng = -1;
    for (int r = 0; r < ck->world; r++) {
        const ZnPt *f = &ck->optim[r];
        const ZnPy *l = get(osd(f), key);
        if (!l || l->kind != ZN_PY_LIST) return fail(file_of(f), "no list optimizer_state_dict.%s", key);
        if (r == 0) {
            ng = l->n;
            if (!ck->per_param && ng != ck->ngroups)
                return fail(file_of(f), "%s has %d groups, param_shapes %d", key, ng, ck->ngroups);
            ck->state[0] = zn_calloc(ZN_HOST_IO, (size_t)ck->world * (size_t)(ng ? ng : 1), sizeof *ck->state[0]);
            if (!ck->state[0]) return zn_nomem(err);
        } else if (l->n != ng) {
            return fail(file_of(f), "%s has %d groups, rank 0's file %d: partitions of different runs", key, l->n, ng);
        }
        for (int g = 0; g < ng; g++) {
            char what[96];
            snprintf(what, sizeof what, "optimizer_state_dict.%s[%d]", key, g);
            ZnPtTensor *t = &ck->state[0][r * ng + g];
            int rc = zn_pt_tensor(f, l->item[g], what, t, err);
            if (rc) return rc;
            if (t->type != ZN_PT_F32 || t->ndim != 1 || !t->contiguous)
                return fail(file_of(f), "%s is %s%s with %d dimensions; DeepSpeed writes a flat float32 vector", what,
                            zn_pt_type_name(t->type), t->contiguous ? "" : " (strided)", t->ndim);
            /* stage 3 saves every partition whole; stages 1-2 strip the last rank's padding */
            if (t->numel != ck->state[0][g].numel && (ck->per_param || r < ck->world - 1 || t->numel > ck->state[0][g].numel))
                return fail(file_of(f), "%s holds %llu elements, rank 0's %llu: the partitions disagree", what,
                            (unsigned long long)t->numel, (unsigned long long)ck->state[0][g].numel);
        }
    }
    if (!ck->per_param) {
        const int W1 = ck->world + 1;
        ck->rank_at = zn_calloc(ZN_HOST_IO, (size_t)ng * (size_t)W1 + 1, sizeof *ck->rank_at);
        if (!ck->rank_at) return zn_nomem(err);
        for (int g = 0; g < ng; g++)
            for (int r = 0; r < ck->world; r++)
                ck->rank_at[g * W1 + r + 1] = ck->rank_at[g * W1 + r] + ck->state[0][r * ng + g].numel;
    }
    if (ck->per_param) {   /* zero_to_fp32's flat_groups_offset */
        ck->group_at = zn_calloc(ZN_HOST_IO, (size_t)ng + 1, sizeof *ck->group_at);
        if (!ck->group_at) return zn_nomem(err);
        for (int g = 0; g < ng; g++) ck->group_at[g + 1] = ck->group_at[g] + ck->state[0][g].numel;
        ck->ngroups = ng;
    }
    return 0;
}

/* The Adam moments, where the optimizer kept them: per rank and group, a
 * float32 vector as long as the fp32 partition. */
static int read_moments(ZnDsCkpt *ck, ZnErr *err) {
    static const char *const KEY[3] = {NULL, "exp_avg", "exp_avg_sq"};
    const size_t n = (size_t)ck->world * (size_t)ck->ngroups + 1;
    ck->adam_step = -1;
    for (int r = 0; r < ck->world; r++) {
        const ZnPt *f = &ck->optim[r];
        const ZnPy *st = get(get(osd(f), !ck->per_param ? "base_optimizer_state" : "optimizer_state_dict"), "state");
        for (int g = 0; g < ck->ngroups; g++) {
            const ZnPy *gs = NULL;
            for (int k = 0; st && st->kind == ZN_PY_DICT && k < st->n; k += 2)
                if (st->item[k]->kind == ZN_PY_INT && st->item[k]->i == g) gs = st->item[k + 1];
            long long step;
            if (r == 0 && g == 0) ck->adam_step = as_int(get(gs, "step"), &step) ? -1 : step;
            for (int w = 1; w <= 2; w++) {
                const ZnPy *v = get(gs, KEY[w]);
                if (!v) {
                    if (r || g || w > 1) return fail(file_of(f), "optimizer state of group %d has no '%s' where "
                                                     "rank 0's group 0 has one", g, KEY[w]);
                    return 0;   /* no moments at all: an optimizer other than Adam */
                }
                if (!ck->state[w] && !(ck->state[w] = zn_calloc(ZN_HOST_IO, n, sizeof(ZnPtTensor)))) return zn_nomem(err);
                char what[96];
                snprintf(what, sizeof what, "optimizer state %d '%s'", g, KEY[w]);
                ZnPtTensor *t = &ck->state[w][r * ck->ngroups + g];
                int rc = zn_pt_tensor(f, v, what, t, err);
                if (rc) return rc;
                const uint64_t want = ck->state[0][r * ck->ngroups + g].numel;
                /* stages 1-2 keep the last rank's moments padded where its fp32 slice is not */
                if (t->type != ZN_PT_F32 || !t->contiguous || t->numel < want || (ck->per_param && t->numel != want))
                    return fail(file_of(f), "%s is %s%s of %llu elements; the fp32 partition has %llu float32", what,
                                zn_pt_type_name(t->type), t->contiguous ? "" : " (strided)", (unsigned long long)t->numel,
                                (unsigned long long)want);
            }
        }
    }
    return 0;
}

/* Each parameter's offset, and the sanity checks zero_to_fp32 makes. */
static int layout(ZnDsCkpt *ck, ZnErr *err) {
    const char *opt0 = file_of(&ck->optim[0]);
    const uint64_t W = (uint64_t)ck->world;
    if (ck->per_param) {
        uint64_t off = 0;
        for (int i = 0; i < ck->nparams; i++) {
            ck->param[i].offset = off;
            off += (ck->param[i].numel + W - 1) / W;
        }
        if (off != ck->group_at[ck->ngroups])
            return fail(opt0, "the parameters take %llu elements of every rank's partition, which holds %llu: "
                        "param_shapes and the partitions disagree", (unsigned long long)off,
                        (unsigned long long)ck->group_at[ck->ngroups]);
        return 0;
    }
    const ZnPy *pad = get(osd(&ck->optim[0]), "param_alignment_paddings");
    if (pad && pad->kind == ZN_PY_NONE) pad = NULL;
    if (pad && (pad->kind != ZN_PY_LIST || pad->n != ck->ngroups))
        return fail(opt0, "param_alignment_paddings is not a list of %d groups", ck->ngroups);
    int i = 0;
    for (int g = 0; g < ck->ngroups; g++) {
        const ZnPy *gp = pad ? pad->item[g] : NULL;
        uint64_t off = 0, avail = ck->rank_at[g * (ck->world + 1) + ck->world];
        int j = 0;
        for (; i < ck->nparams && ck->param[i].group == g; i++, j++) {
            ck->param[i].offset = off;
            off += ck->param[i].numel;
            long long p = 0;
            if (gp && (gp->kind != ZN_PY_LIST || j >= gp->n || as_int(gp->item[j], &p) || p < 0))
                return fail(opt0, "param_alignment_paddings[%d] has no count for parameter %d", g, j);
            off += (uint64_t)p;
        }
        if (gp && gp->n != j) return fail(opt0, "param_alignment_paddings[%d] has %d counts for %d parameters", g,
                                          gp->n, j);
        /* zero_to_fp32: both rounded up to 2W must meet */
        uint64_t a = 2 * W;
        if ((off + a - 1) / a != (avail + a - 1) / a || off > avail)
            return fail(opt0, "group %d: its parameters take %llu elements, the ranks' partitions hold %llu: "
                        "param_shapes and the partitions disagree", g, (unsigned long long)off,
                        (unsigned long long)avail);
    }
    return 0;
}

/* n files not opened yet: zn_ds_close may close any of them (a zeroed one
 * would close descriptor 0) */
static ZnPt *new_files(int n) {
    ZnPt *f = zn_calloc(ZN_HOST_IO, (size_t)n, sizeof *f);
    for (int i = 0; f && i < n; i++) f[i].zip.fd = -1;
    return f;
}

/* A universal folder (ds_to_universal): zero/optimizer_state.pt holds
 * what the optimizer files shared, mp_rank_00_model_states.pt the model
 * states, and zero/NAME/{fp32,exp_avg,exp_avg_sq}.pt each parameter's
 * whole state ({'param': tensor, ...}), zero/NAME/step.pt its step. */
static int open_universal(ZnDsCkpt *ck, ZnErr *err) {
    ck->universal = 1;
    ck->world = ck->nmodel = 1;   /* files held open: one of each */
    ck->optim = new_files(1);
    ck->model = new_files(1);
    if (!ck->optim || !ck->model) return zn_nomem(err);
    int rc = open_file(&ck->optim[0], ck->path, "zero/optimizer_state.pt", err);
    if (!rc) rc = read_stage_world(&ck->optim[0], &ck->stage, &ck->saved_world, err);
    if (!rc) rc = open_file(&ck->model[0], ck->path, "mp_rank_00_model_states.pt", err);
    if (!rc) rc = read_meta(ck, err);
    if (!rc) rc = read_params(ck, err);
    if (rc) return rc;
    ck->per_param = PER_PARAM[ck->stage];
    /* the optimizer's step: the first parameter's step.pt, a plain integer;
     * unknown (-1) without the file, an error when the file is there but
     * cannot be read */
    char name[4400], p[8600];
    ZnPt f;
    long long v;
    struct stat st;
    ck->adam_step = -1;
    snprintf(name, sizeof name, "zero/%s/step.pt", ck->param[0].name);
    snprintf(p, sizeof p, "%s/%s", ck->path, name);
    if (stat(p, &st)) return 0;
    if ((rc = open_file(&f, ck->path, name, err))) return rc;
    ck->adam_step = as_int(f.root, &v) ? -1 : v;
    zn_pt_close(&f);
    return 0;
}

/* Parameter i's state `which` from its universal file, whole; the CRC-32 of
 * the storage it reads is checked on the bytes read. */
static int read_universal(const ZnDsCkpt *ck, int which, int i, float *dst, ZnErr *err) {
    static const char *const KIND[3] = {"fp32", "exp_avg", "exp_avg_sq"};
    const ZnDsParam *p = &ck->param[i];
    char name[4400];
    snprintf(name, sizeof name, "zero/%s/%s.pt", p->name, KIND[which]);
    ZnPt f;
    int rc = open_file(&f, ck->path, name, err);
    if (rc) return rc;
    ZnPtTensor t;
    const ZnPy *v = get(f.root, "param");
    rc = zn_pt_tensor(&f, v ? v : f.root, "'param'", &t, err);
    if (!rc && (t.type != ZN_PT_F32 || !t.contiguous || t.numel != p->numel))
        rc = fail(f.zip.path, "'param' is %s of %llu elements; '%s' has %llu float32", zn_pt_type_name(t.type),
                  (unsigned long long)t.numel, p->name, (unsigned long long)p->numel);
    if (!rc) rc = zn_pt_read(&f, &t, 0, t.numel, dst, err);
    if (!rc && t.offset == 0 && t.numel * 4 == t.storage->size) {
        uint32_t crc = zn_crc32(0, dst, t.numel * 4);
        if (crc != t.storage->crc32)
            rc = fail(f.zip.path, "entry '%s' has CRC-32 %08x, its directory says %08x", t.storage->name, crc,
                      t.storage->crc32);
    } else if (!rc) {
        rc = zn_zip_check_crc(&f.zip, t.storage, err);
    }
    zn_pt_close(&f);
    return rc;
}

int zn_ds_has_state(const ZnDsCkpt *ck, int which) { return ck->universal || ck->state[which] != NULL; }

int zn_ds_open(ZnDsCkpt *ck, const char *path, ZnErr *err) {
    memset(ck, 0, sizeof *ck);
    char where[4500];
    int rc = 0;
    ck->path = zn_strdup(ZN_HOST_IO, resolve(path, where, sizeof where) ? path : where);
    if (!ck->path) return zn_nomem(err);
    const char *slash = strrchr(ck->path, '/');
    if (!(ck->tag = zn_strdup(ZN_HOST_IO, slash ? slash + 1 : ck->path))) {
        rc = zn_nomem(err);
        zn_ds_close(ck);
        return rc;
    }
    if (is_universal(ck->path)) {
        if ((rc = open_universal(ck, err))) zn_ds_close(ck);
        return rc;
    }
    int count = 0;
    if ((rc = find_optim_files(ck, &count, err))) goto out;
    ck->optim = new_files(count);
    if (!ck->optim) {
        rc = zn_nomem(err);
        goto out;
    }
    char name[128];
    optim_name(ck, 0, name, sizeof name);
    if ((rc = open_file(&ck->optim[0], ck->path, name, err))) goto out;
    ck->world = 1;   /* optim[0] is open: zn_ds_close closes it */
    int world;
    if ((rc = read_stage_world(&ck->optim[0], &ck->stage, &world, err))) goto out;
    ck->world = world;
    ck->per_param = PER_PARAM[ck->stage];
    if (ck->world != count) {
        struct stat st;
        char p[4400];
        int r = 1;
        for (; r < ck->world; r++) {
            optim_name(ck, r, name, sizeof name);
            snprintf(p, sizeof p, "%s/%s", ck->path, name);
            if (stat(p, &st)) break;
        }
        if (r < ck->world)
            rc = fail(ck->path, "rank %d's file %s is missing: partition_count in rank 0's says %d ranks", r, name,
                      ck->world);
        else
            rc = fail(ck->path, "%d optimizer files, but partition_count in rank 0's says %d ranks: files left "
                      "from another run", count, ck->world);
        ck->world = 1;
        goto out;
    }
    for (int r = 1; r < ck->world; r++) {
        optim_name(ck, r, name, sizeof name);
        int s, w;
        if ((rc = open_file(&ck->optim[r], ck->path, name, err))) goto out;
        if ((rc = read_stage_world(&ck->optim[r], &s, &w, err))) goto out;
        if (s != ck->stage || w != ck->world) {
            rc = fail(file_of(&ck->optim[r]), "stage %d of %d ranks, rank 0's file stage %d of %d", s, w, ck->stage,
                      ck->world);
            goto out;
        }
    }
    ck->nmodel = ck->per_param ? ck->world : 1;
    ck->model = new_files(ck->nmodel);
    if (!ck->model) {
        rc = zn_nomem(err);
        goto out;
    }
    for (int r = 0; r < ck->nmodel; r++) {
        if (ck->per_param) snprintf(name, sizeof name, "zero_pp_rank_%d_mp_rank_00_model_states.pt", r);
        else snprintf(name, sizeof name, "mp_rank_00_model_states.pt");
        if ((rc = open_file(&ck->model[r], ck->path, name, err))) goto out;
    }
    if ((rc = read_meta(ck, err)) || (rc = read_params(ck, err)) || (rc = read_flat(ck, err)) ||
        (rc = read_moments(ck, err)) || (rc = layout(ck, err)))
        goto out;
out:
    if (rc) zn_ds_close(ck);
    return rc;
}

void zn_ds_close(ZnDsCkpt *ck) {
    for (int r = 0; ck->optim && r < ck->world; r++) zn_pt_close(&ck->optim[r]);
    for (int r = 0; ck->model && r < ck->nmodel; r++) zn_pt_close(&ck->model[r]);
    for (int i = 0; i < ck->nparams; i++) free(ck->param[i].name);
    for (int i = 0; ck->shared && i < 2 * ck->nshared; i++) free(ck->shared[i]);
    ZN_FREE_ALL(ck->path, ck->tag, ck->optim, ck->model, ck->param, ck->shared, ck->state[0], ck->state[1],
                ck->state[2], ck->group_at, ck->rank_at);
    memset(ck, 0, sizeof *ck);
}

/* ------------------------------------------------------------------------ */
/* one parameter, gathered                                                  */

/* One piece of a parameter: n elements of rank r's tensor t from first,
 * read into dst, or (dst NULL) announced to the kernel for reading soon. */
static int piece(const ZnDsCkpt *ck, int r, const ZnPtTensor *t, uint64_t first, uint64_t n, float *dst,
                 ZnErr *err) {
    if (dst) return zn_pt_read(&ck->optim[r], t, first, n, dst, err);
    zn_pt_advise(&ck->optim[r], t, first, n);
    return 0;
}

/* n elements of rank r's stage-3 partition from position at, across its groups. */
static int read_partition(const ZnDsCkpt *ck, const ZnPtTensor *set, int r, uint64_t at, uint64_t n, float *dst,
                          ZnErr *err) {
    for (int g = 0; g < ck->ngroups && n; g++) {
        uint64_t lo = ck->group_at[g], hi = ck->group_at[g + 1];
        if (at >= hi) continue;
        uint64_t k = hi - at < n ? hi - at : n;
        int rc = piece(ck, r, &set[r * ck->ngroups + g], at - lo, k, dst, err);
        if (rc) return rc;
        if (dst) dst += k;
        at += k;
        n -= k;
    }
    return n ? zn_err(err, ZN_E_INTERNAL, "stage-3 partition read past its end") : 0;
}

/* Parameter i's pieces, rank by rank, into dst (or announced: dst NULL). */
static int gather(const ZnDsCkpt *ck, const ZnPtTensor *set, int i, float *dst, ZnErr *err) {
    const ZnDsParam *p = &ck->param[i];
    const uint64_t W = (uint64_t)ck->world;
    if (ck->per_param) {
        uint64_t part = (p->numel + W - 1) / W, left = p->numel;
        for (int r = 0; r < ck->world && left; r++) {
            uint64_t k = left < part ? left : part;
            int rc = read_partition(ck, set, r, p->offset, k, dst, err);
            if (rc) return rc;
            if (dst) dst += k;
            left -= k;
        }
        return 0;
    }
    /* stages 1-2: [offset, offset + numel) of the group's vector, rank by rank */
    const uint64_t *at_r = &ck->rank_at[p->group * (ck->world + 1)];
    uint64_t at = p->offset, left = p->numel;
    for (int r = 0; r < ck->world && left; r++) {
        if (at >= at_r[r + 1]) continue;
        uint64_t in = at - at_r[r], k = at_r[r + 1] - at < left ? at_r[r + 1] - at : left;
        int rc = piece(ck, r, &set[r * ck->ngroups + p->group], in, k, dst, err);
        if (rc) return rc;
        if (dst) dst += k;
        at += k;
        left -= k;
    }
    return left ? zn_err(err, ZN_E_INTERNAL, "a parameter read past its group's end") : 0;
}

int zn_ds_read_state(const ZnDsCkpt *ck, int which, int i, float *dst, ZnErr *err) {
    if (ck->universal) return read_universal(ck, which, i, dst, err);
    if (!ck->state[which]) return zn_err(err, ZN_E_INTERNAL, "%s: no optimizer state %d", ck->path, which);
    return gather(ck, ck->state[which], i, dst, err);
}

void zn_ds_prefetch(const ZnDsCkpt *ck, int which, int i) {
    if (ck->state[which]) gather(ck, ck->state[which], i, NULL, NULL);
}

int zn_ds_rank_of(const ZnDsCkpt *ck, int i, uint64_t k) {
    const ZnDsParam *p = &ck->param[i];
    if (ck->universal) return 0;
    if (ck->per_param) return (int)(k / ((p->numel + (uint64_t)ck->world - 1) / (uint64_t)ck->world));
    const uint64_t *at_r = &ck->rank_at[p->group * (ck->world + 1)];
    int r = 0;
    while (r < ck->world - 1 && p->offset + k >= at_r[r + 1]) r++;
    return r;
}

int zn_ds_find(const ZnDsCkpt *ck, const char *name) {
    for (int s = 0; s < ck->nshared; s++)
        if (!strcmp(ck->shared[2 * s], name)) name = ck->shared[2 * s + 1];
    for (int i = 0; i < ck->nparams; i++)
        if (!strcmp(ck->param[i].name, name)) return i;
    return -1;
}
