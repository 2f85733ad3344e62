/* checkpoint.c: save, verify, load, reshard, convert (spec Z-CKPT-*). */
#include "io/checkpoint.h"
#include "io/ds_ckpt.h"
#include <xxhash.h>
#include "core/alloc.h"
#include "core/json_track.h"
#include "engine/decay.h"
#include "core/fileio.h"
#include "core/hash.h"
#include "io/safetensors.h"
#include "core/half.h"
#include "engine/model.h"
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZN_CKPT_FORMAT "zinc-checkpoint"
#define ZN_UNIV_FORMAT "zinc-universal"
#define ZN_CKPT_VERSION 2       /* 2: files checksummed with XXH3-64; 1 (FNV-1a 64) still loads */
#define MANIFEST_MAX (64u << 20)
#define FILE_MAX ((size_t)1 << 40)
#define PATH_MAX_ZN 4096

/* ---------------------------------------------------------------------- */
/* small helpers */

static uint64_t fnv64(const void *p, size_t n) {
    return zn_fnv1a64(ZN_FNV_INIT, p, n);
}

/* The checksum kinds a manifest may record per file: XXH3-64 (written since
 * manifest version 2) and FNV-1a 64 (version 1 checkpoints still load). */
enum { SUM_XXH3 = 0, SUM_FNV = 1 };
static const char *SUM_KEY[2] = {"xxh3_64", "fnv1a64"};

/* Paths: every folder zinc is given is checked to be under PATH_ROOT_MAX
 * bytes (too_long), and every name it appends is short, so the PATH_MAX_ZN
 * buffers below never truncate. vsnprintf keeps gcc's truncation analysis
 * out of the way of that argument. */
#define PATH_ROOT_MAX ZN_CKPT_PATH_MAX
static void pathf(char *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, PATH_MAX_ZN, fmt, ap);
    va_end(ap);
}
static void join(char *out, const char *a, const char *b) { pathf(out, "%s/%s", a, b); }
static int too_long(const char *p, ZnErr *err) {
    return strlen(p) > PATH_ROOT_MAX ? zn_err(err, ZN_E_USAGE, "path too long (%zu bytes): %.60s...", strlen(p), p) : 0;
}

static void rank_file_name(char *out, size_t n, int r) {
    snprintf(out, n, "zero_pp_rank_%d_optim_states.safetensors", r);
}

static const char *MODEL_FILE = "mp_rank_00_model_states.safetensors";

ZnDtype zn_ckpt_dtype_from_name(const char *s) {
    if (!s) return ZN_DTYPE_N;
    if (!strcmp(s, "fp32")) return ZN_F32;
    if (!strcmp(s, "fp16")) return ZN_F16;
    if (!strcmp(s, "bf16")) return ZN_BF16;
    return ZN_DTYPE_N;
}

/* model-dtype values (fp32 on the 16-bit grid) as the bytes a 16-bit dtype
 * stores; fp32 values are written as they are, so never come here */
static void *encode16(const float *x, long n, ZnDtype dt) {
    uint16_t *o = zn_malloc(ZN_HOST_IO, (size_t)(n > 0 ? n : 1) * 2);
    for (long i = 0; o && i < n; i++) o[i] = dt == ZN_F16 ? zn_f32_to_f16(x[i]) : zn_f32_to_bf16(x[i]);
    return o;
}

/* ---------------------------------------------------------------------- */
/* the manifest: what a checkpoint holds and how it was laid out */

typedef struct {
    char path[PATH_MAX_ZN];     /* the manifest, for messages */
    char tag[256];
    char model[512];
    int world, stage;
    ZnPlan plan;                /* the saving stage's plan */
    ZnDtype dt;
    ZnLayoutOpts lopts;
    long aligned_numel, part_numel, rank_numel;
    int nparams;
    ZnParamSpec params[ZN_MAX_PARAMS];   /* GPT-2 has 12 per block + 4 */
    long flat_offset[ZN_MAX_PARAMS], pn[ZN_MAX_PARAMS];
    ZnEngineState st;
    int nfiles;
    struct { char name[128]; uint64_t bytes, hash; int kind; } files[4096 + 1];   /* kind: SUM_* */
    int naliases;               /* tied weights: alias name -> the parameter it shares */
    struct { char name[ZN_MAX_NAME]; int param; } aliases[2 * ZN_MAX_LAYERS];
    cJSON *config;              /* owned; may be NULL */
    /* the parameters saved without weight decay (Z-OPT-020): how many, a
       hash of their names, the first */
    int n_nwd;
    uint64_t nwd_hash;
    char nwd_first[ZN_MAX_NAME];
} Manifest;

static cJSON *layout_json(const ZnLayout *L, const ZnLayoutOpts *lo) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "round_robin_gradients", lo->round_robin_gradients);
    cJSON_AddNumberToObject(j, "sub_group_size", (double)lo->sub_group_size);
    cJSON_AddNumberToObject(j, "reduce_bucket_size", (double)lo->reduce_bucket_size);
    cJSON_AddNumberToObject(j, "aligned_numel", (double)L->aligned_numel);
    cJSON_AddNumberToObject(j, "partition_numel", (double)L->part_numel);
    cJSON_AddNumberToObject(j, "rank_numel", (double)L->part_numel);   /* Z-LAY-010: the rank's whole partition */
    cJSON *pad = cJSON_AddArrayToObject(j, "rank_padding");   /* elements of padding each rank holds */
    for (int r = 0; r < L->world; r++) zn_json_add(pad, NULL, cJSON_CreateNumber((double)zn_layout_rank_padding(L, r)));
    cJSON *ps = cJSON_AddArrayToObject(j, "params");
    for (int p = 0; p < L->nparams; p++) {
        cJSON *o = zn_json_add(ps, NULL, cJSON_CreateObject());
        cJSON_AddStringToObject(o, "name", L->params[p].name);
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < L->params[p].ndim; d++) zn_json_add(sh, NULL, cJSON_CreateNumber((double)L->params[p].shape[d]));
        cJSON_AddNumberToObject(o, "numel", (double)L->params[p].numel);
        cJSON_AddNumberToObject(o, "model_offset", (double)L->model_offset[p]);
        cJSON_AddNumberToObject(o, "flat_offset", L->shard != ZN_SHARD_PARAM ? (double)L->flat_offset[p] : -1.0);
        cJSON_AddNumberToObject(o, "partition_numel", L->shard == ZN_SHARD_PARAM ? (double)L->s3_pn[p] : -1.0);
    }
    return j;
}

/* The manifest's own checksum: FNV-1a 64 over its compact form without the
 * field, so a flipped byte in the manifest itself is detected. */
static void add_self_checksum(cJSON *doc) {
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "manifest_fnv1a64");
    char *compact = zn_json_print(doc, 0);
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", compact ? (unsigned long long)fnv64(compact, strlen(compact)) : 0ull);
    cJSON_free(compact);
    cJSON_AddStringToObject(doc, "manifest_fnv1a64", hex);
}

static cJSON *state_json(const ZnEngineState *s, long next_sample) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "global_step", (double)s->global_step);
    cJSON_AddNumberToObject(j, "global_samples", (double)s->global_samples);
    cJSON_AddNumberToObject(j, "skipped_steps", (double)s->skipped_steps);
    cJSON_AddNumberToObject(j, "optimizer_step", (double)s->opt_step);
    cJSON_AddNumberToObject(j, "scheduler_last_batch_iteration", (double)s->sched_t);
    cJSON_AddNumberToObject(j, "data_next_sample", (double)next_sample);
    cJSON *ls = cJSON_AddObjectToObject(j, "loss_scaler");
    cJSON_AddBoolToObject(ls, "dynamic", s->scaler.dynamic);
    cJSON_AddNumberToObject(ls, "cur_scale", s->scaler.cur_scale);
    cJSON_AddNumberToObject(ls, "cur_iter", (double)s->scaler.cur_iter);
    cJSON_AddNumberToObject(ls, "last_overflow_iter", (double)s->scaler.last_overflow_iter);
    cJSON_AddNumberToObject(ls, "cur_hysteresis", (double)s->scaler.cur_hysteresis);
    return j;
}

/* typed getters that fail with the manifest path and the JSON path */
static int get_num(const Manifest *m, const cJSON *o, const char *key, const char *where, double lo, double hi,
                   double *out, ZnErr *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return zn_err(err, ZN_E_CORRUPT, "%s: %s%s: missing or out of range", m->path, where, key);
    *out = v->valuedouble;
    return 0;
}
static int get_long(const Manifest *m, const cJSON *o, const char *key, const char *where, long lo, long *out,
                    ZnErr *err) {
    double d = 0;
    int rc = get_num(m, o, key, where, (double)lo, 9007199254740992.0, &d, err);
    if (!rc && d != floor(d)) rc = zn_err(err, ZN_E_CORRUPT, "%s: %s%s: not an integer", m->path, where, key);
    if (!rc) *out = (long)d;
    return rc;
}

