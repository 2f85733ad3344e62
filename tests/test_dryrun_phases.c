/* test_dryrun_phases.c: the dry run's step, phase by phase, against a real
 * simulated step of the same options, exactly (spec Z-DRY-007..009): for
 * world sizes 1 to 8, every stage, the optimizer and the parameters
 * offloaded, on one node and on several, ZeRO++ (hpZ, qwZ, qgZ) and MiCS,
 * each phase's peak bytes per tier, the categories at that peak, and the
 * collectives per op, per tag and across nodes; then the dry run's
 * collectives by kind add up to its phases' totals, and node 0's bytes and
 * egress to what the real run's node-0 ranks sent, and sent to other nodes. */
#include "testutil.h"
#include "app/dryrun.h"
#include "app/run.h"

static char text_path[64];   /* a language model's text */

static ZnRunOpts opts(const char *model, const char *cfg, int world, int per_node) {
    ZnTrainFlags f = zt_train_flags(model, 1, world, -1);
    char data[96];
    snprintf(data, sizeof data, "text:%s", text_path);
    if (!strncmp(model, "gpt2", 4)) f.data_spec = data;
    f.print_every = 0;
    f.ranks_per_node = per_node;
    return zt_resolve(&f, cfg);
}

static void assert_stats_equal(const char *what, int ph, const ZnCommStats *a, const ZnCommStats *b) {
    for (int op = 0; op < ZN_OP_N; op++)
        if (a->calls[op] != b->calls[op] || a->bytes_sent[op] != b->bytes_sent[op] ||
            a->bytes_recv[op] != b->bytes_recv[op] || a->bytes_inter[op] != b->bytes_inter[op])
            fail_msg("%s, %s, op %d: calls %ld/%ld sent %ld/%ld recv %ld/%ld inter %ld/%ld", what, zn_phase_name(ph),
                     op, a->calls[op], b->calls[op], a->bytes_sent[op], b->bytes_sent[op], a->bytes_recv[op],
                     b->bytes_recv[op], a->bytes_inter[op], b->bytes_inter[op]);
    if (a->ntags != b->ntags) fail_msg("%s, %s: %d tags, %d", what, zn_phase_name(ph), a->ntags, b->ntags);
    for (int i = 0; i < a->ntags; i++) {
        int j = 0;
        while (j < b->ntags && strcmp(a->tags[i].tag, b->tags[j].tag)) j++;
        if (j == b->ntags) fail_msg("%s, %s: tag %s missing", what, zn_phase_name(ph), a->tags[i].tag);
        if (a->tags[i].calls != b->tags[j].calls || a->tags[i].bytes_sent != b->tags[j].bytes_sent ||
            a->tags[i].bytes_recv != b->tags[j].bytes_recv || a->tags[i].bytes_inter != b->tags[j].bytes_inter)
            fail_msg("%s, %s, tag %s differs", what, zn_phase_name(ph), a->tags[i].tag);
    }
}

/* One comparison: the dry run of (model, cfg, world, per_node) against
 * zn_run's one step; every rank of the real run holds the same bytes. */
/* spec: Z-DRY-009 (the classes add up; node 0's bytes and egress are its ranks') */
static void compare(const char *model, const char *cfg, int world, int per_node) {
    char what[640];
    snprintf(what, sizeof what, "%s W=%d P=%d %s", model, world, per_node, cfg);
    ZnRunOpts o = opts(model, cfg, world, per_node);
    ZnErr err = {0};
    ZnDryRun *dr = malloc(sizeof *dr);
    assert_non_null(dr);
    if (zn_dry_run(&o, 1, dr, &err)) fail_msg("dry run %s: %s", what, err.msg);
    ZnRunResult res;
    if (zn_run(&o, &res, &err)) fail_msg("run %s: %s", what, err.msg);
    const int P = o.world.per_node;
    for (int ph = 0; ph < ZN_PH_N; ph++) {
        const ZnPhaseStats *d = &dr->ph[ph];
        if (!d->seen) fail_msg("%s: the dry run has no %s", what, zn_phase_name(ph));
        for (int t = 0; t < ZN_NTIERS; t++) {   /* the categories at the peak make up the peak */
            long sum = 0;
            for (int c = 0; c < ZN_MEM_NCAT; c++) sum += d->at_peak[t][c];
            assert_int_equal(sum, d->peak[t]);
        }
        assert_true(d->peak[ZN_TIER_DEVICE] > 0);
        for (int r = 0; r < world; r++) {
            const ZnPhaseStats *s = &res.phases[ZN_PH_N * r + ph];
            assert_int_equal(s->seen, 1);
            for (int t = 0; t < ZN_NTIERS; t++) {
                if (d->peak[t] != s->peak[t])
                    fail_msg("%s, rank %d, %s, %s: peak %ld, real %ld", what, r, zn_phase_name(ph), zn_tier_name(t),
                             d->peak[t], s->peak[t]);
                for (int c = 0; c < ZN_MEM_NCAT; c++)
                    if (d->at_peak[t][c] != s->at_peak[t][c])
                        fail_msg("%s, rank %d, %s, %s, %s at the peak: %ld, real %ld", what, r, zn_phase_name(ph),
                                 zn_tier_name(t), zn_mem_cat_name((ZnMemCat)c), d->at_peak[t][c], s->at_peak[t][c]);
            }
            /* offload copies: the same bytes on every rank */
            assert_true(d->h2d == s->h2d && d->d2h == s->d2h);
        }
        /* rank 0's collectives, per op, per tag, across nodes */
        assert_stats_equal(what, ph, &d->comm, &res.phases[ph].comm);
        /* the kinds add up to the phase; node 0's egress is its ranks' */
        double sent = 0, inter = 0, node = 0, real_node = 0, node_sent = 0, real_node_sent = 0;
        long calls = 0, real_calls = 0;
        for (int k = 0; k < dr->calls.n; k++)
            if (dr->calls.cls[k].phase == ph) {
                sent += dr->calls.cls[k].sent;
                inter += dr->calls.cls[k].inter;
                node += dr->calls.cls[k].node_inter;
                node_sent += dr->calls.cls[k].node_sent;
                calls += dr->calls.cls[k].calls;
            }
        for (int op = 0; op < ZN_OP_N; op++) {
            sent -= (double)d->comm.bytes_sent[op];
            inter -= (double)d->comm.bytes_inter[op];
            real_calls += d->comm.calls[op];
            for (int r = 0; r < P && P < world; r++) {
                real_node += (double)res.phases[ZN_PH_N * r + ph].comm.bytes_inter[op];
                real_node_sent += (double)res.phases[ZN_PH_N * r + ph].comm.bytes_sent[op];
            }
        }
        assert_true(sent == 0 && inter == 0);
        assert_int_equal(calls, real_calls);
        if (node != real_node) fail_msg("%s, %s: node egress %.0f, real %.0f", what, zn_phase_name(ph), node, real_node);
        if (node_sent != real_node_sent)   /* what the link lines' means divide (Z-TIME-002) */
            fail_msg("%s, %s: node 0 sent %.0f, real %.0f", what, zn_phase_name(ph), node_sent, real_node_sent);
    }
    assert_int_equal(dr->calls.dropped, 0);
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
    free(dr);
}

