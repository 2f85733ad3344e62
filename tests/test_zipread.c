/* test_zipread.c: torch.save's zip container (spec Z-DSCK-001), on archives
 * this test writes byte by byte (stored entries, torch's 64-byte aligned
 * storages, a comment holding the end record's signature, damage of every
 * kind) and on ZIP64 archives Python's zipfile writes, when python3 exists. */
#include "testutil.h"
#include "io/zipread.h"

/* ---- a small zip writer ------------------------------------------------- */

typedef ZtBuf Buf;
#define put zt_put
static void p16(Buf *w, unsigned v) { put(w, (unsigned char[]){v & 255, v >> 8 & 255}, 2); }
static void p32(Buf *w, uint32_t v) { p16(w, v & 0xffff); p16(w, v >> 16); }

typedef struct {
    const char *name, *data;
    unsigned method, flags;
    int align;               /* pad the local extra field so the bytes start 64-aligned, as torch does */
} Ent;

/* The archive of n entries, then an EOCD with comment (may be ""); with
 * zip64 the central records keep sizes and offsets in ZIP64 extra fields
 * and a ZIP64 end record and locator come before the EOCD, whose own
 * fields are then all ones (as writers do past 4 GiB or 65535 entries). */
static size_t build64(Buf *w, const Ent *e, int n, const char *comment, int zip64);
static size_t build(Buf *w, const Ent *e, int n, const char *comment) { return build64(w, e, n, comment, 0); }
static size_t build64(Buf *w, const Ent *e, int n, const char *comment, int zip64) {
    uint32_t loc[8];
    w->n = 0;
    for (int i = 0; i < n; i++) {
        const size_t nl = strlen(e[i].name), dl = strlen(e[i].data);
        loc[i] = (uint32_t)w->n;
        size_t pad = e[i].align ? (64 - (w->n + 30 + nl + 4) % 64) % 64 : 0;
        p32(w, 0x04034b50), p16(w, 20), p16(w, e[i].flags), p16(w, e[i].method), p32(w, 0);
        p32(w, zn_crc32(0, e[i].data, dl)), p32(w, (uint32_t)dl), p32(w, (uint32_t)dl);
        p16(w, (unsigned)nl), p16(w, e[i].align ? (unsigned)(4 + pad) : 0);
        put(w, e[i].name, nl);
        if (e[i].align) {   /* an unknown extra block of padding, as torch's writer adds */
            p16(w, 0x5446), p16(w, (unsigned)pad);
            for (size_t k = 0; k < pad; k++) put(w, "Z", 1);
        }
        put(w, e[i].data, dl);
    }
    const size_t cd = w->n;
    for (int i = 0; i < n; i++) {
        const size_t nl = strlen(e[i].name), dl = strlen(e[i].data);
        const uint32_t all = 0xFFFFFFFFu;
        p32(w, 0x02014b50), p16(w, 20), p16(w, 45), p16(w, e[i].flags), p16(w, e[i].method), p32(w, 0);
        p32(w, zn_crc32(0, e[i].data, dl)), p32(w, zip64 ? all : (uint32_t)dl), p32(w, zip64 ? all : (uint32_t)dl);
        p16(w, (unsigned)nl), p16(w, zip64 ? 28 : 0), p16(w, 0), p16(w, 0), p16(w, 0), p32(w, 0);
        p32(w, zip64 ? all : loc[i]);
        put(w, e[i].name, nl);
        if (zip64) {   /* id 1: size, compressed size, local header offset */
            p16(w, 1), p16(w, 24);
            p32(w, (uint32_t)dl), p32(w, 0), p32(w, (uint32_t)dl), p32(w, 0), p32(w, loc[i]), p32(w, 0);
        }
    }
    const size_t cdn = w->n - cd;
    if (zip64) {
        const size_t rec = w->n;
        p32(w, 0x06064b50), p32(w, 44), p32(w, 0), p16(w, 45), p16(w, 45), p32(w, 0), p32(w, 0);
        p32(w, (uint32_t)n), p32(w, 0), p32(w, (uint32_t)n), p32(w, 0);
        p32(w, (uint32_t)cdn), p32(w, 0), p32(w, (uint32_t)cd), p32(w, 0);
        p32(w, 0x07064b50), p32(w, 0), p32(w, (uint32_t)rec), p32(w, 0), p32(w, 1);
    }
    p32(w, 0x06054b50), p16(w, 0), p16(w, 0), p16(w, zip64 ? 0xFFFF : (unsigned)n), p16(w, zip64 ? 0xFFFF : (unsigned)n);
    p32(w, zip64 ? 0xFFFFFFFFu : (uint32_t)cdn), p32(w, zip64 ? 0xFFFFFFFFu : (uint32_t)cd);
    p16(w, (unsigned)strlen(comment));
    put(w, comment, strlen(comment));
    return cd;
}

