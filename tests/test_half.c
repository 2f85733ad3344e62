/* test_half.c: fp32 <-> fp16 / bf16 conversions of src/core/half.h.
 * References here use a different method from half.h: values are decoded
 * with ldexp in double, and rounding is a search for the nearest
 * representable neighbour, compared in exact double arithmetic. */
#include "testutil.h"
#include <fenv.h>
#include <float.h>
#include "core/half.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* xorshift64*: the test's own generator (independent of src/core/rng.h) */
static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return rnd_state * 0x2545F4914F6CDD1Dull;
}

/* ---------------------------------------------------- independent decode */

static int f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static int bf16_is_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

/* value of a finite or infinite 16-bit pattern with mbits mantissa bits
 * (the rest after the sign is exponent), by the textbook formula: fp16 and
 * bf16 differ only in where the exponent ends */
static double half_value(uint16_t h, int mbits) {
    const int ebits = 15 - mbits, emax = (1 << ebits) - 1, bias = emax / 2;
    int s = h >> 15, e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
    double v;
    if (e == emax) v = INFINITY;
    else if (e == 0) v = ldexp(m, 1 - bias - mbits);
    else v = ldexp((1 << mbits) + m, e - bias - mbits);
    return s ? -v : v;
}

/* The magnitude one step past the largest finite value, where rounding to
 * inf starts being the nearest choice under IEEE 754 (the value the format
 * would have with an unbounded exponent). */
#define F16_BEYOND 65536.0
#define BF16_BEYOND 0x1p128

/* Nearest of lo/hi (adjacent positive patterns) to |x|, ties to even. */
static uint16_t nearest(double ax, uint16_t lo, double vlo, uint16_t hi, double vhi) {
    double dlo = ax - vlo, dhi = vhi - ax; /* exact: both are near ax */
    if (dlo < dhi) return lo;
    if (dhi < dlo) return hi;
    return (lo & 1) ? hi : lo;
}

/* Rounding by search: the largest positive pattern not above |x| (binary
 * search over the ordered patterns 0..inf, half_value with mbits mantissa
 * bits), then the nearer of it and the next; beyond |x| rounds to inf. The
 * fp16 and bf16 references are this search with their own parameters. */
static uint16_t ref_by_search(float f, int mbits, uint16_t inf, double beyond) {
    uint16_t sign = (fbits(f) >> 16) & 0x8000;
    double ax = fabs((double)f);
    if (ax >= beyond) return sign | inf;
    uint32_t lo = 0, hi = inf; /* value(lo) <= ax < value(hi) */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (half_value((uint16_t)mid, mbits) <= ax) lo = mid;
        else hi = mid;
    }
    double vhi = hi == inf ? beyond : half_value((uint16_t)hi, mbits);
    return sign | nearest(ax, (uint16_t)lo, half_value((uint16_t)lo, mbits), (uint16_t)hi, vhi);
}
static uint16_t ref_f32_to_f16(float f) { return ref_by_search(f, 10, 0x7c00, F16_BEYOND); }
static uint16_t ref_f32_to_bf16(float f) { return ref_by_search(f, 7, 0x7f80, BF16_BEYOND); }

/* ------------------------------------------------------------- tests */

/* A 16-bit format as the exhaustive test walks it: mantissa bits, zinc's
   decoder and encoder, the reference NaN test. */
typedef struct {
    const char *name;
    int mbits;
    float (*decode)(uint16_t);
    uint16_t (*encode)(float);
    int (*is_nan)(uint16_t);
} Fmt;
static const Fmt FMT_F16 = {"fp16", 10, zn_f16_to_f32, zn_f32_to_f16, f16_is_nan};
static const Fmt FMT_BF16 = {"bf16", 7, zn_bf16_to_f32, zn_f32_to_bf16, bf16_is_nan};

/* spec: Z-HALF-001 Z-HALF-006 Z-HALF-005 every one of the 65536 patterns of
 * the format in *state (FMT_F16, FMT_BF16: a test of each in ZT_MAIN)
 * decodes to its exact value and encodes back to itself; a NaN keeps its
 * sign and payload and comes back quiet. */
