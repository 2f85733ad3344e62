/* test_plan.c: the stage plan (spec Z-PLAN-*).
 *
 * The expected table is written out here from the ZeRO paper (Rajbhandari
 * et al. 2020, §5: Pos, Pos+g, Pos+g+p) and DeepSpeed's engine (which
 * optimizer class each stage builds), not computed from plan.c's rules. */
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
        assert_int_equal(zn_plan_shard(s), w->shard);
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
        assert_int_equal(zn_plan_shard(bad[i]), ZN_SHARD_NONE);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_table),
        cmocka_unit_test(test_plan_bad_stage),
        cmocka_unit_test(test_plan_zeropp_mics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
