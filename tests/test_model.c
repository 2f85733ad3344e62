/* test_model.c: the MLP (spec string, params, init, forward/backward checked
 * by finite differences), the synthetic data, the host kernels' accumulation
 * orders (bitwise against naive loops) and the device memory accounting. */
#include "testutil.h"
#include "core/zn_math.h"
#include "engine/model.h"
#include "engine/model_run.h"
#include "engine/data.h"
#include "device/device.h"
#include "core/rng.h"

static const ZnKernels *K = &zn_host_kernels;
/* the host device every kernel call below runs on (set up in main) */
static ZnDevice HD;
#define DEV (&HD)

/* ------------------------------------------------------------------------ */
/* model spec */

/* spec: Z-MOD-001 */
/* spec: Z-MOD-002 */
static void test_parse_good(void **state) {
    (void)state;
    ZnModel m;
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("mlp:5,7,6,4", &m, &err), 0);
    assert_int_equal(m.nlayers, 3);
    assert_int_equal(m.nparams, 6);
    const int dims[] = {5, 7, 6, 4};
    for (int i = 0; i < 4; i++) assert_int_equal(m.dims[i], dims[i]);
    const char *names[] = {"layers.0.weight", "layers.0.bias", "layers.1.weight",
                           "layers.1.bias", "layers.2.weight", "layers.2.bias"};
    for (int l = 0; l < 3; l++) {
        const ZnParamSpec *w = &m.params[2 * l], *b = &m.params[2 * l + 1];
        assert_string_equal(w->name, names[2 * l]);
        assert_string_equal(b->name, names[2 * l + 1]);
        assert_int_equal(w->ndim, 2);
        assert_int_equal(w->shape[0], dims[l + 1]);
        assert_int_equal(w->shape[1], dims[l]);
        assert_int_equal(w->numel, dims[l + 1] * dims[l]);
        assert_int_equal(b->ndim, 1);
        assert_int_equal(b->shape[0], dims[l + 1]);
        assert_int_equal(b->numel, dims[l + 1]);
        assert_int_equal(m.layer_param[l][0], 2 * l);
        assert_int_equal(m.layer_param[l][1], 2 * l + 1);
    }
    assert_int_equal(zn_model_numel(&m), 5 * 7 + 7 + 7 * 6 + 6 + 6 * 4 + 4);
    assert_int_equal(zn_model_hidden_size(&m), 7);

    /* the extremes: one layer, the largest size, leading zeros */
    assert_int_equal(zn_model_parse("mlp:1048576,1", &m, &err), 0);
    assert_int_equal(m.nlayers, 1);
    assert_int_equal(m.params[0].numel, 1048576L);
    assert_int_equal(zn_model_hidden_size(&m), 1048576L);
    assert_int_equal(zn_model_parse("mlp:007,3", &m, &err), 0);
    assert_int_equal(m.dims[0], 7);

    /* ZN_MAX_LAYERS layers exactly */
    char spec[1024] = "mlp:2";
    for (int i = 0; i < ZN_MAX_LAYERS; i++) strcat(spec, ",3");
    assert_int_equal(zn_model_parse(spec, &m, &err), 0);
    assert_int_equal(m.nlayers, ZN_MAX_LAYERS);
    assert_string_equal(m.params[2 * ZN_MAX_LAYERS - 1].name, "layers.63.bias");
}

