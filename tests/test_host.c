/* test_host.c: the host kernels' instruction-set paths and threads (spec
 * Z-HOST-001..004): every path and every thread count gives the
 * reference twin's bits, element for element. */
#include "testutil.h"
#include "core/cpu.h"
#include "core/half.h"
#include "engine/optim.h"
#include "device/gemm_host.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* p, g, m, v of n elements from a fixed LCG, with the awkward values
 * sprinkled in: zeros of both signs, subnormals, huge, inf and NaN
 * gradients, v = 0. */
static void fill(long n, float *p, float *g, float *m, float *v, uint32_t seed) {
    static const float odd[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 3e38f, -3e38f, 1e-30f, 65504.0f};
    uint32_t s = seed;
    for (long i = 0; i < n; i++) {
        float u[4];
        for (int k = 0; k < 4; k++) {
            s = s * 1664525u + 1013904223u;
            u[k] = (float)(s >> 8) / 16777216.0f;
        }
        p[i] = 4.0f * u[0] - 2.0f;
        g[i] = (2.0f * u[1] - 1.0f) * (i % 97 == 0 ? 1e6f : 1.0f);
        m[i] = 0.1f * (2.0f * u[2] - 1.0f);
        v[i] = 1e-3f * u[3];
        if (i % 13 == 5) g[i] = odd[(i / 13) % 8];
        if (i % 17 == 3) p[i] = odd[(i / 17) % 8];
        if (i % 29 == 7) v[i] = 0.0f;
        if (i % 1009 == 11) g[i] = INFINITY;
        if (i % 1013 == 12) g[i] = NAN;
    }
}

/* spec: Z-HOST-001 every instruction-set path of the Adam step this CPU
 * runs gives the scalar reference's bits (p, m, v), Adam and AdamW, with
 * and without bias correction, gradient multipliers 1 and 0.37, an n that
 * is no multiple of any vector width */
static void test_adam_paths(void **st) {
    (void)st;
    const long n = 100003;
    float *in[4], *ref[4], *out[4];
    for (int k = 0; k < 4; k++) {
        in[k] = malloc(n * sizeof(float));
        ref[k] = malloc(n * sizeof(float));
        out[k] = malloc(n * sizeof(float));
        assert_true(in[k] && ref[k] && out[k]);
    }
    fill(n, in[0], in[1], in[2], in[3], 11u);
    const ZnAdamParams hps[3] = {{1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1},   /* AdamW */
                                 {3e-2, 0.8, 0.99, 1e-6, 0.1, 0, 1},     /* Adam, L2 decay */
                                 {1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 0}};   /* no bias correction */
    const float muls[2] = {1.0f, 0.37f};
    int paths = 0;
    for (int isa = ZN_ISA_SSE2; isa < ZN_ISA_N; isa++) {
        if (!zn_isa_supported((ZnIsa)isa)) continue;
        paths++;
        for (int h = 0; h < 3; h++)
            for (int mu = 0; mu < 2; mu++)
                for (long t = 1; t <= 3; t += 2) {
                    for (int k = 0; k < 4; k++) {
                        memcpy(ref[k], in[k], n * sizeof(float));
                        memcpy(out[k], in[k], n * sizeof(float));
                    }
                    zn_adam_step_isa(ZN_ISA_SCALAR, n, ref[0], ref[1], ref[2], ref[3], &hps[h], t, muls[mu]);
                    zn_adam_step_isa((ZnIsa)isa, n, out[0], out[1], out[2], out[3], &hps[h], t, muls[mu]);
                    for (int k = 0; k < 4; k++)
                        for (long i = 0; i < n; i++)
                            if (bits(out[k][i]) != bits(ref[k][i]))
                                fail_msg("%s, params %d, mul %g, step %ld: array %d element %ld is %08x, the "
                                         "reference %08x", zn_isa_name((ZnIsa)isa), h, (double)muls[mu], t, k, i,
                                         bits(out[k][i]), bits(ref[k][i]));
                }
    }
    assert_true(paths >= 1);   /* x86-64 has at least SSE2; elsewhere the scalar path is the only one */
    print_message("adam paths checked against the scalar reference: %d (best: %s)\n", paths,
                  zn_isa_name(zn_isa_best()));
    for (int k = 0; k < 4; k++) {
        free(in[k]);
        free(ref[k]);
        free(out[k]);
    }
}

