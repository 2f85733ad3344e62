/* test_ds_ckpt.c: DeepSpeed's own checkpoints read without torch (spec
 * Z-DSCK-003..007), on the folders DeepSpeed 0.19.8 wrote into
 * tests/data/dsck (tests/ds_fixtures.py: zinc's mlp:5,5,5,tie:1=0 as a
 * torch module, 35 parameters with a tied weight, stages 1-3, fp32 and
 * bf16, 2 ranks), each beside DeepSpeed's own zero_to_fp32 result and Adam
 * moments; and on damaged copies of them. */
#include "testutil.h"
#include <fcntl.h>
#include "core/alloc.h"
#include "core/half.h"
#include "io/checkpoint.h"
#include "io/ds_ckpt.h"
#include "io/safetensors.h"
#include "io/torch_file.h"
#include "io/zipwrite.h"

#define DSCK "tests/data/dsck/"

/* ---- torch.save tensors ------------------------------------------------- */

typedef ZtBuf Pk;
#define raw zt_put
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

/* _rebuild_tensor_v2's arguments: (persid(('storage', torch.<type>, key, 'cpu', numel)), off, size, stride, False, ()) */
static void tensor_args(Pk *p, const char *type, const char *key, long long numel, long long off, int nd,
                        const long long *size, const long long *stride) {
    raw(p, "((", 2);
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
    raw(p, "t\x89)t", 4);
}

