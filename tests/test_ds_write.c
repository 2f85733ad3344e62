/* test_ds_write.c: zinc's checkpoints written as DeepSpeed's (`zinc ckpt
 * to-deepspeed`, spec Z-DSCK-009), checked without torch: the folder holds
 * DeepSpeed 0.19.8's layout for the run (the same files, groups, slices,
 * paddings and sub-groups as the folders DeepSpeed itself wrote into
 * tests/data/dsck for the same model), every state read back bit for bit,
 * and a run resumed from it prints the digest of the run resumed from
 * zinc's own checkpoint. `make test-deepspeed` has DeepSpeed resume them. */
#include "testutil.h"
#include "app/cli.h"
#include "core/fileio.h"
#include "io/checkpoint.h"
#include "io/ds_ckpt.h"
#include "io/pickle_write.h"
#include "io/torch_file.h"
#include "io/zipread.h"
#include "io/zipwrite.h"

#define DSCK "tests/data/dsck/"
/* the fixtures' groups: the Trainer's, biases without weight decay */
static const char *CFG =
    "{\"train_batch_size\": %d, \"train_micro_batch_size_per_gpu\": %d, \"optimizer\": {\"type\": \"AdamW\", "
    "\"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}}, \"zinc\": {\"weight_decay_exclude\": [\"bias\"]}%s}";
#define MODEL "mlp:5,5,5,tie:1=0"

/* zinc trains MODEL for `steps` steps at world and stage, with `extra`
   keys in its config, and saves its checkpoint into dir. */
static void train_with(const char *dir, int world, int stage, const char *extra, long steps, int resume,
                       uint64_t *digest) {
    char cfg[1024];
    /* the fixtures' batch (4 of 2 per rank) where it divides, else 12 of 1 */
    const int tb = 4 % (2 * world) ? 12 : 4, mb = tb == 4 ? 2 : 1;
    snprintf(cfg, sizeof cfg, CFG, tb, mb, extra);
    ZnTrainFlags f = zt_train_flags(MODEL, steps, world, stage);
    ZnRunOpts o = zt_resolve(&f, cfg);
    o.ckpt_dir = dir;
    o.ckpt_interval = steps;
    o.resume = resume;
    ZnRunResult res;
    ZnErr err = {0};
    if (zn_run(&o, &res, &err)) fail_msg("train %s: %s", dir, err.msg);
    if (digest) *digest = res.digest;
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
}
/* the same in float32, or bf16 when asked */
static void train(const char *dir, int world, int stage, int bf16, long steps, int resume, uint64_t *digest) {
    train_with(dir, world, stage, bf16 ? ", \"bf16\": {\"enabled\": true}" : "", steps, resume, digest);
}

static void write_ds(const char *in, const char *out) {
    ZnDsWriteSummary sum;
    ZnErr err = {0};
    if (zn_ds_write(in, out, &sum, &err)) fail_msg("to-deepspeed %s: %s", in, err.msg);
}

static const struct { const char *fixture; int stage, bf16; } CASES[] = {
    {"z1-bf16", 1, 1}, {"z2", 2, 0}, {"z3", 3, 0}, {"z3-bf16", 3, 1}};

/* spec: Z-DSCK-009 — the layout is DeepSpeed's own for the same run */
static void test_layout_is_deepspeeds(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof CASES / sizeof *CASES; k++) {
        char zdir[512], ddir[520], tag[600];
        snprintf(zdir, sizeof zdir, "%s", zt_path(CASES[k].fixture));
        snprintf(ddir, sizeof ddir, "%s-ds", zdir);
        train(zdir, 2, CASES[k].stage, CASES[k].bf16, 2, 0, NULL);
        snprintf(tag, sizeof tag, "%s/global_step2", zdir);
        write_ds(tag, ddir);
        ZnDsCkpt a, b;
        ZnErr err = {0};
        char fix[256];
        snprintf(fix, sizeof fix, DSCK "%s", CASES[k].fixture);
        assert_int_equal(zn_ds_open(&a, ddir, &err), 0);
        assert_int_equal(zn_ds_open(&b, fix, &err), 0);
        /* the folder's numbers: stage, world, groups, layout, names, module dtype,
         * files, shared and all parameters, steps, samples, Adam's step */
        const long long fa[] = {a.stage, a.world, a.ngroups, a.per_param, a.bf16_names, a.module_type,
                                a.nmodel, a.nshared, a.nparams, a.global_steps, a.global_samples, a.adam_step};
        const long long fb[] = {b.stage, b.world, b.ngroups, b.per_param, b.bf16_names, b.module_type,
                                b.nmodel, b.nshared, b.nparams, b.global_steps, b.global_samples, b.adam_step};
        for (size_t i = 0; i < sizeof fa / sizeof *fa; i++)
            if (fa[i] != fb[i]) fail_msg("%s: number %zu is %lld, DeepSpeed's %lld", CASES[k].fixture, i, fa[i], fb[i]);
        assert_string_equal(a.ds_version, b.ds_version);
        for (int i = 0; i < a.nparams; i++) {
            assert_string_equal(a.param[i].name, b.param[i].name);
            assert_int_equal(a.param[i].group, b.param[i].group);
            assert_int_equal(a.param[i].offset, b.param[i].offset);
            assert_int_equal(a.param[i].numel, b.param[i].numel);
        }
        for (int s = 0; s < 3; s++)   /* every rank's slice of every group, padding as DeepSpeed pads */
            for (int i = 0; i < a.world * a.ngroups; i++) {
                assert_int_equal(a.state[s][i].numel, b.state[s][i].numel);
                assert_int_equal(a.state[s][i].type, b.state[s][i].type);
            }
        zn_ds_close(&a);
        zn_ds_close(&b);
    }
}

