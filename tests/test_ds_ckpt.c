/* test_ds_ckpt.c: DeepSpeed's own checkpoints read without torch (spec
 * Z-DSCK-003..006), on the folders DeepSpeed 0.19.8 wrote into
 * tests/data/dsck (tests/ds_fixtures.py: a 65-parameter model with a tied
 * weight, stages 1-3, fp32 and bf16, 2 ranks), each beside DeepSpeed's own
 * zero_to_fp32 result; and on damaged copies of them. */
#include "testutil.h"
#include "core/half.h"
#include "io/ds_ckpt.h"
#include "io/safetensors.h"
#include "io/torch_file.h"

#define DSCK "tests/data/dsck/"

/* ---- torch.save tensors ------------------------------------------------- */

typedef struct {
    unsigned char b[512];
    size_t n;
} Pk;

static void raw(Pk *p, const void *s, size_t n) {
    assert_true(p->n + n <= sizeof p->b);
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void str(Pk *p, const char *s) {   /* BINUNICODE */
    uint32_t n = (uint32_t)strlen(s);
    raw(p, "X", 1);
    raw(p, (unsigned char[]){n & 255, n >> 8 & 255, n >> 16 & 255, n >> 24}, 4);
    raw(p, s, n);
}
static void num(Pk *p, long long v) {   /* LONG1 of 8 bytes: any 64-bit integer */
    unsigned char b[10] = {0x8a, 8};
    for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)((unsigned long long)v >> (8 * i));
    raw(p, b, 10);
}

