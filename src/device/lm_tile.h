/* lm_tile.h: the inner loops of the language-model host kernels
 * (device/lm_host.c), included once per instruction set with
 *   LT(x)   the name suffix (x##_avx2, ...)
 *   LT_VL   floats per vector (1: the scalar reference, no vector code)
 * Every loop here runs over independent output elements, one per vector
 * lane; a sum that runs across loop iterations keeps its order (each lane
 * sums its own element in the order of the scalar loop). The operations are
 * the scalar ones written on vectors (GCC vector extensions), with
 * -ffp-contract=off: nothing is fused, so every width gives the same bits.
 * Scalar tails finish what does not fill a vector. */

#if LT_VL > 1
typedef float LT(vf) __attribute__((vector_size(LT_VL * 4)));
typedef int32_t LT(vi) __attribute__((vector_size(LT_VL * 4)));

static inline LT(vf) LT(ld)(const float *p) {
    LT(vf) v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void LT(st)(float *p, LT(vf) v) { memcpy(p, &v, sizeof v); }
static inline LT(vf) LT(splat)(float s) { return (LT(vf)){0} + s; }
/* a where m (all ones), else b */
static inline LT(vf) LT(sel)(LT(vi) m, LT(vf) a, LT(vf) b) {
    return (LT(vf))(((LT(vi))a & m) | ((LT(vi))b & ~m));
}

/* zn_expf for lanes with x in [-86, 88] (n in [-125, 127]: no special case
 * and the one-step scaling of zn_expf): the same operations, lane by lane.
 * Other lanes get garbage, which the callers replace. */
static inline LT(vf) LT(vexp)(LT(vf) x) {
    const float shifter = 12582912.0f;
    LT(vf) nf = (x * 1.44269504088896341f + shifter) - shifter;
    LT(vi) n = __builtin_convertvector(nf, LT(vi));
    LT(vf) r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
    LT(vf) z = r * r;
    LT(vf) p = LT(splat)(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    LT(vf) y = p * z + r + 1.0f;
    LT(vi) e = (n + 127) << 23;
    return y * (LT(vf))e;
}

static inline int LT(any)(LT(vi) m) {
    int32_t a[LT_VL];
    memcpy(a, &m, sizeof a);
    int r = 0;
    for (int l = 0; l < LT_VL; l++) r |= a[l];
    return r != 0;
}

/* zn_tanhf lane by lane; the caller keeps NaN away (it goes the scalar
 * way). Lanes with |x| > 9 (infinities too) are +-1 without using vexp's
 * garbage; otherwise vexp's argument 2|x| is in [0, 18]. */
static inline LT(vf) LT(vtanh)(LT(vf) x) {
    LT(vi) neg = x < 0.0f;
    LT(vf) a = LT(sel)(neg, -x, x);
    LT(vf) t = 1.0f - 2.0f / (LT(vexp)(2.0f * a) + 1.0f);
    t = LT(sel)(a > 9.0f, LT(splat)(1.0f), t);
    return LT(sel)(neg, -t, t);
}
#endif

/* y[i] = 0.5 x (1 + tanh(u)) for i in [lo, hi) */
static void LT(gelu_fwd)(long lo, long hi, const float *x, float *y) {
    long i = lo;
#if LT_VL > 1
    for (; i + LT_VL <= hi; i += LT_VL) {
        LT(vf) v = LT(ld)(x + i);
        if (LT(any)(v != v)) {   /* a NaN: this vector the scalar way */
            for (long j = i; j < i + LT_VL; j++) y[j] = lm_gelu1(x[j]);
            continue;
        }
        LT(vf) u = GELU_S * (v + GELU_A * v * v * v);
        LT(st)(y + i, 0.5f * v * (1.0f + LT(vtanh)(u)));
    }
#endif
    for (; i < hi; i++) y[i] = lm_gelu1(x[i]);
}

static void LT(gelu_bwd)(long lo, long hi, const float *x, const float *dy, float *dx) {
    long i = lo;
#if LT_VL > 1
    for (; i + LT_VL <= hi; i += LT_VL) {
        LT(vf) v = LT(ld)(x + i);
        if (LT(any)(v != v)) {
            for (long j = i; j < i + LT_VL; j++) dx[j] = lm_gelu_grad1(x[j], dy[j]);
            continue;
        }
        LT(vf) u = GELU_S * (v + GELU_A * v * v * v);
        LT(vf) th = LT(vtanh)(u);
        LT(vf) local = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * GELU_A * v * v);
        LT(st)(dx + i, local * LT(ld)(dy + i));
    }
#endif
    for (; i < hi; i++) dx[i] = lm_gelu_grad1(x[i], dy[i]);
}

/* a[c] = zn_expf(x[c] - mx) for c in [0, n): the numerators of a softmax
   (a may be x, in place) and of the cross-entropy */
static void LT(exp_from)(long n, const float *x, float *a, float mx) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) {
        LT(vf) v = LT(ld)(x + i) - mx;
        LT(vi) bad = (v < -86.0f) | (v > 88.0f) | (v != v);
        LT(st)(a + i, LT(vexp)(v));
        if (LT(any)(bad)) {   /* outside vexp's range: those lanes the scalar way (from v: a may be x) */
            float vs[LT_VL];
            int32_t b[LT_VL];
            memcpy(vs, &v, sizeof vs);
            memcpy(b, &bad, sizeof b);
            for (int l = 0; l < LT_VL; l++)
                if (b[l]) a[i + l] = zn_expf(vs[l]);
        }
    }
