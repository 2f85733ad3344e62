/* ds_write.c: `zinc ckpt to-deepspeed` (spec Z-DSCK-009): a zinc checkpoint
 * written as the folder DeepSpeed 0.19.8's save_checkpoint writes for the
 * same run, so that its load_checkpoint resumes from it (same config, same
 * world size).
 *
 * The optimizer's parameter groups are the Hugging Face Trainer's (what
 * zinc's weight-decay rule follows, Z-OPT-020): the parameters with weight
 * decay, then those without, each in model order; an empty group is left
 * out. From them:
 *   stages 1-2  mp_rank_00_model_states.pt (the module in the model dtype)
 *               and per rank [bf16_]zero_pp_rank_R_mp_rank_00_optim_states.pt:
 *               each group flattened, padded to a multiple of 2W and cut
 *               into W equal slices (stage_1_and_2.py); the fp32 slice is
 *               saved without the padding, the Adam moments with it.
 *   stage 3     per rank zero_pp_rank_R_mp_rank_00_model_states.pt (the
 *               module's empty partitions) and the optimizer file: every
 *               parameter cut into W partitions of ceil(n/W) elements, the
 *               rank's partitions of each sub-group (sub_group_size)
 *               concatenated (stage3.py).
 * Padding is written as zeros. The folder is built under OUT/TAG.tmp.PID and
 * renamed to OUT/TAG when complete; OUT/latest names it last. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/alloc.h"
#include "core/config.h"
#include "core/fileio.h"
#include "core/half.h"
#include "core/json_track.h"
#include "engine/decay.h"
#include "engine/lr_schedule.h"
#include "io/checkpoint.h"
#include "io/ds_ckpt.h"
#include "io/pickle_write.h"
#include "io/zipwrite.h"

#define DS_VERSION "0.19.8"   /* the DeepSpeed whose format this writes */
#define PATHN 4096

typedef struct {
    int first, n;        /* members[first .. first + n) of its group */
} SubGroup;

typedef struct {
    const ZnCkptWhole *c;
    ZnConfig cfg;
    int world, stage, per_param;
    long off[ZN_MAX_PARAMS];          /* each parameter's place in the full arrays */
    int ngroups;
    int member[2][ZN_MAX_PARAMS];     /* the groups' parameters, in model order */
    int nmember[2];
    double wd[2];
    int nsub;                         /* stage 3: the sub-groups, over both groups */
    SubGroup sub[2 * ZN_MAX_PARAMS];
    int sub_group[2 * ZN_MAX_PARAMS];
    double lr, beta1, beta2;          /* the optimizer's values for the next step */
    const char *tagdir;               /* the temporary folder being filled */
    cJSON *config;                    /* the run's config file, parsed once (NULL: it read none) */
} Out;

/* ---- torch.save files ---------------------------------------------------- */

/* A storage: runs of bytes (or of zeros) one after another. */
typedef struct {
    ZnZipPart *part;
    int n, cap;
} Runs;

static int runs_add(Runs *r, const void *p, size_t len, ZnErr *err) {
    if (!len) return 0;
    if (zn_grow(ZN_HOST_IO, &r->part, &r->cap, r->n + 1, sizeof *r->part)) return zn_nomem(err);
    r->part[r->n++] = (ZnZipPart){p, len};
    return 0;
}

/* The storages a pickle refers to by key 0, 1, 2 ... in the order it names them. */
typedef struct {
    Runs *s;
    int n, cap;
} Storages;

static Runs *storage_new(Storages *st, long *key, ZnErr *err) {
    *key = -1;   /* defined even on failure: callers write the pickle on and drop it */
    if (zn_grow(ZN_HOST_IO, &st->s, &st->cap, st->n + 1, sizeof *st->s)) {
        zn_nomem(err);
        return NULL;
    }
    memset(&st->s[st->n], 0, sizeof st->s[st->n]);
    *key = st->n;
    return &st->s[st->n++];
}

static void storages_free(Storages *st) {
    for (int i = 0; i < st->n; i++) free(st->s[i].part);
    free(st->s);
    memset(st, 0, sizeof *st);
}

/* The file DIR/NAME.pt: the zip torch.save writes around pickle pk (which
 * it frees) and the storages. */
