/* elementwise.cu: the elementwise kernels of the table (round_dt, add, div,
 * pack16, unpack16, relu). Each is one IEEE operation per element plus the
 * 16-bit rounding of half.h, so the exact and the fast table share them:
 * there is no multiply-add to contract and no order to keep. */
#include "cuda_dev.h"
extern "C" {
#include "core/half.h"
}

/* the grid-stride loop every kernel here uses */
#define FOR_EACH(i, n) \
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long)gridDim.x * blockDim.x)

/* round to dt (device.h); DT a template argument, so no branch per element */
template <int DT> __device__ __forceinline__ float round_to(float x) {
    if (DT == ZN_F16) return zn_round_f16(x);
    if (DT == ZN_BF16) return zn_round_bf16(x);
    return x;
}

template <int DT> __global__ void k_round(float *x, long n) {
    FOR_EACH(i, n) x[i] = round_to<DT>(x[i]);
}
template <int DT> __global__ void k_add(float *dst, const float *src, long n) {
    FOR_EACH(i, n) dst[i] = round_to<DT>(dst[i] + src[i]);
}
/* a true division (-prec-div=true), not a multiply by 1/div */
template <int DT> __global__ void k_div(float *x, long n, float div) {
    FOR_EACH(i, n) x[i] = round_to<DT>(x[i] / div);
}
template <int DT> __global__ void k_pack(uint16_t *dst, const float *src, long n) {
    FOR_EACH(i, n) dst[i] = DT == ZN_F16 ? zn_f32_to_f16(src[i]) : zn_f32_to_bf16(src[i]);
}
template <int DT> __global__ void k_unpack(float *dst, const uint16_t *src, long n) {
    FOR_EACH(i, n) dst[i] = DT == ZN_F16 ? zn_f16_to_f32(src[i]) : zn_bf16_to_f32(src[i]);
}
/* written as comparisons like the host twins: -0.0 and NaN map to +0.0 */
__global__ void k_relu_fwd(const float *x, float *y, long n) {
    FOR_EACH(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void k_relu_bwd(const float *y, const float *dy, float *dx, long n) {
    FOR_EACH(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

#define LAUNCH(d, n, what, kernel, ...)                                                     \
    do {                                                                                    \
        if ((n) <= 0 || !zn_cuda_ok(d)) return;                                             \
        kernel<<<zn_cuda_blocks(d, n), ZN_CUDA_THREADS, 0, zn_cuda_dev(d)->stream>>>(__VA_ARGS__); \
        zn_cuda_launched(d, what);                                                          \
    } while (0)

extern "C" void zn_cuda_round_dt(ZnDevice *d, ZnDtype dt, float *x, long n) {
    if (dt == ZN_F16) LAUNCH(d, n, "round_dt", k_round<ZN_F16>, x, n);
    else if (dt == ZN_BF16) LAUNCH(d, n, "round_dt", k_round<ZN_BF16>, x, n);
    /* fp32: nothing to round */
}

extern "C" void zn_cuda_add(ZnDevice *d, ZnDtype dt, float *dst, const float *src, long n) {
    if (dt == ZN_F16) LAUNCH(d, n, "add", k_add<ZN_F16>, dst, src, n);
    else if (dt == ZN_BF16) LAUNCH(d, n, "add", k_add<ZN_BF16>, dst, src, n);
    else LAUNCH(d, n, "add", k_add<ZN_F32>, dst, src, n);
}

extern "C" void zn_cuda_div(ZnDevice *d, ZnDtype dt, float *x, long n, float div) {
    if (dt == ZN_F16) LAUNCH(d, n, "div", k_div<ZN_F16>, x, n, div);
    else if (dt == ZN_BF16) LAUNCH(d, n, "div", k_div<ZN_BF16>, x, n, div);
    else LAUNCH(d, n, "div", k_div<ZN_F32>, x, n, div);
}

extern "C" void zn_cuda_pack16(ZnDevice *d, ZnDtype dt, uint16_t *dst16, const float *src, long n) {
    if (dt == ZN_F16) LAUNCH(d, n, "pack16", k_pack<ZN_F16>, dst16, src, n);
    else LAUNCH(d, n, "pack16", k_pack<ZN_BF16>, dst16, src, n);
}

extern "C" void zn_cuda_unpack16(ZnDevice *d, ZnDtype dt, float *dst, const uint16_t *src16, long n) {
    if (dt == ZN_F16) LAUNCH(d, n, "unpack16", k_unpack<ZN_F16>, dst, src16, n);
    else LAUNCH(d, n, "unpack16", k_unpack<ZN_BF16>, dst, src16, n);
}

extern "C" void zn_cuda_relu_fwd(ZnDevice *d, long n, const float *x, float *y) {
    LAUNCH(d, n, "relu_fwd", k_relu_fwd, x, y, n);
}

extern "C" void zn_cuda_relu_bwd(ZnDevice *d, long n, const float *y, const float *dy, float *dx) {
    LAUNCH(d, n, "relu_bwd", k_relu_bwd, y, dy, dx, n);
}
