/* test_device.c: the device seam (spec Z-DEV-*). The host twins of every
 * data-movement, elementwise, reduction and optimizer kernel against real
 * numbers; the backend memory hooks over the shared accounting; and the
 * engine on a "far" device whose buffer addresses are not host addresses,
 * which must train to the host device's bits. */
#include "testutil.h"
#include "device/device.h"
#include "core/half.h"
#include "engine/engine.h"
#include "engine/drill.h"
#include "io/checkpoint.h"
#include "comm/world.h"
#include <float.h>
#include <stdatomic.h>
#include <unistd.h>

static uint32_t bits(float f) { return zn_f32_bits(f); }
static float fbits(uint32_t u) { return zn_bits_f32(u); }

/* Frees the n device buffers in bufs and checks that none is left (the
   test freed everything it allocated). */
static void free_all_check(ZnDevice *d, void *const *bufs, int n) {
    for (int i = 0; i < n; i++) zn_dev_free(d, bufs[i]);
    assert_int_equal(d->mem.nallocs, 0);
}
#define FREE_ALL(d, ...) \
    free_all_check((d), (void *const[]){__VA_ARGS__}, (int)(sizeof((void *[]){__VA_ARGS__}) / sizeof(void *)))

/* A fresh host device and n floats of its memory holding x. */
static float *dev_floats(ZnDevice *d, const float *x, long n) {
    ZnErr err;
    float *p = zn_dev_alloc(d, (size_t)n * sizeof(float), ZN_MEM_WORKSPACE, &err);
    assert_non_null(p);
    if (x) d->k->upload(d, p, x, (size_t)n * sizeof(float));
    return p;
}

/* ------------------------------------------------------------------------ */
/* data movement */

/* spec: Z-DEV-003 upload, download and copy move bytes bit for bit (a NaN
 * payload and -0.0 included); zero clears exactly the bytes asked; a
 * zero-byte move touches nothing */
static void test_move_bits(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const float x[6] = {1.5f, -0.0f, fbits(0x7fa01234u), INFINITY, 1e-45f, -3.25f};
    float *a = dev_floats(&d, x, 6), *b = dev_floats(&d, NULL, 6);
    float back[6];
    d.k->download(&d, back, a, sizeof back);
    for (int i = 0; i < 6; i++) assert_int_equal(bits(back[i]), bits(x[i]));
    d.k->copy(&d, b, a, sizeof x);
    d.k->zero(&d, b + 1, 2 * sizeof(float));   /* elements 1 and 2 only */
    d.k->download(&d, back, b, sizeof back);
    assert_int_equal(bits(back[0]), bits(1.5f));
    assert_int_equal(bits(back[1]), 0u);
    assert_int_equal(bits(back[2]), 0u);
    assert_int_equal(bits(back[3]), 0x7f800000u);
    assert_int_equal(bits(back[4]), 1u);          /* the smallest subnormal */
    assert_int_equal(bits(back[5]), bits(-3.25f));
    /* zero bytes: no access at all, NULL pointers included */
    d.k->upload(&d, NULL, NULL, 0);
    d.k->download(&d, NULL, NULL, 0);
    d.k->copy(&d, NULL, NULL, 0);
    d.k->zero(&d, NULL, 0);
    FREE_ALL(&d, a, b);
}

/* ------------------------------------------------------------------------ */
/* elementwise */

/* spec: Z-DEV-004 round_dt rounds to nearest even on the fp16 / bf16 grid
 * (overflow to inf, NaN stays NaN) and leaves fp32 bits untouched */
static void test_round_dt(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const float u11 = 1.0f / 2048.0f, u8 = 1.0f / 256.0f;
    const float x[7] = {1.0f + u11, 1.0f + 3.0f * u11, 65519.0f, 65520.0f, -1e-8f, NAN, 0.1f};
    float *a = dev_floats(&d, x, 7);
    float y[7];
    d.k->round_dt(&d, ZN_F16, a, 7);
    d.k->download(&d, y, a, sizeof y);
    assert_true(y[0] == 1.0f);                       /* a tie: the even neighbour */
    assert_true(y[1] == 1.0f + 4.0f * u11);          /* a tie: up to the even one */
    assert_true(y[2] == 65504.0f);
    assert_true(isinf(y[3]) && y[3] > 0);            /* the tie at the top goes to inf */
    assert_int_equal(bits(y[4]), 0x80000000u);       /* below half the smallest subnormal: -0 */
    assert_true(isnan(y[5]));
    assert_true(y[6] == 0.0999755859375f);           /* fp16 0x2e66 */

    const float xb[5] = {1.0f + u8, 1.0f + 3.0f * u8, FLT_MAX, fbits(0x7f800001u), 0.1f};
    float *b = dev_floats(&d, xb, 5);
    d.k->round_dt(&d, ZN_BF16, b, 5);
    d.k->download(&d, y, b, 5 * sizeof(float));
    assert_true(y[0] == 1.0f);
    assert_true(y[1] == 1.0f + 4.0f * u8);
    assert_true(isinf(y[2]));
    assert_true(isnan(y[3]));                        /* not truncated to inf */
    assert_true(y[4] == 0.10009765625f);             /* bf16 0x3dcd */

    const float xf[3] = {0.1f, fbits(0x7fa01234u), -0.0f};
    float *c = dev_floats(&d, xf, 3);
    d.k->round_dt(&d, ZN_F32, c, 3);
    d.k->download(&d, y, c, 3 * sizeof(float));
    for (int i = 0; i < 3; i++) assert_int_equal(bits(y[i]), bits(xf[i]));
    FREE_ALL(&d, a, b, c);
}

