/* test_quant.c: block quantization of src/core/quant.h (spec Z-QNT-001..007),
 * the int8 codes of ZeRO++'s qwZ and the int4 codes of its qgZ. Hand-worked
 * groups check the definition; random tensors of fp32, fp16 and bf16 values
 * check the error bounds, with the group's absmax and the errors computed
 * here in double, independently of quant.h. */
#include "testutil.h"
#include <fenv.h>
#include "core/quant.h"
#include "core/rng.h"

/* ------------------------------------------------------------- helpers */

/* Half an ulp of v in dtype dt (0 for fp32, which is not rounded): the
   spacing of v's binade, the subnormal spacing below the normal range. */
static double half_ulp(float v, ZnDtype dt) {
    if (dt == ZN_F32) return 0.0;
    const int mant = dt == ZN_F16 ? 10 : 7, emin = dt == ZN_F16 ? -14 : -126;
    int e = emin + 1;
    if (v != 0.0f) frexp(fabs((double)v), &e);   /* |v| = m 2^e, m in [0.5, 1) */
    int be = e - 1 < emin ? emin : e - 1;
    return ldexp(1.0, be - mant - 1);
}

static float round_to(float v, ZnDtype dt) {
    return dt == ZN_F16 ? zn_round_f16(v) : dt == ZN_BF16 ? zn_round_bf16(v) : v;
}

/* The bounds of Z-QNT-003/004 for codes with `half` = 128 or 8. */
typedef struct {
    double half, rel, rel_clamp, abs;
} Bound;
static const Bound B8 = {128.0, 0x1p-14, 0x1p-17, 0x1p-142};
static const Bound B4 = {8.0, 0x1p-18, 0x1p-21, 0x1p-146};

/* Checks one quantize + dequantize round trip of x[n] (groups of at most G)
   against the bound, element by element, and the scales against A / half.
   Returns the largest error seen as a fraction of A / (2 half), the
   rounding bound, so a caller can check the bound is nearly reached. */
static double check_bound(const float *x, const float *xr, const float *scales, long n, long G, Bound b,
                          ZnDtype dt) {
    long ng = zn_quant_ngroups(n, G);
    double worst = 0.0;
    for (long g = 0; g < ng; g++) {
        long lo = zn_quant_group_start(n, ng, g), hi = zn_quant_group_start(n, ng, g + 1);
        double A = 0.0;
        for (long i = lo; i < hi; i++) A = fmax(A, fabs((double)x[i]));
        if (A == 0.0) {
            assert_true(scales[g] == 0.0f);
            continue;
        }
        assert_true(zt_same_bits(scales[g], (float)A / (float)b.half));
        for (long i = lo; i < hi; i++) {
            double err = fabs((double)x[i] - (double)xr[i]);
            double y = (double)x[i] * b.half / A;   /* the exact code before rounding */
            double lim = y < b.half - 0.5 ? A / (2 * b.half) * (1 + b.rel) : A / b.half * (1 + b.rel_clamp);
            lim += b.abs + half_ulp(xr[i], dt);
            if (!(err <= lim))
                fail_msg("element %ld: x %.9g -> %.9g, error %.9g > bound %.9g (A %.9g, %s)", i, x[i], xr[i], err,
                         lim, A, zn_dtype_name(dt));
            if (y < b.half - 0.5 && dt == ZN_F32) worst = fmax(worst, err / (A / (2 * b.half)));
        }
    }
    return worst;
}

/* n values of dtype dt (fp32 holding them) with magnitudes up to mag; a
   quarter of them scaled down by up to 2^-39, so groups hold values far
   below their absmax too. Counter-based, so each call is reproducible. */
static void random_values(float *x, long n, float mag, ZnDtype dt, uint64_t key) {
    for (long i = 0; i < n; i++) {
        float v = (2.0f * zn_rng_uniform(key, 2 * (uint64_t)i) - 1.0f) * mag;
        uint64_t r = zn_rng_u64(key, 2 * (uint64_t)i + 1);
        if (r % 4 == 0) v = ldexpf(v, -(int)((r >> 8) % 40));
        x[i] = round_to(v, dt);
    }
}

/* -------------------------------------------------------------- groups */

/* spec: Z-QNT-001 ng = ceil(n / G) groups, sizes differing by at most one
   (the first n % ng longer), starts covering [0, n), any n */