static void test_exhaustive_decode_and_round_trip(void **state) {
    const Fmt *F = *state;
    const uint32_t quiet = 1u << (F->mbits - 1), payload = quiet - 1;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = F->decode((uint16_t)h);
        if (F->is_nan((uint16_t)h)) {
            assert_true(isnan(f));
            assert_int_equal(fbits(f) >> 31, h >> 15);                             /* sign kept */
            assert_true(fbits(f) & 0x400000u);                                     /* quiet */
            assert_int_equal((fbits(f) >> (23 - F->mbits)) & payload, h & payload); /* payload kept */
            uint16_t back = F->encode(f);
            assert_true(F->is_nan(back));
            assert_int_equal(back, h | quiet); /* same NaN, made quiet */
            continue;
        }
        if (F->mbits == 7) assert_int_equal(fbits(f), h << 16); /* bf16 is the top half of fp32 */
        double want = half_value((uint16_t)h, F->mbits);
        if ((double)f != want) fail_msg("%s 0x%04x decodes to %a, want %a", F->name, h, (double)f, want);
        assert_int_equal(signbit(f) != 0, (h >> 15) != 0); /* -0 stays -0 */
        uint16_t back = F->encode(f);
        if (back != h) fail_msg("%s 0x%04x -> %a -> 0x%04x", F->name, h, (double)f, back);
    }
}

