/* test_calibrate.c: `zinc calibrate` (spec Z-CAL-*): the machine file it
 * writes for the simulator's 1 and 2 ranks loads with zn_machine_load, its
 * figures finite and above loose lower bounds any machine meets (never
 * upper bounds: these are timings of a shared machine); its one line of
 * output; the refusals (exit 2 with a message) and an output folder that
 * does not exist (exit 1, no file). */
#include "testutil.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include "app/machine.h"

/* the figures of a calibrated machine: finite, > 0, above loose floors */
static void check_machine(const ZnMachine *m, int world) {
    assert_int_equal(m->gpus_per_node, world);
    const double v[] = {m->device_flops, m->device_mem_bw, m->device_memory, m->intra.alpha, m->intra.beta,
                        m->inter.alpha,  m->inter.beta,    m->h2d_bw,        m->host_adam_rate, m->nvme_bw};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || !(v[i] > 0)) fail_msg("figure %zu is %g", i, v[i]);
    assert_true(m->device_flops > 1e8);     /* 0.1 GFLOP/s */
    /* the host computes every dtype in fp32: one GEMM rate (Z-CAL-001) */
    assert_true(m->device_flops_fp32 == m->device_flops);
    assert_true(m->device_mem_bw > 1e8);    /* 0.1 GB/s */
    assert_true(m->device_memory > 1e7);    /* 10 MB a rank */
    assert_true(m->h2d_bw > 1e8);
    assert_true(m->host_adam_rate > 1e5);   /* elements/s */
    assert_true(m->intra.beta > 1e6);
    assert_true(m->nvme_bw > 1e6);
    /* one node: the link between nodes is the link inside it */
    assert_true(m->inter.alpha == m->intra.alpha && m->inter.beta == m->intra.beta);
}

static void calibrate_ok(int world) {
    const char *dir = zt_tmpdir();
    char path[512], ws[16], head[64];
    snprintf(path, sizeof path, "%s/m.json", dir);
    snprintf(ws, sizeof ws, "%d", world);
    /* under valgrind and the sanitizers one timing each (--quick): the same code */
    const char *argv[] = {"--world-size", ws, "-o", path, "--quick"};
    char *out, *errs;
    int rc = zt_capture(zn_cmd_calibrate, zt_light() ? 5 : 4, argv, &out, &errs);
    if (rc) fail_msg("calibrate --world-size %d: exit %d: %s", world, rc, errs);
    /* one line, naming the ranks and the backend */
    snprintf(head, sizeof head, "zinc calibrate: %d sim rank%s:", world, world > 1 ? "s" : "");
    assert_true(strncmp(out, head, strlen(head)) == 0);
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    assert_true(nl[1] == 0);
    assert_str_contains(out, path);
    ZnMachine m;
    ZnErr err = {0};
    if (zn_machine_load(path, &m, &err)) fail_msg("load %s: %s", path, err.msg);
    check_machine(&m, world);
    char name[64];
    snprintf(name, sizeof name, "calibrated-sim-%d", world);
    assert_string_equal(m.name, name);
    /* the disk probe leaves nothing behind: the folder holds only the file */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s')\" = m.json", dir);
    assert_int_equal(system(cmd), 0);
    free(out);
    free(errs);
    /* the file prices a plan of the same ranks (Z-CAL-005) */
    const char *pv[] = {"--model", "mlp:64,64,8", "--world-size", ws, "--steps", "1", "--machine", path, "--json"};
    assert_int_equal(zt_capture(zn_cmd_plan, 9, pv, &out, &errs), 0);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(doc, "time");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(tm, "machine")->valuestring, name);
    const double step = cJSON_GetObjectItemCaseSensitive(tm, "step_s")->valuedouble;
    assert_true(step > 0 && isfinite(step));
    cJSON_Delete(doc);
    free(out);
    free(errs);
    unlink(path);
}

/* spec: Z-CAL-001 */
/* spec: Z-CAL-002 */
/* spec: Z-CAL-005 */
static void test_two_sim_ranks(void **state) {
    (void)state;
    calibrate_ok(2);
}

/* spec: Z-CAL-001 */
/* spec: Z-CAL-002 */
static void test_one_sim_rank(void **state) {
    (void)state;
    calibrate_ok(1);
}

/* a refusal: exit 2, a message naming the command, nothing on stdout */
static void refused(int argc, const char *const *argv, const char *needle) {
    char *out, *errs;
    int rc = zt_capture(zn_cmd_calibrate, argc, argv, &out, &errs);
    if (rc != 2) fail_msg("exit %d, expected 2 (stderr: %s)", rc, errs);
    assert_str_contains(errs, "zinc calibrate: ");
    assert_str_contains(errs, needle);
    assert_string_equal(out, "");
    free(out);
    free(errs);
}

/* spec: Z-CAL-003 */
static void test_refusals(void **state) {
    (void)state;
    const char *path = zt_path("m.json");
    const char *no_o[] = {"--world-size", "2"};
    refused(2, no_o, "-o FILE.json is required");
    const char *unknown[] = {"--bogus", "-o", path};
    refused(3, unknown, "unknown flag --bogus");
    const char *zero[] = {"--world-size", "0", "-o", path};
    refused(4, zero, "--world-size");
    const char *big[] = {"--world-size", "5000", "-o", path};
    refused(4, big, "5000");
    const char *nccl[] = {"--backend", "nccl", "-o", path};
    refused(4, nccl, "nccl");
    const char *missing[] = {"-o"};
    refused(1, missing, "a value is missing after -o");
    /* no refusal wrote the file */
    assert_false(zt_file_exists(path));
}

/* spec: Z-CAL-004 */
static void test_missing_folder(void **state) {
    (void)state;
    const char *path = zt_path("no-such-folder/m.json");
    const char *argv[] = {"--world-size", "1", "-o", path};
    char *out, *errs;
    int rc = zt_capture(zn_cmd_calibrate, 4, argv, &out, &errs);
    if (rc != 1) fail_msg("exit %d, expected 1 (ZN_E_IO) (stderr: %s)", rc, errs);
    assert_str_contains(errs, "no-such-folder");
    assert_false(zt_file_exists(path));
    free(out);
    free(errs);
}

ZT_MAIN_TMPDIR(cmocka_unit_test(test_two_sim_ranks), cmocka_unit_test(test_one_sim_rank), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_missing_folder))