/* m: zeroed; text: n bytes followed by a NUL (cJSON's recipe); path names
 * it in messages */
static int manifest_from_text(Manifest *m, const char *path, const char *text, size_t n, const char *want_format,
                              ZnErr *err) {
    snprintf(m->path, sizeof m->path, "%s", path);
    int rc = 0;
    const char *end = NULL;
    zn_json_track();
    cJSON *doc = zn_json_parse(text, n + 1, &end, 1);
    if (zn_json_failed()) {
        rc = zn_err(err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG " while reading it", path);
        goto out;
    }
    if (!cJSON_IsObject(doc)) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s: not a JSON object (byte %ld)", path, end ? (long)(end - text) : 0L);
        goto out;
    }
    const char *self = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "manifest_fnv1a64"));
    if (self) {   /* written by zn_ckpt_save: verify the manifest itself */
        uint64_t want = strtoull(self, NULL, 16);
        cJSON_DeleteItemFromObjectCaseSensitive(doc, "manifest_fnv1a64");
        char *compact = zn_json_print(doc, 0);
        uint64_t got = compact ? fnv64(compact, strlen(compact)) : 0;
        cJSON_free(compact);
        if (!compact) {
            rc = zn_err(err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG " while verifying it", path);
            goto out;
        }
        if (got != want) {
            rc = zn_err(err, ZN_E_CORRUPT, "%s: checksum %016llx, recorded %016llx (the manifest is corrupt)", path,
                        (unsigned long long)got, (unsigned long long)want);
            goto out;
        }
    } else if (!strcmp(want_format, ZN_CKPT_FORMAT)) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s: manifest_fnv1a64: missing (not a complete zinc manifest)", path);
        goto out;
    }
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "format"));
    if (!fmt || strcmp(fmt, want_format)) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s: format is '%s', expected '%s'", path, fmt ? fmt : "(none)", want_format);
        goto out;
    }
    long v, x;
    if ((rc = get_long(m, doc, "version", "", 1, &v, err))) goto out;
    if (v < 1 || v > ZN_CKPT_VERSION) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s: version %ld, this zinc reads 1..%d", path, v, ZN_CKPT_VERSION);
        goto out;
    }
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "model"));
    if (!s) { rc = zn_err(err, ZN_E_CORRUPT, "%s: model: missing", path); goto out; }
    snprintf(m->model, sizeof m->model, "%s", s);
    s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "tag"));
    snprintf(m->tag, sizeof m->tag, "%s", s ? s : "");
    if ((rc = get_long(m, doc, "world_size", "", 1, &x, err))) goto out;
    if (x > 4096) { rc = zn_err(err, ZN_E_CORRUPT, "%s: world_size %ld too large", path, x); goto out; }
    m->world = (int)x;
    if ((rc = get_long(m, doc, "stage", "", 0, &x, err))) goto out;
    ZnErr why = {0};
    /* the saved files' layout depends on the stage's holds alone (zn_plan_same_layout),
       so the manifest records the stage */
    if (x != (int)x || zn_config_stage_plan((int)x, &m->plan, &why)) { rc = zn_err(err, ZN_E_CORRUPT, "%s: stage %ld", path, x); goto out; }
    m->stage = (int)x;
    m->dt = zn_ckpt_dtype_from_name(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "model_dtype")));
    if (m->dt == ZN_DTYPE_N) { rc = zn_err(err, ZN_E_CORRUPT, "%s: model_dtype: expected fp32, fp16 or bf16", path); goto out; }
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(doc, "layout");
    if (!cJSON_IsObject(lay)) { rc = zn_err(err, ZN_E_CORRUPT, "%s: layout: missing", path); goto out; }
    m->lopts.round_robin_gradients = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lay, "round_robin_gradients"));
    if ((rc = get_long(m, lay, "sub_group_size", "layout.", LONG_MIN / 2, &m->lopts.sub_group_size, err)) ||
        (rc = get_long(m, lay, "reduce_bucket_size", "layout.", 1, &m->lopts.reduce_bucket_size, err)) ||
        (rc = get_long(m, lay, "aligned_numel", "layout.", 0, &m->aligned_numel, err)) ||
        (rc = get_long(m, lay, "partition_numel", "layout.", 0, &m->part_numel, err)) ||
        (rc = get_long(m, lay, "rank_numel", "layout.", 0, &m->rank_numel, err)))
        goto out;
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(lay, "params");
    if (!cJSON_IsArray(ps) || cJSON_GetArraySize(ps) < 1 || cJSON_GetArraySize(ps) > ZN_MAX_PARAMS) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s: layout.params: missing or of a bad length", path);
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, ps) {
        ZnParamSpec *p = &m->params[m->nparams];
        char where[64];
        snprintf(where, sizeof where, "layout.params[%d].", m->nparams);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        if (!name || strlen(name) >= ZN_MAX_NAME || !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > ZN_MAX_DIMS) {
            rc = zn_err(err, ZN_E_CORRUPT, "%s: %sname/shape: missing or malformed", path, where);
            goto out;
        }
        snprintf(p->name, sizeof p->name, "%s", name);
        p->numel = 1;
        const cJSON *d;
        cJSON_ArrayForEach(d, sh) {
            if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12 || d->valuedouble != floor(d->valuedouble)) {
                rc = zn_err(err, ZN_E_CORRUPT, "%s: %sshape: bad dimension", path, where);
                goto out;
            }
            /* the product stays within 2^53 (the numel field's own limit), so
               the long multiplication below cannot overflow */
            if ((double)p->numel * d->valuedouble > 9007199254740992.0) {
                rc = zn_err(err, ZN_E_CORRUPT, "%s: %sshape: more than 2^53 elements", path, where);
                goto out;
            }
            p->shape[p->ndim++] = (long)d->valuedouble;
            p->numel *= (long)d->valuedouble;
        }
        long numel;
        if ((rc = get_long(m, it, "numel", where, 0, &numel, err))) goto out;
        if (numel != p->numel) { rc = zn_err(err, ZN_E_CORRUPT, "%s: %snumel %ld does not match its shape", path, where, numel); goto out; }
        if ((rc = get_long(m, it, "flat_offset", where, -1, &m->flat_offset[m->nparams], err)) ||
            (rc = get_long(m, it, "partition_numel", where, -1, &m->pn[m->nparams], err)))
            goto out;
        m->nparams++;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(doc, "state");
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(st, "loss_scaler");
    if (!cJSON_IsObject(st) || !cJSON_IsObject(ls)) { rc = zn_err(err, ZN_E_CORRUPT, "%s: state: missing", path); goto out; }
    long ci, lo, hy;
    if ((rc = get_long(m, st, "global_step", "state.", 0, &m->st.global_step, err)) ||
        (rc = get_long(m, st, "global_samples", "state.", 0, &m->st.global_samples, err)) ||
        (rc = get_long(m, st, "skipped_steps", "state.", 0, &m->st.skipped_steps, err)) ||
        (rc = get_long(m, st, "optimizer_step", "state.", 0, &m->st.opt_step, err)) ||
        (rc = get_long(m, st, "scheduler_last_batch_iteration", "state.", -1, &m->st.sched_t, err)) ||
        (rc = get_num(m, ls, "cur_scale", "state.loss_scaler.", 0, 1e300, &m->st.scaler.cur_scale, err)) ||
        (rc = get_long(m, ls, "cur_iter", "state.loss_scaler.", 0, &ci, err)) ||
        (rc = get_long(m, ls, "last_overflow_iter", "state.loss_scaler.", -1, &lo, err)) ||
        (rc = get_long(m, ls, "cur_hysteresis", "state.loss_scaler.", -1000000, &hy, err)))
        goto out;
    m->st.scaler.dynamic = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ls, "dynamic"));
    m->st.scaler.cur_iter = ci;
    m->st.scaler.last_overflow_iter = lo;
    m->st.scaler.cur_hysteresis = (int)hy;
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(doc, "files");
    if (!cJSON_IsArray(fs) || cJSON_GetArraySize(fs) > 4096) { rc = zn_err(err, ZN_E_CORRUPT, "%s: files: missing", path); goto out; }
    cJSON_ArrayForEach(it, fs) {
        const char *fn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
        int kind = cJSON_GetObjectItemCaseSensitive(it, SUM_KEY[SUM_XXH3]) ? SUM_XXH3 : SUM_FNV;
        const char *hx = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, SUM_KEY[kind]));
        long bytes;
        char where[64];
        snprintf(where, sizeof where, "files[%d].", m->nfiles);
        if (!fn || !hx || strlen(fn) >= sizeof m->files[0].name || strchr(fn, '/') ||
            (rc = get_long(m, it, "bytes", where, 0, &bytes, err))) {
            if (!rc) rc = zn_err(err, ZN_E_CORRUPT, "%s: %s: malformed", path, where);
            goto out;
        }
        snprintf(m->files[m->nfiles].name, sizeof m->files[0].name, "%s", fn);
        m->files[m->nfiles].bytes = (uint64_t)bytes;
        m->files[m->nfiles].hash = strtoull(hx, NULL, 16);
        m->files[m->nfiles].kind = kind;
        m->nfiles++;
    }
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(doc, "shared_params");
    cJSON_ArrayForEach(it, sh) {   /* absent in universal manifests: no aliases */
        const char *target = cJSON_GetStringValue(it);
        int p = 0;
        while (target && p < m->nparams && strcmp(m->params[p].name, target)) p++;
        if (!cJSON_IsObject(sh) || !it->string || strlen(it->string) >= ZN_MAX_NAME || !target || p == m->nparams ||
            m->naliases == 2 * ZN_MAX_LAYERS) {
            rc = zn_err(err, ZN_E_CORRUPT, "%s: shared_params: malformed", path);
            goto out;
        }
        snprintf(m->aliases[m->naliases].name, ZN_MAX_NAME, "%s", it->string);
        m->aliases[m->naliases++].param = p;
    }
    const cJSON *nwd = cJSON_GetObjectItemCaseSensitive(doc, "no_weight_decay");   /* absent before GPT-2: none */
    m->nwd_hash = ZN_FNV_INIT;
    if (nwd && !cJSON_IsArray(nwd)) {
        rc = zn_err(err, ZN_E_CORRUPT, "%s: no_weight_decay: not an array", path);
        goto out;
    }
    cJSON_ArrayForEach(it, nwd) {
        const char *name = cJSON_GetStringValue(it);
        if (!name) {
            rc = zn_err(err, ZN_E_CORRUPT, "%s: no_weight_decay.%d: not a string", path, m->n_nwd);
            goto out;
        }
        if (!m->n_nwd++) snprintf(m->nwd_first, sizeof m->nwd_first, "%s", name);
        m->nwd_hash = zn_fnv1a64(m->nwd_hash, name, strlen(name) + 1);
    }
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(doc, "config");
    if (cfg && !(m->config = cJSON_Duplicate(cfg, 1))) rc = zn_err(err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG, path);
