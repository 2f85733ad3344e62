/* test_plan_cli.c: `zinc plan` and `zinc train --dry-run` with a machine,
 * a capacity, --json and --svg (spec Z-CAP-*): the lines a user reads,
 * the JSON a tool reads (its numbers equal the dry run's), the picture,
 * and the refusals. */
#include "testutil.h"
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include "app/dryrun.h"
#include "app/plan_report.h"

static int run(int (*cmd)(int, char **), int argc, const char *const *argv, char **out, char **errs) {
    return zt_capture(cmd, argc, argv, out, errs);
}

/* The command: GPT-3 175B, 4096 ranks, stage 3, on DGX H100 nodes.
 * spec: Z-CAP-001 */
static void test_gpt3_on_4096(void **state) {
    (void)state;
    const char *argv[] = {"--model", "gpt3-175b", "--world-size", "4096", "--stage", "3", "--dtype", "bf16",
                          "--micro-batch", "1", "--steps", "1", "--machine", "dgx-h100"};
    char *out, *errs;
    assert_int_equal(run(zn_cmd_plan, 14, argv, &out, &errs), 0);
    assert_str_contains(out, "[zinc] dry run: rank 0 of 4096 (8 per node), stage 3, 174604259328 parameters");
    assert_str_contains(out, "[zinc] dry run [rank 0] forward peak device ");
    assert_str_contains(out, "[zinc] dry run [rank 0] backward peak device ");
    assert_str_contains(out, "[zinc] dry run [rank 0] step peak device ");
    assert_str_contains(out, "step collective: forward all_gather param_gather, group of 4096 (stride 1): ");
    assert_str_contains(out, "step collective: backward reduce_scatter grad_reduce, group of 4096 (stride 1): ");
    assert_str_contains(out, "[zinc] dry run [rank 0] step bytes by link, a rank of a node of 8: intra-node ");
    /* 80 GiB of the preset: no activation checkpointing, so the forward overflows */
    assert_str_contains(out, "[zinc] plan: device memory 80.00 GiB overflows first in forward");
    assert_str_contains(out, "[zinc] plan: largest micro-batch that fits: none");
    assert_str_contains(out, "[zinc] plan: machine dgx-h100 (8 GPUs per node");
    assert_str_contains(out, "[zinc] plan: forward  compute ");
    assert_str_contains(out, "[zinc] plan: step ");
    assert_str_contains(out, " s predicted: ");
    assert_str_contains(out, " tokens/s, ");
    assert_str_contains(out, " TFLOP/s per GPU");
    free(out);
    free(errs);
    /* zinc train --dry-run is the same command */
    const char *argv2[] = {"--model", "gpt3-175b", "--world-size", "4096", "--stage", "3", "--dtype", "bf16",
                           "--micro-batch", "1", "--steps", "1", "--machine", "dgx-h100", "--dry-run"};
    char *out2;
    assert_int_equal(run(zn_cmd_train, 15, argv2, &out2, &errs), 0);
    const char *a = strstr(out2, "[zinc] dry run:");
    assert_non_null(a);
    free(errs);
    assert_int_equal(run(zn_cmd_plan, 14, argv, &out, &errs), 0);
    assert_string_equal(strstr(out, "[zinc] dry run:"), a);
    free(out);
    free(out2);
    free(errs);
}

static double num(const cJSON *o, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *x = o;
    for (char *k = strtok(buf, "."); k; k = strtok(NULL, ".")) {
        x = cJSON_GetObjectItemCaseSensitive(x, k);
        if (!x) fail_msg("JSON: no %s", path);
    }
    if (!cJSON_IsNumber(x)) fail_msg("JSON: %s is not a number", path);
    return x->valuedouble;
}

/* --json: one document, the dry run's numbers.
 * spec: Z-CAP-004 */