/* spec: Z-DEV-005 add is one fp32 add then one rounding to dt; div is a true
 * division (not a multiply by the reciprocal) then one rounding */
static void test_add_div(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const float u8 = 1.0f / 256.0f;
    float y[4];
    /* bf16: 1 + 2^-8 and 1 + 3*2^-8 are ties, each rounded once */
    const float d0[4] = {1.0f, 1.0f, 2048.0f, 65504.0f}, s0[4] = {u8, 3.0f * u8, 1.0f, 16.0f};
    float *dst = dev_floats(&d, d0, 4), *src = dev_floats(&d, s0, 4);
    d.k->add(&d, ZN_BF16, dst, src, 2);
    d.k->download(&d, y, dst, 2 * sizeof(float));
    assert_true(y[0] == 1.0f);
    assert_true(y[1] == 1.0f + 4.0f * u8);
    /* fp16: 2048 + 1 is a tie (to 2048); 65504 + 16 = 65520 rounds to inf */
    d.k->add(&d, ZN_F16, dst + 2, src + 2, 2);
    d.k->download(&d, y, dst, sizeof y);
    assert_true(y[2] == 2048.0f);
    assert_true(isinf(y[3]));
    /* fp32: the plain sum */
    const float a1[2] = {0.1f, 1e8f}, b1[2] = {0.2f, 1.0f};
    float *p = dev_floats(&d, a1, 2), *q = dev_floats(&d, b1, 2);
    d.k->add(&d, ZN_F32, p, q, 2);
    d.k->download(&d, y, p, 2 * sizeof(float));
    assert_int_equal(bits(y[0]), bits(0.3f));        /* 0.1f + 0.2f is 0.3f's float */
    assert_true(y[1] == 1e8f);                       /* 1 is below half an ulp of 1e8 */

    /* div: 5/3 = 0x3fd55555, while 5 * (1/3) would give 0x3fd55556 */
    const float x[3] = {5.0f, 1.0f, 1.0f};
    float *v = dev_floats(&d, x, 3);
    d.k->div(&d, ZN_F32, v, 1, 3.0f);
    d.k->div(&d, ZN_F16, v + 1, 1, 3.0f);
    d.k->div(&d, ZN_BF16, v + 2, 1, 3.0f);
    d.k->download(&d, y, v, 3 * sizeof(float));
    assert_int_equal(bits(y[0]), 0x3fd55555u);
    assert_true(y[1] == 0.333251953125f);            /* fp16 0x3555 */
    assert_true(y[2] == 0.333984375f);               /* bf16 0x3eab */
    FREE_ALL(&d, dst, src, p, q, v);
}

/* spec: Z-DEV-006 pack16 writes the fp16 / bf16 bit patterns (ties to even,
 * overflow to inf, NaN quiet); unpack16 is exact, so unpack(pack(x)) is
 * round_dt(x) for every x */
static void test_pack_unpack(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const float u11 = 1.0f / 2048.0f, u8 = 1.0f / 256.0f;
    const float x[8] = {1.0f, 1.0f + u11, 1.0f + 3.0f * u11, 65504.0f, 65520.0f, -INFINITY,
                        ldexpf(1.0f, -24), ldexpf(1.0f, -25)};
    const uint16_t want16[8] = {0x3c00, 0x3c00, 0x3c02, 0x7bff, 0x7c00, 0xfc00, 0x0001, 0x0000};
    float *a = dev_floats(&d, x, 8);
    uint16_t *h = zn_dev_alloc(&d, 8 * sizeof(uint16_t), ZN_MEM_BUCKETS, &(ZnErr){0});
    assert_non_null(h);
    uint16_t got[8];
    d.k->pack16(&d, ZN_F16, h, a, 8);
    d.k->download(&d, got, h, sizeof got);
    for (int i = 0; i < 8; i++) assert_int_equal(got[i], want16[i]);

    const float xb[5] = {1.0f, 1.0f + u8, 1.0f + 3.0f * u8, FLT_MAX, fbits(0x7f800001u)};
    const uint16_t wantb[5] = {0x3f80, 0x3f80, 0x3f82, 0x7f80, 0x7fc0};
    d.k->upload(&d, a, xb, sizeof xb);
    d.k->pack16(&d, ZN_BF16, h, a, 5);
    d.k->download(&d, got, h, 5 * sizeof(uint16_t));
    for (int i = 0; i < 5; i++) assert_int_equal(got[i], wantb[i]);

    /* the round trip over many bit patterns (every exponent, ties, NaN
       payloads): unpack(pack(x)) == round_dt(x), bit for bit */
    enum { N = 4096 };
    float *src = malloc(N * sizeof(float)), *rt = malloc(N * sizeof(float)), *rd = malloc(N * sizeof(float));
    assert_true(src && rt && rd);
    uint32_t s = 12345u;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        /* every 4th pattern sits exactly on a 16-bit tie */
        src[i] = fbits(i % 4 ? s : (s & 0xffff0000u) | 0x8000u);
    }
    float *dx = dev_floats(&d, src, N), *dr = dev_floats(&d, src, N);
    uint16_t *d16 = zn_dev_alloc(&d, N * sizeof(uint16_t), ZN_MEM_BUCKETS, &(ZnErr){0});
    assert_non_null(d16);
    const ZnDtype dts[2] = {ZN_F16, ZN_BF16};
    for (int k = 0; k < 2; k++) {
        d.k->upload(&d, dr, src, N * sizeof(float));
        d.k->pack16(&d, dts[k], d16, dx, N);
        d.k->unpack16(&d, dts[k], dx, d16, N);
        d.k->round_dt(&d, dts[k], dr, N);
        d.k->download(&d, rt, dx, N * sizeof(float));
        d.k->download(&d, rd, dr, N * sizeof(float));
        for (int i = 0; i < N; i++) {
            if (isnan(rd[i])) assert_true(isnan(rt[i]));
            else if (bits(rt[i]) != bits(rd[i]))
                fail_msg("%s: x=%08x round trip %08x, round_dt %08x", k ? "bf16" : "fp16", bits(src[i]),
                         bits(rt[i]), bits(rd[i]));
        }
        d.k->upload(&d, dx, src, N * sizeof(float));
    }
    free(src);
    free(rt);
    free(rd);
    FREE_ALL(&d, dx, dr, d16, a, h);
}

