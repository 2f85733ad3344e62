/* test_engine.c: the engine against independent double-precision
 * computations: the reported gradient norm and a clipped update. */
#include "testutil.h"
#include "app/run.h"
#include "app/cli.h"
#include "engine/data.h"
#include "engine/engine.h"
#include "engine/drill.h"
#include "comm/world.h"
#include <unistd.h>

enum { MAXD = 16 };

/* zinc's initial weights in double, in model order (concatenated); poff[p]
 * is where parameter p starts. Returns the total count. */
static long reference_params(const ZnModel *m, uint64_t seed, double *params, long *poff) {
    long off = 0;
    for (int p = 0; p < m->nparams; p++) {
        poff[p] = off;
        float *tmp = malloc((size_t)m->params[p].numel * sizeof(float));
        zn_model_init_param(m, p, seed, 0, m->params[p].numel, tmp);
        for (long i = 0; i < m->params[p].numel; i++) params[off + i] = tmp[i];
        free(tmp);
        off += m->params[p].numel;
    }
    return off;
}

/* sample s of d through the MLP in double: act[l] is layer l's input (ReLU
 * applied), act[nlayers] the logits. The gradient and the loss below share it. */
static void reference_forward(const ZnModel *m, const double *params, const long *poff, const ZnData *d, long s,
                              int *label, double act[ZN_MAX_LAYERS + 1][MAXD]) {
    const int L = m->nlayers;
    float xf[MAXD];
    zn_data_batch(d, s, 1, xf, label);
    for (int j = 0; j < m->dims[0]; j++) act[0][j] = xf[j];
    for (int l = 0; l < L; l++) {
        const double *W = params + poff[m->layer_param[l][0]], *b = params + poff[m->layer_param[l][1]];
        for (int o = 0; o < m->dims[l + 1]; o++) {
            double y = b[o];
            for (int i = 0; i < m->dims[l]; i++) y += W[o * m->dims[l] + i] * act[l][i];
            act[l + 1][o] = (l < L - 1 && y < 0) ? 0 : y;
        }
    }
}

/* full-batch mean-loss gradient of an MLP in double, from zinc's initial
 * weights and data; grads in model order (concatenated) */
static void reference_grad(const ZnModel *m, uint64_t seed, int nsamples, double *grad, double *params) {
    long poff[2 * ZN_MAX_LAYERS];
    long off = reference_params(m, seed, params, poff);
    memset(grad, 0, (size_t)off * sizeof(double));
    ZnData d;
    assert_int_equal(zn_data_init(&d, m->dims[0], m->dims[m->nlayers], seed), 0);
    const int L = m->nlayers;
    for (int s = 0; s < nsamples; s++) {
        int label;
        double act[ZN_MAX_LAYERS + 1][MAXD];
        reference_forward(m, params, poff, &d, s, &label, act);
        const int C = m->dims[L];
        double mx = act[L][0], sum = 0, delta[MAXD];
        for (int c = 1; c < C; c++) if (act[L][c] > mx) mx = act[L][c];
        for (int c = 0; c < C; c++) sum += exp(act[L][c] - mx);
        for (int c = 0; c < C; c++) delta[c] = (exp(act[L][c] - mx) / sum - (c == label)) / nsamples;
        for (int l = L - 1; l >= 0; l--) {
            double *gW = grad + poff[m->layer_param[l][0]], *gb = grad + poff[m->layer_param[l][1]];
            const double *W = params + poff[m->layer_param[l][0]];
            double prev[MAXD] = {0};
            for (int o = 0; o < m->dims[l + 1]; o++) {
                gb[o] += delta[o];
                for (int i = 0; i < m->dims[l]; i++) {
                    gW[o * m->dims[l] + i] += delta[o] * act[l][i];
                    prev[i] += delta[o] * W[o * m->dims[l] + i];
                }
            }
            for (int i = 0; i < m->dims[l]; i++) delta[i] = (l > 0 && act[l][i] <= 0) ? 0 : prev[i];
        }
    }
    zn_data_free(&d);
}

