/* test_plan.c: the stage plan (spec Z-PLAN-*).
 *
 * The expected table is written out here from the ZeRO paper (Rajbhandari
 * et al. 2020, §5: Pos, Pos+g, Pos+g+p) and DeepSpeed's engine (which
 * optimizer class each stage builds), not computed from plan.c's rules. */
#include <fcntl.h>
#include <limits.h>
#include "testutil.h"
#include "core/plan.h"

typedef struct {
    ZnShard shard;
    ZnHold params, grads, optim;
    int reduce_per_micro, boundary_all_reduce, allgather_after_step, gather_per_layer;
    int step_per_subgroup, norm_across_ranks, ckpt_param_partition, comm_volume_psi;
    ZnDsOptimizer ds;
} Want;

static const Want WANT[4] = {
    /* stage 0: plain data parallelism, FP16_Optimizer, all-reduce at the boundary */
    {ZN_SHARD_NONE, ZN_HOLD_FULL, ZN_HOLD_FULL, ZN_HOLD_FULL, 0, 1, 0, 0, 0, 0, 0, 2, ZN_DS_FP16_OPTIMIZER},
    /* stage 1 (Pos): optimizer state split; full gradients reduce-scattered at the boundary */
    {ZN_SHARD_FLAT, ZN_HOLD_FULL, ZN_HOLD_FULL, ZN_HOLD_PART, 0, 0, 1, 0, 0, 1, 0, 2, ZN_DS_ZERO12},
    /* stage 2 (Pos+g): gradients split too, reduce-scattered as backward makes them */
    {ZN_SHARD_FLAT, ZN_HOLD_FULL, ZN_HOLD_PART, ZN_HOLD_PART, 1, 0, 1, 0, 0, 1, 0, 2, ZN_DS_ZERO12},
    /* stage 3 (Pos+g+p): parameters split per parameter, gathered per layer: 3Ψ */
    {ZN_SHARD_PARAM, ZN_HOLD_PART, ZN_HOLD_PART, ZN_HOLD_PART, 1, 0, 0, 1, 1, 1, 1, 3, ZN_DS_ZERO3},
};

/* The fields of ZnPlan that Want holds under the same name, for the
   assertions below (X-macro: X(field) for each). */
#define PLAN_FIELDS(X)                                                                      \
    X(params) X(grads) X(optim) X(reduce_per_micro) X(boundary_all_reduce)        \
    X(allgather_after_step) X(gather_per_layer) X(step_per_subgroup) X(norm_across_ranks)  \
    X(ckpt_param_partition) X(comm_volume_psi)
#define ASSERT_PLAN_FIELD(f) assert_int_equal(P.f, w->f);

/* spec: Z-PLAN-001 every stage's plan is the paper's table */
static void test_plan_table(void **state) {
    (void)state;
    for (int s = 0; s < 4; s++) {
        ZnPlan P;
        ZnErr err = {0};
        assert_int_equal(zn_plan_build(&P, s, &err), 0);
        const Want *w = &WANT[s];
        assert_int_equal(P.stage, s);
        assert_int_equal(P.shard, w->shard);
        PLAN_FIELDS(ASSERT_PLAN_FIELD)
        assert_int_equal(P.ds_optimizer, w->ds);
        for (int t = 0; t < 4; t++) {
            ZnPlan Q;
            assert_int_equal(zn_plan_build(&Q, t, &err), 0);
            assert_int_equal(zn_plan_same(&P, &Q), s == t);
        }
    }
}

/* spec: Z-PLAN-002 a stage outside 0..3 has no plan */
static void test_plan_bad_stage(void **state) {
    (void)state;
    const int bad[] = {-1, 4, 7, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZnPlan P;
        ZnErr err = {0};
        assert_int_equal(zn_plan_build(&P, bad[i], &err), ZN_E_USAGE);
        char want[64];
        snprintf(want, sizeof want, "ZeRO stage %d not in 0..3", bad[i]);
        assert_string_equal(err.msg, want);
        assert_int_equal(zn_config_stage_plan(bad[i], &P, &err), ZN_E_USAGE);
    }
}

/* spec: Z-ZPP-001 Z-MICS-001 ZeRO++ and MiCS enter only the plan that
   gathers per layer (stage 3); hpZ takes min(size, world), 0 and 1 are off;
   a MiCS size beyond any world stays beyond it (the engine refuses it) */
