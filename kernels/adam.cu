/* adam.cu: the fused optimizer step (spec Z-OPT-*, Z-CUDA-003): unscale and
 * clip multiplier, Adam/AdamW update, and optionally the rounded working
 * copy, in one pass over memory. The element update is optim_elem.h, the
 * same function the host loop runs, so with -fmad=false the bits match the
 * host twin; float4 loads and stores change which thread does an element,
 * never its arithmetic, so both tables use this one kernel.
 *
 * Memory-bound: per element it reads p, g, m, v and writes p, m, v (and the
 * working copy), 28-32 bytes, so what matters is wide, coalesced accesses
 * and enough bytes in flight: 16-byte vectors, a grid-stride loop over
 * enough blocks to fill every SM. */
#include "cuda_dev.h"
extern "C" {
#include "engine/optim_elem.h"
#include "core/half.h"
}

template <int DT> __device__ __forceinline__ float round_work(float x) {
    if (DT == ZN_F16) return zn_round_f16(x);
    if (DT == ZN_BF16) return zn_round_bf16(x);
    return x;
}

/* One element, scalar: the head and tail a vector pass cannot cover. */
template <int ADAMW, int DT>
__device__ __forceinline__ void adam_one(const ZnAdamConsts &c, long i, float *p, const float *g, float *m, float *v,
                                         float *work) {
    float pi = p[i], mi = m[i], vi = v[i];
    zn_adam_elem(c, ADAMW, g[i], &pi, &mi, &vi);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if (work) work[i] = round_work<DT>(pi);
}

/* Elements [0, head) and [head + 4*nvec, n) one at a time; [head, head +
 * 4*nvec) four at a time through float4 (16-byte aligned there). */
template <int ADAMW, int DT>
__global__ void __launch_bounds__(ZN_CUDA_THREADS)
k_adam(ZnAdamConsts c, long n, long head, long nvec, float *p, const float *g, float *m, float *v, float *work) {
    const long stride = (long)gridDim.x * blockDim.x;
    const long tid = (long)blockIdx.x * blockDim.x + threadIdx.x;
    float4 *p4 = (float4 *)(p + head), *m4 = (float4 *)(m + head), *v4 = (float4 *)(v + head);
    const float4 *g4 = (const float4 *)(g + head);
    float4 *w4 = work ? (float4 *)(work + head) : NULL;
    for (long i = tid; i < nvec; i += stride) {
        float4 P = p4[i], G = __ldg(&g4[i]), M = m4[i], V = v4[i];
        zn_adam_elem(c, ADAMW, G.x, &P.x, &M.x, &V.x);
        zn_adam_elem(c, ADAMW, G.y, &P.y, &M.y, &V.y);
        zn_adam_elem(c, ADAMW, G.z, &P.z, &M.z, &V.z);
        zn_adam_elem(c, ADAMW, G.w, &P.w, &M.w, &V.w);
        p4[i] = P;
        m4[i] = M;
        v4[i] = V;
        if (w4) {
            float4 W = {round_work<DT>(P.x), round_work<DT>(P.y), round_work<DT>(P.z), round_work<DT>(P.w)};
            __stcs(&w4[i], W);   /* streaming store: not read again this step */
        }
    }
    long rest = head + (n - head - 4 * nvec);   /* scalar elements */
    for (long r = tid; r < rest; r += stride) {
        long i = r < head ? r : head + 4 * nvec + (r - head);
        adam_one<ADAMW, DT>(c, i, p, g, m, v, work);
    }
}

/* How many leading elements to run scalar so that every pointer is 16-byte
 * aligned after them; -1 when the pointers disagree (all scalar then). */
static long vector_head(long n, const void *const *ptrs, int np) {
    uintptr_t phase = ((uintptr_t)ptrs[0] & 15u);
    for (int k = 1; k < np; k++)
        if (ptrs[k] && ((uintptr_t)ptrs[k] & 15u) != phase) return -1;
    if (phase & 3u) return -1;   /* floats not on a 4-byte boundary: no vectors */
    long head = (long)((16u - phase) & 15u) / 4;
    return head > n ? n : head;
}

template <int ADAMW, int DT>
static void launch(ZnDevice *d, const ZnAdamConsts &c, long n, float *p, const float *g, float *m, float *v,
                   float *work) {
    const void *ptrs[5] = {p, g, m, v, work};
    long head = vector_head(n, ptrs, 5);
    long nvec = head < 0 ? 0 : (n - head) / 4;
    if (head < 0) head = 0;
    long items = nvec > 0 ? nvec : n;
    /* blocks to keep every SM full (up to 32 blocks of 256 per SM with the
       grid-stride loop), fewer for small n */
    k_adam<ADAMW, DT><<<zn_cuda_blocks(d, items), ZN_CUDA_THREADS, 0, zn_cuda_dev(d)->stream>>>(
        c, n, head, nvec, p, g, m, v, work);
    zn_cuda_launched(d, "adam");
}

extern "C" void zn_cuda_adam(ZnDevice *d, long n, float *p, const float *g, float *m, float *v,
                             const ZnAdamParams *hp, long t, float grad_mul, float *work, ZnDtype dt) {
    if (n <= 0 || !zn_cuda_ok(d)) return;
    const ZnAdamConsts c = zn_adam_consts(hp, t, grad_mul);   /* the host's float constants */
    int w = work ? (dt == ZN_F16 ? 1 : dt == ZN_BF16 ? 2 : 0) : 0;
    if (hp->adamw) {
        if (w == 1) launch<1, ZN_F16>(d, c, n, p, g, m, v, work);
        else if (w == 2) launch<1, ZN_BF16>(d, c, n, p, g, m, v, work);
        else launch<1, ZN_F32>(d, c, n, p, g, m, v, work);
    } else {
        if (w == 1) launch<0, ZN_F16>(d, c, n, p, g, m, v, work);
        else if (w == 2) launch<0, ZN_BF16>(d, c, n, p, g, m, v, work);
        else launch<0, ZN_F32>(d, c, n, p, g, m, v, work);
    }
}
