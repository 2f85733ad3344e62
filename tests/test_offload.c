/* test_offload.c: ZeRO-Offload and ZeRO-Infinity (spec Z-OFF-*): the same
 * bits as the run without offload at every stage, dtype and world size; the
 * states where the plan says; NVMe through both I/O paths; checkpoints
 * across offload settings; the errors. */
#include "testutil.h"
#include "app/run.h"
#include "io/checkpoint.h"
#include "engine/offload.h"
#include <sys/stat.h>
#include <dirent.h>

/* A run of `model` with config text cfg: its result (the caller frees). */
static int run_cfg(const char *model, const char *cfg, int world, long steps, ZnRunResult *res, ZnErr *err) {
    ZnTrainFlags f = zt_train_flags(model, steps, world, -1);
    if (strncmp(model, "gpt2", 4) == 0) f.data_spec = "text:tests/data/gpl-3.txt";
    ZnRunOpts o;
    int rc = zn_train_resolve(&f, cfg, &o, err);
    if (rc) return rc;
    o.out = NULL;
    rc = zn_run(&o, res, err);
    zn_run_opts_free(&o);
    return rc;
}

static uint64_t digest_of(const char *model, const char *cfg, int world, long steps) {
    ZnRunResult res;
    ZnErr err = {0};
    if (run_cfg(model, cfg, world, steps, &res, &err)) fail_msg("%s: %s", cfg, err.msg);
    uint64_t d = res.digest;
    zn_run_result_free(&res);
    return d;
}

static const char *DT_SECTION[3] = {"", "\"fp16\": {\"enabled\": true, \"initial_scale_power\": 8},",
                                    "\"bf16\": {\"enabled\": true},"};

/* "optimizer device, param device" of one combination; NULL: none */
static void cfg_text(char *buf, size_t n, int dt, int stage, long ga, const char *opt, const char *par,
                     const char *nvme, const char *extra) {
    char off[512] = "";
    size_t k = 0;
    if (opt) k += (size_t)snprintf(off + k, sizeof off - k, ", \"offload_optimizer\": {\"device\": \"%s\"%s%s%s}", opt,
                                   nvme ? ", \"nvme_path\": \"" : "", nvme ? nvme : "", nvme ? "\"" : "");
    if (par) snprintf(off + k, sizeof off - k, ", \"offload_param\": {\"device\": \"%s\"}", par);
    snprintf(buf, n,
             "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": %ld, %s"
             " \"zero_optimization\": {\"stage\": %d, \"sub_group_size\": 300, \"stage3_param_persistence_threshold\": 40%s}%s}",
             ga, DT_SECTION[dt], stage, off, extra ? extra : "");
}

/* spec: Z-OFF-001 Z-OFF-002 Z-OFF-003 Z-OFF-004 every stage x offload x dtype
   x world size 1-8 gives the digest of the run without offload */
static void test_offload_same_digest(void **st) {
    (void)st;
    const char *model = "mlp:24,40,40,8";
    char base[1024], off[1024];
    for (int dt = 0; dt < 3; dt++)
        for (int stage = 1; stage <= 3; stage++)
            for (int w = 1; w <= 8; w++) {
                if (w > 4 && w != 8) continue;
                /* memcheck: one uneven world, bf16 (the other dtypes take the same paths) */
                if (getenv("ZINC_UNDER_VALGRIND") && (w != 3 || dt != 2)) continue;
                cfg_text(base, sizeof base, dt, stage, 2, NULL, NULL, NULL, NULL);
                uint64_t want = digest_of(model, base, w, 3);
                cfg_text(off, sizeof off, dt, stage, 2, "cpu", NULL, NULL, NULL);
                if (digest_of(model, off, w, 3) != want) fail_msg("optimizer cpu: %s world %d", off, w);
                if (stage == 3) {
                    cfg_text(off, sizeof off, dt, stage, 2, "cpu", "cpu", NULL, NULL);
                    if (digest_of(model, off, w, 3) != want) fail_msg("optimizer+param cpu: %s world %d", off, w);
                    cfg_text(off, sizeof off, dt, stage, 2, NULL, "cpu", NULL, NULL);
                    if (digest_of(model, off, w, 3) != want) fail_msg("param cpu: %s world %d", off, w);
                }
            }
}

