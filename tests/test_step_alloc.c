/* test_step_alloc.c: after its first step, a training step allocates
 * nothing on the host (spec Z-ENG-017).
 *
 * This binary is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 * (Makefile): every call zinc's code (engine, device, simulator) makes to
 * them comes here first and is counted on the calling thread while that
 * thread's rank is between its first and last step. Device memory is not
 * host bookkeeping: the host device takes it with aligned_alloc, per
 * category, as a GPU's allocator would, and it is not counted. */
#include "testutil.h"
#include "engine/engine.h"
#include "engine/data.h"
#include "comm/world.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);

static _Thread_local int counting;
static _Thread_local long counted;

void *__wrap_malloc(size_t n) {
    counted += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t k, size_t n) {
    counted += counting;
    return __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n) {
    counted += counting;
    return __real_realloc(p, n);
}

enum { WORLD = 2, STEPS = 4 };

/* A rank's steps: the first uncounted, then steps 2..STEPS counted into
   allocs[rank] (arg, long[WORLD]) */
static int count_steps(ZnEngine *E, int rank, void *arg, ZnErr *err) {
    long *allocs = arg;
    ZnStepResult sr;
    int rc = zn_engine_train_step(E, &sr, err);
    counted = 0;
    counting = 1;
    for (int t = 1; t < STEPS && !rc; t++) rc = zn_engine_train_step(E, &sr, err);
    counting = 0;
    allocs[rank] = counted;
    return rc;
}

/* spec: Z-ENG-017 no host allocation in steps 2..4 at any stage and dtype,
 * with gradient accumulation and with a tied weight */
static void test_steps_allocate_nothing(void **state) {
    (void)state;
    static const char *dtypes[] = {"fp32", "fp16", "bf16"};
    for (int stage = 0; stage <= 3; stage++)
        for (int d = 0; d < 3; d++) {
            ZtRig rig;
            memset(&rig, 0, sizeof rig);
            long allocs[WORLD] = {0};   /* per rank, during steps 2..STEPS */
            ZnErr err = {0};
            assert_int_equal(zn_model_parse("mlp:6,8,8,8,5,tie:2=1", &rig.model, &err), 0);
            ZnConfigArgs args = zt_args(WORLD, stage, 2, 2, d == 0 ? ZN_F32 : d == 1 ? ZN_F16 : ZN_BF16);
            /* small buckets and no persistence: every path of the step runs */
            zt_config(&rig.cfg, "{\"zero_optimization\": {\"reduce_bucket_size\": 40,"
                                " \"stage3_param_persistence_threshold\": 0}}", &args);
            assert_int_equal(zn_data_init(&rig.data, 6, 5, 1234), 0);
            int rc = zt_engines_run(WORLD, &rig, count_steps, allocs, &err);
            zn_data_free(&rig.data);
            if (rc) fail_msg("stage %d %s: %s", stage, dtypes[d], err.msg);
            for (int r = 0; r < WORLD; r++)
                if (allocs[r])
                    fail_msg("stage %d %s: rank %d made %ld host allocations in steps 2..%d", stage, dtypes[d], r,
                             allocs[r], STEPS);
        }
}

/* The counter itself sees zinc's allocations (so the test above can fail):
   building a layout allocates its tables. (The test's own malloc would not
   do: cmocka's header turns it into test_malloc.) */
static void test_counter_counts(void **state) {
    (void)state;
    ZnParamSpec ps[2] = {{"a", 1, {10}, 10}, {"b", 1, {3}, 3}};
    ZnLayout L;
    ZnErr err = {0};
    counted = 0;
    counting = 1;
    int rc = zn_layout_build(&L, ps, 2, 2, zt_plan(3), NULL, &err);
    counting = 0;
    assert_int_equal(rc, 0);
    zn_layout_free(&L);
    assert_true(counted >= 5);
}

ZT_MAIN(
    cmocka_unit_test(test_counter_counts),
    cmocka_unit_test(test_steps_allocate_nothing))