static void test_group_rule(void **st) {
    (void)st;
    const long ns[] = {0, 1, 7, 7999, 8000, 8001, 16001, 100000};
    const long gs[] = {ZN_Q8_GROUP, ZN_Q4_GROUP};
    for (size_t k = 0; k < sizeof gs / sizeof gs[0]; k++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            long n = ns[j], G = gs[k], ng = zn_quant_ngroups(n, G);
            assert_int_equal(ng, (n + G - 1) / G);
            assert_int_equal(zn_quant_group_start(n, ng, 0), 0);
            assert_int_equal(zn_quant_group_start(n, ng, ng), n);
            long smin = n, smax = 0;
            for (long g = 0; g < ng; g++) {
                long a = zn_quant_group_start(n, ng, g), b = zn_quant_group_start(n, ng, g + 1);
                long size = b - a;
                assert_true(size >= 1 && size <= G);
                assert_int_equal(size, n / ng + (g < n % ng));
                smin = size < smin ? size : smin;
                smax = size > smax ? size : smax;
                for (long i = a; i < b; i++) assert_int_equal(zn_quant_group_of(n, ng, i), g);
            }
            if (ng) assert_true(smax - smin <= 1);
        }
    /* worked cases: 8001 = 4001 + 4000, 16001 = 5334 + 5334 + 5333 */
    assert_int_equal(zn_quant_ngroups(8001, 8000), 2);
    assert_int_equal(zn_quant_group_start(8001, 2, 1), 4001);
    assert_int_equal(zn_quant_ngroups(16001, 8000), 3);
    assert_int_equal(zn_quant_group_start(16001, 3, 1), 5334);
    assert_int_equal(zn_quant_group_start(16001, 3, 2), 10668);
    assert_int_equal(zn_quant_ngroups(1000, 512), 2);   /* 500 + 500, not 512 + 488 */
    assert_int_equal(zn_quant_group_start(1000, 2, 1), 500);
    /* a group size below 1 counts as 1; negative n has no groups */
    assert_int_equal(zn_quant_ngroups(5, 0), 5);
    assert_int_equal(zn_quant_ngroups(-3, 8), 0);
}

/* ----------------------------------------------------------- int8 by hand */

/* spec: Z-QNT-002 int8 codes and scales worked by hand: 128/A, round half
   to even, the clamp at +A, -A to -128 */
static void test_q8_by_hand(void **st) {
    (void)st;
    /* A = 128: the multiplier is 1, so the codes are x rounded; ties go to
       the even neighbour; 127.5 would round to 128 and clamps to 127 */
    const float x[] = {-128.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, -1.5f, 127.5f};
    const int8_t want[] = {-128, 2, 4, -2, 0, 0, -2, 127};
    int8_t q[8];
    float s[1], out[8];
    zn_quant8(x, 8, 8, q, s);
    assert_memory_equal(q, want, 8);
    assert_true(s[0] == 1.0f);
    zn_dequant8(q, s, 8, 8, ZN_F32, out);
    for (int i = 0; i < 8; i++) assert_true(out[i] == (float)want[i]);
    /* A = 3: 128/3 = 42.666668f; 1 -> 42.67 -> 43; -1.5 -> -64.0000019,
       which rounds to -64.0f; 3 -> 128.0000038 -> 128.0f -> clamp 127 */
    const float y[] = {3.0f, 1.0f, -1.5f};
    const int8_t wy[] = {127, 43, -64};
    zn_quant8(y, 3, 8000, q, s);
    assert_memory_equal(q, wy, 3);
    assert_true(s[0] == 3.0f / 128.0f);
    zn_dequant8(q, s, 3, 8000, ZN_F32, out);
    assert_true(out[0] == 127.0f * 3.0f / 128.0f);   /* the clamp: off by A/128 */
    assert_true(out[1] == 43.0f * (3.0f / 128.0f));
    assert_true(out[2] == -1.5f);                      /* -64 * 3/128 exactly */
}

/* spec: Z-QNT-002 an all-zero group has scale 0 and codes 0; a group with
   NaN or inf has codes 0 and scale NaN, so it dequantizes to NaN while the
   other groups are untouched */
