/* bench.c: `make bench`. Every figure is a ratio measured side by side in one
 * run on this machine; nothing here is asserted (spec: benchmarks are never
 * timed tests).
 *   1. host Adam step, per instruction-set path and over the host threads:
 *      achieved bandwidth (28 B per fp32 parameter) against the streaming
 *      floor (a loop that moves the same bytes), lines
 *      `bench NAME zinc=... peer=... ratio=...`;
 *   2. simulator reduce-scatter and all-gather at 4 ranks against memcpy of
 *      the bytes each rank receives;
 *   3. the host GEMM (exact order, Z-HOST-003) per instruction set and over
 *      the cores against OpenBLAS's sgemm (any order, FMA) when
 *      libopenblas.so.0 is installed, in GFLOP/s;
 *   4. a training step of a 4096-wide MLP on N = 1, 2, 4, 8 simulated ranks
 *      against N single-rank steps (the simulator's overhead);
 *   5. the language-model host kernels (device/lm_host.c) at GPT-2 124M's
 *      shapes (batch 4, seq 256, C 768, 12 heads), as one training step
 *      calls them (12 layers), on the best path and the host threads (the
 *      core count) against the scalar path on one thread, in steps/s of
 *      that kernel alone, and the total ms a step spends in them;
 *   6. the NVMe swap: 512 MiB written and read back cold through zn_swap
 *      (io_uring and the pread/pwrite fallback, default aio settings)
 *      against an O_DIRECT pwrite/pread loop of 1 MiB blocks (dd-style). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <ftw.h>
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
#include "device/gemm_host.h"
#include "device/lm_host.h"
#include "engine/optim.h"
#include "core/cpu.h"
#include "device/device.h"
#include <pthread.h>
#include "app/run.h"
#include "app/cli.h"
#include "comm/world.h"
#include "io/swap.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* best of `reps` */
#define BEST(reps, stmt, out)                                   \
    do {                                                        \
        out = 1e30;                                             \
        for (int r_ = 0; r_ < (reps); r_++) {                   \
            double t0_ = now();                                 \
            stmt;                                               \
            double dt_ = now() - t0_;                           \
            if (dt_ < out) out = dt_;                           \
        }                                                       \
    } while (0)

/* One line of `make bench`: a figure next to its peer measured in the same
 * run; ratio > 1 means zinc is faster (or closer to the limit). */
static void row(const char *name, const char *unit, double zinc, const char *peer, double peer_v) {
    printf("bench %-28s zinc=%.2f%s peer=%s:%.2f%s ratio=%.2f\n", name, zinc, unit, peer, peer_v, unit, zinc / peer_v);
}

/* The physical limit of an Adam step: the same 28 bytes per parameter
 * (read p, g, m, v; write p, m, v) moved by the cheapest loop that touches
 * them all, vectorised by the compiler. */
static inline __attribute__((always_inline)) void
floor_run(long n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v) {
    for (long i = 0; i < n; i++) {
        float gi = g[i];
        m[i] = m[i] + gi;
        v[i] = v[i] + gi;
        p[i] = p[i] + gi;
    }
}
/* blocks of a constant 1024, as zn_adam_step's loop: gcc -O2 vectorises
   only a loop that needs no scalar epilogue (n is a multiple here) */
#define FLOOR_BODY \
    for (long b = 0; b + 1024 <= n; b += 1024) floor_run(1024, p + b, g + b, m + b, v + b);
static void floor_base(long n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v) {
    FLOOR_BODY
}
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx512f"))) static void floor_avx512(long n, float *restrict p, const float *restrict g,
                                                           float *restrict m, float *restrict v) {
    FLOOR_BODY
}
__attribute__((target("avx2"))) static void floor_avx2(long n, float *restrict p, const float *restrict g,
                                                      float *restrict m, float *restrict v) {
    FLOOR_BODY
}
#endif
/* on the widest instruction set zinc's Adam uses, so the two are even */
static void stream_floor(long n, float *p, const float *g, float *m, float *v) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    ZnIsa best = zn_isa_best();
    if (best == ZN_ISA_AVX512) { floor_avx512(n, p, g, m, v); return; }
    if (best == ZN_ISA_AVX2) { floor_avx2(n, p, g, m, v); return; }