#endif
    for (; i < n; i++) a[i] = zn_expf(x[i] - mx);
}

/* zn_softmax_row's max: z[0], then each z[c] greater than the max so far.
 * Among numbers the order cannot change the result except between -0 and
 * +0 (the first one stays), and a NaN z[0] stays while a later NaN is
 * skipped: a row with a NaN, or whose max is a zero, goes the scalar way. */
static float LT(row_max)(long n, const float *z) {
#if LT_VL > 1
    if (n >= 2 * LT_VL) {
        LT(vf) mv = LT(ld)(z);
        LT(vi) nan = mv != mv;
        long i = LT_VL;
        for (; i + LT_VL <= n; i += LT_VL) {
            LT(vf) v = LT(ld)(z + i);
            nan |= v != v;
            mv = LT(sel)(v > mv, v, mv);
        }
        float a[LT_VL];
        memcpy(a, &mv, sizeof a);
        float mx = a[0];
        int bad = LT(any)(nan);
        for (int l = 1; l < LT_VL; l++) if (a[l] > mx) mx = a[l];
        for (; i < n; i++) {
            bad |= z[i] != z[i];
            if (z[i] > mx) mx = z[i];
        }
        if (!bad && mx != 0.0f) return mx;
    }
#endif
    float mx = z[0];
    for (long c = 1; c < n; c++) if (z[c] > mx) mx = z[c];
    return mx;
}

/* a[c] = (a[c] / s) * g: the cross-entropy's gradient off the label
 * ((e / s - 0) * g, and e / s - 0 is e / s for every e / s) */
static void LT(xent_grad)(long n, float *a, float s, float g) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(a + i, (LT(ld)(a + i) / s) * g);
#endif
    for (; i < n; i++) a[i] = (a[i] / s) * g;
}

/* y[i] = y[i] + b[i] */
static void LT(add_row)(long n, const float *b, float *y) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(y + i, LT(ld)(y + i) + LT(ld)(b + i));
#endif
    for (; i < n; i++) y[i] = y[i] + b[i];
}

/* y[i] = a[i] + b[i] */
static void LT(sum_row)(long n, const float *a, const float *b, float *y) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(y + i, LT(ld)(a + i) + LT(ld)(b + i));
#endif
    for (; i < n; i++) y[i] = a[i] + b[i];
}

/* y[i] = y[i] + s * x[i]: one step of n independent sums */
static void LT(axpy)(long n, float s, const float *x, float *y) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(y + i, LT(ld)(y + i) + s * LT(ld)(x + i));
#endif
    for (; i < n; i++) y[i] = y[i] + s * x[i];
}

/* y[i] = s * x[i] for i in [0, n) */
static void LT(scale_row)(long n, float s, const float *x, float *y) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(y + i, LT(ld)(x + i) * s);
#endif
    for (; i < n; i++) y[i] = x[i] * s;
}

/* a[i] = a[i] / s */
static void LT(div_row)(long n, float *a, float s) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(a + i, LT(ld)(a + i) / s);
#endif
    for (; i < n; i++) a[i] = a[i] / s;
}

/* ds[t2] = (p[t2] (ds[t2] - dot)) scale */
static void LT(dsoft_row)(long n, const float *p, float *ds, float dot, float scale) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) LT(st)(ds + i, (LT(ld)(p + i) * (LT(ld)(ds + i) - dot)) * scale);
#endif
    for (; i < n; i++) ds[i] = (p[i] * (ds[i] - dot)) * scale;
}

