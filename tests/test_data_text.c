/* test_data_text.c: token data for language models (spec Z-DATA-010..014):
 * text and llm.c token files read, every malformed file refused naming
 * the byte, windows a pure function of (seed, sample index). */
#include "testutil.h"
#include "engine/data_text.h"
#include <unistd.h>

static const char *file_with(const char *name, const void *bytes, size_t n) {
    const char *path = zt_path(name);
    zt_write_bytes(path, bytes, n);
    return path;
}

/* an llm.c token file: header (magic, version, count), then the tokens */
static size_t token_file(unsigned char *b, uint32_t magic, uint32_t version, uint32_t count, const uint16_t *tok,
                         long n) {
    memset(b, 0, ZN_TOKENS_HEADER);
    uint32_t h[3] = {magic, version, count};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) b[4 * k + i] = (unsigned char)(h[k] >> (8 * i));   /* little-endian */
    for (long i = 0; i < n; i++) {
        b[ZN_TOKENS_HEADER + 2 * i] = (unsigned char)(tok[i] & 0xff);
        b[ZN_TOKENS_HEADER + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
    }
    return ZN_TOKENS_HEADER + 2 * (size_t)n;
}

static void expect_error(const char *spec, int code, const char *part) {
    ZnTokens t;
    ZnErr err = {0};
    int rc = zn_tokens_open(spec, &t, &err);
    if (rc != code || !strstr(err.msg, part))
        fail_msg("%s: rc %d '%s', expected rc %d and '%s'", spec, rc, err.msg, code, part);
}

static char spec_buf[256];
static const char *spec_of(const char *kind, const char *path) {
    snprintf(spec_buf, sizeof spec_buf, "%s:%s", kind, path);
    return spec_buf;
}

/* spec: Z-DATA-010 text:FILE: every byte a token, vocabulary 256 */
static void test_text_file(void **st) {
    (void)st;
    const char *p = file_with("a.txt", "Hello\n\xff", 7);
    ZnTokens t;
    ZnErr err;
    assert_int_equal(zn_tokens_open(spec_of("text", p), &t, &err), 0);
    assert_int_equal(t.n, 7);
    assert_int_equal(t.vocab, 256);
    assert_int_equal(t.tok[0], 'H');
    assert_int_equal(t.tok[6], 0xff);
    zn_tokens_free(&t);
}

/* spec: Z-DATA-011 tokens:FILE: llm.c's header and uint16 tokens; the
 * vocabulary seen is the largest token + 1 */
static void test_token_file(void **st) {
    (void)st;
    static unsigned char b[ZN_TOKENS_HEADER + 64];
    const uint16_t tok[5] = {50256, 7, 0, 300, 1};
    size_t n = token_file(b, ZN_TOKENS_MAGIC, 1, 5, tok, 5);
    ZnTokens t;
    ZnErr err;
    assert_int_equal(zn_tokens_open(spec_of("tokens", file_with("a.bin", b, n)), &t, &err), 0);
    assert_int_equal(t.n, 5);
    assert_int_equal(t.vocab, 50257);
    for (int i = 0; i < 5; i++) assert_int_equal(t.tok[i], tok[i]);
    zn_tokens_free(&t);
}

/* spec: Z-DATA-013 a missing, empty, short or malformed file is refused
 * naming the file and the byte where the problem is */
