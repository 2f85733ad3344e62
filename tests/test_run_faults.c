/* test_run_faults.c: a fault at any point of a whole training run ends it
 * cleanly. For K = 1, 2, ... the K-th event of one kind fails until K
 * passes the run's last: one rank's K-th collective (spec Z-SIM-014, the
 * run's test hook, comm/coll.h zn_coll_fail_at), or the process's K-th I/O
 * operation, checkpoint files and NVMe swap transfers alike (Z-FILE-005,
 * zn_fault_set). Each run must return the failure as its error, leak
 * nothing and leave any checkpoint it was writing whole. SQLite's I/O-error
 * loops are the model. */
#include "testutil.h"
#include "app/run.h"
#include "core/covmark.h"
#include <time.h>

typedef struct {
    const char *what;
    int world, per_node, stage, fail_rank;
    long steps, ckpt_interval;
    int resume;        /* start from a checkpoint an undrilled run saved at step 1 */
    const char *keys;  /* config keys beside the batch and zero_optimization */
    const char *zkeys; /* zero_optimization's beside the stage */
    const char *model; /* NULL: a small MLP */
} FailCase;

/* FAIL_IO_STICKY: every I/O operation from the K-th on fails (a disk gone) */
enum { FAIL_COLLECTIVE, FAIL_IO, FAIL_IO_STICKY };

/* where the NVMe swap is used: sub-groups and weight partitions of at least
   1 MiB (smaller ones stay in host memory, Z-OFF-013) */
#define NVME_MODEL "mlp:256,1024,512"

/* config keys putting the optimizer (and with params, the parameters) on
   NVMe under swap */
static void nvme_keys(char *buf, size_t n, const char *swap, int params) {
    int k = snprintf(buf, n, ", \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}", swap);
    if (params && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}", swap);
}

/* the run of c: its k-th event of the kind failing (0: none) */
static int run_case(const FailCase *c, int kind, const char *dir, long k, ZnRunResult *res, ZnErr *err) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"train_micro_batch_size_per_gpu\": 2, %s \"zero_optimization\": {\"stage\": %d%s%s}}",
             c->keys, c->stage, c->stage == 3 ? ", \"stage3_param_persistence_threshold\": 40, \"sub_group_size\": 200000" : "",
             c->zkeys);
    ZnTrainFlags f = zt_train_flags(c->model ? c->model : "mlp:24,40,40,8", c->steps, c->world, -1);
    f.ranks_per_node = c->per_node;
    if (c->model && !strncmp(c->model, "gpt2", 4)) f.data_spec = "text:tests/data/gpl-3.txt";
    ZnRunOpts o;
    int rc = zn_train_resolve(&f, cfg, &o, err);
    if (rc) return rc;
    o.out = NULL;
    o.ckpt_dir = dir;
    o.ckpt_interval = c->ckpt_interval;
    o.resume = c->resume;
    o.hooks.comm_fail_rank = c->fail_rank;
    o.hooks.comm_fail_call = kind == FAIL_COLLECTIVE ? k : 0;
    zn_fault_set(kind != FAIL_COLLECTIVE ? k : 0, kind == FAIL_IO_STICKY, 0);
    zn_cov_faults(k > 0);   /* the coverage build's rows leave drilled runs out */
    rc = zn_run(&o, res, err);
    zn_fault_set(0, 0, 0);
    zn_run_opts_free(&o);
    return rc;
}