/* _rebuild_tensor_v2(tensor_args) as a whole pickle */
static void tensor_pickle(Pk *p, const char *type, const char *key, long long numel, long long off, int nd,
                          const long long *size, const long long *stride) {
    p->n = 0;
    static const char HEAD[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n";
    raw(p, HEAD, sizeof HEAD - 1);
    tensor_args(p, type, key, numel, off, nd, size, stride);
    raw(p, "R.", 2);
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
    /* storage '0' holds 13 float32 (52 bytes): the rank's partition of group 0 */
    Pk p;
    ZnPtTensor t;
    tensor_pickle(&p, "FloatStorage", "0", 13, 1, 2, (long long[]){3, 4}, (long long[]){4, 1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(t.type, ZN_PT_F32);
    assert_int_equal(t.numel, 12);
    assert_int_equal(t.offset, 1);
    assert_true(t.contiguous);
    float a[13], b[12];
    tensor_pickle(&p, "FloatStorage", "0", 13, 0, 1, (long long[]){13}, (long long[]){1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(zn_pt_read(&f, &t, 0, 13, a, &err), 0);
    tensor_pickle(&p, "FloatStorage", "0", 13, 1, 2, (long long[]){3, 4}, (long long[]){4, 1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(zn_pt_read(&f, &t, 0, 12, b, &err), 0);
    assert_memory_equal(a + 1, b, sizeof b);   /* the offset is in elements */
    /* a transposed view is no contiguous run: reading it is refused, not guessed */
    tensor_pickle(&p, "FloatStorage", "0", 13, 0, 2, (long long[]){3, 4}, (long long[]){1, 3});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_false(t.contiguous);
    assert_int_equal(zn_pt_read(&f, &t, 0, 1, b, &err), ZN_E_INTERNAL);

    /* refusals: each ZN_E_CORRUPT naming the file and what is wrong */
    static const struct {
        const char *type, *key;
        long long numel, off, size[2], stride[2];
        const char *want;
    } BAD[] = {
        {"FloatStorage", "0", 13, 13, {1, 1}, {1, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 13, 0, {2, 8}, {8, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 13, 0, {1ll << 62, 4}, {4, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 13, 0, {2, 2}, {1ll << 62, 1ll << 62}, "reaches past its storage"},
        {"FloatStorage", "0", 13, 1ll << 62, {0, 0}, {1, 1}, "reaches past its storage"},
        {"FloatStorage", "0", 3, 0, {1, 1}, {1, 1}, "holds 52 bytes, not 3 elements of float32"},
        {"FloatStorage", "0", 1ll << 62, 0, {1, 1}, {1, 1}, "holds 52 bytes"},
        {"DoubleStorage", "0", 13, 0, {1, 1}, {1, 1}, "holds 52 bytes, not 13 elements of float64"},
        {"FloatStorage", "99", 13, 0, {1, 1}, {1, 1}, "storage '99' has no entry in the archive"},
        {"FloatStorage", "0", 13, 0, {-1, 1}, {1, 1}, "size and stride are not tuples"},
        {"FloatStorage", "0", 13, -1, {1, 1}, {1, 1}, "t: _rebuild_tensor_v2 without (storage, offset, size, stride)"},
        {"FloatStorage", "0", -1, 0, {1, 1}, {1, 1}, "t: the storage is not ('storage', type, key, location, numel)"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        tensor_pickle(&p, BAD[i].type, BAD[i].key, BAD[i].numel, BAD[i].off, 2, BAD[i].size, BAD[i].stride);
        assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
        assert_str_contains(err.msg, "zero_pp_rank_0_mp_rank_00_optim_states.pt");
        assert_str_contains(err.msg, BAD[i].want);
    }
    /* more dimensions than zinc keeps */
    tensor_pickle(&p, "FloatStorage", "0", 13, 0, 9, (long long[]){1, 1, 1, 1, 1, 1, 1, 1, 1},
                  (long long[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "t: size and stride are not tuples of as many non-negative integers (at most 8)");
    /* a read past the tensor's end is the caller's error */
    tensor_pickle(&p, "FloatStorage", "0", 13, 0, 1, (long long[]){13}, (long long[]){1});
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(zn_pt_read(&f, &t, 14, 0, a, &err), ZN_E_INTERNAL);
    assert_str_contains(err.msg, "zero_pp_rank_0_mp_rank_00_optim_states.pt: a read of elements [14, +0) of a "
                                 "contiguous tensor of 13");
    /* the wrappers torch writes around a tensor: a Parameter's is read
     * through; a subclass's must rebuild with _rebuild_tensor_v2 from a
     * tuple of its arguments */
    static const char PARAM[] = "\x80\x02" "ctorch._utils\n_rebuild_parameter\n(" "ctorch._utils\n_rebuild_tensor_v2\n";
    p.n = 0;
    raw(&p, PARAM, sizeof PARAM - 1);
    tensor_args(&p, "FloatStorage", "0", 13, 0, 1, (long long[]){13}, (long long[]){1});
    raw(&p, "R\x88)tR.", 7);
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(t.numel, 13);
    static const char *const SUBCLASS[] = {
        "\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch\nTensor\nctorch\nTensor\n)NtR.",
        "\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor_v2\nctorch\nTensor\nNNtR."};
    for (size_t i = 0; i < ZT_LEN(SUBCLASS); i++) {
        p.n = 0;
        raw(&p, SUBCLASS[i], strlen(SUBCLASS[i]));
        assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
        assert_str_contains(err.msg, "optim_states.pt: t: a tensor subclass rebuilt by something other than "
                                     "_rebuild_tensor_v2");
    }
    /* a persistent id that is no storage tuple */
    static const char PID[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n(K\x01QK\x00(K\x01t(K\x01t\x89)tR.";
    p.n = 0;
    raw(&p, PID, sizeof PID - 1);
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "t: the storage is not ('storage', type, key, location, numel)");
    /* a storage type off the allow-list never reaches the tensor reader */
    tensor_pickle(&p, "ComplexFloatStorage", "0", 13, 0, 1, (long long[]){1}, (long long[]){1});
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

/* a torch.save file of our own: data.pkl, then (name, text) entries */
static void pt_file(const char *path, const char *pkl_name, const Pk *pkl, int n, const char *const *entries) {
    ZnZipW z;
    ZnErr err = {0};
    assert_int_equal(zn_zipw_open(&z, path, &err), 0);
    assert_int_equal(zn_zipw_add(&z, pkl_name, (ZnZipPart[]){{pkl->b, pkl->n}}, 1, &err), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(zn_zipw_add(&z, entries[2 * i], (ZnZipPart[]){{entries[2 * i + 1], strlen(entries[2 * i + 1])}},
                                     1, &err), 0);
    assert_int_equal(zn_zipw_commit(&z, &err), 0);
}

/* opening path fails with ZN_E_CORRUPT naming it and want */
static void pt_refused(const char *path, const char *want) {
    ZnPt f;
    ZnErr err = {0};
    assert_int_equal(zn_pt_open(&f, path, &err), ZN_E_CORRUPT);
    char full[1024];
    snprintf(full, sizeof full, "%s: %s", path, want);
    assert_str_contains(err.msg, full);
}

/* spec: Z-DSCK-003 the file's records, the tensor wrappers torch writes,
 * and what is refused in them */
static void test_torch_records(void **state) {
    (void)state;
    const char *path = zt_path("t.pt");
    static Pk p;
    static const char DOT[] = "\x80\x02K\x01.";
    p.n = 0;
    raw(&p, DOT, sizeof DOT - 1);
    /* no ARCHIVE/data.pkl: at the root, or with an empty folder name */
    pt_file(path, "data.pkl", &p, 0, NULL);
    pt_refused(path, "no entry 'ARCHIVE/data.pkl': not a file torch.save writes");
    pt_file(path, "/data.pkl", &p, 0, NULL);
    pt_refused(path, "no entry 'ARCHIVE/data.pkl'");
    /* byteorder: big-endian, or not a word at all */
    pt_file(path, "a/data.pkl", &p, 1, (const char *const[]){"a/byteorder", "big"});
    pt_refused(path, "entry 'a/byteorder' says the tensors are 'big'-endian; zinc reads little-endian files");
    pt_file(path, "a/data.pkl", &p, 1, (const char *const[]){"a/byteorder", "little-endian-please"});
    pt_refused(path, "entry 'a/byteorder' is 20 bytes, not 'little' or 'big'");
    /* little, or no byteorder at all (torch before 1.13): read */
    ZnPt f;
    ZnErr err = {0};
    pt_file(path, "a/data.pkl", &p, 1, (const char *const[]){"a/byteorder", "little"});
    assert_int_equal(zn_pt_open(&f, path, &err), 0);
    assert_string_equal(f.archive, "a");
    assert_int_equal(f.root->i, 1);
    zn_pt_close(&f);

    /* a data.pkl past 256 MiB: refused before it is read (a sparse file:
     * the local header, a hole of 2^28 + 1 bytes, the directory) */
    {
        const uint32_t big = (256u << 20) + 1;
        unsigned char loc[30 + 10] = {0x50, 0x4b, 0x03, 0x04, 20}, cen[46 + 10] = {0x50, 0x4b, 0x01, 0x02, 20, 0, 20},
                      end[22] = {0x50, 0x4b, 0x05, 0x06};
        for (int i = 0; i < 4; i++) {
            loc[18 + i] = loc[22 + i] = cen[20 + i] = cen[24 + i] = (unsigned char)(big >> (8 * i));
        }
        loc[26] = cen[28] = 10;   /* the name's length */
        memcpy(loc + 30, "a/data.pkl", 10);
        memcpy(cen + 46, "a/data.pkl", 10);
        const uint64_t cd_at = sizeof loc + (uint64_t)big;
        end[8] = end[10] = 1;   /* one entry */
        end[12] = sizeof cen;
        for (int i = 0; i < 4; i++) end[16 + i] = (unsigned char)(cd_at >> (8 * i));
        FILE *w = fopen(path, "wb");
        assert_non_null(w);
        assert_int_equal(fwrite(loc, 1, sizeof loc, w), sizeof loc);
        assert_int_equal(fseeko(w, (off_t)cd_at, SEEK_SET), 0);
        assert_int_equal(fwrite(cen, 1, sizeof cen, w), sizeof cen);
        assert_int_equal(fwrite(end, 1, sizeof end, w), sizeof end);
        assert_int_equal(fclose(w), 0);
        pt_refused(path, "entry 'a/data.pkl' is 268435457 bytes, more than the 268435456-byte limit of a "
                         "checkpoint's pickle");
        unlink(path);
    }
    /* tensors over a real file's storage '0' (13 float32) */
    assert_int_equal(zn_pt_open(&f, DSCK "z3/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt", &err), 0);
    ZnPtTensor t;
    const long long one = 13, unit = 1;
    /* _rebuild_parameter(tensor, False, OrderedDict()): the tensor inside */
    p.n = 0;
    static const char PARAM[] = "\x80\x02" "ctorch._utils\n_rebuild_parameter\n(ctorch._utils\n_rebuild_tensor_v2\n";
    raw(&p, PARAM, sizeof PARAM - 1);
    tensor_args(&p, "FloatStorage", "0", 13, 0, 1, &one, &unit);
    raw(&p, "R\x89" "ccollections\nOrderedDict\n)RtR.", 32);
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(t.numel, 13);
    /* _rebuild_from_type_v2(func, type, args, state): a subclass, read as the tensor its args make */
    static const char SUB[] = "\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor_v2\n"
                              "ctorch\nTensor\n";
    p.n = 0;
    raw(&p, SUB, sizeof SUB - 1);
    tensor_args(&p, "FloatStorage", "0", 13, 0, 1, &one, &unit);
    raw(&p, "}tR.", 4);
    assert_int_equal(as_tensor(&f, &p, &t, &err), 0);
    assert_int_equal(t.numel, 13);
    float x[13];
    assert_int_equal(zn_pt_read(&f, &t, 13, 0, x, &err), 0);   /* an empty run at the end */
    assert_int_equal(zn_pt_read(&f, &t, 14, 0, x, &err), ZN_E_INTERNAL);
    assert_str_contains(err.msg, "a read of elements [14, +0) of a contiguous tensor of 13");
    zn_pt_advise(&f, &t, 0, 13);   /* a hint: nothing to check but that it returns */
    /* ... rebuilt by something else */
    static const char SUB2[] = "\x80\x02" "ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_parameter\n"
                               "ctorch\nTensor\n";
    p.n = 0;
    raw(&p, SUB2, sizeof SUB2 - 1);
    tensor_args(&p, "FloatStorage", "0", 13, 0, 1, &one, &unit);
    raw(&p, "}tR.", 4);
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "optim_states.pt: t: a tensor subclass rebuilt by something other than _rebuild_tensor_v2");
    /* too few arguments, a storage that is no persistent id, a dtype where a storage type goes */
    static const char FEW[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n(K\x00tR.";
    p.n = 0;
    raw(&p, FEW, sizeof FEW - 1);
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "optim_states.pt: t: _rebuild_tensor_v2 without (storage, offset, size, stride)");
    static const char NOPID[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n(K\x00QK\x00)\x89)tR.";
    p.n = 0;
    raw(&p, NOPID, sizeof NOPID - 1);
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "optim_states.pt: t: the storage is not ('storage', type, key, location, numel)");
    tensor_pickle(&p, "float16", "0", 13, 0, 1, &one, &unit);
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "optim_states.pt: t: storage type 'torch float16' is not one zinc reads");
    /* a storage key past 290 bytes names no entry (cut at 200 in the message) */
    char key[301];
    memset(key, 'k', 300);
    key[300] = 0;
    tensor_pickle(&p, "FloatStorage", key, 13, 0, 1, &one, &unit);
    assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
    key[200] = 0;
    char want[400];
    snprintf(want, sizeof want, "t: storage '%s' has no entry in the archive", key);
    assert_str_contains(err.msg, want);
    zn_pt_close(&f);
    /* an archive folder of 510 bytes: ARCHIVE/data/0 is past the names zinc looks up */
    char arch[530];
    memset(arch, 'a', 510);
    snprintf(arch + 510, sizeof arch - 510, "/data.pkl");
    tensor_pickle(&p, "FloatStorage", "0", 1, 0, 1, &unit, &unit);
    pt_file(path, arch, &p, 0, NULL);
    assert_int_equal(zn_pt_open(&f, path, &err), 0);
    assert_int_equal(zn_pt_tensor(&f, f.root, "t", &t, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "t: storage '0' has no entry in the archive");
    zn_pt_close(&f);
    /* every part of _rebuild_tensor_v2's arguments that is not what torch writes */
    assert_int_equal(zn_pt_open(&f, DSCK "z3/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt", &err), 0);
    enum { PID_SHORT, PID_INT, PID_BLOB, PID_TYPE_STR, PID_KEY_INT, PID_NUMEL_STR, PID_NUMEL_NEG, SIZE_INT, SIZE_9,
           SIZE_STR, STRIDE_1, OFF_STR, OFF_NEG, NCASE };
    for (int c = 0; c < NCASE; c++) {
        p.n = 0;
        static const char HEAD[] = "\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n((";
        raw(&p, HEAD, sizeof HEAD - 1);
        if (c == PID_INT) num(&p, 1);
        else str(&p, c == PID_BLOB ? "blob" : "storage");
        if (c == PID_TYPE_STR) str(&p, "FloatStorage");
        else raw(&p, "ctorch\nFloatStorage\n", strlen("ctorch\nFloatStorage\n"));
        if (c == PID_KEY_INT) num(&p, 0);
        else str(&p, "0");
        str(&p, "cpu");
        if (c == PID_NUMEL_STR) str(&p, "13");
        else if (c != PID_SHORT) num(&p, c == PID_NUMEL_NEG ? -1 : 13);
        raw(&p, "tQ", 2);
        if (c == OFF_STR) str(&p, "0");
        else num(&p, c == OFF_NEG ? -1 : 0);
        if (c == SIZE_INT) num(&p, 13);
        else if (c == SIZE_9) {
            raw(&p, "(", 1);
            for (int i = 0; i < 9; i++) num(&p, 1);
            raw(&p, "t", 1);
        } else if (c == SIZE_STR) {
            raw(&p, "(", 1);
            str(&p, "13");
            raw(&p, "t", 1);
        } else {
            raw(&p, "(", 1);
            num(&p, 13);
            if (c == STRIDE_1) num(&p, 1);
            raw(&p, "t", 1);
        }
        raw(&p, "(", 1);
        num(&p, 1);
        raw(&p, "t\x89)tR.", 6);
        assert_int_equal(as_tensor(&f, &p, &t, &err), ZN_E_CORRUPT);
        assert_str_contains(err.msg, "zero_pp_rank_0_mp_rank_00_optim_states.pt: t: ");
        const char *why = c <= PID_NUMEL_NEG ? "the storage is not ('storage', type, key, location, numel)"
                        : c <= STRIDE_1     ? "size and stride are not tuples of as many non-negative integers (at most 8)"
                                            : "_rebuild_tensor_v2 without (storage, offset, size, stride)";
        if (!strstr(err.msg, why)) fail_msg("case %d: '%s', wanted '%s'", c, err.msg, why);
    }
    zn_pt_close(&f);
    /* the element types: torch's names and sizes, the floating ones as zinc's dtypes */
    static const struct { ZnPtType t; const char *name; size_t size; ZnDtype dt; } TY[] = {
        {ZN_PT_F32, "float32", 4, ZN_F32}, {ZN_PT_F16, "float16", 2, ZN_F16}, {ZN_PT_BF16, "bfloat16", 2, ZN_BF16},
        {ZN_PT_F64, "float64", 8, ZN_F64}, {ZN_PT_I64, "int64", 8, ZN_DTYPE_N}, {ZN_PT_BOOL, "bool", 1, ZN_DTYPE_N},
        {ZN_PT_TYPE_N, "?", 0, ZN_DTYPE_N}};
    for (size_t i = 0; i < ZT_LEN(TY); i++) {
        assert_string_equal(zn_pt_type_name(TY[i].t), TY[i].name);
        assert_int_equal(zn_pt_type_size(TY[i].t), TY[i].size);
        assert_int_equal(zn_pt_float_dtype(TY[i].t), TY[i].dt);
    }
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
        assert_string_equal(ck.param[0].name, "layers.0.weight");
        assert_int_equal(ck.param[0].numel, 25);
        assert_int_equal(ck.param[2].group, 1);   /* layers.1.bias: the no-decay group */
        assert_int_equal(ck.adam_step, 2);
        assert_int_equal(ck.sched_t, 1);          /* no scheduler: global_steps - 1 */
        assert_int_equal(ck.nshared, 1);
        assert_string_equal(ck.shared[0], "layers.1.weight");
        assert_int_equal(zn_ds_find(&ck, "layers.1.weight"), 0);
        assert_int_equal(zn_ds_find(&ck, "nope"), -1);
        /* where each parameter starts: stages 1-2 in its group's vector, stage 3 in every rank's partition */
        if (FIX[k].stage == 3) {
            assert_int_equal(ck.param[1].offset, 13);   /* ceil(25 / 2) */
            assert_int_equal(ck.param[2].offset, 16);   /* + ceil(5 / 2) */
            assert_int_equal(zn_ds_rank_of(&ck, 2, 3), 1);
        } else {
            assert_int_equal(ck.param[1].offset, 0);    /* first of group 1 */
            assert_int_equal(ck.param[2].offset, 5);
            /* 10 elements padded to 12 (a multiple of 2W): 6 + 6, the last
             * rank's slice saved without the padding (4), its moments with it */
            assert_int_equal(ck.state[0][1 * ck.ngroups + 1].numel, 4);
            assert_int_equal(ck.state[1][1 * ck.ngroups + 1].numel, 6);
            assert_int_equal(zn_ds_rank_of(&ck, 2, 0), 0);
            assert_int_equal(zn_ds_rank_of(&ck, 2, 1), 1);
        }
        zn_ds_close(&ck);
    }
}

/* got's tensors are want's of the same name (want may hold more: the
 * moments), bitwise, want's converted to dtype; n: how many got holds. */
static void same_tensors(const char *want_path, const char *got_path, ZnDtype dtype, int n) {
    ZnStFile *w, *g;
    ZnErr err = {0};
    assert_int_equal(zn_st_open(&w, want_path, &err), 0);
    assert_int_equal(zn_st_open(&g, got_path, &err), 0);
    assert_int_equal(zn_st_count(g), n);
    for (int i = 0; i < zn_st_count(g); i++) {
        const ZnStTensor *b = zn_st_tensor(g, i), *a = zn_st_find(w, b->name);
        assert_non_null(a);
        assert_null(strchr(b->name, '/'));
        assert_int_equal(b->dtype, dtype);
        assert_int_equal(a->ndim, b->ndim);
        assert_memory_equal(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim);
        float x[64], z[64];
        uint16_t h[64], y[64];
        assert_true(a->numel <= 64);
        assert_int_equal(zn_st_read(w, a, x, a->end - a->begin, &err), 0);
        if (dtype == ZN_F32) {
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
            if (d == 2) {
                ZnStFile *g;
                assert_int_equal(zn_st_open(&g, out, &err), 0);
                assert_null(zn_st_find(g, "layers.1.weight"));
                zn_st_close(g);
            }
            assert_int_equal(elements, 35);
            same_tensors(want, out, DT[d], n);
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
    assert_str_contains(text, "3 parameters, 35 elements; 1 shared (layers.1.weight -> layers.0.weight); 0 frozen; "
                              "0 buffers");
    assert_str_contains(text, "global step 2, skipped 0, samples 8, loss scale 1 (static), lr_scheduler None");
    assert_str_contains(text, "4 files: every entry's CRC-32");
    assert_int_equal(zt_count_of(text, "crc32 ok"), 4);
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

/* Sets element idx of rank r's fp32 partition of group g in a copy of a
 * folder to v, and mends the entry's CRC-32 in the central directory, so
 * only the finiteness check can object. */
static void poke(const char *dir, int r, int g, uint64_t idx, float v) {
    ZnDsCkpt ck;
    ZnErr err = {0};
    assert_int_equal(zn_ds_open(&ck, dir, &err), 0);
    const ZnPtTensor *t = &ck.state[0][r * ck.ngroups + g];
    char file[512], name[256];
    snprintf(file, sizeof file, "%s", ck.optim[r].zip.path);
    snprintf(name, sizeof name, "%s", t->storage->name);
    const uint64_t begin = t->storage->offset, size = t->storage->size, at = begin + (t->offset + idx) * 4;
    zn_ds_close(&ck);
    size_t n;
    char *b = zt_slurp(fopen(file, "rb"), &n);
    memcpy(b + at, &v, 4);
    const uint32_t crc = zn_crc32(0, b + begin, size);
    int mended = 0;
    for (size_t k = 0; k + 46 < n; k++) {   /* the central record naming the entry */
        if (memcmp(b + k, "PK\x01\x02", 4) || (size_t)((unsigned char)b[k + 28] | (unsigned char)b[k + 29] << 8) != strlen(name) ||
            memcmp(b + k + 46, name, strlen(name)))
            continue;
        for (int i = 0; i < 4; i++) b[k + 16 + i] = (char)(crc >> (8 * i));
        mended++;
    }
    assert_int_equal(mended, 1);
    zt_write_bytes(file, b, n);
    free(b);
}

/* ---- edited copies: a file's pickle changed, written back ------------- */

static void pw(ZnBytes *b, const void *p, size_t n) { zn_bytes_put(ZN_HOST_IO, b, p, n); }
static void pw_len(ZnBytes *b, const char *op, uint64_t n) {
    const unsigned char l[4] = {n & 255, n >> 8 & 255, n >> 16 & 255, n >> 24 & 255};
    pw(b, op, 1);
    pw(b, l, 4);
}

/* v as a protocol-2 pickle's opcodes (no memo: a shared value is written again) */
static void py_write(ZnBytes *b, const ZnPy *v) {
    switch (v->kind) {
    case ZN_PY_NONE: pw(b, "N", 1); return;
    case ZN_PY_BOOL: pw(b, v->i ? "\x88" : "\x89", 1); return;
    case ZN_PY_INT: {
        unsigned char x[10] = {0x8a, 8};
        for (int i = 0; i < 8; i++) x[2 + i] = (unsigned char)((unsigned long long)v->i >> (8 * i));
        pw(b, x, 10);
        return;
    }
    case ZN_PY_FLOAT: {
        uint64_t u;
        memcpy(&u, &v->f, 8);
        unsigned char x[9] = {'G'};
        for (int i = 0; i < 8; i++) x[1 + i] = (unsigned char)(u >> (56 - 8 * i));
        pw(b, x, 9);
        return;
    }
    case ZN_PY_STR:
    case ZN_PY_BYTES:
        pw_len(b, v->kind == ZN_PY_STR ? "X" : "B", v->len);
        pw(b, v->s, v->len);
        return;
    case ZN_PY_GLOBAL: {
        const char *sp = strchr(v->s, ' ');
        pw(b, "c", 1);
        pw(b, v->s, (size_t)(sp - v->s));
        pw(b, "\n", 1);
        pw(b, sp + 1, strlen(sp + 1));
        pw(b, "\n", 1);
        return;
    }
    case ZN_PY_PERSID: py_write(b, v->item[0]); pw(b, "Q", 1); return;
    case ZN_PY_CALL:
        py_write(b, v->item[0]);
        py_write(b, v->item[1]);
        pw(b, "R", 1);
        if (v->n == 3 && v->item[2]) { py_write(b, v->item[2]); pw(b, "b", 1); }
        return;
    case ZN_PY_LIST:
    case ZN_PY_TUPLE:
    case ZN_PY_DICT:
        pw(b, v->kind == ZN_PY_LIST ? "](" : v->kind == ZN_PY_TUPLE ? "(" : "}(", v->kind == ZN_PY_TUPLE ? 1 : 2);
        for (int i = 0; i < v->n; i++) py_write(b, v->item[i]);
        pw(b, v->kind == ZN_PY_LIST ? "e" : v->kind == ZN_PY_TUPLE ? "t" : "u", 1);
        return;
    }
}

/* Rewrites file (a torch.save file) with its pickle's root passed through
 * edit first; every other entry is kept. */
static void edit_pt(const char *file, void (*edit)(ZnPy *root)) {
    ZnPt f;
    ZnErr err = {0};
    assert_int_equal(zn_pt_open(&f, file, &err), 0);
    edit(f.root);
    ZnBytes pk = {0};
    pw(&pk, "\x80\x02", 2);
    py_write(&pk, f.root);
    pw(&pk, ".", 1);
    assert_false(pk.failed);
    ZnZipW z;
    assert_int_equal(zn_zipw_open(&z, file, &err), 0);
    for (int i = 0; i < f.zip.n; i++) {
        const ZnZipEntry *e = &f.zip.e[i];
        const size_t nl = strlen(e->name);
        unsigned char *buf = malloc(e->size + 1);
        assert_int_equal(zn_zip_read(&f.zip, e, 0, buf, e->size, &err), 0);
        const int is_pkl = nl > 9 && !strcmp(e->name + nl - 9, "/data.pkl");
        ZnZipPart part = is_pkl ? (ZnZipPart){pk.p, pk.n} : (ZnZipPart){buf, e->size};
        assert_int_equal(zn_zipw_add(&z, e->name, &part, 1, &err), 0);
        free(buf);
    }
    assert_int_equal(zn_zipw_commit(&z, &err), 0);
    free(pk.p);
    zn_pt_close(&f);
}

/* d's value slot for key, or fails the test */
static ZnPy **slot(ZnPy *d, const char *key) {
    for (int k = 0; d && d->kind == ZN_PY_DICT && k + 1 < d->n; k += 2)
        if (d->item[k]->kind == ZN_PY_STR && !strcmp(d->item[k]->s, key)) return &d->item[k + 1];
    fail_msg("no key '%s'", key);
    return NULL;
}
/* removes key from d */
static void drop(ZnPy *d, const char *key) {
    ZnPy **v = slot(d, key);
    const int k = (int)(v - d->item) - 1;
    memmove(d->item + k, d->item + k + 2, (size_t)(d->n - k - 2) * sizeof *d->item);
    d->n -= 2;
}

static ZnPy NAME_FROZEN = {.kind = ZN_PY_STR, .s = "frozen.weight", .len = 13};
static ZnPy INT7 = {.kind = ZN_PY_INT, .i = 7}, NEG = {.kind = ZN_PY_INT, .i = -1}, NONE = {.kind = ZN_PY_NONE};
static ZnPy BIG = {.kind = ZN_PY_INT, .i = (1 << 20) + 1}, EMPTY_LIST = {.kind = ZN_PY_LIST};
static ZnPy *OSD(ZnPy *root) { return *slot(root, "optimizer_state_dict"); }

static void no_shared(ZnPy *r) { drop(r, "shared_params"); }
static void shared_int(ZnPy *r) { *slot(r, "shared_params") = &INT7; }
static void buffers_int(ZnPy *r) { *slot(r, "buffer_names") = &INT7; }
static void no_param_shapes(ZnPy *r) { drop(r, "param_shapes"); }
static void shapes_empty(ZnPy *r) { *slot(r, "param_shapes") = &EMPTY_LIST; }
static void shapes_group_int(ZnPy *r) { (*slot(r, "param_shapes"))->item[1] = &INT7; }
static void shape_none(ZnPy *r) { (*slot(r, "param_shapes"))->item[0]->item[1] = &NONE; }
static void no_osd(ZnPy *r) { drop(r, "optimizer_state_dict"); }
static void stage_7(ZnPy *r) { *slot(OSD(r), "zero_stage") = &INT7; }
static void count_neg(ZnPy *r) { (*slot(OSD(r), "partition_count"))->item[0] = &NEG; }
static void count_none(ZnPy *r) { *slot(OSD(r), "partition_count") = &NONE; }
static void count_big(ZnPy *r) { *slot(OSD(r), "partition_count") = &BIG; }
static void no_flat(ZnPy *r) { drop(OSD(r), "single_partition_of_fp32_groups"); }
static void flat_one_group(ZnPy *r) { (*slot(OSD(r), "single_partition_of_fp32_groups"))->n = 1; }
static void no_meta(ZnPy *r) {
    static const char *const KEYS[] = {"global_steps", "global_samples", "skipped_steps", "ds_version", "lr_scheduler"};
    for (size_t k = 0; k < ZT_LEN(KEYS); k++) drop(r, KEYS[k]);
}
static void no_scaler(ZnPy *r) {
    drop(OSD(r), "dynamic_loss_scale");
    drop(OSD(r), "loss_scaler");
}
static void pad_int(ZnPy *r) { *slot(OSD(r), "param_alignment_paddings") = &INT7; }
static void pad_none(ZnPy *r) { *slot(OSD(r), "param_alignment_paddings") = &NONE; }
static void pad_group_int(ZnPy *r) { (*slot(OSD(r), "param_alignment_paddings"))->item[0] = &INT7; }
static void pad_short(ZnPy *r) {   /* group 1 (the two biases) given group 0's one count */
    ZnPy *p = *slot(OSD(r), "param_alignment_paddings");
    p->item[1] = p->item[0];
}
static void pad_long(ZnPy *r) {   /* group 0 (one weight) given group 1's two counts */
    ZnPy *p = *slot(OSD(r), "param_alignment_paddings");
    p->item[0] = p->item[1];
}
static ZnPy INT99 = {.kind = ZN_PY_INT, .i = 99};
static ZnPy SHAPE99 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT99}, .n = 1};
/* param_shapes' first parameter (a torch.Size call) made (99,) */
static void shape_99(ZnPy *r) { (*slot(r, "param_shapes"))->item[0]->item[1]->item[1]->item[0] = &SHAPE99; }
static ZnPy *moments(ZnPy *r, int g) {
    ZnPy *st = *slot(*slot(OSD(r), "base_optimizer_state"), "state");
    for (int k = 0; k < st->n; k += 2)
        if (st->item[k]->i == g) return st->item[k + 1];
    fail_msg("no state of group %d", g);
    return NULL;
}
static void no_exp_avg(ZnPy *r) { drop(moments(r, 0), "exp_avg"); }
static void exp_avg_short(ZnPy *r) { *slot(moments(r, 0), "exp_avg") = *slot(moments(r, 1), "exp_avg"); }
static void flat_swapped(ZnPy *r) {
    ZnPy *l = *slot(OSD(r), "single_partition_of_fp32_groups"), *t = l->item[0];
    l->item[0] = l->item[1];
    l->item[1] = t;
}

static ZnPy INT2 = {.kind = ZN_PY_INT, .i = 2}, INT14 = {.kind = ZN_PY_INT, .i = 14}, INT3 = {.kind = ZN_PY_INT, .i = 3};
static ZnPy SHAPE_2x7 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT2, &(ZnPy){.kind = ZN_PY_INT, .i = 7}}, .n = 2};
static ZnPy STRIDE_7x1 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&(ZnPy){.kind = ZN_PY_INT, .i = 7},
                                                                 &(ZnPy){.kind = ZN_PY_INT, .i = 1}}, .n = 2};
static ZnPy COUNTS_3 = {.kind = ZN_PY_LIST, .item = (ZnPy *[]){&INT3, &INT3}, .n = 2};
static ZnPy FROZEN = {.kind = ZN_PY_DICT, .item = (ZnPy *[]){&NAME_FROZEN, &NONE}, .n = 2};
/* rank 0's group-0 partition (14 float32) viewed as 2 x 7 */
static void flat_2d(ZnPy *r) {
    ZnPy *t = (*slot(OSD(r), "single_partition_of_fp32_groups"))->item[0];
    t->item[1]->item[2] = &SHAPE_2x7;
    t->item[1]->item[3] = &STRIDE_7x1;
}
static void flat_int(ZnPy *r) { (*slot(OSD(r), "single_partition_of_fp32_groups"))->item[0] = &INT7; }
static void exp_avg_int(ZnPy *r) { *slot(moments(r, 0), "exp_avg") = &INT7; }
static void no_step(ZnPy *r) { drop(moments(r, 0), "step"); }
static void version_int(ZnPy *r) { *slot(r, "ds_version") = &INT7; }
static void shared_value_int(ZnPy *r) { (*slot(r, "shared_params"))->item[1] = &INT7; }
static void frozen_one(ZnPy *r) { *slot(r, "frozen_param_shapes") = &FROZEN; }
static void stage_plain(ZnPy *r) { *slot(OSD(r), "zero_stage") = &INT2; }
static void count_plain(ZnPy *r) { *slot(OSD(r), "partition_count") = &INT2; }
static void counts_3(ZnPy *r) { *slot(OSD(r), "partition_count") = &COUNTS_3; }
static void scale_int(ZnPy *r) {
    ZnPy *ls = *slot(OSD(r), "loss_scaler");
    assert_int_equal(ls->kind, ZN_PY_CALL);
    *slot(ls->item[2], "cur_scale") = &INT14;
}

static void version_unknown(const ZnDsCkpt *ck) { assert_string_equal(ck->ds_version, "?"); }
static void one_frozen(const ZnDsCkpt *ck) { assert_int_equal(ck->nfrozen, 1); }
static void stage2_world2(const ZnDsCkpt *ck) {
    assert_int_equal(ck->stage, 2);
    assert_int_equal(ck->world, 2);
}
static void no_adam_step(const ZnDsCkpt *ck) {
    assert_int_equal(ck->adam_step, -1);
    assert_true(zn_ds_has_state(ck, ZN_DS_EXP_AVG));
}
static void scale_14(const ZnDsCkpt *ck) { assert_true(ck->cur_scale == 14.0); }

/* stage 3 (z3): group 0 is the weight's 13 elements a rank, group 1 the biases' 3 + 3 */
static void flat3_swapped(ZnPy *r) {
    ZnPy *l = *slot(OSD(r), "fp32_flat_groups"), *t = l->item[0];
    l->item[0] = l->item[1];
    l->item[1] = t;
}
static ZnPy *moments3(ZnPy *r, int g) {
    ZnPy *st = *slot(*slot(OSD(r), "optimizer_state_dict"), "state");
    for (int k = 0; k < st->n; k += 2)
        if (st->item[k]->i == g) return st->item[k + 1];
    fail_msg("no state of group %d", g);
    return NULL;
}
static void exp_avg3_short(ZnPy *r) { *slot(moments3(r, 0), "exp_avg") = *slot(moments3(r, 1), "exp_avg"); }

static void meta_defaults(const ZnDsCkpt *ck) {
    assert_int_equal(ck->global_steps, -1);
    assert_int_equal(ck->global_samples, -1);
    assert_int_equal(ck->skipped_steps, -1);
    assert_string_equal(ck->ds_version, "?");
    assert_int_equal(ck->sched_t, -2);   /* no scheduler: global_steps - 1 */
    assert_string_equal(ck->lr_scheduler, "<null>");
}
static void scaler_defaults(const ZnDsCkpt *ck) {
    assert_int_equal(ck->dynamic_scale, 0);
    assert_true(ck->cur_scale == 1.0);
    assert_int_equal(ck->scaler_cur_iter, -1);
    assert_int_equal(ck->scaler_hysteresis, -1);
}
static void no_shared_names(const ZnDsCkpt *ck) { assert_int_equal(ck->nshared, 0); }
static void opens(const ZnDsCkpt *ck) { assert_int_equal(ck->nparams, 3); }
static void no_moments(const ZnDsCkpt *ck) {
    assert_false(zn_ds_has_state(ck, ZN_DS_EXP_AVG));
    assert_false(zn_ds_has_state(ck, ZN_DS_EXP_AVG_SQ));
    assert_true(zn_ds_has_state(ck, ZN_DS_FP32));
}

/* ---- more shapes of a wrong value, one key at a time -------------------- */
static ZnPy INT1 = {.kind = ZN_PY_INT, .i = 1}, INT0 = {.kind = ZN_PY_INT, .i = 0};
static ZnPy INT2_40 = {.kind = ZN_PY_INT, .i = 1ll << 40};
static ZnPy SHAPE_9D = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT1, &INT1, &INT1, &INT1, &INT1, &INT1, &INT1, &INT1,
                                                               &INT1}, .n = 9};
static ZnPy SHAPE_NEG = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT3, &NEG}, .n = 2};
static ZnPy SHAPE_NONE = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&NONE}, .n = 1};
static ZnPy SHAPE_HUGE = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT2_40, &INT2_40}, .n = 2};
static ZnPy SHAPE3 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT3}, .n = 1};
static ZnPy ARGS_2 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&SHAPE3, &SHAPE3}, .n = 2};
static ZnPy STRIDE_2 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT2}, .n = 1};
static ZnPy SHAPE_7 = {.kind = ZN_PY_TUPLE, .item = (ZnPy *[]){&INT7}, .n = 1};
/* a tensor's rebuild call made a view of every other element: 7 of its 14 */
static void every_other(ZnPy *t) {
    t->item[1]->item[2] = &SHAPE_7;
    t->item[1]->item[3] = &STRIDE_2;
}
static ZnPy COUNTS_NONE = {.kind = ZN_PY_LIST, .item = (ZnPy *[]){&NONE, &INT2}, .n = 2};
/* param_shapes' first entry: its torch.Size call, or the tuple in it */
static ZnPy **first_shape(ZnPy *r) { return &(*slot(r, "param_shapes"))->item[0]->item[1]; }
static void size_2args(ZnPy *r) { (*first_shape(r))->item[1] = &ARGS_2; }
static void shape_9d(ZnPy *r) { (*first_shape(r))->item[1]->item[0] = &SHAPE_9D; }
static void shape_neg(ZnPy *r) { (*first_shape(r))->item[1]->item[0] = &SHAPE_NEG; }
static void shape_elem_none(ZnPy *r) { (*first_shape(r))->item[1]->item[0] = &SHAPE_NONE; }
static void shape_huge(ZnPy *r) { (*first_shape(r))->item[1]->item[0] = &SHAPE_HUGE; }
static void shape_name_int(ZnPy *r) { (*slot(r, "param_shapes"))->item[0]->item[0] = &INT7; }
static void stage_2args(ZnPy *r) { (*slot(OSD(r), "zero_stage"))->item[1] = &ARGS_2; }
static void count_item_none(ZnPy *r) { *slot(OSD(r), "partition_count") = &COUNTS_NONE; }
static void count_zero(ZnPy *r) { *slot(OSD(r), "partition_count") = &INT0; }
static void scaler_none(ZnPy *r) { *slot(OSD(r), "loss_scaler") = &NONE; }
static void module_none(ZnPy *r) { *slot(r, "module") = &NONE; }
static void flat_strided(ZnPy *r) { every_other((*slot(OSD(r), "single_partition_of_fp32_groups"))->item[0]); }
static void exp_avg_strided(ZnPy *r) { every_other(*slot(moments(r, 0), "exp_avg")); }
static void no_exp_avg_sq(ZnPy *r) { drop(moments(r, 0), "exp_avg_sq"); }
static void state_none(ZnPy *r) { *slot(*slot(OSD(r), "base_optimizer_state"), "state") = &NONE; }
static void state_keys_str(ZnPy *r) {
    ZnPy *st = *slot(*slot(OSD(r), "base_optimizer_state"), "state");
    for (int k = 0; k < st->n; k += 2) st->item[k] = &NAME_FROZEN;
}
static void pad_neg(ZnPy *r) { (*slot(OSD(r), "param_alignment_paddings"))->item[0]->item[0] = &NEG; }
static void pad_count_none(ZnPy *r) { (*slot(OSD(r), "param_alignment_paddings"))->item[1]->item[1] = &NONE; }
static ZnPy BOOL_TRUE = {.kind = ZN_PY_BOOL, .i = 1};
/* the scaler a call with no BUILD state, the flag an integer, the step a bool */
static void scaler_bare(ZnPy *r) {
    (*slot(OSD(r), "loss_scaler"))->n = 2;
    *slot(OSD(r), "dynamic_loss_scale") = &INT7;
}
static void steps_bool(ZnPy *r) {
    *slot(r, "global_steps") = &BOOL_TRUE;
    *slot(r, "frozen_param_shapes") = &NONE;
}
static void bare_scaler(const ZnDsCkpt *ck) {
    assert_int_equal(ck->dynamic_scale, 0);
    assert_true(ck->cur_scale == 1.0);
    assert_int_equal(ck->scaler_hysteresis, -1);
}
static void steps_1(const ZnDsCkpt *ck) {
    assert_int_equal(ck->global_steps, 1);
    assert_int_equal(ck->nfrozen, 0);
}
/* no moments kept: asking for them is the caller's error, named */
static void moments_absent(const ZnDsCkpt *ck) {
    no_moments(ck);
    float x[5];
    ZnErr err = {0};
    assert_int_equal(zn_ds_read_state(ck, ZN_DS_EXP_AVG_SQ, 0, x, &err), ZN_E_INTERNAL);
    char want[600];
    snprintf(want, sizeof want, "%s: no optimizer state 2", ck->path);
    assert_string_equal(err.msg, want);
}
/* a DynamicLossScaler's counters added to the scaler's state */
static ZnPy K_ITER = {.kind = ZN_PY_STR, .s = "cur_iter", .len = 8};
static ZnPy K_OVERFLOW = {.kind = ZN_PY_STR, .s = "last_overflow_iter", .len = 18};
static ZnPy K_HYST = {.kind = ZN_PY_STR, .s = "cur_hysteresis", .len = 14};
static void scaler_counters(ZnPy *r) {
    static ZnPy *items[32];
    static ZnPy st = {.kind = ZN_PY_DICT, .item = items};
    ZnPy *ls = *slot(OSD(r), "loss_scaler");
    assert_true(ls->kind == ZN_PY_CALL && ls->n == 3 && ls->item[2]->n + 6 <= 32);
    st.n = ls->item[2]->n;
    memcpy(items, ls->item[2]->item, (size_t)st.n * sizeof *items);
    ZnPy *add[] = {&K_ITER, &INT3, &K_OVERFLOW, &NEG, &K_HYST, &INT2};
    memcpy(items + st.n, add, sizeof add);
    st.n += 6;
    ls->item[2] = &st;
}
static void counters_read(const ZnDsCkpt *ck) {
    assert_int_equal(ck->scaler_cur_iter, 3);
    assert_int_equal(ck->scaler_last_overflow, -1);
    assert_int_equal(ck->scaler_hysteresis, 2);
}
static void unscaled(const ZnDsCkpt *ck) {
    assert_true(ck->cur_scale == 1.0);
    assert_int_equal(ck->scaler_cur_iter, -1);
    assert_int_equal(ck->scaler_last_overflow, -1);
    assert_int_equal(ck->nparams, 3);
}
static void module_f32(const ZnDsCkpt *ck) { assert_int_equal(ck->module_type, ZN_PT_F32); }