static void test_json(void **state) {
    (void)state;
    const char *argv[] = {"--model", "gpt2-tiny", "--world-size", "8", "--ranks-per-node", "4", "--stage", "3",
                          "--dtype", "bf16", "--micro-batch", "2", "--steps", "1", "--machine", "dgx-a100",
                          "--device-memory", "100KB", "--json"};
    char *out, *errs;
    /* the machine's 8 GPUs a node and the flag's 4 disagree: refused */
    assert_int_equal(run(zn_cmd_plan, 19, argv, &out, &errs), 2);
    assert_str_contains(errs, "the run puts 4 ranks on a node and machine 'dgx-a100' has 8 GPUs per node");
    free(out);
    free(errs);
    argv[5] = "8";
    assert_int_equal(run(zn_cmd_plan, 19, argv, &out, &errs), 0);
    cJSON *d = cJSON_Parse(out);
    if (!d) fail_msg("not JSON: %s", out);
    assert_true(num(d, "world_size") == 8 && num(d, "ranks_per_node") == 8 && num(d, "stage") == 3);
    assert_true(num(d, "micro_batch") == 2);
    /* against the dry run itself */
    ZnTrainFlags f = zt_train_flags("gpt2-tiny", 1, 8, 3);
    f.dry_run = 1;
    f.args.micro_batch = 2;
    f.args.dtype = ZN_BF16;
    ZnRunOpts o;
    ZnErr err = {0};
    assert_int_equal(zn_train_resolve(&f, NULL, &o, &err), 0);
    ZnDryRun *r = malloc(sizeof *r);
    assert_int_equal(zn_dry_run(&o, 1, r, &err), 0);
    assert_true(num(d, "parameters") == (double)r->numel && num(d, "partition") == (double)r->part_n);
    assert_true(num(d, "init.device.total") == (double)r->init[ZN_DRY_DEVICE].cur_total);
    assert_true(num(d, "init.device.by_category.params16") == (double)r->init[ZN_DRY_DEVICE].cur[ZN_MEM_PARAMS16]);
    assert_true(num(d, "phases.forward.device.peak") == (double)r->ph[ZN_PH_FORWARD].peak[ZN_TIER_DEVICE]);
    assert_true(num(d, "phases.backward.device.at_peak.activations") ==
                (double)r->ph[ZN_PH_BACKWARD].at_peak[ZN_TIER_DEVICE][ZN_MEM_ACTIVATIONS]);
    assert_true(num(d, "phases.forward.flops") == r->ph[ZN_PH_FORWARD].dev.flops);
    assert_true(num(d, "device_peak") == (double)zn_plan_device_peak(r));
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(d, "collectives");
    assert_int_equal(cJSON_GetArraySize(cl), r->calls.n);
    double sent = 0;
    for (int k = 0; k < r->calls.n; k++) {
        const cJSON *c = cJSON_GetArrayItem(cl, k);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(c, "tag")->valuestring, r->calls.cls[k].tag);
        assert_true(num(c, "calls") == (double)r->calls.cls[k].calls);
        assert_true(num(c, "bytes_sent") == r->calls.cls[k].sent);
        sent += r->calls.cls[k].sent;
    }
    assert_true(num(d, "link_bytes.intra_node") + num(d, "link_bytes.inter_node") == sent);
    /* 100 KB holds not even init: no micro-batch fits */
    const cJSON *fit = cJSON_GetObjectItemCaseSensitive(d, "fit");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(fit, "overflow")->valuestring, "init");
    assert_true(num(d, "fit.device_memory") == 1e5 && num(d, "fit.largest_micro_batch") == 0);
    /* the time, and its phases adding up */
    double total = num(d, "time.phases.forward.total_s") + num(d, "time.phases.backward.total_s") +
                   num(d, "time.phases.step.total_s");
    assert_true(fabs(total - num(d, "time.step_s")) <= 1e-12 * total);
    /* the global batch: 8 ranks of 2 samples of 32 tokens (gpt2-tiny's positions) */
    assert_true(fabs(num(d, "time.tokens_per_s") - 8 * 2 * 32 / num(d, "time.step_s")) <= 1e-9 * num(d, "time.tokens_per_s"));
    cJSON_Delete(d);
    free(r);
    zn_run_opts_free(&o);
    free(out);
    free(errs);
}

/* The number after `key` in line (the first occurrence), or fail. */
static double num_after(const char *line, const char *key) {
    const char *p = strstr(line, key);
    if (!p) fail_msg("no '%s' in: %.300s", key, line);
    return strtod(p + strlen(key), NULL);
}

/* The links on the machine's nodes: at 4096 ranks without --ranks-per-node,
 * dgx-h100 puts 8 ranks on a node, and the byte lines say so and count on
 * those nodes: every collective that leaves the node shows a rank's share
 * of its egress going to other nodes, and the per-link totals are the bytes
 * the step time prices (seconds times the machine's bandwidths). Before,
 * these lines printed rank 0's own bytes, "0 to other nodes" everywhere
 * (its ring neighbour is on its node), beside 0.25 s of inter-node time.
 * spec: Z-CAP-001 */
