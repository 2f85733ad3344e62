/* device_host.c: the host device. Memory accounted per category (spec
 * Z-MEM-*), and the host math kernels, the reference twins of the CUDA
 * kernels in exact mode (spec Z-MOD-006..Z-MOD-009).
 *
 * The kernels promise an accumulation order, not just a result: every GEMM
 * output element is a sum over k from k = 0 upward, starting at 0.0f, one
 * multiply and then one add per step, in float. The build uses
 * -ffp-contract=off, so no multiply-add is fused. Within that promise the
 * GEMMs are made fast by vectorising over the output column j (each column is
 * an independent sum, so doing four of them side by side changes no bits)
 * and by blocking over k in a way that only pauses a sum and resumes it
 * later: a partial sum parked in C and reloaded is the same float. */
#include <pthread.h>
#include "device/device.h"
#include "core/alloc.h"
#include "core/zn_math.h"
#include "core/half.h"
#include "core/cpu.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* memory */

/* Every allocation carries a header in front of the block the caller gets,
 * so free knows the size and category to give back. The header is one
 * 64-byte line, so the caller's block stays 64-byte aligned (a cache line,
 * and enough for any vector load a kernel might want). */
#define ZN_HDR 64
typedef struct {
    size_t n;      /* bytes requested (what the accounting counts) */
    int cat;       /* ZnMemCat */
    int meta;      /* 1: a meta token, no block follows the header */
} ZnAllocHdr;
_Static_assert(sizeof(ZnAllocHdr) <= ZN_HDR, "allocation header must fit one line");

static const char *const zn_cat_names[ZN_MEM_NCAT] = {
    "params16", "master32", "grads", "exp_avg", "exp_avg_sq",
    "buckets", "activations", "workspace",
};

const char *zn_mem_cat_name(ZnMemCat c) {
    return (unsigned)c < ZN_MEM_NCAT ? zn_cat_names[c] : "unknown";
}

static void *host_alloc(ZnDevice *d, size_t alloc_n, size_t n, ZnMemCat cat, ZnErr *err);
static void host_free(ZnDevice *d, void *p);

void zn_device_host_init(ZnDevice *d) {
    memset(d, 0, sizeof *d);
    d->name = "host";
    d->k = &zn_host_kernels;
    d->alloc = host_alloc;
    d->free = host_free;
    /* capacity 0 (unlimited), meta 0, impl NULL: the caller sets capacity
       and meta after init when it wants a simulated limit or a dry run. */
}

void zn_mem_reset_peak(ZnMemStats *m) {
    for (int c = 0; c < ZN_MEM_NCAT; c++) m->peak[c] = m->cur[c];
    m->peak_total = m->cur_total;
}

void zn_mem_reset_window(ZnMemStats *m) {
    for (int c = 0; c < ZN_MEM_NCAT; c++) m->win_peak[c] = m->cur[c];
    m->win_peak_total = m->cur_total;
}

/* A ZnDevice belongs to one rank (one thread), so the counters need no lock.
 * Every backend charges through here, so a simulated capacity, a dry run and
 * a real GPU all fail the same allocation with the same message. */
int zn_mem_charge(ZnDevice *d, size_t n, ZnMemCat cat, ZnErr *err) {
    if ((unsigned)cat >= ZN_MEM_NCAT)
        return zn_err(err, ZN_E_INTERNAL, "device alloc: bad memory category %d", (int)cat);
    const char *cname = zn_cat_names[cat];
    /* counters are long; a request that does not fit one cannot be accounted */
    if (n > (size_t)(LONG_MAX / 2))
        return zn_err(err, ZN_E_NOMEM, "device alloc: request of %zu bytes for %s is too large", n, cname);
    /* The capacity check is the same in meta mode, so a dry run reports the
       out-of-memory a real run on that capacity would hit. */
    if (d->capacity > 0 && (long)n > d->capacity - d->mem.cur_total)
        return zn_err(err, ZN_E_NOMEM,
                      "out of simulated device memory: requesting %zu bytes for %s with %ld of %ld in use",
                      n, cname, d->mem.cur_total, d->capacity);
    ZnMemStats *m = &d->mem;
    m->cur[cat] += (long)n;
    m->cur_total += (long)n;
    if (m->cur[cat] > m->peak[cat]) m->peak[cat] = m->cur[cat];
    if (m->cur_total > m->peak_total) m->peak_total = m->cur_total;
    if (m->cur[cat] > m->win_peak[cat]) m->win_peak[cat] = m->cur[cat];
    if (m->cur_total > m->win_peak_total) m->win_peak_total = m->cur_total;
    m->nallocs++;
    return 0;
}