/* ------------------------------------------------------------------------ */
/* reductions and the optimizer */

/* spec: Z-DEV-007 absmax gives the largest finite |x| and flags inf/NaN;
 * sumsq_fixed adds the exact integer sum of floor(x^2 * 2^shift) into the
 * 128-bit (hi, lo) it is given */
static void test_absmax_sumsq(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const float x[6] = {1.0f, -3.0f, NAN, 2.0f, -INFINITY, 0.5f};
    float *a = dev_floats(&d, x, 6);
    ZnAbsMax m = d.k->absmax(&d, a, 6);
    assert_true(m.maxabs == 3.0f);                   /* NaN and -inf do not count */
    assert_int_equal(m.nonfinite, 1);
    m = d.k->absmax(&d, a + 3, 1);
    assert_true(m.maxabs == 2.0f);
    assert_int_equal(m.nonfinite, 0);
    m = d.k->absmax(&d, a, 0);
    assert_true(m.maxabs == 0.0f);
    assert_int_equal(m.nonfinite, 0);

    const float y[4] = {1.0f, -2.0f, 0.5f, 0.3f};
    float *b = dev_floats(&d, y, 4);
    /* shift 4: 16 + 64 + 4 + floor(0.3f^2 * 16) = 84 + floor(1.44) = 85,
       added into hi = 1, lo = 2^64 - 1: the carry reaches hi */
    uint64_t hi = 1, lo = UINT64_MAX;
    d.k->sumsq_fixed(&d, b, 4, 4, &hi, &lo);
    assert_true(hi == 2 && lo == 84);
    /* order-free: the reversed halves give the same integer */
    uint64_t h1 = 0, l1 = 0, h2 = 0, l2 = 0;
    d.k->sumsq_fixed(&d, b + 2, 2, 10, &h1, &l1);
    d.k->sumsq_fixed(&d, b, 2, 10, &h1, &l1);
    d.k->sumsq_fixed(&d, b, 4, 10, &h2, &l2);
    assert_true(h1 == h2 && l1 == l2 && l2 == 5 * 1024 + 256 + 92);   /* 0.09 * 1024 = 92.16 */
    zn_dev_free(&d, a);
    zn_dev_free(&d, b);
}

/* spec: Z-DEV-008 the adam kernel is zn_adam_step bit for bit; with a
 * working copy it also writes work[i] = round_dt(p[i]) of the new values,
 * without one it writes nothing else */