static void test_plan_zeropp_mics(void **st) {
    (void)st;
    for (int stage = 0; stage <= 3; stage++) {
        ZnPlan P;
        ZnErr err = {0};
        assert_int_equal(zn_plan_build(&P, stage, &err), 0);
        assert_int_equal(P.hpz, 1);
        zn_plan_zeropp(&P, 4, 1, 1, 8);
        zn_plan_mics(&P, 2, 1);
        const int on = stage == 3;
        assert_int_equal(P.hpz, on ? 4 : 1);
        assert_int_equal(P.quant_weights, on);
        assert_int_equal(P.quant_grads, on);
        assert_int_equal(P.mics_shard, on ? 2 : 0);
        assert_int_equal(P.mics_hier, on);
        if (!on) continue;
        zn_plan_zeropp(&P, 64, 0, 0, 8);
        assert_int_equal(P.hpz, 8);
        zn_plan_zeropp(&P, 0, 0, 0, 8);
        assert_int_equal(P.hpz, 1);
        zn_plan_mics(&P, 1L << 40, 0);
        assert_int_equal(P.mics_shard, INT_MAX);
        assert_int_equal(P.mics_hier, 0);
        zn_plan_mics(&P, -1, 1);
        assert_int_equal(P.mics_shard, 0);
        assert_int_equal(P.mics_hier, 0);
    }
}

/* One config of the sweep below: the offload devices (0 none, 1 cpu, 2
   nvme), the optimizer's ratio, ZeRO++ and MiCS as the config writes them. */
typedef struct { int stage, od, pd; double ratio; int hpz, qw, qg, mics, hier; } Combo;

/* What the config must resolve to, by DeepSpeed's rules written out here
   (not plan.c's): the tiers, hpZ's group clamped to the world, ZeRO++ and
   MiCS at stage 3 only; -1: the config refuses the combination. */
typedef struct { int ok; ZnTier optim_tier, param_tier; int grads_on_host; double ratio; int hpz, qw, qg, mics, hier; } Expect;

enum { SWEEP_WORLD = 4 };

static Expect expect_of(const Combo *c) {
    Expect e = {1, ZN_TIER_DEVICE, ZN_TIER_DEVICE, 0, 1.0, 1, 0, 0, 0, 0};
    const int s3 = c->stage == 3, zpp = c->hpz > 1 || c->qw || c->qg;
    if ((c->od || c->pd) && c->stage == 0) e.ok = 0;             /* nothing partitioned to offload */
    if (c->ratio < 1.0 && !s3) e.ok = 0;                          /* partial offload is stage 3's */
    if (s3 && zpp && c->mics) e.ok = 0;                           /* two stage-3 optimizers */
    if (!e.ok) return e;
    if (c->od) e.optim_tier = c->od == 2 && s3 ? ZN_TIER_NVME : ZN_TIER_HOST;   /* nvme below 3 is cpu */
    if (c->pd && s3) e.param_tier = c->pd == 2 ? ZN_TIER_NVME : ZN_TIER_HOST;
    e.grads_on_host = c->od && c->stage >= 2;
    if (c->od && s3) e.ratio = c->ratio;
    if (s3) {
        e.hpz = c->hpz > 1 ? (c->hpz < SWEEP_WORLD ? c->hpz : SWEEP_WORLD) : 1;
        e.qw = c->qw;
        e.qg = c->qg;
        e.mics = c->mics;
        e.hier = c->mics && c->hier;
    }
    return e;
}

static const char *const DEV[] = {"none", "cpu", "nvme"};

static int parse_combo(const Combo *c, ZnConfig *cfg, ZnErr *err) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"train_batch_size\": 4, \"zero_optimization\": {\"stage\": %d,"
             " \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"/tmp\", \"ratio\": %g},"
             " \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"/tmp\"},"
             " \"zero_hpz_partition_size\": %d, \"zero_quantized_weights\": %s, \"zero_quantized_gradients\": %s,"
             " \"mics_shard_size\": %d, \"mics_hierarchical_params_gather\": %s}}",
             c->stage, DEV[c->od], c->ratio, DEV[c->pd], c->hpz, c->qw ? "true" : "false", c->qg ? "true" : "false",
             c->mics ? c->mics : -1, c->hier ? "true" : "false");
    ZnConfigArgs a;
    zn_config_args_init(&a);
    a.world_size = SWEEP_WORLD;
    return zn_config_parse(json, strlen(json), "sweep", &a, cfg, err);
}

/* spec: Z-PLAN-003 config resolution builds the whole plan once: every
   field of ZnConfig.plan for every combination of stage, offload tiers,
   ratio, ZeRO++ and MiCS; zn_plan_same holds exactly when every field is
   equal, zn_plan_same_layout exactly when the stage is */