/* spec: Z-OFF-004 partial offload (ratio < 1, stage 3): the first sub-groups
   on the device, the rest on the host, the same bits; the device holds
   the first part of the states only */
static void test_offload_ratio(void **st) {
    (void)st;
    char base[1024], off[1024];
    const char *model = "mlp:24,40,40,8";
    cfg_text(base, sizeof base, 2, 3, 2, NULL, NULL, NULL, NULL);
    uint64_t want = digest_of(model, base, 2, 3);
    long dev_master[3];
    const double ratios[3] = {1.0, 0.5, 0.25};
    for (int i = 0; i < 3; i++) {
        char extra[64];
        snprintf(off, sizeof off,
                 "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, \"bf16\": {\"enabled\": true},"
                 " \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 300,"
                 " \"offload_optimizer\": {\"device\": \"cpu\", \"ratio\": %g}}}", ratios[i]);
        (void)extra;
        ZnRunResult res;
        ZnErr err = {0};
        if (run_cfg(model, off, 2, 3, &res, &err)) fail_msg("%s", err.msg);
        assert_true(res.digest == want);
        dev_master[i] = res.mem_end[0].cur[ZN_MEM_MASTER32];
        zn_run_result_free(&res);
    }
    assert_int_equal(dev_master[0], 0);
    assert_true(dev_master[1] > 0 && dev_master[2] > dev_master[1]);
}

/* spec: Z-OFF-007 the states live where the plan says: stage 2 with the
   optimizer on the host keeps only the 16-bit parameters and the buckets on
   the device; the host holds the fp32 master, both moments and the fp32
   gradient partition, 4 bytes an element each */
static void test_offload_memory_tiers(void **st) {
    (void)st;
    char cfg[1024];
    cfg_text(cfg, sizeof cfg, 1, 2, 1, "cpu", NULL, NULL, NULL);
    ZnRunResult res;
    ZnErr err = {0};
    if (run_cfg("mlp:24,40,40,8", cfg, 2, 2, &res, &err)) fail_msg("%s", err.msg);
    const ZnMemStats *d = &res.mem_end[0], *h = &res.host_end[0];
    assert_int_equal(d->cur[ZN_MEM_MASTER32], 0);
    assert_int_equal(d->cur[ZN_MEM_EXP_AVG], 0);
    assert_int_equal(d->cur[ZN_MEM_EXP_AVG_SQ], 0);
    assert_int_equal(d->cur[ZN_MEM_GRADS], 0);
    assert_true(d->cur[ZN_MEM_PARAMS16] > 0);
    long part = h->cur[ZN_MEM_MASTER32] / 4;   /* this rank's partition */
    assert_true(part > 0);
    assert_int_equal(h->cur[ZN_MEM_EXP_AVG], 4 * part);
    assert_int_equal(h->cur[ZN_MEM_EXP_AVG_SQ], 4 * part);
    assert_int_equal(h->cur[ZN_MEM_GRADS], 4 * part);
    assert_int_equal(res.nvme_end[0].cur_total, 0);
    /* traffic per step: every reduced gradient element down (4 bytes), the
       updated 16-bit partition up (2 bytes): one micro-step a step */
    assert_int_equal(res.moved[1], 2 * 4 * part);   /* 2 steps */
    assert_int_equal(res.moved[0], 2 * 2 * part);
    zn_run_result_free(&res);
}

static int dir_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 1;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n == 0;
}

/* spec: Z-OFF-005 Z-OFF-006 NVMe optimizer states at stage 3: the same bits,
   the states on NVMe (a sub-group of 1 MiB and more), read and written once
   a step each, through io_uring and through the thread fallback, with and
   without pipelining; the swap directory is gone after the run */