out:
    cJSON_Delete(doc);
    return rc;
}

static int parse_manifest(Manifest *m, const char *path, const char *want_format, ZnErr *err) {
    char *text = NULL;
    size_t n = 0;
    memset(m, 0, sizeof *m);
    int rc = zn_read_file(path, MANIFEST_MAX, &text, &n, err);
    if (!rc) rc = manifest_from_text(m, path, text, n, want_format, err);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* verified reading of one shard */

/* Reads file `name` of dir once, whole, and checks it against the manifest
 * (listed, size, checksum of its kind); on success *buf holds it (the
 * caller frees it) and the tensors are read from that copy, not the disk
 * again. */
static int read_verified(const Manifest *m, const char *dir, const char *name, char **buf, size_t *n, ZnErr *err) {
    char path[PATH_MAX_ZN];
    join(path, dir, name);
    *buf = NULL;
    for (int i = 0; i < m->nfiles; i++) {
        if (strcmp(m->files[i].name, name)) continue;
        int rc = zn_read_file(path, FILE_MAX, buf, n, err);
        if (rc) return rc;
        uint64_t hash = m->files[i].kind == SUM_FNV ? fnv64(*buf, *n) : XXH3_64bits(*buf, *n);
        if ((uint64_t)*n != m->files[i].bytes)
            rc = zn_err(err, ZN_E_CORRUPT, "%s: %llu bytes, the manifest says %llu (truncated or replaced)", path,
                        (unsigned long long)*n, (unsigned long long)m->files[i].bytes);
        else if (hash != m->files[i].hash)
            rc = zn_err(err, ZN_E_CORRUPT, "%s: checksum %016llx, the manifest says %016llx (the file is corrupt)",
                        path, (unsigned long long)hash, (unsigned long long)m->files[i].hash);
        if (rc) {
            free(*buf);
            *buf = NULL;
        }
        return rc;
    }
    return zn_err(err, ZN_E_CORRUPT, "%s: not listed in the manifest %s", path, m->path);
}

/* Tensor `name` of f must exist with dtype dt and exactly the shape
 * (ndim, shape); returns it, or NULL with err set. */
static const ZnStTensor *expect_tensor(ZnStFile *f, const char *name, ZnDtype dt, int ndim, const long *shape,
                                       ZnErr *err) {
    const ZnStTensor *t = zn_st_find(f, name);
    if (!t) return zn_err(err, ZN_E_CORRUPT, "%s: tensor '%s' is missing", zn_st_path(f), name), NULL;
    int same = t->dtype == dt && t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char got[96] = "", want[96] = "";
        for (int d = 0; d < t->ndim && d < 4; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        for (int d = 0; d < ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%ld", d ? ", " : "", shape[d]);
        zn_err(err, ZN_E_CORRUPT, "%s: tensor '%s' is %s [%s%s], the layout says %s [%s]", zn_st_path(f), name,
               zn_st_dtype_name(t->dtype), got, t->ndim > 4 ? ", ..." : "", zn_st_dtype_name(dt), want);
        return NULL;
    }
    return t;
}

/* reads tensor `name` (F32 of exactly n elements, one dimension) */
static int read_f32(ZnStFile *f, const char *name, float *dst, long n, ZnErr *err) {
    const ZnStTensor *t = expect_tensor(f, name, ZN_F32, 1, &n, err);
    return t ? zn_st_read(f, t, dst, (size_t)n * 4, err) : err->code;
}

/* File `name` of dir read whole and verified (read_verified), then opened
 * as safetensors from that copy: *f over *buf, both for the caller to free
 * (zn_st_close, then free). */
static int open_verified(const Manifest *m, const char *dir, const char *name, ZnStFile **f, char **buf, ZnErr *err) {
    char path[PATH_MAX_ZN];
    join(path, dir, name);
    size_t n;
    int rc = read_verified(m, dir, name, buf, &n, err);
    if (rc) return rc;
    if ((rc = zn_st_open_mem(f, path, *buf, n, err))) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

/* rank r's saved master / exp_avg / exp_avg_sq partitions */
static int read_shard(const Manifest *m, const char *dir, int r, float *ms, float *ea, float *es, ZnErr *err) {
    char name[128];
    rank_file_name(name, sizeof name, r);
    ZnStFile *f;
    char *buf;
    int rc = open_verified(m, dir, name, &f, &buf, err);
    if (rc) return rc;
    rc = read_f32(f, "fp32", ms, m->rank_numel, err);
    if (!rc) rc = read_f32(f, "exp_avg", ea, m->rank_numel, err);
    if (!rc) rc = read_f32(f, "exp_avg_sq", es, m->rank_numel, err);
    /* stage 3 also keeps the 16-bit working partition (not read: it is
       re-derived from the master), and nothing else */
    int want = m->plan.ckpt_param_partition ? 4 : 3;
    if (!rc && m->plan.ckpt_param_partition && !expect_tensor(f, "param_partition", m->dt, 1, &m->rank_numel, err)) rc = err->code;
    if (!rc && zn_st_count(f) != want)
        rc = zn_err(err, ZN_E_CORRUPT, "%s: %d tensors, a stage-%d shard holds %d", zn_st_path(f), zn_st_count(f),
                    m->stage, want);
    zn_st_close(f);
    free(buf);
    return rc;
}

/* The module weights file: listed with its size and checksum, a valid
 * safetensors file, and exactly the model's parameters and tied names in
 * the model dtype with the manifest's shapes. */
static int verify_model_file(const Manifest *m, const char *dir, ZnErr *err) {
    ZnStFile *f;
    char *buf;
    int rc = open_verified(m, dir, MODEL_FILE, &f, &buf, err);
    if (rc) return rc;
    for (int k = 0; k < m->nparams + m->naliases && !rc; k++) {
        const ZnParamSpec *p = &m->params[k < m->nparams ? k : m->aliases[k - m->nparams].param];
        const char *name = k < m->nparams ? p->name : m->aliases[k - m->nparams].name;
        if (!expect_tensor(f, name, m->dt, p->ndim, p->shape, err)) rc = err->code;
    }
    if (!rc && zn_st_count(f) != m->nparams + m->naliases)
        rc = zn_err(err, ZN_E_CORRUPT, "%s: %d tensors, the manifest names %d", zn_st_path(f), zn_st_count(f),
                    m->nparams + m->naliases);
    zn_st_close(f);
    free(buf);
    return rc;
}

/* The manifest lists exactly the files a checkpoint of its world size has:
 * one shard per rank and the module weights. */
static int check_file_list(const Manifest *m, ZnErr *err) {
    int want = m->world + 1, found = 0;
    for (int i = 0; i < m->nfiles; i++) {
        char name[128];
        int known = !strcmp(m->files[i].name, MODEL_FILE);
        for (int r = 0; r < m->world && !known; r++) {
            rank_file_name(name, sizeof name, r);
            known = !strcmp(m->files[i].name, name);
        }
        for (int j = 0; j < i && known; j++) known = strcmp(m->files[i].name, m->files[j].name) != 0;
        if (!known) return zn_err(err, ZN_E_CORRUPT, "%s: files[%d] '%s' is not a file of a world-size-%d checkpoint "
                                  "(or listed twice)", m->path, i, m->files[i].name, m->world);
        found++;
    }
    if (found != want)
        return zn_err(err, ZN_E_CORRUPT, "%s: lists %d files, a world-size-%d checkpoint has %d", m->path, found,
                      m->world, want);
    return 0;
}

/* the saved layout, rebuilt from the manifest and checked against it */
static int saved_layout(const Manifest *m, ZnLayout *L, ZnErr *err) {
    int rc = zn_layout_build(L, m->params, m->nparams, m->world, &m->plan, &m->lopts, err);
    if (rc) return zn_err_prefix(err, "%s: ", m->path);
    int bad = L->aligned_numel != m->aligned_numel || L->part_numel != m->part_numel || L->part_numel != m->rank_numel;
    for (int p = 0; p < L->nparams && !bad; p++) {
        if (L->shard != ZN_SHARD_PARAM && L->flat_offset[p] != m->flat_offset[p]) bad = 1;
        if (L->shard == ZN_SHARD_PARAM && L->s3_pn[p] != m->pn[p]) bad = 1;
    }
    if (bad) {
        zn_layout_free(L);
        return zn_err(err, ZN_E_CORRUPT, "%s: the recorded layout does not match the partitioning rules for world size "
                      "%d, stage %d", m->path, m->world, m->stage);
    }
    return 0;
}

int zn_ckpt_manifest_check(const char *text, size_t len, const char *name, int universal, ZnErr *err) {
    if (len > MANIFEST_MAX) return zn_err(err, ZN_E_CORRUPT, "%s: more than the %u-byte limit", name, MANIFEST_MAX);
    Manifest *m = zn_calloc(ZN_HOST_IO, 1, sizeof *m);
    char *copy = zn_malloc(ZN_HOST_IO, len + 1);   /* NUL-terminated, as zn_read_file gives it */
    int rc = m && copy ? 0 : zn_nomem(err);
    if (!rc) {
        memcpy(copy, text, len);
        copy[len] = 0;
        rc = manifest_from_text(m, name, copy, len, universal ? ZN_UNIV_FORMAT : ZN_CKPT_FORMAT, err);
    }
    ZnLayout L;
    if (!rc && !universal && !(rc = saved_layout(m, &L, err))) zn_layout_free(&L);
    if (m) cJSON_Delete(m->config);
    free(m);
    free(copy);
    return rc;
}

/* Full model-order fp32 master / exp_avg / exp_avg_sq from every shard:
 * padding stripped by construction (only owned ranges are copied). */
static int full_from_shards(const Manifest *m, const char *dir, float *ms, float *ea, float *es, ZnErr *err) {
    ZnLayout L;
    int rc = saved_layout(m, &L, err);
    if (rc) return rc;
    long rn = m->rank_numel;
    float *a = zn_malloc(ZN_HOST_IO, (size_t)(rn > 0 ? rn : 1) * 4), *b = zn_malloc(ZN_HOST_IO, (size_t)(rn > 0 ? rn : 1) * 4),
          *c = zn_malloc(ZN_HOST_IO, (size_t)(rn > 0 ? rn : 1) * 4);
    if (!a || !b || !c) rc = zn_nomem(err);
    for (int r = 0; r < m->world && !rc; r++) {
        if ((rc = read_shard(m, dir, r, a, b, c, err))) break;
        for (int p = 0; p < L.nparams; p++) {
            long lo, hi, off;
            zn_layout_owned(&L, p, r, &lo, &hi, &off);
            long mo = L.model_offset[p];
            if (hi <= lo) continue;
            memcpy(ms + mo + lo, a + off, (size_t)(hi - lo) * 4);
            memcpy(ea + mo + lo, b + off, (size_t)(hi - lo) * 4);
            memcpy(es + mo + lo, c + off, (size_t)(hi - lo) * 4);
        }
    }
    free(a);
    free(b);
    free(c);
    zn_layout_free(&L);
    return rc;
}

/* A parameter's shape as "[8 x 6]", "[8]" (every dimension). */
static const char *shape_str(const ZnParamSpec *p, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < p->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%ld", d ? " x " : "", p->shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* The engine's model must be the checkpoint's: same names, same shapes. */
/* A checkpoint resumes with the weight-decay groups it was saved with
 * (Z-OPT-020): the run's must name the same parameters. */
static int check_decay(const Manifest *m, const ZnEngine *E, ZnErr *err) {
    int n = 0;
    uint64_t h = ZN_FNV_INIT;
    const char *first = "";
    for (int p = 0; p < E->L.nparams; p++) {
        if (zn_decay_param(E->model, E->cfg, p)) continue;
        if (!n++) first = E->L.params[p].name;
        h = zn_fnv1a64(h, E->L.params[p].name, strlen(E->L.params[p].name) + 1);
    }
    if (n == m->n_nwd && h == m->nwd_hash) return 0;
    return zn_err(err, ZN_E_USAGE, "%s: saved with %d parameters without weight decay (first: '%s'), this run has %d "
                  "(first: '%s'): resume with the zinc.weight_decay_exclude it was saved with", m->path, m->n_nwd,
                  m->nwd_first, n, first);
}

static int check_model(const Manifest *m, const ZnLayout *L, ZnErr *err) {
    if (m->nparams != L->nparams)
        return zn_err(err, ZN_E_USAGE, "%s: the checkpoint holds %d parameters (model %s), this model has %d",
                      m->path, m->nparams, m->model, L->nparams);
    for (int p = 0; p < L->nparams; p++) {
        const ZnParamSpec *a = &m->params[p], *b = &L->params[p];
        int same = !strcmp(a->name, b->name) && a->ndim == b->ndim;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        if (!same) {
            char sa[96], sb[96];
            return zn_err(err, ZN_E_USAGE, "%s: parameter %d is '%s' %s in the checkpoint (model %s) but '%s' %s in this model",
                          m->path, p, a->name, shape_str(a, sa, sizeof sa), m->model, b->name, shape_str(b, sb, sizeof sb));
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* save */

/* A host copy of one of this rank's partitions (E->part_n floats). */
/* This rank's partition of one state: in place on a host device, else a
 * copy (*owned, freed by the caller). */
static const float *part_for_save(ZnEngine *E, ZnPartState which, float **owned, int *rc, ZnErr *err) {
    *owned = NULL;
    if (*rc) return NULL;
    const float *p = zn_engine_part_in_place(E, which);
    if (p) return p;
    size_t bytes = (size_t)E->part_n * sizeof(float);
    if (!(*owned = zn_malloc(ZN_HOST_IO, bytes ? bytes : 1))) *rc = zn_nomem(err);
    else *rc = zn_engine_read_part(E, which, *owned, err);   /* an NVMe read can fail */
    return *rc ? NULL : *owned;
}

static int write_shard(ZnEngine *E, const char *tagdir, uint64_t out[2], ZnErr *err) {
    char name[128], path[PATH_MAX_ZN];
    /* the partition's rank and world: with MiCS the shard group's (Z-MICS-004) */
    rank_file_name(name, sizeof name, E->pw.rank);
    join(path, tagdir, name);
    char rk[16], wd[16], sg[16];
    snprintf(rk, sizeof rk, "%d", E->pw.rank);
    snprintf(wd, sizeof wd, "%d", E->pw.size);
    snprintf(sg, sizeof sg, "%d", E->P.stage);
    const char *meta[] = {"format", ZN_CKPT_FORMAT, "rank", rk, "world_size", wd, "stage", sg, NULL};
    ZnStEntry e[4];
    int n = 0;
    const int64_t len = E->part_n;
    float *own[4];
    int rc = 0;
    const float *ms = part_for_save(E, ZN_PART_MASTER, &own[0], &rc, err),
                *ea = part_for_save(E, ZN_PART_EXP_AVG, &own[1], &rc, err),
                *es = part_for_save(E, ZN_PART_EXP_AVG_SQ, &own[2], &rc, err);
    const float *pp = E->P.ckpt_param_partition ? part_for_save(E, ZN_PART_PARAMS, &own[3], &rc, err) : (own[3] = NULL);
    void *p16 = NULL;
    if (!rc) {
        e[n++] = (ZnStEntry){"fp32", ZN_F32, 1, {len}, ms};
        e[n++] = (ZnStEntry){"exp_avg", ZN_F32, 1, {len}, ea};
        e[n++] = (ZnStEntry){"exp_avg_sq", ZN_F32, 1, {len}, es};
    }
    if (!rc && E->P.ckpt_param_partition) {   /* the partitioned working copy, in the model dtype */
        p16 = E->dt == ZN_F32 ? NULL : encode16(pp, E->part_n, E->dt);
        if (E->dt != ZN_F32 && !p16) rc = zn_nomem(err);
        else e[n++] = (ZnStEntry){"param_partition", E->dt, 1, {len}, p16 ? p16 : (const void *)pp};
    }
    ZnStSum sum;
    if (!rc) rc = zn_st_write_sum(path, e, n, meta, &sum, err);
    ZN_FREE_ALL(p16, own[0], own[1], own[2], own[3]);
    if (!rc) { out[0] = sum.bytes; out[1] = sum.xxh3; }
    return rc;
}

static int write_model_file(ZnEngine *E, const char *tagdir, const float *full, uint64_t out[2], ZnErr *err) {
    const ZnLayout *L = &E->L;
    long total = L->total_numel;
    void *enc = E->dt == ZN_F32 ? NULL : encode16(full, total, E->dt);
    const void *bytes = enc ? enc : (const void *)full;
    const ZnModel *md = E->model;
    int ne = L->nparams + md->naliases;
    ZnStEntry *e = zn_calloc(ZN_HOST_IO, (size_t)ne + 1, sizeof *e);
    if ((E->dt != ZN_F32 && !enc) || !e) { free(enc); free(e); return zn_nomem(err); }
    size_t es = zn_dtype_size(E->dt);
    for (int k = 0; k < ne; k++) {   /* every parameter, then tied weights under their other names */
        int p = k < L->nparams ? k : md->aliases[k - L->nparams].param;
        e[k].name = k < L->nparams ? L->params[p].name : md->aliases[k - L->nparams].name;
        e[k].dtype = E->dt;
        e[k].ndim = L->params[p].ndim;
        for (int d = 0; d < L->params[p].ndim; d++) e[k].shape[d] = L->params[p].shape[d];
        e[k].data = (const char *)bytes + (size_t)L->model_offset[p] * es;
    }
    char path[PATH_MAX_ZN];
    join(path, tagdir, MODEL_FILE);
    const char *meta[] = {"format", "pt", "producer", "zinc", NULL};
    ZnStSum sum;
    int rc = zn_st_write_sum(path, e, ne, meta, &sum, err);
    free(enc);
    free(e);
    if (!rc) { out[0] = sum.bytes; out[1] = sum.xxh3; }
    return rc;
}

/* write_model_file as a thread's work: its own result and message */
typedef struct {
    ZnEngine *E;
    const char *tagdir;
    const float *full;
    uint64_t *sum;
    int rc;
    ZnErr err;
} ModelJob;
static void *model_job(void *arg) {
    ModelJob *j = arg;
    j->rc = write_model_file(j->E, j->tagdir, j->full, j->sum, &j->err);
    return NULL;
}

int zn_ckpt_save(ZnEngine *E, const char *dir, const char *model_spec, const char *config_json, ZnErr *err) {
    char tag[64], tagdir[PATH_MAX_ZN];
    snprintf(tag, sizeof tag, "global_step%ld", E->global_step);
    int rc0 = too_long(dir, err);
    if (rc0) return rc0;
    join(tagdir, dir, tag);
    const ZnLayout *L = &E->L;
    uint64_t mine[2] = {0, 0}, model_sum[2] = {0, 0};
    uint64_t *all = zn_calloc(ZN_HOST_IO, (size_t)E->world.size * 2, sizeof(uint64_t));
    float *full = zn_malloc(ZN_HOST_IO, (size_t)(L->total_numel > 0 ? L->total_numel : 1) * sizeof(float));
    /* A rank that fails returns at once, before its next collective: the
       other ranks' collective then fails with its message (Z-SIM-008), so
       nobody writes a manifest for a checkpoint with a missing shard. */
    int rc = !all || !full ? zn_nomem(err) : 0;
    if (!rc) rc = zn_mkdir_p(tagdir, err);
    /* the module weights: the master cast to the model dtype (= the working copy) */
    if (!rc) rc = zn_engine_gather_params(E, full, err);
    if (!rc && E->world.rank == 0 && E->dt != ZN_F32)
        for (long i = 0; i < L->total_numel; i++)   /* on the model dtype's grid */
            full[i] = E->dt == ZN_F16 ? zn_round_f16(full[i]) : zn_round_bf16(full[i]);
    /* rank 0 writes the module file on a second thread while it writes its
       shard, so it is not the one rank writing twice the bytes in a row;
       if the thread cannot start, it writes it afterwards (the same file) */
    ModelJob job = {E, tagdir, full, model_sum, 0, {0}};
    pthread_t th;
    const int model_here = !rc && E->world.rank == 0;
    const int threaded = model_here && pthread_create(&th, NULL, model_job, &job) == 0;
    /* with MiCS the first shard group writes: the others hold the same states */
    if (!rc && E->world.rank < E->pw.size) rc = write_shard(E, tagdir, mine, err);
    if (threaded) pthread_join(th, NULL);
    else if (model_here && !rc) model_job(&job);
    if (!rc && job.rc) {
        *err = job.err;
        rc = job.rc;
    }
    /* every rank learns every shard's size and checksum */
    if (!rc) rc = zn_engine_all_gather_host(E, mine, all, 2, ZN_U64, "ckpt", err);
    if (!rc && E->world.rank == 0) {
        ZnEngineState st;
        zn_engine_get_state(E, &st);
        zn_json_track();   /* a builder that fails must fail the save, not drop a key */
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "format", ZN_CKPT_FORMAT);
        cJSON_AddNumberToObject(m, "version", ZN_CKPT_VERSION);
        cJSON_AddStringToObject(m, "zinc_version", "0.1.0");
        cJSON_AddStringToObject(m, "tag", tag);
        cJSON_AddStringToObject(m, "model", model_spec ? model_spec : "");
        cJSON_AddNumberToObject(m, "world_size", E->pw.size);
        cJSON_AddNumberToObject(m, "stage", E->P.stage);
        cJSON_AddStringToObject(m, "model_dtype", zn_dtype_name(E->dt));
        cJSON_AddStringToObject(m, "master_dtype", "fp32");
        cJSON_AddStringToObject(m, "communication_dtype", zn_dtype_name(E->cdt));
        ZnLayoutOpts lo = zn_layout_opts(E->cfg);
        zn_json_add(m, "layout", layout_json(L, &lo));
        zn_json_add(m, "state", state_json(&st, E->global_step * E->cfg->train_batch_size));
        cJSON *sh = cJSON_AddObjectToObject(m, "shared_params");
        for (int a = 0; a < E->model->naliases; a++)
            cJSON_AddStringToObject(sh, E->model->aliases[a].name, L->params[E->model->aliases[a].param].name);
        cJSON *nwd = cJSON_AddArrayToObject(m, "no_weight_decay");   /* Z-OPT-020 */
        for (int p = 0; p < L->nparams; p++)
            if (!zn_decay_param(E->model, E->cfg, p)) zn_json_add(nwd, NULL, cJSON_CreateString(L->params[p].name));
        cJSON *cfg = config_json ? zn_json_parse(config_json, strlen(config_json) + 1, NULL, 0) : NULL;
        zn_json_add(m, "config", cfg ? cfg : cJSON_CreateNull());
        cJSON *fs = cJSON_AddArrayToObject(m, "files");
        for (int r = 0; r <= E->pw.size; r++) {
            char name[128], hex[32];
            if (r < E->pw.size) rank_file_name(name, sizeof name, r);
            else snprintf(name, sizeof name, "%s", MODEL_FILE);
            uint64_t *sum = r < E->pw.size ? &all[2 * r] : model_sum;
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum[1]);
            cJSON *f = zn_json_add(fs, NULL, cJSON_CreateObject());
            cJSON_AddStringToObject(f, "name", name);
            cJSON_AddNumberToObject(f, "bytes", (double)sum[0]);
            cJSON_AddStringToObject(f, SUM_KEY[SUM_XXH3], hex);
        }
        add_self_checksum(m);
        char *text = zn_json_print(m, 1);
        cJSON_Delete(m);
        char path[PATH_MAX_ZN];
        join(path, tagdir, "manifest.json");
        rc = text && !zn_json_failed()
                 ? zn_write_file_atomic(path, text, strlen(text), err)
                 : zn_err(err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG " while building the manifest; %s/latest still names "
                          "the previous checkpoint", path, dir);
        cJSON_free(text);
        /* `latest` last: it only ever names a complete checkpoint (Z-CKPT-006) */
        if (!rc) {
            join(path, dir, "latest");
            rc = zn_write_file_atomic(path, tag, strlen(tag), err);
        }
    }
    free(all);
    free(full);
    /* a collective of the save that failed (a silent peer, a cut link):
       which step's save it was (Z-NODE-009) */
    if (rc == ZN_E_COMM) zn_err_prefix(err, "step %ld: saving %s: ", E->global_step, tag);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* load */

/* A tag names a folder inside the checkpoint dir, nothing else: 1..255
 * bytes, no path separator, no "..", no control character, and the folder
 * must exist (Z-CKPT-010). `from` says where the tag came from. */
static int check_tag(const char *dir, const char *tag, const char *from, int bad, ZnErr *err) {
    size_t n = strlen(tag);
    const char *why = NULL;
    if (n == 0) why = "is empty";
    else if (n > 255) why = "is longer than 255 bytes";
    else if (strchr(tag, '/') || strchr(tag, '\\')) why = "holds a path separator";
    else if (strstr(tag, "..") || !strcmp(tag, ".")) why = "holds '..' or is '.'";
    for (size_t i = 0; i < n && !why; i++)
        if ((unsigned char)tag[i] < 0x20 || tag[i] == 0x7f) why = "holds a control character";
    if (why) return zn_err(err, bad, "%s: the tag '%.60s' %s (a tag is a folder name inside %s)", from, tag, why, dir);
    char path[PATH_MAX_ZN];
    join(path, dir, tag);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return zn_err(err, ZN_E_USAGE, "%s: the tag '%s' names no checkpoint folder (%s: %s)", from, tag, path,
                      stat(path, &sb) != 0 ? strerror(errno) : "not a folder");
    return 0;
}

static int read_tag(const char *dir, const char *name, const char *what, char *tag, size_t n, ZnErr *err) {
    char path[PATH_MAX_ZN], *text;
    size_t len;
    join(path, dir, name);
    int rc = zn_read_file(path, 4096, &text, &len, err);
    if (rc) return zn_err_prefix(err, "no checkpoint to %s (%s): ", what, name);
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r')) text[--len] = 0;
    if (!len || memchr(text, 0, len)) rc = zn_err(err, ZN_E_CORRUPT, "%s: does not hold a tag (%zu bytes)", path, len);
    if (!rc) rc = check_tag(dir, text, path, ZN_E_CORRUPT, err);
    if (!rc && len >= n) rc = zn_err(err, ZN_E_INTERNAL, "%s: tag buffer too small", path);
    if (!rc) memcpy(tag, text, len + 1);
    free(text);
    return rc;
}

void zn_ckpt_take_partition(const ZnEngine *E, const float *full, float *part) {
    const ZnLayout *L = &E->L;
    memset(part, 0, (size_t)E->part_n * 4);   /* padding is zero */
    for (int p = 0; p < L->nparams; p++) {
        long lo, hi, off;
        zn_layout_owned(L, p, E->pw.rank, &lo, &hi, &off);
        if (hi > lo) memcpy(part + off, full + L->model_offset[p] + lo, (size_t)(hi - lo) * 4);
    }
}

/* universal: one folder per parameter; read the full tensors we need */
static int read_param_state(const char *udir, const ZnParamSpec *ps, const char *state, float *dst, ZnErr *err) {
    char path[PATH_MAX_ZN];
    pathf(path, "%s/zero/%s/%s.safetensors", udir, ps->name, state);
    ZnStFile *f;
    int rc = zn_st_open(&f, path, err);
    if (rc) return rc;
    const ZnStTensor *t = zn_st_find(f, state);
    int ok = t && t->dtype == ZN_F32 && t->ndim == ps->ndim;
    for (int d = 0; ok && d < ps->ndim; d++) ok = t->shape[d] == ps->shape[d];
    if (!ok) rc = zn_err(err, ZN_E_CORRUPT, "%s: expected tensor '%s' F32 with the shape of '%s'", path, state, ps->name);
    else rc = zn_st_read(f, t, dst, (size_t)ps->numel * 4, err);
    zn_st_close(f);
    return rc;
}

int zn_ckpt_load(ZnEngine *E, const char *dir, const char *tag_in, int universal, ZnErr *err) {
    char tag[256], tagdir[PATH_MAX_ZN], mpath[PATH_MAX_ZN];
    int rc = 0;
    if ((rc = too_long(dir, err))) return rc;
    if (tag_in && (rc = check_tag(dir, tag_in, "--checkpoint-tag", ZN_E_USAGE, err))) return rc;
    if (!universal && zn_ds_is_folder(dir)) {   /* DeepSpeed's own folder (Z-DSCK-007) */
        if (!tag_in) return zn_ds_load(E, dir, err);
        join(tagdir, dir, tag_in);
        return zn_ds_load(E, tagdir, err);
    }
    if (tag_in) pathf(tag, "%s", tag_in);
    else if ((rc = read_tag(dir, universal ? "latest_universal" : "latest", "resume", tag, sizeof tag, err))) return rc;
    join(tagdir, dir, tag);
    Manifest *m = zn_calloc(ZN_HOST_IO, 1, sizeof *m);
    if (!m) return zn_nomem(err);
    join(mpath, tagdir, universal ? "zero/optimizer_state.json" : "manifest.json");
    if ((rc = parse_manifest(m, mpath, universal ? ZN_UNIV_FORMAT : ZN_CKPT_FORMAT, err))) {
        if (!universal) {   /* a universal folder passed without --universal-checkpoint */
            char probe[PATH_MAX_ZN];
            join(probe, tagdir, "zero/optimizer_state.json");
            FILE *f = fopen(probe, "r");
            if (f) {
                fclose(f);
                rc = zn_err(err, ZN_E_USAGE, "%s is a universal checkpoint: resume it with --universal-checkpoint", tagdir);
            }
        }
        goto out;
    }
    /* every file the manifest lists is verified before anything is used:
       the file list, each shard (size, checksum, header, tensors, dtypes,
       shapes) as it is read, and rank 0 the module weights (Z-CKPT-009) */
    if (!universal && (rc = check_file_list(m, err))) goto out;
    if (!universal && E->world.rank == 0 && (rc = verify_model_file(m, tagdir, err))) goto out;
    if ((rc = check_model(m, &E->L, err))) goto out;
    if (!universal && (rc = check_decay(m, E, err))) goto out;
    if (m->dt != E->dt) {
        rc = zn_err(err, ZN_E_USAGE, "%s: saved with model dtype %s, resuming with %s", m->path, zn_dtype_name(m->dt),
                    zn_dtype_name(E->dt));
        goto out;
    }
    const long total = E->L.total_numel;
    ZnLayoutOpts mine = zn_layout_opts(E->cfg);
    int same = !universal && m->world == E->pw.size && zn_plan_same_layout(&m->plan, &E->P) &&
               m->lopts.round_robin_gradients == mine.round_robin_gradients &&
               (!E->P.step_per_subgroup || m->lopts.sub_group_size == mine.sub_group_size);
    /* a shard of this layout goes straight into a host device's partitions
       (a failed read ends the run, so a half-read state is never used);
       otherwise into host copies handed to zn_engine_set_state */
    float *ms = same ? zn_engine_part_in_place(E, ZN_PART_MASTER) : NULL;
    float *ea = same ? zn_engine_part_in_place(E, ZN_PART_EXP_AVG) : NULL;
    float *es = same ? zn_engine_part_in_place(E, ZN_PART_EXP_AVG_SQ) : NULL;
    float *own[3] = {NULL, NULL, NULL};
    const size_t pbytes = (size_t)(E->part_n > 0 ? E->part_n : 1) * 4;
    if (!ms) ms = own[0] = zn_malloc(ZN_HOST_IO, pbytes);
    if (!ea) ea = own[1] = zn_malloc(ZN_HOST_IO, pbytes);
    if (!es) es = own[2] = zn_malloc(ZN_HOST_IO, pbytes);
    float *fm = NULL, *fa = NULL, *fs = NULL;
    if (!ms || !ea || !es) { rc = zn_nomem(err); goto done; }
    if (same) {   /* each rank reads its own shard */
        ZnLayout L;
        if ((rc = saved_layout(m, &L, err))) goto done;
        zn_layout_free(&L);
        if (m->rank_numel != E->part_n) {
            rc = zn_err(err, ZN_E_CORRUPT, "%s: partitions of %ld elements, this layout has %ld", m->path, m->rank_numel, E->part_n);
            goto done;
        }
        rc = read_shard(m, tagdir, E->pw.rank, ms, ea, es, err);
    } else {      /* a remap through the full vectors (Z-CKPT-004) */
        fm = zn_malloc(ZN_HOST_IO, (size_t)(total + 1) * 4);
        fa = zn_malloc(ZN_HOST_IO, (size_t)(total + 1) * 4);
        fs = zn_malloc(ZN_HOST_IO, (size_t)(total + 1) * 4);
        if (!fm || !fa || !fs) { rc = zn_nomem(err); goto done; }
        if (universal) {
            for (int p = 0; p < E->L.nparams && !rc; p++) {
                long off = E->L.model_offset[p];
                const ZnParamSpec *ps = &E->L.params[p];
                if (!(rc = read_param_state(tagdir, ps, "fp32", fm + off, err)) &&
                    !(rc = read_param_state(tagdir, ps, "exp_avg", fa + off, err)))
                    rc = read_param_state(tagdir, ps, "exp_avg_sq", fs + off, err);
            }
        } else {
            rc = full_from_shards(m, tagdir, fm, fa, fs, err);
        }
        if (!rc) {
            zn_ckpt_take_partition(E, fm, ms);
            zn_ckpt_take_partition(E, fa, ea);
            zn_ckpt_take_partition(E, fs, es);
        }
    }
done:
    /* a rank that could not read returns here; the others' next collective
       fails with its message (Z-SIM-008), and the run ends with it */
    if (!rc) rc = zn_engine_set_state(E, &m->st, ms, ea, es, err);
    ZN_FREE_ALL(own[0], own[1], own[2], fm, fa, fs);
out:
    cJSON_Delete(m->config);
    free(m);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* zinc ckpt: to-universal, consolidate, inspect */

static int load_full(const char *tagdir, Manifest *m, float **fm, float **fa, float **fs, ZnErr *err) {
    char mpath[PATH_MAX_ZN];
    join(mpath, tagdir, "manifest.json");
    int rc = parse_manifest(m, mpath, ZN_CKPT_FORMAT, err);
    if (!rc) rc = check_file_list(m, err);
    if (rc) return rc;
    long total = 0;
    for (int p = 0; p < m->nparams; p++) total += m->params[p].numel;
    *fm = zn_calloc(ZN_HOST_IO, (size_t)total + 1, 4);
    *fa = zn_calloc(ZN_HOST_IO, (size_t)total + 1, 4);
    *fs = zn_calloc(ZN_HOST_IO, (size_t)total + 1, 4);
    if (!*fm || !*fa || !*fs) return zn_nomem(err);
    return full_from_shards(m, tagdir, *fm, *fa, *fs, err);
}

/* Frees what load_full loaded: the manifest m (may be NULL) and the three
 * full fp32 arrays (master, exp_avg, exp_avg_sq). */
static void full_free(Manifest *m, float **f) {
    for (int s = 0; s < 3; s++) free(f[s]);
    if (m) cJSON_Delete(m->config);
    free(m);
}

int zn_ckpt_read_full(const char *tagdir, float *master, float *exp_avg, float *exp_avg_sq, long numel, ZnErr *err) {
    Manifest *m = zn_calloc(ZN_HOST_IO, 1, sizeof *m);
    float *f[3] = {0};
    int rc = m ? load_full(tagdir, m, &f[0], &f[1], &f[2], err) : zn_nomem(err);
    long total = 0;
    for (int p = 0; !rc && p < m->nparams; p++) total += m->params[p].numel;
    if (!rc && total != numel) rc = zn_err(err, ZN_E_USAGE, "%s holds %ld elements, expected %ld", tagdir, total, numel);
    if (!rc) {
        memcpy(master, f[0], (size_t)numel * 4);
        memcpy(exp_avg, f[1], (size_t)numel * 4);
        memcpy(exp_avg_sq, f[2], (size_t)numel * 4);
    }
    full_free(m, f);
    return rc;
}

typedef struct {
    const Manifest *m;
    const char *out;
    const float *f[3];
    long *offs;
    int next;
    pthread_mutex_t lock;
    int rc;
    ZnErr err;
} UnivJob;

static void *univ_worker(void *arg) {
    UnivJob *j = arg;
    static const char *names[3] = {"fp32", "exp_avg", "exp_avg_sq"};
    for (;;) {
        pthread_mutex_lock(&j->lock);
        int p = j->rc ? j->m->nparams : j->next++;
        pthread_mutex_unlock(&j->lock);
        if (p >= j->m->nparams) return NULL;
        const ZnParamSpec *ps = &j->m->params[p];
        char dir[PATH_MAX_ZN], path[PATH_MAX_ZN];
        pathf(dir, "%s/zero/%s", j->out, ps->name);
        ZnErr e;
        int rc = zn_mkdir_p(dir, &e);
        for (int s = 0; s < 3 && !rc; s++) {
            ZnStEntry en = {names[s], ZN_F32, ps->ndim, {0}, j->f[s] + j->offs[p]};
            for (int d = 0; d < ps->ndim; d++) en.shape[d] = ps->shape[d];
            pathf(path, "%s/%s.safetensors", dir, names[s]);
            rc = zn_st_write(path, &en, 1, NULL, &e);
        }
        if (!rc) {   /* DeepSpeed's step.pt: the optimizer step count */
            char step[32];
            snprintf(step, sizeof step, "%ld", j->m->st.opt_step);
            pathf(path, "%s/step.json", dir);
            rc = zn_write_file_atomic(path, step, strlen(step), &e);
        }
        if (rc) {
            pthread_mutex_lock(&j->lock);
            if (!j->rc) { j->rc = rc; j->err = e; }
            pthread_mutex_unlock(&j->lock);
        }
    }
}

/* (checkpoint.h) path's parent folder and last component, trailing slashes ignored
 * ("CK/u1/" is CK and u1, "/u1" is / and u1, "u1" is . and u1); 1 when
 * there is no last component to name (empty, ".", "..", "/"). */
int zn_ckpt_split_last(const char *path, char *parent, char *base) {
    pathf(parent, "%s", path);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    pathf(base, "%s", slash ? slash + 1 : parent);
    if (slash == parent) pathf(parent, "/");
    else if (slash) *slash = 0;
    else pathf(parent, ".");
    return !base[0] || !strcmp(base, ".") || !strcmp(base, "..");
}


/* What a ckpt tool works on: DIR/TAG's manifest and its full fp32 arrays
 * (master, exp_avg, exp_avg_sq), and the tool's error, which reaches the
 * caller only if the tool fails (tool_end). */
typedef struct {
    Manifest *m;
    float *f[3];
    ZnErr err;
} Tool;

/* What every ckpt tool starts with: DIR/TAG's path checked, its manifest
 * parsed and every shard verified into t->f; tool_end frees them, whatever
 * happened. */
static int tool_open(Tool *t, const char *dir) {
    memset(t, 0, sizeof *t);
    int rc = too_long(dir, &t->err);
    if (rc) return rc;
    if (!(t->m = zn_calloc(ZN_HOST_IO, 1, sizeof *t->m))) return zn_nomem(&t->err);
    return load_full(dir, t->m, &t->f[0], &t->f[1], &t->f[2], &t->err);
}

/* What every ckpt tool ends with: the error to err_out if it failed (rc),
 * t freed; returns rc. */
static int tool_end(Tool *t, int rc, ZnErr *err_out) {
    if (rc) *err_out = t->err;
    full_free(t->m, t->f);
    return rc;
}

int zn_ckpt_to_universal(const char *in, const char *out, int workers, ZnCkptSummary *sum, ZnErr *err_out) {
    int rc0 = too_long(out, err_out);
    if (rc0) return rc0;
    char parent[PATH_MAX_ZN], base[PATH_MAX_ZN];
    if (zn_ckpt_split_last(out, parent, base))
        return zn_err(err_out, ZN_E_USAGE, "%s: the path must end in a folder name", out);
    if (workers < 1 || workers > 64) return zn_err(err_out, ZN_E_USAGE, "%d workers: expected 1..64", workers);
    Tool t;
    int rc = tool_open(&t, in);
    const Manifest *m = t.m;
    if (!rc) rc = zn_mkdir_p(out, &t.err);
    UnivJob j;
    memset(&j, 0, sizeof j);
    long offs[ZN_MAX_PARAMS] = {0};
    if (!rc) {
        for (int p = 1; p < m->nparams; p++) offs[p] = offs[p - 1] + m->params[p - 1].numel;
        j.m = m;
        j.out = out;
        j.f[0] = t.f[0]; j.f[1] = t.f[1]; j.f[2] = t.f[2];
        j.offs = offs;
        pthread_mutex_init(&j.lock, NULL);
        pthread_t th[64];
        for (long w = 0; w < workers; w++) pthread_create(&th[w], NULL, univ_worker, &j);
        for (long w = 0; w < workers; w++) pthread_join(th[w], NULL);
        pthread_mutex_destroy(&j.lock);
        if (j.rc) { rc = j.rc; t.err = j.err; }
    }
    if (!rc) {   /* the shared state: the manifest minus the shard files */
        char src[PATH_MAX_ZN], *text;
        size_t n;
        join(src, in, "manifest.json");
        if (!(rc = zn_read_file(src, MANIFEST_MAX, &text, &n, &t.err))) {
            zn_json_track();
            cJSON *doc = zn_json_parse(text, strlen(text) + 1, NULL, 0);
            free(text);
            if (!doc) rc = zn_err(&t.err, zn_json_failed() ? ZN_E_NOMEM : ZN_E_CORRUPT, "%s: %s", src,
                                  zn_json_failed() ? ZN_NOMEM_MSG : "unreadable");
            else {
                zn_json_replace(doc, "format", cJSON_CreateString(ZN_UNIV_FORMAT));
                zn_json_replace(doc, "files", cJSON_CreateArray());
                add_self_checksum(doc);
                char *o = zn_json_print(doc, 1);
                cJSON_Delete(doc);
                char dst[PATH_MAX_ZN];
                pathf(dst, "%s/zero/optimizer_state.json", out);
                rc = o && !zn_json_failed() ? zn_write_file_atomic(dst, o, strlen(o), &t.err)
                                            : zn_err(&t.err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG, dst);
                cJSON_free(o);
            }
        }
    }
    if (!rc) {   /* <parent of out>/latest_universal names it, as ds_to_universal does */
        char path[PATH_MAX_ZN];
        join(path, parent, "latest_universal");
        rc = zn_write_file_atomic(path, base, strlen(base), &t.err);
    }
    if (!rc) {
        memset(sum, 0, sizeof *sum);
        sum->nparams = m->nparams;
        sum->opt_step = m->st.opt_step;
    }
    return tool_end(&t, rc, err_out);
}

/* The model a checkpoint's manifest records (its "model" field), checked
 * against the parameters the manifest lists. */
static int manifest_model(const Manifest *m, ZnModel *model, long *total, ZnErr *err) {
    if (zn_model_parse(m->model, model, err)) {
        zn_err_prefix(err, "%s: ", m->path);
        return ZN_E_CORRUPT;
    }
    if (model->nparams != m->nparams)
        return zn_err(err, ZN_E_CORRUPT, "%s: %d parameters recorded, model %s has %d", m->path, m->nparams, m->model,
                      model->nparams);
    *total = 0;
    for (int p = 0; p < m->nparams; p++) *total += m->params[p].numel;
    if (*total != zn_model_numel(model))
        return zn_err(err, ZN_E_CORRUPT, "%s: %ld elements recorded, model %s has %ld", m->path, *total, m->model,
                      zn_model_numel(model));
    return 0;
}

int zn_ckpt_find(const char *dir, const char *tag, char *tagdir, ZnErr *err) {
    char tagbuf[256];
    int rc = too_long(dir, err);
    if (!rc) rc = tag ? check_tag(dir, tag, "--checkpoint-tag", ZN_E_USAGE, err)
                      : read_tag(dir, "latest", "sample", tagbuf, sizeof tagbuf, err);
    if (!rc) join(tagdir, dir, tag ? tag : tagbuf);
    return rc;
}

int zn_ckpt_read_model(const char *tagdir, ZnModel *model, float **weights, ZnErr *err_out) {
    Tool t;
    long total = 0;
    *weights = NULL;
    int rc = tool_open(&t, tagdir);
    if (!rc) rc = manifest_model(t.m, model, &total, &t.err);
    if (!rc) {   /* the master weights are the result; the moments go */
        *weights = t.f[0];
        t.f[0] = NULL;
    }
    return tool_end(&t, rc, err_out);
}

int zn_ckpt_read_whole(const char *tagdir, ZnCkptWhole *c, ZnErr *err_out) {
    Tool t;
    long total = 0;
    memset(c, 0, sizeof *c);
    int rc = tool_open(&t, tagdir);
    const Manifest *m = t.m;
    if (!rc) rc = manifest_model(m, &c->model, &total, &t.err);
    if (!rc && cJSON_IsObject(m->config) && !(c->config_text = zn_json_print(m->config, 0))) rc = zn_nomem(&t.err);
    if (!rc) {
        snprintf(c->model_spec, sizeof c->model_spec, "%s", m->model);
        c->world = m->world;
        c->stage = m->stage;
        c->plan = m->plan;
        c->dt = m->dt;
        c->st = m->st;
        for (int s = 0; s < 3; s++) {   /* the arrays are the result */
            c->full[s] = t.f[s];
            t.f[s] = NULL;
        }
    }
    return tool_end(&t, rc, err_out);
}

void zn_ckpt_whole_free(ZnCkptWhole *c) {
    for (int s = 0; s < 3; s++) free(c->full[s]);
    cJSON_free(c->config_text);
    memset(c, 0, sizeof *c);
}

int zn_ckpt_consolidate(const char *in, const char *out, ZnDtype dt, ZnCkptSummary *sum, ZnErr *err_out) {
    Tool t;
    int rc = tool_open(&t, in);
    const Manifest *m = t.m;
    long total = 0;
    ZnModel model;
    if (!rc) rc = manifest_model(m, &model, &total, &t.err);
    if (!rc) {
        /* tied weights are restored under every name they have (DeepSpeed's
           zero_to_fp32 dropped them: issue #1896) */
        int ne = m->nparams + model.naliases;
        void *enc = dt == ZN_F32 ? NULL : encode16(t.f[0], total, dt);
        const void *bytes = enc ? enc : (const void *)t.f[0];
        ZnStEntry *e = zn_calloc(ZN_HOST_IO, (size_t)ne + 1, sizeof *e);
        long *offs = zn_calloc(ZN_HOST_IO, (size_t)m->nparams + 1, sizeof(long));
        if ((dt != ZN_F32 && !enc) || !e || !offs) rc = zn_nomem(&t.err);
        long off = 0;
        for (int p = 0; !rc && p < m->nparams; p++) { offs[p] = off; off += m->params[p].numel; }
        /* every element of the model is accounted for, no padding leaks in */
        if (!rc && off != total) rc = zn_err(&t.err, ZN_E_INTERNAL, "consolidation covered %ld of %ld elements", off, total);
        for (int k = 0; !rc && k < ne; k++) {
            int p = k < m->nparams ? k : model.aliases[k - m->nparams].param;
            e[k].name = k < m->nparams ? m->params[p].name : model.aliases[k - m->nparams].name;
            e[k].dtype = dt;
            e[k].ndim = m->params[p].ndim;
            for (int d = 0; d < m->params[p].ndim; d++) e[k].shape[d] = m->params[p].shape[d];
            e[k].data = (const char *)bytes + (size_t)offs[p] * zn_dtype_size(dt);
        }
        const char *meta[] = {"format", "pt", "producer", "zinc ckpt consolidate", NULL};
        if (!rc) rc = zn_st_write(out, e, ne, meta, &t.err);
        free(offs);
        free(enc);
        free(e);
    }
    if (!rc) {
        memset(sum, 0, sizeof *sum);
        sum->nparams = m->nparams;
        sum->naliases = model.naliases;
        sum->elements = total;
    }
    return tool_end(&t, rc, err_out);
}

int zn_ckpt_describe(const char *dir, FILE *out, ZnErr *err_out) {
    Tool t;
    int rc = tool_open(&t, dir);
    const Manifest *m = t.m;
    if (!rc) rc = verify_model_file(m, dir, &t.err);   /* load_full verified every shard */
    if (!rc) {
        long total = 0;
        for (int p = 0; p < m->nparams; p++) total += m->params[p].numel;
        fprintf(out, "checkpoint %s (tag %s)\n", dir, m->tag);
        fprintf(out, "  model %s, %d parameters, %ld elements, model dtype %s, master fp32\n", m->model, m->nparams,
                total, zn_dtype_name(m->dt));
        fprintf(out, "  saved by world size %d, ZeRO stage %d; partitions of %ld elements\n", m->world, m->stage,
                m->rank_numel);
        fprintf(out, "  global step %ld, optimizer step %ld, skipped %ld, samples %ld, scheduler t %ld, loss scale %g\n",
                m->st.global_step, m->st.opt_step, m->st.skipped_steps, m->st.global_samples, m->st.sched_t,
                m->st.scaler.cur_scale);
        for (int i = 0; i < m->nfiles; i++)
            fprintf(out, "  %-48s %12llu bytes  %s %016llx  ok\n", m->files[i].name,
                    (unsigned long long)m->files[i].bytes, SUM_KEY[m->files[i].kind], (unsigned long long)m->files[i].hash);
    }
    return tool_end(&t, rc, err_out);
}