#endif
    floor_base(n, p, g, m, v);
}

typedef struct { long n, lo, hi; float *p, *m, *v; const float *g; } FloorSlice;
static void *floor_slice(void *arg) {
    FloorSlice *f = arg;
    stream_floor(f->hi - f->lo, f->p + f->lo, f->g + f->lo, f->m + f->lo, f->v + f->lo);
    return NULL;
}
/* the floor over T threads, the same slices as the host Adam's */
static void stream_floor_mt(int T, long n, float *p, const float *g, float *m, float *v) {
    FloorSlice fs[64];
    pthread_t th[64];
    for (int k = 0; k < T; k++) fs[k] = (FloorSlice){n, n * k / T, n * (k + 1) / T, p, m, v, g};
    for (int k = 1; k < T; k++) pthread_create(&th[k], NULL, floor_slice, &fs[k]);
    floor_slice(&fs[0]);
    for (int k = 1; k < T; k++) pthread_join(th[k], NULL);
}

/* Z-HOST-001/002: the Adam step on each instruction-set path at one thread,
 * and the best path over the host threads, against the streaming floor
 * (goal: >= 0.8 of it). */
static void bench_adam(void) {
    const long n = 1L << 24;   /* 16M params: 448 MB of traffic per step */
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4);
    for (long i = 0; i < n; i++) { p[i] = 0.001f * (float)(i % 1000); g[i] = 1e-3f; }
    ZnAdamParams hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1};
    long t = 0;
    double tf;
    BEST(5, stream_floor(n, p, g, m, v), tf);
    const double floor1 = 28.0 * n / tf / 1e9;
    for (int isa = 0; isa < ZN_ISA_N; isa++) {
        if (!zn_isa_supported((ZnIsa)isa)) continue;
        double ta;
        BEST(5, zn_adam_step_isa((ZnIsa)isa, n, p, g, m, v, &hp, ++t, 1.0f), ta);
        char name[64];
        snprintf(name, sizeof name, "adam_step_%s_1thread", zn_isa_name((ZnIsa)isa));
        row(name, "GB/s", 28.0 * n / ta / 1e9, "stream_floor", floor1);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int T = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    if (T > 1) {
        ZnDevice d;
        zn_device_host_init(&d);
        zn_set_host_threads(T);
        double ta;
        BEST(5, zn_host_kernels.adam(&d, n, p, g, m, v, &hp, ++t, 1.0f, NULL, ZN_F32), ta);
        zn_set_host_threads(0);
        BEST(5, stream_floor_mt(T, n, p, g, m, v), tf);
        char name[64];
        snprintf(name, sizeof name, "adam_step_%s_%dthreads", zn_isa_name(zn_isa_best()), T);
        row(name, "GB/s", 28.0 * n / ta / 1e9, "stream_floor", 28.0 * n / tf / 1e9);
    }
    free(p); free(g); free(m); free(v);
}

/* OpenBLAS's cblas_sgemm, loaded at run time so `make bench` needs no BLAS
 * to build; NULL when the library is not installed. */
typedef void (*SgemmFn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc);
typedef void (*SetThreadsFn)(int n);
static SgemmFn openblas(SetThreadsFn *set_threads) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    *set_threads = (SetThreadsFn)dlsym(h, "openblas_set_num_threads");
    return (SgemmFn)dlsym(h, "cblas_sgemm");
}

/* Z-HOST-003: C = A.B^T as the forward pass of a layer computes it (M rows
 * of activations, N = K = the width), and the 1024-cube. The peer gets the
 * same operands, layout and thread count. */
