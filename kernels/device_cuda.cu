/* device_cuda.cu: the CUDA ZnDevice (spec Z-CUDA-001, 002): set-up, memory
 * with the shared accounting, data movement, error recording. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include "cuda_dev.h"

/* ------------------------------------------------------------- errors */

int zn_cuda_fail(ZnDevice *d, const char *what, cudaError_t e) {
    if (e == cudaSuccess) return 0;
    ZnCudaDev *c = zn_cuda_dev(d);
    if (!c->failed) {
        c->failed = 1;
        zn_err(&c->first_err, ZN_E_INTERNAL, "cuda (gpu %d): %s: %s (%s)", c->gpu, what, cudaGetErrorString(e),
               cudaGetErrorName(e));
    }
    return 1;
}

int zn_cuda_fail_blas(ZnDevice *d, const char *what, cublasStatus_t s) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    ZnCudaDev *c = zn_cuda_dev(d);
    if (!c->failed) {
        c->failed = 1;
        zn_err(&c->first_err, ZN_E_INTERNAL, "cublas (gpu %d): %s: status %d", c->gpu, what, (int)s);
    }
    return 1;
}

/* ------------------------------------------------------------ profile */

/* ZINC_CUDA_PROFILE=1: each launch waits for its kernel, and the wait is
   added to that kernel's total; the table goes to stderr at exit, with the
   time from the first launch to the last. For finding where a step's time
   goes, never for a timed figure: the waits serialise the host with the GPU
   (and each wait starts after the launch returned, missing a few us). */
typedef struct { const char *what; double s; long n; } ProfRow;
static ProfRow prof[128];
static int nprof, prof_on = -1;
static double prof_first, prof_last;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;

static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int prof_cmp(const void *a, const void *b) {
    double x = ((const ProfRow *)a)->s, y = ((const ProfRow *)b)->s;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_print(void) {
    double tot = 0;
    for (int i = 0; i < nprof; i++) tot += prof[i].s;
    qsort(prof, (size_t)nprof, sizeof prof[0], prof_cmp);
    fprintf(stderr, "cuda profile: %.1f ms in the calls below, %.1f ms from the first to the last\n", tot * 1e3,
            (prof_last - prof_first) * 1e3);
    for (int i = 0; i < nprof; i++)
        fprintf(stderr, "cuda profile: %-22s %8ld calls %10.2f ms %5.1f%%\n", prof[i].what, prof[i].n, prof[i].s * 1e3,
                tot > 0 ? 100.0 * prof[i].s / tot : 0.0);
}

static void prof_add(const char *what, double t0, double t1) {
    pthread_mutex_lock(&prof_mu);
    if (prof_first == 0) prof_first = t0;
    prof_last = t1;
    int i = 0;
    while (i < nprof && strcmp(prof[i].what, what)) i++;
    if (i == nprof && nprof < (int)(sizeof prof / sizeof prof[0])) prof[nprof++] = (ProfRow){what, 0, 0};
    if (i < nprof) { prof[i].s += t1 - t0; prof[i].n++; }
    pthread_mutex_unlock(&prof_mu);
}

static int profiling(void) {
    if (prof_on < 0) {   /* first use in the process (a race here only sets the same value twice) */
        const char *e = getenv("ZINC_CUDA_PROFILE");
        prof_on = e && strcmp(e, "1") == 0;
        if (prof_on) atexit(prof_print);
    }
    return prof_on;
}

static void prof_mark(ZnDevice *d, const char *what) {
    double t0 = wall_s();
    cudaStreamSynchronize(zn_cuda_dev(d)->stream);
    prof_add(what, t0, wall_s());
}

int zn_cuda_launched(ZnDevice *d, const char *what) {
    if (zn_cuda_fail(d, what, cudaGetLastError())) return 1;
    if (profiling()) prof_mark(d, what);
    return 0;
}

int zn_cuda_sync(ZnDevice *d, const char *what) {
    return zn_cuda_fail(d, what, cudaStreamSynchronize(zn_cuda_dev(d)->stream));
}

extern "C" int zn_cuda_check(ZnDevice *d, ZnErr *err) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (!c) return zn_err(err, ZN_E_INTERNAL, "zn_cuda_check: not a CUDA device");
    if (!c->failed) zn_cuda_sync(d, "stream synchronize");
    if (!c->failed) return 0;
    if (err) *err = c->first_err;
    return c->first_err.code;
}