/* spec: Z-HOST-003 the GEMM on every instruction-set path this CPU runs and
 * over 1, 2 and 3 threads gives the element-at-a-time definition's bits,
 * element for element: the three layouts the device uses (A.B^T with bias,
 * A.B, A^T.B), shapes that leave partial tiles in every direction and cross
 * the k-slice, row-block and column-block sizes of every kernel, and values
 * that overflow, cancel and carry NaN (a NaN result must be a NaN). */
static void test_gemm_paths(void **st) {
    (void)st;
    static const int shapes[][3] = {
        {1, 1, 1},    {5, 7, 3},     {6, 8, 256},  {7, 9, 257},  {12, 32, 128}, {13, 33, 129},
        {37, 45, 0},  {250, 70, 300}, {100, 257, 300}, {16, 2100, 70}, {245, 40, 517}, {3, 1030, 600},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * ((size_t)M * K + 1)), *B = malloc(sizeof(float) * ((size_t)N * K + 1));
        float *bias = malloc(sizeof(float) * (size_t)N), *ref = malloc(sizeof(float) * (size_t)M * N),
              *got = malloc(sizeof(float) * (size_t)M * N);
        assert_non_null(A); assert_non_null(B); assert_non_null(bias); assert_non_null(ref); assert_non_null(got);
        uint32_t x = 12345u + (uint32_t)s;
        for (long i = 0; i < (long)M * K; i++) {
            x = x * 1664525u + 1013904223u;
            A[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * (i % 11 == 0 ? 1e30f : 1.0f);
        }
        for (long i = 0; i < (long)N * K; i++) {
            x = x * 1664525u + 1013904223u;
            B[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * (i % 13 == 0 ? 1e20f : 1.0f);
            if (i % 997 == 5) B[i] = NAN;
        }
        for (int j = 0; j < N; j++) bias[j] = 0.25f * (float)(j % 7) - 0.5f;
        for (int layout = 0; layout < 3; layout++) {
            /* A(i,k) = A[i*sai + k*sak], B(k,j) = B[j*sbj + k*sbk] */
            long sai = K, sak = 1, sbj = K, sbk = 1;                   /* nt: A[M,K] . B[N,K]^T */
            if (layout == 1) { sbj = 1; sbk = N; }                     /* nn: A[M,K] . B[K,N] */
            if (layout == 2) { sai = 1; sak = M; sbj = 1; sbk = N; }   /* tn: A[K,M]^T . B[K,N] */
            const float *b = layout == 0 ? bias : NULL;
            zn_host_gemm_isa(ZN_ISA_SCALAR, 1, M, N, K, A, sai, sak, B, sbj, sbk, b, ref);
            for (int isa = 1; isa < ZN_ISA_N; isa++) {
                if (!zn_isa_supported((ZnIsa)isa)) continue;
                for (int T = 1; T <= 3; T++) {
                    memset(got, 0xff, sizeof(float) * (size_t)M * N);
                    zn_host_gemm_isa((ZnIsa)isa, T, M, N, K, A, sai, sak, B, sbj, sbk, b, got);
                    /* a NaN matches any NaN: which one (sign, payload) an
                       add of two NaNs returns follows the operand order the
                       compiler picked, in the definition as much as here */
                    for (long i = 0; i < (long)M * N; i++)
                        if (bits(got[i]) != bits(ref[i]) && !(isnan(got[i]) && isnan(ref[i])))
                            fail_msg("gemm %s T=%d layout %d %dx%dx%d element %ld: %a vs reference %a",
                                     zn_isa_name((ZnIsa)isa), T, layout, M, N, K, i, (double)got[i], (double)ref[i]);
                }
            }
        }
        free(A); free(B); free(bias); free(ref); free(got);
    }
}

/* zn_host_gemm_ldc (the attention's blocks of scores): rows of C at a
 * stride past N get the bits of the packed ldc = N GEMM, on every path and
 * thread count, and the columns past N keep what they held */
static void test_gemm_ldc(void **st) {
    (void)st;
    /* threads split the columns of the first, the rows of the second */
    static const int shapes[][4] = {{200, 150, 90, 161}, {1500, 20, 90, 29}};
    for (int sh = 0; sh < 2; sh++) {
        const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], ldc = shapes[sh][3];
        float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)N * K),
              *ref = malloc(sizeof(float) * (size_t)M * N), *got = malloc(sizeof(float) * (size_t)M * ldc);
        assert_non_null(A); assert_non_null(B); assert_non_null(ref); assert_non_null(got);
        uint32_t x = 777u;
        for (long i = 0; i < (long)M * K; i++) { x = x * 1664525u + 1013904223u; A[i] = (float)(x >> 8) / 16777216.0f - 0.5f; }
        for (long i = 0; i < (long)N * K; i++) { x = x * 1664525u + 1013904223u; B[i] = (float)(x >> 8) / 16777216.0f - 0.5f; }
        zn_host_gemm_isa(ZN_ISA_SCALAR, 1, M, N, K, A, K, 1, B, K, 1, NULL, ref);
        for (int isa = 0; isa < ZN_ISA_N; isa++) {
            if (!zn_isa_supported((ZnIsa)isa)) continue;
            for (int T = 1; T <= 3; T++) {
                for (long i = 0; i < (long)M * ldc; i++) got[i] = 9.0f;
                zn_host_gemm_ldc((ZnIsa)isa, T, M, N, K, A, K, 1, B, K, 1, NULL, got, ldc);
                for (long i = 0; i < M; i++)
                    for (long j = 0; j < ldc; j++) {
                        const float want = j < N ? ref[i * N + j] : 9.0f;
                        if (bits(got[i * ldc + j]) != bits(want))
                            fail_msg("gemm_ldc %s T=%d C[%ld][%ld]: %a vs %a", zn_isa_name((ZnIsa)isa), T, i, j,
                                     (double)got[i * ldc + j], (double)want);
                    }
            }
        }
        free(A); free(B); free(ref); free(got);
    }
}