static void test_adam(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    const ZnAdamParams hp = {0.1, 0.9, 0.999, 1e-8, 0.01, 1, 1};
    /* one known step: p = 1, g = 0.5 from zero moments: m = 0.05, v = 2.5e-4,
       the bias-corrected update is 0.5 / (0.5 + 1e-8) ~ 1, plus decay 0.01:
       p = 1 - 0.1 * 1.01 = 0.899 */
    const float p0 = 1.0f, g0 = 0.5f, z = 0.0f;
    float *p = dev_floats(&d, &p0, 1), *g = dev_floats(&d, &g0, 1), *m = dev_floats(&d, &z, 1),
          *v = dev_floats(&d, &z, 1);
    d.k->adam(&d, 1, p, g, m, v, &hp, 1, 1.0f, NULL, ZN_F32);
    float r[3];
    d.k->download(&d, &r[0], p, 4);
    d.k->download(&d, &r[1], m, 4);
    d.k->download(&d, &r[2], v, 4);
    assert_float_equal(r[0], 0.899f, 1e-6);
    assert_float_equal(r[1], 0.05f, 1e-7);      /* (1 - 0.9f) * 0.5 */
    assert_float_equal(r[2], 2.5e-4f, 1e-8);    /* (1 - 0.999f) * 0.25 */

    /* n beyond one block of the host kernel, against zn_adam_step on host
       copies; the gradient multiplier 0.5 (unscale) is applied first */
    enum { N = 20000 };
    float *hp_[4], *hw = malloc(N * sizeof(float));
    for (int k = 0; k < 4; k++) hp_[k] = malloc(N * sizeof(float));
    assert_non_null(hw);
    uint32_t s = 7u;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 4; k++) {
            s = s * 1664525u + 1013904223u;
            float u = (float)(s >> 8) / 16777216.0f;   /* [0, 1) */
            hp_[k][i] = k == 3 ? u * 1e-3f : 2.0f * u - 1.0f;   /* v must be >= 0 */
        }
    const ZnDtype dts[3] = {ZN_F32, ZN_F16, ZN_BF16};
    for (int t = 0; t < 3; t++) {
        float *dp = dev_floats(&d, hp_[0], N), *dg = dev_floats(&d, hp_[1], N), *dm = dev_floats(&d, hp_[2], N),
              *dv = dev_floats(&d, hp_[3], N);
        const float sentinel = -7.0f;
        float *dw = dev_floats(&d, NULL, N + 1);
        d.k->upload(&d, dw + N, &sentinel, 4);   /* one past the end: never written */
        d.k->adam(&d, N, dp, dg, dm, dv, &hp, 3, 0.5f, dw, dts[t]);
        float *ref[4];
        for (int k = 0; k < 4; k++) {
            ref[k] = malloc(N * sizeof(float));
            memcpy(ref[k], hp_[k], N * sizeof(float));
        }
        zn_adam_step(N, ref[0], ref[1], ref[2], ref[3], &hp, 3, 0.5f);
        float *dk[4] = {dp, dg, dm, dv};
        for (int k = 0; k < 4; k++) {
            d.k->download(&d, hw, dk[k], N * sizeof(float));
            assert_memory_equal(hw, ref[k], N * sizeof(float));
        }
        d.k->download(&d, hw, dw, N * sizeof(float));
        for (int i = 0; i < N; i++) {
            float want = dts[t] == ZN_F16 ? zn_round_f16(ref[0][i]) : dts[t] == ZN_BF16 ? zn_round_bf16(ref[0][i]) : ref[0][i];
            if (bits(hw[i]) != bits(want)) fail_msg("dtype %d: work[%d] = %08x, want %08x", t, i, bits(hw[i]), bits(want));
        }
        float after;
        d.k->download(&d, &after, dw + N, 4);
        assert_true(after == sentinel);
        /* without a working copy: p, m, v the same, dw left alone */
        d.k->zero(&d, dw, (size_t)N * sizeof(float));
        d.k->upload(&d, dp, hp_[0], N * sizeof(float));
        d.k->upload(&d, dm, hp_[2], N * sizeof(float));
        d.k->upload(&d, dv, hp_[3], N * sizeof(float));
        d.k->adam(&d, N, dp, dg, dm, dv, &hp, 3, 0.5f, NULL, dts[t]);
        d.k->download(&d, hw, dp, N * sizeof(float));
        assert_memory_equal(hw, ref[0], N * sizeof(float));
        d.k->download(&d, hw, dw, N * sizeof(float));
        for (int i = 0; i < N; i++) assert_int_equal(bits(hw[i]), 0u);
        for (int k = 0; k < 4; k++) { free(ref[k]); zn_dev_free(&d, dk[k]); }
        zn_dev_free(&d, dw);
    }
    for (int k = 0; k < 4; k++) free(hp_[k]);
    free(hw);
    FREE_ALL(&d, p, g, m, v);
}

/* ------------------------------------------------------------------------ */
/* backend memory hooks */

static int calls_alloc, calls_free;
static void *(*host_alloc_hook)(ZnDevice *, size_t, size_t, ZnMemCat, ZnErr *);
static void (*host_free_hook)(ZnDevice *, void *);
static void *counting_alloc(ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err) {
    calls_alloc++;
    return host_alloc_hook(d, alloc_n, accounted_n, cat, err);
}
static void counting_free(ZnDevice *d, void *p) {
    calls_free++;
    host_free_hook(d, p);
}

/* spec: Z-DEV-009 zn_mem_charge checks the capacity and charges the
 * category; a failed charge changes no counter; zn_dev_alloc, _as and free
 * reach the backend's hooks, and free(NULL) does not */
