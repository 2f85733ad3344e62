/* test_safetensors.c: the checkpoint file layer (spec Z-FILE-*, Z-ST-*).
 *
 *  - fileio: atomic replacement, the fault hook, I/O faults at every op of a
 *    multi-file save, and forked "power cuts" at every op of the same save;
 *  - safetensors writer: byte-for-byte against the reference implementation's
 *    own test vectors (safetensors/src/tensor.rs tests) and a hand-built file;
 *  - safetensors reader: one test per validation rule, then truncation at
 *    every offset, byte flips over the whole header, and a random fuzz loop,
 *    none of which may crash (run under ASan and valgrind). */
#include "testutil.h"
#include "core/fileio.h"
#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

static char g_dir[256];     /* a fresh temporary directory per test */
static char g_path[512];    /* g_dir/t.safetensors, the file rule tests write */

static int setup(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/zn_st_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/t.safetensors", g_dir);
    zn_fault_set(0, 0, 0);
    return 0;
}
static int teardown(void **state) {
    (void)state;
    zn_fault_set(0, 0, 0);
    zt_rm_rf(g_dir);
    return 0;
}

static char *join(const char *dir, const char *name) {   /* static buffer ring */
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

/* plain (non-atomic, uncounted) file access for the tests themselves */
static void put_file(const char *path, const void *p, size_t n) {
    /* unlink first: ext4 flushes a file truncated and rewritten in place at
     * close (auto_da_alloc), which made the fuzz loops 10x slower */
    unlink(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}
static unsigned char *get_file(const char *path, size_t *n) {   /* NULL if absent */
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    return (unsigned char *)zt_slurp(f, n);
}
static int exists(const char *path) { return access(path, F_OK) == 0; }

/* the header length g_path's first 8 bytes give (little-endian); *size
   gets the file's size */
static uint64_t header_len(size_t *size) {
    unsigned char *b = get_file(g_path, size);
    assert_non_null(b);
    assert_true(*size >= 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
    free(b);
    return hl;
}

/* names in dir that contain ".tmp." (temporaries) */
static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}
static void remove_temps(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) unlink(join(dir, e->d_name));
    closedir(d);
}

/* A safetensors file from a header text (not padded) and ndata data bytes. */
static size_t build_raw(unsigned char *out, size_t cap, const char *json, size_t hlen, size_t ndata) {
    assert_true(8 + hlen + ndata <= cap);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(out + 8, json, hlen);
    for (size_t i = 0; i < ndata; i++) out[8 + hlen + i] = (unsigned char)(i * 7 + 1);
    return 8 + hlen + ndata;
}
static void put_st(const char *json, size_t ndata) {
    static unsigned char buf[1 << 16];
    size_t n = build_raw(buf, sizeof buf, json, strlen(json), ndata);
    put_file(g_path, buf, n);
}

/* opens g_path, expecting ZN_E_CORRUPT with a message naming the file and
 * containing `needle` */
static void expect_corrupt(const char *needle) {
    ZnStFile *f = (ZnStFile *)0x1;
    ZnErr err = {0};
    int rc = zn_st_open(&f, g_path, &err);
    if (rc != ZN_E_CORRUPT) fail_msg("rc %d (%s), expected ZN_E_CORRUPT containing '%s'", rc, err.msg, needle);
    assert_null(f);
    assert_str_contains(err.msg, g_path);
    assert_str_contains(err.msg, needle);
}
static void expect_corrupt_json(const char *json, size_t ndata, const char *needle) {
    put_st(json, ndata);
    expect_corrupt(needle);
}
/* A header, or the part of one a check writes into it, that must not open,
 * and a part of the message. A run of these in a test is a table written in
 * place and checked in order: corrupt_table({text, needle}, ...) for whole
 * headers with no data bytes, ZT_CASES(CorruptCase, check, ...) for the
 * others. The headers differ, the check does not. */
typedef struct { const char *text, *needle; } CorruptCase;
static void corrupt_case(const CorruptCase *t) { expect_corrupt_json(t->text, 0, t->needle); }
#define corrupt_table(...) ZT_CASES(CorruptCase, corrupt_case, __VA_ARGS__)
static ZnStFile *expect_open(void) {
    ZnStFile *f = NULL;
    ZnErr err = {0};
    int rc = zn_st_open(&f, g_path, &err);
    if (rc) fail_msg("zn_st_open: rc %d: %s", rc, err.msg);
    return f;
}

/* Everything a successful open promises (Z-ST-016, Z-ST-017, Z-ST-020). */
static void check_consistent(const ZnStFile *f, size_t file_size, uint64_t header_len) {
    uint64_t pos = 0;
    for (int i = 0; i < zn_st_count(f); i++) {
        const ZnStTensor *t = zn_st_tensor(f, i);
        assert_true(t->begin == pos && t->end >= t->begin);
        assert_true(t->end - t->begin == t->numel * zn_dtype_size(t->dtype));
        assert_true(t->ndim >= 0 && t->ndim <= ZN_ST_MAX_DIMS);
        assert_ptr_equal(zn_st_find(f, t->name), t);
        size_t nb = (size_t)(t->end - t->begin);
        void *dst = malloc(nb ? nb : 1);
        ZnErr err = {0};
        assert_int_equal(zn_st_read(f, t, dst, nb, &err), ZN_OK);
        free(dst);
        pos = t->end;
    }
    assert_true(8 + header_len + pos == file_size);
    for (int i = 0; i < zn_st_meta_count(f); i++) {
        const char *v, *k = zn_st_meta_at(f, i, &v);
        assert_ptr_equal(zn_st_meta(f, k), v);
    }
}

static uint64_t rng_next(uint64_t *s) {   /* xorshift64*: fixed seeds, repeatable */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* ---- writer: golden bytes ------------------------------------------------ */

/* The reference's own vectors (safetensors/src/tensor.rs: test_serialization,
 * test_serialization_forced_alignement, test_empty). */
/* spec: Z-ST-001 */
/* spec: Z-ST-002 */
static void test_golden_reference_vectors(void **state) {
    (void)state;
    const float v[6] = {0, 1, 2, 3, 4, 5};
    ZnErr err = {0};
    struct { const char *name; int ndim; int64_t shape[4]; const char *header; } cases[] = {
        {"attn.0", 3, {1, 2, 3}, "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}"},
        {"attn0", 4, {1, 1, 2, 3}, "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       "},
    };
    for (int c = 0; c < 2; c++) {
        ZnStEntry e = {.name = cases[c].name, .dtype = ZN_F32, .ndim = cases[c].ndim, .data = v};
        memcpy(e.shape, cases[c].shape, sizeof cases[c].shape);
        assert_int_equal(zn_st_write(g_path, &e, 1, NULL, &err), ZN_OK);
        size_t n;
        unsigned char *got = get_file(g_path, &n);
        size_t hl = strlen(cases[c].header);
        assert_int_equal(hl % 8, 0);
        assert_int_equal(n, 8 + hl + 24);
        unsigned char len8[8] = {(unsigned char)hl, 0, 0, 0, 0, 0, 0, 0};   /* 64 and 72 */
        assert_memory_equal(got, len8, 8);
        assert_memory_equal(got + 8, cases[c].header, hl);
        const unsigned char data[24] = {0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
        assert_memory_equal(got + 8 + hl, data, 24);
        free(got);
    }
    /* no tensors: "{}" padded to 8; with metadata {"framework": "pt"}: 40 */
    const char *meta[] = {"framework", "pt", NULL};
    const unsigned char empty[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    assert_int_equal(zn_st_write(g_path, NULL, 0, NULL, &err), ZN_OK);
    size_t n;
    unsigned char *got = get_file(g_path, &n);
    assert_int_equal(n, 16);
    assert_memory_equal(got, empty, 16);
    free(got);
    assert_int_equal(zn_st_write(g_path, NULL, 0, meta, &err), ZN_OK);
    got = get_file(g_path, &n);
    const char *mh = "{\"__metadata__\":{\"framework\":\"pt\"}}     ";
    assert_int_equal(n, 48);
    assert_int_equal(got[0], 40);
    assert_memory_equal(got + 8, mh, 40);
    free(got);
    ZnStFile *f = expect_open();
    assert_int_equal(zn_st_count(f), 0);
    assert_string_equal(zn_st_meta(f, "framework"), "pt");
    zn_st_close(f);
}

/* the tiny mixed file pinned byte for byte; entries given out of order */
static const char MIXED_HEADER[] =
    "{\"__metadata__\":{\"step\":\"7\",\"zr_format\":\"1\"},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[8,10]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[10,16]},"
    "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]},"
    "\"u\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[19,19]}}"
    "      ";   /* 370 bytes of JSON + 6 spaces = 376 = 47 * 8 */
static const unsigned char MIXED_DATA[19] = {
    0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0,   /* w: 1.0f, -2.0f */
    0xC0, 0x3F,                                       /* b: bf16 1.5 */
    0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B,               /* h: f16 1, -2, 65504 */
    0x01, 0x02, 0x03,                                 /* c */
};

static int write_mixed(const char *path, ZnErr *err) {
    static const float w[2] = {1.0f, -2.0f};
    static const uint16_t b = 0x3FC0, h[3] = {0x3C00, 0xC000, 0x7BFF};
    static const uint8_t c[3] = {1, 2, 3};
    ZnStEntry e[6] = {
        {.name = "u", .dtype = ZN_U8, .ndim = 1, .shape = {0}, .data = NULL},
        {.name = "h", .dtype = ZN_F16, .ndim = 1, .shape = {3}, .data = h},
        {.name = "z", .dtype = ZN_F32, .ndim = 2, .shape = {0, 3}, .data = NULL},
        {.name = "c", .dtype = ZN_U8, .ndim = 1, .shape = {3}, .data = c},
        {.name = "b", .dtype = ZN_BF16, .ndim = 0, .data = &b},
        {.name = "w", .dtype = ZN_F32, .ndim = 1, .shape = {2}, .data = w},
    };
    const char *meta[] = {"zr_format", "1", "step", "7", NULL};
    return zn_st_write(path, e, 6, meta, err);
}

/* spec: Z-ST-002 */
/* spec: Z-ST-003 */
static void test_golden_mixed(void **state) {
    (void)state;
    ZnErr err = {0};
    assert_int_equal(write_mixed(g_path, &err), ZN_OK);
    size_t n, hl = strlen(MIXED_HEADER);
    assert_int_equal(hl, 376);
    unsigned char *got = get_file(g_path, &n);
    assert_int_equal(n, 8 + 376 + 19);
    const unsigned char len8[8] = {0x78, 0x01, 0, 0, 0, 0, 0, 0};   /* 376, little-endian */
    assert_memory_equal(got, len8, 8);
    assert_memory_equal(got + 8, MIXED_HEADER, hl);
    assert_memory_equal(got + 8 + hl, MIXED_DATA, 19);
    free(got);

    ZnStFile *f = expect_open();
    assert_int_equal(zn_st_count(f), 6);
    const char *order[6] = {"w", "z", "b", "h", "c", "u"};   /* by offset, then name */
    for (int i = 0; i < 6; i++) assert_string_equal(zn_st_tensor(f, i)->name, order[i]);
    assert_null(zn_st_tensor(f, 6));
    assert_null(zn_st_tensor(f, -1));
    const ZnStTensor *b = zn_st_find(f, "b");
    assert_int_equal(b->dtype, ZN_BF16);
    assert_int_equal(b->ndim, 0);
    assert_int_equal(b->numel, 1);   /* a scalar holds one element */
    uint16_t bv;
    assert_int_equal(zn_st_read(f, b, &bv, 2, &err), ZN_OK);
    assert_int_equal(bv, 0x3FC0);
    const ZnStTensor *z = zn_st_find(f, "z");
    assert_int_equal(z->numel, 0);
    assert_int_equal(z->ndim, 2);
    assert_int_equal(z->shape[1], 3);
    assert_int_equal(zn_st_read(f, z, NULL, 0, &err), ZN_OK);
    uint16_t hv[3];
    assert_int_equal(zn_st_read(f, zn_st_find(f, "h"), hv, 6, &err), ZN_OK);
    assert_int_equal(hv[2], 0x7BFF);
    float wv[2];
    assert_int_equal(zn_st_read(f, zn_st_find(f, "w"), wv, 8, &err), ZN_OK);
    assert_true(zt_same_bits(wv[1], -2.0f));
    assert_int_equal(zn_st_meta_count(f), 2);
    const char *v;
    assert_string_equal(zn_st_meta_at(f, 0, &v), "step");
    assert_string_equal(v, "7");
    assert_string_equal(zn_st_meta(f, "zr_format"), "1");
    assert_null(zn_st_meta(f, "nope"));
    assert_null(zn_st_meta_at(f, 2, &v));
    assert_null(zn_st_find(f, "nope"));
    assert_string_equal(zn_st_path(f), g_path);
    check_consistent(f, 8 + 376 + 19, 376);
    zn_st_close(f);
}

/* F64 and U64 sort first (widest alignment); names are JSON-escaped the way
 * serde_json does it and come back unchanged */
/* spec: Z-ST-002 */
/* spec: Z-ST-003 */
static void test_wide_dtypes_and_escapes(void **state) {
    (void)state;
    const double d[2] = {0.5, -1e300};
    const uint64_t u[1] = {0x0102030405060708ull};
    const uint8_t c[1] = {9};
    /* quote, backslash, newline, 0x01, tab, CR, BS, FF, e-acute */
    const char *odd = "q\"b\\n\n\x01\t\r\b\f\xc3\xa9";
    ZnStEntry e[3] = {
        {.name = odd, .dtype = ZN_U8, .ndim = 1, .shape = {1}, .data = c},
        {.name = "d", .dtype = ZN_F64, .ndim = 1, .shape = {2}, .data = d},
        {.name = "s", .dtype = ZN_U64, .ndim = 0, .data = u},
    };
    ZnErr err = {0};
    assert_int_equal(zn_st_write(g_path, e, 3, NULL, &err), ZN_OK);
    size_t n;
    unsigned char *got = get_file(g_path, &n);
    const char *want = "{\"s\":{\"dtype\":\"U64\",\"shape\":[],\"data_offsets\":[0,8]},"
                       "\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]},"
                       "\"q\\\"b\\\\n\\n\\u0001\\t\\r\\b\\f\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[24,25]}}";
    assert_memory_equal(got + 8, want, strlen(want));
    assert_int_equal(got[0] % 8, 0);
    const unsigned char u_le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    assert_memory_equal(got + 8 + got[0], u_le, 8);
    free(got);
    ZnStFile *f = expect_open();
    const ZnStTensor *t = zn_st_find(f, odd);
    assert_non_null(t);
    assert_int_equal(t->begin, 24);
    assert_int_equal(zn_st_find(f, "d")->dtype, ZN_F64);
    double dv[2];
    assert_int_equal(zn_st_read(f, zn_st_find(f, "d"), dv, 16, &err), ZN_OK);
    assert_memory_equal(dv, d, 16);
    zn_st_close(f);
}

/* spec: Z-ST-020 */
static void test_roundtrip_many(void **state) {
    (void)state;
    enum { N = 300 };
    static ZnStEntry e[N];
    static char names[N][32];
    static unsigned char data[N][64];
    const ZnDtype dts[6] = {ZN_F32, ZN_F16, ZN_BF16, ZN_U8, ZN_F64, ZN_U64};
    uint64_t s = 42;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "layers.%d.w%llu", i, (unsigned long long)(rng_next(&s) % 1000));
        e[i].name = names[i];
        e[i].dtype = dts[rng_next(&s) % 6];
        e[i].ndim = (int)(rng_next(&s) % 4);
        size_t numel = 1;
        for (int d = 0; d < e[i].ndim; d++) {
            e[i].shape[d] = (int64_t)(rng_next(&s) % 3);
            numel *= (size_t)e[i].shape[d];
        }
        for (size_t k = 0; k < numel * zn_dtype_size(e[i].dtype); k++) data[i][k] = (unsigned char)rng_next(&s);
        e[i].data = data[i];
    }
    const char *meta[] = {"zr_format", "1", "world", "4", "rank", "1", "step", "1200", "a", "", NULL};
    ZnErr err = {0};
    assert_int_equal(zn_st_write(g_path, e, N, meta, &err), ZN_OK);
    ZnStFile *f = expect_open();
    assert_int_equal(zn_st_count(f), N);
    size_t fsz;
    uint64_t hl = header_len(&fsz);
    check_consistent(f, fsz, hl);
    for (int i = 0; i < N; i++) {
        const ZnStTensor *t = zn_st_find(f, names[i]);
        assert_non_null(t);
        assert_int_equal(t->dtype, e[i].dtype);
        assert_int_equal(t->ndim, e[i].ndim);
        for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], e[i].shape[d]);
        unsigned char buf[64];
        size_t nb = (size_t)(t->end - t->begin);
        assert_int_equal(zn_st_read(f, t, buf, nb, &err), ZN_OK);
        assert_memory_equal(buf, data[i], nb);
        /* 8-aligned buffer start + sorted by alignment: every tensor aligned */
        assert_int_equal(t->begin % zn_dtype_size(t->dtype), 0);
    }
    assert_string_equal(zn_st_meta(f, "step"), "1200");
    assert_string_equal(zn_st_meta(f, "a"), "");
    const char *prev = "";
    for (int i = 0; i < zn_st_meta_count(f); i++) {   /* sorted by key */
        const char *k = zn_st_meta_at(f, i, NULL);
        assert_true(strcmp(prev, k) < 0 || i == 0);
        prev = k;
    }
    zn_st_close(f);
}