/* Every parameter's three states in the DeepSpeed folder d are those of
 * zinc's checkpoint c, bit for bit. */
static void same_states(const ZnDsCkpt *d, const ZnCkptWhole *c) {
    ZnErr err = {0};
    long off = 0;
    for (int p = 0; p < c->model.nparams; p++) {
        const long n = c->model.params[p].numel;
        const int i = zn_ds_find(d, c->model.params[p].name);
        assert_true(i >= 0);
        float *got = malloc((size_t)n * 4);
        for (int s = 0; s < 3; s++) {
            assert_int_equal(zn_ds_read_state(d, s, i, got, &err), 0);
            assert_memory_equal(got, c->full[s] + off, (size_t)n * 4);
        }
        free(got);
        off += n;
    }
}
/* spec: Z-DSCK-009 — every state read back is zinc's, bit for bit, and a
 * run resumed from the folder is the run resumed from zinc's checkpoint */
static void test_round_trip(void **state) {
    (void)state;
    static const struct { int world, stage, bf16; } RT[] = {{2, 1, 0}, {3, 2, 0}, {4, 3, 0}, {3, 3, 1}, {1, 2, 1}};
    for (size_t k = 0; k < sizeof RT / sizeof *RT; k++) {
        char zdir[512], ddir[520], tag[600], copy[600], cmd[2048];
        snprintf(zdir, sizeof zdir, "%s/rt%zu", zt_tmpdir(), k);
        snprintf(ddir, sizeof ddir, "%s-ds", zdir);
        train(zdir, RT[k].world, RT[k].stage, RT[k].bf16, 3, 0, NULL);
        snprintf(tag, sizeof tag, "%s/global_step3", zdir);
        write_ds(tag, ddir);
        ZnCkptWhole c;
        ZnDsCkpt d;
        ZnErr err = {0};
        assert_int_equal(zn_ckpt_read_whole(tag, &c, &err), 0);
        assert_int_equal(zn_ds_open(&d, ddir, &err), 0);
        assert_int_equal(d.adam_step, c.st.opt_step);
        assert_int_equal(d.global_steps, c.st.global_step);
        assert_int_equal(d.global_samples, c.st.global_samples);
        assert_true(d.cur_scale == c.st.scaler.cur_scale);
        same_states(&d, &c);
        zn_ds_close(&d);
        zn_ckpt_whole_free(&c);
        /* resumed to step 6 from each: one digest */
        uint64_t from_zinc, from_ds;
        snprintf(copy, sizeof copy, "%s-copy", ddir);
        snprintf(cmd, sizeof cmd, "cp -r %s %s", ddir, copy);
        assert_int_equal(system(cmd), 0);
        train(zdir, RT[k].world, RT[k].stage, RT[k].bf16, 6, 1, &from_zinc);
        train(copy, RT[k].world, RT[k].stage, RT[k].bf16, 6, 1, &from_ds);
        assert_true(from_zinc == from_ds);
    }
}