static int write_pt(const Out *o, const char *name, ZnPw *pk, Storages *st, ZnErr *err) {
    char path[PATHN], entry[PATHN];
    snprintf(path, sizeof path, "%s/%s.pt", o->tagdir, name);
    int rc = zn_pw_finish(pk, err);
    if (rc) return rc;
    ZnZipW z;
    rc = zn_zipw_open(&z, path, err);
    /* torch.save's entries, in its order; the serialization id is made
       from the name, so that a run writes the same bytes every time */
    char sid[41];
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(sid, sizeof sid, "%020llu%020llu", (unsigned long long)h, (unsigned long long)(h * 31 + 7));
    const struct { const char *what, *text; } small[] = {
        {".format_version", "1"}, {".storage_alignment", "64"}, {"byteorder", "little"}};
#define ADD1(WHAT, P, N)                                     \
    do {                                                     \
        ZnZipPart part = {(P), (N)};                         \
        snprintf(entry, sizeof entry, "%s/%s", name, WHAT);  \
        rc = zn_zipw_add(&z, entry, &part, 1, err);          \
    } while (0)
    if (!rc) ADD1("data.pkl", pk->p, pk->n);
    for (size_t i = 0; i < sizeof small / sizeof *small && !rc; i++) ADD1(small[i].what, small[i].text, strlen(small[i].text));
    for (int k = 0; k < st->n && !rc; k++) {
        snprintf(entry, sizeof entry, "%s/data/%d", name, k);
        rc = zn_zipw_add(&z, entry, st->s[k].part, st->s[k].n, err);
    }
    if (!rc) ADD1("version", "3\n", 2);
    if (!rc) ADD1(".data/serialization_id", sid, 40);
#undef ADD1
    if (!rc) rc = zn_zipw_commit(&z, err);
    else zn_zipw_abort(&z);
    zn_pw_free(pk);
    return rc;
}

/* ---- the values every file shares ---------------------------------------- */

/* A JSON value as the dict json.load gives DeepSpeed (ds_config). */
static void put_json(ZnPw *w, const cJSON *v) {
    if (cJSON_IsObject(v)) {
        zn_pw_dict(w);
        for (const cJSON *c = v->child; c; c = c->next) {
            zn_pw_str(w, c->string);
            put_json(w, c);
        }
        zn_pw_dict_end(w);
    } else if (cJSON_IsArray(v)) {
        zn_pw_list(w);
        for (const cJSON *c = v->child; c; c = c->next) put_json(w, c);
        zn_pw_list_end(w);
    } else if (cJSON_IsString(v)) zn_pw_str(w, v->valuestring);
    else if (cJSON_IsBool(v)) zn_pw_bool(w, cJSON_IsTrue(v));
    else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == (double)(long long)d && d > -9e15 && d < 9e15) zn_pw_int(w, (long long)d);
        else zn_pw_float(w, d);
    } else zn_pw_none(w);
}

static void put_config(ZnPw *w, const Out *o) {
    if (o->config) put_json(w, o->config);
    else {   /* a run without a config file: what it resolved to */
        zn_pw_dict(w);
        zn_pw_kv_int(w, "train_batch_size", o->cfg.train_batch_size);
        zn_pw_kv_int(w, "train_micro_batch_size_per_gpu", o->cfg.micro_batch);
        zn_pw_str(w, "zero_optimization");
        zn_pw_dict(w);
        zn_pw_kv_int(w, "stage", o->stage);
        zn_pw_dict_end(w);
        zn_pw_dict_end(w);
    }
}

static void put_shape(ZnPw *w, const ZnParamSpec *p) {
    int64_t s[ZN_MAX_DIMS];
    for (int d = 0; d < p->ndim; d++) s[d] = p->shape[d];
    zn_pw_size(w, p->ndim, s);
}

static const ZnParamSpec *param(const Out *o, int p) { return &o->c->model.params[p]; }

/* param_shapes: one OrderedDict of name -> torch.Size per group (stage 3:
 * per sub-group) */
static void put_param_shapes(ZnPw *w, const Out *o) {
    zn_pw_list(w);
    const int n = o->per_param ? o->nsub : o->ngroups;
    for (int k = 0; k < n; k++) {
        const int g = o->per_param ? o->sub_group[k] : k;
        const int first = o->per_param ? o->sub[k].first : 0, cnt = o->per_param ? o->sub[k].n : o->nmember[g];
        zn_pw_ordered_dict(w);
        for (int i = first; i < first + cnt; i++) {
            zn_pw_str(w, param(o, o->member[g][i])->name);
            put_shape(w, param(o, o->member[g][i]));
        }
        zn_pw_dict_end(w);
    }
    zn_pw_list_end(w);
}

static const char *storage_name(ZnDtype dt) {
    return dt == ZN_BF16 ? "BFloat16Storage" : dt == ZN_F16 ? "HalfStorage" : "FloatStorage";
}

