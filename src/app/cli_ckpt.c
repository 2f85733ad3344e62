/* cli_ckpt.c: `zinc ckpt to-universal | consolidate | inspect` (spec
 * Z-CKPT-005, Z-CKPT-008, Z-CLI-006): the flags, the usage text, the lines
 * printed and the exit status (0; 2 for a bad command line or a usage
 * error; 1 for any other failure). The tools are src/io/checkpoint.c. */
#include "app/cli.h"
#include "core/fileio.h"
#include "io/checkpoint.h"
#include "io/ds_ckpt.h"
#include "io/hf_export.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_ckpt_usage(FILE *f) {
    fprintf(f, "usage: zinc ckpt to-universal --input-folder DIR/TAG --output-folder OUT [--num-workers N]\n"
               "       zinc ckpt consolidate --input DIR/TAG --output model.safetensors [--dtype fp32|bf16|fp16]\n"
               "       zinc ckpt consolidate --input DIR/TAG --hf OUTDIR [--dtype fp32|bf16|fp16]\n"
               "       zinc ckpt inspect DIR/TAG\n"
               "       zinc ckpt to-deepspeed --input DIR/TAG --output-folder OUT\n");
}

static int ckpt_usage(const char *msg) {
    fprintf(stderr, "zinc: error: %s\n", msg);
    print_ckpt_usage(stderr);
    return 2;
}

/* A tool's failure: its one error line, and the exit status. */
static int failed(int rc, const ZnErr *err) {
    zn_err_print(stderr, "", err);
    return rc == ZN_E_USAGE ? 2 : 1;
}

/* consolidate on a DeepSpeed folder (Z-DSCK-006): zero_to_fp32's tensors. */
static int ds_consolidate(const char *in, const char *out, const char *hf, ZnDtype dt) {
    ZnDsCkpt ck;
    ZnErr err = {0};
    int rc = zn_ds_open(&ck, in, &err);
    if (rc) return failed(rc, &err);
    char path[ZN_CKPT_PATH_MAX + 32];
    if (hf) {
        snprintf(path, sizeof path, "%s/model.safetensors", hf);
        rc = zn_mkdir_p(hf, &err);
    }
    int n = 0;
    long long elements = 0;
    if (!rc) rc = zn_ds_consolidate(&ck, hf ? path : out, dt, hf != NULL, &n, &elements, &err);
    const int stage = ck.stage, world = ck.universal ? ck.saved_world : ck.world;
    zn_ds_close(&ck);
    if (rc) return failed(rc, &err);
    printf("wrote %s: %d tensors, %lld parameters, %s, from DeepSpeed stage %d, world size %d\n", hf ? path : out, n,
           elements, zn_dtype_name(dt), stage, world);
    if (hf) printf("no config.json: a DeepSpeed checkpoint does not record the model's; copy the one you trained with\n");
    return 0;
}

static int ds_inspect(const char *in) {
    ZnDsCkpt ck;
    ZnErr err = {0};
    int rc = zn_ds_open(&ck, in, &err);
    if (!rc) {
        rc = zn_ds_describe(&ck, stdout, &err);
        zn_ds_close(&ck);
    }
    if (rc) {
        int code = failed(rc, &err);
        printf("checkpoint %s: INVALID\n", in);
        return code;
    }
    printf("checkpoint %s: OK\n", in);
    return 0;
}

static int cmd_to_universal(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    long workers = 1;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) return ckpt_usage("every flag of 'zinc ckpt to-universal' takes a value");
        if (!strcmp(argv[i], "--input-folder")) in = argv[++i];
        else if (!strcmp(argv[i], "--output-folder")) out = argv[++i];
        else if (!strcmp(argv[i], "--num-workers")) {
            char *end;
            workers = strtol(argv[++i], &end, 10);
            if (*end || workers < 1 || workers > 64) return ckpt_usage("--num-workers: expected 1..64");
        } else return ckpt_usage("unknown flag for 'zinc ckpt to-universal'");
    }
    if (!in || !out) return ckpt_usage("to-universal needs --input-folder and --output-folder");
    if (strlen(in) > ZN_CKPT_PATH_MAX || strlen(out) > ZN_CKPT_PATH_MAX) return ckpt_usage("path too long");
    char parent[4096], base[4096];
    if (zn_ckpt_split_last(out, parent, base)) return ckpt_usage("--output-folder: the path must end in a folder name");
    ZnCkptSummary sum;
    ZnErr err = {0};
    int rc = zn_ckpt_to_universal(in, out, (int)workers, &sum, &err);
    if (rc) return failed(rc, &err);
    printf("wrote universal checkpoint %s: %d parameters, optimizer step %ld\n", out, sum.nparams, sum.opt_step);
    return 0;
}

