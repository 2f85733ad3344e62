/* gpu_probe.c: whether a CUDA GPU is visible (make test-gpu's first step,
 * spec Z-CUDA-008). Prints the count, or one line saying why there is none
 * and exits 1. */
#include <stdio.h>
#include "device/cuda.h"

int main(void) {
    ZnErr err = {0};
    int n = zn_cuda_device_count(&err);
    if (n <= 0) {
        printf("zinc: make test-gpu needs a visible CUDA GPU: %s\n", err.msg);
        return 1;
    }
    printf("zinc: %d CUDA GPU(s) visible\n", n);
    return 0;
}