/* The model states: the module (stages 1-2: its weights in the model dtype,
 * one storage per parameter, a tied name on its parameter's storage; stage
 * 3: every name an empty partition), then DeepSpeed's bookkeeping. */
static int write_model_states(const Out *o, int rank, const void *module16, ZnErr *err) {
    const ZnModel *m = &o->c->model;
    const ZnDtype dt = o->c->dt;
    const size_t es = zn_dtype_size(dt);
    ZnPw w;
    Storages st = {0};
    int rc = 0;
    long key[ZN_MAX_PARAMS];
    zn_pw_begin(&w);
    zn_pw_dict(&w);
    zn_pw_str(&w, "module");
    zn_pw_ordered_dict(&w);
    for (int k = 0; k < m->nparams + m->naliases && !rc; k++) {
        /* named_parameters order with the tied names where the module lists
           them: zinc's aliases are the later layers' names, listed after */
        const int p = k < m->nparams ? k : m->aliases[k - m->nparams].param;
        const char *name = k < m->nparams ? m->params[p].name : m->aliases[k - m->nparams].name;
        const ZnParamSpec *ps = &m->params[p];
        if (k < m->nparams) {
            Runs *r = storage_new(&st, &key[p], err);
            if (!r) rc = ZN_E_NOMEM;
            else if (!o->per_param) {
                const void *src = dt == ZN_F32 ? (const void *)(o->c->full[0] + o->off[p])
                                               : (const void *)((const char *)module16 + (size_t)o->off[p] * es);
                rc = runs_add(r, src, (size_t)ps->numel * es, err);
            }
        }
        if (rc) break;
        zn_pw_str(&w, name);
        if (o->per_param) {
            const int64_t zero = 0;
            zn_pw_tensor(&w, storage_name(dt), key[p], 0, 1, &zero);
        } else {
            int64_t s[ZN_MAX_DIMS];
            for (int d = 0; d < ps->ndim; d++) s[d] = ps->shape[d];
            zn_pw_tensor(&w, storage_name(dt), key[p], (uint64_t)ps->numel, ps->ndim, s);
        }
    }
    zn_pw_dict_end(&w);
    zn_pw_str(&w, "buffer_names");
    zn_pw_list(&w);
    zn_pw_list_end(&w);
    zn_pw_str(&w, "optimizer");
    zn_pw_none(&w);
    zn_pw_str(&w, "param_shapes");
    put_param_shapes(&w, o);
    /* the frozen parameters' records, empty, where gradients are
       partitioned (DeepSpeed saves None for them otherwise) */
    const int frozen = o->c->plan.grads == ZN_HOLD_PART;
    zn_pw_str(&w, "frozen_param_shapes");
    if (frozen) {
        zn_pw_ordered_dict(&w);
        zn_pw_dict_end(&w);
    } else zn_pw_none(&w);
    zn_pw_str(&w, "shared_params");   /* stage 3 records them in rank 0's file only, as DeepSpeed does */
    zn_pw_dict(&w);
    for (int a = 0; a < m->naliases && (rank == 0 || !o->per_param); a++) {
        zn_pw_str(&w, m->aliases[a].name);
        zn_pw_str(&w, m->params[m->aliases[a].param].name);
    }
    zn_pw_dict_end(&w);
    zn_pw_str(&w, "frozen_param_fragments");
    if (frozen) {
        zn_pw_ordered_dict(&w);
        zn_pw_dict_end(&w);
    } else zn_pw_none(&w);
    zn_pw_str(&w, "lr_scheduler");
    if (o->cfg.sched.type == ZN_SCHED_NONE) zn_pw_none(&w);
    else {
        zn_pw_dict(&w);
        zn_pw_kv_int(&w, "last_batch_iteration", o->c->st.sched_t);
        zn_pw_dict_end(&w);
    }
    const char *nones[] = {"data_sampler", "random_ltd"};
    for (int i = 0; i < 2; i++) {
        zn_pw_str(&w, nones[i]);
        zn_pw_none(&w);
    }
    const struct { const char *k; long long v; } counts[] = {
        {"skipped_steps", o->c->st.skipped_steps}, {"global_steps", o->c->st.global_step},
        {"global_samples", o->c->st.global_samples}, {"dp_world_size", o->world}, {"mp_world_size", 1}};
    for (int i = 0; i < 5; i++) {
        zn_pw_str(&w, counts[i].k);
        zn_pw_int(&w, counts[i].v);
    }
    zn_pw_str(&w, "checkpoint_parallel_dimensions");
    zn_pw_dict(&w);
    zn_pw_kv_int(&w, "pp_degree", 1);
    zn_pw_kv_int(&w, "tp_degree", 1);
    zn_pw_dict_end(&w);
    zn_pw_str(&w, "ds_config");
    put_config(&w, o);
    zn_pw_str(&w, "ds_version");
    zn_pw_str(&w, DS_VERSION);
    zn_pw_dict_end(&w);
    char name[128];
    if (o->per_param) snprintf(name, sizeof name, "zero_pp_rank_%d_mp_rank_00_model_states", rank);
    else snprintf(name, sizeof name, "mp_rank_00_model_states");
    if (!rc) rc = write_pt(o, name, &w, &st, err);
    else zn_pw_free(&w);
    storages_free(&st);
    return rc;
}