static void bench_gemm(void) {
    static const int shapes[][3] = {{16, 4096, 4096}, {64, 4096, 4096}, {1024, 1024, 1024}};
    SetThreadsFn set_threads = NULL;
    SgemmFn sgemm = openblas(&set_threads);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int TT = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)N * K),
              *C = malloc(sizeof(float) * (size_t)M * N);
        for (long i = 0; i < (long)M * K; i++) A[i] = (float)(i % 13) * 0.1f - 0.6f;
        for (long i = 0; i < (long)N * K; i++) B[i] = (float)(i % 7) * 0.1f - 0.3f;
        const double flop = 2.0 * M * N * K;
        for (int T = 1; T <= TT; T += TT > 1 ? TT - 1 : 1) {
            ZnIsa isa = zn_isa_gemm();
            double tz, tp = 0;
            BEST(5, zn_host_gemm_isa(isa, T, M, N, K, A, K, 1, B, K, 1, NULL, C), tz);
            char name[64];
            snprintf(name, sizeof name, "gemm_nt_%dx%dx%d_%s_%dt", M, N, K, zn_isa_name(isa), T);
            if (!sgemm) {
                printf("bench %-28s zinc=%.1fGFLOP/s peer skipped: libopenblas.so.0 not installed "
                       "(apt-get install libopenblas0-pthread)\n", name, flop / tz / 1e9);
                continue;
            }
            if (set_threads) set_threads(T);
            /* row-major C = A . B^T: CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112 */
            BEST(5, sgemm(101, 111, 112, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N), tp);
            row(name, "GFLOP/s", flop / tz / 1e9, "openblas_sgemm", flop / tp / 1e9);
        }
        free(A); free(B); free(C);
    }
    /* the kernel every build ran before the dispatch, for the before/after */
    const int M = 64, N = 4096, K = 4096;
    float *A = calloc((size_t)M * K, 4), *B = calloc((size_t)N * K, 4), *C = malloc((size_t)M * N * 4);
    double ts, tb;
    BEST(3, zn_host_gemm_isa(ZN_ISA_SSE2, 1, M, N, K, A, K, 1, B, K, 1, NULL, C), ts);
    BEST(3, zn_host_gemm_isa(zn_isa_gemm(), 1, M, N, K, A, K, 1, B, K, 1, NULL, C), tb);
    row("gemm_nt_64x4096x4096_vs_sse2", "GFLOP/s", 2.0 * M * N * K / tb / 1e9, "sse2_kernel", 2.0 * M * N * K / ts / 1e9);
    free(A); free(B); free(C);
}

typedef struct { long n; float *in[8], *out[8]; int op; double t; } CollArg;

static int coll_rank(int rank, ZnComm *c, void *arg, ZnErr *err) {
    CollArg *a = arg;
    long counts[8];
    for (int r = 0; r < c->world.size; r++) counts[r] = a->n / c->world.size;
    double t0 = 0;
    /* one untimed call first: the output pages' first touch is not the
       collective's cost (a training run reuses its buffers) */
    for (int it = 0; it < 6; it++) {
        if (it == 1) t0 = now();
        int rc = a->op == 0
            ? c->reduce_scatter(c, a->in[rank], a->out[rank], counts, ZN_F32, ZN_SUM, "bench", err)
            : c->all_gather(c, a->in[rank], a->out[rank], counts, ZN_F32, "bench", err);
        if (rc) return rc;
    }
    if (rank == 0) a->t = (now() - t0) / 5;
    return 0;
}

/* The peer of the simulator's collectives: plain memcpy of the same bytes on
 * as many threads as the ranks share cores, all at once (what the machine's
 * memory system gives concurrent copies). */
typedef struct { const char *src; char *dst; size_t n; } CopyPart;
static void *copy_part(void *arg) {
    CopyPart *c = arg;
    memcpy(c->dst, c->src, c->n);
    return NULL;
}
static double memcpy_mt(int T, float *const *dst, float *const *src, size_t bytes) {
    CopyPart cp[8];
    pthread_t th[8];
    for (int k = 0; k < T; k++) cp[k] = (CopyPart){(const char *)src[k], (char *)dst[k], bytes};
    double t0 = now();
    for (int k = 1; k < T; k++) pthread_create(&th[k], NULL, copy_part, &cp[k]);
    copy_part(&cp[0]);
    for (int k = 1; k < T; k++) pthread_join(th[k], NULL);
    return now() - t0;
}

