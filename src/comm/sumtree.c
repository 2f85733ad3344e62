/* sumtree.c: the summation tree every backend reduces with (spec Z-SIM-002,
 * Z-SIM-003): the simulator, the TCP and MPI communicators, the N-ranks-on-one-
 * GPU memops and exact NCCL on the host side. One element's result is the fixed binary tree over rank index
 * of comm.h; the work is done a tile of ZN_SIM_TILE elements at a time so the
 * partial sums of every tree level stay in cache, and a rank reads each
 * peer's input once.
 *
 * fp32, fp16 and bf16 accumulate in fp32; for the 16-bit types every partial
 * sum is rounded back to the dtype (round to nearest even), which models
 * NCCL reducing in the buffer's own type. fp64 accumulates in fp64. */
#include <string.h>
#include <stdlib.h>
#include "comm/sumtree.h"
#include "core/alloc.h"

/* Elements reduced at a time: a tile per tree level stays in L1/L2. */
#define ZN_SIM_TILE 2048

/* Largest power of two strictly below n (n >= 2): the tree's split point. */
static int tree_split(int n) {
    int h = 1;
    while (h * 2 < n) h *= 2;
    return h;
}

/* Tree levels below the root for n leaves: each level needs one spare tile
 * (the right subtree's partial) besides the accumulator. */
static int tree_depth(int n) {
    int d = 0;
    while ((1 << d) < n) d++;
    return d;
}

size_t zn_tree_tiles_bytes(int world) {
    /* sized for fp64 so one buffer serves every dtype */
    return (size_t)(tree_depth(world) + 1) * ZN_SIM_TILE * sizeof(double);
}

/* ------------------------------------------------ branchless kernels
 *
 * The loops below are written so gcc's -O2 vectorizer (the "very cheap" cost
 * model) takes them: restrict pointers (no alias checks), no branches in the
 * body (selects instead), and, for every full tile, a trip count that is the
 * constant ZN_SIM_TILE (no scalar epilogue). The 16-bit helpers give the same
 * bits as half.h (zn_round_f16, zn_round_bf16, zn_f32_to_f16, zn_f32_to_bf16
 * for all 2^32 fp32 inputs, zn_f16_to_f32 and zn_bf16_to_f32 for all 65536
 * patterns: checked exhaustively when they were written; tests/test_sim.c
 * pushes every 16-bit pattern through the reduction). Only the fp16
 * subnormal rounding uses an fp32 add, which is right under round-to-nearest,
 * the mode the simulator's sums assume anyway. */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
/* c ? x : y with a mask, not a ternary: gcc would otherwise move the fp32
 * work of the unused side into a branch, and a loop with a branch around an
 * fp operation (which may trap, -ftrapping-math) is not vectorized. */
static inline uint32_t pick(int c, uint32_t x, uint32_t y) {
    uint32_t m = 0u - (uint32_t)c;
    return (x & m) | (y & ~m);
}

/* fp32 value rounded to fp16 precision and range (= zn_round_f16). */
static inline float round_f16(float x) {
    uint32_t u = f2u(x), a = u & 0x7fffffffu, s = u ^ a;
    /* normal fp16 range: round the 13 dropped mantissa bits, ties to even */
    uint32_t norm = (u + 0x0fffu + ((u >> 13) & 1u)) & 0xffffe000u;
    /* subnormal range: 0.5 + |x| has an ulp of 2^-24, the fp16 subnormal step,
       so the add rounds |x| to that step (ties to even) and the subtraction
       is exact */
    uint32_t sub = f2u((u2f(a) + 0.5f) - 0.5f) | s;
    uint32_t inf = s | 0x7f800000u;
    uint32_t nan = (u & 0xffffe000u) | 0x400000u; /* quiet, top payload kept */
    uint32_t r = pick(a < 0x38800000u, sub, norm);
    r = pick(a >= 0x477ff000u, inf, r); /* 65520 and up: overflow */
    r = pick(a > 0x7f800000u, nan, r);
    return u2f(r);
}

/* fp32 value rounded to bf16 (= zn_round_bf16): the carry of the rounding
 * handles overflow to inf; a NaN keeps its top bits and turns quiet. */