/* spec: Z-ST-004 */
static void test_write_rejects(void **state) {
    (void)state;
    const float v[4] = {0};
    ZnErr err = {0};
    struct { ZnStEntry e[2]; int n; const char *needle; } bad[] = {
        {{{.name = "a", .dtype = ZN_F32, .ndim = 1, .shape = {1}, .data = v},
          {.name = "a", .dtype = ZN_F16, .ndim = 1, .shape = {1}, .data = v}}, 2, "'a' given twice"},
        {{{.name = "__metadata__", .dtype = ZN_F32, .ndim = 0, .data = v}}, 1, "reserved"},
        {{{.name = "a\xff", .dtype = ZN_F32, .ndim = 0, .data = v}}, 1, "UTF-8"},
        {{{.name = "a\xed\xa0\x80", .dtype = ZN_F32, .ndim = 0, .data = v}}, 1, "UTF-8"},   /* a surrogate */
        {{{.name = NULL, .dtype = ZN_F32, .ndim = 0, .data = v}}, 1, "no name"},
        {{{.name = "a", .dtype = ZN_F32, .ndim = 9, .data = v}}, 1, "9 dimensions"},
        {{{.name = "a", .dtype = ZN_F32, .ndim = -1, .data = v}}, 1, "-1 dimensions"},
        {{{.name = "a", .dtype = ZN_F32, .ndim = 2, .shape = {2, -3}, .data = v}}, 1, "dimension 1 is -3"},
        {{{.name = "a", .dtype = ZN_F32, .ndim = 1, .shape = {2}, .data = NULL}}, 1, "data is NULL"},
        {{{.name = "a", .dtype = ZN_DTYPE_N, .ndim = 0, .data = v}}, 1, "no safetensors name"},
        {{{.name = "a", .dtype = ZN_U8, .ndim = 3, .shape = {1 << 20, 1 << 20, 1 << 20}, .data = v}}, 1, "2^53 bytes"},
        {{{.name = "a", .dtype = ZN_U8, .ndim = 2, .shape = {(int64_t)1 << 53, (int64_t)1 << 53}, .data = v}}, 1,
         "too many elements"},
        {{{.name = "a", .dtype = ZN_U8, .ndim = 1, .shape = {((int64_t)1 << 53) + 1}, .data = v}}, 1,
         "tensor 'a': dimension 0 is 9007199254740993"},
        /* 2^52 and 3 * 2^51 bytes, each under 2^53, together 2^53 + 2^51: checked as the offsets add up */
        {{{.name = "a", .dtype = ZN_U8, .ndim = 1, .shape = {(int64_t)1 << 52}, .data = v},
          {.name = "b", .dtype = ZN_U8, .ndim = 2, .shape = {(int64_t)1 << 51, 3}, .data = v}}, 2,
         "tensors total more than 2^53 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        int rc = zn_st_write(g_path, bad[i].e, bad[i].n, NULL, &err);
        if (rc != ZN_E_USAGE) fail_msg("case %zu: rc %d (%s)", i, rc, err.msg);
        assert_str_contains(err.msg, bad[i].needle);
        assert_str_contains(err.msg, g_path);
        assert_false(exists(g_path));   /* nothing written, not even a temporary */
        assert_int_equal(count_temps(g_dir), 0);
    }
    ZnStEntry ok = {.name = "a", .dtype = ZN_F32, .ndim = 0, .data = v};
    const char *m1[] = {"k", NULL};                       /* odd pairs */
    const char *m2[] = {"k", "1", "k", "2", NULL};        /* duplicate key */
    const char *m3[] = {"k", "\xc0\x80", NULL};           /* overlong NUL */
    const char *const *ms[3] = {m1, m2, m3};
    const char *needles[3] = {"no value", "'k' given twice", "not valid UTF-8"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(zn_st_write(g_path, &ok, 1, ms[i], &err), ZN_E_USAGE);
        assert_str_contains(err.msg, needles[i]);
        assert_false(exists(g_path));
    }
    /* past the metadata-entry limit; an empty list is no __metadata__ at all */
    const char **many = malloc(sizeof *many * (2 * (ZN_ST_MAX_META + 1) + 1));
    assert_non_null(many);
    for (int i = 0; i < 2 * (ZN_ST_MAX_META + 1); i++) many[i] = "k";
    many[2 * (ZN_ST_MAX_META + 1)] = NULL;
    assert_int_equal(zn_st_write(g_path, &ok, 1, many, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "more than 65536 metadata entries");
    assert_false(exists(g_path));
    free(many);
    const char *none[] = {NULL};
    assert_int_equal(zn_st_write(g_path, &ok, 1, none, &err), 0);
    ZnStFile *f;
    assert_int_equal(zn_st_open(&f, g_path, &err), 0);
    assert_int_equal(zn_st_meta_count(f), 0);
    zn_st_close(f);
    unlink(g_path);
    assert_int_equal(zn_st_write(g_path, &ok, -1, NULL, &err), ZN_E_USAGE);
    assert_int_equal(zn_st_write(g_path, NULL, 1, NULL, &err), ZN_E_USAGE);
    assert_int_equal(zn_st_write(g_path, &ok, ZN_ST_MAX_TENSORS + 1, NULL, &err), ZN_E_USAGE);
}

/* ---- reader: one test per rule ---------------------------------------- */

/* spec: Z-ST-005 */
static void test_file_too_small(void **state) {
    (void)state;
    const unsigned char b[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    for (size_t n = 0; n < 8; n++) {
        put_file(g_path, b, n);
        expect_corrupt("shorter than the 8-byte header length");
    }
    ZnStFile *f;
    ZnErr err = {0};
    assert_int_equal(zn_st_open(&f, join(g_dir, "absent"), &err), ZN_E_IO);   /* missing: I/O, not corrupt */
    assert_str_contains(err.msg, "absent");
    assert_int_equal(zn_st_open(&f, g_dir, &err), ZN_E_IO);                    /* a directory */
    assert_str_contains(err.msg, "not a regular file");
}

/* spec: Z-ST-006 */
static void test_header_too_large(void **state) {
    (void)state;
    uint64_t lens[3] = {100000001ull, 0xFFFFFFFFFFFFFFFFull, 1ull << 63};
    for (int i = 0; i < 3; i++) {
        unsigned char b[16];
        for (int k = 0; k < 8; k++) b[k] = (unsigned char)(lens[i] >> (8 * k));
        memcpy(b + 8, "{}      ", 8);
        put_file(g_path, b, 16);
        expect_corrupt("over the 100000000-byte limit");
    }
    /* exactly the limit is allowed by this rule; it then fails the next one */
    unsigned char b[16] = {0x00, 0xE1, 0xF5, 0x05, 0, 0, 0, 0, '{', '}'};   /* 100,000,000 */
    put_file(g_path, b, 16);
    expect_corrupt("runs past the end of the file");
}

/* spec: Z-ST-007 */
static void test_header_past_eof(void **state) {
    (void)state;
    unsigned char b[64];
    size_t n = build_raw(b, sizeof b, "{}", 2, 0);
    b[0] = 3;   /* claims 3 header bytes, the file has 2 */
    put_file(g_path, b, n);
    expect_corrupt("byte 0: header length 3 runs past the end of the file (10 bytes)");
    b[0] = 0;
    put_file(g_path, b, n);
    expect_corrupt("header length is 0");
}

/* spec: Z-ST-008 */
static void test_header_start(void **state) {
    (void)state;
    corrupt_table(
        {" {}", "must begin with '{', found byte 0x20"},
        {"\xef\xbb\xbf{}", "found byte 0xef"}, /* a UTF-8 BOM */
        {"[]", "found byte 0x5b"},
        {"\n{}", "found byte 0x0a"});
    /* trailing JSON whitespace (the padding) is fine, spaces or not */
    put_st("{}  \n\t\r ", 0);
    zn_st_close(expect_open());
}

/* What follows a tensor's name in a header of one empty U8 tensor */
#define NAME_TAIL "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}"

/* a tensor name (text: the bytes after its opening quote) that must not open */
static void bad_name(const CorruptCase *t) {
    char json[256];
    snprintf(json, sizeof json, "{\"%s" NAME_TAIL, t->text);
    expect_corrupt_json(json, 0, t->needle);
}

/* spec: Z-ST-009 */
static void test_utf8_and_control(void **state) {
    (void)state;
    ZT_CASES(CorruptCase, bad_name,
        {"a\xff", "invalid UTF-8 (byte 0xff)"},
        {"a\xc0\x80", "invalid UTF-8 (byte 0xc0)"},         /* overlong */
        {"a\xe0\x80\x80", "invalid UTF-8 (byte 0xe0)"},     /* overlong */
        {"a\xed\xa0\x80", "invalid UTF-8 (byte 0xed)"},     /* surrogate U+D800 */
        {"a\xf4\x90\x80\x80", "invalid UTF-8 (byte 0xf4)"}, /* above U+10FFFF */
        {"a\xe2\x82", "invalid UTF-8"},                     /* cut short by the quote */
        {"a\x80", "invalid UTF-8 (byte 0x80)"},             /* lone continuation */
        {"a\x01", "control character 0x01 in a string"},
        {"a\x1f", "control character 0x1f in a string"},
        {"a\\u0000b", "\\u0000 in a string"},
        {"a\\u00zz", "bad \\u escape"},
        {"a\\u00Eg", "bad \\u escape in a string"});   /* upper-case digits read, 'g' is none */
    /* the offset is reported: header byte 2 is the bad byte after "{\"a" */
    char json[256];
    snprintf(json, sizeof json, "{\"a\x01%s", NAME_TAIL);
    expect_corrupt_json(json, 0, "header byte 3 (file offset 11)");
    /* raw NUL and other control bytes between tokens (cJSON would skip them) */
    put_st("{}", 0);
    size_t n;
    unsigned char *b = get_file(g_path, &n);
    unsigned char nb[12];
    memcpy(nb, b, 9);
    nb[9] = 0;
    nb[10] = '}';
    nb[0] = 3;
    put_file(g_path, nb, 11);
    expect_corrupt("control character 0x00 outside a string");
    free(b);
    corrupt_table(
        {"{\x01}", "control character 0x01 outside a string"},
        {"{\x7f}", "control character 0x7f outside a string"},
        {"{\xc3\xa9}", "byte 0xc3 outside a string"},
        {"{\"a", "unterminated string"},
        {"{\"a\\", "unterminated string"},
        {"{\"a\\u00", "header byte 1 (file offset 9): unterminated string"});   /* a \\u escape cut off */
    /* valid: multi-byte UTF-8 in names, escapes that decode to control chars */
    snprintf(json, sizeof json, "{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\\n\\u00e9%s", NAME_TAIL);
    put_st(json, 0);
    ZnStFile *f = expect_open();
    assert_non_null(zn_st_find(f, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n\xc3\xa9"));
    zn_st_close(f);
}

/* spec: Z-ST-010 */
static void test_json_structure(void **state) {
    (void)state;
    corrupt_table(
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}", "not valid JSON"},
        {"{\"a\":1,}", "not valid JSON"},
        {"{} x", "header byte 3 (file offset 11): not valid JSON"},
        {"{}{}", "not valid JSON"},
        {"{}}", "unbalanced '}'"},
        {"{},", "',' outside the header object"},
        {"{\"a\":tru}", "not valid JSON"},
        {"{\"a\":{\"b\":[[0]]}}", "nesting deeper than 3 levels"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0,0,0,0,0,0,0,0,0],\"data_offsets\":[0,0]}}",
         "array with more than 8 elements"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":1}}", "tensor entry with more than 3 keys"});
    /* 8 dimensions are fine */
    put_st("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1);
    ZnStFile *f = expect_open();
    assert_int_equal(zn_st_tensor(f, 0)->ndim, 8);
    zn_st_close(f);

    /* more than 1<<20 tensors (and the metadata-entry limit): the byte scan
     * stops these before cJSON builds a tree */
    size_t cap = (size_t)(ZN_ST_MAX_TENSORS + 2) * 8 + 64;
    char *big = malloc(cap);
    assert_non_null(big);
    size_t k = 0;
    big[k++] = '{';
    for (long i = 0; i <= ZN_ST_MAX_TENSORS + 1; i++) k += (size_t)sprintf(big + k, "%s\"\":0", i ? "," : "");
    big[k++] = '}';
    big[k] = 0;
    unsigned char *raw = malloc(k + 8);
    assert_non_null(raw);
    build_raw(raw, k + 8, big, k, 0);
    put_file(g_path, raw, k + 8);
    expect_corrupt("more than 1048576 tensors");
    k = (size_t)sprintf(big, "{\"__metadata__\":{");
    for (long i = 0; i <= ZN_ST_MAX_META; i++) k += (size_t)sprintf(big + k, "%s\"\":\"\"", i ? "," : "");
    k += (size_t)sprintf(big + k, "}}");
    build_raw(raw, k + 8, big, k, 0);
    put_file(g_path, raw, k + 8);
    expect_corrupt("__metadata__ has more than 65536 entries");
    free(raw);
    free(big);
}

/* spec: Z-ST-011 */
static void test_duplicates(void **state) {
    (void)state;
    const char *e = "{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
    char json[512];
    snprintf(json, sizeof json, "{\"a\":%s,\"b\":%s,\"a\":%s}", e, e, e);
    expect_corrupt_json(json, 0, "tensor name 'a' appears twice");
    corrupt_table(
        {"{\"__metadata__\":{},\"__metadata__\":{}}", "key \"__metadata__\" appears twice"},
        /* spelled with an escape, so only the parsed tree shows it */
        {"{\"__metadata__\":{},\"\\u005f_metadata__\":{}}", "key '__metadata__' appears twice"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", "__metadata__ key 'k' appears twice"},
        {"{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[0]}}", "tensor 'a': key 'dtype' appears twice"});
    /* same name, one with an escape */
    snprintf(json, sizeof json, "{\"ab\":%s,\"a\\u0062\":%s}", e, e);
    expect_corrupt_json(json, 0, "tensor name 'ab' appears twice");
}

/* a header with 2 data bytes whose one entry breaks the schema */
static void bad_entry(const CorruptCase *t) { expect_corrupt_json(t->text, 2, t->needle); }

/* spec: Z-ST-012 */
static void test_entry_schema(void **state) {
    (void)state;
    ZT_CASES(CorruptCase, bad_entry,
        {"{\"a\":1}", "tensor 'a': entry must be an object, got a number"},
        {"{\"a\":[1]}", "tensor 'a': entry must be an object, got an array"},
        {"{\"a\":{\"shape\":[0],\"data_offsets\":[0,0]}}", "tensor 'a': missing 'dtype'"},
        {"{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,0]}}", "tensor 'a': missing 'shape'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0]}}", "tensor 'a': missing 'data_offsets'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"offsets\":[0,0]}}", "tensor 'a': unknown key 'offsets'"},
        {"{\"a\":{\"dtype\":4,\"shape\":[0],\"data_offsets\":[0,0]}}", "tensor 'a': dtype must be a string, got a number"},
        {"{\"a\":{\"dtype\":\"F31\",\"shape\":[0],\"data_offsets\":[0,0]}}", "tensor 'a': unknown dtype 'F31'"},
        {"{\"a\":{\"dtype\":\"f32\",\"shape\":[0],\"data_offsets\":[0,0]}}", "unknown dtype 'f32'"},
        {"{\"a\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[0,0]}}", "dtype 'I64' is valid safetensors but zinc does not support it"},
        {"{\"a\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[0,0]}}", "dtype 'BOOL' is valid safetensors"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":{},\"data_offsets\":[0,0]}}", "tensor 'a': shape must be an array, got an object"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[\"2\"],\"data_offsets\":[0,2]}}", "tensor 'a': shape[0] must be a non-negative integer, got a string"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[null],\"data_offsets\":[0,2]}}", "shape[0] must be a non-negative integer, got null"},
        {"{\"a\":null}", "entry must be an object, got null"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[true],\"data_offsets\":[0,2]}}",
         "tensor 'a': shape[0] must be a non-negative integer, got a boolean"});
    /* every supported dtype string is accepted */
    const char *ok[] = {"U8", "F16", "BF16", "F32", "F64", "U64"};
    for (int i = 0; i < 6; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"%s\",\"shape\":[],\"data_offsets\":[0,%zu]}}", ok[i],
                 zn_dtype_size(i == 0 ? ZN_U8 : i == 1 ? ZN_F16 : i == 2 ? ZN_BF16 : i == 3 ? ZN_F32 : i == 4 ? ZN_F64 : ZN_U64));
        put_st(json, i == 0 ? 1 : i < 3 ? 2 : i == 3 ? 4 : 8);
        ZnStFile *f = expect_open();
        assert_string_equal(zn_st_dtype_name(zn_st_tensor(f, 0)->dtype), ok[i]);
        zn_st_close(f);
    }
    assert_string_equal(zn_st_dtype_name(ZN_DTYPE_N), "?");
}

/* a number (text) as the shape of a tensor of one U8 byte */
static void bad_shape_number(const CorruptCase *t) {
    char json[256];
    snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"U8\",\"shape\":[%s],\"data_offsets\":[0,1]}}", t->text);
    expect_corrupt_json(json, 1, t->needle);
}

/* spec: Z-ST-013 */
static void test_integers(void **state) {
    (void)state;
    ZT_CASES(CorruptCase, bad_shape_number,
        {"1.0", "number '1.0' is not an integer written as plain digits"},
        {"1e2", "number '1e2' is not an integer"},
        {"1E2", "number '1E2' is not an integer"},
        {"01", "number '01' is not an integer"},
        {"+1", "not valid JSON"},
        {"-", "number '-' is not an integer"},
        {"9007199254740993", "number '9007199254740993' is larger than 2^53"},
        {"10000000000000000", "larger than 2^53"},
        {"-1", "shape[0] must be a non-negative integer, got a negative number"},
        {"-0", "shape[0] must be a non-negative integer, got a negative number"});
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1,
                        "tensor 'a': data_offsets must be non-negative integers");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.5]}}", 1, "'1.5' is not an integer");
    /* 2^53 itself is exact and passes this rule (the file size check then fails) */
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[9007199254740992],\"data_offsets\":[0,9007199254740992]}}", 1,
                        "the tensors end at byte 9007199254740992 of the byte buffer");
}

