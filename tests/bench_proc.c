/* bench_proc.c: the process communicators' bandwidth (spec Z-PROC-002/003),
 * run by `make bench` under mpirun (backend mpi) and zinc launch (backend
 * tcp), with 2 ranks (one per core of a 2-core machine) and with 4 (two per
 * core: each rank has half a core, while the memcpy it is compared with has
 * a whole one between the ranks' turns, so W4 reads low by construction).
 * Each rank reduce-scatters and all-gathers n fp32 elements per call; the
 * figure is the bytes a rank receives per second (the ring model's (N-1)/N
 * of n elements), against memcpy of the same bytes in the same process,
 * measured in the same run, each the best of 5. A collective's time
 * includes its sequence-record exchange and, for reduce-scatter, the
 * owner's tree sum. Rank 0 prints; nothing is asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "app/proc.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    ZnBackend b = ZN_BACKEND_MPI;
    ZnErr err = {0};
    if (argc > 1 && zn_backend_parse(argv[1], &b, &err)) { fprintf(stderr, "%s\n", err.msg); return 2; }
    ZnProc p;
    if (zn_proc_start(b, NULL, 0, &p, &err)) { fprintf(stderr, "bench_proc: %s\n", err.msg); return 1; }
    const int W = p.world.size;
    const long n = 1L << 22;   /* 16 MiB of fp32 per rank per call */
    float *send = malloc(n * 4), *recv = malloc(n * 4), *copy = malloc(n * 4);
    long *counts = malloc((size_t)W * sizeof(long));
    for (long i = 0; i < n; i++) send[i] = (float)(i % 977) * 0.5f;
    for (int q = 0; q < W; q++) counts[q] = n / W;
    long piece = n / W, got = piece * (W - 1);   /* elements a rank receives */
    double best_rs = 1e30, best_ag = 1e30, best_cp = 1e30;
    int rc = 0;
    for (int rep = 0; rep < 5 && !rc; rep++) {
        double t0 = now();
        rc = p.comm->reduce_scatter(p.comm, send, recv, counts, ZN_F32, ZN_SUM, "bench", &err);
        double t1 = now();
        if (!rc) rc = p.comm->all_gather(p.comm, recv, send, counts, ZN_F32, "bench", &err);
        double t2 = now();
        memcpy(copy, send, (size_t)got * 4);
        double t3 = now();
        if (t1 - t0 < best_rs) best_rs = t1 - t0;
        if (t2 - t1 < best_ag) best_ag = t2 - t1;
        if (t3 - t2 < best_cp) best_cp = t3 - t2;
    }
    if (rc) fprintf(stderr, "bench_proc: %s\n", err.msg);
    else if (p.world.rank == 0) {
        double bytes = (double)got * 4, cp = bytes / best_cp / 1e9;
        /* one line per collective, as bench.c's: the peer is memcpy of the bytes a rank receives */
        const char *bn = zn_backend_name(b);
        printf("bench proc_%s_reduce_scatter_W%d%*s zinc=%.2fGB/s peer=memcpy:%.2fGB/s ratio=%.3f\n", bn, W,
               (int)(8 - strlen(bn)), "", bytes / best_rs / 1e9, cp, bytes / best_rs / 1e9 / cp);
        printf("bench proc_%s_all_gather_W%d%*s     zinc=%.2fGB/s peer=memcpy:%.2fGB/s ratio=%.3f\n", bn, W,
               (int)(8 - strlen(bn)), "", bytes / best_ag / 1e9, cp, bytes / best_ag / 1e9 / cp);
    }
    free(send);
    free(recv);
    free(copy);
    free(counts);
    zn_proc_end(&p, rc == 0);
    return rc ? 1 : 0;
}
