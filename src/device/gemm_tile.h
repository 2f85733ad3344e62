/* gemm_tile.h: one instruction set's GEMM micro-kernel. gemm_host.c
 * includes this file once per instruction set, with that set's target
 * pragma in force and these defined:
 *   GT(x)   x with the set's suffix (tile_avx512, ...)
 *   GT_VL   floats per vector register
 *   GT_MR   rows of C per tile
 * A tile is GT_MR rows by GT_NR = 2 * GT_VL columns: 2 * GT_MR accumulator
 * registers, two of B and one broadcast of A.
 *
 * The sum order is gemm_host.c's promise: each element of C is one float
 * accumulator that takes k = 0, 1, ... in order, a rounded multiply and
 * then a rounded add per step (-ffp-contract=off: no FMA). Vector lanes are
 * different columns, so their width changes no bit. */

typedef float GT(vf) __attribute__((vector_size(GT_VL * 4)));
#define GT_NR (2 * GT_VL)

static inline __attribute__((always_inline)) GT(vf) GT(ld)(const float *p) {
    GT(vf) v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline __attribute__((always_inline)) void GT(st)(float *p, GT(vf) v) { memcpy(p, &v, sizeof v); }

/* One full tile over a k-slice of kc steps. Ap: the tile's rows of A packed
 * k-major (Ap[k*GT_MR + ii]); Bp: its columns of B (Bp[k*GT_NR + jj]). With
 * first set the sums start at 0.0f, else they resume from the partial sums
 * the previous slice parked in C (the same floats). */
static inline __attribute__((always_inline)) void GT(tile)(int kc, const float *Ap, const float *Bp, float *C,
                                                             long ldc, int first) {
    GT(vf) lo[GT_MR], hi[GT_MR];
#pragma GCC unroll 16
    for (int ii = 0; ii < GT_MR; ii++) {
        if (first) {
            lo[ii] = hi[ii] = (GT(vf)){0};
        } else {
            lo[ii] = GT(ld)(C + ii * ldc);
            hi[ii] = GT(ld)(C + ii * ldc + GT_VL);
        }
    }
    for (int k = 0; k < kc; k++) {
        GT(vf) b0 = GT(ld)(Bp + k * GT_NR), b1 = GT(ld)(Bp + k * GT_NR + GT_VL);
#pragma GCC unroll 16
        for (int ii = 0; ii < GT_MR; ii++) {
            float a = Ap[k * GT_MR + ii];
            lo[ii] += a * b0;   /* one multiply, then one add */
            hi[ii] += a * b1;
        }
    }
#pragma GCC unroll 16
    for (int ii = 0; ii < GT_MR; ii++) {
        GT(st)(C + ii * ldc, lo[ii]);
        GT(st)(C + ii * ldc + GT_VL, hi[ii]);
    }
}

/* Every tile of an mc x nvalid block of C over one k-slice: for each panel
 * of B (GT_NR columns, kept in L1) every row group of the packed A block.
 * Edge tiles (fewer rows or columns; the packs are zero-padded to full
 * tiles) run on a private full-size tile and only their real elements are
 * copied in and out, so each element still sees k in order. */
static void GT(block)(int mc, int nvalid, int kc, const float *Ap, const float *Bp, float *C, long ldc, int first) {
    float part[GT_MR * GT_NR];
    for (int p = 0; p < nvalid; p += GT_NR) {
        const int nr = nvalid - p < GT_NR ? nvalid - p : GT_NR;
        const float *bp = Bp + (long)p * kc;
        for (int i0 = 0; i0 < mc; i0 += GT_MR) {
            const int mr = mc - i0 < GT_MR ? mc - i0 : GT_MR;
            const float *ap = Ap + (long)i0 * kc;
            float *c = C + i0 * ldc + p;
            if (mr == GT_MR && nr == GT_NR) {
                GT(tile)(kc, ap, bp, c, ldc, first);
                continue;
            }
            if (!first)
                for (int i = 0; i < mr; i++) memcpy(part + i * GT_NR, c + i * ldc, (size_t)nr * sizeof(float));
            GT(tile)(kc, ap, bp, part, GT_NR, first);
            for (int i = 0; i < mr; i++) memcpy(c + i * ldc, part + i * GT_NR, (size_t)nr * sizeof(float));
        }
    }
}


/* gemm_host.c's pack() with the group size a constant of this kernel, so
 * the copies of whole groups compile to vector moves. */
static inline __attribute__((always_inline)) void GT(pack_t)(float *dst, const int T, int R, int kc, const float *src,
                                                               long sr, long sk) {
    for (long g = 0; g * T < R; g++) {
        const long rows = R - g * T < T ? R - g * T : T;
        float *d = dst + g * kc * T;
        if (sr == 1 && rows == T) {
            for (long k = 0; k < kc; k++) memcpy(d + k * T, src + k * sk + g * T, (size_t)T * sizeof(float));
        } else if (sk == 1 && rows == T) {
            /* a transpose: eight k at a time from each row, so every row is
               read along memory and the writes stay within a few lines */
            const float *s = src + g * T * sr;
            long k = 0;
            for (; k + 8 <= kc; k += 8)
                for (long t = 0; t < T; t++)
#pragma GCC unroll 8
                    for (long kk = 0; kk < 8; kk++) d[(k + kk) * T + t] = s[t * sr + k + kk];
            for (; k < kc; k++)
                for (long t = 0; t < T; t++) d[k * T + t] = s[t * sr + k];
        } else {
            for (long k = 0; k < kc; k++)
                for (long t = 0; t < rows; t++) d[k * T + t] = src[k * sk + (g * T + t) * sr];
        }
        for (long k = 0; rows < T && k < kc; k++)
            for (long t = rows; t < T; t++) d[k * T + t] = 0.0f;
    }
}
static void GT(pack_a)(float *dst, int R, int kc, const float *src, long sr, long sk) {
    GT(pack_t)(dst, GT_MR, R, kc, src, sr, sk);
}
static void GT(pack_b)(float *dst, int R, int kc, const float *src, long sr, long sk) {
    GT(pack_t)(dst, GT_NR, R, kc, src, sr, sk);
}

#undef GT_NR
