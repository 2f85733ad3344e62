/* cli_sample.c: `zinc sample` (spec Z-SAMPLE-001..007): text from a GPT-2
 * checkpoint. The flags, the prompt's tokens, what is printed and the exit
 * status (0; 2 for a bad command line; 1 for a checkpoint that cannot be
 * read). The generation is src/engine/sample.c. */
#include "app/cli.h"
#include "engine/sample.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "core/alloc.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEW_LIMIT (1L << 20)

static void print_sample_usage(FILE *f) {
    fprintf(f, "usage: zinc sample --checkpoint-dir DIR [--checkpoint-tag TAG] --prompt TEXT\n"
               "                   [--max-new-tokens N] [--temperature X] [--top-k K] [--seed S] [--logits FILE]\n"
               "  a byte-level model (vocabulary 256) reads TEXT's bytes and prints bytes; a larger\n"
               "  vocabulary reads and prints comma-separated token ids. Defaults: 200 new tokens,\n"
               "  temperature 0 (greedy), top-k 0 (all), seed 0.\n");
}

static int sample_usage(const char *msg, const char *flag) {
    fprintf(stderr, "zinc: error: %s%s%.60s%s\n", msg, flag ? " '" : "", flag ? flag : "", flag ? "'" : "");
    print_sample_usage(stderr);
    return 2;
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "zinc: error: %s: expected an integer in %ld..%ld, got '%.60s'\n", flag, lo, hi, v);
        return 2;
    }
    *out = x;
    return 0;
}

/* the prompt's tokens: bytes (vocabulary 256) or comma-separated ids */
static int prompt_tokens(const char *prompt, int V, int *tok, long *n) {
    *n = 0;
    if (V == 256) {
        for (const char *p = prompt; *p; p++) tok[(*n)++] = (unsigned char)*p;
    } else {
        const char *p = prompt;
        while (*p) {
            char *end;
            errno = 0;
            long id = strtol(p, &end, 10);
            if (end == p || errno || id < 0 || id >= V || (*end && *end != ',')) {
                fprintf(stderr, "zinc: error: --prompt: token %ld ('%.20s') is not an id in 0..%d (a vocabulary of "
                                "%d reads comma-separated token ids)\n", *n, p, V - 1, V);
                return 2;
            }
            tok[(*n)++] = (int)id;
            p = *end ? end + 1 : end;
            if (*end && !*p) {
                fprintf(stderr, "zinc: error: --prompt: a token id is missing after the last comma\n");
                return 2;
            }
        }
    }
    if (*n == 0) return sample_usage("--prompt: give at least one token", NULL);
    return 0;
}

typedef struct { int bytes; } Out;

static void emit(int token, void *ctx) {
    const Out *o = ctx;
    if (o->bytes) putchar(token);
    else printf(",%d", token);
    fflush(stdout);
}

/* --logits FILE: the logits of every position of the prompt's window */
static int write_logits(ZnModel *m, float *w, const int *tok, long n, const char *path, ZnErr *err) {
    const int V = m->gpt2.vocab_size, P = m->gpt2.n_positions;
    const int T = n < P ? (int)n : P;
    float *lg = zn_malloc(ZN_HOST_APP, (size_t)T * V * sizeof(float));
    if (!lg) return zn_nomem(err);
    int rc = zn_sample_forward(m, w, tok + n - T, T, 0, T, lg, err);
    if (!rc) {
        ZnStEntry e = {"logits", ZN_F32, 2, {T, V}, lg};
        const char *meta[] = {"producer", "zinc sample", NULL};
        rc = zn_st_write(path, &e, 1, meta, err);
    }
    free(lg);
    return rc;
}