/* spec: Z-MOD-001 */
static void test_parse_bad(void **state) {
    (void)state;
    char many[1024] = "mlp:2";
    for (int i = 0; i < ZN_MAX_LAYERS + 1; i++) strcat(many, ",3");
    struct { const char *spec, *msg; } cases[] = {
        {"mlp:4,x", "model spec 'mlp:4,x': 'x' is not a positive integer"},
        {"cnn:3", "model spec 'cnn:3': unknown model 'cnn' (expected mlp:D0,D1,..., gpt2:key=value"},
        {"mlp:4", "model spec 'mlp:4': need at least two sizes (D0 and the class count)"},
        {"mlp:0,3", "'0' is not a positive integer"},
        {"mlp:-4,3", "'-4' is not a positive integer"},
        {"mlp:+4,3", "'+4' is not a positive integer"},
        {"mlp:4, 3", "' 3' is not a positive integer"},
        {"mlp:4,3 ", "'3 ' is not a positive integer"},
        {"mlp:4,3x", "'3x' is not a positive integer"},
        {"mlp:4.5,3", "'4.5' is not a positive integer"},
        {"mlp:4,,3", "model spec 'mlp:4,,3': empty size"},
        {"mlp:4,3,", "empty size"},
        {"mlp:,4,3", "empty size"},
        {"mlp:", "empty size"},
        {"mlp", "model spec 'mlp': missing sizes"},
        {"", "unknown model ''"},
        {"MLP:4,3", "unknown model 'MLP'"},
        {" mlp:4,3", "unknown model ' mlp'"},
        {"mlp:1048577,3", "'1048577' is too large (at most 1048576)"},
        {"mlp:99999999999999999999999,3", "'99999999999999999999999' is too large"},
        {many, "too many layers (at most 64)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ZnModel m;
        ZnErr err = {0};
        int rc = zn_model_parse(cases[i].spec, &m, &err);
        if (rc != ZN_E_USAGE) fail_msg("spec '%s': rc %d, expected ZN_E_USAGE", cases[i].spec, rc);
        assert_int_equal(err.code, ZN_E_USAGE);
        assert_str_contains(err.msg, cases[i].msg);
    }
    ZnModel m;
    ZnErr err = {0};
    assert_int_equal(zn_model_parse(NULL, &m, &err), ZN_E_USAGE);
}

/* ------------------------------------------------------------------------ */
/* init */

/* spec: Z-MOD-003 */
/* spec: Z-DATA-001 */
static void test_init_rule_and_split(void **state) {
    (void)state;
    ZnModel m;
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("mlp:33,17,10", &m, &err), 0);
    const uint64_t seed = 1234;
    for (int p = 0; p < m.nparams; p++) {
        long n = m.params[p].numel;
        float *full = malloc(n * sizeof(float)), *again = malloc(n * sizeof(float));
        float *pieces = malloc(n * sizeof(float)), *other = malloc(n * sizeof(float));
        zn_model_init_param(&m, p, seed, 0, n, full);
        zn_model_init_param(&m, p, seed, 0, n, again);
        /* any split into [lo, hi) pieces gives the same bits */
        long cuts[] = {0, 1, n / 3, n / 3 + 1, n - 1, n};
        for (int c = 0; c + 1 < 6; c++)
            if (cuts[c + 1] > cuts[c]) zn_model_init_param(&m, p, seed, cuts[c], cuts[c + 1], pieces + cuts[c]);
        zn_model_init_param(&m, p, seed + 1, 0, n, other);
        int fan_in = m.dims[p / 2];
        float bound = 1.0f / sqrtf((float)fan_in);
        uint64_t key = zn_mix64(seed) ^ zn_hash_str(m.params[p].name);
        long differ = 0;
        float maxabs = 0.0f;
        double mean = 0.0;
        for (long i = 0; i < n; i++) {
            assert_true(zt_same_bits(full[i], again[i]));
            assert_true(zt_same_bits(full[i], pieces[i]));
            /* the documented formula, bit for bit */
            float want = (2.0f * zn_rng_uniform(key, (uint64_t)i) - 1.0f) * bound;
            assert_true(zt_same_bits(full[i], want));
            assert_true(full[i] >= -bound && full[i] < bound);
            if (fabsf(full[i]) > maxabs) maxabs = fabsf(full[i]);
            mean += full[i];
            differ += !zt_same_bits(full[i], other[i]);
        }
        assert_true(differ > n / 2);   /* another seed, other values */
        if (n >= 100) {
            assert_true(maxabs > 0.9f * bound);    /* the range is used */
            assert_true(fabs(mean / n) < 0.2 * bound);
        }
        free(full); free(again); free(pieces); free(other);
    }
    /* weight and bias of one layer are different streams (keyed by name) */
    float w0, b0;
    zn_model_init_param(&m, 0, seed, 0, 1, &w0);
    zn_model_init_param(&m, 1, seed, 0, 1, &b0);
    assert_false(zt_same_bits(w0, b0));
}

/* ------------------------------------------------------------------------ */
/* data */

/* spec: Z-DATA-001 */
/* spec: Z-DATA-002 */
static void test_data_split_invariant(void **state) {
    (void)state;
    ZnData d, d2, d3;
    assert_int_equal(zn_data_init(&d, 13, 5, 42), 0);
    assert_int_equal(zn_data_init(&d2, 13, 5, 42), 0);
    assert_int_equal(zn_data_init(&d3, 13, 5, 43), 0);
    enum { B = 24 };
    float x[B * 13], xs[B * 13], x2[B * 13], x3[B * 13];
    int y[B], ys[B], y2[B], y3[B];
    zn_data_batch(&d, 100, B, x, y);
    /* the same samples in pieces: 1 + 4 + 19 rows */
    zn_data_batch(&d, 100, 1, xs, ys);
    zn_data_batch(&d, 101, 4, xs + 1 * 13, ys + 1);
    zn_data_batch(&d, 105, 19, xs + 5 * 13, ys + 5);
    zn_data_batch(&d2, 100, B, x2, y2);
    zn_data_batch(&d3, 100, B, x3, y3);
    long differ = 0;
    for (int i = 0; i < B * 13; i++) {
        assert_true(zt_same_bits(x[i], xs[i]));
        assert_true(zt_same_bits(x[i], x2[i]));
        assert_true(x[i] >= -1.0f && x[i] < 1.0f);
        differ += !zt_same_bits(x[i], x3[i]);
    }
    assert_true(differ > B * 13 / 2);
    for (int i = 0; i < B; i++) {
        assert_int_equal(y[i], ys[i]);
        assert_int_equal(y[i], y2[i]);
    }
    /* the sample counter is 64-bit: an index far past 2^32 / d_in is its own
       sample, not a wrapped copy of a small one */
    float xa[13], xb[13];
    int ya, yb;
    long far = (1L << 40) + 100;
    zn_data_batch(&d, far, 1, xa, &ya);
    zn_data_batch(&d, 100, 1, xb, &yb);
    int same = 0;
    for (int j = 0; j < 13; j++) same += zt_same_bits(xa[j], xb[j]);
    assert_true(same < 13);
    zn_data_free(&d);
    zn_data_free(&d);  /* twice is harmless */
    zn_data_free(&d2);
    zn_data_free(&d3);
}