/* spec: Z-HOST-004 the norm's two passes (largest finite |g| with the
 * inf/NaN flag; the fixed-point sum of squares) on every instruction-set
 * path give the bits of the plain definition, written out here: fabsf and
 * a float compare, and a 128-bit sum of each truncated g^2 * 2^shift. The
 * lengths leave partial blocks; the values include both zeros, subnormals,
 * the largest finite float, and (for the maximum) inf and NaN. */
static void test_norm_scans(void **st) {
    (void)st;
    static const long lens[] = {0, 1, 7, 1023, 1024, 1025, 5000, 70001};
    for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
        const long n = lens[c];
        float *g = malloc(sizeof(float) * (size_t)(n + 1)), *p = malloc(sizeof(float) * (size_t)(n + 1)),
              *m = malloc(sizeof(float) * (size_t)(n + 1)), *v = malloc(sizeof(float) * (size_t)(n + 1));
        assert_non_null(g); assert_non_null(p); assert_non_null(m); assert_non_null(v);
        fill(n, p, g, m, v, 99u + (uint32_t)c);   /* g with inf and NaN sprinkled in */
        for (int finite = 0; finite < 2; finite++) {
            if (finite)
                for (long i = 0; i < n; i++) if (!isfinite(g[i])) g[i] = (i & 1) ? -3.4028235e38f : 1e-45f;
            float want = 0.0f;
            int nonfin = 0;
            for (long i = 0; i < n; i++) {
                float a = fabsf(g[i]);
                if (!isfinite(a)) nonfin = 1;
                else if (a > want) want = a;
            }
            for (int isa = 0; isa < ZN_ISA_N; isa++) {
                if (!zn_isa_supported((ZnIsa)isa)) continue;
                ZnAbsMax am = zn_absmax_isa((ZnIsa)isa, g, n);
                if (bits(am.maxabs) != bits(want) || am.nonfinite != nonfin)
                    fail_msg("absmax %s n=%ld: %a/%d vs %a/%d", zn_isa_name((ZnIsa)isa), n, (double)am.maxabs,
                             am.nonfinite, (double)want, nonfin);
            }
            if (!finite) continue;
            const int shift = zn_norm_shift(want);
            const double scale = ldexp(1.0, shift);
            unsigned __int128 ref = (unsigned __int128)7 << 64 | 5;   /* the sum adds into what (hi, lo) hold */
            for (long i = 0; i < n; i++) ref += (uint64_t)((double)g[i] * (double)g[i] * scale);
            for (int isa = 0; isa < ZN_ISA_N; isa++) {
                if (!zn_isa_supported((ZnIsa)isa)) continue;
                uint64_t hi = 7, lo = 5;
                zn_sumsq_fixed_isa((ZnIsa)isa, g, n, shift, &hi, &lo);
                if (hi != (uint64_t)(ref >> 64) || lo != (uint64_t)ref)
                    fail_msg("sumsq %s n=%ld: %016llx%016llx vs %016llx%016llx", zn_isa_name((ZnIsa)isa), n,
                             (unsigned long long)hi, (unsigned long long)lo, (unsigned long long)(ref >> 64),
                             (unsigned long long)ref);
            }
        }
        free(g); free(p); free(m); free(v);
    }
}

