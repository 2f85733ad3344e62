/* test_gpt2.c: the GPT-2 model (spec Z-GPT-001..009): specs and parameter
 * counts, the initialisation, and every parameter's gradient from the
 * modules' backward against central differences of an independent
 * double-precision forward written from the formulas. */
#include "testutil.h"
#include "engine/model.h"
#include "engine/data_text.h"
#include "core/zn_math.h"
#include "core/rng.h"
#include "core/config.h"
#include "engine/decay.h"
#include <math.h>

/* spec: Z-GPT-001 */
static void test_presets_and_counts(void **state) {
    (void)state;
    static const struct { const char *spec; long numel; int nparams, T; } cases[] = {
        {"gpt2", 124439808L, 12 * 12 + 4, 1024},
        {"gpt2-medium", 354823168L, 24 * 12 + 4, 1024},
        {"gpt2-large", 774030080L, 36 * 12 + 4, 1024},
        {"gpt2-xl", 1557611200L, 48 * 12 + 4, 1024},
        {"gpt2:n_layer=12", 124439808L, 12 * 12 + 4, 1024},
        {"gpt2-tiny", 256L * 32 + 32 * 32 + 2L * (12 * 32 * 32 + 13 * 32) + 2 * 32, 2 * 12 + 4, 32},
        /* GPT-3's shapes: V*C + P*C + L*(12C^2 + 13C) + 2C, V 50257, P 2048 */
        {"gpt3-small", 125226240L, 12 * 12 + 4, 2048},
        {"gpt3-medium", 355871744L, 24 * 12 + 4, 2048},
        {"gpt3-large", 760300032L, 24 * 12 + 4, 2048},
        {"gpt3-xl", 1315723264L, 24 * 12 + 4, 2048},
        {"gpt3-2.7b", 2651553280L, 32 * 12 + 4, 2048},
        {"gpt3-6.7b", 6658404352L, 32 * 12 + 4, 2048},
        {"gpt3-13b", 12853386240L, 40 * 12 + 4, 2048},
        {"gpt3-175b", 174604259328L, 96 * 12 + 4, 2048},
        {"gpt2:n_layer=128,n_embd=64,n_head=4", 50257L * 64 + 1024 * 64 + 128L * (12 * 64 * 64 + 13 * 64) + 128,
         128 * 12 + 4, 1024},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ZnModel *m = zt_model(cases[i].spec);
        assert_int_equal(m->kind, ZN_MODEL_GPT2);
        assert_int_equal(m->nparams, cases[i].nparams);
        assert_int_equal(zn_model_numel(m), cases[i].numel);
        assert_int_equal(m->seq_len, cases[i].T);
        free(m);
    }
    ZnModel *m = zt_model("gpt2-tiny");
    ZnErr err = {0};
    assert_int_equal(m->gpt2.n_layer, 2);
    assert_int_equal(m->gpt2.n_embd, 32);
    assert_int_equal(m->gpt2.vocab_size, 256);
    assert_string_equal(m->params[0].name, "transformer.wte.weight");
    assert_int_equal(m->params[0].shape[0], 256);
    assert_int_equal(m->params[0].shape[1], 32);
    assert_string_equal(m->params[4].name, "transformer.h.0.attn.c_attn.weight");
    assert_int_equal(m->params[4].shape[0], 32);   /* Conv1D: [in, out] */
    assert_int_equal(m->params[4].shape[1], 96);
    assert_string_equal(m->params[12].name, "transformer.h.0.mlp.c_proj.weight");
    assert_int_equal(m->params[12].shape[0], 128);
    assert_string_equal(m->params[m->nparams - 1].name, "transformer.ln_f.bias");
    assert_int_equal(m->naliases, 1);
    assert_string_equal(m->aliases[0].name, "lm_head.weight");
    assert_int_equal(m->aliases[0].param, 0);
    /* modules: embeddings, 6 per block, ln_f, lm_head (wte again) */
    assert_int_equal(m->nmodules, 1 + 6 * 2 + 2);
    assert_string_equal(m->modules[2].name, "transformer.h.0.attn.c_attn");
    assert_int_equal(m->modules[m->nmodules - 1].nparams, 1);
    assert_int_equal(m->modules[m->nmodules - 1].param[0], 0);
    assert_int_equal(zn_model_rows_per_sample(m), 32);
    assert_int_equal(zn_model_set_seq_len(m, 16, &err), 0);
    assert_int_equal(zn_model_rows_per_sample(m), 16);
    assert_int_equal(zn_model_set_seq_len(m, 33, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "must be 1..32");
    free(m);
}

/* spec: Z-GPT-001 */
static void test_bad_specs(void **state) {
    (void)state;
    static const struct { const char *spec, *msg; } cases[] = {
        {"gpt2:n_layer=0", "n_layer '0' is not a positive integer"},
        {"gpt2:n_layer=x", "n_layer 'x' is not a positive integer"},
        {"gpt2:n_layer=", "n_layer '' is not a positive integer"},
        {"gpt2:n_layer=129", "n_layer 129 is too large (at most 128)"},
        {"gpt2:n_layer=99999999999999999999", "is too large"},
        {"gpt2:depth=3", "unknown key 'depth'"},
        {"gpt2:n_layer", "'n_layer' is not key=value"},
        {"gpt2:n_layer=2,", "'' is not key=value"},
        {"gpt2:n_embd=30,n_head=4", "n_embd 30 is not a multiple of n_head 4"},
        {"gpt2-huge", "unknown model"},
        {"gpt2", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ZnModel *m = malloc(sizeof *m);
        ZnErr err = {0};
        int rc = zn_model_parse(cases[i].spec, m, &err);
        if (!cases[i].msg) {
            assert_int_equal(rc, 0);
        } else {
            if (rc != ZN_E_USAGE) fail_msg("spec '%s': rc %d", cases[i].spec, rc);
            assert_str_contains(err.msg, cases[i].msg);
        }
        free(m);
    }
    ZnModel *m = malloc(sizeof *m);
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("mlp:4,3", m, &err), 0);
    assert_int_equal(zn_model_set_seq_len(m, 4, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "not to an MLP");
    free(m);
}

/* spec: Z-GPT-002 */
static void test_init(void **state) {
    (void)state;
    ZnModel *m = malloc(sizeof *m);
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("gpt2:n_layer=2,n_head=2,n_embd=64,vocab_size=300,n_positions=64", m, &err), 0);
    for (int p = 0; p < m->nparams; p++) {
        const char *name = m->params[p].name;
        long n = m->params[p].numel;
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        zn_model_init_param(m, p, 7, 0, n, a);
        /* any split gives the same bits */
        long cut = n / 3 + 1;
        zn_model_init_param(m, p, 7, 0, cut, b);
        zn_model_init_param(m, p, 7, cut, n, b + cut);
        assert_memory_equal(a, b, (size_t)n * sizeof *a);
        double sum = 0, sq = 0;
        for (long i = 0; i < n; i++) {
            sum += a[i];
            sq += (double)a[i] * a[i];
        }
        double mean = sum / n, sd = sqrt(sq / n - mean * mean);
        if (strstr(name, ".bias")) {
            assert_true(sq == 0.0);
        } else if (strstr(name, ".ln_")) {
            assert_true(mean == 1.0 && sd == 0.0);
        } else {
            double want = strstr(name, "c_proj.weight") ? 0.02 / 2.0 : 0.02;   /* 0.02 / sqrt(2 n_layer) */
            if (fabs(sd - want) > 0.06 * want || fabs(mean) > 0.15 * want)
                fail_msg("%s: mean %g sd %g, expected sd %g", name, mean, sd, want);
        }
        /* another seed gives other weights */
        if (!strstr(name, ".bias") && !strstr(name, ".ln_")) {
            zn_model_init_param(m, p, 8, 0, n, b);
            assert_true(memcmp(a, b, (size_t)n * sizeof *a) != 0);
        }
        free(a);
        free(b);
    }
    free(m);
}

/* spec: Z-GPT-007 */
static void test_tanh(void **state) {
    (void)state;
    double worst = 0;
    for (int i = -40000; i <= 40000; i++) {
        float x = (float)i * 0.00025f;
        double e = fabs((double)zn_tanhf(x) - tanh((double)x));
        if (e > worst) worst = e;
        assert_true(zn_tanhf(-x) == -zn_tanhf(x));
    }
    assert_true(worst < 2e-7);
    assert_true(zn_tanhf(30.0f) == 1.0f && zn_tanhf(-INFINITY) == -1.0f && isnan(zn_tanhf(NAN)));
}

/* ------------------------------------------------------------------------ */
/* the double-precision reference forward */

enum { NL = 2, NH = 2, C = 8, V = 11, P = 6, T = 5, B = 2, BT = B * T };

typedef struct {
    const ZnModel *m;
    const double *w;          /* every param, model order */
    const long *off;          /* param p starts at w + off[p] */
    const int *in, *tgt;      /* [BT] */
} Ref;

static const double *prm(const Ref *r, int p) { return r->w + r->off[p]; }

static void ln(const double *x, const double *g, const double *b, double *out) {
    for (int r = 0; r < BT; r++) {
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++) mu += x[r * C + c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (x[r * C + c] - mu) * (x[r * C + c] - mu);
        var /= C;
        for (int c = 0; c < C; c++) out[r * C + c] = (x[r * C + c] - mu) / sqrt(var + 1e-5) * g[c] + b[c];
    }
}

/* y[BT, N] = x[BT, K] W[K, N] + b */
static void conv(const double *x, const double *W, const double *b, int K, int N, double *y) {
    for (int r = 0; r < BT; r++)
        for (int j = 0; j < N; j++) {
            double s = b[j];
            for (int k = 0; k < K; k++) s += x[r * K + k] * W[k * N + j];
            y[r * N + j] = s;
        }
}

static double ref_loss(const Ref *r) {
    double x[BT * C], h[BT * C], qkv[BT * 3 * C], y[BT * C], big[BT * 4 * C], t2[BT * C];
    const double *wte = prm(r, 0), *wpe = prm(r, 1);
    for (int i = 0; i < BT; i++)
        for (int c = 0; c < C; c++) x[i * C + c] = wte[r->in[i] * C + c] + wpe[(i % T) * C + c];
    const int hs = C / NH;
    for (int l = 0; l < NL; l++) {
        int q = 2 + 12 * l;
        ln(x, prm(r, q), prm(r, q + 1), h);
        conv(h, prm(r, q + 2), prm(r, q + 3), C, 3 * C, qkv);
        for (int b = 0; b < B; b++)
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    double s[T], mx = -1e300, sum = 0;
                    for (int u = 0; u <= t; u++) {
                        double d = 0;
                        for (int i = 0; i < hs; i++)
                            d += qkv[(b * T + t) * 3 * C + hd * hs + i] * qkv[(b * T + u) * 3 * C + C + hd * hs + i];
                        s[u] = d / sqrt((double)hs);
                        if (s[u] > mx) mx = s[u];
                    }
                    for (int u = 0; u <= t; u++) sum += exp(s[u] - mx);
                    for (int i = 0; i < hs; i++) {
                        double o = 0;
                        for (int u = 0; u <= t; u++)
                            o += exp(s[u] - mx) / sum * qkv[(b * T + u) * 3 * C + 2 * C + hd * hs + i];
                        y[(b * T + t) * C + hd * hs + i] = o;
                    }
                }
        conv(y, prm(r, q + 4), prm(r, q + 5), C, C, t2);
        for (int i = 0; i < BT * C; i++) x[i] += t2[i];
        ln(x, prm(r, q + 6), prm(r, q + 7), h);
        conv(h, prm(r, q + 8), prm(r, q + 9), C, 4 * C, big);
        for (int i = 0; i < BT * 4 * C; i++) {
            double v = big[i];
            big[i] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        }
        conv(big, prm(r, q + 10), prm(r, q + 11), 4 * C, C, t2);
        for (int i = 0; i < BT * C; i++) x[i] += t2[i];
    }
    ln(x, prm(r, 2 + 12 * NL), prm(r, 3 + 12 * NL), h);
    double total = 0;
    for (int i = 0; i < BT; i++) {
        double z[V], mx = -1e300, sum = 0;
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += h[i * C + c] * wte[v * C + c];
            z[v] = s;
            if (s > mx) mx = s;
        }
        for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
        total += log(sum) + mx - z[r->tgt[i]];
    }
    return total / BT;
}