/* DeepSpeed's loss scaler object: LossScaler (static) or DynamicLossScaler
 * with every attribute its constructor sets. */
static void put_scaler(ZnPw *w, const Out *o) {
    const ZnLossScaler *s = &o->c->st.scaler;
    zn_pw_object(w, s->dynamic ? "deepspeed.runtime.fp16.loss_scaler DynamicLossScaler"
                               : "deepspeed.runtime.fp16.loss_scaler LossScaler");
    zn_pw_kv_float(w, "cur_scale", s->cur_scale);
    zn_pw_kv_bool(w, "dynamic", s->dynamic);
    if (s->dynamic) {
        zn_pw_kv_int(w, "cur_iter", s->cur_iter);
        zn_pw_kv_int(w, "last_overflow_iter", s->last_overflow_iter);
        zn_pw_kv_float(w, "scale_factor", s->scale_factor);
        zn_pw_kv_int(w, "scale_window", s->scale_window);
        zn_pw_kv_float(w, "min_scale", s->min_scale);
        zn_pw_kv_int(w, "delayed_shift", s->delayed_shift);
        zn_pw_kv_int(w, "cur_hysteresis", s->cur_hysteresis);
        zn_pw_kv_bool(w, "consecutive_hysteresis", s->consecutive_hysteresis);
        zn_pw_kv_bool(w, "raise_error_at_min_scale", s->raise_error_at_min_scale);
        zn_pw_str(w, "dtype");
        zn_pw_global(w, o->c->dt == ZN_BF16 ? "torch bfloat16" : "torch float16");
    }
    zn_pw_object_end(w);
}

/* torch's optimizer state_dict: state {i: step, exp_avg, exp_avg_sq} over
 * the flat tensors (their storages made by moment(i, which)), and
 * param_groups, group g owning the flat tensors listed by owner. */
typedef int (*MomentFn)(const Out *o, int rank, int i, int which, Runs *r, uint64_t *numel, ZnErr *err);

static int put_base_state(ZnPw *w, const Out *o, int rank, int nflat, const int *owner, MomentFn moment, Storages *st,
                          ZnErr *err) {
    int rc = 0;
    zn_pw_dict(w);
    zn_pw_str(w, "state");
    zn_pw_dict(w);
    for (int i = 0; i < nflat && !rc; i++) {
        zn_pw_int(w, i);
        zn_pw_dict(w);
        zn_pw_kv_int(w, "step", o->c->st.opt_step);
        for (int which = ZN_DS_EXP_AVG; which <= ZN_DS_EXP_AVG_SQ && !rc; which++) {
            long key;
            uint64_t n = 0;
            Runs *r = storage_new(st, &key, err);
            rc = r ? moment(o, rank, i, which, r, &n, err) : ZN_E_NOMEM;
            const int64_t shape = (int64_t)n;
            zn_pw_str(w, which == ZN_DS_EXP_AVG ? "exp_avg" : "exp_avg_sq");
            zn_pw_tensor(w, "FloatStorage", key, n, 1, &shape);
        }
        zn_pw_dict_end(w);
    }
    zn_pw_dict_end(w);
    zn_pw_str(w, "param_groups");
    zn_pw_list(w);
    for (int g = 0; g < o->ngroups; g++) {
        zn_pw_dict(w);
        zn_pw_kv_float(w, "weight_decay", o->wd[g]);
        zn_pw_kv_float(w, "lr", o->lr);
        zn_pw_kv_bool(w, "bias_correction", o->cfg.bias_correction);
        zn_pw_str(w, "betas");
        zn_pw_list(w);
        zn_pw_float(w, o->beta1);
        zn_pw_float(w, o->beta2);
        zn_pw_list_end(w);
        zn_pw_kv_float(w, "eps", o->cfg.eps);
        zn_pw_str(w, "step");   /* FusedAdam keeps the count per parameter; the group's stays 0 */
        zn_pw_int(w, 0);
        zn_pw_str(w, "params");
        zn_pw_list(w);
        for (int i = 0; i < nflat; i++)
            if (owner[i] == g) zn_pw_int(w, i);
        zn_pw_list_end(w);
        zn_pw_dict_end(w);
    }
    zn_pw_list_end(w);
    zn_pw_dict_end(w);
    return rc;
}

