/* bench_peer_zinc.c: zinc's side of `make bench-peers` (tests/bench_peers.py
 * runs it and measures PyTorch and DeepSpeed in the same run). Prints one
 * machine-readable line per call; nothing is asserted.
 *
 *   bench_peer_zinc adam N T        host Adam step (L2 mode, as torch.optim.Adam
 *                                   and DeepSpeedCPUAdam(adamw_mode=False)) on
 *                                   N fp32 params over T threads: best of 5
 *                                   after 2 warm-ups
 *     -> adam n=N threads=T isa=ISA seconds=S
 *   bench_peer_zinc mlp W MICRO T   one training step of mlp:W,W,W,16 on one
 *                                   rank (stage 0), micro-batch MICRO, T threads
 *     -> mlp width=W micro=MICRO threads=T seconds_per_step=S
 *   bench_peer_zinc gpt2 SEQ MICRO T one training step of GPT-2 124M (fp32, one
 *                                   rank, stage 0) on text:tests/data/gpl-3.txt,
 *                                   seq-len SEQ, micro-batch MICRO, T threads:
 *                                   the faster of steps 2 and 3 of one run
 *     -> gpt2 seq=SEQ micro=MICRO threads=T seconds_per_step=S */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/optim.h"
#include "core/cpu.h"
#include "device/device.h"
#include "app/run.h"
#include "app/cli.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench_adam(long n, int T) {
    float *p = malloc((size_t)n * 4), *g = malloc((size_t)n * 4), *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
    if (!p || !g || !m || !v) {
        fprintf(stderr, "bench_peer_zinc: cannot allocate 4 x %ld floats\n", n);
        free(p); free(g); free(m); free(v);
        return 1;
    }
    for (long i = 0; i < n; i++) { p[i] = 0.001f * (float)(i % 1000); g[i] = 1e-3f; }
    /* bench.c's hyper-parameters, but L2 weight decay (adamw = 0): the mode
       torch.optim.Adam and DeepSpeedCPUAdam(adamw_mode=False) compute */
    ZnAdamParams hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 1};
    ZnDevice d;
    zn_device_host_init(&d);
    zn_set_host_threads(T);   /* 1: the best instruction set on one thread */
    long t = 0;
    double best = 1e30;
    for (int r = 0; r < 7; r++) {   /* 2 warm-ups (page faults, caches), then 5 timed */
        double t0 = now();
        zn_host_kernels.adam(&d, n, p, g, m, v, &hp, ++t, 1.0f, NULL, ZN_F32);
        double dt = now() - t0;
        if (r >= 2 && dt < best) best = dt;
    }
    zn_set_host_threads(0);
    printf("adam n=%ld threads=%d isa=%s seconds=%.6f\n", n, T, zn_isa_name(zn_isa_best()), best);
    free(p); free(g); free(m); free(v);
    return 0;
}

/* The flags of `zinc train --model spec --micro-batch micro --threads T
 * --steps steps` on one rank at stage 0. */
static ZnTrainFlags one_rank(const char *spec, long micro, int T, long steps) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = spec;
    f.steps = steps;
    f.threads = T;
    f.args.world_size = 1;
    f.args.stage = 0;
    f.args.micro_batch = micro;
    return f;
}

/* f's run options (built-in config) in *o; 0, or -1 with the message printed */
static int resolve(const ZnTrainFlags *f, ZnRunOpts *o) {
    ZnErr err;
    if (!zn_train_resolve(f, NULL, o, &err)) return 0;
    fprintf(stderr, "bench_peer_zinc: %s\n", err.msg);
    return -1;
}

