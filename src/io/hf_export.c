/* hf_export.c: `zinc ckpt consolidate --hf OUTDIR` (spec Z-HF-001..008):
 * the weights of a GPT-2 checkpoint as Hugging Face transformers loads
 * them, model.safetensors then config.json (hf_export.h). */
#include "io/hf_export.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "core/alloc.h"
#include "core/fileio.h"
#include "core/half.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *torch_dtype(ZnDtype dt) {
    return dt == ZN_F16 ? "float16" : dt == ZN_BF16 ? "bfloat16" : "float32";
}

int zn_hf_config_json(const ZnGpt2Shape *s, ZnDtype dt, char *buf, size_t n) {
    const int eos = s->vocab_size - 1;   /* GPT-2's <|endoftext|> is its last id, 50256 */
    return snprintf(buf, n,
                    "{\n"
                    "  \"activation_function\": \"gelu_new\",\n"
                    "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
                    "  \"attn_pdrop\": 0.0,\n"
                    "  \"bos_token_id\": %d,\n"
                    "  \"embd_pdrop\": 0.0,\n"
                    "  \"eos_token_id\": %d,\n"
                    "  \"initializer_range\": 0.02,\n"
                    "  \"layer_norm_epsilon\": 1e-05,\n"
                    "  \"model_type\": \"gpt2\",\n"
                    "  \"n_ctx\": %d,\n"
                    "  \"n_embd\": %d,\n"
                    "  \"n_head\": %d,\n"
                    "  \"n_inner\": null,\n"
                    "  \"n_layer\": %d,\n"
                    "  \"n_positions\": %d,\n"
                    "  \"reorder_and_upcast_attn\": false,\n"
                    "  \"resid_pdrop\": 0.0,\n"
                    "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                    "  \"scale_attn_weights\": true,\n"
                    "  \"tie_word_embeddings\": true,\n"
                    "  \"torch_dtype\": \"%s\",\n"
                    "  \"use_cache\": true,\n"
                    "  \"vocab_size\": %d\n"
                    "}\n",
                    eos, eos, s->n_positions, s->n_embd, s->n_head, s->n_layer, s->n_positions, torch_dtype(dt),
                    s->vocab_size);
}

int zn_hf_export(const char *in, const char *outdir, ZnDtype dt, int *ntensors, long *elements, ZnErr *err) {
    if (strlen(outdir) > ZN_CKPT_PATH_MAX) return zn_err(err, ZN_E_USAGE, "--hf: path too long");
    ZnModel *model = zn_calloc(ZN_HOST_IO, 1, sizeof *model);
    if (!model) return zn_nomem(err);
    float *w = NULL;
    int rc = zn_ckpt_read_model(in, model, &w, err);
    if (!rc && model->kind != ZN_MODEL_GPT2)
        rc = zn_err(err, ZN_E_USAGE, "%s: the checkpoint holds an MLP of %d layers, not GPT-2; --hf exports GPT-2 "
                    "checkpoints only", in, model->nlayers);
    const long total = rc ? 0 : zn_model_numel(model);
    uint16_t *w16 = NULL;
    ZnStEntry *e = NULL;
    if (!rc && dt != ZN_F32) {
        if (!(w16 = zn_malloc(ZN_HOST_IO, (size_t)total * 2))) rc = zn_nomem(err);
        for (long i = 0; !rc && i < total; i++) w16[i] = dt == ZN_F16 ? zn_f32_to_f16(w[i]) : zn_f32_to_bf16(w[i]);
    }
    if (!rc && !(e = zn_calloc(ZN_HOST_IO, (size_t)model->nparams, sizeof *e))) rc = zn_nomem(err);
    if (!rc) rc = zn_mkdir_p(outdir, err);
    if (!rc) {   /* every parameter once: lm_head.weight is an alias, not written */
        long off = 0;
        for (int p = 0; p < model->nparams; p++) {
            const ZnParamSpec *ps = &model->params[p];
            e[p].name = ps->name;
            e[p].dtype = dt;
            e[p].ndim = ps->ndim;
            for (int d = 0; d < ps->ndim; d++) e[p].shape[d] = ps->shape[d];
            e[p].data = dt == ZN_F32 ? (const void *)(w + off) : (const void *)(w16 + off);
            off += ps->numel;
        }
        char path[ZN_CKPT_PATH_MAX + 64];
        const char *meta[] = {"format", "pt", NULL};
        snprintf(path, sizeof path, "%s/model.safetensors", outdir);
        rc = zn_st_write(path, e, model->nparams, meta, err);
        if (!rc) {
            char cfg[2048];
            int n = zn_hf_config_json(&model->gpt2, dt, cfg, sizeof cfg);
            snprintf(path, sizeof path, "%s/config.json", outdir);
            rc = zn_write_file_atomic(path, cfg, (size_t)n, err);
        }
    }
    if (!rc) {
        *ntensors = model->nparams;
        *elements = total;
    }
    free(e);
    free(w16);
    free(w);
    free(model);
    return rc;
}