/* spec: Z-HOST-004 the host device's norm passes split over 2, 3 and 7
 * threads give the one-thread result: the same maximum, the same flag, the
 * same 128-bit sum (added into what (hi, lo) held) */
static void test_norm_threads(void **st) {
    (void)st;
    const long n = 200003;
    float *p = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n), *m = malloc(sizeof(float) * n),
          *v = malloc(sizeof(float) * n);
    assert_non_null(p); assert_non_null(g); assert_non_null(m); assert_non_null(v);
    fill(n, p, g, m, v, 4242u);
    ZnDevice d;
    zn_device_host_init(&d);
    zn_set_host_threads(1);
    ZnAbsMax want = zn_host_kernels.absmax(&d, g, n);   /* with inf and NaN: flagged */
    ZnAbsMax want_p = zn_host_kernels.absmax(&d, p, n);
    assert_int_equal(want.nonfinite, 1);
    uint64_t wh = 3, wl = ~0ull;   /* a carry out of lo on the first add */
    zn_host_kernels.sumsq_fixed(&d, p, n, zn_norm_shift(want_p.maxabs), &wh, &wl);
    static const int threads[] = {2, 3, 7};
    for (int t = 0; t < 3; t++) {
        zn_set_host_threads(threads[t]);
        ZnAbsMax a = zn_host_kernels.absmax(&d, g, n), b = zn_host_kernels.absmax(&d, p, n);
        assert_int_equal(a.nonfinite, 1);
        assert_int_equal(bits(a.maxabs), bits(want.maxabs));
        assert_int_equal(b.nonfinite, want_p.nonfinite);
        assert_int_equal(bits(b.maxabs), bits(want_p.maxabs));
        uint64_t h = 3, l = ~0ull;
        zn_host_kernels.sumsq_fixed(&d, p, n, zn_norm_shift(want_p.maxabs), &h, &l);
        assert_true(h == wh && l == wl);
    }
    zn_set_host_threads(0);
    free(p); free(g); free(m); free(v);
}