/* spec: Z-TIME-002 */
static void test_links_on_the_machines_nodes(void **state) {
    (void)state;
    const char *argv[] = {"--params", "7.5e9", "--world-size", "4096", "--stage", "3"};
    char *out, *errs;
    assert_int_equal(run(zn_cmd_plan, 6, argv, &out, &errs), 0);
    assert_str_contains(out, "[zinc] dry run: rank 0 of 4096 (8 per node), stage 3");
    assert_str_contains(out, "[zinc] plan: machine dgx-h100 (8 GPUs per node, ");
    /* every class: within + to other nodes of a rank, its node's egress over 8 */
    int classes = 0;
    double egress = 0;
    for (const char *l = strstr(out, "step collective: "); l; l = strstr(l + 1, "step collective: ")) {
        const char *eol = strchr(l, '\n');
        assert_non_null(eol);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(eol - l), l);
        assert_str_contains(line, "; a rank of a node of 8: ");
        double x = num_after(line, " within it, "), e = num_after(line, "; node egress ");
        assert_true(fabs(x - e / 8) <= 0.5);   /* %.0f of the mean */
        if (e >= 8) assert_true(x >= 1);
        if (strstr(line, ": forward ") || strstr(line, ": backward ")) assert_true(x > 1e9);   /* GB a step */
        egress += e;
        classes++;
    }
    assert_true(classes >= 3);
    const char *bl = strstr(out, "[zinc] dry run [rank 0] step bytes by link, a rank of a node of 8: intra-node ");
    assert_non_null(bl);
    const double intra = num_after(bl, "intra-node "), inter = num_after(bl, ", inter-node "),
                 node = num_after(bl, "; node egress ");
    assert_true(fabs(node - egress) <= 0.5 * classes);
    assert_true(inter > 1e10 && fabs(inter - node / 8) <= 0.5);
    /* every byte a rank sends goes one way or the other */
    const double sent = num_after(strstr(out, "collectives (one step): "), " calls, ");
    assert_true(intra > 0 && fabs(intra + inter - sent) <= 64);
    /* the time prices those bytes: intra at 360 GB/s, inter at 45 GB/s a GPU
       (%.4g on each phase's line: 5 parts in 10^4) */
    double ti = 0, tx = 0;
    int phases = 0;
    for (const char *l = strstr(out, "[zinc] plan: "); l; l = strstr(l + 1, "[zinc] plan: ")) {
        const char *eol = strchr(l, '\n'), *p = strstr(l, " compute ");
        if (!p || p > eol) continue;   /* not a phase's line */
        ti += num_after(l, "(intra ");
        tx += num_after(l, ", inter ");
        phases++;
    }
    assert_int_equal(phases, 3);
    if (fabs(tx * 45e9 - inter) > 5e-4 * inter) fail_msg("inter-node: %.4g s priced, %.0f bytes", tx, inter);
    if (fabs(ti * 360e9 - intra) > 5e-4 * intra) fail_msg("intra-node: %.4g s priced, %.0f bytes", ti, intra);
    /* one topology drives both: the flag that names the machine's nodes
       changes nothing */
    const char *argv8[] = {"--params", "7.5e9", "--world-size", "4096", "--stage", "3", "--ranks-per-node", "8"};
    char *out8, *errs8;
    assert_int_equal(run(zn_cmd_plan, 8, argv8, &out8, &errs8), 0);
    assert_string_equal(out8, out);
    free(out8);
    free(errs8);
    free(out);
    free(errs);
    /* --json: the same link bytes, and the class's node figures they come from */
    const char *argvj[] = {"--params", "7.5e9", "--world-size", "4096", "--stage", "3", "--json"};
    assert_int_equal(run(zn_cmd_plan, 7, argvj, &out, &errs), 0);
    cJSON *d = cJSON_Parse(out);
    if (!d) fail_msg("not JSON: %.200s", out);
    assert_true(num(d, "ranks_per_node") == 8);
    assert_true(fabs(num(d, "link_bytes.inter_node") - inter) <= 0.5);
    assert_true(fabs(num(d, "link_bytes.intra_node") - intra) <= 0.5);
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(d, "collectives");
    for (int k = 0; k < cJSON_GetArraySize(cl); k++) {
        const cJSON *c = cJSON_GetArrayItem(cl, k);
        assert_true(num(c, "inter_node") == num(c, "node_egress") / 8);
        assert_true(num(c, "intra_node") == (num(c, "node_bytes_sent") - num(c, "node_egress")) / 8);
        assert_true(num(c, "bytes_inter_node") == 0);   /* rank 0's own: its ring neighbour is rank 1 */
    }
    cJSON_Delete(d);
    free(out);
    free(errs);
}

