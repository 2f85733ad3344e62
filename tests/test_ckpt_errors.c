/* test_ckpt_errors.c: the error paths of sharded and universal checkpoints.
 * Manifests with a field missing, of the wrong type or out of range, files
 * lists that are not a checkpoint's, layouts that break the partitioning
 * rules, checkpoints of another model, universal checkpoints with a missing
 * or lying tensor, and bad command lines of `zinc ckpt`: each refused with
 * its status and a message naming the file and what is wrong. Every
 * checkpoint here is a 2-step run of mlp:6,8,4 in a temporary folder. */
#include "testutil.h"
#include <xxhash.h>
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include "app/run.h"
#include "app/cli.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "core/fileio.h"
#include "core/hash.h"

static const char *MODEL = "mlp:6,8,4";   /* params of 48, 8, 32 and 4 elements: 92 */
static const char *CFG = "{\"train_micro_batch_size_per_gpu\": 2}";
static const char *CFG_FP16 = "{\"train_micro_batch_size_per_gpu\": 2, \"fp16\": {\"enabled\": true}}";

/* One training run of `model` with train batch 2 x world: `steps` steps,
 * a checkpoint into dir every `interval` (0: none); resume: from dir (tag
 * NULL: what `latest` or `latest_universal` names). */
typedef struct {
    const char *model, *cfg, *dir, *tag;
    int world, stage, resume, universal;
    long steps, interval;
} Run;

static int run(const Run *r, ZnErr *err) {
    ZnTrainFlags f = zt_train_flags(r->model ? r->model : MODEL, r->steps, r->world, r->stage);
    f.args.train_batch_size = 2L * r->world;
    f.ckpt_dir = r->dir;
    f.ckpt_tag = r->tag;
    f.ckpt_interval = r->interval;
    f.resume = r->resume;
    f.universal = r->universal;
    return zt_train(&f, r->cfg ? r->cfg : CFG, err);
}

/* A fresh folder from the mkdtemp template dir holding global_step2 of a
 * 2-step run at world size 2 and the given stage and config. */
static void trained(char *dir, int stage, const char *cfg) {
    assert_non_null(mkdtemp(dir));
    Run r = {.cfg = cfg, .dir = dir, .world = 2, .stage = stage, .steps = 2, .interval = 2};
    ZnErr err;
    if (run(&r, &err)) fail_msg("training the checkpoint: %s", err.msg);
}

/* The checkpoint a test starts from: its setup (ck1: stage 1, CFG; ck3:
 * stage 3, CFG_FP16) trains it with trained(), its teardown removes the
 * folder. dir holds global_step2, tag is dir/global_step2; the paths of
 * its files the tests write over, and of a universal checkpoint of it
 * (to_universal writes it). */
static struct {
    char dir[64], tag[96];
    char model[160], shard[2][160];   /* tag/mp_rank_00_..., tag/zero_pp_rank_R_... */
    char univ[96], univ_state[160];   /* dir/univ, its zero/optimizer_state.json */
} ck;
static int ck_setup(int stage, const char *cfg) {
    snprintf(ck.dir, sizeof ck.dir, "/tmp/zinc-cke-XXXXXX");
    trained(ck.dir, stage, cfg);
    snprintf(ck.tag, sizeof ck.tag, "%s/global_step2", ck.dir);
    snprintf(ck.model, sizeof ck.model, "%s/mp_rank_00_model_states.safetensors", ck.tag);
    for (int r = 0; r < 2; r++)
        snprintf(ck.shard[r], sizeof ck.shard[r], "%s/zero_pp_rank_%d_optim_states.safetensors", ck.tag, r);
    snprintf(ck.univ, sizeof ck.univ, "%s/univ", ck.dir);
    snprintf(ck.univ_state, sizeof ck.univ_state, "%s/zero/optimizer_state.json", ck.univ);
    return 0;
}
static int ck1(void **st) {
    (void)st;
    return ck_setup(1, CFG);
}
static int ck3(void **st) {
    (void)st;
    return ck_setup(3, CFG_FP16);
}
static int ck_done(void **st) {
    (void)st;
    return zt_rm_rf(ck.dir) ? -1 : 0;
}
#define CK1(test) cmocka_unit_test_setup_teardown(test, ck1, ck_done)
#define CK3(test) cmocka_unit_test_setup_teardown(test, ck3, ck_done)

/* Resume of dir at world size 2, stage 1, to step 3: must fail with code
 * `code` and a message holding each of the given parts. */
static void resume_fails(const Run *base, int code, const char *want1, const char *want2) {
    Run r = *base;
    r.resume = 1;
    r.steps = 3;
    r.interval = 0;
    if (!r.world) r.world = 2;
    if (!r.stage) r.stage = 1;
    ZnErr err = {0};
    int rc = run(&r, &err);
    if (rc != code) fail_msg("resume: code %d, expected %d (%s)", rc, code, err.msg);
    assert_str_contains(err.msg, want1);
    if (want2) assert_str_contains(err.msg, want2);
}

static char *slurp_path(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    return zt_slurp(f, NULL);
}
static void put_path(const char *path, const char *text, size_t n) {
    ZnErr err;
    if (zn_write_file_atomic(path, text, n, &err)) fail_msg("%s", err.msg);
}

/* ---- manifests as JSON documents ---------------------------------------- */

static cJSON *load_manifest(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/global_step2/manifest.json", dir);
    char *text = slurp_path(path);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    assert_non_null(doc);
    return doc;
}

/* The manifest's own checksum, as zn_ckpt_save writes it: FNV-1a 64 of the
 * compact form without the field. */
static void restamp(cJSON *doc) {
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "manifest_fnv1a64");
    char *compact = cJSON_PrintUnformatted(doc);
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)zn_fnv1a64(ZN_FNV_INIT, compact, strlen(compact)));
    cJSON_free(compact);
    cJSON_AddStringToObject(doc, "manifest_fnv1a64", hex);
}

/* The item at a dotted path ("layout.params.0.shape"; numbers index
 * arrays); NULL if absent. */
static cJSON *item_at(cJSON *doc, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *cur = doc;
    for (char *tok = strtok(buf, "."); tok && cur; tok = strtok(NULL, "."))
        cur = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(cur, tok);
    return cur;
}

/* Sets the member at path to the JSON value `json` (added if absent), or
 * deletes it when json is NULL. */
static void mutate(cJSON *doc, const char *path, const char *json) {
    char parent[256];
    snprintf(parent, sizeof parent, "%s", path);
    char *dot = strrchr(parent, '.');
    const char *key = dot ? dot + 1 : path;
    cJSON *obj = doc;
    if (dot) {
        *dot = 0;
        obj = item_at(doc, parent);
    }
    if (!obj) fail_msg("no member %s", parent);
    int isarr = cJSON_IsArray(obj);
    if (!json) {
        if (isarr) cJSON_DeleteItemFromArray(obj, atoi(key));
        else cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
        return;
    }
    cJSON *v = cJSON_Parse(json);
    if (!v) fail_msg("bad test JSON %s", json);
    if (isarr) assert_true(cJSON_ReplaceItemInArray(obj, atoi(key), v));
    else if (cJSON_GetObjectItemCaseSensitive(obj, key)) assert_true(cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v));
    else cJSON_AddItemToObject(obj, key, v);
}