/* _rebuild_tensor_v2(persid(('storage', torch.<type>, key, 'cpu', numel)), off, size, stride, False, ()) */
static void tensor_pickle(Pk *p, const char *type, const char *key, long long numel, long long off, int nd,
                          const long long *size, const long long *stride) {
    p->n = 0;
    static const char HEAD[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((";
    raw(p, HEAD, sizeof HEAD - 1);
    str(p, "storage");
    raw(p, "ctorch\n", 7);
    raw(p, type, strlen(type));
    raw(p, "\n", 1);
    str(p, key);
    str(p, "cpu");
    num(p, numel);
    raw(p, "tQ", 2);
    num(p, off);
    raw(p, "(", 1);
    for (int i = 0; i < nd; i++) num(p, size[i]);
    raw(p, "t(", 2);
    for (int i = 0; i < nd; i++) num(p, stride[i]);
    raw(p, "t\x89)tR.", 6);
}

/* zn_pt_tensor on a pickle of our own over a real file's storages */
static int as_tensor(const ZnPt *f, const Pk *p, ZnPtTensor *t, ZnErr *err) {
    ZnPickle pk;
    ZnPy *root;
    int rc = zn_pickle_load(p->b, p->n, "test.pkl", &pk, &root, err);
    if (!rc) rc = zn_pt_tensor(f, root, "t", t, err);
    if (!rc || pk.n) zn_pickle_free(&pk);
    return rc;
}

/* spec: Z-DSCK-003 */
static void test_torch_tensors(void **state) {
    (void)state;
    ZnPt f;
    ZnErr err = {0};
    assert_int_equal(zn_pt_open(&f, DSCK "z3/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt", &err), 0);
    assert_string_equal(f.archive, "zero_pp_rank_0_mp_rank_00_optim_states");
    /* storage '0' holds 31 float32 (124 bytes): the rank's partition of group 0 */
    Pk p;
    ZnPtTensor t;
    tensor_pickle(&p, "FloatStorage", "0", 31, 1, 2, (long long[]){5, 6}, (long long[]){6, 1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(t.type, ZN_PT_F32);
    assert_int_equal(t.numel, 30);
    assert_int_equal(t.offset, 1);
    assert_true(t.contiguous);
    float a[31], b[30];
    tensor_pickle(&p, "FloatStorage", "0", 31, 0, 1, (long long[]){31}, (long long[]){1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(zn_pt_read(&f, &t, 0, 31, a, &err), 0);
    tensor_pickle(&p, "FloatStorage", "0", 31, 1, 2, (long long[]){5, 6}, (long long[]){6, 1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(zn_pt_read(&f, &t, 0, 30, b, &err), 0);
    assert_memory_equal(a + 1, b, sizeof b);   /* the offset is in elements */
    /* a transposed view is no contiguous run: reading it is refused, not guessed */
    tensor_pickle(&p, "FloatStorage", "0", 31, 0, 2, (long long[]){5, 6}, (long long[]){1, 5});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_false(t.contiguous);
    assert_int_equal(zn_pt_read(&f, &t, 0, 1, b, &err), ZN_E_INTERNAL);

    /* refusals: each ZN_E_CORRUPT naming the file and what is wrong */
    static const struct {
        const char *type, *key;
        long long numel, off, size[2], stride[2];
        const char *want;
    } BAD[] = {
        {"FloatStorage", "0", 31, 31, {1, 1}, {1, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 31, 0, {4, 8}, {8, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 31, 0, {1ll << 62, 4}, {4, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 31, 0, {2, 2}, {1ll << 62, 1ll << 62}, "reaches past its storage"},
        {"FloatStorage", "0", 31, 1ll << 62, {0, 0}, {1, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 3, 0, {1, 1}, {1, 1}, "holds 124 bytes, not 3 elements of float32"},
        {"FloatStorage", "0", 1ll << 62, 0, {1, 1}, {1, 1}, "holds 124 bytes"},
        {"DoubleStorage", "0", 31, 0, {1, 1}, {1, 1}, "holds 124 bytes, not 31 elements of float64"},
        {"FloatStorage", "99", 31, 0, {1, 1}, {1, 1}, "storage '99' has no entry in the archive"},
        {"FloatStorage", "0", 31, 0, {-1, 1}, {1, 1}, "size and stride are not tuples"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        tensor_pickle(&p, BAD[i].type, BAD[i].key, BAD[i].numel, BAD[i].off, 2, BAD[i].size, BAD[i].stride);
        assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
        assert_str_contains(err.msg, "zero_pp_rank_0_mp_rank_00_optim_states.pt");
        assert_str_contains(err.msg, BAD[i].want);
    }
    /* a storage type off the allow-list never reaches the tensor reader */
    tensor_pickle(&p, "ComplexFloatStorage", "0", 31, 0, 1, (long long[]){1}, (long long[]){1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "global 'torch ComplexFloatStorage' is not one DeepSpeed's checkpoints name");
    /* something that is no tensor */
    static const unsigned char INT[] = "\x80\x02K\x05.";
    ZnPickle pk;
    ZnPy *root;
    assert_int_equal(zn_pickle_load(INT, sizeof INT - 1, "i.pkl", &pk, &root, &err), 0);
    assert_int_equal(zn_pt_tensor(&f, root, "x", &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "x: expected a tensor");
    zn_pickle_free(&pk);
    zn_pt_close(&f);
}

/* ---- DeepSpeed folders -------------------------------------------------- */

static const struct {
    const char *name;
    int stage, bf16;
} FIX[] = {{"z1-bf16", 1, 1}, {"z2", 2, 0}, {"z3", 3, 0}, {"z3-bf16", 3, 1}};

/* spec: Z-DSCK-004 */
static void test_layouts(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof FIX / sizeof *FIX; k++) {
        char dir[256];
        snprintf(dir, sizeof dir, DSCK "%s", FIX[k].name);
        assert_true(zn_ds_is_folder(dir));   /* through `latest` */
        ZnDsCkpt ck;
        ZnErr err = {0};
        assert_int_equal(zn_ds_open(&ck, dir, &err), 0);
        assert_int_equal(ck.stage, FIX[k].stage);
        assert_int_equal(ck.world, 2);
        assert_int_equal(ck.bf16_names, FIX[k].bf16 && FIX[k].stage != 2);
        assert_int_equal(ck.module_type, FIX[k].bf16 ? ZN_PT_BF16 : ZN_PT_F32);
        assert_string_equal(ck.tag, "global_step2");
        assert_string_equal(ck.ds_version, "0.19.8");
        assert_int_equal(ck.global_steps, 2);
        assert_int_equal(ck.nparams, 3);
        assert_string_equal(ck.param[0].name, "emb.weight");
        assert_int_equal(ck.param[0].numel, 35);
        assert_int_equal(ck.param[2].group, 1);   /* fc.bias: the no-decay group */
        assert_int_equal(ck.nshared, 1);
        assert_string_equal(ck.shared[0], "out.weight");
        assert_int_equal(zn_ds_find(&ck, "out.weight"), 0);
        assert_int_equal(zn_ds_find(&ck, "nope"), -1);
        /* where each parameter starts: stages 1-2 in its group's vector, stage 3 in every rank's partition */
        if (FIX[k].stage == 3) {
            assert_int_equal(ck.param[1].offset, 18);   /* ceil(35 / 2) */
            assert_int_equal(ck.param[2].offset, 31);   /* + ceil(25 / 2) */
            assert_int_equal(zn_ds_rank_of(&ck, 2, 3), 1);
        } else {
            assert_int_equal(ck.param[1].offset, 35);
            assert_int_equal(ck.param[2].offset, 0);
            /* the last rank's slice is saved without the group's padding: 5 = 4 + 1 */
            assert_int_equal(ck.state[0][1 * ck.ngroups + 1].numel, 1);
            assert_int_equal(ck.state[1][1 * ck.ngroups + 1].numel, 4);   /* its moments keep it */
        }
        zn_ds_close(&ck);
    }
}

/* The tensors of two safetensors files, bitwise; want's converted to dtype. */
static void same_tensors(const char *want_path, const char *got_path, ZnDtype dtype, int skip_shared) {
    ZnStFile *w, *g;
    ZnErr err = {0};
    assert_int_equal(zn_st_open(&w, want_path, &err), 0);
    assert_int_equal(zn_st_open(&g, got_path, &err), 0);
    assert_int_equal(zn_st_count(g), zn_st_count(w) - skip_shared);
    for (int i = 0; i < zn_st_count(w); i++) {
        const ZnStTensor *a = zn_st_tensor(w, i), *b = zn_st_find(g, a->name);
        if (skip_shared && !strcmp(a->name, "out.weight")) {
            assert_null(b);
            continue;
        }
        assert_non_null(b);
        assert_int_equal(b->dtype, dtype);
        assert_int_equal(a->ndim, b->ndim);
        assert_memory_equal(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim);
        float x[64];
        uint16_t h[64], y[64];
        assert_true(a->numel <= 64);
        assert_int_equal(zn_st_read(w, a, x, a->end - a->begin, &err), 0);
        if (dtype == ZN_F32) {
            float z[64];
            assert_int_equal(zn_st_read(g, b, z, b->end - b->begin, &err), 0);
            assert_memory_equal(x, z, a->end - a->begin);
            continue;
        }
        assert_int_equal(zn_st_read(g, b, y, b->end - b->begin, &err), 0);
        for (uint64_t e = 0; e < a->numel; e++) h[e] = dtype == ZN_BF16 ? zn_f32_to_bf16(x[e]) : zn_f32_to_f16(x[e]);
        assert_memory_equal(h, y, 2 * a->numel);
    }
    zn_st_close(w);
    zn_st_close(g);
}

/* spec: Z-DSCK-006 */
static void test_consolidate_as_zero_to_fp32(void **state) {
    (void)state;
    for (size_t k = 0; k < sizeof FIX / sizeof *FIX; k++) {
        char dir[256], want[256];
        snprintf(dir, sizeof dir, DSCK "%s", FIX[k].name);
        snprintf(want, sizeof want, DSCK "%s/expected.safetensors", FIX[k].name);
        ZnDsCkpt ck;
        ZnErr err = {0};
        assert_int_equal(zn_ds_open(&ck, dir, &err), 0);
        static const ZnDtype DT[] = {ZN_F32, ZN_BF16, ZN_F16};
        for (int d = 0; d < 3; d++) {
            int n;
            long long elements;
            const char *out = zt_path("c.safetensors");
            assert_int_equal(zn_ds_consolidate(&ck, out, DT[d], d == 2, &n, &elements, &err), 0);
            assert_int_equal(n, d == 2 ? 3 : 4);   /* the --hf form leaves the tied name out */
            assert_int_equal(elements, 65);
            same_tensors(want, out, DT[d], d == 2);
        }
        zn_ds_close(&ck);
    }
}

/* describe's text into a string */
static int describe(const char *dir, char *buf, size_t cap, ZnErr *err) {
    ZnDsCkpt ck;
    int rc = zn_ds_open(&ck, dir, err);
    if (rc) return rc;
    FILE *f = fmemopen(buf, cap, "w");
    assert_non_null(f);
    rc = zn_ds_describe(&ck, f, err);
    fclose(f);
    zn_ds_close(&ck);
    return rc;
}

/* spec: Z-DSCK-005 */
static void test_inspect(void **state) {
    (void)state;
    char text[4096];
    ZnErr err = {0};
    assert_int_equal(describe(DSCK "z3-bf16/global_step2", text, sizeof text, &err), 0);
    assert_str_contains(text, "ZeRO stage 3, world size 2, module bfloat16, fp32 master in 2 groups (bf16 optimizer files)");
    assert_str_contains(text, "3 parameters, 65 elements; 1 shared (out.weight -> emb.weight); 0 frozen; 0 buffers");
    assert_str_contains(text, "global step 2, skipped 0, samples 8, loss scale 1 (static), lr_scheduler None");
    assert_str_contains(text, "4 files: every entry's CRC-32");
    assert_int_equal(zt_count_of(text, "crc32 ok"), 4);
    /* why finiteness skips padding: DeepSpeed's bf16 stage 3 leaves NaN in
     * the padding of fc.bias's last piece (5 = 3 + 2, one element of padding) */
    ZnDsCkpt ck;
    assert_int_equal(zn_ds_open(&ck, DSCK "z3-bf16", &err), 0);
    float part[13];
    assert_int_equal(ck.state[0][1 * ck.ngroups + 1].numel, 3);
    assert_int_equal(zn_pt_read(&ck.optim[1], &ck.state[0][1 * ck.ngroups + 1], 0, 3, part, &err), 0);
    assert_true(isnan(part[2]));
    zn_ds_close(&ck);
}

static void copy_fixture(const char *name, const char *to) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r " DSCK "%s/global_step2 %s", to, name, to);
    assert_int_equal(system(cmd), 0);
}

/* opening (or, with check, describing) dir fails naming want */
static void refused(const char *dir, int check, const char *want) {
    char text[4096];
    ZnErr err = {0};
    ZnDsCkpt ck;
    int rc = check ? describe(dir, text, sizeof text, &err) : zn_ds_open(&ck, dir, &err);
    assert_int_not_equal(rc, 0);
    assert_str_contains(err.msg, want);
}

/* spec: Z-DSCK-005 */
static void test_damaged_folders(void **state) {
    (void)state;
    const char *d = zt_path("dmg");
    char p[512], q[512];
    /* a rank's file missing */
    copy_fixture("z2", d);
    snprintf(p, sizeof p, "%s/zero_pp_rank_1_mp_rank_00_optim_states.pt", d);
    assert_int_equal(unlink(p), 0);
    refused(d, 0, "rank 1's file zero_pp_rank_1_mp_rank_00_optim_states.pt is missing: partition_count in rank 0's "
                  "says 2 ranks");
    /* a file left from a larger run */
    copy_fixture("z2", d);
    snprintf(p, sizeof p, "cp %s/zero_pp_rank_1_mp_rank_00_optim_states.pt %s/zero_pp_rank_2_mp_rank_00_optim_states.pt",
             d, d);
    assert_int_equal(system(p), 0);
    refused(d, 0, "3 optimizer files, but partition_count in rank 0's says 2 ranks");
    /* two namings in one folder */
    copy_fixture("z2", d);
    snprintf(p, sizeof p, "cp %s/zero_pp_rank_1_mp_rank_00_optim_states.pt %s/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt",
             d, d);
    assert_int_equal(system(p), 0);
    refused(d, 0, "holds both zero_pp_rank_* and bf16_zero_pp_rank_* optimizer files");
    /* a tensor-parallel name */
    copy_fixture("z2", d);
    snprintf(p, sizeof p, "%s/zero_pp_rank_1_mp_rank_00_optim_states.pt", d);
    snprintf(q, sizeof q, "%s/zero_pp_rank_1_mp_rank_01_optim_states.pt", d);
    assert_int_equal(rename(p, q), 0);
    refused(d, 0, "not a name DeepSpeed gives a data-parallel optimizer file");
    /* stage 3 without a rank's model states */
    copy_fixture("z3", d);
    snprintf(p, sizeof p, "%s/zero_pp_rank_1_mp_rank_00_model_states.pt", d);
    assert_int_equal(unlink(p), 0);
    refused(d, 0, "zero_pp_rank_1_mp_rank_00_model_states.pt: missing: DeepSpeed's layout needs this file");
    /* the optimizer files of one run beside the model states of another:
     * z3's partitions under z3-bf16's names are still stage 3 of 2 ranks,
     * so swap in z2's model states instead (stage 2's param_shapes file) */
    copy_fixture("z3", d);
    snprintf(p, sizeof p, "cp " DSCK "z1-bf16/global_step2/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt "
             "%s/zero_pp_rank_0_mp_rank_00_optim_states.pt", d);
    assert_int_equal(system(p), 0);
    refused(d, 0, "stage 3 of 2 ranks, rank 0's file stage 1 of 2");
}

/* spec: Z-DSCK-005 */
static void test_every_byte(void **state) {
    (void)state;
    /* rank 1's model states of z3 (3448 bytes), truncated at every byte and
     * with every byte flipped in turn: each ends in a clean error or, where
     * the flip lands on a byte no reader depends on, in a folder that still
     * describes (torch pads local headers with extra-field bytes that no
     * reader depends on); a flip inside any entry's bytes is always caught */
    const char *d = zt_path("byte");
    copy_fixture("z3", d);
    char file[512];
    snprintf(file, sizeof file, "%s/zero_pp_rank_1_mp_rank_00_model_states.pt", d);
    size_t n;
    char *orig = zt_slurp(fopen(file, "rb"), &n);
    ZnZip z;
    ZnErr err = {0};
    assert_int_equal(zn_zip_open(&z, file, &err), 0);
    char text[4096];
    int caught = 0, inside = 0;
    for (size_t at = 0; at < n; at++) {
        zt_write_bytes(file, orig, at);
        int rc = describe(d, text, sizeof text, &err);
        assert_int_equal(rc, ZN_E_CORRUPT);
        assert_str_contains(err.msg, "zero_pp_rank_1_mp_rank_00_model_states.pt");
        orig[at] ^= 0x20;
        zt_write_bytes(file, orig, n);
        rc = describe(d, text, sizeof text, &err);
        orig[at] ^= 0x20;
        int in_entry = 0;
        for (int e = 0; e < z.n; e++) in_entry |= at >= z.e[e].offset && at < z.e[e].offset + z.e[e].size;
        assert_true(rc == 0 || rc == ZN_E_CORRUPT);
        if (in_entry) assert_int_equal(rc, ZN_E_CORRUPT);
        inside += in_entry;
        caught += rc != 0;
    }
    assert_true(caught >= inside);   /* and more: headers and the directory are checked too */
    zn_zip_close(&z);
    free(orig);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch_tensors),   cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_consolidate_as_zero_to_fp32), cmocka_unit_test(test_inspect),
        cmocka_unit_test(test_damaged_folders), cmocka_unit_test(test_every_byte),
    };
    zt_filter_from_env();
    return cmocka_run_group_tests(tests, zt_tmpdir_setup, zt_tmpdir_teardown);
}
