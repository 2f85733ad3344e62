/* main.c: `zinc <command> [flags]`. */
#include <stdio.h>
#include <string.h>
#include "app/cli.h"
#include "core/fileio.h"

#define ZN_VERSION "0.1.0"

static void usage(FILE *f) {
    fprintf(f,
        "zinc " ZN_VERSION ": a test-suite-first reference implementation of ZeRO\n"
        "\n"
        "usage: zinc [--verbose] <command> [flags]\n"
        "  train      train on the simulator (no flags: stage 3 on 4 simulated ranks), or as\n"
        "             one rank of a multi-process run (--backend tcp|mpi|nccl); --backend\n"
        "             cuda runs the simulated ranks on one GPU\n"
        "  plan       a dry run (zinc train --dry-run, the same flags): memory per phase, tier and\n"
        "             category, bytes per collective and link, the largest micro-batch that fits\n"
        "             (--device-memory), the step time on --machine dgx-h100|dgx-a100|FILE.json\n"
        "  calibrate  measure this machine as N ranks see it: a machine file for plan's step time\n"
        "             (zinc calibrate --world-size N [--backend sim|tcp|mpi] -o FILE.json)\n"
        "  launch     start N ranks of a command on this node, as torchrun does\n"
        "  compare    train stage K and a stage-0 baseline in lockstep; compare loss,\n"
        "             gradients and parameters every step (TEST PASSED / TEST FAILED)\n"
        "  stepper    step two engines with their own configs on the same batches\n"
        "             (ModelStepper's STATUS / DIVERGED lines)\n"
        "  plot       draw runs' CSV logs as curves on one SVG chart\n"
        "  ckpt       to-universal, consolidate (--hf: a Hugging Face folder), inspect checkpoints\n"
        "  sample     generate text from a GPT-2 checkpoint (zinc sample --checkpoint-dir DIR\n"
        "             --prompt TEXT [--max-new-tokens N] [--temperature X] [--top-k K] [--seed S])\n"
        "  estimate   DeepSpeed's memory estimators and the ZeRO paper's formulas\n"
        "  spec       run conformance cases (zinc spec run [CASE...]) or list\n"
        "             uncovered clauses (zinc spec coverage)\n"
        "  version    print the version\n"
        "\n");
    zn_train_command.usage(f);
    fprintf(f,
        "zinc launch --nproc-per-node N [--nnodes M --node-rank R] [--master-addr A]\n"
        "            [--master-port P] -- zinc train --backend tcp|mpi ...\n"
        "Flags override the config; they also fill its \"auto\" values as the HF Trainer does.\n");
}

/* `zinc CMD --help` (or -h) anywhere among CMD's own flags, before a "--"
   (launch's command follows it): CMD's usage on stdout, exit 0 (Z-CLI-012). */
static int help_asked(int argc, char **argv) {
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}

static const ZnCommand *command_named(const char *name) {
    static const ZnCommand *const commands[] = {
        &zn_train_command, &zn_plan_command, &zn_calibrate_command, &zn_spec_command,
        &zn_compare_command, &zn_stepper_command, &zn_launch_command, &zn_estimate_command,
        &zn_ckpt_command, &zn_plot_command, &zn_sample_command,
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i]->name)) return commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    /* every line reaches a file or a pipe when it is printed (Z-CLI-010): a
       long run's progress under nohup, tee, Slurm or zinc launch */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* zinc --verbose CMD ...: every command's errors name their source line */
    if (argc >= 2 && !strcmp(argv[1], "--verbose")) {
        zn_err_set_verbose(1);
        argv[1] = argv[0];
        argv++, argc--;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    ZnErr err;
    if (zn_fault_from_env(&err)) {   /* ZINC_FAULT (tests) must be well-formed */
        zn_err_print(stderr, "", &err);
        return 2;
    }
    const char *cmd = argv[1];
    const ZnCommand *c = command_named(cmd);
    if (c && help_asked(argc, argv)) {
        c->usage(stdout);
        return 0;
    }
    if (c) return c->run(argc - 2, argv + 2);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("zinc %s\n", ZN_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "zinc: error: unknown command '%s' (try 'zinc help')\n", cmd);
    return 2;
}