/* One file of a copy of z2 edited, and what opening the copy gives. */
typedef struct {
    const char *file;
    void (*edit)(ZnPy *);
    const char *want;   /* NULL: opens, and check holds */
    void (*check)(const ZnDsCkpt *);
} EditCase;

/* each case on a fresh copy of z2 in d: ZN_E_CORRUPT naming d and want, or opened and checked */
static void edited_z2(const char *d, const EditCase *cases, size_t n) {
    char file[512];
    for (size_t k = 0; k < n; k++) {
        copy_fixture("z2", d);
        snprintf(file, sizeof file, "%s/%s", d, cases[k].file);
        edit_pt(file, cases[k].edit);
        ZnDsCkpt ck;
        ZnErr err = {0};
        const int rc = zn_ds_open(&ck, d, &err);
        if (!cases[k].want) {
            if (rc) fail_msg("case %zu: %s", k, err.msg);
            cases[k].check(&ck);
            zn_ds_close(&ck);
            continue;
        }
        if (rc != ZN_E_CORRUPT) fail_msg("case %zu: rc %d (%s), wanted '%s'", k, rc, err.msg, cases[k].want);
        if (!strstr(err.msg, d) || !strstr(err.msg, cases[k].want)) fail_msg("case %zu: '%s'", k, err.msg);
    }
}