static void test_q8_zero_and_nonfinite_groups(void **st) {
    (void)st;
    /* n = 10, G = 4: three groups of 4, 3, 3 */
    float x[10] = {1.0f, -2.0f, 0.5f, 4.0f, 0.0f, -0.0f, 0.0f, 1.0f, NAN, 2.0f};
    int8_t q[10];
    float s[3], out[10];
    memset(q, 0x55, sizeof q);
    zn_quant8(x, 10, 4, q, s);
    const int8_t want[10] = {32, -64, 16, 127, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(q, want, 10);
    assert_true(s[0] == 0.03125f);
    assert_true(zt_same_bits(s[1], 0.0f));
    assert_true(isnan(s[2]));
    zn_dequant8(q, s, 10, 4, ZN_BF16, out);
    const float first[4] = {1.0f, -2.0f, 0.5f, 3.96875f};
    for (int i = 0; i < 4; i++) assert_true(out[i] == first[i]);
    for (int i = 4; i < 7; i++) assert_true(out[i] == 0.0f);
    for (int i = 7; i < 10; i++) assert_true(isnan(out[i]));   /* the whole group, 1 and 2 too */
    /* the NaN is the NAN constant's bits whatever the scale's payload (a
       product would keep it on x86; a GPU gives 0x7fffffff), int8 and int4 */
    {
        uint32_t odd = 0xffc01234u, nanbits = 0x7fc00000u, got;
        float s2[3] = {s[0], s[1], 0.0f};
        memcpy(&s2[2], &odd, 4);
        zn_dequant8(q, s2, 10, 4, ZN_F32, out);
        for (int i = 7; i < 10; i++) { memcpy(&got, &out[i], 4); assert_int_equal(got, nanbits); }
        uint8_t q4[5] = {0};
        zn_dequant4(q4, s2, 10, 4, ZN_F32, out);
        for (int i = 7; i < 10; i++) { memcpy(&got, &out[i], 4); assert_int_equal(got, nanbits); }
    }
    /* inf (an fp16 overflow in a gradient) and -inf do the same */
    for (int sign = -1; sign <= 1; sign += 2) {
        x[8] = sign * INFINITY;
        zn_quant8(x, 10, 4, q, s);
        assert_memory_equal(q, want, 10);
        assert_true(isnan(s[2]));
        assert_true(s[0] == 0.03125f);
        zn_dequant8(q, s, 10, 4, ZN_F16, out);
        for (int i = 7; i < 10; i++) assert_true(isnan(out[i]));
        for (int i = 0; i < 4; i++) assert_true(out[i] == first[i]);
    }
    /* NaN after an inf, and inf after a NaN, still make a NaN scale */
    const float mix[2][3] = {{INFINITY, NAN, 1.0f}, {NAN, -INFINITY, 1.0f}};
    for (int k = 0; k < 2; k++) {
        assert_true(isnan(zn_q_absmax(mix[k], 3)));
        zn_quant8(mix[k], 3, 3, q, s);
        assert_true(isnan(s[0]));
    }
}

/* spec: Z-QNT-002 rounding to an integer is the same in every FPU rounding
   mode (truncation and exact comparisons, not rintf) */
static void test_rne_independent_of_rounding_mode(void **st) {
    (void)st;
    /* volatile: the calls run under each mode, not folded at compile time */
    static volatile float y[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 0.50000006f,
                       -127.5f, 126.5f, 7.5f, -8.5f, 3.2f, -3.7f, 0.0f, -0.0f};
    const int want[] = {0, 2, 2, 0, -2, -2, 0, 1, -128, 126, 8, -8, 3, -4, 0, 0};
    static const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO, FE_TONEAREST};
    for (int m = 0; m < 4; m++) {
        assert_int_equal(fesetround(modes[m]), 0);
        for (size_t i = 0; i < sizeof y / sizeof y[0]; i++) assert_int_equal(zn_q_rne(y[i]), want[i]);
    }
    fesetround(FE_TONEAREST);
}

/* ----------------------------------------------------------- int8 bounds */

/* spec: Z-QNT-003 -A quantizes to -128 and comes back exactly; +A clamps to
   127 and comes back A/128 low, within A/128 (1 + 2^-17) */
