/* test_app_alloc.c: the command line's readers, planners and writers under
 * allocation failure (spec Z-ERR-002): a config resolved, a machine file
 * read and written, training logs read and plotted, a plan (its dry run,
 * report, JSON and picture). For
 * k = 1, 2, ... the k-th allocation of the call on this thread fails
 * (alloc_sweep.h), until k passes its last: every point must end in
 * ZN_E_NOMEM saying so, and leave nothing behind (ASan and valgrind run
 * this binary too; a file a writer was making is not left half-written). */
#include "alloc_sweep.h"
#include "app/machine.h"
#include "app/plan_report.h"
#include "io/plot.h"

/* ---- the operations ------------------------------------------------------ */

/* the config of zinc's richest runs: every section the resolver reads */
static const char *const RICH =
    "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,\n"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001, \"betas\": [0.9, 0.95], \"weight_decay\": 0.1}},\n"
    " \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 100, \"warmup_num_steps\": 10}},\n"
    " \"fp16\": {\"enabled\": true, \"loss_scale_window\": 100},\n"
    " \"gradient_clipping\": 1.0, \"steps_per_print\": 5, \"wall_clock_breakdown\": false,\n"
    " \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": true, \"contiguous_gradients\": true,\n"
    "   \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true},\n"
    "   \"stage3_param_persistence_threshold\": 0, \"zero_hpz_partition_size\": 2,\n"
    "   \"zero_quantized_weights\": true, \"zero_quantized_gradients\": true},\n"
    " \"zinc\": {\"comm_timeout\": 60}}\n";

/* the command line's flags beside RICH: GPT-2 on text, 4 ranks on 2 nodes */
static ZnTrainFlags rich_flags(void) {
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    f.model_spec = "gpt2-tiny";
    f.data_spec = "text:tests/data/gpl-3.txt";
    f.seq_len = 16;
    f.args.world_size = 4;
    f.ranks_per_node = 2;
    f.config_path = "rich.json";
    return f;
}

/* a config's text resolved into run options with the command line's flags */
static int op_resolve(const void *arg, ZnErr *err) {
    ZnTrainFlags f = rich_flags();
    ZnRunOpts o;
    int rc = zn_train_resolve(&f, arg, &o, err);
    if (!rc) zn_run_opts_free(&o);
    return rc;
}

/* After a writer failed: no file at path, or (a failure after the rename,
 * only the directory's fsync left) the whole file, ending in tail. */
static void whole_or_absent(const char *path, const ZnErr *err, const char *tail) {
    if (!zt_file_exists(path)) return;
    const long at = pause_failing();
    char *text = zt_read_text(path);
    size_t n = strlen(text), t = strlen(tail);
    if (!strstr(err->msg, "renamed into place") || n < t || strcmp(text + n - t, tail))
        fail_msg("the failure '%s' left %s (%zu bytes)", err->msg, path, n);
    free(text);
    fail_at = at;
}

/* a machine file read, then written to a file and read back */
static int op_machine(const void *arg, ZnErr *err) {
    ZnMachine m, back;
    int rc = zn_machine_load(arg, &m, err);
    if (rc) return rc;
    const long at = pause_failing();
    FILE *f = fopen(zt_path("m-out.json"), "w");
    fail_at = at;
    assert_non_null(f);
    rc = zn_machine_write_json(f, &m, err);
    fclose(f);
    if (!rc) rc = zn_machine_load(zt_path("m-out.json"), &back, err);
    if (!rc) assert_memory_equal(&m, &back, sizeof m);
    return rc;
}