void *zn_cuda_scratch(ZnDevice *d, size_t bytes, const char *what) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (bytes <= c->scratch_cap) return c->scratch;
    /* the old scratch may still be read by queued kernels: cudaFree waits */
    if (c->scratch && zn_cuda_fail(d, what, cudaFree(c->scratch))) return NULL;
    c->scratch = NULL;
    c->scratch_cap = 0;
    if (zn_cuda_fail(d, what, cudaMalloc(&c->scratch, bytes))) return NULL;
    c->scratch_cap = bytes;
    return c->scratch;
}

extern "C" int zn_cuda_device_count(ZnErr *err) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        zn_err(err, ZN_E_USAGE, "no usable CUDA GPU: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return 0;
    }
    if (n == 0) zn_err(err, ZN_E_USAGE, "no CUDA GPU is visible");
    return n;
}

/* --------------------------------------------------- allocation table */

/* Fibonacci hashing of the pointer (allocations are at least 256-byte
 * aligned, so the low bits carry nothing) */
static size_t slot_of(const ZnCudaDev *c, const void *p) {
    return (size_t)(((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull) & (c->tab_cap - 1);
}

static int tab_grow(ZnCudaDev *c) {
    size_t ncap = c->tab_cap ? c->tab_cap * 2 : 256;
    ZnCudaAlloc *old = c->tab;
    size_t ocap = c->tab_cap;
    ZnCudaAlloc *t = (ZnCudaAlloc *)calloc(ncap, sizeof *t);
    if (!t) return -1;
    c->tab = t;
    c->tab_cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].p) continue;
        size_t s = slot_of(c, old[i].p);
        while (t[s].p) s = (s + 1) & (ncap - 1);
        t[s] = old[i];
    }
    free(old);
    return 0;
}

static int tab_put(ZnCudaDev *c, const ZnCudaAlloc *a) {
    if ((c->tab_n + 1) * 2 > c->tab_cap && tab_grow(c)) return -1;   /* load <= 1/2 */
    size_t s = slot_of(c, a->p);
    while (c->tab[s].p) s = (s + 1) & (c->tab_cap - 1);
    c->tab[s] = *a;
    c->tab_n++;
    return 0;
}

/* Removes p's entry into *out; -1 if p is not a live allocation. Deletion by
 * backward shift keeps every probe chain unbroken without tombstones. */
static int tab_take(ZnCudaDev *c, const void *p, ZnCudaAlloc *out) {
    if (!c->tab_cap) return -1;
    size_t m = c->tab_cap - 1, s = slot_of(c, p);
    while (c->tab[s].p != p) {
        if (!c->tab[s].p) return -1;
        s = (s + 1) & m;
    }
    *out = c->tab[s];
    size_t hole = s;
    for (size_t j = (s + 1) & m; c->tab[j].p; j = (j + 1) & m) {
        size_t home = slot_of(c, c->tab[j].p);
        /* move j into the hole unless its home lies cyclically in (hole, j] */
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            c->tab[hole] = c->tab[j];
            hole = j;
        }
    }
    c->tab[hole].p = NULL;
    c->tab_n--;
    return 0;
}

/* ---------------------------------------------------------- alloc/free */

/* alloc_n bytes of GPU memory, zero-filled; accounted_n charged to cat by
 * the shared accounting, so a configuration reports the same bytes on the
 * host and the CUDA device (Z-CUDA-002). Meta mode: charge only, and hand
 * out a unique token that is not GPU memory. */