/* Units that say what they are: the ZeRO paper's 31.4 GB (10^9 bytes) of
 * model states per device at stage 1, 7.5B parameters on 64 ranks, is the
 * 29.25 GiB zinc prints; the lines that quote DeepSpeed keep its "GB"
 * (2^30 bytes, as its estimators divide).
 * spec: Z-REP-008 */
/* spec: Z-DRY-005 */
/* spec: Z-CAP-006 */
static void test_gib_figures(void **state) {
    (void)state;
    const char *argv[] = {"--model", "mlp:25000,25000,25000,25000,25000,25000,25000,25000,25000,25000,25000,25000,25000",
                          "--world-size", "64", "--stage", "1", "--dtype", "fp16", "--steps", "0"};
    char *out, *errs;
    assert_int_equal(run(zn_cmd_plan, 10, argv, &out, &errs), 0);
    assert_str_contains(out, " 7500300000 parameters");
    /* the model states' bytes, from the exact line */
    const char *l = strstr(out, "device bytes by category (after init): ");
    assert_non_null(l);
    const double states = num_after(l, "params16=") + num_after(l, "master32=") + num_after(l, "grads=") +
                          num_after(l, "exp_avg=") + num_after(l, "exp_avg_sq=");
    assert_true(states == 31407506384.0);
    assert_true(fabs(states / 1e9 - 31.4) < 0.05);           /* the paper's GB */
    assert_true(fabs(states / 1073741824.0 - 29.25) < 0.005); /* zinc's GiB */
    assert_str_contains(out, "[zinc] dry run [rank 0] device total 31.35 GiB, peak 31.35 GiB, model states 29.25 GiB\n");
    assert_str_contains(out, "[zinc] dry run [rank 0] device model states 29.25 GiB | DeepSpeed estimate_zero2 per GPU ");
    /* DeepSpeed's words where zinc quotes DeepSpeed, zinc's everywhere else */
    assert_str_contains(out, " GB\n[zinc] dry run [rank 0] host model states 0.00 GiB | DeepSpeed estimate_zero2 per CPU");
    assert_null(strstr(out, "total 31.35 GB"));
    free(out);
    free(errs);
}

/* --svg: the picture, timed with a machine, untimed without.
 * spec: Z-CAP-005 */