static void test_plan_every_combination(void **st) {
    (void)st;
    static const int hpz[][3] = {{1, 0, 0}, {2, 0, 0}, {8, 0, 0}, {1, 1, 0}, {1, 0, 1}, {2, 1, 1}};
    static const int mics[][2] = {{0, 0}, {2, 0}, {2, 1}};
    enum { MAXN = 4 * 3 * 3 * 2 * 6 * 3 };
    static ZnPlan plans[MAXN];
    static Expect want[MAXN];
    int n = 0, refused = 0;
    fflush(stderr);   /* the ignored keys' warnings are the config tests' to check */
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    assert_true(saved >= 0 && null >= 0);
    dup2(null, 2);
    for (int s = 0; s < 4; s++)
        for (int od = 0; od < 3; od++)
            for (int pd = 0; pd < 3; pd++)
                for (int r = 0; r < 2; r++)
                    for (int z = 0; z < 6; z++)
                        for (int m = 0; m < 3; m++) {
                            Combo c = {s, od, pd, r ? 0.5 : 1.0, hpz[z][0], hpz[z][1], hpz[z][2], mics[m][0], mics[m][1]};
                            Expect e = expect_of(&c);
                            ZnConfig cfg;
                            ZnErr err = {0};
                            int rc = parse_combo(&c, &cfg, &err);
                            if (!e.ok) {
                                if (rc != ZN_E_USAGE) { dup2(saved, 2); fail_msg("stage %d od %d pd %d ratio %g zpp %d mics %d: accepted", s, od, pd, c.ratio, z, m); }
                                refused++;
                                continue;
                            }
                            if (rc) { dup2(saved, 2); fail_msg("stage %d od %d pd %d zpp %d mics %d: %s", s, od, pd, z, m, err.msg); }
                            const ZnPlan P = cfg.plan;
                            const Want *w = &WANT[s];
                            assert_int_equal(P.stage, s);
                            assert_int_equal(P.shard, w->shard);
                            PLAN_FIELDS(ASSERT_PLAN_FIELD)
                            assert_int_equal(P.ds_optimizer, w->ds);
                            assert_int_equal(P.optim_tier, e.optim_tier);
                            assert_int_equal(P.param_tier, e.param_tier);
                            assert_int_equal(P.grads_on_host, e.grads_on_host);
                            assert_true(P.optim_ratio == e.ratio);
                            assert_int_equal(P.hpz, e.hpz);
                            assert_int_equal(P.quant_weights, e.qw);
                            assert_int_equal(P.quant_grads, e.qg);
                            assert_int_equal(P.mics_shard, e.mics);
                            assert_int_equal(P.mics_hier, e.hier);
                            assert_int_equal(cfg.world_size, SWEEP_WORLD);
                            plans[n] = P;
                            want[n++] = e;
                        }
    dup2(saved, 2);
    close(saved);
    close(null);
    assert_int_equal(n + refused, MAXN);
    assert_int_equal(n, 486);   /* both sides of every rule were tried */
    assert_int_equal(refused, 810);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const Expect *a = &want[i], *b = &want[j];
            const int same = plans[i].stage == plans[j].stage && a->optim_tier == b->optim_tier &&
                             a->param_tier == b->param_tier && a->ratio == b->ratio && a->hpz == b->hpz &&
                             a->qw == b->qw && a->qg == b->qg && a->mics == b->mics && a->hier == b->hier;
            if (zn_plan_same(&plans[i], &plans[j]) != same) fail_msg("plans %d and %d: zn_plan_same says %d", i, j, !same);
            assert_int_equal(zn_plan_same_layout(&plans[i], &plans[j]), plans[i].stage == plans[j].stage);
        }
}

/* spec: Z-PLAN-003 a bare stage's plan (the estimators' --stage, a
   checkpoint's saved stage) is the config's with nothing else set, and a
   config changed after parsing gets its plan again from zn_config_plan */
static void test_plan_bare_stage_and_replan(void **st) {
    (void)st;
    for (int s = 0; s < 4; s++) {
        ZnPlan B;
        ZnErr err = {0};
        assert_int_equal(zn_config_stage_plan(s, &B, &err), 0);
        Combo c = {s, 0, 0, 1.0, 1, 0, 0, 0, 0};
        ZnConfig cfg;
        assert_int_equal(parse_combo(&c, &cfg, &err), 0);
        assert_true(zn_plan_same(&B, &cfg.plan));
        if (s == 0) continue;
        cfg.zero.offload_optimizer.device = ZN_OFFLOAD_CPU;
        assert_true(zn_plan_same(&B, &cfg.plan));   /* not rebuilt behind the caller's back */
        assert_int_equal(zn_config_plan(&cfg, &err), 0);
        assert_int_equal(cfg.plan.optim_tier, ZN_TIER_HOST);
        assert_false(zn_plan_same(&B, &cfg.plan));
        assert_true(zn_plan_same_layout(&B, &cfg.plan));
    }
    ZnConfig cfg;
    zn_config_defaults(&cfg);   /* defaults carry stage 0's plan */
    ZnPlan B;
    ZnErr err = {0};
    assert_int_equal(zn_config_stage_plan(0, &B, &err), 0);
    assert_true(zn_plan_same(&B, &cfg.plan));
    cfg.zero.stage = 9;
    assert_int_equal(zn_config_plan(&cfg, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "ZeRO stage 9 not in 0..3");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_table),
        cmocka_unit_test(test_plan_bad_stage),
        cmocka_unit_test(test_plan_zeropp_mics),
        cmocka_unit_test(test_plan_every_combination),
        cmocka_unit_test(test_plan_bare_stage_and_replan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
