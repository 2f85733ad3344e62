/* test_kernels_gpu.c: every kernel of the CUDA table against the host twin
 * (zn_host_kernels) on random data. Needs a GPU (make test-gpu runs it;
 * make test skips *_gpu). Exact table: bit for bit. Fast table: within the
 * bounds of spec Z-CUDA-005; the GPT-2 kernels, which both tables share,
 * bit for bit on both (Z-CUDA-009). Also the accounting (Z-CUDA-002) and the
 * simulator's collectives over GPU memory (Z-CUDA-006). */
#include "testutil.h"
#include "device/cuda.h"
#include "core/half.h"
#include "core/quant.h"

static ZnDevice host, gpu, gpuf;   /* host twin, exact CUDA, fast CUDA */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
/* values in about [-4, 4] with full mantissas, so every rounding matters */
static float rnd(void) { return ((float)next32() / 4294967296.0f - 0.5f) * 8.0f; }
static void fill(float *x, long n) { for (long i = 0; i < n; i++) x[i] = rnd(); }

/* a device copy of host data on d; src NULL: zeros (the allocation is
   zero-filled, and the host upload would read from NULL) */
static void *dup_to(ZnDevice *d, const void *src, size_t bytes) {
    ZnErr err = {0};
    void *p = zn_dev_alloc(d, bytes ? bytes : 4, ZN_MEM_WORKSPACE, &err);
    if (!p) fail_msg("alloc: %s", err.msg);
    if (bytes && src) d->k->upload(d, p, src, bytes);
    return p;
}
static void *fetch(ZnDevice *d, const void *p, size_t bytes) {
    void *h = malloc(bytes ? bytes : 4);
    assert_non_null(h);
    if (bytes) d->k->download(d, h, p, bytes);
    return h;
}
static void no_gpu_error(ZnDevice *d) {
    ZnErr err = {0};
    if (zn_cuda_check(d, &err)) fail_msg("%s", err.msg);
}
/* host and gpu results must be the same bytes */
static void same(const void *a, const void *b, size_t bytes, const char *what) {
    if (memcmp(a, b, bytes)) {
        const unsigned char *x = a, *y = b;
        size_t i = 0;
        while (x[i] == y[i]) i++;
        fail_msg("%s: first differing byte %zu of %zu", what, i, bytes);
    }
}