/* Wall time of a whole run of `steps` steps, set-up included. */
static double mlp_run(const char *spec, long micro, int T, long steps) {
    ZnTrainFlags f = one_rank(spec, micro, T, steps);
    ZnRunOpts o;
    ZnErr err;
    if (resolve(&f, &o)) return -1;
    zn_run_opts_free(&o);
    o.out = NULL;   /* no step lines */
    ZnRunResult res;
    double t0 = now();
    if (zn_run(&o, &res, &err)) { fprintf(stderr, "bench_peer_zinc: %s\n", err.msg); return -1; }
    double t = now() - t0;
    zn_run_result_free(&res);
    return t;
}

/* The time of one step without the set-up (engine init, parameter init,
 * the final gather): a run of 6 steps less a run of 2, over 4 steps. The
 * first 2 steps (page faults of the moments and activations) are in both
 * runs and cancel too. Each run is the best of 2. */
static int bench_mlp(int width, long micro, int T) {
    char spec[96];
    snprintf(spec, sizeof spec, "mlp:%d,%d,%d,16", width, width, width);
    double t2 = 1e30, t6 = 1e30;
    for (int r = 0; r < 2; r++) {
        double a = mlp_run(spec, micro, T, 2), b = mlp_run(spec, micro, T, 6);
        if (a < 0 || b < 0) return 1;
        if (a < t2) t2 = a;
        if (b < t6) t6 = b;
    }
    printf("mlp width=%d micro=%ld threads=%d seconds_per_step=%.6f\n", width, micro, T, (t6 - t2) / 4.0);
    return 0;
}

/* GPT-2 124M: a run of 3 steps, the step lines into a temporary file; the
 * step time is the faster of steps 2 and 3 (step 1 pays the page faults of
 * the activations and the optimizer state). Set-up is excluded by the
 * engine's own per-step clock. */
static int bench_gpt2(long seq, long micro, int T) {
    ZnTrainFlags f = one_rank("gpt2", micro, T, 3);
    f.data_spec = "text:tests/data/gpl-3.txt";
    f.seq_len = seq;
    f.print_every = 1;
    ZnRunOpts o;
    ZnErr err;
    if (resolve(&f, &o)) return 1;
    zn_run_opts_free(&o);
    FILE *out = tmpfile();
    if (!out) { fprintf(stderr, "bench_peer_zinc: no temporary file\n"); return 1; }
    o.out = out;
    ZnRunResult res;
    if (zn_run(&o, &res, &err)) { fprintf(stderr, "bench_peer_zinc: %s\n", err.msg); fclose(out); return 1; }
    zn_run_result_free(&res);
    rewind(out);
    char line[512];
    double best = 1e30;
    long step;
    while (fgets(line, sizeof line, out)) {
        const char *tm = strstr(line, "time_ms=");
        if (sscanf(line, "step=%ld", &step) == 1 && step >= 2 && tm) {
            double ms = atof(tm + 8);
            if (ms < best * 1e3) best = ms / 1e3;
        }
    }
    fclose(out);
    if (best >= 1e30) { fprintf(stderr, "bench_peer_zinc: no step times in the run's output\n"); return 1; }
    printf("gpt2 seq=%ld micro=%ld threads=%d seconds_per_step=%.6f\n", seq, micro, T, best);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && (atoi(argv[argc - 1]) < 1 || atoi(argv[argc - 1]) > ZN_MAX_HOST_THREADS)) {
        fprintf(stderr, "bench_peer_zinc: THREADS must be 1..%d\n", ZN_MAX_HOST_THREADS);
        return 2;
    }
    if (argc == 4 && !strcmp(argv[1], "adam")) return bench_adam(atol(argv[2]), atoi(argv[3]));
    if (argc == 5 && !strcmp(argv[1], "mlp")) return bench_mlp(atoi(argv[2]), atol(argv[3]), atoi(argv[4]));
    if (argc == 5 && !strcmp(argv[1], "gpt2")) return bench_gpt2(atol(argv[2]), atol(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: bench_peer_zinc adam N THREADS | bench_peer_zinc mlp WIDTH MICRO THREADS |"
                    " bench_peer_zinc gpt2 SEQ MICRO THREADS\n");
    return 2;
}