static void bench_collectives(void) {
    const int W = 4;
    const long n = 1L << 24;   /* 64 MB total per rank buffer */
    CollArg a = {n, {0}, {0}, 0, 0};
    for (int r = 0; r < W; r++) {
        a.in[r] = malloc(n * 4);
        a.out[r] = malloc(n * 4);
        for (long i = 0; i < n; i++) a.in[r][i] = (float)(i & 255);
    }
    ZnErr err;
    ZnSimWorld *w = zn_sim_world_new(W, &err);
    for (int op = 0; op < 2; op++) {
        a.op = op;
        zn_sim_run(w, coll_rank, &a, &err);
        /* bytes a rank takes in: reduce-scatter reads W chunks of n/W, all-gather
           writes n; compare with memcpy of the bytes the rank receives */
        long bytes = op == 0 ? n / W * 4 * W : n * 4;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int T = cores < 1 ? 1 : cores < W ? (int)cores : W;
        /* each copying thread moves what one rank receives, from another
           rank's buffer into its own (both warm) */
        float *dst[8], *src[8];
        for (int k = 0; k < T; k++) { dst[k] = a.out[k]; src[k] = a.in[(k + 1) % W]; }
        double tc;
        BEST(5, memcpy_mt(T, dst, src, (size_t)bytes), tc);
        /* the ranks' aggregate against the copying threads' aggregate */
        double agg = (double)bytes * W / a.t / 1e9, cap = (double)bytes * T / tc / 1e9;
        char name[64];
        snprintf(name, sizeof name, "sim_%s_W%d_%ldMB", op == 0 ? "reduce_scatter" : "all_gather", W, bytes >> 20);
        /* all ranks together against memcpy on as many cores as they share */
        row(name, "GB/s", agg, "memcpy_all_cores", cap);
    }
    zn_sim_world_free(w);
    for (int r = 0; r < W; r++) { free(a.in[r]); free(a.out[r]); }
}

/* One run of a 4096-wide MLP; returns seconds per step, and the share of
 * the ranks' CPU time spent inside the simulator's collectives */
