/* checkpoint.h: sharded checkpoints, exact resume, resharding, universal
 * checkpoints and consolidation (spec Z-CKPT-*).
 *
 * DIR/global_step{N}/
 *   manifest.json                                   written last by rank 0: zinc
 *       version, world size, stage, dtypes, the layout of every parameter,
 *       global step, samples, loss scaler, scheduler, data position, the
 *       config, and the size and FNV-1a 64 checksum of every file
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
int zn_ckpt_read_full(const char *tagdir, float *master, float *exp_avg, float *exp_avg_sq, long numel, ZnErr *err);

/* Checks manifest text (len bytes, need not be NUL-terminated) as a load
 * does before it opens a shard: the JSON, the self checksum, every field's
 * type and range, and the recorded layout against the partitioning rules.
 * universal: the text is a universal checkpoint's zero/optimizer_state.json
 * (no layout). name labels messages. Errors are ZN_E_CORRUPT; any text is
 * safe to pass (the fuzzer tests/fuzz/fuzz_manifest.c does, spec Z-FUZZ). */
int zn_ckpt_manifest_check(const char *text, size_t len, const char *name, int universal, ZnErr *err);

/* zinc ckpt {to-universal, consolidate, inspect} */
int zn_cmd_ckpt(int argc, char **argv);

#endif