static int setup(void **state) {
    (void)state;
    ZnErr err = {0};
    zn_device_host_init(&host);
    if (zn_device_cuda_init(&gpu, 0, 1, &err) || zn_device_cuda_init(&gpuf, 0, 0, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}
static int teardown(void **state) {
    (void)state;
    zn_device_cuda_free(&gpu);
    zn_device_cuda_free(&gpuf);
    return 0;
}

/* spec: Z-CUDA-001 Z-CUDA-003 Z-CUDA-007 */
static void test_elementwise_exact(void **state) {
    (void)state;
    const long n = 100003;   /* not a multiple of any vector width */
    float *x = malloc(n * 4), *y = malloc(n * 4);
    fill(x, n);
    fill(y, n);
    ZnDtype dts[] = {ZN_F32, ZN_F16, ZN_BF16};
    for (int t = 0; t < 3; t++) {
        ZnDtype dt = dts[t];
        float *hx = dup_to(&host, x, n * 4), *hy = dup_to(&host, y, n * 4);
        float *gx = dup_to(&gpu, x, n * 4), *gy = dup_to(&gpu, y, n * 4);
        host.k->round_dt(&host, dt, hx, n);  gpu.k->round_dt(&gpu, dt, gx, n);
        host.k->add(&host, dt, hx, hy, n);   gpu.k->add(&gpu, dt, gx, gy, n);
        host.k->div(&host, dt, hx, n, 3.0f); gpu.k->div(&gpu, dt, gx, n, 3.0f);
        host.k->relu_fwd(&host, n, hx, hy);  gpu.k->relu_fwd(&gpu, n, gx, gy);
        host.k->relu_bwd(&host, n, hy, hx, hx); gpu.k->relu_bwd(&gpu, n, gy, gx, gx);
        float *a = fetch(&host, hx, n * 4), *b = fetch(&gpu, gx, n * 4);
        same(a, b, n * 4, "round/add/div/relu");
        free(a); free(b);
        if (dt != ZN_F32) {
            uint16_t *h16 = dup_to(&host, NULL, n * 2), *g16 = dup_to(&gpu, NULL, n * 2);
            host.k->pack16(&host, dt, h16, hy, n);  gpu.k->pack16(&gpu, dt, g16, gy, n);
            host.k->unpack16(&host, dt, hx, h16, n); gpu.k->unpack16(&gpu, dt, gx, g16, n);
            a = fetch(&host, hx, n * 4); b = fetch(&gpu, gx, n * 4);
            same(a, b, n * 4, "pack16/unpack16");
            free(a); free(b);
            zn_dev_free(&host, h16); zn_dev_free(&gpu, g16);
        }
        zn_dev_free(&host, hx); zn_dev_free(&host, hy); zn_dev_free(&gpu, gx); zn_dev_free(&gpu, gy);
    }
    no_gpu_error(&gpu);
    free(x); free(y);
}

/* spec: Z-CUDA-003 */
static void test_reductions_exact(void **state) {
    (void)state;
    const long n = 1 << 20;
    float *x = malloc(n * 4);
    fill(x, n);
    float *gx = dup_to(&gpu, x, n * 4), *hx = dup_to(&host, x, n * 4);
    ZnAbsMax a = host.k->absmax(&host, hx, n), b = gpu.k->absmax(&gpu, gx, n);
    assert_true(zt_same_bits(a.maxabs, b.maxabs) && a.nonfinite == b.nonfinite && !b.nonfinite);
    int shift = zn_norm_shift(a.maxabs);
    uint64_t hh = 7, hl = ~0ull, gh = 7, gl = ~0ull;   /* both add into what is there */
    host.k->sumsq_fixed(&host, hx, n, shift, &hh, &hl);
    gpu.k->sumsq_fixed(&gpu, gx, n, shift, &gh, &gl);
    assert_true(hh == gh && hl == gl);
    /* a NaN and an inf are found wherever they sit */
    float bad[2] = {NAN, -INFINITY};
    for (int k = 0; k < 2; k++) {
        gpu.k->upload(&gpu, gx + 777777, &bad[k], 4);
        assert_int_equal(gpu.k->absmax(&gpu, gx, n).nonfinite, 1);
    }
    /* colsum: M rows summed in order */
    const int M = 257, N = 1031;
    float *hc = dup_to(&host, NULL, N * 4), *gc = dup_to(&gpu, NULL, N * 4);
    host.k->colsum(&host, M, N, hx, hc);
    gpu.k->upload(&gpu, gx, x, (size_t)M * N * 4);
    gpu.k->colsum(&gpu, M, N, gx, gc);
    float *p = fetch(&host, hc, N * 4), *q = fetch(&gpu, gc, N * 4);
    same(p, q, N * 4, "colsum");
    free(p); free(q);
    zn_dev_free(&host, hc); zn_dev_free(&gpu, gc); zn_dev_free(&host, hx); zn_dev_free(&gpu, gx);
    no_gpu_error(&gpu);
    free(x);
}

/* spec: Z-CUDA-003 Z-OPT-003 */
static void test_adam_exact(void **state) {
    (void)state;
    const long n = 65539;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    fill(p, n); fill(g, n); fill(m, n);
    for (long i = 0; i < n; i++) v[i] = fabsf(rnd());
    for (int adamw = 0; adamw < 2; adamw++)
        for (int w = 0; w < 4; w++) {   /* no working copy, fp32, fp16, bf16 copies */
            ZnAdamParams hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, adamw, 1};
            ZnDtype dt = w == 2 ? ZN_F16 : w == 3 ? ZN_BF16 : ZN_F32;
            /* offset 1: the pointers are not 16-byte aligned (scalar head) */
            for (int off = 0; off < 2; off++) {
                float *b[2][5];
                ZnDevice *ds[2] = {&host, &gpu};
                for (int s = 0; s < 2; s++) {
                    b[s][0] = dup_to(ds[s], p, n * 4); b[s][1] = dup_to(ds[s], g, n * 4);
                    b[s][2] = dup_to(ds[s], m, n * 4); b[s][3] = dup_to(ds[s], v, n * 4);
                    b[s][4] = dup_to(ds[s], NULL, n * 4);
                    for (long t = 1; t <= 3; t++)
                        ds[s]->k->adam(ds[s], n - off, b[s][0] + off, b[s][1] + off, b[s][2] + off, b[s][3] + off,
                                       &hp, t, 0.5f, w ? b[s][4] + off : NULL, dt);
                }
                for (int k = 0; k < 5; k++) {
                    float *x = fetch(&host, b[0][k], n * 4), *y = fetch(&gpu, b[1][k], n * 4);
                    same(x, y, n * 4, "adam");
                    free(x); free(y);
                    zn_dev_free(&host, b[0][k]); zn_dev_free(&gpu, b[1][k]);
                }
            }
        }
    no_gpu_error(&gpu);
    free(p); free(g); free(m); free(v);
}

/* spec: Z-CUDA-003 Z-CUDA-005 */
static void test_gemm_exact_and_fast(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 64, 16}, {65, 130, 257}, {300, 96, 40}, {3, 5, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        long na = (long)M * K > (long)K * N ? (long)M * K : (long)K * N;
        long nmax = na > (long)N * K ? na : (long)N * K;
        float *A = malloc(nmax * 4 + 4), *B = malloc(nmax * 4 + 4), *bias = malloc(N * 4);
        fill(A, nmax); fill(B, nmax); fill(bias, N);
        for (int shape = 0; shape < 3; shape++) {
            ZnDevice *ds[3] = {&host, &gpu, &gpuf};
            float *out[3];
            for (int d = 0; d < 3; d++) {
                float *dA = dup_to(ds[d], A, nmax * 4), *dB = dup_to(ds[d], B, nmax * 4);
                float *db = dup_to(ds[d], bias, N * 4), *dC = dup_to(ds[d], NULL, (size_t)M * N * 4);
                if (shape == 0) ds[d]->k->gemm_nt(ds[d], M, N, K, dA, dB, db, dC);
                else if (shape == 1) ds[d]->k->gemm_nn(ds[d], M, N, K, dA, dB, dC);
                else ds[d]->k->gemm_tn(ds[d], M, N, K, dA, dB, dC);
                out[d] = fetch(ds[d], dC, (size_t)M * N * 4);
                zn_dev_free(ds[d], dA); zn_dev_free(ds[d], dB); zn_dev_free(ds[d], db); zn_dev_free(ds[d], dC);
            }
            same(out[0], out[1], (size_t)M * N * 4, "gemm exact");
            /* fast: any summation order is within 2 K u sum|a b| of another
               (u = 2^-24), plus the bias's one rounding */
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double absum = 0.0;
                    for (int k = 0; k < K; k++) {
                        double a = shape == 2 ? A[(long)k * M + i] : A[(long)i * K + k];
                        double b = shape == 0 ? B[(long)j * K + k] : B[(long)k * N + j];
                        absum += fabs(a * b);
                    }
                    double ref = out[0][(long)i * N + j], got = out[2][(long)i * N + j];
                    double tol = 2.0 * K * 0x1p-24 * absum + 0x1p-23 * fabs(ref) + 1e-30;
                    if (fabs(got - ref) > tol)
                        fail_msg("gemm fast shape %d (%d,%d,%d) [%d][%d]: %g vs %g (tol %g)", shape, M, N, K, i, j,
                                 got, ref, tol);
                }
            for (int d = 0; d < 3; d++) free(out[d]);
        }
        free(A); free(B); free(bias);
    }
    no_gpu_error(&gpu);
    no_gpu_error(&gpuf);
}