static void test_q8_absmax_elements(void **st) {
    (void)st;
    for (uint64_t k = 0; k < 2000; k++) {
        /* A anywhere from 2^-100 to 2^100, a second element below it */
        float A = ldexpf(1.0f + zn_rng_uniform(7, k), (int)(zn_rng_u64(8, k) % 201) - 100);
        float x[2] = {-A, A * zn_rng_uniform(9, k)}, out[2], s;
        int8_t q[2];
        zn_quant8(x, 2, 2, q, &s);
        assert_int_equal(q[0], -128);
        zn_dequant8(q, &s, 2, 2, ZN_F32, out);
        assert_true(out[0] == -A);
        x[0] = A;
        zn_quant8(x, 2, 2, q, &s);
        assert_int_equal(q[0], 127);
        zn_dequant8(q, &s, 2, 2, ZN_F32, out);
        double err = (double)A - out[0];
        assert_true(err >= A / 128.0 * (1 - 0x1p-17) && err <= A / 128.0 * (1 + 0x1p-17));
    }
}

/* spec: Z-QNT-003 |x - x^| <= A/256 (1 + 2^-14) below the clamp and
   A/128 (1 + 2^-17) at it, over random fp32, fp16 and bf16 tensors from
   subnormal to 3e38 */
/* spec: Z-QNT-006 the same with x^ rounded to the model dtype: plus half an
   ulp of the result */
static void test_q8_error_bound_random(void **st) {
    (void)st;
    const struct { ZnDtype dt; float mag[6]; } cases[] = {
        {ZN_F32, {1.0f, 1e-20f, 3e38f, 1e-40f, 1e-44f, 7.0f}},
        {ZN_F16, {1.0f, 1e-3f, 65504.0f, 1e-6f, 3e-7f, 300.0f}},
        {ZN_BF16, {1.0f, 1e30f, 1e-30f, 3e38f, 1e-39f, 0.01f}},
    };
    const long n = 20011, G[] = {ZN_Q8_GROUP, 100};
    float *x = malloc(n * sizeof *x), *out = malloc(n * sizeof *out), *sc = malloc(n * sizeof *sc);
    int8_t *q = malloc(n);
    assert_true(x && out && sc && q);
    for (int c = 0; c < 3; c++)
        for (int m = 0; m < 6; m++)
            for (int k = 0; k < 2; k++) {
                random_values(x, n, cases[c].mag[m], cases[c].dt, 100 * c + m);
                zn_quant8(x, n, G[k], q, sc);
                zn_dequant8(q, sc, n, G[k], cases[c].dt, out);
                double worst = check_bound(x, out, sc, n, G[k], B8, cases[c].dt);
                /* fp32, normal range: the bound is nearly reached, so a
                   code off by one would have failed it */
                if (cases[c].dt == ZN_F32 && cases[c].mag[m] >= 1e-30f) assert_true(worst > 0.99);
                zn_dequant8(q, sc, n, G[k], ZN_F32, out);   /* unrounded, its own bound */
                check_bound(x, out, sc, n, G[k], B8, ZN_F32);
            }
    free(x), free(out), free(sc), free(q);
}

/* spec: Z-QNT-003 elements one ulp off a rounding midpoint (c + 1/2) A/128
   hold the bound, and some of them exceed A/256 by more than 2^-20 of it:
   the fp32 multiplier, product and dequantization each round, so the
   slack is needed (measured about 2^-15.2, bound 2^-14) */
/* spec: Z-QNT-004 the same for int4 (measured about 2^-19.2, bound 2^-18) */
static void test_bound_near_midpoints(void **st) {
    (void)st;
    const Bound bs[2] = {B8, B4};
    for (int b = 0; b < 2; b++) {
        const int qmax = (int)bs[b].half - 1;
        double worst = 0.0;
        for (uint64_t k = 0; k < 200000; k++) {
            float A = 1.0f + zn_rng_uniform(11, k);   /* a full-width mantissa */
            int c = (int)(zn_rng_u64(12, k) % (uint64_t)(2 * qmax)) - qmax;
            float x[2] = {A, nextafterf((c + 0.5f) * A / (float)bs[b].half, (k & 1) ? 10.0f : -10.0f)};
            float out[2], s;
            int8_t q8[2];
            uint8_t q4;
            if (b == 0) {
                zn_quant8(x, 2, 2, q8, &s);
                zn_dequant8(q8, &s, 2, 2, ZN_F32, out);
            } else {
                zn_quant4(x, 2, 2, &q4, &s);
                zn_dequant4(&q4, &s, 2, 2, ZN_F32, out);
            }
            check_bound(x, out, &s, 2, 2, bs[b], ZN_F32);
            worst = fmax(worst, fabs((double)x[1] - out[1]) / (A / (2 * bs[b].half)));
        }
        assert_true(worst > 1 + (b == 0 ? 0x1p-20 : 0x1p-21));
        assert_true(worst <= 1 + bs[b].rel);
    }
}