/* spec: Z-DATA-003 */
/* spec: Z-DATA-004 */
static void test_data_labels(void **state) {
    (void)state;
    ZnData d;
    enum { DIN = 32, C = 10, N = 4000, CHUNK = 250 };
    assert_int_equal(zn_data_init(&d, DIN, C, 7), 0);
    /* the teacher is in [-1, 1) and not all one value */
    for (int i = 0; i < DIN * C; i++) assert_true(d.teacher[i] >= -1.0f && d.teacher[i] < 1.0f);
    assert_false(zt_same_bits(d.teacher[0], d.teacher[1]));
    int count[C] = {0};
    float *x = malloc(sizeof(float) * CHUNK * DIN);
    int y[CHUNK];
    for (long first = 0; first < N; first += CHUNK) {
        zn_data_batch(&d, first, CHUNK, x, y);
        for (int r = 0; r < CHUNK; r++) {
            assert_true(y[r] >= 0 && y[r] < C);
            /* the label rule recomputed: scores in j order, ties to the lowest */
            int best = 0;
            float bs = 0.0f;
            for (int c = 0; c < C; c++) {
                float s = 0.0f;
                for (int j = 0; j < DIN; j++) s += d.teacher[c * DIN + j] * x[r * DIN + j];
                if (c == 0 || s > bs) { best = c; bs = s; }
            }
            assert_int_equal(y[r], best);
            count[y[r]]++;
        }
    }
    /* every class appears and none swamps the others (a random linear
       teacher is not exactly balanced: rows with larger norms win more) */
    print_message("class counts:");
    for (int c = 0; c < C; c++) print_message(" %d", count[c]);
    print_message("\n");
    for (int c = 0; c < C; c++) {
        if (count[c] < N / C / 3 || count[c] > N / C * 2)
            fail_msg("class %d has %d of %d samples", c, count[c], N);
    }
    free(x);
    zn_data_free(&d);

    /* one class: every label 0; bad sizes refused */
    assert_int_equal(zn_data_init(&d, 3, 1, 7), 0);
    float x1[3 * 4];
    int y1[4];
    zn_data_batch(&d, 0, 4, x1, y1);
    for (int i = 0; i < 4; i++) assert_int_equal(y1[i], 0);
    zn_data_free(&d);
    assert_int_equal(zn_data_init(&d, 0, 3, 7), -1);
    zn_data_free(&d);
    assert_int_equal(zn_data_init(&d, 3, 0, 7), -1);
    zn_data_free(&d);
}

/* ------------------------------------------------------------------------ */
/* kernels: bitwise against naive loops with the documented order */

/* values over a wide range of magnitudes, so that a different summation
 * order would change low bits (checked below) */
static void fill(float *a, long n, uint64_t key) {
    for (long i = 0; i < n; i++) {
        float u = zn_rng_uniform(key, 2 * (uint64_t)i);
        float e = zn_rng_uniform(key, 2 * (uint64_t)i + 1);
        a[i] = (2.0f * u - 1.0f) * ldexpf(1.0f, (int)(e * 16.0f) - 8);
    }
}

static float *nan_filled(long n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (long i = 0; i < n; i++) p[i] = NAN;  /* a kernel must overwrite all of C */
    return p;
}

static const int gemm_sizes[][3] = {
    {1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {6, 8, 256}, {13, 24, 257},
    {97, 270, 513}, {5, 9, 0}, {0, 4, 3}, {4, 0, 3}, {2, 3, 1000},
};
#define NSIZES (int)(sizeof gemm_sizes / sizeof gemm_sizes[0])

/* which: 0 nt (with and without bias), 1 nn, 2 tn */
static void check_gemm(int which) {
    int order_sensitive = 0;
    for (int s = 0; s < NSIZES; s++) {
        int M = gemm_sizes[s][0], N = gemm_sizes[s][1], Kd = gemm_sizes[s][2];
        long na = (long)M * Kd, nb = (long)N * Kd;
        float *A = malloc((na ? na : 1) * sizeof(float)), *B = malloc((nb ? nb : 1) * sizeof(float));
        float *bias = malloc((N ? N : 1) * sizeof(float));
        fill(A, na, 11 + s);
        fill(B, nb, 23 + s);
        fill(bias, N, 37 + s);
        for (int with_bias = 0; with_bias < (which == 0 ? 2 : 1); with_bias++) {
            float *C = nan_filled((long)M * N);
            const float *bb = with_bias ? bias : NULL;
            if (which == 0) K->gemm_nt(DEV, M, N, Kd, A, B, bb, C);
            else if (which == 1) K->gemm_nn(DEV, M, N, Kd, A, B, C);
            else K->gemm_tn(DEV, M, N, Kd, A, B, C);
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    float acc = 0.0f, rev = 0.0f;
                    for (int k = 0; k < Kd; k++) {
                        float a = which == 2 ? A[(long)k * M + i] : A[(long)i * Kd + k];
                        float b = which == 0 ? B[(long)j * Kd + k] : B[(long)k * N + j];
                        /* the product rounded on its own, whatever the
                           build's contraction flags: the reference never fuses */
                        volatile float prod = a * b;
                        acc = acc + prod;
                    }
                    for (int k = Kd - 1; k >= 0; k--) {
                        float a = which == 2 ? A[(long)k * M + i] : A[(long)i * Kd + k];
                        float b = which == 0 ? B[(long)j * Kd + k] : B[(long)k * N + j];
                        volatile float prod = a * b;
                        rev = rev + prod;
                    }
                    if (bb) { acc = acc + bb[j]; rev = rev + bb[j]; }
                    float got = C[(long)i * N + j];
                    if (!zt_same_bits(got, acc))
                        fail_msg("gemm %d %dx%dx%d bias %d: C[%d][%d] = %a, k-ordered sum %a",
                                 which, M, N, Kd, with_bias, i, j, got, acc);
                    order_sensitive += !zt_same_bits(acc, rev);
                }
            }
            free(C);
        }
        free(A); free(B); free(bias);
    }
    /* the data do tell orders apart, so equality above pins the k order */
    assert_true(order_sensitive > 100);
}

/* spec: Z-MOD-006 */
static void test_gemm_nt_bitwise(void **state) { (void)state; check_gemm(0); }
/* spec: Z-MOD-006 */
static void test_gemm_nn_bitwise(void **state) { (void)state; check_gemm(1); }
/* spec: Z-MOD-006 */
static void test_gemm_tn_bitwise(void **state) { (void)state; check_gemm(2); }