static void test_svg(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/plan.svg", zt_tmpdir());
    const char *argv[] = {"--model", "mlp:64,64,64,8", "--world-size", "16", "--stage", "3", "--steps", "1",
                          "--machine", "dgx-h100", "--svg", path};
    char *out, *errs;
    assert_int_equal(run(zn_cmd_plan, 12, argv, &out, &errs), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *svg = zt_slurp(f, NULL);
    assert_str_contains(svg, "<svg");
    assert_str_contains(svg, "data-phase=\"forward\"");
    assert_str_contains(svg, "data-phase=\"step\"");
    assert_str_contains(svg, "class=\"capacity\"");
    assert_str_contains(svg, "step-total");
    assert_null(strstr(svg, "no machine given"));
    free(svg);
    free(out);
    free(errs);
    /* no machine (12 ranks are no whole number of the default's nodes): the memory alone */
    assert_int_equal(run(zn_cmd_plan, 8, (const char *const[]){"--model", "mlp:64,64,64,8", "--world-size", "12",
                                                              "--svg", path, "--steps", "1"},
                         &out, &errs),
                     0);
    f = fopen(path, "r");
    assert_non_null(f);
    svg = zt_slurp(f, NULL);
    assert_str_contains(svg, "no machine given");
    assert_null(strstr(svg, "class=\"capacity\""));
    free(svg);
    free(out);
    free(errs);
}

/* spec: Z-CAP-002 */
/* spec: Z-CAP-008 */
static void test_refusals(void **state) {
    (void)state;
    static const struct { int train; int argc; const char *argv[10]; int rc; const char *msg; } cases[] = {
        {1, 4, {"--model", "mlp:8,4", "--machine", "dgx-h100"}, 2, "--machine describes a dry run: add --dry-run (or use zinc plan)"},
        {1, 3, {"--model", "mlp:8,4", "--json"}, 2, "--json describes a dry run"},
        {1, 4, {"--model", "mlp:8,4", "--svg", "x.svg"}, 2, "--svg describes a dry run"},
        {0, 4, {"--model", "mlp:8,4", "--machine", "dgx-b200"}, 1, "(not a machine preset either: dgx-h100, dgx-a100)"},
        {0, 6, {"--model", "mlp:8,4", "--machine", "dgx-h100", "--world-size", "12"}, 2,
         "--world-size 12 is not a whole number of dgx-h100 nodes of 8 GPUs"},
        {0, 4, {"--model", "gpt2:n_layer=129", "--world-size", "8"}, 2, "n_layer 129 is too large (at most 128)"},
        {0, 4, {"--model", "mlp:8,4", "--backend", "tcp"}, 2, "--dry-run simulates one rank itself"},
        {0, 4, {"--params", "7B", "--model", "gpt2"}, 2, "--params builds a model: give --model or --params, not both"},
        {0, 2, {"--params", "500B"}, 2, "--params: 500000000000 is past the largest GPT-3 shape zinc builds (128 layers"},
        {0, 1, {"--bogus"}, 2, "unknown flag '--bogus' for 'zinc plan'"},
        {0, 2, {"--params", "seven"}, 2, "--params: expected a parameter count such as 350M, 7.5B or 2851e6, got 'seven'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out, *errs;
        int rc = run(cases[i].train ? zn_cmd_train : zn_cmd_plan, cases[i].argc, cases[i].argv, &out, &errs);
        if (rc != cases[i].rc) fail_msg("case %zu: exit %d, want %d: %s", i, rc, cases[i].rc, errs);
        assert_str_contains(errs, cases[i].msg);
        free(out);
        free(errs);
    }
    /* a world inside one node of the machine: no per-node flag needed; no
       --machine: dgx-h100 where the run's nodes can be its nodes, else no time */
    static const struct { int argc; const char *argv[8], *has[3]; } runs[] = {
        {8, {"--model", "mlp:8,4", "--world-size", "4", "--steps", "1", "--machine", "dgx-h100"},
         {"rank 0 of 4 (4 per node)"}},
        {6, {"--model", "mlp:8,4", "--world-size", "12", "--steps", "1"},
         {"rank 0 of 12 (12 per node)", "[zinc] plan: no step time: the run's nodes are not dgx-h100's; give --machine"}},
        {6, {"--model", "mlp:8,4", "--world-size", "16", "--steps", "1"},
         {"rank 0 of 16 (8 per node)", "[zinc] plan: machine dgx-h100 (8 GPUs per node, ",
          "[zinc] plan: device memory 80.00 GiB holds the run"}},
    };
    char *out, *errs;
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        assert_int_equal(run(zn_cmd_plan, runs[i].argc, runs[i].argv, &out, &errs), 0);
        for (int k = 0; k < 3 && runs[i].has[k]; k++) assert_str_contains(out, runs[i].has[k]);
        free(out);
        free(errs);
    }
    /* --params: GPT-3's own shape when within 1% (175B); else the shape within
       1% whose depth is nearest its width's (13B: GPT-3 13B is 1.1% short;
       7.5e9: the nearest GPT-3 shape is 3% short); the header prints the count */
    static const struct { const char *p; const char *spec; const char *numel; } shapes[] = {
        {"175B", "gpt2:n_layer=96,n_embd=12288,n_head=96,n_positions=2048 (174604259328 parameters for --params 175000000000)", " 174604259328 parameters"},
        {"13B", "gpt2:n_layer=43,n_embd=4992,n_head=39,n_positions=2048 (13122660096 parameters for --params 13000000000)", " 13122660096 parameters"},
        {"7.5e9", "gpt2:n_layer=34,n_embd=4224,n_head=33,n_positions=2048 (7502419584 parameters for --params 7500000000)", " 7502419584 parameters"},
        {"1", "gpt2:n_layer=1,n_embd=128,n_head=1,n_positions=2048", " parameters"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const char *pv[] = {"--params", shapes[i].p, "--world-size", "64", "--steps", "0"};
        assert_int_equal(run(zn_cmd_plan, 6, pv, &out, &errs), 0);
        assert_str_contains(out, shapes[i].spec);
        assert_str_contains(out, shapes[i].numel);
        free(out);
        free(errs);
    }
    /* --steps 0: init only; no fit, no time */
    const char *argv0[] = {"--model", "mlp:8,4", "--world-size", "8", "--steps", "0", "--machine", "dgx-h100"};
    assert_int_equal(run(zn_cmd_plan, 8, argv0, &out, &errs), 0);
    assert_null(strstr(out, "[zinc] plan:"));
    assert_str_contains(out, "(after init)");
    free(out);
    free(errs);
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_gpt3_on_4096),
    cmocka_unit_test(test_json),
    cmocka_unit_test(test_links_on_the_machines_nodes),
    cmocka_unit_test(test_gib_figures),
    cmocka_unit_test(test_svg),
    cmocka_unit_test(test_refusals))