static inline float round_bf16(float x) {
    uint32_t u = f2u(x);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    uint32_t nan = (u & 0xffff0000u) | 0x400000u;
    return u2f(pick((u & 0x7fffffffu) > 0x7f800000u, nan, r));
}

/* = zn_f16_to_f32 */
static inline float f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
    uint32_t norm = ((uint32_t)(h & 0x7fffu) << 13) + 0x38000000u;
    uint32_t sub = f2u((float)m * 0x1p-24f) | s; /* exact: m < 2^10 */
    uint32_t special = 0x7f800000u | (m << 13) | pick(m != 0, 0x400000u, 0u);
    uint32_t r = pick(e == 0, sub, norm | s);
    return u2f(pick(e == 0x7c00u, special | s, r));
}

/* = zn_bf16_to_f32 */
static inline float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    return u2f(pick((u & 0x7fffffffu) > 0x7f800000u, u | 0x400000u, u));
}

/* = zn_f32_to_f16: round, then pack the now exact fp16 value. */
static inline uint16_t f32_to_f16(float x) {
    uint32_t r = f2u(round_f16(x)), a = r & 0x7fffffffu, s = (r >> 16) & 0x8000u;
    uint32_t norm = (a - 0x38000000u) >> 13;            /* rebias 127 -> 15 */
    /* exact: a multiple of 2^-24 below 2^-14; other lanes convert 0, since a
       float-to-int conversion out of range would be undefined behaviour */
    uint32_t sub = (uint32_t)(int32_t)(u2f(pick(a < 0x38800000u, a, 0u)) * 0x1p24f);
    uint32_t special = 0x7c00u | ((a >> 13) & 0x3ffu);  /* inf, or the quiet NaN round_f16 made */
    uint32_t h = pick(a < 0x38800000u, sub, norm);
    return (uint16_t)(pick(a >= 0x7f800000u, special, h) | s);
}

/* = zn_f32_to_bf16 */
static inline uint16_t f32_to_bf16(float x) { return (uint16_t)(f2u(round_bf16(x)) >> 16); }

/* Maximum that keeps a NaN from either side: an overflow flag or a NaN
 * gradient must never vanish in a max-reduction. */
static inline float max_f32(float a, float b) {
    float m = b > a ? b : a;
    m = b != b ? b : m;
    return a != a ? a : m;
}
static inline double max_f64(double a, double b) {
    double m = b > a ? b : a;
    m = b != b ? b : m;
    return a != a ? a : m;
}

static inline void load_f16(float *restrict d, const uint16_t *restrict s, long n) {
    for (long i = 0; i < n; i++) d[i] = f16_to_f32(s[i]);
}
static inline void load_bf16(float *restrict d, const uint16_t *restrict s, long n) {
    for (long i = 0; i < n; i++) d[i] = bf16_to_f32(s[i]);
}
static inline void store_f16(uint16_t *restrict d, const float *restrict s, long n) {
    for (long i = 0; i < n; i++) d[i] = f32_to_f16(s[i]);
}
static inline void store_bf16(uint16_t *restrict d, const float *restrict s, long n) {
    for (long i = 0; i < n; i++) d[i] = f32_to_bf16(s[i]);
}
static inline void add_f32(float *restrict a, const float *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = a[i] + b[i];
}
static inline void add_f16(float *restrict a, const float *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = round_f16(a[i] + b[i]);
}
static inline void add_bf16(float *restrict a, const float *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = round_bf16(a[i] + b[i]);
}
static inline void max_tile_f32(float *restrict a, const float *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = max_f32(a[i], b[i]);
}
static inline void add_f64(double *restrict a, const double *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = a[i] + b[i];
}
static inline void max_tile_f64(double *restrict a, const double *restrict b, long n) {
    for (long i = 0; i < n; i++) a[i] = max_f64(a[i], b[i]);
}

/* Calls kernel with the constant ZN_SIM_TILE when the tile is full, so the
 * inlined copy has a fixed trip count and vectorizes. */
#define TILED(kernel, a, b, n) \
    do { if ((n) == ZN_SIM_TILE) kernel(a, b, ZN_SIM_TILE); else kernel(a, b, n); } while (0)

/* ------------------------------------------------ fp32 / fp16 / bf16 */