/* spec: Z-HALF-002 */
static void test_f16_ties_to_even(void **state) {
    (void)state;
    assert_int_equal(zn_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(zn_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);             /* tie, 0x3c00 even */
    assert_int_equal(zn_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);         /* tie, 0x3c01 odd */
    assert_int_equal(zn_f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  /* just past the tie */
    assert_int_equal(zn_f32_to_f16(1.0f + 0x1p-11f - 0x1p-24f), 0x3c00);  /* just below it */
    assert_int_equal(zn_f32_to_f16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
    assert_int_equal(zn_f32_to_f16(2049.0f), 0x6800);                     /* 2048 | 2050: even is 2048 */
    assert_int_equal(zn_f32_to_f16(2051.0f), 0x6802);                     /* 2050 | 2052: even is 2052 */
    assert_int_equal(zn_f32_to_f16(0.1f), 0x2e66);
    /* the mantissa carry moves into the exponent: 2 - 2^-12 rounds up to 2 */
    assert_int_equal(zn_f32_to_f16(2.0f - 0x1p-12f), 0x4000);
}

/* spec: Z-HALF-002 */
static void test_bf16_ties_to_even(void **state) {
    (void)state;
    assert_int_equal(zn_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(zn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);       /* tie, even */
    assert_int_equal(zn_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);   /* tie, odd -> up */
    assert_int_equal(zn_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);
    assert_int_equal(zn_f32_to_bf16(257.0f), 0x4380);               /* 256 | 258 -> 256 */
    assert_int_equal(zn_f32_to_bf16(259.0f), 0x4382);               /* 258 | 260 -> 260 */
    assert_int_equal(zn_f32_to_bf16(-259.0f), 0xc382);
    assert_int_equal(zn_f32_to_bf16(bitsf(0x3f80ffffu)), 0x3f81);
    assert_int_equal(zn_f32_to_bf16(bitsf(0x3fffffffu)), 0x4000);   /* carry into the exponent */
}

/* spec: Z-HALF-003 */
static void test_overflow_to_inf(void **state) {
    (void)state;
    assert_int_equal(zn_f32_to_f16(65504.0f), 0x7bff);                 /* max fp16 */
    assert_int_equal(zn_f32_to_f16(65519.996f), 0x7bff);               /* below the midpoint */
    assert_int_equal(zn_f32_to_f16(65520.0f), 0x7c00);                 /* midpoint: ties to inf */
    assert_int_equal(zn_f32_to_f16(-65520.0f), 0xfc00);
    assert_int_equal(zn_f32_to_f16(1e6f), 0x7c00);
    assert_int_equal(zn_f32_to_f16(FLT_MAX), 0x7c00);
    assert_int_equal(zn_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(zn_f32_to_f16(-INFINITY), 0xfc00);
    assert_true(isinf(zn_f16_to_f32(0x7c00)) && zn_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(zn_f16_to_f32(0xfc00)) && zn_f16_to_f32(0xfc00) < 0);

    assert_int_equal(zn_f32_to_bf16(bitsf(0x7f7f0000u)), 0x7f7f);      /* max bf16 */
    assert_int_equal(zn_f32_to_bf16(bitsf(0x7f7f7fffu)), 0x7f7f);      /* below the midpoint */
    assert_int_equal(zn_f32_to_bf16(bitsf(0x7f7f8000u)), 0x7f80);      /* midpoint, odd: inf */
    assert_int_equal(zn_f32_to_bf16(FLT_MAX), 0x7f80);
    assert_int_equal(zn_f32_to_bf16(-FLT_MAX), 0xff80);
    assert_int_equal(zn_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(zn_f32_to_bf16(-INFINITY), 0xff80);
    assert_true(isinf(zn_bf16_to_f32(0x7f80)));
}

/* spec: Z-HALF-004 */
static void test_f16_subnormals_and_underflow(void **state) {
    (void)state;
    assert_int_equal(zn_f32_to_f16(0x1p-24f), 0x0001);                 /* smallest subnormal */
    assert_int_equal(zn_f32_to_f16(0x1p-25f), 0x0000);                 /* tie with 0: even is 0 */
    assert_int_equal(zn_f32_to_f16(nextafterf(0x1p-25f, 1.0f)), 0x0001);
    assert_int_equal(zn_f32_to_f16(-0x1p-25f), 0x8000);                /* signed zero */
    assert_int_equal(zn_f32_to_f16(0x1p-26f), 0x0000);
    assert_int_equal(zn_f32_to_f16(3 * 0x1p-25f), 0x0002);             /* tie 1|2: even 2 */
    assert_int_equal(zn_f32_to_f16(5 * 0x1p-25f), 0x0002);             /* tie 2|3: even 2 */
    assert_int_equal(zn_f32_to_f16(1023 * 0x1p-24f), 0x03ff);          /* largest subnormal */
    assert_int_equal(zn_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);      /* tie 0x3ff|0x400 -> normal */
    assert_int_equal(zn_f32_to_f16(0x1p-14f), 0x0400);                 /* smallest normal */
    assert_int_equal(zn_f32_to_f16(bitsf(0x00000001u)), 0x0000);       /* fp32 subnormal */
    assert_int_equal(zn_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(zn_f32_to_f16(0.0f), 0x0000);
    assert_true(zn_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(zn_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    assert_true(zn_f16_to_f32(0x8001) == -0x1p-24f);
    /* bf16 subnormals share fp32's; rounding still ties to even */
    assert_int_equal(zn_f32_to_bf16(bitsf(0x00008000u)), 0x0000);
    assert_int_equal(zn_f32_to_bf16(bitsf(0x00018000u)), 0x0002);
    assert_int_equal(zn_f32_to_bf16(bitsf(0x007fffffu)), 0x0080);      /* rounds up to the smallest normal */
}

/* spec: Z-HALF-005 */
static void test_nan_stays_quiet_nan(void **state) {
    (void)state;
    /* a signalling fp32 NaN whose payload sits below the kept bits must not
       collapse to inf */
    assert_int_equal(zn_f32_to_f16(bitsf(0x7f800001u)), 0x7e00);
    assert_int_equal(zn_f32_to_f16(bitsf(0xff800001u)), 0xfe00);
    assert_int_equal(zn_f32_to_bf16(bitsf(0x7f800001u)), 0x7fc0);
    assert_int_equal(zn_f32_to_bf16(bitsf(0xff800001u)), 0xffc0);
    assert_int_equal(zn_f32_to_f16(bitsf(0x7fc00000u)), 0x7e00);       /* default quiet NaN */
    assert_int_equal(zn_f32_to_f16(bitsf(0x7fffe000u)), 0x7fff);       /* payload kept */
    assert_int_equal(zn_f32_to_bf16(bitsf(0x7fff0000u)), 0x7fff);
    assert_true(isnan(zn_f16_to_f32(0x7c01)));                         /* fp16 sNaN -> quiet */
    assert_int_equal(fbits(zn_f16_to_f32(0x7c01)), 0x7fc02000u);
    assert_int_equal(fbits(zn_bf16_to_f32(0x7f81)), 0x7fc10000u);
    assert_true(isnan(zn_round_f16(NAN)) && isnan(zn_round_bf16(NAN)));
}

/* spec: Z-HALF-002 Z-HALF-003 Z-HALF-004 */
static void test_f32_to_bf16_random_vs_search(void **state) {
    (void)state;
    rnd_state = 0x1234567887654321ull;
    for (long i = 0; i < 4000000; i++) {
        uint32_t u = (uint32_t)rnd();
        /* a quarter of the samples force a tie or a near tie in the low half */
        if ((i & 3) == 0) u = (u & 0xffff0000u) | 0x8000u;
        if ((i & 3) == 1) u = (u & 0xffff0000u) | 0x7fffu;
        float f = bitsf(u);
        if (isnan(f)) continue;
        uint16_t got = zn_f32_to_bf16(f), want = ref_f32_to_bf16(f);
        if (got != want) fail_msg("bf16(0x%08x) = 0x%04x, search says 0x%04x", u, got, want);
    }
}

/* spec: Z-HALF-002 Z-HALF-003 Z-HALF-004 */
static void test_f32_to_f16_random_vs_search(void **state) {
    (void)state;
    rnd_state = 0xfeedface12345678ull;
    for (long i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rnd();
        /* most samples in and around fp16's range (fp32 exponents 96..148) */
        if (i % 4 != 3) u = (u & 0x807fffffu) | ((96u + (uint32_t)(rnd() % 53)) << 23);
        if (i % 8 == 0) u = (u & 0xffffe000u) | 0x1000u; /* an exact tie for normals */
        float f = bitsf(u);
        if (isnan(f)) continue;
        uint16_t got = zn_f32_to_f16(f), want = ref_f32_to_f16(f);
        if (got != want) fail_msg("f16(0x%08x = %a) = 0x%04x, search says 0x%04x", u, (double)f, got, want);
    }
}

/* spec: Z-HALF-007 */
static void test_independent_of_fpu_rounding_mode(void **state) {
    (void)state;
    static const int modes[] = {FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO, FE_TONEAREST};
    float probes[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 0x1p-25f, 3 * 0x1p-25f,
                      -(1.0f + 0x1p-8f), 259.0f, 0.1f, -0.3f};
    uint16_t f16[9], bf16[9];
    for (int i = 0; i < 9; i++) {
        f16[i] = zn_f32_to_f16(probes[i]);
        bf16[i] = zn_f32_to_bf16(probes[i]);
    }
    for (int m = 0; m < 4; m++) {
        assert_int_equal(fesetround(modes[m]), 0);
        for (int i = 0; i < 9; i++) {
            assert_int_equal(zn_f32_to_f16(probes[i]), f16[i]);
            assert_int_equal(zn_f32_to_bf16(probes[i]), bf16[i]);
        }
    }
    fesetround(FE_TONEAREST);
}

ZT_MAIN(
    ZT_TEST_WITH("test_f16_exhaustive_decode_and_round_trip", test_exhaustive_decode_and_round_trip, &FMT_F16),
    ZT_TEST_WITH("test_bf16_exhaustive_decode_and_round_trip", test_exhaustive_decode_and_round_trip, &FMT_BF16),
    cmocka_unit_test(test_f16_ties_to_even),
    cmocka_unit_test(test_bf16_ties_to_even),
    cmocka_unit_test(test_overflow_to_inf),
    cmocka_unit_test(test_f16_subnormals_and_underflow),
    cmocka_unit_test(test_nan_stays_quiet_nan),
    cmocka_unit_test(test_f32_to_bf16_random_vs_search),
    cmocka_unit_test(test_f32_to_f16_random_vs_search),
    cmocka_unit_test(test_independent_of_fpu_rounding_mode))