/* spec: Z-CUDA-003 Z-CUDA-004 */
static void test_softmax_exact(void **state) {
    (void)state;
    const int B = 67, C = 1000;
    float *z = malloc((size_t)B * C * 4);
    int *lab = malloc(B * sizeof(int));
    fill(z, (long)B * C);
    for (int b = 0; b < B; b++) lab[b] = (int)(next32() % C);
    z[5] = 80.0f;   /* large logits: the max subtraction matters */
    float *hz = dup_to(&host, z, (size_t)B * C * 4), *gz = dup_to(&gpu, z, (size_t)B * C * 4);
    int *hl = dup_to(&host, lab, B * 4), *gl = dup_to(&gpu, lab, B * 4);
    float *hd = dup_to(&host, NULL, (size_t)B * C * 4), *gd = dup_to(&gpu, NULL, (size_t)B * C * 4);
    float lh = host.k->softmax_xent(&host, B, C, hz, hl, 1024.0f, hd);
    float lg = gpu.k->softmax_xent(&gpu, B, C, gz, gl, 1024.0f, gd);
    assert_true(zt_same_bits(lh, lg));
    float *a = fetch(&host, hd, (size_t)B * C * 4), *b = fetch(&gpu, gd, (size_t)B * C * 4);
    same(a, b, (size_t)B * C * 4, "dlogits");
    assert_true(zt_same_bits(gpu.k->softmax_xent(&gpu, B, C, gz, gl, 1.0f, NULL), lh));
    free(a); free(b); free(z); free(lab);
    zn_dev_free(&host, hz); zn_dev_free(&gpu, gz); zn_dev_free(&host, hl); zn_dev_free(&gpu, gl);
    zn_dev_free(&host, hd); zn_dev_free(&gpu, gd);
    no_gpu_error(&gpu);
}