/* LayerNorm's output row: ((x - m) rs) w + b */
static void LT(ln_out)(long n, const float *x, float m, float rs, const float *w, const float *b, float *out) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL)
        LT(st)(out + i, ((LT(ld)(x + i) - m) * rs) * LT(ld)(w + i) + LT(ld)(b + i));
#endif
    for (; i < n; i++) out[i] = ((x[i] - m) * rs) * w[i] + b[i];
}

/* LayerNorm's input gradient row: (w g - md - ((x - m) rs) mdn) rs */
static void LT(ln_dx)(long n, const float *x, const float *g, const float *w, float m, float rs, float md, float mdn,
                      float *dx) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) {
        LT(vf) nn = (LT(ld)(x + i) - m) * rs, dn = LT(ld)(w + i) * LT(ld)(g + i);
        LT(st)(dx + i, (dn - md - nn * mdn) * rs);
    }
#endif
    for (; i < n; i++) {
        float nn = (x[i] - m) * rs, dn = w[i] * g[i];
        dx[i] = (dn - md - nn * mdn) * rs;
    }
}

/* one row's step of LayerNorm's weight gradients: dw += ((x - m) rs) g, db += g */
static void LT(ln_dwdb)(long n, const float *x, const float *g, float m, float rs, float *dw, float *db) {
    long i = 0;
#if LT_VL > 1
    for (; i + LT_VL <= n; i += LT_VL) {
        LT(vf) gv = LT(ld)(g + i);
        LT(st)(dw + i, LT(ld)(dw + i) + ((LT(ld)(x + i) - m) * rs) * gv);
        LT(st)(db + i, LT(ld)(db + i) + gv);
    }
#endif
    for (; i < n; i++) {
        dw[i] = dw[i] + ((x[i] - m) * rs) * g[i];
        db[i] = db[i] + g[i];
    }
}

/* The key and value gradients of one key row t2 of one head (Z-GPT-006):
 * dk[i] = sum over t = t2..T-1 in order of ds[t][t2] q_t[i], dv likewise
 * with P and dout; rows of q, dout at stride sq, sg, of ds and P at T. */
static void LT(dkdv)(long t2, long T, long hs, const float *q, long sq, const float *g, long sg, const float *ds,
                     const float *P, float *dk, float *dv) {
    long i = 0;
#if LT_VL > 1
    for (; i + 4 * LT_VL <= hs; i += 4 * LT_VL) {
        LT(vf) k0 = {0}, k1 = {0}, k2 = {0}, k3 = {0}, v0 = {0}, v1 = {0}, v2 = {0}, v3 = {0};
        for (long t = t2; t < T; t++) {
            const float s = ds[t * T + t2], p = P[t * T + t2];
            const float *qt = q + t * sq + i, *gt = g + t * sg + i;
            k0 = k0 + s * LT(ld)(qt);
            k1 = k1 + s * LT(ld)(qt + LT_VL);
            k2 = k2 + s * LT(ld)(qt + 2 * LT_VL);
            k3 = k3 + s * LT(ld)(qt + 3 * LT_VL);
            v0 = v0 + p * LT(ld)(gt);
            v1 = v1 + p * LT(ld)(gt + LT_VL);
            v2 = v2 + p * LT(ld)(gt + 2 * LT_VL);
            v3 = v3 + p * LT(ld)(gt + 3 * LT_VL);
        }
        LT(st)(dk + i, k0); LT(st)(dk + i + LT_VL, k1); LT(st)(dk + i + 2 * LT_VL, k2); LT(st)(dk + i + 3 * LT_VL, k3);
        LT(st)(dv + i, v0); LT(st)(dv + i + LT_VL, v1); LT(st)(dv + i + 2 * LT_VL, v2); LT(st)(dv + i + 3 * LT_VL, v3);
    }
    for (; i + LT_VL <= hs; i += LT_VL) {
        LT(vf) k0 = {0}, v0 = {0};
        for (long t = t2; t < T; t++) {
            k0 = k0 + ds[t * T + t2] * LT(ld)(q + t * sq + i);
            v0 = v0 + P[t * T + t2] * LT(ld)(g + t * sg + i);
        }
        LT(st)(dk + i, k0);
        LT(st)(dv + i, v0);
    }
#endif
    for (; i < hs; i++) {
        float ak = 0.0f, av = 0.0f;
        for (long t = t2; t < T; t++) {
            ak += ds[t * T + t2] * q[t * sq + i];
            av += P[t * T + t2] * g[t * sg + i];
        }
        dk[i] = ak;
        dv[i] = av;
    }
}