/* spec: Z-ST-014 */
static void test_offsets_and_shape_arrays(void **state) {
    (void)state;
    const char *needle = "tensor 'a': data_offsets must be an array of 2 integers";
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1, needle);
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}", 1, needle);
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[]}}", 1, needle);
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":\"0,1\"}}", 1, "got a string");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,\"1\"]}}", 1,
                        "data_offsets must be non-negative integers");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1, "shape must be an array, got a number");
    /* scalar shape [] holds one element */
    put_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4);
    ZnStFile *f = expect_open();
    assert_int_equal(zn_st_tensor(f, 0)->numel, 1);
    zn_st_close(f);
}

/* spec: Z-ST-015 */
static void test_sizes(void **state) {
    (void)state;
    expect_corrupt_json("{\"exp_avg\":{\"dtype\":\"F32\",\"shape\":[30],\"data_offsets\":[0,100]}}", 100,
                        "tensor 'exp_avg': data_offsets [0, 100] hold 100 bytes but F32 [30] needs 120");
    expect_corrupt_json("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,6]}}", 6,
                        "hold 6 bytes but BF16 [2, 3] needs 12");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[0,1]}}", 1,
                        "hold 1 bytes but U8 [0, 5] needs 0");
    /* 2^32 * 2^32 * 2 elements: overflow of the element count */
    corrupt_table(
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,0]}}",
         "shape [4294967296, 4294967296, 2] has more than 2^64 elements"},
        /* 2^62 elements of 4 bytes: overflow of the byte count */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,0]}}",
         "F32 [2147483648, 2147483648] is more than 2^64 bytes"},
        /* a product that wraps to exactly 0 modulo 2^64 must not pass as a 0-byte tensor */
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
         "has more than 2^64 elements"});
}

