/* device_host.c: the host device. Memory accounted per category (spec
 * Z-MEM-*), and the host math kernels, the reference twins of the CUDA
 * kernels in exact mode (spec Z-MOD-006..Z-MOD-009).
 *
 * The kernels promise an accumulation order, not just a result (device.h
 * says which for each); the build uses -ffp-contract=off, so no multiply-add
 * is fused. The GEMMs, the bulk of a step, live in gemm_host.c. */
#include "device/device.h"
#include "device/lm_host.h"
#include "core/alloc.h"
#include "core/zn_math.h"
#include "core/half.h"
#include "core/quant.h"
#include "core/cpu.h"
#include "device/gemm_host.h"
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
    "buckets", "activations", "workspace", "hpz_secondary",
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
    d->host_addressable = 1;
    /* capacity 0 (unlimited), meta 0, impl NULL: the caller sets capacity
       and meta after init when it wants a simulated limit or a dry run. */
}

void zn_mem_reset_peak(ZnMemStats *m) {
    for (int c = 0; c < ZN_MEM_NCAT; c++) m->peak[c] = m->cur[c];
    m->peak_total = m->cur_total;
}

void zn_mem_reset_window(ZnMemStats *m) {
    for (int c = 0; c < ZN_MEM_NCAT; c++) m->win_peak[c] = m->win_at_peak[c] = m->cur[c];
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
    if (m->cur_total > m->win_peak_total) {
        m->win_peak_total = m->cur_total;
        memcpy(m->win_at_peak, m->cur, sizeof m->win_at_peak);
    }
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

int zn_dev_is_host(const ZnDevice *d) { return d->alloc == host_alloc && d->free == host_free && !d->meta; }

void zn_host_free_uncharged(void *p) {
    if (p) free((char *)p - ZN_HDR);
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

static void host_quant(ZnDevice *d, int bits, const float *x, long n, long max_group, void *q, float *scales) {
    (void)d;
    if (bits == 8) zn_quant8(x, n, max_group, (int8_t *)q, scales);
    else zn_quant4(x, n, max_group, (uint8_t *)q, scales);
}

static void host_dequant(ZnDevice *d, int bits, const void *q, const float *scales, long n, long max_group,
                         ZnDtype dt, float *out) {
    (void)d;
    if (bits == 8) zn_dequant8((const int8_t *)q, scales, n, max_group, dt, out);
    else zn_dequant4((const uint8_t *)q, scales, n, max_group, dt, out);
}

/* ------------------------------------------------------------------------ */
/* reductions and the optimizer: the shared host code of optim.c */

/* The norm's two passes over the host threads: each thread scans a slice
 * and the parts combine exactly (a maximum, an integer sum), so the split
 * changes no bit (Z-HOST-004). Below SCAN_MT_MIN elements one thread. */
#define SCAN_MT_MIN (1L << 16)
typedef struct {
    const float *x;
    long n;
    int shift;
    ZnAbsMax am;
    uint64_t hi, lo;
} ScanPart;
static void *absmax_part(void *arg) {
    ScanPart *s = arg;
    s->am = zn_absmax(s->x, s->n);
    return NULL;
}
static void *sumsq_part(void *arg) {
    ScanPart *s = arg;
    zn_sumsq_fixed(s->x, s->n, s->shift, &s->hi, &s->lo);
    return NULL;
}
/* Runs fn over T slices of x (T from the host threads); returns T. A thread
 * that cannot start leaves its slice to the caller. */
static int scan_split(const float *x, long n, int shift, void *(*fn)(void *), ScanPart *part) {
    int T = zn_host_threads();
    if (n < SCAN_MT_MIN) T = 1;
    for (int k = 0; k < T; k++) {
        long lo = n * k / T, hi = n * (k + 1) / T;
        part[k] = (ScanPart){x + lo, hi - lo, shift, {0.0f, 0}, 0, 0};
    }
    zn_run_parts(T, fn, part, sizeof *part);
    return T;
}

static ZnAbsMax host_absmax(ZnDevice *d, const float *x, long n) {
    (void)d;
    ScanPart part[ZN_MAX_HOST_THREADS];
    int T = scan_split(x, n, 0, absmax_part, part);
    ZnAbsMax r = part[0].am;
    for (int k = 1; k < T; k++) {
        if (part[k].am.maxabs > r.maxabs) r.maxabs = part[k].am.maxabs;
        r.nonfinite |= part[k].am.nonfinite;
    }
    return r;
}

static void host_sumsq_fixed(ZnDevice *d, const float *x, long n, int shift, uint64_t *hi, uint64_t *lo) {
    (void)d;
    ScanPart part[ZN_MAX_HOST_THREADS];
    int T = scan_split(x, n, shift, sumsq_part, part);
    for (int k = 0; k < T; k++) zn_u128_add(hi, lo, part[k].hi, part[k].lo);
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
        for (int k = 0; k < T; k++) sl[k] = (AdamSlice){&j, k, T};
        zn_run_parts(T, adam_slice, sl, sizeof *sl);
        return;
    }
    adam_range(&j, 0, n);
}

/* ------------------------------------------------------------------------ */
/* GEMM (device/gemm_host.c) */

/* C[M,N] = A[M,K] . B[N,K]^T (+ bias): A(i,k) = A[i*K + k], B(k,j) = B[j*K + k]. */
static void host_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B,
                         const float *bias, float *C) {
    (void)d;
    zn_host_gemm(M, N, K, A, K, 1, B, K, 1, bias, C);
}

/* C[M,N] = A[M,K] . B[K,N]: A(i,k) = A[i*K + k], B(k,j) = B[k*N + j]. */
static void host_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    (void)d;
    zn_host_gemm(M, N, K, A, K, 1, B, 1, N, NULL, C);
}

/* C[M,N] = A[K,M]^T . B[K,N]: A(i,k) = A[k*M + i], B(k,j) = B[k*N + j]. */
static void host_gemm_tn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    (void)d;
    zn_host_gemm(M, N, K, A, 1, M, B, 1, N, NULL, C);
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
 * [0, C): the caller guarantees it (zn_data only makes valid labels). Rows
 * over the host threads, exps in vector lanes: zn_host_softmax_xent
 * (lm_host.c), checked against this definition in tests/test_lm_host.c. */

const ZnKernels zn_host_kernels = {
    ZN_KERNELS_BY_PREFIX(host),
    .softmax_xent = zn_host_softmax_xent,
    .lm = &zn_host_lm_kernels,
};