static const char *save(const Buf *w, const char *name) {
    const char *path = zt_path(name);
    zt_write_bytes(path, (const char *)w->b, w->n);
    return path;
}

/* opening path fails with code, the message holding want */
static void refused(const char *path, int code, const char *want) {
    ZnZip z;
    ZnErr err = {0};
    assert_int_equal(zn_zip_open(&z, path, &err), code);
    assert_str_contains(err.msg, path);
    assert_str_contains(err.msg, want);
    assert_int_equal(z.n, 0);
}

static const Ent TORCH[] = {
    {"archive/data.pkl", "\x80\x02}q\x00.", 0, 0, 0},
    {"archive/byteorder", "little", 0, 0, 0},
    {"archive/data/0", "0123456789abcdef", 0, 0, 1},
    {"archive/data/1", "ABCDEFGH", 0, 0, 1},
};

/* ---- tests -------------------------------------------------------------- */

/* spec: Z-DSCK-001 */
static void test_read_in_place(void **state) {
    (void)state;
    Buf w;
    build(&w, TORCH, 4, "");
    const char *path = save(&w, "a.pt");
    ZnZip z;
    ZnErr err = {0};
    if (zn_zip_open(&z, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(z.n, 4);
    assert_string_equal(z.e[0].name, "archive/data.pkl");
    const ZnZipEntry *e = zn_zip_find(&z, "archive/data/0");
    assert_non_null(e);
    assert_int_equal(e->size, 16);
    assert_int_equal(e->offset % 64, 0);   /* the padding of the local header skipped */
    char buf[17] = {0};
    assert_int_equal(zn_zip_read(&z, e, 0, buf, 16, &err), 0);
    assert_string_equal(buf, "0123456789abcdef");
    memset(buf, 0, sizeof buf);
    assert_int_equal(zn_zip_read(&z, e, 10, buf, 6, &err), 0);   /* a slice */
    assert_string_equal(buf, "abcdef");
    for (int i = 0; i < z.n; i++) assert_int_equal(zn_zip_check_crc(&z, &z.e[i], &err), 0);
    assert_null(zn_zip_find(&z, "archive/data/2"));
    /* past the entry's end: refused, naming it */
    assert_int_equal(zn_zip_read(&z, e, 10, buf, 7, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "entry 'archive/data/0' has 16 bytes; bytes 10..17 were asked for");
    zn_zip_close(&z);
    /* a known CRC-32 ("123456789" -> cbf43926, the check value of zip's CRC) */
    assert_int_equal(zn_crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(zn_crc32(zn_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
}

/* spec: Z-DSCK-001 a comment holding the end record's signature */
static void test_comment(void **state) {
    (void)state;
    Buf w;
    build(&w, TORCH, 2, "PK\x05\x06 not the end record");
    ZnZip z;
    ZnErr err = {0};
    if (zn_zip_open(&z, save(&w, "c.pt"), &err)) fail_msg("%s", err.msg);
    assert_int_equal(z.n, 2);
    zn_zip_close(&z);
}

/* spec: Z-DSCK-001 what torch never writes, and damage */
static void test_refused(void **state) {
    (void)state;
    Buf w;
    Ent e[2] = {TORCH[0], TORCH[2]};
    e[1].method = 8;
    build(&w, e, 2, "");
    refused(save(&w, "deflate.pt"), ZN_E_CORRUPT,
            "entry 'archive/data/0' (central record at byte ");
    refused(zt_path("deflate.pt"), ZN_E_CORRUPT, "is compressed (method 8); torch.save stores entries uncompressed");
    e[1].method = 0;
    e[1].flags = 1;
    build(&w, e, 2, "");
    refused(save(&w, "enc.pt"), ZN_E_CORRUPT, "entry 'archive/data/0' (central record at byte ");
    refused(zt_path("enc.pt"), ZN_E_CORRUPT, "is encrypted");
    /* truncated: the end record gone */
    const size_t cd = build(&w, TORCH, 4, "");
    w.n -= 10;
    refused(save(&w, "cut.pt"), ZN_E_CORRUPT, "not a zip archive (no end-of-central-directory record");
    /* an entry's size grown past the directory: a truncated or damaged file */
    build(&w, TORCH, 4, "");
    const size_t rec3 = w.n - 22 - (46 + 14);   /* the last central record: archive/data/1 */
    w.b[rec3 + 20] = w.b[rec3 + 24] = 200;       /* stored and uncompressed size: 200 */
    refused(save(&w, "big.pt"), ZN_E_CORRUPT, "entry 'archive/data/1' (200 bytes at byte ");
    refused(zt_path("big.pt"), ZN_E_CORRUPT, "where the directory starts: the file is truncated or damaged");
    /* a directory that points outside the file */
    build(&w, TORCH, 4, "");
    w.b[w.n - 6] = 0xff;   /* the directory's offset, high byte */
    refused(save(&w, "off.pt"), ZN_E_CORRUPT, "the central directory (");
    /* a local header that is not one */
    build(&w, TORCH, 4, "");
    w.b[0] = 'Q';
    refused(save(&w, "loc.pt"), ZN_E_CORRUPT, "entry 'archive/data.pkl': no local header at byte 0");
    /* more entries than the directory can hold */
    build(&w, TORCH, 4, "");
    w.b[w.n - 12] = 200;   /* total entries */
    refused(save(&w, "count.pt"), ZN_E_CORRUPT, "200 entries cannot fit a central directory of ");
    (void)cd;
    /* a split archive: the end record names disk 1 */
    build(&w, TORCH, 4, "");
    w.b[w.n - 22 + 4] = 1;
    refused(save(&w, "split.pt"), ZN_E_CORRUPT, "a split (multi-disk) zip archive at byte ");
    /* a name holding a NUL byte */
    Ent nul[1] = {{"archive/x", "data", 0, 0, 0}};
    build(&w, nul, 1, "");
    w.b[w.n - 22 - 9 + 7] = 0;   /* "archive/x" in the central record: its '/' */
    refused(save(&w, "nul.pt"), ZN_E_CORRUPT, "holds a NUL byte");
    /* stored, yet its two sizes differ */
    build(&w, nul, 1, "");
    w.b[w.n - 22 - 9 - 46 + 24] = 5;   /* uncompressed size 5, stored size 4 */
    refused(save(&w, "sizes.pt"), ZN_E_CORRUPT, "entry 'archive/x' is stored yet records 4 bytes stored and 5 uncompressed");
    /* a CRC that does not match: found by the check, not by opening */
    build(&w, TORCH, 4, "");
    ZnZip z;
    ZnErr err = {0};
    const char *path = save(&w, "crc.pt");
    if (zn_zip_open(&z, path, &err)) fail_msg("%s", err.msg);
    const size_t at = (size_t)zn_zip_find(&z, "archive/data/0")->offset;
    zn_zip_close(&z);
    assert_int_equal(w.b[at], '0');
    w.b[at] = '9';
    path = save(&w, "crc.pt");
    if (zn_zip_open(&z, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zn_zip_check_crc(&z, zn_zip_find(&z, "archive/data/0"), &err), ZN_E_CORRUPT);
    /* the two CRCs as zlib.crc32 gives them for the damaged and the written bytes */
    assert_str_contains(err.msg, "entry 'archive/data/0' (16 bytes at byte 192) has CRC-32 b5bffeed, its directory says 68c4f033");
    zn_zip_close(&z);
    /* not a zip at all, empty, missing */
    zt_write_text(zt_path("text.pt"), "just some text, long enough to look for an end record in it");
    refused(zt_path("text.pt"), ZN_E_CORRUPT, "not a zip archive");
    zt_write_text(zt_path("empty.pt"), "");
    refused(zt_path("empty.pt"), ZN_E_CORRUPT, "not a zip archive (0 bytes, shorter than an end record)");
    refused(zt_path("absent.pt"), ZN_E_IO, "absent.pt");
    /* an empty archive, as Python's zipfile writes it: the end record alone
     * (no room before it for a ZIP64 locator), no entries */
    static const char EMPTY[22] = "PK\x05\x06";
    zt_write_bytes(zt_path("none.zip"), EMPTY, sizeof EMPTY);
    assert_int_equal(zn_zip_open(&z, zt_path("none.zip"), &err), 0);
    assert_int_equal(z.n, 0);
    assert_null(zn_zip_find(&z, "archive/data.pkl"));
    zn_zip_close(&z);
}

/* spec: Z-DSCK-001 ZIP64: sizes and offsets in extra fields, the end record's in its own */
static void test_zip64(void **state) {
    (void)state;
    Buf w;
    build64(&w, TORCH, 4, "", 1);
    const char *path = save(&w, "z64w.pt");
    ZnZip z;
    ZnErr err = {0};
    if (zn_zip_open(&z, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(z.n, 4);
    const ZnZipEntry *e = zn_zip_find(&z, "archive/data/1");
    assert_non_null(e);
    char buf[9] = {0};
    assert_int_equal(zn_zip_read(&z, e, 0, buf, 8, &err), 0);
    assert_string_equal(buf, "ABCDEFGH");
    for (int i = 0; i < z.n; i++) assert_int_equal(zn_zip_check_crc(&z, &z.e[i], &err), 0);
    zn_zip_close(&z);
    /* a locator pointing at no ZIP64 end record: off by one, past itself, too close to it */
    const size_t loc = w.n - 22 - 20;
    w.b[loc + 8] ^= 1;
    refused(save(&w, "z64bad.pt"), ZN_E_CORRUPT, "the ZIP64 locator at byte ");
    w.b[loc + 8] ^= 1;
    const unsigned char keep[8] = {w.b[loc + 8], w.b[loc + 9], w.b[loc + 10], w.b[loc + 11],
                                   w.b[loc + 12], w.b[loc + 13], w.b[loc + 14], w.b[loc + 15]};
    for (int i = 0; i < 8; i++) w.b[loc + 8 + i] = (unsigned char)((uint64_t)(loc + 1) >> (8 * i));
    char want[96];
    snprintf(want, sizeof want, "the ZIP64 locator at byte %zu points at no ZIP64 end record (%zu)", loc, loc + 1);
    refused(save(&w, "z64past.pt"), ZN_E_CORRUPT, want);
    for (int i = 0; i < 8; i++) w.b[loc + 8 + i] = (unsigned char)((uint64_t)(loc - 10) >> (8 * i));
    snprintf(want, sizeof want, "the ZIP64 locator at byte %zu points at no ZIP64 end record (%zu)", loc, loc - 10);
    refused(save(&w, "z64near.pt"), ZN_E_CORRUPT, want);
    memcpy(w.b + loc + 8, keep, 8);
    /* a ZIP64 field too short for what the record says it holds */
    build64(&w, TORCH, 1, "", 1);
    w.b[w.n - 22 - 20 - 56 - 24 - 2] = 8;   /* the extra block's length: one field of three */
    refused(save(&w, "z64short.pt"), ZN_E_CORRUPT, "has a broken ZIP64 field");
}

/* spec: Z-DSCK-001 ZIP64 records, as Python's zipfile writes them */
static void test_zip64_python(void **state) {
    (void)state;
    if (system("command -v python3 >/dev/null 2>&1")) {
        printf("test_zip64_python: no python3, skipped\n");
        return;
    }
    const char *path = zt_path("z64.pt");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import zipfile,sys\n"
             "with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_STORED) as z:\n"
             "  for i in range(3):\n"
             "    with z.open('archive/data/%%d' %% i, 'w', force_zip64=True) as f: f.write(bytes(range(i, i + 100)))\n"
             "  z.writestr('archive/data.pkl', b'pickle')\n"
             "  z.comment = b'zinc'\" %s",
             path);
    assert_int_equal(system(cmd), 0);
    ZnZip z;
    ZnErr err = {0};
    if (zn_zip_open(&z, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(z.n, 4);
    for (int i = 0; i < 3; i++) {
        char name[32];
        unsigned char b[100];
        snprintf(name, sizeof name, "archive/data/%d", i);
        const ZnZipEntry *e = zn_zip_find(&z, name);
        assert_non_null(e);
        assert_int_equal(e->size, 100);
        assert_int_equal(zn_zip_read(&z, e, 0, b, 100, &err), 0);
        for (int k = 0; k < 100; k++) assert_int_equal(b[k], i + k);
        assert_int_equal(zn_zip_check_crc(&z, e, &err), 0);
    }
    zn_zip_close(&z);
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_read_in_place),
    cmocka_unit_test(test_comment),
    cmocka_unit_test(test_refused),
    cmocka_unit_test(test_zip64),
    cmocka_unit_test(test_zip64_python))