static void load_f32(ZnDtype dt, const void *src, long off, long n, float *dst) {
    if (dt == ZN_F32) memcpy(dst, (const float *)src + off, (size_t)n * sizeof(float));
    else if (dt == ZN_F16) TILED(load_f16, dst, (const uint16_t *)src + off, n);
    else TILED(load_bf16, dst, (const uint16_t *)src + off, n);
}

static void store_f32(ZnDtype dt, const float *src, void *dst, long off, long n) {
    if (dt == ZN_F32) memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
    else if (dt == ZN_F16) TILED(store_f16, (uint16_t *)dst + off, src, n);
    else TILED(store_bf16, (uint16_t *)dst + off, src, n);
}

/* a = a (op) b, rounded to the dtype after every add */
static void combine_f32(ZnDtype dt, ZnRedOp red, float *a, const float *b, long n) {
    if (red == ZN_MAX) TILED(max_tile_f32, a, b, n); /* exact: the max is one of the two */
    else if (dt == ZN_F32) TILED(add_f32, a, b, n);
    else if (dt == ZN_F16) TILED(add_f16, a, b, n);
    else TILED(add_bf16, a, b, n);
}

/* acc[0..len) = tree(lo, n) over sends[] at element off; spare holds one
 * tile per remaining tree level. */
static void tree_f32(const void *const *sends, ZnDtype dt, ZnRedOp red, int lo, int n,
                     long off, long len, float *acc, float *spare) {
    if (n == 1) {
        load_f32(dt, sends[lo], off, len, acc);
        return;
    }
    int h = tree_split(n);
    tree_f32(sends, dt, red, lo, h, off, len, acc, spare);
    if (dt == ZN_F32 && n - h == 1) {
        /* an fp32 leaf on the right is combined straight from its buffer:
           the same additions, without copying it into a tile first */
        combine_f32(dt, red, acc, (const float *)sends[lo + h] + off, len);
        return;
    }
    tree_f32(sends, dt, red, lo + h, n - h, off, len, spare, spare + ZN_SIM_TILE);
    combine_f32(dt, red, acc, spare, len);
}

/* ------------------------------------------------------------- fp64 */

static void combine_f64(ZnRedOp red, double *a, const double *b, long n) {
    if (red == ZN_MAX) TILED(max_tile_f64, a, b, n);
    else TILED(add_f64, a, b, n);
}

static void tree_f64(const void *const *sends, ZnRedOp red, int lo, int n, long off, long len,
                     double *acc, double *spare) {
    if (n == 1) {
        memcpy(acc, (const double *)sends[lo] + off, (size_t)len * sizeof(double));
        return;
    }
    int h = tree_split(n);
    tree_f64(sends, red, lo, h, off, len, acc, spare);
    if (n - h == 1) {   /* a right leaf straight from its buffer, as tree_f32 */
        combine_f64(red, acc, (const double *)sends[lo + h] + off, len);
        return;
    }
    tree_f64(sends, red, lo + h, n - h, off, len, spare, spare + ZN_SIM_TILE);
    combine_f64(red, acc, spare, len);
}

/* ------------------------------------------------------------ driver */

void zn_tree_reduce_host(const void *const *sends, int world, ZnDtype dt, ZnRedOp red, long off, long len,
                         void *out, void *tiles) {
    for (long t = 0; t < len; t += ZN_SIM_TILE) {
        long n = len - t < ZN_SIM_TILE ? len - t : ZN_SIM_TILE;
        if (dt == ZN_F64) {
            double *acc = tiles;
            tree_f64(sends, red, 0, world, off + t, n, acc, acc + ZN_SIM_TILE);
            memcpy((double *)out + t, acc, (size_t)n * sizeof(double));
        } else {
            float *acc = tiles;
            tree_f32(sends, dt, red, 0, world, off + t, n, acc, acc + ZN_SIM_TILE);
            store_f32(dt, acc, out, t, n);
        }
    }
}

int zn_tree_reduce(const void *const *bufs, int n, ZnDtype dt, ZnRedOp op, long len, void *out, ZnErr *err) {
    void *tiles = zn_malloc(ZN_HOST_COMM, zn_tree_tiles_bytes(n));
    if (!tiles) return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " for a reduction over %d ranks", n);
    zn_tree_reduce_host(bufs, n, dt, op, 0, len, out, tiles);
    free(tiles);
    return 0;
}
