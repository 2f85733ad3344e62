/* sample.h: text from a GPT-2's weights (spec Z-SAMPLE-002..004), what
 * `zinc sample` runs: the model forward on the host device in fp32 over one
 * window of tokens (batch 1, the last n_positions tokens at most), and the
 * next token picked from the last row's logits. */
#ifndef ZN_SAMPLE_H
#define ZN_SAMPLE_H
#include <stdint.h>
#include "core/err.h"
#include "engine/model.h"

typedef struct {
    long max_new;          /* tokens to generate */
    float temperature;     /* 0: greedy */
    int top_k;             /* 0: the whole vocabulary */
    uint64_t seed;
} ZnSampleOpts;

/* The key of the sampling stream: draws are zn_rng_uniform(key, position). */
#define ZN_SAMPLE_SALT 0x5A3D1E77C0FFEEull

/* The token at sequence position pos from logits [V] (Z-SAMPLE-003/004).
 * temperature 0: the argmax, ties to the lowest id. Otherwise the tokens in
 * order of decreasing logit (ties: lower id first), cut to the first top_k
 * (0: all), weighted exp((l - max) / temperature) in double; the first whose
 * running sum exceeds u * total, u = zn_rng_uniform(zn_mix64(seed ^
 * ZN_SAMPLE_SALT), pos). scratch: V entries (unused when greedy). */
typedef struct { float l; int id; } ZnSampleCand;
int zn_sample_pick(const float *logits, int V, float temperature, int top_k, uint64_t seed, uint64_t pos,
                   ZnSampleCand *scratch);

/* Logits of the forward over tok[0..T) (1 <= T <= n_positions): rows
 * [row, row + n) of [T, V] into out. weights: the full fp32 weights in
 * model order (zn_ckpt_read_model). m is a GPT-2; its seq_len is set to T. */
int zn_sample_forward(ZnModel *m, float *weights, const int *tok, int T, int row, int n, float *out, ZnErr *err);

/* Generates o->max_new tokens after the prompt tok[0..n) into tok[n..),
 * each from the forward over the last n_positions tokens at most, calling
 * emit(token, ctx) after each (emit may be NULL). tok has room for
 * n + o->max_new tokens. */
int zn_sample_generate(ZnModel *m, float *weights, int *tok, long n, const ZnSampleOpts *o,
                       void (*emit)(int token, void *ctx), void *ctx, ZnErr *err);

#endif