/* ------------------------------------- the language model (GPT-2) */

/* a host buffer copied to the host twin, the exact and the fast CUDA
   device (the fast table runs the same language-model kernels) */
static ZnDevice *lm_devs[3] = {&host, &gpu, &gpuf};
static void lm_up(void *out[3], const void *src, size_t bytes) {
    for (int d = 0; d < 3; d++) out[d] = dup_to(lm_devs[d], src, bytes);
}
static void lm_free(void *p[3]) {
    for (int d = 0; d < 3; d++) zn_dev_free(lm_devs[d], p[d]);
}
/* both CUDA results against the host twin's, bit for bit; a NaN only has
   to meet a NaN (the GPU makes its canonical NaN, x86 keeps the input's
   payload: no arithmetic difference) */
static void lm_same(void *p[3], long n, const char *what) {
    float *h = fetch(&host, p[0], (size_t)n * 4);
    for (int d = 1; d < 3; d++) {
        float *g = fetch(lm_devs[d], p[d], (size_t)n * 4);
        for (long i = 0; i < n; i++)
            if (!zt_same_bits(h[i], g[i]) && !(isnan(h[i]) && isnan(g[i])))
                fail_msg("%s (%s table): element %ld of %ld: host %.9g, cuda %.9g", what, d == 1 ? "exact" : "fast",
                         i, n, (double)h[i], (double)g[i]);
        free(g);
    }
    free(h);
}
static float *lm_rand(long n, float scale) {
    float *p = malloc((size_t)n * 4);
    assert_non_null(p);
    for (long i = 0; i < n; i++) p[i] = rnd() * scale;
    return p;
}
static float *lm_fill(long n, float v) {   /* stale values a kernel must overwrite */
    float *p = malloc((size_t)n * 4);
    assert_non_null(p);
    for (long i = 0; i < n; i++) p[i] = v;
    return p;
}

/* spec: Z-CUDA-009 Z-CUDA-003 bias, embeddings (forward and backward,
 * repeated tokens, B*T past the vocabulary, positions past T) */
static void test_lm_bias_embed_exact(void **state) {
    (void)state;
    const int B = 5, T = 41, C = 69, V = 37, P = 50;
    const long BT = (long)B * T;
    int *tok = malloc((size_t)BT * sizeof(int));
    assert_non_null(tok);
    for (long r = 0; r < BT; r++) tok[r] = (int)(next32() % V);
    float *wte = lm_rand((long)V * C, 0.25f), *wpe = lm_rand((long)P * C, 0.25f), *bias = lm_rand(C, 0.25f);
    float *g = lm_rand(BT * C, 0.25f), *stale_v = lm_fill((long)V * C, 5.0f), *stale_p = lm_fill((long)P * C, 5.0f);
    void *dtok[3], *dwte[3], *dwpe[3], *dbias[3], *dg[3], *dout[3], *dgwte[3], *dgwpe[3];
    lm_up(dtok, tok, (size_t)BT * sizeof(int));
    lm_up(dwte, wte, (size_t)V * C * 4); lm_up(dwpe, wpe, (size_t)P * C * 4); lm_up(dbias, bias, (size_t)C * 4);
    lm_up(dg, g, (size_t)BT * C * 4); lm_up(dout, NULL, (size_t)BT * C * 4);
    lm_up(dgwte, stale_v, (size_t)V * C * 4); lm_up(dgwpe, stale_p, (size_t)P * C * 4);
    for (int d = 0; d < 3; d++) {
        ZnDevice *dv = lm_devs[d];
        dv->k->lm->embed_fwd(dv, B, T, C, dtok[d], dwte[d], dwpe[d], dout[d]);
        dv->k->lm->add_bias(dv, (int)BT, C, dbias[d], dout[d]);
        dv->k->lm->embed_bwd(dv, B, T, C, V, P, dtok[d], dg[d], dgwte[d], dgwpe[d]);
    }
    lm_same(dout, BT * C, "embed_fwd + add_bias");
    lm_same(dgwte, (long)V * C, "embed_bwd dwte");
    lm_same(dgwpe, (long)P * C, "embed_bwd dwpe");
    lm_free(dtok); lm_free(dwte); lm_free(dwpe); lm_free(dbias); lm_free(dg); lm_free(dout);
    lm_free(dgwte); lm_free(dgwpe);
    free(tok); free(wte); free(wpe); free(bias); free(g); free(stale_v); free(stale_p);
    no_gpu_error(&gpu);
    no_gpu_error(&gpuf);
}