static void *cuda_alloc(ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (zn_mem_charge(d, accounted_n, cat, err)) return NULL;
    ZnCudaAlloc a = {NULL, accounted_n, (int)cat, d->meta};
    if (d->meta) {
        a.p = malloc(1);
        if (!a.p) goto nomem_host;
    } else {
        /* never a 0-byte cudaMalloc: every allocation is a distinct pointer */
        size_t n = alloc_n ? alloc_n : 1;
        double t0 = profiling() ? wall_s() : 0;
        cudaError_t e = cudaMalloc(&a.p, n);
        if (t0) prof_add("cudaMalloc", t0, wall_s());
        if (e != cudaSuccess) {
            zn_mem_uncharge(d, accounted_n, cat);
            zn_err(err, e == cudaErrorMemoryAllocation ? ZN_E_NOMEM : ZN_E_INTERNAL,
                   "out of GPU memory on gpu %d: cudaMalloc of %zu bytes for %s: %s", c->gpu, n,
                   zn_mem_cat_name(cat), cudaGetErrorString(e));
            return NULL;
        }
        /* zero-filled like the host device; in stream order, so every kernel
           and copy of this rank, and peers after the collectives' ready
           hook, see zeros */
        e = cudaMemsetAsync(a.p, 0, n, c->stream);
        if (e != cudaSuccess) {
            cudaFree(a.p);
            zn_mem_uncharge(d, accounted_n, cat);
            zn_err(err, ZN_E_INTERNAL, "cuda (gpu %d): zero-filling %zu bytes: %s", c->gpu, n,
                   cudaGetErrorString(e));
            return NULL;
        }
    }
    if (tab_put(c, &a)) {
        if (a.meta) free(a.p);
        else cudaFree(a.p);
        goto nomem_host;
    }
    return a.p;
nomem_host:
    zn_mem_uncharge(d, accounted_n, cat);
    zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " for the allocation table of gpu %d", c->gpu);
    return NULL;
}

static void release(ZnDevice *d, const ZnCudaAlloc *a) {
    if (a->meta) free(a->p);
    else {
        double t0 = profiling() ? wall_s() : 0;
        zn_cuda_fail(d, "cudaFree", cudaFree(a->p));   /* waits for queued work on it */
        if (t0) prof_add("cudaFree", t0, wall_s());
    }
    zn_mem_uncharge(d, a->accounted, (ZnMemCat)a->cat);
}

static void cuda_free(ZnDevice *d, void *p) {
    if (!p) return;
    ZnCudaAlloc a;
    if (tab_take(zn_cuda_dev(d), p, &a)) {
        /* not ours: a bug in the caller; recorded, never a crash */
        ZnCudaDev *c = zn_cuda_dev(d);
        if (!c->failed) {
            c->failed = 1;
            zn_err(&c->first_err, ZN_E_INTERNAL, "cuda (gpu %d): free of %p, which is not a live allocation",
                   c->gpu, p);
        }
        return;
    }
    release(d, &a);
}

/* ------------------------------------------------------- data movement */

/* upload/download return with the data in place (device.h): the copy is
 * queued behind the rank's kernels, then waited for. */
static void copy_waited(ZnDevice *d, const char *what, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    double t0 = profiling() ? wall_s() : 0;   /* the wait for queued kernels counts here */
    if (zn_cuda_fail(d, what, cudaMemcpyAsync(dst, src, bytes, kind, zn_cuda_dev(d)->stream))) return;
    zn_cuda_sync(d, what);
    if (t0) prof_add(what, t0, wall_s());
}

extern "C" void zn_cuda_upload(ZnDevice *d, void *dst, const void *src_host, size_t bytes) {
    if (!bytes || !zn_cuda_ok(d)) return;
    copy_waited(d, "upload", dst, src_host, bytes, cudaMemcpyHostToDevice);
}

extern "C" void zn_cuda_download(ZnDevice *d, void *dst_host, const void *src, size_t bytes) {
    if (!bytes) return;
    if (!zn_cuda_ok(d)) {
        memset(dst_host, 0, bytes);   /* defined contents after a failure */
        return;
    }
    copy_waited(d, "download", dst_host, src, bytes, cudaMemcpyDeviceToHost);
}

/* copy and zero are complete in stream order: every reader (this rank's
 * kernels, download, a peer after the collectives' ready hook) waits for
 * them, so there is no need to block the host here. */
