/* bench_gpu.c: the fused Adam kernel's bandwidth as a fraction of a
 * device-to-device copy measured in the same run (make bench-gpu; never
 * asserted; goal >= 90%). Adam must move, per element, p g m v read and
 * p m v written (28 bytes) plus the working copy written (4 bytes: zinc's
 * 16-bit tensors are fp32 buffers on the 16-bit grid): 32 bytes. A copy of
 * b bytes moves 2b. Both run through the zinc device and are timed to the
 * stream's end (zn_cuda_check synchronises); best of 5 after a warm-up. */
#include <stdio.h>
#include <time.h>
#include "device/cuda.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    ZnDevice d;
    ZnErr err = {0};
    if (zn_device_cuda_init(&d, 0, 0, &err)) { fprintf(stderr, "bench_gpu: %s\n", err.msg); return 1; }
    const long sizes[] = {100000000L, 300000000L, 1000000000L};
    ZnAdamParams hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1};
    for (int s = 0; s < 3; s++) {
        long n = sizes[s];
        size_t b = (size_t)n * 4;
        float *buf[5];
        int okall = 1;
        for (int k = 0; k < 5; k++) okall &= (buf[k] = zn_dev_alloc(&d, b, ZN_MEM_WORKSPACE, &err)) != NULL;
        if (!okall) { printf("adam n=%.0e: skipped (%s)\n", (double)n, err.msg); for (int k = 0; k < 5; k++) zn_dev_free(&d, buf[k]); continue; }
        double best_adam = 1e30, best_copy = 1e30;
        for (int rep = 0; rep < 6; rep++) {
            double t0 = now_s();
            d.k->adam(&d, n, buf[0], buf[1], buf[2], buf[3], &hp, rep + 1, 1.0f, buf[4], ZN_BF16);
            if (zn_cuda_check(&d, &err)) break;
            double t1 = now_s();
            d.k->copy(&d, buf[4], buf[1], b);
            if (zn_cuda_check(&d, &err)) break;
            double t2 = now_s();
            if (rep > 0) {   /* rep 0 warms up */
                if (t1 - t0 < best_adam) best_adam = t1 - t0;
                if (t2 - t1 < best_copy) best_copy = t2 - t1;
            }
        }
        if (err.code) { fprintf(stderr, "bench_gpu: %s\n", err.msg); return 1; }
        double bw_adam = 32.0 * n / best_adam, bw_copy = 2.0 * b / best_copy;
        printf("adam n=%.0e: %.3f ms, %.0f GB/s; copy %.0f GB/s; adam/copy = %.1f%%\n", (double)n, best_adam * 1e3,
               bw_adam / 1e9, bw_copy / 1e9, 100.0 * bw_adam / bw_copy);
        for (int k = 0; k < 5; k++) zn_dev_free(&d, buf[k]);
    }
    zn_device_cuda_free(&d);
    return 0;
}