/* spec: Z-MOD-007 */
static void test_colsum_bitwise(void **state) {
    (void)state;
    const int sizes[][2] = {{1, 1}, {7, 5}, {300, 33}, {0, 4}};
    for (int s = 0; s < 4; s++) {
        int M = sizes[s][0], N = sizes[s][1];
        float *A = malloc(((long)M * N + 1) * sizeof(float));
        fill(A, (long)M * N, 5 + s);
        float *out = nan_filled(N);
        K->colsum(DEV, M, N, A, out);
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int i = 0; i < M; i++) acc = acc + A[(long)i * N + j];
            assert_true(zt_same_bits(out[j], acc));
        }
        free(A); free(out);
    }
}

/* spec: Z-MOD-008 */
static void test_relu(void **state) {
    (void)state;
    const float x[] = {-2.0f, -0.0f, 0.0f, 1e-30f, 3.5f, NAN, -INFINITY, INFINITY};
    const float want[] = {0.0f, 0.0f, 0.0f, 1e-30f, 3.5f, 0.0f, 0.0f, INFINITY};
    float y[8], dx[8];
    const float dy[] = {1, 2, 3, 4, 5, 6, 7, 8};
    K->relu_fwd(DEV, 8, x, y);
    for (int i = 0; i < 8; i++) assert_true(zt_same_bits(y[i], want[i]));  /* -0 -> +0 */
    K->relu_bwd(DEV, 8, y, dy, dx);
    const float wantd[] = {0, 0, 0, 4, 5, 0, 0, 8};
    for (int i = 0; i < 8; i++) assert_true(zt_same_bits(dx[i], wantd[i]));
}

/* ------------------------------------------------------------------------ */
/* softmax cross-entropy */

/* spec: Z-MOD-009 */
static void test_softmax_xent(void **state) {
    (void)state;
    enum { B = 5, C = 7 };
    float z[B * C], d[B * C];
    int y[B] = {0, 6, 3, 3, 1};
    fill(z, B * C, 99);
    z[3 * C + 2] = 1000.0f;  /* a huge logit: the max shift keeps expf finite */
    const float gs = 0.25f;
    float loss = K->softmax_xent(DEV, B, C, z, y, gs, d);
    float loss2 = K->softmax_xent(DEV, B, C, z, y, gs, NULL);
    assert_true(zt_same_bits(loss, loss2));
    assert_true(isfinite(loss));

    /* double-precision reference */
    double ref = 0.0;
    for (int b = 0; b < B; b++) {
        double m = z[b * C], s = 0.0;
        for (int c = 1; c < C; c++) if (z[b * C + c] > m) m = z[b * C + c];
        for (int c = 0; c < C; c++) s += exp((double)z[b * C + c] - m);
        ref += log(s) - ((double)z[b * C + y[b]] - m);
        double rowsum = 0.0;
        for (int c = 0; c < C; c++) {
            double p = exp((double)z[b * C + c] - m) / s;
            double want = (p - (c == y[b])) * gs;
            assert_true(fabs(d[b * C + c] - want) <= 1e-6 * fabs(want) + 1e-7);
            rowsum += d[b * C + c];
        }
        assert_true(fabs(rowsum) < 1e-6);  /* softmax sums to one, minus the one-hot */
    }
    ref /= B;
    assert_true(fabs(loss - ref) <= 1e-6 * fabs(ref));

    /* the formula to the bit, as the CUDA twin must compute it */
    float total = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *r = z + b * C;
        float m = r[0], s = 0.0f;
        for (int c = 1; c < C; c++) if (r[c] > m) m = r[c];
        for (int c = 0; c < C; c++) s += zn_expf(r[c] - m);
        total += zn_logf(s) - (r[y[b]] - m);
        for (int c = 0; c < C; c++)
            assert_true(zt_same_bits(d[b * C + c], (zn_expf(r[c] - m) / s - (c == y[b] ? 1.0f : 0.0f)) * gs));
    }
    assert_true(zt_same_bits(loss, total / (float)B));

    /* uniform logits: loss ln C, gradient (1/C - onehot) * scale */
    float zu[C] = {0};
    int yu = 2;
    float du[C];
    float lu = K->softmax_xent(DEV, 1, C, zu, &yu, 1.0f, du);
    assert_true(fabsf(lu - logf((float)C)) < 1e-6f);
    assert_true(fabsf(du[2] - (1.0f / C - 1.0f)) < 1e-6f);

    /* no rows: loss 0, nothing touched */
    float untouched = 5.0f;
    assert_true(zt_same_bits(K->softmax_xent(DEV, 0, C, zu, &yu, 1.0f, &untouched), 0.0f));
    assert_true(untouched == 5.0f);
}

/* ------------------------------------------------------------------------ */
/* layers */

/* A small model with float buffers for every activation and gradient. */
typedef struct {
    ZnModel m;
    int B;
    float *W[ZN_MAX_LAYERS], *b[ZN_MAX_LAYERS];
    float *act[ZN_MAX_LAYERS + 1];  /* act[0] = x, act[l+1] = relu(y_l) (logits for the last) */
    float *y[ZN_MAX_LAYERS];
    float *dW[ZN_MAX_LAYERS], *db[ZN_MAX_LAYERS];
    float *dact[ZN_MAX_LAYERS + 1];
    float *scratch;
    int *labels;
} Net;