void zn_mem_uncharge(ZnDevice *d, size_t n, ZnMemCat cat) {
    if ((unsigned)cat >= ZN_MEM_NCAT) return;   /* never charged */
    ZnMemStats *m = &d->mem;
    m->cur[cat] -= (long)n;
    m->cur_total -= (long)n;
    m->nallocs--;
}

/* The host backend: n is charged, alloc_n allocated (they differ only for
 * zn_dev_alloc_as, which the simulator uses to keep 16-bit tensors as fp32
 * values on the 16-bit grid while charging the device their 16-bit size). */
static void *host_alloc(ZnDevice *d, size_t alloc_n, size_t n, ZnMemCat cat, ZnErr *err) {
    /* a host allocation that fails after the charge must leave no trace,
       peaks included: keep the counters to put them back */
    ZnMemStats before = d->mem;
    if (zn_mem_charge(d, n, cat, err)) return NULL;
    const char *cname = zn_cat_names[cat];
    ZnAllocHdr *h;
    if (d->meta) {
        /* Meta mode: only the header is allocated, and the token handed out
           is the address just past it. Tokens are unique (each is tied to a
           live header), non-NULL, and point at no memory of ours: a kernel
           that dereferences one reads past a heap block, which ASan and
           valgrind report at once. */
        h = aligned_alloc(ZN_HDR, ZN_HDR);
        if (!h) {
            d->mem = before;
            zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG ": meta header for %s", cname);
            return NULL;
        }
        memset(h, 0, ZN_HDR);
        h->meta = 1;
    } else {
        /* aligned_alloc wants a size that is a multiple of the alignment */
        size_t body = (alloc_n + ZN_HDR - 1) / ZN_HDR * ZN_HDR;
        h = aligned_alloc(ZN_HDR, ZN_HDR + body);
        if (!h) {
            d->mem = before;
            zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG ": requesting %zu bytes for %s", n, cname);
            return NULL;
        }
        /* zero-filled: the header line and the whole body (padding included,
           so valgrind never sees an uninitialised byte of ours) */
        memset(h, 0, ZN_HDR + body);
    }
    h->n = n;
    h->cat = (int)cat;
    return (char *)h + ZN_HDR;
}

static void host_free(ZnDevice *d, void *p) {
    ZnAllocHdr *h = (ZnAllocHdr *)((char *)p - ZN_HDR);
    zn_mem_uncharge(d, h->n, (ZnMemCat)h->cat);
    free(h);
}

/* The public entry points: the backend's hooks behind one set of names. */
void *zn_dev_alloc(ZnDevice *d, size_t n, ZnMemCat cat, ZnErr *err) {
    return d->alloc(d, n, n, cat, err);
}

void *zn_dev_alloc_as(ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err) {
    return d->alloc(d, alloc_n, accounted_n, cat, err);
}

void zn_dev_free(ZnDevice *d, void *p) {
    if (!p) return;
    d->free(d, p);
}

/* ------------------------------------------------------------------------ */
/* data movement: host memory is device memory here, so every move is a
 * memcpy. The host kernels ignore d: the host has no stream or handle. A
 * zero-byte move touches nothing (its pointers may be NULL). */

static void host_upload(ZnDevice *d, void *dst, const void *src_host, size_t bytes) {
    (void)d;
    if (bytes) memcpy(dst, src_host, bytes);
}