static void test_charge_and_hooks(void **st) {
    (void)st;
    ZnDevice d;
    zn_device_host_init(&d);
    ZnErr err;
    d.capacity = 1000;
    assert_int_equal(zn_mem_charge(&d, 600, ZN_MEM_MASTER32, &err), 0);
    assert_int_equal(zn_mem_charge(&d, 300, ZN_MEM_GRADS, &err), 0);
    ZnMemStats before = d.mem;
    assert_int_equal(zn_mem_charge(&d, 101, ZN_MEM_EXP_AVG, &err), ZN_E_NOMEM);
    assert_string_equal(err.msg, "out of simulated device memory: requesting 101 bytes for exp_avg with 900 of 1000 in use");
    assert_memory_equal(&d.mem, &before, sizeof before);
    assert_int_equal(zn_mem_charge(&d, 8, ZN_MEM_NCAT, &err), ZN_E_INTERNAL);
    assert_int_equal(zn_mem_charge(&d, SIZE_MAX, ZN_MEM_GRADS, &err), ZN_E_NOMEM);
    assert_str_contains(err.msg, "is too large");
    assert_memory_equal(&d.mem, &before, sizeof before);
    assert_int_equal(zn_mem_charge(&d, 100, ZN_MEM_EXP_AVG, &err), 0);   /* exactly to capacity */
    assert_int_equal(d.mem.cur_total, 1000);
    assert_int_equal(d.mem.peak[ZN_MEM_EXP_AVG], 100);
    assert_int_equal(d.mem.nallocs, 3);
    zn_mem_uncharge(&d, 600, ZN_MEM_MASTER32);
    zn_mem_uncharge(&d, 300, ZN_MEM_GRADS);
    zn_mem_uncharge(&d, 100, ZN_MEM_EXP_AVG);
    assert_int_equal(d.mem.cur_total, 0);
    assert_int_equal(d.mem.peak_total, 1000);
    assert_int_equal(d.mem.nallocs, 0);

#ifndef __SANITIZE_ADDRESS__   /* ASan reports an impossible request instead of returning NULL */
    /* charged (no capacity), then the host cannot allocate 2^61 bytes: the
       counters, peaks included, are as before */
    zn_device_host_init(&d);
    before = d.mem;
    assert_null(zn_dev_alloc(&d, (size_t)1 << 61, ZN_MEM_GRADS, &err));
    assert_int_equal(err.code, ZN_E_NOMEM);
    assert_str_contains(err.msg, "out of host memory");
    assert_memory_equal(&d.mem, &before, sizeof before);
#endif

    /* dispatch: a backend that counts its calls */
    zn_device_host_init(&d);
    host_alloc_hook = d.alloc;
    host_free_hook = d.free;
    d.alloc = counting_alloc;
    d.free = counting_free;
    calls_alloc = calls_free = 0;
    void *a = zn_dev_alloc(&d, 40, ZN_MEM_PARAMS16, &err);
    void *b = zn_dev_alloc_as(&d, 40, 20, ZN_MEM_PARAMS16, &err);   /* 40 allocated, 20 charged */
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(calls_alloc, 2);
    assert_int_equal(d.mem.cur[ZN_MEM_PARAMS16], 60);
    zn_dev_free(&d, NULL);
    assert_int_equal(calls_free, 0);
    zn_dev_free(&d, a);
    zn_dev_free(&d, b);
    assert_int_equal(calls_free, 2);
    assert_int_equal(d.mem.cur_total, 0);
    assert_int_equal(d.mem.nallocs, 0);
}

/* ------------------------------------------------------------------------ */
/* the far device: buffer addresses that are not host addresses */

/* A far token is a host block's address with bit 62 set: a non-canonical
 * address on x86-64 and beyond the address space on aarch64, so any load or
 * store through one faults. The kernels and the communicator below strip the
 * bit before they call the host ones; host code that touched a device
 * buffer directly would crash the test. A host pointer arriving where a
 * device pointer belongs is counted. */
#define FAR_BIT ((uintptr_t)1 << 62)
static atomic_long host_ptrs_seen;

static void *far(void *p) { return p ? (void *)((uintptr_t)p | FAR_BIT) : NULL; }
static void *near(const void *p) {
    if (!p) return NULL;
    if (!((uintptr_t)p & FAR_BIT)) atomic_fetch_add(&host_ptrs_seen, 1);
    return (void *)((uintptr_t)p & ~FAR_BIT);
}
#define NEAR(T, p) ((T *)near(p))

static const ZnKernels *H = &zn_host_kernels;
static void *(*far_inner_alloc)(ZnDevice *, size_t, size_t, ZnMemCat, ZnErr *);
static void (*far_inner_free)(ZnDevice *, void *);