static void net_init(Net *n, const char *spec, int B, uint64_t seed) {
    memset(n, 0, sizeof *n);
    ZnErr err = {0};
    assert_int_equal(zn_model_parse(spec, &n->m, &err), 0);
    n->B = B;
    const ZnModel *m = &n->m;
    long widest = zn_model_hidden_size(m);
    for (int l = 0; l < m->nlayers; l++) {
        long nw = m->params[2 * l].numel, nbias = m->params[2 * l + 1].numel;
        n->W[l] = malloc(nw * sizeof(float));
        n->b[l] = malloc(nbias * sizeof(float));
        n->dW[l] = nan_filled(nw);
        n->db[l] = nan_filled(nbias);
        zn_model_init_param(m, 2 * l, seed, 0, nw, n->W[l]);
        zn_model_init_param(m, 2 * l + 1, seed, 0, nbias, n->b[l]);
        n->y[l] = malloc((long)B * m->dims[l + 1] * sizeof(float));
    }
    for (int l = 0; l <= m->nlayers; l++) {
        n->act[l] = malloc((long)B * m->dims[l] * sizeof(float));
        n->dact[l] = nan_filled((long)B * m->dims[l]);
    }
    n->scratch = malloc((long)B * widest * sizeof(float));
    n->labels = malloc(B * sizeof(int));
    ZnData d;
    assert_int_equal(zn_data_init(&d, m->dims[0], m->dims[m->nlayers], seed + 1), 0);
    zn_data_batch(&d, 0, B, n->act[0], n->labels);
    zn_data_free(&d);
}

static void net_free(Net *n) {
    for (int l = 0; l < n->m.nlayers; l++) {
        free(n->W[l]); free(n->b[l]); free(n->dW[l]); free(n->db[l]); free(n->y[l]);
    }
    for (int l = 0; l <= n->m.nlayers; l++) { free(n->act[l]); free(n->dact[l]); }
    free(n->scratch);
    free(n->labels);
}

/* forward through zn_layer_forward, then the loss and d loss / d logits */
static float net_forward_backward(Net *n) {
    const ZnModel *m = &n->m;
    int L = m->nlayers;
    for (int l = 0; l < L; l++)
        zn_layer_forward(DEV, m, l, n->B, n->W[l], n->b[l], n->act[l], n->y[l],
                         l < L - 1 ? n->act[l + 1] : NULL);
    const float *logits = n->y[L - 1];
    float loss = K->softmax_xent(DEV, n->B, m->dims[L], logits, n->labels, 1.0f / n->B, n->dact[L]);
    for (int l = L - 1; l >= 0; l--)
        zn_layer_backward(DEV, m, l, n->B, n->W[l], n->act[l], l < L - 1 ? n->act[l + 1] : NULL,
                          n->dact[l + 1], n->dW[l], n->db[l], n->dact[l], n->scratch);
    return loss;
}

/* An independent forward pass in double: the reference for the finite
 * differences. x, W, b: float values read as doubles, with one element
 * possibly overridden (which: 0 none, 1 weight, 2 bias, 3 input). Also
 * returns the smallest |pre-activation| of the hidden layers (the distance
 * to a ReLU kink). */
static double ref_loss(const Net *n, int which, int lw, long idx, double val, double *margin) {
    const ZnModel *m = &n->m;
    int L = m->nlayers, B = n->B;
    double *h = malloc((long)B * zn_model_hidden_size(m) * sizeof(double));
    double *h2 = malloc((long)B * zn_model_hidden_size(m) * sizeof(double));
    for (long i = 0; i < (long)B * m->dims[0]; i++)
        h[i] = (which == 3 && i == idx) ? val : n->act[0][i];
    double mg = INFINITY, loss = 0.0;
    for (int l = 0; l < L; l++) {
        int din = m->dims[l], dn = m->dims[l + 1];
        for (int r = 0; r < B; r++) {
            for (int j = 0; j < dn; j++) {
                double s = (which == 2 && lw == l && idx == j) ? val : n->b[l][j];
                for (int c = 0; c < din; c++) {
                    long wi = (long)j * din + c;
                    double w = (which == 1 && lw == l && idx == wi) ? val : n->W[l][wi];
                    s += w * h[(long)r * din + c];
                }
                if (l < L - 1) {
                    if (fabs(s) < mg) mg = fabs(s);
                    s = s > 0 ? s : 0;
                }
                h2[(long)r * dn + j] = s;
            }
        }
        double *t = h; h = h2; h2 = t;
    }
    int C = m->dims[L];
    for (int r = 0; r < B; r++) {
        double mx = h[r * C];
        for (int c = 1; c < C; c++) if (h[r * C + c] > mx) mx = h[r * C + c];
        double s = 0.0;
        for (int c = 0; c < C; c++) s += exp(h[r * C + c] - mx);
        loss += log(s) - (h[r * C + n->labels[r]] - mx);
    }
    free(h); free(h2);
    if (margin) *margin = mg;
    return loss / B;
}

/* analytic g against the central difference of the double forward */
static double fd_check(const Net *n, int which, int l, long idx, float g, double base) {
    const double eps = 1e-4;
    double lp = ref_loss(n, which, l, idx, base + eps, NULL);
    double lm = ref_loss(n, which, l, idx, base - eps, NULL);
    double num = (lp - lm) / (2 * eps);
    double rel = fabs(g - num) / fmax(fabs(num), 1e-6);
    if (rel >= 1e-3)
        fail_msg("finite differences: kind %d layer %d element %ld: analytic %.9g numeric %.9g (rel %.3g)",
                 which, l, idx, g, num, rel);
    return rel;
}

/* spec: Z-MOD-004 */
/* spec: Z-MOD-005 */
/* spec: Z-MOD-010 */
static void test_finite_differences(void **state) {
    (void)state;
    Net n;
    net_init(&n, "mlp:5,7,6,4", 3, 2024);
    float loss = net_forward_backward(&n);
    double margin;
    double ref = ref_loss(&n, 0, 0, 0, 0.0, &margin);
    assert_true(fabs(loss - ref) <= 1e-6 * fabs(ref));
    /* perturbations of 1e-4 move a pre-activation by far less than this, so
       no difference quotient straddles a ReLU kink */
    assert_true(margin > 1e-3);
    double worst = 0.0;
    long checked = 0;
    for (int l = 0; l < n.m.nlayers; l++) {
        for (long i = 0; i < n.m.params[2 * l].numel; i++, checked++)
            worst = fmax(worst, fd_check(&n, 1, l, i, n.dW[l][i], n.W[l][i]));
        for (long i = 0; i < n.m.params[2 * l + 1].numel; i++, checked++)
            worst = fmax(worst, fd_check(&n, 2, l, i, n.db[l][i], n.b[l][i]));
    }
    for (long i = 0; i < (long)n.B * n.m.dims[0]; i++, checked++)
        worst = fmax(worst, fd_check(&n, 3, 0, i, n.dact[0][i], n.act[0][i]));
    assert_int_equal(checked, zn_model_numel(&n.m) + n.B * 5);
    print_message("finite differences: %ld gradients, worst relative error %.2e\n", checked, worst);
    net_free(&n);
}

