/* calibrate.c: `zinc calibrate` (spec Z-CAL-*): the machine file of this
 * machine as zinc's own ranks see it, for the step-time model to predict
 * zinc's runs here. Every rank measures at the same time as the others (the
 * simulator's N threads, or N processes), so the figures are each rank's
 * share of the cores and of the memory bandwidth while all ranks run:
 *
 *   device_flops    a GEMM of 256 x 256 x 256 on the host device's kernel;
 *   device_mem_bw   the host device's add over 4M floats (12 bytes an element:
 *                   zinc's buffers hold fp32, so calibrate fp32 runs);
 *   host_adam_rate  Adam over 1M elements on the host;
 *   h2d_bw          a copy of 16 MiB (the host device's upload is a copy);
 *   intra           an all-gather and a reduce-scatter of 1 element and of 1M
 *                   fp32 elements a rank on the run's communicator: alpha =
 *                   the small ones' time over the rings' N hops each, beta =
 *                   the large ones' extra bytes sent over their extra time
 *                   (the simulator sums on the CPU, so its reduce-scatter is
 *                   slower than its gather; ZeRO's traffic is both); inter =
 *                   intra on one node; where the launcher's ranks span
 *                   nodes, intra from the same timings in each node's group
 *                   and inter in the groups of one local rank across the
 *                   nodes, every group at once (the node's link shared as
 *                   a training step shares it);
 *   nvme_bw         rank 0 writes 64 MiB to a file in the output's folder,
 *                   fsyncs, reads it back: bytes over time;
 *   device_memory   the host's physical memory over the ranks.
 *
 * Each figure is the median of five timings, and of the ranks the slowest
 * (a collective finishes with its slowest rank); --quick times each once,
 * one repetition (a first look; valgrind's tests). */
#include "app/cli.h"
#include "app/machine.h"
#include "app/proc.h"
#include "comm/coll.h"
#include "comm/world.h"
#include "core/alloc.h"
#include "core/cpu.h"
#include "core/fileio.h"
#include "device/device.h"
#include "engine/optim.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REPS 5
#define GEMM_N 256
#define ADD_N (4L << 20)
#define ADAM_N (1L << 20)
#define COPY_BYTES (16L << 20)
#define AG_N (1L << 20)
#define NVME_BYTES (64L << 20)

/* the collectives come three times: on the run's communicator, then, when
 * the ranks span nodes, in the node's group (intra) and in the group of the
 * ranks of one local index across the nodes (inter), all groups at once */
enum { M_GEMM, M_ADD, M_ADAM, M_COPY, M_AG1, M_AGN, M_RS1, M_RSN, M_NVME,
       M_IAG1, M_IAGN, M_IRS1, M_IRSN, M_XAG1, M_XAGN, M_XRS1, M_XRSN, M_N };
#define M_GROUPS M_IAG1   /* the first of the node-split timings */

typedef struct {
    const char *dir;        /* where rank 0 writes its NVMe probe */
    int per_node;           /* ranks per node (the launcher's); the world size for one node */
    int quick;              /* --quick: one timing of one repetition each */
    double t[M_N];          /* seconds: the slowest rank's median */
} CalCtx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* the NVMe probe: write, fsync, read back */
static int nvme_probe(const char *dir, double *secs, ZnErr *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/.zinc-calibrate-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) return zn_err(err, ZN_E_IO, "calibrate: cannot create a file in '%s': %s", dir, strerror(errno));
    unlink(path);   /* gone whatever happens next */
    char *buf = zn_malloc(ZN_HOST_APP, 1L << 20);
    int rc = 0;
    if (!buf) {
        close(fd);
        return zn_nomem(err);
    }
    memset(buf, 0x5a, 1L << 20);
    double t0 = now_s();
    for (long off = 0; off < NVME_BYTES && !rc; off += 1L << 20)
        if (pwrite(fd, buf, 1L << 20, off) != 1L << 20) rc = zn_err(err, ZN_E_IO, "calibrate: writing '%s' failed", dir);
    if (!rc && fsync(fd)) rc = zn_err(err, ZN_E_IO, "calibrate: fsync in '%s' failed", dir);
    for (long off = 0; off < NVME_BYTES && !rc; off += 1L << 20)
        if (pread(fd, buf, 1L << 20, off) != 1L << 20) rc = zn_err(err, ZN_E_IO, "calibrate: reading back in '%s' failed", dir);
    *secs = now_s() - t0;
    free(buf);
    close(fd);
    return rc;
}

