/* fuzz_config.c: config text -> zn_config_parse, the entry point every
 * config file goes through (spec Z-FUZZ-001). Each input is parsed twice:
 * with no command-line args, and with every arg set, so that "auto" values
 * are filled and overrides applied too. */
#include "fuzz.h"
#include "core/config.h"

/* The one call into the config reader (the integrator of another syntax
 * changes only this line). */
static int parse(const uint8_t *data, size_t size, const ZnConfigArgs *args, ZnConfig *out, ZnErr *err) {
    return zn_config_parse((const char *)data, size, "fuzz.json", args, out, err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ZnConfig c;
    ZnErr err = {0};
    fuzz_check_err(parse(data, size, NULL, &c, &err), &err, "config, no args");

    ZnConfigArgs a;   /* what `zinc train --world-size 2 --lr 0.01 ...` passes */
    zn_config_args_init(&a);
    a.world_size = 2;
    a.micro_batch = 4;
    a.grad_accum = 2;
    a.lr = 0.01;
    a.weight_decay = 0.1;
    a.beta1 = 0.8;
    a.beta2 = 0.99;
    a.eps = 1e-6;
    a.max_grad_norm = 0.5;
    a.warmup_steps = 5;
    a.total_steps = 50;
    a.hidden_size = 64;
    a.dtype = ZN_BF16;
    err = (ZnErr){0};
    fuzz_check_err(parse(data, size, &a, &c, &err), &err, "config, every arg set");
    return 0;
}