static void host_download(ZnDevice *d, void *dst_host, const void *src, size_t bytes) {
    (void)d;
    if (bytes) memcpy(dst_host, src, bytes);
}

static void host_copy(ZnDevice *d, void *dst, const void *src, size_t bytes) {
    (void)d;
    if (bytes) memcpy(dst, src, bytes);
}

static void host_zero(ZnDevice *d, void *dst, size_t bytes) {
    (void)d;
    if (bytes) memset(dst, 0, bytes);
}

/* ------------------------------------------------------------------------ */
/* elementwise: one loop per dtype, so no loop carries a branch and the fp32
 * ones vectorise. The 16-bit roundings are the integer code of half.h. */

static void host_round_dt(ZnDevice *d, ZnDtype dt, float *x, long n) {
    (void)d;
    if (dt == ZN_F16) for (long i = 0; i < n; i++) x[i] = zn_round_f16(x[i]);
    else if (dt == ZN_BF16) for (long i = 0; i < n; i++) x[i] = zn_round_bf16(x[i]);
}

/* the fp32 sum first, then one rounding: the same bits as an add pass
   followed by a round_dt pass */
static void host_add(ZnDevice *d, ZnDtype dt, float *dst, const float *src, long n) {
    (void)d;
    if (dt == ZN_F16) for (long i = 0; i < n; i++) dst[i] = zn_round_f16(dst[i] + src[i]);
    else if (dt == ZN_BF16) for (long i = 0; i < n; i++) dst[i] = zn_round_bf16(dst[i] + src[i]);
    else for (long i = 0; i < n; i++) dst[i] = dst[i] + src[i];
}

/* a true division: x * (1/div) differs from x / div in the last bit for
   most divisors that are not powers of two */
static void host_div(ZnDevice *d, ZnDtype dt, float *x, long n, float div) {
    (void)d;
    if (dt == ZN_F16) for (long i = 0; i < n; i++) x[i] = zn_round_f16(x[i] / div);
    else if (dt == ZN_BF16) for (long i = 0; i < n; i++) x[i] = zn_round_bf16(x[i] / div);
    else for (long i = 0; i < n; i++) x[i] = x[i] / div;
}

static void host_pack16(ZnDevice *d, ZnDtype dt, uint16_t *dst16, const float *src, long n) {
    (void)d;
    if (dt == ZN_F16) for (long i = 0; i < n; i++) dst16[i] = zn_f32_to_f16(src[i]);
    else for (long i = 0; i < n; i++) dst16[i] = zn_f32_to_bf16(src[i]);
}

static void host_unpack16(ZnDevice *d, ZnDtype dt, float *dst, const uint16_t *src16, long n) {
    (void)d;
    if (dt == ZN_F16) for (long i = 0; i < n; i++) dst[i] = zn_f16_to_f32(src16[i]);
    else for (long i = 0; i < n; i++) dst[i] = zn_bf16_to_f32(src16[i]);
}

/* ------------------------------------------------------------------------ */
/* reductions and the optimizer: the shared host code of optim.c */

static ZnAbsMax host_absmax(ZnDevice *d, const float *x, long n) {
    (void)d;
    return zn_absmax(x, n);
}

static void host_sumsq_fixed(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo) {
    (void)d;
    zn_sumsq_fixed(x, n, shift, hi, lo);
}

/* The update, then the cast of the new master values into the working copy.
 * With a working copy the update runs in blocks small enough (32 KiB of p)
 * that the cast reads p back from L1; each element sees the same operations
 * either way, so the blocks change no bit. */
#define ADAM_BLOCK 8192
typedef struct {
    ZnDevice *d;
    long n;
    float *p, *m, *v, *work;
    const float *g;
    const ZnAdamParams *hp;
    long t;
    float grad_mul;
    ZnDtype dt;
} AdamJob;

