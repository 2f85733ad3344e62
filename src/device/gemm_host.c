/* gemm_host.c: the host GEMM (spec Z-MOD-006, Z-HOST-003).
 *
 * The promise is an accumulation order, not just a result: every output
 * element is one float sum over k from k = 0 upward, starting at 0.0f, a
 * rounded multiply and then a rounded add per step (the build has
 * -ffp-contract=off: nothing is fused), and the bias, when given, is added
 * after the whole sum. The CUDA kernels in exact mode follow the same
 * order, so both give the same bits.
 *
 * Within that promise the GEMM runs near the CPU's limit the way GotoBLAS
 * and BLIS do: B and A are packed in cache-sized blocks into the order the
 * micro-kernel reads, and a register tile of C (rows by two vector widths)
 * takes one k step at a time. Vectorising over columns of C changes no bit
 * (each lane is another element's sum), and blocking over k only pauses a
 * sum: a partial sum parked in C and read back is the same float. The
 * micro-kernel is compiled per instruction set (gemm_tile.h) and chosen at
 * run time (core/cpu.h); the columns (or rows) of C are split over the host
 * threads, each element computed whole by one thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#endif
#include "device/gemm_host.h"
#include "core/alloc.h"

/* ------------------------------------------------------------------------ */
/* the micro-kernels, one per instruction set */

#define GT(x) x##_sse2
#define GT_VL 4
#define GT_MR 6
#include "device/gemm_tile.h"
#undef GT
#undef GT_VL
#undef GT_MR

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZN_GEMM_X86 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define GT(x) x##_avx2
#define GT_VL 8
#define GT_MR 6   /* 12 accumulators + 2 of B + a broadcast + a product: the 16 ymm registers */
#include "device/gemm_tile.h"
#undef GT
#undef GT_VL
#undef GT_MR
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f")
#define GT(x) x##_avx512
#define GT_VL 16
#define GT_MR 12  /* 24 accumulators of the 32 zmm registers */
#include "device/gemm_tile.h"
#undef GT
#undef GT_VL
#undef GT_MR
#pragma GCC pop_options
#endif

/* A micro-kernel and its blocking: a packed B panel (kc x nr floats) stays
 * in L1 while every row group of the packed A block (mc x kc, L2) runs over
 * it; a packed B block is kc x nc (L2/L3). */
typedef struct {
    int mr, nr, kc, mc, nc;
    void (*block)(int mc, int nvalid, int kc, const float *Ap, const float *Bp, float *C, long ldc, int first);
    void (*pack_a)(float *dst, int R, int kc, const float *src, long sr, long sk);
    void (*pack_b)(float *dst, int R, int kc, const float *src, long sr, long sk);
} Kernel;

static const Kernel *kernel_for(ZnIsa isa) {
    static const Kernel sse2 = {6, 8, 256, 96, 256, block_sse2, pack_a_sse2, pack_b_sse2};
#ifdef ZN_GEMM_X86
    static const Kernel avx2 = {6, 16, 256, 120, 1024, block_avx2, pack_a_avx2, pack_b_avx2};
    static const Kernel avx512 = {12, 32, 128, 240, 2048, block_avx512, pack_a_avx512, pack_b_avx512};
    if (isa == ZN_ISA_AVX512) return &avx512;
    if (isa == ZN_ISA_AVX2) return &avx2;
#endif
    return isa == ZN_ISA_SCALAR ? NULL : &sse2;
}

/* floats of packing scratch one thread needs with kernel k */
static size_t scratch_floats(const Kernel *k) {
    return (size_t)k->kc * (size_t)k->nc + (size_t)k->mc * (size_t)k->kc;
}

/* ------------------------------------------------------------------------ */
/* packing */

/* Packing (gemm_tile.h's pack_a, pack_b) copies an R x kc block, element
 * (r, k) at src[r*sr + k*sk], into groups of T rows stored k-major:
 * dst[(r/T)*kc*T + k*T + r%T], the last group padded with zeros to T rows
 * (the tile reads them; their results are dropped). Pure copies: no
 * arithmetic changes. */

/* ------------------------------------------------------------------------ */
/* the driver */

/* One GEMM problem (or a thread's part of one): C(i, j) = C[i*ldc + j],
 * A(i, k) = A[i*sai + k*sak], B(k, j) = B[j*sbj + k*sbk]. */
typedef struct {
    int M, N, K;
    const float *A, *B, *bias;
    long sai, sak, sbj, sbk, ldc;
    float *C;
} Gemm;

/* The definition itself, one element at a time: the reference twin, and
 * what runs when no packing scratch can be had. */
static void gemm_plain(const Gemm *g) {
    for (long i = 0; i < g->M; i++)
        for (long j = 0; j < g->N; j++) {
            float s = 0.0f;
            for (long k = 0; k < g->K; k++) s += g->A[i * g->sai + k * g->sak] * g->B[j * g->sbj + k * g->sbk];
            g->C[i * g->ldc + j] = s;
        }
}

/* For each nc-column block of B and each k-slice in increasing k: pack the
 * block's slice of B in nr-column panels; for each mc-row block of A pack
 * its slice in mr-row groups and run the tiles. An element of C meets the
 * k-slices in order, parked in C in between. */