/* One rank: every measurement REPS times, all ranks at once (a barrier
 * before each), the median kept; then the slowest rank's. */
static int cal_rank(int rank, ZnComm *c, void *arg, ZnErr *err) {
    CalCtx *ctx = arg;
    const int W = c->world.size;
    ZnDevice d;
    zn_device_host_init(&d);
    float *a = zn_dev_alloc(&d, sizeof(float) * GEMM_N * GEMM_N, ZN_MEM_WORKSPACE, err);
    float *b = a ? zn_dev_alloc(&d, sizeof(float) * GEMM_N * GEMM_N, ZN_MEM_WORKSPACE, err) : NULL;
    float *cc = b ? zn_dev_alloc(&d, sizeof(float) * GEMM_N * GEMM_N, ZN_MEM_WORKSPACE, err) : NULL;
    float *x = cc ? zn_dev_alloc(&d, sizeof(float) * ADD_N, ZN_MEM_WORKSPACE, err) : NULL;
    float *y = x ? zn_dev_alloc(&d, sizeof(float) * ADD_N, ZN_MEM_WORKSPACE, err) : NULL;
    float *ag = y ? zn_dev_alloc(&d, sizeof(float) * AG_N * W, ZN_MEM_WORKSPACE, err) : NULL;
    long *counts = ag ? zn_calloc(ZN_HOST_APP, (size_t)W, sizeof(long)) : NULL;
    int rc = counts ? 0 : err->code ? err->code : zn_nomem(err);
    double v[M_N][REPS];
    memset(v, 0, sizeof v);
    ZnAdamParams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .bias_correction = 1};
    /* each timing repeats its operation long enough (tens of ms) that all
       ranks run it at once, not one after another as the barrier wakes them */
    static const int iters_full[M_N] = {64, 8, 8, 8, 64, 4, 64, 4, 1, 64, 4, 64, 4, 64, 4, 64, 4};
    const int *iters = ctx->quick ? NULL : iters_full, reps = ctx->quick ? 1 : REPS;
    const int P = ctx->per_node > 0 && ctx->per_node < W ? ctx->per_node : W;
    const ZnGroup intra = zn_group(P, 1), inter = zn_group(W / P, P);
    for (int k = 0; k < reps && !rc; k++) {
        for (int m = 0; m < M_N && !rc; m++) {
            /* the disk alone: rank 0, no barrier (the others are not writing) */
            if (m == M_NVME && (rank != 0 || !ctx->dir)) continue;
            if (m >= M_GROUPS && P == W) continue;   /* one node: nothing to split */
            const int small = m == M_AG1 || m == M_RS1 || m == M_IAG1 || m == M_IRS1 || m == M_XAG1 || m == M_XRS1;
            if (m >= M_AG1 && m != M_NVME)
                for (int r = 0; r < W; r++) counts[r] = small ? 1 : AG_N;
            const int n_it = iters ? iters[m] : 1;
            const ZnGroup g = m >= M_XAG1 ? inter : intra;
            const int member = m >= M_XAG1 ? rank / P : rank % P;
            if (m != M_NVME && (rc = c->barrier(c, "calibrate", err))) break;
            double t0 = now_s(), nv = 0;
            for (int i = 0; i < n_it && !rc; i++) switch (m) {
                case M_GEMM: d.k->gemm_nt(&d, GEMM_N, GEMM_N, GEMM_N, a, b, NULL, cc); break;
                case M_ADD: d.k->add(&d, ZN_F32, x, y, ADD_N); break;
                /* Adam on the first quarter of x, y, and two more quarters of x for its moments */
                case M_ADAM: zn_adam_step(ADAM_N, x, y, x + ADAM_N, x + 2 * ADAM_N, &hp, k + 1, 1.0f); break;
                case M_COPY: memcpy(y, x, COPY_BYTES); break;
                case M_NVME: rc = nvme_probe(ctx->dir, &nv, err); break;
                case M_RS1: case M_RSN: rc = c->reduce_scatter(c, ag, y, counts, ZN_F32, ZN_SUM, "calibrate", err); break;
                case M_AG1: case M_AGN:
                    rc = c->all_gather(c, ag + (long)rank * counts[rank], ag, counts, ZN_F32, "calibrate", err);
                    break;
                case M_IRS1: case M_IRSN: case M_XRS1: case M_XRSN:
                    rc = zn_group_reduce_scatter(c, g, ag, y, counts, ZN_F32, ZN_SUM, "calibrate", err);
                    break;
                default:
                    rc = zn_group_all_gather(c, g, ag + (long)member * counts[0], ag, counts, ZN_F32, "calibrate", err);
                }
            v[m][k] = m == M_NVME ? nv : (now_s() - t0) / n_it;
        }
    }
    double med[M_N];
    for (int m = 0; m < M_N && !rc; m++) med[m] = median(v[m], reps);
    if (!rc) rc = c->all_reduce(c, med, M_N, ZN_F64, ZN_MAX, "calibrate", err);
    if (!rc && rank == 0) memcpy(ctx->t, med, sizeof med);
    free(counts);
    zn_dev_free(&d, ag);
    zn_dev_free(&d, y);
    zn_dev_free(&d, x);
    zn_dev_free(&d, cc);
    zn_dev_free(&d, b);
    zn_dev_free(&d, a);
    return rc;
}

