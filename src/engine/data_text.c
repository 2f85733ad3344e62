/* data_text.c: token data for language models (data_text.h, spec
 * Z-DATA-010..013). */
#include "engine/data_text.h"
#include "core/alloc.h"
#include "core/fileio.h"
#include "core/rng.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a token file or text larger than this is refused: 2^31 tokens */
#define ZN_TOKENS_MAX_BYTES ((size_t)1 << 32)

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* llm.c's layout: header int32 [0] magic, [1] version, [2] count. */
static int parse_tokens(ZnTokens *t, const unsigned char *b, size_t n, ZnErr *err) {
    if (n < ZN_TOKENS_HEADER)
        return zn_err(err, ZN_E_CORRUPT, "%s: %zu bytes, a token file starts with a %d-byte header (ends at byte %zu)",
                      t->path, n, ZN_TOKENS_HEADER, n);
    uint32_t magic = le32(b), version = le32(b + 4), count = le32(b + 8);
    if (magic != ZN_TOKENS_MAGIC)
        return zn_err(err, ZN_E_CORRUPT, "%s: byte 0: magic %u, a token file has %d (llm.c's format)", t->path, magic,
                      ZN_TOKENS_MAGIC);
    if (version != 1)
        return zn_err(err, ZN_E_CORRUPT, "%s: byte 4: version %u, only version 1 is known", t->path, version);
    size_t body = n - ZN_TOKENS_HEADER;
    if (body % 2)
        return zn_err(err, ZN_E_CORRUPT, "%s: byte %zu: a token cut in half (tokens are 2 bytes)", t->path, n - 1);
    if ((size_t)count != body / 2)
        return zn_err(err, ZN_E_CORRUPT, "%s: byte 8: the header counts %u tokens, the file holds %zu", t->path, count,
                      body / 2);
    t->n = (long)count;
    t->tok = zn_malloc(ZN_HOST_ENGINE, (size_t)(count ? count : 1) * sizeof *t->tok);
    if (!t->tok) return zn_nomem(err);
    int top = 0;
    for (long i = 0; i < t->n; i++) {
        const unsigned char *p = b + ZN_TOKENS_HEADER + 2 * (size_t)i;
        t->tok[i] = (uint16_t)(p[0] | p[1] << 8);
        if (t->tok[i] >= top) top = t->tok[i] + 1;
    }
    t->vocab = top;
    return 0;
}

int zn_tokens_open(const char *spec, ZnTokens *t, ZnErr *err) {
    memset(t, 0, sizeof *t);
    const char *colon = spec ? strchr(spec, ':') : NULL;
    int text = colon && (size_t)(colon - spec) == 4 && !strncmp(spec, "text", 4);
    int toks = colon && (size_t)(colon - spec) == 6 && !strncmp(spec, "tokens", 6);
    if (!text && !toks)
        return zn_err(err, ZN_E_USAGE, "--data '%.200s': expected text:FILE or tokens:FILE", spec ? spec : "");
    if (!colon[1]) return zn_err(err, ZN_E_USAGE, "--data '%s': the file name is missing", spec);
    if (strlen(colon + 1) >= sizeof t->path)
        return zn_err(err, ZN_E_USAGE, "--data: file name longer than %zu bytes", sizeof t->path - 1);
    snprintf(t->path, sizeof t->path, "%s", colon + 1);
    char *buf;
    size_t n;
    int rc = zn_read_file(t->path, ZN_TOKENS_MAX_BYTES, &buf, &n, err);
    if (rc) return rc;
    const unsigned char *b = (const unsigned char *)buf;
    if (toks) {
        rc = parse_tokens(t, b, n, err);
    } else {
        t->n = (long)n;
        t->vocab = 256;
        t->is_text = 1;
        t->tok = zn_malloc(ZN_HOST_ENGINE, (n ? n : 1) * sizeof *t->tok);
        if (!t->tok) rc = zn_nomem(err);
        for (size_t i = 0; !rc && i < n; i++) t->tok[i] = b[i];
    }
    free(buf);
    if (!rc && t->n == 0) rc = zn_err(err, ZN_E_USAGE, "%s: no tokens (an empty file)", t->path);
    if (rc) zn_tokens_free(t);
    return rc;
}

void zn_tokens_free(ZnTokens *t) {
    free(t->tok);
    t->tok = NULL;
    t->n = 0;
}

int zn_tokens_check(const ZnTokens *t, int T, int vocab, ZnErr *err) {
    if (T < 1) return zn_err(err, ZN_E_USAGE, "a window of %d tokens: the sequence length must be at least 1", T);
    if (t->n < (long)T + 1)
        return zn_err(err, ZN_E_USAGE, "%s: %ld tokens, a window of %d needs %d (inputs and the next token)", t->path,
                      t->n, T, T + 1);
    if (t->vocab > vocab)
        for (long i = 0; i < t->n; i++)
            if (t->tok[i] >= vocab) {
                long at = t->is_text ? i : ZN_TOKENS_HEADER + 2 * i;
                return zn_err(err, ZN_E_USAGE, "%s: byte %ld: token %u, the model's vocabulary is %d", t->path, at,
                              t->tok[i], vocab);
            }
    return 0;
}

/* the key of the windows, apart from the MLP data's keys */
#define ZN_DATA_WINDOWS 0x7E47D0C5u

long zn_tokens_window_start(const ZnTokens *t, uint64_t seed, uint64_t s, int T) {
    uint64_t span = (uint64_t)(t->n - T);   /* starts 0 .. n - T - 1 */
    return (long)(zn_rng_u64(zn_mix64(seed ^ ZN_DATA_WINDOWS), s) % span);
}

void zn_tokens_window(const ZnTokens *t, uint64_t seed, uint64_t s, int T, int *in, int *target) {
    long start = zn_tokens_window_start(t, seed, s, T);
    for (int i = 0; i < T; i++) {
        in[i] = t->tok[start + i];
        target[i] = t->tok[start + i + 1];
    }
}