/* spec: Z-DSCK-005 a model-states or optimizer file that is a torch.save
 * file but not what DeepSpeed writes: refused naming the file and the key */
static void test_edited_files(void **state) {
    (void)state;
    static const EditCase CASES[] = {
        {"mp_rank_00_model_states.pt", no_shared, NULL, no_shared_names},
        {"mp_rank_00_model_states.pt", no_meta, NULL, meta_defaults},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_scaler, NULL, scaler_defaults},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_none, NULL, opens},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_exp_avg, NULL, no_moments},
        {"mp_rank_00_model_states.pt", version_int, NULL, version_unknown},
        {"mp_rank_00_model_states.pt", frozen_one, NULL, one_frozen},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", stage_plain, NULL, stage2_world2},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", count_plain, NULL, stage2_world2},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_step, NULL, no_adam_step},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", scale_int, NULL, scale_14},
        {"mp_rank_00_model_states.pt", shared_value_int,
         "mp_rank_00_model_states.pt: shared_params holds a name that is not a string"},
        {"zero_pp_rank_1_mp_rank_00_optim_states.pt", counts_3,
         "zero_pp_rank_1_mp_rank_00_optim_states.pt: stage 2 of 3 ranks, rank 0's file stage 2 of 2"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", flat_2d, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.single_partition_of_fp32_groups[0] is float32 with 2 dimensions; DeepSpeed writes a "
         "flat float32 vector"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", flat_int, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.single_partition_of_fp32_groups[0]: expected a tensor"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", exp_avg_int, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer state 0 'exp_avg': expected a tensor"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_int,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: param_alignment_paddings is not a list of 2 groups"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_group_int,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: param_alignment_paddings[0] has no count for parameter 0"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_short,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: param_alignment_paddings[1] has no count for parameter 1"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_long,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: param_alignment_paddings[0] has 2 counts for 1 parameters"},
        {"mp_rank_00_model_states.pt", shape_99, "zero_pp_rank_0_mp_rank_00_optim_states.pt: group 0: its parameters "
         "take 99 elements, the ranks' partitions hold 25: param_shapes and the partitions disagree"},
        {"zero_pp_rank_1_mp_rank_00_optim_states.pt", no_exp_avg, "zero_pp_rank_1_mp_rank_00_optim_states.pt: "
         "optimizer state of group 0 has no 'exp_avg' where rank 0's group 0 has one"},
        /* group 0's 25 elements padded to 28 (a multiple of 2W): 14 a rank, rank 1's fp32 slice saved as 11;
         * group 1's 10 padded to 12: 6 a rank */
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", exp_avg_short, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer state 0 'exp_avg' is float32 of 6 elements; the fp32 partition has 14 float32"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", flat_swapped, "zero_pp_rank_1_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.single_partition_of_fp32_groups[0] holds 11 elements, rank 0's 6: the partitions disagree"},
        {"mp_rank_00_model_states.pt", shared_int, "mp_rank_00_model_states.pt: shared_params is not a dict"},
        {"mp_rank_00_model_states.pt", buffers_int, "mp_rank_00_model_states.pt: buffer_names is not a list"},
        {"mp_rank_00_model_states.pt", no_param_shapes,
         "mp_rank_00_model_states.pt: no 'buffer_names' or 'param_shapes': not a DeepSpeed model-states file"},
        {"mp_rank_00_model_states.pt", shapes_empty, "mp_rank_00_model_states.pt: param_shapes is not a list of groups"},
        {"mp_rank_00_model_states.pt", shapes_group_int, "mp_rank_00_model_states.pt: param_shapes[1] is not a dict"},
        {"mp_rank_00_model_states.pt", shape_none,
         "mp_rank_00_model_states.pt: param_shapes[0] entry 0 is not name: torch.Size"},
        {"zero_pp_rank_1_mp_rank_00_optim_states.pt", no_osd,
         "zero_pp_rank_1_mp_rank_00_optim_states.pt: no 'optimizer_state_dict': not a DeepSpeed optimizer file"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", stage_7, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.zero_stage is not 1, 2 or 3: zinc reads ZeRO checkpoints"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", count_neg,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: partition_count[0] is not a count"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", count_none,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: optimizer_state_dict.partition_count is not a count"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", count_big,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: partition_count 1048577 is past zinc's limit"},
        {"zero_pp_rank_1_mp_rank_00_optim_states.pt", no_flat,
         "zero_pp_rank_1_mp_rank_00_optim_states.pt: no list optimizer_state_dict.single_partition_of_fp32_groups"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", flat_one_group, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "single_partition_of_fp32_groups has 1 groups, param_shapes 2"},
        {"zero_pp_rank_1_mp_rank_00_optim_states.pt", flat_one_group, "zero_pp_rank_1_mp_rank_00_optim_states.pt: "
         "single_partition_of_fp32_groups has 1 groups, rank 0's file 2: partitions of different runs"},
        /* each key zinc reads holding a value of another shape: refused naming
         * the file and the key, or (a key zinc can do without) read as absent */
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", scaler_none, NULL, unscaled},
        {"mp_rank_00_model_states.pt", module_none, NULL, module_f32},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", state_none, NULL, moments_absent},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", scaler_bare, NULL, bare_scaler},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", scaler_counters, NULL, counters_read},
        {"mp_rank_00_model_states.pt", steps_bool, NULL, steps_1},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", state_keys_str, NULL, no_moments},
        {"mp_rank_00_model_states.pt", size_2args, "mp_rank_00_model_states.pt: param_shapes[0] entry 0 is not name: "
         "torch.Size"},
        {"mp_rank_00_model_states.pt", shape_9d, "param_shapes[0] entry 0 is not name: torch.Size"},
        {"mp_rank_00_model_states.pt", shape_neg, "param_shapes[0] entry 0 is not name: torch.Size"},
        {"mp_rank_00_model_states.pt", shape_elem_none, "param_shapes[0] entry 0 is not name: torch.Size"},
        {"mp_rank_00_model_states.pt", shape_huge, "param_shapes[0] entry 0 is not name: torch.Size"},
        {"mp_rank_00_model_states.pt", shape_name_int, "param_shapes[0] entry 0 is not name: torch.Size"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", stage_2args, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.zero_stage is not 1, 2 or 3"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", count_item_none,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: partition_count[0] is not a count"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", count_zero,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: optimizer_state_dict.partition_count is not a count"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", flat_strided, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.single_partition_of_fp32_groups[0] is float32 (strided) with 1 dimensions; DeepSpeed writes a "
         "flat float32 vector"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", exp_avg_strided, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer state 0 'exp_avg' is float32 (strided) of 7 elements; the fp32 partition has 14 float32"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_exp_avg_sq, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer state of group 0 has no 'exp_avg_sq' where rank 0's group 0 has one"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_neg,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: param_alignment_paddings[0] has no count for parameter 0"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", pad_count_none,
         "zero_pp_rank_0_mp_rank_00_optim_states.pt: param_alignment_paddings[1] has no count for parameter 1"},
    };
    const char *d = zt_path("edit");
    char file[512];
    edited_z2(d, CASES, ZT_LEN(CASES));
    /* stage 3: every rank's partitions whole, its moments as long */
    static const struct {
        const char *file;
        void (*edit)(ZnPy *);
        const char *want;
    } Z3[] = {
        {"zero_pp_rank_1_mp_rank_00_optim_states.pt", flat3_swapped, "zero_pp_rank_1_mp_rank_00_optim_states.pt: "
         "optimizer_state_dict.fp32_flat_groups[0] holds 6 elements, rank 0's 13: the partitions disagree"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", exp_avg3_short, "zero_pp_rank_0_mp_rank_00_optim_states.pt: "
         "optimizer state 0 'exp_avg' is float32 of 6 elements; the fp32 partition has 13 float32"},
    };
    for (size_t k = 0; k < ZT_LEN(Z3); k++) {
        copy_fixture("z3", d);
        snprintf(file, sizeof file, "%s/%s", d, Z3[k].file);
        edit_pt(file, Z3[k].edit);
        refused(d, 0, Z3[k].want);
    }
    /* stage 3: each parameter takes ceil(numel / W) of every rank's partition,
     * 13 + 3 + 3 = 19; with the weight 99 long, 50 + 3 + 3 */
    copy_fixture("z3", d);
    snprintf(file, sizeof file, "%s/zero_pp_rank_0_mp_rank_00_model_states.pt", d);
    edit_pt(file, shape_99);
    refused(d, 0, "zero_pp_rank_0_mp_rank_00_optim_states.pt: the parameters take 56 elements of every rank's "
                  "partition, which holds 19: param_shapes and the partitions disagree");
}