/* spec: Z-CUDA-009 Z-CUDA-003 LayerNorm forward and backward */
static void test_lm_layernorm_exact(void **state) {
    (void)state;
    const int sizes[3][2] = {{205, 69}, {67, 771}, {9, 1}};
    for (int s = 0; s < 3; s++) {
        const int N = sizes[s][0], C = sizes[s][1];
        const long NC = (long)N * C;
        float *x = lm_rand(NC, 0.5f), *w = lm_rand(C, 0.4f), *b = lm_rand(C, 0.1f), *g = lm_rand(NC, 0.25f);
        float *stale = lm_fill(NC, 3.0f);
        void *dx[3], *dw[3], *db[3], *dg[3], *out[3], *mean[3], *rstd[3], *gx[3], *gw[3], *gb[3];
        lm_up(dx, x, NC * 4); lm_up(dw, w, C * 4); lm_up(db, b, C * 4); lm_up(dg, g, NC * 4);
        lm_up(out, stale, NC * 4); lm_up(mean, stale, N * 4); lm_up(rstd, stale, N * 4);
        lm_up(gx, stale, NC * 4); lm_up(gw, stale, C * 4); lm_up(gb, stale, C * 4);
        for (int d = 0; d < 3; d++) {
            ZnDevice *dv = lm_devs[d];
            dv->k->lm->layernorm_fwd(dv, N, C, dx[d], dw[d], db[d], out[d], mean[d], rstd[d]);
            dv->k->lm->layernorm_bwd(dv, N, C, dg[d], dx[d], dw[d], mean[d], rstd[d], gx[d], gw[d], gb[d]);
        }
        lm_same(out, NC, "layernorm_fwd out");
        lm_same(mean, N, "layernorm_fwd mean");
        lm_same(rstd, N, "layernorm_fwd rstd");
        lm_same(gx, NC, "layernorm_bwd dx");
        lm_same(gw, C, "layernorm_bwd dw");
        lm_same(gb, C, "layernorm_bwd db");
        lm_free(dx); lm_free(dw); lm_free(db); lm_free(dg); lm_free(out); lm_free(mean); lm_free(rstd);
        lm_free(gx); lm_free(gw); lm_free(gb);
        free(x); free(w); free(b); free(g); free(stale);
    }
    no_gpu_error(&gpu);
    no_gpu_error(&gpuf);
}

/* spec: Z-CUDA-009 Z-CUDA-003 causal attention forward and backward: T
 * past the host's blocks of 64 queries and not a multiple of them, head
 * sizes 17 and 40, one to three heads, scores far apart (scale 3) */