#define CFG "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": %d, \"bf16\": {\"enabled\": true}, " \
            "\"zero_optimization\": {\"stage\": %d%s}}"

static const char *const OFFLOAD[3] = {
    "",
    ", \"offload_optimizer\": {\"device\": \"cpu\"}",
    ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}",
};

/* spec: Z-DRY-008 */
static void test_stages_worlds_offload(void **state) {
    (void)state;
    char cfg[512];
    int k = 0;
    for (int world = 1; world <= 8; world++)
        for (int stage = 0; stage <= 3; stage++)
            for (int off = 0; off < 3; off++) {
                if ((stage == 0 && off > 0) || (stage < 3 && off == 2)) continue;   /* offload: stages 1-3; params: 3 */
                if (zt_light() && k++ % 3) continue;   /* light: every third case, the same code paths */
                /* GA 2 on odd worlds: a phase met twice keeps its highest peak and adds its calls */
                snprintf(cfg, sizeof cfg, CFG, 1 + world % 2, stage, OFFLOAD[off]);
                compare("mlp:7,13,5,3", cfg, world, 0);
                /* on nodes of 2 ranks: the bytes that cross */
                if (world % 2 == 0 && world > 2) compare("mlp:7,13,5,3", cfg, world, 2);
            }
}

/* spec: Z-DRY-008 */
static void test_language_model(void **state) {
    (void)state;
    snprintf(text_path, sizeof text_path, "/tmp/zinc-phases-XXXXXX");
    int fd = mkstemp(text_path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++) fprintf(f, "the quick brown fox %d jumps over the lazy dog\n", i);
    assert_int_equal(fclose(f), 0);
    char cfg[512];
    for (int stage = 0; stage <= 3; stage++) {
        snprintf(cfg, sizeof cfg, CFG, 1, stage, "");
        compare("gpt2-tiny", cfg, 4, 2);
    }
    snprintf(cfg, sizeof cfg, CFG, 2, 3, OFFLOAD[2]);
    compare("gpt2-tiny", cfg, 2, 0);
    unlink(text_path);
}

/* spec: Z-DRY-008 */
static void test_zeropp_mics(void **state) {
    (void)state;
    static const char *const extra[] = {
        ", \"zero_hpz_partition_size\": 2",
        ", \"zero_quantized_weights\": true",
        ", \"zero_quantized_gradients\": true",
        ", \"zero_hpz_partition_size\": 4, \"zero_quantized_weights\": true, \"zero_quantized_gradients\": true",
        ", \"mics_shard_size\": 4",
        ", \"mics_shard_size\": 4, \"mics_hierarchical_params_gather\": true",
    };
    char cfg[512];
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        snprintf(cfg, sizeof cfg, CFG, 1, 3, extra[i]);
        compare("mlp:7,13,5,3", cfg, 8, 2);
        /* on nodes of 4 (a hierarchical gather needs a shard group over more than one node) */
        if (!zt_light() && i != 5) compare("mlp:7,13,5,3", cfg, 8, 4);
    }
}

ZT_MAIN(cmocka_unit_test(test_stages_worlds_offload), cmocka_unit_test(test_language_model),
        cmocka_unit_test(test_zeropp_mics))