static void no_module(ZnPy *r) { drop(r, "module"); }
static void module_no_bias(ZnPy *r) { drop(*slot(r, "module"), "layers.0.bias"); }
static void module_weight_is_bias(ZnPy *r) {
    ZnPy *m = *slot(r, "module");
    *slot(m, "layers.0.weight") = *slot(m, "layers.0.bias");
}
static void module_weight_int(ZnPy *r) { *slot(*slot(r, "module"), "layers.0.weight") = &INT7; }
static ZnPy BUF_NAME = {.kind = ZN_PY_STR, .s = "running_mean", .len = 12};
static ZnPy ONE_BUFFER = {.kind = ZN_PY_LIST, .item = (ZnPy *[]){&BUF_NAME}, .n = 1};
static void one_buffer(ZnPy *r) { *slot(r, "buffer_names") = &ONE_BUFFER; }

/* spec: Z-DSCK-005 what `ckpt inspect` checks beyond opening: the module's
 * tensors against param_shapes; consolidate refuses buffers */
static void test_edited_describe(void **state) {
    (void)state;
    static const struct {
        void (*edit)(ZnPy *);
        const char *want;
    } CASES[] = {
        {no_module, "mp_rank_00_model_states.pt: no 'module' dict"},
        {module_no_bias, "mp_rank_00_model_states.pt: module['layers.0.bias'] is missing; param_shapes lists it"},
        {module_weight_is_bias, "mp_rank_00_model_states.pt: module['layers.0.weight'] has 1 dimensions (first 5), "
                                "param_shapes says 2 (first 5)"},
        {module_weight_int, "mp_rank_00_model_states.pt: module['layers.0.weight']: expected a tensor"},
    };
    const char *d = zt_path("edit");
    char file[512], text[4096];
    for (size_t k = 0; k < ZT_LEN(CASES); k++) {
        copy_fixture("z2", d);
        snprintf(file, sizeof file, "%s/mp_rank_00_model_states.pt", d);
        edit_pt(file, CASES[k].edit);
        refused(d, 1, CASES[k].want);
    }
    copy_fixture("z2", d);
    edit_pt(file, one_buffer);
    ZnDsCkpt ck;
    ZnErr err = {0};
    assert_int_equal(zn_ds_open(&ck, d, &err), 0);
    assert_int_equal(ck.nbuffers, 1);
    int n;
    long long elements;
    const char *out = zt_path("buf.safetensors");
    assert_int_equal(zn_ds_consolidate(&ck, out, ZN_F32, 0, &n, &elements, &err), ZN_E_USAGE);
    char want[600];
    snprintf(want, sizeof want, "%s: 0 frozen parameters and 1 buffers: zinc consolidates trainable parameters only", d);
    assert_string_equal(err.msg, want);
    assert_false(zt_file_exists(out));
    zn_ds_close(&ck);
    assert_int_equal(describe(d, text, sizeof text, &err), 0);
    assert_str_contains(text, "0 frozen; 1 buffers");
    /* no shared names, no Adam moments: the lines say so */
    copy_fixture("z2", d);
    edit_pt(file, no_shared);
    snprintf(file, sizeof file, "%s/zero_pp_rank_0_mp_rank_00_optim_states.pt", d);
    edit_pt(file, no_exp_avg);
    assert_int_equal(describe(d, text, sizeof text, &err), 0);
    assert_str_contains(text, "  3 parameters, 35 elements; 0 shared; 0 frozen; 0 buffers\n");
    assert_str_contains(text, "  3 files: every entry's CRC-32, the shapes, the partitions of 2 ranks, the fp32 masters "
                              "finite: ok\n");
}

