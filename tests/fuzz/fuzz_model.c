/* fuzz_model.c: bytes -> zn_model_parse, the reader of --model specs
 * (spec Z-FUZZ-002). A spec that parses must describe a model the engine
 * can build: at least one layer, every size in 1..2^20, each parameter's
 * numel the product of its shape; and each "tie:L=M" part it accepted must
 * be two plain numbers naming the tie the model holds. */
#include "fuzz.h"
#include "engine/model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

/* the value of n decimal digits, leading zeros allowed; 1000 for anything
 * larger (no layer has that number) */
static int digits(const char *s, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; i++) v = v > 100 ? 1000 : v * 10 + (s[i] - '0');
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *spec = malloc(size + 1);   /* a command-line argument is a C string */
    if (!spec) return 0;
    memcpy(spec, data, size);
    spec[size] = 0;
    ZnModel m;
    ZnErr err = {0};
    int rc = zn_model_parse(spec, &m, &err);
    fuzz_check_err(rc, &err, "model spec");
    if (!rc && m.kind == ZN_MODEL_GPT2) {   /* GPT-2: a consistent shape and its params */
        const ZnGpt2Shape *g = &m.gpt2;
        int ok = g->n_layer >= 1 && g->n_head >= 1 && g->n_embd % g->n_head == 0 && g->vocab_size >= 1 &&
                 g->n_positions >= 1 && m.nparams == 12 * g->n_layer + 4 && m.nparams <= ZN_MAX_PARAMS &&
                 m.nmodules == 6 * g->n_layer + 3 && m.seq_len == g->n_positions;
        for (int p = 0; ok && p < m.nparams; p++) {
            long n = 1;
            for (int d = 0; d < m.params[p].ndim; d++) n *= m.params[p].shape[d];
            ok = n == m.params[p].numel && n >= 1;
        }
        if (!ok) {
            dprintf(2, "fuzz: model spec '%.200s' parsed into an impossible GPT-2\n", spec);
            abort();
        }
    } else if (!rc) {
        int ok = m.nlayers >= 1 && m.nlayers <= ZN_MAX_LAYERS && m.nparams >= 1 && m.nparams <= 2 * ZN_MAX_LAYERS;
        for (int i = 0; ok && i <= m.nlayers; i++) ok = m.dims[i] >= 1 && m.dims[i] <= (1 << 20);
        for (int p = 0; ok && p < m.nparams; p++) {
            long n = 1;
            for (int d = 0; d < m.params[p].ndim; d++) n *= m.params[p].shape[d];
            ok = n == m.params[p].numel;
        }
        if (!ok) {
            dprintf(2, "fuzz: model spec '%.200s' parsed into an impossible model\n", spec);
            abort();
        }
        /* every tie part as written: digits '=' digits, and that tie in m */
        for (const char *p = strstr(spec, "tie:"); ok && p; p = strstr(p + 4, "tie:")) {
            size_t nl = strspn(p + 4, "0123456789"), nm = p[4 + nl] == '=' ? strspn(p + 5 + nl, "0123456789") : 0;
            const char *after = p + 5 + nl + nm;
            ok = nl && nm && (*after == ',' || *after == 0);
            if (!ok) break;
            int l = digits(p + 4, nl), mm = digits(p + 5 + nl, nm), found = 0;
            ok = l < ZN_MAX_LAYERS && mm < l;
            if (!ok) break;
            char name[32];
            snprintf(name, sizeof name, "layers.%d.weight", l);
            for (int k = 0; k < m.naliases; k++)
                found |= !strcmp(m.aliases[k].name, name) && m.aliases[k].param == m.layer_param[mm][0];
            ok = found;
        }
        if (!ok) {
            dprintf(2, "fuzz: model spec '%.200s': a tie part was not read as written\n", spec);
            abort();
        }
        (void)zn_model_numel(&m);
        (void)zn_model_hidden_size(&m);
    }
    free(spec);
    return 0;
}
