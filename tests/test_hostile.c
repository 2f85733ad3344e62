/* test_hostile.c: every defect found in zinc's readers of hostile input by
 * the fuzzers (tests/fuzz/, spec Z-FUZZ-*) or while writing them,
 * reproduced directly: one test per fix, each with the input that showed
 * it (shrunk) or the smallest input of its kind. The crash inputs are also
 * in the corpora (tests/fuzz/T/crash-*), which make test replays, and make
 * sanitize under ASan/UBSan. */
#include "testutil.h"
#include "io/checkpoint.h"
#include "app/cli.h"
#include "core/config.h"
#include "engine/model.h"

/* spec: Z-FUZZ-006 -- control characters and bytes that are not UTF-8 in a
 * message become \xNN, so the message stays one line of printable UTF-8;
 * what no longer fits is cut at the end, never inside a character */
static void test_msg_escape(void **state) {
    (void)state;
    ZnErr e;
    zn_err(&e, ZN_E_USAGE, "key '%s'", "a\nb\x1b[2J\x7f");
    assert_string_equal(e.msg, "key 'a\\x0ab\\x1b[2J\\x7f'");
    zn_err_prefix(&e, "%s: ", "x\ty");
    assert_string_equal(e.msg, "x\\x09y: key 'a\\x0ab\\x1b[2J\\x7f'");
    char s[8] = "ab\ncd";   /* escaped, 8 bytes and the NUL: the "d" is cut */
    zn_msg_escape(s, sizeof s);
    assert_string_equal(s, "ab\\x0ac");
    char t[8] = "abc\ndef";
    zn_msg_escape(t, 6);    /* "abc" then no room for a whole \x0a */
    assert_string_equal(t, "abc");
    char u[16] = "plain";
    zn_msg_escape(u, sizeof u);
    assert_string_equal(u, "plain");
    /* UTF-8 is kept; a stray byte, an overlong form, a surrogate and a cut
     * sequence are not UTF-8 */
    zn_err(&e, ZN_E_USAGE, "%s", "\xc3\xa9 \xff \xc0\x80 \xed\xa0\x80 \xe2\x82");
    assert_string_equal(e.msg, "\xc3\xa9 \\xff \\xc0\\x80 \\xed\\xa0\\x80 \\xe2\\x82");
    char v[8] = "ab\xe2\x82\xac";   /* "ab€" and the NUL: 6 bytes */
    zn_msg_escape(v, 5);            /* room for 4: "ab" and not half the euro sign */
    assert_string_equal(v, "ab");
}

/* spec: Z-FUZZ-006 -- the readers' messages quote input bytes escaped
 * (found by the config, model and manifest fuzzers in their first second) */