/* spec: Z-DSCK-005 a folder refused part-way through opening closes what
 * it opened and nothing else: descriptor 0 (any descriptor the process
 * holds) is left open, and no file stays open */
static void test_refusal_closes_only_its_files(void **state) {
    (void)state;
    if (fcntl(0, F_GETFD) < 0) assert_int_equal(open("/dev/null", O_RDONLY), 0);
    const char *d = zt_path("fds");
    char p[512];
    struct {
        const char *fix, *file;
        void (*edit)(ZnPy *);   /* NULL: the file removed */
    } CASES[] = {
        {"z3", "zero_pp_rank_1_mp_rank_00_model_states.pt", NULL},   /* model[1] never opened */
        {"z2", "zero_pp_rank_1_mp_rank_00_optim_states.pt", NULL},    /* optim[1] never opened */
        {"z2", "zero_pp_rank_0_mp_rank_00_optim_states.pt", stage_7}, /* optim[0] opened, then refused */
    };
    for (size_t k = 0; k < ZT_LEN(CASES); k++) {
        copy_fixture(CASES[k].fix, d);
        snprintf(p, sizeof p, "%s/%s", d, CASES[k].file);
        if (CASES[k].edit) edit_pt(p, CASES[k].edit);
        else assert_int_equal(unlink(p), 0);
        if (k == 1) assert_int_equal(mkdir(p, 0755), 0);   /* rank 1's name kept by a folder, so that the count agrees */
        const int before = open("/dev/null", O_RDONLY);   /* the lowest free descriptor */
        assert_true(before > 0);
        close(before);
        ZnDsCkpt ck;
        ZnErr err = {0};
        assert_int_not_equal(zn_ds_open(&ck, d, &err), 0);
        if (fcntl(0, F_GETFD) < 0) fail_msg("%s: refusing the folder closed descriptor 0 (%s)", CASES[k].file, err.msg);
        const int after = open("/dev/null", O_RDONLY);
        close(after);
        if (after != before) fail_msg("%s: refusing the folder left descriptor %d open (%s)", CASES[k].file, before, err.msg);
    }
}