/* spec: Z-ST-016 */
static void test_offset_layout(void **state) {
    (void)state;
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", 3,
                        "tensor 'a': data_offsets [1, 3]: the first tensor must begin at 0");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", 5,
                        "tensor 'b': data_offsets [3, 5] leave a hole after tensor 'a' [0, 2]");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", 3,
                        "tensor 'b': data_offsets [1, 3] overlap tensor 'a' [0, 2]");
    /* the same bytes claimed twice */
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "overlap tensor 'a'");
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,1]}}", 2,
                        "tensor 'b': data_offsets [2, 1] end before they begin");
    /* any order in the header is fine: the reader sorts by offsets, and
     * zero-size tensors share offsets with their neighbours */
    put_st("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
           "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[2,2]},"
           "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
           "\"d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]}}", 4);
    ZnStFile *f = expect_open();
    const char *order[4] = {"a", "d", "e", "b"};
    for (int i = 0; i < 4; i++) assert_string_equal(zn_st_tensor(f, i)->name, order[i]);
    zn_st_close(f);
}

/* spec: Z-ST-017 */
static void test_file_size_exact(void **state) {
    (void)state;
    const char *j = "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}";
    size_t hl = strlen(j);
    char want[200];
    snprintf(want, sizeof want, "the file should be %zu bytes (8 + header %zu + 3), but it is %zu bytes (trailing bytes)",
             8 + hl + 3, hl, 8 + hl + 4);
    expect_corrupt_json(j, 4, want);
    snprintf(want, sizeof want, "but it is %zu bytes (truncated)", 8 + hl + 2);
    expect_corrupt_json(j, 2, want);
    expect_corrupt_json("{}", 1, "the tensors end at byte 0 of the byte buffer");
    put_st(j, 3);
    zn_st_close(expect_open());
}