static void test_lm_attention_exact(void **state) {
    (void)state;
    /* B, T, C, NH, scale of q, k, v */
    const int cases[4][5] = {{2, 7, 69, 3, 1}, {1, 131, 51, 3, 1}, {2, 67, 80, 2, 1}, {2, 45, 46, 2, 3}};
    for (int cs = 0; cs < 4; cs++) {
        const int B = cases[cs][0], T = cases[cs][1], C = cases[cs][2], NH = cases[cs][3];
        const long nq = (long)B * T * 3 * C, na = (long)B * NH * T * T, no = (long)B * T * C;
        float *qkv = lm_rand(nq, 0.4f * (float)cases[cs][4]), *g = lm_rand(no, 0.25f), *stale = lm_fill(nq > na ? nq : na, 3.0f);
        void *dqkv_in[3], *dg[3], *att[3], *out[3], *dqkv[3], *scratch[3];
        lm_up(dqkv_in, qkv, nq * 4); lm_up(dg, g, no * 4); lm_up(att, stale, na * 4); lm_up(out, stale, no * 4);
        lm_up(dqkv, stale, nq * 4); lm_up(scratch, stale, na * 4);
        for (int d = 0; d < 3; d++) {
            ZnDevice *dv = lm_devs[d];
            dv->k->lm->attn_fwd(dv, B, T, C, NH, dqkv_in[d], att[d], out[d]);
            dv->k->lm->attn_bwd(dv, B, T, C, NH, dg[d], dqkv_in[d], att[d], dqkv[d], scratch[d]);
        }
        lm_same(att, na, "attn_fwd att");
        lm_same(out, no, "attn_fwd out");
        lm_same(dqkv, nq, "attn_bwd dqkv");
        lm_free(dqkv_in); lm_free(dg); lm_free(att); lm_free(out); lm_free(dqkv); lm_free(scratch);
        free(qkv); free(g); free(stale);
    }
    no_gpu_error(&gpu);
    no_gpu_error(&gpuf);
}

/* spec: Z-CUDA-009 Z-CUDA-003 GELU forward and backward (in place too),
 * values past tanh's cut-off, zeros of both signs, infinities, NaN,
 * subnormals */
static void test_lm_gelu_exact(void **state) {
    (void)state;
    const long n = 100003;
    static const float odd[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 20.0f, -20.0f, 1e-30f, -3e-39f, 11.3f, -11.3f};
    float *x = lm_rand(n, 1.5f), *dy = lm_rand(n, 0.25f);
    for (long i = 0; i < n; i += 97) x[i] = odd[(i / 97) % 11];
    void *dx[3], *ddy[3], *y[3], *gx[3];
    lm_up(dx, x, n * 4); lm_up(ddy, dy, n * 4); lm_up(y, NULL, n * 4); lm_up(gx, NULL, n * 4);
    for (int d = 0; d < 3; d++) {
        ZnDevice *dv = lm_devs[d];
        dv->k->lm->gelu_fwd(dv, n, dx[d], y[d]);
        dv->k->lm->gelu_bwd(dv, n, dx[d], ddy[d], gx[d]);
        dv->k->lm->gelu_bwd(dv, n, dx[d], ddy[d], ddy[d]);   /* dx aliasing dy, as the engine calls it */
    }
    lm_same(y, n, "gelu_fwd");
    lm_same(gx, n, "gelu_bwd");
    lm_same(ddy, n, "gelu_bwd in place");
    lm_free(dx); lm_free(ddy); lm_free(y); lm_free(gx);
    free(x); free(dy);
    no_gpu_error(&gpu);
    no_gpu_error(&gpuf);
}

/* spec: Z-CUDA-002 */
static void test_accounting_equal(void **state) {
    (void)state;
    ZnDevice h, g;
    ZnErr err = {0};
    zn_device_host_init(&h);
    assert_int_equal(zn_device_cuda_init(&g, 0, 1, &err), 0);
    void *ph[16], *pg[16];
    for (int i = 0; i < 16; i++) {
        size_t n = (size_t)(i * 4099 + 1), acc = n / 2 + 1;
        ZnMemCat cat = (ZnMemCat)(i % ZN_MEM_NCAT);
        ph[i] = i % 2 ? zn_dev_alloc(&h, n, cat, &err) : zn_dev_alloc_as(&h, n, acc, cat, &err);
        pg[i] = i % 2 ? zn_dev_alloc(&g, n, cat, &err) : zn_dev_alloc_as(&g, n, acc, cat, &err);
        assert_non_null(ph[i]);
        assert_non_null(pg[i]);
        if (i % 3 == 2) { zn_dev_free(&h, ph[i - 1]); zn_dev_free(&g, pg[i - 1]); ph[i - 1] = pg[i - 1] = NULL; }
    }
    assert_memory_equal(&h.mem, &g.mem, sizeof h.mem);
    /* zero-filled */
    unsigned char *z = fetch(&g, pg[15], 15 * 4099 + 1);
    for (size_t i = 0; i < 15 * 4099 + 1; i++) assert_int_equal(z[i], 0);
    free(z);
    /* capacity: the shared check refuses, naming the category */
    g.capacity = g.mem.cur_total + 10;
    assert_null(zn_dev_alloc(&g, 11, ZN_MEM_GRADS, &err));
    assert_int_equal(err.code, ZN_E_NOMEM);
    for (int i = 0; i < 16; i++) { zn_dev_free(&h, ph[i]); zn_dev_free(&g, pg[i]); }
    assert_int_equal(g.mem.cur_total, 0);
    assert_int_equal(g.mem.nallocs, h.mem.nallocs);
    no_gpu_error(&g);
    zn_device_cuda_free(&g);
}