/* spec: Z-GPT-003, Z-GPT-004, Z-GPT-005, Z-GPT-006, Z-GPT-007, Z-GPT-008, Z-GPT-009 */
static void test_gradient_check(void **state) {
    (void)state;
    char spec[128];
    snprintf(spec, sizeof spec, "gpt2:n_layer=%d,n_head=%d,n_embd=%d,vocab_size=%d,n_positions=%d", NL, NH, C, V, P);
    ZnModel *m = zt_model(spec);
    ZnErr err = {0};
    assert_int_equal(zn_model_set_seq_len(m, T, &err), 0);
    /* the text: 40 tokens below V */
    ZnTokens tk = {0};
    uint16_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (uint16_t)((i * 7 + i / 3) % V);
    tk.tok = tok;
    tk.n = 40;
    tk.vocab = V;
    ZnData data = {0};
    data.seed = 5;
    data.tokens = &tk;
    /* every param random (LayerNorm weights near 1), so every path carries a gradient */
    long off[ZN_MAX_PARAMS + 1], total = 0;
    for (int p = 0; p < m->nparams; p++) {
        off[p] = total;
        total += m->params[p].numel;
    }
    float *wf = malloc((size_t)total * sizeof *wf), *gf = calloc((size_t)total, sizeof *gf);
    double *wd = malloc((size_t)total * sizeof *wd);
    for (int p = 0; p < m->nparams; p++)
        for (long i = 0; i < m->params[p].numel; i++) {
            float u = 2.0f * zn_rng_uniform(99 + (uint64_t)p, (uint64_t)i) - 1.0f;
            wf[off[p] + i] = strstr(m->params[p].name, ".ln_") && strstr(m->params[p].name, "weight") ? 1.0f + 0.2f * u
                                                                                                     : 0.5f * u;
        }
    for (long i = 0; i < total; i++) wd[i] = wf[i];

    ZnDevice dev;
    zn_device_host_init(&dev);
    ZnModelRun *R = zn_run_new(m, &dev, ZN_F32, B, &err);
    assert_non_null(R);
    assert_int_equal(zn_run_begin(R, &data, 0, &err), 0);
    float *W[2], *dW[2];
    for (int i = 0; i < m->nmodules; i++) {
        for (int q = 0; q < m->modules[i].nparams; q++) W[q] = wf + off[m->modules[i].param[q]];
        zn_run_forward(R, i, W);
    }
    float loss = zn_run_loss(R, 1.0f / BT);
    float *tmp = malloc((size_t)total * sizeof *tmp);   /* room for any module's gradients */
    for (int i = m->nmodules - 1; i >= 0; i--) {
        const ZnModule *md = &m->modules[i];
        long o = 0;
        for (int q = 0; q < md->nparams; q++) {
            W[q] = wf + off[md->param[q]];
            dW[q] = tmp + o;
            o += m->params[md->param[q]].numel;
        }
        zn_run_backward(R, i, W, dW);
        for (int q = 0; q < md->nparams; q++)   /* the tied wte sums both uses */
            for (long e = 0; e < m->params[md->param[q]].numel; e++) gf[off[md->param[q]] + e] += dW[q][e];
    }
    zn_run_free(R);

    int in[BT], tgt[BT];
    for (int b = 0; b < B; b++) zn_tokens_window(&tk, data.seed, (uint64_t)b, T, in + b * T, tgt + b * T);
    Ref r = {m, wd, off, in, tgt};
    double l0 = ref_loss(&r);
    if (fabs(loss - l0) > 1e-5 * fabs(l0)) fail_msg("loss %.9g, double %.9g", loss, l0);
    double worst = 0;
    for (long i = 0; i < total; i++) {
        const double h = 1e-5, keep = wd[i];
        wd[i] = keep + h;
        double lp = ref_loss(&r);
        wd[i] = keep - h;
        double lm = ref_loss(&r);
        wd[i] = keep;
        double want = (lp - lm) / (2 * h), e = fabs(gf[i] - want) / fmax(fabs(want), 1e-2);
        if (e > worst) worst = e;
        if (e > 1e-3) {
            int p = 0;
            while (p + 1 < m->nparams && off[p + 1] <= i) p++;
            fail_msg("%s[%ld]: gradient %.9g, central difference %.9g", m->params[p].name, i - off[p], gf[i], want);
        }
    }
    printf("gpt2 gradient check: %ld gradients, worst relative error %.2e, loss %.9g vs %.9g\n", total, worst,
           (double)loss, l0);
    free(tmp);
    free(wf);
    free(gf);
    free(wd);
    free(m);
}