extern "C" void zn_cuda_copy(ZnDevice *d, void *dst, const void *src, size_t bytes) {
    if (!bytes || !zn_cuda_ok(d)) return;
    zn_cuda_fail(d, "copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, zn_cuda_dev(d)->stream));
}

extern "C" void zn_cuda_zero(ZnDevice *d, void *dst, size_t bytes) {
    if (!bytes || !zn_cuda_ok(d)) return;
    zn_cuda_fail(d, "zero", cudaMemsetAsync(dst, 0, bytes, zn_cuda_dev(d)->stream));
}

/* ------------------------------------------------------- init and free */

static void teardown(ZnCudaDev *c) {
    if (c->blas) zn_cublas(NULL)->Destroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->pinned) cudaFreeHost(c->pinned);
    free(c->tab);
    free(c);
}

extern "C" int zn_device_cuda_init(ZnDevice *d, int gpu, int exact, ZnErr *err) {
    memset(d, 0, sizeof *d);
    ZnErr why = {0};
    int n = zn_cuda_device_count(&why);
    if (n == 0) return zn_err(err, ZN_E_USAGE, "--backend cuda: %s", why.msg);
    if (gpu < 0 || gpu >= n) return zn_err(err, ZN_E_USAGE, "--backend cuda: gpu %d does not exist (%d visible)", gpu, n);
    ZnCudaDev *c = (ZnCudaDev *)calloc(1, sizeof *c);
    if (!c) return zn_nomem(err);
    c->gpu = gpu;
    cudaError_t e;
    const char *what = "cudaSetDevice";
    if ((e = cudaSetDevice(gpu)) != cudaSuccess) goto fail;
    what = "cudaDeviceGetAttribute(multiProcessorCount)";
    if ((e = cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, gpu)) != cudaSuccess) goto fail;
    /* a stream of its own per rank: ranks sharing a GPU run concurrently,
       and non-blocking so none waits on the legacy default stream */
    what = "cudaStreamCreateWithFlags";
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) goto fail;
    what = "cudaMallocHost";
    if ((e = cudaMallocHost(&c->pinned, ZN_CUDA_PINNED_BYTES)) != cudaSuccess) goto fail;
    if (!exact) {   /* only the fast GEMMs need cuBLAS */
        const ZnCublas *cb = zn_cublas(err);
        if (!cb) {
            teardown(c);
            return err->code;
        }
        cublasStatus_t s = cb->Create(&c->blas);
        if (s == CUBLAS_STATUS_SUCCESS) s = cb->SetStream(c->blas, c->stream);
        /* default math: no TF32 unless asked for (zn_device_cuda_allow_tf32) */
        if (s == CUBLAS_STATUS_SUCCESS) s = cb->SetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
        if (s != CUBLAS_STATUS_SUCCESS) {
            zn_err(err, ZN_E_INTERNAL, "cublas (gpu %d): creating the handle: %s", gpu, cb->GetStatusString(s));
            teardown(c);
            return ZN_E_INTERNAL;
        }
    }
    d->name = "cuda";
    d->k = exact ? &zn_cuda_kernels_exact : &zn_cuda_kernels_fast;
    d->alloc = cuda_alloc;
    d->free = cuda_free;
    d->impl = c;
    return 0;
fail: {
    int code = zn_err(err, e == cudaErrorMemoryAllocation ? ZN_E_NOMEM : ZN_E_INTERNAL, "cuda (gpu %d): %s: %s (%s)",
                      gpu, what, cudaGetErrorString(e), cudaGetErrorName(e));
    teardown(c);
    return code;
}
}

extern "C" void zn_device_cuda_allow_tf32(ZnDevice *d, int on) {
    ZnCudaDev *c = zn_cuda_dev(d);
    c->allow_tf32 = on;
    if (c->blas)   /* exact devices have no handle: their GEMMs are zinc's */
        zn_cuda_fail_blas(d, "cublasSetMathMode",
                          zn_cublas(NULL)->SetMathMode(c->blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

extern "C" void zn_device_cuda_free(ZnDevice *d) {
    ZnCudaDev *c = zn_cuda_dev(d);
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    for (size_t i = 0; i < c->tab_cap; i++)
        if (c->tab[i].p) release(d, &c->tab[i]);
    if (c->scratch) cudaFree(c->scratch);
    teardown(c);
    d->impl = NULL;
}
