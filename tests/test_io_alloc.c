/* test_io_alloc.c: the DeepSpeed-checkpoint readers and writers under
 * allocation failure (spec Z-DSCK-010).
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (Makefile):
 * for k = 1, 2, ... the k-th allocation of one call fails, as on a machine
 * out of memory, until k passes the call's last allocation. Every point
 * must end in ZN_E_NOMEM with an out-of-memory message, and
 * nothing may leak or be left half-written: ASan and valgrind run this
 * binary too. */
#include "alloc_sweep.h"
#include "core/alloc.h"
#include "core/fileio.h"
#include "io/ds_ckpt.h"
#include "io/pickle.h"
#include "io/safetensors.h"
#include "io/swap.h"
#include "io/torch_file.h"
#include "io/zipread.h"

#define DSCK "tests/data/dsck/"

/* ---- the operations ------------------------------------------------------ */

static int op_pickle(const void *arg, ZnErr *err) {
    size_t n;
    const long at = pause_failing();
    char *b = zt_slurp(fopen(arg, "rb"), &n);
    fail_at = at;
    ZnPickle pk;
    ZnPy *root;
    int rc = zn_pickle_load((const unsigned char *)b, n, arg, &pk, &root, err);
    if (!rc) {
        char repr[256];
        zn_py_repr(root, repr, sizeof repr);
        zn_pickle_free(&pk);
    }
    free(b);
    return rc;
}

static int op_torch(const void *arg, ZnErr *err) {
    ZnPt f;
    int rc = zn_pt_open(&f, arg, err);
    if (rc) return rc;
    for (long i = 0; !rc && i < f.pk.n; i++) {
        ZnPtTensor t;
        if (f.pk.all[i]->kind == ZN_PY_CALL && !zn_pt_tensor(&f, f.pk.all[i], "t", &t, err) && t.numel) {
            float x[1];
            if (t.type == ZN_PT_F32 && t.contiguous) rc = zn_pt_read(&f, &t, 0, 1, x, err);
        }
    }
    zn_pt_close(&f);
    return rc;
}

typedef struct {
    const char *dir;
    int consolidate;   /* consolidate syncs its file: once is enough */
} Folder;

/* open, every state of every parameter read, describe, consolidate */
static int op_folder(const void *arg, ZnErr *err) {
    const Folder *fo = arg;
    ZnDsCkpt ck;
    int rc = zn_ds_open(&ck, fo->dir, err);
    if (rc) return rc;
    for (int w = 0; !rc && w < 3; w++) {
        if (!zn_ds_has_state(&ck, w)) continue;
        for (int i = 0; !rc && i < ck.nparams; i++) {
            float *x = zn_malloc(ZN_HOST_APP, ck.param[i].numel * sizeof *x);
            rc = x ? zn_ds_read_state(&ck, w, i, x, err) : zn_nomem(err);
            free(x);
        }
    }
    char text[8192];
    FILE *f = NULL;
    if (!rc) {
        const long at = pause_failing();
        f = fmemopen(text, sizeof text, "w");
        fail_at = at;
        assert_non_null(f);
        rc = zn_ds_describe(&ck, f, err);
        fclose(f);
    }
    char out[512];
    snprintf(out, sizeof out, "%s/out.safetensors", zt_tmpdir());
    int nt;
    long long ne;
    if (!rc && fo->consolidate) rc = zn_ds_consolidate(&ck, out, ZN_BF16, 1, &nt, &ne, err);
    if (rc && zt_file_exists(out)) {   /* only a complete file, when the failure came after its rename */
        const long at = pause_failing();
        ZnStFile *st;
        ZnErr e2 = {0};
        if (!strstr(err->msg, "renamed into place") || zn_st_open(&st, out, &e2))
            fail_msg("consolidate failed (%s) and left %s (%s)", err->msg, out, e2.msg);
        zn_st_close(st);
        fail_at = at;
    }
    unlink(out);
    zn_ds_close(&ck);
    return rc;
}

static int op_safetensors(const void *arg, ZnErr *err) {
    ZnStFile *f;
    int rc = zn_st_open(&f, arg, err);
    if (rc) return rc;
    for (int i = 0; !rc && i < zn_st_count(f); i++) {
        const ZnStTensor *t = zn_st_tensor(f, i);
        void *x = zn_malloc(ZN_HOST_APP, t->end - t->begin + 1);
        rc = x ? zn_st_read(f, t, x, t->end - t->begin, err) : zn_nomem(err);
        free(x);
    }
    zn_st_close(f);
    return rc;
}