/* Applies an edit written as one string: "path=json" sets the member at
 * path to the JSON value json, "-path" deletes it (mutate). */
static void apply_edit(cJSON *doc, const char *edit) {
    if (edit[0] == '-') {
        mutate(doc, edit + 1, NULL);
        return;
    }
    const char *eq = strchr(edit, '=');
    if (!eq) fail_msg("bad test edit %s", edit);
    char path[256];
    snprintf(path, sizeof path, "%.*s", (int)(eq - edit), edit);
    mutate(doc, path, eq + 1);
}

/* zn_ckpt_manifest_check of doc's text (restamped first if stamp) */
static int check_doc(cJSON *doc, int stamp, int universal, ZnErr *err) {
    if (stamp) restamp(doc);
    char *text = cJSON_Print(doc);
    int rc = zn_ckpt_manifest_check(text, strlen(text), "M.json", universal, err);
    cJSON_free(text);
    return rc;
}

/* check_doc must refuse doc with ZN_E_CORRUPT and a message holding want. */
static void doc_refused(cJSON *doc, int stamp, int universal, const char *want) {
    ZnErr err = {0};
    int rc = check_doc(doc, stamp, universal, &err);
    if (rc != ZN_E_CORRUPT) fail_msg("code %d, expected ZN_E_CORRUPT (%s)", rc, err.msg);
    assert_str_contains(err.msg, want);
}

/* doc_refused as the last check of doc, which it then frees */
static void doc_refused_free(cJSON *doc, int stamp, int universal, const char *want) {
    doc_refused(doc, stamp, universal, want);
    cJSON_Delete(doc);
}

/* Writes doc, restamped, as dir/global_step2/manifest.json. */
static void save_manifest(const char *dir, cJSON *doc) {
    char path[512];
    snprintf(path, sizeof path, "%s/global_step2/manifest.json", dir);
    restamp(doc);
    char *text = cJSON_Print(doc);
    put_path(path, text, strlen(text));
    cJSON_free(text);
}

/* Writes a copy of orig with an edit (apply_edit), restamped, as dir's
   manifest. */
static void save_mutated(const char *dir, const cJSON *orig, const char *edit) {
    cJSON *doc = cJSON_Duplicate(orig, 1);
    apply_edit(doc, edit);
    save_manifest(dir, doc);
    cJSON_Delete(doc);
}

/* dir's manifest with an edit (apply_edit) */
static void edit_manifest(const char *dir, const char *edit) {
    cJSON *doc = load_manifest(dir);
    save_mutated(dir, doc, edit);
    cJSON_Delete(doc);
}

/* dir's manifest as text (cJSON_free it) */
static char *manifest_text(const char *dir) {
    cJSON *doc = load_manifest(dir);
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    return text;
}

/* An edit of a manifest (apply_edit: "path=json" or "-path") and a part of
   the message that refuses it (NULL: the edit must be accepted). */
typedef struct { const char *edit, *want; } Mut;

/* Each edit applied alone to a fresh copy of the manifest text orig,
 * restamped: zn_ckpt_manifest_check must refuse it with ZN_E_CORRUPT and a
 * message naming the manifest and the field (want NULL: must accept). */
static void each_mut(const char *orig, const Mut *t, size_t n, int universal) {
    for (size_t k = 0; k < n; k++) {
        cJSON *doc = cJSON_Parse(orig);
        apply_edit(doc, t[k].edit);
        ZnErr err = {0};
        int rc = check_doc(doc, 1, universal, &err);
        cJSON_Delete(doc);
        if (!t[k].want) {
            if (rc) fail_msg("%s: refused: %s", t[k].edit, err.msg);
            continue;
        }
        if (rc != ZN_E_CORRUPT) fail_msg("%s: code %d, expected ZN_E_CORRUPT (%s)", t[k].edit, rc, err.msg);
        if (strncmp(err.msg, "M.json: ", 8) || !strstr(err.msg, t[k].want))
            fail_msg("%s: '%s' lacks 'M.json: ...%s'", t[k].edit, err.msg, t[k].want);
    }
}

/* spec: Z-FUZZ-005 zn_ckpt_manifest_check refuses a field missing, of the
 * wrong type or out of range with ZN_E_CORRUPT naming the manifest and the
 * field's JSON path: format, version, model, world size, stage, dtype, the
 * layout's numbers, each parameter's name, shape and numel, the training
 * state, the loss scaler, the files list and the tied-weight table; a
 * shape past 2^53 elements is refused before it is multiplied */
