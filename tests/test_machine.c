/* test_machine.c: machines for step-time predictions (spec Z-MACH-*): the
 * presets' figures, the JSON file (overrides of a preset, a full file),
 * the bit-exact round trip through zn_machine_write_json, and the errors of
 * bad files (code, file name, JSON path, byte offset). */
#include "testutil.h"
#include "app/machine.h"

#include <float.h>
#include <sys/stat.h>

/* ---- helpers ------------------------------------------------------------ */

/* text written to a file and loaded; fails the test if it does not load */
static ZnMachine load_text(const char *text) {
    const char *path = zt_path("m.json");
    zt_write_text(path, text);
    ZnMachine m;
    ZnErr err = {0};
    if (zn_machine_load(path, &m, &err)) fail_msg("load: %s", err.msg);
    return m;
}

static ZnMachine preset(const char *name) {
    ZnMachine m;
    ZnErr err = {0};
    if (zn_machine_preset(name, &m, &err)) fail_msg("preset: %s", err.msg);
    return m;
}

/* every field equal, doubles bit for bit */
static void assert_same_machine(const ZnMachine *a, const ZnMachine *b) {
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->gpus_per_node, b->gpus_per_node);
    assert_int_equal(a->overlap, b->overlap);
    const double da[] = {a->device_flops, a->device_flops_fp32, a->device_mem_bw, a->device_memory, a->intra.alpha, a->intra.beta,
                         a->inter.alpha, a->inter.beta, a->h2d_bw, a->host_adam_rate, a->nvme_bw};
    const double db[] = {b->device_flops, b->device_flops_fp32, b->device_mem_bw, b->device_memory, b->intra.alpha, b->intra.beta,
                         b->inter.alpha, b->inter.beta, b->h2d_bw, b->host_adam_rate, b->nvme_bw};
    for (size_t i = 0; i < sizeof da / sizeof *da; i++)
        if (memcmp(&da[i], &db[i], sizeof(double)))
            fail_msg("figure %zu: %.17g != %.17g", i, da[i], db[i]);
}