static void test_offload_nvme(void **st) {
    (void)st;
    const char *model = "mlp:256,1024,512";   /* 787,968 parameters: 2 sub-groups of >= 1 MiB at world 2 */
    char *dir = zt_mkdtemp("zinc_offload_");
    char base[1024], off[1024];
    const char *fmt = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, %s"
                      " \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 300000%s}}";
    for (int dt = 0; dt < 3; dt += 2) {
        snprintf(base, sizeof base, fmt, DT_SECTION[dt], "");
        uint64_t want = digest_of(model, base, 2, 2);
        const char *modes[2] = {"uring", "threads"};
        /* under memcheck one path is enough (time): the thread pool */
        for (int m = getenv("ZINC_UNDER_VALGRIND") ? 1 : 0; m < 2; m++)
            for (int pipe = 0; pipe < 3; pipe++) {
                setenv("ZINC_AIO", modes[m], 1);
                char o[512];
                snprintf(o, sizeof o, ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\","
                                      " \"buffer_count\": 9, \"pipeline_read\": %s, \"pipeline_write\": %s}",
                         dir, pipe >= 1 ? "true" : "false", pipe == 2 ? "true" : "false");
                snprintf(off, sizeof off, fmt, DT_SECTION[dt], o);
                ZnRunResult res;
                ZnErr err = {0};
                if (run_cfg(model, off, 2, 2, &res, &err)) fail_msg("%s: %s", modes[m], err.msg);
                if (res.digest != want) fail_msg("nvme %s pipe %d dtype %d: digest differs", modes[m], pipe, dt);
                long on_nvme = res.nvme_end[0].cur[ZN_MEM_MASTER32];
                assert_true(on_nvme >= 1L << 20);
                assert_int_equal(res.nvme_end[0].cur[ZN_MEM_EXP_AVG], on_nvme);
                /* each step reads and writes the three states of the swapped sub-groups */
                assert_true(res.moved[2] == 2ull * 3 * (unsigned long long)on_nvme);
                assert_true(res.moved[3] == 2ull * 3 * (unsigned long long)on_nvme);
                assert_int_equal(res.mem_end[0].cur[ZN_MEM_MASTER32], 0);
                zn_run_result_free(&res);
                assert_true(dir_empty(dir));   /* zinc_swap/ removed at the end */
            }
    }
    unsetenv("ZINC_AIO");
    rmdir(dir);
    free(dir);
}

/* spec: Z-OFF-013 parameters on NVMe (ZeRO-Infinity): swappable
   partitions beyond max_in_cpu in the swap file, read for every gather and
   written back after the step; the same bits; with the optimizer on NVMe at
   the same path or on the host */
