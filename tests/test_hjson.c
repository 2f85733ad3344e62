/* test_hjson.c: configs are read as DeepSpeed reads them, with hjson:
 * every hjson form gives the tree its strict-JSON spelling gives, strict
 * JSON passes through byte for byte, errors point at the user's line and
 * column, and no input crashes or recurses without bound. */
#include "testutil.h"
#include <cjson/cJSON.h>
#include "core/hjson.h"
#include "core/config.h"

/* the tree hjson text h gives must equal strict JSON j's */
static void same_tree(const char *h, const char *j) {
    ZnHjson out;
    int rc = zn_hjson_to_json(h, strlen(h), &out);
    if (rc) fail_msg("'%s': rc %d at %zu (%s)", h, rc, out.err_at, out.why ? out.why : "near");
    cJSON *a = cJSON_Parse(out.json), *b = cJSON_Parse(j);
    if (!a) fail_msg("'%s' became '%s', which cJSON refuses", h, out.json);
    assert_non_null(b);
    if (!cJSON_Compare(a, b, 1)) {
        char *s = cJSON_PrintUnformatted(a);
        fail_msg("'%s' reads as %s, expected %s", h, s, j);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    zn_hjson_free(&out);
}

/* spec: Z-CFG-046 comments, trailing commas, newlines for commas, quoteless
 * keys and values, single-quoted and multi-line strings, root braces
 * omitted: each reads as its strict-JSON spelling */
static void test_hjson_forms(void **st) {
    (void)st;
    same_tree("{\"a\": 1} // c", "{\"a\": 1}");
    same_tree("# c\n{\"a\": 1 # c\n}", "{\"a\": 1}");
    same_tree("{/* c\n c */ \"a\": /* c */ 1}", "{\"a\": 1}");
    same_tree("{\"a\": 1,}", "{\"a\": 1}");
    same_tree("{\"a\": [1, 2,],}", "{\"a\": [1, 2]}");
    same_tree("{\"a\": [1, 2, // two\n]}", "{\"a\": [1, 2]}");
    same_tree("{\n \"a\": 1\n \"b\": [1\n 2\n ]\n}", "{\"a\": 1, \"b\": [1, 2]}");
    same_tree("{a: 1, b_c: true, d-e: null}", "{\"a\": 1, \"b_c\": true, \"d-e\": null}");
    same_tree("{\"a\": hello world  \n}", "{\"a\": \"hello world\"}");
    same_tree("{\"a\": cpu, # not a comment: part of the string\n}", "{\"a\": \"cpu, # not a comment: part of the string\"}");
    same_tree("{\"a\": 1e8\n\"b\": -0.5 # c\n\"c\": 12 monkeys\n}", "{\"a\": 1e8, \"b\": -0.5, \"c\": \"12 monkeys\"}");
}

static void test_hjson_strings(void **st) {
    (void)st;
    same_tree("{'a': 'x \"y\" \\'z\\''}", "{\"a\": \"x \\\"y\\\" 'z'\"}");
    same_tree("{\"a\":\n  '''\n  line one\n    two\n  '''\n}", "{\"a\": \"line one\\n  two\"}");
    same_tree("{\"a\": tab\there\n}", "{\"a\": \"tab\\there\"}");
    same_tree("{\"a\": \"\\u00e9\\n\"}", "{\"a\": \"\\u00e9\\n\"}");
    same_tree("a: 1\nb: {c: 2}\n", "{\"a\": 1, \"b\": {\"c\": 2}}");
    same_tree("// only a comment\n\"a\": 1", "{\"a\": 1}");
}

/* spec: Z-CFG-046 strict JSON passes through unchanged, byte for byte, so
 * numbers keep cJSON's reading */
static void test_hjson_strict_unchanged(void **st) {
    (void)st;
    const char *js[] = {
        "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": 5e8}}",
        "{\n  \"a\": [1, -2.5e-3, true, false, null, \"s\\\"\\\\\"],\n  \"b\": {}\n}\n",
        "{\"x\": 9223372036854775807, \"y\": 1E+2, \"z\": \"\\ud83d\\ude00\"}", "[]", "  {}  ",
    };
    for (size_t i = 0; i < sizeof js / sizeof *js; i++) {
        ZnHjson out;
        assert_int_equal(zn_hjson_to_json(js[i], strlen(js[i]), &out), 0);
        assert_string_equal(out.json, js[i]);
        for (size_t k = 0; k <= out.len; k++) assert_int_equal(out.from[k], k);
        zn_hjson_free(&out);
    }
}

