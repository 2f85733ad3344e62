/* fuzz_cli.c: bytes -> `zinc train`'s flags (spec Z-FUZZ-003). The input is
 * split into arguments at every NUL or newline byte, then read the way
 * zn_cmd_train reads its command line: zn_train_flag for each flag, the
 * backend and rendezvous values, and zn_train_resolve, which parses the
 * model spec and the config with the flags applied. Nothing is trained and
 * no file is read: a --config names a file the harness does not open; the
 * text below stands in for it. */
#include "fuzz.h"
#include "app/cli.h"
#include "app/proc.h"
#include "comm/store.h"

#define MAX_ARGS 256

static const char *config_text =
    "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\","
    " \"gradient_accumulation_steps\": \"auto\", \"gradient_clipping\": \"auto\","
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\","
    " \"eps\": \"auto\", \"weight_decay\": \"auto\"}},"
    " \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": \"auto\","
    " \"warmup_max_lr\": \"auto\", \"warmup_num_steps\": \"auto\", \"total_num_steps\": \"auto\"}},"
    " \"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": \"auto\"},"
    " \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": \"auto\"}}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

/* what zn_cmd_train does with its arguments before it starts a run */
static int read_flags(int argc, char **argv, ZnErr *err) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    for (int i = 0; i < argc; i++) {
        int c = zn_train_flag(&f, argc, argv, &i, err);
        if (c < 0) return err->code;
        if (c == 0) return zn_err(err, ZN_E_USAGE, "unknown flag '%s' for 'zinc train'", argv[i]);
    }
    ZnBackend backend = ZN_BACKEND_SIM;
    if (f.backend && zn_backend_parse(f.backend, &backend, err)) return err->code;
    if (f.rendezvous) {
        ZnProcEnv pe = {.source = "none"};
        ZnRdvSpec spec;
        if (zn_rdv_parse(f.rendezvous, &pe, &spec, err)) return err->code;
    }
    ZnRunOpts o;
    int rc = zn_train_resolve(&f, f.config_path ? config_text : NULL, &o, err);
    zn_run_opts_free(&o);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    char *argv[MAX_ARGS + 1];
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    int argc = 0;
    char *start = buf;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
        if (i < size && buf[i] != 0 && buf[i] != '\n') continue;
        if (i == size && start == buf + size) break;   /* no empty argument after a final separator */
        buf[i] = 0;
        argv[argc++] = start;
        start = buf + i + 1;
    }
    argv[argc] = NULL;
    ZnErr err = {0};
    fuzz_check_err(read_flags(argc, argv, &err), &err, "train flags");
    free(buf);
    return 0;
}