static void test_reader_messages_one_line(void **state) {
    (void)state;
    ZnConfig c;
    ZnErr err = {0};
    const char *cfg = "{\"train_batch_size\": 4, \"zero_optimization\": {\"a\\nb\": 1}}";
    assert_int_equal(zn_config_parse(cfg, strlen(cfg), "c.json", NULL, &c, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "zero_optimization.a\\x0ab: unknown key");
    ZnModel m;
    assert_int_equal(zn_model_parse("ml\x01", &m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "unknown model 'ml\\x01'");
    const char *man = "{\"format\": \"zinc\\u001b\", \"version\": 1}";
    assert_int_equal(zn_ckpt_manifest_check(man, strlen(man), "m.json", 1, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "format is 'zinc\\x1b', expected 'zinc-universal'");
}

/* spec: Z-FUZZ-003 -- --test-repeat-layer R:L: sscanf's %d made an
 * out-of-range number undefined behaviour and took trailing junk; both are
 * now usage errors (found reading the flag parser the cli fuzzer covers) */
static void test_repeat_layer_flag(void **state) {
    (void)state;
    static const char *bad[] = {"99999999999:1", "1:99999999999", "1:2junk", "1:", ":1", "1", "-1:0", "0:-1",
                                "4096:0", "0:64", "x:1", ""};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char *argv[] = {"--test-repeat-layer", (char *)bad[k]};
        ZnTrainFlags f;
        zn_train_flags_init(&f);
        ZnErr err = {0};
        int i = 0;
        assert_int_equal(zn_train_flag(&f, 2, argv, &i, &err), -1);
        assert_int_equal(err.code, ZN_E_USAGE);
        assert_str_contains(err.msg, "--test-repeat-layer: expected RANK:LAYER (0..4095:0..63)");
        assert_int_equal(f.repeat_rank, -1);
    }
    char *argv[] = {"--test-repeat-layer", "4095:63"};
    ZnTrainFlags f;
    zn_train_flags_init(&f);
    ZnErr err = {0};
    int i = 0;
    assert_int_equal(zn_train_flag(&f, 2, argv, &i, &err), 1);
    assert_int_equal(f.repeat_rank, 4095);
    assert_int_equal(f.repeat_layer, 63);
}

/* spec: Z-FUZZ-005 -- a manifest's shape whose product passes 2^53 is
 * refused before it is multiplied (two dimensions of 4e9 overflowed a long:
 * undefined behaviour, caught by UBSan replaying the manifest harness) */
static void test_manifest_shape_overflow(void **state) {
    (void)state;
    const char *man =
        "{\"format\": \"zinc-universal\", \"version\": 1, \"model\": \"mlp:2,2\", \"world_size\": 1,"
        " \"stage\": 0, \"model_dtype\": \"fp32\", \"layout\": {\"sub_group_size\": 1,"
        " \"reduce_bucket_size\": 1, \"aligned_numel\": 0, \"partition_numel\": 0, \"rank_numel\": 0,"
        " \"params\": [{\"name\": \"w\", \"shape\": [4000000000, 4000000000], \"numel\": 1}]}}";
    ZnErr err = {0};
    assert_int_equal(zn_ckpt_manifest_check(man, strlen(man), "m.json", 1, &err), ZN_E_CORRUPT);
    assert_str_contains(err.msg, "m.json: layout.params[0].shape: more than 2^53 elements");
}

/* spec: Z-FUZZ-002 -- tie:L=M reads L and M as plain digits: sscanf's %d
 * wrapped 4294967297 to 1 (and is undefined behaviour past INT_MAX) and
 * took a sign and spaces, so these specs trained a model tied 1=0 */
static void test_model_tie_numbers(void **state) {
    (void)state;
    const char *bad[] = {"mlp:4,4,4,tie:4294967297=0", "mlp:4,4,4,tie: +1=0", "mlp:4,4,4,tie:1=-0",
                         "mlp:4,4,4,tie:1=0x", "mlp:4,4,4,tie:1=", "mlp:4,4,4,tie:=0", "mlp:4,4,4,tie:1=0=0"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        ZnModel m;
        ZnErr err = {0};
        assert_int_equal(zn_model_parse(bad[k], &m, &err), ZN_E_USAGE);
        assert_str_contains(err.msg, bad[k] + 10);   /* names the tie part */
    }
    ZnModel m;
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("mlp:4,4,4,tie:1=0", &m, &err), 0);
    assert_int_equal(m.naliases, 1);
    assert_string_equal(m.aliases[0].name, "layers.1.weight");
    assert_int_equal(m.aliases[0].param, m.layer_param[0][0]);
}

/* spec: Z-FUZZ-002 -- a layer tied twice is an error: the second tie used
 * to replace the first without a word (found by fuzz_model's tie check) */
static void test_model_tied_twice(void **state) {
    (void)state;
    ZnModel m;
    ZnErr err = {0};
    assert_int_equal(zn_model_parse("mlp:6,6,6,6,6,tie:2=1,tie:2=0", &m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "'tie:2=0': layer 2 is already tied (tie:2=1)");
    assert_int_equal(zn_model_parse("mlp:6,6,6,6,tie:2=1,tie:2=1", &m, &err), ZN_E_USAGE);
    assert_int_equal(zn_model_parse("mlp:6,6,6,6,6,tie:2=1,tie:3=0", &m, &err), 0);
    assert_int_equal(m.naliases, 2);
}

ZT_MAIN(
    cmocka_unit_test(test_msg_escape),
    cmocka_unit_test(test_reader_messages_one_line),
    cmocka_unit_test(test_repeat_layer_flag),
    cmocka_unit_test(test_manifest_shape_overflow),
    cmocka_unit_test(test_model_tie_numbers),
    cmocka_unit_test(test_model_tied_twice))