static void err_at(const char *text, const char *want) {
    ZnConfigArgs a;
    zn_config_args_init(&a);
    ZnConfig c;
    ZnErr e = {0};
    assert_int_equal(zn_config_parse(text, strlen(text), "ds.json", &a, &c, &e), ZN_E_USAGE);
    if (strcmp(e.msg, want)) fail_msg("'%s': got '%s', expected '%s'", text, e.msg, want);
}

/* spec: Z-CFG-047 errors in hjson text name the user's line and column and
 * what is wrong; a key given twice is still an error (DeepSpeed's
 * dict_raise_error_on_duplicate_keys) */
static void test_hjson_errors(void **st) {
    (void)st;
    err_at("{\n  \"a\": 1 /* open\n}", "ds.json:2:10: JSON syntax error: unterminated /* comment");
    err_at("{\n  \"a\": 'abc\n}", "ds.json:2:8: JSON syntax error: unterminated string");
    err_at("{\n  \"a\": '''abc\n}", "ds.json:2:8: JSON syntax error: unterminated ''' string");
    err_at("{\"a\": {\"b\": 1} \"c\": 2}", "ds.json:1:16: JSON syntax error near '\"c\": 2}'");
    err_at("{\n  a b: 1\n}", "ds.json:2:5: JSON syntax error near 'b: 1'");
    err_at("{\n  \"zero_optimization\": {stage: 2\n    stage: 3}\n}", "ds.json: zero_optimization.stage: duplicate key");
    err_at("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": two\n}}",
           "ds.json: zero_optimization.stage: expected an integer 0..3, got \"two\"");
    err_at("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": two}}",
           "ds.json:1:56: JSON syntax error: this value is not JSON, so hjson reads it as a string to the end of the "
           "line, closing bracket included (quote it, or fix it)");
}

/* spec: Z-CFG-047 nesting deeper than 1000 levels is an error, not a stack
 * overflow (100000 levels tried) */
static void test_hjson_deep(void **st) {
    (void)st;
    size_t n = 100000;
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) { s[i] = '['; s[2 * n - 1 - i] = ']'; }
    s[2 * n] = 0;
    ZnHjson out;
    assert_int_equal(zn_hjson_to_json(s, 2 * n, &out), -1);
    assert_string_equal(out.why, "nested deeper than 1000 levels");
    assert_int_equal(out.err_at, 1000);
    zn_hjson_free(&out);
    free(s);
}

/* spec: Z-CFG-047 every prefix of a config full of hjson forms reads or
 * fails cleanly: a failure's position lies inside the text */
static void test_hjson_every_prefix(void **st) {
    (void)st;
    const char *full = "# ds_config\n{\n  train_batch_size: 8 // eight\n  'fp16': {enabled: false,},\n"
                       "  /* zero */ \"zero_optimization\": {\"stage\": 2, reduce_bucket_size: 5e8\n  }\n"
                       "  notes: '''\n    two\n    lines\n    '''\n  tag: run one, two\n}\n";
    size_t n = strlen(full);
    int ok = 0;
    for (size_t k = 0; k <= n; k++) {
        ZnHjson out;
        int rc = zn_hjson_to_json(full, k, &out);
        if (rc == 0) {
            ok++;
            cJSON *t = cJSON_Parse(out.json);
            cJSON_Delete(t);
            for (size_t i = 0; i <= out.len; i++) assert_true(out.from[i] <= k);
        } else {
            assert_int_equal(rc, -1);
            assert_true(out.err_at <= k);
        }
        zn_hjson_free(&out);
    }
    assert_true(ok > 0);
    same_tree(full, "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": false}, \"zero_optimization\": {\"stage\": 2,"
                    " \"reduce_bucket_size\": 5e8}, \"notes\": \"two\\nlines\", \"tag\": \"run one, two\"}");
}

ZT_MAIN(
    cmocka_unit_test(test_hjson_forms),
    cmocka_unit_test(test_hjson_strings),
    cmocka_unit_test(test_hjson_strict_unchanged),
    cmocka_unit_test(test_hjson_errors),
    cmocka_unit_test(test_hjson_deep),
    cmocka_unit_test(test_hjson_every_prefix))
