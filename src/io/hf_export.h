/* hf_export.h: a GPT-2 checkpoint as a Hugging Face model folder (spec
 * Z-HF-001..008), what `zinc ckpt consolidate --hf OUTDIR` writes:
 *
 *   OUTDIR/model.safetensors  GPT2LMHeadModel's state dict: every parameter
 *       under its transformers name and layout (Conv1D weights [in, out]),
 *       in fp32, fp16 or bf16, without the tied lm_head.weight (as
 *       save_pretrained writes it; transformers ties it again on load);
 *       metadata {"format": "pt"}
 *   OUTDIR/config.json        GPT2Config: the shape, activation "gelu_new",
 *       layer_norm_epsilon 1e-5, every dropout 0, tied embeddings, bos and
 *       eos both vocab_size - 1, torch_dtype the file's dtype
 *
 * Each file is written to a temporary name, fsynced and renamed;
 * config.json comes last, so a folder holding it holds both. */
#ifndef ZN_HF_EXPORT_H
#define ZN_HF_EXPORT_H
#include <stddef.h>
#include "core/dtype.h"
#include "core/err.h"
#include "engine/model.h"

/* GPT2Config of shape s whose weights are stored in dt, as JSON text
 * (NUL-terminated, at most n bytes with the NUL); its length. */
int zn_hf_config_json(const ZnGpt2Shape *s, ZnDtype dt, char *buf, size_t n);

/* Checkpoint folder in (DIR/TAG) to the Hugging Face folder outdir (made
 * if missing). A checkpoint of a model other than GPT-2 is ZN_E_USAGE
 * naming it. *ntensors: the tensors written; *elements: their elements. */
int zn_hf_export(const char *in, const char *outdir, ZnDtype dt, int *ntensors, long *elements, ZnErr *err);

#endif