/* A link's alpha and beta from a gather and a reduce-scatter of 1 and of
 * AG_N elements a rank in groups of n ranks (t: the four timings) */
static ZnLink link_of(const double *t, int n) {
    ZnLink l;
    double extra = 2.0 * (n - 1) * 4.0 * (AG_N - 1);
    double dt = t[1] + t[3] - t[0] - t[2];
    l.alpha = (t[0] + t[2]) / (2.0 * n);
    l.beta = extra / (dt > 1e-9 ? dt : 1e-9);
    return l;
}

/* the machine of the timings: W ranks, per_node to a node */
static void machine_of(const CalCtx *ctx, int W, const char *name, ZnMachine *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    const int P = ctx->per_node > 0 && ctx->per_node < W ? ctx->per_node : W;
    m->gpus_per_node = P;
    m->overlap = 0;   /* zinc's collectives block the rank that calls them */
    m->device_flops = 2.0 * GEMM_N * GEMM_N * GEMM_N / ctx->t[M_GEMM];
    m->device_flops_fp32 = m->device_flops;   /* the host computes every dtype in fp32 */
    m->device_mem_bw = 12.0 * ADD_N / ctx->t[M_ADD];
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    m->device_memory = (double)pages * (double)psz / W;
    m->host_adam_rate = ADAM_N / ctx->t[M_ADAM];
    m->h2d_bw = 2.0 * COPY_BYTES / ctx->t[M_COPY];   /* read and written */
    if (P < W) {   /* nodes: each link from its own groups' timings */
        m->intra = link_of((const double[]){ctx->t[M_IAG1], ctx->t[M_IAGN], ctx->t[M_IRS1], ctx->t[M_IRSN]}, P);
        m->inter = link_of((const double[]){ctx->t[M_XAG1], ctx->t[M_XAGN], ctx->t[M_XRS1], ctx->t[M_XRSN]}, W / P);
    } else if (W > 1) {   /* the two ops ZeRO's traffic is made of, priced as one: their bytes over their time */
        m->intra = link_of((const double[]){ctx->t[M_AG1], ctx->t[M_AGN], ctx->t[M_RS1], ctx->t[M_RSN]}, W);
    } else {   /* one rank's collectives move nothing: a copy's rate, a call's time */
        m->intra.alpha = ctx->t[M_AG1] > 1e-9 ? ctx->t[M_AG1] : 1e-9;
        m->intra.beta = m->h2d_bw;
    }
    if (P == W) m->inter = m->intra;
    m->nvme_bw = ctx->t[M_NVME] > 0 ? 2.0 * NVME_BYTES / ctx->t[M_NVME] : m->h2d_bw;
}

static void print_calibrate_usage(FILE *f) {
    fprintf(f, "usage: zinc calibrate [--world-size N] [--backend sim|tcp|mpi] [--rendezvous R] [--threads T]\n"
               "                      [--name NAME] [--quick] -o FILE.json\n"
               "Measures this machine as N ranks see it and writes a machine file for zinc plan's step time.\n");
}