/* ---- stages 1-2: flat groups sliced by rank -------------------------------- */

static long group_numel(const Out *o, int g) {
    long n = 0;
    for (int i = 0; i < o->nmember[g]; i++) n += param(o, o->member[g][i])->numel;
    return n;
}
/* Each rank's slice of group g: the group padded to a multiple of 2W, cut in W. */
static long slice_numel(const Out *o, int g) {
    const long a = 2L * o->world;
    return (group_numel(o, g) + a - 1) / a * a / o->world;
}
/* The padding in rank r's slice of group g (stage_1_and_2.py groups_padding). */
static long slice_padding(const Out *o, int g, int r) {
    const long n = group_numel(o, g), P = slice_numel(o, g), left = (long)r * P;
    return n <= left ? P : n < left + P ? left + P - n : 0;
}

/* Elements [lo, hi) of group g's flat vector of state s, as runs. */
static int flat_runs(const Out *o, int s, int g, long lo, long hi, Runs *r, ZnErr *err) {
    long at = 0;
    int rc = 0;
    for (int i = 0; i < o->nmember[g] && !rc; i++) {
        const int p = o->member[g][i];
        const long n = param(o, p)->numel, a = lo > at ? lo : at, b = hi < at + n ? hi : at + n;
        if (a < b) rc = runs_add(r, o->c->full[s] + o->off[p] + (a - at), (size_t)(b - a) * 4, err);
        at += n;
    }
    if (!rc && hi > at) rc = runs_add(r, NULL, (size_t)(hi - (lo > at ? lo : at)) * 4, err);   /* the padding */
    return rc;
}

static int flat_moment(const Out *o, int rank, int g, int which, Runs *r, uint64_t *numel, ZnErr *err) {
    const long P = slice_numel(o, g);
    *numel = (uint64_t)P;
    return flat_runs(o, which, g, rank * P, (rank + 1) * P, r, err);
}

static void put_mappings(ZnPw *w, const Out *o, int rank) {
    zn_pw_list(w);
    for (int g = 0; g < o->ngroups; g++) {
        const long P = slice_numel(o, g), lo = rank * P, hi = lo + P;
        long at = 0;
        zn_pw_ordered_dict(w);
        for (int i = 0; i < o->nmember[g]; i++) {
            const int p = o->member[g][i];
            const long n = param(o, p)->numel, a = lo > at ? lo : at, b = hi < at + n ? hi : at + n;
            if (a < b) {
                zn_pw_str(w, param(o, p)->name);
                zn_pw_object(w, "deepspeed.utils.tensor_fragment fragment_address");
                zn_pw_kv_int(w, "numel", b - a);
                zn_pw_kv_int(w, "start", a - lo);
                zn_pw_object_end(w);
            }
            at += n;
        }
        zn_pw_dict_end(w);
    }
    zn_pw_list_end(w);
}

static void put_common(ZnPw *w, const Out *o) {
    zn_pw_str(w, "loss_scaler");
    put_scaler(w, o);
    zn_pw_kv_bool(w, "dynamic_loss_scale", o->c->st.scaler.dynamic);
    zn_pw_kv_bool(w, "overflow", 0);
}

static void optim_file_name(const Out *o, int rank, char *name, size_t n) {
    snprintf(name, n, "%szero_pp_rank_%d_mp_rank_00_optim_states", o->c->dt == ZN_BF16 ? "bf16_" : "", rank);
}

/* The optimizer state dict's end: ds_config and ds_version beside it. */
static int finish_optim(const Out *o, int rank, ZnPw *w, Storages *st, ZnErr *err) {
    zn_pw_dict_end(w);
    zn_pw_str(w, "ds_config");
    put_config(w, o);
    zn_pw_str(w, "ds_version");
    zn_pw_str(w, DS_VERSION);
    zn_pw_dict_end(w);
    char name[128];
    optim_file_name(o, rank, name, sizeof name);
    return write_pt(o, name, w, st, err);
}