static void *far_alloc(ZnDevice *d, size_t alloc_n, size_t accounted_n, ZnMemCat cat, ZnErr *err) {
    return far(far_inner_alloc(d, alloc_n, accounted_n, cat, err));
}
static void far_free(ZnDevice *d, void *p) { far_inner_free(d, near(p)); }
static void f_upload(ZnDevice *d, void *dst, const void *src, size_t n) { H->upload(d, near(dst), src, n); }
static void f_download(ZnDevice *d, void *dst, const void *src, size_t n) { H->download(d, dst, near(src), n); }
static void f_copy(ZnDevice *d, void *dst, const void *src, size_t n) { H->copy(d, near(dst), near(src), n); }
static void f_zero(ZnDevice *d, void *dst, size_t n) { H->zero(d, near(dst), n); }
static void f_round(ZnDevice *d, ZnDtype dt, float *x, long n) { H->round_dt(d, dt, NEAR(float, x), n); }
static void f_add(ZnDevice *d, ZnDtype dt, float *x, const float *y, long n) {
    H->add(d, dt, NEAR(float, x), NEAR(const float, y), n);
}
static void f_div(ZnDevice *d, ZnDtype dt, float *x, long n, float v) { H->div(d, dt, NEAR(float, x), n, v); }
static void f_pack(ZnDevice *d, ZnDtype dt, uint16_t *o, const float *x, long n) {
    H->pack16(d, dt, NEAR(uint16_t, o), NEAR(const float, x), n);
}
static void f_unpack(ZnDevice *d, ZnDtype dt, float *o, const uint16_t *x, long n) {
    H->unpack16(d, dt, NEAR(float, o), NEAR(const uint16_t, x), n);
}
static ZnAbsMax f_absmax(ZnDevice *d, const float *x, long n) { return H->absmax(d, NEAR(const float, x), n); }
static void f_sumsq(ZnDevice *d, const float *x, long n, int s, uint64_t *hi, uint64_t *lo) {
    H->sumsq_fixed(d, NEAR(const float, x), n, s, hi, lo);
}
static void f_adam(ZnDevice *d, long n, float *p, const float *g, float *m, float *v, const ZnAdamParams *hp,
                   long t, float mul, float *work, ZnDtype dt) {
    H->adam(d, n, NEAR(float, p), NEAR(const float, g), NEAR(float, m), NEAR(float, v), hp, t, mul,
            NEAR(float, work), dt);
}
static void f_gemm_nt(ZnDevice *d, int M, int N, int K, const float *A, const float *B, const float *bias, float *C) {
    H->gemm_nt(d, M, N, K, NEAR(const float, A), NEAR(const float, B), NEAR(const float, bias), NEAR(float, C));
}
static void f_gemm_nn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    H->gemm_nn(d, M, N, K, NEAR(const float, A), NEAR(const float, B), NEAR(float, C));
}
static void f_gemm_tn(ZnDevice *d, int M, int N, int K, const float *A, const float *B, float *C) {
    H->gemm_tn(d, M, N, K, NEAR(const float, A), NEAR(const float, B), NEAR(float, C));
}
static void f_colsum(ZnDevice *d, int M, int N, const float *A, float *out) {
    H->colsum(d, M, N, NEAR(const float, A), NEAR(float, out));
}
static void f_relu_fwd(ZnDevice *d, long n, const float *x, float *y) {
    H->relu_fwd(d, n, NEAR(const float, x), NEAR(float, y));
}
static void f_relu_bwd(ZnDevice *d, long n, const float *y, const float *dy, float *dx) {
    H->relu_bwd(d, n, NEAR(const float, y), NEAR(const float, dy), NEAR(float, dx));
}
static float f_xent(ZnDevice *d, int B, int C, const float *z, const int *y, float gs, float *dz) {
    return H->softmax_xent(d, B, C, NEAR(const float, z), NEAR(const int, y), gs, NEAR(float, dz));
}

static const ZnKernels far_kernels = {
    .upload = f_upload, .download = f_download, .copy = f_copy, .zero = f_zero,
    .round_dt = f_round, .add = f_add, .div = f_div, .pack16 = f_pack, .unpack16 = f_unpack,
    .absmax = f_absmax, .sumsq_fixed = f_sumsq, .adam = f_adam,
    .gemm_nt = f_gemm_nt, .gemm_nn = f_gemm_nn, .gemm_tn = f_gemm_tn, .colsum = f_colsum,
    .relu_fwd = f_relu_fwd, .relu_bwd = f_relu_bwd, .softmax_xent = f_xent,
};

/* The host device with far addresses: the same memory and accounting. */
static void far_device_init(ZnDevice *d) {
    zn_device_host_init(d);
    far_inner_alloc = d->alloc;
    far_inner_free = d->free;
    d->name = "far";
    d->host_addressable = 0;   /* its buffers are tokens, as a GPU's are */
    d->alloc = far_alloc;
    d->free = far_free;
    d->k = &far_kernels;
}

/* The communicator in front of the simulator's: every buffer must be far. */
typedef struct {
    ZnComm comm;       /* first: a ZnComm * is a FarComm * */
    ZnComm *inner;
} FarComm;

static ZnComm *inner_of(ZnComm *c) { return ((FarComm *)c)->inner; }
static int fc_all_reduce(ZnComm *c, void *buf, long n, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    return inner_of(c)->all_reduce(inner_of(c), near(buf), n, dt, op, tag, err);
}
static int fc_reduce_scatter(ZnComm *c, const void *s, void *r, const long *counts, ZnDtype dt, ZnRedOp op,
                             const char *tag, ZnErr *err) {
    return inner_of(c)->reduce_scatter(inner_of(c), near(s), near(r), counts, dt, op, tag, err);
}
static int fc_all_gather(ZnComm *c, const void *s, void *r, const long *counts, ZnDtype dt, const char *tag,
                         ZnErr *err) {
    return inner_of(c)->all_gather(inner_of(c), near(s), near(r), counts, dt, tag, err);
}
static int fc_broadcast(ZnComm *c, void *buf, long n, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    return inner_of(c)->broadcast(inner_of(c), near(buf), n, dt, root, tag, err);
}
static int fc_barrier(ZnComm *c, const char *tag, ZnErr *err) { return inner_of(c)->barrier(inner_of(c), tag, err); }

static void far_comm_init(FarComm *f, ZnComm *inner) {
    memset(f, 0, sizeof *f);
    f->inner = inner;
    f->comm.world = inner->world;
    f->comm.all_reduce = fc_all_reduce;
    f->comm.reduce_scatter = fc_reduce_scatter;
    f->comm.all_gather = fc_all_gather;
    f->comm.broadcast = fc_broadcast;
    f->comm.barrier = fc_barrier;
}

#define FAR_MODEL "mlp:6,8,5,4"