/* m written to a file and loaded back */
static ZnMachine round_trip(const ZnMachine *m) {
    const char *path = zt_path("rt.json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    ZnErr err = {0};
    if (zn_machine_write_json(f, m, &err)) fail_msg("write: %s", err.msg);
    assert_int_equal(fclose(f), 0);
    ZnMachine back;
    if (zn_machine_load(path, &back, &err)) fail_msg("load back: %s", err.msg);
    return back;
}

static char *json_of(const ZnMachine *m) {
    FILE *f = tmpfile();
    assert_non_null(f);
    ZnErr err = {0};
    if (zn_machine_write_json(f, m, &err)) fail_msg("write: %s", err.msg);
    return zt_slurp(f, NULL);
}

/* the brief's example file: every key, no preset */
#define FULL_FILE                                                                                        \
    "{\"name\": \"my-node\", \"gpus_per_node\": 8, \"device_tflops\": 593.6, \"device_mem_gbps\": 2680,"  \
    " \"device_memory_gib\": 80,\n"                                                                      \
    " \"intra_node\": {\"latency_us\": 3, \"bandwidth_gbps\": 360},"                                     \
    " \"inter_node\": {\"latency_us\": 8, \"bandwidth_gbps\": 45},\n"                                    \
    " \"host_device_gbps\": 51.2, \"host_adam_gelems\": 1.0, \"nvme_gbps\": 3.0}\n"

/* ---- presets ------------------------------------------------------------ */

/* the presets' figures, written out (the doubles compared bit for bit) */
static const ZnMachine PRESETS[] = {
    {.name = "dgx-h100", .gpus_per_node = 8, .overlap = 1, .device_flops = 989.4e12 * 0.6,
     .device_flops_fp32 = 66.9e12 * 0.6,
     .device_mem_bw = 3.35e12 * 0.8, .device_memory = 85899345920.0 /* 80 GiB */, .intra = {1e-6, 450e9 * 0.8},
     .inter = {6e-6, 50e9 * 0.9}, .h2d_bw = 64e9 * 0.8, .host_adam_rate = 1.0e9, .nvme_bw = 3.0e9},
    {.name = "dgx-a100", .gpus_per_node = 8, .overlap = 1, .device_flops = 312e12 * 0.6,
     .device_flops_fp32 = 19.5e12 * 0.6,
     .device_mem_bw = 2.039e12 * 0.8, .device_memory = 85899345920.0, .intra = {1e-6, 300e9 * 0.8},
     .inter = {6e-6, 25e9 * 0.9}, .h2d_bw = 32e9 * 0.8, .host_adam_rate = 0.5e9, .nvme_bw = 2.0e9},
};

/* spec: Z-MACH-001 */
static void test_preset_dgx_h100(void **state) {
    (void)state;
    ZnMachine m = preset("dgx-h100");
    assert_same_machine(&m, &PRESETS[0]);
}

/* spec: Z-MACH-001 */
static void test_preset_dgx_a100(void **state) {
    (void)state;
    ZnMachine m = preset("dgx-a100");
    assert_same_machine(&m, &PRESETS[1]);
}

/* spec: Z-MACH-002 */
static void test_preset_names(void **state) {
    (void)state;
    assert_string_equal(zn_machine_preset_names(), "dgx-h100, dgx-a100");
    /* each listed name is a preset, by zn_machine_preset and zn_machine_load */
    char names[128];
    snprintf(names, sizeof names, "%s", zn_machine_preset_names());
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(names, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save), n++) {
        ZnMachine a = preset(tok), b;
        ZnErr err = {0};
        assert_int_equal(zn_machine_load(tok, &b, &err), 0);
        assert_same_machine(&a, &b);
    }
    assert_int_equal(n, 2);
    ZnMachine m;
    ZnErr err = {0};
    assert_int_equal(zn_machine_preset("dgx-h200", &m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "'dgx-h200'");
    assert_str_contains(err.msg, "dgx-h100, dgx-a100");
}

/* ---- files -------------------------------------------------------------- */

/* spec: Z-MACH-003 */
static void test_full_file(void **state) {
    (void)state;
    ZnMachine m = load_text(FULL_FILE);
    /* C reads a decimal literal as strtod does: the double nearest the decimal */
    /* no device_tflops_fp32: the one GEMM rate the file gives */
    const ZnMachine want = {.name = "my-node", .gpus_per_node = 8, .overlap = 1, .device_flops = 593.6e12,
                            .device_flops_fp32 = 593.6e12,
                            .device_mem_bw = 2680e9, .device_memory = 80.0 * 1073741824.0, .intra = {3e-6, 360e9},
                            .inter = {8e-6, 45e9}, .h2d_bw = 51.2e9, .host_adam_rate = 1.0e9, .nvme_bw = 3.0e9};
    assert_same_machine(&m, &want);
}

/* spec: Z-MACH-003 device_tflops_fp32 is optional everywhere: a preset's
 * own without the key, the file's device_tflops where it gives that alone
 * (with or without a preset), the file's own where it gives it; like every
 * figure a finite number > 0 */
static void test_fp32_rate(void **state) {
    (void)state;
    ZnMachine m = load_text("{\"preset\": \"dgx-h100\", \"nvme_gbps\": 2}");
    assert_true(m.device_flops_fp32 == 66.9e12 * 0.6 && m.device_flops == 989.4e12 * 0.6);
    m = load_text("{\"preset\": \"dgx-h100\", \"device_tflops\": 0.27}");
    assert_true(m.device_flops_fp32 == 0.27e12 && m.device_flops == 0.27e12);
    m = load_text("{\"preset\": \"dgx-a100\", \"device_tflops_fp32\": 15.6}");
    assert_true(m.device_flops_fp32 == 15.6e12 && m.device_flops == 312e12 * 0.6);
    m = load_text("{\"preset\": \"dgx-a100\", \"device_tflops_fp32\": 15.6, \"device_tflops\": 150}");
    assert_true(m.device_flops_fp32 == 15.6e12 && m.device_flops == 150e12);
    /* the writer always writes it, and it reads back */
    char *j = json_of(&m);
    assert_str_contains(j, "\"device_tflops\": 150,\n  \"device_tflops_fp32\": 15.6,\n");
    free(j);
    ZnMachine back = round_trip(&m);
    assert_same_machine(&back, &m);
    ZnErr err = {0};
    const char *path = zt_path("fp32.json");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"preset\": \"dgx-h100\", \"device_tflops_fp32\": 0}", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(zn_machine_load(path, &m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "device_tflops_fp32: expected a finite number > 0, got 0");
}

/* spec: Z-MACH-003 */
static void test_override_one_key(void **state) {
    (void)state;
    ZnMachine want = preset("dgx-h100");
    want.inter.beta = 22.5e9;
    ZnMachine m = load_text("{\"preset\": \"dgx-h100\", \"inter_node\": {\"bandwidth_gbps\": 22.5}}");
    assert_same_machine(&m, &want);   /* the name stays the preset's */
    /* a name, and a top-level key, over the other preset */
    want = preset("dgx-a100");
    snprintf(want.name, sizeof want.name, "a100-4gpu");
    want.gpus_per_node = 4;
    m = load_text("{\"gpus_per_node\": 4, \"name\": \"a100-4gpu\", \"preset\": \"dgx-a100\"}");
    assert_same_machine(&m, &want);
    /* the bounds of gpus_per_node are in; an integral 8.0 is 8 */
    assert_int_equal(load_text("{\"preset\": \"dgx-a100\", \"gpus_per_node\": 4096}").gpus_per_node, 4096);
    assert_int_equal(load_text("{\"preset\": \"dgx-a100\", \"gpus_per_node\": 1}").gpus_per_node, 1);
    assert_int_equal(load_text("{\"preset\": \"dgx-a100\", \"gpus_per_node\": 8.0}").gpus_per_node, 8);
    /* a preset alone is the preset */
    m = load_text("{\"preset\": \"dgx-a100\"}");
    want = preset("dgx-a100");
    assert_same_machine(&m, &want);
    /* overlap: the presets' true, a file's false (zinc's CPU ranks), and back */
    assert_int_equal(want.overlap, 1);
    m = load_text("{\"preset\": \"dgx-a100\", \"overlap\": false}");
    assert_int_equal(m.overlap, 0);
    ZnMachine back = round_trip(&m);
    assert_same_machine(&back, &m);
}

/* spec: Z-MACH-004 */
static void test_units_scale_the_decimal(void **state) {
    (void)state;
    /* 0.27 TFLOP/s is the double nearest 0.27 x 10^12, which the double
       0.27 times 1e12 is not (one rounding, not two); 0.11 us likewise */
    assert_true(0.27 * 1e12 != 0.27e12);
    assert_true(0.11 * 1e-6 != 0.11e-6);
    ZnMachine m = load_text("{\"preset\": \"dgx-h100\", \"device_tflops\": 0.27, \"device_mem_gbps\": 0.3,"
                            " \"host_device_gbps\": 1.1, \"nvme_gbps\": 5.9364e-3,"
                            " \"intra_node\": {\"latency_us\": 2.5E+1}, \"inter_node\": {\"latency_us\": 0.11},"
                            " \"device_memory_gib\": 0.5}");
    assert_true(m.device_flops == 0.27e12);
    assert_true(m.device_mem_bw == 0.3e9);
    assert_true(m.h2d_bw == 1.1e9);
    assert_true(m.nvme_bw == 5.9364e6);
    assert_true(m.intra.alpha == 25e-6);
    assert_true(m.inter.alpha == 0.11e-6);
    assert_true(m.device_memory == 536870912.0);   /* GiB scales by 2^30, exactly */
}

/* spec: Z-MACH-005 */
static void test_name_or_path(void **state) {
    (void)state;
    /* a preset name wins over a file of that name; a path with a slash is a file */
    ZnMachine m;
    ZnErr err = {0};
    assert_int_equal(zn_machine_load("dgx-h100", &m, &err), 0);
    assert_string_equal(m.name, "dgx-h100");
    /* a file with a preset's name is reached by a path */
    zt_write_text(zt_path("dgx-a100"), "{\"preset\": \"dgx-h100\", \"name\": \"from-file\"}");
    assert_int_equal(zn_machine_load(zt_path("dgx-a100"), &m, &err), 0);
    assert_string_equal(m.name, "from-file");
    /* a missing file: ZN_E_IO, naming the file, errno's words and the presets */
    const char *path = zt_path("absent.json");
    assert_int_equal(zn_machine_load(path, &m, &err), ZN_E_IO);
    assert_str_contains(err.msg, path);
    assert_str_contains(err.msg, "No such file");
    assert_str_contains(err.msg, "dgx-h100, dgx-a100");
    assert_int_equal(zn_machine_load("dgx-h1000", &m, &err), ZN_E_IO);
    assert_str_contains(err.msg, "dgx-h1000");
    assert_str_contains(err.msg, "not a machine preset either");
    /* a directory is no file */
    assert_int_equal(zn_machine_load(zt_tmpdir(), &m, &err), ZN_E_IO);
    assert_str_contains(err.msg, "not a regular file");
}

/* spec: Z-MACH-005 */
static void test_size_cap(void **state) {
    (void)state;
    /* exactly 1 MiB (padded with whitespace) loads; one byte more does not */
    size_t cap = (size_t)1 << 20;
    char *big = malloc(cap + 2);
    assert_non_null(big);
    const char *body = "{\"preset\": \"dgx-h100\"}";
    memset(big, ' ', cap + 1);
    memcpy(big, body, strlen(body));
    const char *path = zt_path("big.json");
    zt_write_bytes(path, big, cap);
    ZnMachine m;
    ZnErr err = {0};
    assert_int_equal(zn_machine_load(path, &m, &err), 0);
    zt_write_bytes(path, big, cap + 1);
    assert_int_equal(zn_machine_load(path, &m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, path);
    assert_str_contains(err.msg, "1048577 bytes");
    assert_str_contains(err.msg, "more than the 1048576-byte limit");
    free(big);
}

/* ---- writing ------------------------------------------------------------ */

/* spec: Z-MACH-006 */
static void test_presets_round_trip(void **state) {
    (void)state;
    const char *names[] = {"dgx-h100", "dgx-a100"};
    for (int i = 0; i < 2; i++) {
        ZnMachine m = preset(names[i]);
        ZnMachine back = round_trip(&m);
        assert_same_machine(&back, &m);
    }
}

/* spec: Z-MACH-006 */
static void test_odd_values_round_trip(void **state) {
    (void)state;
    /* values whose scaled double would not read back: thirds, neighbours of
       round numbers, the extremes of the double range */
    ZnMachine m = preset("dgx-h100");
    snprintf(m.name, sizeof m.name, "quote\" back\\slash \xc3\xa9");   /* é: UTF-8 passes */
    m.gpus_per_node = 4096;
    m.device_flops = 1e15 / 3;
    m.device_mem_bw = nextafter(2.68e12, 0);
    m.device_memory = nextafter(80.0 * 1073741824.0, INFINITY);
    m.intra.alpha = 1.0 / 3e6;
    m.intra.beta = DBL_MAX;
    m.inter.alpha = 5e-324;   /* the smallest subnormal */
    m.inter.beta = nextafter(45e9, INFINITY);
    m.h2d_bw = 51.2e9 * (1 + DBL_EPSILON);
    m.host_adam_rate = 0.1;
    m.nvme_bw = 1e-300;
    ZnMachine back = round_trip(&m);
    assert_same_machine(&back, &m);
    /* and a pseudo-random sweep of magnitudes and mantissas */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 200; i++) {
        double *f[] = {&m.device_flops, &m.device_mem_bw, &m.intra.alpha, &m.intra.beta, &m.inter.alpha,
                       &m.inter.beta, &m.h2d_bw, &m.host_adam_rate, &m.nvme_bw, &m.device_memory};
        for (int j = 0; j < 10; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            /* mantissa in [1, 2), exponent in [-60, 60) */
            *f[j] = ldexp(1.0 + (double)(s >> 11) / 9007199254740992.0, (int)(s % 120) - 60);
        }
        back = round_trip(&m);
        assert_same_machine(&back, &m);
    }
}

/* spec: Z-MACH-006 */
static void test_written_form(void **state) {
    (void)state;
    ZnMachine m = preset("dgx-h100");
    char *j = json_of(&m);
    /* every key, the name too, in the file's units; no preset */
    assert_str_contains(j, "\"name\": \"dgx-h100\"");
    assert_str_contains(j, "\"gpus_per_node\": 8,");
    assert_str_contains(j, "\"overlap\": true,");
    assert_str_contains(j, "\"device_memory_gib\": 80,");
    assert_str_contains(j, "\"intra_node\": {\"latency_us\": 1, \"bandwidth_gbps\": 360}");
    assert_str_contains(j, "\"inter_node\": {\"latency_us\": 6, \"bandwidth_gbps\": 45}");
    assert_str_contains(j, "\"host_adam_gelems\": 1,");
    assert_str_contains(j, "\"nvme_gbps\": 3\n");
    assert_null(strstr(j, "preset"));
    assert_non_null(strstr(j, "\"device_tflops\": "));
    assert_non_null(strstr(j, "\"device_mem_gbps\": "));
    assert_non_null(strstr(j, "\"host_device_gbps\": "));
    free(j);
    /* the full file written back has the file's own numbers */
    m = load_text(FULL_FILE);
    j = json_of(&m);
    assert_str_contains(j, "\"device_tflops\": 593.6,");
    assert_str_contains(j, "\"device_mem_gbps\": 2680,");
    assert_str_contains(j, "\"host_device_gbps\": 51.2,");
    free(j);
    /* tiny and huge numbers in exponent form, still JSON */
    m.inter.alpha = 1.5e-15;
    m.intra.beta = 1e40;
    j = json_of(&m);
    assert_str_contains(j, "\"latency_us\": 1.5e-9,");
    assert_str_contains(j, "\"bandwidth_gbps\": 1e+31}");
    free(j);
}

/* spec: Z-MACH-006 */
static void test_write_refuses_invalid(void **state) {
    (void)state;
    ZnMachine good = preset("dgx-h100");
    struct { const char *why; ZnMachine m; const char *part; } cases[6];
    for (int i = 0; i < 6; i++) cases[i].m = good;
    cases[0].why = "gpus 0", cases[0].m.gpus_per_node = 0, cases[0].part = "gpus_per_node";
    cases[1].why = "nan", cases[1].m.device_flops = NAN, cases[1].part = "device_tflops";
    cases[2].why = "negative", cases[2].m.inter.beta = -1, cases[2].part = "inter_node.bandwidth_gbps";
    cases[3].why = "empty name", cases[3].m.name[0] = 0, cases[3].part = "name";
    cases[4].why = "newline", snprintf(cases[4].m.name, 64, "a\nb"), cases[4].part = "name";
    cases[5].why = "bad utf-8", snprintf(cases[5].m.name, 64, "a\xff"), cases[5].part = "name";
    for (int i = 0; i < 6; i++) {
        FILE *f = tmpfile();
        assert_non_null(f);
        ZnErr err = {0};
        if (zn_machine_write_json(f, &cases[i].m, &err) != ZN_E_USAGE) fail_msg("%s: written", cases[i].why);
        assert_str_contains(err.msg, cases[i].part);
        fclose(f);
    }
}

/* ---- bad files ---------------------------------------------------------- */

/* A file zn_machine_load must refuse: its text, and a part of the message,
 * or two joined by " ... " (the message contains both). Every message also
 * names the file and the code is ZN_E_USAGE. */
typedef struct {
    const char *text;
    const char *want;
} BadFile;

/* whole files */
static const BadFile BAD_FILES[] = {
    /* syntax: the byte offset (from 0) where the parser stopped, line, column */
    {"{\"preset\": \"dgx-h100\",}", "JSON syntax error at byte 22 ... (line 1, column 23)"},
    {"{\"preset\": \"dgx-h100\"\n  \"nvme_gbps\": 3}", "at byte 24 (line 2, column 3)"},
    {"{\"preset\": \"dgx-h100\"} x", "at byte 23"},
    {"", "at byte 0 ... unexpected end of input"},
    {"{\"preset\": \"dgx-h100\"", "at byte 21 ... unexpected end of input"},
    {"{\"preset\": \"dgx-h100\", \"name\": \"abc}", "at byte 31 ... unterminated string"},
    {"{\"preset\": \"dgx-h100\", nvme_gbps: 3}", "at byte 23"},
    {"{\"nvme_gbps\": 0x10}", "JSON syntax error"},
    {"{\"nvme_gbps\": NaN}", "JSON syntax error"},
    /* the shape */
    {"[1, 2]", "the top level: expected a JSON object, got an array"},
    {"7", "the top level: expected a JSON object, got 7"},
    /* the preset */
    {"{\"preset\": \"dgx-h200\"}", "preset: unknown preset \"dgx-h200\" ... (presets: dgx-h100, dgx-a100)"},
    {"{\"preset\": 100}", "preset: expected a preset name, got 100"},
    /* without a preset every key is required */
    {"{\"name\": \"x\"}", "gpus_per_node: missing ... without \"preset\""},
    {"{\"gpus_per_node\": 8}", "name: missing"},
    {"{}", "name: missing"},
};

/* the dgx-h100 preset and one key after it: PRE, then the text */
#define PRE "{\"preset\": \"dgx-h100\", "
static const BadFile BAD_KEYS[] = {
    /* typos: unknown keys, at any depth, and keys given twice */
    {"\"gpus_per_nod\": 8}", "gpus_per_nod: unknown key ... gpus_per_node"},
    {"\"inter_node\": {\"bandwith_gbps\": 4}}", "inter_node.bandwith_gbps: unknown key"
     " ... latency_us, bandwidth_gbps"},
    {"\"Name\": \"x\"}", "Name: unknown key"},
    {"\"nvme_gbps\": 1, \"nvme_gbps\": 2}", "nvme_gbps: duplicate key"},
    {"\"intra_node\": {\"latency_us\": 1, \"latency_us\": 1}}", "intra_node.latency_us: duplicate key"},
    /* wrong types */
    {"\"inter_node\": {\"bandwidth_gbps\": \"45\"}}", "inter_node.bandwidth_gbps: expected a number"
     " ... got \"45\""},
    {"\"inter_node\": 45}", "inter_node: expected an object, got 45"},
    {"\"nvme_gbps\": [3]}", "nvme_gbps: expected a number, got an array"},
    {"\"nvme_gbps\": null}", "nvme_gbps: expected a number, got null"},
    {"\"host_adam_gelems\": true}", "host_adam_gelems: expected a number, got true"},
    {"\"overlap\": 1}", "overlap: expected true or false, got 1"},
    {"\"name\": 5}", "name: expected a string ... got 5"},
    {"\"name\": \"\"}", "name: expected a string of 1 to 63 bytes"},
    {"\"name\": \"0123456789012345678901234567890123456789012345678901234567890123\"}",
     "name: expected a string of 1 to 63 bytes"},
    {"\"name\": \"a\\nb\"}", "name: expected a string of 1 to 63 bytes of printable UTF-8"},
    /* values: zero, negative, non-finite, out of range once scaled; the
       message quotes the number as the file wrote it */
    {"\"inter_node\": {\"bandwidth_gbps\": 0}}", "inter_node.bandwidth_gbps: expected a finite number > 0"
     " ... got 0"},
    {"\"nvme_gbps\": -3}", "nvme_gbps: expected a finite number > 0, got -3"},
    {"\"intra_node\": {\"latency_us\": -0.0}}", "intra_node.latency_us: expected a finite number > 0"
     " ... got -0.0"},
    {"\"device_tflops\": 1e999}", "device_tflops: expected a finite number > 0, got 1e999"},
    {"\"device_tflops\": 1e300}", "device_tflops: 1e300 is out of range once scaled to SI units"},
    {"\"intra_node\": {\"latency_us\": 1e-400}}", "intra_node.latency_us: expected a finite number > 0"
     " ... got 1e-400"},
    {"\"device_memory_gib\": 1e308}", "device_memory_gib: 1e308 is out of range once scaled"},
    {"\"intra_node\": {\"latency_us\": 1e-318}}", "intra_node.latency_us: 1e-318 is out of range"},
    /* gpus_per_node */
    {"\"gpus_per_node\": 0}", "gpus_per_node: expected an integer from 1 to 4096, got 0"},
    {"\"gpus_per_node\": 4097}", "gpus_per_node: expected an integer from 1 to 4096, got 4097"},
    {"\"gpus_per_node\": 8.5}", "gpus_per_node: expected an integer ... got 8.5"},
    {"\"gpus_per_node\": -8}", "gpus_per_node: expected an integer ... got -8"},
    {"\"gpus_per_node\": 1e99}", "gpus_per_node: expected an integer ... got 1e99"},
    {"\"gpus_per_node\": \"8\"}", "gpus_per_node: expected an integer ... got \"8\""},
};

/* the full file with one key's "KEY": VALUE text removed */
static char *full_without(const char *key_and_value) {
    const char *full = FULL_FILE;
    const char *at = strstr(full, key_and_value);
    assert_non_null(at);
    char *s = malloc(strlen(full) + 1);
    assert_non_null(s);
    size_t pre = (size_t)(at - full), n = strlen(key_and_value);
    memcpy(s, full, pre);
    strcpy(s + pre, at + n);
    return s;
}

static void assert_bad(const char *text, size_t len, const char *part1, const char *part2) {
    const char *path = zt_path("bad.json");
    zt_write_bytes(path, text, len);
    ZnMachine m, before;
    memset(&m, 0x5a, sizeof m);
    before = m;
    ZnErr err = {0};
    int rc = zn_machine_load(path, &m, &err);
    if (rc != ZN_E_USAGE) fail_msg("%.60s: rc %d (%s)", text, rc, err.msg);
    assert_str_contains(err.msg, path);
    assert_str_contains(err.msg, part1);
    if (part2) assert_str_contains(err.msg, part2);
    assert_memory_equal(&m, &before, sizeof m);   /* a failed load leaves m alone */
}

/* assert_bad of a BadFile's text and want */
static void bad_file(const char *text, const char *want) {
    const char *dots = strstr(want, " ... ");
    if (!dots) {
        assert_bad(text, strlen(text), want, NULL);
        return;
    }
    char part1[256];
    snprintf(part1, sizeof part1, "%.*s", (int)(dots - want), want);
    assert_bad(text, strlen(text), part1, dots + 5);
}

/* spec: Z-MACH-007 */
static void test_bad_files(void **state) {
    (void)state;
    for (size_t i = 0; i < ZT_LEN(BAD_FILES); i++) bad_file(BAD_FILES[i].text, BAD_FILES[i].want);
    for (size_t i = 0; i < ZT_LEN(BAD_KEYS); i++) {
        char text[256];
        snprintf(text, sizeof text, PRE "%s", BAD_KEYS[i].text);
        bad_file(text, BAD_KEYS[i].want);
    }
    /* a NUL byte in the text: the length is the file's, past it */
    assert_bad("{\"preset\": \"dgx-h100\"}\0{", 24, "at byte 22", "NUL byte");
}

/* spec: Z-MACH-007 */
static void test_full_file_missing_keys(void **state) {
    (void)state;
    struct { const char *cut; const char *path; } cases[] = {
        {"\"name\": \"my-node\", ", "name: missing"},
        {" \"device_tflops\": 593.6,", "device_tflops: missing"},
        {" \"device_memory_gib\": 80,", "device_memory_gib: missing"},
        {"\"latency_us\": 3, ", "intra_node.latency_us: missing"},
        {", \"bandwidth_gbps\": 45", "inter_node.bandwidth_gbps: missing"},
        {" \"intra_node\": {\"latency_us\": 3, \"bandwidth_gbps\": 360},", "intra_node: missing"},
        {", \"nvme_gbps\": 3.0", "nvme_gbps: missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = full_without(cases[i].cut);
        assert_bad(text, strlen(text), cases[i].path, "without \"preset\"");
        free(text);
    }
}

/* spec: Z-MACH-007 */
static void test_hostile_bytes(void **state) {
    (void)state;
    /* control bytes and invalid UTF-8 in an unknown key: one printable line */
    const char *key = PRE "\"a\\u0007\\n\xff\": 1}";
    assert_bad(key, strlen(key), "unknown key", NULL);
    /* a number of a thousand digits: scaled from its text, quoted shortened */
    char text[1200];
    int n = snprintf(text, sizeof text, PRE "\"nvme_gbps\": -");
    for (int i = 0; i < 1000; i++) text[n++] = (char)('1' + i % 9);
    snprintf(text + n, sizeof text - (size_t)n, "}");
    assert_bad(text, strlen(text), "nvme_gbps: expected a finite number > 0, got -1234", "...");
    /* deep nesting inside a known key */
    char deep[4200];
    n = snprintf(deep, sizeof deep, PRE "\"nvme_gbps\": ");
    for (int i = 0; i < 2000; i++) deep[n++] = '[';
    for (int i = 0; i < 2000; i++) deep[n++] = ']';
    snprintf(deep + n, sizeof deep - (size_t)n, "}");
    ZnMachine m;
    ZnErr err = {0};
    zt_write_text(zt_path("deep.json"), deep);
    assert_int_equal(zn_machine_load(zt_path("deep.json"), &m, &err), ZN_E_USAGE);   /* cJSON's nesting limit */
    assert_str_contains(err.msg, "JSON syntax error at byte");
}

ZT_MAIN_TMPDIR(
    cmocka_unit_test(test_preset_dgx_h100),
    cmocka_unit_test(test_preset_dgx_a100),
    cmocka_unit_test(test_preset_names),
    cmocka_unit_test(test_full_file),
    cmocka_unit_test(test_fp32_rate),
    cmocka_unit_test(test_override_one_key),
    cmocka_unit_test(test_units_scale_the_decimal),
    cmocka_unit_test(test_name_or_path),
    cmocka_unit_test(test_size_cap),
    cmocka_unit_test(test_presets_round_trip),
    cmocka_unit_test(test_odd_values_round_trip),
    cmocka_unit_test(test_written_form),
    cmocka_unit_test(test_write_refuses_invalid),
    cmocka_unit_test(test_bad_files),
    cmocka_unit_test(test_full_file_missing_keys),
    cmocka_unit_test(test_hostile_bytes))