/* spec: Z-HOST-002 the host device's Adam split over 2, 3 and 7 threads
 * gives the one-thread bits in p, m, v and the fp16/bf16 working copy */
static void test_adam_threads(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const long n = 300001;   /* above the split threshold, no multiple of the block */
    float *a[5], *b[5];
    for (int k = 0; k < 5; k++) {
        a[k] = malloc(n * sizeof(float));
        b[k] = malloc(n * sizeof(float));
        assert_true(a[k] && b[k]);
    }
    const ZnAdamParams hp = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1};
    const ZnDtype dts[3] = {ZN_F32, ZN_F16, ZN_BF16};
    const int Ts[3] = {2, 3, 7};
    for (int di = 0; di < 3; di++)
        for (int ti = 0; ti < 3; ti++) {
            fill(n, a[0], a[1], a[2], a[3], 5u + (uint32_t)di);
            for (int k = 0; k < 4; k++) memcpy(b[k], a[k], n * sizeof(float));
            float *wa = di ? a[4] : NULL, *wb = di ? b[4] : NULL;
            zn_set_host_threads(1);
            zn_host_kernels.adam(&d, n, a[0], a[1], a[2], a[3], &hp, 2, 0.5f, wa, dts[di]);
            zn_set_host_threads(Ts[ti]);
            assert_int_equal(zn_host_threads(), Ts[ti]);
            zn_host_kernels.adam(&d, n, b[0], b[1], b[2], b[3], &hp, 2, 0.5f, wb, dts[di]);
            for (int k = 0; k < (di ? 5 : 4); k++)
                if (memcmp(a[k], b[k], n * sizeof(float)))
                    fail_msg("dtype %d, %d threads: array %d differs from one thread's", di, Ts[ti], k);
        }
    zn_set_host_threads(0);
    for (int k = 0; k < 5; k++) {
        free(a[k]);
        free(b[k]);
    }
}

/* spec: Z-HOST-002 thread counts: 1..256, anything else refused by name */
static void test_thread_setting(void **st) {
    (void)st;
    ZnErr err;
    int n = 0;
    assert_int_equal(zn_parse_threads("--threads", "8", &n, &err), 0);
    assert_int_equal(n, 8);
    assert_int_equal(zn_parse_threads("--threads", "256", &n, &err), 0);
    const char *bad[] = {"0", "257", "-1", "", "4x", " 4", "99999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(zn_parse_threads("ZINC_NUM_THREADS", bad[i], &n, &err), ZN_E_USAGE);
        char want[120];
        snprintf(want, sizeof want, "ZINC_NUM_THREADS: expected a thread count in 1..256, got '%s'", bad[i]);
        assert_string_equal(err.msg, want);
    }
    zn_set_host_threads(0);
    unsetenv("ZINC_NUM_THREADS");
    assert_int_equal(zn_host_threads(), 1);
    setenv("ZINC_NUM_THREADS", "3", 1);
    assert_int_equal(zn_host_threads(), 3);
    zn_set_host_threads(5);   /* the flag wins over the environment */
    assert_int_equal(zn_host_threads(), 5);
    zn_set_host_threads(0);
    unsetenv("ZINC_NUM_THREADS");
    assert_string_equal(zn_isa_name(ZN_ISA_AVX512), "avx512");
    assert_string_equal(zn_isa_name(ZN_ISA_N), "?");
    assert_true(zn_isa_supported(ZN_ISA_SCALAR));
    assert_true(zn_isa_supported(zn_isa_best()));
}

ZT_MAIN(
    cmocka_unit_test(test_adam_paths),
    cmocka_unit_test(test_adam_threads),
    cmocka_unit_test(test_gemm_paths),
    cmocka_unit_test(test_gemm_ldc),
    cmocka_unit_test(test_norm_scans),
    cmocka_unit_test(test_norm_threads),
    cmocka_unit_test(test_thread_setting))