static void param_int(ZnPy *r) { *slot(r, "param") = &INT7; }
static void param_short(ZnPy *r) { (*slot(r, "param"))->item[1]->item[2] = &SHAPE3; }
static void param_bare(ZnPy *r) { drop(r, "param"); }

/* spec: Z-DSCK-005 optimizer files under names DeepSpeed does not give */
static void test_optim_file_names(void **state) {
    (void)state;
    const char *d = zt_path("badnames");
    static const char *const NAMES[] = {"zero_pp_rank_-1_mp_rank_00_optim_states.pt",
                                        "bf16_zero_pp_rank_x_mp_rank_00_optim_states.pt",
                                        "zero_pp_rank_1_mp_rank_00x_optim_states.pt"};
    char p[600], want[800];
    for (size_t k = 0; k < ZT_LEN(NAMES); k++) {
        copy_fixture("z2", d);
        snprintf(p, sizeof p, "%s/%s", d, NAMES[k]);
        zt_write_text(p, "");
        snprintf(want, sizeof want, "%s/%s: not a name DeepSpeed gives a data-parallel optimizer file", d, NAMES[k]);
        refused(d, 0, want);
    }
}

/* spec: Z-DSCK-008 a universal folder's state file that does not hold the
 * parameter's tensor: refused naming the file when the state is read */
static void test_edited_universal(void **state) {
    (void)state;
    static const struct {
        void (*edit)(ZnPy *);
        const char *want;
    } CASES[] = {
        {param_int, "zero/layers.0.bias/fp32.pt: 'param': expected a tensor"},
        {param_bare, "zero/layers.0.bias/fp32.pt: 'param': expected a tensor"},
        {param_short, "zero/layers.0.bias/fp32.pt: 'param' is float32 of 3 elements; 'layers.0.bias' has 5 float32"},
    };
    const char *d = zt_path("uedit");
    char cmd[600], file[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r " DSCK "z2-universal/global_step2_universal %s", d, d);
    snprintf(file, sizeof file, "%s/zero/layers.0.bias/fp32.pt", d);
    for (size_t k = 0; k < ZT_LEN(CASES); k++) {
        assert_int_equal(system(cmd), 0);
        edit_pt(file, CASES[k].edit);
        ZnDsCkpt ck;
        ZnErr err = {0};
        assert_int_equal(zn_ds_open(&ck, d, &err), 0);   /* the state files are read as they are needed */
        const int i = zn_ds_find(&ck, "layers.0.bias");
        assert_true(i >= 0);
        assert_int_equal(zn_ds_rank_of(&ck, i, 4), 0);   /* one file holds a parameter's whole state */
        float x[5];
        assert_int_equal(zn_ds_read_state(&ck, ZN_DS_FP32, i, x, &err), ZN_E_CORRUPT);
        assert_str_contains(err.msg, d);
        assert_str_contains(err.msg, CASES[k].want);
        zn_ds_close(&ck);
    }
}

/* spec: Z-DSCK-004 what names a folder: its `latest` (a name, trimmed of
 * line ends and spaces, without '/'), or the folder itself */
static void test_folder_names(void **state) {
    (void)state;
    const char *d = zt_path("names");
    char p[512], cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp -r " DSCK "z2/global_step2 %s/", d, d, d);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/latest", d);
    static const struct { const char *text; int folder; } LATEST[] = {
        {"global_step2", 1}, {"global_step2\r\n ", 1}, {"", 0}, {" \n", 0}, {"x/global_step2", 0}, {"nope", 0}};
    for (size_t k = 0; k < ZT_LEN(LATEST); k++) {
        zt_write_text(p, LATEST[k].text);
        if (zn_ds_is_folder(d) != LATEST[k].folder) fail_msg("latest '%s': is_folder %d", LATEST[k].text, !LATEST[k].folder);
    }
    unlink(p);
    /* latest_universal names only a universal folder */
    snprintf(p, sizeof p, "%s/latest_universal", d);
    zt_write_text(p, "global_step2");
    assert_false(zn_ds_is_folder(d));
    unlink(p);
    /* no optimizer files, or no folder at all */
    ZnDsCkpt ck;
    ZnErr err = {0};
    char want[600];
    assert_int_equal(zn_ds_open(&ck, d, &err), ZN_E_CORRUPT);
    snprintf(want, sizeof want, "%s: no *_optim_states.pt files: not a DeepSpeed ZeRO checkpoint", d);
    assert_string_equal(err.msg, want);
    snprintf(p, sizeof p, "%s/none", d);
    assert_false(zn_ds_is_folder(p));
    assert_int_equal(zn_ds_open(&ck, p, &err), ZN_E_IO);
    snprintf(want, sizeof want, "%s: cannot open the folder (No such file or directory)", p);
    assert_string_equal(err.msg, want);
    /* a bare name (no '/'): the message names it as given */
    assert_int_equal(zn_ds_open(&ck, "zn-no-such-folder", &err), ZN_E_IO);
    assert_string_equal(err.msg, "zn-no-such-folder: cannot open the folder (No such file or directory)");
}