static double train_step_time(int world, int stage, long micro, double *comm_share) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = "mlp:4096,4096,4096,16";
    f.steps = 2;
    f.args.world_size = world;
    f.args.stage = stage;
    f.args.micro_batch = micro;
    ZnRunOpts o;
    ZnErr err;
    if (zn_train_resolve(&f, NULL, &o, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    zn_run_opts_free(&o);
    o.measure_cpu = 1;
    ZnRunResult res;
    if (zn_run(&o, &res, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    double t = res.wall_s / (double)o.steps;
    *comm_share = res.cpu_comm_s / (res.cpu_total_s - res.cpu_comm_s);
    zn_run_result_free(&res);
    return t;
}

/* The simulator's cost is its collectives (a fixed number of bytes per
 * step); the compute grows with the micro-batch: both sizes are shown. */
static void bench_train(void) {
    for (long micro = 16; micro <= 64; micro *= 4) {
        double c1;
        double t1 = train_step_time(1, 2, micro, &c1);
        for (int n = 2; n <= 8; n *= 2) {
            double cn;
            double tn = train_step_time(n, 2, micro, &cn);
            char name[64];
            /* N simulated ranks against N single-rank steps (the simulator's overhead): steps per second */
            snprintf(name, sizeof name, "sim_train_step_micro%ld_W%d", micro, n);
            row(name, "step/s", 1.0 / tn, "n_single_rank_steps", 1.0 / (n * t1));
            printf("      (CPU in collectives / CPU of the ranks' own work: %.1f%%)\n", 100.0 * cn);
        }
    }
}

/* One offload setting's step time: GPT-2-like MLP widths, stage 3, bf16,
 * 2 simulated ranks; returns seconds per step (the first step, which
 * records the stage-3 trace, excluded) and the NVMe bytes moved a step
 * (averaged over the run's 4 steps). */
static double offload_step_time(const char *zero, double *nvme_bytes) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = "mlp:1024,4096,4096,1024";
    f.args.world_size = 2;
    f.args.micro_batch = 4;
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3, "
             "\"sub_group_size\": 5000000%s}}", zero);
    f.steps = 4;
    ZnRunOpts o;
    ZnErr err;
    if (zn_train_resolve(&f, cfg, &o, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    zn_run_opts_free(&o);
    o.out = NULL;
    ZnRunResult res;
    if (zn_run(&o, &res, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    /* the best of the 3 steady steps (step 1 records the stage-3 trace) */
    double t = res.step_ms[1];
    for (int k = 2; k < 4; k++) if (res.step_ms[k] < t) t = res.step_ms[k];
    *nvme_bytes = (double)(res.moved[2] + res.moved[3]) / 4.0;
    zn_run_result_free(&res);
    return t / 1e3;
}

/* ZeRO-Offload's cost on the simulator: the offloaded step against the
 * same step without offload, in this run (the copies between tiers, the
 * NVMe swap through io_uring). */
static void bench_offload(void) {
    const char *dir = "build/bench-offload";
    if ((mkdir("build", 0755) && errno != EEXIST) || (mkdir(dir, 0755) && errno != EEXIST)) { perror(dir); return; }
    double nb = 0;
    double t0 = offload_step_time("", &nb);
    static const struct { const char *name, *zero; } K[] = {
        {"offload_cpu_optimizer", ", \"offload_optimizer\": {\"device\": \"cpu\"}"},
        {"offload_cpu_all", ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}"},
        {"offload_nvme_optimizer", ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"build/bench-offload\","
                                   " \"pipeline_read\": true, \"buffer_count\": 6}"},
        {"offload_nvme_all", ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"build/bench-offload\"},"
                             " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"build/bench-offload\", \"max_in_cpu\": 0}"},
    };
    for (size_t i = 0; i < sizeof K / sizeof *K; i++) {
        double t = offload_step_time(K[i].zero, &nb);
        char name[64];
        snprintf(name, sizeof name, "sim_step_%s", K[i].name);
        row(name, "step/s", 1.0 / t, "no_offload", 1.0 / t0);
        if (nb > 0) printf("      (NVMe: %.1f MB read+written a step, %.2f GB/s over the step)\n", nb / 1e6, nb / t / 1e9);
    }
    rmdir(dir);
}

/* Checkpoint save and load throughput against a plain sequential write +
 * fsync and read of the same bytes on the same disk (what dd conv=fsync and
 * dd of=/dev/null measure), all in this run. */
static double file_bytes(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "du -sb %s", dir);
    FILE *p = popen(cmd, "r");
    double b = 0;
    if (p) { if (fscanf(p, "%lf", &b) != 1) b = 0; pclose(p); }
    return b;
}

static double ckpt_run(const char *dir, int save, int resume, long steps) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = "mlp:2048,2048,2048,16";   /* 8.4M params: 101 MB of optimizer shards + 34 MB weights */
    f.steps = steps;
    f.args.world_size = 2;
    f.args.stage = 2;
    f.args.micro_batch = 4;
    f.ckpt_dir = dir;
    f.ckpt_interval = save ? 1 : 0;
    f.resume = resume;
    ZnRunOpts o;
    ZnErr err;
    if (zn_train_resolve(&f, NULL, &o, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    ZnRunResult res;
    double t0 = now();
    if (zn_run(&o, &res, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    double t = now() - t0;
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
    return t;
}

/* Cold reads: a file's pages leave the page cache (written back first), so
 * the next read comes from the disk, for zinc's load and its peer alike. */
static void drop_file(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}
static int drop_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb; (void)ftw;
    if (type == FTW_F) drop_file(path);
    return 0;
}
static void drop_dir(const char *dir) { nftw(dir, drop_entry, 16, FTW_PHYS); }

static void bench_ckpt(void) {
    const char *dir = "build/bench-ckpt";
    if (system("rm -rf build/bench-ckpt")) return;
    double t_plain = 1e30, t_save = 1e30, t_load = 1e30, t_init = 1e30;
    for (int i = 0; i < 3; i++) {
        double a = ckpt_run(dir, 0, 0, 1);
        double z = ckpt_run(dir, 0, 0, 0);   /* set-up alone */
        if (system("rm -rf build/bench-ckpt")) return;
        double b = ckpt_run(dir, 1, 0, 1);
        drop_dir(dir);
        double c = ckpt_run(dir, 0, 1, 1);   /* resume at step 1 with --steps 1: set-up and a cold load */
        if (a < t_plain) t_plain = a;
        if (z < t_init) t_init = z;
        if (b < t_save) t_save = b;
        if (c < t_load) t_load = c;
    }
    double bytes = file_bytes(dir);
    /* the same bytes written sequentially with fsync, then read back cold */
    char *buf = malloc(1 << 20);
    memset(buf, 7, 1 << 20);
    double tw = 1e30, tr = 1e30;
    for (int i = 0; i < 3; i++) {
        double t0 = now();
        FILE *f = fopen("build/bench-dd", "wb");
        for (double w = 0; f && w < bytes; w += 1 << 20) fwrite(buf, 1, 1 << 20, f);
        if (f) { fflush(f); fsync(fileno(f)); fclose(f); }
        double t1 = now();
        drop_file("build/bench-dd");
        double t2 = now();
        f = fopen("build/bench-dd", "rb");
        while (f && fread(buf, 1, 1 << 20, f) == 1 << 20) {}
        if (f) fclose(f);
        double t3 = now();
        if (t1 - t0 < tw) tw = t1 - t0;
        if (t3 - t2 < tr) tr = t3 - t2;
    }
    remove("build/bench-dd");
    free(buf);
    double save_s = t_save - t_plain, load_s = t_load - t_init;
    /* against dd conv=fsync for the save and a cold read of the same bytes for the load */
    row("ckpt_save_MBps", "MB/s", bytes / 1e6 / save_s, "write_fsync", bytes / 1e6 / tw);
    row("ckpt_load_verify_MBps", "MB/s", bytes / 1e6 / load_s, "cold_read", bytes / 1e6 / tr);
    if (system("rm -rf build/bench-ckpt")) return;
}

/* 5. the language-model kernels: seconds one step spends in each (calls
 * per step times the best of 3 calls), best path and all cores against the
 * scalar path on one thread */
static float *lm_buf(long n, float scale) {
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    uint32_t s = 1u;
    for (long i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = scale * ((float)(s >> 8) / 8388608.0f - 1.0f);
    }
    return p;
}

static void bench_lm(void) {
    const int B = 4, T = 256, C = 768, NH = 12, V = 50257, P = 1024, L = 12;
    const long BT = (long)B * T;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (cores > ZN_MAX_HOST_THREADS) cores = ZN_MAX_HOST_THREADS;
    int *tok = malloc((size_t)BT * sizeof(int));
    if (!tok) { fprintf(stderr, "bench: out of memory\n"); exit(1); }
    for (long r = 0; r < BT; r++) tok[r] = (int)((r * 7919) % 256);
    float *qkv = lm_buf(BT * 3 * C, 1.0f), *x = lm_buf(BT * 4 * C, 2.0f), *g = lm_buf(BT * 4 * C, 1.0f);
    float *att = lm_buf((long)B * NH * T * T, 0.0f), *scr = lm_buf((long)B * NH * T * T, 0.0f);
    float *out = lm_buf(BT * 9 * C, 0.0f), *dqkv = lm_buf(BT * 3 * C, 0.0f), *w = lm_buf(C, 1.0f), *b = lm_buf(C, 1.0f),
          *b9 = lm_buf(9 * C, 1.0f);   /* the biases of a layer's four Conv1Ds, side by side */
    float *mean = lm_buf(BT, 0.0f), *rstd = lm_buf(BT, 0.0f), *dw = lm_buf(C, 0.0f), *db = lm_buf(C, 0.0f);
    float *wte = lm_buf((long)V * C, 1.0f), *wpe = lm_buf((long)P * C, 1.0f), *dwte = lm_buf((long)V * C, 0.0f),
          *dwpe = lm_buf((long)P * C, 0.0f);
    ZnDevice d;
    zn_device_host_init(&d);
    const ZnLmKernels *lm = &zn_host_lm_kernels;
    lm->attn_fwd(&d, B, T, C, NH, qkv, att, out);   /* real probabilities for backward */
    lm->layernorm_fwd(&d, (int)BT, C, x, w, b, out, mean, rstd);
    double total[2] = {0, 0};
    /* the calls of one step: per layer ln_1, ln_2, attention, GELU and the
       biases of c_attn, attn.c_proj, c_fc, mlp.c_proj; ln_f; embeddings */
#define LM_ROW(name, calls, stmt)                                                                 \
    do {                                                                                          \
        double t_[2];                                                                             \
        for (int k_ = 0; k_ < 2; k_++) {                                                          \
            zn_lm_host_set_isa(k_ ? ZN_ISA_SCALAR : ZN_ISA_N);                                    \
            zn_set_host_threads(k_ ? 1 : (int)cores);                                             \
            BEST(3, stmt, t_[k_]);                                                                \
            t_[k_] *= (calls);                                                                    \
            total[k_] += t_[k_];                                                                  \
        }                                                                                         \
        row(name, "step/s", 1.0 / t_[0], "scalar_1thread", 1.0 / t_[1]);                         \
    } while (0)
    LM_ROW("lm_attn_fwd_gpt2", L, lm->attn_fwd(&d, B, T, C, NH, qkv, scr, out));
    LM_ROW("lm_attn_bwd_gpt2", L, lm->attn_bwd(&d, B, T, C, NH, g, qkv, att, dqkv, scr));
    LM_ROW("lm_layernorm_fwd_gpt2", 2 * L + 1, lm->layernorm_fwd(&d, (int)BT, C, x, w, b, out, mean, rstd));
    LM_ROW("lm_layernorm_bwd_gpt2", 2 * L + 1, lm->layernorm_bwd(&d, (int)BT, C, g, x, w, mean, rstd, out, dw, db));
    LM_ROW("lm_gelu_fwd_gpt2", L, lm->gelu_fwd(&d, BT * 4 * C, x, out));
    LM_ROW("lm_gelu_bwd_gpt2", L, lm->gelu_bwd(&d, BT * 4 * C, x, g, out));
    LM_ROW("lm_add_bias_gpt2", L, lm->add_bias(&d, (int)BT, 9 * C, b9, out));
    LM_ROW("lm_embed_fwd_gpt2", 1, lm->embed_fwd(&d, B, T, C, tok, wte, wpe, out));
    LM_ROW("lm_embed_bwd_gpt2", 1, lm->embed_bwd(&d, B, T, C, V, P, tok, g, dwte, dwpe));
#undef LM_ROW
    zn_lm_host_set_isa(ZN_ISA_N);
    zn_set_host_threads(0);
    printf("lm kernels of one GPT-2 124M step: %.1f ms (best path, %ld threads), %.1f ms (scalar, 1 thread)\n",
           total[0] * 1e3, cores, total[1] * 1e3);
    free(tok); free(qkv); free(x); free(g); free(att); free(scr); free(out); free(dqkv); free(w); free(b); free(b9);
    free(mean); free(rstd); free(dw); free(db); free(wte); free(wpe); free(dwte); free(dwpe);
}

/* 6. the NVMe swap (io/swap.h, Z-NVME-*): 512 MiB written then read back
 * cold through zn_swap with the default aio settings (1 MiB blocks, 8 in
 * flight), on the io_uring path and on the pread/pwrite fallback, against
 * the dd-style peer on the same disk: one O_DIRECT pwrite/pread loop of
 * 1 MiB blocks, one request at a time. O_DIRECT bypasses the page cache
 * both ways (the fadvise only matters where the file system refused it).
 * Best of 3. */
static double nvme_peer(const char *path, char *buf, size_t bytes, int write) {
    int fd = open(path, write ? O_WRONLY | O_CREAT | O_DIRECT : O_RDONLY | O_DIRECT, 0600);
    if (fd < 0) return 1e30;
    /* the blocks reserved before the clock starts, as zn_swap_file does:
       both sides time rewrites of an allocated file, a swap's steady state */
    if (write && fallocate(fd, 0, 0, (off_t)bytes)) { close(fd); return 1e30; }
    double t0 = now();
    for (size_t off = 0; off < bytes; off += 1 << 20) {
        ssize_t k = write ? pwrite(fd, buf + off, 1 << 20, (off_t)off) : pread(fd, buf + off, 1 << 20, (off_t)off);
        if (k != 1 << 20) { close(fd); return 1e30; }
    }
    double t = now() - t0;
    close(fd);
    return t;
}

static void bench_nvme(void) {
    const char *base = "build/bench-nvme";
    const size_t bytes = (size_t)512 << 20;
    ZnErr err = {0};
    char *buf = zn_swap_buf_alloc(bytes, &err);
    if (!buf) { fprintf(stderr, "bench nvme: %s\n", err.msg); return; }
    for (size_t i = 0; i < bytes; i++) buf[i] = (char)(i * 131 + 7);
    if (system("mkdir -p build/bench-nvme")) { zn_swap_buf_free(buf); return; }
    double pw = 1e30, pr = 1e30;
    for (int r = 0; r < 3; r++) {
        double w = nvme_peer("build/bench-nvme/dd", buf, bytes, 1);
        drop_file("build/bench-nvme/dd");
        double rd = nvme_peer("build/bench-nvme/dd", buf, bytes, 0);
        if (w < pw) pw = w;
        if (rd < pr) pr = rd;
    }
    remove("build/bench-nvme/dd");
    const ZnAioMode modes[2] = {ZN_AIO_URING, ZN_AIO_THREADS};
    for (int m = 0; m < 2; m++) {
        ZnSwap *s = NULL;
        if (zn_swap_open(&s, base, 0, bytes, NULL, modes[m], stderr, &err)) {
            fprintf(stderr, "bench nvme: %s\n", err.msg);
            continue;
        }
        int id;
        char path[512];
        snprintf(path, sizeof path, "%s/bench", zn_swap_dir(s));
        double tw = 1e30, tr = 1e30;
        /* created once: later rounds rewrite allocated blocks, as the peer's do */
        int rc0 = zn_swap_file(s, "bench", bytes, &id, &err);
        for (int r = 0; r < 3 && !rc0; r++) {
            double t0 = now();
            int rc = zn_swap_write(s, id, 0, buf, bytes, &err) || zn_swap_wait(s, &err);
            double t1 = now();
            drop_file(path);
            double t2 = now();
            rc = rc || zn_swap_read(s, id, 0, buf, bytes, &err) || zn_swap_wait(s, &err);
            double t3 = now();
            if (rc) { fprintf(stderr, "bench nvme: %s\n", err.msg); break; }
            if (t1 - t0 < tw) tw = t1 - t0;
            if (t3 - t2 < tr) tr = t3 - t2;
        }
        char name[64];
        snprintf(name, sizeof name, "nvme_write_%s_MBps", zn_swap_backend(s));
        row(name, "MB/s", (double)bytes / 1e6 / tw, "dd_odirect_1M", (double)bytes / 1e6 / pw);
        snprintf(name, sizeof name, "nvme_read_%s_MBps", zn_swap_backend(s));
        row(name, "MB/s", (double)bytes / 1e6 / tr, "dd_odirect_1M", (double)bytes / 1e6 / pr);
        zn_swap_close(s, 1);
    }
    zn_swap_buf_free(buf);
    if (system("rm -rf build/bench-nvme")) return;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || !strcmp(only, "adam")) bench_adam();
    if (!*only || !strcmp(only, "gemm")) bench_gemm();
    if (!*only || !strcmp(only, "comm")) bench_collectives();
    if (!*only || !strcmp(only, "train")) bench_train();
    if (!*only || !strcmp(only, "ckpt")) bench_ckpt();
    if (!*only || !strcmp(only, "lm")) bench_lm();
    if (!*only || !strcmp(only, "offload")) bench_offload();
    if (!*only || !strcmp(only, "nvme")) bench_nvme();
    return 0;
}