static void test_offload_nvme_params(void **st) {
    (void)st;
    const char *model = "mlp:512,2048,1024";   /* weight partitions of 2^19 and 2^20 elements at world 2 */
    char *dir = zt_mkdtemp("zinc_offload_");
    char base[1024], off[1024], o[512];
    const char *fmt = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, %s"
                      " \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 300000%s}}";
    for (int dt = 0; dt < 3; dt++) {
        snprintf(base, sizeof base, fmt, DT_SECTION[dt], "");
        uint64_t want = digest_of(model, base, 2, 2);
        for (int opt = 0; opt < 2; opt++) {
            snprintf(o, sizeof o, ", \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
                                  " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"max_in_cpu\": 0}",
                     opt ? "nvme" : "cpu", dir, dir);
            snprintf(off, sizeof off, fmt, DT_SECTION[dt], o);
            ZnRunResult res;
            ZnErr err = {0};
            if (run_cfg(model, off, 2, 2, &res, &err)) fail_msg("%s", err.msg);
            if (res.digest != want) fail_msg("nvme params dtype %d optimizer %d: digest differs", dt, opt);
            /* both weights' partitions (1 MiB and more) on NVMe in the dtype's
               bytes, the biases' (1024 + 512 elements) in host memory */
            const long es = dt ? 2 : 4;
            assert_int_equal(res.nvme_end[0].cur[ZN_MEM_PARAMS16], (524288 + 1048576) * es);
            assert_int_equal(res.host_end[0].cur[ZN_MEM_PARAMS16], 1536 * es);
            assert_true(res.moved[2] > 0 && res.moved[3] > 0);
            zn_run_result_free(&res);
            assert_true(dir_empty(dir));
        }
    }
    /* max_in_cpu large enough: everything stays in host memory */
    snprintf(o, sizeof o, ", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}", dir);
    snprintf(off, sizeof off, fmt, DT_SECTION[1], o);
    ZnRunResult res;
    ZnErr err = {0};
    if (run_cfg(model, off, 2, 2, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.nvme_end[0].cur_total, 0);
    zn_run_result_free(&res);
    rmdir(dir);
    free(dir);
}

/* spec: Z-OFF-006 nvme at stages 1 and 2 is DeepSpeed's cpu: nothing goes to
   NVMe; a sub-group below 1 MiB stays in host memory at stage 3 */
static void test_offload_nvme_small_in_memory(void **st) {
    (void)st;
    char *dir = zt_mkdtemp("zinc_offload_");
    char cfg[1024];
    for (int stage = 1; stage <= 3; stage++) {
        cfg_text(cfg, sizeof cfg, 0, stage, 1, "nvme", NULL, dir, NULL);
        ZnRunResult res;
        ZnErr err = {0};
        if (run_cfg("mlp:24,40,40,8", cfg, 2, 2, &res, &err)) fail_msg("%s", err.msg);
        assert_int_equal(res.nvme_end[0].cur_total, 0);
        assert_true(res.host_end[0].cur[ZN_MEM_MASTER32] > 0);
        assert_int_equal(res.moved[2] + res.moved[3], 0);
        zn_run_result_free(&res);
    }
    rmdir(dir);
    free(dir);
}

/* spec: Z-OFF-010 canonical mode with the gradient partition on the host:
   the same bits as canonical without offload */
static void test_offload_canonical(void **st) {
    (void)st;
    char base[1024], off[1024];
    for (int stage = 2; stage <= 3; stage++) {
        cfg_text(base, sizeof base, 2, stage, 4, NULL, NULL, NULL, ", \"zinc\": {\"canonical\": true}");
        cfg_text(off, sizeof off, 2, stage, 4, "cpu", stage == 3 ? "cpu" : NULL, NULL, ", \"zinc\": {\"canonical\": true}");
        assert_true(digest_of("mlp:24,40,40,8", base, 2, 2) == digest_of("mlp:24,40,40,8", off, 2, 2));
        assert_true(digest_of("mlp:24,40,40,8", base, 3, 2) == digest_of("mlp:24,40,40,8", off, 3, 2));
    }
}

/* spec: Z-OFF-001 GPT-2 with the optimizer and the parameters on the host,
   stage 3, bf16, activation checkpointing: the bits of the run without */
static void test_offload_gpt2(void **st) {
    (void)st;
    const char *fmt = "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, \"bf16\": {\"enabled\": true},"
                      " \"activation_checkpointing\": {}, \"zero_optimization\": {\"stage\": 3%s}}";
    char base[512], off[512];
    snprintf(base, sizeof base, fmt, "");
    snprintf(off, sizeof off, fmt, ", \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\"}");
    assert_true(digest_of("gpt2-tiny", base, 2, 2) == digest_of("gpt2-tiny", off, 2, 2));
}

/* run with a checkpoint dir; resume variant */
static uint64_t ckpt_run(const char *cfg, const char *dir, long steps, int resume) {
    ZnTrainFlags f = zt_train_flags("mlp:256,1024,512", steps, 2, -1);
    f.ckpt_dir = dir;
    f.ckpt_interval = 2;
    f.resume = resume;
    ZnRunOpts o;
    ZnErr err = {0};
    if (zn_train_resolve(&f, cfg, &o, &err)) fail_msg("%s", err.msg);
    o.out = NULL;
    ZnRunResult res;
    if (zn_run(&o, &res, &err)) fail_msg("%s", err.msg);
    uint64_t d = res.digest;
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
    return d;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    if (!fa || !fb) {
        if (fa) fclose(fa);
        if (fb) fclose(fb);
        return 0;
    }
    size_t la, lb;
    char *x = zt_slurp(fa, &la), *y = zt_slurp(fb, &lb);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* spec: Z-OFF-011 checkpoints of an offloaded run (NVMe states too) are the
   files of the run without offload, and resume with or without offload to
   the bits of the uninterrupted run */
static void test_offload_checkpoint(void **st) {
    (void)st;
    char *nv = zt_mkdtemp("zinc_offload_"), *a = zt_mkdtemp("zinc_offload_"), *b = zt_mkdtemp("zinc_offload_");
    const char *fmt = "{\"train_micro_batch_size_per_gpu\": 2, \"bf16\": {\"enabled\": true},"
                      " \"zero_optimization\": {\"stage\": 3, \"sub_group_size\": 300000%s}}";
    char base[512], off[1024], o[512];
    snprintf(base, sizeof base, fmt, "");
    snprintf(o, sizeof o, ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
                          " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"max_in_cpu\": 0}", nv, nv);
    snprintf(off, sizeof off, fmt, o);
    uint64_t want = ckpt_run(base, a, 4, 0);   /* saves global_step2 and global_step4 */
    assert_true(ckpt_run(off, b, 4, 0) == want);
    for (int r = 0; r < 2; r++) {   /* the shards of step 2: the same bytes */
        char pa[512], pb[512];
        snprintf(pa, sizeof pa, "%s/global_step2/zero_pp_rank_%d_optim_states.safetensors", a, r);
        snprintf(pb, sizeof pb, "%s/global_step2/zero_pp_rank_%d_optim_states.safetensors", b, r);
        struct stat sa;
        if (stat(pa, &sa) != 0) fail_msg("no shard %s", pa);
        assert_true(same_file(pa, pb));
    }
    /* resume step 2 of the offloaded run without offload, and the plain one with */
    char latest[512];
    for (int k = 0; k < 2; k++) {
        snprintf(latest, sizeof latest, "%s/latest", k ? b : a);
        zt_write_text(latest, "global_step2");
    }
    assert_true(ckpt_run(base, b, 4, 1) == want);
    assert_true(ckpt_run(off, a, 4, 1) == want);
    char *dirs[3] = {nv, a, b};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(zt_rm_rf(dirs[k]), 0);
        free(dirs[k]);
    }
}

/* spec: Z-OFF-008 --device-memory: a capacity the run without offload
   overflows and the offloaded run fits */
static void test_offload_device_memory(void **st) {
    (void)st;
    char base[1024], off[1024];
    cfg_text(base, sizeof base, 1, 3, 1, NULL, NULL, NULL, NULL);
    cfg_text(off, sizeof off, 1, 3, 1, "cpu", "cpu", NULL, NULL);
    ZnRunResult res;
    ZnErr err = {0};
    if (run_cfg("mlp:256,1024,512", off, 2, 1, &res, &err)) fail_msg("%s", err.msg);
    long need_off = res.mem_end[0].peak_total;
    zn_run_result_free(&res);
    if (run_cfg("mlp:256,1024,512", base, 2, 1, &res, &err)) fail_msg("%s", err.msg);
    long need_base = res.mem_end[0].peak_total;
    zn_run_result_free(&res);
    assert_true(need_off < need_base);
    long cap = (need_off + need_base) / 2;
    ZnTrainFlags f = zt_train_flags("mlp:256,1024,512", 1, 2, -1);
    f.device_memory = cap;
    assert_int_equal(zt_train(&f, off, &err), 0);
    assert_int_equal(zt_train(&f, base, &err), ZN_E_NOMEM);
    assert_str_contains(err.msg, "out of simulated device memory");
}

/* spec: Z-OFF-012 errors before the first step: too few swap buffers for
   the pipeline, an nvme_path that cannot hold the swap, a parameter buffer
   too small */
static void test_offload_errors(void **st) {
    (void)st;
    ZnErr err = {0};
    const char *fmt = "{\"train_micro_batch_size_per_gpu\": 2, \"zero_optimization\": {\"stage\": 3, "
                      "\"sub_group_size\": 300000, %s}}";
    char cfg[1024], o[768];
    char *dir = zt_mkdtemp("zinc_offload_");
    snprintf(o, sizeof o, "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"pipeline_read\": true}", dir);
    snprintf(cfg, sizeof cfg, fmt, o);
    ZnTrainFlags f = zt_train_flags("mlp:256,1024,512", 1, 2, -1);
    assert_int_equal(zt_train(&f, cfg, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "buffer_count: 4 buffers");
    /* a path under a regular file */
    char file[128];
    snprintf(file, sizeof file, "%s/plain", dir);
    zt_write_text(file, "");
    snprintf(o, sizeof o, "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s/sub\"}", file);
    snprintf(cfg, sizeof cfg, fmt, o);
    assert_int_not_equal(zt_train(&f, cfg, &err), 0);
    assert_str_contains(err.msg, file);
    /* a parameter buffer smaller than a swapped partition (DeepSpeed asserts) */
    snprintf(o, sizeof o, "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\", \"max_in_cpu\": 0,"
                          " \"buffer_size\": 1000}", dir);
    snprintf(cfg, sizeof cfg, fmt, o);
    assert_int_equal(zt_train(&f, cfg, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "offload_param.buffer_size: 1000 elements cannot hold the partition of");
    unlink(file);
    rmdir(dir);
    free(dir);
}

/* spec: Z-OFF-009 the comm report's offload line: the bytes each way per step */
static void test_offload_comm_report(void **st) {
    (void)st;
    char *dir = zt_mkdtemp("zinc_offload_"), path[256], cfg[1024];
    snprintf(path, sizeof path, "%s/ds.json", dir);
    cfg_text(cfg, sizeof cfg, 1, 2, 1, "cpu", NULL, NULL, NULL);
    zt_write_text(path, cfg);
    const char *argv[] = {"--config", path, "--model", "mlp:24,40,40,8", "--world-size", "2", "--steps", "2",
                          "--comm-report", "--steps-per-print", "1"};
    char *out, *errs;
    int rc = zt_capture(zn_cmd_train, 11, argv, &out, &errs);
    assert_int_equal(rc, 0);
    /* the rank's partition: (24*40+40 + 40*40+40 + 40*8+8) = 2968 elements, 1484 a rank */
    assert_str_contains(out, "[zinc] offload step rank 0: device->host 5936 B/step, host->device 2968 B/step, "
                             "nvme read 0 B/step, nvme write 0 B/step (optimizer on cpu, parameters on device)\n");
    assert_str_contains(out, "[zinc] offload run rank 0: device->host 5936 B/step, host->device 2968 B/step");
    free(out);
    free(errs);
    unlink(path);
    rmdir(dir);
    free(dir);
}

ZT_MAIN(cmocka_unit_test(test_offload_comm_report), cmocka_unit_test(test_offload_same_digest), cmocka_unit_test(test_offload_ratio),
        cmocka_unit_test(test_offload_memory_tiers), cmocka_unit_test(test_offload_nvme), cmocka_unit_test(test_offload_nvme_params),
        cmocka_unit_test(test_offload_nvme_small_in_memory), cmocka_unit_test(test_offload_canonical),
        cmocka_unit_test(test_offload_gpt2), cmocka_unit_test(test_offload_checkpoint),
        cmocka_unit_test(test_offload_device_memory), cmocka_unit_test(test_offload_errors))