/* spec: Z-QNT-003 a subnormal absmax gets the same codes as the group
   scaled by 2^100 (the 2^64 lift is exact) and stays within the bound */
static void test_q8_subnormal_absmax(void **st) {
    (void)st;
    float x[64], big[64], out[64], s, sb;
    int8_t q[64], qb[64];
    for (int k = 0; k < 200; k++) {
        random_values(x, 64, ldexpf(1.0f, -127 - k % 22), ZN_F32, 900 + k);
        for (int i = 0; i < 64; i++) big[i] = ldexpf(x[i], 100);
        zn_quant8(x, 64, 64, q, &s);
        zn_quant8(big, 64, 64, qb, &sb);
        assert_memory_equal(q, qb, 64);
        zn_dequant8(q, &s, 64, 64, ZN_F32, out);
        float A = zn_q_absmax(x, 64);
        assert_true(isfinite(s) && s <= A);
        for (int i = 0; i < 64; i++)
            assert_true(fabs((double)x[i] - out[i]) <= (double)A / 128.0 * (1 + 0x1p-17) + 0x1p-142);
        check_bound(x, out, &s, 64, 64, B8, ZN_F32);
    }
    /* the smallest subnormal: codes 127 and -128, the scale underflows to 0 */
    const float t[2] = {0x1p-149f, -0x1p-149f};
    zn_quant8(t, 2, 2, q, &s);
    assert_int_equal(q[0], 127);
    assert_int_equal(q[1], -128);
    assert_true(s == 0.0f);
}

/* ------------------------------------------------------------------ int4 */

/* spec: Z-QNT-004 int4 codes worked by hand: 8/A, ties to even, +A clamps
   to 7, -A is -8 */
/* spec: Z-QNT-005 the packed bytes: element 2i low nibble, 2i+1 high, two's
   complement; an odd n leaves the last high nibble 0 */
static void test_q4_by_hand(void **st) {
    (void)st;
    const float x[7] = {-8.0f, 7.0f, 3.5f, -3.5f, 8.0f, 0.49f, -1.0f};
    const int want[7] = {-8, 7, 4, -4, 7, 0, -1};
    const uint8_t bytes[4] = {0x78, 0xC4, 0x07, 0x0F};
    uint8_t q[4];
    float s, out[7];
    memset(q, 0xAA, sizeof q);
    zn_quant4(x, 7, 7, q, &s);
    assert_int_equal(zn_q4_bytes(7), 4);
    assert_memory_equal(q, bytes, 4);
    assert_true(s == 1.0f);
    for (int i = 0; i < 7; i++) assert_int_equal(zn_q4_get(q, i), want[i]);
    zn_dequant4(q, &s, 7, 7, ZN_F32, out);
    for (int i = 0; i < 7; i++) assert_true(out[i] == (float)want[i]);
    /* n = 7, G = 3: groups of 3, 2, 2, so byte 1 holds elements of two
       groups; A = 1 (8/A = 8), A = 2 (8/A = 4), an all-zero group */
    const float y[7] = {1.0f, -1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 0.0f};
    const uint8_t ybytes[4] = {0x87, 0x74, 0x0C, 0x00};
    const float ys[3] = {0.125f, 0.25f, 0.0f}, yout[7] = {0.875f, -1.0f, 0.5f, 1.75f, -1.0f, 0.0f, 0.0f};
    float s3[3];
    memset(q, 0xAA, sizeof q);
    zn_quant4(y, 7, 3, q, s3);
    assert_memory_equal(q, ybytes, 4);
    assert_memory_equal(s3, ys, sizeof ys);
    zn_dequant4(q, s3, 7, 3, ZN_F32, out);
    assert_memory_equal(out, yout, sizeof yout);
    /* a NaN group: NaN out for that group only */
    const float z[4] = {1.0f, 0.5f, INFINITY, 1.0f};
    zn_quant4(z, 4, 2, q, s3);
    assert_int_equal(q[0], 0x47);   /* 1 -> 8 clamps to 7, 0.5 -> 4 */
    assert_int_equal(q[1], 0x00);
    assert_true(isnan(s3[1]));
    zn_dequant4(q, s3, 4, 2, ZN_BF16, out);
    assert_true(out[0] == 0.875f && out[1] == 0.5f && isnan(out[2]) && isnan(out[3]));
}

