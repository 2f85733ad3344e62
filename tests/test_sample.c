/* test_sample.c: generation from a GPT-2 (spec Z-SAMPLE-002..004) and the
 * Hugging Face config an export carries (Z-HF-004): the token pick
 * (greedy ties, the seeded draw, top-k), the forward over a window and the
 * sliding window of generation, and config.json's fields. */
#include "testutil.h"
#include "engine/sample.h"
#include "io/hf_export.h"
#include "core/rng.h"
#include <cjson/cJSON.h>

/* spec: Z-SAMPLE-003 greedy: the argmax, ties to the lowest id */
static void test_greedy(void **state) {
    (void)state;
    const float a[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 2.0f};
    assert_int_equal(zn_sample_pick(a, 6, 0.0f, 0, 7, 0, NULL), 1);
    const float b[4] = {-3.0f, -3.0f, -3.0f, -3.0f};
    assert_int_equal(zn_sample_pick(b, 4, 0.0f, 0, 7, 9, NULL), 0);
    const float c[3] = {-INFINITY, -5.0f, -INFINITY};
    assert_int_equal(zn_sample_pick(c, 3, 0.0f, 0, 1, 1, NULL), 1);
    /* top-k does not change greedy */
    assert_int_equal(zn_sample_pick(a, 6, 0.0f, 2, 7, 0, NULL), 1);
}

/* spec: Z-SAMPLE-004 the seeded draw: a pure function of (seed, position),
 * u * total against the running weight in decreasing-logit order, top-k */
static void test_temperature(void **state) {
    (void)state;
    ZnSampleCand cand[8];
    const float l[3] = {logf(0.2f), logf(0.5f), logf(0.3f)};
    /* the rule by hand: order 1 (0.5), 2 (0.3), 0 (0.2) */
    for (uint64_t pos = 0; pos < 200; pos++) {
        float u = zn_rng_uniform(zn_mix64(11 ^ ZN_SAMPLE_SALT), pos);
        int want = u < 0.5f ? 1 : u < 0.8f ? 2 : 0;
        int got = zn_sample_pick(l, 3, 1.0f, 0, 11, pos, cand);
        if (fabsf(u - 0.5f) > 1e-6f && fabsf(u - 0.8f) > 1e-6f) assert_int_equal(got, want);
        assert_int_equal(got, zn_sample_pick(l, 3, 1.0f, 0, 11, pos, cand));   /* pure */
    }
    /* frequencies follow softmax(l / temperature) */
    long n[3] = {0}, N = 20000;
    for (long pos = 0; pos < N; pos++) n[zn_sample_pick(l, 3, 1.0f, 0, 5, (uint64_t)pos, cand)]++;
    assert_true(fabs(n[0] / (double)N - 0.2) < 0.02 && fabs(n[1] / (double)N - 0.5) < 0.02);
    /* a low temperature is nearly greedy, a high one nearly uniform */
    long g = 0, h = 0;
    for (long pos = 0; pos < 2000; pos++) {
        g += zn_sample_pick(l, 3, 0.01f, 0, 5, (uint64_t)pos, cand) == 1;
        h += zn_sample_pick(l, 3, 1000.0f, 0, 5, (uint64_t)pos, cand) == 0;
    }
    assert_int_equal(g, 2000);
    assert_true(h > 550 && h < 780);
    /* top-k: only the k highest ever come out; k = 1 is greedy (ties: lower id) */
    const float t[5] = {1.0f, 3.0f, 3.0f, 0.0f, 2.0f};
    int seen[5] = {0};
    for (long pos = 0; pos < 3000; pos++) {
        seen[zn_sample_pick(t, 5, 2.0f, 2, 3, (uint64_t)pos, cand)]++;
        assert_int_equal(zn_sample_pick(t, 5, 5.0f, 1, 3, (uint64_t)pos, cand), 1);
    }
    assert_true(seen[1] > 0 && seen[2] > 0 && seen[0] == 0 && seen[3] == 0 && seen[4] == 0);
    /* another seed, other draws */
    int differ = 0;
    for (long pos = 0; pos < 100; pos++)
        differ += zn_sample_pick(l, 3, 1.0f, 0, 5, (uint64_t)pos, cand) !=
                  zn_sample_pick(l, 3, 1.0f, 0, 6, (uint64_t)pos, cand);
    assert_true(differ > 20);
}

