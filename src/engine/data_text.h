/* data_text.h: token data for language models (spec Z-DATA-010..013).
 *
 *   text:FILE    the file's bytes are the tokens (vocabulary 256)
 *   tokens:FILE  llm.c's token file: a header of 256 little-endian int32
 *                (magic 20240520, version 1, token count, the rest unused),
 *                then the tokens as little-endian uint16
 *
 * A training sample is a window of T + 1 consecutive tokens (inputs, then
 * the same shifted by one as targets) whose start is a pure function of
 * (seed, global sample index): world size, stage and resume point never
 * change what a sample is. */
#ifndef ZN_DATA_TEXT_H
#define ZN_DATA_TEXT_H
#include <stdint.h>
#include "core/err.h"

#define ZN_TOKENS_MAGIC 20240520
#define ZN_TOKENS_HEADER 1024   /* bytes: 256 int32 */

typedef struct ZnTokens {
    char path[512];
    uint16_t *tok;     /* every token of the file */
    long n;            /* how many */
    int vocab;         /* 256 for text:, the largest token + 1 for tokens: */
    int is_text;       /* token i is byte i (text:), else byte 1024 + 2i */
} ZnTokens;

/* Opens "text:FILE" or "tokens:FILE" and reads every token. Errors name the
 * file and, for a malformed token file, the byte offset of the problem. */
int zn_tokens_open(const char *spec, ZnTokens *t, ZnErr *err);
void zn_tokens_free(ZnTokens *t);
/* A window of T + 1 tokens needs at least T + 1 tokens; a model whose
 * vocabulary is smaller than a token refuses the data (byte offset of the
 * first such token). */
int zn_tokens_check(const ZnTokens *t, int T, int vocab, ZnErr *err);
/* Where sample s starts (Z-DATA-012): mix(seed, s) mod (n - T). */
long zn_tokens_window_start(const ZnTokens *t, uint64_t seed, uint64_t s, int T);
/* Sample s: in[0..T) = tok[start..start+T), target[i] = tok[start+1+i]. */
void zn_tokens_window(const ZnTokens *t, uint64_t seed, uint64_t s, int T, int *in, int *target);

#endif