/* two training logs read and plotted into one picture */
static int op_plot(const void *arg, ZnErr *err) {
    (void)arg;
    ZnPlotRun runs[2];
    memset(runs, 0, sizeof runs);
    int rc = zn_plot_read_csv(zt_path("a.csv"), ZN_PLOT_LOSS, &runs[0], err);
    if (!rc) rc = zn_plot_read_csv(zt_path("b.csv"), ZN_PLOT_LOSS, &runs[1], err);
    ZnPlotOpts po = {ZN_PLOT_LOSS, "two runs", 1};
    const char *out = zt_path("loss.svg");
    if (!rc) rc = zn_plot_write(out, runs, 2, &po, err);
    if (rc) assert_false(zt_file_exists(out));   /* the picture whole or not at all */
    unlink(out);
    zn_plot_run_free(&runs[0]);
    zn_plot_run_free(&runs[1]);
    return rc;
}

/* `zinc plan`: the dry run of a stage-3 GPT-2 run with offload and
 * ZeRO++, its report with the step time, as text and as JSON, and its picture */
static int op_plan(const void *arg, ZnErr *err) {
    const int json = *(const int *)arg;
    ZnTrainFlags f = rich_flags();
    f.steps = 1;
    f.dry_run = 1;
    const long at = pause_failing();   /* the options: op_resolve's sweep */
    ZnRunOpts o;
    int rc = zn_train_resolve(&f, RICH, &o, err);
    ZnMachine m;
    if (!rc) rc = zn_machine_preset("dgx-h100", &m, err);
    m.gpus_per_node = 2;
    char text[1 << 16];
    FILE *out = fmemopen(text, sizeof text, "w");
    fail_at = at;
    assert_int_equal(rc, 0);
    assert_non_null(out);
    const char *svg = zt_path("plan.svg");
    ZnPlanOpts po = {&m, 0, 0, json, json ? NULL : svg};
    rc = zn_plan_run(&o, &po, out, err);
    fclose(out);
    if (rc) whole_or_absent(svg, err, "</svg>\n");
    unlink(svg);
    zn_run_opts_free(&o);
    return rc;
}

/* An engine's life on one simulated rank: init, two steps, a checkpoint
 * saved, a second engine resuming it. The rank runs on a thread of its
 * own, so it takes the sweep's point from the calling thread and hands
 * back its count. The config, the model and the data are made before the
 * world, as zinc train makes them: the coverage build counts what runs in
 * a world as its plan's (src/core/covmark.h), and parsing is no plan's. */
typedef struct {
    const char *text;
    ZnConfig cfg;
    ZnModel *m;
    ZnData data;
    long at, seen;
    uint64_t digest;   /* the resumed engine's weights after its step */
} Life;

static int life_rank(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    (void)rank;
    Life *l = arg;
    const ZnConfig *cfg = &l->cfg;
    ZnModel *m = l->m;
    const ZnData *data = &l->data;
    const char *dir = zt_path("life");
    zt_rm_rf(dir);
    fail_at = l->at;
    seen = 0;
    ZnDevice dev, dev2;
    ZnEngine E, E2;
    ZnStepResult sr;
    int rc = zt_host_engine(&E, &dev, cfg, m, data, comm, NULL, err);
    if (!rc) {
        for (int t = 0; t < 2 && !rc; t++) rc = zn_engine_train_step(&E, &sr, err);
        if (!rc) rc = zn_ckpt_save(&E, dir, "mlp:6,8,5,4", l->text, err);
        zn_engine_free(&E);
    }
    if (!rc && !(rc = zt_host_engine(&E2, &dev2, cfg, m, data, comm, NULL, err))) {
        rc = zn_ckpt_load(&E2, dir, NULL, 0, err);
        if (!rc) rc = zn_engine_train_step(&E2, &sr, err);
        const long n = zn_model_numel(m);
        float *all = rc ? NULL : malloc((size_t)n * sizeof *all);
        if (!rc && !all) rc = zn_nomem(err);
        if (!rc) rc = zn_engine_gather_params(&E2, all, err);
        if (!rc) l->digest = zn_digest(all, n);
        free(all);
        zn_engine_free(&E2);
    }
    l->seen = seen;
    fail_at = 0;
    zt_rm_rf(dir);
    return rc;
}

static uint64_t life_want;   /* the digest of the unfailed run */