/* The layer functions are exactly the documented kernel calls. */
/* spec: Z-MOD-004 */
/* spec: Z-MOD-005 */
static void test_layer_is_kernel_composition(void **state) {
    (void)state;
    Net n;
    net_init(&n, "mlp:9,10,11", 4, 5);
    net_forward_backward(&n);
    const ZnModel *m = &n.m;
    int B = n.B;
    /* layer 0 forward: gemm_nt then relu */
    float y0[4 * 10], a0[4 * 10];
    K->gemm_nt(DEV, B, 10, 9, n.act[0], n.W[0], n.b[0], y0);
    K->relu_fwd(DEV, B * 10, y0, a0);
    for (int i = 0; i < B * 10; i++) {
        assert_true(zt_same_bits(y0[i], n.y[0][i]));
        assert_true(zt_same_bits(a0[i], n.act[1][i]));
    }
    /* last layer: dy = dout; dW = dy^T x, db = colsum(dy), dx = dy W */
    float dW1[11 * 10], db1[11], dx1[4 * 10];
    K->gemm_tn(DEV, 11, 10, B, n.dact[2], n.act[1], dW1);
    K->colsum(DEV, B, 11, n.dact[2], db1);
    K->gemm_nn(DEV, B, 10, 11, n.dact[2], n.W[1], dx1);
    for (int i = 0; i < 110; i++) assert_true(zt_same_bits(dW1[i], n.dW[1][i]));
    for (int i = 0; i < 11; i++) assert_true(zt_same_bits(db1[i], n.db[1][i]));
    for (int i = 0; i < B * 10; i++) assert_true(zt_same_bits(dx1[i], n.dact[1][i]));
    /* hidden layer: dy = relu_bwd(a, dout), then the same three */
    float dy0[4 * 10], dW0[10 * 9], db0[10];
    K->relu_bwd(DEV, B * 10, n.act[1], n.dact[1], dy0);
    K->gemm_tn(DEV, 10, 9, B, dy0, n.act[0], dW0);
    K->colsum(DEV, B, 10, dy0, db0);
    for (int i = 0; i < 90; i++) assert_true(zt_same_bits(dW0[i], n.dW[0][i]));
    for (int i = 0; i < 10; i++) assert_true(zt_same_bits(db0[i], n.db[0][i]));
    /* the last layer does not write a */
    float a_last[4 * 11], y_last[4 * 11];
    for (int i = 0; i < B * 11; i++) a_last[i] = 7.0f;
    zn_layer_forward(DEV, m, 1, B, n.W[1], n.b[1], n.act[1], y_last, a_last);
    for (int i = 0; i < B * 11; i++) {
        assert_true(a_last[i] == 7.0f);
        assert_true(zt_same_bits(y_last[i], n.y[1][i]));
    }
    /* dx == NULL: no input gradient, the rest unchanged */
    float dW0b[90];
    zn_layer_backward(DEV, m, 0, B, n.W[0], n.act[0], n.act[1], n.dact[1], dW0b, db0, NULL, n.scratch);
    for (int i = 0; i < 90; i++) assert_true(zt_same_bits(dW0b[i], n.dW[0][i]));
    net_free(&n);
}

/* spec: Z-MOD-011 */
static void test_first_loss_is_ln_c(void **state) {
    (void)state;
    Net n;
    net_init(&n, "mlp:32,64,64,10", 256, 3);
    float loss = net_forward_backward(&n);
    print_message("first loss %.4f, ln 10 = %.4f\n", loss, log(10.0));
    assert_true(fabs(loss - log(10.0)) < 0.5);
    net_free(&n);
}

/* ------------------------------------------------------------------------ */
/* device memory */

/* spec: Z-MEM-001 */
static void test_mem_cat_names(void **state) {
    (void)state;
    const char *want[] = {"params16", "master32", "grads", "exp_avg", "exp_avg_sq",
                          "buckets", "activations", "workspace", "hpz_secondary"};
    assert_int_equal(ZN_MEM_NCAT, 9);
    for (int c = 0; c < ZN_MEM_NCAT; c++) assert_string_equal(zn_mem_cat_name((ZnMemCat)c), want[c]);
    assert_string_equal(zn_mem_cat_name(ZN_MEM_NCAT), "unknown");
    ZnDevice d;
    zn_device_host_init(&d);
    assert_string_equal(d.name, "host");
    assert_ptr_equal(d.k, &zn_host_kernels);
    assert_int_equal(d.capacity, 0);
    assert_int_equal(d.meta, 0);
    ZnErr err = {0};
    assert_null(zn_dev_alloc(&d, 8, ZN_MEM_NCAT, &err));
    assert_int_equal(err.code, ZN_E_INTERNAL);
}