static int cmd_consolidate(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *hf = NULL;
    ZnDtype dt = ZN_F32;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) return ckpt_usage("every flag of 'zinc ckpt consolidate' takes a value");
        if (!strcmp(argv[i], "--input")) in = argv[++i];
        else if (!strcmp(argv[i], "--output")) out = argv[++i];
        else if (!strcmp(argv[i], "--hf")) hf = argv[++i];
        else if (!strcmp(argv[i], "--dtype")) {
            dt = zn_ckpt_dtype_from_name(argv[++i]);
            if (dt == ZN_DTYPE_N) return ckpt_usage("--dtype: expected fp32, bf16 or fp16");
        } else return ckpt_usage("unknown flag for 'zinc ckpt consolidate'");
    }
    if (out && hf) return ckpt_usage("consolidate takes --output or --hf, not both");
    if (!in || (!out && !hf)) return ckpt_usage("consolidate needs --input and --output (or --hf OUTDIR)");
    if (strlen(in) > ZN_CKPT_PATH_MAX || (hf && strlen(hf) > ZN_CKPT_PATH_MAX)) return ckpt_usage("path too long");
    if (zn_ds_is_folder(in)) return ds_consolidate(in, out, hf, dt);
    ZnCkptSummary sum;
    ZnErr err = {0};
    if (hf) {   /* a Hugging Face model folder (Z-HF-001) */
        int n;
        long elements;
        int rc = zn_hf_export(in, hf, dt, &n, &elements, &err);
        if (rc) return failed(rc, &err);
        printf("wrote %s/model.safetensors and %s/config.json: GPT2LMHeadModel, %d tensors (lm_head.weight tied), "
               "%ld parameters, %s\n", hf, hf, n, elements, zn_dtype_name(dt));
        return 0;
    }
    int rc = zn_ckpt_consolidate(in, out, dt, &sum, &err);
    if (rc) return failed(rc, &err);
    printf("wrote %s: %d tensors (%d tied), %ld parameters, %s\n", out, sum.nparams + sum.naliases, sum.naliases,
           sum.elements, zn_dtype_name(dt));
    return 0;
}

static int cmd_inspect(int argc, char **argv) {
    if (argc != 1) return ckpt_usage("inspect takes one checkpoint folder");
    if (strlen(argv[0]) > ZN_CKPT_PATH_MAX) return ckpt_usage("path too long");
    if (zn_ds_is_folder(argv[0])) return ds_inspect(argv[0]);
    ZnErr err = {0};
    int rc = zn_ckpt_describe(argv[0], stdout, &err);
    if (rc) {
        int code = failed(rc, &err);
        printf("checkpoint %s: INVALID\n", argv[0]);
        return code;
    }
    printf("checkpoint %s: OK\n", argv[0]);
    return 0;
}

/* A zinc checkpoint written as DeepSpeed's folder (Z-DSCK-009). */
static int cmd_to_deepspeed(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) return ckpt_usage("every flag of 'zinc ckpt to-deepspeed' takes a value");
        if (!strcmp(argv[i], "--input")) in = argv[++i];
        else if (!strcmp(argv[i], "--output-folder")) out = argv[++i];
        else return ckpt_usage("unknown flag for 'zinc ckpt to-deepspeed'");
    }
    if (!in || !out) return ckpt_usage("to-deepspeed needs --input and --output-folder");
    if (strlen(in) > ZN_CKPT_PATH_MAX || strlen(out) > ZN_CKPT_PATH_MAX) return ckpt_usage("path too long");
    if (zn_ds_is_folder(in)) return ckpt_usage("--input: a DeepSpeed folder already; to-deepspeed reads zinc's");
    ZnErr err = {0};
    int rc = zn_mkdir_p(out, &err);
    ZnDsWriteSummary sum;
    if (!rc) rc = zn_ds_write(in, out, &sum, &err);
    if (rc) return failed(rc, &err);
    printf("wrote DeepSpeed checkpoint %s/%s: stage %d, world size %d, %d optimizer groups, %d files; %s/latest names "
           "it\n", out, sum.tag, sum.stage, sum.world, sum.ngroups, sum.nfiles, out);
    return 0;
}

int zn_cmd_ckpt(int argc, char **argv) {
    if (argc < 1) return ckpt_usage("zinc ckpt needs a command");
    if (!strcmp(argv[0], "to-universal")) return cmd_to_universal(argc - 1, argv + 1);
    if (!strcmp(argv[0], "consolidate")) return cmd_consolidate(argc - 1, argv + 1);
    if (!strcmp(argv[0], "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(argv[0], "to-deepspeed")) return cmd_to_deepspeed(argc - 1, argv + 1);
    return ckpt_usage("unknown 'zinc ckpt' command");
}

const ZnCommand zn_ckpt_command = {"ckpt", zn_cmd_ckpt, print_ckpt_usage};