static ZnModel *small_model(float **w) {
    ZnModel *m = zt_model("gpt2:n_layer=2,n_head=2,n_embd=8,vocab_size=11,n_positions=6");
    long total = zn_model_numel(m), off = 0;
    *w = malloc((size_t)total * sizeof(float));
    for (int p = 0; p < m->nparams; p++) {
        zn_model_init_param(m, p, 42, 0, m->params[p].numel, *w + off);
        if (strstr(m->params[p].name, ".bias") || strstr(m->params[p].name, ".ln_"))   /* not all 0 or 1 */
            for (long i = 0; i < m->params[p].numel; i++) (*w)[off + i] += 0.1f * (float)((i * 7 + p) % 5 - 2);
        off += m->params[p].numel;
    }
    for (long i = 0; i < total; i++) (*w)[i] *= 10.0f;   /* logits far from uniform */
    return m;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* spec: Z-SAMPLE-002 the forward over a window: row t of a window depends on
 * tokens 0..t only (a prefix's last row is that row), and generation feeds
 * the last n_positions tokens at most, greedy picks being the argmax of the
 * last row */
static void test_forward_window(void **state) {
    (void)state;
    float *w;
    ZnModel *m = small_model(&w);
    ZnErr err = {0};
    const int tok[6] = {3, 1, 4, 1, 5, 9};
    float full[6 * 11], row[11];
    assert_int_equal(zn_sample_forward(m, w, tok, 6, 0, 6, full, &err), 0);
    for (int k = 1; k <= 6; k++) {
        assert_int_equal(zn_sample_forward(m, w, tok, k, k - 1, 1, row, &err), 0);
        for (int v = 0; v < 11; v++) assert_true(fabsf(row[v] - full[(k - 1) * 11 + v]) <= 1e-5f);
    }
    /* rows 2..3 alone */
    float two[2 * 11];
    assert_int_equal(zn_sample_forward(m, w, tok, 6, 2, 2, two, &err), 0);
    assert_memory_equal(two, full + 2 * 11, sizeof two);
    /* 10 greedy tokens after a prompt of 2: the window slides past 6 */
    int seq[12] = {2, 7};
    ZnSampleOpts o = {10, 0.0f, 0, 0};
    assert_int_equal(zn_sample_generate(m, w, seq, 2, &o, NULL, NULL, &err), 0);
    for (int i = 2; i < 12; i++) {
        const int T = i < 6 ? i : 6;
        assert_int_equal(zn_sample_forward(m, w, seq + i - T, T, T - 1, 1, row, &err), 0);
        assert_int_equal(seq[i], argmax(row, 11));
    }
    /* seeded: the same seed twice, the same tokens */
    int s1[12] = {2, 7}, s2[12] = {2, 7};
    ZnSampleOpts t = {10, 1.0f, 0, 99};
    assert_int_equal(zn_sample_generate(m, w, s1, 2, &t, NULL, NULL, &err), 0);
    assert_int_equal(zn_sample_generate(m, w, s2, 2, &t, NULL, NULL, &err), 0);
    assert_memory_equal(s1, s2, sizeof s1);
    free(w);
    free(m);
}

/* spec: Z-HF-004 config.json: GPT2Config's fields */
static void test_hf_config(void **state) {
    (void)state;
    ZnGpt2Shape s = {3, 4, 64, 300, 128};
    char buf[2048];
    int n = zn_hf_config_json(&s, ZN_BF16, buf, sizeof buf);
    assert_true(n > 0 && n < (int)sizeof buf);
    cJSON *d = cJSON_Parse(buf);
    assert_non_null(d);
    struct { const char *k; double v; } nums[] = {
        {"n_layer", 3}, {"n_head", 4}, {"n_embd", 64}, {"vocab_size", 300}, {"n_positions", 128}, {"n_ctx", 128},
        {"layer_norm_epsilon", 1e-5}, {"resid_pdrop", 0}, {"embd_pdrop", 0}, {"attn_pdrop", 0},
        {"bos_token_id", 299}, {"eos_token_id", 299}, {"initializer_range", 0.02},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        cJSON *it = cJSON_GetObjectItemCaseSensitive(d, nums[i].k);
        assert_true(cJSON_IsNumber(it));
        assert_true(it->valuedouble == nums[i].v);
    }
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "model_type")->valuestring, "gpt2");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "activation_function")->valuestring, "gelu_new");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "torch_dtype")->valuestring, "bfloat16");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "tie_word_embeddings")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(d, "n_inner")));
    cJSON *arch = cJSON_GetObjectItemCaseSensitive(d, "architectures");
    assert_int_equal(cJSON_GetArraySize(arch), 1);
    assert_string_equal(cJSON_GetArrayItem(arch, 0)->valuestring, "GPT2LMHeadModel");
    cJSON_Delete(d);
    zn_hf_config_json(&s, ZN_F32, buf, sizeof buf);
    assert_non_null(strstr(buf, "\"torch_dtype\": \"float32\""));
    zn_hf_config_json(&s, ZN_F16, buf, sizeof buf);
    assert_non_null(strstr(buf, "\"torch_dtype\": \"float16\""));
}

ZT_MAIN(
    cmocka_unit_test(test_greedy),
    cmocka_unit_test(test_temperature),
    cmocka_unit_test(test_forward_window),
    cmocka_unit_test(test_hf_config))