/* Where the run left a `latest`, the checkpoint it names reads back whole. */
static void check_latest(const FailCase *c, const char *dir, long k) {
    char latest[4096], tagdir[4096];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    if (!zt_file_exists(latest)) return;
    ZnErr err = {0};
    ZnCkptWhole w;
    if (zn_ckpt_find(dir, NULL, tagdir, &err) || zn_ckpt_read_whole(tagdir, &w, &err))
        fail_msg("%s, event %ld failing: latest: %s", c->what, k, err.msg);
    zn_ckpt_whole_free(&w);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sweep(const FailCase *c, int kind) {
    const double t0 = now_s();
    const char *event = kind == FAIL_COLLECTIVE ? "collective" : "I/O operation";
    char *dir = zt_mkdtemp("zinc-runfault-");
    ZnRunResult res;
    ZnErr err = {0};
    if (c->resume) {   /* the checkpoint every drilled run resumes from */
        FailCase save = *c;
        save.steps = 1, save.ckpt_interval = 1, save.resume = 0;
        if (run_case(&save, kind, dir, 0, &res, &err)) fail_msg("%s: the saving run: %s", c->what, err.msg);
        zn_run_result_free(&res);
    }
    if (run_case(c, kind, dir, 0, &res, &err)) fail_msg("%s: the undrilled run: %s", c->what, err.msg);
    const uint64_t digest = res.digest;
    zn_run_result_free(&res);
    /* under valgrind (ci/memcheck.sh) every 5th event: what each kind of
       failure frees is what memcheck is after; a sticky fault every 3rd (the
       first failure decides the path, the later ones only repeat it) */
    const long stride = getenv("ZINC_UNDER_VALGRIND") ? 5 : kind == FAIL_IO_STICKY ? 3 : 1;
    long k = 1;
    for (;; k += stride) {
        if (c->ckpt_interval > 0) {   /* each drilled run saves into a folder of its own */
            zt_rm_rf(dir);
            assert_int_equal(mkdir(dir, 0700), 0);
        }
        memset(&err, 0, sizeof err);
        int rc = run_case(c, kind, dir, k, &res, &err);
        if (!rc) {   /* k is past the rank's last call */
            if (res.digest != digest) fail_msg("%s: past the last call, digest %016llx, undrilled %016llx", c->what,
                                               (unsigned long long)res.digest, (unsigned long long)digest);
            zn_run_result_free(&res);
            break;
        }
        char want[96], pre[16];
        if (kind == FAIL_COLLECTIVE) {   /* the drilled rank's own error */
            snprintf(want, sizeof want, "': injected failure of collective call %ld", k);
            snprintf(pre, sizeof pre, "rank %d: ", c->fail_rank);
        } else {   /* any rank's: the ranks' operations interleave */
            snprintf(want, sizeof want, "injected I/O fault");
            snprintf(pre, sizeof pre, "rank ");
        }
        if (rc != (kind == FAIL_COLLECTIVE ? ZN_E_COMM : ZN_E_IO) || strncmp(err.msg, pre, strlen(pre)) ||
            !strstr(err.msg, want))
            fail_msg("%s, %s %ld failing: rc %d: %s", c->what, event, k, rc, err.msg);
        if (c->ckpt_interval > 0) check_latest(c, dir, k);
    }
    /* the drill reached the steps, not only the start: a step makes more
       than ten of either kind in every case */
    if (getenv("ZT_SWEEP_VERBOSE")) fprintf(stderr, "%s: %ld %ss, %.1f s\n", c->what, k - 1, event, now_s() - t0);
    if (k < 11) fail_msg("%s: the run made only %ld %ss", c->what, k - 1, event);
    zt_rm_rf(dir);
    free(dir);
}

/* spec: Z-SIM-014 a collective failing at each call of one rank, through
 * engine start, GA steps, stage-3 fetching, ZeRO++ (hpZ, qwZ, qgZ), MiCS,
 * NVMe offload, checkpoint saves and a resume: every rank returns, the
 * error is that rank's, no device allocation leaks, `latest` names a whole
 * checkpoint, and past the last call the digest is the undrilled run's */
static void test_collective_fails_anywhere(void **st) {
    (void)st;
    char nvme[600];
    char *swap = zt_mkdtemp("zinc-runfault-nvme-");
    nvme_keys(nvme, sizeof nvme, swap, 1);
    const FailCase cases[] = {
        {"stage 1 fp16 GA 2, a checkpoint a step", 2, 0, 1, 1, 2, 1, 0,
         "\"gradient_accumulation_steps\": 2, \"fp16\": {\"enabled\": true},", ""},
        {"stage 2 bf16 overlapped", 2, 0, 2, 0, 2, 0, 0, "\"bf16\": {\"enabled\": true},", ", \"overlap_comm\": true"},
        {"stage 3 fp16 GA 2 hpZ qwZ qgZ", 4, 2, 3, 3, 2, 0, 0,
         "\"gradient_accumulation_steps\": 2, \"fp16\": {\"enabled\": true},",
         ", \"zero_hpz_partition_size\": 2, \"zero_quantized_weights\": true, \"zero_quantized_gradients\": true"},
        {"stage 3 bf16 nvme offload, a checkpoint", 2, 0, 3, 1, 1, 1, 0, "\"bf16\": {\"enabled\": true},", nvme,
         NVME_MODEL},
        {"stage 3 MiCS", 4, 0, 3, 2, 2, 0, 0, "", ", \"mics_shard_size\": 2"},
        {"stage 3 resumed", 2, 0, 3, 1, 3, 0, 1, "", ""},
        {"GPT-2 stage 3 bf16, a checkpoint a step", 2, 0, 3, 0, 2, 1, 0, "\"bf16\": {\"enabled\": true},", "",
         "gpt2-tiny"},
    };
    for (size_t i = 0; i < ZT_LEN(cases); i++) sweep(&cases[i], FAIL_COLLECTIVE);
    zt_rm_rf(swap);
    free(swap);
}

/* spec: Z-FILE-005 Z-NVME-008 Z-CKPT-006 an I/O operation failing at each
 * point of a run, the NVMe swap's transfers and the checkpoint's files
 * alike: the run ends with ZN_E_IO naming the file and the injected fault,
 * leaks nothing, `latest` names a whole checkpoint, and past the last
 * operation the digest is the undrilled run's; the same where every
 * operation from that point on fails */
static void test_io_fails_anywhere(void **st) {
    (void)st;
    char *swap = zt_mkdtemp("zinc-runfault-nvme-");
    char both[600], opt[600];
    nvme_keys(both, sizeof both, swap, 1);
    nvme_keys(opt, sizeof opt, swap, 0);
    const FailCase cases[] = {
        /* the swap's transfers (the checkpoint's files are the third case's:
           a run with the swap costs about 0.1 s, so these take one step) */
        {"stage 3 bf16 nvme offload", 2, 0, 3, 0, 1, 0, 0, "\"bf16\": {\"enabled\": true},", both, NVME_MODEL},
        {"stage 3 fp16 nvme optimizer, resumed", 1, 0, 3, 0, 2, 0, 1, "\"fp16\": {\"enabled\": true},", opt,
         NVME_MODEL},
        {"stage 1 GA 2, a checkpoint a step", 3, 0, 1, 0, 2, 1, 0, "\"gradient_accumulation_steps\": 2,", ""},
    };
    for (size_t i = 0; i < ZT_LEN(cases); i++) sweep(&cases[i], FAIL_IO);
    sweep(&cases[0], FAIL_IO_STICKY);
    zt_rm_rf(swap);
    free(swap);
}

ZT_MAIN(cmocka_unit_test(test_collective_fails_anywhere),
        cmocka_unit_test(test_io_fails_anywhere))