/* spec: Z-DSCK-005 */
static void test_finite_over_own_elements(void **state) {
    (void)state;
    /* z3: rank 1's partition of group 1 is layers.0.bias[3..4], padding,
     * layers.1.bias[3..4], padding (5 = 3 + 2 on each) */
    const char *d = zt_path("nan");
    char text[4096];
    ZnErr err = {0};
    copy_fixture("z3", d);
    poke(d, 1, 1, 2, NAN);   /* padding: never read, as zero_to_fp32 never reads it */
    poke(d, 1, 1, 5, INFINITY);
    assert_int_equal(describe(d, text, sizeof text, &err), 0);
    poke(d, 1, 1, 4, NAN);   /* layers.1.bias element 4 */
    assert_int_equal(describe(d, text, sizeof text, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "parameter 'layers.1.bias' element 4: the fp32 master is nan (in rank 1's file "
                                 "zero_pp_rank_1_mp_rank_00_optim_states.pt)");
}

static const char CFG32[] = "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\", "
                            "\"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}}}";
static const char CFG16[] = "{\"train_micro_batch_size_per_gpu\": 1, \"optimizer\": {\"type\": \"AdamW\", "
                            "\"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}}, \"bf16\": {\"enabled\": true}}";

typedef struct {
    const char *dir;
    ZnConfig cfg;
    ZnModel model;
    ZnData data;
    const char *want;   /* expected.safetensors */
    int bf16;   /* the model's dtype (gather_params returns the fp32 masters whatever it is) */
} Resume;

/* Every rank loads the DeepSpeed folder; rank 0 holds the gathered
 * weights and moments to DeepSpeed's own, by name. */
static int resume_rank(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    Resume *c = arg;
    const long n = zn_model_numel(&c->model);
    ZnDevice dev;
    ZnEngine E;
    int rc = zt_host_engine(&E, &dev, &c->cfg, &c->model, &c->data, comm, NULL, err);
    if (rc) return rc;
    float *w = malloc((size_t)n * 4), *m = malloc((size_t)n * 4), *v = malloc((size_t)n * 4);
    rc = zn_ckpt_load(&E, c->dir, NULL, 0, err);
    if (!rc) rc = zn_engine_gather_params(&E, w, err);
    if (!rc) rc = zn_engine_gather_moments(&E, m, v, err);
    if (!rc && rank == 0) {
        ZnEngineState st;
        zn_engine_get_state(&E, &st);
        assert_int_equal(st.global_step, 2);
        assert_int_equal(st.opt_step, 2);
        assert_int_equal(st.global_samples, 8);
        ZnStFile *f;
        assert_int_equal(zn_st_open(&f, c->want, err), 0);
        for (int p = 0; p < E.L.nparams; p++) {
            const ZnParamSpec *ps = &E.L.params[p];
            const long off = E.L.model_offset[p];
            static const char *const KIND[3] = {"", "/exp_avg", "/exp_avg_sq"};
            const float *got[3] = {w + off, m + off, v + off};
            for (int k = 0; k < 3; k++) {
                char name[128];
                float x[64];
                snprintf(name, sizeof name, "%s%s", ps->name, KIND[k]);
                const ZnStTensor *t = zn_st_find(f, name);
                assert_non_null(t);
                assert_int_equal(t->numel, ps->numel);
                assert_int_equal(zn_st_read(f, t, x, t->end - t->begin, err), 0);
                assert_memory_equal(x, got[k], (size_t)ps->numel * 4);
            }
        }
        zn_st_close(f);
    }
    ZN_FREE_ALL(w, m, v);
    zn_engine_free(&E);
    return rc;
}

/* spec: Z-DSCK-007 */
static void test_resume_any_world_and_stage(void **state) {
    (void)state;
    static const int WS[][2] = {{1, 0}, {2, 3}, {3, 1}, {4, 2}};
    for (size_t k = 0; k < sizeof FIX / sizeof *FIX; k++) {
        char dir[256], want[256];
        snprintf(dir, sizeof dir, DSCK "%s", FIX[k].name);
        snprintf(want, sizeof want, DSCK "%s/expected.safetensors", FIX[k].name);
        for (size_t i = 0; i < sizeof WS / sizeof *WS; i++) {
            Resume c;
            ZnErr err = {0};
            memset(&c, 0, sizeof c);
            c.dir = dir;
            c.want = want;
            c.bf16 = FIX[k].bf16;
            assert_int_equal(zn_model_parse("mlp:5,5,5,tie:1=0", &c.model, &err), 0);
            assert_int_equal(zn_data_init(&c.data, 5, 5, 1234), 0);
            ZnConfigArgs args = zt_args(WS[i][0], WS[i][1], -1, -1, -1);
            zt_config(&c.cfg, c.bf16 ? CFG16 : CFG32, &args);
            if (zt_sim_run(WS[i][0], resume_rank, &c, 60, &err))
                fail_msg("%s at world %d stage %d: %s", FIX[k].name, WS[i][0], WS[i][1], err.msg);
            zn_data_free(&c.data);
        }
    }
    /* another model, another dtype: refused naming what differs */
    Resume c;
    ZnErr err = {0};
    memset(&c, 0, sizeof c);
    c.dir = DSCK "z2";
    assert_int_equal(zn_model_parse("mlp:5,6,5", &c.model, &err), 0);
    assert_int_equal(zn_data_init(&c.data, 5, 5, 1234), 0);
    ZnConfigArgs args = zt_args(1, 1, -1, -1, -1);
    zt_config(&c.cfg, CFG32, &args);
    assert_int_equal(zt_sim_run(1, resume_rank, &c, 60, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "the checkpoint holds 3 parameters, this model has 4");
    assert_int_equal(zn_model_parse("mlp:5,5,5", &c.model, &err), 0);
    assert_int_equal(zt_sim_run(1, resume_rank, &c, 60, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "the checkpoint holds 3 parameters, this model has 4");
    zt_config(&c.cfg, CFG16, &args);
    assert_int_equal(zn_model_parse("mlp:5,5,5,tie:1=0", &c.model, &err), 0);
    assert_int_equal(zt_sim_run(1, resume_rank, &c, 60, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "saved with model dtype fp32, resuming with bf16");
    zn_data_free(&c.data);
}

static ZnPy NAME_X = {.kind = ZN_PY_STR, .s = "x", .len = 1};
static void rename_bias(ZnPy *r) { (*slot(r, "param_shapes"))->item[1]->item[0] = &NAME_X; }

/* spec: Z-DSCK-007 a folder that is not this run's, or lacks what a resume
 * needs: refused naming it */
static void test_resume_refusals(void **state) {
    (void)state;
    Resume c;
    ZnErr err = {0};
    memset(&c, 0, sizeof c);
    ZnConfigArgs args = zt_args(1, 1, -1, -1, -1);
    zt_config(&c.cfg, CFG32, &args);
    /* the same names, another width: mlp:6,6,6's first weight is 6 x 6 */
    c.dir = DSCK "z2";
    assert_int_equal(zn_model_parse("mlp:6,6,6,tie:1=0", &c.model, &err), 0);
    assert_int_equal(zn_data_init(&c.data, 6, 6, 1234), 0);
    assert_int_equal(zt_sim_run(1, resume_rank, &c, 60, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "tests/data/dsck/z2/global_step2: parameter 'layers.0.weight' has 2 dimensions (first 5) "
                                 "in the checkpoint, 2 (first 6) in this model");
    zn_data_free(&c.data);
    assert_int_equal(zn_model_parse("mlp:5,5,5,tie:1=0", &c.model, &err), 0);
    assert_int_equal(zn_data_init(&c.data, 5, 5, 1234), 0);
    static const struct {
        const char *file;
        void (*edit)(ZnPy *);
        int rc;
        const char *want;
    } CASES[] = {
        {"mp_rank_00_model_states.pt", rename_bias, ZN_E_USAGE,
         "this model's parameter 'layers.0.bias' is not in the checkpoint (its first is 'layers.0.weight')"},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_exp_avg, ZN_E_USAGE,
         "no Adam state (exp_avg, exp_avg_sq, step): zinc resumes Adam and AdamW"},
        {"mp_rank_00_model_states.pt", no_meta, ZN_E_CORRUPT,
         "global_steps, global_samples or skipped_steps missing from "},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_step, ZN_E_USAGE,
         "no Adam state (exp_avg, exp_avg_sq, step): zinc resumes Adam and AdamW"},
        /* no scaler saved, or one with a dynamic scaler's counters: the run resumes to z2's state */
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", no_scaler, ZN_OK, NULL},
        {"zero_pp_rank_0_mp_rank_00_optim_states.pt", scaler_counters, ZN_OK, NULL},
    };
    const char *d = zt_path("redit");
    char file[512];
    c.want = DSCK "z2/expected.safetensors";
    for (size_t k = 0; k < ZT_LEN(CASES); k++) {
        copy_fixture("z2", d);
        snprintf(file, sizeof file, "%s/%s", d, CASES[k].file);
        edit_pt(file, CASES[k].edit);
        c.dir = d;
        assert_int_equal(zt_sim_run(1, resume_rank, &c, 60, &err), CASES[k].rc);
        if (!CASES[k].want) continue;
        assert_str_contains(err.msg, d);
        assert_str_contains(err.msg, CASES[k].want);
    }
    zn_data_free(&c.data);
}

/* spec: Z-DSCK-008 */
static void test_universal(void **state) {
    (void)state;
    ZnDsCkpt ck;
    ZnErr err = {0};
    assert_true(zn_ds_is_folder(DSCK "z2-universal"));   /* through latest_universal */
    assert_int_equal(zn_ds_open(&ck, DSCK "z2-universal", &err), 0);
    assert_true(ck.universal);
    assert_int_equal(ck.stage, 2);
    assert_int_equal(ck.saved_world, 2);
    assert_int_equal(ck.nparams, 3);
    assert_int_equal(ck.adam_step, 2);
    assert_string_equal(ck.tag, "global_step2_universal");
    int n;
    long long elements;
    const char *out = zt_path("u.safetensors");
    assert_int_equal(zn_ds_consolidate(&ck, out, ZN_F32, 0, &n, &elements, &err), 0);
    assert_int_equal(n, 4);
    same_tensors(DSCK "z2/expected.safetensors", out, ZN_F32, 4);   /* the same bits as the folder it came from */
    zn_ds_close(&ck);
    char text[4096];
    assert_int_equal(describe(DSCK "z2-universal", text, sizeof text, &err), 0);
    assert_str_contains(text, "DeepSpeed universal checkpoint tests/data/dsck/z2-universal/global_step2_universal");
    assert_str_contains(text, "ZeRO stage 2, saved by world size 2");
    assert_str_contains(text, "zero/: 3 parameters' fp32, exp_avg and exp_avg_sq files");
    /* resumed at another world and stage: masters and moments DeepSpeed's */
    Resume c;
    memset(&c, 0, sizeof c);
    c.dir = DSCK "z2-universal";
    c.want = DSCK "z2/expected.safetensors";
    assert_int_equal(zn_model_parse("mlp:5,5,5,tie:1=0", &c.model, &err), 0);
    assert_int_equal(zn_data_init(&c.data, 5, 5, 1234), 0);
    ZnConfigArgs args = zt_args(3, 3, -1, -1, -1);
    zt_config(&c.cfg, CFG32, &args);
    if (zt_sim_run(3, resume_rank, &c, 60, &err)) fail_msg("%s", err.msg);
    zn_data_free(&c.data);
    /* a state file missing, or a bit of a tensor flipped: refused naming the file */
    const char *d = zt_path("udmg");
    char cmd[512], p[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r " DSCK "z2-universal/global_step2_universal %s", d, d);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/zero/layers.0.bias/exp_avg.pt", d);
    assert_int_equal(unlink(p), 0);
    assert_int_not_equal(describe(d, text, sizeof text, &err), 0);
    assert_str_contains(err.msg, "zero/layers.0.bias/exp_avg.pt: missing");
    /* the first parameter's step.pt: absent, the step is unknown; present
     * but not a torch.save file, refused naming it */
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/zero/layers.0.weight/step.pt", d);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(zn_ds_open(&ck, d, &err), 0);
    assert_int_equal(ck.adam_step, -1);
    zn_ds_close(&ck);
    zt_write_text(p, "PK");
    assert_int_equal(zn_ds_open(&ck, d, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "zero/layers.0.weight/step.pt: ");
    assert_str_contains(err.msg, d);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof p, "%s/zero/layers.0.weight/fp32.pt", d);
    ZnPt f;
    assert_int_equal(zn_pt_open(&f, p, &err), 0);
    ZnPtTensor t;
    assert_int_equal(zn_pt_tensor(&f, zn_py_get(f.root, "param"), "param", &t, &err), 0);
    const uint64_t at = t.storage->offset + 4 * 7;
    zn_pt_close(&f);
    size_t len;
    char *b = zt_slurp(fopen(p, "rb"), &len);
    b[at] ^= 0x01;
    zt_write_bytes(p, b, len);
    free(b);
    assert_int_equal(describe(d, text, sizeof text, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "zero/layers.0.weight/fp32.pt: entry ");
    assert_str_contains(err.msg, "has CRC-32");
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

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_torch_tensors),
    cmocka_unit_test(test_torch_records),
    cmocka_unit_test(test_layouts),
    cmocka_unit_test(test_consolidate_as_zero_to_fp32),
    cmocka_unit_test(test_inspect),
    cmocka_unit_test(test_damaged_folders),
    cmocka_unit_test(test_edited_files),
    cmocka_unit_test(test_optim_file_names),
    cmocka_unit_test(test_folder_names),
    cmocka_unit_test(test_edited_universal),
    cmocka_unit_test(test_refusal_closes_only_its_files),
    cmocka_unit_test(test_edited_describe),
    cmocka_unit_test(test_finite_over_own_elements),
    cmocka_unit_test(test_resume_any_world_and_stage),
    cmocka_unit_test(test_resume_refusals),
    cmocka_unit_test(test_universal),
    cmocka_unit_test(test_every_byte))
