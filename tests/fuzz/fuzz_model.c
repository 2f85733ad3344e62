/* fuzz_model.c: bytes -> zn_model_parse, the reader of --model specs
 * (spec Z-FUZZ-002). A spec that parses must describe a model the engine
 * can build: at least one layer, every size in 1..2^20, each parameter's
 * numel the product of its shape. */
#include "fuzz.h"
#include "../../src/model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
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
    if (!rc) {
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
        (void)zn_model_numel(&m);
        (void)zn_model_hidden_size(&m);
    }
    free(spec);
    return 0;
}