int zn_cmd_sample(int argc, char **argv) {
    const char *dir = NULL, *tag = NULL, *prompt = NULL, *logits_path = NULL;
    ZnSampleOpts o = {200, 0.0f, 0, 0};
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (i + 1 >= argc) return sample_usage("every flag of 'zinc sample' takes a value; none follows", f);
        const char *v = argv[++i];
        long x;
        if (!strcmp(f, "--checkpoint-dir")) dir = v;
        else if (!strcmp(f, "--checkpoint-tag")) tag = v;
        else if (!strcmp(f, "--prompt")) prompt = v;
        else if (!strcmp(f, "--logits")) logits_path = v;
        else if (!strcmp(f, "--max-new-tokens")) {
            if (parse_long(f, v, 0, MAX_NEW_LIMIT, &x)) return 2;
            o.max_new = x;
        } else if (!strcmp(f, "--top-k")) {
            if (parse_long(f, v, 0, 1L << 20, &x)) return 2;
            o.top_k = (int)x;
        } else if (!strcmp(f, "--seed")) {
            if (parse_long(f, v, 0, 0x7fffffffL, &x)) return 2;
            o.seed = (uint64_t)x;
        } else if (!strcmp(f, "--temperature")) {
            char *end;
            double t = strtod(v, &end);
            if (!*v || *end || !isfinite(t) || t < 0.0 || t > 1e4) {
                fprintf(stderr, "zinc: error: --temperature: expected a number in [0, 10000], got '%.60s'\n", v);
                return 2;
            }
            o.temperature = (float)t;
        } else return sample_usage("unknown flag for 'zinc sample':", f);
    }
    if (!dir || !prompt) return sample_usage("zinc sample needs --checkpoint-dir and --prompt", NULL);
    if (strlen(dir) > ZN_CKPT_PATH_MAX) return sample_usage("--checkpoint-dir: path too long", NULL);
    ZnErr err = {0};
    char tagdir[4096];
    int rc = zn_ckpt_find(dir, tag, tagdir, &err);
    ZnModel *m = zn_calloc(ZN_HOST_APP, 1, sizeof *m);
    float *w = NULL;
    int *tok = NULL;
    if (!rc && !m) rc = zn_nomem(&err);
    if (!rc) rc = zn_ckpt_read_model(tagdir, m, &w, &err);
    if (!rc && m->kind != ZN_MODEL_GPT2)
        rc = zn_err(&err, ZN_E_USAGE, "%s: the checkpoint holds an MLP, not GPT-2; zinc sample runs GPT-2 only", tagdir);
    if (!rc && m->gpt2.vocab_size > 65536)
        rc = zn_err(&err, ZN_E_USAGE, "%s: vocabulary %d: zinc sample runs vocabularies of at most 65536 tokens",
                    tagdir, m->gpt2.vocab_size);
    if (rc) {
        zn_err_print(stderr, "", &err);
        free(w);
        free(m);
        return rc == ZN_E_USAGE ? 2 : 1;
    }
    const int V = m->gpt2.vocab_size;
    const size_t plen = strlen(prompt);
    long n = 0;
    if (!(tok = zn_malloc(ZN_HOST_APP, (plen + 1 + (size_t)o.max_new) * sizeof(int)))) rc = zn_nomem(&err);
    int code = 0;
    if (!rc && (code = prompt_tokens(prompt, V, tok, &n))) {
        free(tok);
        free(w);
        free(m);
        return code;
    }
    if (!rc && logits_path) rc = write_logits(m, w, tok, n, logits_path, &err);
    Out out = {V == 256};
    if (!rc) {
        if (out.bytes) fwrite(prompt, 1, plen, stdout);
        else
            for (long i = 0; i < n; i++) printf(i ? ",%d" : "%d", tok[i]);
        rc = zn_sample_generate(m, w, tok, n, &o, emit, &out, &err);
        putchar('\n');
    }
    if (rc) zn_err_print(stderr, "", &err);
    free(tok);
    free(w);
    free(m);
    return rc ? (rc == ZN_E_USAGE ? 2 : 1) : 0;
}

const ZnCommand zn_sample_command = {"sample", zn_cmd_sample, print_sample_usage};