typedef struct {
    ZnConfig cfg;
    ZnModel model;
    ZnData data;
    int far;                /* 1: far device and communicator */
    long steps;
    const char *ckdir;      /* set: save after steps - 1, reload, take the last step */
    ZnEngineHooks hooks;
    ZnDrill drill;          /* the planted fault and inf (hooks.step) */
    float *params;          /* out: rank 0's gathered master weights */
    double loss[8];         /* out: rank 0's losses */
    size_t scratch_bytes;   /* out: rank 0 */
    long workspace, maxlayer_bytes;
} FarCtx;

static int far_train(FarCtx *c, ZnEngine *E, long from, long to, ZnErr *err) {
    ZnStepResult sr;
    for (long t = from; t < to; t++) {
        int rc = zn_engine_train_step(E, &sr, err);
        if (rc) return rc;
        if (E->world.rank == 0) c->loss[t] = sr.loss;
    }
    return 0;
}

static int far_rank(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    FarCtx *c = arg;
    ZnDevice dev;
    FarComm fc;
    if (c->far) {
        far_device_init(&dev);
        far_comm_init(&fc, comm);
        comm = &fc.comm;
    } else {
        zn_device_host_init(&dev);
    }
    ZnEngine E;
    int rc = zn_engine_init(&E, &c->cfg, &c->model, &c->data, comm, &dev, &c->hooks, err);
    if (rc) return rc;
    if (rank == 0) {
        c->scratch_bytes = E.scratch_bytes;
        c->workspace = dev.mem.cur[ZN_MEM_WORKSPACE];
    }
    long first = c->ckdir ? c->steps - 1 : c->steps;
    rc = far_train(c, &E, 0, first, err);
    if (!rc && c->ckdir) {   /* a round trip through a checkpoint: save, a fresh engine, load */
        rc = zn_ckpt_save(&E, c->ckdir, FAR_MODEL, "{}", err);
        /* rank 0 writes the manifest last: nobody loads before it is there */
        if (!rc) rc = comm->barrier(comm, "ckpt_test", err);
        zn_engine_free(&E);
        if (rc) return rc;
        if ((rc = zn_engine_init(&E, &c->cfg, &c->model, &c->data, comm, &dev, &c->hooks, err))) return rc;
        rc = zn_ckpt_load(&E, c->ckdir, NULL, 0, err);
        if (!rc) rc = far_train(c, &E, first, c->steps, err);
    }
    long n = zn_model_numel(&c->model);
    float *out = malloc((size_t)n * sizeof(float));
    if (!out) rc = rc ? rc : zn_err(err, ZN_E_NOMEM, "out of host memory");
    if (!rc) rc = zn_engine_gather_params(&E, out, err);
    if (!rc && rank == 0) memcpy(c->params, out, (size_t)n * sizeof(float));
    free(out);
    zn_engine_free(&E);
    if (!rc && dev.mem.nallocs) rc = zn_err(err, ZN_E_INTERNAL, "%ld device allocations leaked", dev.mem.nallocs);
    return rc;
}

static void far_run(FarCtx *c, int world, ZnErr *err) {
    if (zt_sim_run(world, far_rank, c, 60, err)) fail_msg("%s", err->msg);
}

/* One side of a far-device comparison (far 0: the host device, 1: the far
   one): model, data, config and a params buffer for `steps` steps of
   stage and dt. Returns the model's element count. */
static long far_ctx_init_off(FarCtx *c, int far, int world, int stage, ZnDtype dt, int canonical, long steps,
                             int offload);
static long far_ctx_init(FarCtx *c, int far, int world, int stage, ZnDtype dt, int canonical, long steps) {
    return far_ctx_init_off(c, far, world, stage, dt, canonical, steps, 0);
}
/* offload 1: the optimizer (and at stage 3 the parameters) on the host tier */
static long far_ctx_init_off(FarCtx *c, int far, int world, int stage, ZnDtype dt, int canonical, long steps,
                             int offload) {
    ZnErr err;
    memset(c, 0, sizeof *c);
    assert_int_equal(zn_model_parse(FAR_MODEL, &c->model, &err), 0);
    assert_int_equal(zn_data_init(&c->data, 6, 4, 1234), 0);
    ZnConfigArgs args = zt_args(world, stage, 2, 2, (int)dt);
    args.canonical = canonical;
    args.max_grad_norm = 0.5;
    /* stage 3: biases persist, weights are gathered and released per use */
    zt_config(&c->cfg, offload ? "{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 10,"
                                 " \"stage3_max_reuse_distance\": 0, \"reduce_bucket_size\": 50,"
                                 " \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}}}"
                               : "{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 10,"
                                 " \"stage3_max_reuse_distance\": 0, \"reduce_bucket_size\": 50}}", &args);
    long n = zn_model_numel(&c->model);
    c->params = calloc((size_t)n, sizeof(float));
    assert_non_null(c->params);
    c->far = far;
    c->steps = steps;
    c->hooks.quiet = 1;
    return n;
}

/* the fault both far tests plant: step 2 adds 0.25 to master element 3 */
static void plant_fault(FarCtx *c) {
    c->drill.fault_step = 2;
    c->drill.fault_index = 3;
    c->drill.fault_delta = 0.25f;
    c->hooks.step = zn_drill_hooks(&c->drill);
}

static void far_ctx_free(FarCtx *c) {
    free(c->params);
    zn_data_free(&c->data);
}