/* spec: Z-QNT-005 every nibble value round-trips through the packing, in
   both halves of a byte */
static void test_q4_nibbles(void **st) {
    (void)st;
    for (int lo = -8; lo <= 7; lo++)
        for (int hi = -8; hi <= 7; hi++) {
            uint8_t b = (uint8_t)(zn_q4_nibble(lo) | (zn_q4_nibble(hi) << 4));
            assert_int_equal(zn_q4_get(&b, 0), lo);
            assert_int_equal(zn_q4_get(&b, 1), hi);
        }
    assert_int_equal(zn_q4_bytes(0), 0);
    assert_int_equal(zn_q4_bytes(1), 1);
    assert_int_equal(zn_q4_bytes(8), 4);
}

/* spec: Z-QNT-004 |x - x^| <= A/16 (1 + 2^-18) below the clamp and
   A/8 (1 + 2^-21) at it, over random fp32, fp16 and bf16 tensors */
/* spec: Z-QNT-006 and with x^ rounded to the model dtype, plus half an ulp */
static void test_q4_error_bound_random(void **st) {
    (void)st;
    const struct { ZnDtype dt; float mag[5]; } cases[] = {
        {ZN_F32, {1.0f, 1e-20f, 3e38f, 1e-40f, 5.0f}},
        {ZN_F16, {1.0f, 1e-3f, 65504.0f, 1e-6f, 30.0f}},
        {ZN_BF16, {1.0f, 1e30f, 1e-30f, 3e38f, 1e-39f}},
    };
    const long n = 10001, G[] = {ZN_Q4_GROUP, 33};
    float *x = malloc(n * sizeof *x), *out = malloc(n * sizeof *out), *sc = malloc(n * sizeof *sc);
    uint8_t *q = malloc(zn_q4_bytes(n));
    assert_true(x && out && sc && q);
    for (int c = 0; c < 3; c++)
        for (int m = 0; m < 5; m++)
            for (int k = 0; k < 2; k++) {
                random_values(x, n, cases[c].mag[m], cases[c].dt, 500 + 10 * c + m);
                zn_quant4(x, n, G[k], q, sc);
                for (long i = 0; i < n; i++) assert_true(zn_q4_get(q, i) >= -8 && zn_q4_get(q, i) <= 7);
                assert_int_equal(q[n / 2] >> 4, 0);   /* n odd: last high nibble 0 */
                zn_dequant4(q, sc, n, G[k], cases[c].dt, out);
                double worst = check_bound(x, out, sc, n, G[k], B4, cases[c].dt);
                if (cases[c].dt == ZN_F32 && cases[c].mag[m] >= 1e-30f) assert_true(worst > 0.99);
            }
    free(x), free(out), free(sc), free(q);
}

/* -------------------------------------------------------------- dtypes */

/* spec: Z-QNT-006 bf16 values above fp16's 65504 are quantized from their
   fp32 form: a group of 1e30s keeps a finite scale and comes back finite
   (an fp16 cast, DeepSpeed issues #4852 and #7775, would make them inf) */
