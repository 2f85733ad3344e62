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

/* spec: Z-CFG-046 single-quoted and multi-line strings, quoteless values
 * with tabs, escapes kept as cJSON reads them, root braces omitted */
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

/* the text h of n bytes must become exactly the strict JSON j */
static void becomes(const char *h, size_t n, const char *j) {
    ZnHjson out;
    int rc = zn_hjson_to_json(h, n, &out);
    if (rc) fail_msg("'%s': rc %d at %zu (%s)", h, rc, out.err_at, out.why ? out.why : "near");
    if (strcmp(out.json, j)) fail_msg("'%s' became '%s', expected '%s'", h, out.json, j);
    assert_int_equal(out.len, strlen(j));
    assert_int_equal(out.from[out.len], n);
    zn_hjson_free(&out);
}

/* the text h must be refused at input offset at, for reason why (NULL: no
   reason, so the config reports what is there, or the end of input) */
static void refused(const char *h, size_t at, const char *why) {
    ZnHjson out;
    int rc = zn_hjson_to_json(h, strlen(h), &out);
    if (rc != -1) fail_msg("'%s': rc %d, expected -1", h, rc);
    if (out.err_at != at) fail_msg("'%s': error at %zu, expected %zu", h, out.err_at, at);
    if (why ? !out.why || strcmp(out.why, why) : out.why != NULL)
        fail_msg("'%s': why '%s', expected '%s'", h, out.why ? out.why : "(null)", why ? why : "(null)");
    zn_hjson_free(&out);
}

/* spec: Z-CFG-046 quoteless keys and values are quoted with JSON escapes:
 * a '"' or '\\' or a control byte in them is data (hjson-py: a quoteless
 * key ends only at whitespace or {}[],: and a quoteless string runs to the
 * end of the line) */
static void test_hjson_quoteless_escapes(void **st) {
    (void)st;
    same_tree("{a: say \"hi\" \\o/\n}", "{\"a\": \"say \\\"hi\\\" \\\\o/\"}");
    same_tree("{a: x\x01y\x1f\n}", "{\"a\": \"x\\u0001y\\u001f\"}");
    same_tree("{a\"b\\c: 1}", "{\"a\\\"b\\\\c\": 1}");
    same_tree("{a\x01" "b: 1}", "{\"a\\u0001b\": 1}");
    /* the value ends at a CR, and trailing tabs are trimmed */
    same_tree("{a: hello \r\n b: x\t\t\n}", "{\"a\": \"hello\", \"b\": \"x\"}");
    becomes("{a: x\"y\n}", 9, "{\"a\": \"x\\\"y\"\n}");
}

/* spec: Z-CFG-046 a quoteless value is a number only when all of it is a
 * JSON number (hjson-py's NUMBER_RE must match to the end); otherwise it
 * is a string, and a number ends at a comment as at a separator */
static void test_hjson_numbers(void **st) {
    (void)st;
    same_tree("{a: -x\nb: -\nc: 1.\nd: 1.x\ne: 1e\nf: 1e+\ng: 1ex\nh: 01\ni: 1e5x\nj: 1.5x\n}",
              "{\"a\": \"-x\", \"b\": \"-\", \"c\": \"1.\", \"d\": \"1.x\", \"e\": \"1e\", \"f\": \"1e+\", \"g\": \"1ex\","
              " \"h\": \"01\", \"i\": \"1e5x\", \"j\": \"1.5x\"}");
    same_tree("{a: 1.-\nb: 1.5-\nc: 1e.\nd: 1e5.\n}", "{\"a\": \"1.-\", \"b\": \"1.5-\", \"c\": \"1e.\", \"d\": \"1e5.\"}");
    same_tree("{a: 1E-5\nb: -0\nc: 2.50e+3\n}", "{\"a\": 1E-5, \"b\": -0, \"c\": 2.50e+3}");
    /* a number or word that ends the input */
    same_tree("a: 12", "{\"a\": 12}");
    same_tree("a: 1.5", "{\"a\": 1.5}");
    same_tree("a: 1e5", "{\"a\": 1e5}");
    same_tree("a: true", "{\"a\": true}");
    /* a comment right after the number ends it; a '/' alone does not */
    same_tree("{a: 1#c\nb: 2//c\nc: 3/*c*/}", "{\"a\": 1, \"b\": 2, \"c\": 3}");
    same_tree("{a: 1/2\n}", "{\"a\": \"1/2\"}");
    same_tree("{a: true x\nb: null # c\n}", "{\"a\": \"true x\", \"b\": null}");
}