static void adam_range(const AdamJob *j, long lo, long hi) {
    if (!j->work) {
        zn_adam_step(hi - lo, j->p + lo, j->g + lo, j->m + lo, j->v + lo, j->hp, j->t, j->grad_mul);
        return;
    }
    for (long i0 = lo; i0 < hi; i0 += ADAM_BLOCK) {
        long b = hi - i0 < ADAM_BLOCK ? hi - i0 : ADAM_BLOCK;
        zn_adam_step(b, j->p + i0, j->g + i0, j->m + i0, j->v + i0, j->hp, j->t, j->grad_mul);
        host_copy(j->d, j->work + i0, j->p + i0, (size_t)b * sizeof(float));
        host_round_dt(j->d, j->dt, j->work + i0, b);
    }
}

/* Thread k of T takes the k-th of T block-aligned slices (Z-HOST-002). */
typedef struct { const AdamJob *j; int k, T; } AdamSlice;
static void slice_bounds(const AdamSlice *s, long *lo, long *hi) {
    long blocks = (s->j->n + ADAM_BLOCK - 1) / ADAM_BLOCK;
    *lo = blocks * s->k / s->T * ADAM_BLOCK;
    *hi = blocks * (s->k + 1) / s->T * ADAM_BLOCK;
    if (*hi > s->j->n) *hi = s->j->n;
    if (*lo > *hi) *lo = *hi;
}
static void *adam_slice(void *arg) {
    long lo, hi;
    slice_bounds(arg, &lo, &hi);
    adam_range(((AdamSlice *)arg)->j, lo, hi);
    return NULL;
}

/* Partitions of at least ADAM_MT_MIN elements are split over the host
 * threads (core/cpu.h): every element is updated by one thread with the
 * same operations, so the split changes no bit. A thread that cannot be
 * started leaves its slice to the caller. */
#define ADAM_MT_MIN (1L << 16)
static void host_adam(ZnDevice *d, long n, float *p, const float *g, float *m, float *v,
                      const ZnAdamParams *hp, long t, float grad_mul, float *work, ZnDtype dt) {
    const AdamJob j = {d, n, p, m, v, work, g, hp, t, grad_mul, dt};
    int T = zn_host_threads();
    if (T > 1 && n >= ADAM_MT_MIN) {
        AdamSlice sl[ZN_MAX_HOST_THREADS];
        pthread_t th[ZN_MAX_HOST_THREADS];
        int started[ZN_MAX_HOST_THREADS];
        for (int k = 0; k < T; k++) sl[k] = (AdamSlice){&j, k, T};
        for (int k = 1; k < T; k++) started[k] = pthread_create(&th[k], NULL, adam_slice, &sl[k]) == 0;
        adam_slice(&sl[0]);
        for (int k = 1; k < T; k++) {
            if (started[k]) pthread_join(th[k], NULL);
            else adam_slice(&sl[k]);
        }
        return;
    }
    adam_range(&j, 0, n);
}

/* ------------------------------------------------------------------------ */
/* GEMM */

/* Four floats, one SSE register. GCC's vector extension, because at -O2 the
 * auto-vectoriser leaves a register tile of accumulators in memory; with
 * this type the 6x8 tile below lives in 12 registers. Element-wise + and *
 * on it are exactly the scalar IEEE operations, four at a time. */
typedef float zn_f4 __attribute__((vector_size(16)));

#define MR 6    /* rows of C per micro-tile */
#define NR 8    /* columns of C per micro-tile (two zn_f4) */
#define KC 256  /* k-slice length: a packed B micro-panel, KC*NR floats
                   (8 KiB), stays in L1 while a tile runs over it */
#define MC 96   /* rows of A packed at once (MC*KC floats, 96 KiB: L2) */
#define NC 256  /* columns of B packed at once (KC*NC floats, 256 KiB: L2) */

static inline zn_f4 ld4(const float *p) { zn_f4 v; memcpy(&v, p, sizeof v); return v; }
static inline void st4(float *p, zn_f4 v) { memcpy(p, &v, sizeof v); }