static int usage(const char *msg, const char *arg) {
    fprintf(stderr, "zinc calibrate: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    print_calibrate_usage(stderr);
    return 2;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int zn_cmd_calibrate(int argc, char **argv) {
    int world = 1, threads = 0, quick = 0;
    const char *out = NULL, *backend_s = NULL, *rendezvous = NULL, *name = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-o") || !strcmp(a, "--world-size") || !strcmp(a, "--backend") || !strcmp(a, "--rendezvous") ||
            !strcmp(a, "--threads") || !strcmp(a, "--name")) {
            if (!v) return usage("a value is missing after", a);
            i++;
            if (!strcmp(a, "-o")) out = v;
            else if (!strcmp(a, "--backend")) backend_s = v;
            else if (!strcmp(a, "--rendezvous")) rendezvous = v;
            else if (!strcmp(a, "--name")) {
                /* checked here, not after the measuring: a name the machine
                   file cannot hold is refused, never cut short */
                if (!zn_machine_name_ok(v)) {
                    char m[160];
                    snprintf(m, sizeof m, "--name: expected 1 to 63 bytes of printable UTF-8, got '%.100s'", v);
                    return usage(m, NULL);
                }
                name = v;
            }
            else if (!strcmp(a, "--world-size") && parse_int(v, 1, 4096, &world)) return usage("--world-size: expected 1..4096, got", v);
            else if (!strcmp(a, "--threads") && parse_int(v, 1, ZN_MAX_HOST_THREADS, &threads)) return usage("--threads: expected 1..256, got", v);
        } else if (!strcmp(a, "--quick")) {
            quick = 1;
        } else {
            return usage("unknown flag", a);
        }
    }
    if (!out) return usage("-o FILE.json is required", NULL);
    ZnErr err = {0};
    ZnBackend backend = ZN_BACKEND_SIM;
    if (backend_s && zn_backend_parse(backend_s, &backend, &err)) return usage(err.msg, NULL);
    if (backend != ZN_BACKEND_SIM && backend != ZN_BACKEND_TCP && backend != ZN_BACKEND_MPI)
        return usage("--backend: calibrate runs on sim, tcp or mpi, not", backend_s);
    zn_set_host_threads(threads);
    /* the probe file goes next to the output: the disk a user would name */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    CalCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.dir = dir;
    ctx.quick = quick;
    int rc, rank = 0;
    ZnProc proc = {0};
    if (backend == ZN_BACKEND_SIM) {
        ZnSimWorld *w = zn_sim_world_new(world, &err);
        rc = w ? zn_sim_run(w, cal_rank, &ctx, &err) : err.code;
        zn_sim_world_free(w);
    } else {
        if ((rc = zn_proc_start(backend, rendezvous, 0, &proc, &err))) goto fail;
        world = proc.world.size;
        rank = proc.world.rank;
        ctx.per_node = proc.world.per_node;
        rc = cal_rank(rank, proc.comm, &ctx, &err);
        zn_proc_end(&proc, rc == 0);
    }
    if (rc) goto fail;
    if (rank != 0) return 0;
    char auto_name[64];
    snprintf(auto_name, sizeof auto_name, "calibrated-%s-%d", zn_backend_name(backend), world);
    ZnMachine m;
    machine_of(&ctx, world, name ? name : auto_name, &m);
    char between[128] = "";   /* across nodes, where the ranks span them */
    if (m.gpus_per_node < world)
        snprintf(between, sizeof between, " in a node of %d, alpha %.2f us beta %.3f GB/s between %d nodes",
                 m.gpus_per_node, m.inter.alpha * 1e6, m.inter.beta / 1e9, world / m.gpus_per_node);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        rc = zn_nomem(&err);
        goto fail;
    }
    rc = zn_machine_write_json(f, &m, &err);
    if (fclose(f) && !rc) rc = zn_nomem(&err);
    if (!rc) rc = zn_write_file_atomic(out, text, len, &err);
    free(text);
    if (rc) goto fail;
    printf("zinc calibrate: %d %s rank%s: GEMM %.2f GFLOP/s, memory %.2f GB/s, Adam %.3g elements/s, copy %.2f GB/s, "
           "collectives alpha %.2f us beta %.2f GB/s%s, disk %.2f GB/s -> %s\n",
           world, zn_backend_name(backend), world > 1 ? "s" : "", m.device_flops / 1e9, m.device_mem_bw / 1e9,
           m.host_adam_rate, m.h2d_bw / 1e9, m.intra.alpha * 1e6, m.intra.beta / 1e9, between, m.nvme_bw / 1e9, out);
    return 0;
fail:
    zn_err_print(stderr, "", &err);
    return err.code == ZN_E_USAGE ? 2 : 1;
}

const ZnCommand zn_calibrate_command = {"calibrate", zn_cmd_calibrate, print_calibrate_usage};