/* spec: Z-ST-018 */
static void test_metadata_strings_only(void **state) {
    (void)state;
    corrupt_table(
        {"{\"__metadata__\":{\"step\":7}}", "__metadata__ value of 'step' must be a string, got a number"},
        {"{\"__metadata__\":{\"x\":{}}}", "value of 'x' must be a string, got an object"},
        {"{\"__metadata__\":{\"x\":[\"a\"]}}", "value of 'x' must be a string, got an array"},
        {"{\"__metadata__\":{\"x\":null}}", "value of 'x' must be a string, got null"},
        {"{\"__metadata__\":{\"x\":true}}", "value of 'x' must be a string, got a boolean"},
        {"{\"__metadata__\":[]}", "__metadata__ must be an object of strings, got an array"},
        {"{\"__metadata__\":\"pt\"}", "__metadata__ must be an object of strings, got a string"},
        {"{\"__metadata__\":null}", "got null"});
    /* JSON-in-a-string is how structure is carried */
    put_st("{\"__metadata__\":{\"cfg\":\"{\\\"stage\\\": 2}\"}}", 0);
    ZnStFile *f = expect_open();
    assert_string_equal(zn_st_meta(f, "cfg"), "{\"stage\": 2}");
    zn_st_close(f);
    put_st("{\"__metadata__\":{}}", 0);
    f = expect_open();
    assert_int_equal(zn_st_meta_count(f), 0);
    zn_st_close(f);
}

/* ---- reader: hostile files ---------------------------------------------- */

/* The valid file the hostile-file tests start from: write_mixed's output,
 * read back whole. The caller frees it; *n is its size. */
static unsigned char *mixed_bytes(size_t *n) {
    ZnErr err = {0};
    char src[600];
    snprintf(src, sizeof src, "%s/src.safetensors", g_dir);
    assert_int_equal(write_mixed(src, &err), ZN_OK);
    return get_file(src, n);
}

/* spec: Z-ST-019 */
static void test_truncation_every_offset(void **state) {
    (void)state;
    ZnErr err = {0};
    size_t n;
    unsigned char *b = mixed_bytes(&n);
    for (size_t len = 0; len < n; len++) {
        put_file(g_path, b, len);
        ZnStFile *f = NULL;
        int rc = zn_st_open(&f, g_path, &err);
        if (rc != ZN_E_CORRUPT) fail_msg("truncated at %zu of %zu: rc %d (%s)", len, n, rc, err.msg);
        assert_null(f);
        assert_str_contains(err.msg, g_path);
    }
    free(b);
}

/* spec: Z-ST-021 zn_st_open_mem over a copy of the file in memory makes the
 * same checks and gives the same tensors as zn_st_open: every truncation
 * is refused with the same message, and the whole copy reads the same bytes */
static void test_open_mem_is_open(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = mixed_bytes(&n);
    for (size_t len = 0; len <= n; len++) {
        put_file(g_path, b, len);
        ZnStFile *f = NULL, *g = NULL;
        ZnErr e1 = {0}, e2 = {0};
        int r1 = zn_st_open(&f, g_path, &e1), r2 = zn_st_open_mem(&g, g_path, b, len, &e2);
        assert_int_equal(r1, r2);
        if (r1) {
            assert_string_equal(e1.msg, e2.msg);
            continue;
        }
        assert_int_equal(len, n);   /* only the whole file opens */
        assert_int_equal(zn_st_count(f), zn_st_count(g));
        for (int i = 0; i < zn_st_count(f); i++) {
            const ZnStTensor *t = zn_st_tensor(f, i), *u = zn_st_tensor(g, i);
            assert_string_equal(t->name, u->name);
            size_t bytes = (size_t)(t->end - t->begin);
            unsigned char x[64], y[64];
            assert_true(bytes <= sizeof x);
            assert_int_equal(zn_st_read(f, t, x, bytes, &e1), 0);
            assert_int_equal(zn_st_read(g, u, y, bytes, &e2), 0);
            assert_memory_equal(x, y, bytes);
        }
        zn_st_close(f);
        zn_st_close(g);
    }
    free(b);
}

/* Opens g_path, which may or may not be valid: never a crash; a valid file
 * must keep every promise; an invalid one is ZN_E_CORRUPT. Returns 1 if valid. */
static int open_any(size_t size) {
    ZnStFile *f = NULL;
    ZnErr err = {0};
    int rc = zn_st_open(&f, g_path, &err);
    if (rc == ZN_OK) {
        size_t n;
        uint64_t hl = header_len(&n);
        check_consistent(f, size, hl);
        zn_st_close(f);
        return 1;
    }
    if (rc != ZN_E_CORRUPT) fail_msg("rc %d (%s)", rc, err.msg);
    assert_str_contains(err.msg, g_path);
    return 0;
}

/* spec: Z-ST-019 */
static void test_byte_flips(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = mixed_bytes(&n);
    unsigned char *m = malloc(n);
    assert_non_null(m);
    const unsigned char xors[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF};
    const unsigned char sets[] = {'{', '}', '[', ']', '"', ',', ':', '0', '9', '-', '\\', ' ', 0x00, 0x80, 0xC3, 'e'};
    size_t region = 8 + 376, valid = 0, total = 0;
    for (size_t i = 0; i < region; i++) {
        for (size_t k = 0; k < sizeof xors + sizeof sets; k++) {
            memcpy(m, b, n);
            m[i] = k < sizeof xors ? (unsigned char)(b[i] ^ xors[k]) : sets[k - sizeof xors];
            if (m[i] == b[i]) continue;
            put_file(g_path, m, n);
            valid += (size_t)open_any(n);
            total++;
        }
    }
    /* some flips stay valid (a letter inside a metadata value, a space in
     * the padding, a name letter), most do not */
    assert_true(valid > 0 && valid < total / 2);
    free(m);
    free(b);
}

/* spec: Z-ST-019 */
static void test_random_fuzz(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = mixed_bytes(&n);
    unsigned char m[1024];
    uint64_t s = 0x5eed;
    const char tokens[] = "{}[]\",:0123456789-.e \\u";
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = n;
        memcpy(m, b, n);
        int edits = 1 + (int)(rng_next(&s) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(rng_next(&s) % len);
            switch (rng_next(&s) % 5) {
            case 0: m[at] = (unsigned char)rng_next(&s); break;
            case 1: m[at] = (unsigned char)tokens[rng_next(&s) % (sizeof tokens - 1)]; break;
            case 2:   /* delete a byte */
                memmove(m + at, m + at + 1, len - at - 1);
                len--;
                break;
            case 3:   /* insert a token byte */
                if (len < sizeof m) {
                    memmove(m + at + 1, m + at, len - at);
                    m[at] = (unsigned char)tokens[rng_next(&s) % (sizeof tokens - 1)];
                    len++;
                }
                break;
            default:   /* rewrite the length prefix near its true value */
                m[0] = (unsigned char)(m[0] + (int)(rng_next(&s) % 17) - 8);
            }
        }
        put_file(g_path, m, len);
        open_any(len);
    }
    free(b);
}

/* Headers that lie about sizes and offsets: every claim is checked against
 * the file, never trusted to index memory. */