/* spec: Z-DSCK-009 — what cannot be written is refused whole */
static void test_refusals(void **state) {
    (void)state;
    char zdir[512], tag[600], out[600];
    snprintf(zdir, sizeof zdir, "%s/s0", zt_tmpdir());
    train(zdir, 2, 0, 0, 1, 0, NULL);
    snprintf(tag, sizeof tag, "%s/global_step1", zdir);
    snprintf(out, sizeof out, "%s-ds", zdir);
    ZnDsWriteSummary sum;
    ZnErr err = {0};
    assert_int_equal(zn_ds_write(tag, out, &sum, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "stage 0");
    assert_false(zt_file_exists(out));
    /* a folder that exists is not written over */
    snprintf(zdir, sizeof zdir, "%s/s2", zt_tmpdir());
    train(zdir, 2, 2, 0, 1, 0, NULL);
    snprintf(tag, sizeof tag, "%s/global_step1", zdir);
    write_ds(tag, out);
    assert_int_equal(zn_ds_write(tag, out, &sum, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "global_step1 exists");
    /* a damaged zinc checkpoint: its error, nothing written */
    char shard[700], out2[700];
    snprintf(shard, sizeof shard, "%s/zero_pp_rank_1_optim_states.safetensors", tag);
    FILE *f = fopen(shard, "r+b");
    assert_non_null(f);
    fseek(f, 200, SEEK_SET);
    fputc(0x5a ^ fgetc(f), f);
    fclose(f);
    snprintf(out2, sizeof out2, "%s-ds2", zdir);
    assert_int_not_equal(zn_ds_write(tag, out2, &sum, &err), 0);
    assert_str_contains(err.msg, "zero_pp_rank_1_optim_states.safetensors");
    assert_false(zt_file_exists(out2));
    /* a MiCS run: DeepSpeed 0.19.8 has no layout to write it in */
    snprintf(zdir, sizeof zdir, "%s/mics", zt_tmpdir());
    train_with(zdir, 2, 3, ", \"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 2}", 1, 0, NULL);
    snprintf(tag, sizeof tag, "%s/global_step1", zdir);
    snprintf(out2, sizeof out2, "%s-ds", zdir);
    assert_int_equal(zn_ds_write(tag, out2, &sum, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "to-deepspeed: mics_shard_size: DeepSpeed 0.19.8 has removed MiCS");
    assert_false(zt_file_exists(out2));
}

/* spec: Z-DSCK-009 — the zip writer's ZIP64 records, forced small, read back */
static void test_zip64(void **state) {
    (void)state;
    ZnZipW z;
    ZnErr err = {0};
    const char *path = zt_path("z64.pt");
    assert_int_equal(zn_zipw_open(&z, path, &err), 0);
    z.zip64_at = 8;   /* every size and offset past 8 bytes takes ZIP64 fields */
    ZnPw w;
    zn_pw_begin(&w);
    const int64_t shape = 3;
    zn_pw_tensor(&w, "FloatStorage", 0, 3, 1, &shape);
    assert_int_equal(zn_pw_finish(&w, &err), 0);
    const float x[3] = {1.5f, -2.0f, 3.25f};
    ZnZipPart p[] = {{w.p, w.n}}, d[] = {{x, 8}, {NULL, 4}};
    assert_int_equal(zn_zipw_add(&z, "archive/data.pkl", p, 1, &err), 0);
    assert_int_equal(zn_zipw_add(&z, "archive/byteorder", (ZnZipPart[]){{"little", 6}}, 1, &err), 0);
    assert_int_equal(zn_zipw_add(&z, "archive/data/0", d, 2, &err), 0);
    assert_int_equal(zn_zipw_commit(&z, &err), 0);
    zn_pw_free(&w);
    ZnPt f;
    ZnPtTensor t;
    assert_int_equal(zn_pt_open(&f, path, &err), 0);
    for (int i = 0; i < f.zip.n; i++) assert_int_equal(zn_zip_check_crc(&f.zip, &f.zip.e[i], &err), 0);
    assert_int_equal(zn_pt_tensor(&f, f.root, "root", &t, &err), 0);
    float got[3];
    assert_int_equal(zn_pt_read(&f, &t, 0, 3, got, &err), 0);
    const float want[3] = {1.5f, -2.0f, 0.0f};
    assert_memory_equal(got, want, sizeof want);
    zn_pt_close(&f);
}

/* a zip of 1100 small entries and one of 70000 zero bytes: its writes
 * span several of the writer's 64 KiB flushes, in the entries and in the
 * directory */
static int big_zip(const char *path, uint64_t zip64_at, ZnErr *err) {
    ZnZipW z;
    int rc = zn_zipw_open(&z, path, err);
    if (rc) return rc;
    z.zip64_at = zip64_at;
    static const char TEXT[50] = "fifty bytes of an entry, the same in every one...";
    for (int i = 0; i < 1100 && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "archive/data/%d", i);
        rc = zn_zipw_add(&z, name, (ZnZipPart[]){{TEXT, sizeof TEXT}}, 1, err);
    }
    if (!rc) rc = zn_zipw_add(&z, "archive/zeros", (ZnZipPart[]){{TEXT, 10}, {NULL, 70000}}, 2, err);
    if (!rc) return zn_zipw_commit(&z, err);
    zn_zipw_abort(&z);
    return rc;
}

typedef struct { const char *path; uint64_t zip64_at; } BigZip;

static int big_zip_run(void *ctx, ZnErr *err) {
    const BigZip *b = ctx;
    return big_zip(b->path, b->zip64_at, err);
}

/* a failed write leaves nothing under the name (but when only the sync
   after the rename failed) */
static void big_zip_left(void *ctx, long op, const ZnErr *err) {
    const BigZip *b = ctx;
    if (zt_file_exists(b->path) && !strstr(err->msg, "renamed into place"))
        fail_msg("I/O op %ld failing (%s) left %s", op, err->msg, b->path);
    unlink(b->path);
}

/* spec: Z-DSCK-009 — the zip writer with each I/O operation failing in
 * turn: ZN_E_IO naming the fault, and nothing left under the name */
static void test_zip_writer_faults(void **state) {
    (void)state;
    const char *path = zt_path("big.zip");
    for (int v = 0; v < 2; v++) {
        BigZip b = {path, v ? 8 : 0xFFFFFFFFu};
        assert_true(zt_io_fault_sweep("the zip writer", big_zip_run, &b, big_zip_left) > 6);
        /* the file written whole reads back: 1101 entries, the last all zeros past its 10 bytes */
        ZnZip z;
        ZnErr err = {0};
        assert_int_equal(zn_zip_open(&z, path, &err), 0);
        assert_int_equal(z.n, 1101);
        for (int i = 0; i < z.n; i++) assert_int_equal(zn_zip_check_crc(&z, &z.e[i], &err), 0);
        assert_int_equal(z.e[1100].size, 70010);
        zn_zip_close(&z);
        unlink(path);
    }
}

/* zinc trains MODEL for steps at world 2 and stage with the config cfg
 * (a whole ds_config) and saves into dir */
static void train_cfg(const char *dir, int stage, const char *cfg, long steps) {
    ZnTrainFlags f = zt_train_flags(MODEL, steps, 2, stage);
    ZnRunOpts o = zt_resolve(&f, cfg);
    o.ckpt_dir = dir;
    o.ckpt_interval = steps;
    ZnRunResult res;
    ZnErr err = {0};
    if (zn_run(&o, &res, &err)) fail_msg("train %s: %s", dir, err.msg);
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
}

/* spec: Z-DSCK-009 — fp16 with its dynamic loss scaler, a scheduler, sub-groups
 * smaller than a group: every state and counter read back as zinc saved it;
 * the settings DeepSpeed 0.19.8 cannot hold refused, nothing written */
static void test_fp16_scheduler_subgroups(void **state) {
    (void)state;
    static const char *const CFGS[] = {
        "{\"train_batch_size\": 4, \"train_micro_batch_size_per_gpu\": 2, \"optimizer\": {\"type\": \"AdamW\", "
        "\"params\": {\"lr\": 0.01, \"weight_decay\": 0.1, \"betas\": [0.8, 0.99]}}, \"fp16\": {\"enabled\": true, "
        "\"initial_scale_power\": 8}, \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 2}}, "
        "\"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 5}, \"zinc\": {\"weight_decay_exclude\": [\"bias\"]}}",
        "{\"train_batch_size\": 4, \"train_micro_batch_size_per_gpu\": 2, \"optimizer\": {\"type\": \"AdamW\", "
        "\"params\": {\"lr\": 0.01}}, \"fp16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 2}}",
    };
    static const int STAGE[] = {3, 2};
    for (size_t k = 0; k < ZT_LEN(CFGS); k++) {
        char zdir[512], ddir[520], tag[600];
        snprintf(zdir, sizeof zdir, "%s/fp16-%zu", zt_tmpdir(), k);
        snprintf(ddir, sizeof ddir, "%s-ds", zdir);
        train_cfg(zdir, STAGE[k], CFGS[k], 3);
        snprintf(tag, sizeof tag, "%s/global_step3", zdir);
        write_ds(tag, ddir);
        ZnCkptWhole c;
        ZnDsCkpt d;
        ZnErr err = {0};
        assert_int_equal(zn_ckpt_read_whole(tag, &c, &err), 0);
        assert_int_equal(zn_ds_open(&d, ddir, &err), 0);
        assert_int_equal(d.stage, STAGE[k]);
        assert_int_equal(d.module_type, ZN_PT_F16);
        assert_int_equal(d.dynamic_scale, 1);
        assert_true(c.st.scaler.dynamic);
        assert_true(d.cur_scale == c.st.scaler.cur_scale);
        assert_int_equal(d.scaler_cur_iter, c.st.scaler.cur_iter);
        assert_int_equal(d.adam_step, c.st.opt_step);
        assert_int_equal(d.sched_t, c.st.sched_t);
        if (k == 0) assert_str_contains(d.lr_scheduler, "last_batch_iteration");
        else assert_string_equal(d.lr_scheduler, "None");
        same_states(&d, &c);
        zn_ds_close(&d);
        zn_ckpt_whole_free(&c);
    }
    /* a run of flags only (no config): its batch from its samples */
    char zdir[512], tag[600], out[600];
    snprintf(zdir, sizeof zdir, "%s/flags", zt_tmpdir());
    train_cfg(zdir, 2, NULL, 2);
    snprintf(tag, sizeof tag, "%s/global_step2", zdir);
    snprintf(out, sizeof out, "%s-ds", zdir);
    write_ds(tag, out);
    ZnCkptWhole c;
    ZnDsCkpt d;
    ZnErr err = {0};
    assert_int_equal(zn_ckpt_read_whole(tag, &c, &err), 0);
    assert_int_equal(zn_ds_open(&d, out, &err), 0);
    assert_int_equal(d.global_steps, 2);
    assert_int_equal(d.global_samples, c.st.global_samples);
    assert_int_equal(d.adam_step, c.st.opt_step);
    zn_ds_close(&d);
    zn_ckpt_whole_free(&c);
    /* round_robin_gradients reorders DeepSpeed's flat groups: refused */
    snprintf(zdir, sizeof zdir, "%s/rr", zt_tmpdir());
    train_cfg(zdir, 2, "{\"train_batch_size\": 4, \"train_micro_batch_size_per_gpu\": 2, \"optimizer\": {\"type\": "
              "\"AdamW\"}, \"zero_optimization\": {\"stage\": 2, \"round_robin_gradients\": true}}", 1);
    snprintf(tag, sizeof tag, "%s/global_step1", zdir);
    snprintf(out, sizeof out, "%s-ds", zdir);
    ZnDsWriteSummary sum;
    assert_int_equal(zn_ds_write(tag, out, &sum, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "to-deepspeed: zero_optimization.round_robin_gradients reorders DeepSpeed's flat "
                                 "groups; zinc writes the order without it");
    assert_false(zt_file_exists(out));
}

/* spec: Z-DSCK-009 — the command: its line, and its usage errors (exit 2,
 * one line and the usage) */
static void test_cli(void **state) {
    (void)state;
    char zdir[512], tag[600], out[600], want[1400];
    snprintf(zdir, sizeof zdir, "%s/cli", zt_tmpdir());
    train(zdir, 2, 3, 0, 2, 0, NULL);
    snprintf(tag, sizeof tag, "%s/global_step2", zdir);
    snprintf(out, sizeof out, "%s-ds", zdir);
    char *o, *e;
    const char *ok[] = {"to-deepspeed", "--input", tag, "--output-folder", out};
    assert_int_equal(zt_capture(zn_cmd_ckpt, 5, ok, &o, &e), 0);
    snprintf(want, sizeof want, "wrote DeepSpeed checkpoint %s/global_step2: stage 3, world size 2, 2 optimizer "
             "groups, 4 files; %s/latest names it\n", out, out);
    assert_string_equal(o, want);
    free(o);
    free(e);
    static const struct { int argc; const char *argv[5]; const char *msg; } BAD[] = {
        {2, {"to-deepspeed", "--input"}, "every flag of 'zinc ckpt to-deepspeed' takes a value"},
        {3, {"to-deepspeed", "--input", "x"}, "to-deepspeed needs --input and --output-folder"},
        {3, {"to-deepspeed", "--out", "x"}, "unknown flag for 'zinc ckpt to-deepspeed'"},
        {5, {"to-deepspeed", "--input", DSCK "z2", "--output-folder", "x"}, "a DeepSpeed folder already"},
    };
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        assert_int_equal(zt_capture(zn_cmd_ckpt, BAD[k].argc, BAD[k].argv, &o, &e), 2);
        assert_str_contains(e, BAD[k].msg);
        assert_int_equal(zt_count_of(e, "zinc: error:"), 1);
        assert_string_equal(o, "");
        free(o);
        free(e);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_is_deepspeeds),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_zip64),
        cmocka_unit_test(test_zip_writer_faults),
        cmocka_unit_test(test_fp16_scheduler_subgroups),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, zt_tmpdir_setup, zt_tmpdir_teardown);
}