/* the same sequence of allocations, for the real and the meta device */
static void mem_sequence(ZnDevice *d) {
    ZnErr err = {0};
    void *a = zn_dev_alloc(d, 100, ZN_MEM_PARAMS16, &err);
    void *b = zn_dev_alloc(d, 1000, ZN_MEM_GRADS, &err);
    void *c = zn_dev_alloc(d, 50, ZN_MEM_PARAMS16, &err);
    assert_non_null(a); assert_non_null(b); assert_non_null(c);
    assert_int_equal(d->mem.cur[ZN_MEM_PARAMS16], 150);
    assert_int_equal(d->mem.peak[ZN_MEM_PARAMS16], 150);
    assert_int_equal(d->mem.cur_total, 1150);
    assert_int_equal(d->mem.nallocs, 3);
    zn_dev_free(d, a);
    zn_dev_free(d, b);
    assert_int_equal(d->mem.cur[ZN_MEM_PARAMS16], 50);
    assert_int_equal(d->mem.peak[ZN_MEM_PARAMS16], 150);
    assert_int_equal(d->mem.cur[ZN_MEM_GRADS], 0);
    assert_int_equal(d->mem.peak[ZN_MEM_GRADS], 1000);
    assert_int_equal(d->mem.cur_total, 50);
    assert_int_equal(d->mem.peak_total, 1150);
    assert_int_equal(d->mem.nallocs, 1);
    /* a later, smaller high-water mark only shows after a reset */
    void *e = zn_dev_alloc(d, 300, ZN_MEM_ACTIVATIONS, &err);
    zn_dev_free(d, e);
    assert_int_equal(d->mem.peak_total, 1150);
    zn_mem_reset_peak(&d->mem);
    assert_int_equal(d->mem.peak_total, 50);
    assert_int_equal(d->mem.peak[ZN_MEM_GRADS], 0);
    assert_int_equal(d->mem.peak[ZN_MEM_ACTIVATIONS], 0);
    e = zn_dev_alloc(d, 300, ZN_MEM_ACTIVATIONS, &err);
    zn_dev_free(d, e);
    assert_int_equal(d->mem.peak[ZN_MEM_ACTIVATIONS], 300);
    assert_int_equal(d->mem.peak_total, 350);
    zn_dev_free(d, c);
    zn_dev_free(d, NULL);  /* a no-op */
    assert_int_equal(d->mem.cur_total, 0);
    assert_int_equal(d->mem.nallocs, 0);
    for (int k = 0; k < ZN_MEM_NCAT; k++) assert_int_equal(d->mem.cur[k], 0);
}

/* spec: Z-MEM-002 */
static void test_mem_accounting(void **state) {
    (void)state;
    ZnDevice d;
    zn_device_host_init(&d);
    mem_sequence(&d);
}

/* The model run's block pool on the host (model.c): a released block gives
 * its charge back at once and comes back zero-filled for the next request
 * of the same sizes and category, the counters stepping exactly as with
 * fresh blocks; other sizes free the stale idle blocks; a simulated capacity
 * fails a reuse as it fails a fresh block; nothing is left at the end. */
static void test_run_block_pool(void **state) {
    (void)state;
    ZnModel m;
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("mlp:8,8,4", &m, &err), 0);
    ZnDevice d;
    zn_device_host_init(&d);
    ZnModelRun *R = zn_run_new(&m, &d, ZN_BF16, 2, &err);
    assert_non_null(R);
    const ZnMemStats m0 = d.mem;
    float *a = zn_run_talloc(R, 100, ZN_MEM_ACTIVATIONS, &err);   /* 400 bytes, 200 charged */
    float *b = zn_run_falloc(R, 50, ZN_MEM_WORKSPACE, &err);
    assert_non_null(a);
    assert_non_null(b);
    const ZnMemStats m1 = d.mem;
    assert_int_equal(m1.cur[ZN_MEM_ACTIVATIONS] - m0.cur[ZN_MEM_ACTIVATIONS], 200);
    for (int i = 0; i < 100; i++) a[i] = 7.0f;
    for (int i = 0; i < 50; i++) b[i] = 7.0f;
    zn_run_release(R, a);
    zn_run_release(R, b);
    zn_run_release(R, NULL);
    assert_int_equal(d.mem.cur_total, m0.cur_total);
    assert_int_equal(d.mem.nallocs, m0.nallocs);
    /* the same requests: the same blocks, zero-filled, the same counters */
    float *a2 = zn_run_talloc(R, 100, ZN_MEM_ACTIVATIONS, &err), *b2 = zn_run_falloc(R, 50, ZN_MEM_WORKSPACE, &err);
    assert_ptr_equal(a2, a);
    assert_ptr_equal(b2, b);
    for (int i = 0; i < 100; i++) assert_true(zt_same_bits(a2[i], 0.0f));
    for (int i = 0; i < 50; i++) assert_true(zt_same_bits(b2[i], 0.0f));
    assert_memory_equal(&d.mem, &m1, sizeof m1);
    zn_run_release(R, a2);
    /* a capacity the reuse would pass fails it with the fresh block's message */
    d.capacity = d.mem.cur_total + 100;
    assert_null(zn_run_talloc(R, 100, ZN_MEM_ACTIVATIONS, &err));
    assert_int_equal(err.code, ZN_E_NOMEM);
    assert_str_contains(err.msg, "out of simulated device memory: requesting 200 bytes for activations");
    d.capacity = 0;
    /* another size: a new block (the idle one is freed), still accounted */
    float *c = zn_run_talloc(R, 30, ZN_MEM_ACTIVATIONS, &err);
    assert_non_null(c);
    assert_int_equal(d.mem.cur[ZN_MEM_ACTIVATIONS] - m0.cur[ZN_MEM_ACTIVATIONS], 60);
    zn_run_release(R, c);
    zn_run_release(R, b2);
    assert_int_equal(d.mem.cur_total, m0.cur_total);
    zn_run_free(R);
    assert_int_equal(d.mem.nallocs, 0);
    assert_int_equal(d.mem.cur_total, 0);
}