/* spec: Z-ST-019 */
static void test_lying_header(void **state) {
    (void)state;
    /* offsets far past the file */
    expect_corrupt_json("{\"a\":{\"dtype\":\"U8\",\"shape\":[1000000],\"data_offsets\":[0,1000000]}}", 4,
                        "the file should be");
    /* a length prefix that cuts the JSON short, or swallows data bytes */
    const char *j = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
    unsigned char raw[256];
    size_t hl = strlen(j), n = build_raw(raw, sizeof raw, j, hl, 4);
    raw[0] = (unsigned char)(hl - 10);
    put_file(g_path, raw, n);
    expect_corrupt("header byte 31 (file offset 39): unterminated string");
    raw[0] = (unsigned char)(hl + 2);
    put_file(g_path, raw, n);
    expect_corrupt("header byte");
    /* shape and offsets agree with each other, but the data is short */
    expect_corrupt_json("{\"a\":{\"dtype\":\"F64\",\"shape\":[4],\"data_offsets\":[0,32]}}", 31, "(truncated)");
    /* a file that shrinks after it was opened: reading is a clean error */
    put_st(j, 4);
    ZnStFile *f = expect_open();
    assert_int_equal(truncate(g_path, (off_t)(8 + hl + 2)), 0);
    unsigned char dst[4];
    ZnErr err = {0};
    assert_int_equal(zn_st_read(f, zn_st_find(f, "a"), dst, 4, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "file ends at byte");
    assert_str_contains(err.msg, g_path);
    zn_st_close(f);
}

/* spec: Z-ST-020 */
static void test_read_api_misuse(void **state) {
    (void)state;
    ZnErr err = {0};
    assert_int_equal(write_mixed(g_path, &err), ZN_OK);
    ZnStFile *f = expect_open(), *g = expect_open();
    const ZnStTensor *w = zn_st_find(f, "w");
    float v[3];
    assert_int_equal(zn_st_read(f, w, v, 12, &err), ZN_E_INTERNAL);   /* wrong size */
    assert_str_contains(err.msg, "tensor 'w' is 8 bytes, the destination 12");
    assert_int_equal(zn_st_read(g, w, v, 8, &err), ZN_E_INTERNAL);    /* another file's tensor */
    assert_str_contains(err.msg, "does not belong");
    ZnStTensor copy = *w;
    assert_int_equal(zn_st_read(f, &copy, v, 8, &err), ZN_E_INTERNAL);
    zn_st_close(f);
    zn_st_close(g);
    zn_st_close(NULL);
}

/* The failure an injected fault at op `at` must give: ZN_E_IO, a message
 * naming the op and the file. The fault-injection loops share it. */
static void assert_injected(int rc, const ZnErr *err, long at, const char *path) {
    assert_int_equal(rc, ZN_E_IO);
    char want[64];
    snprintf(want, sizeof want, "injected I/O fault at op %ld", at);
    assert_str_contains(err->msg, want);
    assert_str_contains(err->msg, path);
}

/* I/O faults while loading: each op of an open and a read fails cleanly in
 * turn (no leak, ZN_E_IO), until the load completes. */
/* spec: Z-ST-020 */
/* spec: Z-FILE-005 */
static void test_load_faults(void **state) {
    (void)state;
    ZnErr err = {0};
    assert_int_equal(write_mixed(g_path, &err), ZN_OK);
    for (long at = 1;; at++) {
        zn_fault_set(at, 0, 0);
        ZnStFile *f = NULL;
        uint16_t h[3];
        int rc = zn_st_open(&f, g_path, &err);
        if (!rc) {
            rc = zn_st_read(f, zn_st_find(f, "h"), h, 6, &err);
            zn_st_close(f);
        }
        long ops = zn_fault_ops();
        zn_fault_set(0, 0, 0);
        if (at > ops) {
            assert_int_equal(rc, ZN_OK);
            assert_int_equal(at, 5);   /* open, read length, read header, read data: 4 ops */
            break;
        }
        assert_injected(rc, &err, at, g_path);
    }
}

/* ---- fileio ------------------------------------------------------------- */

/* fills a tensor with its first byte's index pattern */
static int fill_seq(void *ctx, const ZnStEntry *e, void *buf, size_t bytes, ZnErr *err) {
    (void)ctx, (void)e, (void)err;
    for (size_t i = 0; i < bytes; i++) ((unsigned char *)buf)[i] = (unsigned char)(i * 7);
    return ZN_OK;
}

typedef struct { const ZnStEntry *e; int mode; } StWrite;

static int st_write_run(void *ctx, ZnErr *err) {
    const StWrite *w = ctx;
    ZnStSum sum;
    return w->mode ? zn_st_write_fill(g_path, w->e, 3, NULL, fill_seq, NULL, err)
                   : zn_st_write_sum(g_path, w->e, 3, NULL, &sum, err);
}

/* the error names the file; no temporary is left, and the file only whole */
static void st_write_left(void *ctx, long op, const ZnErr *err) {
    const StWrite *w = ctx;
    assert_str_contains(err->msg, g_path);
    assert_int_equal(count_temps(g_dir), 0);
    if (exists(g_path) && !strstr(err->msg, "renamed into place"))
        fail_msg("mode %d, I/O op %ld failing (%s) left %s", w->mode, op, err->msg, g_path);
    unlink(g_path);
}

/* spec: Z-FILE-002 the writer, with a sum and with a fill callback, with
 * each I/O operation failing in turn: ZN_E_IO naming the fault, no
 * temporary left, the path absent (or whole, when only the directory's
 * sync after the rename failed) */
static void test_write_faults(void **state) {
    (void)state;
    static unsigned char big[(5u << 20) / 2];   /* 2.5 MiB: three of the hash's 1 MiB pieces */
    for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i * 7);
    const ZnStEntry e[3] = {{.name = "big", .dtype = ZN_U8, .ndim = 1, .shape = {sizeof big}, .data = big},
                            {.name = "empty", .dtype = ZN_F32, .ndim = 1, .shape = {0}},
                            {.name = "small", .dtype = ZN_F32, .ndim = 1, .shape = {4}, .data = big}};
    for (int mode = 0; mode < 2; mode++) {
        StWrite w = {e, mode};
        assert_true(zt_io_fault_sweep(mode ? "the writer (fill)" : "the writer (sum)", st_write_run, &w, st_write_left) > 4);
        ZnStFile *f;
        ZnErr err = {0};
        assert_int_equal(zn_st_open(&f, g_path, &err), 0);
        const ZnStTensor *t = zn_st_find(f, "big");
        unsigned char *back = malloc(sizeof big);
        assert_int_equal(zn_st_read(f, t, back, sizeof big, &err), 0);
        assert_memory_equal(back, big, sizeof big);
        free(back);
        zn_st_close(f);
        unlink(g_path);
    }
}

/* spec: Z-FILE-001 */
static void test_atomic_write(void **state) {
    (void)state;
    ZnErr err = {0};
    char *p = join(g_dir, "latest");
    assert_int_equal(zn_write_file_atomic(p, "global_step1", 12, &err), ZN_OK);
    size_t n;
    unsigned char *b = get_file(p, &n);
    assert_int_equal(n, 12);
    assert_memory_equal(b, "global_step1", 12);
    free(b);
    assert_int_equal(count_temps(g_dir), 0);
    /* replace; then an empty file */
    assert_int_equal(zn_write_file_atomic(p, "global_step22", 13, &err), ZN_OK);
    b = get_file(p, &n);
    assert_int_equal(n, 13);
    free(b);
    assert_int_equal(zn_write_file_atomic(p, "", 0, &err), ZN_OK);
    b = get_file(p, &n);
    assert_int_equal(n, 0);
    free(b);
    /* a stale temporary with our pid (a crashed earlier process) is replaced */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    put_file(tmp, "garbage", 7);
    assert_int_equal(zn_write_file_atomic(p, "x", 1, &err), ZN_OK);
    assert_false(exists(tmp));
    assert_int_equal(count_temps(g_dir), 0);
    /* bad paths */
    assert_int_equal(zn_write_file_atomic("", "x", 1, &err), ZN_E_USAGE);
    assert_int_equal(zn_write_file_atomic(join(g_dir, "d/"), "x", 1, &err), ZN_E_USAGE);
    assert_int_equal(zn_write_file_atomic(join(g_dir, "no/such/dir/f"), "x", 1, &err), ZN_E_IO);
    assert_str_contains(err.msg, "no/such/dir/f");
    /* a file in the current directory: the directory fsync uses "." */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_dir), 0);
    assert_int_equal(zn_write_file_atomic("here", "y", 1, &err), ZN_OK);
    assert_int_equal(chdir(cwd), 0);
    assert_true(exists(join(g_dir, "here")));
}

/* spec: Z-FILE-001 */
static void test_writer_streaming(void **state) {
    (void)state;
    ZnErr err = {0};
    size_t big = (200 << 10) + 3;
    unsigned char *src = malloc(big);
    assert_non_null(src);
    for (size_t i = 0; i < big; i++) src[i] = (unsigned char)(i * 31 + 7);
    char *p = join(g_dir, "stream");
    ZnWriter *w;
    assert_int_equal(zn_writer_open(&w, p, &err), ZN_OK);
    /* small pieces, one larger than the buffer, then small again */
    size_t at = 0;
    for (int i = 0; i < 1000; i++, at += 37) assert_int_equal(zn_writer_write(w, src + at, 37, &err), ZN_OK);
    assert_int_equal(zn_writer_write(w, src + at, 100000, &err), ZN_OK);
    at += 100000;
    assert_int_equal(zn_writer_write(w, src + at, 0, &err), ZN_OK);
    assert_int_equal(zn_writer_write(w, src + at, big - at, &err), ZN_OK);
    assert_false(exists(p));   /* nothing visible before the commit */
    assert_int_equal(zn_writer_commit(w, &err), ZN_OK);
    size_t n;
    unsigned char *b = get_file(p, &n);
    assert_int_equal(n, big);
    assert_memory_equal(b, src, big);
    free(b);
    /* abort: the path keeps its old content, the temporary goes */
    assert_int_equal(zn_writer_open(&w, p, &err), ZN_OK);
    assert_int_equal(zn_writer_write(w, "new", 3, &err), ZN_OK);
    assert_int_equal(count_temps(g_dir), 1);
    zn_writer_abort(w);
    zn_writer_abort(NULL);
    assert_int_equal(count_temps(g_dir), 0);
    b = get_file(p, &n);
    assert_int_equal(n, big);
    free(b);
    /* after a failed write, further writes and the commit are refused */
    assert_int_equal(zn_writer_open(&w, p, &err), ZN_OK);
    zn_fault_set(1, 0, 0);
    assert_int_equal(zn_writer_write(w, src, big, &err), ZN_E_IO);
    zn_fault_set(0, 0, 0);
    assert_int_equal(zn_writer_write(w, "x", 1, &err), ZN_E_IO);
    assert_str_contains(err.msg, "earlier failed write");
    assert_int_equal(zn_writer_commit(w, &err), ZN_E_IO);   /* frees w, removes the temporary */
    assert_int_equal(count_temps(g_dir), 0);
    free(src);
}

/* Each op of one atomic write fails in turn: before the rename the old file
 * stays; at the directory fsync after the rename the new one is in place. */