static void test_manifest_fields(void **st) {
    (void)st;
    char *orig = manifest_text(ck.dir);
    static const Mut t[] = {
        {"-tag", NULL},   /* the tag is informational: absent is fine */
        {"shared_params.tied=\"layers.0.weight\"", NULL},   /* a valid alias */
        {"-shared_params", NULL},   /* no tied weights: the table may be absent */
        {"-config", NULL},          /* the config is a record, not needed to load */
        {"format=\"zinc-universal\"", "format is 'zinc-universal', expected 'zinc-checkpoint'"},
        {"-format", "format is '(none)', expected 'zinc-checkpoint'"},
        {"-version", "version: missing or out of range"},
        {"version=\"1\"", "version: missing or out of range"},
        {"version=0", "version: missing or out of range"},
        {"version=1.5", "version: not an integer"},
        {"version=3", "version 3, this zinc reads 1..2"},
        {"version=1", NULL},   /* version 1 still loads (the file checksums name their kind) */
        {"-model", "model: missing"},
        {"model=7", "model: missing"},
        {"world_size=0", "world_size: missing or out of range"},
        {"world_size=4097", "world_size 4097 too large"},
        {"stage=-1", "stage: missing or out of range"},
        {"stage=4", "stage 4"},
        {"stage=4294967297", "stage 4294967297"},
        {"model_dtype=\"fp8\"", "model_dtype: expected fp32, fp16 or bf16"},
        {"-model_dtype", "model_dtype: expected fp32, fp16 or bf16"},
        {"-layout", "layout: missing"},
        {"layout=[]", "layout: missing"},
        {"-layout.sub_group_size", "layout.sub_group_size: missing or out of range"},
        {"layout.reduce_bucket_size=0", "layout.reduce_bucket_size: missing or out of range"},
        {"layout.aligned_numel=-1", "layout.aligned_numel: missing or out of range"},
        {"layout.partition_numel=\"46\"", "layout.partition_numel: missing or out of range"},
        {"-layout.rank_numel", "layout.rank_numel: missing or out of range"},
        {"layout.params={}", "layout.params: missing or of a bad length"},
        {"layout.params=[]", "layout.params: missing or of a bad length"},
        {"-layout.params.0.name", "layout.params[0].name/shape: missing or malformed"},
        {"layout.params.2.name=\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
         "layout.params[2].name/shape: missing or malformed"},
        {"layout.params.0.shape=48", "layout.params[0].name/shape: missing or malformed"},
        {"layout.params.0.shape=[1, 1, 1, 8, 6]", "layout.params[0].name/shape: missing or malformed"},
        {"layout.params.0.shape=[8, -6]", "layout.params[0].shape: bad dimension"},
        {"layout.params.0.shape=[8, \"6\"]", "layout.params[0].shape: bad dimension"},
        {"layout.params.0.shape=[8, 6.5]", "layout.params[0].shape: bad dimension"},
        {"layout.params.0.shape=[8, 2e12]", "layout.params[0].shape: bad dimension"},
        {"layout.params.1.shape=[1e12, 1e12]", "layout.params[1].shape: more than 2^53 elements"},
        {"-layout.params.0.numel", "layout.params[0].numel: missing or out of range"},
        {"layout.params.0.numel=47", "layout.params[0].numel 47 does not match its shape"},
        {"layout.params.1.flat_offset=-2", "layout.params[1].flat_offset: missing or out of range"},
        {"-layout.params.3.partition_numel", "layout.params[3].partition_numel: missing or out of range"},
        {"-state", "state: missing"},
        {"-state.loss_scaler", "state: missing"},
        {"state.global_step=-1", "state.global_step: missing or out of range"},
        {"state.global_samples=0.5", "state.global_samples: not an integer"},
        {"-state.skipped_steps", "state.skipped_steps: missing or out of range"},
        {"state.optimizer_step=true", "state.optimizer_step: missing or out of range"},
        {"state.scheduler_last_batch_iteration=-2", "state.scheduler_last_batch_iteration: missing or out of range"},
        {"state.loss_scaler.cur_scale=-1", "state.loss_scaler.cur_scale: missing or out of range"},
        {"state.loss_scaler.cur_scale=1e301", "state.loss_scaler.cur_scale: missing or out of range"},
        {"-state.loss_scaler.cur_iter", "state.loss_scaler.cur_iter: missing or out of range"},
        {"state.loss_scaler.last_overflow_iter=-2", "state.loss_scaler.last_overflow_iter: missing or out of range"},
        {"state.loss_scaler.cur_hysteresis=-1000001", "state.loss_scaler.cur_hysteresis: missing or out of range"},
        {"-files", "files: missing"},
        {"files={}", "files: missing"},
        {"-files.0.name", "files[0].: malformed"},
        {"-files.1.xxh3_64", "files[1].: malformed"},
        {"files.1.name=\"../zero_pp_rank_1_optim_states.safetensors\"", "files[1].: malformed"},
        {"files.2.name=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
         "files[2].: malformed"},
        {"files.2.bytes=-1", "files[2].bytes: missing or out of range"},
        {"shared_params=[\"layers.0.weight\"]", "shared_params: malformed"},
        {"shared_params.tied=\"layers.9.weight\"", "shared_params: malformed"},
        {"shared_params.tied=3", "shared_params: malformed"},
        {"shared_params.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=\"layers.0.weight\"", "shared_params: malformed"},
        /* well-formed numbers that break the partitioning rules (Z-LAY) */
        {"layout.aligned_numel=96", "the recorded layout does not match the partitioning rules for world size 2, stage 1"},
        {"layout.partition_numel=48", "the recorded layout does not match the partitioning rules"},
        {"layout.rank_numel=48", "the recorded layout does not match the partitioning rules"},
        {"layout.params.2.flat_offset=57", "the recorded layout does not match the partitioning rules"},
        {"world_size=3", "the recorded layout does not match the partitioning rules for world size 3, stage 1"},
    };
    each_mut(orig, t, sizeof t / sizeof t[0], 0);

    /* lists past their limits: ZN_MAX_PARAMS + 1 (1541) parameters, 4097 files, 129 aliases */
    cJSON *doc = cJSON_Parse(orig);
    cJSON *ps = item_at(doc, "layout.params");
    while (cJSON_GetArraySize(ps) <= ZN_MAX_PARAMS) cJSON_AddItemToArray(ps, cJSON_Duplicate(cJSON_GetArrayItem(ps, 3), 1));
    doc_refused_free(doc, 1, 0, "M.json: layout.params: missing or of a bad length");
    doc = cJSON_Parse(orig);
    cJSON *fs = item_at(doc, "files");
    while (cJSON_GetArraySize(fs) <= 4096) cJSON_AddItemToArray(fs, cJSON_Duplicate(cJSON_GetArrayItem(fs, 0), 1));
    doc_refused_free(doc, 1, 0, "M.json: files: missing");
    doc = cJSON_Parse(orig);
    cJSON *sh = item_at(doc, "shared_params");
    for (int a = 0; a <= 2 * 64; a++) {
        char name[32];
        snprintf(name, sizeof name, "alias%d", a);
        cJSON_AddStringToObject(sh, name, "layers.1.bias");
    }
    doc_refused_free(doc, 1, 0, "M.json: shared_params: malformed");
    cJSON_free(orig);
}


/* spec: Z-CKPT-007 loading verifies the manifest's own checksum: a
 * manifest without one, with one that does not match, or that is not a JSON
 * object is refused as corrupt; a text over the 64 MiB limit is refused
 * before it is parsed (Z-FUZZ-005) */
static void test_manifest_self(void **st) {
    (void)st;
    cJSON *doc = load_manifest(ck.dir);
    ZnErr err;
    assert_int_equal(check_doc(doc, 0, 0, &err), 0);   /* as saved: accepted */
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "model", cJSON_CreateString("mlp:6,8,5"));
    assert_int_equal(check_doc(doc, 0, 0, &err), ZN_E_CORRUPT);   /* changed, not restamped */
    assert_str_contains(err.msg, "M.json: checksum ");
    assert_str_contains(err.msg, "(the manifest is corrupt)");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "manifest_fnv1a64");
    doc_refused_free(doc, 0, 0, "M.json: manifest_fnv1a64: missing (not a complete zinc manifest)");
    const char *notobj[] = {"[1, 2]", "{\"format\": ", "\"zinc-checkpoint\"", ""};
    for (size_t k = 0; k < sizeof notobj / sizeof notobj[0]; k++) {
        assert_int_equal(zn_ckpt_manifest_check(notobj[k], strlen(notobj[k]), "M.json", 0, &err), ZN_E_CORRUPT);
        assert_str_contains(err.msg, "M.json: not a JSON object (byte ");
    }
    size_t big = ((size_t)64 << 20) + 1;
    char *huge = calloc(1, big);
    assert_non_null(huge);
    assert_int_equal(zn_ckpt_manifest_check(huge, big, "M.json", 0, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "M.json: more than the 67108864-byte limit");
    free(huge);
}

/* spec: Z-FUZZ-005 with universal set the text is a universal checkpoint's
 * optimizer_state.json: format "zinc-universal" and no layout rebuilt; a
 * sharded manifest is not one, and its fields are checked as a sharded
 * manifest's are, with or without a self checksum */