static int op_life(const void *arg, ZnErr *err) {
    Life l = {.text = arg, .at = pause_failing()};
    ZnConfigArgs a = zt_args(1, -1, -1, -1, -1);
    zt_config(&l.cfg, l.text, &a);
    l.m = zt_model("mlp:6,8,5,4");
    assert_int_equal(zn_data_init(&l.data, 6, 4, 1234), 0);
    int rc = zt_sim_run(1, life_rank, &l, 60, err);
    zn_data_free(&l.data);
    free(l.m);
    seen = l.seen;
    fail_at = l.at;
    /* a failure the engine absorbed (its activation pool not growing) must
       leave the unfailed run's weights */
    if (!rc && l.at && l.seen >= l.at) {
        if (l.digest != life_want) fail_msg("allocation %ld failed, the run went on to another digest", l.at);
        return ZT_RECOVERED;
    }
    if (!rc) life_want = l.digest;
    return rc;
}

/* ---- the tests ----------------------------------------------------------- */

/* spec: Z-ERR-002 resolving a config: every allocation's failure is a
 * clean out-of-memory error */
ZT_TEST(test_resolve) { assert_true(sweep("resolve", op_resolve, RICH) > 90); }

/* spec: Z-ERR-002 a machine file read and written (Z-MACH-003) */
ZT_TEST(test_machine) {
    zt_write_text(zt_path("m.json"), "{\"preset\": \"dgx-h100\", \"name\": \"my-node\", \"device_tflops_fp32\": 50,\n"
                                     " \"inter_node\": {\"bandwidth_gbps\": 22.5}}\n");
    assert_true(sweep("machine", op_machine, zt_path("m.json")) > 100);
}

/* spec: Z-ERR-002 training logs read and plotted (Z-PLOT-016: the picture
 * is written whole or not at all) */
ZT_TEST(test_plot) {
    const char *hdr = "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms\n";
    char a[2048], b[2048];
    int n = snprintf(a, sizeof a, "%s", hdr), m = snprintf(b, sizeof b, "%s", hdr);
    for (int s = 1; s <= 40; s++) {
        n += snprintf(a + n, sizeof a - (size_t)n, "%d,%g,0.001,1.5,1,0,%d,12.5\n", s, 4.0 / s, 8 * s);
        m += snprintf(b + m, sizeof b - (size_t)m, "%d,%g,0.001,1.5,1,0,%d,12.5\n", s, 3.0 / (s + 1), 8 * s);
    }
    zt_write_text(zt_path("a.csv"), a);
    zt_write_text(zt_path("b.csv"), b);
    assert_true(sweep("plot", op_plot, NULL) > 4);
}

/* spec: Z-ERR-002 `zinc plan`: the dry run, the report with the step time
 * and the picture (Z-CAP-001), and the JSON document */
ZT_TEST(test_plan) {
    const int text = 0, json = 1;
    assert_true(sweep("plan", op_plan, &text) > 40);
    assert_true(sweep("plan --json", op_plan, &json) > 500);
}

/* spec: Z-ERR-002 an engine (stage 3 with the optimizer and the parameters
 * on the cpu, bf16; stage 1 in fp32), its steps, a checkpoint saved and
 * resumed (Z-CKPT-002): every allocation's failure a clean out-of-memory error */
static void life_sweep(const char *what, const char *cfg) {
    ZnErr err = {0};
    life_want = 0;
    if (op_life(cfg, &err)) fail_msg("%s unfailed: %s", what, err.msg);
    assert_true(life_want != 0);
    assert_true(sweep(what, op_life, cfg) > 50);
}

ZT_TEST(test_engine_life) {
    life_sweep("engine s3 offload", "{\"train_micro_batch_size_per_gpu\": 2, \"bf16\": {\"enabled\": true}, "
               "\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0, "
               "\"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}}}");
    life_sweep("engine s1", "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": 1}}");
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_resolve),
    cmocka_unit_test(test_machine),
    cmocka_unit_test(test_plot),
    cmocka_unit_test(test_plan),
    cmocka_unit_test(test_engine_life))