/* One mr x NR tile of C (mr <= MR) over one k-slice of kc steps. Ap holds
 * the tile's rows of A packed k-major (Ap[k*MR + ii]), Bp the panel's columns
 * of B (Bp[k*NR + jj]). When first is set the sums start at 0.0f; otherwise
 * they resume from the partial sums parked in C by the previous slice, so
 * each element still sees k in order. Always inlined and called with a
 * constant mr, so the loops over ii unroll and lo[] and hi[] become
 * registers (6x8: 12 of the 16 SSE registers). */
static inline __attribute__((always_inline)) void
tile(int mr, int kc, const float *Ap, const float *Bp, float *C, long ldc, int first) {
    zn_f4 lo[MR], hi[MR];
#pragma GCC unroll 6
    for (int ii = 0; ii < mr; ii++) {
        if (first) {
            lo[ii] = hi[ii] = (zn_f4){0.0f, 0.0f, 0.0f, 0.0f};
        } else {
            lo[ii] = ld4(C + ii * ldc);
            hi[ii] = ld4(C + ii * ldc + 4);
        }
    }
    for (int k = 0; k < kc; k++) {
        zn_f4 b0 = ld4(Bp + k * NR), b1 = ld4(Bp + k * NR + 4);
#pragma GCC unroll 6
        for (int ii = 0; ii < mr; ii++) {
            float aik = Ap[k * MR + ii];
            lo[ii] += aik * b0;   /* one multiply, then one add (no FMA) */
            hi[ii] += aik * b1;
        }
    }
#pragma GCC unroll 6
    for (int ii = 0; ii < mr; ii++) {
        st4(C + ii * ldc, lo[ii]);
        st4(C + ii * ldc + 4, hi[ii]);
    }
}

/* The rows [0, mc) of one column panel: full MR-row tiles, then one tile of
 * the mc % MR rows left over (each size its own unrolled copy). */
static void panel(int mc, int kc, const float *Ap, const float *Bp, float *C, long ldc,
                  int first) {
    int i0 = 0;
    for (; i0 + MR <= mc; i0 += MR)
        tile(MR, kc, Ap + (long)i0 * kc, Bp, C + i0 * ldc, ldc, first);
    const float *a = Ap + (long)i0 * kc;
    float *c = C + i0 * ldc;
    switch (mc - i0) {
    case 5: tile(5, kc, a, Bp, c, ldc, first); break;
    case 4: tile(4, kc, a, Bp, c, ldc, first); break;
    case 3: tile(3, kc, a, Bp, c, ldc, first); break;
    case 2: tile(2, kc, a, Bp, c, ldc, first); break;
    case 1: tile(1, kc, a, Bp, c, ldc, first); break;
    default: break;
    }
}

/* Copies an R x kc block, element (r, k) at src[r*sr + k*sk], into groups of
 * T rows stored k-major: dst[(r/T)*kc*T + k*T + r%T]. Pure copies, so no
 * arithmetic changes; the loop nest follows whichever source stride is 1 so
 * the reads run along memory. */
static void pack(float *dst, int T, int R, int kc, const float *src, long sr, long sk) {
    if (sk == 1) {
        for (long g = 0; g * T < R; g++) {
            long rows = R - g * T < T ? R - g * T : T;
            float *d = dst + g * kc * T;
            for (long t = 0; t < rows; t++) {
                const float *s = src + (g * T + t) * sr;
                for (long k = 0; k < kc; k++) d[k * T + t] = s[k];
            }
        }
    } else {
        for (long k = 0; k < kc; k++) {
            const float *s = src + k * sk;
            for (long g = 0; g * T < R; g++) {
                long rows = R - g * T < T ? R - g * T : T;
                float *d = dst + g * kc * T + k * T;
                for (long t = 0; t < rows; t++) d[t] = s[(g * T + t) * sr];
            }
        }
    }
}