static void test_manifest_universal(void **st) {
    (void)st;
    cJSON *doc = load_manifest(ck.dir);
    doc_refused(doc, 0, 1, "M.json: format is 'zinc-checkpoint', expected 'zinc-universal'");
    /* what to-universal writes: the format changed and no files */
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "format", cJSON_CreateString("zinc-universal"));
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "files", cJSON_CreateArray());
    char *orig = cJSON_Print(doc);
    static const Mut t[] = {
        {"layout.aligned_numel=96", NULL},   /* no layout rebuilt for a universal checkpoint */
        {"version=3", "version 3, this zinc reads 1..2"},
        {"state.global_step=\"2\"", "state.global_step: missing or out of range"},
        {"-files", "files: missing"},
    };
    each_mut(orig, t, sizeof t / sizeof t[0], 1);
    /* without a self checksum the fields are still checked */
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "manifest_fnv1a64");
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "world_size", cJSON_CreateNumber(0));
    doc_refused_free(doc, 0, 1, "M.json: world_size: missing or out of range");
    cJSON_free(orig);
}

/* spec: Z-FUZZ-005 a stage-3 manifest's per-parameter partition sizes are
 * checked against the partitioning rules (Z-LAY-009) */
static void test_manifest_stage3_layout(void **st) {
    (void)st;
    char *orig = manifest_text(ck.dir);
    static const Mut t[] = {
        {"model_dtype=\"bf16\"", NULL},   /* the dtype is no part of the layout */
        {"layout.params.1.partition_numel=5", "the recorded layout does not match the partitioning rules for world size 2, stage 3"},
        {"layout.params.3.partition_numel=-1", "the recorded layout does not match the partitioning rules"},
    };
    each_mut(orig, t, sizeof t / sizeof t[0], 0);
    cJSON_free(orig);
}


/* ---- resume ------------------------------------------------------------- */

/* spec: Z-CKPT-009 the manifest's files list must be exactly one shard per
 * saved rank and the module weights, each listed once: an unknown name, a
 * shard of a rank the world does not have, a file listed twice and a file
 * left out are refused on resume (ZN_E_CORRUPT) naming the manifest */
static void test_resume_files_list(void **st) {
    (void)st;
    cJSON *orig = load_manifest(ck.dir);
    Run r = {.dir = ck.dir};
    static const Mut t[] = {
        {"files.1.name=\"extra.bin\"", "files[1] 'extra.bin' is not a file of a world-size-2 checkpoint (or listed twice)"},
        {"files.0.name=\"zero_pp_rank_2_optim_states.safetensors\"",
         "files[0] 'zero_pp_rank_2_optim_states.safetensors' is not a file of a world-size-2 checkpoint"},
        {"files.1.name=\"zero_pp_rank_0_optim_states.safetensors\"",
         "files[1] 'zero_pp_rank_0_optim_states.safetensors' is not a file of a world-size-2 checkpoint (or listed twice)"},
        {"-files.2", "lists 2 files, a world-size-2 checkpoint has 3"},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        save_mutated(ck.dir, orig, t[k].edit);
        resume_fails(&r, ZN_E_CORRUPT, "global_step2/manifest.json: ", t[k].want);
    }
    cJSON_Delete(orig);
}

/* spec: Z-CKPT-007 a checkpoint of another model (a different number of
 * parameters) is refused on resume with what differs, a usage error */
static void test_resume_other_model(void **st) {
    (void)st;
    Run r = {.dir = ck.dir, .model = "mlp:6,8,8,4"};
    resume_fails(&r, ZN_E_USAGE, "global_step2/manifest.json: the checkpoint holds 4 parameters (model mlp:6,8,4), "
                 "this model has 6", NULL);
}

/* spec: Z-CKPT-010 `latest` may end in spaces, CR and LF (they are not
 * part of the tag); a backslash, a DEL byte or a NUL byte in it, and a tag
 * naming a file rather than a folder, are refused naming `latest` */
static void test_resume_latest_bytes(void **st) {
    (void)st;
    char latest[512];
    snprintf(latest, sizeof latest, "%s/latest", ck.dir);
    put_path(latest, "global_step2 \r\n", 15);
    Run r = {.dir = ck.dir, .world = 2, .stage = 1, .resume = 1, .steps = 3};
    ZnErr err;
    if (run(&r, &err)) fail_msg("latest with trailing white space: %s", err.msg);
    put_path(latest, "global\\step2", 12);
    resume_fails(&r, ZN_E_CORRUPT, "latest: the tag 'global\\step2' holds a path separator", NULL);
    put_path(latest, "global_step2\x7f", 13);
    resume_fails(&r, ZN_E_CORRUPT, "holds a control character", "latest");
    put_path(latest, "global\0step2", 12);
    resume_fails(&r, ZN_E_CORRUPT, "latest: does not hold a tag (12 bytes)", NULL);
    put_path(latest, "global_step2/manifest.json", 26);
    resume_fails(&r, ZN_E_CORRUPT, "latest: the tag 'global_step2/manifest.json' holds a path separator", NULL);
    /* a tag that names a file: the flag's message says it is not a folder */
    r.tag = "latest";
    resume_fails(&r, ZN_E_USAGE, "--checkpoint-tag: the tag 'latest' names no checkpoint folder (", "latest: not a folder)");
}

/* spec: Z-CKPT-006 a save that cannot write fails the run with a message
 * naming the path: a checkpoint dir that is a regular file, and one whose
 * name is too long to hold a checkpoint's paths (also refused on resume) */
