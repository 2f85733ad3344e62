/* test_zn_math.c: the shared exp/log of src/core/zn_math.h (spec Z-CUDA-004).
 *
 * Accuracy is measured against the double-precision libm value (exp, log;
 * their error, under one double ulp, is invisible at float precision), in
 * units of the float ulp at that value, over a sweep of every 97th float of
 * the range. The special cases are exact. */
#include "testutil.h"
#include "core/zn_math.h"

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* The float ulp at |ref|: the spacing of the binade ref falls in (2^-149 in
 * the subnormals), so an error of 0.5 is a correctly rounded result. */
static double ulp_at(double ref) {
    double a = fabs(ref);
    if (a < 0x1p-126) return 0x1p-149;
    int e;
    frexp(a, &e);            /* a in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 24);
}

static double ulp_err(float got, double ref) { return fabs((double)got - ref) / ulp_at(ref); }

/* Largest error over every step-th float bit pattern from lo to hi (same
 * sign, increasing magnitude); *worst gets the argument. */
static double sweep(int is_exp, uint32_t lo, uint32_t hi, uint32_t step, float *worst) {
    double max = 0.0;
    for (uint64_t u = lo; u <= hi; u += step) {
        float x = from_bits((uint32_t)u);
        double ref = is_exp ? exp((double)x) : log((double)x);
        float got = is_exp ? zn_expf(x) : zn_logf(x);
        double e = ulp_err(got, ref);
        if (e > max) { max = e; *worst = x; }
    }
    return max;
}

/* One sweep of zn_expf (is_exp) or zn_logf over [lo, hi], reported by name:
 * within 2 ulp of libm's double result everywhere it looks. */
static void sweep_within_2ulp(const char *name, int is_exp, uint32_t lo, uint32_t hi, uint32_t step) {
    float w = 0.0f;
    double max = sweep(is_exp, lo, hi, step, &w);
    printf("%s: max %.3f ulp at %a\n", name, max, (double)w);
    if (!(max <= 2.0)) fail_msg("%s: %.3f ulp at %a, over 2", name, max, (double)w);
}

/* spec: Z-CUDA-004 */
static void test_expf_accuracy(void **state) {
    (void)state;
    /* x in [-87.0, 0): the softmax range (exp of z - max) down to the normals */
    sweep_within_2ulp("zn_expf [-87, 0)", 1, 0x80000001u, 0xc2ae0000u, 97);
    /* (0, 88.72]: overflow boundary included */
    sweep_within_2ulp("zn_expf (0, 88.72]", 1, 0x00000001u, 0x42b17217u, 97);
    /* [-103.97, -87]: results in the subnormals */
    sweep_within_2ulp("zn_expf [-103.97, -87]", 1, 0xc2ae0000u, 0xc2cff1b4u, 7);
}

/* spec: Z-CUDA-004 */
static void test_logf_accuracy(void **state) {
    (void)state;
    /* every 97th positive finite float, subnormals included */
    sweep_within_2ulp("zn_logf (0, inf)", 0, 0x00000001u, 0x7f7fffffu, 97);
    /* [1, 1e6]: the range of softmax's log of a sum of C exps, densely */
    sweep_within_2ulp("zn_logf [1, 1e6]", 0, 0x3f800000u, 0x49742400u, 13);
}

static int is_pos_inf(float x) { return isinf(x) && x > 0; }

/* spec: Z-CUDA-004 */
static void test_special_cases(void **state) {
    (void)state;
    assert_true(zt_same_bits(zn_expf(0.0f), 1.0f));
    assert_true(zt_same_bits(zn_expf(-0.0f), 1.0f));
    assert_true(is_pos_inf(zn_expf(88.7228394f)));   /* just above ln(FLT_MAX) */
    assert_true(is_pos_inf(zn_expf(1000.0f)));
    assert_true(is_pos_inf(zn_expf(INFINITY)));
    assert_true(isfinite(zn_expf(88.72283f)));
    assert_true(zt_same_bits(zn_expf(-104.0f), 0.0f));
    assert_true(zt_same_bits(zn_expf(-1000.0f), 0.0f));
    assert_true(zt_same_bits(zn_expf(-INFINITY), 0.0f));
    assert_true(zn_expf(-103.0f) > 0.0f);            /* a subnormal, not 0 */
    assert_true(isnan(zn_expf(NAN)));
    assert_true(zt_same_bits(zn_logf(1.0f), 0.0f));
    assert_true(zt_same_bits(zn_logf(0.0f), -INFINITY));
    assert_true(zt_same_bits(zn_logf(-0.0f), -INFINITY));
    assert_true(is_pos_inf(zn_logf(INFINITY)));
    assert_true(isnan(zn_logf(-1.0f)));
    assert_true(isnan(zn_logf(-INFINITY)));
    assert_true(isnan(zn_logf(NAN)));
    /* the smallest subnormal: log(2^-149) = -149 ln 2 */
    assert_true(ulp_err(zn_logf(0x1p-149f), -149.0 * log(2.0)) <= 1.0);
}

ZT_MAIN(
    cmocka_unit_test(test_expf_accuracy),
    cmocka_unit_test(test_logf_accuracy),
    cmocka_unit_test(test_special_cases))