static int op_write(const void *arg, ZnErr *err) {
    char out[512];
    snprintf(out, sizeof out, "%s/to-ds", zt_tmpdir());
    zt_rm_rf(out);
    ZnDsWriteSummary sum;
    int rc = zn_ds_write(arg, out, &sum, err);
    char latest[600];
    snprintf(latest, sizeof latest, "%s/latest", out);
    if (rc && zt_file_exists(latest)) {   /* `latest` never names a half-written folder */
        const long at = pause_failing();
        ZnDsCkpt ck;
        ZnErr e2 = {0};
        if (zn_ds_open(&ck, out, &e2)) fail_msg("to-deepspeed failed (%s) and left %s naming a folder that does not open: %s", err->msg, latest, e2.msg);
        zn_ds_close(&ck);
        fail_at = at;
    }
    zt_rm_rf(out);
    return rc;
}

/* a swap space opened on the I/O path mode names, three files written,
 * read back, closed and removed */
static int op_swap(const void *arg, ZnErr *err) {
    const ZnAioMode mode = *(const ZnAioMode *)arg;
    char base[512];
    snprintf(base, sizeof base, "%s/nvme", zt_tmpdir());
    ZnSwap *s;
    ZnAioConfig aio;
    zn_aio_config_default(&aio);
    aio.intra_op_parallelism = 2;
    int rc = zn_swap_open(&s, base, 0, 1 << 20, &aio, mode, NULL, err);
    if (rc) return rc;
    unsigned char *b = zn_swap_buf_alloc(3 * ZN_SWAP_ALIGN, err);
    if (!b) rc = err->code;
    for (int i = 0; !rc && i < 3; i++) {
        char name[16];
        int id;
        snprintf(name, sizeof name, "t%d", i);
        memset(b, 'a' + i, 3 * ZN_SWAP_ALIGN);
        rc = zn_swap_file(s, name, 3 * ZN_SWAP_ALIGN, &id, err);
        if (!rc) rc = zn_swap_write(s, id, 0, b, 3 * ZN_SWAP_ALIGN, err);
        if (!rc) rc = zn_swap_wait(s, err);
        memset(b, 0, 3 * ZN_SWAP_ALIGN);
        if (!rc) rc = zn_swap_read(s, id, ZN_SWAP_ALIGN, b, ZN_SWAP_ALIGN, err);
        if (!rc) rc = zn_swap_wait(s, err);
        if (!rc) assert_int_equal(b[0] + b[ZN_SWAP_ALIGN - 1], 2 * ('a' + i));
    }
    zn_swap_buf_free(b);
    zn_swap_close(s, 1);
    return rc;
}

/* ---- the tests ----------------------------------------------------------- */

/* spec: Z-DSCK-010 the NVMe swap space, on either I/O path */
static void test_swap(void **state) {
    (void)state;
    static const ZnAioMode THREADS = ZN_AIO_THREADS, URING = ZN_AIO_URING;
    assert_true(sweep("swap (threads)", op_swap, &THREADS) > 0);
    ZnSwap *s;
    ZnErr err = {0};
    char base[512];
    snprintf(base, sizeof base, "%s/nvme", zt_tmpdir());
    if (zn_swap_open(&s, base, 0, 0, NULL, ZN_AIO_URING, NULL, &err)) {
        printf("test_swap: no io_uring here (%s): the threads path only\n", err.msg);
        return;
    }
    zn_swap_close(s, 1);
    assert_true(sweep("swap (io_uring)", op_swap, &URING) > 0);
}



/* spec: Z-DSCK-010 pickles, torch.save files and zips, out of memory and
 * with each I/O operation failing */