static void test_save_unwritable(void **st) {
    (void)st;
    char dir[] = "/tmp/zinc-cke-save-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[512];
    snprintf(file, sizeof file, "%s/plain", dir);
    put_path(file, "x", 1);
    Run r = {.dir = file, .world = 2, .stage = 1, .steps = 2, .interval = 1};
    ZnErr err = {0};
    assert_int_equal(run(&r, &err), ZN_E_IO);
    assert_str_contains(err.msg, "/plain: exists and is not a directory");
    static char longdir[3100];
    snprintf(longdir, sizeof longdir, "%s/", dir);
    memset(longdir + strlen(longdir), 'd', 3001 - strlen(longdir));
    longdir[3001] = 0;
    r.dir = longdir;
    assert_int_equal(run(&r, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "path too long (3001 bytes): /tmp/zinc-cke-save-");
    r.resume = 1;
    r.interval = 0;
    assert_int_equal(run(&r, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "path too long (3001 bytes)");
    zt_rm_rf(dir);
}

/* spec: Z-CKPT-008 the full vectors of a checkpoint are checked against
 * the element count the caller's model has; a folder with no manifest is
 * an I/O error naming it */
static void test_read_full_count(void **st) {
    (void)st;
    float m[92], a[92], s[92];
    ZnErr err;
    assert_int_equal(zn_ckpt_read_full(ck.tag, m, a, s, 91, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "global_step2 holds 92 elements, expected 91");
    assert_int_equal(zn_ckpt_read_full(ck.tag, m, a, s, 92, &err), 0);
    char nine[512];
    snprintf(nine, sizeof nine, "%s/global_step9", ck.dir);   /* no such checkpoint */
    assert_int_equal(zn_ckpt_read_full(nine, m, a, s, 92, &err), ZN_E_IO);
    assert_str_contains(err.msg, "global_step9/manifest.json: open failed");
}

/* ---- zinc ckpt commands ------------------------------------------------- */

/* Runs `zinc ckpt argv...` (NULL-terminated) with stdout and stderr
 * captured into *out and *errs (malloc'd); returns its exit status. */
static int ckpt_cmd(char **out, char **errs, const char *const *argv) {
    int argc = 0;
    while (argv[argc]) argc++;
    return zt_capture(zn_cmd_ckpt, argc, argv, out, errs);
}

/* `zinc ckpt argv...` must exit with status want; with err_part, stderr's
 * first line is the one "zinc: error: " line and holds err_part; with
 * out_part, stdout holds it. */
static void expect_ckpt(int want, const char *err_part, const char *out_part, const char *const *argv) {
    char *out, *errs;
    int rc = ckpt_cmd(&out, &errs, argv);
    const char *second = errs[0] ? strstr(errs + 1, "zinc: error: ") : NULL;
    if (rc != want || (err_part && (strncmp(errs, "zinc: error: ", 13) || second || !strstr(errs, err_part))) ||
        (!err_part && errs[0]) || (out_part && !strstr(out, out_part))) {
        fail_msg("zinc ckpt %s %s: exit %d (expected %d), stderr '%s' (expected '%s'), stdout '%s' (expected '%s')",
                 argv[0] ? argv[0] : "", argv[0] && argv[1] ? argv[1] : "", rc, want, errs, err_part ? err_part : "",
                 out, out_part ? out_part : "");
    }
    free(out);
    free(errs);
}
#define CKPT(want, err_part, out_part, ...) \
    expect_ckpt(want, err_part, out_part, (const char *const[]){__VA_ARGS__, NULL})

/* to-universal of the checkpoint into ck.univ, which must succeed */
static void to_universal(void) {
    CKPT(0, NULL, "wrote universal checkpoint", "to-universal", "--input-folder", ck.tag, "--output-folder", ck.univ);
}

/* spec: Z-CLI-006 bad command lines of `zinc ckpt` exit 2 with one error
 * line naming the problem (then the usage text): no command, a flag with no
 * value, an unknown flag, --num-workers outside 1..64, --dtype not a
 * dtype, a missing input or output, the wrong number of folders, a path
 * too long */
static void test_cmd_usage(void **st) {
    (void)st;
    static char longp[3100];
    memset(longp, 'p', 3001);
    longp[3001] = 0;
    const char *usage = "usage: zinc ckpt to-universal";
    expect_ckpt(2, "zinc ckpt needs a command", NULL, (const char *const[]){NULL});
    CKPT(2, "every flag of 'zinc ckpt to-universal' takes a value", NULL, "to-universal", "--input-folder");
    CKPT(2, "unknown flag for 'zinc ckpt to-universal'", NULL, "to-universal", "--input", "a", "--output-folder", "b");
    CKPT(2, "--num-workers: expected 1..64", NULL, "to-universal", "--num-workers", "0");
    CKPT(2, "--num-workers: expected 1..64", NULL, "to-universal", "--num-workers", "65");
    CKPT(2, "--num-workers: expected 1..64", NULL, "to-universal", "--num-workers", "4x");
    CKPT(2, "to-universal needs --input-folder and --output-folder", NULL, "to-universal", "--input-folder", "a");
    CKPT(2, "to-universal needs --input-folder and --output-folder", NULL, "to-universal", "--output-folder", "b");
    CKPT(2, "path too long", NULL, "to-universal", "--input-folder", longp, "--output-folder", "b");
    CKPT(2, "path too long", NULL, "to-universal", "--input-folder", "a", "--output-folder", longp);
    CKPT(2, "every flag of 'zinc ckpt consolidate' takes a value", NULL, "consolidate", "--input", "a", "--output");
    CKPT(2, "unknown flag for 'zinc ckpt consolidate'", NULL, "consolidate", "--input-folder", "a");
    CKPT(2, "--dtype: expected fp32, bf16 or fp16", NULL, "consolidate", "--dtype", "fp8");
    CKPT(2, "consolidate needs --input and --output", NULL, "consolidate", "--input", "a");
    CKPT(2, "consolidate needs --input and --output", NULL, "consolidate", "--output", "b", "--dtype", "bf16");
    CKPT(2, "path too long", NULL, "consolidate", "--input", longp, "--output", "b");
    expect_ckpt(2, "inspect takes one checkpoint folder", NULL, (const char *const[]){"inspect", NULL});
    CKPT(2, "inspect takes one checkpoint folder", NULL, "inspect", "a", "b");
    CKPT(2, "path too long", NULL, "inspect", longp);
    /* the usage text follows the error line */
    char *out, *errs;
    assert_int_equal(ckpt_cmd(&out, &errs, (const char *const[]){"inspect", NULL}), 2);
    assert_str_contains(errs, usage);
    free(out);
    free(errs);
}

/* spec: Z-CKPT-008 consolidate checks the checkpoint against the model its
 * manifest names: a spec that does not parse, one with another number of
 * parameters or elements, exit 1 naming the manifest; an output it cannot
 * write, exit 1 naming it; --dtype fp16 writes every tensor in fp16 */
static void test_consolidate_errors(void **st) {
    (void)st;
    char outp[600], bad_out[600];
    snprintf(outp, sizeof outp, "%s/model.safetensors", ck.dir);
    snprintf(bad_out, sizeof bad_out, "%s/no/such/model.safetensors", ck.dir);
    CKPT(0, NULL, "4 tensors (0 tied), 92 parameters, fp16", "consolidate", "--input", ck.tag, "--output", outp, "--dtype", "fp16");
    ZnStFile *f;
    ZnErr err;
    assert_int_equal(zn_st_open(&f, outp, &err), 0);
    assert_int_equal(zn_st_count(f), 4);
    for (int i = 0; i < 4; i++) assert_int_equal(zn_st_tensor(f, i)->dtype, ZN_F16);
    zn_st_close(f);
    CKPT(1, "no/such/model.safetensors", NULL, "consolidate", "--input", ck.tag, "--output", bad_out);
    cJSON *orig = load_manifest(ck.dir);
    static const Mut t[] = {
        {"model=\"mlp:6,x\"", "global_step2/manifest.json: model spec 'mlp:6,x': 'x' is not a positive integer"},
        {"model=\"mlp:6,8,8,4\"", "global_step2/manifest.json: 4 parameters recorded, model mlp:6,8,8,4 has 6"},
        {"model=\"mlp:6,8,5\"", "global_step2/manifest.json: 92 elements recorded, model mlp:6,8,5 has 101"},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        save_mutated(ck.dir, orig, t[k].edit);
        CKPT(1, t[k].want, NULL, "consolidate", "--input", ck.tag, "--output", outp);
    }
    cJSON_Delete(orig);
}

/* spec: Z-CKPT-008 inspect verifies the module weights too: a module file
 * that does not match the manifest prints INVALID and exits 1 naming it; a
 * manifest without a tag still verifies */
static void test_inspect(void **st) {
    (void)st;
    const char *model = ck.model;
    edit_manifest(ck.dir, "-tag");
    CKPT(0, NULL, "(tag )", "inspect", ck.tag);
    FILE *f = fopen(model, "ab");
    fputc(0, f);
    fclose(f);
    char want[700];
    snprintf(want, sizeof want, "checkpoint %s: INVALID", ck.tag);
    CKPT(1, "mp_rank_00_model_states.safetensors: 713 bytes, the manifest says 712", want, "inspect", ck.tag);
}

/* spec: Z-CKPT-005 to-universal: an input that does not verify, an output
 * folder that cannot be made, or a parameter folder that cannot be made,
 * exit 1 naming the file; with several workers and an output folder given
 * without a parent, every parameter's three states and step.json are
 * written and ./latest_universal names the folder (trailing slashes
 * ignored); an output that ends in no folder name is a usage error */
static void test_to_universal_errors(void **st) {
    (void)st;
    char plain[600], under[600], out[600], zero[700], cwd[1024];
    snprintf(plain, sizeof plain, "%s/plain", ck.dir);
    snprintf(under, sizeof under, "%s/plain/univ", ck.dir);
    snprintf(out, sizeof out, "%s/univ2", ck.dir);
    snprintf(zero, sizeof zero, "%s/univ2/zero", ck.dir);
    put_path(plain, "x", 1);
    CKPT(1, "/plain: exists and is not a directory", NULL, "to-universal", "--input-folder", ck.tag, "--output-folder", under);
    assert_int_equal(mkdir(out, 0755), 0);
    put_path(zero, "x", 1);   /* the parameter folders cannot be made */
    CKPT(1, "univ2/zero: exists and is not a directory", NULL, "to-universal", "--input-folder", ck.tag, "--output-folder", out);
    /* relative output, 3 workers */
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(ck.dir), 0);
    CKPT(0, NULL, "wrote universal checkpoint univ: 4 parameters, optimizer step 2", "to-universal", "--input-folder",
         "global_step2", "--output-folder", "univ", "--num-workers", "3");
    char *lu = slurp_path("latest_universal");
    assert_string_equal(lu, "univ");
    free(lu);
    /* a trailing slash names the same folder: latest_universal is ./univ4's
       parent's, not a file inside it */
    CKPT(0, NULL, "wrote universal checkpoint univ4//: 4 parameters, optimizer step 2", "to-universal",
         "--input-folder", "global_step2", "--output-folder", "univ4//");
    lu = slurp_path("latest_universal");
    assert_string_equal(lu, "univ4");
    free(lu);
    struct stat nb;
    assert_int_not_equal(stat("univ4/latest_universal", &nb), 0);
    /* an output that names no folder is refused before anything is written */
    CKPT(2, "--output-folder: the path must end in a folder name", NULL, "to-universal", "--input-folder",
         "global_step2", "--output-folder", "..");
    CKPT(2, "--output-folder: the path must end in a folder name", NULL, "to-universal", "--input-folder",
         "global_step2", "--output-folder", "/");
    CKPT(2, "--output-folder: the path must end in a folder name", NULL, "to-universal", "--input-folder",
         "global_step2", "--output-folder", "");
    const char *names[] = {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"};
    const char *states[] = {"fp32.safetensors", "exp_avg.safetensors", "exp_avg_sq.safetensors", "step.json"};
    for (int p = 0; p < 4; p++)
        for (int s = 0; s < 4; s++) {
            char path[256];
            snprintf(path, sizeof path, "univ/zero/%s/%s", names[p], states[s]);
            struct stat sb;
            if (stat(path, &sb)) fail_msg("%s missing", path);
        }
    assert_int_equal(chdir(cwd), 0);
    /* a broken input: the shard list does not verify */
    edit_manifest(ck.dir, "-files.2");
    snprintf(out, sizeof out, "%s/univ3", ck.dir);
    CKPT(1, "manifest.json: lists 2 files, a world-size-2 checkpoint has 3", NULL, "to-universal", "--input-folder",
         ck.tag, "--output-folder", out);
    struct stat sb;
    assert_int_not_equal(stat(out, &sb), 0);   /* nothing written */
}

/* spec: Z-CKPT-007 a universal folder given without
 * --universal-checkpoint is refused as such; Z-CKPT-005 a universal resume
 * with no latest_universal, a parameter state file missing or holding the
 * wrong tensor, name, dtype or shape, a corrupt or foreign
 * optimizer_state.json, or another model, is refused naming the file */
static void test_universal_resume_errors(void **st) {
    (void)st;
    to_universal();
    Run u = {.dir = ck.dir, .world = 3, .stage = 3, .universal = 1, .resume = 1, .steps = 3};
    ZnErr err;
    if (run(&u, &err)) fail_msg("universal resume: %s", err.msg);   /* as written: it loads */
    Run plain = {.dir = ck.dir, .tag = "univ"};
    resume_fails(&plain, ZN_E_USAGE, "/univ is a universal checkpoint: resume it with --universal-checkpoint", NULL);
    Run other = u;
    other.model = "mlp:6,8,8,4";
    other.stage = 2;
    other.world = 2;
    resume_fails(&other, ZN_E_USAGE, "univ/zero/optimizer_state.json: the checkpoint holds 4 parameters", NULL);
    /* the parameter state files */
    char path[700], keep[720];
    snprintf(path, sizeof path, "%s/univ/zero/layers.1.weight/exp_avg.safetensors", ck.dir);
    snprintf(keep, sizeof keep, "%s.keep", path);
    assert_int_equal(rename(path, keep), 0);
    resume_fails(&u, ZN_E_IO, "univ/zero/layers.1.weight/exp_avg.safetensors", NULL);
    static float data[64];
    struct { ZnStEntry e; } lies[] = {
        {{"fp32", ZN_F32, 2, {4, 8}, data}},      /* another state's name */
        {{"exp_avg", ZN_F16, 2, {4, 8}, data}},   /* wrong dtype */
        {{"exp_avg", ZN_F32, 2, {8, 4}, data}},   /* transposed */
        {{"exp_avg", ZN_F32, 1, {32}, data}},     /* flattened */
    };
    for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
        assert_int_equal(zn_st_write(path, &lies[k].e, 1, NULL, &err), 0);
        resume_fails(&u, ZN_E_CORRUPT,
                     "univ/zero/layers.1.weight/exp_avg.safetensors: expected tensor 'exp_avg' F32 with the shape of "
                     "'layers.1.weight'", NULL);
    }
    assert_int_equal(rename(keep, path), 0);
    /* the shared state */
    const char *state = ck.univ_state;
    char *text = slurp_path(state);
    cJSON *doc = cJSON_Parse(text);
    char *flip = strstr(text, "\"global_step\"");
    assert_non_null(flip);
    flip[1] = 'G';   /* same length, checksum left as it was */
    put_path(state, text, strlen(text));
    resume_fails(&u, ZN_E_CORRUPT, "univ/zero/optimizer_state.json: checksum ", "(the manifest is corrupt)");
    mutate(doc, "model_dtype", "\"bf16\"");
    restamp(doc);
    char *t2 = cJSON_Print(doc);
    put_path(state, t2, strlen(t2));
    cJSON_free(t2);
    resume_fails(&u, ZN_E_USAGE, "univ/zero/optimizer_state.json: saved with model dtype bf16, resuming with fp32", NULL);
    mutate(doc, "format", "\"zinc-checkpoint\"");
    restamp(doc);
    t2 = cJSON_Print(doc);
    put_path(state, t2, strlen(t2));
    cJSON_free(t2);
    resume_fails(&u, ZN_E_CORRUPT, "optimizer_state.json: format is 'zinc-checkpoint', expected 'zinc-universal'", NULL);
    cJSON_Delete(doc);
    free(text);
    /* no latest_universal to name the folder */
    char lu[600];
    snprintf(lu, sizeof lu, "%s/latest_universal", ck.dir);
    assert_int_equal(remove(lu), 0);
    resume_fails(&u, ZN_E_IO, "no checkpoint to resume (latest_universal): ", "latest_universal");
}


/* ---- files that verify but do not hold what the manifest says ----------- */

/* Records file files[idx] of dir/global_step2 (at path) in the manifest
 * with its current size and checksum, restamped: then only the checks
 * behind the checksums are left to catch a lie. */
static void vouch(const char *dir, int idx, const char *path) {
    char *buf;
    size_t n;
    ZnErr err;
    assert_int_equal(zn_read_file(path, 1 << 24, &buf, &n, &err), 0);
    char hex[32], bytes[32];
    snprintf(hex, sizeof hex, "\"%016llx\"", (unsigned long long)XXH3_64bits(buf, n));
    snprintf(bytes, sizeof bytes, "%zu", n);
    free(buf);
    cJSON *doc = load_manifest(dir);
    char key[64];
    snprintf(key, sizeof key, "files.%d.xxh3_64", idx);
    mutate(doc, key, hex);
    snprintf(key, sizeof key, "files.%d.bytes", idx);
    mutate(doc, key, bytes);
    save_manifest(dir, doc);
    cJSON_Delete(doc);
}

/* spec: Z-CKPT-009 files with their recorded size and checksum that are not
 * what the manifest says are refused naming the file: a shard or module
 * weights file that is not safetensors at all, a shard tensor of five
 * dimensions (the message shows four and "..."), a stage-3 shard without
 * its "param_partition"; inspect runs the same checks */
static void test_vouched_lies(void **st) {
    (void)st;
    const char *shard = ck.shard[1], *model = ck.model;
    cJSON *orig = load_manifest(ck.dir);
    char *s0 = slurp_path(shard), *m0 = slurp_path(model);
    struct stat sb;
    assert_int_equal(stat(shard, &sb), 0);
    size_t shard_n = (size_t)sb.st_size;
    assert_int_equal(stat(model, &sb), 0);
    size_t model_n = (size_t)sb.st_size;
    Run r = {.dir = ck.dir, .cfg = CFG_FP16, .stage = 3};
    /* not safetensors: an 8-byte header length past the end of the file */
    put_path(shard, "\xff\xff\xff\x00\x00\x00\x00\x00{}", 10);
    vouch(ck.dir, 1, shard);
    resume_fails(&r, ZN_E_CORRUPT, "zero_pp_rank_1_optim_states.safetensors: byte 0: header length 16777215 runs past the end of the file (10 bytes)", NULL);
    CKPT(1, "zero_pp_rank_1_optim_states.safetensors: byte 0: header length 16777215 runs past the end of the file (10 bytes)", "INVALID", "inspect", ck.tag);
    put_path(shard, s0, shard_n);
    save_manifest(ck.dir, orig);
    put_path(model, "\xff\xff\xff\x00\x00\x00\x00\x00{}", 10);
    vouch(ck.dir, 2, model);
    CKPT(1, "mp_rank_00_model_states.safetensors: byte 0: header length 16777215 runs past the end of the file (10 bytes)", "INVALID", "inspect", ck.tag);
    put_path(model, m0, model_n);
    /* a stage-3 shard: rank_numel is 24 + 4 + 16 + 2 = 46 (Z-LAY-009) */
    static float data[64];
    ZnStEntry five[] = {{"fp32", ZN_F32, 5, {1, 1, 1, 2, 23}, data}, {"exp_avg", ZN_F32, 1, {46}, data},
                        {"exp_avg_sq", ZN_F32, 1, {46}, data}, {"param_partition", ZN_F16, 1, {46}, data}};
    ZnErr err;
    assert_int_equal(zn_st_write(shard, five, 4, NULL, &err), 0);
    save_manifest(ck.dir, orig);
    vouch(ck.dir, 1, shard);
    resume_fails(&r, ZN_E_CORRUPT, "zero_pp_rank_1_optim_states.safetensors: tensor 'fp32' is F32 [1, 1, 1, 2, ...], "
                 "the layout says F32 [46]", NULL);
    ZnStEntry three[] = {{"fp32", ZN_F32, 1, {46}, data}, {"exp_avg", ZN_F32, 1, {46}, data},
                         {"exp_avg_sq", ZN_F32, 1, {46}, data}};
    assert_int_equal(zn_st_write(shard, three, 3, NULL, &err), 0);
    vouch(ck.dir, 1, shard);
    resume_fails(&r, ZN_E_CORRUPT, "zero_pp_rank_1_optim_states.safetensors: tensor 'param_partition' is missing", NULL);
    CKPT(1, "zero_pp_rank_1_optim_states.safetensors: tensor 'param_partition' is missing", "INVALID", "inspect", ck.tag);
    put_path(shard, s0, shard_n);
    save_manifest(ck.dir, orig);
    Run ok = {.dir = ck.dir, .cfg = CFG_FP16, .world = 2, .stage = 3, .resume = 1, .steps = 3};
    if (run(&ok, &err)) fail_msg("restored: %s", err.msg);
    free(s0);
    free(m0);
    cJSON_Delete(orig);
}

/* spec: Z-CKPT-007 a manifest whose recorded layout breaks the partitioning
 * rules is refused on resume (same world size and stage, or a remap), and
 * by inspect, consolidate and to-universal, naming the manifest */
static void test_layout_lie_refused(void **st) {
    (void)st;
    char outp[600];
    snprintf(outp, sizeof outp, "%s/out", ck.dir);
    edit_manifest(ck.dir, "layout.params.2.flat_offset=57");
    const char *want = "global_step2/manifest.json: the recorded layout does not match the partitioning rules for "
                       "world size 2, stage 1";
    Run same = {.dir = ck.dir, .world = 2, .stage = 1};
    resume_fails(&same, ZN_E_CORRUPT, want, NULL);
    Run remap = {.dir = ck.dir, .world = 1, .stage = 2};
    resume_fails(&remap, ZN_E_CORRUPT, want, NULL);
    CKPT(1, want, "INVALID", "inspect", ck.tag);
    CKPT(1, want, NULL, "consolidate", "--input", ck.tag, "--output", outp);
    CKPT(1, want, NULL, "to-universal", "--input-folder", ck.tag, "--output-folder", outp);
}

/* spec: Z-CKPT-007 a universal checkpoint of another model: a parameter
 * with another name, or another number of dimensions, is refused naming
 * both (there is no module weights file to catch it first) */
static void test_universal_other_params(void **st) {
    (void)st;
    to_universal();
    const char *state = ck.univ_state;
    char *text = slurp_path(state);
    static const Mut t[] = {
        {"layout.params.1.name=\"layers.0.b\"",
         "optimizer_state.json: parameter 1 is 'layers.0.b' [8] in the checkpoint (model mlp:6,8,4) but "
         "'layers.0.bias' [8] in this model"},
        /* every dimension is printed: [8, 1] is not [8] */
        {"layout.params.1.shape=[8, 1]",
         "optimizer_state.json: parameter 1 is 'layers.0.bias' [8 x 1] in the checkpoint (model mlp:6,8,4) but "
         "'layers.0.bias' [8] in this model"},
    };
    Run u = {.dir = ck.dir, .world = 2, .stage = 2, .universal = 1};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        cJSON *doc = cJSON_Parse(text);
        apply_edit(doc, t[k].edit);
        restamp(doc);
        char *o = cJSON_Print(doc);
        put_path(state, o, strlen(o));
        cJSON_free(o);
        cJSON_Delete(doc);
        resume_fails(&u, ZN_E_USAGE, t[k].want, NULL);
    }
    /* a missing master file of the first parameter */
    put_path(state, text, strlen(text));
    free(text);
    char path[700];
    snprintf(path, sizeof path, "%s/univ/zero/layers.0.weight/fp32.safetensors", ck.dir);
    assert_int_equal(remove(path), 0);
    resume_fails(&u, ZN_E_IO, "univ/zero/layers.0.weight/fp32.safetensors", NULL);
}

/* spec: Z-CKPT-004 a checkpoint resumes when only the partitioning options
 * differ (stage 1/2 round_robin_gradients, stage 3 sub_group_size): the
 * remap restores master and both moments bitwise */
static void test_remap_on_options(void **st) {
    (void)st;
    static const struct { int stage; const char *save_cfg, *load_cfg; } t[] = {
        {1, "{\"train_micro_batch_size_per_gpu\": 2}",
         "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"round_robin_gradients\": true}}"},
        {3, "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"sub_group_size\": 10}}",
         "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"sub_group_size\": 20}}"},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char dir[] = "/tmp/zinc-cke-remap-XXXXXX";
        trained(dir, t[k].stage, t[k].save_cfg);
        char tagdir[512];
        snprintf(tagdir, sizeof tagdir, "%s/global_step2", dir);
        static ZtRig rig;
        memset(&rig, 0, sizeof rig);
        float got[3][92], want[3][92];
        ZtLoad load = {dir, got[0], got[1], got[2]};
        ZnErr err;
        if (zn_ckpt_read_full(tagdir, want[0], want[1], want[2], 92, &err)) fail_msg("%s", err.msg);
        assert_int_equal(zn_model_parse(MODEL, &rig.model, &err), 0);
        assert_int_equal(zn_data_init(&rig.data, rig.model.dims[0], rig.model.dims[rig.model.nlayers], 1234), 0);
        ZnConfigArgs args = zt_args(2, t[k].stage, -1, -1, -1);
        args.train_batch_size = 4;
        zt_config(&rig.cfg, t[k].load_cfg, &args);
        if (zt_engines_run(2, &rig, zt_load_gather, &load, &err)) fail_msg("stage %d: %s", t[k].stage, err.msg);
        assert_memory_equal(got, want, sizeof want);
        zn_data_free(&rig.data);
        zt_rm_rf(dir);
    }
}

/* spec: Z-CKPT-010 an empty --checkpoint-tag is refused as a usage error;
 * Z-CLI-006 an empty output path of a ckpt command is a usage error (exit
 * 2), not a write */
static void test_empty_names(void **st) {
    (void)st;
    Run r = {.dir = ck.dir, .tag = ""};
    resume_fails(&r, ZN_E_USAGE, "--checkpoint-tag: the tag '' is empty (a tag is a folder name inside ", NULL);
    CKPT(2, "'' is not a file path", NULL, "consolidate", "--input", ck.tag, "--output", "");
    CKPT(2, "--output-folder: the path must end in a folder name", NULL, "to-universal", "--input-folder", ck.tag,
         "--output-folder", "");
}

/* spec: Z-CKPT-013 a version-1 checkpoint (file checksums FNV-1a 64 under
 * "fnv1a64") still resumes and inspects; version 2 records XXH3-64 under
 * "xxh3_64"; a flipped byte is caught under either kind */
static void test_version1_loads(void **st) {
    (void)st;
    cJSON *doc = load_manifest(ck.dir);
    assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(doc, "version")), 2);
    cJSON *f, *files = cJSON_GetObjectItemCaseSensitive(doc, "files");
    int nf = 0;
    cJSON_ArrayForEach(f, files) {   /* rewrite every file's checksum the version-1 way */
        char path[700], hex[32];
        snprintf(path, sizeof path, "%s/%s", ck.tag, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "name")));
        char *buf;
        size_t n;
        ZnErr err;
        assert_int_equal(zn_read_file(path, 1 << 24, &buf, &n, &err), 0);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH3_64bits(buf, n));
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "xxh3_64")), hex);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)zn_fnv1a64(ZN_FNV_INIT, buf, n));
        free(buf);
        cJSON_DeleteItemFromObjectCaseSensitive(f, "xxh3_64");
        cJSON_AddStringToObject(f, "fnv1a64", hex);
        nf++;
    }
    assert_int_equal(nf, 3);
    mutate(doc, "version", "1");
    save_manifest(ck.dir, doc);
    cJSON_Delete(doc);
    CKPT(0, NULL, "mp_rank_00_model_states.safetensors", "inspect", ck.tag);
    char *out, *errs;
    assert_int_equal(ckpt_cmd(&out, &errs, (const char *const[]){"inspect", ck.tag, NULL}), 0);
    assert_str_contains(out, " fnv1a64 ");
    free(out);
    free(errs);
    ZnErr err;
    Run r = {.dir = ck.dir, .world = 2, .stage = 1, .steps = 3, .resume = 1};
    assert_int_equal(run(&r, &err), 0);
    /* a flipped byte in a version-1 shard is still refused */
    const char *shard = ck.shard[0];
    size_t n;
    char *b;
    assert_int_equal(zn_read_file(shard, 1 << 24, &b, &n, &err), 0);
    b[n / 2] ^= 1;
    put_path(shard, b, n);
    free(b);
    CKPT(1, "zero_pp_rank_0_optim_states.safetensors: checksum ", "INVALID", "inspect", ck.tag);
}

ZT_MAIN(
    CK1(test_manifest_fields),
    CK1(test_manifest_self),
    CK1(test_manifest_universal),
    CK3(test_manifest_stage3_layout),
    CK1(test_resume_files_list),
    CK1(test_resume_other_model),
    CK1(test_resume_latest_bytes),
    cmocka_unit_test(test_save_unwritable),
    CK1(test_read_full_count),
    cmocka_unit_test(test_cmd_usage),
    CK1(test_consolidate_errors),
    CK1(test_inspect),
    CK1(test_to_universal_errors),
    CK1(test_universal_resume_errors),
    CK3(test_vouched_lies),
    CK1(test_layout_lie_refused),
    CK1(test_universal_other_params),
    cmocka_unit_test(test_remap_on_options),
    CK1(test_empty_names),
    CK1(test_version1_loads))