/* C[M,N] (row-major, ldc = N) = sum over k of A(i,k) * B(k,j), with
 * A(i,k) = A[i*sai + k*sak] and B(k,j) = B[j*sbj + k*sbk], each element
 * summed over k in order from 0.0f, then + bias[j] if bias is set. The three
 * GEMMs of device.h are this with different strides.
 *
 * Blocking follows GotoBLAS, restricted to what keeps the sum order: for
 * each NC-column block of B and each k-slice in increasing k, pack the
 * block's slice of B in NR-column panels; for each MC-row block of A, pack
 * its slice in MR-row groups; then run every tile over them. An element of C
 * meets the k-slices in order, parked in C in between. The N % NR last
 * columns are summed one element at a time, k in order. */
/* The GEMM's packing scratch: one per thread (the simulator's ranks are
 * threads), made by its first GEMM and freed when the thread ends, so a
 * training step allocates nothing after the first (Z-ENG-017). NULL when
 * it cannot be had: the plain loop then gives the same bits. */
static pthread_key_t pack_key;
static int pack_ok;
/* made before main, while there is one thread: no rank thread races on it
   (pthread_once would do too, but helgrind cannot see its fast path) */
__attribute__((constructor)) static void pack_key_init(void) { pack_ok = pthread_key_create(&pack_key, free) == 0; }

static float *pack_scratch(void) {
    if (!pack_ok) return NULL;
    float *p = pthread_getspecific(pack_key);
    if (!p && (p = zn_malloc(ZN_HOST_ENGINE, sizeof(float) * (KC * NC + MC * KC))) && pthread_setspecific(pack_key, p)) {
        free(p);
        p = NULL;
    }
    return p;
}

static void gemm_strided(int M, int N, int K, const float *A, long sai, long sak,
                         const float *B, long sbj, long sbk, const float *bias, float *C) {
    const long ldc = N;
    const int Nfull = N / NR * NR;
    /* Scratch for the packed blocks. If the host cannot spare 352 KiB the
       plain loop below gives the same bits, only slower. */
    float *Bp = NULL, *Ap = NULL;
    if (Nfull > 0 && K > 0 && M > 0) {
        Bp = pack_scratch();
        Ap = Bp ? Bp + KC * NC : NULL;
    }
    const int done = Bp ? Nfull : 0;  /* columns the packed path covers */
    if (Bp) {
        for (int j0 = 0; j0 < Nfull; j0 += NC) {
            int nc = Nfull - j0 < NC ? Nfull - j0 : NC;  /* a multiple of NR */
            for (int k0 = 0; k0 < K; k0 += KC) {
                int kc = K - k0 < KC ? K - k0 : KC;
                int first = k0 == 0;
                /* B(k, j) as rows j: element (j, k) at B[j*sbj + k*sbk] */
                pack(Bp, NR, nc, kc, B + j0 * sbj + k0 * sbk, sbj, sbk);
                for (int i0 = 0; i0 < M; i0 += MC) {
                    int mc = M - i0 < MC ? M - i0 : MC;
                    pack(Ap, MR, mc, kc, A + i0 * sai + k0 * sak, sai, sak);
                    for (int p = 0; p < nc; p += NR)
                        panel(mc, kc, Ap, Bp + (long)p * kc, C + i0 * ldc + j0 + p, ldc, first);
                }
            }
        }
    }
    /* The columns the tiles did not cover (the last N % NR, or all of them
       when K == 0 or there was no scratch): plain dot products, k in order. */
    for (long i = 0; i < M; i++) {
        for (long j = done; j < N; j++) {
            float s = 0.0f;
            for (long k = 0; k < K; k++) s += A[i * sai + k * sak] * B[j * sbj + k * sbk];
            C[i * ldc + j] = s;
        }
    }
    /* the bias joins after the whole k sum (device.h), never as its start */
    if (bias)
        for (long i = 0; i < M; i++)
            for (long j = 0; j < N; j++) C[i * ldc + j] += bias[j];
}