static void test_bf16_huge(void **st) {
    (void)st;
    float x[5] = {-1e30f, 7e29f, -3e29f, 1e25f, 65536.0f}, out[5], s;
    for (int i = 0; i < 5; i++) x[i] = zn_round_bf16(x[i]);
    assert_true(isinf(zn_round_f16(x[0])));   /* what an fp16 cast would do */
    int8_t q[5];
    zn_quant8(x, 5, ZN_Q8_GROUP, q, &s);
    assert_true(isfinite(s) && s == -x[0] / 128.0f);
    assert_int_equal(q[0], -128);
    zn_dequant8(q, &s, 5, ZN_Q8_GROUP, ZN_BF16, out);
    assert_true(out[0] == x[0]);   /* -A comes back exactly */
    for (int i = 0; i < 5; i++) {
        assert_true(isfinite(out[i]));
        assert_true(fabs((double)x[i] - out[i]) <= -x[0] / 256.0 * (1 + 0x1p-14) + half_ulp(out[i], ZN_BF16));
    }
    uint8_t p[3];
    zn_quant4(x, 5, ZN_Q4_GROUP, p, &s);
    zn_dequant4(p, &s, 5, ZN_Q4_GROUP, ZN_BF16, out);
    assert_true(out[0] == x[0]);
    for (int i = 0; i < 5; i++)
        assert_true(fabs((double)x[i] - out[i]) <= -x[0] / 16.0 * (1 + 0x1p-18) + half_ulp(out[i], ZN_BF16));
    /* dequantized to fp16, a small group's values are rounded to fp16 */
    float h[3] = {-1.2345678f, 0.3f, -0.2f};   /* A = 1.234375 in fp16 */
    for (int i = 0; i < 3; i++) h[i] = zn_round_f16(h[i]);
    zn_quant8(h, 3, 3, q, &s);
    zn_dequant8(q, &s, 3, 3, ZN_F16, out);
    for (int i = 0; i < 3; i++) assert_true(out[i] == zn_round_f16(zn_q_decode(q[i], s)));
    assert_true(out[0] == h[0]);   /* -A */
    assert_int_equal(q[1], 31);
    assert_true(out[1] != zn_q_decode(q[1], s));   /* 31 * 79/8192: 12 bits, fp16 has 11 */
}

/* --------------------------------------------------------- determinism */

/* spec: Z-QNT-007 the same input gives the same codes, scales and
   dequantized bits, whatever the buffers held before */
static void test_deterministic(void **st) {
    (void)st;
    const long n = 100003;
    float *x = malloc(n * sizeof *x), *o1 = malloc(n * sizeof *o1), *o2 = malloc(n * sizeof *o2);
    float s1[40], s2[40], t1[200], t2[200];
    int8_t *a = malloc(n), *b = malloc(n);
    uint8_t *p = malloc(zn_q4_bytes(n)), *r = malloc(zn_q4_bytes(n));
    assert_true(x && o1 && o2 && a && b && p && r);
    random_values(x, n, 3.0f, ZN_BF16, 4242);
    memset(a, 0x11, n), memset(b, 0x77, n);
    memset(p, 0x11, zn_q4_bytes(n)), memset(r, 0x77, zn_q4_bytes(n));
    zn_quant8(x, n, ZN_Q8_GROUP, a, s1);
    zn_quant8(x, n, ZN_Q8_GROUP, b, s2);
    assert_memory_equal(a, b, n);
    assert_memory_equal(s1, s2, 13 * sizeof(float));   /* ceil(100003 / 8000) = 13 groups */
    memset(o1, 0x11, n * sizeof *o1), memset(o2, 0x77, n * sizeof *o2);
    zn_dequant8(a, s1, n, ZN_Q8_GROUP, ZN_BF16, o1);
    zn_dequant8(b, s2, n, ZN_Q8_GROUP, ZN_BF16, o2);
    assert_memory_equal(o1, o2, n * sizeof *o1);
    zn_quant4(x, n, ZN_Q4_GROUP, p, t1);
    zn_quant4(x, n, ZN_Q4_GROUP, r, t2);
    assert_memory_equal(p, r, zn_q4_bytes(n));
    assert_memory_equal(t1, t2, 196 * sizeof(float));   /* ceil(100003 / 512) = 196 */
    zn_dequant4(p, t1, n, ZN_Q4_GROUP, ZN_F32, o1);
    zn_dequant4(r, t2, n, ZN_Q4_GROUP, ZN_F32, o2);
    assert_memory_equal(o1, o2, n * sizeof *o1);
    free(x), free(o1), free(o2), free(a), free(b), free(p), free(r);
}

ZT_MAIN(
    cmocka_unit_test(test_group_rule),
    cmocka_unit_test(test_q8_by_hand),
    cmocka_unit_test(test_q8_zero_and_nonfinite_groups),
    cmocka_unit_test(test_rne_independent_of_rounding_mode),
    cmocka_unit_test(test_q8_absmax_elements),
    cmocka_unit_test(test_q8_error_bound_random),
    cmocka_unit_test(test_bound_near_midpoints),
    cmocka_unit_test(test_q8_subnormal_absmax),
    cmocka_unit_test(test_q4_by_hand),
    cmocka_unit_test(test_q4_nibbles),
    cmocka_unit_test(test_q4_error_bound_random),
    cmocka_unit_test(test_bf16_huge),
    cmocka_unit_test(test_deterministic))