static int write_flat_optim(const Out *o, int rank, ZnErr *err) {
    ZnPw w;
    Storages st = {0};
    int owner[2] = {0, 1};
    zn_pw_begin(&w);
    zn_pw_dict(&w);
    zn_pw_str(&w, "optimizer_state_dict");
    zn_pw_dict(&w);
    put_common(&w, o);
    zn_pw_kv_float(&w, "clip_grad", o->cfg.gradient_clipping);
    zn_pw_str(&w, "base_optimizer_state");
    int rc = put_base_state(&w, o, rank, o->ngroups, owner, flat_moment, &st, err);
    zn_pw_str(&w, "single_partition_of_fp32_groups");
    zn_pw_list(&w);
    for (int g = 0; g < o->ngroups && !rc; g++) {   /* saved without the padding */
        const long P = slice_numel(o, g), lean = P - slice_padding(o, g, rank);
        long key;
        Runs *r = storage_new(&st, &key, err);
        rc = r ? flat_runs(o, ZN_DS_FP32, g, rank * P, rank * P + lean, r, err) : ZN_E_NOMEM;
        const int64_t shape = lean;
        zn_pw_tensor(&w, "FloatStorage", key, (uint64_t)lean, 1, &shape);
    }
    zn_pw_list_end(&w);
    zn_pw_str(&w, "zero_stage");
    zn_pw_enum(&w, "deepspeed.runtime.zero.config ZeroStageEnum", o->stage);
    zn_pw_str(&w, "group_paddings");
    zn_pw_list(&w);
    for (int g = 0; g < o->ngroups; g++) zn_pw_int(&w, slice_padding(o, g, rank));
    zn_pw_list_end(&w);
    zn_pw_str(&w, "param_alignment_paddings");   /* parameter_alignment off: no padding between parameters */
    zn_pw_list(&w);
    for (int g = 0; g < o->ngroups; g++) {
        zn_pw_list(&w);
        for (int i = 0; i < o->nmember[g]; i++) zn_pw_int(&w, 0);
        zn_pw_list_end(&w);
    }
    zn_pw_list_end(&w);
    zn_pw_str(&w, "partition_count");
    zn_pw_list(&w);
    for (int g = 0; g < o->ngroups; g++) zn_pw_int(&w, o->world);
    zn_pw_list_end(&w);
    zn_pw_str(&w, "ds_version");
    zn_pw_str(&w, DS_VERSION);
    zn_pw_str(&w, "param_slice_mappings");
    put_mappings(&w, o, rank);
    if (!rc) rc = finish_optim(o, rank, &w, &st, err);
    else zn_pw_free(&w);
    storages_free(&st);
    return rc;
}

/* ---- stage 3: per-parameter partitions ------------------------------------ */

static long part_numel(const Out *o, int p) { return (param(o, p)->numel + o->world - 1) / o->world; }

/* Rank's partitions of sub-group k's parameters in state s, each padded to
 * ceil(n/W). */
static int sub_runs(const Out *o, int rank, int k, int s, Runs *r, uint64_t *numel, ZnErr *err) {
    const int g = o->sub_group[k];
    int rc = 0;
    *numel = 0;
    for (int i = o->sub[k].first; i < o->sub[k].first + o->sub[k].n && !rc; i++) {
        const int p = o->member[g][i];
        const long ps = part_numel(o, p), n = param(o, p)->numel;
        const long lo = rank * ps < n ? rank * ps : n, hi = (rank + 1) * ps < n ? (rank + 1) * ps : n;
        rc = runs_add(r, o->c->full[s] + o->off[p] + lo, (size_t)(hi - lo) * 4, err);
        if (!rc) rc = runs_add(r, NULL, (size_t)(ps - (hi - lo)) * 4, err);
        *numel += (uint64_t)ps;
    }
    return rc;
}

static int sub_moment(const Out *o, int rank, int k, int which, Runs *r, uint64_t *numel, ZnErr *err) {
    return sub_runs(o, rank, k, which, r, numel, err);
}

static int write_part_optim(const Out *o, int rank, ZnErr *err) {
    ZnPw w;
    Storages st = {0};
    zn_pw_begin(&w);
    zn_pw_dict(&w);
    zn_pw_str(&w, "optimizer_state_dict");
    zn_pw_dict(&w);
    zn_pw_str(&w, "zero_stage");
    zn_pw_enum(&w, "deepspeed.runtime.zero.config ZeroStageEnum", o->stage);
    put_common(&w, o);
    zn_pw_kv_int(&w, "partition_count", o->world);
    zn_pw_str(&w, "optimizer_state_dict");
    int rc = put_base_state(&w, o, rank, o->nsub, o->sub_group, sub_moment, &st, err);
    zn_pw_str(&w, "fp32_flat_groups");
    zn_pw_list(&w);
    for (int k = 0; k < o->nsub && !rc; k++) {
        long key;
        uint64_t n = 0;
        Runs *r = storage_new(&st, &key, err);
        rc = r ? sub_runs(o, rank, k, ZN_DS_FP32, r, &n, err) : ZN_E_NOMEM;
        const int64_t shape = (int64_t)n;
        zn_pw_tensor(&w, "FloatStorage", key, n, 1, &shape);
    }
    zn_pw_list_end(&w);
    if (!rc) rc = finish_optim(o, rank, &w, &st, err);
    else zn_pw_free(&w);
    storages_free(&st);
    return rc;
}