/* spec: Z-CFG-046 comments: a '*' inside a block comment does not end it,
 * a block comment may span lines wherever whitespace may stand, and a '/'
 * that starts no comment is not skipped */
static void test_hjson_comments(void **st) {
    (void)st;
    same_tree("{/* a * b **/ a: 1}", "{\"a\": 1}");
    same_tree("{a: /* x\n */ 1, b /*\n*/ : 2}", "{\"a\": 1, \"b\": 2}");
    same_tree("/* c\n*/ a: 1", "{\"a\": 1}");
    static const struct { const char *in; size_t at; const char *why; } bad[] = {   /* input, offset, reason */
        {"{\"a\": 1}/", 8, NULL},
        {"{\"a\": \"1\" /x}", 10, NULL},
        /* hjson-py: "1 /x}" is a quoteless string, bracket included */
        {"{\"a\": 1 /x}", 6, "this value is not JSON, so hjson reads it as a string to the end of the line, "
                            "closing bracket included (quote it, or fix it)"},
        {"{/* abc *", 1, "unterminated /* comment"},
        {"{\"a\": 1}/*", 8, "unterminated /* comment"},
        {"{a /* x", 3, "unterminated /* comment"},
        {"{a: /* x", 4, "unterminated /* comment"},
        {"{a: 1, /* x", 7, "unterminated /* comment"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refused(bad[i].in, bad[i].at, bad[i].why);
    err_at("{\"a\": 1}\n/", "ds.json:2:1: JSON syntax error near '/'");
}

/* spec: Z-CFG-046 quoted strings: a backslash is copied with what follows
 * (cJSON judges it), "\'" in a single-quoted string is a quote, and a
 * string that runs to the end of the input is unterminated (Z-CFG-001) */
static void test_hjson_quoted(void **st) {
    (void)st;
    same_tree("{'a b': 'x\\ty\\\\z\\u00e9'}", "{\"a b\": \"x\\ty\\\\z\\u00e9\"}");
    same_tree("{a: ''\nb: ''}", "{\"a\": \"\", \"b\": \"\"}");
    same_tree("a: ''", "{\"a\": \"\"}");
    becomes("['\\'\"']", 7, "[\"'\\\"\"]");
    const char *open_str[3] = {"{\"a\": \"x\\", "{a: 'x\\", "{a: 'x"};   /* each unterminated at its quote */
    const size_t quote_at[3] = {6, 4, 4};
    for (int i = 0; i < 3; i++) refused(open_str[i], quote_at[i], "unterminated string");
    err_at("{\"a\": \"x\\", "ds.json:1:7: JSON syntax error: unterminated string");
}

/* spec: Z-CFG-046 '''multi-line''' strings (hjson-py scanmlstring): the
 * opening quotes' indentation, spaces or tabs, is removed from each line,
 * CRs are dropped, whitespace after the opening quotes and its line break
 * are not content, and one or two quotes are content */
static void test_hjson_multiline(void **st) {
    (void)st;
    static const char *const cases[][2] = {   /* hjson text, the JSON it must equal */
        {"a:\n  '''  \r\n  x\r\n\t y\r\n  '''", "{\"a\": \"x\\ny\"}"},
        {"a:\n  '''\n  x\n  ''y\n  'z'''", "{\"a\": \"x\\n''y\\n'z\"}"},
        {"a:\n  '''\n  x\n\t'''", "{\"a\": \"x\"}"},
        {"a: '''\tx\n'''", "{\"a\": \"x\"}"},
        {"a: '''x'''", "{\"a\": \"x\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) same_tree(cases[i][0], cases[i][1]);
    /* at the very start of the input (column 1): the root may be any value */
    becomes("'''abc'''", 9, "\"abc\"");
    refused("a: '''\nabc\n''", 3, "unterminated ''' string");
    refused("a: '''x''", 3, "unterminated ''' string");
}

/* spec: Z-CFG-046 '''multi-line''' strings as hjson-py reads them: the line
 * break before the closing quotes is dropped only when no more than the
 * indent stands between them; closing quotes indented deeper keep it and
 * the extra blanks (hjson-py: {"a": "x\n    "}) */
static void test_hjson_multiline_deep_close(void **st) {
    (void)st;
    same_tree("a:\n  '''\n  x\n      '''\n", "{\"a\": \"x\\n    \"}");
    same_tree("a:\n  '''\n  x\n  '''\n", "{\"a\": \"x\"}");
    same_tree("a:\n  '''\n  x\n '''\n", "{\"a\": \"x\"}");
}

/* spec: Z-CFG-047 every input reads or fails with a position inside it: a
 * NUL byte where a member of a braceless root may start is refused there,
 * as it is with braces (it once read as the end of the object) */
static void test_hjson_nul_in_braceless_root(void **st) {
    (void)st;
    ZnHjson out;
    assert_int_equal(zn_hjson_to_json("a: 1\n\0b: 2", 11, &out), -1);
    assert_int_equal(out.err_at, 5);
    zn_hjson_free(&out);
    assert_int_equal(zn_hjson_to_json("a: 1,\0b: 2", 11, &out), -1);
    assert_int_equal(out.err_at, 5);
    zn_hjson_free(&out);
}

/* spec: Z-CFG-046 separators: a trailing comma before the end of a
 * braceless root is dropped; a value may not start with a separator
 * (hjson-py: "Found a punctuator character when expecting a quoteless
 * string"); a ']' in a quoteless value is swallowed as '}' is (Z-CFG-001) */
static void test_hjson_separators(void **st) {
    (void)st;
    same_tree("a: 1,", "{\"a\": 1}");
    same_tree("a: 1, # c\n", "{\"a\": 1}");
    refused("[1,", 3, NULL);
    refused("{a: 1,", 6, NULL);
    refused("{a: 1, ", 7, NULL);
    refused("[,1]", 1, NULL);
    refused("{a: ]", 4, NULL);
    err_at("{a: :x}", "ds.json:1:5: JSON syntax error near ':x}'");
    refused("a: [x]", 4, "this value is not JSON, so hjson reads it as a string to the end of the line, closing "
                         "bracket included (quote it, or fix it)");
    err_at("{\"a\": [x]}", "ds.json:1:8: JSON syntax error: this value is not JSON, so hjson reads it as a string to "
                           "the end of the line, closing bracket included (quote it, or fix it)");
}

/* spec: Z-CFG-046 keys: quoted, single-quoted or quoteless, and a key must
 * be followed by ':' and a value (Z-CFG-001 reports where) */
static void test_hjson_keys(void **st) {
    (void)st;
    static const struct { const char *in; size_t at; } bad[] = {   /* input, where it is refused */
        {"{:1}", 1}, {"{a:1, :2}", 6}, {"{a", 2}, {"{a:", 3}, {"{a:  ", 5}, {"{a 1}", 3},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refused(bad[i].in, bad[i].at, NULL);
    err_at("{\n  a\n}", "ds.json:3:1: JSON syntax error near '}'");
    err_at("{a:", "ds.json:1:4: JSON syntax error: unexpected end of input");
}

/* spec: Z-CFG-046 an object without its root braces is recognised by a
 * key (quoted, single-quoted, escaped, or quoteless, spaces or tabs
 * before its ':') at the start; anything else is one value, which must
 * end the input */
static void test_hjson_root(void **st) {
    (void)st;
    same_tree("'a': 1", "{\"a\": 1}");
    same_tree("\"a\\\"b\": 1", "{\"a\\\"b\": 1}");
    same_tree("a :1", "{\"a\": 1}");
    same_tree("a\t: 1", "{\"a\": 1}");
    becomes("abc", 3, "\"abc\"");
    becomes("", 0, "");
    becomes("# c\n", 4, "\n");
    refused("\"abc", 0, "unterminated string");
    refused("'abc", 0, "unterminated string");
    refused("[1] x", 4, NULL);
    refused("a: 1\nb", 6, NULL);
    refused("a: 1\nb: /*", 8, "unterminated /* comment");
    refused("/* x", 0, "unterminated /* comment");
    err_at("[1] x", "ds.json:1:5: JSON syntax error near 'x'");
    err_at("# only a comment\n", "ds.json:2:1: JSON syntax error: unexpected end of input");
}

/* Allocation failure (Z-CFG-047). This binary is linked with
 * -Wl,--wrap=realloc (Makefile): zinc's realloc calls (hjson.c allocates
 * only through zn_realloc) come here and go on to the real one, except that
 * once armed with k the k-th call from then on returns NULL, as a machine
 * out of memory would. */
static long realloc_countdown;   /* 0: off */

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) {
    if (realloc_countdown > 0 && --realloc_countdown == 0) return NULL;
    return __real_realloc(p, n);
}

/* spec: Z-CFG-047 an allocation failure while reading is out of memory
 * (-2), not a syntax error, and leaves nothing to leak, wherever it comes:
 * the output grows at its 256th byte (realloc 3 for the text, 4 for the
 * offset map, after 1 and 2 at the first byte), and the text is shifted by
 * 0..255 leading spaces so that every output byte of each form, the final
 * NUL included, is once the one whose growth fails */
static void test_hjson_out_of_memory(void **st) {
    (void)st;
    const char *texts[] = {
        "a: say \"hi\" \\o/\x01\tend\n'b c': [1, true,]\n",
        "{\"k\": \"v\\t\", 'q': 'it\\'s \"x\" \\n', m: '''\n  l1\r\n  l2\n  '''\n  n: [1\n 2], o: {}\n}",
        "[1, 2 /* open",
    };
    char buf[512];
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        size_t len = strlen(texts[t]), n_fired = 0;
        for (size_t pad = 0; pad < 256; pad++) {
            memset(buf, ' ', pad);
            memcpy(buf + pad, texts[t], len);
            ZnHjson out;
            int want = zn_hjson_to_json(buf, pad + len, &out);   /* unarmed: the real outcome */
            assert_int_equal(want, t == 2 ? -1 : 0);
            size_t out_len = out.len;
            zn_hjson_free(&out);
            for (long k = 1; k <= 4; k++) {
                if (pad && k <= 2) continue;   /* the first byte is a space whatever the pad */
                realloc_countdown = k;
                int rc = zn_hjson_to_json(buf, pad + len, &out);
                int fired = realloc_countdown == 0;
                realloc_countdown = 0;
                n_fired += (size_t)fired;
                /* 256 bytes with the NUL: the output grows once */
                if (!want && k >= 3 && fired != (out_len + 1 >= 256))
                    fail_msg("text %zu pad %zu realloc %ld: fired %d with %zu bytes", t, pad, k, fired, out_len);
                if (rc != (fired ? -2 : want))
                    fail_msg("text %zu pad %zu realloc %ld: rc %d, fired %d", t, pad, k, rc, fired);
                zn_hjson_free(&out);
            }
        }
        assert_true(n_fired >= 4);   /* the first byte twice, and a growth */
    }
    /* through the config: a message about memory, not about syntax */
    ZnConfigArgs a;
    zn_config_args_init(&a);
    ZnConfig c;
    ZnErr e = {0};
    realloc_countdown = 1;
    int rc = zn_config_parse("a: 1", 4, "ds.json", &a, &c, &e);
    realloc_countdown = 0;
    assert_int_equal(rc, ZN_E_NOMEM);
    assert_string_equal(e.msg, "ds.json: out of host memory while reading the config");
}

ZT_MAIN(
    cmocka_unit_test(test_hjson_forms),
    cmocka_unit_test(test_hjson_strings),
    cmocka_unit_test(test_hjson_strict_unchanged),
    cmocka_unit_test(test_hjson_errors),
    cmocka_unit_test(test_hjson_deep),
    cmocka_unit_test(test_hjson_every_prefix),
    cmocka_unit_test(test_hjson_quoteless_escapes),
    cmocka_unit_test(test_hjson_numbers),
    cmocka_unit_test(test_hjson_comments),
    cmocka_unit_test(test_hjson_quoted),
    cmocka_unit_test(test_hjson_multiline),
    cmocka_unit_test(test_hjson_separators),
    cmocka_unit_test(test_hjson_keys),
    cmocka_unit_test(test_hjson_root),
    cmocka_unit_test(test_hjson_out_of_memory),
    cmocka_unit_test(test_hjson_multiline_deep_close),
    cmocka_unit_test(test_hjson_nul_in_braceless_root))