/* C[M,N] = A[M,K] . B[N,K]^T (+ bias): A(i,k) = A[i*K + k], B(k,j) = B[j*K + k]. */
static void host_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B,
                         const float *bias, float *C) {
    (void)d;
    gemm_strided(M, N, K, A, K, 1, B, K, 1, bias, C);
}

/* C[M,N] = A[M,K] . B[K,N]: A(i,k) = A[i*K + k], B(k,j) = B[k*N + j]. */
static void host_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    (void)d;
    gemm_strided(M, N, K, A, K, 1, B, 1, N, NULL, C);
}

/* C[M,N] = A[K,M]^T . B[K,N]: A(i,k) = A[k*M + i], B(k,j) = B[k*N + j]. */
static void host_gemm_tn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    (void)d;
    gemm_strided(M, N, K, A, 1, M, B, 1, N, NULL, C);
}

/* out[j] = sum over rows i in order, from 0.0f. Row-by-row so the inner loop
 * runs along memory; each out[j] still sees i in order. */
static void host_colsum(ZnDevice *d, int M, int N, const float *A, float *out) {
    (void)d;
    for (long j = 0; j < N; j++) out[j] = 0.0f;
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) out[j] += A[i * N + j];
}

/* ------------------------------------------------------------------------ */
/* elementwise and loss */

/* y = x > 0 ? x : 0. Written as a comparison so that -0.0 and NaN both map
 * to +0.0 (a NaN input is caught by the loss and overflow checks, not here). */
static void host_relu_fwd(ZnDevice *d, long n, const float *x, float *y) {
    (void)d;
    for (long i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx = dy where the ReLU output is positive, else 0 (the subgradient at 0 is 0,
 * as in PyTorch's threshold_backward). */
static void host_relu_bwd(ZnDevice *d, long n, const float *y, const float *dy, float *dx) {
    (void)d;
    for (long i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* Per row: m = max logit; e_c = zn_expf(z_c - m); s = sum of e_c in c order;
 * loss_row = zn_logf(s) - (z_label - m). The mean is the row losses summed in
 * row order, then divided by B. dlogits = (e_c / s - [c == label]) * grad_scale.
 * Subtracting the max keeps expf from overflowing. labels must lie in
 * [0, C): the caller guarantees it (zn_data only makes valid labels). */
static float host_softmax_xent(ZnDevice *d, int B, int C, const float *logits, const int *labels,
                               float grad_scale, float *dlogits) {
    (void)d;
    if (B <= 0 || C <= 0) return 0.0f;  /* no rows: no loss (and no 0/0) */
    float total = 0.0f;
    for (long b = 0; b < B; b++) {
        const float *z = logits + b * C;
        float m, s;
        zn_softmax_row(z, C, &m, &s);
        int y = labels[b];
        total += zn_logf(s) - (z[y] - m);
        if (dlogits) {
            float *dl = dlogits + b * C;
            /* expf again rather than a stored copy: the same call on the
               same argument gives the same bits, and no scratch is needed */
            for (int c = 0; c < C; c++)
                dl[c] = (zn_expf(z[c] - m) / s - (c == y ? 1.0f : 0.0f)) * grad_scale;
        }
    }
    return total / (float)B;
}

const ZnKernels zn_host_kernels = {
    .upload = host_upload,
    .download = host_download,
    .copy = host_copy,
    .zero = host_zero,
    .round_dt = host_round_dt,
    .add = host_add,
    .div = host_div,
    .pack16 = host_pack16,
    .unpack16 = host_unpack16,
    .absmax = host_absmax,
    .sumsq_fixed = host_sumsq_fixed,
    .adam = host_adam,
    .gemm_nt = host_gemm_nt,
    .gemm_nn = host_gemm_nn,
    .gemm_tn = host_gemm_tn,
    .colsum = host_colsum,
    .relu_fwd = host_relu_fwd,
    .relu_bwd = host_relu_bwd,
    .softmax_xent = host_softmax_xent,
};