/* stage3.py _create_fp16_sub_groups: parameters taken in order until their
 * partitions reach sub_group_size; the group's last one closes a sub-group. */
static void make_sub_groups(Out *o) {
    o->nsub = 0;
    for (int g = 0; g < o->ngroups; g++) {
        long total = 0, acc = 0;
        for (int i = 0; i < o->nmember[g]; i++) total += part_numel(o, o->member[g][i]);
        int first = 0;
        for (int i = 0; i < o->nmember[g]; i++) {
            acc += part_numel(o, o->member[g][i]);
            if (o->cfg.zero.sub_group_size >= total ? i == o->nmember[g] - 1
                                                     : acc >= o->cfg.zero.sub_group_size || i == o->nmember[g] - 1) {
                o->sub[o->nsub] = (SubGroup){first, i + 1 - first};
                o->sub_group[o->nsub++] = g;
                first = i + 1;
                acc = 0;
            }
        }
    }
}

/* ---- the command ---------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Whether a manifest's config (JSON) names the batch itself: 1 or 0, or
 * ZN_E_NOMEM's code with err set. */
static int config_has_batch(const char *text, int *has, ZnErr *err) {
    *has = 0;
    if (!text) return 0;
    zn_json_track();
    cJSON *j = zn_json_parse(text, strlen(text) + 1, NULL, 1);
    if (zn_json_failed()) {
        cJSON_Delete(j);
        return zn_nomem(err);
    }
    *has = cJSON_GetObjectItemCaseSensitive(j, "train_batch_size") != NULL ||
           cJSON_GetObjectItemCaseSensitive(j, "train_micro_batch_size_per_gpu") != NULL;
    cJSON_Delete(j);
    return 0;
}

/* The run's config resolved as it trained: its file, its world size and stage. */
static int resolve_config(Out *o, ZnErr *err) {
    const ZnCkptWhole *c = o->c;
    ZnConfigArgs a;
    zn_config_args_init(&a);
    a.world_size = c->world;
    a.stage = c->stage;
    a.dtype = (int)c->dt;
    /* a batch the flags gave (no config, or one without a batch): the run's
       own, from its samples (a config's batch stands: a resharded resume
       changed the train batch part way) */
    int has_batch, rc = config_has_batch(c->config_text, &has_batch, err);
    if (rc) return zn_err_prefix(err, "to-deepspeed: ");
    if (c->st.global_step > 0 && !has_batch) a.train_batch_size = c->st.global_samples / c->st.global_step;
    rc = zn_config_parse(c->config_text, c->config_text ? strlen(c->config_text) : 0, "the checkpoint's config", &a,
                             &o->cfg, err);
    if (rc) zn_err_prefix(err, "to-deepspeed: ");
    return rc;
}