/* Runs both sides of a far-device comparison (c[0] the host device, c[1]
 * the far one) and checks that no host pointer reached the far side and
 * that the weights and losses are the same bits. */
static void far_pair(FarCtx *c, int world, long n, int stage, int k, int canonical) {
    ZnErr err;
    atomic_store(&host_ptrs_seen, 0);
    far_run(&c[0], world, &err);
    far_run(&c[1], world, &err);
    if (atomic_load(&host_ptrs_seen))
        fail_msg("stage %d dtype %d: %ld host pointers reached the device or the communicator", stage, k,
                 (long)atomic_load(&host_ptrs_seen));
    if (memcmp(c[0].params, c[1].params, (size_t)n * sizeof(float)))
        fail_msg("stage %d dtype %d canonical %d: the far device's weights differ", stage, k, canonical);
    assert_memory_equal(c[0].loss, c[1].loss, sizeof c[0].loss);
}

/* far_pair over the stages from first_stage to 3, every dtype and
 * canonical flag, 4 steps with the planted fault. offload 0: fp16's step 3
 * also gets an inf gradient (a skipped step), and the far side's workspace
 * scratch is checked; 1: the far side's optimizer (and at stage 3 its
 * parameters) on the host tier. */
static void far_sweep(int first_stage, int offload) {
    const int world = 2;
    const ZnDtype dts[3] = {ZN_F32, ZN_F16, ZN_BF16};
    for (int stage = first_stage; stage <= 3; stage++)
        for (int k = 0; k < 3; k++)
            for (int canonical = 0; canonical <= 1; canonical++) {
                static FarCtx c[2];
                long n = 0;
                for (int f = 0; f < 2; f++) {
                    n = far_ctx_init_off(&c[f], f, world, stage, dts[k], canonical, 4, offload ? f : 0);
                    plant_fault(&c[f]);
                    static const long inject[1] = {3};
                    c[f].drill.inject_steps = inject;
                    c[f].drill.ninject = !offload && dts[k] == ZN_F16;
                    c[f].drill.inject_value = INFINITY;
                    c[f].hooks.step = zn_drill_hooks(&c[f].drill);
                }
                far_pair(c, world, n, stage, k, canonical);
                if (!offload) {
                    /* the scratch: max(2 uint64, GA = 2 floats) = 16 bytes per rank */
                    assert_int_equal(c[1].scratch_bytes, 16 * world);
                    assert_int_equal(c[1].workspace, c[0].workspace);
                }
                for (int f = 0; f < 2; f++) far_ctx_free(&c[f]);
            }
}

/* spec: Z-DEV-001 the engine (training, gathers, checkpoint save and load,
 * the inject and fault hooks) never dereferences a device buffer: on a
 * device whose addresses fault on any host access it runs and gives the
 * host device's bits, every stage and dtype */
/* spec: Z-DEV-002 every collective the engine issues gets device buffers
 * (no host pointer reaches the communicator); host values go through the
 * workspace scratch of max(16, 4 GA) bytes per rank */
static void test_far_device(void **st) {
    (void)st;
    far_sweep(0, 0);
}

/* spec: Z-OFF-001 Z-DEV-001 offload on a device whose addresses fault on
 * any host access: host-tier buffers never reach the device's kernels or
 * the communicator, device buffers never reach the host's, and the bits
 * are the host device's without offload (the fault hook included) */
static void test_far_offload(void **st) {
    (void)st;
    far_sweep(1, 1);   /* offload needs a stage */
}

/* spec: Z-DEV-001 a checkpoint saved and loaded through the far device
 * resumes to the bits of an uninterrupted host run */
static void test_far_checkpoint(void **st) {
    (void)st;
    ZnErr err;
    const int world = 2;
    const int stages[2] = {1, 3};
    const ZnDtype dts[2] = {ZN_F16, ZN_BF16};
    for (int i = 0; i < 2; i++) {
        char dir[] = "/tmp/zinc-far-XXXXXX";
        assert_non_null(mkdtemp(dir));
        static FarCtx c[2];
        long n = 0;
        for (int f = 0; f < 2; f++) {
            n = far_ctx_init(&c[f], f, world, stages[i], dts[i], 0, 3);
            c[f].ckdir = f ? dir : NULL;
        }
        atomic_store(&host_ptrs_seen, 0);
        far_run(&c[0], world, &err);
        far_run(&c[1], world, &err);
        assert_int_equal(atomic_load(&host_ptrs_seen), 0);
        assert_memory_equal(c[0].params, c[1].params, (size_t)n * sizeof(float));
        assert_memory_equal(c[0].loss, c[1].loss, sizeof c[0].loss);
        for (int f = 0; f < 2; f++) far_ctx_free(&c[f]);
        assert_int_equal(zt_rm_rf(dir), 0);
    }
}

ZT_MAIN(
    cmocka_unit_test(test_move_bits),
    cmocka_unit_test(test_round_dt),
    cmocka_unit_test(test_add_div),
    cmocka_unit_test(test_pack_unpack),
    cmocka_unit_test(test_absmax_sumsq),
    cmocka_unit_test(test_adam),
    cmocka_unit_test(test_charge_and_hooks),
    cmocka_unit_test(test_far_device), cmocka_unit_test(test_far_offload),
    cmocka_unit_test(test_far_checkpoint))