static int run_model(const char *model, long steps, int record, const char *config, int world, int stage,
                     ZnRunResult *res, ZnRunOpts *o) {
    ZnTrainFlags f = zt_train_flags(model, steps, world, stage);
    ZnErr err;
    if (zn_train_resolve(&f, config, o, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    o->record = record;
    int rc = zn_run(o, res, &err);
    zn_run_opts_free(o);   /* the recorded config text; the rest of o stays usable */
    if (rc) { fprintf(stderr, "%s\n", err.msg); return 1; }
    return 0;
}

static int run_one(const char *config, int world, int stage, ZnRunResult *res, ZnRunOpts *o) {
    return run_model("mlp:6,8,5,4", 1, 0, config, world, stage, res, o);
}

/* spec: Z-ENG-012 a binding clip threshold: the update equals the
 * hand-computed clipped Adam step, on every stage and world size; the
 * reported norm matches an independent full-gradient computation */
static void test_clipped_update(void **st) {
    (void)st;
    const double lr = 0.01, eps = 0.1, clip = 1e-3;
    static const char *cfg =
        "{\"train_micro_batch_size_per_gpu\": 4, \"gradient_clipping\": 0.001,"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"eps\": 0.1}}}";
    for (int world = 1; world <= 4; world *= 2)
        for (int stage = 0; stage <= 3; stage++) {
            ZnRunResult res;
            ZnRunOpts o;
            assert_int_equal(run_one(cfg, world, stage, &res, &o), 0);
            long n = res.numel;
            double *g = calloc((size_t)n, sizeof(double)), *p0 = calloc((size_t)n, sizeof(double));
            reference_grad(&o.model, (uint64_t)o.cfg.seed, 4 * world, g, p0);
            double norm = 0;
            for (long i = 0; i < n; i++) norm += g[i] * g[i];
            norm = sqrt(norm);
            assert_true(norm > 10 * clip);   /* the threshold binds */
            if (fabs(res.grad_norm[0] - norm) > 1e-5 * norm)
                fail_msg("world %d stage %d: reported norm %.9g, reference %.9g", world, stage, res.grad_norm[0], norm);
            for (long i = 0; i < n; i++) {
                double gc = g[i] * clip / (norm + 1e-6);
                double want = p0[i] - lr * gc / (fabs(gc) + eps);   /* Adam step 1: m_hat = g, v_hat = g^2 */
                if (fabs(res.params[i] - want) > 2e-7)
                    fail_msg("world %d stage %d: param %ld is %.9g, hand-computed %.9g", world, stage, i,
                             res.params[i], want);
            }
            free(g);
            free(p0);
            zn_run_result_free(&res);
        }
}

/* spec: Z-ENG-012 without clipping (gradient_clipping 0) the reported norm
 * still matches the reference, and the update is the plain Adam step */
static void test_unclipped_norm(void **st) {
    (void)st;
    static const char *cfg =
        "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_clipping\": 0,"
        " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"eps\": 0.1}}}";
    ZnRunResult res;
    ZnRunOpts o;
    assert_int_equal(run_one(cfg, 3, 3, &res, &o), 0);
    double *g = calloc((size_t)res.numel, sizeof(double)), *p0 = calloc((size_t)res.numel, sizeof(double));
    reference_grad(&o.model, (uint64_t)o.cfg.seed, 6, g, p0);
    double norm = 0;
    for (long i = 0; i < res.numel; i++) norm += g[i] * g[i];
    norm = sqrt(norm);
    assert_true(fabs(res.grad_norm[0] - norm) <= 1e-5 * norm);
    for (long i = 0; i < res.numel; i++)
        assert_true(fabs(res.params[i] - (p0[i] - 0.01 * g[i] / (fabs(g[i]) + 0.1))) <= 2e-7);
    free(g);
    free(p0);
    zn_run_result_free(&res);
}

/* mean loss of the initial model over samples [first, first+n), in double */
static double reference_loss(const ZnModel *m, uint64_t seed, long first, int n) {
    long poff[2 * ZN_MAX_LAYERS];
    double *params = calloc((size_t)zn_model_numel(m), sizeof(double));
    reference_params(m, seed, params, poff);
    ZnData d;
    zn_data_init(&d, m->dims[0], m->dims[m->nlayers], seed);
    double total = 0;
    for (int s = 0; s < n; s++) {
        int label;
        double act[ZN_MAX_LAYERS + 1][MAXD];
        reference_forward(m, params, poff, &d, first + s, &label, act);
        const int C = m->dims[m->nlayers];
        double mx = act[m->nlayers][0], sum = 0;
        for (int c = 1; c < C; c++) if (act[m->nlayers][c] > mx) mx = act[m->nlayers][c];
        for (int c = 0; c < C; c++) sum += exp(act[m->nlayers][c] - mx);
        total += log(sum) - (act[m->nlayers][label] - mx);
    }
    zn_data_free(&d);
    free(params);
    return total / n;
}

/* spec: Z-ENG-002 optimizer step t consumes samples [t*B, (t+1)*B): with
 * lr 0 the weights stay at their initial values, so each step's loss is the
 * initial model's mean loss over exactly that slice of the data */
static void test_data_slices(void **st) {
    (void)st;
    static const char *cfg = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
                             " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0}}}";
    for (int stage = 0; stage <= 3; stage += 3) {
        ZnRunOpts o;
        ZnRunResult res;
        assert_int_equal(run_model("mlp:6,8,5,4", 3, 0, cfg, 3, stage, &res, &o), 0);
        const long B = o.cfg.train_batch_size;
        assert_int_equal(B, 12);
        for (long t = 0; t < 3; t++) {
            double want = reference_loss(&o.model, (uint64_t)o.cfg.seed, t * B, (int)B);
            if (fabs(res.loss[t] - want) > 1e-5 * want)
                fail_msg("stage %d step %ld: loss %.9g, initial model on samples [%ld, %ld) gives %.9g", stage,
                         t + 1, res.loss[t], t * B, (t + 1) * B, want);
            if (t > 0) assert_true(fabs(res.loss[t] - res.loss[t - 1]) > 1e-6);   /* different slices */
        }
        zn_run_result_free(&res);
    }
}

/* spec: Z-ENG-014 the digest is FNV-1a 64 over the little-endian bytes of
 * the fp32 parameters in model order (an independent transcription) */
static void test_digest(void **st) {
    (void)st;
    ZnRunResult res;
    ZnRunOpts o;
    assert_int_equal(run_one("{\"train_micro_batch_size_per_gpu\": 2}", 2, 3, &res, &o), 0);
    uint64_t h = 14695981039346656037ull;
    for (long i = 0; i < res.numel; i++) {
        uint32_t u;
        memcpy(&u, &res.params[i], 4);
        for (int b = 0; b < 4; b++) {
            h ^= (u >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    assert_true(h == res.digest);
    zn_run_result_free(&res);
}

/* spec: Z-ENG-016 a tied weight (two layers, one parameter) gets the sum of
 * both layers' gradients, once; every stage agrees with an independent
 * double-precision gradient of the tied model */
static void test_tied_gradient(void **st) {
    (void)st;
    for (int stage = 0; stage <= 3; stage++) {
        ZnRunOpts o;
        ZnRunResult res;
        assert_int_equal(run_model("mlp:6,8,8,8,4,tie:2=1", 1, 1, "{\"train_micro_batch_size_per_gpu\": 3}", 2,
                                   stage, &res, &o), 0);
        assert_int_equal(o.model.nparams, 7);   /* layers.2.weight is layers.1.weight */
        assert_string_equal(o.model.aliases[0].name, "layers.2.weight");
        double *g = calloc((size_t)res.numel, sizeof(double)), *p0 = calloc((size_t)res.numel, sizeof(double));
        reference_grad(&o.model, (uint64_t)o.cfg.seed, 6, g, p0);
        double mx = 0;
        for (long i = 0; i < res.numel; i++) if (fabs(g[i]) > mx) mx = fabs(g[i]);
        for (long i = 0; i < res.numel; i++)
            if (fabs(res.rec_grads[i] - g[i]) > 1e-5 * mx)
                fail_msg("stage %d: gradient element %ld is %.9g, reference %.9g", stage, i, res.rec_grads[i], g[i]);
        free(g);
        free(p0);
        zn_run_result_free(&res);
    }
}

/* Two training steps of rig's engine on this rank with hooks (or none);
 * params (or NULL) gets the weights after them. */
static int two_steps(const ZtRig *rig, ZnComm *comm, const ZnEngineHooks *hooks, float *params, ZnErr *err) {
    ZnDevice dev;
    ZnEngine E;
    int rc = zt_host_engine(&E, &dev, &rig->cfg, &rig->model, &rig->data, comm, hooks, err);
    if (rc) return rc;
    ZnStepResult sr;
    for (int t = 0; t < 2 && !rc; t++) rc = zn_engine_train_step(&E, &sr, err);
    if (!rc && params) rc = zn_engine_gather_params(&E, params, err);
    zn_engine_free(&E);
    return rc;
}

static int divergent_rank(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    ZnDrill drill = {.repeat_on = rank == 1, .repeat_layer = 0};
    ZnEngineHooks hooks = {.step = zn_drill_hooks(&drill)};
    return two_steps(arg, comm, &hooks, NULL, err);
}

/* spec: Z-SIM-006 divergent control flow: one rank calls a layer twice in
 * stage 3 (an extra parameter gather); the sequence check reports the first
 * differing collective of both sides instead of hanging */
static void test_divergent_control_flow(void **st) {
    (void)st;
    ZtRig c;
    ZnErr err;
    assert_int_equal(zn_model_parse("mlp:6,8,5,4", &c.model, &err), 0);
    ZnConfigArgs args = zt_args(3, 3, 2, -1, -1);
    zt_config(&c.cfg, "{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 0,"
                      " \"stage3_max_reuse_distance\": 0}}", &args);
    assert_int_equal(zn_data_init(&c.data, 6, 4, 1234), 0);
    int rc = zt_sim_run(3, divergent_rank, &c, 60, &err);
    zn_data_free(&c.data);
    assert_int_equal(rc, ZN_E_COMM);
    assert_str_contains(err.msg, "collective mismatch at call #");
    /* rank 0 gathers layer 1's weight (40 elements, 3 x 14) while rank 1
       gathers layer 0's weight again (48) */
    assert_str_contains(err.msg, "rank 0 all_gather fp32 n=42 'param_gather' vs rank 1 all_gather fp32 n=48 'param_gather'");
}

/* What a recording rank saw through its step hooks: every call in order,
 * "F m" (forward), "B m" (backward, its first gradient on the device) and
 * "U s" (masters updated at global step s), and the weights at the end. */
typedef struct {
    char seen[2][512];
    float params[2][128];
    int hooked;
} SeamCtx;

static int seam_forward(void *ctx, const ZnEngine *E, int m) {
    char *s = ((SeamCtx *)ctx)->seen[E->world.rank];
    snprintf(s + strlen(s), 512 - strlen(s), "F%d ", m);
    return 0;
}

static void seam_backward(void *ctx, ZnEngine *E, int m, float *const *dW) {
    char *s = ((SeamCtx *)ctx)->seen[E->world.rank];
    snprintf(s + strlen(s), 512 - strlen(s), "B%d%s ", m, dW[0] ? "" : "?");
}

static int seam_updated(void *ctx, ZnEngine *E, float *work, ZnDevice *tier, ZnErr *err) {
    (void)work, (void)tier, (void)err;
    char *s = ((SeamCtx *)ctx)->seen[E->world.rank];
    snprintf(s + strlen(s), 512 - strlen(s), "U%ld ", E->global_step);
    return 0;
}

static int seam_rank(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    SeamCtx *c = ((void **)arg)[1];
    ZnEngineHooks hooks = {.step = {seam_forward, seam_backward, seam_updated, c}};
    return two_steps(((void **)arg)[0], comm, c->hooked ? &hooks : NULL, c->params[rank], err);
}

/* spec: Z-ENG-018 the step hooks: after every module's forward (in model
 * order) and backward (reverse order, with its gradient) of every
 * micro-step, and once per optimizer step after the masters' update; hooks
 * that change nothing leave every bit of the run as without them */
static void test_step_hooks(void **st) {
    (void)st;
    ZtRig rig;
    ZnErr err;
    assert_int_equal(zn_model_parse("mlp:6,8,5,4", &rig.model, &err), 0);
    assert_true(zn_model_numel(&rig.model) <= 128);
    ZnConfigArgs args = zt_args(2, 3, 2, 2, -1);   /* world 2, stage 3, GA 2 */
    zt_config(&rig.cfg, "{\"zero_optimization\": {\"stage3_param_persistence_threshold\": 0}}", &args);
    assert_int_equal(zn_data_init(&rig.data, 6, 4, 1234), 0);
    static SeamCtx with, without;
    void *a[2] = {&rig, &with}, *b[2] = {&rig, &without};
    with.hooked = 1;
    assert_int_equal(zt_sim_run(2, seam_rank, a, 60, &err), 0);
    assert_int_equal(zt_sim_run(2, seam_rank, b, 60, &err), 0);
    zn_data_free(&rig.data);
    const char *want = "F0 F1 F2 B2 B1 B0 F0 F1 F2 B2 B1 B0 U0 "
                       "F0 F1 F2 B2 B1 B0 F0 F1 F2 B2 B1 B0 U1 ";
    for (int r = 0; r < 2; r++) {
        assert_string_equal(with.seen[r], want);
        assert_string_equal(without.seen[r], "");
    }
    assert_memory_equal(with.params, without.params, sizeof with.params);
}

ZT_MAIN(
    cmocka_unit_test(test_clipped_update),
    cmocka_unit_test(test_unclipped_norm),
    cmocka_unit_test(test_data_slices),
    cmocka_unit_test(test_digest),
    cmocka_unit_test(test_tied_gradient),
    cmocka_unit_test(test_divergent_control_flow),
    cmocka_unit_test(test_step_hooks))