static int plan_out(Out *o, ZnErr *err) {
    const ZnCkptWhole *c = o->c;
    o->world = c->world;
    o->stage = c->stage;
    o->per_param = c->plan.shard == ZN_SHARD_PARAM;
    if (c->plan.ds_optimizer == ZN_DS_FP16_OPTIMIZER)
        return zn_err(err, ZN_E_USAGE, "to-deepspeed: the checkpoint was saved at stage %d; DeepSpeed's ZeRO "
                      "checkpoints are stages 1-3 (stage 0's is torch's own optimizer state)", c->stage);
    int rc = resolve_config(o, err);
    if (rc) return rc;
    if (o->cfg.zero.round_robin_gradients)
        return zn_err(err, ZN_E_USAGE, "to-deepspeed: zero_optimization.round_robin_gradients reorders DeepSpeed's "
                      "flat groups; zinc writes the order without it");
    if (o->cfg.zero.mics_shard_size > 0)
        return zn_err(err, ZN_E_USAGE, "to-deepspeed: mics_shard_size: DeepSpeed 0.19.8 has removed MiCS");
    const ZnModel *m = &c->model;
    long at = 0;
    for (int p = 0; p < m->nparams; p++) {
        o->off[p] = at;
        at += m->params[p].numel;
    }
    /* the Trainer's groups: with weight decay, then without */
    int n[2] = {0, 0}, member[2][ZN_MAX_PARAMS];
    for (int p = 0; p < m->nparams; p++) {
        const int g = zn_decay_param(m, &o->cfg, p) ? 0 : 1;
        member[g][n[g]++] = p;
    }
    o->ngroups = 0;
    for (int g = 0; g < 2; g++) {
        if (!n[g]) continue;
        memcpy(o->member[o->ngroups], member[g], (size_t)n[g] * sizeof(int));
        o->nmember[o->ngroups] = n[g];
        o->wd[o->ngroups++] = g == 0 ? o->cfg.weight_decay : 0.0;
    }
    if (o->per_param) make_sub_groups(o);
    /* the lr and betas the optimizer holds for the next step: the schedule
       at its last iteration, as DeepSpeed's scheduler left them */
    ZnLrSched s;
    if ((rc = zn_sched_init(&s, &o->cfg.sched, o->cfg.lr, o->cfg.beta1, o->cfg.beta2, err))) return rc;
    o->lr = zn_sched_lr_at(&s, c->st.sched_t);
    zn_sched_betas_at(&s, c->st.sched_t, &o->beta1, &o->beta2);
    return 0;
}

static int write_all(const Out *o, ZnErr *err) {
    const ZnCkptWhole *c = o->c;
    void *module16 = NULL;
    const long total = zn_model_numel(&c->model);
    if (!o->per_param && c->dt != ZN_F32) {   /* the module's 16-bit weights: the masters rounded */
        if (!(module16 = zn_malloc(ZN_HOST_IO, (size_t)total * 2 + 2))) return zn_nomem(err);
        uint16_t *h = module16;
        for (long i = 0; i < total; i++) h[i] = c->dt == ZN_F16 ? zn_f32_to_f16(c->full[0][i]) : zn_f32_to_bf16(c->full[0][i]);
    }
    int rc = 0;
    for (int r = 0; r < o->world && !rc; r++) {
        if (o->per_param || r == 0) rc = write_model_states(o, r, module16, err);
        if (!rc) rc = o->per_param ? write_part_optim(o, r, err) : write_flat_optim(o, r, err);
    }
    free(module16);
    return rc;
}

int zn_ds_write(const char *in, const char *out, ZnDsWriteSummary *sum, ZnErr *err) {
    ZnCkptWhole c;
    int rc = zn_ckpt_read_whole(in, &c, err);
    if (rc) return rc;
    Out *o = zn_calloc(ZN_HOST_IO, 1, sizeof *o);
    if (!o) {
        zn_ckpt_whole_free(&c);
        return zn_nomem(err);
    }
    o->c = &c;
    rc = plan_out(o, err);
    if (!rc && c.config_text && !(o->config = cJSON_Parse(c.config_text))) rc = zn_nomem(err);
    char tag[64], tmp[PATHN], dst[PATHN], latest[PATHN];
    snprintf(tag, sizeof tag, "global_step%lld", (long long)c.st.global_step);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp.%d", out, tag, (int)getpid());
    snprintf(dst, sizeof dst, "%s/%s", out, tag);
    snprintf(latest, sizeof latest, "%s/latest", out);
    if (!rc && access(dst, F_OK) == 0)
        rc = zn_err(err, ZN_E_USAGE, "to-deepspeed: %s exists; zinc does not write over a checkpoint", dst);
    if (!rc) rc = zn_mkdir_p(tmp, err);
    o->tagdir = tmp;
    if (!rc) rc = write_all(o, err);
    if (!rc && rename(tmp, dst) != 0)
        rc = zn_err(err, ZN_E_IO, "to-deepspeed: renaming %s to %s failed", tmp, dst);
    if (!rc) rc = zn_fsync_dir(out, err);
    if (!rc) rc = zn_write_file_atomic(latest, tag, strlen(tag), err);
    if (rc) {   /* nothing half-written stays */
        nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    } else {
        sum->stage = o->stage;
        sum->world = o->world;
        sum->ngroups = o->per_param ? o->nsub : o->ngroups;
        sum->nfiles = o->per_param ? 2 * o->world : o->world + 1;
        sum->global_steps = c.st.global_step;
        snprintf(sum->tag, sizeof sum->tag, "%s", tag);
    }
    cJSON_Delete(o->config);
    free(o);
    zn_ckpt_whole_free(&c);
    return rc;
}