/* spec: Z-FILE-002 */
static void test_fault_each_op(void **state) {
    (void)state;
    char *p = join(g_dir, "f");
    for (int sticky = 0; sticky < 2; sticky++) {
        for (long at = 1;; at++) {
            put_file(p, "old", 3);
            ZnErr err = {0};
            zn_fault_set(at, sticky, 0);
            int rc = zn_write_file_atomic(p, "new!", 4, &err);
            long ops = zn_fault_ops();
            zn_fault_set(0, 0, 0);
            size_t n;
            unsigned char *b = get_file(p, &n);
            assert_non_null(b);
            int is_new = n == 4 && !memcmp(b, "new!", 4);
            assert_true(is_new || (n == 3 && !memcmp(b, "old", 3)));
            free(b);
            assert_int_equal(count_temps(g_dir), 0);
            if (at > ops) {
                assert_int_equal(rc, ZN_OK);
                assert_true(is_new);
                assert_int_equal(at, 7);   /* open, write, fsync, rename, open dir, fsync dir */
                break;
            }
            assert_injected(rc, &err, at, p);
            /* only the directory fsync (ops 5, 6) comes after the rename */
            assert_int_equal(is_new, at >= 5);
            if (is_new) assert_str_contains(err.msg, "renamed into place, but not yet durable");
        }
    }
    /* the same through zn_st_write with a tensor larger than the writer's
     * buffer, so a data write of its own can fail too */
    enum { NBIG = 40000 };
    float *big = calloc(NBIG, sizeof *big);
    assert_non_null(big);
    ZnStEntry e = {.name = "big", .dtype = ZN_F32, .ndim = 1, .shape = {NBIG}, .data = big};
    for (long at = 1;; at++) {
        put_file(g_path, "old", 3);
        ZnErr err = {0};
        zn_fault_set(at, 0, 0);
        int rc = zn_st_write(g_path, &e, 1, NULL, &err);
        long ops = zn_fault_ops();
        zn_fault_set(0, 0, 0);
        assert_int_equal(count_temps(g_dir), 0);
        size_t n;
        unsigned char *b = get_file(g_path, &n);
        free(b);
        if (at > ops) {
            assert_int_equal(rc, ZN_OK);
            assert_int_equal(at, 8);   /* open, header write, data write, fsync, rename, dir x2 */
            break;
        }
        assert_int_equal(rc, ZN_E_IO);
        assert_true(n == (at >= 6 ? 8 + 72 + NBIG * 4 : 3));   /* 65-byte header padded to 72 */
    }
    zn_st_close(expect_open());
    free(big);
}

/* The multi-file save of a checkpoint: three rank files, then "latest". */
static int save_sequence(const char *dir, int version, ZnErr *err) {
    for (int r = 0; r < 3; r++) {
        float v[5];
        for (int i = 0; i < 5; i++) v[i] = (float)(version * 100 + r * 10 + i);
        uint16_t h[2] = {(uint16_t)version, (uint16_t)r};
        ZnStEntry e[2] = {
            {.name = "exp_avg", .dtype = ZN_F32, .ndim = 1, .shape = {5 + version}, .data = NULL},
            {.name = "fp16", .dtype = ZN_F16, .ndim = 1, .shape = {2}, .data = h},
        };
        float vv[8] = {0};
        memcpy(vv, v, sizeof v);
        e[0].data = vv;
        char step[16], rank[16], name[32];
        snprintf(step, sizeof step, "%d", version);
        snprintf(rank, sizeof rank, "%d", r);
        const char *meta[] = {"step", step, "rank", rank, NULL};
        snprintf(name, sizeof name, "rank%d.safetensors", r);
        int rc = zn_st_write(join(dir, name), e, 2, meta, err);
        if (rc) return rc;
    }
    char latest[32];
    int n = snprintf(latest, sizeof latest, "global_step%d", version);
    return zn_write_file_atomic(join(dir, "latest"), latest, (size_t)n, err);
}

static const char *SEQ_FILES[4] = {"rank0.safetensors", "rank1.safetensors", "rank2.safetensors", "latest"};

typedef struct { unsigned char *b[4]; size_t n[4]; } SeqBytes;

static void seq_bytes(const char *sub, int version, SeqBytes *out) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, sub);
    assert_int_equal(mkdir(dir, 0755), 0);
    ZnErr err = {0};
    assert_int_equal(save_sequence(dir, version, &err), ZN_OK);
    for (int i = 0; i < 4; i++) {
        out->b[i] = get_file(join(dir, SEQ_FILES[i]), &out->n[i]);
        assert_non_null(out->b[i]);
    }
    zt_rm_rf(dir);
}
static void seq_free(SeqBytes *s) {
    for (int i = 0; i < 4; i++) free(s->b[i]);
}

/* What both save-sequence tests work with: the bytes of version 1 (old)
 * and 2 (new), and the folder their saves go to. seq_begin makes them,
 * seq_end removes the folder and frees them. A save starts from the old
 * files (from_old 1) or from an empty folder (from_old 0). */
typedef struct {
    SeqBytes v1, v2;
    char dir[600];
} Seq;
static void seq_begin(Seq *q) {
    seq_bytes("ref1", 1, &q->v1);
    seq_bytes("ref2", 2, &q->v2);
    snprintf(q->dir, sizeof q->dir, "%s/ckpt", g_dir);
}
static void seq_end(Seq *q) {
    zt_rm_rf(q->dir);
    seq_free(&q->v1);
    seq_free(&q->v2);
}

/* Puts the folder back to the state a save starts from. */
static void seq_reset(const Seq *q, int from_old) {
    zt_rm_rf(q->dir);
    assert_int_equal(mkdir(q->dir, 0755), 0);
    if (from_old)
        for (int i = 0; i < 4; i++) put_file(join(q->dir, SEQ_FILES[i]), q->v1.b[i], q->v1.n[i]);
}

/* Each file is the old version (or absent if there was none) or the whole
 * new one; files are committed in order, so a new "latest" means every rank
 * file is new. Returns how many files are new. */
static int seq_check(const Seq *q, int from_old) {
    const char *dir = q->dir;
    const SeqBytes *old = from_old ? &q->v1 : NULL, *nw = &q->v2;
    int is_new[4];
    for (int i = 0; i < 4; i++) {
        size_t n;
        unsigned char *b = get_file(join(dir, SEQ_FILES[i]), &n);
        if (!b) {
            if (old) fail_msg("%s vanished", SEQ_FILES[i]);
            is_new[i] = 0;
            continue;
        }
        is_new[i] = n == nw->n[i] && !memcmp(b, nw->b[i], n);
        int is_old = old && n == old->n[i] && !memcmp(b, old->b[i], n);
        if (!is_new[i] && !is_old) fail_msg("%s is neither old nor new (%zu bytes)", SEQ_FILES[i], n);
        free(b);
        if (i < 3) {   /* and it loads */
            ZnStFile *f;
            ZnErr err = {0};
            assert_int_equal(zn_st_open(&f, join(dir, SEQ_FILES[i]), &err), ZN_OK);
            zn_st_close(f);
        }
    }
    int count = 0;
    for (int i = 0; i < 4; i++) {
        if (i > 0 && is_new[i]) assert_true(is_new[i - 1]);   /* commit order */
        count += is_new[i];
    }
    return count;
}

/* spec: Z-FILE-002 */
/* spec: Z-FILE-004 */
static void test_fault_save_sequence(void **state) {
    (void)state;
    Seq q;
    seq_begin(&q);
    for (int from_old = 0; from_old < 2; from_old++) {
        for (int sticky = 0; sticky < 2; sticky++) {
            int last_new = 0;
            for (long at = 1;; at++) {
                seq_reset(&q, from_old);
                ZnErr err = {0};
                zn_fault_set(at, sticky, 0);
                int rc = save_sequence(q.dir, 2, &err);
                long ops = zn_fault_ops();
                zn_fault_set(0, 0, 0);
                int nnew = seq_check(&q, from_old);
                assert_int_equal(count_temps(q.dir), 0);
                assert_true(nnew >= last_new);   /* a later fault never leaves less done */
                last_new = nnew;
                if (at > ops) {
                    assert_int_equal(rc, ZN_OK);
                    assert_int_equal(nnew, 4);
                    assert_int_equal(at, 4 * 6 + 1);
                    break;
                }
                assert_int_equal(rc, ZN_E_IO);
                assert_str_contains(err.msg, "injected I/O fault");
            }
        }
    }
    seq_end(&q);
}

/* A power cut at every op: a forked child runs the save with
 * ZINC_FAULT="op=N,crash" and dies with status 77 at op N (a write dies
 * half-written); the parent finds each file old or wholly new. */
/* spec: Z-FILE-003 */
/* spec: Z-FILE-004 */
/* spec: Z-FILE-005 */
static void test_crash_save_sequence(void **state) {
    (void)state;
    Seq q;
    seq_begin(&q);
    for (int from_old = 0; from_old < 2; from_old++) {
        int crashes = 0;
        for (long at = 1;; at++) {
            seq_reset(&q, from_old);
            fflush(NULL);   /* the child must not flush the parent's buffers again */
            pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) {
                char spec[64];
                snprintf(spec, sizeof spec, "op=%ld,crash", at);
                setenv("ZINC_FAULT", spec, 1);
                ZnErr err = {0};
                if (zn_fault_from_env(&err)) _exit(3);
                _exit(save_sequence(q.dir, 2, &err) == ZN_OK ? 0 : 4);
            }
            int status;
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(WIFEXITED(status));
            int code = WEXITSTATUS(status);
            int nnew = seq_check(&q, from_old);
            if (code == 0) {
                assert_int_equal(nnew, 4);
                assert_int_equal(count_temps(q.dir), 0);
                break;
            }
            assert_int_equal(code, ZN_FAULT_CRASH_STATUS);
            crashes++;
            /* a crash may leave "<file>.tmp.<pid>" behind; nothing else */
            int temps = count_temps(q.dir);
            assert_true(temps <= 1);
            remove_temps(q.dir);
            /* the next save, in a new process, goes through */
            ZnErr err = {0};
            assert_int_equal(save_sequence(q.dir, 2, &err), ZN_OK);
            assert_int_equal(seq_check(&q, from_old), 4);
        }
        assert_int_equal(crashes, 24);
    }
    seq_end(&q);
}

