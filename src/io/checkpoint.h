/* checkpoint.h: sharded checkpoints, exact resume, resharding, universal
 * checkpoints and consolidation (spec Z-CKPT-*).
 *
 * DIR/global_step{N}/
 *   manifest.json                                   written last by rank 0: zinc
 *       version, world size, stage, dtypes, the layout of every parameter,
 *       global step, samples, loss scaler, scheduler, data position, the
 *       config, and the size and XXH3-64 checksum of every file (version 2;
 *       version 1's FNV-1a 64 still loads)
 *   zero_pp_rank_{r}_optim_states.safetensors       rank r's shard: fp32
 *       master ("fp32"), "exp_avg", "exp_avg_sq" and, on stage 3, its 16-bit
 *       parameter partition ("param_partition")
 *   mp_rank_00_model_states.safetensors             the module weights in the
 *       model dtype, once, padding stripped, under their names
 * DIR/latest                                        the newest complete tag
 * Every file is written to a temporary name, fsynced and renamed; the
 * manifest follows the shards and `latest` follows the manifest, so `latest`
 * always names a complete checkpoint.
 *
 * A universal checkpoint (zinc ckpt to-universal) holds one folder per
 * parameter, zero/<name>/{fp32,exp_avg,exp_avg_sq}.safetensors with the
 * parameter's shape and no padding, plus zero/optimizer_state.json (steps,
 * loss scaler, scheduler, config). */
#ifndef ZN_CHECKPOINT_H
#define ZN_CHECKPOINT_H
#include <stdio.h>
#include "engine/engine.h"

/* Collective: every rank writes its shard; rank 0 the module weights, the
 * manifest, then DIR/latest. model_spec and config_json (may be NULL) are
 * recorded in the manifest. */
int zn_ckpt_save(ZnEngine *E, const char *dir, const char *model_spec, const char *config_json, ZnErr *err);

/* Collective: restores a sharded checkpoint DIR/TAG (tag NULL: the one
 * DIR/latest names) into E, whatever world size and stage it was saved with
 * (the manifest's layout makes a different one a remap), or, with universal,
 * a universal checkpoint folder DIR/TAG. Verifies sizes, checksums, dtypes,
 * shapes and the layout against E's model; a mismatch is an error naming the
 * file, the tensor and what differs. */
int zn_ckpt_load(ZnEngine *E, const char *dir, const char *tag, int universal, ZnErr *err);

/* Verifies every shard of DIR/TAG and rebuilds the full fp32 master, exp_avg
 * and exp_avg_sq in model order (numel elements each, padding stripped). */
/* This rank's partition (E->part_n floats, padding zero) out of a full
 * model-order vector: what a resume through the full vectors installs. */
void zn_ckpt_take_partition(const ZnEngine *E, const float *full, float *part);
int zn_ckpt_read_full(const char *tagdir, float *master, float *exp_avg, float *exp_avg_sq, long numel, ZnErr *err);

/* Checks manifest text (len bytes, need not be NUL-terminated) as a load
 * does before it opens a shard: the JSON, the self checksum, every field's
 * type and range, and the recorded layout against the partitioning rules.
 * universal: the text is a universal checkpoint's zero/optimizer_state.json
 * (no layout). name labels messages. Errors are ZN_E_CORRUPT; any text is
 * safe to pass (the fuzzer tests/fuzz/fuzz_manifest.c does, spec Z-FUZZ). */
int zn_ckpt_manifest_check(const char *text, size_t len, const char *name, int universal, ZnErr *err);

/* The checkpoint tools behind `zinc ckpt` (its flags: src/app/cli_ckpt.c).
 * Every folder given must be at most ZN_CKPT_PATH_MAX bytes. */
#define ZN_CKPT_PATH_MAX 3000
typedef struct {
    int nparams, naliases;   /* parameters, and the extra names of tied ones */
    long elements;           /* model elements (consolidate) */
    long opt_step;           /* optimizer step (to-universal) */
} ZnCkptSummary;
/* DIR/TAG to a universal checkpoint in out (Z-CKPT-005), workers (1..64)
 * threads converting parameters; <parent of out>/latest_universal names it. */
int zn_ckpt_to_universal(const char *in, const char *out, int workers, ZnCkptSummary *sum, ZnErr *err);
/* A checkpoint DIR/TAG read whole (zinc ckpt to-deepspeed): what its
 * manifest records and the full fp32 master, exp_avg and exp_avg_sq in
 * model order (zn_model_numel(&model) floats each), every shard verified. */
typedef struct {
    ZnModel model;
    char model_spec[512];
    int world, stage;
    ZnPlan plan;         /* the saving stage's */
    ZnDtype dt;
    ZnEngineState st;
    char *config_text;   /* the config file the run read, as JSON text; NULL where it read none */
    float *full[3];      /* master, exp_avg, exp_avg_sq */
} ZnCkptWhole;
int zn_ckpt_read_whole(const char *tagdir, ZnCkptWhole *c, ZnErr *err);
void zn_ckpt_whole_free(ZnCkptWhole *c);
/* DIR/TAG to one safetensors file of the full weights in dt (Z-CKPT-008). */
int zn_ckpt_consolidate(const char *in, const char *out, ZnDtype dt, ZnCkptSummary *sum, ZnErr *err);
/* The folder of checkpoint DIR/TAG (tag NULL: the one DIR/latest names)
 * into tagdir (4096 bytes): a bad or missing tag is an
 * error naming it (Z-SAMPLE-001). */
int zn_ckpt_find(const char *dir, const char *tag, char *tagdir, ZnErr *err);
/* The model checkpoint folder DIR/TAG holds: its manifest's model spec
 * parsed into *model, and its full fp32 master weights in model order
 * (*weights, zn_model_numel(model) floats, malloc'd; the caller frees),
 * every shard verified (zinc sample, zinc ckpt consolidate --hf). */
int zn_ckpt_read_model(const char *tagdir, ZnModel *model, float **weights, ZnErr *err);
/* Verifies every file of DIR/TAG and writes what it holds to out, one line
 * per fact and per file (`zinc ckpt inspect`); nothing on failure. */
int zn_ckpt_describe(const char *dir, FILE *out, ZnErr *err);
/* path's parent folder and last component (PATH_MAX-sized buffers),
 * trailing slashes ignored; 1 when no folder name ends it ("", ".", "/"). */
int zn_ckpt_split_last(const char *path, char *parent, char *base);
/* "fp32", "fp16", "bf16" as a dtype; ZN_DTYPE_N for anything else. */
ZnDtype zn_ckpt_dtype_from_name(const char *s);

#endif
