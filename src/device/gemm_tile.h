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


#if GT_VL >= 8
/* An 8 x 8 block transposed in registers: row r of s (8 floats at s + r*ls)
 * becomes column r of d (d[c*ld + r]). Pure moves. */
static inline __attribute__((always_inline)) void GT(tr8)(const float *s, long ls, float *d, long ld) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls), r2 = _mm256_loadu_ps(s + 2 * ls),
           r3 = _mm256_loadu_ps(s + 3 * ls), r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls),
           r6 = _mm256_loadu_ps(s + 6 * ls), r7 = _mm256_loadu_ps(s + 7 * ls);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

#if GT_VL == 8
/* avx2's 6-row A groups: 8 k of 6 rows, transposed as tr8 does with rows
 * 4 and 5 standing in for rows 6 and 7 (no row past the group is read;
 * those lanes are dropped), so that column c
 * of the block becomes d[c*6 .. c*6+5]. Each column's 8-float store runs 2
 * floats into the next column's place, which the next store overwrites;
 * the last column stores only its 6, so nothing past d[47] is written. Pure
 * moves, as the scalar loop's. */
static inline __attribute__((always_inline)) void GT(tr6)(const float *s, long ls, float *d) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls), r2 = _mm256_loadu_ps(s + 2 * ls),
           r3 = _mm256_loadu_ps(s + 3 * ls), r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t4, 0x44), u5 = _mm256_shuffle_ps(t4, t4, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t5, 0x44), u7 = _mm256_shuffle_ps(t5, t5, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + 6, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 12, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 18, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 24, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 30, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 36, _mm256_permute2f128_ps(u2, u6, 0x31));
    __m256 last = _mm256_permute2f128_ps(u3, u7, 0x31);
    _mm_storeu_ps(d + 42, _mm256_castps256_ps128(last));
    _mm_storel_pi((__m64 *)(d + 46), _mm256_extractf128_ps(last, 1));
}
#endif

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
#if GT_VL >= 8
            if (T % 8 == 0)   /* whole 8 x 8 blocks (not avx512's 12-row A groups) */
                for (; k + 8 <= kc; k += 8)
                    for (long t = 0; t < T; t += 8) GT(tr8)(s + t * sr + k, sr, d + k * T + t, T);
#endif
#if GT_VL == 8
            if (T == 6)   /* avx2's A groups */
                for (; k + 8 <= kc; k += 8) GT(tr6)(s + k, sr, d + k * 6);
#endif
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