/* spec: Z-FILE-005 */
static void test_fault_env(void **state) {
    (void)state;
    ZnErr err = {0};
    char *p = join(g_dir, "f");
    setenv("ZINC_FAULT", "op=2", 1);
    assert_int_equal(zn_fault_from_env(&err), ZN_OK);
    assert_int_equal(zn_write_file_atomic(p, "x", 1, &err), ZN_E_IO);
    assert_str_contains(err.msg, "write: injected I/O fault at op 2");
    assert_int_equal(zn_fault_ops(), 2);   /* it stopped at the write */
    setenv("ZINC_FAULT", "op=1,sticky", 1);
    assert_int_equal(zn_fault_from_env(&err), ZN_OK);
    assert_int_equal(zn_mkdir_p(join(g_dir, "d"), &err), ZN_E_IO);
    assert_int_equal(zn_write_file_atomic(p, "x", 1, &err), ZN_E_IO);   /* still failing */
    setenv("ZINC_FAULT", "op=9,crash,sticky", 1);
    assert_int_equal(zn_fault_from_env(&err), ZN_OK);
    zn_fault_set(0, 0, 0);
    const char *bad[] = {"op=0", "op=x", "op=3,bogus", "ops=3", "op=-1", "op= 3", "op=3,", "op=", "3", "op=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ZINC_FAULT", bad[i], 1);
        assert_int_equal(zn_fault_from_env(&err), ZN_E_USAGE);
        assert_str_contains(err.msg, "is not op=N[,sticky][,crash]");
        assert_str_contains(err.msg, bad[i]);
        /* and every op refuses to run while it stands */
        assert_int_equal(zn_write_file_atomic(p, "x", 1, &err), ZN_E_USAGE);
        assert_str_contains(err.msg, "ZINC_FAULT");
    }
    setenv("ZINC_FAULT", "", 1);
    assert_int_equal(zn_fault_from_env(&err), ZN_OK);
    assert_int_equal(zn_write_file_atomic(p, "x", 1, &err), ZN_OK);
    unsetenv("ZINC_FAULT");
    assert_int_equal(zn_fault_from_env(&err), ZN_OK);
    assert_int_equal(zn_write_file_atomic(p, "x", 1, &err), ZN_OK);
    assert_int_equal(zn_fault_ops(), 6);   /* per atomic write, counted even when off */
    zn_fault_set(0, 0, 0);
    assert_int_equal(zn_fault_ops(), 0);
}

typedef struct { int id; int rc; } ThreadArg;
static void *thread_writes(void *a) {
    ThreadArg *t = a;
    char name[32];
    snprintf(name, sizeof name, "thr%d", t->id);
    char path[600];   /* not join(): its static ring is not thread-safe */
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    for (int i = 0; i < 20 && !t->rc; i++) {
        ZnErr err = {0};
        t->rc = zn_write_file_atomic(path, &i, sizeof i, &err);
    }
    return NULL;
}

/* the op counter is one process-wide count, exact under concurrent writers */
/* spec: Z-FILE-005 */
static void test_fault_threads(void **state) {
    (void)state;
    zn_fault_set(0, 0, 0);
    pthread_t th[4];
    ThreadArg arg[4];
    for (int i = 0; i < 4; i++) {
        arg[i] = (ThreadArg){i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thread_writes, &arg[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(arg[i].rc, ZN_OK);
    }
    assert_int_equal(zn_fault_ops(), 4 * 20 * 6);
    assert_int_equal(count_temps(g_dir), 0);
    /* one injected fault among four threads: exactly one write fails */
    zn_fault_set(200, 0, 0);
    for (int i = 0; i < 4; i++) {
        arg[i] = (ThreadArg){i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thread_writes, &arg[i]), 0);
    }
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        failed += arg[i].rc != ZN_OK;
    }
    zn_fault_set(0, 0, 0);
    assert_int_equal(failed, 1);
    assert_int_equal(count_temps(g_dir), 0);
}

/* spec: Z-FILE-006 */
static void test_read_file(void **state) {
    (void)state;
    ZnErr err = {0};
    char *p = join(g_dir, "m.json");
    put_file(p, "{\"a\":1}", 7);
    char *b;
    size_t n;
    assert_int_equal(zn_read_file(p, 7, &b, &n, &err), ZN_OK);
    assert_int_equal(n, 7);
    assert_int_equal(b[7], 0);
    assert_string_equal(b, "{\"a\":1}");
    free(b);
    zn_fault_set(2, 0, 0);   /* the read after the open */
    assert_int_equal(zn_read_file(p, 7, &b, &n, &err), ZN_E_IO);
    zn_fault_set(0, 0, 0);
    assert_null(b);
    assert_str_contains(err.msg, "m.json: read: injected I/O fault at op 2");
    assert_int_equal(zn_read_file(p, 6, &b, &n, &err), ZN_E_CORRUPT);
    assert_null(b);
    assert_str_contains(err.msg, p);
    assert_str_contains(err.msg, "7 bytes, more than the 6-byte limit");
    assert_int_equal(zn_read_file(join(g_dir, "nope"), 100, &b, &n, &err), ZN_E_IO);
    assert_str_contains(err.msg, "nope: open failed: No such file or directory");
    assert_int_equal(zn_read_file(g_dir, 100, &b, &n, &err), ZN_E_IO);
    assert_str_contains(err.msg, "not a regular file");
    put_file(p, "", 0);
    assert_int_equal(zn_read_file(p, 0, &b, &n, &err), ZN_OK);
    assert_int_equal(n, 0);
    assert_int_equal(b[0], 0);
    free(b);
}

/* spec: Z-FILE-007 */
static void test_mkdir_p(void **state) {
    (void)state;
    ZnErr err = {0};
    char p[600];
    snprintf(p, sizeof p, "%s/a/b//c/", g_dir);
    assert_int_equal(zn_mkdir_p(p, &err), ZN_OK);
    struct stat st;
    assert_int_equal(stat(join(g_dir, "a/b/c"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(zn_mkdir_p(p, &err), ZN_OK);   /* existing: fine */
    put_file(join(g_dir, "a/file"), "x", 1);
    snprintf(p, sizeof p, "%s/a/file/d", g_dir);
    assert_int_equal(zn_mkdir_p(p, &err), ZN_E_IO);
    assert_str_contains(err.msg, "a/file: exists and is not a directory");
    assert_int_equal(zn_mkdir_p("", &err), ZN_E_USAGE);
    /* faults at each op leave no half-made state that a retry cannot finish */
    snprintf(p, sizeof p, "%s/x/y", g_dir);
    for (long at = 1; at < 20; at++) {
        zn_fault_set(at, 0, 0);
        int rc = zn_mkdir_p(p, &err);
        zn_fault_set(0, 0, 0);
        if (rc == ZN_OK) break;
        assert_int_equal(rc, ZN_E_IO);
        assert_str_contains(err.msg, "injected I/O fault");
    }
    assert_int_equal(zn_mkdir_p(p, &err), ZN_OK);
    assert_int_equal(zn_fsync_dir(join(g_dir, "nope"), &err), ZN_E_IO);
    assert_str_contains(err.msg, "nope: open directory failed");
}

ZT_MAIN(
    cmocka_unit_test_setup_teardown(test_golden_reference_vectors, setup, teardown),
    cmocka_unit_test_setup_teardown(test_golden_mixed, setup, teardown),
    cmocka_unit_test_setup_teardown(test_wide_dtypes_and_escapes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_roundtrip_many, setup, teardown),
    cmocka_unit_test_setup_teardown(test_write_rejects, setup, teardown),
    cmocka_unit_test_setup_teardown(test_file_too_small, setup, teardown),
    cmocka_unit_test_setup_teardown(test_header_too_large, setup, teardown),
    cmocka_unit_test_setup_teardown(test_header_past_eof, setup, teardown),
    cmocka_unit_test_setup_teardown(test_header_start, setup, teardown),
    cmocka_unit_test_setup_teardown(test_utf8_and_control, setup, teardown),
    cmocka_unit_test_setup_teardown(test_json_structure, setup, teardown),
    cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
    cmocka_unit_test_setup_teardown(test_entry_schema, setup, teardown),
    cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
    cmocka_unit_test_setup_teardown(test_offsets_and_shape_arrays, setup, teardown),
    cmocka_unit_test_setup_teardown(test_sizes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_offset_layout, setup, teardown),
    cmocka_unit_test_setup_teardown(test_file_size_exact, setup, teardown),
    cmocka_unit_test_setup_teardown(test_metadata_strings_only, setup, teardown),
    cmocka_unit_test_setup_teardown(test_truncation_every_offset, setup, teardown),
    cmocka_unit_test_setup_teardown(test_byte_flips, setup, teardown),
    cmocka_unit_test_setup_teardown(test_random_fuzz, setup, teardown),
    cmocka_unit_test_setup_teardown(test_lying_header, setup, teardown),
    cmocka_unit_test_setup_teardown(test_read_api_misuse, setup, teardown),
    cmocka_unit_test_setup_teardown(test_load_faults, setup, teardown),
    cmocka_unit_test_setup_teardown(test_write_faults, setup, teardown),
    cmocka_unit_test_setup_teardown(test_atomic_write, setup, teardown),
    cmocka_unit_test_setup_teardown(test_writer_streaming, setup, teardown),
    cmocka_unit_test_setup_teardown(test_fault_each_op, setup, teardown),
    cmocka_unit_test_setup_teardown(test_fault_save_sequence, setup, teardown),
    cmocka_unit_test_setup_teardown(test_crash_save_sequence, setup, teardown),
    cmocka_unit_test_setup_teardown(test_fault_env, setup, teardown),
    cmocka_unit_test_setup_teardown(test_fault_threads, setup, teardown),
    cmocka_unit_test_setup_teardown(test_read_file, setup, teardown),
    cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
    cmocka_unit_test_setup_teardown(test_open_mem_is_open, setup, teardown))