/* spec: Z-MEM-003 */
static void test_mem_capacity(void **state) {
    (void)state;
    for (int meta = 0; meta < 2; meta++) {
        ZnDevice d;
        zn_device_host_init(&d);
        d.capacity = 1000;
        d.meta = meta;
        ZnErr err = {0};
        void *a = zn_dev_alloc(&d, 600, ZN_MEM_MASTER32, &err);
        assert_non_null(a);
        assert_null(zn_dev_alloc(&d, 500, ZN_MEM_EXP_AVG, &err));
        assert_int_equal(err.code, ZN_E_NOMEM);
        assert_string_equal(err.msg,
            "out of simulated device memory: requesting 500 bytes for exp_avg with 600 of 1000 in use");
        /* a failed request changes nothing */
        assert_int_equal(d.mem.cur_total, 600);
        assert_int_equal(d.mem.peak_total, 600);
        assert_int_equal(d.mem.cur[ZN_MEM_EXP_AVG], 0);
        assert_int_equal(d.mem.nallocs, 1);
        /* filling to exactly the capacity is allowed */
        void *b = zn_dev_alloc(&d, 400, ZN_MEM_EXP_AVG_SQ, &err);
        assert_non_null(b);
        assert_null(zn_dev_alloc(&d, 1, ZN_MEM_BUCKETS, &err));
        assert_str_contains(err.msg, "requesting 1 bytes for buckets with 1000 of 1000 in use");
        zn_dev_free(&d, a);
        zn_dev_free(&d, b);
        assert_int_equal(d.mem.cur_total, 0);
        /* a request the counters cannot hold is refused before anything */
        d.capacity = 0;
        assert_null(zn_dev_alloc(&d, SIZE_MAX, ZN_MEM_GRADS, &err));
        assert_int_equal(err.code, ZN_E_NOMEM);
        assert_str_contains(err.msg, "bytes for grads is too large");
        assert_int_equal(d.mem.nallocs, 0);
    }
}

/* spec: Z-MEM-004 */
static void test_mem_meta(void **state) {
    (void)state;
    ZnDevice real, meta;
    zn_device_host_init(&real);
    zn_device_host_init(&meta);
    meta.meta = 1;
    /* a dry run accounts exactly what the real run does */
    mem_sequence(&real);
    mem_sequence(&meta);
    assert_memory_equal(&real.mem, &meta.mem, sizeof real.mem);
    /* a terabyte: accounted, never allocated; tokens unique and non-NULL */
    ZnErr err = {0};
    const size_t TB = (size_t)1 << 40;
    void *t1 = zn_dev_alloc(&meta, TB, ZN_MEM_PARAMS16, &err);
    void *t2 = zn_dev_alloc(&meta, TB, ZN_MEM_MASTER32, &err);
    void *t3 = zn_dev_alloc(&meta, 0, ZN_MEM_WORKSPACE, &err);
    assert_non_null(t1); assert_non_null(t2); assert_non_null(t3);
    assert_ptr_not_equal(t1, t2);
    assert_ptr_not_equal(t2, t3);
    assert_int_equal(meta.mem.cur_total, 2 * (long)TB);
    assert_int_equal(meta.mem.cur[ZN_MEM_MASTER32], (long)TB);
    assert_int_equal(meta.mem.nallocs, 3);
    zn_dev_free(&meta, t1);
    zn_dev_free(&meta, t2);
    zn_dev_free(&meta, t3);
    assert_int_equal(meta.mem.cur_total, 0);
    assert_int_equal(meta.mem.peak_total, 2 * (long)TB);
}

/* spec: Z-MEM-005 */
static void test_mem_zero_aligned(void **state) {
    (void)state;
    ZnDevice d;
    zn_device_host_init(&d);
    ZnErr err = {0};
    const size_t sizes[] = {1, 63, 64, 65, 1000, 4096 * 3 + 7};
    void *ps[6];
    for (int i = 0; i < 6; i++) {
        unsigned char *p = zn_dev_alloc(&d, sizes[i], ZN_MEM_WORKSPACE, &err);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (size_t j = 0; j < sizes[i]; j++) assert_int_equal(p[j], 0);
        memset(p, 0xab, sizes[i]);  /* the whole block is ours (ASan/valgrind check the edges) */
        ps[i] = p;
    }
    /* the requested bytes are what is counted, not the rounded block */
    assert_int_equal(d.mem.cur[ZN_MEM_WORKSPACE], 1 + 63 + 64 + 65 + 1000 + 4096 * 3 + 7);
    void *z1 = zn_dev_alloc(&d, 0, ZN_MEM_WORKSPACE, &err);
    void *z2 = zn_dev_alloc(&d, 0, ZN_MEM_WORKSPACE, &err);
    assert_non_null(z1);
    assert_ptr_not_equal(z1, z2);
    zn_dev_free(&d, z1);
    zn_dev_free(&d, z2);
    for (int i = 0; i < 6; i++) zn_dev_free(&d, ps[i]);
    assert_int_equal(d.mem.cur_total, 0);
    assert_int_equal(d.mem.nallocs, 0);
}

int main(void) {
    zn_device_host_init(&HD);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_init_rule_and_split),
        cmocka_unit_test(test_data_split_invariant),
        cmocka_unit_test(test_data_labels),
        cmocka_unit_test(test_gemm_nt_bitwise),
        cmocka_unit_test(test_gemm_nn_bitwise),
        cmocka_unit_test(test_gemm_tn_bitwise),
        cmocka_unit_test(test_colsum_bitwise),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_layer_is_kernel_composition),
        cmocka_unit_test(test_first_loss_is_ln_c),
        cmocka_unit_test(test_mem_cat_names),
        cmocka_unit_test(test_mem_accounting),
        cmocka_unit_test(test_run_block_pool),
        cmocka_unit_test(test_mem_capacity),
        cmocka_unit_test(test_mem_meta),
        cmocka_unit_test(test_mem_zero_aligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
