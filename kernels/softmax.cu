/* softmax.cu: softmax cross-entropy exactly as the host twin (device.h,
 * spec Z-CUDA-003): per row the max in column order, the sum of
 * zn_expf(z - max) in column order, loss_row = zn_logf(s) - (z[y] - max);
 * the mean is the row losses summed in row order, divided by B; dlogits =
 * (zn_expf(z - max) / s - onehot) * grad_scale. exp and log are the shared
 * src/core/zn_math.h, so host and GPU compute the same bits.
 *
 * The sums are serial by definition, so: one thread per row for the row
 * statistics (B threads), one thread per element for dlogits, one thread
 * for the mean (B additions). Small next to the GEMMs around it. */
#include <math.h>
#include "cuda_dev.h"
extern "C" {
#include "core/zn_math.h"
}

/* stats: [0, B) row max, [B, 2B) row sum, [2B, 3B) row loss, [3B]: the mean */
__global__ void k_rows(int B, int C, const float *logits, const int *labels, float *stats) {
    for (long b = (long)blockIdx.x * blockDim.x + threadIdx.x; b < B; b += (long)gridDim.x * blockDim.x) {
        const float *z = logits + b * C;
        float m, s;
        zn_softmax_row(z, C, &m, &s);
        int y = labels[b];
        stats[b] = m;
        stats[B + b] = s;
        stats[2 * B + b] = zn_logf(s) - (z[y] - m);
    }
}

__global__ void k_dlogits(int B, int C, const float *logits, const int *labels, float grad_scale,
                          const float *stats, float *dlogits) {
    long n = (long)B * C;
    for (long e = (long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (long)gridDim.x * blockDim.x) {
        long b = e / C;
        int c = (int)(e % C);
        float p = zn_expf(logits[e] - stats[b]) / stats[B + b];
        dlogits[e] = (p - (c == labels[b] ? 1.0f : 0.0f)) * grad_scale;
    }
}

__global__ void k_mean(int B, float *stats) {
    float total = 0.0f;
    for (int b = 0; b < B; b++) total += stats[2 * B + b];
    stats[3 * B] = total / (float)B;
}

extern "C" float zn_cuda_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels,
                                      float grad_scale, float *dlogits) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (B <= 0 || C <= 0) return 0.0f;   /* no rows: no loss (and no 0/0), as the host */
    const float nan = NAN;   /* the loss of a failed step: never mistaken for a real one */
    if (!zn_cuda_ok(d)) return nan;
    float *stats = (float *)zn_cuda_scratch(d, (size_t)(3 * (long)B + 1) * sizeof(float), "softmax scratch");
    if (!stats) return nan;
    k_rows<<<zn_cuda_blocks(d, B), ZN_CUDA_THREADS, 0, c->stream>>>(B, C, logits, labels, stats);
    if (zn_cuda_launched(d, "softmax_xent rows")) return nan;
    if (dlogits) {
        k_dlogits<<<zn_cuda_blocks(d, (long)B * C), ZN_CUDA_THREADS, 0, c->stream>>>(B, C, logits, labels,
                                                                                       grad_scale, stats, dlogits);
        if (zn_cuda_launched(d, "softmax_xent dlogits")) return nan;
    }
    k_mean<<<1, 1, 0, c->stream>>>(B, stats);
    if (zn_cuda_launched(d, "softmax_xent mean")) return nan;
    float *h = (float *)c->pinned;
    if (zn_cuda_fail(d, "softmax_xent", cudaMemcpyAsync(h, stats + 3 * (long)B, sizeof(float),
                                                        cudaMemcpyDeviceToHost, c->stream)) ||
        zn_cuda_sync(d, "softmax_xent"))
        return nan;
    return *h;
}