static void gemm_packed(const Kernel *kn, const Gemm *g, float *scratch) {
    float *Bp = scratch, *Ap = scratch + (size_t)kn->kc * (size_t)kn->nc;
    for (int j0 = 0; j0 < g->N; j0 += kn->nc) {
        const int nc = g->N - j0 < kn->nc ? g->N - j0 : kn->nc;
        for (int k0 = 0; k0 < g->K; k0 += kn->kc) {
            const int kc = g->K - k0 < kn->kc ? g->K - k0 : kn->kc;
            kn->pack_b(Bp, nc, kc, g->B + j0 * g->sbj + k0 * g->sbk, g->sbj, g->sbk);
            for (int i0 = 0; i0 < g->M; i0 += kn->mc) {
                const int mc = g->M - i0 < kn->mc ? g->M - i0 : kn->mc;
                kn->pack_a(Ap, mc, kc, g->A + i0 * g->sai + k0 * g->sak, g->sai, g->sak);
                kn->block(mc, nc, kc, Ap, Bp, g->C + i0 * g->ldc + j0, g->ldc, k0 == 0);
            }
        }
    }
}

/* The bias joins after the whole k sum (device.h), never as its start. */
static void gemm_one(const Kernel *kn, const Gemm *g, float *scratch) {
    if (g->M <= 0 || g->N <= 0) return;
    if (kn && scratch && g->K > 0) gemm_packed(kn, g, scratch);
    else gemm_plain(g);
    if (g->bias)
        for (long i = 0; i < g->M; i++)
            for (long j = 0; j < g->N; j++) g->C[i * g->ldc + j] += g->bias[j];
}

/* The packing scratch of a calling thread (a simulator rank is a thread):
 * room for every host thread's blocks, made by its first GEMM and grown when
 * the thread count grows, freed when the thread ends, so a training step
 * allocates nothing after the first (Z-ENG-017). NULL when it cannot be
 * had: the plain loop then gives the same bits. */
typedef struct {
    size_t cap;   /* floats */
    float *buf;
} Scratch;
static pthread_key_t scratch_key;
static int scratch_ok;
static void scratch_free(void *p) {
    Scratch *s = p;
    free(s->buf);
    free(s);
}
/* made before main, while there is one thread: no rank thread races on it
   (pthread_once would do too, but helgrind cannot see its fast path) */
__attribute__((constructor)) static void scratch_key_init(void) {
    scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

static float *scratch_get(size_t floats) {
    if (!scratch_ok) return NULL;
    Scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        if (!(s = zn_calloc(ZN_HOST_ENGINE, 1, sizeof *s))) return NULL;
        if (pthread_setspecific(scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (s->cap < floats) {
        /* 64-byte aligned: the tiles' vector loads of packed panels */
        float *b = NULL;
        if (posix_memalign((void **)&b, 64, floats * sizeof(float))) return NULL;
        free(s->buf);
        s->buf = b;
        s->cap = floats;
    }
    return s->buf;
}

typedef struct {
    const Kernel *kn;
    Gemm g;
    float *scratch;
} Part;
static void *part_run(void *arg) {
    Part *p = arg;
    gemm_one(p->kn, &p->g, p->scratch);
    return NULL;
}

/* Below this many multiply-adds a GEMM stays on the calling thread: a
 * thread start costs more than the work it would take. */
#define GEMM_MT_MIN (1L << 21)

void zn_host_gemm_isa(ZnIsa isa, int threads, int M, int N, int K, const float *A, long sai, long sak,
                      const float *B, long sbj, long sbk, const float *bias, float *C) {
    zn_host_gemm_ldc(isa, threads, M, N, K, A, sai, sak, B, sbj, sbk, bias, C, N);
}

void zn_host_gemm_ldc(ZnIsa isa, int threads, int M, int N, int K, const float *A, long sai, long sak,
                      const float *B, long sbj, long sbk, const float *bias, float *C, long ldc) {
    const Kernel *kn = kernel_for(zn_isa_supported(isa) ? isa : zn_isa_best());
    const Gemm g = {M, N, K, A, B, bias, sai, sak, sbj, sbk, ldc, C};
    int T = threads < 1 ? 1 : threads > ZN_MAX_HOST_THREADS ? ZN_MAX_HOST_THREADS : threads;
    if (!kn || (long)M * N * K < GEMM_MT_MIN) T = 1;
    /* split the columns in whole tiles when there are enough of them, else
       the rows; a problem too small for either runs whole */
    const int by_cols = kn && N >= T * kn->nr * 2, by_rows = kn && M >= T * kn->mr * 2;
    if (!by_cols && !by_rows) T = 1;
    float *scratch = kn ? scratch_get((size_t)T * scratch_floats(kn)) : NULL;
    if (T == 1 || !scratch) {
        gemm_one(kn, &g, scratch);
        return;
    }
    Part part[ZN_MAX_HOST_THREADS];
    const int unit = by_cols ? kn->nr : kn->mr, total = by_cols ? N : M, units = (total + unit - 1) / unit;
    for (int t = 0; t < T; t++) {
        int lo = (int)((long)units * t / T) * unit, hi = (int)((long)units * (t + 1) / T) * unit;
        if (hi > total) hi = total;
        Gemm s = g;
        if (by_cols) {
            s.N = hi - lo;
            s.B = B + lo * sbj;
            s.C = C + lo;
            s.bias = bias ? bias + lo : NULL;
        } else {
            s.M = hi - lo;
            s.A = A + lo * sai;
            s.C = C + (long)lo * ldc;
        }
        part[t] = (Part){kn, s, scratch + (size_t)t * scratch_floats(kn)};
    }
    zn_run_parts(T, part_run, part, sizeof *part);
}

void zn_host_gemm(int M, int N, int K, const float *A, long sai, long sak, const float *B, long sbj, long sbk,
                  const float *bias, float *C) {
    zn_host_gemm_isa(zn_isa_gemm(), zn_host_threads(), M, N, K, A, sai, sak, B, sbj, sbk, bias, C);
}