/* ---------------------------------------------- collectives on the GPU */

#define CW 3
#define CN 5003
/* use_gpu: each rank attaches a CUDA device, as the engine's ranks do;
   gpu_bufs: the collectives' buffers are on it (else host memory, as a
   loss or a norm is) */
typedef struct { ZnCudaSim *cs; int use_gpu, gpu_bufs; uint32_t out[CW][3]; } CollCtx;

static uint32_t hash(const void *p, size_t n) {
    const unsigned char *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

/* every rank: an fp32 all_reduce, an in-place bf16 reduce_scatter and an
 * fp16 all_gather, on GPU buffers (use_gpu) or host buffers */
static int coll_rank(int rank, ZnComm *c, void *arg, ZnErr *err) {
    CollCtx *cx = arg;
    ZnDevice d;
    int rc = 0;
    if (cx->use_gpu && ((rc = zn_device_cuda_init(&d, 0, 1, err)) || (rc = zn_cuda_sim_attach(cx->cs, rank, &d, err))))
        return rc;
    float a[CN];
    uint16_t b[CN], g16[CN];
    for (long i = 0; i < CN; i++) {
        a[i] = ((float)((i * 7919 + rank * 104729) % 2003) - 1001.0f) / 37.0f;
        b[i] = zn_f32_to_bf16(a[i] * 0.3f);
    }
    long counts[CW] = {1700, 0, CN - 1700}, off = rank == 2 ? 1700 : 0;
    for (long i = 0; i < counts[rank]; i++) g16[off + i] = zn_f32_to_f16(a[i]);
    void *da = a, *db = b, *dg = g16;
    if (cx->gpu_bufs) {
        da = dup_to(&d, a, sizeof a); db = dup_to(&d, b, sizeof b); dg = dup_to(&d, g16, sizeof g16);
    }
    rc = c->all_reduce(c, da, CN, ZN_F32, ZN_SUM, "a", err);
    if (!rc) rc = c->reduce_scatter(c, db, (uint16_t *)db + off, counts, ZN_BF16, ZN_SUM, "b", err);
    if (!rc) rc = c->all_gather(c, (uint16_t *)dg + off, dg, counts, ZN_F16, "g", err);
    if (cx->gpu_bufs) {
        if (!rc) {
            d.k->download(&d, a, da, sizeof a); d.k->download(&d, b, db, sizeof b); d.k->download(&d, g16, dg, sizeof g16);
        }
        zn_dev_free(&d, da); zn_dev_free(&d, db); zn_dev_free(&d, dg);
    }
    if (cx->use_gpu) {
        zn_cuda_sim_attach(cx->cs, rank, NULL, NULL);
        if (!rc) rc = zn_cuda_check(&d, err);
        zn_device_cuda_free(&d);
    }
    cx->out[rank][0] = hash(a, sizeof a);
    cx->out[rank][1] = hash(b + off, counts[rank] * 2);
    cx->out[rank][2] = hash(g16, sizeof g16);
    return rc;
}

/* ZeRO++'s quantizers (kernels/quant.cu; qwZ int8, qgZ int4) against
   core/quant.c on both tables: codes, scales and dequantized values bit for
   bit, for odd n, groups of unequal size, a group holding inf (its values
   dequantize to NaN) and a group of zeros. */
/* spec: Z-CUDA-003 Z-QNT-001 Z-QNT-007 */
static void test_quant_exact(void **state) {
    (void)state;
    const long ns[] = {1, 7, 4097, 65539};
    const long groups[] = {ZN_Q8_GROUP, ZN_Q4_GROUP, 64};
    for (int t = 0; t < 2; t++) {
        ZnDevice *g = t ? &gpuf : &gpu;
        for (int bits = 8; bits >= 4; bits -= 4)
            for (int ni = 0; ni < 4; ni++)
                for (int gi = 0; gi < 3; gi++) {
                    long n = ns[ni], G = groups[gi], ng = zn_quant_ngroups(n, G);
                    size_t qb = bits == 8 ? (size_t)n : (size_t)zn_q4_bytes(n);
                    float *x = malloc(n * 4);
                    fill(x, n);
                    if (n > 200) {
                        x[100] = INFINITY;   /* group 1 of G 64 */
                        for (long i = 128; i < 192; i++) x[i] = 0.0f;   /* group 2 of G 64 all zero */
                    }
                    ZnDevice *ds[2] = {&host, g};
                    void *q[2], *sc[2], *xin[2];
                    for (int s = 0; s < 2; s++) {
                        xin[s] = dup_to(ds[s], x, n * 4);
                        q[s] = dup_to(ds[s], NULL, qb);
                        sc[s] = dup_to(ds[s], NULL, ng * 4);
                        ds[s]->k->quant(ds[s], bits, xin[s], n, G, q[s], sc[s]);
                    }
                    unsigned char *hq = fetch(&host, q[0], qb), *gq = fetch(g, q[1], qb);
                    float *hs = fetch(&host, sc[0], ng * 4), *gs = fetch(g, sc[1], ng * 4);
                    same(hq, gq, qb, bits == 8 ? "quant8 codes" : "quant4 codes");
                    same(hs, gs, ng * 4, "quant scales");
                    for (int dt = 0; dt < 3; dt++) {
                        ZnDtype dty = dt == 0 ? ZN_F32 : dt == 1 ? ZN_F16 : ZN_BF16;
                        float *o[2];
                        for (int s = 0; s < 2; s++) {
                            o[s] = dup_to(ds[s], NULL, n * 4);
                            ds[s]->k->dequant(ds[s], bits, q[s], sc[s], n, G, dty, o[s]);
                        }
                        float *ho = fetch(&host, o[0], n * 4), *go = fetch(g, o[1], n * 4);
                        same(ho, go, n * 4, "dequant");
                        free(ho); free(go);
                        zn_dev_free(&host, o[0]); zn_dev_free(g, o[1]);
                    }
                    for (int s = 0; s < 2; s++) {
                        zn_dev_free(ds[s], xin[s]); zn_dev_free(ds[s], q[s]); zn_dev_free(ds[s], sc[s]);
                    }
                    free(hq); free(gq); free(hs); free(gs); free(x);
                }
        no_gpu_error(g);
    }
}

/* spec: Z-CUDA-006 Z-SIM-002 Z-SIM-003 */
static void test_collectives_on_gpu_match_sim(void **state) {
    (void)state;
    ZnErr err = {0};
    CollCtx ref = {0}, dev = {0};
    ZnSimWorld *w = zt_sim_world(CW);
    assert_int_equal(zn_sim_run(w, coll_rank, &ref, &err), 0);
    dev.cs = zn_cuda_sim_new(CW, &err);
    dev.use_gpu = dev.gpu_bufs = 1;
    assert_non_null(dev.cs);
    ZnSimMemOps ops;
    zn_cuda_sim_memops(dev.cs, &ops);
    zn_sim_world_set_memops(w, &ops);
    if (zn_sim_run(w, coll_rank, &dev, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(ref.out, dev.out, sizeof ref.out);
    /* host buffers still work with the CUDA memops (a loss, a norm), the
       ranks' devices attached as in the engine */
    CollCtx hostbufs = {.cs = dev.cs, .use_gpu = 1};
    assert_int_equal(zn_sim_run(w, coll_rank, &hostbufs, &err), 0);
    assert_memory_equal(ref.out, hostbufs.out, sizeof ref.out);
    zn_sim_world_free(w);
    zn_cuda_sim_free(dev.cs);
}

ZT_MAIN_GROUP(setup, teardown,
    cmocka_unit_test(test_elementwise_exact),
    cmocka_unit_test(test_reductions_exact),
    cmocka_unit_test(test_adam_exact),
    cmocka_unit_test(test_gemm_exact_and_fast),
    cmocka_unit_test(test_softmax_exact),
    cmocka_unit_test(test_lm_bias_embed_exact),
    cmocka_unit_test(test_lm_layernorm_exact),
    cmocka_unit_test(test_lm_attention_exact),
    cmocka_unit_test(test_lm_gelu_exact),
    cmocka_unit_test(test_accounting_equal),
    cmocka_unit_test(test_quant_exact),
    cmocka_unit_test(test_collectives_on_gpu_match_sim))