static void test_readers(void **state) {
    (void)state;
    static const char *PKL[] = {"tests/fuzz/dsck/plain-proto2.pkl", "tests/fuzz/dsck/shared-proto3.pkl", "tests/fuzz/dsck/ordered.pkl",
                                "tests/fuzz/dsck/deepspeed-model-states.pkl"};
    for (size_t k = 0; k < ZT_LEN(PKL); k++) assert_true(sweep(PKL[k], op_pickle, PKL[k]) > 0);
    static const char *PT[] = {"tests/fuzz/dsck/torch-save.pt", "tests/fuzz/dsck/deepspeed-z3-optim.pt",
                               "tests/fuzz/dsck/deepspeed-universal-fp32.pt"};
    for (size_t k = 0; k < ZT_LEN(PT); k++) assert_true(sweep(PT[k], op_torch, PT[k]) > 0);
    /* each I/O operation failing in turn: ZN_E_IO naming the fault */
    for (size_t k = 0; k < ZT_LEN(PT); k++) {
        long op = 1;
        for (;; op++) {
            ZnErr err = {0};
            zn_fault_set(op, 0, 0);
            int rc = op_torch(PT[k], &err);
            const long ops = zn_fault_ops();
            zn_fault_set(0, 0, 0);
            if (ops < op) {
                if (rc) fail_msg("%s without a fault: %s", PT[k], err.msg);
                break;
            }
            if (rc != ZN_E_IO || !strstr(err.msg, "injected I/O fault at op"))
                fail_msg("%s, I/O op %ld failing: rc %d: %s", PT[k], op, rc, err.msg);
        }
        assert_true(op > 3);
    }
}

typedef struct { ZnDsCkpt *ck; const char *out; } Cons;

static int cons_run(void *ctx, ZnErr *err) {
    const Cons *c = ctx;
    int n;
    long long ne;
    return zn_ds_consolidate(c->ck, c->out, ZN_F32, 0, &n, &ne, err);
}

/* no file but a complete one */
static void cons_left(void *ctx, long op, const ZnErr *err) {
    const Cons *c = ctx;
    ZnStFile *f;
    ZnErr e2 = {0};
    if (zt_file_exists(c->out) && (!strstr(err->msg, "renamed into place") || zn_st_open(&f, c->out, &e2)))
        fail_msg("consolidate failed at I/O op %ld (%s) and left %s (%s)", op, err->msg, c->out, e2.msg);
    if (zt_file_exists(c->out)) zn_st_close(f);
    unlink(c->out);
}

static int write_run(void *ctx, ZnErr *err) { return op_write(ctx, err); }

/* spec: Z-DSCK-010 DeepSpeed folders: opened, read, described, consolidated */
static void test_folders(void **state) {
    (void)state;
    static const Folder DIRS[] = {{DSCK "z2", 0}, {DSCK "z3", 1}, {DSCK "z2-universal", 0}};
    for (size_t k = 0; k < ZT_LEN(DIRS); k++) assert_true(sweep(DIRS[k].dir, op_folder, &DIRS[k]) > 0);
    const char *st = DSCK "z3/expected.safetensors";
    assert_true(sweep(st, op_safetensors, st) > 0);
    /* consolidate with each I/O operation failing in turn: ZN_E_IO naming
     * the fault, and no file but a complete one */
    ZnDsCkpt ck;
    ZnErr err = {0};
    assert_int_equal(zn_ds_open(&ck, DSCK "z3", &err), 0);
    Cons c = {&ck, zt_path("io.safetensors")};
    assert_true(zt_io_fault_sweep("consolidate", cons_run, &c, cons_left) > 3);
    zn_ds_close(&ck);
}

/* spec: Z-DSCK-010 zinc's checkpoint written as DeepSpeed's, out of memory
 * and with each I/O operation failing */
static void test_to_deepspeed(void **state) {
    (void)state;
    char dir[512], tag[600];
    snprintf(dir, sizeof dir, "%s/zinc", zt_tmpdir());
    ZnTrainFlags f = zt_train_flags("mlp:5,5,5,tie:1=0", 1, 2, 3);
    ZnRunOpts o = zt_resolve(&f, "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\"}}");
    o.ckpt_dir = dir;
    o.ckpt_interval = 1;
    ZnRunResult res;
    ZnErr err = {0};
    if (zn_run(&o, &res, &err)) fail_msg("train: %s", err.msg);
    zn_run_result_free(&res);
    zn_run_opts_free(&o);
    snprintf(tag, sizeof tag, "%s/global_step1", dir);
    assert_true(sweep("to-deepspeed", op_write, tag) > 0);
    /* and every I/O operation (core/fileio.h's: open, read, write, fsync,
     * rename, mkdir) failing in turn, once: a clean ZN_E_IO naming the
     * injected fault, `latest` only where its folder opens */
    assert_true(zt_io_fault_sweep("to-deepspeed", write_run, tag, NULL) > 10);
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_readers),
    cmocka_unit_test(test_folders),
    cmocka_unit_test(test_to_deepspeed),
    cmocka_unit_test(test_swap))