static void test_bad_files(void **st) {
    (void)st;
    static unsigned char b[ZN_TOKENS_HEADER + 64];
    const uint16_t tok[4] = {1, 2, 3, 4};
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none.bin", zt_tmpdir());
    expect_error(spec_of("tokens", missing), ZN_E_IO, "none.bin");
    expect_error(spec_of("text", file_with("empty.txt", "", 0)), ZN_E_USAGE, "no tokens");
    expect_error(spec_of("tokens", file_with("short.bin", "abc", 3)), ZN_E_CORRUPT, "3 bytes, a token file starts");
    size_t n = token_file(b, 12345, 1, 4, tok, 4);
    expect_error(spec_of("tokens", file_with("magic.bin", b, n)), ZN_E_CORRUPT, "byte 0: magic 12345");
    n = token_file(b, ZN_TOKENS_MAGIC, 2, 4, tok, 4);
    expect_error(spec_of("tokens", file_with("version.bin", b, n)), ZN_E_CORRUPT, "byte 4: version 2");
    n = token_file(b, ZN_TOKENS_MAGIC, 1, 9, tok, 4);
    expect_error(spec_of("tokens", file_with("count.bin", b, n)), ZN_E_CORRUPT, "byte 8: the header counts 9 tokens, the file holds 4");
    n = token_file(b, ZN_TOKENS_MAGIC, 1, 4, tok, 4);
    expect_error(spec_of("tokens", file_with("odd.bin", b, n + 1)), ZN_E_CORRUPT, "a token cut in half");
    n = token_file(b, ZN_TOKENS_MAGIC, 1, 0, tok, 0);
    expect_error(spec_of("tokens", file_with("none.bin", b, n)), ZN_E_USAGE, "no tokens");
    expect_error("text", ZN_E_USAGE, "expected text:FILE or tokens:FILE");
    expect_error("bytes:x", ZN_E_USAGE, "expected text:FILE or tokens:FILE");
    expect_error("text:", ZN_E_USAGE, "the file name is missing");
    /* too short for a window, and a token the model cannot embed */
    n = token_file(b, ZN_TOKENS_MAGIC, 1, 4, (const uint16_t[]){1, 2, 900, 4}, 4);
    ZnTokens t;
    ZnErr err = {0};
    assert_int_equal(zn_tokens_open(spec_of("tokens", file_with("v.bin", b, n)), &t, &err), 0);
    assert_int_equal(zn_tokens_check(&t, 4, 1000, &err), ZN_E_USAGE);
    assert_non_null(strstr(err.msg, "4 tokens, a window of 4 needs 5"));
    assert_int_equal(zn_tokens_check(&t, 3, 512, &err), ZN_E_USAGE);
    assert_non_null(strstr(err.msg, "byte 1028: token 900, the model's vocabulary is 512"));
    assert_int_equal(zn_tokens_check(&t, 3, 901, &err), 0);
    zn_tokens_free(&t);
}

/* spec: Z-DATA-012 sample s's window starts at mix(seed, s) mod (n - T),
 * its targets are its inputs shifted by one; the same (seed, s) gives the
 * same window whatever else was read before, and the starts cover the
 * range */
static void test_windows(void **st) {
    (void)st;
    char text[200];
    for (int i = 0; i < 200; i++) text[i] = (char)('a' + i % 26);
    ZnTokens t;
    ZnErr err;
    assert_int_equal(zn_tokens_open(spec_of("text", file_with("w.txt", text, 200)), &t, &err), 0);
    const int T = 8;
    int in[8], tg[8], in2[8], tg2[8];
    int seen[192] = {0};
    for (uint64_t s = 0; s < 4000; s++) {
        long start = zn_tokens_window_start(&t, 42, s, T);
        assert_true(start >= 0 && start < 200 - T);
        seen[start] = 1;
        zn_tokens_window(&t, 42, s, T, in, tg);
        for (int i = 0; i < T; i++) {
            assert_int_equal(in[i], text[start + i]);
            assert_int_equal(tg[i], text[start + i + 1]);
        }
    }
    int covered = 0;
    for (int i = 0; i < 200 - T; i++) covered += seen[i];
    assert_int_equal(covered, 200 - T);
    /* order-free: sample 77 after others is sample 77 first */
    zn_tokens_window(&t, 42, 77, T, in, tg);
    zn_tokens_window(&t, 42, 3, T, in2, tg2);
    zn_tokens_window(&t, 42, 77, T, in2, tg2);
    assert_memory_equal(in, in2, sizeof in);
    /* another seed, other windows */
    int differ = 0;
    for (uint64_t s = 0; s < 32; s++)
        differ += zn_tokens_window_start(&t, 42, s, T) != zn_tokens_window_start(&t, 43, s, T);
    assert_true(differ > 16);
    zn_tokens_free(&t);
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_text_file),
    cmocka_unit_test(test_token_file),
    cmocka_unit_test(test_bad_files),
    cmocka_unit_test(test_windows))
