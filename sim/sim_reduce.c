/* sim_reduce.c: the reduction kernels of the simulator (spec Z-SIM-002,
 * Z-SIM-003). One element's result is the fixed binary tree over rank index
 * of comm.h; the work is done a tile of ZN_SIM_TILE elements at a time so the
 * partial sums of every tree level stay in cache, and a rank reads each
 * peer's input once.
 *
 * fp32, fp16 and bf16 accumulate in fp32; for the 16-bit types every partial
 * sum is rounded back to the dtype (round to nearest even), which models
 * NCCL reducing in the buffer's own type. fp64 accumulates in fp64. */
#include <string.h>
#include "sim_world.h"
#include "../src/half.h"

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

size_t sim_tree_bytes(int world) {
    /* sized for fp64 so one buffer serves every dtype */
    return (size_t)(tree_depth(world) + 1) * ZN_SIM_TILE * sizeof(double);
}

/* Maximum that keeps a NaN from either side: an overflow flag or a NaN
 * gradient must never vanish in a max-reduction. */
static float max_f32(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    return b > a ? b : a;
}
static double max_f64(double a, double b) {
    if (a != a) return a;
    if (b != b) return b;
    return b > a ? b : a;
}

/* ------------------------------------------------ fp32 / fp16 / bf16 */

static void load_f32(ZnDtype dt, const void *src, long off, long n, float *dst) {
    if (dt == ZN_F32) {
        memcpy(dst, (const float *)src + off, (size_t)n * sizeof(float));
    } else if (dt == ZN_F16) {
        const uint16_t *s = (const uint16_t *)src + off;
        for (long i = 0; i < n; i++) dst[i] = zn_f16_to_f32(s[i]);
    } else {
        const uint16_t *s = (const uint16_t *)src + off;
        for (long i = 0; i < n; i++) dst[i] = zn_bf16_to_f32(s[i]);
    }
}

static void store_f32(ZnDtype dt, const float *src, void *dst, long off, long n) {
    if (dt == ZN_F32) {
        memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
    } else if (dt == ZN_F16) {
        uint16_t *d = (uint16_t *)dst + off;
        for (long i = 0; i < n; i++) d[i] = zn_f32_to_f16(src[i]);
    } else {
        uint16_t *d = (uint16_t *)dst + off;
        for (long i = 0; i < n; i++) d[i] = zn_f32_to_bf16(src[i]);
    }
}

/* a = a (op) b, rounded to the dtype after every add */
static void combine_f32(ZnDtype dt, ZnRedOp red, float *a, const float *b, long n) {
    if (red == ZN_MAX) { /* exact: the max of two dtype values is one of them */
        for (long i = 0; i < n; i++) a[i] = max_f32(a[i], b[i]);
    } else if (dt == ZN_F32) {
        for (long i = 0; i < n; i++) a[i] = a[i] + b[i];
    } else if (dt == ZN_F16) {
        for (long i = 0; i < n; i++) a[i] = zn_round_f16(a[i] + b[i]);
    } else {
        for (long i = 0; i < n; i++) a[i] = zn_round_bf16(a[i] + b[i]);
    }
}

/* acc[0..len) = tree(lo, n) over posts[].send at element off; spare holds
 * one tile per remaining tree level. */
static void tree_f32(const SimPost *posts, ZnDtype dt, ZnRedOp red, int lo, int n,
                     long off, long len, float *acc, float *spare) {
    if (n == 1) {
        load_f32(dt, posts[lo].send, off, len, acc);
        return;
    }
    int h = tree_split(n);
    tree_f32(posts, dt, red, lo, h, off, len, acc, spare);
    tree_f32(posts, dt, red, lo + h, n - h, off, len, spare, spare + ZN_SIM_TILE);
    combine_f32(dt, red, acc, spare, len);
}

/* ------------------------------------------------------------- fp64 */

static void combine_f64(ZnRedOp red, double *a, const double *b, long n) {
    if (red == ZN_MAX)
        for (long i = 0; i < n; i++) a[i] = max_f64(a[i], b[i]);
    else
        for (long i = 0; i < n; i++) a[i] = a[i] + b[i];
}

static void tree_f64(const SimPost *posts, ZnRedOp red, int lo, int n, long off, long len,
                     double *acc, double *spare) {
    if (n == 1) {
        memcpy(acc, (const double *)posts[lo].send + off, (size_t)len * sizeof(double));
        return;
    }
    int h = tree_split(n);
    tree_f64(posts, red, lo, h, off, len, acc, spare);
    tree_f64(posts, red, lo + h, n - h, off, len, spare, spare + ZN_SIM_TILE);
    combine_f64(red, acc, spare, len);
}

/* ------------------------------------------------------------ driver */

void sim_reduce_range(const SimPost *posts, int world, ZnDtype dt, ZnRedOp red,
                      long off, long len, void *out, void *tiles) {
    for (long t = 0; t < len; t += ZN_SIM_TILE) {
        long n = len - t < ZN_SIM_TILE ? len - t : ZN_SIM_TILE;
        if (dt == ZN_F64) {
            double *acc = tiles;
            tree_f64(posts, red, 0, world, off + t, n, acc, acc + ZN_SIM_TILE);
            memcpy((double *)out + t, acc, (size_t)n * sizeof(double));
        } else {
            float *acc = tiles;
            tree_f32(posts, dt, red, 0, world, off + t, n, acc, acc + ZN_SIM_TILE);
            store_f32(dt, acc, out, t, n);
        }
    }
}
