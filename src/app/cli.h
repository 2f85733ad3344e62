/* cli.h: the zinc command line. Each subcommand is a function taking
 * (argc, argv) after the subcommand name and returning the exit status:
 * 0 success, 1 a check failed or training failed at run time, 2 bad usage,
 * bad config or bad model spec (one clear message on stderr). Each is
 * defined in its own file (app/cli_*.c, calibrate.c, launch.c,
 * spec_runner.c) beside its usage lines, and named with them by a
 * ZnCommand there, which main.c finds by the command's name. */
#ifndef ZN_CLI_H
#define ZN_CLI_H
#include <stdio.h>
#include "core/config.h"
#include "engine/model.h"
#include "app/run.h"

/* A subcommand: its name, its function and its usage lines (its --help,
 * and its usage errors). */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *f);
} ZnCommand;
extern const ZnCommand zn_train_command, zn_plan_command, zn_calibrate_command, zn_spec_command,
    zn_compare_command, zn_stepper_command, zn_launch_command, zn_estimate_command, zn_ckpt_command,
    zn_plot_command, zn_sample_command;

int zn_cmd_train(int argc, char **argv);
/* `zinc calibrate ... -o FILE.json`: this machine's file for the step-time
 * model, as N ranks of a backend see it (app/calibrate.c). */
int zn_cmd_calibrate(int argc, char **argv);
/* `zinc plan ...`: `zinc train --dry-run ...` (the flags of train; app/plan_report.h). */
int zn_cmd_plan(int argc, char **argv);
int zn_cmd_spec(int argc, char **argv);
int zn_cmd_compare(int argc, char **argv);
int zn_cmd_stepper(int argc, char **argv);
int zn_cmd_launch(int argc, char **argv);
/* `zinc estimate ...` (cli_estimate.c): exit status 0, or 2 with one
 * message "zinc: error: ..." on stderr. */
int zn_cmd_estimate(int argc, char **argv);
/* `zinc ckpt {to-universal, consolidate, inspect}` (cli_ckpt.c) */
int zn_cmd_ckpt(int argc, char **argv);
/* `zinc sample --checkpoint-dir DIR --prompt TEXT ...` (cli_sample.c):
 * text from a GPT-2 checkpoint; 0, 1 (checkpoint unreadable) or 2 (usage). */
int zn_cmd_sample(int argc, char **argv);
/* (cli_plot.c) */
/* `zinc plot A.csv B.csv ... -o OUT.svg [--metric M] [--title T]
 * [--names a,b,...] [--logy]`: 0 on success, 2 on any error (one message on
 * stderr). */
int zn_cmd_plot(int argc, char **argv);
/* frees what zn_train_resolve allocated in o (the recorded config text) */
void zn_run_opts_free(ZnRunOpts *o);

/* The flags shared by train, compare and the spec runner: parsed into a
 * ready-to-run ZnRunOpts (config resolved for the world size). */
typedef struct {
    const char *config_path;
    const char *model_spec;
    const char *data_spec;    /* --data text:FILE | tokens:FILE (a language model's data) */
    long seq_len;             /* --seq-len T; -1 unset (n_positions) */
    const char *log_path;
    long steps;               /* -1 unset */
    long print_every;         /* -1 unset */
    int memory_report, comm_report;
    const char *ckpt_dir, *ckpt_tag;
    long ckpt_interval;
    int resume, universal;
    const char *trace_path;
    const char *backend;      /* --backend: sim (default), tcp, mpi */
    const char *rendezvous;   /* --rendezvous: env, tcp://HOST:PORT, file:PATH */
    double comm_timeout;      /* --comm-timeout S: a collective's longest wait without progress (0: ZINC_COMM_TIMEOUT) */
    int repeat_rank, repeat_layer;   /* --test-repeat-layer R:L (test hook; rank -1: off) */
    int verbose;              /* --verbose: errors name the source line that wrote them */
    ZnConfigArgs args;
    int threads;             /* --threads: host kernel threads (0: ZINC_NUM_THREADS, else 1) */
    long device_memory;      /* --device-memory: each rank's simulated device capacity in bytes (0: unlimited) */
    int dry_run;             /* --dry-run: rank 0 on the meta device, memory and collectives only (app/dryrun.h) */
    int ranks_per_node;      /* --ranks-per-node: the simulator's node size (0: one node; processes ask the launcher) */
    const char *machine;     /* --machine NAME|FILE.json: a dry run's step time (app/machine.h) */
    long long params;        /* --params P: a GPT-3-shaped model of about P parameters (0: unset) */
    int json;                /* --json: a dry run's report as JSON */
    const char *svg_path;    /* --svg FILE: a dry run's picture */
} ZnTrainFlags;

void zn_train_flags_init(ZnTrainFlags *f);
/* Consumes the flag at argv[*i] (and its value) if it is a train flag;
 * returns 1 if consumed, 0 if not a train flag, -1 on a bad value (err set). */
int zn_train_flag(ZnTrainFlags *f, int argc, char **argv, int *i, ZnErr *err);
/* zinc stepper --peer deepspeed (cli_peer.c, Z-DSP-010) and its usage lines */
int zn_cmd_stepper_peer(int argc, char **argv);
void zn_stepper_peer_usage(FILE *f);
int zn_cmd_compare_peer(int argc, char **argv);
void zn_compare_peer_usage(FILE *f);
/* Resolves flags into run options (reads the config file). */
int zn_train_resolve(const ZnTrainFlags *f, const char *config_text, ZnRunOpts *o, ZnErr *err);

#endif