/* spec: Z-OPT-020 */
static void test_decay_ranges(void **state) {
    (void)state;
    ZnModel *m = zt_model("gpt2-tiny");
    ZnErr err = {0};
    ZnConfig cfg;
    zn_config_defaults(&cfg);
    for (int stage = 0; stage <= 3; stage++)
        for (int W = 1; W <= 3; W++) {
            ZnLayout L;
            ZnLayoutOpts lo = {0, 1000000000L, 5000};
            assert_int_equal(zn_layout_build(&L, m->params, m->nparams, W, zt_plan(stage), &lo, &err), 0);
            ZnPlan plan;
            assert_int_equal(zn_plan_build(&plan, stage, &err), 0);
            long part_n = zn_layout_master_numel(&L, &plan);
            for (int r = 0; r < W; r++) {
                ZnDecayRange *rg;
                int n;
                assert_int_equal(zn_decay_ranges(m, &cfg, &L, r, part_n, &rg, &n, &err), 0);
                /* the ranges tile the partition, neighbours differ */
                long at = 0;
                for (int i = 0; i < n; i++) {
                    assert_int_equal(rg[i].lo, at);
                    assert_true(rg[i].hi > rg[i].lo);
                    if (i) assert_int_not_equal(rg[i].decay, rg[i - 1].decay);
                    at = rg[i].hi;
                }
                assert_int_equal(at, part_n);
                /* every element this rank holds has its param's rule */
                for (int p = 0; p < m->nparams; p++) {
                    long plo, phi, off;
                    zn_layout_owned(&L, p, r, &plo, &phi, &off);
                    int want = !strstr(m->params[p].name, "bias") && !strstr(m->params[p].name, ".ln_");
                    assert_int_equal(zn_decay_param(m, &cfg, p), want);
                    for (long e = off; e < off + (phi - plo); e++) {
                        int i = 0;
                        while (rg[i].hi <= e) i++;
                        assert_int_equal(rg[i].decay, want);
                    }
                }
                free(rg);
            }
            zn_layout_free(&L);
        }
    /* the config's list replaces the default; [] decays everything */
    cfg.n_wd_exclude = 1;
    snprintf(cfg.wd_exclude[0], sizeof cfg.wd_exclude[0], "wpe");
    assert_int_equal(zn_decay_param(m, &cfg, 1), 0);
    assert_int_equal(zn_decay_param(m, &cfg, 3), 1);
    cfg.n_wd_exclude = 0;
    for (int p = 0; p < m->nparams; p++) assert_int_equal(zn_decay_param(m, &cfg, p), 1);
    free(m);
}

ZT_MAIN(
    cmocka_unit_test(test_presets_and_counts),
    cmocka_unit_test(test_bad_specs),
    cmocka_unit_test(test_init),
    cmocka_unit_test(test_tanh),
    cmocka_unit_test(test_gradient_check),
    cmocka_unit_test(test_decay_ranges))
